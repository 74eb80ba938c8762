//! Runs scenarios: builds the stack of each variant, starts the apps on the timeline, runs the
//! simulation and collects results. Runs of different variants and seeds are independent and may
//! go in parallel threads; one run is single-threaded and deterministic.

use crate::app::AppContext;
use crate::report::recorder::{blocked_map, Recorder};
use crate::report::results::{RunResult, ScenarioResults, RESULTS_SCHEMA, RESULTS_VERSION};
use crate::scenario::{
    EndCondition, Role, Scenario, TimelineAction, TimelineEvent, Variant, WorkloadConfig,
};
use crate::sim::{BlockedTimes, Rng, RunEnd, Sim, Simulation, TaskId};
use crate::stack::Stack;
use crate::task::ForegroundState;
use crate::units::Nanos;
use crate::workload::fio::JobState;
use crate::workload::{file, ops, toy};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// A run that could not finish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunError {
    pub scenario: String,
    pub variant: String,
    pub seed: u64,
    pub message: String,
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "scenario `{}`, variant `{}`, seed {}: {}",
            self.scenario, self.variant, self.seed, self.message
        )
    }
}

impl std::error::Error for RunError {}

/// Receives (run index, virtual time reached) now and then, from any worker thread.
pub type ProgressFn = Arc<dyn Fn(usize, Nanos) + Send + Sync>;

#[derive(Clone, Default)]
pub struct RunOptions {
    /// Replaces the scenario's seeds.
    pub seeds: Option<Vec<u64>>,
    /// Worker threads for independent runs; 0 = one per core.
    pub threads: usize,
    pub progress: Option<ProgressFn>,
    /// Check the page cache's, the journal's and the block layer's invariants as the runs go
    /// (always on in debug builds; `mobistack run --check` in release): a violation ends the
    /// run with an error.
    pub check: bool,
    /// Record each run's timeline for a Perfetto trace (`mobistack run --perfetto`).
    pub timeline: Option<crate::sim::timeline::TimelineConfig>,
}

/// The (variant, seed) pairs a scenario runs, in result order.
pub fn jobs(scenario: &Scenario, options: &RunOptions) -> Vec<(usize, u64)> {
    let seeds = options.seeds.as_ref().unwrap_or(&scenario.seeds);
    (0..scenario.variants.len())
        .flat_map(|v| seeds.iter().map(move |&s| (v, s)))
        .collect()
}

/// Runs every variant with every seed. Results come in (variant, seed) order whatever the thread
/// interleaving; the first failed run (in that order) is the error.
pub fn run_scenario(
    scenario: &Scenario,
    options: &RunOptions,
) -> Result<ScenarioResults, RunError> {
    let jobs = jobs(scenario, options);
    let threads = match options.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
    .min(jobs.len())
    .max(1);
    let next = AtomicUsize::new(0);
    let slots: Mutex<Vec<Option<Result<RunResult, RunError>>>> = Mutex::new(vec![None; jobs.len()]);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                let Some(&(variant, seed)) = jobs.get(index) else {
                    break;
                };
                let progress = options.progress.clone();
                let hook = move |now: Nanos| {
                    if let Some(p) = &progress {
                        p(index, now)
                    }
                };
                let result = run_one_traced(
                    scenario,
                    &scenario.variants[variant],
                    seed,
                    options.check,
                    options.timeline,
                    hook,
                );
                slots.lock().expect("no worker panicked")[index] = Some(result);
            });
        }
    });
    let mut runs = Vec::with_capacity(jobs.len());
    for slot in slots.into_inner().expect("no worker panicked") {
        runs.push(slot.expect("every job ran")?);
    }
    Ok(ScenarioResults {
        schema: RESULTS_SCHEMA,
        version: RESULTS_VERSION,
        scenario: scenario.name.clone(),
        description: scenario.description.clone(),
        duration_ns: scenario.duration,
        runs,
    })
}

struct AppRuntime {
    context: AppContext,
    tasks: RefCell<Vec<TaskId>>,
    started: std::cell::Cell<bool>,
}

