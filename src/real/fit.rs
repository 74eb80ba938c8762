//! `mobistack device fit --measure`: measures the device real mode runs on (a loop device with
//! direct I/O over an image on this machine's disk, as `mobistack real` makes it) with a few
//! fio-like probes and fits a device profile to them, printed as a scenario `[stack.device]`
//! table, so the simulated side of `check-real` runs above a device that matches the real one.
//!
//! Probes (each `O_DIRECT` on the bare loop device, its queue under `none`; a queue depth of N
//! is N threads each doing one `pread` / `pwrite` at a time, as fio's psync with `numjobs=N`):
//! - 512 KiB sequential writes over the first half of the sparse image at depth 32 (so the
//!   reads after it read data, not holes), then 512 KiB sequential reads at depth 32;
//! - 4 KiB random reads (of the first half) and writes (to the second half, mostly blocks
//!   written for the first time, which the host file system allocates, as for a real run's
//!   new files on its fresh sparse image) at depth 1 and at depth 32, a few seconds each;
//! - cache flushes (`fsync` of the block device: `blkdev_fsync` -> `blkdev_issue_flush`, which
//!   the loop driver turns into an `fsync` of the image file, drivers/block/loop.c
//!   `lo_req_flush`): after one 4 KiB write (the pattern of a journal commit: a commit block,
//!   then the flush after it on a device without FUA), on a clean device, and after 1 MiB of
//!   random 4 KiB writes.
//!
//! The fit (src/dev/bench.rs `fit_profile_at`) starts from the built-in template closest to the
//! measured sequential read (`fit_template`) and scales its calibrated parameters until the
//! model's 512 KiB sequential figures at depth 32 and its 4 KiB random IOPS at depth 1 match
//! the measured ones: depth 1 because the validation scenarios' latencies (an fsync's chain of
//! dependent writes and flushes, a reader's 4 KiB reads) are depth-1 latencies. The median
//! flush after one 4 KiB write becomes `flush_overhead` (the template's is an assumption,
//! 50 us; a loop device's flush is an `fsync` of a file on the host). `fua` is the loop
//! queue's own (`queue/fua`: 0). The depth-32 random figures and the other flushes are printed
//! beside the fitted model's as a check, not fitted. On the validation VM a clean device's
//! flush (1.9-8 ms over runs) is much slower than one after writes (0.1-0.2 ms); not
//! explained (the host's `fsync` of the image file; the hypervisor's flush).

use super::machine::Machine;
use super::RealError;
use crate::dev::bench::{
    bench_rows, fit_profile_at, fit_template, flush_discard_latencies, vendor_queue_depth,
    BenchSize, Pattern,
};
use crate::dev::profile::{builtin_profile, DeviceProfile, Published};
use crate::sim::Rng;
use serde_json::{json, Value};
use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

/// How to measure.
#[derive(Debug, Clone)]
pub struct MeasureOptions {
    /// Where the image goes (default $MOBISTACK_REAL_DIR, else /tmp: where `real` puts its).
    pub dir: PathBuf,
    /// The image's size (default 2 GiB): the sequential probes cover it, the random ones too.
    pub size: u64,
    /// Wall time of each random probe, in ns (default 3 s).
    pub probe_ns: u64,
    /// Measurements, each on a fresh loop device; each figure is their median (default 3: a
    /// machine shared with other work measures differently from minute to minute).
    pub repetitions: usize,
}

impl Default for MeasureOptions {
    fn default() -> Self {
        MeasureOptions {
            dir: std::env::var_os("MOBISTACK_REAL_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(std::env::temp_dir),
            size: 2 << 30,
            probe_ns: 3_000_000_000,
            repetitions: 3,
        }
    }
}

/// One probe's outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct ProbeResult {
    pub queue_depth: usize,
    pub ops: u64,
    pub elapsed_ns: u64,
    pub mbps: f64,
    pub iops: f64,
    pub mean_latency_ns: f64,
}

