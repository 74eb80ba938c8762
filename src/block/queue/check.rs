//! The block layer's global invariants, checked while a run goes (as `src/mm/check.rs` checks
//! the page cache's and `src/fs/jbd2/check.rs` the journal's: a violation stops the run with
//! the device, the time and what disagrees).
//!
//! What is checked, each against the kernel structure it mirrors
//! ([`RequestQueue::check_invariants`]):
//! - **Each request in exactly one place.** Every allocated request is on one task's plug list
//!   (`current->plug->list`), in the elevator, on the dispatch list (`q->queue_head`), in the
//!   mmc driver's prepared slot (`mqrq_cur`) or held by the device under one tag
//!   (`tags->rqs[]`); none is in two, none is lost, and the requests allocated equal those
//!   completed plus those alive.
//! - **Request-list and tag accounting.** Legacy queues: `rl->count[BLK_RW_SYNC]` and
//!   `rl->count[BLK_RW_ASYNC]` equal the live requests of each kind, at most 3/2
//!   `nr_requests` (`__get_request`'s hard cap); blk-mq: the scheduler tags in use equal the
//!   live requests, at most `nr_requests`, and those counted against `async_depth`
//!   (`limit_depth`) are the live requests other than sync reads. The driver's tag map holds
//!   as many requests as the device has commands.
//! - **The flush bypass.** Flush, preflush and FUA requests never enter the elevator
//!   (`ELEVATOR_INSERT_FLUSH`): each is on the dispatch list, in the driver or on the device,
//!   and recorded as bypassing, and a bypassing request is nowhere else.
//! - **The mmc driver's slots.** A prepared request never waits while the card is idle
//!   (`mmc_start_req` starts it as soon as the card completes).
//! - **Elevator-private counts** ([`crate::block::elevator::Elevator::check`]): each
//!   scheduler's lists and counters against the requests it holds and those it dispatched
//!   that have not completed (CFQ's `rq_queued`, `rq_in_driver`, `cfqq->dispatched`, service
//!   trees and `busy_queues`; BFQ's `queued[]`, `dispatched`, `tot_rq_in_driver`,
//!   `busy_queues[]`, `wr_busy_queues`, groups with pending requests and the weights tree;
//!   mq-deadline's sort and FIFO lists per level and `dd_queued`; kyber's domain lists and
//!   tokens in use; deadline's and noop's lists and hashes).
//! - **wbt.** `rq_wait[i].inflight` equals the bios of class `i` holding a slot and waiting for
//!   a request plus the live requests tracked in it (`WBT_TRACKED`); a bio asleep in
//!   `rq_qos_wait` holds no slot.
//! - **QASIO.** A request boosted while plugged is on a plug list until it is inserted.
//!
//! Checks are on in debug and test builds and, in release builds, with `mobistack run --check`
//! ([`RequestQueue::enable_checks`]); they run after every event of the queue
//! ([`RequestQueue::advance`]), each a walk over the live requests and the elevator's queues
//! (at most a few hundred requests: `nr_requests` per direction or scheduler tags). In the
//! library's unit tests a violation panics at once; otherwise it is recorded, the block layer
//! stops the simulation and the run ends with an error carrying the message
//! ([`RequestQueue::violation`]).
//!
//! Simplifications: the checks see the queue's own state between events, not in the middle of
//! one (a submission's changes are checked at the next event).

use super::{AllocModel, RequestQueue};
use crate::block::request::{Request, RequestId};
use std::collections::BTreeMap;
use std::fmt;

/// The checks' switch and their first violation.
#[derive(Debug)]
pub(super) struct QueueChecks {
    enabled: bool,
    panic_on_violation: bool,
    violation: Option<String>,
}

impl Default for QueueChecks {
    fn default() -> Self {
        QueueChecks {
            enabled: cfg!(debug_assertions),
            panic_on_violation: cfg!(test),
            violation: None,
        }
    }
}

