//! mq-deadline with I/O priorities: block/mq-deadline.c as of Linux 5.16+ (priority classes since
//! 5.14, `prio_aging_expire` since 5.16, position-based `deadline_from_pos` since 6.x).
//!
//! Three priority levels (RT, BE, IDLE; `IOPRIO_CLASS_NONE` maps to BE), each with the legacy
//! deadline structures (a sort list and a FIFO per data direction). `dd_dispatch_request` first
//! serves lower-priority requests that have waited longer than `prio_aging_expire`
//! (`dd_dispatch_prio_aged_requests`, only when two or more levels have work), then walks the levels
//! from RT down and stops at the first level that has requests queued *or in flight*
//! (`dd_queued` = inserted - completed), so BE waits while RT I/O is outstanding. Within a level,
//! dispatch batches like legacy deadline (`fifo_batch`, `writes_starved`, FIFO expiry), with
//! the batching state (`last_dir`, `batching`, `starved`) shared by all levels as in the kernel.
//!
//! `async_depth` (`dd_limit_depth`): writes and async reads may hold at most 3/4 of the
//! scheduler tags (`dd_depth_updated`, 5.14-6.9; 6.10+ raised it to all tags, a tunable here);
//! sync reads are not throttled.
//!
//! QASIO boost (seed 000 §5.3, not in any kernel: `elv_boost` was the paper's patch to CFQ). A
//! boosted request leaves neither its level's sort list nor its FIFO (so merges, `dd_queued` and
//! its FIFO deadline work as before) but joins one boosted list, in the order of the boosts. It
//! ranks as follows, and why:
//! - after everything `dd_dispatch_request` serves before the level walk: requests aged past
//!   `prio_aging_expire` (the kernel's starvation guarantee stays first). It does *not* go to
//!   `dd->dispatch` (the at-head list served before everything): that would put an asynchronous
//!   write ahead of RT reads and sync reads, and §5.3 wants QASIOs "higher than all the (true)
//!   asynchronous I/Os, but not more than any other synchronous I/Os";
//! - at the first level of the walk that has requests queued or in flight (RT, then BE, then
//!   IDLE), whatever the boosted request's own level: a task waits on it, so it inherits the
//!   level being served (a BE app waiting on an IDLE-class writeback is QASIO's priority
//!   inversion). The level walk still stops at a level with I/O in flight, so a boosted BE
//!   write waits while RT I/O is outstanding, like any BE request;
//! - within that level, ahead of every write (and discard) the level would dispatch, at the
//!   next write dispatch: a write batch in progress is interrupted, and the boosted list counts
//!   as pending writes when the level picks a direction. mq-deadline has no sync/async split
//!   among writes (fsync's and jbd2's `REQ_SYNC` writes share the write FIFO with writeback),
//!   so a boosted write also goes before sync writes queued at that level; this is the closest
//!   rank the scheduler's structure allows to "after sync, before async";
//! - behind the level's reads, which are mq-deadline's synchronous I/O: a read batch in
//!   progress continues (up to `fifo_batch`), and reads keep the direction until writes have
//!   been starved `writes_starved` times. A boost is in effect a write whose FIFO deadline
//!   expires now, except that it also cuts a write batch short.
//!
//! Simplifications:
//! - No per-hctx dispatch lists (`per_prio->dispatch`, requeues, `at_head` inserts): nothing in
//!   mobistack inserts at the head.
//! - Zoned-device write locking is not modelled.
//! - `deadline_from_pos` finds the first request starting at or after the position (the kernel
//!   also accepts a request that straddles it).
//! - Times are jiffies at the run's HZ (`fifo_time`, `prio_aging_expire`, `started_after`), as
//!   in the kernel; a request keeps the time of its tick.

use super::{Elevator, RqStore};
use crate::block::request::{Bio, IoPrioClass, MergeKind, Request, RequestId};
use crate::kernel::Hz;
use crate::units::Nanos;
use std::collections::{BTreeSet, VecDeque};

/// Kernel time in ticks.
type Jiffies = u64;
/// `writes_starved = 2` (block/mq-deadline.c).
pub const WRITES_STARVED: u32 = 2;
/// `fifo_batch = 16` (block/mq-deadline.c).
pub const FIFO_BATCH: u32 = 16;

const READ: usize = 0;
const WRITE: usize = 1;
/// `enum dd_prio`: DD_RT_PRIO, DD_BE_PRIO, DD_IDLE_PRIO.
const DD_RT_PRIO: usize = 0;
const DD_BE_PRIO: usize = 1;
const DD_PRIO_COUNT: usize = 3;

