//! The page allocator and page reclaim (mm/page_alloc.c, mm/vmscan.c, mm/backing-dev.c and
//! `throttle_vm_writeout` of mm/page-writeback.c, Linux 3.10), and, as a labelled option,
//! FastTrack §3.2's description of the allocation path.
//!
//! `[stack.vm] page_cache_lock = "linux"` (default), the kernel's code:
//! - `__alloc_pages_nodemask` ([`Mm::alloc_page`]): a page is taken at once while free pages
//!   are above the low watermark; otherwise (`__alloc_pages_slowpath`) kswapd is woken and a
//!   page is taken above the min watermark; otherwise the task reclaims directly
//!   (`try_to_free_pages`) and retries, with `wait_iff_congested(HZ/50)` between attempts. No
//!   lock is held across any of it (`zone->lock` and `lru_lock` are held for list operations
//!   only), so one task's reclaim never blocks another's allocation.
//! - `throttle_direct_reclaim`: below half the min watermark a direct reclaimer waits
//!   (`pfmemalloc_wait`, reason `throttle_direct_reclaim`) until kswapd restores it.
//! - `do_try_to_free_pages`: priorities `DEF_PRIORITY` (12) down to 0, each scanning `LRU size
//!   >> priority` pages of each file list (`shrink_lruvec`, batches of `SWAP_CLUSTER_MAX`,
//!   active pages deactivated while the inactive list is the smaller), until 32 pages are
//!   freed; past 48 pages scanned it wakes the flusher to write that many
//!   (`wakeup_flusher_threads`), below priority 10 it naps in `wait_iff_congested(HZ/10)`.
//!   Each scan ends with `throttle_vm_writeout` (pages under writeback above 110 % of the
//!   dirty limit: `congestion_wait(HZ/10)`).
//! - `shrink_inactive_list`: a direct reclaimer that finds more pages isolated than an eighth
//!   of the inactive list waits in `congestion_wait(HZ/10)` (`too_many_isolated`); the batch is
//!   isolated, `shrink_page_list` runs, pages kept go back to the list head; if enough of the
//!   batch was under writeback for the priority, `wait_iff_congested(HZ/10)`.
//! - `shrink_page_list`: a locked page is skipped; a page under writeback is marked
//!   `PG_reclaim` (rotated to the tail when written, `rotate_reclaimable_page`) and kept; a
//!   dirty page is kept and marked `PG_reclaim` unless the reclaimer is kswapd at a raised
//!   priority (below `DEF_PRIORITY - 2`) and it was not referenced: "Only kswapd can writeback
//!   filesystem pages ... unless under significant pressure". kswapd's `pageout` is
//!   asynchronous: the page goes to writeback with `PG_reclaim` and back on the list, to be
//!   freed once written. Clean pages are freed (`__remove_mapping`).
//! - `wait_iff_congested` sleeps only when a device is congested *and* the zone is marked
//!   `ZONE_CONGESTED`, which `shrink_page_list` sets when every dirty page it met was refused by
//!   a congested device in `pageout`; kswapd may always write (`PF_SWAPWRITE`) and direct
//!   reclaim never calls `pageout` for file pages, so in 3.10 it does not sleep here: reclaim
//!   that meets only dirty pages kicks the flusher and scans again.
//! - kswapd (`balance_pgdat`): woken below the low watermark; reclaims from `DEF_PRIORITY`
//!   down (no early stop: `nr_to_reclaim = ULONG_MAX`) until free pages are above the high
//!   watermark, starting over at `DEF_PRIORITY` whenever a pass freed 32 pages; then naps
//!   `HZ/10` and sleeps (`kswapd_try_to_sleep`). A zone scanned six times over without a page
//!   freed is `all_unreclaimable` (considered balanced) until a page is freed.
//!
//! `page_cache_lock = "global"`, FastTrack §3.2's description: every allocation takes one
//! global lock (reason `alloc_pages` for its waiters) and holds it across reclaim, which frees
//! clean pages and writes the dirty ones and waits for them (`pageout` + wait, reason
//! `direct_reclaim`); the copies of `read` and `write` take it too (`src/mm/filemap.rs`). So a
//! foreground allocation waits behind a background task's dirty-page eviction. kswapd is the
//! kernel's in both models.
//!
//! Watermarks (`__setup_per_zone_wmarks`): min = `min_free_kbytes` (sqrt(16 x KiB of lowmem),
//! clamped to 128 KiB..64 MiB), low = min x 5/4, high = min x 3/2; with highmem
//! (`[stack.vm] lowmem`), the sum of both zones' (`src/mm/zones.rs`).
//!
//! CPU time: each page reclaim scans (isolated from either list) costs `[stack.cpu]
//! page_reclaim` on the reclaiming task's core, accounted as `direct_reclaim` for an
//! allocating task (a stall) and as `on_cpu` for kswapd.
//!
//! Simplifications: one zone for allocation and reclaim (with highmem, its watermarks are the
//! zones' summed and the lowmem reserve only enters the dirty limits, `src/mm/zones.rs`), no
//! swap (file pages only: `get_scan_count` is `SCAN_FILE`), no compaction, no slab shrinking,
//! no mapped pages (`page_referenced` finds no page-table references); the allocating contexts
//! are `GFP_KERNEL`-like (`__GFP_IO | __GFP_FS`; ext4's `AOP_FLAG_NOFS`
//! arrives with ext4); the congestion state is the request list's total count against the
//! kernel's thresholds (3.10 keeps one per direction), and blk-mq queues are never congested;
//! kswapd's `pageout` of several pages of one inode builds one bio (the kernel's plug merges
//! them); no OOM killer: an allocation that finds nothing reclaimable takes a page of the
//! reserve below the min watermark (and waits for writeback when none is left).

