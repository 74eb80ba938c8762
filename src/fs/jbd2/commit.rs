//! The commit thread (`kjournald2`, fs/jbd2/journal.c) and `jbd2_journal_commit_transaction`
//! (fs/jbd2/commit.c, 3.10).
//!
//! A commit, in order:
//! 1. `T_LOCKED`: no new handle may join; wait until every open handle stops (`t_updates`,
//!    reason `j_wait_updates`: a handle holder asleep on an asynchronous write holds every task
//!    in `start_this_handle` behind it, QASIO's I_jhandle).
//! 2. `T_FLUSH`: the transaction becomes the committing one and a new running transaction may
//!    start (`j_wait_transaction_locked` is woken). Ordered mode: the data of the inodes it
//!    filed is submitted (`journal_submit_data_buffers`, `WB_SYNC_ALL` from the journal thread).
//! 3. `T_COMMIT`: descriptor blocks and copies of the metadata buffers are written to the log
//!    (`WRITE_SYNC`, plugged; the buffers are `BJ_Shadow` meanwhile); then the journal waits for
//!    the data (`journal_finish_inode_data_buffers`: every page under writeback, the flusher's
//!    asynchronous writes included); with an external journal and `t_need_data_flush` it
//!    flushes the file system's device (`T_COMMIT_DFLUSH`); it waits for the log blocks; then
//!    the commit block (`journal_submit_commit_record`): `WRITE_FLUSH_FUA` with barriers (a
//!    cache flush, then the block with FUA), a plain `WRITE_SYNC` without. With
//!    `journal_async_commit` (`JBD2_FEATURE_INCOMPAT_ASYNC_COMMIT`, 3.10 and mainline alike)
//!    the commit block is a plain `WRITE_SYNC` submitted before the wait for the log blocks
//!    (inside their plug), and once it completes one `blkdev_issue_flush` of the journal's
//!    device follows when barriers are on.
//! 4. The metadata buffers are refiled for checkpoint (`__jbd2_journal_insert_checkpoint`,
//!    `__jbd2_journal_refile_buffer`): each becomes dirty in the block device's page cache and
//!    writeback writes it home as asynchronous I/O. A buffer frozen for the next transaction
//!    moves to it.
//! 5. The file system's callback runs (`j_commit_callback`: ext4 frees the transaction's
//!    blocks and, with `-o discard`, issues and waits for their discards: QASIO D_discard).
//! 6. `j_commit_sequence` = tid; the waiters of the tid wake (`j_wait_done_commit`).
//!
//! Simplifications: the log wraps as a ring of `blocks` blocks with no gaps; the journal
//! superblock is written only when the tail moves; log blocks of one commit are one plugged
//! batch (the block layer merges the consecutive ones); `journal_async_commit`'s commit block
//! joins that plug only when the transaction filed no inode and needs no data flush (the
//! kernel's plug is flushed only if the task sleeps in between, which waiting for filed data
//! may or may not do); no checksums are computed (`journal_async_commit` implies
//! `journal_checksum` in ext4; the record only says which blocks the commit covered).

use super::{Journal, LogBlock, TState, Tid, JBD2_PID, TAGS_PER_DESCRIPTOR};
use crate::dev::{IoFlags, IoOp};
use crate::fs::mutant::Mutant;
use crate::mm::bio::{BioRequest, IoPurpose};
use crate::mm::crashlog::LogContent;
use crate::mm::Issuer;
use crate::sim::sync::Completion;
use crate::sim::{Blocker, Sim, WaitReason};
use crate::units::Nanos;
use serde::Serialize;

/// What one commit wrote and how long it took.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommitRecord {
    pub tid: Tid,
    /// When the transaction opened (its first handle).
    pub opened_ns: Nanos,
    /// When the commit started.
    pub started_ns: Nanos,
    pub locked_ns: Nanos,
    pub finished_ns: Nanos,
    /// Metadata blocks (home block numbers) whose copies went to the log.
    pub buffers: Vec<u64>,
    pub descriptor_blocks: u64,
    pub inodes: Vec<u64>,
    /// A waiter asked for it (fsync), rather than the timer or a full transaction.
    pub requested: bool,
    /// The commit block went with a preceding flush and FUA (`WRITE_FLUSH_FUA`: barriers on,
    /// no `journal_async_commit`).
    pub barrier: bool,
}

