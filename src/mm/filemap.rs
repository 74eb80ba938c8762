//! Reads, buffered writes, sync writeback and truncation over the page cache (mm/filemap.c,
//! mm/readahead.c, mm/truncate.c, fs/buffer.c of Linux 3.10).
//!
//! - Reads (`do_generic_file_read`): a missing page starts synchronous readahead
//!   (`page_cache_sync_readahead`), a page marked `PG_readahead` starts the next window
//!   asynchronously (`page_cache_async_readahead`), and a page that is not uptodate is waited on
//!   in `wait_on_page_locked` (reason `lock_page`) until its read completes. The window follows
//!   `ondemand_readahead`: initial size from the request (x4 or x2, `get_init_ra_size`), doubled
//!   (x4 when small) on each sequential step (`get_next_ra_size`) up to `read_ahead_kb`; a
//!   random read reads just the requested pages.
//! - Writes (`generic_perform_write`): per page, `grab_cache_page_write_begin` (find and lock,
//!   or allocate and add), `wait_on_page_writeback` when the page is being written (QASIO
//!   D_data; unconditional, as 3.10.9's `ext4_da_write_begin` does after `ext4_journal_start`:
//!   "In case writeback began while the page was unlocked". Not `wait_for_stable_page`, which
//!   waits only on devices with `BDI_CAP_STABLE_WRITES`; the ext4 issue moves the wait inside
//!   the journal handle), `block_write_begin` (a partial write to a page that
//!   is not uptodate reads it first, synchronously, unless it is a hole or past EOF; a block is
//!   allocated with `get_block(create)`), then `write_end` (uptodate, dirty, unlock) and
//!   `balance_dirty_pages_ratelimited`.
//! - fsync's data part (`filemap_write_and_wait_range`): writes the dirty pages of the range
//!   with synchronous bios from the caller's context (`WB_SYNC_ALL`), then waits for every
//!   page of the range under writeback, including those the flusher submitted asynchronously
//!   before (QASIO D_sync).
//!
//! CPU time (`[stack.cpu]`): each page a read returns costs its `copy_to_user` (no page lock
//! held), each page a write fills its `copy_from_user` (page locked, under the caller's
//! `i_mutex`), each new page its allocation. Under `page_cache_lock = "global"` (FastTrack
//! §3.2) the copies and allocations are made holding the global page-cache lock.
//!
//! Simplifications: reads never fail; no `PG_error`; a partial-page read before a write reads
//! the whole page; the page cache keeps no buffer heads (a page is one block).

use super::bio::{BioRequest, IoPurpose, PageSpan};
use super::writeback::{DirtyThrottleState, SyncMode, WbRange, MAX_BIO_PAGES};
use super::Ino;
use super::{pg, FsToken, Issuer, Lru, Mm, PageCacheLock, PageId};
use crate::dev::{IoFlags, IoOp};
use crate::errno::Errno;
use crate::sim::{Sim, WaitReason};
use crate::units::PAGE_SIZE;

/// Per-open-file readahead state (`struct file_ra_state`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FileRaState {
    pub start: u64,
    pub size: u64,
    pub async_size: u64,
    /// Page index of the previous read (`prev_pos`).
    pub prev_index: Option<u64>,
}

/// `get_init_ra_size`.
fn init_ra_size(request: u64, max: u64) -> u64 {
    let size = request.max(1).next_power_of_two();
    let size = if size <= max / 32 {
        size * 4
    } else if size <= max / 4 {
        size * 2
    } else {
        max
    };
    size.min(max).max(1)
}

/// `get_next_ra_size`.
fn next_ra_size(current: u64, max: u64) -> u64 {
    let size = if current < max / 16 {
        current * 4
    } else {
        current * 2
    };
    size.min(max).max(1)
}

/// Most retries of one page lookup before the model is declared broken.
const MAX_PAGE_RETRIES: u32 = 10_000;

impl Mm {
    fn ra_max_pages(&self) -> u64 {
        (self.config.read_ahead / PAGE_SIZE).max(1)
    }

    /// Submits one bio and waits for it (`submit_bio_wait`): the caller is blocked in
    /// `submit_bio_wait` on the request.
    pub async fn submit_wait(&self, sim: &Sim, bio: BioRequest) {
        super::bio::submit_bio_wait(&*self.bdev, sim, bio).await;
    }

