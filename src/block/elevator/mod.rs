//! The elevator (I/O scheduler) interface, modelled on Linux's `struct elevator_ops`
//! (include/linux/elevator.h, 3.10) and the generic merge lookup of block/elevator.c (`elv_merge`,
//! the back-merge hash `elv_rqhash_find`, `elv_merged_request`).
//!
//! An elevator is a pure state machine (DESIGN.md principle 7): every method takes the current
//! virtual time and returns; none awaits. Elevators that need timers (CFQ's idle slice timer)
//! say when they want to be asked again with [`Elevator::next_timer`], and the driver calls
//! [`Elevator::timer_fired`] at that time.
//!
//! Ownership: a request belongs to the elevator from `add_request` until `dispatch_request`
//! returns it; the request queue then owns it until completion. `completed_request` gets a
//! reference so the elevator can update its accounting.
//!
//! Simplifications (all elevators):
//! - There is no separate dispatch list between the elevator and the driver: the request queue
//!   asks `dispatch_request` only when the device has a free slot, so "moved to the dispatch list"
//!   and "issued to the device" are the same instant. (Flush requests, which Linux also puts on
//!   the dispatch list, are handled by the request queue.) The driver decides when it can take
//!   a request: a SCSI host while the device has a free slot, the mmc driver while one of its
//!   two slots is free (the second request waits in the driver for the card). SCSI still runs
//!   the elevator when the device is full (`scsi_request_fn` peeks first), and schedulers whose
//!   queue selection has effects (CFQ) get that call as [`Elevator::dispatch_blocked`]; the
//!   request itself waits in the elevator.
//! - Request-to-request merges after a bio merge (`elv_attempt_back_merge`/`attempt_merge`) and
//!   insert-time merges of plugged requests are not modelled; bio merges are.
//! - The `last_merge` one-entry cache is not modelled (it only speeds the lookup up).

pub mod bfq;
pub mod cfq;
pub mod deadline;
pub mod kyber;
pub mod mq_deadline;
pub mod noop;
pub mod subregion;

use super::request::{Bio, MergeKind, Request, RequestId};
use crate::kernel::Hz;
use crate::units::Nanos;

/// The scheduler interface (`elevator_ops`).
pub trait Elevator {
    /// Name as in /sys/block/*/queue/scheduler.
    fn name(&self) -> &'static str;

    /// `elv_merge` + `elevator_merged_fn`: merges `bio` into a queued request when one is
    /// adjacent and the elevator allows it, and returns which request and how.
    fn merge_bio(
        &mut self,
        now: Nanos,
        bio: &Bio,
        max_sectors: u32,
    ) -> Option<(RequestId, MergeKind)>;

    /// `elevator_add_req_fn`: a new request enters the scheduler.
    fn add_request(&mut self, now: Nanos, rq: Request);

    /// `elevator_dispatch_fn`: the next request to issue to the device, or `None` if the elevator
    /// has nothing or chooses to wait (idling). Called only when the device can take a request.
    fn dispatch_request(&mut self, now: Nanos) -> Option<Request>;

    /// `elevator_dispatch_fn` called while a SCSI device has no free slot: `scsi_request_fn`
    /// peeks the next request before it checks that the device is ready. (The mmc queue thread
    /// fetches its next request right after starting one, which the queue models as the
    /// driver's second slot, and does not peek when both are full.) A scheduler may
    /// expire and select queues here (CFQ's `cfq_select_queue`); nothing is issued, the request
    /// is taken by `dispatch_request` when a slot frees. Default: nothing.
    fn dispatch_blocked(&mut self, _now: Nanos) {}

    /// `elevator_completed_req_fn`: a request this elevator dispatched finished.
    fn completed_request(&mut self, now: Nanos, rq: &Request);

    /// Requests queued in the scheduler (not yet dispatched).
    fn queued(&self) -> usize;

    /// `elevator_queue_empty_fn` negated / `blk_mq_sched_has_work`.
    fn has_work(&self) -> bool {
        self.queued() > 0
    }

    /// The earliest time at which the elevator wants to be asked again even if nothing else
    /// happens (an idle-slice timer). `None`: no timer armed.
    fn next_timer(&self) -> Option<Nanos> {
        None
    }

    /// The timer returned by `next_timer` expired at `now`.
    fn timer_fired(&mut self, _now: Nanos) {}

    /// `elv_boost` (QASIO): move the queued request `rq` (or the queue holding it) ahead because a
    /// synchronous task waits on it. Returns whether anything moved. Default: nothing.
    fn boost(&mut self, _now: Nanos, _rq: RequestId) -> bool {
        false
    }