use super::{pg, Issuer, Lru, Mm, PageCacheLock, PageId, ReclaimPolicyKind, VmConfig};
use crate::sim::{Blocker, Sim, WaitReason};
use crate::units::Nanos;

/// `SWAP_CLUSTER_MAX` (include/linux/swap.h): pages isolated and reclaimed per batch.
pub const SWAP_CLUSTER_MAX: usize = 32;
/// `DEF_PRIORITY` (include/linux/mmzone.h): reclaim scans `size >> priority` pages.
pub const DEF_PRIORITY: u32 = 12;
/// `KSWAPD_ZONE_BALANCE_GAP_RATIO` (include/linux/swap.h): kswapd leaves a zone alone once it
/// has `min(low watermark, 1 %)` free above the high watermark.
pub const KSWAPD_ZONE_BALANCE_GAP_RATIO: u64 = 100;
/// Allocation attempts after which an allocation that reclaim cannot serve takes a reserve
/// page (the model has no OOM killer).
pub const MAX_RECLAIM_RETRIES: u32 = 4096;

/// Zone watermarks in pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watermarks {
    pub min: u64,
    pub low: u64,
    pub high: u64,
}

impl Watermarks {
    /// The allocator's watermarks for `config` ([`super::zones::Zones::allocator_watermarks`]).
    pub fn new(config: &VmConfig) -> Watermarks {
        super::zones::Zones::new(config).allocator_watermarks()
    }
}

/// A page isolated for reclaim, as the policy sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    pub id: PageId,
    /// Where the page was when isolated: a page truncated while isolated is no longer there
    /// (Linux keeps it alive by the isolation's reference and `__remove_mapping` finds
    /// `page->mapping` NULL; here its slot may even have been reused).
    pub ino: super::Ino,
    pub index: u64,
    /// Page flags (see [`super::pg`]).
    pub flags: u16,
    /// The app that owns the page (`Page::uid`: by default the one that brought it in).
    pub uid: u32,
    /// Whether that app is in the foreground now.
    pub foreground: bool,
}

/// The order in which reclaim tries isolated inactive pages (DESIGN.md principle 7: pure, no
/// waiting). FastTrack's page reclaimer (BG clean > BG dirty > FG clean > FG dirty) arrives as
/// another implementation in its own issue.
pub trait ReclaimPolicy {
    fn name(&self) -> &str;
    /// `candidates` are oldest first. Appends to `order` the positions to try, first to last;
    /// positions left out go back to the inactive list untouched (at its head). `priority` is
    /// the reclaim pass's (`DEF_PRIORITY` = 12 first, lower as reclaim struggles).
    fn order_victims(&mut self, candidates: &[Candidate], priority: u32, order: &mut Vec<usize>);
}

/// Linux's preference: oldest first, clean pages before dirty ones (the dirty ones are written
/// only when clean pages do not suffice).
#[derive(Debug, Default)]
pub struct LinuxReclaim;

impl ReclaimPolicy for LinuxReclaim {
    fn name(&self) -> &str {
        "linux"
    }

    fn order_victims(&mut self, candidates: &[Candidate], _priority: u32, order: &mut Vec<usize>) {
        let dirty = |c: &Candidate| c.flags & pg::DIRTY != 0;
        order.extend((0..candidates.len()).filter(|&i| !dirty(&candidates[i])));
        order.extend((0..candidates.len()).filter(|&i| dirty(&candidates[i])));
    }
}

/// FastTrack §4.3's page reclaimer: "BG clean pages (highest) > BG dirty pages (high) > FG
/// clean pages (low) > FG dirty pages (lowest)", oldest first within each class. A page is FG
/// when its owner (`Page::uid`) is the foreground app now. The order is over
/// the whole inactive list, not one isolated batch: FG pages are left out of the batch, so they
/// go back to the list's head and the next batch finds BG pages; only in reclaim's last pass
/// (priority 0, which scans the whole list) are FG pages victims too, after the BG ones of their
/// batch (no FG page is kept at the cost of failing reclaim).
#[derive(Debug, Default)]
pub struct FastTrackReclaim;

impl ReclaimPolicy for FastTrackReclaim {
    fn name(&self) -> &str {
        "fasttrack"
    }

    fn order_victims(&mut self, candidates: &[Candidate], priority: u32, order: &mut Vec<usize>) {
        let class = |c: &Candidate| {
            let dirty = c.flags & pg::DIRTY != 0;
            match (c.foreground, dirty) {
                (false, false) => 0,
                (false, true) => 1,
                (true, false) => 2,
                (true, true) => 3,
            }
        };
        let classes = if priority > 0 { 2 } else { 4 };
        for wanted in 0..classes {
            order.extend((0..candidates.len()).filter(|&i| class(&candidates[i]) == wanted));
        }
    }
}

pub fn policy_for(kind: ReclaimPolicyKind) -> Box<dyn ReclaimPolicy> {
    match kind {
        ReclaimPolicyKind::Linux => Box::new(LinuxReclaim),
        ReclaimPolicyKind::Fasttrack => Box::new(FastTrackReclaim),
    }
}

/// Who reclaims: an allocating task (`current_is_kswapd()` false) or kswapd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reclaimer {
    Direct,
    Kswapd,
}

/// What one `shrink_page_list` found, in pages.
#[derive(Debug, Clone, Copy, Default)]
struct ShrinkResult {
    scanned: u64,
    reclaimed: u64,
    nr_dirty: u64,
    nr_writeback: u64,
}