fn data_dir(rq: &Request) -> usize {
    if rq.is_write() {
        WRITE
    } else {
        READ
    }
}

/// `ioprio_class_to_prio`.
fn class_to_prio(class: IoPrioClass) -> usize {
    match class {
        IoPrioClass::Rt => DD_RT_PRIO,
        IoPrioClass::None | IoPrioClass::Be => DD_BE_PRIO,
        IoPrioClass::Idle => 2,
    }
}

/// `struct dd_per_prio`.
#[derive(Debug, Default)]
struct PerPrio {
    sort_list: [BTreeSet<(u64, RequestId)>; 2],
    fifo_list: [VecDeque<RequestId>; 2],
    /// Start sector of the last request dispatched per direction.
    latest_pos: [u64; 2],
    /// `stats.inserted`, `stats.completed`: `dd_queued` is their difference.
    inserted: u64,
    completed: u64,
}

/// Tunables in the kernel's units (times in jiffies).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MqDeadlineTunables {
    /// `fifo_expire[DD_READ]`, `fifo_expire[DD_WRITE]`, jiffies.
    pub fifo_expire: [Jiffies; 2],
    pub fifo_batch: u32,
    pub writes_starved: u32,
    pub front_merges: bool,
    /// Jiffies; 0 disables aging.
    pub prio_aging_expire: Jiffies,
    /// `async_depth` as a fraction of `nr_requests`, in quarters: 3 (3/4, `dd_depth_updated` in
    /// 5.14-6.9) by default; 4 gives 6.10+'s `async_depth = nr_requests`.
    pub async_depth_quarters: usize,
    /// `async_depth` written through sysfs: replaces the fraction.
    pub async_depth: Option<usize>,
}

impl MqDeadlineTunables {
    /// The kernel defaults at tick rate `hz` (block/mq-deadline.c): `read_expire = HZ / 2`,
    /// `write_expire = 5 * HZ`, `prio_aging_expire = 10 * HZ` (5.16+).
    pub fn defaults(hz: Hz) -> Self {
        MqDeadlineTunables {
            fifo_expire: [hz.over(2), hz.frac(5, 1)],
            fifo_batch: FIFO_BATCH,
            writes_starved: WRITES_STARVED,
            front_merges: true,
            prio_aging_expire: hz.frac(10, 1),
            async_depth_quarters: 3,
            async_depth: None,
        }
    }
}

/// `struct deadline_data`.
#[derive(Debug)]
pub struct MqDeadline {
    per_prio: [PerPrio; DD_PRIO_COUNT],
    last_dir: usize,
    batching: u32,
    starved: u32,
    store: RqStore,
    /// QASIO: boosted requests, in boost order (still on their level's sort list and FIFO).
    boosted: VecDeque<RequestId>,
    pub tunables: MqDeadlineTunables,
    hz: Hz,
}

impl MqDeadline {
    /// mq-deadline with the kernel defaults at tick rate `hz`.
    pub fn new(hz: Hz) -> MqDeadline {
        MqDeadline::with_tunables(hz, MqDeadlineTunables::defaults(hz))
    }

    pub fn with_tunables(hz: Hz, tunables: MqDeadlineTunables) -> MqDeadline {
        assert!(tunables.fifo_batch > 0);
        MqDeadline {
            per_prio: Default::default(),
            // `dd_init_sched`: `dd->last_dir = DD_WRITE`.
            last_dir: WRITE,
            batching: 0,
            starved: 0,
            store: RqStore::default(),
            boosted: VecDeque::new(),
            tunables,
            hz,
        }
    }

    fn prio_of(rq: &Request) -> usize {
        class_to_prio(rq.ioprio.class)
    }

    /// `dd_queued`: inserted and not yet completed (queued or in flight).
    fn dd_queued(&self, prio: usize) -> u64 {
        let per_prio = &self.per_prio[prio];
        assert!(per_prio.inserted >= per_prio.completed);
        per_prio.inserted - per_prio.completed
    }

    /// `deadline_fifo_request`.
    fn fifo_request(&self, prio: usize, dir: usize) -> Option<RequestId> {
        self.per_prio[prio].fifo_list[dir].front().copied()
    }

    /// `deadline_check_fifo`.
    fn check_fifo(&self, prio: usize, dir: usize, now: Jiffies) -> bool {
        self.fifo_request(prio, dir)
            .is_some_and(|id| now >= self.hz.jiffies(self.store.get(id).fifo_time_ns))
    }