    /// FastTrack's I/O dispatcher through the scheduler (`[stack.fasttrack] id_path =
    /// "elevator"`): the queued request `rq` is dispatched now, its queue made the one served.
    /// `None`: the scheduler does not hold `rq`; the request stays queued. Only called when
    /// [`Elevator::has_dispatch_now`].
    fn dispatch_now(&mut self, _now: Nanos, _rq: RequestId) -> Option<Request> {
        None
    }

    /// Whether [`Elevator::dispatch_now`] is implemented (CFQ). Under the others FastTrack's
    /// dispatcher takes the bypass whatever `id_path` says. Default: no.
    fn has_dispatch_now(&self) -> bool {
        false
    }

    /// The concrete scheduler, for tests and reports that read its state (kyber's domain
    /// depths, BFQ's queues). Default: none.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }

    /// blk-mq `limit_depth` (`data->shallow_depth`): how many of the `nr_requests` scheduler
    /// tags a request of this kind may find in use by depth-limited requests (all but sync
    /// reads, which are never limited) and still get one, if the elevator limits it
    /// (mq-deadline's `async_depth`, BFQ's `word_depths`, kyber's `async_depth`).
    fn limit_depth(&self, _nr_requests: usize, _sync: bool, _write: bool) -> Option<usize> {
        None
    }

    /// The requests queued in the scheduler (not yet dispatched), in no particular order: the
    /// block layer's global checks ([`crate::block::check`]) find each request in exactly one
    /// place with them.
    fn queued_requests(&self) -> Vec<&Request>;

    /// The scheduler's private accounting against its own lists, and against `dispatched`: the
    /// requests it dispatched that have not completed (in the driver, on the device, or put
    /// back on the dispatch list by the mmc driver). `Err` names the kernel structure whose
    /// count disagrees. Run by the block layer's checks (debug builds, `mobistack run
    /// --check`). Default: nothing to check.
    fn check(&self, _dispatched: &[&Request]) -> Result<(), String> {
        Ok(())
    }
}

/// The names accepted by [`new_elevator`].
pub const ELEVATOR_NAMES: [&str; 7] = [
    "noop",
    "deadline",
    "cfq",
    "mq-deadline",
    "kyber",
    "bfq",
    "subregion",
];

/// Whether Linux `version` has elevator `name` ([`crate::kernel::KernelVersion`]'s
/// predicates): the legacy `noop`, `deadline`, `cfq` up to 4.19; `mq-deadline` and `none`
/// from 4.11; `bfq` and `kyber` from 4.12; seed 003's `subregion` (a paper's scheduler, in no
/// kernel) with any version. False for a name that is no elevator.
pub fn version_has(version: crate::kernel::KernelVersion, name: &str) -> bool {
    match name {
        "noop" | "deadline" | "cfq" => version.has_legacy_request_queue(),
        "mq-deadline" | "none" => version.has_blk_mq_scheduling(),
        "bfq" | "kyber" => version.has_bfq_and_kyber(),
        "subregion" => true,
        _ => false,
    }
}

/// The elevators Linux `version` has, in [`ELEVATOR_NAMES`]' order (`none` last; seed 003's
/// `subregion`, in no kernel, left out).
pub fn elevators_of(version: crate::kernel::KernelVersion) -> Vec<&'static str> {
    ELEVATOR_NAMES
        .iter()
        .chain(&["none"])
        .copied()
        .filter(|&name| name != "subregion" && version_has(version, name))
        .collect()
}

/// The versions modelled that have elevator `name`, in words: "4.19 and later", "3.0 to
/// 4.19"; `None` for a name no version has.
pub fn versions_with(name: &str) -> Option<String> {
    use crate::kernel::KernelVersion;
    let with: Vec<KernelVersion> = KernelVersion::ALL
        .into_iter()
        .filter(|&version| version_has(version, name))
        .collect();
    let (first, last) = (*with.first()?, *with.last()?);
    Some(if last == KernelVersion::Mainline {
        format!("{first} and later")
    } else {
        format!("{first} to {last}")
    })
}

/// What an elevator needs to know about the device (CFQ: `blk_queue_nonrot`, queue depth).
#[derive(Debug, Clone, Copy)]
pub struct QueueTraits {
    /// `QUEUE_FLAG_NONROT`: flash, no seek penalty.
    pub nonrot: bool,
    /// Commands the device can hold at once.
    pub queue_depth: usize,
}

