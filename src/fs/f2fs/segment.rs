//! F2FS's segment manager as pure state (fs/f2fs/segment.c, segment.h; Linux 4.9 to 6.x where
//! they agree): the SIT (per segment: valid blocks, their bitmap, the bitmap as of the last
//! checkpoint, the segment's type and age), the six current segments (logs), free, dirty and
//! prefree segments, block allocation (`f2fs_allocate_data_block`: the next free block of the
//! log's current segment; a new segment by `new_curseg` / `get_new_segment`, or slack space
//! recycling into a dirty segment's holes by `change_curseg` / `get_ssr_segment` when space is
//! short), invalidation (`f2fs_invalidate_blocks`) and GC victim selection
//! (`get_victim_by_default`: greedy for foreground GC and SSR, cost-benefit for background GC).
//! The summary (owner) of each valid block is kept for GC (`struct f2fs_summary`).
//!
//! Simplifications: one segment per section; a segment's age is the time of its last
//! allocation (Linux averages the blocks' mtimes); `get_new_segment` takes the next free
//! segment after the log's current one, wrapping (no zone or hint logic beyond that).

use super::layout::{Layout, BLOCKS_PER_SEG};
use std::collections::BTreeSet;

/// A block address (`block_t`).
pub type BlockAddr = u32;

/// The six logs (`enum CURSEG_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Log {
    HotData = 0,
    WarmData = 1,
    ColdData = 2,
    HotNode = 3,
    WarmNode = 4,
    ColdNode = 5,
}

impl Log {
    pub const ALL: [Log; 6] = [
        Log::HotData,
        Log::WarmData,
        Log::ColdData,
        Log::HotNode,
        Log::WarmNode,
        Log::ColdNode,
    ];

    pub fn is_node(self) -> bool {
        matches!(self, Log::HotNode | Log::WarmNode | Log::ColdNode)
    }

    pub fn name(self) -> &'static str {
        match self {
            Log::HotData => "hot-data",
            Log::WarmData => "warm-data",
            Log::ColdData => "cold-data",
            Log::HotNode => "hot-node",
            Log::WarmNode => "warm-node",
            Log::ColdNode => "cold-node",
        }
    }
}

/// Who a valid block belongs to (`struct f2fs_summary`: the node id and offset in it; here
/// the file and page for data, the node id for a node block).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    Data { ino: u64, index: u64 },
    Node { nid: u32 },
}

const WORDS: usize = (BLOCKS_PER_SEG / 64) as usize;

/// One SIT entry (`struct seg_entry`) and the segment's summaries.
#[derive(Debug, Clone)]
struct SegEntry {
    valid: u16,
    cur_map: [u64; WORDS],
    /// `ckpt_valid_map`: valid as of the last checkpoint; a block set here may not be
    /// reused before the next checkpoint (SSR skips it).
    ckpt_map: [u64; WORDS],
    ckpt_valid: u16,
    log: Option<Log>,
    mtime: u64,
    owners: Option<Box<[Option<Owner>]>>,
}

impl SegEntry {
    fn new() -> SegEntry {
        SegEntry {
            valid: 0,
            cur_map: [0; WORDS],
            ckpt_map: [0; WORDS],
            ckpt_valid: 0,
            log: None,
            mtime: 0,
            owners: None,
        }
    }

    fn test(map: &[u64; WORDS], off: usize) -> bool {
        map[off / 64] >> (off % 64) & 1 == 1
    }
}

/// A log's current segment (`struct curseg_info`).
#[derive(Debug, Clone, Copy)]
struct Curseg {
    segno: u32,
    next_blkoff: u32,
    /// Slack space recycling: the segment is a dirty one whose holes are being filled.
    ssr: bool,
}

/// Counters of the segment manager.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SegStats {
    pub new_segments: u64,
    pub ssr_segments: u64,
    pub blocks_allocated: u64,
    pub blocks_invalidated: u64,
}

