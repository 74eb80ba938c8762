//! Waker detection and I/O injection of block/bfq-iosched.c.
//!
//! What is kept, by kernel function:
//! - `bfq_check_waker`: a sync queue with a long think time that gets its next request within
//!   4 ms of a completion of another queue, three times in a row (within 128 `slice_idle`s),
//!   has that queue as its waker (the jbd2 pattern: an fsync-ing task waits for the journal
//!   thread's commit, then continues).
//! - In `bfq_select_queue`, while the in-service queue is plugged (idling, or waiting for its
//!   in-flight requests), a request is injected, in order of preference, from: the same
//!   process's async queue; the in-service queue's waker; a queue it wakes; or any active queue
//!   with budget left, up to the queue's inject limit (`bfq_choose_bfqq_for_injection`, one
//!   large request at a time on flash).
//! - The inject limit (`bfq_update_inject_limit`, `bfq_reset_inject_limit`): the total
//!   service time of the queue's first request after it emptied, without injection, is the
//!   baseline; the limit grows while injection inflates it by less than half, shrinks
//!   otherwise, and is reset each second.
//!
//! QASIO (not in the kernel): a queue with a boosted request is injected right after the
//! process's own async queue (see the `bfq` module doc).
//!
//! Simplifications: a waker merged into another queue stays the waker (`bfq_waker_bfqq` is
//! applied only when a split gives a process a new queue, [`super::merge`]).

use super::queue::QueueId;
use super::Bfq;
use crate::units::NS_PER_MS;

impl Bfq {
    /// `bfq_check_waker`.
    pub(super) fn check_waker(&mut self, q: QueueId) {
        let now = self.now;
        let Some(waker) = self.last_completed_rq_bfqq else {
            return;
        };
        if waker == q
            || self.queues[q].has_short_ttime
            || now.saturating_sub(self.last_completion) >= 4 * NS_PER_MS
        {
            return;
        }
        let slice_idle = self.t.slice_idle;
        let queue = &mut self.queues[q];
        if queue.tentative_waker != Some(waker)
            || now > queue.waker_detection_started + 128 * slice_idle
        {
            queue.tentative_waker = Some(waker);
            queue.num_waker_detections = 1;
            queue.waker_detection_started = now;
        } else {
            queue.num_waker_detections += 1;
        }
        if queue.num_waker_detections == 3 {
            let old = queue.waker.replace(waker);
            queue.tentative_waker = None;
            if let Some(old) = old {
                self.queues[old].woken.retain(|&x| x != q);
            }
            self.queues[waker].woken.retain(|&x| x != q);
            self.queues[waker].woken.insert(0, q);
            self.stats.wakers_detected += 1;
        }
    }

    /// `bfq_reset_inject_limit`.
    pub(super) fn reset_inject_limit(&mut self, q: QueueId) {
        let jiffies = self.jiffies();
        let queue = &mut self.queues[q];
        queue.last_serv_time_ns = 0;
        self.waited_rq = None;
        queue.inject_limit = u32::from(!queue.has_short_ttime);
        queue.decrease_time_jif = jiffies;
    }

    /// `bfq_update_inject_limit`, when the measured first request of `q` completes.
    pub(super) fn update_inject_limit(&mut self, q: QueueId) {
        let tot_time_ns = self.now.saturating_sub(self.last_empty_occupied_ns);
        let jiffies = self.jiffies();
        let (rqs_injected, in_driver, max_in_driver) = (
            self.rqs_injected,
            self.tot_rq_in_driver,
            self.max_rq_in_driver,
        );
        let queue = &mut self.queues[q];
        let old_limit = queue.inject_limit;
        if queue.last_serv_time_ns > 0 && rqs_injected {
            let threshold = (queue.last_serv_time_ns * 3) >> 1;
            if tot_time_ns >= threshold && old_limit > 0 {
                queue.inject_limit -= 1;
                queue.decrease_time_jif = jiffies;
            } else if tot_time_ns < threshold && old_limit <= max_in_driver {
                queue.inject_limit += 1;
            }
        }
        if (queue.last_serv_time_ns == 0 && in_driver == 1) || tot_time_ns < queue.last_serv_time_ns
        {
            if queue.last_serv_time_ns == 0 {
                queue.inject_limit = old_limit.max(1);
            }
            queue.last_serv_time_ns = tot_time_ns;
        } else if !rqs_injected && in_driver == 1 {
            queue.last_serv_time_ns = tot_time_ns;
        }
        self.waited_rq = None;
        self.rqs_injected = false;
    }

