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
//!
//! Memory (of the simulator, not of the modelled controller): the forward (lpn -> ppn) and reverse
//! (ppn -> lpn) maps are `ChunkedMap`s, materialised in chunks of [`CHUNK_ENTRIES`] entries on
//! the first write into a chunk, so a run costs memory for the pages it touches, not for the
//! device's capacity. A chunk never written reads as the *initial* state: the first `prefilled`
//! logical pages mapped where a sequential fill of a fresh FTL puts them
//! ([`Ftl::precondition_sequential`], which therefore costs no memory), everything else unmapped.
//! This changes no result: every lookup returns what the dense arrays returned.

use std::collections::VecDeque;

pub const UNMAPPED: u32 = u32::MAX;
const NO_BLOCK: u32 = u32::MAX;

/// Entries per chunk of the forward and reverse maps: 4,096 x 4 bytes = 16 KiB per chunk, 16 MiB
/// of logical space per forward chunk (a size chosen here, not from a source: small enough that a
/// run touching a few GB materialises a few MB of map, large enough that the chunk table costs 8
/// bytes per 16 MiB, 0.5 KiB per GiB).
pub const CHUNK_ENTRIES: usize = 4096;

/// A `u32` array materialised in chunks of [`CHUNK_ENTRIES`] on first write. An absent chunk
/// reads as the values of the `initial` function its callers pass (a pure function of the index),
/// and a chunk is filled from it when materialised, so the array always reads as if it had been
/// allocated dense, filled with `initial` and then written.
#[derive(Debug, Clone)]
struct ChunkedMap {
    len: u64,
    chunks: Vec<Option<Box<[u32; CHUNK_ENTRIES]>>>,
}

impl ChunkedMap {
    fn new(len: u64) -> Self {
        let chunks = len.div_ceil(CHUNK_ENTRIES as u64) as usize;
        ChunkedMap {
            len,
            chunks: (0..chunks).map(|_| None).collect(),
        }
    }

    fn get(&self, index: u32, initial: impl Fn(u64) -> u32) -> u32 {
        assert!(
            u64::from(index) < self.len,
            "index {index} beyond the map's {} entries",
            self.len
        );
        let index = index as usize;
        match &self.chunks[index / CHUNK_ENTRIES] {
            Some(chunk) => chunk[index % CHUNK_ENTRIES],
            None => initial(index as u64),
        }
    }

    fn set(&mut self, index: u32, value: u32, initial: impl Fn(u64) -> u32) {
        assert!(
            u64::from(index) < self.len,
            "index {index} beyond the map's {} entries",
            self.len
        );
        let index = index as usize;
        let chunk = self.chunks[index / CHUNK_ENTRIES].get_or_insert_with(|| {
            let base = (index / CHUNK_ENTRIES * CHUNK_ENTRIES) as u64;
            let entries: Vec<u32> = (base..base + CHUNK_ENTRIES as u64).map(initial).collect();
            entries
                .into_boxed_slice()
                .try_into()
                .expect("a chunk has CHUNK_ENTRIES entries")
        });
        chunk[index % CHUNK_ENTRIES] = value;
    }

    fn resident_chunks(&self) -> usize {
        self.chunks.iter().filter(|chunk| chunk.is_some()).count()
    }

    fn is_untouched(&self) -> bool {
        self.chunks.iter().all(Option::is_none)
    }
}

/// Where the initial state puts pages: the static striping and the sequential fill's rule.
#[derive(Debug, Clone, Copy)]
struct Layout {
    dies: u64,
    units_per_program: u64,
    /// Slots per die (`blocks_per_die * units_per_block`); die `d`'s slots are
    /// `d * slots_per_die..(d + 1) * slots_per_die`.
    slots_per_die: u64,
    /// Logical pages `0..prefilled` are mapped in the initial state.
    prefilled: u64,
}

impl Layout {
    /// The slot a sequential fill of a fresh FTL gives `lpn`, or `UNMAPPED` past the fill. Program
    /// unit `k` (lpns `k * upp..(k + 1) * upp`) is die `k % dies`'s program number `k / dies`, and
    /// a fresh die takes its free blocks in order and fills them slot by slot, so its `j`-th
    /// program occupies die-local slots `j * upp..(j + 1) * upp`.
    fn initial_ppn(&self, lpn: u64) -> u32 {
        if lpn >= self.prefilled {
            return UNMAPPED;
        }
        let unit = lpn / self.units_per_program;
        let die = unit % self.dies;
        let program = unit / self.dies;
        (die * self.slots_per_die + program * self.units_per_program + lpn % self.units_per_program)
            as u32
    }

