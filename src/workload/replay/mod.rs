//! Block-trace replay: blkparse text, the Pixel 6a CSV of acsl-technion/MobileBlockIOTraces and
//! DiskSim ASCII ([`trace`]), replayed either through the whole stack as an app workload
//! (`[app.workload.replay]`, here) or on a device model alone (`mobistack replay`, [`device`]).
//!
//! As an app: every process of the trace (its name and pid) becomes a process of the app with
//! its own pid, so CFQ gives it its own queue and blktrace names it; `processes` keeps only the
//! processes whose names match, so a scenario can split one trace into several apps with
//! different roles (foreground, background). Each I/O becomes a bio submitted to the block layer
//! (split at `max_sectors` under a plug, as `__blkdev_direct_IO` does) by a task of its process
//! and is one operation of the app (`read`, `write`, `trim`, `flush`). Open loop: a dispatcher
//! reads the trace and hands each I/O to its process at the trace's time (times `time_scale`);
//! the process issues it on an idle task of its own, or a new one (at most [`MAX_TASKS`] per
//! process, then it waits for one), so an I/O never waits for the previous one unless the
//! block layer makes it (`get_request`). Closed loop: each process keeps `queue_depth` I/Os in
//! flight and ignores the timestamps.
//!
//! Streaming: the dispatcher holds one line; each process holds at most [`QUEUE_LIMIT`] I/Os not
//! yet issued (the dispatcher waits when one is full), so memory does not grow with the trace.
//! The whole trace is checked line by line when the scenario is loaded, so a malformed line is
//! an error with the trace's file and line before anything runs (or skipped and counted with
//! `skip_bad_lines`).

pub mod device;
pub mod trace;

use crate::app::AppContext;
use crate::block::queue::split_bio;
use crate::block::request::{Bio, IoPrio, TaskRef};
use crate::dev::IoOp;
use crate::sim::sync::WaitQueue;
use crate::sim::{Blocker, TaskId, WaitReason};
use crate::units::SECTOR_SIZE;
use serde::{Deserialize, Serialize};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use trace::{Format, ReadOptions, TimeUnit, TraceReader};

/// Bound on I/Os handed to a process and not yet issued.
pub const QUEUE_LIMIT: usize = 4096;
/// Bound on the tasks of one trace process (open loop).
pub const MAX_TASKS: usize = 256;
/// Bound on distinct processes of one trace.
pub const MAX_PROCESSES: usize = 65_536;

/// Open or closed loop.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LoopMode {
    #[default]
    Open,
    Closed,
}

fn default_event() -> String {
    "Q".to_string()
}

fn default_scale() -> f64 {
    1.0
}

fn default_depth() -> usize {
    1
}

/// The `[app.workload.replay]` table.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayConfig {
    /// The trace file.
    pub trace: String,
    /// `blkparse`, `pixel` or `disksim`; detected from the first lines when absent.
    #[serde(default)]
    pub format: Option<Format>,
    /// blkparse: the action replayed, `Q` (bios, default), `D` (requests) or `C`.
    #[serde(default = "default_event")]
    pub event: String,
    /// DiskSim: the unit of the time column (`ms`, DiskSim's, by default; MQSim's traces use
    /// `ns`).
    #[serde(default)]
    pub time_unit: Option<TimeUnit>,
    /// Replay only the processes whose names match one of these (`name`, or `prefix*`); all
    /// when empty.
    #[serde(default)]
    pub processes: Vec<String>,
    #[serde(default)]
    pub mode: LoopMode,
    /// Open loop: multiplies the trace's times (0.5 replays twice as fast).
    #[serde(default = "default_scale")]
    pub time_scale: f64,
    /// Closed loop: I/Os in flight per process.
    #[serde(default = "default_depth")]
    pub queue_depth: usize,
    /// Fold sectors beyond the device back into it instead of stopping.
    #[serde(default)]
    pub wrap: bool,
    /// Skip (and count) lines that do not parse instead of failing.
    #[serde(default)]
    pub skip_bad_lines: bool,
    /// Stop after this many I/Os.
    #[serde(default)]
    pub max_requests: Option<u64>,
}

