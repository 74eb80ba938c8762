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
//!   `lo_req_flush`): after one 4 KiB write, on a clean device, and after 1 MiB of random
//!   4 KiB writes;
//! - the host path of those flushes: `fsync` of the image file itself, timed from this thread,
//!   after a 4 KiB `O_DIRECT` write into a hole of the sparse image, after an overwrite, and
//!   clean ([`host_flushes`]).
//!
//! The fit (src/dev/bench.rs `fit_profile_at`) starts from the built-in template closest to the
//! measured sequential read (`fit_template`) and scales its calibrated parameters until the
//! model's 512 KiB sequential figures at depth 32 and its 4 KiB random IOPS at depth 1 match
//! the measured ones: depth 1 because the validation scenarios' latencies (an fsync's chain of
//! dependent writes and flushes, a reader's 4 KiB reads) are depth-1 latencies. `fua` is the
//! loop queue's own (`queue/fua`: 0). The depth-32 random figures and the loop-path flushes are
//! printed beside the fitted model's as a check, not fitted.
//!
//! `flush_overhead` is the host's `fsync` of the image file after a write into a hole. Why
//! (measured 2026-11-29 on the 2-core validation VM at load 12, 40 samples each, the prober
//! under `chrt -f 50`): the host's fsync of the image file took 0.05 ms after an overwrite or
//! clean and 0.17 ms after a write into a hole (the host allocates the block and commits its
//! own journal); the same flushes through the loop device took 4-8 ms at the median, in whole
//! multiples of 4 ms, the scheduler tick at HZ=250: the loop driver serves requests from a
//! worker thread at normal priority, which waits for a CPU behind the machine's other work.
//! That wait is the machine's load, not the device (the model's CPU has no other work), and it
//! is what made the earlier measurements differ 30x (0.06, 0.13, 1.97, 3.77 ms). A real run's
//! flushes follow writes of new blocks of a fresh sparse image (an fsync's data, then the
//! journal's commit block), so the hole pattern is fitted; the overwrite and clean figures are
//! printed beside it.

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
    /// The host path of a loop flush (`lo_req_flush` -> `vfs_fsync` of the image file), timed
    /// on the image file itself: median `fsync` after one 4 KiB `O_DIRECT` write into a hole
    /// of the sparse image (the host file system allocates it: fitted as `flush_overhead`).
    pub host_flush_after_new_ns: u64,
    /// The same after an overwrite of an allocated block.
    pub host_flush_after_overwrite_ns: u64,
    /// The same with nothing written since the last.
    pub host_flush_clean_ns: u64,
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
        host_flush_after_new_ns: flush(|m| m.host_flush_after_new_ns),
        host_flush_after_overwrite_ns: flush(|m| m.host_flush_after_overwrite_ns),
        host_flush_clean_ns: flush(|m| m.host_flush_clean_ns),
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
    // The last HOST_TAIL bytes are left to the host-path flush probe (holes, module doc).
    let (written, fresh) = ((0, half), (half, half - HOST_TAIL));
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
    let (host_flush_after_new_ns, host_flush_after_overwrite_ns, host_flush_clean_ns) =
        host_flushes(std::path::Path::new(&backing), half * 2)?;
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
        host_flush_after_new_ns,
        host_flush_after_overwrite_ns,
        host_flush_clean_ns,
        fua,
        source,
    })
}

/// Bytes at the end of the image that only [`host_flushes`] writes.
const HOST_TAIL: u64 = 64 << 20;

