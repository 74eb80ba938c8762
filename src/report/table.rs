//! The human-readable results table printed by `mobistack run`.

use super::results::ScenarioResults;
use crate::units::{format_ms, NS_PER_SEC};
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
            let numeric = cell.chars().next().is_some_and(|ch| ch.is_ascii_digit())
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

/// The table of every run: one row per variant x seed x app x operation, with the latency
/// distribution in milliseconds and the largest share of blocked time.
pub fn render(results: &ScenarioResults) -> String {
    let mut out = String::new();
    let seeds: std::collections::BTreeSet<u64> = results.runs.iter().map(|r| r.seed).collect();
    let variants: std::collections::BTreeSet<&str> =
        results.runs.iter().map(|r| r.variant.as_str()).collect();
    let _ = writeln!(
        out,
        "scenario {}: {} variant(s) x {} seed(s), {} s of virtual time each",
        results.scenario,
        variants.len(),
        seeds.len(),
        results.duration_ns as f64 / NS_PER_SEC as f64
    );
    let mut rows = vec![[
        "variant",
        "seed",
        "app",
        "op",
        "count",
        "mean ms",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "max ms",
        "MB/s",
        "top wait (share of op time)",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect::<Vec<String>>()];
    for run in &results.runs {
        let seconds = run.virtual_ns as f64 / NS_PER_SEC as f64;
        for (app_name, app) in &run.apps {
            let bytes = app.counters.get("bytes").copied().unwrap_or(0);
            let throughput = if seconds > 0.0 && bytes > 0 {
                format!("{:.2}", bytes as f64 / 1e6 / seconds)
            } else {
                "-".to_string()
            };
            for (op, summary) in &app.ops {
                let total_op_ns = summary.mean_ns * summary.count as f64;
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
                rows.push(vec![
                    run.variant.clone(),
                    run.seed.to_string(),
                    app_name.clone(),
                    op.clone(),
                    summary.count.to_string(),
                    format_ms(summary.mean_ns),
                    format_ms(summary.p50_ns as f64),
                    format_ms(summary.p90_ns as f64),
                    format_ms(summary.p99_ns as f64),
                    format_ms(summary.max_ns as f64),
                    throughput.clone(),
                    top,
                ]);
            }
        }
    }
    out.push_str(&align(&rows));
    out.push_str("\nslowest operation of each app, explained by its longest waits:\n");
    for run in &results.runs {
        for (app_name, app) in &run.apps {
            for (op, summary) in &app.ops {
                if let Some(slowest) = summary.slowest.first().filter(|s| s.latency_ns > 0) {
                    let _ = writeln!(
                        out,
                        "  {} seed {} {app_name} {op}: {}",
                        run.variant,
                        run.seed,
                        slowest.explain()
                    );
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
                let total = (summary.mean_ns * summary.count as f64).max(1.0);
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
