//! Writeback and dirty throttling (mm/page-writeback.c, fs/fs-writeback.c, mm/backing-dev.c of
//! Linux 3.10).
//!
//! - Dirty limits (`global_dirty_limits`): background and hard thresholds from the ratios (or
//!   bytes) of dirtyable memory (`global_dirtyable_memory` of 3.10.9: free + file LRU pages -
//!   `dirty_balance_reserve` (the high watermarks and lowmem reserve) - highmem's dirtyable
//!   pages on a 32-bit kernel unless `highmem_is_dirtyable` - `min_free_kbytes`, so it follows
//!   memory use; from 3.14 the reserve comes off the free pages only: `src/mm/zones.rs`); a
//!   background threshold at or above the hard one is halved, as in the kernel. The
//!   hard limit of the control line is `hard_dirty_limit`: `global_dirty_limit` follows the
//!   threshold up at once and down by 1/32 of the gap per 200 ms (`update_dirty_limit`).
//! - `balance_dirty_pages`, in jiffies of the run's `[stack.kernel] hz`: a writer calls
//!   [`Mm::balance_dirty_pages_ratelimited`] after each page it dirties; every
//!   `nr_dirtied_pause` pages (8 while `dirty_exceeded`) it checks the dirty + writeback count.
//!   At or below the freerun ceiling ((background + threshold) / 2) it goes on; above it kicks
//!   the flusher unless writeback is in progress and sleeps `period = HZ x pages_dirtied /
//!   task_ratelimit` jiffies (less the think time since its last pause; a pause under
//!   `bdi_min_pause` is skipped and credited), where `task_ratelimit = dirty_ratelimit x
//!   pos_ratio`. `pos_ratio` (`bdi_position_ratio`) is the cubic `1 + ((setpoint - dirty) /
//!   (limit - setpoint))^3` (2 at freerun, 1 at the setpoint, 0 at the limit) times the
//!   device's line (slope -1/(8 x write bandwidth) through its setpoint, at least 1/4) and
//!   lifted in the device's reserve area. A pause is at most `bdi_max_pause` (`MAX_PAUSE` =
//!   HZ/5, less on small memory) and ends on a timer tick (`io_schedule_timeout`).
//! - `__bdi_update_bandwidth`, every `BANDWIDTH_INTERVAL` (HZ/5) from the flusher and from
//!   throttled writers: the write bandwidth from completed writeback, smoothed over
//!   `roundup_pow_of_two(3 x HZ)` and once more (`bdi_update_write_bandwidth`); the dirty
//!   ratelimit towards the balanced rate `task_ratelimit x write_bw / dirty_rate`, only when
//!   the position error agrees (same-side filter) and by an eighth of a shaped step
//!   (`bdi_update_dirty_ratelimit`). `bdi_min_pause` targets 10 ms for one dirtier and `N x 10
//!   ms` when the ratelimit is `2^N` below the bandwidth (concurrent dirtiers).
//! - The flusher (one per device: `bdi_writeback_workfn`, a delayed work item). Its timer is
//!   armed `dirty_writeback_interval` ahead when the device gets its first dirty inode
//!   (`__mark_inode_dirty` -> `bdi_wakeup_thread_delayed`) and re-armed after each run while
//!   dirty inodes remain; `balance_dirty_pages` and reclaim run it at once
//!   (`bdi_wakeup_thread`). Each run (`wb_do_writeback`) does the queued work items
//!   (`wakeup_flusher_threads` from reclaim), then kupdate (`wb_check_old_data_flush`: once
//!   per interval, the inodes dirtied at least `dirty_expire` ago, compared in jiffies with
//!   `time_after`, so nothing is old enough before `dirty_expire` has passed), then background
//!   writeback (`wb_check_background_flush`: while dirty pages exceed the background threshold,
//!   every dirty inode). `wb_writeback` moves the qualifying inodes to `b_io` (`queue_io`:
//!   those that used their slice last time first, then the expired ones, oldest first) and
//!   `writeback_sb_inodes` serves them in turn, each `writeback_chunk_size` pages (half a
//!   second of bandwidth, at most 1/8 of the dirty limit, plus `MIN_WRITEBACK_PAGES`, rounded
//!   down to a multiple of it); an inode that used its chunk goes to `b_more_io` for its next
//!   turn (`requeue_io`), one that stopped short back to `b_dirty` (`redirty_tail`). It
//!   returns to `wb_writeback` every `HZ / 10` once it wrote something, where background and
//!   kupdate work stop if work is queued (they run again after it). Bios are asynchronous (no
//!   REQ_SYNC, `issued_async`), submitted from the flusher's own context.
//! - `write_cache_pages`: dirty pages of an inode in index order, locked, moved to writeback
//!   and gathered into bios of up to 512 KiB of consecutive blocks (`mpage_writepages`).
//!   `WB_SYNC_NONE` looks the dirty pages up as it goes (`pagevec_lookup_tag` with
//!   `PAGECACHE_TAG_DIRTY`), so it chases a writer that keeps dirtying the file, up to
//!   `nr_to_write`; `WB_SYNC_ALL` writes what was dirty when it began (`tag_pages_for_writeback`).
//!   With ext4's delayed allocation, 3.10's `ext4_da_writepages` raises a cyclic pass's
//!   `nr_to_write` to the inode's run of contiguous delayed dirty pages, at most
//!   `s_max_writeback_mb_bump` (128 MiB), and takes the bump back off before it returns
//!   ([`FsHooks::writeback_bump_pages`](super::FsHooks::writeback_bump_pages)).
//!
//! Simplifications: one device and one super block (`__writeback_inodes_wb` and
//! `writeback_sb_inodes` are one loop; the device's share of the dirty threshold is all of it
//! once it has completed writeback recently, `bdi_writeout_fraction`); an inode leaves the
//! writeback lists as soon as it has no dirty page (Linux leaves it there until the flusher or
//! `sync_inode_metadata` finds it clean) and the flusher writes no inode metadata (the VFS
//! writes it at fsync), so `I_DIRTY_SYNC` never keeps an inode listed; no per-CPU
//! `bdp_ratelimits` or `dirty_throttle_leaks`, no `PF_LESS_THROTTLE` or real-time boost of the
//! limits; the counters are exact (no per-CPU drift).

use super::bio::{BioRequest, PageSpan};
use super::Ino;
use super::{pg, Issuer, Mm, PageId, WbList};
use crate::dev::{IoFlags, IoOp};
use crate::kernel::Hz;
use crate::sim::{Blocker, Sim, WaitReason};
use crate::units::{Nanos, NS_PER_MS, PAGE_SIZE};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;

/// Sectors per page.
pub use crate::block::request::SECTORS_PER_PAGE;
/// Largest bio the page cache builds: 512 KiB (REFERENCES.md "max request size").
pub const MAX_BIO_PAGES: u32 = (512 * 1024 / PAGE_SIZE) as u32;
/// Pages of one `ext4_da_writepages` batch: `mpage_add_bh_to_extent` stops an extent at 8 MiB
/// ("Don't go larger than mballoc is willing to allocate", fs/ext4/inode.c, 3.10).
pub const DA_BATCH_PAGES: usize = (8 << 20) / PAGE_SIZE as usize;
/// `MIN_WRITEBACK_PAGES` = 4096 KiB worth of pages (fs/fs-writeback.c): the chunk written per
/// inode before the flusher moves on or re-checks its goal.
pub const MIN_WRITEBACK_PAGES: u64 = 4096 * 1024 / PAGE_SIZE;
/// `INIT_BW` = `100 << (20 - PAGE_SHIFT)` pages/s (mm/backing-dev.c): the write bandwidth and
/// dirty ratelimit before any measurement.
pub const INIT_BW_PAGES_PER_SEC: u64 = 100 * 1024 * 1024 / PAGE_SIZE;
/// Initial `nr_dirtied_pause`: 128 KiB worth of pages (`current->nr_dirtied_pause = 128 >>
/// (PAGE_SHIFT - 10)`, kernel/fork.c).
pub const INITIAL_DIRTIED_PAUSE: u64 = 32;
/// Pages between checks while `dirty_exceeded`: `32 >> (PAGE_SHIFT - 10)` = 8
/// (`balance_dirty_pages_ratelimited`).
pub const DIRTY_EXCEEDED_RATELIMIT: u64 = 8;
/// `DIRTY_POLL_THRESH` = 128 KiB worth of pages (mm/page-writeback.c).
pub const DIRTY_POLL_THRESH: u64 = 32;
/// `RATELIMIT_CALC_SHIFT` = 10: `pos_ratio` is a fixed-point number in 1/1024 units.
pub const RATELIMIT_CALC_SHIFT: u32 = 10;
/// `VM_COMPLETIONS_PERIOD_LEN` = 3 s (in jiffies `3 * HZ`): the writeout-fraction half-life.
pub const COMPLETIONS_PERIOD_SECS: u64 = 3;

/// `roundup_pow_of_two`.
fn roundup_pow_of_two(n: u64) -> u64 {
    n.max(1).next_power_of_two()
}

/// `ilog2`, with the kernel's `fls(0) - 1 = -1` for 0.
fn ilog2(n: u64) -> i64 {
    if n == 0 {
        -1
    } else {
        i64::from(n.ilog2())
    }
}

/// The device's writeback state of `struct backing_dev_info` (mm/backing-dev.c,
/// mm/page-writeback.c): the write bandwidth estimate, the dirty ratelimit and the counters
/// they are computed from. Rates are pages per second, times jiffies.
#[derive(Debug, Clone, Copy)]
pub struct Bdi {
    /// `bdi->write_bandwidth`: the last 200 ms estimate, smoothed over 3 s.
    pub write_bandwidth: u64,
    /// `bdi->avg_write_bandwidth`: `write_bandwidth` smoothed once more.
    pub avg_write_bandwidth: u64,
    /// `bdi->dirty_ratelimit`: the rate each dirtier is allowed at the setpoint; converges to
    /// the write bandwidth divided by the number of dirtiers.
    pub dirty_ratelimit: u64,
    /// `bdi->balanced_dirty_ratelimit`: the last balanced-rate estimate.
    pub balanced_dirty_ratelimit: u64,
    /// `bdi->bw_time_stamp` (jiffies).
    pub bw_time_stamp: u64,
    /// `bdi->dirtied_stamp`, `bdi->written_stamp`: `BDI_DIRTIED` / `BDI_WRITTEN` then.
    pub dirtied_stamp: u64,
    pub written_stamp: u64,
    /// `BDI_WRITTEN`: pages whose writeback completed (`bdi_writeout_inc`).
    pub written: u64,
    /// `bdi->dirty_exceeded`: dirty pages are over the limit; dirtiers check more often.
    pub dirty_exceeded: bool,
    /// `bdi->completions` with its aging: recent writeout completions, halved every
    /// `VM_COMPLETIONS_PERIOD_LEN` (`writeout_period`), and the jiffy the current period began.
    writeout_events: u64,
    writeout_period_start: u64,
}

impl Bdi {
    /// `bdi_init`: everything at `INIT_BW`, the clock at boot.
    pub fn new() -> Self {
        Bdi {
            write_bandwidth: INIT_BW_PAGES_PER_SEC,
            avg_write_bandwidth: INIT_BW_PAGES_PER_SEC,
            dirty_ratelimit: INIT_BW_PAGES_PER_SEC,
            balanced_dirty_ratelimit: INIT_BW_PAGES_PER_SEC,
            bw_time_stamp: 0,
            dirtied_stamp: 0,
            written_stamp: 0,
            written: 0,
            dirty_exceeded: false,
            writeout_events: 0,
            writeout_period_start: 0,
        }
    }

