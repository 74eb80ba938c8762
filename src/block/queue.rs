//! The request queue: from `submit_bio` to the device and back, as a pure event-driven state
//! machine (methods take `now`; nothing awaits). [`super::layer::BlockLayer`] drives it inside the
//! simulation engine; tests and tools can drive it directly.
//!
//! Models block/blk-core.c (3.10) `blk_queue_bio`, `get_request` / `__get_request` /
//! `__freed_request`, `blk_attempt_plug_merge`, `blk_flush_plug_list`, `__blk_run_queue`, and
//! for blk-mq elevators (mq-deadline) the scheduler-tag limit of block/blk-mq-tag.c with the
//! elevator's `limit_depth`.
//!
//! Path of a bio:
//! 1. Q: queued. Flush/FUA bios skip merging and go to the dispatch list (`ELEVATOR_INSERT_FLUSH`).
//! 2. Plug merge into the task's plugged requests, then elevator merge (M / F).
//! 3. G: a request is allocated, limited per direction (sync / async) to `nr_requests` (legacy;
//!    the first task to fill the list becomes a *batcher* allowed `BLK_BATCH_REQ` more within
//!    `BLK_BATCH_TIME`, everyone else sleeps, hard cap 3/2 `nr_requests`), or by scheduler tags
//!    (blk-mq: `nr_requests` tags, async requests limited to the elevator's `async_depth`).
//!    When none is available the submitter must sleep: S, its plug is flushed (it is about to
//!    schedule), and it retries when a request is freed; after sleeping it becomes a batcher.
//! 4. With a plug, the request waits on the task's plug list (flushed at `finish_plug`, when the
//!    task sleeps, or at `BLK_MAX_REQUEST_COUNT` requests), else it is inserted now.
//! 5. I: inserted into the elevator; D: issued when the device has a free slot; C: completed,
//!    the request is freed and waiters are woken.
//!
//! Simplifications:
//! - Bios must already fit `max_sectors` (use [`split_bio`], like `blk_queue_split`).
//! - The flush state machine (`blk_insert_flush`: preflush, data, postflush steps) is one request
//!   carrying the flags to the device, which models the cost.
//! - No `ELV_MQUEUE_MUST` from CFQ's `may_queue`, no `rl->starved` cross-direction wakeups, no
//!   congestion thresholds (only the hard limits), no request-to-request merges.
//! - One hardware queue for blk-mq; tags are not split per CPU.

use super::blktrace::{Action, BlkTrace};
use super::elevator::Elevator;
use super::request::{Bio, BioId, MergeKind, Request, RequestId, MAX_REQUEST_SECTORS};
use crate::dev::{BlockDevice, DevCompletion};
use crate::units::{Nanos, NS_PER_MS};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// `BLKDEV_MAX_RQ = 128`: default `nr_requests` (include/linux/blkdev.h).
pub const BLKDEV_MAX_RQ: usize = 128;
/// `BLK_BATCH_REQ = 32`: requests a batching process may allocate past the limit (blk-core.c).
pub const BLK_BATCH_REQ: u32 = 32;
/// `BLK_BATCH_TIME = HZ / 50` -> 20 ms (blk-core.c).
pub const BLK_BATCH_TIME_NS: Nanos = 20 * NS_PER_MS;
/// `BLK_MAX_REQUEST_COUNT = 16`: a plug list this long is flushed (blk-core.c, 3.10).
pub const BLK_MAX_REQUEST_COUNT: usize = 16;
/// Bound on plugged requests per task, above the flush point: exceeding it is a model bug.
const MAX_PLUGGED: usize = 4 * BLK_MAX_REQUEST_COUNT;

/// How requests are allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocModel {
    /// Legacy request lists, `nr_requests` per direction (sync / async).
    Legacy { nr_requests: usize },
    /// blk-mq scheduler tags shared by both directions.
    Mq { nr_requests: usize },
}

impl AllocModel {
    /// The kernel default for an elevator: blk-mq ones get `2 * min(tag_set_depth, BLKDEV_MAX_RQ)`
    /// scheduler tags (`blk_mq_init_sched`), legacy ones `BLKDEV_MAX_RQ` per direction.
    /// `tag_set_depth` is the host driver's tag-set depth (see [`tag_set_depth`]).
    pub fn default_for(elevator: &str, tag_set_depth: usize) -> AllocModel {
        if elevator == "mq-deadline" {
            AllocModel::Mq {
                nr_requests: 2 * tag_set_depth.min(BLKDEV_MAX_RQ),
            }
        } else {
            AllocModel::Legacy {
                nr_requests: BLKDEV_MAX_RQ,
            }
        }
    }
}

