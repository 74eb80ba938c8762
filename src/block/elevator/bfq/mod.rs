//! BFQ, the Budget Fair Queueing scheduler of block/bfq-iosched.c, block/bfq-wf2q.c and
//! block/bfq-cgroup.c (current mainline), with Documentation/block/bfq-iosched.rst's defaults.
//! One elevator, one module per concern:
//!
//! | module | concern | kernel functions |
//! |---|---|---|
//! | [`queue`] | per-process sync queues, per-(group, class, level) async queues, think time, seekiness, request order | `bfq_get_queue`, `bfq_init_bfqq`, `bfq_update_io_thinktime`, `bfq_choose_req` |
//! | [`wf2q`] | B-WF2Q+ entities, service trees, virtual time, groups | bfq-wf2q.c |
//! | [`budget`] | budgets, expiration reasons, budget timeout, peak rate | `bfq_bfqq_expire`, `__bfq_bfqq_recalc_budget`, `bfq_update_peak_rate` |
//! | [`idle`] | `slice_idle` and when it is needed | `bfq_better_to_idle`, `bfq_arm_slice_timer` |
//! | [`wr`] | `low_latency` weight raising: interactive x30, soft real-time x3000 | `bfq_update_bfqq_wr_on_rq_arrival`, `bfq_update_wr_data` |
//! | [`burst`] | large-burst detection | `bfq_handle_burst` |
//! | [`inject`] | waker detection and I/O injection | `bfq_check_waker`, `bfq_choose_bfqq_for_injection` |
//! | [`depth`] | tag depth limits for async I/O and sync writes | `bfq_limit_depth`, `bfq_update_depths` |
//! | [`merge`] | queue merging: cooperators, stable merges, splits | `bfq_setup_cooperator`, `bfq_merge_bfqqs`, `bfq_do_or_sched_stable_merge`, `bfq_split_bfqq` |
//!
//! This file holds `struct bfq_data`, the request paths (`bfq_insert_request`,
//! `bfq_add_request`, `bfq_remove_request`, `bfq_dispatch_request`, `bfq_select_queue`,
//! `bfq_finish_requeue_request`, `bfq_completed_request`, the idle slice timer) and the
//! elevator interface.
//!
//! Groups: a request's cgroup (`rq->bio->bi_blkg`) is its group; the group's entity competes
//! in the root's service trees with the root's own queues at its `io.bfq.weight` (default
//! 100), as a queue does at its ioprio weight (BE4 = 40): `bfq_bio_bfqg`,
//! `bfq_group_set_weight`. BFQ takes a queue's class and weight from the process's
//! `ioc->ioprio` (`bfq_check_ioprio_change`), not from the request's priority, so blk-ioprio's
//! `io.prio.class` does not move a queue between BFQ's classes.
//!
//! QASIO boost (seed 000 §5.3; `elv_boost` was the paper's patch to CFQ, BFQ has none). §5.3's
//! rule is "higher than all the (true) asynchronous I/Os, but not more than any other
//! synchronous I/Os"; BFQ's own means of serving a request out of its queue's turn is
//! injection, so the boost is built from it:
//! - the queue of a boosted (async) request keeps a QASIO list, and whenever the queue is
//!   served (in service or injected) the list's head goes before its `next_rq` (CFQ's QASIO
//!   list, §5.3);
//! - when the queue in service is asynchronous (true async I/O: the flusher's writeback, a
//!   background app's buffered writes) and has no QASIO of its own, a busy queue that has one
//!   is served first, one request per dispatch, charged to that queue's budget as an injected
//!   request is (`bfq_choose_bfqq_for_injection` charges the injected queue): §5.3's "an async
//!   queue whose QASIO list is empty yields to one whose list is not", without expiring the
//!   in-service queue (its budget and WF2Q+ timestamps stay as they are);
//! - when the queue in service is synchronous it keeps the device: its own requests go first
//!   (not above sync I/O). While it is plugged (idling for its next request, or waiting for
//!   its in-flight ones), a QASIO is injected before anything else but the process's own async
//!   I/O (`bfq_select_queue`'s injection order: own async queue, then QASIOs, then waker,
//!   woken, any queue), and without the inject limit, as the waker and woken queues are
//!   injected without it: a task is blocked on the QASIO, as the in-service process is on its
//!   waker.
//!
//! The queue is not weight-raised for its QASIOs: raising the flusher's async queue would
//! raise every request in it, not only the one a task waits on.
//!
//! Simplifications (beyond those listed in each module):
//! - Times: `now` in ns as `ktime`; jiffies at the run's HZ for the jiffy-based fields
//!   (`budget_timeout`, weight-raising times, burst interval), as in the kernel.
//! - One actuator, one hardware queue; `bfq_find_bfqq_for_underused_actuator` is a no-op.
//! - No per-entity tag limit (`bfqq_request_over_limit`, CONFIG_BFQ_GROUP_IOSCHED).
//! - No at-head inserts (`bfqd->dispatch`): flushes bypass the elevator in the request queue.

