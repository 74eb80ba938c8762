//! BFQ's queues: one sync queue per process and one async queue per (group, class, level), as
//! `bfq_get_queue` / `bfq_async_queue_prio` make them, and the per-queue statistics the policy
//! reads: think time, seekiness, I/O intensity (`bfq_update_io_thinktime`,
//! `bfq_update_io_seektime`, `bfq_update_has_short_ttime`, `bfq_update_io_intensity`), and the
//! request order inside a queue (`bfq_choose_req`, `bfq_find_next_rq`, `bfq_check_fifo`).
//!
//! Simplifications:
//! - A process's io_context is its pid (threads do not share one); queues are never freed.
//! - When a process's cgroup changes, its next requests go to a new sync queue in the new
//!   group and the old one drains (the pre-6.3 `bfq_bic_update_cgroup`; 6.3+ moves the queue).
//! - Queue merging (`bfq_setup_cooperator`, the stable merge, splits) is [`super::merge`]'s.
//! - No `REQ_META` pending count (`meta_pending` no longer steers selection in mainline).

use super::wf2q::{Entity, EntityId, GroupId};
use super::{Bfq, Jiffies};
use crate::block::request::{IoPrio, IoPrioClass, Request, RequestId, IOPRIO_BE_NR, IOPRIO_NORM};
use crate::units::Nanos;
use std::collections::{BTreeSet, VecDeque};

pub type QueueId = usize;

/// `BFQ_WEIGHT_CONVERSION_COEFF = 10` (bfq-iosched.h).
const BFQ_WEIGHT_CONVERSION_COEFF: u32 = 10;
/// `BFQQ_SEEK_THR = 8 * 100` sectors.
const BFQQ_SEEK_THR: u64 = 8 * 100;
/// `BFQQ_SECT_THR_NONROT = 2 * 32` sectors.
pub const BFQQ_SECT_THR_NONROT: u32 = 2 * 32;
/// `bfq_sample_valid(samples) ((samples) > 80)`.
const BFQ_SAMPLE_VALID: u64 = 80;
/// A timestamp "minus infinity from now" (`bfq_smallest_from_now`).
pub const SMALLEST_FROM_NOW: Jiffies = i64::MIN / 4;

/// `bfq_ioprio_to_weight`: level 0 -> 80 ... level 4 -> 40 ... level 7 -> 10.
pub fn ioprio_to_weight(level: u8) -> u32 {
    (u32::from(IOPRIO_BE_NR) - u32::from(level)) * BFQ_WEIGHT_CONVERSION_COEFF
}

/// The default weight (`BFQ_DEFAULT_QUEUE_IOPRIO` = 4): only queues with it may be
/// weight-raised (the `new_weight == 40` checks of `bfq_bfqq_handle_idle_busy_switch`).
pub const BFQ_DEFAULT_WEIGHT: u32 = (IOPRIO_BE_NR as u32 - IOPRIO_NORM as u32) * 10;

/// Class index of the service trees: RT 0, BE 1, IDLE 2 (`ioprio_class - 1`).
pub fn class_idx(class: IoPrioClass) -> usize {
    match class {
        IoPrioClass::Rt => 0,
        IoPrioClass::Be | IoPrioClass::None => 1,
        IoPrioClass::Idle => 2,
    }
}

/// `struct bfq_ttime`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ttime {
    pub last_end_request: Nanos,
    pub samples: u64,
    pub total: u64,
    pub mean: u64,
}

