//! Running scenarios end to end: determinism, the toy stack's behaviour, deadlock reports.

use mobistack::run::{run_scenario, RunOptions};
use mobistack::scenario;

fn results_json(name: &str, seed: u64, threads: usize) -> String {
    let s = scenario::load(name).unwrap();
    let options = RunOptions {
        seeds: Some(vec![seed]),
        threads,
        ..RunOptions::default()
    };
    run_scenario(&s, &options).unwrap().to_json()
}

#[test]
fn every_builtin_scenario_gives_byte_identical_json_per_seed() {
    for builtin in scenario::builtin::BUILTINS {
        if builtin.name == "deadlock" || !builtin.quick {
            // deadlock ends in its deadlock report, pinned below; the long reproductions are
            // checked on scaled copies (tests/qasio.rs)
            continue;
        }
        if builtin.name == "production/fg-vs-bg" {
            continue; // 16 variants: too slow for a debug build; tests/production.rs runs two
        }
        let first = results_json(builtin.name, 7, 1);
        let again = results_json(builtin.name, 7, 2);
        assert!(
            first == again,
            "{}: same seed, same bytes, whatever the thread count",
            builtin.name
        );
        let other = results_json(builtin.name, 8, 1);
        assert_ne!(
            first, other,
            "{}: the seed reaches the workloads",
            builtin.name
        );
    }
}

#[test]
fn fg_first_cuts_the_foreground_apps_latency_behind_a_background_stream() {
    let s = scenario::load("demo").unwrap();
    let results = run_scenario(&s, &RunOptions::default()).unwrap();
    let run = |variant: &str| {
        results
            .runs
            .iter()
            .find(|r| r.variant == variant)
            .unwrap()
            .clone()
    };
    let (fifo, fg_first) = (run("fifo"), run("fg-first"));
    // The gallery is in the foreground for its whole life (from 5 s on).
    let gallery_fifo = &fifo.apps["gallery"].ops["io"];
    let gallery_fg = &fg_first.apps["gallery"].ops["io"];
    assert!(
        gallery_fg.p50_ns * 3 < gallery_fifo.p50_ns,
        "fg-first p50 {} vs fifo p50 {}",
        gallery_fg.p50_ns,
        gallery_fifo.p50_ns
    );
    // With one server at 1 ms per request, a foreground request under fg-first waits at most for
    // the request in service and its own: never more than two service times.
    assert!(gallery_fg.max_ns <= 2_000_000, "max {}", gallery_fg.max_ns);
    // Under fifo it waits behind the background's eight queued requests.
    assert!(
        gallery_fifo.p50_ns > 5_000_000,
        "p50 {}",
        gallery_fifo.p50_ns
    );
    // The background pays for it, a little.
    let backup_fifo = fifo.apps["backup"].counters["bytes"];
    let backup_fg = fg_first.apps["backup"].counters["bytes"];
    assert!(backup_fg < backup_fifo);
    // All of the apps' non-voluntary blocked time is in the device wait of the toy stack.
    let blocked = &fifo.apps["camera"].blocked_ns;
    assert_eq!(blocked.keys().collect::<Vec<_>>(), ["device"]);
    assert_eq!(fifo.counters["activity.switches"], 1);
    assert_eq!(fifo.end, "duration");
    assert_eq!(fifo.virtual_ns, s.duration);
}

#[test]
fn a_scenario_whose_tasks_wait_on_each_other_reports_the_cycle() {
    let s = scenario::load("deadlock").unwrap();
    let err = run_scenario(&s, &RunOptions::default()).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("deadlock at 5.00 ms"), "{text}");
    assert!(text.contains("writer"), "{text}");
    assert!(text.contains("held by fsync"), "{text}");
    assert!(
        text.contains("(journal)") && text.contains("(inode)"),
        "{text}"
    );
}

