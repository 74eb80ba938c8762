//! Real mode (issue 42): a scenario run on this machine's kernel, to hold the model against.
//!
//! `mobistack real <scenario>` sets the machine up from the scenario's stack ([`machine`]),
//! runs its apps as real threads issuing the same system calls at the same times ([`exec`]),
//! records the block events from tracefs ([`trace`]), puts the machine back, and writes the
//! results in the JSON schema of simulated runs (src/report/results.rs), so `report`,
//! `compare` and `--csv` read real runs unchanged. `mobistack check-real` ([`check`]) runs a
//! scenario both ways and compares per figure.
//!
//! Supported:
//! - the file system: ext4 from `[stack.fs]` on a loop device with direct I/O over an image
//!   file (`--image SIZE`, in `--dir`, default /tmp) or on a device given (`--device PATH`,
//!   formatted): journal size, external journal (a second loop device, `mke2fs -O
//!   journal_dev`), mount options `data=`, `commit=`, `discard`, `barrier`,
//!   `journal_async_commit`, `delalloc`, `auto_da_alloc`, `journal_ioprio`, `dioread_nolock`
//!   (when set: `dioread_nolock` / `dioread_lock`);
//! - `[stack.block]` through the device's queue in sysfs: `elevator` (`noop` = `none`,
//!   `deadline` = `mq-deadline`; `cfq` is refused: blk-mq kernels lack it), `nr_requests`,
//!   `wbt` / `wbt_lat_usec`; `[stack.vm] read_ahead` as `read_ahead_kb`;
//! - `[stack.vm]` through sysctl: `dirty_bytes` / `dirty_background_bytes` from the scenario's
//!   RAM and ratios (or its byte values), `dirty_expire_centisecs`,
//!   `dirty_writeback_centisecs`;
//! - apps' `start`, `nice` and `ioprio`; workloads `seq-write` (no `install_to`),
//!   `fsync-write`, `ops`, `sqlite` with `statements`, `file-read`, `fio` (not trims),
//!   `filebench` (no `eventgen`; [`filebench`]), their I/Os and offsets from the workloads' own
//!   code and generator streams ([`exec`]);
//! - the page cache bounded by a memory cgroup of the scenario's RAM where it is smaller than
//!   the machine's, and `[stack.cgroup.<name>]`'s I/O weights on cgroups the apps' threads
//!   join ([`cgroup`]; cgroup v1 `blkio`, or v2 for the memory cgroup);
//! - block events (`block_bio_queue`, `block_rq_insert`, `block_rq_issue`,
//!   `block_rq_complete`) of the run's devices, per-transaction block writes and flushes,
//!   blkparse text (`--blktrace`).
//!
//! Not supported yet (refused with a message naming it, before anything is changed): the
//! workloads `video`, `replay`, `toy-*`, `sqlite` with `benchmark` or `log`, `seq-write` with
//! `install_to`, `fio` trims, filebench's `eventgen`; timelines; F2FS and simplefs; MobiFS,
//! QASIO, FastTrack; `io_policy`; I/O cgroups on a cgroup v2 `io` hierarchy (it places
//! processes, the apps are threads); the user model. Not applied: `[stack.cpu]` and
//! `[stack.kernel]` (the machine's own), `[stack.device]` (the device is the loop device over
//! this machine's disk), the scheduler tunables beyond those listed and SQLite's `sync_call`
//! (the bundled library's choice). `device fit --measure` ([`fit`]) measures the loop device
//! and fits a profile for the simulated side, which `check-real` caches and uses.
//!
//! Safety of the machine: [`machine::Machine`] undoes every change in reverse order on
//! success, on error, on panic and on SIGINT/SIGTERM (a handler sets [`stop_flag`], which the
//! runner polls; the run then ends and the guard restores). Two real runs at once are refused
//! (an flock on /run/lock/mobistack-real.lock), as the second would save the first's values.

pub mod cgroup;
pub mod check;
pub mod exec;
pub mod filebench;
pub mod fit;
pub mod machine;
pub mod trace;

