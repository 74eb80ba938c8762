//! The simulation engine: virtual time, an event queue and a single-threaded executor of `async`
//! tasks that block in virtual time.
//!
//! Design:
//! - Time is an integer count of nanoseconds that only moves forward when the executor takes the
//!   next event from the queue. Events are ordered by (time, insertion order), so two runs of the
//!   same scenario interleave identically.
//! - A task is a boxed future. The engine does not use `std::task::Waker`: its own primitives
//!   ([`crate::sim::sync`]) register the *current task* with a [`WakeToken`] when they must wait,
//!   and `Sim::wake` makes it runnable again. A token names one particular wait of one task, so a
//!   late wake of a wait that already ended (a timeout that lost the race) is ignored.
//! - Each wait carries a reason and a blocker; the engine accounts the blocked time per reason per
//!   task and, when no task can run and no event is pending while tasks still wait, ends the run
//!   with a [`Deadlock`] report instead of hanging.
//! - Callback events (`Sim::schedule`) let pure state machines such as device models be driven in
//!   virtual time without a task of their own.
//! - A task that goes round and round without virtual time advancing (a zero-time livelock: a
//!   read served from the page cache in 0 ns, a retry loop woken at once) would hang the run with
//!   no output. The engine counts each task's *steps* at one instant (every poll, and every
//!   [`Sim::step`] a workload takes at a system call) and the events processed at one instant;
//!   past [`MAX_STEPS_AT_ONE_INSTANT`] the run ends with a [`Livelock`] naming the task and what
//!   it keeps doing.
//!
//! Limits: at most [`MAX_PENDING_EVENTS`] events may be pending and [`MAX_TASKS`] tasks exist; a
//! run that exceeds either stops with an assertion failure naming the limit (a model bug). A
//! livelock is not an assertion: it is a [`SimError`] the caller reports.

use super::queue::{EventQueue, Popped};
use super::timeline::{
    CounterSample, RequestLife, TaskSlice, TaskWait, Timeline, TimelineConfig, TimelineRecorder,
};
use super::wait::{BlockedTimes, Blocker, TaskId, Wait, WaitReason};
use crate::units::{format_ms, Nanos};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// Bound on pending events: a run that schedules more is runaway and stops loudly.
pub const MAX_PENDING_EVENTS: usize = 1 << 24;
const _: () = assert!(MAX_PENDING_EVENTS <= super::queue::MAX_SLOTS);
/// Bound on tasks ever spawned in one run.
pub const MAX_TASKS: usize = 1 << 20;
/// How often (in processed events) the progress hook is called. The hook is cheap (it stores
/// the virtual time; the CLI's progress bar redraws on its own wall-clock tick), so it can be
/// called often enough that even a slow run (large devices, many tasks) reports within
/// milliseconds of wall time.
pub const PROGRESS_EVERY_EVENTS: u64 = 1 << 10;
/// Bound on the steps one task takes, and on the events processed, at one instant of virtual
/// time before the run is declared a zero-time livelock.
///
/// A step is a poll of the task (it was woken, or yielded) or a [`Sim::step`] (a workload's
/// system call). Legitimate same-instant bursts are far smaller: a task is polled once per wake,
/// and what can wake it at one instant is bounded by the requests in the block layer (at most
/// 3/2 x `nr_requests` per direction plus the device's queue depth, a few hundred), the tasks of
/// a run and the dirty pages one write can make at once. The largest real burst today is a
/// buffered writer's zero-cost `write()` calls at one instant until dirty throttling stops it:
/// about `dirty_ratio` x RAM / `io_size` calls, e.g. 20 % of 24 GiB in 4 KiB writes = 1.26 M.
/// 2^22 = 4,194,304 leaves a factor of three over that and is reached in a few wall seconds by
/// a task that truly loops.
pub const MAX_STEPS_AT_ONE_INSTANT: u64 = 1 << 22;

type BoxFuture = Pin<Box<dyn Future<Output = ()>>>;
type Callback = Box<dyn FnOnce(&Sim)>;
/// A callback its owner keeps and schedules again and again ([`Sim::schedule_shared`]): the
/// pending event holds a reference to it (and so keeps it alive, as a boxed closure would).
pub trait SharedCallback {
    fn call(self: Rc<Self>, sim: &Sim);
}
type ProgressHook = Box<dyn FnMut(Nanos)>;
type Describer = Box<dyn Fn(Blocker) -> Option<String>>;
type Sampler = Box<dyn FnMut(&Sim, Nanos)>;

/// A function called at every multiple of `period_ns` from `next_ns` to `end_ns`.
struct SamplerSlot {
    next_ns: Nanos,
    period_ns: Nanos,
    end_ns: Nanos,
    sample: Sampler,
}

/// Identifies one wait of one task; passed to [`Sim::wake`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WakeToken {
    pub task: TaskId,
    pub token: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TaskState {
    Ready,
    Running,
    Blocked,
    Finished,
}

/// The task table, split in two: `hot[i]` is what the run loop touches at every wake, poll and
/// block of task `i`, `cold[i]` the rest.
///
/// Why: a timer event wakes one task and polls it, and with thousands of tasks each event's task
/// is a different one, so what the run loop touches per event is the task's entry. A whole entry
/// (name, 27 blocked times, wait log, lifetime, livelock counters, the future) spans seven or
/// eight cache lines; the hot part is two (it is 64-byte aligned), and of the cold part a wake
/// touches one (the blocked time of the wait's reason). One borrow of the table reaches both.
#[derive(Default)]
struct Tasks {
    hot: Vec<HotTask>,
    cold: Vec<ColdTask>,
}

/// The part of a task touched at every wake, poll and block (see [`Tasks`]).
#[repr(align(64))]
struct HotTask {
    future: Option<BoxFuture>,
    /// Incremented each time the task blocks; identifies the current wait.
    block_token: u64,
    /// The token of the wait that last ended by a wake.
    woken_token: u64,
    /// While the task is `Blocked`, its current wait; otherwise the last wait that ended (if
    /// `waited`). One slot serves both: a wait begins only after the previous one ended, and
    /// the last one is needed only while the task is not blocked.
    wait: Wait,
    /// Livelock detection: the instant of the task's current run of steps and their count.
    spin_ns: Nanos,
    spin_steps: u64,
    /// What the last step was: a [`Sim::step`] of this system call, or (`None`) a poll, which
    /// is [`Doing::Woken`] by the last wait that ended or [`Doing::Started`] before any (see
    /// [`HotTask::doing`]).
    spin_step: Option<&'static str>,
    state: TaskState,
    /// Daemons (flusher, kswapd, servers) may wait forever without that being a deadlock.
    daemon: bool,
    /// Whether the task has ever blocked: `wait` holds a wait.
    waited: bool,
    /// Whether the task's wait log is on (see [`Sim::start_wait_log`]).
    logging: bool,
}

// Two cache lines: the point of the split (see [`Tasks`]).
const _: () = assert!(std::mem::size_of::<HotTask>() == 128);

impl HotTask {
    /// The wait the task is in, if it is blocked.
    #[inline]
    fn current_wait(&self) -> Option<Wait> {
        (self.state == TaskState::Blocked).then_some(self.wait)
    }

    /// What the task's last step was, for a livelock report. Read only while the task is not
    /// blocked, when `wait` is the last wait that ended; a poll's answer is read before any
    /// later wake changes it (the report is made at the poll, or, for a task named by an event,
    /// once every woken task has been polled).
    fn doing(&self) -> Doing {
        debug_assert!(
            self.state != TaskState::Blocked,
            "a blocked task's last step"
        );
        match self.spin_step {
            Some(op) => Doing::Step(op),
            None if self.waited => Doing::Woken(self.wait.reason, self.wait.blocker),
            None => Doing::Started,
        }
    }
}

/// The part of a task the run loop does not touch at every event (see [`Tasks`]).
struct ColdTask {
    name: Rc<str>,
    blocked: BlockedTimes,
    spawned_ns: Nanos,
    finished_ns: Option<Nanos>,
    /// The waits that ended since logging started (see [`Sim::start_wait_log`]).
    wait_log: Option<WaitLog>,
}

