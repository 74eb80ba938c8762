//! `mobistack check-real`: a scenario simulated and run for real (several repetitions), per
//! app and operation the simulated and real p50 / p99 / max with the real spread, per
//! transaction the block writes and cache flushes, and a verdict per figure against the
//! tolerance bands [`BANDS`] states.
//!
//! The simulated side runs on a device profile fitted to this machine's loop device
//! ([`DeviceChoice::Fit`], the default): `device fit --measure` (src/real/fit.rs) measured once
//! and cached (`fit::cached`: per kernel release, file system under the image directory and
//! image size, for a week; `--refit` measures again), with the loop queue's `fua` (0). Every
//! variant's `[stack.device]` becomes that profile, its capacity and the rest of the scenario
//! unchanged. `--scenario-device` runs the scenario's own `[stack.device]` instead.
//!
//! Per-transaction figures are defined alike on both sides: writes are write bios with data
//! (the simulation's account `writes`; real: `block_bio_queue` events with data inside the
//! app's transactions), flushes are the cache flushes the device is asked for (the account's
//! `flushes`: each preflush, and a FUA write's post-flush on a device without FUA; real:
//! empty flush requests issued, `block_rq_issue` "FF"). SQLite's simulated figures are its
//! per-transaction account (`sqlite.*.writes`, `sqlite.flushes`); other workloads' are the
//! app's whole block I/O account over its transactions (setup included).

use super::{run_real, select_variants, RealError, RealOptions};
use crate::report::results::{AppResult, RunResult};
use crate::scenario::Scenario;
use serde::Serialize;

/// The tolerance bands, as printed.
pub const BANDS: &str = "p50 within 2x, p99 within 3x, max within 5x of the real median; \
                         writes/txn within max(0.5, 25 %), flushes/txn within 0.25 of the real median";

/// One compared figure.
#[derive(Debug, Clone, Serialize)]
pub struct Figure {
    pub app: String,
    /// `fsync p50`, `writes/txn`, ...
    pub figure: String,
    pub simulated: f64,
    /// Median of the real repetitions.
    pub real: f64,
    pub real_min: f64,
    pub real_max: f64,
    /// `agrees`, `model high` or `model low`.
    pub verdict: String,
    /// `ms` or `count`.
    pub unit: &'static str,
}

/// The device of the simulated side.
#[derive(Debug, Clone, PartialEq)]
pub enum DeviceChoice {
    /// Fitted to this machine's loop device (cached; `refit` measures again).
    Fit { refit: bool },
    /// The scenario's own `[stack.device]`.
    Scenario,
}

