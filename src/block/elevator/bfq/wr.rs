//! `low_latency` weight raising of block/bfq-iosched.c.
//!
//! What is kept, by kernel function:
//! - Interactive raising: a sync queue with the default weight (BE4, weight 40), not in a large
//!   burst, that becomes busy after being idle for `bfq_wr_min_idle_time` (2 s) - a newly
//!   created queue counts as idle for long - gets its weight multiplied by `bfq_wr_coeff` (30)
//!   for `bfq_wr_duration` (reference rate x reference duration / estimated peak rate, 3 s to
//!   25 s) or until it received `max_service_from_wr` (120000 sectors)
//!   (`bfq_update_bfqq_wr_on_rq_arrival`, `bfq_update_wr_data`, `bfq_bfqq_end_wr`).
//! - Soft real-time raising: a queue that is not totally seeky and whose next request arrives
//!   after `soft_rt_next_start` (its service since it became busy at most
//!   `bfq_wr_max_softrt_rate` = 7000 sectors/s, and not before `slice_idle` + 4 jiffies after
//!   its last batch completed) gets `bfq_wr_coeff * BFQ_SOFTRT_WEIGHT_FACTOR` (3000) for
//!   `bfq_wr_rt_max_time` (300 ms), recharged at each such arrival, and falls back to the
//!   interactive raising it interrupted (`bfq_bfqq_softrt_next_start`,
//!   `switch_back_to_interactive_wr`).
//! - Async queues are raised when they get a request 500 ms after their last one
//!   (`bfq_wr_min_inter_arr_async`, in `bfq_add_request`).
//! - The idle-to-busy transition (`bfq_bfqq_handle_idle_busy_switch`), which also decides
//!   whether the newly busy queue preempts the in-service one (`bfq_bfqq_higher_class_or_weight`).
//!
//! Simplifications: merged queues do not exist, so every sync queue is "non-merged".

use super::budget::Expiration;
use super::queue::{QueueId, BFQ_DEFAULT_WEIGHT};
use super::{Bfq, Jiffies};
use crate::block::request::RequestId;

/// `BFQ_SOFTRT_WEIGHT_FACTOR = 100` (bfq-iosched.h).
const BFQ_SOFTRT_WEIGHT_FACTOR: u32 = 100;
/// `max_service_from_wr = 120000` sectors.
const MAX_SERVICE_FROM_WR: u64 = 120_000;
/// `ref_rate[1] = 33000`: the non-rotational reference peak rate, sectors/us << 16.
const REF_RATE_NONROT: u64 = 33_000;
/// `ref_rate[0] = 14000` (rotational).
const REF_RATE_ROT: u64 = 14_000;
/// `ref_wr_duration[1] = msecs_to_jiffies(2500)`, `[0] = 7000`.
const REF_WR_DURATION_MS: [u64; 2] = [7000, 2500];

impl Bfq {
    /// `bfqd->rate_dur_prod` and the initial `peak_rate` (2/3 of the reference).
    pub(super) fn reference_rate(&self) -> (u64, u64) {
        let nonrot = usize::from(self.nonrot);
        let ref_rate = if self.nonrot {
            REF_RATE_NONROT
        } else {
            REF_RATE_ROT
        };
        let duration = self.hz.msecs_to_jiffies(REF_WR_DURATION_MS[nonrot]);
        (ref_rate * duration, ref_rate * 2 / 3)
    }

    /// `bfq_wr_duration`, in jiffies.
    pub(super) fn wr_duration(&self) -> Jiffies {
        let duration = self.rate_dur_prod / self.peak_rate;
        duration.clamp(
            self.hz.msecs_to_jiffies(3000),
            self.hz.msecs_to_jiffies(25000),
        ) as Jiffies
    }

    /// `switch_back_to_interactive_wr`.
    pub(super) fn switch_back_to_interactive_wr(&mut self, q: QueueId) {
        let duration = self.wr_duration();
        let queue = &mut self.queues[q];
        queue.wr_coeff = self.wr_coeff;
        queue.wr_cur_max_time = duration;
        queue.last_wr_start_finish = queue.wr_start_at_switch_to_srt;
    }

