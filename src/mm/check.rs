//! Page-state conservation, checked while a run goes (TigerBeetle-style: a violated invariant
//! stops the run with the task, the time and the state).
//!
//! The counters the model keeps incrementally (`NR_FILE_DIRTY`, `NR_WRITEBACK`, free pages,
//! the LRU lengths, `NR_ISOLATED_FILE`) are cross-checked at every page-state change the page
//! cache makes ([`Mm::check`], O(1)): free + cached + allocated-not-yet-cached pages = the
//! managed RAM (RAM - `reserved`); dirty and writeback pages fit in the cache; the LRU lists
//! hold every cached page but the isolated ones. Every [`FULL_SCAN_EVERY`] checks (or one per
//! managed page, if more) a full scan
//! ([`MmState::scan`]) recounts them from the pages: `nr_dirty` / `nr_writeback` equal the
//! pages flagged and the radix-tree tags, no page is dirty and under writeback at once, each
//! LRU list walks to its length with every page marked as on it, the pages off the LRU are at
//! most the isolated count, and each inode with dirty pages is on exactly the writeback list
//! it records.
//!
//! Checks are on in debug and test builds and, in release builds, when asked for
//! (`mobistack run --check`, [`crate::run::RunOptions::check`]). In the library's unit tests a
//! violation panics at once (the failing test names it); otherwise it is recorded, the
//! simulation stops, and the run ends with an error carrying the message ([`Mm::violation`]).
//!
//! Simplifications: the checks see the page cache's own state only (the block layer's "every
//! request completes once" is its own invariant).

use super::{pg, Lru, Mm, MmState, WbList, NIL};
use crate::sim::Sim;
use std::fmt::Write as _;

/// Cheap checks between two full scans, at least: a scan costs O(managed pages), so it runs
/// every `max(FULL_SCAN_EVERY, managed pages)` checks, which keeps the checks amortised O(1).
pub const FULL_SCAN_EVERY: u64 = 1 << 14;

impl MmState {
    /// Pages in the page cache (slab slots in use).
    pub(crate) fn cached_pages(&self) -> u64 {
        self.pages.len() as u64 - self.free_ids.len() as u64
    }

    /// The O(1) cross-checks of the incremental counters.
    pub(crate) fn cheap_check(&self, managed: u64) -> Result<(), String> {
        let cached = self.cached_pages();
        if self.nr_free + cached + self.nr_allocating != managed {
            return Err(format!(
                "free {} + cached {cached} + being allocated {} != managed RAM {managed} pages",
                self.nr_free, self.nr_allocating
            ));
        }
        if self.nr_dirty + self.nr_writeback > cached {
            return Err(format!(
                "dirty {} + writeback {} exceed the {cached} cached pages",
                self.nr_dirty, self.nr_writeback
            ));
        }
        let on_lru = self.lru[Lru::Inactive as usize].len + self.lru[Lru::Active as usize].len;
        if on_lru > cached || cached > on_lru + self.zone.nr_isolated {
            return Err(format!(
                "LRU lists hold {on_lru} pages and {} are isolated, but {cached} are cached",
                self.zone.nr_isolated
            ));
        }
        Ok(())
    }

