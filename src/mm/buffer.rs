//! Metadata buffers in the block device's page cache (fs/buffer.c, Linux 3.10): a journaling
//! file system's bitmaps, inode tables, directory and extent blocks are `buffer_head`s on the
//! pages of the block device's own mapping ([`BDEV_INO`]), read on first use (`sb_bread` /
//! `__ext4_get_inode_loc`), cached afterwards, dirtied by jbd2 after commit and written home by
//! the flusher like any other dirty page, as asynchronous I/O (QASIO's D_meta when a task then
//! needs the buffer).
//!
//! Simplifications: a 4 KiB block is one page with one buffer, so buffer state is page state:
//! `BH_Lock` is the page lock *or* the page's writeback (a buffer under write I/O is locked
//! until `end_buffer_async_write`); `BH_Dirty` is the page's dirty bit; `BH_Uptodate` the
//! page's; a journal reference (`jh`, `b_count`) is [`pg::PINNED`]. No `BH_JBDDirty` here: jbd2
//! keeps that itself and calls [`Mm::mark_buffer_dirty`] when it refiles the buffer after commit.
//! A buffer redirtied while its home write is in flight is not written a second time.

use super::{pg, Issuer, Mm, PageSpan, BDEV_INO};
use crate::dev::{IoFlags, IoOp};
use crate::mm::bio::{BioRequest, IoPurpose};
use crate::sim::{Sim, WaitReason};

/// The flags of a metadata buffer's read, by what it holds, as ext4 in 3.10 submits them:
/// inode-table blocks (`__ext4_get_inode_loc`), bitmaps (`ext4_read_block_bitmap_nowait`,
/// `ext4_read_inode_bitmap`) and directory blocks (`ext4_bread`) are
/// `READ | REQ_META | REQ_PRIO` (REQ_PRIO since 3.1's "block: separate priority boosting from
/// REQ_META"; CFQ lets them preempt); extent blocks (`bh_submit_read`) and the superblock and
/// group descriptors (`sb_bread`) are a plain `READ`. A read is synchronous for the elevator
/// whatever its flags (`rq_is_sync`).
pub fn meta_read_flags(purpose: IoPurpose) -> IoFlags {
    let meta = matches!(
        purpose,
        IoPurpose::Inode | IoPurpose::BlockBitmap | IoPurpose::InodeBitmap | IoPurpose::Directory
    );
    IoFlags {
        meta,
        prio: meta,
        ..IoFlags::default()
    }
}

/// Checkpoint writes are `write_dirty_buffer(bh, WRITE_SYNC)`: REQ_SYNC | REQ_NOIDLE, no
/// REQ_META (jbd2 added REQ_META to its own writes only in Linux 6.8, commit 6a3afb6ac6df
/// "jbd2: increase the journal IOs priority", and never to checkpoint writes).
const CHECKPOINT_WRITE: IoFlags = IoFlags {
    sync: true,
    meta: false,
    prio: false,
    fua: false,
    preflush: false,
    postflush: false,
    noidle: true,
};

impl Mm {
    /// `lock_buffer` on disk block `block`: waits while the buffer is locked by another task or
    /// under write I/O (wait reason `lock_buffer`, the request carrying it as blocker: QASIO's
    /// D_meta), then locks it. A buffer not cached is read first, synchronously, as `issuer`.
    pub async fn lock_buffer(&self, sim: &Sim, block: u64, issuer: Issuer) {
        loop {
            let Some(id) = self.find_page(BDEV_INO, block) else {
                // Not cached: allocate, lock and read it (`__bread`).
                let Some(id) = self.add_new_page(sim, BDEV_INO, block, issuer, 0).await else {
                    continue;
                };
                self.state().stats.pages_read += 1;
                let span = PageSpan {
                    ino: BDEV_INO,
                    index: block,
                    count: 1,
                };
                let purpose = self.purpose_of(BDEV_INO, block);
                let bio = BioRequest::for_pages(
                    IoOp::Read,
                    block,
                    1,
                    meta_read_flags(purpose),
                    issuer,
                    Some(span),
                    purpose,
                );
                self.submit_wait(sim, bio).await;
                self.set_flags(id, pg::UPTODATE, 0);
                self.check(sim, "__bread");
                return;
            };
            let page = self.page(id);
            if page.has(pg::WRITEBACK) {
                self.wait_on_page_bit(sim, BDEV_INO, block, pg::WRITEBACK, WaitReason::BufferLock)
                    .await;
                continue;
            }
            if page.has(pg::LOCKED) {
                self.wait_on_page_bit(sim, BDEV_INO, block, pg::LOCKED, WaitReason::BufferLock)
                    .await;
                continue;
            }
            if self.trylock_page(id) {
                return;
            }
        }
    }

    /// `sb_getblk` + `set_buffer_uptodate` for a block about to be written whole: cached, no
    /// read (a journaled data block whose page was just copied).
    pub async fn getblk_uptodate(&self, sim: &Sim, block: u64, issuer: Issuer) {
        if self.find_page(BDEV_INO, block).is_some() {
            return;
        }
        if let Some(id) = self.add_new_page(sim, BDEV_INO, block, issuer, 0).await {
            self.set_flags(id, pg::UPTODATE, 0);
            self.unlock_page(sim, id);
        }
    }

