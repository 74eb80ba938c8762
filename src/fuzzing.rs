//! The fuzzing harness: parses AND runs one untrusted input of each kind the commands accept,
//! under a small budget, so that a fuzzer (`fuzz/`, `docs/fuzzing.md`) and the corpus test
//! (`tests/fuzz_corpus.rs`) exercise what a parsed input then does, not only the parser.
//!
//! One function per kind, each the path of its command:
//! - [`fio_job_file`]: a fio job file through the block layer and a device (`mobistack fio`);
//! - [`filebench_script`]: a filebench WML script on the storage stack (`mobistack filebench`);
//! - [`replay_trace`]: a block trace replayed on a device (`mobistack replay`), every format;
//! - [`sqlite_statements`]: SQL statements, one per line, as the `statements` of an
//!   `[app.workload.sqlite]` app in a scenario (`mobistack run`);
//! - [`scenario_toml`]: a whole scenario file (`mobistack run`).
//!
//! The budget ([`BUDGET`]): at most [`Budget::virtual_ns`] of virtual time per run (the input's
//! duration, fio's `runtime`, filebench's run are cut to it), at most [`Budget::max_events`]
//! engine events per simulation (`crate::sim::budget`: the run ends as a normal end,
//! `RunEnd::EventLimit`), and sizes cut so that an input cannot allocate gigabytes. The cuts
//! are made on the parsed configuration here, never in the product: a clamped input is still a
//! valid input of the product, only smaller.
//!
//! The oracles: (1) no panic: every function returns, whatever the input; a panic is a bug
//! found. (2) No hang: the event bound ends every simulation; a run that goes on without the
//! engine (the device replay loop) is bounded by its request cap. (3) The engine's deadlock and
//! zero-time livelock detectors: their error is a [`Error::Finding`] for every kind, except for
//! a scenario with a `toy-locks` app, the one workload that takes locks in an order chosen by the
//! file and so may deadlock by design (`scenarios/deadlock.toml`); there the report is the
//! product's answer ([`Error::Input`]). Everything else that ends a run with an error (a job
//! that does not fit the device, a script error) is the product rejecting the input: an
//! [`Error::Input`], not a finding.
//!
//! Optional directives on the input's first line choose the command-line options a fuzzer
//! should also vary: `#fuzz: key=value key=value` (stripped before the input is parsed;
//! unknown keys and bad values are ignored). fio and filebench: `device=PROFILE`,
//! `elevator=NAME`; replay: `device=`, `format=`, `event=`, `time-unit=`, `time-scale=`,
//! `queue-depth=`, `wrap`, `skip-bad-lines`.
//!
//! Simplifications: the budget is far below a real run (100 ms of virtual time), so a bug that
//! needs a long run is out of reach; silence (a workload that ends early without saying why) is
//! not an oracle here; no output (tables, JSON) is rendered.

use crate::scenario::{Scenario, WorkloadConfig};
use crate::sim::budget::{with_event_limit, BudgetReport};
use crate::sim::SimError;
use crate::units::{Nanos, NS_PER_MS};
use std::collections::BTreeMap;

/// The budget of one input.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Virtual time of a run.
    pub virtual_ns: Nanos,
    /// Events one simulation processes (a bound on wall time).
    pub max_events: u64,
    /// Bytes a fio job's region covers; a device's capacity is cut to [`Budget::max_capacity`].
    pub max_job_bytes: u64,
    /// A device's capacity (an input may choose larger devices).
    pub max_capacity: u64,
    /// Requests one trace replays.
    pub max_requests: u64,
    /// fio jobs, clones (`numjobs`) per job and queue depth per clone.
    pub max_jobs: usize,
    pub max_numjobs: u32,
    pub max_iodepth: u32,
    /// Instances of a filebench process or thread, files per fileset.
    pub max_instances: u64,
    pub max_entries: u64,
    /// SQL statements of one input.
    pub max_statements: usize,
    /// Variants of one scenario run (each with its first seed only).
    pub max_variants: usize,
}

/// The budget the fuzz targets and the corpus test use.
pub const BUDGET: Budget = Budget {
    virtual_ns: 100 * NS_PER_MS,
    max_events: 200_000,
    max_job_bytes: 64 << 20,
    max_capacity: 8 << 30,
    max_requests: 5_000,
    max_jobs: 8,
    max_numjobs: 4,
    max_iodepth: 64,
    max_instances: 4,
    max_entries: 1_000,
    max_statements: 64,
    max_variants: 2,
};

