//! QASIO (seed 000: "Quasi-Asynchronous I/O", FAST'15): a request issued asynchronously
//! (flusher writeback, checkpointing, discards of freed blocks) on which a task then blocks is a
//! quasi-asynchronous I/O; detected where the task blocks and boosted in the elevator.
//!
//! - **Detection** (§5.2) is at the wait sites, which already name the request they wait on:
//!   `wait_on_page_writeback` (D_data from a writer's `write_begin`, D_sync from fsync and from
//!   jbd2's ordered-data wait: detected at the same place, switched together as the paper
//!   does), `lock_buffer` on a buffer under write (D_meta), the journal thread's wait for
//!   discards in `ext4_free_data_callback` (D_discard). Each calls
//!   [`crate::mm::BlockSubmit::boost`] with the dependency type.
//! - **Boost** (§5.3): the request queue keeps only requests still marked asynchronous and of an
//!   enabled type; a request already dispatched needs nothing; one still in a task's plug list
//!   is boosted when it reaches the elevator (Algorithm 1's re-check); one in the elevator goes
//!   to [`super::elevator::Elevator::boost`]:
//!   - CFQ (the paper's `cfq_boost_req`) keeps a QASIO list per async queue, dispatched first
//!     when that queue is served, and an async queue whose QASIO list is empty yields to another
//!     async queue whose list is not (the journal thread's discards at `journal_ioprio` BE3 and
//!     the flusher's writes at BE4 are different async queues, `cfq_async_queue_prio`);
//!   - mq-deadline (not in the paper) puts the request on a boosted list served ahead of the
//!     writes of the level being served, after its reads and after higher levels
//!     ([`super::elevator::mq_deadline`] says exactly where and why);
//!   - BFQ (not in the paper) keeps a QASIO list per queue, served first when the queue is,
//!     serves it out of turn ahead of an async queue in service, and injects it into a plugged
//!     sync queue's idle time ([`super::elevator::bfq`]).
//!
//! `[stack.qasio] boost` selects the dependency types (Figure 8's ablation): `[]` (NONE, the
//! default), any of `"data-sync"`, `"meta"`, `"discard"`, or all three (ALL).
//!
//! **Admission** (`[stack.qasio] admit = true`, mobistack's extension, not in the paper): QASIO
//! as §5.3 describes it can only boost a request that exists. With 3.10's legacy request lists a
//! bio gets its request in `__get_request`, and when the flusher's writes fill the 128-request
//! asynchronous list the journal thread's discards sleep there (blktrace Q->G) before any
//! elevator could see them: in M1 under an 8 GB write that sleep, not the elevator queue, is
//! where D_discard's time goes. A discard the journal thread issues from
//! `ext4_free_data_callback` is a QASIO known at submission (§5.2: "it is obvious that jbd2
//! generates QASIOs"); with `admit` such a bio is admitted as `ioc_batching` admits a batcher:
//! past `nr_requests`, within the hard cap of 3/2 `nr_requests`. Legacy request lists only
//! (blk-mq's scheduler tags have no batching to borrow; mq-deadline needs it less).
//!
//! Simplifications: deadline (legacy), noop and kyber do not implement `boost` (a boost there
//! is not counted and changes nothing); a boosted request that several tasks wait on is boosted
//! once; nested dependencies are followed only as far as each waiter boosts what it waits on.

use serde::{Deserialize, Serialize};

/// A dependency type of QASIO §4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dependency {
    /// D_data + D_sync: a task waits for a page under asynchronous writeback.
    DataSync,
    /// D_meta: a task locks a metadata buffer under asynchronous write.
    Meta,
    /// D_discard: the journal thread waits for the discards it issued.
    Discard,
}

impl Dependency {
    pub const ALL: [Dependency; 3] = [Dependency::DataSync, Dependency::Meta, Dependency::Discard];

    pub fn name(self) -> &'static str {
        match self {
            Dependency::DataSync => "data-sync",
            Dependency::Meta => "meta",
            Dependency::Discard => "discard",
        }
    }
}

/// `[stack.qasio]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct QasioConfig {
    /// The dependency types boosted; empty is NONE (Linux as shipped).
    pub boost: Vec<Dependency>,
    /// mobistack's extension (module docs): the journal thread's discards, QASIOs known at
    /// submission, are admitted past a full legacy request list as a batcher is. Needs
    /// `"discard"` in `boost`. Default false (the paper's QASIO).
    pub admit: bool,
}

impl QasioConfig {
    pub fn enabled(&self, dependency: Dependency) -> bool {
        self.boost.contains(&dependency)
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.admit && !self.enabled(Dependency::Discard) {
            return Err(
                "`admit = true` admits the journal thread's discards, a D_discard QASIO: add \"discard\" to `boost`"
                    .into(),
            );
        }
        Ok(())
    }

    /// Whether a bio asking for a request is admitted as a batcher: with `admit`, a discard
    /// issued asynchronously (the journal thread's, from `ext4_free_data_callback`) while
    /// D_discard is boosted.
    pub fn admits(&self, op: crate::dev::IoOp, issued_async: bool) -> bool {
        self.admit
            && issued_async
            && op == crate::dev::IoOp::Discard
            && self.enabled(Dependency::Discard)
    }
}

/// Boosts per dependency type: detected (a task blocked on an asynchronous request of an
/// enabled type) and applied (the elevator moved it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct QasioStats {
    pub detected: [u64; 3],
    pub boosted: [u64; 3],
    /// Requests boosted while still plugged, boosted when inserted.
    pub deferred: u64,
}
