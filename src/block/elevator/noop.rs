//! noop: a FIFO with back merges (block/noop-iosched.c, 3.10).
//!
//! Linux's noop keeps one list, adds at the tail (`noop_add_request`) and dispatches from the head
//! (`noop_dispatch`). It has no `elevator_merge_fn`, so only the generic back-merge hash of
//! `elv_merge` merges bios into its requests; there are no front merges.
//!
//! Simplifications: none beyond those of the elevator interface.

use super::{Elevator, SectorIndex};
use crate::block::request::{Bio, MergeKind, Request, RequestId};
use crate::units::Nanos;
use std::collections::VecDeque;

/// Queued requests at or below which the back-merge lookup scans the queue instead of keeping
/// the hash (under a deep device queue noop rarely holds more than one or two requests).
const SCAN_QUEUED_MAX: usize = 8;

/// The queued requests themselves in a FIFO ring, and the back-merge hash beside it: a
/// request is stored once and leaves from the front without a lookup (a store by id with two
/// sector indexes cost six hash operations per request, and noop never front-merges). The
/// hash is kept only while the queue is longer than [`SCAN_QUEUED_MAX`]; a short queue is
/// scanned, which finds the same request.
#[derive(Debug, Default)]
pub struct Noop {
    /// `noop_data.queue`, in insertion order.
    queue: VecDeque<Request>,
    /// `elv_rqhash`: the queued requests' ids by end sector, each sector's in increasing order
    /// (the order `elv_merge` tries them), while `indexed`.
    by_end: SectorIndex,
    /// Whether `by_end` holds every queued request: from when the queue grows past
    /// [`SCAN_QUEUED_MAX`] until it empties.
    indexed: bool,
}

impl Noop {
    pub fn new() -> Noop {
        Noop::default()
    }

    /// The position of the request a bio at `bio` back-merges into: the lowest id among the
    /// queued requests ending where it starts that may take it (`elv_rqhash_find`).
    fn find_back_merge(&self, bio: &Bio, max_sectors: u32) -> Option<usize> {
        if !self.indexed {
            return self
                .queue
                .iter()
                .enumerate()
                .filter(|(_, rq)| rq.end_sector() == bio.sector && rq.merge_ok(bio, max_sectors))
                .min_by_key(|(_, rq)| rq.id)
                .map(|(at, _)| at);
        }
        // Bound: the queue's length per candidate id.
        self.by_end.at(bio.sector).iter().find_map(|&id| {
            let at = self
                .queue
                .iter()
                .position(|rq| rq.id == id)
                .expect("an indexed request is queued");
            self.queue[at].merge_ok(bio, max_sectors).then_some(at)
        })
    }
}

