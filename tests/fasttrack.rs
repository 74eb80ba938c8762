//! FastTrack (seed 001) on a scaled copy of the built-in scenario `fasttrack/gallery-backup`
//! (an eighth of the page cache and of the files): the page reclaimer changes what the paper
//! says it changes, computed by the simulator. (The I/O dispatcher's effect on
//! `fasttrack/camera-update` does not survive scaling down; its mechanism is tested in
//! `src/block/queue.rs`.)

use mobistack::report::ScenarioResults;
use mobistack::run::{run_scenario, RunOptions};
use mobistack::scenario;

/// `name`'s source scaled down: RAM and reserve, background sizes.
fn scaled(name: &str) -> String {
    scenario::builtin::find(name)
        .expect("built-in")
        .source
        .replace("ram = \"3GiB\"", "ram = \"1GiB\"")
        .replace("reserved = \"2GiB\"", "reserved = \"896MiB\"")
        .replace("file_size = \"1GiB\"", "file_size = \"256MiB\"")
        .replace("size = \"3MiB\"", "size = \"1MiB\"")
        .replace("total = \"3MiB\"", "total = \"1MiB\"")
        .replace("size = \"8MiB\"", "size = \"2MiB\"")
        .replace("total = \"8MiB\"", "total = \"2MiB\"")
        .replace("think = \"1s\"", "think = \"2500ms\"")
}

/// Runs `variant` of scenario `name` written as `source`.
fn run(name: &str, source: &str, variant: &str) -> ScenarioResults {
    let mut s = scenario::parse(&format!("{name}.toml"), source).expect("parses");
    s.select_variant(variant).expect("variant");
    run_scenario(&s, &RunOptions::default()).expect("runs")
}

fn latencies(results: &ScenarioResults, app: &str, op: &str) -> Vec<u64> {
    let summary = &results.runs[0].apps[app].ops[op];
    summary
        .histogram
        .iter()
        .flat_map(|&[ns, count]| std::iter::repeat_n(ns, count as usize))
        .collect()
}

#[test]
fn the_page_reclaimer_keeps_the_foreground_apps_pages_under_a_backup() {
    // Warm relaunches: the scenario without its cold-start `fadvise` steps, so Gallery's pages
    // stay cached unless reclaim takes them, and Gallery starts with the (scaled, short) Backup. Linux evicts Gallery's clean pages, oldest first,
    // as Backup reads: the second launch reads from the device again. FastTrack's reclaimer
    // evicts Backup's pages first: the second launch hits the page cache.
    let warm = |variant: &str| {
        let name = "fasttrack/gallery-backup";
        let source = scaled(name)
            .replace("  { op = \"fadvise\", advice = \"dontneed\" },\n", "")
            .replace("start = \"2s\"", "start = \"0s\"");
        assert!(!source.contains("op = \"fadvise\""));
        run(name, &source, variant)
    };
    let stock = warm("fg+bg");
    let pr = warm("pr");
    let (stock, pr) = (
        latencies(&stock, "gallery", "iteration"),
        latencies(&pr, "gallery", "iteration"),
    );
    assert_eq!((stock.len(), pr.len()), (4, 4));
    // Warm launches (from the cache) are the fastest; a cold one takes several times longer.
    let warm = *pr.iter().min().unwrap();
    let slow = |l: &[u64]| l.iter().filter(|&&ns| ns > 2 * warm).count();
    assert_eq!(
        slow(&pr),
        1,
        "only the cold first launch misses with PR: {pr:?}"
    );
    assert!(
        slow(&stock) >= 2,
        "stock re-reads after eviction: {stock:?}"
    );
}

/// FastTrack §2.3's C_fg and the per-layer split (src/report/layers.rs) on scaled Camera /
/// Update: alone, nearly all the I/O in flight during Camera's fsyncs is Camera's; with Update
/// writing, a large part is Update's and the fsyncs take longer. The split follows the commit
/// an fsync waits for (`jbd2_log_wait_commit`) into the commit thread's waits, so the added
/// time lands where the commit's writes, flush and ordered data wait: the block layer, the wait
/// for the device's slot and the device, not the journal's own time. The layers add up to the
/// latency.
#[test]
fn c_fg_falls_and_block_and_device_time_rise_under_a_background_writer() {
    let layers = |with_background: bool| {
        let name = "fasttrack/camera-update";
        let mut s = scenario::parse(&format!("{name}.toml"), &scaled(name)).expect("parses");
        s.select_variant("fg+bg").expect("variant");
        if !with_background {
            s.apps.retain(|a| a.name.get_ref() != "update");
        }
        let options = RunOptions {
            timeline: Some(mobistack::sim::timeline::TimelineConfig::without_counters()),
            ..RunOptions::default()
        };
        let results = run_scenario(&s, &options).expect("runs");
        let run = &results.runs[0];
        let timeline = run.timeline.as_ref().expect("recorded");
        assert_eq!(timeline.timeline.dropped, 0);
        let uid = run.apps["camera"].uid;
        mobistack::report::layers::breakdown(timeline, "camera", uid, "fsync")
    };
    let (alone, together) = (layers(false), layers(true));
    println!("alone {alone:?}\ntogether {together:?}");
    assert_eq!((alone.ops, together.ops), (4, 4));
    assert!(alone.c_fg().unwrap() > 0.95, "{alone:?}");
    assert!(together.c_fg().unwrap() < 0.9, "{together:?}");
    assert!(together.total_ns > alone.total_ns, "{alone:?} {together:?}");
    let below_fs = |l: &mobistack::report::layers::LayerBreakdown| {
        l.block_ns + l.device_queue_ns + l.device_ns
    };
    assert!(
        below_fs(&together) > below_fs(&alone) + (together.total_ns - alone.total_ns) / 2,
        "the block layer and the device carry most of the slowdown: {alone:?} {together:?}"
    );
    for l in [&alone, &together] {
        assert_eq!(l.layers_sum(), l.total_ns);
    }
    assert!(alone.device_ns > 0);
}

