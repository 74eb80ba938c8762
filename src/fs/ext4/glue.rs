//! ext4 mounted over the page cache and driven by the VFS: the seams between the operations
//! layer ([`Ext4`]) and the rest of the stack.
//!
//! - [`PageCacheBuffers`]: jbd2's [`MetaBuffers`] as buffers of the block device's page cache
//!   ([`crate::mm::buffer`]): read on first use, written home by the flusher.
//! - [`PageCacheOrdered`]: ordered-mode data through the inode's mapping
//!   (`journal_submit_inode_data_buffers` / `journal_finish_inode_data_buffers`).
//! - [`Ext4Mapping`]: `get_block` for the page cache (`ext4_get_block` without create, and
//!   the block device's identity mapping).
//! - [`Ext4Hooks`]: [`FsHooks`], the delayed-allocation write path (`ext4_da_write_begin`,
//!   `ext4_da_get_block_prep`, `ext4_da_write_end`) and `ext4_da_writepages`' batches.
//! - [`Ext4Ops`]: [`FileSystemOps`], what the VFS calls (`ext4_create`, `ext4_unlink`,
//!   `ext4_rename`, `ext4_setattr`, `ext4_dirty_inode`, `ext4_sync_file`, `ext4_release_file`,
//!   `ext4_evict_inode`).
//! - [`mount`]: builds them in order around the page cache.
//!
//! Simplifications: the task a metadata buffer is read or written for is found from the
//! running task, as the last issuer seen for it ([`Issuers`]); `O_DIRECT` writes to unallocated
//! blocks allocate without a journal handle (`ext4_direct_IO`'s `ext4_get_block_write` is
//! journaled in Linux).

use super::mount::{Ext4, Ext4Config};
use crate::errno::Errno;
use crate::fs::jbd2::{Handle, MetaBuffers, OrderedData, JBD2_PID};
use crate::fs::{AddressSpaceOps, FileSystemOps, LocalBoxFuture};
use crate::kernel::Hz;
use crate::mm::{BlockSubmit, FsHooks, FsToken, Ino, Issuer, Mm, BDEV_INO};
use crate::sim::sync::Mutex;
use crate::sim::{Sim, TaskId};
use crate::units::PAGE_SIZE;
use std::cell::{OnceCell, RefCell};
use std::collections::BTreeMap;
use std::rc::{Rc, Weak};

/// The issuer each task last acted as: a metadata buffer read or checkpoint write is charged
/// to the task that needed it.
#[derive(Default)]
pub struct Issuers {
    by_task: RefCell<BTreeMap<TaskId, Issuer>>,
}

impl Issuers {
    pub fn record(&self, issuer: Issuer) {
        if let Some(task) = issuer.task {
            self.by_task.borrow_mut().insert(task, issuer);
        }
    }

    /// The running task's issuer (a kernel thread not seen before is pid 0).
    pub fn current(&self, sim: &Sim) -> Issuer {
        let task = sim.current_task();
        task.and_then(|t| self.by_task.borrow().get(&t).copied())
            .unwrap_or(Issuer {
                task,
                pid: 0,
                uid: 0,
                foreground: false,
            })
    }
}

/// jbd2's metadata buffers in the block device's page cache.
pub struct PageCacheBuffers {
    mm: Weak<Mm>,
    issuers: Rc<Issuers>,
}

impl PageCacheBuffers {
    fn mm(&self) -> Rc<Mm> {
        self.mm
            .upgrade()
            .expect("the page cache outlives the journal")
    }
}

