//! NAND array: geometry and busy-resource timelines for dies and channels.
//!
//! Models: `channels x dies_per_channel` dies, each with `planes` planes, pages of `page_bytes`,
//! `pages_per_block` pages per block. Every die and every channel is a resource with a "free at"
//! time; an operation reserves the resources it needs in order (a read occupies its die for the
//! array read time, then its channel for the data transfer; a program occupies the channel for the
//! data transfer in, then the die for the program time). Parallelism between dies and channels
//! emerges from which dies the addresses map to and how many operations are outstanding.
//!
//! Simplifications (kept on purpose, stated so a reader can judge them):
//! - Planes always operate together (multi-plane read/program/erase), so the unit of parallelism is
//!   the die and its program unit is `planes x page_bytes`.
//! - Reservations are made when a command starts. A resource keeps its future busy intervals, so a
//!   later reservation may use an idle gap before them (a read may run on a die before the
//!   program of data that is still crossing the host bus), but it never moves them.
//! - Cache read: the die may start its next array read while the channel still transfers the
//!   previous page out of the page register.
//! - Program/erase suspend ([`NandArray::read_suspending`], off unless the device profile turns it
//!   on): a read that finds its die programming, erasing or doing GC work suspends that operation
//!   (after the suspend latency), is served, and the operation resumes after a resume overhead;
//!   the operation and every reservation chained behind it on the die move later by that much
//!   (ONFI 4.x program/erase suspend; MQSim's `Suspend_Program_Time` / `Suspend_Erase_Time`,
//!   Tavakkol et al., FAST'18; Wu & He, "Reducing SSD Read Latency via NAND Flash Program and
//!   Erase Suspension", FAST'12). Simplifications: GC work (copy-back reads and programs, the
//!   erase) is one operation and suspends at the erase suspend latency, its worst case; reads
//!   that arrive while a die is suspended are served in the same suspension (no second suspend
//!   latency), as MQSim serves every waiting read during one; a suspend is refused (the read
//!   waits, as without suspend) when the reservations it would move include another read, whose
//!   channel and bus transfers are already placed; the moved programs' data transfers on the
//!   channel are not moved (the data waits in the die's cache register, ONFI cache program), so
//!   only die time shifts; a program counts as in progress (suspendable, at the program suspend
//!   latency) from the start of its data transfer in, as its die reservation does; a read
//!   never suspends a read.

use crate::units::{Nanos, NS_PER_SEC, PAGE_SIZE};
use std::collections::VecDeque;

/// Upper bound on the future busy intervals one resource holds (each started command adds a few);
/// exceeding it is a model bug, not an input error.
const TIMELINE_INTERVALS_MAX: usize = 1 << 16;

/// Forgotten intervals a [`Timeline`] keeps before its vector is compacted (when they are also
/// at least half of it): a prune then moves the live ones once, not at every prune.
const TIMELINE_FORGOTTEN_MAX: usize = 32;

/// A resource's busy intervals, sorted, disjoint, from the last `prune` on: the vector's
/// entries from `head` on (a prune advances `head`; a deque's ring made every index, search
/// and insertion in the middle pay for its wrap-around).
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    busy: Vec<(Nanos, Nanos)>,
    /// Entries before this one ended by the last prune.
    head: usize,
    /// End of the last interval (0 if none ever).
    horizon_ns: Nanos,
    busy_total_ns: Nanos,
}

impl Timeline {
    /// The busy intervals from the last prune on, sorted by start.
    fn live(&self) -> &[(Nanos, Nanos)] {
        &self.busy[self.head..]
    }

    /// Earliest start at or after `at` of an idle stretch of `duration`.
    pub fn first_fit(&self, at: Nanos, duration: Nanos) -> Nanos {
        let mut start = at;
        for &(busy_start, busy_end) in self.live() {
            if busy_end <= start {
                continue;
            }
            if busy_start >= start + duration {
                break;
            }
            start = busy_end;
        }
        start
    }

    /// Marks `[start, start + duration)` busy; it must be idle.
    pub fn reserve(&mut self, start: Nanos, duration: Nanos) {
        if duration == 0 {
            return;
        }
        let end = start + duration;
        let (head, len) = (self.head, self.busy.len());
        // Most reservations go after every other (the busy list is sorted by start).
        let index = match self.live().last() {
            Some(&(last_start, _)) if last_start < start => len,
            None => len,
            Some(_) => head + self.live().partition_point(|&(s, _)| s < start),
        };
        if index > head {
            assert!(self.busy[index - 1].1 <= start, "overlapping reservation");
        }
        if index < len {
            assert!(end <= self.busy[index].0, "overlapping reservation");
        }
        if index > head && self.busy[index - 1].1 == start {
            self.busy[index - 1].1 = end;
            if index < len && self.busy[index].0 == end {
                let next_end = self.busy[index].1;
                self.busy[index - 1].1 = next_end;
                self.busy.remove(index);
            }
        } else if index < len && self.busy[index].0 == end {
            self.busy[index].0 = start;
        } else {
            self.busy.insert(index, (start, end));
        }
        assert!(
            self.busy.len() - self.head <= TIMELINE_INTERVALS_MAX,
            "timeline holds too many intervals"
        );
        self.horizon_ns = self.horizon_ns.max(end);
        self.busy_total_ns += duration;
    }

