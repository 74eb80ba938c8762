//! The multi-block allocator, modelled on Linux 3.10's fs/ext4/mballoc.c: per-group free space
//! as a buddy system, goal-directed allocation (`ext4_mb_new_blocks`), request normalization
//! (`ext4_mb_normalize_request`), per-inode preallocation (`i_prealloc_list`), locality-group
//! preallocation for small files (`s_locality_groups`), the group scan with its four criteria
//! (`ext4_mb_regular_allocator`), and freeing that holds blocks until the freeing transaction
//! commits (`ext4_mb_free_metadata`, `ext4_free_data_callback`).
//!
//! State per group: the in-core buddy (free runs plus, for each order 0..=13, the maximal
//! aligned free chunks the buddy bitmaps hold: `bb_counters`), and the on-disk block bitmap
//! (used runs) with its descriptor's free count. The two differ exactly by preallocated blocks
//! (used in the buddy, free on disk) and blocks freed by a transaction that has not committed
//! (likewise): `disk_free == buddy_free + preallocated + pending` (and `s_freeclusters_counter` is
//! the groups' on-disk free counts summed), checked by
//! [`MbAlloc::check_invariants`].
//!
//! Simplifications:
//! - The buddy is kept as free runs, and the buddy's chunks are derived from them: a free run's
//!   maximal aligned power-of-two pieces are exactly the buddy's free chunks, since the buddy
//!   merges free buddies up to order 13 (`blocksize_bits + 1`). `mb_find_extent` is computed
//!   from them, as `ext4_mb_simple_scan_group` (first chunk of the lowest order that fits) and
//!   `ext4_mb_complex_scan_group` (measure free extents from `bb_first_free`) use it.
//! - No locks, so no `EXT4_MB_HINT_FIRST` retry after losing a chunk, and `ext4_fs_is_busy`
//!   (lock contention) is always false. No stripe (`s_stripe` 0), no bigalloc clusters, no
//!   quota, no root-reserved-blocks check (`ext4_claim_free_clusters`: delayed allocation
//!   reserved them when the data was written; the caller keeps that count).
//! - The locality group is chosen by the `cpu` of the request (`__this_cpu_ptr`): allocation at
//!   writeback runs in the flusher, so files written back together share one whatever process
//!   wrote them; the caller says which CPU.
//! - `ext4_discard_preallocations` knows each inode PA's unused blocks exactly (Linux re-reads
//!   the on-disk bitmap); PAs are never busy, so discarding never waits.
//! - The superblock is never dirtied by allocation or freeing: 3.10 keeps the free counts in
//!   per-CPU counters (`s_freeclusters_counter`) and writes the superblock outside the journal
//!   (`ext4_commit_super` at sync and unmount).

use super::layout::{Layout, BLOCKS_PER_GROUP, FLEX_BG_SIZE};
use super::{MetaKind, Tid, Touched};
use crate::errno::Errno;
use crate::mm::Ino;
use std::collections::{BTreeMap, BTreeSet};

/// `MB_DEFAULT_STREAM_THRESHOLD` (mballoc.h): files up to 16 blocks use the locality group.
pub const MB_DEFAULT_STREAM_THRESHOLD: u64 = 16;
/// `MB_DEFAULT_GROUP_PREALLOC` (mballoc.h): the locality group's window, 512 blocks (2 MiB).
pub const MB_DEFAULT_GROUP_PREALLOC: u64 = 512;
/// `MB_DEFAULT_MAX_TO_SCAN` (mballoc.h): extents measured before taking the best found.
pub const MB_DEFAULT_MAX_TO_SCAN: u32 = 200;
/// `MB_DEFAULT_MIN_TO_SCAN` (mballoc.h): extents measured before a good one may be taken.
pub const MB_DEFAULT_MIN_TO_SCAN: u32 = 10;
/// `MB_DEFAULT_ORDER2_REQS` (mballoc.h): power-of-two requests of order >= 2 (len >= 2 by
/// `fls`) try the buddy directly (criterion 0).
pub const MB_DEFAULT_ORDER2_REQS: u32 = 2;
/// `PREALLOC_TB_SIZE` (ext4.h): buckets of a locality group's PA list.
pub const PREALLOC_TB_SIZE: u32 = 10;
/// Highest buddy order: `blocksize_bits + 1` = 13 (chunks of 8192 blocks, mballoc.c
/// `ext4_mb_init`).
pub const MAX_ORDER: u32 = 13;
/// `EXT4_FLEX_SIZE_DIR_ALLOC_SCHEME` (ext4.h): flex groups of 4+ keep their first group for
/// directories.
pub const FLEX_SIZE_DIR_ALLOC_SCHEME: u64 = 4;

/// An allocation request (`struct ext4_allocation_request` plus the inode state mballoc reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllocRequest {
    /// The inode allocated for (`ar->inode`).
    pub ino: Ino,
    /// First logical block (`ar->logical`).
    pub lblk: u64,
    /// Blocks wanted (`ar->len`); fewer may be returned.
    pub len: u64,
    /// Physical goal (`ar->goal`, from `ext4_ext_find_goal`).
    pub goal: u64,
    /// `EXT4_MB_HINT_DATA`: regular-file data (normalization and preallocation apply).
    pub data: bool,
    /// `EXT4_MB_HINT_TRY_GOAL`: try the goal block first (`ext4_ext_grow_indepth`).
    pub try_goal: bool,
    /// The closest mapped block left of `lblk` (`ar->lleft`, `ar->pleft`).
    pub left: Option<(u64, u64)>,
    /// The closest mapped block right of the request (`ar->lright`, `ar->pright`).
    pub right: Option<(u64, u64)>,
    /// `i_size` in blocks, rounded up.
    pub i_size_blocks: u64,
    /// `i_writecount > 0`: the file is open for writing.
    pub open_for_write: bool,
    /// CPU doing the allocation: its locality group.
    pub cpu: u32,
}

impl AllocRequest {
    /// A metadata block (extent tree, directory) near `goal`: no preallocation.
    pub fn meta(ino: Ino, goal: u64) -> AllocRequest {
        AllocRequest {
            ino,
            lblk: 0,
            len: 1,
            goal,
            data: false,
            try_goal: false,
            left: None,
            right: None,
            i_size_blocks: 0,
            open_for_write: false,
            cpu: 0,
        }
    }
}

/// Blocks handed out: `len` blocks from `pblk`, for logical blocks from the request's `lblk`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocated {
    pub pblk: u64,
    pub len: u64,
    pub touched: Touched,
}

/// Free space of one group as the buddy holds it.
#[derive(Debug, Clone)]
struct Buddy {
    /// Free runs, group-relative start -> length, coalesced.
    runs: BTreeMap<u32, u32>,
    /// `bb_free`.
    free: u32,
    /// Starts of the maximal aligned free chunks of each order (`bb_counters[order]` is the
    /// count).
    chunks: Vec<BTreeSet<u32>>,
}

/// Maximal aligned power-of-two pieces of the free run `start..end` (group-relative).
fn for_each_chunk(start: u32, end: u32, mut f: impl FnMut(u32, u32)) {
    let mut pos = start;
    while pos < end {
        let mut order = if pos == 0 {
            MAX_ORDER
        } else {
            pos.trailing_zeros().min(MAX_ORDER)
        };
        while pos + (1 << order) > end {
            order -= 1;
        }
        f(pos, order);
        pos += 1 << order;
    }
}

