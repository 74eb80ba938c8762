//! The engine's event queue: a ladder queue (Tang, Goh and Thng, "Ladder queue: an O(1)
//! priority queue structure for large-scale discrete event simulation", 2005) of packed
//! (time, sequence, slot) keys over a slab of payloads.
//!
//! Order: the earliest time first and, among equal times, the first pushed first (the queue
//! numbers pushes itself). The order is total, so any correct priority queue pops exactly the
//! same events in exactly the same order; this one is only faster than the 4-ary heap it
//! replaced (results unchanged).
//!
//! Design:
//! - a key is one `u128`: the time in the high 64 bits, then a 40-bit push number, then the
//!   24-bit slot of the payload, so comparing keys compares (time, push number). The payloads (a
//!   boxed callback or a wake token) sit in a slab and never move until popped; only keys move;
//! - the keys are kept in three tiers by time, each tier's times all below the next's:
//!   - the *bottom*, a short sorted vector the queue pops from (from the front, by moving an
//!     index);
//!   - *rungs*, coarsest first, each an array of buckets of one power-of-two width of time
//!     (the last bucket may be wider), unsorted inside. A rung holds the times from its next
//!     bucket to the start of the next bucket of the rung above it (or of the top);
//!   - the *top*, an unsorted vector of every key at `top_start` or later.
//! - a push appends its key to the first tier whose range holds its time: the top, a rung's
//!   bucket, or (by binary search) the bottom. The usual push, a time further out than the
//!   bucket being consumed, is an append;
//! - when the bottom is empty, the finest rung's next non-empty bucket is sorted and becomes the
//!   bottom; a bucket of more than [`SPLIT_ABOVE`] keys of different times is first spread over
//!   a new, finer rung of about one bucket per [`KEYS_PER_BUCKET`] keys. With no rung left, the
//!   top becomes a rung (or, when small, the bottom) and `top_start` moves past its latest time;
//! - a bottom grown by pushes past [`BOTTOM_MAX`] keys of different times becomes a rung, so an
//!   insertion into the bottom moves at most that many keys (a key later than all the bottom's,
//!   as keys of one time are in push order, is appended; one earlier than all takes the place
//!   before the front when there is one).
//!
//! So a key is appended to a bucket about once or twice, sorted once in a small bucket and
//! popped from the bottom's front. With a thousand timers pending (`examples/engine_bench
//! timer`) an event took 755 instructions with the 4-ary heap, whose pop and push were 373 of
//! them, and 564 with this queue (cachegrind); only a bucket's end is touched by a push.
//!
//! Limits: at most 2^24 events pending (the engine's `MAX_PENDING_EVENTS`); push numbers wrap
//! at 2^40 (18 hours of pushes at 15 M/s), at which point the pending keys are renumbered in
//! their order, so the order never changes. Freed slots are reused last-in first-out, so the
//! slab stays as large as the most events ever pending at once and its hot end stays in cache.
//! Buckets keep their capacity when emptied (and rungs' bucket arrays are reused), so the
//! queue's memory is that of the most keys ever pending plus, per bucket, a vector (24 bytes,
//! and 64 bytes of keys once used): about twice the heap's 16 bytes per pending key. A split
//! puts the least and the greatest time of a bucket in different buckets of the finer rung, so
//! it always divides the bucket's keys (a bucket of one time is sorted, not split); keys
//! clustered far below a bucket's width may be moved by a few nested splits. Times may be
//! pushed in any order (the engine pushes none before the present).

use crate::units::Nanos;

/// Bits of a key below the time: the push number, then the slot.
const SLOT_BITS: u32 = 24;
const SEQ_BITS: u32 = 64 - SLOT_BITS;
/// Slots available: the most events that can be pending at once.
pub const MAX_SLOTS: usize = 1 << SLOT_BITS;
const SLOT_MASK: u128 = (1 << SLOT_BITS) - 1;
/// A bucket of more keys than this, of different times, is spread over a finer rung instead of
/// being sorted into the bottom; the top, when no rung is left, likewise.
const SPLIT_ABOVE: usize = 48;
/// A bottom grown by pushes past this many keys of different times becomes a rung.
const BOTTOM_MAX: usize = 64;
/// The keys per bucket a new rung is sized for.
const KEYS_PER_BUCKET: usize = 2;
/// Emptied bucket arrays kept for the next rungs.
const MAX_SPARE_RUNGS: usize = 8;