    /// Forgets intervals that end at or before `now`: no reservation will start before it.
    pub fn prune(&mut self, now: Nanos) {
        while self.busy.get(self.head).is_some_and(|&(_, end)| end <= now) {
            self.head += 1;
        }
        if self.head == self.busy.len() {
            self.busy.clear();
            self.head = 0;
        } else if self.head >= TIMELINE_FORGOTTEN_MAX && 2 * self.head >= self.busy.len() {
            self.busy.drain(..self.head);
            self.head = 0;
        }
    }

    /// Replaces the busy intervals by `intervals` (sorted by start; they may touch or nest, and
    /// are merged), adding `extra_busy_ns` to the busy total (the time a suspend adds).
    fn rebuild(&mut self, intervals: impl Iterator<Item = (Nanos, Nanos)>, extra_busy_ns: Nanos) {
        self.busy.clear();
        self.head = 0;
        for (start, end) in intervals {
            assert!(start <= end, "interval ends before it starts");
            match self.busy.last_mut() {
                Some(last) if start <= last.1 => last.1 = last.1.max(end),
                Some(last) => {
                    assert!(last.0 <= start, "intervals out of order");
                    self.busy.push((start, end));
                }
                None => self.busy.push((start, end)),
            }
            self.horizon_ns = self.horizon_ns.max(end);
        }
        self.busy_total_ns += extra_busy_ns;
    }

    /// End of the latest reservation.
    pub fn horizon_ns(&self) -> Nanos {
        self.horizon_ns
    }

    pub fn busy_total_ns(&self) -> Nanos {
        self.busy_total_ns
    }
}

/// Upper bound on the array operations one die holds from the last `prune` on.
const DIE_OPS_MAX: usize = 1 << 16;

/// What a die reservation does: a suspend may interrupt programs and GC/erase work, not reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DieWork {
    Read,
    Program,
    /// Garbage-collection copy-back and block erase, reserved as one stretch.
    Erase,
}

/// One reservation of a die, with its suspend state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DieOp {
    /// Identifier, increasing in reservation order over the array's life.
    pub id: u64,
    pub start_ns: Nanos,
    /// End, including every suspension so far.
    pub end_ns: Nanos,
    pub work: DieWork,
    /// Times this operation has been suspended.
    pub suspends: u32,
    /// End of the reads served in its latest suspension (0: never suspended); the operation
    /// resumes at this time plus the resume overhead.
    pub suspended_until_ns: Nanos,
}

/// Program/erase suspend costs and bound (see [`crate::dev::profile::DeviceProfile`] for the
/// sources of the values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SuspendTiming {
    /// From the suspend command to the die accepting a read, when it is programming.
    pub program_suspend_ns: Nanos,
    /// The same when it is erasing (or doing GC work).
    pub erase_suspend_ns: Nanos,
    /// Added to the suspended operation's remaining time when it resumes.
    pub resume_ns: Nanos,
    /// Suspensions one operation accepts; once reached, reads wait for it to end.
    pub max_per_op: u32,
}

/// A reservation moved later by a suspend: (id, end before, end after).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shift {
    pub id: u64,
    pub old_end_ns: Nanos,
    pub new_end_ns: Nanos,
}

/// Counters of the suspend mechanism.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SuspendStats {
    /// Operations suspended (each suspension counted).
    pub suspends: u64,
    /// Reads served during an existing suspension (no extra suspend latency).
    pub reads_in_suspension: u64,
    /// Reads placed before an operation reserved on the die that had not started yet.
    pub reads_ahead_of_queued: u64,
    /// Reads that had to wait because a suspend would have moved another read.
    pub refused_read_in_chain: u64,
    /// Reads that waited for an operation at its suspend bound.
    pub refused_bound: u64,
    /// Total time reservations were moved later (summed over every moved reservation).
    pub shifted_ns: Nanos,
}

/// Bytes of one FTL mapping unit (a 4 KiB logical page, as in page-level FTLs such as SimpleSSD's).
pub const MAP_UNIT_BYTES: u64 = PAGE_SIZE;

/// Physical layout of the NAND array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    pub channels: u32,
    pub dies_per_channel: u32,
    pub planes: u32,
    pub page_bytes: u32,
    pub pages_per_block: u32,
}

impl Geometry {
    pub fn dies(&self) -> u32 {
        self.channels * self.dies_per_channel
    }