impl MetaBuffers for PageCacheBuffers {
    fn lock_buffer<'a>(&'a self, sim: &'a Sim, block: u64) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            let issuer = self.issuers.current(sim);
            self.mm().lock_buffer(sim, block, issuer).await;
        })
    }

    fn trylock_buffer(&self, block: u64) -> bool {
        self.mm().trylock_buffer(block)
    }

    fn unlock_buffer(&self, sim: &Sim, block: u64) {
        self.mm().unlock_buffer(sim, block);
    }

    fn test_clear_dirty(&self, block: u64) -> bool {
        self.mm().test_clear_buffer_dirty(block)
    }

    fn take_over_unlocked(&self, sim: &Sim, block: u64) -> Option<bool> {
        self.mm().take_over_unlocked_buffer(sim, block)
    }

    fn mark_dirty(&self, sim: &Sim, block: u64) {
        self.mm().mark_buffer_dirty(sim, block);
    }

    fn is_clean(&self, block: u64) -> bool {
        self.mm().buffer_is_clean(block)
    }

    fn write_home<'a>(&'a self, sim: &'a Sim, block: u64) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            let issuer = self.issuers.current(sim);
            self.mm().write_buffer_home(sim, block, issuer).await;
        })
    }

    fn pin(&self, block: u64, pinned: bool) {
        self.mm().pin_buffer(block, pinned);
    }

    fn getblk<'a>(&'a self, sim: &'a Sim, block: u64) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            let issuer = self.issuers.current(sim);
            self.mm().getblk_uptodate(sim, block, issuer).await;
        })
    }
}

/// Ordered-mode data through the page cache, from the journal thread.
pub struct PageCacheOrdered {
    mm: Weak<Mm>,
    issuers: Rc<Issuers>,
}

impl OrderedData for PageCacheOrdered {
    fn submit<'a>(&'a self, sim: &'a Sim, ino: Ino) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            let mm = self
                .mm
                .upgrade()
                .expect("the page cache outlives the journal");
            let issuer = self.issuers.current(sim);
            mm.write_mapped_pages(sim, ino, issuer).await;
        })
    }

    fn wait<'a>(&'a self, sim: &'a Sim, ino: Ino) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            let mm = self
                .mm
                .upgrade()
                .expect("the page cache outlives the journal");
            mm.wait_range_writeback(sim, ino, 0, u64::MAX).await;
        })
    }
}

/// `get_block` for the page cache.
#[derive(Default)]
pub struct Ext4Mapping {
    ext4: OnceCell<Weak<Ext4>>,
}

impl Ext4Mapping {
    fn ext4(&self) -> Rc<Ext4> {
        self.ext4
            .get()
            .and_then(Weak::upgrade)
            .expect("mounted before the page cache maps pages")
    }
}

impl AddressSpaceOps for Ext4Mapping {
    fn get_block(&mut self, ino: Ino, index: u64, create: bool) -> Result<Option<u64>, Errno> {
        if ino == BDEV_INO {
            return Ok(Some(index));
        }
        let ext4 = self.ext4();
        let mut alloc = ext4.alloc.borrow_mut();
        alloc.get_block(ino, index, create)
    }

    fn map_extent(&mut self, ino: Ino, index: u64) -> (Option<u64>, u64) {
        if ino == BDEV_INO {
            return (Some(index), u64::MAX - index);
        }
        let ext4 = self.ext4();
        let alloc = ext4.alloc.borrow();
        alloc.map_extent(ino, index)
    }
}

/// The delayed-allocation write path and writeback batches.
pub struct Ext4Hooks {
    ext4: Rc<Ext4>,
    issuers: Rc<Issuers>,
    /// Boxes of write handles given back by `write_end_now`, reused by `write_begin_now`: a
    /// page written takes no heap allocation for its handle. (The boxes are the point.)
    #[allow(clippy::vec_box)]
    spare_tokens: RefCell<Vec<Box<Handle>>>,
}

impl Ext4Hooks {
    /// `handle` as a token, in a spare box when there is one.
    fn token(&self, handle: Handle) -> FsToken {
        match self.spare_tokens.borrow_mut().pop() {
            Some(mut spare) => {
                *spare = handle;
                spare
            }
            None => Box::new(handle),
        }
    }
}

impl FsHooks for Ext4Hooks {
    fn write_begin<'a>(&'a self, sim: &'a Sim, _ino: Ino) -> LocalBoxFuture<'a, FsToken> {
        Box::pin(async move { Box::new(self.ext4.write_begin(sim).await) as FsToken })
    }

