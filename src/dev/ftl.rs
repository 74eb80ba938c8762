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
//! A written chunk is held compactly while it can be: the FTL programs whole program units, so
//! data written sequentially leaves each aligned group of `units_per_program` (upp) forward
//! entries as consecutive slots and each program unit's upp reverse entries as consecutive pages
//! of one die's stripe. Such a group costs one `u32` (its first value), as does a group that is all
//! unmapped or still initial; a group that fits none of these (partly rewritten, padded, copied by
//! GC) keeps its upp values in an exception slot of its chunk, and a chunk with more than
//! [`MAX_EXCEPTION_ENTRIES`] of those becomes dense. Every write re-encodes its whole group, so a
//! group in transition reads exactly as written; a program unit of distinct pages writes each
//! map group by group (one read and one encoding per group, not per page: `Ftl::place_unit`),
//! and a whole program unit of consecutive pages moving from one whole unit (or from nowhere)
//! into one run of slots reads and writes each of its three groups by its code alone, with one
//! valid-count update per block (`Ftl::place_whole_unit`).
//! Writing sequentially thus costs 8 / upp bytes per 4 KiB page instead of 8
//! (`bg-write-fg-read` on `emmc-5.0`, upp 8, writing 8 GiB / 64 GiB: 59.7 / 237 MB peak RSS
//! before, 36.9 / 63.7 MB after). This changes no result: every lookup returns what the dense
//! arrays returned.

use std::collections::VecDeque;

pub const UNMAPPED: u32 = u32::MAX;
const NO_BLOCK: u32 = u32::MAX;

/// Entries per chunk of the forward and reverse maps: 4,096 x 4 bytes = 16 KiB per chunk, 16 MiB
/// of logical space per forward chunk (a size chosen here, not from a source: small enough that a
/// run touching a few GB materialises a few MB of map, large enough that the chunk table costs 8
/// bytes per 16 MiB, 0.5 KiB per GiB).
pub const CHUNK_ENTRIES: usize = 4096;

/// Largest group of entries a compact chunk describes by one code (`units_per_program` is 16 at
/// most in the profiles; larger groups fall back to dense chunks).
const MAX_GROUP: usize = 64;

/// Codes of a compact chunk's groups. Below `CODE_EXCEPTION`: the group's first value, the others
/// following by the map's [`Run`]. `CODE_EXCEPTION + s` (below `CODE_INITIAL`): the group's values
/// are stored in exception slot `s`. `CODE_INITIAL`: the group reads as the `initial` function.
/// `CODE_ALL_MAX`: every entry of the group is `u32::MAX` (`UNMAPPED`).
const CODE_EXCEPTION: u32 = 0xF000_0000;
const CODE_INITIAL: u32 = u32::MAX - 1;
const CODE_ALL_MAX: u32 = u32::MAX;

/// A compact chunk keeps at most this many entries in exception slots (a quarter of a dense
/// chunk's), then becomes dense.
const MAX_EXCEPTION_ENTRIES: usize = CHUNK_ENTRIES / 4;

/// How the values of a group follow from its first: what programming whole program units leaves
/// in each map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Run {
    /// `first, first + 1, ...`: the slots of a program unit (forward map).
    Consecutive,
    /// The logical pages of one die in order: `first + 1` within a striping unit of `unit`
    /// pages, then a jump of `skip` over the other dies' units (reverse map: `unit` =
    /// `units_per_program`, `skip` = `(dies - 1) * units_per_program`).
    Striped { unit: u64, skip: u64 },
}

impl Run {
    /// The value `offset` entries after `first` (may exceed `u32::MAX`: then no entry has it).
    fn value(self, first: u32, offset: usize) -> u64 {
        let first = u64::from(first);
        let offset = offset as u64;
        match self {
            Run::Consecutive => first + offset,
            Run::Striped { unit, skip } => first + offset + skip * ((first % unit + offset) / unit),
        }
    }
}

/// A chunk described group by group: one code per group of `group` entries, plus the values of
/// the groups no code describes (exceptions).
#[derive(Debug, Clone)]
struct Compact {
    codes: Box<[u32]>,
    /// Exception slots, `group` values each.
    exceptions: Vec<u32>,
    /// Exception slots no group uses.
    free: Vec<u32>,
}

#[derive(Debug, Clone)]
enum Chunk {
    /// Never written: reads as `initial`.
    Initial,
    Compact(Box<Compact>),
    Dense(Box<[u32; CHUNK_ENTRIES]>),
}

/// Memory held by one map: chunks materialised densely, chunks held compactly, and the `u32`
/// entries they store (dense entries, and the codes and exception slots of compact chunks).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MapResidency {
    pub dense_chunks: usize,
    pub compact_chunks: usize,
    pub entries: usize,
}

/// How one aligned group of a map's entries reads, as [`ChunkedMap::read_group`] sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GroupRead {
    /// Every entry is `u32::MAX` (`UNMAPPED`).
    AllMax,
    /// The entries follow the map's [`Run`] from this first value.
    Run(u32),
    /// Neither.
    Other,
}

impl GroupRead {
    /// How `values` (a group starting at an index that is a multiple of its length) read.
    fn of(values: &[u32], run: Run) -> GroupRead {
        if values.iter().all(|&v| v == u32::MAX) {
            GroupRead::AllMax
        } else if (1..values.len())
            .all(|offset| run.value(values[0], offset) == u64::from(values[offset]))
        {
            GroupRead::Run(values[0])
        } else {
            GroupRead::Other
        }
    }
}

/// A `u32` array materialised in chunks of [`CHUNK_ENTRIES`] on first write. An absent chunk
/// reads as the values of the `initial` function its callers pass (a pure function of the index).
/// A written chunk is first *compact*: per aligned group of `group` entries one code, the group's
/// first value when the others follow from it by the map's [`Run`] (or "all `u32::MAX`", or "as
/// `initial`"); a group that fits none of these keeps its values in an exception slot. Every write
/// re-encodes its whole group, so a group in transition (partly rewritten) reads exactly as
/// written. A chunk with more than [`MAX_EXCEPTION_ENTRIES`] exception entries becomes dense
/// (filled from what it read) and stays dense. The array always reads as if it had been allocated
/// dense, filled with `initial` and then written.
#[derive(Debug, Clone)]
struct ChunkedMap {
    len: u64,
    /// Entries per group of a compact chunk; 0: chunks go dense on their first write.
    group: usize,
    run: Run,
    chunks: Vec<Chunk>,
}