/// `MMC_QUEUE_DEPTH = 64` (drivers/mmc/core/queue.c): the blk-mq tag set of an eMMC host without
/// command queueing, which serializes commands to the card itself.
pub const MMC_QUEUE_DEPTH: usize = 64;

/// The blk-mq tag-set depth of a host whose device holds `device_queue_depth` commands: the
/// device's depth when it queues (UFS `nutrs`, eMMC CQE), else the mmc driver's 64.
pub fn tag_set_depth(device_queue_depth: usize) -> usize {
    if device_queue_depth > 1 {
        device_queue_depth
    } else {
        MMC_QUEUE_DEPTH
    }
}

/// Which allocation wait queue a sleeping submitter is on (`rl->wait[is_sync]`; with blk-mq the
/// same split keeps sync sleepers apart from those held back by `async_depth`).
pub type AllocClass = usize;
pub const ALLOC_ASYNC: AllocClass = 0;
pub const ALLOC_SYNC: AllocClass = 1;

/// The result of submitting a bio.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubmitOutcome {
    /// Merged into a request that already existed.
    Merged(RequestId),
    /// A new request carries it.
    Queued(RequestId),
    /// No request available: sleep on `AllocClass`'s wait queue, then call
    /// [`RequestQueue::retry_get_request`] with the same bio.
    MustWait(AllocClass),
}

/// Counters for the merge statistics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct QueueStats {
    pub bios: u64,
    pub bio_sectors: u64,
    pub plug_merges: u64,
    pub back_merges: u64,
    pub front_merges: u64,
    pub requests: u64,
    pub dispatched: u64,
    pub completed: u64,
    pub alloc_sleeps: u64,
    pub plug_flushes: u64,
}

impl QueueStats {
    pub fn merges(&self) -> u64 {
        self.plug_merges + self.back_merges + self.front_merges
    }
}

/// What changed during [`RequestQueue::advance`].
#[derive(Debug, Default)]
pub struct AdvanceReport {
    /// Requests that completed, in completion order, with their completion time.
    pub completed: Vec<(Nanos, Request)>,
    /// Requests freed per allocation class: wake that many sleepers of each class.
    pub freed: [usize; 2],
}

/// Per-task batching state (`ioc->nr_batch_requests`, `ioc->last_waited`).
#[derive(Debug, Clone, Copy)]
struct Batching {
    nr_batch_requests: u32,
    last_waited: Nanos,
}

/// Splits a bio larger than `max_sectors` into pieces (`blk_queue_split` / `bio_split`). Pieces
/// get ids `next_id`, `next_id + 1`, ... except the first, which keeps the original id.
pub fn split_bio(bio: Bio, max_sectors: u32, next_id: &mut BioId) -> Vec<Bio> {
    assert!(max_sectors > 0);
    if bio.nr_sectors <= max_sectors {
        return vec![bio];
    }
    let mut pieces = Vec::new();
    let mut offset = 0;
    while offset < bio.nr_sectors {
        let length = (bio.nr_sectors - offset).min(max_sectors);
        let mut piece = bio.clone();
        if offset > 0 {
            piece.id = *next_id;
            *next_id += 1;
        }
        piece.sector = bio.sector + u64::from(offset);
        piece.nr_sectors = length;
        pieces.push(piece);
        offset += length;
    }
    pieces
}

/// The request queue of one block device.
pub struct RequestQueue {
    elevator: Box<dyn Elevator>,
    device: Box<dyn BlockDevice>,
    alloc: AllocModel,
    pub max_sectors: u32,
    /// Legacy `rl->count[sync]`, or blk-mq tags in use per direction.
    allocated: [usize; 2],
    /// Allocated requests subject to `async_depth` (all but sync reads).
    allocated_limited: usize,
    /// `blk_rl_full(rl, sync)`.
    rl_full: [bool; 2],
    batching: BTreeMap<u32, Batching>,
    /// Per task: the plug list (`current->plug->list`).
    plugs: BTreeMap<u32, Vec<Request>>,
    /// `q->queue_head`: requests that bypass the elevator (flushes), served first.
    dispatch_list: VecDeque<Request>,
    bypass: BTreeSet<RequestId>,
    in_flight: BTreeMap<RequestId, Request>,
    next_request_id: RequestId,
    stats: QueueStats,
    trace: Option<BlkTrace>,
    last_now: Nanos,
}

