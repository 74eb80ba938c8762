//! Why a task is blocked, and on what.
//!
//! Every blocking call in mobistack names a [`WaitReason`] and, where known, a [`Blocker`]: the
//! request, page, buffer, lock, task or transaction waited on. The engine adds up, per task, the
//! time blocked for each reason, and can walk the chain "task A waits on a lock held by task B,
//! which waits on request R". This attribution is how QASIO dependencies are found and how users
//! see why their app was slow (DESIGN.md principle 4).
//!
//! The reasons are one enum for the whole stack so that per-task accounting is a fixed array; each
//! layer adds the variants it needs here, named after the Linux function that sleeps.

use crate::units::Nanos;
use std::fmt;

/// What a blocked task is waiting for. Names follow the Linux function that sleeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WaitReason {
    // --- engine ---
    /// A voluntary sleep: think time, a timer, a periodic daemon's interval.
    Sleep,
    /// Waiting for another task to finish (join).
    Join,
    /// A generic sleeping lock (`mutex_lock`).
    Mutex,
    /// A generic wait queue (`wait_event`).
    WaitQueue,
    /// A generic one-shot completion (`wait_for_completion`).
    Completion,
    // --- CPU ---
    /// The task runs kernel code on a core (syscall entry and exit, `copy_from_user` /
    /// `copy_to_user`, page allocation): time that passes, but not a stall.
    OnCpu,
    /// The task is runnable and waits for a free core (the run queue).
    CpuWait,
    // --- device and block layer ---
    /// Waiting for a device to serve an I/O (the toy server, or a raw device request).
    Device,
    /// `get_request` / blk-mq tag allocation: the request queue is congested.
    RequestAlloc,
    /// `submit_bio_wait` / `wait_on_buffer` after a read or sync write: the I/O is in flight.
    BlockIo,
    /// `wbt_wait` (`rq_qos_wait`): writeback throttling holds a write back.
    WbtThrottle,
    // --- memory management ---
    /// `lock_page` / `wait_on_page_locked` (includes waiting for a page read to finish).
    PageLock,
    /// `wait_on_page_writeback`: a stable page is being written back (QASIO D_data / D_sync).
    PageWriteback,
    /// `balance_dirty_pages`: the writer is throttled.
    DirtyThrottle,
    /// The page allocator's lock or a free-page wait (FastTrack §3.2).
    PageAlloc,
    /// Direct reclaim of pages (scanning the LRU on behalf of an allocation, or, under
    /// FastTrack's global-lock model, writing dirty pages and waiting for them).
    DirectReclaim,
    /// `congestion_wait`: reclaim backs off until a device leaves congestion or `HZ / 10`
    /// passes (`too_many_isolated`, `throttle_vm_writeout`, `wait_iff_congested`).
    CongestionWait,
    /// `throttle_direct_reclaim`: free pages are below half the min watermark; the
    /// allocation waits for kswapd (`pfmemalloc_wait`).
    ThrottleDirectReclaim,
    // --- file system ---
    /// `lock_buffer` on a metadata buffer (QASIO D_meta).
    BufferLock,
    /// `start_this_handle`: waiting to join the running jbd2 transaction (QASIO I_jhandle).
    JournalHandle,
    /// `jbd2_log_wait_commit`: waiting for a transaction commit (QASIO I_jcommit).
    JournalCommit,
    /// Waiting for discards of freed blocks (QASIO D_discard).
    Discard,
    /// The commit thread waits for the handles of the locked transaction to stop
    /// (`jbd2_journal_commit_transaction` on `j_wait_updates`): whoever holds one holds the
    /// commit, and every task in `start_this_handle` behind it (QASIO I_jhandle).
    JournalUpdates,
    /// `do_get_write_access` waits while the buffer is being written to the journal by the
    /// committing transaction (`BJ_Shadow`).
    JournalShadow,
    /// `__jbd2_log_wait_for_space`: the journal is full; the task checkpoints (writes
    /// journaled metadata home) or waits for whoever does.
    JournalSpace,
    /// `inode_lock` (i_mutex / i_rwsem).
    InodeLock,
    /// MobiFS (seed 004 §6.1): the write logs pin their memory limit; the writer waits for
    /// the checkpointer to release pages (or `sync` waits for every log to be committed).
    MobiFsMemory,
}

