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
//!    `[stack.block] request_list = "unbounded"` models QASIO §4's description instead ("room
//!    for additional I/Os in ... request queues"): a legacy list never fills, nobody sleeps.
//! 4. With a plug, the request waits on the task's plug list (flushed at `finish_plug`, when the
//!    task sleeps, or at `BLK_MAX_REQUEST_COUNT` requests), else it is inserted now.
//! 5. I: inserted into the elevator; D: taken by the driver: with SCSI/UFS when the device has a
//!    free slot, with the mmc block driver of an eMMC or SD card without command queueing when
//!    one of the driver's two slots is free ([`MmcHost`]: one request on the card, one fetched
//!    and waiting for it); C: completed, the request is freed and waiters are woken.
//!
//! Simplifications:
//! - Bios must already fit `max_sectors` (use [`split_bio`], like `blk_queue_split`).
//! - The flush state machine (`blk_insert_flush`: preflush, data, postflush steps) is one request
//!   carrying the flags to the device, which models the cost (a FUA write to a device without
//!   FUA carries `postflush` instead, [`crate::dev::BlockDevice::fua`]).
//! - No `ELV_MQUEUE_MUST` from CFQ's `may_queue`, no `rl->starved` cross-direction wakeups (a
//!   direction is starved only when an allocation fails with none of its requests allocated,
//!   which needs a mempool failure or `ELV_MQUEUE_NO`), no request-to-request merges. The
//!   congestion bits are kept ([`RequestQueue::is_congested`]) but nothing above reads them yet.
//! - One hardware queue for blk-mq; tags are not split per CPU.

mod check;

use super::blktrace::{Action, BlkTrace};
use super::elevator::Elevator;
use super::request::{Bio, BioId, MergeKind, Request, RequestId, MAX_REQUEST_SECTORS};
use crate::dev::{BlockDevice, DevCompletion};
use crate::kernel::Hz;
use crate::task::TaskTable;
use crate::units::Nanos;
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::rc::Rc;

/// `BLKDEV_MAX_RQ = 128`: default `nr_requests` (include/linux/blkdev.h).
pub const BLKDEV_MAX_RQ: usize = 128;
/// `BLK_BATCH_REQ = 32`: requests a batching process may allocate past the limit (blk-core.c).
pub const BLK_BATCH_REQ: u32 = 32;
/// `BLK_BATCH_TIME = HZ / 50` jiffies (blk-core.c): 2 jiffies = 20 ms at HZ = 100, 4 = 20 ms at
/// HZ = 200.
pub const BLK_BATCH_TIME_DIVISOR: u32 = 50;
/// `queue_congestion_on_threshold` (`blk_queue_congestion_threshold`, blk-core.c 3.10):
/// `nr_requests - nr_requests / 8 + 1`, at most `nr_requests` (113 of 128).
pub fn congestion_on_threshold(nr_requests: usize) -> usize {
    (nr_requests - nr_requests / 8 + 1).min(nr_requests)
}

/// `queue_congestion_off_threshold`: `nr_requests - nr_requests / 8 - nr_requests / 16 - 1`, at
/// least 1 (103 of 128).
pub fn congestion_off_threshold(nr_requests: usize) -> usize {
    (nr_requests - nr_requests / 8 - nr_requests / 16)
        .saturating_sub(1)
        .max(1)
}

/// `BLK_MAX_REQUEST_COUNT = 16`: a plug list this long is flushed (blk-core.c, 3.10).
pub const BLK_MAX_REQUEST_COUNT: usize = 16;
/// Bound on bios asleep in one wbt wait class (each is a task): exceeding it is a model bug.
const MAX_WBT_SLEEPERS: usize = 1 << 16;
/// Bound on plugged requests per task, above the flush point: exceeding it is a model bug.
const MAX_PLUGGED: usize = 4 * BLK_MAX_REQUEST_COUNT;
/// Emptied plug lists kept for reuse (a size chosen here: more tasks than that plugging at once
/// simply allocate).
const MAX_SPARE_PLUGS: usize = 64;

/// Completed requests kept for reuse ([`RequestQueue::recycle`]).
const MAX_SPARE_REQUESTS: usize = 64;

/// How requests are allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocModel {
    /// Legacy request lists, `nr_requests` per direction (sync / async).
    Legacy { nr_requests: usize },
    /// blk-mq scheduler tags shared by both directions.
    Mq { nr_requests: usize },
}

