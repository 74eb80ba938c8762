//! noop: a FIFO with back merges (block/noop-iosched.c, 3.10).
//!
//! Linux's noop keeps one list, adds at the tail (`noop_add_request`) and dispatches from the head
//! (`noop_dispatch`). It has no `elevator_merge_fn`, so only the generic back-merge hash of
//! `elv_merge` merges bios into its requests; there are no front merges.
//!
//! Simplifications: none beyond those of the elevator interface.

use super::{Elevator, RqStore};
use crate::block::request::{Bio, MergeKind, Request, RequestId};
use crate::units::Nanos;
use std::collections::VecDeque;

#[derive(Debug, Default)]
pub struct Noop {
    /// `noop_data.queue`, in insertion order.
    queue: VecDeque<RequestId>,
    store: RqStore,
}

impl Noop {
    pub fn new() -> Noop {
        Noop::default()
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
        let (id, kind, _) = self.store.merge(bio, max_sectors, false, |_| true)?;
        Some((id, kind))
    }

    fn add_request(&mut self, now: Nanos, mut rq: Request) {
        rq.inserted_ns = now;
        self.queue.push_back(rq.id);
        self.store.insert(rq);
    }

    fn dispatch_request(&mut self, _now: Nanos) -> Option<Request> {
        let id = self.queue.pop_front()?;
        Some(self.store.remove(id))
    }

    fn completed_request(&mut self, _now: Nanos, _rq: &Request) {}

    fn queued(&self) -> usize {
        assert_eq!(self.queue.len(), self.store.len());
        self.queue.len()
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
}
