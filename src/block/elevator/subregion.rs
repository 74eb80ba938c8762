//! subregion: the subregion deadline scheduler of seed 003 (an MS thesis, 2014, "Android
//! Application Context Aware I/O Scheduler", §5.1), after the SSD scheduler for internal
//! parallelism it cites ([31]). A legacy (single-queue) elevator in the shape of
//! deadline-iosched (`src/block/elevator/deadline.rs`).
//!
//! The device's sectors are split into fixed subregions (`size`, default 2 GB); a request goes to
//! subregion `sector / size` ("its address is divided by the sector size of the subregion L and
//! the corresponding number is the queue's index"). Each subregion has, per direction, a
//! sector-sorted tree and a FIFO with deadlines (deadline-iosched's `read_expire` 500 ms and
//! `write_expire` 5 s). Subregions are served round robin, one *turn* each: a turn dispatches in
//! one direction, in sector order from where that subregion's sweep stopped, until `batch`
//! requests (default 16) or the direction runs dry; the next turn goes to the next subregion with
//! work, in the *other* direction ("the request queues are serviced in the direction opposite to
//! the adjacent queue"), or in the same one when that subregion has nothing in the other.
//!
//! Readings chosen where the thesis is not explicit (§5.1 "Dispatching the Request"):
//! - Deadlines: the thesis says each request gets a deadline and the FIFOs are watched for
//!   expiry, not where an expired request is served. Here, at the start of a turn, the oldest
//!   expired request of either direction (reads first) is served first, and its subregion and
//!   direction become the turn's, as `deadline_check_fifo` restarts a batch from the FIFO head.
//! - "Round robin": subregions in index order, wrapping, skipping empty ones.
//!
//! Simplifications: no front merges (back merges through the generic hash only); times in
//! nanoseconds, not jiffies.

use super::{Elevator, RqStore};
use crate::block::request::{Bio, MergeKind, Request, RequestId};
use crate::units::{Nanos, NS_PER_MS, SECTOR_SIZE};
use std::collections::{BTreeMap, BTreeSet};

/// Seed 003 §5.1 / §6.1: the subregion size the thesis's sizing procedure chose, 2 GB.
pub const DEFAULT_SUBREGION_BYTES: u64 = 2 << 30;
/// Seed 003 §5.1: requests dispatched per subregion turn, 16 (deadline-iosched's `fifo_batch`).
pub const DEFAULT_BATCH: u32 = 16;
/// deadline-iosched's `read_expire`: HZ / 2 = 500 ms.
pub const DEFAULT_READ_EXPIRE: Nanos = 500 * NS_PER_MS;
/// deadline-iosched's `write_expire`: 5 * HZ = 5 s.
pub const DEFAULT_WRITE_EXPIRE: Nanos = 5_000 * NS_PER_MS;

const READ: usize = 0;
const WRITE: usize = 1;

fn data_dir(rq: &Request) -> usize {
    if rq.is_write() {
        WRITE
    } else {
        READ
    }
}

/// Tunables (`[stack.block.subregion]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubregionTunables {
    /// Subregion size in sectors.
    pub size_sectors: u64,
    pub batch: u32,
    /// Deadlines per direction.
    pub expire: [Nanos; 2],
}

impl Default for SubregionTunables {
    fn default() -> Self {
        SubregionTunables {
            size_sectors: DEFAULT_SUBREGION_BYTES / SECTOR_SIZE,
            batch: DEFAULT_BATCH,
            expire: [DEFAULT_READ_EXPIRE, DEFAULT_WRITE_EXPIRE],
        }
    }
}

/// One subregion's queues.
#[derive(Debug, Default)]
struct SubQueue {
    /// Per direction: (sector, id).
    sorted: [BTreeSet<(u64, RequestId)>; 2],
    /// Per direction: where this subregion's sweep continues (the sector after the last
    /// dispatched request).
    next_sector: [u64; 2],
}

impl SubQueue {
    fn is_empty(&self) -> bool {
        self.sorted[READ].is_empty() && self.sorted[WRITE].is_empty()
    }

    /// The next request of `dir` in sector order from the sweep's position, wrapping.
    fn next(&self, dir: usize) -> Option<RequestId> {
        self.sorted[dir]
            .range((self.next_sector[dir], 0)..)
            .next()
            .or_else(|| self.sorted[dir].iter().next())
            .map(|&(_, id)| id)
    }
}