/// The zone's reclaim state (`struct zone`): what reclaim and the allocator read besides the
/// counters.
#[derive(Debug, Clone, Copy, Default)]
pub struct ZoneReclaimState {
    /// `NR_ISOLATED_FILE`: pages taken off the LRU by reclaimers.
    pub nr_isolated: u64,
    /// `zone->pages_scanned`: pages scanned since a page was last freed.
    pub pages_scanned: u64,
    /// `zone->all_unreclaimable`.
    pub all_unreclaimable: bool,
    /// `ZONE_CONGESTED`.
    pub congested: bool,
}

impl Mm {
    /// `__alloc_pages` of one page for the page cache: returns once a free page is charged to
    /// the caller (who then inserts it with `add_to_page_cache`).
    /// The allocation's own work (`[stack.cpu] page_alloc`: the buddy fast path, zeroing,
    /// `add_to_page_cache_lru`) is spent after it, under the global lock in FastTrack's model.
    pub(crate) async fn alloc_page(&self, sim: &Sim, issuer: Issuer) {
        match self.config.page_cache_lock {
            PageCacheLock::Linux => {
                // (The fast path without the slow path's future: one allocation per page.)
                if !self.take_page_above_low() {
                    self.alloc_page_linux(sim, issuer).await;
                }
                self.cpu
                    .run_urgent(sim, self.cpu_costs.page_alloc, self.pa_urgent(issuer))
                    .await;
            }
            PageCacheLock::Global => {
                let guard = self.page_cache_lock(sim, issuer).await;
                let guard = self.alloc_page_global(sim, issuer, guard).await;
                self.cpu
                    .run_urgent(sim, self.cpu_costs.page_alloc, self.pa_urgent(issuer))
                    .await;
                drop(guard);
            }
        }
    }

    /// `zone_watermark_ok` of an order-0 allocation: free pages above `mark`.
    fn watermark_ok(&self, mark: u64) -> bool {
        self.state().nr_free > mark
    }

    /// `get_page_from_freelist(ALLOC_WMARK_LOW)`: a free page for the caller if the zone is
    /// above its low watermark.
    pub(super) fn take_page_above_low(&self) -> bool {
        let ok = self.watermark_ok(self.watermarks.low);
        if ok {
            self.take_free_page();
        }
        ok
    }

    /// Charges one free page to the caller.
    fn take_free_page(&self) {
        let mut state = self.state();
        assert!(state.nr_free > 0, "allocation with no free page");
        state.nr_free -= 1;
        state.nr_allocating += 1;
    }

    /// `wakeup_kswapd`: only when the zone is not above its low watermark.
    fn wakeup_kswapd(&self, sim: &Sim) {
        if !self.watermark_ok(self.watermarks.low) {
            self.kswapd_wake.wake(sim);
        }
    }

    /// `pfmemalloc_watermark_ok`: free pages above half the min watermark.
    fn pfmemalloc_watermark_ok(&self) -> bool {
        self.state().nr_free > self.watermarks.min / 2
    }

    /// `n` jiffies from now, as a duration that ends on the timer tick.
    fn jiffies_timeout(&self, sim: &Sim, n: u64) -> Nanos {
        self.hz.jiffies_to_ns(self.hz.jiffies(sim.now()) + n) - sim.now()
    }

    /// `congestion_wait(BLK_RW_ASYNC, jiffies)`.
    async fn congestion_wait(&self, sim: &Sim, jiffies: u64) {
        let timeout = self.jiffies_timeout(sim, jiffies.max(1));
        self.bdev.congestion_wait(sim, timeout).await;
    }

    /// `wait_iff_congested(zone, BLK_RW_ASYNC, jiffies)`: a `congestion_wait` only if a device
    /// is congested and the zone is marked `ZONE_CONGESTED`; otherwise just `cond_resched`.
    async fn wait_iff_congested(&self, sim: &Sim, jiffies: u64) {
        if !self.bdev.congested() || !self.state().zone.congested {
            return;
        }
        self.congestion_wait(sim, jiffies).await;
    }

    /// The Linux 3.10 allocation path (`__alloc_pages_nodemask` / `__alloc_pages_slowpath`).
    async fn alloc_page_linux(&self, sim: &Sim, issuer: Issuer) {
        if self.take_page_above_low() {
            return;
        }
        let mut attempts = 0u32;
        loop {
            self.wakeup_kswapd(sim);
            // get_page_from_freelist(ALLOC_WMARK_MIN)
            if self.watermark_ok(self.watermarks.min) {
                self.take_free_page();
                return;
            }
            // __alloc_pages_direct_reclaim
            let progress = self.try_to_free_pages(sim, issuer).await;
            if progress > 0 && self.watermark_ok(self.watermarks.min) {
                self.take_free_page();
                return;
            }
            attempts += 1;
            if progress == 0 || attempts >= MAX_RECLAIM_RETRIES {
                // Out of memory: no OOM killer; take a reserve page, or wait for writeback.
                if self.state().nr_free > 0 {
                    self.state().stats.reserve_allocs += 1;
                    self.take_free_page();
                    return;
                }
                self.congestion_wait(sim, self.hz.over(10)).await;
                continue;
            }
            // should_alloc_retry: order-0 allocations retry.
            self.wait_iff_congested(sim, self.hz.over(50)).await;
        }
    }

    /// `throttle_direct_reclaim`: below half the min watermark, wait for kswapd.
    async fn throttle_direct_reclaim(&self, sim: &Sim) {
        while !self.pfmemalloc_watermark_ok() {
            // kswapd must be awake if processes are being throttled.
            self.kswapd_wake.wake(sim);
            self.state().stats.direct_throttles += 1;
            self.pfmemalloc_wait
                .wait(sim, WaitReason::ThrottleDirectReclaim, Blocker::None)
                .await;
        }
    }

