//! filebench workloads: `.f` files in filebench's Workload Model Language run unchanged, on
//! whatever file system the scenario mounts (every file operation goes through
//! [`crate::fs::vfs::Vfs`]).
//!
//! - [`lexer`] and [`parser`]: the WML of `parser_lex.l` / `parser_gram.y` (filebench 1.5), plus
//!   the 1.4.9 forms its personalities of the papers' era used.
//! - [`script`]: executes the commands up to `run` into a [`script::Workload`].
//! - [`random`]: filebench's distributions (gamma for sizes and directory widths, the cvar
//!   libraries, randvars) on the run's seeded, named streams.
//! - [`fileset`]: populating filesets, the create phase, picking files.
//! - [`interp`]: the threads executing flowops, the event generator, the run and its snapshot.
//! - [`stats`]: filebench's summary (per-flowop breakdown, IO Summary).
//!
//! In a scenario, `[app.workload.filebench] file = "varmail.f"` runs a script as an app whose
//! thread instances are the app's tasks; `mobistack filebench FILE.f` runs one on a stack of its
//! own and prints filebench's output ([`run_file`]). Values set from outside the script
//! (`set = {...}`, `--set`) must name one of its variables ([`script::variables`]). The
//! personalities of the context-aware thesis ship under `workloads/filebench/` and are also
//! built in by name ([`builtin`]).
//!
//! Supported: `set` (integers with k/m/g, booleans, strings, `cvar(...)`, `randvar(...)`),
//! `set mode quit timeout|alldone|firstdone`, `set mode nousestats`, `define file`, `define
//! fileset`, `define process` / `thread` / `flowop`, `eventgen rate=`, `create files`, `echo`,
//! `sleep`, `debug`, `version`, `run [N|$var]`, `psrun [period [runtime]]`, composite flowops
//! (`define flowop` with local variables, `flowop_composite`), and the flowops listed in
//! [`script::Kind`] with every attribute filebench's grammar allows them. Not supported, each an
//! error naming the file, line and construct: `system`, multi-client commands, `list`, `enable
//! lathist`, flowops `semblock`, `sempost`,
//! `makedir`, `removedir`, `listdir`, `aiowrite`, `aiowait`, `print`, `testrandvar`, the
//! attributes `noreadahead`, thread `ioprio`, process `nice`, and `cached=true`.

pub mod fileset;
pub mod interp;
pub mod lexer;
pub mod parser;
pub mod random;
pub mod script;
pub mod stats;

use crate::app::AppContext;
use crate::report::recorder::Recorder;
use crate::scenario::StackConfig;
use crate::sim::{Simulation, TaskId};
use crate::stack::Stack;
use crate::task::ForegroundState;
use crate::units::{Nanos, NS_PER_SEC};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::rc::Rc;

pub use script::Var;
pub use stats::Snapshot;

/// A mistake in a script: the file, the line (0: the script as a whole) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FbError {
    pub file: String,
    pub line: usize,
    pub message: String,
}

impl FbError {
    pub fn new(file: &str, line: usize, message: String) -> FbError {
        FbError {
            file: file.to_string(),
            line,
            message,
        }
    }
}

impl fmt::Display for FbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            // About the script as a whole (a variable set from outside it).
            0 => write!(f, "{}: {}", self.file, self.message),
            line => write!(f, "{}:{line}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for FbError {}

/// The personalities shipped in `workloads/filebench/`, by name.
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "fileserver",
        include_str!("../../../workloads/filebench/fileserver.f"),
    ),
    (
        "webserver",
        include_str!("../../../workloads/filebench/webserver.f"),
    ),
    (
        "varmail",
        include_str!("../../../workloads/filebench/varmail.f"),
    ),
    (
        "webproxy",
        include_str!("../../../workloads/filebench/webproxy.f"),
    ),
    (
        "fivestreamread",
        include_str!("../../../workloads/filebench/fivestreamread.f"),
    ),
];

/// The text of a built-in personality (`varmail` or `varmail.f`).
pub fn builtin(name: &str) -> Option<&'static str> {
    let stem = name.strip_suffix(".f").unwrap_or(name);
    BUILTIN
        .iter()
        .find(|(n, _)| *n == stem)
        .map(|(_, text)| *text)
}