impl Buddy {
    fn new() -> Buddy {
        Buddy {
            runs: BTreeMap::new(),
            free: 0,
            chunks: vec![BTreeSet::new(); MAX_ORDER as usize + 1],
        }
    }

    fn add_run(&mut self, start: u32, len: u32) {
        self.runs.insert(start, len);
        let chunks = &mut self.chunks;
        for_each_chunk(start, start + len, |s, o| {
            chunks[o as usize].insert(s);
        });
    }

    fn remove_run(&mut self, start: u32) -> u32 {
        let len = self.runs.remove(&start).expect("a free run");
        let chunks = &mut self.chunks;
        for_each_chunk(start, start + len, |s, o| {
            assert!(chunks[o as usize].remove(&s));
        });
        len
    }

    /// The free run containing `block`.
    fn run_of(&self, block: u32) -> Option<(u32, u32)> {
        self.runs
            .range(..=block)
            .next_back()
            .filter(|(&s, &l)| block < s + l)
            .map(|(&s, &l)| (s, l))
    }

    /// `mb_free_blocks`: `start..start + len` becomes free, merging with its neighbours.
    fn free_range(&mut self, start: u32, len: u32) {
        assert!(len > 0);
        self.free += len;
        let mut start = start;
        let mut len = len;
        if let Some((&s, &l)) = self.runs.range(..start).next_back() {
            assert!(s + l <= start, "buddy: block {start} freed twice");
            if s + l == start {
                self.remove_run(s);
                start = s;
                len += l;
            }
        }
        if let Some((&s, _)) = self.runs.range(start..).next() {
            assert!(s >= start + len, "buddy: block {s} freed twice");
            if s == start + len {
                len += self.remove_run(s);
            }
        }
        self.add_run(start, len);
    }

    /// `mb_mark_used`: `start..start + len` must lie in one free run.
    fn mark_used(&mut self, start: u32, len: u32) {
        let (s, l) = self.run_of(start).expect("buddy: allocating a used block");
        assert!(
            start + len <= s + l,
            "buddy: allocating across a used block"
        );
        self.remove_run(s);
        if start > s {
            self.add_run(s, start - s);
        }
        if start + len < s + l {
            self.add_run(start + len, s + l - start - len);
        }
        self.free -= len;
    }

    fn fragments(&self) -> u32 {
        self.runs.len() as u32
    }

    fn largest_free_order(&self) -> Option<u32> {
        (0..=MAX_ORDER)
            .rev()
            .find(|&o| !self.chunks[o as usize].is_empty())
    }

    /// `mb_find_extent`: from free `block`, whole buddy chunks until at least `needed` blocks
    /// or the end of the free run.
    fn find_extent(&self, block: u32, needed: u32) -> u32 {
        let Some((s, l)) = self.run_of(block) else {
            return 0;
        };
        let mut len = 0;
        for_each_chunk(s, s + l, |cs, o| {
            let ce = cs + (1 << o);
            if ce <= block || (len >= needed && len > 0) {
                return;
            }
            len = ce - block;
        });
        len
    }
}

/// One group's allocator state.
#[derive(Debug, Clone)]
struct Group {
    first_block: u64,
    nblocks: u32,
    buddy: Buddy,
    /// On-disk block bitmap: used runs, group-relative.
    disk_used: BTreeMap<u32, u32>,
    /// `bg_free_blocks_count`.
    disk_free: u32,
    /// `EXT4_BG_BLOCK_UNINIT`: the bitmap was never written (mke2fs's uninit_bg).
    block_uninit: bool,
    block_bitmap: u64,
    gdt_block: u64,
}

impl Group {
    fn disk_mark_used(&mut self, start: u32, len: u32) {
        if let Some((&s, &l)) = self.disk_used.range(..start + len).next_back() {
            assert!(
                s + l <= start,
                "block {} allocated twice",
                self.first_block + start as u64
            );
        }
        let mut start = start;
        let mut len = len;
        if let Some((&s, &l)) = self.disk_used.range(..start).next_back() {
            if s + l == start {
                self.disk_used.remove(&s);
                start = s;
                len += l;
            }
        }
        if let Some(&l) = self.disk_used.get(&(start + len)) {
            self.disk_used.remove(&(start + len));
            len += l;
        }
        self.disk_used.insert(start, len);
    }

    fn disk_mark_free(&mut self, start: u32, len: u32) {
        let (&s, &l) = self
            .disk_used
            .range(..=start)
            .next_back()
            .expect("freeing a free block");
        assert!(
            start + len <= s + l,
            "freeing free block(s) in {}..{}",
            self.first_block + start as u64,
            self.first_block + (start + len) as u64
        );
        self.disk_used.remove(&s);
        if start > s {
            self.disk_used.insert(s, start - s);
        }
        if start + len < s + l {
            self.disk_used.insert(start + len, s + l - start - len);
        }
    }

    fn disk_is_free(&self, start: u32, len: u32) -> bool {
        match self.disk_used.range(..start + len).next_back() {
            Some((&s, &l)) => s + l <= start,
            None => true,
        }
    }
}

/// Per-inode preallocation (`MB_INODE_PA`): logical `lstart..lstart + len` maps to physical
/// `pstart..`; `unused` holds the blocks not yet handed out.
#[derive(Debug, Clone)]
struct InodePa {
    lstart: u64,
    pstart: u64,
    len: u64,
    unused: BTreeMap<u64, u64>,
    free: u64,
}

/// Locality-group preallocation (`MB_GROUP_PA`): consumed from the front by any inode.
#[derive(Debug, Clone)]
struct GroupPa {
    pstart: u64,
    free: u64,
    /// Insertion order, for the lists' order among equals.
    seq: u64,
}

impl GroupPa {
    /// The `lg_prealloc_list` bucket: `fls(pa_free) - 1`, capped.
    fn order(&self) -> u32 {
        (63 - self.free.leading_zeros()).min(PREALLOC_TB_SIZE - 1)
    }
}

/// An extent found during the search (`struct ext4_free_extent`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct FreeExtent {
    group: u64,
    start: u32,
    len: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Continue,
    Found,
    Break,
}

/// What a request was classified as (`ext4_mb_group_or_file`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Policy {
    /// Not data, or exact (`EXT4_MB_HINT_NOPREALLOC`): no normalization.
    NoPrealloc,
    /// `EXT4_MB_STREAM_ALLOC`: normalized per file, goal group from the last stream.
    Stream,
    /// `EXT4_MB_HINT_GROUP_ALLOC`: the locality group of `cpu`.
    Group(u32),
}

/// `struct ext4_allocation_context`, the parts the search uses.
#[derive(Debug, Clone)]
struct AllocContext {
    o_lblk: u64,
    o_len: u32,
    g: FreeExtent,
    g_lblk: u64,
    b: FreeExtent,
    b_lblk: u64,
    data: bool,
    try_goal: bool,
    policy: Policy,
    order2: u32,
    found: u32,
    status: Status,
}

