//! Records per-app, per-operation latency distributions, blocked time by reason and counters while
//! a run goes on.
//!
//! Operations still in progress when the run ends are results too ([`Recorder::finish`]): an
//! fsync blocked for 9 s when the run stops has a latency of at least 9 s. Each is recorded at
//! its time so far, so every statistic of its operation (count aside) is a lower bound of the
//! true one, counted as `unfinished`, explained by the wait it is still in, and considered among
//! the slowest operations.

use super::results::{
    AppFailure, AppResult, OpSummary, SlowOp, SlowWait, UnfinishedOp, WARNINGS_KEPT,
};
use crate::sim::timeline::SliceKind;
use crate::sim::{BlockedTimes, Sim, TaskId, Wait, WaitLog, WaitRecord};
use crate::units::Nanos;
use hdrhistogram::Histogram;
use std::cell::RefCell;
use std::collections::BTreeMap;

/// Highest latency a histogram tracks exactly: one hour. Longer values are clamped (and counted
/// in `max_ns` exactly).
const HISTOGRAM_HIGHEST_NS: u64 = 3_600_000_000_000;
/// Three significant figures, the precision the reports print.
const HISTOGRAM_SIGFIG: u8 = 3;

/// An operation in progress: started by [`OpTimer::begin`], recorded by [`Recorder::end_op`].
#[derive(Debug, Clone, Copy)]
pub struct OpTimer {
    op: &'static str,
    task: TaskId,
    start_ns: Nanos,
    blocked_before: BlockedTimes,
}

impl OpTimer {
    /// Called from the task performing the operation. Starts the task's wait log, so the
    /// operation's latency can be explained wait by wait (one operation per task at a time).
    pub fn begin(sim: &Sim, op: &'static str) -> OpTimer {
        let task = sim.current_task().expect("an operation runs in a task");
        sim.start_wait_log(task);
        OpTimer {
            op,
            task,
            start_ns: sim.now(),
            blocked_before: sim.blocked_times(task),
        }
    }
}

/// How many of the slowest operations per app and operation keep their waits.
pub const SLOWEST_KEPT: usize = 3;
/// How many waits of a slow operation are kept (the longest).
const WAITS_KEPT: usize = 6;

struct OpRecord {
    histogram: Histogram<u64>,
    sum_ns: u128,
    max_ns: u64,
    blocked: BlockedTimes,
    /// The slowest operations, slowest first.
    slowest: Vec<SlowOp>,
    /// Operations still in progress when the run ended (in the histogram at their time so far).
    unfinished: u64,
    /// The longest of them, longest first.
    unfinished_ops: Vec<UnfinishedOp>,
}

/// How many unfinished operations per app and operation are kept with their waits.
pub const UNFINISHED_KEPT: usize = 8;

impl OpRecord {
    fn new() -> Self {
        OpRecord {
            histogram: Histogram::new_with_bounds(1, HISTOGRAM_HIGHEST_NS, HISTOGRAM_SIGFIG)
                .expect("valid histogram bounds"),
            sum_ns: 0,
            max_ns: 0,
            blocked: BlockedTimes::default(),
            slowest: Vec::new(),
            unfinished: 0,
            unfinished_ops: Vec::new(),
        }
    }

    /// Adds one operation's latency (or, unfinished, its time so far) and blocked time.
    fn record(&mut self, latency: Nanos, blocked: &BlockedTimes) {
        self.histogram
            .saturating_record(latency.min(HISTOGRAM_HIGHEST_NS));
        self.sum_ns += u128::from(latency);
        self.max_ns = self.max_ns.max(latency);
        for (reason, nanos) in blocked.nonzero() {
            self.blocked.add(reason, nanos);
        }
    }

    /// Keeps the operation if it is among the slowest, with its longest waits described.
    /// An `unfinished` operation's `current` wait (the one it is still in) counts up to now.
    fn consider_slow(
        &mut self,
        sim: &Sim,
        timer: &OpTimer,
        latency: Nanos,
        log: &WaitLog,
        (unfinished, current): (bool, Option<Wait>),
    ) {
        let position = self.slowest.partition_point(|s| s.latency_ns >= latency);
        if position >= SLOWEST_KEPT {
            return;
        }
        let current = current.map(|wait| WaitRecord {
            wait,
            ended_ns: sim.now(),
        });
        let mut records: Vec<&WaitRecord> = log
            .records
            .iter()
            .chain(current.as_ref())
            .filter(|r| !r.wait.reason.is_voluntary())
            .collect();
        records.sort_by_key(|r| std::cmp::Reverse(r.ended_ns - r.wait.since_ns));
        let waits = records
            .iter()
            .take(WAITS_KEPT)
            .map(|r| SlowWait {
                reason: r.wait.reason.name().to_string(),
                layer: r.wait.reason.layer().to_string(),
                on: sim.describe_blocker(r.wait.blocker),
                held_by: r.wait.holder.map(|t| sim.task_name(t)),
                start_ns: r.wait.since_ns,
                ns: r.ended_ns - r.wait.since_ns,
                still_waiting: current.as_ref() == Some(*r),
            })
            .collect();
        self.slowest.insert(
            position,
            SlowOp {
                start_ns: timer.start_ns,
                latency_ns: latency,
                task: sim.task_name(timer.task),
                waits,
                waits_not_logged: log.dropped,
                unfinished,
            },
        );
        self.slowest.truncate(SLOWEST_KEPT);
    }
}