use crate::report::results::{
    AppFailure, AppResult, OpSummary, RunResult, ScenarioResults, Series, RESULTS_SCHEMA,
    RESULTS_VERSION,
};
use crate::scenario::{EndCondition, Scenario, StackConfig, Variant};
use machine::{Machine, Target};
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use trace::BlockEvent;

/// Why a real run could not run or finish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RealError {
    pub message: String,
}

impl RealError {
    pub fn new(message: impl Into<String>) -> RealError {
        RealError {
            message: message.into(),
        }
    }
}

impl fmt::Display for RealError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for RealError {}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    // Async-signal-safe: one atomic store.
    STOP.store(true, Ordering::SeqCst);
}

/// Installs the SIGINT / SIGTERM handler (once) and returns the flag it sets. The signal no
/// longer ends the process: the runner sees the flag, stops the apps and restores the machine.
pub fn stop_flag() -> &'static AtomicBool {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        for signal in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: a zeroed sigaction with a handler that only stores to an atomic;
            // SA_RESTART so the apps' system calls are not cut short by EINTR.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_signal as *const () as usize;
                action.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(signal, &action, std::ptr::null_mut());
            }
        }
    });
    &STOP
}

/// What `[stack]` asks that real mode cannot set up.
pub fn check_supported_stack(stack: &StackConfig) -> Result<(), String> {
    let unsupported = |what: &str| Err(format!("not supported in real mode yet: {what}"));
    if stack.fs.kind != crate::fs::ext4::FsKind::Ext4 {
        return unsupported(&format!("[stack.fs] type = {:?}", stack.fs.kind).to_lowercase());
    }
    if stack.mobifs.enabled {
        return unsupported("[stack.mobifs] (MobiFS is a model)");
    }
    if stack.qasio != Default::default() {
        return unsupported("[stack.qasio] (QASIO is a model)");
    }
    if stack.fasttrack.enabled() {
        return unsupported("[stack.fasttrack] (FastTrack is a model)");
    }
    if stack.io_policy != Default::default() {
        return unsupported("[stack] io_policy (the Android preset's cgroups)");
    }
    if stack.user.is_some() {
        return unsupported("[stack.user] (the user model)");
    }
    machine::kernel_elevator(&stack.block.elevator).map(|_| ())
}

/// What in the scenario (not its stack) real mode cannot run.
pub fn check_supported(scenario: &Scenario) -> Result<(), String> {
    if !scenario.timeline.is_empty() {
        return Err("not supported in real mode yet: [[timeline]]".into());
    }
    for app in &scenario.apps {
        exec::check_supported(app)?;
    }
    Ok(())
}

/// How to run.
#[derive(Debug, Clone)]
pub struct RealOptions {
    /// Variants to run (all when empty).
    pub variants: Vec<String>,
    pub target: Target,
    /// Write blkparse text of each run's block events here (`FILE.<variant>` with several).
    pub blktrace: Option<PathBuf>,
}

impl RealOptions {
    /// An image of `size` bytes in the default directory ($MOBISTACK_REAL_DIR, else /tmp).
    pub fn image(size: u64) -> RealOptions {
        let dir = std::env::var_os("MOBISTACK_REAL_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        RealOptions {
            variants: Vec::new(),
            target: Target::Image { size, dir },
            blktrace: None,
        }
    }
}

/// The variants `names` selects (all when empty); an unknown name is an error.
pub fn select_variants<'a>(
    scenario: &'a Scenario,
    names: &[String],
) -> Result<Vec<&'a Variant>, RealError> {
    if names.is_empty() {
        return Ok(scenario.variants.iter().collect());
    }
    names
        .iter()
        .map(|name| {
            scenario
                .variants
                .iter()
                .find(|v| &v.name == name)
                .ok_or_else(|| {
                    RealError::new(format!(
                        "scenario `{}` has no variant `{name}` (it has: {})",
                        scenario.name,
                        scenario
                            .variants
                            .iter()
                            .map(|v| v.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                })
        })
        .collect()
}

/// Holds the machine-wide lock of real runs (released when dropped).
struct RunLock {
    _file: std::fs::File,
}

impl RunLock {
    fn take() -> Result<RunLock, RealError> {
        use std::os::fd::AsRawFd;
        let path = "/run/lock/mobistack-real.lock";
        let path = if std::path::Path::new("/run/lock").is_dir() {
            path
        } else {
            "/tmp/mobistack-real.lock"
        };
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|e| RealError::new(format!("cannot open {path}: {e}")))?;
        // SAFETY: a valid fd.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Err(RealError::new(format!(
                "another real run holds {path}: real runs change machine-wide settings, one at a time"
            )));
        }
        Ok(RunLock { _file: file })
    }
}