pub mod budget;
mod burst;
mod check;
mod depth;
mod idle;
mod inject;
mod merge;
pub mod queue;
#[cfg(test)]
mod tests;
pub mod wf2q;
mod wr;

use super::{Elevator, QueueTraits, RqStore};
use crate::block::request::{Bio, MergeKind, Request, RequestId};
use crate::kernel::{Hz, KernelVersion};
use crate::task::{Blkcg, CgroupId};
use crate::units::{Nanos, NS_PER_SEC};
use budget::Expiration;
use queue::{BfqQueue, Bic, QueueId};
use std::collections::BTreeMap;
use wf2q::{Entity, Group, GroupId, ROOT_GROUP};

/// Kernel time in ticks, signed so that "minus infinity from now" is representable.
pub type Jiffies = i64;

/// `queue/iosched/` of BFQ (`bfq_attrs`) in kernel units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BfqTunables {
    /// `bfq_fifo_expire`: async 250 ms, sync 125 ms.
    pub fifo_expire: [Nanos; 2],
    /// `bfq_back_max = 16 * 1024` KiB.
    pub back_seek_max_kib: u64,
    /// `bfq_back_penalty = 2`.
    pub back_seek_penalty: u64,
    /// `bfq_slice_idle = NSEC_PER_SEC / 125` (8 ms).
    pub slice_idle: Nanos,
    /// `bfq_timeout = HZ / 8` jiffies (`timeout_sync`).
    pub timeout: Jiffies,
    /// `max_budget` in sectors; 0 = automatic from the peak rate.
    pub max_budget: u64,
    pub strict_guarantees: bool,
    /// `low_latency = 1`.
    pub low_latency: bool,
    /// The Linux version whose BFQ runs (`[stack.kernel] version`): queue merging differs by
    /// era ([`merge`]).
    pub kernel: KernelVersion,
}

impl BfqTunables {
    /// `bfq_init_queue`'s defaults at `hz`.
    pub fn defaults(hz: Hz) -> BfqTunables {
        BfqTunables {
            fifo_expire: [NS_PER_SEC / 4, NS_PER_SEC / 8],
            back_seek_max_kib: 16 * 1024,
            back_seek_penalty: 2,
            slice_idle: NS_PER_SEC / 125,
            timeout: hz.over(8) as Jiffies,
            max_budget: 0,
            strict_guarantees: false,
            low_latency: true,
            kernel: KernelVersion::default(),
        }
    }
}

/// Counters of BFQ's decisions, for tests and reports.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct BfqStats {
    pub queues_created: u64,
    /// Expirations by reason (`Expiration as usize`).
    pub expirations: [u64; 5],
    pub idle_slices: u64,
    pub wr_interactive: u64,
    pub wr_soft_rt: u64,
    pub wr_ended: u64,
    pub large_bursts: u64,
    pub wakers_detected: u64,
    pub injected_own_async: u64,
    pub injected_waker: u64,
    pub injected_woken: u64,
    pub injected_other: u64,
    /// QASIO: boosted requests dispatched from a queue other than the one in service.
    pub qasio_served_out_of_turn: u64,
    /// Processes redirected to another queue (`bfq_merge_bfqqs`).
    pub queue_merges: u64,
    /// Of the merges, those scheduled by the stable merge (`bfq_setup_stable_merge`,
    /// `bfq_do_early_stable_merge`).
    pub stable_merges: u64,
    /// Processes split off a shared queue (`bfq_split_bfqq`).
    pub queue_splits: u64,
}