#[test]
fn an_apps_done_scenario_ends_when_its_workloads_finish() {
    let source = r#"
name = "finite"
end = "apps-done"
[[app]]
name = "a"
[app.workload.toy-io]
interval = "1ms"
count = 10
"#;
    let s = scenario::parse("finite.toml", source).unwrap();
    let results = run_scenario(&s, &RunOptions::default()).unwrap();
    let run = &results.runs[0];
    assert_eq!(run.end, "apps-done");
    assert_eq!(run.apps["a"].ops["io"].count, 10);
    // Ten rounds of 1 ms think time and 1 ms of service.
    assert_eq!(run.virtual_ns, 20_000_000);
}

#[test]
fn percentiles_never_exceed_the_maximum() {
    let mut runs = Vec::new();
    for name in ["demo", "fg-read-bg-write"] {
        let s = scenario::load(name).unwrap();
        runs.extend(run_scenario(&s, &RunOptions::default()).unwrap().runs);
    }
    for run in &runs {
        for app in run.apps.values() {
            for op in app.ops.values() {
                assert!(op.min_ns <= op.p50_ns && op.p50_ns <= op.p90_ns);
                assert!(op.p90_ns <= op.p99_ns && op.p99_ns <= op.p99_9_ns, "{op:?}");
                assert!(
                    op.p99_9_ns <= op.p99_99_ns && op.p99_99_ns <= op.max_ns,
                    "{op:?}"
                );
                let total: u64 = op.histogram.iter().map(|[_, count]| count).sum();
                assert_eq!(
                    total,
                    op.count + op.unfinished,
                    "the histogram holds every operation, unfinished ones too"
                );
            }
        }
    }
}

/// One fsync of 64 MiB on a microSD card (about 14 MB/s of writes) in a 2 s run: the fsync is
/// still waiting on writeback when the run ends.
const STUCK_FSYNC: &str = r#"name = "stuck"
duration = "2s"

[stack.device]
profile = "microsd"
capacity = "2GiB"

[[app]]
name = "db"
role = "foreground"
[app.workload.fsync-write]
path = "/data/db"
io_size = "64MiB"
count = 1
"#;

#[test]
fn an_operation_still_blocked_at_the_end_is_a_result_that_bounds_the_percentiles() {
    // It used to be dropped: the fsync had count 0 and max 0 although it had waited 2 s.
    let s = scenario::parse("stuck.toml", STUCK_FSYNC).unwrap();
    let results = run_scenario(&s, &RunOptions::default()).unwrap();
    let run = &results.runs[0];
    let fsync = &run.apps["db"].ops["fsync"];
    assert_eq!((fsync.count, fsync.unfinished), (0, 1));
    assert!(fsync.is_lower_bound());
    let so_far = fsync.unfinished_ops[0].elapsed_ns;
    // The writes before it cost CPU time (`[stack.cpu]`): about 0.15 s for 64 MiB.
    assert!(so_far > 1_500_000_000, "{so_far}");
    for value in [fsync.min_ns, fsync.p50_ns, fsync.p99_99_ns, fsync.max_ns] {
        assert!(
            value >= so_far * 999 / 1000,
            "{value} < {so_far}: {fsync:?}"
        );
    }
    assert!(fsync.mean_ns >= so_far as f64);
    // What it waits on, with the chain.
    let unfinished = &fsync.unfinished_ops[0];
    let waiting = unfinished.waiting.as_ref().expect("blocked at the end");
    assert_eq!(waiting.reason, "wait_on_page_writeback");
    assert!(waiting.still_waiting);
    assert!(
        waiting.on.contains("not completed"),
        "the request it waits on is described as in flight: {}",
        waiting.on
    );
    assert!(unfinished.chain.as_ref().unwrap().contains("db (T"));
    // Among the slowest operations, marked unfinished.
    assert!(fsync.slowest[0].unfinished);
    let explained = fsync.slowest[0].explain();
    assert!(
        explained.starts_with(&format!(">= {} ms", so_far / 1_000_000)),
        "{explained}"
    );
    // In the JSON and the table.
    let json: serde_json::Value = serde_json::from_str(&results.to_json()).unwrap();
    assert_eq!(json["version"], 4);
    assert_eq!(
        json["runs"][0]["apps"]["db"]["ops"]["fsync"]["unfinished"],
        1
    );
    let table = mobistack::report::table::render(&results);
    assert!(
        table.contains("1 operation(s) still in progress"),
        "{table}"
    );
    assert!(
        table.contains(&format!("≥{}", so_far / 1_000_000)),
        "{table}"
    );
    assert!(
        table.contains("operations still in progress when the run ended"),
        "{table}"
    );
    assert!(table.contains("still in wait_on_page_writeback"), "{table}");
}

