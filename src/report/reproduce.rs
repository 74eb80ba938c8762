//! `mobistack reproduce <paper>`: a paper's experiments run on the stack, each headline printed
//! beside the simulated figure. Paper values are references typed from the paper; every
//! simulated value is computed by the run. For each headline: the paper's relative effect, the
//! simulated one, their ratio, and the verdict by size (`Verdict`).
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
use crate::sim::rng::Rng;
use crate::units::{Nanos, NS_PER_MS};
use serde::Serialize;

mod context_aware;
mod fasttrack;
mod joj;
mod mobifs;
mod qasio;

pub use fasttrack::many_bg_scenario as fasttrack_many_bg_scenario;

/// The statistic a headline compares (the paper's, and the simulation's in the same statistic).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Statistic {
    /// The mean over operations (or runs, or pairs).
    Mean,
    /// The 99th percentile.
    P99,
    /// The worst case.
    Max,
    /// A total: elapsed time of a whole task, energy over a window, data flushed.
    Total,
    /// Work per unit of time (MB/s, transactions/s, inserts/s).
    Throughput,
    /// The geometric mean over workloads.
    GeometricMean,
}

impl std::fmt::Display for Statistic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Statistic::Mean => "mean",
            Statistic::P99 => "p99",
            Statistic::Max => "max",
            Statistic::Total => "total",
            Statistic::Throughput => "throughput",
            Statistic::GeometricMean => "geomean",
        })
    }
}

/// A headline's figure, the paper's or the simulation's.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Measure {
    /// Before and after (baseline, technique): the effect is the relative change,
    /// (after - before) / before.
    Change(f64, f64),
    /// One absolute figure (such as the stock stack's inserts/s): the effect is the figure.
    Level(f64),
    /// Two relative changes, a reference and a compared one ("D_data + D_sync is as effective
    /// as D_meta"): the effect is compared / reference; a compared change under
    /// [`MIN_EFFECT`] is no effect.
    Quotient(f64, f64),
}

impl Measure {
    /// The relative change of a [`Measure::Change`], the figure of a [`Measure::Level`].
    pub fn effect(&self) -> f64 {
        match *self {
            Measure::Change(0.0, _) => 0.0,
            Measure::Change(before, after) => (after - before) / before,
            Measure::Level(value) => value,
            Measure::Quotient(reference, compared) => ratio(reference, compared),
        }
    }

    /// The simulation changed less than [`MIN_EFFECT`] (a change, or a quotient's compared
    /// change; never a level).
    pub fn no_effect(&self) -> bool {
        match *self {
            Measure::Change(..) => self.effect().abs() < MIN_EFFECT,
            Measure::Level(_) => false,
            Measure::Quotient(_, compared) => compared.abs() < MIN_EFFECT,
        }
    }

    /// The before and after of a change; a level as (level, level); a quotient's reference
    /// and compared changes.
    pub fn pair(&self) -> (f64, f64) {
        match *self {
            Measure::Change(before, after) | Measure::Quotient(before, after) => (before, after),
            Measure::Level(value) => (value, value),
        }
    }

    /// The component-wise mean of `samples` (all of one kind; `None` when empty or mixed).
    fn mean(samples: &[Measure]) -> Option<Measure> {
        let n = samples.len() as f64;
        match samples.first()? {
            Measure::Change(..) => {
                let mut sum = (0.0, 0.0);
                for m in samples {
                    let Measure::Change(a, b) = m else {
                        return None;
                    };
                    sum = (sum.0 + a, sum.1 + b);
                }
                Some(Measure::Change(sum.0 / n, sum.1 / n))
            }
            Measure::Level(_) => {
                let mut sum = 0.0;
                for m in samples {
                    let Measure::Level(v) = m else {
                        return None;
                    };
                    sum += v;
                }
                Some(Measure::Level(sum / n))
            }
            Measure::Quotient(..) => {
                let mut sum = (0.0, 0.0);
                for m in samples {
                    let Measure::Quotient(a, b) = m else {
                        return None;
                    };
                    sum = (sum.0 + a, sum.1 + b);
                }
                Some(Measure::Quotient(sum.0 / n, sum.1 / n))
            }
        }
    }
}

/// How the simulated effect compares with the paper's: the one rule of every reproduction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "verdict", content = "factor", rename_all = "kebab-case")]
pub enum Verdict {
    /// The ratio is within 0.5-2x.
    Matches,
    /// The ratio is 0.2-0.5x (the factor).
    Weaker(f64),
    /// The ratio is 2-5x (the factor).
    Stronger(f64),
    /// Same sign, but more than 5x off either way (the factor).
    DirectionOnly(f64),
    /// The simulated change is under [`MIN_EFFECT`].
    NoEffect,
    /// The simulated effect has the other sign.
    Opposite,
    /// The stack cannot compute the headline (the reason is the headline's).
    NotModelled,
}

impl Verdict {
    /// The shared rule: `simulated` over `paper` (a ratio), in bands of 0.5-2x (matches),
    /// 0.2-0.5x (weaker), 2-5x (stronger) and beyond (direction only); a simulated change under
    /// [`MIN_EFFECT`] is no effect (when `changes`: the effects are relative changes, not
    /// levels), a ratio below zero opposite.
    pub fn of(paper: f64, simulated: f64, changes: bool) -> Verdict {
        if changes && simulated.abs() < MIN_EFFECT {
            return Verdict::NoEffect;
        }
        let ratio = ratio(paper, simulated);
        if ratio < 0.0 {
            Verdict::Opposite
        } else if (MATCH_BAND.0..=MATCH_BAND.1).contains(&ratio) {
            Verdict::Matches
        } else if (1.0 / DIRECTION_ONLY_BEYOND..MATCH_BAND.0).contains(&ratio) {
            Verdict::Weaker(ratio)
        } else if ratio > MATCH_BAND.1 && ratio <= DIRECTION_ONLY_BEYOND {
            Verdict::Stronger(ratio)
        } else {
            Verdict::DirectionOnly(ratio)
        }
    }

