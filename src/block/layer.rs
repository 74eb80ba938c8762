//! The block layer inside the simulation engine: tasks submit bios and block in virtual time.
//!
//! [`BlockLayer`] wraps a [`RequestQueue`] (the pure state machine) and drives it from engine
//! callbacks scheduled at the queue's `next_event` (device completions, elevator timers). It adds
//! what needs the engine:
//! - `get_request` sleeps: a submitter that finds no free request waits on the allocation wait
//!   queue of its class with [`WaitReason::RequestAlloc`] and retries when a request is freed
//!   (one waiter woken per freed request, like `wake_up` on the exclusive `rl->wait[sync]`).
//! - completion: each bio has a one-shot completion carrying its completion time; a task that
//!   waits for it (`submit_bio_wait`) blocks with [`WaitReason::BlockIo`] and the request as
//!   blocker, after flushing its plug (a sleeping task's plug is flushed by `io_schedule`).
//!
//! The queue is shared through `Rc<RefCell<_>>`; no borrow is held across an `.await`.

use super::queue::{RequestQueue, SubmitOutcome};
use super::request::{Bio, BioId, RequestId};
use crate::sim::sync::{Completion, WaitQueue};
use crate::sim::{Blocker, Sim, WaitReason};
use crate::units::Nanos;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

/// `bio->bi_end_io`: called once when the bio completes, in the completion event (no task of its
/// own), with the id of the request that carried it.
pub type EndIo = Box<dyn FnOnce(&Sim, RequestId)>;

/// A submitted bio: the request that carries it and the completion to wait on.
#[derive(Clone)]
pub struct BioHandle {
    pub bio: BioId,
    pub request: RequestId,
    pub done: Completion<Nanos>,
}

/// The request id of a bio that ended in the block layer without a request: an empty flush to
/// a device that declares no flush ([`crate::dev::BlockDevice::flush_declared`]).
pub const NO_REQUEST: RequestId = RequestId::MAX;

struct Shared {
    queue: RefCell<RequestQueue>,
    /// The device's [`crate::dev::BlockDevice::flush_declared`], fixed for its life.
    flush_declared: bool,
    /// `rl->wait[ASYNC]`, `rl->wait[SYNC]` (blk-mq uses the sync one for its tag pool), and
    /// writeback throttling's `rq_wait`s.
    alloc_wait: [WaitQueue; super::queue::ALLOC_CLASSES],
    /// Bios in flight: their completions (by id, never iterated: a hash map, not a B-tree,
    /// whose insertions and removals were a tenth of the device-only path).
    pending: RefCell<crate::sim::IdMap<Completion<Nanos>>>,
    /// Completions of completed bios, oldest first, reused for new bios once their waiters
    /// dropped them (a bio's completion was the one heap allocation per request).
    spare_completions: RefCell<std::collections::VecDeque<Completion<Nanos>>>,
    /// `bio->bi_end_io` of the bios that have one, called at completion.
    end_io: RefCell<BTreeMap<BioId, EndIo>>,
    /// The time of the armed `advance` event (the latest scheduled), if it has not fired.
    armed: Cell<Option<Nanos>>,
    /// The times of events scheduled before the armed one and superseded by it (re-armed
    /// earlier), still pending: they do nothing when they fire. At one instant they fire
    /// before the armed event (they were scheduled before it, and equal times run in
    /// scheduling order), so an event at an instant that has one of these is one of these.
    superseded: RefCell<Vec<Nanos>>,
    /// The allocation class whose sleepers are woken first at the next completion.
    wake_first: Cell<usize>,
    /// Recently completed requests, for explaining the waits on them.
    history: RefCell<RequestHistory>,
    /// The completion event's report, kept so that its vector is reused.
    report: Cell<super::queue::AdvanceReport>,
    /// The elevator's name, for descriptions.
    elevator: &'static str,
    /// The device's numbers as blktrace prints them ("179,0"), for the timeline.
    device: String,
    /// Bytes of the requests completed so far (the timeline's throughput counter).
    completed_bytes: Cell<u64>,
    /// When the device was busy: the union of every completed request's service interval
    /// (device start to completion), merged as completions arrive (the energy model's input,
    /// [`crate::dev::energy`]).
    busy: RefCell<Vec<(Nanos, Nanos)>>,
    /// The device's completed writes and flushes, when recording for crash states
    /// ([`BlockLayer::record_commands`]).
    commands: RefCell<Option<crate::dev::crash::WriteHistory>>,
    /// Since when every device slot has been held ([`RequestQueue::driver_full`]), while the
    /// run's timeline is recorded.
    slots_full_since: Cell<Option<Nanos>>,
}

/// Records completed request `rq` in `history`: a flush, or a write (durable at completion
/// when FUA, or FUA emulated by a post-flush); a write with `REQ_PREFLUSH` is also a flush
/// over what completed before it started.
fn record_command(
    history: &mut crate::dev::crash::WriteHistory,
    rq: &super::request::Request,
    now: Nanos,
) {
    let start = rq.device_start_ns.or(rq.issued_ns).unwrap_or(now);
    match rq.op {
        crate::dev::IoOp::Flush => {
            history.record_flush(start, now);
        }
        crate::dev::IoOp::Write => {
            if rq.flags.preflush {
                history.record_flush(start, start);
            }
            history.record_write(crate::dev::crash::WriteRecord {
                id: rq.id,
                sector: rq.sector,
                sectors: rq.nr_sectors,
                fua: rq.flags.fua || rq.flags.postflush,
                start_ns: start,
                done_ns: now,
            });
        }
        crate::dev::IoOp::Read | crate::dev::IoOp::Discard => {}
    }
}