    /// Bytes written by one (multi-plane) program operation.
    pub fn program_unit_bytes(&self) -> u64 {
        u64::from(self.planes) * u64::from(self.page_bytes)
    }

    /// Mapping units per program unit.
    pub fn units_per_program(&self) -> u32 {
        (self.program_unit_bytes() / MAP_UNIT_BYTES) as u32
    }

    /// Mapping units per (multi-plane) block.
    pub fn units_per_block(&self) -> u32 {
        self.units_per_program() * self.pages_per_block
    }

    /// Channel a die hangs on. Consecutive dies sit on different channels, so that striping over
    /// dies uses every channel before it uses a second die of one channel.
    pub fn channel_of(&self, die: u32) -> u32 {
        die % self.channels
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.channels == 0 || self.dies_per_channel == 0 || self.planes == 0 {
            return Err("channels, dies_per_channel and planes must be at least 1".into());
        }
        if self.dies() > 1024 {
            return Err(format!(
                "{} dies is more than the model allows (1024)",
                self.dies()
            ));
        }
        if u64::from(self.page_bytes) < MAP_UNIT_BYTES
            || u64::from(self.page_bytes) % MAP_UNIT_BYTES != 0
        {
            return Err(format!(
                "page_size {} B must be a multiple of the 4 KiB mapping unit",
                self.page_bytes
            ));
        }
        if self.pages_per_block < 2 {
            return Err("pages_per_block must be at least 2".into());
        }
        Ok(())
    }
}

/// Array operation times of one cell type (per program unit, all planes at once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    pub read_ns: Nanos,
    pub program_ns: Nanos,
    pub erase_ns: Nanos,
    /// Program time when the block is used in SLC mode (the SLC write buffer).
    pub slc_program_ns: Nanos,
    /// Array read time of a page held in SLC mode.
    pub slc_read_ns: Nanos,
    /// Bytes per second of one channel (the NAND bus between controller and dies).
    pub channel_bytes_per_sec: u64,
}

impl Timing {
    pub fn channel_transfer_ns(&self, bytes: u64) -> Nanos {
        transfer_ns(bytes, self.channel_bytes_per_sec)
    }
}

/// Time to move `bytes` at `bytes_per_sec`, rounded up to a whole nanosecond.
pub fn transfer_ns(bytes: u64, bytes_per_sec: u64) -> Nanos {
    assert!(bytes_per_sec > 0, "bandwidth must be positive");
    let ns = u128::from(bytes) * u128::from(NS_PER_SEC);
    ns.div_ceil(u128::from(bytes_per_sec)) as Nanos
}

/// The dies and channels as busy timelines.
#[derive(Debug, Clone)]
pub struct NandArray {
    pub geometry: Geometry,
    pub timing: Timing,
    dies: Vec<Timeline>,
    channels: Vec<Timeline>,
    /// Per die: its reservations from the last `prune` on, in time order, disjoint (a read served
    /// in a suspension lies inside the suspended operation and is not listed).
    ops: Vec<VecDeque<DieOp>>,
    next_op_id: u64,
    suspend_stats: SuspendStats,
    /// The time of the last [`Self::prune`]: a die's or a channel's intervals that ended by
    /// then are forgotten when that die or channel is next used, not at every prune (a device
    /// with 64 dies would otherwise look at 136 queues per command). Pruning is monotone, so
    /// what a die holds when it is used is the same either way.
    pruned_to_ns: Nanos,
}

impl NandArray {
    pub fn new(geometry: Geometry, timing: Timing) -> Self {
        NandArray {
            geometry,
            timing,
            dies: vec![Timeline::default(); geometry.dies() as usize],
            channels: vec![Timeline::default(); geometry.channels as usize],
            ops: vec![VecDeque::new(); geometry.dies() as usize],
            next_op_id: 0,
            suspend_stats: SuspendStats::default(),
            pruned_to_ns: 0,
        }
    }

    /// Identifier the next reservation will get (reservations made since a call to this have ids
    /// at or above it).
    pub fn next_op_id(&self) -> u64 {
        self.next_op_id
    }

    pub fn suspend_stats(&self) -> SuspendStats {
        self.suspend_stats
    }

    /// The reservations of `die` not yet forgotten: those that ended by the last prune are
    /// dropped when the die is next used.
    pub fn die_ops(&self, die: u32) -> &VecDeque<DieOp> {
        &self.ops[die as usize]
    }