impl ReplayConfig {
    fn read_options(&self, format: Format) -> Result<ReadOptions, String> {
        let mut options = ReadOptions::new(format);
        options.action = match self.event.as_str() {
            "Q" => b'Q',
            "D" => b'D',
            "C" => b'C',
            other => return Err(format!("replay `event` must be Q, D or C, not `{other}`")),
        };
        options.time_unit = self.time_unit.unwrap_or(TimeUnit::Ms);
        options.skip_bad_lines = self.skip_bad_lines;
        Ok(options)
    }

    fn open(&self) -> Result<TraceReader<std::io::BufReader<std::fs::File>>, String> {
        let (source, format) = trace::open(std::path::Path::new(&self.trace), self.format)
            .map_err(|e| e.to_string())?;
        Ok(TraceReader::new(
            source,
            &self.trace,
            self.read_options(format)?,
        ))
    }

    /// Checks the options and every line of the trace (streaming).
    pub fn validate(&self) -> Result<(), String> {
        if !(self.time_scale > 0.0 && self.time_scale.is_finite()) {
            return Err(format!(
                "replay `time_scale` must be positive, not {}",
                self.time_scale
            ));
        }
        if self.queue_depth == 0 || self.queue_depth > MAX_TASKS {
            return Err(format!(
                "replay `queue_depth` must be 1..={MAX_TASKS}, not {}",
                self.queue_depth
            ));
        }
        // Each mode reads one of the two: the other, set to anything but its default, would be
        // ignored without a word.
        if self.mode == LoopMode::Closed && self.time_scale != default_scale() {
            return Err(format!(
                "replay `time_scale` = {} applies to mode = \"open\" only: a closed loop ignores the trace's times (set `queue_depth` instead)",
                self.time_scale
            ));
        }
        if self.mode == LoopMode::Open && self.queue_depth != default_depth() {
            return Err(format!(
                "replay `queue_depth` = {} applies to mode = \"closed\" only: an open loop issues each request at its time (set mode = \"closed\")",
                self.queue_depth
            ));
        }
        let mut reader = self.open()?;
        let mut first_time = None;
        while let Some(record) = reader.next_record().map_err(|e| e.to_string())? {
            if self.mode == LoopMode::Open {
                let base = *first_time.get_or_insert(record.time_ns);
                self.due_after(record.time_ns.saturating_sub(base), record.line)?;
            }
        }
        Ok(())
    }

    /// When a record `relative_ns` after the trace's first is due, after the replay's start
    /// (open loop); an error naming the trace's line when that is beyond a replay's span.
    fn due_after(&self, relative_ns: u64, line: u64) -> Result<u64, String> {
        trace::scaled_time(relative_ns, self.time_scale).ok_or_else(|| {
            format!(
                "{}:{line}: {}",
                self.trace,
                trace::beyond_replay_span(relative_ns, self.time_scale, "`time_scale`")
            )
        })
    }

    fn wants(&self, name: &str) -> bool {
        self.processes.is_empty()
            || self
                .processes
                .iter()
                .any(|pattern| match pattern.strip_suffix('*') {
                    Some(prefix) => name.starts_with(prefix),
                    None => name == pattern,
                })
    }
}

/// One I/O handed to a process.
#[derive(Debug, Clone, Copy)]
struct Item {
    op: IoOp,
    sector: u64,
    nr_sectors: u32,
    flags: crate::dev::IoFlags,
}

/// A process of the trace, replayed.
struct Proc {
    task: TaskRef,
    queue: RefCell<VecDeque<Item>>,
    /// Its tasks waiting for an I/O.
    idle: WaitQueue,
    idle_tasks: Cell<usize>,
    tasks: Cell<usize>,
    /// The dispatcher waits here while the queue is full.
    space: WaitQueue,
}

