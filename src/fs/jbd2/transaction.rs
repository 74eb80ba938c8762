//! Handles and the running transaction (fs/jbd2/transaction.c, 3.10): `start_this_handle`,
//! `do_get_write_access`, `jbd2_journal_dirty_metadata`, `jbd2_journal_file_inode`,
//! `jbd2_journal_stop`, `jbd2_log_start_commit`, `jbd2_complete_transaction`.
//!
//! Simplifications: credits are per buffer and returned at stop as in 3.10, but
//! `jbd2_journal_extend`/`restart` do not exist (an operation asks for what it needs up front);
//! `get_create_access` is `get_write_access` of a block that is cached and uptodate; the
//! `b_committed_data` undo copies of bitmaps (`get_undo_access`) are not modelled.
//! `Journal::stop_and_start_now` is not `jbd2_journal_restart`: it is the simulator's short
//! cut for a stop and a start by one task at one instant, taken only when the pair changes
//! nothing but the credits and the handle count.

use super::{checkpoint, Journal, JournalHead, TState, Tid, Transaction};
use crate::kernel::KernelVersion;
use crate::mm::Ino;
use crate::sim::{Blocker, Sim, TaskId, WaitReason};

/// An open handle (`handle_t`): the task may dirty up to `credits` more buffers in transaction
/// `tid`. Must be given back with [`Journal::stop`].
#[derive(Debug)]
#[must_use = "a handle must be stopped with Journal::stop"]
pub struct Handle {
    pub tid: Tid,
    /// `h_buffer_credits`: buffers it may still add.
    pub credits: u64,
    /// `h_sync`: stopping it commits the transaction and waits (`O_SYNC`, `ext4_handle_sync`).
    pub sync: bool,
    task: TaskId,
}

impl Handle {
    /// A value of no transaction that takes the place of a handle moved out of a box the
    /// caller reuses (a write token's): never started, never to be stopped.
    pub(crate) fn placeholder() -> Handle {
        Handle {
            tid: 0,
            credits: 0,
            sync: false,
            task: TaskId(u32::MAX),
        }
    }
}

/// Why a handle cannot start without waiting ([`Journal::start_now`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartBlocked {
    /// The running transaction is locked for commit (`T_LOCKED`).
    Locked(Tid),
    /// The handle's credits would take the transaction past `j_max_transaction_buffers`.
    TooBig(Tid),
    /// The log has no room until a checkpoint (`__jbd2_log_space_left` < `jbd_space_needed`).
    NoSpace,
}

impl Journal {
    /// `jbd2_journal_start` / `start_this_handle`: joins the running transaction (creating one
    /// if none runs), reserving `credits` buffers. Waits while the running transaction is locked
    /// for commit (QASIO I_jhandle: the commit waits for a handle whose holder may itself wait
    /// on an asynchronous write), while it is too big (after starting its commit), and while the
    /// log has no room (checkpointing).
    pub async fn start(&self, sim: &Sim, credits: u64) -> Handle {
        let mut waited = false;
        loop {
            let tid = match self.start_now(sim, credits) {
                Ok(handle) => return handle,
                Err(StartBlocked::NoSpace) => {
                    self.log_wait_for_space(sim).await;
                    continue;
                }
                Err(StartBlocked::Locked(tid)) => {
                    // Wait for the commit to switch transactions; the commit thread waits for
                    // the handles still open in it.
                    if !waited {
                        self.state.borrow_mut().stats.handle_waits += 1;
                        waited = true;
                    }
                    tid
                }
                Err(StartBlocked::TooBig(tid)) => {
                    // Too large: start its commit and wait until it is locked and switched.
                    self.log_start_commit(sim, tid);
                    tid
                }
            };
            self.wait_transaction_locked
                .wait_on_holder(
                    sim,
                    WaitReason::JournalHandle,
                    Blocker::Transaction(tid),
                    self.thread.get(),
                )
                .await;
        }
    }