/// Where a live request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// On the plug list of task `pid`.
    Plug(u32),
    Elevator,
    DispatchList,
    /// In the mmc driver's prepared slot.
    Driver,
    /// On the device under tag `tag`.
    Device(u64),
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Plug(pid) => write!(f, "the plug list of pid {pid}"),
            Place::Elevator => write!(f, "the elevator"),
            Place::DispatchList => write!(f, "the dispatch list"),
            Place::Driver => write!(f, "the mmc driver's prepared slot"),
            Place::Device(tag) => write!(f, "the device (tag {tag})"),
        }
    }
}

impl RequestQueue {
    /// Turns the global checks on (release builds: `mobistack run --check`).
    pub fn enable_checks(&mut self) {
        self.checks.enabled = true;
    }

    /// Whether the checks run after each event.
    pub fn checks_enabled(&self) -> bool {
        self.checks.enabled
    }

    /// Whether a violation panics (unit tests) or is recorded for the run to end with.
    pub fn set_panic_on_violation(&mut self, panic: bool) {
        self.checks.panic_on_violation = panic;
    }

    /// The first violation the checks found, if any.
    pub fn violation(&self) -> Option<&str> {
        self.checks.violation.as_deref()
    }

    /// The checks after an event at `now`, when on and nothing was found yet.
    pub(super) fn run_checks(&mut self, now: crate::units::Nanos) {
        if !self.checks.enabled || self.checks.violation.is_some() {
            return;
        }
        if let Err(what) = self.check_invariants() {
            let (major, minor) = self.device.device_numbers();
            let message = format!(
                "block-layer invariant violated on {major},{minor} ({}) at t = {:.6} s: {what}",
                self.elevator.name(),
                now as f64 / 1e9
            );
            if self.checks.panic_on_violation {
                panic!("{message}");
            }
            self.checks.violation = Some(message);
        }
    }

    /// Every invariant of the module documentation, now: `Err` says which and how.
    pub fn check_invariants(&self) -> Result<(), String> {
        let places = self.requests_by_place();
        self.check_one_place(&places)?;
        self.check_request_accounting(&places)?;
        self.check_bypass_and_driver(&places)?;
        let dispatched: Vec<&Request> = places
            .iter()
            .filter(|(place, rq)| {
                !matches!(place, Place::Plug(_) | Place::Elevator) && !self.bypass.contains(&rq.id)
            })
            .map(|&(_, rq)| rq)
            .collect();
        self.elevator
            .check(&dispatched)
            .map_err(|what| format!("{}: {what}", self.elevator.name()))?;
        self.check_wbt(&places)?;
        self.check_qasio_pending(&places)
    }

    /// Every live request with where it is, plug lists by pid first.
    fn requests_by_place(&self) -> Vec<(Place, &Request)> {
        let mut places: Vec<(Place, &Request)> = Vec::with_capacity(self.allocated() + 8);
        let mut pids: Vec<u64> = self.plugs.keys().copied().collect();
        pids.sort_unstable();
        for pid in pids {
            let place = Place::Plug(pid as u32);
            places.extend(self.plugs[&pid].iter().map(|rq| (place, rq)));
        }
        let mut queued = self.elevator.queued_requests();
        queued.sort_unstable_by_key(|rq| rq.id);
        places.extend(queued.into_iter().map(|rq| (Place::Elevator, rq)));
        places.extend(
            self.dispatch_list
                .iter()
                .map(|rq| (Place::DispatchList, rq)),
        );
        if let Some(prepared) = self.mmc.as_ref().and_then(|mmc| mmc.prepared.as_ref()) {
            places.extend(prepared.iter().map(|rq| (Place::Driver, rq)));
        }
        places.extend(
            self.in_flight
                .requests()
                .map(|(tag, rq)| (Place::Device(tag), rq)),
        );
        places
    }

    /// Each live request is in one place, and they are the requests allocated.
    fn check_one_place(&self, places: &[(Place, &Request)]) -> Result<(), String> {
        let mut seen: BTreeMap<RequestId, Place> = BTreeMap::new();
        for &(place, rq) in places {
            if let Some(first) = seen.insert(rq.id, place) {
                return Err(format!("R#{} is in {first} and in {place}", rq.id));
            }
        }
        let stats = self.stats;
        if stats.requests != stats.completed + places.len() as u64 {
            return Err(format!(
                "{} requests were allocated, {} completed and {} are alive",
                stats.requests,
                stats.completed,
                places.len()
            ));
        }
        Ok(())
    }