    fn write_begin_now(&self, sim: &Sim, _ino: Ino) -> Option<FsToken> {
        self.ext4
            .write_begin_now(sim)
            .map(|handle| self.token(handle))
    }

    fn write_end_now(
        &self,
        sim: &Sim,
        token: FsToken,
        ino: Ino,
        reserved: bool,
        new_size: Option<u64>,
    ) -> Result<(), FsToken> {
        self.write_end_then_begin_now(sim, token, ino, reserved, new_size, false)
            .map(|next| debug_assert!(next.is_none()))
    }

    fn write_end_then_begin_now(
        &self,
        sim: &Sim,
        token: FsToken,
        ino: Ino,
        reserved: bool,
        new_size: Option<u64>,
        begin_next: bool,
    ) -> Result<Option<FsToken>, FsToken> {
        let mut boxed = token.downcast::<Handle>().expect("a write_begin token");
        let handle = std::mem::replace(&mut *boxed, Handle::placeholder());
        match self
            .ext4
            .write_end_then_begin_now(sim, handle, ino, reserved, new_size, begin_next)
        {
            Ok(Some(next)) => {
                *boxed = next;
                Ok(Some(boxed))
            }
            Ok(None) => {
                self.spare_tokens.borrow_mut().push(boxed);
                Ok(None)
            }
            Err(handle) => {
                *boxed = handle;
                Err(boxed)
            }
        }
    }

    fn reserve(&self, _ino: Ino, _index: u64) -> Result<(), Errno> {
        if self.ext4.config.delalloc && self.ext4.config.data != super::mount::DataMode::Journal {
            self.ext4.reserve_delalloc()
        } else {
            Ok(())
        }
    }

    fn writeback_bump_pages(&self) -> u64 {
        // ext4_da_writepages' bump exists only with delayed allocation (without it ext4's
        // writepages is write_cache_pages over ext4_writepage).
        if self.ext4.config.delalloc && self.ext4.config.data != super::mount::DataMode::Journal {
            super::mount::MAX_WRITEBACK_MB_BUMP_PAGES
        } else {
            0
        }
    }

    fn write_end<'a>(
        &'a self,
        sim: &'a Sim,
        token: FsToken,
        ino: Ino,
        reserved: bool,
        new_size: Option<u64>,
    ) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            let handle = *token.downcast::<Handle>().expect("a write_begin token");
            self.ext4
                .write_end(sim, handle, ino, reserved, new_size)
                .await;
        })
    }

    fn writepages_begin<'a>(
        &'a self,
        sim: &'a Sim,
        issuer: Issuer,
        ino: Ino,
        unmapped: Vec<(u64, u64)>,
    ) -> LocalBoxFuture<'a, Result<FsToken, Errno>> {
        Box::pin(async move {
            self.issuers.record(issuer);
            if unmapped.is_empty()
                && self
                    .ext4
                    .kernel_version()
                    .writes_mapped_pages_without_handle()
            {
                // Linux 5.8+ (6b8ed62008a4): pages that need no mapping go out without a handle.
                return Ok(Box::new(None::<Handle>) as FsToken);
            }
            let blocks: u64 = unmapped.iter().map(|&(_, n)| n).sum();
            let mut handle = self
                .ext4
                .start(sim, Ext4::writeback_credits(blocks.max(1)))
                .await;
            for (first, count) in unmapped {
                match self
                    .ext4
                    .allocate_in(sim, handle, issuer, ino, first, count)
                    .await
                {
                    Ok(h) => handle = h,
                    Err((h, errno)) => {
                        self.ext4.journal.stop(sim, h).await;
                        return Err(errno);
                    }
                }
            }
            Ok(Box::new(Some(handle)) as FsToken)
        })
    }

    fn stops_writepages_handle_before_final_submit(&self) -> bool {
        self.ext4
            .kernel_version()
            .stops_writeback_handle_before_final_submit()
    }

    fn journals_data(&self) -> bool {
        self.ext4.config.data == super::mount::DataMode::Journal
    }

    fn journal_page<'a>(
        &'a self,
        sim: &'a Sim,
        token: FsToken,
        issuer: Issuer,
        ino: Ino,
        index: u64,
    ) -> LocalBoxFuture<'a, FsToken> {
        Box::pin(async move {
            self.issuers.record(issuer);
            let handle = *token.downcast::<Handle>().expect("a write_begin token");
            let handle = self
                .ext4
                .journal_data_page(sim, handle, issuer, ino, index)
                .await;
            Box::new(handle) as FsToken
        })
    }

    fn defers_end_writeback(&self, sim: &Sim, span: crate::mm::bio::PageSpan, mm: &Rc<Mm>) -> bool {
        if !self.ext4.writes_back_into_unwritten_extents() {
            return false;
        }
        // ext4_end_bio: an io_end with unwritten blocks goes to the conversion work, which
        // ends the pages' writeback (ext4_finish_bio) after converting them.
        let mm = mm.clone();
        let finish: super::page_io::EndWriteback =
            Box::new(move |sim| mm.end_writeback_span(sim, span));
        self.ext4.end_bio(sim, span, finish).is_none()
    }

    fn writepages_end<'a>(&'a self, sim: &'a Sim, token: FsToken) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            let handle = *token
                .downcast::<Option<Handle>>()
                .expect("a writepages token");
            if let Some(handle) = handle {
                self.ext4.journal.stop(sim, handle).await;
            }
        })
    }
}