/// Builds an elevator by name with its kernel defaults at the default tick rate
/// (`[stack.kernel]`'s default HZ).
pub fn new_elevator(name: &str, traits: QueueTraits) -> Result<Box<dyn Elevator>, String> {
    let hz = crate::kernel::KernelConfig::default().hz;
    let config = super::BlockConfig::default();
    let version = config.era(&crate::kernel::KernelConfig::default()).version;
    build_elevator(name, traits, hz, &config, version)
}

/// Builds the elevator `name` at tick rate `hz` with the tunables of `config` (its
/// `[stack.block.<elevator>]` table; the kernel defaults where a value is not given), as the
/// block layer of Linux `version` has it (BFQ's queue merging differs by version).
pub fn build_elevator(
    name: &str,
    traits: QueueTraits,
    hz: Hz,
    config: &super::BlockConfig,
    version: crate::kernel::KernelVersion,
) -> Result<Box<dyn Elevator>, String> {
    match name {
        "noop" | "none" => Ok(Box::new(noop::Noop::new())),
        "deadline" => Ok(Box::new(deadline::Deadline::with_tunables(
            hz,
            config.deadline.tunables(hz),
        ))),
        "cfq" => Ok(Box::new(cfq::Cfq::with_tunables(
            traits,
            hz,
            config.cfq.tunables(hz),
        ))),
        "mq-deadline" => Ok(Box::new(mq_deadline::MqDeadline::with_tunables(
            hz,
            config.mq_deadline.tunables(hz),
        ))),
        "kyber" => Ok(Box::new(kyber::Kyber::new(hz, config.kyber.tunables()))),
        "bfq" => Ok(Box::new(bfq::Bfq::new(
            traits,
            hz,
            bfq::BfqTunables {
                kernel: version,
                ..config.bfq.tunables(hz)
            },
        ))),
        "subregion" => Ok(Box::new(subregion::Subregion::new(
            config.subregion.tunables(),
        ))),
        _ => Err(format!(
            "unknown elevator `{name}`: expected one of {}",
            ELEVATOR_NAMES.join(", ")
        )),
    }
}

/// Queued requests of one elevator, indexed for the generic merge lookups: by end sector (the
/// back-merge hash, `elv_rqhash_*`) and by start sector (front merges).
#[derive(Debug, Default)]
pub struct RqStore {
    /// By id (looked up, never iterated in order: a hash map moves no request on removal).
    rqs: crate::sim::IdMap<Request>,
    by_end: SectorIndex,
    by_start: SectorIndex,
}

/// Request ids by sector: a hash map (only exact sectors are looked up, as `elv_rqhash_find`
/// does) whose entries keep their ids in increasing order, the order a merge lookup tries them.
#[derive(Debug, Default)]
struct SectorIndex {
    ids: crate::sim::IdMap<SectorIds>,
}

/// The ids at one sector: nearly always one, inline.
#[derive(Debug)]
enum SectorIds {
    One([RequestId; 1]),
    /// Two or more, in increasing order.
    Many(Vec<RequestId>),
}

impl SectorIndex {
    /// Adds `id` at `sector`; false if it is there already.
    fn insert(&mut self, sector: u64, id: RequestId) -> bool {
        match self.ids.entry(sector) {
            std::collections::hash_map::Entry::Vacant(entry) => {
                entry.insert(SectorIds::One([id]));
                true
            }
            std::collections::hash_map::Entry::Occupied(mut entry) => {
                let entry = entry.get_mut();
                match entry {
                    SectorIds::One([other]) if *other == id => false,
                    SectorIds::One([other]) => {
                        let other = *other;
                        *entry = SectorIds::Many(if other < id {
                            vec![other, id]
                        } else {
                            vec![id, other]
                        });
                        true
                    }
                    SectorIds::Many(ids) => match ids.binary_search(&id) {
                        Ok(_) => false,
                        Err(at) => {
                            ids.insert(at, id);
                            true
                        }
                    },
                }
            }
        }
    }

    /// Removes `id` from `sector`; false if it is not there.
    fn remove(&mut self, sector: u64, id: RequestId) -> bool {
        let Some(entry) = self.ids.get_mut(&sector) else {
            return false;
        };
        match entry {
            SectorIds::One([other]) => {
                if *other != id {
                    return false;
                }
                self.ids.remove(&sector);
            }
            SectorIds::Many(ids) => {
                let Ok(at) = ids.binary_search(&id) else {
                    return false;
                };
                ids.remove(at);
                if let [last] = ids[..] {
                    *entry = SectorIds::One([last]);
                }
            }
        }
        true
    }