    /// `deadline_next_request` -> `deadline_from_pos(latest_pos)`.
    fn next_request(&self, prio: usize, dir: usize) -> Option<RequestId> {
        let position = self.per_prio[prio].latest_pos[dir];
        self.per_prio[prio].sort_list[dir]
            .range((position, 0)..)
            .next()
            .map(|&(_, id)| id)
    }

    /// `started_after`: inserted after `latest_start`.
    fn started_after(&self, id: RequestId, latest_start: Jiffies) -> bool {
        self.hz.jiffies(self.store.get(id).inserted_ns) > latest_start
    }

    /// `deadline_move_request` / `deadline_remove_request`.
    fn move_request(&mut self, prio: usize, id: RequestId) -> Request {
        let rq = self.store.remove(id);
        let dir = data_dir(&rq);
        let per_prio = &mut self.per_prio[prio];
        assert!(per_prio.sort_list[dir].remove(&(rq.sector, id)));
        let position = per_prio.fifo_list[dir]
            .iter()
            .position(|&queued| queued == id)
            .expect("request missing from its fifo");
        per_prio.fifo_list[dir].remove(position);
        per_prio.latest_pos[dir] = rq.sector;
        if let Some(position) = self.boosted.iter().position(|&b| b == id) {
            self.boosted.remove(position);
        }
        rq
    }

    /// QASIO: the oldest boosted request, dispatched at the level being served, moved out of
    /// its own level's lists.
    fn dispatch_boosted(&mut self, latest_start: Jiffies) -> Option<Request> {
        let id = *self.boosted.front()?;
        if self.started_after(id, latest_start) {
            return None;
        }
        let prio = Self::prio_of(self.store.get(id));
        self.batching += 1;
        Some(self.move_request(prio, id))
    }

