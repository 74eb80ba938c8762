//! CFQ, the Completely Fair Queueing scheduler of block/cfq-iosched.c, Linux 3.10 (the kernel of
//! the QASIO and FastTrack phones).
//!
//! What is kept, by kernel function:
//! - Queues: one *sync* queue per process (`cic->cfqq[SYNC]`, keyed here by pid) and *async*
//!   queues shared by all processes, one per (class, level) (`async_cfqq[class][prio]`,
//!   `async_idle_cfqq`) (`cfq_get_queue`). A write without REQ_SYNC goes to the shared async queue
//!   of the writer's priority: this is where QASIO's priority inversion lives.
//! - Service trees per class (RT, BE) and workload type (ASYNC, SYNC_NOIDLE, SYNC) plus the idle
//!   tree, ordered by `rb_key` (`cfq_service_tree_add` with `cfq_slice_offset`, `slice_resid`,
//!   `add_front` on preemption, `CFQ_IDLE_DELAY` for the idle class). A queue stays on the
//!   tree it was put on (`cfqq->service_tree`) when its idle window changes, until it is next
//!   sorted.
//! - Workload selection RT > BE > IDLE and workload slices from `cfq_target_latency`
//!   (`choose_wl_class_and_type`, `cfq_choose_wl_type`).
//! - Queue selection and expiry (`cfq_select_queue`, `cfq_set_active_queue`,
//!   `__cfq_slice_expired`), time slices `cfq_prio_slice` scaled by `cfq_scaled_cfqq_slice`
//!   (low_latency) and started at the first completion (`cfq_set_prio_slice`), async queues
//!   expired after `cfq_prio_to_maxrq` dispatches.
//! - Dispatch limits (`cfq_may_dispatch`): drain async before sync idling queues, no async while
//!   sync is in flight, `quantum`, the async ramp-up after a delayed sync request
//!   (`last_delayed_sync`), one request at a time for the idle class.
//! - Within a queue: FIFO expiry checked once per slice (`cfq_check_fifo`), otherwise `next_rq`,
//!   chosen by `cfq_choose_req` (sync first, REQ_PRIO first, then nearest to the head with
//!   back seeks up to `back_seek_max` costing `back_seek_penalty`).
//! - Idling (`cfq_should_idle`, `cfq_arm_slice_timer`, `cfq_idle_slice_timer`,
//!   `cfq_should_wait_busy`), think time and seekiness (`cfq_update_io_thinktime`,
//!   `cfq_update_io_seektime`, `cfq_update_idle_window`, which turns idling off for a queue
//!   whose next request carries REQ_NOIDLE: fsync's `WRITE_SYNC` writes), and preemption
//!   (`cfq_should_preempt`, `cfq_preempt_queue`) including "a sync request preempts an async
//!   queue" and REQ_PRIO preemption.
//!
//! QASIO (seed 000 §5.3, the paper's patch, not in 3.10): each async queue has a QASIO list of
//! boosted requests, dispatched first when the queue is served (`boost`), and an async queue
//! selected with an empty QASIO list yields to another async queue whose list is not empty: its
//! slice expires and that queue becomes active (`qasio_yield_to`).
//!
//! Time is `jiffies` at the run's `[stack.kernel] hz`, as in the kernel. Slices,
//! think times, `rb_key`s, `workload_expires`, `last_delayed_sync` and FIFO expiry are whole
//! jiffies; the idle slice timer fires on the tick of its expiry (`mod_timer`). Defaults are
//! the kernel's jiffy expressions with `cfq_init`'s clamps ([`CfqTunables::defaults`]): at
//! HZ = 100 `slice_idle` = max(HZ / 125, 1) = 1 jiffy = 10 ms, `CFQ_MIN_TT` = 20 ms. Unsigned
//! `slice_end - jiffies` comparisons wrap as `unsigned long` does.
//!
//! Simplifications:
//! - One cgroup (the root group): no group scheduling (vdisktime, weights), group state folded
//!   into `Cfq`; a group's saved workload is the current workload (with one group
//!   `cfq_choose_cfqg` restores exactly what it saved), forgotten when the group's last queue
//!   leaves the trees (`cfq_group_notify_queue_del`). `group_idle` (idling on the group's only
//!   queue) is kept as a tunable, 0 by default as in a kernel without CONFIG_CFQ_GROUP_IOSCHED.
//! - No close-cooperator detection or queue merging (`cfq_close_cooperator`, `cfq_setup_merge`).
//! - `hw_tag` is taken from the device queue depth (>= `CFQ_HW_QUEUE_MIN`) instead of being
//!   estimated from 50 samples of the driver depth.
//! - A process's io_context is its pid (threads do not share one), and it is never exited. Its
//!   `ioprio` and nice value come from the stack's task table when the request is allocated
//!   (`cfq_set_request`), carried in `Request::ioprio` / `Request::nice`; a fio job's own
//!   `prio` stands for the `ioprio_set` of its thread. No scheduling policies: class NONE maps
//!   to best effort (`task_nice_ioclass` of SCHED_NORMAL).
//! - When the device is full, `dispatch_blocked` runs `cfq_select_queue` without taking a
//!   request (Linux would also move one to the dispatch list).
//!
//! Behaviour worth knowing (faithful to 3.10, pinned by tests):
//! - On flash with command queueing (`nonrot && hw_tag`), `cfq_arm_slice_timer` never idles. A
//!   sync reader with one request at a time keeps its queue active only while that request is
//!   on the device (`cfq_select_queue`: dispatched and `cfq_should_idle`, it is the last queue of
//!   SYNC_NOIDLE); the queue run in the completion path finds it empty and expires it before the
//!   reader can submit again. Its next request preempts nothing while a sync writer (O_DIRECT
//!   writes are REQ_SYNC without REQ_NOIDLE, so the writer idles and sits on the SYNC tree) has
//!   requests queued: `cfq_should_preempt` has no rule for one sync queue over another. It waits
//!   for the writer's slices, two of them (100 ms each), since the SYNC workload slice
//!   (`cfq_target_latency` * 1 / 2 busy queues = 150 ms) is only checked when a queue expires:
//!   one read per ~200 ms plus its time on the device (fg-read-bg-write: ~5 reads/s, p50 256 ms).
//! - A preempting queue goes to the front of its tree, HZ before the first key there
//!   (`cfq_service_tree_add` with `add_front`); for the shared async queue that is its own key.
//!   `cfq_choose_wl_type` then keeps choosing that tree over a waiting sync queue of another
//!   type until the key is overtaken, so the elevator must be run at every queue run (see
//!   `dispatch_blocked`) for a sync request to find the async queue active and preempt it.

use super::{Elevator, QueueTraits, RqStore};
use crate::block::request::{
    Bio, IoPrio, IoPrioClass, MergeKind, Request, RequestId, IOPRIO_BE_NR, IOPRIO_NORM,
};
use crate::kernel::Hz;
use crate::units::{Nanos, SECTOR_SIZE};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ops::Bound::{Excluded, Unbounded};

/// Kernel time: `jiffies`, ticks of `1 / HZ` s since boot. CFQ keeps every time in jiffies.
pub type Jiffies = u64;

/// `cfq_quantum = 8`: max requests a queue may have dispatched in one round (cfq-iosched.c).
pub const QUANTUM: u32 = 8;
/// `cfq_back_max = 16 * 1024` KiB: longest backward seek treated as forward (cfq-iosched.c).
pub const BACK_SEEK_MAX_KIB: u64 = 16 * 1024;
/// `cfq_back_penalty = 2` (cfq-iosched.c).
pub const BACK_SEEK_PENALTY: u64 = 2;
/// `cfq_slice_async_rq = 2` (cfq-iosched.c).
pub const SLICE_ASYNC_RQ: u32 = 2;
/// `CFQ_MIN_TT = 2` jiffies: the shortest workload slice (cfq-iosched.c).
const MIN_TT: Jiffies = 2;
/// `CFQ_SLICE_SCALE = 5`.
const SLICE_SCALE: Jiffies = 5;
/// `CFQ_HW_QUEUE_MIN = 5`: a device this deep counts as command-queueing (`hw_tag`).
const HW_QUEUE_MIN: usize = 5;
/// `CFQQ_SEEK_THR = 8 * 100` sectors (rotational seekiness).
const SEEK_THR_SECTORS: u64 = 8 * 100;
/// `CFQQ_CLOSE_THR = 8 * 1024` sectors.
const CLOSE_THR_SECTORS: u64 = 8 * 1024;
/// `CFQQ_SECT_THR_NONROT = 2 * 32` sectors: smaller requests count as seeky on flash.
const SECT_THR_NONROT: u32 = 2 * 32;
/// `cfq_hist_divisor = 4`.
const HIST_DIVISOR: u32 = 4;
/// `sample_valid(samples) ((samples) > 80)`.
const SAMPLE_VALID: u64 = 80;

const ASYNC: usize = 0;
const SYNC: usize = 1;

/// `enum wl_class_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum WlClass {
    Be = 0,
    Rt = 1,
    Idle = 2,
}

/// `enum wl_type_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum WlType {
    Async = 0,
    SyncNoidle = 1,
    Sync = 2,
}

const WL_TYPES: [WlType; 3] = [WlType::Async, WlType::SyncNoidle, WlType::Sync];

type CfqqId = usize;

/// `struct cfq_ttime`.
#[derive(Debug, Clone, Copy, Default)]
struct Ttime {
    last_end_request: Jiffies,
    total: u64,
    samples: u64,
    mean: Jiffies,
}

impl Ttime {
    /// `__cfq_update_io_thinktime`: a decaying average of the gap between the last completion and
    /// the next request, in whole jiffies, capped at twice `slice_idle`.
    fn update(&mut self, now: Jiffies, slice_idle: Jiffies) {
        let elapsed = now
            .saturating_sub(self.last_end_request)
            .min(2 * slice_idle);
        self.samples = (7 * self.samples + 256) / 8;
        self.total = (7 * self.total + 256 * elapsed) / 8;
        self.mean = (self.total + 128) / self.samples;
    }

    fn valid(&self) -> bool {
        self.samples > SAMPLE_VALID
    }
}

/// The workload class of an I/O priority class (`cfqq_class`; NONE is best effort).
fn wl_class(class: IoPrioClass) -> WlClass {
    match class {
        IoPrioClass::Rt => WlClass::Rt,
        IoPrioClass::Idle => WlClass::Idle,
        IoPrioClass::Be | IoPrioClass::None => WlClass::Be,
    }
}

/// `cfq_async_queue_prio`: the async queue slot of a `cic->ioprio`: `async_cfqq[class][level]`,
/// class NONE in the BE slot of `IOPRIO_NORM`, one `async_idle_cfqq`.
fn async_slot(cic_ioprio: IoPrio) -> (WlClass, u8) {
    match cic_ioprio.class {
        IoPrioClass::None => (WlClass::Be, IOPRIO_NORM),
        IoPrioClass::Idle => (WlClass::Idle, IOPRIO_BE_NR - 1),
        class => (wl_class(class), cic_ioprio.level),
    }
}

/// `struct cfq_queue`.
#[derive(Debug)]
struct CfqQueue {
    /// The `cic->ioprio` the queue's priority was set from.
    cic_ioprio: IoPrio,
    sync: bool,
    class: WlClass,
    /// `ioprio`: level 0..=7.
    level: u8,
    /// Owner of a sync queue (0 for the shared async queues), for debugging output.
    #[allow(dead_code)]
    pid: u32,
    sort_list: BTreeSet<(u64, RequestId)>,
    fifo: VecDeque<RequestId>,
    next_rq: Option<RequestId>,
    dispatched: u32,
    prio_pending: u32,
    on_rr: bool,
    /// The service tree it sits on and its key and tie-break sequence there.
    service_tree: Option<(WlClass, WlType, i64, u64)>,
    slice_start: Jiffies,
    slice_end: Jiffies,
    slice_resid: i64,
    slice_dispatch: u32,
    // `cfqq->flags`.
    wait_request: bool,
    must_dispatch: bool,
    fifo_expire_checked: bool,
    idle_window: bool,
    slice_new: bool,
    wait_busy: bool,
    deep: bool,
    seek_history: u32,
    last_request_pos: u64,
    /// The owning process's `cic->ttime` (sync queues only).
    ttime: Ttime,
    /// QASIO §5.3: the queue's boosted requests (async queues only), served first.
    qasio: VecDeque<RequestId>,
}

impl CfqQueue {
    /// `cfq_init_cfqq` + `cfq_init_prio_data`.
    /// `prio` is the resolved class and level (`IoPrio::for_task`).
    fn new(sync: bool, prio: IoPrio, pid: u32, now: Jiffies) -> CfqQueue {
        let prio = prio.effective();
        let class = wl_class(prio.class);
        CfqQueue {
            cic_ioprio: prio,
            sync,
            class,
            level: prio.level,
            pid,
            sort_list: BTreeSet::new(),
            fifo: VecDeque::new(),
            next_rq: None,
            dispatched: 0,
            prio_pending: 0,
            on_rr: false,
            service_tree: None,
            slice_start: 0,
            slice_end: 0,
            slice_resid: 0,
            slice_dispatch: 0,
            wait_request: false,
            must_dispatch: false,
            fifo_expire_checked: false,
            idle_window: sync && class != WlClass::Idle,
            slice_new: true,
            wait_busy: false,
            deep: false,
            seek_history: 0,
            qasio: VecDeque::new(),
            last_request_pos: 0,
            ttime: Ttime {
                last_end_request: now,
                ..Ttime::default()
            },
        }
    }

    /// `cfqq_type`.
    fn wl_type(&self) -> WlType {
        if !self.sync {
            WlType::Async
        } else if !self.idle_window {
            WlType::SyncNoidle
        } else {
            WlType::Sync
        }
    }

    /// `CFQQ_SEEKY`: more than 4 of the last 32 requests were seeks.
    fn seeky(&self) -> bool {
        self.seek_history.count_ones() > 32 / 8
    }
}