/// `struct bfq_data`.
#[derive(Debug)]
pub struct Bfq {
    hz: Hz,
    /// `blk_queue_nonrot`.
    nonrot: bool,
    t: BfqTunables,
    /// Virtual time of the current call (the kernel reads `ktime` / `jiffies`).
    now: Nanos,
    store: RqStore,
    queues: Vec<BfqQueue>,
    entities: Vec<Entity>,
    entity_seq: u64,
    groups: Vec<Group>,
    group_of_cgroup: BTreeMap<CgroupId, GroupId>,
    bics: BTreeMap<u32, Bic>,
    /// `RQ_BFQQ(rq)` for requests queued or in the driver.
    rq_queue: BTreeMap<RequestId, QueueId>,
    /// `active_list`: queues on an active tree, most recently inserted first.
    active_list: Vec<QueueId>,
    in_service_queue: Option<QueueId>,
    busy_queues: [u32; 3],
    wr_busy_queues: u32,
    /// `queue_weights_tree`: weight -> active non-raised queues with it.
    queue_weights: BTreeMap<u32, u32>,
    num_groups_with_pending_reqs: u32,
    tot_rq_in_driver: u32,
    max_rq_in_driver: u32,
    /// -1 unknown, 0 no, 1 yes (`bfqd->hw_tag`).
    hw_tag: i32,
    /// `nonrot_with_queueing`: non-rotational and `hw_tag` not disproved (assumed at init).
    nonrot_with_queueing: bool,
    /// `in_serv_last_pos`: the end of the in-service queue's last dispatched request.
    in_serv_last_pos: u64,
    /// `last_bfqq_created` of each group (`bfq_do_or_sched_stable_merge`).
    last_bfqq_created: BTreeMap<GroupId, QueueId>,
    hw_tag_samples: u32,
    budgets_assigned: u32,
    bfq_max_budget: u64,
    last_budget_start: Nanos,
    last_idling_start: Nanos,
    last_idling_start_jiffies: Jiffies,
    /// The idle slice hrtimer.
    idle_timer: Option<Nanos>,
    // Peak rate (`BFQ_RATE_SHIFT` fixed point, sectors/us).
    peak_rate: u64,
    rate_dur_prod: u64,
    peak_rate_samples: u32,
    sequential_samples: u32,
    tot_sectors_dispatched: u64,
    last_rq_max_size: u64,
    delta_from_first: u64,
    first_dispatch: Nanos,
    last_dispatch: Nanos,
    last_completion: Nanos,
    last_position: u64,
    // Bursts.
    burst_list: Vec<QueueId>,
    burst_size: u32,
    large_burst: bool,
    last_ins_in_burst: Jiffies,
    burst_parent: Option<GroupId>,
    large_burst_thresh: u32,
    burst_interval: Jiffies,
    // Injection.
    last_completed_rq_bfqq: Option<QueueId>,
    waited_rq: Option<RequestId>,
    wait_dispatch: bool,
    rqs_injected: bool,
    last_empty_occupied_ns: Nanos,
    // Weight raising (`bfq_init_queue`).
    wr_coeff: u32,
    wr_rt_max_time: Jiffies,
    wr_min_idle_time: Jiffies,
    wr_min_inter_arr_async: Jiffies,
    wr_max_softrt_rate: u64,
    /// `BFQ_CL_IDLE_TIMEOUT = HZ / 5`.
    cl_idle_timeout: Jiffies,
    pub stats: BfqStats,
}

impl Bfq {
    pub fn new(traits: QueueTraits, hz: Hz, tunables: BfqTunables) -> Bfq {
        assert!(tunables.timeout >= 1, "timeout_sync below one jiffy");
        let mut bfq = Bfq {
            hz,
            nonrot: traits.nonrot,
            t: tunables,
            now: 0,
            store: RqStore::default(),
            queues: Vec::new(),
            entities: Vec::new(),
            entity_seq: 0,
            groups: vec![Group::new(crate::task::ROOT_CGROUP, None, 0)],
            group_of_cgroup: BTreeMap::from([(crate::task::ROOT_CGROUP, ROOT_GROUP)]),
            bics: BTreeMap::new(),
            rq_queue: BTreeMap::new(),
            active_list: Vec::new(),
            in_service_queue: None,
            busy_queues: [0; 3],
            wr_busy_queues: 0,
            queue_weights: BTreeMap::new(),
            num_groups_with_pending_reqs: 0,
            tot_rq_in_driver: 0,
            max_rq_in_driver: 0,
            hw_tag: -1,
            nonrot_with_queueing: traits.nonrot,
            in_serv_last_pos: 0,
            last_bfqq_created: BTreeMap::new(),
            hw_tag_samples: 0,
            budgets_assigned: 0,
            bfq_max_budget: budget::BFQ_DEFAULT_MAX_BUDGET,
            last_budget_start: 0,
            last_idling_start: 0,
            last_idling_start_jiffies: 0,
            idle_timer: None,
            peak_rate: 1,
            rate_dur_prod: 1,
            peak_rate_samples: 0,
            sequential_samples: 0,
            tot_sectors_dispatched: 0,
            last_rq_max_size: 0,
            delta_from_first: 0,
            first_dispatch: 0,
            last_dispatch: 0,
            last_completion: 0,
            last_position: 0,
            burst_list: Vec::new(),
            burst_size: 0,
            large_burst: false,
            last_ins_in_burst: 0,
            burst_parent: None,
            // `bfq_large_burst_thresh = 8`, `bfq_burst_interval = msecs_to_jiffies(180)`.
            large_burst_thresh: 8,
            burst_interval: hz.msecs_to_jiffies(180) as Jiffies,
            last_completed_rq_bfqq: None,
            waited_rq: None,
            wait_dispatch: false,
            rqs_injected: false,
            last_empty_occupied_ns: 0,
            // `bfq_wr_coeff = 30`, `bfq_wr_rt_max_time = 300 ms`, `bfq_wr_min_idle_time =
            // 2000 ms`, `bfq_wr_min_inter_arr_async = 500 ms`, `bfq_wr_max_softrt_rate = 7000`
            // sectors/s ("to playback or record a high-definition compressed video").
            wr_coeff: 30,
            wr_rt_max_time: hz.msecs_to_jiffies(300) as Jiffies,
            wr_min_idle_time: hz.msecs_to_jiffies(2000) as Jiffies,
            wr_min_inter_arr_async: hz.msecs_to_jiffies(500) as Jiffies,
            wr_max_softrt_rate: 7000,
            cl_idle_timeout: hz.over(5) as Jiffies,
            stats: BfqStats::default(),
        };
        let (rate_dur_prod, peak_rate) = bfq.reference_rate();
        bfq.rate_dur_prod = rate_dur_prod;
        bfq.peak_rate = peak_rate;
        if tunables.max_budget > 0 {
            bfq.bfq_max_budget = tunables.max_budget;
        }
        bfq
    }