/// Runs the scenario's selected variants on the real kernel, one after the other.
pub fn run_real(scenario: &Scenario, options: &RealOptions) -> Result<ScenarioResults, RealError> {
    check_supported(scenario).map_err(RealError::new)?;
    let variants = select_variants(scenario, &options.variants)?;
    for variant in &variants {
        machine::preflight(variant, &options.target)
            .map_err(|e| RealError::new(format!("variant `{}`: {e}", variant.name)))?;
    }
    let stop = stop_flag();
    let _lock = RunLock::take()?;
    let mut runs = Vec::new();
    let several = variants.len() > 1;
    for variant in variants {
        if stop.load(Ordering::SeqCst) {
            return Err(RealError::new("interrupted"));
        }
        let (run, events) = run_variant(scenario, variant, options, stop)
            .map_err(|e| RealError::new(format!("variant `{}`: {e}", variant.name)))?;
        if let Some(path) = &options.blktrace {
            let path = if several {
                PathBuf::from(format!("{}.{}", path.display(), variant.name))
            } else {
                path.clone()
            };
            write_blkparse(&path, &events).map_err(RealError::new)?;
        }
        runs.push(run);
        if stop.load(Ordering::SeqCst) {
            return Err(RealError::new(
                "interrupted (SIGINT/SIGTERM): the machine was restored",
            ));
        }
    }
    Ok(ScenarioResults {
        schema: RESULTS_SCHEMA,
        version: RESULTS_VERSION,
        scenario: scenario.name.clone(),
        description: format!("real run: {}", scenario.description),
        duration_ns: scenario.duration,
        runs,
    })
}

/// One variant: set up, run, trace, restore.
fn run_variant(
    scenario: &Scenario,
    variant: &Variant,
    options: &RealOptions,
    stop: &AtomicBool,
) -> Result<(RunResult, Vec<BlockEvent>), RealError> {
    let tag = format!("{}-{}", std::process::id(), variant.name);
    let mut machine = Machine::set_up(variant, &options.target, &tag)?;
    let seed = scenario.seeds.first().copied().unwrap_or(1);
    exec::prepare(&scenario.apps, &machine.mount_dir, seed).map_err(RealError::new)?;
    machine.enter_memory_cgroup()?;
    let devices = machine.devices.clone();
    let recording = trace::Trace::start(&mut machine, &devices)?;
    let (apps, t0, end_ns, end) = run_apps(scenario, &machine.mount_dir, &machine.io_cgroups, stop);
    let (events, lost) = recording.stop(&machine)?;
    let memcg = machine.memory_cgroup_usage();
    let failures = machine.restore();
    if !failures.is_empty() {
        return Err(RealError::new(format!(
            "the machine could not be fully restored: {}",
            failures.join("; ")
        )));
    }
    let mut run = run_result(
        variant,
        &apps,
        &events,
        lost,
        t0,
        end_ns,
        end,
        scenario.duration,
    );
    if let Some((limit, peak)) = memcg {
        run.counters.insert("real.memcg.limit_bytes".into(), limit);
        run.counters.insert("real.memcg.peak_bytes".into(), peak);
    }
    Ok((run, events))
}