impl ChunkedMap {
    /// A map of `len` entries; `group` 0 or 1, above [`MAX_GROUP`] or not dividing
    /// [`CHUNK_ENTRIES`] disables compact chunks.
    fn new(len: u64, group: usize, run: Run) -> Self {
        let chunks = len.div_ceil(CHUNK_ENTRIES as u64) as usize;
        let group = if (2..=MAX_GROUP).contains(&group) && CHUNK_ENTRIES.is_multiple_of(group) {
            group
        } else {
            0
        };
        ChunkedMap {
            len,
            group,
            run,
            chunks: (0..chunks).map(|_| Chunk::Initial).collect(),
        }
    }

    fn check(&self, index: u32) {
        assert!(
            u64::from(index) < self.len,
            "index {index} beyond the map's {} entries",
            self.len
        );
    }

    fn get(&self, index: u32, initial: impl Fn(u64) -> u32) -> u32 {
        self.check(index);
        let index = index as usize;
        let local = index % CHUNK_ENTRIES;
        match &self.chunks[index / CHUNK_ENTRIES] {
            Chunk::Initial => initial(index as u64),
            Chunk::Dense(chunk) => chunk[local],
            Chunk::Compact(chunk) => chunk.read(self.group, self.run, index, &initial),
        }
    }

    /// Entries `first..first + out.len()` into `out`: what [`Self::get`] reads for each, with
    /// one look at a compact chunk's code for the entries of one group.
    fn get_run(&self, first: u32, out: &mut [u32], initial: impl Fn(u64) -> u32) {
        let Some(count) = u32::try_from(out.len()).ok().filter(|&n| n > 0) else {
            assert!(out.is_empty(), "run longer than the map");
            return;
        };
        self.check(first);
        self.check(first.checked_add(count - 1).expect("run within u32"));
        let mut at = 0;
        while at < out.len() {
            let index = first as usize + at;
            let local = index % CHUNK_ENTRIES;
            match &self.chunks[index / CHUNK_ENTRIES] {
                Chunk::Initial => {
                    out[at] = initial(index as u64);
                    at += 1;
                }
                Chunk::Dense(chunk) => {
                    out[at] = chunk[local];
                    at += 1;
                }
                Chunk::Compact(chunk) => {
                    let offset = local % self.group;
                    let take = (self.group - offset).min(out.len() - at);
                    chunk.read_part(
                        self.group,
                        self.run,
                        index,
                        &mut out[at..at + take],
                        &initial,
                    );
                    at += take;
                }
            }
        }
    }

    /// How the group of compact-chunk size starting at `first` (a multiple of the map's group
    /// size, which must not be 0) reads: one look at its code in a compact chunk.
    fn read_group(&self, first: u32, initial: impl Fn(u64) -> u32) -> GroupRead {
        let group = self.group;
        debug_assert!(
            group > 0 && (first as usize).is_multiple_of(group),
            "an aligned group"
        );
        self.check(first + (group as u32 - 1));
        let index = first as usize;
        let local = index % CHUNK_ENTRIES;
        let mut buffer = [0u32; MAX_GROUP];
        let values = &mut buffer[..group];
        match &self.chunks[index / CHUNK_ENTRIES] {
            Chunk::Compact(chunk) => match chunk.codes[local / group] {
                code if code < CODE_EXCEPTION => return GroupRead::Run(code),
                CODE_ALL_MAX => return GroupRead::AllMax,
                _ => chunk.read_part(group, self.run, index, values, &initial),
            },
            Chunk::Initial => {
                for (k, value) in values.iter_mut().enumerate() {
                    *value = initial((index + k) as u64);
                }
            }
            Chunk::Dense(chunk) => values.copy_from_slice(&chunk[local..local + group]),
        }
        GroupRead::of(values, self.run)
    }

    /// Sets the group starting at `first` (as in [`Self::read_group`]) to every entry
    /// `u32::MAX` (`GroupRead::AllMax`) or to the run from a first value below
    /// `CODE_EXCEPTION` (`GroupRead::Run`): what [`Self::set_many`] leaves for the same writes
    /// (the same chunk, code and exception slots), without reading the group or checking the
    /// values' pattern.
    fn write_group(&mut self, first: u32, to: GroupRead) {
        let group = self.group;
        debug_assert!(
            group > 0 && (first as usize).is_multiple_of(group),
            "an aligned group"
        );
        self.check(first + (group as u32 - 1));
        let code = match to {
            GroupRead::AllMax => CODE_ALL_MAX,
            GroupRead::Run(value) => {
                assert!(value < CODE_EXCEPTION, "a run's first value is a code");
                debug_assert!(self.run.value(value, group - 1) <= u64::from(u32::MAX));
                value
            }
            GroupRead::Other => unreachable!("a group is written as a pattern"),
        };
        let index = first as usize;
        let (chunk_index, local) = (index / CHUNK_ENTRIES, index % CHUNK_ENTRIES);
        if let Chunk::Initial = self.chunks[chunk_index] {
            // As `set_many` materialises it (a compact chunk, since the map has groups).
            self.chunks[chunk_index] = Chunk::Compact(Box::new(Compact {
                codes: vec![CODE_INITIAL; CHUNK_ENTRIES / group].into_boxed_slice(),
                exceptions: Vec::new(),
                free: Vec::new(),
            }));
        }
        let run = self.run;
        match &mut self.chunks[index / CHUNK_ENTRIES] {
            Chunk::Compact(chunk) => chunk.set_code(local / group, code, group),
            Chunk::Dense(chunk) => {
                for (offset, entry) in chunk[local..local + group].iter_mut().enumerate() {
                    *entry = if code == CODE_ALL_MAX {
                        u32::MAX
                    } else {
                        run.value(code, offset) as u32
                    };
                }
            }
            Chunk::Initial => unreachable!("materialised above"),
        }
    }

