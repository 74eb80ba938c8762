//! The page allocator and page reclaim (mm/page_alloc.c, mm/vmscan.c of Linux 3.10, and the
//! allocation path FastTrack §3.2 describes).
//!
//! - `__alloc_pages` ([`Mm::alloc_page`]): every allocation takes the allocator's global lock.
//!   Below the low watermark kswapd is woken; at or below the min watermark the allocating task
//!   reclaims directly, *while holding the lock*, as FastTrack §3.2 describes ("a free-page
//!   allocation module first acquires a global lock ... during the page reclamation process"):
//!   so a foreground allocation waits (`alloc_pages`) behind a background task's reclaim.
//! - Watermarks (`__setup_per_zone_wmarks`): min = `min_free_kbytes` (sqrt(16 x KiB of RAM),
//!   clamped to 128 KiB..64 MiB), low = min x 5/4, high = min x 3/2.
//! - `shrink_zone`: when the inactive list is smaller than the active one
//!   (`inactive_file_is_low`), pages move from the active tail to the inactive head with their
//!   referenced bit cleared (`shrink_active_list`); then `SWAP_CLUSTER_MAX` (32) pages are
//!   isolated from the inactive tail and handed to the [`ReclaimPolicy`], which orders them.
//!   `shrink_page_list` then frees clean pages, skips locked pages and pages under writeback
//!   (marking the latter `PG_reclaim`, so they rotate to the tail when written), keeps
//!   referenced dirty pages (`PAGEREF_RECLAIM_CLEAN`), and writes the other dirty pages
//!   (`pageout`) and waits for them before freeing them, as FastTrack §3.2 describes ("eviction
//!   of dirty pages in the middle of calling alloc_pages()"). With `direct_reclaim_writes =
//!   false`, direct reclaim behaves like 3.10's `shrink_page_list` instead ("Only kswapd can
//!   writeback filesystem pages"): it tags dirty pages `PG_reclaim`, kicks the flusher and
//!   waits for writeback to free something.
//! - kswapd (`balance_pgdat`): woken below the low watermark, reclaims until the high one.
//!
//! Simplifications: one zone, no swap (file pages only), no `too_many_isolated` throttling, no
//! priority-scaled scanning (a pass scans at most twice the inactive list); an allocation that
//! finds nothing to reclaim and nothing under writeback takes a reserve page rather than
//! invoking the OOM killer, and panics only if RAM is truly exhausted (a configuration error
//! the scenario validation prevents by requiring RAM above the watermarks).

use super::writeback::{SyncMode, WbRange};
use super::{pg, Issuer, Lru, Mm, PageId, ReclaimPolicyKind, VmConfig};
use crate::sim::{Blocker, Sim, WaitReason};
use crate::units::{Nanos, NS_PER_MS, PAGE_SIZE};

/// `SWAP_CLUSTER_MAX` (include/linux/swap.h): pages isolated and reclaimed per batch.
pub const SWAP_CLUSTER_MAX: usize = 32;
/// Waits for writeback an allocation makes before it dips into the reserve below the min
/// watermark (the model has no OOM killer; Linux retries `should_alloc_retry` similarly).
pub const MAX_RECLAIM_WAITS: u32 = 1024;
/// kswapd's back-off when a pass frees nothing: `congestion_wait(BLK_RW_ASYNC, HZ/10)`.
pub const CONGESTION_WAIT_NS: Nanos = 100 * NS_PER_MS;

/// Zone watermarks in pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watermarks {
    pub min: u64,
    pub low: u64,
    pub high: u64,
}

impl Watermarks {
    pub fn new(config: &VmConfig) -> Watermarks {
        let min_kib = if config.min_free > 0 {
            config.min_free / 1024
        } else {
            // init_per_zone_wmark_min: int_sqrt(lowmem_kbytes * 16), clamped to [128, 65536].
            let lowmem_kib = config.managed_pages() * PAGE_SIZE / 1024;
            ((lowmem_kib * 16) as f64)
                .sqrt()
                .floor()
                .clamp(128.0, 65536.0) as u64
        };
        let min = (min_kib * 1024 / PAGE_SIZE).max(1);
        Watermarks {
            min,
            low: min + min / 4,
            high: min + min / 2,
        }
    }
}

/// A page isolated for reclaim, as the policy sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    pub id: PageId,
    /// Page flags (see [`super::pg`]).
    pub flags: u16,
    /// The app that last touched the page.
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
    /// positions left out go back to the inactive list untouched.
    fn order_victims(&mut self, candidates: &[Candidate], order: &mut Vec<usize>);
}

/// Linux's preference: oldest first, clean pages before dirty ones (the dirty ones are written
/// only when clean pages do not suffice).
#[derive(Debug, Default)]
pub struct LinuxReclaim;

impl ReclaimPolicy for LinuxReclaim {
    fn name(&self) -> &str {
        "linux"
    }

