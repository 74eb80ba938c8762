//! Writeback and dirty throttling (mm/page-writeback.c, fs/fs-writeback.c, mm/backing-dev.c of
//! Linux 3.10).
//!
//! - Dirty limits (`global_dirty_limits`): background and hard thresholds from the ratios (or
//!   bytes) of dirtyable memory (free + page cache); a background threshold at or above the hard
//!   one is halved, as in the kernel.
//! - `balance_dirty_pages`: a writer calls [`Mm::balance_dirty_pages_ratelimited`] after each
//!   page it dirties; every `nr_dirtied_pause` pages it checks the dirty + writeback count.
//!   Below the freerun ceiling ((background + limit) / 2) it goes on; above the background
//!   threshold it kicks the flusher; above freerun it sleeps for `pages_dirtied /
//!   task_ratelimit`, where `task_ratelimit = write_bandwidth x pos_ratio` and `pos_ratio` is the
//!   3.10 cubic `1 + ((setpoint - dirty) / (limit - setpoint))^3` (2 at freerun, 1 at the
//!   setpoint, 0 at the limit); at or over the limit it sleeps `max_pause` and checks again.
//!   Pauses are at most `max_pause` (200 ms).
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
//!
//! Simplifications: one device and one super block (`__writeback_inodes_wb` and
//! `writeback_sb_inodes` are one loop; no per-bdi dirty share); an inode leaves the writeback
//! lists as soon as it has no dirty page (Linux leaves it there until the flusher or
//! `sync_inode_metadata` finds it clean) and the flusher writes no inode metadata (the VFS
//! writes it at fsync), so `I_DIRTY_SYNC` never keeps an inode listed; `dirty_ratelimit`
//! moves halfway to the balanced rate (`task_ratelimit x write_bw / dirty_rate`) every 200 ms,
//! where 3.10 limits the step with more care (`bdi_update_dirty_ratelimit`).

use super::bio::{BioRequest, PageSpan};
use super::Ino;
use super::{pg, Issuer, Mm, PageId, WbList};
use crate::dev::{IoFlags, IoOp};
use crate::sim::{Blocker, Sim, WaitReason};
use crate::units::{Nanos, NS_PER_MS, NS_PER_SEC, PAGE_SIZE};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;

/// Sectors per page.
pub use crate::block::request::SECTORS_PER_PAGE;
/// Largest bio the page cache builds: 512 KiB (REFERENCES.md "max request size").
pub const MAX_BIO_PAGES: u32 = (512 * 1024 / PAGE_SIZE) as u32;
/// `MIN_WRITEBACK_PAGES` = 4096 KiB worth of pages (fs/fs-writeback.c): the chunk written per
/// inode before the flusher moves on or re-checks its goal.
pub const MIN_WRITEBACK_PAGES: u64 = 4096 * 1024 / PAGE_SIZE;
/// `BANDWIDTH_INTERVAL` = HZ/5 = 200 ms (mm/page-writeback.c).
pub const BANDWIDTH_INTERVAL_NS: Nanos = 200 * NS_PER_MS;
/// Smoothing period of the write bandwidth estimate: `roundup_pow_of_two(3 * HZ)`, about 3 s.
pub const BANDWIDTH_PERIOD_NS: Nanos = 3 * NS_PER_SEC;
/// `INIT_BW` = 100 MB/s in pages (mm/page-writeback.c): the estimate before any measurement.
pub const INIT_BW_PAGES_PER_SEC: u64 = 100 * 1024 * 1024 / PAGE_SIZE;
/// Initial `nr_dirtied_pause`: 128 KiB worth of pages (`current->nr_dirtied_pause = 128 >>
/// (PAGE_SHIFT - 10)`, kernel/fork.c).
pub const INITIAL_DIRTIED_PAUSE: u64 = 32;
/// `bdi_min_pause`'s target pause for a single dirtier: 10 ms (`max(1, HZ / 100)` jiffies).
pub const TARGET_PAUSE_NS: Nanos = 10 * NS_PER_MS;
/// Pages between checks while `dirty_exceeded`: `32 >> (PAGE_SHIFT - 10)` = 8
/// (`balance_dirty_pages_ratelimited`).
pub const DIRTY_EXCEEDED_RATELIMIT: u64 = 8;
/// `DIRTY_POLL_THRESH` = 128 KiB worth of pages (mm/page-writeback.c).
pub const DIRTY_POLL_THRESH: u64 = 32;