/// What a task did at its last step, for a livelock report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Doing {
    /// Spawned, not yet run.
    Started,
    /// Polled after this wait ended (or after yielding, a `sleep` of 0).
    Woken(WaitReason, Blocker),
    /// A [`Sim::step`]: the workload started this system call.
    Step(&'static str),
}

impl fmt::Display for Doing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Doing::Started => f.write_str("starting"),
            Doing::Woken(WaitReason::Sleep, Blocker::None) => {
                f.write_str("a sleep or yield that ends at once")
            }
            Doing::Woken(reason, Blocker::None) => write!(f, "a `{reason}` wait that ends at once"),
            Doing::Woken(reason, blocker) => {
                write!(f, "a `{reason}` wait on {blocker} that ends at once")
            }
            Doing::Step(op) => write!(f, "`{op}` system calls that take no virtual time"),
        }
    }
}

/// Bound on waits kept in one task's log; later ones are only counted.
pub const MAX_LOGGED_WAITS: usize = 64;

/// One wait that ended, as kept in a task's wait log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitRecord {
    pub wait: Wait,
    pub ended_ns: Nanos,
}

/// The waits of a task over an interval (one operation): the longest [`MAX_LOGGED_WAITS`] of
/// them, in the order they ended. Back-to-back waits of the same reason on the same blocker (a
/// run of CPU segments, one per page copied) are merged into one record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WaitLog {
    pub records: Vec<WaitRecord>,
    /// Waits that were not kept because the log held [`MAX_LOGGED_WAITS`] longer ones.
    pub dropped: u64,
}

impl WaitLog {
    /// Inlined for its usual case, a wait that continues the last record (the second of
    /// back-to-back CPU segments); the rest is [`WaitLog::record_new`].
    #[inline(always)]
    fn record(&mut self, record: WaitRecord) {
        if let Some(last) = self.records.last_mut() {
            let contiguous = last.ended_ns == record.wait.since_ns
                && last.wait.reason == record.wait.reason
                && last.wait.blocker == record.wait.blocker
                && last.wait.holder == record.wait.holder;
            if contiguous {
                last.ended_ns = record.ended_ns;
                return;
            }
        }
        self.record_new(record);
    }

    /// A wait that does not continue the last record.
    #[inline(never)]
    fn record_new(&mut self, record: WaitRecord) {
        if self.records.len() < MAX_LOGGED_WAITS {
            self.records.push(record);
            return;
        }
        // Full: keep the longest waits, an operation is explained by them.
        let length = |r: &WaitRecord| r.ended_ns - r.wait.since_ns;
        let (shortest, _) = self
            .records
            .iter()
            .enumerate()
            .min_by_key(|(_, r)| length(r))
            .expect("a full log has records");
        if length(&self.records[shortest]) < length(&record) {
            self.records.remove(shortest);
            self.records.push(record);
        }
        self.dropped += 1;
    }
}

enum EventKind {
    Wake(WakeToken),
    Call(Callback),
    Shared(Rc<dyn SharedCallback>),
}

struct Core {
    now: Cell<Nanos>,
    seed: u64,
    events: RefCell<EventQueue<EventKind>>,
    ready: RefCell<VecDeque<TaskId>>,
    tasks: RefCell<Tasks>,
    current: Cell<Option<TaskId>>,
    live_non_daemons: Cell<usize>,
    stop_requested: Cell<bool>,
    events_processed: Cell<u64>,
    wakeups: Cell<u64>,
    lock_names: RefCell<Vec<Rc<str>>>,
    progress: RefCell<Option<ProgressHook>>,
    describers: RefCell<Vec<Describer>>,
    /// Livelock detection: the bound, the instant of the current run of events and its count,
    /// and the livelock found (which ends the run).
    step_limit: Cell<u64>,
    /// The bound on events processed ([`Simulation::set_event_limit`]; `u64::MAX`: none),
    /// checked every [`PROGRESS_EVERY_EVENTS`] events.
    event_limit: Cell<u64>,
    instant_ns: Cell<Nanos>,
    instant_events: Cell<u64>,
    livelock: RefCell<Option<Livelock>>,
    /// Whether `livelock` holds one (read at every poll, without a borrow).
    livelocked: Cell<bool>,
    /// The timeline being recorded (`--perfetto`), and whether there is one (read at every
    /// wake, without a borrow).
    timeline: RefCell<Option<TimelineRecorder>>,
    timeline_on: Cell<bool>,
    /// Samplers of state between events (the timeline's counters, the results' time series)
    /// and the earliest of their next times (`Nanos::MAX`: none).
    samplers: RefCell<Vec<SamplerSlot>>,
    next_sample_ns: Cell<Nanos>,
    /// The bounds of the current [`Sim::run_until`] (its `limit`, and whether it ends when the
    /// non-daemon tasks are done), read by [`Sim::advance_to_own_wake`]. Outside a run the
    /// limit is 0 and no sleep is short-cut.
    run_limit: Cell<Nanos>,
    run_ends_when_done: Cell<bool>,
    /// Whether sleeps may end at once when nothing else is due first (on by default; off to
    /// check that it changes nothing), and how many did.
    sleep_short_cut: Cell<bool>,
    sleeps_short_cut: Cell<u64>,
    /// [`Sim::sleep_now`]'s horizon: a sleep of the current task ending before it may end at
    /// once, as far as the pending events, the run's limit, the samplers, the ready queue and
    /// the run's flags go (0: unknown, found again at the next `sleep_now`). It is a lower
    /// bound of the exact horizon ([`Sim::exact_horizon`]), kept so by setting it to 0
    /// wherever that could move earlier: an event pushed, a task made ready, the limit, a
    /// sampler or a flag changed. Why: a CPU segment (two per page written) checked all of
    /// [`Sim::own_wake_is_next`] each time, the queue's peek included; the events and the
    /// ready queue change far less often than segments run.
    horizon: Cell<Nanos>,
}

/// A handle to a running simulation, cloned into every task and primitive that needs it.
#[derive(Clone)]
pub struct Sim {
    core: Rc<Core>,
}

/// Owns a simulation. Dropping it drops every task's future, breaking the reference cycles
/// between tasks and the handles they hold.
pub struct Simulation {
    sim: Sim,
}

/// How a call to [`Sim::run_until`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    /// Virtual time reached the limit.
    TimeLimit,
    /// Every non-daemon task finished.
    AllTasksDone,
    /// Nothing is left to do: no runnable task, no pending event, no waiting non-daemon task.
    Idle,
    /// A task called [`Sim::stop`].
    Stopped,
    /// The run processed its bound of events ([`Simulation::set_event_limit`]): a normal end
    /// for a caller that runs untrusted input under a budget ([`crate::fuzzing`]).
    EventLimit,
}

/// One blocked task in a deadlock report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockedTask {
    pub task: TaskId,
    pub name: String,
    pub wait: Wait,
}

/// The run could not go on: tasks wait and nothing will ever wake them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deadlock {
    pub now_ns: Nanos,
    pub blocked: Vec<BlockedTask>,
    /// For each blocked task, its wait chain as text ("A waits on ... held by B; B waits on ...").
    pub chains: Vec<String>,
}

impl fmt::Display for Deadlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "deadlock at {} ms: {} task(s) wait and no event is pending",
            format_ms(self.now_ns as f64),
            self.blocked.len()
        )?;
        for chain in &self.chains {
            writeln!(f, "  {chain}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Deadlock {}

/// The run could not go on: something keeps running without virtual time advancing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Livelock {
    pub now_ns: Nanos,
    /// The task that kept stepping, or `None` when callback events kept scheduling more events
    /// at the same instant.
    pub task: Option<(TaskId, String)>,
    /// Steps (or events) counted at this instant.
    pub steps: u64,
    /// What the task's last step was.
    pub doing: Doing,
}

impl fmt::Display for Livelock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = format_ms(self.now_ns as f64);
        match &self.task {
            Some((id, name)) => write!(
                f,
                "zero-time livelock at {at} ms: task `{name}` ({id}) took {} steps without virtual \
                 time advancing; it keeps doing {} (every operation of a task must cost virtual \
                 time; a workload with no think time over an operation that costs nothing loops \
                 forever)",
                self.steps, self.doing
            ),
            None => write!(
                f,
                "zero-time livelock at {at} ms: {} events were processed without virtual time \
                 advancing (callbacks keep scheduling more at the same instant)",
                self.steps
            ),
        }
    }
}

