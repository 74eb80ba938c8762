//! jbd2: the journaling layer under ext4 (fs/jbd2 of Linux 3.10.9, the Galaxy S5's kernel).
//!
//! - [`transaction`]: handles and the running transaction (`transaction.c`):
//!   `jbd2_journal_start` / `start_this_handle` (a task waits while the running transaction is
//!   locked for commit: QASIO's I_jhandle; while it is too big; while the log has no room),
//!   `jbd2_journal_get_write_access` / `do_get_write_access` (`lock_buffer` on the metadata
//!   buffer: QASIO's D_meta when the buffer is under asynchronous write; waits on a buffer
//!   being written to the log, `BJ_Shadow`; a buffer of the committing transaction not yet
//!   written is frozen and passes), `jbd2_journal_dirty_metadata`, `jbd2_journal_file_inode`
//!   (ordered mode), `jbd2_journal_stop`. `start_now`, `stop_now` and `get_write_access_now`
//!   are the same steps for callers that cannot wait (ext4's write fast path): they do the
//!   work when nothing waits and otherwise change nothing and say so.
//! - [`commit`]: the commit thread `kjournald2` and `jbd2_journal_commit_transaction`: lock the
//!   transaction and wait for its handles (`t_updates`), switch to a new running transaction,
//!   write the ordered-mode data, the descriptor blocks and the metadata copies, wait for data
//!   and log, write the commit block (`WRITE_FLUSH_FUA` with barriers), refile the buffers for
//!   checkpoint (they become dirty in the block device's page cache and are written home as
//!   asynchronous I/O), run the file system's commit callback (ext4's
//!   `ext4_free_data_callback`: discards, QASIO's D_discard), and wake the waiters of the tid
//!   (`jbd2_log_wait_commit`: QASIO's I_jcommit for fsync).
//! - [`checkpoint`]: log space (`__jbd2_log_space_left`, `jbd_space_needed`), the checkpoint
//!   lists, `__jbd2_journal_clean_checkpoint_list` and `jbd2_log_do_checkpoint` (a task that
//!   finds the log full writes the oldest transaction's buffers home with `WRITE_SYNC` and
//!   waits).
//!
//! The journal reaches the rest of the stack through three seams, so it can be tested alone and
//! driven by ext4 over the page cache: [`MetaBuffers`] (the metadata buffers: `lock_buffer`,
//! dirty state, `write_dirty_buffer`), [`OrderedData`] (ordered-mode data of an inode) and the
//! block device ([`crate::mm::BlockSubmit`]) for log writes.
//!
//! Simplifications: no revoke records and no `jbd2_journal_forget` (a freed metadata block stays
//! on its checkpoint list until written home); no `journal_async_commit` checksumming (the
//! option changes the commit block's flags and ordering, [`commit`]); no journal superblock
//! updates except when the tail moves after a checkpoint; recovery is not run by the journal:
//! crash-point checking records what each log block holds ([`CrashHook::log_write`]) and runs
//! `do_one_pass` on the blocks of a crash state (`crate::crashcheck::recover`); descriptor
//! blocks hold [`TAGS_PER_DESCRIPTOR`] tags; one handle per task at a time (no nesting);
//! credits are counted per buffer and unused credits are returned at `jbd2_journal_stop`.

pub mod check;
pub mod checkpoint;
pub mod commit;
pub mod transaction;

pub use commit::CommitRecord;
pub use transaction::{Handle, StartBlocked};

use crate::mm::bio::{LocalBoxFuture, PageSpan};
use crate::mm::{BlockSubmit, Ino, TimedWake};
use crate::sim::sync::WaitQueue;
use crate::sim::{Sim, TaskId};
use crate::units::{serde_units, Nanos, NS_PER_SEC};
use serde::{Deserialize, Serialize};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

/// A set of block numbers for membership tests only: hashed with the simulation's fixed id
/// hasher (deterministic; never iterated, so its order cannot reach a result).
pub(crate) type BlockSet =
    std::collections::HashSet<u64, std::hash::BuildHasherDefault<crate::sim::idmap::IdHasher>>;