    fn jiffies(&self) -> Jiffies {
        self.hz.jiffies(self.now) as Jiffies
    }

    /// `msecs_to_jiffies`.
    fn msecs(&self, ms: u64) -> Jiffies {
        self.hz.msecs_to_jiffies(ms) as Jiffies
    }

    /// A queue, for tests and reports.
    pub fn queue(&self, q: QueueId) -> &BfqQueue {
        &self.queues[q]
    }

    /// The sync queue of process `pid`, if it has one.
    pub fn sync_queue_of(&self, pid: u32) -> Option<QueueId> {
        self.bics.get(&pid).and_then(|bic| bic.sync)
    }

    /// The current weight of a queue's entity (raised weight included).
    pub fn weight_of(&self, q: QueueId) -> u32 {
        self.entities[self.queues[q].entity].weight
    }

    /// The queue in service.
    pub fn in_service(&self) -> Option<QueueId> {
        self.in_service_queue
    }

    /// `bfq_wr_duration` in ns at the current peak-rate estimate.
    pub fn wr_duration_ns(&self) -> Nanos {
        self.hz.jiffies_to_ns(self.wr_duration() as u64)
    }

    /// The group of a cgroup, created on first use (`bfq_bio_bfqg`, `bfq_pd_init`), with its
    /// current `io.bfq.weight` (`bfq_group_set_weight` on a change).
    fn group_for(&mut self, blkcg: Blkcg) -> GroupId {
        if let Some(&g) = self.group_of_cgroup.get(&blkcg.id) {
            if let Some(e) = self.groups[g].entity {
                if self.entities[e].new_weight != blkcg.bfq_weight {
                    self.entities[e].new_weight = blkcg.bfq_weight;
                    self.entities[e].prio_changed = true;
                }
            }
            return g;
        }
        let g = self.groups.len();
        let e = self.entities.len();
        let mut entity = Entity::new(blkcg.bfq_weight, ROOT_GROUP);
        entity.my_group = Some(g);
        self.entities.push(entity);
        self.groups
            .push(Group::new(blkcg.id, Some(e), self.jiffies()));
        self.group_of_cgroup.insert(blkcg.id, g);
        g
    }

    /// `bfq_init_rq`: the queue of a request being inserted, created (or split off a shared
    /// queue) if needed.
    fn init_rq(&mut self, rq: &Request) -> QueueId {
        let g = self.group_for(rq.blkcg);
        let pid = rq.task.pid;
        self.bics.entry(pid).or_default();
        self.check_ioprio_change(pid, rq);
        self.bic_update_cgroup(pid, g);
        let q = self.get_bfqq_handle_split(pid, g, rq, rq.is_sync());
        if let Some(bic) = self.bics.get_mut(&pid) {
            bic.requests += 1;
        }
        if self.queues[q].new_bfqq.is_none() && self.queues[q].process_refs == 1 {
            self.queues[q].bic = Some(pid);
        }
        let burst_running = self.burst_size > 0 || self.tot_busy_queues() == 0;
        if self.queues[q].just_created && burst_running {
            self.handle_burst(q);
        }
        q
    }

