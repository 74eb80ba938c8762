//! The `mobistack` binary: exit codes, JSON output, error text.

use std::process::Command;

fn mobistack(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mobistack"))
        .args(args)
        .output()
        .expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn run_prints_a_table_or_one_json_object() {
    let (code, table, _) = mobistack(&["run", "demo", "--variant", "fg-first"]);
    assert_eq!(code, 0);
    assert!(
        table.contains("fg-first") && !table.contains("fifo "),
        "{table}"
    );
    let (code, json, _) = mobistack(&["run", "demo", "--json", "--seed", "3"]);
    assert_eq!(code, 0);
    let value: serde_json::Value = serde_json::from_str(&json).expect("one JSON object");
    assert_eq!(value["schema"], "mobistack.results");
    assert_eq!(value["runs"].as_array().unwrap().len(), 2);
    assert_eq!(value["runs"][0]["seed"], 3);
}

#[test]
fn run_explains_the_slowest_operations_and_breaks_blocked_time_down() {
    let (code, out, _) = mobistack(&["run", "fg-read-bg-write", "--variant", "cfq", "--breakdown"]);
    assert_eq!(code, 0);
    assert!(out.contains("slowest operation of each app"), "{out}");
    assert!(out.contains("queued in cfq"), "{out}");
    assert!(out.contains("blocked time by reason"), "{out}");
    assert!(out.contains("submit_bio_wait  block"), "{out}");
}

#[test]
fn run_writes_one_blktrace_per_run() {
    let base = std::env::temp_dir().join(format!("mobistack-run-{}.blktrace", std::process::id()));
    let base_text = base.to_str().unwrap();
    let (code, _, err) = mobistack(&["run", "fg-read-bg-write", "--blktrace", base_text]);
    assert_eq!(code, 0, "{err}");
    for variant in ["noop", "cfq", "noop+fg-aware"] {
        let path = format!("{base_text}.{variant}.1");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert!(text
            .lines()
            .any(|l| l.contains(" D   R ") && l.ends_with("[gallery]")));
        assert!(
            text.lines().any(|l| l.contains(" C  WS ")),
            "completions of the writes"
        );
    }
    for variant in ["noop", "deadline", "cfq", "mq-deadline", "noop+fg-aware"] {
        std::fs::remove_file(format!("{base_text}.{variant}.1")).ok();
    }
    assert!(err.contains("blktrace:"), "{err}");
}

#[test]
fn bad_input_exits_2_and_a_failed_run_exits_1() {
    let (code, _, err) = mobistack(&["validate", "no-such-scenario"]);
    assert_eq!(code, 2);
    assert!(err.contains("no built-in scenario"), "{err}");
    let (code, _, err) = mobistack(&["run", "demo", "--variant", "nope"]);
    assert_eq!(code, 2);
    assert!(err.contains("no variant `nope`"), "{err}");
    let (code, _, err) = mobistack(&["run", "deadlock"]);
    assert_eq!(code, 1);
    assert!(err.contains("deadlock at"), "{err}");
}

#[test]
fn list_and_validate_describe_the_builtins() {
    let (code, out, _) = mobistack(&["list", "--json"]);
    assert_eq!(code, 0);
    let value: serde_json::Value = serde_json::from_str(&out).unwrap();
    let names: Vec<&str> = value["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"demo") && names.contains(&"deadlock"));
    let (code, out, _) = mobistack(&["validate", "demo"]);
    assert_eq!(code, 0);
    assert!(out.contains("2 variant(s) (fifo, fg-first)"), "{out}");
}

#[test]
fn device_commands_list_bench_and_fit() {
    let (code, out, _) = mobistack(&["device", "list", "--json"]);
    assert_eq!(code, 0);
    assert!(out.contains("emmc-5.0") && out.contains("ufs-3.1"), "{out}");
    let (code, out, _) = mobistack(&["device", "bench", "emmc-5.0", "--json"]);
    assert_eq!(code, 0);
    serde_json::from_str::<serde_json::Value>(&out).expect("bench JSON");
    let (code, _, err) = mobistack(&["device", "bench", "floppy"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown device profile `floppy`"), "{err}");
    let (code, _, err) = mobistack(&[
        "device",
        "fit",
        "--seq-read",
        "250MB",
        "--seq-write",
        "125MB/s",
        "--rand-read",
        "11000",
        "--rand-write",
        "13000",
    ]);
    assert_eq!(code, 2, "a bandwidth without /s is bad input");
    assert!(err.contains("250MB"), "{err}");
}

#[test]
fn fio_runs_a_job_file_and_writes_a_blkparse_trace() {
    let trace = std::env::temp_dir().join(format!("mobistack-cli-{}.blktrace", std::process::id()));
    let (code, out, err) = mobistack(&[
        "fio",
        "examples/fio/fg_read_bg_write.fio",
        "--device",
        "emmc-5.1",
        "--elevator",
        "deadline",
        "--blktrace",
        trace.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("fg-randread") && out.contains("merges:"),
        "{out}"
    );
    let text = std::fs::read_to_string(&trace).unwrap();
    std::fs::remove_file(&trace).ok();
    let first = text.lines().next().unwrap();
    // blkparse default format: "maj,min cpu seq time pid action rwbs sector + size [comm]"
    let fields: Vec<&str> = first.split_whitespace().collect();
    assert_eq!(fields[0], "179,0");
    assert_eq!(fields[5], "Q");
    assert!(first.ends_with("[fio]"), "{first}");
    let (code, _, err) = mobistack(&[
        "fio",
        "examples/fio/fg_read_bg_write.fio",
        "--elevator",
        "anticipatory",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("anticipatory"), "{err}");
}