/// Transaction id (`tid_t`).
pub type Tid = u64;

/// `JBD2_DEFAULT_MAX_COMMIT_AGE` = 5 s (include/linux/jbd2.h): the commit interval, ext4's
/// `commit=` mount option.
pub const DEFAULT_COMMIT_INTERVAL_NS: Nanos = 5 * NS_PER_SEC;
/// `JBD2_MIN_JOURNAL_BLOCKS` = 1024 (include/linux/jbd2.h).
pub const MIN_JOURNAL_BLOCKS: u64 = 1024;
/// `MIN_LOG_RESERVED_BLOCKS` = 32 (include/linux/jbd2.h): never handed to transactions.
pub const MIN_LOG_RESERVED_BLOCKS: u64 = 32;
/// Tags per descriptor block: (4096 - 12-byte header) / 16-byte tags (64-bit block numbers,
/// `journal_tag_bytes` = 12 rounded with flags), less the 16-byte UUID of the first tag.
pub const TAGS_PER_DESCRIPTOR: u64 = (4096 - 12 - 16) / 16;
/// Process id of the journal thread in bios (`jbd2/mmcblk0p…`).
pub const JBD2_PID: u32 = 102;
/// The journal thread's name: `jbd2/<partition>-8` (`kthread_run(kjournald2, ...,
/// "jbd2/%s", journal->j_devname)`, the name ending in the journal inode number 8); the
/// Galaxy S5's /data is mmcblk0p25. One name for the task and its bios.
pub const JBD2_COMM: &str = "jbd2/mmcblk0p25-8";

/// The journal's part of the mount options (ext4's `journal_*`, `commit=`, `barrier`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct JournalConfig {
    /// Journal size in 4 KiB blocks (mke2fs: 32768 = 128 MiB for file systems of 32 GiB and up).
    pub blocks: u64,
    /// First block of the journal on its device (when `extents` is empty: one contiguous run).
    pub first_block: u64,
    /// The journal's blocks on its device as `(start, len)` runs, in log order (`bmap` of the
    /// journal inode); empty for one run from `first_block`.
    #[serde(skip)]
    pub extents: Vec<(u64, u64)>,
    /// `commit=`: a running transaction commits this long after it started.
    #[serde(with = "serde_units::duration")]
    pub commit_interval: Nanos,
    /// `barrier` (default on): flush the device cache before the commit block and write it
    /// with FUA (`WRITE_FLUSH_FUA`); without it the commit block is a plain `WRITE_SYNC`.
    pub barrier: bool,
    /// `journal_async_commit` (`JBD2_FEATURE_INCOMPAT_ASYNC_COMMIT`): the commit block is a
    /// plain `WRITE_SYNC` submitted without waiting for the log blocks, and one cache flush of
    /// the journal's device follows it when `barrier` is on (checksums make that safe in the
    /// kernel; none are computed here).
    pub async_commit: bool,
    /// A deliberate bug of the commit ([`crate::fs::mutant`], crash-point checking's mutation
    /// gate): set by tests only. A journal with one runs without its invariant checks.
    #[doc(hidden)]
    #[serde(skip)]
    pub mutant: Option<crate::fs::mutant::Mutant>,
}

impl Default for JournalConfig {
    fn default() -> Self {
        JournalConfig {
            blocks: 32_768,
            first_block: 0,
            extents: Vec::new(),
            commit_interval: DEFAULT_COMMIT_INTERVAL_NS,
            barrier: true,
            async_commit: false,
            mutant: None,
        }
    }
}

impl JournalConfig {
    /// `j_max_transaction_buffers` = journal size / 4 (`journal_reset`, 3.10).
    pub fn max_transaction_buffers(&self) -> u64 {
        self.blocks / 4
    }

    /// The device block of log offset `offset` (`jbd2_journal_bmap`).
    pub fn log_block(&self, offset: u64) -> u64 {
        assert!(offset < self.blocks, "log offset {offset} past the journal");
        if self.extents.is_empty() {
            return self.first_block + offset;
        }
        let mut at = offset;
        for &(start, len) in &self.extents {
            if at < len {
                return start + at;
            }
            at -= len;
        }
        panic!("journal extents cover fewer than {} blocks", self.blocks)
    }

