//! Executes a script's commands up to its `run` the way filebench's parser actions do
//! (`parser_gram.y`): `set` assigns variables, `define` records filesets and processes,
//! `eventgen`, `set mode`, `echo`, `sleep` and `create files` take effect in order, and the
//! first `run` / `psrun` ends the script (filebench shuts down after a run, so nothing after it
//! executes). The result is a [`Workload`] whose attributes are resolved against the variables
//! as they stand at `run` (filebench's attributes hold references to variables, read when
//! used): constants become numbers, random variables stay random and are drawn at each use.
//!
//! Checks made here, each an error with the file and line: unknown variables, a string where a
//! number is needed, flowop types that are not supported, flowops naming an unknown fileset or
//! target, `fd` / `srcfd` outside filebench's 128 descriptors, `ioprio`, `nice` and `noreadahead`
//! (no model), `cached=true`, and a missing `run` (unless the caller supplies a run time).

use super::fileset::{FilesetSpec, IntExpr};
use super::lexer::{Piece, Tok};
use super::parser::{parse, Attr, Command, FlowopDef, QuitMode, SetValue, Stmt, ThreadDef, Value};
use super::random::{custom_distribution, random_table, Distribution, RandomVar, Shaping};
use super::FbError;
use crate::sim::Rng;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

/// `THREADFLOW_MAXFD` (threadflow.h): file descriptor slots per thread.
pub const MAX_FD: i64 = 128;
/// Bound on process and thread instances of one definition.
pub const MAX_INSTANCES: i64 = 10_000;
/// Bound on thread instances of a whole script (each is a task).
pub const MAX_THREADS: u64 = 65_536;
/// Bound on a run or sleep time: about 115 days.
pub const MAX_SECONDS: u64 = 10_000_000;

/// A variable's value.
#[derive(Debug, Clone)]
pub enum Var {
    Int(i64),
    Bool(bool),
    Str(String),
    Random(Rc<RandomVar>),
}

/// What a flowop does (flowop_library.c's table, the supported part).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Read,
    Write,
    Block,
    Wakeup,
    Hog,
    Delay,
    EventLimit,
    BwLimit,
    IopsLimit,
    OpsLimit,
    FinishOnCount,
    FinishOnBytes,
    OpenFile,
    CreateFile,
    CloseFile,
    Fsync,
    FsyncSet,
    StatFile,
    ReadWholeFile,
    AppendFile,
    AppendFileRand,
    DeleteFile,
    WriteWholeFile,
    /// A composite flowop (`define flowop`): one pass through its inner flowops.
    Composite,
}

impl Kind {
    fn parse(kind: &str) -> Result<Kind, String> {
        Ok(match kind {
            "read" => Kind::Read,
            "write" => Kind::Write,
            "block" => Kind::Block,
            "wakeup" => Kind::Wakeup,
            "hog" => Kind::Hog,
            "delay" => Kind::Delay,
            "eventlimit" => Kind::EventLimit,
            "bwlimit" => Kind::BwLimit,
            "iopslimit" => Kind::IopsLimit,
            "opslimit" => Kind::OpsLimit,
            "finishoncount" => Kind::FinishOnCount,
            "finishonbytes" => Kind::FinishOnBytes,
            "openfile" => Kind::OpenFile,
            "createfile" => Kind::CreateFile,
            "closefile" => Kind::CloseFile,
            "fsync" => Kind::Fsync,
            "fsyncset" => Kind::FsyncSet,
            "statfile" => Kind::StatFile,
            "readwholefile" => Kind::ReadWholeFile,
            "appendfile" => Kind::AppendFile,
            "appendfilerand" => Kind::AppendFileRand,
            "deletefile" => Kind::DeleteFile,
            "writewholefile" => Kind::WriteWholeFile,
            "semblock" | "sempost" => {
                return Err(format!(
                    "flowop `{kind}` (System V semaphores) is not supported"
                ))
            }
            "makedir" | "removedir" | "listdir" => {
                return Err(format!(
                    "flowop `{kind}` is not supported: the VFS has no rmdir or readdir"
                ))
            }
            "aiowrite" | "aiowait" => {
                return Err(format!("flowop `{kind}` (POSIX AIO) is not supported"))
            }
            "print" | "testrandvar" => return Err(format!("flowop `{kind}` is not supported")),
            other => {
                return Err(format!(
                    "unknown flowop type `{other}` (neither a flowop of filebench's library nor a composite flowop defined with `define flowop`)"
                ))
            }
        })
    }

    /// `FLOW_TYPE_IO`: counted in the IO summary and in the process's control statistics.
    pub fn is_io(self) -> bool {
        !matches!(
            self,
            Kind::Block
                | Kind::Wakeup
                | Kind::Hog
                | Kind::Delay
                | Kind::EventLimit
                | Kind::BwLimit
                | Kind::IopsLimit
                | Kind::OpsLimit
                | Kind::FinishOnCount
                | Kind::FinishOnBytes
                | Kind::Composite
        )
    }

    /// `FLOW_ATTR_READ`.
    pub fn is_read(self) -> bool {
        matches!(self, Kind::Read | Kind::ReadWholeFile)
    }

    /// `FLOW_ATTR_WRITE`.
    pub fn is_write(self) -> bool {
        matches!(
            self,
            Kind::Write | Kind::AppendFile | Kind::AppendFileRand | Kind::WriteWholeFile
        )
    }
}