/// `struct cfq_rb_root`: a service tree.
#[derive(Debug, Default)]
struct ServiceTree {
    /// (rb_key, insertion sequence, queue).
    rb: BTreeSet<(i64, u64, CfqqId)>,
    ttime: Ttime,
}

impl ServiceTree {
    fn first(&self) -> Option<CfqqId> {
        self.rb.first().map(|&(_, _, id)| id)
    }
    fn first_key(&self) -> Option<i64> {
        self.rb.first().map(|&(key, _, _)| key)
    }
    fn count(&self) -> usize {
        self.rb.len()
    }
}

/// Tunables (/sys/block/*/queue/iosched/), in the kernel's units: times in jiffies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CfqTunables {
    /// `cfq_quantum`.
    pub quantum: u32,
    /// `cfq_fifo_expire`, indexed [async, sync], jiffies.
    pub fifo_expire: [Jiffies; 2],
    /// `cfq_back_max`, KiB.
    pub back_seek_max_kib: u64,
    /// `cfq_back_penalty`.
    pub back_seek_penalty: u64,
    /// `cfq_slice`, indexed [async, sync], jiffies.
    pub slice: [Jiffies; 2],
    /// `cfq_slice_async_rq`.
    pub slice_async_rq: u32,
    /// `cfq_slice_idle`, jiffies.
    pub slice_idle: Jiffies,
    /// `cfq_group_idle`, jiffies.
    pub group_idle: Jiffies,
    /// `cfq_latency` (sysfs `low_latency`).
    pub low_latency: bool,
    /// `cfq_target_latency`, jiffies.
    pub target_latency: Jiffies,
}

impl CfqTunables {
    /// The 3.10 defaults at tick rate `hz` (block/cfq-iosched.c, top of file and `cfq_init`):
    /// `cfq_fifo_expire = { HZ / 4, HZ / 8 }`, `cfq_slice_sync = HZ / 10`,
    /// `cfq_slice_async = HZ / 25`, `cfq_slice_idle = HZ / 125`, `cfq_target_latency =
    /// HZ * 3/10`. `cfq_init` raises `cfq_slice_async` and `cfq_slice_idle` to 1 jiffy when the
    /// division gives 0 ("could be 0 on HZ < 1000 setups"): at HZ = 100 `slice_idle` is one
    /// jiffy, 10 ms, not 0. `cfq_group_idle` (also HZ / 125) is forced to 0 without
    /// CONFIG_CFQ_GROUP_IOSCHED, which the Galaxy S5's kernel does not set
    /// (exynos5422-k3g_00_defconfig of its 3.10.9: `# CONFIG_BLK_CGROUP is not set`).
    pub fn defaults(hz: Hz) -> CfqTunables {
        CfqTunables {
            quantum: QUANTUM,
            fifo_expire: [hz.over(4), hz.over(8)],
            back_seek_max_kib: BACK_SEEK_MAX_KIB,
            back_seek_penalty: BACK_SEEK_PENALTY,
            slice: [hz.over(25).max(1), hz.over(10)],
            slice_async_rq: SLICE_ASYNC_RQ,
            slice_idle: hz.over(125).max(1),
            group_idle: 0,
            low_latency: true,
            target_latency: hz.frac(3, 10),
        }
    }
}

/// `struct cfq_data` (with the root `cfq_group` folded in).
#[derive(Debug)]
pub struct Cfq {
    queues: Vec<CfqQueue>,
    /// `cic->cfqq[SYNC]` per process.
    sync_queues: BTreeMap<u32, CfqqId>,
    /// `async_cfqq[class][level]` and `async_idle_cfqq`.
    async_queues: BTreeMap<(WlClass, u8), CfqqId>,
    /// `service_trees[class][type]` for RT and BE.
    service_trees: [[ServiceTree; 3]; 2],
    service_tree_idle: ServiceTree,
    tree_sequence: u64,
    /// `cfqg->busy_queues_avg[class]`.
    busy_queues_avg: [u32; 2],
    serving_class: WlClass,
    serving_type: WlType,
    /// `workload_expires` (jiffies); `None` once expired on purpose (`saved_wl_slice = 0`).
    workload_expires: Option<Jiffies>,
    active_queue: Option<CfqqId>,
    /// `cfqd->active_cic != NULL`: the active queue dispatched in this slice.
    active_cic: bool,
    busy_queues: u32,
    busy_sync_queues: u32,
    rq_in_driver: u32,
    rq_in_flight: [u32; 2],
    rq_queued: u32,
    last_position: u64,
    /// `idle_slice_timer` expiry (jiffies), when armed.
    idle_slice_timer: Option<Jiffies>,
    /// Signed: it starts a second before boot (`jiffies - HZ`).
    last_delayed_sync: i64,
    /// `cfqg->ttime` of the root group.
    group_ttime: Ttime,
    nonrot: bool,
    hw_tag: bool,
    store: RqStore,
    /// Queue of every request from insertion to completion (`RQ_CFQQ`).
    rq_cfqq: BTreeMap<RequestId, CfqqId>,
    pub tunables: CfqTunables,
    /// The kernel's tick rate: CFQ's clock is `jiffies`.
    hz: Hz,
}

impl Cfq {
    /// CFQ with the 3.10 defaults at tick rate `hz`.
    pub fn new(traits: QueueTraits, hz: Hz) -> Cfq {
        Cfq::with_tunables(traits, hz, CfqTunables::defaults(hz))
    }

    pub fn with_tunables(traits: QueueTraits, hz: Hz, tunables: CfqTunables) -> Cfq {
        Cfq {
            hz,
            queues: Vec::new(),
            sync_queues: BTreeMap::new(),
            async_queues: BTreeMap::new(),
            service_trees: Default::default(),
            service_tree_idle: ServiceTree::default(),
            tree_sequence: 0,
            busy_queues_avg: [0; 2],
            serving_class: WlClass::Be,
            serving_type: WlType::SyncNoidle,
            workload_expires: None,
            active_queue: None,
            active_cic: false,
            busy_queues: 0,
            busy_sync_queues: 0,
            rq_in_driver: 0,
            rq_in_flight: [0; 2],
            rq_queued: 0,
            last_position: 0,
            idle_slice_timer: None,
            // `cfqd->last_delayed_sync = jiffies - HZ` (cfq_init_queue): "we optimistically start
            // assuming sync ops weren't delayed in last second, in order to have larger depth
            // for async operations". The queue is created at jiffy 0.
            last_delayed_sync: -i64::from(hz.0),
            group_ttime: Ttime::default(),
            nonrot: traits.nonrot,
            hw_tag: traits.queue_depth >= HW_QUEUE_MIN,
            store: RqStore::default(),
            rq_cfqq: BTreeMap::new(),
            tunables,
        }
    }

    // ---- queues and service trees -------------------------------------------------------

    /// `cfq_get_queue`: the sync queue of the process, or the shared async queue of its priority.
    ///
    /// `cic_ioprio` is the allocating task's `cic->ioprio` and `nice` its nice value: a new queue
    /// takes its class and level from them (`cfq_init_prio_data`: class NONE inherits the nice
    /// value, `task_nice_ioprio`). The shared async queues are indexed by `cic->ioprio`
    /// (`cfq_async_queue_prio`: class NONE uses the BE slot of `IOPRIO_NORM`), so the async
    /// queue of slot BE4 has the level of the nice value of the task that created it. A sync
    /// queue whose task changed its `ioprio` is re-initialised (`check_ioprio_changed` ->
    /// `cfq_init_prio_data`); a nice change alone does not, as in 3.10.
    fn get_queue(
        &mut self,
        sync: bool,
        cic_ioprio: IoPrio,
        nice: i8,
        pid: u32,
        now: Jiffies,
    ) -> CfqqId {
        let next_id = self.queues.len();
        let id = if sync {
            *self.sync_queues.entry(pid).or_insert(next_id)
        } else {
            *self
                .async_queues
                .entry(async_slot(cic_ioprio))
                .or_insert(next_id)
        };
        if id == next_id {
            let pid = if sync { pid } else { 0 };
            let mut queue = CfqQueue::new(sync, cic_ioprio.for_task(nice), pid, now);
            queue.cic_ioprio = cic_ioprio;
            self.queues.push(queue);
        } else if sync && self.queues[id].cic_ioprio != cic_ioprio {
            let prio = cic_ioprio.for_task(nice);
            let queue = &mut self.queues[id];
            queue.cic_ioprio = cic_ioprio;
            queue.class = wl_class(prio.class);
            queue.level = prio.level;
            if queue.class == WlClass::Idle {
                queue.idle_window = false;
            }
        }
        id
    }

    fn tree(&self, class: WlClass, wl_type: WlType) -> &ServiceTree {
        match class {
            WlClass::Idle => &self.service_tree_idle,
            _ => &self.service_trees[class as usize][wl_type as usize],
        }
    }

    fn tree_mut(&mut self, class: WlClass, wl_type: WlType) -> &mut ServiceTree {
        match class {
            WlClass::Idle => &mut self.service_tree_idle,
            _ => &mut self.service_trees[class as usize][wl_type as usize],
        }
    }

    /// The tree a queue belongs on now (its type changes with its idle window): where
    /// `cfq_service_tree_add` puts it (`st_for(cfqg, cfqq_class, cfqq_type)`).
    fn tree_of(&self, cfqq: CfqqId) -> (WlClass, WlType) {
        let queue = &self.queues[cfqq];
        (queue.class, queue.wl_type())
    }

    /// The tree a queue sits on (`cfqq->service_tree`), which lags its type: a queue whose idle
    /// window changes stays where it is until it is next sorted (`cfq_update_idle_window` only
    /// flips the flag). Off the trees: the tree it would go on.
    fn tree_on(&self, cfqq: CfqqId) -> (WlClass, WlType) {
        match self.queues[cfqq].service_tree {
            Some((class, wl_type, _, _)) => (class, wl_type),
            None => self.tree_of(cfqq),
        }
    }

    /// `cfqq->service_tree->count`.
    fn tree_on_count(&self, cfqq: CfqqId) -> usize {
        let (class, wl_type) = self.tree_on(cfqq);
        self.tree(class, wl_type).count()
    }

    /// `cfq_group_busy_queues_wl`.
    fn busy_queues_wl(&self, class: WlClass) -> usize {
        match class {
            WlClass::Idle => self.service_tree_idle.count(),
            _ => WL_TYPES
                .iter()
                .map(|&wl_type| self.tree(class, wl_type).count())
                .sum(),
        }
    }

    /// `cfqg->nr_cfqq`: queues on the service trees.
    fn nr_cfqq(&self) -> usize {
        self.service_trees
            .iter()
            .flatten()
            .map(ServiceTree::count)
            .sum::<usize>()
            + self.service_tree_idle.count()
    }

    /// `cfq_prio_slice`: base slice plus 20 % per level above 4, minus per level below.
    fn prio_slice(&self, sync: bool, level: u8) -> Jiffies {
        let base = self.tunables.slice[usize::from(sync)];
        let scaled = (base / SLICE_SCALE) as i64 * (i64::from(IOPRIO_NORM) - i64::from(level));
        (base as i64 + scaled) as Jiffies
    }

    /// `cfq_slice_offset`: queues of lower priority (and async ones) start further back.
    fn slice_offset(&self, cfqq: CfqqId) -> i64 {
        let queue = &self.queues[cfqq];
        let spread =
            self.prio_slice(true, 0) as i64 - self.prio_slice(queue.sync, queue.level) as i64;
        (self.nr_cfqq() as i64 - 1) * spread
    }

    /// `cfq_service_tree_add`.
    fn service_tree_add(&mut self, cfqq: CfqqId, add_front: bool, now: Jiffies) {
        let (class, wl_type) = self.tree_of(cfqq);
        let now_key = now as i64;
        let rb_key = if class == WlClass::Idle {
            let last = self
                .tree(class, wl_type)
                .rb
                .last()
                .filter(|&&(_, _, id)| id != cfqq)
                .map(|&(key, _, _)| key);
            self.hz.over(5) as i64 + last.unwrap_or(now_key)
        } else if !add_front {
            let key = self.slice_offset(cfqq) + now_key - self.queues[cfqq].slice_resid;
            self.queues[cfqq].slice_resid = 0;
            key
        } else {
            -i64::from(self.hz.0) + self.tree(class, wl_type).first_key().unwrap_or(now_key)
        };
        if let Some((old_class, old_type, old_key, sequence)) = self.queues[cfqq].service_tree {
            if old_key == rb_key && (old_class, old_type) == (class, wl_type) {
                return;
            }
            assert!(self
                .tree_mut(old_class, old_type)
                .rb
                .remove(&(old_key, sequence, cfqq)));
        }
        self.tree_sequence += 1;
        let sequence = self.tree_sequence;
        self.tree_mut(class, wl_type)
            .rb
            .insert((rb_key, sequence, cfqq));
        self.queues[cfqq].service_tree = Some((class, wl_type, rb_key, sequence));
    }

    fn service_tree_remove(&mut self, cfqq: CfqqId) {
        if let Some((class, wl_type, key, sequence)) = self.queues[cfqq].service_tree.take() {
            assert!(self
                .tree_mut(class, wl_type)
                .rb
                .remove(&(key, sequence, cfqq)));
        }
    }

    /// `cfq_add_cfqq_rr`.
    fn add_cfqq_rr(&mut self, cfqq: CfqqId, now: Jiffies) {
        assert!(!self.queues[cfqq].on_rr);
        self.queues[cfqq].on_rr = true;
        self.busy_queues += 1;
        if self.queues[cfqq].sync {
            self.busy_sync_queues += 1;
        }
        self.service_tree_add(cfqq, false, now);
    }

