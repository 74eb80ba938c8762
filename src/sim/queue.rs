//! The engine's event queue: a hierarchical timing wheel of exact times (eight levels of 256
//! slots) over a slab of events linked in lists.
//!
//! Order: the earliest time first and, among equal times, the first pushed first. The order is
//! total, so any correct priority queue pops exactly the same events in exactly the same order;
//! this one only does less work per event than the ladder queue it replaced (results
//! unchanged).
//!
//! Design:
//! - the queue keeps `cur`, the time of the last pop (0 before any): every pending time is at
//!   or after it (the engine pushes nothing before the present, and the present is at or after
//!   the last event popped). A time is written in base 256, digit `i` being bits `8i..8i+8`;
//! - an event of time `t` sits at *level* `L`, the highest digit in which `t` differs from `cur`
//!   (0 when `t == cur`), in slot `L`'s digit of `t`. Every time at level 0 has all of `cur`'s
//!   digits but the last, so a level-0 slot holds one time; a time at level `L` is greater than
//!   every time at lower levels (it has the larger digit `L`, they have `cur`'s);
//! - a slot is a list of the slab's events linked through `next`, appended at its tail: so the
//!   events of one time, which always sit in the same slot, stay in push order, and a level-0
//!   slot pops its head. Each level has a map of its non-empty slots (four words and a bit per
//!   non-empty word), and a map of the non-empty levels sits above them: the earliest event is
//!   the head of level 0's least slot, found with two `trailing_zeros`;
//! - when level 0 is empty, the least slot of the least non-empty level is unlinked and `cur`
//!   moves to its earliest time (kept per slot: `mins`); its events are linked again from head
//!   to tail, now at lower levels (stably, so push order within a time is kept), the earliest
//!   at level 0. A slot that holds one time only (not `mixed`) becomes level 0's list as it
//!   is. The other slots keep their levels: their digits above `L` are still `cur`'s, their
//!   digit `L` still differs.
//!
//! So a push is an append, a pop takes a list's head, and an event moves down a level at most
//! once per level it starts above 0: one move for times less than 65.5 us ahead of the last
//! pop (`examples/engine_bench timer`: 1 to 8 us), two up to 16.8 ms. No time is compared with
//! another except for the per-slot minimum; `peek_time` reads the maps and moves nothing.
//!
//! Limits: at most 2^24 events pending (the engine's `MAX_PENDING_EVENTS`; slab indices are
//! `u32`). Freed slab entries are reused last-in first-out through the same `next` links, so the
//! slab stays as large as the most events ever pending at once and its hot end stays in cache.
//! The fixed part is 8 x 256 slots of a list (8 bytes) and a minimum (8 bytes), 32 KiB, of
//! which a run touches the few slots near the present; an event costs its payload plus 16
//! bytes. A push before `cur` is a caller's bug (checked in debug builds; the engine asserts
//! that no event is scheduled in the past).

use crate::units::Nanos;

/// Bits of time per level: 256 slots, a map of four `u64` words per level.
const LEVEL_BITS: u32 = 8;
const SLOTS: usize = 1 << LEVEL_BITS;
const WORDS: usize = SLOTS / 64;
/// Levels enough for every `u64` time.
const LEVELS: usize = 64 / LEVEL_BITS as usize;
/// Slab entries available: the most events that can be pending at once.
pub const MAX_SLOTS: usize = 1 << 24;
/// No entry (an empty free list).
const NIL: u32 = u32::MAX;

/// The level of a time `t` given `t ^ cur`: the index of its highest differing digit.
#[inline(always)]
fn level_of(differing: u64) -> usize {
    ((63 - (differing | 1).leading_zeros()) / LEVEL_BITS) as usize
}

/// The slot of `time` at `level`: that digit of the time.
#[inline(always)]
fn slot_of(time: Nanos, level: usize) -> usize {
    ((time >> (level as u32 * LEVEL_BITS)) as usize) & (SLOTS - 1)
}

/// One event in the slab: its time, the next event of its slot's list (or of the free list),
/// and the payload (`None` while the entry is free).
#[derive(Debug)]
struct Entry<T> {
    time: Nanos,
    next: u32,
    item: Option<T>,
}

