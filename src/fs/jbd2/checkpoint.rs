//! Log space and checkpointing (fs/jbd2/checkpoint.c and the space accounting of
//! fs/jbd2/transaction.c, 3.10).
//!
//! A committed transaction's log blocks stay in use until every metadata buffer it wrote is
//! current at its home location. Writeback usually does that (the buffers are dirty in the
//! block device's page cache after the commit, and the flusher writes them asynchronously);
//! `__jbd2_journal_clean_checkpoint_list` drops the buffers found clean. The log's tail moves
//! past fully written transactions (`jbd2_journal_get_log_tail`, `jbd2_update_log_tail`,
//! writing the journal superblock) when a commit would free at least a quarter of the log, or
//! after a checkpoint. When a handle finds too little room (`__jbd2_log_space_left` below
//! `jbd_space_needed`), it checkpoints itself (`__jbd2_log_wait_for_space` ->
//! `jbd2_log_do_checkpoint`): under `j_checkpoint_mutex`, it writes the oldest transaction's
//! dirty buffers home with `WRITE_SYNC`, waits for writes in flight, forces the commit of a
//! transaction that holds one of them again, and then moves the tail (a cache flush first
//! with barriers: `jbd2_cleanup_journal_tail`).
//!
//! Simplifications: the journal superblock is block 0 of the journal and the log is the ring of
//! the others; tail updates always write it with FUA.

use super::{Journal, JournalState, Tid, MIN_LOG_RESERVED_BLOCKS};
use crate::dev::{IoFlags, IoOp};
use crate::mm::bio::{BioRequest, IoPurpose};
use crate::sim::Sim;
use std::collections::BTreeSet;

/// A committed transaction's checkpoint list (`t_checkpoint_list`) and its log blocks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckpointList {
    /// Log blocks the commit used (descriptors, copies, commit block).
    pub log_blocks: u64,
    /// Home blocks not yet known to be written home.
    pub buffers: BTreeSet<u64>,
}

/// [`Journal::log_space_left`] of a state already borrowed.
pub(crate) fn log_space_left_in(state: &JournalState) -> u64 {
    let left = state.free.saturating_sub(MIN_LOG_RESERVED_BLOCKS);
    left - (left >> 3)
}

impl Journal {
    /// `__jbd2_log_space_left`: free log blocks less the reserve and an eighth for slack.
    pub fn log_space_left(&self) -> u64 {
        log_space_left_in(&self.state.borrow())
    }

    /// `jbd_space_needed`: room for a full running transaction plus what the committing one may
    /// still write.
    pub fn space_needed(&self) -> u64 {
        self.space_needed_in(&self.state.borrow())
    }

    /// [`Journal::space_needed`] of a state already borrowed.
    pub(crate) fn space_needed_in(&self, state: &JournalState) -> u64 {
        self.config.max_transaction_buffers()
            + state
                .committing
                .as_ref()
                .map_or(0, |t| t.outstanding_credits.max(t.buffers.len() as u64))
    }

    /// `__jbd2_journal_clean_checkpoint_list`: drops buffers that are current at home and in no
    /// transaction. Returns how many it dropped.
    pub(crate) fn clean_checkpoint_list(&self) -> u64 {
        let mut dropped = 0;
        let mut state = self.state.borrow_mut();
        let super::JournalState {
            checkpoint, heads, ..
        } = &mut *state;
        for (tid, list) in checkpoint.iter_mut() {
            list.buffers.retain(|&block| {
                let head = heads.get(&block).copied().unwrap_or_default();
                let clean = head.transaction.is_none() && self.buffers.is_clean(block);
                if clean {
                    dropped += 1;
                    if let Some(head) = heads.get_mut(&block) {
                        if head.cp_transaction == Some(*tid) {
                            head.cp_transaction = None;
                        }
                    }
                }
                !clean
            });
        }
        // Buffers no transaction needs any more are released by the journal.
        let released: Vec<u64> = heads
            .iter()
            .filter(|(_, h)| h.transaction.is_none() && h.cp_transaction.is_none())
            .map(|(&b, _)| b)
            .collect();
        for block in &released {
            heads.remove(block);
        }
        state.stats.checkpoint_cleaned += dropped;
        drop(state);
        for block in released {
            self.buffers.pin(block, false);
        }
        dropped
    }

    /// `jbd2_journal_get_log_tail` + the tail move: frees the log blocks of the oldest
    /// transactions whose buffers are all home. Returns the blocks freeable now.
    fn freeable_log_blocks(&self) -> (u64, Vec<Tid>) {
        let state = self.state.borrow();
        let mut blocks = 0;
        let mut tids = Vec::new();
        for (&tid, list) in &state.checkpoint {
            if !list.buffers.is_empty() {
                break;
            }
            blocks += list.log_blocks;
            tids.push(tid);
        }
        (blocks, tids)
    }