/// Starts every app's thread at `t0` and ends them at the scenario's end (its duration, or
/// when all are done with `end = "apps-done"`) or on a stop signal.
fn run_apps(
    scenario: &Scenario,
    root: &std::path::Path,
    io_cgroups: &BTreeMap<String, PathBuf>,
    signal: &AtomicBool,
) -> (Vec<exec::AppRun>, u64, u64, &'static str) {
    let stop = AtomicBool::new(false);
    let t0 = exec::now_ns();
    let seed = scenario.seeds.first().copied().unwrap_or(1);
    let mut end = "duration";
    let apps = std::thread::scope(|scope| {
        let handles: Vec<_> = scenario
            .apps
            .iter()
            .enumerate()
            .map(|(i, app)| {
                let uid = app.uid.unwrap_or(10_000 + i as u32);
                let stop = &stop;
                let cgroup = app
                    .cgroup
                    .as_ref()
                    .and_then(|name| io_cgroups.get(name))
                    .map(PathBuf::as_path);
                scope.spawn(move || exec::run_app(app, uid, seed, t0, root, cgroup, stop))
            })
            .collect();
        loop {
            if signal.load(Ordering::SeqCst) {
                end = "interrupted";
                break;
            }
            if exec::now_ns() - t0 >= scenario.duration {
                break;
            }
            if handles.iter().all(|h| h.is_finished()) {
                end = if scenario.end == EndCondition::AppsDone {
                    "apps-done"
                } else {
                    "idle"
                };
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        stop.store(true, Ordering::SeqCst);
        handles
            .into_iter()
            .map(|h| h.join().expect("an app thread does not panic"))
            .collect::<Vec<_>>()
    });
    (apps, t0, exec::now_ns(), end)
}

/// Per-transaction block I/O of one app: the events in its transactions' windows.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TxnBlockCounts {
    pub transactions: u64,
    /// Write bios with data (`block_bio_queue`).
    pub write_bios: u64,
    /// Write requests with data issued (`block_rq_issue`).
    pub write_requests: u64,
    /// Cache flushes issued to the device (`block_rq_issue` of empty flush requests: each
    /// preflush, and each FUA write's post-flush where the device has no FUA).
    pub flush_requests: u64,
    /// Bios carrying REQ_PREFLUSH or REQ_FUA.
    pub flush_bios: u64,
}

/// Counts the events issued within `windows` (sorted by start).
pub fn txn_block_counts(events: &[BlockEvent], windows: &[(u64, u64)]) -> TxnBlockCounts {
    let mut counts = TxnBlockCounts {
        transactions: windows.len() as u64,
        ..TxnBlockCounts::default()
    };
    for event in events {
        let t = event.time_ns;
        let i = windows.partition_point(|w| w.0 <= t);
        if i == 0 || windows[i - 1].1 < t {
            continue;
        }
        match event.action {
            crate::block::blktrace::Action::Queue => {
                counts.write_bios += u64::from(event.is_data_write());
                counts.flush_bios += u64::from(event.is_flush());
            }
            crate::block::blktrace::Action::Issue => {
                counts.write_requests += u64::from(event.is_data_write());
                counts.flush_requests += u64::from(event.is_flush_request());
            }
            _ => {}
        }
    }
    counts
}

/// Per request class (`write`, `read`, `flush`): how many requests were paired issue ->
/// complete and their summed time on the device (from `block_rq_issue` to
/// `block_rq_complete`). Data requests pair by device, sector and length, empty flushes in
/// order per device; a FUA write's final completion after its post-flush (length 0, not a
/// flush) pairs with nothing.
pub fn device_service_times(events: &[BlockEvent]) -> BTreeMap<&'static str, (u64, u64)> {
    use crate::block::blktrace::Action;
    use std::collections::VecDeque;
    let mut issued: BTreeMap<(u32, u32, u64, u32, bool), VecDeque<u64>> = BTreeMap::new();
    let mut times: BTreeMap<&'static str, (u64, u64)> = BTreeMap::new();
    for event in events {
        let flush = event.is_flush_request();
        let class = if flush {
            "flush"
        } else if event.is_data_write() {
            "write"
        } else if event.rwbs.contains('R') && event.nr_sectors > 0 {
            "read"
        } else {
            continue;
        };
        let sector = if flush { 0 } else { event.sector };
        let key = (event.major, event.minor, sector, event.nr_sectors, flush);
        match event.action {
            Action::Issue => issued.entry(key).or_default().push_back(event.time_ns),
            Action::Complete => {
                if let Some(start) = issued.get_mut(&key).and_then(|q| q.pop_front()) {
                    let slot = times.entry(class).or_insert((0, 0));
                    slot.0 += 1;
                    slot.1 += event.time_ns.saturating_sub(start);
                }
            }
            _ => {}
        }
    }
    times
}