/// A slot's list: its first and last entries (meaningless while the slot's bit is clear). The
/// last entry's `next` is meaningless too: the list ends at `tail`.
#[derive(Debug, Clone, Copy)]
struct List {
    head: u32,
    tail: u32,
}

/// Which slots of one level hold events: a bit per slot in four words, and a bit per non-empty
/// word.
#[derive(Debug, Clone, Copy, Default)]
struct SlotMap {
    words: u32,
    bits: [u64; WORDS],
}

impl SlotMap {
    #[inline(always)]
    fn is_empty(&self) -> bool {
        self.words == 0
    }

    /// The least slot set; the map is not empty.
    #[inline(always)]
    fn first(&self) -> usize {
        let word = self.words.trailing_zeros() as usize;
        word * 64 + self.bits[word].trailing_zeros() as usize
    }

    #[inline(always)]
    fn contains(&self, slot: usize) -> bool {
        self.bits[slot / 64] >> (slot % 64) & 1 == 1
    }

    #[inline(always)]
    fn insert(&mut self, slot: usize) {
        self.bits[slot / 64] |= 1 << (slot % 64);
        self.words |= 1 << (slot / 64);
    }

    #[inline(always)]
    fn remove(&mut self, slot: usize) {
        let word = &mut self.bits[slot / 64];
        *word &= !(1 << (slot % 64));
        if *word == 0 {
            self.words &= !(1 << (slot / 64));
        }
    }
}

/// What [`EventQueue::pop_until`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Popped<T> {
    /// No event is pending.
    Empty,
    /// The earliest event is after the limit (it stays).
    Later,
    /// The earliest event, removed: (time, item).
    Event(Nanos, T),
}

/// A min-queue of `T` ordered by time, then by push order.
#[derive(Debug)]
pub struct EventQueue<T> {
    entries: Vec<Entry<T>>,
    /// The first free entry (`NIL`: none), the others linked through `next`.
    free: u32,
    /// Pending events.
    len: usize,
    /// The time of the last pop: every pending time is at or after it.
    cur: Nanos,
    /// Bit `L` set: level `L` has a non-empty slot (bit 0 is not kept: level 0 is read from
    /// its map directly).
    levels: u32,
    /// Per level, the non-empty slots.
    maps: [SlotMap; LEVELS],
    /// Per level, the slots above level 0 holding more than one time (a slot of one time moves
    /// to level 0 as a whole list).
    mixed: [SlotMap; LEVELS],
    lists: [[List; SLOTS]; LEVELS],
    /// Per slot of levels above 0, the earliest time in it (where `cur` moves when it is
    /// unlinked; a level-0 slot holds one time).
    mins: [[Nanos; SLOTS]; LEVELS],
}

impl<T> Default for EventQueue<T> {
    fn default() -> Self {
        EventQueue {
            entries: Vec::new(),
            free: NIL,
            len: 0,
            cur: 0,
            levels: 0,
            maps: [SlotMap::default(); LEVELS],
            mixed: [SlotMap::default(); LEVELS],
            lists: [[List {
                head: NIL,
                tail: NIL,
            }; SLOTS]; LEVELS],
            mins: [[0; SLOTS]; LEVELS],
        }
    }
}