    /// `cfq_del_cfqq_rr`.
    fn del_cfqq_rr(&mut self, cfqq: CfqqId) {
        assert!(self.queues[cfqq].on_rr);
        self.queues[cfqq].on_rr = false;
        self.service_tree_remove(cfqq);
        if self.nr_cfqq() == 0 {
            // `cfq_group_notify_queue_del`: the group leaves the group service tree and forgets
            // its workload (`saved_wl_slice = 0`); the next queue chooses a workload afresh.
            self.workload_expires = None;
        }
        assert!(self.busy_queues > 0);
        self.busy_queues -= 1;
        if self.queues[cfqq].sync {
            self.busy_sync_queues -= 1;
        }
    }

    // ---- slices ---------------------------------------------------------------------------

    /// `cfq_slice_used`.
    fn slice_used(&self, cfqq: CfqqId, now: Jiffies) -> bool {
        let queue = &self.queues[cfqq];
        !queue.slice_new && now >= queue.slice_end
    }

    /// `cfq_group_get_avg_queues`.
    fn avg_queues(&mut self, rt: bool) -> u32 {
        let class = if rt { WlClass::Rt } else { WlClass::Be };
        let busy = self.busy_queues_wl(class) as u32;
        let average = &mut self.busy_queues_avg[usize::from(rt)];
        let (min_q, max_q) = ((*average).min(busy), (*average).max(busy));
        *average = ((HIST_DIVISOR - 1) * max_q + min_q + HIST_DIVISOR / 2) / HIST_DIVISOR;
        *average
    }

    /// `cfq_scaled_cfqq_slice`: with low_latency, shrink slices so that all queues of the class
    /// fit in `target_latency`, but not below `2 * slice_idle` (scaled).
    fn scaled_slice(&mut self, cfqq: CfqqId) -> Jiffies {
        let (sync, level, rt) = {
            let queue = &self.queues[cfqq];
            (queue.sync, queue.level, queue.class == WlClass::Rt)
        };
        let mut slice = self.prio_slice(sync, level);
        if self.tunables.low_latency {
            let interested = Jiffies::from(self.avg_queues(rt));
            let sync_slice = self.tunables.slice[SYNC];
            let expect_latency = sync_slice * interested;
            let group_slice = self.tunables.target_latency;
            if expect_latency > group_slice {
                let base_low_slice = 2 * self.tunables.slice_idle;
                let low_slice = slice.min(base_low_slice * slice / sync_slice);
                slice = (slice * group_slice / expect_latency).max(low_slice);
            }
        }
        slice
    }

    /// `cfq_set_prio_slice`: the slice starts at the queue's first completion.
    fn set_prio_slice(&mut self, cfqq: CfqqId, now: Jiffies) {
        let slice = self.scaled_slice(cfqq);
        let queue = &mut self.queues[cfqq];
        queue.slice_start = now;
        queue.slice_end = now + slice;
    }

    /// `__cfq_set_active_queue`.
    fn set_active_queue(&mut self, cfqq: Option<CfqqId>) -> Option<CfqqId> {
        if let Some(id) = cfqq {
            let queue = &mut self.queues[id];
            queue.slice_start = 0;
            queue.slice_end = 0;
            queue.slice_dispatch = 0;
            queue.wait_request = false;
            queue.must_dispatch = false;
            queue.fifo_expire_checked = false;
            queue.wait_busy = false;
            queue.slice_new = true;
            self.idle_slice_timer = None;
        }
        self.active_queue = cfqq;
        cfqq
    }

    /// `__cfq_slice_expired` on the active queue.
    fn slice_expired(&mut self, timed_out: bool, now: Jiffies) {
        let Some(cfqq) = self.active_queue else {
            return;
        };
        self.idle_slice_timer = None;
        self.queues[cfqq].wait_request = false;
        self.queues[cfqq].wait_busy = false;
        if timed_out {
            self.queues[cfqq].slice_resid = if self.queues[cfqq].slice_new {
                self.scaled_slice(cfqq) as i64
            } else {
                self.queues[cfqq].slice_end as i64 - now as i64
            };
        }
        // `cfq_group_served`: with one group the workload context simply stays current.
        if self.queues[cfqq].on_rr && self.queues[cfqq].sort_list.is_empty() {
            self.del_cfqq_rr(cfqq);
        }
        if self.queues[cfqq].on_rr {
            self.service_tree_add(cfqq, false, now);
        }
        self.active_queue = None;
        self.active_cic = false;
    }

    /// `cfq_choose_wl_type`: the type whose first queue has the lowest key.
    fn choose_wl_type(&self, class: WlClass) -> WlType {
        let mut best = (None, WlType::SyncNoidle);
        for wl_type in WL_TYPES {
            if let Some(key) = self.tree(class, wl_type).first_key() {
                if best.0.is_none_or(|lowest| key < lowest) {
                    best = (Some(key), wl_type);
                }
            }
        }
        best.1
    }

    /// `choose_wl_class_and_type`.
    fn choose_wl_class_and_type(&mut self, now: Jiffies) {
        let original_class = self.serving_class;
        self.serving_class = if self.busy_queues_wl(WlClass::Rt) > 0 {
            WlClass::Rt
        } else if self.busy_queues_wl(WlClass::Be) > 0 {
            WlClass::Be
        } else {
            self.workload_expires = Some(now + 1);
            WlClass::Idle
        };
        if self.serving_class == WlClass::Idle {
            return;
        }
        if original_class == self.serving_class {
            let count = self.tree(self.serving_class, self.serving_type).count();
            if count > 0 && self.workload_expires.is_some_and(|expires| now <= expires) {
                return;
            }
        }
        self.serving_type = self.choose_wl_type(self.serving_class);
        let count = self.tree(self.serving_class, self.serving_type).count() as u64;
        let group_slice = self.tunables.target_latency;
        let class_index = self.serving_class as usize;
        let busy_in_class = self.busy_queues_wl(self.serving_class) as u64;
        let divisor = u64::from(self.busy_queues_avg[class_index])
            .max(busy_in_class)
            .max(1);
        let mut slice = group_slice * count / divisor;
        if self.serving_type == WlType::Async {
            let busy_async = self.busy_queues.saturating_sub(self.busy_sync_queues);
            let async_share = self.tunables.target_latency * u64::from(busy_async)
                / u64::from(self.busy_queues.max(1));
            slice = slice.min(async_share);
            slice = slice * self.tunables.slice[ASYNC] / self.tunables.slice[SYNC];
        } else {
            slice = slice.max(2 * self.tunables.slice_idle);
        }
        self.workload_expires = Some(now + slice.max(MIN_TT));
    }

    /// `cfq_get_next_queue`.
    fn get_next_queue(&self) -> Option<CfqqId> {
        if self.rq_queued == 0 {
            return None;
        }
        self.tree(self.serving_class, self.serving_type).first()
    }

    // ---- idling ---------------------------------------------------------------------------

    /// `cfq_io_thinktime_big` (queue idling flavour).
    fn thinktime_big(&self, ttime: &Ttime, group_idle: bool) -> bool {
        let slice = if group_idle {
            self.tunables.group_idle
        } else {
            self.tunables.slice_idle
        };
        ttime.valid() && ttime.mean > slice
    }

    /// `cfq_should_idle`.
    fn should_idle(&self, cfqq: CfqqId) -> bool {
        let queue = &self.queues[cfqq];
        if self.tunables.slice_idle == 0 || queue.class == WlClass::Idle {
            return false;
        }
        if queue.idle_window && !(self.nonrot && self.hw_tag) {
            return true;
        }
        let (class, wl_type) = self.tree_on(cfqq);
        let tree = self.tree(class, wl_type);
        tree.count() == 1 && queue.sync && !self.thinktime_big(&tree.ttime, false)
    }

    /// `cfq_arm_slice_timer`: idle on the queue (`slice_idle`) or, when it should not idle but
    /// is the group's only queue, on the group (`group_idle`).
    fn arm_slice_timer(&mut self, now: Jiffies) {
        let Some(cfqq) = self.active_queue else {
            return;
        };
        if self.nonrot && self.hw_tag {
            return;
        }
        assert!(self.queues[cfqq].sort_list.is_empty());
        let group_idle = !self.should_idle(cfqq);
        if group_idle && self.tunables.group_idle == 0 {
            return;
        }
        if self.queues[cfqq].dispatched > 0 || !self.active_cic {
            return;
        }
        let queue = &self.queues[cfqq];
        if queue.ttime.valid() && queue.slice_end.wrapping_sub(now) < queue.ttime.mean {
            return;
        }
        if group_idle && self.nr_cfqq() > 1 {
            return;
        }
        self.queues[cfqq].wait_request = true;
        let idle = if group_idle {
            self.tunables.group_idle
        } else {
            self.tunables.slice_idle
        };
        self.idle_slice_timer = Some(now + idle);
    }

    /// `cfq_should_wait_busy` (one group: "no other queue in the group" is `nr_cfqq == 1`).
    fn should_wait_busy(&self, cfqq: CfqqId, now: Jiffies) -> bool {
        let queue = &self.queues[cfqq];
        if !queue.sort_list.is_empty() || self.nr_cfqq() > 1 {
            return false;
        }
        if self.thinktime_big(&self.group_ttime, true) {
            return false;
        }
        if self.slice_used(cfqq, now) {
            return true;
        }
        // `slice_end - jiffies` in unsigned long arithmetic: a slice already over wraps to a
        // huge value.
        if queue.ttime.valid() && queue.slice_end.wrapping_sub(now) < queue.ttime.mean {
            return true;
        }
        // Think times under a jiffy have a mean of 0: wait busy with one jiffy left.
        queue.slice_end.wrapping_sub(now) == 1
    }

    // ---- choosing requests ----------------------------------------------------------------

    /// `cfq_choose_req`: which of two requests to serve next from head position `last`.
    fn choose_req(
        &self,
        rq1: Option<RequestId>,
        rq2: Option<RequestId>,
        last: u64,
    ) -> Option<RequestId> {
        let (id1, id2) = match (rq1, rq2) {
            (None, other) | (other, None) => return other,
            (Some(a), Some(b)) if a == b => return Some(b),
            (Some(a), Some(b)) => (a, b),
        };
        let (r1, r2) = (self.store.get(id1), self.store.get(id2));
        if r1.is_sync() != r2.is_sync() {
            return Some(if r1.is_sync() { id1 } else { id2 });
        }
        if r1.flags.prio != r2.flags.prio {
            return Some(if r1.flags.prio { id1 } else { id2 });
        }
        let back_max = self.tunables.back_seek_max_kib * 1024 / SECTOR_SIZE;
        let distance = |s: u64| -> Option<u64> {
            if s >= last {
                Some(s - last)
            } else if s + back_max >= last {
                Some((last - s) * self.tunables.back_seek_penalty)
            } else {
                None
            }
        };
        let (s1, s2) = (r1.sector, r2.sector);
        Some(match (distance(s1), distance(s2)) {
            (Some(d1), Some(d2)) if d1 != d2 => {
                if d1 < d2 {
                    id1
                } else {
                    id2
                }
            }
            (Some(_), Some(_)) => {
                if s1 >= s2 {
                    id1
                } else {
                    id2
                }
            }
            (Some(_), None) => id1,
            (None, Some(_)) => id2,
            (None, None) => {
                if s1 <= s2 {
                    id1
                } else {
                    id2
                }
            }
        })
    }

    /// `cfq_find_next_rq`: the best neighbour of `last` (which is about to leave the queue).
    fn find_next_rq(&self, cfqq: CfqqId, last: RequestId) -> Option<RequestId> {
        let queue = &self.queues[cfqq];
        let key = (self.store.get(last).sector, last);
        let prev = queue.sort_list.range(..key).next_back().map(|&(_, id)| id);
        let next = queue
            .sort_list
            .range((Excluded(key), Unbounded))
            .next()
            .map(|&(_, id)| id)
            .or_else(|| {
                queue
                    .sort_list
                    .first()
                    .map(|&(_, id)| id)
                    .filter(|&id| id != last)
            });
        self.choose_req(next, prev, key.0)
    }

    /// `cfq_check_fifo`: the oldest request if it expired, checked once per slice.
    fn check_fifo(&mut self, cfqq: CfqqId, now: Jiffies) -> Option<RequestId> {
        let queue = &mut self.queues[cfqq];
        if queue.fifo_expire_checked {
            return None;
        }
        queue.fifo_expire_checked = true;
        let head = *queue.fifo.front()?;
        // `time_before(jiffies, rq_fifo_time(rq))` means not yet expired.
        (now >= self.hz.jiffies(self.store.get(head).fifo_time_ns)).then_some(head)
    }

    /// `cfq_remove_request` / `cfq_del_rq_rb` (the queue stays on the service tree until expiry).
    fn remove_request(&mut self, id: RequestId) -> Request {
        let cfqq = self.rq_cfqq[&id];
        let rq = self.store.remove(id);
        let queue = &mut self.queues[cfqq];
        assert!(queue.sort_list.remove(&(rq.sector, id)));
        let position = queue
            .fifo
            .iter()
            .position(|&q| q == id)
            .expect("not in fifo");
        queue.fifo.remove(position);
        if let Some(position) = queue.qasio.iter().position(|&q| q == id) {
            queue.qasio.remove(position);
        }
        if rq.flags.prio {
            queue.prio_pending -= 1;
        }
        self.rq_queued -= 1;
        rq
    }

    // ---- dispatch -------------------------------------------------------------------------

    /// `check_group_idle:` of `cfq_select_queue`: keep waiting for the group's only queue while
    /// its requests are in flight.
    fn group_idle_wait(&self) -> bool {
        self.tunables.group_idle > 0
            && self.nr_cfqq() == 1
            && self.rq_in_driver > 0
            && !self.thinktime_big(&self.group_ttime, true)
    }

