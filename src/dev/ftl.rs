//! Page-level flash translation layer with over-provisioning, greedy garbage collection and
//! discard.
//!
//! Models: a 4 KiB logical page (`lpn`) maps to any 4 KiB slot (`ppn`) of its die; the die is fixed
//! by the address (static striping of `units_per_program`-sized chunks over dies, MQSim's static
//! "channel-way-die" allocation), the block and page within the die are chosen dynamically (the
//! next free slot of the die's open block). Overwrites invalidate the old slot. Each die keeps a
//! list of free (erased) blocks; when it has no more than `gc_free_blocks` left, greedy GC picks
//! the full block with the fewest valid slots, copies its valid data to a separate GC open block
//! (copy-back inside the die, no channel transfer) and erases it. The caller turns the returned
//! work (pages copied, blocks erased) into die time, which is how GC shows up as latency.
//!
//! Simplifications: blocks are multi-plane superblocks of one die; wear levelling, read disturb,
//! bad blocks and mapping-table caching (DFTL) are not modelled; the mapping table is assumed to be
//! in controller DRAM/SRAM.

use std::collections::VecDeque;

pub const UNMAPPED: u32 = u32::MAX;
const NO_BLOCK: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BlockState {
    Free,
    Open,
    Full,
}

#[derive(Debug, Clone, Copy)]
struct WritePoint {
    /// Block index within the die, or `NO_BLOCK`.
    block: u32,
    /// Next free slot (mapping unit) within the block.
    next: u32,
}

#[derive(Debug, Clone)]
struct DieState {
    free: VecDeque<u32>,
    host: WritePoint,
    gc: WritePoint,
}

/// Work done by garbage collection on one die, to be charged as die time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GcWork {
    pub units_copied: u64,
    pub blocks_erased: u64,
}

/// Counters over the FTL's life.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct FtlStats {
    pub host_units_programmed: u64,
    pub padding_units_programmed: u64,
    pub gc_units_copied: u64,
    pub blocks_erased: u64,
    pub units_discarded: u64,
}

#[derive(Debug, Clone)]
pub struct Ftl {
    dies: u32,
    units_per_program: u32,
    units_per_block: u32,
    blocks_per_die: u32,
    gc_free_blocks: u32,
    /// lpn -> ppn (global slot index) or UNMAPPED.
    map: Vec<u32>,
    /// ppn -> lpn, or UNMAPPED for a free, padded or invalidated slot.
    reverse: Vec<u32>,
    /// Valid slots per global block.
    valid: Vec<u32>,
    state: Vec<BlockState>,
    die_state: Vec<DieState>,
    pub stats: FtlStats,
}

impl Ftl {
    /// `logical_units` 4 KiB pages exported; `over_provisioning` extra physical space as a fraction
    /// of the logical space; GC starts when a die has at most `gc_free_blocks` erased blocks.
    pub fn new(
        logical_units: u64,
        dies: u32,
        units_per_program: u32,
        units_per_block: u32,
        over_provisioning: f64,
        gc_free_blocks: u32,
    ) -> Result<Self, String> {
        assert!(dies > 0 && units_per_program > 0 && units_per_block >= units_per_program);
        if !(0.0..=1.0).contains(&over_provisioning) || over_provisioning.is_nan() {
            return Err(format!(
                "over_provisioning {over_provisioning} must be a fraction between 0 and 1"
            ));
        }
        if gc_free_blocks < 2 {
            return Err("gc_free_blocks must be at least 2 (GC needs a block to copy into)".into());
        }
        if logical_units == 0 {
            return Err("capacity must be at least one 4 KiB page".into());
        }
        let chunks = logical_units.div_ceil(u64::from(units_per_program));
        let chunks_per_die = chunks.div_ceil(u64::from(dies));
        let units_per_die = chunks_per_die * u64::from(units_per_program);
        let data_blocks = units_per_die.div_ceil(u64::from(units_per_block));
        let op_blocks = ((data_blocks as f64) * over_provisioning).ceil() as u64;
        // Two open blocks (host and GC) plus the GC reserve come on top of the over-provisioning.
        let blocks_per_die = data_blocks + op_blocks.max(1) + u64::from(gc_free_blocks) + 2;
        let total_units = blocks_per_die * u64::from(dies) * u64::from(units_per_block);
        if total_units >= u64::from(UNMAPPED) || logical_units >= u64::from(UNMAPPED) {
            return Err("capacity too large for the model's 32-bit page map (max ~15 TiB)".into());
        }
        let blocks_per_die = blocks_per_die as u32;
        let total_blocks = (blocks_per_die * dies) as usize;
        let die_state = (0..dies)
            .map(|_| DieState {
                free: (0..blocks_per_die).collect(),
                host: WritePoint {
                    block: NO_BLOCK,
                    next: 0,
                },
                gc: WritePoint {
                    block: NO_BLOCK,
                    next: 0,
                },
            })
            .collect();
        Ok(Ftl {
            dies,
            units_per_program,
            units_per_block,
            blocks_per_die,
            gc_free_blocks,
            map: vec![UNMAPPED; logical_units as usize],
            reverse: vec![UNMAPPED; total_units as usize],
            valid: vec![0; total_blocks],
            state: vec![BlockState::Free; total_blocks],
            die_state,
            stats: FtlStats::default(),
        })
    }