    /// Reads pages `[start, start + count)` that exist, are locked and not uptodate: holes are
    /// zeroed at once, the rest read in bios of consecutive blocks; completion marks them
    /// uptodate and unlocks them.
    async fn read_locked_pages(&self, sim: &Sim, ino: Ino, pages: &[u64], issuer: Issuer) {
        let mut current: Option<(u64, u64, u32)> = None;
        for &index in pages {
            let block = self.map_block(ino, index);
            let Some(block) = block else {
                let id = self
                    .find_page(ino, index)
                    .expect("a locked page stays cached");
                self.set_flags(id, pg::UPTODATE, 0);
                self.unlock_page(sim, id);
                continue;
            };
            match current {
                Some((first, first_block, count))
                    if first + u64::from(count) == index
                        && first_block + u64::from(count) == block
                        && count < MAX_BIO_PAGES =>
                {
                    current = Some((first, first_block, count + 1));
                }
                _ => {
                    if let Some(run) = current.take() {
                        self.submit_read(sim, ino, run, issuer).await;
                    }
                    current = Some((index, block, 1));
                }
            }
        }
        if let Some(run) = current {
            self.submit_read(sim, ino, run, issuer).await;
        }
    }

    async fn submit_read(&self, sim: &Sim, ino: Ino, run: (u64, u64, u32), issuer: Issuer) {
        let (index, block, count) = run;
        let span = PageSpan { ino, index, count };
        self.state().stats.pages_read += u64::from(count);
        let purpose = self.purpose_of(span.ino, span.index);
        let bio =
            BioRequest::for_pages(IoOp::Read, block, count, SYNC, issuer, Some(span), purpose);
        let mm = self.rc();
        let request = self
            .bdev
            .submit_bio(
                sim,
                bio,
                Box::new(move |sim, _| {
                    // mpage_end_io: SetPageUptodate + unlock_page.
                    for index in span.index..span.index + u64::from(span.count) {
                        let id = mm
                            .find_page(span.ino, index)
                            .expect("a page being read stays");
                        mm.state()
                            .mappings
                            .get_mut(&span.ino)
                            .map(|mapping| mapping.reading.remove(index));
                        mm.set_flags(id, pg::UPTODATE, 0);
                        mm.unlock_page(sim, id);
                    }
                }),
            )
            .await;
        // Remember which request reads each page, unless it already completed.
        let mut state = self.state();
        let super::MmState {
            mappings, pages, ..
        } = &mut *state;
        if let Some(mapping) = mappings.get_mut(&ino) {
            for index in span.index..span.index + u64::from(span.count) {
                let reading = mapping
                    .pages
                    .get(index)
                    .is_some_and(|id| !pages[id as usize].has(pg::UPTODATE));
                if reading {
                    mapping.reading.insert(index, request);
                }
            }
        }
    }

    /// `__do_page_cache_readahead`: adds the missing pages of `[start, start + count)` (up to
    /// EOF page `last`), marks `PG_readahead` at `start + count - async_size`, and starts their
    /// reads without waiting.
    #[allow(clippy::too_many_arguments)]
    async fn do_readahead(
        &self,
        sim: &Sim,
        ino: Ino,
        start: u64,
        count: u64,
        async_size: u64,
        last: u64,
        issuer: Issuer,
    ) {
        let marker = (async_size > 0).then(|| start + count - async_size);
        let mut added = Vec::new();
        for index in start..(start + count).min(last + 1) {
            if self.find_page(ino, index).is_some() {
                continue;
            }
            let flags = if Some(index) == marker {
                pg::READAHEAD
            } else {
                0
            };
            if self
                .add_new_page(sim, ino, index, issuer, flags)
                .await
                .is_none()
            {
                continue;
            }
            self.state().stats.readahead_pages += 1;
            added.push(index);
        }
        self.read_locked_pages(sim, ino, &added, issuer).await;
    }

    /// `ondemand_readahead` for a miss (`hit_marker == false`) or a `PG_readahead` hit.
    #[allow(clippy::too_many_arguments)]
    async fn ondemand_readahead(
        &self,
        sim: &Sim,
        ino: Ino,
        index: u64,
        request: u64,
        last: u64,
        ra: &mut FileRaState,
        hit_marker: bool,
        issuer: Issuer,
    ) {
        let max = self.ra_max_pages();
        let sequential_window = ra.size > 0
            && (index == ra.start + ra.size - ra.async_size || index == ra.start + ra.size);
        if hit_marker || sequential_window {
            ra.start += ra.size;
            ra.size = next_ra_size(ra.size, max);
            ra.async_size = ra.size;
        } else if index == 0 || ra.prev_index.is_some_and(|p| index <= p + 1 && index >= p) {
            // initial_readahead
            ra.start = index;
            ra.size = init_ra_size(request, max);
            ra.async_size = if ra.size > request {
                ra.size - request
            } else {
                ra.size
            };
        } else {
            // A random read: just the requested pages, no window.
            let count = request.min(max);
            self.do_readahead(sim, ino, index, count, 0, last, issuer)
                .await;
            return;
        }
        let (start, size, async_size) = (ra.start, ra.size, ra.async_size);
        self.do_readahead(sim, ino, start, size, async_size, last, issuer)
            .await;
    }

