//! The HTML report: its structure (a chart per app and system call with a data-bearing series
//! per variant, blocked-time bars that add up to the run's blocked time, throughput lines, the
//! slowest operations as the run explains them, the scenario; nothing fetched at view time), and
//! what headless Chromium draws of it.
//!
//! Chromium: `scripts/install-chromium.sh` installs it (Debian's `chromium`); `.ci/run` runs it
//! before the tests and sets `MOBISTACK_REQUIRE_CHROMIUM=1`, so that in CI a missing browser
//! fails the test. Elsewhere, without Chromium, the rendering test says it is skipped and how to
//! install it.

use mobistack::report::html::{self, ResultsView};
use mobistack::run::{run_scenario, RunOptions};
use std::time::{Duration, Instant};

/// bg-write-fg-read, shortened (4 s, a 256 MiB background write), cfq and noop.
fn results() -> (ResultsView, mobistack::report::ScenarioResults, String) {
    let source = mobistack::scenario::builtin::find("bg-write-fg-read")
        .unwrap()
        .source
        .replace("duration = \"20s\"", "duration = \"4s\"")
        .replace("size = \"1GiB\"", "size = \"256MiB\"");
    let mut scenario = mobistack::scenario::parse("small.toml", &source).unwrap();
    scenario
        .variants
        .retain(|v| v.name == "cfq" || v.name == "noop");
    let results = run_scenario(
        &scenario,
        &RunOptions {
            threads: 1,
            ..RunOptions::default()
        },
    )
    .unwrap();
    let view = ResultsView::parse(&results.to_json()).unwrap();
    (view, results, source)
}

/// The attribute `name` of each element that `tag_start` (e.g. `<path class="series"`) opens.
fn attributes<'a>(html: &'a str, tag_start: &str, name: &str) -> Vec<&'a str> {
    html.match_indices(tag_start)
        .filter_map(|(at, _)| {
            let tag = &html[at..at + html[at..].find('>').unwrap()];
            let key = format!(" {name}=\"");
            let start = tag.find(&key)? + key.len();
            Some(&tag[start..start + tag[start..].find('"').unwrap()])
        })
        .collect()
}

#[test]
fn the_report_has_a_chart_per_call_and_a_series_per_variant() {
    let (view, results, source) = results();
    let page = html::render(&view, Some(&source));
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert_eq!(page, html::render(&view, Some(&source)), "deterministic");
    // Self-contained: nothing to fetch.
    for fetch in ["http://", "https://", "<script", "<link", "src=", "url("] {
        assert!(!page.contains(fetch), "the page has `{fetch}`");
    }

    // A CDF per (app, op), each with a step line per variant drawn through its histogram.
    let figures = page.matches("<svg class=\"chart cdf\"").count();
    assert_eq!(figures, view.app_ops().len());
    for (app, op) in view.app_ops() {
        let start = page
            .find(&format!("<figure data-app=\"{app}\" data-op=\"{op}\">"))
            .unwrap_or_else(|| panic!("a figure for {app} {op}"));
        let figure = &page[start..start + page[start..].find("</figure>").unwrap()];
        for variant in ["cfq", "noop"] {
            let buckets = view.histogram(variant, &app, &op).len();
            let tag = format!("<path class=\"series\" data-variant=\"{variant}\"");
            let points = attributes(figure, &tag, "data-points");
            assert_eq!(points, [buckets.to_string()], "{app} {op} {variant}");
            let d = attributes(figure, &tag, "d")[0];
            assert_eq!(d.matches('V').count(), buckets, "a step per bucket");
        }
    }

    // Blocked time: each variant's bar segments add up to the app's blocked time.
    for run in &results.runs {
        let gallery = &run.apps["gallery"];
        let total: u64 = gallery.blocked_ns.values().sum();
        assert!(total > 0);
        let tag = format!("<rect class=\"segment\" data-variant=\"{}\"", run.variant);
        let start = page
            .find("aria-label=\"blocked time of gallery by wait reason\"")
            .unwrap();
        let chart = &page[start..start + page[start..].find("</svg>").unwrap()];
        let drawn: u64 = attributes(chart, &tag, "data-ns")
            .iter()
            .map(|ns| ns.parse::<u64>().unwrap())
            .sum();
        assert_eq!(drawn, total, "{}", run.variant);
        let reasons = attributes(chart, &tag, "data-reason");
        assert_eq!(reasons.len(), gallery.blocked_ns.len());
    }

    // The series behind it: 100 ms periods over the 4 s; each app's periods add up to the
    // bytes it moved in the run.
    for run in &results.runs {
        assert_eq!(run.series.period_ns, 100_000_000);
        assert_eq!(run.series.device_bytes.len(), 40);
        assert!(run.series.device_bytes.iter().sum::<u64>() > 0);
        for (app, result) in &run.apps {
            let moved: u64 = run.series.app_bytes[app].iter().sum();
            assert_eq!(
                moved,
                result.counters.get("bytes").copied().unwrap_or(0),
                "{app}"
            );
        }
    }

    // Throughput over time: the device's and each app's, a line per variant.
    let throughput = page.matches("<svg class=\"chart throughput\"").count();
    assert_eq!(throughput, 1 + 3, "the device and the three apps");
    let start = page
        .find("aria-label=\"device throughput over time\"")
        .unwrap();
    let chart = &page[start..start + page[start..].find("</svg>").unwrap()];
    for variant in ["cfq", "noop"] {
        let tag = format!("<path class=\"series\" data-variant=\"{variant}\"");
        let points: usize = attributes(chart, &tag, "data-points")[0].parse().unwrap();
        assert!(points >= 20, "{points} points over 4 s");
    }

    // The slowest operations as the run explains them, and the scenario.
    for run in &results.runs {
        let slow = &run.apps["gallery"].ops["read"].slowest[0];
        let text = slow
            .explain()
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;");
        assert!(page.contains(&text), "{text}");
    }
    assert!(page.contains("name = &quot;bg-write-fg-read&quot;"));
}