    /// Records a reservation of `die`; returns its id.
    fn record(&mut self, die: u32, start_ns: Nanos, end_ns: Nanos, work: DieWork) -> u64 {
        let id = self.next_op_id;
        self.next_op_id += 1;
        let ops = &mut self.ops[die as usize];
        // Most operations go after every other (the list is sorted by start).
        let index = match ops.back() {
            Some(last) if last.start_ns < start_ns => ops.len(),
            None => 0,
            Some(_) => ops.partition_point(|op| op.start_ns < start_ns),
        };
        assert!(
            index == 0 || ops[index - 1].end_ns <= start_ns,
            "overlapping die operations"
        );
        assert!(
            index == ops.len() || end_ns <= ops[index].start_ns,
            "overlapping die operations"
        );
        let op = DieOp {
            id,
            start_ns,
            end_ns,
            work,
            suspends: 0,
            suspended_until_ns: 0,
        };
        if index == ops.len() {
            ops.push_back(op);
        } else {
            ops.insert(index, op);
        }
        assert!(ops.len() <= DIE_OPS_MAX, "a die holds too many operations");
        id
    }

    /// End of the latest reservation on `die`.
    pub fn die_free_ns(&self, die: u32) -> Nanos {
        self.dies[die as usize].horizon_ns()
    }

    /// Total time `die` has been reserved.
    pub fn die_busy_ns(&self, die: u32) -> Nanos {
        self.dies[die as usize].busy_total_ns()
    }

    /// Latest time at which any die or channel is busy.
    pub fn all_free_ns(&self) -> Nanos {
        let dies = self
            .dies
            .iter()
            .map(Timeline::horizon_ns)
            .max()
            .unwrap_or(0);
        let channels = self
            .channels
            .iter()
            .map(Timeline::horizon_ns)
            .max()
            .unwrap_or(0);
        dies.max(channels)
    }

    /// Forgets busy intervals that ended by `now` (every later reservation starts at or after it).
    /// Each die and channel does so when it is next used ([`Self::prune_die`]).
    pub fn prune(&mut self, now: Nanos) {
        // A prune at an earlier time than the last forgets nothing more, as before.
        self.pruned_to_ns = self.pruned_to_ns.max(now);
    }

    /// Forgets `die`'s intervals and operations, and its channel's intervals, that ended by
    /// the last [`Self::prune`]; called before anything looks at them.
    #[inline]
    fn prune_die(&mut self, die: u32) {
        let now = self.pruned_to_ns;
        self.dies[die as usize].prune(now);
        let ops = &mut self.ops[die as usize];
        while ops.front().is_some_and(|op| op.end_ns <= now) {
            ops.pop_front();
        }
        let channel = self.geometry.channel_of(die) as usize;
        self.channels[channel].prune(now);
    }

    /// Array read on `die` (all planes of one program unit), then transfer of `bytes` over the
    /// die's channel. Returns the time the data is in the controller.
    pub fn read(&mut self, die: u32, at: Nanos, read_ns: Nanos, bytes: u64) -> Nanos {
        self.prune_die(die);
        let die_start = self.dies[die as usize].first_fit(at, read_ns);
        self.dies[die as usize].reserve(die_start, read_ns);
        if read_ns > 0 {
            self.record(die, die_start, die_start + read_ns, DieWork::Read);
        }
        self.read_transfer(die, die_start + read_ns, bytes)
    }

    /// Moves `bytes` read on `die` (array read ended at `array_end`) over its channel.
    fn read_transfer(&mut self, die: u32, array_end: Nanos, bytes: u64) -> Nanos {
        let channel = self.geometry.channel_of(die) as usize;
        let transfer_ns = self.timing.channel_transfer_ns(bytes);
        let transfer_start = self.channels[channel].first_fit(array_end, transfer_ns);
        self.channels[channel].reserve(transfer_start, transfer_ns);
        transfer_start + transfer_ns
    }

    /// Transfer of one program unit to `die` over its channel, then the program; the die is busy
    /// from the start of the transfer (its page registers latch the data). Returns the end and
    /// the reservation's id (a suspend may later move its end, see [`Self::read_suspending`]).
    pub fn program(&mut self, die: u32, at: Nanos, program_ns: Nanos) -> (Nanos, u64) {
        self.prune_die(die);
        let channel = self.geometry.channel_of(die) as usize;
        let transfer_ns = self
            .timing
            .channel_transfer_ns(self.geometry.program_unit_bytes());
        let mut start = at;
        // Bound: each round moves `start` past one busy interval of the die or the channel.
        for _ in 0..2 * TIMELINE_INTERVALS_MAX {
            let channel_start = self.channels[channel].first_fit(start, transfer_ns);
            let die_start =
                self.dies[die as usize].first_fit(channel_start, transfer_ns + program_ns);
            if die_start == channel_start {
                start = channel_start;
                break;
            }
            start = die_start;
        }
        assert_eq!(self.channels[channel].first_fit(start, transfer_ns), start);
        self.channels[channel].reserve(start, transfer_ns);
        self.dies[die as usize].reserve(start, transfer_ns + program_ns);
        let end = start + transfer_ns + program_ns;
        let id = self.record(die, start, end, DieWork::Program);
        (end, id)
    }

