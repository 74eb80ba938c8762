//! Scenarios whose apps use files: the page cache, writeback and dirty throttling over the block
//! layer and a device model (built-in `bg-write-fg-read`).

use mobistack::report::RunResult;
use mobistack::run::{run_scenario, RunOptions};
use mobistack::scenario;

fn runs() -> Vec<RunResult> {
    let s = scenario::load("bg-write-fg-read").unwrap();
    run_scenario(&s, &RunOptions::default()).unwrap().runs
}

fn run<'a>(runs: &'a [RunResult], variant: &str) -> &'a RunResult {
    runs.iter().find(|r| r.variant == variant).unwrap()
}

#[test]
fn a_background_writer_is_throttled_and_the_foreground_keeps_reading() {
    let runs = runs();
    for run in &runs {
        let gallery = &run.apps["gallery"].ops["read"];
        assert!(
            gallery.count > 100,
            "{}: the foreground app kept reading",
            run.variant
        );
        assert!(
            gallery.blocked_ns.contains_key("lock_page"),
            "{}: reads wait for their page reads in lock_page",
            run.variant
        );
        let backup = &run.apps["backup"].ops["write"];
        assert!(backup.blocked_ns.contains_key("balance_dirty_pages"));
        assert!(run.apps["messenger"].ops["fsync"].count > 5);
        assert!(
            run.counters["mm.pages_written_async"] > 0,
            "the flusher wrote"
        );
        assert_eq!(run.counters["vfs.errors"], 0);
        // 1 GiB through a 90 MB/s eMMC 5.0 with 20 s: the writer is device-bound, not done.
        let mbps = run.apps["backup"].counters["bytes"] as f64 / 1e6 / 20.0;
        assert!(
            (30.0..=95.0).contains(&mbps),
            "{}: backup {mbps:.1} MB/s",
            run.variant
        );
    }
    // CFQ serves the foreground's sync reads ahead of the flusher's async writes; noop queues
    // them behind up to nr_requests async requests.
    let worst = |variant: &str| run(&runs, variant).apps["gallery"].ops["read"].max_ns;
    assert!(
        worst("cfq") * 5 < worst("noop"),
        "cfq {} vs noop {}",
        worst("cfq"),
        worst("noop")
    );
}

#[test]
fn an_fsyncs_wait_on_writeback_is_explained_by_the_request_carrying_the_page() {
    // fsync writes the dirty pages and waits in wait_on_page_writeback; the wait names the block
    // request that carries the page and where that request spent its time. (QASIO's D_sync, an
    // fsync meeting pages already under the flusher's async writeback, is pinned by the mm test
    // `fsync_waits_for_pages_already_under_async_writeback`.)
    let runs = runs();
    let fsync = &run(&runs, "cfq").apps["messenger"].ops["fsync"];
    assert!(fsync.blocked_ns["wait_on_page_writeback"] > 0);
    let slowest = &fsync.slowest[0];
    let wait = slowest
        .waits
        .iter()
        .find(|w| w.reason == "wait_on_page_writeback")
        .expect("the slowest fsync waited on writeback");
    assert!(wait.on.contains("request R#"), "{}", wait.on);
    assert!(wait.on.contains("queued in cfq"), "{}", wait.on);
}

#[test]
fn a_read_waiting_on_its_locked_page_is_explained_by_the_read_request() {
    // The gallery's reads wait in lock_page for the page's own read; the wait names the block
    // request reading the page, and so where it spent its time.
    let runs = runs();
    for variant in ["cfq", "noop"] {
        let slowest = &run(&runs, variant).apps["gallery"].ops["read"].slowest[0];
        let wait = &slowest.waits[0];
        assert_eq!(wait.reason, "lock_page");
        assert!(
            wait.on.contains("RS 8 sectors of gallery"),
            "{variant}: {}",
            wait.on
        );
        assert!(
            wait.on.contains(&format!("queued in {variant}")),
            "{}",
            wait.on
        );
    }
}

#[test]
fn file_workload_mistakes_are_located_errors() {
    let source = include_str!("../scenarios/bg-write-fg-read.toml");
    let edit = |from: &str, to: &str| {
        assert!(source.contains(from));
        scenario::parse("edited.toml", &source.replacen(from, to, 1)).unwrap_err()
    };
    let err = edit("path = \"/sdcard/backup.tar\"", "path = \"backup.tar\"");
    assert!(err.message.contains("must be absolute"), "{err}");
    let err = edit("pattern = \"random\"", "pattern = \"zigzag\"");
    assert!(err.message.contains("unknown variant `zigzag`"), "{err}");
    let err = edit("dirty_background_ratio = 5", "dirty_background_ratio = 500");
    assert!(err.message.contains("must be a percentage"), "{err}");
    let line = 1 + source
        .lines()
        .position(|l| l.starts_with("dirty_background_ratio"))
        .unwrap();
    assert_eq!(err.position.unwrap().0, line, "{err}");
    let err = edit("think = \"500ms\"", "thinkk = \"500ms\"");
    assert!(err.message.contains("unknown field `thinkk`"), "{err}");
}

#[test]
fn the_desktop_scenarios_are_valid() {
    for (name, source) in [
        (
            "desktop-fsync",
            include_str!("../scenarios/desktop-fsync.toml"),
        ),
        (
            "desktop-fsync-bg",
            include_str!("../scenarios/desktop-fsync-bg.toml"),
        ),
    ] {
        let s = scenario::parse(name, source).unwrap();
        assert_eq!(s.name, name);
        let names: Vec<&str> = s.variants.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["mq-deadline", "none"]);
        for variant in &s.variants {
            assert_eq!(variant.stack.vm.ram, 24 << 30);
            assert_eq!(variant.stack.kernel.hz.0, 250);
        }
    }
}