    /// `do_generic_file_read` of bytes `[pos, pos + len)`, already clipped to the file size
    /// `isize`. Waits until every page is uptodate.
    #[allow(clippy::too_many_arguments)]
    pub async fn file_read(
        &self,
        sim: &Sim,
        ino: Ino,
        pos: u64,
        len: u64,
        isize: u64,
        ra: &mut FileRaState,
        issuer: Issuer,
    ) {
        if len == 0 || pos >= isize {
            return;
        }
        let first = pos / PAGE_SIZE;
        let last_req = (pos + len - 1) / PAGE_SIZE;
        let last = (isize - 1) / PAGE_SIZE;
        for index in first..=last_req.min(last) {
            let mut tries = 0;
            loop {
                tries += 1;
                assert!(
                    tries < MAX_PAGE_RETRIES,
                    "page {ino}:{index} never became readable"
                );
                let Some(id) = self.find_page(ino, index) else {
                    let request = last_req.min(last) - index + 1;
                    self.ondemand_readahead(sim, ino, index, request, last, ra, false, issuer)
                        .await;
                    continue;
                };
                let page = self.page(id);
                if page.has(pg::READAHEAD) {
                    self.set_flags(id, 0, pg::READAHEAD);
                    let request = last_req.min(last) - index + 1;
                    self.ondemand_readahead(sim, ino, index, request, last, ra, true, issuer)
                        .await;
                }
                if !self
                    .find_page(ino, index)
                    .is_some_and(|id| self.page(id).has(pg::UPTODATE))
                {
                    if self
                        .find_page(ino, index)
                        .is_some_and(|id| !self.page(id).has(pg::LOCKED))
                    {
                        // Not uptodate and nobody reading it (a failed partial write left it):
                        // lock and read it (`readpage`).
                        if let Some(id) = self.lock_page(sim, ino, index).await {
                            if self.page(id).has(pg::UPTODATE) {
                                self.unlock_page(sim, id);
                            } else {
                                self.read_locked_pages(sim, ino, &[index], issuer).await;
                            }
                        }
                    }
                    // wait_on_page_locked: the read in flight.
                    self.wait_on_page_bit(sim, ino, index, pg::LOCKED, WaitReason::PageLock)
                        .await;
                    continue;
                }
                let mut state = self.state();
                state.mark_page_accessed(id);
                self.touch_owner(&mut state, id, issuer.uid);
                break;
            }
            // file_read_actor: copy_to_user of this page's part of the request, holding only a
            // page reference (no page lock).
            let page_start = index * PAGE_SIZE;
            let bytes = (pos + len).min(page_start + PAGE_SIZE).min(isize) - pos.max(page_start);
            self.copy_user_bytes(sim, bytes, issuer).await;
            ra.prev_index = Some(index);
        }
        self.check(sim, "do_generic_file_read");
    }

    /// `grab_cache_page_write_begin`: the page locked, created (not uptodate) if missing.
    async fn grab_cache_page(&self, sim: &Sim, ino: Ino, index: u64, issuer: Issuer) -> PageId {
        self.grab_cache_page_tries(sim, ino, index, issuer, MAX_PAGE_RETRIES)
            .await
    }

    /// [`Mm::grab_cache_page`] with its common case unnested: a cached page whose lock is
    /// free, or a missing one whose allocation finds a free page above the low watermark
    /// (Linux's page-cache locking), is grabbed here, the allocation's CPU segment run at once
    /// ([`crate::sim::cpu::Cpu::run_now`]) or awaited directly; anything else goes through
    /// `grab_cache_page` (the allocation's attempt counted as its first). The same steps in the
    /// same order: a simulator speed-up (the write path's futures nest less).
    async fn grab_cache_page_write(
        &self,
        sim: &Sim,
        ino: Ino,
        index: u64,
        issuer: Issuer,
    ) -> PageId {
        match self.trylock_cached_page(ino, index) {
            Some(Some(id)) => return id,
            Some(None) => {}
            None if self.config.page_cache_lock == PageCacheLock::Linux
                && self.take_page_above_low() =>
            {
                let cost = self.cpu_costs.page_alloc;
                if !self.cpu.run_now(sim, cost, WaitReason::OnCpu) {
                    self.cpu.run_urgent(sim, cost, self.pa_urgent(issuer)).await;
                }
                if let Some(id) = self.insert_new_page(sim, ino, index, issuer, 0) {
                    return id;
                }
                return self
                    .grab_cache_page_tries(sim, ino, index, issuer, MAX_PAGE_RETRIES - 1)
                    .await;
            }
            None => {}
        }
        self.grab_cache_page(sim, ino, index, issuer).await
    }