    /// `trylock_buffer`: locks a cached buffer with no lock holder and no write in flight;
    /// false where [`Self::lock_buffer`] would wait or read.
    pub fn trylock_buffer(&self, block: u64) -> bool {
        let Some(id) = self.find_page(BDEV_INO, block) else {
            return false;
        };
        !self.page(id).has(pg::WRITEBACK) && self.trylock_page(id)
    }

    /// `trylock_buffer`, `test_clear_buffer_dirty` and `unlock_buffer` with one lookup of the
    /// buffer's page: `Some(was_dirty)` if the lock was free (the page is left unlocked and
    /// clean, and its waiters woken as `unlock_buffer` wakes them), `None` (nothing changed)
    /// if `trylock_buffer` would have failed.
    pub fn take_over_unlocked_buffer(&self, sim: &Sim, block: u64) -> Option<bool> {
        let (dirty, waiters) = {
            let mut state = self.state();
            let id = state.find_buffer_page(block)?;
            let page = &mut state.pages[id as usize];
            if page.has(pg::WRITEBACK) || page.has(pg::LOCKED) {
                return None;
            }
            let waiters = page.has(pg::WAITERS);
            page.flags &= !pg::WAITERS;
            (state.clear_page_dirty(id), waiters)
        };
        self.wake_page_if_waiters(sim, BDEV_INO, block, waiters);
        Some(dirty)
    }

    /// `unlock_buffer`.
    pub fn unlock_buffer(&self, sim: &Sim, block: u64) {
        let id = self
            .find_page(BDEV_INO, block)
            .expect("a locked buffer stays cached");
        self.unlock_page(sim, id);
    }

    /// `test_clear_buffer_dirty`: whether the buffer was dirty; it is not any more.
    pub fn test_clear_buffer_dirty(&self, block: u64) -> bool {
        let Some(id) = self.find_page(BDEV_INO, block) else {
            return false;
        };
        let cleared = self.state().clear_page_dirty(id);
        cleared
    }

    /// `mark_buffer_dirty`: the buffer is to be written home by writeback. A buffer no longer
    /// cached (it cannot be: the journal pins it until now) is re-created uptodate.
    pub fn mark_buffer_dirty(&self, sim: &Sim, block: u64) {
        let id = self
            .find_page(BDEV_INO, block)
            .expect("a journaled buffer is pinned in the cache");
        if self.page(id).has(pg::WRITEBACK) {
            // Redirtied while its previous home write is in flight: the page cache keeps dirty
            // and under-write apart, so it is marked to become dirty when that write ends
            // (end_writeback_span), and the newer contents are written home after it.
            self.set_flags(id, pg::REDIRTY, 0);
            return;
        }
        let first_dirty_inode = {
            let mut state = self.state();
            state.pages[id as usize].flags |= pg::UPTODATE;
            let (_, first) = state.set_page_dirty(id, self.hz.jiffies(sim.now()));
            first
        };
        if first_dirty_inode {
            self.bdi_wakeup_thread_delayed(sim);
        }
        self.check(sim, "mark_buffer_dirty");
    }

    /// Neither dirty nor under write (nor absent and never written).
    pub fn buffer_is_clean(&self, block: u64) -> bool {
        self.find_page(BDEV_INO, block)
            .is_none_or(|id| !self.page(id).has(pg::DIRTY) && !self.page(id).has(pg::WRITEBACK))
    }

    /// `write_dirty_buffer(bh, WRITE_SYNC)` + `wait_on_buffer` (checkpointing): writes the buffer
    /// home if dirty, else waits for a write in flight.
    pub async fn write_buffer_home(&self, sim: &Sim, block: u64, issuer: Issuer) {
        let Some(id) = self.lock_page(sim, BDEV_INO, block).await else {
            return;
        };
        if !self.page(id).has(pg::DIRTY) {
            self.unlock_page(sim, id);
            self.wait_on_page_bit(sim, BDEV_INO, block, pg::WRITEBACK, WaitReason::BufferLock)
                .await;
            return;
        }
        self.state().start_writeback(id);
        self.unlock_page(sim, id);
        let span = PageSpan {
            ino: BDEV_INO,
            index: block,
            count: 1,
        };
        let bio = BioRequest {
            uid: 0,
            ..BioRequest::for_pages(
                IoOp::Write,
                block,
                1,
                CHECKPOINT_WRITE,
                issuer,
                Some(span),
                IoPurpose::Checkpoint,
            )
        };
        self.submit_writeback_bio(sim, span, bio).await;
        self.wait_on_page_bit(sim, BDEV_INO, block, pg::WRITEBACK, WaitReason::BufferLock)
            .await;
    }

    /// The journal takes (or drops) its reference on the buffer.
    pub fn pin_buffer(&self, block: u64, pinned: bool) {
        if let Some(id) = self.find_page(BDEV_INO, block) {
            if pinned {
                self.set_flags(id, pg::PINNED, 0);
            } else {
                self.set_flags(id, 0, pg::PINNED);
            }
        }
    }
}
