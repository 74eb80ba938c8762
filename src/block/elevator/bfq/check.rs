//! The block layer's checks of BFQ's accounting (debug builds, `mobistack run --check`): the
//! counters `struct bfq_data` and `struct bfq_queue` keep incrementally, recounted from the
//! queues and requests they count.

use super::{Bfq, QueueId};
use crate::block::elevator::{check_count, check_sort_and_fifo};
use crate::block::request::Request;

impl Bfq {
    /// Every check below; `dispatched` are the requests BFQ dispatched that have not completed.
    pub(super) fn check_accounting(&self, dispatched: &[&Request]) -> Result<(), String> {
        self.store.check()?;
        self.check_queues(dispatched)?;
        self.check_busy()?;
        self.check_groups_and_weights()
    }

    /// Per `bfq_queue`: `sort_list` and `fifo` hold its queued requests (`RQ_BFQQ`),
    /// `queued[sync]` counts them, `next_rq` and the QASIO list are among them, `dispatched`
    /// counts its requests in the driver; `tot_rq_in_driver` is the sum.
    fn check_queues(&self, dispatched: &[&Request]) -> Result<(), String> {
        let mut dispatched_of = vec![0u32; self.queues.len()];
        for rq in dispatched {
            match self.rq_queue.get(&rq.id) {
                Some(&q) => dispatched_of[q] += 1,
                None => return Err(format!("BFQ: dispatched R#{} has no RQ_BFQQ", rq.id)),
            }
        }
        let mut listed = 0;
        for (q, queue) in self.queues.iter().enumerate() {
            let what = format!("BFQ queue {q} (pid {})", queue.pid);
            check_sort_and_fifo(&what, &queue.sort_list, &queue.fifo, &self.store)?;
            listed += queue.fifo.len();
            if let Some(&id) = queue
                .fifo
                .iter()
                .find(|id| self.rq_queue.get(id) != Some(&q))
            {
                return Err(format!(
                    "{what}: R#{id} is queued in it but RQ_BFQQ says otherwise"
                ));
            }
            for sync in [false, true] {
                let count = queue
                    .fifo
                    .iter()
                    .filter(|&&id| self.store.get(id).is_sync() == sync)
                    .count();
                check_count(
                    &format!("{what} queued[{}]", usize::from(sync)),
                    u64::from(queue.queued[usize::from(sync)]),
                    "such requests are queued in it",
                    count as u64,
                )?;
            }
            if let Some(next) = queue.next_rq.filter(|id| !queue.fifo.contains(id)) {
                return Err(format!("{what}: next_rq R#{next} is not queued in it"));
            }
            if queue.next_rq.is_none() != queue.fifo.is_empty() {
                return Err(format!(
                    "{what}: next_rq {:?} with {} requests queued",
                    queue.next_rq,
                    queue.fifo.len()
                ));
            }
            if let Some(id) = queue.qasio.iter().find(|id| !queue.fifo.contains(id)) {
                return Err(format!("{what}: QASIO R#{id} is not queued in it"));
            }
            check_count(
                &format!("{what} dispatched"),
                u64::from(queue.dispatched),
                "of its requests are in the driver",
                u64::from(dispatched_of[q]),
            )?;
        }
        check_count(
            "BFQ's queued requests",
            self.store.len() as u64,
            "are on its queues' fifos",
            listed as u64,
        )?;
        check_count(
            "bfqd->tot_rq_in_driver",
            u64::from(self.tot_rq_in_driver),
            "requests are dispatched and not completed",
            dispatched.len() as u64,
        )?;
        check_count(
            "RQ_BFQQ entries",
            self.rq_queue.len() as u64,
            "requests are queued or dispatched",
            (self.store.len() + dispatched.len()) as u64,
        )
    }

    /// A queue with requests is busy (`bfq_add_bfqq_busy` before its first request is
    /// served); `busy_queues[class]` counts the busy queues of each class and
    /// `wr_busy_queues` the weight-raised ones among them.
    fn check_busy(&self) -> Result<(), String> {
        if let Some(q) = (0..self.queues.len())
            .find(|&q| !self.queues[q].busy && !self.queues[q].fifo.is_empty())
        {
            return Err(format!(
                "BFQ queue {q} has {} requests but is not busy",
                self.queues[q].fifo.len()
            ));
        }
        for class in 0..self.busy_queues.len() {
            let busy = self
                .queues
                .iter()
                .filter(|queue| queue.busy && queue.busy_class_idx == class)
                .count();
            check_count(
                &format!("bfqd->busy_queues[{class}]"),
                u64::from(self.busy_queues[class]),
                "queues of the class are busy",
                busy as u64,
            )?;
        }
        let raised = self
            .queues
            .iter()
            .filter(|queue| queue.busy && queue.wr_coeff > 1)
            .count();
        check_count(
            "bfqd->wr_busy_queues",
            u64::from(self.wr_busy_queues),
            "busy queues are weight-raised",
            raised as u64,
        )
    }