    /// The verdict's name without its factor ("matches", "weaker", ...).
    pub fn name(&self) -> &'static str {
        match self {
            Verdict::Matches => "matches",
            Verdict::Weaker(_) => "weaker",
            Verdict::Stronger(_) => "stronger",
            Verdict::DirectionOnly(_) => "direction only",
            Verdict::NoEffect => "no effect",
            Verdict::Opposite => "opposite",
            Verdict::NotModelled => "not modelled",
        }
    }

    /// Every verdict's name, in the summary's order.
    pub const NAMES: [&'static str; 7] = [
        "matches",
        "weaker",
        "stronger",
        "direction only",
        "no effect",
        "opposite",
        "not modelled",
    ];
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Verdict::Weaker(x) | Verdict::Stronger(x) | Verdict::DirectionOnly(x) => {
                write!(f, "{} (x{})", self.name(), factor(*x))
            }
            _ => f.write_str(self.name()),
        }
    }
}

/// A factor at three significant digits, trailing zeros dropped ("0.197", "0.3", "2.04", "456").
fn factor(x: f64) -> String {
    if !x.is_finite() {
        return "inf".into();
    }
    if x == 0.0 {
        return "0".into();
    }
    let decimals = (2 - x.abs().log10().floor() as i32).max(0) as usize;
    let text = format!("{x:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// `simulated` over `paper`; infinite when the paper's is zero and the simulation's not.
fn ratio(paper: f64, simulated: f64) -> f64 {
    if paper == 0.0 {
        if simulated == 0.0 {
            1.0
        } else {
            f64::INFINITY
        }
    } else {
        simulated / paper
    }
}

/// For two reductions (both changes negative), how many times more of the quantity the
/// simulation removed, read on what is left: the paper's remaining fraction (after / before)
/// over the simulation's. A reduction cannot pass -100 %, so its effect ratio tops out near
/// 1 / |paper effect| (1.87 against -53.6 %) and would call -99.9 % a match for -53.6 %; what
/// is left (0.1 % against 46.4 %) is 464x apart. `None` unless both are reductions of positive
/// figures; infinite when the simulation removed everything.
fn remaining_ratio(paper: &Measure, simulated: &Measure) -> Option<f64> {
    let (Measure::Change(pb, pa), Measure::Change(sb, sa)) = (*paper, *simulated) else {
        return None;
    };
    let reductions = pb > 0.0 && sb > 0.0 && pa < pb && sa < sb && pa >= 0.0 && sa >= 0.0;
    reductions.then(|| ratio(sa / sb, pa / pb))
}

/// `a` is further from 1 than `b` on a log scale (a factor of 4 departs more than one of 1/3).
fn departs_more(a: f64, b: f64) -> bool {
    let departure = |x: f64| if x > 0.0 { x.ln().abs() } else { f64::INFINITY };
    departure(a) > departure(b)
}

/// The ratios a verdict calls "matches".
pub const MATCH_BAND: (f64, f64) = (0.5, 2.0);
/// Past this factor either way a verdict says "direction only".
pub const DIRECTION_ONLY_BEYOND: f64 = 5.0;

/// One headline of a paper beside the simulation.
#[derive(Debug, Clone, Serialize)]
pub struct Headline {
    pub what: String,
    /// Where the paper says it.
    pub source: &'static str,
    pub unit: &'static str,
    /// The statistic of the paper's figure, and of the simulated one compared with it.
    pub statistic: Statistic,
    /// The paper's figure, typed from the paper.
    pub paper: Measure,
    /// The paper gives only the relative change (its pair is normalised, e.g. 100 -> 16.9).
    pub paper_relative: bool,
    /// The simulation's figure, computed by the runs (the mean over seeds under `--seeds`);
    /// `None` when the stack cannot compute it ([`Headline::not_modelled`] says why).
    pub simulated: Option<Measure>,
    /// Why the stack cannot compute the headline.
    pub not_modelled: Option<String>,
    /// The simulation's figure in another statistic, shown beside (no verdict): e.g. the
    /// worst case where the paper gives the mean.
    pub also: Option<(Statistic, Measure)>,
    /// The simulated figure of each seed (`--seeds`; empty for one run).
    pub samples: Vec<Measure>,
}

impl Headline {
    /// A before -> after headline with the paper's absolute figures.
    pub fn change(
        what: impl Into<String>,
        source: &'static str,
        unit: &'static str,
        statistic: Statistic,
        paper: (f64, f64),
        simulated: (f64, f64),
    ) -> Headline {
        Headline {
            what: what.into(),
            source,
            unit,
            statistic,
            paper: Measure::Change(paper.0, paper.1),
            paper_relative: false,
            simulated: Some(Measure::Change(simulated.0, simulated.1)),
            not_modelled: None,
            also: None,
            samples: Vec::new(),
        }
    }

    /// A before -> after headline where the paper gives only the relative change
    /// (`paper_after` for 100 before, e.g. 16.9 for -83.1 %).
    pub fn relative(
        what: impl Into<String>,
        source: &'static str,
        unit: &'static str,
        statistic: Statistic,
        paper_after: f64,
        simulated: (f64, f64),
    ) -> Headline {
        Headline {
            paper_relative: true,
            ..Headline::change(
                what,
                source,
                unit,
                statistic,
                (100.0, paper_after),
                simulated,
            )
        }
    }

    /// A headline comparing two of the simulation's relative changes (reference, compared)
    /// with the paper's quotient of them (1 = "as effective as").
    pub fn quotient(
        what: impl Into<String>,
        source: &'static str,
        statistic: Statistic,
        paper: f64,
        simulated: (f64, f64),
    ) -> Headline {
        Headline {
            paper: Measure::Level(paper),
            simulated: Some(Measure::Quotient(simulated.0, simulated.1)),
            ..Headline::change(what, source, "x", statistic, (0.0, 0.0), (0.0, 0.0))
        }
    }

    /// A one-figure headline (an absolute level).
    pub fn level(
        what: impl Into<String>,
        source: &'static str,
        unit: &'static str,
        statistic: Statistic,
        paper: f64,
        simulated: f64,
    ) -> Headline {
        Headline {
            paper: Measure::Level(paper),
            simulated: Some(Measure::Level(simulated)),
            ..Headline::change(what, source, unit, statistic, (0.0, 0.0), (0.0, 0.0))
        }
    }

    /// A headline of the paper the stack cannot compute, with the reason.
    pub fn not_modelled(
        what: impl Into<String>,
        source: &'static str,
        unit: &'static str,
        statistic: Statistic,
        paper: Measure,
        reason: impl Into<String>,
    ) -> Headline {
        Headline {
            paper,
            simulated: None,
            not_modelled: Some(reason.into()),
            ..Headline::change(what, source, unit, statistic, (0.0, 0.0), (0.0, 0.0))
        }
    }

    /// The same headline with the paper's figure shown as its relative change only (its pair
    /// is normalised, e.g. 100 -> 64.2).
    pub fn paper_relative_only(self) -> Headline {
        Headline {
            paper_relative: true,
            ..self
        }
    }

    /// The same headline with the simulation's figure in `statistic` shown beside.
    pub fn with_also(self, statistic: Statistic, simulated: (f64, f64)) -> Headline {
        Headline {
            also: Some((statistic, Measure::Change(simulated.0, simulated.1))),
            ..self
        }
    }

    pub fn paper_effect(&self) -> f64 {
        self.paper.effect()
    }

    /// The simulated effect (0 when not modelled).
    pub fn simulated_effect(&self) -> f64 {
        self.simulated.map_or(0.0, |m| m.effect())
    }

    /// Simulated effect over the paper's (1 = the same relative change; `None` when not
    /// modelled).
    pub fn ratio(&self) -> Option<f64> {
        self.simulated
            .map(|m| ratio(self.paper_effect(), m.effect()))
    }

    /// The shared rule ([`Verdict::of`]) applied to this headline's figures.
    pub fn verdict(&self) -> Verdict {
        match self.simulated {
            None => Verdict::NotModelled,
            Some(m) if m.no_effect() => Verdict::NoEffect,
            // A level has no direction: beyond the direction-only factor it is still weaker
            // (lower) or stronger (higher) than the paper's figure, never "direction only". (A
            // quotient of two changes keeps its direction: its sign says whether they agree.)
            Some(m @ Measure::Level(_)) if matches!(self.paper, Measure::Level(_)) => {
                match Verdict::of(self.paper_effect(), m.effect(), false) {
                    Verdict::DirectionOnly(r) if r < 1.0 => Verdict::Weaker(r),
                    Verdict::DirectionOnly(r) => Verdict::Stronger(r),
                    verdict => verdict,
                }
            }
            Some(m) => {
                let by_effect = Verdict::of(self.paper_effect(), m.effect(), false);
                match remaining_ratio(&self.paper, &m) {
                    // Only where the simulation cut deeper: a shallower cut is judged on
                    // its effect ratio, which already says how much weaker it is.
                    Some(k) if k > 1.0 && departs_more(k, self.ratio().unwrap_or(1.0)) => {
                        Verdict::of(1.0, k, false)
                    }
                    _ => by_effect,
                }
            }
        }
    }

    /// Both effects have the same sign and the simulated one is not [`Verdict::NoEffect`].
    pub fn direction_holds(&self) -> bool {
        !matches!(
            self.verdict(),
            Verdict::NoEffect | Verdict::Opposite | Verdict::NotModelled
        )
    }

    /// Over the seeds (`samples`): the (min, max) of the before, the after and the ratio.
    pub fn spread(&self) -> Option<Spread> {
        if self.samples.len() < 2 {
            return None;
        }
        let paper = self.paper_effect();
        let range = |f: &dyn Fn(&Measure) -> f64| {
            self.samples
                .iter()
                .map(f)
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
                    (lo.min(v), hi.max(v))
                })
        };
        Some(Spread {
            seeds: self.samples.len(),
            before: range(&|m| m.pair().0),
            after: range(&|m| m.pair().1),
            ratio: range(&|m| ratio(paper, m.effect())),
        })
    }
}