/// Spawns the tasks of app `index`'s workload.
fn start_app(sim: &Sim, scenario: &Scenario, app: &AppRuntime, index: usize) {
    if app.started.replace(true) {
        return;
    }
    let ctx = app.context.clone();
    let mut tasks = app.tasks.borrow_mut();
    match &scenario.apps[index].workload {
        WorkloadConfig::ToyIo(config) => {
            for stream in 0..config.depth {
                let handle = sim.spawn(
                    &format!("{}/io{stream}", ctx.name),
                    toy::toy_io_stream(ctx.clone(), config.clone(), stream),
                );
                tasks.push(handle.task());
            }
        }
        WorkloadConfig::ToyLocks(config) => {
            let handle = sim.spawn(&ctx.name, toy::toy_locks(ctx.clone(), config.clone()));
            tasks.push(handle.task());
        }
        WorkloadConfig::Fio(config) => {
            // The job was validated against the device; laying out a buffered job's file can
            // still fail (the file system is full): counted, like a file workload's errno.
            match crate::workload::fio::start(&ctx, config) {
                Ok(started) => tasks.extend(started),
                Err(error) => {
                    ctx.add_counter("errno.fio-setup", 1);
                    ctx.fail_to_start(format!("fio job could not start: {error}"));
                }
            }
        }
        WorkloadConfig::SeqWrite(config) => {
            let handle = sim.spawn(&ctx.name, file::seq_write(ctx.clone(), config.clone()));
            tasks.push(handle.task());
        }
        WorkloadConfig::FileRead(config) => {
            let handle = sim.spawn(&ctx.name, file::file_read(ctx.clone(), config.clone()));
            tasks.push(handle.task());
        }
        WorkloadConfig::Video(config) => {
            let handle = sim.spawn(&ctx.name, file::video(ctx.clone(), config.clone()));
            tasks.push(handle.task());
        }
        WorkloadConfig::FsyncWrite(config) => {
            let handle = sim.spawn(&ctx.name, file::fsync_write(ctx.clone(), config.clone()));
            tasks.push(handle.task());
        }
        WorkloadConfig::Ops(config) => {
            let handle = sim.spawn(&ctx.name, ops::ops(ctx.clone(), config.clone()));
            tasks.push(handle.task());
        }
        WorkloadConfig::Filebench(config) => {
            // Validated when the scenario was loaded; a failure here is counted, as for the
            // other file workloads.
            match crate::workload::filebench::start(&ctx, config) {
                Ok(started) => tasks.extend(started),
                Err(error) => {
                    ctx.add_counter("errno.EINVAL", 1);
                    ctx.fail_to_start(format!("filebench script could not start: {error}"));
                }
            }
        }
        WorkloadConfig::Sqlite(config) => {
            let handle = sim.spawn(
                &ctx.name,
                crate::workload::sqlite::sqlite(ctx.clone(), config.clone()),
            );
            tasks.push(handle.task());
        }
        WorkloadConfig::Replay(config) => match crate::workload::replay::start(&ctx, config) {
            Ok(started) => tasks.extend(started),
            Err(error) => {
                ctx.add_counter("errno.EINVAL", 1);
                ctx.fail_to_start(format!("trace replay could not start: {error}"));
            }
        },
    }
}

/// Runs one variant with one seed. `progress` is called with the virtual time now and then.
pub fn run_one(
    scenario: &Scenario,
    variant: &Variant,
    seed: u64,
    progress: impl FnMut(Nanos) + 'static,
) -> Result<RunResult, RunError> {
    run_one_checked(scenario, variant, seed, false, progress)
}

/// [`run_one`], checking the page cache's and the journal's invariants when `check` (they are
/// always checked in debug builds).
pub fn run_one_checked(
    scenario: &Scenario,
    variant: &Variant,
    seed: u64,
    check: bool,
    progress: impl FnMut(Nanos) + 'static,
) -> Result<RunResult, RunError> {
    run_one_traced(scenario, variant, seed, check, None, progress)
}

/// [`run_one_checked`], recording the run's timeline when `timeline` is given (the result's
/// `timeline`, for a Perfetto trace). Recording reads state and schedules nothing: the run's
/// results are the same with and without it.
pub fn run_one_traced(
    scenario: &Scenario,
    variant: &Variant,
    seed: u64,
    check: bool,
    timeline: Option<crate::sim::timeline::TimelineConfig>,
    progress: impl FnMut(Nanos) + 'static,
) -> Result<RunResult, RunError> {
    run_one_hooked(scenario, variant, seed, check, timeline, progress, None)
}