impl Journal {
    /// The issuer of the journal thread's I/O.
    pub(crate) fn jbd2_issuer(&self, sim: &Sim) -> Issuer {
        Issuer {
            task: sim.current_task(),
            pid: JBD2_PID,
            uid: 0,
            foreground: false,
        }
    }

    /// `kjournald2`: commits when asked (`j_commit_request`) or when the running transaction's
    /// commit time passes (`j_commit_timer`), else sleeps until one of those.
    pub(crate) async fn kjournald2(&self, sim: &Sim) {
        loop {
            let (commit, next_timer) = {
                let mut state = self.state.borrow_mut();
                let (tid, expires) = match state.running.as_ref() {
                    Some(running) => (Some(running.tid), Some(running.expires_ns)),
                    None => (None, None),
                };
                if let (Some(tid), Some(expires)) = (tid, expires) {
                    if sim.now() >= expires && state.commit_request < tid {
                        state.commit_request = tid;
                    }
                }
                let requested = state.commit_request > state.commit_sequence
                    && tid.is_some_and(|t| t <= state.commit_request);
                (requested, expires)
            };
            if commit {
                // The commit as a slice of the thread's timeline (`--perfetto`), as the
                // jbd2_start_commit / jbd2_end_commit tracepoints delimit it.
                let started_ns = sim.now();
                let tid = self.state.borrow().running.as_ref().map_or(0, |t| t.tid);
                if let Some(task) = sim.current_task() {
                    sim.timeline_begin(task);
                }
                self.commit_transaction(sim).await;
                if let Some(task) = sim.current_task() {
                    sim.timeline_slice(
                        task,
                        crate::sim::timeline::SliceKind::Kernel,
                        || format!("jbd2 commit tid {tid}"),
                        started_ns,
                    );
                }
                continue;
            }
            self.commit_wake.wait(sim, next_timer).await;
        }
    }

    /// Takes the next log block (`j_head`, `jbd2_journal_next_log_block`) for a write of
    /// `kind`; returns its offset in the log.
    fn reserve_log_block(&self, kind: LogBlock) -> u64 {
        let mut state = self.state.borrow_mut();
        let offset = state.head;
        state.head = if offset + 1 == self.config.blocks {
            1
        } else {
            offset + 1
        };
        assert!(state.free > 0, "the log overflowed: no free journal block");
        state.free -= 1;
        match kind {
            LogBlock::Descriptor => state.stats.log_descriptor_blocks += 1,
            LogBlock::Metadata => state.stats.log_metadata_blocks += 1,
            LogBlock::Commit => state.stats.log_commit_blocks += 1,
            LogBlock::Superblock => {}
        }
        offset
    }

    /// Submits one log block write at the next log block; returns its completion.
    /// `content` says what the block holds, for crash-point checking's recorder (called only
    /// when one is installed).
    async fn write_log_block(
        &self,
        sim: &Sim,
        kind: LogBlock,
        flags: IoFlags,
        issuer: Issuer,
        content: impl FnOnce() -> LogContent,
    ) -> Completion<()> {
        let offset = self.reserve_log_block(kind);
        self.write_log_block_at(sim, offset, kind, flags, issuer, content)
            .await
    }

    /// Submits one log block write at log offset `offset` (taken with
    /// [`Journal::reserve_log_block`]); returns its completion.
    async fn write_log_block_at(
        &self,
        sim: &Sim,
        offset: u64,
        kind: LogBlock,
        flags: IoFlags,
        issuer: Issuer,
        content: impl FnOnce() -> LogContent,
    ) -> Completion<()> {
        let block = self.config.log_block(offset);
        if let Some(hook) = self.crash_hook.borrow().as_ref() {
            hook.log_write(block, offset, sim.now(), content());
        }
        let purpose = match kind {
            LogBlock::Descriptor => IoPurpose::JournalDescriptor,
            LogBlock::Metadata => IoPurpose::JournalMetadata,
            LogBlock::Commit => IoPurpose::JournalCommit,
            LogBlock::Superblock => IoPurpose::JournalSuperblock,
        };
        let bio = BioRequest::for_pages(IoOp::Write, block, 1, flags, issuer, None, purpose);
        let done: Completion<()> = Completion::new();
        let signal = done.clone();
        self.log_device
            .submit_bio(sim, bio, Box::new(move |s, _| signal.complete(s, ())))
            .await;
        done
    }