/// What became of an input that did not run to its (budgeted) end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The product rejected the input or ended its run with an error: its answer, not a bug.
    Input(String),
    /// A bug found other than a panic: a deadlock or a zero-time livelock (see the module
    /// header for when these count).
    Finding(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Input(message) => write!(f, "input rejected: {message}"),
            Error::Finding(message) => write!(f, "finding: {message}"),
        }
    }
}

/// How a run that did not fail ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ran {
    /// The event bound ended a run (the input would have run longer).
    pub event_limit_reached: bool,
}

/// The result of one input.
pub type Outcome = Result<Ran, Error>;

/// The kinds of input, by the name of their fuzz target (`fuzz/fuzz_targets/<name>.rs`,
/// `fuzz/corpus/<name>/`).
pub const TARGETS: [&str; 5] = [
    "fio_run",
    "filebench_run",
    "replay_run",
    "sqlite_run",
    "scenario_run",
];

/// Runs `data` as the input of fuzz target `target` (one of [`TARGETS`]); None for another
/// name. Bytes that are not UTF-8 are an [`Error::Input`] for the text kinds.
pub fn run_target(target: &str, data: &[u8]) -> Option<Outcome> {
    let text = || std::str::from_utf8(data).map_err(|e| Error::Input(e.to_string()));
    Some(match target {
        "fio_run" => text().and_then(fio_job_file),
        "filebench_run" => text().and_then(filebench_script),
        "replay_run" => replay_trace(data),
        "sqlite_run" => text().and_then(sqlite_statements),
        "scenario_run" => text().and_then(scenario_toml),
        _ => return None,
    })
}

/// The `#fuzz:` directives of the first line, and the rest of the input.
fn directives(text: &str) -> (BTreeMap<String, String>, &str) {
    let Some(rest) = text.strip_prefix("#fuzz:") else {
        return (BTreeMap::new(), text);
    };
    let (line, body) = rest.split_once('\n').unwrap_or((rest, ""));
    let map = line
        .split_whitespace()
        .map(|pair| match pair.split_once('=') {
            Some((key, value)) => (key.to_string(), value.to_string()),
            None => (pair.to_string(), String::new()),
        })
        .collect();
    (map, body)
}

/// The engine's verdict on a run: an engine error is a finding unless `may_block` (the input
/// may deadlock by design), then it is the product's answer.
fn judge<T>(
    result: Result<T, String>,
    report: &BudgetReport,
    may_block: bool,
) -> Result<Ran, Error> {
    match (&report.engine_error, result) {
        (Some(error), _) if !may_block => Err(Error::Finding(engine_finding(error))),
        (_, Err(message)) => Err(Error::Input(message)),
        (_, Ok(_)) => Ok(Ran {
            event_limit_reached: report.event_limit_reached,
        }),
    }
}

fn engine_finding(error: &SimError) -> String {
    match error {
        SimError::Deadlock(_) => format!("deadlock: {error}"),
        SimError::Livelock(_) => format!("livelock: {error}"),
    }
}

/// A fio job file, run as `mobistack fio` runs it (default device `emmc-5.1`, elevator `cfq`).
/// Each job's `runtime` is cut to the budget (a job without one gets it: fio's `runtime` also
/// ends a sized job), its region to [`Budget::max_job_bytes`], its clones and depth too.
pub fn fio_job_file(text: &str) -> Outcome {
    let (options, body) = directives(text);
    let mut jobs = crate::workload::fio::parse_job_file(body).map_err(Error::Input)?;
    jobs.truncate(BUDGET.max_jobs);
    for job in &mut jobs {
        job.runtime = Some(job.runtime.unwrap_or(Nanos::MAX).min(BUDGET.virtual_ns));
        job.size = Some(job.size.unwrap_or(u64::MAX).min(BUDGET.max_job_bytes));
        job.numjobs = job.numjobs.min(BUDGET.max_numjobs);
        job.iodepth = job.iodepth.min(BUDGET.max_iodepth);
    }
    let device = device_config(&options, "emmc-5.1");
    let elevator = options.get("elevator").map_or("cfq", String::as_str);
    let (result, report) = with_event_limit(BUDGET.max_events, || {
        let device = crate::dev::build_device(&device, 1)?;
        crate::workload::fio::run_fio(&jobs, device, elevator, Default::default())
    });
    judge(result, &report, false)
}

/// The device a directive names (`device=`), its capacity cut to the budget.
fn device_config(options: &BTreeMap<String, String>, default: &str) -> crate::dev::DeviceConfig {
    let mut config = crate::dev::DeviceConfig {
        profile: options
            .get("device")
            .map_or(default, String::as_str)
            .to_string(),
        ..Default::default()
    };
    cap_device(&mut config);
    config
}

