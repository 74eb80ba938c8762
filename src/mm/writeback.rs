//! Writeback and dirty throttling (mm/page-writeback.c, fs/fs-writeback.c of Linux 3.10).
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
//! - The flusher (one per device, `bdi_writeback_thread` / `wb_do_writeback`): background
//!   writeback while over the background threshold, then every `dirty_writeback_interval` the
//!   kupdate pass (`wb_check_old_data_flush`) over inodes dirtied more than `dirty_expire` ago,
//!   oldest first, in chunks of `MIN_WRITEBACK_PAGES` (4 MiB) per inode. Its bios are
//!   asynchronous (no REQ_SYNC, `issued_async`), submitted from the flusher's own context.
//! - `write_cache_pages`: dirty pages of an inode in index order, locked, moved to writeback
//!   and gathered into bios of up to 512 KiB of consecutive blocks (`mpage_writepages`).
//!
//! Simplifications: no per-bdi dirty share (one device); `dirty_ratelimit` moves halfway to
//! the balanced rate (`task_ratelimit x write_bw / dirty_rate`) every 200 ms, where 3.10 limits
//! the step with more care (`bdi_update_dirty_ratelimit`); background
//! writeback visits the oldest dirty inode first rather than round-robin over `b_io`; the
//! flusher writes no inode metadata (the VFS writes it at fsync).

use super::bio::{BioRequest, PageSpan};
use super::Ino;
use super::{pg, Issuer, Mm, PageId};
use crate::dev::{IoFlags, IoOp};
use crate::sim::{Blocker, Sim, WaitReason};
use crate::units::{Nanos, NS_PER_MS, NS_PER_SEC, PAGE_SIZE};

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
            if nr_dirty > background {
                // bdi_start_background_writeback
                self.flusher_wake.wake(sim);
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
        // WB_SYNC_ALL writeback is `WRITE_SYNC` = REQ_SYNC | REQ_NOIDLE (include/linux/fs.h).
        let flags = IoFlags {
            sync,
            noidle: sync,
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
    /// `ino` (`indexes` when given, as `tag_pages_for_writeback` fixes them for `WB_SYNC_ALL`;
    /// else from `writeback_index` cyclically) in bios of consecutive blocks. A locked page is
    /// waited for (`lock_page`); a page found clean was written by someone else and skipped.
    /// (`WB_SYNC_ALL`'s wait for a page already under writeback cannot arise: a dirty page is
    /// never under writeback here.) Bios are synchronous when `sync`. Returns pages written.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn writepages(
        &self,
        sim: &Sim,
        ino: Ino,
        mode: SyncMode,
        nr_to_write: u64,
        indexes: Option<Vec<u64>>,
        issuer: Issuer,
        sync: bool,
    ) -> u64 {
        let cyclic = indexes.is_none();
        let todo: Vec<u64> = match indexes {
            Some(list) => list,
            None => {
                let state = self.state();
                let Some(mapping) = state.mappings.get(&ino) else {
                    return 0;
                };
                let start = mapping.writeback_index;
                mapping
                    .dirty
                    .range(start..)
                    .chain(mapping.dirty.range(..start))
                    .take(nr_to_write as usize)
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

    /// The oldest dirty inode dirtied at or before `older_than` (any when `None`).
    fn oldest_dirty_inode(&self, older_than: Option<Nanos>) -> Option<Ino> {
        let state = self.state();
        let &(when, ino) = state.b_dirty.iter().next()?;
        match older_than {
            Some(limit) if when > limit => None,
            _ => Some(ino),
        }
    }

    /// `wb_writeback`: writes inodes in chunks until `nr_pages` are written, no inode qualifies,
    /// or (background work) the dirty count is under the background threshold. Returns pages
    /// written.
    async fn wb_writeback(&self, sim: &Sim, mut nr_pages: u64, reason: WbReason) -> u64 {
        let issuer = Issuer {
            task: sim.current_task(),
            pid: super::FLUSHER_PID,
            uid: 0,
            foreground: false,
        };
        let mut total = 0;
        while nr_pages > 0 {
            if reason == WbReason::Background && !self.over_bground_thresh() {
                break;
            }
            let older_than = (reason == WbReason::Periodic)
                .then(|| sim.now().saturating_sub(self.config.dirty_expire));
            let Some(ino) = self.oldest_dirty_inode(older_than) else {
                break;
            };
            let chunk = nr_pages.min(MIN_WRITEBACK_PAGES);
            let written = self
                .writepages(sim, ino, SyncMode::None, chunk, None, issuer, false)
                .await;
            if written == 0 {
                // Everything dirty was written by others meanwhile.
                break;
            }
            total += written;
            nr_pages = nr_pages.saturating_sub(written);
            let mut state = self.state();
            match reason {
                WbReason::Periodic => state.stats.flusher_kupdate_pages += written,
                WbReason::Background => state.stats.flusher_background_pages += written,
                WbReason::TryToFreePages => state.stats.flusher_reclaim_pages += written,
            }
        }
        total
    }

    /// `wakeup_flusher_threads(nr_pages, WB_REASON_TRY_TO_FREE_PAGES)`: reclaim asks the
    /// flusher to write `nr_pages` dirty pages, whatever the thresholds say.
    pub(crate) fn wakeup_flusher_threads(&self, sim: &Sim, nr_pages: u64) {
        self.flusher_work
            .set(self.flusher_work.get().saturating_add(nr_pages));
        self.flusher_wake.wake(sim);
    }

    /// The flusher thread (`bdi_writeback_thread` + `wb_do_writeback`).
    pub(crate) async fn flusher(&self, sim: &Sim) {
        let interval = self.config.dirty_writeback_interval;
        let mut last_old_flush: Nanos = 0;
        loop {
            // Queued work (from reclaim) first, as `wb_do_writeback` runs `bdi->work_list`.
            let work = self.flusher_work.replace(0);
            if work > 0 {
                self.wb_writeback(sim, work, WbReason::TryToFreePages).await;
            }
            // wb_check_background_flush
            if self.over_bground_thresh() {
                self.wb_writeback(sim, u64::MAX, WbReason::Background).await;
            }
            // wb_check_old_data_flush
            if interval > 0 && sim.now() >= last_old_flush + interval {
                last_old_flush = sim.now();
                let nr_pages = self.state().nr_dirty;
                if nr_pages > 0 {
                    self.wb_writeback(sim, nr_pages, WbReason::Periodic).await;
                }
            }
            if self.over_bground_thresh() && self.state().nr_writeback > 0 {
                // Still over: writeback is bound by the device; wait for some of it to finish
                // (the block queue's congestion wait), then go on.
                self.free_wait
                    .wait(sim, WaitReason::WaitQueue, Blocker::None)
                    .await;
                continue;
            }
            let next = (interval > 0).then(|| last_old_flush + interval);
            self.flusher_wake.wait(sim, next).await;
        }
    }
}