    /// `try_to_free_pages` + `do_try_to_free_pages`: direct reclaim of `SWAP_CLUSTER_MAX`
    /// pages. Returns the pages freed, or 1 when none was but the zone is not
    /// `all_unreclaimable` ("don't OOM"), or 0.
    async fn try_to_free_pages(&self, sim: &Sim, issuer: Issuer) -> u64 {
        self.throttle_direct_reclaim(sim).await;
        self.state().stats.direct_reclaims += 1;
        let nr_to_reclaim = SWAP_CLUSTER_MAX as u64;
        let mut reclaimed = 0u64;
        let mut total_scanned = 0u64;
        for priority in (0..=DEF_PRIORITY).rev() {
            if self.state().zone.all_unreclaimable && priority != DEF_PRIORITY {
                // shrink_zones: "Let kswapd poll it".
                break;
            }
            let result = self
                .shrink_lruvec(sim, priority, Reclaimer::Direct, issuer)
                .await;
            reclaimed += result.reclaimed;
            total_scanned += result.scanned;
            if reclaimed >= nr_to_reclaim {
                return reclaimed;
            }
            // Write back as many pages as were scanned, so slow writers' pages go out.
            if total_scanned > nr_to_reclaim + nr_to_reclaim / 2 {
                self.wakeup_flusher_threads(sim, total_scanned);
            }
            if result.scanned > 0 && priority < DEF_PRIORITY - 2 {
                self.wait_iff_congested(sim, self.hz.over(10)).await;
            }
        }
        if reclaimed > 0 {
            reclaimed
        } else if self.state().zone.all_unreclaimable {
            0
        } else {
            1
        }
    }

    /// `shrink_lruvec`: scans `size >> priority` pages of each file list in batches;
    /// direct reclaim stops once it freed `SWAP_CLUSTER_MAX` below `DEF_PRIORITY`.
    async fn shrink_lruvec(
        &self,
        sim: &Sim,
        priority: u32,
        reclaimer: Reclaimer,
        issuer: Issuer,
    ) -> ShrinkResult {
        let (inactive, active) = self.lru_sizes();
        // get_scan_count (3.5+, 90126375d89a "mm/vmscan: push lruvec pointer into
        // get_scan_count()"): "Global kswapd is for zone balancing and it needs to scan a
        // minimum amount": for kswapd on a zone given up on, a list whose target shifts to
        // nothing is scanned SWAP_CLUSTER_MAX pages.
        let force_scan = reclaimer == Reclaimer::Kswapd && self.state().zone.all_unreclaimable;
        let target = |size: u64| match size >> priority {
            0 if force_scan => SWAP_CLUSTER_MAX as u64,
            scan => scan,
        };
        let mut nr_inactive = target(inactive);
        let mut nr_active = target(active);
        let nr_to_reclaim = match reclaimer {
            Reclaimer::Direct => SWAP_CLUSTER_MAX as u64,
            Reclaimer::Kswapd => u64::MAX,
        };
        let mut total = ShrinkResult::default();
        while nr_inactive > 0 || nr_active > 0 {
            if nr_inactive > 0 {
                let n = nr_inactive.min(SWAP_CLUSTER_MAX as u64);
                nr_inactive -= n;
                let result = self
                    .shrink_inactive_list(sim, n, priority, reclaimer, issuer)
                    .await;
                total.scanned += result.scanned;
                total.reclaimed += result.reclaimed;
                total.nr_dirty += result.nr_dirty;
                total.nr_writeback += result.nr_writeback;
            }
            if nr_active > 0 {
                let n = nr_active.min(SWAP_CLUSTER_MAX as u64);
                nr_active -= n;
                // inactive_file_is_low: deactivate while the inactive list is the smaller.
                let (inactive, active) = self.lru_sizes();
                if active > inactive {
                    self.shrink_active_list(sim, n, reclaimer).await;
                }
            }
            if total.reclaimed >= nr_to_reclaim && priority < DEF_PRIORITY {
                break;
            }
        }
        self.throttle_vm_writeout(sim).await;
        total
    }

    /// Charges reclaim's CPU for `pages` pages scanned to the reclaimer.
    async fn reclaim_cpu(&self, sim: &Sim, pages: u64, reclaimer: Reclaimer) {
        let reason = match reclaimer {
            Reclaimer::Direct => WaitReason::DirectReclaim,
            Reclaimer::Kswapd => WaitReason::OnCpu,
        };
        self.cpu
            .run_as(sim, self.cpu_costs.page_reclaim * pages, reason)
            .await;
    }

    /// `shrink_active_list`: moves up to `nr` pages from the active tail to the inactive head
    /// with their referenced bit cleared (no page-table references: none is rotated back).
    async fn shrink_active_list(&self, sim: &Sim, nr: u64, reclaimer: Reclaimer) {
        let mut moved = 0u64;
        {
            let mut state = self.state();
            for _ in 0..nr {
                let tail = state.lru[Lru::Active as usize].tail;
                if tail == super::NIL {
                    break;
                }
                state.lru_del(tail);
                state.pages[tail as usize].flags &= !pg::REFERENCED;
                state.lru_add_head(tail, Lru::Inactive);
                moved += 1;
            }
            state.zone.pages_scanned += moved;
        }
        self.reclaim_cpu(sim, moved, reclaimer).await;
    }

    /// `too_many_isolated`: a direct reclaimer finds more pages isolated than an eighth of the
    /// inactive list (`GFP_IOFS` callers: `inactive >>= 3`).
    fn too_many_isolated(&self) -> bool {
        let (inactive, _) = self.lru_sizes();
        self.state().zone.nr_isolated > inactive >> 3
    }