/// What the allocator did, logged for ext4's run-time check of block reuse
/// (`src/fs/ext4/check.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MbEvent {
    /// `ext4_mb_mark_diskspace_used`: blocks handed out.
    Allocated { pblk: u64, len: u64 },
    /// `ext4_free_blocks` in transaction `tid`: held until it commits.
    Freed { pblk: u64, len: u64, tid: Tid },
}

/// The allocator of one file system.
#[derive(Debug, Clone)]
pub struct MbAlloc {
    blocks_count: u64,
    groups: Vec<Group>,
    /// `i_prealloc_list` per inode.
    inode_pa: BTreeMap<Ino, Vec<InodePa>>,
    /// `s_locality_groups` per CPU: its PAs.
    lg: BTreeMap<u32, Vec<GroupPa>>,
    lg_seq: u64,
    /// `ext4_free_data` per transaction: freed blocks, start -> len, not reusable until commit.
    pending: BTreeMap<Tid, BTreeMap<u64, u64>>,
    /// `s_mb_last_group`, `s_mb_last_start`: where the last stream allocation ended.
    last_group: u64,
    last_start: u32,
    /// `s_mb_stream_request`.
    pub stream_request: u64,
    /// `s_mb_group_prealloc`.
    pub group_prealloc: u64,
    /// `s_freeclusters_counter`: the groups' `disk_free`, summed, kept as they change (every
    /// delayed-allocation reservation reads it).
    free_total: u64,
    /// Allocations and frees since the last [`MbAlloc::take_events`], while recording.
    events: Option<Vec<MbEvent>>,
}

impl MbAlloc {
    /// The allocator of a fresh file system: free space as mke2fs left it.
    pub fn new(layout: &Layout) -> MbAlloc {
        let mut groups: Vec<Group> = (0..layout.groups)
            .map(|g| Group {
                first_block: layout.group_first_block(g),
                nblocks: layout.group_blocks(g) as u32,
                buddy: Buddy::new(),
                disk_used: BTreeMap::new(),
                disk_free: 0,
                // ext2fs_initialize: every group but the last starts BLOCK_UNINIT; a group
                // that mke2fs allocates in loses it (ext2fs_block_alloc_stats2).
                block_uninit: g + 1 != layout.groups,
                block_bitmap: layout.block_bitmap(g),
                gdt_block: layout.gdt_block(g),
            })
            .collect();
        for (start, len, _) in layout.used_runs() {
            let mut block = start;
            while block < start + len {
                let group = &mut groups[(block / BLOCKS_PER_GROUP) as usize];
                let offset = (block - group.first_block) as u32;
                let take = (len - (block - start)).min((group.nblocks - offset) as u64) as u32;
                group.disk_mark_used(offset, take);
                block += take as u64;
            }
        }
        for (index, group) in groups.iter_mut().enumerate() {
            let base = layout.base_meta_blocks(index as u64) as u32;
            if group.disk_used.values().sum::<u32>() > base {
                group.block_uninit = false;
            }
            let mut next = 0u32;
            let used: Vec<(u32, u32)> = group.disk_used.iter().map(|(&s, &l)| (s, l)).collect();
            for (s, l) in used {
                if s > next {
                    group.buddy.free_range(next, s - next);
                }
                next = s + l;
            }
            if next < group.nblocks {
                group.buddy.free_range(next, group.nblocks - next);
            }
            group.disk_free = group.buddy.free;
        }
        let free_total = groups.iter().map(|g| g.disk_free as u64).sum();
        MbAlloc {
            free_total,
            blocks_count: layout.blocks_count,
            groups,
            inode_pa: BTreeMap::new(),
            lg: BTreeMap::new(),
            lg_seq: 0,
            pending: BTreeMap::new(),
            last_group: 0,
            last_start: 0,
            stream_request: MB_DEFAULT_STREAM_THRESHOLD,
            group_prealloc: MB_DEFAULT_GROUP_PREALLOC,
            events: None,
        }
    }

    pub fn groups(&self) -> u64 {
        self.groups.len() as u64
    }

    /// Logs allocations and frees (on) or stops (off, dropping the log).
    pub fn record_events(&mut self, on: bool) {
        match (on, self.events.is_some()) {
            (true, false) => self.events = Some(Vec::new()),
            (false, true) => self.events = None,
            _ => {}
        }
    }

    /// The events logged since the last call.
    pub fn take_events(&mut self) -> Vec<MbEvent> {
        self.events.as_mut().map(std::mem::take).unwrap_or_default()
    }

    fn log(&mut self, event: MbEvent) {
        if let Some(events) = self.events.as_mut() {
            events.push(event);
        }
    }

    /// Free blocks on disk (`s_freeclusters_counter`; includes blocks freed by transactions
    /// that have not committed, as `ext4_free_blocks` adds them at once).
    pub fn free_blocks_count(&self) -> u64 {
        self.free_total
    }

    /// `bg_free_blocks_count` of `group`.
    pub fn group_free_blocks(&self, group: u64) -> u64 {
        self.groups[group as usize].disk_free as u64
    }

    /// Blocks an allocation could get now: free in the buddy or held by a preallocation.
    pub fn allocatable_blocks(&self) -> u64 {
        let buddy: u64 = self.groups.iter().map(|g| g.buddy.free as u64).sum();
        buddy + self.preallocated_blocks()
    }

    /// Blocks held by preallocations (inode and locality group).
    pub fn preallocated_blocks(&self) -> u64 {
        let inode: u64 = self.inode_pa.values().flatten().map(|pa| pa.free).sum();
        let group: u64 = self.lg.values().flatten().map(|pa| pa.free).sum();
        inode + group
    }

    /// Blocks freed by transactions not yet committed.
    pub fn pending_blocks(&self) -> u64 {
        self.pending.values().flatten().map(|(_, &l)| l).sum()
    }

    /// Whether `block` is on the pending-free list of some transaction.
    pub fn is_pending(&self, block: u64) -> bool {
        self.pending.values().any(|m| {
            m.range(..=block)
                .next_back()
                .is_some_and(|(&s, &l)| block < s + l)
        })
    }

    /// Whether `block` is marked used in the on-disk bitmap.
    pub fn is_allocated(&self, block: u64) -> bool {
        let group = &self.groups[(block / BLOCKS_PER_GROUP) as usize];
        !group.disk_is_free((block - group.first_block) as u32, 1)
    }

    /// Clears `EXT4_BG_BLOCK_UNINIT` of `group`, saying whether it was set (then the block
    /// bitmap is initialized and must be journaled: `__ext4_new_inode`).
    pub fn take_block_uninit(&mut self, group: u64) -> bool {
        std::mem::replace(&mut self.groups[group as usize].block_uninit, false)
    }

    // -----------------------------------------------------------------------------------------
    // Allocation
    // -----------------------------------------------------------------------------------------

