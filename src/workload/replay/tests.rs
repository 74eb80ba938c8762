//! Replays through the whole stack, and the blkparse round trip.

use crate::units::NS_PER_SEC;

fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("mobistack-{}-{name}", std::process::id()));
    std::fs::write(&path, text).unwrap();
    path
}

const PIXEL: &str = "proces,device,rw_flag,sector,size,timestamp\r
com.game-100,8388608,R,1000,8,100.000000\r
com.game-100,8388608,R,2000,32,100.001000\r
f2fs_ckpt-254:4-690,8388608,W,5000,8,100.002000\r
com.game-100,8388608,W,3000,16,100.010000\r
kworker/u17:0-21515,8388608,W,7000,1024,100.020000\r
f2fs_ckpt-254:4-690,8388608,W,5008,8,100.030000\r
";

fn scenario(body: &str) -> crate::scenario::Scenario {
    let source = format!(
        "name = \"replay\"\nend = \"apps-done\"\n[stack.device]\nprofile = \"ufs-2.1\"\ncapacity = \"1GiB\"\n{body}"
    );
    crate::scenario::parse("replay.toml", &source).unwrap()
}

#[test]
fn a_pixel_trace_replays_through_the_stack_with_its_processes_as_apps() {
    let trace = temp_file("pixel.csv", PIXEL);
    let body = format!(
        r#"
[stack.block]
blktrace = true
[[app]]
name = "game"
role = "foreground"
[app.workload.replay]
trace = "{0}"
processes = ["com.game"]
[[app]]
name = "system"
[app.workload.replay]
trace = "{0}"
processes = ["f2fs_ckpt*", "kworker*"]
"#,
        trace.display()
    );
    let results = crate::run::run_scenario(&scenario(&body), &Default::default()).unwrap();
    let run = &results.runs[0];
    let game = &run.apps["game"];
    let system = &run.apps["system"];
    assert_eq!(game.counters["replay.requests"], 3);
    assert_eq!(game.counters["replay.processes"], 1);
    assert_eq!((game.ops["read"].count, game.ops["write"].count), (2, 1));
    assert_eq!(system.counters["replay.requests"], 3);
    assert_eq!(system.counters["replay.processes"], 2);
    // Open loop: the last I/O is issued 30 ms into the trace.
    assert!(
        run.virtual_ns >= 30_000_000 && run.virtual_ns < NS_PER_SEC,
        "{}",
        run.virtual_ns
    );
    // Each process issues under its own name.
    let blktrace = run.blktrace.as_ref().unwrap().to_blkparse();
    for comm in ["[com.game]", "[f2fs_ckpt-254:4]", "[kworker/u17:0]"] {
        assert!(blktrace.contains(comm), "{comm} missing from\n{blktrace}");
    }
    std::fs::remove_file(trace).ok();
}

#[test]
fn a_blktrace_written_by_a_run_replays_with_the_same_request_count() {
    // A run that writes a blktrace: a sequential writer and a random reader.
    let body = r#"
[stack.block]
blktrace = true
elevator = "deadline"
[[app]]
name = "writer"
[app.workload.seq-write]
path = "/data/file"
size = "4MiB"
io_size = "256KiB"
fsync_at_end = true
[[app]]
name = "reader"
[app.workload.file-read]
path = "/data/photos"
file_size = "8MiB"
pattern = "random"
count = 50
"#;
    let results = crate::run::run_scenario(&scenario(body), &Default::default()).unwrap();
    let text = results.runs[0].blktrace.as_ref().unwrap().to_blkparse();
    let count = |action: &str| {
        text.lines()
            .filter(|l| l.split_whitespace().nth(5) == Some(action))
            .count() as u64
    };
    let (queued, completed) = (count("Q"), count("C"));
    assert!(
        completed > 50 && queued >= completed,
        "Q {queued} C {completed}"
    );
    let path = temp_file("round.blktrace", &text);
    // Device-only: the requests the driver received (D), each completing once.
    let args = super::device::CommandArgs {
        trace: path.clone(),
        device: "ufs-2.1".into(),
        capacity: Some("1GiB".into()),
        fill: None,
        format: None,
        event: "D".into(),
        time_unit: "ms".into(),
        time_scale: 1.0,
        queue_depth: None,
        wrap: false,
        skip_bad_lines: false,
        max_requests: None,
    };
    let report = super::device::run_command(&args, &|_| {}).unwrap();
    assert_eq!(report.serviced, completed);
    // Through the stack: every bio (Q) again.
    let replay = format!(
        "[[app]]\nname = \"again\"\n[app.workload.replay]\ntrace = \"{}\"\n",
        path.display()
    );
    let results = crate::run::run_scenario(&scenario(&replay), &Default::default()).unwrap();
    assert_eq!(
        results.runs[0].apps["again"].counters["replay.requests"],
        queued
    );
    std::fs::remove_file(path).ok();
}