/// A flowop, resolved.
#[derive(Debug, Clone)]
pub struct Flowop {
    pub name: String,
    pub kind: Kind,
    pub line: usize,
    /// Index of the statistics it is counted under (by name, as filebench's FLOW_MASTER).
    pub stat: usize,
    pub fileset: Option<usize>,
    pub fd: usize,
    pub srcfd: usize,
    pub iosize: IntExpr,
    /// `workingset`, read once (`fo_constwss`); 0 = the file's size.
    pub wss: u64,
    pub random: bool,
    pub dsync: bool,
    pub directio: bool,
    pub rotatefd: bool,
    pub iters: IntExpr,
    pub value: IntExpr,
    pub target: Option<String>,
    /// Index of the target flowop in the same thread (limits, finishon*).
    pub target_local: Option<usize>,
    pub index: Option<IntExpr>,
    /// A composite's inner flowops, in order (indices in the thread's list).
    pub inner: Vec<usize>,
    /// Inside a composite: run only by it, not by the thread's loop.
    pub nested: bool,
}

/// A thread definition with its instances.
#[derive(Debug, Clone)]
pub struct Thread {
    pub name: String,
    pub instances: u64,
    pub memsize: u64,
    pub flowops: Vec<Flowop>,
}

/// A process definition with its instances.
#[derive(Debug, Clone)]
pub struct Process {
    pub name: String,
    pub instances: u64,
    pub threads: Vec<Thread>,
}

/// How the run goes (`run`, `psrun`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunKind {
    /// `run N` (seconds; 0 with `set mode quit timeout` means filebench's default 60).
    Run(u64),
    /// `psrun period runtime`: statistics printed every |period| seconds, reset when negative.
    Psrun { period: i64, runtime: u64 },
}

/// A script executed up to its run.
#[derive(Debug)]
pub struct Workload {
    pub file: String,
    pub filesets: Vec<Rc<FilesetSpec>>,
    pub processes: Vec<Process>,
    /// Flowop statistic names in definition order (`Flowop::stat` indexes it; filebench prints
    /// its master flowops newest first).
    pub stat_names: Vec<String>,
    pub eventgen_rate: Option<IntExpr>,
    pub mode: QuitMode,
    pub run: RunKind,
    /// Seconds slept by `sleep` before the run.
    pub sleep_before: u64,
    /// What `echo` and `version` printed, in order.
    pub messages: Vec<String>,
}

/// Loads `text` (named `file` in errors). `overrides` replace the script's `set $name`
/// values (a scenario's `set = { nfiles = 100 }` or `--set nfiles=100`); `runtime` replaces the
/// run time of the script's `run` (and is required when the script has none).
pub fn load(
    file: &str,
    text: &str,
    overrides: &BTreeMap<String, Var>,
    runtime: Option<u64>,
) -> Result<Workload, FbError> {
    if runtime.is_some_and(|r| r > MAX_SECONDS) {
        return Err(FbError::new(
            file,
            1,
            format!("the run time must be at most {MAX_SECONDS} seconds"),
        ));
    }
    let stmts = parse(file, text)?;
    check_overrides(file, text, overrides)?;
    let mut loader = Loader {
        file,
        vars: overrides.clone(),
        overrides,
        filesets: Vec::new(),
        fileset_lines: Vec::new(),
        processes: Vec::new(),
        composites: BTreeMap::new(),
        scopes: std::cell::RefCell::new(Vec::new()),
        eventgen: None,
        mode: QuitMode::Timeout,
        sleep_before: 0,
        messages: Vec::new(),
    };
    let mut run = None;
    for stmt in &stmts {
        if let Some(kind) = loader.command(stmt)? {
            run = Some((kind, stmt.line));
            break;
        }
    }
    let run = match (run, runtime) {
        (Some((RunKind::Run(_), _)), Some(seconds)) => RunKind::Run(seconds),
        (Some((RunKind::Psrun { period, .. }, _)), Some(seconds)) => RunKind::Psrun {
            period,
            runtime: seconds,
        },
        (Some((kind, _)), None) => kind,
        (None, Some(seconds)) => RunKind::Run(seconds),
        (None, None) => {
            let last = stmts.last().map_or(1, |s| s.line);
            return Err(FbError::new(
                file,
                last,
                "no run command in the WML script (add `run 60`, or give a run time)".into(),
            ));
        }
    };
    loader.finish(run)
}

/// The variables a script names: every `$name` it sets or reads, in name order.
pub fn variables(file: &str, text: &str) -> Result<BTreeSet<String>, FbError> {
    let mut names = BTreeSet::new();
    for token in super::lexer::tokenize(file, text)? {
        match token.tok {
            Tok::Var(name) => {
                names.insert(name);
            }
            Tok::Quoted(pieces) => {
                for piece in pieces {
                    if let Piece::Var(name) = piece {
                        names.insert(name);
                    }
                }
            }
            _ => {}
        }
    }
    Ok(names)
}

/// A value set for a variable the script does not have is a mistake (a misspelt `nfile` for
/// `nfiles` would otherwise be ignored without a word): an error listing the script's variables.
fn check_overrides(
    file: &str,
    text: &str,
    overrides: &BTreeMap<String, Var>,
) -> Result<(), FbError> {
    let known = variables(file, text)?;
    let Some(unknown) = overrides.keys().find(|name| !known.contains(*name)) else {
        return Ok(());
    };
    let list = if known.is_empty() {
        "it has none".to_string()
    } else {
        let names: Vec<String> = known.iter().map(|n| format!("${n}")).collect();
        format!("its variables are {}", names.join(", "))
    };
    Err(FbError::new(
        file,
        0,
        format!("set `{unknown}`: the script has no variable `${unknown}`; {list}"),
    ))
}

