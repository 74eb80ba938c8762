//! `mobistack reproduce <paper>`: a paper's experiments run on the stack, each headline printed
//! beside the simulated figure. Paper values are references typed from the paper; every
//! simulated value is computed by the run. For each headline: the paper's relative effect, the
//! simulated one, their ratio, and whether the direction holds.
//!
//! QASIO (seed 000, FAST'15): [`qasio`] (Table 2's latency changes, Figure 8's ablation over
//! M1-M5, M5's fsync with D_discard boosted, the background write's throughput cost, today's
//! schedulers beside and under QASIO, Scenarios A-C).
//!
//! FastTrack (seed 001, ATC'18): [`fasttrack`] (Figure 10's versions over six FG/BG pairs, two
//! phones, two page-cache locking models; Figure 12's Camera under Update; Figure 13's 2..6
//! background apps, with FastT + QASIO beside FastT).
//!
//! The Journaling of Journal (seed 002, ATC'13): [`joj`] (inserts/s of the stock stack and with
//! the fixes; the per-transaction account of one INSERT in each journal mode).
//!
//! The app-context-aware scheduler (seed 003): [`context_aware`] (Table 7.1's filebench
//! personalities; the video player under IOREAD).
//!
//! MobiFS (seed 004, ATC'15): [`mobifs`] (write throughput and database transactions/s on a
//! microSD card, data flushed and energy over three app workloads, idle-interval prediction
//! quality on user-model traces).

use crate::run::{run_scenario, RunOptions};
use crate::scenario;
use serde::Serialize;

mod context_aware;
mod fasttrack;
mod joj;
mod mobifs;
mod qasio;

pub use fasttrack::many_bg_scenario as fasttrack_many_bg_scenario;

/// One headline of a paper beside the simulation.
#[derive(Debug, Clone, Serialize)]
pub struct Headline {
    pub what: String,
    /// Where the paper says it.
    pub source: &'static str,
    pub unit: &'static str,
    /// The paper's before and after (baseline, technique).
    pub paper: (f64, f64),
    /// The simulation's.
    pub simulated: (f64, f64),
}

impl Headline {
    /// Relative change, (after - before) / before.
    fn effect(pair: (f64, f64)) -> f64 {
        if pair.0 == 0.0 {
            0.0
        } else {
            (pair.1 - pair.0) / pair.0
        }
    }

    pub fn paper_effect(&self) -> f64 {
        Self::effect(self.paper)
    }

    pub fn simulated_effect(&self) -> f64 {
        Self::effect(self.simulated)
    }

    /// Simulated effect over the paper's (1 = the same relative change).
    pub fn ratio(&self) -> f64 {
        let paper = self.paper_effect();
        if paper == 0.0 {
            0.0
        } else {
            self.simulated_effect() / paper
        }
    }

    /// Both effects have the same sign, and the simulated one is at least
    /// [`MIN_EFFECT`] (a change under 1 % is no effect).
    pub fn direction_holds(&self) -> bool {
        self.simulated_effect().abs() >= MIN_EFFECT
            && self.paper_effect().signum() == self.simulated_effect().signum()
    }

    /// "holds", "differs", or "no effect" (the simulation changed less than 1 %).
    pub fn verdict(&self) -> &'static str {
        if self.simulated_effect().abs() < MIN_EFFECT {
            "no effect"
        } else if self.direction_holds() {
            "holds"
        } else {
            "differs"
        }
    }
}

/// A relative change smaller than this (1 %) is reported as no effect.
pub const MIN_EFFECT: f64 = 0.01;

/// The papers `reproduce` knows.
pub const PAPERS: &[&str] = &["qasio", "fasttrack", "context-aware", "joj", "mobifs"];

