//! Starvation bounds of CFQ (Linux 3.10) and BFQ (mainline), as property tests (issue 46).
//!
//! A mix is a phone's block-layer load in miniature: one to four readers, each a process with
//! one synchronous read outstanding at a time (it reads, waits for the read, thinks 0-30 ms,
//! reads again: a closed loop, sequential or random within its own file region), and the
//! flusher, which writes back bursts of asynchronous writes at random instants. Readers and the
//! flusher run at I/O priorities (`ioprio_set`: best effort, levels 0-7) and, for BFQ, in
//! cgroups with `io.bfq.weight`s. The queue is driven through its own interface
//! (`RequestQueue::submit_bio` / `advance`), with the block layer's global invariants checked
//! after every event, over eMMC 4.5 (no command queueing: the elevators idle) and UFS 2.1
//! (32 commands: CFQ's `hw_tag`).
//!
//! Checked, for every mix: every request dispatched and completed once, nothing left; under
//! CFQ, no queue dispatching alone longer than a turn and a workload slice while another waits
//! ([`cfq_run_bound`]) and no read waiting (insertion to dispatch) longer than
//! [`cfq_bound`]; under BFQ, no service slot longer than its budget timeout allows
//! ([`bfq_slot_bound`]). Each bound is derived, with its kernel source, at its function.
//!
//! Cases: `PROPTEST_CASES` per test (default [`DEFAULT_CASES`], a few seconds in the debug
//! build); e.g. `PROPTEST_CASES=400 cargo test --release --test prop_starvation`.

mod prop_support;

use mobistack::block::elevator::bfq::Bfq;
use mobistack::block::queue::{RequestQueue, SubmitOutcome, ALLOC_CLASSES};
use mobistack::block::request::{Bio, BioId, IoPrio, IoPrioClass, Request, TaskRef};
use mobistack::block::BlockConfig;
use mobistack::dev::profile::{build_device, DeviceConfig};
use mobistack::dev::{IoFlags, IoOp};
use mobistack::kernel::{Hz, KernelConfig, KernelVersion};
use mobistack::task::{CgroupConfig, IoPolicy, TaskTable};
use mobistack::units::{Nanos, NS_PER_MS, NS_PER_US};
use proptest::prelude::*;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;

/// Cases per test when `PROPTEST_CASES` is not set.
const DEFAULT_CASES: u32 = 16;

/// Sectors of a slot: one page.
const SLOT_SECTORS: u64 = 8;

/// Where reader `i`'s file region starts (sectors): 128 MiB apart, far beyond CFQ's
/// `CFQQ_CLOSE_THR` (4 MiB), so that a reader's request is never "close" to another's
/// (`cfq_rq_close`), and beyond the back-seek window of both elevators.
fn region_start(reader: usize) -> u64 {
    (1 + reader as u64) << 18
}

/// The flusher's region (sectors).
const FLUSH_REGION: u64 = 6 << 18;

/// Slots of a reader's region for random reads (64 MiB).
const REGION_SLOTS: u64 = 1 << 14;

/// Bound on queue events per mix.
const MAX_EVENTS: usize = 400_000;

/// The flusher's pid and uid (a kernel thread of uid 0 in the task table).
const FLUSHER_PID: u32 = 50;

#[derive(Debug, Clone)]
struct Read {
    /// Size in slots (4 KiB each).
    slots: u32,
    /// Where in the region a random read goes (slot), ignored when sequential.
    slot: u64,
    /// Think time after the previous read completed, us.
    think_us: u64,
}

#[derive(Debug, Clone)]
struct ReaderSpec {
    /// Best-effort level 0-7 (`ioprio_set(IOPRIO_CLASS_BE, level)`).
    level: u8,
    sequential: bool,
    /// `io.bfq.weight` of the reader's cgroup (BFQ mixes with cgroups), else the root.
    bfq_weight: Option<u32>,
    start_us: u64,
    reads: Vec<Read>,
}

#[derive(Debug, Clone)]
struct Burst {
    at_us: u64,
    /// Sizes of the burst's sequential async writes, in slots.
    writes: Vec<u32>,
}

#[derive(Debug, Clone)]
struct Mix {
    hz: u32,
    device: &'static str,
    readers: Vec<ReaderSpec>,
    flusher_level: u8,
    bursts: Vec<Burst>,
}

fn read() -> impl Strategy<Value = Read> {
    (
        prop_oneof![3 => 8u32..=32, 1 => 1u32..8],
        0u64..REGION_SLOTS,
        prop_oneof![3 => 0u64..500, 1 => 0u64..30_000],
    )
        .prop_map(|(slots, slot, think_us)| Read {
            slots,
            slot,
            think_us,
        })
}