    /// `ext4_mb_new_blocks`: up to `req.len` blocks, contiguous, for logical blocks from
    /// `req.lblk`. Tries the inode's and the locality group's preallocations
    /// (`ext4_mb_use_preallocated`), else normalizes the request and searches the groups,
    /// keeping what it got beyond the request as a new preallocation. Dirties the block
    /// bitmap and the descriptor block of the group the blocks come from
    /// (`ext4_mb_mark_diskspace_used`). `ENOSPC` when nothing is free even after discarding
    /// every preallocation (`ext4_mb_discard_preallocations`).
    pub fn new_blocks(&mut self, req: &AllocRequest) -> Result<Allocated, Errno> {
        assert!(req.len > 0, "allocation of no blocks");
        let mut ac = self.initialize_context(req);
        if !self.use_preallocated(&mut ac, req) {
            self.normalize_request(&mut ac, req);
            loop {
                self.regular_allocator(&mut ac);
                if ac.status == Status::Found {
                    break;
                }
                let needed = ac.o_len as u64;
                if self.discard_all_preallocations(needed) == 0 {
                    return Err(Errno::ENOSPC);
                }
                ac.status = Status::Continue;
                ac.b = FreeExtent::default();
                ac.found = 0;
            }
            if ac.o_len < ac.b.len {
                self.new_preallocation(&mut ac, req);
            }
        }
        assert!(ac.b.len > 0 && ac.b.len <= ac.o_len);
        let pblk = self.groups[ac.b.group as usize].first_block + ac.b.start as u64;
        let touched = self.mark_diskspace_used(ac.b);
        Ok(Allocated {
            pblk,
            len: ac.b.len as u64,
            touched,
        })
    }

    /// `ext4_mb_initialize_context` + `ext4_mb_group_or_file`.
    fn initialize_context(&self, req: &AllocRequest) -> AllocContext {
        let len = req.len.min(BLOCKS_PER_GROUP) as u32;
        let goal = if req.goal >= self.blocks_count {
            0
        } else {
            req.goal
        };
        let group = goal / BLOCKS_PER_GROUP;
        let start = (goal % BLOCKS_PER_GROUP) as u32;
        let g = FreeExtent { group, start, len };
        let policy = if !req.data {
            Policy::NoPrealloc
        } else {
            let size = req.lblk + len as u64;
            let isize = req.i_size_blocks;
            if size == isize && !req.open_for_write {
                Policy::NoPrealloc
            } else if self.group_prealloc == 0 || size.max(isize) > self.stream_request {
                Policy::Stream
            } else {
                Policy::Group(req.cpu)
            }
        };
        AllocContext {
            o_lblk: req.lblk,
            o_len: len,
            g,
            g_lblk: req.lblk,
            b: FreeExtent::default(),
            b_lblk: req.lblk,
            data: req.data,
            try_goal: req.try_goal,
            policy,
            order2: 0,
            found: 0,
            status: Status::Continue,
        }
    }

    /// `ext4_mb_use_preallocated`: the inode's PA covering `lblk`, else (small files) the
    /// locality group's PA nearest the goal with room for the whole request.
    fn use_preallocated(&mut self, ac: &mut AllocContext, req: &AllocRequest) -> bool {
        if !ac.data {
            return false;
        }
        if let Some(pas) = self.inode_pa.get_mut(&req.ino) {
            if let Some(index) = pas
                .iter()
                .position(|pa| pa.lstart <= ac.o_lblk && ac.o_lblk < pa.lstart + pa.len)
            {
                let pa = &mut pas[index];
                if pa.free > 0 {
                    // ext4_mb_use_inode_pa.
                    let start = pa.pstart + (ac.o_lblk - pa.lstart);
                    let end = (pa.pstart + pa.len).min(start + ac.o_len as u64);
                    Self::take_from_inode_pa(pa, start, end - start);
                    if pa.free == 0 {
                        pas.remove(index);
                    }
                    ac.b = self.extent_of(start, end - start);
                    ac.status = Status::Found;
                    return true;
                }
            }
        }
        let Policy::Group(cpu) = ac.policy else {
            return false;
        };
        let goal = self.groups[ac.g.group as usize].first_block + ac.g.start as u64;
        let order = (31 - ac.o_len.leading_zeros()).min(PREALLOC_TB_SIZE - 1);
        let Some(pas) = self.lg.get_mut(&cpu) else {
            return false;
        };
        // Buckets from the request's order up, each ascending by pa_free (ext4_mb_add_n_trim
        // keeps them so); the nearest to the goal wins, the first of equals.
        let mut candidates: Vec<usize> = (0..pas.len())
            .filter(|&i| pas[i].order() >= order && pas[i].free >= ac.o_len as u64)
            .collect();
        candidates.sort_by_key(|&i| (pas[i].order(), pas[i].free, pas[i].seq));
        let Some(&best) = candidates
            .iter()
            .min_by_key(|&&i| pas[i].pstart.abs_diff(goal))
        else {
            return false;
        };
        // ext4_mb_use_group_pa, then ext4_mb_release_context moves the PA's start.
        let pa = &mut pas[best];
        let start = pa.pstart;
        pa.pstart += ac.o_len as u64;
        pa.free -= ac.o_len as u64;
        if pa.free == 0 {
            pas.remove(best);
        } else {
            self.lg_seq += 1;
            pas[best].seq = self.lg_seq;
            self.trim_lg(cpu, best);
        }
        ac.b = self.extent_of(start, ac.o_len as u64);
        ac.status = Status::Found;
        true
    }

    fn take_from_inode_pa(pa: &mut InodePa, start: u64, len: u64) {
        let (&s, &l) = pa
            .unused
            .range(..=start)
            .next_back()
            .expect("preallocated block already used");
        assert!(
            start + len <= s + l,
            "preallocated block(s) {start}+{len} already used"
        );
        pa.unused.remove(&s);
        if start > s {
            pa.unused.insert(s, start - s);
        }
        if start + len < s + l {
            pa.unused.insert(start + len, s + l - start - len);
        }
        pa.free -= len;
    }

    fn extent_of(&self, pblk: u64, len: u64) -> FreeExtent {
        let group = pblk / BLOCKS_PER_GROUP;
        FreeExtent {
            group,
            start: (pblk - self.groups[group as usize].first_block) as u32,
            len: len as u32,
        }
    }

