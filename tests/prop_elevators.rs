//! Property tests through the block layer (issue 46): random request streams through each
//! elevator (CFQ, BFQ, deadline, mq-deadline with and without I/O priorities, kyber, none),
//! with and without writeback throttling, over an eMMC 4.5 (the mmc driver's two slots) and a
//! UFS 2.1 device (command queueing), driven through the request queue's own interface
//! (`RequestQueue::submit_bio` / `retry_get_request` / `advance`, plugs included).
//!
//! A stream is a list of batches: one task submits one to four bios at one instant, under a
//! plug or not; the next batch comes 0-50 us later (a burst: a queue builds up) or, one time
//! in five, up to 4 ms later. Bios are reads or writes (sync or async, the async ones the
//! flusher's writeback, REQ_BACKGROUND for wbt), 4-128 KiB at random 4 KiB slots of a small
//! region (neighbours merge) or continuing the task's sequential stream, from four tasks at
//! I/O priorities RT / BE / IDLE; `nr_requests` is the default or 4-16. A submitter told to
//! wait (`get_request` sleeps, wbt's `rq_qos_wait`) retries when the queue reports a freed
//! request or a wbt wake-up, as the block layer's tasks do. deadline and mq-deadline run with
//! `read_expire` 10 ms and `write_expire` 20 ms, so that their FIFO deadlines pass within a
//! stream.
//!
//! Checked, for every stream:
//! - the block layer's global invariants (`RequestQueue::check_invariants`: each request in one
//!   place, `rl->count` / tags, the elevator's private counts, wbt's inflight) after every
//!   submission and every event;
//! - every bio completes exactly once; every request is dispatched once (D) and completes once
//!   (C); the queue ends idle with no submitter left waiting;
//! - merged requests keep sector order and contiguity: a request's bios, in order, tile its
//!   sectors, all of its op;
//! - no starvation beyond the elevator's own bound, stated per elevator below with its kernel
//!   source (noop/none and kyber: FIFO; deadline and mq-deadline: FIFO expiry, `fifo_batch`
//!   and `writes_starved`).
//!
//! Cases: `PROPTEST_CASES` per test (proptest's own variable; default below, chosen so that the
//! whole file runs in a few seconds in the debug build CI uses). Run more with e.g.
//! `PROPTEST_CASES=2000 cargo test --release --test prop_elevators`. A failure shrinks to a
//! minimal stream and prints it.

mod prop_support;

use mobistack::block::queue::{RequestQueue, SubmitOutcome, ALLOC_CLASSES, ALLOC_WBT};
use mobistack::block::request::{Bio, BioId, IoPrio, IoPrioClass, Request, TaskRef};
use mobistack::block::BlockConfig;
use mobistack::dev::profile::{build_device, DeviceConfig};
use mobistack::dev::{IoFlags, IoOp};
use mobistack::kernel::{KernelConfig, KernelVersion};
use mobistack::units::{Nanos, NS_PER_US};
use proptest::prelude::*;
use std::collections::{BTreeMap, VecDeque};

/// Cases per test when `PROPTEST_CASES` is not set.
const DEFAULT_CASES: u32 = 24;

/// deadline's and mq-deadline's `read_expire` / `write_expire` in these tests, ms.
const SHORT_READ_EXPIRE_MS: u32 = 10;
const SHORT_WRITE_EXPIRE_MS: u32 = 20;

/// Sectors of a slot: one page.
const SLOT_SECTORS: u64 = 8;

/// Bound on queue events per stream (a stream has at most a few hundred requests): more is a
/// queue that never settles.
const MAX_EVENTS: usize = 200_000;

#[derive(Debug, Clone)]
struct BioSpec {
    write: bool,
    sync: bool,
    /// Where the task's last bio ended (a sequential stream, which merges and keeps a sector
    /// sweep ahead of older requests), instead of `slot`.
    sequential: bool,
    slot: u64,
    slots: u32,
    class: u8,
}

