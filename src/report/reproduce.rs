//! `mobistack reproduce <paper>`: a paper's experiments run on the stack, each headline printed
//! beside the simulated figure. Paper values are references typed from the paper; every
//! simulated value is computed by the run. For each headline: the paper's relative effect, the
//! simulated one, their ratio, and whether the direction holds.
//!
//! QASIO (seed 000, FAST'15): Table 2's latency changes (NONE -> ALL), Figure 8's M1 total
//! time, M5's fsync with D_discard boosted, and the background write's throughput cost.

use crate::report::ScenarioResults;
use crate::run::{run_scenario, RunOptions};
use crate::scenario;
use serde::Serialize;

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
pub const PAPERS: &[&str] = &["qasio"];

/// Runs the built-in scenario `name` with one `variant`.
fn run_builtin(name: &str, variant: &str) -> Result<ScenarioResults, String> {
    let mut s = scenario::load(name).map_err(|e| e.to_string())?;
    s.select_variant(variant)?;
    run_scenario(&s, &RunOptions::default()).map_err(|e| e.to_string())
}

fn op_ms(results: &ScenarioResults, app: &str, op: &str, max: bool) -> f64 {
    let summary = &results.runs[0].apps[app].ops[op];
    let ns = if max {
        summary.max_ns as f64
    } else {
        summary.mean_ns
    };
    ns / 1e6
}

fn active_s(results: &ScenarioResults, app: &str) -> f64 {
    results.runs[0].apps[app].active_ns as f64 / 1e9
}

fn mb_per_s(results: &ScenarioResults, app: &str) -> f64 {
    let app = &results.runs[0].apps[app];
    let bytes = app.counters.get("bytes").copied().unwrap_or(0) as f64;
    bytes / 1e6 / (app.active_ns.max(1) as f64 / 1e9)
}

/// The headlines of `paper`, `progress` called before each run with its name.
pub fn reproduce(paper: &str, progress: &mut dyn FnMut(&str)) -> Result<Vec<Headline>, String> {
    match paper {
        "qasio" => qasio(progress),
        other => Err(format!(
            "no reproduction for `{other}`: known papers are {}",
            PAPERS.join(", ")
        )),
    }
}

fn qasio(progress: &mut dyn FnMut(&str)) -> Result<Vec<Headline>, String> {
    let mut run = |name: &str, variant: &str| {
        progress(&format!("{name} ({variant})"));
        run_builtin(name, variant)
    };
    let m1_none = run("qasio/m1", "none")?;
    let m1_all = run("qasio/m1", "all")?;
    let m3_none = run("qasio/m3", "none")?;
    let m3_all = run("qasio/m3", "all")?;
    let m5_none = run("qasio/m5", "none")?;
    let m5_discard = run("qasio/m5", "discard")?;
    let pair = |f: &dyn Fn(&ScenarioResults) -> f64, a: &ScenarioResults, b: &ScenarioResults| {
        (f(a), f(b))
    };
    Ok(vec![
        Headline {
            what: "creat() max latency, M1, NONE -> ALL".into(),
            source: "Table 2 (creat max -98 %)",
            unit: "ms",
            paper: (100.0, 2.0),
            simulated: pair(&|r| op_ms(r, "m1", "creat", true), &m1_none, &m1_all),
        },
        Headline {
            what: "fsync() max latency, M1, NONE -> ALL".into(),
            source: "Table 2 (fsync max -87 %)",
            unit: "ms",
            paper: (100.0, 13.0),
            simulated: pair(&|r| op_ms(r, "m1", "fsync", true), &m1_none, &m1_all),
        },
        Headline {
            what: "fsync() mean latency, M1, NONE -> ALL".into(),
            source: "§6 (M1: fsync -63.7 %)",
            unit: "ms",
            paper: (100.0, 36.3),
            simulated: pair(&|r| op_ms(r, "m1", "fsync", false), &m1_none, &m1_all),
        },
        Headline {
            what: "creat() mean latency, M1, NONE -> ALL".into(),
            source: "§6 (M1: creat -99.1 %)",
            unit: "ms",
            paper: (100.0, 0.9),
            simulated: pair(&|r| op_ms(r, "m1", "creat", false), &m1_none, &m1_all),
        },
        Headline {
            what: "M1 total elapsed time, NONE -> ALL".into(),
            source: "Figure 8 (M1 -83.1 %)",
            unit: "s",
            paper: (100.0, 16.9),
            simulated: pair(&|r| active_s(r, "m1"), &m1_none, &m1_all),
        },
        Headline {
            what: "write() max latency, M3, NONE -> ALL".into(),
            source: "Table 2 (write max -90 %)",
            unit: "ms",
            paper: (100.0, 10.0),
            simulated: pair(&|r| op_ms(r, "m3", "write", true), &m3_none, &m3_all),
        },
        Headline {
            what: "M5 fsync() latency, NONE -> D_discard".into(),
            source: "§6 (M5 fsync 13.27 s -> 6.85 s)",
            unit: "ms",
            paper: (13_270.0, 6_850.0),
            simulated: pair(&|r| op_ms(r, "m5", "fsync", true), &m5_none, &m5_discard),
        },
        Headline {
            what: "background write throughput during M1, NONE -> ALL".into(),
            source: "§6 (46.2 -> 39.1 MB/s)",
            unit: "MB/s",
            paper: (46.2, 39.1),
            simulated: pair(&|r| mb_per_s(r, "bgwrite"), &m1_none, &m1_all),
        },
    ])
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
    fn an_unknown_paper_is_an_error_naming_the_known_ones() {
        let error = reproduce("nope", &mut |_| {}).unwrap_err();
        assert!(error.contains("qasio"), "{error}");
    }
}