/// Estimate of the device's write bandwidth from completed writeback (`bdi_update_write_bandwidth`).
#[derive(Debug, Clone, Copy)]
pub struct Bandwidth {
    /// Smoothed pages per second.
    pub avg_pages_per_sec: u64,
    /// `bdi->dirty_ratelimit`: the rate each dirtier is allowed at the setpoint, pages/s;
    /// converges to the write bandwidth divided by the number of dirtiers.
    pub dirty_ratelimit: u64,
    /// Start of the current dirty-rate window and pages dirtied (globally) at its start.
    dirty_window: Option<(Nanos, u64)>,
    /// `bdi->dirty_exceeded`: dirty pages are over the limit; dirtiers check more often.
    pub dirty_exceeded: bool,
    window_start: Option<Nanos>,
    written_in_window: u64,
}

impl Bandwidth {
    pub fn new() -> Self {
        Bandwidth {
            avg_pages_per_sec: INIT_BW_PAGES_PER_SEC,
            dirty_ratelimit: INIT_BW_PAGES_PER_SEC,
            dirty_window: None,
            dirty_exceeded: false,
            window_start: None,
            written_in_window: 0,
        }
    }

    /// `pages` finished writeback at `now`; `busy` says whether writeback is still in flight.
    fn on_written(&mut self, now: Nanos, pages: u64, busy: bool) {
        let Some(start) = self.window_start else {
            // A window starts when the device is busy with writeback, so idle time is not
            // counted as slowness.
            if busy {
                self.window_start = Some(now);
                self.written_in_window = 0;
            }
            return;
        };
        self.written_in_window += pages;
        let elapsed = now - start;
        if elapsed < BANDWIDTH_INTERVAL_NS {
            return;
        }
        let bw = (u128::from(self.written_in_window) * u128::from(NS_PER_SEC) / u128::from(elapsed))
            as u64;
        self.avg_pages_per_sec = if elapsed >= BANDWIDTH_PERIOD_NS {
            bw
        } else {
            ((u128::from(self.avg_pages_per_sec) * u128::from(BANDWIDTH_PERIOD_NS - elapsed)
                + u128::from(bw) * u128::from(elapsed))
                / u128::from(BANDWIDTH_PERIOD_NS)) as u64
        }
        .max(1);
        self.window_start = busy.then_some(now);
        self.written_in_window = 0;
    }
}

impl Bandwidth {
    /// `bdi_update_dirty_ratelimit`, every `BANDWIDTH_INTERVAL`: the balanced rate is
    /// `task_ratelimit x write_bw / dirty_rate` (with N dirtiers each at `task_ratelimit`, the
    /// dirty rate is N times it, so the balanced rate is write_bw / N); `dirty_ratelimit`
    /// moves halfway towards it (3.10 limits the step more carefully).
    fn update_dirty_ratelimit(&mut self, now: Nanos, pages_dirtied: u64, pos_ratio: u64) {
        let Some((start, dirtied_at_start)) = self.dirty_window else {
            self.dirty_window = Some((now, pages_dirtied));
            return;
        };
        let elapsed = now - start;
        if elapsed < BANDWIDTH_INTERVAL_NS {
            return;
        }
        let dirty_rate = ((pages_dirtied - dirtied_at_start) * NS_PER_SEC / elapsed).max(1);
        let task_ratelimit = (self.dirty_ratelimit * pos_ratio / 1024).max(1);
        let balanced = (u128::from(task_ratelimit) * u128::from(self.avg_pages_per_sec)
            / u128::from(dirty_rate)) as u64;
        self.dirty_ratelimit =
            ((self.dirty_ratelimit + balanced) / 2).clamp(1, self.avg_pages_per_sec.max(1));
        self.dirty_window = Some((now, pages_dirtied));
    }
}

