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
//! A directory (any non-regular inode) takes another path, in every version: 3.10's
//! `ext4_sync_file` calls `ext4_force_commit` (then `goto out`: no `needs_barrier` flush) when
//! `ext4_should_journal_data(inode)`, which `ext4_inode_journal_mode` makes true for every
//! `!S_ISREG` inode; 6.4 dropped that branch (e360c6ed7274, "ext4: Drop special handling of
//! journalled data from ext4_sync_file()") and put the same call back for non-regular inodes in
//! `ext4_fsync_journal` (1077b2d53ef5, "ext4: Fix fsync for non-directories", J. Kara,
//! 6.4-rc5: "Fastcommit does not really support fsync on directories or other special files.
//! Force a full commit."), both in 6.4, so every released version forces a commit and sends no
//! flush of its own. `ext4_force_commit` is `jbd2_journal_force_commit`, which changed in 3.11
//! ([`crate::fs::jbd2::Journal::force_commit`]): 3.10 commits an empty transaction when the
//! journal is idle, later versions write nothing then.
//!
//! Simplifications: see [`crate::fs::jbd2::Journal::trans_will_send_data_barrier`] (on an
//! internal journal: "the transaction has not committed yet and barriers are on");
//! `ext4_flush_unwritten_io` has nothing to do (no unwritten extents); the directory path is
//! taken for directories only (the model has no symlinks or special files that can be
//! fsynced); 3.10's synchronous-handle batching in `jbd2_journal_stop` (a sleep of up to the
//! average commit time when another task was the last synchronous writer) is not modelled;
//! fast commits (5.10+, off by default) are not modelled.

use super::mount::Ext4;
use crate::kernel::KernelVersion;
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
        let needs_barrier = self.config.barrier
            && !self
                .journal
                .trans_will_send_data_barrier(tid, self.kernel.get())
            && self.config.mutant != Some(crate::fs::mutant::Mutant::FsyncNoFlush);
        let waited = self.journal.complete_transaction(sim, tid).await;
        if needs_barrier {
            self.issue_flush(sim, issuer).await;
        }
        waited
    }

    /// The Linux version whose behaviour the file system and its journal follow
    /// (`[stack.kernel] version`).
    pub fn kernel_version(&self) -> KernelVersion {
        self.kernel.get()
    }

    /// Sets the Linux version to follow (the stack sets `[stack.kernel] version` after the
    /// mount; default 3.10).
    pub fn set_kernel_version(&self, version: KernelVersion) {
        self.kernel.set(version);
    }

    /// The journal part of `ext4_sync_file`. Returns whether it waited for a commit.
    pub async fn fsync(&self, sim: &Sim, issuer: Issuer, ino: Ino, datasync: bool) -> bool {
        if self.alloc.borrow().is_dir(ino) {
            return self.fsync_dir(sim).await;
        }
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

    /// `ext4_sync_file` of a directory: `ext4_force_commit` -> `jbd2_journal_force_commit`
    /// (3.10: the `ext4_should_journal_data` branch; 6.4+: `ext4_fsync_journal`'s `!S_ISREG`
    /// branch), with no flush of its own. Returns whether it waited for a commit.
    async fn fsync_dir(&self, sim: &Sim) -> bool {
        let waited = self.journal.force_commit(sim, self.kernel.get()).await;
        let mut stats = self.stats.borrow_mut();
        if waited {
            stats.fsyncs_committed += 1;
            stats.dir_fsyncs_committed += 1;
        } else {
            stats.dir_fsyncs_idle += 1;
        }
        waited
    }
}
