//! The human-readable results table printed by `mobistack run`.

use super::results::{OpSummary, RunResult, ScenarioResults};
use crate::units::format_ms;
use std::fmt::Write;

/// Pads cells into aligned columns; the first row is the header.
pub fn align(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(|r| r.len()).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            let pad = widths[c] - cell.chars().count();
            // Text left-aligned, numbers right-aligned.
            let numeric = cell
                .trim_start_matches('≥')
                .chars()
                .next()
                .is_some_and(|ch| ch.is_ascii_digit())
                || (cell.starts_with('-') && cell.len() > 1);
            if c > 0 {
                line.push_str("  ");
            }
            if numeric {
                line.push_str(&" ".repeat(pad));
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.push_str(&" ".repeat(pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// A statistic of an operation's latency that the table can show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stat {
    Min,
    Mean,
    P50,
    P90,
    P99,
    P999,
    P9999,
    Max,
}

impl Stat {
    /// Every statistic, in column order.
    pub const ALL: [Stat; 8] = [
        Stat::Min,
        Stat::Mean,
        Stat::P50,
        Stat::P90,
        Stat::P99,
        Stat::P999,
        Stat::P9999,
        Stat::Max,
    ];
    /// The columns shown by default.
    pub const DEFAULT: [Stat; 5] = [Stat::Mean, Stat::P50, Stat::P90, Stat::P99, Stat::Max];

    pub fn name(self) -> &'static str {
        match self {
            Stat::Min => "min",
            Stat::Mean => "mean",
            Stat::P50 => "p50",
            Stat::P90 => "p90",
            Stat::P99 => "p99",
            Stat::P999 => "p99.9",
            Stat::P9999 => "p99.99",
            Stat::Max => "max",
        }
    }

    fn value(self, summary: &OpSummary) -> f64 {
        match self {
            Stat::Min => summary.min_ns as f64,
            Stat::Mean => summary.mean_ns,
            Stat::P50 => summary.p50_ns as f64,
            Stat::P90 => summary.p90_ns as f64,
            Stat::P99 => summary.p99_ns as f64,
            Stat::P999 => summary.p99_9_ns as f64,
            Stat::P9999 => summary.p99_99_ns as f64,
            Stat::Max => summary.max_ns as f64,
        }
    }

    /// Parses `--percentiles`: a comma-separated list of `min mean p50 p90 p99 p99.9 p99.99
    /// max`, or `all` (every one; what a bare `--percentiles` means).
    pub fn parse_list(text: &str) -> Result<Vec<Stat>, String> {
        if text.trim() == "all" {
            return Ok(Stat::ALL.to_vec());
        }
        let mut stats = Vec::new();
        for word in text.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            let stat = Stat::ALL
                .into_iter()
                .find(|s| s.name() == word)
                .ok_or_else(|| {
                    format!(
                        "unknown statistic `{}` in --percentiles: expected `all` or a list of {}",
                        crate::units::cut(word),
                        Stat::ALL.map(Stat::name).join(", ")
                    )
                })?;
            if !stats.contains(&stat) {
                stats.push(stat);
            }
        }
        if stats.is_empty() {
            return Err("--percentiles needs at least one statistic, e.g. min,p99.9,p99.99".into());
        }
        stats.sort_by_key(|s| Stat::ALL.iter().position(|a| a == s));
        Ok(stats)
    }
}

/// What the table shows.
#[derive(Debug, Clone)]
pub struct TableOptions {
    /// Latency statistics, as columns in this order.
    pub stats: Vec<Stat>,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            stats: Stat::DEFAULT.to_vec(),
        }
    }
}