    fn order_victims(&mut self, candidates: &[Candidate], order: &mut Vec<usize>) {
        let dirty = |c: &Candidate| c.flags & pg::DIRTY != 0;
        order.extend((0..candidates.len()).filter(|&i| !dirty(&candidates[i])));
        order.extend((0..candidates.len()).filter(|&i| dirty(&candidates[i])));
    }
}

pub fn policy_for(kind: ReclaimPolicyKind) -> Box<dyn ReclaimPolicy> {
    match kind {
        ReclaimPolicyKind::Linux => Box::new(LinuxReclaim),
    }
}

impl Mm {
    /// `__alloc_pages` of one page for the page cache: returns once a free page is charged to
    /// the caller (who then inserts it with `add_to_page_cache`).
    pub(crate) async fn alloc_page(&self, sim: &Sim, issuer: Issuer) {
        let guard = match self.alloc_lock.try_lock(sim) {
            Some(guard) => guard,
            None => self.alloc_lock.lock(sim).await,
        };
        let mut waited_for_writeback = 0u32;
        loop {
            let nr_free = self.state().nr_free;
            if nr_free < self.watermarks.low {
                // wakeup_kswapd
                self.kswapd_wake.wake(sim);
            }
            if nr_free > self.watermarks.min {
                break;
            }
            // __alloc_pages_direct_reclaim, under the allocator lock (FastTrack §3.2).
            self.state().stats.direct_reclaims += 1;
            let reclaimed = self
                .shrink_zone(sim, SWAP_CLUSTER_MAX as u64, issuer, true)
                .await;
            if reclaimed > 0 {
                continue;
            }
            let (nr_free, in_progress) = {
                let state = self.state();
                (state.nr_free, state.nr_writeback + state.nr_dirty)
            };
            if in_progress > 0 && waited_for_writeback < MAX_RECLAIM_WAITS {
                // Nothing reclaimable right now: wait for writeback (ours, the flusher's) to
                // end and free something (`wait_iff_congested` / `congestion_wait`).
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
            break;
        }
        let mut state = self.state();
        assert!(state.nr_free > 0, "allocation with no free page");
        state.nr_free -= 1;
        drop(state);
        drop(guard);
    }

    /// `shrink_active_list`: moves up to `nr` pages from the active tail to the inactive head.
    fn shrink_active_list(&self, nr: usize) {
        let mut state = self.state();
        for _ in 0..nr {
            let tail = state.lru[Lru::Active as usize].tail;
            if tail == super::NIL {
                break;
            }
            state.lru_del(tail);
            state.pages[tail as usize].flags &= !pg::REFERENCED;
            state.lru_add_head(tail, Lru::Inactive);
        }
    }

    /// `shrink_zone` / `shrink_inactive_list` + `shrink_page_list`: reclaims up to
    /// `nr_to_reclaim` pages. Returns the pages freed.
    pub(crate) async fn shrink_zone(
        &self,
        sim: &Sim,
        nr_to_reclaim: u64,
        issuer: Issuer,
        direct: bool,
    ) -> u64 {
        let mut reclaimed = 0u64;
        let mut scanned = 0u64;
        let scan_limit = {
            let state = self.state();
            2 * (state.lru[Lru::Inactive as usize].len + state.lru[Lru::Active as usize].len)
        };
        let mut dirty_skipped = 0u64;
        let mut candidates = Vec::with_capacity(SWAP_CLUSTER_MAX);
        let mut order = Vec::with_capacity(SWAP_CLUSTER_MAX);
        while reclaimed < nr_to_reclaim && scanned < scan_limit {
            let (inactive, active) = self.lru_sizes();
            if inactive < active {
                self.shrink_active_list(SWAP_CLUSTER_MAX);
            }
            // isolate_lru_pages from the inactive tail.
            candidates.clear();
            {
                let mut state = self.state();
                for _ in 0..SWAP_CLUSTER_MAX {
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
                    candidates.push(Candidate {
                        id: tail,
                        flags: page.flags,
                        uid: page.uid,
                        foreground,
                    });
                }
            }
            if candidates.is_empty() {
                break;
            }
            scanned += candidates.len() as u64;
            order.clear();
            self.policy
                .borrow_mut()
                .order_victims(&candidates, &mut order);
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
                if reclaimed + to_write.len() as u64 >= nr_to_reclaim {
                    self.putback(id, false);
                    continue;
                }
                let page = self.page(id);
                if page.has(pg::LOCKED) {
                    self.putback(id, false);
                    continue;
                }
                if page.has(pg::WRITEBACK) {
                    self.set_flags(id, pg::RECLAIM, 0);
                    self.putback(id, false);
                    continue;
                }
                if page.has(pg::DIRTY) {
                    if page.has(pg::REFERENCED) {
                        // PAGEREF_RECLAIM_CLEAN: a recently used dirty page stays.
                        self.set_flags(id, 0, pg::REFERENCED);
                        self.putback(id, false);
                        continue;
                    }
                    if direct && !self.config.direct_reclaim_writes {
                        // 3.10: only kswapd writes file pages; mark it for immediate reclaim
                        // once the flusher has written it.
                        self.set_flags(id, pg::RECLAIM, 0);
                        self.putback(id, false);
                        dirty_skipped += 1;
                        continue;
                    }
                    assert!(self.trylock_page(id));
                    to_write.push(id);
                    continue;
                }
                // A clean, unlocked page: __remove_mapping and free.
                let mut state = self.state();
                state.delete_from_page_cache(id);
                state.stats.reclaimed_clean += 1;
                reclaimed += 1;
            }
            for (position, done) in tried.iter().enumerate() {
                if !done {
                    self.putback(candidates[position].id, false);
                }
            }
            if !to_write.is_empty() {
                reclaimed += self.pageout_and_free(sim, &to_write, issuer, direct).await;
            }
        }
        if dirty_skipped > 0 {
            // do_try_to_free_pages: ask the flusher to write what reclaim could not.
            self.wakeup_flusher_threads(sim, scanned);
        }
        if reclaimed > 0 {
            self.free_wait.wake_all(sim);
        }
        reclaimed
    }

