//! `mobistack compare BASE OTHER`: per app and system call, the change in p50, p99 and max
//! latency and in each app's throughput between two results (two files, or two variants of one
//! file), with the wait reasons that explain the change: the reasons whose blocked time per
//! operation changed most.
//!
//! A variant run with several seeds is merged as the HTML report merges it: histograms and
//! blocked times added up, throughput as bytes over active time summed over the seeds.

use super::html::{quantile, ResultsView};
use crate::units::format_ms;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

/// One side of a comparison: a results file and one of its variants.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Side {
    pub file: String,
    pub variant: String,
}

/// Latency statistics of one (app, op) on one side.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct OpStats {
    /// Operations, unfinished ones included.
    pub count: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

/// A wait reason's blocked time per operation on both sides.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReasonChange {
    pub reason: String,
    pub base_ns_per_op: f64,
    pub other_ns_per_op: f64,
    pub change_ns_per_op: f64,
}

/// The comparison of one (app, op).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpChange {
    pub app: String,
    pub op: String,
    pub base: Option<OpStats>,
    pub other: Option<OpStats>,
    /// Relative changes, other / base - 1 (none when either side lacks the op or base is 0).
    pub p50_change: Option<f64>,
    pub p99_change: Option<f64>,
    pub max_change: Option<f64>,
    /// The reasons whose blocked time per operation changed most, largest change first.
    pub reasons: Vec<ReasonChange>,
}

/// An app's throughput on both sides, MB/s over its active time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AppChange {
    pub app: String,
    pub base_mb_s: Option<f64>,
    pub other_mb_s: Option<f64>,
    pub change: Option<f64>,
}

/// A comparison of two results.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub base: Side,
    pub other: Side,
    pub ops: Vec<OpChange>,
    pub apps: Vec<AppChange>,
}

/// How many reasons explain each row.
pub const REASONS_SHOWN: usize = 3;
/// Changes of blocked time per operation below this (1 µs) explain nothing.
pub const MIN_REASON_CHANGE_NS: f64 = 1_000.0;

/// Picks `variant` of `view` (or its only one).
pub fn pick_variant(
    view: &ResultsView,
    file: &str,
    variant: Option<&str>,
) -> Result<String, String> {
    let variants = view.variants();
    match variant {
        Some(v) if variants.contains(&v) => Ok(v.to_string()),
        Some(v) => Err(format!(
            "{file}: no variant `{v}` (variants: {})",
            variants.join(", ")
        )),
        None if variants.len() == 1 => Ok(variants[0].to_string()),
        None => Err(format!(
            "{file} has several variants ({}): name one as {file}:VARIANT",
            variants.join(", ")
        )),
    }
}

fn op_stats(view: &ResultsView, variant: &str, app: &str, op: &str) -> Option<OpStats> {
    let ops: Vec<_> = view
        .runs_of(variant)
        .filter_map(|r| r.apps.get(app).and_then(|a| a.ops.get(op)))
        .collect();
    if ops.is_empty() {
        return None;
    }
    let histogram = view.histogram(variant, app, op);
    let max_ns = ops.iter().map(|o| o.max_ns).max().unwrap_or(0);
    Some(OpStats {
        count: ops.iter().map(|o| o.count + o.unfinished).sum(),
        p50_ns: quantile(&histogram, 0.5).unwrap_or(0).min(max_ns),
        p99_ns: quantile(&histogram, 0.99).unwrap_or(0).min(max_ns),
        max_ns,
    })
}

/// Blocked time per operation by reason.
fn blocked_per_op(view: &ResultsView, variant: &str, app: &str, op: &str) -> BTreeMap<String, f64> {
    let mut sum: BTreeMap<String, u64> = BTreeMap::new();
    let mut count = 0u64;
    for run in view.runs_of(variant) {
        if let Some(o) = run.apps.get(app).and_then(|a| a.ops.get(op)) {
            count += o.count + o.unfinished;
            for (reason, ns) in &o.blocked_ns {
                *sum.entry(reason.clone()).or_insert(0) += ns;
            }
        }
    }
    sum.into_iter()
        .map(|(reason, ns)| (reason, ns as f64 / count.max(1) as f64))
        .collect()
}

fn throughput(view: &ResultsView, variant: &str, app: &str) -> Option<f64> {
    let (mut bytes, mut active, mut seen) = (0u64, 0u64, false);
    for run in view.runs_of(variant) {
        if let Some(a) = run.apps.get(app) {
            seen = true;
            bytes += a.counters.get("bytes").copied().unwrap_or(0);
            active += a.active_ns;
        }
    }
    (seen && active > 0).then(|| bytes as f64 / 1e6 / (active as f64 / 1e9))
}

fn change(base: f64, other: f64) -> Option<f64> {
    (base > 0.0).then(|| other / base - 1.0)
}