    /// `shrink_inactive_list` of up to `nr_to_scan` pages from the inactive tail.
    async fn shrink_inactive_list(
        &self,
        sim: &Sim,
        nr_to_scan: u64,
        priority: u32,
        reclaimer: Reclaimer,
        issuer: Issuer,
    ) -> ShrinkResult {
        if reclaimer == Reclaimer::Direct {
            while self.too_many_isolated() {
                self.state().stats.congestion_waits += 1;
                self.congestion_wait(sim, self.hz.over(10)).await;
            }
        }
        // isolate_lru_pages
        let mut candidates = Vec::with_capacity(SWAP_CLUSTER_MAX);
        {
            let mut state = self.state();
            self.isolate_inactive(&mut state, nr_to_scan, &mut candidates);
            let taken = candidates.len() as u64;
            state.zone.nr_isolated += taken;
            state.zone.pages_scanned += taken;
        }
        let taken = candidates.len() as u64;
        if taken == 0 {
            return ShrinkResult::default();
        }
        self.reclaim_cpu(sim, taken, reclaimer).await;
        let result = self
            .shrink_page_list(sim, &candidates, priority, reclaimer, issuer)
            .await;
        self.state().zone.nr_isolated -= taken;
        self.check(sim, "shrink_inactive_list");
        if result.nr_writeback > 0
            && result.nr_writeback >= taken >> (DEF_PRIORITY - priority).min(63)
        {
            self.wait_iff_congested(sim, self.hz.over(10)).await;
        }
        result
    }

    /// `shrink_page_list` over isolated `candidates` (see the module documentation); every
    /// page not freed goes back to the inactive head (`putback_inactive_pages`).
    async fn shrink_page_list(
        &self,
        sim: &Sim,
        candidates: &[Candidate],
        priority: u32,
        reclaimer: Reclaimer,
        issuer: Issuer,
    ) -> ShrinkResult {
        let mut order = Vec::with_capacity(candidates.len());
        self.policy
            .borrow_mut()
            .order_victims(candidates, priority, &mut order);
        let mut tried = vec![false; candidates.len()];
        let mut result = ShrinkResult::default();
        let mut to_pageout: Vec<PageId> = Vec::new();
        for &position in &order {
            assert!(
                position < candidates.len(),
                "policy chose a page out of range"
            );
            if std::mem::replace(&mut tried[position], true) {
                continue;
            }
            let id = candidates[position].id;
            if !self.still_cached(&candidates[position]) {
                // Truncated while isolated (reclaim's CPU time is a yield point): gone.
                continue;
            }
            if !self.trylock_page(id) {
                self.putback(id);
                continue;
            }
            result.scanned += 1;
            let page = self.page(id);
            if page.has(pg::WRITEBACK) {
                // Reclaim it when written (rotate_reclaimable_page).
                self.set_flags(id, pg::RECLAIM, 0);
                result.nr_writeback += 1;
                self.unlock_page(sim, id);
                self.putback(id);
                continue;
            }
            if page.has(pg::PINNED) {
                // A buffer the journal holds: try_to_release_page fails, the page stays.
                self.unlock_page(sim, id);
                self.putback(id);
                continue;
            }
            // page_check_references: TestClearPageReferenced.
            let referenced = page.has(pg::REFERENCED);
            self.set_flags(id, 0, pg::REFERENCED);
            if page.has(pg::DIRTY) {
                result.nr_dirty += 1;
                if reclaimer == Reclaimer::Direct || priority >= DEF_PRIORITY - 2 {
                    // Only kswapd writes file pages, and only under pressure: reclaim it
                    // immediately once the flusher has written it.
                    if reclaimer == Reclaimer::Direct {
                        self.state().stats.direct_reclaim_dirty_kept += 1;
                    }
                    self.set_flags(id, pg::RECLAIM, 0);
                    self.unlock_page(sim, id);
                    self.putback(id);
                    continue;
                }
                if referenced {
                    // PAGEREF_RECLAIM_CLEAN: a recently used dirty page stays.
                    self.unlock_page(sim, id);
                    self.putback(id);
                    continue;
                }
                to_pageout.push(id);
                continue;
            }
            // A clean page: __remove_mapping and free.
            let (ino, index) = (page.ino, page.index);
            {
                let mut state = self.state();
                state.delete_from_page_cache(id);
                state.stats.reclaimed_clean += 1;
            }
            self.wake_page(sim, ino, index);
            result.reclaimed += 1;
        }
        for (position, done) in tried.iter().enumerate() {
            if !done && self.still_cached(&candidates[position]) {
                self.putback(candidates[position].id);
            }
        }
        if !to_pageout.is_empty() {
            // pageout: asynchronous, the pages stay with PG_reclaim until written. Counted by
            // who calls it, so that a direct reclaimer reaching `pageout` shows.
            {
                let mut state = self.state();
                let written = to_pageout.len() as u64;
                match reclaimer {
                    Reclaimer::Kswapd => state.stats.pageout_kswapd += written,
                    Reclaimer::Direct => state.stats.pageout_direct += written,
                }
            }
            self.pageout(sim, &to_pageout, issuer).await;
            for &id in &to_pageout {
                self.putback(id);
            }
        }
        if result.reclaimed > 0 {
            self.free_wait.wake_all(sim);
        }
        result
    }

    /// `pageout` of locked dirty pages (off the LRU): each is marked `PG_reclaim` and moved to
    /// writeback; pages of one inode with consecutive blocks share a bio (the plug of
    /// `shrink_lruvec` merges them in the kernel). Asynchronous (`WB_SYNC_NONE`).
    async fn pageout(&self, sim: &Sim, pages: &[PageId], issuer: Issuer) {
        for &id in pages {
            self.set_flags(id, pg::RECLAIM, 0);
        }
        self.write_locked_pages(sim, pages, issuer).await;
    }

