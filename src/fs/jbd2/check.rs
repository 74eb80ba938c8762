//! The journal's ordering invariants, checked while a run goes (as `src/mm/check.rs` checks the
//! page cache's: a violation stops the run with the task, the time and the state).
//!
//! What is checked, and where (every check is an O(1) or O(log n) look-up at the event, plus
//! pruning that removes each record once, so the cost is amortised O(log n) per event):
//!
//! - **a. No home write before the commit block is durable.** Every metadata buffer records
//!   the newest transaction that journaled it (`jbd2_journal_dirty_metadata`); a write of the
//!   buffer to its home location (the flusher's, reclaim's or a checkpoint's, seen by the page
//!   cache when it submits the bio: [`Journal::check_home_write`]) is a violation while that
//!   transaction's commit block has not completed (3.10: the buffer is only refiled dirty for
//!   writeback by `jbd2_journal_commit_transaction` after `journal_wait_on_commit_record`).
//! - **b. Transactions commit in order.** A commit starts only after the previous one submitted
//!   its commit block (one `kjournald2` thread, `jbd2_journal_commit_transaction` runs to its
//!   end before the next); tids of commit blocks submitted, completed, and of commits finished,
//!   strictly increase.
//! - **c. Ordered data before the commit block** (`data=ordered`). The pages whose blocks a
//!   transaction allocated for an ordered inode (ext4's writeback allocation in a handle,
//!   `ext4_jbd2_file_inode`) are owed to it until their write completes or they are dropped;
//!   the transaction's commit block (and any later one) may not be submitted while it is owed
//!   a page (`journal_finish_inode_data_buffers` comes first in 3.10).
//! - **e. Every handle is stopped.** Handles started and stopped are counted apart from
//!   `t_updates`: when the commit sees `t_updates` reach zero, no handle of the transaction
//!   may be open; at the end of a run, a task that finished while holding a handle is a
//!   violation (one still blocked or cut off mid-call by the run's end is not).
//!
//! Invariant d (a freed block is not reused before its freeing transaction commits) is ext4's
//! (`src/fs/ext4/check.rs`); it reads the durable commit recorded here and reports through
//! [`Journal::report_violation`].
//!
//! Checks are on in debug and test builds and, in release builds, with `mobistack run
//! --check` (through `Vfs::enable_checks`). In the library's unit tests a violation panics at
//! once; otherwise it is recorded, the simulation stops, and the run ends with an error
//! carrying the message ([`Journal::violation`]).
//!
//! Simplifications: the checker sees the model's events, not disk contents (a home write is
//! checked at submission; "durable" is the completion of the commit block, which with barriers
//! is a flush + FUA write).

use super::{Journal, Tid};
use crate::mm::Ino;
use crate::sim::{Sim, TaskId};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;

/// The checker's switch, its first violation and its own record of the journal's events.
pub struct Jbd2Check {
    enabled: Cell<bool>,
    panic_on_violation: Cell<bool>,
    violation: RefCell<Option<String>>,
    state: RefCell<CheckState>,
}

impl Default for Jbd2Check {
    fn default() -> Self {
        Jbd2Check {
            enabled: Cell::new(cfg!(debug_assertions)),
            panic_on_violation: Cell::new(cfg!(test)),
            violation: RefCell::new(None),
            state: RefCell::new(CheckState::default()),
        }
    }
}

/// What the checker remembers (independently of the journal's own state).
#[derive(Debug, Default)]
struct CheckState {
    /// The last commit started, the last whose commit block was submitted, the last whose
    /// commit block completed (durable), the last commit finished.
    started: Tid,
    commit_submitted: Tid,
    durable: Tid,
    finished: Tid,
    /// a: the newest transaction that journaled each buffer not yet known durable, and the
    /// buffers by transaction for pruning.
    journaled: BTreeMap<u64, Tid>,
    journaled_by_tid: BTreeMap<Tid, Vec<u64>>,
    /// c: owed ordered-data pages as runs `(ino, first) -> (count, tid)`, and pages owed per tid.
    owed: BTreeMap<(Ino, u64), (u64, Tid)>,
    owed_pages: BTreeMap<Tid, u64>,
    /// e: handles open per transaction and per task.
    open: BTreeMap<Tid, u32>,
    holders: BTreeMap<TaskId, BTreeMap<Tid, u32>>,
}

