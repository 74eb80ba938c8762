//! Invariant d of the journal's run-time checks (see `src/fs/jbd2/check.rs` for a, b, c, e): a
//! block freed in a transaction is not allocated again before that transaction has committed.
//!
//! Linux 3.10 keeps freed blocks out of the buddy on the transaction's `ext4_free_data` list
//! (`ext4_mb_free_metadata`) until `ext4_free_data_callback` runs after the commit block; a
//! reuse before that would let a crash expose the new owner's data under the old owner's
//! committed metadata (or the other way round). The allocator here does the same with its
//! pending lists ([`super::mballoc::MbAlloc::release_committed`]); this check keeps its own
//! record, so that a release too early (or a free that skipped the pending list) is caught
//! where the block is handed out again.
//!
//! Where: the allocator logs its frees with a transaction and its allocations
//! (`ext4_mb_mark_diskspace_used`) while checks are on; ext4 reads the log after each call
//! into the allocator ([`Ext4::alloc_mut`]) and checks every allocation against the freed
//! extents whose transaction's commit block has not completed
//! ([`crate::fs::jbd2::Journal::durable_tid`]). Cost: O(log n) per free and per allocation,
//! each freed extent dropped once when its transaction is durable.
//!
//! Simplifications: frees without a transaction (a directory's extent merge-up, which has no
//! tid in the allocator's API, and file systems without a journal) are immediate and not
//! tracked.

use super::alloc::Ext4Alloc;
use super::mballoc::MbEvent;
use super::mount::Ext4;
use super::Tid;
use crate::sim::Sim;
use std::collections::BTreeMap;

/// Extents freed by transactions whose commit block has not completed yet.
#[derive(Debug, Default)]
pub(crate) struct FreedBlocks {
    /// start -> (len, freeing transaction).
    freed: BTreeMap<u64, (u64, Tid)>,
    by_tid: BTreeMap<Tid, Vec<u64>>,
}

impl FreedBlocks {
    fn freed(&mut self, pblk: u64, len: u64, tid: Tid) {
        self.freed.insert(pblk, (len, tid));
        self.by_tid.entry(tid).or_default().push(pblk);
    }

    /// Forgets the extents of transactions up to `durable`: they may be reused.
    fn prune(&mut self, durable: Tid) {
        let later = self.by_tid.split_off(&(durable + 1));
        for (tid, starts) in std::mem::replace(&mut self.by_tid, later) {
            for start in starts {
                if self.freed.get(&start).is_some_and(|&(_, t)| t == tid) {
                    self.freed.remove(&start);
                }
            }
        }
    }

    /// Blocks `[pblk, pblk + len)` are being allocated: none may be pending free.
    fn allocated(&mut self, pblk: u64, len: u64, durable: Tid) -> Result<(), String> {
        self.prune(durable);
        let end = pblk + len;
        // Freed extents are disjoint: only the last one starting before `end` can overlap.
        let clash = self
            .freed
            .range(..end)
            .next_back()
            .filter(|(&start, &(n, _))| start + n > pblk)
            .map(|(&start, &(n, tid))| (start, n, tid));
        match clash {
            Some((start, n, tid)) => Err(format!(
                "blocks {pblk}..{end} allocated while blocks {start}..{} freed by transaction {tid} wait for its commit (last durable commit {durable})",
                start + n
            )),
            None => Ok(()),
        }
    }
}

impl Ext4 {
    /// Runs `f` on the allocator, then checks what it allocated and freed (invariant d).
    pub(crate) fn alloc_mut<R>(&self, sim: &Sim, f: impl FnOnce(&mut Ext4Alloc) -> R) -> R {
        let result = f(&mut self.alloc.borrow_mut());
        self.check_alloc_events(sim);
        result
    }

    /// Reads the allocator's log of frees and allocations and checks each allocation.
    pub(crate) fn check_alloc_events(&self, sim: &Sim) {
        let checking = self.journal.checks_enabled();
        let events = {
            let mut alloc = self.alloc.borrow_mut();
            alloc.record_events(checking);
            alloc.take_events()
        };
        if events.is_empty() {
            return;
        }
        let durable = self.journal.durable_tid();
        let mut freed = self.freed_check.borrow_mut();
        for event in events {
            match event {
                MbEvent::Freed { pblk, len, tid } => freed.freed(pblk, len, tid),
                MbEvent::Allocated { pblk, len } => {
                    if let Err(what) = freed.allocated(pblk, len, durable) {
                        drop(freed);
                        self.journal
                            .report_violation(sim, "ext4_mb_new_blocks", &what);
                        return;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_allocation_over_a_pending_free_is_refused_until_the_commit_is_durable() {
        let mut freed = FreedBlocks::default();
        freed.freed(100, 10, 3);
        freed.freed(200, 5, 4);
        assert!(freed.allocated(90, 10, 2).is_ok(), "just before the extent");
        assert!(freed.allocated(110, 90, 2).is_ok(), "between the two");
        let error = freed.allocated(95, 6, 2).unwrap_err();
        assert!(error.contains("freed by transaction 3"), "{error}");
        assert!(
            freed.allocated(204, 1, 3).is_err(),
            "the last block of 200..205"
        );
        // Transaction 3 durable: its extent may be reused, 4's not yet.
        assert!(freed.allocated(100, 10, 3).is_ok());
        assert!(freed.allocated(199, 2, 3).is_err());
        assert!(freed.allocated(200, 5, 4).is_ok());
    }
}