fn cap_device(config: &mut crate::dev::DeviceConfig) {
    if let Some(capacity) = &mut config.capacity {
        *capacity = (*capacity).min(BUDGET.max_capacity);
    }
}

/// A filebench script, run as `mobistack filebench` runs it (the default stack, or the
/// `device=` and `elevator=` directives) but for [`Budget::virtual_ns`] of virtual time: the
/// `run` is cut to one second, a `sleep` before it dropped, instances and fileset entries cut.
pub fn filebench_script(text: &str) -> Outcome {
    use crate::workload::filebench::{command_line_stack, interp, script};
    let (options, body) = directives(text);
    let mut workload = script::load("fuzz.f", body, &BTreeMap::new(), Some(1))
        .map_err(|e| Error::Input(e.to_string()))?;
    workload.sleep_before = 0;
    for process in &mut workload.processes {
        process.instances = process.instances.min(BUDGET.max_instances);
        for thread in &mut process.threads {
            thread.instances = thread.instances.min(BUDGET.max_instances);
            thread.memsize = thread.memsize.min(BUDGET.max_job_bytes);
        }
    }
    for fileset in &mut workload.filesets {
        let fileset = std::rc::Rc::make_mut(fileset);
        fileset.entries = fileset.entries.min(BUDGET.max_entries);
        fileset.leafdirs = fileset.leafdirs.min(BUDGET.max_entries);
    }
    let mut stack = command_line_stack(
        None,
        options.get("device").map(String::as_str),
        options.get("elevator").map(String::as_str),
    )
    .map_err(Error::Input)?;
    cap_device(&mut stack.device);
    let workload = std::rc::Rc::new(workload);
    let (result, report) = with_event_limit(BUDGET.max_events, || {
        stack.validate()?;
        let simulation = crate::sim::Simulation::new(1);
        let sim = simulation.handle();
        let uid = crate::scenario::FIRST_APPLICATION_UID;
        let activity = std::rc::Rc::new(crate::task::ForegroundState::new(Some(uid)));
        let stack =
            crate::stack::Stack::new_with_storage(&sim, &stack, activity, stack.vm.clone(), None)?;
        let vfs = stack.vfs.clone().ok_or("a storage stack has a VFS")?;
        let recorder = std::rc::Rc::new(crate::report::recorder::Recorder::new());
        let ctx = crate::app::AppContext::new(sim.clone(), 0, "filebench", uid, stack, recorder);
        interp::start(&ctx, vfs, workload)?;
        // An engine error is judged from the report; its message is not needed twice.
        let _ = sim.run_until(BUDGET.virtual_ns, true);
        Ok::<(), String>(())
    });
    judge(result, &report, false)
}