    /// `rl->count[]` / the scheduler tags in use, by kind, against the live requests.
    fn check_request_accounting(&self, places: &[(Place, &Request)]) -> Result<(), String> {
        let sync = places.iter().filter(|(_, rq)| rq.is_sync()).count();
        let by_class = [places.len() - sync, sync];
        let (counter, limit) = match self.alloc {
            AllocModel::Legacy { nr_requests } => (
                "rl->count",
                (!self.unbounded).then_some(3 * nr_requests / 2),
            ),
            AllocModel::Mq { nr_requests } => ("scheduler tags in use", Some(nr_requests)),
        };
        for (class, &live) in by_class.iter().enumerate() {
            if self.allocated[class] != live {
                let kind = ["async", "sync"][class];
                return Err(format!(
                    "{counter}[{kind}] = {} but {live} {kind} requests are alive (plugged, queued, dispatched, on the device)",
                    self.allocated[class]
                ));
            }
        }
        let limited = places
            .iter()
            .filter(|(_, rq)| Self::depth_limited(rq.is_sync(), rq.is_write()))
            .count();
        if self.allocated_limited != limited {
            return Err(format!(
                "requests counted against async_depth = {} but {limited} live requests are not sync reads",
                self.allocated_limited
            ));
        }
        match (self.alloc, limit) {
            (AllocModel::Legacy { .. }, Some(cap)) => {
                if let Some(class) = (0..2).find(|&class| self.allocated[class] > cap) {
                    return Err(format!(
                        "rl->count[{class}] = {} is over the hard cap 3/2 nr_requests = {cap}",
                        self.allocated[class]
                    ));
                }
            }
            (AllocModel::Mq { .. }, Some(tags)) if self.allocated() > tags => {
                return Err(format!(
                    "{} scheduler tags are in use of nr_requests = {tags}",
                    self.allocated()
                ));
            }
            _ => {}
        }
        Ok(())
    }

    /// The flush bypass, the tag map against the device, and the mmc driver's slots.
    fn check_bypass_and_driver(&self, places: &[(Place, &Request)]) -> Result<(), String> {
        let mut bypassing = 0;
        for &(place, rq) in places {
            let bypass = self.bypass.contains(&rq.id);
            bypassing += usize::from(bypass);
            let beyond_elevator = !matches!(place, Place::Plug(_) | Place::Elevator);
            if bypass && !beyond_elevator {
                return Err(format!(
                    "R#{} bypasses the elevator but is in {place}",
                    rq.id
                ));
            }
            let flush = rq.flags.fua
                || rq.flags.preflush
                || rq.flags.postflush
                || rq.op == crate::dev::IoOp::Flush;
            if flush && beyond_elevator && !bypass {
                return Err(format!(
                    "flush request R#{} is in {place} without bypassing the elevator (ELEVATOR_INSERT_FLUSH)",
                    rq.id
                ));
            }
            if flush && place == Place::Elevator {
                return Err(format!("flush request R#{} is in the elevator", rq.id));
            }
        }
        if bypassing != self.bypass.len() {
            return Err(format!(
                "{} requests are recorded as bypassing the elevator, {bypassing} of them are alive",
                self.bypass.len()
            ));
        }
        let on_device = places
            .iter()
            .filter(|(place, _)| matches!(place, Place::Device(_)))
            .count();
        if on_device != self.in_flight.len() || on_device != self.device.in_flight() {
            return Err(format!(
                "the tag map holds {} requests ({on_device} found), the device {} commands",
                self.in_flight.len(),
                self.device.in_flight()
            ));
        }
        let prepared = self.mmc.as_ref().is_some_and(|mmc| mmc.prepared.is_some());
        if prepared && self.device.in_flight() == 0 {
            return Err("the mmc driver holds a prepared request while the card is idle".into());
        }
        Ok(())
    }