fn reader(levels: bool, weights: bool) -> impl Strategy<Value = ReaderSpec> {
    (
        if levels {
            (0u8..8).boxed()
        } else {
            Just(4u8).boxed()
        },
        any::<bool>(),
        if weights {
            prop_oneof![Just(None), (10u32..=1000).prop_map(Some)].boxed()
        } else {
            Just(None).boxed()
        },
        0u64..20_000,
        proptest::collection::vec(read(), 20..200),
    )
        .prop_map(
            |(level, sequential, bfq_weight, start_us, reads)| ReaderSpec {
                level,
                sequential,
                bfq_weight,
                start_us,
                reads,
            },
        )
}

fn burst() -> impl Strategy<Value = Burst> {
    (0u64..600_000, proptest::collection::vec(1u32..=32, 1..=32))
        .prop_map(|(at_us, writes)| Burst { at_us, writes })
}

fn mix(levels: bool, weights: bool) -> impl Strategy<Value = Mix> {
    (
        prop_oneof![Just(100u32), Just(250u32), Just(1000u32)],
        prop_oneof![Just("emmc-4.5"), Just("ufs-2.1")],
        proptest::collection::vec(reader(levels, weights), 1..=4),
        if levels {
            (0u8..8).boxed()
        } else {
            Just(4u8).boxed()
        },
        proptest::collection::vec(burst(), 0..8),
    )
        .prop_map(|(hz, device, readers, flusher_level, bursts)| Mix {
            hz,
            device,
            readers,
            flusher_level,
            bursts,
        })
}

/// The elevator under test and its era.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Elevator {
    /// CFQ of Linux 3.10 (legacy request lists); `slice_idle` in ms when not the kernel's.
    Cfq { slice_idle: Option<u32> },
    /// BFQ of blk-mq (6.6), `low_latency` as given; `slice_idle` in ms when not the
    /// kernel's.
    Bfq {
        low_latency: bool,
        slice_idle: Option<u32>,
    },
}

/// The kernels' elevators, with their default tunables.
const CFQ: Elevator = Elevator::Cfq { slice_idle: None };
const BFQ: Elevator = Elevator::Bfq {
    low_latency: true,
    slice_idle: None,
};

fn reader_pid(i: usize) -> u32 {
    200 + i as u32
}

fn reader_uid(i: usize) -> u32 {
    10_000 + i as u32
}

/// The task table: each reader an app at its level (and cgroup), the flusher at its level.
fn task_table(mix: &Mix) -> Rc<TaskTable> {
    let tasks = Rc::new(TaskTable::new());
    let mut cgroups = BTreeMap::new();
    for (i, r) in mix.readers.iter().enumerate() {
        if let Some(weight) = r.bfq_weight {
            cgroups.insert(
                format!("reader{i}"),
                CgroupConfig {
                    bfq_weight: Some(weight),
                    ..CgroupConfig::default()
                },
            );
        }
    }
    tasks
        .configure_cgroups(IoPolicy::None, &cgroups, None)
        .expect("cgroups");
    for (i, r) in mix.readers.iter().enumerate() {
        tasks.set_app_ioprio(reader_uid(i), IoPrio::new(IoPrioClass::Be, r.level));
        tasks.register(reader_pid(i), reader_uid(i), &format!("reader{i}"));
        if r.bfq_weight.is_some() {
            tasks
                .set_app_cgroup(reader_uid(i), &format!("reader{i}"))
                .expect("cgroup");
        }
    }
    tasks.set_app_ioprio(0, IoPrio::new(IoPrioClass::Be, mix.flusher_level));
    tasks.register(FLUSHER_PID, 0, "flush-179:0");
    tasks
}

fn queue_for(elevator: Elevator, mix: &Mix) -> RequestQueue {
    let device = DeviceConfig {
        profile: mix.device.to_string(),
        capacity: Some(1 << 30),
        fill: 0.0,
        ..DeviceConfig::default()
    };
    let device = build_device(&device, 1).expect("a device");
    let (name, version) = match elevator {
        Elevator::Cfq { .. } => ("cfq", KernelVersion::V3_10),
        Elevator::Bfq { .. } => ("bfq", KernelVersion::V6_6),
    };
    let kernel = KernelConfig {
        version,
        hz: Hz(mix.hz),
        ..KernelConfig::default()
    };
    let mut config = BlockConfig {
        elevator: name.to_string(),
        ..BlockConfig::default()
    };
    match elevator {
        Elevator::Cfq { slice_idle } => config.cfq.slice_idle = slice_idle,
        Elevator::Bfq {
            low_latency,
            slice_idle,
        } => {
            config.bfq.low_latency = Some(low_latency);
            config.bfq.slice_idle = slice_idle;
        }
    }
    let mut queue = RequestQueue::from_config(device, &config, &kernel).expect("a queue");
    queue.enable_checks();
    queue.set_task_table(task_table(mix));
    queue
}