impl CheckState {
    /// Drops the owed pages `[index, index + count)` of `ino` (written or gone).
    fn settle(&mut self, ino: Ino, index: u64, count: u64) {
        let end = index + count;
        let overlapping: Vec<(u64, u64, Tid)> = self
            .owed
            .range(..(ino, end))
            .rev()
            .take_while(|(&(i, _), _)| i == ino)
            .filter(|(&(_, first), &(n, _))| first + n > index)
            .map(|(&(_, first), &(n, tid))| (first, n, tid))
            .collect();
        for (first, n, tid) in overlapping {
            self.owed.remove(&(ino, first));
            let cut_start = first.max(index);
            let cut_end = (first + n).min(end);
            if first < cut_start {
                self.owed.insert((ino, first), (cut_start - first, tid));
            }
            if cut_end < first + n {
                self.owed.insert((ino, cut_end), (first + n - cut_end, tid));
            }
            let pages = self.owed_pages.get_mut(&tid).expect("owed pages counted");
            *pages -= cut_end - cut_start;
            if *pages == 0 {
                self.owed_pages.remove(&tid);
            }
        }
    }

    /// A few owed runs of transactions up to `tid`, for a message.
    fn owed_examples(&self, tid: Tid) -> String {
        let examples: Vec<String> = self
            .owed
            .iter()
            .filter(|(_, &(_, t))| t <= tid)
            .take(3)
            .map(|(&(ino, first), &(n, t))| {
                format!("inode {ino} pages {first}..{} (transaction {t})", first + n)
            })
            .collect();
        examples.join(", ")
    }
}

impl Jbd2Check {
    /// Turns the checks off (a journal with a deliberate bug, [`crate::fs::mutant`]).
    pub(super) fn disable(&self) {
        self.enabled.set(false);
    }

    pub fn enabled(&self) -> bool {
        self.enabled.get() && self.violation.borrow().is_none()
    }
}

impl Journal {
    /// Turns the journal's checks on (release builds: `mobistack run --check`); a journal
    /// built with a deliberate bug ([`crate::fs::mutant`]) keeps them off: crash-point
    /// checking's mutation gate asks whether the bug shows on the disk, not in these checks.
    pub fn enable_checks(&self) {
        self.check.enabled.set(self.config.mutant.is_none());
    }

    /// Whether the checks run (and nothing was reported yet).
    pub fn checks_enabled(&self) -> bool {
        self.check.enabled()
    }

    /// Whether a violation panics (unit tests) or stops the run with an error.
    pub fn set_panic_on_violation(&self, panic: bool) {
        self.check.panic_on_violation.set(panic);
    }

    /// The first violation seen, if any.
    pub fn violation(&self) -> Option<String> {
        self.check.violation.borrow().clone()
    }

    /// The last transaction whose commit block has completed, as the checker saw it.
    pub fn durable_tid(&self) -> Tid {
        self.check.state.borrow().durable
    }

    /// Reports a violated invariant found at `site`: panics in unit tests, else records it
    /// and stops the simulation. Used by ext4's checks too.
    pub fn report_violation(&self, sim: &Sim, site: &str, what: &str) {
        if self.check.violation.borrow().is_some() {
            return;
        }
        let task = sim.current_task().map_or_else(
            || "-".to_string(),
            |t| format!("{} ({t})", sim.task_name(t)),
        );
        let message = format!(
            "journal invariant violated at {site}: {what}; task {task}, t = {:.6} s; state: {}",
            sim.now() as f64 / 1e9,
            self.check_summary()
        );
        if self.check.panic_on_violation.get() {
            panic!("{message}");
        }
        *self.check.violation.borrow_mut() = Some(message);
        sim.stop();
    }

    /// One line of the journal's state for a violation report.
    fn check_summary(&self) -> String {
        let state = self.state.borrow();
        let check = self.check.state.borrow();
        let tid_of = |t: &Option<super::Transaction>| {
            t.as_ref().map_or("-".to_string(), |t| {
                format!("{} ({:?}, {} updates)", t.tid, t.state, t.updates)
            })
        };
        format!(
            "running {} committing {} commit_sequence {} durable {} log free {} of {} open handles {:?} owed ordered pages {:?}",
            tid_of(&state.running),
            tid_of(&state.committing),
            state.commit_sequence,
            check.durable,
            state.free,
            self.config.blocks,
            check.open,
            check.owed_pages,
        )
    }

    // a ----------------------------------------------------------------------------------------

    /// `block` joined transaction `tid`'s metadata list.
    pub(crate) fn check_journaled(&self, tid: Tid, block: u64) {
        if !self.check.enabled() {
            return;
        }
        let mut check = self.check.state.borrow_mut();
        let newest = check.journaled.entry(block).or_insert(tid);
        if *newest < tid {
            *newest = tid;
        }
        check.journaled_by_tid.entry(tid).or_default().push(block);
    }