/// Adds a request's service interval `[start, end]` to `busy` (sorted, disjoint): `end` is
/// the completion time, which never goes back, so only the tail intervals can overlap it.
fn note_busy(busy: &mut Vec<(Nanos, Nanos)>, start: Nanos, end: Nanos) {
    let mut start = start.min(end);
    let mut end = end;
    while let Some(&(s, e)) = busy.last() {
        if e < start {
            break;
        }
        start = start.min(s);
        end = end.max(e);
        busy.pop();
    }
    busy.push((start, end));
}

/// Bound on completed requests remembered for explanations (a waiter reads its request's
/// history as soon as it wakes, so a short memory suffices).
const HISTORY_REQUESTS: usize = 4096;

/// What happened to a completed request, in time: the facts its description is made of, kept
/// as values and formatted only when a wait on the request is explained (most requests are
/// never asked about, and formatting every completion cost a tenth of a device-only run).
#[derive(Debug, Clone)]
struct RequestTiming {
    id: RequestId,
    op: crate::dev::IoOp,
    sync: bool,
    meta: bool,
    nr_sectors: u32,
    comm: std::rc::Rc<str>,
    pid: u32,
    issued_async: bool,
    start_ns: Nanos,
    issued_ns: Option<Nanos>,
    device_start_ns: Option<Nanos>,
    /// When it completed, or the present moment for a request still in flight.
    end_ns: Nanos,
}

impl RequestTiming {
    fn of(rq: &super::request::Request, end_ns: Nanos) -> RequestTiming {
        RequestTiming {
            id: rq.id,
            op: rq.op,
            sync: rq.flags.sync,
            meta: rq.flags.meta,
            nr_sectors: rq.nr_sectors,
            comm: rq.task.comm.clone(),
            pid: rq.task.pid,
            issued_async: rq.issued_async,
            start_ns: rq.start_ns,
            issued_ns: rq.issued_ns,
            device_start_ns: rq.device_start_ns,
            end_ns,
        }
    }
}

/// Slots of [`RequestHistory`]'s index: twice the remembered completions, so that the ids of
/// requests completed close together rarely share a slot.
const HISTORY_INDEX_SLOTS: usize = 2 * HISTORY_REQUESTS;

/// The last [`HISTORY_REQUESTS`] completions in order, in a ring (evicting the oldest moves
/// nothing), and where each request's entry is: a direct-mapped index by request id (the
/// number of the latest completion remembered whose id falls in the slot), checked against the
/// entry's id and backed by a search of the ring when a slot was taken by another request. A
/// hash map by id cost an insertion and a removal per request, for lookups made only when a
/// wait is explained.
struct RequestHistory {
    /// Request id modulo [`HISTORY_INDEX_SLOTS`] -> the number of a completion (counted from
    /// the first ever remembered), or `u64::MAX` for none.
    slots: Vec<u64>,
    timings: std::collections::VecDeque<RequestTiming>,
    /// The number of the completion at the front of `timings`.
    first: u64,
}

impl Default for RequestHistory {
    fn default() -> Self {
        RequestHistory {
            slots: vec![u64::MAX; HISTORY_INDEX_SLOTS],
            timings: std::collections::VecDeque::with_capacity(HISTORY_REQUESTS),
            first: 0,
        }
    }
}

impl RequestHistory {
    fn remember(&mut self, timing: RequestTiming) {
        if self.timings.len() == HISTORY_REQUESTS {
            self.timings.pop_front();
            self.first += 1;
        }
        self.slots[(timing.id % HISTORY_INDEX_SLOTS as u64) as usize] =
            self.first + self.timings.len() as u64;
        self.timings.push_back(timing);
    }

    fn get(&self, id: RequestId) -> Option<&RequestTiming> {
        let number = self.slots[(id % HISTORY_INDEX_SLOTS as u64) as usize];
        let indexed = number
            .checked_sub(self.first)
            .and_then(|at| self.timings.get(at as usize))
            .filter(|timing| timing.id == id);
        // Request ids are unique: a miss in the slot (another request took it, or this one was
        // never remembered or is forgotten) is settled by the ring itself.
        indexed.or_else(|| self.timings.iter().find(|timing| timing.id == id))
    }
}

/// A request's direction and flags as blkparse's RWBS letters, short form ("WS", "RM").
fn short_rwbs(rq: &super::request::Request) -> String {
    rwbs_letters(rq.op, rq.flags.sync, rq.flags.meta)
}

fn rwbs_letters(op: crate::dev::IoOp, sync: bool, meta: bool) -> String {
    let mut rwbs = String::from(match op {
        crate::dev::IoOp::Read => "R",
        crate::dev::IoOp::Write => "W",
        crate::dev::IoOp::Discard => "D",
        crate::dev::IoOp::Flush => "F",
    });
    if sync {
        rwbs.push('S');
    }
    if meta {
        rwbs.push('M');
    }
    rwbs
}