    /// Occupies `die` for `busy_ns` in its first idle stretch at or after `at` (garbage collection
    /// copy-back, erase). Returns the end and the reservation's id.
    pub fn occupy(&mut self, die: u32, at: Nanos, busy_ns: Nanos) -> (Nanos, u64) {
        self.prune_die(die);
        let start = self.dies[die as usize].first_fit(at, busy_ns);
        self.dies[die as usize].reserve(start, busy_ns);
        let id = if busy_ns > 0 {
            self.record(die, start, start + busy_ns, DieWork::Erase)
        } else {
            u64::MAX
        };
        (start + busy_ns, id)
    }

    /// An array read of `die` at `at` that may suspend the program or erase in progress there,
    /// then the transfer of `bytes` over the channel. Returns the time the data is in the
    /// controller, and appends to `shifts` every reservation it moved later. Returns `None`
    /// (and reserves nothing) when the die can serve the read at `at` without suspending
    /// anything, or when a suspend is refused: the caller then makes a plain [`Self::read`].
    ///
    /// Where the read goes (the die's operations are looked at from `at` on):
    /// - inside a suspension already under way (before the operation resumes): right after the
    ///   reads served in it; the operation resumes `read_ns` later;
    /// - inside a program or erase (GC) in progress below its suspend bound: after the suspend
    ///   latency; the operation resumes after the read and the resume overhead;
    /// - in an idle stretch too short for it, before an operation that has not started: at `at`;
    ///   that operation starts when the read ends (the controller issues the read first);
    /// - inside a read, or an operation at its bound: after it, and the rules apply again.
    ///
    /// Every later reservation of the die that would overlap moves later by as much as needed
    /// (the chain keeps its order); if one of them is a read, nothing is reserved (refused).
    pub fn read_suspending(
        &mut self,
        die: u32,
        at: Nanos,
        read_ns: Nanos,
        bytes: u64,
        timing: &SuspendTiming,
        shifts: &mut Vec<Shift>,
    ) -> Option<Nanos> {
        self.prune_die(die);
        let mut at = at;
        // Bound: each round moves `at` past one operation of the die.
        for _ in 0..=self.ops[die as usize].len() {
            let ops = &self.ops[die as usize];
            let index = ops.iter().position(|op| op.end_ns > at)?;
            let op = ops[index];
            if op.start_ns >= at + read_ns {
                return None;
            }
            if op.start_ns > at {
                if op.work == DieWork::Read {
                    at = op.end_ns;
                    continue;
                }
                // Not started: the read goes first and the operation starts after it.
                let read_end = at + read_ns;
                if !self.shift_chain(die, index, read_end, None, shifts) {
                    self.suspend_stats.refused_read_in_chain += 1;
                    return None;
                }
                self.suspend_stats.reads_ahead_of_queued += 1;
                self.dies[die as usize].reserve(at, read_ns);
                self.record(die, at, read_end, DieWork::Read);
                self.check_die(die);
                return Some(self.read_transfer(die, read_end, bytes));
            }
            // `op` is in progress at `at`.
            if op.work == DieWork::Read {
                at = op.end_ns;
                continue;
            }
            let in_suspension = at < op.suspended_until_ns;
            if !in_suspension && op.suspends >= timing.max_per_op {
                self.suspend_stats.refused_bound += 1;
                at = op.end_ns;
                continue;
            }
            let (read_start, added_ns) = if in_suspension {
                (op.suspended_until_ns, read_ns)
            } else {
                let latency = match op.work {
                    DieWork::Program => timing.program_suspend_ns,
                    _ => timing.erase_suspend_ns,
                };
                (at + latency, latency + read_ns + timing.resume_ns)
            };
            let read_end = read_start + read_ns;
            // The operation's own end moves by `added_ns`; the chain behind it as needed.
            if !self.shift_chain(die, index, op.end_ns + added_ns, Some(read_end), shifts) {
                self.suspend_stats.refused_read_in_chain += 1;
                return None;
            }
            if in_suspension {
                self.suspend_stats.reads_in_suspension += 1;
            } else {
                self.suspend_stats.suspends += 1;
                let op = &mut self.ops[die as usize][index];
                op.suspends += 1;
                assert!(op.suspends <= timing.max_per_op, "suspend bound exceeded");
            }
            self.check_die(die);
            return Some(self.read_transfer(die, read_end, bytes));
        }
        unreachable!("the die's operations were all passed")
    }