/// The latency summary of `samples` (nanoseconds), as the simulation's recorder makes it.
fn summarize(samples: &[&exec::OpSample]) -> OpSummary {
    crate::report::recorder::summarize_latencies(
        samples.iter().map(|s| (s.latency_ns, s.unfinished)),
    )
}

/// The run in the results schema. Times are from the run's start; `virtual_ns` is the wall
/// time the run took; `seed` is 0 (a real run has none).
#[allow(clippy::too_many_arguments)]
fn run_result(
    variant: &Variant,
    apps: &[exec::AppRun],
    events: &[BlockEvent],
    lost: u64,
    t0: u64,
    end_ns: u64,
    end: &str,
    duration: u64,
) -> RunResult {
    let period = crate::run::series_period(duration);
    let periods = ((end_ns - t0) / period) as usize;
    let mut device_bytes = vec![0u64; periods];
    let mut counters = BTreeMap::new();
    let mut add = |key: &str, n: u64| *counters.entry(key.to_string()).or_insert(0) += n;
    for event in events {
        if event.action == crate::block::blktrace::Action::Complete {
            let i = (event.time_ns.saturating_sub(t0) / period) as usize;
            if let Some(slot) = device_bytes.get_mut(i) {
                *slot += u64::from(event.nr_sectors) * 512;
            }
        }
        if event.action == crate::block::blktrace::Action::Issue {
            if event.is_data_write() {
                add("real.block.write_requests", 1);
                add("real.block.write_bytes", u64::from(event.nr_sectors) * 512);
            } else if event.is_flush_request() {
                add("real.block.flush_requests", 1);
            } else if event.rwbs.contains('R') {
                add("real.block.read_requests", 1);
            }
        }
    }
    let service = device_service_times(events);
    for (class, (count, total)) in &service {
        add(&format!("real.block.{class}_serviced"), *count);
        add(&format!("real.block.{class}_device_ns"), *total);
    }
    add("real.trace.events", events.len() as u64);
    add("real.trace.lost", lost);
    let mut results = BTreeMap::new();
    for app in apps {
        results.insert(app.name.clone(), app_result(app, events, t0, end_ns));
    }
    RunResult {
        variant: variant.name.clone(),
        seed: 0,
        end: end.to_string(),
        virtual_ns: end_ns - t0,
        events: events.len() as u64,
        apps: results,
        counters,
        kernel_io_by_purpose: BTreeMap::new(),
        device: serde_json::Value::Null,
        series: Series {
            period_ns: period,
            device_bytes,
            app_bytes: BTreeMap::new(),
        },
        blktrace: None,
        timeline: None,
        // One kernel, the machine's: a real run never mixes eras.
        mixed_eras: Vec::new(),
    }
}

fn app_result(app: &exec::AppRun, events: &[BlockEvent], t0: u64, end_ns: u64) -> AppResult {
    let mut by_op: BTreeMap<&str, Vec<&exec::OpSample>> = BTreeMap::new();
    for s in &app.samples {
        by_op.entry(s.op.as_str()).or_default().push(s);
    }
    let ops = by_op
        .into_iter()
        .map(|(op, samples)| (op.to_string(), summarize(&samples)))
        .collect();
    let mut counters = app.counters.clone();
    if !app.transactions.is_empty() {
        let c = txn_block_counts(events, &app.transactions);
        counters.insert("real.txn.count".into(), c.transactions);
        counters.insert("real.txn.write_bios".into(), c.write_bios);
        counters.insert("real.txn.write_requests".into(), c.write_requests);
        counters.insert("real.txn.flush_requests".into(), c.flush_requests);
        counters.insert("real.txn.flush_bios".into(), c.flush_bios);
    }
    let first = app.samples.iter().map(|s| s.start_ns).min();
    let last = app.samples.iter().map(|s| s.start_ns + s.latency_ns).max();
    AppResult {
        uid: app.uid,
        active_ns: first.zip(last).map_or(0, |(a, b)| b - a),
        ops,
        counters,
        failure: app.failure.as_ref().map(|(at, message)| AppFailure {
            at_ns: at.saturating_sub(t0).min(end_ns - t0),
            task: app.name.clone(),
            message: message.clone(),
        }),
        warnings: app.warnings.clone(),
        ..AppResult::default()
    }
}

