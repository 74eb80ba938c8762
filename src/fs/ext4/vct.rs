//! MobiFS's checkpointer on ext4 (seed 004 §4.3, §6.2): a VCT made durable and atomic through
//! the journal. The paper's four calls map onto jbd2:
//!
//! - `BEGIN TRANSACTION`: one handle with credits for every page, its allocation and the
//!   inodes ([`Ext4::vct_begin`]); the handle keeps the whole VCT in one jbd2 transaction;
//! - `APPEND ENTRY`: the page's block, allocated if it has none, journaled as data
//!   (`ext4_journalled_write_end`'s path, [`Ext4::journal_data_page`]): written to the log at
//!   commit and home at checkpoint, the *write-twice* §6.2 measures ([`Ext4::vct_append`]);
//!   the file's size moves to the VCT's in the same handle ([`Ext4::vct_size`]);
//! - `END TRANSACTION`: the handle stops ([`Ext4::vct_end`]);
//! - `WAIT SYNC`: the transaction's commit is started and waited for, with a flush when the
//!   commit sends none, as `ext4_sync_file` does ([`Ext4::vct_wait_sync`]).
//!
//! Recovery at mount is jbd2's replay: a committed transaction is replayed whole, an
//! uncommitted one is ignored, so a VCT is either in flash or not.
//!
//! Simplifications: a VCT whose credits would exceed the journal's transaction limit is
//! refused (`EFBIG`): the policy caps a VCT's size below it ([`Ext4::vct_max_pages`]); if the
//! handle had to restart anyway (the estimate was short), the VCT spans two transactions and
//! `ext4.vct_split` counts it.

use super::mount::Ext4;
use super::Tid;
use crate::errno::Errno;
use crate::fs::jbd2::Handle;
use crate::mm::{Ino, Issuer};
use crate::sim::Sim;

/// A VCT being committed: the handle and the transaction it began in.
pub struct VctHandle {
    handle: Handle,
    began_in: Tid,
}

impl Ext4 {
    /// Credits for a VCT of `pages` pages over `inodes` files: each page's data block, the
    /// allocation's bitmaps, group descriptors and tree blocks (`ext4_writepage_trans_blocks`
    /// per batch), and each inode.
    fn vct_credits(pages: u64, inodes: u64) -> u64 {
        pages + Self::writeback_credits(pages) + inodes
    }

    /// The largest VCT (in pages, over `inodes` files) one jbd2 transaction takes.
    pub fn vct_max_pages(&self, inodes: u64) -> u64 {
        let max = self.journal.config.max_transaction_buffers();
        let mut pages = max / 2;
        while pages > 1 && Self::vct_credits(pages, inodes) > max {
            pages = pages * 9 / 10;
        }
        pages
    }

    /// `BEGIN TRANSACTION`.
    pub async fn vct_begin(&self, sim: &Sim, pages: u64, inodes: u64) -> Result<VctHandle, Errno> {
        let credits = Self::vct_credits(pages, inodes);
        if credits > self.journal.config.max_transaction_buffers() {
            return Err(Errno::EFBIG);
        }
        let handle = self.start(sim, credits).await;
        self.stats.borrow_mut().vct_commits += 1;
        Ok(VctHandle {
            began_in: handle.tid,
            handle,
        })
    }

    /// `APPEND ENTRY`: page `index` of `ino` joins the transaction as journaled data.
    pub async fn vct_append(
        &self,
        sim: &Sim,
        vct: VctHandle,
        issuer: Issuer,
        ino: Ino,
        index: u64,
    ) -> VctHandle {
        let handle = self
            .journal_data_page(sim, vct.handle, issuer, ino, index)
            .await;
        VctHandle { handle, ..vct }
    }

    /// The file's size as the VCT left it: `i_size` and `i_disksize` move there, and the
    /// inode is journaled in the VCT's handle.
    pub async fn vct_size(&self, sim: &Sim, vct: VctHandle, ino: Ino, size: u64) -> VctHandle {
        {
            let mut inodes = self.inodes.borrow_mut();
            let info = inodes.entry(ino).or_default();
            info.size = info.size.max(size);
            info.disksize = size;
        }
        let handle = self.mark_inode_dirty(sim, vct.handle, ino, true).await;
        VctHandle { handle, ..vct }
    }

    /// `END TRANSACTION`: returns the transaction the VCT's data is in.
    pub async fn vct_end(&self, sim: &Sim, vct: VctHandle) -> Tid {
        let tid = vct.handle.tid;
        if tid != vct.began_in {
            self.stats.borrow_mut().vct_split += 1;
        }
        self.journal.stop(sim, vct.handle).await;
        tid
    }

    /// `WAIT SYNC`: the commit of `tid`, then a flush if the commit sent none.
    pub async fn vct_wait_sync(&self, sim: &Sim, issuer: Issuer, tid: Tid) {
        self.complete_with_barrier(sim, issuer, tid).await;
    }
}