    pub fn validate(&self) -> Result<(), String> {
        if !self.extents.is_empty() {
            let covered: u64 = self.extents.iter().map(|&(_, len)| len).sum();
            if covered != self.blocks {
                return Err(format!(
                    "journal extents cover {covered} blocks, not the journal's {}",
                    self.blocks
                ));
            }
        }
        if self.blocks < MIN_JOURNAL_BLOCKS {
            return Err(format!(
                "journal of {} blocks is below jbd2's minimum of {MIN_JOURNAL_BLOCKS}",
                self.blocks
            ));
        }
        if self.commit_interval == 0 {
            return Err("journal commit interval must be positive".into());
        }
        Ok(())
    }
}

/// What a log write is, for the block I/O account.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LogBlock {
    /// A descriptor block (tags naming the home blocks of the copies that follow).
    Descriptor,
    /// A copy of a metadata block.
    Metadata,
    /// The commit block.
    Commit,
    /// The journal superblock (tail updates after a checkpoint).
    Superblock,
}

/// The metadata buffers as jbd2 sees them: buffer heads of the block device's page cache,
/// one per 4 KiB block. Implemented over the page cache by ext4; tests use a fake.
pub trait MetaBuffers {
    /// `lock_buffer`: waits while the buffer is locked (by another task, or for I/O: a write
    /// submitted asynchronously by the flusher is QASIO's D_meta), then locks it. Reads the
    /// block first if it is not cached (`__ext4_get_inode_loc` / `sb_bread`).
    fn lock_buffer<'a>(&'a self, sim: &'a Sim, block: u64) -> LocalBoxFuture<'a, ()>;
    /// `trylock_buffer`: locks the buffer if that needs no wait and no read (cached, unlocked,
    /// no write in flight); `lock_buffer` is `trylock_buffer` or else the sleeping path, as
    /// in include/linux/buffer_head.h. The default never succeeds (always the slow path).
    fn trylock_buffer(&self, _block: u64) -> bool {
        false
    }
    /// `unlock_buffer`.
    fn unlock_buffer(&self, sim: &Sim, block: u64);
    /// `trylock_buffer`, `test_clear_buffer_dirty`, `unlock_buffer` (`do_get_write_access`
    /// taking over a buffer no one holds): `Some(was_dirty)`, the buffer left unlocked and
    /// clean; `None`, nothing changed, when locking it would wait. The default makes the three
    /// calls; an implementation may do it in one lookup.
    fn take_over_unlocked(&self, sim: &Sim, block: u64) -> Option<bool> {
        if !self.trylock_buffer(block) {
            return None;
        }
        let dirty = self.test_clear_dirty(block);
        self.unlock_buffer(sim, block);
        Some(dirty)
    }
    /// `test_clear_buffer_dirty`: the buffer was dirty (waiting to be written home) and is not
    /// any more; jbd2 takes it over (`do_get_write_access`).
    fn test_clear_dirty(&self, block: u64) -> bool;
    /// `mark_buffer_dirty` after commit: the buffer may now be written home by writeback.
    fn mark_dirty(&self, sim: &Sim, block: u64);
    /// Neither dirty nor under write: its home copy is current (checkpoint may drop it).
    fn is_clean(&self, block: u64) -> bool;
    /// `write_dirty_buffer(bh, WRITE_SYNC)` + `wait_on_buffer` for checkpointing: writes the
    /// buffer home if dirty (waits for a write in flight otherwise).
    fn write_home<'a>(&'a self, sim: &'a Sim, block: u64) -> LocalBoxFuture<'a, ()>;
    /// The journal holds (or releases) a reference: the buffer may not be reclaimed.
    fn pin(&self, block: u64, pinned: bool);
    /// `sb_getblk` of a block whose contents are being written whole (a journaled data block):
    /// cached and uptodate without a read. Default: nothing (buffers that need no page).
    fn getblk<'a>(&'a self, _sim: &'a Sim, _block: u64) -> LocalBoxFuture<'a, ()> {
        Box::pin(async {})
    }
}