/// Who submitted a bio.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    Reader(usize),
    Flusher,
}

/// Something a task does at an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Action {
    /// Reader `i` issues its next read.
    Read(usize),
    /// The flusher writes back burst `j`.
    Flush(usize),
}

/// A request's life as the test saw it.
#[derive(Debug, Clone)]
struct Seen {
    rq: Request,
    completed_ns: Nanos,
}

struct Run {
    queue: RequestQueue,
    now: Nanos,
    actions: BTreeMap<(Nanos, Action), ()>,
    waiting: [VecDeque<Bio>; ALLOC_CLASSES],
    owners: BTreeMap<BioId, Owner>,
    next_bio: BioId,
    /// Per reader: reads issued, and where its sequential stream is.
    issued: Vec<usize>,
    cursors: Vec<u64>,
    flush_cursor: u64,
    completed: Vec<Seen>,
    events: usize,
    /// BFQ's service slots as seen after every call into the queue.
    slots: Vec<Slot>,
}

/// One service slot of BFQ (`__bfq_set_in_service_queue` .. `__bfq_bfqq_expire`), with what
/// its budget timeout was computed from when it started.
#[derive(Debug, Clone)]
struct Slot {
    queue: usize,
    pid: u32,
    start: Nanos,
    end: Option<Nanos>,
    /// `bfq_set_budget_timeout`'s multiplier: the weight-raising coefficient of an
    /// interactive-raised queue, 1 otherwise (soft real-time included).
    coeff: u64,
    /// BFQ's expirations so far when it started.
    expirations: u64,
}

impl Run {
    /// Notes BFQ's queue in service after a call into the queue at `now`.
    fn observe(&mut self, mix: &Mix) {
        let Some(bfq) = self
            .queue
            .elevator()
            .as_any()
            .and_then(|any| any.downcast_ref::<Bfq>())
        else {
            return;
        };
        let now = self.now;
        let current = bfq.in_service();
        // A slot is delimited by an expiration (`bfq_bfqq_expire` counts each), so a queue
        // expired and selected again in one call starts a new slot.
        let expirations: u64 = bfq.stats.expirations.iter().sum();
        let open = self
            .slots
            .last()
            .filter(|s| s.end.is_none())
            .map(|s| (s.queue, s.expirations));
        if open == current.map(|q| (q, expirations)) {
            return;
        }
        if let Some(slot) = self.slots.last_mut().filter(|s| s.end.is_none()) {
            slot.end = Some(now);
        }
        if let Some(q) = current {
            let queue = bfq.queue(q);
            // `bfq_wr_rt_max_time = msecs_to_jiffies(300)` marks soft real-time raising.
            let soft_rt = queue.wr_cur_max_time as u64 == Hz(mix.hz).msecs_to_jiffies(300);
            let coeff = if queue.wr_coeff > 1 && !soft_rt {
                u64::from(queue.wr_coeff)
            } else {
                1
            };
            self.slots.push(Slot {
                queue: q,
                pid: queue.pid,
                start: now,
                end: None,
                coeff,
                expirations,
            });
        }
    }

    fn checked(&self, after: &str) -> Result<(), TestCaseError> {
        if let Err(what) = self.queue.check_invariants() {
            return Err(TestCaseError::fail(format!(
                "after {after} at {} ns: {what}",
                self.now
            )));
        }
        Ok(())
    }

    fn bio(&mut self, owner: Owner, op: IoOp, sector: u64, slots: u32) -> Bio {
        let (pid, uid, comm) = match owner {
            Owner::Reader(i) => (reader_pid(i), reader_uid(i), format!("reader{i}")),
            Owner::Flusher => (FLUSHER_PID, 0, "flush-179:0".to_string()),
        };
        let id = self.next_bio;
        self.next_bio += 1;
        self.owners.insert(id, owner);
        Bio {
            id,
            op,
            sector,
            nr_sectors: slots * SLOT_SECTORS as u32,
            flags: IoFlags::default(),
            task: TaskRef {
                pid,
                tgid: pid,
                uid,
                comm: comm.into(),
            },
            ioprio: IoPrio::NONE,
            issued_async: op == IoOp::Write,
            foreground: false,
            owner_uid: uid,
            pages: Vec::new(),
            submitted_ns: self.now,
        }
    }

    fn submit(&mut self, bio: Bio) -> Result<(), TestCaseError> {
        let outcome = self.queue.submit_bio(self.now, &bio);
        if let SubmitOutcome::MustWait(class) = outcome {
            self.waiting[class].push_back(bio);
        }
        self.checked("a submission")
    }