impl WaitReason {
    /// Every reason, in declaration order; indexes per-task accounting arrays.
    pub const ALL: [WaitReason; 27] = [
        WaitReason::Sleep,
        WaitReason::Join,
        WaitReason::Mutex,
        WaitReason::WaitQueue,
        WaitReason::Completion,
        WaitReason::OnCpu,
        WaitReason::CpuWait,
        WaitReason::Device,
        WaitReason::RequestAlloc,
        WaitReason::BlockIo,
        WaitReason::WbtThrottle,
        WaitReason::PageLock,
        WaitReason::PageWriteback,
        WaitReason::DirtyThrottle,
        WaitReason::PageAlloc,
        WaitReason::DirectReclaim,
        WaitReason::CongestionWait,
        WaitReason::ThrottleDirectReclaim,
        WaitReason::BufferLock,
        WaitReason::JournalHandle,
        WaitReason::JournalCommit,
        WaitReason::Discard,
        WaitReason::JournalUpdates,
        WaitReason::JournalShadow,
        WaitReason::JournalSpace,
        WaitReason::InodeLock,
        WaitReason::MobiFsMemory,
    ];
    pub const COUNT: usize = Self::ALL.len();

    pub fn index(self) -> usize {
        self as usize
    }

    /// The name used in reports: the Linux function, or a short word for engine waits.
    pub fn name(self) -> &'static str {
        match self {
            WaitReason::Sleep => "sleep",
            WaitReason::Join => "join",
            WaitReason::Mutex => "mutex_lock",
            WaitReason::WaitQueue => "wait_event",
            WaitReason::Completion => "wait_for_completion",
            WaitReason::OnCpu => "on_cpu",
            WaitReason::CpuWait => "cpu",
            WaitReason::Device => "device",
            WaitReason::RequestAlloc => "get_request",
            WaitReason::BlockIo => "submit_bio_wait",
            WaitReason::WbtThrottle => "wbt_wait",
            WaitReason::PageLock => "lock_page",
            WaitReason::PageWriteback => "wait_on_page_writeback",
            WaitReason::DirtyThrottle => "balance_dirty_pages",
            WaitReason::PageAlloc => "alloc_pages",
            WaitReason::DirectReclaim => "direct_reclaim",
            WaitReason::CongestionWait => "congestion_wait",
            WaitReason::ThrottleDirectReclaim => "throttle_direct_reclaim",
            WaitReason::BufferLock => "lock_buffer",
            WaitReason::JournalHandle => "start_this_handle",
            WaitReason::JournalCommit => "jbd2_log_wait_commit",
            WaitReason::Discard => "discard",
            WaitReason::JournalUpdates => "j_wait_updates",
            WaitReason::JournalShadow => "do_get_write_access",
            WaitReason::JournalSpace => "jbd2_log_wait_for_space",
            WaitReason::InodeLock => "inode_lock",
            WaitReason::MobiFsMemory => "mobifs_wait_memory",
        }
    }

    /// The layer of the stack the wait belongs to, for the by-layer breakdown.
    pub fn layer(self) -> &'static str {
        match self {
            WaitReason::Sleep
            | WaitReason::Join
            | WaitReason::Mutex
            | WaitReason::WaitQueue
            | WaitReason::Completion => "engine",
            WaitReason::OnCpu | WaitReason::CpuWait => "cpu",
            WaitReason::Device => "device",
            WaitReason::RequestAlloc | WaitReason::BlockIo | WaitReason::WbtThrottle => "block",
            WaitReason::PageLock
            | WaitReason::PageWriteback
            | WaitReason::DirtyThrottle
            | WaitReason::PageAlloc
            | WaitReason::DirectReclaim
            | WaitReason::CongestionWait
            | WaitReason::ThrottleDirectReclaim => "mm",
            WaitReason::BufferLock
            | WaitReason::JournalHandle
            | WaitReason::JournalCommit
            | WaitReason::Discard
            | WaitReason::JournalUpdates
            | WaitReason::JournalShadow
            | WaitReason::JournalSpace
            | WaitReason::InodeLock
            | WaitReason::MobiFsMemory => "fs",
        }
    }

    /// Voluntary waits (think time, daemons' timers) are not stalls and are left out of
    /// "blocked time" totals.
    pub fn is_voluntary(self) -> bool {
        matches!(self, WaitReason::Sleep)
    }

    /// Whether time in this state keeps the task from progressing: everything but voluntary
    /// sleeps and running on a core.
    pub fn is_stall(self) -> bool {
        !matches!(self, WaitReason::Sleep | WaitReason::OnCpu)
    }
}