impl std::error::Error for Livelock {}

/// Why a run could not finish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SimError {
    Deadlock(Deadlock),
    Livelock(Livelock),
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::Deadlock(deadlock) => deadlock.fmt(f),
            SimError::Livelock(livelock) => livelock.fmt(f),
        }
    }
}

impl std::error::Error for SimError {}

impl SimError {
    /// The deadlock report, if this is one.
    pub fn deadlock(&self) -> Option<&Deadlock> {
        match self {
            SimError::Deadlock(deadlock) => Some(deadlock),
            SimError::Livelock(_) => None,
        }
    }

    /// The livelock report, if this is one.
    pub fn livelock(&self) -> Option<&Livelock> {
        match self {
            SimError::Livelock(livelock) => Some(livelock),
            SimError::Deadlock(_) => None,
        }
    }
}

impl Simulation {
    pub fn new(seed: u64) -> Self {
        let core = Core {
            now: Cell::new(0),
            seed,
            events: RefCell::new(EventQueue::new()),
            ready: RefCell::new(VecDeque::new()),
            tasks: RefCell::new(Tasks::default()),
            current: Cell::new(None),
            live_non_daemons: Cell::new(0),
            stop_requested: Cell::new(false),
            events_processed: Cell::new(0),
            wakeups: Cell::new(0),
            lock_names: RefCell::new(Vec::new()),
            progress: RefCell::new(None),
            describers: RefCell::new(Vec::new()),
            step_limit: Cell::new(MAX_STEPS_AT_ONE_INSTANT),
            event_limit: Cell::new(super::budget::current_event_limit()),
            instant_ns: Cell::new(0),
            instant_events: Cell::new(0),
            livelock: RefCell::new(None),
            livelocked: Cell::new(false),
            timeline: RefCell::new(None),
            timeline_on: Cell::new(false),
            samplers: RefCell::new(Vec::new()),
            next_sample_ns: Cell::new(Nanos::MAX),
            run_limit: Cell::new(0),
            run_ends_when_done: Cell::new(false),
            sleep_short_cut: Cell::new(true),
            sleeps_short_cut: Cell::new(0),
            horizon: Cell::new(0),
        };
        Simulation {
            sim: Sim {
                core: Rc::new(core),
            },
        }
    }

    pub fn handle(&self) -> Sim {
        self.sim.clone()
    }

    /// Turns the sleep short cut ([`Sim::advance_to_own_wake`]) on or off; on by default.
    /// Results are the same either way; tests compare the two.
    pub fn set_sleep_short_cut(&self, on: bool) {
        self.sim.core.sleep_short_cut.set(on);
        self.sim.core.horizon.set(0);
    }

    /// Ends every later [`Sim::run_until`] with [`RunEnd::EventLimit`] once the simulation has
    /// processed `events` events in all (checked every [`PROGRESS_EVERY_EVENTS`] events, so
    /// the run may pass the bound by fewer than that many). None by default; a simulation
    /// created inside [`super::budget::with_event_limit`] starts with that scope's bound.
    pub fn set_event_limit(&self, events: u64) {
        self.sim.core.event_limit.set(events);
    }

    /// Replaces [`MAX_STEPS_AT_ONE_INSTANT`] for this simulation (tests use a small bound).
    pub fn set_step_limit(&self, steps: u64) {
        assert!(steps > 0, "the step limit must be positive");
        self.sim.core.step_limit.set(steps);
    }
}

impl std::ops::Deref for Simulation {
    type Target = Sim;
    fn deref(&self) -> &Sim {
        &self.sim
    }
}

impl Drop for Simulation {
    fn drop(&mut self) {
        // Futures hold `Sim` clones; take them out so the core can be freed.
        let futures: Vec<Option<BoxFuture>> = self
            .sim
            .core
            .tasks
            .borrow_mut()
            .hot
            .iter_mut()
            .map(|t| t.future.take())
            .collect();
        drop(futures);
        let events = std::mem::take(&mut *self.sim.core.events.borrow_mut());
        drop(events);
        self.sim.core.progress.borrow_mut().take();
        self.sim.core.describers.borrow_mut().clear();
        self.sim.core.samplers.borrow_mut().clear();
    }
}

impl Sim {
    /// Current virtual time.
    #[inline]
    pub fn now(&self) -> Nanos {
        self.core.now.get()
    }

    /// The run's seed, from which named random streams are derived.
    pub fn seed(&self) -> u64 {
        self.core.seed
    }

    /// A random stream named `name`, independent of every other name (DESIGN.md principle 3).
    pub fn rng(&self, name: &str) -> super::rng::Rng {
        super::rng::Rng::named(self.core.seed, name)
    }

    /// The task being polled, if any.
    #[inline]
    pub fn current_task(&self) -> Option<TaskId> {
        self.core.current.get()
    }