/// The subregion deadline scheduler.
#[derive(Debug)]
pub struct Subregion {
    queues: BTreeMap<u64, SubQueue>,
    /// Per direction: (deadline, id), the FIFOs of every subregion merged (their heads are
    /// what expiry looks at).
    fifo: [BTreeSet<(Nanos, RequestId)>; 2],
    /// The turn: subregion, direction, requests dispatched in it.
    turn: Option<(u64, usize, u32)>,
    store: RqStore,
    pub tunables: SubregionTunables,
}

impl Subregion {
    pub fn new(tunables: SubregionTunables) -> Subregion {
        assert!(tunables.size_sectors > 0 && tunables.batch > 0);
        Subregion {
            queues: BTreeMap::new(),
            fifo: Default::default(),
            turn: None,
            store: RqStore::default(),
            tunables,
        }
    }

    /// The subregion of a sector: `sector / L`.
    pub fn index_of(&self, sector: u64) -> u64 {
        sector / self.tunables.size_sectors
    }

    /// The oldest expired request, reads first.
    fn expired(&self, now: Nanos) -> Option<(RequestId, usize)> {
        [READ, WRITE].into_iter().find_map(|dir| {
            self.fifo[dir]
                .first()
                .filter(|&&(deadline, _)| deadline <= now)
                .map(|&(_, id)| (id, dir))
        })
    }

    /// The next subregion after `after` (wrapping) that has work, and the direction of its turn:
    /// the opposite of `dir` when it has requests there, else `dir`.
    fn next_turn(&self, after: Option<u64>, dir: usize) -> Option<(u64, usize)> {
        let start = after.map_or(0, |index| index + 1);
        let index = self
            .queues
            .range(start..)
            .chain(self.queues.range(..start))
            .find(|(_, q)| !q.is_empty())
            .map(|(&index, _)| index)?;
        let queue = &self.queues[&index];
        let other = 1 - dir;
        let chosen = if !queue.sorted[other].is_empty() {
            other
        } else {
            dir
        };
        Some((index, chosen))
    }

    fn take(&mut self, id: RequestId) -> Request {
        let rq = self.store.remove(id);
        let dir = data_dir(&rq);
        let index = self.index_of(rq.sector);
        let queue = self
            .queues
            .get_mut(&index)
            .expect("the request's subregion");
        assert!(queue.sorted[dir].remove(&(rq.sector, id)));
        queue.next_sector[dir] = rq.end_sector();
        if queue.is_empty() {
            self.queues.remove(&index);
        }
        assert!(self.fifo[dir].remove(&(rq.fifo_time_ns, id)));
        rq
    }

    fn choose(&mut self, now: Nanos) -> Option<RequestId> {
        if self.store.is_empty() {
            return None;
        }
        // Continue the turn while it may.
        if let Some((index, dir, done)) = self.turn {
            if done < self.tunables.batch {
                if let Some(id) = self.queues.get(&index).and_then(|q| q.next(dir)) {
                    self.turn = Some((index, dir, done + 1));
                    return Some(id);
                }
            }
        }
        // A new turn: an expired request first, else the next subregion round robin.
        if let Some((id, dir)) = self.expired(now) {
            let index = self.index_of(self.store.get(id).sector);
            self.turn = Some((index, dir, 1));
            return Some(id);
        }
        let (after, dir) = self
            .turn
            .map_or((None, WRITE), |(index, dir, _)| (Some(index), dir));
        let (index, dir) = self.next_turn(after, dir)?;
        let id = self.queues[&index].next(dir).expect("a turn with work");
        self.turn = Some((index, dir, 1));
        Some(id)
    }

    /// Subregions with queued requests.
    pub fn busy_subregions(&self) -> usize {
        self.queues.len()
    }
}

