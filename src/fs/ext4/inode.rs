//! Inodes and their data (fs/ext4/inode.c, 3.10): the buffered-write hooks of delayed
//! allocation (`ext4_da_write_begin` / `ext4_da_write_end`), timestamp updates
//! (`file_update_time` -> `ext4_dirty_inode`), block allocation at writeback
//! (`ext4_da_writepages` -> `mpage_da_map_and_submit` -> `ext4_map_blocks`), truncation
//! (`ext4_setattr` -> `ext4_truncate`, with the orphan list) and the last writer's close
//! (`ext4_release_file`).
//!
//! Where the waits come from:
//! - `ext4_da_write_begin` starts a handle *before* it grabs the page and waits for its
//!   writeback: a writer asleep in `wait_on_page_writeback` (QASIO D_data) holds the handle, so
//!   a commit that locks the transaction waits for it, and so does every task starting a
//!   handle behind the commit (I_jhandle: QASIO's camera behind the thumbnail writer).
//! - An appending write grows `i_size` and `ext4_da_write_end` marks the inode dirty
//!   (`generic_write_end` -> `mark_inode_dirty`): the inode's table block is journaled, and may be
//!   under asynchronous write home (D_meta).
//! - `file_update_time` journals the inode when the (tick-grained) time changed.
//!
//! `write_begin_now` / `write_end_now` do the same work as `write_begin` / `write_end` when
//! nothing in them waits (the common case: a handle that joins a running transaction, an inode
//! block it already holds) without building futures; they give the handle back untouched
//! otherwise. A speed-up of the simulator, not a kernel mechanism: results are identical
//! (`vfs_tests::the_write_fast_paths_change_nothing_but_the_work_done`).
//!
//! Under `dioread_nolock` (5.6+ by default) writeback allocates unwritten extents, files no
//! ordered data for them, and [`super::page_io`] converts them when their data I/O completes.
//!
//! Simplifications: one allocation handle per call from writeback (3.10 maps up to a chunk per
//! handle, `EXT4_MAX_TRANS_DATA`); delayed-allocation reservations are counted in pages (no
//! metadata reservation, no ENOSPC at write time); `i_disksize` moves to the end of each
//! allocated range (3.10: to the end of the written pages within `i_size`), and at
//! `write_end` only for a write that grew `i_size` (3.10 also for one below `i_size` but
//! past `i_disksize`).

use super::alloc::DataAlloc;
use super::mount::{Ext4, DATA_TRANS_BLOCKS};
use crate::errno::Errno;
use crate::fs::jbd2::Handle;
use crate::mm::{Ino, Issuer};
use crate::sim::Sim;
use crate::units::PAGE_SIZE;

/// How a commit protects a newly allocated block's data (`ext4_should_order_data` vs
/// `ext4_should_journal_data`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DataFiling {
    /// Written home before the commit: the inode goes on the ordered-data list where the era
    /// files new blocks.
    Ordered,
    /// Journaled with the transaction (`data=journal`'s path, MobiFS's VCTs): nothing filed.
    Journaled,
}

/// `ext4_da_write_begin`'s credits: one (`EXT4_HT_WRITE_PAGE`, 1); the inode block of
/// `write_end` joins the same handle (`ext4_dirty_inode` nests).
pub const WRITE_BEGIN_CREDITS: u64 = 2;
/// `ext4_dirty_inode`'s credits: 2.
pub const DIRTY_INODE_CREDITS: u64 = 2;
/// `ext4_setattr`'s orphan handle: 3 credits.
pub const SETATTR_CREDITS: u64 = 3;

impl Ext4 {
    /// A file that exists on disk with `size` bytes (set up before the run): `i_size` and
    /// `i_disksize` both.
    pub fn note_on_disk_size(&self, ino: Ino, size: u64) {
        let mut inodes = self.inodes.borrow_mut();
        let info = inodes.entry(ino).or_default();
        info.size = size;
        info.disksize = size;
    }