    /// `ext4_mb_normalize_request` (and `ext4_mb_normalize_group_request`): grow a data
    /// request to the predicted file size (16 KiB .. 1 MiB from the file's start, then 2, 4
    /// or 8 MiB windows aligned on their size), clipped by the neighbouring mapped blocks and
    /// the inode's other PAs; ask for the goal next to a neighbour to merge with it.
    fn normalize_request(&self, ac: &mut AllocContext, req: &AllocRequest) {
        match ac.policy {
            Policy::NoPrealloc => return,
            Policy::Group(_) => {
                ac.g.len = self.group_prealloc as u32;
                return;
            }
            Policy::Stream => {}
        }
        const KIB: u64 = 1024;
        const MIB: u64 = 1024 * KIB;
        let block = super::layout::BLOCK_SIZE;
        let size_bytes = ((ac.o_lblk + ac.o_len as u64) * block).max(req.i_size_blocks * block);
        let (start_bytes, window) = match size_bytes {
            s if s <= 16 * KIB => (0, 16 * KIB),
            s if s <= 32 * KIB => (0, 32 * KIB),
            s if s <= 64 * KIB => (0, 64 * KIB),
            s if s <= 128 * KIB => (0, 128 * KIB),
            s if s <= 256 * KIB => (0, 256 * KIB),
            s if s <= 512 * KIB => (0, 512 * KIB),
            s if s <= MIB => (0, MIB),
            s if s <= 4 * MIB => ((ac.o_lblk * block) & !(2 * MIB - 1), 2 * MIB),
            s if s <= 8 * MIB => ((ac.o_lblk * block) & !(4 * MIB - 1), 4 * MIB),
            // NRL_CHECK_SIZE(fe_len, 8 MiB, max = 2 << bsbits, 8 * 1024) holds for 4 KiB
            // blocks whatever the length, so the "as is" branch after it is never taken.
            _ => ((ac.o_lblk * block) & !(8 * MIB - 1), 8 * MIB),
        };
        let mut start = start_bytes / block;
        let mut size = window / block;
        // Don't cover already allocated blocks.
        if let Some((lleft, _)) = req.left {
            if start <= lleft {
                size -= lleft + 1 - start;
                start = lleft + 1;
            }
        }
        if let Some((lright, _)) = req.right {
            if start + size > lright {
                size -= start + size - lright;
            }
        }
        let mut end = start + size;
        // Don't cross the inode's preallocations.
        if let Some(pas) = self.inode_pa.get(&req.ino) {
            for pa in pas {
                let pa_end = pa.lstart + pa.len;
                assert!(
                    ac.o_lblk >= pa_end || ac.o_lblk < pa.lstart,
                    "PA overlaps the request"
                );
                if pa.lstart >= end || pa_end <= start {
                    continue;
                }
                if pa_end <= ac.o_lblk {
                    start = pa_end;
                } else if pa.lstart > ac.o_lblk {
                    end = pa.lstart;
                }
            }
        }
        let size = end - start;
        assert!(
            size > 0 && size <= BLOCKS_PER_GROUP,
            "normalized to {size} blocks"
        );
        assert!(start <= ac.o_lblk && ac.o_lblk < start + size);
        ac.g_lblk = start;
        ac.g.len = size as u32;
        if let Some((lright, pright)) = req.right {
            if lright == start + size && pright >= size {
                ac.g = FreeExtent {
                    len: ac.g.len,
                    ..self.extent_of(pright - size, 0)
                };
                ac.try_goal = true;
            }
        }
        if let Some((lleft, pleft)) = req.left {
            if lleft + 1 == start && pleft + 1 < self.blocks_count {
                ac.g = FreeExtent {
                    len: ac.g.len,
                    ..self.extent_of(pleft + 1, 0)
                };
                ac.try_goal = true;
            }
        }
    }

    /// `ext4_mb_regular_allocator`: the goal first, then every group from the goal's, under
    /// criteria 0 (buddy chunk of the request's power-of-two order, skipping a flex group's
    /// first group for data), 1 (average free extent large enough), 2 (enough free blocks),
    /// 3 (anything); the best extent found when the scan limit ends the search.
    fn regular_allocator(&mut self, ac: &mut AllocContext) {
        self.find_by_goal(ac);
        if ac.status == Status::Found {
            return;
        }
        let bits = 32 - ac.g.len.leading_zeros();
        ac.order2 = 0;
        if bits >= MB_DEFAULT_ORDER2_REQS && ac.g.len.is_power_of_two() {
            ac.order2 = bits - 1;
        }
        if ac.policy == Policy::Stream {
            ac.g.group = self.last_group;
            ac.g.start = self.last_start;
        }
        let ngroups = self.groups.len() as u64;
        let first_cr = if ac.order2 > 0 { 0 } else { 1 };
        for cr in first_cr..4 {
            if ac.status != Status::Continue {
                break;
            }
            for i in 0..ngroups {
                let group = (ac.g.group + i) % ngroups;
                if !self.good_group(ac, group, cr) {
                    continue;
                }
                if cr == 0 {
                    self.simple_scan_group(ac, group);
                } else {
                    self.complex_scan_group(ac, group);
                }
                if ac.status != Status::Continue {
                    break;
                }
            }
        }
        if ac.b.len > 0 && ac.status != Status::Found {
            // ext4_mb_try_best_found.
            let group = &self.groups[ac.b.group as usize];
            let max = group.buddy.find_extent(ac.b.start, ac.b.len);
            if max > 0 {
                ac.b.len = max;
                self.use_best_found(ac);
            }
        }
    }

    /// `ext4_mb_find_by_goal`: exactly at the goal, when asked to try it.
    fn find_by_goal(&mut self, ac: &mut AllocContext) {
        if !ac.try_goal {
            return;
        }
        let group = &self.groups[ac.g.group as usize];
        if group.buddy.free == 0 || ac.g.start >= group.nblocks {
            return;
        }
        let max = group.buddy.find_extent(ac.g.start, ac.g.len);
        if max >= ac.g.len {
            ac.found += 1;
            ac.b = FreeExtent {
                group: ac.g.group,
                start: ac.g.start,
                len: max,
            };
            self.use_best_found(ac);
        }
    }

    /// `ext4_mb_good_group`.
    fn good_group(&self, ac: &AllocContext, group: u64, cr: u32) -> bool {
        let buddy = &self.groups[group as usize].buddy;
        let free = buddy.free;
        if free == 0 || (cr <= 2 && free < ac.g.len) {
            return false;
        }
        let fragments = buddy.fragments();
        if fragments == 0 {
            return false;
        }
        match cr {
            0 => {
                if ac.data
                    && FLEX_BG_SIZE >= FLEX_SIZE_DIR_ALLOC_SCHEME
                    && group.is_multiple_of(FLEX_BG_SIZE)
                {
                    return false;
                }
                if ac.order2 > MAX_ORDER || free / fragments >= ac.g.len {
                    return true;
                }
                buddy.largest_free_order().is_some_and(|o| o >= ac.order2)
            }
            1 => free / fragments >= ac.g.len,
            2 => free >= ac.g.len,
            _ => true,
        }
    }

    /// `ext4_mb_simple_scan_group`: the first free chunk of the lowest order that holds the
    /// (power-of-two) request.
    fn simple_scan_group(&mut self, ac: &mut AllocContext, group: u64) {
        let buddy = &self.groups[group as usize].buddy;
        for order in ac.order2..=MAX_ORDER {
            if let Some(&start) = buddy.chunks[order as usize].iter().next() {
                ac.found += 1;
                ac.b = FreeExtent {
                    group,
                    start,
                    len: 1 << order,
                };
                self.use_best_found(ac);
                assert_eq!(ac.b.len, ac.g.len);
                return;
            }
        }
    }

    /// `ext4_mb_complex_scan_group`: measure the group's free extents from `bb_first_free`.
    fn complex_scan_group(&mut self, ac: &mut AllocContext, group: u64) {
        let mut cursor = 0u32;
        while ac.status == Status::Continue {
            let buddy = &self.groups[group as usize].buddy;
            let Some((s, l)) = buddy.runs.range(cursor..).next().map(|(&s, &l)| (s, l)) else {
                break;
            };
            let mut pos = s;
            while pos < s + l && ac.status == Status::Continue {
                let len = self.groups[group as usize].buddy.find_extent(pos, ac.g.len);
                assert!(len > 0);
                self.measure_extent(
                    ac,
                    FreeExtent {
                        group,
                        start: pos,
                        len,
                    },
                );
                pos += len;
            }
            cursor = s + l;
        }
        self.check_limits(ac, group, true);
    }