/// "request R#12 (WS 1024 sectors of update\[1001\], 47.9 ms queued in cfq, 4.30 ms on the device)"
fn describe_completed(rq: &RequestTiming, elevator: &str) -> String {
    use crate::units::format_ms;
    let now = rq.end_ns;
    let issued = rq.issued_ns.unwrap_or(now);
    let rwbs = rwbs_letters(rq.op, rq.sync, rq.meta);
    let on_device = rq.device_start_ns.unwrap_or(issued);
    let in_driver = if on_device > issued {
        format!(
            ", {} ms in the driver",
            format_ms((on_device - issued) as f64)
        )
    } else {
        String::new()
    };
    format!(
        "request R#{} ({rwbs} {} sectors of {}[{}]{}, {} ms queued in {elevator}{in_driver}, {} ms on the device)",
        rq.id,
        rq.nr_sectors,
        rq.comm,
        rq.pid,
        if rq.issued_async { ", async writeback" } else { "" },
        format_ms((issued - rq.start_ns) as f64),
        format_ms((now - on_device) as f64),
    )
}

/// Bound on the completions kept for reuse.
const MAX_SPARE_COMPLETIONS: usize = 1024;

/// Bound on the block layer's superseded events pending at once (each re-arm earlier leaves
/// one until its time comes): more is a runaway re-arming loop.
const MAX_SUPERSEDED_EVENTS: usize = 1 << 16;

impl crate::sim::SharedCallback for Shared {
    fn call(self: Rc<Self>, sim: &Sim) {
        BlockLayer {
            sim: sim.clone(),
            shared: self,
        }
        .fired();
    }
}

/// The block layer of one device, usable from engine tasks. Cheap to clone.
#[derive(Clone)]
pub struct BlockLayer {
    sim: Sim,
    shared: Rc<Shared>,
}

impl BlockLayer {
    pub fn new(sim: &Sim, queue: RequestQueue) -> BlockLayer {
        let numbers = queue.device().device_numbers();
        BlockLayer::with_device_numbers(sim, queue, numbers)
    }

    /// Like [`BlockLayer::new`], naming the device `major,minor` in the run's timeline and
    /// explanations instead of by its own numbers (a second device of the same kind, an
    /// external journal, is numbered after the first: `crate::stack::second_device_numbers`).
    pub fn with_device_numbers(
        sim: &Sim,
        queue: RequestQueue,
        (major, minor): (u32, u32),
    ) -> BlockLayer {
        let elevator = queue.elevator().name();
        let flush_declared = queue.device().flush_declared();
        let shared = Rc::new(Shared {
            queue: RefCell::new(queue),
            flush_declared,
            alloc_wait: std::array::from_fn(|_| WaitQueue::new()),
            pending: RefCell::new(crate::sim::id_map()),
            spare_completions: RefCell::new(std::collections::VecDeque::new()),
            end_io: RefCell::new(BTreeMap::new()),
            armed: Cell::new(None),
            superseded: RefCell::new(Vec::new()),
            wake_first: Cell::new(0),
            history: RefCell::new(RequestHistory::default()),
            report: Cell::new(Default::default()),
            elevator,
            device: format!("{major},{minor}"),
            completed_bytes: Cell::new(0),
            busy: RefCell::new(Vec::new()),
            commands: RefCell::new(None),
            slots_full_since: Cell::new(None),
        });
        let weak = Rc::downgrade(&shared);
        let describer_sim = sim.clone();
        sim.add_blocker_describer(move |blocker| match blocker {
            Blocker::Request(id) => {
                let shared = weak.upgrade()?;
                let history = shared.history.borrow();
                if let Some(timing) = history.get(id) {
                    return Some(describe_completed(timing, shared.elevator));
                }
                // Not completed (a wait still going on when the run ended): where it is now.
                let queue = shared.queue.try_borrow().ok()?;
                let now = describer_sim.now();
                Some(match queue.in_flight_request(id) {
                    Some(rq) => {
                        let text = describe_completed(&RequestTiming::of(rq, now), shared.elevator);
                        text.replace(
                            " ms on the device)",
                            " ms on the device so far, not completed)",
                        )
                    }
                    None => format!(
                        "request R#{id} (not completed: queued in {} or on a plug list)",
                        shared.elevator
                    ),
                })
            }
            _ => None,
        });
        BlockLayer {
            sim: sim.clone(),
            shared,
        }
    }

    /// Read access to the queue (statistics, trace, elevator).
    pub fn with_queue<T>(&self, f: impl FnOnce(&RequestQueue) -> T) -> T {
        f(&self.shared.queue.borrow())
    }

    /// Mutable access, e.g. for `Elevator::boost`; re-arms the queue afterwards.
    pub fn with_queue_mut<T>(&self, f: impl FnOnce(&mut RequestQueue) -> T) -> T {
        let value = f(&mut self.shared.queue.borrow_mut());
        self.shared.queue.borrow_mut().run_queue(self.sim.now());
        self.arm();
        value
    }

    /// A process was created: the queue's task table learns its uid and comm (and its app's
    /// nice value).
    pub fn register_task(&self, pid: u32, uid: u32, comm: &str) {
        self.shared.queue.borrow().register_task(pid, uid, comm);
    }

    /// Whether the device declares a cache flush ([`crate::dev::BlockDevice::flush_declared`]):
    /// without one, [`BlockLayer::submit_bio`] ends empty flushes and strips the flags.
    pub fn flush_declared(&self) -> bool {
        self.shared.flush_declared
    }

