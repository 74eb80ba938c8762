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
//! - A die reserved for an operation is FIFO: a later reservation never fills an earlier idle gap.
//! - Cache read: the die may start its next array read while the channel still transfers the
//!   previous page out of the page register.
//! - No program/erase suspend (an array read waits for a program in progress on its die).

use crate::units::{Nanos, NS_PER_SEC, PAGE_SIZE};

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

/// The dies and channels as busy-until timelines.
#[derive(Debug, Clone)]
pub struct NandArray {
    pub geometry: Geometry,
    pub timing: Timing,
    die_free_ns: Vec<Nanos>,
    channel_free_ns: Vec<Nanos>,
    /// Total time each die spent busy, for utilisation reports and tests.
    die_busy_ns: Vec<Nanos>,
}

impl NandArray {
    pub fn new(geometry: Geometry, timing: Timing) -> Self {
        NandArray {
            geometry,
            timing,
            die_free_ns: vec![0; geometry.dies() as usize],
            channel_free_ns: vec![0; geometry.channels as usize],
            die_busy_ns: vec![0; geometry.dies() as usize],
        }
    }

    pub fn die_free_ns(&self, die: u32) -> Nanos {
        self.die_free_ns[die as usize]
    }

    pub fn die_busy_ns(&self, die: u32) -> Nanos {
        self.die_busy_ns[die as usize]
    }

    /// Latest time at which any die or channel is busy.
    pub fn all_free_ns(&self) -> Nanos {
        let dies = self.die_free_ns.iter().copied().max().unwrap_or(0);
        let channels = self.channel_free_ns.iter().copied().max().unwrap_or(0);
        dies.max(channels)
    }

    /// Array read of one program unit's page(s) on `die`, then transfer of `bytes` over the
    /// die's channel. Returns (time the data is in the controller, time the die is free).
    pub fn read(&mut self, die: u32, at: Nanos, read_ns: Nanos, bytes: u64) -> Nanos {
        let die_start = self.die_free_ns[die as usize].max(at);
        let die_end = die_start + read_ns;
        self.occupy_die(die, die_start, die_end);
        let channel = self.geometry.channel_of(die) as usize;
        let transfer_start = self.channel_free_ns[channel].max(die_end);
        let transfer_end = transfer_start + self.timing.channel_transfer_ns(bytes);
        self.channel_free_ns[channel] = transfer_end;
        transfer_end
    }

    /// Transfer of one program unit to `die` over its channel, then the program. Returns the
    /// time the program ends.
    pub fn program(&mut self, die: u32, at: Nanos, program_ns: Nanos) -> Nanos {
        let channel = self.geometry.channel_of(die) as usize;
        let bytes = self.geometry.program_unit_bytes();
        // The die must be free to latch data into its page registers.
        let transfer_start = self.channel_free_ns[channel]
            .max(self.die_free_ns[die as usize])
            .max(at);
        let transfer_end = transfer_start + self.timing.channel_transfer_ns(bytes);
        self.channel_free_ns[channel] = transfer_end;
        let program_end = transfer_end + program_ns;
        self.occupy_die(die, transfer_start, program_end);
        program_end
    }

    /// Occupies `die` for `busy_ns` from the earliest time it is free at or after `at` (garbage
    /// collection copy-back, erase, SLC-to-TLC migration). Returns the end.
    pub fn occupy(&mut self, die: u32, at: Nanos, busy_ns: Nanos) -> Nanos {
        let start = self.die_free_ns[die as usize].max(at);
        let end = start + busy_ns;
        self.occupy_die(die, start, end);
        end
    }

    fn occupy_die(&mut self, die: u32, start: Nanos, end: Nanos) {
        assert!(end >= start);
        assert!(
            start >= self.die_free_ns[die as usize],
            "die reservations are FIFO"
        );
        self.die_free_ns[die as usize] = end;
        self.die_busy_ns[die as usize] += end - start;
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
    fn transfer_rounds_up() {
        assert_eq!(transfer_ns(4096, 400_000_000), 10_240);
        assert_eq!(transfer_ns(1, 3), 333_333_334);
    }
}