    /// `ext4_da_write_begin`: starts the handle the page's write runs in. The caller then grabs
    /// the page and waits for its writeback (inside the handle) and reserves the block.
    pub async fn write_begin(&self, sim: &Sim) -> Handle {
        self.start(sim, WRITE_BEGIN_CREDITS).await
    }

    /// [`Ext4::write_begin`] when its handle starts without waiting; `None` (the running
    /// transaction created if none ran, nothing else changed) when it would wait.
    pub fn write_begin_now(&self, sim: &Sim) -> Option<Handle> {
        self.journal.start_now(sim, WRITE_BEGIN_CREDITS).ok()
    }

    /// [`Ext4::write_end`] when nothing in it waits: a handle that is not synchronous, and,
    /// when the write grew the file, an inode block its transaction already journaled whose
    /// buffer lock is free ([`crate::fs::jbd2::Journal::get_write_access_now`]; what every page
    /// of an appending write after the transaction's first finds). Gives the handle back,
    /// nothing changed, otherwise: the caller then calls [`Ext4::write_end`].
    pub fn write_end_now(
        &self,
        sim: &Sim,
        handle: Handle,
        ino: Ino,
        reserved: bool,
        new_size: Option<u64>,
    ) -> Result<(), Handle> {
        self.write_end_then_begin_now(sim, handle, ino, reserved, new_size, false)
            .map(|next| debug_assert!(next.is_none()))
    }

    /// [`Ext4::write_end_now`], then, with `begin_next`, [`Ext4::write_begin_now`] for the next
    /// page of the same write at the same instant, fused with the end's stop when nothing but
    /// the credits changes ([`crate::fs::jbd2::Journal::stop_and_start_now`]): `Ok(Some)` is the
    /// next page's handle, `Ok(None)` an ended handle (the caller begins the next page as
    /// usual), `Err` as [`Ext4::write_end_now`].
    pub fn write_end_then_begin_now(
        &self,
        sim: &Sim,
        handle: Handle,
        ino: Ino,
        reserved: bool,
        new_size: Option<u64>,
        begin_next: bool,
    ) -> Result<Option<Handle>, Handle> {
        if handle.sync {
            return Err(handle);
        }
        let inode_block = match new_size {
            Some(_) => {
                let block = self.inode_block(ino);
                if !self.journal.get_write_access_now(sim, &handle, block) {
                    return Err(handle);
                }
                Some(block)
            }
            None => None,
        };
        if let Some(block) = inode_block {
            // mark_inode_dirty, its buffer taken over above. The block joined this transaction
            // before (its kind recorded then, an inode table block's for good), so
            // jbd2_journal_dirty_metadata has nothing to add.
            debug_assert_eq!(
                self.meta_kinds.borrow().get(&block),
                Some(&super::MetaKind::InodeTable)
            );
            debug_assert!(self.journal.buffer_in(&handle, block));
        }
        // With update_fsync_trans for the inode marked dirty.
        self.note_write_end(ino, reserved, new_size, inode_block.map(|_| handle.tid));
        let handle = match begin_next {
            true => match self
                .journal
                .stop_and_start_now(sim, handle, WRITE_BEGIN_CREDITS)
            {
                Ok(next) => return Ok(Some(next)),
                Err(handle) => handle,
            },
            false => handle,
        };
        let wait = self.journal.stop_now(sim, handle);
        debug_assert!(wait.is_none(), "only a synchronous handle waits at stop");
        Ok(None)
    }