    /// `grab_cache_page` with at most `tries` attempts.
    async fn grab_cache_page_tries(
        &self,
        sim: &Sim,
        ino: Ino,
        index: u64,
        issuer: Issuer,
        tries: u32,
    ) -> PageId {
        for _ in 0..tries {
            // lock_page, its future only when the page is cached and locked.
            match self.trylock_cached_page(ino, index) {
                Some(Some(id)) => return id,
                Some(None) => {
                    if let Some(id) = self.lock_page(sim, ino, index).await {
                        return id;
                    }
                }
                None => {}
            }
            if let Some(id) = self.add_new_page(sim, ino, index, issuer, 0).await {
                return id;
            }
        }
        panic!("page {ino}:{index} could never be grabbed");
    }

    /// Allocates a page (which may sleep in reclaim) and adds it at (ino, index) with `flags`;
    /// `None`, with the page given back, if another task added one there meanwhile.
    pub(super) async fn add_new_page(
        &self,
        sim: &Sim,
        ino: Ino,
        index: u64,
        issuer: Issuer,
        flags: u16,
    ) -> Option<PageId> {
        // The allocation, with its own work and add_to_page_cache_lru on the CPU.
        self.alloc_page(sim, issuer).await;
        self.insert_new_page(sim, ino, index, issuer, flags)
    }

    /// The end of [`Mm::add_new_page`], after the allocation: the page added at (ino, index),
    /// or given back (`None`) if another task added one there meanwhile.
    fn insert_new_page(
        &self,
        sim: &Sim,
        ino: Ino,
        index: u64,
        issuer: Issuer,
        flags: u16,
    ) -> Option<PageId> {
        let id = {
            let mut state = self.state();
            state.nr_allocating -= 1;
            let id = state.add_to_page_cache_if_vacant(ino, index, issuer.uid, flags);
            if id.is_none() {
                state.nr_free += 1;
            }
            id
        };
        self.check(sim, "add_to_page_cache");
        id
    }

    /// `copy_to_user` / `copy_from_user` of `bytes` bytes of a page: CPU time, under the global
    /// page-cache lock when FastTrack's model has one.
    async fn copy_user_bytes(&self, sim: &Sim, bytes: u64, issuer: Issuer) {
        // (The lock's future only under the global lock: the copy is two per page written.)
        let lock = match self.config.page_cache_lock {
            PageCacheLock::Global => self.page_cache_lock(sim, issuer).await,
            PageCacheLock::Linux => None,
        };
        self.cpu
            .run_urgent(sim, self.cpu_costs.copy_ns(bytes), self.pa_urgent(issuer))
            .await;
        drop(lock);
    }

    /// Whether [`Mm::prepare_page_write`] has nothing to do for a write of `bytes` bytes to
    /// page `id`: not under writeback, and uptodate or written whole.
    fn page_write_ready(&self, id: PageId, bytes: u64) -> bool {
        let page = self.page(id);
        !page.has(pg::WRITEBACK) && (page.has(pg::UPTODATE) || bytes == PAGE_SIZE)
    }

    /// The start of a write of `bytes` bytes to locked page `id` (`index` of `ino`, a file of
    /// `isize` bytes): waits while the page is under writeback (stable pages), then, for a
    /// partial write of a page that is not uptodate, reads the rest of its block first
    /// (`block_write_begin`; a hole or past EOF reads as zeroes) and marks it uptodate.
    #[allow(clippy::too_many_arguments)]
    async fn prepare_page_write(
        &self,
        sim: &Sim,
        id: PageId,
        ino: Ino,
        index: u64,
        bytes: u64,
        isize: u64,
        issuer: Issuer,
    ) {
        if self.page(id).has(pg::WRITEBACK) {
            self.state().stats.write_stable_waits += 1;
            self.wait_on_page_writeback(sim, ino, index).await;
        }
        if self.page(id).has(pg::UPTODATE) || bytes == PAGE_SIZE {
            return;
        }
        let mapped = self.map_block(ino, index);
        if let Some(block) = mapped.filter(|_| index * PAGE_SIZE < isize) {
            self.state().stats.pages_read += 1;
            let span = PageSpan {
                ino,
                index,
                count: 1,
            };
            let purpose = self.purpose_of(ino, index);
            let bio =
                BioRequest::for_pages(IoOp::Read, block, 1, SYNC, issuer, Some(span), purpose);
            self.submit_wait(sim, bio).await;
        }
        self.set_flags(id, pg::UPTODATE, 0);
    }

