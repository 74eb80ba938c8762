//! The page-cache index of one mapping, shaped like the kernel's (`address_space->page_tree`,
//! lib/radix-tree.c in 3.10): pages grouped in nodes of 64 slots (`RADIX_TREE_MAP_SHIFT` 6)
//! with a presence bitmap, and tags (dirty, writeback) as bitmaps over the same 64-page
//! groups, so the per-page operations of writers and writeback (look up, insert, tag, untag)
//! touch one node, and walks in index order (`find_get_pages_tag`, `pagevec_lookup_tag`) scan
//! bitmaps.
//!
//! Simplifications: one level of nodes found through a hash table on `index >> 6` (and the
//! last node found remembered), with the node keys kept sorted beside it for walks in index
//! order (the kernel's tree has as many levels as the largest index needs and finds nodes by
//! descending it). Deterministic: the
//! hash is a fixed function and no walk follows the hash table's order.

use std::cell::Cell;
use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

/// Slots per node: `RADIX_TREE_MAP_SIZE` = 1 << `RADIX_TREE_MAP_SHIFT` (6, lib/radix-tree.c).
const SHIFT: u32 = 6;
const SLOTS: u64 = 1 << SHIFT;
const MASK: u64 = SLOTS - 1;

/// A fixed multiplicative hash of a node key (Fibonacci hashing): no per-process random seed,
/// so a run's behaviour never depends on it.
#[derive(Default, Clone, Copy)]
pub struct NodeHasher(u64);

impl Hasher for NodeHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type NodeTable<N> = HashMap<u64, N, BuildHasherDefault<NodeHasher>>;

/// `last` when no node was found yet (no node key reaches it: keys are indexes >> 6).
const NO_KEY: u64 = u64::MAX;

/// 64 slots and which of them hold a value.
#[derive(Debug, Clone)]
struct Node<V> {
    present: u64,
    slots: [V; SLOTS as usize],
}

/// Page index -> `V` (a page id, a request id), ordered by index.
///
/// The nodes live in a slab (a freed node's place is reused) found through the hash table,
/// and the last node found is remembered: a walk page by page (a writer appending, writeback
/// going through a file) finds 63 of 64 pages' node without hashing.
#[derive(Debug, Clone)]
pub struct RadixMap<V: Copy + Default> {
    /// Node key -> its place in `slab`.
    nodes: NodeTable<u32>,
    slab: Vec<Node<V>>,
    /// Places in `slab` no node uses.
    free: Vec<u32>,
    keys: BTreeSet<u64>,
    len: usize,
    /// (key, place) of the last node found, or `NO_KEY`.
    last: Cell<(u64, u32)>,
}

impl<V: Copy + Default> Default for RadixMap<V> {
    fn default() -> Self {
        RadixMap {
            nodes: NodeTable::default(),
            slab: Vec::new(),
            free: Vec::new(),
            keys: BTreeSet::new(),
            len: 0,
            last: Cell::new((NO_KEY, 0)),
        }
    }
}

