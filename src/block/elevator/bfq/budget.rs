//! Budgets, expiration and the peak-rate estimator of block/bfq-iosched.c.
//!
//! What is kept, by kernel function:
//! - The charge of a request (`bfq_serv_to_charge`: its sectors, times the async charge
//!   factor 3 for an async queue in a symmetric scenario), the budget left, the min / max
//!   budget (`bfq_min_budget`, `bfq_max_budget`: 16384 sectors until 194 budgets were
//!   assigned, then the peak rate times `timeout_sync`).
//! - Budget on activation (`bfq_bfqq_update_budg_for_activation`, the service-hole recovery
//!   of a queue whose request arrived in time), budget feedback on expiration by reason
//!   (`__bfq_bfqq_recalc_budget`), the budget timeout (`bfq_set_budget_timeout`,
//!   `bfq_may_expire_for_budg_timeout`), slow queues charged with time (`bfq_bfqq_is_slow`,
//!   `bfq_bfqq_charge_time`), and expiration itself (`bfq_bfqq_expire`, `__bfq_bfqq_expire`).
//! - The peak rate (`bfq_update_peak_rate`, `bfq_update_rate_reset`,
//!   `bfq_reset_rate_computation`): sectors dispatched over intervals of 300 ms to 1 s,
//!   low-pass filtered by how sequential and how long the interval was; it sets the max
//!   budget (`bfq_calc_max_budget`) and the weight-raising duration.
//!
//! Simplifications: none beyond the elevator's.

use super::queue::QueueId;
use super::Bfq;
use crate::block::request::RequestId;
use crate::units::{NS_PER_MS, NS_PER_SEC};

/// `bfq_stats_min_budgets = 194`.
const BFQ_STATS_MIN_BUDGETS: u32 = 194;
/// `bfq_default_max_budget = 16 * 1024` sectors.
pub const BFQ_DEFAULT_MAX_BUDGET: u64 = 16 * 1024;
/// `bfq_async_charge_factor = 3`.
const BFQ_ASYNC_CHARGE_FACTOR: u64 = 3;
/// `BFQ_RATE_MIN_SAMPLES = 32`.
const BFQ_RATE_MIN_SAMPLES: u32 = 32;
/// `BFQ_RATE_MIN_INTERVAL = 300 ms`.
const BFQ_RATE_MIN_INTERVAL: u64 = 300 * NS_PER_MS;
/// `BFQ_RATE_REF_INTERVAL = 1 s`.
const BFQ_RATE_REF_INTERVAL: u64 = NS_PER_SEC;
/// `BFQ_RATE_SHIFT = 16`: rates are sectors/us << 16.
pub const BFQ_RATE_SHIFT: u32 = 16;
/// `BFQ_MIN_TT = 2 ms`: shorter think times are immediate.
pub const BFQ_MIN_TT: u64 = 2 * NS_PER_MS;

/// `enum bfqq_expiration`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub enum Expiration {
    /// `BFQQE_TOO_IDLE`: the idle timer fired.
    TooIdle,
    /// `BFQQE_BUDGET_TIMEOUT`.
    BudgetTimeout,
    /// `BFQQE_BUDGET_EXHAUSTED`.
    BudgetExhausted,
    /// `BFQQE_NO_MORE_REQUESTS`.
    NoMoreRequests,
    /// `BFQQE_PREEMPTED`.
    Preempted,
}

impl Bfq {
    /// `bfq_serv_to_charge`.
    pub(super) fn serv_to_charge(&self, id: RequestId, q: QueueId) -> u64 {
        let sectors = u64::from(self.store.get(id).nr_sectors);
        let queue = &self.queues[q];
        if queue.sync || queue.wr_coeff > 1 || self.asymmetric_scenario(Some(q)) {
            sectors
        } else {
            sectors * BFQ_ASYNC_CHARGE_FACTOR
        }
    }

    /// `bfq_bfqq_budget_left`.
    pub(super) fn budget_left(&self, q: QueueId) -> u64 {
        let entity = &self.entities[self.queues[q].entity];
        entity.budget.saturating_sub(entity.service)
    }

    /// `bfq_max_budget`.
    pub(super) fn max_budget(&self) -> u64 {
        if self.budgets_assigned < BFQ_STATS_MIN_BUDGETS {
            BFQ_DEFAULT_MAX_BUDGET
        } else {
            self.bfq_max_budget
        }
    }

    /// `bfq_min_budget`.
    pub(super) fn min_budget(&self) -> u64 {
        self.max_budget() / 32
    }

    /// `bfq_updated_next_req`: a queue not in service gets a budget that fits its new first
    /// request.
    pub(super) fn updated_next_req(&mut self, q: QueueId) {
        let Some(next) = self.queues[q].next_rq else {
            return;
        };
        if self.in_service_queue == Some(q) {
            return;
        }
        let e = self.queues[q].entity;
        let new_budget = self.queues[q]
            .max_budget
            .max(self.serv_to_charge(next, q))
            .max(self.entities[e].service);
        if self.entities[e].budget != new_budget {
            self.entities[e].budget = new_budget;
            self.requeue_bfqq(q, false);
        }
    }