impl RequestQueue {
    pub fn new(
        elevator: Box<dyn Elevator>,
        device: Box<dyn BlockDevice>,
        alloc: AllocModel,
    ) -> RequestQueue {
        let limit = match alloc {
            AllocModel::Legacy { nr_requests } | AllocModel::Mq { nr_requests } => nr_requests,
        };
        assert!(limit > 0, "nr_requests must be positive");
        RequestQueue {
            elevator,
            device,
            alloc,
            max_sectors: MAX_REQUEST_SECTORS,
            allocated: [0; 2],
            allocated_limited: 0,
            rl_full: [false; 2],
            batching: BTreeMap::new(),
            plugs: BTreeMap::new(),
            dispatch_list: VecDeque::new(),
            bypass: BTreeSet::new(),
            in_flight: BTreeMap::new(),
            next_request_id: 1,
            stats: QueueStats::default(),
            trace: None,
            last_now: 0,
        }
    }

    /// Starts recording a blktrace log.
    pub fn enable_trace(&mut self, trace: BlkTrace) {
        self.trace = Some(trace);
    }

    pub fn trace(&self) -> Option<&BlkTrace> {
        self.trace.as_ref()
    }

    pub fn stats(&self) -> QueueStats {
        self.stats
    }

    pub fn elevator(&self) -> &dyn Elevator {
        self.elevator.as_ref()
    }

    pub fn elevator_mut(&mut self) -> &mut dyn Elevator {
        self.elevator.as_mut()
    }

    pub fn device(&self) -> &dyn BlockDevice {
        self.device.as_ref()
    }

    pub fn alloc_model(&self) -> AllocModel {
        self.alloc
    }

    /// Requests allocated and not yet freed (plugged, queued, on the dispatch list, in flight).
    pub fn allocated(&self) -> usize {
        self.allocated[0] + self.allocated[1]
    }

    fn tick(&mut self, now: Nanos) {
        assert!(
            now >= self.last_now,
            "time went backwards: {now} < {}",
            self.last_now
        );
        self.last_now = now;
    }

    fn trace_bio(&mut self, now: Nanos, action: Action, bio: &Bio) {
        if let Some(trace) = self.trace.as_mut() {
            trace.bio(now, action, bio);
        }
    }

    fn trace_request(&mut self, now: Nanos, action: Action, rq: &Request) {
        if let Some(trace) = self.trace.as_mut() {
            trace.request(now, action, rq);
        }
    }

    // ---- plugging -----------------------------------------------------------------------

    /// `blk_start_plug`. Nested plugs are ignored, as in Linux.
    pub fn start_plug(&mut self, pid: u32) {
        self.plugs.entry(pid).or_default();
    }

    /// `blk_finish_plug`: flushes and removes the task's plug.
    pub fn finish_plug(&mut self, now: Nanos, pid: u32) {
        self.flush_plug_list(now, pid, true);
        self.plugs.remove(&pid);
    }

    pub fn is_plugged(&self, pid: u32) -> bool {
        self.plugs.contains_key(&pid)
    }

    /// What happens to the plug list when the task sleeps (`blk_schedule_flush_plug`): see
    /// [`RequestQueue::flush_plug_list`].
    pub fn flush_plug(&mut self, now: Nanos, pid: u32) {
        self.flush_plug_list(now, pid, false);
    }

    /// `blk_flush_plug_list`: inserts the plugged requests in sector order and runs the queue.
    /// `explicit` (the task flushed its own plug, not `from_schedule`) is what blktrace tells
    /// apart: U (`BLK_TA_UNPLUG_IO`) or T (`BLK_TA_UNPLUG_TIMER`), with the request count.
    fn flush_plug_list(&mut self, now: Nanos, pid: u32, explicit: bool) {
        self.tick(now);
        let Some(list) = self.plugs.get_mut(&pid) else {
            return;
        };
        if list.is_empty() {
            return;
        }
        let mut requests = std::mem::take(list);
        if let Some(trace) = self.trace.as_mut() {
            let action = if explicit {
                Action::UnplugIo
            } else {
                Action::UnplugTimer
            };
            let comm = &requests[0].task.comm;
            trace.plug(now, action, pid, comm, requests.len() as u32);
        }
        requests.sort_by_key(|rq| (rq.sector, rq.id));
        self.stats.plug_flushes += 1;
        for rq in requests {
            self.insert_request(now, rq);
        }
        self.run_queue(now);
    }