    /// `bfq_check_ioprio_change`: a new `ioc->ioprio` gives the process a new async queue and
    /// its sync queue new priority data.
    fn check_ioprio_change(&mut self, pid: u32, rq: &Request) {
        let ioprio = (rq.ioc_ioprio, rq.nice);
        let bic = self.bics.get_mut(&pid).expect("bic of the process");
        if bic.ioprio == Some(ioprio) {
            return;
        }
        bic.ioprio = Some(ioprio);
        let (old_async, sync) = (bic.async_queue.take(), bic.sync);
        if let Some(old) = old_async {
            self.release_process_ref(old);
        }
        if let Some(q) = sync {
            self.set_next_ioprio_data(q, rq.ioc_ioprio, rq.nice);
        }
    }

    /// `bfq_bic_update_cgroup` (before 6.3): a process in a new group leaves its queues.
    fn bic_update_cgroup(&mut self, pid: u32, g: GroupId) {
        let bic = self.bics.get_mut(&pid).expect("bic of the process");
        if bic.group == Some(g) {
            return;
        }
        bic.group = Some(g);
        let old = [bic.sync.take(), bic.async_queue.take()];
        for q in old.into_iter().flatten() {
            if self.queues[q].bic == Some(pid) {
                self.queues[q].bic = None;
            }
            self.release_process_ref(q);
        }
    }

    /// `__bfq_insert_request`.
    fn insert_request(&mut self, mut rq: Request) {
        let mut q = self.init_rq(&rq);
        let pid = rq.task.pid;
        if self.may_cooperate(q, pid) {
            if let Some(new) = self.setup_cooperator(q, rq.sector, pid) {
                if self.bics.get(&pid).and_then(|bic| bic.sync) == Some(q) {
                    let mut cur = q;
                    for _ in 0..self.queues.len() {
                        if cur == new {
                            break;
                        }
                        cur = self.merge_bfqqs(pid, cur);
                    }
                }
                self.queues[q].just_created = false;
                q = new;
            }
        }
        self.rq_queue.insert(rq.id, q);
        self.update_io_thinktime(q);
        self.update_has_short_ttime(q);
        self.update_io_seektime(q, rq.sector, rq.nr_sectors);
        let sync = rq.is_sync();
        rq.inserted_ns = self.now;
        rq.fifo_time_ns = self.now + self.t.fifo_expire[usize::from(sync)];
        let id = rq.id;
        self.store.insert(rq);
        self.add_request(q, id);
        self.queues[q].fifo.push_back(id);
        self.rq_enqueued(q, id);
    }

    /// `bfq_add_request`.
    fn add_request(&mut self, q: QueueId, id: RequestId) {
        let (sector, sync) = {
            let rq = self.store.get(id);
            (rq.sector, rq.is_sync())
        };
        let old_wr_coeff = self.queues[q].wr_coeff;
        let mut interactive = false;
        self.queues[q].queued[usize::from(sync)] += 1;
        let jiffies = self.jiffies();
        let pid = self.queues[q].pid;
        let requests = self.bics.get(&pid).map_or(0, |bic| bic.requests);
        if self.queues[q].sync && requests <= 1 {
            self.check_waker(q);
            if self.queues[q].decrease_time_jif + self.msecs(1000) <= jiffies {
                self.reset_inject_limit(q);
            }
            let queue = &self.queues[q];
            if self.in_service_queue == Some(q)
                && (self.tot_rq_in_driver == 0
                    || (queue.last_serv_time_ns > 0
                        && self.rqs_injected
                        && self.tot_rq_in_driver > 0))
                && queue.decrease_time_jif + self.msecs(10) <= jiffies
            {
                self.last_empty_occupied_ns = self.now;
                self.wait_dispatch = true;
                if self.tot_rq_in_driver == 0 {
                    self.rqs_injected = false;
                }
            }
        }
        if self.queues[q].sync {
            self.update_io_intensity(q);
        }
        self.queues[q].sort_list.insert((sector, id));
        let prev = self.queues[q].next_rq;
        self.queues[q].next_rq = self.choose_req(prev, Some(id), self.last_position);
        if !self.queues[q].busy {
            interactive = self.handle_idle_busy_switch(q, old_wr_coeff, id);
        } else {
            let duration = self.wr_duration();
            let queue = &mut self.queues[q];
            if self.t.low_latency
                && old_wr_coeff == 1
                && !sync
                && queue.last_wr_start_finish + self.wr_min_inter_arr_async < jiffies
            {
                queue.wr_coeff = self.wr_coeff;
                queue.wr_cur_max_time = duration;
                self.wr_busy_queues += 1;
                let e = self.queues[q].entity;
                self.entities[e].prio_changed = true;
            }
            if prev != self.queues[q].next_rq {
                self.updated_next_req(q);
            }
        }
        if self.t.low_latency && (old_wr_coeff == 1 || self.queues[q].wr_coeff == 1 || interactive)
        {
            self.queues[q].last_wr_start_finish = jiffies;
        }
    }