impl<V: Copy + Default> RadixMap<V> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The place in `slab` of node `key`, if it exists.
    fn place(&self, key: u64) -> Option<usize> {
        let (last_key, last_place) = self.last.get();
        if last_key == key {
            return Some(last_place as usize);
        }
        let place = *self.nodes.get(&key)?;
        self.last.set((key, place));
        Some(place as usize)
    }

    /// `radix_tree_lookup`.
    pub fn get(&self, index: u64) -> Option<V> {
        let node = &self.slab[self.place(index >> SHIFT)?];
        let bit = 1u64 << (index & MASK);
        (node.present & bit != 0).then(|| node.slots[(index & MASK) as usize])
    }

    pub fn contains_key(&self, index: u64) -> bool {
        self.get(index).is_some()
    }

    /// `radix_tree_insert` (or replace): the previous value, if any.
    pub fn insert(&mut self, index: u64, value: V) -> Option<V> {
        let place = self.place_or_new(index >> SHIFT);
        let node = &mut self.slab[place];
        let slot = (index & MASK) as usize;
        let bit = 1u64 << slot;
        let previous = (node.present & bit != 0).then(|| node.slots[slot]);
        node.present |= bit;
        node.slots[slot] = value;
        if previous.is_none() {
            self.len += 1;
        }
        previous
    }

    /// `radix_tree_insert` proper: `value` at `index` only if nothing is there (one node
    /// lookup for the check and the insertion); whether it was added.
    pub fn insert_if_vacant(&mut self, index: u64, value: V) -> bool {
        let place = self.place_or_new(index >> SHIFT);
        let node = &mut self.slab[place];
        let slot = (index & MASK) as usize;
        let bit = 1u64 << slot;
        if node.present & bit != 0 {
            return false;
        }
        node.present |= bit;
        node.slots[slot] = value;
        self.len += 1;
        true
    }

    /// The place in `slab` of node `key`, created empty if it does not exist.
    fn place_or_new(&mut self, key: u64) -> usize {
        match self.place(key) {
            Some(place) => place,
            None => {
                let empty = Node {
                    present: 0,
                    slots: [V::default(); SLOTS as usize],
                };
                let place = match self.free.pop() {
                    Some(place) => {
                        self.slab[place as usize] = empty;
                        place
                    }
                    None => {
                        self.slab.push(empty);
                        u32::try_from(self.slab.len() - 1).expect("fewer than 2^32 nodes")
                    }
                };
                self.nodes.insert(key, place);
                self.keys.insert(key);
                self.last.set((key, place));
                place as usize
            }
        }
    }

    /// `radix_tree_delete`: an emptied node is freed.
    pub fn remove(&mut self, index: u64) -> Option<V> {
        let key = index >> SHIFT;
        let place = self.place(key)?;
        let node = &mut self.slab[place];
        let slot = (index & MASK) as usize;
        let bit = 1u64 << slot;
        if node.present & bit == 0 {
            return None;
        }
        node.present &= !bit;
        let value = node.slots[slot];
        if node.present == 0 {
            self.nodes.remove(&key);
            self.keys.remove(&key);
            self.free.push(place as u32);
            self.last.set((NO_KEY, 0));
        }
        self.len -= 1;
        Some(value)
    }

    /// How many consecutive indexes from `index` on hold an entry, at most `max`: a node's
    /// presence bitmap at a time.
    pub fn run_len(&self, index: u64, max: u64) -> u64 {
        let mut run = 0u64;
        let mut at = index;
        while run < max {
            let Some(place) = self.place(at >> SHIFT) else {
                break;
            };
            let slot = at & MASK;
            // Present slots from `slot` on, then how many of them are consecutive.
            let ones = u64::from((!(self.slab[place].present >> slot)).trailing_zeros());
            let ones = ones.min(SLOTS - slot);
            run += ones;
            if slot + ones < SLOTS {
                break;
            }
            match at.checked_add(ones) {
                Some(next) => at = next,
                None => break,
            }
        }
        run.min(max)
    }

    /// Entries with `first <= index <= last`, in index order.
    pub fn range(&self, first: u64, last: u64) -> impl Iterator<Item = (u64, V)> + '_ {
        let keys = if first > last {
            self.keys.range(1..1)
        } else {
            self.keys.range(first >> SHIFT..=last >> SHIFT)
        };
        keys.flat_map(move |&key| {
            let node = &self.slab[self.nodes[&key] as usize];
            let bits = node.present & window(key, first, last);
            Bits(bits).map(move |slot| ((key << SHIFT) | slot, node.slots[slot as usize]))
        })
    }

    /// Calls `f` on the value of every entry with `first <= index <= last`, in index order.
    pub fn for_each_mut(&mut self, first: u64, last: u64, mut f: impl FnMut(u64, &mut V)) {
        if first > last {
            return;
        }
        for &key in self.keys.range(first >> SHIFT..=last >> SHIFT) {
            let node = &mut self.slab[self.nodes[&key] as usize];
            for slot in Bits(node.present & window(key, first, last)) {
                f((key << SHIFT) | slot, &mut node.slots[slot as usize]);
            }
        }
    }

    /// Every entry, in index order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, V)> + '_ {
        self.range(0, u64::MAX)
    }

    /// Every index, in order.
    pub fn keys(&self) -> impl Iterator<Item = u64> + '_ {
        self.iter().map(|(index, _)| index)
    }
}

/// A set of page indexes (a radix tree tag), ordered.
#[derive(Debug, Clone, Default)]
pub struct RadixSet {
    map: RadixMap<()>,
}

impl RadixSet {
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn contains(&self, index: u64) -> bool {
        self.map.contains_key(index)
    }

    /// `radix_tree_tag_set`: whether the index was not tagged before.
    pub fn insert(&mut self, index: u64) -> bool {
        self.map.insert(index, ()).is_none()
    }

    /// `radix_tree_tag_clear`: whether the index was tagged.
    pub fn remove(&mut self, index: u64) -> bool {
        self.map.remove(index).is_some()
    }

    pub fn clear(&mut self) {
        *self = RadixSet::default();
    }

    /// How many consecutive indexes from `index` on are tagged, at most `max`.
    pub fn run_len(&self, index: u64, max: u64) -> u64 {
        self.map.run_len(index, max)
    }

    /// Tagged indexes with `first <= index <= last`, in order (`radix_tree_gang_lookup_tag`).
    pub fn range(&self, first: u64, last: u64) -> impl Iterator<Item = u64> + '_ {
        self.map.range(first, last).map(|(index, ())| index)
    }

    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.map.keys()
    }
}

/// The slots of node `key` that lie within `[first, last]`, as a bitmap.
fn window(key: u64, first: u64, last: u64) -> u64 {
    let base = key << SHIFT;
    if last < base || first > base + MASK {
        return 0;
    }
    let low = first.saturating_sub(base);
    let high = if last < base + MASK {
        last - base
    } else {
        MASK
    };
    if low > high {
        return 0;
    }
    let upto = if high == MASK {
        u64::MAX
    } else {
        (1u64 << (high + 1)) - 1
    };
    upto & !((1u64 << low) - 1)
}

/// The set bits of a bitmap, lowest first.
struct Bits(u64);