    /// `journal_submit_commit_record`: the commit block, `WRITE_FLUSH_FUA` (a cache flush,
    /// then the block with FUA) when barriers are on and `journal_async_commit` is off, else a
    /// plain `WRITE_SYNC` (3.10 and mainline alike: `JBD2_FEATURE_INCOMPAT_ASYNC_COMMIT` drops
    /// the flush and the FUA; the flush comes after the block, in
    /// [`Journal::commit_transaction`]). Returns its completion.
    ///
    /// `offset`: the log block taken for it beforehand (mutant (a) of [`crate::fs::mutant`]);
    /// `None`, the next one.
    async fn submit_commit_block(
        &self,
        sim: &Sim,
        tid: Tid,
        issuer: Issuer,
        offset: Option<u64>,
    ) -> Completion<()> {
        let flags = IoFlags {
            sync: true,
            noidle: true,
            ..IoFlags::default()
        };
        let flags = if self.config.barrier && !self.config.async_commit {
            IoFlags {
                fua: true,
                preflush: self.config.mutant != Some(Mutant::NoPreflush),
                ..flags
            }
        } else {
            flags
        };
        self.check_commit_block_submit(sim, tid);
        let offset = offset.unwrap_or_else(|| self.reserve_log_block(LogBlock::Commit));
        if let Some(hook) = self.crash_hook.borrow().as_ref() {
            hook.commit_block(tid, self.config.log_block(offset), sim.now());
        }
        // JBD2_FEATURE_COMPAT_CHECKSUM: ext4 sets it with journal_async_commit (3.10 and
        // mainline `set_journal_csum_feature_set`, without metadata_csum).
        let checksum = self.config.async_commit;
        self.write_log_block_at(sim, offset, LogBlock::Commit, flags, issuer, || {
            LogContent::Commit { tid, checksum }
        })
        .await
    }

    /// Waits for the log copies; each buffer leaves `BJ_Shadow` once its copy is written, and
    /// writers waiting in `do_get_write_access` go on.
    async fn wait_log_writes(
        &self,
        sim: &Sim,
        tid: Tid,
        writes: &[Completion<()>],
        buffers: &[u64],
    ) {
        for write in writes {
            write
                .wait(sim, WaitReason::BlockIo, Blocker::Transaction(tid))
                .await;
        }
        let mut state = self.state.borrow_mut();
        for &block in buffers {
            state.heads.entry(block).or_default().shadow = false;
        }
        drop(state);
        self.wait_shadow.wake_all(sim);
    }

