//! `ext4_sync_file` (fs/ext4/fsync.c, 3.10) after the data part the VFS runs first
//! (`filemap_write_and_wait_range`, which allocates delayed blocks and so journals them):
//!
//! ```c
//! commit_tid = datasync ? ei->i_datasync_tid : ei->i_sync_tid;
//! if (journal->j_flags & JBD2_BARRIER &&
//!     !jbd2_trans_will_send_data_barrier(journal, commit_tid))
//!         needs_barrier = true;
//! ret = jbd2_complete_transaction(journal, commit_tid);
//! if (needs_barrier)
//!         blkdev_issue_flush(inode->i_sb->s_bdev, GFP_KERNEL, NULL);
//! ```
//!
//! So an fsync waits for the commit of the last transaction that changed the inode (QASIO
//! I_jcommit when that commit waits on asynchronous I/O, such as its discards), and an
//! `fdatasync` of a file whose size and block map did not change commits nothing: it only
//! flushes the device cache (the JOJ paper's point on `fdatasync`).
//!
//! Simplifications: see [`crate::fs::jbd2::Journal::trans_will_send_data_barrier`] (on an
//! internal journal: "the transaction has not committed yet and barriers are on");
//! `ext4_flush_unwritten_io` has nothing to do (no unwritten extents).

use super::mount::Ext4;
use crate::mm::{Ino, Issuer};
use crate::sim::Sim;

impl Ext4 {
    /// `ext4_sync_fs(sb, wait = 1)` (3.10): `jbd2_journal_start_commit` of the running
    /// transaction (or the committing one), `jbd2_log_wait_commit`, and a flush when the
    /// commit will not send one (`needs_barrier`).
    pub async fn sync_fs(&self, sim: &Sim, issuer: Issuer) {
        let tid = self
            .journal
            .running_tid()
            .unwrap_or_else(|| self.journal.commit_sequence());
        self.complete_with_barrier(sim, issuer, tid).await;
    }

    /// `jbd2_complete_transaction(tid)`, then `blkdev_issue_flush` when barriers are on and the
    /// commit will not send one (`needs_barrier`, as `ext4_sync_file` and `ext4_sync_fs`
    /// decide it before waiting). Returns whether it waited for a commit.
    pub(crate) async fn complete_with_barrier(
        &self,
        sim: &Sim,
        issuer: Issuer,
        tid: super::Tid,
    ) -> bool {
        let needs_barrier = self.config.barrier && !self.journal.trans_will_send_data_barrier(tid);
        let waited = self.journal.complete_transaction(sim, tid).await;
        if needs_barrier {
            self.issue_flush(sim, issuer).await;
        }
        waited
    }

    /// The journal part of `ext4_sync_file`. Returns whether it waited for a commit.
    pub async fn fsync(&self, sim: &Sim, issuer: Issuer, ino: Ino, datasync: bool) -> bool {
        let tid = {
            let inodes = self.inodes.borrow();
            let info = inodes.get(&ino).cloned().unwrap_or_default();
            if datasync {
                info.datasync_tid
            } else {
                info.sync_tid
            }
        };
        let waited = self.complete_with_barrier(sim, issuer, tid).await;
        let mut stats = self.stats.borrow_mut();
        if waited {
            stats.fsyncs_committed += 1;
        } else {
            stats.fsyncs_flush_only += 1;
        }
        waited
    }
}