/// A headline's spread over seeds: (min, max) of each figure.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    pub seeds: usize,
    pub before: (f64, f64),
    pub after: (f64, f64),
    pub ratio: (f64, f64),
}

/// A relative change smaller than this (1 %) is reported as no effect.
pub const MIN_EFFECT: f64 = 0.01;

/// How many headlines have each verdict, in [`Verdict::NAMES`] order (zero counts included).
pub fn verdict_counts(headlines: &[Headline]) -> Vec<(&'static str, usize)> {
    Verdict::NAMES
        .iter()
        .map(|&name| {
            (
                name,
                headlines
                    .iter()
                    .filter(|h| h.verdict().name() == name)
                    .count(),
            )
        })
        .collect()
}

/// The summary line: "qasio: 12 headlines: 3 matches, 2 weaker, ...".
pub fn summary(paper: &str, headlines: &[Headline]) -> String {
    let counts: Vec<String> = verdict_counts(headlines)
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(name, n)| format!("{n} {name}"))
        .collect();
    format!(
        "{paper}: {} headlines: {}",
        headlines.len(),
        counts.join(", ")
    )
}

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

/// One table's (min, max) over seeds, by row and column (`None` where a cell has no value).
pub type CellSpreads = Vec<Vec<Option<(f64, f64)>>>;

