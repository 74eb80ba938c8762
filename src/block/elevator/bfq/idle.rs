//! Device idling (I/O-dispatch plugging) of block/bfq-iosched.c: when the in-service sync queue
//! empties, BFQ may keep it in service for `slice_idle` waiting for its next request.
//!
//! What is kept, by kernel function:
//! - `bfq_asymmetric_scenario`: differing weights among active non-raised queues (the weights
//!   counters), busy queues in more than one class, or more than one group with pending
//!   requests.
//! - `idling_needed_for_service_guarantees`: a raised queue among non-raised busy queues (or
//!   with much in-flight I/O of others), an asymmetric scenario, or the only busy queue.
//! - `idling_boosts_thr_without_issues`: only on rotational or non-queueing devices, for
//!   sequential I/O-bound queues, and never while some queue is weight-raised. This is where
//!   "`slice_idle` is disabled on queueing devices" comes from: on UFS and eMMC CMDQ idling
//!   happens only when a guarantee needs it.
//! - `bfq_better_to_idle`, `bfq_bfqq_must_idle`, `bfq_arm_slice_timer` (the minimum idle time
//!   for seeky queues in symmetric scenarios, 20 ms for raised queues), and the `hw_tag`
//!   estimate (`bfq_update_hw_tag`: a device that held more than 3 requests in 32 samples
//!   queues).
//!
//! Simplifications: none beyond the elevator's (`strict_guarantees` is a tunable).

use super::budget::BFQ_MIN_TT;
use super::queue::QueueId;
use super::Bfq;
use crate::units::NS_PER_MS;

/// `BFQ_HW_QUEUE_THRESHOLD = 3`, `BFQ_HW_QUEUE_SAMPLES = 32`.
const BFQ_HW_QUEUE_THRESHOLD: u32 = 3;
const BFQ_HW_QUEUE_SAMPLES: u32 = 32;

impl Bfq {
    /// `bfq_tot_busy_queues`.
    pub(super) fn tot_busy_queues(&self) -> u32 {
        self.busy_queues.iter().sum()
    }

    /// `bfq_asymmetric_scenario`.
    pub(super) fn asymmetric_scenario(&self, q: Option<QueueId>) -> bool {
        let smallest_weight = q.is_some_and(|q| {
            self.queues[q].weight_counter.is_some()
                && self.queues[q].weight_counter == self.queue_weights.keys().next().copied()
        });
        let varied_queue_weights = !smallest_weight && self.queue_weights.len() >= 2;
        let classes_busy = self.busy_queues.iter().filter(|&&n| n > 0).count();
        varied_queue_weights || classes_busy > 1 || self.num_groups_with_pending_reqs > 1
    }

    /// `idling_needed_for_service_guarantees`.
    pub(super) fn idling_needed_for_service_guarantees(&self, q: QueueId) -> bool {
        let tot_busy = self.tot_busy_queues();
        let queue = &self.queues[q];
        // No point in idling for a queue no process will send requests to.
        if queue.process_refs == 0 {
            return false;
        }
        (queue.wr_coeff > 1
            && (self.wr_busy_queues < tot_busy || self.tot_rq_in_driver >= queue.dispatched + 4))
            || self.asymmetric_scenario(Some(q))
            || tot_busy == 1
    }

    /// `idling_boosts_thr_without_issues`.
    pub(super) fn idling_boosts_thr_without_issues(&self, q: QueueId) -> bool {
        // No point in idling for a queue no process will send requests to.
        if self.queues[q].process_refs == 0 {
            return false;
        }
        let hw_tag = self.hw_tag != 0;
        let rot_without_queueing = !self.nonrot && !hw_tag;
        let queue = &self.queues[q];
        let sequential_and_io_bound = !self.seeky(q) && queue.io_bound && queue.has_short_ttime;
        let idling_boosts_thr =
            rot_without_queueing || ((!self.nonrot || !hw_tag) && sequential_and_io_bound);
        idling_boosts_thr && self.wr_busy_queues == 0
    }

    /// `bfq_better_to_idle`.
    pub(super) fn better_to_idle(&self, q: QueueId) -> bool {
        if self.t.strict_guarantees {
            return true;
        }
        let queue = &self.queues[q];
        if self.t.slice_idle == 0 || !queue.sync || queue.ioprio_class_idx == 2 {
            return false;
        }
        self.idling_boosts_thr_without_issues(q) || self.idling_needed_for_service_guarantees(q)
    }

    /// `bfq_bfqq_must_idle`.
    pub(super) fn must_idle(&self, q: QueueId) -> bool {
        self.queues[q].sort_list.is_empty() && self.better_to_idle(q)
    }

    /// `bfq_arm_slice_timer`.
    pub(super) fn arm_slice_timer(&mut self) {
        let q = self
            .in_service_queue
            .expect("idling without a queue in service");
        self.queues[q].wait_request = true;
        let mut slice = self.t.slice_idle;
        if self.seeky(q) && self.queues[q].wr_coeff == 1 && !self.asymmetric_scenario(Some(q)) {
            slice = slice.min(BFQ_MIN_TT);
        } else if self.queues[q].wr_coeff > 1 {
            slice = slice.max(20 * NS_PER_MS);
        }
        self.last_idling_start = self.now;
        self.last_idling_start_jiffies = self.jiffies();
        self.idle_timer = Some(self.now + slice);
        self.stats.idle_slices += 1;
    }

    /// `bfq_update_hw_tag`, at each completion.
    pub(super) fn update_hw_tag(&mut self) {
        self.max_rq_in_driver = self.max_rq_in_driver.max(self.tot_rq_in_driver);
        if self.hw_tag == 1 {
            return;
        }
        if self.tot_rq_in_driver + self.store.len() as u32 <= BFQ_HW_QUEUE_THRESHOLD {
            return;
        }
        if let Some(q) = self.in_service_queue {
            let queue = &self.queues[q];
            if queue.has_short_ttime
                && queue.dispatched + queue.queued[0] + queue.queued[1] < BFQ_HW_QUEUE_THRESHOLD
                && self.tot_rq_in_driver < BFQ_HW_QUEUE_THRESHOLD
            {
                return;
            }
        }
        self.hw_tag_samples += 1;
        if self.hw_tag_samples <= BFQ_HW_QUEUE_SAMPLES {
            return;
        }
        self.hw_tag = i32::from(self.max_rq_in_driver > BFQ_HW_QUEUE_THRESHOLD);
        self.max_rq_in_driver = 0;
        self.hw_tag_samples = 0;
        self.nonrot_with_queueing = self.nonrot && self.hw_tag == 1;
    }
}