    fn set(&mut self, index: u32, value: u32, initial: impl Fn(u64) -> u32) {
        self.set_many(&[(index, value)], initial);
    }

    /// Writes each `(index, value)` in order. In a compact chunk every write re-encodes its
    /// whole group; consecutive writes into one group (a program unit's entries) share one
    /// read and one encoding of it. Reads exactly as the writes one at a time would leave it.
    fn set_many(&mut self, writes: &[(u32, u32)], initial: impl Fn(u64) -> u32) {
        let (group, run) = (self.group, self.run);
        let mut at = 0;
        while at < writes.len() {
            let (index, value) = writes[at];
            self.check(index);
            let index = index as usize;
            let (chunk_index, local) = (index / CHUNK_ENTRIES, index % CHUNK_ENTRIES);
            if let Chunk::Initial = self.chunks[chunk_index] {
                self.chunks[chunk_index] = match CHUNK_ENTRIES.checked_div(group) {
                    None => Chunk::Dense(self.dense_chunk(chunk_index, &initial)),
                    Some(groups) => Chunk::Compact(Box::new(Compact {
                        codes: vec![CODE_INITIAL; groups].into_boxed_slice(),
                        exceptions: Vec::new(),
                        free: Vec::new(),
                    })),
                };
            }
            if let Chunk::Dense(chunk) = &mut self.chunks[chunk_index] {
                chunk[local] = value;
                at += 1;
                continue;
            }
            // Compact: a compact chunk exists only with groups (`new`).
            let first = index - local % group;
            let count = writes[at..]
                .iter()
                .take_while(|&&(i, _)| (i as usize).wrapping_sub(first) < group)
                .count();
            for &(i, _) in &writes[at + 1..at + count] {
                self.check(i);
            }
            let Chunk::Compact(chunk) = &mut self.chunks[chunk_index] else {
                unreachable!("materialised above, not dense")
            };
            let mut buffer = [0u32; MAX_GROUP];
            let values = &mut buffer[..group];
            // The group's present values, unless the writes replace every one of them (a
            // program unit's entries).
            let covered = writes[at..at + count]
                .iter()
                .fold(0u64, |mask, &(i, _)| mask | 1u64 << (i as usize - first));
            if covered != u64::MAX >> (64 - group) {
                chunk.read_part(group, run, first, values, &initial);
            }
            for &(i, value) in &writes[at..at + count] {
                values[i as usize - first] = value;
            }
            let fits = chunk.store(local / group, values, run, first as u64, &initial);
            if !fits {
                let group_start = first % CHUNK_ENTRIES;
                let mut dense = self.dense_chunk(chunk_index, &initial);
                dense[group_start..group_start + group].copy_from_slice(&buffer[..group]);
                self.chunks[chunk_index] = Chunk::Dense(dense);
            }
            at += count;
        }
    }

    /// Chunk `chunk_index` as a dense array of what it reads now.
    fn dense_chunk(
        &self,
        chunk_index: usize,
        initial: &impl Fn(u64) -> u32,
    ) -> Box<[u32; CHUNK_ENTRIES]> {
        let base = chunk_index * CHUNK_ENTRIES;
        let end = (base + CHUNK_ENTRIES).min(self.len as usize);
        let entries: Vec<u32> = (base..base + CHUNK_ENTRIES)
            .map(|index| {
                if index < end {
                    self.get(index as u32, initial)
                } else {
                    initial(index as u64)
                }
            })
            .collect();
        entries
            .into_boxed_slice()
            .try_into()
            .expect("a chunk has CHUNK_ENTRIES entries")
    }

    fn residency(&self) -> MapResidency {
        let mut residency = MapResidency::default();
        for chunk in &self.chunks {
            match chunk {
                Chunk::Initial => {}
                Chunk::Dense(_) => {
                    residency.dense_chunks += 1;
                    residency.entries += CHUNK_ENTRIES;
                }
                Chunk::Compact(chunk) => {
                    residency.compact_chunks += 1;
                    residency.entries += chunk.codes.len() + chunk.exceptions.len();
                }
            }
        }
        residency
    }

    fn is_untouched(&self) -> bool {
        self.chunks
            .iter()
            .all(|chunk| matches!(chunk, Chunk::Initial))
    }

    /// Makes every chunk dense (the reference the compact and lazy chunks are tested against).
    #[cfg(test)]
    fn materialise_all(&mut self, initial: impl Fn(u64) -> u32) {
        for chunk_index in 0..self.chunks.len() {
            if !matches!(self.chunks[chunk_index], Chunk::Dense(_)) {
                self.chunks[chunk_index] = Chunk::Dense(self.dense_chunk(chunk_index, &initial));
            }
        }
        self.group = 0;
    }
}

impl Compact {
    /// What entry `index` of the map reads (`index` in this chunk, `group` the map's group size).
    fn read(&self, group: usize, run: Run, index: usize, initial: &impl Fn(u64) -> u32) -> u32 {
        let local = index % CHUNK_ENTRIES;
        let offset = local % group;
        match self.codes[local / group] {
            code if code < CODE_EXCEPTION => run.value(code, offset) as u32,
            CODE_ALL_MAX => u32::MAX,
            CODE_INITIAL => initial(index as u64),
            code => self.exceptions[(code - CODE_EXCEPTION) as usize * group + offset],
        }
    }

    /// What entries `index..index + out.len()` of the map read, all in `index`'s group.
    fn read_part(
        &self,
        group: usize,
        run: Run,
        index: usize,
        out: &mut [u32],
        initial: &impl Fn(u64) -> u32,
    ) {
        let local = index % CHUNK_ENTRIES;
        let offset = local % group;
        debug_assert!(offset + out.len() <= group, "entries beyond the group");
        match self.codes[local / group] {
            code if code < CODE_EXCEPTION => {
                for (k, entry) in out.iter_mut().enumerate() {
                    *entry = run.value(code, offset + k) as u32;
                }
            }
            CODE_ALL_MAX => out.fill(u32::MAX),
            CODE_INITIAL => {
                for (k, entry) in out.iter_mut().enumerate() {
                    *entry = initial((index + k) as u64);
                }
            }
            code => {
                let base = (code - CODE_EXCEPTION) as usize * group + offset;
                out.copy_from_slice(&self.exceptions[base..base + out.len()]);
            }
        }
    }