/// The host path of the loop device's flush, timed on the image file (`size` bytes) itself:
/// the loop driver serves a flush by `vfs_fsync(lo->lo_backing_file, 0)` (drivers/block/loop.c
/// `lo_req_flush`) from its worker thread, so timing the image file's `fsync` from this thread
/// measures that path without the worker's wait for a CPU (on a loaded machine a worker woken
/// behind other work waits whole scheduler ticks, 4 ms at HZ=250: the loop-device flushes
/// measured 0.05-8 ms from minute to minute while the host's `fsync` stayed at 0.05-0.2 ms).
/// Returns the medians (ns) after a 4 KiB `O_DIRECT` write into a hole of the sparse image
/// (the pattern of a fresh image's new blocks: the host allocates them and commits its own
/// journal), after an overwrite, and clean.
fn host_flushes(image: &std::path::Path, size: u64) -> Result<(u64, u64, u64), RealError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(image)
        .map_err(|e| RealError::new(format!("open {} O_DIRECT: {e}", image.display())))?;
    let block = vec![0x5au8; 8192];
    let skew = block.as_ptr().align_offset(4096);
    let block = &block[skew..skew + 4096];
    let tail = size - HOST_TAIL;
    let write = |offset: u64| {
        file.write_at(block, offset)
            .map_err(|e| RealError::new(format!("write {}: {e}", image.display())))
            .map(|_| ())
    };
    let fsync = || -> Result<u64, RealError> {
        let t = super::exec::now_ns();
        file.sync_all()
            .map_err(|e| RealError::new(format!("fsync {}: {e}", image.display())))?;
        Ok(super::exec::now_ns() - t)
    };
    let count = 21u64;
    let (mut new, mut overwrite, mut clean) = (Vec::new(), Vec::new(), Vec::new());
    for k in 0..count {
        // 1 MiB apart: each write lands in a hole of its own.
        write(tail + (k + 1) * (1 << 20))?;
        new.push(fsync()?);
        write(tail)?;
        overwrite.push(fsync()?);
        clean.push(fsync()?);
    }
    Ok((median(new), median(overwrite), median(clean)))
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
    profile.flush_overhead = measured.host_flush_after_new_ns.max(1_000);
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
        "# host fsync of the image after a 4 KiB write into a hole {} (fitted: flush_overhead); after an overwrite {}, clean {}\n",
        ms(measured.host_flush_after_new_ns as f64),
        ms(measured.host_flush_after_overwrite_ns as f64),
        ms(measured.host_flush_clean_ns as f64),
    ));
    text.push_str(&format!(
        "# through the loop device (its worker's CPU wait included), measured / model:\n# flush after 4 KiB  {} / {}\n# flush clean        {} / {}\n# flush after 1 MiB  {} / {} (1 MiB of random 4 KiB writes before it)\n",
        ms(measured.flush_after_write_ns as f64),
        ms(profile.flush_overhead as f64),
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
            "host_after_new_ns": measured.host_flush_after_new_ns,
            "host_after_overwrite_ns": measured.host_flush_after_overwrite_ns,
            "host_clean_ns": measured.host_flush_clean_ns,
            "measured_after_write_ns": measured.flush_after_write_ns,
            "measured_clean_ns": measured.flush_clean_ns,
            "model_clean_ns": latencies.flush_clean_ns,
            "measured_after_1mib_ns": measured.flush_after_writes_ns,
            "model_after_1mib_ns": latencies.flush_after_1mib_random_ns,
        },
    });
    Ok((text, value))
}

/// The version of the measurement and the fit: a cached fit of another version is measured
/// again. Bump it when either changes.
pub const FIT_VERSION: u32 = 2;
/// A cached fit older than this is measured again (the host's disk and its load change).
pub const CACHE_MAX_AGE_S: u64 = 7 * 24 * 3600;

/// A device profile fitted to this machine's loop device, and where it came from.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Fitted {
    pub version: u32,
    /// What the fit depends on (see [`cache_key`]).
    pub key: String,
    /// When it was measured (seconds since the epoch).
    pub measured_at_s: u64,
    pub profile: DeviceProfile,
    pub fua: bool,
    /// `device fit --measure`'s report of the measurement.
    pub report: String,
    /// The load average when it was measured (/proc/loadavg): on a loaded machine the loop
    /// worker's wait for a CPU enters the write costs (module doc).
    #[serde(default)]
    pub load: String,
}

/// The directory of cached fits: `$MOBISTACK_CACHE_DIR`, else `$XDG_CACHE_HOME/mobistack`, else
/// `$HOME/.cache/mobistack` (root's, as real mode runs as root), else /var/cache/mobistack.
pub fn cache_dir() -> PathBuf {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("MOBISTACK_CACHE_DIR")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("mobistack")))
        .or_else(|| var("HOME").map(|d| d.join(".cache/mobistack")))
        .unwrap_or_else(|| PathBuf::from("/var/cache/mobistack"))
}