    /// Moves the tail past `tids` (`jbd2_update_log_tail`): writes the journal superblock with
    /// FUA (after a cache flush when `flush`) and returns their log blocks to the free pool.
    async fn update_log_tail(&self, sim: &Sim, tids: Vec<Tid>, blocks: u64, flush: bool) {
        if tids.is_empty() {
            return;
        }
        let issuer = self.jbd2_issuer(sim);
        // `jbd2_journal_update_sb_log_tail(..., WRITE_FUA)` (3.10): no REQ_META.
        let flags = IoFlags {
            sync: true,
            noidle: true,
            fua: true,
            preflush: flush && self.config.barrier,
            ..IoFlags::default()
        };
        if let Some(hook) = self.crash_hook.borrow().as_ref() {
            // s_sequence: the first transaction left in the log.
            let sequence = tids.iter().max().map_or(0, |&t| t + 1);
            hook.log_write(
                self.config.first_block,
                0,
                sim.now(),
                crate::mm::crashlog::LogContent::Superblock { sequence },
            );
        }
        let bio = BioRequest::for_pages(
            IoOp::Write,
            self.config.first_block,
            1,
            flags,
            issuer,
            None,
            IoPurpose::JournalSuperblock,
        );
        crate::mm::bio::submit_bio_wait(&*self.log_device, sim, bio).await;
        let mut state = self.state.borrow_mut();
        state.stats.tail_updates += 1;
        // Only the transactions still on the checkpoint list free their log blocks: another
        // tail update (the commit thread's and a task's in log_wait_for_space) may have moved
        // the tail past some of them while this superblock write was in flight
        // (jbd2_update_log_tail rechecks `tid_gt(tid, j_tail_sequence)` for the same reason).
        let mut freed = 0;
        for tid in tids {
            if let Some(list) = state.checkpoint.remove(&tid) {
                assert!(
                    list.buffers.is_empty(),
                    "tail moved past a dirty transaction"
                );
                freed += list.log_blocks;
            }
        }
        debug_assert!(freed <= blocks, "freed {freed} of {blocks} log blocks");
        state.free += freed;
        assert!(
            state.free < self.config.blocks,
            "more free log blocks than the log holds"
        );
    }

    /// After a commit: moves the tail if that frees at least a quarter of the log (3.10's
    /// `jbd2_journal_commit_transaction`: "Update tail only if we free significant amount").
    pub(crate) async fn maybe_update_tail_after_commit(&self, sim: &Sim) {
        self.clean_checkpoint_list();
        let (blocks, tids) = self.freeable_log_blocks();
        if blocks >= self.config.blocks / 4 {
            self.update_log_tail(sim, tids, blocks, false).await;
        }
    }

    /// `__jbd2_log_wait_for_space`: the caller (a task starting a handle) checkpoints until the
    /// log has room for a transaction.
    pub(crate) async fn log_wait_for_space(&self, sim: &Sim) {
        let guard = self.checkpoint_mutex.lock(sim).await;
        while self.log_space_left() < self.space_needed() {
            self.clean_checkpoint_list();
            let (blocks, tids) = self.freeable_log_blocks();
            if !tids.is_empty() {
                // jbd2_cleanup_journal_tail: flush, then the superblock.
                self.update_log_tail(sim, tids, blocks, true).await;
                continue;
            }
            let oldest = self.state.borrow().checkpoint.keys().next().copied();
            match oldest {
                Some(tid) => self.log_do_checkpoint(sim, tid).await,
                None => {
                    // Nothing checkpointable: the committing transaction holds the space. Wait
                    // for it (3.10 commits the running one and waits, `__jbd2_log_wait_for_space`).
                    let (committing, running) = {
                        let state = self.state.borrow();
                        (
                            state.committing.as_ref().map(|t| t.tid),
                            state.running.as_ref().map(|t| t.tid),
                        )
                    };
                    match committing.or(running) {
                        Some(tid) => {
                            self.log_start_commit(sim, tid);
                            self.log_wait_commit(sim, tid).await;
                        }
                        None => panic!(
                            "the journal has no room and nothing to checkpoint: {} free of {}",
                            self.state.borrow().free,
                            self.config.blocks
                        ),
                    }
                }
            }
        }
        drop(guard);
    }

    /// `jbd2_log_do_checkpoint` of transaction `tid`: writes its buffers home (`WRITE_SYNC`),
    /// waits for writes in flight, commits a transaction that took one of them back.
    async fn log_do_checkpoint(&self, sim: &Sim, tid: Tid) {
        self.state.borrow_mut().stats.checkpoints += 1;
        let blocks: Vec<u64> = match self.state.borrow().checkpoint.get(&tid) {
            Some(list) => list.buffers.iter().copied().collect(),
            None => return,
        };
        for block in blocks {
            let head = self.head(block);
            if let Some(holder) = head.transaction {
                // __process_buffer: a transaction holds it again; commit that one.
                self.log_start_commit(sim, holder);
                self.log_wait_commit(sim, holder).await;
                continue;
            }
            if !self.buffers.is_clean(block) {
                self.state.borrow_mut().stats.checkpoint_writes += 1;
                self.buffers.write_home(sim, block).await;
            }
        }
        self.clean_checkpoint_list();
    }
}