impl Elevator for Noop {
    fn name(&self) -> &'static str {
        "noop"
    }

    fn merge_bio(
        &mut self,
        _now: Nanos,
        bio: &Bio,
        max_sectors: u32,
    ) -> Option<(RequestId, MergeKind)> {
        let at = self.find_back_merge(bio, max_sectors)?;
        let rq = &mut self.queue[at];
        if self.indexed {
            assert!(self.by_end.remove(rq.end_sector(), rq.id));
        }
        rq.merge_bio(bio, MergeKind::Back);
        if self.indexed {
            assert!(self.by_end.insert(rq.end_sector(), rq.id));
        }
        Some((rq.id, MergeKind::Back))
    }

    fn add_request(&mut self, now: Nanos, mut rq: Request) {
        rq.inserted_ns = now;
        if self.indexed {
            assert!(
                self.by_end.insert(rq.end_sector(), rq.id),
                "request queued twice"
            );
        }
        self.queue.push_back(rq);
        if !self.indexed && self.queue.len() > SCAN_QUEUED_MAX {
            for rq in &self.queue {
                assert!(
                    self.by_end.insert(rq.end_sector(), rq.id),
                    "request queued twice"
                );
            }
            self.indexed = true;
        }
    }

    fn dispatch_request(&mut self, _now: Nanos) -> Option<Request> {
        let rq = self.queue.pop_front()?;
        if self.indexed {
            assert!(self.by_end.remove(rq.end_sector(), rq.id));
            if self.queue.is_empty() {
                self.indexed = false;
            }
        }
        Some(rq)
    }

    fn completed_request(&mut self, _now: Nanos, _rq: &Request) {}

    fn queued(&self) -> usize {
        self.queue.len()
    }

    fn queued_requests(&self) -> Vec<&Request> {
        self.queue.iter().collect()
    }

    /// `elv_rqhash` indexes every request of `noop_data.queue` while it is kept.
    fn check(&self, _dispatched: &[&Request]) -> Result<(), String> {
        let indexed = if self.indexed { self.queue.len() } else { 0 };
        super::check_count(
            "noop's elv_rqhash",
            self.by_end.len() as u64,
            "requests are on noop_data.queue and indexed",
            indexed as u64,
        )?;
        match self
            .queue
            .iter()
            .find(|rq| self.indexed && !self.by_end.at(rq.end_sector()).contains(&rq.id))
        {
            Some(rq) => Err(format!(
                "noop: R#{} is not in elv_rqhash at its end sector {}",
                rq.id,
                rq.end_sector()
            )),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::request::test_support::*;
    use crate::block::request::MAX_REQUEST_SECTORS;
    use crate::dev::IoOp;

    #[test]
    fn noop_is_fifo_and_back_merges_only() {
        let mut noop = Noop::new();
        noop.add_request(0, request(1, IoOp::Write, 1000, 8, 1));
        noop.add_request(1, request(2, IoOp::Read, 10, 8, 2));
        noop.add_request(2, request(3, IoOp::Write, 500, 8, 3));
        let back = bio(10, IoOp::Write, 1008, 8, 1);
        assert_eq!(
            noop.merge_bio(3, &back, MAX_REQUEST_SECTORS),
            Some((1, MergeKind::Back))
        );
        let front = bio(11, IoOp::Write, 492, 8, 3);
        assert_eq!(noop.merge_bio(3, &front, MAX_REQUEST_SECTORS), None);
        let order: Vec<_> = std::iter::from_fn(|| noop.dispatch_request(4))
            .map(|rq| (rq.id, rq.nr_sectors))
            .collect();
        assert_eq!(order, vec![(1, 16), (2, 8), (3, 8)]);
        assert!(!noop.has_work());
    }

    /// The ring with its merge hash behaves as the plainest noop: a vector in insertion order
    /// whose merge tries, lowest id first, the requests ending where the bio starts.
    #[test]
    fn noop_matches_a_plain_fifo_under_random_merges_and_dispatches() {
        let mut noop = Noop::new();
        let mut model: Vec<Request> = Vec::new();
        let mut rng = crate::sim::rng::Rng::new(0x9e37_79b9_7f4a_7c15);
        let mut next = move || rng.next_u64();
        let mut id = 0u64;
        for step in 0..20_000u64 {
            // Phases that fill the queue (the hash) and drain it (the scan).
            let roll = (next() % 10 + if (step / 500) % 2 == 0 { 0 } else { 3 }).min(9);
            // Few sectors, so that requests end where others end and bios find several.
            let sector = 8 * (next() % 24);
            let sectors = 8 * (1 + next() % 3) as u32;
            let op = if next() % 4 == 0 {
                IoOp::Write
            } else {
                IoOp::Read
            };
            if roll < 4 {
                id += 1;
                let rq = request(id, op, sector, sectors, 1);
                noop.add_request(step, rq.clone());
                let mut expected = rq;
                expected.inserted_ns = step;
                model.push(expected);
            } else if roll < 7 {
                id += 1;
                let bio = bio(id, op, sector, sectors, 1);
                let max_sectors = 8 * (2 + next() % 6) as u32;
                let mut candidates: Vec<usize> = (0..model.len())
                    .filter(|&at| model[at].end_sector() == bio.sector)
                    .collect();
                candidates.sort_by_key(|&at| model[at].id);
                let found = candidates
                    .into_iter()
                    .find(|&at| model[at].merge_ok(&bio, max_sectors));
                let expected = found.map(|at| {
                    model[at].merge_bio(&bio, MergeKind::Back);
                    (model[at].id, MergeKind::Back)
                });
                assert_eq!(noop.merge_bio(step, &bio, max_sectors), expected);
            } else {
                let expected = (!model.is_empty()).then(|| model.remove(0));
                assert_eq!(noop.dispatch_request(step), expected);
            }
            assert_eq!(noop.queued(), model.len());
        }
    }
}

/// The checks can fail: a request missing from the back-merge hash is found.
#[cfg(test)]
mod check_tests {
    use super::*;
    use crate::block::request::test_support::request;
    use crate::dev::IoOp;

    #[test]
    fn noop_elv_rqhash_that_misses_a_request_is_found() {
        let mut noop = Noop::new();
        for i in 0..=SCAN_QUEUED_MAX as u64 {
            noop.add_request(0, request(i + 1, IoOp::Write, 100 * i, 8, 1));
        }
        noop.check(&[]).expect("consistent");
        assert!(noop.by_end.remove(8, 1));
        let what = noop.check(&[]).expect_err("hash");
        assert!(what.contains("noop's elv_rqhash"), "{what}");
    }
}