    /// `cfq_select_queue` (no close cooperators).
    fn select_queue(&mut self, now: Jiffies) -> Option<CfqqId> {
        let Some(cfqq) = self.active_queue else {
            return self.new_queue(now);
        };
        if self.rq_queued == 0 {
            return None;
        }
        let queue = &self.queues[cfqq];
        if queue.wait_busy && !queue.sort_list.is_empty() {
            self.slice_expired(false, now);
            return self.new_queue(now);
        }
        if self.slice_used(cfqq, now) && !self.queues[cfqq].must_dispatch {
            let queue = &self.queues[cfqq];
            if self.nr_cfqq() == 1
                && queue.sort_list.is_empty()
                && queue.dispatched > 0
                && self.should_idle(cfqq)
            {
                return None;
            }
            if self.group_idle_wait() {
                return None;
            }
            self.slice_expired(false, now);
            return self.new_queue(now);
        }
        if !self.queues[cfqq].sort_list.is_empty() {
            return Some(cfqq);
        }
        if self.idle_slice_timer.is_some() {
            return None;
        }
        // A seeky queue on a device faster than it can feed: stop idling for it.
        let queue = &self.queues[cfqq];
        if queue.seeky()
            && queue.idle_window
            && (queue.slice_new
                || queue.slice_end.wrapping_sub(now) > now.wrapping_sub(queue.slice_start))
        {
            let queue = &mut self.queues[cfqq];
            queue.deep = false;
            queue.idle_window = false;
        }
        if self.queues[cfqq].dispatched > 0 && self.should_idle(cfqq) {
            return None;
        }
        if self.group_idle_wait() {
            return None;
        }
        self.slice_expired(false, now);
        self.new_queue(now)
    }

    /// The `new_queue:` label of `cfq_select_queue`.
    fn new_queue(&mut self, now: Jiffies) -> Option<CfqqId> {
        self.choose_wl_class_and_type(now);
        let next = self.get_next_queue();
        self.set_active_queue(next)
    }

    /// `cfq_slice_used_soon`.
    fn slice_used_soon(&self, cfqq: CfqqId, now: Jiffies) -> bool {
        let queue = &self.queues[cfqq];
        queue.slice_new
            || now + self.tunables.slice_idle * Jiffies::from(queue.dispatched) > queue.slice_end
    }

    /// `cfq_may_dispatch`.
    fn may_dispatch(&self, cfqq: CfqqId, now: Jiffies) -> bool {
        let queue = &self.queues[cfqq];
        // Drain async requests before a sync queue that idles starts.
        if self.should_idle(cfqq) && self.rq_in_flight[ASYNC] > 0 {
            return false;
        }
        // An async queue waits while sync I/O is in flight.
        if self.rq_in_flight[SYNC] > 0 && !queue.sync {
            return false;
        }
        let idle_class = queue.class == WlClass::Idle;
        let mut max_dispatch = if idle_class {
            1
        } else {
            (self.tunables.quantum / 2).max(1)
        };
        if queue.dispatched >= max_dispatch {
            if idle_class {
                return false;
            }
            let promote_sync = queue.sync && self.busy_sync_queues == 1;
            if self.busy_queues > 1 && self.slice_used_soon(cfqq, now) && !promote_sync {
                return false;
            }
            max_dispatch = if self.busy_queues == 1 || promote_sync {
                u32::MAX
            } else {
                self.tunables.quantum
            };
        }
        // Async depth ramps up with the time since the last delayed sync request.
        if !queue.sync && self.tunables.low_latency {
            let since_sync = (now as i64 - self.last_delayed_sync).max(0) as Jiffies;
            let mut depth = (since_sync / self.tunables.slice[SYNC]) as u32;
            if depth == 0 && queue.dispatched == 0 {
                depth = 1;
            }
            max_dispatch = max_dispatch.min(depth);
        }
        queue.dispatched < max_dispatch
    }

    /// QASIO §5.3: the async queue (by slot order, deterministic) with a non-empty QASIO list
    /// that the async queue `cfqq` with an empty one yields to.
    fn qasio_yield_to(&self, cfqq: CfqqId) -> Option<CfqqId> {
        let queue = &self.queues[cfqq];
        if queue.sync || !queue.qasio.is_empty() {
            return None;
        }
        self.async_queues
            .values()
            .copied()
            .find(|&other| other != cfqq && !self.queues[other].qasio.is_empty())
    }

    /// `cfq_prio_to_maxrq`: dispatches per async slice.
    fn prio_to_maxrq(&self, cfqq: CfqqId) -> u32 {
        2 * self.tunables.slice_async_rq * u32::from(IOPRIO_BE_NR - self.queues[cfqq].level)
    }

    /// `cfq_dispatch_insert` + `cfq_activate_request`.
    fn dispatch_insert(&mut self, cfqq: CfqqId, id: RequestId) -> Request {
        let next = self.find_next_rq(cfqq, id);
        self.queues[cfqq].next_rq = next;
        let rq = self.remove_request(id);
        let queue = &mut self.queues[cfqq];
        queue.dispatched += 1;
        self.rq_in_flight[usize::from(queue.sync)] += 1;
        self.rq_in_driver += 1;
        self.last_position = rq.end_sector();
        rq
    }

    /// `cfq_dispatch_requests` (one request per call, like the kernel).
    fn dispatch_requests(&mut self, now: Jiffies) -> Option<Request> {
        if self.busy_queues == 0 {
            return None;
        }
        let mut cfqq = self.select_queue(now)?;
        assert!(!self.queues[cfqq].sort_list.is_empty());
        if let Some(boosted) = self.qasio_yield_to(cfqq) {
            // QASIO §5.3: "if the QASIO list is empty, the current asynchronous queue yields
            // the chance of I/O dispatching to another asynchronous queue which has a
            // non-empty QASIO list": the active queue's slice ends and that queue is served.
            self.slice_expired(false, now);
            let (class, wl_type) = self.tree_on(boosted);
            self.serving_class = class;
            self.serving_type = wl_type;
            self.set_active_queue(Some(boosted));
            cfqq = boosted;
        }
        if !self.may_dispatch(cfqq, now) {
            return None;
        }
        // QASIO: a boosted request goes before the queue's others (its FIFO and sort order).
        let boosted = self.queues[cfqq].qasio.front().copied();
        let id = match boosted.or_else(|| self.check_fifo(cfqq, now)) {
            Some(chosen) => chosen,
            None => self.queues[cfqq]
                .next_rq
                .expect("non-empty queue has next_rq"),
        };
        let rq = self.dispatch_insert(cfqq, id);
        self.active_cic = true;
        let queue = &mut self.queues[cfqq];
        queue.slice_dispatch += 1;
        queue.must_dispatch = false;
        // Expire an async queue that used its request budget; an idle-class queue after one.
        let (sync, idle_class) = (queue.sync, queue.class == WlClass::Idle);
        if self.busy_queues > 1
            && ((!sync && self.queues[cfqq].slice_dispatch >= self.prio_to_maxrq(cfqq))
                || idle_class)
        {
            self.queues[cfqq].slice_end = now + 1;
            self.slice_expired(false, now);
        }
        Some(rq)
    }

    // ---- insertion ------------------------------------------------------------------------

    /// `cfq_update_io_seektime`.
    fn update_io_seektime(&mut self, cfqq: CfqqId, sector: u64, nr_sectors: u32) {
        let nonrot = self.nonrot;
        let queue = &mut self.queues[cfqq];
        let distance = if queue.last_request_pos == 0 {
            0
        } else {
            queue.last_request_pos.abs_diff(sector)
        };
        queue.seek_history <<= 1;
        let seek = if nonrot {
            nr_sectors < SECT_THR_NONROT
        } else {
            distance > SEEK_THR_SECTORS
        };
        queue.seek_history |= u32::from(seek);
    }

    /// `cfq_update_idle_window`.
    fn update_idle_window(&mut self, cfqq: CfqqId) {
        let slice_idle = self.tunables.slice_idle;
        let queue = &mut self.queues[cfqq];
        if !queue.sync || queue.class == WlClass::Idle {
            return;
        }
        if queue.sort_list.len() >= 4 {
            queue.deep = true;
        }
        let old_idle = queue.idle_window;
        let next_noidle = queue
            .next_rq
            .is_some_and(|next| self.store.get(next).flags.noidle);
        let enable_idle = if next_noidle || slice_idle == 0 || (!queue.deep && queue.seeky()) {
            false
        } else if queue.ttime.valid() {
            queue.ttime.mean <= slice_idle
        } else {
            old_idle
        };
        // Only the flag changes: the queue stays on the tree it is on until it is next sorted
        // (expiry, or re-adding once it emptied), as in the kernel.
        queue.idle_window = enable_idle;
    }

    /// `cfq_rq_close`.
    fn rq_close(&self, id: RequestId) -> bool {
        self.store.get(id).sector.abs_diff(self.last_position) <= CLOSE_THR_SECTORS
    }

    /// `cfq_should_preempt`: whether `new` (which just got request `id`) should take over.
    fn should_preempt(&self, new: CfqqId, id: RequestId, now: Jiffies) -> bool {
        let Some(active) = self.active_queue else {
            return false;
        };
        let (new_queue, active_queue) = (&self.queues[new], &self.queues[active]);
        let rq = self.store.get(id);
        if new_queue.class == WlClass::Idle {
            return false;
        }
        if active_queue.class == WlClass::Idle {
            return true;
        }
        if active_queue.class == WlClass::Rt && new_queue.class != WlClass::Rt {
            return false;
        }
        if rq.is_sync() && !active_queue.sync {
            return true;
        }
        if self.slice_used(active, now) {
            return true;
        }
        if self.serving_type == WlType::SyncNoidle
            && new_queue.wl_type() == WlType::SyncNoidle
            && self.tree_on_count(new) == 2
            && active_queue.sort_list.is_empty()
        {
            return true;
        }
        if rq.flags.prio && active_queue.prio_pending == 0 {
            return true;
        }
        if new_queue.class == WlClass::Rt && active_queue.class != WlClass::Rt {
            return true;
        }
        if active_queue.sort_list.is_empty() && !self.should_idle(active) {
            return true;
        }
        if !self.active_cic || !active_queue.wait_request {
            return false;
        }
        self.rq_close(id)
    }

    /// `cfq_preempt_queue`.
    fn preempt_queue(&mut self, cfqq: CfqqId, now: Jiffies) {
        let old_type = self
            .active_queue
            .map(|active| self.queues[active].wl_type());
        self.slice_expired(true, now);
        if old_type != Some(self.queues[cfqq].wl_type()) {
            // `saved_wl_slice = 0`: choose the workload again.
            self.workload_expires = None;
        }
        assert!(self.queues[cfqq].on_rr);
        self.service_tree_add(cfqq, true, now);
        self.queues[cfqq].slice_end = 0;
        self.queues[cfqq].slice_new = true;
    }

    /// `cfq_rq_enqueued`.
    fn rq_enqueued(&mut self, cfqq: CfqqId, id: RequestId, now: Jiffies) {
        let (sector, nr_sectors, prio, bytes) = {
            let rq = self.store.get(id);
            (rq.sector, rq.nr_sectors, rq.flags.prio, rq.bytes())
        };
        self.rq_queued += 1;
        if prio {
            self.queues[cfqq].prio_pending += 1;
        }
        if self.queues[cfqq].sync {
            let slice_idle = self.tunables.slice_idle;
            self.queues[cfqq].ttime.update(now, slice_idle);
            let (class, wl_type) = self.tree_on(cfqq);
            self.tree_mut(class, wl_type).ttime.update(now, slice_idle);
        }
        let group_idle = self.tunables.group_idle;
        self.group_ttime.update(now, group_idle);
        self.update_io_seektime(cfqq, sector, nr_sectors);
        self.update_idle_window(cfqq);
        self.queues[cfqq].last_request_pos = sector + u64::from(nr_sectors);
        if self.active_queue == Some(cfqq) {
            if self.queues[cfqq].wait_request {
                if bytes > crate::units::PAGE_SIZE || self.busy_queues > 1 {
                    self.idle_slice_timer = None;
                    self.queues[cfqq].wait_request = false;
                } else {
                    self.queues[cfqq].must_dispatch = true;
                }
            }
        } else if self.should_preempt(cfqq, id, now) {
            self.preempt_queue(cfqq, now);
        }
    }
}

/// The block layer's checks of CFQ's accounting (debug builds, `mobistack run --check`).
impl Cfq {
    /// Per `cfq_queue`: `sort_list` and `fifo` hold the queue's requests (`RQ_CFQQ`),
    /// `prio_pending` counts its REQ_PRIO ones, `next_rq` and the QASIO list are among them,
    /// `dispatched` counts its requests dispatched and not completed; `cfqd->rq_queued`,
    /// `rq_in_driver` and `rq_in_flight[sync]` are the sums.
    fn check_queues(&self, dispatched: &[&Request]) -> Result<(), String> {
        use super::check_count;
        check_count(
            "cfqd->rq_queued",
            u64::from(self.rq_queued),
            "requests are queued",
            self.store.len() as u64,
        )?;
        let mut listed = 0;
        let mut dispatched_of = vec![0u32; self.queues.len()];
        for rq in dispatched {
            match self.rq_cfqq.get(&rq.id) {
                Some(&cfqq) => dispatched_of[cfqq] += 1,
                None => return Err(format!("CFQ: dispatched R#{} has no RQ_CFQQ", rq.id)),
            }
        }
        for (cfqq, queue) in self.queues.iter().enumerate() {
            let what = format!("CFQ queue {cfqq} (pid {})", queue.pid);
            super::check_sort_and_fifo(&what, &queue.sort_list, &queue.fifo, &self.store)?;
            listed += queue.fifo.len();
            if let Some(&id) = queue
                .fifo
                .iter()
                .find(|id| self.rq_cfqq.get(id) != Some(&cfqq))
            {
                return Err(format!(
                    "{what}: R#{id} is queued in it but RQ_CFQQ says otherwise"
                ));
            }
            let prio = queue
                .fifo
                .iter()
                .filter(|&&id| self.store.get(id).flags.prio)
                .count();
            check_count(
                &format!("{what} prio_pending"),
                u64::from(queue.prio_pending),
                "REQ_PRIO requests are queued in it",
                prio as u64,
            )?;
            if let Some(next) = queue.next_rq.filter(|id| !queue.fifo.contains(id)) {
                return Err(format!("{what}: next_rq R#{next} is not queued in it"));
            }
            if queue.next_rq.is_none() && !queue.fifo.is_empty() {
                return Err(format!(
                    "{what}: {} requests queued but no next_rq",
                    queue.fifo.len()
                ));
            }
            if let Some(id) = queue.qasio.iter().find(|id| !queue.fifo.contains(id)) {
                return Err(format!("{what}: QASIO R#{id} is not queued in it"));
            }
            check_count(
                &format!("{what} dispatched"),
                u64::from(queue.dispatched),
                "of its requests are dispatched and not completed",
                u64::from(dispatched_of[cfqq]),
            )?;
        }
        check_count(
            "CFQ's queued requests",
            self.store.len() as u64,
            "are on its queues' fifos",
            listed as u64,
        )?;
        check_count(
            "cfqd->rq_in_driver",
            u64::from(self.rq_in_driver),
            "requests are dispatched and not completed",
            dispatched.len() as u64,
        )?;
        for sync in [false, true] {
            let want: u32 = self
                .queues
                .iter()
                .filter(|q| q.sync == sync)
                .map(|q| q.dispatched)
                .sum();
            check_count(
                &format!("cfqd->rq_in_flight[{}]", usize::from(sync)),
                u64::from(self.rq_in_flight[usize::from(sync)]),
                "requests of such queues are dispatched",
                u64::from(want),
            )?;
        }
        check_count(
            "RQ_CFQQ entries",
            self.rq_cfqq.len() as u64,
            "requests are queued or dispatched",
            (self.store.len() + dispatched.len()) as u64,
        )
    }