/// Ordered-mode data: before a transaction commits, the data of the inodes it filed must be on
/// disk (`journal_submit_data_buffers` / `journal_finish_inode_data_buffers`).
pub trait OrderedData {
    /// Starts writing the inode's dirty pages (`filemap_fdatawrite_range`, `WB_SYNC_ALL`,
    /// from the journal thread).
    fn submit<'a>(&'a self, sim: &'a Sim, ino: Ino) -> LocalBoxFuture<'a, ()>;
    /// Waits for every page of the inode under writeback (`filemap_fdatawait`), including
    /// the flusher's asynchronous writes (a D_sync for the journal thread).
    fn wait<'a>(&'a self, sim: &'a Sim, ino: Ino) -> LocalBoxFuture<'a, ()>;
}

/// Called at the end of each commit (`j_commit_callback`, ext4's
/// `ext4_journal_commit_callback` -> `ext4_free_data_callback`), on the journal thread,
/// before the commit's waiters are woken.
pub type CommitCallback = Box<dyn Fn(&Sim, Tid) -> LocalBoxFuture<'static, ()>>;

/// What crash-point checking records of each commit (no Linux counterpart): installed by the
/// file system with [`Journal::set_crash_hook`].
pub trait CrashHook {
    /// Transaction `tid` reached `T_FLUSH`: every handle of it has stopped and none of the
    /// next has started, so the file system's state is the transaction's; `buffers` are the
    /// metadata blocks it logs (`t_buffers`), whose copies hold that state.
    fn flushing(&self, tid: Tid, buffers: &[u64]);
    /// Transaction `tid`'s commit block goes to log block `block` now.
    fn commit_block(&self, tid: Tid, block: u64, at: crate::units::Nanos);
    /// A journal block (log offset `offset`, device block `block`) is submitted holding
    /// `content`: the descriptor blocks, copies, commit blocks and superblock recovery reads.
    fn log_write(
        &self,
        _block: u64,
        _offset: u64,
        _at: crate::units::Nanos,
        _content: crate::mm::crashlog::LogContent,
    ) {
    }
}

/// Where a transaction is in its life (`t_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum TState {
    /// `T_RUNNING`: accepts handles.
    Running,
    /// `T_LOCKED`: the commit waits for the open handles; new handles wait.
    Locked,
    /// `T_FLUSH` / `T_COMMIT`: being written; a new transaction runs.
    Committing,
}

/// One transaction (`transaction_t`).
#[derive(Debug)]
pub(crate) struct Transaction {
    pub tid: Tid,
    pub state: TState,
    pub started_ns: Nanos,
    /// `t_expires`: when the commit timer fires.
    pub expires_ns: Nanos,
    /// `t_updates`: open handles.
    pub updates: u32,
    /// Tasks holding those handles, for wait chains.
    pub holders: Holders,
    /// `t_outstanding_credits`.
    pub outstanding_credits: u64,
    /// `t_buffers`: metadata blocks journaled, in the order they joined.
    pub buffers: Vec<u64>,
    /// The same blocks as `buffers`, for membership only (never iterated, so hashed).
    pub buffer_set: BlockSet,
    /// `t_inode_list`: inodes whose data must precede the commit (ordered mode).
    pub inodes: BTreeSet<Ino>,
    /// A commit was asked for by someone waiting (fsync), not by the timer.
    pub requested_ns: Option<Nanos>,
    /// `t_need_data_flush`: it filed an inode's ordered data (`jbd2_journal_file_inode`), or
    /// (mainline) `jbd2_trans_will_send_data_barrier` promised a flush for it, so with an
    /// external journal the file system's device is flushed before its commit block.
    pub need_data_flush: bool,
    /// The cause of the first `jbd2_log_start_commit` for it, if made in a system call: the
    /// commit's I/O is charged to it in the account by purpose.
    pub requested_by: Option<crate::mm::IoCause>,
}