/// A paper's headlines and its extra tables.
#[derive(Debug, Clone, Serialize)]
pub struct Reproduction {
    pub paper: String,
    /// Only the runs the headlines need, and the tables that come from them (`--quick`).
    pub quick: bool,
    pub headlines: Vec<Headline>,
    pub tables: Vec<Table>,
    /// The seeds run (`--seeds`); empty for one run with each scenario's own seed.
    pub seeds: Vec<u64>,
    /// Over the seeds, each table cell's (min, max), by table, row and column (empty for one
    /// run); the tables hold the means.
    pub table_spreads: Vec<CellSpreads>,
}

impl Reproduction {
    fn new(paper: &str, quick: bool, headlines: Vec<Headline>, tables: Vec<Table>) -> Self {
        Reproduction {
            paper: paper.into(),
            quick,
            headlines,
            tables,
            seeds: Vec::new(),
            table_spreads: Vec::new(),
        }
    }
}

/// How to reproduce.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReproduceOptions {
    /// The headlines and the tables of M1 only (a minute in release on two cores), not
    /// M2-M4's Table 2 and Figure 8 rows, M3/M5 baselines or Scenarios A-C.
    pub quick: bool,
    /// Worker threads for the variants of one scenario; 0 = one per core.
    pub threads: usize,
    /// Run every scenario with this seed, each app starting [`start_jitter`] later (drawn from
    /// the seed); `None` = each scenario's own seed, no jitter (the default reproduction).
    pub seed: Option<u64>,
}

/// Under `--seeds`, each app starts up to this much later than its scenario says, uniformly
/// drawn from the seed (asm: a run repeated by hand, or by a script that launches the
/// foreground app and the background writer one after the other, does not start them at the
/// same instant each time; the papers report means over such repeats, QASIO's Scenario A over
/// 500; issue 43 saw cells move 4-21 % for 0.1-0.4 s).
pub const START_JITTER_NS: Nanos = 500 * NS_PER_MS;

/// How much later `app` of a scenario starts under `seed`: uniform in [0, [`START_JITTER_NS`]).
pub fn start_jitter(seed: u64, app: &str) -> Nanos {
    Rng::named(seed, &format!("reproduce/start/{app}")).below(START_JITTER_NS)
}

/// `s` as it runs under `seed`: its seeds replaced by `seed`, each app's start (and each
/// timeline event that starts it) moved [`start_jitter`] later.
pub fn with_seed(s: &scenario::Scenario, seed: u64) -> scenario::Scenario {
    let mut s = s.clone();
    s.seeds = vec![seed];
    let jitter: Vec<Nanos> = s
        .apps
        .iter()
        .map(|app| start_jitter(seed, app.name.get_ref()))
        .collect();
    for (app, delay) in s.apps.iter_mut().zip(&jitter) {
        app.start += delay;
    }
    for event in &mut s.timeline {
        if let scenario::TimelineAction::Start(i) = event.action {
            event.at += jitter.get(i).copied().unwrap_or(0);
        }
    }
    s.timeline.sort_by_key(|e| e.at);
    s
}

impl ReproduceOptions {
    /// The run options of one scenario's runs (threads; the seed is in the scenario, see
    /// [`ReproduceOptions::scenario`]).
    fn run_options(&self) -> RunOptions {
        RunOptions {
            threads: self.threads,
            ..RunOptions::default()
        }
    }

