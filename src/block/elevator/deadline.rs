//! deadline: the legacy (single-queue) deadline scheduler of block/deadline-iosched.c, Linux 3.10.
//!
//! Requests sit in two structures per data direction: a sort list by sector and a FIFO with a
//! per-request expiry time. Dispatch runs in *batches*: it keeps sweeping upward in sector order
//! (`next_rq`) for up to `fifo_batch` requests, then chooses a direction again, preferring reads
//! unless writes have been passed over `writes_starved` times. At the start of a batch, if the
//! oldest request of the chosen direction has expired (`deadline_check_fifo`) or the sweep has run
//! out, dispatch restarts from the FIFO head.
//!
//! Kept from 3.10: `deadline_dispatch_requests`, `deadline_check_fifo`, `deadline_move_request`
//! (`next_rq` reset for both directions, `deadline_latter_request`), `deadline_merge` (front
//! merges when `front_merges`), `deadline_merged_request` (re-sort after a front merge).
//!
//! Simplifications:
//! - Expiry times are jiffies (`rq_set_fifo_time(rq, jiffies + dd->fifo_expire[data_dir])`,
//!   `time_after_eq(jiffies, rq_fifo_time(rq))`) at the run's HZ; the request keeps the time of
//!   that tick.
//! - Discards and flushes count as writes (`rq_data_dir`), as in Linux; flush requests never reach
//!   the elevator (the request queue handles them).

use super::{Elevator, RqStore};
use crate::block::request::{Bio, MergeKind, Request, RequestId};
use crate::kernel::Hz;
use crate::units::Nanos;
use std::collections::{BTreeSet, VecDeque};

/// `writes_starved = 2`: read batches that may pass over waiting writes (block/deadline-iosched.c).
pub const WRITES_STARVED: u32 = 2;
/// `fifo_batch = 16`: requests per sequential batch (block/deadline-iosched.c).
pub const FIFO_BATCH: u32 = 16;

const READ: usize = 0;
const WRITE: usize = 1;

fn data_dir(rq: &Request) -> usize {
    if rq.is_write() {
        WRITE
    } else {
        READ
    }
}

/// Tunables in the kernel's units (times in jiffies).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadlineTunables {
    /// `fifo_expire[READ]`, `fifo_expire[WRITE]`, jiffies.
    pub fifo_expire: [u64; 2],
    pub fifo_batch: u32,
    pub writes_starved: u32,
    /// `front_merges = 1`.
    pub front_merges: bool,
}

impl DeadlineTunables {
    /// The 3.10 defaults at tick rate `hz` (block/deadline-iosched.c): `read_expire = HZ / 2`,
    /// `write_expire = 5 * HZ`.
    pub fn defaults(hz: Hz) -> Self {
        DeadlineTunables {
            fifo_expire: [hz.over(2), hz.frac(5, 1)],
            fifo_batch: FIFO_BATCH,
            writes_starved: WRITES_STARVED,
            front_merges: true,
        }
    }
}

/// `struct deadline_data`.
#[derive(Debug)]
pub struct Deadline {
    /// `sort_list[dir]`: (sector, id).
    sort_list: [BTreeSet<(u64, RequestId)>; 2],
    /// `fifo_list[dir]`: ids in arrival order; expiry times are non-decreasing along it.
    fifo_list: [VecDeque<RequestId>; 2],
    /// `next_rq[dir]`: where the current sweep continues.
    next_rq: [Option<RequestId>; 2],
    /// Requests dispatched in the current batch.
    batching: u32,
    /// Times reads were chosen while writes waited.
    starved: u32,
    store: RqStore,
    pub tunables: DeadlineTunables,
    hz: Hz,
}

impl Deadline {
    /// deadline with the 3.10 defaults at tick rate `hz`.
    pub fn new(hz: Hz) -> Deadline {
        Deadline::with_tunables(hz, DeadlineTunables::defaults(hz))
    }