/// The segment manager.
#[derive(Debug, Clone)]
pub struct Segments {
    pub layout: Layout,
    sit: Vec<SegEntry>,
    cursegs: [Curseg; 6],
    /// Free segments (no valid block now or at the last checkpoint, not current).
    free: BTreeSet<u32>,
    /// Dirty segments by (valid blocks, segno): partly valid, not current.
    dirty: BTreeSet<(u16, u32)>,
    /// Segments with no valid block left that still hold checkpointed blocks: free after the
    /// next checkpoint (`PRE` dirty type).
    prefree: BTreeSet<u32>,
    /// SIT entries changed since the last checkpoint (`dirty_sentries`).
    pub dirty_sentries: BTreeSet<u32>,
    /// Which logs exist (`active_logs`): the others' blocks go to these.
    active_logs: u8,
    pub stats: SegStats,
    /// Valid blocks in the main area (`valid_block_count` of data and nodes).
    pub valid_blocks: u64,
}

impl Segments {
    /// A freshly formatted main area: the six logs at segments 0..6 (mkfs gives each log a
    /// segment of its own), everything else free.
    pub fn new(layout: Layout, active_logs: u8) -> Segments {
        let n = layout.main_segments as usize;
        let mut free: BTreeSet<u32> = (0..n as u32).collect();
        let mut cursegs = [Curseg {
            segno: 0,
            next_blkoff: 0,
            ssr: false,
        }; 6];
        let mut sit = vec![SegEntry::new(); n];
        for (i, log) in Log::ALL.iter().enumerate() {
            cursegs[i].segno = i as u32;
            free.remove(&(i as u32));
            sit[i].log = Some(*log);
        }
        Segments {
            layout,
            sit,
            cursegs,
            free,
            dirty: BTreeSet::new(),
            prefree: BTreeSet::new(),
            dirty_sentries: BTreeSet::new(),
            active_logs,
            stats: SegStats::default(),
            valid_blocks: 0,
        }
    }

    pub fn free_segments(&self) -> u64 {
        self.free.len() as u64
    }

    pub fn prefree_segments(&self) -> u64 {
        self.prefree.len() as u64
    }

    pub fn dirty_segments(&self) -> u64 {
        self.dirty.len() as u64
    }

    /// `has_not_enough_free_secs(sbi, 0, needed)`: free sections at or below what dirty node
    /// and dentry pages will need plus the reserved sections.
    pub fn not_enough_free(&self, dirty_nodes: u64, dirty_dents: u64, freed: u64) -> bool {
        let node_secs = dirty_nodes.div_ceil(BLOCKS_PER_SEG);
        let dent_secs = dirty_dents.div_ceil(BLOCKS_PER_SEG);
        self.free_segments() + freed <= node_secs + 2 * dent_secs + self.layout.reserved_segments
    }

    /// `f2fs_need_SSR`: free sections at or below twice the reserve (`min_ssr_sections` is
    /// the reserve, segment.h) plus pending node and dentry pages.
    pub fn need_ssr(&self, dirty_nodes: u64, dirty_dents: u64) -> bool {
        let node_secs = dirty_nodes.div_ceil(BLOCKS_PER_SEG);
        let dent_secs = dirty_dents.div_ceil(BLOCKS_PER_SEG);
        self.free_segments() <= node_secs + 2 * dent_secs + 2 * self.layout.reserved_segments
    }

    /// The log a block of `wanted` goes to with `active_logs` of 2, 4 or 6
    /// (`__get_segment_type_2/4/6`).
    pub fn effective_log(&self, wanted: Log) -> Log {
        match self.active_logs {
            2 => {
                if wanted.is_node() {
                    Log::HotNode
                } else {
                    Log::HotData
                }
            }
            4 => match wanted {
                Log::HotData => Log::HotData,
                Log::WarmData | Log::ColdData => Log::ColdData,
                Log::HotNode => Log::HotNode,
                Log::WarmNode | Log::ColdNode => Log::ColdNode,
            },
            _ => wanted,
        }
    }