    /// Gives group `group` (of `size` entries) `code`, which is not an exception slot, freeing
    /// the slot it held, if any.
    fn set_code(&mut self, group: usize, code: u32, size: usize) {
        debug_assert!(!(CODE_EXCEPTION..CODE_INITIAL).contains(&code));
        let old = self.codes[group];
        if (CODE_EXCEPTION..CODE_INITIAL).contains(&old) {
            self.free.push(old - CODE_EXCEPTION);
            if self.free.len() * size == self.exceptions.len() {
                // No group uses a slot (the usual case between two groups in transition):
                // the next exception starts from slot 0 again.
                self.exceptions.clear();
                self.free.clear();
            }
        }
        self.codes[group] = code;
    }

    /// Encodes group `group` (entries `first..first + values.len()` of the map) as `values`;
    /// false if that needs more exception entries than a compact chunk may hold.
    fn store(
        &mut self,
        group: usize,
        values: &[u32],
        run: Run,
        first: u64,
        initial: &impl Fn(u64) -> u32,
    ) -> bool {
        let size = values.len();
        let code = if values.iter().all(|&v| v == u32::MAX) {
            CODE_ALL_MAX
        } else if values[0] < CODE_EXCEPTION
            && (1..size).all(|offset| run.value(values[0], offset) == u64::from(values[offset]))
        {
            values[0]
        } else if (0..size).all(|offset| initial(first + offset as u64) == values[offset]) {
            CODE_INITIAL
        } else {
            CODE_EXCEPTION
        };
        if code != CODE_EXCEPTION {
            self.set_code(group, code, size);
            return true;
        }
        let old = self.codes[group];
        let old_slot = (CODE_EXCEPTION..CODE_INITIAL)
            .contains(&old)
            .then(|| (old - CODE_EXCEPTION) as usize);
        let slot = match old_slot {
            Some(slot) => slot,
            None => {
                if let Some(slot) = self.free.pop() {
                    slot as usize
                } else {
                    if self.exceptions.len() + size > MAX_EXCEPTION_ENTRIES {
                        return false;
                    }
                    self.exceptions.extend_from_slice(values);
                    self.exceptions.len() / size - 1
                }
            }
        };
        self.exceptions[slot * size..(slot + 1) * size].copy_from_slice(values);
        self.codes[group] = CODE_EXCEPTION + slot as u32;
        true
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
    /// The physical blocks per die and the physical 4 KiB slots in all of an FTL of these
    /// parameters (see [`Ftl::new`]); the slots must stay below [`UNMAPPED`].
    pub fn layout(
        logical_units: u64,
        dies: u32,
        units_per_program: u32,
        units_per_block: u32,
        over_provisioning: f64,
        gc_free_blocks: u32,
    ) -> (u64, u64) {
        let chunks = logical_units.div_ceil(u64::from(units_per_program));
        let chunks_per_die = chunks.div_ceil(u64::from(dies));
        let units_per_die = chunks_per_die * u64::from(units_per_program);
        let data_blocks = units_per_die.div_ceil(u64::from(units_per_block));
        let op_blocks = ((data_blocks as f64) * over_provisioning).ceil() as u64;
        // Two open blocks (host and GC) plus the GC reserve come on top of the over-provisioning.
        let blocks_per_die = data_blocks + op_blocks.max(1) + u64::from(gc_free_blocks) + 2;
        let total_units = blocks_per_die
            .saturating_mul(u64::from(dies))
            .saturating_mul(u64::from(units_per_block));
        (blocks_per_die, total_units)
    }

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
        let (blocks_per_die, total_units) = Self::layout(
            logical_units,
            dies,
            units_per_program,
            units_per_block,
            over_provisioning,
            gc_free_blocks,
        );
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
            map: ChunkedMap::new(logical_units, units_per_program as usize, Run::Consecutive),
            reverse: ChunkedMap::new(
                total_units,
                units_per_program as usize,
                Run::Striped {
                    unit: u64::from(units_per_program),
                    skip: u64::from(dies - 1) * u64::from(units_per_program),
                },
            ),
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
        let layout = self.layout;
        self.map.materialise_all(|l| layout.initial_ppn(l));
        self.reverse.materialise_all(|p| layout.initial_lpn(p));
    }

    /// Chunks of [`CHUNK_ENTRIES`] entries materialised (dense or compact) in the forward and
    /// reverse maps, and the entries they store.
    pub fn resident_chunks(&self) -> (MapResidency, MapResidency) {
        (self.map.residency(), self.reverse.residency())
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
        let Some(old) = self.release_old_slot(lpn) else {
            return false;
        };
        self.set_owner(old, UNMAPPED);
        self.set_map(lpn, UNMAPPED);
        true
    }

    /// The slot `lpn` is mapped to, no longer counted valid in its block (the maps are left to
    /// the caller), or `None` when it is unmapped.
    fn release_old_slot(&mut self, lpn: u32) -> Option<u32> {
        let old = self.lookup(lpn);
        if old == UNMAPPED {
            return None;
        }
        let block = self.block_of(old);
        assert!(self.valid[block] > 0, "valid count underflow");
        assert_eq!(self.owner(old), lpn, "forward and reverse maps disagree");
        self.valid[block] -= 1;
        Some(old)
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
        let ppn = self.next_slot(die, gc);
        if lpn != UNMAPPED {
            self.invalidate(lpn);
            self.set_map(lpn, ppn);
            self.set_owner(ppn, lpn);
            let block = self.block_of(ppn);
            self.valid[block] += 1;
        }
    }

    /// Takes the next slot of a write point (the next free block when its block is full).
    fn next_slot(&mut self, die: u32, gc: bool) -> u32 {
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
        if gc {
            self.die_state[die as usize].gc = point;
        } else {
            self.die_state[die as usize].host = point;
        }
        ppn
    }