/// How a run ended, in words.
fn end_text(run: &RunResult, duration_ns: u64) -> String {
    let limit = format_seconds(duration_ns);
    match run.end.as_str() {
        "duration" => format!("ended at its duration ({limit})"),
        "apps-done" if run.apps.values().any(|a| a.failure.is_some()) => {
            "ended when every app's workload had finished or stopped early".to_string()
        }
        "apps-done" => "ended when every app's workload had finished".to_string(),
        "idle" => "ended idle: nothing left to run (the remaining tasks wait forever)".to_string(),
        other => format!("ended: {other}"),
    }
}

/// Seconds with three significant figures.
fn format_seconds(nanos: u64) -> String {
    let text = format_ms(nanos as f64 / 1e3);
    format!("{text} s")
}

/// A latency cell: milliseconds, `≥` when unfinished operations make it a lower bound.
fn latency_cell(nanos: f64, lower_bound: bool) -> String {
    let text = format_ms(nanos);
    if lower_bound {
        format!("≥{text}")
    } else {
        text
    }
}

/// The table of every run: one row per variant x seed x app x operation, with the latency
/// distribution in milliseconds and the largest share of blocked time.
pub fn render(results: &ScenarioResults) -> String {
    render_with(results, &TableOptions::default())
}

/// [`render`] with a choice of columns.
pub fn render_with(results: &ScenarioResults, options: &TableOptions) -> String {
    let mut out = String::new();
    let seeds: std::collections::BTreeSet<u64> = results.runs.iter().map(|r| r.seed).collect();
    let variants: std::collections::BTreeSet<&str> =
        results.runs.iter().map(|r| r.variant.as_str()).collect();
    let _ = writeln!(
        out,
        "scenario {}: {} variant(s) x {} seed(s), at most {} of virtual time each",
        results.scenario,
        variants.len(),
        seeds.len(),
        format_seconds(results.duration_ns)
    );
    let mut any_unfinished = false;
    let mut any_failed = false;
    let mut any_warning = false;
    for run in &results.runs {
        let unfinished: u64 = run
            .apps
            .values()
            .flat_map(|app| app.ops.values())
            .map(|op| op.unfinished)
            .sum();
        any_unfinished |= unfinished > 0;
        let failed = run.apps.values().filter(|a| a.failure.is_some()).count();
        any_failed |= failed > 0;
        any_warning |= run.apps.values().any(|a| !a.warnings.is_empty());
        let _ = writeln!(
            out,
            "  {} seed {}: simulated {}, {}{}{}",
            run.variant,
            run.seed,
            format_seconds(run.virtual_ns),
            end_text(run, results.duration_ns),
            if unfinished > 0 {
                format!("; {unfinished} operation(s) still in progress")
            } else {
                String::new()
            },
            if failed > 0 {
                format!("; {failed} app(s) stopped early (see below)")
            } else {
                String::new()
            }
        );
        for mixed in &run.mixed_eras {
            let _ = writeln!(out, "    warning: mixes eras: {mixed}");
        }
    }
    let mut header: Vec<String> = ["variant", "seed", "app", "op", "count"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if any_unfinished {
        header.push("unfinished".into());
    }
    header.extend(options.stats.iter().map(|s| format!("{} ms", s.name())));
    header.extend(["MB/s", "top wait (share of op time)"].map(String::from));
    let mut rows = vec![header];
    for run in &results.runs {
        for (app_name, app) in &run.apps {
            let bytes = app.counters.get("bytes").copied().unwrap_or(0);
            // Over the time the app was active, not the run's length.
            let throughput = if bytes == 0 {
                "-".to_string()
            } else if app.active_ns == 0 {
                "no time".to_string()
            } else {
                format!("{:.2}", bytes as f64 / 1e6 / (app.active_ns as f64 / 1e9))
            };
            for (row_of_app, (op, summary)) in app.ops.iter().enumerate() {
                let recorded = summary.count + summary.unfinished;
                let total_op_ns = summary.mean_ns * recorded as f64;
                let top = summary
                    .blocked_ns
                    .iter()
                    .filter(|(reason, _)| reason.as_str() != "sleep")
                    .max_by_key(|(_, nanos)| **nanos)
                    .map(|(reason, nanos)| {
                        format!(
                            "{reason} {:.0}%",
                            100.0 * *nanos as f64 / total_op_ns.max(1.0)
                        )
                    })
                    .unwrap_or_else(|| "-".to_string());
                let mut row = vec![
                    run.variant.clone(),
                    run.seed.to_string(),
                    app_name.clone(),
                    op.clone(),
                    summary.count.to_string(),
                ];
                if any_unfinished {
                    row.push(summary.unfinished.to_string());
                }
                let lower_bound = summary.is_lower_bound();
                for stat in &options.stats {
                    row.push(latency_cell(stat.value(summary), lower_bound));
                }
                // The app's throughput once, on its first row: it is the app's, not the op's.
                row.push(if row_of_app == 0 {
                    throughput.clone()
                } else {
                    String::new()
                });
                row.push(top);
                rows.push(row);
            }
        }
    }
    out.push_str(&align(&rows));
    out.push_str(
        "(MB/s: the app's bytes over the time it was active, from its first operation's start to its last one's end)\n",
    );
    if any_unfinished {
        out.push_str(
            "(≥: operations still in progress at the end count at their time so far, so the figure is a lower bound)\n",
        );
    }
    if any_failed {
        out.push_str("\napps whose workload stopped before its end:\n");
        for run in &results.runs {
            for (app_name, app) in &run.apps {
                if let Some(failure) = &app.failure {
                    let _ = writeln!(
                        out,
                        "  {} seed {} {app_name}: {}",
                        run.variant,
                        run.seed,
                        failure.explain()
                    );
                }
            }
        }
    }
    if any_warning {
        out.push_str("\nwarnings (values a workload clamped or ignored):\n");
        for run in &results.runs {
            for (app_name, app) in &run.apps {
                for warning in &app.warnings {
                    let _ = writeln!(
                        out,
                        "  {} seed {} {app_name}: {warning}",
                        run.variant, run.seed
                    );
                }
            }
        }
    }
    // One line per slow operation, then its waits one per line: the waits' descriptions are
    // long and a single line of them runs past any terminal.
    let mut slowest_text = String::new();
    for run in &results.runs {
        for (app_name, app) in &run.apps {
            for (op, summary) in &app.ops {
                if let Some(slowest) = summary.slowest.first().filter(|s| s.latency_ns > 0) {
                    let _ = writeln!(
                        slowest_text,
                        "  {} seed {} {app_name} {op}: {}{}",
                        run.variant,
                        run.seed,
                        slowest.headline(),
                        if slowest.waits.is_empty() { "" } else { ":" }
                    );
                    for wait in &slowest.waits {
                        let _ = writeln!(slowest_text, "      {}", wait.explain());
                    }
                }
            }
        }
    }
    if !slowest_text.is_empty() {
        out.push_str("\nslowest operation of each app, explained by its longest waits:\n");
        out.push_str(&slowest_text);
    }
    if any_unfinished {
        out.push_str("\noperations still in progress when the run ended:\n");
        for run in &results.runs {
            for (app_name, app) in &run.apps {
                for (op, summary) in &app.ops {
                    for unfinished in summary.unfinished_ops.iter().take(3) {
                        // The headline, then each link of the wait chain on a line of its own.
                        let text = unfinished.explain();
                        let mut parts = text.split("; ");
                        let _ = writeln!(
                            out,
                            "  {} seed {} {app_name} {op} ({}): {}",
                            run.variant,
                            run.seed,
                            unfinished.task,
                            parts.next().unwrap_or_default()
                        );
                        for link in parts {
                            let _ = writeln!(out, "      {link}");
                        }
                    }
                    if summary.unfinished > 3 {
                        let _ = writeln!(
                            out,
                            "  {} seed {} {app_name} {op}: and {} more",
                            run.variant,
                            run.seed,
                            summary.unfinished - 3
                        );
                    }
                }
            }
        }
    }
    out
}

/// The blocked-time breakdown: for every run, app and operation, the time its operations spent
/// blocked in each wait reason (summed) and its share of their total latency.
pub fn render_breakdown(results: &ScenarioResults) -> String {
    let mut rows = vec![[
        "variant",
        "seed",
        "app",
        "op",
        "wait",
        "layer",
        "blocked ms",
        "share",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect::<Vec<String>>()];
    for run in &results.runs {
        for (app_name, app) in &run.apps {
            for (op, summary) in &app.ops {
                let total =
                    (summary.mean_ns * (summary.count + summary.unfinished) as f64).max(1.0);
                let mut reasons: Vec<(&String, &u64)> = summary.blocked_ns.iter().collect();
                reasons.sort_by_key(|(name, nanos)| (std::cmp::Reverse(**nanos), name.as_str()));
                for (reason, nanos) in reasons {
                    let layer = crate::sim::WaitReason::ALL
                        .iter()
                        .find(|r| r.name() == reason.as_str())
                        .map_or("?", |r| r.layer());
                    rows.push(vec![
                        run.variant.clone(),
                        run.seed.to_string(),
                        app_name.clone(),
                        op.clone(),
                        reason.clone(),
                        layer.to_string(),
                        format_ms(*nanos as f64),
                        format!("{:.1}%", 100.0 * *nanos as f64 / total),
                    ]);
                }
            }
        }
    }
    let mut out = String::from("blocked time by reason (summed over each operation's calls):\n");
    out.push_str(&align(&rows));
    out
}

/// The block I/O account by purpose (`mobistack run --io-account`): per run, app and cause
/// (system call, or `[comm]` of a kernel thread working on its own), the bios of each purpose,
/// their reads and writes, bytes, cache flushes and FUA writes; the bios charged to no app
/// under `(kernel)`.
pub fn render_io_account(results: &ScenarioResults) -> String {
    let mut rows = vec![[
        "variant",
        "seed",
        "app",
        "cause",
        "purpose",
        "bios",
        "reads",
        "read KiB",
        "writes",
        "write KiB",
        "discard KiB",
        "flushes",
        "fua",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect::<Vec<String>>()];
    for run in &results.runs {
        let apps = run
            .apps
            .iter()
            .map(|(name, app)| (name.as_str(), &app.io_by_purpose))
            .chain(std::iter::once(("(kernel)", &run.kernel_io_by_purpose)));
        for (app, by_cause) in apps {
            for (cause, by_purpose) in by_cause {
                // Purposes in the account's order (data, metadata, journal, discard, flush),
                // each on the file system's device, then on others (`journal-commit@mmcblk1`).
                for purpose in crate::mm::IoPurpose::ALL {
                    let name = purpose.name();
                    let keys = by_purpose.keys().filter(|key| {
                        key.as_str() == name
                            || key
                                .strip_prefix(name)
                                .is_some_and(|rest| rest.starts_with('@'))
                    });
                    for key in keys {
                        let c = &by_purpose[key];
                        rows.push(vec![
                            run.variant.clone(),
                            run.seed.to_string(),
                            app.to_string(),
                            cause.clone(),
                            key.clone(),
                            c.bios.to_string(),
                            c.reads.to_string(),
                            (c.read_bytes / 1024).to_string(),
                            c.writes.to_string(),
                            (c.write_bytes / 1024).to_string(),
                            (c.discard_bytes / 1024).to_string(),
                            c.flushes.to_string(),
                            c.fua.to_string(),
                        ]);
                    }
                }
            }
        }
    }
    let mut out = String::from(
        "block I/O by purpose (bios at submit_bio; flushes: empty flushes, REQ_PREFLUSH and the post-flush of a FUA write on a device without FUA):\n",
    );
    out.push_str(&align(&rows));
    out
}