impl AllocModel {
    /// The kernel default for an elevator: blk-mq schedulers (mq-deadline, bfq, kyber) get
    /// `2 * min(tag_set_depth, BLKDEV_MAX_RQ)` scheduler tags (`blk_mq_init_sched`), blk-mq
    /// without a scheduler (`none`) the tag set's own depth, legacy ones `BLKDEV_MAX_RQ` per
    /// direction. `tag_set_depth` is the host driver's tag-set depth (see [`tag_set_depth`]).
    pub fn default_for(elevator: &str, tag_set_depth: usize) -> AllocModel {
        match elevator {
            "mq-deadline" | "bfq" | "kyber" => AllocModel::Mq {
                nr_requests: 2 * tag_set_depth.min(BLKDEV_MAX_RQ),
            },
            "none" => AllocModel::Mq {
                nr_requests: tag_set_depth,
            },
            _ => AllocModel::Legacy {
                nr_requests: BLKDEV_MAX_RQ,
            },
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
/// Bios throttled by writeback throttling (`rq_qos_wait`): class `ALLOC_WBT + i` for wbt's
/// `rq_wait[i]` (background, kswapd, discard).
pub const ALLOC_WBT: AllocClass = 2;
/// Wait classes of the queue.
pub const ALLOC_CLASSES: usize = ALLOC_WBT + super::wbt::WBT_NUM_RWQ;

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
    /// Bios that slept in writeback throttling.
    pub wbt_sleeps: u64,
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
    /// Wake-ups per allocation class (`wake_up(&rl->wait[sync])` in `__freed_request`): wake
    /// that many sleepers of each class.
    pub freed: [usize; 2],
    /// Writeback throttling woke this many sleepers of each of its wait classes: the first
    /// ones, which already hold their in-flight slot (`rq_qos_wake_function`).
    pub wbt_woken: [usize; super::wbt::WBT_NUM_RWQ],
}

/// Per-task batching state (`ioc->nr_batch_requests`, `ioc->last_waited` in jiffies).
#[derive(Debug, Clone, Copy)]
struct Batching {
    nr_batch_requests: u32,
    last_waited: u64,
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

/// The mmc block driver's request slots (drivers/mmc/card/queue.c and block.c, 3.10):
/// `mmc_queue_thread` fetches a request (`blk_fetch_request`: the elevator dispatches it, blktrace
/// D) and hands it to `mmc_start_req`, which prepares it while the previous one is on the card
/// (`mqrq_cur` / `mqrq_prev`) and starts it when the card is done. The fetch is binding: the
/// request waits in the driver, not in the elevator, so the queue sees two requests in the driver
/// on a card that takes one. Discards and flushes (`MMC_REQ_SPECIAL_MASK`) run synchronously:
/// the thread waits for the card, issues them and fetches nothing until they complete.
///
/// Packed writes (eMMC 4.5, `mmc_blk_prep_packed_list` of drivers/mmc/card/block.c, 3.7+), when
/// the card accepts them ([`BlockDevice::packed_write_max`]): a fetched write takes the writes
/// the elevator dispatches right after it into one command, up to the card's maximum and
/// `0xffff` sectors; the first request that does not fit (a read, a discard or flush, a FUA
/// write) is put back at the head of the dispatch queue (`blk_requeue_request`).
#[derive(Debug, Default)]
pub struct MmcHost {
    /// The fetched request (or packed group) waiting for the card (`mqrq_cur` while
    /// `mqrq_prev` is on the card).
    prepared: Option<Vec<Request>>,
    /// A special request is on the card: the thread blocks on it.
    special_on_card: bool,
    /// Writes per packed command; 0 or 1: no packing.
    packed_write_max: u32,
    /// Packed commands issued.
    packed_commands: u64,
}

/// `mmc_blk_prep_packed_list`: a packed command carries at most `0xffff` sectors.
const MMC_PACKED_MAX_SECTORS: u32 = 0xffff;

impl MmcHost {
    /// `MMC_REQ_SPECIAL_MASK` (REQ_DISCARD | REQ_FLUSH).
    fn is_special(rq: &Request) -> bool {
        matches!(rq.op, crate::dev::IoOp::Discard | crate::dev::IoOp::Flush)
            || rq.flags.preflush
            || rq.flags.postflush
    }

    /// The thread fetches when its current slot is empty and it is not blocked on a special
    /// request; a fetched special request also blocks further fetches.
    fn can_fetch(&self) -> bool {
        self.prepared.is_none() && !self.special_on_card
    }

    /// A write the packed command may carry: no flush or discard, not FUA (a reliable write
    /// ends the list, `mmc_req_rel_wr`).
    fn packable(rq: &Request) -> bool {
        rq.op == crate::dev::IoOp::Write
            && !rq.flags.preflush
            && !rq.flags.fua
            && !rq.flags.postflush
    }
}

/// The request queue of one block device.
pub struct RequestQueue {
    elevator: Box<dyn Elevator>,
    device: Box<dyn BlockDevice>,
    alloc: AllocModel,
    /// `[stack.block] request_list = "unbounded"` (QASIO §4's description): a legacy list
    /// never fills, so `get_request` never sleeps and the queue is never congested.
    unbounded: bool,
    pub max_sectors: u32,
    /// Legacy `rl->count[sync]`, or blk-mq tags in use per direction.
    allocated: [usize; 2],
    /// Allocated requests subject to `async_depth` (all but sync reads).
    allocated_limited: usize,
    /// `blk_rl_full(rl, sync)`.
    rl_full: [bool; 2],
    /// `blk_queue_congested(q, sync)` (the bdi's congestion bits, legacy lists only).
    congested: [bool; 2],
    batching: BTreeMap<u32, Batching>,
    /// Per task (by pid): the plug list (`current->plug->list`). Looked up by pid and only
    /// iterated where the order does not matter (a search by unique request id, a count).
    plugs: crate::sim::IdMap<Vec<Request>>,
    /// Emptied plug lists kept for the next `blk_start_plug` (a plug per I/O would otherwise
    /// allocate its list every time).
    spare_plugs: Vec<Vec<Request>>,
    /// QASIO (`[stack.qasio]`): the dependency types boosted, requests to boost once they
    /// leave a plug list, and the counts.
    qasio: super::qasio::QasioConfig,
    qasio_pending: BTreeMap<RequestId, super::qasio::Dependency>,
    qasio_stats: super::qasio::QasioStats,
    /// FastTrack (`[stack.fasttrack]`): the I/O dispatcher (`id`) and the foreground flag.
    fasttrack: crate::fasttrack::FastTrackConfig,
    /// Requests FastTrack's I/O dispatcher sent straight to the dispatch list.
    fasttrack_dispatched: u64,
    /// `q->queue_head`: requests that bypass the elevator (flushes), served first.
    dispatch_list: VecDeque<Request>,
    bypass: BTreeSet<RequestId>,
    /// Requests the device holds, by tag (the device completes by tag).
    in_flight: super::tags::InFlight,
    /// Completed requests handed back by the block layer ([`RequestQueue::recycle`]), whose
    /// heap blocks the next allocations reuse.
    spare_requests: Vec<Request>,
    /// The device's completions of one `advance`, a vector kept between events (empty
    /// between them).
    device_done: Vec<DevCompletion>,
    next_request_id: RequestId,
    stats: QueueStats,
    trace: Option<BlkTrace>,
    last_now: Nanos,
    /// The mmc block driver's two request slots, when the device sits behind it.
    mmc: Option<MmcHost>,
    /// The stack's task table: the allocating task's nice value and `ioprio`.
    tasks: Option<Rc<TaskTable>>,
    /// The kernel's tick rate: `BLK_BATCH_TIME` and `ioc->last_waited` are jiffies.
    hz: Hz,
    /// Writeback throttling in front of the elevator (blk-mq queues).
    wbt: Option<super::wbt::Wbt>,
    /// Bios sleeping in wbt, per wait class in the order they went to sleep.
    wbt_waiting: [VecDeque<(BioId, super::wbt::WbtBio)>; super::wbt::WBT_NUM_RWQ],
    /// Bios through wbt and still waiting for a request (a tag): their accounting.
    wbt_tokens: BTreeMap<BioId, super::wbt::WbtFlags>,
    /// The global invariants' switch and first violation ([`check`]).
    checks: check::QueueChecks,
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
        let mmc = device.mmc_host().then(|| MmcHost {
            packed_write_max: device.packed_write_max(),
            ..MmcHost::default()
        });
        RequestQueue {
            elevator,
            device,
            alloc,
            unbounded: false,
            max_sectors: MAX_REQUEST_SECTORS,
            allocated: [0; 2],
            allocated_limited: 0,
            rl_full: [false; 2],
            congested: [false; 2],
            batching: BTreeMap::new(),
            plugs: crate::sim::id_map(),
            spare_plugs: Vec::new(),
            dispatch_list: VecDeque::new(),
            bypass: BTreeSet::new(),
            qasio: super::qasio::QasioConfig::default(),
            qasio_pending: BTreeMap::new(),
            qasio_stats: super::qasio::QasioStats::default(),
            fasttrack: crate::fasttrack::FastTrackConfig::default(),
            fasttrack_dispatched: 0,
            in_flight: super::tags::InFlight::new(),
            spare_requests: Vec::new(),
            device_done: Vec::new(),
            next_request_id: 1,
            stats: QueueStats::default(),
            trace: None,
            last_now: 0,
            mmc,
            tasks: None,
            hz: crate::kernel::KernelConfig::default().hz,
            wbt: None,
            wbt_waiting: Default::default(),
            wbt_tokens: BTreeMap::new(),
            checks: check::QueueChecks::default(),
        }
    }

    /// Puts writeback throttling in front of the elevator (`wbt_init`).
    /// Turns QASIO's boosting on for the dependency types of `config`.
    pub fn set_qasio(&mut self, config: super::qasio::QasioConfig) {
        self.qasio = config;
    }

    /// Numbers this queue's requests from `first` on instead of 1. A stack with a second device
    /// (an external journal) gives that device's queue a range of its own
    /// ([`crate::stack::JOURNAL_DEVICE_FIRST_REQUEST`]), so that a request id names one request
    /// of the run: waits name their request by id, and the run's timeline, Perfetto's flows and
    /// the per-layer breakdown find the request by it.
    pub fn number_requests_from(&mut self, first: RequestId) {
        assert_eq!(
            self.stats.requests, 0,
            "requests are numbered before the first is allocated"
        );
        self.next_request_id = first;
    }

    pub fn set_fasttrack(&mut self, config: crate::fasttrack::FastTrackConfig) {
        self.fasttrack = config;
    }

    pub fn fasttrack(&self) -> crate::fasttrack::FastTrackConfig {
        self.fasttrack
    }

    /// Requests FastTrack's I/O dispatcher moved straight to the dispatch list.
    pub fn fasttrack_dispatched(&self) -> u64 {
        self.fasttrack_dispatched
    }

    /// FastTrack's app status detector on a request: its task's app, or its pages' owner (the
    /// flusher's writeback of the app's pages), is the foreground app.
    fn fasttrack_foreground(&self, rq: &Request) -> bool {
        self.tasks.as_ref().is_some_and(|tasks| {
            tasks.is_foreground_app(rq.task.uid) || tasks.is_foreground_app(rq.owner_uid)
        })
    }

    pub fn qasio_stats(&self) -> super::qasio::QasioStats {
        self.qasio_stats
    }

    /// QASIO §5.3: a task blocks on request `id` for a dependency of type `dependency`. A
    /// request of an enabled type that is still asynchronous is boosted: in the elevator at
    /// once, from a plug list when it is inserted; one on the dispatch list or in the device
    /// needs nothing. Returns whether the elevator moved it.
    pub fn boost(
        &mut self,
        now: Nanos,
        id: RequestId,
        dependency: super::qasio::Dependency,
    ) -> bool {
        if !self.qasio.enabled(dependency) {
            return false;
        }
        if self.in_flight.get_by_id(id).is_some() || self.dispatch_list.iter().any(|rq| rq.id == id)
        {
            return false;
        }
        let plugged = self
            .plugs
            .values()
            .flatten()
            .find(|rq| rq.id == id)
            .map(|rq| rq.issued_async);
        let slot = dependency as usize;
        match plugged {
            Some(false) => false,
            Some(true) => {
                self.qasio_stats.detected[slot] += 1;
                self.qasio_stats.deferred += 1;
                self.qasio_pending.insert(id, dependency);
                false
            }
            None => {
                let moved = self.elevator.boost(now, id);
                if moved {
                    self.qasio_stats.detected[slot] += 1;
                    self.qasio_stats.boosted[slot] += 1;
                }
                moved
            }
        }
    }

    pub fn enable_wbt(&mut self, wbt: super::wbt::Wbt) {
        assert!(self.is_blk_mq(), "wbt throttles blk-mq queues only");
        self.wbt = Some(wbt);
    }

    pub fn wbt(&self) -> Option<&super::wbt::Wbt> {
        self.wbt.as_ref()
    }

    /// A task paused in `balance_dirty_pages` at `now` (`bdi->last_bdp_sleep`, which wbt's
    /// `wb_recent_wait` reads).
    pub fn note_dirty_sleep(&mut self, now: Nanos) {
        if let Some(wbt) = self.wbt.as_mut() {
            wbt.note_dirty_sleep(now);
        }
    }

    /// Reads tasks' nice values and I/O priorities from `tasks` when allocating requests.
    /// Without a table every task is nice 0, I/O class NONE.
    pub fn set_task_table(&mut self, tasks: Rc<TaskTable>) {
        self.tasks = Some(tasks);
    }

    /// A process was created (`comm`, app `uid`): registers it in the task table, if any.
    pub fn register_task(&self, pid: u32, uid: u32, comm: &str) {
        if let Some(tasks) = &self.tasks {
            tasks.register(pid, uid, comm);
        }
    }

    /// The bio as the allocating task issues it. Legacy (3.10) queues: a task that set an I/O
    /// priority (`ioprio_set`) issues its bios at that priority (`cic->ioprio`); a bio that
    /// carries its own (a fio job's `prio` / `prioclass`) keeps it. blk-mq queues (5.14+):
    /// `bio_set_ioprio`, the task's priority (nice-derived for class NONE) then its cgroup's
    /// `io.prio.class` ([`TaskTable::bio_set_ioprio`]).
    fn with_task_ioprio<'b>(&self, bio: &'b Bio) -> Cow<'b, Bio> {
        let Some(tasks) = &self.tasks else {
            return Cow::Borrowed(bio);
        };
        let ioprio = if self.is_blk_mq() {
            tasks.bio_set_ioprio(bio.task.pid, bio.task.uid, bio.ioprio)
        } else {
            let (ioprio, _) = tasks.io_context(bio.task.pid, bio.task.uid);
            if ioprio.class == crate::task::IoPrioClass::None
                || bio.ioprio.class != crate::task::IoPrioClass::None
            {
                return Cow::Borrowed(bio);
            }
            ioprio
        };
        if ioprio == bio.ioprio {
            return Cow::Borrowed(bio);
        }
        Cow::Owned(Bio {
            ioprio,
            ..bio.clone()
        })
    }

    /// Whether requests come from blk-mq tags (mq-deadline, bfq, kyber, none).
    pub fn is_blk_mq(&self) -> bool {
        matches!(self.alloc, AllocModel::Mq { .. })
    }

    /// Sets the tick rate (`[stack.kernel] hz`); default: the `[stack.kernel]` default.
    pub fn set_hz(&mut self, hz: Hz) {
        self.hz = hz;
    }