#[derive(Default)]
struct AppRecord {
    ops: BTreeMap<&'static str, OpRecord>,
    counters: BTreeMap<String, u64>,
    /// When the app's first operation began and its last one ended: the time it was active.
    first_op_ns: Option<Nanos>,
    last_op_end_ns: Nanos,
    /// The first failure of any of the app's tasks; later ones are counted in `failures`.
    failure: Option<AppFailure>,
    failures: u64,
    warnings: Vec<String>,
    warnings_dropped: u64,
}

/// Collects one run's measurements.
#[derive(Default)]
pub struct Recorder {
    apps: RefCell<BTreeMap<String, AppRecord>>,
    /// Operations begun and not yet ended, by task: (app, timer).
    in_progress: RefCell<BTreeMap<TaskId, (String, OpTimer)>>,
}

impl Recorder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts operation `op` of `app` in the current task (see [`OpTimer::begin`]); it is an
    /// unfinished operation of the results if the run ends before [`Recorder::end_op`].
    pub fn begin_op(&self, sim: &Sim, app: &str, op: &'static str) -> OpTimer {
        let timer = OpTimer::begin(sim, op);
        sim.timeline_begin(timer.task);
        let mut apps = self.apps.borrow_mut();
        let record = apps.entry(app.to_string()).or_default();
        record.first_op_ns.get_or_insert(timer.start_ns);
        drop(apps);
        self.in_progress
            .borrow_mut()
            .insert(timer.task, (app.to_string(), timer));
        timer
    }

    /// Records an operation of `app` that began with `timer` and ends now.
    pub fn end_op(&self, sim: &Sim, app: &str, timer: OpTimer) {
        self.in_progress.borrow_mut().remove(&timer.task);
        sim.timeline_slice(
            timer.task,
            SliceKind::Syscall,
            || timer.op.to_string(),
            timer.start_ns,
        );
        let latency = sim.now() - timer.start_ns;
        let blocked = sim.blocked_times(timer.task).since(&timer.blocked_before);
        let log = sim.take_wait_log(timer.task);
        let mut apps = self.apps.borrow_mut();
        let app_record = apps.entry(app.to_string()).or_default();
        app_record.first_op_ns.get_or_insert(timer.start_ns);
        app_record.last_op_end_ns = app_record.last_op_end_ns.max(sim.now());
        let record = app_record.ops.entry(timer.op).or_insert_with(OpRecord::new);
        record.record(latency, &blocked);
        record.consider_slow(sim, &timer, latency, &log, (false, None));
    }

    /// At the end of the run: records every operation still in progress at its time so far
    /// (a lower bound of its latency), with the wait it is still in and that wait's chain.
    pub fn finish(&self, sim: &Sim) {
        let in_progress = std::mem::take(&mut *self.in_progress.borrow_mut());
        let now = sim.now();
        for (task, (app, timer)) in in_progress {
            let elapsed = now - timer.start_ns;
            sim.timeline_unfinished_slice(
                task,
                SliceKind::Syscall,
                timer.op.to_string(),
                timer.start_ns,
            );
            let blocked = sim.blocked_times(task).since(&timer.blocked_before);
            let log = sim.take_wait_log(task);
            let current = sim.current_wait(task);
            let mut apps = self.apps.borrow_mut();
            let app_record = apps.entry(app).or_default();
            app_record.last_op_end_ns = now;
            let record = app_record.ops.entry(timer.op).or_insert_with(OpRecord::new);
            record.record(elapsed, &blocked);
            record.unfinished += 1;
            record.consider_slow(sim, &timer, elapsed, &log, (true, current));
            let unfinished = UnfinishedOp {
                start_ns: timer.start_ns,
                elapsed_ns: elapsed,
                task: sim.task_name(task),
                waiting: current.map(|wait| SlowWait {
                    reason: wait.reason.name().to_string(),
                    layer: wait.reason.layer().to_string(),
                    on: sim.describe_blocker(wait.blocker),
                    held_by: wait.holder.map(|t| sim.task_name(t)),
                    start_ns: wait.since_ns,
                    ns: now - wait.since_ns,
                    still_waiting: true,
                }),
                chain: current.map(|_| sim.explain_wait(task)),
            };
            let position = record
                .unfinished_ops
                .partition_point(|u| u.elapsed_ns >= elapsed);
            if position < UNFINISHED_KEPT {
                record.unfinished_ops.insert(position, unfinished);
                record.unfinished_ops.truncate(UNFINISHED_KEPT);
            }
        }
    }

    /// Records that `app`'s workload stopped early in the current task: the first failure is
    /// the app's `failure`, later ones (other tasks of the app stopping after it) are counted.
    /// `task` names the task when the failure is not the current task's own (an app that could
    /// not start fails in the timeline's task, and is reported under its own name).
    pub fn fail(&self, sim: &Sim, app: &str, task: Option<String>, message: String) {
        let mut apps = self.apps.borrow_mut();
        let record = apps.entry(app.to_string()).or_default();
        record.failures += 1;
        if record.failure.is_none() {
            record.failure = Some(AppFailure {
                at_ns: sim.now(),
                task: task.unwrap_or_else(|| {
                    sim.current_task()
                        .map_or_else(|| app.to_string(), |task| sim.task_name(task))
                }),
                message,
            });
        }
    }

    /// Records a value `app`'s workload clamped or ignored; the same text is kept once.
    pub fn warn(&self, app: &str, message: String) {
        let mut apps = self.apps.borrow_mut();
        let record = apps.entry(app.to_string()).or_default();
        if record.warnings.contains(&message) {
            return;
        }
        if record.warnings.len() < WARNINGS_KEPT {
            record.warnings.push(message);
        } else {
            record.warnings_dropped += 1;
        }
    }

    pub fn add_counter(&self, app: &str, counter: &str, amount: u64) {
        let mut apps = self.apps.borrow_mut();
        *apps
            .entry(app.to_string())
            .or_default()
            .counters
            .entry(counter.to_string())
            .or_insert(0) += amount;
    }

    /// The value of `app`'s counter `counter` so far (0 if never added to).
    pub fn counter(&self, app: &str, counter: &str) -> u64 {
        self.apps
            .borrow()
            .get(app)
            .and_then(|a| a.counters.get(counter).copied())
            .unwrap_or(0)
    }

    /// The app's results: its operations and counters. Blocked totals are filled in by the runner.
    pub fn app_result(&self, app: &str, uid: u32) -> AppResult {
        let apps = self.apps.borrow();
        let mut result = AppResult {
            uid,
            ..AppResult::default()
        };
        if let Some(record) = apps.get(app) {
            result.counters = record.counters.clone();
            result.active_ns = record
                .first_op_ns
                .map_or(0, |first| record.last_op_end_ns.saturating_sub(first));
            for (op, op_record) in &record.ops {
                result.ops.insert(op.to_string(), summarize(op_record));
            }
            result.failure = record.failure.clone();
            if let Some(failure) = result.failure.as_mut().filter(|_| record.failures > 1) {
                let others = record.failures - 1;
                failure.message.push_str(&format!(
                    " (and {others} other task(s) of the app stopped after it)"
                ));
            }
            result.warnings = record.warnings.clone();
            if record.warnings_dropped > 0 {
                result.warnings.push(format!(
                    "and {} more warning(s) not kept",
                    record.warnings_dropped
                ));
            }
        }
        result
    }
}