/// MobiFS's checkpointer on ext4's journal ([`crate::fs::mobifs::AtomicStore`], §4.3;
/// [`super::vct`]).
pub struct Ext4VctStore {
    pub ext4: Rc<Ext4>,
    issuers: Rc<Issuers>,
}

impl crate::fs::mobifs::AtomicStore for Ext4VctStore {
    fn begin<'a>(
        &'a self,
        sim: &'a Sim,
        pages: u64,
        inodes: u64,
    ) -> LocalBoxFuture<'a, Result<FsToken, Errno>> {
        Box::pin(async move {
            let vct = self.ext4.vct_begin(sim, pages, inodes).await?;
            Ok(Box::new(vct) as FsToken)
        })
    }

    fn append<'a>(
        &'a self,
        sim: &'a Sim,
        token: FsToken,
        issuer: Issuer,
        ino: Ino,
        index: u64,
    ) -> LocalBoxFuture<'a, FsToken> {
        Box::pin(async move {
            self.issuers.record(issuer);
            let vct = *token
                .downcast::<super::vct::VctHandle>()
                .expect("a VCT token");
            let vct = self.ext4.vct_append(sim, vct, issuer, ino, index).await;
            Box::new(vct) as FsToken
        })
    }

    fn set_size<'a>(
        &'a self,
        sim: &'a Sim,
        token: FsToken,
        ino: Ino,
        size: u64,
    ) -> LocalBoxFuture<'a, FsToken> {
        Box::pin(async move {
            let vct = *token
                .downcast::<super::vct::VctHandle>()
                .expect("a VCT token");
            let vct = self.ext4.vct_size(sim, vct, ino, size).await;
            Box::new(vct) as FsToken
        })
    }

    fn end<'a>(&'a self, sim: &'a Sim, token: FsToken) -> LocalBoxFuture<'a, u64> {
        Box::pin(async move {
            let vct = *token
                .downcast::<super::vct::VctHandle>()
                .expect("a VCT token");
            self.ext4.vct_end(sim, vct).await
        })
    }

    fn wait_sync<'a>(&'a self, sim: &'a Sim, issuer: Issuer, tid: u64) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            self.issuers.record(issuer);
            self.ext4.vct_wait_sync(sim, issuer, tid).await;
        })
    }

    fn max_pages(&self, inodes: u64) -> u64 {
        self.ext4.vct_max_pages(inodes)
    }
}

/// ext4 as the VFS drives it.
pub struct Ext4Ops {
    pub ext4: Rc<Ext4>,
    issuers: Rc<Issuers>,
}