    /// `submit_bio`: may sleep in `get_request`; returns once the bio is in a request (or
    /// ended, when it was an empty flush to a device that declares none).
    pub async fn submit_bio(&self, bio: Bio) -> BioHandle {
        let bio = if !self.shared.flush_declared && bio.is_flush() {
            if bio.op == crate::dev::IoOp::Flush {
                return self.end_empty_flush(bio.id);
            }
            Bio {
                flags: bio.flags.without_flush(),
                ..bio
            }
        } else {
            bio
        };
        let done = self.new_completion();
        let previous = self
            .shared
            .pending
            .borrow_mut()
            .insert(bio.id, done.clone());
        assert!(previous.is_none(), "bio {} submitted twice", bio.id);
        let mut outcome = self
            .shared
            .queue
            .borrow_mut()
            .submit_bio(self.sim.now(), &bio);
        let mut sleeps = 0u64;
        let request = loop {
            match outcome {
                SubmitOutcome::Merged(request) | SubmitOutcome::Queued(request) => break request,
                SubmitOutcome::MustWait(class) => {
                    self.arm();
                    let reason = if class >= super::queue::ALLOC_WBT {
                        WaitReason::WbtThrottle
                    } else {
                        WaitReason::RequestAlloc
                    };
                    self.shared.alloc_wait[class]
                        .wait(&self.sim, reason, Blocker::None)
                        .await;
                    sleeps += 1;
                    assert!(sleeps < 1 << 32, "get_request retried without end");
                    outcome = self
                        .shared
                        .queue
                        .borrow_mut()
                        .retry_get_request(self.sim.now(), &bio);
                }
            }
        };
        self.arm();
        BioHandle {
            bio: bio.id,
            request,
            done,
        }
    }

    /// `generic_make_request_checks` (3.10) / `submit_bio_noacct` (mainline) on a queue without
    /// flush: an empty flush bio ends at once, successfully, before it is traced as queued; its
    /// `bi_end_io` runs in the submitter's context.
    fn end_empty_flush(&self, id: BioId) -> BioHandle {
        let done = self.new_completion();
        let end_io = self.shared.end_io.borrow_mut().remove(&id);
        if let Some(end_io) = end_io {
            end_io(&self.sim, NO_REQUEST);
        }
        done.complete(&self.sim, self.sim.now());
        BioHandle {
            bio: id,
            request: NO_REQUEST,
            done,
        }
    }

    /// A completion for a new bio: the oldest spare one if nothing holds it any more (one that
    /// is still held goes to the back), else a new one.
    fn new_completion(&self) -> Completion<Nanos> {
        let mut spares = self.shared.spare_completions.borrow_mut();
        if let Some(mut oldest) = spares.pop_front() {
            if oldest.recycle() {
                return oldest;
            }
            spares.push_back(oldest);
        }
        Completion::new()
    }

    /// `submit_bio` with `bi_end_io`: `end_io` runs at the bio's completion, before the tasks
    /// waiting on it run (as the kernel's completion path calls it).
    pub async fn submit_bio_end_io(&self, bio: Bio, end_io: EndIo) -> BioHandle {
        let previous = self.shared.end_io.borrow_mut().insert(bio.id, end_io);
        assert!(previous.is_none(), "bio {} submitted twice", bio.id);
        self.submit_bio(bio).await
    }

    /// Waits for a submitted bio, flushing the task's plug first. Returns the completion time.
    pub async fn wait(&self, pid: u32, handle: &BioHandle) -> Nanos {
        if !handle.done.is_done() {
            self.flush_plug(pid);
        }
        handle
            .done
            .wait(
                &self.sim,
                WaitReason::BlockIo,
                Blocker::Request(handle.request),
            )
            .await
    }

    /// `submit_bio_wait`.
    pub async fn submit_bio_wait(&self, bio: Bio) -> Nanos {
        let pid = bio.task.pid;
        let handle = self.submit_bio(bio).await;
        self.wait(pid, &handle).await
    }

    /// QASIO: a task blocks on request `id` ([`RequestQueue::boost`]); the queue runs again
    /// if the elevator moved it.
    pub fn boost(&self, id: u64, dependency: super::qasio::Dependency) {
        let moved = self
            .shared
            .queue
            .borrow_mut()
            .boost(self.sim.now(), id, dependency);
        if moved {
            self.shared.queue.borrow_mut().run_queue(self.sim.now());
            self.arm();
        }
    }

    /// `blk_start_plug`.
    pub fn start_plug(&self, pid: u32) {
        self.shared.queue.borrow_mut().start_plug(pid);
    }

    /// `blk_finish_plug`.
    pub fn finish_plug(&self, pid: u32) {
        self.shared
            .queue
            .borrow_mut()
            .finish_plug(self.sim.now(), pid);
        self.arm();
    }

    /// `blk_flush_plug`.
    pub fn flush_plug(&self, pid: u32) {
        let flushed = self
            .shared
            .queue
            .borrow_mut()
            .flush_plug(self.sim.now(), pid);
        // An empty plug changed nothing: the armed event stands.
        if flushed {
            self.arm();
        }
    }

    /// Records in the run's timeline when every device slot was held (checked wherever the
    /// queue changed: every change re-arms).
    fn note_slots(&self) {
        if !self.sim.timeline_enabled() {
            return;
        }
        let full = self.shared.queue.borrow().driver_full();
        match (full, self.shared.slots_full_since.get()) {
            (true, None) => self.shared.slots_full_since.set(Some(self.sim.now())),
            (false, Some(since)) => {
                self.shared.slots_full_since.set(None);
                self.sim.timeline_slots_full(&self.shared.device, since);
            }
            _ => {}
        }
    }