    /// `num_queues_with_pending_reqs` of each group counts its queues flagged
    /// `in_groups_with_pending_reqs`, `num_groups_with_pending_reqs` the groups with one;
    /// `queue_weights_tree` counts the queues with a weight counter, by weight.
    fn check_groups_and_weights(&self) -> Result<(), String> {
        let mut groups_with_pending = 0;
        for (g, group) in self.groups.iter().enumerate() {
            let pending = self
                .queues
                .iter()
                .filter(|queue| queue.group == g && queue.in_groups_with_pending_reqs)
                .count();
            check_count(
                &format!("BFQ group {g} num_queues_with_pending_reqs"),
                u64::from(group.num_queues_with_pending_reqs),
                "of its queues are flagged with pending requests",
                pending as u64,
            )?;
            groups_with_pending += u64::from(pending > 0);
        }
        check_count(
            "bfqd->num_groups_with_pending_reqs",
            u64::from(self.num_groups_with_pending_reqs),
            "groups have queues with pending requests",
            groups_with_pending,
        )?;
        let mut weights = std::collections::BTreeMap::<u32, u32>::new();
        let counted: Vec<(QueueId, u32)> = self
            .queues
            .iter()
            .enumerate()
            .filter_map(|(q, queue)| queue.weight_counter.map(|w| (q, w)))
            .collect();
        for &(_, weight) in &counted {
            *weights.entry(weight).or_default() += 1;
        }
        if weights != self.queue_weights {
            return Err(format!(
                "bfqd->queue_weights_tree {:?} but the queues' weight counters give {weights:?}",
                self.queue_weights
            ));
        }
        Ok(())
    }
}

/// The checks can fail: each counter broken on purpose is found.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::elevator::{Elevator, QueueTraits};
    use crate::block::request::test_support::request;
    use crate::dev::IoOp;

    /// Breaks one counter of the scheduler.
    type Break = fn(&mut Bfq);

    fn bfq_with_a_dispatched_read() -> (Bfq, Request) {
        let traits = QueueTraits {
            nonrot: true,
            queue_depth: 1,
        };
        let hz = crate::kernel::Hz(250);
        let mut bfq = Bfq::new(traits, hz, super::super::BfqTunables::defaults(hz));
        Elevator::add_request(&mut bfq, 0, request(1, IoOp::Read, 0, 8, 1));
        Elevator::add_request(&mut bfq, 0, request(2, IoOp::Read, 1000, 8, 2));
        Elevator::add_request(&mut bfq, 0, request(3, IoOp::Write, 5000, 8, 3));
        let dispatched = bfq.dispatch_request(0).expect("a request");
        bfq.check(&[&dispatched]).expect("consistent");
        (bfq, dispatched)
    }

    #[test]
    fn bfq_counters_that_drift_from_its_queues_are_found() {
        let breaks: [(&str, Break); 6] = [
            ("bfqd->tot_rq_in_driver", |bfq| bfq.tot_rq_in_driver += 1),
            ("bfqd->busy_queues[1]", |bfq| bfq.busy_queues[1] += 1),
            ("bfqd->wr_busy_queues", |bfq| bfq.wr_busy_queues += 1),
            ("queued[1]", |bfq| bfq.queues[1].queued[1] += 1),
            ("num_groups_with_pending_reqs", |bfq| {
                bfq.num_groups_with_pending_reqs += 1
            }),
            ("queue_weights_tree", |bfq| {
                *bfq.queue_weights.entry(7).or_default() += 1
            }),
        ];
        for (name, break_it) in breaks {
            let (mut bfq, dispatched) = bfq_with_a_dispatched_read();
            break_it(&mut bfq);
            let what = bfq.check(&[&dispatched]).expect_err(name);
            assert!(what.contains(name), "{name}: {what}");
        }
    }
}