    /// `f2fs_allocate_data_block`: the next block of `log` for `owner`, made valid.
    /// `ssr_allowed`: the file system is in adaptive mode and short of free segments. Returns
    /// `None` when no free block exists anywhere (the file system is full).
    pub fn allocate(
        &mut self,
        log: Log,
        owner: Owner,
        now: u64,
        ssr_allowed: bool,
    ) -> Option<BlockAddr> {
        let log = self.effective_log(log);
        let i = log as usize;
        loop {
            let cur = self.cursegs[i];
            if let Some(off) = self.next_free_blkoff(cur.segno, cur.next_blkoff, cur.ssr) {
                self.cursegs[i].next_blkoff = off as u32 + 1;
                let addr = self.layout.seg_start(cur.segno) + off as u64;
                self.set_valid(cur.segno, off, owner, now);
                self.stats.blocks_allocated += 1;
                return Some(addr as BlockAddr);
            }
            // allocate_segment_by_default: the warm node log always takes a new segment;
            // others recycle a dirty segment's holes when space is short.
            if !self.switch_segment(log, ssr_allowed && log != Log::WarmNode) {
                return None;
            }
        }
    }

    /// The first block at or after `from` that is free now and was free at the last
    /// checkpoint (`__next_free_blkoff`); in LFS mode simply `from` while below the end.
    fn next_free_blkoff(&self, segno: u32, from: u32, ssr: bool) -> Option<usize> {
        let entry = &self.sit[segno as usize];
        (from as usize..BLOCKS_PER_SEG as usize).find(|&off| {
            !SegEntry::test(&entry.cur_map, off) && (!ssr || !SegEntry::test(&entry.ckpt_map, off))
        })
    }

    /// Retires `log`'s current segment and gives it another: a dirty segment (SSR) or a free
    /// one. False when neither exists.
    fn switch_segment(&mut self, log: Log, try_ssr: bool) -> bool {
        let i = log as usize;
        let old = self.cursegs[i].segno;
        let victim = if try_ssr { self.ssr_victim(log) } else { None };
        let (segno, ssr) = match victim {
            Some(segno) => (segno, true),
            None => match self.new_free_segment(old) {
                Some(segno) => (segno, false),
                None => match self.ssr_victim_any() {
                    Some(segno) => (segno, true),
                    None => return false,
                },
            },
        };
        self.cursegs[i] = Curseg {
            segno,
            next_blkoff: 0,
            ssr,
        };
        if ssr {
            let valid = self.sit[segno as usize].valid;
            self.dirty.remove(&(valid, segno));
            self.stats.ssr_segments += 1;
        } else {
            self.free.remove(&segno);
            self.stats.new_segments += 1;
        }
        self.sit[segno as usize].log = Some(log);
        self.dirty_sentries.insert(segno);
        // The old segment leaves the logs: dirty, prefree or (if never used) free.
        self.locate_dirty(old);
        true
    }

    /// `get_new_segment`: the next free segment after `hint`, wrapping.
    fn new_free_segment(&self, hint: u32) -> Option<u32> {
        self.free
            .range(hint + 1..)
            .next()
            .or_else(|| self.free.iter().next())
            .copied()
    }

    /// `get_ssr_segment`: the dirty segment of the same type with the fewest valid blocks
    /// that has a block free now and at the last checkpoint.
    fn ssr_victim(&self, log: Log) -> Option<u32> {
        self.dirty.iter().map(|&(_, segno)| segno).find(|&segno| {
            self.sit[segno as usize].log == Some(log) && self.has_reusable_block(segno)
        })
    }

    /// Any dirty segment with a reusable block (the last resort before `ENOSPC`).
    fn ssr_victim_any(&self) -> Option<u32> {
        self.dirty
            .iter()
            .map(|&(_, segno)| segno)
            .find(|&segno| self.has_reusable_block(segno))
    }

    fn has_reusable_block(&self, segno: u32) -> bool {
        let e = &self.sit[segno as usize];
        e.cur_map
            .iter()
            .zip(e.ckpt_map.iter())
            .any(|(&a, &b)| a | b != u64::MAX)
    }

    fn is_current(&self, segno: u32) -> bool {
        self.cursegs.iter().any(|c| c.segno == segno)
    }