struct Shared {
    ctx: AppContext,
    config: ReplayConfig,
    done: Cell<bool>,
}

/// Starts the dispatcher; returns its task.
pub fn start(ctx: &AppContext, config: &ReplayConfig) -> Result<Vec<TaskId>, String> {
    let reader = config.open()?;
    if ctx.stack.block.is_none() {
        return Err("a replay app needs the block layer".into());
    }
    let shared = Rc::new(Shared {
        ctx: ctx.clone(),
        config: config.clone(),
        done: Cell::new(false),
    });
    let handle = ctx
        .sim
        .spawn(&format!("{}/replay", ctx.name), dispatcher(shared, reader));
    Ok(vec![handle.task()])
}

async fn dispatcher(
    shared: Rc<Shared>,
    mut reader: TraceReader<std::io::BufReader<std::fs::File>>,
) {
    let ctx = shared.ctx.clone();
    let sim = ctx.sim.clone();
    let config = &shared.config;
    let block = ctx.stack.block.as_ref().expect("checked at start");
    let capacity = block.capacity_bytes / SECTOR_SIZE;
    let start_ns = sim.now();
    let mut first_time = None;
    let mut processes: BTreeMap<(String, u32), Rc<Proc>> = BTreeMap::new();
    let mut issued = 0u64;
    loop {
        if ctx.is_stopped() || config.max_requests.is_some_and(|m| issued >= m) {
            break;
        }
        let record = match reader.next_record() {
            Ok(Some(record)) => record,
            Ok(None) => break,
            Err(error) => {
                // Checked when the scenario was loaded; the file changed since.
                ctx.add_counter("replay.bad_lines", 1);
                ctx.fail(format!("trace replay stopped: {error}"));
                break;
            }
        };
        let base = *first_time.get_or_insert(record.time_ns);
        if !config.wants(record.process) {
            ctx.add_counter("replay.filtered", 1);
            continue;
        }
        let mut sector = record.sector;
        let end = sector.saturating_add(u64::from(record.nr_sectors));
        if end > capacity {
            if !config.wrap || u64::from(record.nr_sectors) > capacity {
                ctx.add_counter("replay.beyond_capacity", 1);
                ctx.add_counter("errno.ERANGE", 1);
                ctx.fail(format!(
                    "trace replay stopped: {}:{}: sectors {sector}..{end} are beyond the device's {capacity} sectors (`wrap = true` folds them in)",
                    config.trace, record.line
                ));
                break;
            }
            sector %= capacity - u64::from(record.nr_sectors) + 1;
            ctx.add_counter("replay.wrapped", 1);
        }
        let item = Item {
            op: record.op,
            sector,
            nr_sectors: record.nr_sectors,
            flags: record.flags,
        };
        let key = (record.process.to_string(), record.pid);
        let at = record.time_ns.saturating_sub(base);
        let proc = match processes.get(&key) {
            Some(proc) => proc.clone(),
            None => {
                if processes.len() >= MAX_PROCESSES {
                    ctx.add_counter("replay.too_many_processes", 1);
                    ctx.fail(format!(
                        "trace replay stopped: {}:{}: more than {MAX_PROCESSES} processes in the trace",
                        config.trace, record.line
                    ));
                    break;
                }
                let pid = ctx.stack.alloc_pid();
                let proc = Rc::new(Proc {
                    task: TaskRef {
                        pid,
                        tgid: pid,
                        uid: ctx.uid,
                        comm: key.0.as_str().into(),
                    },
                    queue: RefCell::new(VecDeque::new()),
                    idle: WaitQueue::new(),
                    idle_tasks: Cell::new(0),
                    tasks: Cell::new(0),
                    space: WaitQueue::new(),
                });
                processes.insert(key, proc.clone());
                ctx.add_counter("replay.processes", 1);
                if config.mode == LoopMode::Closed {
                    for _ in 0..config.queue_depth {
                        spawn_task(&shared, &proc);
                    }
                }
                proc
            }
        };
        if config.mode == LoopMode::Open {
            let due = match config.due_after(at, record.line) {
                Ok(after) => start_ns.saturating_add(after),
                Err(error) => {
                    // Checked when the scenario was loaded; the file changed since.
                    ctx.fail(format!("trace replay stopped: {error}"));
                    break;
                }
            };
            if due > sim.now() {
                sim.sleep(due - sim.now()).await;
            }
        }
        while proc.queue.borrow().len() >= QUEUE_LIMIT && !ctx.is_stopped() {
            proc.space
                .wait(&sim, WaitReason::WaitQueue, Blocker::None)
                .await;
        }
        proc.queue.borrow_mut().push_back(item);
        issued += 1;
        if proc.idle_tasks.get() > 0 {
            proc.idle.wake_one(&sim);
        } else if config.mode == LoopMode::Open && proc.tasks.get() < MAX_TASKS {
            spawn_task(&shared, &proc);
        }
    }
    ctx.add_counter("replay.skipped_lines", reader.skipped);
    shared.done.set(true);
    for proc in processes.values() {
        proc.idle.wake_all(&sim);
    }
}

