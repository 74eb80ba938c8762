//! The HTML report (`mobistack report RESULTS.json -o report.html`, `mobistack run --html FILE`):
//! one self-contained file — inline CSS and inline SVG, no script, nothing fetched at view time —
//! with, per variant side by side: latency CDFs per app and system call on a log axis, the
//! blocked-time breakdown as stacked bars by wait reason and by layer, throughput over time, the
//! slowest operations explained, and the scenario that produced the results.
//!
//! The charts are SVG written here rather than through a plotting crate: three kinds of chart
//! (step lines on a log axis, stacked bars, lines over time) take a few hundred lines, the output
//! is deterministic text the tests can read (every series carries `data-variant`, every bar
//! segment `data-reason`), and the binary gains no dependency (plotters' SVG backend would bring
//! its own crates for the same three charts).
//!
//! A variant run with several seeds is shown merged: histograms and blocked times added up over
//! the seeds, throughput averaged, the slowest operations of all seeds.

use super::results::SlowOp;
use crate::units::{format_ms, NS_PER_SEC};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt::Write;

/// What the report reads of a results file (`mobistack.results`, any version from 2).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ResultsView {
    pub schema: String,
    pub version: u32,
    pub scenario: String,
    pub description: String,
    pub duration_ns: u64,
    pub runs: Vec<RunView>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct RunView {
    pub variant: String,
    pub seed: u64,
    pub end: String,
    pub virtual_ns: u64,
    pub events: u64,
    pub apps: BTreeMap<String, AppView>,
    pub series: Option<SeriesView>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct AppView {
    pub active_ns: u64,
    pub ops: BTreeMap<String, OpView>,
    pub counters: BTreeMap<String, u64>,
    pub blocked_ns: BTreeMap<String, u64>,
    pub blocked_by_layer_ns: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct OpView {
    pub count: u64,
    pub unfinished: u64,
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    pub blocked_ns: BTreeMap<String, u64>,
    pub slowest: Vec<SlowOp>,
    pub histogram: Vec<[u64; 2]>,
}

/// The time series of a run (results version 3): bytes per period.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct SeriesView {
    pub period_ns: u64,
    pub device_bytes: Vec<u64>,
    pub app_bytes: BTreeMap<String, Vec<u64>>,
}

impl ResultsView {
    /// Reads a results file's JSON; the error says what is wrong with it.
    pub fn parse(json: &str) -> Result<ResultsView, String> {
        let view: ResultsView =
            serde_json::from_str(json).map_err(|e| format!("not a mobistack results file: {e}"))?;
        if view.schema != super::results::RESULTS_SCHEMA {
            return Err(format!(
                "not a mobistack results file: schema `{}`, expected `{}` (write one with `mobistack run --out FILE`)",
                view.schema,
                super::results::RESULTS_SCHEMA
            ));
        }
        if view.runs.is_empty() {
            return Err("the results file has no runs".to_string());
        }
        Ok(view)
    }

    /// The variants in the order of their first run.
    pub fn variants(&self) -> Vec<&str> {
        let mut variants: Vec<&str> = Vec::new();
        for run in &self.runs {
            if !variants.contains(&run.variant.as_str()) {
                variants.push(&run.variant);
            }
        }
        variants
    }

    pub fn runs_of<'a>(&'a self, variant: &'a str) -> impl Iterator<Item = &'a RunView> + 'a {
        self.runs.iter().filter(move |r| r.variant == variant)
    }

    /// (app, op) pairs of any run, sorted.
    pub fn app_ops(&self) -> Vec<(String, String)> {
        let mut pairs: Vec<(String, String)> = self
            .runs
            .iter()
            .flat_map(|r| {
                r.apps
                    .iter()
                    .flat_map(|(app, a)| a.ops.keys().map(move |op| (app.clone(), op.clone())))
            })
            .collect();
        pairs.sort();
        pairs.dedup();
        pairs
    }

    /// The merged histogram of `app`'s `op` over a variant's seeds: (value, count), ascending.
    pub fn histogram(&self, variant: &str, app: &str, op: &str) -> Vec<(u64, u64)> {
        let mut merged: BTreeMap<u64, u64> = BTreeMap::new();
        for run in self.runs_of(variant) {
            if let Some(op) = run.apps.get(app).and_then(|a| a.ops.get(op)) {
                for [value, count] in &op.histogram {
                    *merged.entry(*value).or_insert(0) += count;
                }
            }
        }
        merged.into_iter().collect()
    }
}

