//! subregion: the subregion deadline scheduler of seed 003 (an MS thesis, 2014, "Android
//! Application Context Aware I/O Scheduler", §5.1), after the SSD scheduler for internal
//! parallelism it cites (its reference 31). A legacy (single-queue) elevator in the shape of
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
//! **App-aware bandwidth reservation** (§5.2), in the same elevator, by the app class of the
//! request's task (`[[app]] io_class`, [`crate::task::AppIoClass`]):
//! - time-sensitive app `i`: the request period `T^i = λ T^(i-1) + (1-λ)(E^i - E^(i-1))` over
//!   arrival times `E` (`T^0` = the 50 ms default read deadline of §6.2, `E^0 = E^1 - T^0`),
//!   the size `RS^i = γ RS^(i-1) + (1-γ) size` (`RS^0 = RS^1`), λ = γ = 0.99 (§6.2), and the
//!   request's deadline `D^i = D^(i-1) + T^i` (`D^0` = the first arrival): its FIFO deadline, so
//!   expiry serves it on time. Reading chosen: the thesis prints `λ T^(i-1) + (1-λ) E^i -
//!   E^(i-1)`; the period only makes sense with the difference bracketed.
//! - bursty app `j`: its requests wait in a holding queue and are released, one at a time, at
//!   `RB^j = RB^(j-1) + 1/Q^j`, `Q^j = BWR / BS^j` requests per second, `BS^j` its EWMA request
//!   size (ε = 0.99), `BWR = (TBA - Σ B^i - SB) / (bursty apps)`, `B^i = RS^i / T^i` the
//!   bandwidth of time-sensitive app `i`, `SB = 0.1 TBA` (§6.2). Readings chosen: the thesis
//!   prints `BW^i = T^i * RS^i` (a size times a time; the bandwidth is size over period) and
//!   divides BWR by "TB" (the number of bursty tasks; it also names T, the time-sensitive count).
//!   `RB^0` is the first arrival. TBA is `[stack.block.subregion] total_bandwidth` (the device's
//!   sequential read figure, §6.2); without it bursty requests are not held. BWR is at least
//!   1 % of TBA, so a bursty app is slowed, never stopped.
//! - plain apps, and the kernel's threads: as before.
//!
//! An app of class `foreground-sensitive` is time-sensitive while in the foreground and bursty
//! in the background (the thesis's SQL service), resolved when each request is allocated.
//!
//! Simplifications: no front merges (back merges through the generic hash only); times in
//! nanoseconds, not jiffies.

use super::{Elevator, RqStore};
use crate::block::request::{Bio, MergeKind, Request, RequestId};
use crate::task::AppIoClass;
use crate::units::{Nanos, NS_PER_MS, NS_PER_SEC, SECTOR_SIZE};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Seed 003 §5.1 / §6.1: the subregion size the thesis's sizing procedure chose, 2 GB.
pub const DEFAULT_SUBREGION_BYTES: u64 = 2 << 30;
/// Seed 003 §5.1: requests dispatched per subregion turn, 16 (deadline-iosched's `fifo_batch`).
pub const DEFAULT_BATCH: u32 = 16;
/// Seed 003 §6.2: `T^0`, "the default request deadline was set to 50 ms".
pub const DEFAULT_TS_PERIOD: Nanos = 50 * NS_PER_MS;
/// Seed 003 §6.2: λ = γ = 0.99 ("to account for the previous value as much as possible"); ε
/// (bursty sizes) taken equal.
pub const HISTORY: f64 = 0.99;
/// Seed 003 §6.2: the safety reserve SB = 0.1 TBA.
pub const SAFETY: f64 = 0.1;

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
    /// TBA, bytes per second; `None`: bursty apps are not held (§5.2 needs it).
    pub total_bandwidth: Option<u64>,
}