/// Writes `events` as blkparse text (the simulation's format, times from the first event).
fn write_blkparse(path: &std::path::Path, events: &[BlockEvent]) -> Result<(), String> {
    use std::io::Write;
    let since = events.first().map_or(0, |e| e.time_ns);
    let trace = crate::block::blktrace::BlkTrace::new(0, 0, 0);
    let mut out = std::io::BufWriter::new(
        std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?,
    );
    let mut sequences: BTreeMap<(u32, u32), u64> = BTreeMap::new();
    for event in events {
        let sequence = sequences.entry((event.major, event.minor)).or_insert(0);
        *sequence += 1;
        let line = trace.format_event(*sequence, &event.to_trace_event(since));
        writeln!(out, "{line}").map_err(|e| format!("{}: {e}", path.display()))?;
    }
    out.flush().map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dioread_nolock_reaches_the_real_mount_only_when_the_scenario_sets_it() {
        use crate::fs::ext4::Ext4Config;
        let unset = machine::mount_options(&Ext4Config::default());
        assert!(!unset.contains("dioread"), "{unset}");
        let on = Ext4Config {
            dioread_nolock: Some(true),
            ..Ext4Config::default()
        };
        assert!(machine::mount_options(&on).ends_with(",dioread_nolock"));
        let off = Ext4Config {
            dioread_nolock: Some(false),
            ..Ext4Config::default()
        };
        assert!(machine::mount_options(&off).ends_with(",dioread_lock"));
    }

    fn event(t: u64, action: crate::block::blktrace::Action, rwbs: &str, n: u32) -> BlockEvent {
        BlockEvent {
            time_ns: t,
            action,
            major: 7,
            minor: 0,
            rwbs: rwbs.into(),
            sector: 0,
            nr_sectors: n,
            pid: 1,
            comm: "x".into(),
        }
    }

    #[test]
    fn counts_only_the_events_inside_transactions() {
        use crate::block::blktrace::Action::{Issue, Queue};
        let events = [
            event(5, Issue, "WS", 8),     // before
            event(10, Queue, "WS", 8),    // in the first
            event(11, Issue, "WS", 8),    // in the first
            event(12, Issue, "FF", 0),    // in the first: a flush request
            event(13, Queue, "FWFSM", 8), // in the first: a flush bio with data
            event(25, Issue, "WS", 8),    // between
            event(30, Issue, "FF", 0),    // in the second
        ];
        let c = txn_block_counts(&events, &[(10, 20), (30, 40)]);
        assert_eq!(
            c,
            TxnBlockCounts {
                transactions: 2,
                write_bios: 2,
                write_requests: 1,
                flush_requests: 2,
                flush_bios: 1,
            }
        );
    }

    #[test]
    fn pairs_issues_with_completions_per_request_class() {
        use crate::block::blktrace::Action::{Complete, Issue};
        let mut write = event(100, Issue, "WSM", 8);
        write.sector = 64;
        let mut done = event(350, Complete, "WSM", 8);
        done.sector = 64;
        // The FUA write's final completion after its post-flush: length 0, pairs with nothing.
        let mut tail = event(900, Complete, "WSM", 0);
        tail.sector = 64;
        let events = [
            write,
            event(200, Issue, "FF", 0),
            done,
            event(700, Complete, "FF", 0),
            tail,
        ];
        let times = device_service_times(&events);
        assert_eq!(times.get("write"), Some(&(1, 250)));
        assert_eq!(times.get("flush"), Some(&(1, 500)));
        assert_eq!(times.get("read"), None);
    }

    #[test]
    fn refuses_what_it_cannot_set_up_and_names_it() {
        let scenario = crate::scenario::load("demo").unwrap();
        let error = check_supported(&scenario).unwrap_err();
        assert!(error.contains("not supported in real mode yet"), "{error}");
        let cfq = crate::scenario::StackConfig::default();
        let error = check_supported_stack(&cfq).unwrap_err();
        assert!(error.contains("cfq"), "{error}");
    }
}
