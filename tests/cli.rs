//! The `mobistack` binary: exit codes, JSON output, error text.

mod common;
use common::mobistack;

use std::process::Command;

/// Removes the files a run wrote next to `base` (`base.VARIANT.SEED...`), whatever variants the
/// scenario has.
fn remove_outputs(base: &std::path::Path) {
    let (Some(dir), Some(name)) = (base.parent(), base.file_name().and_then(|n| n.to_str())) else {
        return;
    };
    let prefix = format!("{name}.");
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with(&prefix))
        {
            std::fs::remove_file(entry.path()).ok();
        }
    }
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
fn run_io_account_prints_the_block_io_of_each_call_by_purpose() {
    let (code, out, err) = mobistack(&["run", "io-account", "--io-account"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("block I/O by purpose"), "{out}");
    let row = |variant: &str, app: &str, cause: &str, purpose: &str| -> Vec<String> {
        out.lines()
            .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
            .find(|c| {
                c.len() == 13 && c[0] == variant && c[2] == app && c[3] == cause && c[4] == purpose
            })
            .unwrap_or_else(|| panic!("no row {variant} {app} {cause} {purpose}: {out}"))
    };
    // bios, writes and flushes / FUA of the commit block with and without FUA.
    let commit = row("fua", "creat-write-fsync", "fsync", "journal-commit");
    assert_eq!(
        (&commit[8][..], &commit[11][..], &commit[12][..]),
        ("1", "1", "1")
    );
    let commit = row("no-fua", "creat-write-fsync", "fsync", "journal-commit");
    assert_eq!((&commit[11][..], &commit[12][..]), ("2", "0"));
    assert_eq!(
        row("fua", "creat-write-fsync", "fsync", "journal-metadata")[8],
        "5"
    );
    assert_eq!(
        row("fua", "rename-fsync", "fsync", "journal-metadata")[8],
        "2"
    );
    assert_eq!(
        row("fua", "append-fdatasync", "fdatasync", "journal-metadata")[8],
        "3"
    );
    assert_eq!(row("fua", "append-fdatasync", "fdatasync", "data")[8], "1");
    // The journal on its own device: log and commit blocks counted on mmcblk1; the data on
    // mmcblk0, and no flush of mmcblk0 at all: in 3.10 delayed-allocation writeback files no
    // inode (ordered_delalloc off), so the commit has no ordered data to flush for, and
    // ext4_sync_file skips its own flush because jbd2_trans_will_send_data_barrier answers
    // yes for a transaction still running (the 3.10 hole; the file's data is not flushed).
    let commit = row(
        "external-journal",
        "creat-write-fsync",
        "fsync",
        "journal-commit@mmcblk1",
    );
    assert_eq!(
        (&commit[8][..], &commit[11][..], &commit[12][..]),
        ("1", "1", "1")
    );
    assert_eq!(
        row(
            "external-journal",
            "creat-write-fsync",
            "fsync",
            "journal-metadata@mmcblk1"
        )[8],
        "5"
    );
    assert!(
        !out.lines().any(|l| l.starts_with("external-journal")
            && l.contains(" creat-write-fsync ")
            && l.split_whitespace().nth(4) == Some("flush")),
        "no flush of the file system's device: {out}"
    );
    assert_eq!(
        row("external-journal", "creat-write-fsync", "fsync", "data")[8],
        "1"
    );
    assert!(
        !out.lines()
            .any(|l| l.starts_with("external-journal") && l.contains(" journal-commit ")),
        "no commit block on the file system's device: {out}"
    );
    let (code, json, _) = mobistack(&["run", "io-account", "--variant", "fua", "--json"]);
    assert_eq!(code, 0);
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    let fsync = &value["runs"][0]["apps"]["creat-write-fsync"]["io_by_purpose"]["fsync"];
    assert_eq!(fsync["journal-descriptor"]["writes"], 1, "{fsync}");
    assert_eq!(fsync["data"]["write_bytes"], 4096, "{fsync}");
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
    remove_outputs(&base);
    assert!(err.contains("blktrace:"), "{err}");
}

#[test]
fn blktrace_of_an_external_journal_shows_its_device() {
    let path = std::env::temp_dir().join(format!("mobistack-ej-{}.blktrace", std::process::id()));
    let text_path = path.to_str().unwrap();
    let (code, out, err) = mobistack(&[
        "run",
        "io-account",
        "--variant",
        "external-journal",
        "--blktrace",
        text_path,
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&path).unwrap();
    let binary = std::fs::read(format!("{text_path}.blktrace.0")).unwrap();
    std::fs::remove_file(&path).ok();
    std::fs::remove_file(format!("{text_path}.blktrace.0")).ok();
    // The journal's device is mmcblk1 (179,8): the log blocks and the commit block (flush +
    // FUA) go there, from the journal thread; nothing of the journal's on mmcblk0 (3.10 sends
    // no flush there for a delayed-allocation file: see run_io_account_...); metadata reads
    // on mmcblk0 carry M.
    let journal: Vec<&str> = text.lines().filter(|l| l.starts_with("179,8 ")).collect();
    assert!(
        journal
            .iter()
            .any(|l| l.contains(" Q FWFS ") && l.ends_with("[jbd2/mmcblk0p25-8]")),
        "{text}"
    );
    assert!(journal.iter().all(|l| !l.contains("[creat-write-fsync]")));
    let fs: Vec<&str> = text.lines().filter(|l| l.starts_with("179,0 ")).collect();
    assert!(fs.iter().any(|l| l.contains(" Q  RM ")), "{text}");
    assert!(
        !fs.iter().any(|l| l.contains(" Q FWS 0 + 0 [jbd2")),
        "{text}"
    );
    assert!(!fs.iter().any(|l| l.contains("FWFS")), "{text}");
    // Each device numbers its own events from 1.
    assert!(
        journal[0].split_whitespace().nth(2) == Some("1"),
        "{}",
        journal[0]
    );
    // The binary records carry each event's device (MKDEV(179, 8) = 179 << 20 | 8).
    let records = mobistack::block::blktrace::decode_binary(&binary).unwrap();
    assert!(records.iter().any(|r| r.device == (179 << 20) | 8));
    assert!(records.iter().any(|r| r.device == 179 << 20));
    // Per-device counters in the results.
    let value: serde_json::Value = serde_json::from_str(&out).unwrap();
    let counters = &value["runs"][0]["counters"];
    assert!(counters["journal_device.block.requests"].as_u64().unwrap() > 0);
    assert!(counters["block.requests"].as_u64().unwrap() > 0);
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

/// `validate` prints each era switch with what set it, and says which variants mix eras; the
/// JSON has both per variant (issue 41).
#[test]
fn validate_prints_the_era_switches_and_what_set_each() {
    let (code, out, err) = mobistack(&["validate", "scenarios/production/fg-vs-bg.toml"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("era switches (gki-mq-deadline, gki-mq-deadline+android):"),
        "{out}"
    );
    let wbt_off = out
        .lines()
        .any(|l| l.contains("wbt") && l.contains("off") && l.contains("config android"));
    assert!(wbt_off, "{out}");
    assert!(
        out.contains("warning: variant `ufs-bfq` mixes eras: the block layer of Linux mainline"),
        "{out}"
    );
    assert!(!out.contains("variant `gki-none` mixes eras"), "{out}");
    let (code, out, _) = mobistack(&["validate", "scenarios/production/fg-vs-bg.toml", "--json"]);
    assert_eq!(code, 0);
    let value: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rows = value["era_switches"]["gki-mq-deadline"].as_array().unwrap();
    let version = rows
        .iter()
        .find(|r| r["layer"] == "kernel" && r["switch"] == "version")
        .unwrap();
    assert_eq!(
        (version["value"].as_str(), version["set_by"].as_str()),
        (Some("6.1"), Some("scenario"))
    );
    assert!(value["mixed_eras"].get("ufs-cfq").is_none());
    assert!(value["mixed_eras"]["ufs-kyber"][0]
        .as_str()
        .unwrap()
        .contains("mainline"));
    // A run of a stack that mixes eras says so in its table and its results.
    let path = scenario_file(
        "mixed-eras",
        "name = \"mixed\"\nduration = \"100ms\"\n[stack.block]\nelevator = \"bfq\"\nversion = \"mainline\"\n[[app]]\nname = \"a\"\n[app.workload.toy-io]\ninterval = \"20ms\"\n",
    );
    let file = path.to_str().unwrap();
    let (code, out, err) = mobistack(&["run", file]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("warning: mixes eras: the block layer of Linux mainline (`[stack.block] version`) over Linux 3.10"),
        "{out}"
    );
    let (code, out, _) = mobistack(&["run", file, "--json"]);
    assert_eq!(code, 0);
    let value: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(value["runs"][0]["mixed_eras"][0]
        .as_str()
        .unwrap()
        .contains("over Linux 3.10"));
    let _ = std::fs::remove_file(&path);
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
        out.contains("fg-randread: (groupid=0") && out.contains("back merges"),
        "{out}"
    );
    let text = std::fs::read_to_string(&trace).unwrap();
    std::fs::remove_file(&trace).ok();
    let mut binary = trace.as_os_str().to_owned();
    binary.push(".blktrace.0");
    std::fs::remove_file(&binary).ok();
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

/// Writes `text` to a scenario file in the temporary directory; returns its path.
fn scenario_file(name: &str, text: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("mobistack-{}-{name}.toml", std::process::id()));
    std::fs::write(&path, text).expect("temp file");
    path
}

#[test]
fn a_zero_time_loop_ends_with_a_livelock_naming_the_task_not_a_hang() {
    // A random reader of a small cached file with the default think = "0": once the file is in
    // the page cache a read costs only CPU time. With the default [stack.cpu] every system call
    // costs virtual time and the run ends; with a CPU that costs nothing the run used to hang
    // with no output, and the engine's livelock detector must stop it.
    let body = r#"name = "hang"
duration = "1s"

[[app]]
name = "reader"
role = "foreground"
[app.workload.file-read]
path = "/sdcard/small.db"
file_size = "64KiB"
pattern = "random"
"#;
    let path = scenario_file("nohang", body);
    let (code, out, err) = mobistack(&["run", path.to_str().unwrap()]);
    std::fs::remove_file(&path).ok();
    assert_eq!(code, 0, "every system call costs CPU time: {out}{err}");

    let free_cpu = format!(
        "{body}\n[stack.cpu]\nsyscall = \"0s\"\ncopy_bandwidth = \"1000TiB/s\"\npage_alloc = \"0s\"\n"
    );
    let path = scenario_file("hang", &free_cpu);
    let (code, out, err) = mobistack(&["run", path.to_str().unwrap()]);
    std::fs::remove_file(&path).ok();
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("zero-time livelock"), "{err}");
    assert!(err.contains("task `reader`"), "{err}");
    assert!(err.contains("`read` system calls"), "{err}");
}

#[test]
fn a_lock_listed_twice_exits_2_with_file_and_line_at_validate_and_run() {
    // It used to trip an engine assertion during the run (exit 101).
    let path = scenario_file(
        "dup-lock",
        "name = \"dup\"\nduration = \"1s\"\n\n[[app]]\nname = \"locker\"\n[app.workload.toy-locks]\nlocks = [\"inode\", \"inode\"]\nhold = \"1ms\"\n",
    );
    let file = path.to_str().unwrap();
    for command in ["validate", "run"] {
        let (code, _, err) = mobistack(&[command, file]);
        assert_eq!(code, 2, "{command}: {err}");
        assert!(err.contains(&format!("{file}:7:")), "{command}: {err}");
        assert!(err.contains("names `inode` twice"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    std::fs::remove_file(&path).ok();
}

#[test]
fn validate_rejects_what_run_would_reject_with_file_and_line() {
    let source = include_str!("../scenarios/fg-read-bg-write.toml");
    for (from, to, line_needle) in [
        // A job smaller than one block.
        ("size = \"256m\"", "size = \"1k\"", "size = \"1k\""),
        // A region past the device's end.
        ("size = \"4g\"", "size = \"64g\"", "offset = \"1g\""),
        // A capacity beyond what the model can map.
        ("capacity = \"8GiB\"", "capacity = \"64TiB\"", "capacity ="),
    ] {
        let edited = source.replacen(from, to, 1);
        let line = edited
            .lines()
            .position(|l| l.contains(line_needle))
            .unwrap()
            + 1;
        let path = scenario_file("validate-run", &edited);
        let file = path.to_str().unwrap();
        let (code, out, err) = mobistack(&["validate", file]);
        std::fs::remove_file(&path).ok();
        assert_eq!(code, 2, "{to}: {out}{err}");
        assert!(err.contains(&format!("{file}:{line}:")), "{to}: {err}");
    }
}

#[test]
fn percentiles_adds_min_and_the_far_tail_on_request() {
    let header = |out: &str| {
        out.lines()
            .find(|l| l.starts_with("variant"))
            .unwrap()
            .to_string()
    };
    let (code, out, _) = mobistack(&["run", "demo", "--variant", "fg-first"]);
    assert_eq!(code, 0);
    assert!(!header(&out).contains("p99.9"), "{out}");
    let (code, out, _) = mobistack(&["run", "demo", "--variant", "fg-first", "--percentiles"]);
    assert_eq!(code, 0);
    let all = header(&out);
    for column in [
        "min ms",
        "mean ms",
        "p99 ms",
        "p99.9 ms",
        "p99.99 ms",
        "max ms",
    ] {
        assert!(all.contains(column), "{all}");
    }
    let (code, out, _) = mobistack(&[
        "run",
        "demo",
        "--variant",
        "fg-first",
        "--percentiles",
        "p99.99,min",
    ]);
    assert_eq!(code, 0);
    let chosen = header(&out);
    assert!(
        chosen.contains("min ms  p99.99 ms") && !chosen.contains("mean"),
        "{chosen}"
    );
    let (code, _, err) = mobistack(&["run", "demo", "--percentiles", "p42"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown statistic `p42`"), "{err}");
}

/// Whether a program of the Debian `blktrace` package is installed.
fn have(program: &str) -> bool {
    Command::new(program)
        .arg("-V")
        .output()
        .is_ok_and(|out| out.status.success() || !out.stdout.is_empty() || !out.stderr.is_empty())
}

#[test]
fn run_writes_binary_blktrace_that_blkparse_and_btt_read() {
    let base = std::env::temp_dir().join(format!("mobistack-bin-{}", std::process::id()));
    let name = base.to_str().unwrap();
    let binary = format!("{name}.blktrace.0");
    let (code, _, err) = mobistack(&[
        "run",
        "fg-read-bg-write",
        "--variant",
        "cfq",
        "--blktrace",
        name,
    ]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(name).unwrap();
    let bytes = std::fs::read(&binary).unwrap();
    // The binary decodes (pure Rust, no blktrace needed) to the same events as the text.
    let records = mobistack::block::blktrace::decode_binary(&bytes).unwrap();
    let events: Vec<_> = records
        .iter()
        .filter(|r| r.action & (1 << 26) == 0)
        .collect();
    assert_eq!(events.len(), text.lines().count());
    assert!(
        events.iter().all(|r| r.device == 179 << 20),
        "eMMC is mmcblk0, 179:0"
    );
    for (i, r) in events.iter().enumerate() {
        assert_eq!(r.sequence as usize, i + 1);
    }
    for letter in [" Q ", " G ", " P ", " U ", " I ", " D ", " C ", " M "] {
        assert!(text.contains(letter), "no {letter} event in the trace");
    }
    if !have("blkparse") || !have("btt") {
        eprintln!("note: blkparse/btt not installed (Debian package `blktrace`): skipping the check with them");
    } else {
        // blkparse prints exactly the text mobistack wrote (the trace starts at time 0).
        let out = Command::new("blkparse")
            .args(["-i", name])
            .output()
            .unwrap();
        assert!(out.status.success());
        let parsed = String::from_utf8_lossy(&out.stdout);
        let parsed_events: Vec<&str> = parsed
            .lines()
            .take_while(|l| !l.starts_with("CPU0"))
            .collect();
        let written: Vec<&str> = text.lines().collect();
        assert_eq!(parsed_events, written, "blkparse reads the binary back");
        assert!(parsed.contains("Skips: 0 forward"), "{parsed}");
        // btt matches queue to completion.
        let out = Command::new("btt").args(["-i", &binary]).output().unwrap();
        let report = String::from_utf8_lossy(&out.stdout);
        let q2c = report
            .lines()
            .find(|l| l.starts_with("Q2C"))
            .unwrap_or_else(|| panic!("no Q2C in btt's report:\n{report}"));
        let n: u64 = q2c.split_whitespace().last().unwrap().parse().unwrap();
        assert!(n > 1000, "{q2c}");
    }
    std::fs::remove_file(name).ok();
    std::fs::remove_file(&binary).ok();
}

#[test]
fn blktrace_records_ufs_as_a_scsi_disk() {
    let source = include_str!("../scenarios/fg-read-bg-write.toml").replacen(
        "profile = \"emmc-5.1\"",
        "profile = \"ufs-2.1\"",
        1,
    );
    let path = scenario_file("ufs-trace", &source);
    let base = std::env::temp_dir().join(format!("mobistack-ufs-{}", std::process::id()));
    let name = base.to_str().unwrap();
    let (code, _, err) = mobistack(&[
        "run",
        path.to_str().unwrap(),
        "--variant",
        "noop",
        "--blktrace",
        name,
    ]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(name).unwrap();
    assert!(text.starts_with("  8,0 "), "{}", &text[..80]);
    let bytes = std::fs::read(format!("{name}.blktrace.0")).unwrap();
    let records = mobistack::block::blktrace::decode_binary(&bytes).unwrap();
    assert!(records.iter().all(|r| r.device == 8 << 20));
    for file in [name.to_string(), format!("{name}.blktrace.0")] {
        std::fs::remove_file(file).ok();
    }
    std::fs::remove_file(path).ok();
}

#[test]
fn blktrace_without_a_block_layer_is_an_error() {
    let base = std::env::temp_dir().join(format!("mobistack-none-{}", std::process::id()));
    let (code, _, err) = mobistack(&["run", "demo", "--blktrace", base.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("has no block layer to trace"), "{err}");
    assert!(!base.exists(), "no file is left behind");
}

#[test]
fn an_unwritable_output_is_reported_before_the_simulation() {
    // The livelock scenario would run for seconds and fail; the bad path must be found first.
    let path = scenario_file(
        "unwritable",
        "name = \"hang\"\nduration = \"1s\"\n[[app]]\nname = \"reader\"\n[app.workload.file-read]\npath = \"/sdcard/small.db\"\nfile_size = \"64KiB\"\npattern = \"random\"\n",
    );
    let file = path.to_str().unwrap();
    for option in ["--out", "--blktrace"] {
        let started = std::time::Instant::now();
        let (code, _, err) = mobistack(&["run", file, option, "/nonexistent-dir/out"]);
        assert_eq!(code, 2, "{option}: {err}");
        assert!(err.contains("cannot write /nonexistent-dir/out"), "{err}");
        assert!(
            !err.contains("livelock"),
            "{option}: the simulation ran first: {err}"
        );
        assert!(started.elapsed().as_secs() < 2, "{option}");
    }
    // fio too.
    let (code, _, err) = mobistack(&[
        "fio",
        "examples/fio/fg_read_bg_write.fio",
        "--blktrace",
        "/nonexistent-dir/trace",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cannot write /nonexistent-dir/trace"), "{err}");
    std::fs::remove_file(&path).ok();
}

#[test]
fn a_run_that_would_not_fit_in_memory_stops_before_it_starts() {
    let out = Command::new(env!("CARGO_BIN_EXE_mobistack"))
        .args(["run", "bg-write-fg-read", "--threads", "2"])
        .env("MOBISTACK_MEMORY_LIMIT", "40MiB")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("these runs need about"), "{err}");
    assert!(err.contains("has 40.00 MiB available"), "{err}");
    assert!(out.stdout.is_empty(), "nothing ran");
}

#[test]
fn device_outputs_cite_sources_in_the_repository_and_mark_assumptions() {
    let (code, out, _) = mobistack(&["device", "list", "--json"]);
    assert_eq!(code, 0);
    let profiles: serde_json::Value = serde_json::from_str(&out).unwrap();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for profile in profiles.as_array().unwrap() {
        let file = profile["sources"].as_str().unwrap();
        assert!(root.join(file).exists(), "{file} is in the repository");
        let cited = profile["published"]["source"].as_str().unwrap_or("");
        for word in cited.split([' ', ',', '(', ')']) {
            if word.ends_with(".md") {
                assert!(
                    root.join(word).exists(),
                    "{}: cites {word}",
                    profile["name"]
                );
            }
        }
        assert!(profile["assumptions"]["flush_overhead"].is_string());
    }
    let (code, out, _) = mobistack(&["device", "latencies"]);
    assert_eq!(code, 0);
    assert!(out.contains("assumptions (no public figure"), "{out}");
    assert!(out.contains("flush_overhead 50 us"), "{out}");
}

#[test]
fn device_fit_fails_when_it_cannot_reach_a_target() {
    let fit = |seq_read: &str| {
        mobistack(&[
            "device",
            "fit",
            "--seq-read",
            seq_read,
            "--seq-write",
            "100MB/s",
            "--rand-read",
            "9000",
            "--rand-write",
            "10000",
        ])
    };
    let (code, out, err) = fit("5GB/s");
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("could not reach a target: seq read 512KiB"),
        "{err}"
    );
    assert!(
        out.contains("[stack.device.custom]"),
        "the best fit is still printed"
    );
    let (code, _, err) = fit("200MB/s");
    assert_eq!(code, 0, "{err}");
}

#[test]
fn run_writes_one_perfetto_trace_per_run_and_rejects_a_bad_window() {
    let base = std::env::temp_dir().join(format!("mobistack-run-{}.pftrace", std::process::id()));
    let base_text = base.to_str().unwrap();
    let (code, _, err) = mobistack(&[
        "run",
        "fg-read-bg-write",
        "--perfetto",
        base_text,
        "--perfetto-window",
        "..500ms",
        "--perfetto-max-events",
        "1000",
    ]);
    assert_eq!(code, 0, "{err}");
    for variant in ["noop", "deadline", "cfq", "mq-deadline", "noop+fg-aware"] {
        let path = format!("{base_text}.{variant}.1");
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        std::fs::remove_file(&path).ok();
        let trace = mobistack::report::perfetto::decode(&bytes).unwrap();
        assert!(trace.packet.iter().any(|p| p
            .track_event
            .as_ref()
            .is_some_and(|e| e.name.as_deref() == Some("read"))));
        assert!(err.contains(&format!("perfetto: {path}: ")), "{err}");
    }
    remove_outputs(&base);
    assert!(
        err.contains("the bound of 1000 records was reached"),
        "{err}"
    );
    for window in ["5s", "3s..1s", "1x..2s"] {
        let (code, _, err) = mobistack(&[
            "run",
            "fg-read-bg-write",
            "--perfetto",
            base_text,
            "--perfetto-window",
            window,
        ]);
        assert_eq!(code, 2, "{window}: {err}");
        assert!(err.contains("--perfetto-window"), "{err}");
    }
    let (code, _, err) = mobistack(&["run", "demo", "--perfetto-window", "1s..2s"]);
    assert_eq!(code, 2);
    assert!(err.contains("--perfetto"), "{err}");
}

#[test]
fn report_writes_the_html_of_a_results_file_and_refuses_other_files() {
    let dir = std::env::temp_dir();
    let id = std::process::id();
    let results = dir.join(format!("mobistack-report-{id}.json"));
    let html = dir.join(format!("mobistack-report-{id}.html"));
    let from_run = dir.join(format!("mobistack-report-run-{id}.html"));
    let (code, _, err) = mobistack(&[
        "run",
        "fg-read-bg-write",
        "--variant",
        "cfq",
        "--out",
        results.to_str().unwrap(),
        "--html",
        from_run.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("html: report written to"), "{err}");
    let (code, _, err) = mobistack(&[
        "report",
        results.to_str().unwrap(),
        "-o",
        html.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("1 variant(s), 1 run(s) of scenario `fg-read-bg-write`"),
        "{err}"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(
        page,
        std::fs::read_to_string(&from_run).unwrap(),
        "the same report both ways"
    );
    assert!(page.contains("data-variant=\"cfq\""));
    assert!(
        page.contains("[[variant]]"),
        "the built-in scenario's source is shown"
    );
    // Not a results file: exit 2 with the reason.
    std::fs::write(&results, "{\"schema\": \"something else\"}").unwrap();
    let (code, _, err) = mobistack(&[
        "report",
        results.to_str().unwrap(),
        "-o",
        html.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("schema `something else`"), "{err}");
    for path in [&results, &html, &from_run] {
        std::fs::remove_file(path).ok();
    }
}

#[test]
fn compare_shows_the_change_between_two_variants_and_its_reasons() {
    let results =
        std::env::temp_dir().join(format!("mobistack-compare-{}.json", std::process::id()));
    let file = results.to_str().unwrap();
    let (code, _, err) = mobistack(&["run", "fg-read-bg-write", "--out", file]);
    assert_eq!(code, 0, "{err}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&results).unwrap()).unwrap();
    let run = |variant: &str| {
        json["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["variant"] == variant)
            .unwrap()
            .clone()
    };
    let (noop, cfq) = (run("noop"), run("cfq"));
    let (code, text, err) = mobistack(&[
        "compare",
        &format!("{file}:noop"),
        &format!("{file}:cfq"),
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let comparison: serde_json::Value = serde_json::from_str(&text).unwrap();
    let read = comparison["ops"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["app"] == "gallery" && o["op"] == "read")
        .unwrap();
    for (side, result) in [("base", &noop), ("other", &cfq)] {
        let op = &result["apps"]["gallery"]["ops"]["read"];
        for stat in ["p50_ns", "p99_ns", "max_ns"] {
            assert_eq!(read[side][stat], op[stat], "{side} {stat}");
        }
    }
    let change = read["p99_change"].as_f64().unwrap();
    let expected = cfq["apps"]["gallery"]["ops"]["read"]["p99_ns"]
        .as_f64()
        .unwrap()
        / noop["apps"]["gallery"]["ops"]["read"]["p99_ns"]
            .as_f64()
            .unwrap()
        - 1.0;
    assert!((change - expected).abs() < 1e-9, "{change} vs {expected}");
    // The reasons: the largest change in blocked time per read first.
    let reasons = read["reasons"].as_array().unwrap();
    assert!(!reasons.is_empty());
    let first = reasons[0]["change_ns_per_op"].as_f64().unwrap().abs();
    assert!(reasons
        .iter()
        .all(|r| r["change_ns_per_op"].as_f64().unwrap().abs() <= first));
    // The table says the same.
    let (code, table, _) = mobistack(&["compare", &format!("{file}:noop"), &format!("{file}:cfq")]);
    assert_eq!(code, 0);
    let line = table
        .lines()
        .find(|l| l.starts_with("gallery ") && l.contains(" read "))
        .unwrap();
    assert!(
        line.contains(&format!("{:+.0}%", expected * 100.0)),
        "{line}"
    );
    assert!(
        line.contains(reasons[0]["reason"].as_str().unwrap()),
        "{line}"
    );
    // A file with several variants needs one named.
    let (code, _, err) = mobistack(&["compare", file, &format!("{file}:cfq")]);
    assert_eq!(code, 2);
    assert!(
        err.contains("several variants (noop, deadline, cfq"),
        "{err}"
    );
    let (code, _, err) = mobistack(&["compare", &format!("{file}:bfq"), file]);
    assert_eq!(code, 2);
    assert!(err.contains("no variant `bfq`"), "{err}");
    std::fs::remove_file(&results).ok();
}

#[test]
fn run_csv_writes_tidy_files_that_pandas_reads() {
    let dir = std::env::temp_dir().join(format!("mobistack-csv-{}", std::process::id()));
    let results = std::env::temp_dir().join(format!("mobistack-csv-{}.json", std::process::id()));
    let (code, _, err) = mobistack(&[
        "run",
        "fg-read-bg-write",
        "--csv",
        dir.to_str().unwrap(),
        "--out",
        results.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("csv: latency.csv, ops.csv, waits.csv, throughput.csv written"),
        "{err}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&results).unwrap()).unwrap();
    let latency = std::fs::read_to_string(dir.join("latency.csv")).unwrap();
    let mut lines = latency.lines();
    assert_eq!(
        lines.next(),
        Some("scenario,variant,seed,app,op,percentile,latency_ns")
    );
    // Seven percentiles per variant x seed x app x op, each the results' value.
    let mut expected_rows = 0;
    for run in json["runs"].as_array().unwrap() {
        for (app, result) in run["apps"].as_object().unwrap() {
            for (op, summary) in result["ops"].as_object().unwrap() {
                expected_rows += 7;
                let row = format!(
                    "fg-read-bg-write,{},1,{app},{op},99,{}",
                    run["variant"].as_str().unwrap(),
                    summary["p99_ns"]
                );
                assert!(latency.lines().any(|l| l == row), "{row}");
            }
        }
    }
    assert_eq!(lines.count(), expected_rows);
    let waits = std::fs::read_to_string(dir.join("waits.csv")).unwrap();
    assert!(waits
        .lines()
        .any(|l| l.contains(",gallery,read,submit_bio_wait,block,")));

    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_string());
    let has_pandas = Command::new(&python)
        .args(["-c", "import pandas, matplotlib"])
        .output()
        .is_ok_and(|o| o.status.success());
    if has_pandas {
        let plot = dir.join("percentiles.png");
        let out = Command::new(&python)
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/scripts/analysis_example.py"
            ))
            .arg(&dir)
            .args(["--out", plot.to_str().unwrap()])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("submit_bio_wait"), "{text}");
        assert!(std::fs::metadata(&plot).unwrap().len() > 1000);
    } else {
        eprintln!("skipped the pandas example: `{python}` has no pandas and matplotlib (pip install pandas matplotlib)");
    }
    std::fs::remove_dir_all(&dir).ok();
    std::fs::remove_file(&results).ok();
}

#[test]
fn tune_subregions_sweeps_the_device_and_names_a_bad_profile() {
    let (code, json, _) = mobistack(&["tune-subregions", "--device", "ufs-2.1", "--json"]);
    assert_eq!(code, 0);
    let value: serde_json::Value = serde_json::from_str(&json).expect("one JSON object");
    let points = value["points"].as_array().unwrap();
    assert_eq!(points.len(), 24);
    // More threads never read slower, and more than one thread reads faster than one.
    let rate = |region: u64, threads: u64| {
        points
            .iter()
            .find(|p| p["region_bytes"] == region && p["threads"] == threads)
            .unwrap()["iops"]
            .as_f64()
            .unwrap()
    };
    let region = 2u64 << 30;
    assert!(rate(region, 8) > 2.0 * rate(region, 1));
    assert!(rate(region, 32) >= 0.99 * rate(region, 16));
    let chosen = value["chosen_batch"].as_u64().unwrap();
    assert!((1..=32).contains(&chosen));
    let (code, _, err) = mobistack(&["tune-subregions", "--device", "floppy"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("floppy"), "{err}");
}

#[test]
fn crashcheck_reports_as_json_and_exits_3_on_violations() {
    // The negative control loses fsynced data: violations, exit status 3.
    let (code, out, _) = mobistack(&[
        "crashcheck",
        "crash/sqlite",
        "--variant",
        "ext4-nobarrier",
        "--points",
        "60",
        "--json",
    ]);
    assert_eq!(code, 3, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let r = &v["variants"][0];
    assert_eq!(r["variant"], "ext4-nobarrier");
    assert_eq!(r["points"], 60);
    assert!(
        r["fsync_durability"]["violations"].as_u64().unwrap() > 0,
        "{r}"
    );
    assert!(r["check_seconds"].as_f64().is_some());
    // Bad input: exit 2, naming the problem.
    let (code, _, err) = mobistack(&["crashcheck", "crash/sqlite", "--points", "0"]);
    assert_eq!(code, 2);
    assert!(err.contains("--points"), "{err}");
    let (code, _, err) = mobistack(&["crashcheck", "crash/sqlite", "--variant", "nope"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("no variant `nope`") && err.contains("mobifs-log-truncate"),
        "{err}"
    );
}

#[test]
fn a_sql_statement_sqlite_refuses_exits_4_and_says_which() {
    let body = r#"name = "badsql"
duration = "5s"
end = "apps-done"
[[app]]
name = "db"
role = "foreground"
[app.workload.sqlite]
database = "/data/data/x/databases/a.db"
statements = ["SELEKT * FROM nowhere"]
"#;
    let path = scenario_file("badsql", body);
    let (code, out, err) = mobistack(&["run", path.to_str().unwrap()]);
    std::fs::remove_file(&path).ok();
    assert_eq!(code, 4, "{out}{err}");
    assert!(
        out.contains(
            "statement 1 of `statements` (`SELEKT * FROM nowhere`), iteration 0: near \"SELEKT\": syntax error"
        ),
        "{out}"
    );
    assert!(
        err.contains("stopped before their workload's end: db"),
        "{err}"
    );
}

#[test]
fn a_dash_means_standard_output_for_out_html_and_report_and_is_refused_elsewhere() {
    let dir = std::env::temp_dir().join(format!("mobistack-dash-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let run_in = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_mobistack"))
            .args(args)
            .current_dir(&dir)
            .output()
            .expect("runs");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // `--out -` wrote a file named "-".
    let (code, out, err) = run_in(&["run", "demo", "--variant", "fg-first", "--out", "-"]);
    assert_eq!(code, 0, "{err}");
    let value: serde_json::Value = serde_json::from_str(&out).expect("only the JSON on stdout");
    assert_eq!(value["schema"], "mobistack.results");
    assert!(!dir.join("-").exists(), "no file named -");
    let (code, out, err) = run_in(&["run", "demo", "--variant", "fg-first", "--html", "-"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("<!DOCTYPE html>"),
        "{}",
        &out[..out.len().min(200)]
    );
    let (code, _, err) = run_in(&["run", "demo", "--out", "-", "--html", "-"]);
    assert_eq!(code, 2);
    assert!(err.contains("only one output can be `-`"), "{err}");
    for option in ["--csv", "--blktrace", "--perfetto"] {
        let (code, _, err) = run_in(&["run", "fg-read-bg-write", "--variant", "cfq", option, "-"]);
        assert_eq!(code, 2, "{option}: {err}");
        assert!(
            err.contains(option) && err.contains("standard output"),
            "{err}"
        );
    }
    assert!(!dir.join("-").exists(), "no file or directory named -");
    let results = dir.join("r.json");
    let (code, _, err) = run_in(&[
        "run",
        "demo",
        "--variant",
        "fg-first",
        "--out",
        results.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = run_in(&["report", results.to_str().unwrap(), "-o", "-"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("<!DOCTYPE html>"));
    assert!(!dir.join("-").exists());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_counter_period_past_the_trace_bound_is_refused_before_the_run() {
    // `--perfetto-counter-period 1ns` made a 2 s run take minutes with no word.
    let trace =
        std::env::temp_dir().join(format!("mobistack-period-{}.pftrace", std::process::id()));
    let started = std::time::Instant::now();
    let (code, _, err) = mobistack(&[
        "run",
        "demo",
        "--variant",
        "fg-first",
        "--perfetto",
        trace.to_str().unwrap(),
        "--perfetto-counter-period",
        "1ns",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    assert!(
        err.contains("--perfetto-counter-period 1ns samples the counters 10000000000 times over the 10 s traced, more than the 1000000 records a trace keeps (--perfetto-max-events): use a period of at least 10000 ns"),
        "{err}"
    );
    assert!(!trace.exists());
}

#[test]
fn fio_exits_2_for_a_bad_job_and_1_for_a_run_that_could_not_finish() {
    let dir = std::env::temp_dir().join(format!("mobistack-fio-exit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Bad input: an unknown rw.
    let bad = dir.join("bad.fio");
    std::fs::write(&bad, "[w]\nrw=sideways\nsize=1m\n").unwrap();
    let (code, _, err) = mobistack(&["fio", bad.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    // A run that cannot finish: four buffered 30 GiB files fill the file system, and fio's
    // layout of the next one fails with ENOSPC, as real fio's does (exit 1, not bad input).
    let full = dir.join("full.fio");
    std::fs::write(&full, "[w]\nrw=write\nbs=1m\nsize=30g\nnumjobs=4\n").unwrap();
    let (code, _, err) = mobistack(&["fio", full.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("ENOSPC"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn replay_refuses_a_time_scale_with_a_queue_depth_instead_of_ignoring_it() {
    let trace = std::env::temp_dir().join(format!("mobistack-{}-ts.trace", std::process::id()));
    std::fs::write(&trace, "0.0 0 100 8 1\n2.0 0 200 8 0\n").unwrap();
    let path = trace.to_str().unwrap();
    let (code, _, err) = mobistack(&["replay", path, "--time-scale", "2", "--queue-depth", "4"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--time-scale") && err.contains("--queue-depth"),
        "{err}"
    );
    let (code, _, err) = mobistack(&["replay", path, "--queue-depth", "4"]);
    assert_eq!(code, 0, "{err}");
    std::fs::remove_file(&trace).ok();
}