/// A table of simulated values beside the headlines (every value computed by the runs; `None`
/// where the run has no such value, printed "-").
#[derive(Debug, Clone, Serialize)]
pub struct Table {
    pub title: String,
    /// What the paper shows in its place, and what the table approximates.
    pub note: String,
    pub columns: Vec<String>,
    pub rows: Vec<TableRow>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TableRow {
    pub label: String,
    pub values: Vec<Option<f64>>,
}

/// A paper's headlines and its extra tables.
#[derive(Debug, Clone, Serialize)]
pub struct Reproduction {
    pub paper: String,
    /// Only the runs the headlines need, and the tables that come from them (`--quick`).
    pub quick: bool,
    pub headlines: Vec<Headline>,
    pub tables: Vec<Table>,
}

/// How to reproduce.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReproduceOptions {
    /// The headlines and the tables of M1 only (a minute in release on two cores), not
    /// M2-M4's Table 2 and Figure 8 rows, M3/M5 baselines or Scenarios A-C.
    pub quick: bool,
    /// Worker threads for the variants of one scenario; 0 = one per core.
    pub threads: usize,
}

/// The runs of one scenario, by variant name.
struct Runs {
    by_variant: std::collections::BTreeMap<String, crate::report::RunResult>,
}

impl Runs {
    fn get(&self, variant: &str) -> &crate::report::RunResult {
        &self.by_variant[variant]
    }
}

/// Runs the built-in scenario `name` with `variants`, in parallel over `threads` workers.
fn run_builtin(name: &str, variants: &[&str], threads: usize) -> Result<Runs, String> {
    run_all(&builtin_with(name, variants)?, threads)
}

/// The built-in scenario `name` with only `variants`, in that order of its own.
fn builtin_with(name: &str, variants: &[&str]) -> Result<scenario::Scenario, String> {
    let mut s = scenario::load(name).map_err(|e| e.to_string())?;
    for variant in variants {
        if !s.variants.iter().any(|v| v.name == *variant) {
            s.select_variant(variant)?;
        }
    }
    s.variants.retain(|v| variants.contains(&v.name.as_str()));
    Ok(s)
}

/// Runs every variant of `s` over `threads` workers, keyed by variant name.
fn run_all(s: &scenario::Scenario, threads: usize) -> Result<Runs, String> {
    let options = RunOptions {
        threads,
        ..RunOptions::default()
    };
    let results = run_scenario(s, &options).map_err(|e| e.to_string())?;
    Ok(Runs {
        by_variant: results
            .runs
            .into_iter()
            .map(|run| (run.variant.clone(), run))
            .collect(),
    })
}

fn op_ns(run: &crate::report::RunResult, app: &str, op: &str, max: bool) -> Option<f64> {
    let summary = run.apps.get(app)?.ops.get(op)?;
    if summary.count == 0 {
        return None;
    }
    Some(if max {
        summary.max_ns as f64
    } else {
        summary.mean_ns
    })
}

fn op_ms(run: &crate::report::RunResult, app: &str, op: &str, max: bool) -> f64 {
    op_ns(run, app, op, max).unwrap_or(0.0) / 1e6
}

fn op_ms_opt(run: &crate::report::RunResult, app: &str, op: &str, max: bool) -> Option<f64> {
    op_ns(run, app, op, max).map(|ns| ns / 1e6)
}

fn active_s(run: &crate::report::RunResult, app: &str) -> f64 {
    run.apps[app].active_ns as f64 / 1e9
}

fn mb_per_s(run: &crate::report::RunResult, app: &str) -> f64 {
    let app = &run.apps[app];
    let bytes = app.counters.get("bytes").copied().unwrap_or(0) as f64;
    bytes / 1e6 / (app.active_ns.max(1) as f64 / 1e9)
}