    /// The request queue `[stack.block]` asks for over `device` under `kernel` (its tick rate,
    /// and the era and config that decide wbt's default): the elevator
    /// with its tunables, `nr_requests` (or the kernel default for the elevator), and a blktrace
    /// when asked for. Errors name an invalid field.
    pub fn from_config(
        device: Box<dyn BlockDevice>,
        config: &super::BlockConfig,
        kernel: &crate::kernel::KernelConfig,
    ) -> Result<RequestQueue, String> {
        let hz = kernel.hz;
        config.validate()?;
        let traits = super::elevator::QueueTraits {
            nonrot: true,
            queue_depth: device.queue_depth(),
        };
        let version = config.era(kernel).version;
        let elevator =
            super::elevator::build_elevator(&config.elevator, traits, hz, config, version)?;
        let alloc = match (
            AllocModel::default_for(&config.elevator, tag_set_depth(traits.queue_depth)),
            config.nr_requests,
        ) {
            (AllocModel::Legacy { .. }, Some(nr)) => AllocModel::Legacy {
                nr_requests: nr as usize,
            },
            (AllocModel::Mq { .. }, Some(nr)) => AllocModel::Mq {
                nr_requests: nr as usize,
            },
            (default, None) => default,
        };
        let wbt_depth = if device.mmc_host() {
            match alloc {
                AllocModel::Legacy { nr_requests } | AllocModel::Mq { nr_requests } => nr_requests,
            }
        } else {
            device.queue_depth()
        };
        let write_cache = device.write_cache();
        let (major, minor) = device.device_numbers();
        let mut queue = RequestQueue::new(elevator, device, alloc);
        queue.set_hz(hz);
        queue.unbounded = config.request_list == super::RequestList::Unbounded;
        if let Some(min_lat_nsec) = config.wbt_min_lat_nsec(kernel, queue.is_blk_mq()) {
            queue.enable_wbt(super::wbt::Wbt::new(
                wbt_depth as u32,
                min_lat_nsec,
                write_cache,
                hz,
            ));
        }
        if config.blktrace {
            queue.enable_trace(BlkTrace::new(
                major,
                minor,
                super::blktrace::DEFAULT_CAPACITY,
            ));
        }
        Ok(queue)
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

    /// The congestion thresholds (on, off) of the bdi in front of this queue
    /// (`queue_congestion_on_threshold` / `queue_congestion_off_threshold`): a legacy request
    /// list's; none for blk-mq scheduler tags (blk-mq never marks a device congested) nor for a
    /// list that never fills (`request_list = "unbounded"`).
    pub fn congestion_thresholds(&self) -> Option<(usize, usize)> {
        match self.alloc {
            AllocModel::Legacy { nr_requests } if !self.unbounded => Some((
                congestion_on_threshold(nr_requests),
                congestion_off_threshold(nr_requests),
            )),
            _ => None,
        }
    }

    /// Sets whether the legacy request list never fills (`request_list = "unbounded"`, QASIO
    /// §4's description); [`RequestQueue::from_config`] sets it from the scenario.
    pub fn set_unbounded(&mut self, unbounded: bool) {
        self.unbounded = unbounded;
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
        if let std::collections::hash_map::Entry::Vacant(entry) = self.plugs.entry(u64::from(pid)) {
            entry.insert(self.spare_plugs.pop().unwrap_or_default());
        }
    }

    /// `blk_finish_plug`: flushes and removes the task's plug.
    pub fn finish_plug(&mut self, now: Nanos, pid: u32) {
        self.flush_plug_list(now, pid, true);
        if let Some(list) = self.plugs.remove(&u64::from(pid)) {
            assert!(list.is_empty(), "a flushed plug holds requests");
            // Bound: as many spare lists as tasks ever plugged at once.
            if self.spare_plugs.len() < MAX_SPARE_PLUGS {
                self.spare_plugs.push(list);
            }
        }
    }

    pub fn is_plugged(&self, pid: u32) -> bool {
        self.plugs.contains_key(&u64::from(pid))
    }

    /// What happens to the plug list when the task sleeps (`blk_schedule_flush_plug`): see
    /// [`RequestQueue::flush_plug_list`]. Returns whether it held requests (if not, nothing
    /// changed).
    pub fn flush_plug(&mut self, now: Nanos, pid: u32) -> bool {
        self.flush_plug_list(now, pid, false)
    }

    /// `blk_flush_plug_list`: inserts the plugged requests in sector order and runs the queue.
    /// `explicit` (the task flushed its own plug, not `from_schedule`) is what blktrace tells
    /// apart: U (`BLK_TA_UNPLUG_IO`) or T (`BLK_TA_UNPLUG_TIMER`), with the request count.
    fn flush_plug_list(&mut self, now: Nanos, pid: u32, explicit: bool) -> bool {
        self.tick(now);
        let Some(list) = self.plugs.get_mut(&u64::from(pid)) else {
            return false;
        };
        if list.is_empty() {
            return false;
        }
        // The plug keeps a spare list with capacity; the taken one becomes a spare once
        // drained (one lookup of the plug instead of two).
        let mut requests = std::mem::replace(list, self.spare_plugs.pop().unwrap_or_default());
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
        for rq in requests.drain(..) {
            self.insert_request(now, rq);
        }
        // Bound: as many spare lists as tasks ever plugged at once.
        if self.spare_plugs.len() < MAX_SPARE_PLUGS {
            self.spare_plugs.push(requests);
        }
        self.run_queue(now);
        true
    }

    /// `blk_attempt_plug_merge`: merges into the task's plugged requests, newest first. Returns
    /// the merged request, or the number of plugged requests (`request_count`).
    fn attempt_plug_merge(&mut self, bio: &Bio) -> Result<(RequestId, MergeKind), usize> {
        let max_sectors = self.max_sectors;
        // blk-mq kernels refuse merges across I/O priorities; 3.10 merges and keeps the best.
        let same_prio_only = matches!(self.alloc, AllocModel::Mq { .. });
        let Some(list) = self.plugs.get_mut(&u64::from(bio.task.pid)) else {
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

    /// `ioc_batching`: a fresh batcher, or one with requests left within `BLK_BATCH_TIME`
    /// jiffies of becoming one (`time_before(jiffies, ioc->last_waited + BLK_BATCH_TIME)`).
    fn is_batching(&self, pid: u32, now: Nanos) -> bool {
        let jiffies = self.hz.jiffies(now);
        let batch_time = self.hz.over(BLK_BATCH_TIME_DIVISOR);
        self.batching.get(&pid).is_some_and(|batch| {
            batch.nr_batch_requests == BLK_BATCH_REQ
                || (batch.nr_batch_requests > 0 && jiffies < batch.last_waited + batch_time)
        })
    }

    /// `ioc_set_batching`: makes the task a batcher unless it already is one.
    fn set_batching(&mut self, pid: u32, now: Nanos) {
        if self.is_batching(pid, now) {
            return;
        }
        self.batching.insert(
            pid,
            Batching {
                nr_batch_requests: BLK_BATCH_REQ,
                last_waited: self.hz.jiffies(now),
            },
        );
    }

    /// `__get_request`'s admission test (legacy) or the tag test (blk-mq).
    fn may_allocate(&mut self, now: Nanos, bio: &Bio) -> bool {
        let class = Self::alloc_class(bio);
        match self.alloc {
            // QASIO §4's description: there is always room.
            AllocModel::Legacy { .. } if self.unbounded => true,
            AllocModel::Legacy { nr_requests } => {
                let count = self.allocated[class];
                if count + 1 >= congestion_on_threshold(nr_requests) {
                    if count + 1 >= nr_requests {
                        if !self.rl_full[class] {
                            self.set_batching(bio.task.pid, now);
                            self.rl_full[class] = true;
                        } else if !self.is_batching(bio.task.pid, now)
                            && !self.qasio.admits(bio.op, bio.issued_async)
                        {
                            return false;
                        }
                    }
                    self.congested[class] = true;
                }
                count < 3 * nr_requests / 2
            }
            AllocModel::Mq { nr_requests } => {
                if self.allocated() >= nr_requests {
                    return false;
                }
                // The elevator's `limit_depth`: sync reads are never limited.
                let exempt = bio.is_sync() && !bio.op.is_write();
                match self
                    .elevator
                    .limit_depth(nr_requests, bio.is_sync(), bio.op.is_write())
                {
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
        let mut rq = match self.spare_requests.pop() {
            Some(mut rq) => {
                rq.reinit_from_bio(id, bio, now);
                rq
            }
            None => Request::from_bio(id, bio, now),
        };
        rq.wbt = self.wbt_tokens.remove(&bio.id).unwrap_or_default();
        if let Some(tasks) = &self.tasks {
            let (ioc_ioprio, nice) = tasks.io_context(bio.task.pid, bio.task.uid);
            rq.nice = nice;
            rq.ioc_ioprio = ioc_ioprio;
            rq.blkcg = tasks.blkcg(bio.task.pid, bio.task.uid);
            rq.app_class = tasks.app_class(bio.task.uid);
        }
        rq
    }

    /// `freed_request` / `__freed_request`: returns the class whose wait queue gets a
    /// `wake_up` (one exclusive sleeper), if any. With legacy lists that is only when the count
    /// drops below `nr_requests`, which also clears `rl_full`; the congestion bit clears below
    /// the off threshold.
    fn free_request(&mut self, rq: &Request) -> Option<AllocClass> {
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
        match self.alloc {
            AllocModel::Legacy { nr_requests } => {
                let count = self.allocated[class];
                if count < congestion_off_threshold(nr_requests) {
                    self.congested[class] = false;
                }
                if count < nr_requests {
                    self.rl_full[class] = false;
                    Some(class)
                } else {
                    None
                }
            }
            AllocModel::Mq { .. } => Some(class),
        }
    }

    /// `blk_queue_congested`: whether the request list of the class (sync or async) is above
    /// the congestion-on threshold and has not yet dropped below the off threshold (what
    /// `bdi_write_congested` reads; legacy lists only).
    pub fn is_congested(&self, class: AllocClass) -> bool {
        self.congested[class]
    }

    // ---- submission -------------------------------------------------------------------------

    /// `submit_bio` -> `blk_queue_bio`.
    pub fn submit_bio(&mut self, now: Nanos, bio: &Bio) -> SubmitOutcome {
        self.tick(now);
        let bio = &*self.with_task_ioprio(bio);
        let limit = if bio.op == crate::dev::IoOp::Discard {
            super::request::MAX_DISCARD_SECTORS
        } else {
            self.max_sectors
        };
        assert!(
            bio.nr_sectors <= limit,
            "bio of {} sectors exceeds the queue's limit {}: split it first",
            bio.nr_sectors,
            limit
        );
        self.stats.bios += 1;
        self.stats.bio_sectors += u64::from(bio.nr_sectors);
        self.trace_bio(now, Action::Queue, bio);
        // blk_insert_flush / blk_flush_policy: a FUA write to a device without FUA is the write
        // followed by a cache flush (REQ_FSEQ_POSTFLUSH), carried here by the one request.
        let emulated;
        let bio = if bio.flags.fua && !self.device.fua() {
            let mut b = bio.clone();
            b.flags.fua = false;
            b.flags.postflush = true;
            emulated = b;
            &emulated
        } else {
            bio
        };
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

    /// The retry in `get_request` after the submitter slept: it is now a batcher. (A bio woken
    /// from writeback throttling already holds its wbt slot.)
    pub fn retry_get_request(&mut self, now: Nanos, bio: &Bio) -> SubmitOutcome {
        self.tick(now);
        let bio = &*self.with_task_ioprio(bio);
        assert!(
            !self.wbt_sleeping(bio.id),
            "bio {} retried while asleep in wbt",
            bio.id
        );
        self.set_batching(bio.task.pid, now);
        self.get_request(now, bio)
    }

    fn wbt_sleeping(&self, id: BioId) -> bool {
        self.wbt_waiting
            .iter()
            .any(|sleepers| sleepers.iter().any(|&(bio, _)| bio == id))
    }

    /// `rq_qos_throttle` (wbt's `wbt_wait`) for a bio about to need a request: `Err` when it
    /// must sleep on its wbt wait class.
    fn wbt_throttle(&mut self, now: Nanos, bio: &Bio) -> Result<(), AllocClass> {
        let Some(wbt) = self.wbt.as_mut() else {
            return Ok(());
        };
        if self.wbt_tokens.contains_key(&bio.id) {
            return Ok(());
        }
        let kind = super::wbt::Wbt::classify(bio);
        let rwq = kind.flags.rwq();
        match wbt.throttle(now, &kind, self.wbt_waiting[rwq].len()) {
            Ok(flags) => {
                self.wbt_tokens.insert(bio.id, flags);
                Ok(())
            }
            Err(rwq) => {
                assert!(self.wbt_waiting[rwq].len() < MAX_WBT_SLEEPERS);
                self.wbt_waiting[rwq].push_back((bio.id, kind));
                self.stats.wbt_sleeps += 1;
                // The task is about to sleep: `io_schedule` flushes its plug.
                self.flush_plug(now, bio.task.pid);
                Err(ALLOC_WBT + rwq)
            }
        }
    }

    /// `wake_up_all` on wbt's `rq_wait`s: in the order they slept, sleepers take their
    /// in-flight slot until one cannot (`rq_qos_wake_function` returns -1 and stops the walk).
    fn wbt_wake(&mut self, now: Nanos, wake: super::wbt::WbtWake, report: &mut AdvanceReport) {
        let Some(wbt) = self.wbt.as_mut() else {
            return;
        };
        for (rwq, sleepers) in self.wbt_waiting.iter_mut().enumerate() {
            if !wake.all[rwq] {
                continue;
            }
            while let Some(&(id, kind)) = sleepers.front() {
                if !wbt.try_acquire(now, &kind) {
                    break;
                }
                sleepers.pop_front();
                self.wbt_tokens.insert(id, kind.flags);
                report.wbt_woken[rwq] += 1;
            }
        }
    }

    /// `get_request` + the rest of `blk_queue_bio` (blk-mq: `rq_qos_throttle` first).
    fn get_request(&mut self, now: Nanos, bio: &Bio) -> SubmitOutcome {
        if let Err(class) = self.wbt_throttle(now, bio) {
            return SubmitOutcome::MustWait(class);
        }
        if !self.may_allocate(now, bio) {
            self.stats.alloc_sleeps += 1;
            self.trace_bio(now, Action::Sleep, bio);
            // The task is about to sleep: `io_schedule` flushes its plug.
            self.flush_plug(now, bio.task.pid);
            return SubmitOutcome::MustWait(Self::alloc_class(bio));
        }
        let rq = self.allocate(now, bio);
        let id = rq.id;
        let pid = u64::from(bio.task.pid);
        let plugged = match self.plugs.get(&pid) {
            Some(list) if !bio.is_flush() => Some(list.len()),
            _ => None,
        };
        if let Some(plugged) = plugged {
            if plugged >= BLK_MAX_REQUEST_COUNT {
                self.flush_plug_list(now, bio.task.pid, true);
            }
            // blktrace's P: the first request on an empty plug list (`trace_block_plug`).
            if plugged == 0 || plugged >= BLK_MAX_REQUEST_COUNT {
                if let Some(trace) = self.trace.as_mut() {
                    trace.plug(now, Action::Plug, bio.task.pid, &bio.task.comm, 0);
                }
            }
            let list = self.plugs.get_mut(&pid).expect("plug exists");
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
        if rq.flags.fua
            || rq.flags.preflush
            || rq.flags.postflush
            || rq.op == crate::dev::IoOp::Flush
        {
            self.bypass.insert(rq.id);
            self.dispatch_list.push_back(rq);
        } else if self.fasttrack.enabled() && self.fasttrack_foreground(&rq) {
            // FastTrack: the detector marks the foreground app's request for the device
            // (§4.5's flag); the I/O dispatcher (§4.4) moves it straight to the dispatch list.
            rq.foreground = true;
            if !self.fasttrack.id {
                self.elevator.add_request(now, rq);
            } else if self.fasttrack.id_path == crate::fasttrack::IdPath::Bypass
                || !self.elevator.has_dispatch_now()
            {
                self.fasttrack_dispatched += 1;
                self.bypass.insert(rq.id);
                self.dispatch_list.push_back(rq);
            } else {
                // Through the elevator's own dispatch: it accounts for the request as one it
                // dispatched (and completes it).
                let id = rq.id;
                self.elevator.add_request(now, rq);
                if let Some(rq) = self.elevator.dispatch_now(now, id) {
                    self.fasttrack_dispatched += 1;
                    self.dispatch_list.push_back(rq);
                }
            }
        } else {
            let id = rq.id;
            self.elevator.add_request(now, rq);
            // Algorithm 1: a QASIO found in a plug list is boosted once it reaches the queue.
            if let Some(dependency) = self.qasio_pending.remove(&id) {
                if self.elevator.boost(now, id) {
                    self.qasio_stats.boosted[dependency as usize] += 1;
                }
            }
        }
    }

    // ---- dispatch and completion -------------------------------------------------------------

    /// `__blk_run_queue`: the driver takes requests while it can.
    ///
    /// SCSI/UFS (`scsi_request_fn`): issue while the device has a free slot; the elevator is
    /// still consulted when the device is full (it peeks before checking the device,
    /// [`Elevator::dispatch_blocked`]). The mmc driver (`mmc_request_fn` waking
    /// `mmc_queue_thread`): fetch while one of its two slots is free ([`MmcHost`]); with both
    /// full nothing asks the elevator.
    pub fn run_queue(&mut self, now: Nanos) {
        self.tick(now);
        while self.driver_can_fetch() {
            let rq = match self.dispatch_list.pop_front() {
                Some(rq) => rq,
                None => match self.elevator.dispatch_request(now) {
                    Some(rq) => rq,
                    None => break,
                },
            };
            self.issue(now, rq);
        }
        if self.mmc.is_none() && !self.driver_can_fetch() && self.elevator.has_work() {
            self.elevator.dispatch_blocked(now);
        }
    }

    /// Whether the driver can take no request now: every device slot (or both of the mmc
    /// driver's) is held, so a request in the elevator waits for a slot (the run's timeline
    /// records these intervals, [`crate::sim::timeline::SlotsFull`]).
    pub fn driver_full(&self) -> bool {
        !self.driver_can_fetch()
    }

    /// Whether the driver would fetch a request now.
    fn driver_can_fetch(&self) -> bool {
        match &self.mmc {
            None => self.device.in_flight() < self.device.queue_depth(),
            Some(mmc) => mmc.can_fetch(),
        }
    }

    /// D: the driver takes the request (`blk_start_request`); it goes to the device at once,
    /// or, in the mmc driver's second slot, when the card is free. The mmc driver may pack
    /// the writes dispatched after a write into one command.
    fn issue(&mut self, now: Nanos, mut rq: Request) {
        self.start_request(now, &mut rq);
        if self.mmc.is_none() {
            // SCSI/UFS: one request, one command, no group to build.
            self.submit_one(now, rq);
            return;
        }
        let mut group = vec![rq];
        let packed_max = self.mmc.as_ref().map_or(0, |mmc| mmc.packed_write_max);
        if packed_max > 1 && MmcHost::packable(&group[0]) {
            let mut sectors = group[0].nr_sectors;
            while group.len() < packed_max as usize {
                let next = match self.dispatch_list.pop_front() {
                    Some(rq) => rq,
                    None => match self.elevator.dispatch_request(now) {
                        Some(rq) => rq,
                        None => break,
                    },
                };
                if !MmcHost::packable(&next) || sectors + next.nr_sectors > MMC_PACKED_MAX_SECTORS {
                    // `blk_requeue_request`: back to the head of the dispatch queue.
                    self.dispatch_list.push_front(next);
                    break;
                }
                sectors += next.nr_sectors;
                let mut next = next;
                self.start_request(now, &mut next);
                group.push(next);
            }
        }
        let card_busy = self.device.in_flight() > 0;
        match self.mmc.as_mut() {
            Some(mmc) if card_busy => {
                assert!(
                    mmc.prepared.is_none(),
                    "mmc driver fetched into a full slot"
                );
                mmc.prepared = Some(group);
            }
            Some(mmc) => {
                mmc.special_on_card = group.len() == 1 && MmcHost::is_special(&group[0]);
                self.submit_to_device(now, group);
            }
            None => self.submit_to_device(now, group),
        }
    }

    /// `blk_start_request`: D.
    fn start_request(&mut self, now: Nanos, rq: &mut Request) {
        assert!(
            rq.issued_ns.is_none(),
            "request R#{} dispatched twice",
            rq.id
        );
        rq.issued_ns = Some(now);
        if let Some(wbt) = self.wbt.as_mut() {
            wbt.issue(now, rq, rq.wbt);
        }
        self.trace_request(now, Action::Issue, rq);
        self.stats.dispatched += 1;
    }

    /// One command to the device: a request, or a packed group of writes.
    fn submit_to_device(&mut self, now: Nanos, mut group: Vec<Request>) {
        assert!(!group.is_empty(), "an empty command");
        if group.len() == 1 {
            let rq = group.pop().expect("one request");
            self.submit_one(now, rq);
            return;
        }
        // The tags the requests get, in order: the table hands out its free slots from the top.
        let mut commands: Vec<crate::dev::DevRequest> = Vec::with_capacity(group.len());
        for rq in group {
            let mut command = rq.dev_request();
            command.tag = self.note_in_flight(now, rq);
            commands.push(command);
        }
        self.device.submit_packed(now, &commands);
        if let Some(mmc) = self.mmc.as_mut() {
            mmc.packed_commands += 1;
        }
    }

    /// One request as one command.
    fn submit_one(&mut self, now: Nanos, rq: Request) {
        let mut command = rq.dev_request();
        // `ufshcd_comp_scsi_upiu` (drivers/ufs/core/ufshcd.c, 6.5+): RT-class requests carry
        // the UFS Command Priority flag (`UPIU_CMD_FLAGS_CP`); the device's `cmd-priority`
        // scheduler starts them first.
        if self.device.command_priority() && rq.ioprio.class == crate::task::IoPrioClass::Rt {
            command.flags.prio = true;
        }
        command.tag = self.note_in_flight(now, rq);
        self.device.submit(now, command);
    }

    /// The device holds `rq` from `now`; returns the tag its command carries.
    fn note_in_flight(&mut self, now: Nanos, mut rq: Request) -> u64 {
        rq.device_start_ns = Some(now);
        self.in_flight.insert(rq)
    }

    /// `mmc_start_req`: the card finished its command; the driver starts its prepared one.
    /// (A packed command completes all its requests at once: the first completion starts the
    /// next command, the others find the card busy again.)
    fn mmc_card_done(&mut self, now: Nanos) {
        if self.device.in_flight() > 0 {
            return;
        }
        let Some(mmc) = self.mmc.as_mut() else {
            return;
        };
        mmc.special_on_card = false;
        if let Some(next) = mmc.prepared.take() {
            mmc.special_on_card = next.len() == 1 && MmcHost::is_special(&next[0]);
            self.submit_to_device(now, next);
        }
    }

    /// Requests in the elevator or on the dispatch list, not yet taken by the driver.
    pub fn scheduler_queued(&self) -> usize {
        self.elevator.queued() + self.dispatch_list.len()
    }

    /// Requests the driver holds: on the device, and the mmc driver's prepared ones.
    pub fn in_driver(&self) -> usize {
        self.in_flight.len()
            + self
                .mmc
                .as_ref()
                .and_then(|mmc| mmc.prepared.as_ref())
                .map_or(0, Vec::len)
    }

    /// Packed write commands the mmc driver issued.
    pub fn packed_commands(&self) -> u64 {
        self.mmc.as_ref().map_or(0, |mmc| mmc.packed_commands)
    }

    /// Uses the mmc block driver between the queue and the device (or not). Default: when the
    /// device says it sits behind one ([`BlockDevice::mmc_host`]).
    pub fn set_mmc_host(&mut self, mmc: bool) {
        assert_eq!(self.in_driver(), 0, "driver changed with requests in it");
        let packed_write_max = self.device.packed_write_max();
        self.mmc = mmc.then(|| MmcHost {
            packed_write_max,
            ..MmcHost::default()
        });
    }

    /// The earliest time at which [`advance`](Self::advance) has something to do.
    pub fn next_event(&self) -> Option<Nanos> {
        fn earlier(a: Option<Nanos>, b: Option<Nanos>) -> Option<Nanos> {
            match (a, b) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, None) => a,
                (None, b) => b,
            }
        }
        let wbt = self.wbt.as_ref().and_then(|wbt| wbt.next_timer());
        earlier(
            earlier(self.device.next_event(), self.elevator.next_timer()),
            wbt,
        )
    }

    /// Moves to `now`: completes requests the device finished, fires the elevator's timer if due,
    /// and dispatches again.
    pub fn advance(&mut self, now: Nanos) -> AdvanceReport {
        let mut report = AdvanceReport::default();
        self.advance_into(now, &mut report);
        report
    }

    /// [`advance`](Self::advance) into `report`, which is emptied first: a caller that keeps
    /// its report reuses its vector instead of allocating one per event.
    pub fn advance_into(&mut self, now: Nanos, report: &mut AdvanceReport) {
        self.tick(now);
        report.completed.clear();
        report.freed = [0; 2];
        report.wbt_woken = [0; super::wbt::WBT_NUM_RWQ];
        // The device's completions go into a vector kept between events.
        let mut done = std::mem::take(&mut self.device_done);
        assert!(done.is_empty(), "device completions left over");
        self.device.advance(now, &mut done);
        for completion in done.drain(..) {
            let rq = self
                .in_flight
                .remove(completion.tag)
                .unwrap_or_else(|| panic!("device completed unknown tag {}", completion.tag));
            // The card is free: the mmc thread starts its prepared request before it completes
            // this one (`mmc_start_req` returns the finished request after issuing the next).
            self.mmc_card_done(now);
            if !self.bypass.remove(&rq.id) {
                self.elevator
                    .completed_request(completion.completed_ns, &rq);
            }
            self.trace_request(completion.completed_ns, Action::Complete, &rq);
            self.stats.completed += 1;
            if let Some(wbt) = self.wbt.as_mut() {
                let wake = wbt.done(completion.completed_ns, &rq, rq.wbt);
                self.wbt_wake(completion.completed_ns, wake, report);
            }
            let wake = self.free_request(&rq);
            match self.alloc {
                AllocModel::Legacy { .. } => {
                    if let Some(class) = wake {
                        report.freed[class] += 1;
                    }
                }
                // One tag pool: a freed tag may serve a sleeper of either class (sync readers
                // need any tag, the others one under `async_depth`).
                AllocModel::Mq { .. } => {
                    report.freed[ALLOC_ASYNC] += 1;
                    report.freed[ALLOC_SYNC] += 1;
                }
            }
            report.completed.push((completion.completed_ns, rq));
        }
        self.device_done = done;
        if self.elevator.next_timer().is_some_and(|timer| timer <= now) {
            self.elevator.timer_fired(now);
        }
        if let Some(wbt) = self.wbt.as_mut() {
            if wbt.next_timer().is_some_and(|timer| timer <= now) {
                let wake = wbt.timer_fired(now);
                self.wbt_wake(now, wake, report);
            }
        }
        self.run_queue(now);
        self.assert_conservation();
        self.run_checks(now);
    }

    /// Every allocated request is in some place; nothing is lost (always on: counts only; the
    /// full checks are [`RequestQueue::check_invariants`]).
    fn assert_conservation(&self) {
        let plugged: usize = self.plugs.values().map(Vec::len).sum();
        let accounted =
            plugged + self.elevator.queued() + self.dispatch_list.len() + self.in_driver();
        assert_eq!(
            accounted,
            self.allocated(),
            "requests lost: {plugged} plugged + {} queued + {} on dispatch list + {} in the driver != {} allocated",
            self.elevator.queued(),
            self.dispatch_list.len(),
            self.in_driver(),
            self.allocated()
        );
        assert_eq!(self.in_flight.len(), self.device.in_flight());
        assert_eq!(
            self.stats.requests,
            self.stats.completed + self.allocated() as u64
        );
    }

    /// A completed request the caller is done with: its heap block serves a later allocation.
    pub fn recycle(&mut self, rq: Request) {
        // Bound: a deep queue's worth; the rest are freed.
        if self.spare_requests.len() < MAX_SPARE_REQUESTS {
            self.spare_requests.push(rq);
        }
    }

    /// A request on the device (issued, not completed), for describing waits on it.
    pub fn in_flight_request(&self, id: RequestId) -> Option<&Request> {
        self.in_flight.get_by_id(id)
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
    use crate::units::{NS_PER_MS, NS_PER_SEC};

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
        // A completion leaves 5 async requests, still at or above nr_requests: nobody is woken
        // (`__freed_request` wakes only below nr_requests), nor at 4.
        assert_eq!(queue.advance(NS_PER_MS).freed, [0, 0]);
        assert_eq!(queue.advance(2 * NS_PER_MS).freed, [0, 0]);
        // At 3, below nr_requests, a sleeper is woken; it retries as a batcher.
        assert_eq!(queue.advance(3 * NS_PER_MS).freed, [1, 0]);
        assert!(matches!(
            queue.retry_get_request(3 * NS_PER_MS, &other),
            SubmitOutcome::Queued(_)
        ));
        assert_eq!(queue.stats().alloc_sleeps, 2);
        assert!(queue
            .trace()
            .unwrap()
            .to_blkparse()
            .contains("  S   W 70000 + 8 [task2]"));
        assert_eq!(drain(&mut queue).len(), 5);
    }

    #[test]
    fn an_unbounded_request_list_never_sleeps_nor_congests() {
        // QASIO §4's description (`request_list = "unbounded"`): the flusher (pid 1) and the
        // journal thread (pid 2) both get requests far past nr_requests and its 3/2 cap, where
        // 3.10's list put them to sleep.
        let submit_all = |unbounded: bool| {
            let mut queue = queue(legacy(4), 1);
            queue.set_unbounded(unbounded);
            let outcomes: Vec<SubmitOutcome> = (0..20)
                .map(|i| queue.submit_bio(0, &bio(i, IoOp::Write, 10_000 * i, 8, 1 + i as u32 % 2)))
                .collect();
            (outcomes, queue.is_congested(ALLOC_ASYNC))
        };
        let (outcomes, congested) = submit_all(true);
        assert!(outcomes
            .iter()
            .all(|o| matches!(o, SubmitOutcome::Queued(_))));
        assert!(!congested);
        let (outcomes, congested) = submit_all(false);
        assert!(outcomes.contains(&SubmitOutcome::MustWait(ALLOC_ASYNC)));
        assert!(congested);
    }

    #[test]
    fn qasio_admit_lets_the_journal_threads_discard_past_a_full_async_list() {
        use crate::block::qasio::{Dependency, QasioConfig};
        // A flusher (pid 1) fills the async list and uses its batch; the journal thread
        // (pid 2) then issues a discard of freed blocks (issued asynchronously). With 128
        // requests the flusher's batch ends at 159, below the 3/2 cap of 192.
        let run = |qasio: QasioConfig| {
            let mut queue = queue(legacy(BLKDEV_MAX_RQ), 1);
            queue.set_qasio(qasio);
            let mut i = 0;
            while matches!(
                queue.submit_bio(0, &bio(i, IoOp::Write, 10_000 * i, 8, 1)),
                SubmitOutcome::Queued(_)
            ) {
                i += 1;
            }
            let mut discard = bio(100, IoOp::Discard, 5_000_000, 8, 2);
            discard.issued_async = true;
            let outcome = queue.submit_bio(0, &discard);
            // Any other async write of the journal thread still sleeps.
            let write = bio(101, IoOp::Write, 6_000_000, 8, 2);
            (outcome, queue.submit_bio(0, &write))
        };
        let discard_only = QasioConfig {
            boost: vec![Dependency::Discard],
            admit: false,
        };
        // The paper's QASIO: the discard sleeps in get_request, where no elevator can boost it.
        let (outcome, _) = run(discard_only.clone());
        assert_eq!(outcome, SubmitOutcome::MustWait(ALLOC_ASYNC));
        // With admission it gets a request (within the 3/2 cap).
        let (outcome, write) = run(QasioConfig {
            admit: true,
            ..discard_only
        });
        assert!(matches!(outcome, SubmitOutcome::Queued(_)), "{outcome:?}");
        assert_eq!(write, SubmitOutcome::MustWait(ALLOC_ASYNC));
        // Without D_discard boosted, `admit` alone is refused by validation.
        let invalid = QasioConfig {
            boost: vec![Dependency::Meta],
            admit: true,
        };
        assert!(invalid.validate().unwrap_err().contains("discard"));
    }

    #[test]
    fn an_async_writer_oscillates_between_nr_requests_and_one_batch_above() {
        // A flusher keeps submitting far-apart async writes to a one-slot device and retries
        // whenever it is woken. It fills the list to nr_requests, becomes a batcher (32 more,
        // `BLK_BATCH_REQ`), sleeps at 159, and is woken only once the count drops below 128
        // (`__freed_request`); it then gets a fresh batch (it is no longer batching, so
        // `ioc_set_batching` applies). It never reaches the 3/2 cap (192), which it did while
        // every free woke it and renewed its batch.
        let mut queue = queue(legacy(BLKDEV_MAX_RQ), 1);
        let mut next = 0u64;
        let mut pending: Option<Bio> = None;
        let mut now = 0;
        let (mut max, mut min_after_fill) = (0, usize::MAX);
        for _ in 0..2_000 {
            loop {
                let bio = pending
                    .take()
                    .unwrap_or_else(|| bio(next, IoOp::Write, 10_000 * next, 8, 1));
                let outcome = if bio.id < next {
                    queue.retry_get_request(now, &bio)
                } else {
                    next += 1;
                    queue.submit_bio(now, &bio)
                };
                if outcome == SubmitOutcome::MustWait(ALLOC_ASYNC) {
                    pending = Some(bio);
                    break;
                }
                max = max.max(queue.allocated());
            }
            // Completions until the sleeper is woken.
            loop {
                now = queue.next_event().expect("requests in flight");
                if queue.advance(now).freed[ALLOC_ASYNC] > 0 {
                    break;
                }
            }
            min_after_fill = min_after_fill.min(queue.allocated());
        }
        assert_eq!(max, BLKDEV_MAX_RQ + BLK_BATCH_REQ as usize - 1);
        assert_eq!(min_after_fill, BLKDEV_MAX_RQ - 1);
        assert!(queue.is_congested(ALLOC_ASYNC));
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
            Box::new(MqDeadline::new(crate::kernel::Hz(100))),
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
        let hz = crate::kernel::Hz(1000);
        let tunables = CfqTunables {
            slice_idle: 0,
            ..CfqTunables::defaults(hz)
        };
        let device = FixedLatencyDevice::new(1, NS_PER_MS, 0);
        let cfq = Cfq::with_tunables(traits, hz, tunables);
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

    /// A one-slot card behind the mmc driver (two requests in the driver), 1 ms per request.
    fn mmc_queue(elevator: Box<dyn Elevator>, latency_ns: Nanos) -> RequestQueue {
        let device = FixedLatencyDevice::new(1, latency_ns, 0);
        let mut queue = RequestQueue::new(elevator, Box::new(device), legacy(BLKDEV_MAX_RQ));
        queue.set_mmc_host(true);
        queue.enable_trace(BlkTrace::new(179, 0, 1024));
        queue
    }

    /// CFQ at HZ = 1000 (a jiffy is a millisecond) with `tune` applied to its defaults.
    fn cfq(tune: impl FnOnce(&mut crate::block::elevator::cfq::CfqTunables)) -> Box<dyn Elevator> {
        use crate::block::elevator::cfq::{Cfq, CfqTunables};
        use crate::block::elevator::QueueTraits;
        let hz = crate::kernel::Hz(1000);
        let mut tunables = CfqTunables::defaults(hz);
        tune(&mut tunables);
        let traits = QueueTraits {
            nonrot: true,
            queue_depth: 1,
        };
        Box::new(Cfq::with_tunables(traits, hz, tunables))
    }

    const WRITER: u32 = 10;
    const READER: u32 = 20;

    #[test]
    fn the_mmc_driver_fetches_one_request_ahead_of_the_card() {
        // Three far-apart writes: the first goes on the card, the second is fetched (D) and
        // waits in the driver, the third stays in the elevator until the card finishes the
        // first and the driver starts the second.
        let mut queue = mmc_queue(Box::new(Noop::new()), NS_PER_MS);
        for i in 0..3 {
            queue.submit_bio(0, &bio(i, IoOp::Write, 10_000 * i, 8, WRITER));
        }
        assert_eq!((queue.device().in_flight(), queue.in_driver()), (1, 2));
        assert_eq!(queue.elevator().queued(), 1);
        let done = drain(&mut queue);
        let issued: Vec<Nanos> = done.iter().map(|rq| rq.issued_ns.unwrap()).collect();
        assert_eq!(issued, vec![0, 0, NS_PER_MS], "D when the driver fetches");
        let on_card: Vec<Option<Nanos>> = done.iter().map(|rq| rq.device_start_ns).collect();
        assert_eq!(
            on_card,
            vec![Some(0), Some(NS_PER_MS), Some(2 * NS_PER_MS)],
            "on the card when it is free"
        );
        let trace = queue.trace().unwrap().to_blkparse();
        assert_eq!(trace.matches("  D   W").count(), 3, "{trace}");
        // A flush is special: the thread waits for the card, runs it, and fetches nothing
        // meanwhile.
        let now = 10 * NS_PER_MS;
        let mut flush = bio(10, IoOp::Flush, 0, 0, WRITER);
        flush.flags.preflush = true;
        queue.submit_bio(now, &bio(9, IoOp::Write, 0, 8, WRITER));
        queue.submit_bio(now, &flush);
        queue.submit_bio(now, &bio(11, IoOp::Write, 50_000, 8, WRITER));
        assert_eq!(
            queue.in_driver(),
            2,
            "the write on the card, the flush fetched"
        );
        queue.advance(now + NS_PER_MS);
        assert_eq!(
            queue.in_driver(),
            1,
            "nothing fetched behind the running flush"
        );
        queue.advance(now + 2 * NS_PER_MS);
        assert_eq!(queue.in_driver(), 1);
        assert_eq!(drain(&mut queue).len(), 1);
    }

    #[test]
    fn a_foreground_read_waits_behind_a_prefetched_async_write() {
        // Under CFQ a read preempts the async queue, but on a phone's eMMC the driver already
        // holds a second write, fetched while the first was on the card: the read waits for
        // both (and CFQ drains async requests before its idling sync queue dispatches). With a
        // host that takes one request at a time it would wait for the first only.
        let read_done = |mmc: bool| {
            let mut queue = mmc_queue(cfq(|_| {}), NS_PER_MS);
            queue.set_mmc_host(mmc);
            let start = NS_PER_SEC;
            for i in 0..4 {
                queue.submit_bio(
                    start,
                    &bio(i, IoOp::Write, 1_000_000 + 10_000 * i, 8, WRITER),
                );
            }
            queue.advance(start + NS_PER_MS / 2);
            queue.submit_bio(start + NS_PER_MS / 2, &bio(100, IoOp::Read, 0, 8, READER));
            let mut done_at = None;
            while let Some(next) = queue.next_event() {
                for (at, rq) in queue.advance(next).completed {
                    if rq.task.pid == READER {
                        done_at = Some(at - start);
                    }
                }
            }
            done_at.unwrap()
        };
        assert_eq!(read_done(true), 3 * NS_PER_MS);
        assert_eq!(read_done(false), 2 * NS_PER_MS);
    }

    // cfq_may_dispatch's rules at two requests in the driver. Each test fails if
    // `Cfq::may_dispatch` always allowed a dispatch.

    #[test]
    fn cfq_fetches_no_async_request_while_a_sync_request_is_in_the_driver() {
        // slice_idle = 0: the reader's queue does not idle, so once its read is fetched CFQ
        // turns to the async queue, which may not dispatch while the read is in flight.
        let mut queue = mmc_queue(cfq(|t| t.slice_idle = 0), NS_PER_MS);
        let start = NS_PER_SEC;
        queue.submit_bio(start, &bio(100, IoOp::Read, 0, 8, READER));
        for i in 0..4 {
            queue.submit_bio(
                start,
                &bio(i, IoOp::Write, 1_000_000 + 10_000 * i, 8, WRITER),
            );
        }
        assert_eq!(queue.in_driver(), 1, "an async write joined the sync read");
        let done = drain(&mut queue);
        let first_write = done
            .iter()
            .filter(|rq| rq.task.pid == WRITER)
            .map(|rq| rq.issued_ns.unwrap())
            .min()
            .unwrap();
        assert_eq!(first_write, start + NS_PER_MS);
    }

    #[test]
    fn cfq_drains_async_requests_before_an_idling_sync_queue_dispatches() {
        // Two async writes fill the driver. A read preempts the async queue; its queue idles
        // (no hw_tag), so it waits until no async request is in flight, although the driver
        // has a free slot after the first write.
        let mut queue = mmc_queue(cfq(|_| {}), NS_PER_MS);
        let start = NS_PER_SEC;
        for i in 0..4 {
            queue.submit_bio(
                start,
                &bio(i, IoOp::Write, 1_000_000 + 10_000 * i, 8, WRITER),
            );
        }
        assert_eq!(queue.in_driver(), 2);
        queue.advance(start + NS_PER_MS / 2);
        queue.submit_bio(start + NS_PER_MS / 2, &bio(100, IoOp::Read, 0, 8, READER));
        let done = drain(&mut queue);
        let read = done.iter().find(|rq| rq.task.pid == READER).unwrap();
        assert_eq!(read.issued_ns, Some(start + 2 * NS_PER_MS));
    }

    #[test]
    fn cfq_quantum_keeps_a_queue_to_its_share_of_the_driver() {
        // quantum = 2: max_dispatch = quantum / 2 = 1 while the active queue's slice is new
        // (cfq_slice_used_soon) and other queues are busy. An async write holds the card; two
        // sync readers queue up, the first preempts and waits for the write to drain; then it
        // may have one request in the driver, not two.
        let mut queue = mmc_queue(cfq(|t| t.quantum = 2), NS_PER_MS);
        queue.submit_bio(0, &bio(1000, IoOp::Write, 1 << 30, 8, WRITER));
        for i in 0..8 {
            queue.submit_bio(0, &bio(i, IoOp::Read, 1000 * i, 64, READER));
            let far = (1 << 20) + 1000 * i;
            queue.submit_bio(0, &bio(100 + i, IoOp::Read, far, 8, READER + 1));
        }
        assert_eq!(queue.in_driver(), 1, "the write only");
        queue.advance(NS_PER_MS);
        assert_eq!(queue.in_driver(), 1, "the reader's first request only");
        // Once its first request completed its slice has started and is far from used
        // (jiffies + slice_idle * dispatched <= slice_end): it may go up to quantum (2).
        queue.advance(2 * NS_PER_MS);
        assert_eq!(queue.in_driver(), 2, "the reader's slice started");
        assert_eq!(drain(&mut queue).len(), 15);
    }

    #[test]
    fn cfq_keeps_an_idle_class_queue_to_one_request_in_the_driver() {
        let mut queue = mmc_queue(cfq(|_| {}), NS_PER_MS);
        for i in 0..4 {
            let mut read = bio(i, IoOp::Read, 10_000 * i, 8, READER);
            read.ioprio =
                crate::block::request::IoPrio::new(crate::block::request::IoPrioClass::Idle, 7);
            queue.submit_bio(0, &read);
        }
        assert_eq!(queue.in_driver(), 1);
        assert_eq!(drain(&mut queue).len(), 4);
    }

    #[test]
    fn cfq_ramps_async_depth_up_after_a_delayed_sync_request() {
        // A read waits 200 ms on a slow card (longer than fifo_expire_sync, 125 ms): at its
        // completion last_delayed_sync = now, and the async queue may have
        // (now - last_delayed_sync) / slice_sync requests in flight, at least one: one.
        let mut queue = mmc_queue(cfq(|t| t.slice_idle = 0), 200 * NS_PER_MS);
        let start = NS_PER_SEC;
        queue.submit_bio(start, &bio(100, IoOp::Read, 0, 8, READER));
        let done_at = start + 200 * NS_PER_MS;
        for i in 0..4 {
            queue.submit_bio(
                start,
                &bio(i, IoOp::Write, 1_000_000 + 10_000 * i, 8, WRITER),
            );
        }
        // The read's completion: async writes may go now, one at a time.
        let mut read_start = start;
        let report = queue.advance(done_at);
        for (_, rq) in &report.completed {
            if rq.task.pid == READER {
                read_start = rq.start_ns;
            }
        }
        assert_eq!(read_start, start);
        assert_eq!(queue.in_driver(), 1, "the async depth did not ramp");
        assert_eq!(drain(&mut queue).len(), 4);
    }

    #[test]
    fn cfq_starts_as_if_no_sync_request_was_delayed_in_the_last_second() {
        // cfq_init_queue sets last_delayed_sync = jiffies - HZ: at boot the async ramp already
        // allows HZ / slice_sync = 10 requests, so an async writer alone fills both driver
        // slots at once.
        let mut queue = mmc_queue(cfq(|_| {}), NS_PER_MS);
        for i in 0..4 {
            queue.submit_bio(0, &bio(i, IoOp::Write, 1_000_000 + 10_000 * i, 8, WRITER));
        }
        assert_eq!(queue.in_driver(), 2);
        assert_eq!(drain(&mut queue).len(), 4);
    }

    #[test]
    fn cfq_serves_a_nice_10_task_at_best_effort_level_6() {
        // Two sync readers; the second is an Android background thread at nice 10. With no
        // ioprio set (class NONE) CFQ takes the level from the allocating task's nice value
        // (task_nice_ioprio: (10 + 20) / 5 = 6): its slices are cfq_prio_slice(sync, 6) =
        // 100 - 2 * 20 = 60 ms against 100 ms (HZ = 1000, 1 ms per read).
        let tasks = Rc::new(TaskTable::new());
        tasks.set_app_nice(10_001, 10);
        tasks.register(READER, 10_000, "gallery");
        tasks.register(READER + 1, 10_001, "backup");
        let device = FixedLatencyDevice::new(1, NS_PER_MS, 0);
        let mut queue = RequestQueue::new(cfq(|_| {}), Box::new(device), legacy(1024));
        queue.set_task_table(tasks);
        for i in 0..300 {
            let mut read = bio(i, IoOp::Read, 1000 * i, 8, READER);
            read.task.uid = 10_000;
            queue.submit_bio(0, &read);
            let mut background = bio(1000 + i, IoOp::Read, 1 << 30 | (1000 * i), 8, READER + 1);
            background.task.uid = 10_001;
            queue.submit_bio(0, &background);
        }
        let done = drain(&mut queue);
        let mut runs: Vec<(u32, usize)> = Vec::new();
        for rq in &done {
            match runs.last_mut() {
                Some((pid, count)) if *pid == rq.task.pid => *count += 1,
                _ => runs.push((rq.task.pid, 1)),
            }
        }
        // The last two runs are cut short by the readers running out of requests.
        let whole = &runs[..runs.len() - 2];
        let background: Vec<usize> = whole
            .iter()
            .filter(|&&(pid, _)| pid == READER + 1)
            .map(|&(_, n)| n)
            .collect();
        let foreground: Vec<usize> = whole
            .iter()
            .filter(|&&(pid, _)| pid == READER)
            .map(|&(_, n)| n)
            .collect();
        assert!(!background.is_empty() && !foreground.is_empty(), "{runs:?}");
        assert!(background.iter().all(|n| (60..=62).contains(n)), "{runs:?}");
        assert!(
            foreground.iter().all(|n| (100..=102).contains(n)),
            "{runs:?}"
        );
    }

    #[test]
    fn a_task_that_set_the_idle_class_is_served_last() {
        // ioprio_set(IOPRIO_CLASS_IDLE) on one reader: its requests go to an idle-class queue,
        // served only when no other queue has work.
        let tasks = Rc::new(TaskTable::new());
        tasks.register(READER, 10_000, "gallery");
        tasks.register(READER + 1, 10_000, "indexer");
        tasks.ioprio_set(
            READER + 1,
            crate::task::IoPrio::new(crate::task::IoPrioClass::Idle, 0),
        );
        let device = FixedLatencyDevice::new(1, NS_PER_MS, 0);
        let mut queue = RequestQueue::new(cfq(|_| {}), Box::new(device), legacy(BLKDEV_MAX_RQ));
        queue.set_task_table(tasks);
        for i in 0..10 {
            queue.submit_bio(
                0,
                &bio(100 + i, IoOp::Read, (1 << 30) + 1000 * i, 8, READER + 1),
            );
        }
        for i in 0..10 {
            queue.submit_bio(0, &bio(i, IoOp::Read, 1000 * i, 8, READER));
        }
        let order: Vec<u32> = drain(&mut queue).iter().map(|rq| rq.task.pid).collect();
        // The idle reader's first request was on the device before the other arrived.
        assert!(order[1..11].iter().all(|&pid| pid == READER), "{order:?}");
    }

    #[test]
    fn blk_mq_async_depth_counts_every_request_but_sync_reads() {
        // dd_limit_depth: sync reads are exempt from async_depth and do not use it up. Two
        // sync reads hold tags; the writes still get async_depth = 6 of the 8.
        let device = FixedLatencyDevice::new(1, NS_PER_MS, 0);
        let mut queue = RequestQueue::new(
            Box::new(MqDeadline::new(crate::kernel::Hz(100))),
            Box::new(device),
            AllocModel::Mq { nr_requests: 8 },
        );
        for i in 0..2 {
            let read = bio(100 + i, IoOp::Read, 500_000 + 10_000 * i, 8, 2);
            assert!(matches!(
                queue.submit_bio(0, &read),
                SubmitOutcome::Queued(_)
            ));
        }
        let writes = (0..10)
            .take_while(|&i| {
                let write = bio(i, IoOp::Write, 10_000 * i, 8, 1);
                matches!(queue.submit_bio(0, &write), SubmitOutcome::Queued(_))
            })
            .count();
        assert_eq!(writes, 6);
    }

    #[test]
    #[should_panic(expected = "time went backwards")]
    fn the_queue_refuses_time_going_backwards() {
        let mut queue = queue(legacy(BLKDEV_MAX_RQ), 1);
        queue.submit_bio(10, &bio(1, IoOp::Read, 0, 8, 1));
        queue.submit_bio(5, &bio(2, IoOp::Read, 100, 8, 1));
    }

    #[test]
    fn cfq_low_latency_shrinks_slices_to_fit_the_target_latency() {
        // Four busy sync readers (HZ = 1000): 4 x slice_sync (400 ms) exceeds target_latency
        // (300 ms), so cfq_scaled_cfqq_slice gives each 100 * 300 / 400 = 75 ms once the busy
        // queue average has caught up (the first slice still sees an average of 3).
        let device = FixedLatencyDevice::new(1, NS_PER_MS, 0);
        let mut queue = RequestQueue::new(cfq(|_| {}), Box::new(device), legacy(4096));
        for i in 0..400u64 {
            for reader in 0..4u32 {
                let sector = (u64::from(reader) << 30) + 1000 * i;
                queue.submit_bio(
                    0,
                    &bio(
                        10_000 * u64::from(reader) + i,
                        IoOp::Read,
                        sector,
                        8,
                        READER + reader,
                    ),
                );
            }
        }
        let done = drain(&mut queue);
        let mut runs: Vec<(u32, usize)> = Vec::new();
        for rq in &done {
            match runs.last_mut() {
                Some((pid, count)) if *pid == rq.task.pid => *count += 1,
                _ => runs.push((rq.task.pid, 1)),
            }
        }
        assert!((100..=102).contains(&runs[0].1), "{runs:?}");
        assert!(
            runs[1..8].iter().all(|&(_, n)| (75..=77).contains(&n)),
            "{runs:?}"
        );
    }

    #[test]
    fn the_queue_is_congested_between_the_congestion_thresholds() {
        // nr_requests 128: congested from the allocation that reaches 113 requests
        // (nr_requests - nr_requests / 8 + 1), until fewer than 103 remain
        // (nr_requests - nr_requests / 8 - nr_requests / 16 - 1).
        assert_eq!(
            (congestion_on_threshold(128), congestion_off_threshold(128)),
            (113, 103)
        );
        let mut queue = queue(legacy(BLKDEV_MAX_RQ), 1);
        for i in 0..112 {
            queue.submit_bio(0, &bio(i, IoOp::Write, 10_000 * i, 8, WRITER));
        }
        assert!(!queue.is_congested(ALLOC_ASYNC));
        queue.submit_bio(0, &bio(112, IoOp::Write, 10_000 * 112, 8, WRITER));
        assert!(queue.is_congested(ALLOC_ASYNC));
        assert!(!queue.is_congested(ALLOC_SYNC));
        let mut now = 0;
        while queue.allocated() > 103 {
            now += NS_PER_MS;
            queue.advance(now);
            assert!(queue.is_congested(ALLOC_ASYNC), "{}", queue.allocated());
        }
        now += NS_PER_MS;
        queue.advance(now);
        assert_eq!(queue.allocated(), 102);
        assert!(!queue.is_congested(ALLOC_ASYNC));
    }

    #[test]
    fn the_mmc_driver_packs_consecutive_writes_into_one_command() {
        // An eMMC 5.0 card that accepts 8 writes per packed command, behind the mmc driver
        // (noop). The first write goes on the card alone; the second is fetched while it is
        // there; the writes queued after them are packed when the driver fetches again, up to
        // the read, which is put back at the head of the dispatch queue and comes next.
        let config = crate::dev::DeviceConfig {
            profile: "emmc-5.0".into(),
            capacity: Some(1 << 30),
            packed_write_max: Some(8),
            fill: 0.0,
            ..crate::dev::DeviceConfig::default()
        };
        let device = crate::dev::build_device(&config, 1).unwrap();
        assert!(device.mmc_host());
        let mut queue = RequestQueue::new(Box::new(Noop::new()), device, legacy(BLKDEV_MAX_RQ));
        for i in 0..6 {
            queue.submit_bio(0, &bio(i, IoOp::Write, 100_000 * i, 8, WRITER));
        }
        queue.submit_bio(0, &bio(100, IoOp::Read, 50_000, 8, READER));
        queue.submit_bio(0, &bio(6, IoOp::Write, 600_000, 8, WRITER));
        assert_eq!(queue.in_driver(), 2);
        let done = drain(&mut queue);
        assert_eq!(queue.packed_commands(), 1);
        let finished = |id: u64| {
            done.iter()
                .find(|rq| rq.bios[0] == id)
                .map(|rq| rq.device_start_ns.unwrap())
                .unwrap()
        };
        // Writes 2..=5 went on the card together, the read after them, then write 6.
        let packed = finished(2);
        assert!((3..=5).all(|id| finished(id) == packed));
        assert!(finished(100) > packed && finished(6) > finished(100));
        let order: Vec<u64> = done.iter().map(|rq| rq.bios[0]).collect();
        assert_eq!(order, vec![0, 1, 2, 3, 4, 5, 100, 6]);
    }

    /// mq-deadline over a one-slot device (1 ms per request) with a task table: tasks 1.. of app
    /// 10_000 + pid.
    fn mq_with_tasks(tasks: &Rc<TaskTable>) -> RequestQueue {
        let device = FixedLatencyDevice::new(1, NS_PER_MS, 0);
        let mut queue = RequestQueue::new(
            Box::new(MqDeadline::new(crate::kernel::Hz(1000))),
            Box::new(device),
            AllocModel::Mq { nr_requests: 256 },
        );
        queue.set_task_table(tasks.clone());
        queue
    }

    fn app_bio(id: u64, op: IoOp, sector: u64, pid: u32) -> Bio {
        let mut bio = bio(id, op, sector, 8, pid);
        bio.task.uid = 10_000 + pid;
        bio
    }

    #[test]
    fn fasttrack_id_dispatches_the_foreground_apps_requests_first_by_task_or_owner() {
        // A background app queues 100 reads; then the foreground app reads, and the flusher
        // (pid 100, uid 0) writes back a page the foreground app owns. With FastTrack's I/O
        // dispatcher both go straight to the dispatch list, flagged for the device; without it
        // they wait behind the flood.
        use crate::task::{ForegroundState, IoPolicy};
        let run = |id: bool| {
            let tasks = Rc::new(TaskTable::new());
            let activity = Rc::new(ForegroundState::new(Some(10_000 + READER)));
            tasks
                .configure_cgroups(IoPolicy::None, &Default::default(), Some(activity))
                .unwrap();
            let mut queue = mq_with_tasks(&tasks);
            queue.set_fasttrack(crate::fasttrack::FastTrackConfig {
                id,
                pr: true,
                ..Default::default()
            });
            for i in 0..100 {
                queue.submit_bio(0, &app_bio(i, IoOp::Read, 10_000 * i, WRITER));
            }
            queue.submit_bio(NS_PER_MS / 2, &app_bio(1000, IoOp::Read, 5_000_000, READER));
            let mut writeback = bio(1001, IoOp::Write, 6_000_000, 8, 100);
            writeback.owner_uid = 10_000 + READER;
            writeback.issued_async = true;
            queue.submit_bio(NS_PER_MS / 2, &writeback);
            let done = drain(&mut queue);
            let read = done.iter().find(|rq| rq.task.pid == READER).unwrap();
            let write = done.iter().find(|rq| rq.task.pid == 100).unwrap();
            assert!(
                read.foreground && write.foreground,
                "the detector flags both"
            );
            let flood = done.iter().find(|rq| rq.task.pid == WRITER).unwrap();
            assert!(!flood.foreground);
            (
                read.issued_ns.unwrap(),
                write.issued_ns.unwrap(),
                queue.fasttrack_dispatched(),
            )
        };
        let (read, write, dispatched) = run(true);
        assert_eq!((read, write, dispatched), (NS_PER_MS, 2 * NS_PER_MS, 2));
        let (read, write, dispatched) = run(false);
        // (mq-deadline lets the write out once reads have starved it `writes_starved` times.)
        assert!(
            read > 50 * NS_PER_MS && write > 10 * NS_PER_MS,
            "{read} {write}"
        );
        assert_eq!(dispatched, 0);
    }

    #[test]
    fn promote_to_rt_requests_pass_a_best_effort_flood() {
        // A background app queues 100 reads (class NONE: best effort at its nice level); the
        // foreground app's read arrives after them. In a promote-to-rt cgroup it leaves
        // blk-ioprio as RT4 and mq-deadline serves it next; in the root (no-change) it waits
        // for the flood.
        use crate::task::{CgroupConfig, IoPolicy, IoPrioClass, PrioPolicy};
        let read_done = |promote: bool| {
            let tasks = Rc::new(TaskTable::new());
            let mut cgroups = std::collections::BTreeMap::new();
            cgroups.insert(
                "fg".to_string(),
                CgroupConfig {
                    prio_class: Some(PrioPolicy::PromoteToRt),
                    ..CgroupConfig::default()
                },
            );
            tasks
                .configure_cgroups(IoPolicy::None, &cgroups, None)
                .unwrap();
            if promote {
                tasks.set_app_cgroup(10_000 + READER, "fg").unwrap();
            }
            let mut queue = mq_with_tasks(&tasks);
            for i in 0..100 {
                queue.submit_bio(0, &app_bio(i, IoOp::Read, 10_000 * i, WRITER));
            }
            queue.submit_bio(NS_PER_MS / 2, &app_bio(1000, IoOp::Read, 5_000_000, READER));
            let done = drain(&mut queue);
            let read = done.iter().find(|rq| rq.task.pid == READER).unwrap();
            let flood = done.iter().find(|rq| rq.task.pid == WRITER).unwrap();
            assert_eq!(flood.ioprio.class, IoPrioClass::Be);
            (read.ioprio, read.issued_ns.unwrap())
        };
        let (ioprio, issued) = read_done(true);
        assert_eq!(ioprio, crate::task::IoPrio::new(IoPrioClass::Rt, 4));
        assert_eq!(issued, NS_PER_MS, "next after the request on the device");
        let (ioprio, issued) = read_done(false);
        assert_eq!(ioprio.class, IoPrioClass::Be);
        assert!(issued > 50 * NS_PER_MS, "behind the flood: {issued}");
    }

    #[test]
    fn restrict_to_be_demotes_a_real_time_tasks_requests() {
        // A task that set RT0 (`ioprio_set`) reads after a best-effort flood. In a
        // restrict-to-be cgroup its requests leave blk-ioprio as BE0 (its io context stays RT0)
        // and wait for the flood; elsewhere they are RT and go first.
        use crate::task::{CgroupConfig, IoPolicy, IoPrio, IoPrioClass, PrioPolicy};
        let read_done = |restrict: bool| {
            let tasks = Rc::new(TaskTable::new());
            let mut cgroups = std::collections::BTreeMap::new();
            cgroups.insert(
                "bg".to_string(),
                CgroupConfig {
                    prio_class: Some(PrioPolicy::RestrictToBe),
                    ..CgroupConfig::default()
                },
            );
            tasks
                .configure_cgroups(IoPolicy::None, &cgroups, None)
                .unwrap();
            tasks.register(READER, 10_000 + READER, "rt-reader");
            tasks.ioprio_set(READER, IoPrio::new(IoPrioClass::Rt, 0));
            if restrict {
                tasks.set_app_cgroup(10_000 + READER, "bg").unwrap();
            }
            let mut queue = mq_with_tasks(&tasks);
            for i in 0..100 {
                queue.submit_bio(0, &app_bio(i, IoOp::Read, 10_000 * i, WRITER));
            }
            queue.submit_bio(NS_PER_MS / 2, &app_bio(1000, IoOp::Read, 5_000_000, READER));
            let done = drain(&mut queue);
            let read = done.iter().find(|rq| rq.task.pid == READER).unwrap();
            assert_eq!(read.ioc_ioprio, IoPrio::new(IoPrioClass::Rt, 0));
            (read.ioprio, read.issued_ns.unwrap())
        };
        let (ioprio, issued) = read_done(true);
        assert_eq!(ioprio, IoPrio::new(IoPrioClass::Be, 0));
        assert!(
            issued > 50 * NS_PER_MS,
            "demoted behind the flood: {issued}"
        );
        let (ioprio, issued) = read_done(false);
        assert_eq!(ioprio, IoPrio::new(IoPrioClass::Rt, 0));
        assert_eq!(issued, NS_PER_MS);
    }

    /// A one-slot device that honours command priority and records the commands it gets.
    struct RecordingDevice {
        inner: FixedLatencyDevice,
        seen: Rc<std::cell::RefCell<Vec<crate::dev::DevRequest>>>,
    }

    impl BlockDevice for RecordingDevice {
        fn name(&self) -> &str {
            "recording"
        }
        fn capacity_sectors(&self) -> u64 {
            self.inner.capacity_sectors()
        }
        fn queue_depth(&self) -> usize {
            self.inner.queue_depth()
        }
        fn in_flight(&self) -> usize {
            self.inner.in_flight()
        }
        fn command_priority(&self) -> bool {
            true
        }
        fn submit(&mut self, now: Nanos, request: crate::dev::DevRequest) {
            self.seen.borrow_mut().push(request);
            self.inner.submit(now, request);
        }
        fn next_event(&self) -> Option<Nanos> {
            self.inner.next_event()
        }
        fn advance(&mut self, now: Nanos, completions: &mut Vec<DevCompletion>) {
            self.inner.advance(now, completions);
        }
    }

    #[test]
    fn real_time_requests_carry_the_ufs_command_priority_flag() {
        // Under the Android preset the foreground app's reads are promoted to RT and reach a
        // device that honours Command Priority with the flag set; the background app's do not.
        use crate::task::{ForegroundState, IoPolicy};
        let activity = Rc::new(ForegroundState::new(Some(10_000 + READER)));
        let tasks = Rc::new(TaskTable::new());
        tasks
            .configure_cgroups(
                IoPolicy::Android,
                &std::collections::BTreeMap::new(),
                Some(activity),
            )
            .unwrap();
        let seen = Rc::new(std::cell::RefCell::new(Vec::new()));
        let device = RecordingDevice {
            inner: FixedLatencyDevice::new(1, NS_PER_MS, 0),
            seen: seen.clone(),
        };
        let mut queue = RequestQueue::new(
            Box::new(MqDeadline::new(crate::kernel::Hz(1000))),
            Box::new(device),
            AllocModel::Mq { nr_requests: 64 },
        );
        queue.set_task_table(tasks);
        queue.submit_bio(0, &app_bio(1, IoOp::Read, 0, WRITER));
        queue.submit_bio(0, &app_bio(2, IoOp::Read, 80_000, READER));
        drain(&mut queue);
        let flags: Vec<(u64, bool)> = seen
            .borrow()
            .iter()
            .map(|command| (command.sector, command.flags.prio))
            .collect();
        assert_eq!(flags, vec![(0, false), (80_000, true)]);
        assert!(crate::dev::build_device(
            &crate::dev::DeviceConfig {
                profile: "ufs-2.1".into(),
                capacity: Some(1 << 30),
                fill: 0.0,
                ..crate::dev::DeviceConfig::default()
            },
            1
        )
        .unwrap()
        .command_priority());
    }
}