#[derive(Debug, Clone)]
struct Batch {
    gap_us: u64,
    task: u32,
    plugged: bool,
    bios: Vec<BioSpec>,
}

fn bio_spec() -> impl Strategy<Value = BioSpec> {
    (
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        0u64..256,
        1u32..=32,
        0u8..3,
    )
        .prop_map(|(write, sync, sequential, slot, slots, class)| BioSpec {
            write,
            sync,
            sequential,
            slot,
            slots,
            class,
        })
}

fn batch() -> impl Strategy<Value = Batch> {
    (
        // Mostly bursts (a queue builds up on the device), sometimes a pause that drains it.
        prop_oneof![4 => 0u64..50, 1 => 0u64..4000],
        0u32..4,
        any::<bool>(),
        proptest::collection::vec(bio_spec(), 1..=4),
    )
        .prop_map(|(gap_us, task, plugged, bios)| Batch {
            gap_us,
            task,
            plugged,
            bios,
        })
}

fn stream() -> impl Strategy<Value = Vec<Batch>> {
    proptest::collection::vec(batch(), 1..60)
}

/// `queue/nr_requests`: the default, or a small list from `BLKDEV_MIN_RQ` = 4 up.
fn nr_requests() -> impl Strategy<Value = Option<u32>> {
    prop_oneof![Just(None), (4u32..=16).prop_map(Some)]
}

/// The run's set-up: elevator, device, wbt, whether bios carry I/O priorities.
#[derive(Debug, Clone, Copy)]
struct Setup {
    elevator: &'static str,
    device: &'static str,
    wbt: bool,
    priorities: bool,
    /// `queue/nr_requests` (`None`: the kernel default): small lists make submitters sleep in
    /// `get_request` and exercise batching and the scheduler tags' `async_depth`.
    nr_requests: Option<u32>,
}

fn queue_for(setup: Setup) -> RequestQueue {
    let device = DeviceConfig {
        profile: setup.device.to_string(),
        capacity: Some(1 << 30),
        fill: 0.0,
        ..DeviceConfig::default()
    };
    let device = build_device(&device, 1).expect("a device");
    let legacy = matches!(setup.elevator, "noop" | "deadline" | "cfq");
    let kernel = KernelConfig {
        version: if legacy {
            KernelVersion::V3_10
        } else {
            KernelVersion::V6_6
        },
        ..KernelConfig::default()
    };
    let mut config = BlockConfig {
        elevator: setup.elevator.to_string(),
        wbt: Some(setup.wbt),
        nr_requests: setup.nr_requests,
        ..BlockConfig::default()
    };
    // FIFO deadlines a stream of a few hundred milliseconds passes (the defaults, 500 ms and
    // 5 s, are rarely reached): `read_expire` 10 ms, `write_expire` 20 ms (one and two jiffies
    // at HZ 100), as `echo 10 > queue/iosched/read_expire` would set them.
    config.deadline.read_expire = Some(SHORT_READ_EXPIRE_MS);
    config.deadline.write_expire = Some(SHORT_WRITE_EXPIRE_MS);
    config.mq_deadline.read_expire = Some(SHORT_READ_EXPIRE_MS);
    config.mq_deadline.write_expire = Some(SHORT_WRITE_EXPIRE_MS);
    let mut queue = RequestQueue::from_config(device, &config, &kernel).expect("a queue");
    queue.enable_checks();
    queue
}

fn class_of(spec: &BioSpec, priorities: bool) -> IoPrio {
    let class = match (priorities, spec.class) {
        (false, _) => IoPrioClass::None,
        (true, 0) => IoPrioClass::Rt,
        (true, 1) => IoPrioClass::Be,
        (true, _) => IoPrioClass::Idle,
    };
    IoPrio::new(class, 4)
}

/// A request's life as the test saw it.
#[derive(Debug, Clone)]
struct Seen {
    rq: Request,
    completed_ns: Nanos,
}