#[test]
fn the_header_says_how_long_each_run_simulated_and_why_it_ended() {
    let source = STUCK_FSYNC
        .replace("duration = \"2s\"", "end = \"apps-done\"")
        .replace("io_size = \"64MiB\"", "io_size = \"4KiB\"");
    let s = scenario::parse("done.toml", &source).unwrap();
    let results = run_scenario(&s, &RunOptions::default()).unwrap();
    let table = mobistack::report::table::render(&results);
    let seconds = results.runs[0].virtual_ns as f64 / 1e9;
    assert!(seconds < 1.0, "{seconds}");
    assert!(
        table.contains("base seed 1: simulated ")
            && table.contains("ended when every app's workload had finished"),
        "{table}"
    );
    let s = scenario::parse("stuck.toml", STUCK_FSYNC).unwrap();
    let table =
        mobistack::report::table::render(&run_scenario(&s, &RunOptions::default()).unwrap());
    assert!(
        table.contains("simulated 2.00 s, ended at its duration (2.00 s)"),
        "{table}"
    );
}

#[test]
fn throughput_is_over_the_time_the_app_was_active() {
    // A 64 KiB O_SYNC write app that starts at 4 s of a 6 s run: its throughput is its bytes
    // over its own active time, not over 6 s.
    let source = r#"name = "late"
duration = "6s"
[stack.device]
profile = "emmc-5.1"
capacity = "2GiB"
[[app]]
name = "writer"
start = "4s"
[app.workload.seq-write]
path = "/sdcard/f"
size = "8MiB"
io_size = "64KiB"
mode = "sync"
"#;
    let s = scenario::parse("late.toml", source).unwrap();
    let results = run_scenario(&s, &RunOptions::default()).unwrap();
    let app = &results.runs[0].apps["writer"];
    let bytes = app.counters["bytes"];
    assert_eq!(bytes, 8 << 20);
    assert!(
        app.active_ns > 0 && app.active_ns < 2_000_000_000,
        "{}",
        app.active_ns
    );
    let expected = format!("{:.2}", bytes as f64 / 1e6 / (app.active_ns as f64 / 1e9));
    let over_run = format!("{:.2}", bytes as f64 / 1e6 / 6.0);
    let table = mobistack::report::table::render(&results);
    // The app's throughput is on its first row only, not repeated on each operation's.
    let writer_rows: Vec<&str> = table.lines().filter(|l| l.contains(" writer ")).collect();
    assert!(writer_rows.len() > 1, "{table}");
    let write_row = writer_rows[0];
    assert!(write_row.contains(&expected), "{expected} in {write_row}");
    assert!(!write_row.contains(&over_run), "{write_row}");
    for row in &writer_rows[1..] {
        assert!(!row.contains(&expected), "throughput repeated in {row}");
    }
    // Buffered writes that took no virtual time at all (a CPU that costs nothing, no journal)
    // say so
    // instead of a huge number.
    let zero = source
        .replace("duration = \"6s\"", "duration = \"1ns\"")
        .replace("start = \"4s\"\n", "")
        .replace("mode = \"sync\"", "mode = \"buffered\"")
        + "\n[stack.cpu]\nsyscall = \"0s\"\ncopy_bandwidth = \"1000TiB/s\"\npage_alloc = \"0s\"\n"
        + "\n[stack.fs]\ntype = \"simplefs\"\n";
    let s = scenario::parse("zero.toml", &zero).unwrap();
    let results = run_scenario(&s, &RunOptions::default()).unwrap();
    let table = mobistack::report::table::render(&results);
    let row = table.lines().find(|l| l.contains(" writer ")).unwrap();
    assert!(row.contains("no time"), "{table}");
}