/// What a fit of the loop device over an image in `dir` depends on: the fit's version, the
/// kernel release, the file system holding `dir` (its device number, type and mount options,
/// from /proc/self/mountinfo) and the image's size. Any change is another key, so another fit.
pub fn cache_key(dir: &std::path::Path, size: u64) -> Result<String, RealError> {
    use std::os::unix::fs::MetadataExt;
    let canonical = std::fs::canonicalize(dir)
        .map_err(|e| RealError::new(format!("{}: {e}", dir.display())))?;
    let meta = std::fs::metadata(&canonical)
        .map_err(|e| RealError::new(format!("{}: {e}", dir.display())))?;
    let dev = meta.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let fs = mountinfo
        .lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let dash = fields.iter().position(|f| *f == "-")?;
            (fields.get(2) == Some(&format!("{major}:{minor}").as_str())).then(|| {
                format!(
                    "{} {} {}",
                    fields.get(dash + 1).unwrap_or(&"?"),
                    fields.get(dash + 2).unwrap_or(&"?"),
                    fields.get(5).unwrap_or(&"?")
                )
            })
        })
        .unwrap_or_else(|| "?".into());
    let kernel = super::machine::run("uname", &["-r"]).unwrap_or_default();
    Ok(format!(
        "fit v{FIT_VERSION}; kernel {}; {} on {major}:{minor} ({fs}); image {} MiB",
        kernel.trim(),
        canonical.display(),
        size >> 20
    ))
}

fn cache_file(key: &str) -> PathBuf {
    // FNV-1a of the key: a file per key.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in key.bytes() {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    cache_dir().join(format!("device-fit-{hash:016x}.json"))
}