    /// Back to the inactive list's head (`putback_inactive_pages`).
    /// `isolate_lru_pages`: takes up to `nr` pages from the inactive tail into `out`.
    fn isolate_inactive(&self, state: &mut super::MmState, nr: u64, out: &mut Vec<Candidate>) {
        for _ in 0..nr {
            let tail = state.lru[Lru::Inactive as usize].tail;
            if tail == super::NIL {
                break;
            }
            state.lru_del(tail);
            let page = state.pages[tail as usize];
            let foreground = self
                .activity
                .as_ref()
                .is_some_and(|a| a.is_foreground(page.uid));
            out.push(Candidate {
                id: tail,
                ino: page.ino,
                index: page.index,
                flags: page.flags,
                uid: page.uid,
                foreground,
            });
        }
    }

    /// Whether an isolated page is still the one cached where it was isolated (truncation
    /// while isolated removes it, and its slot may be reused).
    fn still_cached(&self, c: &Candidate) -> bool {
        self.find_page(c.ino, c.index) == Some(c.id)
    }

    fn putback(&self, id: PageId) {
        let mut state = self.state();
        if state.pages[id as usize].lru == Lru::None {
            state.lru_add_head(id, Lru::Inactive);
        }
    }

    /// `throttle_vm_writeout`: while pages under writeback exceed 110 % of the hard dirty
    /// limit, `congestion_wait(HZ/10)`.
    pub(crate) async fn throttle_vm_writeout(&self, sim: &Sim) {
        loop {
            let (_, thresh) = self.dirty_limits();
            let limit = self.hard_dirty_limit(thresh);
            let limit = limit + limit / 10;
            if self.state().nr_writeback <= limit {
                return;
            }
            self.state().stats.congestion_waits += 1;
            self.congestion_wait(sim, self.hz.over(10)).await;
        }
    }

    /// kswapd (`kswapd` / `kswapd_try_to_sleep` / `balance_pgdat`).
    pub(crate) async fn kswapd(&self, sim: &Sim) {
        let issuer = Issuer {
            task: sim.current_task(),
            pid: super::KSWAPD_PID,
            uid: 0,
            foreground: false,
        };
        loop {
            self.kswapd_try_to_sleep(sim).await;
            self.balance_pgdat(sim, issuer).await;
        }
    }

    /// `prepare_kswapd_sleep`: balanced and nobody throttled (throttled tasks are woken).
    fn prepare_kswapd_sleep(&self, sim: &Sim) -> bool {
        if !self.pfmemalloc_wait.is_empty() {
            self.pfmemalloc_wait.wake_all(sim);
            return false;
        }
        self.pgdat_balanced()
    }

    /// `pgdat_balanced`: above the high watermark, or given up on (`all_unreclaimable`).
    fn pgdat_balanced(&self) -> bool {
        self.state().zone.all_unreclaimable || self.watermark_ok(self.watermarks.high)
    }

    /// `kswapd_try_to_sleep`: a short nap of `HZ/10`; if nobody woke it and the zone is still
    /// balanced, sleep until woken (`wakeup_kswapd`).
    async fn kswapd_try_to_sleep(&self, sim: &Sim) {
        if !self.prepare_kswapd_sleep(sim) {
            return;
        }
        let nap_end = sim.now() + self.jiffies_timeout(sim, self.hz.over(10).max(1));
        self.kswapd_wake.wait(sim, Some(nap_end)).await;
        let premature = sim.now() < nap_end;
        if !premature && self.prepare_kswapd_sleep(sim) {
            self.kswapd_wake.wait(sim, None).await;
        }
    }

    /// `balance_pgdat` of the one zone: reclaim from `DEF_PRIORITY` down until free pages
    /// are above the high watermark; a pass that freed `SWAP_CLUSTER_MAX` pages starts over
    /// at `DEF_PRIORITY`. A zone marked `all_unreclaimable` is still scanned once at
    /// `DEF_PRIORITY` per run (3.10 skips it only `if (zone->all_unreclaimable &&
    /// sc.priority != DEF_PRIORITY)`): without that poll, pages the flusher has cleaned since
    /// are never freed, and tasks throttled on `pfmemalloc_wait` ping-pong with kswapd at one
    /// instant.
    async fn balance_pgdat(&self, sim: &Sim, issuer: Issuer) {
        let gap = self.watermarks.low.min(
            self.config
                .managed_pages()
                .div_ceil(KSWAPD_ZONE_BALANCE_GAP_RATIO),
        );
        loop {
            self.state().stats.kswapd_runs += 1;
            let mut reclaimed = 0u64;
            let mut balanced = false;
            for priority in (0..=DEF_PRIORITY).rev() {
                // The highmem->dma pass for the zone that needs scanning: a zone given up on
                // (`all_unreclaimable`) is skipped only below DEF_PRIORITY, so each kswapd
                // run still polls it once at DEF_PRIORITY ("Mark the zone as dead and from
                // now on, only perform a short scan. Basically we're polling the zone for when
                // the problem goes away", balance_pgdat, 3.10); a zone at its high watermark
                // (`zone_balanced`) needs none.
                let dead = self.state().zone.all_unreclaimable;
                if (dead && priority != DEF_PRIORITY) || self.watermark_ok(self.watermarks.high) {
                    if !dead {
                        self.state().zone.congested = false;
                    }
                    balanced = true;
                    break;
                }
                if !self.watermark_ok(self.watermarks.high + gap) {
                    let result = self
                        .shrink_lruvec(sim, priority, Reclaimer::Kswapd, issuer)
                        .await;
                    reclaimed += result.reclaimed;
                    let mut state = self.state();
                    let reclaimable =
                        state.lru[Lru::Inactive as usize].len + state.lru[Lru::Active as usize].len;
                    // zone_reclaimable: scanned less than six times what it holds.
                    if state.zone.pages_scanned >= reclaimable * 6 {
                        state.zone.all_unreclaimable = true;
                    }
                }
                if self.watermark_ok(self.watermarks.high) {
                    self.state().zone.congested = false;
                }
                if !self.pfmemalloc_wait.is_empty() && self.pfmemalloc_watermark_ok() {
                    self.pfmemalloc_wait.wake_all(sim);
                }
                if self.pgdat_balanced() {
                    balanced = true;
                    break;
                }
                if reclaimed >= SWAP_CLUSTER_MAX as u64 {
                    break;
                }
            }
            if balanced {
                return;
            }
        }
    }