/// What a caller does with the stack of one run ([`run_one_hooked`]): `before` runs once the
/// stack is built, before any app starts (an error stops the run); `after` once the run has
/// ended, before the results are read.
pub struct StackHooks<'a> {
    pub before: BeforeHook<'a>,
    pub after: AfterHook<'a>,
}

/// [`StackHooks::before`].
pub type BeforeHook<'a> = Box<dyn FnOnce(&Rc<Stack>) -> Result<(), String> + 'a>;
/// [`StackHooks::after`].
pub type AfterHook<'a> = Box<dyn FnOnce(&Rc<Stack>) + 'a>;

/// [`run_one_traced`] with `hooks` on the run's stack (crash-point checking records there).
pub fn run_one_hooked(
    scenario: &Scenario,
    variant: &Variant,
    seed: u64,
    check: bool,
    timeline: Option<crate::sim::timeline::TimelineConfig>,
    progress: impl FnMut(Nanos) + 'static,
    hooks: Option<StackHooks<'_>>,
) -> Result<RunResult, RunError> {
    let (before, after) = match hooks {
        Some(h) => (Some(h.before), Some(h.after)),
        None => (None, None),
    };
    let simulation = Simulation::new(seed);
    let sim = simulation.handle();
    sim.set_progress_hook(progress);
    if let Some(config) = timeline {
        sim.enable_timeline(config);
    }
    let foreground = scenario
        .apps
        .iter()
        .position(|a| a.role == Role::Foreground)
        .map(|i| scenario.uid(i));
    let activity = Rc::new(ForegroundState::new(foreground));
    let run_error = |message: String| RunError {
        scenario: scenario.name.clone(),
        variant: variant.name.clone(),
        seed,
        message,
    };
    let with_block = scenario.apps.iter().any(|a| a.workload.needs_block());
    let with_storage = scenario.apps.iter().any(|a| a.workload.needs_storage());
    let stack = if with_storage {
        Stack::new_with_storage(
            &sim,
            &variant.stack,
            activity.clone(),
            variant.stack.vm.clone(),
            None,
        )
    } else {
        Stack::new(&sim, &variant.stack, activity.clone(), with_block)
    }
    .map_err(run_error)?;
    if let Some(vfs) = stack.vfs.as_ref().filter(|_| check) {
        vfs.enable_checks();
    }
    let block_layers = || {
        let journal = stack.journal_block.as_ref().map(|(block, _)| block);
        stack.block.iter().chain(journal).map(|block| &block.layer)
    };
    if check {
        block_layers().for_each(|layer| layer.enable_checks());
    }
    if let Some(before) = before {
        before(&stack).map_err(&run_error)?;
    }
    // The apps' processes start at their app's nice value and I/O priority, in their cgroup.
    for (i, app) in scenario.apps.iter().enumerate() {
        stack.tasks.set_app_nice(scenario.uid(i), app.nice);
        stack.tasks.set_app_class(scenario.uid(i), app.io_class);
        if let Some(ioprio) = &app.ioprio {
            let ioprio = crate::task::parse_ioprio(ioprio).map_err(&run_error)?;
            stack.tasks.set_app_ioprio(scenario.uid(i), ioprio);
        }
        if let Some(cgroup) = &app.cgroup {
            stack
                .tasks
                .set_app_cgroup(scenario.uid(i), cgroup)
                .map_err(&run_error)?;
        }
    }
    if let Some(block) = &stack.block {
        // Jobs must fit the device: checked here, where its capacity is known, with the checks
        // the job itself makes when it starts.
        for app in &scenario.apps {
            if let WorkloadConfig::Fio(config) = &app.workload {
                let name = app.name.get_ref();
                config
                    .job(name)
                    .and_then(|job| {
                        JobState::new(job, 0, 0, name, block.capacity_bytes, Rng::new(0))
                    })
                    .map_err(|e| run_error(format!("app `{name}`: {e}")))?;
            }
        }
    }
    if sim.timeline_enabled() {
        install_timeline_sampler(&sim, &stack);
        if let Some(i) = scenario
            .apps
            .iter()
            .position(|a| a.role == Role::Foreground)
        {
            sim.timeline_foreground(scenario.apps[i].name.get_ref());
        }
    }
    let recorder = Rc::new(Recorder::new());
    let series = install_series_sampler(&sim, scenario, &stack, &recorder);
    let apps: Rc<Vec<AppRuntime>> = Rc::new(
        scenario
            .apps
            .iter()
            .enumerate()
            .map(|(i, app)| AppRuntime {
                context: AppContext::new(
                    sim.clone(),
                    i,
                    app.name.get_ref(),
                    scenario.uid(i),
                    stack.clone(),
                    recorder.clone(),
                ),
                tasks: RefCell::new(Vec::new()),
                started: std::cell::Cell::new(false),
            })
            .collect(),
    );

    // Apps that the timeline starts wait for it; the others start at their `start` time.
    let timeline_started: Vec<bool> = (0..scenario.apps.len())
        .map(|i| {
            scenario
                .timeline
                .iter()
                .any(|e| e.action == TimelineAction::Start(i))
        })
        .collect();
    // App starts and the timeline run in one task, so that an `apps-done` run lasts at least
    // until its last scheduled event, and apps starting at the same instant start in file order.
    let mut schedule: Vec<TimelineEvent> = scenario
        .apps
        .iter()
        .enumerate()
        .filter(|(i, _)| !timeline_started[*i])
        .map(|(i, app)| TimelineEvent {
            at: app.start,
            action: TimelineAction::Start(i),
        })
        .chain(scenario.timeline.iter().copied())
        .collect();
    schedule.sort_by_key(|e| e.at);
    let shared = Rc::new(scenario.clone());
    {
        let (s, apps, shared, activity) =
            (sim.clone(), apps.clone(), shared.clone(), activity.clone());
        sim.spawn("timeline", async move {
            for event in schedule {
                if event.at > s.now() {
                    s.sleep(event.at - s.now()).await;
                }
                match event.action {
                    TimelineAction::Foreground(i) => {
                        activity.set_foreground(shared.uid(i));
                        s.timeline_foreground(shared.apps[i].name.get_ref());
                    }
                    TimelineAction::Start(i) => start_app(&s, &shared, &apps[i], i),
                    TimelineAction::Stop(i) => apps[i].context.stop(),
                }
            }
        });
    }

    let end_when_done = scenario.end == EndCondition::AppsDone;
    let end = sim
        .run_until(scenario.duration, end_when_done)
        .map_err(|error| run_error(error.to_string()))?;
    if let Some(violation) = stack
        .vfs
        .as_ref()
        .and_then(|vfs| vfs.end_of_run_violation(&sim))
        .or_else(|| block_layers().find_map(|layer| layer.violation()))
    {
        return Err(run_error(violation));
    }
    // Operations still blocked (or running) now are results: at their time so far.
    recorder.finish(&sim);
    sim.finish_samplers();
    let series = Rc::try_unwrap(series)
        .map_or_else(|shared| shared.borrow().clone(), RefCell::into_inner)
        .into_series();
    let timeline = sim.take_timeline().map(|timeline| {
        let mut app_of_task = BTreeMap::new();
        for app in apps.iter() {
            for &task in app.tasks.borrow().iter() {
                app_of_task.insert(task, app.context.name.to_string());
            }
        }
        let tasks = sim
            .task_names()
            .into_iter()
            .map(|(id, name)| crate::report::perfetto::TraceTask {
                app: app_of_task.get(&id).cloned(),
                id,
                name,
            })
            .collect();
        Box::new(crate::report::perfetto::RunTimeline { timeline, tasks })
    });

    let mut app_results = BTreeMap::new();
    for (i, app) in apps.iter().enumerate() {
        let name = app.context.name.to_string();
        let mut result = recorder.app_result(&name, scenario.uid(i));
        let mut blocked = BlockedTimes::default();
        for &task in app.tasks.borrow().iter() {
            for (reason, nanos) in sim.blocked_times(task).nonzero() {
                if !reason.is_voluntary() {
                    blocked.add(reason, nanos);
                }
            }
        }
        result.blocked_ns = blocked_map(&blocked);
        for (reason, nanos) in blocked.nonzero() {
            *result
                .blocked_by_layer_ns
                .entry(reason.layer().to_string())
                .or_insert(0) += nanos;
        }
        app_results.insert(name, result);
    }
    // The account by purpose: each row to the app of its uid, the rest to the kernel.
    let mut kernel_io_by_purpose = crate::report::results::IoByPurpose::new();
    for row in stack.io_account_rows() {
        let by_cause = match app_results.values_mut().find(|a| a.uid == row.uid) {
            Some(app) => &mut app.io_by_purpose,
            None => &mut kernel_io_by_purpose,
        };
        let purpose = row.purpose_key();
        by_cause
            .entry(row.cause)
            .or_default()
            .entry(purpose)
            .or_default()
            .add(&row.count);
    }
    if let Some(after) = after {
        after(&stack);
    }
    let mut counters = stack.counters();
    counters.insert("activity.switches".into(), activity.switches());
    counters.extend(stack.energy_counters(sim.now()));
    Ok(RunResult {
        variant: variant.name.clone(),
        seed,
        end: match end {
            RunEnd::TimeLimit => "duration",
            RunEnd::AllTasksDone => "apps-done",
            RunEnd::Idle | RunEnd::Stopped => "idle",
            RunEnd::EventLimit => "event-limit",
        }
        .to_string(),
        virtual_ns: sim.now(),
        events: sim.events_processed(),
        apps: app_results,
        counters,
        kernel_io_by_purpose,
        device: stack.device_stats(),
        series,
        mixed_eras: crate::scenario::eras::mixed_eras(&variant.stack),
        blktrace: stack.blktrace(),
        timeline,
    })
}