    /// `__dd_dispatch_request`: one level; `latest_start` limits dispatch to requests inserted
    /// no later than it (the aging pass).
    fn dispatch_from(
        &mut self,
        prio: usize,
        now: Jiffies,
        latest_start: Jiffies,
    ) -> Option<Request> {
        // QASIO: the boosted list counts as the pending writes of a level with requests queued
        // (module doc); not in the aging pass (`latest_start` before now), which keeps its
        // guarantee.
        let level_queued = self.per_prio[prio].fifo_list.iter().any(|f| !f.is_empty());
        let boosted = !self.boosted.is_empty() && latest_start == now && level_queued;
        if let Some(id) = self.next_request(prio, self.last_dir) {
            if self.batching < self.tunables.fifo_batch {
                if boosted && self.last_dir == WRITE {
                    return self.dispatch_boosted(latest_start);
                }
                return self.dispatch_checked(prio, id, latest_start);
            }
        }
        let reads = !self.per_prio[prio].fifo_list[READ].is_empty();
        let writes = !self.per_prio[prio].fifo_list[WRITE].is_empty() || boosted;
        let dir = if reads {
            let starving = (self.fifo_request(prio, WRITE).is_some() || boosted) && {
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
        if dir == WRITE && boosted {
            self.last_dir = WRITE;
            self.batching = 0;
            return self.dispatch_boosted(latest_start);
        }
        let next = self.next_request(prio, dir);
        let id = if self.check_fifo(prio, dir, now) || next.is_none() {
            self.fifo_request(prio, dir)
        } else {
            next
        }?;
        self.last_dir = dir;
        self.batching = 0;
        self.dispatch_checked(prio, id, latest_start)
    }

    /// The `dispatch_request:` label.
    fn dispatch_checked(
        &mut self,
        prio: usize,
        id: RequestId,
        latest_start: Jiffies,
    ) -> Option<Request> {
        if self.started_after(id, latest_start) {
            return None;
        }
        self.batching += 1;
        Some(self.move_request(prio, id))
    }

    /// `dd_dispatch_prio_aged_requests`.
    fn dispatch_prio_aged_requests(&mut self, now: Jiffies) -> Option<Request> {
        let aging = self.tunables.prio_aging_expire;
        if aging == 0 || now < aging {
            return None;
        }
        let levels_with_work = (0..DD_PRIO_COUNT)
            .filter(|&prio| self.dd_queued(prio) > 0)
            .count();
        if levels_with_work < 2 {
            return None;
        }
        (DD_BE_PRIO..DD_PRIO_COUNT).find_map(|prio| self.dispatch_from(prio, now, now - aging))
    }
}

impl Elevator for MqDeadline {
    fn name(&self) -> &'static str {
        "mq-deadline"
    }

    /// `dd_bio_merge` / `dd_request_merge`: back merge by hash, front merge in the bio's level;
    /// `blk_rq_merge_ok` refuses a merge across I/O priorities.
    fn merge_bio(
        &mut self,
        _now: Nanos,
        bio: &Bio,
        max_sectors: u32,
    ) -> Option<(RequestId, MergeKind)> {
        let front_merges = self.tunables.front_merges;
        let (id, kind, old_sector) = self
            .store
            .merge(bio, max_sectors, front_merges, |rq| rq.ioprio == bio.ioprio)?;
        if kind == MergeKind::Front {
            let rq = self.store.get(id);
            let (prio, dir) = (Self::prio_of(rq), data_dir(rq));
            let sort_list = &mut self.per_prio[prio].sort_list[dir];
            assert!(sort_list.remove(&(old_sector, id)));
            sort_list.insert((rq.sector, id));
        }
        Some((id, kind))
    }

    /// `dd_insert_request`.
    fn add_request(&mut self, now: Nanos, mut rq: Request) {
        let (prio, dir) = (Self::prio_of(&rq), data_dir(&rq));
        rq.inserted_ns = now;
        let expiry = self.hz.jiffies(now) + self.tunables.fifo_expire[dir];
        rq.fifo_time_ns = self.hz.jiffies_to_ns(expiry);
        let per_prio = &mut self.per_prio[prio];
        per_prio.inserted += 1;
        per_prio.sort_list[dir].insert((rq.sector, rq.id));
        per_prio.fifo_list[dir].push_back(rq.id);
        self.store.insert(rq);
    }

    /// `dd_dispatch_request`.
    fn dispatch_request(&mut self, now: Nanos) -> Option<Request> {
        let now = self.hz.jiffies(now);
        if let Some(rq) = self.dispatch_prio_aged_requests(now) {
            return Some(rq);
        }
        for prio in 0..DD_PRIO_COUNT {
            let rq = self.dispatch_from(prio, now, now);
            if rq.is_some() || self.dd_queued(prio) > 0 {
                return rq;
            }
        }
        None
    }

    /// `dd_finish_request`.
    fn completed_request(&mut self, _now: Nanos, rq: &Request) {
        let prio = Self::prio_of(rq);
        self.per_prio[prio].completed += 1;
        assert!(self.per_prio[prio].completed <= self.per_prio[prio].inserted);
    }

    fn queued(&self) -> usize {
        self.store.len()
    }

    /// QASIO §5.3 (`elv_boost`): a queued write or discard someone blocks on joins the boosted
    /// list (module doc: where it ranks). A read is mq-deadline's synchronous I/O already.
    fn boost(&mut self, _now: Nanos, rq: RequestId) -> bool {
        if !self.store.contains(rq) || self.boosted.contains(&rq) {
            return false;
        }
        if !self.store.get(rq).is_write() {
            return false;
        }
        self.boosted.push_back(rq);
        true
    }

    fn queued_requests(&self) -> Vec<&Request> {
        self.store.requests()
    }

    /// Per level and direction, `per_prio->sort_list[dir]` and `per_prio->fifo_list[dir]` hold
    /// the level's queued requests of that direction; `dd_queued` (`stats.inserted` -
    /// `stats.completed`) counts them and the level's dispatched requests not completed; the
    /// QASIO boosted list holds queued writes, once each.
    fn check(&self, dispatched: &[&Request]) -> Result<(), String> {
        self.store.check()?;
        let mut listed = 0;
        for (prio, per_prio) in self.per_prio.iter().enumerate() {
            for dir in [READ, WRITE] {
                let what = format!("mq-deadline level {prio} direction {dir}");
                super::check_sort_and_fifo(
                    &what,
                    &per_prio.sort_list[dir],
                    &per_prio.fifo_list[dir],
                    &self.store,
                )?;
                if let Some(rq) = per_prio.fifo_list[dir]
                    .iter()
                    .map(|&id| self.store.get(id))
                    .find(|rq| Self::prio_of(rq) != prio || data_dir(rq) != dir)
                {
                    return Err(format!("{what}: R#{} belongs to another list", rq.id));
                }
                listed += per_prio.fifo_list[dir].len();
            }
            let queued = per_prio.fifo_list.iter().map(VecDeque::len).sum::<usize>();
            let in_flight = dispatched
                .iter()
                .filter(|rq| Self::prio_of(rq) == prio)
                .count();
            super::check_count(
                &format!("mq-deadline dd_queued(level {prio})"),
                self.dd_queued(prio),
                "requests of the level are queued or dispatched and not completed",
                (queued + in_flight) as u64,
            )?;
        }
        super::check_count(
            "mq-deadline's queued requests",
            self.store.len() as u64,
            "are on its fifo lists",
            listed as u64,
        )?;
        let mut boosted: Vec<RequestId> = self.boosted.iter().copied().collect();
        boosted.sort_unstable();
        boosted.dedup();
        if boosted.len() != self.boosted.len() {
            return Err("mq-deadline: a request is on the boosted list twice".into());
        }
        match boosted
            .iter()
            .find(|&&id| !self.store.contains(id) || !self.store.get(id).is_write())
        {
            Some(id) => Err(format!("mq-deadline: boosted R#{id} is not a queued write")),
            None => Ok(()),
        }
    }

    /// `dd_limit_depth` with `async_depth = max(1, 3 * nr_requests / 4)` (`dd_depth_updated`):
    /// writes and async reads.
    fn limit_depth(&self, nr_requests: usize, _sync: bool, _write: bool) -> Option<usize> {
        if let Some(depth) = self.tunables.async_depth {
            return Some(depth.min(nr_requests).max(1));
        }
        Some((self.tunables.async_depth_quarters * nr_requests / 4).max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::request::test_support::*;
    use crate::block::request::IoPrio;
    use crate::dev::IoOp;
    use crate::units::NS_PER_MS;

    fn with_class(mut rq: Request, class: IoPrioClass) -> Request {
        rq.ioprio = IoPrio::new(class, 0);
        rq
    }

    #[test]
    fn rt_is_served_before_be_and_be_waits_while_rt_is_in_flight() {
        let mut dd = MqDeadline::new(Hz(1000));
        for i in 0..4 {
            dd.add_request(
                0,
                with_class(request(i, IoOp::Read, i * 8, 8, 1), IoPrioClass::Be),
            );
        }
        dd.add_request(
            1,
            with_class(request(10, IoOp::Read, 9000, 8, 2), IoPrioClass::Rt),
        );
        let rt = dd.dispatch_request(2).unwrap();
        assert_eq!(rt.id, 10);
        // The RT request is in flight: BE requests wait for it to complete.
        assert!(dd.dispatch_request(2).is_none());
        dd.completed_request(3, &rt);
        assert_eq!(dd.dispatch_request(3).unwrap().id, 0);
    }

    #[test]
    fn be_request_ages_past_a_continuous_rt_stream() {
        let mut dd = MqDeadline::new(Hz(1000));
        dd.add_request(
            0,
            with_class(request(1, IoOp::Read, 0, 8, 1), IoPrioClass::Be),
        );
        let mut served_at = None;
        // An RT request is always queued: one arrives, then one is served, every millisecond.
        for step in 0..20_000u64 {
            let now = step * NS_PER_MS;
            let next_id = 100 + step;
            dd.add_request(
                now,
                with_class(
                    request(next_id, IoOp::Read, 8 * next_id, 8, 2),
                    IoPrioClass::Rt,
                ),
            );
            let rq = dd.dispatch_request(now).unwrap();
            dd.completed_request(now, &rq);
            if rq.id == 1 {
                served_at = Some(now);
                break;
            }
        }
        assert_eq!(served_at, Some(10_000 * NS_PER_MS));
    }

    #[test]
    fn a_boosted_write_is_dispatched_before_older_writes_in_sort_order() {
        // QASIO §5.3: 20 async writeback writes in sector order; a task blocks on the last one.
        let mut dd = MqDeadline::new(Hz(1000));
        for i in 1..=20u64 {
            dd.add_request(0, request(i, IoOp::Write, 64 * i, 8, 1));
        }
        assert_eq!(dd.dispatch_request(0).unwrap().id, 1, "sector order");
        assert!(dd.boost(0, 20));
        assert!(!dd.boost(0, 20), "already boosted");
        assert!(!dd.boost(0, 999), "not queued");
        assert_eq!(
            dd.dispatch_request(0).unwrap().id,
            20,
            "the boosted write first"
        );
        // Nothing lies beyond the boosted write's sector: the FIFO's head is next.
        assert_eq!(dd.dispatch_request(0).unwrap().id, 2);
        assert_eq!(dd.queued(), 17);
    }

    #[test]
    fn a_boosted_write_waits_for_a_read_batch_and_for_rt_io() {
        let mut dd = MqDeadline::new(Hz(1000));
        for i in 1..=3u64 {
            dd.add_request(0, request(i, IoOp::Read, 8 * i, 8, 1));
        }
        assert_eq!(dd.dispatch_request(0).unwrap().id, 1, "a read batch starts");
        dd.add_request(0, request(10, IoOp::Write, 5000, 8, 2));
        dd.add_request(0, request(11, IoOp::Write, 100, 8, 2));
        assert!(dd.boost(0, 10));
        assert!(
            !dd.boost(0, 2),
            "a read is mq-deadline's synchronous I/O already"
        );
        // The read batch continues: reads are the synchronous I/O a boost does not pass.
        assert_eq!(dd.dispatch_request(0).unwrap().id, 2);
        // An RT read goes first, and a BE request, boosted or not, waits while it is in flight.
        dd.add_request(
            0,
            with_class(request(20, IoOp::Read, 9000, 8, 3), IoPrioClass::Rt),
        );
        let rt = dd.dispatch_request(0).unwrap();
        assert_eq!(rt.id, 20);
        assert!(dd.dispatch_request(0).is_none());
        dd.completed_request(0, &rt);
        assert_eq!(
            dd.dispatch_request(0).unwrap().id,
            3,
            "the read batch goes on"
        );
        // Reads done: the boosted write before the older, lower write.
        assert_eq!(dd.dispatch_request(0).unwrap().id, 10);
        assert_eq!(dd.dispatch_request(0).unwrap().id, 11);
    }

    #[test]
    fn an_idle_class_write_boosted_is_served_at_the_be_level() {
        // Priority inheritance: an IDLE-class write a task blocks on is served while BE
        // writes are queued (without the boost it would wait for them, up to aging).
        let mut dd = MqDeadline::new(Hz(1000));
        for i in 1..=4u64 {
            dd.add_request(0, request(i, IoOp::Write, 64 * i, 8, 1));
        }
        dd.add_request(
            0,
            with_class(request(9, IoOp::Write, 0, 8, 2), IoPrioClass::Idle),
        );
        assert_eq!(dd.dispatch_request(0).unwrap().id, 1);
        assert!(dd.boost(0, 9));
        assert_eq!(dd.dispatch_request(0).unwrap().id, 9);
        assert_eq!(dd.dispatch_request(0).unwrap().id, 2);
    }

    #[test]
    fn async_depth_is_three_quarters_of_the_tags() {
        assert_eq!(
            MqDeadline::new(Hz(1000)).limit_depth(64, false, true),
            Some(48)
        );
        assert_eq!(
            MqDeadline::new(Hz(1000)).limit_depth(1, true, true),
            Some(1)
        );
    }
}

/// The checks can fail: each list or counter broken on purpose is found.
#[cfg(test)]
mod check_tests {
    use super::*;
    use crate::block::request::test_support::request;
    use crate::dev::IoOp;

    fn with_a_dispatched_write() -> (MqDeadline, Request) {
        let mut dd = MqDeadline::new(Hz(250));
        dd.add_request(0, request(1, IoOp::Read, 0, 8, 1));
        dd.add_request(0, request(2, IoOp::Write, 1000, 8, 2));
        dd.add_request(0, request(3, IoOp::Write, 5000, 8, 3));
        // `dd_init_sched` starts at DD_WRITE: the batch continues with the first write.
        let dispatched = dd.dispatch_request(0).expect("a request");
        assert_eq!(dispatched.id, 2);
        dd.check(&[&dispatched]).expect("consistent");
        (dd, dispatched)
    }

    #[test]
    fn mq_deadline_dd_queued_and_lists_that_drift_are_found() {
        let (mut dd, dispatched) = with_a_dispatched_write();
        dd.per_prio[DD_BE_PRIO].inserted += 1;
        let what = dd.check(&[&dispatched]).expect_err("dd_queued");
        assert!(what.contains("dd_queued(level 1)"), "{what}");
        let (mut dd, dispatched) = with_a_dispatched_write();
        dd.per_prio[DD_BE_PRIO].fifo_list[WRITE].pop_back();
        let what = dd.check(&[&dispatched]).expect_err("fifo");
        assert!(
            what.contains("the sort list holds 1 requests, the fifo 0"),
            "{what}"
        );
    }
}