    /// `blk_attempt_plug_merge`: merges into the task's plugged requests, newest first. Returns
    /// the merged request, or the number of plugged requests (`request_count`).
    fn attempt_plug_merge(&mut self, bio: &Bio) -> Result<(RequestId, MergeKind), usize> {
        let max_sectors = self.max_sectors;
        // blk-mq kernels refuse merges across I/O priorities; 3.10 merges and keeps the best.
        let same_prio_only = matches!(self.alloc, AllocModel::Mq { .. });
        let Some(list) = self.plugs.get_mut(&bio.task.pid) else {
            return Err(0);
        };
        let count = list.len();
        for rq in list.iter_mut().rev() {
            if !rq.merge_ok(bio, max_sectors) || (same_prio_only && rq.ioprio != bio.ioprio) {
                continue;
            }
            if let Some(kind) = rq.try_merge(bio) {
                rq.merge_bio(bio, kind);
                return Ok((rq.id, kind));
            }
        }
        Err(count)
    }

    // ---- request allocation ---------------------------------------------------------------

    fn alloc_class(bio: &Bio) -> AllocClass {
        if bio.is_sync() {
            ALLOC_SYNC
        } else {
            ALLOC_ASYNC
        }
    }

    /// Requests that count against blk-mq's shallow `async_depth`: all but sync reads.
    fn depth_limited(sync: bool, write: bool) -> bool {
        !sync || write
    }

    /// `ioc_batching`.
    fn is_batching(&self, pid: u32, now: Nanos) -> bool {
        self.batching.get(&pid).is_some_and(|batch| {
            batch.nr_batch_requests == BLK_BATCH_REQ
                || (batch.nr_batch_requests > 0 && now < batch.last_waited + BLK_BATCH_TIME_NS)
        })
    }

    /// `ioc_set_batching`.
    fn set_batching(&mut self, pid: u32, now: Nanos) {
        self.batching.insert(
            pid,
            Batching {
                nr_batch_requests: BLK_BATCH_REQ,
                last_waited: now,
            },
        );
    }

    /// `__get_request`'s admission test (legacy) or the tag test (blk-mq).
    fn may_allocate(&mut self, now: Nanos, bio: &Bio) -> bool {
        let class = Self::alloc_class(bio);
        match self.alloc {
            AllocModel::Legacy { nr_requests } => {
                let count = self.allocated[class];
                if count + 1 >= nr_requests {
                    if !self.rl_full[class] {
                        self.set_batching(bio.task.pid, now);
                        self.rl_full[class] = true;
                    } else if !self.is_batching(bio.task.pid, now) {
                        return false;
                    }
                }
                count < 3 * nr_requests / 2
            }
            AllocModel::Mq { nr_requests } => {
                if self.allocated() >= nr_requests {
                    return false;
                }
                // `dd_limit_depth`: only sync reads are exempt from the shallow depth.
                let exempt = bio.is_sync() && !bio.op.is_write();
                match self.elevator.async_depth(nr_requests) {
                    Some(depth) if !exempt => self.allocated_limited < depth,
                    _ => true,
                }
            }
        }
    }

    /// Allocates a request for `bio` (G), after `may_allocate` said yes.
    fn allocate(&mut self, now: Nanos, bio: &Bio) -> Request {
        let class = Self::alloc_class(bio);
        self.allocated[class] += 1;
        if Self::depth_limited(bio.is_sync(), bio.op.is_write()) {
            self.allocated_limited += 1;
        }
        if self.is_batching(bio.task.pid, now) {
            let batch = self.batching.get_mut(&bio.task.pid).expect("batching");
            batch.nr_batch_requests -= 1;
        }
        let id = self.next_request_id;
        self.next_request_id += 1;
        self.stats.requests += 1;
        self.trace_bio(now, Action::GetRequest, bio);
        Request::from_bio(id, bio, now)
    }

    /// `__freed_request`: returns whether sleepers of the class may retry.
    fn free_request(&mut self, rq: &Request) -> AllocClass {
        let class = if rq.is_sync() {
            ALLOC_SYNC
        } else {
            ALLOC_ASYNC
        };
        assert!(
            self.allocated[class] > 0,
            "freeing more requests than allocated"
        );
        self.allocated[class] -= 1;
        if Self::depth_limited(rq.is_sync(), rq.is_write()) {
            self.allocated_limited -= 1;
        }
        if let AllocModel::Legacy { nr_requests } = self.alloc {
            if self.allocated[class] < nr_requests {
                self.rl_full[class] = false;
            }
        }
        class
    }

    // ---- submission -------------------------------------------------------------------------