    /// `s` as these options run it: itself, or [`with_seed`] under a seed.
    fn scenario(&self, s: &scenario::Scenario) -> scenario::Scenario {
        match self.seed {
            Some(seed) => with_seed(s, seed),
            None => s.clone(),
        }
    }
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

/// Runs the built-in scenario `name` with `variants`, as `options` say.
fn run_builtin(name: &str, variants: &[&str], options: &ReproduceOptions) -> Result<Runs, String> {
    run_all(&builtin_with(name, variants)?, options)
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

/// Runs every variant of `s` (with the seed of `options`), keyed by variant name.
fn run_all(s: &scenario::Scenario, options: &ReproduceOptions) -> Result<Runs, String> {
    let results =
        run_scenario(&options.scenario(s), &options.run_options()).map_err(|e| e.to_string())?;
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

/// Most seeds `--seeds` runs (each is a whole reproduction).
pub const MAX_SEEDS: usize = 100;

/// `--seeds`: `N` (seeds 1..=N) or a comma-separated list of seeds.
pub fn parse_seeds(text: &str) -> Result<Vec<u64>, String> {
    let text = text.trim();
    let seeds: Vec<u64> = if text.contains(',') {
        text.split(',')
            .map(|s| {
                s.trim().parse::<u64>().map_err(|_| {
                    format!("`{}` in `{text}` is not a seed (a whole number)", s.trim())
                })
            })
            .collect::<Result<_, _>>()?
    } else {
        let n: u64 = text
            .parse()
            .map_err(|_| format!("`{text}` is neither a count of seeds nor a list like `1,7,9`"))?;
        (1..=n).collect()
    };
    if seeds.is_empty() || seeds.len() > MAX_SEEDS {
        return Err(format!("{} seeds: give 1 to {MAX_SEEDS}", seeds.len()));
    }
    Ok(seeds)
}

/// [`reproduce`] once per seed of `seeds` ([`ReproduceOptions::seed`]), merged: each headline's
/// simulated figure and each table cell the mean over the seeds, with the per-seed figures
/// (`samples`) and each cell's spread.
pub fn reproduce_seeds(
    paper: &str,
    options: &ReproduceOptions,
    seeds: &[u64],
    progress: &mut dyn FnMut(&str),
) -> Result<Reproduction, String> {
    let mut runs = Vec::new();
    for &seed in seeds {
        let options = ReproduceOptions {
            seed: Some(seed),
            ..*options
        };
        runs.push(reproduce(paper, &options, &mut |run| {
            progress(&format!("seed {seed}: {run}"))
        })?);
    }
    let mut merged = merge_seeds(runs)?;
    merged.seeds = seeds.to_vec();
    Ok(merged)
}

/// The reproductions of one paper under several seeds as one: headlines and table cells
/// averaged, the per-seed figures kept.
fn merge_seeds(runs: Vec<Reproduction>) -> Result<Reproduction, String> {
    let mut runs = runs.into_iter();
    let mut merged = runs.next().ok_or("no seeds to run")?;
    let rest: Vec<Reproduction> = runs.collect();
    for (i, h) in merged.headlines.iter_mut().enumerate() {
        let mut samples: Vec<Measure> = h.simulated.into_iter().collect();
        for other in &rest {
            let o = other
                .headlines
                .get(i)
                .filter(|o| o.what == h.what)
                .ok_or_else(|| format!("seeds disagree on headline {}", h.what))?;
            samples.extend(o.simulated);
        }
        h.simulated = Measure::mean(&samples);
        if let Some((statistic, _)) = h.also {
            let also: Vec<Measure> = std::iter::once(&*h)
                .chain(rest.iter().map(|r| &r.headlines[i]))
                .filter_map(|x| x.also.map(|(_, m)| m))
                .collect();
            h.also = Measure::mean(&also).map(|m| (statistic, m));
        }
        h.samples = samples;
    }
    merged.table_spreads = merged
        .tables
        .iter_mut()
        .enumerate()
        .map(|(t, table)| {
            table
                .rows
                .iter_mut()
                .enumerate()
                .map(|(r, row)| {
                    row.values
                        .iter_mut()
                        .enumerate()
                        .map(|(c, value)| {
                            let cells: Vec<f64> = std::iter::once(*value)
                                .chain(rest.iter().map(|o| {
                                    o.tables
                                        .get(t)
                                        .and_then(|x| x.rows.get(r))
                                        .and_then(|x| x.values.get(c).copied().flatten())
                                }))
                                .flatten()
                                .collect();
                            if cells.is_empty() {
                                return None;
                            }
                            *value = Some(cells.iter().sum::<f64>() / cells.len() as f64);
                            Some(
                                cells
                                    .iter()
                                    .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
                                        (lo.min(v), hi.max(v))
                                    }),
                            )
                        })
                        .collect()
                })
                .collect()
        })
        .collect();
    Ok(merged)
}

/// A figure at its precision (0 decimals from 100, 1 from 10, else 3 significant-ish).
fn figure(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// A measure as text: "13270 -> 6850 ms (-48.4 %)", "-48.4 %" (`relative`), "39.0 inserts/s".
fn measure_text(m: &Measure, unit: &str, relative: bool) -> String {
    match *m {
        Measure::Change(..) if relative => format!("{:+.1} %", 100.0 * m.effect()),
        Measure::Change(a, b) => format!(
            "{} -> {} {unit} ({:+.1} %)",
            figure(a),
            figure(b),
            100.0 * m.effect()
        ),
        Measure::Level(v) => format!("{} {unit}", figure(v)),
        Measure::Quotient(reference, compared) => format!(
            "{:+.1} % / {:+.1} % = {}",
            100.0 * compared,
            100.0 * reference,
            factor(m.effect())
        ),
    }
}

/// The headlines as a table (paper, simulated, statistic, ratio, verdict; the spread over seeds
/// when there are samples), the summary line, then the reasons of the headlines not modelled.
pub fn render(paper: &str, headlines: &[Headline]) -> String {
    let spreads = headlines.iter().any(|h| h.spread().is_some());
    let mut header = vec![
        "headline",
        "source",
        "paper",
        "simulated",
        "statistic",
        "ratio",
        "verdict",
    ];
    if spreads {
        header.extend(["before min-max", "after min-max", "ratio min-max"]);
    }
    let mut rows = vec![header.iter().map(|s| s.to_string()).collect::<Vec<_>>()];
    for h in headlines {
        let simulated = match (&h.simulated, &h.also) {
            (None, _) => "-".to_string(),
            (Some(m), None) => measure_text(m, h.unit, false),
            (Some(m), Some((statistic, also))) => format!(
                "{}; {statistic} {}",
                measure_text(m, h.unit, false),
                measure_text(also, h.unit, false)
            ),
        };
        let mut row = vec![
            h.what.clone(),
            h.source.to_string(),
            measure_text(&h.paper, h.unit, h.paper_relative),
            simulated,
            h.statistic.to_string(),
            h.ratio().map_or("-".into(), factor),
            h.verdict().to_string(),
        ];
        if spreads {
            let range =
                |(lo, hi): (f64, f64), f: &dyn Fn(f64) -> String| format!("{}-{}", f(lo), f(hi));
            match h.spread() {
                Some(s) => row.extend([
                    range(s.before, &figure),
                    range(s.after, &figure),
                    range(s.ratio, &factor),
                ]),
                None => row.extend(["-".to_string(), "-".to_string(), "-".to_string()]),
            }
        }
        rows.push(row);
    }
    let mut out = format!(
        "reproduce {paper}: each paper headline beside the simulated figure (paper values typed from the paper; simulated values computed by the runs; ratio = simulated effect / paper effect; verdict: matches within {}-{}x, weaker / stronger beyond with the factor, direction only past {}x either way, no effect under {} %, opposite; a reduction the simulation cuts deeper is also judged on what is left, the paper's remaining fraction over the simulation's, when that departs further)\n{}{}",
        MATCH_BAND.0,
        MATCH_BAND.1,
        DIRECTION_ONLY_BEYOND,
        100.0 * MIN_EFFECT,
        crate::report::table::align(&rows),
        summary(paper, headlines),
    );
    for h in headlines {
        if let Some(reason) = &h.not_modelled {
            out.push_str(&format!("\nnot modelled: {}: {reason}", h.what));
        }
    }
    out.push('\n');
    out
}

/// One extra table as text (each cell "mean (min-max)" when `spread` has the seeds' range).
pub fn render_table(table: &Table, spread: Option<&CellSpreads>) -> String {
    let mut rows = vec![std::iter::once(String::new())
        .chain(table.columns.iter().cloned())
        .collect::<Vec<_>>()];
    for (r, row) in table.rows.iter().enumerate() {
        rows.push(
            std::iter::once(row.label.clone())
                .chain(row.values.iter().enumerate().map(|(c, v)| {
                    let range = spread
                        .and_then(|s| s.get(r))
                        .and_then(|s| s.get(c).copied().flatten());
                    match (v, range) {
                        (Some(v), Some((lo, hi))) if lo != hi => {
                            format!("{} ({}-{})", figure(*v), figure(lo), figure(hi))
                        }
                        (Some(v), _) => figure(*v),
                        (None, _) => "-".to_string(),
                    }
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
    if !reproduction.seeds.is_empty() {
        out.push_str(&format!(
            "seeds {:?}: each simulated figure is the mean over the seeds, each app starting up to {} ms later (drawn from the seed); tables show mean (min-max)\n",
            reproduction.seeds,
            START_JITTER_NS / NS_PER_MS
        ));
    }
    for (t, table) in reproduction.tables.iter().enumerate() {
        out.push('\n');
        out.push_str(&render_table(table, reproduction.table_spreads.get(t)));
    }
    out
}

/// `--json`: the paper, the seeds, each headline (figures, effects, ratio, verdict, statistic,
/// spread), the verdict counts and the tables.
pub fn json(reproduction: &Reproduction) -> serde_json::Value {
    let headlines: Vec<_> = reproduction
        .headlines
        .iter()
        .map(|h| {
            let verdict = h.verdict();
            serde_json::json!({
                "headline": h.what,
                "source": h.source,
                "unit": h.unit,
                "statistic": h.statistic,
                "paper": h.paper,
                "paper_relative": h.paper_relative,
                "simulated": h.simulated,
                "also": h.also,
                "not_modelled": h.not_modelled,
                "paper_effect": h.paper_effect(),
                "simulated_effect": h.simulated.map(|m| m.effect()),
                "ratio": h.ratio(),
                "verdict": verdict.name(),
                "verdict_text": verdict.to_string(),
                "samples": h.samples,
                "spread": h.spread(),
            })
        })
        .collect();
    let counts: serde_json::Map<String, serde_json::Value> =
        verdict_counts(&reproduction.headlines)
            .into_iter()
            .map(|(name, n)| (name.to_string(), n.into()))
            .collect();
    serde_json::json!({
        "paper": reproduction.paper,
        "quick": reproduction.quick,
        "seeds": reproduction.seeds,
        "headlines": headlines,
        "verdicts": counts,
        "tables": reproduction.tables,
        "table_spreads": reproduction.table_spreads,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effects_ratios_and_verdicts_of_a_headline_come_from_its_figures() {
        let h = Headline::change("x", "s", "ms", Statistic::Mean, (100.0, 20.0), (50.0, 30.0));
        assert!((h.paper_effect() + 0.8).abs() < 1e-12);
        assert!((h.simulated_effect() + 0.4).abs() < 1e-12);
        assert!((h.ratio().unwrap() - 0.5).abs() < 1e-12);
        assert_eq!(h.verdict(), Verdict::Matches);
        assert!(h.direction_holds());
        let worse = Headline {
            simulated: Some(Measure::Change(50.0, 60.0)),
            ..h.clone()
        };
        assert_eq!(worse.verdict(), Verdict::Opposite);
        assert!(!worse.direction_holds());
        let flat = Headline {
            simulated: Some(Measure::Change(50.0, 49.9)),
            ..h.clone()
        };
        assert_eq!(flat.verdict(), Verdict::NoEffect);
        let weak = Headline {
            simulated: Some(Measure::Change(50.0, 45.0)),
            ..h.clone()
        };
        assert_eq!(weak.verdict().to_string(), "direction only (x0.125)");
        let missing = Headline::not_modelled(
            "score",
            "s",
            "points",
            Statistic::Total,
            Measure::Change(1785.0, 1421.0),
            "no score formula",
        );
        assert_eq!(missing.verdict(), Verdict::NotModelled);
        assert_eq!(missing.ratio(), None);
        // A quotient of two changes: no effect when the compared change is under 1 %, else
        // the quotient against the paper's.
        let q = |reference, compared| {
            Headline::quotient("q", "s", Statistic::Total, 1.0, (reference, compared)).verdict()
        };
        assert_eq!(q(-0.096, 0.0), Verdict::NoEffect);
        assert_eq!(q(-0.5, -0.4), Verdict::Matches);
        assert_eq!(q(-0.55, -0.086).name(), "direction only");
        assert_eq!(q(-0.5, 0.2), Verdict::Opposite);
    }

    #[test]
    fn a_reduction_near_minus_100_percent_is_judged_on_what_is_left() {
        let cut = |paper_after: f64, sim_after: f64| {
            Headline::change(
                "c",
                "s",
                "ms",
                Statistic::Mean,
                (100.0, paper_after),
                (100.0, sim_after),
            )
            .verdict()
        };
        // MobiFS's Facebook-like response time: -99.9 % against -53.6 %. The effect ratio is
        // 1.86 ("matches" on it alone); what is left, 0.1 % against 46.4 %, is 464x apart.
        assert_eq!(cut(46.4, 0.1).name(), "direction only");
        // -95 % against -80 %: 5 % left against 20 %, stronger by 4.
        assert_eq!(cut(20.0, 5.0), Verdict::Stronger(4.0));
        // Moderate cuts are judged on the effect ratio as before.
        assert_eq!(cut(50.0, 40.0), Verdict::Matches);
        assert_eq!(cut(50.0, 80.0).name(), "weaker");
        // Everything removed: infinitely stronger on what is left, never a panic.
        assert_eq!(cut(46.4, 0.0).name(), "direction only");
        // Increases are judged on the effect ratio alone.
        assert_eq!(cut(230.0, 400.0), Verdict::Stronger(3.0 / 1.3));
    }

    #[test]
    fn the_verdict_rule_s_bands_and_their_boundaries() {
        let v = |paper: f64, sim: f64| Verdict::of(paper, sim, true);
        // Ratio 1, and the match band's ends (inclusive).
        assert_eq!(v(-0.5, -0.5), Verdict::Matches);
        assert_eq!(v(-0.5, -0.25), Verdict::Matches);
        assert_eq!(v(0.5, 1.0), Verdict::Matches);
        // Just outside: weaker / stronger with the factor.
        assert_eq!(v(-0.5, -0.249), Verdict::Weaker(0.498));
        assert_eq!(v(0.5, 1.01), Verdict::Stronger(2.02));
        // The direction-only band starts past 5x either way (5x and 0.2x themselves are not).
        assert_eq!(v(0.5, 2.5), Verdict::Stronger(5.0));
        assert_eq!(v(0.5, 0.1), Verdict::Weaker(0.2));
        assert_eq!(v(0.5, 2.51).name(), "direction only");
        assert_eq!(v(0.5, 0.099).name(), "direction only");
        // Under 1 % is no effect whatever the paper's, and that wins over opposite.
        assert_eq!(v(-0.8, 0.0099), Verdict::NoEffect);
        assert_eq!(v(-0.8, -0.0099), Verdict::NoEffect);
        assert_eq!(v(-0.8, 0.01), Verdict::Opposite);
        assert_eq!(v(-0.8, 0.5), Verdict::Opposite);
        // A level has no "no effect": a quotient of 0.005 is 0.005x the paper's.
        assert_eq!(Verdict::of(1.0, 0.005, false).name(), "direction only");
        assert_eq!(Verdict::of(39.0, 53.1, false), Verdict::Matches);
        assert_eq!(Verdict::of(1.0, -0.3, false), Verdict::Opposite);
        // A paper without an effect: a simulated one is infinitely stronger, never a panic.
        assert_eq!(v(0.0, 0.5).to_string(), "direction only (xinf)");
        // The text carries the factor at three significant digits, so that a factor never
        // rounds across a band's edge (0.197 is not "0.20").
        assert_eq!(Verdict::Weaker(0.3).to_string(), "weaker (x0.3)");
        assert_eq!(Verdict::Stronger(3.456).to_string(), "stronger (x3.46)");
        assert_eq!(
            Verdict::DirectionOnly(0.197).to_string(),
            "direction only (x0.197)"
        );
        assert_eq!(
            Verdict::DirectionOnly(456.3).to_string(),
            "direction only (x456)"
        );
    }

    /// A level (a figure, not a change) has no direction: far from the paper's it is weaker or
    /// stronger with its factor, never "direction only".
    #[test]
    fn a_level_far_from_the_papers_is_weaker_or_stronger_not_direction_only() {
        let level = |paper, sim| Headline::level("l", "s", "x", Statistic::Mean, paper, sim);
        assert!(
            matches!(level(1.0, 0.112).verdict(), Verdict::Weaker(r) if (r - 0.112).abs() < 1e-9)
        );
        assert!(matches!(level(39.0, 500.0).verdict(), Verdict::Stronger(_)));
        assert_eq!(level(39.0, 52.0).verdict(), Verdict::Matches);
    }

    #[test]
    fn the_summary_counts_each_verdict_and_json_carries_verdict_ratio_and_statistic() {
        let h =
            |sim: (f64, f64)| Headline::change("h", "s", "ms", Statistic::Max, (100.0, 20.0), sim);
        let headlines = vec![
            h((50.0, 10.0)),
            h((50.0, 12.0)),
            h((50.0, 60.0)),
            Headline::level("l", "s", "x", Statistic::Throughput, 39.0, 500.0),
        ];
        assert_eq!(
            summary("p", &headlines),
            "p: 4 headlines: 2 matches, 1 stronger, 1 opposite"
        );
        let reproduction = Reproduction::new("p", false, headlines, vec![]);
        let json = json(&reproduction);
        let first = &json["headlines"][0];
        assert_eq!(first["verdict"], "matches");
        assert_eq!(first["statistic"], "max");
        assert!((first["ratio"].as_f64().unwrap() - 1.0).abs() < 1e-12);
        assert_eq!(json["verdicts"]["matches"], 2);
        assert_eq!(json["verdicts"]["opposite"], 1);
        let text = render("p", &reproduction.headlines);
        for column in ["paper", "simulated", "statistic", "ratio", "verdict"] {
            assert!(text.lines().nth(1).unwrap().contains(column), "{text}");
        }
        assert!(!text.contains("holds"), "{text}");
    }

    #[test]
    fn seeds_merge_into_means_with_their_spread() {
        let one = |sim: (f64, f64), cell: f64| {
            Reproduction::new(
                "p",
                false,
                vec![Headline::change(
                    "h",
                    "s",
                    "ms",
                    Statistic::Mean,
                    (100.0, 50.0),
                    sim,
                )],
                vec![Table {
                    title: "T".into(),
                    note: "n".into(),
                    columns: vec!["a".into()],
                    rows: vec![TableRow {
                        label: "r".into(),
                        values: vec![Some(cell)],
                    }],
                }],
            )
        };
        let merged = merge_seeds(vec![one((10.0, 4.0), 1.0), one((10.0, 8.0), 3.0)]).unwrap();
        let h = &merged.headlines[0];
        assert_eq!(h.simulated, Some(Measure::Change(10.0, 6.0)));
        let spread = h.spread().unwrap();
        assert_eq!(spread.after, (4.0, 8.0));
        assert!((spread.ratio.0 - 0.4).abs() < 1e-12 && (spread.ratio.1 - 1.2).abs() < 1e-12);
        assert_eq!(merged.tables[0].rows[0].values[0], Some(2.0));
        assert_eq!(merged.table_spreads[0][0][0], Some((1.0, 3.0)));
        let text = render("p", &merged.headlines);
        assert!(
            text.contains("ratio min-max") && text.contains("0.4-1.2"),
            "{text}"
        );
    }

    /// M1 scaled down (20 iterations beside a 64 MiB background write) run under `seed`: the
    /// foreground's fsync mean and the background's throughput.
    fn small_m1(seed: Option<u64>) -> (f64, f64) {
        let source = crate::scenario::source("qasio/m1")
            .unwrap()
            .replacen("count = 500", "count = 20", 1)
            .replacen("size = \"8GiB\"", "size = \"64MiB\"", 1);
        let s = crate::scenario::parse("m1-small.toml", &source).unwrap();
        let options = ReproduceOptions {
            seed,
            ..Default::default()
        };
        let s = builtin_variant(&s, "none");
        let runs = run_all(&s, &options).unwrap();
        let run = runs.get("none");
        (op_ms(run, "m1", "fsync", false), mb_per_s(run, "bgwrite"))
    }

    /// `s` with only its variant `name`.
    fn builtin_variant(s: &scenario::Scenario, name: &str) -> scenario::Scenario {
        let mut s = s.clone();
        s.variants.retain(|v| v.name == name);
        s
    }

    #[test]
    fn seeds_change_the_workload_s_figures_and_the_default_is_the_scenario_s_own_run() {
        let own = small_m1(None);
        assert_eq!(own, small_m1(None), "deterministic");
        let (one, two) = (small_m1(Some(1)), small_m1(Some(2)));
        assert_ne!(one, two, "seeds 1 and 2 ran the same workload");
        assert_ne!(one, own);
        assert_eq!(one, small_m1(Some(1)), "a seed is deterministic");
    }

    #[test]
    fn seeds_parse_as_a_count_or_a_list_and_bad_ones_are_errors() {
        assert_eq!(parse_seeds("3").unwrap(), vec![1, 2, 3]);
        assert_eq!(parse_seeds("5, 9,11").unwrap(), vec![5, 9, 11]);
        assert!(parse_seeds("0").unwrap_err().contains("0 seeds"));
        assert!(parse_seeds("1,x").unwrap_err().contains("`x`"));
        assert!(parse_seeds("lots").is_err());
        assert!(parse_seeds("101").is_err());
    }

    #[test]
    fn a_seed_moves_every_app_s_start_and_the_default_moves_none() {
        let s = crate::scenario::load("qasio/m1").unwrap();
        let same = ReproduceOptions::default().scenario(&s);
        assert_eq!(
            same.apps.iter().map(|a| a.start).collect::<Vec<_>>(),
            s.apps.iter().map(|a| a.start).collect::<Vec<_>>()
        );
        let (one, two) = (with_seed(&s, 1), with_seed(&s, 2));
        assert_eq!(one.seeds, vec![1]);
        for ((a, b), original) in one.apps.iter().zip(&two.apps).zip(&s.apps) {
            assert!(a.start >= original.start && a.start < original.start + START_JITTER_NS);
            assert_ne!(a.start, b.start, "{}", a.name);
        }
        // Deterministic: the same seed, the same starts.
        assert_eq!(
            with_seed(&s, 1)
                .apps
                .iter()
                .map(|a| a.start)
                .collect::<Vec<_>>(),
            one.apps.iter().map(|a| a.start).collect::<Vec<_>>()
        );
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
        let text = render_table(&table, None);
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