/// Reads a script: a file on disk, else a built-in personality of that name. Returns the name
/// used in errors and the text.
pub fn read_script(file: &str) -> Result<(String, String), String> {
    match std::fs::read_to_string(file) {
        Ok(text) => Ok((file.to_string(), text)),
        Err(error) => {
            match builtin(file) {
                Some(text) => Ok((
                    format!("{}.f", file.trim_end_matches(".f")),
                    text.to_string(),
                )),
                None => {
                    Err(format!(
                "cannot read filebench script `{file}`: {error} (built-in personalities: {})",
                BUILTIN.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
            ))
                }
            }
        }
    }
}

/// A variable override as written in a scenario or on the command line: integers (with
/// filebench's `k`/`m`/`g`), `true`/`false`, or strings.
pub fn override_value(text: &str) -> Var {
    match text {
        "true" => return Var::Bool(true),
        "false" => return Var::Bool(false),
        _ => {}
    }
    if let Ok(tokens) = lexer::tokenize("", text) {
        if let [lexer::Token {
            tok: lexer::Tok::Int(n),
            ..
        }] = tokens.as_slice()
        {
            return Var::Int(*n);
        }
    }
    Var::Str(text.to_string())
}

/// The `[app.workload.filebench]` table.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FilebenchConfig {
    /// The script: a path, or a built-in personality (`fileserver`, `webserver`, `varmail`,
    /// `webproxy`, `fivestreamread`).
    pub file: String,
    /// Values for the script's variables, replacing its `set $name = ...` (e.g. `{ nfiles =
    /// 100, dir = "/data" }`).
    #[serde(default)]
    pub set: BTreeMap<String, toml::Value>,
    /// Replaces the run time of the script's `run` (whole seconds); required if it has none.
    #[serde(default, with = "option_duration")]
    pub runtime: Option<Nanos>,
}

impl FilebenchConfig {
    fn overrides(&self) -> Result<BTreeMap<String, Var>, String> {
        let mut vars = BTreeMap::new();
        for (name, value) in &self.set {
            let var = match value {
                toml::Value::Integer(n) => Var::Int(*n),
                toml::Value::Boolean(b) => Var::Bool(*b),
                toml::Value::String(s) => override_value(s),
                other => {
                    return Err(format!(
                    "filebench `set.{name}`: expected an integer, a boolean or a string, not {}",
                    other.type_str()
                ))
                }
            };
            vars.insert(name.trim_start_matches('$').to_string(), var);
        }
        Ok(vars)
    }

    /// The script, loaded (errors name the script's file and line).
    pub fn load(&self) -> Result<script::Workload, String> {
        let (name, text) = read_script(&self.file)?;
        let runtime = self.runtime.map(|ns| ns.div_ceil(NS_PER_SEC));
        script::load(&name, &text, &self.overrides()?, runtime).map_err(|e| e.to_string())
    }

    pub fn validate(&self) -> Result<(), String> {
        self.load().map(|_| ())
    }
}

/// Starts the app's filebench run: the create phase now, then the threads as the app's tasks.
pub fn start(ctx: &AppContext, config: &FilebenchConfig) -> Result<Vec<TaskId>, String> {
    let workload = Rc::new(config.load()?);
    let vfs = ctx
        .stack
        .vfs
        .clone()
        .ok_or("a filebench app needs the storage stack")?;
    let (_, tasks) = interp::start(ctx, vfs, workload)?;
    Ok(tasks)
}

/// Options of [`run_file`].
#[derive(Debug, Clone)]
pub struct RunFileOptions {
    pub seed: u64,
    pub stack: StackConfig,
    pub overrides: BTreeMap<String, Var>,
    /// Replaces the script's run time, in seconds.
    pub runtime: Option<u64>,
}

/// What `mobistack filebench` prints and returns.
#[derive(Debug, Clone, Serialize)]
pub struct FilebenchReport {
    pub script: String,
    pub device: String,
    pub elevator: String,
    /// filebench's output, timestamped in virtual seconds.
    pub log: Vec<String>,
    /// The final statistics; None when the run had no valid results.
    pub result: Option<Snapshot>,
    /// Why there are no valid results.
    pub error: Option<String>,
    pub virtual_ns: Nanos,
    pub counters: BTreeMap<String, u64>,
}

/// Runs a script on a stack built from `options.stack`, the way `filebench -f FILE` runs it.
/// Script errors come back as `Err` with the file and line; a run that fails (a flowop's
/// error, a deadlock or livelock of the engine) is a report with `error` set.
pub fn run_file(
    name: &str,
    text: &str,
    options: &RunFileOptions,
) -> Result<FilebenchReport, String> {
    run_file_with_progress(name, text, options, |_| {})
}