    /// The inverse of `initial_ppn`: the lpn a sequential fill put in slot `ppn`, or `UNMAPPED` for
    /// a slot it left free or padded.
    fn initial_lpn(&self, ppn: u64) -> u32 {
        let die = ppn / self.slots_per_die;
        let local = ppn % self.slots_per_die;
        let unit = (local / self.units_per_program) * self.dies + die;
        let lpn = unit * self.units_per_program + local % self.units_per_program;
        if die < self.dies && lpn < self.prefilled {
            lpn as u32
        } else {
            UNMAPPED
        }
    }
}

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
    logical_units: u64,
    layout: Layout,
    /// lpn -> ppn (global slot index) or UNMAPPED; initially `layout.initial_ppn`.
    map: ChunkedMap,
    /// ppn -> lpn, or UNMAPPED for a free, padded or invalidated slot; initially
    /// `layout.initial_lpn`.
    reverse: ChunkedMap,
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
            logical_units,
            layout: Layout {
                dies: u64::from(dies),
                units_per_program: u64::from(units_per_program),
                slots_per_die: u64::from(blocks_per_die) * u64::from(units_per_block),
                prefilled: 0,
            },
            map: ChunkedMap::new(logical_units),
            reverse: ChunkedMap::new(total_units),
            valid: vec![0; total_blocks],
            state: vec![BlockState::Free; total_blocks],
            die_state,
            stats: FtlStats::default(),
        })
    }

    pub fn logical_units(&self) -> u64 {
        self.logical_units
    }

    /// Materialises every chunk of both maps: the FTL then reads and writes dense arrays only
    /// (the reference the lazy maps are tested against).
    #[cfg(test)]
    fn materialise_all(&mut self) {
        for lpn in (0..self.logical_units).step_by(CHUNK_ENTRIES) {
            let ppn = self.lookup(lpn as u32);
            self.set_map(lpn as u32, ppn);
        }
        for ppn in (0..self.reverse.len).step_by(CHUNK_ENTRIES) {
            let lpn = self.owner(ppn as u32);
            self.set_owner(ppn as u32, lpn);
        }
    }

    /// Chunks of [`CHUNK_ENTRIES`] entries materialised in the forward and reverse maps.
    pub fn resident_chunks(&self) -> (usize, usize) {
        (self.map.resident_chunks(), self.reverse.resident_chunks())
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
        let layout = self.layout;
        self.map.get(lpn, |l| layout.initial_ppn(l))
    }

    /// The logical page in slot `ppn`, or `UNMAPPED`.
    fn owner(&self, ppn: u32) -> u32 {
        let layout = self.layout;
        self.reverse.get(ppn, |p| layout.initial_lpn(p))
    }

    fn set_map(&mut self, lpn: u32, ppn: u32) {
        let layout = self.layout;
        self.map.set(lpn, ppn, |l| layout.initial_ppn(l));
    }

    fn set_owner(&mut self, ppn: u32, lpn: u32) {
        let layout = self.layout;
        self.reverse.set(ppn, lpn, |p| layout.initial_lpn(p));
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
        let old = self.lookup(lpn);
        if old == UNMAPPED {
            return false;
        }
        let block = self.block_of(old);
        assert!(self.valid[block] > 0, "valid count underflow");
        assert_eq!(self.owner(old), lpn, "forward and reverse maps disagree");
        self.valid[block] -= 1;
        self.set_owner(old, UNMAPPED);
        self.set_map(lpn, UNMAPPED);
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

    /// Maps logical pages `0..units` exactly as programming them in order, `units_per_program` at
    /// a time on a fresh FTL, would (the state, write points, free lists and counters that
    /// [`Ftl::program`] leaves), in time and memory independent of `units`: the maps keep the fill
    /// as their initial state. Returns false, changing nothing, if the FTL has been written or the
    /// fill would need garbage collection (the caller then programs the pages one unit at a time).
    pub fn precondition_sequential(&mut self, units: u64) -> bool {
        assert!(units <= self.logical_units, "fill beyond the logical space");
        let fresh = self.stats == FtlStats::default()
            && self.layout.prefilled == 0
            && self.map.is_untouched()
            && self.reverse.is_untouched()
            && self
                .die_state
                .iter()
                .all(|die| die.host.block == NO_BLOCK && die.gc.block == NO_BLOCK);
        if !fresh {
            return false;
        }
        let upp = u64::from(self.units_per_program);
        let upb = u64::from(self.units_per_block);
        let dies = u64::from(self.dies);
        let programs = units.div_ceil(upp);
        let padding = programs * upp - units;
        // Slots placed on each die, and whether a program's GC check would find the die short of
        // free blocks (`collect_if_needed` runs before each program; the last is the tightest).
        let placed = |die: u64| (programs / dies + u64::from(die < programs % dies)) * upp;
        for die in 0..dies {
            let slots = placed(die);
            if slots == 0 {
                continue;
            }
            let taken_before_last = (slots - upp).div_ceil(upb);
            if u64::from(self.blocks_per_die) - taken_before_last <= u64::from(self.gc_free_blocks)
                || slots.div_ceil(upb) > u64::from(self.blocks_per_die)
            {
                return false;
            }
        }
        // The last program (on die (programs - 1) % dies) ends with the padding.
        let padded_die = (programs + dies - 1) % dies;
        for die in 0..dies {
            let slots = placed(die);
            if slots == 0 {
                continue;
            }
            let blocks = slots.div_ceil(upb);
            let first = (die * u64::from(self.blocks_per_die)) as usize;
            let pad = if die == padded_die { padding } else { 0 };
            for block in 0..blocks {
                let start = block * upb;
                let end = (start + upb).min(slots);
                let padded = end.saturating_sub(start.max(slots - pad));
                let global = first + block as usize;
                self.valid[global] = (end - start - padded) as u32;
                self.state[global] = if block + 1 == blocks {
                    BlockState::Open
                } else {
                    BlockState::Full
                };
            }
            let state = &mut self.die_state[die as usize];
            state.free.drain(..blocks as usize);
            state.host = WritePoint {
                block: (blocks - 1) as u32,
                next: (slots - (blocks - 1) * upb) as u32,
            };
        }
        self.layout.prefilled = units;
        self.stats.host_units_programmed = units;
        self.stats.padding_units_programmed = padding;
        true
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
            self.set_map(lpn, ppn);
            self.set_owner(ppn, lpn);
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
                let lpn = self.owner(slot);
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
            assert_eq!(ftl.owner(ppn), lpn);
        }
    }

    /// Programs lpns `0..units` one program unit at a time, as `FlashDevice::precondition` did
    /// before `precondition_sequential`.
    fn fill_by_programs(ftl: &mut Ftl, units: u64) {
        let per_program = u64::from(ftl.units_per_program);
        let mut first = 0;
        while first < units {
            let last = (first + per_program).min(units);
            let lpns: Vec<u32> = (first as u32..last as u32).collect();
            let work = ftl.program(ftl.die_of(first as u32), &lpns);
            assert_eq!(work, GcWork::default());
            first = last;
        }
    }

    /// Everything observable, and every per-block array, of two FTLs agrees.
    fn assert_same(lazy: &Ftl, dense: &Ftl) {
        assert_eq!(lazy.stats, dense.stats);
        assert_eq!(lazy.valid, dense.valid);
        assert_eq!(lazy.state, dense.state);
        assert_eq!(
            format!("{:?}", lazy.die_state),
            format!("{:?}", dense.die_state)
        );
        for lpn in 0..lazy.logical_units() as u32 {
            assert_eq!(lazy.lookup(lpn), dense.lookup(lpn), "lpn {lpn}");
        }
        for ppn in 0..lazy.reverse.len as u32 {
            assert_eq!(lazy.owner(ppn), dense.owner(ppn), "ppn {ppn}");
        }
    }

    #[test]
    fn sequential_precondition_equals_programming_every_unit() {
        // 3 dies, 4 units per program, 24 per block (not a power of two), 3 chunks and a bit.
        for units in [0, 1, 5, 4099, 7000, 12_289, 12_300] {
            let new = || Ftl::new(12_300, 3, 4, 24, 0.07, 2).unwrap();
            let mut lazy = new();
            assert!(lazy.precondition_sequential(units));
            assert_eq!(lazy.resident_chunks(), (0, 0));
            let mut dense = new();
            dense.materialise_all();
            fill_by_programs(&mut dense, units);
            assert_same(&lazy, &dense);
            // Once written, the FTL is no longer fresh.
            assert!(!dense.precondition_sequential(units));
        }
    }

    mod lazy_maps {
        use super::*;
        use proptest::prelude::*;

        #[derive(Debug, Clone)]
        enum Op {
            /// Host writes of lpns `start..start + len` (each die's share in program units).
            Write(u32, u32),
            Discard(u32, u32),
        }

        // 2 dies, 4 units per program, 64 per block, 7 % over-provisioning: 12,388 logical units
        // (three full chunks and a partial one), 108 blocks per die.
        const UNITS: u32 = 3 * CHUNK_ENTRIES as u32 + 100;

        fn op() -> impl Strategy<Value = Op> {
            // Writes clustered in a hot region (to drive GC) with some anywhere.
            let start = prop_oneof![3 => 0u32..2_000, 1 => 0u32..UNITS];
            prop_oneof![
                6 => (start.clone(), 1u32..400).prop_map(|(s, n)| Op::Write(s, n)),
                1 => (start, 1u32..300).prop_map(|(s, n)| Op::Discard(s, n)),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig {
                cases: 48,
                failure_persistence: None,
                rng_seed: proptest::test_runner::RngSeed::Fixed(0x6674_6c21),
                ..ProptestConfig::default()
            })]

            /// Random writes, discards and the GC they cause on lazily materialised maps
            /// (preconditioned compactly) give the same mappings, GC work and counters as on
            /// fully materialised (dense) maps preconditioned by programming every unit.
            #[test]
            fn lazy_maps_behave_as_dense_ones(
                fill in prop_oneof![Just(0.0), Just(1.0), 0.0f64..=1.0],
                ops in proptest::collection::vec(op(), 1..120),
            ) {
                let new = || Ftl::new(u64::from(UNITS), 2, 4, 64, 0.07, 2).unwrap();
                let units = (f64::from(UNITS) * fill) as u64;
                let mut lazy = new();
                prop_assert!(lazy.precondition_sequential(units));
                let mut dense = new();
                dense.materialise_all();
                fill_by_programs(&mut dense, units);
                for op in ops {
                    match op {
                        Op::Write(start, len) => {
                            let end = (start + len).min(UNITS);
                            for die in 0..2 {
                                let lpns: Vec<u32> =
                                    (start..end).filter(|&l| lazy.die_of(l) == die).collect();
                                for unit in lpns.chunks(4) {
                                    prop_assert_eq!(
                                        lazy.program(die, unit),
                                        dense.program(die, unit)
                                    );
                                }
                            }
                        }
                        Op::Discard(start, len) => {
                            for lpn in start..(start + len).min(UNITS) {
                                prop_assert_eq!(lazy.discard(lpn), dense.discard(lpn));
                            }
                        }
                    }
                    prop_assert_eq!(lazy.stats, dense.stats);
                }
                assert_same(&lazy, &dense);
                prop_assert_eq!(lazy.valid_units(), dense.valid_units());
            }

            /// The chunked array reads as a dense one filled with its initial values and written.
            #[test]
            fn chunked_map_reads_as_a_dense_array(
                len in 1u64..20_000,
                writes in proptest::collection::vec((any::<u32>(), any::<u32>()), 0..200),
            ) {
                let initial = |i: u64| if i.is_multiple_of(3) { UNMAPPED } else { (i * 7) as u32 };
                let mut map = ChunkedMap::new(len);
                let mut dense: Vec<u32> = (0..len).map(initial).collect();
                for (index, value) in writes {
                    let index = (u64::from(index) % len) as u32;
                    map.set(index, value, initial);
                    dense[index as usize] = value;
                    prop_assert_eq!(map.get(index, initial), value);
                }
                for (index, &value) in dense.iter().enumerate() {
                    prop_assert_eq!(map.get(index as u32, initial), value);
                }
                prop_assert!(map.resident_chunks() <= len.div_ceil(CHUNK_ENTRIES as u64) as usize);
            }
        }
    }

    #[test]
    fn a_large_ftl_with_few_writes_materialises_few_chunks() {
        // 1 TiB of 4 KiB pages on 8 dies, 16 units per program, 3,072 per block (a TLC block of
        // 192 16 KiB x 4-plane pages), half of it preconditioned.
        let units: u64 = 1 << 28;
        let mut ftl = Ftl::new(units, 8, 16, 3072, 0.07, 2).unwrap();
        assert!(ftl.precondition_sequential(units / 2));
        assert_eq!(ftl.resident_chunks(), (0, 0));
        assert_eq!(ftl.lookup(0), 0, "lpn 0 is the first slot of die 0");
        assert_ne!(ftl.lookup((units / 2 - 1) as u32), UNMAPPED);
        assert_eq!(ftl.lookup((units / 2) as u32), UNMAPPED);
        // 64 MiB overwritten in the preconditioned half and 64 MiB written beyond it.
        for first in [1u32 << 20, (units / 2) as u32 + (1 << 20)] {
            for die in 0..8 {
                let lpns: Vec<u32> = (first..first + 16_384)
                    .filter(|&l| ftl.die_of(l) == die)
                    .collect();
                for unit in lpns.chunks(16) {
                    ftl.program(die, unit);
                }
            }
        }
        assert_eq!(ftl.stats.host_units_programmed, units / 2 + 32_768);
        let (forward, reverse) = ftl.resident_chunks();
        // Each 64 MiB is 4 forward chunks; reverse: the slots freed by the overwrite (2,048 per
        // die, at most 2 chunks each) and the new slots at each die's write point (4,096 per die).
        assert_eq!(forward, 8);
        assert!(reverse <= 8 * (2 + 3), "{reverse} reverse chunks");
        let total_chunks = 2 * units as usize / CHUNK_ENTRIES;
        assert!(forward + reverse < total_chunks / 1000);
    }
}