    /// Ages the writeout events to the period of `jiffies` (`fprop_new_period` per missed
    /// period).
    fn age_writeout(&mut self, jiffies: u64, hz: Hz) {
        let period = COMPLETIONS_PERIOD_SECS * u64::from(hz.0);
        let periods = (jiffies - self.writeout_period_start) / period;
        if periods > 0 {
            self.writeout_events >>= periods.min(63);
            self.writeout_period_start += periods * period;
        }
    }

    /// `bdi_writeout_inc` for `pages` completed at `jiffies`.
    fn writeout_inc(&mut self, pages: u64, jiffies: u64, hz: Hz) {
        self.written += pages;
        self.age_writeout(jiffies, hz);
        self.writeout_events += pages;
    }

    /// `bdi_writeout_fraction` of the only device: all recent writeout is its own, so 1 once
    /// anything completed recently, 0 when the aging has zeroed it.
    fn writeout_fraction_is_whole(&mut self, jiffies: u64, hz: Hz) -> bool {
        self.age_writeout(jiffies, hz);
        self.writeout_events > 0
    }

    /// `bdi_update_write_bandwidth` over `elapsed` jiffies.
    fn update_write_bandwidth(&mut self, elapsed: u64, hz: Hz) {
        let period = roundup_pow_of_two(3 * u64::from(hz.0));
        let avg = self.avg_write_bandwidth;
        let old = self.write_bandwidth;
        let mut bw = u128::from(self.written - self.written_stamp) * u128::from(hz.0);
        let (bw, avg) = if elapsed > period {
            let bw = (bw / u128::from(elapsed)) as u64;
            (bw, bw)
        } else {
            bw += u128::from(old) * u128::from(period - elapsed);
            let bw = (bw >> period.ilog2()) as u64;
            // One more level of smoothing, for filtering out sudden spikes.
            let avg = if avg > old && old >= bw {
                avg - ((avg - old) >> 3)
            } else if avg < old && old <= bw {
                avg + ((old - avg) >> 3)
            } else {
                avg
            };
            (bw, avg)
        };
        self.write_bandwidth = bw;
        self.avg_write_bandwidth = avg;
    }
}

impl Default for Bdi {
    fn default() -> Self {
        Self::new()
    }
}

/// The dirty state `balance_dirty_pages` works from, in pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirtyState {
    /// `background_thresh`, `dirty_thresh` (`global_dirty_limits`).
    pub background: u64,
    pub thresh: u64,
    /// `hard_dirty_limit`: the larger of `thresh` and the slowly following
    /// `global_dirty_limit`.
    pub limit: u64,
    /// `NR_FILE_DIRTY + NR_WRITEBACK`.
    pub dirty: u64,
    /// This device's share of `thresh` (`bdi_dirty_limit`) and of `dirty`.
    pub bdi_thresh: u64,
    pub bdi_dirty: u64,
}

impl DirtyState {
    /// `dirty_freerun_ceiling`.
    pub fn freerun(&self) -> u64 {
        (self.thresh + self.background) / 2
    }

    /// The global setpoint: the balance point, midway between freerun and the limit.
    pub fn setpoint(&self) -> u64 {
        (self.freerun() + self.limit) / 2
    }
}

/// `bdi_position_ratio` (1024 = 1.0): the global control line, a cubic that is 2 at freerun,
/// 1 at the setpoint and 0 at the limit, scaled by the device's line (linear through its
/// setpoint with slope -1/(8 x write bandwidth), not under 1/4) and lifted in the device's
/// reserve area (below half its threshold).
pub fn position_ratio(d: &DirtyState, write_bw: u64) -> u64 {
    let limit = d.limit;
    if d.dirty >= limit {
        return 0;
    }
    let setpoint = d.setpoint();
    let x = ((setpoint as i64 - d.dirty as i64) << RATELIMIT_CALC_SHIFT)
        / (limit as i64 - setpoint as i64 + 1);
    let mut pos_ratio: i64 = x;
    pos_ratio = (pos_ratio * x) >> RATELIMIT_CALC_SHIFT;
    pos_ratio = (pos_ratio * x) >> RATELIMIT_CALC_SHIFT;
    pos_ratio += 1 << RATELIMIT_CALC_SHIFT;
    let mut pos_ratio = u64::try_from(pos_ratio.max(0)).expect("non-negative");

    let thresh = d.thresh;
    let bdi_dirty = d.bdi_dirty;
    let bdi_thresh = d.bdi_thresh.min(thresh).max((limit - d.dirty) / 8);
    let x = (u128::from(bdi_thresh) << 16) / u128::from(thresh + 1);
    let bdi_setpoint = ((u128::from(setpoint) * x) >> 16) as u64;
    let span = ((u128::from(thresh - bdi_thresh + 8 * write_bw) * x) >> 16) as u64;
    let x_intercept = bdi_setpoint + span;
    if bdi_dirty < x_intercept - span / 4 {
        pos_ratio = (u128::from(pos_ratio) * u128::from(x_intercept - bdi_dirty)
            / u128::from(x_intercept - bdi_setpoint + 1)) as u64;
    } else {
        pos_ratio /= 4;
    }
    // The device's reserve area, against dirty pool underrun and disk idle.
    let x_intercept = bdi_thresh / 2;
    if bdi_dirty < x_intercept {
        if bdi_dirty > x_intercept / 8 {
            pos_ratio =
                (u128::from(pos_ratio) * u128::from(x_intercept) / u128::from(bdi_dirty)) as u64;
        } else {
            pos_ratio *= 8;
        }
    }
    pos_ratio
}

/// `bdi_update_dirty_ratelimit`: estimates the balanced rate, `task_ratelimit x write_bw /
/// dirty_rate` (with N dirtiers each at `task_ratelimit` the dirty rate is N times it, so the
/// balanced rate is write_bw / N), and moves `dirty_ratelimit` towards it only when
/// `task_ratelimit` lies on the same side (the same-side filter), by an eighth of a step that
/// shrinks as the rate nears its target.
fn update_dirty_ratelimit(bdi: &mut Bdi, d: &DirtyState, dirtied: u64, elapsed: u64, hz: Hz) {
    let setpoint = d.setpoint();
    let write_bw = bdi.avg_write_bandwidth;
    let dirty_ratelimit = bdi.dirty_ratelimit;
    let dirty_rate = (dirtied - bdi.dirtied_stamp) * u64::from(hz.0) / elapsed;
    let pos_ratio = position_ratio(d, write_bw);
    let task_ratelimit =
        ((u128::from(dirty_ratelimit) * u128::from(pos_ratio)) >> RATELIMIT_CALC_SHIFT) as u64 + 1;
    let balanced =
        ((u128::from(task_ratelimit) * u128::from(write_bw)) / u128::from(dirty_rate | 1)) as u64;
    let balanced = balanced.min(write_bw);
    let mut step = 0u64;
    if d.dirty < setpoint {
        let x = bdi
            .balanced_dirty_ratelimit
            .min(balanced)
            .min(task_ratelimit);
        if dirty_ratelimit < x {
            step = x - dirty_ratelimit;
        }
    } else {
        let x = bdi
            .balanced_dirty_ratelimit
            .max(balanced)
            .max(task_ratelimit);
        if dirty_ratelimit > x {
            step = dirty_ratelimit - x;
        }
    }
    // Slow down when close to the target (`step >>= dirty_ratelimit / (2 * step + 1)`), then
    // move an eighth of it.
    let shift = dirty_ratelimit / (2 * step + 1);
    step = if shift >= 64 { 0 } else { step >> shift };
    step = step.div_ceil(8);
    let dirty_ratelimit = if dirty_ratelimit < balanced {
        dirty_ratelimit + step
    } else {
        dirty_ratelimit - step
    };
    bdi.dirty_ratelimit = dirty_ratelimit.max(1);
    bdi.balanced_dirty_ratelimit = balanced;
}

/// Dirty-throttling state a task carries (`current->nr_dirtied`, `nr_dirtied_pause`,
/// `dirty_paused_when` in jiffies).
#[derive(Debug, Clone, Copy)]
pub struct DirtyThrottleState {
    pub nr_dirtied: u64,
    pub nr_dirtied_pause: u64,
    /// `current->dirty_paused_when` (jiffies): end of the last pause (or freerun check).
    pub dirty_paused_when: Option<u64>,
}

impl Default for DirtyThrottleState {
    fn default() -> Self {
        DirtyThrottleState {
            nr_dirtied: 0,
            nr_dirtied_pause: INITIAL_DIRTIED_PAUSE,
            dirty_paused_when: None,
        }
    }
}

/// `bdi_update_bandwidth`'s guard: `time_is_after_eq_jiffies(bw_time_stamp +
/// BANDWIDTH_INTERVAL)` is false, i.e. more than `HZ / 5` jiffies passed since the last update.
fn jiffies_after_interval(jiffies: u64, bw_time_stamp: u64, hz: Hz) -> bool {
    jiffies > bw_time_stamp + hz.over(5).max(1)
}

/// Why the flusher writes (`enum wb_reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WbReason {
    /// `WB_REASON_BACKGROUND`: over the background threshold.
    Background,
    /// `WB_REASON_PERIODIC` (kupdate): inodes dirtied more than `dirty_expire` ago.
    Periodic,
    /// `WB_REASON_TRY_TO_FREE_PAGES`: reclaim met dirty pages.
    TryToFreePages,
}

/// `WB_SYNC_NONE` (the flusher, reclaim) or `WB_SYNC_ALL` (fsync).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMode {
    None,
    All,
}

/// Which pages `writepages` writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WbRange {
    /// `range_cyclic`: from `mapping->writeback_index`, wrapping around.
    Cyclic,
    /// The whole file from its first page (`range_start = 0`, not cyclic).
    Whole,
    /// Exactly these pages (tagged for `WB_SYNC_ALL`, or reclaim's `pageout`).
    Pages(Vec<u64>),
}

/// The write bio being built over pages with consecutive indexes and blocks.
#[derive(Debug, Clone, Copy)]
struct BioRun {
    ino: Ino,
    /// Index of the first page.
    first: u64,
    /// Disk block of the first page.
    first_block: u64,
    /// Pages so far.
    count: u32,
}

impl BioRun {
    fn new(ino: Ino, index: u64, block: u64) -> BioRun {
        BioRun {
            ino,
            first: index,
            first_block: block,
            count: 1,
        }
    }

    /// Whether page `index` of `ino` at `block` continues the run within `MAX_BIO_PAGES`.
    fn extended_by(&self, ino: Ino, index: u64, block: u64) -> bool {
        self.ino == ino
            && self.first + u64::from(self.count) == index
            && self.first_block + u64::from(self.count) == block
            && self.count < MAX_BIO_PAGES
    }
}

/// Block lookups over a walk of one file's pages: the last [`AddressSpaceOps::map_extent`]
/// answer (its run of pages mapped to consecutive blocks, or its hole) answers the pages in it
/// without asking the file system again. Only kept while the caller does not sleep (nothing
/// else can change the mapping); debug builds check each answer against `map_block`.
///
/// [`AddressSpaceOps::map_extent`]: super::AddressSpaceOps::map_extent
#[derive(Debug, Clone, Copy, Default)]
struct ExtentCursor {
    /// (ino, first index, index past the run, block of the first index or `None` for a hole).
    run: Option<(Ino, u64, u64, Option<u64>)>,
}

impl ExtentCursor {
    /// `map_block(ino, index)`, from the run held when it covers `index`.
    fn map_block(&mut self, mm: &Mm, ino: Ino, index: u64) -> Option<u64> {
        let block = match self.run {
            Some((i, first, end, block)) if i == ino && first <= index && index < end => {
                block.map(|b| b + (index - first))
            }
            _ => {
                let (block, count) = mm.map_extent(ino, index);
                debug_assert!(count >= 1, "map_extent answers at least one page");
                self.run = Some((ino, index, index.saturating_add(count), block));
                block
            }
        };
        debug_assert_eq!(block, mm.map_block(ino, index), "stale extent cursor");
        block
    }