    /// Programs one program unit of host data on `die`: `lpns` (at most `units_per_program`, all
    /// on `die`) followed by padding. Runs garbage collection first if the die is short of free
    /// blocks and returns the GC work done.
    pub fn program(&mut self, die: u32, lpns: &[u32]) -> GcWork {
        self.program_with(die, lpns, true)
    }

    /// [`Ftl::program`]; `by_unit` false places the pages one by one (the reference the
    /// grouped map writes are tested against).
    fn program_with(&mut self, die: u32, lpns: &[u32], by_unit: bool) -> GcWork {
        assert!(lpns.len() <= self.units_per_program as usize);
        let work = self.collect_if_needed(die);
        // Consecutive lpns within one striping unit (data written sequentially) are on one die
        // and distinct: one check stands for the page-by-page ones.
        let upp = self.units_per_program;
        let consecutive = lpns.windows(2).all(|w| w[1] == w[0].wrapping_add(1));
        let one_unit = consecutive
            && lpns
                .first()
                .zip(lpns.last())
                .is_some_and(|(&first, &last)| first <= last && first / upp == last / upp);
        if one_unit {
            let lpn = lpns[0];
            assert_eq!(
                self.die_of(lpn),
                die,
                "lpn {lpn} does not belong to die {die}"
            );
        } else {
            for &lpn in lpns {
                assert_eq!(
                    self.die_of(lpn),
                    die,
                    "lpn {lpn} does not belong to die {die}"
                );
            }
        }
        let distinct = one_unit || lpns.iter().enumerate().all(|(i, l)| !lpns[..i].contains(l));
        if by_unit && one_unit && self.place_whole_unit(die, lpns) {
            // Placed group by group.
        } else if by_unit && distinct && lpns.len() <= MAX_GROUP {
            self.place_unit(die, lpns);
        } else {
            self.place_one_by_one(die, lpns);
        }
        self.stats.host_units_programmed += lpns.len() as u64;
        self.stats.padding_units_programmed +=
            (self.units_per_program as usize - lpns.len()) as u64;
        work
    }

    /// The slots of one program unit, `lpns` then padding, placed one `place` at a time.
    fn place_one_by_one(&mut self, die: u32, lpns: &[u32]) {
        for &lpn in lpns {
            self.place(die, false, lpn);
        }
        for _ in lpns.len()..self.units_per_program as usize {
            self.place(die, false, UNMAPPED);
        }
    }

    /// What [`Ftl::place_unit`] does when `lpns` (consecutive, within one striping unit) are a
    /// whole program unit whose old slots, if any, are one whole program unit holding exactly
    /// them, and whose new slots are one run of the die's open host block; returns false,
    /// changing nothing, otherwise. Each map group (the lpns', the old slots', the new slots')
    /// is read by its code and written as a code, and each block's valid count changes once:
    /// the maps, counts and write point end as `place_unit` leaves them.
    fn place_whole_unit(&mut self, die: u32, lpns: &[u32]) -> bool {
        let upp = self.units_per_program as usize;
        if lpns.len() != upp || self.map.group != upp || self.reverse.group != upp {
            return false;
        }
        let lpn = lpns[0];
        if !(lpn as usize).is_multiple_of(upp) || lpn >= CODE_EXCEPTION {
            return false;
        }
        let layout = self.layout;
        let same_block = |ftl: &Self, first: u32| {
            (first as usize).is_multiple_of(upp)
                && ftl.block_of(first) == ftl.block_of(first + (upp as u32 - 1))
        };
        let old = match self.map.read_group(lpn, |l| layout.initial_ppn(l)) {
            GroupRead::AllMax => None,
            GroupRead::Run(old) => {
                // The old slots: one program unit of one block, owned by exactly these lpns
                // (the reverse map's run from `lpn`, which is aligned, is `lpn, lpn + 1, ...`).
                if !same_block(self, old)
                    || self.reverse.read_group(old, |p| layout.initial_lpn(p))
                        != GroupRead::Run(lpn)
                {
                    return false;
                }
                Some(old)
            }
            GroupRead::Other => return false,
        };
        let Some(ppn) = self.peek_host_run(die, upp as u32) else {
            return false;
        };
        if ppn >= CODE_EXCEPTION || !same_block(self, ppn) {
            return false;
        }
        if let Some(old) = old {
            // release_old_slot, page by page.
            let block = self.block_of(old);
            assert!(self.valid[block] >= upp as u32, "valid count underflow");
            self.valid[block] -= upp as u32;
            self.reverse.write_group(old, GroupRead::AllMax);
        }
        let taken = self.next_slot(die, false);
        debug_assert_eq!(taken, ppn, "the slot peeked at");
        self.die_state[die as usize].host.next += upp as u32 - 1;
        let block = self.block_of(ppn);
        self.valid[block] += upp as u32;
        self.map.write_group(lpn, GroupRead::Run(ppn));
        self.reverse.write_group(ppn, GroupRead::Run(lpn));
        true
    }

    /// The first of the next `count` slots of `die`'s host write point when they are
    /// consecutive slots of one block (what `count` calls of [`Self::next_slot`] would take),
    /// without taking them.
    fn peek_host_run(&self, die: u32, count: u32) -> Option<u32> {
        let upb = self.units_per_block;
        let state = &self.die_state[die as usize];
        let point = state.host;
        let (block, next) = if point.block == NO_BLOCK || point.next == upb {
            (*state.free.front()?, 0)
        } else {
            (point.block, point.next)
        };
        (next + count <= upb).then(|| (die * self.blocks_per_die + block) * upb + next)
    }

