//! Running scenarios end to end: determinism, the toy stack's behaviour, deadlock reports.

use mobistack::run::{run_scenario, RunOptions};
use mobistack::scenario;

fn results_json(name: &str, seed: u64, threads: usize) -> String {
    let s = scenario::load(name).unwrap();
    let options = RunOptions {
        seeds: Some(vec![seed]),
        threads,
        progress: None,
    };
    run_scenario(&s, &options).unwrap().to_json()
}

#[test]
fn every_builtin_scenario_gives_byte_identical_json_per_seed() {
    for builtin in scenario::builtin::BUILTINS {
        if builtin.name == "deadlock" {
            continue; // it ends in its deadlock report, pinned below
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
                assert!(op.p90_ns <= op.p99_ns && op.p99_ns <= op.max_ns, "{op:?}");
                let total: u64 = op.histogram.iter().map(|[_, count]| count).sum();
                assert_eq!(total, op.count, "the histogram holds every operation");
            }
        }
    }
}