    /// Schedules `advance` at the queue's next event unless an earlier callback is armed.
    fn arm(&self) {
        self.note_slots();
        let Some(next) = self.shared.queue.borrow().next_event() else {
            return;
        };
        let at = next.max(self.sim.now());
        if self.shared.armed.get().is_some_and(|armed| armed <= at) {
            return;
        }
        if let Some(superseded) = self.shared.armed.get() {
            let mut pending = self.shared.superseded.borrow_mut();
            assert!(
                pending.len() < MAX_SUPERSEDED_EVENTS,
                "block layer: {} superseded events pending",
                pending.len()
            );
            pending.push(superseded);
        }
        self.shared.armed.set(Some(at));
        // The event holds the layer's state, as a closure capturing the layer would, without
        // allocating one.
        self.sim.schedule_shared(at, self.shared.clone());
    }

    /// The event of [`BlockLayer::arm`] fired: a superseded one does nothing, the armed one
    /// runs [`BlockLayer::on_event`].
    fn fired(&self) {
        let now = self.sim.now();
        {
            let mut pending = self.shared.superseded.borrow_mut();
            if let Some(at) = pending.iter().position(|&time| time == now) {
                pending.swap_remove(at);
                return;
            }
        }
        assert_eq!(
            self.shared.armed.get(),
            Some(now),
            "the block layer's event fired at another time than armed"
        );
        self.shared.armed.set(None);
        self.on_event();
    }

    /// Device completions and elevator timers: completes bios and wakes allocation sleepers.
    fn on_event(&self) {
        let now = self.sim.now();
        // The report kept in `Shared` lends its vector to this event (taken out, so that a
        // completion callback that reaches the layer finds no borrow held).
        let mut report = self.shared.report.take();
        let violated = {
            let mut queue = self.shared.queue.borrow_mut();
            let before = queue.violation().is_some();
            queue.advance_into(now, &mut report);
            !before && queue.violation().is_some()
        };
        // A global invariant failed (debug builds, `run --check`): the run stops and ends with
        // the violation ([`BlockLayer::violation`]).
        if violated {
            self.sim.stop();
        }
        for (_, rq) in &report.completed {
            if let Some(history) = self.shared.commands.borrow_mut().as_mut() {
                record_command(history, rq, now);
            }
            note_busy(
                &mut self.shared.busy.borrow_mut(),
                rq.device_start_ns.or(rq.issued_ns).unwrap_or(now),
                now,
            );
            self.shared.completed_bytes.set(
                self.shared.completed_bytes.get()
                    + u64::from(rq.nr_sectors) * crate::units::SECTOR_SIZE,
            );
            self.sim.timeline_request(|| {
                let issued_ns = rq.issued_ns.unwrap_or(now);
                crate::sim::timeline::RequestLife {
                    id: rq.id,
                    device: self.shared.device.clone(),
                    elevator: self.shared.elevator,
                    rwbs: short_rwbs(rq),
                    sector: rq.sector,
                    nr_sectors: rq.nr_sectors,
                    comm: rq.task.comm.to_string(),
                    pid: rq.task.pid,
                    uid: rq.task.uid,
                    owner_uid: rq.owner_uid,
                    issued_async: rq.issued_async,
                    start_ns: rq.start_ns,
                    inserted_ns: rq.inserted_ns.max(rq.start_ns),
                    issued_ns,
                    device_start_ns: rq.device_start_ns.unwrap_or(issued_ns),
                    completed_ns: now,
                }
            });
            self.shared
                .history
                .borrow_mut()
                .remember(RequestTiming::of(rq, now));
            for bio in &rq.bios {
                let done = self
                    .shared
                    .pending
                    .borrow_mut()
                    .remove(bio)
                    .unwrap_or_else(|| panic!("bio {bio} completed twice or never submitted"));
                let end_io = self.shared.end_io.borrow_mut().remove(bio);
                if let Some(end_io) = end_io {
                    end_io(&self.sim, rq.id);
                }
                done.complete(&self.sim, now);
                let mut spares = self.shared.spare_completions.borrow_mut();
                // Bound: spares beyond what a deep queue has in flight are dropped.
                if spares.len() < MAX_SPARE_COMPLETIONS {
                    spares.push_back(done);
                }
            }
        }
        // Which class's sleepers are woken first alternates, as sbitmap's wake index rotates over
        // its wait queues (lib/sbitmap.c `sbq_wake_ptr`): with blk-mq both classes draw on one
        // tag pool, and a fixed order would let one class win every freed tag.
        let first = self.shared.wake_first.get();
        self.shared.wake_first.set(1 - first);
        for class in [first, 1 - first] {
            for _ in 0..report.freed[class] {
                if !self.shared.alloc_wait[class].wake_one(&self.sim) {
                    break;
                }
            }
        }
        for (rwq, &woken) in report.wbt_woken.iter().enumerate() {
            for _ in 0..woken {
                let woke =
                    self.shared.alloc_wait[super::queue::ALLOC_WBT + rwq].wake_one(&self.sim);
                assert!(woke, "wbt granted a slot to a bio nobody sleeps for");
            }
        }
        {
            // The completed requests' heap blocks go back to the queue for its next ones.
            let mut queue = self.shared.queue.borrow_mut();
            for (_, rq) in report.completed.drain(..) {
                queue.recycle(rq);
            }
        }
        self.shared.report.set(report);
        self.arm();
    }

    /// `balance_dirty_pages` paused a task now (`bdi->last_bdp_sleep`, read by wbt).
    pub fn note_dirty_sleep(&self) {
        self.shared
            .queue
            .borrow_mut()
            .note_dirty_sleep(self.sim.now());
    }