impl Transaction {
    fn new(tid: Tid, now: Nanos, interval: Nanos) -> Transaction {
        Transaction {
            tid,
            state: TState::Running,
            started_ns: now,
            expires_ns: now + interval,
            updates: 0,
            holders: Holders::default(),
            outstanding_credits: 0,
            buffers: Vec::new(),
            buffer_set: BlockSet::default(),
            inodes: BTreeSet::new(),
            requested_ns: None,
            requested_by: None,
            need_data_flush: false,
        }
    }
}

/// The tasks holding handles of a transaction and how many each holds, ordered by task (a few
/// tasks at a time: a sorted vector, so a handle's start and stop allocate nothing).
#[derive(Debug, Default)]
pub(crate) struct Holders(Vec<(TaskId, u32)>);

impl Holders {
    /// `task` took one more handle.
    pub fn add(&mut self, task: TaskId) {
        match self.0.binary_search_by_key(&task, |&(t, _)| t) {
            Ok(i) => self.0[i].1 += 1,
            Err(i) => self.0.insert(i, (task, 1)),
        }
    }

    /// `task` gave one handle back; false when it held none.
    pub fn remove_one(&mut self, task: TaskId) -> bool {
        match self.0.binary_search_by_key(&task, |&(t, _)| t) {
            Ok(i) => {
                self.0[i].1 -= 1;
                if self.0[i].1 == 0 {
                    self.0.remove(i);
                }
                true
            }
            Err(_) => false,
        }
    }

    /// The lowest-numbered task holding a handle.
    pub fn first(&self) -> Option<TaskId> {
        self.0.first().map(|&(t, _)| t)
    }
}

/// jbd2's view of one buffer (`struct journal_head`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct JournalHead {
    /// `b_transaction`: the transaction whose metadata list holds it.
    pub transaction: Option<Tid>,
    /// `b_next_transaction`: the running transaction wants it once the committing one is done
    /// with it (the committing transaction wrote a frozen copy).
    pub next_transaction: Option<Tid>,
    /// `b_cp_transaction`: the newest committed transaction whose copy is the one to write home.
    pub cp_transaction: Option<Tid>,
    /// `BJ_Shadow`: its copy is being written to the log right now.
    pub shadow: bool,
}

/// Counters of the journal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct JournalStats {
    pub handles: u64,
    pub commits: u64,
    /// Commits asked for by a waiter (fsync) rather than by the timer or a full transaction.
    pub requested_commits: u64,
    pub log_descriptor_blocks: u64,
    pub log_metadata_blocks: u64,
    pub log_commit_blocks: u64,
    pub checkpoints: u64,
    pub checkpoint_writes: u64,
    /// Buffers written home by writeback before a checkpoint needed them.
    pub checkpoint_cleaned: u64,
    /// Handles that waited for a locked transaction.
    pub handle_waits: u64,
    pub frozen_copies: u64,
    pub shadow_waits: u64,
    /// Metadata blocks per commit, summed (with `commits`, the mean).
    pub committed_buffers: u64,
    /// Tail moves (each writes the journal superblock).
    pub tail_updates: u64,
    /// Where the commits' time went, summed over commits (ns), phase by phase of
    /// `jbd2_journal_commit_transaction`: see [`CommitPhaseNs`].
    pub phase_ns: CommitPhaseNs,
}

/// Time of the commit phases, summed over commits (virtual ns).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CommitPhaseNs {
    /// T_LOCKED: waiting for open handles to stop (`j_wait_updates`).
    pub updates: u64,
    /// T_FLUSH: submitting the ordered data (`journal_submit_data_buffers`).
    pub data_submit: u64,
    /// Submitting the descriptor and metadata copies.
    pub log_submit: u64,
    /// `journal_finish_inode_data_buffers`: waiting for the ordered data, the flusher's
    /// asynchronous writeback of the filed inodes included.
    pub data_wait: u64,
    /// Waiting for the log copies (with an external journal, flushing the file system's
    /// device too), then writing and waiting for the commit block.
    pub log_wait: u64,
    /// Refiling for checkpoint and the file system's commit callback (ext4's discards).
    pub callback: u64,
}

