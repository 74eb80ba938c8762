//! The engine's event queue: a 4-ary min-heap of packed (time, sequence, slot) keys over a slab
//! of payloads.
//!
//! Order: the earliest time first and, among equal times, the first pushed first (the queue
//! numbers pushes itself). The order is total, so any correct priority queue pops exactly the
//! same events in exactly the same order; this one is only faster than the
//! `std::collections::BinaryHeap` of whole events it replaced (results unchanged):
//!
//! - a key is one `u128`: the time in the high 64 bits, then a 40-bit push number, then the
//!   24-bit slot of the payload. Comparing keys compares (time, push number) and choosing the
//!   least of four siblings compiles to flag arithmetic and conditional moves, not to branches
//!   the CPU cannot predict (which child is least is a coin toss);
//! - four children per node halve the heap's depth, and four 16-byte siblings span one or two
//!   cache lines;
//! - the payloads (a boxed callback or a wake token) sit in a slab and never move until popped;
//!   sifting copies keys into a hole instead of swapping whole events;
//! - a pop moves the hole from the root down to a leaf along the least children and then sifts
//!   the last key up from there (Floyd's bottom-up deletion, as `BinaryHeap::pop` does).
//!
//! Limits: at most 2^24 events pending (the engine's `MAX_PENDING_EVENTS`); push numbers wrap
//! at 2^40 (18 hours of pushes at 15 M/s), at which point the pending keys are renumbered in
//! their order, so the order never changes. Freed slots are reused last-in first-out, so the
//! slab stays as large as the most events ever pending at once and its hot end stays in cache.

use crate::units::Nanos;

/// Children per heap node.
const ARITY: usize = 4;
/// Bits of a key below the time: the push number, then the slot.
const SLOT_BITS: u32 = 24;
const SEQ_BITS: u32 = 64 - SLOT_BITS;
/// Slots available: the most events that can be pending at once.
pub const MAX_SLOTS: usize = 1 << SLOT_BITS;
const SLOT_MASK: u128 = (1 << SLOT_BITS) - 1;

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

/// A min-queue of `T` ordered by time, then by push order.
#[derive(Debug)]
pub struct EventQueue<T> {
    heap: Vec<u128>,
    slots: Vec<Option<T>>,
    free: Vec<u32>,
    /// The next push number, below `seq_limit`.
    next_seq: u64,
    seq_limit: u64,
}

impl<T> Default for EventQueue<T> {
    fn default() -> Self {
        EventQueue {
            heap: Vec::new(),
            slots: Vec::new(),
            free: Vec::new(),
            next_seq: 0,
            seq_limit: 1 << SEQ_BITS,
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
        self.heap.len()
    }

    /// The time of the event that pops next.
    #[inline]
    pub fn peek_time(&self) -> Option<Nanos> {
        self.heap.first().map(|&key| key_time(key))
    }

    /// Adds `item` at `time`, after every pending event of the same time.
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
        self.heap.push(new);
        self.sift_up(self.heap.len() - 1, new);
    }

    /// Removes and returns the earliest event: (time, item).
    pub fn pop(&mut self) -> Option<(Nanos, T)> {
        let last = self.heap.pop()?;
        let top = match self.heap.first().copied() {
            None => last,
            Some(top) => {
                let hole = self.hole_to_leaf();
                self.sift_up(hole, last);
                top
            }
        };
        let slot = key_slot(top);
        let item = self.slots[slot]
            .take()
            .expect("a queued key names a full slot");
        self.free.push(slot as u32);
        Some((key_time(top), item))
    }

    /// Gives the pending keys push numbers `0..len` in their order (sorting them, which keeps
    /// the heap property), so numbering can go on from `len`.
    #[cold]
    fn renumber(&mut self) {
        self.heap.sort_unstable();
        for (seq, entry) in self.heap.iter_mut().enumerate() {
            *entry = key(key_time(*entry), seq as u64, key_slot(*entry) as u32);
        }
        self.next_seq = self.heap.len() as u64;
        assert!(
            self.next_seq < self.seq_limit,
            "push numbers outnumber pending events"
        );
    }

    /// Places `new` at `hole` or above it, moving greater ancestors down.
    #[inline(always)]
    fn sift_up(&mut self, mut hole: usize, new: u128) {
        while hole > 0 {
            let parent = (hole - 1) / ARITY;
            let above = self.heap[parent];
            if new >= above {
                break;
            }
            self.heap[hole] = above;
            hole = parent;
        }
        self.heap[hole] = new;
    }

    /// Moves the hole left at the root by a pop down to a leaf, pulling the least child up at
    /// each level; returns where the hole ends.
    #[inline(always)]
    fn hole_to_leaf(&mut self) -> usize {
        let heap = &mut self.heap[..];
        let mut hole = 0;
        let mut first = 1;
        // Levels where all four children exist: a tournament of two pairs, without branches;
        // only the winner's index is carried, its key is read again (from L1).
        while let Some(c) = heap.get(first..first + ARITY) {
            let a = usize::from(c[1] < c[0]);
            let b = 2 + usize::from(c[3] < c[2]);
            let least = first + if c[b] < c[a] { b } else { a };
            heap[hole] = heap[least];
            hole = least;
            first = hole * ARITY + 1;
        }
        // At most one node has fewer than four children.
        if first < heap.len() {
            let least = (first..heap.len())
                .min_by_key(|&child| heap[child])
                .expect("a child");
            heap[hole] = heap[least];
            hole = least;
        }
        hole
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

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