    /// `bfq_bfqq_update_budg_for_activation`: returns whether the queue wants to preempt the
    /// in-service queue to recover a service hole.
    pub(super) fn update_budg_for_activation(&mut self, q: QueueId, arrived_in_time: bool) -> bool {
        let e = self.queues[q].entity;
        if self.queues[q].non_blocking_wait_rq && arrived_in_time && self.budget_left(q) > 0 {
            self.entities[e].budget = self.budget_left(q).min(self.queues[q].max_budget);
            self.entities[e].service = 0;
            return true;
        }
        self.entities[e].service = 0;
        let next = self.queues[q].next_rq.expect("activated without a request");
        self.entities[e].budget = self.queues[q].max_budget.max(self.serv_to_charge(next, q));
        self.queues[q].non_blocking_wait_rq = false;
        false
    }

    /// `bfq_set_budget_timeout`.
    pub(super) fn set_budget_timeout(&mut self, q: QueueId) {
        let e = self.queues[q].entity;
        let coeff = if self.queues[q].wr_cur_max_time == self.wr_rt_max_time {
            1
        } else {
            i64::from(self.entities[e].weight / self.entities[e].orig_weight)
        };
        self.last_budget_start = self.now;
        self.queues[q].budget_timeout = self.jiffies() + self.t.timeout * coeff;
    }

    /// `bfq_bfqq_budget_timeout`.
    pub(super) fn budget_timed_out(&self, q: QueueId) -> bool {
        self.queues[q].budget_timeout <= self.jiffies()
    }

    /// `bfq_may_expire_for_budg_timeout`.
    pub(super) fn may_expire_for_budg_timeout(&self, q: QueueId) -> bool {
        let e = &self.entities[self.queues[q].entity];
        (!self.queues[q].wait_request || self.budget_left(q) >= e.budget / 3)
            && self.budget_timed_out(q)
    }

    /// `__bfq_bfqq_recalc_budget`.
    fn recalc_budget(&mut self, q: QueueId, reason: Expiration) {
        let min_budget = self.min_budget();
        let queue = &self.queues[q];
        let mut budget = if queue.wr_coeff == 1 {
            queue.max_budget
        } else {
            2 * min_budget
        };
        if queue.sync && queue.wr_coeff == 1 {
            budget = match reason {
                Expiration::TooIdle if queue.dispatched > 0 => {
                    (budget * 2).min(self.bfq_max_budget)
                }
                Expiration::TooIdle if budget > 5 * min_budget => budget - 4 * min_budget,
                Expiration::TooIdle => min_budget,
                Expiration::BudgetTimeout => (budget * 2).min(self.bfq_max_budget),
                Expiration::BudgetExhausted => (budget * 4).min(self.bfq_max_budget),
                Expiration::NoMoreRequests => self.entities[queue.entity].service.max(min_budget),
                Expiration::Preempted => return,
            };
        } else if !queue.sync {
            budget = self.bfq_max_budget;
        }
        let mut max_budget = budget;
        if self.budgets_assigned >= BFQ_STATS_MIN_BUDGETS && self.t.max_budget == 0 {
            max_budget = max_budget.min(self.bfq_max_budget);
        }
        self.queues[q].max_budget = max_budget;
        if let Some(next) = self.queues[q].next_rq {
            let e = self.queues[q].entity;
            self.entities[e].budget = max_budget.max(self.serv_to_charge(next, q));
        }
    }

    /// `bfq_bfqq_is_slow`: (slow, milliseconds in service).
    fn is_slow(&self, q: QueueId, compensate: bool) -> (bool, u64) {
        let mut slow = self.seeky(q);
        if !self.queues[q].sync {
            return (false, 0);
        }
        let end = if compensate {
            self.last_idling_start
        } else {
            self.now
        };
        let delta_us = end.saturating_sub(self.last_budget_start) / 1000;
        if delta_us < 1000 {
            let delta_ms = if self.nonrot {
                BFQ_MIN_TT / NS_PER_MS
            } else {
                self.t.slice_idle / NS_PER_MS
            };
            return (slow, delta_ms);
        }
        if delta_us > 20_000 {
            slow = self.entities[self.queues[q].entity].service < self.bfq_max_budget / 2;
        }
        (slow, delta_us / 1000)
    }