/// The period of a run's time series: 100 ms, longer for long runs so that a series has at
/// most [`SERIES_MAX_POINTS`] points (a whole number of 100 ms).
pub fn series_period(duration: Nanos) -> Nanos {
    const BASE: Nanos = 100 * crate::units::NS_PER_MS;
    let periods = duration.div_ceil(BASE * SERIES_MAX_POINTS).max(1);
    BASE * periods
}

/// Bound on the points of a time series.
pub const SERIES_MAX_POINTS: u64 = 1000;

/// Cumulative byte counts at each sample of the series.
#[derive(Clone, Default)]
struct SeriesSamples {
    period_ns: Nanos,
    device: Vec<u64>,
    apps: BTreeMap<String, Vec<u64>>,
}

impl SeriesSamples {
    /// Differences of consecutive samples: bytes per period.
    fn into_series(self) -> crate::report::results::Series {
        let deltas = |values: &[u64]| values.windows(2).map(|w| w[1] - w[0]).collect();
        crate::report::results::Series {
            period_ns: self.period_ns,
            device_bytes: deltas(&self.device),
            app_bytes: self
                .apps
                .iter()
                .map(|(app, values)| (app.clone(), deltas(values)))
                .collect(),
        }
    }
}

/// Samples the bytes the block layer completed and each app's `bytes` counter at every
/// [`series_period`] (reading state between events: the run is unchanged).
fn install_series_sampler(
    sim: &Sim,
    scenario: &Scenario,
    stack: &Rc<Stack>,
    recorder: &Rc<Recorder>,
) -> Rc<RefCell<SeriesSamples>> {
    let period_ns = series_period(scenario.duration);
    let samples = Rc::new(RefCell::new(SeriesSamples {
        period_ns,
        ..SeriesSamples::default()
    }));
    let block = stack.block.as_ref().map(|block| block.layer.clone());
    let apps: Vec<String> = scenario
        .apps
        .iter()
        .map(|a| a.name.get_ref().to_string())
        .collect();
    let (into, recorder) = (samples.clone(), recorder.clone());
    sim.add_sampler(0, scenario.duration, period_ns, move |_, _| {
        let mut samples = into.borrow_mut();
        if let Some(block) = &block {
            samples.device.push(block.completed_bytes());
        }
        for app in &apps {
            let bytes = recorder.counter(app, "bytes");
            samples.apps.entry(app.clone()).or_default().push(bytes);
        }
    });
    samples
}

