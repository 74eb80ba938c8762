//! The results data model, serialised as the versioned JSON of `mobistack run --out` / `--json`.
//!
//! Everything here is a function of the scenario and the seed: no wall-clock time, maps are
//! `BTreeMap`s, so the same inputs give byte-identical JSON.

use serde::Serialize;
use std::collections::BTreeMap;

/// Identifies the JSON format; bumped on incompatible changes.
pub const RESULTS_SCHEMA: &str = "mobistack.results";
/// Version 2: operations still in progress at the end of a run are recorded (`unfinished`,
/// `unfinished_ops`; the distribution includes them at their time so far), `p99_9_ns` and
/// `p99_99_ns`, each app's `active_ns`, each run's `end` explained.
/// Version 3: each run's `series`, the bytes moved per period (throughput over time).
/// Version 4: each app's `failure` (why its workload stopped before its end) and `warnings`
/// (values the workload clamped or ignored), both absent when there is none.
pub const RESULTS_VERSION: u32 = 4;

/// Latency distribution of one operation of one app, in nanoseconds.
///
/// Operations still in progress when the run ended (`unfinished`) are in the distribution at
/// their time so far: with any, every statistic is a lower bound of the true one.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct OpSummary {
    /// Operations that completed.
    pub count: u64,
    /// Operations still in progress (blocked or running) when the run ended.
    pub unfinished: u64,
    pub mean_ns: f64,
    pub min_ns: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p99_9_ns: u64,
    pub p99_99_ns: u64,
    pub max_ns: u64,
    /// Time the operations spent blocked, summed, by wait reason.
    pub blocked_ns: BTreeMap<String, u64>,
    /// The slowest operations, slowest first, each explained by its longest waits.
    pub slowest: Vec<SlowOp>,
    /// The longest unfinished operations, longest first, with what they still wait on.
    pub unfinished_ops: Vec<UnfinishedOp>,
    /// The histogram: [highest value equivalent to the bucket, count] for every non-empty bucket
    /// (unfinished operations at their time so far).
    pub histogram: Vec<[u64; 2]>,
}

impl OpSummary {
    /// Whether the statistics are lower bounds (some operations had not finished).
    pub fn is_lower_bound(&self) -> bool {
        self.unfinished > 0
    }
}

/// An operation still in progress when the run ended.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct UnfinishedOp {
    pub start_ns: u64,
    /// Time from its start to the end of the run: a lower bound of its latency.
    pub elapsed_ns: u64,
    pub task: String,
    /// The wait it is still in, if it is blocked (not if it was runnable or sleeping).
    pub waiting: Option<SlowWait>,
    /// That wait's chain ("A waits on ... held by B; B waits on ...").
    pub chain: Option<String>,
}

impl UnfinishedOp {
    /// "8970 ms so far since 11.030 s: still in submit_bio_wait 8970 ms on request R#12 (...)"
    pub fn explain(&self) -> String {
        use crate::units::format_ms;
        let mut text = format!(
            "{} ms so far (since {:.3} s)",
            format_ms(self.elapsed_ns as f64),
            self.start_ns as f64 / 1e9
        );
        match (&self.waiting, &self.chain) {
            (Some(wait), Some(chain)) => {
                text.push_str(&format!(
                    ": still in {} {} ms; {chain}",
                    wait.reason,
                    format_ms(wait.ns as f64)
                ));
            }
            _ => text.push_str(": not blocked (runnable or sleeping) when the run ended"),
        }
        text
    }
}

/// One slow operation and the waits that made it slow.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
#[serde(default)]
pub struct SlowOp {
    pub start_ns: u64,
    pub latency_ns: u64,
    /// The task that performed it.
    pub task: String,
    /// Its longest waits, longest first.
    pub waits: Vec<SlowWait>,
    /// Waits beyond the task's log bound, counted but not kept.
    pub waits_not_logged: u64,
    /// Still in progress when the run ended: `latency_ns` is its time so far.
    pub unfinished: bool,
}

/// One wait of a slow operation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
#[serde(default)]
pub struct SlowWait {
    /// The Linux function that slept (`lock_buffer`, `submit_bio_wait`, ...).
    pub reason: String,
    pub layer: String,
    /// What it waited on (a request, page, buffer, lock, ...).
    pub on: String,
    /// The task that held what it waited on, when known.
    pub held_by: Option<String>,
    pub start_ns: u64,
    pub ns: u64,
    /// The wait had not ended when the run did (`ns` is its time so far).
    pub still_waiting: bool,
}

impl SlowOp {
    /// "52.2 ms at 1.234 s: submit_bio_wait 51.9 ms on request R#12; ..."
    pub fn explain(&self) -> String {
        let mut text = self.headline();
        for (i, wait) in self.waits.iter().enumerate() {
            text.push_str(if i == 0 { ": " } else { "; " });
            text.push_str(&wait.explain());
        }
        text
    }

    /// "52.2 ms at 1.234 s", marked when unfinished: the first line of [`SlowOp::explain`]
    /// when the waits go on lines of their own.
    pub fn headline(&self) -> String {
        format!(
            "{}{} ms at {:.3} s{}",
            if self.unfinished { ">= " } else { "" },
            crate::units::format_ms(self.latency_ns as f64),
            self.start_ns as f64 / 1e9,
            if self.unfinished {
                " (unfinished when the run ended)"
            } else {
                ""
            }
        )
    }
}