    /// Forgets the run (the caller may sleep, or the mapping may have changed).
    fn clear(&mut self) {
        self.run = None;
    }
}

/// Where `writepages` is in its walk over an inode's dirty pages.
enum DirtyScan {
    /// A fixed list (`WbRange::Pages`, or `WB_SYNC_ALL`'s tagged pages): `next` is the position
    /// of the next page in `list`.
    Listed { list: Vec<u64>, next: usize },
    /// Dirty pages looked up as the walk goes, from `next` to `end` (inclusive); a cyclic walk
    /// that began at `start` > 0 wraps to `0..start` once (`cycled`).
    Lookup {
        next: u64,
        end: u64,
        start: u64,
        cycled: bool,
    },
}

/// `DIRTY_SCOPE` = 8 (mm/page-writeback.c): a chunk is at most 1/8 of the dirty limit.
pub const DIRTY_SCOPE: u64 = 8;
/// Bound on queued flusher work items (the kernel allocates one per `wakeup_flusher_threads`
/// with `GFP_ATOMIC` and only wakes the flusher when that fails; here the bound plays the
/// failed allocation).
pub const MAX_FLUSHER_WORK: usize = 4096;

/// One item of the flusher's work list (`struct wb_writeback_work`, `WB_SYNC_NONE`):
/// `for_background` and `for_kupdate` are the reasons `Background` and `Periodic`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WbWork {
    pub nr_pages: i64,
    pub reason: WbReason,
    pub range_cyclic: bool,
}

/// The flusher's state in `struct backing_dev_info` / `bdi_writeback`.
#[derive(Debug, Default)]
pub(crate) struct FlusherState {
    /// `bdi->work_list`.
    pub work_list: RefCell<VecDeque<WbWork>>,
    /// When the delayed work (`wb->dwork`) is due, if pending.
    pub dwork_at: Cell<Option<Nanos>>,
    /// `wb->last_old_flush` in jiffies (0: the device registered at boot).
    pub last_old_flush: Cell<u64>,
    /// `BDI_writeback_running`.
    pub running: Cell<bool>,
}

/// `bdi_min_pause`: (shortest pause worth sleeping, `nr_dirtied_pause` for the next check),
/// in jiffies and pages. Targets a 10 ms pause for one dirtier, longer for concurrent ones
/// (`N x 10 ms` when the dirty ratelimit is `2^N` below the bandwidth), at least
/// `DIRTY_POLL_THRESH` pages between checks, and a next pause no longer than `max_pause`.
fn bdi_min_pause(
    hz: Hz,
    avg_write_bandwidth: u64,
    max_pause: u64,
    task_ratelimit: u64,
    dirty_ratelimit: u64,
) -> (u64, u64) {
    let hz_pages = u64::from(hz.0);
    let round_hz = roundup_pow_of_two(hz_pages);
    let hi = ilog2(avg_write_bandwidth);
    let lo = ilog2(dirty_ratelimit);
    let mut t: u64 = hz.over(100).max(1);
    if hi > lo {
        // Scale up pause time for concurrent dirtiers: (N * 10ms) on 2^N tasks.
        t += u64::try_from(hi - lo).expect("positive") * (10 * hz_pages) / 1024;
    }
    t = t.min(1 + max_pause / 2);
    let mut pages = dirty_ratelimit * t / round_hz;
    if pages < DIRTY_POLL_THRESH {
        t = max_pause;
        pages = dirty_ratelimit * t / round_hz;
        if pages > DIRTY_POLL_THRESH {
            pages = DIRTY_POLL_THRESH;
            t = hz_pages * DIRTY_POLL_THRESH / dirty_ratelimit.max(1);
        }
    }
    let pause = hz_pages * pages / (task_ratelimit + 1);
    if pause > max_pause {
        t = max_pause;
        pages = task_ratelimit * t / round_hz;
    }
    let min_pause = if pages >= DIRTY_POLL_THRESH {
        1 + t / 2
    } else {
        t
    };
    (min_pause, pages)
}

/// `dirty_poll_interval`: pages a task may dirty before the next check, about the square root
/// of the headroom to the limit.
fn dirty_poll_interval(dirty: u64, thresh: u64) -> u64 {
    if thresh > dirty {
        1u64 << ((thresh - dirty).ilog2() >> 1)
    } else {
        1
    }
}

impl Mm {
    /// [`super::AddressSpaceOps::map_extent`] of `ino`'s mapping (the block device's is the
    /// identity).
    fn map_extent(&self, ino: Ino, index: u64) -> (Option<u64>, u64) {
        if ino == super::BDEV_INO {
            return (Some(index), u64::MAX - index);
        }
        self.fs.borrow_mut().map_extent(ino, index)
    }

    /// `dirty_balance_reserve` (`calculate_totalreserve_pages`; `totalreserve_pages` from 4.5):
    /// per zone, its largest lowmem reserve plus its high watermark ([`super::zones`]); of one
    /// zone with no higher zone, its high watermark. Not dirtyable.
    pub fn dirty_balance_reserve(&self) -> u64 {
        self.zones.totalreserve()
    }

    /// The Linux version the page cache follows where versions differ (default 3.10).
    pub fn kernel_version(&self) -> crate::kernel::KernelVersion {
        self.kernel_version.get()
    }

    /// Sets the Linux version (`[stack.kernel] version`) before the run starts; the global
    /// dirty limit starts again at that version's threshold (`writeback_set_ratelimit` at
    /// boot).
    pub fn set_kernel_version(&self, version: crate::kernel::KernelVersion) {
        self.kernel_version.set(version);
        self.global_dirty_limit.set(self.dirty_limits().1);
    }

    /// `global_dirtyable_memory` ([`super::zones::Zones::global_dirtyable_memory`]): 3.10.9's
    /// free pages plus reclaimable (file LRU) pages, minus `dirty_balance_reserve`, minus
    /// highmem's share unless `highmem_is_dirtyable`, minus `min_free_kbytes`, plus 1; later
    /// versions take the reserve off the free pages only. It follows memory use: pages off
    /// the LRU (isolated by reclaim, being added) are not counted.
    pub fn dirtyable_memory(&self) -> u64 {
        let (free, lru) = {
            let state = self.state.borrow();
            let lru = state.lru[super::Lru::Inactive as usize].len
                + state.lru[super::Lru::Active as usize].len;
            (state.nr_free, lru)
        };
        self.zones.global_dirtyable_memory(
            free,
            lru,
            self.config.highmem_is_dirtyable,
            self.kernel_version.get(),
        )
    }

    /// `global_dirty_limits`: (background threshold, dirty threshold) in pages.
    pub fn dirty_limits(&self) -> (u64, u64) {
        let config = &self.config;
        let available = self.dirtyable_memory();
        let thresh = if config.dirty_bytes > 0 {
            config.dirty_bytes.div_ceil(PAGE_SIZE)
        } else {
            available * u64::from(config.dirty_ratio) / 100
        };
        let mut background = if config.dirty_background_bytes > 0 {
            config.dirty_background_bytes.div_ceil(PAGE_SIZE)
        } else {
            available * u64::from(config.dirty_background_ratio) / 100
        };
        if background >= thresh {
            background = thresh / 2;
        }
        (background, thresh)
    }

    /// `hard_dirty_limit`.
    pub fn hard_dirty_limit(&self, thresh: u64) -> u64 {
        thresh.max(self.global_dirty_limit.get())
    }

    /// `over_bground_thresh`.
    pub fn over_bground_thresh(&self) -> bool {
        let (background, _) = self.dirty_limits();
        let state = self.state();
        state.nr_dirty > background
    }

    /// `MAX_PAUSE` in jiffies: `[stack.vm] max_pause` (default `HZ / 5`), at least one jiffy.
    fn max_pause_jiffies(&self) -> u64 {
        (self.config.max_pause / self.hz.tick_ns()).max(1)
    }

    /// `bdi_stat_error`: the per-CPU counters' error bound, `nr_cpu_ids x BDI_STAT_BATCH`
    /// (`8 x (1 + ilog2(nr_cpus))`).
    fn bdi_stat_error(&self) -> u64 {
        let cpus = self.cpu.cores() as u64;
        cpus * 8 * (1 + u64::from(cpus.ilog2()))
    }

    /// The dirty state now (`global_dirty_limits`, `bdi_dirty_limit`, the counters).
    pub fn dirty_state(&self, jiffies: u64) -> DirtyState {
        let (background, thresh) = self.dirty_limits();
        let (dirty, whole) = {
            let mut state = self.state();
            let dirty = state.nr_dirty + state.nr_writeback;
            (
                dirty,
                state.bdi.writeout_fraction_is_whole(jiffies, self.hz),
            )
        };
        DirtyState {
            background,
            thresh,
            limit: self.hard_dirty_limit(thresh),
            dirty,
            bdi_thresh: if whole { thresh } else { 0 },
            bdi_dirty: dirty,
        }
    }

    /// `__bdi_update_bandwidth`: every `BANDWIDTH_INTERVAL` (`HZ / 5`) the write bandwidth
    /// estimate and, from `balance_dirty_pages` (`d` given), the global dirty limit
    /// (`global_update_bandwidth`) and the dirty ratelimit. A first update after more than a
    /// second of idleness only takes a snapshot.
    fn bdi_update_bandwidth(&self, jiffies: u64, d: Option<&DirtyState>, start_time: u64) {
        let hz = self.hz;
        let interval = hz.over(5).max(1);
        let mut state = self.state();
        let elapsed = jiffies - state.bdi.bw_time_stamp;
        if elapsed < interval {
            return;
        }
        let dirtied = state.stats.pages_dirtied;
        let quiet = elapsed > u64::from(hz.0) && state.bdi.bw_time_stamp < start_time;
        if !quiet {
            if let Some(d) = d.filter(|d| d.thresh > 0) {
                // global_update_bandwidth
                if jiffies >= self.global_update_time.get() + interval {
                    self.update_dirty_limit(d.thresh, d.dirty);
                    self.global_update_time.set(jiffies);
                }
                update_dirty_ratelimit(&mut state.bdi, d, dirtied, elapsed, hz);
            }
            state.bdi.update_write_bandwidth(elapsed, hz);
        }
        state.bdi.dirtied_stamp = dirtied;
        state.bdi.written_stamp = state.bdi.written;
        state.bdi.bw_time_stamp = jiffies;
    }

    /// `update_dirty_limit`: `global_dirty_limit` follows a rising threshold at once and a
    /// falling one by 1/32 of the gap per update, never below the dirty pages.
    fn update_dirty_limit(&self, thresh: u64, dirty: u64) {
        let limit = self.global_dirty_limit.get();
        if limit < thresh {
            self.global_dirty_limit.set(thresh);
            return;
        }
        let target = thresh.max(dirty);
        if limit > target {
            self.global_dirty_limit.set(limit - ((limit - target) >> 5));
        }
    }

    /// `bdi_max_pause`: `MAX_PAUSE`, shortened on small memory so that the dirty pool cannot
    /// drain while the writer sleeps (about 1/8 of the time the device needs to write the
    /// dirty pages; "8 serves as the safety ratio"). In jiffies.
    fn bdi_max_pause(&self, bdi_dirty: u64, write_bw: u64) -> u64 {
        let divisor = 1 + write_bw / roundup_pow_of_two(1 + self.hz.over(8));
        (bdi_dirty / divisor + 1).min(self.max_pause_jiffies())
    }

    /// Called after each page a task dirties (`balance_dirty_pages_ratelimited`).
    pub async fn balance_dirty_pages_ratelimited(
        &self,
        sim: &Sim,
        throttle: &mut DirtyThrottleState,
        dirtied: u64,
    ) {
        if let Some(pages_dirtied) = self.dirty_ratelimit_due(throttle, dirtied) {
            self.balance_dirty_pages(sim, throttle, pages_dirtied).await;
        }
    }