    pub fn logical_units(&self) -> u64 {
        self.map.len() as u64
    }

    pub fn blocks_per_die(&self) -> u32 {
        self.blocks_per_die
    }

    /// The die that holds logical page `lpn` (static striping of program-unit chunks).
    pub fn die_of(&self, lpn: u32) -> u32 {
        (lpn / self.units_per_program) % self.dies
    }

    /// Physical slot of `lpn`, or `UNMAPPED`.
    pub fn lookup(&self, lpn: u32) -> u32 {
        self.map[lpn as usize]
    }

    /// Global program-unit index of a physical slot (slots in one program unit are read together).
    pub fn program_unit_of(&self, ppn: u32) -> u32 {
        ppn / self.units_per_program
    }

    pub fn free_blocks(&self, die: u32) -> usize {
        self.die_state[die as usize].free.len()
    }

    pub fn valid_units(&self) -> u64 {
        self.valid.iter().map(|&v| u64::from(v)).sum()
    }

    fn block_of(&self, ppn: u32) -> usize {
        (ppn / self.units_per_block) as usize
    }

    fn invalidate(&mut self, lpn: u32) -> bool {
        let old = self.map[lpn as usize];
        if old == UNMAPPED {
            return false;
        }
        let block = self.block_of(old);
        assert!(self.valid[block] > 0, "valid count underflow");
        assert_eq!(
            self.reverse[old as usize], lpn,
            "forward and reverse maps disagree"
        );
        self.valid[block] -= 1;
        self.reverse[old as usize] = UNMAPPED;
        self.map[lpn as usize] = UNMAPPED;
        true
    }

    /// Discard (TRIM/UNMAP) of one logical page. Returns whether it was mapped.
    pub fn discard(&mut self, lpn: u32) -> bool {
        let was_mapped = self.invalidate(lpn);
        if was_mapped {
            self.stats.units_discarded += 1;
        }
        was_mapped
    }

    fn take_free_block(&mut self, die: u32) -> u32 {
        let local = self.die_state[die as usize]
            .free
            .pop_front()
            .expect("GC keeps at least one free block per die");
        let global = (die * self.blocks_per_die + local) as usize;
        assert_eq!(self.state[global], BlockState::Free);
        assert_eq!(self.valid[global], 0);
        self.state[global] = BlockState::Open;
        local
    }

    /// Places `lpn` (or padding, when `lpn == UNMAPPED`) in the next slot of a write point.
    fn place(&mut self, die: u32, gc: bool, lpn: u32) {
        let upb = self.units_per_block;
        let point = if gc {
            self.die_state[die as usize].gc
        } else {
            self.die_state[die as usize].host
        };
        let mut point = point;
        if point.block == NO_BLOCK || point.next == upb {
            if point.block != NO_BLOCK {
                let global = (die * self.blocks_per_die + point.block) as usize;
                self.state[global] = BlockState::Full;
            }
            point = WritePoint {
                block: self.take_free_block(die),
                next: 0,
            };
        }
        let global_block = die * self.blocks_per_die + point.block;
        let ppn = global_block * upb + point.next;
        point.next += 1;
        if lpn != UNMAPPED {
            self.invalidate(lpn);
            self.map[lpn as usize] = ppn;
            self.reverse[ppn as usize] = lpn;
            self.valid[global_block as usize] += 1;
        }
        if gc {
            self.die_state[die as usize].gc = point;
        } else {
            self.die_state[die as usize].host = point;
        }
    }