/// `struct bfq_queue`.
#[derive(Debug, Clone)]
pub struct BfqQueue {
    pub entity: EntityId,
    pub group: GroupId,
    pub pid: u32,
    pub sync: bool,
    /// `ioprio_class - 1` and the pending class (`new_ioprio_class`).
    pub ioprio_class_idx: usize,
    pub new_ioprio_class_idx: usize,
    /// The class this queue was counted under in `busy_queues`.
    pub busy_class_idx: usize,
    /// `sort_list`: queued requests by sector.
    pub sort_list: BTreeSet<(u64, RequestId)>,
    /// `fifo`, by insertion.
    pub fifo: VecDeque<RequestId>,
    pub next_rq: Option<RequestId>,
    /// `queued[sync]`.
    pub queued: [u32; 2],
    pub dispatched: u32,
    pub max_budget: u64,
    pub budget_timeout: Jiffies,
    // Flags (`BFQQF_*`).
    pub busy: bool,
    pub wait_request: bool,
    pub non_blocking_wait_rq: bool,
    pub fifo_expire: bool,
    pub has_short_ttime: bool,
    pub io_bound: bool,
    pub in_large_burst: bool,
    pub in_burst_list: bool,
    pub softrt_update: bool,
    pub just_created: bool,
    pub in_groups_with_pending_reqs: bool,
    /// The weight this queue is counted under in the weights tree (`weight_counter`).
    pub weight_counter: Option<u32>,
    pub ttime: Ttime,
    pub seek_history: u32,
    pub last_request_pos: u64,
    pub io_start_time: Nanos,
    pub tot_idle_time: Nanos,
    // Weight raising.
    pub wr_coeff: u32,
    pub wr_cur_max_time: Jiffies,
    pub last_wr_start_finish: Jiffies,
    pub wr_start_at_switch_to_srt: Jiffies,
    pub service_from_wr: u64,
    pub soft_rt_next_start: Jiffies,
    pub last_idle_bklogged: Jiffies,
    pub service_from_backlogged: u64,
    pub first_io_time: Jiffies,
    pub split_time: Jiffies,
    pub creation_time: Jiffies,
    // Injection and wakers.
    pub inject_limit: u32,
    pub last_serv_time_ns: Nanos,
    pub decrease_time_jif: Jiffies,
    pub waker: Option<QueueId>,
    pub tentative_waker: Option<QueueId>,
    pub num_waker_detections: u32,
    pub waker_detection_started: Nanos,
    /// `woken_list`: queues this one wakes, most recently busy first.
    pub woken: Vec<QueueId>,
    /// QASIO §5.3 (not in the kernel): the queue's boosted requests, in boost order, dispatched
    /// before its others (`bfq_dispatch_rq_from_bfqq`).
    pub qasio: VecDeque<RequestId>,
    // Queue merging ([`super::merge`]).
    /// `bfqq_process_refs`: the processes whose io_context points, or is scheduled to point,
    /// to the queue (an async queue also counts its group's reference).
    pub process_refs: u32,
    /// `bfqq->bic`: the process owning the queue alone; `None` once shared or merged away.
    pub bic: Option<u32>,
    /// `bfqq->new_bfqq`: the queue this one's processes are redirected to.
    pub new_bfqq: Option<QueueId>,
    /// `BFQQF_coop`: shared by cooperating processes.
    pub coop: bool,
    /// `BFQQF_split_coop`: shared and seeky at an expiration: to be split.
    pub split_coop: bool,
    /// `bfqq->ioprio`: the priority level (compared by the stable merge).
    pub ioprio: u8,
}

/// `struct bfq_io_cq`: what BFQ keeps per process.
#[derive(Debug, Clone, Default)]
pub struct Bic {
    pub sync: Option<QueueId>,
    pub async_queue: Option<QueueId>,
    /// Requests of the process in BFQ or in the driver (`bic->requests`).
    pub requests: u32,
    /// The `ioc->ioprio` and nice seen last (`bic->ioprio`).
    pub ioprio: Option<(IoPrio, i8)>,
    pub group: Option<GroupId>,
    /// `bic->stable_merge_bfqq`: a delayed stable merge scheduled for this process's sync
    /// queue (`bfq_do_or_sched_stable_merge`).
    pub stable_merge_bfqq: Option<QueueId>,
    /// `bic->stably_merged`: the process's queue was stably merged and is never split.
    pub stably_merged: bool,
    /// `bic->saved_*`: the state of the process's own queue when it was merged, restored on a
    /// split (`bfq_bfqq_save_state`, `bfq_bfqq_resume_state`).
    pub saved: super::merge::SavedState,
}