    /// `generic_perform_write` of bytes `[pos, pos + len)` to a file of size `isize` (before the
    /// write). Returns the bytes written and, if it stopped early, why (`ENOSPC`).
    #[allow(clippy::too_many_arguments)]
    pub async fn perform_write(
        &self,
        sim: &Sim,
        ino: Ino,
        pos: u64,
        len: u64,
        isize: u64,
        issuer: Issuer,
        throttle: &mut DirtyThrottleState,
    ) -> (u64, Option<Errno>) {
        let mut written = 0u64;
        let hooks = self.fs_hooks();
        let fast = self.write_fast_paths.get();
        let mut size = isize;
        // The next page's token when the previous page's write end began it at once
        // (`FsHooks::write_end_then_begin_now`).
        let mut begun: Option<FsToken> = None;
        while written < len {
            let at = pos + written;
            let index = at / PAGE_SIZE;
            let offset = at % PAGE_SIZE;
            let bytes = (PAGE_SIZE - offset).min(len - written);
            // ext4_da_write_begin starts its handle before it grabs the page.
            let mut token = match (&hooks, begun.take()) {
                (Some(_), Some(token)) => Some(token),
                (Some(hooks), None) => Some(match fast.then(|| hooks.write_begin_now(sim, ino)) {
                    Some(Some(token)) => token,
                    _ => hooks.write_begin(sim, ino).await,
                }),
                (None, _) => None,
            };
            let id = match fast {
                true => self.grab_cache_page_write(sim, ino, index, issuer).await,
                false => self.grab_cache_page(sim, ino, index, issuer).await,
            };
            // ext4_da_write_begin (3.10.9): wait_on_page_writeback, unconditionally (QASIO
            // D_data), inside the handle. Not wait_for_stable_page: that waits only with
            // BDI_CAP_STABLE_WRITES.
            if !self.page_write_ready(id, bytes) {
                self.prepare_page_write(sim, id, ino, index, bytes, isize, issuer)
                    .await;
            }
            let mapped = self.map_block(ino, index);
            // A page with no block: simplefs allocates now (`get_block` with create); ext4
            // reserves a block for delayed allocation (`ext4_da_get_block_prep`), once per page.
            let mut reserved = false;
            if mapped.is_none() {
                let outcome = match &hooks {
                    Some(hooks) if self.page(id).has(pg::DIRTY) => Ok(()),
                    Some(hooks) => hooks.reserve(ino, index).map(|()| reserved = true),
                    None => self.fs.borrow_mut().get_block(ino, index, true).map(|_| ()),
                };
                if let Err(errno) = outcome {
                    let page = self.page(id);
                    if !page.has(pg::UPTODATE) && !page.has(pg::DIRTY) {
                        self.state().delete_from_page_cache(id);
                        self.wake_page(sim, ino, index);
                    } else {
                        self.unlock_page(sim, id);
                    }
                    if let (Some(hooks), Some(token)) = (&hooks, token) {
                        hooks.write_end(sim, token, ino, false, None).await;
                    }
                    return (written, Some(errno));
                }
            }
            // iov_iter_copy_from_user_atomic, with the page locked (and the caller's i_mutex;
            // under FastTrack's model, the global page-cache lock too). Without that lock the
            // copy's CPU segment runs at once when it can (`Cpu::run_now`: with a core free,
            // urgency changes nothing) or is awaited here (one future less per page).
            match self.config.page_cache_lock {
                PageCacheLock::Linux if fast => {
                    let cost = self.cpu_costs.copy_ns(bytes);
                    if !self.cpu.run_now(sim, cost, WaitReason::OnCpu) {
                        self.cpu.run_urgent(sim, cost, self.pa_urgent(issuer)).await
                    }
                }
                _ => self.copy_user_bytes(sim, bytes, issuer).await,
            }
            if let Some(log) = self.crash_log() {
                log.page_written(sim.now(), ino, index);
            }
            let journaling = hooks.as_ref().is_some_and(|h| h.journals_data());
            if let (true, Some(hooks), Some(journal_token)) = (
                journaling,
                hooks.as_ref(),
                journaling.then(|| token.take()).flatten(),
            ) {
                // ext4_journalled_write_end: the page is uptodate and clean; its buffer joins
                // the transaction (written to the log at commit, home at checkpoint).
                {
                    let mut state = self.state();
                    state.pages[id as usize].flags |= pg::UPTODATE;
                    self.touch_owner(&mut state, id, issuer.uid);
                    state.mark_page_accessed(id);
                }
                self.unlock_page(sim, id);
                let journal_token = hooks
                    .journal_page(sim, journal_token, issuer, ino, index)
                    .await;
                self.check(sim, "generic_perform_write");
                written += bytes;
                let grown = (at + bytes > size).then_some(at + bytes);
                size = size.max(at + bytes);
                // The block was allocated now: no delayed-allocation reservation stays.
                let _ = reserved;
                hooks.write_end(sim, journal_token, ino, false, grown).await;
                continue;
            }
            // write_end: block_write_end + set_page_dirty + unlock.
            let (newly_dirty, first_dirty_inode) = {
                let mut state = self.state();
                state.pages[id as usize].flags |= pg::UPTODATE;
                self.touch_owner(&mut state, id, issuer.uid);
                let dirtied = state.set_page_dirty(id, self.hz.jiffies(sim.now()));
                state.mark_page_accessed(id);
                dirtied
            };
            if first_dirty_inode {
                // __mark_inode_dirty: the device's first dirty inode arms the flusher.
                self.bdi_wakeup_thread_delayed(sim);
            }
            self.unlock_page(sim, id);
            self.check(sim, "generic_perform_write");
            written += bytes;
            // generic_write_end: i_size grows, then mark_inode_dirty; ext4_da_write_end stops
            // the handle.
            let grown = (at + bytes > size).then_some(at + bytes);
            size = size.max(at + bytes);
            if let (Some(hooks), Some(token)) = (&hooks, token) {
                // The next page's write_begin fused with this one's end when nothing comes
                // between them: more to write and no balance_dirty_pages due.
                let begin_next =
                    written < len && !self.dirty_ratelimit_would_be_due(throttle, newly_dirty);
                let token = match fast {
                    true => match hooks
                        .write_end_then_begin_now(sim, token, ino, reserved, grown, begin_next)
                    {
                        Ok(next) => {
                            begun = next;
                            None
                        }
                        Err(token) => Some(token),
                    },
                    false => Some(token),
                };
                if let Some(token) = token {
                    hooks.write_end(sim, token, ino, reserved, grown).await;
                }
            }
            // balance_dirty_pages_ratelimited, its future built only when it is due.
            if let Some(pages_dirtied) = self.dirty_ratelimit_due(throttle, u64::from(newly_dirty))
            {
                debug_assert!(begun.is_none(), "a write begun before balance_dirty_pages");
                self.balance_dirty_pages(sim, throttle, pages_dirtied).await;
            }
        }
        (written, None)
    }