    fn act(&mut self, mix: &Mix, action: Action) -> Result<(), TestCaseError> {
        match action {
            Action::Read(i) => {
                let spec = &mix.readers[i];
                let read = spec.reads[self.issued[i]].clone();
                self.issued[i] += 1;
                let sector = if spec.sequential {
                    let at = self.cursors[i];
                    self.cursors[i] += u64::from(read.slots) * SLOT_SECTORS;
                    at
                } else {
                    region_start(i) + read.slot * SLOT_SECTORS
                };
                let bio = self.bio(Owner::Reader(i), IoOp::Read, sector, read.slots);
                self.submit(bio)
            }
            Action::Flush(j) => {
                self.queue.start_plug(FLUSHER_PID);
                for &slots in &mix.bursts[j].writes {
                    let sector = self.flush_cursor;
                    self.flush_cursor += u64::from(slots) * SLOT_SECTORS;
                    let bio = self.bio(Owner::Flusher, IoOp::Write, sector, slots);
                    self.submit(bio)?;
                }
                self.queue.finish_plug(self.now, FLUSHER_PID);
                self.checked("an unplug")
            }
        }
    }

    /// One queue event: completions schedule each reader's next read after its think time;
    /// submitters told to wait retry when a request is freed.
    fn event(&mut self, mix: &Mix, at: Nanos) -> Result<(), TestCaseError> {
        self.now = at;
        self.events += 1;
        prop_assert!(self.events < MAX_EVENTS, "the queue never settles");
        let report = self.queue.advance(at);
        for (done, rq) in report.completed {
            for bio in RequestQueue::bios_of(&rq) {
                if let Some(Owner::Reader(i)) = self.owners.get(bio).copied() {
                    if self.issued[i] < mix.readers[i].reads.len() {
                        let think = mix.readers[i].reads[self.issued[i]].think_us * NS_PER_US;
                        self.actions.insert((done + think, Action::Read(i)), ());
                    }
                }
            }
            self.completed.push(Seen {
                rq,
                completed_ns: done,
            });
        }
        self.checked("an event")?;
        let mut woken = Vec::new();
        for (class, &count) in report.freed.iter().enumerate() {
            for _ in 0..count {
                woken.extend(self.waiting[class].pop_front());
            }
        }
        for bio in woken {
            if let SubmitOutcome::MustWait(class) = self.queue.retry_get_request(self.now, &bio) {
                self.waiting[class].push_back(bio);
            }
            self.checked("a retry")?;
        }
        Ok(())
    }
}

/// Runs `mix` under `elevator` to the end: every read issued and every request completed.
fn run_mix(elevator: Elevator, mix: &Mix) -> Result<Ran, TestCaseError> {
    let mut run = Run {
        queue: queue_for(elevator, mix),
        now: 0,
        actions: BTreeMap::new(),
        waiting: Default::default(),
        owners: BTreeMap::new(),
        next_bio: 1,
        issued: vec![0; mix.readers.len()],
        cursors: (0..mix.readers.len()).map(region_start).collect(),
        flush_cursor: FLUSH_REGION,
        completed: Vec::new(),
        events: 0,
        slots: Vec::new(),
    };
    for (i, r) in mix.readers.iter().enumerate() {
        run.actions
            .insert((r.start_us * NS_PER_US, Action::Read(i)), ());
    }
    for (j, b) in mix.bursts.iter().enumerate() {
        run.actions
            .insert((b.at_us * NS_PER_US, Action::Flush(j)), ());
    }
    loop {
        let action = run.actions.keys().next().copied();
        let event = run.queue.next_event();
        match (action, event) {
            (None, None) => break,
            (Some((at, what)), event) if event.is_none_or(|e| at <= e) => {
                run.actions.remove(&(at, what));
                run.now = run.now.max(at);
                run.act(mix, what)?;
                run.observe(mix);
            }
            (_, Some(at)) => {
                run.event(mix, at.max(run.now))?;
                run.observe(mix);
            }
            (Some(_), None) => unreachable!(),
        }
    }
    prop_assert!(
        run.waiting.iter().all(VecDeque::is_empty),
        "submitters still asleep at the end"
    );
    prop_assert!(run.queue.is_idle(), "requests left in the queue");
    let issued: usize = run.issued.iter().sum();
    let wanted: usize = mix.readers.iter().map(|r| r.reads.len()).sum();
    prop_assert_eq!(issued, wanted, "readers left with reads not issued");
    let stats = run.queue.stats();
    prop_assert_eq!(stats.dispatched, run.completed.len() as u64);
    prop_assert_eq!(stats.completed, run.completed.len() as u64);
    Ok(Ran {
        completed: run.completed,
        slots: run.slots,
    })
}

/// What a run leaves to check.
struct Ran {
    completed: Vec<Seen>,
    slots: Vec<Slot>,
}