/// Quantile `q` of a merged histogram.
pub fn quantile(histogram: &[(u64, u64)], q: f64) -> Option<u64> {
    let total: u64 = histogram.iter().map(|(_, c)| c).sum();
    if total == 0 {
        return None;
    }
    let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
    let mut seen = 0;
    for (value, count) in histogram {
        seen += count;
        if seen >= rank {
            return Some(*value);
        }
    }
    histogram.last().map(|(v, _)| *v)
}

/// Series colours (Okabe-Ito, distinguishable with colour-blindness).
const VARIANT_COLORS: [&str; 8] = [
    "#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000", "#f0e442",
];
/// Colours of the stacked segments (wait reasons, layers).
const SEGMENT_COLORS: [&str; 12] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac", "#1b9e77", "#7570b3",
];

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const WIDTH: f64 = 560.0;
const HEIGHT: f64 = 300.0;
const LEFT: f64 = 56.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 14.0;
const BOTTOM: f64 = 40.0;

fn plot_width() -> f64 {
    WIDTH - LEFT - RIGHT
}

fn plot_height() -> f64 {
    HEIGHT - TOP - BOTTOM
}

/// A duration label for a log-axis tick of `ns`.
fn duration_label(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{} µs", ns / 1e3)
    } else {
        format!("{ns} ns")
    }
}

/// A nice step for a linear axis up to `max`.
fn nice_step(max: f64) -> f64 {
    if max <= 0.0 {
        return 1.0;
    }
    let raw = max / 5.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    let fraction = raw / magnitude;
    let nice = if fraction <= 1.0 {
        1.0
    } else if fraction <= 2.0 {
        2.0
    } else if fraction <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * magnitude
}