    /// The counting half of [`Mm::balance_dirty_pages_ratelimited`]: adds `dirtied` to the
    /// task's count and returns the pages dirtied since its last pause when
    /// `balance_dirty_pages` is due. (The write path calls it directly and builds
    /// `balance_dirty_pages`' future only then.)
    pub(super) fn dirty_ratelimit_due(
        &self,
        throttle: &mut DirtyThrottleState,
        dirtied: u64,
    ) -> Option<u64> {
        throttle.nr_dirtied += dirtied;
        (throttle.nr_dirtied >= self.dirty_ratelimit(throttle)).then_some(throttle.nr_dirtied)
    }

    /// Whether [`Mm::dirty_ratelimit_due`] of `dirtied` more pages would call for
    /// `balance_dirty_pages` now, nothing changed.
    pub(super) fn dirty_ratelimit_would_be_due(
        &self,
        throttle: &DirtyThrottleState,
        dirtied: bool,
    ) -> bool {
        throttle.nr_dirtied + u64::from(dirtied) >= self.dirty_ratelimit(throttle)
    }

    /// `balance_dirty_pages_ratelimited`'s limit: the task's pause interval in pages, at most
    /// 32 KiB's worth (`32 >> (PAGE_SHIFT - 10)` pages) while over the dirty limit.
    fn dirty_ratelimit(&self, throttle: &DirtyThrottleState) -> u64 {
        let ratelimit = throttle.nr_dirtied_pause;
        if self.state().bdi.dirty_exceeded {
            ratelimit.min(DIRTY_EXCEEDED_RATELIMIT)
        } else {
            ratelimit
        }
    }

    /// `balance_dirty_pages`, in jiffies as 3.10 computes it: see the module documentation.
    pub async fn balance_dirty_pages(
        &self,
        sim: &Sim,
        throttle: &mut DirtyThrottleState,
        pages_dirtied: u64,
    ) {
        let hz = self.hz;
        let start_time = self.jiffies(sim);
        let mut dirty_exceeded = false;
        let mut nr_reclaimable;
        let mut background_thresh;
        loop {
            let mut now = self.jiffies(sim);
            let d = self.dirty_state(now);
            nr_reclaimable = self.state().nr_dirty;
            background_thresh = d.background;
            if d.dirty <= d.freerun() {
                throttle.dirty_paused_when = Some(now);
                throttle.nr_dirtied = 0;
                throttle.nr_dirtied_pause = dirty_poll_interval(d.dirty, d.thresh);
                break;
            }
            if !self.writeback_in_progress() {
                // bdi_start_background_writeback
                self.bdi_wakeup_thread(sim);
            }
            dirty_exceeded = d.bdi_dirty > d.bdi_thresh && d.dirty > d.thresh;
            if dirty_exceeded {
                self.state().bdi.dirty_exceeded = true;
            }
            if jiffies_after_interval(now, self.state().bdi.bw_time_stamp, hz) {
                self.bdi_update_bandwidth(now, Some(&d), start_time);
            }
            let (dirty_ratelimit, write_bw) = {
                let state = self.state();
                (state.bdi.dirty_ratelimit, state.bdi.avg_write_bandwidth)
            };
            let pos_ratio = position_ratio(&d, write_bw);
            let task_ratelimit = ((u128::from(dirty_ratelimit) * u128::from(pos_ratio))
                >> RATELIMIT_CALC_SHIFT) as u64;
            let max_pause = self.bdi_max_pause(d.bdi_dirty, write_bw);
            let (min_pause, nr_dirtied_pause) =
                bdi_min_pause(hz, write_bw, max_pause, task_ratelimit, dirty_ratelimit);
            let pause: u64 = match (u64::from(hz.0) * pages_dirtied).checked_div(task_ratelimit) {
                None => max_pause,
                Some(period) => {
                    let mut pause = period as i64;
                    if let Some(paused_when) = throttle.dirty_paused_when {
                        pause -= now as i64 - paused_when as i64;
                    }
                    // For less than 1 s of think time, compensate it in future periods (move the
                    // virtual time); else reset: it may be a light dirtier.
                    if pause < min_pause as i64 {
                        if pause < -i64::from(hz.0) {
                            throttle.dirty_paused_when = Some(now);
                            throttle.nr_dirtied = 0;
                        } else if period > 0 {
                            throttle.dirty_paused_when =
                                Some(throttle.dirty_paused_when.unwrap_or(0) + period);
                            throttle.nr_dirtied = 0;
                        } else if throttle.nr_dirtied_pause <= pages_dirtied {
                            throttle.nr_dirtied_pause += pages_dirtied;
                        }
                        break;
                    }
                    let mut pause = pause as u64;
                    if pause > max_pause {
                        // For an occasional dropped task_ratelimit.
                        now += (pause - max_pause).min(max_pause);
                        pause = max_pause;
                    }
                    pause
                }
            };
            // io_schedule_timeout(pause): woken by the timer tick `pause` jiffies on.
            let wake_at = hz.jiffies_to_ns(self.jiffies(sim) + pause);
            let slept = wake_at - sim.now();
            {
                let mut state = self.state();
                state.stats.throttle_pauses += 1;
                state.stats.throttle_ns += slept;
            }
            // `bdi->last_bdp_sleep = jiffies` before `io_schedule_timeout` (read by wbt).
            self.bdev.note_dirty_sleep(sim);
            sim.sleep_for(slept, WaitReason::DirtyThrottle, Blocker::None)
                .await;
            throttle.dirty_paused_when = Some(now + pause);
            throttle.nr_dirtied = 0;
            throttle.nr_dirtied_pause = nr_dirtied_pause;
            if task_ratelimit > 0 {
                break;
            }
            if d.bdi_dirty <= self.bdi_stat_error() {
                break;
            }
        }
        if !dirty_exceeded {
            self.state().bdi.dirty_exceeded = false;
        }
        if self.writeback_in_progress() {
            return;
        }
        if nr_reclaimable > background_thresh {
            self.bdi_wakeup_thread(sim);
        }
    }

    /// `end_page_writeback` for the pages of a completed write bio.
    pub fn end_writeback_span(&self, sim: &Sim, span: PageSpan) {
        let mut redirtied = false;
        let end = span.index + u64::from(span.count);
        {
            let mut state = self.state();
            let state = &mut *state;
            let jiffies = self.hz.jiffies(sim.now());
            let mut index = span.index;
            while index < end {
                // The span's pages in order, with the mapping looked up once for a stretch of
                // pages that need nothing beyond their flags and counts.
                let mut special = None;
                let mapping = state
                    .mappings
                    .get_mut(&span.ino)
                    .expect("written inode cached");
                while index < end {
                    let id = mapping
                        .pages
                        .get(index)
                        .expect("a page under writeback stays cached");
                    assert!(
                        mapping.writeback.remove(index).is_some(),
                        "page not tagged writeback"
                    );
                    index += 1;
                    let page = &mut state.pages[id as usize];
                    assert!(
                        page.has(pg::WRITEBACK),
                        "end of writeback of a page not under it"
                    );
                    page.flags &= !pg::WRITEBACK;
                    let reclaim = page.has(pg::RECLAIM);
                    let redirty = page.has(pg::REDIRTY);
                    page.flags &= !(pg::RECLAIM | pg::REDIRTY);
                    state.nr_writeback -= 1;
                    if reclaim || redirty {
                        special = Some((id, reclaim, redirty));
                        break;
                    }
                }
                let Some((id, reclaim, redirty)) = special else {
                    break;
                };
                if redirty {
                    // A buffer dirtied during its write (pg::REDIRTY): dirty again now.
                    let (_, first_dirty_inode) = state.set_page_dirty(id, jiffies);
                    redirtied |= first_dirty_inode;
                }
                if reclaim && state.pages[id as usize].lru == super::Lru::Inactive {
                    // rotate_reclaimable_page: to the tail, to be reclaimed next.
                    state.lru_del(id);
                    state.lru_add_tail(id, super::Lru::Inactive);
                }
            }
            state
                .bdi
                .writeout_inc(u64::from(span.count), jiffies, self.hz);
        }
        if redirtied {
            self.bdi_wakeup_thread_delayed(sim);
        }
        if span.ino != super::BDEV_INO {
            if let Some(observer) = self.write_observer() {
                observer.data_settled(span.ino, span.index, u64::from(span.count));
            }
        }
        // wake_page for each page of the span, in index order: the queues of those waited on.
        // (Waking marks tasks ready and runs none: the queues do not change meanwhile.)
        if !self.page_waitqueues.borrow().is_empty() {
            for index in span.index..end {
                self.wake_page(sim, span.ino, index);
            }
        }
        self.free_wait.wake_all(sim);
        self.check(sim, "end_page_writeback");
    }

    /// Submits the bio of `run` (its pages already under writeback).
    async fn submit_run(&self, sim: &Sim, run: BioRun, issuer: Issuer, sync: bool) {
        let span = PageSpan {
            ino: run.ino,
            index: run.first,
            count: run.count,
        };
        self.submit_write_span(sim, span, run.first_block, issuer, sync)
            .await;
    }

    /// Submits a write bio for `count` pages of `ino` from `index`, already under writeback,
    /// at disk block `block`.
    async fn submit_write_span(
        &self,
        sim: &Sim,
        span: PageSpan,
        block: u64,
        issuer: Issuer,
        sync: bool,
    ) -> u64 {
        let uid = self
            .find_page(span.ino, span.index)
            .map_or(issuer.uid, |id| self.page(id).uid);
        // WB_SYNC_ALL writeback is `WRITE_SYNC` = REQ_SYNC | REQ_NOIDLE (include/linux/fs.h).
        let flags = IoFlags {
            sync,
            noidle: sync,
            ..IoFlags::default()
        };
        // A span of the block device's mapping is charged to its first block's kind.
        let purpose = self.purpose_of(span.ino, span.index);
        let bio = BioRequest {
            issued_async: !sync,
            uid,
            ..BioRequest::for_pages(
                IoOp::Write,
                block,
                span.count,
                flags,
                issuer,
                Some(span),
                purpose,
            )
        };
        self.submit_writeback_bio(sim, span, bio).await
    }

    /// Submits `bio`, which writes `span` (pages already under writeback): counts the pages,
    /// ends their writeback at completion and links them to the request carrying them.
    pub(crate) async fn submit_writeback_bio(
        &self,
        sim: &Sim,
        span: PageSpan,
        bio: BioRequest,
    ) -> u64 {
        if span.ino == super::BDEV_INO {
            if let Some(observer) = self.write_observer() {
                observer.home_write(sim, span.index, u64::from(span.count));
            }
        }
        {
            let mut state = self.state();
            if bio.flags.sync {
                state.stats.pages_written_sync += u64::from(span.count);
            } else {
                state.stats.pages_written_async += u64::from(span.count);
            }
            if span.ino != super::BDEV_INO {
                state.stats.file_pages_written += u64::from(span.count);
            }
        }
        let mm = self.rc();
        let request = self
            .bdev
            .submit_bio(
                sim,
                bio,
                Box::new(move |sim, _id| {
                    // The file system may end the pages' writeback after work of its own.
                    let deferred = span.ino != super::BDEV_INO
                        && mm
                            .fs_hooks()
                            .is_some_and(|hooks| hooks.defers_end_writeback(sim, span, &mm));
                    if !deferred {
                        mm.end_writeback_span(sim, span);
                    }
                }),
            )
            .await;
        // Link the pages to their request (it cannot have completed yet: completions run
        // from later events).
        let mut state = self.state();
        if let Some(mapping) = state.mappings.get_mut(&span.ino) {
            let last = span.index + u64::from(span.count) - 1;
            mapping
                .writeback
                .for_each_mut(span.index, last, |_, carrier| {
                    if *carrier == 0 {
                        *carrier = request;
                    }
                });
        }
        request
    }