    /// `ext4_da_write_end`'s bookkeeping before the inode is marked dirty: a page that took a
    /// delayed-allocation reservation, and `i_size`; with `marked_in`, also
    /// `ext4_update_inode_fsync_trans` for the transaction the inode was marked dirty in (the
    /// fast path's, in the same lookup).
    ///
    /// Returns whether `i_disksize` moved: a write that grew the file and ended in a block
    /// already allocated (not delayed, not unwritten) moves it at once
    /// (`ext4_da_should_update_i_disksize` -> `ext4_update_i_disksize` in
    /// `ext4_da_write_end`, 3.10); no writeback will allocate that block and move it later.
    /// The inode then changed its on-disk size: a datasync change (`ext4_do_update_inode`'s
    /// `need_datasync`).
    fn note_write_end(
        &self,
        ino: Ino,
        reserved: bool,
        new_size: Option<u64>,
        marked_in: Option<crate::fs::jbd2::Tid>,
    ) -> bool {
        let allocated_end = new_size.is_some_and(|size| {
            let lblk = size.saturating_sub(1) / PAGE_SIZE;
            let alloc = self.alloc.borrow();
            size > 0 && alloc.map_block(ino, lblk).is_some() && !alloc.has_unwritten(ino, lblk, 1)
        });
        let mut inodes = self.inodes.borrow_mut();
        let info = inodes.entry(ino).or_default();
        if reserved {
            info.delalloc_pages += 1;
        }
        let mut disksize_moved = false;
        if let Some(size) = new_size {
            info.size = info.size.max(size);
            if allocated_end && size > info.disksize {
                info.disksize = size;
                disksize_moved = true;
            }
        }
        if let Some(tid) = marked_in {
            info.sync_tid = info.sync_tid.max(tid);
            if disksize_moved {
                info.datasync_tid = info.datasync_tid.max(tid);
            }
        }
        disksize_moved
    }

    /// `ext4_da_write_end`: the page is dirty; `reserved` when it needed a delayed block (it was
    /// a hole); `new_size` when the write grew `i_size` (then the inode is marked dirty in the
    /// handle). Stops the handle.
    pub async fn write_end(
        &self,
        sim: &Sim,
        handle: Handle,
        ino: Ino,
        reserved: bool,
        new_size: Option<u64>,
    ) {
        let mut handle = handle;
        let disksize_moved = self.note_write_end(ino, reserved, new_size, None);
        if new_size.is_some() {
            // generic_write_end -> mark_inode_dirty: i_size changed. With delayed allocation
            // i_disksize waits for writeback, so that is not a datasync change; a write ending
            // in an allocated block moved i_disksize (`note_write_end`), which is.
            handle = self
                .mark_inode_dirty(sim, handle, ino, disksize_moved)
                .await;
        }
        self.journal.stop(sim, handle).await;
    }

    /// `file_update_time` before a write: when the coarse clock (`current_fs_time`, one tick)
    /// has moved since the inode's last update, `ext4_dirty_inode` journals the inode.
    pub async fn update_time(&self, sim: &Sim, ino: Ino) {
        let jiffy = self.hz.jiffies(sim.now());
        {
            let mut inodes = self.inodes.borrow_mut();
            let info = inodes.entry(ino).or_default();
            if info.mtime_jiffy == Some(jiffy) {
                return;
            }
            info.mtime_jiffy = Some(jiffy);
        }
        self.stats.borrow_mut().timestamp_updates += 1;
        let handle = self.start(sim, DIRTY_INODE_CREDITS).await;
        let handle = self.mark_inode_dirty(sim, handle, ino, false).await;
        self.journal.stop(sim, handle).await;
    }

