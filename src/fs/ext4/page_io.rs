//! The completion of writeback into unwritten extents (fs/ext4/page-io.c and the conversion in
//! fs/ext4/extents.c, Linux 5.10 to 6.6 and mainline alike), used under `dioread_nolock`
//! ([`super::mount::Ext4Config::dioread_nolock`], the default from 5.6).
//!
//! Writeback maps delayed blocks as unwritten extents and files no ordered data for them
//! ([`Ext4::allocate_in`]). When a bio of such blocks completes, `ext4_end_bio` does not end
//! its pages' writeback: `ext4_put_io_end_defer` puts the `io_end` on the inode's
//! `i_rsv_conversion_list` and queues `ext4_end_io_rsv_work` on the file system's
//! `ext4-rsv-conversion` workqueue (`alloc_workqueue(.., WQ_MEM_RECLAIM | WQ_UNBOUND, 1)`: one
//! work at a time). The work (`ext4_do_flush_completed_IO` -> `ext4_end_io_end`) starts the
//! handle reserved when the writeback started (`ext4_journal_start_reserved`), converts the
//! range (`ext4_convert_unwritten_io_end_vec` -> `ext4_convert_unwritten_extents` ->
//! `ext4_map_blocks(EXT4_GET_BLOCKS_IO_CONVERT_EXT)`: the extent split and marked initialized,
//! the tree blocks and the inode journaled, `ext4_update_inode_fsync_trans(.., 1)`), stops the
//! handle, and only then ends the pages' writeback (`ext4_release_io_end` -> `ext4_finish_bio`).
//!
//! So a commit does not wait for the background data (nothing was filed), the conversion
//! lands in whatever transaction runs when the data is on disk, and `fsync` of the file
//! waits for it twice over: `file_write_and_wait_range` waits for the pages' writeback, which
//! ends after the conversion, and the conversion moved the inode's `i_datasync_tid` to its
//! transaction, which `ext4_sync_file` then commits. (Before 3.11, `ext4_end_io_work` started
//! an ordinary handle, which waits for a locked transaction:
//! [`crate::kernel::KernelVersion::has_reserved_conversion_handles`].)
//!
//! Simplifications: an `io_end` is one bio here (Linux's spans every bio of a mapped extent
//! and is converted when the last completes); the reserved credits are taken when the work
//! starts its handle, not held from the writeback on; reads of an unwritten extent would
//! return zeros without I/O, but none arise (its pages stay cached under writeback until the
//! conversion); a failed split (no space for a leaf) leaves the range unwritten.

use super::mount::Ext4;
use crate::mm::bio::PageSpan;
use crate::mm::Ino;
use crate::sim::{Blocker, Sim, WaitReason};
use std::rc::Rc;

/// The workqueue's name (`alloc_workqueue("ext4-rsv-conversion", ..)`), which its worker's
/// task carries.
pub const RSV_CONVERSION_COMM: &str = "ext4-rsv-conversion";

/// What ends a completed bio's pages' writeback (`ext4_finish_bio`).
pub(crate) type EndWriteback = Box<dyn FnOnce(&Sim)>;

/// A completed bio whose unwritten blocks await conversion (`ext4_io_end_t` with
/// `EXT4_IO_END_UNWRITTEN`): its range, and what ends its pages' writeback.
pub(crate) struct PendingConversion {
    ino: Ino,
    lblk: u64,
    len: u64,
    finish: EndWriteback,
}

impl Ext4 {
    /// Whether writeback allocates unwritten extents (`ext4_should_dioread_nolock` for a
    /// regular file under the kernel version followed).
    pub fn writes_back_into_unwritten_extents(&self) -> bool {
        self.config
            .writes_back_into_unwritten_extents(self.kernel.get())
    }

    /// `ext4_end_bio` for a write bio of `span`: when its blocks include unwritten ones,
    /// queues their conversion (`ext4_put_io_end_defer` -> `ext4_add_complete_io`), which calls
    /// `finish` (the pages' end of writeback) when done, and returns `None`; otherwise gives
    /// `finish` back for the caller to call now.
    pub(crate) fn end_bio(
        self: &Rc<Self>,
        sim: &Sim,
        span: PageSpan,
        finish: EndWriteback,
    ) -> Option<EndWriteback> {
        let (lblk, len) = (span.index, u64::from(span.count));
        let pending = self.alloc.borrow().has_unwritten(span.ino, lblk, len);
        if !pending {
            return Some(finish);
        }
        self.conversions.borrow_mut().push_back(PendingConversion {
            ino: span.ino,
            lblk,
            len,
            finish,
        });
        // queue_work(EXT4_SB(sb)->rsv_conversion_wq, &ei->i_rsv_conversion_work).
        if self.conversion_worker.get().is_none() {
            let (ext4, s) = (self.clone(), sim.clone());
            let worker = sim.spawn_daemon(RSV_CONVERSION_COMM, async move {
                ext4.rsv_conversion_worker(&s).await
            });
            self.conversion_worker.set(Some(worker.task()));
        } else {
            self.conversion_wake.wake_one(sim);
        }
        None
    }

    /// The `ext4-rsv-conversion` workqueue's worker: `ext4_end_io_rsv_work` for each queued
    /// completion, in order, one at a time.
    async fn rsv_conversion_worker(&self, sim: &Sim) {
        loop {
            let next = self.conversions.borrow_mut().pop_front();
            match next {
                Some(pending) => self.end_io_end(sim, pending).await,
                None => {
                    self.conversion_wake
                        .wait(sim, WaitReason::WaitQueue, Blocker::None)
                        .await
                }
            }
        }
    }

    /// `ext4_end_io_end`: the conversion in the reserved handle
    /// (`ext4_convert_unwritten_io_end_vec`), then the end of the pages' writeback.
    async fn end_io_end(&self, sim: &Sim, pending: PendingConversion) {
        // ext4_writepages' reservation: rsv_blocks = 1 + ext4_chunk_trans_blocks(inode, 1).
        let credits = 1 + Ext4::writeback_credits(1);
        let mut handle = if self.kernel.get().has_reserved_conversion_handles() {
            self.journal.start_reserved(sim, credits)
        } else {
            self.start(sim, credits).await
        };
        let tid = handle.tid;
        let converted = self.alloc_mut(sim, |alloc| {
            alloc.convert_unwritten(pending.ino, pending.lblk, pending.len, tid)
        });
        if let Some(touched) = converted.ok().filter(|t| !t.is_empty()) {
            handle = self.journal_touched(sim, handle, &touched).await;
            // ext4_convert_unwritten_extents: ext4_mark_inode_dirty; the conversion itself
            // (ext4_ext_handle_unwritten_extents) calls ext4_update_inode_fsync_trans(.., 1).
            handle = self.mark_inode_dirty(sim, handle, pending.ino, true).await;
            let mut stats = self.stats.borrow_mut();
            stats.unwritten_conversions += 1;
            stats.converted_blocks += pending.len;
        }
        self.journal.stop(sim, handle).await;
        // ext4_release_io_end -> ext4_finish_bio: end_page_writeback.
        (pending.finish)(sim);
    }

    /// Completions waiting for the conversion work (tests, reports).
    pub fn pending_conversions(&self) -> usize {
        self.conversions.borrow().len()
    }
}