    /// `bfq_rq_enqueued`: a request for the idling in-service queue ends the idle slice (unless
    /// it is small and idling is for throughput: the block layer may merge more into it).
    fn rq_enqueued(&mut self, q: QueueId, id: RequestId) {
        let (end, sync, nr_sectors) = {
            let rq = self.store.get(id);
            (rq.end_sector(), rq.is_sync(), rq.nr_sectors)
        };
        self.queues[q].last_request_pos = end;
        if self.in_service_queue == Some(q) && self.queues[q].wait_request {
            let small_req = self.queues[q].queued[usize::from(sync)] == 1 && nr_sectors < 32;
            let budget_timeout = self.budget_timed_out(q);
            if small_req && self.idling_boosts_thr_without_issues(q) && !budget_timeout {
                return;
            }
            self.queues[q].wait_request = false;
            self.idle_timer = None;
            if budget_timeout {
                self.expire(q, false, Expiration::BudgetTimeout);
            }
        }
    }

    /// `bfq_remove_request`.
    fn remove_request(&mut self, id: RequestId) {
        let q = self.rq_queue[&id];
        let (sector, sync) = {
            let rq = self.store.get(id);
            (rq.sector, rq.is_sync())
        };
        if self.queues[q].next_rq == Some(id) {
            self.queues[q].next_rq = self.find_next_rq(q, id);
            self.updated_next_req(q);
        }
        let queue = &mut self.queues[q];
        queue.fifo.retain(|&x| x != id);
        queue.qasio.retain(|&x| x != id);
        queue.queued[usize::from(sync)] -= 1;
        assert!(
            queue.sort_list.remove(&(sector, id)),
            "request not in its queue"
        );
        if queue.sort_list.is_empty() {
            queue.next_rq = None;
            if queue.busy && self.in_service_queue != Some(q) {
                self.del_bfqq_busy(q, false);
                let e = self.queues[q].entity;
                self.entities[e].budget = 0;
                self.entities[e].service = 0;
            }
        }
    }

    /// `__bfq_set_in_service_queue` after `bfq_get_next_queue`.
    fn set_in_service_queue(&mut self) -> Option<QueueId> {
        let q = self.get_next_queue();
        if let Some(q) = q {
            self.queues[q].fifo_expire = false;
            self.budgets_assigned = (self.budgets_assigned * 7 + 256) / 8;
            let jiffies = self.jiffies();
            let queue = &mut self.queues[q];
            if queue.last_wr_start_finish < jiffies
                && queue.wr_coeff > 1
                && queue.wr_cur_max_time == self.wr_rt_max_time
                && queue.budget_timeout < jiffies
            {
                // A soft real-time queue does not lose its raising while it waits for service.
                if queue.budget_timeout > queue.last_wr_start_finish {
                    queue.last_wr_start_finish += jiffies - queue.budget_timeout;
                } else {
                    queue.last_wr_start_finish = jiffies;
                }
            }
            self.set_budget_timeout(q);
        }
        self.in_service_queue = q;
        self.in_serv_last_pos = 0;
        q
    }

    /// `bfq_select_queue`.
    fn select_queue(&mut self) -> Option<QueueId> {
        let mut current = self.in_service_queue;
        let mut check_timeout = true;
        // Each pass expires a queue or returns; a bound catches a livelock.
        for _ in 0..4 * (self.queues.len() + 2) {
            let Some(q) = current else {
                current = self.set_in_service_queue();
                current?;
                check_timeout = false;
                continue;
            };
            if check_timeout && self.may_expire_for_budg_timeout(q) && !self.must_idle(q) {
                self.expire(q, false, Expiration::BudgetTimeout);
                current = None;
                continue;
            }
            check_timeout = false;
            if let Some(next) = self.queues[q].next_rq {
                if self.serv_to_charge(next, q) > self.budget_left(q) {
                    self.expire(q, false, Expiration::BudgetExhausted);
                    current = None;
                    continue;
                }
                if self.queues[q].wait_request {
                    self.queues[q].wait_request = false;
                    self.idle_timer = None;
                }
                return Some(q);
            }
            if self.queues[q].wait_request
                || (self.queues[q].dispatched != 0 && self.better_to_idle(q))
            {
                return self.choose_injection(q);
            }
            self.expire(q, false, Expiration::NoMoreRequests);
            current = None;
        }
        panic!("bfq_select_queue did not settle");
    }

