//! `mobistack fio`: fio's own output formats (text, JSON, json+) and job semantics (trims,
//! buffered I/O through the page cache, a required size).

mod common;
use common::mobistack;

use mobistack::dev::fixed::FixedLatencyDevice;
use mobistack::workload::fio::{run_fio_file, FioOptions};
use serde_json::Value;
use std::collections::BTreeSet;
use std::process::Command;

const REAL_FIO: &str = include_str!("data/fio-3.33-null-randrw.json");

fn device() -> Box<FixedLatencyDevice> {
    // Four slots, 100 us per command plus 200 MB/s.
    Box::new(FixedLatencyDevice::new(4, 100_000, 200_000_000))
}

fn run(text: &str) -> mobistack::workload::fio::FioReport {
    run_fio_file(text, device(), "noop", FioOptions::default()).unwrap()
}

/// Every key path of a JSON value (arrays by their first element).
fn key_paths(value: &Value, path: &str, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let here = format!("{path}/{key}");
                out.insert(here.clone());
                // The contents of these maps are data (percentiles, bins, options), not schema.
                if !matches!(key.as_str(), "percentile" | "bins" | "job options") {
                    key_paths(child, &here, out);
                }
            }
        }
        Value::Array(items) => {
            if let Some(first) = items.first() {
                key_paths(first, &format!("{path}[]"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn json_plus_has_every_field_of_fios_own_output() {
    // fio 3.33's json+ of a randrw job (ioengine=null), next to mobistack's of the same job.
    let real: Value = serde_json::from_str(REAL_FIO).unwrap();
    let report = run("[randrw]\ndirect=1\nrw=randrw\nbs=4k\nsize=1m\n");
    let ours = report.json(true);
    let (mut want, mut have) = (BTreeSet::new(), BTreeSet::new());
    key_paths(&real, "", &mut want);
    key_paths(&ours, "", &mut have);
    let missing: Vec<&String> = want.difference(&have).collect();
    assert!(
        missing.is_empty(),
        "fields fio has and mobistack lacks: {missing:?}"
    );
    let job = &ours["jobs"][0];
    assert_eq!(job["jobname"], "randrw");
    for direction in ["read", "write"] {
        let d = &job[direction];
        let ios = d["total_ios"].as_u64().unwrap();
        assert!(ios > 0, "{direction}");
        assert_eq!(d["io_bytes"].as_u64().unwrap(), ios * 4096);
        assert_eq!(d["io_kbytes"].as_u64().unwrap(), ios * 4);
        assert_eq!(
            d["bw"].as_u64().unwrap(),
            d["bw_bytes"].as_u64().unwrap() / 1024
        );
        let clat = &d["clat_ns"];
        assert_eq!(clat["N"].as_u64().unwrap(), ios);
        assert!(clat["min"].as_u64().unwrap() <= clat["max"].as_u64().unwrap());
        // Percentiles keyed as fio keys them, bins summing to N.
        // fio reports a bucket's middle: within 1/128 of the latencies.
        let p99 = clat["percentile"]["99.000000"].as_u64().unwrap() as f64;
        let min = clat["min"].as_u64().unwrap() as f64;
        let max = clat["max"].as_u64().unwrap() as f64;
        assert!(
            p99 >= min * 127.0 / 128.0 && p99 <= max * 129.0 / 128.0,
            "{p99}"
        );
        let binned: u64 = clat["bins"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum();
        assert_eq!(binned, ios);
        // psync: no submission latency, clat = lat.
        assert_eq!(d["slat_ns"]["N"], 0);
        assert_eq!(d["lat_ns"]["mean"], clat["mean"]);
    }
    assert_eq!(job["trim"]["total_ios"], 0);
    assert_eq!(ours["fio version"], "fio-3.33");
}

#[test]
fn the_text_output_shows_slat_clat_lat_and_bandwidth_as_fio_does() {
    let report = run("[w]\ndirect=1\nrw=write\nbs=64k\nsize=8m\nioengine=libaio\niodepth=8\n");
    let text = report.text();
    for needle in [
        "w: (g=0): rw=write, bs=(R) 65536B-65536B",
        "w: (groupid=0, jobs=1): err= 0: pid=1000",
        "  write: IOPS=",
        "    slat (",
        "    clat (",
        "     lat (",
        "    clat percentiles (",
        " 99.00th=[",
        "  IO depths    : ",
        "     issued rwts: total=0,128,0,0",
        "Run status group 0 (all jobs):",
        "  WRITE: bw=",
    ] {
        assert!(text.contains(needle), "{needle:?} in\n{text}");
    }
    // Bandwidth in MiB/s with MB/s beside it, as fio labels them.
    let line = text
        .lines()
        .find(|l| l.starts_with("  write: IOPS="))
        .unwrap();
    assert!(line.contains("MiB/s (") && line.contains("MB/s)"), "{line}");
}

#[test]
fn randtrim_reports_trims() {
    let report = run("[t]\ndirect=1\nrw=randtrim\nbs=64k\nsize=4m\n");
    let trims = &report.jobs[0].stats.directions[2];
    assert_eq!(trims.ios, 64);
    assert_eq!(
        report.jobs[0].stats.directions[1].ios, 0,
        "not counted as writes"
    );
    let json = report.json(false);
    assert_eq!(json["jobs"][0]["trim"]["total_ios"], 64);
    assert_eq!(json["jobs"][0]["write"]["total_ios"], 0);
    assert!(report.text().contains("  trim: IOPS="), "{}", report.text());
    assert!(report.text().contains("   TRIM: bw="));
    // A trim needs the raw device.
    let error = run_fio_file(
        "[t]\nrw=trim\nsize=1m\n",
        device(),
        "noop",
        FioOptions::default(),
    )
    .err();
    assert!(error.unwrap().contains("needs `direct`=1"));
}

#[test]
fn direct_0_runs_buffered_through_the_page_cache() {
    // Read the same 256 KiB twice: buffered, the second pass is served from the page cache
    // (and readahead makes the first pass fewer, larger requests); direct, every read is a
    // request.
    let options =
        |direct: u8| format!("direct={direct}\nrw=read\nbs=4k\nsize=256k\nfilename=shared\n");
    let twice = |direct: u8| {
        format!(
            "[r]\n{}\n[again]\nstonewall\n{}",
            options(direct),
            options(direct)
        )
    };
    let buffered = run(&twice(0));
    let direct = run(&twice(1));
    for report in [&buffered, &direct] {
        assert_eq!(report.jobs.len(), 2);
        assert!(report.jobs.iter().all(|j| j.stats.directions[0].ios == 64));
    }
    assert_eq!(direct.queue.requests, 128, "O_DIRECT: one request per read");
    assert!(
        buffered.queue.requests < 16,
        "the page cache: {} requests for 128 reads",
        buffered.queue.requests
    );
    let second = &buffered.jobs[1].stats;
    // The second pass reads only cached pages: 64 reads cost CPU time (a system call and a
    // 4 KiB copy each, `[stack.cpu]`), not a device's.
    let pass = second.end_ns - second.start_ns;
    assert!(
        pass > 0 && pass < 1_000_000,
        "the second pass reads only cached pages: {pass} ns"
    );
    // fio's default is buffered.
    let default = run("[r]\nrw=read\nbs=4k\nsize=64k\n");
    assert!(!default.jobs[0].job.direct);
}

fn job_file(name: &str, text: &str) -> std::path::PathBuf {
    let path =
        std::env::temp_dir().join(format!("mobistack-fio-{}-{name}.fio", std::process::id()));
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_job_without_size_is_an_error_as_in_fio() {
    let path = job_file("nosize", "[a]\ndirect=1\nrw=randread\n");
    let (code, _, err) = mobistack(&["fio", path.to_str().unwrap()]);
    std::fs::remove_file(&path).ok();
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("you need to specify size="), "{err}");
}

#[test]
fn fios_jsonplus_clat2csv_reads_the_json_plus_output() {
    let path = job_file("plus", "[a]\ndirect=1\nrw=randread\nbs=4k\nsize=1m\n");
    let (code, json, err) = mobistack(&["fio", path.to_str().unwrap(), "--output-format=json+"]);
    std::fs::remove_file(&path).ok();
    assert_eq!(code, 0, "{err}");
    let value: Value = serde_json::from_str(&json).expect("one JSON document");
    assert!(value["jobs"][0]["read"]["clat_ns"]["bins"].is_object());
    let (code, plain, _) = mobistack(&["fio", "examples/fio/fg_read_bg_write.fio", "--json"]);
    assert_eq!(code, 0);
    let plain: Value = serde_json::from_str(&plain).unwrap();
    assert!(
        plain["jobs"][0]["read"]["clat_ns"]["bins"].is_null(),
        "bins only with json+"
    );
    let (code, _, err) = mobistack(&[
        "fio",
        "examples/fio/fg_read_bg_write.fio",
        "--output-format=xml",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("expected normal, json or json+"), "{err}");
    let script = "fio_jsonplus_clat2csv";
    if Command::new(script).arg("-h").output().is_err() {
        eprintln!(
            "note: {script} not installed (Debian package `fio`): skipping the check with it"
        );
        return;
    }
    let dir = std::env::temp_dir().join(format!("mobistack-clat2csv-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("out.json");
    std::fs::write(&input, &json).unwrap();
    let csv = dir.join("out.csv");
    for extra in [None, Some("--validate")] {
        let mut command = Command::new(script);
        command.arg(&input).arg(&csv);
        if let Some(flag) = extra {
            command.arg(flag);
        }
        let out = command.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let rows = std::fs::read_to_string(dir.join("out_job0.csv")).unwrap();
    assert!(rows.lines().count() >= 2, "{rows}");
    assert!(
        rows.contains(", 256, 256, 1.0,"),
        "every read in the CSV: {rows}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// Issue 40: a buffered sequential write (fio's most common job) ended the run with the page
/// cache's writeback still in flight, and an assertion panicked. fio exits without waiting for
/// writeback (`end_fsync=0`): the report is the job's own I/O, and what the kernel still had to
/// write is counted, not waited for.
#[test]
fn a_buffered_write_ends_with_the_writeback_still_in_flight_counted() {
    let report = run("[w]\nrw=write\nbs=128k\nsize=256m\n");
    let write = &report.jobs[0].stats.directions[1];
    assert_eq!((write.ios, write.bytes), (2048, 256 << 20));
    let left = report.left_at_end;
    assert!(
        left.bios_in_flight + left.dirty_pages > 0,
        "256 MiB written through the page cache: {left:?}"
    );
    let text = report.text();
    assert!(text.contains("fio exits without waiting"), "{text}");
    let json = report.json(false);
    assert_eq!(
        json["mobistack"]["left_at_end"]["dirty_pages"],
        left.dirty_pages
    );
}

#[test]
fn a_time_based_buffered_write_ends_cleanly() {
    let report = run("[w]\nrw=write\nbs=4k\nsize=1g\nruntime=1\ntime_based\n");
    let stats = &report.jobs[0].stats;
    assert!(stats.directions[1].ios > 0);
    assert!(stats.end_ns - stats.start_ns >= 1_000_000_000);
}

/// `offset` in bytes is used as given (fio's HOWTO: only a percentage is aligned): a buffered
/// job reads at offset 1 (and its readahead may still be in flight when it ends); O_DIRECT
/// needs sector-aligned offsets (Linux returns EINVAL), so a direct job is an error naming
/// `offset`.
#[test]
fn an_unaligned_offset_runs_buffered_and_is_an_error_with_direct() {
    let report = run("[r]\nrw=randread\nbs=4k\noffset=1\nsize=1m\n");
    assert_eq!(report.jobs[0].stats.directions[0].ios, 256);
    let error = run_fio_file(
        "[r]\ndirect=1\nrw=randread\nbs=4k\noffset=1\nsize=1m\n",
        device(),
        "noop",
        FioOptions::default(),
    )
    .err()
    .unwrap();
    assert!(
        error.contains("`offset`") && error.contains("512"),
        "{error}"
    );
}

/// Issue 40: `fio --help` had no help for `--seed`, and listed four schedulers of the seven
/// `--elevator` accepts. The list now comes from the block layer's own.
#[test]
fn the_help_documents_every_option_and_lists_every_elevator() {
    let (code, help, _) = mobistack(&["fio", "--help"]);
    assert_eq!(code, 0);
    let seed = help.lines().find(|l| l.contains("--seed")).unwrap();
    assert!(seed.contains("Seed of the run"), "{seed}");
    let elevator = help.lines().find(|l| l.contains("--elevator")).unwrap();
    for name in mobistack::block::elevator::ELEVATOR_NAMES {
        assert!(elevator.contains(name), "{name} missing from {elevator}");
    }
    let path = job_file("elevator", "[r]\ndirect=1\nrw=randread\nbs=4k\nsize=64k\n");
    let (code, out, err) = mobistack(&["fio", "--elevator", "kyber", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("under kyber"), "{out}");
    let (code, _, err) = mobistack(&["fio", "--elevator", "anticipatory", path.to_str().unwrap()]);
    std::fs::remove_file(&path).ok();
    assert_eq!(code, 2);
    assert!(err.contains("subregion"), "{err}");
}

/// Edge values of job files run or are errors naming the option, never a panic: fio's
/// `runtime=0` and `rate=0` mean no limit; `bs=0`, a size below `bs`, an `iodepth` or
/// `numjobs` beyond the bounds are errors.
#[test]
fn edge_values_of_job_files_run_or_are_errors_naming_the_option() {
    let base = "[j]\ndirect=1\nrw=randread\nbs=4k\nsize=64k\n";
    for (extra, ios) in [
        ("runtime=0\n", 16),
        ("rate=0\n", 16),
        ("iodepth=4096\nioengine=libaio\n", 16),
    ] {
        let report = run(&format!("{base}{extra}"));
        assert_eq!(report.jobs[0].stats.directions[0].ios, ios, "{extra}");
    }
    for (extra, option) in [
        ("bs=0\n", "bs"),
        ("bs=128k\n", "`size`"),
        ("iodepth=4097\n", "iodepth"),
        ("numjobs=100000\n", "numjobs"),
        ("runtime=0\ntime_based\n", "runtime"),
        ("offset=100\n", "`offset`"),
    ] {
        let error = run_fio_file(
            &format!("{base}{extra}"),
            device(),
            "noop",
            FioOptions::default(),
        )
        .err()
        .unwrap_or_else(|| panic!("{extra} ran"));
        assert!(error.contains(option), "{extra}: {error}");
    }
}