    /// The page cache submits a write of buffers `[block, block + count)` to their home.
    pub fn check_home_write(&self, sim: &Sim, block: u64, count: u64) {
        if !self.check.enabled() {
            return;
        }
        let found = {
            let check = self.check.state.borrow();
            check
                .journaled
                .range(block..block + count)
                .find(|(_, &tid)| tid > check.durable)
                .map(|(&b, &tid)| (b, tid, check.durable))
        };
        if let Some((b, tid, durable)) = found {
            self.report_violation(
                sim,
                "home write of a metadata buffer",
                &format!(
                    "buffer {b} written home before the commit block of transaction {tid}, which journaled it, completed (last durable commit {durable})"
                ),
            );
        }
    }

    // b ----------------------------------------------------------------------------------------

    /// A commit of `tid` starts (`T_LOCKED`).
    pub(crate) fn check_commit_start(&self, sim: &Sim, tid: Tid) {
        if !self.check.enabled() {
            return;
        }
        let (started, submitted) = {
            let check = self.check.state.borrow();
            (check.started, check.commit_submitted)
        };
        if tid <= started {
            self.report_violation(
                sim,
                "jbd2_journal_commit_transaction",
                &format!("commit of transaction {tid} starts after the commit of {started}"),
            );
        } else if submitted < started {
            self.report_violation(
                sim,
                "jbd2_journal_commit_transaction",
                &format!(
                    "commit of transaction {tid} starts before transaction {started} submitted its commit block"
                ),
            );
        }
        self.check.state.borrow_mut().started = tid;
    }

    /// `tid`'s commit block is about to be submitted: the previous commit blocks went first, and
    /// (c) no ordered data page is owed to it or an earlier transaction.
    pub(crate) fn check_commit_block_submit(&self, sim: &Sim, tid: Tid) {
        if !self.check.enabled() {
            return;
        }
        let (submitted, owed) = {
            let check = self.check.state.borrow();
            let owed: u64 = check.owed_pages.range(..=tid).map(|(_, &n)| n).sum();
            (check.commit_submitted, owed)
        };
        if tid <= submitted {
            self.report_violation(
                sim,
                "journal_submit_commit_record",
                &format!(
                    "commit block of transaction {tid} submitted after that of transaction {submitted}"
                ),
            );
        } else if owed > 0 {
            let examples = self.check.state.borrow().owed_examples(tid);
            self.report_violation(
                sim,
                "journal_submit_commit_record",
                &format!(
                    "commit block of transaction {tid} submitted while {owed} page(s) of ordered data it exposes are not on the device: {examples}"
                ),
            );
        }
        self.check.state.borrow_mut().commit_submitted = tid;
    }

    /// `tid`'s commit block completed: its buffers may go home, its freed blocks be reused.
    pub(crate) fn check_commit_block_done(&self, sim: &Sim, tid: Tid) {
        if !self.check.enabled() {
            return;
        }
        let durable = self.check.state.borrow().durable;
        if tid <= durable {
            self.report_violation(
                sim,
                "journal_wait_on_commit_record",
                &format!("commit block of transaction {tid} completed after that of {durable}"),
            );
            return;
        }
        let mut check = self.check.state.borrow_mut();
        check.durable = tid;
        // Prune (a): the buffers whose newest journaling transaction is now durable.
        let later = check.journaled_by_tid.split_off(&(tid + 1));
        let done = std::mem::replace(&mut check.journaled_by_tid, later);
        for (t, blocks) in done {
            for block in blocks {
                if check.journaled.get(&block) == Some(&t) {
                    check.journaled.remove(&block);
                }
            }
        }
    }

    /// The commit of `tid` finished (`j_commit_sequence` = tid).
    pub(crate) fn check_commit_done(&self, sim: &Sim, tid: Tid) {
        if !self.check.enabled() {
            return;
        }
        let finished = self.check.state.borrow().finished;
        if tid <= finished {
            self.report_violation(
                sim,
                "jbd2_journal_commit_transaction",
                &format!("transaction {tid} finished committing after transaction {finished}"),
            );
        }
        let mut check = self.check.state.borrow_mut();
        check.finished = check.finished.max(tid);
        check.open.remove(&tid);
    }

    // c ----------------------------------------------------------------------------------------