    /// Programs one program unit of host data on `die`: `lpns` (at most `units_per_program`, all
    /// on `die`) followed by padding. Runs garbage collection first if the die is short of free
    /// blocks and returns the GC work done.
    pub fn program(&mut self, die: u32, lpns: &[u32]) -> GcWork {
        assert!(lpns.len() <= self.units_per_program as usize);
        let work = self.collect_if_needed(die);
        for &lpn in lpns {
            assert_eq!(
                self.die_of(lpn),
                die,
                "lpn {lpn} does not belong to die {die}"
            );
            self.place(die, false, lpn);
        }
        for _ in lpns.len()..self.units_per_program as usize {
            self.place(die, false, UNMAPPED);
        }
        self.stats.host_units_programmed += lpns.len() as u64;
        self.stats.padding_units_programmed +=
            (self.units_per_program as usize - lpns.len()) as u64;
        work
    }

    /// Greedy GC on `die` until it has more than `gc_free_blocks` free blocks.
    fn collect_if_needed(&mut self, die: u32) -> GcWork {
        let mut work = GcWork::default();
        let mut rounds = 0;
        while self.free_blocks(die) <= self.gc_free_blocks as usize {
            rounds += 1;
            assert!(
                rounds <= self.blocks_per_die,
                "GC makes no progress on die {die}"
            );
            let first = (die * self.blocks_per_die) as usize;
            let victim = (first..first + self.blocks_per_die as usize)
                .filter(|&b| self.state[b] == BlockState::Full)
                .min_by_key(|&b| (self.valid[b], b));
            let Some(victim) = victim else { break };
            assert!(
                self.valid[victim] < self.units_per_block,
                "GC victim has no invalid page: the die is over-full"
            );
            let base = victim as u32 * self.units_per_block;
            for slot in base..base + self.units_per_block {
                let lpn = self.reverse[slot as usize];
                if lpn != UNMAPPED {
                    self.place(die, true, lpn);
                    work.units_copied += 1;
                }
            }
            assert_eq!(self.valid[victim], 0, "every valid page was moved");
            self.state[victim] = BlockState::Free;
            let local = victim as u32 - die * self.blocks_per_die;
            self.die_state[die as usize].free.push_back(local);
            work.blocks_erased += 1;
        }
        self.stats.gc_units_copied += work.units_copied;
        self.stats.blocks_erased += work.blocks_erased;
        work
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ftl() -> Ftl {
        // 2 dies, 4 units per program, 16 units per block, 1024 logical units.
        Ftl::new(1024, 2, 4, 16, 0.07, 2).unwrap()
    }

    #[test]
    fn striping_alternates_dies_per_chunk() {
        let ftl = ftl();
        assert_eq!(ftl.die_of(0), 0);
        assert_eq!(ftl.die_of(3), 0);
        assert_eq!(ftl.die_of(4), 1);
        assert_eq!(ftl.die_of(8), 0);
    }

    #[test]
    fn overwrite_moves_the_mapping_and_invalidates_the_old_slot() {
        let mut ftl = ftl();
        ftl.program(0, &[0, 1]);
        let first = ftl.lookup(0);
        assert_ne!(first, UNMAPPED);
        ftl.program(0, &[0]);
        assert_ne!(ftl.lookup(0), first);
        assert_eq!(ftl.valid_units(), 2);
        assert!(ftl.discard(1));
        assert!(!ftl.discard(1));
        assert_eq!(ftl.lookup(1), UNMAPPED);
        assert_eq!(ftl.valid_units(), 1);
    }

    #[test]
    fn sustained_overwrites_trigger_gc_and_keep_the_map_consistent() {
        let mut ftl = ftl();
        let die0: Vec<u32> = (0..1024).filter(|&l| ftl.die_of(l) == 0).collect();
        for chunk in die0.chunks(4) {
            ftl.program(0, chunk);
        }
        assert_eq!(ftl.stats.gc_units_copied, 0, "filling once needs no GC");
        let mut x: u64 = 7;
        for _ in 0..4000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let lpn = die0[(x % die0.len() as u64) as usize];
            ftl.program(0, &[lpn]);
        }
        assert!(ftl.stats.blocks_erased > 0);
        assert!(ftl.stats.gc_units_copied > 0);
        assert_eq!(ftl.valid_units(), die0.len() as u64);
        for &lpn in &die0 {
            let ppn = ftl.lookup(lpn);
            assert_eq!(ftl.reverse[ppn as usize], lpn);
        }
    }
}