    /// Moves a locked dirty page, whose disk block the caller looked up, to writeback and
    /// unlocks it.
    fn page_start_writeback(&self, sim: &Sim, id: PageId) {
        self.state().start_writeback(id);
        self.unlock_page(sim, id);
    }

    /// `writepage` of pages the caller has locked and found dirty (reclaim's `pageout`): each
    /// goes to writeback and is unlocked; pages of one inode with consecutive indexes and
    /// blocks share an asynchronous bio, submitted as `issuer`.
    pub(crate) async fn write_locked_pages(&self, sim: &Sim, pages: &[PageId], issuer: Issuer) {
        let mut keyed: Vec<(Ino, u64, PageId)> = pages
            .iter()
            .map(|&id| {
                let page = self.page(id);
                assert!(
                    page.has(pg::LOCKED) && page.has(pg::DIRTY),
                    "pageout of page {}:{} that is not locked and dirty",
                    page.ino,
                    page.index
                );
                (page.ino, page.index, id)
            })
            .collect();
        keyed.sort_unstable();
        // The bio being built.
        let mut current: Option<BioRun> = None;
        let hooks = self.fs_hooks();
        for (ino, index, id) in keyed {
            if let Some(hooks) = hooks.as_ref().filter(|_| ino != super::BDEV_INO) {
                if hooks.holds_back_writeback(ino) {
                    // F2FS keeps an atomic write's pages in memory until its commit.
                    self.unlock_page(sim, id);
                    continue;
                }
                if hooks.absorb_for_writeback(ino, index) {
                    self.state().clear_page_dirty(id);
                    self.unlock_page(sim, id);
                    continue;
                }
                hooks.remap_for_writeback(sim, issuer, ino, index);
            }
            let Some(block) = self.map_block(ino, index) else {
                // A delayed-allocation page: ext4_writepage cannot allocate from reclaim and
                // redirties it (redirty_page_for_writepage); it stays dirty.
                self.unlock_page(sim, id);
                continue;
            };
            self.page_start_writeback(sim, id);
            match current.as_mut() {
                Some(run) if run.extended_by(ino, index, block) => run.count += 1,
                _ => {
                    if let Some(run) = current.take() {
                        self.submit_run(sim, run, issuer, false).await;
                    }
                    current = Some(BioRun::new(ino, index, block));
                }
            }
        }
        if let Some(run) = current {
            self.submit_run(sim, run, issuer, false).await;
        }
    }