#[test]
fn closed_loop_ignores_time_and_bad_lines_are_scenario_errors() {
    let trace = temp_file(
        "closed.trace",
        "0 0 0 8 1\n100000 0 8 8 1\n200000 0 16 8 0\n300000 0 24 8 1\n",
    );
    let body = format!(
        "[[app]]\nname = \"c\"\n[app.workload.replay]\ntrace = \"{}\"\nmode = \"closed\"\nqueue_depth = 2\n",
        trace.display()
    );
    let results = crate::run::run_scenario(&scenario(&body), &Default::default()).unwrap();
    let run = &results.runs[0];
    assert_eq!(run.apps["c"].counters["replay.requests"], 4);
    // 100 s of trace time, replayed back to back.
    assert!(run.virtual_ns < NS_PER_SEC, "{}", run.virtual_ns);
    let bad = temp_file("bad.trace", "0 0 0 8 1\n1 0 x 8 1\n");
    let source = format!(
        "name = \"r\"\nend = \"apps-done\"\n[[app]]\nname = \"c\"\n[app.workload.replay]\ntrace = \"{}\"\n",
        bad.display()
    );
    let error = crate::scenario::parse("r.toml", &source)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("bad.trace:2:") && error.contains("block number"),
        "{error}"
    );
    let skipping = source.replace(
        "[app.workload.replay]\n",
        "[app.workload.replay]\nskip_bad_lines = true\n",
    );
    let scenario = crate::scenario::parse("r.toml", &skipping).unwrap();
    let results = crate::run::run_scenario(&scenario, &Default::default()).unwrap();
    let app = &results.runs[0].apps["c"];
    assert_eq!(
        (
            app.counters["replay.requests"],
            app.counters["replay.skipped_lines"]
        ),
        (1, 1)
    );
    std::fs::remove_file(trace).ok();
    std::fs::remove_file(bad).ok();
}

fn device_args(trace: &std::path::Path) -> super::device::CommandArgs {
    super::device::CommandArgs {
        trace: trace.to_path_buf(),
        device: "ufs-2.1".into(),
        capacity: Some("1GiB".into()),
        fill: None,
        format: None,
        event: "D".into(),
        time_unit: "ms".into(),
        time_scale: 1.0,
        queue_depth: None,
        wrap: false,
        skip_bad_lines: false,
        max_requests: None,
    }
}

/// Issue 40: a timestamp near 2^64 ns printed "simulated 18446744072710 ms" (and overflowed
/// virtual time in a debug build); a replay spans at most 365 days, and a line beyond is an
/// error naming it.
#[test]
fn a_timestamp_beyond_a_replays_span_is_an_error_naming_the_line() {
    let pixel = temp_file(
        "huge.csv",
        "loop40-2757,8388608,W,2065,8,1.0\nloop40-2757,8388608,W,2065,8,18446744073.709551\n",
    );
    let error = super::device::run_command(&device_args(&pixel), &|_| {}).unwrap_err();
    assert!(
        error.contains("huge.csv:2:") && error.contains("365 days"),
        "{error}"
    );
    // Closed loop ignores the timestamps: the same trace replays.
    let mut closed = device_args(&pixel);
    closed.queue_depth = Some(1);
    let report = super::device::run_command(&closed, &|_| {}).unwrap();
    assert_eq!(report.serviced, 2);
    std::fs::remove_file(pixel).ok();
}

/// `--time-scale` stretches the trace (2: twice as slow), and a scale that would put a request
/// past a replay's span, or that is not a positive finite number, is an error naming it.
#[test]
fn the_time_scale_is_checked_and_cannot_overflow_virtual_time() {
    let disksim = temp_file("scaled.trace", "0.0 0 100 8 1\n2.0 0 200 8 0\n");
    let mut args = device_args(&disksim);
    let progress_calls = std::cell::Cell::new(0);
    let once = super::device::run_command(&args, &|_| progress_calls.set(progress_calls.get() + 1))
        .unwrap();
    args.time_scale = 2.0;
    let twice = super::device::run_command(&args, &|_| {}).unwrap();
    // The second request arrives at 2 ms, then at 4 ms.
    assert!(
        once.simulated_ns >= 2_000_000 && once.simulated_ns < 3_000_000,
        "{}",
        once.simulated_ns
    );
    assert!(
        twice.simulated_ns >= 4_000_000 && twice.simulated_ns < 5_000_000,
        "{}",
        twice.simulated_ns
    );
    assert_eq!(
        progress_calls.get(),
        0,
        "a two-request replay is too short for progress"
    );
    args.time_scale = 1e30;
    let error = super::device::run_command(&args, &|_| {}).unwrap_err();
    assert!(
        error.contains("scaled.trace:2:") && error.contains("--time-scale 1e30"),
        "{error}"
    );
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        args.time_scale = bad;
        let error = super::device::run_command(&args, &|_| {}).unwrap_err();
        assert!(error.contains("--time-scale"), "{bad}: {error}");
    }
    std::fs::remove_file(disksim).ok();
}