    // -----------------------------------------------------------------------------------------
    // FastTrack §3.2's allocation path (page_cache_lock = "global")
    // -----------------------------------------------------------------------------------------

    /// The global page-cache lock, under `page_cache_lock = "global"` (FastTrack §3.2: held
    /// across allocation, reclaim and the copies); `None` under the kernel's model.
    /// With FastTrack's PA a foreground issuer waits ahead of background ones.
    pub(crate) async fn page_cache_lock(
        &self,
        sim: &Sim,
        issuer: Issuer,
    ) -> Option<crate::sim::sync::MutexGuard> {
        if self.config.page_cache_lock != PageCacheLock::Global {
            return None;
        }
        Some(match self.alloc_lock.try_lock(sim) {
            Some(guard) => guard,
            None if self.pa_urgent(issuer) => self.alloc_lock.lock_urgent(sim).await,
            None => self.alloc_lock.lock(sim).await,
        })
    }

    /// FastTrack §4.2 (PA): whether `issuer` is the foreground app's, served before background
    /// tasks for the page-cache lock and the core. Service UIDs are never foreground.
    pub(crate) fn pa_urgent(&self, issuer: Issuer) -> bool {
        self.fasttrack_pa.get()
            && crate::fasttrack::is_app_uid(issuer.uid)
            && self
                .activity
                .as_ref()
                .is_some_and(|a| a.is_foreground(issuer.uid))
    }

    /// FastTrack §4.2 (PA): whether the holder `issuer` of the global lock must release it at
    /// the end of its segment: it is a background app's (not a service's, not foreground) and a
    /// foreground allocation waits.
    fn pa_must_yield(&self, issuer: Issuer) -> bool {
        self.fasttrack_pa.get()
            && crate::fasttrack::is_app_uid(issuer.uid)
            && !self.pa_urgent_any(issuer)
            && self.alloc_lock.urgent_waiters() > 0
    }

    /// `pa_urgent` without the PA switch: the issuer's app is in the foreground.
    fn pa_urgent_any(&self, issuer: Issuer) -> bool {
        self.activity
            .as_ref()
            .is_some_and(|a| a.is_foreground(issuer.uid))
    }

    /// FastTrack §3.2: with the global lock held (by [`Mm::alloc_page`]), the allocation
    /// reclaims, writing dirty pages and waiting for them.
    /// With PA, a background holder releases the lock between reclaim batches (its execution
    /// segments) when a foreground allocation waits, and queues for it again behind it (the
    /// foreground waiter is urgent). Returns the guard it holds at the end.
    async fn alloc_page_global(
        &self,
        sim: &Sim,
        issuer: Issuer,
        mut guard: Option<crate::sim::sync::MutexGuard>,
    ) -> Option<crate::sim::sync::MutexGuard> {
        let mut waited_for_writeback = 0u32;
        loop {
            if guard.is_some() && self.pa_must_yield(issuer) {
                self.state().stats.pa_yields += 1;
                drop(guard.take());
                guard = self.page_cache_lock(sim, issuer).await;
            }
            self.wakeup_kswapd(sim);
            if self.watermark_ok(self.watermarks.min) {
                break;
            }
            self.state().stats.direct_reclaims += 1;
            let reclaimed = self
                .shrink_zone_global(sim, SWAP_CLUSTER_MAX as u64, issuer)
                .await;
            if reclaimed > 0 {
                continue;
            }
            let (nr_free, in_progress) = {
                let state = self.state();
                (state.nr_free, state.nr_writeback + state.nr_dirty)
            };
            if in_progress > 0 && waited_for_writeback < MAX_RECLAIM_RETRIES {
                // Nothing reclaimable right now: wait for writeback (ours, the flusher's) to
                // end and free something.
                waited_for_writeback += 1;
                self.free_wait
                    .wait(sim, WaitReason::DirectReclaim, Blocker::None)
                    .await;
                continue;
            }
            // Dip into the reserve below the min watermark (no OOM killer in the model).
            assert!(
                nr_free > 0,
                "out of memory: the page cache has no page to reclaim"
            );
            self.state().stats.reserve_allocs += 1;
            break;
        }
        self.take_free_page();
        guard
    }