/// The longest time any request spent from dispatch to completion in the run: the device's
/// service time the bounds are stated in (the elevators bound a wait in slices and turns; a
/// turn ends only when the requests it dispatched complete).
fn longest_service(completed: &[Seen]) -> Nanos {
    completed
        .iter()
        .map(|seen| seen.completed_ns - seen.rq.issued_ns.expect("dispatched"))
        .max()
        .unwrap_or(0)
}

fn waits(completed: &[Seen]) -> impl Iterator<Item = (&Request, Nanos)> {
    completed.iter().map(|seen| {
        let rq = &seen.rq;
        (rq, rq.issued_ns.expect("dispatched") - rq.inserted_ns)
    })
}

fn config(seed: u64) -> ProptestConfig {
    prop_support::config(DEFAULT_CASES, seed)
}

/// Prints the longest waits of a run and how close a read came to its bound
/// (`PROP_STARVATION_VERBOSE=1`).
fn report(what: &str, mix: &Mix, ran: &Ran, bound: impl Fn(&Request) -> Nanos) {
    if std::env::var("PROP_STARVATION_VERBOSE").is_err() {
        return;
    }
    let completed = &ran.completed;
    let service = longest_service(completed);
    let (mut sync_max, mut async_max, mut closest) = (0, 0, 0.0f64);
    for (rq, wait) in waits(completed) {
        if rq.is_sync() {
            sync_max = sync_max.max(wait);
            closest = closest.max(wait as f64 / bound(rq) as f64);
        } else {
            async_max = async_max.max(wait);
        }
    }
    let slot_max = ran
        .slots
        .iter()
        .filter_map(|s| s.end.map(|end| end - s.start))
        .max()
        .unwrap_or(0);
    eprintln!(
        "{what} hz {} {} readers {} bursts {}: longest service {:.1} ms, sync wait {:.1} ms ({:.0} % of its bound), async wait {:.1} ms, longest BFQ slot {:.1} ms",
        mix.hz,
        mix.device,
        mix.readers.len(),
        mix.bursts.len(),
        service as f64 / NS_PER_MS as f64,
        sync_max as f64 / NS_PER_MS as f64,
        100.0 * closest,
        async_max as f64 / NS_PER_MS as f64,
        slot_max as f64 / NS_PER_MS as f64
    );
}

/// Which scheduler queue a request is in: a sync request the process's own queue (its
/// pid), an async one the shared queue of the flusher's priority (`cfq_get_queue`,
/// `bfq_get_queue`: `async_cfqq[class][level]` / `async_bfqq`).
fn queue_of(rq: &Request) -> (bool, u32) {
    (rq.is_sync(), if rq.is_sync() { rq.task.pid } else { 0 })
}

/// The runs of the other queues during request `r`'s wait: maximal sequences of consecutive
/// dispatches (in dispatch order) of one queue other than `r`'s, between `r`'s insertion and
/// its dispatch. A run is one turn of its queue, or consecutive turns of a queue that a
/// workload kept selecting (`choose_wl_class_and_type`); never two queues.
fn runs_during(r: &Request, completed: &[Seen]) -> u64 {
    let (inserted, issued) = (r.inserted_ns, r.issued_ns.expect("dispatched"));
    let mine = queue_of(r);
    let mut order: Vec<&Request> = completed
        .iter()
        .map(|seen| &seen.rq)
        .filter(|s| {
            let at = s.issued_ns.expect("dispatched");
            at > inserted && at < issued
        })
        .collect();
    order.sort_by_key(|s| (s.issued_ns, s.id));
    let mut runs = 0;
    let mut last = None;
    for s in order {
        let q = queue_of(s);
        if last != Some(q) && q != mine {
            runs += 1;
        }
        last = Some(q);
    }
    runs
}

/// The runs of every queue: (queue, first dispatch, the next dispatch of another queue or the
/// last completion of the run), with the earliest insertion among the other queues' requests
/// waiting (inserted before the run started, dispatched after it ended) if any.
fn runs_of(completed: &[Seen]) -> Vec<((bool, u32), Nanos, Nanos, bool)> {
    let mut order: Vec<&Seen> = completed.iter().collect();
    order.sort_by_key(|seen| (seen.rq.issued_ns, seen.rq.id));
    let mut runs: Vec<((bool, u32), Nanos, Nanos)> = Vec::new();
    for seen in &order {
        let q = queue_of(&seen.rq);
        let at = seen.rq.issued_ns.expect("dispatched");
        match runs.last_mut() {
            Some(run) if run.0 == q => run.2 = run.2.max(seen.completed_ns),
            _ => {
                if let Some(run) = runs.last_mut() {
                    run.2 = run.2.min(at).max(run.1);
                }
                runs.push((q, at, seen.completed_ns));
            }
        }
    }
    runs.into_iter()
        .map(|(q, start, end)| {
            let starved = completed.iter().any(|seen| {
                queue_of(&seen.rq) != q
                    && seen.rq.inserted_ns < start
                    && seen.rq.issued_ns.expect("dispatched") >= end
            });
            (q, start, end, starved)
        })
        .collect()
}