struct Harness {
    queue: RequestQueue,
    now: Nanos,
    /// Submitters asleep, per allocation / wbt class, in the order they slept.
    waiting: [VecDeque<Bio>; ALLOC_CLASSES],
    bios: BTreeMap<BioId, Bio>,
    bio_completions: BTreeMap<BioId, u32>,
    completed: Vec<Seen>,
    events: usize,
}

impl Harness {
    fn new(queue: RequestQueue) -> Harness {
        Harness {
            queue,
            now: 0,
            waiting: Default::default(),
            bios: BTreeMap::new(),
            bio_completions: BTreeMap::new(),
            completed: Vec::new(),
            events: 0,
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

    fn outcome(&mut self, bio: Bio, outcome: SubmitOutcome) {
        if let SubmitOutcome::MustWait(class) = outcome {
            self.waiting[class].push_back(bio);
        }
    }

    fn submit(&mut self, bio: Bio) -> Result<(), TestCaseError> {
        self.bios.insert(bio.id, bio.clone());
        let outcome = self.queue.submit_bio(self.now, &bio);
        self.outcome(bio, outcome);
        self.checked("a submission")
    }

    /// One queue event at `at`, then the wake-ups it reports: each woken submitter retries
    /// (`get_request`'s loop), and sleeps again at the back if it must.
    fn advance(&mut self, at: Nanos) -> Result<(), TestCaseError> {
        self.now = at;
        self.events += 1;
        prop_assert!(self.events < MAX_EVENTS, "the queue never settles");
        let report = self.queue.advance(at);
        for (done, rq) in report.completed {
            for bio in RequestQueue::bios_of(&rq) {
                *self.bio_completions.entry(*bio).or_default() += 1;
            }
            self.completed.push(Seen {
                rq,
                completed_ns: done,
            });
        }
        self.checked("an event")?;
        let mut woken: Vec<Bio> = Vec::new();
        for (class, &count) in report.freed.iter().enumerate() {
            for _ in 0..count {
                woken.extend(self.waiting[class].pop_front());
            }
        }
        for (rwq, &count) in report.wbt_woken.iter().enumerate() {
            for _ in 0..count {
                let bio = self.waiting[ALLOC_WBT + rwq].pop_front();
                prop_assert!(bio.is_some(), "wbt woke a sleeper nobody is");
                woken.extend(bio);
            }
        }
        for bio in woken {
            let outcome = self.queue.retry_get_request(self.now, &bio);
            self.outcome(bio, outcome);
            self.checked("a retry")?;
        }
        Ok(())
    }

    /// Queue events up to (not including) `until`.
    fn run_until(&mut self, until: Nanos) -> Result<(), TestCaseError> {
        while let Some(next) = self.queue.next_event().filter(|&t| t < until) {
            self.advance(next.max(self.now))?;
        }
        self.now = self.now.max(until);
        Ok(())
    }

    /// Every queue event until nothing is left.
    fn drain(&mut self) -> Result<(), TestCaseError> {
        while let Some(next) = self.queue.next_event() {
            self.advance(next.max(self.now))?;
        }
        Ok(())
    }
}

/// First slot of task `task`'s sequential stream (far from the random region and from each
/// other).
fn stream_start(task: u32) -> u64 {
    4096 * (1 + u64::from(task))
}

fn bio_of(id: BioId, task: u32, sector: u64, spec: &BioSpec, setup: Setup, now: Nanos) -> Bio {
    let op = if spec.write { IoOp::Write } else { IoOp::Read };
    let sync = !spec.write || spec.sync;
    let pid = 100 + task;
    Bio {
        id,
        op,
        sector,
        nr_sectors: spec.slots * SLOT_SECTORS as u32,
        flags: IoFlags {
            sync: spec.write && spec.sync,
            ..IoFlags::default()
        },
        task: TaskRef {
            pid,
            tgid: pid,
            uid: 10_000 + task,
            comm: format!("task{task}").into(),
        },
        ioprio: class_of(spec, setup.priorities),
        // An async write is the flusher's writeback (REQ_BACKGROUND for wbt).
        issued_async: !sync,
        foreground: false,
        owner_uid: 10_000 + task,
        pages: Vec::new(),
        submitted_ns: now,
    }
}

/// Runs `stream` and checks every property of the module documentation.
fn run_stream(setup: Setup, stream: &[Batch]) -> Result<(), TestCaseError> {
    let mut harness = Harness::new(queue_for(setup));
    let mut next_bio: BioId = 1;
    let mut at = 0;
    let mut cursors: BTreeMap<u32, u64> = BTreeMap::new();
    for batch in stream {
        at += batch.gap_us * NS_PER_US;
        harness.run_until(at)?;
        let pid = 100 + batch.task;
        if batch.plugged {
            harness.queue.start_plug(pid);
        }
        for spec in &batch.bios {
            let cursor = cursors
                .entry(batch.task)
                .or_insert(stream_start(batch.task) * SLOT_SECTORS);
            let sector = if spec.sequential {
                *cursor
            } else {
                spec.slot * SLOT_SECTORS
            };
            if spec.sequential {
                *cursor += u64::from(spec.slots) * SLOT_SECTORS;
            }
            let bio = bio_of(next_bio, batch.task, sector, spec, setup, at);
            next_bio += 1;
            harness.submit(bio)?;
        }
        if batch.plugged {
            harness.queue.finish_plug(at, pid);
            harness.checked("an unplug")?;
        }
    }
    harness.drain()?;
    check_completion(&harness)?;
    check_merges(&harness)?;
    check_starvation(setup, &harness.completed)
}

/// Every bio completed once, every request dispatched and completed once, nothing left.
fn check_completion(harness: &Harness) -> Result<(), TestCaseError> {
    prop_assert!(
        harness.waiting.iter().all(VecDeque::is_empty),
        "submitters still asleep after the queue drained"
    );
    prop_assert!(harness.queue.is_idle(), "requests left in the queue");
    for id in harness.bios.keys() {
        let times = harness.bio_completions.get(id).copied().unwrap_or(0);
        prop_assert_eq!(times, 1, "bio {} completed {} times", id, times);
    }
    let mut ids: Vec<u64> = harness.completed.iter().map(|seen| seen.rq.id).collect();
    ids.sort_unstable();
    let before = ids.len();
    ids.dedup();
    prop_assert_eq!(before, ids.len(), "a request completed twice");
    let stats = harness.queue.stats();
    prop_assert_eq!(stats.requests, before as u64);
    prop_assert_eq!(
        stats.dispatched,
        before as u64,
        "requests dispatched once each"
    );
    prop_assert_eq!(stats.completed, before as u64);
    for seen in &harness.completed {
        let rq = &seen.rq;
        let issued = rq.issued_ns.expect("dispatched");
        let on_device = rq.device_start_ns.expect("on the device");
        prop_assert!(
            rq.start_ns <= issued && issued <= on_device && on_device <= seen.completed_ns,
            "R#{} went back in time: allocated {} issued {} on the device {} completed {}",
            rq.id,
            rq.start_ns,
            issued,
            on_device,
            seen.completed_ns
        );
    }
    Ok(())
}

/// A request's bios, in order, tile its sectors and share its op.
fn check_merges(harness: &Harness) -> Result<(), TestCaseError> {
    for seen in &harness.completed {
        let rq = &seen.rq;
        let mut sector = rq.sector;
        for id in RequestQueue::bios_of(rq) {
            let bio = &harness.bios[id];
            prop_assert_eq!(
                bio.op,
                rq.op,
                "R#{} carries bio {} of another op",
                rq.id,
                id
            );
            prop_assert_eq!(
                bio.sector,
                sector,
                "R#{}: bio {} starts at {}, the request's bios had reached {}",
                rq.id,
                id,
                bio.sector,
                sector
            );
            sector = bio.end_sector();
        }
        prop_assert_eq!(
            sector,
            rq.end_sector(),
            "R#{}'s bios do not end where it does",
            rq.id
        );
    }
    Ok(())
}

/// Requests that went through the elevator (not the flush bypass), as (inserted, issued,
/// request).
fn through_elevator(completed: &[Seen]) -> Vec<&Request> {
    completed
        .iter()
        .map(|seen| &seen.rq)
        .filter(|rq| !rq.flags.fua && !rq.flags.preflush && !rq.flags.postflush)
        .collect()
}

/// FIFO dispatch: of two requests of one class (`same`), the one inserted earlier is
/// dispatched no later. noop/none: `noop_add_request` appends to `nd->queue` and
/// `noop_dispatch` takes its head (block/noop-iosched.c; blk-mq without a scheduler issues in
/// insertion order). kyber: `kyber_insert_requests` appends to the domain's `kcq->rq_list`
/// and `kyber_dispatch_cur_domain` takes from its head (block/kyber-iosched.c).
fn check_fifo(
    completed: &[Seen],
    same: impl Fn(&Request, &Request) -> bool,
) -> Result<(), TestCaseError> {
    let requests = through_elevator(completed);
    for r in &requests {
        for s in &requests {
            let issued = (r.issued_ns.unwrap(), s.issued_ns.unwrap());
            if same(r, s) && r.inserted_ns < s.inserted_ns && issued.0 > issued.1 {
                return Err(TestCaseError::fail(format!(
                    "R#{} (inserted {}) was dispatched at {} after R#{} (inserted {}) at {}",
                    r.id, r.inserted_ns, issued.0, s.id, s.inserted_ns, issued.1
                )));
            }
        }
    }
    Ok(())
}

/// deadline and mq-deadline: once request R's FIFO deadline (`rq->fifo_time`, insertion +
/// `fifo_expire[dir]`) has passed, every batch of its direction starts at the FIFO's head
/// (`deadline_check_fifo` in `__dd_dispatch_request` / `deadline_dispatch_requests`), which is
/// R or a request older than R. A batch dispatches at most `fifo_batch` requests, the first of
/// them from the FIFO head; so between R's deadline and R's dispatch at most `k + 2` batches of
/// R's direction run (`k` = older requests of R's direction and level not yet dispatched at R's
/// deadline, the batch in progress, and R's own), each letting at most `fifo_batch - 1`
/// requests inserted after R's deadline go first; and the other direction runs at most
/// `writes_starved` batches (for writes; reads are never starved by writes beyond their batch)
/// between two of R's direction. mq-deadline serves a lower level only when higher ones have
/// nothing queued or in flight, so the bound holds per level for the highest level with
/// requests; lower ones wait up to `prio_aging_expire` (10 s, longer than these streams).
fn check_deadline_bound(
    completed: &[Seen],
    fifo_batch: u64,
    writes_starved: u64,
    levels: bool,
) -> Result<(), TestCaseError> {
    let requests = through_elevator(completed);
    let level = |rq: &Request| match (levels, rq.ioprio.class) {
        (false, _) => 1,
        (true, IoPrioClass::Rt) => 0,
        (true, IoPrioClass::Idle) => 2,
        (true, _) => 1,
    };
    let best = requests.iter().map(|rq| level(rq)).min().unwrap_or(1);
    for r in requests.iter().filter(|rq| level(rq) == best) {
        let deadline = r.fifo_time_ns;
        let issued = r.issued_ns.unwrap();
        if issued <= deadline {
            continue;
        }
        let same_level = |s: &&&Request| level(s) == best;
        let older_left = requests
            .iter()
            .filter(same_level)
            .filter(|s| s.id != r.id && s.is_write() == r.is_write())
            .filter(|s| s.inserted_ns <= r.inserted_ns && s.issued_ns.unwrap() >= deadline)
            .count() as u64;
        let batches = older_left + 2;
        let overtaking = |write: bool| {
            requests
                .iter()
                .filter(same_level)
                .filter(|s| s.is_write() == write)
                .filter(|s| s.inserted_ns > deadline && s.issued_ns.unwrap() < issued)
                .count() as u64
        };
        let same_dir = overtaking(r.is_write());
        prop_assert!(
            same_dir <= batches * (fifo_batch - 1),
            "R#{}: {} requests of its direction inserted after its deadline went first ({} batches allowed)",
            r.id,
            same_dir,
            batches
        );
        if r.is_write() {
            let reads = overtaking(false);
            prop_assert!(
                reads <= batches * writes_starved * fifo_batch,
                "write R#{}: {} reads inserted after its deadline went first ({} write batches allowed)",
                r.id,
                reads,
                batches
            );
        }
    }
    Ok(())
}

/// The elevator's own starvation bound (module documentation), where one is stated.
fn check_starvation(setup: Setup, completed: &[Seen]) -> Result<(), TestCaseError> {
    match setup.elevator {
        "noop" | "none" => check_fifo(completed, |_, _| true),
        "kyber" => check_fifo(completed, |r, s| {
            // `kyber_sched_domain`: reads, writes, discards, others.
            r.op == s.op
        }),
        // block/deadline-iosched.c and block/mq-deadline.c: `fifo_batch = 16`,
        // `writes_starved = 2`.
        "deadline" => check_deadline_bound(completed, 16, 2, false),
        "mq-deadline" => check_deadline_bound(completed, 16, 2, setup.priorities),
        _ => Ok(()),
    }
}

fn config(seed: u64) -> ProptestConfig {
    prop_support::config(DEFAULT_CASES, seed)
}

/// Every set-up of `elevators` over eMMC and UFS, with and without wbt (blk-mq only) and
/// priorities.
fn setups(elevators: &[&'static str], priorities: bool, nr_requests: Option<u32>) -> Vec<Setup> {
    let mut setups = Vec::new();
    for &elevator in elevators {
        let blk_mq = !matches!(elevator, "noop" | "deadline" | "cfq");
        for device in ["emmc-4.5", "ufs-2.1"] {
            for wbt in [false, true] {
                if wbt && !blk_mq {
                    continue;
                }
                setups.push(Setup {
                    elevator,
                    device,
                    wbt,
                    priorities,
                    nr_requests,
                });
            }
        }
    }
    setups
}

fn run_all(setups: &[Setup], stream: &[Batch]) -> Result<(), TestCaseError> {
    for &setup in setups {
        run_stream(setup, stream)
            .map_err(|error| TestCaseError::fail(format!("{setup:?}: {error}")))?;
    }
    Ok(())
}

/// A sequential reader that keeps `depth` reads outstanding (each completion submits the next,
/// `size` slots further) from slot `start` up, and one read far below it, submitted once the
/// reader's first reads fill the mmc driver's slots (eMMC 4.5). mq-deadline's sector sweep
/// (`deadline_from_pos(latest_pos)`) always finds the reader's next request ahead of it; only
/// the FIFO deadline (`deadline_check_fifo`) brings the sweep back to the old read. Returns the
/// reader requests dispatched after the old read's deadline and before it.
fn sweep_overtakes(depth: u32, size: u32, start: u64, reads: u32) -> Result<u64, TestCaseError> {
    let setup = Setup {
        elevator: "mq-deadline",
        device: "emmc-4.5",
        wbt: false,
        priorities: false,
        nr_requests: None,
    };
    let mut harness = Harness::new(queue_for(setup));
    let read = |id: BioId, task: u32, slot: u64, slots: u32| {
        let spec = BioSpec {
            write: false,
            sync: true,
            sequential: false,
            slot,
            slots,
            class: 1,
        };
        bio_of(id, task, slot * SLOT_SECTORS, &spec, setup, 0)
    };
    // The reader first: its first reads fill the driver's slots and move the sweep to its
    // sectors; the old read comes next, below them.
    let mut next_id: BioId = 1;
    let mut cursor = start;
    let mut issued = 0;
    for _ in 0..depth {
        harness.submit(read(next_id, 3, cursor, size))?;
        next_id += 1;
        cursor += u64::from(size);
        issued += 1;
    }
    let old_bio = next_id;
    harness.submit(read(old_bio, 2, 0, 1))?;
    next_id += 1;
    while let Some(at) = harness.queue.next_event() {
        let before = harness.completed.len();
        harness.advance(at.max(harness.now))?;
        let reader_done = harness.completed[before..]
            .iter()
            .filter(|seen| seen.rq.task.pid == 103)
            .count();
        for _ in 0..reader_done {
            if issued < reads {
                harness.submit(read(next_id, 3, cursor, size))?;
                next_id += 1;
                cursor += u64::from(size);
                issued += 1;
            }
        }
    }
    check_completion(&harness)?;
    let old = harness
        .completed
        .iter()
        .find(|seen| RequestQueue::bios_of(&seen.rq).contains(&old_bio))
        .expect("the old read completed");
    let (deadline, dispatched) = (old.rq.fifo_time_ns, old.rq.issued_ns.unwrap());
    Ok(harness
        .completed
        .iter()
        .filter(|seen| seen.rq.task.pid == 103)
        .filter(|seen| {
            let issued = seen.rq.issued_ns.unwrap();
            issued > deadline && issued < dispatched
        })
        .count() as u64)
}

proptest! {
    #![proptest_config(config(0x7377_6565))]

    /// mq-deadline: a sequential reader never keeps the sweep away from an older read past
    /// its FIFO deadline for more than a batch (`fifo_batch` = 16) and the next batch's start:
    /// with nothing older queued, at most `2 * (fifo_batch - 1)` reader requests go between the
    /// deadline and the old read.
    #[test]
    fn mq_deadline_fifo_expiry_ends_a_sweep_that_starves_an_old_read(
        depth in 3u32..6,
        size in 1u32..8,
        start in 1000u64..50_000,
        reads in 200u32..400,
    ) {
        let overtakes = sweep_overtakes(depth, size, start, reads)?;
        prop_assert!(overtakes <= 2 * 15, "{} reader requests passed the old read's deadline", overtakes);
    }
}

proptest! {
    #![proptest_config(config(0x7072_6f70))]

    /// The legacy (3.10) elevators: noop, deadline, CFQ, over request lists.
    #[test]
    fn legacy_elevators_dispatch_and_complete_each_request_once(
        stream in stream(),
        nr_requests in nr_requests(),
    ) {
        run_all(&setups(&["noop", "deadline", "cfq"], true, nr_requests), &stream)?;
    }

    /// mq-deadline without I/O priorities (every bio class NONE, one level), with and without
    /// wbt.
    #[test]
    fn mq_deadline_keeps_its_fifo_bound(stream in stream(), nr_requests in nr_requests()) {
        run_all(&setups(&["mq-deadline"], false, nr_requests), &stream)?;
    }

    /// mq-deadline with RT / BE / IDLE bios (three levels).
    #[test]
    fn mq_deadline_with_priorities_keeps_its_bound_for_the_highest_level(
        stream in stream(),
        nr_requests in nr_requests(),
    ) {
        run_all(&setups(&["mq-deadline"], true, nr_requests), &stream)?;
    }

    /// BFQ (no wbt: `bfq_init_queue` turns it off, so only the default), kyber and none.
    #[test]
    fn bfq_kyber_and_none_dispatch_and_complete_each_request_once(
        stream in stream(),
        nr_requests in nr_requests(),
    ) {
        let mut all = setups(&["kyber", "none"], true, nr_requests);
        all.extend(setups(&["bfq"], true, nr_requests).into_iter().filter(|s| !s.wbt));
        run_all(&all, &stream)?;
    }
}