    /// Ids indexed, over every sector.
    fn len(&self) -> usize {
        self.ids
            .values()
            .map(|ids| match ids {
                SectorIds::One(_) => 1,
                SectorIds::Many(ids) => ids.len(),
            })
            .sum()
    }

    /// The ids at `sector`, in increasing order.
    fn at(&self, sector: u64) -> &[RequestId] {
        match self.ids.get(&sector) {
            None => &[],
            Some(SectorIds::One(one)) => one,
            Some(SectorIds::Many(ids)) => ids,
        }
    }
}

impl RqStore {
    pub fn insert(&mut self, rq: Request) {
        assert!(self.by_end.insert(rq.end_sector(), rq.id));
        assert!(self.by_start.insert(rq.sector, rq.id));
        let previous = self.rqs.insert(rq.id, rq);
        assert!(previous.is_none(), "request queued twice");
    }

    pub fn remove(&mut self, id: RequestId) -> Request {
        let rq = self
            .rqs
            .remove(&id)
            .expect("removing a request that is not queued");
        assert!(self.by_end.remove(rq.end_sector(), id));
        assert!(self.by_start.remove(rq.sector, id));
        rq
    }

    pub fn get(&self, id: RequestId) -> &Request {
        self.rqs.get(&id).expect("request not queued")
    }

    pub fn contains(&self, id: RequestId) -> bool {
        self.rqs.contains_key(&id)
    }

    pub fn len(&self) -> usize {
        self.rqs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rqs.is_empty()
    }

    /// The queued requests, in no particular order (the block layer's checks).
    pub fn requests(&self) -> Vec<&Request> {
        self.rqs.values().collect()
    }

    /// `elv_rqhash` and the sort tree index every queued request once, at its end and start
    /// sector (the block layer's checks).
    pub fn check(&self) -> Result<(), String> {
        let (by_end, by_start) = (self.by_end.len(), self.by_start.len());
        if by_end != self.rqs.len() || by_start != self.rqs.len() {
            return Err(format!(
                "the merge indexes (elv_rqhash, sort tree) hold {by_end} / {by_start} requests, {} are queued",
                self.rqs.len()
            ));
        }
        let mut ids: Vec<RequestId> = self.rqs.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            let rq = &self.rqs[&id];
            if !self.by_end.at(rq.end_sector()).contains(&id)
                || !self.by_start.at(rq.sector).contains(&id)
            {
                return Err(format!(
                    "R#{id} ({} + {}) is not indexed at its sectors in elv_rqhash / the sort tree",
                    rq.sector, rq.nr_sectors
                ));
            }
        }
        Ok(())
    }

    /// `elv_rqhash_find`: a queued request ending where `bio` starts that may take it.
    pub fn find_back_merge(
        &self,
        bio: &Bio,
        max_sectors: u32,
        allow: impl Fn(&Request) -> bool,
    ) -> Option<RequestId> {
        self.by_end
            .at(bio.sector)
            .iter()
            .map(|id| &self.rqs[id])
            .find(|rq| rq.merge_ok(bio, max_sectors) && allow(rq))
            .map(|rq| rq.id)
    }

    /// Front-merge lookup in a sort tree (`elv_rb_find` on `bio_end_sector`).
    pub fn find_front_merge(
        &self,
        bio: &Bio,
        max_sectors: u32,
        allow: impl Fn(&Request) -> bool,
    ) -> Option<RequestId> {
        let end = bio.end_sector();
        self.by_start
            .at(end)
            .iter()
            .map(|id| &self.rqs[id])
            .find(|rq| rq.merge_ok(bio, max_sectors) && allow(rq))
            .map(|rq| rq.id)
    }

    /// `elv_merge`: back merge through the hash first, then (if the elevator does front merges)
    /// front merge through the sort tree. Performs the merge and returns the old start sector so
    /// the elevator can re-sort a front-merged request.
    pub fn merge(
        &mut self,
        bio: &Bio,
        max_sectors: u32,
        front_merges: bool,
        allow: impl Fn(&Request) -> bool,
    ) -> Option<(RequestId, MergeKind, u64)> {
        let found = match self.find_back_merge(bio, max_sectors, &allow) {
            Some(id) => Some((id, MergeKind::Back)),
            None if front_merges => self
                .find_front_merge(bio, max_sectors, &allow)
                .map(|id| (id, MergeKind::Front)),
            None => None,
        };
        let (id, kind) = found?;
        let mut rq = self.remove(id);
        let old_sector = rq.sector;
        rq.merge_bio(bio, kind);
        self.insert(rq);
        Some((id, kind, old_sector))
    }
}