    /// Back to the inactive list (head), as `putback_lru_page` does for kept pages.
    fn putback(&self, id: PageId, tail: bool) {
        let mut state = self.state();
        if tail {
            state.lru_add_tail(id, Lru::Inactive);
        } else {
            state.lru_add_head(id, Lru::Inactive);
        }
    }

    /// `pageout` of locked dirty pages (off the LRU), waiting for the writes, then freeing
    /// them. Returns the pages freed.
    async fn pageout_and_free(
        &self,
        sim: &Sim,
        pages: &[PageId],
        issuer: Issuer,
        direct: bool,
    ) -> u64 {
        // Write each page through the same bio builder as writeback (consecutive pages of one
        // inode share a bio). The pages are locked by us: unlock them so `writepages` can take
        // them, off the LRU so nobody else reclaims them meanwhile.
        let mut keys: Vec<(u64, u64)> = pages
            .iter()
            .map(|&id| {
                let page = self.page(id);
                (page.ino, page.index)
            })
            .collect();
        keys.sort_unstable();
        {
            let mut state = self.state();
            if direct {
                state.stats.pageout_direct += keys.len() as u64;
            } else {
                state.stats.pageout_kswapd += keys.len() as u64;
            }
        }
        for &id in pages {
            self.unlock_page(sim, id);
        }
        let mut start = 0;
        while start < keys.len() {
            let ino = keys[start].0;
            let end = keys[start..]
                .iter()
                .position(|k| k.0 != ino)
                .map_or(keys.len(), |p| start + p);
            let indexes: Vec<u64> = keys[start..end].iter().map(|k| k.1).collect();
            let count = indexes.len() as u64;
            self.writepages(
                sim,
                ino,
                SyncMode::None,
                count,
                WbRange::Pages(indexes),
                issuer,
                false,
            )
            .await;
            start = end;
        }
        let mut freed = 0;
        // A direct reclaimer's waits are accounted as direct reclaim (the allocation stalled
        // in reclaim), kswapd's as writeback waits.
        let reason = if direct {
            WaitReason::DirectReclaim
        } else {
            WaitReason::PageWriteback
        };
        for &(ino, index) in &keys {
            self.wait_on_page_bit(sim, ino, index, pg::WRITEBACK, reason)
                .await;
            let Some(id) = self.find_page(ino, index) else {
                continue;
            };
            let page = self.page(id);
            if page.has(pg::LOCKED) || page.has(pg::DIRTY) || page.has(pg::WRITEBACK) {
                // Someone touched it meanwhile: keep it.
                if page.lru == Lru::None {
                    self.putback(id, false);
                }
                continue;
            }
            let mut state = self.state();
            if page.lru != Lru::None {
                // mark_page_accessed moved it meanwhile; leave it.
                continue;
            }
            state.delete_from_page_cache(id);
            state.stats.reclaimed_dirty += 1;
            freed += 1;
        }
        freed
    }

    /// kswapd (`kswapd` / `balance_pgdat`).
    pub(crate) async fn kswapd(&self, sim: &Sim) {
        let issuer = Issuer {
            task: sim.current_task(),
            pid: super::KSWAPD_PID,
            uid: 0,
            foreground: false,
        };
        loop {
            if self.state().nr_free >= self.watermarks.low {
                self.kswapd_wake.wait(sim, None).await;
                continue;
            }
            self.state().stats.kswapd_runs += 1;
            while self.state().nr_free < self.watermarks.high {
                let reclaimed = self
                    .shrink_zone(sim, SWAP_CLUSTER_MAX as u64, issuer, false)
                    .await;
                if reclaimed == 0 {
                    sim.sleep(CONGESTION_WAIT_NS).await;
                }
            }
        }
    }
}