    /// MobiFS's write (seed 004 §4, `crate::fs::mobifs`): bytes `[pos, pos + len)` of a file of
    /// size `isize` copied into the page cache, each page left uptodate, **clean** and
    /// [`pg::PINNED`] (MobiFS raises the page's count so the page cache neither writes it back
    /// nor evicts it; its write log, not the dirty bit, says it must reach flash). No file
    /// system hook runs (MobiFS sits at the system-call layer; blocks are allocated when its
    /// checkpointer journals the page) and there is no dirty throttling (MobiFS bounds its
    /// pinned memory itself, §6.1). A partial write of a page not in the cache reads the rest
    /// of its block first, as `block_write_begin` does. Returns the bytes written.
    pub async fn cache_write(
        &self,
        sim: &Sim,
        ino: Ino,
        pos: u64,
        len: u64,
        isize: u64,
        issuer: Issuer,
    ) -> u64 {
        let mut written = 0u64;
        while written < len {
            let at = pos + written;
            let index = at / PAGE_SIZE;
            let offset = at % PAGE_SIZE;
            let bytes = (PAGE_SIZE - offset).min(len - written);
            let id = self.grab_cache_page(sim, ino, index, issuer).await;
            // A page the flusher took before MobiFS covered the file is waited for.
            self.prepare_page_write(sim, id, ino, index, bytes, isize, issuer)
                .await;
            self.copy_user_bytes(sim, bytes, issuer).await;
            if let Some(log) = self.crash_log() {
                log.page_written(sim.now(), ino, index);
            }
            {
                let mut state = self.state();
                state.pages[id as usize].flags |= pg::UPTODATE | pg::PINNED;
                self.touch_owner(&mut state, id, issuer.uid);
                state.mark_page_accessed(id);
            }
            self.unlock_page(sim, id);
            self.check(sim, "mobifs_cache_write");
            written += bytes;
        }
        written
    }