/// The latency summary of operations measured outside the simulation (real mode's, as
/// `(latency, unfinished)` pairs): the same histogram and statistics as a simulated run's,
/// with no waits recorded.
pub fn summarize_latencies(latencies: impl IntoIterator<Item = (Nanos, bool)>) -> OpSummary {
    let mut record = OpRecord::new();
    for (latency, unfinished) in latencies {
        record.record(latency, &BlockedTimes::default());
        if unfinished {
            record.unfinished += 1;
        }
    }
    summarize(&record)
}

fn summarize(record: &OpRecord) -> OpSummary {
    let h = &record.histogram;
    // Recorded values: the finished operations and the unfinished ones at their time so far.
    let recorded = h.len();
    // A bucket's highest equivalent value can exceed the exact maximum: clamp to it.
    let quantile = |q: f64| h.value_at_quantile(q).min(record.max_ns);
    OpSummary {
        count: recorded - record.unfinished,
        unfinished: record.unfinished,
        mean_ns: if recorded == 0 {
            0.0
        } else {
            (record.sum_ns as f64 / recorded as f64).round()
        },
        min_ns: if recorded == 0 { 0 } else { h.min() },
        p50_ns: quantile(0.50),
        p90_ns: quantile(0.90),
        p99_ns: quantile(0.99),
        p99_9_ns: quantile(0.999),
        p99_99_ns: quantile(0.9999),
        max_ns: record.max_ns,
        blocked_ns: blocked_map(&record.blocked),
        slowest: record.slowest.clone(),
        unfinished_ops: record.unfinished_ops.clone(),
        histogram: h
            .iter_recorded()
            .map(|v| {
                [
                    h.highest_equivalent(v.value_iterated_to()),
                    v.count_at_value(),
                ]
            })
            .collect(),
    }
}

/// Non-zero blocked times keyed by reason name.
pub fn blocked_map(times: &BlockedTimes) -> BTreeMap<String, u64> {
    times
        .nonzero()
        .map(|(reason, nanos)| (reason.name().to_string(), nanos))
        .collect()
}
