//! Records per-app, per-operation latency distributions, blocked time by reason and counters while
//! a run goes on.

use super::results::{AppResult, OpSummary, SlowOp, SlowWait};
use crate::sim::{BlockedTimes, Sim, TaskId, WaitLog, WaitRecord};
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
    /// The same operation under another name (e.g. once its direction is known).
    pub fn renamed(self, op: &'static str) -> OpTimer {
        OpTimer { op, ..self }
    }

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
}

impl OpRecord {
    fn new() -> Self {
        OpRecord {
            histogram: Histogram::new_with_bounds(1, HISTOGRAM_HIGHEST_NS, HISTOGRAM_SIGFIG)
                .expect("valid histogram bounds"),
            sum_ns: 0,
            max_ns: 0,
            blocked: BlockedTimes::default(),
            slowest: Vec::new(),
        }
    }

    /// Keeps the operation if it is among the slowest, with its longest waits described.
    fn consider_slow(&mut self, sim: &Sim, timer: &OpTimer, latency: Nanos, log: &WaitLog) {
        let position = self.slowest.partition_point(|s| s.latency_ns >= latency);
        if position >= SLOWEST_KEPT {
            return;
        }
        let mut records: Vec<&WaitRecord> = log
            .records
            .iter()
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
            },
        );
        self.slowest.truncate(SLOWEST_KEPT);
    }
}

#[derive(Default)]
struct AppRecord {
    ops: BTreeMap<&'static str, OpRecord>,
    counters: BTreeMap<String, u64>,
}

/// Collects one run's measurements.
#[derive(Default)]
pub struct Recorder {
    apps: RefCell<BTreeMap<String, AppRecord>>,
}

impl Recorder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records an operation of `app` that began with `timer` and ends now.
    pub fn end_op(&self, sim: &Sim, app: &str, timer: OpTimer) {
        let latency = sim.now() - timer.start_ns;
        let blocked = sim.blocked_times(timer.task).since(&timer.blocked_before);
        let log = sim.take_wait_log(timer.task);
        let mut apps = self.apps.borrow_mut();
        let record = apps
            .entry(app.to_string())
            .or_default()
            .ops
            .entry(timer.op)
            .or_insert_with(OpRecord::new);
        record
            .histogram
            .saturating_record(latency.min(HISTOGRAM_HIGHEST_NS));
        record.sum_ns += u128::from(latency);
        record.max_ns = record.max_ns.max(latency);
        for (reason, nanos) in blocked.nonzero() {
            record.blocked.add(reason, nanos);
        }
        record.consider_slow(sim, &timer, latency, &log);
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

    /// The app's results: its operations and counters. Blocked totals are filled in by the runner.
    pub fn app_result(&self, app: &str, uid: u32) -> AppResult {
        let apps = self.apps.borrow();
        let mut result = AppResult {
            uid,
            ..AppResult::default()
        };
        if let Some(record) = apps.get(app) {
            result.counters = record.counters.clone();
            for (op, op_record) in &record.ops {
                result.ops.insert(op.to_string(), summarize(op_record));
            }
        }
        result
    }
}

fn summarize(record: &OpRecord) -> OpSummary {
    let h = &record.histogram;
    let count = h.len();
    OpSummary {
        count,
        mean_ns: if count == 0 {
            0.0
        } else {
            (record.sum_ns as f64 / count as f64).round()
        },
        min_ns: h.min(),
        // A bucket's highest equivalent value can exceed the exact maximum: clamp to it.
        p50_ns: h.value_at_quantile(0.50).min(record.max_ns),
        p90_ns: h.value_at_quantile(0.90).min(record.max_ns),
        p99_ns: h.value_at_quantile(0.99).min(record.max_ns),
        max_ns: record.max_ns,
        blocked_ns: blocked_map(&record.blocked),
        slowest: record.slowest.clone(),
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