    /// Moves operation `index` of `die` so that it ends at `new_end` (when `suspended_until` is
    /// given: it is in progress and is being suspended until then) or, otherwise, starts at
    /// `new_end` (it has not started), and every later operation as far as needed to keep them
    /// disjoint. Returns false, changing nothing, when a read would have to move.
    fn shift_chain(
        &mut self,
        die: u32,
        index: usize,
        new_end: Nanos,
        suspended_until: Option<Nanos>,
        shifts: &mut Vec<Shift>,
    ) -> bool {
        let ops = &mut self.ops[die as usize];
        let first = ops[index];
        let first_shift = match suspended_until {
            Some(_) => new_end - first.end_ns,
            None => new_end - first.start_ns,
        };
        assert!(first_shift > 0, "a suspend moves its operation later");
        // Check first: the chain that moves must hold no read.
        let mut reach = first.end_ns + first_shift;
        let mut last = index;
        for later in ops.iter().skip(index + 1) {
            if later.start_ns >= reach {
                break;
            }
            if later.work == DieWork::Read {
                return false;
            }
            reach = later.end_ns + (reach - later.start_ns);
            last += 1;
        }
        if first.work == DieWork::Read {
            return false;
        }
        let mut moved_until = 0;
        for (position, op) in ops.iter_mut().enumerate().take(last + 1).skip(index) {
            let shift = if position == index {
                first_shift
            } else {
                moved_until - op.start_ns
            };
            let old_end = op.end_ns;
            if position == index && suspended_until.is_some() {
                // Suspended in progress: it keeps its start and ends later.
            } else {
                op.start_ns += shift;
            }
            op.end_ns += shift;
            moved_until = op.end_ns;
            self.suspend_stats.shifted_ns += shift;
            shifts.push(Shift {
                id: op.id,
                old_end_ns: old_end,
                new_end_ns: op.end_ns,
            });
        }
        // A suspension adds its latency, the reads and the resume overhead to the die's busy
        // time (all inside the suspended operation's stretch); moving a chain adds nothing.
        let added_busy = if suspended_until.is_some() {
            first_shift
        } else {
            0
        };
        let intervals = ops.iter().map(|op| (op.start_ns, op.end_ns));
        self.dies[die as usize].rebuild(intervals, added_busy);
        if let Some(until) = suspended_until {
            let op = &mut self.ops[die as usize][index];
            op.suspended_until_ns = until;
        }
        true
    }