    /// `write_cache_pages` / `mpage_writepages` (`ext4_da_writepages` with
    /// `write_cache_pages_da` when a file system is mounted): writes up to `nr_to_write` dirty
    /// pages of `ino` in bios of consecutive blocks. `range`: from `writeback_index` cyclically
    /// (wrapping to the start once, `cycled`), from the start, or the listed pages as
    /// `tag_pages_for_writeback` fixes them for `WB_SYNC_ALL`. `WB_SYNC_NONE` looks the dirty
    /// pages up batch by batch as it goes (`pagevec_lookup_tag(PAGECACHE_TAG_DIRTY)` from the
    /// current index), so it also writes pages dirtied after it started, up to `nr_to_write`:
    /// a flusher catches up with a writer appending to the file and writes its partly filled
    /// last page (which the writer's next `write()` then waits for, QASIO's D_data).
    /// `WB_SYNC_ALL` over a range writes the pages dirty when it started (the `TOWRITE` tag).
    /// A locked page is waited for (`lock_page`); a page found clean was written by someone
    /// else and skipped. (`WB_SYNC_ALL`'s wait for a page already under writeback cannot arise:
    /// a dirty page is never under writeback here.) Bios are synchronous when `sync`. Returns
    /// pages written.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn writepages(
        &self,
        sim: &Sim,
        ino: Ino,
        mode: SyncMode,
        nr_to_write: u64,
        range: WbRange,
        issuer: Issuer,
        sync: bool,
    ) -> u64 {
        let cyclic = matches!(range, WbRange::Cyclic);
        let Some(mut scan) = self.dirty_scan(ino, mode, range) else {
            return 0;
        };
        let mut written = 0u64;
        // The block device's own mapping is written by blkdev_writepages: no journal.
        let hooks = self.fs_hooks().filter(|_| ino != super::BDEV_INO);
        if hooks.as_ref().is_some_and(|h| h.holds_back_writeback(ino)) {
            return 0;
        }
        let nr_to_write = match (&hooks, &scan) {
            (Some(h), DirtyScan::Lookup { start, .. }) if mode == SyncMode::None => {
                self.ext4_bump(ino, cyclic, *start, nr_to_write, h.writeback_bump_pages())
            }
            _ => nr_to_write,
        };
        // ext4_da_writepages: a handle per batch of up to an 8 MiB extent's pages
        // (mpage_add_bh_to_extent's cap), blocks allocated for the batch's delayed pages
        // (mpage_da_map_and_submit), the batch submitted, then the handle stopped (3.10; from
        // 3.11 the handle stops before the last bio is submitted, and from 5.8 a batch with
        // nothing to map starts none: the file system's hooks say). Without a file system
        // (the block device's mapping) the same batches go straight to write_cache_pages' loop.
        loop {
            let left = if mode == SyncMode::None {
                nr_to_write.saturating_sub(written)
            } else {
                u64::MAX
            };
            if left == 0 {
                break;
            }
            let max = usize::try_from(left)
                .unwrap_or(usize::MAX)
                .min(DA_BATCH_PAGES);
            let batch = self.next_dirty_batch(ino, &mut scan, max);
            if batch.is_empty() {
                break;
            }
            let token = match &hooks {
                Some(hooks) => {
                    let unmapped = self.unmapped_dirty_runs(ino, &batch);
                    match hooks.writepages_begin(sim, issuer, ino, unmapped).await {
                        Ok(token) => Some(token),
                        // No space for delayed blocks: the pages stay dirty (ext4 logs and
                        // drops them after marking the file system with an error; here they
                        // wait for space).
                        Err(_) => break,
                    }
                }
                None => None,
            };
            // Linux 3.11+ (`ext4_writepages`) stops the handle before the batch's last bio is
            // submitted; 3.10's `mpage_da_map_and_submit` submits every bio inside it.
            let stop_first = token.is_some()
                && hooks
                    .as_ref()
                    .is_some_and(|h| h.stops_writepages_handle_before_final_submit());
            let last = self
                .write_index_list(
                    sim,
                    ino,
                    &batch,
                    mode,
                    nr_to_write,
                    &mut written,
                    cyclic,
                    issuer,
                    sync,
                    stop_first,
                )
                .await;
            if let (Some(hooks), Some(token)) = (&hooks, token) {
                hooks.writepages_end(sim, token).await;
            }
            if let Some(run) = last {
                self.submit_run(sim, run, issuer, sync).await;
            }
        }
        written
    }

    /// Linux 3.10's `ext4_da_writepages` bump (`max_pages` = `s_max_writeback_mb_bump` in
    /// pages, 0 for none): `nr_to_write` raised to the run of contiguous dirty delayed pages
    /// from `start` (`ext4_num_dirty_pages`) for a cyclic writeback, to 8 times itself for a
    /// whole-file one, at most `max_pages`. The kernel takes the bump back off `nr_to_write`
    /// when it returns, so the caller sees only the pages written.
    fn ext4_bump(
        &self,
        ino: Ino,
        cyclic: bool,
        start: u64,
        nr_to_write: u64,
        max_pages: u64,
    ) -> u64 {
        if max_pages == 0 {
            return nr_to_write;
        }
        let desired = if cyclic {
            self.num_dirty_delayed_pages(ino, start, max_pages)
        } else if nr_to_write == u64::MAX {
            u64::MAX
        } else {
            nr_to_write.saturating_mul(8)
        };
        nr_to_write.max(desired.min(max_pages))
    }

    /// `ext4_num_dirty_pages`: consecutive pages from `index` that are dirty, not under
    /// writeback and still without a block (delayed), at most `max_pages`. One walk of the
    /// dirty tag that stops at the first page out of the run.
    fn num_dirty_delayed_pages(&self, ino: Ino, index: u64, max_pages: u64) -> u64 {
        // The run of dirty pages (their tag's bitmaps; a dirty page is never under writeback,
        // an invariant `mm::check` scans for), cut at the first page with a block (the file
        // system's extents, a hole at a time).
        let dirty = {
            let state = self.state.borrow();
            let Some(mapping) = state.mappings.get(&ino) else {
                return 0;
            };
            let dirty = mapping.dirty.run_len(index, max_pages);
            debug_assert!((0..dirty).all(|k| mapping
                .pages
                .get(index + k)
                .is_some_and(|id| !state.pages[id as usize].has(pg::WRITEBACK))));
            dirty
        };
        let mut delayed = 0u64;
        while delayed < dirty {
            let (block, count) = self.map_extent(ino, index + delayed);
            if block.is_some() {
                break;
            }
            delayed = delayed.saturating_add(count);
        }
        delayed.min(dirty)
    }

    /// Where `writepages` starts looking for dirty pages; `None` when `ino` has no mapping.
    fn dirty_scan(&self, ino: Ino, mode: SyncMode, range: WbRange) -> Option<DirtyScan> {
        let state = self.state();
        let mapping = state.mappings.get(&ino)?;
        Some(match range {
            WbRange::Pages(list) => DirtyScan::Listed { list, next: 0 },
            // tag_pages_for_writeback: WB_SYNC_ALL writes what is dirty now.
            WbRange::Cyclic | WbRange::Whole if mode == SyncMode::All => DirtyScan::Listed {
                list: mapping.dirty.iter().collect(),
                next: 0,
            },
            WbRange::Cyclic => {
                let start = mapping.writeback_index;
                DirtyScan::Lookup {
                    next: start,
                    end: u64::MAX,
                    start,
                    cycled: start == 0,
                }
            }
            WbRange::Whole => DirtyScan::Lookup {
                next: 0,
                end: u64::MAX,
                start: 0,
                cycled: true,
            },
        })
    }

    /// The next up to `max` dirty pages of the scan, in index order: looked up now
    /// (`pagevec_lookup_tag`), wrapping a cyclic scan to the file's start once it reached the
    /// end (`cycled`: `index = 0; end = writeback_index - 1`).
    fn next_dirty_batch(&self, ino: Ino, scan: &mut DirtyScan, max: usize) -> Vec<u64> {
        match scan {
            DirtyScan::Listed { list, next } => {
                let batch: Vec<u64> = list.iter().skip(*next).take(max).copied().collect();
                *next += batch.len();
                batch
            }
            DirtyScan::Lookup {
                next,
                end,
                start,
                cycled,
            } => loop {
                let batch: Vec<u64> = {
                    let state = self.state();
                    let Some(mapping) = state.mappings.get(&ino) else {
                        return Vec::new();
                    };
                    if *next > *end {
                        Vec::new()
                    } else {
                        mapping.dirty.range(*next, *end).take(max).collect()
                    }
                };
                if let Some(&last) = batch.last() {
                    match last.checked_add(1) {
                        Some(n) => *next = n,
                        // The last possible index: an empty range from now on.
                        None => (*next, *end) = (1, 0),
                    }
                    return batch;
                }
                if *cycled {
                    return batch;
                }
                *cycled = true;
                *next = 0;
                *end = *start - 1;
            },
        }
    }

    /// Runs of consecutive pages among `indexes` that are dirty and have no block yet.
    fn unmapped_dirty_runs(&self, ino: Ino, indexes: &[u64]) -> Vec<(u64, u64)> {
        let mut runs: Vec<(u64, u64)> = Vec::new();
        let state = self.state.borrow();
        let mapping = state.mappings.get(&ino);
        let mut cursor = ExtentCursor::default();
        for &index in indexes {
            let dirty = mapping
                .and_then(|m| m.pages.get(index))
                .is_some_and(|id| state.pages[id as usize].has(pg::DIRTY));
            if !dirty || cursor.map_block(self, ino, index).is_some() {
                continue;
            }
            match runs.last_mut() {
                Some((first, count)) if *first + *count == index => *count += 1,
                _ => runs.push((index, 1)),
            }
        }
        runs
    }

    /// `write_cache_pages`' loop over `indexes`: locks each dirty page, moves it to writeback
    /// and builds bios of consecutive blocks. Counts pages into `written`. With `keep_last`,
    /// the last bio built is returned unsubmitted (the pages under writeback) for the caller
    /// to submit (ext4's final `ext4_io_submit` after its handle stops); otherwise it is
    /// submitted and `None` returned.
    #[allow(clippy::too_many_arguments)]
    async fn write_index_list(
        &self,
        sim: &Sim,
        ino: Ino,
        indexes: &[u64],
        mode: SyncMode,
        nr_to_write: u64,
        written: &mut u64,
        cyclic: bool,
        issuer: Issuer,
        sync: bool,
        keep_last: bool,
    ) -> Option<BioRun> {
        // The bio being built.
        let mut current: Option<BioRun> = None;
        // The block device's mapping (metadata buffers) and simplefs go through
        // `block_write_full_page`, which locks a page's buffers, marks it under writeback and
        // submits them (`submit_bh`, merged in the plug) before write_cache_pages looks at the
        // next page; the bio built here over consecutive pages stands for that merge. So a
        // run is submitted before the loop could sleep on the next page (its lock, or the
        // submission of a run it does not extend) with the run's buffers locked and no
        // request a QASIO boost could find. (ext4's data pages are different:
        // `ext4_bio_write_page` marks a page under writeback and only then submits the bio it
        // does not extend, as the order below it does.)
        let hooks = self.fs_hooks().filter(|_| ino != super::BDEV_INO);
        let per_page_submit = ino == super::BDEV_INO || hooks.is_none();
        // `mapping->writeback_index` after the last page moved to writeback, stored before
        // the loop could sleep (and at its end): nothing else runs in between, so no one can
        // tell it from storing it page by page.
        let mut pending_index: Option<u64> = None;
        // Block lookups, one `map_extent` per run of blocks; forgotten at every sleep.
        let mut cursor = ExtentCursor::default();
        let store_index = |pending: &mut Option<u64>| {
            if let Some(next) = pending.take() {
                if let Some(mapping) = self.state().mappings.get_mut(&ino) {
                    mapping.writeback_index = next;
                }
            }
        };
        for &index in indexes {
            // Integrity sync writes every listed page; others stop at `nr_to_write`.
            if *written >= nr_to_write && mode == SyncMode::None {
                break;
            }
            if per_page_submit {
                if let Some(run) = current {
                    let extends = cursor
                        .map_block(self, ino, index)
                        .is_some_and(|block| run.extended_by(ino, index, block));
                    let would_sleep = self
                        .find_page(ino, index)
                        .is_some_and(|id| self.page(id).has(pg::LOCKED));
                    if !extends || would_sleep {
                        current = None;
                        store_index(&mut pending_index);
                        self.submit_run(sim, run, issuer, sync).await;
                        cursor.clear();
                    }
                }
            }
            // write_cache_pages sleeps in lock_page in both modes (`lock_page` itself when the
            // page is locked; a free page is locked here without its future).
            let id = match self.trylock_cached_page(ino, index) {
                Some(Some(id)) => id,
                Some(None) => {
                    store_index(&mut pending_index);
                    let locked = self.lock_page(sim, ino, index).await;
                    cursor.clear();
                    let Some(id) = locked else {
                        continue;
                    };
                    id
                }
                None => continue,
            };
            if self.page(id).has(pg::DIRTY) {
                if let Some(hooks) = hooks.as_ref() {
                    if hooks.absorb_for_writeback(ino, index) {
                        // Inline data: the page is clean without I/O.
                        self.state().clear_page_dirty(id);
                        self.unlock_page(sim, id);
                        *written += 1;
                        continue;
                    }
                    hooks.remap_for_writeback(sim, issuer, ino, index);
                }
            }
            let page = self.page(id);
            let block = page
                .has(pg::DIRTY)
                .then(|| cursor.map_block(self, ino, index))
                .flatten();
            let Some(block) = block else {
                // Someone wrote it for us, or its delayed block could not be allocated
                // (ext4_writepage redirties such a page).
                self.unlock_page(sim, id);
                continue;
            };
            assert!(!page.has(pg::WRITEBACK), "dirty and under writeback");

            self.page_start_writeback(sim, id);
            *written += 1;
            match current.as_mut() {
                Some(run) if run.extended_by(ino, index, block) => run.count += 1,
                _ => {
                    if let Some(run) = current.take() {
                        store_index(&mut pending_index);
                        self.submit_run(sim, run, issuer, sync).await;
                        cursor.clear();
                    }
                    current = Some(BioRun::new(ino, index, block));
                }
            }
            if cyclic {
                pending_index = Some(index + 1);
            }
        }
        store_index(&mut pending_index);
        if keep_last {
            return current;
        }
        if let Some(run) = current {
            self.submit_run(sim, run, issuer, sync).await;
        }
        None
    }

    /// jbd2's `journal_submit_inode_data_buffers` in ordered mode: `generic_writepages` with
    /// `WB_SYNC_ALL` from the journal thread, which writes the inode's dirty pages that have
    /// blocks (`ext4_writepage` redirties delayed ones: they are not part of the commit) as
    /// `WRITE_SYNC`, without journal handles.
    pub async fn write_mapped_pages(&self, sim: &Sim, ino: Ino, issuer: Issuer) {
        let todo: Vec<u64> = {
            let state = self.state();
            let Some(mapping) = state.mappings.get(&ino) else {
                return;
            };
            mapping.dirty.iter().collect()
        };
        let mut cursor = ExtentCursor::default();
        let mapped: Vec<u64> = todo
            .into_iter()
            .filter(|&index| cursor.map_block(self, ino, index).is_some())
            .collect();
        let mut written = 0;
        self.write_index_list(
            sim,
            ino,
            &mapped,
            SyncMode::All,
            u64::MAX,
            &mut written,
            false,
            issuer,
            true,
            false,
        )
        .await;
    }

    /// `filemap_flush`: starts asynchronous writeback of every dirty page of `ino`
    /// (`WB_SYNC_NONE`), as `ext4_alloc_da_blocks` does for `auto_da_alloc`.
    pub async fn filemap_flush(&self, sim: &Sim, ino: Ino, issuer: Issuer) {
        self.writepages(
            sim,
            ino,
            SyncMode::None,
            u64::MAX,
            WbRange::Whole,
            issuer,
            false,
        )
        .await;
    }

    /// `jiffies` now.
    pub(crate) fn jiffies(&self, sim: &Sim) -> u64 {
        self.hz.jiffies(sim.now())
    }

    /// `dirty_writeback_centisecs` in jiffies (`msecs_to_jiffies(dirty_writeback_interval *
    /// 10)`); 0 disables periodic writeback.
    fn writeback_interval_jiffies(&self) -> u64 {
        self.hz
            .msecs_to_jiffies(self.config.dirty_writeback_interval / NS_PER_MS)
    }

    /// `dirty_expire_centisecs` in jiffies.
    fn expire_jiffies(&self) -> u64 {
        self.hz
            .msecs_to_jiffies(self.config.dirty_expire / NS_PER_MS)
    }

    /// `bdi_wakeup_thread` (`mod_delayed_work(bdi_wq, &wb->dwork, 0)`): the flusher's work runs
    /// now, whatever timer was pending.
    pub(crate) fn bdi_wakeup_thread(&self, sim: &Sim) {
        self.flusher.dwork_at.set(Some(sim.now()));
        self.flusher_wake.wake(sim);
    }

    /// `bdi_wakeup_thread_delayed` (`queue_delayed_work(..., dirty_writeback_interval)`): arms
    /// the flusher's timer one interval from now, unless it is already pending.
    pub(crate) fn bdi_wakeup_thread_delayed(&self, sim: &Sim) {
        if self.flusher.dwork_at.get().is_some() {
            return;
        }
        let expires = self.jiffies(sim) + self.writeback_interval_jiffies();
        self.flusher
            .dwork_at
            .set(Some(self.hz.jiffies_to_ns(expires).max(sim.now())));
        self.flusher_wake.wake(sim);
    }

    /// `writeback_in_progress`: the flusher is inside `wb_do_writeback`.
    pub fn writeback_in_progress(&self) -> bool {
        self.flusher.running.get()
    }

    /// `writeback_chunk_size` for `WB_SYNC_NONE` work: half a second of writeback at the
    /// estimated bandwidth, at most 1/8 of the dirty limit (`DIRTY_SCOPE`), at most the work's
    /// pages, plus `MIN_WRITEBACK_PAGES` rounded down to a multiple of it.
    fn writeback_chunk_size(&self, work: &WbWork) -> u64 {
        let write_bw = self.state().bdi.avg_write_bandwidth;
        let dirty_limit = self.global_dirty_limit.get();
        let pages = (write_bw / 2)
            .min(dirty_limit / DIRTY_SCOPE)
            .min(u64::try_from(work.nr_pages.max(0)).unwrap_or(u64::MAX));
        (pages + MIN_WRITEBACK_PAGES) / MIN_WRITEBACK_PAGES * MIN_WRITEBACK_PAGES
    }

    /// `writeback_sb_inodes` (with `__writeback_inodes_wb`, one super block): serves the
    /// inodes of `b_io` in turn, each a chunk of `writeback_chunk_size` pages; an inode that
    /// used its whole chunk goes to `b_more_io` for its next turn (`requeue_io`), one that
    /// stopped short goes back to `b_dirty` (`redirty_tail`). Returns to `wb_writeback` once it
    /// wrote something and `HZ / 10` has passed or the work is done. Returns pages written plus
    /// inodes cleaned (the kernel's "progress").
    async fn writeback_sb_inodes(&self, sim: &Sim, work: &mut WbWork, issuer: Issuer) -> u64 {
        let start = self.jiffies(sim);
        let mut wrote = 0u64;
        loop {
            let Some(ino) = self.state().b_io_pop() else {
                break;
            };
            let chunk = self.writeback_chunk_size(work);
            let range = if work.range_cyclic {
                WbRange::Cyclic
            } else {
                WbRange::Whole
            };
            let written = self
                .writepages(sim, ino, SyncMode::None, chunk, range, issuer, false)
                .await;
            work.nr_pages -= i64::try_from(written).expect("pages fit i64");
            wrote += written;
            let jiffies = self.jiffies(sim);
            let mut state = self.state();
            match work.reason {
                WbReason::Periodic => state.stats.flusher_kupdate_pages += written,
                WbReason::Background => state.stats.flusher_background_pages += written,
                WbReason::TryToFreePages => state.stats.flusher_reclaim_pages += written,
            }
            if state.requeue_inode(ino, chunk.saturating_sub(written), jiffies) {
                wrote += 1;
            }
            drop(state);
            self.check(sim, "writeback_sb_inodes");
            if wrote > 0 {
                // time_is_before_jiffies(start_time + HZ / 10)
                if jiffies > start + self.hz.over(10) {
                    break;
                }
                if work.nr_pages <= 0 {
                    break;
                }
            }
        }
        wrote
    }

    /// `wb_writeback`: repeatedly queues inodes (`queue_io`) and writes them
    /// (`writeback_sb_inodes`) until the work's pages are written or no inode qualifies.
    /// Background and kupdate work stop when other work is queued (they are restarted after
    /// it), background work when under the background threshold. Kupdate work writes the
    /// inodes dirtied at least `dirty_expire` ago (`older_than_this = jiffies - expire`,
    /// compared with `time_after`: before `dirty_expire` has passed nothing is old enough),
    /// background work every dirty inode.
    async fn wb_writeback(&self, sim: &Sim, mut work: WbWork) -> u64 {
        let issuer = Issuer {
            task: sim.current_task(),
            pid: super::FLUSHER_PID,
            uid: 0,
            foreground: false,
        };
        let nr_pages = work.nr_pages;
        let wb_start = self.jiffies(sim);
        let started_ns = sim.now();
        if let Some(task) = issuer.task {
            sim.timeline_begin(task);
        }
        let mut oldest_jif = i128::from(wb_start);
        loop {
            if work.nr_pages <= 0 {
                break;
            }
            let background_or_kupdate =
                matches!(work.reason, WbReason::Background | WbReason::Periodic);
            if background_or_kupdate && !self.flusher.work_list.borrow().is_empty() {
                break;
            }
            if work.reason == WbReason::Background && !self.over_bground_thresh() {
                break;
            }
            match work.reason {
                WbReason::Periodic => {
                    oldest_jif = i128::from(self.jiffies(sim)) - i128::from(self.expire_jiffies());
                }
                WbReason::Background => oldest_jif = i128::from(self.jiffies(sim)),
                WbReason::TryToFreePages => {}
            }
            {
                let mut state = self.state();
                if state.b_io.is_empty() {
                    state.queue_io(oldest_jif);
                }
            }
            let progress = self.writeback_sb_inodes(sim, &mut work, issuer).await;
            // wb_update_bandwidth: the write bandwidth estimate only.
            self.bdi_update_bandwidth(self.jiffies(sim), None, wb_start);
            if progress > 0 {
                continue;
            }
            // No progress and nothing requeued: no inode qualifies. (The kernel would wait
            // for an inode of b_more_io that someone else is writing, `I_SYNC`; only the
            // flusher writes inodes this way here, so b_more_io is empty.)
            break;
        }
        let written = u64::try_from(nr_pages - work.nr_pages).unwrap_or(0);
        // The pass as a slice of the flusher's timeline (`--perfetto`), as the
        // writeback_start / writeback_written tracepoints delimit it.
        if let Some(task) = issuer.task {
            sim.timeline_slice(
                task,
                crate::sim::timeline::SliceKind::Kernel,
                || {
                    // `wb_reason_name` of include/trace/events/writeback.h.
                    let reason = match work.reason {
                        WbReason::Background => "background",
                        WbReason::Periodic => "periodic",
                        WbReason::TryToFreePages => "try_to_free_pages",
                    };
                    format!("wb_writeback ({reason}): {written} pages")
                },
                started_ns,
            );
        }
        written
    }

    /// `wakeup_flusher_threads(nr_pages, WB_REASON_TRY_TO_FREE_PAGES)`: reclaim queues work for
    /// the flusher to write `nr_pages` dirty pages, whatever the thresholds say (non-cyclic:
    /// each inode from its first dirty page).
    pub(crate) fn wakeup_flusher_threads(&self, sim: &Sim, nr_pages: u64) {
        if !self.state().wb_has_dirty_io() {
            return;
        }
        {
            // __bdi_start_writeback: a work item per call; when it cannot be allocated (here:
            // the list is at its bound) the flusher is only woken.
            let mut list = self.flusher.work_list.borrow_mut();
            if list.len() < MAX_FLUSHER_WORK {
                list.push_back(WbWork {
                    nr_pages: i64::try_from(nr_pages).unwrap_or(i64::MAX),
                    reason: WbReason::TryToFreePages,
                    range_cyclic: false,
                });
            }
        }
        self.bdi_wakeup_thread(sim);
    }

    /// `wb_check_old_data_flush` (kupdate): once per `dirty_writeback_interval`, writes the
    /// inodes that expired.
    async fn wb_check_old_data_flush(&self, sim: &Sim) -> u64 {
        let interval = self.writeback_interval_jiffies();
        if interval == 0 {
            return 0;
        }
        let now = self.jiffies(sim);
        if now < self.flusher.last_old_flush.get() + interval {
            return 0;
        }
        self.flusher.last_old_flush.set(now);
        // get_nr_dirty_pages: dirty pages plus dirty inodes.
        let nr_pages = {
            let state = self.state();
            state.nr_dirty
                + state.b_dirty.len() as u64
                + state.b_io.len() as u64
                + state.b_more_io.len() as u64
        };
        if nr_pages == 0 {
            return 0;
        }
        let work = WbWork {
            nr_pages: i64::try_from(nr_pages).unwrap_or(i64::MAX),
            reason: WbReason::Periodic,
            range_cyclic: true,
        };
        self.wb_writeback(sim, work).await
    }

    /// `wb_check_background_flush`.
    async fn wb_check_background_flush(&self, sim: &Sim) -> u64 {
        if !self.over_bground_thresh() {
            return 0;
        }
        let work = WbWork {
            nr_pages: i64::MAX,
            reason: WbReason::Background,
            range_cyclic: true,
        };
        self.wb_writeback(sim, work).await
    }

    /// `wb_do_writeback`: queued work first, then kupdate, then background writeback.
    async fn wb_do_writeback(&self, sim: &Sim) {
        self.flusher.running.set(true);
        loop {
            let work = self.flusher.work_list.borrow_mut().pop_front();
            let Some(work) = work else {
                break;
            };
            self.wb_writeback(sim, work).await;
        }
        self.wb_check_old_data_flush(sim).await;
        self.wb_check_background_flush(sim).await;
        self.flusher.running.set(false);
    }

    /// The flusher (`bdi_writeback_workfn`, a delayed work item): runs when its timer expires
    /// or it is kicked, writes until no work is queued, then re-arms its timer one
    /// `dirty_writeback_interval` ahead while dirty inodes remain. The timer is first armed
    /// when the device gets its first dirty inode (`__mark_inode_dirty`), not on a fixed grid.
    pub(crate) async fn flusher(&self, sim: &Sim) {
        loop {
            loop {
                let due = self.flusher.dwork_at.get();
                match due {
                    Some(at) if at <= sim.now() => break,
                    _ => self.flusher_wake.wait(sim, due).await,
                }
            }
            self.flusher.dwork_at.set(None);
            loop {
                self.wb_do_writeback(sim).await;
                if self.flusher.work_list.borrow().is_empty() {
                    break;
                }
            }
            if self.state().wb_has_dirty_io() && self.writeback_interval_jiffies() > 0 {
                self.bdi_wakeup_thread_delayed(sim);
            }
        }
    }
}