    /// One pass of `start_this_handle` (see [`Journal::start`]): creates the running
    /// transaction if none runs (`jbd2_get_transaction`, arming the commit timer), then joins it,
    /// or says why the caller must wait first (nothing else changed then). A caller that cannot
    /// wait here (a write's fast path) calls [`Journal::start`] on `Err`, which makes this pass
    /// again: the transaction created by the first pass is found running.
    pub fn start_now(&self, sim: &Sim, credits: u64) -> Result<Handle, StartBlocked> {
        let task = sim.current_task().expect("a handle is started by a task");
        let max = self.max_credits_checked(credits);
        let mut state = self.state_with_running(sim);
        // One borrow for the checks and the accounting (nothing is changed when one fails).
        let state = &mut *state;
        let space_left = checkpoint::log_space_left_in(state);
        let space_needed = self.space_needed_in(state);
        let running = state.running.as_mut().expect("created above");
        let tid = running.tid;
        if running.state == TState::Locked {
            return Err(StartBlocked::Locked(tid));
        }
        if running.outstanding_credits + credits > max {
            return Err(StartBlocked::TooBig(tid));
        }
        if space_left < space_needed {
            return Err(StartBlocked::NoSpace);
        }
        running.outstanding_credits += credits;
        running.updates += 1;
        running.holders.add(task);
        state.stats.handles += 1;
        self.check_handle_started(task, tid);
        Ok(Handle {
            tid,
            credits,
            sync: false,
            task,
        })
    }