    /// A queue is on the round robin (`cfq_cfqq_on_rr`) exactly when it sits on one service
    /// tree, at the key it records; a queue with requests is on it; `busy_queues` and
    /// `busy_sync_queues` count them.
    fn check_trees(&self) -> Result<(), String> {
        use super::check_count;
        let trees = self
            .service_trees
            .iter()
            .flatten()
            .chain([&self.service_tree_idle]);
        let mut on_trees = 0;
        for tree in trees {
            on_trees += tree.count();
            for &(key, sequence, cfqq) in &tree.rb {
                let recorded = self.queues.get(cfqq).and_then(|q| q.service_tree);
                if recorded.map(|(_, _, k, s)| (k, s)) != Some((key, sequence)) {
                    return Err(format!("CFQ queue {cfqq} is on a service tree at key {key} but records {recorded:?}"));
                }
            }
        }
        for (cfqq, queue) in self.queues.iter().enumerate() {
            if queue.on_rr != queue.service_tree.is_some() {
                return Err(format!(
                    "CFQ queue {cfqq}: on_rr = {} but service tree {:?}",
                    queue.on_rr, queue.service_tree
                ));
            }
            if let Some((class, wl_type, key, sequence)) = queue.service_tree {
                if !self
                    .tree(class, wl_type)
                    .rb
                    .contains(&(key, sequence, cfqq))
                {
                    return Err(format!("CFQ queue {cfqq} records tree {class:?}/{wl_type:?} key {key} but is not on it"));
                }
            }
            if !queue.on_rr && !queue.fifo.is_empty() {
                return Err(format!(
                    "CFQ queue {cfqq} has {} requests but is not on the round robin",
                    queue.fifo.len()
                ));
            }
        }
        let busy = self.queues.iter().filter(|q| q.on_rr).count();
        let busy_sync = self.queues.iter().filter(|q| q.on_rr && q.sync).count();
        check_count(
            "cfqd->busy_queues",
            u64::from(self.busy_queues),
            "queues are on the round robin",
            busy as u64,
        )?;
        check_count(
            "cfqd->busy_sync_queues",
            u64::from(self.busy_sync_queues),
            "sync queues are on the round robin",
            busy_sync as u64,
        )?;
        check_count(
            "the service trees' counts",
            on_trees as u64,
            "queues are on the round robin",
            busy as u64,
        )
    }
}