impl fmt::Display for WaitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Identifies a task in one simulation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TaskId(pub u32);

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "T{}", self.0)
    }
}

/// The thing a blocked task waits on, where it is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Blocker {
    #[default]
    None,
    /// Another task (join).
    Task(TaskId),
    /// A block-layer request or device I/O, by id.
    Request(u64),
    /// A page-cache page: inode number and page index.
    Page { ino: u64, index: u64 },
    /// A buffer head / metadata block, by block number.
    Buffer(u64),
    /// A lock, by the id the engine gave it.
    Lock(u32),
    /// A journal transaction, by its transaction id (tid).
    Transaction(u64),
    /// Any other object, by a layer-defined id.
    Object(u64),
}

impl fmt::Display for Blocker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Blocker::None => f.write_str("-"),
            Blocker::Task(task) => write!(f, "task {task}"),
            Blocker::Request(id) => write!(f, "request R#{id}"),
            // The block device's own mapping (crate::mm::BDEV_INO): a metadata buffer.
            Blocker::Page { ino, index } if *ino == u64::MAX - 1 => {
                write!(f, "metadata buffer of block {index}")
            }
            Blocker::Page { ino, index } => write!(f, "page {ino}:{index}"),
            Blocker::Buffer(block) => write!(f, "buffer #{block}"),
            Blocker::Lock(id) => write!(f, "lock L#{id}"),
            Blocker::Transaction(tid) => write!(f, "transaction tid {tid}"),
            Blocker::Object(id) => write!(f, "object #{id}"),
        }
    }
}

/// The wait a task is in right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wait {
    pub reason: WaitReason,
    pub blocker: Blocker,
    /// The task that must act for the wait to end, when known (a lock's owner, a joined task).
    pub holder: Option<TaskId>,
    pub since_ns: Nanos,
}

/// Time blocked per reason, indexed by [`WaitReason::index`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockedTimes(pub [Nanos; WaitReason::COUNT]);

impl Default for BlockedTimes {
    fn default() -> Self {
        BlockedTimes([0; WaitReason::COUNT])
    }
}

impl BlockedTimes {
    pub fn add(&mut self, reason: WaitReason, nanos: Nanos) {
        self.0[reason.index()] += nanos;
    }

    pub fn get(&self, reason: WaitReason) -> Nanos {
        self.0[reason.index()]
    }

    /// Element-wise `self - earlier`: the waits between two snapshots.
    pub fn since(&self, earlier: &BlockedTimes) -> BlockedTimes {
        let mut out = BlockedTimes::default();
        for i in 0..WaitReason::COUNT {
            debug_assert!(self.0[i] >= earlier.0[i], "blocked time went backwards");
            out.0[i] = self.0[i] - earlier.0[i];
        }
        out
    }

    /// Time the task could not make progress, summed over reasons: neither voluntary sleeps
    /// nor time running on a core count.
    pub fn stalled_total(&self) -> Nanos {
        WaitReason::ALL
            .iter()
            .filter(|r| r.is_stall())
            .map(|r| self.get(*r))
            .sum()
    }

    /// The reasons with non-zero time, in declaration order.
    pub fn nonzero(&self) -> impl Iterator<Item = (WaitReason, Nanos)> + '_ {
        WaitReason::ALL
            .iter()
            .map(|r| (*r, self.get(*r)))
            .filter(|(_, t)| *t > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_indexed_in_declaration_order() {
        for (i, reason) in WaitReason::ALL.iter().enumerate() {
            assert_eq!(reason.index(), i, "{reason} out of order in ALL");
        }
    }

    #[test]
    fn blocked_times_difference_and_stall_total() {
        let mut earlier = BlockedTimes::default();
        earlier.add(WaitReason::Sleep, 5);
        let mut later = earlier;
        later.add(WaitReason::Sleep, 10);
        later.add(WaitReason::BufferLock, 7);
        later.add(WaitReason::OnCpu, 3);
        let delta = later.since(&earlier);
        assert_eq!(delta.get(WaitReason::Sleep), 10);
        assert_eq!(delta.get(WaitReason::BufferLock), 7);
        assert_eq!(
            delta.stalled_total(),
            7,
            "sleeping and running on a core are not stalls"
        );
        assert_eq!(delta.nonzero().count(), 3);
    }
}