    pub fn with_tunables(hz: Hz, tunables: DeadlineTunables) -> Deadline {
        assert!(tunables.fifo_batch > 0);
        Deadline {
            sort_list: Default::default(),
            fifo_list: Default::default(),
            next_rq: [None, None],
            batching: 0,
            starved: 0,
            store: RqStore::default(),
            tunables,
            hz,
        }
    }

    /// `deadline_latter_request`: the next request in sector order after `rq`.
    fn latter_request(&self, dir: usize, sector: u64, id: RequestId) -> Option<RequestId> {
        use std::ops::Bound::{Excluded, Unbounded};
        self.sort_list[dir]
            .range((Excluded((sector, id)), Unbounded))
            .next()
            .map(|&(_, next)| next)
    }

    /// `deadline_check_fifo`: whether the oldest request of `dir` has expired.
    fn check_fifo(&self, dir: usize, now: Nanos) -> bool {
        self.fifo_list[dir].front().is_some_and(|&id| {
            self.hz.jiffies(now) >= self.hz.jiffies(self.store.get(id).fifo_time_ns)
        })
    }

    /// `deadline_remove_request` + `deadline_move_request`: takes `id` out of the scheduler and
    /// sets up the sweep to continue after it.
    fn move_request(&mut self, id: RequestId) -> Request {
        let (dir, sector) = {
            let rq = self.store.get(id);
            (data_dir(rq), rq.sector)
        };
        self.next_rq = [None, None];
        self.next_rq[dir] = self.latter_request(dir, sector, id);
        assert!(self.sort_list[dir].remove(&(sector, id)));
        let position = self.fifo_list[dir]
            .iter()
            .position(|&queued| queued == id)
            .expect("request missing from its fifo");
        self.fifo_list[dir].remove(position);
        self.store.remove(id)
    }

    /// `deadline_dispatch_requests` (without the force path, which drains the same way).
    fn dispatch_requests(&mut self, now: Nanos) -> Option<RequestId> {
        let reads = !self.fifo_list[READ].is_empty();
        let writes = !self.fifo_list[WRITE].is_empty();
        // Batches are reads XOR writes: continue the current one if still entitled.
        if let Some(id) = self.next_rq[WRITE].or(self.next_rq[READ]) {
            if self.batching < self.tunables.fifo_batch {
                self.batching += 1;
                return Some(id);
            }
        }
        let dir = if reads {
            // `writes && dd->starved++ >= writes_starved`: counts only while writes wait.
            let starving = writes && {
                let starved = self.starved;
                self.starved += 1;
                starved >= self.tunables.writes_starved
            };
            if starving {
                self.starved = 0;
                WRITE
            } else {
                READ
            }
        } else if writes {
            self.starved = 0;
            WRITE
        } else {
            return None;
        };
        // Restart from the oldest request if it expired or the sweep ran out.
        let id = match self.next_rq[dir] {
            Some(next) if !self.check_fifo(dir, now) => next,
            _ => *self.fifo_list[dir]
                .front()
                .expect("direction chosen with work"),
        };
        self.batching = 1;
        Some(id)
    }
}