/// Samples the stack's counters into the timeline: the page cache's dirty, writeback and free
/// pages (`nr_dirty`, `nr_writeback`, `nr_free` as /proc/vmstat counts them), the requests in
/// the elevator and in the driver, and the bytes completed per second over the last period.
fn install_timeline_sampler(sim: &Sim, stack: &Rc<Stack>) {
    let mm = stack.vfs.as_ref().map(|vfs| vfs.mm.clone());
    let block = stack.block.as_ref().map(|block| block.layer.clone());
    let mut last: Option<(Nanos, u64)> = None;
    sim.set_timeline_sampler(move |sim, at| {
        if let Some(mm) = &mm {
            let (free, _cached, dirty, writeback) = mm.page_counts();
            sim.timeline_counter(at, "dirty pages", dirty as f64);
            sim.timeline_counter(at, "writeback pages", writeback as f64);
            sim.timeline_counter(
                at,
                "free memory MiB",
                (free * crate::units::PAGE_SIZE) as f64 / (1 << 20) as f64,
            );
        }
        if let Some(block) = &block {
            let (queued, in_driver) = block.queue_depths();
            sim.timeline_counter(at, "elevator queue depth", queued as f64);
            sim.timeline_counter(at, "device queue depth", in_driver as f64);
            let bytes = block.completed_bytes();
            if let Some((then, bytes_then)) = last.filter(|(then, _)| at > *then) {
                let seconds = (at - then) as f64 / crate::units::NS_PER_SEC as f64;
                let megabytes = (bytes - bytes_then) as f64 / 1e6;
                sim.timeline_counter(at, "throughput MB/s", megabytes / seconds);
            }
            last = Some((at, bytes));
        }
    });
}