impl super::MmState {
    /// Pops the next inode of `b_io` for the flusher to write, marking it `I_SYNC`.
    fn b_io_pop(&mut self) -> Option<Ino> {
        let ino = self.b_io.pop_front()?;
        let mapping = self
            .mappings
            .get_mut(&ino)
            .expect("a queued inode is cached");
        assert_eq!(mapping.wb_list, WbList::Io, "inode {ino} on b_io");
        assert!(
            self.wb_syncing.is_none(),
            "one inode under I_SYNC at a time"
        );
        mapping.wb_list = WbList::Sync;
        self.wb_syncing = Some(ino);
        Some(ino)
    }

    /// `queue_io`: the inodes of `b_more_io` (in the order they were requeued), then those of
    /// `b_dirty` dirtied at or before `older_than` jiffies (`move_expired_inodes`, oldest
    /// first), go to `b_io`.
    fn queue_io(&mut self, older_than: i128) {
        while let Some(ino) = self.b_more_io.pop_front() {
            self.mappings
                .get_mut(&ino)
                .expect("a requeued inode is cached")
                .wb_list = WbList::Io;
            self.b_io.push_back(ino);
        }
        while let Some(&(when, ino)) = self.b_dirty.first() {
            // inode_dirtied_after: time_after(dirtied_when, older_than)
            if i128::from(when) > older_than {
                break;
            }
            self.b_dirty.pop_first();
            self.mappings
                .get_mut(&ino)
                .expect("a dirty inode is cached")
                .wb_list = WbList::Io;
            self.b_io.push_back(ino);
        }
    }

    /// `redirty_tail`: back to `b_dirty` as its newest inode; its `dirtied_when` becomes now if
    /// it was older than the newest there.
    fn redirty_tail(&mut self, ino: Ino, jiffies: u64) {
        let newest = self.b_dirty.last().map(|&(when, _)| when);
        let mapping = self
            .mappings
            .get_mut(&ino)
            .expect("a dirty inode is cached");
        if newest.is_some_and(|newest| mapping.dirtied_when < newest) {
            mapping.dirtied_when = jiffies;
        }
        mapping.wb_list = WbList::Dirty;
        self.b_dirty.insert((mapping.dirtied_when, ino));
    }