    /// `submit_bio` -> `blk_queue_bio`.
    pub fn submit_bio(&mut self, now: Nanos, bio: &Bio) -> SubmitOutcome {
        self.tick(now);
        assert!(
            bio.nr_sectors <= self.max_sectors,
            "bio of {} sectors exceeds max_sectors {}: split it first",
            bio.nr_sectors,
            self.max_sectors
        );
        self.stats.bios += 1;
        self.stats.bio_sectors += u64::from(bio.nr_sectors);
        self.trace_bio(now, Action::Queue, bio);
        if !bio.is_flush() {
            if let Ok((id, kind)) = self.attempt_plug_merge(bio) {
                self.stats.plug_merges += 1;
                self.trace_merge(now, kind, bio);
                return SubmitOutcome::Merged(id);
            }
            let max_sectors = self.max_sectors;
            if let Some((id, kind)) = self.elevator.merge_bio(now, bio, max_sectors) {
                match kind {
                    MergeKind::Back => self.stats.back_merges += 1,
                    MergeKind::Front => self.stats.front_merges += 1,
                }
                self.trace_merge(now, kind, bio);
                return SubmitOutcome::Merged(id);
            }
        }
        self.get_request(now, bio)
    }

    fn trace_merge(&mut self, now: Nanos, kind: MergeKind, bio: &Bio) {
        let action = match kind {
            MergeKind::Back => Action::BackMerge,
            MergeKind::Front => Action::FrontMerge,
        };
        self.trace_bio(now, action, bio);
    }

    /// The retry in `get_request` after the submitter slept: it is now a batcher.
    pub fn retry_get_request(&mut self, now: Nanos, bio: &Bio) -> SubmitOutcome {
        self.tick(now);
        self.set_batching(bio.task.pid, now);
        self.get_request(now, bio)
    }

    /// `get_request` + the rest of `blk_queue_bio`.
    fn get_request(&mut self, now: Nanos, bio: &Bio) -> SubmitOutcome {
        if !self.may_allocate(now, bio) {
            self.stats.alloc_sleeps += 1;
            self.trace_bio(now, Action::Sleep, bio);
            // The task is about to sleep: `io_schedule` flushes its plug.
            self.flush_plug(now, bio.task.pid);
            return SubmitOutcome::MustWait(Self::alloc_class(bio));
        }
        let rq = self.allocate(now, bio);
        let id = rq.id;
        if !bio.is_flush() && self.plugs.contains_key(&bio.task.pid) {
            let plugged = self.plugs[&bio.task.pid].len();
            if plugged >= BLK_MAX_REQUEST_COUNT {
                self.flush_plug_list(now, bio.task.pid, true);
            }
            // blktrace's P: the first request on an empty plug list (`trace_block_plug`).
            if plugged == 0 || plugged >= BLK_MAX_REQUEST_COUNT {
                if let Some(trace) = self.trace.as_mut() {
                    trace.plug(now, Action::Plug, bio.task.pid, &bio.task.comm, 0);
                }
            }
            let list = self.plugs.get_mut(&bio.task.pid).expect("plug exists");
            assert!(list.len() < MAX_PLUGGED, "plug list overflow");
            list.push(rq);
        } else {
            self.insert_request(now, rq);
            self.run_queue(now);
        }
        SubmitOutcome::Queued(id)
    }

    /// `__elv_add_request`: I, into the elevator or (flushes) the dispatch list.
    fn insert_request(&mut self, now: Nanos, mut rq: Request) {
        self.trace_request(now, Action::Insert, &rq);
        rq.inserted_ns = now;
        if rq.flags.fua || rq.flags.preflush || rq.op == crate::dev::IoOp::Flush {
            self.bypass.insert(rq.id);
            self.dispatch_list.push_back(rq);
        } else {
            self.elevator.add_request(now, rq);
        }
    }

    // ---- dispatch and completion -------------------------------------------------------------

    /// `__blk_run_queue`: issues requests while the device has free slots.
    pub fn run_queue(&mut self, now: Nanos) {
        self.tick(now);
        while self.device.in_flight() < self.device.queue_depth() {
            let rq = match self.dispatch_list.pop_front() {
                Some(rq) => rq,
                None => match self.elevator.dispatch_request(now) {
                    Some(rq) => rq,
                    None => break,
                },
            };
            self.issue(now, rq);
        }
        if self.device.in_flight() >= self.device.queue_depth() && self.elevator.has_work() {
            self.elevator.dispatch_blocked(now);
        }
    }