    /// MobiFS releases its pin on page `index` of `ino` (the page's last version reached
    /// flash, or the file was truncated): the page becomes reclaimable again. Returns whether
    /// the page was cached and pinned.
    pub fn unpin_page(&self, ino: Ino, index: u64) -> bool {
        match self.find_page(ino, index) {
            Some(id) if self.page(id).has(pg::PINNED) => {
                self.set_flags(id, 0, pg::PINNED);
                true
            }
            _ => false,
        }
    }

    /// `filemap_write_and_wait_range` over pages `[start, end]`: synchronous writeback from the
    /// caller, then waits for every page of the range under writeback (QASIO D_sync).
    pub async fn write_and_wait_range(
        &self,
        sim: &Sim,
        ino: Ino,
        start: u64,
        end: u64,
        issuer: Issuer,
    ) {
        self.fdatawrite_range(sim, ino, start, end, SyncMode::All, issuer, true)
            .await;
        self.wait_range_writeback(sim, ino, start, end).await;
    }

    /// `__filemap_fdatawrite_range` over pages `[start, end]`: writes the range's dirty pages
    /// in `mode`, with synchronous bios when `sync`.
    #[allow(clippy::too_many_arguments)]
    async fn fdatawrite_range(
        &self,
        sim: &Sim,
        ino: Ino,
        start: u64,
        end: u64,
        mode: SyncMode,
        issuer: Issuer,
        sync: bool,
    ) {
        let dirty: Vec<u64> = match self.state().mappings.get(&ino) {
            None => return,
            Some(m) => m.dirty.range(start, end).collect(),
        };
        if !dirty.is_empty() {
            let count = dirty.len() as u64;
            self.writepages(sim, ino, mode, count, WbRange::Pages(dirty), issuer, sync)
                .await;
        }
    }

    /// `filemap_fdatawait_range`.
    pub async fn wait_range_writeback(&self, sim: &Sim, ino: Ino, start: u64, end: u64) {
        let under_writeback: Vec<u64> = {
            let state = self.state();
            match state.mappings.get(&ino) {
                None => return,
                Some(m) => m.writeback.range(start, end).map(|(i, _)| i).collect(),
            }
        };
        for index in under_writeback {
            self.wait_on_page_writeback(sim, ino, index).await;
        }
    }

    /// `truncate_inode_pages_range` over pages `[start, end]`: each page is locked, waited on
    /// if under writeback, cleaned and dropped.
    pub async fn truncate_pages(&self, sim: &Sim, ino: Ino, start: u64, end: u64) {
        let cached: Vec<u64> = {
            let state = self.state();
            match state.mappings.get(&ino) {
                None => return,
                Some(m) => m.pages.range(start, end).map(|(i, _)| i).collect(),
            }
        };
        for index in cached {
            let Some(id) = self.lock_page(sim, ino, index).await else {
                continue;
            };
            if self.page(id).has(pg::WRITEBACK) {
                self.wait_on_page_writeback(sim, ino, index).await;
            }
            let mut state = self.state();
            state.clear_page_dirty(id);
            state.delete_from_page_cache(id);
            drop(state);
            if let Some(observer) = self.write_observer() {
                observer.data_settled(ino, index, 1);
            }
            self.wake_page(sim, ino, index);
        }
        self.check(sim, "truncate_inode_pages_range");
    }