/// `define flowop`, as written.
struct Composite {
    attrs: Vec<Attr>,
    locals: Vec<super::parser::Local>,
    flowops: Vec<FlowopDef>,
}

/// Bound on composite flowops inside composite flowops.
const MAX_COMPOSITE_DEPTH: usize = 16;

/// The statistics index of flowop `name` (one per name, as filebench's FLOW_MASTER flowops).
fn stat_index(stat_names: &mut Vec<String>, name: &str) -> usize {
    match stat_names.iter().position(|n| n == name) {
        Some(i) => i,
        None => {
            stat_names.push(name.to_string());
            stat_names.len() - 1
        }
    }
}

struct Loader<'a> {
    file: &'a str,
    vars: BTreeMap<String, Var>,
    overrides: &'a BTreeMap<String, Var>,
    filesets: Vec<(bool, Vec<Attr>)>,
    fileset_lines: Vec<usize>,
    processes: Vec<(Vec<Attr>, Vec<ThreadDef>, usize)>,
    /// Composite flowops by name: attributes, locals, inner flowops, line.
    composites: BTreeMap<String, Composite>,
    /// Local variables of the composite flowops being instantiated, innermost last (an unbound
    /// local is kept as `name\0unset`).
    scopes: std::cell::RefCell<Vec<BTreeMap<String, Var>>>,
    eventgen: Option<(Value, usize)>,
    mode: QuitMode,
    sleep_before: u64,
    messages: Vec<String>,
}