/// The headlines and tables of `paper`, `progress` called before each scenario's runs.
pub fn reproduce(
    paper: &str,
    options: &ReproduceOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<Reproduction, String> {
    match paper {
        "qasio" => qasio::qasio(options, progress),
        "fasttrack" => fasttrack::fasttrack(options, progress),
        "context-aware" => context_aware::context_aware(options, progress),
        "joj" => joj::joj(options, progress),
        "mobifs" => mobifs::mobifs(options, progress),
        other => Err(format!(
            "no reproduction for `{other}`: known papers are {}",
            PAPERS.join(", ")
        )),
    }
}

/// The headlines as a table.
pub fn render(paper: &str, headlines: &[Headline]) -> String {
    let mut rows = vec![[
        "headline",
        "source",
        "paper",
        "simulated",
        "paper effect",
        "sim effect",
        "ratio",
        "direction",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect::<Vec<_>>()];
    let fmt = |(a, b): (f64, f64), unit: &str| format!("{a:.1} -> {b:.1} {unit}");
    for h in headlines {
        rows.push(vec![
            h.what.clone(),
            h.source.to_string(),
            if h.source.contains("->") || h.unit == "MB/s" {
                fmt(h.paper, h.unit)
            } else {
                "relative".to_string()
            },
            fmt(h.simulated, h.unit),
            format!("{:+.1} %", 100.0 * h.paper_effect()),
            format!("{:+.1} %", 100.0 * h.simulated_effect()),
            format!("{:.2}", h.ratio()),
            h.verdict().to_string(),
        ]);
    }
    format!(
        "reproduce {paper}: each paper headline beside the simulated figure (paper values typed from the paper; simulated values computed by the runs)\n{}",
        crate::report::table::align(&rows)
    )
}

/// One extra table as text.
pub fn render_table(table: &Table) -> String {
    let mut rows = vec![std::iter::once(String::new())
        .chain(table.columns.iter().cloned())
        .collect::<Vec<_>>()];
    for row in &table.rows {
        rows.push(
            std::iter::once(row.label.clone())
                .chain(row.values.iter().map(|v| match v {
                    Some(v) if v.abs() >= 100.0 => format!("{v:.0}"),
                    Some(v) if v.abs() >= 10.0 => format!("{v:.1}"),
                    Some(v) => format!("{v:.3}"),
                    None => "-".to_string(),
                }))
                .collect(),
        );
    }
    format!(
        "{}\n({})\n{}",
        table.title,
        table.note,
        crate::report::table::align(&rows)
    )
}

/// The headlines, then every table.
pub fn render_all(reproduction: &Reproduction) -> String {
    let mut out = render(&reproduction.paper, &reproduction.headlines);
    for table in &reproduction.tables {
        out.push('\n');
        out.push_str(&render_table(table));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effects_ratios_and_direction() {
        let h = Headline {
            what: "x".into(),
            source: "s",
            unit: "ms",
            paper: (100.0, 20.0),
            simulated: (50.0, 30.0),
        };
        assert!((h.paper_effect() + 0.8).abs() < 1e-12);
        assert!((h.simulated_effect() + 0.4).abs() < 1e-12);
        assert!((h.ratio() - 0.5).abs() < 1e-12);
        assert!(h.direction_holds());
        let worse = Headline {
            simulated: (50.0, 60.0),
            ..h
        };
        assert!(!worse.direction_holds());
        assert_eq!(worse.verdict(), "differs");
        let flat = Headline {
            simulated: (50.0, 49.9),
            ..worse
        };
        assert!(!flat.direction_holds());
        assert_eq!(flat.verdict(), "no effect");
    }

    #[test]
    fn tables_render_each_value_at_its_precision_and_missing_ones_as_a_dash() {
        let table = Table {
            title: "T".into(),
            note: "n".into(),
            columns: vec!["a".into(), "b".into()],
            rows: vec![TableRow {
                label: "row".into(),
                values: vec![Some(1234.56), None],
            }],
        };
        let text = render_table(&table);
        assert!(text.starts_with("T\n(n)\n"), "{text}");
        let last = text.lines().last().unwrap();
        assert_eq!(
            last.split_whitespace().collect::<Vec<_>>(),
            ["row", "1235", "-"]
        );
        let json = serde_json::to_value(&table).unwrap();
        assert_eq!(json["rows"][0]["values"][1], serde_json::Value::Null);
    }

    #[test]
    fn an_unknown_paper_is_an_error_naming_the_known_ones() {
        let error = reproduce("nope", &ReproduceOptions::default(), &mut |_| {}).unwrap_err();
        assert!(error.contains("qasio"), "{error}");
    }
}