/// [`run_file`], calling `progress` with the virtual time now and then (every few thousand
/// engine events: a progress bar's hook, never in a hot path; it cannot change the results).
pub fn run_file_with_progress(
    name: &str,
    text: &str,
    options: &RunFileOptions,
    progress: impl FnMut(Nanos) + 'static,
) -> Result<FilebenchReport, String> {
    let workload = Rc::new(
        script::load(name, text, &options.overrides, options.runtime).map_err(|e| e.to_string())?,
    );
    options.stack.validate()?;
    let simulation = Simulation::new(options.seed);
    let sim = simulation.handle();
    sim.set_progress_hook(progress);
    let uid = crate::scenario::FIRST_APPLICATION_UID;
    let activity = Rc::new(ForegroundState::new(Some(uid)));
    let stack = Stack::new_with_storage(
        &sim,
        &options.stack,
        activity,
        options.stack.vm.clone(),
        None,
    )?;
    let vfs = stack.vfs.clone().expect("a storage stack has a VFS");
    let recorder = Rc::new(Recorder::new());
    let ctx = AppContext::new(sim.clone(), 0, "filebench", uid, stack.clone(), recorder);
    let (run, _) = interp::start(&ctx, vfs, workload.clone())?;
    run.stop_engine_at_end.set(true);
    let limit = crate::scenario::DEFAULT_RUN_LIMIT
        .max((workload.sleep_before + run_seconds(&workload) + 60).saturating_mul(NS_PER_SEC));
    let end = sim.run_until(limit, true);
    let result = run.result.borrow().clone();
    let error = match (end, run.abort_reason()) {
        (Err(stuck), _) => Some(format!("the filebench run could not finish: {stuck}")),
        (_, Some(interp::Abort::Error(message))) => Some(message),
        _ if result.is_none() => Some("the run did not finish".into()),
        _ => None,
    };
    Ok(FilebenchReport {
        script: name.to_string(),
        device: options.stack.device.profile.clone(),
        elevator: options.stack.block.elevator.clone(),
        log: run.log(),
        result,
        error,
        virtual_ns: sim.now(),
        counters: stack.counters(),
    })
}

fn run_seconds(workload: &script::Workload) -> u64 {
    match workload.run {
        script::RunKind::Run(seconds) => seconds,
        script::RunKind::Psrun { runtime, .. } => runtime,
    }
}

/// `Option<Nanos>` in human units ("30s").
mod option_duration {
    use crate::units::Nanos;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Nanos>, D::Error> {
        #[derive(Deserialize)]
        struct Wrap(#[serde(with = "crate::units::serde_units::duration")] Nanos);
        Ok(Option::<Wrap>::deserialize(d)?.map(|Wrap(v)| v))
    }

    pub fn serialize<S: Serializer>(value: &Option<Nanos>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(v) => crate::units::serde_units::duration::serialize(v, s),
            None => s.serialize_none(),
        }
    }
}

#[cfg(test)]
mod tests;

/// The stack of a command-line run: the `[stack]` table of `stack_file` (a scenario file, or a
/// file holding only `[stack]`), else the defaults, with `device` and `elevator` replacing the
/// profile and the I/O scheduler when given.
pub fn command_line_stack(
    stack_file: Option<&std::path::Path>,
    device: Option<&str>,
    elevator: Option<&str>,
) -> Result<StackConfig, String> {
    let mut stack = match stack_file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            let table: toml::Table = toml::from_str(&text)
                .map_err(|e| format!("{}: {}", path.display(), e.message()))?;
            match table.get("stack") {
                Some(value) => value
                    .clone()
                    .try_into::<StackConfig>()
                    .map_err(|e| format!("{}: [stack]: {}", path.display(), e.message()))?,
                None => return Err(format!("{} has no [stack] table", path.display())),
            }
        }
        None => StackConfig::default(),
    };
    if let Some(device) = device {
        stack.device.profile = device.to_string();
    }
    if let Some(elevator) = elevator {
        stack.block.elevator = elevator.to_string();
    }
    stack.validate()?;
    Ok(stack)
}

/// Parses `--set name=value` arguments.
pub fn parse_overrides(pairs: &[String]) -> Result<BTreeMap<String, Var>, String> {
    let mut vars = BTreeMap::new();
    for pair in pairs {
        let (name, value) = pair
            .split_once('=')
            .ok_or_else(|| format!("--set {pair}: expected NAME=VALUE"))?;
        vars.insert(
            name.trim().trim_start_matches('$').to_string(),
            override_value(value.trim()),
        );
    }
    Ok(vars)
}