impl FileSystemOps for Ext4Ops {
    fn name(&self) -> &str {
        "ext4"
    }

    fn record_crash(&self, log: Rc<crate::mm::crashlog::CrashLog>) -> Result<(), String> {
        if self.ext4.journal.fs_device.get().is_some() {
            return Err(
                "crash-point checking needs ext4's journal on its own device \
                 (`[stack.fs] journal = \"internal\"`)"
                    .into(),
            );
        }
        self.ext4.record_crash(log);
        Ok(())
    }

    fn atomic_store(&self) -> Option<Rc<dyn crate::fs::mobifs::AtomicStore>> {
        Some(Rc::new(Ext4VctStore {
            ext4: self.ext4.clone(),
            issuers: self.issuers.clone(),
        }))
    }

    fn root(&self) -> Ino {
        super::layout::ROOT_INO
    }

    fn create<'a>(
        &'a self,
        sim: &'a Sim,
        issuer: Issuer,
        dir: Ino,
        name: &'a str,
        is_dir: bool,
    ) -> LocalBoxFuture<'a, Result<Ino, Errno>> {
        Box::pin(async move {
            self.issuers.record(issuer);
            self.ext4.create(sim, issuer, dir, name, is_dir).await
        })
    }

    fn create_at_setup(&self, dir: Ino, name: &str, is_dir: bool) -> Result<Ino, Errno> {
        let (ino, _touched) = self
            .ext4
            .alloc
            .borrow_mut()
            .create_inode(dir, name, is_dir)?;
        Ok(ino)
    }

    fn populate_blocks(&self, ino: Ino, size: u64) -> Result<(), Errno> {
        let pages = size.div_ceil(PAGE_SIZE);
        if pages > 0 {
            let request = super::alloc::DataAlloc {
                ino,
                lblk: 0,
                len: pages,
                i_size: size,
                open_for_write: false,
                pid: 0,
                cpu: 0,
                tid: 0,
                unwritten: false,
            };
            let allocation = self.ext4.alloc.borrow_mut().allocate_blocks(&request)?;
            // allocate_blocks returns what it got when the disk fills: a file preallocated at
            // setup must have every block.
            let mapped: u64 = allocation.extents.iter().map(|e| e.len).sum();
            if mapped < pages {
                return Err(Errno::ENOSPC);
            }
        }
        self.ext4.note_on_disk_size(ino, size);
        Ok(())
    }

    fn unlink<'a>(
        &'a self,
        sim: &'a Sim,
        issuer: Issuer,
        dir: Ino,
        name: &'a str,
        last_link: bool,
    ) -> LocalBoxFuture<'a, Result<(), Errno>> {
        Box::pin(async move {
            self.issuers.record(issuer);
            self.ext4
                .unlink(sim, issuer, dir, name, last_link)
                .await
                .map(|_| ())
        })
    }

    fn rename<'a>(
        &'a self,
        sim: &'a Sim,
        issuer: Issuer,
        old_dir: Ino,
        old_name: &'a str,
        new_dir: Ino,
        new_name: &'a str,
        replaced_last_link: bool,
    ) -> LocalBoxFuture<'a, Result<(), Errno>> {
        Box::pin(async move {
            self.issuers.record(issuer);
            self.ext4
                .rename(
                    sim,
                    issuer,
                    old_dir,
                    old_name,
                    new_dir,
                    new_name,
                    replaced_last_link,
                )
                .await
                .map(|_| ())
        })
    }

    fn evict<'a>(&'a self, sim: &'a Sim, issuer: Issuer, ino: Ino) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            self.issuers.record(issuer);
            self.ext4.evict(sim, issuer, ino).await;
        })
    }

    fn setattr_size<'a>(
        &'a self,
        sim: &'a Sim,
        issuer: Issuer,
        ino: Ino,
        old_size: u64,
        new_size: u64,
    ) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            self.issuers.record(issuer);
            if new_size < old_size || new_size == 0 {
                self.ext4.truncate(sim, ino, new_size).await;
            } else if new_size > old_size {
                self.ext4.setattr_grow(sim, ino, new_size).await;
            }
        })
    }

    fn update_time<'a>(&'a self, sim: &'a Sim, ino: Ino) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move { self.ext4.update_time(sim, ino).await })
    }

    fn fsync<'a>(
        &'a self,
        sim: &'a Sim,
        issuer: Issuer,
        ino: Ino,
        datasync: bool,
        _write_inode: bool,
        i_mutex: Mutex,
    ) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            self.issuers.record(issuer);
            // ext4_sync_file (3.10): i_mutex across the commit wait and the barrier.
            let guard = i_mutex.lock(sim).await;
            self.ext4.fsync(sim, issuer, ino, datasync).await;
            drop(guard);
        })
    }

    fn sync_fs<'a>(&'a self, sim: &'a Sim, issuer: Issuer) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            self.issuers.record(issuer);
            self.ext4.sync_fs(sim, issuer).await;
        })
    }

    fn open_for_write(&self, ino: Ino) {
        self.ext4.open_for_write(ino);
    }

    fn release_writer(&self, ino: Ino) -> bool {
        self.ext4.release_writer(ino)
    }

    fn flush_on_rename(&self, ino: Ino) -> bool {
        self.ext4.wants_da_flush_on_rename(ino)
    }

    fn enable_checks(&self) {
        self.ext4.journal.enable_checks();
    }

    fn violation(&self) -> Option<String> {
        self.ext4.journal.violation()
    }

    fn check_end_of_run(&self, sim: &Sim) {
        self.ext4.journal.check_end_of_run(sim);
    }

    fn counters(&self) -> Vec<(String, u64)> {
        let fs = self.ext4.stats();
        let j = self.ext4.journal.stats();
        let mut out: Vec<(String, u64)> = [
            ("creates", fs.creates),
            ("unlinks", fs.unlinks),
            ("renames", fs.renames),
            ("truncates", fs.truncates),
            ("evictions", fs.evictions),
            ("allocations", fs.allocations),
            ("allocated_blocks", fs.allocated_blocks),
            ("timestamp_updates", fs.timestamp_updates),
            ("journaled_data_pages", fs.journaled_data_pages),
            ("fsyncs_committed", fs.fsyncs_committed),
            ("fsyncs_flush_only", fs.fsyncs_flush_only),
            ("discards", fs.discards),
            ("discarded_blocks", fs.discarded_blocks),
            ("orphan_adds", fs.orphan_adds),
        ]
        .into_iter()
        .map(|(name, value)| (format!("ext4.{name}"), value))
        .collect();
        if fs.unwritten_conversions > 0 {
            // Only runs that wrote back into unwritten extents (dioread_nolock) show these.
            out.push((
                "ext4.unwritten_conversions".into(),
                fs.unwritten_conversions,
            ));
            out.push(("ext4.converted_blocks".into(), fs.converted_blocks));
        }
        if fs.vct_commits > 0 {
            // Only runs with MobiFS's checkpointer show its counters.
            out.push(("ext4.vct_commits".into(), fs.vct_commits));
            out.push(("ext4.vct_split".into(), fs.vct_split));
        }
        out.extend(
            [
                ("handles", j.handles),
                ("commits", j.commits),
                ("requested_commits", j.requested_commits),
                ("log_descriptor_blocks", j.log_descriptor_blocks),
                ("log_metadata_blocks", j.log_metadata_blocks),
                ("log_commit_blocks", j.log_commit_blocks),
                ("checkpoints", j.checkpoints),
                ("checkpoint_writes", j.checkpoint_writes),
                ("handle_waits", j.handle_waits),
                ("frozen_copies", j.frozen_copies),
                ("shadow_waits", j.shadow_waits),
                ("committed_buffers", j.committed_buffers),
                ("commit_ns.updates", j.phase_ns.updates),
                ("commit_ns.data_submit", j.phase_ns.data_submit),
                ("commit_ns.log_submit", j.phase_ns.log_submit),
                ("commit_ns.data_wait", j.phase_ns.data_wait),
                ("commit_ns.log_wait", j.phase_ns.log_wait),
                ("commit_ns.callback", j.phase_ns.callback),
            ]
            .into_iter()
            .map(|(name, value)| (format!("jbd2.{name}"), value)),
        );
        out
    }
}