/// In a scenario, a timestamp beyond a replay's span is an error when the scenario is loaded;
/// a request beyond the device stops the app, which says why (the trace's line).
#[test]
fn a_replay_app_that_stops_early_says_why() {
    let huge = temp_file("huge.trace", "0 0 0 8 1\n1e12 0 8 8 1\n");
    let source = format!(
        "name = \"r\"\nend = \"apps-done\"\n[[app]]\nname = \"c\"\n[app.workload.replay]\ntrace = \"{}\"\n",
        huge.display()
    );
    let error = crate::scenario::parse("r.toml", &source)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("huge.trace:2:") && error.contains("365 days"),
        "{error}"
    );
    let beyond = temp_file("beyond.trace", "0 0 0 8 1\n1 0 3000000 8 1\n");
    let body = format!(
        "[[app]]\nname = \"c\"\n[app.workload.replay]\ntrace = \"{}\"\n",
        beyond.display()
    );
    let results = crate::run::run_scenario(&scenario(&body), &Default::default()).unwrap();
    let app = &results.runs[0].apps["c"];
    let failure = app.failure.as_ref().expect("the replay stopped early");
    assert!(
        failure.message.contains("beyond.trace:2:") && failure.message.contains("wrap"),
        "{}",
        failure.message
    );
    std::fs::remove_file(huge).ok();
    std::fs::remove_file(beyond).ok();
}

mod fuzz {
    use super::super::trace::{Format, ReadOptions, TraceReader};
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Any bytes in any format are records or errors, never a panic.
        #[test]
        fn reading_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            for format in [Format::Blkparse, Format::Pixel, Format::Disksim] {
                for skip in [false, true] {
                    let mut options = ReadOptions::new(format);
                    options.skip_bad_lines = skip;
                    let mut reader = TraceReader::new(bytes.as_slice(), "fuzz", options);
                    while let Ok(Some(_)) = reader.next_record() {}
                }
            }
        }
    }
}

#[test]
fn a_field_the_loop_mode_does_not_read_is_an_error_not_ignored() {
    let trace = temp_file("modes.trace", "0 0 0 8 1\n1 0 8 8 1\n");
    let app = |fields: &str| {
        format!(
            "name = \"r\"\nduration = \"1s\"\n[[app]]\nname = \"c\"\n[app.workload.replay]\ntrace = \"{}\"\n{fields}",
            trace.display()
        )
    };
    for (fields, expected) in [
        (
            "mode = \"closed\"\ntime_scale = 2.0\n",
            "`time_scale` = 2 applies to mode = \"open\" only",
        ),
        (
            "queue_depth = 4\n",
            "`queue_depth` = 4 applies to mode = \"closed\" only",
        ),
    ] {
        let error = crate::scenario::parse("r.toml", &app(fields))
            .unwrap_err()
            .to_string();
        assert!(error.contains(expected), "{fields}: {error}");
    }
    // Each mode with its own field, or the other at its default, is fine.
    for fields in [
        "mode = \"closed\"\nqueue_depth = 4\n",
        "time_scale = 2.0\n",
        "mode = \"closed\"\ntime_scale = 1.0\n",
    ] {
        crate::scenario::parse("r.toml", &app(fields)).unwrap();
    }
    std::fs::remove_file(trace).ok();
}

#[test]
fn a_request_larger_than_any_host_takes_is_an_error_naming_the_line() {
    // Found by the replay_run fuzz target: a DiskSim line of 60,001,000 sectors (28 GiB) overran
    // the device model's per-die busy intervals ("timeline holds too many intervals").
    // A name of its own: the tests run as threads of one process, and `temp_file` names by pid.
    let trace = temp_file("oversized.trace", "0.0 0 8 8 1\n600 0 1 60001000 1\n");
    let error = crate::scenario::parse(
        "r.toml",
        &format!(
            "name = \"r\"\nduration = \"1s\"\n[[app]]\nname = \"c\"\n[app.workload.replay]\ntrace = \"{}\"\n",
            trace.display()
        ),
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("oversized.trace:2:") && error.contains("larger than the 64 MiB"),
        "{error}"
    );
    std::fs::remove_file(trace).ok();
}