    /// Spawns an application task: the run is not done until it finishes.
    pub fn spawn<T: 'static>(
        &self,
        name: &str,
        future: impl Future<Output = T> + 'static,
    ) -> JoinHandle<T> {
        self.spawn_inner(name, future, false)
    }

    /// Spawns a daemon task (a kernel thread, a server): it may wait forever.
    pub fn spawn_daemon<T: 'static>(
        &self,
        name: &str,
        future: impl Future<Output = T> + 'static,
    ) -> JoinHandle<T> {
        self.spawn_inner(name, future, true)
    }

    fn spawn_inner<T: 'static>(
        &self,
        name: &str,
        future: impl Future<Output = T> + 'static,
        daemon: bool,
    ) -> JoinHandle<T> {
        let done = super::sync::Completion::new();
        let done_in_task = done.clone();
        let sim = self.clone();
        let wrapped = async move {
            let value = future.await;
            done_in_task.complete(&sim, value);
        };
        let id = {
            let mut tasks = self.core.tasks.borrow_mut();
            assert!(
                tasks.hot.len() < MAX_TASKS,
                "task limit {MAX_TASKS} exceeded"
            );
            let id = TaskId(tasks.hot.len() as u32);
            tasks.hot.push(HotTask {
                future: Some(Box::pin(wrapped)),
                block_token: 0,
                woken_token: 0,
                wait: Wait {
                    reason: WaitReason::Sleep,
                    blocker: Blocker::None,
                    holder: None,
                    since_ns: 0,
                },
                spin_ns: self.now(),
                spin_steps: 0,
                spin_step: None,
                state: TaskState::Ready,
                daemon,
                waited: false,
                logging: false,
            });
            tasks.cold.push(ColdTask {
                name: Rc::from(name),
                blocked: BlockedTimes::default(),
                spawned_ns: self.now(),
                finished_ns: None,
                wait_log: None,
            });
            id
        };
        if !daemon {
            self.core
                .live_non_daemons
                .set(self.core.live_non_daemons.get() + 1);
        }
        self.core.ready.borrow_mut().push_back(id);
        self.core.horizon.set(0);
        JoinHandle { task: id, done }
    }

    /// Runs `callback` at virtual time `at` (not before now).
    pub fn schedule(&self, at: Nanos, callback: impl FnOnce(&Sim) + 'static) {
        self.push_event(at, EventKind::Call(Box::new(callback)));
    }

    /// Runs `callback` at virtual time `at` (not before now), like [`Sim::schedule`], for a
    /// callback its owner keeps and schedules many times (the block layer's completion
    /// handler, an event or two per request): the event holds a reference to it, so scheduling
    /// allocates nothing. The callback learns nothing but the time: an owner that may leave
    /// events behind (re-arming earlier) tells its own apart.
    pub fn schedule_shared(&self, at: Nanos, callback: Rc<dyn SharedCallback>) {
        self.push_event(at, EventKind::Shared(callback));
    }

    // Always inlined: a call cost a timer event about 17 instructions of saved registers
    // (cachegrind, `examples/engine_bench timer`).
    #[inline(always)]
    fn push_event(&self, at: Nanos, kind: EventKind) {
        self.push_event_into(&mut self.core.events.borrow_mut(), at, kind);
    }

    /// [`Sim::push_event`] into the borrowed queue.
    #[inline(always)]
    fn push_event_into(&self, events: &mut EventQueue<EventKind>, at: Nanos, kind: EventKind) {
        assert!(
            at >= self.now(),
            "event scheduled in the past: {at} < {}",
            self.now()
        );
        self.core.horizon.set(0);
        assert!(
            events.len() < MAX_PENDING_EVENTS,
            "pending-event limit {MAX_PENDING_EVENTS} exceeded at {} ns",
            self.now()
        );
        events.push(at, kind);
    }

    /// Marks the current task as blocked for `reason` on `blocker` and returns the token that ends
    /// this wait. The caller must then return `Poll::Pending`. Called only from a task.
    #[inline]
    pub fn block_current(
        &self,
        reason: WaitReason,
        blocker: Blocker,
        holder: Option<TaskId>,
    ) -> WakeToken {
        self.block_current_inlined(reason, blocker, holder)
    }

    /// [`Sim::block_current`], always inlined (into [`Sleep::start`], where it was a call).
    #[inline(always)]
    fn block_current_inlined(
        &self,
        reason: WaitReason,
        blocker: Blocker,
        holder: Option<TaskId>,
    ) -> WakeToken {
        let task = self
            .current_task()
            .expect("a blocking call was made outside a task");
        let now = self.now();
        let mut tasks = self.core.tasks.borrow_mut();
        let tasks = &mut *tasks;
        let entry = &mut tasks.hot[task.0 as usize];
        assert_eq!(
            entry.state,
            TaskState::Running,
            "task {} blocks while not running",
            tasks.cold[task.0 as usize].name
        );
        entry.block_token += 1;
        entry.state = TaskState::Blocked;
        entry.waited = true;
        entry.wait = Wait {
            reason,
            blocker,
            holder,
            since_ns: now,
        };
        WakeToken {
            task,
            token: entry.block_token,
        }
    }

    /// Ends the wait named by `token` (if it is still the task's current wait) and makes the task
    /// runnable. Returns whether the wake took effect.
    pub fn wake(&self, token: WakeToken) -> bool {
        if !self.end_wait(token) {
            return false;
        }
        self.core.ready.borrow_mut().push_back(token.task);
        self.core.horizon.set(0);
        true
    }

    /// Ends the wait named by `token` if it is still the task's current wait (the task is then
    /// `Ready`, and the caller queues or polls it); returns whether it was.
    #[inline(always)]
    fn end_wait(&self, token: WakeToken) -> bool {
        let now = self.now();
        let index = token.task.0 as usize;
        let mut tasks = self.core.tasks.borrow_mut();
        let tasks = &mut *tasks;
        let entry = &mut tasks.hot[index];
        if entry.state != TaskState::Blocked || entry.block_token != token.token {
            return false;
        }
        // The wait stays in its slot as the last wait that ended.
        entry.state = TaskState::Ready;
        entry.woken_token = token.token;
        let (reason, since_ns, logging) = (entry.wait.reason, entry.wait.since_ns, entry.logging);
        tasks.cold[index].blocked.add(reason, now - since_ns);
        if logging || self.core.timeline_on.get() {
            self.record_wait_end(tasks, token.task, now);
        }
        self.core.wakeups.set(self.core.wakeups.get() + 1);
        true
    }

    /// Records the wait of `task` that ended at `now` in its wait log and the timeline, where
    /// they are on.
    #[inline(never)]
    fn record_wait_end(&self, tasks: &mut Tasks, task: TaskId, now: Nanos) {
        let index = task.0 as usize;
        let wait = tasks.hot[index].wait;
        if tasks.hot[index].logging {
            if let Some(log) = tasks.cold[index].wait_log.as_mut() {
                log.record(WaitRecord {
                    wait,
                    ended_ns: now,
                });
            }
        }
        // (`timeline_on` says whether the recorder is there, without borrowing it.)
        if !self.core.timeline_on.get() {
            return;
        }
        self.record_timeline_wait(task, wait, now);
    }

    /// Records `wait` of `task`, ended at `now`, in the timeline (there is one).
    #[inline(never)]
    fn record_timeline_wait(&self, task: TaskId, wait: Wait, now: Nanos) {
        if let Some(timeline) = self.core.timeline.borrow_mut().as_mut() {
            timeline.wait(TaskWait {
                task,
                reason: wait.reason,
                blocker: wait.blocker,
                holder: wait.holder,
                start_ns: wait.since_ns,
                end_ns: now,
                unfinished: false,
            });
        }
    }

    /// The current task has just blocked with `token` until `until`: when nothing else can run
    /// before that wake (no ready task, no event due at or before `until`, the run neither at
    /// its limit nor stopping), does at once what the run loop would do after queueing the wake
    /// and popping it again: the clock moved to it and one event counted at a new instant
    /// ([`Sim::enter_event_at`], as the loop does), the wait ended and recorded, the task
    /// counted a step at the new instant and running again. Returns whether it did; results are the same either
    /// way (`sim::tests`: a run with and without the short cut is byte-identical), only the
    /// queue's push and pop and the task's second poll are saved.
    fn advance_to_own_wake(&self, until: Nanos, token: WakeToken) -> bool {
        if !self.own_wake_is_next(until) {
            return false;
        }
        self.take_own_wake(until, token);
        true
    }

    /// Whether a wake of the current task at `until` would be the run loop's next step:
    /// [`Sim::advance_to_own_wake`]'s conditions. Pure: blocking the task does not change them.
    #[inline(always)]
    fn own_wake_is_next(&self, until: Nanos) -> bool {
        let core = &*self.core;
        let processed = core.events_processed.get() + 1;
        // The check that fails most often (another event due first, in any busy run) comes
        // first; the order of these pure checks changes nothing else.
        !(core.events.borrow().peek_time().is_some_and(|t| t <= until)
            || !core.ready.borrow().is_empty()
            || !core.sleep_short_cut.get()
            || until <= self.now()
            || until > core.run_limit.get()
            || core.stop_requested.get()
            || self.livelocked()
            || (core.run_ends_when_done.get() && core.live_non_daemons.get() == 0)
            || processed.is_multiple_of(PROGRESS_EVERY_EVENTS)
            // Samplers run from the loop, outside any task's poll.
            || core.next_sample_ns.get() < until)
    }

    /// The second half of [`Sim::advance_to_own_wake`], once [`Sim::own_wake_is_next`] holds.
    #[inline(always)]
    fn take_own_wake(&self, until: Nanos, token: WakeToken) {
        let core = &*self.core;
        let processed = core.events_processed.get() + 1;
        let at_instant = self.enter_event_at(until);
        debug_assert_eq!(at_instant, 1, "a new instant");
        core.events_processed.set(processed);
        let ended = self.end_wait(token);
        debug_assert!(ended, "the current task's own wait ends");
        let mut tasks = core.tasks.borrow_mut();
        let entry = &mut tasks.hot[token.task.0 as usize];
        let stepped = self.spin(entry, None);
        debug_assert!(stepped, "one step at a new instant");
        entry.state = TaskState::Running;
        core.sleeps_short_cut.set(core.sleeps_short_cut.get() + 1);
    }

    /// A sleep of the current task for `duration` under `reason`, done now when nothing else
    /// can happen before it ends: what awaiting [`Sim::sleep_for`] does then
    /// ([`Sim::advance_to_own_wake`]), without a future. Returns false, nothing changed,
    /// otherwise (the caller then awaits `sleep_for`). For hot callers whose sleeps are short
    /// (a CPU segment, [`super::cpu::Cpu::run_now`]).
    ///
    /// Its check is [`Sim::own_wake_is_next`]'s, made against the cached horizon (see
    /// `Core::horizon`) and found again only when the horizon is unknown or too early; its
    /// step is [`Sim::block_current`] then [`Sim::take_own_wake`] in one borrow of the task
    /// table, without the states in between that nothing can see (nothing runs between the
    /// block and the wake).
    #[inline]
    pub fn sleep_now(&self, duration: Nanos, reason: WaitReason, blocker: Blocker) -> bool {
        let core = &*self.core;
        let now = self.now();
        let until = now.saturating_add(duration);
        let processed = core.events_processed.get() + 1;
        if until >= core.horizon.get() && !self.renew_horizon(until) {
            return false;
        }
        if until <= now || processed.is_multiple_of(PROGRESS_EVERY_EVENTS) {
            return false;
        }
        debug_assert!(self.own_wake_is_next(until), "the horizon is a lower bound");
        self.take_sleeps_now(now, duration, 1, reason, blocker);
        true
    }

    /// `n` sleeps of `duration` each, back to back, done now when nothing else can happen
    /// before the last ends: what `n` calls of [`Sim::sleep_now`] in a row do when every one
    /// of them succeeds (the clock at the last end, `n` events, wake-ups and short cuts
    /// counted, the blocked time, each wait in the log and the timeline, the task's token
    /// advanced `n` times), at the cost of one check. Returns false, nothing changed,
    /// otherwise: also when only some of them could; the caller then does them one by one.
    /// Why: a run of pages copied is a run of CPU segments with nothing between them.
    pub fn sleep_now_n(
        &self,
        duration: Nanos,
        n: u64,
        reason: WaitReason,
        blocker: Blocker,
    ) -> bool {
        if n <= 1 {
            return n == 0 || self.sleep_now(duration, reason, blocker);
        }
        let core = &*self.core;
        let now = self.now();
        let Some(until) = duration
            .checked_mul(n)
            .and_then(|total| now.checked_add(total))
        else {
            return false;
        };
        // None of the events counted may be a progress report's (a multiple of the period).
        let processed = core.events_processed.get();
        let period = PROGRESS_EVERY_EVENTS;
        if duration == 0 || processed % period + n >= period {
            return false;
        }
        if until >= core.horizon.get() && !self.renew_horizon(until) {
            return false;
        }
        debug_assert!(self.own_wake_is_next(until), "the horizon is a lower bound");
        self.take_sleeps_now(now, duration, n, reason, blocker);
        true
    }

    /// Finds `Core::horizon` again; returns whether `until` is before it.
    #[inline(never)]
    fn renew_horizon(&self, until: Nanos) -> bool {
        let horizon = self.exact_horizon();
        self.core.horizon.set(horizon);
        until < horizon
    }

    /// The earliest end of a sleep of the current task that cannot end at once, as far as
    /// the pending events, the run's limit, the samplers, the ready queue and the run's flags
    /// go (0 when one of these stops every short cut): `until < exact_horizon()` is
    /// [`Sim::own_wake_is_next`]'s checks but the clock's and the progress report's, except
    /// that a sleep until `Nanos::MAX` is never short-cut.
    fn exact_horizon(&self) -> Nanos {
        let core = &*self.core;
        if !core.ready.borrow().is_empty()
            || !core.sleep_short_cut.get()
            || core.stop_requested.get()
            || self.livelocked()
            || (core.run_ends_when_done.get() && core.live_non_daemons.get() == 0)
        {
            return 0;
        }
        let event = core.events.borrow().peek_time().unwrap_or(Nanos::MAX);
        event
            .min(core.run_limit.get().saturating_add(1))
            .min(core.next_sample_ns.get().saturating_add(1))
    }

    /// [`Sim::sleep_now`]'s step once its check holds, `n` times (`duration` each, back to
    /// back; [`Sim::sleep_now_n`]): what [`Sim::block_current`] then [`Sim::take_own_wake`]
    /// do, `n` times, with the same end state. The clock goes from `now` to `until`, a new
    /// instant (the last event's instant and the task's last step are at or before `now`), so
    /// both counts start again at 1; the waits before the last leave only their counts, their
    /// blocked time and their records in the wait log and the timeline.
    #[inline(always)]
    fn take_sleeps_now(
        &self,
        now: Nanos,
        duration: Nanos,
        n: u64,
        reason: WaitReason,
        blocker: Blocker,
    ) {
        let until = now + duration * n;
        let core = &*self.core;
        let task = self
            .current_task()
            .expect("a blocking call was made outside a task");
        debug_assert!(core.instant_ns.get() <= now && now < until);
        core.now.set(until);
        core.instant_ns.set(until);
        core.instant_events.set(1);
        core.events_processed.set(core.events_processed.get() + n);
        core.wakeups.set(core.wakeups.get() + n);
        core.sleeps_short_cut.set(core.sleeps_short_cut.get() + n);
        let mut tasks = core.tasks.borrow_mut();
        let tasks = &mut *tasks;
        let index = task.0 as usize;
        let entry = &mut tasks.hot[index];
        assert_eq!(
            entry.state,
            TaskState::Running,
            "task {} blocks while not running",
            tasks.cold[index].name
        );
        debug_assert!(entry.spin_ns <= now && core.step_limit.get() >= 1);
        // Blocked and woken: a new token, ended by a wake; running again.
        entry.block_token += n;
        entry.woken_token = entry.block_token;
        entry.waited = true;
        let wait_at = |since_ns| Wait {
            reason,
            blocker,
            holder: None,
            since_ns,
        };
        entry.wait = wait_at(until - duration);
        // One step at the new instant, a poll's.
        entry.spin_ns = until;
        entry.spin_steps = 1;
        entry.spin_step = None;
        let logging = entry.logging;
        let cold = &mut tasks.cold[index];
        cold.blocked.add(reason, until - now);
        if logging {
            if let Some(log) = cold.wait_log.as_mut() {
                for i in 0..n {
                    let since = now + i * duration;
                    log.record(WaitRecord {
                        wait: wait_at(since),
                        ended_ns: since + duration,
                    });
                }
            }
        }
        if core.timeline_on.get() {
            for i in 0..n {
                let since = now + i * duration;
                self.record_timeline_wait(task, wait_at(since), since + duration);
            }
        }
    }

    /// The clock moves to `time` for one event: counted at its instant (livelock detection:
    /// the count starts again at a new instant). Returns the count at this instant.
    #[inline]
    fn enter_event_at(&self, time: Nanos) -> u64 {
        let core = &*self.core;
        core.now.set(time);
        if core.instant_ns.get() != time {
            core.instant_ns.set(time);
            core.instant_events.set(0);
        }
        let at_instant = core.instant_events.get() + 1;
        core.instant_events.set(at_instant);
        at_instant
    }

    /// Wakes `token` at virtual time `at`.
    #[inline]
    pub fn wake_at(&self, at: Nanos, token: WakeToken) {
        self.push_event(at, EventKind::Wake(token));
    }

    /// Whether the current task's wait `token` has ended by a wake (used by primitives on re-poll).
    #[inline]
    pub fn was_woken(&self, token: WakeToken) -> bool {
        let tasks = self.core.tasks.borrow();
        let entry = &tasks.hot[token.task.0 as usize];
        entry.woken_token == token.token && entry.state == TaskState::Running
    }

    /// Sleeps for `duration` of virtual time (a voluntary wait).
    #[inline]
    pub fn sleep(&self, duration: Nanos) -> Sleep<'_> {
        self.sleep_for(duration, WaitReason::Sleep, Blocker::None)
    }

    /// Sleeps for `duration`, accounted under `reason` (e.g. a throttling pause).
    #[inline]
    pub fn sleep_for(&self, duration: Nanos, reason: WaitReason, blocker: Blocker) -> Sleep<'_> {
        Sleep {
            sim: self,
            until: self.now().saturating_add(duration),
            reason,
            blocker,
            token: None,
        }
    }

    /// Gives other runnable tasks at the same virtual time a turn.
    pub fn yield_now(&self) -> Sleep<'_> {
        Sleep {
            sim: self,
            until: self.now(),
            reason: WaitReason::Sleep,
            blocker: Blocker::None,
            token: None,
        }
    }

    /// A step of the current task that does not block: a workload takes one at each system call
    /// (`op` names it), so that a loop of calls that cost no virtual time is caught as a
    /// [`Livelock`] instead of spinning forever inside one poll. Ready at once unless the task
    /// has taken [`MAX_STEPS_AT_ONE_INSTANT`] steps at this instant; then the run ends with the
    /// livelock and the task never resumes.
    pub fn step(&self, op: &'static str) -> Step<'_> {
        Step {
            sim: self,
            op,
            stuck: false,
        }
    }

    /// Counts a step of `task` at the current instant; returns false (and records the
    /// livelock) past the limit.
    fn count_step(&self, task: TaskId, op: &'static str) -> bool {
        let mut tasks = self.core.tasks.borrow_mut();
        if self.spin(&mut tasks.hot[task.0 as usize], Some(op)) {
            return true;
        }
        let livelock = Self::task_livelock(&tasks, task, self.now());
        drop(tasks);
        self.record_livelock(livelock);
        false
    }

    /// Counts a step of `entry` at the current instant (`step`: a [`Sim::step`] of this system
    /// call, or `None`: a poll); false past the limit.
    #[inline]
    fn spin(&self, entry: &mut HotTask, step: Option<&'static str>) -> bool {
        let now = self.now();
        if entry.spin_ns != now {
            entry.spin_ns = now;
            entry.spin_steps = 0;
        }
        entry.spin_steps += 1;
        entry.spin_step = step;
        entry.spin_steps <= self.core.step_limit.get()
    }

    /// The livelock of `task`, which has just taken one step too many at `now_ns`.
    #[cold]
    fn task_livelock(tasks: &Tasks, task: TaskId, now_ns: Nanos) -> Livelock {
        let entry = &tasks.hot[task.0 as usize];
        Livelock {
            now_ns,
            task: Some((task, tasks.cold[task.0 as usize].name.to_string())),
            steps: entry.spin_steps,
            doing: entry.doing(),
        }
    }

    /// Keeps the first livelock found; the run ends with it at the next chance.
    #[cold]
    fn record_livelock(&self, livelock: Livelock) {
        self.core.livelock.borrow_mut().get_or_insert(livelock);
        self.core.livelocked.set(true);
        self.core.horizon.set(0);
    }

    /// Whether a livelock was found (the run ends at the next chance).
    #[inline]
    fn livelocked(&self) -> bool {
        self.core.livelocked.get()
    }

    /// Asks the run loop to return [`RunEnd::Stopped`] after the current step.
    pub fn stop(&self) {
        self.core.stop_requested.set(true);
        self.core.horizon.set(0);
    }

    /// A fresh id for a lock called `name`, so waits on it can name it.
    pub fn new_lock_id(&self, name: &str) -> u32 {
        let mut names = self.core.lock_names.borrow_mut();
        names.push(Rc::from(name));
        (names.len() - 1) as u32
    }

    /// The name a lock was created with.
    pub fn lock_name(&self, id: u32) -> String {
        self.core
            .lock_names
            .borrow()
            .get(id as usize)
            .map_or_else(|| "?".to_string(), |n| n.to_string())
    }

    /// Lets a layer describe the blockers it owns (e.g. the block layer its requests: how long
    /// one sat in the elevator and on the device). The first describer with an answer wins.
    pub fn add_blocker_describer(&self, describer: impl Fn(Blocker) -> Option<String> + 'static) {
        self.core.describers.borrow_mut().push(Box::new(describer));
    }

    /// A blocker as text, with what the engine and the layers know of it.
    pub fn describe_blocker(&self, blocker: Blocker) -> String {
        if let Blocker::Lock(id) = blocker {
            return format!("{blocker} ({})", self.lock_name(id));
        }
        let described = self
            .core
            .describers
            .borrow()
            .iter()
            .find_map(|describe| describe(blocker));
        described.unwrap_or_else(|| blocker.to_string())
    }

    /// Installs a hook called with the virtual time every few tens of thousands of events.
    pub fn set_progress_hook(&self, hook: impl FnMut(Nanos) + 'static) {
        *self.core.progress.borrow_mut() = Some(Box::new(hook));
    }

    /// Sleeps that ended without going through the event queue ([`Sim::advance_to_own_wake`]);
    /// they are counted in [`Sim::events_processed`] too.
    pub fn sleeps_short_cut(&self) -> u64 {
        self.core.sleeps_short_cut.get()
    }

    /// Events processed so far (timers and callbacks).
    pub fn events_processed(&self) -> u64 {
        self.core.events_processed.get()
    }

    /// Wakes that took effect so far.
    pub fn wakeups(&self) -> u64 {
        self.core.wakeups.get()
    }

    pub fn task_name(&self, task: TaskId) -> String {
        self.core.tasks.borrow().cold[task.0 as usize]
            .name
            .to_string()
    }

    /// Time `task` has spent blocked, per reason, including its current wait so far.
    pub fn blocked_times(&self, task: TaskId) -> BlockedTimes {
        let tasks = self.core.tasks.borrow();
        let mut times = tasks.cold[task.0 as usize].blocked;
        if let Some(wait) = tasks.hot[task.0 as usize].current_wait() {
            times.add(wait.reason, self.now() - wait.since_ns);
        }
        times
    }

    /// Starts recording every wait of `task` that ends from now on (replacing any log in
    /// progress): how an operation's latency is explained wait by wait.
    pub fn start_wait_log(&self, task: TaskId) {
        let mut tasks = self.core.tasks.borrow_mut();
        tasks.cold[task.0 as usize].wait_log = Some(WaitLog::default());
        tasks.hot[task.0 as usize].logging = true;
    }

    /// Stops recording `task`'s waits and returns what was recorded.
    pub fn take_wait_log(&self, task: TaskId) -> WaitLog {
        let mut tasks = self.core.tasks.borrow_mut();
        tasks.hot[task.0 as usize].logging = false;
        tasks.cold[task.0 as usize]
            .wait_log
            .take()
            .unwrap_or_default()
    }

    /// The wait `task` is in, if it is blocked.
    pub fn current_wait(&self, task: TaskId) -> Option<Wait> {
        self.core.tasks.borrow().hot[task.0 as usize].current_wait()
    }

    pub fn is_finished(&self, task: TaskId) -> bool {
        self.core.tasks.borrow().hot[task.0 as usize].state == TaskState::Finished
    }

    /// The lifetime of a task: spawn time and, once finished, finish time.
    pub fn task_lifetime(&self, task: TaskId) -> (Nanos, Option<Nanos>) {
        let tasks = self.core.tasks.borrow();
        let entry = &tasks.cold[task.0 as usize];
        (entry.spawned_ns, entry.finished_ns)
    }

    /// The chain of waits starting at `task`: "A waits on lock_buffer buffer #9 held by B; B waits
    /// on ...". Stops at a task that is not blocked, at a wait with no known holder, or at a cycle.
    pub fn explain_wait(&self, task: TaskId) -> String {
        let mut text = String::new();
        let mut seen = Vec::new();
        let mut at = Some(task);
        let now = self.now();
        while let Some(current) = at {
            if !text.is_empty() {
                text.push_str("; ");
            }
            let name = self.task_name(current);
            if seen.contains(&current) {
                text.push_str(&format!("{name} ({current}) closes the cycle"));
                break;
            }
            seen.push(current);
            match self.current_wait(current) {
                None => {
                    text.push_str(&format!("{name} ({current}) is not blocked"));
                    break;
                }
                Some(wait) => {
                    text.push_str(&format!(
                        "{name} ({current}) waits {} ms in {} on {}",
                        format_ms((now - wait.since_ns) as f64),
                        wait.reason,
                        self.describe_blocker(wait.blocker)
                    ));
                    if let Some(holder) = wait.holder {
                        text.push_str(&format!(" held by {} ({holder})", self.task_name(holder)));
                    }
                    at = wait.holder;
                }
            }
        }
        text
    }

    /// Runs until virtual time `limit`, until every non-daemon task has finished (when
    /// `end_when_tasks_done`), or until nothing is left to do. A state in which tasks wait and
    /// nothing can wake them is a [`Deadlock`]; a task (or a chain of events) that keeps running
    /// without virtual time advancing is a [`Livelock`]. Either ends the run for good.
    pub fn run_until(&self, limit: Nanos, end_when_tasks_done: bool) -> Result<RunEnd, SimError> {
        if self.livelocked() {
            return Err(self.livelock_error());
        }
        self.core.run_limit.set(limit);
        self.core.run_ends_when_done.set(end_when_tasks_done);
        self.core.horizon.set(0);
        let end = self.run_events(limit, end_when_tasks_done);
        self.core.run_limit.set(0);
        self.core.horizon.set(0);
        super::budget::note_run_end(&end);
        end
    }

    /// The loop of [`Sim::run_until`].
    fn run_events(&self, limit: Nanos, end_when_tasks_done: bool) -> Result<RunEnd, SimError> {
        // A task woken by the last event, to poll before the ready queue (which is empty then).
        let mut woken = None;
        loop {
            self.run_ready(woken.take());
            if self.livelocked() {
                return Err(self.livelock_error());
            }
            if self.core.stop_requested.get() {
                self.core.stop_requested.set(false);
                return Ok(RunEnd::Stopped);
            }
            if end_when_tasks_done && self.core.live_non_daemons.get() == 0 {
                return Ok(RunEnd::AllTasksDone);
            }
            let popped = self.core.events.borrow_mut().pop_until(limit);
            let (event_time, event_kind) = match popped {
                Popped::Event(time, kind) => (time, kind),
                Popped::Later => {
                    self.core.now.set(limit.max(self.now()));
                    return Ok(RunEnd::TimeLimit);
                }
                Popped::Empty => {
                    let report = self.deadlock_report();
                    if report.blocked.is_empty() {
                        return Ok(RunEnd::Idle);
                    }
                    return Err(SimError::Deadlock(report));
                }
            };
            debug_assert!(event_time >= self.now(), "event queue out of order");
            if self.core.next_sample_ns.get() < event_time {
                self.sample_counters_before(event_time);
            }
            let at_instant = self.enter_event_at(event_time);
            if at_instant > self.core.step_limit.get() {
                // A timer that wakes a task at once (a yield, a zero sleep) names that task.
                let (task, doing) = match &event_kind {
                    EventKind::Wake(token) => {
                        let tasks = self.core.tasks.borrow();
                        let entry = &tasks.hot[token.task.0 as usize];
                        // Every woken task has been polled: a task not blocked did its last
                        // step at its last poll or system call.
                        let doing = entry
                            .current_wait()
                            .map_or_else(|| entry.doing(), |w| Doing::Woken(w.reason, w.blocker));
                        (Some((token.task, self.task_name(token.task))), doing)
                    }
                    EventKind::Call(_) | EventKind::Shared(_) => (None, Doing::Started),
                };
                let livelock = Livelock {
                    now_ns: event_time,
                    task,
                    steps: at_instant,
                    doing,
                };
                *self.core.livelock.borrow_mut() = Some(livelock.clone());
                self.core.livelocked.set(true);
                self.core.horizon.set(0);
                return Err(SimError::Livelock(livelock));
            }
            let processed = self.core.events_processed.get() + 1;
            self.core.events_processed.set(processed);
            match event_kind {
                EventKind::Wake(token) => {
                    // The ready queue is empty here (`run_ready` emptied it), so the task is
                    // polled first at the next turn without going through the queue.
                    debug_assert!(self.core.ready.borrow().is_empty());
                    if self.end_wait(token) {
                        woken = Some(token.task);
                    }
                }
                EventKind::Call(callback) => callback(self),
                EventKind::Shared(callback) => callback.call(self),
            }
            if processed.is_multiple_of(PROGRESS_EVERY_EVENTS) {
                if let Some(hook) = self.core.progress.borrow_mut().as_mut() {
                    hook(self.now());
                }
                if processed >= self.core.event_limit.get() {
                    return Ok(RunEnd::EventLimit);
                }
            }
        }
    }

    /// The livelock found, as the run's error.
    #[cold]
    fn livelock_error(&self) -> SimError {
        SimError::Livelock(
            self.core
                .livelock
                .borrow()
                .clone()
                .expect("a livelock was found"),
        )
    }

    /// Calls each sampler at each of its sample times before `until`: the state then is the
    /// state now, since no event lies between.
    fn sample_counters_before(&self, until: Nanos) {
        let mut samplers = std::mem::take(&mut *self.core.samplers.borrow_mut());
        for slot in &mut samplers {
            while slot.next_ns < until && slot.next_ns <= slot.end_ns {
                (slot.sample)(self, slot.next_ns);
                slot.next_ns = slot.next_ns.saturating_add(slot.period_ns);
            }
            if slot.next_ns > slot.end_ns {
                slot.next_ns = Nanos::MAX;
            }
        }
        let mut slots = self.core.samplers.borrow_mut();
        // A sampler added while sampling (none today) is kept.
        samplers.append(&mut slots);
        *slots = samplers;
        self.core
            .next_sample_ns
            .set(slots.iter().map(|s| s.next_ns).min().unwrap_or(Nanos::MAX));
        self.core.horizon.set(0);
    }

    /// Calls `sample` with the simulation and the time at every multiple of `period_ns` in
    /// `[start_ns, end_ns]`, between events (it reads state; it must not block or schedule),
    /// until [`Sim::finish_samplers`].
    pub fn add_sampler(
        &self,
        start_ns: Nanos,
        end_ns: Nanos,
        period_ns: Nanos,
        sample: impl FnMut(&Sim, Nanos) + 'static,
    ) {
        assert!(period_ns > 0, "a sampler needs a period");
        let next_ns = start_ns.next_multiple_of(period_ns);
        self.core.samplers.borrow_mut().push(SamplerSlot {
            next_ns,
            period_ns,
            end_ns,
            sample: Box::new(sample),
        });
        if next_ns < self.core.next_sample_ns.get() {
            self.core.next_sample_ns.set(next_ns);
            self.core.horizon.set(0);
        }
    }

    /// Takes the samples due up to now (inclusive) and removes every sampler.
    pub fn finish_samplers(&self) {
        if self.core.next_sample_ns.get() <= self.now() {
            self.sample_counters_before(self.now().saturating_add(1));
        }
        self.core.samplers.borrow_mut().clear();
        self.core.next_sample_ns.set(Nanos::MAX);
        self.core.horizon.set(0);
    }

    /// Starts recording the run's [`Timeline`].
    pub fn enable_timeline(&self, config: TimelineConfig) {
        *self.core.timeline.borrow_mut() = Some(TimelineRecorder::new(config));
        self.core.timeline_on.set(true);
    }

    /// Whether a timeline is being recorded (callers skip building records otherwise).
    #[inline]
    pub fn timeline_enabled(&self) -> bool {
        self.core.timeline.borrow().is_some()
    }

    /// Installs the function that samples counters into the timeline at its period and in its
    /// window (see [`Sim::timeline_counter`]); nothing without a timeline or with period 0.
    pub fn set_timeline_sampler(&self, sampler: impl FnMut(&Sim, Nanos) + 'static) {
        let config = self.core.timeline.borrow().as_ref().map(|t| t.config);
        if let Some(config) = config.filter(|c| c.counter_period_ns > 0) {
            self.add_sampler(
                config.start_ns,
                config.end_ns,
                config.counter_period_ns,
                sampler,
            );
        }
    }

    /// Records a counter's value at `at_ns`.
    pub fn timeline_counter(&self, at_ns: Nanos, name: &'static str, value: f64) {
        if let Some(timeline) = self.core.timeline.borrow_mut().as_mut() {
            timeline.counter(CounterSample { name, at_ns, value });
        }
    }

    /// A slice of `task` begins now: its waits from now on are not merged with earlier ones.
    pub fn timeline_begin(&self, task: TaskId) {
        if let Some(timeline) = self.core.timeline.borrow_mut().as_mut() {
            timeline.boundary(task);
        }
    }

    /// Records a named slice of `task` that began at `start_ns` and ends now.
    pub fn timeline_slice(
        &self,
        task: TaskId,
        kind: super::timeline::SliceKind,
        name: impl FnOnce() -> String,
        start_ns: Nanos,
    ) {
        if let Some(timeline) = self.core.timeline.borrow_mut().as_mut() {
            timeline.slice(TaskSlice {
                task,
                kind,
                name: name(),
                start_ns,
                end_ns: self.now(),
                unfinished: false,
            });
        }
    }

    /// Records a slice still in progress at the end of the run.
    pub fn timeline_unfinished_slice(
        &self,
        task: TaskId,
        kind: super::timeline::SliceKind,
        name: String,
        start_ns: Nanos,
    ) {
        if let Some(timeline) = self.core.timeline.borrow_mut().as_mut() {
            timeline.slice(TaskSlice {
                task,
                kind,
                name,
                start_ns,
                end_ns: self.now(),
                unfinished: true,
            });
        }
    }

    /// Records a completed block request's life.
    pub fn timeline_request(&self, request: impl FnOnce() -> RequestLife) {
        if let Some(timeline) = self.core.timeline.borrow_mut().as_mut() {
            timeline.request(request());
        }
    }

    /// Records that every command slot of `device` was held from `start_ns` until now
    /// ([`super::timeline::SlotsFull`]).
    pub fn timeline_slots_full(&self, device: &str, start_ns: Nanos) {
        if let Some(timeline) = self.core.timeline.borrow_mut().as_mut() {
            timeline.slots_full(super::timeline::SlotsFull {
                device: device.to_string(),
                start_ns,
                end_ns: self.now(),
            });
        }
    }

    /// Records that `app` is in the foreground from now on.
    pub fn timeline_foreground(&self, app: &str) {
        if let Some(timeline) = self.core.timeline.borrow_mut().as_mut() {
            timeline.foreground(self.now(), app);
        }
    }

    /// Ends the recording: takes the samples due (ending every sampler, see
    /// [`Sim::finish_samplers`]), records every wait still going on
    /// as unfinished, and returns the timeline (`None` if none was recorded). Call it after
    /// the results recorder has recorded the unfinished system calls.
    pub fn take_timeline(&self) -> Option<Timeline> {
        self.finish_samplers();
        let mut recorder = self.core.timeline.borrow_mut().take()?;
        self.core.timeline_on.set(false);
        let now = self.now();
        for (index, task) in self.core.tasks.borrow().hot.iter().enumerate() {
            if let Some(wait) = task.current_wait() {
                recorder.wait(TaskWait {
                    task: TaskId(index as u32),
                    reason: wait.reason,
                    blocker: wait.blocker,
                    holder: wait.holder,
                    start_ns: wait.since_ns,
                    end_ns: now,
                    unfinished: true,
                });
            }
        }
        Some(recorder.timeline)
    }

    /// The ids and names of every task spawned so far, in spawn order.
    pub fn task_names(&self) -> Vec<(TaskId, String)> {
        self.core
            .tasks
            .borrow()
            .cold
            .iter()
            .enumerate()
            .map(|(i, t)| (TaskId(i as u32), t.name.to_string()))
            .collect()
    }

    /// Polls `first` (a task just made ready, not queued), then the ready queue's tasks in
    /// order until it is empty.
    fn run_ready(&self, mut first: Option<TaskId>) {
        loop {
            if self.livelocked() {
                return;
            }
            let next = match first.take() {
                Some(task) => Some(task),
                None => self.core.ready.borrow_mut().pop_front(),
            };
            let Some(task) = next else { return };
            self.poll_task(task);
        }
    }

    fn poll_task(&self, task: TaskId) {
        let index = task.0 as usize;
        // One borrow of the task table for the check, the step count and taking the future.
        let mut future = {
            let mut tasks = self.core.tasks.borrow_mut();
            let entry = &mut tasks.hot[index];
            if entry.state != TaskState::Ready {
                return;
            }
            if !self.spin(entry, None) {
                // Left Ready and off the ready queue: the run ends with the livelock.
                let livelock = Self::task_livelock(&tasks, task, self.now());
                drop(tasks);
                self.record_livelock(livelock);
                return;
            }
            entry.state = TaskState::Running;
            entry.future.take().expect("a ready task has its future")
        };
        self.core.current.set(Some(task));
        let mut context = Context::from_waker(Waker::noop());
        let poll = future.as_mut().poll(&mut context);
        self.core.current.set(None);
        let mut guard = self.core.tasks.borrow_mut();
        let tasks = &mut *guard;
        let entry = &mut tasks.hot[index];
        match poll {
            Poll::Ready(()) => {
                assert!(
                    entry.state != TaskState::Blocked,
                    "task {} finished while blocked",
                    tasks.cold[index].name
                );
                entry.state = TaskState::Finished;
                tasks.cold[index].finished_ns = Some(self.now());
                if !entry.daemon {
                    self.core
                        .live_non_daemons
                        .set(self.core.live_non_daemons.get() - 1);
                    self.core.horizon.set(0);
                }
                drop(guard);
                drop(future);
            }
            Poll::Pending => {
                entry.future = Some(future);
                match entry.state {
                    // Blocked: waits for a wake. Ready: woken while still running (it woke itself).
                    TaskState::Blocked | TaskState::Ready => {}
                    TaskState::Running => panic!(
                        "task {} returned Pending without blocking through the engine",
                        tasks.cold[index].name
                    ),
                    TaskState::Finished => unreachable!("a finished task was polled"),
                }
            }
        }
    }

    fn deadlock_report(&self) -> Deadlock {
        let blocked: Vec<BlockedTask> = self
            .core
            .tasks
            .borrow()
            .hot
            .iter()
            .enumerate()
            .filter(|(_, t)| t.state == TaskState::Blocked && !t.daemon)
            .map(|(i, t)| BlockedTask {
                task: TaskId(i as u32),
                name: self.task_name(TaskId(i as u32)),
                wait: t.wait,
            })
            .collect();
        let chains = blocked.iter().map(|b| self.explain_wait(b.task)).collect();
        Deadlock {
            now_ns: self.now(),
            blocked,
            chains,
        }
    }
}