    /// wbt's `rq_wait[i].inflight` against the slots held.
    fn check_wbt(&self, places: &[(Place, &Request)]) -> Result<(), String> {
        let Some(wbt) = self.wbt.as_ref() else {
            if let Some(&(place, rq)) = places.iter().find(|(_, rq)| rq.wbt.tracked) {
                return Err(format!(
                    "R#{} in {place} is tracked by wbt, which is off",
                    rq.id
                ));
            }
            return Ok(());
        };
        for rwq in 0..super::super::wbt::WBT_NUM_RWQ {
            let tokens = self
                .wbt_tokens
                .values()
                .filter(|flags| flags.tracked && flags.rwq() == rwq)
                .count();
            let requests = places
                .iter()
                .filter(|(_, rq)| rq.wbt.tracked && rq.wbt.rwq() == rwq)
                .count();
            if wbt.inflight[rwq] as usize != tokens + requests {
                return Err(format!(
                    "wbt rq_wait[{rwq}].inflight = {} but {tokens} bios hold a slot and {requests} live requests are tracked",
                    wbt.inflight[rwq]
                ));
            }
            if let Some((bio, _)) = self.wbt_waiting[rwq]
                .iter()
                .find(|(bio, _)| self.wbt_tokens.contains_key(bio))
            {
                return Err(format!(
                    "bio {bio} sleeps in wbt's rq_wait[{rwq}] but holds a slot"
                ));
            }
        }
        Ok(())
    }

    /// QASIO: a request boosted while plugged is still plugged.
    fn check_qasio_pending(&self, places: &[(Place, &Request)]) -> Result<(), String> {
        for &id in self.qasio_pending.keys() {
            let place = places.iter().find(|(_, rq)| rq.id == id).map(|&(p, _)| p);
            if !matches!(place, Some(Place::Plug(_))) {
                return Err(format!(
                    "R#{id}, boosted while plugged, is in {}",
                    place.map_or("no place (freed)".to_string(), |p| p.to_string())
                ));
            }
        }
        Ok(())
    }
}

/// Each check can fail: a queue in a consistent state passes them all, then one count is
/// broken on purpose and the check that mirrors its kernel structure names it.
#[cfg(test)]
mod tests {
    use super::super::{AllocModel, RequestQueue, SubmitOutcome, ALLOC_ASYNC, ALLOC_SYNC};
    use crate::block::elevator::{self, QueueTraits};
    use crate::block::request::test_support::bio;
    use crate::dev::fixed::FixedLatencyDevice;
    use crate::dev::IoOp;
    use crate::units::NS_PER_MS;

    /// A queue under `elevator` over a one-slot device with requests in every place: on the
    /// device, queued in the elevator, on a plug list, and a flush on the dispatch list.
    fn busy_queue(elevator: &str, alloc: AllocModel) -> RequestQueue {
        let traits = QueueTraits {
            nonrot: true,
            queue_depth: 1,
        };
        let device = FixedLatencyDevice::new(1, NS_PER_MS, 0);
        let mut queue = RequestQueue::new(
            elevator::new_elevator(elevator, traits).expect("an elevator"),
            Box::new(device),
            alloc,
        );
        for i in 0..4 {
            let op = if i % 2 == 0 { IoOp::Write } else { IoOp::Read };
            queue.submit_bio(0, &bio(i, op, 10_000 * i, 8, 1 + i as u32));
        }
        queue.start_plug(9);
        queue.submit_bio(0, &bio(10, IoOp::Write, 90_000, 8, 9));
        let mut flush = bio(11, IoOp::Flush, 0, 0, 8);
        flush.flags.preflush = true;
        assert!(matches!(
            queue.submit_bio(0, &flush),
            SubmitOutcome::Queued(_)
        ));
        queue
    }

    fn legacy() -> AllocModel {
        AllocModel::Legacy { nr_requests: 128 }
    }