    /// `locate_dirty_segment`: files a non-current segment by its valid blocks.
    fn locate_dirty(&mut self, segno: u32) {
        if self.is_current(segno) {
            return;
        }
        let e = &self.sit[segno as usize];
        let (valid, ckpt_valid) = (e.valid, e.ckpt_valid);
        // The caller took it off the dirty list (under its old count) if it was there.
        if valid == 0 {
            if ckpt_valid == 0 {
                self.prefree.remove(&segno);
                self.free.insert(segno);
                self.sit[segno as usize].log = None;
            } else {
                self.prefree.insert(segno);
            }
        } else if u64::from(valid) < BLOCKS_PER_SEG {
            self.prefree.remove(&segno);
            self.dirty.insert((valid, segno));
        } else {
            self.prefree.remove(&segno);
        }
    }

    fn set_valid(&mut self, segno: u32, off: usize, owner: Owner, now: u64) {
        let e = &mut self.sit[segno as usize];
        assert!(
            !SegEntry::test(&e.cur_map, off),
            "f2fs: block {off} of segment {segno} allocated twice"
        );
        // No block is reused before the checkpoint that frees it: a crash would find the
        // checkpointed data overwritten.
        assert!(
            !SegEntry::test(&e.ckpt_map, off),
            "f2fs: block {off} of segment {segno} reused before the checkpoint that frees it"
        );
        e.cur_map[off / 64] |= 1 << (off % 64);
        e.valid += 1;
        e.mtime = now;
        e.owners
            .get_or_insert_with(|| vec![None; BLOCKS_PER_SEG as usize].into_boxed_slice())[off] =
            Some(owner);
        self.valid_blocks += 1;
        self.dirty_sentries.insert(segno);
    }

    /// `f2fs_invalidate_blocks`: `addr` no longer holds live data.
    pub fn invalidate(&mut self, addr: BlockAddr) {
        let addr = u64::from(addr);
        let segno = self.layout.segno(addr);
        let off = ((addr - self.layout.main_blkaddr) % BLOCKS_PER_SEG) as usize;
        let e = &mut self.sit[segno as usize];
        assert!(
            SegEntry::test(&e.cur_map, off),
            "f2fs: invalidating block {addr}, which is not valid"
        );
        let before = e.valid;
        e.cur_map[off / 64] &= !(1 << (off % 64));
        e.valid -= 1;
        if let Some(owners) = e.owners.as_mut() {
            owners[off] = None;
        }
        self.valid_blocks -= 1;
        self.stats.blocks_invalidated += 1;
        self.dirty_sentries.insert(segno);
        if !self.is_current(segno) {
            self.dirty.remove(&(before, segno));
            self.locate_dirty(segno);
        }
    }

    /// Updates the owner of a valid block (a node's id is stable; data moves only with a new
    /// address, so this serves node blocks whose owner is recorded late).
    pub fn owner(&self, addr: BlockAddr) -> Option<Owner> {
        let addr = u64::from(addr);
        let segno = self.layout.segno(addr);
        let off = ((addr - self.layout.main_blkaddr) % BLOCKS_PER_SEG) as usize;
        let e = &self.sit[segno as usize];
        if !SegEntry::test(&e.cur_map, off) {
            return None;
        }
        e.owners.as_ref().and_then(|o| o[off])
    }

    pub fn is_valid(&self, addr: BlockAddr) -> bool {
        let addr = u64::from(addr);
        let segno = self.layout.segno(addr);
        let off = ((addr - self.layout.main_blkaddr) % BLOCKS_PER_SEG) as usize;
        SegEntry::test(&self.sit[segno as usize].cur_map, off)
    }

    /// A checkpoint completed: the current bitmaps become the checkpointed ones and prefree
    /// segments become free (`f2fs_clear_prefree_segments`). Returns the freed segments (to
    /// discard).
    pub fn checkpoint_done(&mut self) -> Vec<u32> {
        for &segno in &self.dirty_sentries {
            let e = &mut self.sit[segno as usize];
            e.ckpt_map = e.cur_map;
            e.ckpt_valid = e.valid;
        }
        self.dirty_sentries.clear();
        let freed: Vec<u32> = std::mem::take(&mut self.prefree).into_iter().collect();
        for &segno in &freed {
            self.locate_dirty(segno);
        }
        freed
    }

    /// Marks everything as checkpointed without I/O (the state a phone boots into).
    pub fn settle(&mut self) {
        self.checkpoint_done();
    }