/// The built-in `fg-read-bg-write` (six variants, 3 s each) with seed 1: results to edit.
fn fg_read_bg_write_seed_1() -> mobistack::report::results::ScenarioResults {
    let options = RunOptions {
        seeds: Some(vec![1]),
        ..RunOptions::default()
    };
    run_scenario(&scenario::load("fg-read-bg-write").unwrap(), &options).unwrap()
}

#[test]
fn an_app_that_stopped_early_and_a_warning_are_printed_under_the_table() {
    let mut results = fg_read_bg_write_seed_1();
    let clean = mobistack::report::table::render(&results);
    assert!(!clean.contains("stopped early"), "{clean}");
    assert!(!clean.contains("warnings"), "{clean}");
    let json: serde_json::Value = serde_json::from_str(&results.to_json()).unwrap();
    let (app, _) = results.runs[0].apps.iter().next().unwrap();
    assert!(json["runs"][0]["apps"][app].get("failure").is_none());
    let app = app.clone();
    let result = results.runs[0].apps.get_mut(&app).unwrap();
    result.failure = Some(mobistack::report::results::AppFailure {
        at_ns: 1_500_000_000,
        task: format!("{app}/2"),
        message: "statement 1 `SELEKT 1`: near \"SELEKT\": syntax error".into(),
    });
    result.warnings = vec!["value clamped".into()];
    results.runs[0].end = "apps-done".into();
    let table = mobistack::report::table::render(&results);
    assert!(table.contains("1 app(s) stopped early"), "{table}");
    assert!(
        table.contains("ended when every app's workload had finished or stopped early"),
        "{table}"
    );
    assert!(
        table.contains(&format!(
            "{app}: at 1.50 s in task `{app}/2`: statement 1 `SELEKT 1`"
        )),
        "{table}"
    );
    assert!(table.contains("value clamped"), "{table}");
    let json: serde_json::Value = serde_json::from_str(&results.to_json()).unwrap();
    assert_eq!(
        json["runs"][0]["apps"][&app]["failure"]["at_ns"],
        1_500_000_000u64
    );
    assert_eq!(
        json["runs"][0]["apps"][&app]["warnings"][0],
        "value clamped"
    );
}

#[test]
fn the_slowest_operation_puts_each_wait_on_its_own_line_and_no_heading_without_one() {
    let mut results = fg_read_bg_write_seed_1();
    let table = mobistack::report::table::render(&results);
    assert!(table.contains("slowest operation of each app"), "{table}");
    // Ten long waits: one line each, not one line of all of them.
    let run = &mut results.runs[0];
    let op = run
        .apps
        .values_mut()
        .flat_map(|app| app.ops.values_mut())
        .find(|op| !op.slowest.is_empty())
        .expect("an operation with a slowest entry");
    let wait = mobistack::report::results::SlowWait {
        reason: "lock_buffer".into(),
        layer: "fs".into(),
        on: format!("request R#1 ({})", "x".repeat(80)),
        held_by: None,
        start_ns: 0,
        ns: 1_000_000,
        still_waiting: false,
    };
    op.slowest[0].waits = vec![wait; 10];
    let table = mobistack::report::table::render(&results);
    let longest = table.lines().map(|l| l.chars().count()).max().unwrap();
    assert!(longest < 200, "a line of {longest} characters in\n{table}");
    assert!(
        table
            .lines()
            .filter(|l| l.trim_start().starts_with("lock_buffer 1.00 ms"))
            .count()
            >= 10,
        "{table}"
    );
    // A run in which no operation took time prints no heading for it.
    for run in &mut results.runs {
        for app in run.apps.values_mut() {
            for op in app.ops.values_mut() {
                op.slowest.clear();
            }
        }
    }
    let table = mobistack::report::table::render(&results);
    assert!(!table.contains("slowest operation"), "{table}");
}