    /// `ext4_mb_measure_extent`: keep the best extent so far; take an exact fit at once.
    fn measure_extent(&mut self, ac: &mut AllocContext, ex: FreeExtent) {
        ac.found += 1;
        if ex.len == ac.g.len {
            ac.b = ex;
            self.use_best_found(ac);
            return;
        }
        if ac.b.len == 0 {
            ac.b = ex;
            return;
        }
        if ac.b.len < ac.g.len {
            if ex.len > ac.b.len {
                ac.b = ex;
            }
        } else if ex.len > ac.g.len && ex.len < ac.b.len {
            ac.b = ex;
        }
        self.check_limits(ac, ex.group, false);
    }

    /// `ext4_mb_check_limits`.
    fn check_limits(&mut self, ac: &mut AllocContext, group: u64, finish_group: bool) {
        if ac.status == Status::Found {
            return;
        }
        if ac.found > MB_DEFAULT_MAX_TO_SCAN {
            ac.status = Status::Break;
            return;
        }
        if ac.b.len < ac.g.len {
            return;
        }
        if (finish_group || ac.found > MB_DEFAULT_MIN_TO_SCAN) && ac.b.group == group {
            let max = self.groups[group as usize]
                .buddy
                .find_extent(ac.b.start, ac.g.len);
            if max >= ac.g.len {
                self.use_best_found(ac);
            }
        }
    }

    /// `ext4_mb_use_best_found`: take `min(best, goal length)` blocks from the buddy.
    fn use_best_found(&mut self, ac: &mut AllocContext) {
        assert_ne!(ac.status, Status::Found);
        ac.b.len = ac.b.len.min(ac.g.len);
        ac.b_lblk = ac.g_lblk;
        self.groups[ac.b.group as usize]
            .buddy
            .mark_used(ac.b.start, ac.b.len);
        ac.status = Status::Found;
        if ac.policy == Policy::Stream {
            self.last_group = ac.b.group;
            self.last_start = ac.b.start;
        }
    }

    /// `ext4_mb_new_preallocation`: what was found beyond the request becomes the inode's or
    /// the locality group's PA; the request's part is taken from it at once.
    fn new_preallocation(&mut self, ac: &mut AllocContext, req: &AllocRequest) {
        let found = ac.b;
        let pstart = self.groups[found.group as usize].first_block + found.start as u64;
        match ac.policy {
            Policy::Group(cpu) => {
                // ext4_mb_new_group_pa + ext4_mb_use_group_pa + release_context.
                self.lg_seq += 1;
                let pa = GroupPa {
                    pstart: pstart + ac.o_len as u64,
                    free: (found.len - ac.o_len) as u64,
                    seq: self.lg_seq,
                };
                let pas = self.lg.entry(cpu).or_default();
                pas.push(pa);
                let index = pas.len() - 1;
                self.trim_lg(cpu, index);
                ac.b.len = ac.o_len;
            }
            _ => {
                // ext4_mb_new_inode_pa.
                let mut lstart = ac.b_lblk;
                if found.len < ac.g.len {
                    // Couldn't get the whole window: place the found blocks so they still
                    // cover the original request.
                    let winl = ac.o_lblk - ac.g_lblk;
                    let wins = (found.len - ac.o_len) as u64;
                    let mut win = winl.min(wins);
                    let offs = ac.o_lblk % found.len as u64;
                    if offs > 0 && offs < win {
                        win = offs;
                    }
                    lstart = ac.o_lblk - win;
                }
                let len = found.len as u64;
                let mut pa = InodePa {
                    lstart,
                    pstart,
                    len,
                    unused: BTreeMap::from([(pstart, len)]),
                    free: len,
                };
                let start = pstart + (ac.o_lblk - lstart);
                let end = (pstart + len).min(start + ac.o_len as u64);
                Self::take_from_inode_pa(&mut pa, start, end - start);
                ac.b = self.extent_of(start, end - start);
                if pa.free > 0 {
                    self.inode_pa.entry(req.ino).or_default().push(pa);
                }
            }
        }
    }

    /// `ext4_mb_add_n_trim` / `ext4_mb_discard_lg_preallocations`: a bucket longer than 8
    /// loses its unused PAs (smallest first, sparing the one just used) down to 5.
    fn trim_lg(&mut self, cpu: u32, keep: usize) {
        let pas = self.lg.get_mut(&cpu).expect("locality group");
        let order = pas[keep].order();
        let keep_seq = pas[keep].seq;
        let mut bucket: Vec<(u64, u64)> = pas
            .iter()
            .filter(|pa| pa.order() == order)
            .map(|pa| (pa.free, pa.seq))
            .collect();
        if bucket.len() <= 8 {
            return;
        }
        bucket.sort();
        let mut total = bucket.len();
        let mut victims = Vec::new();
        for &(_, seq) in &bucket {
            if seq == keep_seq {
                continue;
            }
            victims.push(seq);
            total -= 1;
            if total <= 5 {
                break;
            }
        }
        let mut released = Vec::new();
        pas.retain(|pa| {
            let victim = victims.contains(&pa.seq);
            if victim {
                released.push((pa.pstart, pa.free));
            }
            !victim
        });
        for (pstart, free) in released {
            self.buddy_free(pstart, free);
        }
    }

    /// `ext4_mb_mark_diskspace_used`: set the bits in the on-disk bitmap, lower the
    /// descriptor's free count; the bitmap and descriptor blocks are dirtied.
    fn mark_diskspace_used(&mut self, ex: FreeExtent) -> Touched {
        let pblk = self.groups[ex.group as usize].first_block + ex.start as u64;
        self.log(MbEvent::Allocated {
            pblk,
            len: ex.len as u64,
        });
        let group = &mut self.groups[ex.group as usize];
        assert!(
            ex.start + ex.len <= group.nblocks,
            "extent past the group's end"
        );
        group.disk_mark_used(ex.start, ex.len);
        group.disk_free -= ex.len;
        self.free_total -= ex.len as u64;
        group.block_uninit = false;
        let mut touched = Touched::new();
        touched.add(group.block_bitmap, MetaKind::BlockBitmap);
        touched.add(group.gdt_block, MetaKind::GroupDesc);
        touched
    }

    /// Returns blocks to the buddy (never to the on-disk bitmap: they were free there).
    fn buddy_free(&mut self, pblk: u64, len: u64) {
        let mut block = pblk;
        while block < pblk + len {
            let group = &mut self.groups[(block / BLOCKS_PER_GROUP) as usize];
            let offset = (block - group.first_block) as u32;
            let take = (pblk + len - block).min((group.nblocks - offset) as u64) as u32;
            assert!(
                group.disk_is_free(offset, take),
                "returning disk-used blocks to the buddy"
            );
            group.buddy.free_range(offset, take);
            block += take as u64;
        }
    }

    // -----------------------------------------------------------------------------------------
    // Preallocation discard
    // -----------------------------------------------------------------------------------------

    /// `ext4_discard_preallocations`: the inode's unused preallocated blocks go back to the
    /// buddy (truncate, last close, eviction). Returns how many.
    pub fn discard_inode_preallocations(&mut self, ino: Ino) -> u64 {
        let Some(pas) = self.inode_pa.remove(&ino) else {
            return 0;
        };
        let mut freed = 0;
        for pa in pas {
            for (&s, &l) in &pa.unused {
                self.buddy_free(s, l);
                freed += l;
            }
        }
        freed
    }