    /// Records, from now on, every write and flush the device completes, for crash states
    /// ([`crate::dev::crash`]); `volatile_cache`: whether the device has a volatile write
    /// cache.
    pub fn record_commands(&self, volatile_cache: bool) {
        *self.shared.commands.borrow_mut() =
            Some(crate::dev::crash::WriteHistory::new(volatile_cache));
    }

    /// The commands recorded so far (and recording stops).
    pub fn take_commands(&self) -> Option<crate::dev::crash::WriteHistory> {
        self.shared.commands.borrow_mut().take()
    }

    /// When the device was busy so far: sorted, disjoint `(start, end)` intervals.
    pub fn busy_intervals(&self) -> Vec<(Nanos, Nanos)> {
        self.shared.busy.borrow().clone()
    }

    /// Bytes of the requests completed so far.
    pub fn completed_bytes(&self) -> u64 {
        self.shared.completed_bytes.get()
    }

    /// Requests queued in the elevator or its dispatch list, and requests the driver holds
    /// (on the device, or prepared by the mmc driver): the timeline's queue-depth counters.
    pub fn queue_depths(&self) -> (usize, usize) {
        let queue = self.shared.queue.borrow();
        (queue.scheduler_queued(), queue.in_driver())
    }

    /// Bios submitted and not yet completed.
    pub fn pending_bios(&self) -> usize {
        self.shared.pending.borrow().len()
    }

    /// Turns the queue's global invariant checks on (release builds: `mobistack run --check`;
    /// [`crate::block::queue::RequestQueue::check_invariants`]).
    pub fn enable_checks(&self) {
        self.shared.queue.borrow_mut().enable_checks();
    }