#[inline(always)]
fn key(time: Nanos, seq: u64, slot: u32) -> u128 {
    (u128::from(time) << 64) | (u128::from(seq) << SLOT_BITS) | u128::from(slot)
}

#[inline(always)]
fn key_time(key: u128) -> Nanos {
    (key >> 64) as Nanos
}

#[inline(always)]
fn key_slot(key: u128) -> usize {
    (key & SLOT_MASK) as usize
}

/// Sorts a bucket's keys (most buckets hold one or two).
#[inline]
fn sort_keys(keys: &mut [u128]) {
    match keys.len() {
        0 | 1 => {}
        2 => {
            if keys[1] < keys[0] {
                keys.swap(0, 1);
            }
        }
        _ => keys.sort_unstable(),
    }
}

/// The earliest keys, sorted: `keys[head..]`; the keys before `head` were popped.
#[derive(Debug, Default)]
struct Bottom {
    keys: Vec<u128>,
    head: usize,
}

impl Bottom {
    #[inline(always)]
    fn is_empty(&self) -> bool {
        self.head == self.keys.len()
    }

    #[inline(always)]
    fn len(&self) -> usize {
        self.keys.len() - self.head
    }

    #[inline(always)]
    fn live(&self) -> &[u128] {
        &self.keys[self.head..]
    }

    #[inline(always)]
    fn front(&self) -> Option<u128> {
        self.keys.get(self.head).copied()
    }

    #[inline(always)]
    fn pop_front(&mut self) -> Option<u128> {
        let key = self.keys.get(self.head).copied()?;
        self.head += 1;
        Some(key)
    }

    /// Inserts `key` in order: appended when it is the latest, put before the front when it is
    /// the earliest and a popped place is free there, else by moving the later keys.
    #[inline]
    fn insert(&mut self, key: u128) {
        if self.is_empty() {
            self.keys.clear();
            self.head = 0;
            self.keys.push(key);
        } else if self.keys[self.keys.len() - 1] < key {
            self.keys.push(key);
        } else if self.head > 0 && key < self.keys[self.head] {
            self.head -= 1;
            self.keys[self.head] = key;
        } else {
            let at = self.head + self.live().partition_point(|&k| k < key);
            self.keys.insert(at, key);
        }
    }

    /// Takes the live keys out (leaving the bottom empty).
    fn take(&mut self) -> Vec<u128> {
        let mut keys = std::mem::take(&mut self.keys);
        keys.drain(..self.head);
        self.head = 0;
        keys
    }

    /// Makes sorted `keys` the bottom, which is empty; returns the bottom's vector, emptied.
    #[inline]
    fn replace(&mut self, keys: Vec<u128>) -> Vec<u128> {
        debug_assert!(self.is_empty() && keys.windows(2).all(|pair| pair[0] < pair[1]));
        self.head = 0;
        let mut emptied = std::mem::replace(&mut self.keys, keys);
        emptied.clear();
        emptied
    }
}

/// One rung: buckets of `1 << shift` ns from `start`, the last one reaching to `end`.
#[derive(Debug, Default)]
struct Rung {
    start: Nanos,
    shift: u32,
    /// The next bucket to take; the buckets before it are empty and stay so.
    cur: usize,
    /// Where bucket `cur` begins (`end` once every bucket was taken): the rung holds the times
    /// in `[cur_start, end)`.
    cur_start: u128,
    end: u128,
    /// Keys in the buckets.
    pending: usize,
    buckets: Vec<Vec<u128>>,
}

impl Rung {
    /// The bucket of `time`, which is in `[cur_start, end)`.
    #[inline(always)]
    fn bucket_of(&self, time: Nanos) -> usize {
        debug_assert!(u128::from(time) >= self.cur_start && u128::from(time) < self.end);
        (((time - self.start) >> self.shift) as usize).min(self.buckets.len() - 1)
    }

    /// Where bucket `index` begins (`end` past the last bucket).
    #[inline]
    fn bucket_start(&self, index: usize) -> u128 {
        if index >= self.buckets.len() {
            self.end
        } else {
            u128::from(self.start) + ((index as u128) << self.shift)
        }
    }
}