fn spawn_task(shared: &Rc<Shared>, proc: &Rc<Proc>) {
    let index = proc.tasks.get();
    proc.tasks.set(index + 1);
    let name = format!(
        "{}/{}[{}].{index}",
        shared.ctx.name, proc.task.comm, proc.task.pid
    );
    shared
        .ctx
        .sim
        .spawn(&name, issuer(shared.clone(), proc.clone()));
}

/// A task of a trace process: issues the process's I/Os one at a time.
async fn issuer(shared: Rc<Shared>, proc: Rc<Proc>) {
    let ctx = shared.ctx.clone();
    let sim = ctx.sim.clone();
    let block = ctx.stack.block.as_ref().expect("checked at start");
    loop {
        if ctx.is_stopped() {
            // The dispatcher may wait for room in the queue: it stops too.
            proc.space.wake_all(&sim);
            return;
        }
        let item = proc.queue.borrow_mut().pop_front();
        let Some(item) = item else {
            if shared.done.get() {
                return;
            }
            proc.idle_tasks.set(proc.idle_tasks.get() + 1);
            proc.idle.wait(&sim, WaitReason::Sleep, Blocker::None).await;
            proc.idle_tasks.set(proc.idle_tasks.get() - 1);
            continue;
        };
        proc.space.wake_one(&sim);
        let name = match item.op {
            IoOp::Read => "read",
            IoOp::Write => "write",
            IoOp::Discard => "trim",
            IoOp::Flush => "flush",
        };
        let timer = ctx.begin_op(name);
        let id = block.next_bio.get();
        let bio = Bio {
            id,
            op: item.op,
            sector: item.sector,
            nr_sectors: item.nr_sectors,
            flags: item.flags,
            task: proc.task.clone(),
            ioprio: IoPrio::NONE,
            issued_async: false,
            foreground: ctx.stack.activity.is_foreground(ctx.uid),
            owner_uid: ctx.uid,
            pages: Vec::new(),
            submitted_ns: sim.now(),
        };
        let mut next_id = id + 1;
        let max_sectors = block.layer.with_queue(|queue| queue.max_sectors);
        let pieces = split_bio(bio, max_sectors, &mut next_id);
        block.next_bio.set(next_id);
        block.layer.start_plug(proc.task.pid);
        let mut handles = Vec::with_capacity(pieces.len());
        for piece in pieces {
            handles.push(block.layer.submit_bio(piece).await);
        }
        block.layer.finish_plug(proc.task.pid);
        for handle in &handles {
            block.layer.wait(proc.task.pid, handle).await;
        }
        ctx.end_op(timer);
        ctx.add_counter("replay.requests", 1);
        ctx.add_counter("bytes", u64::from(item.nr_sectors) * SECTOR_SIZE);
    }
}

#[cfg(test)]
mod tests;