    /// `bfq_dispatch_rq_from_bfqq`.
    fn dispatch_rq_from_bfqq(&mut self, q: QueueId) -> RequestId {
        // QASIO: a boosted request goes before the queue's others.
        let id = match self.queues[q].qasio.front() {
            Some(&boosted) => boosted,
            None => self.queues[q]
                .next_rq
                .expect("dispatching from an empty queue"),
        };
        let charge = self.serv_to_charge(id, q);
        self.bfqq_served(q, charge);
        if self.in_service_queue == Some(q) && self.wait_dispatch {
            self.wait_dispatch = false;
            self.waited_rq = Some(id);
        }
        self.queues[q].dispatched += 1;
        self.update_peak_rate(id);
        if self.in_service_queue == Some(q) {
            self.in_serv_last_pos = self.last_position;
        }
        self.remove_request(id);
        if self.in_service_queue == Some(q) {
            self.update_wr_data(q);
            if self.tot_busy_queues() > 1 && self.queues[q].ioprio_class_idx == 2 {
                self.expire(q, false, Expiration::BudgetExhausted);
            }
        }
        id
    }

    /// `bfq_completed_request`.
    fn completed_request_of(&mut self, q: QueueId) {
        self.update_hw_tag();
        self.tot_rq_in_driver -= 1;
        self.queues[q].dispatched -= 1;
        let jiffies = self.jiffies();
        if self.queues[q].dispatched == 0 && !self.queues[q].busy {
            self.queues[q].budget_timeout = jiffies;
            self.del_in_groups_with_pending_reqs(q);
            self.weights_tree_remove(q);
        }
        let now = self.now;
        self.queues[q].ttime.last_end_request = now;
        let delta_us = now.saturating_sub(self.last_completion) / 1000;
        if delta_us > budget::BFQ_MIN_TT / 1000
            && (self.last_rq_max_size << budget::BFQ_RATE_SHIFT) / delta_us
                < 1 << (budget::BFQ_RATE_SHIFT - 10)
        {
            self.update_rate_reset(None);
        }
        self.last_completion = now;
        self.last_completed_rq_bfqq = Some(q);
        let queue = &self.queues[q];
        if queue.softrt_update
            && queue.dispatched == 0
            && queue.sort_list.is_empty()
            && queue.wr_coeff != self.wr_coeff
        {
            self.queues[q].soft_rt_next_start = self.softrt_next_start(q);
        }
        if self.in_service_queue == Some(q) {
            if self.must_idle(q) {
                if self.queues[q].dispatched == 0 {
                    self.arm_slice_timer();
                }
            } else if self.may_expire_for_budg_timeout(q) {
                self.expire(q, false, Expiration::BudgetTimeout);
            } else if self.queues[q].sort_list.is_empty()
                && (self.queues[q].dispatched == 0 || !self.better_to_idle(q))
            {
                self.expire(q, false, Expiration::NoMoreRequests);
            }
        }
    }

    /// QASIO: a busy queue with a boosted request, to serve instead of the selected queue `q`
    /// when `q` is asynchronous and has none of its own (module doc). Queues in creation order
    /// (deterministic).
    fn qasio_before(&self, q: QueueId) -> Option<QueueId> {
        let queue = &self.queues[q];
        if queue.sync || !queue.qasio.is_empty() {
            return None;
        }
        (0..self.queues.len()).find(|&other| other != q && !self.queues[other].qasio.is_empty())
    }

    /// QASIO: a queue with a boosted request, for injection into the plugged in-service queue.
    pub(super) fn qasio_queue(&self) -> Option<QueueId> {
        (0..self.queues.len()).find(|&q| !self.queues[q].qasio.is_empty())
    }

    /// `bfq_allow_bio_merge`'s early queue merge: when the sync bio of a process could merge
    /// into a queued request, `bfq_setup_cooperator` may redirect the process (its queue `q`)
    /// to a cooperator first; the bio then merges only into a request of the queue it goes to.
    fn allow_bio_merge_cooperator(&mut self, bio: &Bio, max_sectors: u32, q: QueueId) -> QueueId {
        let candidate = std::cell::Cell::new(false);
        // A lookup that merges nothing: is there a request the bio could merge into?
        let _ = self.store.merge(bio, max_sectors, true, |rq| {
            if rq.is_sync() {
                candidate.set(true);
            }
            false
        });
        if !candidate.get() {
            return q;
        }
        let pid = bio.task.pid;
        let Some(new) = self.setup_cooperator(q, bio.sector, pid) else {
            return q;
        };
        let mut cur = q;
        for _ in 0..self.queues.len() {
            if cur == new {
                break;
            }
            cur = self.merge_bfqqs(pid, cur);
        }
        cur
    }