    /// `ext4_mb_discard_preallocations`: on ENOSPC, discard PAs group by group until `needed`
    /// blocks came back. Returns how many.
    fn discard_all_preallocations(&mut self, needed: u64) -> u64 {
        let mut freed = 0;
        for group in 0..self.groups.len() as u64 {
            if freed >= needed {
                break;
            }
            let first = group * BLOCKS_PER_GROUP;
            let end = first + BLOCKS_PER_GROUP;
            let mut released = Vec::new();
            for pas in self.inode_pa.values_mut() {
                pas.retain(|pa| {
                    let here = (first..end).contains(&pa.pstart);
                    if here {
                        released.extend(pa.unused.iter().map(|(&s, &l)| (s, l)));
                    }
                    !here
                });
            }
            self.inode_pa.retain(|_, pas| !pas.is_empty());
            for pas in self.lg.values_mut() {
                pas.retain(|pa| {
                    let here = (first..end).contains(&pa.pstart);
                    if here {
                        released.push((pa.pstart, pa.free));
                    }
                    !here
                });
            }
            for (s, l) in released {
                self.buddy_free(s, l);
                freed += l;
            }
        }
        freed
    }

    // -----------------------------------------------------------------------------------------
    // Freeing
    // -----------------------------------------------------------------------------------------

    /// `ext4_free_blocks`: clear the blocks in the on-disk bitmap (and raise the descriptor's
    /// free count) at once, dirtying both blocks of each group touched. With a transaction
    /// (`tid`), the blocks stay used in the buddy until [`MbAlloc::release_committed`] of that
    /// transaction (`ext4_mb_free_metadata`: data blocks too, unless `data=writeback`);
    /// without one (no journal) they are free at once.
    pub fn free(&mut self, pblk: u64, len: u64, tid: Option<Tid>) -> Touched {
        assert!(
            len > 0 && pblk + len <= self.blocks_count,
            "free {pblk}+{len}"
        );
        let mut touched = Touched::new();
        let mut block = pblk;
        while block < pblk + len {
            let group_index = (block / BLOCKS_PER_GROUP) as usize;
            let group = &mut self.groups[group_index];
            let offset = (block - group.first_block) as u32;
            let take = (pblk + len - block).min((group.nblocks - offset) as u64) as u32;
            group.disk_mark_free(offset, take);
            group.disk_free += take;
            self.free_total += take as u64;
            touched.add(group.block_bitmap, MetaKind::BlockBitmap);
            touched.add(group.gdt_block, MetaKind::GroupDesc);
            match tid {
                Some(tid) => {
                    self.add_pending(tid, block, take as u64);
                    self.log(MbEvent::Freed {
                        pblk: block,
                        len: take as u64,
                        tid,
                    });
                }
                None => group.buddy.free_range(offset, take),
            }
            block += take as u64;
        }
        touched
    }

    /// `ext4_mb_free_metadata`: onto the transaction's list, merged with a neighbour freed by
    /// the same transaction in the same group (`can_merge`).
    fn add_pending(&mut self, tid: Tid, start: u64, len: u64) {
        let list = self.pending.entry(tid).or_default();
        let mut start = start;
        let mut len = len;
        let group = start / BLOCKS_PER_GROUP;
        if let Some((&s, &l)) = list.range(..start).next_back() {
            if s + l == start && s / BLOCKS_PER_GROUP == group {
                list.remove(&s);
                start = s;
                len += l;
            }
        }
        if let Some(&l) = list.get(&(start + len)) {
            if (start + len) / BLOCKS_PER_GROUP == group {
                list.remove(&(start + len));
                len += l;
            }
        }
        list.insert(start, len);
    }

    /// `ext4_free_data_callback`, run by jbd2 when transaction `tid` has committed (and, in
    /// commit order, every earlier one): its freed blocks become allocatable. Returns the
    /// extents to discard, in order, when the file system is mounted with `discard`.
    pub fn release_committed(&mut self, tid: Tid) -> Vec<(u64, u64)> {
        let later = self.pending.split_off(&(tid + 1));
        let done = std::mem::replace(&mut self.pending, later);
        let mut discards = Vec::new();
        for (_, list) in done {
            for (start, len) in list {
                self.buddy_free(start, len);
                discards.push((start, len));
            }
        }
        discards
    }

    // -----------------------------------------------------------------------------------------
    // Invariants
    // -----------------------------------------------------------------------------------------