fn fmt_num(value: f64) -> String {
    if value == value.trunc() && value.abs() < 1e15 {
        format!("{}", value as i64)
    } else {
        let text = format!("{value:.3}");
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

fn svg_open(out: &mut String, class: &str, label: &str) {
    let _ = write!(
        out,
        r#"<svg class="{class}" role="img" aria-label="{}" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}">"#,
        escape(label)
    );
    let _ = write!(
        out,
        r##"<rect x="{LEFT}" y="{TOP}" width="{}" height="{}" fill="#fff" stroke="#999"/>"##,
        plot_width(),
        plot_height()
    );
}

/// A latency CDF of one (app, op), one step line per variant, on a log time axis.
fn cdf_chart(view: &ResultsView, app: &str, op: &str) -> String {
    let variants = view.variants();
    let histograms: Vec<Vec<(u64, u64)>> = variants
        .iter()
        .map(|v| view.histogram(v, app, op))
        .collect();
    let values = histograms
        .iter()
        .flatten()
        .map(|(v, _)| *v)
        .filter(|v| *v > 0);
    let (min, max) = values.fold((u64::MAX, 0), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let mut out = String::new();
    svg_open(&mut out, "chart cdf", &format!("latency CDF of {app} {op}"));
    if max == 0 {
        out.push_str("</svg>");
        return out;
    }
    let low = 10f64.powf((min as f64).log10().floor());
    let high = 10f64.powf((max as f64).log10().ceil()).max(low * 10.0);
    let x = |ns: f64| {
        LEFT + ((ns.max(low)).log10() - low.log10()) / (high.log10() - low.log10()) * plot_width()
    };
    let y = |fraction: f64| TOP + (1.0 - fraction) * plot_height();
    // Axes: decades and quarters.
    let mut decade = low;
    while decade <= high * 1.0001 {
        let px = x(decade);
        let _ = write!(
            out,
            r##"<line x1="{px:.1}" y1="{TOP}" x2="{px:.1}" y2="{:.1}" stroke="#ddd"/><text x="{px:.1}" y="{:.1}" text-anchor="middle" class="tick">{}</text>"##,
            TOP + plot_height(),
            TOP + plot_height() + 14.0,
            duration_label(decade)
        );
        decade *= 10.0;
    }
    for quarter in [0.0, 0.25, 0.5, 0.75, 1.0] {
        let py = y(quarter);
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end" class="tick">{}</text>"##,
            LEFT + plot_width(),
            LEFT - 4.0,
            py + 4.0,
            fmt_num(quarter)
        );
    }
    let _ = write!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" class="axis">latency (log scale)</text>"#,
        LEFT + plot_width() / 2.0,
        HEIGHT - 6.0
    );
    for (index, (variant, histogram)) in variants.iter().zip(&histograms).enumerate() {
        let total: u64 = histogram.iter().map(|(_, c)| c).sum();
        if total == 0 {
            continue;
        }
        let mut d = String::new();
        let mut seen = 0u64;
        let mut last_y = y(0.0);
        for (i, (value, count)) in histogram.iter().enumerate() {
            let px = x(*value as f64);
            if i == 0 {
                let _ = write!(d, "M{px:.1},{last_y:.1}");
            } else {
                let _ = write!(d, "H{px:.1}");
            }
            seen += count;
            last_y = y(seen as f64 / total as f64);
            let _ = write!(d, "V{last_y:.1}");
        }
        let _ = write!(d, "H{:.1}", LEFT + plot_width());
        let _ = write!(
            out,
            r#"<path class="series" data-variant="{}" data-points="{}" d="{d}" fill="none" stroke="{}" stroke-width="2.5"/>"#,
            escape(variant),
            histogram.len(),
            VARIANT_COLORS[index % VARIANT_COLORS.len()]
        );
    }
    out.push_str("</svg>");
    out
}

/// Stacked horizontal bars, one per variant, of `parts` (variant -> segment -> ns).
fn stacked_bars(
    label: &str,
    class: &str,
    variants: &[&str],
    parts: &[BTreeMap<String, u64>],
    segment_names: &[String],
) -> String {
    let total_max = parts
        .iter()
        .map(|p| p.values().sum::<u64>())
        .max()
        .unwrap_or(0) as f64;
    let row = 30.0;
    let height = TOP + row * variants.len() as f64 + 44.0;
    let left = 110.0;
    let width = WIDTH - left - RIGHT;
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg class="chart {class}" role="img" aria-label="{}" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}">"#,
        escape(label)
    );
    let step_ms = nice_step(total_max / 1e6);
    let axis_max_ms = if total_max > 0.0 {
        (total_max / 1e6 / step_ms).ceil() * step_ms
    } else {
        1.0
    };
    let x = |ns: f64| left + ns / 1e6 / axis_max_ms * width;
    let bottom = TOP + row * variants.len() as f64;
    let mut tick = 0.0;
    while tick <= axis_max_ms * 1.0001 {
        let px = left + tick / axis_max_ms * width;
        let _ = write!(
            out,
            r##"<line x1="{px:.1}" y1="{TOP}" x2="{px:.1}" y2="{bottom:.1}" stroke="#ddd"/><text x="{px:.1}" y="{:.1}" text-anchor="middle" class="tick">{}</text>"##,
            bottom + 14.0,
            fmt_num(tick)
        );
        tick += step_ms;
    }
    let _ = write!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" class="axis">blocked time, ms (all operations of the app)</text>"#,
        left + width / 2.0,
        bottom + 32.0
    );
    for (index, (variant, part)) in variants.iter().zip(parts).enumerate() {
        let py = TOP + row * index as f64 + 5.0;
        let _ = write!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end" class="tick">{}</text>"#,
            left - 6.0,
            py + 14.0,
            escape(variant)
        );
        let mut start = 0.0;
        for (segment, name) in segment_names.iter().enumerate() {
            let Some(&ns) = part.get(name) else { continue };
            if ns == 0 {
                continue;
            }
            let x0 = x(start);
            let x1 = x(start + ns as f64);
            let _ = write!(
                out,
                r#"<rect class="segment" data-variant="{}" data-reason="{}" data-ns="{ns}" x="{x0:.1}" y="{py:.1}" width="{:.2}" height="20" fill="{}"><title>{}: {} {} ms</title></rect>"#,
                escape(variant),
                escape(name),
                (x1 - x0).max(0.5),
                SEGMENT_COLORS[segment % SEGMENT_COLORS.len()],
                escape(variant),
                escape(name),
                format_ms(ns as f64)
            );
            start += ns as f64;
        }
    }
    out.push_str("</svg>");
    // The legend, as HTML beside the chart.
    out.push_str(r#"<div class="legend">"#);
    for (segment, name) in segment_names.iter().enumerate() {
        let _ = write!(
            out,
            r#"<span><i style="background:{}"></i>{}</span>"#,
            SEGMENT_COLORS[segment % SEGMENT_COLORS.len()],
            escape(name)
        );
    }
    out.push_str("</div>");
    out
}

/// Points of a throughput chart, at most.
const THROUGHPUT_BINS: usize = 50;