/// FastTrack's I/O dispatcher on an eMMC driven one command at a time, as 3.10's mmc driver
/// drives any eMMC (no command queueing before 4.15), on scaled Gallery / Update: stock CFQ
/// gives the cold launch's sync reads their slice and keeps Update's writes off the device
/// meanwhile. Past CFQ (`id_path = "bypass"`) the dispatcher moves the reads to the dispatch
/// list, out of CFQ's sight, so CFQ serves Update between them and the launch gets slower.
/// Through CFQ's own dispatch (`"elevator"`, the default) the launch's queue is made the served
/// one and the launch gains. With the device's command queue (the profile's 32 slots) the
/// bypass does not slow the launch.
#[test]
fn on_a_one_command_emmc_the_dispatcher_past_cfq_slows_a_cold_launch_under_update() {
    let name = "fasttrack/gallery-update";
    // The scenario drives the card one command at a time (the N6 as shipped); `None` gives it
    // its own 32-task queue back.
    let mean_launch = |queue_depth: Option<&str>, variant: &str| {
        let source = scaled(name)
            .replace("size = \"1536MiB\"", "size = \"384MiB\"")
            .replace(
                "\nqueue_depth = 1 ",
                &format!("\nqueue_depth = {} ", queue_depth.unwrap_or("32")),
            );
        let results = run(name, &source, variant);
        results.runs[0].apps["gallery"].ops["iteration"].mean_ns
    };
    let (stock, id) = (
        mean_launch(Some("1"), "fg+bg"),
        mean_launch(Some("1"), "id-bypass"),
    );
    assert!(
        id > 1.3 * stock,
        "one command: stock {stock} ns, ID {id} ns"
    );
    // Through CFQ's own dispatch the launch's queue is the one served, and idles for its next
    // read: the launch keeps the device and gains.
    let through = mean_launch(Some("1"), "id");
    assert!(
        through < 0.95 * stock,
        "one command: stock {stock} ns, ID through CFQ {through} ns"
    );
    let (stock, id) = (mean_launch(None, "fg+bg"), mean_launch(None, "id-bypass"));
    assert!(
        id < 1.05 * stock,
        "command queue: stock {stock} ns, ID {id} ns"
    );
}

/// Figure 13's five and six background apps: part of what FastT leaves of Camera's switch is
/// the journal's commit waiting for metadata and ordered data under asynchronous write, which
/// FastTrack's detector does not see (the waiter is jbd2, the buffers and pages are not the
/// foreground app's). QASIO's boost of those writes, with FastT, shortens the commit wait and
/// the switch.
#[test]
fn with_five_or_six_background_apps_qasio_shortens_the_commit_wait_fasttrack_leaves() {
    let fsync = |source: &str, variant: &str| {
        let results = run("camera-many-bg", source, variant);
        let summary = results.runs[0].apps["camera"].ops["fsync"].clone();
        let commit_wait = summary
            .blocked_ns
            .get("jbd2_log_wait_commit")
            .copied()
            .unwrap_or(0) as f64;
        (summary.mean_ns, commit_wait)
    };
    // (n, switch and commit wait with QASIO at most these fractions of FastT's alone). The
    // commit wait's cut is sensitive to timing: charging flush_overhead (50 us) to a commit
    // block's pre- and post-flush moved the five-app cut from -66 % to -38 % (switch -23 % to
    // -19 %), so the bound asks for a clear cut, not its exact size.
    // On the card's 32-task queue (not the N6 as shipped, whose 3.10 driver sends one command
    // at a time): there the five-app commit wait is cut less (1166 -> 918 ms, -21 %) and with
    // six apps QASIO lengthens FastT's switch (604 -> 636 ms, `reproduce fasttrack --quick`),
    // which issue 44's closing note reports.
    for (n, switch, commit) in [(5, 0.9, 0.75), (6, 0.97, 0.8)] {
        let source = mobistack::report::reproduce::fasttrack_many_bg_scenario(n)
            .expect("builds")
            .replace("\nqueue_depth = 1 ", "\nqueue_depth = 32 ");
        let (fastt, fastt_commit) = fsync(&source, "fastt");
        let (both, both_commit) = fsync(&source, "fastt+qasio");
        assert!(
            both < switch * fastt,
            "{n} apps: switch FastT {fastt} ns, FastT + QASIO {both} ns"
        );
        assert!(
            both_commit < commit * fastt_commit,
            "{n} apps: commit wait FastT {fastt_commit} ns, FastT + QASIO {both_commit} ns"
        );
    }
    assert!(mobistack::report::reproduce::fasttrack_many_bg_scenario(7).is_err());
}