/// CFQ 3.10's `cfq_prio_slice` in jiffies: `base + base / CFQ_SLICE_SCALE * (4 - level)`.
fn cfq_prio_slice(base: u64, level: u8) -> u64 {
    (base as i64 + (base / 5) as i64 * (4 - i64::from(level))) as u64
}

/// CFQ (block/cfq-iosched.c, Linux 3.10): the longest a sync read of a one-at-a-time reader
/// may wait from insertion to dispatch, for a mix of best-effort readers and the flusher's
/// async writes (no RT or idle class, no REQ_PRIO). Derivation, by function:
///
/// - A queue's turn (`cfq_set_active_queue` .. `__cfq_slice_expired`): its slice starts at
///   its first completion (`cfq_set_prio_slice` in `cfq_completed_request`), at most `D` (the
///   longest dispatch-to-completion time of the run) after it became active, and lasts
///   `cfq_prio_slice(sync, level)` (`cfq_slice_sync` = HZ/10 plus 20 % per level above 4) or
///   `cfq_prio_slice(async, level)` (`cfq_slice_async` = HZ/25); `low_latency`
///   (`cfq_scaled_cfqq_slice`) only shortens it. Once used, `cfq_select_queue` expires it at
///   the next dispatch attempt: the next completion (`D`) or the idle timer (`slice_idle`,
///   HZ/125 raised to one jiffy by `cfq_init`, plus the tick it fires on). `wait_busy`
///   extends a slice only for the group's only queue (`cfq_should_wait_busy`: `nr_cfqq == 1`),
///   never while the reader waits. A new queue may wait for the other direction's requests in
///   flight (`cfq_may_dispatch`: drain async before an idling sync queue, async waits for
///   sync): `D`. So a turn lasts at most `T = slice_max + 3D + slice_idle + 1 jiffy`.
/// - A workload (`choose_wl_class_and_type`): while its slice lasts (`cfq_target_latency` =
///   HZ*3/10 times the tree's share of the class's queues, at least `2 * slice_idle` and
///   `CFQ_MIN_TT`; the async one scaled by `slice_async / slice_sync`) the queues of one
///   type take turns whatever the keys of the others; the slice is only checked when a queue
///   expires, so a workload lasts at most `W = target_latency + T`.
/// - The service tree (`cfq_service_tree_add`): the reader's queue goes on its tree at
///   `rb_key = now + cfq_slice_offset - slice_resid`, where the offset is `(nr_cfqq - 1) *
///   (cfq_prio_slice(sync, 0) - cfq_prio_slice(queue))` (lower priorities start further
///   back) and `slice_resid` is negative only by an overrun (at most `D` and a jiffy). A queue
///   re-added after `key + slice_max` (its own `slice_resid` is at most its slice) goes behind
///   the reader. So after a window of `offset + slice_max + 2 jiffies + D` from the insertion,
///   a turn or workload that is not the reader's goes to a queue that was already busy when
///   it arrived (each at most once: re-added, it is behind) or to a queue that got a request
///   after it (`cfq_preempt_queue` puts a preempting queue at the front, `add_front`; a queue
///   that arrived in the window may be ahead). 3.10 bounds neither: two sync queues that
///   preempt each other (`cfq_should_preempt`'s "two queues on SYNC_NOIDLE" rule, each put
///   `HZ` before the first key) can keep a third waiting as long as they go on. So the bound
///   counts what happened: the runs of other queues during the wait (`runs_during`: one
///   queue dispatching; a run is a turn, or turns of a queue its workload kept selecting),
///   each at most `W + T` (checked on its own by [`check_cfq_runs`]).
/// - The reader's own queue holds only this read: `cfq_check_fifo` has nothing older to
///   serve; once selected, it dispatches unless async requests drain first (`D`).
///
/// Bound: `offset + slice_max + 2 jiffies + D + (runs + 1) * (W + T) + D`.
fn cfq_bound(mix: &Mix, r: &Request, completed: &[Seen]) -> Nanos {
    let hz = Hz(mix.hz);
    let jiffy = hz.tick_ns();
    let d = longest_service(completed);
    // cfq-iosched.c 3.10: `cfq_slice_sync = HZ / 10`, `cfq_slice_async = HZ / 25` and
    // `cfq_slice_idle = HZ / 125`, both raised to 1 by `cfq_init`; `cfq_target_latency =
    // HZ * 3/10`.
    let slice_sync = hz.over(10);
    let slice_async = hz.over(25).max(1);
    let slice_idle = hz.over(125).max(1);
    let target_latency = hz.frac(3, 10);
    let level = |pid: u32| mix.readers[(pid - 200) as usize].level;
    let levels = mix.readers.iter().map(|r| r.level);
    let slice_max = levels
        .clone()
        .map(|l| cfq_prio_slice(slice_sync, l))
        .chain([cfq_prio_slice(slice_async, mix.flusher_level)])
        .max()
        .unwrap_or(0);
    let queues = mix.readers.len() as u64 + 1;
    let offset = (queues - 1)
        * (cfq_prio_slice(slice_sync, 0) - cfq_prio_slice(slice_sync, level(r.task.pid)));
    let turn = (slice_max + slice_idle + 1) * jiffy + 3 * d;
    let workload = target_latency.max(2 * slice_idle).max(2) * jiffy + turn;
    (offset + slice_max + 2) * jiffy + 2 * d + (runs_during(r, completed) + 1) * workload
}