#[test]
fn a_file_that_is_not_results_is_refused_with_a_reason() {
    let error = ResultsView::parse("{\"schema\": \"fio\", \"runs\": []}").unwrap_err();
    assert!(error.contains("schema `fio`"), "{error}");
    let error = ResultsView::parse("not json").unwrap_err();
    assert!(error.contains("not a mobistack results file"), "{error}");
}

/// Headless Chromium's executable, if installed.
fn chromium() -> Option<String> {
    if let Ok(path) = std::env::var("MOBISTACK_CHROMIUM") {
        return Some(path);
    }
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|name| {
            std::process::Command::new("sh")
                .args(["-c", &format!("command -v {name}")])
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .map(str::to_string)
}

/// Renders `html_path` in headless Chromium to a PNG of `width` x `height`; bounded in time.
fn screenshot(browser: &str, html_path: &std::path::Path, png_path: &std::path::Path) {
    let profile = std::env::temp_dir().join(format!("mobistack-chromium-{}", std::process::id()));
    let mut child = std::process::Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
            "--window-size=1300,2400",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", png_path.display()))
        .arg(format!("file://{}", html_path.display()))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("chromium starts");
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "chromium exited with {status}");
            break;
        }
        if started.elapsed() > Duration::from_secs(90) {
            child.kill().ok();
            panic!("chromium did not finish its screenshot in 90 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    std::fs::remove_dir_all(&profile).ok();
}

/// Pixels of exactly `rgb` in a decoded screenshot.
fn count_color(pixels: &[u8], channels: usize, rgb: [u8; 3]) -> usize {
    pixels.chunks(channels).filter(|p| p[..3] == rgb).count()
}

#[test]
fn headless_chromium_draws_the_charts() {
    let Some(browser) = chromium() else {
        let message = "headless Chromium is not installed: run scripts/install-chromium.sh (apt-get install chromium)";
        if std::env::var_os("MOBISTACK_REQUIRE_CHROMIUM").is_some() {
            panic!("{message}");
        }
        eprintln!("skipped: {message}");
        return;
    };
    let (view, _, source) = results();
    let dir = std::env::temp_dir();
    let html_path = dir.join(format!("mobistack-report-{}.html", std::process::id()));
    let png_path = dir.join(format!("mobistack-report-{}.png", std::process::id()));
    std::fs::write(&html_path, html::render(&view, Some(&source))).unwrap();
    screenshot(&browser, &html_path, &png_path);
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(&png_path).unwrap(),
    ));
    let mut reader = decoder.read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut pixels).unwrap();
    std::fs::remove_file(&html_path).ok();
    std::fs::remove_file(&png_path).ok();
    assert_eq!((info.width, info.height), (1300, 2400));
    let channels = info.color_type.samples();
    let pixels = &pixels[..info.buffer_size()];
    // The first screenful holds the runs and the first rows of CDFs: each variant's colour
    // (cfq #0072b2, noop #d55e00) covers far more than its two 12 x 12 legend squares, so the
    // lines were drawn.
    for (variant, rgb) in [("cfq", [0x00, 0x72, 0xb2]), ("noop", [0xd5, 0x5e, 0x00])] {
        let drawn = count_color(pixels, channels, rgb);
        assert!(drawn > 1500, "{variant}: {drawn} pixels of its colour");
    }
    // And the page is not blank: most pixels are the white background, not all.
    let white = count_color(pixels, channels, [0xff, 0xff, 0xff]);
    let total = (info.width * info.height) as usize;
    assert!(
        white < total * 98 / 100 && white > total / 2,
        "{white} of {total} white"
    );
}