    /// FastTrack's direct reclaim: frees clean inactive pages oldest first (policy order) and
    /// writes the dirty, unreferenced ones, waits for them and frees them. Returns the pages
    /// freed.
    async fn shrink_zone_global(&self, sim: &Sim, nr_to_reclaim: u64, issuer: Issuer) -> u64 {
        let mut reclaimed = 0u64;
        let mut scanned = 0u64;
        let scan_limit = {
            let state = self.state();
            2 * (state.lru[Lru::Inactive as usize].len + state.lru[Lru::Active as usize].len)
        };
        let mut candidates = Vec::with_capacity(SWAP_CLUSTER_MAX);
        let mut order = Vec::with_capacity(SWAP_CLUSTER_MAX);
        while reclaimed < nr_to_reclaim && scanned < scan_limit {
            let (inactive, active) = self.lru_sizes();
            if inactive < active {
                self.shrink_active_list(sim, SWAP_CLUSTER_MAX as u64, Reclaimer::Direct)
                    .await;
            }
            candidates.clear();
            {
                let mut state = self.state();
                self.isolate_inactive(&mut state, SWAP_CLUSTER_MAX as u64, &mut candidates);
                state.zone.nr_isolated += candidates.len() as u64;
            }
            if candidates.is_empty() {
                break;
            }
            let taken = candidates.len() as u64;
            scanned += taken;
            self.reclaim_cpu(sim, taken, Reclaimer::Direct).await;
            order.clear();
            // FastTrack's global path has no priority loop: past one scan of the lists it
            // is as desperate as a low priority.
            let priority = if scanned > scan_limit / 2 {
                0
            } else {
                DEF_PRIORITY
            };
            self.policy
                .borrow_mut()
                .order_victims(&candidates, priority, &mut order);
            let mut tried = vec![false; candidates.len()];
            let mut to_write: Vec<PageId> = Vec::new();
            for &position in &order {
                assert!(
                    position < candidates.len(),
                    "policy chose a page out of range"
                );
                if std::mem::replace(&mut tried[position], true) {
                    continue;
                }
                let id = candidates[position].id;
                if !self.still_cached(&candidates[position]) {
                    // Truncated while isolated.
                    continue;
                }
                if reclaimed + to_write.len() as u64 >= nr_to_reclaim || !self.trylock_page(id) {
                    self.putback(id);
                    continue;
                }
                let page = self.page(id);
                if page.has(pg::WRITEBACK) {
                    self.set_flags(id, pg::RECLAIM, 0);
                    self.unlock_page(sim, id);
                    self.putback(id);
                    continue;
                }
                if page.has(pg::DIRTY) {
                    if page.has(pg::REFERENCED) {
                        // A recently used dirty page stays.
                        self.set_flags(id, 0, pg::REFERENCED);
                        self.unlock_page(sim, id);
                        self.putback(id);
                        continue;
                    }
                    to_write.push(id);
                    continue;
                }
                let (ino, index) = (page.ino, page.index);
                {
                    let mut state = self.state();
                    state.delete_from_page_cache(id);
                    state.stats.reclaimed_clean += 1;
                }
                self.wake_page(sim, ino, index);
                reclaimed += 1;
            }
            for (position, done) in tried.iter().enumerate() {
                if !done && self.still_cached(&candidates[position]) {
                    self.putback(candidates[position].id);
                }
            }
            if !to_write.is_empty() {
                reclaimed += self.pageout_and_free(sim, &to_write, issuer).await;
            }
            self.state().zone.nr_isolated -= taken;
            self.check(sim, "shrink_zone (global)");
        }
        if reclaimed > 0 {
            self.free_wait.wake_all(sim);
        }
        reclaimed
    }

    /// FastTrack's dirty-page eviction: writes the locked dirty pages (off the LRU), waits for
    /// each (reason `direct_reclaim`) and frees it. Returns the pages freed.
    async fn pageout_and_free(&self, sim: &Sim, pages: &[PageId], issuer: Issuer) -> u64 {
        let keys: Vec<(u64, u64)> = pages
            .iter()
            .map(|&id| {
                let page = self.page(id);
                (page.ino, page.index)
            })
            .collect();
        self.state().stats.pageout_direct += keys.len() as u64;
        self.write_locked_pages(sim, pages, issuer).await;
        let mut freed = 0;
        for (&id, &(ino, index)) in pages.iter().zip(&keys) {
            self.wait_on_page_bit(sim, ino, index, pg::WRITEBACK, WaitReason::DirectReclaim)
                .await;
            let page = self.page(id);
            let still_ours = self.find_page(ino, index) == Some(id) && page.lru == Lru::None;
            if !still_ours {
                continue;
            }
            if page.has(pg::LOCKED) || page.has(pg::DIRTY) || page.has(pg::WRITEBACK) {
                // Someone touched it meanwhile: keep it.
                self.putback(id);
                continue;
            }
            let mut state = self.state();
            state.delete_from_page_cache(id);
            state.stats.reclaimed_dirty += 1;
            freed += 1;
        }
        freed
    }
}

#[cfg(test)]
mod policy_tests {
    use super::*;

    fn candidate(id: PageId, dirty: bool, foreground: bool) -> Candidate {
        Candidate {
            id,
            ino: 1,
            index: u64::from(id),
            flags: if dirty { pg::DIRTY } else { 0 },
            uid: if foreground { 10_001 } else { 10_002 },
            foreground,
        }
    }

    #[test]
    fn fasttrack_reclaim_orders_bg_clean_bg_dirty_fg_clean_fg_dirty() {
        // Oldest first: FG dirty, FG clean, BG dirty, BG clean, FG clean, BG clean.
        let batch = [
            candidate(0, true, true),
            candidate(1, false, true),
            candidate(2, true, false),
            candidate(3, false, false),
            candidate(4, false, true),
            candidate(5, false, false),
        ];
        let mut order = Vec::new();
        FastTrackReclaim.order_victims(&batch, 0, &mut order);
        assert_eq!(order, vec![3, 5, 2, 1, 4, 0]);
        // Before the last pass the FG pages stay out: back to the list's head.
        order.clear();
        FastTrackReclaim.order_victims(&batch, DEF_PRIORITY, &mut order);
        assert_eq!(order, vec![3, 5, 2]);
        order.clear();
        FastTrackReclaim.order_victims(&batch, 1, &mut order);
        assert_eq!(order, vec![3, 5, 2]);
        // Linux: clean before dirty, oldest first, whoever owns them.
        order.clear();
        LinuxReclaim.order_victims(&batch, DEF_PRIORITY, &mut order);
        assert_eq!(order, vec![1, 3, 4, 5, 0, 2]);
    }
}
