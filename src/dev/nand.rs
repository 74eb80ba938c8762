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
//! - No program/erase suspend (an array read waits for a program in progress on its die).

use crate::units::{Nanos, NS_PER_SEC, PAGE_SIZE};
use std::collections::VecDeque;

/// Upper bound on the future busy intervals one resource holds (each started command adds a few);
/// exceeding it is a model bug, not an input error.
const TIMELINE_INTERVALS_MAX: usize = 1 << 16;

/// A resource's busy intervals, sorted, disjoint, from the last `prune` on.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    busy: VecDeque<(Nanos, Nanos)>,
    /// End of the last interval (0 if none ever).
    horizon_ns: Nanos,
    busy_total_ns: Nanos,
}

impl Timeline {
    /// Earliest start at or after `at` of an idle stretch of `duration`.
    pub fn first_fit(&self, at: Nanos, duration: Nanos) -> Nanos {
        let mut start = at;
        for &(busy_start, busy_end) in &self.busy {
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
        let index = self.busy.partition_point(|&(s, _)| s < start);
        if index > 0 {
            assert!(self.busy[index - 1].1 <= start, "overlapping reservation");
        }
        if index < self.busy.len() {
            assert!(end <= self.busy[index].0, "overlapping reservation");
        }
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
        assert!(
            self.busy.len() <= TIMELINE_INTERVALS_MAX,
            "timeline holds too many intervals"
        );
        self.horizon_ns = self.horizon_ns.max(end);
        self.busy_total_ns += duration;
    }

    /// Forgets intervals that end at or before `now`: no reservation will start before it.
    pub fn prune(&mut self, now: Nanos) {
        while self.busy.front().is_some_and(|&(_, end)| end <= now) {
            self.busy.pop_front();
        }
    }

    /// End of the latest reservation.
    pub fn horizon_ns(&self) -> Nanos {
        self.horizon_ns
    }

    pub fn busy_total_ns(&self) -> Nanos {
        self.busy_total_ns
    }
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
}

impl NandArray {
    pub fn new(geometry: Geometry, timing: Timing) -> Self {
        NandArray {
            geometry,
            timing,
            dies: vec![Timeline::default(); geometry.dies() as usize],
            channels: vec![Timeline::default(); geometry.channels as usize],
        }
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
    pub fn prune(&mut self, now: Nanos) {
        self.dies.iter_mut().for_each(|t| t.prune(now));
        self.channels.iter_mut().for_each(|t| t.prune(now));
    }

    /// Array read on `die` (all planes of one program unit), then transfer of `bytes` over the
    /// die's channel. Returns the time the data is in the controller.
    pub fn read(&mut self, die: u32, at: Nanos, read_ns: Nanos, bytes: u64) -> Nanos {
        let die_start = self.dies[die as usize].first_fit(at, read_ns);
        self.dies[die as usize].reserve(die_start, read_ns);
        let channel = self.geometry.channel_of(die) as usize;
        let transfer_ns = self.timing.channel_transfer_ns(bytes);
        let transfer_start = self.channels[channel].first_fit(die_start + read_ns, transfer_ns);
        self.channels[channel].reserve(transfer_start, transfer_ns);
        transfer_start + transfer_ns
    }

    /// Transfer of one program unit to `die` over its channel, then the program; the die is busy
    /// from the start of the transfer (its page registers latch the data). Returns the end.
    pub fn program(&mut self, die: u32, at: Nanos, program_ns: Nanos) -> Nanos {
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
        start + transfer_ns + program_ns
    }

    /// Occupies `die` for `busy_ns` in its first idle stretch at or after `at` (garbage collection
    /// copy-back, erase). Returns the end.
    pub fn occupy(&mut self, die: u32, at: Nanos, busy_ns: Nanos) -> Nanos {
        let start = self.dies[die as usize].first_fit(at, busy_ns);
        self.dies[die as usize].reserve(start, busy_ns);
        start + busy_ns
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
        assert_eq!(line.busy.len(), 1, "adjacent intervals merge");
        assert_eq!(line.horizon_ns(), 350);
        line.prune(349);
        assert_eq!(line.busy.len(), 1);
        line.prune(350);
        assert!(line.busy.is_empty());
        assert_eq!(line.busy_total_ns(), 250);
    }

    #[test]
    fn a_read_runs_before_a_program_reserved_for_later() {
        let mut nand = array();
        let program_end = nand.program(0, 1_000_000, 1_000_000);
        let read_end = nand.read(0, 0, 50_000, 4096);
        assert!(
            read_end < 1_000_000,
            "the die is idle until the program's data arrives"
        );
        assert!(program_end > 2_000_000);
    }

    #[test]
    fn transfer_rounds_up() {
        assert_eq!(transfer_ns(4096, 400_000_000), 10_240);
        assert_eq!(transfer_ns(1, 3), 333_333_334);
    }
}