/// Memory of a run's stack, measured (`/usr/bin/time -f %M`, release build, bg-write-fg-read
/// at 8 GiB, 128 GiB and 1 TiB of device: 26.8, 28.0 and 37.8 MiB): since the FTL's maps are
/// lazy (docs/performance.md, "Memory independent of device capacity"), capacity costs about
/// 11 KiB per GiB (taken as 16 KiB); the page cache model up to 32 bytes per page of RAM once
/// it is full (8 MiB per GiB); about 30 MiB for the rest. Data written adds about 0.5 MB per
/// GiB (the FTL's compact maps), which the estimate, made before the run, leaves out.
pub const MEMORY_PER_DEVICE_GIB: u64 = 16 << 10;
pub const MEMORY_PER_RAM_GIB: u64 = 8 << 20;
pub const MEMORY_PER_RUN: u64 = 30 << 20;

/// What a scenario's runs will take in memory, before they run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryEstimate {
    /// The largest single run's estimate.
    pub per_run_bytes: u64,
    /// Runs held in memory at once (worker threads, at most the runs).
    pub concurrent_runs: usize,
    pub total_bytes: u64,
}

/// Estimates the memory of `scenario`'s runs under `options` (see [`MEMORY_PER_DEVICE_GIB`]).
pub fn memory_estimate(scenario: &Scenario, options: &RunOptions) -> MemoryEstimate {
    const GIB: u64 = 1 << 30;
    let with_block = scenario.apps.iter().any(|a| a.workload.needs_block());
    let with_storage = scenario.apps.iter().any(|a| a.workload.needs_storage());
    let per_run_bytes = scenario
        .variants
        .iter()
        .map(|variant| {
            let mut bytes = MEMORY_PER_RUN;
            if with_block {
                let capacity = variant.stack.device.resolve().map_or(0, |p| p.capacity);
                bytes += capacity.div_ceil(GIB) * MEMORY_PER_DEVICE_GIB;
                // An external journal's device has an FTL of its own.
                if let Some(journal) = &variant.stack.fs.journal_device {
                    let capacity = journal.resolve().map_or(0, |p| p.capacity);
                    bytes += capacity.div_ceil(GIB) * MEMORY_PER_DEVICE_GIB;
                }
            }
            if with_storage {
                bytes += variant.stack.vm.ram.div_ceil(GIB) * MEMORY_PER_RAM_GIB;
            }
            bytes
        })
        .max()
        .unwrap_or(MEMORY_PER_RUN);
    let runs = jobs(scenario, options).len();
    let threads = match options.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let concurrent_runs = threads.min(runs).max(1);
    MemoryEstimate {
        per_run_bytes,
        concurrent_runs,
        total_bytes: per_run_bytes * concurrent_runs as u64,
    }
}