    /// `bfq_bfqq_end_wr`.
    pub(super) fn end_wr(&mut self, q: QueueId) {
        let jiffies = self.jiffies();
        let queue = &mut self.queues[q];
        if queue.wr_cur_max_time != self.wr_rt_max_time {
            queue.soft_rt_next_start = jiffies;
        }
        if queue.busy {
            self.wr_busy_queues -= 1;
        }
        queue.wr_coeff = 1;
        queue.wr_cur_max_time = 0;
        queue.last_wr_start_finish = jiffies;
        let e = queue.entity;
        self.entities[e].prio_changed = true;
        self.stats.wr_ended += 1;
    }

    /// `bfq_update_bfqq_wr_on_rq_arrival`.
    fn update_wr_on_rq_arrival(
        &mut self,
        q: QueueId,
        old_wr_coeff: u32,
        wr_or_deserves_wr: bool,
        interactive: bool,
        in_burst: bool,
        soft_rt: bool,
    ) {
        let jiffies = self.jiffies();
        let duration = self.wr_duration();
        let min_budget = self.min_budget();
        let (wr_coeff, rt_max) = (self.wr_coeff, self.wr_rt_max_time);
        let queue = &mut self.queues[q];
        if old_wr_coeff == 1 && wr_or_deserves_wr {
            if interactive {
                queue.service_from_wr = 0;
                queue.wr_coeff = wr_coeff;
                queue.wr_cur_max_time = duration;
                self.stats.wr_interactive += 1;
            } else {
                queue.wr_start_at_switch_to_srt = super::queue::SMALLEST_FROM_NOW;
                queue.wr_coeff = wr_coeff * BFQ_SOFTRT_WEIGHT_FACTOR;
                queue.wr_cur_max_time = rt_max;
                self.stats.wr_soft_rt += 1;
            }
            let e = queue.entity;
            self.entities[e].budget = self.entities[e].budget.min(2 * min_budget);
        } else if old_wr_coeff > 1 {
            if interactive {
                queue.wr_coeff = wr_coeff;
                queue.wr_cur_max_time = duration;
            } else if in_burst {
                queue.wr_coeff = 1;
            } else if soft_rt {
                if queue.wr_cur_max_time != rt_max {
                    queue.wr_start_at_switch_to_srt = queue.last_wr_start_finish;
                    queue.wr_cur_max_time = rt_max;
                    queue.wr_coeff = wr_coeff * BFQ_SOFTRT_WEIGHT_FACTOR;
                }
                queue.last_wr_start_finish = jiffies;
            }
        }
    }

    /// `bfq_bfqq_idle_for_long_time`.
    fn idle_for_long_time(&self, q: QueueId) -> bool {
        let queue = &self.queues[q];
        queue.dispatched == 0 && queue.budget_timeout + self.wr_min_idle_time < self.jiffies()
    }

    /// `bfq_bfqq_higher_class_or_weight`.
    fn higher_class_or_weight(&self, q: QueueId, in_service: QueueId) -> bool {
        let (a, b) = (&self.queues[q], &self.queues[in_service]);
        if a.ioprio_class_idx < b.ioprio_class_idx {
            return true;
        }
        let weight_of = |queue: &super::queue::BfqQueue| {
            let e = &self.entities[queue.entity];
            if a.group == b.group {
                e.weight
            } else {
                match self.groups[e.parent].entity {
                    Some(group_entity) => self.entities[group_entity].weight,
                    None => e.weight,
                }
            }
        };
        weight_of(a) > weight_of(b)
    }