    /// `requeue_inode` after the flusher wrote `ino` with `nr_to_write` of its chunk left:
    /// still dirty with the chunk used up, `requeue_io` (`b_more_io`, next turn); still dirty
    /// otherwise, `redirty_tail`; clean, off the lists. Returns whether it is clean.
    fn requeue_inode(&mut self, ino: Ino, nr_to_write: u64, jiffies: u64) -> bool {
        assert_eq!(
            self.wb_syncing.take(),
            Some(ino),
            "requeue of the inode written"
        );
        let Some(mapping) = self.mappings.get_mut(&ino) else {
            return true;
        };
        assert_eq!(mapping.wb_list, WbList::Sync);
        if mapping.dirty.is_empty() {
            mapping.wb_list = WbList::None;
            if mapping.pages.is_empty() && mapping.writeback.is_empty() {
                self.mappings.remove(&ino);
            }
            return true;
        }
        if nr_to_write == 0 {
            mapping.wb_list = WbList::MoreIo;
            self.b_more_io.push_back(ino);
        } else {
            self.redirty_tail(ino, jiffies);
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dirty state of one device whose whole threshold is its own.
    fn state(background: u64, thresh: u64, dirty: u64) -> DirtyState {
        DirtyState {
            background,
            thresh,
            limit: thresh,
            dirty,
            bdi_thresh: thresh,
            bdi_dirty: dirty,
        }
    }

    #[test]
    fn the_global_control_line_is_two_at_freerun_one_at_the_setpoint_zero_at_the_limit() {
        // A fast device (huge write bandwidth) makes the device's line flat: only the cubic.
        let flat = 1 << 40;
        let d = state(10_000, 20_000, 0);
        let at = |dirty: u64| {
            position_ratio(
                &DirtyState {
                    dirty,
                    bdi_dirty: dirty,
                    ..d
                },
                flat,
            )
        };
        assert_eq!(d.freerun(), 15_000);
        assert_eq!(d.setpoint(), 17_500);
        // 1.0, less the device line's rounding (its setpoint is setpoint x thresh/(thresh+1)).
        assert!((1020..=1024).contains(&at(17_500)), "{}", at(17_500));
        assert!((2040..=2048).contains(&at(15_000)), "{}", at(15_000));
        assert!(at(19_999) < 10, "{}", at(19_999));
        assert_eq!(at(20_000), 0);
        assert_eq!(at(25_000), 0);
        // Monotonic: more dirty pages, less rate.
        let mut last = u64::MAX;
        for dirty in (15_000..20_000).step_by(250) {
            assert!(at(dirty) <= last);
            last = at(dirty);
        }
    }

    #[test]
    fn the_device_line_slows_a_device_above_its_setpoint_and_lifts_one_in_its_reserve() {
        // write_bw 1,000 pages/s: span = 8,000 pages. At the setpoint the device factor is 1;
        // 4,000 pages above it (half the span) the rate is about half the global line's.
        let d = state(10_000, 20_000, 17_500);
        let at_setpoint = position_ratio(&d, 1_000);
        assert!((1020..=1024).contains(&at_setpoint), "{at_setpoint}");
        let above = DirtyState {
            bdi_dirty: 17_500 + 4_000,
            ..d
        };
        let ratio = position_ratio(&above, 1_000);
        assert!((500..=530).contains(&ratio), "{ratio}");
        // Far above: clamped to 1/4 of the global line.
        let far = DirtyState {
            bdi_dirty: 17_500 + 7_000,
            ..d
        };
        assert!((254..=256).contains(&position_ratio(&far, 1_000)));
        // Below half its threshold (the reserve area): lifted by bdi_thresh / 2 / bdi_dirty.
        let reserve = DirtyState {
            bdi_thresh: 40_000,
            thresh: 40_000,
            limit: 40_000,
            background: 30_000,
            dirty: 35_000,
            bdi_dirty: 10_000,
        };
        let lifted = position_ratio(&reserve, 1 << 30);
        let unlifted = position_ratio(
            &DirtyState {
                bdi_dirty: 35_000,
                ..reserve
            },
            1 << 30,
        );
        assert!(
            (unlifted * 2..=unlifted * 2 + 4).contains(&lifted),
            "x 20,000 / 10,000: {lifted} vs {unlifted}"
        );
    }

    #[test]
    fn min_pause_grows_with_concurrent_dirtiers() {
        // HZ = 1000, max_pause 200 jiffies. One dirtier (ratelimit = bandwidth): 10 ms target.
        let hz = Hz(1000);
        let (pause, pages) = bdi_min_pause(hz, 1 << 14, 200, 1 << 14, 1 << 14);
        assert_eq!(
            (pause, pages),
            (6, 160),
            "1 + 10/2 jiffies, 2^14 x 10 / 1024 pages"
        );
        // Four dirtiers (ratelimit = bandwidth / 4 = 2^N with N = 2): 10 + 2 x 10000/1024.
        let (pause, pages) = bdi_min_pause(hz, 1 << 14, 200, 1 << 12, 1 << 12);
        assert_eq!((pause, pages), (15, 116), "t = 29 jiffies");
        // A slow ratelimit is polled every DIRTY_POLL_THRESH pages at most max_pause apart.
        let (pause, pages) = bdi_min_pause(hz, 1 << 14, 200, 100, 100);
        assert_eq!((pause, pages), (200, 19));
        // HZ = 100: the target is one jiffy.
        let (pause, pages) = bdi_min_pause(Hz(100), 1 << 14, 20, 1 << 14, 1 << 14);
        assert_eq!((pause, pages), (1, 128));
    }

    #[test]
    fn the_ratelimit_follows_the_balanced_rate_only_from_the_same_side() {
        let hz = Hz(100);
        let mut bdi = Bdi {
            avg_write_bandwidth: 10_000,
            dirty_ratelimit: 10_000,
            balanced_dirty_ratelimit: 10_000,
            ..Bdi::new()
        };
        // Below the setpoint, task_ratelimit > dirty_ratelimit, but the dirtiers dirtied twice
        // the bandwidth: the balanced rate is lower. The position error says "faster", the
        // rate error "slower": no step.
        let below = state(10_000, 20_000, 16_000);
        let dirtied = 20_000 * 20 / 100; // 20,000 pages/s over 20 jiffies
        update_dirty_ratelimit(&mut bdi, &below, dirtied, 20, hz);
        assert_eq!(bdi.dirty_ratelimit, 10_000);
        assert!(bdi.balanced_dirty_ratelimit < 10_000);
        // Above the setpoint with the same rates, both say "slower": it steps down, by an
        // eighth of the (shaped) gap, not halfway.
        let mut bdi = Bdi {
            avg_write_bandwidth: 10_000,
            dirty_ratelimit: 10_000,
            balanced_dirty_ratelimit: 5_000,
            ..Bdi::new()
        };
        let above = state(10_000, 20_000, 19_000);
        update_dirty_ratelimit(&mut bdi, &above, dirtied, 20, hz);
        assert!(bdi.dirty_ratelimit < 10_000, "{bdi:?}");
        assert!(bdi.dirty_ratelimit > 9_000, "a small step: {bdi:?}");
    }

    #[test]
    fn write_bandwidth_is_smoothed_over_three_seconds() {
        // HZ = 100: period = roundup_pow_of_two(300) = 512 jiffies. 20 jiffies at 5,000 pages/s
        // move the estimate by 20/512 of the difference.
        let hz = Hz(100);
        let mut bdi = Bdi::new();
        bdi.written = 1_000;
        bdi.update_write_bandwidth(20, hz);
        let expected = (1_000 * 100 + INIT_BW_PAGES_PER_SEC * (512 - 20)) / 512;
        assert_eq!(bdi.write_bandwidth, expected);
        assert_eq!(
            bdi.avg_write_bandwidth, INIT_BW_PAGES_PER_SEC,
            "avg follows write_bandwidth's previous value"
        );
        // After more than a period the estimate is the plain rate.
        bdi.written_stamp = bdi.written;
        bdi.written += 6_000;
        bdi.update_write_bandwidth(600, hz);
        assert_eq!(
            (bdi.write_bandwidth, bdi.avg_write_bandwidth),
            (1_000, 1_000)
        );
    }
    /// A page cache over a fast fixed-latency device, for tests of `Mm`'s own arithmetic.
    fn mm(config: super::super::VmConfig) -> (crate::sim::Simulation, std::rc::Rc<Mm>) {
        let sim = crate::sim::Simulation::new(1);
        let device = Box::new(crate::dev::fixed::FixedLatencyDevice::new(1, 0, 0));
        let vfs = crate::stack::storage(
            &sim.handle(),
            config,
            crate::kernel::CpuConfig::zero_cost(),
            device,
            "noop",
            1 << 30,
            None,
        )
        .unwrap();
        (sim, vfs.mm.clone())
    }

    #[test]
    fn the_writeout_fraction_ages_away_after_idle_periods() {
        // VM_COMPLETIONS_PERIOD_LEN = 3 s: at HZ = 100, 300 jiffies; events halve each period.
        let hz = Hz(100);
        let mut bdi = Bdi::new();
        assert!(
            !bdi.writeout_fraction_is_whole(0, hz),
            "nothing written yet"
        );
        bdi.writeout_inc(100, 10, hz);
        assert_eq!(bdi.written, 100);
        assert!(bdi.writeout_fraction_is_whole(299, hz));
        assert!(bdi.writeout_fraction_is_whole(300 * 6, hz), "100 >> 6 = 1");
        assert!(!bdi.writeout_fraction_is_whole(300 * 7, hz), "100 >> 7 = 0");
        bdi.writeout_inc(1, 300 * 7 + 5, hz);
        assert!(bdi.writeout_fraction_is_whole(300 * 7 + 5, hz));
    }

    #[test]
    fn the_global_dirty_limit_rises_at_once_and_falls_by_a_32nd() {
        let (_sim, mm) = mm(super::super::VmConfig::default());
        let (_, thresh) = mm.dirty_limits();
        assert_eq!(
            mm.global_dirty_limit.get(),
            thresh,
            "writeback_set_ratelimit at boot"
        );
        mm.update_dirty_limit(thresh + 3_200, 0);
        assert_eq!(mm.global_dirty_limit.get(), thresh + 3_200);
        assert_eq!(mm.hard_dirty_limit(thresh), thresh + 3_200);
        mm.update_dirty_limit(thresh, 0);
        assert_eq!(mm.global_dirty_limit.get(), thresh + 3_200 - 100);
        // Never below the dirty pages.
        mm.update_dirty_limit(thresh, thresh + 3_100);
        assert_eq!(mm.global_dirty_limit.get(), thresh + 3_100);
    }

    #[test]
    fn writeback_chunks_are_half_a_second_of_bandwidth_at_most_an_eighth_of_the_limit() {
        let (_sim, mm) = mm(super::super::VmConfig::default());
        let work = |nr_pages| WbWork {
            nr_pages,
            reason: WbReason::Background,
            range_cyclic: true,
        };
        mm.global_dirty_limit.set(1 << 20);
        mm.state().bdi.avg_write_bandwidth = 12_800;
        // min(6,400, 131,072) + 1,024, rounded down to 1,024s.
        assert_eq!(mm.writeback_chunk_size(&work(i64::MAX)), 7_168);
        mm.global_dirty_limit.set(16_000);
        // min(6,400, 2,000) + 1,024 = 3,024 -> 2,048.
        assert_eq!(mm.writeback_chunk_size(&work(i64::MAX)), 2_048);
        // A small work: its own size + 1,024, rounded down.
        assert_eq!(mm.writeback_chunk_size(&work(100)), 1_024);
        assert_eq!(mm.writeback_chunk_size(&work(1_500)), 2_048);
    }

    #[test]
    fn max_pause_shrinks_with_the_dirty_pool_and_stat_error_scales_with_cpus() {
        let (_sim, mm) = mm(super::super::VmConfig::default());
        // HZ = 100: MAX_PAUSE = 20 jiffies; bw 12,800 pages/s / roundup_pow_of_two(1 + 12) =
        // 800, so t = dirty / 801 + 1.
        assert_eq!(mm.max_pause_jiffies(), 20);
        assert_eq!(mm.bdi_max_pause(8_010, 12_800), 11);
        assert_eq!(mm.bdi_max_pause(1 << 20, 12_800), 20);
        assert_eq!(mm.bdi_max_pause(0, 12_800), 1);
        // 64 zero-cost cores: 64 x 8 x (1 + 6).
        assert_eq!(mm.bdi_stat_error(), 64 * 8 * 7);
    }

    #[test]
    fn requeue_sends_a_used_up_inode_to_more_io_and_a_short_one_back_to_b_dirty() {
        let (_sim, mm) = mm(super::super::VmConfig::default());
        let mut state = mm.state();
        // Three inodes dirtied at jiffies 5, 7 and 9, each with one dirty page.
        for (ino, when) in [(10u64, 5u64), (11, 7), (12, 9)] {
            let mapping = state.mappings.entry(ino).or_default();
            mapping.dirty.insert(0);
            mapping.dirtied_when = when;
            mapping.wb_list = WbList::Dirty;
            state.b_dirty.insert((when, ino));
        }
        // Kupdate at jiffy 8 with a 0 expiry: the two oldest are expired.
        state.queue_io(8);
        assert_eq!(state.b_io, [10, 11]);
        assert_eq!(state.b_dirty.len(), 1);
        // Inode 10 used its chunk: next turn, on b_more_io.
        assert_eq!(state.b_io_pop(), Some(10));
        assert!(!state.requeue_inode(10, 0, 20));
        assert_eq!(state.b_more_io, [10]);
        // Inode 11 stopped short: back to b_dirty, as the newest (dirtied_when now, as it was
        // older than inode 12).
        assert_eq!(state.b_io_pop(), Some(11));
        assert!(!state.requeue_inode(11, 5, 20));
        assert_eq!(state.mappings[&11].dirtied_when, 20);
        assert_eq!(state.b_dirty.last(), Some(&(20, 11)));
        // The next queue_io: b_more_io first, then the expired ones, oldest first.
        state.queue_io(30);
        assert_eq!(state.b_io, [10, 12, 11]);
        // A written-out inode leaves the lists.
        assert_eq!(state.b_io_pop(), Some(10));
        state.mappings.get_mut(&10).unwrap().dirty.clear();
        assert!(state.requeue_inode(10, 3, 40));
        assert_eq!(
            state.mappings.get(&10).map(|m| m.wb_list),
            None,
            "no pages: dropped"
        );
    }
}