    fn issue(&mut self, now: Nanos, mut rq: Request) {
        assert!(
            rq.issued_ns.is_none(),
            "request R#{} dispatched twice",
            rq.id
        );
        rq.issued_ns = Some(now);
        self.trace_request(now, Action::Issue, &rq);
        self.stats.dispatched += 1;
        self.device.submit(now, rq.dev_request());
        let previous = self.in_flight.insert(rq.id, rq);
        assert!(previous.is_none(), "two requests in flight with one tag");
    }

    /// The earliest time at which [`advance`](Self::advance) has something to do.
    pub fn next_event(&self) -> Option<Nanos> {
        [self.device.next_event(), self.elevator.next_timer()]
            .into_iter()
            .flatten()
            .min()
    }

    /// Moves to `now`: completes requests the device finished, fires the elevator's timer if due,
    /// and dispatches again.
    pub fn advance(&mut self, now: Nanos) -> AdvanceReport {
        self.tick(now);
        let mut report = AdvanceReport::default();
        let mut done: Vec<DevCompletion> = Vec::new();
        self.device.advance(now, &mut done);
        for completion in done {
            let rq = self
                .in_flight
                .remove(&completion.tag)
                .unwrap_or_else(|| panic!("device completed unknown request R#{}", completion.tag));
            if !self.bypass.remove(&rq.id) {
                self.elevator
                    .completed_request(completion.completed_ns, &rq);
            }
            self.trace_request(completion.completed_ns, Action::Complete, &rq);
            self.stats.completed += 1;
            let class = self.free_request(&rq);
            match self.alloc {
                AllocModel::Legacy { .. } => report.freed[class] += 1,
                // One tag pool: a freed tag may serve a sleeper of either class (sync readers
                // need any tag, the others one under `async_depth`).
                AllocModel::Mq { .. } => {
                    report.freed[ALLOC_ASYNC] += 1;
                    report.freed[ALLOC_SYNC] += 1;
                }
            }
            report.completed.push((completion.completed_ns, rq));
        }
        if self.elevator.next_timer().is_some_and(|timer| timer <= now) {
            self.elevator.timer_fired(now);
        }
        self.run_queue(now);
        self.check_invariants();
        report
    }

    /// Every allocated request is in exactly one place; nothing is lost.
    fn check_invariants(&self) {
        let plugged: usize = self.plugs.values().map(Vec::len).sum();
        let accounted =
            plugged + self.elevator.queued() + self.dispatch_list.len() + self.in_flight.len();
        assert_eq!(
            accounted,
            self.allocated(),
            "requests lost: {plugged} plugged + {} queued + {} on dispatch list + {} in flight != {} allocated",
            self.elevator.queued(),
            self.dispatch_list.len(),
            self.in_flight.len(),
            self.allocated()
        );
        assert_eq!(self.in_flight.len(), self.device.in_flight());
        assert_eq!(
            self.stats.requests,
            self.stats.completed + self.allocated() as u64
        );
    }

    /// A request on the device (issued, not completed), for describing waits on it.
    pub fn in_flight_request(&self, id: RequestId) -> Option<&Request> {
        self.in_flight.get(&id)
    }

    /// Nothing queued, plugged or in flight.
    pub fn is_idle(&self) -> bool {
        self.allocated() == 0
    }