    /// `get_victim_by_default` for foreground GC: the dirty segment with the fewest valid
    /// blocks (greedy), not current, not `excluded`.
    pub fn greedy_victim(&self, excluded: &BTreeSet<u32>) -> Option<u32> {
        self.dirty
            .iter()
            .map(|&(_, s)| s)
            .find(|s| !excluded.contains(s) && !self.is_current(*s))
    }

    /// Cost-benefit victim for background GC (`get_cb_cost`): minimises
    /// `UINT_MAX - 100 * (100 - u) * age / (100 + u)` with `u` the utilisation in percent and
    /// `age` 0..100 from the oldest to the youngest segment.
    pub fn cost_benefit_victim(&self, excluded: &BTreeSet<u32>) -> Option<u32> {
        let candidates: Vec<u32> = self
            .dirty
            .iter()
            .map(|&(_, s)| s)
            .filter(|s| !excluded.contains(s) && !self.is_current(*s))
            .collect();
        let min_mtime = candidates
            .iter()
            .map(|&s| self.sit[s as usize].mtime)
            .min()?;
        let max_mtime = candidates
            .iter()
            .map(|&s| self.sit[s as usize].mtime)
            .max()?;
        candidates.into_iter().min_by_key(|&s| {
            let e = &self.sit[s as usize];
            let u = u64::from(e.valid) * 100 / BLOCKS_PER_SEG;
            let age = if max_mtime == min_mtime {
                0
            } else {
                100 - 100 * (e.mtime - min_mtime) / (max_mtime - min_mtime)
            };
            (u64::from(u32::MAX) - 100 * (100 - u) * age / (100 + u), s)
        })
    }

    /// The valid blocks of `segno` with their owners.
    pub fn valid_blocks_of(&self, segno: u32) -> Vec<(BlockAddr, Owner)> {
        let e = &self.sit[segno as usize];
        let start = self.layout.seg_start(segno);
        (0..BLOCKS_PER_SEG as usize)
            .filter(|&off| SegEntry::test(&e.cur_map, off))
            .map(|off| {
                let owner = e
                    .owners
                    .as_ref()
                    .and_then(|o| o[off])
                    .expect("a valid block has a summary");
                ((start + off as u64) as BlockAddr, owner)
            })
            .collect()
    }

    pub fn valid_in(&self, segno: u32) -> u16 {
        self.sit[segno as usize].valid
    }

    /// Sum of every segment's valid count (the invariant check compares it with what the
    /// NAT and the files reference).
    pub fn total_valid(&self) -> u64 {
        self.sit.iter().map(|e| u64::from(e.valid)).sum()
    }

    /// The segments of the current logs, for reports and tests.
    pub fn current_segment(&self, log: Log) -> u32 {
        self.cursegs[self.effective_log(log) as usize].segno
    }

    /// Whether block `addr` was valid at the last checkpoint.
    pub fn was_checkpointed_valid(&self, addr: BlockAddr) -> bool {
        let addr = u64::from(addr);
        let segno = self.layout.segno(addr);
        let off = ((addr - self.layout.main_blkaddr) % BLOCKS_PER_SEG) as usize;
        SegEntry::test(&self.sit[segno as usize].ckpt_map, off)
    }