    /// Checks the allocator's invariants, panicking on a violation: per group, the buddy's
    /// counts match its runs and chunks; buddy-free blocks are free on disk; preallocated and
    /// pending blocks are free on disk and used in the buddy; and the on-disk free count is
    /// buddy free + preallocated + pending.
    pub fn check_invariants(&self) {
        assert_eq!(
            self.free_total,
            self.groups.iter().map(|g| g.disk_free as u64).sum::<u64>(),
            "s_freeclusters_counter"
        );
        let mut pa_per_group = vec![0u64; self.groups.len()];
        let mut held: BTreeMap<u64, u64> = BTreeMap::new();
        for pa in self.inode_pa.values().flatten() {
            assert_eq!(pa.free, pa.unused.values().sum::<u64>());
            for (&s, &l) in &pa.unused {
                held.insert(s, l);
            }
        }
        for pa in self.lg.values().flatten() {
            held.insert(pa.pstart, pa.free);
        }
        for list in self.pending.values() {
            for (&s, &l) in list {
                assert!(held.insert(s, l).is_none(), "block {s} pending twice");
            }
        }
        let mut previous_end = 0;
        for (&s, &l) in &held {
            assert!(s >= previous_end, "block {s} held twice (PA / pending)");
            previous_end = s + l;
            let mut block = s;
            while block < s + l {
                let group = &self.groups[(block / BLOCKS_PER_GROUP) as usize];
                let offset = (block - group.first_block) as u32;
                let take = (s + l - block).min((group.nblocks - offset) as u64) as u32;
                assert!(
                    group.disk_is_free(offset, take),
                    "held block {block} used on disk"
                );
                assert!(
                    group.buddy.run_of(offset).is_none()
                        && group
                            .buddy
                            .runs
                            .range(offset..offset + take)
                            .next()
                            .is_none(),
                    "held block {block} free in the buddy"
                );
                pa_per_group[(block / BLOCKS_PER_GROUP) as usize] += take as u64;
                block += take as u64;
            }
        }
        for (index, group) in self.groups.iter().enumerate() {
            let runs_free: u32 = group.buddy.runs.values().sum();
            assert_eq!(runs_free, group.buddy.free, "group {index}: bb_free");
            let chunk_free: u32 = (0..=MAX_ORDER)
                .map(|o| group.buddy.chunks[o as usize].len() as u32 * (1 << o))
                .sum();
            assert_eq!(chunk_free, group.buddy.free, "group {index}: buddy chunks");
            let disk_used: u32 = group.disk_used.values().sum();
            assert_eq!(
                group.disk_free,
                group.nblocks - disk_used,
                "group {index}: descriptor free count"
            );
            for (&s, &l) in &group.buddy.runs {
                assert!(
                    group.disk_is_free(s, l),
                    "group {index}: buddy-free block used"
                );
            }
            assert_eq!(
                group.disk_free as u64,
                group.buddy.free as u64 + pa_per_group[index],
                "group {index}: disk free = buddy free + preallocated + pending"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::layout::MkfsOptions;
    use super::*;

    const GIB: u64 = 1 << 30;

    fn fs16() -> (Layout, MbAlloc) {
        let layout = Layout::new(16 * GIB, &MkfsOptions::default()).unwrap();
        let mb = MbAlloc::new(&layout);
        mb.check_invariants();
        (layout, mb)
    }

    fn data(ino: Ino, lblk: u64, len: u64, goal: u64) -> AllocRequest {
        AllocRequest {
            ino,
            lblk,
            len,
            goal,
            data: true,
            try_goal: false,
            left: None,
            right: None,
            i_size_blocks: 0,
            open_for_write: true,
            cpu: 0,
        }
    }

    #[test]
    fn buddy_chunks_are_the_maximal_aligned_pieces() {
        let mut chunks = Vec::new();
        for_each_chunk(3, 20, |s, o| chunks.push((s, o)));
        assert_eq!(chunks, vec![(3, 0), (4, 2), (8, 3), (16, 2)]);
        let mut b = Buddy::new();
        b.free_range(0, 32768);
        assert_eq!(b.chunks[13].len(), 4);
        assert_eq!(b.find_extent(0, 1), 8192);
        assert_eq!(b.find_extent(0, 9000), 16384);
        b.mark_used(0, 1);
        assert_eq!(b.find_extent(1, 1), 1);
        assert_eq!(b.find_extent(2, 1), 2);
        assert_eq!(b.largest_free_order(), Some(13));
    }

    #[test]
    fn fresh_counts_match_the_layout() {
        let (layout, mb) = fs16();
        assert_eq!(mb.free_blocks_count(), layout.free_blocks());
        for g in 0..layout.groups {
            assert_eq!(mb.group_free_blocks(g), layout.group_free_blocks(g));
        }
        // Group 2 has nothing of mke2fs's: still BLOCK_UNINIT; group 0 and the last are not.
        assert!(mb.groups[2].block_uninit);
        assert!(!mb.groups[0].block_uninit);
        assert!(!mb.groups[65].block_uninit, "the journal's group");
        assert!(!mb.groups[127].block_uninit, "the last group");
        assert!(mb.groups[1].block_uninit, "only its superblock backup");
    }

    #[test]
    fn stream_request_is_normalized_and_the_rest_preallocated_for_the_file() {
        let (layout, mut mb) = fs16();
        // A 4 MiB file written back 1 MiB (256 blocks) at a time: i_size <= 4 MiB gives a
        // 2 MiB (512-block) window aligned on 2 MiB.
        let mut req = data(12, 0, 256, layout.group_first_block(1));
        req.i_size_blocks = 1024;
        let a = mb.new_blocks(&req).unwrap();
        assert_eq!(a.len, 256);
        assert_eq!(
            mb.preallocated_blocks(),
            256,
            "the window's other half is kept"
        );
        assert_eq!(
            a.touched.blocks,
            vec![
                (
                    layout.block_bitmap(a.pblk / BLOCKS_PER_GROUP),
                    MetaKind::BlockBitmap
                ),
                (1, MetaKind::GroupDesc)
            ]
        );
        mb.check_invariants();
        // The next chunk comes out of the inode's PA, contiguous, using it up.
        let mut next = data(12, 256, 256, a.pblk + 256);
        next.i_size_blocks = 1024;
        next.left = Some((255, a.pblk + 255));
        let b = mb.new_blocks(&next).unwrap();
        assert_eq!((b.pblk, b.len), (a.pblk + 256, 256));
        assert_eq!(mb.preallocated_blocks(), 0);
        // The third asks for the next window at the block after the left neighbour.
        let mut third = data(12, 512, 256, 0);
        third.i_size_blocks = 1024;
        third.left = Some((511, a.pblk + 511));
        let c = mb.new_blocks(&third).unwrap();
        assert_eq!(c.pblk, a.pblk + 512, "merged with the left neighbour");
        assert_eq!(mb.preallocated_blocks(), 256);
        // Truncate discards the rest.
        assert_eq!(mb.discard_inode_preallocations(12), 256);
        assert_eq!(mb.preallocated_blocks(), 0);
        mb.check_invariants();
    }

    #[test]
    fn small_files_share_the_locality_group_window() {
        let (layout, mut mb) = fs16();
        let goal = layout.group_first_block(1);
        let mut blocks = Vec::new();
        for ino in 20..40 {
            let mut req = data(ino, 0, 1, goal);
            req.i_size_blocks = 1;
            let a = mb.new_blocks(&req).unwrap();
            blocks.push(a.pblk);
        }
        let first = blocks[0];
        assert_eq!(
            blocks,
            (first..first + 20).collect::<Vec<_>>(),
            "one after another"
        );
        assert_eq!(mb.preallocated_blocks(), 512 - 20);
        mb.check_invariants();
    }

    #[test]
    fn freed_blocks_wait_for_their_transaction_to_commit() {
        let layout = Layout::new(64 << 20, &MkfsOptions::default()).unwrap();
        let mut mb = MbAlloc::new(&layout);
        // Take every free block, one request per block (no preallocation: metadata).
        let total = mb.allocatable_blocks();
        let mut got = Vec::new();
        for _ in 0..total {
            got.push(mb.new_blocks(&AllocRequest::meta(12, 0)).unwrap().pblk);
        }
        assert_eq!(
            mb.new_blocks(&AllocRequest::meta(12, 0)),
            Err(Errno::ENOSPC)
        );
        let victim = got[got.len() / 2];
        let touched = mb.free(victim, 1, Some(7));
        assert_eq!(touched.len(), 2);
        assert_eq!(mb.free_blocks_count(), 1, "free on disk at once");
        assert!(mb.is_pending(victim));
        assert_eq!(
            mb.new_blocks(&AllocRequest::meta(12, 0)),
            Err(Errno::ENOSPC),
            "not reusable before the commit"
        );
        mb.check_invariants();
        assert_eq!(mb.release_committed(6), vec![]);
        assert_eq!(mb.release_committed(7), vec![(victim, 1)]);
        assert!(!mb.is_pending(victim));
        assert_eq!(
            mb.new_blocks(&AllocRequest::meta(12, 0)).unwrap().pblk,
            victim
        );
        mb.check_invariants();
    }

    #[test]
    fn pending_frees_of_one_transaction_merge_for_discard() {
        let (layout, mut mb) = fs16();
        let goal = layout.group_first_block(2);
        let a = mb.new_blocks(&data(12, 0, 2048, goal)).unwrap();
        mb.discard_inode_preallocations(12);
        mb.free(a.pblk, 10, Some(3));
        mb.free(a.pblk + 10, 10, Some(3));
        mb.free(a.pblk + 20, 10, Some(4));
        assert_eq!(
            mb.release_committed(4),
            vec![(a.pblk, 20), (a.pblk + 20, 10)]
        );
        mb.check_invariants();
    }
}
