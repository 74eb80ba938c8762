//! Tidy CSV files of a run's results for notebooks (`mobistack run --csv DIR`): one observation
//! per row, every identifying column repeated, so that `pandas.read_csv` gives a frame to
//! filter, group and plot without reshaping (docs/analysis.md).
//!
//! - `latency.csv`: scenario, variant, seed, app, op, percentile, latency_ns — one row per
//!   variant x seed x app x op x percentile (0 = min, 50, 90, 99, 99.9, 99.99, 100 = max);
//! - `ops.csv`: scenario, variant, seed, app, op, count, unfinished, mean_ns — one row per
//!   variant x seed x app x op;
//! - `waits.csv`: scenario, variant, seed, app, op, reason, layer, blocked_ns — one row per wait
//!   reason of each op;
//! - `throughput.csv`: scenario, variant, seed, app, start_s, end_s, bytes — one row per period
//!   of the run's series (`app` = `(device)` for the block layer's bytes).

use super::results::ScenarioResults;
use crate::sim::WaitReason;
use std::fmt::Write;

/// A field, quoted when it must be (RFC 4180).
fn field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

fn layer_of(reason: &str) -> &'static str {
    WaitReason::ALL
        .iter()
        .find(|r| r.name() == reason)
        .map_or("?", |r| r.layer())
}

/// The files written, in the order [`files`] returns them.
pub const FILES: [&str; 4] = ["latency.csv", "ops.csv", "waits.csv", "throughput.csv"];

/// The CSV files of `results`: (file name, contents), in the order of [`FILES`].
pub fn files(results: &ScenarioResults) -> Vec<(&'static str, String)> {
    let scenario = field(&results.scenario);
    let mut latency = String::from("scenario,variant,seed,app,op,percentile,latency_ns\n");
    let mut ops = String::from("scenario,variant,seed,app,op,count,unfinished,mean_ns\n");
    let mut waits = String::from("scenario,variant,seed,app,op,reason,layer,blocked_ns\n");
    let mut throughput = String::from("scenario,variant,seed,app,start_s,end_s,bytes\n");
    for run in &results.runs {
        let key = format!("{scenario},{},{}", field(&run.variant), run.seed);
        for (app, result) in &run.apps {
            for (op, summary) in &result.ops {
                let row = format!("{key},{},{}", field(app), field(op));
                for (percentile, value) in [
                    ("0", summary.min_ns),
                    ("50", summary.p50_ns),
                    ("90", summary.p90_ns),
                    ("99", summary.p99_ns),
                    ("99.9", summary.p99_9_ns),
                    ("99.99", summary.p99_99_ns),
                    ("100", summary.max_ns),
                ] {
                    let _ = writeln!(latency, "{row},{percentile},{value}");
                }
                let _ = writeln!(
                    ops,
                    "{row},{},{},{}",
                    summary.count, summary.unfinished, summary.mean_ns
                );
                for (reason, ns) in &summary.blocked_ns {
                    let _ = writeln!(waits, "{row},{},{},{ns}", field(reason), layer_of(reason));
                }
            }
        }
        let seconds = |periods: usize| (periods as u64 * run.series.period_ns) as f64 / 1e9;
        let series = std::iter::once(("(device)", &run.series.device_bytes)).chain(
            run.series
                .app_bytes
                .iter()
                .map(|(app, bytes)| (app.as_str(), bytes)),
        );
        for (app, bytes) in series {
            for (i, b) in bytes.iter().enumerate() {
                let _ = writeln!(
                    throughput,
                    "{key},{},{},{},{b}",
                    field(app),
                    seconds(i),
                    seconds(i + 1)
                );
            }
        }
    }
    FILES
        .into_iter()
        .zip([latency, ops, waits, throughput])
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn fields_with_commas_or_quotes_are_quoted() {
        assert_eq!(super::field("gallery"), "gallery");
        assert_eq!(super::field("a,b"), "\"a,b\"");
        assert_eq!(super::field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(super::layer_of("lock_page"), "mm");
        assert_eq!(super::layer_of("submit_bio_wait"), "block");
    }
}