    /// `bfq_idle_slice_timer_body`.
    fn idle_slice_timer(&mut self) {
        let Some(q) = self.in_service_queue else {
            return;
        };
        self.queues[q].wait_request = false;
        let reason = if self.budget_timed_out(q) {
            Expiration::BudgetTimeout
        } else if self.queues[q].queued == [0, 0] {
            Expiration::TooIdle
        } else {
            return;
        };
        self.expire(q, true, reason);
    }
}

impl Elevator for Bfq {
    fn name(&self) -> &'static str {
        "bfq"
    }

    /// `bfq_bio_merge` -> `blk_mq_sched_try_merge`: a back merge through the hash or a front
    /// merge in the bio's queue, into a request of the queue the bio would go to
    /// (`bfq_allow_bio_merge`: never a sync bio into an async request).
    fn merge_bio(
        &mut self,
        now: Nanos,
        bio: &Bio,
        max_sectors: u32,
    ) -> Option<(RequestId, MergeKind)> {
        self.now = now;
        let bic = self.bics.get(&bio.task.pid)?;
        let mut target = if bio.is_sync() {
            bic.sync
        } else {
            bic.async_queue
        }?;
        let sync = bio.is_sync();
        if sync && self.may_cooperate(target, bio.task.pid) {
            target = self.allow_bio_merge_cooperator(bio, max_sectors, target);
        }
        let rq_queue = &self.rq_queue;
        let (id, kind, old_sector) = self.store.merge(bio, max_sectors, true, |rq| {
            rq_queue.get(&rq.id) == Some(&target) && (!sync || rq.is_sync())
        })?;
        let q = target;
        if kind == MergeKind::Front {
            // bfq_request_merged: re-sort and re-choose the next request.
            let queue = &mut self.queues[q];
            assert!(queue.sort_list.remove(&(old_sector, id)));
            queue.sort_list.insert((bio.sector, id));
            let prev = queue.next_rq;
            self.queues[q].next_rq = self.choose_req(prev, Some(id), self.last_position);
            if prev != self.queues[q].next_rq {
                self.updated_next_req(q);
            }
        }
        Some((id, kind))
    }

    /// `bfq_insert_request`.
    fn add_request(&mut self, now: Nanos, rq: Request) {
        self.now = now;
        self.insert_request(rq);
    }

    /// `bfq_dispatch_request` / `__bfq_dispatch_request`.
    fn dispatch_request(&mut self, now: Nanos) -> Option<Request> {
        self.now = now;
        if self.tot_busy_queues() == 0 {
            return None;
        }
        if self.t.strict_guarantees && self.tot_rq_in_driver > 0 {
            return None;
        }
        let mut q = self.select_queue()?;
        if let Some(boosted) = self.qasio_before(q) {
            self.stats.qasio_served_out_of_turn += 1;
            q = boosted;
        }
        let id = self.dispatch_rq_from_bfqq(q);
        self.tot_rq_in_driver += 1;
        Some(self.store.remove(id))
    }

    /// `bfq_finish_requeue_request`.
    fn completed_request(&mut self, now: Nanos, rq: &Request) {
        self.now = now;
        let q = self
            .rq_queue
            .remove(&rq.id)
            .expect("completion of a request BFQ did not dispatch");
        if self.waited_rq == Some(rq.id) {
            self.update_inject_limit(q);
        }
        self.completed_request_of(q);
        if let Some(bic) = self.bics.get_mut(&rq.task.pid) {
            bic.requests -= 1;
        }
    }

    fn queued(&self) -> usize {
        self.store.len()
    }

    /// QASIO §5.3 (`elv_boost`): a queued request of an async queue someone blocks on joins
    /// that queue's QASIO list (module doc). A sync queue's request is served as sync already.
    fn boost(&mut self, now: Nanos, rq: RequestId) -> bool {
        self.now = now;
        if !self.store.contains(rq) {
            return false;
        }
        let Some(&q) = self.rq_queue.get(&rq) else {
            return false;
        };
        let queue = &mut self.queues[q];
        if queue.sync || queue.qasio.contains(&rq) {
            return false;
        }
        queue.qasio.push_back(rq);
        true
    }

    fn next_timer(&self) -> Option<Nanos> {
        self.idle_timer
    }

    fn timer_fired(&mut self, now: Nanos) {
        self.now = now;
        self.idle_timer = None;
        self.idle_slice_timer();
    }

    fn limit_depth(&self, nr_requests: usize, sync: bool, write: bool) -> Option<usize> {
        self.depth_limit(nr_requests, sync, write)
    }

    fn queued_requests(&self) -> Vec<&Request> {
        self.store.requests()
    }

    /// The counters of `bfq_data` and each `bfq_queue` against what they count
    /// ([`check`]).
    fn check(&self, dispatched: &[&Request]) -> Result<(), String> {
        self.check_accounting(dispatched)
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}