/// A min-queue of `T` ordered by time, then by push order.
#[derive(Debug)]
pub struct EventQueue<T> {
    slots: Vec<Option<T>>,
    free: Vec<u32>,
    /// The next push number, below `seq_limit`.
    next_seq: u64,
    seq_limit: u64,
    /// Pending keys in all tiers.
    len: usize,
    /// The earliest keys, sorted: every time below the finest rung's `cur_start` (or
    /// `top_start` when there is no rung).
    bottom: Bottom,
    /// Coarsest first; each rung's `end` is the `cur_start` of the rung before it (`top_start`
    /// for the first) or more.
    rungs: Vec<Rung>,
    /// Every key at `top_start` or later, unsorted; the least and greatest of their times.
    top: Vec<u128>,
    top_start: u128,
    top_min: Nanos,
    top_max: Nanos,
    /// Emptied bucket arrays of finished rungs.
    spare: Vec<Vec<Vec<u128>>>,
}

impl<T> Default for EventQueue<T> {
    fn default() -> Self {
        EventQueue {
            slots: Vec::new(),
            free: Vec::new(),
            next_seq: 0,
            seq_limit: 1 << SEQ_BITS,
            len: 0,
            bottom: Bottom::default(),
            rungs: Vec::new(),
            top: Vec::new(),
            top_start: 0,
            top_min: Nanos::MAX,
            top_max: 0,
            spare: Vec::new(),
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

    /// The time of the event that pops next (this may sort the next bucket, hence `&mut`).
    #[inline]
    pub fn peek_time(&mut self) -> Option<Nanos> {
        if self.bottom.is_empty() {
            self.refill();
        }
        self.bottom.front().map(key_time)
    }

    /// Adds `item` at `time`, after every pending event of the same time.
    #[inline]
    pub fn push(&mut self, time: Nanos, item: T) {
        let slot = match self.free.pop() {
            Some(slot) => {
                debug_assert!(self.slots[slot as usize].is_none(), "a free slot is empty");
                self.slots[slot as usize] = Some(item);
                slot
            }
            None => {
                assert!(
                    self.slots.len() < MAX_SLOTS,
                    "more than {MAX_SLOTS} pending events"
                );
                self.slots.push(Some(item));
                (self.slots.len() - 1) as u32
            }
        };
        if self.next_seq == self.seq_limit {
            self.renumber();
        }
        let new = key(time, self.next_seq, slot);
        self.next_seq += 1;
        self.len += 1;
        self.place(new);
    }

    /// Removes and returns the earliest event: (time, item).
    #[inline]
    pub fn pop(&mut self) -> Option<(Nanos, T)> {
        if self.bottom.is_empty() {
            self.refill();
        }
        let top = self.bottom.pop_front()?;
        self.len -= 1;
        let slot = key_slot(top);
        let item = self.slots[slot]
            .take()
            .expect("a queued key names a full slot");
        self.free.push(slot as u32);
        Some((key_time(top), item))
    }

    /// Puts `key` in the tier whose range holds its time.
    #[inline(always)]
    fn place(&mut self, key: u128) {
        let time = key_time(key);
        let t = u128::from(time);
        if t >= self.top_start {
            self.top.push(key);
            self.top_min = self.top_min.min(time);
            self.top_max = self.top_max.max(time);
            return;
        }
        for rung in &mut self.rungs {
            if t >= rung.cur_start {
                let bucket = rung.bucket_of(time);
                rung.buckets[bucket].push(key);
                rung.pending += 1;
                return;
            }
        }
        self.insert_bottom(key);
    }

    /// Inserts `key` into the sorted bottom; a bottom grown past [`BOTTOM_MAX`] keys of
    /// different times becomes a rung.
    fn insert_bottom(&mut self, key: u128) {
        self.bottom.insert(key);
        if self.bottom.len() > BOTTOM_MAX {
            let live = self.bottom.live();
            if key_time(live[0]) != key_time(live[live.len() - 1]) {
                self.bottom_to_rung();
            }
        }
    }

    /// Spreads the bottom over a new finest rung.
    #[cold]
    fn bottom_to_rung(&mut self) {
        let end = self
            .rungs
            .last()
            .map_or(self.top_start, |rung| rung.cur_start);
        let mut keys = self.bottom.take();
        let first = key_time(keys[0]);
        let last = key_time(keys[keys.len() - 1]);
        let rung = self.rung_from(&mut keys, first, last, end);
        self.rungs.push(rung);
        self.bottom.replace(keys);
    }

    /// Makes the bottom (empty) hold the earliest keys, if any are pending: the finest rung's
    /// next bucket, sorted, after finer rungs made of any bucket too large to sort.
    #[inline(never)]
    fn refill(&mut self) {
        debug_assert!(self.bottom.is_empty());
        loop {
            let Some(rung) = self.rungs.last_mut() else {
                if self.top.is_empty() {
                    debug_assert_eq!(self.len, 0, "every pending key is in a tier");
                    return;
                }
                self.top_down();
                if !self.bottom.is_empty() {
                    return;
                }
                continue;
            };
            if rung.pending == 0 {
                let mut done = self.rungs.pop().expect("a rung");
                if self.spare.len() < MAX_SPARE_RUNGS {
                    debug_assert!(done.buckets.iter().all(Vec::is_empty));
                    self.spare.push(std::mem::take(&mut done.buckets));
                }
                continue;
            }
            while rung.buckets[rung.cur].is_empty() {
                rung.cur += 1;
            }
            let index = rung.cur;
            rung.cur += 1;
            rung.cur_start = rung.bucket_start(rung.cur);
            let mut keys = std::mem::take(&mut rung.buckets[index]);
            rung.pending -= keys.len();
            let end = rung.cur_start;
            if keys.len() > SPLIT_ABOVE {
                let (first, last) = keys.iter().fold((Nanos::MAX, 0), |(lo, hi), &key| {
                    (lo.min(key_time(key)), hi.max(key_time(key)))
                });
                if first != last {
                    let finer = self.rung_from(&mut keys, first, last, end);
                    let rung = self.rungs.last_mut().expect("the rung split");
                    rung.buckets[index] = keys;
                    self.rungs.push(finer);
                    continue;
                }
            }
            sort_keys(&mut keys);
            debug_assert!(keys.iter().all(|&key| u128::from(key_time(key)) < end));
            rung.buckets[index] = self.bottom.replace(keys);
            return;
        }
    }

    /// With no rung left, moves the top down: sorted into the bottom when it is small, spread
    /// over a new rung otherwise. `top_start` moves past the top's latest time.
    fn top_down(&mut self) {
        debug_assert!(self.rungs.is_empty() && self.bottom.is_empty());
        let (first, last) = (self.top_min, self.top_max);
        debug_assert!(u128::from(first) >= self.top_start && first <= last);
        let mut keys = std::mem::take(&mut self.top);
        self.top_start = u128::from(last) + 1;
        self.top_min = Nanos::MAX;
        self.top_max = 0;
        if keys.len() <= SPLIT_ABOVE || first == last {
            sort_keys(&mut keys);
            self.top = self.bottom.replace(keys);
        } else {
            let rung = self.rung_from(&mut keys, first, last, self.top_start);
            self.rungs.push(rung);
            self.top = keys;
        }
    }

    /// A rung holding `keys` (emptied; their times are in `[first, last]`, `first < last`) and
    /// the times up to `end`, with about one bucket per [`KEYS_PER_BUCKET`] keys and at least
    /// two buckets, `first` and `last` in different ones (so a split always divides).
    fn rung_from(&mut self, keys: &mut Vec<u128>, first: Nanos, last: Nanos, end: u128) -> Rung {
        debug_assert!(first < last && u128::from(last) < end);
        let span = last - first;
        let target = (keys.len() / KEYS_PER_BUCKET).max(2) as u64;
        // The least width with (span >> shift) < target: at most `target` buckets; and since
        // 2^(shift-1) <= span / target, the last time is past the first bucket.
        let shift = u64::BITS - (span / target).leading_zeros();
        let count = (span >> shift) as usize + 1;
        debug_assert!(count >= 2 && count as u64 <= target);
        let mut buckets = self.spare.pop().unwrap_or_default();
        buckets.resize_with(count, Vec::new);
        let mut rung = Rung {
            start: first,
            shift,
            cur: 0,
            cur_start: u128::from(first),
            end,
            pending: keys.len(),
            buckets,
        };
        for key in keys.drain(..) {
            let bucket = rung.bucket_of(key_time(key));
            rung.buckets[bucket].push(key);
        }
        rung
    }

    /// Gives the pending keys push numbers `0..len` in their order, so numbering can go on
    /// from `len`; they all go to the top, which is valid for any keys.
    #[cold]
    fn renumber(&mut self) {
        let mut keys: Vec<u128> = std::mem::take(&mut self.top);
        keys.extend(self.bottom.take());
        for rung in self.rungs.drain(..) {
            for bucket in rung.buckets {
                keys.extend(bucket);
            }
        }
        assert_eq!(keys.len(), self.len, "every pending key is in a tier");
        keys.sort_unstable();
        for (seq, entry) in keys.iter_mut().enumerate() {
            *entry = key(key_time(*entry), seq as u64, key_slot(*entry) as u32);
        }
        self.top_start = 0;
        self.top_min = keys.first().map_or(Nanos::MAX, |&k| key_time(k));
        self.top_max = keys.last().map_or(0, |&k| key_time(k));
        self.top = keys;
        self.next_seq = self.len as u64;
        assert!(
            self.next_seq < self.seq_limit,
            "push numbers outnumber pending events"
        );
    }

    /// Checks the tiers' invariants (tests).
    #[cfg(test)]
    fn check(&self) {
        let mut count = self.bottom.len() + self.top.len();
        let bottom = self.bottom.live();
        assert!(bottom.windows(2).all(|pair| pair[0] < pair[1]));
        let mut below = self.top_start;
        for &key in &self.top {
            assert!(u128::from(key_time(key)) >= self.top_start);
            assert!((self.top_min..=self.top_max).contains(&key_time(key)));
        }
        for rung in &self.rungs {
            assert!(rung.end >= below, "a rung reaches the range above it");
            assert_eq!(rung.cur_start, rung.bucket_start(rung.cur));
            let mut pending = 0;
            for (index, bucket) in rung.buckets.iter().enumerate() {
                if index < rung.cur {
                    assert!(bucket.is_empty());
                }
                for &key in bucket {
                    let time = u128::from(key_time(key));
                    assert!(time >= rung.bucket_start(index) && time < below);
                    assert!(index + 1 == rung.buckets.len() || time < rung.bucket_start(index + 1));
                }
                pending += bucket.len();
            }
            assert_eq!(pending, rung.pending);
            count += pending;
            below = rung.cur_start;
        }
        for &key in bottom {
            assert!(u128::from(key_time(key)) < below);
        }
        assert_eq!(count, self.len);
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
        // A small push-number limit renumbers the pending keys every few hundred pushes.
        for (spread, seq_limit) in [
            (1u64, 1 << 40),
            (3, 1 << 40),
            (50, 1 << 40),
            (1_000_000, 1 << 40),
            (1, 300),
            (3, 257),
            (50, 1000),
        ] {
            let mut state = spread + seq_limit;
            let mut queue = EventQueue::new();
            queue.seq_limit = seq_limit;
            // Bursts of 40 pops let the queue grow to about 2,000 events; of 60, it drains
            // every 97 rounds and stays below a small limit.
            let burst = if seq_limit < 1 << 40 { 60 } else { 40 };
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
            1 => (1usize..300, delta(), prop_oneof![Just(0u64), 0u64..100, any::<u64>()])
                .prop_map(|(count, delta, step)| Op::Burst { count, delta, step }),
        ]
    }

    /// Runs `ops` on a queue and on a `BTreeMap` of (time, push number), checking every pop,
    /// peek and length and the queue's invariants, then drains both.
    fn agrees_with_a_sorted_map(ops: &[Op], seq_limit: u64) {
        let mut queue = EventQueue::new();
        queue.seq_limit = seq_limit;
        let mut reference: BTreeMap<(u64, u64), u64> = BTreeMap::new();
        let (mut now, mut seq) = (0u64, 0u64);
        let mut push = |queue: &mut EventQueue<u64>, reference: &mut BTreeMap<_, _>, time| {
            // Renumbering needs fewer pending events than push numbers.
            if reference.len() as u64 >= seq_limit / 2 {
                return;
            }
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
            agrees_with_a_sorted_map(&ops, 1 << SEQ_BITS);
        }

        /// The same with push numbers renumbered every few hundred pushes.
        #[test]
        fn renumbering_keeps_the_order(ops in proptest::collection::vec(op(), 1..400)) {
            agrees_with_a_sorted_map(&ops, 700);
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
        agrees_with_a_sorted_map(&ops, 1 << SEQ_BITS);
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
        queue.push(1, 10);
        queue.push(1, 11);
        assert_eq!(queue.slots.len(), 11, "freed slots are reused");
        assert_eq!(queue.pop(), Some((1, 10)));
        assert_eq!(queue.pop(), Some((1, 11)));
        assert_eq!(queue.peek_time(), None);
    }
}