/// The block layer's checks of a scheduler queue kept as a sort list and a FIFO (deadline's
/// `sort_list[dir]` / `fifo_list[dir]`, CFQ's and BFQ's `cfqq->sort_list` / `cfqq->fifo`):
/// both hold the same requests, each once, queued in `store` at the sector its key says.
/// `what` names the kernel lists in a message.
pub(crate) fn check_sort_and_fifo(
    what: &str,
    sort: &std::collections::BTreeSet<(u64, RequestId)>,
    fifo: &std::collections::VecDeque<RequestId>,
    store: &RqStore,
) -> Result<(), String> {
    if sort.len() != fifo.len() {
        return Err(format!(
            "{what}: the sort list holds {} requests, the fifo {}",
            sort.len(),
            fifo.len()
        ));
    }
    for &(sector, id) in sort {
        if !store.contains(id) {
            return Err(format!("{what}: R#{id} is on the sort list but not queued"));
        }
        if store.get(id).sector != sector {
            return Err(format!(
                "{what}: R#{id} is sorted at sector {sector} but starts at {}",
                store.get(id).sector
            ));
        }
    }
    let mut in_fifo: Vec<RequestId> = fifo.iter().copied().collect();
    in_fifo.sort_unstable();
    let mut sorted: Vec<RequestId> = sort.iter().map(|&(_, id)| id).collect();
    sorted.sort_unstable();
    if in_fifo != sorted {
        return Err(format!(
            "{what}: the fifo {in_fifo:?} and the sort list {sorted:?} hold different requests"
        ));
    }
    Ok(())
}

/// Counts `have` against `want`, naming the kernel counter and what it counts in the message.
pub(crate) fn check_count(counter: &str, have: u64, what: &str, want: u64) -> Result<(), String> {
    if have == want {
        Ok(())
    } else {
        Err(format!("{counter} = {have}, but {want} {what}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::request::test_support::*;
    use crate::block::request::MAX_REQUEST_SECTORS;
    use crate::dev::IoOp;

    #[test]
    fn store_merges_back_then_front() {
        let mut store = RqStore::default();
        store.insert(request(1, IoOp::Write, 100, 8, 1));
        let back = bio(2, IoOp::Write, 108, 8, 1);
        assert_eq!(
            store.merge(&back, MAX_REQUEST_SECTORS, true, |_| true),
            Some((1, MergeKind::Back, 100))
        );
        let front = bio(3, IoOp::Write, 92, 8, 1);
        assert_eq!(
            store.merge(&front, MAX_REQUEST_SECTORS, false, |_| true),
            None
        );
        assert_eq!(
            store.merge(&front, MAX_REQUEST_SECTORS, true, |_| true),
            Some((1, MergeKind::Front, 100))
        );
        assert_eq!(store.get(1).sector, 92);
        assert_eq!(store.get(1).nr_sectors, 24);
        let refused = bio(4, IoOp::Write, 116, 8, 2);
        assert_eq!(
            store.merge(&refused, MAX_REQUEST_SECTORS, true, |_| false),
            None
        );
        assert_eq!(store.remove(1).bios, vec![3, 1, 2]);
        assert!(store.is_empty());
    }

    #[test]
    fn sector_index_keeps_ids_unique_and_in_order() {
        let mut index = SectorIndex::default();
        assert!(index.insert(8, 5));
        assert!(!index.insert(8, 5), "an id is indexed once");
        assert!(index.insert(8, 3));
        assert!(index.insert(8, 9));
        assert!(index.insert(16, 4));
        assert_eq!(index.at(8), &[3, 5, 9]);
        assert_eq!(index.at(16), &[4]);
        assert_eq!(index.at(24), &[] as &[RequestId]);
        assert!(!index.remove(8, 4), "4 is not at sector 8");
        assert!(index.remove(8, 5));
        assert!(index.remove(8, 3));
        assert_eq!(index.at(8), &[9]);
        assert!(index.remove(8, 9));
        assert!(!index.remove(8, 9));
        assert_eq!(index.at(8), &[] as &[RequestId]);
        assert!(index.remove(16, 4));
        assert!(index.ids.is_empty(), "emptied sectors leave no entry");
    }

    #[test]
    fn unknown_elevator_is_an_error_naming_it() {
        let traits = QueueTraits {
            nonrot: true,
            queue_depth: 1,
        };
        let error = new_elevator("anticipatory", traits).err().unwrap();
        assert!(error.contains("anticipatory") && error.contains("mq-deadline"));
        for name in ELEVATOR_NAMES {
            assert_eq!(new_elevator(name, traits).unwrap().name(), name);
        }
    }
}