    /// Writeback's allocation for the delayed pages `[first, first + count)` of `ino`
    /// (`mpage_da_map_and_submit` -> `ext4_map_blocks(EXT4_GET_BLOCKS_CREATE)`): allocates in a
    /// handle, journals the bitmaps, group descriptors and tree blocks, moves `i_disksize`
    /// (the inode block), files the inode for ordered data, and records the transaction as the
    /// inode's (data)sync transaction. Already-mapped pages are left alone. `i_size` bounds
    /// `i_disksize`.
    pub async fn allocate_for_writeback(
        &self,
        sim: &Sim,
        issuer: Issuer,
        ino: Ino,
        first: u64,
        count: u64,
    ) -> Result<(), Errno> {
        if count == 0 || !self.any_unmapped(ino, first, count) {
            return Ok(());
        }
        let handle = self.start(sim, Self::writeback_credits(count)).await;
        match self
            .allocate_in(sim, handle, issuer, ino, first, count)
            .await
        {
            Ok(handle) => {
                self.journal.stop(sim, handle).await;
                Ok(())
            }
            Err((handle, errno)) => {
                self.journal.stop(sim, handle).await;
                Err(errno)
            }
        }
    }

    /// Credits of a writeback allocation of `count` blocks (`ext4_da_writepages_trans_blocks`
    /// -> `ext4_chunk_trans_blocks`: the data-trans blocks plus a bitmap and a descriptor per
    /// group touched).
    pub fn writeback_credits(count: u64) -> u64 {
        DATA_TRANS_BLOCKS + 2 * count.div_ceil(super::layout::BLOCKS_PER_GROUP)
    }

    fn any_unmapped(&self, ino: Ino, first: u64, count: u64) -> bool {
        let alloc = self.alloc.borrow();
        (first..first + count).any(|lblk| alloc.map_block(ino, lblk).is_none())
    }

    /// [`Ext4::allocate_for_writeback`] in a handle the caller holds (`ext4_da_writepages`
    /// holds one across a batch's allocation and submission); returns the handle, with the
    /// error if allocation failed.
    pub async fn allocate_in(
        &self,
        sim: &Sim,
        handle: Handle,
        issuer: Issuer,
        ino: Ino,
        first: u64,
        count: u64,
    ) -> Result<Handle, (Handle, Errno)> {
        self.allocate_filing(sim, handle, issuer, ino, first, count, DataFiling::Ordered)
            .await
    }

    /// [`Ext4::allocate_in`] for data that `filing` says how the commit protects: ordered
    /// data (written home before the commit, so the era's filing applies) or journaled data
    /// (the block's contents go into the journal with the transaction).
    #[allow(clippy::too_many_arguments)]
    async fn allocate_filing(
        &self,
        sim: &Sim,
        mut handle: Handle,
        issuer: Issuer,
        ino: Ino,
        first: u64,
        count: u64,
        filing: DataFiling,
    ) -> Result<Handle, (Handle, Errno)> {
        if count == 0 || !self.any_unmapped(ino, first, count) {
            return Ok(handle);
        }
        let (size, writers) = {
            let inodes = self.inodes.borrow();
            let info = inodes.get(&ino).cloned().unwrap_or_default();
            (info.size, info.writers)
        };
        let request = DataAlloc {
            ino,
            lblk: first,
            len: count,
            i_size: size,
            open_for_write: writers > 0,
            pid: issuer.pid,
            cpu: 0,
            tid: handle.tid,
            // dioread_nolock: EXT4_GET_BLOCKS_IO_CREATE_EXT (mpage_map_one_extent).
            unwritten: self.writes_back_into_unwritten_extents(),
        };
        let allocated = self.alloc_mut(sim, |alloc| alloc.allocate_blocks(&request));
        let allocation = match allocated {
            Ok(allocation) => allocation,
            Err(errno) => return Err((handle, errno)),
        };
        handle = self.journal_touched(sim, handle, &allocation.touched).await;
        let newly: u64 = allocation
            .extents
            .iter()
            .map(|e| e.len)
            .sum::<u64>()
            .min(count);
        let disksize_grows = {
            let mut inodes = self.inodes.borrow_mut();
            let info = inodes.entry(ino).or_default();
            let released = newly.min(info.delalloc_pages);
            info.delalloc_pages -= released;
            self.release_reservations(released);
            let end = ((first + count) * PAGE_SIZE).min(info.size.max(info.disksize));
            if end > info.disksize {
                info.disksize = end;
                true
            } else {
                false
            }
        };
        if disksize_grows || !allocation.touched.is_empty() {
            handle = self.mark_inode_dirty(sim, handle, ino, true).await;
        }
        // ext4_map_blocks files new blocks from Linux 4.7 (06bd3c36a733); 3.9-4.6, the papers'
        // 3.10 included, file nothing here: `ordered_delalloc`. It files them only when
        // `ext4_should_order_data(inode)`: never for journaled data, whose blocks the commit
        // carries in the journal (MobiFS's checkpoint). It never files unwritten ones
        // (`!(map->m_flags & EXT4_MAP_UNWRITTEN)`): under dioread_nolock the commit does not
        // wait for this data.
        if filing == DataFiling::Ordered
            && self.config.data == super::mount::DataMode::Ordered
            && self.config.ordered_delalloc(self.kernel.get())
            && !request.unwritten
        {
            self.journal.file_inode(&handle, ino);
            if self.ordered_data_tracked.get() {
                // Invariant c: these pages' data must reach the device before the commit.
                for extent in &allocation.extents {
                    let start = extent.lblk.max(first);
                    let end = (extent.lblk + extent.len).min(first + count);
                    if start < end {
                        self.journal
                            .check_ordered_allocated(handle.tid, ino, start, end - start);
                    }
                }
            }
        }
        {
            let mut stats = self.stats.borrow_mut();
            stats.allocations += 1;
            stats.allocated_blocks += newly;
        }
        Ok(handle)
    }