    /// The first violation of the queue's global invariants, if any.
    pub fn violation(&self) -> Option<String> {
        self.shared.queue.borrow().violation().map(str::to_string)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::elevator::noop::Noop;
    use crate::block::queue::AllocModel;
    use crate::block::request::test_support::bio;
    use crate::dev::fixed::FixedLatencyDevice;
    use crate::dev::IoOp;
    use crate::sim::Simulation;
    use crate::units::NS_PER_MS;

    /// The history's direct-mapped index answers as a search of the last completions would,
    /// with ids completed out of order, ids far apart that share a slot, and forgotten ids.
    #[test]
    fn request_history_finds_what_a_search_of_the_last_completions_finds() {
        let timing = |id: RequestId| RequestTiming {
            id,
            op: IoOp::Read,
            sync: true,
            meta: false,
            nr_sectors: 8,
            comm: "t".into(),
            pid: 1,
            issued_async: false,
            start_ns: id,
            issued_ns: None,
            device_start_ns: None,
            end_ns: id + 1,
        };
        let mut history = RequestHistory::default();
        let mut model: std::collections::VecDeque<RequestId> = Default::default();
        let mut rng = crate::sim::rng::Rng::new(0x2545_f491_4f6c_dd1d);
        let mut next = move || rng.next_u64();
        let mut used = std::collections::BTreeSet::new();
        let mut next_id = 0u64;
        for _ in 0..20_000 {
            // Mostly the next ids a little out of order; sometimes one much older or newer
            // (the same slot as a remembered one, modulo the index size).
            let id = match next() % 10 {
                0 => next_id + HISTORY_INDEX_SLOTS as u64 * (1 + next() % 3),
                1 => next_id.saturating_sub(HISTORY_INDEX_SLOTS as u64 * (1 + next() % 3)),
                _ => next_id + next() % 16,
            };
            next_id += 1;
            if !used.insert(id) {
                continue;
            }
            history.remember(timing(id));
            if model.len() == HISTORY_REQUESTS {
                model.pop_front();
            }
            model.push_back(id);
            for _ in 0..3 {
                let probe = match next() % 3 {
                    0 => id,
                    1 => next_id.saturating_sub(next() % (3 * HISTORY_INDEX_SLOTS as u64)),
                    _ => next() % (next_id + 1),
                };
                let expected = model.contains(&probe).then_some(probe);
                assert_eq!(history.get(probe).map(|t| t.id), expected, "id {probe}");
            }
        }
    }

    /// A block layer with noop over a 1 ms fixed-latency device and `nr_requests` requests.
    fn noop_layer(sim: &Simulation, nr_requests: usize) -> BlockLayer {
        let queue = RequestQueue::new(
            Box::new(Noop::new()),
            Box::new(FixedLatencyDevice::new(1, NS_PER_MS, 0)),
            AllocModel::Legacy { nr_requests },
        );
        BlockLayer::new(&sim.handle(), queue)
    }

    #[test]
    fn recorded_commands_and_busy_intervals_follow_the_device() {
        let sim = Simulation::new(1);
        let layer = noop_layer(&sim, 8);
        layer.record_commands(true);
        let l = layer.clone();
        let handle = sim.handle();
        sim.spawn("writer", async move {
            l.submit_bio_wait(bio(1, IoOp::Write, 0, 8, 1)).await;
            let mut fua = bio(2, IoOp::Write, 64, 8, 1);
            fua.flags.fua = true;
            l.submit_bio_wait(fua).await;
            handle.sleep(10 * NS_PER_MS).await;
            l.submit_bio_wait(bio(3, IoOp::Flush, 0, 0, 1)).await;
        });
        sim.run_until(u64::MAX, true).unwrap();
        let history = layer.take_commands().expect("recording");
        assert_eq!(history.writes.len(), 2);
        assert!(!history.writes[0].fua && history.writes[1].fua);
        assert_eq!(history.flushes.len(), 1);
        // Before the flush only the FUA write is durable; after it, both.
        let flush_done = history.flushes[0].1;
        assert_eq!(history.crash_at(flush_done - 1).durable, vec![1]);
        assert_eq!(history.crash_at(flush_done).durable, vec![0, 1]);
        assert!(
            layer.take_commands().is_none(),
            "taking stops the recording"
        );
        // The device was busy twice: the two writes back to back, then the flush.
        let busy = layer.busy_intervals();
        assert_eq!(busy.len(), 2, "{busy:?}");
        assert_eq!(busy[0], (0, 2 * NS_PER_MS));
    }

    /// `generic_make_request_checks` (3.10) on a queue whose driver declared no flush (an SD
    /// card behind `mmc_blk_alloc_req`): the empty flush ends at once without reaching the
    /// device or the trace, and a FUA write goes down as a plain write.
    #[test]
    fn a_device_without_flush_never_sees_a_flush_and_an_empty_flush_ends_at_once() {
        let sim = Simulation::new(1);
        let queue = RequestQueue::new(
            Box::new(Noop::new()),
            Box::new(FixedLatencyDevice::new(1, NS_PER_MS, 0).without_flush()),
            AllocModel::Legacy { nr_requests: 8 },
        );
        let layer = BlockLayer::new(&sim.handle(), queue);
        layer.record_commands(true);
        let (l, ended) = (layer.clone(), Rc::new(Cell::new(None)));
        let ended_at = ended.clone();
        let handle = sim.handle();
        sim.spawn("fsync", async move {
            let mut fua = bio(1, IoOp::Write, 64, 8, 1);
            fua.flags.fua = true;
            fua.flags.preflush = true;
            l.submit_bio_wait(fua).await;
            let before = handle.now();
            let flush = l.submit_bio(bio(2, IoOp::Flush, 0, 0, 1)).await;
            assert_eq!(flush.request, NO_REQUEST);
            let done = l.wait(1, &flush).await;
            ended_at.set(Some((before, done)));
        });
        sim.run_until(u64::MAX, true).unwrap();
        let (before, done) = ended.get().expect("the flush ended");
        assert_eq!(done, before, "the empty flush takes no time");
        let history = layer.take_commands().expect("recording");
        assert!(history.flushes.is_empty(), "{:?}", history.flushes);
        assert_eq!(history.writes.len(), 1);
        assert!(!history.writes[0].fua, "the FUA flag was stripped");
        assert_eq!(layer.with_queue(|q| q.stats().completed), 1);
    }

    #[test]
    fn tasks_sleep_in_get_request_and_complete_in_virtual_time() {
        let sim = Simulation::new(1);
        let layer = noop_layer(&sim, 2);
        let results = Rc::new(RefCell::new(Vec::new()));
        let mut tasks = Vec::new();
        for task in 0..4u32 {
            let (layer, results) = (layer.clone(), results.clone());
            let handle = sim.handle();
            let join = sim.spawn(&format!("writer{task}"), async move {
                // Far-apart async writes: no merging; the list holds only 3 (batcher allowance).
                let write = bio(
                    u64::from(task),
                    IoOp::Write,
                    100_000 * u64::from(task),
                    8,
                    task,
                );
                let done = layer.submit_bio_wait(write).await;
                results.borrow_mut().push((task, done, handle.now()));
            });
            tasks.push(join.task());
        }
        sim.run_until(u64::MAX, true).unwrap();
        let results = results.borrow();
        assert_eq!(results.len(), 4);
        // One slot, 1 ms each: completions at 1, 2, 3, 4 ms in FIFO order.
        let times: Vec<Nanos> = results.iter().map(|&(_, done, _)| done).collect();
        assert_eq!(
            times,
            vec![NS_PER_MS, 2 * NS_PER_MS, 3 * NS_PER_MS, 4 * NS_PER_MS]
        );
        let stats = layer.with_queue(|queue| queue.stats());
        assert!(
            stats.alloc_sleeps >= 1,
            "someone slept in get_request: {stats:?}"
        );
        assert_eq!(layer.pending_bios(), 0);
        // The last two writers slept in get_request until a request was freed at 1 ms.
        for &task in &tasks[2..] {
            let blocked = sim.blocked_times(task);
            assert!(blocked.get(WaitReason::RequestAlloc) >= NS_PER_MS);
            assert!(blocked.get(WaitReason::BlockIo) > 0);
        }
        assert_eq!(sim.blocked_times(tasks[0]).get(WaitReason::RequestAlloc), 0);
        assert!(layer.with_queue(|queue| queue.is_idle()));
    }

    #[test]
    fn bi_end_io_runs_once_at_completion_before_the_waiter() {
        let sim = Simulation::new(1);
        let layer = noop_layer(&sim, 8);
        let calls = Rc::new(RefCell::new(Vec::new()));
        let (s, l, c) = (sim.handle(), layer.clone(), calls.clone());
        sim.spawn("submitter", async move {
            let log = c.clone();
            let end_io: EndIo = Box::new(move |sim, request| {
                log.borrow_mut().push(("end_io", request, sim.now()));
            });
            let handle = l
                .submit_bio_end_io(bio(1, IoOp::Read, 0, 8, 1), end_io)
                .await;
            let done = l.wait(1, &handle).await;
            c.borrow_mut().push(("woken", handle.request, s.now()));
            assert_eq!(done, NS_PER_MS);
        });
        sim.run_until(u64::MAX, true).unwrap();
        let calls = calls.borrow();
        assert_eq!(calls.len(), 2, "{calls:?}");
        assert_eq!(calls[0].0, "end_io");
        assert_eq!(calls[0].2, NS_PER_MS);
        assert_eq!(calls[1].0, "woken");
        assert_eq!(
            calls[0].1, calls[1].1,
            "end_io gets the request that carried the bio"
        );
    }

    /// With blk-mq's single tag pool, an async writer that always has the next write ready must
    /// not take every freed tag from a sync writer asleep in `get_request` (an fsync behind the
    /// flusher).
    #[test]
    fn a_sync_writer_gets_a_tag_while_an_async_writer_keeps_the_pool_full() {
        use crate::block::elevator::mq_deadline::MqDeadline;
        let sim = Simulation::new(1);
        let device = FixedLatencyDevice::new(1, NS_PER_MS, 0);
        let queue = RequestQueue::new(
            Box::new(MqDeadline::new(crate::kernel::Hz(100))),
            Box::new(device),
            AllocModel::Mq { nr_requests: 8 },
        );
        let layer = BlockLayer::new(&sim.handle(), queue);
        let flusher_layer = layer.clone();
        sim.spawn_daemon("flusher", async move {
            for id in 0..10_000u64 {
                let mut write = bio(id, IoOp::Write, 1_000_000 * id, 8, 1);
                write.issued_async = true;
                // Fire and forget: the flusher does not wait for its writes here.
                flusher_layer.submit_bio(write).await;
            }
        });
        let (s, sync_layer) = (sim.handle(), layer.clone());
        let fsync = sim.spawn("fsync", async move {
            s.sleep(10 * NS_PER_MS).await;
            let mut write = bio(1 << 40, IoOp::Write, 7, 8, 2);
            write.flags.sync = true;
            sync_layer.submit_bio(write).await;
            s.now()
        });
        sim.run_until(200 * NS_PER_MS, true).unwrap();
        let got_tag_at = fsync.result().expect("the sync writer got a request");
        // One request completes per millisecond; alternating wakes give the sync writer one of
        // the first few freed tags, not none.
        assert!(
            got_tag_at <= 20 * NS_PER_MS,
            "sync writer waited until {got_tag_at} ns for a tag"
        );
    }

    /// Runs a flusher's 100 async writes, a sync reader, and an app that waits on the flusher's
    /// 50th write (as `wait_on_page_writeback` would), and returns how long the app waited.
    fn app_wait_on_async_write(elevator: &str) -> (Nanos, Option<crate::sim::Wait>) {
        use crate::block::elevator::{new_elevator, QueueTraits};
        let sim = Simulation::new(1);
        let traits = QueueTraits {
            nonrot: true,
            queue_depth: 1,
        };
        let queue = RequestQueue::new(
            new_elevator(elevator, traits).unwrap(),
            Box::new(FixedLatencyDevice::new(1, NS_PER_MS, 0)),
            AllocModel::Legacy { nr_requests: 128 },
        );
        let layer = BlockLayer::new(&sim.handle(), queue);
        let shared: Rc<RefCell<Option<BioHandle>>> = Rc::new(RefCell::new(None));
        let (flusher_layer, flusher_shared) = (layer.clone(), shared.clone());
        sim.spawn("flusher", async move {
            let mut handles = Vec::new();
            for i in 0..100u64 {
                let write = bio(i, IoOp::Write, 1_000_000 + 1_000 * i, 8, 10);
                handles.push(flusher_layer.submit_bio(write).await);
            }
            *flusher_shared.borrow_mut() = Some(handles[49].clone());
            for handle in &handles {
                flusher_layer.wait(10, handle).await;
            }
        });
        let (reader_layer, reader_sim) = (layer.clone(), sim.handle());
        sim.spawn("reader", async move {
            let mut sector = 0;
            while reader_sim.now() < 300 * NS_PER_MS {
                reader_layer
                    .submit_bio_wait(bio(1_000 + sector, IoOp::Read, sector, 8, 20))
                    .await;
                sector += 8;
            }
        });
        let (app_layer, app_sim) = (layer.clone(), sim.handle());
        let app = sim.spawn("app", async move {
            let handle = shared.borrow().clone().expect("flusher ran first");
            app_sim.sleep(NS_PER_MS).await;
            let start = app_sim.now();
            app_layer.wait(30, &handle).await;
            app_sim.now() - start
        });
        let app_task = app.task();
        let mut wait_seen = None;
        // Step to 2 ms to observe the app's wait and its blocker.
        sim.run_until(2 * NS_PER_MS, true).unwrap();
        if let Some(wait) = sim.current_wait(app_task) {
            wait_seen = Some(wait);
        }
        sim.run_until(u64::MAX, true).unwrap();
        (app.result().unwrap(), wait_seen)
    }

    #[test]
    fn waiting_on_an_async_write_is_slow_under_cfq_while_sync_io_runs() {
        // QASIO's inversion emerges: under CFQ the sync reader preempts the shared async queue
        // and idles between its reads, so a task waiting on an async write waits far longer
        // than under noop's FIFO.
        let (noop_wait, _) = app_wait_on_async_write("noop");
        let (cfq_wait, wait) = app_wait_on_async_write("cfq");
        assert!(noop_wait < 200 * NS_PER_MS, "noop: {noop_wait}");
        assert!(
            cfq_wait > 2 * noop_wait,
            "cfq {cfq_wait} vs noop {noop_wait}"
        );
        let wait = wait.expect("the app was blocked at 2 ms");
        assert_eq!(wait.reason, WaitReason::BlockIo);
        assert!(matches!(wait.blocker, Blocker::Request(_)));
    }
}