    /// `bfq_bfqq_expire`: ends the in-service queue's service slot for `reason`.
    pub(super) fn expire(&mut self, q: QueueId, compensate: bool, reason: Expiration) {
        assert_eq!(
            self.in_service_queue,
            Some(q),
            "expiring a queue not in service"
        );
        self.stats.expirations[reason as usize] += 1;
        let (slow, delta_ms) = self.is_slow(q, compensate);
        let e = self.queues[q].entity;
        if self.queues[q].wr_coeff == 1
            && (slow
                || (reason == Expiration::BudgetTimeout
                    && self.budget_left(q) >= self.entities[e].budget / 3))
        {
            self.charge_time(q, delta_ms);
        }
        let jiffies = self.jiffies();
        if self.t.low_latency && self.queues[q].wr_coeff == 1 {
            self.queues[q].last_wr_start_finish = jiffies;
        }
        if self.t.low_latency && self.wr_max_softrt_rate > 0 && self.queues[q].sort_list.is_empty()
        {
            if self.queues[q].dispatched == 0 {
                self.queues[q].soft_rt_next_start = self.softrt_next_start(q);
            } else {
                self.queues[q].softrt_update = true;
            }
        }
        self.rqs_injected = false;
        self.wait_dispatch = false;
        self.waited_rq = None;
        self.recalc_budget(q, reason);
        // __bfq_bfqq_expire
        // A shared queue gone seeky: its processes no longer cooperate.
        if self.queues[q].coop && self.seeky(q) {
            self.queues[q].split_coop = true;
        }
        if self.queues[q].sort_list.is_empty()
            && !(reason == Expiration::Preempted && self.idling_needed_for_service_guarantees(q))
        {
            if self.queues[q].dispatched == 0 {
                self.queues[q].budget_timeout = jiffies;
            }
            self.del_bfqq_busy(q, true);
        } else {
            self.requeue_bfqq(q, true);
        }
        self.reset_in_service();
        if !self.queues[q].busy
            && reason != Expiration::BudgetTimeout
            && reason != Expiration::BudgetExhausted
        {
            self.queues[q].non_blocking_wait_rq = true;
        } else {
            self.entities[e].service = 0;
        }
        for parent in self.ancestry(e).into_iter().skip(1) {
            self.entities[parent].service = 0;
        }
    }

    /// `bfq_calc_max_budget`: sectors transferable at the peak rate in `timeout_sync`.
    fn calc_max_budget(&self) -> u64 {
        let timeout_ms = (self.t.timeout as u64) * 1000 / u64::from(self.hz.0);
        (self.peak_rate * 1000 * timeout_ms) >> BFQ_RATE_SHIFT
    }

    /// `bfq_reset_rate_computation`.
    fn reset_rate_computation(&mut self, rq: Option<RequestId>) {
        match rq {
            Some(id) => {
                let sectors = u64::from(self.store.get(id).nr_sectors);
                self.last_dispatch = self.now;
                self.first_dispatch = self.now;
                self.peak_rate_samples = 1;
                self.sequential_samples = 0;
                self.tot_sectors_dispatched = sectors;
                self.last_rq_max_size = sectors;
            }
            None => self.peak_rate_samples = 0,
        }
    }

    /// `bfq_update_rate_reset`.
    pub(super) fn update_rate_reset(&mut self, rq: Option<RequestId>) {
        if self.peak_rate_samples >= BFQ_RATE_MIN_SAMPLES
            && self.delta_from_first >= BFQ_RATE_MIN_INTERVAL
        {
            self.delta_from_first = self
                .delta_from_first
                .max(self.last_completion.saturating_sub(self.first_dispatch));
            let rate = (self.tot_sectors_dispatched << BFQ_RATE_SHIFT)
                / (self.delta_from_first / 1000).max(1);
            let sequential_enough = self.sequential_samples >= (3 * self.peak_rate_samples) >> 2
                || rate > self.peak_rate;
            if sequential_enough && rate <= 20 << BFQ_RATE_SHIFT {
                let weight = 9 * self.sequential_samples / self.peak_rate_samples;
                let weight =
                    (u64::from(weight) * self.delta_from_first / BFQ_RATE_REF_INTERVAL).min(8);
                let divisor = 10 - weight;
                self.peak_rate = self.peak_rate * (divisor - 1) / divisor + rate / divisor;
                self.peak_rate = self.peak_rate.max(1);
                if self.t.max_budget == 0 {
                    self.bfq_max_budget = self.calc_max_budget();
                }
            }
        }
        self.reset_rate_computation(rq);
    }

    /// `bfq_update_peak_rate`, at each dispatch.
    pub(super) fn update_peak_rate(&mut self, id: RequestId) {
        let (sector, nr_sectors) = {
            let rq = self.store.get(id);
            (rq.sector, rq.nr_sectors)
        };
        let now = self.now;
        if self.peak_rate_samples == 0 {
            self.reset_rate_computation(Some(id));
        } else if now - self.last_dispatch > 100 * NS_PER_MS && self.tot_rq_in_driver == 0 {
            self.update_rate_reset(Some(id));
        } else {
            self.peak_rate_samples += 1;
            if (self.tot_rq_in_driver > 0 || now.saturating_sub(self.last_completion) < BFQ_MIN_TT)
                && !self.rq_seeky(self.last_position, sector, nr_sectors)
            {
                self.sequential_samples += 1;
            }
            self.tot_sectors_dispatched += u64::from(nr_sectors);
            if !self.peak_rate_samples.is_multiple_of(32) {
                self.last_rq_max_size = self.last_rq_max_size.max(u64::from(nr_sectors));
            } else {
                self.last_rq_max_size = u64::from(nr_sectors);
            }
            self.delta_from_first = now - self.first_dispatch;
            if self.delta_from_first >= BFQ_RATE_REF_INTERVAL {
                self.update_rate_reset(Some(id));
            }
        }
        self.last_position = sector + u64::from(nr_sectors);
        self.last_dispatch = now;
    }
}