/// What the probes measured.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Measured {
    pub seq_read: ProbeResult,
    pub seq_write: ProbeResult,
    pub rand_read_qd1: ProbeResult,
    pub rand_write_qd1: ProbeResult,
    pub rand_read_qd32: ProbeResult,
    pub rand_write_qd32: ProbeResult,
    /// Median of the flushes of a clean device, ns.
    pub flush_clean_ns: u64,
    /// Median of the flushes after one random 4 KiB write, ns (fitted as `flush_overhead`).
    pub flush_after_write_ns: u64,
    /// Median of the flushes after 1 MiB of random 4 KiB writes, ns.
    pub flush_after_writes_ns: u64,
    /// The loop queue's `fua`.
    pub fua: bool,
    /// What was measured: the loop device, its backing, the kernel, the date.
    pub source: String,
}

/// The kind of probe.
#[derive(Debug, Clone, Copy)]
struct Probe {
    write: bool,
    sequential: bool,
    bytes: u64,
    depth: usize,
}

/// Runs `probe` on `region` (`(start, bytes)`) of `file` until `ops` are done or `limit_ns`
/// passed: `depth` threads, each one I/O at a time.
fn run_probe(
    file: &File,
    region: (u64, u64),
    probe: Probe,
    ops: u64,
    limit_ns: u64,
) -> ProbeResult {
    let (base, region) = region;
    let next = AtomicU64::new(0);
    let latency_sum = AtomicU64::new(0);
    let done = AtomicU64::new(0);
    let start = super::exec::now_ns();
    let slots = region / probe.bytes;
    std::thread::scope(|scope| {
        for thread in 0..probe.depth {
            let (next, latency_sum, done) = (&next, &latency_sum, &done);
            scope.spawn(move || {
                let mut rng = Rng::named(1, &format!("device-fit/{thread}"));
                let mut buffer = vec![0x5au8; probe.bytes as usize + 4096];
                let skew = buffer.as_ptr().align_offset(4096);
                let buffer = &mut buffer[skew..skew + probe.bytes as usize];
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= ops || super::exec::now_ns() - start >= limit_ns {
                        break;
                    }
                    let slot = if probe.sequential {
                        i % slots
                    } else {
                        rng.below(slots)
                    };
                    let offset = base + slot * probe.bytes;
                    let t = super::exec::now_ns();
                    let result = if probe.write {
                        file.write_at(buffer, offset)
                    } else {
                        file.read_at(buffer, offset)
                    };
                    if result.is_err() {
                        break;
                    }
                    latency_sum.fetch_add(super::exec::now_ns() - t, Ordering::Relaxed);
                    done.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    let elapsed_ns = (super::exec::now_ns() - start).max(1);
    let ops = done.load(Ordering::Relaxed);
    let seconds = elapsed_ns as f64 / 1e9;
    ProbeResult {
        queue_depth: probe.depth,
        ops,
        elapsed_ns,
        mbps: (ops * probe.bytes) as f64 / 1e6 / seconds,
        iops: ops as f64 / seconds,
        mean_latency_ns: latency_sum.load(Ordering::Relaxed) as f64 / ops.max(1) as f64,
    }
}

fn median(mut values: Vec<u64>) -> u64 {
    values.sort_unstable();
    values.get(values.len() / 2).copied().unwrap_or(0)
}

/// Times `count` flushes of `file`, each after `before` (ns each, median).
fn flushes(file: &File, count: usize, mut before: impl FnMut()) -> Result<u64, RealError> {
    let mut times = Vec::with_capacity(count);
    for _ in 0..count {
        before();
        let t = super::exec::now_ns();
        file.sync_all()
            .map_err(|e| RealError::new(format!("fsync of the loop device: {e}")))?;
        times.push(super::exec::now_ns() - t);
    }
    Ok(median(times))
}

/// The median of each figure over `options.repetitions` measurements (a probe's result is the
/// repetition with the median rate).
pub fn measure(options: &MeasureOptions) -> Result<Measured, RealError> {
    let runs = (0..options.repetitions.max(1))
        .map(|_| measure_once(options))
        .collect::<Result<Vec<_>, _>>()?;
    let probe = |get: fn(&Measured) -> ProbeResult| {
        let mut all: Vec<ProbeResult> = runs.iter().map(get).collect();
        all.sort_by(|a, b| a.iops.total_cmp(&b.iops));
        all[all.len() / 2]
    };
    let flush = |get: fn(&Measured) -> u64| median(runs.iter().map(get).collect());
    Ok(Measured {
        seq_read: probe(|m| m.seq_read),
        seq_write: probe(|m| m.seq_write),
        rand_read_qd1: probe(|m| m.rand_read_qd1),
        rand_write_qd1: probe(|m| m.rand_write_qd1),
        rand_read_qd32: probe(|m| m.rand_read_qd32),
        rand_write_qd32: probe(|m| m.rand_write_qd32),
        flush_clean_ns: flush(|m| m.flush_clean_ns),
        flush_after_write_ns: flush(|m| m.flush_after_write_ns),
        flush_after_writes_ns: flush(|m| m.flush_after_writes_ns),
        fua: runs[0].fua,
        source: format!("{} (median of {} measurements)", runs[0].source, runs.len()),
    })
}

/// Measures a bare loop device made as `real` makes its own (module doc).
fn measure_once(options: &MeasureOptions) -> Result<Measured, RealError> {
    let tag = format!("{}-fit", std::process::id());
    let mut machine = Machine::bare_loop(&options.dir, options.size, &tag)?;
    let measured = measure_device(&machine, options);
    let failures = machine.restore();
    if !failures.is_empty() {
        return Err(RealError::new(format!(
            "the machine could not be fully restored: {}",
            failures.join("; ")
        )));
    }
    measured
}

fn measure_device(machine: &Machine, options: &MeasureOptions) -> Result<Measured, RealError> {
    let dev = &machine.devices[0];
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(&dev.path)
        .map_err(|e| RealError::new(format!("open {} O_DIRECT: {e}", dev.path.display())))?;
    // The image is sparse, as a real run's: the first half is written by the sequential probe
    // and read by the read probes; the random writes and the flushes go to the second half,
    // where most blocks are written for the first time and the host file system allocates
    // them, as it does for the new files of a real run on a fresh image.
    let half = options.size / 2 / (512 << 10) * (512 << 10);
    let (written, fresh) = ((0, half), (half, half));
    let limit = options.probe_ns;
    let seq = |write| Probe {
        write,
        sequential: true,
        bytes: 512 << 10,
        depth: 32,
    };
    let rand = |write, depth| Probe {
        write,
        sequential: false,
        bytes: 4096,
        depth,
    };
    let whole = half / (512 << 10);
    // Writing the first half is the sequential write probe; no time limit (the reads after it
    // must find data, not holes).
    let seq_write = run_probe(&file, written, seq(true), whole, u64::MAX);
    file.sync_all()
        .map_err(|e| RealError::new(format!("fsync of the loop device: {e}")))?;
    let seq_read = run_probe(&file, written, seq(false), whole, 4 * limit);
    let many = u64::MAX;
    let rand_read_qd1 = run_probe(&file, written, rand(false, 1), many, limit);
    let rand_write_qd1 = run_probe(&file, fresh, rand(true, 1), many, limit);
    let rand_read_qd32 = run_probe(&file, written, rand(false, 32), many, limit);
    let rand_write_qd32 = run_probe(&file, fresh, rand(true, 32), many, limit);
    let flush_clean_ns = flushes(&file, 21, || {})?;
    let flush_after_write_ns = flushes(&file, 21, || {
        run_probe(&file, fresh, rand(true, 1), 1, u64::MAX);
    })?;
    let flush_after_writes_ns = flushes(&file, 11, || {
        run_probe(&file, fresh, rand(true, 1), 256, u64::MAX);
    })?;
    let read = |attr: &str| {
        std::fs::read_to_string(format!("/sys/block/{}/{attr}", dev.name))
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "?".into())
    };
    let fua = read("queue/fua") == "1";
    let backing = read("loop/backing_file");
    let dio = read("loop/dio");
    let kernel = super::machine::run("uname", &["-r"]).unwrap_or_default();
    let date = super::machine::run("date", &["-u", "+%Y-%m-%d"]).unwrap_or_default();
    let source = format!(
        "measured on this machine by `mobistack device fit --measure`: loop device (dio {dio}) over {backing}, kernel {}, {}",
        kernel.trim(),
        date.trim()
    );
    Ok(Measured {
        seq_read,
        seq_write,
        rand_read_qd1,
        rand_write_qd1,
        rand_read_qd32,
        rand_write_qd32,
        flush_clean_ns,
        flush_after_write_ns,
        flush_after_writes_ns,
        fua,
        source,
    })
}

/// The fitted profile of `measured` (module doc): the template fitted to the sequential
/// figures at depth 32 and the random IOPS at depth 1, `flush_overhead` the flush after one
/// write.
/// `size` is the model's bench size for the fit (`BenchSize::default()` in the command).
pub fn fit_measured(measured: &Measured, size: BenchSize) -> Result<DeviceProfile, String> {
    let targets = Published {
        seq_read_mbps: Some(measured.seq_read.mbps),
        seq_write_mbps: Some(measured.seq_write.mbps),
        rand_read_iops: Some(measured.rand_read_qd1.iops),
        rand_write_iops: Some(measured.rand_write_qd1.iops),
        source: Some(format!(
            "{} (random IOPS at queue depth 1, sequential 512 KiB at 32)",
            measured.source
        )),
    };
    let template = fit_template(&targets);
    let mut base = builtin_profile(template)?;
    base.name = "fitted".to_string();
    base.description = format!("this machine's loop device, fitted from the {template} template");
    let vendor = vendor_queue_depth(&base);
    let depth = |pattern: Pattern| match pattern {
        Pattern::RandRead | Pattern::RandWrite => 1,
        Pattern::SeqRead | Pattern::SeqWrite => vendor,
    };
    let mut profile = fit_profile_at(&base, &targets, size, 10, depth)?;
    profile.flush_overhead = measured.flush_after_write_ns.max(1_000);
    profile.fua = measured.fua;
    Ok(profile)
}

fn ms(ns: f64) -> String {
    format!("{:.3} ms", ns / 1e6)
}

/// `mobistack device fit --measure`: the report (TOML to paste, with the check as comments)
/// and its JSON.
pub fn fit_command(options: &MeasureOptions) -> Result<(String, Value), RealError> {
    let measured = measure(options)?;
    report(&measured).map_err(RealError::new)
}

/// The report of a measurement: the fitted `[stack.device]` table and the check, model beside
/// measured.
pub fn report(measured: &Measured) -> Result<(String, Value), String> {
    report_sized(measured, BenchSize::default())
}

fn report_sized(measured: &Measured, size: BenchSize) -> Result<(String, Value), String> {
    let profile = fit_measured(measured, size)?;
    let rows = bench_rows(&profile, size)?;
    let latencies = flush_discard_latencies(&profile)?;
    let mut text = format!(
        "# {}\n# paste into a scenario file (the loop device has fua = {})\n",
        measured.source, measured.fua
    );
    let table = json!({ "stack": { "device": {
        "profile": profile.name, "fua": measured.fua, "custom": profile } } });
    text.push_str(&toml::to_string(&table).map_err(|e| e.to_string())?);
    text.push_str("\n# check: measured / fitted model\n");
    let pairs = [
        (&measured.seq_read, &measured.seq_read),
        (&measured.seq_write, &measured.seq_write),
        (&measured.rand_read_qd1, &measured.rand_read_qd32),
        (&measured.rand_write_qd1, &measured.rand_write_qd32),
    ];
    let mut check = Vec::new();
    for (row, (qd1, qd32)) in rows.iter().zip(pairs) {
        let sequential = row.test.starts_with("seq");
        let (m1, f1, m32, f32) = if sequential {
            (qd1.mbps, row.qd1.mbps, qd32.mbps, row.qd32.mbps)
        } else {
            (qd1.iops, row.qd1.iops, qd32.iops, row.qd32.iops)
        };
        let unit = if sequential { "MB/s" } else { "IOPS" };
        if sequential {
            text.push_str(&format!(
                "# {:<18} QD32 {:>9.0} / {:>9.0} {unit}\n",
                row.test, m32, f32
            ));
        } else {
            text.push_str(&format!(
                "# {:<18} QD1 {:>9.0} / {:>9.0} {unit} (mean {} / {}), QD32 {:>9.0} / {:>9.0} {unit}\n",
                row.test,
                m1,
                f1,
                ms(qd1.mean_latency_ns),
                ms(row.qd1.mean_latency_ns),
                m32,
                f32
            ));
        }
        check.push(json!({ "test": row.test, "unit": unit,
            "measured_qd1": m1, "model_qd1": f1, "measured_qd32": m32, "model_qd32": f32 }));
    }
    text.push_str(&format!(
        "# flush after 4 KiB  {} (fitted: flush_overhead)\n# flush clean        {} / {}\n# flush after 1 MiB  {} / {} (1 MiB of random 4 KiB writes before it)\n",
        ms(measured.flush_after_write_ns as f64),
        ms(measured.flush_clean_ns as f64),
        ms(latencies.flush_clean_ns as f64),
        ms(measured.flush_after_writes_ns as f64),
        ms(latencies.flush_after_1mib_random_ns as f64),
    ));
    let value = json!({
        "measured": measured,
        "profile": profile,
        "check": check,
        "flush": {
            "measured_after_write_ns": measured.flush_after_write_ns,
            "measured_clean_ns": measured.flush_clean_ns,
            "model_clean_ns": latencies.flush_clean_ns,
            "measured_after_1mib_ns": measured.flush_after_writes_ns,
            "model_after_1mib_ns": latencies.flush_after_1mib_random_ns,
        },
    });
    Ok((text, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(iops: f64, mbps: f64) -> ProbeResult {
        ProbeResult {
            queue_depth: 1,
            ops: 1000,
            elapsed_ns: 1_000_000_000,
            mbps,
            iops,
            mean_latency_ns: 1e9 / iops.max(1.0),
        }
    }

    /// A measurement like this machine's loop device: the fit reaches its depth-1 random IOPS
    /// and takes the flush after one write as `flush_overhead`.
    #[test]
    fn a_measured_loop_device_is_fitted_at_depth_one_with_its_flush() {
        let measured = Measured {
            seq_read: probe(2000.0, 1000.0),
            seq_write: probe(1400.0, 700.0),
            rand_read_qd1: probe(6000.0, 24.0),
            rand_write_qd1: probe(4000.0, 16.0),
            rand_read_qd32: probe(40000.0, 160.0),
            rand_write_qd32: probe(30000.0, 120.0),
            flush_clean_ns: 2_000_000,
            flush_after_write_ns: 700_000,
            flush_after_writes_ns: 150_000,
            fua: false,
            source: "test".into(),
        };
        let size = BenchSize {
            sequential_bytes: 32 << 20,
            random_ops: 1000,
        };
        let profile = fit_measured(&measured, size).unwrap();
        assert_eq!(profile.flush_overhead, 700_000);
        assert!(!profile.fua);
        for (pattern, target) in [(Pattern::RandRead, 6000.0), (Pattern::RandWrite, 4000.0)] {
            let at_qd1 = crate::dev::bench::run(&profile, pattern, 1, size).unwrap();
            assert!(
                (at_qd1.iops / target - 1.0).abs() < 0.05,
                "{pattern:?} at depth 1: {} vs {target}",
                at_qd1.iops
            );
        }
        let (text, _) = report_sized(&measured, size).unwrap();
        assert!(text.contains("[stack.device.custom]"), "{text}");
        assert!(text.contains("fua = false"), "{text}");
    }
}