/// The longest run of one CFQ queue ([`cfq_bound`]'s `W + T`): a turn, or the turns of a
/// queue its workload kept selecting until the workload slice ended.
fn cfq_run_bound(mix: &Mix, completed: &[Seen]) -> Nanos {
    let hz = Hz(mix.hz);
    let jiffy = hz.tick_ns();
    let d = longest_service(completed);
    let slice_max = mix
        .readers
        .iter()
        .map(|r| cfq_prio_slice(hz.over(10), r.level))
        .chain([cfq_prio_slice(hz.over(25).max(1), mix.flusher_level)])
        .max()
        .unwrap_or(0);
    let slice_idle = hz.over(125).max(1);
    let turn = (slice_max + slice_idle + 1) * jiffy + 3 * d;
    hz.frac(3, 10).max(2 * slice_idle).max(2) * jiffy + turn
}

/// No queue keeps the device longer than [`cfq_run_bound`] while another queue's request
/// waits (inserted before the run, dispatched after it).
fn check_cfq_runs(mix: &Mix, ran: &Ran) -> Result<(), TestCaseError> {
    let bound = cfq_run_bound(mix, &ran.completed);
    for (q, start, end, starved) in runs_of(&ran.completed) {
        prop_assert!(
            !starved || end - start <= bound,
            "cfq: queue {:?} dispatched alone for {:.1} ms from {:.3} ms while another queue waited, over {:.1} ms",
            q,
            (end - start) as f64 / NS_PER_MS as f64,
            start as f64 / NS_PER_MS as f64,
            bound as f64 / NS_PER_MS as f64
        );
    }
    Ok(())
}

/// Checks every reader's read against `bound`.
fn check_reads(
    what: &str,
    mix: &Mix,
    completed: &[Seen],
    bound: impl Fn(&Request) -> Nanos,
) -> Result<(), TestCaseError> {
    for (rq, wait) in waits(completed).filter(|(rq, _)| rq.is_sync()) {
        let limit = bound(rq);
        prop_assert!(
            wait <= limit,
            "{}: R#{} of pid {} waited {:.1} ms (inserted at {:.3} ms), over its bound of {:.1} ms ({} runs of other queues; longest service {:.1} ms; hz {}, {})",
            what,
            rq.id,
            rq.task.pid,
            wait as f64 / NS_PER_MS as f64,
            rq.inserted_ns as f64 / NS_PER_MS as f64,
            limit as f64 / NS_PER_MS as f64,
            runs_during(rq, completed),
            longest_service(completed) as f64 / NS_PER_MS as f64,
            mix.hz,
            mix.device
        );
    }
    Ok(())
}

/// BFQ (block/bfq-iosched.c, mainline): the longest a service slot may last. Derivation:
/// `__bfq_set_in_service_queue` sets the budget timeout (`bfq_set_budget_timeout`) to
/// `jiffies + bfq_timeout * coeff` (`bfq_timeout = HZ / 8`; `coeff` the weight-raising
/// factor of an interactive queue, 1 otherwise). Once it passed
/// (`bfq_bfqq_budget_timeout`), the slot ends at the next call that looks: a dispatch
/// (`bfq_select_queue`: `bfq_may_expire_for_budg_timeout` unless the queue must idle), a
/// completion (`bfq_completed_request`), a request arrival for an idling queue
/// (`bfq_rq_enqueued`) or the idle timer (`bfq_idle_slice_timer_body`: budget timed out ->
/// `BFQQE_BUDGET_TIMEOUT`). A queue that must idle waits for its requests in flight (`D`,
/// the run's longest dispatch-to-completion) and then for the idle timer (`bfq_slice_idle` =
/// 8 ms, at least 20 ms for a raised queue, `bfq_arm_slice_timer`). Bound: `(timeout * coeff +
/// 1) jiffies + D + max(slice_idle, 20 ms)`.
fn bfq_slot_bound(mix: &Mix, slot: &Slot, completed: &[Seen]) -> Nanos {
    let hz = Hz(mix.hz);
    // bfq-iosched.c: `bfq_timeout = HZ / 8`, `bfq_slice_idle = NSEC_PER_SEC / 125`.
    let timeout = hz.over(8);
    // `bfq_arm_slice_timer`: `bfq_slice_idle` (8 ms), at least 20 ms for a raised queue.
    let idle = 20 * NS_PER_MS;
    (timeout * slot.coeff + 1) * hz.tick_ns() + longest_service(completed) + idle
}