/// The memory a run may use: `MOBISTACK_MEMORY_LIMIT` (a size, e.g. "4GiB", for a cgroup's
/// limit) if set, else `MemAvailable` of /proc/meminfo, else unknown.
pub fn available_memory() -> Option<u64> {
    if let Ok(limit) = std::env::var("MOBISTACK_MEMORY_LIMIT") {
        return crate::units::parse_size(&limit).ok();
    }
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// An error when `estimate` exceeds `available` memory, saying what to change.
pub fn check_memory(estimate: &MemoryEstimate, available: u64) -> Result<(), String> {
    use crate::units::format_size;
    if estimate.total_bytes <= available {
        return Ok(());
    }
    Err(format!(
        "these runs need about {} of memory ({} run(s) at once x {} each: the device's maps cost about 16 KiB per GiB of capacity, the page cache model 8 MiB per GiB of RAM) and this machine has {} available; use a smaller device `capacity` or `ram`, or fewer --threads",
        format_size(estimate.total_bytes),
        estimate.concurrent_runs,
        format_size(estimate.per_run_bytes),
        format_size(available)
    ))
}

/// The whole-stack benchmark of `mobistack bench`: the built-in `bg-write-fg-read` scenario's CFQ
/// variant with the background write grown to `gib` GiB over `seconds` of virtual time, run once.
/// Two rows from the one run: virtual seconds simulated per wall second (the "fast enough to
/// sweep" target: an 8 GiB paper experiment in seconds) and file pages written back per wall
/// second (issue 17's whole-stack goal: page cache, ext4, elevator and device).
pub fn bench_stack(gib: u64, seconds: u64) -> [crate::sim::bench::BenchResult; 2] {
    let mut source = crate::scenario::builtin::find("bg-write-fg-read")
        .expect("built-in scenario")
        .source
        .to_string();
    for (from, to) in [
        ("size = \"1GiB\"", format!("size = \"{gib}GiB\"")),
        ("duration = \"20s\"", format!("duration = \"{seconds}s\"")),
        (
            "capacity = \"8GiB\"",
            format!("capacity = \"{}GiB\"", 2 * gib + 8),
        ),
    ] {
        assert!(source.contains(from), "the bench scenario has `{from}`");
        source = source.replacen(from, &to, 1);
    }
    let mut scenario = crate::scenario::parse("bench", &source).expect("bench scenario parses");
    scenario.select_variant("cfq").expect("cfq variant");
    let start = std::time::Instant::now();
    let result = run_one(&scenario, &scenario.variants[0], 1, |_| {}).expect("bench run");
    let wall = start.elapsed().as_secs_f64();
    let virtual_seconds = result.virtual_ns as f64 / crate::units::NS_PER_SEC as f64;
    let pages = result
        .counters
        .get("mm.file_pages_written")
        .copied()
        .unwrap_or(0);
    [
        crate::sim::bench::BenchResult {
            name: "stack-8gib-write",
            what: "virtual s per wall s",
            operations: result.events,
            wall_seconds: wall,
            per_second: virtual_seconds / wall,
        },
        crate::sim::bench::BenchResult::counted(
            "stack-writeback",
            "pages written back per wall s",
            pages,
            wall,
        ),
    ]
}

/// The SQLite rows of `mobistack bench`: the built-in `joj/insert` (real SQLite on its coroutine,
/// every VFS call a switch to the simulated task and back) with `inserts` autocommit INSERTs,
/// internal journal, run once. Two rows: SQLite VFS calls served per wall second (the cost of
/// the hand-off between SQLite and the simulation) and INSERT statements per wall second.
pub fn bench_sqlite(inserts: u64) -> [crate::sim::bench::BenchResult; 2] {
    let source = crate::scenario::builtin::find("joj/insert")
        .expect("built-in scenario")
        .source
        .replace("count = 1000", &format!("count = {inserts}"));
    let mut scenario =
        crate::scenario::parse("bench-sqlite", &source).expect("bench scenario parses");
    scenario
        .select_variant("internal")
        .expect("internal variant");
    let start = std::time::Instant::now();
    let result = run_one(&scenario, &scenario.variants[0], 1, |_| {}).expect("bench run");
    let wall = start.elapsed().as_secs_f64();
    let counters = &result.apps["db"].counters;
    let calls: u64 = counters
        .iter()
        .filter(|(k, _)| k.starts_with("sqlite.call."))
        .map(|(_, v)| *v)
        .sum();
    // One autocommit INSERT is one transaction.
    let statements = counters.get("sqlite.transactions").copied().unwrap_or(0);
    [
        crate::sim::bench::BenchResult::counted(
            "sqlite-inserts",
            "SQLite VFS calls per wall s",
            calls,
            wall,
        ),
        crate::sim::bench::BenchResult::counted(
            "sqlite-statements",
            "INSERT statements per wall s",
            statements,
            wall,
        ),
    ]
}

/// The QASIO M1 benchmark row of `mobistack bench`: the built-in `qasio/m1` (500 creat + 4 KiB
/// write + fsync on ext4 under a background buffered write through CFQ and the eMMC model),
/// NONE variant, with the background write set to `gib` GiB. Reports simulated block requests
/// per wall second (issue 10's and 12's speed goals: the 8 GB run under 3 s, over a million
/// requests per second; peak memory is what `/usr/bin/time -v` shows for the command).
pub fn bench_qasio_m1(gib: u64) -> crate::sim::bench::BenchResult {
    let source = crate::scenario::builtin::find("qasio/m1")
        .expect("built-in scenario")
        .source
        .replace("size = \"8GiB\"", &format!("size = \"{gib}GiB\""))
        .replace(
            "capacity = \"16GiB\"",
            &format!("capacity = \"{}GiB\"", (2 * gib).max(16)),
        );
    let mut scenario = crate::scenario::parse("bench-m1", &source).expect("bench scenario parses");
    scenario.select_variant("none").expect("none variant");
    let start = std::time::Instant::now();
    let result = run_one(&scenario, &scenario.variants[0], 1, |_| {}).expect("bench run");
    let wall = start.elapsed().as_secs_f64();
    let requests = result.counters.get("block.requests").copied().unwrap_or(0);
    let name = if gib >= 32 {
        "qasio-m1-32gib"
    } else {
        "qasio-m1-8gib"
    };
    crate::sim::bench::BenchResult::counted(name, "block requests per wall s", requests, wall)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_memory_estimate_grows_with_capacity_and_threads() {
        let source = crate::scenario::builtin::find("bg-write-fg-read")
            .unwrap()
            .source
            .replace("capacity = \"8GiB\"", "capacity = \"4TiB\"");
        let scenario = crate::scenario::parse("big.toml", &source).unwrap();
        let one = super::RunOptions {
            threads: 1,
            ..Default::default()
        };
        let estimate = super::memory_estimate(&scenario, &one);
        // 4096 GiB x 16 KiB + 2 GiB x 8 MiB + 30 MiB.
        assert_eq!(
            estimate.per_run_bytes,
            4096 * super::MEMORY_PER_DEVICE_GIB + 2 * (8 << 20) + (30 << 20)
        );
        assert_eq!(estimate.concurrent_runs, 1);
        let four = super::RunOptions {
            threads: 4,
            ..Default::default()
        };
        let estimate = super::memory_estimate(&scenario, &four);
        assert_eq!(estimate.concurrent_runs, 4, "four variants on four threads");
        // 4 x 110 MiB.
        assert_eq!(estimate.total_bytes, (4 * (64 + 16 + 30)) << 20);
        let error = super::check_memory(&estimate, 256 << 20).unwrap_err();
        assert!(error.contains("this machine has 256"), "{error}");
        assert!(super::check_memory(&estimate, 1 << 30).is_ok());
    }

    #[test]
    fn the_series_period_keeps_a_series_within_its_bound() {
        use crate::units::NS_PER_SEC;
        assert_eq!(super::series_period(20 * NS_PER_SEC), 100_000_000);
        assert_eq!(super::series_period(100 * NS_PER_SEC), 100_000_000);
        assert_eq!(super::series_period(101 * NS_PER_SEC), 200_000_000);
        let hour = 3600 * NS_PER_SEC;
        assert!(hour / super::series_period(hour) <= super::SERIES_MAX_POINTS);
    }

    #[test]
    fn the_stack_benchmark_simulates_its_whole_duration() {
        let [result, pages] = super::bench_stack(1, 5);
        assert!(result.operations > 1000, "{result:?}");
        // 5 virtual seconds over the measured wall time.
        let virtual_seconds = result.per_second * result.wall_seconds;
        assert!((virtual_seconds - 5.0).abs() < 1e-6, "{virtual_seconds}");
        // Pages written back in 5 s: a good part of the 1 GiB being written, never more (a
        // little metadata aside), and the rate is those pages over the same wall time.
        let gib_pages = (1u64 << 30) / 4096;
        assert!(
            pages.operations >= gib_pages / 10 && pages.operations <= gib_pages * 11 / 10,
            "{pages:?}"
        );
        assert_eq!(pages.wall_seconds, result.wall_seconds);
        let rate = pages.operations as f64 / pages.wall_seconds;
        assert!((pages.per_second - rate).abs() <= 1e-9 * rate, "{pages:?}");
    }
}