    /// `ext4_setattr` shrinking the file to `new_size` (the caller has dropped the pages past it):
    /// the inode goes on the orphan list in one handle, the blocks past the end are freed (held
    /// until the commit, then discarded) and it leaves the orphan list in another. Truncating to
    /// zero arms `auto_da_alloc` for the next close.
    pub async fn truncate(&self, sim: &Sim, ino: Ino, new_size: u64) {
        let handle = self.start(sim, SETATTR_CREDITS).await;
        let handle = self.orphan(sim, handle, ino, true).await;
        self.journal.stop(sim, handle).await;
        let mut handle = self.start(sim, DATA_TRANS_BLOCKS + 3).await;
        let first_gone = new_size.div_ceil(PAGE_SIZE);
        let tid = handle.tid;
        let touched = self.alloc_mut(sim, |alloc| alloc.truncate(ino, first_gone, tid));
        handle = self.journal_touched(sim, handle, &touched).await;
        {
            let mut inodes = self.inodes.borrow_mut();
            let info = inodes.entry(ino).or_default();
            info.size = new_size;
            // ext4_setattr sets i_disksize to the new size, and so does ext4_ext_truncate
            // ("we have to know where to truncate from in crash case").
            info.disksize = new_size;
            // Delayed pages past the end were dropped with the page cache.
            if new_size == 0 {
                self.release_reservations(info.delalloc_pages);
                info.delalloc_pages = 0;
                info.da_alloc_close = self.config.auto_da_alloc;
            }
        }
        handle = self.orphan(sim, handle, ino, false).await;
        handle = self.mark_inode_dirty(sim, handle, ino, true).await;
        self.stats.borrow_mut().truncates += 1;
        self.journal.stop(sim, handle).await;
    }

    /// `ext4_da_reserve_space` for one page (`ext4_da_get_block_prep`): `ENOSPC` when the free
    /// blocks are all reserved by delayed pages already (`ext4_claim_free_clusters` with the
    /// reserve counted as used).
    pub fn reserve_delalloc(&self) -> Result<(), Errno> {
        let free = crate::fs::FileSystem::free_blocks(&*self.alloc.borrow());
        if free <= self.reserved_blocks.get() {
            return Err(Errno::ENOSPC);
        }
        self.reserved_blocks.set(self.reserved_blocks.get() + 1);
        Ok(())
    }