fn check_bfq_slots(mix: &Mix, ran: &Ran) -> Result<(), TestCaseError> {
    for slot in &ran.slots {
        let Some(end) = slot.end else { continue };
        let bound = bfq_slot_bound(mix, slot, &ran.completed);
        prop_assert!(
            end - slot.start <= bound,
            "BFQ queue {} (pid {}) stayed in service {:.1} ms from {:.3} ms, over its bound of {:.1} ms (coeff {})",
            slot.queue,
            slot.pid,
            (end - slot.start) as f64 / NS_PER_MS as f64,
            slot.start as f64 / NS_PER_MS as f64,
            bound as f64 / NS_PER_MS as f64,
            slot.coeff
        );
    }
    Ok(())
}

fn check_cfq(mix: &Mix, ran: &Ran) -> Result<(), TestCaseError> {
    check_cfq_runs(mix, ran)?;
    check_reads("cfq", mix, &ran.completed, |rq| {
        cfq_bound(mix, rq, &ran.completed)
    })
}

proptest! {
    #![proptest_config(config(0x6366_7131))]

    /// CFQ (3.10): readers at random best-effort levels and the flusher's bursts; every read
    /// within [`cfq_bound`].
    #[test]
    fn cfq_3_10_serves_every_read_within_its_slice_and_workload_bound(mix in mix(true, false)) {
        let ran = run_mix(CFQ, &mix)?;
        report("cfq", &mix, &ran, |rq| cfq_bound(&mix, rq, &ran.completed));
        check_cfq(&mix, &ran)?;
    }

    /// BFQ: readers at random levels in cgroups of random weights, the flusher's bursts,
    /// `low_latency` on; every service slot within [`bfq_slot_bound`].
    #[test]
    fn bfq_ends_every_service_slot_by_its_budget_timeout(mix in mix(true, true)) {
        let ran = run_mix(BFQ, &mix)?;
        report("bfq", &mix, &ran, |_| Nanos::MAX);
        check_bfq_slots(&mix, &ran)?;
    }
}

/// Runs random mixes under `elevator` until `check` fails on one; its message, if any within
/// `tries`.
fn first_violation(
    elevator: Elevator,
    tries: u32,
    check: impl Fn(&Mix, &Ran) -> Result<(), TestCaseError>,
) -> Option<String> {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{RngAlgorithm, TestRng, TestRunner};
    let mut runner = TestRunner::new_with_rng(
        ProptestConfig::default(),
        TestRng::deterministic_rng(RngAlgorithm::ChaCha),
    );
    let strategy = mix(true, true);
    for _ in 0..tries {
        let mix = strategy.new_tree(&mut runner).expect("a mix").current();
        let ran = run_mix(elevator, &mix).expect("the mix runs");
        if let Err(e) = check(&mix, &ran) {
            return Some(e.to_string());
        }
    }
    None
}

/// The bounds can fail: with CFQ and BFQ idling 1 s for a queue's next request
/// (`slice_idle`, 8-10 ms in the kernels: as a model whose idle timer fired late would
/// behave), some random mix breaks them. Mutants of the tunables, not of the code: each needs no rebuild. (A CFQ
/// `slice_sync` ten times the kernel's is not caught: `cfq_scaled_cfqq_slice` scales it back
/// to `cfq_target_latency`, and without `low_latency` the readers' turns still end early, at
/// each preemption, so no run grows past the bound. Nor is a BFQ `timeout_sync` ten times
/// the kernel's: in these mixes slots end by budget or idleness, at most 42 ms, well before
/// the 125 ms timeout.)
#[test]
fn the_bounds_fail_with_a_long_idle_or_budget_timeout() {
    let cfq = first_violation(
        Elevator::Cfq {
            slice_idle: Some(1000),
        },
        200,
        check_cfq,
    );
    assert!(cfq.is_some(), "CFQ idling 1 s for a queue kept its bound");
    let bfq = first_violation(
        Elevator::Bfq {
            low_latency: true,
            slice_idle: Some(1000),
        },
        200,
        check_bfq_slots,
    );
    assert!(
        bfq.is_some(),
        "BFQ idling 1 s for a queue kept its slot bound"
    );
}