    fn mq() -> AllocModel {
        AllocModel::Mq { nr_requests: 128 }
    }

    /// `check` breaks the queue and returns the message of the check that fired.
    fn broken(elevator: &str, alloc: AllocModel, check: impl FnOnce(&mut RequestQueue)) -> String {
        let mut queue = busy_queue(elevator, alloc);
        queue
            .check_invariants()
            .unwrap_or_else(|what| panic!("a consistent {elevator} queue fails: {what}"));
        check(&mut queue);
        queue
            .check_invariants()
            .expect_err("the broken count is found")
    }

    #[test]
    fn blk_rl_count_that_drifts_from_the_live_requests_is_found() {
        let what = broken("cfq", legacy(), |q| q.allocated[ALLOC_ASYNC] += 1);
        assert!(what.contains("rl->count[async]"), "{what}");
        let what = broken("mq-deadline", mq(), |q| q.allocated[ALLOC_SYNC] -= 1);
        assert!(what.contains("scheduler tags in use[sync]"), "{what}");
        let what = broken("kyber", mq(), |q| q.allocated_limited += 1);
        assert!(what.contains("async_depth"), "{what}");
    }

    #[test]
    fn a_request_in_two_places_is_found() {
        let what = broken("noop", legacy(), |q| {
            let plugged = q.plugs[&9][0].clone();
            q.dispatch_list.push_back(plugged);
        });
        assert!(
            what.contains("is in the plug list of pid 9 and in the dispatch list"),
            "{what}"
        );
    }

    #[test]
    fn a_lost_request_is_found() {
        let what = broken("noop", legacy(), |q| {
            q.plugs.get_mut(&9).expect("plugged").clear();
        });
        assert!(
            what.contains("6 requests were allocated, 0 completed and 5 are alive"),
            "{what}"
        );
    }

    #[test]
    fn a_flush_that_does_not_bypass_the_elevator_is_found() {
        let what = broken("deadline", legacy(), |q| q.bypass.clear());
        assert!(what.contains("ELEVATOR_INSERT_FLUSH"), "{what}");
    }

    #[test]
    fn wbt_inflight_that_drifts_from_its_tracked_requests_is_found() {
        let mut queue = RequestQueue::new(
            Box::new(crate::block::elevator::noop::Noop::new()),
            Box::new(FixedLatencyDevice::new(1, NS_PER_MS, 0)),
            mq(),
        );
        queue.enable_wbt(crate::block::wbt::Wbt::new(
            1,
            crate::block::wbt::DEFAULT_MIN_LAT_NSEC_NONROT,
            true,
            crate::kernel::KernelConfig::default().hz,
        ));
        let mut write = bio(1, IoOp::Write, 0, 8, 1);
        write.issued_async = true;
        queue.submit_bio(0, &write);
        queue.check_invariants().expect("consistent");
        queue.wbt.as_mut().expect("wbt").inflight[0] += 1;
        let what = queue.check_invariants().expect_err("found");
        assert!(what.contains("wbt rq_wait[0].inflight = 2"), "{what}");
    }

    #[test]
    fn a_violation_stops_at_the_first_and_is_recorded_when_not_panicking() {
        let mut queue = busy_queue("noop", legacy());
        queue.enable_checks();
        queue.set_panic_on_violation(false);
        queue.allocated_limited += 1;
        queue.advance(NS_PER_MS);
        let message = queue.violation().expect("recorded").to_string();
        assert!(
            message.starts_with("block-layer invariant violated on"),
            "{message}"
        );
        assert!(message.contains("(noop) at t = 0.001000 s"), "{message}");
        queue.advance(2 * NS_PER_MS);
        assert_eq!(
            queue.violation(),
            Some(message.as_str()),
            "the first is kept"
        );
    }

    #[test]
    #[should_panic(expected = "block-layer invariant violated")]
    fn in_unit_tests_a_violation_panics_at_the_event() {
        let mut queue = busy_queue("noop", legacy());
        queue.enable_checks();
        queue.allocated_limited += 1;
        queue.advance(NS_PER_MS);
    }
}