    /// The journal's state with a running transaction, created if none runs
    /// (`jbd2_get_transaction`, which also arms the commit timer, `j_commit_timer` at
    /// `t_expires`).
    fn state_with_running(&self, sim: &Sim) -> std::cell::RefMut<'_, super::JournalState> {
        let mut state = self.state.borrow_mut();
        if state.running.is_none() {
            let tid = state.next_tid;
            state.next_tid += 1;
            state.running = Some(Transaction::new(
                tid,
                sim.now(),
                self.config.commit_interval,
            ));
            drop(state);
            self.commit_wake.wake(sim);
            state = self.state.borrow_mut();
        }
        state
    }

    /// `jbd2_journal_start_reserved`: starts a handle whose credits were reserved when an
    /// earlier handle started (`jbd2__journal_start` with `rsv_blocks`; ext4's writeback reserves
    /// one for the conversion of unwritten extents). Linux 3.11, 8f7d89f36829 ("jbd2:
    /// transaction reservation support"). It joins the running transaction (created if none
    /// runs) even while that is locked for commit: `start_this_handle` skips
    /// `add_transaction_credits` for a reserved handle, and that is where a starter waits for a
    /// locked transaction, a too-big one or log space. So it never waits. Simplification: the
    /// credits are not held from the reservation on (`j_reserved_credits`), only from now.
    pub fn start_reserved(&self, sim: &Sim, credits: u64) -> Handle {
        let task = sim.current_task().expect("a handle is started by a task");
        self.max_credits_checked(credits);
        let mut state = self.state_with_running(sim);
        let state = &mut *state;
        let running = state.running.as_mut().expect("created above");
        let tid = running.tid;
        running.outstanding_credits += credits;
        running.updates += 1;
        running.holders.add(task);
        state.stats.handles += 1;
        self.check_handle_started(task, tid);
        Handle {
            tid,
            credits,
            sync: false,
            task,
        }
    }

    /// The most credits a handle may hold (a transaction's buffers), after checking that a
    /// handle asking for `credits` asks for 1 to that many.
    fn max_credits_checked(&self, credits: u64) -> u64 {
        let max = self.config.max_transaction_buffers();
        assert!(
            credits > 0 && credits <= max,
            "a handle asks for {credits} credits (1..={max})"
        );
        max
    }

    /// `jbd2_journal_stop`: gives back unused credits and the update; the last handle of a
    /// locked transaction wakes the commit. A synchronous handle (or a transaction past its
    /// commit time) starts the commit; a synchronous one waits for it.
    pub async fn stop(&self, sim: &Sim, handle: Handle) {
        if let Some(tid) = self.stop_now(sim, handle) {
            self.log_wait_commit(sim, tid).await;
        }
    }

    /// [`Journal::stop`] up to its wait: returns the transaction a synchronous handle must
    /// then wait for (`jbd2_log_wait_commit`), `None` for any other handle (nothing to wait
    /// for).
    pub fn stop_now(&self, sim: &Sim, handle: Handle) -> Option<Tid> {
        let Handle {
            tid,
            credits,
            sync,
            task,
        } = handle;
        self.check_handle_stopped(sim, task, tid);
        let expired = {
            let mut state = self.state.borrow_mut();
            let running = state
                .running
                .as_mut()
                .filter(|t| t.tid == tid)
                .expect("a handle's transaction cannot commit before the handle stops");
            assert!(running.updates > 0, "stop of a transaction without updates");
            running.updates -= 1;
            running.outstanding_credits -= credits;
            assert!(
                running.holders.remove_one(task),
                "the stopping task holds a handle"
            );
            if running.updates == 0 {
                self.wait_updates.wake_all(sim);
            }
            sim.now() >= running.expires_ns
        };
        if sync || expired {
            self.log_start_commit(sim, tid);
        }
        sync.then_some(tid)
    }

    /// [`Journal::stop_now`] of `handle` followed at once, by the same task at the same instant,
    /// by [`Journal::start_now`] of `credits`: the write path's end of one page and begin of
    /// the next (`ext4_da_write_end`'s stop, `ext4_da_write_begin`'s start). Done here only
    /// when the pair changes nothing but the credits and the handle count: the stop would not
    /// start a commit (not synchronous, the transaction not past its commit time), would wake
    /// nobody, and the start would find the same transaction open with room. Then it returns
    /// the new handle; otherwise it gives `handle` back with nothing changed, and the caller
    /// stops it and starts the next one the usual way. A simulator speed-up: one borrow and
    /// no change to the holders for what is a stop and a start.
    pub fn stop_and_start_now(
        &self,
        sim: &Sim,
        handle: Handle,
        credits: u64,
    ) -> Result<Handle, Handle> {
        let max = self.max_credits_checked(credits);
        debug_assert_eq!(sim.current_task(), Some(handle.task));
        {
            let mut state = self.state.borrow_mut();
            let state = &mut *state;
            let space_left = checkpoint::log_space_left_in(state);
            let space_needed = self.space_needed_in(state);
            let Some(running) = state.running.as_mut().filter(|t| t.tid == handle.tid) else {
                return Err(handle);
            };
            // The stop's side effects: a commit started (synchronous or past its commit time;
            // the latter is observable through who asked for the commit, not always in the
            // jbd2 tests' rig), or the last update's wake-up of the commit waiting in T_LOCKED
            // (the only waiter on `j_wait_updates` here), which the start would meet too.
            if handle.sync || sim.now() >= running.expires_ns || running.state == TState::Locked {
                return Err(handle);
            }
            debug_assert!(
                self.wait_updates.is_empty(),
                "waiters on an unlocked transaction"
            );
            // The start's checks, on the state the stop leaves.
            let outstanding = running.outstanding_credits - handle.credits;
            if outstanding + credits > max || space_left < space_needed {
                return Err(handle);
            }
            running.outstanding_credits = outstanding + credits;
            // updates and holders: one less, then one more.
            state.stats.handles += 1;
        }
        self.check_handle_stopped(sim, handle.task, handle.tid);
        self.check_handle_started(handle.task, handle.tid);
        Ok(Handle { credits, ..handle })
    }

    /// `jbd2_journal_get_write_access` (`do_get_write_access`): the handle may modify metadata
    /// block `block`. Locks the buffer first (`lock_buffer`: waits for a write in flight, QASIO
    /// D_meta when the flusher or a checkpoint wrote it asynchronously); a buffer dirty for
    /// writeback home is taken over by the journal; a buffer the committing transaction is
    /// writing to the log right now is waited for (`BJ_Shadow`); one it has not written yet is
    /// frozen (the commit writes the old copy) and passes.
    pub async fn get_write_access(&self, sim: &Sim, handle: &Handle, block: u64) {
        // clear_buffer_dirty + set_buffer_jbddirty under the buffer's lock: writeback must not
        // write a copy that is part of a transaction again.
        if self.buffers.take_over_unlocked(sim, block).is_none() {
            self.buffers.lock_buffer(sim, block).await;
            self.buffers.test_clear_dirty(block);
            self.buffers.unlock_buffer(sim, block);
        }
        loop {
            let head = self.head(block);
            if head.transaction == Some(handle.tid) || head.next_transaction == Some(handle.tid) {
                return;
            }
            let committing = self.state.borrow().committing.as_ref().map(|t| t.tid);
            match head.transaction {
                Some(owner) if Some(owner) == committing => {
                    if head.shadow {
                        // Being written to the log: wait for that write.
                        self.state.borrow_mut().stats.shadow_waits += 1;
                        self.wait_shadow
                            .wait_on_holder(
                                sim,
                                WaitReason::JournalShadow,
                                Blocker::Transaction(owner),
                                self.thread.get(),
                            )
                            .await;
                        continue;
                    }
                    // Frozen: the commit writes the copy it has; ours joins next.
                    let mut state = self.state.borrow_mut();
                    state.stats.frozen_copies += 1;
                    state.heads.entry(block).or_default().next_transaction = Some(handle.tid);
                    return;
                }
                Some(owner) => panic!(
                    "buffer {block} belongs to transaction {owner}, neither running ({}) nor committing",
                    handle.tid
                ),
                None => {
                    let mut state = self.state.borrow_mut();
                    let head = state.heads.entry(block).or_default();
                    head.transaction = Some(handle.tid);
                    drop(state);
                    self.buffers.pin(block, true);
                    return;
                }
            }
        }
    }

    /// [`Journal::get_write_access`] when it cannot wait: a buffer already in `handle`'s
    /// transaction (the second and later times a handle's transaction journals it, as an
    /// appending write journals its inode once per page) whose lock is free is taken over
    /// (`lock_buffer`, `clear_buffer_dirty`, `unlock_buffer`) and the handle may modify it.
    /// Returns false, with nothing changed, in every other case: the caller then calls
    /// [`Journal::get_write_access`].
    pub fn get_write_access_now(&self, sim: &Sim, handle: &Handle, block: u64) -> bool {
        if !self.buffer_in(handle, block) {
            return false;
        }
        if cfg!(debug_assertions) {
            let head = self.head(block);
            assert!(
                head.transaction == Some(handle.tid) || head.next_transaction == Some(handle.tid),
                "buffer {block} is in transaction {} but its head says {head:?}",
                handle.tid
            );
        }
        self.buffers.take_over_unlocked(sim, block).is_some()
    }

    /// `jbd2_journal_dirty_metadata`: the buffer joins the transaction's metadata list (once),
    /// using one of the handle's credits.
    pub fn dirty_metadata(&self, handle: &mut Handle, block: u64) {
        let mut state = self.state.borrow_mut();
        let head = *state
            .heads
            .get(&block)
            .unwrap_or_else(|| panic!("dirty_metadata of buffer {block} without get_write_access"));
        if head.next_transaction == Some(handle.tid) {
            // Frozen in the committing transaction: it is refiled to ours at commit end;
            // account it now.
        } else {
            assert_eq!(
                head.transaction,
                Some(handle.tid),
                "dirty_metadata of buffer {block} owned by another transaction"
            );
        }
        let running = state
            .running
            .as_mut()
            .filter(|t| t.tid == handle.tid)
            .expect("the handle's transaction runs");
        if running.buffer_set.insert(block) {
            running.buffers.push(block);
            assert!(
                handle.credits > 0,
                "handle of transaction {} dirtied more buffers than it reserved",
                handle.tid
            );
            handle.credits -= 1;
            drop(state);
            self.check_journaled(handle.tid, block);
        }
    }

    /// `jbd2_journal_extend`: adds `credits` to the handle if its transaction has room (it is not
    /// locked for commit and stays within `j_max_transaction_buffers`). Returns whether it did.
    pub fn extend(&self, handle: &mut Handle, credits: u64) -> bool {
        let max = self.config.max_transaction_buffers();
        let mut state = self.state.borrow_mut();
        let running = state
            .running
            .as_mut()
            .filter(|t| t.tid == handle.tid)
            .expect("the handle's transaction runs");
        if running.state != TState::Running || running.outstanding_credits + credits > max {
            return false;
        }
        running.outstanding_credits += credits;
        handle.credits += credits;
        true
    }

    /// `jbd2_journal_restart`: stops the handle and starts a new one with `credits` (in the
    /// next transaction if this one is being committed).
    pub async fn restart(&self, sim: &Sim, handle: Handle, credits: u64) -> Handle {
        let sync = handle.sync;
        self.stop(sim, handle).await;
        let mut handle = self.start(sim, credits).await;
        handle.sync = sync;
        handle
    }

    /// `jbd2_journal_file_inode`: in ordered mode, the inode's data must reach the disk before
    /// this transaction commits.
    pub fn file_inode(&self, handle: &Handle, ino: Ino) {
        let mut state = self.state.borrow_mut();
        let running = state
            .running
            .as_mut()
            .filter(|t| t.tid == handle.tid)
            .expect("the handle's transaction runs");
        running.inodes.insert(ino);
        running.need_data_flush = true;
    }

    /// Marks the handle synchronous (`ext4_handle_sync`).
    pub fn set_sync(handle: &mut Handle) {
        handle.sync = true;
    }

    /// `jbd2_log_start_commit`: asks the commit thread to commit `tid` (if it is still the
    /// running transaction and not asked already).
    pub fn log_start_commit(&self, sim: &Sim, tid: Tid) {
        let mut state = self.state.borrow_mut();
        if tid <= state.commit_request {
            return;
        }
        let running = state.running.as_ref().is_some_and(|t| t.tid == tid);
        if running {
            state.commit_request = tid;
            // The account by purpose charges the commit's I/O to the first task that asked for
            // it, in the system call it is in (none: the journal thread's own).
            let cause = self
                .log_device
                .io_account()
                .zip(sim.current_task())
                .and_then(|(account, task)| account.cause(task));
            if let Some(running) = state.running.as_mut() {
                running.requested_by = cause;
            }
            drop(state);
            self.commit_wake.wake(sim);
        }
    }

    /// `jbd2_log_wait_commit`: waits until transaction `tid` has committed (QASIO I_jcommit when
    /// the commit itself waits on asynchronous I/O, such as discards).
    pub async fn log_wait_commit(&self, sim: &Sim, tid: Tid) {
        while self.state.borrow().commit_sequence < tid {
            self.wait_done_commit
                .wait_on_holder(
                    sim,
                    WaitReason::JournalCommit,
                    Blocker::Transaction(tid),
                    self.thread.get(),
                )
                .await;
        }
    }

    /// `jbd2_complete_transaction` (3.10, used by `ext4_sync_file`): commits `tid` if it has
    /// not been, and waits for it. Returns whether anything had to be waited for.
    pub async fn complete_transaction(&self, sim: &Sim, tid: Tid) -> bool {
        if self.state.borrow().commit_sequence >= tid {
            return false;
        }
        self.mark_requested(sim, tid);
        self.log_start_commit(sim, tid);
        self.log_wait_commit(sim, tid).await;
        true
    }

    /// `jbd2_journal_force_commit`: commits and waits as a directory fsync needs it
    /// (`ext4_sync_file` -> `ext4_force_commit`), in the behaviour of `version`:
    /// - before 3.11 (fs/jbd2/transaction.c, 3.10): `jbd2_journal_start(journal, 1)`,
    ///   `handle->h_sync = 1`, `jbd2_journal_stop`: the start opens a transaction when none runs,
    ///   the synchronous stop asks for its commit and waits, so an idle journal commits an
    ///   empty transaction (a commit block, with the barrier's flush and FUA);
    /// - from 3.11 ([`KernelVersion::has_force_commit_optimization`], fs/jbd2/journal.c
    ///   `__jbd2_journal_force_commit`): the running transaction is committed if there is one,
    ///   else the committing one is waited for, else nothing is written.
    ///
    /// Returns whether it waited for a commit.
    pub async fn force_commit(&self, sim: &Sim, version: KernelVersion) -> bool {
        if !version.has_force_commit_optimization() {
            let mut handle = self.start(sim, 1).await;
            Journal::set_sync(&mut handle);
            self.mark_requested(sim, handle.tid);
            self.stop(sim, handle).await;
            return true;
        }
        let (tid, need_to_start) = {
            let state = self.state.borrow();
            match (&state.running, &state.committing) {
                (Some(running), _) => (running.tid, state.commit_request < running.tid),
                (None, Some(committing)) => (committing.tid, false),
                (None, None) => return false,
            }
        };
        if need_to_start {
            self.mark_requested(sim, tid);
            self.log_start_commit(sim, tid);
        }
        self.log_wait_commit(sim, tid).await;
        true
    }

    /// Records when a waiter first asked for the running transaction `tid` (the commit's
    /// `requested` mark: an fsync asked, not the timer).
    fn mark_requested(&self, sim: &Sim, tid: Tid) {
        let mut state = self.state.borrow_mut();
        if let Some(running) = state.running.as_mut().filter(|t| t.tid == tid) {
            if running.requested_ns.is_none() {
                running.requested_ns = Some(sim.now());
            }
        }
    }

    /// `jbd2_trans_will_send_data_barrier` (fs/jbd2/journal.c): whether the commit of `tid`
    /// will still flush the file system's device, so that `ext4_sync_file` need not. No when
    /// barriers are off or `tid` has committed; while it commits, on its own device yes until
    /// its commit record is being written (`T_COMMIT_JFLUSH`: the record's preflush is out, a
    /// data write that completes after it is not covered), with an external journal yes if
    /// it has `t_need_data_flush` and has not flushed the data device yet
    /// (`T_COMMIT_DFLUSH`); while it runs, yes, and in the behaviour of `version`:
    /// - before Linux 6.15 (3.10 ... 6.6) nothing more: with an external journal the commit
    ///   flushes the data device only if something filed ordered data, so a yes for a
    ///   transaction that filed nothing leaves the data unflushed (the 3.10 hole);
    /// - from aac45075f6d7 ([`KernelVersion::will_send_data_barrier_marks_data_flush`],
    ///   `mainline`) the running transaction is marked `t_need_data_flush`, and a `tid` that is
    ///   neither committed, committing nor running gets no (the kernel's `WARN_ON_ONCE`).
    pub fn trans_will_send_data_barrier(&self, tid: Tid, version: KernelVersion) -> bool {
        if !self.config.barrier {
            return false;
        }
        let external = self.is_external();
        let mut state = self.state.borrow_mut();
        if state.commit_sequence >= tid {
            return false;
        }
        let data_flushed = state.data_flushed;
        let record_out = state.commit_record_out == Some(tid);
        if let Some(committing) = state.committing.as_ref().filter(|t| t.tid == tid) {
            return if external {
                committing.need_data_flush && data_flushed != Some(tid)
            } else {
                !record_out
            };
        }
        if !version.will_send_data_barrier_marks_data_flush() {
            return true;
        }
        match state.running.as_mut().filter(|t| t.tid == tid) {
            Some(running) => {
                running.need_data_flush = true;
                true
            }
            None => false,
        }
    }

    /// Whether `block` is already on the metadata list of the handle's transaction (dirtying it
    /// again costs no credit).
    pub fn buffer_in(&self, handle: &Handle, block: u64) -> bool {
        self.state
            .borrow()
            .running
            .as_ref()
            .is_some_and(|t| t.tid == handle.tid && t.buffer_set.contains(&block))
    }

    /// jbd2's record of `block`.
    pub(crate) fn head(&self, block: u64) -> JournalHead {
        self.state
            .borrow()
            .heads
            .get(&block)
            .copied()
            .unwrap_or_default()
    }

    /// The transaction that last journaled `block` and has not been checkpointed yet, or the
    /// one holding it now.
    pub fn buffer_transaction(&self, block: u64) -> Option<Tid> {
        let head = self.head(block);
        head.transaction.or(head.cp_transaction)
    }
}