/// Throughput of one app (or of the device, `app` None) over time, a line per variant.
fn throughput_chart(view: &ResultsView, app: Option<&str>) -> Option<String> {
    let variants = view.variants();
    // Per variant: (period, MB/s per period averaged over the seeds).
    let mut lines: Vec<(usize, u64, Vec<f64>)> = Vec::new();
    for (index, variant) in variants.iter().enumerate() {
        let mut sum: Vec<f64> = Vec::new();
        let mut seeds = 0.0;
        let mut period = 0;
        for run in view.runs_of(variant) {
            let Some(series) = &run.series else { continue };
            let bytes = match app {
                None => Some(&series.device_bytes),
                Some(app) => series.app_bytes.get(app),
            };
            let Some(bytes) = bytes else { continue };
            if series.period_ns == 0 {
                continue;
            }
            period = series.period_ns;
            seeds += 1.0;
            let seconds = series.period_ns as f64 / NS_PER_SEC as f64;
            for (i, b) in bytes.iter().enumerate() {
                if sum.len() <= i {
                    sum.push(0.0);
                }
                sum[i] += *b as f64 / 1e6 / seconds;
            }
        }
        if seeds > 0.0 && !sum.is_empty() {
            // At most THROUGHPUT_BINS points: consecutive periods averaged, so that a chart of
            // a long run reads as a trend rather than a comb.
            let per_bin = sum.len().div_ceil(THROUGHPUT_BINS).max(1);
            let binned = sum
                .chunks(per_bin)
                .map(|chunk| chunk.iter().sum::<f64>() / seeds / chunk.len() as f64)
                .collect();
            lines.push((index, period * per_bin as u64, binned));
        }
    }
    if lines.is_empty() {
        return None;
    }
    let max_y = lines
        .iter()
        .flat_map(|(_, _, v)| v.iter().copied())
        .fold(0.0, f64::max);
    let max_t = lines
        .iter()
        .map(|(_, period, v)| *period as f64 * v.len() as f64 / 1e9)
        .fold(0.0, f64::max);
    let label = match app {
        None => "device throughput over time".to_string(),
        Some(app) => format!("throughput of {app} over time"),
    };
    let mut out = String::new();
    svg_open(&mut out, "chart throughput", &label);
    let y_step = nice_step(max_y);
    let y_max = if max_y > 0.0 {
        (max_y / y_step).ceil() * y_step
    } else {
        1.0
    };
    let t_step = nice_step(max_t);
    let t_max = if max_t > 0.0 {
        (max_t / t_step).ceil() * t_step
    } else {
        1.0
    };
    let x = |t: f64| LEFT + t / t_max * plot_width();
    let y = |v: f64| TOP + (1.0 - v / y_max) * plot_height();
    let mut tick = 0.0;
    while tick <= y_max * 1.0001 {
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end" class="tick">{}</text>"##,
            LEFT + plot_width(),
            LEFT - 4.0,
            y(tick) + 4.0,
            fmt_num(tick),
            py = y(tick)
        );
        tick += y_step;
    }
    let mut tick = 0.0;
    while tick <= t_max * 1.0001 {
        let _ = write!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" class="tick">{}</text>"#,
            x(tick),
            TOP + plot_height() + 14.0,
            fmt_num(tick)
        );
        tick += t_step;
    }
    let _ = write!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" class="axis">time, s (MB/s per {} ms)</text>"#,
        LEFT + plot_width() / 2.0,
        HEIGHT - 6.0,
        format_ms(lines[0].1 as f64)
    );
    for (index, period, values) in &lines {
        let mut d = String::new();
        for (i, v) in values.iter().enumerate() {
            let t0 = *period as f64 * i as f64 / 1e9;
            let t1 = *period as f64 * (i + 1) as f64 / 1e9;
            let _ = write!(
                d,
                "{}{:.1},{:.1}H{:.1}",
                if i == 0 { "M" } else { "L" },
                x(t0),
                y(*v),
                x(t1)
            );
        }
        let _ = write!(
            out,
            r#"<path class="series" data-variant="{}" data-points="{}" d="{d}" fill="none" stroke="{}" stroke-width="2"/>"#,
            escape(variants[*index]),
            values.len(),
            VARIANT_COLORS[index % VARIANT_COLORS.len()]
        );
    }
    out.push_str("</svg>");
    Some(out)
}