impl<T> EventQueue<T> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Pending events.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// The time of the event that pops next.
    #[inline]
    pub fn peek_time(&self) -> Option<Nanos> {
        if !self.maps[0].is_empty() {
            // A level-0 slot holds the one time with `cur`'s upper digits and the slot's digit.
            let slot = self.maps[0].first() as u64;
            return Some((self.cur & !(SLOTS as u64 - 1)) | slot);
        }
        let above = self.levels & !1;
        if above == 0 {
            return None;
        }
        let level = above.trailing_zeros() as usize;
        Some(self.mins[level][self.maps[level].first()])
    }

    /// Adds `item` at `time` (not before the last pop), after every pending event of the same
    /// time.
    ///
    /// Always inlined (into the engine's one push site): as a call it cost a timer event about
    /// 18 instructions of saved registers (cachegrind, `examples/engine_bench timer`).
    #[inline(always)]
    pub fn push(&mut self, time: Nanos, item: T) {
        debug_assert!(time >= self.cur, "a push before the last pop");
        let index = if self.free != NIL {
            let index = self.free;
            let entry = &mut self.entries[index as usize];
            debug_assert!(entry.item.is_none(), "a free entry is empty");
            self.free = entry.next;
            entry.time = time;
            entry.item = Some(item);
            index
        } else {
            self.grow(time, item)
        };
        self.len += 1;
        self.link(index, time);
    }

    /// A new slab entry holding `item` (none was free).
    #[cold]
    fn grow(&mut self, time: Nanos, item: T) -> u32 {
        assert!(
            self.entries.len() < MAX_SLOTS,
            "more than {MAX_SLOTS} pending events"
        );
        self.entries.push(Entry {
            time,
            next: NIL,
            item: Some(item),
        });
        (self.entries.len() - 1) as u32
    }

    /// Removes and returns the earliest event if its time is at or before `limit`: what
    /// `peek_time` then `pop` do, finding the earliest slot once.
    #[inline]
    pub fn pop_until(&mut self, limit: Nanos) -> Popped<T> {
        if self.maps[0].is_empty() {
            let above = self.levels & !1;
            if above == 0 {
                return Popped::Empty;
            }
            let level = above.trailing_zeros() as usize;
            if self.mins[level][self.maps[level].first()] > limit {
                return Popped::Later;
            }
            self.cascade();
        }
        let slot = self.maps[0].first();
        // A level-0 slot holds the one time with `cur`'s upper digits and the slot's digit.
        if (self.cur & !(SLOTS as u64 - 1)) | slot as u64 > limit {
            return Popped::Later;
        }
        let (time, item) = self.pop_slot(slot);
        Popped::Event(time, item)
    }

    /// Removes and returns the earliest event: (time, item). (The engine pops with
    /// `pop_until`; the tests check both.)
    #[cfg(test)]
    pub fn pop(&mut self) -> Option<(Nanos, T)> {
        if self.maps[0].is_empty() {
            if self.levels & !1 == 0 {
                return None;
            }
            self.cascade();
        }
        let slot = self.maps[0].first();
        Some(self.pop_slot(slot))
    }

    /// Removes and returns the head of level 0's `slot`, its least non-empty slot.
    #[inline(always)]
    fn pop_slot(&mut self, slot: usize) -> (Nanos, T) {
        let list = &mut self.lists[0][slot];
        let index = list.head;
        let entry = &mut self.entries[index as usize];
        if index == list.tail {
            self.maps[0].remove(slot);
        } else {
            list.head = entry.next;
        }
        let time = entry.time;
        let item = entry.item.take().expect("a linked entry holds an event");
        entry.next = self.free;
        self.free = index;
        self.len -= 1;
        self.cur = time;
        (time, item)
    }

    /// Appends entry `index` of `time` to the tail of its slot's list.
    #[inline(always)]
    fn link(&mut self, index: u32, time: Nanos) {
        let level = level_of(time ^ self.cur);
        let slot = slot_of(time, level);
        let list = &mut self.lists[level][slot];
        if !self.maps[level].contains(slot) {
            self.maps[level].insert(slot);
            self.levels |= 1 << level;
            list.head = index;
            if level > 0 {
                self.mins[level][slot] = time;
                self.mixed[level].remove(slot);
            }
        } else {
            self.entries[list.tail as usize].next = index;
            // A level-0 slot holds one time; above, a second time makes the slot mixed.
            let min = &mut self.mins[level][slot];
            if level > 0 && time != *min {
                self.mixed[level].insert(slot);
                *min = (*min).min(time);
            }
        }
        list.tail = index;
    }

    /// Level 0 is empty and a level above is not: unlinks the least slot of the least such
    /// level, moves `cur` to its earliest time and links its events again, from head to tail,
    /// at lower levels (the earliest at level 0). A slot of one time moves to level 0 whole.
    #[inline(never)]
    fn cascade(&mut self) {
        debug_assert!(self.maps[0].is_empty() && self.levels & !1 != 0);
        let level = (self.levels & !1).trailing_zeros() as usize;
        let slot = self.maps[level].first();
        self.maps[level].remove(slot);
        if self.maps[level].is_empty() {
            self.levels &= !(1 << level);
        }
        let List { head, tail } = self.lists[level][slot];
        self.cur = self.mins[level][slot];
        if !self.mixed[level].contains(slot) {
            // Every event has time `cur`: the list is level 0's, in the same order.
            let to = slot_of(self.cur, 0);
            self.lists[0][to] = List { head, tail };
            self.maps[0].insert(to);
            return;
        }
        if level == 1 {
            self.level_one_down(head, tail);
            return;
        }
        let mut index = head;
        loop {
            let (time, next) = {
                let entry = &self.entries[index as usize];
                (entry.time, entry.next)
            };
            debug_assert!(level_of(time ^ self.cur) < level, "an event moves down");
            self.link(index, time);
            if index == tail {
                break;
            }
            index = next;
        }
        debug_assert!(!self.maps[0].is_empty(), "the earliest event is at level 0");
    }

    /// Links the list `head..=tail` of a level-1 slot (just unlinked, `cur` moved to its
    /// earliest time) at level 0, in order: every one of its times has all of `cur`'s digits
    /// but the last, so the slot is that digit and no level is computed. The usual move: a
    /// time less than 65.5 us ahead starts at level 1 or 0.
    #[inline(always)]
    fn level_one_down(&mut self, head: u32, tail: u32) {
        let mut index = head;
        loop {
            let (time, next) = {
                let entry = &self.entries[index as usize];
                (entry.time, entry.next)
            };
            debug_assert_eq!(level_of(time ^ self.cur), 0, "a level-1 event moves to 0");
            let slot = slot_of(time, 0);
            let list = &mut self.lists[0][slot];
            if self.maps[0].contains(slot) {
                self.entries[list.tail as usize].next = index;
            } else {
                self.maps[0].insert(slot);
                list.head = index;
            }
            list.tail = index;
            if index == tail {
                break;
            }
            index = next;
        }
    }

    /// Checks the wheel's invariants (tests).
    #[cfg(test)]
    fn check(&self) {
        let mut count = 0;
        for level in 0..LEVELS {
            let map = &self.maps[level];
            for word in 0..WORDS {
                assert_eq!(map.words >> word & 1 == 1, map.bits[word] != 0);
            }
            if level > 0 {
                assert_eq!(self.levels >> level & 1 == 1, !map.is_empty());
            }
            for slot in 0..SLOTS {
                if !map.contains(slot) {
                    continue;
                }
                let List { head, tail } = self.lists[level][slot];
                let mut index = head;
                let (mut min, mut max) = (Nanos::MAX, 0);
                loop {
                    let entry = &self.entries[index as usize];
                    assert!(entry.item.is_some(), "a linked entry holds an event");
                    assert!(entry.time >= self.cur);
                    assert_eq!(level_of(entry.time ^ self.cur), level);
                    assert_eq!(slot_of(entry.time, level), slot);
                    min = min.min(entry.time);
                    max = max.max(entry.time);
                    count += 1;
                    if index == tail {
                        break;
                    }
                    index = entry.next;
                }
                if level > 0 {
                    assert_eq!(self.mins[level][slot], min);
                    if min != max {
                        assert!(
                            self.mixed[level].contains(slot),
                            "a slot of two times is mixed"
                        );
                    }
                } else {
                    assert_eq!(min, max, "a level-0 slot holds one time");
                }
            }
        }
        assert_eq!(count, self.len);
        let mut free = 0;
        let mut index = self.free;
        while index != NIL {
            assert!(self.entries[index as usize].item.is_none());
            free += 1;
            index = self.entries[index as usize].next;
        }
        assert_eq!(free + self.len, self.entries.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::cmp::Reverse;
    use std::collections::{BTreeMap, BinaryHeap};

    /// A small deterministic generator (the tests need no seeded stream of the engine).
    fn next(state: &mut u64) -> u64 {
        *state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *state >> 33
    }

    #[test]
    fn pops_in_time_then_push_order_like_a_binary_heap() {
        // Interleaved pushes and pops with many equal times, checked against `BinaryHeap`.
        for (spread, burst) in [
            (1u64, 40),
            (3, 40),
            (50, 40),
            (1_000_000, 40),
            (1, 60),
            (3, 60),
        ] {
            let mut state = spread + burst;
            let mut queue = EventQueue::new();
            // Bursts of 40 pops let the queue grow to about 2,000 events; of 60, it drains
            // every 97 rounds.
            let mut reference = BinaryHeap::new();
            let mut seq = 0u64;
            let mut now = 0u64;
            for round in 0..20_000 {
                let pushes = next(&mut state) % 4;
                for _ in 0..pushes {
                    let time = now + next(&mut state) % spread;
                    queue.push(time, seq * 10);
                    reference.push(Reverse((time, seq)));
                    seq += 1;
                }
                let pops = if round % 97 == 0 {
                    burst
                } else {
                    next(&mut state) % 3
                };
                for _ in 0..pops {
                    let expected = reference.pop().map(|Reverse(k)| k);
                    let got = queue.pop();
                    assert_eq!(got.map(|(t, item)| (t, item / 10)), expected);
                    if let Some((time, _)) = got {
                        assert!(time >= now, "never earlier than the last pop");
                        now = time;
                    }
                    assert_eq!(queue.len(), reference.len());
                    assert_eq!(
                        queue.peek_time(),
                        reference.peek().map(|Reverse((t, _))| *t),
                        "peek agrees"
                    );
                }
            }
            while let Some(Reverse(expected)) = reference.pop() {
                assert_eq!(queue.pop().map(|(t, item)| (t, item / 10)), Some(expected));
            }
            assert_eq!(queue.len(), 0);
            assert!(queue.pop().is_none());
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// Push at the current time plus this.
        Push(u64),
        Pop,
        /// `pop_until` the current time plus this.
        PopUntil(u64),
        /// Push `count` events at the current time plus `delta`, `delta + step`, ...
        Burst {
            count: usize,
            delta: u64,
            step: u64,
        },
    }

    fn delta() -> impl Strategy<Value = u64> {
        prop_oneof![
            3 => Just(0u64),
            3 => 0u64..16,
            4 => 0u64..10_000,
            1 => 0u64..(1 << 40),
            1 => any::<u64>(),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            5 => delta().prop_map(Op::Push),
            5 => Just(Op::Pop),
            3 => delta().prop_map(Op::PopUntil),
            1 => (1usize..300, delta(), prop_oneof![Just(0u64), 0u64..100, any::<u64>()])
                .prop_map(|(count, delta, step)| Op::Burst { count, delta, step }),
        ]
    }

    fn boundary_delta() -> impl Strategy<Value = u64> {
        (0u32..8, 0u64..3, 0u64..4).prop_map(|(level, side, times)| {
            (1u64 << (8 * level))
                .saturating_mul(times)
                .saturating_add(side)
                .saturating_sub(1)
        })
    }

    fn boundary_op() -> impl Strategy<Value = Op> {
        prop_oneof![
            5 => boundary_delta().prop_map(Op::Push),
            5 => Just(Op::Pop),
            3 => boundary_delta().prop_map(Op::PopUntil),
            1 => (1usize..100, boundary_delta(), prop_oneof![Just(0u64), 0u64..70, boundary_delta()])
                .prop_map(|(count, delta, step)| Op::Burst { count, delta, step }),
        ]
    }

    /// Runs `ops` on a queue and on a `BTreeMap` of (time, push number), checking every pop,
    /// peek and length and the queue's invariants, then drains both.
    fn agrees_with_a_sorted_map(ops: &[Op]) {
        let mut queue = EventQueue::new();
        let mut reference: BTreeMap<(u64, u64), u64> = BTreeMap::new();
        let (mut now, mut seq) = (0u64, 0u64);
        let mut push = |queue: &mut EventQueue<u64>, reference: &mut BTreeMap<_, _>, time| {
            queue.push(time, seq);
            reference.insert((time, seq), seq);
            seq += 1;
        };
        for op in ops {
            match *op {
                Op::Push(delta) => push(&mut queue, &mut reference, now.saturating_add(delta)),
                Op::Burst { count, delta, step } => {
                    let mut time = now.saturating_add(delta);
                    for _ in 0..count {
                        push(&mut queue, &mut reference, time);
                        time = time.saturating_add(step);
                    }
                }
                Op::Pop => {
                    let expected = reference.pop_first().map(|((time, _), item)| (time, item));
                    assert_eq!(queue.pop(), expected);
                    if let Some((time, _)) = expected {
                        now = time;
                    }
                }
                Op::PopUntil(delta) => {
                    let limit = now.saturating_add(delta);
                    let expected = match reference.first_key_value() {
                        None => Popped::Empty,
                        Some((&(time, _), _)) if time > limit => Popped::Later,
                        Some(_) => {
                            let ((time, _), item) = reference.pop_first().unwrap();
                            now = time;
                            Popped::Event(time, item)
                        }
                    };
                    assert_eq!(queue.pop_until(limit), expected);
                }
            }
            queue.check();
            assert_eq!(queue.len(), reference.len());
            assert_eq!(queue.peek_time(), reference.keys().next().map(|&(t, _)| t));
        }
        while let Some(((time, _), item)) = reference.pop_first() {
            assert_eq!(queue.pop(), Some((time, item)));
        }
        assert_eq!(queue.pop(), None);
        queue.check();
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 256,
            failure_persistence: None,
            rng_seed: proptest::test_runner::RngSeed::Fixed(0x6c61_6464),
            ..ProptestConfig::default()
        })]

        /// Pops agree with a sorted map of (time, push number): equal times, pushes at the
        /// current time, far-future times (up to `u64::MAX`), bursts of hundreds pending.
        #[test]
        fn pops_in_the_order_of_a_sorted_map(ops in proptest::collection::vec(op(), 1..400)) {
            agrees_with_a_sorted_map(&ops);
        }

        /// The same with times around the levels' boundaries (256^k ns from the present, and
        /// one either side), where events move down a level.
        #[test]
        fn pops_in_order_across_level_boundaries(
            ops in proptest::collection::vec(boundary_op(), 1..400)
        ) {
            agrees_with_a_sorted_map(&ops);
        }
    }

    #[test]
    fn large_blocks_of_one_time_and_pushes_before_them() {
        // A small top sorted into the bottom, then pushes of mixed times into the bottom's range
        // (which grow it into a rung); a block of one time, pushes before it and at it; the
        // greatest time; then pushes and pops around many pending.
        let ops: Vec<Op> = [
            vec![
                Op::Burst {
                    count: 40,
                    delta: 0,
                    step: 1000,
                },
                Op::Pop,
            ],
            (0..200).map(|i| Op::Push(i * 7 % 5000)).collect(),
            vec![Op::Burst {
                count: 2000,
                delta: 100_000,
                step: 0,
            }],
            (0..300).map(|_| Op::Pop).collect(),
            vec![Op::Push(0), Op::Push(1), Op::Push(99_999), Op::Pop, Op::Pop],
            vec![
                Op::Push(u64::MAX),
                Op::Burst {
                    count: 100,
                    delta: u64::MAX,
                    step: 0,
                },
            ],
            (0..3000)
                .map(|i| {
                    if i % 3 == 0 {
                        Op::Pop
                    } else {
                        Op::Push(i % 1000)
                    }
                })
                .collect(),
        ]
        .concat();
        agrees_with_a_sorted_map(&ops);
    }

    #[test]
    fn equal_times_pop_in_push_order_and_slots_are_reused() {
        let mut queue = EventQueue::new();
        for item in 0..10u64 {
            queue.push(7, item);
        }
        queue.push(3, 100);
        let order: Vec<u64> = std::iter::from_fn(|| queue.pop().map(|(_, item)| item)).collect();
        assert_eq!(order, [100, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
        queue.push(7, 10);
        queue.push(7, 11);
        assert_eq!(queue.entries.len(), 11, "freed entries are reused");
        assert_eq!(queue.pop(), Some((7, 10)));
        assert_eq!(queue.pop(), Some((7, 11)));
        assert_eq!(queue.peek_time(), None);
    }
}