    /// Blocks filled in each data log's current segment (for the compacted summary's size).
    pub fn data_log_fill(&self) -> u64 {
        [Log::HotData, Log::WarmData, Log::ColdData]
            .iter()
            .map(|&l| u64::from(self.cursegs[l as usize].next_blkoff))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segs() -> Segments {
        Segments::new(Layout::format(256 << 20).unwrap(), 6)
    }

    fn data(index: u64) -> Owner {
        Owner::Data { ino: 3, index }
    }

    #[test]
    fn a_log_allocates_consecutive_blocks_then_moves_to_the_next_free_segment() {
        let mut s = segs();
        let first = s.allocate(Log::WarmData, data(0), 0, false).unwrap();
        let second = s.allocate(Log::WarmData, data(1), 0, false).unwrap();
        assert_eq!(second, first + 1);
        for i in 2..BLOCKS_PER_SEG {
            s.allocate(Log::WarmData, data(i), 0, false).unwrap();
        }
        let free = s.free_segments();
        let next = s.allocate(Log::WarmData, data(600), 0, false).unwrap();
        assert_eq!(s.free_segments(), free - 1);
        assert_ne!(
            s.layout.segno(u64::from(next)),
            s.layout.segno(u64::from(first))
        );
        assert_eq!(s.valid_blocks, BLOCKS_PER_SEG + 1);
    }

    #[test]
    fn an_emptied_segment_is_prefree_until_the_checkpoint_then_free() {
        let mut s = segs();
        let addrs: Vec<BlockAddr> = (0..BLOCKS_PER_SEG + 1)
            .map(|i| s.allocate(Log::WarmData, data(i), 0, false).unwrap())
            .collect();
        s.settle();
        let free = s.free_segments();
        for &a in &addrs[..BLOCKS_PER_SEG as usize] {
            s.invalidate(a);
        }
        assert_eq!(
            s.prefree_segments(),
            1,
            "checkpointed blocks: not reusable yet"
        );
        assert_eq!(s.free_segments(), free);
        let freed = s.checkpoint_done();
        assert_eq!(freed.len(), 1);
        assert_eq!(s.free_segments(), free + 1);
    }

    #[test]
    fn ssr_reuses_holes_but_not_blocks_freed_since_the_checkpoint() {
        let mut s = segs();
        let addrs: Vec<BlockAddr> = (0..BLOCKS_PER_SEG)
            .map(|i| s.allocate(Log::WarmData, data(i), 0, false).unwrap())
            .collect();
        // Move the log off the full segment.
        s.allocate(Log::WarmData, data(9999), 0, false).unwrap();
        s.settle();
        s.invalidate(addrs[10]);
        s.invalidate(addrs[20]);
        // Before a checkpoint the holes are not reusable.
        let seg = s.layout.segno(u64::from(addrs[0]));
        assert!(!s.has_reusable_block(seg));
        s.checkpoint_done();
        assert!(s.has_reusable_block(seg));
        // Force the current warm-data segment full, with SSR allowed.
        let cur = s.current_segment(Log::WarmData);
        while s.current_segment(Log::WarmData) == cur {
            s.allocate(Log::WarmData, data(1), 0, true).unwrap();
        }
        assert_eq!(
            s.current_segment(Log::WarmData),
            seg,
            "SSR picked the dirty segment"
        );
        assert_eq!(s.stats.ssr_segments, 1);
    }

    #[test]
    fn greedy_takes_the_emptiest_and_cost_benefit_prefers_old_cold_segments() {
        let mut s = segs();
        let mut all = Vec::new();
        for seg in 0..3u64 {
            for i in 0..BLOCKS_PER_SEG {
                all.push(
                    s.allocate(Log::WarmData, data(seg * 1000 + i), seg * 100, false)
                        .unwrap(),
                );
            }
        }
        s.allocate(Log::WarmData, data(99_999), 300, false).unwrap();
        let seg_of = |a: BlockAddr| s.layout.segno(u64::from(a));
        let (a, b, c) = (seg_of(all[0]), seg_of(all[512]), seg_of(all[1024]));
        // a: 100 invalid (old), b: 300 invalid (middle), c: 250 invalid (young).
        for &addr in all[..100]
            .iter()
            .chain(&all[512..812])
            .chain(&all[1024..1274])
        {
            s.invalidate(addr);
        }
        let none = BTreeSet::new();
        assert_eq!(s.greedy_victim(&none), Some(b));
        let cb = s.cost_benefit_victim(&none).unwrap();
        assert!(
            cb == a || cb == b,
            "the youngest segment is not the cost-benefit victim"
        );
        assert_ne!(cb, c);
        assert_eq!(s.valid_blocks_of(b).len(), 212);
    }

    #[test]
    fn active_logs_fold_temperatures() {
        let s = Segments::new(Layout::format(256 << 20).unwrap(), 2);
        assert_eq!(s.effective_log(Log::ColdData), Log::HotData);
        assert_eq!(s.effective_log(Log::WarmNode), Log::HotNode);
        let s = Segments::new(Layout::format(256 << 20).unwrap(), 4);
        assert_eq!(s.effective_log(Log::WarmData), Log::ColdData);
        assert_eq!(s.effective_log(Log::HotNode), Log::HotNode);
    }
}