fn variant_legend(variants: &[&str]) -> String {
    let mut out = String::from(r#"<div class="legend">"#);
    for (index, variant) in variants.iter().enumerate() {
        let _ = write!(
            out,
            r#"<span><i style="background:{}"></i>{}</span>"#,
            VARIANT_COLORS[index % VARIANT_COLORS.len()],
            escape(variant)
        );
    }
    out.push_str("</div>");
    out
}

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1500px}\
h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ccc;margin-top:32px}h3{font-size:15px;margin:16px 0 4px}\
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}\
th{background:#f3f3f3}td.l,th.l{text-align:left}.grid{display:flex;flex-wrap:wrap;gap:16px}\
figure{margin:0 0 12px 0}figcaption{font-weight:600;margin-bottom:2px}\
svg .tick{font-size:11px;fill:#444}svg .axis{font-size:12px;fill:#222}\
.legend span{display:inline-block;margin-right:12px;font-size:12px}.legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:-1px}\
.explain{font-family:ui-monospace,monospace;font-size:12px;white-space:pre-wrap;margin:2px 0 8px}\
pre{background:#f7f7f7;padding:8px;overflow:auto;font-size:12px}";

/// The report of `view`, with the scenario's TOML when known.
pub fn render(view: &ResultsView, scenario_source: Option<&str>) -> String {
    let variants = view.variants();
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>mobistack: {}</title><style>{STYLE}</style></head><body>\n",
        escape(&view.scenario)
    );
    let _ = write!(
        out,
        "<h1>mobistack report: {}</h1><p>{}</p>",
        escape(&view.scenario),
        escape(&view.description)
    );
    // The runs.
    out.push_str(r#"<section id="runs"><h2>Runs</h2><table><tr><th class="l">variant</th><th>seed</th><th>simulated s</th><th class="l">ended</th><th>events</th></tr>"#);
    for run in &view.runs {
        let _ = write!(
            out,
            r#"<tr><td class="l">{}</td><td>{}</td><td>{:.3}</td><td class="l">{}</td><td>{}</td></tr>"#,
            escape(&run.variant),
            run.seed,
            run.virtual_ns as f64 / 1e9,
            escape(&run.end),
            run.events
        );
    }
    out.push_str("</table>");
    out.push_str(&variant_legend(&variants));
    out.push_str("</section>\n");

    // Latency.
    out.push_str(r#"<section id="latency"><h2>Latency CDFs per app and system call</h2><p>Fraction of operations that took at most the time on the x axis (log scale); operations unfinished at the end of a run count at their time so far.</p><div class="grid">"#);
    for (app, op) in view.app_ops() {
        let _ = write!(
            out,
            r#"<figure data-app="{}" data-op="{}"><figcaption>{} {}</figcaption>{}"#,
            escape(&app),
            escape(&op),
            escape(&app),
            escape(&op),
            cdf_chart(view, &app, &op)
        );
        out.push_str(r#"<table><tr><th class="l">variant</th><th>count</th><th>p50 ms</th><th>p99 ms</th><th>max ms</th></tr>"#);
        for variant in &variants {
            let histogram = view.histogram(variant, &app, &op);
            let count: u64 = histogram.iter().map(|(_, c)| c).sum();
            let max = view
                .runs_of(variant)
                .filter_map(|r| r.apps.get(&app).and_then(|a| a.ops.get(&op)))
                .map(|o| o.max_ns)
                .max()
                .unwrap_or(0);
            let stat = |q: f64| {
                quantile(&histogram, q).map_or("-".to_string(), |v| format_ms(v.min(max) as f64))
            };
            let _ = write!(
                out,
                r#"<tr><td class="l">{}</td><td>{count}</td><td>{}</td><td>{}</td><td>{}</td></tr>"#,
                escape(variant),
                stat(0.5),
                stat(0.99),
                if count == 0 {
                    "-".to_string()
                } else {
                    format_ms(max as f64)
                }
            );
        }
        out.push_str("</table></figure>");
    }
    out.push_str("</div>");
    out.push_str(&variant_legend(&variants));
    out.push_str("</section>\n");

    // Blocked time.
    out.push_str(r#"<section id="blocked"><h2>Blocked time by wait reason and by layer</h2><p>Time each app's tasks spent blocked (voluntary sleeps excluded), summed over the seeds of a variant.</p>"#);
    let apps: Vec<String> = {
        let mut apps: Vec<String> = view
            .runs
            .iter()
            .flat_map(|r| r.apps.keys().cloned())
            .collect();
        apps.sort();
        apps.dedup();
        apps
    };
    out.push_str(r#"<div class="grid">"#);
    for app in &apps {
        for (key, title, class) in [
            ("reason", "by wait reason", "blocked-reason"),
            ("layer", "by layer", "blocked-layer"),
        ] {
            let parts: Vec<BTreeMap<String, u64>> = variants
                .iter()
                .map(|variant| {
                    let mut sum = BTreeMap::new();
                    for run in view.runs_of(variant) {
                        if let Some(a) = run.apps.get(app) {
                            let map = if key == "reason" {
                                &a.blocked_ns
                            } else {
                                &a.blocked_by_layer_ns
                            };
                            for (name, ns) in map {
                                *sum.entry(name.clone()).or_insert(0) += ns;
                            }
                        }
                    }
                    sum
                })
                .collect();
            // Segments ordered by total time, largest first.
            let mut totals: BTreeMap<String, u64> = BTreeMap::new();
            for part in &parts {
                for (name, ns) in part {
                    *totals.entry(name.clone()).or_insert(0) += ns;
                }
            }
            if totals.is_empty() {
                continue;
            }
            let mut names: Vec<(String, u64)> = totals.into_iter().collect();
            names.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            let names: Vec<String> = names.into_iter().map(|(n, _)| n).collect();
            let _ = write!(
                out,
                r#"<figure data-app="{}"><figcaption>{} {title}</figcaption>{}</figure>"#,
                escape(app),
                escape(app),
                stacked_bars(
                    &format!("blocked time of {app} {title}"),
                    class,
                    &variants,
                    &parts,
                    &names
                )
            );
        }
    }
    out.push_str("</div></section>\n");

    // Throughput.
    out.push_str(r#"<section id="throughput"><h2>Throughput over time</h2><div class="grid">"#);
    let mut any = false;
    if let Some(chart) = throughput_chart(view, None) {
        any = true;
        let _ = write!(
            out,
            r#"<figure data-app=""><figcaption>device (bytes completed by the block layer)</figcaption>{chart}</figure>"#
        );
    }
    for app in &apps {
        if let Some(chart) = throughput_chart(view, Some(app)) {
            any = true;
            let _ = write!(
                out,
                r#"<figure data-app="{}"><figcaption>{} (bytes its system calls moved)</figcaption>{chart}</figure>"#,
                escape(app),
                escape(app)
            );
        }
    }
    out.push_str("</div>");
    if any {
        out.push_str(&variant_legend(&variants));
    } else {
        out.push_str(
            "<p>No time series in these results (results files before version 3 have none).</p>",
        );
    }
    out.push_str("</section>\n");

    // Slowest operations.
    out.push_str(
        r#"<section id="slowest"><h2>Slowest operations, explained</h2><div class="grid">"#,
    );
    for variant in &variants {
        let _ = write!(
            out,
            r#"<div class="variant" data-variant="{}" style="flex:1 1 420px"><h3>{}</h3>"#,
            escape(variant),
            escape(variant)
        );
        for (app, op) in view.app_ops() {
            let slowest = view
                .runs_of(variant)
                .filter_map(|r| {
                    r.apps
                        .get(&app)
                        .and_then(|a| a.ops.get(&op))
                        .and_then(|o| o.slowest.first())
                        .map(|s| (r.seed, s))
                })
                .max_by_key(|(_, s)| s.latency_ns);
            if let Some((seed, slow)) = slowest {
                let _ = write!(
                    out,
                    r#"<div><b>{} {}</b> (seed {seed})<div class="explain">{}</div></div>"#,
                    escape(&app),
                    escape(&op),
                    escape(&slow.explain())
                );
            }
        }
        out.push_str("</div>");
    }
    out.push_str("</div></section>\n");

    // The scenario.
    out.push_str(r#"<section id="scenario"><h2>Scenario</h2>"#);
    match scenario_source {
        Some(source) => {
            let _ = write!(out, "<pre>{}</pre>", escape(source));
        }
        None => {
            let _ = write!(
                out,
                "<p>Scenario `{}`: its file was not given (<code>mobistack report --scenario FILE</code>).</p>",
                escape(&view.scenario)
            );
        }
    }
    let _ = write!(
        out,
        "<p>Duration {} s, results schema {} version {}.</p></section>\n</body></html>\n",
        fmt_num(view.duration_ns as f64 / 1e9),
        escape(&view.schema),
        view.version
    );
    out
}