/// One variant's comparison.
#[derive(Debug, Clone, Serialize)]
pub struct VariantCheck {
    pub scenario: String,
    /// Where the simulated side's device profile came from.
    pub device: String,
    pub variant: String,
    pub kernel: String,
    pub repetitions: usize,
    pub bands: &'static str,
    pub figures: Vec<Figure>,
    /// The real device's mean service time per request class (`block_rq_issue` to
    /// `block_rq_complete`) over the repetitions, in ms: what the simulated device profile
    /// should match before latencies can be judged.
    pub real_device_ms: std::collections::BTreeMap<String, f64>,
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    let n = values.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// A statistic of an operation's summary.
type Statistic = fn(&crate::report::results::OpSummary) -> u64;

/// The verdict of a latency within `factor` either way.
fn ratio_verdict(simulated: f64, real: f64, factor: f64) -> String {
    if real <= 0.0 || simulated <= 0.0 {
        return if real == simulated {
            "agrees".into()
        } else {
            "no data".into()
        };
    }
    let ratio = simulated / real;
    if ratio > factor {
        format!("model high ({ratio:.1}x)")
    } else if ratio < 1.0 / factor {
        format!("model low ({ratio:.2}x)")
    } else {
        "agrees".into()
    }
}

fn count_verdict(simulated: f64, real: f64, tolerance: f64) -> String {
    if (simulated - real).abs() <= tolerance {
        "agrees".into()
    } else if simulated > real {
        "model high".into()
    } else {
        "model low".into()
    }
}

/// Simulated per-transaction (writes, flushes) of an app, if it has transactions.
fn simulated_txn(app: &AppResult) -> Option<(f64, f64)> {
    let counter = |key: &str| app.counters.get(key).copied().unwrap_or(0);
    let sqlite = counter("sqlite.transactions");
    if sqlite > 0 {
        let writes: u64 = app
            .counters
            .iter()
            .filter(|(k, _)| k.starts_with("sqlite.") && k.ends_with(".writes"))
            .map(|(_, v)| v)
            .sum();
        let n = sqlite as f64;
        return Some((writes as f64 / n, counter("sqlite.flushes") as f64 / n));
    }
    let n = match counter("transactions") {
        0 => app.ops.get("iteration").map_or(0, |o| o.count),
        n => n,
    };
    if n == 0 {
        return None;
    }
    let (mut writes, mut flushes) = (0u64, 0u64);
    for purposes in app.io_by_purpose.values() {
        for count in purposes.values() {
            writes += count.writes;
            flushes += count.flushes;
        }
    }
    Some((writes as f64 / n as f64, flushes as f64 / n as f64))
}

/// Real per-transaction (writes, flushes) of an app.
fn real_txn(app: &AppResult) -> Option<(f64, f64)> {
    let counter = |key: &str| app.counters.get(key).copied().unwrap_or(0);
    let n = counter("real.txn.count");
    (n > 0).then(|| {
        let n = n as f64;
        (
            counter("real.txn.write_bios") as f64 / n,
            counter("real.txn.flush_requests") as f64 / n,
        )
    })
}

/// This machine's kernel release.
pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// Compares one variant's simulated run with its real runs.
pub fn compare(scenario: &str, sim: &RunResult, real: &[RunResult]) -> VariantCheck {
    let mut figures = Vec::new();
    for (name, app) in &sim.apps {
        let real_apps: Vec<&AppResult> = real.iter().filter_map(|r| r.apps.get(name)).collect();
        for (op, summary) in &app.ops {
            let real_ops: Vec<_> = real_apps.iter().filter_map(|a| a.ops.get(op)).collect();
            if real_ops.is_empty() || summary.count == 0 {
                continue;
            }
            let metrics: [(&str, f64, Statistic); 3] = [
                ("p50", 2.0, |s| s.p50_ns),
                ("p99", 3.0, |s| s.p99_ns),
                ("max", 5.0, |s| s.max_ns),
            ];
            for (metric, factor, get) in metrics {
                let mut values: Vec<f64> = real_ops.iter().map(|s| get(s) as f64 / 1e6).collect();
                let simulated = get(summary) as f64 / 1e6;
                let (lo, hi) = values
                    .iter()
                    .fold((f64::INFINITY, 0.0f64), |(l, h), v| (l.min(*v), h.max(*v)));
                let real = median(&mut values);
                figures.push(Figure {
                    app: name.clone(),
                    figure: format!("{op} {metric}"),
                    simulated,
                    real,
                    real_min: lo,
                    real_max: hi,
                    verdict: ratio_verdict(simulated, real, factor),
                    unit: "ms",
                });
            }
        }
        let (Some((sim_writes, sim_flushes)), reals) = (
            simulated_txn(app),
            real_apps
                .iter()
                .filter_map(|a| real_txn(a))
                .collect::<Vec<_>>(),
        ) else {
            continue;
        };
        if reals.is_empty() {
            continue;
        }
        for (label, simulated, mut values, tolerance) in [
            (
                "writes/txn",
                sim_writes,
                reals.iter().map(|r| r.0).collect::<Vec<_>>(),
                None,
            ),
            (
                "flushes/txn",
                sim_flushes,
                reals.iter().map(|r| r.1).collect::<Vec<_>>(),
                Some(0.25),
            ),
        ] {
            let (lo, hi) = values
                .iter()
                .fold((f64::INFINITY, 0.0f64), |(l, h), v| (l.min(*v), h.max(*v)));
            let real = median(&mut values);
            let tolerance = tolerance.unwrap_or((real * 0.25).max(0.5));
            figures.push(Figure {
                app: name.clone(),
                figure: label.to_string(),
                simulated,
                real,
                real_min: lo,
                real_max: hi,
                verdict: count_verdict(simulated, real, tolerance),
                unit: "count",
            });
        }
    }
    let mut real_device_ms = std::collections::BTreeMap::new();
    for class in ["write", "read", "flush"] {
        let (mut n, mut total) = (0u64, 0u64);
        for run in real {
            n += run
                .counters
                .get(&format!("real.block.{class}_serviced"))
                .copied()
                .unwrap_or(0);
            total += run
                .counters
                .get(&format!("real.block.{class}_device_ns"))
                .copied()
                .unwrap_or(0);
        }
        if n > 0 {
            real_device_ms.insert(class.to_string(), total as f64 / n as f64 / 1e6);
        }
    }
    VariantCheck {
        real_device_ms,
        device: "device: the scenario's own [stack.device]".to_string(),
        scenario: scenario.to_string(),
        variant: sim.variant.clone(),
        kernel: kernel_release(),
        repetitions: real.len(),
        bands: BANDS,
        figures,
    }
}

/// Runs the selected variants simulated (the scenario's first seed) and `reps` times real.
pub fn check_real(
    scenario: &Scenario,
    options: &RealOptions,
    reps: usize,
    device: &DeviceChoice,
) -> Result<Vec<VariantCheck>, RealError> {
    super::check_supported(scenario).map_err(RealError::new)?;
    let selected: Vec<String> = select_variants(scenario, &options.variants)?
        .iter()
        .map(|v| v.name.clone())
        .collect();
    let mut simulated = scenario.clone();
    simulated.variants.retain(|v| selected.contains(&v.name));
    simulated.seeds.truncate(1);
    let device_line = match device {
        DeviceChoice::Scenario => "device: the scenario's own [stack.device]".to_string(),
        DeviceChoice::Fit { refit } => {
            let (fitted, line) = super::fit::fitted_device(&fit_options(options), *refit)?;
            for variant in &mut simulated.variants {
                use_fitted_device(&mut variant.stack.device, &fitted);
            }
            line
        }
    };
    let sim = crate::run::run_scenario(&simulated, &crate::run::RunOptions::default())
        .map_err(|e| RealError::new(format!("the simulated run failed: {e}")))?;
    let mut real_runs: Vec<RunResult> = Vec::new();
    for rep in 0..reps.max(1) {
        let mut options = options.clone();
        options.variants = selected.clone();
        let results = run_real(scenario, &options)
            .map_err(|e| RealError::new(format!("real run {} of {reps}: {e}", rep + 1)))?;
        real_runs.extend(results.runs);
    }
    Ok(sim
        .runs
        .iter()
        .map(|s| {
            let real: Vec<RunResult> = real_runs
                .iter()
                .filter(|r| r.variant == s.variant)
                .cloned()
                .collect();
            VariantCheck {
                device: device_line.clone(),
                ..compare(&scenario.name, s, &real)
            }
        })
        .collect())
}

/// The measurement options of the fit: the image directory of the real runs.
fn fit_options(options: &RealOptions) -> super::fit::MeasureOptions {
    let mut fit = super::fit::MeasureOptions::default();
    if let super::machine::Target::Image { dir, .. } = &options.target {
        fit.dir = dir.clone();
    }
    fit
}

/// `device`, with the fitted profile in place of its own (its capacity kept).
pub fn use_fitted_device(
    device: &mut crate::dev::profile::DeviceConfig,
    fitted: &super::fit::Fitted,
) {
    device.profile = fitted.profile.name.clone();
    device.custom = Some(fitted.profile.clone());
    device.fua = Some(fitted.fua);
}

/// The comparison as a table.
pub fn render(checks: &[VariantCheck]) -> String {
    let mut out = String::new();
    for check in checks {
        out.push_str(&format!(
            "{} / {}: simulated vs real (kernel {}, {} real runs)\n  {}\n  tolerance: {}\n",
            check.scenario,
            check.variant,
            check.kernel,
            check.repetitions,
            check.device,
            check.bands
        ));
        if !check.real_device_ms.is_empty() {
            let means: Vec<String> = check
                .real_device_ms
                .iter()
                .map(|(class, ms)| format!("{class} {ms:.2} ms"))
                .collect();
            out.push_str(&format!(
                "  real device, mean time per request (issue to complete): {}\n",
                means.join(", ")
            ));
        }
        out.push_str(&format!(
            "  {:<10} {:<22} {:>11} {:>11} {:>23}  {}\n",
            "app", "figure", "simulated", "real", "real spread", "verdict"
        ));
        for f in &check.figures {
            let fmt = |v: f64| {
                if f.unit == "ms" {
                    format!("{v:.2} ms")
                } else {
                    format!("{v:.2}")
                }
            };
            out.push_str(&format!(
                "  {:<10} {:<22} {:>11} {:>11} {:>23}  {}\n",
                f.app,
                f.figure,
                fmt(f.simulated),
                fmt(f.real),
                format!("{}..{}", fmt(f.real_min), fmt(f.real_max)),
                f.verdict
            ));
        }
        out.push('\n');
    }
    out
}