/// Compares `other` to `base`.
pub fn compare(
    (base_view, base): (&ResultsView, Side),
    (other_view, other): (&ResultsView, Side),
) -> Comparison {
    let mut pairs = base_view.app_ops();
    pairs.extend(other_view.app_ops());
    pairs.sort();
    pairs.dedup();
    let ops = pairs
        .into_iter()
        .filter_map(|(app, op)| {
            let b = op_stats(base_view, &base.variant, &app, &op);
            let o = op_stats(other_view, &other.variant, &app, &op);
            if b.is_none() && o.is_none() {
                return None;
            }
            let ratio = |f: fn(&OpStats) -> u64| match (&b, &o) {
                (Some(b), Some(o)) => change(f(b) as f64, f(o) as f64),
                _ => None,
            };
            let before = blocked_per_op(base_view, &base.variant, &app, &op);
            let after = blocked_per_op(other_view, &other.variant, &app, &op);
            let mut reasons: Vec<ReasonChange> = before
                .keys()
                .chain(after.keys())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .map(|reason| {
                    let b = before.get(reason).copied().unwrap_or(0.0);
                    let o = after.get(reason).copied().unwrap_or(0.0);
                    ReasonChange {
                        reason: reason.clone(),
                        base_ns_per_op: b,
                        other_ns_per_op: o,
                        change_ns_per_op: o - b,
                    }
                })
                .filter(|r| r.change_ns_per_op.abs() >= MIN_REASON_CHANGE_NS)
                .collect();
            reasons.sort_by(|x, y| {
                y.change_ns_per_op
                    .abs()
                    .total_cmp(&x.change_ns_per_op.abs())
                    .then(x.reason.cmp(&y.reason))
            });
            reasons.truncate(REASONS_SHOWN);
            Some(OpChange {
                p50_change: ratio(|s| s.p50_ns),
                p99_change: ratio(|s| s.p99_ns),
                max_change: ratio(|s| s.max_ns),
                app,
                op,
                base: b,
                other: o,
                reasons,
            })
        })
        .collect();
    let mut apps: Vec<String> = base_view
        .runs_of(&base.variant)
        .chain(other_view.runs_of(&other.variant))
        .flat_map(|r| r.apps.keys().cloned())
        .collect();
    apps.sort();
    apps.dedup();
    let apps = apps
        .into_iter()
        .map(|app| {
            let b = throughput(base_view, &base.variant, &app);
            let o = throughput(other_view, &other.variant, &app);
            AppChange {
                change: b.zip(o).and_then(|(b, o)| change(b, o)),
                app,
                base_mb_s: b,
                other_mb_s: o,
            }
        })
        .collect();
    Comparison {
        base,
        other,
        ops,
        apps,
    }
}

fn percent(change: Option<f64>) -> String {
    match change {
        None => "-".to_string(),
        Some(c) => format!("{:+.0}%", c * 100.0),
    }
}

fn ms(value: Option<u64>) -> String {
    value.map_or("-".to_string(), |v| format_ms(v as f64))
}

/// The comparison as text: a latency table, a throughput table.
pub fn render(comparison: &Comparison) -> String {
    let name = |s: &Side| format!("{}:{}", s.file, s.variant);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "compare: A = {}, B = {} (change: B / A - 1)",
        name(&comparison.base),
        name(&comparison.other)
    );
    let mut rows = vec![[
        "app",
        "op",
        "n A",
        "n B",
        "p50 A ms",
        "p50 B ms",
        "p50",
        "p99 A ms",
        "p99 B ms",
        "p99",
        "max A ms",
        "max B ms",
        "max",
        "explained by (blocked ms per op, A -> B)",
    ]
    .map(String::from)
    .to_vec()];
    for row in &comparison.ops {
        let stat = |side: &Option<OpStats>, f: fn(&OpStats) -> u64| ms(side.as_ref().map(f));
        let count = |side: &Option<OpStats>| {
            side.as_ref()
                .map_or("-".to_string(), |s| s.count.to_string())
        };
        let why = row
            .reasons
            .iter()
            .map(|r| {
                format!(
                    "{} {} -> {}",
                    r.reason,
                    format_ms(r.base_ns_per_op),
                    format_ms(r.other_ns_per_op)
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        rows.push(vec![
            row.app.clone(),
            row.op.clone(),
            count(&row.base),
            count(&row.other),
            stat(&row.base, |s| s.p50_ns),
            stat(&row.other, |s| s.p50_ns),
            percent(row.p50_change),
            stat(&row.base, |s| s.p99_ns),
            stat(&row.other, |s| s.p99_ns),
            percent(row.p99_change),
            stat(&row.base, |s| s.max_ns),
            stat(&row.other, |s| s.max_ns),
            percent(row.max_change),
            why,
        ]);
    }
    out.push_str(&super::table::align(&rows));
    let mut rows = vec![["app", "MB/s A", "MB/s B", "change"]
        .map(String::from)
        .to_vec()];
    for app in &comparison.apps {
        // Three significant figures, as the latencies.
        let mb = |v: Option<f64>| v.map_or("-".to_string(), |v| format_ms(v * 1e6));
        rows.push(vec![
            app.app.clone(),
            mb(app.base_mb_s),
            mb(app.other_mb_s),
            percent(app.change),
        ]);
    }
    out.push_str("\nthroughput (each app's bytes over its active time):\n");
    out.push_str(&super::table::align(&rows));
    out
}