impl Elevator for Cfq {
    fn name(&self) -> &'static str {
        "cfq"
    }

    /// QASIO §5.3 (`cfq_boost_request`): a queued asynchronous request someone blocks on joins
    /// its async queue's QASIO list, dispatched first whenever that queue is served. A request
    /// in a sync queue is already served as sync: nothing to do.
    fn boost(&mut self, _now: Nanos, rq: RequestId) -> bool {
        let Some(&cfqq) = self.rq_cfqq.get(&rq) else {
            return false;
        };
        if !self.store.contains(rq) {
            return false;
        }
        let queue = &mut self.queues[cfqq];
        if queue.sync || queue.qasio.contains(&rq) {
            return false;
        }
        queue.qasio.push_back(rq);
        true
    }

    /// FastTrack's I/O dispatcher through CFQ (`id_path = "elevator"`).
    ///
    /// A sync queue (the foreground app's own task's) becomes the active queue now (the active
    /// one's slice ends, as a preemption ends it), then `rq` is dispatched from it
    /// (`cfq_dispatch_insert`). The queue then goes on as any active queue: its slice starts at
    /// its first completion, and emptied it idles for its next request
    /// (`cfq_completed_request` -> `cfq_arm_slice_timer`).
    ///
    /// A request in an async queue (a page of the foreground app the flusher writes back; §4.4
    /// finds it by LBA in the queue every app's writeback shares) is taken out alone and the
    /// active queue keeps its slice: made active, the shared async queue would serve the
    /// background apps' writes queued with it. Taking a request out of a queue CFQ is not
    /// serving is what `cfq_merged_requests` does (3.10): `cfq_remove_request`, and the queue
    /// leaves the service tree if that emptied it (`cfq_del_cfqq_rr`).
    fn dispatch_now(&mut self, now: Nanos, rq: RequestId) -> Option<Request> {
        let now = self.hz.jiffies(now);
        let &cfqq = self.rq_cfqq.get(&rq)?;
        if !self.store.contains(rq) {
            return None;
        }
        if !self.queues[cfqq].sync && self.active_queue != Some(cfqq) {
            let request = self.dispatch_insert(cfqq, rq);
            if self.queues[cfqq].on_rr && self.queues[cfqq].sort_list.is_empty() {
                self.del_cfqq_rr(cfqq);
            }
            return Some(request);
        }
        if self.active_queue != Some(cfqq) {
            self.slice_expired(false, now);
            let (class, wl_type) = self.tree_on(cfqq);
            self.serving_class = class;
            self.serving_type = wl_type;
            self.set_active_queue(Some(cfqq));
        }
        let request = self.dispatch_insert(cfqq, rq);
        self.active_cic = true;
        let queue = &mut self.queues[cfqq];
        queue.slice_dispatch += 1;
        queue.must_dispatch = false;
        Some(request)
    }

    fn has_dispatch_now(&self) -> bool {
        true
    }

    /// Back merge by hash, front merge in the bio's queue (`cfq_merge`), both only into a request
    /// of the queue the bio would go to (`cfq_allow_merge`: never a sync bio into an async
    /// request, never across processes' sync queues).
    fn merge_bio(
        &mut self,
        now: Nanos,
        bio: &Bio,
        max_sectors: u32,
    ) -> Option<(RequestId, MergeKind)> {
        let target = if bio.is_sync() {
            self.sync_queues.get(&bio.task.pid).copied()
        } else {
            self.async_queues.get(&async_slot(bio.ioprio)).copied()
        }?;
        let rq_cfqq = &self.rq_cfqq;
        let queued = |rq: &Request| rq_cfqq.get(&rq.id) == Some(&target);
        let (id, kind, old_sector) = self.store.merge(bio, max_sectors, true, queued)?;
        if kind == MergeKind::Front {
            // `cfq_merged_request` -> `cfq_reposition_rq_rb`.
            let queue = &mut self.queues[target];
            assert!(queue.sort_list.remove(&(old_sector, id)));
            queue.sort_list.insert((self.store.get(id).sector, id));
            let next = self.queues[target].next_rq;
            let chosen = self.choose_req(next, Some(id), self.last_position);
            self.queues[target].next_rq = chosen;
        }
        let _ = now;
        Some((id, kind))
    }

    /// `cfq_set_request` + `cfq_insert_request` + `cfq_add_rq_rb` + `cfq_rq_enqueued`.
    fn add_request(&mut self, now_ns: Nanos, mut rq: Request) {
        let now = self.hz.jiffies(now_ns);
        let sync = rq.is_sync();
        let cfqq = self.get_queue(sync, rq.ioprio, rq.nice, rq.task.pid, now);
        let id = rq.id;
        rq.inserted_ns = now_ns;
        // `rq_set_fifo_time(rq, jiffies + cfq_fifo_expire[sync])`, kept as the time of that tick.
        rq.fifo_time_ns = self
            .hz
            .jiffies_to_ns(now + self.tunables.fifo_expire[usize::from(sync)]);
        let queue = &mut self.queues[cfqq];
        queue.fifo.push_back(id);
        queue.sort_list.insert((rq.sector, id));
        self.store.insert(rq);
        assert!(self.rq_cfqq.insert(id, cfqq).is_none());
        if !self.queues[cfqq].on_rr {
            self.add_cfqq_rr(cfqq, now);
        }
        let next = self.queues[cfqq].next_rq;
        let chosen = self.choose_req(next, Some(id), self.last_position);
        self.queues[cfqq].next_rq = chosen;
        self.rq_enqueued(cfqq, id, now);
    }

    fn dispatch_request(&mut self, now: Nanos) -> Option<Request> {
        let now = self.hz.jiffies(now);
        self.dispatch_requests(now)
    }

    /// The queue ran with the device full: `cfq_dispatch_requests` still selects the queue to
    /// serve (expiring an empty one that may not idle, starting a workload), so that a request
    /// arriving meanwhile meets an active queue it may preempt.
    fn dispatch_blocked(&mut self, now: Nanos) {
        let now = self.hz.jiffies(now);
        if self.busy_queues > 0 {
            let _ = self.select_queue(now);
        }
    }

    /// `cfq_completed_request`.
    fn completed_request(&mut self, now: Nanos, rq: &Request) {
        let now = self.hz.jiffies(now);
        let cfqq = self
            .rq_cfqq
            .remove(&rq.id)
            .expect("completion of a request CFQ never saw");
        assert!(self.rq_in_driver > 0 && self.queues[cfqq].dispatched > 0);
        self.rq_in_driver -= 1;
        self.queues[cfqq].dispatched -= 1;
        let queue_sync = self.queues[cfqq].sync;
        self.rq_in_flight[usize::from(queue_sync)] -= 1;
        if rq.is_sync() {
            self.queues[cfqq].ttime.last_end_request = now;
            let (class, wl_type) = self.tree_on(cfqq);
            self.tree_mut(class, wl_type).ttime.last_end_request = now;
            // `!time_after(rq->start_time + cfq_fifo_expire[1], now)`.
            if self.hz.jiffies(rq.start_ns) + self.tunables.fifo_expire[SYNC] <= now {
                self.last_delayed_sync = now as i64;
            }
        }
        self.group_ttime.last_end_request = now;
        if self.active_queue == Some(cfqq) {
            if self.queues[cfqq].slice_new {
                self.set_prio_slice(cfqq, now);
                self.queues[cfqq].slice_new = false;
            }
            if self.should_wait_busy(cfqq, now) {
                let extend = if self.tunables.slice_idle > 0 {
                    self.tunables.slice_idle
                } else {
                    self.tunables.group_idle
                };
                self.queues[cfqq].slice_end = now + extend;
                self.queues[cfqq].wait_busy = true;
            }
            let empty = self.queues[cfqq].sort_list.is_empty();
            if self.slice_used(cfqq, now) || self.queues[cfqq].class == WlClass::Idle {
                self.slice_expired(true, now);
            } else if rq.is_sync() && empty {
                self.arm_slice_timer(now);
            }
        }
    }

    fn queued(&self) -> usize {
        assert_eq!(self.rq_queued as usize, self.store.len());
        self.store.len()
    }

    fn queued_requests(&self) -> Vec<&Request> {
        self.store.requests()
    }

    /// See [`Cfq::check_queues`] and [`Cfq::check_trees`].
    fn check(&self, dispatched: &[&Request]) -> Result<(), String> {
        self.store.check()?;
        self.check_queues(dispatched)?;
        self.check_trees()
    }

    /// The idle slice timer fires at the tick of its expiry (`mod_timer(jiffies + sl)`).
    fn next_timer(&self) -> Option<Nanos> {
        self.idle_slice_timer
            .map(|expiry| self.hz.jiffies_to_ns(expiry))
    }

    /// `cfq_idle_slice_timer`.
    fn timer_fired(&mut self, now: Nanos) {
        let now = self.hz.jiffies(now);
        let Some(expiry) = self.idle_slice_timer else {
            return;
        };
        assert!(now >= expiry, "idle timer fired early");
        self.idle_slice_timer = None;
        let mut timed_out = true;
        if let Some(cfqq) = self.active_queue {
            timed_out = false;
            if self.queues[cfqq].must_dispatch {
                return;
            }
            if !self.slice_used(cfqq, now) {
                if self.busy_queues == 0 || !self.queues[cfqq].sort_list.is_empty() {
                    return;
                }
                self.queues[cfqq].deep = false;
            }
        }
        self.slice_expired(timed_out, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::request::test_support::*;
    use crate::dev::fixed::FixedLatencyDevice;
    use crate::dev::{BlockDevice, IoOp};
    use crate::units::NS_PER_MS;

    /// HZ = 1000 (a jiffy is a millisecond): the tests below were written against CFQ's
    /// millisecond defaults (slice_idle 8 ms, slice_sync 100 ms, fifo_expire_sync 125 ms).
    const HZ_1000: Hz = Hz(1000);
    const SLICE_IDLE_NS: Nanos = 8 * NS_PER_MS;

    const READER: u32 = 20;
    const WRITER: u32 = 10;

    /// A one-slot device (eMMC without command queueing) under CFQ, with a closed-loop reader
    /// that thinks `think_ns` after each completion and stops issuing at `reader_stop_ns`.
    impl Cfq {
        fn new_for_test(traits: QueueTraits) -> Cfq {
            Cfq::new(traits, HZ_1000)
        }
    }

    struct Harness {
        cfq: Cfq,
        device: FixedLatencyDevice,
        in_flight: BTreeMap<u64, Request>,
        /// (time, pid) of every dispatch.
        dispatches: Vec<(Nanos, u32)>,
        /// Reader completions and whether CFQ armed its idle timer right after.
        reader_completions: Vec<(Nanos, Option<Nanos>)>,
        next_id: u64,
    }

    impl Harness {
        fn new(latency_ns: Nanos) -> Harness {
            Harness {
                cfq: Cfq::new_for_test(QueueTraits {
                    nonrot: true,
                    queue_depth: 1,
                }),
                device: FixedLatencyDevice::new(1, latency_ns, 0),
                in_flight: BTreeMap::new(),
                dispatches: Vec::new(),
                reader_completions: Vec::new(),
                next_id: 1,
            }
        }

        fn add(&mut self, now: Nanos, op: IoOp, sector: u64, pid: u32) {
            let mut rq = request(self.next_id, op, sector, 8, pid);
            rq.start_ns = now;
            self.next_id += 1;
            self.cfq.add_request(now, rq);
        }

        fn dispatch(&mut self, now: Nanos) {
            while self.device.in_flight() < self.device.queue_depth() {
                let Some(rq) = self.cfq.dispatch_request(now) else {
                    break;
                };
                self.dispatches.push((now, rq.task.pid));
                self.device.submit(now, rq.dev_request());
                self.in_flight.insert(rq.id, rq);
            }
        }

        /// Runs to `end_ns`; the reader reads sequentially from sector 0.
        fn run(
            &mut self,
            reader_start_ns: Nanos,
            think_ns: Nanos,
            reader_stop_ns: Nanos,
            end_ns: Nanos,
        ) {
            let mut reader_next = Some(reader_start_ns);
            let mut reader_sector = 0;
            let mut now = 0;
            self.dispatch(now);
            loop {
                let next = [self.device.next_event(), self.cfq.next_timer(), reader_next]
                    .into_iter()
                    .flatten()
                    .min();
                let Some(next) = next.filter(|&t| t <= end_ns) else {
                    break;
                };
                now = next;
                let mut done = Vec::new();
                self.device.advance(now, &mut done);
                for completion in done {
                    let rq = self.in_flight.remove(&completion.tag).unwrap();
                    self.cfq.completed_request(now, &rq);
                    if rq.task.pid == READER {
                        self.reader_completions.push((now, self.cfq.next_timer()));
                        if now + think_ns < reader_stop_ns {
                            reader_next = Some(now + think_ns);
                        }
                    }
                }
                if self.cfq.next_timer() == Some(now) {
                    self.cfq.timer_fired(now);
                }
                if reader_next == Some(now) {
                    reader_next = None;
                    self.add(now, IoOp::Read, reader_sector, READER);
                    reader_sector += 8;
                }
                self.dispatch(now);
            }
        }
    }

    #[test]
    fn sync_reader_preempts_an_async_flood_and_cfq_idles_between_its_reads() {
        let mut harness = Harness::new(NS_PER_MS);
        for i in 0..500 {
            harness.add(0, IoOp::Write, 1_000_000 + 64 * i, WRITER);
        }
        let (start, think, stop) = (10 * NS_PER_MS, 2 * NS_PER_MS, 70 * NS_PER_MS);
        harness.run(start, think, stop, 200 * NS_PER_MS);
        let reader: Vec<Nanos> = harness
            .dispatches
            .iter()
            .filter(|&&(_, pid)| pid == READER)
            .map(|&(t, _)| t)
            .collect();
        // The reader's first read waits at most for the async write on the device.
        assert!(
            reader[0] <= start + NS_PER_MS,
            "first read at {}",
            reader[0]
        );
        // While it keeps reading, no async write gets the device: CFQ idles through its think
        // time instead of switching to the async queue.
        let (first, last) = (reader[0], *reader.last().unwrap());
        let writes_between = harness
            .dispatches
            .iter()
            .filter(|&&(t, pid)| pid == WRITER && t > first && t <= last)
            .count();
        assert_eq!(writes_between, 0);
        assert!(reader.len() >= 19, "reader got only {} reads", reader.len());
        // After each of its completions (with the slice not used up) CFQ armed an 8 ms idle timer.
        let armed = harness
            .reader_completions
            .iter()
            .filter(|&&(t, timer)| timer == Some(t + SLICE_IDLE_NS))
            .count();
        assert!(armed >= harness.reader_completions.len() - 1);
        // When the reader stops, the timer expires and the async queue resumes 8 ms later.
        let last_completion = harness.reader_completions.last().unwrap().0;
        let resume = harness
            .dispatches
            .iter()
            .find(|&&(t, pid)| pid == WRITER && t > last)
            .unwrap()
            .0;
        assert_eq!(resume, last_completion + SLICE_IDLE_NS);
    }

    #[test]
    fn without_idling_the_async_queue_interleaves_with_the_reader() {
        // The same workload with slice_idle = 0: writes run during the reader's think time.
        let mut harness = Harness::new(NS_PER_MS);
        harness.cfq.tunables.slice_idle = 0;
        for i in 0..500 {
            harness.add(0, IoOp::Write, 1_000_000 + 64 * i, WRITER);
        }
        harness.run(
            10 * NS_PER_MS,
            2 * NS_PER_MS,
            70 * NS_PER_MS,
            200 * NS_PER_MS,
        );
        let reader: Vec<Nanos> = harness
            .dispatches
            .iter()
            .filter(|&&(_, pid)| pid == READER)
            .map(|&(t, _)| t)
            .collect();
        let writes_between = harness
            .dispatches
            .iter()
            .filter(|&&(t, pid)| pid == WRITER && t > reader[0] && t <= *reader.last().unwrap())
            .count();
        assert!(
            writes_between > 10,
            "only {writes_between} writes interleaved"
        );
    }

    #[test]
    fn two_sync_readers_take_turns_in_time_slices() {
        let mut harness = Harness::new(NS_PER_MS);
        for i in 0..300 {
            harness.add(0, IoOp::Read, 8 * i, 1);
            harness.add(0, IoOp::Read, 10_000_000 + 8 * i, 2);
        }
        harness.run(u64::MAX, 0, 0, 400 * NS_PER_MS);
        let pids: Vec<u32> = harness.dispatches.iter().map(|&(_, pid)| pid).collect();
        // Count runs of consecutive dispatches from the same process.
        let mut runs = Vec::new();
        for pid in pids {
            match runs.last_mut() {
                Some((last, count)) if *last == pid => *count += 1,
                _ => runs.push((pid, 1)),
            }
        }
        // Each run is one slice: about slice_sync (100 ms) of 1 ms requests, from its first
        // completion; with two busy queues low_latency does not shrink it (2 x 100 <= 300 ms).
        assert!(runs.len() >= 3, "runs: {runs:?}");
        for &(_, count) in &runs[..runs.len() - 1] {
            assert!((100..=102).contains(&count), "runs: {runs:?}");
        }
        assert_ne!(runs[0].0, runs[1].0);
    }

    #[test]
    fn a_queue_is_served_in_sector_order_until_its_fifo_head_expires() {
        // 10 ms per request: a sweep of 50 requests takes 500 ms, longer than fifo_expire_sync.
        let mut harness = Harness::new(10 * NS_PER_MS);
        let far = 10_000_000;
        harness.add(0, IoOp::Read, far, READER);
        for i in (0..50).rev() {
            harness.add(0, IoOp::Read, 64 * i, READER);
        }
        let mut order = Vec::new();
        harness.dispatch(0);
        while let Some(now) = harness.device.next_event() {
            assert!(order.len() <= 51, "more completions than requests");
            let mut done = Vec::new();
            harness.device.advance(now, &mut done);
            for completion in done {
                let rq = harness.in_flight.remove(&completion.tag).unwrap();
                order.push((now, rq.sector));
                harness.cfq.completed_request(now, &rq);
            }
            if harness.cfq.next_timer() == Some(now) {
                harness.cfq.timer_fired(now);
            }
            harness.dispatch(now);
        }
        assert_eq!(order.len(), 51);
        let far_position = order.iter().position(|&(_, s)| s == far).unwrap();
        // Ascending sweep from the head before the expired request jumps the queue.
        assert!(order[..far_position].windows(2).all(|w| w[0].1 < w[1].1));
        let served_at = order[far_position].0;
        // The FIFO is checked once per slice: the request expired at 125 ms and is taken at the
        // first slice start after that, long before the sweep would reach it (510 ms).
        assert!(served_at > 125 * NS_PER_MS, "served at {served_at}");
        assert!(served_at < 300 * NS_PER_MS, "served at {served_at}");
    }

    #[test]
    fn a_sync_bio_never_merges_into_an_async_request() {
        let mut cfq = Cfq::new_for_test(QueueTraits {
            nonrot: true,
            queue_depth: 1,
        });
        cfq.add_request(0, request(1, IoOp::Write, 0, 8, WRITER));
        let mut sync_write = bio(2, IoOp::Write, 8, 8, WRITER);
        sync_write.flags.sync = true;
        assert_eq!(cfq.merge_bio(0, &sync_write, 1024), None);
        // The same process's async bio merges into its (shared async queue's) request.
        let async_write = bio(3, IoOp::Write, 8, 8, WRITER);
        assert_eq!(
            cfq.merge_bio(0, &async_write, 1024),
            Some((1, MergeKind::Back))
        );
        // Another process's async bio of the same priority shares the async queue: it merges.
        let other = bio(4, IoOp::Write, 16, 8, READER);
        assert_eq!(cfq.merge_bio(0, &other, 1024), Some((1, MergeKind::Back)));
    }

    /// CFQ on a one-slot flash device with the flusher's async queue holding 50 writes
    /// (ids 1..=50, sectors 0, 64, ..., 3136), all queued at time 0.
    fn cfq_with_flusher_writes() -> Cfq {
        let mut cfq = Cfq::new_for_test(QueueTraits {
            nonrot: true,
            queue_depth: 1,
        });
        for i in 0..50u64 {
            let mut rq = request(i + 1, IoOp::Write, 64 * i, 8, WRITER);
            rq.flags.sync = false;
            cfq.add_request(0, rq);
        }
        cfq
    }

    #[test]
    fn a_boosted_async_request_is_dispatched_before_the_queues_others() {
        // QASIO §5.3: the flusher's async queue holds 50 writes in sector order; a task blocks on
        // the last one (a metadata buffer far away). Boosted, it is the next dispatched; a sync
        // request and an unknown id are not boosted.
        let mut cfq = cfq_with_flusher_writes();
        let mut sync = request(100, IoOp::Read, 1 << 30, 8, READER);
        sync.flags.sync = true;
        let first = cfq.dispatch_request(0).expect("work").id;
        assert_eq!(first, 1, "sector order without a boost");
        assert!(cfq.boost(0, 50));
        assert!(!cfq.boost(0, 50), "already on the QASIO list");
        assert!(!cfq.boost(0, 999), "not queued");
        assert_eq!(cfq.dispatch_request(0).expect("work").id, 50);
        // cfq_dispatch_insert sets next_rq from the dispatched request (cfq_find_next_rq): the
        // head moved to the boosted one's sector, so the nearest request there comes next.
        assert_eq!(cfq.dispatch_request(0).expect("work").id, 49);
        cfq.add_request(0, sync);
        assert!(!cfq.boost(0, 100), "a sync request needs no boost");
    }

    #[test]
    fn a_request_dispatched_now_makes_its_queue_active_and_cfq_idles_for_its_next() {
        // FastTrack's I/O dispatcher through CFQ (`id_path = "elevator"`): the flusher's async
        // queue is being served; a reader's request dispatched at once makes the reader's queue
        // the active one. When the read completes CFQ idles for the reader's next request
        // instead of going back to the writes. Past the elevator (`bypass`) CFQ never sees the
        // read and serves the writes.
        let mut cfq = cfq_with_flusher_writes();
        let write = cfq.dispatch_request(0).expect("the writes are served");
        cfq.completed_request(NS_PER_MS, &write);
        let mut read = request(100, IoOp::Read, 1 << 30, 8, READER);
        read.flags.sync = true;
        cfq.add_request(NS_PER_MS, read);
        let read = cfq.dispatch_now(NS_PER_MS, 100).expect("queued in CFQ");
        assert_eq!(read.id, 100);
        assert!(
            cfq.dispatch_now(NS_PER_MS, 100).is_none(),
            "already dispatched"
        );
        assert!(cfq.dispatch_now(NS_PER_MS, 999).is_none(), "never queued");
        cfq.completed_request(2 * NS_PER_MS, &read);
        assert!(
            cfq.dispatch_request(2 * NS_PER_MS).is_none(),
            "idling for the reader, not serving the writes"
        );
        let idle_end = cfq.next_timer().expect("the idle timer is armed");
        assert!(idle_end > 2 * NS_PER_MS && idle_end <= 2 * NS_PER_MS + SLICE_IDLE_NS + NS_PER_MS);
        // The reader's next request within the idle window is served at once.
        let mut next = request(101, IoOp::Read, (1 << 30) + 8, 8, READER);
        next.flags.sync = true;
        cfq.add_request(3 * NS_PER_MS, next);
        assert_eq!(cfq.dispatch_request(3 * NS_PER_MS).expect("work").id, 101);
    }

    /// A CFQ whose active queue is a reader's: its sync read (id 100) added and dispatched.
    fn cfq_serving_a_reader() -> (Cfq, Request) {
        let mut cfq = Cfq::new_for_test(QueueTraits {
            nonrot: true,
            queue_depth: 1,
        });
        let mut read = request(100, IoOp::Read, 1 << 30, 8, READER);
        read.flags.sync = true;
        cfq.add_request(0, read);
        let read = cfq.dispatch_request(0).expect("work");
        assert_eq!(read.id, 100);
        (cfq, read)
    }

    #[test]
    fn a_foreground_write_dispatched_now_leaves_the_async_queue_unserved() {
        // FastTrack's I/O dispatcher through CFQ: a reader's sync queue is active; a page of the
        // foreground app sits among the flusher's 50 writes in the shared async queue. Taken
        // out at once, it does not hand the async queue a slice: when the read completes CFQ
        // idles for the reader and the background writes keep waiting.
        let (mut cfq, read) = cfq_serving_a_reader();
        for i in 0..50u64 {
            let mut rq = request(i + 1, IoOp::Write, 64 * i, 8, WRITER);
            rq.flags.sync = false;
            cfq.add_request(0, rq);
        }
        assert_eq!(cfq.dispatch_now(0, 25).expect("queued").id, 25);
        cfq.completed_request(NS_PER_MS, &read);
        assert!(
            cfq.dispatch_request(NS_PER_MS).is_none(),
            "idling for the reader, not serving the background writes"
        );
        // The other 49 are served once the idle window ends.
        let idle_end = cfq.next_timer().expect("the idle timer is armed");
        cfq.timer_fired(idle_end);
        assert_ne!(cfq.dispatch_request(idle_end).expect("the writes").id, 25);
    }

    #[test]
    fn an_async_queue_emptied_by_a_request_dispatched_now_leaves_the_service_tree() {
        // The async queue holds only the foreground app's page: taken out, the queue is empty
        // and must not be chosen later (cfq_dispatch_request would find nothing to dispatch).
        let (mut cfq, read) = cfq_serving_a_reader();
        let mut write = request(1, IoOp::Write, 64, 8, 100);
        write.flags.sync = false;
        cfq.add_request(0, write);
        assert_eq!(cfq.busy_queues, 2);
        let write = cfq.dispatch_now(0, 1).expect("queued");
        assert_eq!(
            cfq.busy_queues, 1,
            "the emptied async queue left the service tree"
        );
        cfq.completed_request(NS_PER_MS, &write);
        cfq.completed_request(NS_PER_MS, &read);
        let idle_end = cfq.next_timer().expect("idling for the reader");
        cfq.timer_fired(idle_end);
        assert!(cfq.dispatch_request(idle_end).is_none(), "nothing queued");
        assert_eq!(cfq.busy_queues, 0);
    }

    #[test]
    fn an_async_queue_without_qasios_yields_to_one_with_a_qasio() {
        // QASIO §5.3: the flusher's writes (BE4 async queue) and the journal thread's discards
        // (BE3, journal_ioprio: another async queue, `cfq_async_queue_prio`). Whichever async
        // queue is being served, a boost in the other one is dispatched next.
        let mut cfq = cfq_with_flusher_writes();
        for i in 0..2u64 {
            let mut rq = request(101 + i, IoOp::Discard, (1 << 20) + 64 * i, 8, 20);
            rq.flags.sync = false;
            rq.ioprio = IoPrio::new(IoPrioClass::Be, 3);
            cfq.add_request(0, rq);
        }
        let first = cfq.dispatch_request(0).expect("work").id;
        let other = if first <= 50 { 102 } else { 50 };
        assert!(cfq.boost(0, other));
        assert_eq!(cfq.dispatch_request(0).expect("work").id, other);
    }

    #[test]
    fn async_queue_yields_after_its_request_budget() {
        // cfq_prio_to_maxrq at level 4 = 2 * slice_async_rq * (8 - 4) = 16 requests.
        let cfq = Cfq::new_for_test(QueueTraits {
            nonrot: true,
            queue_depth: 1,
        });
        let mut cfq = cfq;
        let id = cfq.get_queue(false, IoPrio::NONE, 0, 1, 0);
        assert_eq!(cfq.prio_to_maxrq(id), 16);
        let mut harness = Harness::new(NS_PER_MS);
        for i in 0..100 {
            harness.add(0, IoOp::Write, 64 * i, WRITER);
        }
        // A second, higher-priority async queue makes busy_queues > 1.
        for i in 0..100 {
            let mut rq = request(10_000 + i, IoOp::Write, 5_000_000 + 64 * i, 8, 11);
            rq.ioprio = IoPrio::new(IoPrioClass::Be, 0);
            harness.cfq.add_request(0, rq);
        }
        harness.run(u64::MAX, 0, 0, 60 * NS_PER_MS);
        let first_run = harness
            .dispatches
            .iter()
            .take_while(|&&(_, pid)| pid == harness.dispatches[0].1)
            .count();
        let expected = if harness.dispatches[0].1 == WRITER {
            16
        } else {
            32
        };
        assert_eq!(first_run, expected);
    }

    #[test]
    fn a_queue_whose_idle_window_closes_stays_on_its_tree_until_it_is_sorted_again() {
        // cfq_update_idle_window only flips the flag; cfqq->service_tree changes at the next
        // cfq_service_tree_add. A sync reader of 4 KiB requests on flash starts with an idle
        // window (SYNC tree) and loses it when 5 of its requests were "seeks" (< 64 sectors).
        let mut cfq = Cfq::new_for_test(QueueTraits {
            nonrot: true,
            queue_depth: 1,
        });
        let mut now = 0;
        for id in 1..=5 {
            cfq.add_request(now, request(id, IoOp::Read, 8 * id, 8, READER));
            let rq = cfq
                .dispatch_request(now)
                .expect("the reader's queue is served");
            now += NS_PER_MS;
            cfq.completed_request(now, &rq);
            if id < 5 {
                // Idling on the empty queue (no hw_tag): it stays active and on its tree.
                assert!(cfq.next_timer().is_some());
            }
        }
        let reader = cfq.sync_queues[&READER];
        assert!(!cfq.queues[reader].idle_window);
        assert_eq!(cfq.queues[reader].wl_type(), WlType::SyncNoidle);
        // The queue's 5th request arrived while it was active and on the SYNC tree: it is
        // still there, and the SYNC_NOIDLE tree is empty.
        assert_eq!(cfq.tree_on(reader), (WlClass::Be, WlType::Sync));
        assert_eq!(cfq.tree(WlClass::Be, WlType::SyncNoidle).count(), 0);
        // Once it has a request queued and its slice expires, it is re-sorted onto the tree
        // of its new type.
        cfq.add_request(now, request(6, IoOp::Read, 48, 8, READER));
        cfq.slice_expired(false, now);
        assert_eq!(cfq.tree_on(reader), (WlClass::Be, WlType::SyncNoidle));
        assert_eq!(cfq.tree(WlClass::Be, WlType::Sync).count(), 0);
    }

    #[test]
    fn on_queueing_flash_a_sync_reader_loses_the_device_after_each_read_to_a_deep_sync_writer() {
        // fg-read-bg-write in miniature: a device with command queueing (hw_tag) and no seek
        // penalty, a closed-loop reader with no think time, and a sync (O_DIRECT) writer keeping
        // 32 sequential 128 KiB writes outstanding. CFQ never idles here (cfq_arm_slice_timer
        // returns at once), so when the reader's only request completes its queue is empty and
        // the queue run that follows the completion expires it before the reader can submit
        // again. Its next request does not preempt the writer once the writer has requests
        // waiting in CFQ (both are sync; `cfq_should_preempt` has no rule for that), so it waits
        // for the writer's slices: two of them, as the SYNC workload slice (150 ms with two busy
        // queues) is only checked when a queue expires.
        let mut cfq = Cfq::new_for_test(QueueTraits {
            nonrot: true,
            queue_depth: 32,
        });
        let mut device = FixedLatencyDevice::new(32, NS_PER_MS, 0);
        let mut in_flight: BTreeMap<u64, Request> = BTreeMap::new();
        let (mut next_id, mut writer_sector, mut writer_outstanding) = (1, 1 << 24, 0);
        let mut reader_dispatches: Vec<Nanos> = Vec::new();
        // For each of the reader's requests after the first: whether it preempted the writer.
        let mut reader_preempted: Vec<bool> = Vec::new();
        let mut writer_dispatches = 0u32;
        let mut reader_sector = 0;
        let mut now = 0;
        cfq.add_request(now, request(next_id, IoOp::Read, reader_sector, 8, READER));
        next_id += 1;
        loop {
            while writer_outstanding < 32 {
                let mut rq = request(next_id, IoOp::Write, writer_sector, 256, WRITER);
                rq.flags.sync = true;
                rq.start_ns = now;
                cfq.add_request(now, rq);
                next_id += 1;
                writer_sector += 256;
                writer_outstanding += 1;
            }
            for pid in run_queue(&mut cfq, &mut device, &mut in_flight, now) {
                if pid == READER {
                    reader_dispatches.push(now);
                } else {
                    writer_dispatches += 1;
                }
            }
            assert_eq!(cfq.next_timer(), None, "CFQ idled on a queueing SSD");
            let Some(next) = device.next_event().filter(|&t| t <= NS_PER_MS * 1_000) else {
                break;
            };
            now = next;
            let mut done = Vec::new();
            device.advance(now, &mut done);
            let mut reader_done = false;
            for completion in done {
                let rq = in_flight.remove(&completion.tag).unwrap();
                cfq.completed_request(now, &rq);
                if rq.task.pid == READER {
                    reader_done = true;
                } else {
                    writer_outstanding -= 1;
                }
            }
            if reader_done {
                // The driver runs the queue in the completion path, before the woken reader
                // is back with its next request.
                let reader = cfq.sync_queues[&READER];
                let writes_before = writer_dispatches;
                let pids = run_queue(&mut cfq, &mut device, &mut in_flight, now);
                assert!(pids.iter().all(|&pid| pid == WRITER), "{pids:?}");
                writer_dispatches += pids.len() as u32;
                assert!(writer_dispatches > writes_before);
                assert_ne!(cfq.active_queue, Some(reader), "the reader kept its slice");
                reader_sector += 8 * 1024;
                cfq.add_request(now, request(next_id, IoOp::Read, reader_sector, 8, READER));
                next_id += 1;
                let writer_queued = !cfq.queues[cfq.sync_queues[&WRITER]].sort_list.is_empty();
                // A preempted active queue is expired: no queue is active until the next run.
                reader_preempted.push(cfq.active_queue.is_none());
                if writer_queued {
                    assert!(
                        cfq.active_queue.is_some(),
                        "the reader preempted a busy writer"
                    );
                }
            }
        }
        // At the start the writer has all its requests on the device and an empty queue, so
        // the reader preempts it ("an idle queue should not be idle now"). As soon as the
        // writer's requests wait in CFQ (the quantum limits it while the reader is busy), no read
        // preempts any more and each waits two sync slices of the writer.
        let warm_up = reader_preempted.iter().take_while(|&&p| p).count();
        assert!(warm_up < 8, "preemptions: {reader_preempted:?}");
        assert!(reader_preempted[warm_up..].iter().all(|&p| !p));
        let gaps: Vec<Nanos> = reader_dispatches[warm_up..]
            .windows(2)
            .map(|w| w[1] - w[0])
            .collect();
        assert!(gaps.len() >= 3, "reads at {reader_dispatches:?}");
        assert!(
            gaps.iter().all(|&gap| gap >= 200 * NS_PER_MS),
            "gaps between reads: {gaps:?}"
        );
        assert!(writer_dispatches > 1_000);
    }

    /// A queue run in miniature: dispatch to the device while it has room, then let CFQ select
    /// its next queue with the device full (`dispatch_blocked`). Returns the dispatched pids.
    fn run_queue(
        cfq: &mut Cfq,
        device: &mut FixedLatencyDevice,
        in_flight: &mut BTreeMap<u64, Request>,
        now: Nanos,
    ) -> Vec<u32> {
        let mut pids = Vec::new();
        while device.in_flight() < device.queue_depth() {
            let Some(rq) = cfq.dispatch_request(now) else {
                break;
            };
            pids.push(rq.task.pid);
            device.submit(now, rq.dev_request());
            in_flight.insert(rq.id, rq);
        }
        if device.in_flight() == device.queue_depth() {
            cfq.dispatch_blocked(now);
        }
        pids
    }

    #[test]
    fn a_sync_write_preempts_the_async_queue_that_took_over_from_an_empty_reader() {
        // bg-write-fg-read in miniature, on a one-slot flash device (no hw_tag, so CFQ may idle):
        // a flusher keeps async writes coming (it is woken from get_request at each completion),
        // a reader thinks 20 ms between 4 KiB reads (too long to idle for, and seeky), and a
        // messenger issues one sync write. Each read preempts the async queue (a sync request
        // over an async queue). Once the read is on the device the reader's queue is empty and
        // may not idle; the queue run right after (device busy, `dispatch_blocked`) expires it
        // and makes the async queue active, so the messenger's sync write, arriving while the
        // read is on the device, preempts the async queue and is served next. (Without that
        // queue run no queue is active in that window: the flusher's next write preempts the
        // empty reader instead and goes to the front of the ASYNC tree, a second (HZ) before its
        // own key, the messenger's write preempts nothing, and the ASYNC tree's key wins
        // `cfq_choose_wl_type` for most of a second.)
        const MESSENGER: u32 = 30;
        let mut cfq = Cfq::new_for_test(QueueTraits {
            nonrot: true,
            queue_depth: 1,
        });
        let mut device = FixedLatencyDevice::new(1, NS_PER_MS, 0);
        let mut in_flight: BTreeMap<u64, Request> = BTreeMap::new();
        let (mut next_id, mut async_sector) = (1, 1 << 24);
        let (mut reader_sector, mut reader_next) = (0, Some(0));
        let messenger_at = 500 * NS_PER_MS;
        let mut messenger_next = Some(messenger_at);
        let mut messenger_dispatched = None;
        let mut reads = 0;
        for _ in 0..64 {
            cfq.add_request(0, request(next_id, IoOp::Write, async_sector, 8, WRITER));
            next_id += 1;
            async_sector += 8;
        }
        let mut now = 0;
        loop {
            if reader_next == Some(now) {
                reader_next = None;
                cfq.add_request(now, request(next_id, IoOp::Read, reader_sector, 8, READER));
                next_id += 1;
                reader_sector += 8 * 1024;
            }
            if messenger_next == Some(now) {
                messenger_next = None;
                let mut rq = request(next_id, IoOp::Write, 1 << 30, 8, MESSENGER);
                rq.flags.sync = true;
                cfq.add_request(now, rq);
                next_id += 1;
            }
            if run_queue(&mut cfq, &mut device, &mut in_flight, now).contains(&MESSENGER) {
                messenger_dispatched = Some(now);
            }
            let next = [
                device.next_event(),
                cfq.next_timer(),
                reader_next,
                messenger_next,
            ]
            .into_iter()
            .flatten()
            .min();
            let Some(next) = next.filter(|&t| t <= 3_000 * NS_PER_MS) else {
                break;
            };
            now = next;
            let mut done = Vec::new();
            device.advance(now, &mut done);
            let mut async_done = 0;
            for completion in done {
                let rq = in_flight.remove(&completion.tag).unwrap();
                cfq.completed_request(now, &rq);
                match rq.task.pid {
                    READER => {
                        reads += 1;
                        reader_next = Some(now + 20 * NS_PER_MS);
                    }
                    WRITER => async_done += 1,
                    _ => {}
                }
            }
            if cfq.next_timer().is_some_and(|t| t <= now) {
                cfq.timer_fired(now);
            }
            // The queue runs in the completion path, then the flusher, woken from
            // get_request, queues its next write.
            if run_queue(&mut cfq, &mut device, &mut in_flight, now).contains(&MESSENGER) {
                messenger_dispatched = Some(now);
            }
            for _ in 0..async_done {
                cfq.add_request(now, request(next_id, IoOp::Write, async_sector, 8, WRITER));
                next_id += 1;
                async_sector += 8;
            }
        }
        let waited = messenger_dispatched.expect("the messenger's write never ran") - messenger_at;
        assert!(reads > 50, "only {reads} reads");
        // At most the read or write on the device when it arrived, plus the read queued then.
        assert!(
            waited <= 2 * NS_PER_MS,
            "the messenger's write waited {waited} ns"
        );
    }

    #[test]
    fn a_group_that_empties_forgets_its_workload() {
        // cfq_group_notify_queue_del sets saved_wl_slice = 0 when the group's last queue leaves,
        // so cfq_choose_cfqg starts a new workload: the lowest key wins, not the old type.
        let mut cfq = Cfq::new_for_test(QueueTraits {
            nonrot: true,
            queue_depth: 1,
        });
        // A sync reader alone: SYNC workload with a 300 ms slice.
        cfq.add_request(0, request(1, IoOp::Read, 0, 8, READER));
        let read = cfq.dispatch_request(0).unwrap();
        cfq.completed_request(NS_PER_MS, &read);
        // Its idle window passes without a request: the queue expires and leaves the trees.
        let timer = cfq.next_timer().expect("idling on the reader");
        cfq.timer_fired(timer);
        assert_eq!(cfq.nr_cfqq(), 0);
        // An async write is keyed a slice offset ahead of an empty group (nr_cfqq - 1 = -1);
        // a second sync reader lands on the SYNC tree behind it.
        let now = timer + NS_PER_MS;
        cfq.add_request(now, request(2, IoOp::Write, 1 << 20, 8, WRITER));
        cfq.add_request(now, request(3, IoOp::Read, 1 << 21, 8, READER + 1));
        let first = cfq.dispatch_request(now).unwrap();
        assert_eq!(first.id, 2, "the old SYNC workload was kept");
    }

    #[test]
    fn defaults_are_jiffies_with_cfq_init_raising_zero_to_one() {
        // HZ / 125 and HZ / 25 are 0 below HZ = 125 / 25 with integer division; cfq_init raises
        // them to 1 jiffy. At HZ = 100: slice_idle 1 jiffy (10 ms), slice_async 4, slice_sync
        // 10, fifo_expire {25, 12}, target_latency 30.
        let hz100 = CfqTunables::defaults(Hz(100));
        assert_eq!(hz100.slice_idle, 1);
        assert_eq!(hz100.slice, [4, 10]);
        assert_eq!(hz100.fifo_expire, [25, 12]);
        assert_eq!(hz100.target_latency, 30);
        assert_eq!(hz100.group_idle, 0, "no CONFIG_CFQ_GROUP_IOSCHED");
        assert_eq!(CfqTunables::defaults(Hz(200)).slice_idle, 1);
        assert_eq!(CfqTunables::defaults(Hz(1000)).slice_idle, 8);
        assert_eq!(
            CfqTunables::defaults(Hz(100)).slice_idle,
            Hz(100).over(125).max(1)
        );
    }

    /// A one-slot flash device (no `hw_tag`), CFQ by name with the default tick rate (HZ = 100).
    fn cfq_at_default_hz() -> Box<dyn Elevator> {
        super::super::new_elevator(
            "cfq",
            QueueTraits {
                nonrot: true,
                queue_depth: 1,
            },
        )
        .unwrap()
    }

    #[test]
    fn the_idle_timer_is_one_jiffy_and_fires_on_a_tick() {
        // A sync reader's request completes at 13 ms (jiffy 1). cfq_arm_slice_timer arms
        // mod_timer(jiffies + slice_idle) = jiffy 2: the timer fires at 20 ms, not 13 + 8 ms.
        let mut cfq = cfq_at_default_hz();
        cfq.add_request(0, request(1, IoOp::Read, 0, 64, READER));
        let rq = cfq.dispatch_request(0).unwrap();
        cfq.completed_request(13 * NS_PER_MS, &rq);
        assert_eq!(cfq.next_timer(), Some(20 * NS_PER_MS));
    }

    #[test]
    fn think_time_is_counted_in_whole_jiffies() {
        // A reader thinks 9 ms between 32 KiB reads (1 ms each): every gap spans one tick, so
        // at HZ = 100 each sample is 1 jiffy and the mean settles at slice_idle (1 jiffy, once
        // the first samples' rounding bias of +128 / samples has decayed): CFQ keeps idling for
        // it. Measured in nanoseconds against an 8 ms slice_idle, 9 ms is a big think time and
        // CFQ would stop idling.
        let mut cfq = cfq_at_default_hz();
        let mut now = 0;
        for id in 1..=120u64 {
            cfq.add_request(now, request(id, IoOp::Read, 64 * id, 64, READER));
            let rq = cfq.dispatch_request(now).expect("the reader is served");
            now += NS_PER_MS;
            cfq.completed_request(now, &rq);
            assert!(
                id < 20 || cfq.next_timer().is_some(),
                "CFQ stopped idling for the reader after read {id}"
            );
            now += 9 * NS_PER_MS;
        }
    }

    #[test]
    fn write_sync_requests_carry_noidle_and_cfq_does_not_idle_for_their_queue() {
        // Two fsync writers, each with one WRITE_SYNC (REQ_SYNC | REQ_NOIDLE) write queued, on
        // a one-slot flash device. When the first completes, its queue has no idle window
        // (`cfq_update_idle_window`: next_rq has REQ_NOIDLE) and shares its tree with the other
        // writer, so CFQ does not idle on it: the second write is dispatched at once. Without
        // REQ_NOIDLE CFQ would idle a slice_idle on the first writer's empty queue.
        let mut cfq = cfq_at_default_hz();
        for (id, pid) in [(1, WRITER), (2, WRITER + 1)] {
            let mut rq = request(id, IoOp::Write, 1_000 * id, 8, pid);
            rq.flags.sync = true;
            rq.flags.noidle = true;
            cfq.add_request(0, rq);
        }
        let first = cfq.dispatch_request(0).unwrap();
        cfq.completed_request(NS_PER_MS, &first);
        assert_eq!(cfq.next_timer(), None, "CFQ idled on an fsync writer");
        let second = cfq
            .dispatch_request(NS_PER_MS)
            .expect("the other writer is served");
        assert_ne!(second.task.pid, first.task.pid);
    }

    #[test]
    fn cfq_stops_idling_for_a_reader_that_thinks_longer_than_slice_idle() {
        // A reader thinks 30 ms (3 jiffies at HZ = 100) between reads: once its think time is
        // sampled enough (sample_valid: more than 80, after 3 requests), its mean exceeds
        // slice_idle (1 jiffy): the idle window closes and, being alone on its tree with a big
        // tree think time too, CFQ stops idling for it.
        let mut cfq = cfq_at_default_hz();
        let mut now = 0;
        let mut armed = Vec::new();
        for id in 1..=10u64 {
            cfq.add_request(now, request(id, IoOp::Read, 64 * id, 64, READER));
            let rq = cfq.dispatch_request(now).expect("the reader is served");
            now += NS_PER_MS;
            cfq.completed_request(now, &rq);
            armed.push(cfq.next_timer().is_some());
            if let Some(timer) = cfq.next_timer() {
                cfq.timer_fired(timer);
            }
            now += 30 * NS_PER_MS;
        }
        // Its third request closes the window; after its queue expired it is re-sorted onto
        // the SYNC_NOIDLE tree, whose own think-time samples (cfq_should_idle's "last queue on
        // its tree" rule) need three requests to count too.
        assert_eq!(
            armed,
            vec![true, true, false, false, false, false, true, true, true, false]
        );
    }

    #[test]
    fn choose_req_weighs_back_seeks_by_the_penalty_within_back_seek_max() {
        // cfq_choose_req from head position 100_000: a backward seek counts twice
        // (back_seek_penalty) and only within back_seek_max (16 MiB = 32768 sectors).
        let mut cfq = Cfq::new_for_test(QueueTraits {
            nonrot: true,
            queue_depth: 1,
        });
        let head = 100_000;
        for (id, sector) in [
            (1, head + 100),
            (2, head - 60),
            (3, head - 1_000),
            (4, head + 5_000),
        ] {
            cfq.add_request(0, request(id, IoOp::Read, sector, 8, READER));
        }
        cfq.add_request(0, request(5, IoOp::Read, head - 40_000, 8, READER));
        cfq.add_request(0, request(6, IoOp::Read, head + 50_000, 8, READER));
        // 60 back = 120 > 100 forward.
        assert_eq!(cfq.choose_req(Some(1), Some(2), head), Some(1));
        // 1000 back = 2000 < 5000 forward.
        assert_eq!(cfq.choose_req(Some(4), Some(3), head), Some(3));
        // 40000 back is beyond back_seek_max: any forward request wins.
        assert_eq!(cfq.choose_req(Some(5), Some(6), head), Some(6));
    }

    #[test]
    fn a_small_request_on_an_idling_queue_waits_for_merges_a_large_one_cancels_the_idle_timer() {
        // cfq_rq_enqueued on the active queue while CFQ idles on it: a request larger than a
        // page (or another busy queue) cancels the idle timer at once; a single page with no
        // other queue busy only marks the queue must_dispatch and leaves the timer running.
        let mut cfq = Cfq::new_for_test(QueueTraits {
            nonrot: true,
            queue_depth: 1,
        });
        cfq.add_request(0, request(1, IoOp::Read, 0, 64, READER));
        let rq = cfq.dispatch_request(0).unwrap();
        cfq.completed_request(NS_PER_MS, &rq);
        assert!(cfq.idle_slice_timer.is_some());
        cfq.add_request(2 * NS_PER_MS, request(2, IoOp::Read, 64, 8, READER));
        let reader = cfq.sync_queues[&READER];
        assert!(cfq.idle_slice_timer.is_some() && cfq.queues[reader].must_dispatch);
        let rq = cfq.dispatch_request(2 * NS_PER_MS).unwrap();
        cfq.completed_request(3 * NS_PER_MS, &rq);
        assert!(cfq.idle_slice_timer.is_some());
        cfq.add_request(4 * NS_PER_MS, request(3, IoOp::Read, 72, 64, READER));
        assert!(cfq.idle_slice_timer.is_none() && !cfq.queues[reader].wait_request);
    }
}

/// The block layer's checks of CFQ's counters can fail: each broken on purpose is found.
#[cfg(test)]
mod check_tests {
    use super::*;
    use crate::block::request::test_support::request;
    use crate::dev::IoOp;

    /// Breaks one counter of the scheduler.
    type Break = fn(&mut Cfq);

    /// CFQ with two processes' sync reads and one async write queued, one read dispatched.
    fn cfq_with_a_dispatched_read() -> (Cfq, Request) {
        let traits = QueueTraits {
            nonrot: true,
            queue_depth: 1,
        };
        let mut cfq = Cfq::new(traits, Hz(100));
        cfq.add_request(0, request(1, IoOp::Read, 0, 8, 1));
        cfq.add_request(0, request(2, IoOp::Read, 1000, 8, 2));
        cfq.add_request(0, request(3, IoOp::Write, 5000, 8, 3));
        let dispatched = cfq.dispatch_request(0).expect("a read");
        cfq.check(&[&dispatched]).expect("consistent");
        (cfq, dispatched)
    }

    #[test]
    fn cfq_counters_that_drift_from_its_queues_are_found() {
        let breaks: [(&str, Break); 5] = [
            ("cfqd->rq_in_driver", |cfq| cfq.rq_in_driver += 1),
            ("cfqd->rq_queued", |cfq| cfq.rq_queued -= 1),
            ("cfqd->busy_queues", |cfq| cfq.busy_queues += 1),
            ("prio_pending", |cfq| cfq.queues[1].prio_pending += 1),
            ("dispatched", |cfq| cfq.queues[0].dispatched += 1),
        ];
        for (name, break_it) in breaks {
            let (mut cfq, dispatched) = cfq_with_a_dispatched_read();
            break_it(&mut cfq);
            let what = cfq.check(&[&dispatched]).expect_err(name);
            assert!(what.contains(name), "{name}: {what}");
        }
    }
}