    /// The full scan: recounts everything from the pages themselves.
    pub(crate) fn scan(&self) -> Result<(), String> {
        let mut free_slot = vec![false; self.pages.len()];
        for &id in &self.free_ids {
            free_slot[id as usize] = true;
        }
        let (mut dirty, mut writeback, mut off_lru) = (0u64, 0u64, 0u64);
        for (id, page) in self.pages.iter().enumerate() {
            if free_slot[id] {
                continue;
            }
            if page.has(pg::DIRTY) && page.has(pg::WRITEBACK) {
                return Err(format!(
                    "page {}:{} is dirty and under writeback",
                    page.ino, page.index
                ));
            }
            dirty += u64::from(page.has(pg::DIRTY));
            writeback += u64::from(page.has(pg::WRITEBACK));
            off_lru += u64::from(page.lru == Lru::None);
            let mapped = self
                .mappings
                .get(&page.ino)
                .and_then(|m| m.pages.get(page.index));
            if mapped != Some(id as super::PageId) {
                return Err(format!(
                    "page {}:{} (slot {id}) is not in its mapping",
                    page.ino, page.index
                ));
            }
        }
        if (dirty, writeback) != (self.nr_dirty, self.nr_writeback) {
            return Err(format!(
                "nr_dirty {} / nr_writeback {} but {dirty} / {writeback} pages are flagged",
                self.nr_dirty, self.nr_writeback
            ));
        }
        let (mut tagged_dirty, mut tagged_writeback, mut mapped) = (0u64, 0u64, 0u64);
        let (mut on_dirty, mut on_io, mut on_more_io) = (0usize, 0usize, 0usize);
        for (&ino, mapping) in &self.mappings {
            mapped += mapping.pages.len() as u64;
            tagged_dirty += mapping.dirty.len() as u64;
            tagged_writeback += mapping.writeback.len() as u64;
            for index in mapping.dirty.iter() {
                let flagged = mapping
                    .pages
                    .get(index)
                    .is_some_and(|id| self.pages[id as usize].has(pg::DIRTY));
                if !flagged {
                    return Err(format!("page {ino}:{index} tagged dirty but not PG_dirty"));
                }
            }
            for index in mapping.writeback.keys() {
                let flagged = mapping
                    .pages
                    .get(index)
                    .is_some_and(|id| self.pages[id as usize].has(pg::WRITEBACK));
                if !flagged {
                    return Err(format!(
                        "page {ino}:{index} tagged writeback but not PG_writeback"
                    ));
                }
            }
            let listed = match mapping.wb_list {
                WbList::None => false,
                WbList::Dirty => {
                    on_dirty += 1;
                    self.b_dirty.contains(&(mapping.dirtied_when, ino))
                }
                WbList::Io => {
                    on_io += 1;
                    self.b_io.contains(&ino)
                }
                WbList::MoreIo => {
                    on_more_io += 1;
                    self.b_more_io.contains(&ino)
                }
                WbList::Sync => self.wb_syncing == Some(ino),
            };
            if listed != (mapping.wb_list != WbList::None) {
                return Err(format!(
                    "inode {ino} records writeback list {:?} but is not on it",
                    mapping.wb_list
                ));
            }
            if !mapping.dirty.is_empty() && mapping.wb_list == WbList::None {
                return Err(format!(
                    "inode {ino} has dirty pages but is on no writeback list"
                ));
            }
        }
        if (on_dirty, on_io, on_more_io)
            != (self.b_dirty.len(), self.b_io.len(), self.b_more_io.len())
        {
            return Err(format!(
                "writeback lists hold {} / {} / {} inodes (b_dirty / b_io / b_more_io), inodes say {on_dirty} / {on_io} / {on_more_io}",
                self.b_dirty.len(),
                self.b_io.len(),
                self.b_more_io.len()
            ));
        }
        if (tagged_dirty, tagged_writeback) != (dirty, writeback) {
            return Err(format!(
                "{tagged_dirty} pages tagged dirty and {tagged_writeback} writeback, {dirty} / {writeback} flagged"
            ));
        }
        if mapped != self.cached_pages() {
            return Err(format!(
                "mappings hold {mapped} pages, {} are cached",
                self.cached_pages()
            ));
        }
        for list in [Lru::Inactive, Lru::Active] {
            let (mut walked, mut at) = (0u64, self.lru[list as usize].head);
            while at != NIL {
                let page = &self.pages[at as usize];
                if page.lru != list {
                    return Err(format!(
                        "page {}:{} on the {list:?} list says {:?}",
                        page.ino, page.index, page.lru
                    ));
                }
                walked += 1;
                if walked > self.lru[list as usize].len {
                    break;
                }
                at = page.next;
            }
            if walked != self.lru[list as usize].len {
                return Err(format!(
                    "the {list:?} list walks to {walked} pages, its length is {}",
                    self.lru[list as usize].len
                ));
            }
        }
        if off_lru > self.zone.nr_isolated {
            return Err(format!(
                "{off_lru} cached pages are off the LRU, only {} isolated",
                self.zone.nr_isolated
            ));
        }
        Ok(())
    }

    /// One line of state for a violation report.
    pub(crate) fn summary(&self) -> String {
        let mut out = String::new();
        let _ = write!(
            out,
            "free {} cached {} allocating {} dirty {} writeback {} inactive {} active {} isolated {} dirty inodes {}+{}+{}",
            self.nr_free,
            self.cached_pages(),
            self.nr_allocating,
            self.nr_dirty,
            self.nr_writeback,
            self.lru[Lru::Inactive as usize].len,
            self.lru[Lru::Active as usize].len,
            self.zone.nr_isolated,
            self.b_dirty.len(),
            self.b_io.len(),
            self.b_more_io.len()
        );
        out
    }
}

impl Mm {
    /// Turns the checks on (release builds: `mobistack run --check`).
    pub fn enable_checks(&self) {
        self.checks.set(true);
    }

    /// Whether a violation panics (test builds) or stops the run with an error.
    pub fn set_panic_on_violation(&self, panic: bool) {
        self.panic_on_violation.set(panic);
    }

    /// The first violation seen, if any.
    pub fn violation(&self) -> Option<String> {
        self.violation.borrow().clone()
    }

    /// Checks the page-state invariants after a change made at `site` (see the module
    /// documentation); a full scan every [`FULL_SCAN_EVERY`] calls.
    /// Inlined: with checks off (release runs without `--check`) it is one load and a branch
    /// at each of the write path's two calls per page, not a call.
    #[inline]
    pub(crate) fn check(&self, sim: &Sim, site: &'static str) {
        if self.checks.get() {
            self.check_now(sim, site);
        }
    }

    /// [`Mm::check`] with checks on.
    #[inline(never)]
    fn check_now(&self, sim: &Sim, site: &'static str) {
        if self.violation.borrow().is_some() {
            return;
        }
        let count = self.check_count.get() + 1;
        self.check_count.set(count);
        let result = {
            let state = self.state.borrow();
            state
                .cheap_check(self.config.managed_pages())
                .and_then(|()| {
                    let every = FULL_SCAN_EVERY.max(self.config.managed_pages());
                    if count.is_multiple_of(every) {
                        state.scan()
                    } else {
                        Ok(())
                    }
                })
                .map_err(|what| (what, state.summary()))
        };
        if let Err((what, state)) = result {
            let task = sim.current_task().map_or_else(
                || "-".to_string(),
                |t| format!("{} ({t})", sim.task_name(t)),
            );
            let message = format!(
                "page-cache invariant violated after {site}: {what}; task {task}, t = {:.6} s; state: {state}",
                sim.now() as f64 / 1e9
            );
            if self.panic_on_violation.get() {
                panic!("{message}");
            }
            *self.violation.borrow_mut() = Some(message);
            sim.stop();
        }
    }

    /// A full scan now (tests).
    pub fn scan_invariants(&self) -> Result<(), String> {
        let state = self.state.borrow();
        state
            .cheap_check(self.config.managed_pages())
            .and_then(|()| state.scan())
    }
}