    /// What [`Ftl::place_one_by_one`] does for distinct `lpns`, with each map written group by
    /// group ([`ChunkedMap::set_many`]) instead of entry by entry: a program unit's new slots
    /// and (for data written sequentially) its lpns and their old slots each fall in one group.
    /// The same state results: with distinct lpns no lookup reads what an earlier page of the
    /// unit wrote (a new slot was free, so no lpn mapped to it; an old slot is only ever
    /// unmapped), and the final value of every entry is the last one written to it.
    fn place_unit(&mut self, die: u32, lpns: &[u32]) {
        let mut old_slots = [(0u32, UNMAPPED); MAX_GROUP];
        let mut forward = [(0u32, 0u32); MAX_GROUP];
        let mut reverse = [(0u32, 0u32); MAX_GROUP];
        let mut unmapped = 0;
        // The lpns' slots and those slots' owners, read as runs where they are consecutive
        // (data written sequentially) and one by one otherwise. The maps do not change before
        // the writes below, so this reads what `release_old_slot` would page by page.
        let n = lpns.len();
        let layout = self.layout;
        let mut olds = [UNMAPPED; MAX_GROUP];
        if n > 0 && lpns.windows(2).all(|w| w[1] == w[0].wrapping_add(1)) {
            self.map
                .get_run(lpns[0], &mut olds[..n], |l| layout.initial_ppn(l));
        } else {
            for (old, &lpn) in olds.iter_mut().zip(lpns) {
                *old = self.lookup(lpn);
            }
        }
        let mut owners = [UNMAPPED; MAX_GROUP];
        if olds[0] != UNMAPPED && olds[..n].windows(2).all(|w| w[1] == w[0].wrapping_add(1)) {
            self.reverse
                .get_run(olds[0], &mut owners[..n], |p| layout.initial_lpn(p));
        } else {
            for (owner, &old) in owners.iter_mut().zip(&olds[..n]) {
                if old != UNMAPPED {
                    *owner = self.owner(old);
                }
            }
        }
        for (i, &lpn) in lpns.iter().enumerate() {
            let old = olds[i];
            if old != UNMAPPED {
                // release_old_slot.
                let block = self.block_of(old);
                assert!(self.valid[block] > 0, "valid count underflow");
                assert_eq!(owners[i], lpn, "forward and reverse maps disagree");
                self.valid[block] -= 1;
                old_slots[unmapped] = (old, UNMAPPED);
                unmapped += 1;
            }
            let ppn = self.next_slot(die, false);
            let block = self.block_of(ppn);
            self.valid[block] += 1;
            forward[i] = (lpn, ppn);
            reverse[i] = (ppn, lpn);
        }
        for _ in lpns.len()..self.units_per_program as usize {
            self.next_slot(die, false);
        }
        self.reverse
            .set_many(&old_slots[..unmapped], |p| layout.initial_lpn(p));
        self.map.set_many(&forward[..n], |l| layout.initial_ppn(l));
        self.reverse
            .set_many(&reverse[..n], |p| layout.initial_lpn(p));
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
            assert_eq!(lazy.resident_chunks(), Default::default());
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
            /// Host writes of lpns `start..start + len` in order through per-die buffers of a
            /// program unit, programmed when full (as the device's write cache does): whole
            /// program units of consecutive pages, or units straddling two after a flush.
            Sequential(u32, u32),
            /// One lpn through its die's buffer (a small write among the sequential ones).
            Buffered(u32),
            /// Programs every partial buffer, padded.
            Flush,
            Discard(u32, u32),
        }

        // 2 dies, 4 units per program, 64 per block, 7 % over-provisioning: 12,388 logical units
        // (three full chunks and a partial one), 108 blocks per die.
        const UNITS: u32 = 3 * CHUNK_ENTRIES as u32 + 100;

        fn op() -> impl Strategy<Value = Op> {
            // Writes clustered in a hot region (to drive GC) with some anywhere.
            let start = prop_oneof![3 => 0u32..2_000, 1 => 0u32..UNITS];
            // Sequential runs mostly from a program-unit boundary.
            let aligned = prop_oneof![3 => (0u32..UNITS / 4).prop_map(|u| u * 4), 1 => 0u32..UNITS];
            prop_oneof![
                4 => (start.clone(), 1u32..400).prop_map(|(s, n)| Op::Write(s, n)),
                4 => (aligned, 1u32..3_000).prop_map(|(s, n)| Op::Sequential(s, n)),
                2 => (0u32..UNITS).prop_map(Op::Buffered),
                1 => Just(Op::Flush),
                1 => (start, 1u32..300).prop_map(|(s, n)| Op::Discard(s, n)),
            ]
        }

        /// Puts `lpn` in its die's buffer and programs the buffer on both FTLs when it is full.
        fn buffer(
            lazy: &mut Ftl,
            dense: &mut Ftl,
            buffers: &mut [Vec<u32>],
            lpn: u32,
        ) -> Result<(), TestCaseError> {
            let die = lazy.die_of(lpn);
            let buffer = &mut buffers[die as usize];
            if !buffer.contains(&lpn) {
                buffer.push(lpn);
            }
            if buffer.len() == 4 {
                prop_assert_eq!(
                    lazy.program(die, buffer),
                    dense.program_with(die, buffer, false)
                );
                buffer.clear();
            }
            Ok(())
        }