impl Elevator for Deadline {
    fn name(&self) -> &'static str {
        "deadline"
    }

    /// `deadline_merge` (front) behind the generic back-merge hash, then
    /// `deadline_merged_request` re-sorts a front-merged request.
    fn merge_bio(
        &mut self,
        _now: Nanos,
        bio: &Bio,
        max_sectors: u32,
    ) -> Option<(RequestId, MergeKind)> {
        let front_merges = self.tunables.front_merges;
        let (id, kind, old_sector) = self.store.merge(bio, max_sectors, front_merges, |_| true)?;
        if kind == MergeKind::Front {
            let rq = self.store.get(id);
            let dir = data_dir(rq);
            assert!(self.sort_list[dir].remove(&(old_sector, id)));
            self.sort_list[dir].insert((rq.sector, id));
        }
        Some((id, kind))
    }

    /// `deadline_add_request`: sort list + FIFO with expiry `now + fifo_expire[dir]`.
    fn add_request(&mut self, now: Nanos, mut rq: Request) {
        let dir = data_dir(&rq);
        rq.inserted_ns = now;
        rq.fifo_time_ns = self
            .hz
            .jiffies_to_ns(self.hz.jiffies(now) + self.tunables.fifo_expire[dir]);
        self.sort_list[dir].insert((rq.sector, rq.id));
        self.fifo_list[dir].push_back(rq.id);
        self.store.insert(rq);
    }

    fn dispatch_request(&mut self, now: Nanos) -> Option<Request> {
        let id = self.dispatch_requests(now)?;
        Some(self.move_request(id))
    }

    fn completed_request(&mut self, _now: Nanos, _rq: &Request) {}

    fn queued(&self) -> usize {
        let queued = self.fifo_list[READ].len() + self.fifo_list[WRITE].len();
        assert_eq!(queued, self.store.len());
        queued
    }

    fn queued_requests(&self) -> Vec<&Request> {
        self.store.requests()
    }

    /// `dd->sort_list[dir]` and `dd->fifo_list[dir]` hold the queued requests of their
    /// direction; `dd->next_rq[dir]` is one of them.
    fn check(&self, _dispatched: &[&Request]) -> Result<(), String> {
        self.store.check()?;
        for dir in [READ, WRITE] {
            let what = if dir == READ {
                "deadline reads"
            } else {
                "deadline writes"
            };
            super::check_sort_and_fifo(
                what,
                &self.sort_list[dir],
                &self.fifo_list[dir],
                &self.store,
            )?;
            if let Some(rq) = self.fifo_list[dir]
                .iter()
                .map(|&id| self.store.get(id))
                .find(|rq| data_dir(rq) != dir)
            {
                return Err(format!(
                    "{what}: R#{} is on the other direction's lists",
                    rq.id
                ));
            }
            if let Some(next) = self.next_rq[dir] {
                if !self.sort_list[dir].iter().any(|&(_, id)| id == next) {
                    return Err(format!("{what}: next_rq R#{next} is not queued"));
                }
            }
        }
        super::check_count(
            "deadline's queued requests",
            self.store.len() as u64,
            "are on its fifo lists",
            (self.fifo_list[READ].len() + self.fifo_list[WRITE].len()) as u64,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::request::test_support::*;
    use crate::block::request::MAX_REQUEST_SECTORS;
    use crate::dev::IoOp;
    use crate::units::NS_PER_MS;

    /// HZ = 1000: a jiffy is a millisecond.
    const HZ_1000: Hz = Hz(1000);

    #[test]
    fn reads_are_preferred_but_writes_get_a_batch_after_writes_starved() {
        let mut deadline = Deadline::new(HZ_1000);
        for i in 0..10 {
            deadline.add_request(0, request(1000 + i, IoOp::Write, 1_000_000 + i * 8, 8, 2));
        }
        for i in 0..100 {
            deadline.add_request(0, request(i, IoOp::Read, i * 8, 8, 1));
        }
        let dirs: Vec<bool> = (0..50)
            .map(|_| deadline.dispatch_request(1).unwrap().is_write())
            .collect();
        // Two read batches of fifo_batch (writes_starved = 2), then a write batch.
        assert!(dirs[..32].iter().all(|&write| !write));
        assert!(dirs[32..42].iter().all(|&write| write));
        assert!(dirs[42..].iter().all(|&write| !write));
    }

    #[test]
    fn a_starving_write_is_served_once_write_expire_passes() {
        let mut deadline = Deadline::new(HZ_1000);
        // Start a sweep at sector 1000 so that `next_rq` points upward.
        deadline.add_request(0, request(1, IoOp::Write, 1000, 8, 1));
        deadline.add_request(0, request(2, IoOp::Write, 1008, 8, 1));
        assert_eq!(deadline.dispatch_request(0).unwrap().id, 1);
        // The starving write sits below the sweep; a long stream sits above it.
        let old = 3;
        deadline.add_request(NS_PER_MS, request(old, IoOp::Write, 0, 8, 2));
        for i in 0..8000 {
            deadline.add_request(NS_PER_MS, request(10 + i, IoOp::Write, 1016 + i * 8, 8, 1));
        }
        let expiry = NS_PER_MS + 5_000 * NS_PER_MS;
        let mut served_at = None;
        for step in 2..8000 {
            let now = step * NS_PER_MS;
            let rq = deadline.dispatch_request(now).unwrap();
            if rq.id == old {
                served_at = Some(now);
                break;
            }
        }
        let served_at = served_at.expect("the old write was never served");
        assert!(served_at >= expiry, "served before it expired: {served_at}");
        assert!(
            served_at < expiry + u64::from(FIFO_BATCH) * NS_PER_MS,
            "served {served_at} more than a batch after expiry"
        );
    }

    #[test]
    fn front_merge_resorts_the_request() {
        let mut deadline = Deadline::new(HZ_1000);
        deadline.add_request(0, request(1, IoOp::Read, 100, 8, 1));
        deadline.add_request(0, request(2, IoOp::Read, 50, 8, 1));
        let front = bio(9, IoOp::Read, 92, 8, 1);
        assert_eq!(
            deadline.merge_bio(0, &front, MAX_REQUEST_SECTORS),
            Some((1, MergeKind::Front))
        );
        // FIFO head first (request 1), then the sweep continues above sector 92: nothing, so the
        // next batch restarts at the FIFO head.
        assert_eq!(deadline.dispatch_request(0).unwrap().sector, 92);
        assert_eq!(deadline.dispatch_request(0).unwrap().sector, 50);
        assert_eq!(deadline.queued(), 0);
        let mut no_front = Deadline::with_tunables(
            HZ_1000,
            DeadlineTunables {
                front_merges: false,
                ..DeadlineTunables::defaults(HZ_1000)
            },
        );
        no_front.add_request(0, request(1, IoOp::Read, 100, 8, 1));
        assert_eq!(no_front.merge_bio(0, &front, MAX_REQUEST_SECTORS), None);
    }

    #[test]
    fn expiry_is_counted_in_jiffies() {
        // HZ = 100: read_expire = HZ / 2 = 50 jiffies. A read queued at 9 ms (jiffy 0) expires
        // at jiffy 50 = 500 ms, not at 509 ms: the kernel stamps jiffies, not nanoseconds.
        let hz = Hz(100);
        assert_eq!(DeadlineTunables::defaults(hz).fifo_expire, [50, 500]);
        let mut deadline = Deadline::new(hz);
        deadline.add_request(9 * NS_PER_MS, request(1, IoOp::Read, 0, 8, 1));
        assert!(!deadline.check_fifo(READ, 499 * NS_PER_MS));
        assert!(deadline.check_fifo(READ, 500 * NS_PER_MS));
    }
}

/// The checks can fail: a request missing from its FIFO is found.
#[cfg(test)]
mod check_tests {
    use super::*;
    use crate::block::request::test_support::request;
    use crate::dev::IoOp;

    #[test]
    fn deadline_fifo_that_misses_a_request_is_found() {
        let mut deadline = Deadline::new(Hz(100));
        deadline.add_request(0, request(1, IoOp::Write, 0, 8, 1));
        deadline.add_request(0, request(2, IoOp::Write, 800, 8, 1));
        deadline.check(&[]).expect("consistent");
        deadline.fifo_list[WRITE].pop_front();
        let what = deadline.check(&[]).expect_err("fifo");
        assert!(what.contains("deadline writes"), "{what}");
    }
}