    /// `fadvise64_64(POSIX_FADV_DONTNEED)` over pages `[start, end]` (mm/fadvise.c): unless
    /// the device is write-congested, writeback of the range's dirty pages is started and not
    /// waited for (`__filemap_fdatawrite_range(WB_SYNC_NONE)`), then `invalidate_mapping_pages`
    /// drops each page it can drop without waiting (`invalidate_inode_page`): not locked
    /// (`trylock_page`), clean, not under writeback, and on an LRU list (a page reclaim has
    /// isolated holds an extra reference, so `remove_mapping` fails). Returns the pages
    /// dropped. The caller passes the first and last *full* page of the byte range.
    ///
    /// Simplifications: no per-CPU pagevecs, so the `lru_add_drain_all` retry has nothing to
    /// drain and is not modelled; a page that stays is not deactivated (`deactivate_page`);
    /// no CPU time is charged for the lookup (the system call's entry is, by the VFS).
    pub async fn fadvise_dontneed(
        &self,
        sim: &Sim,
        ino: Ino,
        start: u64,
        end: u64,
        issuer: Issuer,
    ) -> u64 {
        if !self.bdev.congested() {
            self.fdatawrite_range(sim, ino, start, end, SyncMode::None, issuer, false)
                .await;
        }
        let mut state = self.state();
        let cached: Vec<PageId> = match state.mappings.get(&ino) {
            None => return 0,
            Some(m) => m.pages.range(start, end).map(|(_, id)| id).collect(),
        };
        let mut dropped = 0;
        for id in cached {
            let page = state.pages[id as usize];
            let busy = pg::LOCKED | pg::DIRTY | pg::WRITEBACK;
            if page.flags & busy != 0 || page.lru == Lru::None {
                continue;
            }
            state.delete_from_page_cache(id);
            dropped += 1;
        }
        drop(state);
        self.check(sim, "invalidate_mapping_pages");
        dropped
    }

    /// Direct I/O of whole pages `[first, first + count)` (`__blockdev_direct_IO`): cached
    /// pages of the range are written and dropped first, then the blocks are read or written
    /// synchronously from the caller, bypassing the cache. Writes allocate blocks
    /// (`ENOSPC`); reads of holes do no I/O.
    pub async fn direct_io(
        &self,
        sim: &Sim,
        ino: Ino,
        first: u64,
        count: u64,
        write: bool,
        issuer: Issuer,
    ) -> Result<(), Errno> {
        if count == 0 {
            return Ok(());
        }
        let last = first + count - 1;
        self.write_and_wait_range(sim, ino, first, last, issuer)
            .await;
        if write {
            self.truncate_pages(sim, ino, first, last).await;
        }
        let mut current: Option<(u64, u32)> = None;
        let op = if write { IoOp::Write } else { IoOp::Read };
        for index in first..=last {
            let block = self.fs.borrow_mut().get_block(ino, index, write)?;
            let Some(block) = block else { continue };
            match current {
                Some((start, n)) if start + u64::from(n) == block && n < MAX_BIO_PAGES => {
                    current = Some((start, n + 1));
                }
                _ => {
                    if let Some(run) = current.take() {
                        self.submit_wait(sim, direct_bio(op, run, issuer)).await;
                    }
                    current = Some((block, 1));
                }
            }
        }
        if let Some(run) = current {
            self.submit_wait(sim, direct_bio(op, run, issuer)).await;
        }
        Ok(())
    }
}

/// Reads and O_DIRECT writes carry REQ_SYNC (`READ_SYNC`, `WRITE_ODIRECT = WRITE | REQ_SYNC`):
/// someone waits. Neither carries REQ_NOIDLE (include/linux/fs.h, 3.10).
const SYNC: IoFlags = IoFlags {
    sync: true,
    meta: false,
    prio: false,
    fua: false,
    preflush: false,
    postflush: false,
    noidle: false,
};

fn direct_bio(op: IoOp, run: (u64, u32), issuer: Issuer) -> BioRequest {
    BioRequest::for_pages(op, run.0, run.1, SYNC, issuer, None, IoPurpose::Data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readahead_windows_grow_as_the_kernel_sizes_them() {
        // get_init_ra_size with read_ahead_kb = 128 (32 pages): x4 up to max/32, x2 up to
        // max/4, else max; requests are rounded up to a power of two first.
        let max = 32;
        assert_eq!(init_ra_size(1, max), 4);
        assert_eq!(init_ra_size(2, max), 4);
        assert_eq!(init_ra_size(3, max), 8);
        assert_eq!(init_ra_size(8, max), 16);
        assert_eq!(init_ra_size(9, max), 32);
        assert_eq!(init_ra_size(100, max), 32);
        assert_eq!(
            init_ra_size(0, max),
            4,
            "an empty request counts as one page"
        );
        // get_next_ra_size: x4 below max/16, else x2, capped at max.
        assert_eq!(next_ra_size(1, max), 4);
        assert_eq!(next_ra_size(2, max), 4);
        assert_eq!(next_ra_size(4, max), 8);
        assert_eq!(next_ra_size(16, max), 32);
        assert_eq!(next_ra_size(32, max), 32);
        // A 2 MiB window (512 pages).
        assert_eq!(init_ra_size(16, 512), 64);
        assert_eq!(next_ra_size(31, 512), 124);
        assert_eq!(next_ra_size(32, 512), 64);
    }
}