    /// Invariants of a die's operations after a suspend.
    fn check_die(&self, die: u32) {
        let ops = &self.ops[die as usize];
        for pair in ops.iter().zip(ops.iter().skip(1)) {
            assert!(
                pair.0.end_ns <= pair.1.start_ns,
                "die {die}: operations overlap after a suspend"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn array() -> NandArray {
        let geometry = Geometry {
            channels: 2,
            dies_per_channel: 2,
            planes: 2,
            page_bytes: 16384,
            pages_per_block: 64,
        };
        let timing = Timing {
            read_ns: 50_000,
            program_ns: 1_000_000,
            erase_ns: 3_000_000,
            slc_program_ns: 300_000,
            slc_read_ns: 30_000,
            channel_bytes_per_sec: 400_000_000,
        };
        NandArray::new(geometry, timing)
    }

    #[test]
    fn geometry_units() {
        let nand = array();
        assert_eq!(nand.geometry.dies(), 4);
        assert_eq!(nand.geometry.units_per_program(), 8);
        assert_eq!(nand.geometry.units_per_block(), 512);
        assert_eq!(nand.geometry.channel_of(1), 1);
        assert_eq!(nand.geometry.channel_of(2), 0);
    }

    #[test]
    fn reads_on_one_die_serialise_and_on_two_dies_overlap() {
        let mut nand = array();
        let first = nand.read(0, 0, 50_000, 4096);
        let same_die = nand.read(0, 0, 50_000, 4096);
        assert!(
            same_die >= first + 50_000,
            "same die waits for the array read"
        );
        let mut nand = array();
        let a = nand.read(0, 0, 50_000, 4096);
        let b = nand.read(1, 0, 50_000, 4096);
        assert_eq!(a, b, "dies on different channels proceed in parallel");
    }

    #[test]
    fn timeline_fills_gaps_and_never_overlaps() {
        let mut line = Timeline::default();
        line.reserve(100, 50);
        line.reserve(300, 50);
        assert_eq!(line.first_fit(0, 100), 0);
        assert_eq!(line.first_fit(0, 101), 150);
        assert_eq!(line.first_fit(120, 10), 150);
        assert_eq!(line.first_fit(150, 200), 350);
        line.reserve(150, 150);
        assert_eq!(line.live().len(), 1, "adjacent intervals merge");
        assert_eq!(line.horizon_ns(), 350);
        line.prune(349);
        assert_eq!(line.live().len(), 1);
        line.prune(350);
        assert!(line.live().is_empty());
        assert_eq!(line.busy_total_ns(), 250);
    }

    /// The vector with a head keeps the intervals a plain deque (the former representation)
    /// keeps, and answers `first_fit` the same, under reservations at the back, in gaps and
    /// touching others, and prunes at increasing times.
    #[test]
    fn timeline_matches_a_plain_deque_of_intervals() {
        #[derive(Default)]
        struct Deque {
            busy: VecDeque<(Nanos, Nanos)>,
        }
        impl Deque {
            fn reserve(&mut self, start: Nanos, duration: Nanos) {
                if duration == 0 {
                    return;
                }
                let end = start + duration;
                let index = self.busy.partition_point(|&(s, _)| s < start);
                if index > 0 && self.busy[index - 1].1 == start {
                    self.busy[index - 1].1 = end;
                    if index < self.busy.len() && self.busy[index].0 == end {
                        let next_end = self.busy[index].1;
                        self.busy[index - 1].1 = next_end;
                        self.busy.remove(index);
                    }
                } else if index < self.busy.len() && self.busy[index].0 == end {
                    self.busy[index].0 = start;
                } else {
                    self.busy.insert(index, (start, end));
                }
            }
            fn prune(&mut self, now: Nanos) {
                while self.busy.front().is_some_and(|&(_, end)| end <= now) {
                    self.busy.pop_front();
                }
            }
        }
        let mut line = Timeline::default();
        let mut model = Deque::default();
        let mut next = crate::dev::test_rng(0x9e37_79b9_7f4a_7c15);
        let mut now = 0;
        let mut total = 0;
        for _ in 0..50_000 {
            match next() % 8 {
                0 => {
                    now += next() % 300;
                    line.prune(now);
                    model.prune(now);
                }
                _ => {
                    let at = now + next() % 2_000;
                    let duration = next() % 60;
                    let start = line.first_fit(at, duration);
                    line.reserve(start, duration);
                    model.reserve(start, duration);
                    total += duration;
                }
            }
            let expected: Vec<_> = model.busy.iter().copied().collect();
            assert_eq!(line.live(), &expected[..]);
            let probe = (now + next() % 2_000, next() % 100);
            let mut start = probe.0;
            for &(busy_start, busy_end) in &model.busy {
                if busy_end > start && busy_start < start + probe.1 {
                    start = busy_end;
                }
            }
            assert_eq!(line.first_fit(probe.0, probe.1), start);
        }
        assert_eq!(line.busy_total_ns(), total);
    }

    #[test]
    fn a_read_runs_before_a_program_reserved_for_later() {
        let mut nand = array();
        let (program_end, _) = nand.program(0, 1_000_000, 1_000_000);
        let read_end = nand.read(0, 0, 50_000, 4096);
        assert!(
            read_end < 1_000_000,
            "the die is idle until the program's data arrives"
        );
        assert!(program_end > 2_000_000);
    }

    const SUSPEND: SuspendTiming = SuspendTiming {
        program_suspend_ns: 100_000,
        erase_suspend_ns: 700_000,
        resume_ns: 20_000,
        max_per_op: 2,
    };

    /// Transfer of 4 KiB at 400 MB/s.
    const TRANSFER_4K: Nanos = 10_240;

    #[test]
    fn a_read_behind_a_program_waits_without_suspend_and_suspends_it_with() {
        // Without suspend: the read waits for the program.
        let mut nand = array();
        let (program_end, _) = nand.program(0, 0, 1_000_000);
        let read_end = nand.read(0, 200_000, 50_000, 4096);
        assert_eq!(read_end, program_end + 50_000 + TRANSFER_4K);
        // With suspend: read after the suspend latency; the program ends later by the suspend
        // latency, the read and the resume overhead.
        let mut nand = array();
        let (program_end, program) = nand.program(0, 0, 1_000_000);
        let mut shifts = Vec::new();
        let read_end = nand
            .read_suspending(0, 200_000, 50_000, 4096, &SUSPEND, &mut shifts)
            .expect("the program is suspended");
        assert_eq!(read_end, 200_000 + 100_000 + 50_000 + TRANSFER_4K);
        let delta = 100_000 + 50_000 + 20_000;
        assert_eq!(
            shifts,
            vec![Shift {
                id: program,
                old_end_ns: program_end,
                new_end_ns: program_end + delta
            }]
        );
        assert_eq!(nand.die_free_ns(0), program_end + delta);
        let op = nand.die_ops(0)[0];
        assert_eq!((op.work, op.suspends), (DieWork::Program, 1));
        assert_eq!(nand.suspend_stats().suspends, 1);
        // The die's busy time holds the program, the read and the suspend costs.
        assert_eq!(nand.die_busy_ns(0), program_end + delta);
    }

    #[test]
    fn a_suspend_moves_the_chain_behind_the_program_and_keeps_it_disjoint() {
        let mut nand = array();
        let (first_end, first) = nand.program(0, 0, 1_000_000);
        let (second_end, second) = nand.program(0, 0, 1_000_000);
        assert!(second_end > first_end);
        // A third program with a gap of 100 us after the second absorbs part of the move.
        let (third_end, third) = nand.program(0, second_end + 100_000, 1_000_000);
        let mut shifts = Vec::new();
        nand.read_suspending(0, 500_000, 50_000, 4096, &SUSPEND, &mut shifts)
            .expect("suspended");
        let delta = 170_000;
        let moved: Vec<(u64, Nanos)> = shifts.iter().map(|s| (s.id, s.new_end_ns)).collect();
        assert_eq!(
            moved,
            vec![
                (first, first_end + delta),
                (second, second_end + delta),
                (third, third_end + delta - 100_000)
            ]
        );
        let ops = nand.die_ops(0);
        assert_eq!(ops.len(), 3, "no program is lost");
        for pair in ops.iter().zip(ops.iter().skip(1)) {
            assert!(pair.0.end_ns <= pair.1.start_ns);
        }
        assert_eq!(
            ops[1].start_ns,
            first_end + delta,
            "the chain keeps its order"
        );
    }

    #[test]
    fn reads_in_a_suspension_share_it_and_the_bound_holds() {
        let mut nand = array();
        let (program_end, _) = nand.program(0, 0, 1_000_000);
        let mut shifts = Vec::new();
        let first = nand
            .read_suspending(0, 100_000, 50_000, 4096, &SUSPEND, &mut shifts)
            .unwrap();
        // A second read during the suspension goes right after the first, no new latency.
        let second = nand
            .read_suspending(0, 150_000, 50_000, 4096, &SUSPEND, &mut shifts)
            .unwrap();
        assert_eq!(second, first + 50_000);
        assert_eq!(nand.die_free_ns(0), program_end + 170_000 + 50_000);
        // After the resume: a second suspension (the bound is 2)...
        let resumed = 100_000 + 100_000 + 100_000 + 20_000;
        nand.read_suspending(0, resumed + 10_000, 50_000, 4096, &SUSPEND, &mut shifts)
            .unwrap();
        assert_eq!(nand.die_ops(0)[0].suspends, 2);
        let end_before = nand.die_free_ns(0);
        // ...and the third read waits for the program to end.
        let at = nand.die_ops(0)[0].suspended_until_ns + 30_000;
        assert!(nand
            .read_suspending(0, at, 50_000, 4096, &SUSPEND, &mut shifts)
            .is_none());
        assert_eq!(nand.suspend_stats().refused_bound, 1);
        assert_eq!(nand.die_free_ns(0), end_before, "nothing moved");
        assert_eq!(nand.die_ops(0)[0].suspends, 2);
        assert_eq!(nand.suspend_stats().reads_in_suspension, 1);
    }

    #[test]
    fn a_suspend_that_would_move_a_read_is_refused() {
        let mut nand = array();
        let (program_end, _) = nand.program(0, 0, 1_000_000);
        // A plain read queued right behind the program.
        nand.read(0, 0, 50_000, 4096);
        let mut shifts = Vec::new();
        assert!(nand
            .read_suspending(0, 100_000, 50_000, 4096, &SUSPEND, &mut shifts)
            .is_none());
        assert!(shifts.is_empty());
        assert_eq!(nand.suspend_stats().refused_read_in_chain, 1);
        assert_eq!(nand.die_free_ns(0), program_end + 50_000);
    }

    #[test]
    fn a_read_goes_ahead_of_a_program_not_yet_started() {
        let mut nand = array();
        let (program_end, program) = nand.program(0, 1_000_000, 1_000_000);
        let mut shifts = Vec::new();
        // 20 us before the program's start: too short a gap for a 50 us read.
        let read_end = nand
            .read_suspending(0, 980_000, 50_000, 4096, &SUSPEND, &mut shifts)
            .unwrap();
        // The array read ends at 1.03 ms; its data then waits for the channel, which carries the
        // program's 32 KiB (81.92 us) from 1 ms: channel transfers are not moved.
        assert_eq!(read_end, 1_000_000 + 81_920 + TRANSFER_4K);
        assert_eq!(nand.die_ops(0)[0].end_ns, 980_000 + 50_000);
        assert_eq!(shifts[0].id, program);
        assert_eq!(shifts[0].new_end_ns, program_end + 30_000);
        assert_eq!(nand.die_ops(0)[1].suspends, 0, "nothing was suspended");
        assert_eq!(nand.suspend_stats().reads_ahead_of_queued, 1);
        // A read with room before the program is a plain read.
        assert!(nand
            .read_suspending(0, 0, 50_000, 4096, &SUSPEND, &mut shifts)
            .is_none());
    }

    #[test]
    fn transfer_rounds_up() {
        assert_eq!(transfer_ns(4096, 400_000_000), 10_240);
        assert_eq!(transfer_ns(1, 3), 333_333_334);
    }
}