impl Iterator for Bits {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        if self.0 == 0 {
            return None;
        }
        let slot = self.0.trailing_zeros() as u64;
        self.0 &= self.0 - 1;
        Some(slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[test]
    fn windows_cover_exactly_the_slots_in_range() {
        assert_eq!(window(0, 0, u64::MAX), u64::MAX);
        assert_eq!(window(1, 0, 63), 0);
        assert_eq!(window(1, 64, 64), 1);
        assert_eq!(window(1, 70, 71), 0b11 << 6);
        assert_eq!(window(2, 100, 200), u64::MAX);
        assert_eq!(window(2, 130, 140), ((1u64 << 11) - 1) << 2);
        assert_eq!(window(2, 191, u64::MAX), 1 << 63);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u64, u32),
        Remove(u64),
        Range(u64, u64),
        Get(u64),
        Bump(u64, u64),
        Run(u64, u64),
        Fill(u64, u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        // Indexes clustered (neighbouring slots and nodes) with a few far ones.
        let index = prop_oneof![4 => 0u64..400, 1 => any::<u64>()];
        prop_oneof![
            3 => (index.clone(), any::<u32>()).prop_map(|(i, v)| Op::Insert(i, v)),
            2 => index.clone().prop_map(Op::Remove),
            1 => (index.clone(), index.clone()).prop_map(|(a, b)| Op::Range(a, b)),
            2 => index.clone().prop_map(Op::Get),
            1 => (index.clone(), index.clone()).prop_map(|(a, b)| Op::Bump(a, b)),
            2 => (index, 0u64..200).prop_map(|(i, max)| Op::Run(i, max)),
            // Long runs across nodes, for Run.
            1 => (0u64..400, 0u64..150).prop_map(|(i, n)| Op::Fill(i, n)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 256,
            failure_persistence: None,
            rng_seed: proptest::test_runner::RngSeed::Fixed(0x7261_6469),
            ..ProptestConfig::default()
        })]

        /// Every operation agrees with a BTreeMap and a BTreeSet.
        #[test]
        fn behaves_as_an_ordered_map_and_set(ops in proptest::collection::vec(op(), 1..300)) {
            let mut map: RadixMap<u32> = RadixMap::default();
            let mut set = RadixSet::default();
            let mut reference: BTreeMap<u64, u32> = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Insert(i, v) => {
                        let was = reference.contains_key(&i);
                        prop_assert_eq!(set.contains(i), was);
                        if v % 2 == 0 {
                            prop_assert_eq!(map.insert(i, v), reference.insert(i, v));
                        } else {
                            prop_assert_eq!(map.insert_if_vacant(i, v), !was);
                            reference.entry(i).or_insert(v);
                        }
                        prop_assert_eq!(set.insert(i), !was);
                    }
                    Op::Remove(i) => {
                        let was = reference.contains_key(&i);
                        prop_assert_eq!(map.remove(i), reference.remove(&i));
                        prop_assert_eq!(set.remove(i), was);
                    }
                    Op::Range(a, b) => {
                        let got: Vec<(u64, u32)> = map.range(a, b).collect();
                        let want: Vec<(u64, u32)> = if a <= b {
                            reference.range(a..=b).map(|(&k, &v)| (k, v)).collect()
                        } else {
                            Vec::new()
                        };
                        prop_assert_eq!(got, want);
                    }
                    Op::Get(i) => {
                        prop_assert_eq!(map.get(i), reference.get(&i).copied());
                        prop_assert_eq!(set.contains(i), reference.contains_key(&i));
                    }
                    Op::Bump(a, b) => {
                        let mut seen = Vec::new();
                        map.for_each_mut(a, b, |i, v| {
                            *v = v.wrapping_add(1);
                            seen.push(i);
                        });
                        let mut want = Vec::new();
                        if a <= b {
                            for (&k, v) in reference.range_mut(a..=b) {
                                *v = v.wrapping_add(1);
                                want.push(k);
                            }
                        }
                        prop_assert_eq!(seen, want);
                    }
                    Op::Fill(first, n) => {
                        for i in first..first + n {
                            prop_assert_eq!(map.insert(i, 7), reference.insert(i, 7));
                            set.insert(i);
                        }
                    }
                    Op::Run(i, max) => {
                        let want = (i..=u64::MAX)
                            .take(max as usize)
                            .take_while(|k| reference.contains_key(k))
                            .count() as u64;
                        prop_assert_eq!(map.run_len(i, max), want);
                        prop_assert_eq!(set.run_len(i, max), want);
                    }
                }
                prop_assert_eq!(map.len(), reference.len());
                prop_assert_eq!(set.len(), reference.len());
                prop_assert_eq!(map.is_empty(), reference.is_empty());
            }
            let all: Vec<(u64, u32)> = map.iter().collect();
            let want: Vec<(u64, u32)> = reference.iter().map(|(&k, &v)| (k, v)).collect();
            prop_assert_eq!(all, want);
            let keys: Vec<u64> = set.iter().collect();
            prop_assert_eq!(keys, reference.keys().copied().collect::<Vec<_>>());
            for (&i, &v) in &reference {
                prop_assert_eq!(map.get(i), Some(v));
            }
        }
    }
}