    /// `jbd2_journal_commit_transaction` of the running transaction.
    pub(crate) async fn commit_transaction(&self, sim: &Sim) {
        let issuer = self.jbd2_issuer(sim);
        let started_ns = sim.now();
        // Drop checkpointed buffers already written home (`__jbd2_journal_clean_checkpoint_list`).
        self.clean_checkpoint_list();
        // 1. T_LOCKED: wait for the handles.
        let running_tid = self.state.borrow().running.as_ref().map(|t| t.tid);
        if let Some(tid) = running_tid {
            self.check_commit_start(sim, tid);
        }
        let (tid, requested_by) = {
            let mut state = self.state.borrow_mut();
            assert!(state.committing.is_none(), "two commits at once");
            let running = state.running.as_mut().expect("a transaction to commit");
            running.state = TState::Locked;
            (running.tid, running.requested_by)
        };
        // The commit's I/O (ordered data, log blocks, discards) is charged to whoever asked.
        let account = self.log_device.io_account().zip(sim.current_task());
        if let Some((account, task)) = &account {
            account.set_cause(*task, requested_by);
        }
        loop {
            let holder = {
                let state = self.state.borrow();
                let running = state.running.as_ref().expect("locked transaction");
                if running.updates == 0 {
                    break;
                }
                running.holders.first()
            };
            self.wait_updates
                .wait_on_holder(
                    sim,
                    WaitReason::JournalUpdates,
                    Blocker::Transaction(tid),
                    holder,
                )
                .await;
        }
        self.check_updates_drained(sim, tid);
        let locked_ns = sim.now();
        let mut phases = super::CommitPhaseNs {
            updates: locked_ns - started_ns,
            ..Default::default()
        };
        let mut mark = locked_ns;
        let mut lap = |sim: &Sim| {
            let now = sim.now();
            let elapsed = now - mark;
            mark = now;
            elapsed
        };
        // 2. T_FLUSH: switch transactions; new handles may start.
        let (inodes, buffers, requested, opened_ns) = {
            let mut state = self.state.borrow_mut();
            let mut transaction = state.running.take().expect("locked transaction");
            let opened_ns = transaction.started_ns;
            transaction.state = TState::Committing;
            let inodes: Vec<u64> = transaction.inodes.iter().copied().collect();
            let buffers = transaction.buffers.clone();
            let requested = transaction.requested_ns.is_some();
            state.committing = Some(transaction);
            state.stats.commits += 1;
            if requested {
                state.stats.requested_commits += 1;
            }
            state.stats.committed_buffers += buffers.len() as u64;
            for &block in &buffers {
                state.heads.entry(block).or_default().shadow = true;
            }
            (inodes, buffers, requested, opened_ns)
        };
        let crash_hook = self.crash_hook.borrow().clone();
        if let Some(hook) = &crash_hook {
            hook.flushing(tid, &buffers);
        }
        self.wait_transaction_locked.wake_all(sim);
        for &ino in &inodes {
            self.data.submit(sim, ino).await;
        }
        phases.data_submit = lap(sim);
        // 3. T_COMMIT: descriptor blocks and metadata copies: `submit_bh(WRITE_SYNC, bh)` in
        // 3.10, REQ_SYNC | REQ_NOIDLE without REQ_META (jbd2's log writes carry REQ_META only
        // from Linux 6.8: JBD2_JOURNAL_REQ_FLAGS, commit 6a3afb6ac6df).
        let log_flags = IoFlags {
            sync: true,
            noidle: true,
            ..IoFlags::default()
        };
        let mut log_writes = Vec::with_capacity(buffers.len() + buffers.len() / 64 + 1);
        let mut descriptors = 0u64;
        // The log writes go out under one plug (blk_start_plug before the t_buffers loop,
        // blk_finish_plug after it): consecutive log blocks merge into one request.
        let commit_first = self.config.mutant == Some(Mutant::CommitBeforeLog);
        if commit_first {
            // Mutant (a) keeps ordered mode's wait before its commit block: only the log
            // blocks' order is broken.
            for &ino in &inodes {
                self.data.wait(sim, ino).await;
            }
        }
        self.log_device.start_plug(issuer.pid);
        let mut commit = None;
        if commit_first {
            // Mutant (a): every log block keeps its place, but the commit block is submitted
            // (with its flush and FUA) before any of them.
            let (offsets, commit_offset) = self.reserve_transaction_log(buffers.len());
            commit = Some(
                self.submit_commit_block(sim, tid, issuer, Some(commit_offset))
                    .await,
            );
            for (i, &home) in buffers.iter().enumerate() {
                let (descriptor, copy) = offsets[i];
                if let Some(offset) = descriptor {
                    descriptors += 1;
                    let homes = descriptor_tags(&buffers, i);
                    log_writes.push(
                        self.write_log_block_at(
                            sim,
                            offset,
                            LogBlock::Descriptor,
                            log_flags,
                            issuer,
                            || LogContent::Descriptor { tid, homes },
                        )
                        .await,
                    );
                }
                log_writes.push(
                    self.write_log_block_at(
                        sim,
                        copy,
                        LogBlock::Metadata,
                        log_flags,
                        issuer,
                        || LogContent::Copy { tid, home },
                    )
                    .await,
                );
            }
        }
        for (i, &home) in buffers.iter().enumerate().filter(|_| commit.is_none()) {
            if (i as u64).is_multiple_of(TAGS_PER_DESCRIPTOR) {
                descriptors += 1;
                log_writes.push(
                    self.write_log_block(sim, LogBlock::Descriptor, log_flags, issuer, || {
                        LogContent::Descriptor {
                            tid,
                            homes: descriptor_tags(&buffers, i),
                        }
                    })
                    .await,
                );
            }
            log_writes.push(
                self.write_log_block(sim, LogBlock::Metadata, log_flags, issuer, || {
                    LogContent::Copy { tid, home }
                })
                .await,
            );
        }
        // An external journal: the file system's device is flushed before the commit record
        // when the transaction needs it (`t_need_data_flush && j_fs_dev != j_dev &&
        // JBD2_BARRIER` -> `blkdev_issue_flush(j_fs_dev)`); the commit block's own flush
        // reaches only the journal's device.
        let need_data_flush = self
            .state
            .borrow()
            .committing
            .as_ref()
            .is_some_and(|t| t.need_data_flush);
        let data_flush_device = self
            .fs_device
            .get()
            .filter(|_| self.config.barrier && need_data_flush);
        // journal_async_commit submits the commit block before `blk_finish_plug`, so it joins
        // the log blocks' plug unless the task slept in between (waiting for ordered data, or
        // for the data device's flush: `schedule` flushes the plug). The model takes "no
        // inode filed and no data flush" for "did not sleep".
        let commit_in_plug =
            self.config.async_commit && inodes.is_empty() && data_flush_device.is_none();
        if commit_in_plug && commit.is_none() {
            self.state.borrow_mut().data_flushed = Some(tid);
            commit = Some(self.submit_commit_block(sim, tid, issuer, None).await);
        }
        self.log_device.finish_plug(issuer.pid);
        phases.log_submit = lap(sim);
        if !commit_in_plug {
            // journal_finish_inode_data_buffers: the ordered data must be on disk.
            #[cfg(test)]
            let fault = self.faults.skip_data_wait.get();
            #[cfg(not(test))]
            let fault = false;
            let skip_data_wait = fault || self.config.mutant == Some(Mutant::NoOrderedWait);
            if !skip_data_wait {
                for &ino in &inodes {
                    self.data.wait(sim, ino).await;
                }
            }
            phases.data_wait = lap(sim);
            if let Some(fs_device) = data_flush_device {
                crate::mm::bio::blkdev_issue_flush(&**fs_device, sim, issuer).await;
            }
            self.state.borrow_mut().data_flushed = Some(tid);
            if self.config.async_commit && commit.is_none() {
                commit = Some(self.submit_commit_block(sim, tid, issuer, None).await);
            }
        }
        let log_blocks = log_writes.len() as u64 + 1;
        self.wait_log_writes(sim, tid, &log_writes, &buffers).await;
        // `commit_transaction->t_state = T_COMMIT_JFLUSH` (3.10), before
        // `journal_submit_commit_record`.
        self.state.borrow_mut().commit_record_out = Some(tid);
        let commit = match commit {
            Some(commit) => commit,
            None => self.submit_commit_block(sim, tid, issuer, None).await,
        };
        commit
            .wait(sim, WaitReason::BlockIo, Blocker::Transaction(tid))
            .await;
        if self.config.async_commit && self.config.barrier {
            // The commit block went without a barrier: one cache flush of the journal's
            // device after it makes the log and the commit block durable together (the
            // commit block's checksum, JBD2_FEATURE_COMPAT_CHECKSUM, lets recovery reject a
            // commit block that reached the media before its log blocks).
            crate::mm::bio::blkdev_issue_flush(&*self.log_device, sim, issuer).await;
        }
        self.check_commit_block_done(sim, tid);
        // The tail may move now that the commit record is out.
        self.maybe_update_tail_after_commit(sim).await;
        phases.log_wait = lap(sim);
        // 4. Refile for checkpoint: the buffers may now be written home.
        let mut to_dirty = Vec::with_capacity(buffers.len());
        {
            let mut state = self.state.borrow_mut();
            let running_tid = state.running.as_ref().map(|t| t.tid);
            let mut list = super::checkpoint::CheckpointList {
                log_blocks,
                buffers: Default::default(),
            };
            for &block in &buffers {
                let previous_cp = state.heads.get(&block).and_then(|h| h.cp_transaction);
                if let Some(old) = previous_cp {
                    // __jbd2_journal_remove_checkpoint: our copy supersedes the older one.
                    if let Some(old_list) = state.checkpoint.get_mut(&old) {
                        old_list.buffers.remove(&block);
                    }
                }
                let head = state.heads.entry(block).or_default();
                head.cp_transaction = Some(tid);
                list.buffers.insert(block);
                match head.next_transaction.take() {
                    Some(next) => {
                        assert_eq!(
                            Some(next),
                            running_tid,
                            "a frozen buffer waits for the running transaction"
                        );
                        head.transaction = Some(next);
                    }
                    None => {
                        head.transaction = None;
                        to_dirty.push(block);
                    }
                }
            }
            let previous = state.checkpoint.insert(tid, list);
            assert!(previous.is_none(), "transaction {tid} checkpointed twice");
        }
        for block in to_dirty {
            self.buffers.mark_dirty(sim, block);
        }
        // 5. The file system's commit callback (ext4_free_data_callback: discards).
        let callback = self.callback.borrow().as_ref().map(|cb| cb(sim, tid));
        if let Some(callback) = callback {
            callback.await;
        }
        phases.callback = lap(sim);
        // 6. Done: wake the waiters of this tid.
        {
            let mut state = self.state.borrow_mut();
            state.stats.phase_ns.add(&phases);
            let committing = state.committing.take().expect("the committing transaction");
            assert_eq!(committing.tid, tid);
            state.data_flushed = None;
            state.commit_record_out = None;
            drop(state);
            self.check_commit_done(sim, tid);
            let mut state = self.state.borrow_mut();
            assert_eq!(
                state.commit_sequence + 1,
                tid,
                "transactions commit in order"
            );
            state.commit_sequence = tid;
            let record = CommitRecord {
                tid,
                opened_ns,
                started_ns,
                locked_ns,
                finished_ns: sim.now(),
                buffers: buffers.clone(),
                descriptor_blocks: descriptors,
                inodes: inodes.clone(),
                requested,
                barrier: self.config.barrier && !self.config.async_commit,
            };
            if state.records.len() == super::MAX_COMMIT_RECORDS {
                state.records.pop_front();
            }
            state.records.push_back(record);
        }
        if let Some((account, task)) = &account {
            account.set_cause(*task, None);
        }
        self.wait_done_commit.wake_all(sim);
    }
}