/// The future returned by [`Sim::sleep`]. It borrows the handle it was made from (no reference
/// count is taken per sleep).
pub struct Sleep<'a> {
    sim: &'a Sim,
    until: Nanos,
    reason: WaitReason,
    blocker: Blocker,
    token: Option<WakeToken>,
}

impl Future for Sleep<'_> {
    type Output = ();
    /// The second poll (the usual one after a wake) is inlined into the task; the first, which
    /// blocks and queues the timer, is not.
    #[inline]
    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        match self.token {
            Some(token) => {
                if self.sim.was_woken(token) {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            }
            None => {
                if self.start() {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            }
        }
    }
}

impl Sleep<'_> {
    /// Blocks the current task and queues its wake at `until`; returns true when the sleep
    /// ended at once instead ([`Sim::advance_to_own_wake`]: nothing else was due before it).
    ///
    /// The short cut's first check (an event due first, the usual answer in a busy run) and
    /// the timer's push share one borrow of the queue.
    #[inline(never)]
    fn start(&mut self) -> bool {
        let token = self
            .sim
            .block_current_inlined(self.reason, self.blocker, None);
        {
            let mut events = self.sim.core.events.borrow_mut();
            if events.peek_time().is_some_and(|t| t <= self.until) {
                // `own_wake_is_next` fails: `wake_at` under this borrow.
                self.sim
                    .push_event_into(&mut events, self.until, EventKind::Wake(token));
                self.token = Some(token);
                return false;
            }
        }
        if self.sim.advance_to_own_wake(self.until, token) {
            return true;
        }
        self.sim.wake_at(self.until, token);
        self.token = Some(token);
        false
    }
}