    /// Gives back `pages` delayed-allocation reservations (allocated, truncated or evicted).
    pub(crate) fn release_reservations(&self, pages: u64) {
        let reserved = self.reserved_blocks.get();
        self.reserved_blocks.set(reserved.saturating_sub(pages));
    }

    /// `ext4_setattr` growing a file (`truncate` up, `ftruncate` past the end): the new size
    /// goes to the inode in a handle (`EXT4_HT_INODE`, 3 credits), no orphan, no blocks freed.
    /// `i_disksize` too: 3.10's `ext4_setattr` calls `ext4_truncate` for every size change,
    /// and `ext4_ext_truncate` sets `i_disksize = i_size` ("we have to know where to truncate
    /// from in crash case"), a datasync change of the inode.
    pub async fn setattr_grow(&self, sim: &Sim, ino: Ino, new_size: u64) {
        let handle = self.start(sim, SETATTR_CREDITS).await;
        {
            let mut inodes = self.inodes.borrow_mut();
            let info = inodes.entry(ino).or_default();
            info.size = new_size;
            info.disksize = new_size;
        }
        let handle = self.mark_inode_dirty(sim, handle, ino, true).await;
        self.journal.stop(sim, handle).await;
    }

    /// An open for writing (`i_writecount`).
    pub fn open_for_write(&self, ino: Ino) {
        self.inodes.borrow_mut().entry(ino).or_default().writers += 1;
    }

    /// `ext4_release_file` of a writer: the last one drops the inode's preallocation. Returns
    /// whether the caller should start writing the file's delayed data (`auto_da_alloc` after a
    /// truncate to zero: `ext4_alloc_da_blocks` -> `filemap_flush`).
    pub fn release_writer(&self, ino: Ino) -> bool {
        let mut inodes = self.inodes.borrow_mut();
        let Some(info) = inodes.get_mut(&ino) else {
            return false;
        };
        info.writers = info.writers.saturating_sub(1);
        let flush = std::mem::replace(&mut info.da_alloc_close, false) && info.delalloc_pages > 0;
        if info.writers == 0 {
            drop(inodes);
            self.alloc.borrow_mut().discard_preallocations(ino);
        }
        flush
    }

    /// `data=journal`'s write end for page `index` of `ino` (`ext4_journalled_write_end`): the
    /// page's block, allocated now if it has none (no delayed allocation with data=journal),
    /// cached without a read and journaled in `handle` like a metadata buffer; the inode's
    /// (data)sync transaction is the handle's, so fsync commits it
    /// (`ext4_sync_file` -> `ext4_force_commit`). A full disk leaves the page unjournaled
    /// (simplification: the write does not fail).
    pub async fn journal_data_page(
        &self,
        sim: &Sim,
        handle: Handle,
        issuer: Issuer,
        ino: Ino,
        index: u64,
    ) -> Handle {
        let mut handle = handle;
        if !self.is_mapped(ino, index) {
            let allocated = self
                .allocate_filing(sim, handle, issuer, ino, index, 1, DataFiling::Journaled)
                .await;
            handle = match allocated {
                Ok(h) => h,
                Err((h, _errno)) => return h,
            };
        }
        let Some(block) = self.alloc.borrow().map_block(ino, index) else {
            return handle;
        };
        self.journal.buffers.getblk(sim, block).await;
        let mut touched = super::Touched::new();
        touched.add(block, super::MetaKind::JournaledData);
        let handle = self.journal_touched(sim, handle, &touched).await;
        self.crash_note_journaled(handle.tid, ino, index, block);
        self.update_fsync_trans(handle.tid, ino, true);
        self.stats.borrow_mut().journaled_data_pages += 1;
        handle
    }

    /// Whether page `index` of `ino` has a block on disk (not a hole, not delayed).
    pub fn is_mapped(&self, ino: Ino, index: u64) -> bool {
        self.alloc.borrow().map_block(ino, index).is_some()
    }
}