    /// Bios completed with a request, for callers that track bios.
    pub fn bios_of(rq: &Request) -> &[BioId] {
        &rq.bios
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::elevator::{mq_deadline::MqDeadline, noop::Noop};
    use crate::block::request::test_support::bio;
    use crate::dev::fixed::FixedLatencyDevice;
    use crate::dev::IoOp;

    fn queue(alloc: AllocModel, depth: usize) -> RequestQueue {
        let device = FixedLatencyDevice::new(depth, NS_PER_MS, 0);
        let mut queue = RequestQueue::new(Box::new(Noop::new()), Box::new(device), alloc);
        queue.enable_trace(BlkTrace::new(8, 0, 1024));
        queue
    }

    fn legacy(nr_requests: usize) -> AllocModel {
        AllocModel::Legacy { nr_requests }
    }

    fn drain(queue: &mut RequestQueue) -> Vec<Request> {
        let mut done = Vec::new();
        while let Some(next) = queue.next_event() {
            done.extend(queue.advance(next).completed.into_iter().map(|(_, rq)| rq));
        }
        done
    }

    #[test]
    fn plugged_sequential_bios_become_one_request() {
        let mut queue = queue(legacy(BLKDEV_MAX_RQ), 1);
        queue.start_plug(7);
        for i in 0..32 {
            let outcome = queue.submit_bio(0, &bio(i, IoOp::Write, 8 * i, 8, 7));
            assert_eq!(
                outcome,
                if i == 0 {
                    SubmitOutcome::Queued(1)
                } else {
                    SubmitOutcome::Merged(1)
                }
            );
        }
        assert_eq!(
            queue.device().in_flight(),
            0,
            "plugged requests wait for the unplug"
        );
        queue.finish_plug(0, 7);
        let done = drain(&mut queue);
        assert_eq!(done.len(), 1);
        assert_eq!(
            (done[0].sector, done[0].nr_sectors, done[0].bios.len()),
            (0, 256, 32)
        );
        let stats = queue.stats();
        assert_eq!((stats.bios, stats.requests, stats.plug_merges), (32, 1, 31));
        assert!(queue.is_idle());
    }

    #[test]
    fn a_long_plug_list_is_flushed_at_blk_max_request_count() {
        let mut queue = queue(legacy(BLKDEV_MAX_RQ), 32);
        queue.start_plug(7);
        for i in 0..=BLK_MAX_REQUEST_COUNT as u64 {
            queue.submit_bio(0, &bio(i, IoOp::Write, 1000 * i, 8, 7));
        }
        assert_eq!(queue.device().in_flight(), BLK_MAX_REQUEST_COUNT);
        queue.finish_plug(0, 7);
        assert_eq!(drain(&mut queue).len(), BLK_MAX_REQUEST_COUNT + 1);
    }

    #[test]
    fn queued_bios_back_merge_and_merges_stop_at_max_sectors() {
        let mut queue = queue(legacy(BLKDEV_MAX_RQ), 1);
        // The first request occupies the device; the rest merge in the elevator.
        for i in 0..200 {
            queue.submit_bio(0, &bio(i, IoOp::Read, 8 * i, 8, 3));
        }
        let done = drain(&mut queue);
        let sizes: Vec<u32> = done.iter().map(|rq| rq.nr_sectors).collect();
        assert_eq!(
            sizes,
            vec![8, MAX_REQUEST_SECTORS, 1600 - 8 - MAX_REQUEST_SECTORS]
        );
        assert_eq!(queue.stats().back_merges, 197);
        let trace = queue.trace().unwrap().to_blkparse();
        assert!(trace.contains("  M   R 16 + 8 [task3]"), "{trace}");
        assert!(trace.contains("  D   R 8 + 1024 [task3]"), "{trace}");
    }

    #[test]
    fn nr_requests_limits_allocation_with_a_batching_exception() {
        let mut queue = queue(legacy(4), 1);
        let far = |i: u64, pid: u32| bio(i, IoOp::Write, 10_000 * i, 8, pid);
        // The task that fills the list becomes a batcher: it may go up to 3/2 nr_requests.
        for i in 0..6 {
            assert!(
                matches!(queue.submit_bio(0, &far(i, 1)), SubmitOutcome::Queued(_)),
                "{i}"
            );
        }
        assert_eq!(
            queue.submit_bio(0, &far(6, 1)),
            SubmitOutcome::MustWait(ALLOC_ASYNC)
        );
        // Another task sleeps at once: the list is full and it is not batching.
        let other = far(7, 2);
        assert_eq!(
            queue.submit_bio(0, &other),
            SubmitOutcome::MustWait(ALLOC_ASYNC)
        );
        // Sync requests have their own list.
        assert!(matches!(
            queue.submit_bio(0, &bio(8, IoOp::Read, 5, 8, 2)),
            SubmitOutcome::Queued(_)
        ));
        let report = queue.advance(NS_PER_MS);
        assert_eq!(report.freed, [1, 0]);
        assert!(matches!(
            queue.retry_get_request(NS_PER_MS, &other),
            SubmitOutcome::Queued(_)
        ));
        assert_eq!(queue.stats().alloc_sleeps, 2);
        assert!(queue
            .trace()
            .unwrap()
            .to_blkparse()
            .contains("  S   W 70000 + 8 [task2]"));
        assert_eq!(drain(&mut queue).len(), 7);
    }

    #[test]
    fn flushes_bypass_the_elevator_queue() {
        let mut queue = queue(legacy(BLKDEV_MAX_RQ), 1);
        for i in 0..4 {
            queue.submit_bio(0, &bio(i, IoOp::Write, 1000 * i, 8, 1));
        }
        let mut flush = bio(10, IoOp::Flush, 0, 0, 2);
        flush.flags.preflush = true;
        queue.submit_bio(0, &flush);
        let order: Vec<IoOp> = drain(&mut queue).iter().map(|rq| rq.op).collect();
        assert_eq!(order[1], IoOp::Flush, "{order:?}");
    }

    #[test]
    fn blk_mq_tags_limit_writes_to_async_depth_but_not_sync_reads() {
        let device = FixedLatencyDevice::new(1, NS_PER_MS, 0);
        let mut queue = RequestQueue::new(
            Box::new(MqDeadline::new()),
            Box::new(device),
            AllocModel::Mq { nr_requests: 8 },
        );
        let mut writes = 0;
        for i in 0..10 {
            match queue.submit_bio(0, &bio(i, IoOp::Write, 10_000 * i, 8, 1)) {
                SubmitOutcome::Queued(_) => writes += 1,
                SubmitOutcome::MustWait(_) => break,
                SubmitOutcome::Merged(_) => unreachable!(),
            }
        }
        assert_eq!(writes, 6, "async_depth = 3/4 of 8 tags");
        for i in 0..2 {
            let read = bio(100 + i, IoOp::Read, 500_000 + 10_000 * i, 8, 2);
            assert!(matches!(
                queue.submit_bio(0, &read),
                SubmitOutcome::Queued(_)
            ));
        }
        let read = bio(200, IoOp::Read, 900_000, 8, 2);
        assert!(matches!(
            queue.submit_bio(0, &read),
            SubmitOutcome::MustWait(_)
        ));
    }

    #[test]
    fn split_bio_cuts_at_max_sectors() {
        let mut next_id = 100;
        let pieces = split_bio(bio(1, IoOp::Write, 0, 2500, 1), 1024, &mut next_id);
        let shape: Vec<(u64, u64, u32)> = pieces
            .iter()
            .map(|b| (b.id, b.sector, b.nr_sectors))
            .collect();
        assert_eq!(
            shape,
            vec![(1, 0, 1024), (100, 1024, 1024), (101, 2048, 452)]
        );
    }

    #[test]
    fn cfq_selects_its_next_queue_while_the_device_is_busy() {
        // One slot, slice_idle = 0 (CFQ never idles). A read preempts the async queue; once the
        // read is on the device its queue is empty and may not idle, and an async write preempts
        // it back: the async queue goes to the front of its tree. A sync write arriving while the
        // read is still on the device must meet the async queue active (Linux runs the elevator
        // on every queue run, device full or not) and preempt it, as a sync request preempts an
        // async queue; it is then issued as soon as the read completes. Were no queue active in
        // that window, nothing would preempt, and the async queue's front key would win the
        // next workload choice.
        use crate::block::elevator::cfq::{Cfq, CfqTunables};
        use crate::block::elevator::QueueTraits;
        let traits = QueueTraits {
            nonrot: true,
            queue_depth: 1,
        };
        let tunables = CfqTunables {
            slice_idle_ns: 0,
            ..CfqTunables::default()
        };
        let device = FixedLatencyDevice::new(1, NS_PER_MS, 0);
        let cfq = Cfq::with_tunables(traits, tunables);
        let mut queue = RequestQueue::new(Box::new(cfq), Box::new(device), legacy(BLKDEV_MAX_RQ));
        const FLUSHER: u32 = 1;
        const READER: u32 = 2;
        const MESSENGER: u32 = 3;
        for i in 0..20 {
            queue.submit_bio(0, &bio(i, IoOp::Write, 1_000_000 + 64 * i, 8, FLUSHER));
        }
        queue.submit_bio(0, &bio(100, IoOp::Read, 0, 8, READER));
        // The first write completes at 1 ms and the read is issued.
        let mut done: Vec<Request> = Vec::new();
        done.extend(
            queue
                .advance(NS_PER_MS)
                .completed
                .into_iter()
                .map(|(_, rq)| rq),
        );
        assert_eq!(done.len(), 1);
        queue.submit_bio(
            NS_PER_MS,
            &bio(101, IoOp::Write, 1_000_000 + 64 * 20, 8, FLUSHER),
        );
        let mut fsync_write = bio(200, IoOp::Write, 5_000_000, 8, MESSENGER);
        fsync_write.flags.sync = true;
        queue.submit_bio(NS_PER_MS + NS_PER_MS / 2, &fsync_write);
        done.extend(drain(&mut queue));
        let issued = |pid: u32| -> Vec<Nanos> {
            done.iter()
                .filter(|rq| rq.task.pid == pid)
                .map(|rq| rq.issued_ns.unwrap())
                .collect()
        };
        assert_eq!(issued(READER), vec![NS_PER_MS]);
        assert_eq!(issued(MESSENGER), vec![2 * NS_PER_MS]);
        assert_eq!(issued(FLUSHER).len(), 21);
    }
}