impl Default for SubregionTunables {
    fn default() -> Self {
        SubregionTunables {
            size_sectors: DEFAULT_SUBREGION_BYTES / SECTOR_SIZE,
            batch: DEFAULT_BATCH,
            expire: [DEFAULT_READ_EXPIRE, DEFAULT_WRITE_EXPIRE],
            total_bandwidth: None,
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

/// A time-sensitive app's estimates (§5.2).
#[derive(Debug, Clone, Copy)]
struct TimeSensitive {
    period: f64,
    size: f64,
    last_arrival: Nanos,
    last_deadline: Nanos,
}

/// A bursty app's estimate and held requests (§5.2).
#[derive(Debug, Default)]
struct Bursty {
    size: f64,
    last_release: Option<Nanos>,
    /// (release time, request), in arrival order.
    held: VecDeque<(Nanos, Request)>,
}

/// The subregion deadline scheduler.
#[derive(Debug)]
pub struct Subregion {
    time_sensitive: BTreeMap<u32, TimeSensitive>,
    bursty: BTreeMap<u32, Bursty>,
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
            time_sensitive: BTreeMap::new(),
            bursty: BTreeMap::new(),
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

    /// Requests held back from bursty apps.
    pub fn held(&self) -> usize {
        self.bursty.values().map(|b| b.held.len()).sum()
    }

    /// `D^i` of a time-sensitive app's request arriving `now` (module doc).
    fn time_sensitive_deadline(&mut self, uid: u32, now: Nanos, bytes: f64) -> Nanos {
        // The first request: E^0 = E^1 - T^0 makes T^1 = T^0; RS^0 = RS^1; D^0 = A^1.
        let first = !self.time_sensitive.contains_key(&uid);
        let state = self.time_sensitive.entry(uid).or_insert(TimeSensitive {
            period: DEFAULT_TS_PERIOD as f64,
            size: bytes,
            last_arrival: now,
            last_deadline: now,
        });
        if !first {
            let gap = now.saturating_sub(state.last_arrival) as f64;
            state.period = HISTORY * state.period + (1.0 - HISTORY) * gap;
            state.size = HISTORY * state.size + (1.0 - HISTORY) * bytes;
        }
        state.last_arrival = now;
        state.last_deadline += state.period.max(1.0) as Nanos;
        state.last_deadline
    }

    /// `BWR`: the bandwidth left to each bursty app, bytes per second.
    fn bursty_share(&self, total: u64) -> f64 {
        let reserved: f64 = self
            .time_sensitive
            .values()
            .map(|ts| ts.size / (ts.period.max(1.0) / NS_PER_SEC as f64))
            .sum();
        let total = total as f64;
        let left = total - reserved - SAFETY * total;
        (left / self.bursty.len().max(1) as f64).max(0.01 * total)
    }

    /// Holds a bursty app's request until `RB^j` (module doc).
    fn hold(&mut self, uid: u32, now: Nanos, rq: Request, total: u64) {
        let bytes = f64::from(rq.nr_sectors) * SECTOR_SIZE as f64;
        self.bursty.entry(uid).or_default();
        let share = self.bursty_share(total);
        let state = self.bursty.get_mut(&uid).expect("just inserted");
        state.size = if state.last_release.is_none() {
            bytes
        } else {
            HISTORY * state.size + (1.0 - HISTORY) * bytes
        };
        let per_request = NS_PER_SEC as f64 * state.size.max(1.0) / share;
        let release = match state.last_release {
            None => now,
            Some(last) => last + per_request as Nanos,
        };
        state.last_release = Some(release);
        state.held.push_back((release, rq));
    }

    /// Moves held requests whose release time has come into the subregion queues.
    fn release_due(&mut self, now: Nanos) {
        let mut due = Vec::new();
        for state in self.bursty.values_mut() {
            while state.held.front().is_some_and(|(at, _)| *at <= now) {
                due.push(state.held.pop_front().expect("front exists").1);
            }
        }
        for rq in due {
            self.enqueue(now, rq, None);
        }
    }

    /// Into the subregion queues, with deadline `deadline` or the direction's default.
    fn enqueue(&mut self, now: Nanos, mut rq: Request, deadline: Option<Nanos>) {
        let dir = data_dir(&rq);
        rq.fifo_time_ns = deadline.unwrap_or(now + self.tunables.expire[dir]);
        let index = self.index_of(rq.sector);
        self.queues.entry(index).or_default().sorted[dir].insert((rq.sector, rq.id));
        self.fifo[dir].insert((rq.fifo_time_ns, rq.id));
        self.store.insert(rq);
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
        rq.inserted_ns = now;
        let uid = rq.task.uid;
        let bytes = f64::from(rq.nr_sectors) * SECTOR_SIZE as f64;
        match (rq.app_class, self.tunables.total_bandwidth) {
            (AppIoClass::TimeSensitive, _) => {
                let deadline = self.time_sensitive_deadline(uid, now, bytes);
                self.enqueue(now, rq, Some(deadline));
            }
            (AppIoClass::Bursty, Some(total)) => {
                self.hold(uid, now, rq, total);
                self.release_due(now);
            }
            _ => self.enqueue(now, rq, None),
        }
    }

    fn dispatch_request(&mut self, now: Nanos) -> Option<Request> {
        self.release_due(now);
        let id = self.choose(now)?;
        Some(self.take(id))
    }

    fn completed_request(&mut self, _now: Nanos, _rq: &Request) {}

    fn queued(&self) -> usize {
        let queued = self.fifo[READ].len() + self.fifo[WRITE].len();
        assert_eq!(queued, self.store.len());
        queued + self.held()
    }

    fn queued_requests(&self) -> Vec<&Request> {
        let mut requests = self.store.requests();
        requests.extend(
            self.bursty
                .values()
                .flat_map(|b| b.held.iter().map(|(_, rq)| rq)),
        );
        requests
    }

    /// Each queued request is in its direction's deadline list and in its subregion's sorted
    /// list (seed 003 §5.1), once.
    fn check(&self, _dispatched: &[&Request]) -> Result<(), String> {
        self.store.check()?;
        let fifo = (self.fifo[READ].len() + self.fifo[WRITE].len()) as u64;
        super::check_count(
            "subregion's queued requests",
            self.store.len() as u64,
            "are on its deadline lists",
            fifo,
        )?;
        let sorted: usize = self
            .queues
            .values()
            .map(|queue| queue.sorted[READ].len() + queue.sorted[WRITE].len())
            .sum();
        super::check_count(
            "subregion's sorted lists",
            sorted as u64,
            "requests are queued",
            fifo,
        )?;
        for (&index, queue) in &self.queues {
            for dir in [READ, WRITE] {
                for &(sector, id) in &queue.sorted[dir] {
                    let ok = self.store.contains(id)
                        && self.store.get(id).sector == sector
                        && self.index_of(sector) == index
                        && data_dir(self.store.get(id)) == dir
                        && self.fifo[dir].contains(&(self.store.get(id).fifo_time_ns, id));
                    if !ok {
                        return Err(format!(
                            "subregion {index}: R#{id} at sector {sector} is not queued there with its deadline"
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Work only when something is in the subregion queues: held requests wait for their
    /// release timer.
    fn has_work(&self) -> bool {
        !self.store.is_empty()
    }

    /// The next release of a held bursty request.
    fn next_timer(&self) -> Option<Nanos> {
        self.bursty
            .values()
            .filter_map(|b| b.held.front().map(|(at, _)| *at))
            .min()
    }

    fn timer_fired(&mut self, now: Nanos) {
        self.release_due(now);
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

    fn classed(
        id: u64,
        op: IoOp,
        sector: u64,
        sectors: u32,
        uid: u32,
        class: AppIoClass,
        now: Nanos,
    ) -> Request {
        let mut b = bio(id, op, sector, sectors, uid);
        b.task.uid = uid;
        let mut rq = Request::from_bio(id, &b, now);
        rq.app_class = class;
        rq
    }

    #[test]
    fn a_time_sensitive_apps_requests_get_deadlines_one_period_apart() {
        let mut s = sched(16);
        // Reads every 10 ms: T^1 = 0.99 x 50 ms + 0.01 x 50 ms (E^0 = E^1 - T^0) = 50 ms, then
        // each period moves 1 % towards 10 ms.
        let mut deadlines = Vec::new();
        for i in 0..3u64 {
            let now = 100 * NS_PER_MS + i * 10 * NS_PER_MS;
            s.add_request(
                now,
                classed(
                    i,
                    IoOp::Read,
                    i * 8,
                    8,
                    10_005,
                    AppIoClass::TimeSensitive,
                    now,
                ),
            );
            deadlines.push(s.store.get(i).fifo_time_ns);
        }
        let t1 = 50 * NS_PER_MS;
        let t2 = (0.99 * t1 as f64 + 0.01 * (10 * NS_PER_MS) as f64) as Nanos;
        assert_eq!(deadlines[0], 100 * NS_PER_MS + t1);
        assert_eq!(deadlines[1], deadlines[0] + t2);
        assert!(
            deadlines[2] - deadlines[1] < t2,
            "the period shrinks towards 10 ms"
        );
        // A plain read gets deadline-iosched's 500 ms; served after the time-sensitive ones
        // once both expire.
        s.add_request(
            0,
            classed(9, IoOp::Read, 3 * L, 8, 10_006, AppIoClass::Plain, 0),
        );
        assert_eq!(s.store.get(9).fifo_time_ns, DEFAULT_READ_EXPIRE);
    }

    #[test]
    fn a_bursty_app_is_released_at_the_bandwidth_left_over() {
        let mut s = Subregion::new(SubregionTunables {
            size_sectors: L,
            total_bandwidth: Some(100_000_000),
            ..SubregionTunables::default()
        });
        // Ten 1 MiB reads at once from a bursty app: BWR = 100 MB/s - SB (10 MB/s) = 90 MB/s,
        // one request per 1 MiB / 90 MB/s = 11.65 ms.
        for id in 0..10u64 {
            s.add_request(
                0,
                classed(
                    id,
                    IoOp::Read,
                    id * 2048,
                    2048,
                    10_007,
                    AppIoClass::Bursty,
                    0,
                ),
            );
        }
        assert_eq!(s.queued(), 10);
        assert_eq!(s.held(), 9, "the first is released at once");
        assert!(s.dispatch_request(0).is_some());
        assert!(
            s.dispatch_request(0).is_none(),
            "the rest wait for their release"
        );
        let gap = (NS_PER_SEC as f64 * (1 << 20) as f64 / 90e6) as Nanos;
        assert_eq!(s.next_timer(), Some(gap));
        s.timer_fired(gap);
        assert!(s.dispatch_request(gap).is_some());
        // A time-sensitive app's reservation leaves bursty apps less: 4 KiB every 50 ms is
        // 81.92 kB/s off BWR.
        s.add_request(
            gap,
            classed(
                50,
                IoOp::Read,
                9 * L,
                8,
                10_008,
                AppIoClass::TimeSensitive,
                gap,
            ),
        );
        let share = s.bursty_share(100_000_000);
        assert!((share - (90e6 - 4096.0 / 0.05)).abs() < 1.0, "{share}");
        // Without TBA nothing is held.
        let mut s = sched(16);
        s.add_request(
            0,
            classed(1, IoOp::Read, 0, 2048, 10_007, AppIoClass::Bursty, 0),
        );
        assert_eq!(s.held(), 0);
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