impl CommitPhaseNs {
    pub fn add(&mut self, other: &CommitPhaseNs) {
        self.updates += other.updates;
        self.data_submit += other.data_submit;
        self.log_submit += other.log_submit;
        self.data_wait += other.data_wait;
        self.log_wait += other.log_wait;
        self.callback += other.callback;
    }
}

pub(crate) struct JournalState {
    pub running: Option<Transaction>,
    pub committing: Option<Transaction>,
    pub next_tid: Tid,
    /// `j_commit_sequence`: the last committed tid.
    pub commit_sequence: Tid,
    /// `j_commit_request`: the highest tid someone asked to commit.
    pub commit_request: Tid,
    pub heads: BTreeMap<u64, JournalHead>,
    /// `j_free`: log blocks free.
    pub free: u64,
    /// `j_head`: next log block to write, as an offset into the journal (1.., block 0 is the
    /// journal superblock).
    pub head: u64,
    /// Committed transactions not yet checkpointed: their home blocks and log blocks used.
    pub checkpoint: BTreeMap<Tid, checkpoint::CheckpointList>,
    pub stats: JournalStats,
    /// Commits, newest last, bounded (for tests and the account of what each wrote).
    pub records: std::collections::VecDeque<CommitRecord>,
    /// The committing transaction passed `T_COMMIT_DFLUSH` (its data is on the file system's
    /// device and, with an external journal, that device was flushed):
    /// `jbd2_trans_will_send_data_barrier` answers no after this point.
    pub data_flushed: Option<Tid>,
    /// The committing transaction that reached `T_COMMIT_JFLUSH`: its log blocks are written
    /// and its commit record is being submitted (with its preflush, on its own device), so a
    /// data write that completes now is not covered by that flush.
    pub commit_record_out: Option<Tid>,
}

/// Bound on commit records kept.
pub const MAX_COMMIT_RECORDS: usize = 4096;

/// One journal (`journal_t`).
pub struct Journal {
    pub config: JournalConfig,
    pub(crate) state: RefCell<JournalState>,
    pub(crate) buffers: Rc<dyn MetaBuffers>,
    pub(crate) data: Rc<dyn OrderedData>,
    /// The device the log lives on (the file system's own, or an external journal device).
    pub(crate) log_device: Rc<dyn BlockSubmit>,
    /// With an external journal, the file system's device (`j_fs_dev` when it is not
    /// `j_dev`): flushed before a commit block that follows ordered data.
    pub(crate) fs_device: std::cell::OnceCell<Rc<dyn BlockSubmit>>,
    pub(crate) callback: RefCell<Option<CommitCallback>>,
    /// Crash-point checking's recorder, when the run keeps one.
    pub(crate) crash_hook: RefCell<Option<Rc<dyn CrashHook>>>,
    /// `j_wait_transaction_locked`.
    pub(crate) wait_transaction_locked: WaitQueue,
    /// `j_wait_updates`.
    pub(crate) wait_updates: WaitQueue,
    /// `j_wait_done_commit`.
    pub(crate) wait_done_commit: WaitQueue,
    /// Waiters for a buffer's `BJ_Shadow` to clear.
    pub(crate) wait_shadow: WaitQueue,
    /// `j_wait_commit`: wakes the commit thread.
    pub(crate) commit_wake: TimedWake,
    /// `j_checkpoint_mutex`: one checkpointer at a time.
    pub(crate) checkpoint_mutex: crate::sim::sync::Mutex,
    pub(crate) thread: Cell<Option<TaskId>>,
    /// The run-time invariant checks ([`check`]).
    pub(crate) check: check::Jbd2Check,
    /// Test-only faults that break an invariant on purpose (the checks' own tests).
    #[cfg(test)]
    pub(crate) faults: test_support::Faults,
}