impl Bfq {
    /// `bfq_set_next_ioprio_data`: the class, level and weight the queue takes at its next
    /// (re)activation, from the process's `ioc->ioprio` (class NONE: best effort at the
    /// nice-derived level).
    pub(super) fn set_next_ioprio_data(&mut self, q: QueueId, ioprio: IoPrio, nice: i8) {
        let prio = ioprio.for_task(nice);
        self.queues[q].new_ioprio_class_idx = class_idx(prio.class);
        self.queues[q].ioprio = prio.level;
        let e = self.queues[q].entity;
        self.entities[e].new_weight = ioprio_to_weight(prio.level);
        self.entities[e].prio_changed = true;
    }

    /// `bfq_get_queue` + `bfq_init_bfqq` + `bfq_init_entity`, with a process reference; a new
    /// sync queue of process `pid` may be stably merged at once (`respawn`: not after a split).
    pub(super) fn get_queue(
        &mut self,
        g: GroupId,
        rq: &Request,
        sync: bool,
        respawn: bool,
    ) -> QueueId {
        let slot = {
            let prio = rq.ioc_ioprio;
            match prio.class {
                IoPrioClass::None => (1, IOPRIO_NORM),
                IoPrioClass::Idle => (2, 0),
                class => (class_idx(class), prio.level),
            }
        };
        if !sync {
            if let Some(&q) = self.groups[g].async_queues.get(&slot) {
                self.queues[q].process_refs += 1;
                return q;
            }
        }
        let now = self.now;
        let jiffies = self.jiffies();
        let prio = rq.ioc_ioprio.for_task(rq.nice);
        let weight = ioprio_to_weight(prio.level);
        let e = self.entities.len();
        let q = self.queues.len();
        let mut entity = Entity::new(weight, g);
        entity.queue = Some(q);
        entity.prio_changed = true;
        self.entities.push(entity);
        let class = class_idx(prio.class);
        let max_budget = 2 * self.max_budget() / 3;
        self.queues.push(BfqQueue {
            entity: e,
            group: g,
            pid: rq.task.pid,
            sync,
            ioprio_class_idx: class,
            new_ioprio_class_idx: class,
            busy_class_idx: class,
            sort_list: BTreeSet::new(),
            fifo: VecDeque::new(),
            next_rq: None,
            queued: [0; 2],
            dispatched: 0,
            max_budget,
            budget_timeout: SMALLEST_FROM_NOW,
            busy: false,
            wait_request: false,
            non_blocking_wait_rq: false,
            fifo_expire: false,
            // Tentatively short for a sync queue not in the idle class.
            has_short_ttime: sync && prio.class != IoPrioClass::Idle,
            io_bound: true,
            in_large_burst: false,
            in_burst_list: false,
            softrt_update: false,
            just_created: sync,
            in_groups_with_pending_reqs: false,
            weight_counter: None,
            ttime: Ttime {
                // "minus infinity from now"
                last_end_request: now + 1,
                ..Ttime::default()
            },
            // The first request is almost certainly seeky.
            seek_history: 1,
            last_request_pos: 0,
            io_start_time: now,
            tot_idle_time: 0,
            wr_coeff: 1,
            wr_cur_max_time: 0,
            last_wr_start_finish: jiffies,
            wr_start_at_switch_to_srt: SMALLEST_FROM_NOW,
            service_from_wr: 0,
            soft_rt_next_start: jiffies,
            last_idle_bklogged: jiffies,
            service_from_backlogged: 0,
            first_io_time: jiffies,
            split_time: SMALLEST_FROM_NOW,
            creation_time: jiffies,
            inject_limit: 0,
            last_serv_time_ns: 0,
            decrease_time_jif: jiffies,
            waker: None,
            tentative_waker: None,
            num_waker_detections: 0,
            waker_detection_started: 0,
            woken: Vec::new(),
            qasio: VecDeque::new(),
            // The process's reference, and an async queue's group reference.
            process_refs: if sync { 1 } else { 2 },
            bic: None,
            new_bfqq: None,
            coop: false,
            split_coop: false,
            ioprio: prio.level,
        });
        if !sync {
            self.groups[g].async_queues.insert(slot, q);
        }
        self.stats.queues_created += 1;
        if sync && !respawn && self.t.kernel.has_bfq_stable_merge() {
            return self.do_or_sched_stable_merge(q, rq.task.pid);
        }
        q
    }