impl Elevator for Subregion {
    fn name(&self) -> &'static str {
        "subregion"
    }

    fn merge_bio(
        &mut self,
        _now: Nanos,
        bio: &Bio,
        max_sectors: u32,
    ) -> Option<(RequestId, MergeKind)> {
        // Back merges only: the request's start sector (its subregion and sort key) stays.
        let (id, kind, _) = self.store.merge(bio, max_sectors, false, |_| true)?;
        Some((id, kind))
    }

    fn add_request(&mut self, now: Nanos, mut rq: Request) {
        let dir = data_dir(&rq);
        rq.inserted_ns = now;
        rq.fifo_time_ns = now + self.tunables.expire[dir];
        let index = self.index_of(rq.sector);
        self.queues.entry(index).or_default().sorted[dir].insert((rq.sector, rq.id));
        self.fifo[dir].insert((rq.fifo_time_ns, rq.id));
        self.store.insert(rq);
    }

    fn dispatch_request(&mut self, now: Nanos) -> Option<Request> {
        let id = self.choose(now)?;
        Some(self.take(id))
    }

    fn completed_request(&mut self, _now: Nanos, _rq: &Request) {}

    fn queued(&self) -> usize {
        let queued = self.fifo[READ].len() + self.fifo[WRITE].len();
        assert_eq!(queued, self.store.len());
        queued
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::request::test_support::bio;
    use crate::dev::IoOp;

    const L: u64 = 1_000;

    fn sched(batch: u32) -> Subregion {
        Subregion::new(SubregionTunables {
            size_sectors: L,
            batch,
            ..SubregionTunables::default()
        })
    }

    fn add(s: &mut Subregion, id: u64, op: IoOp, sector: u64, now: Nanos) {
        s.add_request(now, Request::from_bio(id, &bio(id, op, sector, 8, 1), now));
    }

    fn drain(s: &mut Subregion, now: Nanos) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        while let Some(rq) = s.dispatch_request(now) {
            out.push((s.index_of(rq.sector), rq.sector));
        }
        assert_eq!(s.queued(), 0);
        out
    }

    #[test]
    fn requests_go_to_the_subregion_of_their_sector_and_turns_go_round_robin() {
        let mut s = sched(2);
        // Three reads in subregion 0, three in 2, none in 1; added out of order.
        for (id, sector) in [
            (1, 2_500),
            (2, 10),
            (3, 2_010),
            (4, 20),
            (5, 30),
            (6, 2_020),
        ] {
            add(&mut s, id, IoOp::Read, sector, 0);
        }
        assert_eq!(s.busy_subregions(), 2);
        // Batches of 2 in sector order per subregion, alternating 0, 2, 0, 2; each subregion's
        // sweep continues where it stopped.
        assert_eq!(
            drain(&mut s, 0),
            vec![
                (0, 10),
                (0, 20),
                (2, 2_010),
                (2, 2_020),
                (0, 30),
                (2, 2_500)
            ]
        );
    }

    #[test]
    fn adjacent_turns_alternate_direction() {
        let mut s = sched(16);
        // Subregion 0 and 1 each hold reads and writes.
        let mut id = 0;
        for index in 0..2u64 {
            for op in [IoOp::Read, IoOp::Write] {
                for k in 0..2u64 {
                    id += 1;
                    add(
                        &mut s,
                        id,
                        op,
                        index * L + 100 * k + if op == IoOp::Write { 500 } else { 0 },
                        0,
                    );
                }
            }
        }
        let mut dirs = Vec::new();
        while let Some(rq) = s.dispatch_request(0) {
            dirs.push((s.index_of(rq.sector), rq.is_write()));
        }
        // The first turn reads (opposite of the initial write direction), the next subregion
        // writes, then back to subregion 0 for its writes, subregion 1 for its reads.
        assert_eq!(
            dirs,
            vec![
                (0, false),
                (0, false),
                (1, true),
                (1, true),
                (0, true),
                (0, true),
                (1, false),
                (1, false)
            ]
        );
    }

    #[test]
    fn an_expired_request_is_served_at_the_next_turn() {
        let mut s = sched(2);
        // An old read in subregion 5, then many reads in subregion 0 later.
        add(&mut s, 1, IoOp::Read, 5 * L, 0);
        for id in 2..10 {
            add(&mut s, id, IoOp::Read, id * 10, DEFAULT_READ_EXPIRE);
        }
        // At the first dispatch the old read has expired (its deadline is now): it goes first.
        let now = DEFAULT_READ_EXPIRE;
        let first = s.dispatch_request(now).unwrap();
        assert_eq!(first.sector, 5 * L);
        // Without expiry, round robin from subregion 0 would have served it only after a turn.
        let mut s = sched(2);
        add(&mut s, 1, IoOp::Read, 5 * L, 0);
        for id in 2..10 {
            add(&mut s, id, IoOp::Read, id * 10, 0);
        }
        let order = drain(&mut s, 0);
        assert_eq!(order[0], (0, 20));
        assert_eq!(order[2], (5, 5 * L));
    }
}