/// A block trace, replayed as `mobistack replay` replays it (written to a temporary file, since
/// the command reads a path): format detected unless a directive names it, open loop at the
/// trace's timestamps unless `queue-depth=` asks for a closed loop, at most
/// [`Budget::max_requests`] requests.
pub fn replay_trace(data: &[u8]) -> Outcome {
    use crate::workload::replay::device::{run_command, CommandArgs};
    let (options, body) = match std::str::from_utf8(data) {
        Ok(text) => {
            let (options, body) = directives(text);
            (options, body.as_bytes())
        }
        Err(_) => (BTreeMap::new(), data),
    };
    let path = std::env::temp_dir().join(format!(
        "mobistack-fuzz-replay-{}-{:?}.trace",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::write(&path, body).map_err(|e| Error::Input(format!("cannot write: {e}")))?;
    let get = |key: &str| options.get(key).cloned();
    let args = CommandArgs {
        trace: path.clone(),
        device: get("device").unwrap_or_else(|| "emmc-5.1".into()),
        capacity: None,
        fill: None,
        format: get("format"),
        event: get("event").unwrap_or_else(|| "D".into()),
        time_unit: get("time-unit").unwrap_or_else(|| "ms".into()),
        time_scale: get("time-scale")
            .and_then(|s| s.parse().ok())
            .unwrap_or(1.0),
        queue_depth: get("queue-depth").and_then(|s| s.parse().ok()),
        wrap: options.contains_key("wrap"),
        skip_bad_lines: options.contains_key("skip-bad-lines"),
        max_requests: Some(BUDGET.max_requests),
    };
    // A device replay needs no engine; the bound covers a simulation should one be built.
    let (result, report) = with_event_limit(BUDGET.max_events, || run_command(&args, &|_| {}));
    let _ = std::fs::remove_file(&path);
    judge(result, &report, false)
}

/// SQL statements, one per non-empty line (`--` lines skipped), as the `statements` of a
/// SQLite app in a scenario run for [`Budget::virtual_ns`].
pub fn sqlite_statements(text: &str) -> Outcome {
    let statements: Vec<toml::Value> = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with("--"))
        .take(BUDGET.max_statements)
        .map(|line| toml::Value::String(line.to_string()))
        .collect();
    let mut sqlite = toml::Table::new();
    sqlite.insert("database".into(), "/data/fuzz/fuzz.db".into());
    sqlite.insert("statements".into(), toml::Value::Array(statements));
    let mut workload = toml::Table::new();
    workload.insert("sqlite".into(), sqlite.into());
    let mut app = toml::Table::new();
    app.insert("name".into(), "db".into());
    app.insert("workload".into(), workload.into());
    let mut file = toml::Table::new();
    file.insert("name".into(), "fuzz-sqlite".into());
    file.insert("duration".into(), "100ms".into());
    file.insert("app".into(), toml::Value::Array(vec![app.into()]));
    let source = toml::to_string(&file).map_err(|e| Error::Input(e.to_string()))?;
    scenario_toml(&source)
}

/// A scenario file, run as `mobistack run` runs it: its duration cut to the budget, its first
/// seed only, its first [`Budget::max_variants`] variants, device capacities cut.
/// `mobistack run` checks the page cache's invariants only with `--check` or in a debug build;
/// so does this.
pub fn scenario_toml(text: &str) -> Outcome {
    let mut scenario =
        crate::scenario::parse("fuzz.toml", text).map_err(|e| Error::Input(e.to_string()))?;
    scenario.duration = scenario.duration.min(BUDGET.virtual_ns);
    scenario.variants.truncate(BUDGET.max_variants);
    for variant in &mut scenario.variants {
        cap_device(&mut variant.stack.device);
    }
    // One run after the other on this thread (`run_scenario` runs them on worker threads,
    // outside this thread's event bound), as `run_scenario` runs each (variant, seed).
    let seed = scenario.seeds.first().copied().unwrap_or(1);
    let (result, report) = with_event_limit(BUDGET.max_events, || {
        scenario.variants.iter().try_for_each(|variant| {
            crate::run::run_one(&scenario, variant, seed, |_| {})
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
    });
    judge(result, &report, may_deadlock(&scenario))
}

/// Whether the scenario takes locks in an order its file chooses (a `toy-locks` app), so that
/// a deadlock report is the product's answer.
fn may_deadlock(scenario: &Scenario) -> bool {
    scenario
        .apps
        .iter()
        .any(|app| matches!(app.workload, WorkloadConfig::ToyLocks(_)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directives_are_read_from_the_first_line_and_stripped() {
        let (map, body) = directives("#fuzz: device=ufs-3.1 wrap\n[job]\nrw=read\n");
        assert_eq!(map.get("device").map(String::as_str), Some("ufs-3.1"));
        assert!(map.contains_key("wrap"));
        assert_eq!(body, "[job]\nrw=read\n");
        assert_eq!(directives("[job]\n").1, "[job]\n");
    }

    #[test]
    fn a_fio_job_runs_within_the_budget() {
        let outcome = fio_job_file("[r]\nrw=randread\nbs=4k\nsize=16m\ndirect=1\n");
        assert_eq!(
            outcome,
            Ok(Ran {
                event_limit_reached: false
            })
        );
        assert!(matches!(
            fio_job_file("[r]\nrw=sideways\n"),
            Err(Error::Input(_))
        ));
    }

    #[test]
    fn sql_statements_run_in_a_scenario() {
        let outcome =
            sqlite_statements("CREATE TABLE IF NOT EXISTS t(v)\nINSERT INTO t VALUES(1)\n");
        assert!(outcome.is_ok(), "{outcome:?}");
    }

    #[test]
    fn a_deadlock_is_a_finding_except_for_lock_workloads() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/scenarios/deadlock.toml"
        ))
        .unwrap();
        assert!(matches!(scenario_toml(&text), Err(Error::Input(_))));
        let report = BudgetReport {
            event_limit_reached: false,
            engine_error: Some(SimError::Deadlock(crate::sim::Deadlock {
                now_ns: 0,
                blocked: Vec::new(),
                chains: Vec::new(),
            })),
        };
        assert!(matches!(
            judge(Ok(()), &report, false),
            Err(Error::Finding(_))
        ));
    }
}