    /// `get_sdist` and `BFQ_RQ_SEEKY`.
    pub(super) fn rq_seeky(&self, last_pos: u64, sector: u64, nr_sectors: u32) -> bool {
        let distance = if last_pos != 0 {
            sector.abs_diff(last_pos)
        } else {
            0
        };
        distance > BFQQ_SEEK_THR && (!self.nonrot || nr_sectors < BFQQ_SECT_THR_NONROT)
    }

    /// `BFQQ_SEEKY`: more than 19 of the last 32 requests were seeky.
    pub(super) fn seeky(&self, q: QueueId) -> bool {
        self.queues[q].seek_history.count_ones() > 19
    }

    /// `BFQQ_TOTALLY_SEEKY`.
    pub(super) fn totally_seeky(&self, q: QueueId) -> bool {
        self.queues[q].seek_history == u32::MAX
    }

    /// `bfq_update_io_thinktime`: the time from the queue's last completion to its next
    /// request, when it had nothing queued or in flight, capped at twice `slice_idle`.
    pub(super) fn update_io_thinktime(&mut self, q: QueueId) {
        let slice_idle = self.t.slice_idle;
        let now = self.now;
        let queue = &mut self.queues[q];
        if queue.dispatched > 0 || queue.busy {
            return;
        }
        // u64 arithmetic as in the kernel: a fresh queue's "minus infinity" wraps to the cap.
        let elapsed = now
            .wrapping_sub(queue.ttime.last_end_request)
            .min(2 * slice_idle);
        let ttime = &mut queue.ttime;
        ttime.samples = (7 * ttime.samples + 256) / 8;
        ttime.total = (7 * ttime.total + 256 * elapsed) / 8;
        ttime.mean = (ttime.total + 128) / ttime.samples;
    }

    /// `bfq_update_io_seektime`.
    pub(super) fn update_io_seektime(&mut self, q: QueueId, sector: u64, nr_sectors: u32) {
        let seeky = self.rq_seeky(self.queues[q].last_request_pos, sector, nr_sectors);
        let queue = &mut self.queues[q];
        queue.seek_history = (queue.seek_history << 1) | u32::from(seeky);
        if queue.wr_coeff > 1
            && queue.wr_cur_max_time == self.wr_rt_max_time
            && self.totally_seeky(q)
        {
            // A random reader is no soft real-time application: back to interactive raising
            // if its interactive period is still running, else no raising.
            if self.queues[q].wr_start_at_switch_to_srt + self.wr_duration() < self.jiffies() {
                self.end_wr(q);
            } else {
                self.switch_back_to_interactive_wr(q);
                let e = self.queues[q].entity;
                self.entities[e].prio_changed = true;
            }
        }
    }

    /// `bfq_update_has_short_ttime`: a sync queue whose mean think time exceeds half of
    /// `slice_idle` has a long think time.
    pub(super) fn update_has_short_ttime(&mut self, q: QueueId) {
        let queue = &self.queues[q];
        if !queue.sync || queue.ioprio_class_idx == 2 || self.t.slice_idle == 0 {
            return;
        }
        if queue.split_time + self.wr_min_idle_time >= self.jiffies() {
            return;
        }
        let has_short_ttime =
            !(queue.ttime.samples > BFQ_SAMPLE_VALID && queue.ttime.mean > self.t.slice_idle / 2);
        let state_changed = has_short_ttime != queue.has_short_ttime;
        self.queues[q].has_short_ttime = has_short_ttime;
        let queue = &self.queues[q];
        if state_changed
            && queue.last_serv_time_ns == 0
            && (queue.decrease_time_jif + self.msecs(100) <= self.jiffies() || !has_short_ttime)
        {
            self.reset_inject_limit(q);
        }
    }