impl Journal {
    /// Takes the log blocks of a transaction of `buffers` copies in the order jbd2 writes
    /// them (a descriptor block before each [`TAGS_PER_DESCRIPTOR`] copies), then its commit
    /// block's: per copy, (its descriptor's offset if one precedes it, its own offset), and
    /// the commit block's offset (mutant (a) of [`crate::fs::mutant`]).
    fn reserve_transaction_log(&self, buffers: usize) -> (Vec<(Option<u64>, u64)>, u64) {
        let offsets = (0..buffers)
            .map(|i| {
                let descriptor = (i as u64)
                    .is_multiple_of(TAGS_PER_DESCRIPTOR)
                    .then(|| self.reserve_log_block(LogBlock::Descriptor));
                (descriptor, self.reserve_log_block(LogBlock::Metadata))
            })
            .collect();
        (offsets, self.reserve_log_block(LogBlock::Commit))
    }
}

/// The tags of the descriptor block written before copy `first` of `buffers`: the home blocks
/// of the copies it describes (up to [`TAGS_PER_DESCRIPTOR`]).
fn descriptor_tags(buffers: &[u64], first: usize) -> Vec<u64> {
    let end = (first + TAGS_PER_DESCRIPTOR as usize).min(buffers.len());
    buffers[first..end].to_vec()
}
