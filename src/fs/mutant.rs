//! Deliberate journal and fsync bugs: the mutants of crash-point checking's own test suite
//! (issue 45's mutation gate, `tests/crash_mutants.rs`). A checker that passes a build with one
//! of these bugs cannot be trusted to pass a correct one for the right reason.
//!
//! Only tests set a mutant: it lives in a `#[serde(skip)]`, `#[doc(hidden)]` field of the
//! file system's configuration ([`crate::fs::ext4::Ext4Config`]), so no scenario file can name
//! one. `None` (every normal run) changes nothing. A run with a mutant turns the journal's
//! run-time invariant checks off ([`crate::fs::jbd2::check`]): the point of the gate is whether
//! crashcheck finds the bug from what reaches the disk, not whether the model's own asserts do.

/// One deliberate bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mutant {
    /// (a) `jbd2_journal_commit_transaction` submits the commit block (with its flush and
    /// FUA) before the descriptor and metadata log blocks; the blocks keep their places in the
    /// log. A class of real journal bugs: a commit record that reaches the media before the
    /// blocks it commits.
    CommitBeforeLog,
    /// (b) The commit block goes without its preceding cache flush (`WRITE_FUA` instead of
    /// `WRITE_FLUSH_FUA`): the log blocks and the ordered data may still sit in the device's
    /// volatile cache when the commit block is durable.
    NoPreflush,
    /// (c) The commit does not wait for the ordered data (`journal_finish_inode_data_buffers`
    /// skipped): a committed size or block map may expose blocks not yet written.
    NoOrderedWait,
    /// (d) `ext4_sync_file` never issues its own `blkdev_issue_flush` (`needs_barrier`
    /// ignored): an fsync that finds its transaction already committed returns with the data
    /// in the device's cache.
    FsyncNoFlush,
    /// (e) `ext4_rename` changes the directory entries without journaling the blocks it
    /// touched (no `ext4_handle_dirty_dirent_node`).
    RenameNotJournaled,
}

impl Mutant {
    /// Every mutant, in the gate's order.
    pub const ALL: [Mutant; 5] = [
        Mutant::CommitBeforeLog,
        Mutant::NoPreflush,
        Mutant::NoOrderedWait,
        Mutant::FsyncNoFlush,
        Mutant::RenameNotJournaled,
    ];

    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Mutant::CommitBeforeLog => "commit block before log blocks",
            Mutant::NoPreflush => "no pre-commit flush",
            Mutant::NoOrderedWait => "ordered data not waited for",
            Mutant::FsyncNoFlush => "fsync without the device flush",
            Mutant::RenameNotJournaled => "rename not journaled",
        }
    }
}