    /// The queue `q` can serve its next request from its budget.
    fn can_serve_next(&self, q: QueueId) -> bool {
        let queue = &self.queues[q];
        queue.busy
            && queue
                .next_rq
                .is_some_and(|next| self.serv_to_charge(next, q) <= self.budget_left(q))
    }

    /// `bfq_choose_bfqq_for_injection`.
    fn choose_bfqq_for_injection(&mut self) -> Option<QueueId> {
        let in_service = self
            .in_service_queue
            .expect("injection without a queue in service");
        let isq = &self.queues[in_service];
        let mut limit = isq.inject_limit;
        let always_inject = isq.wr_coeff == 1 || !isq.has_short_ttime;
        // As in the kernel, `bfq_slice_idle` (ns) is added to a jiffies value here, so this
        // temporary raise practically never happens.
        if limit == 0
            && isq.last_serv_time_ns == 0
            && isq.wait_request
            && self.last_idling_start_jiffies + self.t.slice_idle as i64 <= self.jiffies()
        {
            limit = 1;
        }
        if self.tot_rq_in_driver >= limit {
            return None;
        }
        let candidates = self.active_list.clone();
        for q in candidates {
            let queue = &self.queues[q];
            let Some(next) = queue.next_rq else {
                continue;
            };
            if (always_inject || queue.wr_coeff > 1)
                && self.serv_to_charge(next, q) <= self.budget_left(q)
            {
                let large = self.store.get(next).nr_sectors >= super::queue::BFQQ_SECT_THR_NONROT;
                if self.nonrot && large && self.tot_rq_in_driver >= 1 {
                    continue;
                }
                self.rqs_injected = true;
                return Some(q);
            }
        }
        None
    }

    /// The injection branch of `bfq_select_queue`, for the plugged in-service queue `q`.
    pub(super) fn choose_injection(&mut self, q: QueueId) -> Option<QueueId> {
        let pid = self.queues[q].pid;
        let async_queue = self
            .bics
            .get(&pid)
            .and_then(|bic| bic.async_queue)
            .filter(|&a| self.queues[a].busy && self.queues[a].next_rq.is_some());
        let chosen = if let Some(a) = async_queue.filter(|&a| {
            let next = self.queues[a].next_rq.expect("checked");
            self.store.get(next).task.pid == pid && self.can_serve_next(a)
        }) {
            self.stats.injected_own_async += 1;
            Some(a)
        } else if let Some(boosted) = self.qasio_queue() {
            // QASIO (not in the kernel; module doc of `bfq`): a request a task blocks on.
            self.rqs_injected = true;
            self.stats.qasio_served_out_of_turn += 1;
            Some(boosted)
        } else if let Some(w) = self.queues[q].waker.filter(|&w| self.can_serve_next(w)) {
            self.stats.injected_waker += 1;
            Some(w)
        } else if let Some(b) = self.queues[q]
            .woken
            .first()
            .copied()
            .filter(|&b| self.can_serve_next(b))
        {
            self.stats.injected_woken += 1;
            Some(b)
        } else if !self.idling_boosts_thr_without_issues(q)
            && (self.queues[q].wr_coeff == 1
                || self.wr_busy_queues > 1
                || !self.queues[q].has_short_ttime)
        {
            let chosen = self.choose_bfqq_for_injection();
            if chosen.is_some() {
                self.stats.injected_other += 1;
            }
            chosen
        } else {
            None
        };
        chosen
    }
}