/// The 1-, 5- and 15-minute load averages.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Whether a fit measured at `load` (the three load averages, as /proc/loadavg gives them) on a
/// machine of `cores` CPUs was measured on a busy machine: its 1-minute load average is above
/// half the cores. A loop device's writes are done by a kernel worker that waits for a CPU like
/// any task, so on a busy machine that wait enters the fitted write costs (module doc: the
/// 2026-11-29 fit at load 10-16 on 2 cores had write_overhead 2.30 ms against 0.07-0.12 ms
/// measured quiet). An unknown load counts as busy.
pub fn measured_busy(load: &str, cores: usize) -> bool {
    load.split_whitespace()
        .next()
        .and_then(|one| one.parse::<f64>().ok())
        .is_none_or(|one| one > cores.max(1) as f64 / 2.0)
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The cached fit for `key` if it is there, of this version, younger than [`CACHE_MAX_AGE_S`]
/// and not [`measured_busy`] (a busy fit is used once, for the run that measured it, and
/// measured again by the next run).
pub fn cached(key: &str, now: u64) -> Option<(Fitted, PathBuf)> {
    let path = cache_file(key);
    let text = std::fs::read_to_string(&path).ok()?;
    let fitted: Fitted = serde_json::from_str(&text).ok()?;
    let fresh = fitted.version == FIT_VERSION
        && fitted.key == key
        && now.saturating_sub(fitted.measured_at_s) < CACHE_MAX_AGE_S
        && !measured_busy(&fitted.load, cores());
    fresh.then_some((fitted, path))
}

/// The device profile of this machine's loop device for check-real: the cached fit, or a new
/// measurement (then cached) when there is none, it is stale, or `refit` asks. Returns the fit
/// and a line saying where it came from.
pub fn fitted_device(options: &MeasureOptions, refit: bool) -> Result<(Fitted, String), RealError> {
    let key = cache_key(&options.dir, options.size)?;
    if !refit {
        if let Some((fitted, path)) = cached(&key, now_s()) {
            let age_h = now_s().saturating_sub(fitted.measured_at_s) / 3600;
            let line = format!(
                "device: fitted to this machine's loop device, cached {} ({age_h} h old, measured at load average {}; --refit to measure again)",
                path.display(),
                fitted.load
            );
            return Ok((fitted, line));
        }
    }
    eprintln!("measuring this machine's loop device for the simulated side (device fit --measure; about a minute)...");
    let load = load_average();
    let measured = measure(options)?;
    let (report, _) = report(&measured).map_err(RealError::new)?;
    let profile = fit_measured(&measured, BenchSize::default()).map_err(RealError::new)?;
    let fitted = Fitted {
        version: FIT_VERSION,
        key: key.clone(),
        measured_at_s: now_s(),
        profile,
        fua: measured.fua,
        report,
        load: load.clone(),
    };
    let path = cache_file(&key);
    let busy = measured_busy(&load, cores());
    if busy {
        eprintln!(
            "warning: the loop device was measured at load average {load} on {} cores: its worker's wait for a CPU enters the fitted write costs, so the simulated side's latencies run high; the fit is used for this run only, run again on a quieter machine",
            cores()
        );
    }
    let stored = std::fs::create_dir_all(cache_dir()).and_then(|()| {
        std::fs::write(
            &path,
            serde_json::to_string_pretty(&fitted).expect("a fit serialises"),
        )
    });
    let line = match stored {
        Ok(()) if busy => format!(
            "device: fitted to this machine's loop device, measured now at load average {load} on a busy machine (not reused: the next run measures again)"
        ),
        Ok(()) => format!(
            "device: fitted to this machine's loop device, measured now at load average {load}, cached in {}",
            path.display()
        ),
        Err(e) => format!(
            "device: fitted to this machine's loop device, measured now at load average {load} (not cached: {}: {e})",
            path.display()
        ),
    };
    Ok((fitted, line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fit_measured_on_a_busy_machine_is_not_reused() {
        // The stale fit of 2026-11-29 (load 10-16 on 2 cores) and the quiet one (load 0.3).
        assert!(measured_busy("10.31 12.02 16.40", 2));
        assert!(!measured_busy("0.30 1.20 2.90", 2));
        assert!(measured_busy("1.01 0.5 0.5", 2));
        assert!(!measured_busy("1.00 0.5 0.5", 2));
        assert!(!measured_busy("3.9 1 1", 8));
        // No load recorded (a fit cached before the field existed) or unreadable: busy.
        assert!(measured_busy("", 2));
        assert!(measured_busy("?", 2));
    }

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
    /// and takes the host's fsync after a write into a hole as `flush_overhead`, not the
    /// loop-path figures (which carry the loop worker's wait for a CPU).
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
            host_flush_after_new_ns: 170_000,
            host_flush_after_overwrite_ns: 50_000,
            host_flush_clean_ns: 50_000,
            fua: false,
            source: "test".into(),
        };
        let size = BenchSize {
            sequential_bytes: 32 << 20,
            random_ops: 1000,
        };
        let profile = fit_measured(&measured, size).unwrap();
        assert_eq!(profile.flush_overhead, 170_000);
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
        assert!(text.contains("0.170 ms (fitted: flush_overhead)"), "{text}");
        assert!(text.contains("[stack.device.custom]"), "{text}");
        assert!(text.contains("fua = false"), "{text}");
    }

    #[test]
    fn a_cached_fit_is_used_only_for_its_key_version_age_and_quiet_machine() {
        let dir = std::env::temp_dir().join(format!("mobistack-fitcache-{}", std::process::id()));
        std::env::set_var("MOBISTACK_CACHE_DIR", &dir);
        let key = "fit v2; kernel x; /tmp on 1:2 (ext4 /dev/vda rw); image 2048 MiB";
        let fitted = Fitted {
            version: FIT_VERSION,
            key: key.into(),
            measured_at_s: 1_000,
            profile: builtin_profile("ufs-3.1").unwrap(),
            fua: false,
            report: String::new(),
            load: "0.10 1.00 1.00".into(),
        };
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(cache_file(key), serde_json::to_string(&fitted).unwrap()).unwrap();
        assert!(cached(key, 1_000 + 3600).is_some());
        // Older than a week, another key (another kernel, disk, image size), another version.
        assert!(cached(key, 1_000 + CACHE_MAX_AGE_S).is_none());
        assert!(cached("fit v2; kernel y; ...", 2_000).is_none());
        let old = Fitted {
            version: FIT_VERSION - 1,
            ..fitted
        };
        std::fs::write(cache_file(key), serde_json::to_string(&old).unwrap()).unwrap();
        assert!(cached(key, 2_000).is_none());
        // Measured on a busy machine (load average 64 is busy on any machine with < 128 cores).
        let busy = Fitted {
            version: FIT_VERSION,
            load: "64.0 12.0 16.0".into(),
            ..old
        };
        std::fs::write(cache_file(key), serde_json::to_string(&busy).unwrap()).unwrap();
        assert!(cached(key, 2_000).is_none());
        std::fs::remove_dir_all(&dir).unwrap();
        std::env::remove_var("MOBISTACK_CACHE_DIR");
    }

    #[test]
    fn the_cache_key_names_the_kernel_and_the_file_system_under_the_image() {
        let key = cache_key(&std::env::temp_dir(), 2 << 30).unwrap();
        assert!(
            key.starts_with(&format!("fit v{FIT_VERSION}; kernel ")),
            "{key}"
        );
        assert!(key.contains("image 2048 MiB"), "{key}");
        assert!(!key.contains("(?"), "the file system is found: {key}");
    }
}