impl Journal {
    /// A journal with an empty log; starts its commit thread (`kjournald2`).
    pub fn load(
        sim: &Sim,
        config: JournalConfig,
        buffers: Rc<dyn MetaBuffers>,
        data: Rc<dyn OrderedData>,
        log_device: Rc<dyn BlockSubmit>,
    ) -> Rc<Journal> {
        config
            .validate()
            .expect("a validated journal configuration");
        // Block 0 of the journal is its superblock; the log is the ring of the others.
        let free = config.blocks - 1;
        let journal = Rc::new(Journal {
            state: RefCell::new(JournalState {
                running: None,
                committing: None,
                next_tid: 1,
                commit_sequence: 0,
                commit_request: 0,
                heads: BTreeMap::new(),
                free,
                head: 1,
                checkpoint: BTreeMap::new(),
                stats: JournalStats::default(),
                records: std::collections::VecDeque::new(),
                data_flushed: None,
                commit_record_out: None,
            }),
            buffers,
            data,
            log_device,
            fs_device: std::cell::OnceCell::new(),
            callback: RefCell::new(None),
            crash_hook: RefCell::new(None),
            wait_transaction_locked: WaitQueue::new(),
            wait_updates: WaitQueue::new(),
            wait_done_commit: WaitQueue::new(),
            wait_shadow: WaitQueue::new(),
            commit_wake: TimedWake::default(),
            checkpoint_mutex: crate::sim::sync::Mutex::new(
                sim,
                "j_checkpoint_mutex",
                crate::sim::WaitReason::JournalSpace,
            ),
            thread: Cell::new(None),
            check: check::Jbd2Check::default(),
            #[cfg(test)]
            faults: test_support::Faults::default(),
            config,
        });
        if journal.config.mutant.is_some() {
            // A deliberate bug breaks the invariants these checks assert (crate::fs::mutant).
            journal.check.disable();
        }
        journal.log_device.register_task(JBD2_PID, 0, JBD2_COMM);
        let (s, j) = (sim.clone(), journal.clone());
        let handle = sim.spawn_daemon(JBD2_COMM, async move { j.kjournald2(&s).await });
        journal.thread.set(Some(handle.task()));
        journal
    }

    /// An external journal: `fs_device` is the file system's own device (`j_fs_dev`), which
    /// commits flush before their commit block when they filed ordered data.
    pub fn set_fs_device(&self, fs_device: Rc<dyn BlockSubmit>) {
        let _ = self.fs_device.set(fs_device);
    }

    /// Whether the log lives on a device of its own.
    pub fn is_external(&self) -> bool {
        self.fs_device.get().is_some()
    }

    /// Installs the file system's commit callback (`j_commit_callback`).
    pub fn set_commit_callback(&self, callback: CommitCallback) {
        *self.callback.borrow_mut() = Some(callback);
    }

    /// Reports each commit's flush and commit block to `hook` (crash-point checking).
    pub fn set_crash_hook(&self, hook: Rc<dyn CrashHook>) {
        *self.crash_hook.borrow_mut() = Some(hook);
    }

    pub fn stats(&self) -> JournalStats {
        self.state.borrow().stats
    }

    /// The journal thread's task.
    pub fn thread(&self) -> Option<TaskId> {
        self.thread.get()
    }

    /// `j_commit_sequence`.
    pub fn commit_sequence(&self) -> Tid {
        self.state.borrow().commit_sequence
    }

    /// The running transaction's tid, if one runs.
    pub fn running_tid(&self) -> Option<Tid> {
        self.state.borrow().running.as_ref().map(|t| t.tid)
    }

    /// The last commits, oldest first.
    pub fn commit_records(&self) -> Vec<CommitRecord> {
        self.state.borrow().records.iter().cloned().collect()
    }

    /// Free log blocks (`j_free`).
    pub fn free_blocks(&self) -> u64 {
        self.state.borrow().free
    }
}

/// A span of pages, re-exported for the ordered-data seam's implementers.
pub type DataSpan = PageSpan;

#[cfg(test)]
pub(crate) mod test_support;
#[cfg(test)]
mod tests;