/// The future returned by [`Sim::step`], borrowing the handle like [`Sleep`].
pub struct Step<'a> {
    sim: &'a Sim,
    op: &'static str,
    stuck: bool,
}

impl Future for Step<'_> {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        if self.stuck {
            // Only a livelocked run polls this again, and it is over.
            return Poll::Pending;
        }
        let task = self
            .sim
            .current_task()
            .expect("Sim::step is awaited inside a task");
        if self.sim.count_step(task, self.op) {
            return Poll::Ready(());
        }
        // Park the task for good; the run loop sees the livelock and ends the run.
        self.stuck = true;
        self.sim
            .block_current(WaitReason::Sleep, Blocker::None, None);
        Poll::Pending
    }
}

/// Waits for a spawned task and yields its output.
pub struct JoinHandle<T> {
    task: TaskId,
    done: super::sync::Completion<T>,
}

impl<T: Clone + 'static> JoinHandle<T> {
    pub fn task(&self) -> TaskId {
        self.task
    }

    /// Waits for the task to finish and returns a copy of its output.
    pub async fn join(&self, sim: &Sim) -> T {
        self.done
            .wait_with_holder(
                sim,
                WaitReason::Join,
                Blocker::Task(self.task),
                Some(self.task),
            )
            .await
    }

    pub fn result(&self) -> Option<T> {
        self.done.peek()
    }
}