    /// Ordered mode: transaction `tid` allocated the blocks of pages `[first, first + count)` of
    /// `ino`; their data must be on the device before its commit block.
    pub fn check_ordered_allocated(&self, tid: Tid, ino: Ino, first: u64, count: u64) {
        if !self.check.enabled() || count == 0 {
            return;
        }
        let mut check = self.check.state.borrow_mut();
        // A page owed already (to an earlier transaction) is owed to the earliest.
        check.settle(ino, first, count);
        check.owed.insert((ino, first), (count, tid));
        *check.owed_pages.entry(tid).or_insert(0) += count;
    }

    /// Pages `[index, index + count)` of `ino` were written (their writeback ended) or dropped
    /// from the cache (truncated: nothing left to expose).
    pub fn check_data_settled(&self, ino: Ino, index: u64, count: u64) {
        if !self.check.enabled() {
            return;
        }
        let mut check = self.check.state.borrow_mut();
        if check.owed.is_empty() {
            return;
        }
        check.settle(ino, index, count);
    }

    // e ----------------------------------------------------------------------------------------

    /// `task` started a handle in `tid`. (Inlined: with checks off, a load and a branch per
    /// handle on the write path, not a call.)
    #[inline]
    pub(crate) fn check_handle_started(&self, task: TaskId, tid: Tid) {
        if self.check.enabled.get() {
            self.check_handle_started_on(task, tid);
        }
    }

    #[inline(never)]
    fn check_handle_started_on(&self, task: TaskId, tid: Tid) {
        if !self.check.enabled() {
            return;
        }
        let mut check = self.check.state.borrow_mut();
        *check.open.entry(tid).or_insert(0) += 1;
        *check
            .holders
            .entry(task)
            .or_default()
            .entry(tid)
            .or_insert(0) += 1;
    }

    /// `task` stopped its handle of `tid` (inlined as [`Journal::check_handle_started`]).
    #[inline]
    pub(crate) fn check_handle_stopped(&self, sim: &Sim, task: TaskId, tid: Tid) {
        if self.check.enabled.get() {
            self.check_handle_stopped_on(sim, task, tid);
        }
    }

    #[inline(never)]
    fn check_handle_stopped_on(&self, sim: &Sim, task: TaskId, tid: Tid) {
        if !self.check.enabled() {
            return;
        }
        let known = {
            let mut check = self.check.state.borrow_mut();
            let known = check
                .holders
                .get_mut(&task)
                .and_then(|tids| tids.get_mut(&tid))
                .map(|n| *n -= 1)
                .is_some();
            if known {
                if let Some(tids) = check.holders.get_mut(&task) {
                    tids.retain(|_, n| *n > 0);
                    if tids.is_empty() {
                        check.holders.remove(&task);
                    }
                }
                if let Some(open) = check.open.get_mut(&tid) {
                    *open -= 1;
                    if *open == 0 {
                        check.open.remove(&tid);
                    }
                }
            }
            known
        };
        if !known {
            self.report_violation(
                sim,
                "jbd2_journal_stop",
                &format!(
                    "task {} stops a handle of transaction {tid} it did not start",
                    sim.task_name(task)
                ),
            );
        }
    }

    /// The commit of `tid` saw `t_updates` reach zero: every handle must have been stopped.
    pub(crate) fn check_updates_drained(&self, sim: &Sim, tid: Tid) {
        if !self.check.enabled() {
            return;
        }
        let open = self
            .check
            .state
            .borrow()
            .open
            .get(&tid)
            .copied()
            .unwrap_or(0);
        if open > 0 {
            let holders: Vec<String> = self
                .check
                .state
                .borrow()
                .holders
                .iter()
                .filter(|(_, tids)| tids.contains_key(&tid))
                .map(|(&task, _)| sim.task_name(task))
                .collect();
            self.report_violation(
                sim,
                "jbd2_journal_commit_transaction (t_updates)",
                &format!(
                    "t_updates of transaction {tid} is zero with {open} handle(s) not stopped, held by {}",
                    holders.join(", ")
                ),
            );
        }
    }

    /// At the end of a run: a task that finished with a handle open is a violation (one still
    /// blocked, or cut off by the run's end, is not).
    pub fn check_end_of_run(&self, sim: &Sim) {
        if !self.check.enabled() {
            return;
        }
        let leaked: Option<(TaskId, Tid)> = self
            .check
            .state
            .borrow()
            .holders
            .iter()
            .find(|(&task, _)| sim.is_finished(task))
            .and_then(|(&task, tids)| tids.keys().next().map(|&tid| (task, tid)));
        if let Some((task, tid)) = leaked {
            self.report_violation(
                sim,
                "end of run",
                &format!(
                    "task {} ({task}) finished holding a handle of transaction {tid} that it never stopped",
                    sim.task_name(task)
                ),
            );
        }
    }
}