impl Loader<'_> {
    fn err(&self, line: usize, message: String) -> FbError {
        FbError::new(self.file, line, message)
    }

    /// Executes one command; returns the run it starts, if it is one.
    fn command(&mut self, stmt: &Stmt) -> Result<Option<RunKind>, FbError> {
        let line = stmt.line;
        match &stmt.command {
            Command::Set { name, value } => {
                if !self.overrides.contains_key(name) {
                    let var = self.set_value(value, line)?;
                    self.vars.insert(name.clone(), var);
                }
            }
            Command::Mode(mode) => self.mode = *mode,
            Command::NoUseStats | Command::Usage | Command::Debug(_) | Command::CreateFiles => {}
            Command::DefineFile(attrs) => {
                self.filesets.push((true, attrs.clone()));
                self.fileset_lines.push(line);
            }
            Command::DefineFileset(attrs) => {
                self.filesets.push((false, attrs.clone()));
                self.fileset_lines.push(line);
            }
            Command::DefineProcess { attrs, threads } => {
                self.processes.push((attrs.clone(), threads.clone(), line));
            }
            Command::DefineComposite {
                attrs,
                locals,
                flowops,
            } => {
                let name = match attrs.iter().rev().find(|a| a.name == "name") {
                    Some(a) => self.string(&a.value, a.line, "name")?,
                    None => {
                        return Err(self.err(
                            line,
                            "define flowop: composite flowop specifies no name".into(),
                        ))
                    }
                };
                if Kind::parse(&name).is_ok() || self.composites.contains_key(&name) {
                    return Err(self.err(
                        line,
                        format!("define flowop: `{name}` is already a flowop type"),
                    ));
                }
                self.composites.insert(
                    name,
                    Composite {
                        attrs: attrs.clone(),
                        locals: locals.clone(),
                        flowops: flowops.clone(),
                    },
                );
            }
            Command::Eventgen(rate) => {
                if let Some(rate) = rate {
                    self.eventgen = Some((rate.clone(), line));
                }
            }
            Command::Echo(pieces) => {
                let text = self.expand(pieces, line)?;
                self.messages.push(text);
            }
            Command::Version => self
                .messages
                .push("Filebench Version: 1.5 WML (mobistack)".into()),
            Command::Sleep(value) => {
                let seconds = self.int(value, line, "sleep")?.max(0) as u64;
                self.sleep_before += seconds;
                if self.sleep_before > MAX_SECONDS {
                    return Err(
                        self.err(line, format!("sleeps must total at most {MAX_SECONDS} s"))
                    );
                }
            }
            Command::Quit => {
                return Err(self.err(line, "the script quits before any run".into()));
            }
            Command::Run(value) => {
                let seconds = match value {
                    Some(value) => self.int(value, line, "run")?,
                    None => 0,
                };
                if !(0..=MAX_SECONDS as i64).contains(&seconds) {
                    return Err(self.err(
                        line,
                        format!("run time must be 0..={MAX_SECONDS} seconds, not {seconds}"),
                    ));
                }
                return Ok(Some(RunKind::Run(seconds as u64)));
            }
            Command::Psrun { period, runtime } => {
                if period.unsigned_abs() > MAX_SECONDS || *runtime as u64 > MAX_SECONDS {
                    return Err(
                        self.err(line, format!("psrun times must be at most {MAX_SECONDS} s"))
                    );
                }
                return Ok(Some(RunKind::Psrun {
                    period: *period,
                    runtime: *runtime as u64,
                }));
            }
        }
        Ok(None)
    }

    fn expand(&self, pieces: &[Piece], line: usize) -> Result<String, FbError> {
        let mut text = String::new();
        for piece in pieces {
            match piece {
                Piece::Text(t) => text.push_str(t),
                Piece::Var(name) => match self.vars.get(name) {
                    Some(Var::Int(v)) => text.push_str(&v.to_string()),
                    Some(Var::Bool(b)) => text.push_str(if *b { "true" } else { "false" }),
                    Some(Var::Str(s)) => text.push_str(s),
                    Some(Var::Random(_)) => text.push_str(&format!("${name}")),
                    None => return Err(self.err(line, format!("unknown variable `${name}`"))),
                },
            }
        }
        Ok(text)
    }

    /// A variable: a local of the composite flowops being instantiated (innermost first), else
    /// a global.
    fn lookup(&self, name: &str, line: usize) -> Result<Var, FbError> {
        let scopes = self.scopes.borrow();
        if let Some(scope) = scopes.last() {
            if let Some(var) = scope.get(name) {
                return Ok(var.clone());
            }
            if scope.contains_key(&format!("{name}\0unset")) {
                return Err(self.err(
                    line,
                    format!("the composite flowop's local variable `${name}` is used but not given a value"),
                ));
            }
        }
        self.vars
            .get(name)
            .cloned()
            .ok_or_else(|| self.err(line, format!("variable `${name}` is used but never set")))
    }

    fn int_expr(&self, value: &Value, line: usize, what: &str) -> Result<IntExpr, FbError> {
        match value {
            Value::Int(v) => Ok(IntExpr::Const(*v)),
            Value::Bool(b) => Ok(IntExpr::Const(i64::from(*b))),
            Value::Var(name) => match &self.lookup(name, line)? {
                Var::Int(v) => Ok(IntExpr::Const(*v)),
                Var::Bool(b) => Ok(IntExpr::Const(i64::from(*b))),
                Var::Random(r) => Ok(IntExpr::Random(r.clone())),
                Var::Str(s) => Err(self.err(
                    line,
                    format!("`{what}` needs a number, but `${name}` is the string `{s}`"),
                )),
            },
            Value::Str(s) => Err(self.err(line, format!("`{what}` needs a number, not `{s}`"))),
            Value::Quoted(_) => Err(self.err(
                line,
                format!("`{what}` needs a number, not a quoted string"),
            )),
        }
    }

    fn int(&self, value: &Value, line: usize, what: &str) -> Result<i64, FbError> {
        match self.int_expr(value, line, what)? {
            IntExpr::Const(v) => Ok(v),
            IntExpr::Random(_) => Err(self.err(line, format!("`{what}` cannot be random"))),
        }
    }

    fn uint(&self, value: &Value, line: usize, what: &str) -> Result<u64, FbError> {
        let v = self.int(value, line, what)?;
        u64::try_from(v).map_err(|_| self.err(line, format!("`{what}` must not be negative")))
    }

    fn boolean(&self, value: &Value, line: usize, what: &str) -> Result<bool, FbError> {
        match value {
            Value::Bool(b) => Ok(*b),
            Value::Int(v) => Ok(*v != 0),
            Value::Var(name) => match &self.lookup(name, line)? {
                Var::Bool(b) => Ok(*b),
                Var::Int(v) => Ok(*v != 0),
                Var::Str(s) => {
                    Err(self.err(line, format!("`{what}` needs true or false, not `{s}`")))
                }
                Var::Random(_) => Err(self.err(line, format!("`{what}` cannot be random"))),
            },
            _ => Err(self.err(line, format!("`{what}` needs true or false"))),
        }
    }

    fn string(&self, value: &Value, line: usize, what: &str) -> Result<String, FbError> {
        match value {
            Value::Str(s) => Ok(s.clone()),
            Value::Quoted(pieces) => self.expand(pieces, line),
            Value::Int(v) => Ok(v.to_string()),
            Value::Bool(b) => Ok(b.to_string()),
            Value::Var(name) => match &self.lookup(name, line)? {
                Var::Str(s) => Ok(s.clone()),
                Var::Int(v) => Ok(v.to_string()),
                Var::Bool(b) => Ok(b.to_string()),
                Var::Random(_) => Err(self.err(line, format!("`{what}` cannot be random"))),
            },
        }
    }

    fn set_value(&self, value: &SetValue, line: usize) -> Result<Var, FbError> {
        Ok(match value {
            SetValue::Int(v) => Var::Int(*v),
            SetValue::Bool(b) => Var::Bool(*b),
            SetValue::Str(s) => Var::Str(s.clone()),
            SetValue::Custom(attrs) => Var::Random(Rc::new(self.custom(attrs, line)?)),
            SetValue::Random { attrs, table } => {
                Var::Random(Rc::new(self.randvar(attrs, table, line)?))
            }
        })
    }

    fn custom(&self, attrs: &[Attr], line: usize) -> Result<RandomVar, FbError> {
        let get = |name: &str| attrs.iter().rev().find(|a| a.name == name);
        let kind = match get("type") {
            Some(a) => self.string(&a.value, line, "type")?,
            None => return Err(self.err(line, "define cvar: no type specified".into())),
        };
        let parameters = match get("parameters") {
            Some(a) => self.string(&a.value, line, "parameters")?,
            None => String::new(),
        };
        let number = |name: &str, default: f64| -> Result<f64, FbError> {
            match get(name) {
                Some(a) => match &a.value {
                    Value::Str(s) => s
                        .parse::<f64>()
                        .map_err(|_| self.err(line, format!("`{name}` needs a number, not `{s}`"))),
                    other => Ok(self.int(other, line, name)? as f64),
                },
                None => Ok(default),
            }
        };
        let distribution =
            custom_distribution(&kind, &parameters).map_err(|e| self.err(line, e))?;
        Ok(RandomVar {
            distribution,
            shaping: Shaping::Custom {
                min: number("min", f64::MIN_POSITIVE)?,
                max: number("max", f64::MAX)?,
                round: number("round", 0.0)?.max(0.0) as u64,
            },
            own: None,
        })
    }

    fn randvar(
        &self,
        attrs: &[Attr],
        table: &[super::parser::TableEntry],
        line: usize,
    ) -> Result<RandomVar, FbError> {
        let get = |name: &str| attrs.iter().rev().find(|a| a.name == name);
        let int_or = |name: &str, default: i64| -> Result<i64, FbError> {
            match get(name) {
                Some(a) => self.int(&a.value, line, name),
                None => Ok(default),
            }
        };
        let min = int_or("min", 0)? as f64;
        let round = int_or("round", 0)? as f64;
        let gamma = int_or("gamma", 1500)? as f64 / 1000.0;
        let mean = get("mean")
            .map(|a| self.int(&a.value, line, "mean"))
            .transpose()?
            .map(|m| m as f64);
        let kind = match get("type") {
            Some(a) => self.string(&a.value, line, "type")?,
            None if !table.is_empty() => "tabular".into(),
            None => "gamma".into(),
        };
        let distribution = match kind.as_str() {
            "uniform" => Distribution::RandUniform {
                min,
                mean: mean.unwrap_or(0.0),
            },
            "gamma" => {
                if gamma <= 0.0 {
                    return Err(self.err(line, "a gamma randvar needs gamma > 0".into()));
                }
                Distribution::RandGamma {
                    min,
                    mean: mean.unwrap_or(gamma),
                    gamma,
                }
            }
            "tabular" => {
                if table.is_empty() {
                    return Err(self.err(
                        line,
                        "table distribution type without a probability table".into(),
                    ));
                }
                let mut entries = Vec::new();
                for entry in table {
                    entries.push((
                        self.int(&entry.percent, line, "randtable")?,
                        self.int(&entry.min, line, "randtable")? as f64,
                        self.int(&entry.max, line, "randtable")? as f64,
                    ));
                }
                let (slots, table_mean) = random_table(&entries).map_err(|e| self.err(line, e))?;
                let mean = match mean {
                    Some(m) if m != 0.0 => m,
                    _ => table_mean,
                };
                Distribution::RandTable { min, mean, slots }
            }
            other => {
                return Err(self.err(
                    line,
                    format!("unknown randvar type `{other}` (uniform, gamma or tabular)"),
                ))
            }
        };
        let own = match get("seed") {
            Some(a) => {
                let seed = self.int(&a.value, line, "seed")? as u64;
                Some(RefCell::new(Rng::named(seed, "filebench/randvar")))
            }
            None => None,
        };
        Ok(RandomVar {
            distribution,
            shaping: Shaping::Randvar { round },
            own,
        })
    }

    fn finish(self, run: RunKind) -> Result<Workload, FbError> {
        let mut filesets: Vec<Rc<FilesetSpec>> = Vec::new();
        for ((is_file, attrs), &line) in self.filesets.iter().zip(&self.fileset_lines) {
            let spec = self.fileset(*is_file, attrs, line)?;
            if filesets.iter().any(|f| f.name == spec.name) {
                return Err(self.err(
                    line,
                    format!("file or fileset `{}` is defined twice", spec.name),
                ));
            }
            filesets.push(Rc::new(spec));
        }
        // Statistics are kept per flowop name; filebench prints its master flowops newest first.
        let mut stat_names: Vec<String> = Vec::new();
        let mut processes = Vec::new();
        for (attrs, threads, line) in &self.processes {
            processes.push(self.process(attrs, threads, *line, &filesets, &mut stat_names)?);
        }
        if processes.is_empty() {
            return Err(self.err(1, "the script defines no process".into()));
        }
        let threads: u64 = processes
            .iter()
            .map(|p| p.instances * p.threads.iter().map(|t| t.instances).sum::<u64>())
            .sum();
        if threads > MAX_THREADS {
            let line = self.processes.first().map_or(1, |p| p.2);
            return Err(self.err(
                line,
                format!("{threads} thread instances exceed the limit of {MAX_THREADS}"),
            ));
        }
        // Wakeup targets name any flowop.
        for process in &processes {
            for thread in &process.threads {
                for flowop in &thread.flowops {
                    if flowop.kind == Kind::Wakeup {
                        let target = flowop.target.as_deref().unwrap_or("");
                        if !stat_names.iter().any(|n| n == target) {
                            return Err(self.err(
                                flowop.line,
                                format!("wakeup: could not find flowop `{target}`"),
                            ));
                        }
                    }
                }
            }
        }
        let eventgen_rate = match &self.eventgen {
            Some((value, line)) => Some(self.int_expr(value, *line, "rate")?),
            None => None,
        };
        let run = match run {
            RunKind::Run(0) if self.mode == QuitMode::Timeout => RunKind::Run(60),
            other => other,
        };
        Ok(Workload {
            file: self.file.to_string(),
            filesets,
            processes,
            stat_names,
            eventgen_rate,
            mode: self.mode,
            run,
            sleep_before: self.sleep_before,
            messages: self.messages,
        })
    }

    fn fileset(&self, is_file: bool, attrs: &[Attr], line: usize) -> Result<FilesetSpec, FbError> {
        let get = |name: &str| attrs.iter().rev().find(|a| a.name == name);
        let what = if is_file { "file" } else { "fileset" };
        let name = match get("name") {
            Some(a) => self.string(&a.value, a.line, "name")?,
            None => return Err(self.err(line, format!("{what} specifies no name"))),
        };
        let path = match get("path") {
            Some(a) => self.string(&a.value, a.line, "path")?,
            None => return Err(self.err(line, format!("{what} `{name}` specifies no path"))),
        };
        if !path.starts_with('/') {
            return Err(self.err(
                line,
                format!("{what} `{name}`: path `{path}` must be absolute"),
            ));
        }
        if name.is_empty() || name.contains('/') {
            return Err(self.err(
                line,
                format!("{what} name `{name}` must be one path component"),
            ));
        }
        let size = match get("size").or_else(|| get("filesize")) {
            Some(a) => self.int_expr(&a.value, a.line, "size")?,
            None => IntExpr::Const(1024),
        };
        // `prealloc` alone (or a boolean) is 100 % or 0 % (fileset_create's AVD_IS_BOOL case).
        let prealloc = match get("prealloc") {
            None => 0,
            Some(a) => {
                let boolean = match &a.value {
                    Value::Bool(b) => Some(*b),
                    Value::Var(v) => match self.lookup(v, a.line) {
                        Ok(Var::Bool(b)) => Some(b),
                        _ => None,
                    },
                    _ => None,
                };
                match boolean {
                    Some(true) => 100,
                    Some(false) => 0,
                    None => self.uint(&a.value, a.line, "prealloc")?,
                }
            }
        };
        if prealloc > 100 {
            return Err(self.err(line, format!("prealloc {prealloc} is not a percentage")));
        }
        let flag = |attr: &str| -> Result<bool, FbError> {
            match get(attr) {
                Some(a) => self.boolean(&a.value, a.line, attr),
                None => Ok(false),
            }
        };
        // Attributes with no effect here: the simulated file system starts empty (reuse,
        // trusttree), and preallocation costs no virtual time (paralloc).
        flag("reuse")?;
        flag("trusttree")?;
        flag("paralloc")?;
        if flag("cached")? {
            return Err(self.err(
                line,
                "`cached=true` (keep preallocated files in the page cache) is not supported; files start on disk, uncached".into(),
            ));
        }
        let readonly = flag("readonly")?;
        let writeonly = flag("writeonly")?;
        if is_file {
            return Ok(FilesetSpec {
                name,
                path,
                is_file,
                entries: 1,
                leafdirs: 0,
                size,
                size_gamma: None,
                dirwidth: IntExpr::Const(10),
                dirgamma: 0.0,
                dirdepthrv: None,
                prealloc,
                readonly,
                writeonly,
                line,
            });
        }
        let entries = match get("entries") {
            Some(a) => self.uint(&a.value, a.line, "entries")?,
            None => 0,
        };
        let leafdirs = match get("leafdirs") {
            Some(a) => self.uint(&a.value, a.line, "leafdirs")?,
            None => 0,
        };
        if entries == 0 && leafdirs == 0 {
            return Err(self.err(line, format!("fileset `{name}` has no files or leafdirs")));
        }
        let dirwidth = match get("dirwidth") {
            Some(a) => self.int_expr(&a.value, a.line, "dirwidth")?,
            None => return Err(self.err(line, format!("fileset `{name}` has no directory width"))),
        };
        let dirgamma = match get("dirgamma") {
            Some(a) => self.uint(&a.value, a.line, "dirgamma")? as f64 / 1000.0,
            None => 1.5,
        };
        let dirdepthrv = match get("dirdepthrv") {
            Some(a) => match self.int_expr(&a.value, a.line, "dirdepthrv")? {
                IntExpr::Random(r) => Some(r),
                IntExpr::Const(_) => {
                    return Err(self.err(a.line, "dirdepthrv must be a random variable".into()))
                }
            },
            None => None,
        };
        let size_gamma = match get("filesizegamma") {
            Some(a) => Some(self.uint(&a.value, a.line, "filesizegamma")? as f64 / 1000.0),
            None => None,
        };
        Ok(FilesetSpec {
            name,
            path,
            is_file,
            entries,
            leafdirs,
            size,
            size_gamma,
            dirwidth,
            dirgamma,
            dirdepthrv,
            prealloc,
            readonly,
            writeonly,
            line,
        })
    }

    fn instances(&self, attrs: &[Attr], line: usize) -> Result<u64, FbError> {
        match attrs.iter().rev().find(|a| a.name == "instances") {
            Some(a) => {
                let n = self.int(&a.value, a.line, "instances")?;
                if !(1..=MAX_INSTANCES).contains(&n) {
                    return Err(self.err(
                        a.line,
                        format!("instances must be between 1 and {MAX_INSTANCES}, not {n}"),
                    ));
                }
                Ok(n as u64)
            }
            None => {
                let _ = line;
                Ok(1)
            }
        }
    }

    fn process(
        &self,
        attrs: &[Attr],
        threads: &[ThreadDef],
        line: usize,
        filesets: &[Rc<FilesetSpec>],
        stat_names: &mut Vec<String>,
    ) -> Result<Process, FbError> {
        let get = |name: &str| attrs.iter().rev().find(|a| a.name == name);
        let name = match get("name") {
            Some(a) => self.string(&a.value, a.line, "name")?,
            None => return Err(self.err(line, "process specifies no name".into())),
        };
        if let Some(a) = get("nice") {
            if self.int(&a.value, a.line, "nice")? != 0 {
                return Err(self.err(
                    a.line,
                    "process `nice` is not supported (no CPU priorities)".into(),
                ));
            }
        }
        let instances = self.instances(attrs, line)?;
        let mut resolved = Vec::new();
        for thread in threads {
            let get = |name: &str| thread.attrs.iter().rev().find(|a| a.name == name);
            let thread_name = match get("name") {
                Some(a) => self.string(&a.value, a.line, "name")?,
                None => {
                    return Err(self.err(
                        thread.line,
                        format!("thread in process `{name}` specifies no name"),
                    ))
                }
            };
            if let Some(a) = get("ioprio") {
                if self.int(&a.value, a.line, "ioprio")? <= 7 {
                    return Err(self.err(
                        a.line,
                        "thread `ioprio` is not supported (the VFS issues I/O without a priority)"
                            .into(),
                    ));
                }
            }
            let memsize = match get("memsize") {
                Some(a) => self.uint(&a.value, a.line, "memsize")?,
                None => 0,
            };
            let mut flowops = Vec::new();
            for def in &thread.flowops {
                self.instantiate(def, "", 0, filesets, stat_names, &mut flowops)?;
            }
            // Limits and finishon* name a flowop of the same thread.
            for i in 0..flowops.len() {
                let flowop = &flowops[i];
                let wants_local = matches!(
                    flowop.kind,
                    Kind::BwLimit
                        | Kind::IopsLimit
                        | Kind::OpsLimit
                        | Kind::FinishOnCount
                        | Kind::FinishOnBytes
                );
                if let (true, Some(target)) = (wants_local, flowop.target.clone()) {
                    let found = flowops.iter().position(|f| f.name == target);
                    let Some(found) = found else {
                        return Err(self.err(
                            flowop.line,
                            format!("limit target: could not find flowop `{target}` in thread `{thread_name}`"),
                        ));
                    };
                    let target_kind = flowops[found].kind;
                    if matches!(
                        flowop.kind,
                        Kind::BwLimit | Kind::IopsLimit | Kind::FinishOnBytes
                    ) && !(target_kind.is_read() || target_kind.is_write())
                    {
                        return Err(self.err(
                            flowop.line,
                            format!("flowop `{target}` does no reads or writes"),
                        ));
                    }
                    flowops[i].target_local = Some(found);
                }
            }
            resolved.push(Thread {
                name: thread_name,
                instances: self.instances(&thread.attrs, thread.line)?,
                memsize,
                flowops,
            });
        }
        Ok(Process {
            name,
            instances,
            threads: resolved,
        })
    }

    /// Adds flowop `def` to a thread's `list` (a composite with its inner flowops after it, named
    /// `composite.inner` as `parser_inner_flowop_define` names them) and returns its index.
    fn instantiate(
        &self,
        def: &FlowopDef,
        prefix: &str,
        depth: usize,
        filesets: &[Rc<FilesetSpec>],
        stat_names: &mut Vec<String>,
        list: &mut Vec<Flowop>,
    ) -> Result<usize, FbError> {
        let Some(composite) = self.composites.get(&def.kind) else {
            if let Some(local) = def.locals.first() {
                return Err(self.err(
                    local.line,
                    format!(
                        "`${}=...`: only a composite flowop takes local variables, not `{}`",
                        local.name, def.kind
                    ),
                ));
            }
            let flowop = self.flowop(def, prefix, filesets, stat_names)?;
            list.push(flowop);
            return Ok(list.len() - 1);
        };
        if depth >= MAX_COMPOSITE_DEPTH {
            return Err(self.err(
                def.line,
                format!("composite flowops nest deeper than {MAX_COMPOSITE_DEPTH} (does `{}` use itself?)", def.kind),
            ));
        }
        let line = def.line;
        let get = |name: &str| def.attrs.iter().rev().find(|a| a.name == name);
        let name = match get("name") {
            Some(a) => format!("{prefix}{}", self.string(&a.value, a.line, "name")?),
            None => return Err(self.err(line, format!("flowop `{}` specifies no name", def.kind))),
        };
        if let Some(a) = def
            .attrs
            .iter()
            .find(|a| !matches!(a.name, "name" | "iters"))
        {
            return Err(self.err(
                a.line,
                format!(
                    "composite flowop `{}` takes `name`, `iters` and its local variables, not `{}`",
                    def.kind, a.name
                ),
            ));
        }
        // Iterations: the instance's, else the definition's, else 1.
        let iters = match get("iters")
            .or_else(|| composite.attrs.iter().rev().find(|a| a.name == "iters"))
        {
            Some(a) => self.int_expr(&a.value, a.line, "iters")?,
            None => IntExpr::Const(1),
        };
        // The locals: the definition's defaults, then the instance's values, both evaluated in
        // the enclosing scope.
        let mut scope = BTreeMap::new();
        for local in &composite.locals {
            match &local.value {
                Some(value) => {
                    scope.insert(local.name.clone(), self.local_value(value, local.line)?);
                }
                None => {
                    scope.insert(format!("{}\0unset", local.name), Var::Bool(false));
                }
            }
        }
        for local in &def.locals {
            if !composite.locals.iter().any(|l| l.name == local.name) {
                return Err(self.err(
                    local.line,
                    format!(
                        "composite flowop `{}` has no local variable `${}`",
                        def.kind, local.name
                    ),
                ));
            }
            let Some(value) = &local.value else {
                return Err(self.err(
                    local.line,
                    format!("`${}` needs a value (`${}=...`)", local.name, local.name),
                ));
            };
            scope.remove(&format!("{}\0unset", local.name));
            scope.insert(local.name.clone(), self.local_value(value, local.line)?);
        }
        let stat = stat_index(stat_names, &name);
        list.push(Flowop {
            name: name.clone(),
            kind: Kind::Composite,
            line,
            stat,
            fileset: None,
            fd: 0,
            srcfd: 0,
            iosize: IntExpr::Const(0),
            wss: 0,
            random: false,
            dsync: false,
            directio: false,
            rotatefd: false,
            iters,
            value: IntExpr::Const(0),
            target: None,
            target_local: None,
            index: None,
            inner: Vec::new(),
            nested: false,
        });
        let at = list.len() - 1;
        self.scopes.borrow_mut().push(scope);
        let prefix = format!("{name}.");
        let mut inner = Vec::new();
        let mut result = Ok(());
        for def in &composite.flowops {
            match self.instantiate(def, &prefix, depth + 1, filesets, stat_names, list) {
                Ok(index) => inner.push(index),
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        self.scopes.borrow_mut().pop();
        result?;
        for &index in &inner {
            list[index].nested = true;
        }
        list[at].inner = inner;
        Ok(at)
    }

    /// The value a composite's local variable is given.
    fn local_value(&self, value: &Value, line: usize) -> Result<Var, FbError> {
        Ok(match value {
            Value::Int(v) => Var::Int(*v),
            Value::Bool(b) => Var::Bool(*b),
            Value::Str(s) => Var::Str(s.clone()),
            Value::Quoted(pieces) => Var::Str(self.expand(pieces, line)?),
            Value::Var(name) => self.lookup(name, line)?,
        })
    }

    fn flowop(
        &self,
        def: &FlowopDef,
        prefix: &str,
        filesets: &[Rc<FilesetSpec>],
        stat_names: &mut Vec<String>,
    ) -> Result<Flowop, FbError> {
        let line = def.line;
        let kind = Kind::parse(&def.kind).map_err(|e| self.err(line, e))?;
        let get = |name: &str| def.attrs.iter().rev().find(|a| a.name == name);
        let name = match get("name") {
            Some(a) => format!("{prefix}{}", self.string(&a.value, a.line, "name")?),
            None => return Err(self.err(line, format!("flowop `{}` specifies no name", def.kind))),
        };
        let fileset = match get("filename").or_else(|| get("filesetname")) {
            Some(a) => {
                let set = self.string(&a.value, a.line, "filename")?;
                match filesets.iter().position(|f| f.name == set) {
                    Some(i) => Some(i),
                    None => {
                        return Err(self.err(
                            a.line,
                            format!("flowop `{name}`: file or fileset `{set}` not found"),
                        ))
                    }
                }
            }
            None => None,
        };
        let fd_attr = |attr: &str| -> Result<usize, FbError> {
            match get(attr) {
                Some(a) => {
                    let fd = self.int(&a.value, a.line, attr)?;
                    if !(0..MAX_FD).contains(&fd) {
                        return Err(self.err(
                            a.line,
                            format!("`{attr}` must be between 0 and {}", MAX_FD - 1),
                        ));
                    }
                    Ok(fd as usize)
                }
                None => Ok(0),
            }
        };
        let fd = fd_attr("fd")?;
        let srcfd = fd_attr("srcfd")?;
        let expr = |attr: &str, default: i64| -> Result<IntExpr, FbError> {
            match get(attr) {
                Some(a) => self.int_expr(&a.value, a.line, attr),
                None => Ok(IntExpr::Const(default)),
            }
        };
        let flag = |attr: &str| -> Result<bool, FbError> {
            match get(attr) {
                Some(a) => self.boolean(&a.value, a.line, attr),
                None => Ok(false),
            }
        };
        if flag("noreadahead")? {
            return Err(self.err(
                line,
                "`noreadahead` (posix_fadvise RANDOM) is not supported".into(),
            ));
        }
        let wss = match get("workingset") {
            Some(a) => self
                .int_expr(&a.value, a.line, "workingset")?
                .eval(&mut Rng::new(0))
                .max(0) as u64,
            None => 0,
        };
        let target = match get("target") {
            Some(a) => Some(self.string(&a.value, a.line, "target")?),
            None => None,
        };
        if kind == Kind::Wakeup && target.is_none() {
            return Err(self.err(line, format!("wakeup `{name}` names no target")));
        }
        let needs_file = matches!(
            kind,
            Kind::OpenFile | Kind::CreateFile | Kind::StatFile | Kind::DeleteFile | Kind::FsyncSet
        );
        if needs_file
            && fileset.is_none()
            && !(fd > 0 && matches!(kind, Kind::StatFile | Kind::DeleteFile))
        {
            return Err(self.err(
                line,
                format!("flowop `{name}` ({}) names no fileset", def.kind),
            ));
        }
        if matches!(
            kind,
            Kind::Read
                | Kind::Write
                | Kind::AppendFile
                | Kind::AppendFileRand
                | Kind::ReadWholeFile
                | Kind::WriteWholeFile
        ) && fileset.is_none()
            && fd == 0
        {
            return Err(self.err(
                line,
                format!(
                    "flowop `{name}` ({}) names neither a file nor an fd",
                    def.kind
                ),
            ));
        }
        let stat = stat_index(stat_names, &name);
        Ok(Flowop {
            name,
            kind,
            line,
            stat,
            fileset,
            fd,
            srcfd,
            iosize: expr("iosize", 0)?,
            wss,
            random: flag("random")?,
            dsync: flag("dsync")?,
            directio: flag("directio")?,
            rotatefd: flag("opennext")?,
            iters: expr("iters", 1)?,
            value: expr("value", 0)?,
            target,
            target_local: None,
            index: match get("indexed") {
                Some(a) => Some(self.int_expr(&a.value, a.line, "indexed")?),
                None => None,
            },
            inner: Vec::new(),
            nested: false,
        })
    }
}