/// The journal's checks' view of the page cache's writes: home writes of metadata buffers
/// (invariant a) and ordered data reaching the device (invariant c).
struct JournalWriteObserver {
    ext4: Weak<Ext4>,
}

impl crate::mm::WriteObserver for JournalWriteObserver {
    fn home_write(&self, sim: &Sim, block: u64, count: u64) {
        if let Some(ext4) = self.ext4.upgrade() {
            ext4.journal.check_home_write(sim, block, count);
        }
    }

    fn data_settled(&self, ino: Ino, index: u64, count: u64) {
        if let Some(ext4) = self.ext4.upgrade() {
            ext4.journal.check_data_settled(ino, index, count);
        }
    }
}

/// mke2fs + mount of ext4 over `size_bytes` of `bdev`, with the page cache `start_mm` builds
/// over ext4's mapping: the metadata buffers and ordered data go through that page cache, which
/// gets ext4's write hooks. `journal_device` holds an external journal.
#[allow(clippy::too_many_arguments)]
pub fn mount(
    sim: &Sim,
    config: Ext4Config,
    size_bytes: u64,
    hz: Hz,
    bdev: Rc<dyn BlockSubmit>,
    journal_device: Option<(Rc<dyn BlockSubmit>, u64)>,
    start_mm: impl FnOnce(Rc<RefCell<dyn AddressSpaceOps>>) -> Rc<Mm>,
) -> Result<(Rc<Mm>, Rc<Ext4Ops>), String> {
    config.validate()?;
    let mapping = Rc::new(RefCell::new(Ext4Mapping::default()));
    let mm = start_mm(mapping.clone());
    let issuers = Rc::new(Issuers::default());
    let buffers = Rc::new(PageCacheBuffers {
        mm: Rc::downgrade(&mm),
        issuers: issuers.clone(),
    });
    let ordered = Rc::new(PageCacheOrdered {
        mm: Rc::downgrade(&mm),
        issuers: issuers.clone(),
    });
    let log_device = journal_device.as_ref().map(|(device, _)| device.clone());
    let ext4 = Ext4::mount(
        sim,
        config,
        size_bytes,
        hz,
        buffers,
        ordered,
        bdev.clone(),
        journal_device,
    )?;
    let _ = mapping.borrow().ext4.set(Rc::downgrade(&ext4));
    if let Some(task) = ext4.journal.thread() {
        issuers.record(Issuer {
            task: Some(task),
            pid: JBD2_PID,
            uid: 0,
            foreground: false,
        });
    }
    // The journal thread is named after the file system's device, wherever its log is.
    bdev.register_task(JBD2_PID, 0, crate::fs::jbd2::JBD2_COMM);
    if let Some(log_device) = log_device {
        log_device.register_task(JBD2_PID, 0, crate::fs::jbd2::JBD2_COMM);
    }
    let classifier = Rc::downgrade(&ext4);
    mm.set_meta_classifier(Rc::new(move |block| {
        classifier
            .upgrade()
            .map_or(crate::mm::IoPurpose::Metadata, |ext4| {
                ext4.meta_purpose(block)
            })
    }));
    mm.set_write_observer(Rc::new(JournalWriteObserver {
        ext4: Rc::downgrade(&ext4),
    }));
    ext4.ordered_data_tracked.set(true);
    mm.set_fs_hooks(Rc::new(Ext4Hooks {
        ext4: ext4.clone(),
        issuers: issuers.clone(),
        spare_tokens: RefCell::new(Vec::new()),
    }));
    Ok((mm, Rc::new(Ext4Ops { ext4, issuers })))
}