    /// `bfq_bfqq_handle_idle_busy_switch`: `q` gets its first request after being empty.
    /// Returns whether the switch found the queue interactive.
    pub(super) fn handle_idle_busy_switch(
        &mut self,
        q: QueueId,
        old_wr_coeff: u32,
        _rq: RequestId,
    ) -> bool {
        let jiffies = self.jiffies();
        let idle_for_long_time = self.idle_for_long_time(q);
        let arrived_in_time =
            self.now <= self.queues[q].ttime.last_end_request + self.t.slice_idle * 3;
        let queue = &self.queues[q];
        let new_weight = self.entities[queue.entity].new_weight;
        let in_burst = queue.in_large_burst;
        let soft_rt = self.wr_max_softrt_rate > 0
            && !self.totally_seeky(q)
            && !in_burst
            && queue.soft_rt_next_start < jiffies
            && queue.dispatched == 0
            && new_weight == BFQ_DEFAULT_WEIGHT;
        let interactive = !in_burst && idle_for_long_time && new_weight == BFQ_DEFAULT_WEIGHT;
        let wr_or_deserves_wr =
            self.t.low_latency && (queue.wr_coeff > 1 || (queue.sync && (interactive || soft_rt)));
        let wants_to_preempt = self.update_budg_for_activation(q, arrived_in_time);
        if !self.queues[q].just_created
            && idle_for_long_time
            && self.queues[q].budget_timeout + self.msecs(10_000) < jiffies
        {
            self.remove_from_burst_list(q);
            self.queues[q].in_large_burst = false;
        }
        self.queues[q].just_created = false;
        if self.t.low_latency && self.queues[q].split_time + self.wr_min_idle_time < jiffies {
            self.update_wr_on_rq_arrival(
                q,
                old_wr_coeff,
                wr_or_deserves_wr,
                interactive,
                in_burst,
                soft_rt,
            );
            if old_wr_coeff != self.queues[q].wr_coeff {
                let e = self.queues[q].entity;
                self.entities[e].prio_changed = true;
            }
        }
        let queue = &mut self.queues[q];
        queue.last_idle_bklogged = jiffies;
        queue.service_from_backlogged = 0;
        queue.softrt_update = false;
        self.add_bfqq_busy(q);
        if let Some(in_service) = self.in_service_queue {
            let preempt = (wants_to_preempt
                && self.queues[q].wr_coeff >= self.queues[in_service].wr_coeff)
                || self.higher_class_or_weight(q, in_service)
                || !self.better_to_idle(in_service);
            if preempt && self.next_queue_may_preempt() {
                self.expire(in_service, false, Expiration::Preempted);
            }
        }
        interactive
    }

    /// `bfq_update_wr_data`, at each dispatch from the in-service queue: ends raising that ran
    /// its period (or its service cap) and applies weight changes at once.
    pub(super) fn update_wr_data(&mut self, q: QueueId) {
        let jiffies = self.jiffies();
        if self.queues[q].wr_coeff > 1 {
            let queue = &self.queues[q];
            if queue.in_large_burst {
                self.end_wr(q);
            } else if queue.last_wr_start_finish + queue.wr_cur_max_time < jiffies {
                if queue.wr_cur_max_time != self.wr_rt_max_time
                    || queue.wr_start_at_switch_to_srt + self.wr_duration() < jiffies
                {
                    self.end_wr(q);
                } else {
                    self.switch_back_to_interactive_wr(q);
                    let e = self.queues[q].entity;
                    self.entities[e].prio_changed = true;
                }
            }
            let queue = &self.queues[q];
            if queue.wr_coeff > 1
                && queue.wr_cur_max_time != self.wr_rt_max_time
                && queue.service_from_wr > MAX_SERVICE_FROM_WR
            {
                self.end_wr(q);
            }
        }
        let e = self.queues[q].entity;
        let entity = &self.entities[e];
        if (entity.weight > entity.orig_weight) != (self.queues[q].wr_coeff > 1) {
            self.update_weight_prio(e, false);
        }
    }

    /// `bfq_bfqq_softrt_next_start`.
    pub(super) fn softrt_next_start(&self, q: QueueId) -> Jiffies {
        let queue = &self.queues[q];
        let by_rate = queue.last_idle_bklogged
            + (u64::from(self.hz.0) * queue.service_from_backlogged / self.wr_max_softrt_rate)
                as Jiffies;
        let slice_idle_jiffies = (self.t.slice_idle / self.hz.tick_ns()) as Jiffies;
        queue
            .soft_rt_next_start
            .max(by_rate)
            .max(self.jiffies() + slice_idle_jiffies + 4)
    }
}