    /// `bfq_update_io_intensity`: I/O bound if busy at least 80 % of a 200 ms window.
    pub(super) fn update_io_intensity(&mut self, q: QueueId) {
        let now = self.now;
        let queue = &mut self.queues[q];
        let tot_io_time = now.saturating_sub(queue.io_start_time);
        if queue.sort_list.is_empty() && queue.dispatched == 0 {
            queue.tot_idle_time += now.saturating_sub(queue.ttime.last_end_request);
        }
        if queue.just_created {
            return;
        }
        queue.io_bound = queue.tot_idle_time * 5 <= tot_io_time;
        if tot_io_time > 200 * crate::units::NS_PER_MS {
            queue.io_start_time = now - tot_io_time / 2;
            queue.tot_idle_time /= 2;
        }
    }

    /// `bfq_choose_req`: sync before async, meta before not, then the nearest ahead of `last`
    /// with back seeks up to `back_seek_max` counted `back_seek_penalty` times.
    pub(super) fn choose_req(
        &self,
        rq1: Option<RequestId>,
        rq2: Option<RequestId>,
        last: u64,
    ) -> Option<RequestId> {
        let (id1, id2) = match (rq1, rq2) {
            (None, rq2) => return rq2,
            (rq1, None) => return rq1,
            (Some(a), Some(b)) if a == b => return rq2,
            (Some(a), Some(b)) => (a, b),
        };
        let (r1, r2) = (self.store.get(id1), self.store.get(id2));
        if r1.is_sync() != r2.is_sync() {
            return Some(if r1.is_sync() { id1 } else { id2 });
        }
        if r1.flags.meta != r2.flags.meta {
            return Some(if r1.flags.meta { id1 } else { id2 });
        }
        let (s1, s2) = (r1.sector, r2.sector);
        let back_max = self.t.back_seek_max_kib * 2;
        let distance = |s: u64| -> Option<u64> {
            if s >= last {
                Some(s - last)
            } else if s + back_max >= last {
                Some((last - s) * self.t.back_seek_penalty)
            } else {
                None
            }
        };
        Some(match (distance(s1), distance(s2)) {
            (Some(d1), Some(d2)) => {
                if d1 < d2 || (d1 == d2 && s1 >= s2) {
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

    /// `bfq_check_fifo`: the FIFO head if it expired, checked once per service slot.
    fn check_fifo(&mut self, q: QueueId, last: RequestId) -> Option<RequestId> {
        if self.queues[q].fifo_expire {
            return None;
        }
        self.queues[q].fifo_expire = true;
        let head = *self.queues[q].fifo.front()?;
        if head == last || self.now < self.store.get(head).fifo_time_ns {
            return None;
        }
        Some(head)
    }

    /// `bfq_find_next_rq`: the request to serve after `last`.
    pub(super) fn find_next_rq(&mut self, q: QueueId, last: RequestId) -> Option<RequestId> {
        if let Some(expired) = self.check_fifo(q, last) {
            return Some(expired);
        }
        let rq = self.store.get(last);
        let key = (rq.sector, last);
        let sort_list = &self.queues[q].sort_list;
        let prev = sort_list.range(..key).next_back().map(|&(_, id)| id);
        let next = sort_list
            .range((std::ops::Bound::Excluded(key), std::ops::Bound::Unbounded))
            .next()
            .map(|&(_, id)| id)
            .or_else(|| {
                sort_list
                    .first()
                    .map(|&(_, id)| id)
                    .filter(|&id| id != last)
            });
        self.choose_req(next, prev, rq.sector)
    }
}