impl SlowWait {
    /// "submit_bio_wait 51.9 ms on request R#12 held by jbd2", "still in ..." when unfinished.
    pub fn explain(&self) -> String {
        let mut text = String::new();
        if self.still_waiting {
            text.push_str("still in ");
        }
        text.push_str(&format!(
            "{} {} ms",
            self.reason,
            crate::units::format_ms(self.ns as f64)
        ));
        if self.on != "-" {
            text.push_str(&format!(" on {}", self.on));
        }
        if let Some(holder) = &self.held_by {
            text.push_str(&format!(" held by {holder}"));
        }
        text
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct AppResult {
    pub uid: u32,
    /// From the start of the app's first operation to the end of its last one (or of the run,
    /// with operations unfinished): the time its throughput is measured over.
    pub active_ns: u64,
    pub ops: BTreeMap<String, OpSummary>,
    pub counters: BTreeMap<String, u64>,
    /// All of the app's tasks' blocked time, by wait reason (voluntary sleeps excluded).
    pub blocked_ns: BTreeMap<String, u64>,
    /// The same, by layer of the stack.
    pub blocked_by_layer_ns: BTreeMap<String, u64>,
    /// The block I/O account by purpose (issue 10): the bios charged to the app (its uid), by
    /// cause (the system call that caused them, or `[comm]` of a kernel thread that issued them
    /// on its own for the app's pages) and purpose (`data`, `inode`, `journal-commit`, ...).
    /// Absent without a page cache.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub io_by_purpose: IoByPurpose,
    /// Why the app's workload stopped before its end (a SQL statement SQLite refused, a flowop
    /// that failed, a trace line that cannot be replayed); absent when it ran to its end or
    /// was still running when the run ended. `mobistack run` exits with status 4 when any app
    /// of any run has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<AppFailure>,
    /// Values the workload clamped or ignored, each once, in the order they first happened
    /// (at most [`WARNINGS_KEPT`]; the last one says how many more were dropped).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// The most warnings kept per app.
pub const WARNINGS_KEPT: usize = 16;

/// Why an app's workload stopped early: when, in which task, and the error in words.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct AppFailure {
    /// Virtual time of the failure.
    pub at_ns: u64,
    /// The task that failed (its name, as in the wait chains).
    pub task: String,
    /// What failed and why, e.g. "statement 3 `SELEKT * FROM nowhere`: near \"SELEKT\": syntax
    /// error".
    pub message: String,
}

impl AppFailure {
    /// One line for the table: "at 1.23 s in task `app/2`: message".
    pub fn explain(&self) -> String {
        format!(
            "at {} s in task `{}`: {}",
            crate::units::format_ms(self.at_ns as f64 / 1e3),
            self.task,
            self.message
        )
    }
}

/// Cause -> purpose -> counts.
pub type IoByPurpose = BTreeMap<String, BTreeMap<String, crate::mm::bio::IoCount>>;

/// One run: one variant with one seed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunResult {
    pub variant: String,
    pub seed: u64,
    /// How the run ended: "duration", "apps-done" or "idle".
    pub end: String,
    pub virtual_ns: u64,
    pub events: u64,
    pub apps: BTreeMap<String, AppResult>,
    /// Counters of the stack's layers.
    pub counters: BTreeMap<String, u64>,
    /// The block I/O account of bios charged to no app (kernel threads on their own: the
    /// journal's timer commits, checkpoints), by cause and purpose.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub kernel_io_by_purpose: IoByPurpose,
    /// The device model's statistics (null when the run used no device).
    pub device: serde_json::Value,
    /// Throughput over time: bytes moved in each period of the run.
    pub series: Series,
    /// How the run's stack mixes eras (a layer running another Linux version's code than
    /// `[stack.kernel] version`, `crate::scenario::eras::mixed_eras`); absent when it does not.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mixed_eras: Vec<String>,
    /// The block layer's trace, when asked for (`--blktrace`); written as blkparse text, not
    /// part of the JSON.
    #[serde(skip)]
    pub blktrace: Option<crate::block::blktrace::BlkTrace>,
    /// The run's timeline, when asked for (`--perfetto`); written as a Perfetto trace, not
    /// part of the JSON.
    #[serde(skip)]
    pub timeline: Option<Box<crate::report::perfetto::RunTimeline>>,
}

/// Bytes moved per period of a run, from its start: period `i` is `(i x period_ns,
/// (i + 1) x period_ns]`; the run's last partial period is left out.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Series {
    pub period_ns: u64,
    /// Bytes of the block requests completed (empty without a block layer).
    pub device_bytes: Vec<u64>,
    /// Per app: bytes its system calls read or wrote (its `bytes` counter).
    pub app_bytes: BTreeMap<String, Vec<u64>>,
}

/// Every run of a scenario.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScenarioResults {
    pub schema: &'static str,
    pub version: u32,
    pub scenario: String,
    pub description: String,
    pub duration_ns: u64,
    pub runs: Vec<RunResult>,
}

impl ScenarioResults {
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("results serialise") + "\n"
    }
}