        proptest! {
            #![proptest_config(ProptestConfig {
                cases: 48,
                failure_persistence: None,
                rng_seed: proptest::test_runner::RngSeed::Fixed(0x6674_6c21),
                ..ProptestConfig::default()
            })]

            /// Random and sequential writes, discards and the GC they cause on lazily
            /// materialised, compact maps (preconditioned compactly, program units written group
            /// by group) give the same mappings, GC work and counters as on fully materialised
            /// (dense) maps preconditioned by programming every unit and written page by page.
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
                let mut buffers = vec![Vec::new(); 2];
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
                                        dense.program_with(die, unit, false)
                                    );
                                }
                            }
                        }
                        Op::Sequential(start, len) => {
                            for lpn in start..(start + len).min(UNITS) {
                                buffer(&mut lazy, &mut dense, &mut buffers, lpn)?;
                            }
                        }
                        Op::Buffered(lpn) => buffer(&mut lazy, &mut dense, &mut buffers, lpn)?,
                        Op::Flush => {
                            for (die, buffer) in buffers.iter_mut().enumerate() {
                                if !buffer.is_empty() {
                                    prop_assert_eq!(
                                        lazy.program(die as u32, buffer),
                                        dense.program_with(die as u32, buffer, false)
                                    );
                                    buffer.clear();
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
                let (forward, reverse) = lazy.resident_chunks();
                for residency in [forward, reverse] {
                    prop_assert!(
                        residency.entries
                            <= residency.dense_chunks * CHUNK_ENTRIES
                                + residency.compact_chunks
                                    * (CHUNK_ENTRIES / 4 + MAX_EXCEPTION_ENTRIES)
                    );
                }
            }
        }

        #[derive(Debug, Clone)]
        enum MapOp {
            /// One entry set to a value.
            Set(u32, u32),
            /// Entries from `start` set to the values the map's run gives from `first`.
            Run(u32, u32, u32),
            /// Entries from `start` set to `u32::MAX` (unmapped).
            Clear(u32, u32),
            /// Entries from `start` set back to their initial values.
            Restore(u32, u32),
            /// `set_many`: (offset from `start`, value) pairs in order; offsets may repeat and
            /// jump between groups and chunks.
            Many(u32, Vec<(u16, u32)>),
        }

        fn map_op() -> impl Strategy<Value = MapOp> {
            let value = prop_oneof![
                3 => 0u32..100_000,
                1 => any::<u32>(),
                1 => CODE_EXCEPTION - 40..=u32::MAX,
            ];
            prop_oneof![
                2 => (any::<u32>(), value.clone()).prop_map(|(i, v)| MapOp::Set(i, v)),
                4 => (any::<u32>(), value, 1u32..300).prop_map(|(i, v, n)| MapOp::Run(i, v, n)),
                1 => (any::<u32>(), 1u32..100).prop_map(|(i, n)| MapOp::Clear(i, n)),
                1 => (any::<u32>(), 1u32..100).prop_map(|(i, n)| MapOp::Restore(i, n)),
                3 => (
                    any::<u32>(),
                    proptest::collection::vec((0u16..40, value_many()), 1..40)
                )
                    .prop_map(|(i, w)| MapOp::Many(i, w)),
            ]
        }

        fn value_many() -> impl Strategy<Value = u32> {
            prop_oneof![3 => 0u32..100_000, 1 => Just(UNMAPPED), 1 => any::<u32>()]
        }

        proptest! {
            #![proptest_config(ProptestConfig {
                failure_persistence: None,
                rng_seed: proptest::test_runner::RngSeed::Fixed(0x6d61_7021),
                ..ProptestConfig::default()
            })]

            /// The chunked array (dense and compact chunks, every group size and run) reads as a
            /// dense one filled with its initial values and written.
            #[test]
            fn chunked_map_reads_as_a_dense_array(
                len in 1u64..20_000,
                group in prop_oneof![Just(0usize), Just(1), Just(3), Just(4), Just(8), Just(16)],
                striped in proptest::option::of((1u64..20, 0u64..100)),
                ops in proptest::collection::vec(map_op(), 0..200),
            ) {
                let initial = |i: u64| if i.is_multiple_of(3) { UNMAPPED } else { (i * 7) as u32 };
                let run = match striped {
                    Some((unit, skip)) => Run::Striped { unit, skip },
                    None => Run::Consecutive,
                };
                let mut map = ChunkedMap::new(len, group, run);
                let mut dense: Vec<u32> = (0..len).map(initial).collect();
                let write = |map: &mut ChunkedMap, dense: &mut Vec<u32>, index: u64, value: u32| {
                    map.set(index as u32, value, initial);
                    dense[index as usize] = value;
                    // The whole group reads as written, also mid-way through a run.
                    let first = index - index % 16;
                    for i in first..(first + 16).min(len) {
                        assert_eq!(map.get(i as u32, initial), dense[i as usize], "entry {i}");
                    }
                };
                for op in ops {
                    match op {
                        MapOp::Set(index, value) => {
                            write(&mut map, &mut dense, u64::from(index) % len, value);
                        }
                        MapOp::Run(start, first, count) => {
                            let start = u64::from(start) % len;
                            for (k, index) in (start..(start + u64::from(count)).min(len)).enumerate() {
                                let value = run.value(first, k);
                                if value <= u64::from(u32::MAX) {
                                    write(&mut map, &mut dense, index, value as u32);
                                }
                            }
                        }
                        MapOp::Clear(start, count) => {
                            let start = u64::from(start) % len;
                            for index in start..(start + u64::from(count)).min(len) {
                                write(&mut map, &mut dense, index, UNMAPPED);
                            }
                        }
                        MapOp::Restore(start, count) => {
                            let start = u64::from(start) % len;
                            for index in start..(start + u64::from(count)).min(len) {
                                write(&mut map, &mut dense, index, initial(index));
                            }
                        }
                        MapOp::Many(start, writes) => {
                            let start = u64::from(start) % len;
                            let writes: Vec<(u32, u32)> = writes
                                .iter()
                                .map(|&(offset, value)| (start + u64::from(offset), value))
                                .filter(|&(index, _)| index < len)
                                .map(|(index, value)| (index as u32, value))
                                .collect();
                            map.set_many(&writes, initial);
                            for &(index, value) in &writes {
                                dense[index as usize] = value;
                            }
                        }
                    }
                }
                for (index, &value) in dense.iter().enumerate() {
                    prop_assert_eq!(map.get(index as u32, initial), value);
                }
                // Runs of every length up to 40 from every 7th entry read as the entries.
                let mut run_values = [0u32; 40];
                for (k, start) in (0..len).step_by(7).enumerate() {
                    let count = (k % 40 + 1).min((len - start) as usize);
                    map.get_run(start as u32, &mut run_values[..count], initial);
                    prop_assert_eq!(&run_values[..count], &dense[start as usize..start as usize + count]);
                }
                let residency = map.residency();
                prop_assert!(
                    residency.dense_chunks + residency.compact_chunks
                        <= len.div_ceil(CHUNK_ENTRIES as u64) as usize
                );
                if map.group == 0 {
                    prop_assert_eq!(residency.compact_chunks, 0);
                }
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
        assert_eq!(ftl.resident_chunks(), Default::default());
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
        // Whole program units of consecutive pages: every chunk stays compact, one entry per
        // program unit.
        assert_eq!(forward.compact_chunks, 8);
        assert_eq!(forward.dense_chunks, 0);
        assert_eq!(forward.entries, 8 * CHUNK_ENTRIES / 16);
        assert_eq!(reverse.dense_chunks, 0);
        assert!(reverse.compact_chunks <= 8 * (2 + 3), "{reverse:?}");
        assert_eq!(reverse.entries, reverse.compact_chunks * CHUNK_ENTRIES / 16);
        let total_chunks = 2 * units as usize / CHUNK_ENTRIES;
        assert!(forward.compact_chunks + reverse.compact_chunks < total_chunks / 1000);
    }

    /// A sequential fill by whole program units keeps both maps compact (one stored entry per
    /// program unit); an out-of-order write leaves exactly its group in an exception slot, and
    /// enough of them make exactly that chunk dense.
    #[test]
    fn sequential_programs_keep_the_maps_compact() {
        // 4 dies, 8 units per program, 1,024 per block; 8 forward chunks.
        let units = 8 * CHUNK_ENTRIES as u64;
        let mut ftl = Ftl::new(units, 4, 8, 1024, 0.07, 2).unwrap();
        let mut dense = Ftl::new(units, 4, 8, 1024, 0.07, 2).unwrap();
        dense.materialise_all();
        let groups = CHUNK_ENTRIES / 8;
        fill_by_programs(&mut ftl, units);
        fill_by_programs(&mut dense, units);
        let (forward, reverse) = ftl.resident_chunks();
        let compact = |chunks| MapResidency {
            dense_chunks: 0,
            compact_chunks: chunks,
            entries: chunks * groups,
        };
        assert_eq!(forward, compact(8));
        // Each die's 8,192 filled slots: 2 reverse chunks for die 0, 3 for the others (a die has
        // 13 blocks, so dies 1 to 3 start inside a chunk).
        assert_eq!(reverse, compact(11));
        assert_same(&ftl, &dense);
        // Overwrite lpn 5 alone: its forward group (lpns 0..8) and the reverse group of its old
        // slot hold exceptions, as does the new (padded) program unit's reverse group.
        for f in [&mut ftl, &mut dense] {
            f.program(0, &[5]);
        }
        assert_same(&ftl, &dense);
        let (forward, reverse) = ftl.resident_chunks();
        assert_eq!(forward.dense_chunks, 0);
        assert_eq!(forward.entries, 8 * groups + 8);
        assert_eq!(reverse.dense_chunks, 0);
        assert_eq!(
            reverse.compact_chunks, 12,
            "the new slot opens a reverse chunk"
        );
        assert_eq!(reverse.entries, 12 * groups + 2 * 8);
        // Single-page overwrites of every program unit of forward chunk 2 (lpns 8,192..12,288):
        // chunk 2 turns dense, the others stay compact.
        let first = 2 * CHUNK_ENTRIES as u32;
        for lpn in (first..first + CHUNK_ENTRIES as u32).step_by(8) {
            for f in [&mut ftl, &mut dense] {
                let die = f.die_of(lpn);
                f.program(die, &[lpn + 3]);
            }
        }
        assert_same(&ftl, &dense);
        let (forward, _) = ftl.resident_chunks();
        assert_eq!(forward.dense_chunks, 1);
        assert_eq!(forward.compact_chunks, 7);
        assert_eq!(forward.entries, CHUNK_ENTRIES + 7 * groups + 8);
        assert!(matches!(ftl.map.chunks[2], Chunk::Dense(_)));
    }

    /// Whole program units of consecutive pages placed group by group (`place_whole_unit`)
    /// leave what placing them page by page leaves, over every state their groups can be in:
    /// initial (prefilled, unmapped, straddling the fill's end), run codes from earlier
    /// programs, exception slots, dense chunks, and write points crossing into new blocks.
    #[test]
    fn whole_units_by_group_equal_page_by_page() {
        // 4 dies, 8 units per program, 64 per block; 4 forward chunks.
        let units = 4 * CHUNK_ENTRIES as u64;
        let new = || Ftl::new(units, 4, 8, 64, 0.07, 3).unwrap();
        let fill = units * 3 / 4 + 3;
        let mut ftl = new();
        assert!(ftl.precondition_sequential(fill));
        let mut dense = new();
        dense.materialise_all();
        fill_by_programs(&mut dense, fill);
        let mut fast = 0;
        let mut program = |ftl: &mut Ftl, dense: &mut Ftl, lpns: &[u32]| {
            let die = ftl.die_of(lpns[0]);
            fast += usize::from(ftl.clone().place_whole_unit(die, lpns));
            assert_eq!(ftl.program(die, lpns), dense.program_with(die, lpns, false));
        };
        let sequential = |first: u32, count: u32| {
            (first..first + count)
                .step_by(8)
                .map(|l| (l..l + 8).collect::<Vec<u32>>())
                .collect::<Vec<_>>()
        };
        // Overwrites of the fill (initial runs), across its end, and beyond it (unmapped).
        for unit in sequential(fill as u32 - 8 * 40 - 3, 8 * 80) {
            program(&mut ftl, &mut dense, &unit);
        }
        // The same again: old slots from the programs above.
        for unit in sequential(fill as u32 - 8 * 40 - 3, 8 * 80) {
            program(&mut ftl, &mut dense, &unit);
        }
        // Single pages into a few units (exception slots in both maps), then whole units over
        // them; many single pages turn forward chunk 0 dense, then whole units into it.
        for lpn in [1_000u32, 1_009, 2_050, 2_051] {
            program(&mut ftl, &mut dense, &[lpn]);
        }
        for unit in sequential(992, 8 * 8)
            .into_iter()
            .chain(sequential(2_048, 16))
        {
            program(&mut ftl, &mut dense, &unit);
        }
        for lpn in (0..CHUNK_ENTRIES as u32).step_by(8) {
            program(&mut ftl, &mut dense, &[lpn + 5]);
        }
        assert!(matches!(ftl.map.chunks[0], Chunk::Dense(_)));
        for _ in 0..8 {
            for unit in sequential(0, 8 * 64) {
                program(&mut ftl, &mut dense, &unit);
            }
        }
        assert_same(&ftl, &dense);
        assert!(dense.stats.blocks_erased > 0, "GC ran between the programs");
        // Every whole unit but those over the fill's end and over pages of other units.
        assert!(
            fast >= 2 * 80 - 4 + 8 + 2 + 64 - 10,
            "{fast} placed by group"
        );
    }
}