impl Default for Bandwidth {
    fn default() -> Self {
        Self::new()
    }
}

/// Dirty-throttling state a task carries (`current->nr_dirtied`, `nr_dirtied_pause`).
#[derive(Debug, Clone, Copy)]
pub struct DirtyThrottleState {
    pub nr_dirtied: u64,
    pub nr_dirtied_pause: u64,
    /// `current->dirty_paused_when`: end of the last pause (or freerun check).
    pub dirty_paused_when: Option<Nanos>,
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

/// `DIRTY_SCOPE` = 8 (mm/page-writeback.c): a chunk is at most 1/8 of the dirty limit.
pub const DIRTY_SCOPE: u64 = 8;
/// Bound on queued flusher work items; more means a runaway model.
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

/// `bdi_min_pause`: (shortest pause worth sleeping, `nr_dirtied_pause` for the next check).
/// Targets a 10 ms pause for one dirtier, at least `DIRTY_POLL_THRESH` (32) pages between
/// checks, and a next pause no longer than `max_pause`.
fn min_pause(max_pause: Nanos, task_ratelimit: u64, dirty_ratelimit: u64) -> (Nanos, u64) {
    let dirty_ratelimit = dirty_ratelimit.max(1);
    let mut t = TARGET_PAUSE_NS.min(1 + max_pause / 2);
    let mut pages = dirty_ratelimit * t / NS_PER_SEC;
    if pages < DIRTY_POLL_THRESH {
        t = max_pause;
        pages = dirty_ratelimit * t / NS_PER_SEC;
        if pages > DIRTY_POLL_THRESH {
            pages = DIRTY_POLL_THRESH;
            t = NS_PER_SEC * DIRTY_POLL_THRESH / dirty_ratelimit;
        }
    }
    let pause = NS_PER_SEC * pages / (task_ratelimit + 1);
    if pause > max_pause {
        t = max_pause;
        pages = task_ratelimit * t / NS_PER_SEC;
    }
    let min_pause = if pages >= DIRTY_POLL_THRESH {
        1 + t / 2
    } else {
        t
    };
    (min_pause, pages.max(1))
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
    /// `global_dirty_limits`: (background threshold, dirty threshold) in pages.
    pub fn dirty_limits(&self) -> (u64, u64) {
        let config = &self.config;
        // global_dirtyable_memory: free pages plus the file pages (all of our cache).
        let available = config.managed_pages();
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
        (background, thresh.max(1))
    }

    /// `over_bground_thresh`.
    pub fn over_bground_thresh(&self) -> bool {
        let (background, _) = self.dirty_limits();
        let state = self.state();
        state.nr_dirty > background
    }

    /// Called after each page a task dirties (`balance_dirty_pages_ratelimited`).
    pub async fn balance_dirty_pages_ratelimited(
        &self,
        sim: &Sim,
        throttle: &mut DirtyThrottleState,
        dirtied: u64,
    ) {
        throttle.nr_dirtied += dirtied;
        let mut ratelimit = throttle.nr_dirtied_pause;
        if self.state().bandwidth.dirty_exceeded {
            // Over the limit: everyone checks every 32 KiB (`32 >> (PAGE_SHIFT - 10)` pages).
            ratelimit = ratelimit.min(DIRTY_EXCEEDED_RATELIMIT);
        }
        if throttle.nr_dirtied >= ratelimit {
            self.balance_dirty_pages(sim, throttle).await;
        }
    }

    /// `balance_dirty_pages`: see the module documentation.
    pub async fn balance_dirty_pages(&self, sim: &Sim, throttle: &mut DirtyThrottleState) {
        loop {
            let now = sim.now();
            let (nr_dirty, nr_writeback, write_bw) = {
                let state = self.state();
                (
                    state.nr_dirty,
                    state.nr_writeback,
                    state.bandwidth.avg_pages_per_sec,
                )
            };
            let dirty = nr_dirty + nr_writeback;
            let (background, limit) = self.dirty_limits();
            if nr_dirty > background && !self.writeback_in_progress() {
                // bdi_start_background_writeback
                self.bdi_wakeup_thread(sim);
            }
            let freerun = (background + limit) / 2;
            if dirty <= freerun {
                self.state().bandwidth.dirty_exceeded = false;
                throttle.dirty_paused_when = Some(now);
                throttle.nr_dirtied = 0;
                throttle.nr_dirtied_pause = dirty_poll_interval(dirty, limit);
                return;
            }
            // bdi_position_ratio, global control line: 2 at freerun, 1 at the setpoint, 0 at
            // the limit; in 1/1024 units (RATELIMIT_CALC_SHIFT = 10).
            let setpoint = (freerun + limit) / 2;
            let pos_ratio: u64 = if dirty >= limit {
                0
            } else {
                let x = (setpoint as f64 - dirty as f64) / ((limit - setpoint) as f64 + 1.0);
                ((1.0 + x * x * x).clamp(0.0, 2.0) * 1024.0) as u64
            };
            let dirty_ratelimit = {
                let mut state = self.state();
                let pages_dirtied = state.stats.pages_dirtied;
                state.bandwidth.dirty_exceeded = dirty > limit;
                state
                    .bandwidth
                    .update_dirty_ratelimit(now, pages_dirtied, pos_ratio);
                state.bandwidth.dirty_ratelimit
            };
            let task_ratelimit = dirty_ratelimit * pos_ratio / 1024;
            let max_pause = self.max_pause(dirty, write_bw);
            let (min_pause, nr_dirtied_pause) =
                min_pause(max_pause, task_ratelimit, dirty_ratelimit);
            // The virtual time the pause is charged up to (`now` in the kernel, moved ahead
            // when a long pause is cut to `max_pause`).
            let mut charged_until = now;
            let pause = match (throttle.nr_dirtied * NS_PER_SEC).checked_div(task_ratelimit) {
                None => max_pause,
                Some(period) => {
                    // Think time since the last pause counts towards this one
                    // (`dirty_paused_when` may lie ahead after a skipped short pause).
                    let since = throttle
                        .dirty_paused_when
                        .map_or(0, |t| now as i128 - t as i128);
                    let pause = period as i128 - since;
                    if pause < min_pause as i128 {
                        if pause < -(NS_PER_SEC as i128) {
                            throttle.dirty_paused_when = Some(now);
                            throttle.nr_dirtied = 0;
                        } else if period > 0 {
                            throttle.dirty_paused_when =
                                Some(throttle.dirty_paused_when.unwrap_or(now) + period);
                            throttle.nr_dirtied = 0;
                        } else if throttle.nr_dirtied_pause <= throttle.nr_dirtied {
                            throttle.nr_dirtied_pause += throttle.nr_dirtied;
                        }
                        return;
                    }
                    let pause = pause as u64;
                    if pause > max_pause {
                        charged_until += (pause - max_pause).min(max_pause);
                    }
                    pause.min(max_pause)
                }
            };
            {
                let mut state = self.state();
                state.stats.throttle_pauses += 1;
                state.stats.throttle_ns += pause;
            }
            sim.sleep_for(pause, WaitReason::DirtyThrottle, Blocker::None)
                .await;
            throttle.dirty_paused_when = Some(charged_until + pause);
            throttle.nr_dirtied = 0;
            throttle.nr_dirtied_pause = nr_dirtied_pause;
            if task_ratelimit > 0 {
                return;
            }
        }
    }

    /// `bdi_max_pause`: the configured `max_pause`, shortened on small memory so that the
    /// dirty pool cannot drain while the writer sleeps: at most 1/8 of the time the device
    /// needs to write the dirty pages ("8 serves as the safety ratio").
    fn max_pause(&self, dirty: u64, write_bw: u64) -> Nanos {
        let drain = dirty * NS_PER_SEC / (8 * write_bw.max(1));
        (drain + NS_PER_MS).min(self.config.max_pause)
    }

    /// `end_page_writeback` for the pages of a completed write bio.
    pub(crate) fn end_writeback_span(&self, sim: &Sim, span: PageSpan) {
        {
            let mut state = self.state();
            for index in span.index..span.index + u64::from(span.count) {
                let mapping = state
                    .mappings
                    .get_mut(&span.ino)
                    .expect("written inode cached");
                let id = *mapping
                    .pages
                    .get(&index)
                    .expect("a page under writeback stays cached");
                assert!(
                    mapping.writeback.remove(&index).is_some(),
                    "page not tagged writeback"
                );
                let page = &mut state.pages[id as usize];
                assert!(
                    page.has(pg::WRITEBACK),
                    "end of writeback of a page not under it"
                );
                page.flags &= !pg::WRITEBACK;
                let reclaim = page.has(pg::RECLAIM);
                page.flags &= !pg::RECLAIM;
                state.nr_writeback -= 1;
                if reclaim && state.pages[id as usize].lru == super::Lru::Inactive {
                    // rotate_reclaimable_page: to the tail, to be reclaimed next.
                    state.lru_del(id);
                    state.lru_add_tail(id, super::Lru::Inactive);
                }
            }
            let busy = state.nr_writeback > 0;
            state
                .bandwidth
                .on_written(sim.now(), u64::from(span.count), busy);
        }
        for index in span.index..span.index + u64::from(span.count) {
            self.wake_page(sim, span.ino, index);
        }
        self.free_wait.wake_all(sim);
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
        let flags = IoFlags {
            sync,
            ..IoFlags::default()
        };
        let bio = BioRequest {
            issued_async: !sync,
            uid,
            ..BioRequest::for_pages(IoOp::Write, block, span.count, flags, issuer, Some(span))
        };
        {
            let mut state = self.state();
            if sync {
                state.stats.pages_written_sync += u64::from(span.count);
            } else {
                state.stats.pages_written_async += u64::from(span.count);
            }
        }
        let mm = self.rc();
        let request = self
            .bdev
            .submit_bio(
                sim,
                bio,
                Box::new(move |sim, _id| mm.end_writeback_span(sim, span)),
            )
            .await;
        // Link the pages to their request (it cannot have completed yet: completions run
        // from later events).
        let mut state = self.state();
        if let Some(mapping) = state.mappings.get_mut(&span.ino) {
            for (_, carrier) in mapping
                .writeback
                .range_mut(span.index..span.index + u64::from(span.count))
            {
                if *carrier == 0 {
                    *carrier = request;
                }
            }
        }
        request
    }

    /// Moves a locked dirty page to writeback and unlocks it; returns its disk block.
    fn page_start_writeback(&self, sim: &Sim, id: PageId) -> u64 {
        let (ino, index) = {
            let mut state = self.state();
            state.start_writeback(id);
            let page = state.pages[id as usize];
            (page.ino, page.index)
        };
        let block = self
            .fs
            .borrow_mut()
            .get_block(ino, index, false)
            .expect("mapping a written page")
            .expect("a dirty page has a block (allocated at write time)");
        self.unlock_page(sim, id);
        block
    }

    /// `write_cache_pages` / `mpage_writepages`: writes up to `nr_to_write` dirty pages of
    /// `ino` (`range`: from `writeback_index` cyclically, from the start, or the listed pages as
    /// `tag_pages_for_writeback` fixes them for `WB_SYNC_ALL`) in bios of consecutive blocks. A
    /// locked page is waited for (`lock_page`); a page found clean was written by someone else
    /// and skipped. (`WB_SYNC_ALL`'s wait for a page already under writeback cannot arise: a
    /// dirty page is never under writeback here.) Bios are synchronous when `sync`. Returns
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
        let todo: Vec<u64> = match range {
            WbRange::Pages(list) => list,
            WbRange::Cyclic | WbRange::Whole => {
                let state = self.state();
                let Some(mapping) = state.mappings.get(&ino) else {
                    return 0;
                };
                let start = if cyclic { mapping.writeback_index } else { 0 };
                mapping
                    .dirty
                    .range(start..)
                    .chain(mapping.dirty.range(..start))
                    .take(usize::try_from(nr_to_write).unwrap_or(usize::MAX))
                    .copied()
                    .collect()
            }
        };
        let mut written = 0u64;
        // The bio being built: (first index, first block, pages).
        let mut current: Option<(u64, u64, u32)> = None;
        for index in todo {
            // Integrity sync writes every listed page; others stop at `nr_to_write`.
            if written >= nr_to_write && mode == SyncMode::None {
                break;
            }
            // write_cache_pages sleeps in lock_page in both modes.
            let Some(id) = self.lock_page(sim, ino, index).await else {
                continue;
            };
            if !self.page(id).has(pg::DIRTY) {
                // Someone wrote it for us.
                self.unlock_page(sim, id);
                continue;
            }
            assert!(
                !self.page(id).has(pg::WRITEBACK),
                "dirty and under writeback"
            );

            let block = self.page_start_writeback(sim, id);
            written += 1;
            match current {
                Some((first, first_block, count))
                    if first + u64::from(count) == index
                        && first_block + u64::from(count) == block
                        && count < MAX_BIO_PAGES =>
                {
                    current = Some((first, first_block, count + 1));
                }
                _ => {
                    if let Some((first, first_block, count)) = current.take() {
                        let span = PageSpan {
                            ino,
                            index: first,
                            count,
                        };
                        self.submit_write_span(sim, span, first_block, issuer, sync)
                            .await;
                    }
                    current = Some((index, block, 1));
                }
            }
            if cyclic {
                if let Some(mapping) = self.state().mappings.get_mut(&ino) {
                    mapping.writeback_index = index + 1;
                }
            }
        }
        if let Some((first, first_block, count)) = current {
            let span = PageSpan {
                ino,
                index: first,
                count,
            };
            self.submit_write_span(sim, span, first_block, issuer, sync)
                .await;
        }
        written
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
        let (write_bw, dirty_limit) = {
            let state = self.state();
            (state.bandwidth.avg_pages_per_sec, self.dirty_limits().1)
        };
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
        let mut oldest_jif = i128::from(self.jiffies(sim));
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
            if progress > 0 {
                continue;
            }
            // No progress and nothing requeued: no inode qualifies. (The kernel would wait
            // for an inode of b_more_io that someone else is writing, `I_SYNC`; only the
            // flusher writes inodes this way here, so b_more_io is empty.)
            break;
        }
        u64::try_from(nr_pages - work.nr_pages).unwrap_or(0)
    }

    /// `wakeup_flusher_threads(nr_pages, WB_REASON_TRY_TO_FREE_PAGES)`: reclaim queues work for
    /// the flusher to write `nr_pages` dirty pages, whatever the thresholds say (non-cyclic:
    /// each inode from its first dirty page).
    pub(crate) fn wakeup_flusher_threads(&self, sim: &Sim, nr_pages: u64) {
        if !self.state().wb_has_dirty_io() {
            return;
        }
        {
            let mut list = self.flusher.work_list.borrow_mut();
            assert!(list.len() < MAX_FLUSHER_WORK, "flusher work list overflow");
            list.push_back(WbWork {
                nr_pages: i64::try_from(nr_pages).unwrap_or(i64::MAX),
                reason: WbReason::TryToFreePages,
                range_cyclic: false,
            });
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
