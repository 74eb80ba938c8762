//! fio job files: the options (fio's names and units), and the execution of a job as a
//! process of submitter tasks, so users can reuse the jobs they already have.
//!
//! Supported subset (fio's HOWTO names and units): `[global]` and job sections; `rw` / `readwrite`
//! (read, write, randread, randwrite, rw / readwrite, randrw, trim, randtrim), `rwmixread`,
//! `rwmixwrite`, `bs` / `blocksize`, `iodepth`, `size` (required, as in fio), `offset`,
//! `numjobs`, `direct` / `buffered`, `ioengine`, `prio`, `prioclass` (and `ioprio` as an alias
//! of `prio`), `rate`, `runtime`, `time_based`, `stonewall` / `wait_for_previous`, `filename`,
//! `description`, `clat_percentiles`, `lat_percentiles`, `slat_percentiles`. Sizes use fio's
//! default base 1024 ("4k" = 4096); `runtime` without a unit is seconds; `rate` is bytes per
//! second. Any other option is an error naming it: nothing is silently ignored.
//!
//! Model of a job: each of the `numjobs` clones is a process (its own pid, so CFQ gives it its own
//! sync queue). Where its I/O goes is a [`JobTarget`]: with `direct=1` the raw device through the
//! block layer ([`DirectTarget`]: bios that bypass the page cache; writes carry REQ_SYNC, as 3.10's
//! `WRITE_ODIRECT` does; an I/O larger than `max_sectors` is split into bios submitted under a
//! plug, as `__blkdev_direct_IO` does); with `direct=0` (fio's default) a file through the VFS and
//! the page cache (`crate::workload::fio`). An asynchronous engine (libaio, io_uring, posixaio)
//! keeps `iodepth` I/Os in flight, modelled as `iodepth` submitters in the process; synchronous
//! engines (sync, psync, pvsync, pvsync2; psync is fio's default) have depth 1, and so does
//! libaio with buffered I/O (Linux runs it synchronously inside `io_submit`).
//!
//! Latencies as fio defines them: `slat` from the start of the I/O to the end of its submission
//! (asynchronous engines only: a sleep in `get_request` is submission time), `clat` from there
//! to completion, `lat` the sum. Completions are also counted in 500 ms windows (fio's
//! `bw_avg_time` / `iops_avg_time`) for the bandwidth and IOPS samples.
//!
//! Latencies are recorded as fio records them (stat.c, io_u.c), so memory does not grow with
//! the run's length and the report computes what fio computes: per direction and kind a
//! [`LatencyStats`], fio's `struct io_stat` (`add_stat_sample`: min, max, count, Welford's
//! running mean and `S`, whose `calc_lat` gives the mean and standard deviation) with the
//! histogram `io_u_plat` (`plat_val_to_idx` buckets, from which the report's percentiles and
//! json+ bins come); per job the completion latencies' ranges, [`LatencyRanges`]
//! (`io_u_mark_latency` into `io_u_lat_n` / `_u` / `_m`).
//!
//! Not supported (errors): split read/write values ("4k,64k"), trims with `direct=0`, and
//! everything not listed above.

use super::layer::BlockLayer;
use super::queue::{split_bio, RequestQueue};
use super::request::{Bio, IoPrio, IoPrioClass, TaskRef};
use crate::dev::{BlockDevice, IoFlags, IoOp};
use crate::sim::{Rng, Sim};
use crate::units::{parse_duration, Nanos, NS_PER_SEC, SECTOR_SIZE};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// Bound on job sections and clones in one file.
pub const MAX_JOBS: usize = 256;
/// Bound on `iodepth`.
const MAX_IODEPTH: u32 = 4096;
/// Bound on `bs`: 64 MiB (a buffered job holds one buffer of `bs` bytes per job).
pub const MAX_BS: u64 = 64 << 20;
/// Bound on the submitter tasks of a job file (`numjobs` x `iodepth`, summed): 65,536, far
/// below the engine's task limit.
pub const MAX_SUBMITTERS: u64 = 1 << 16;
/// First pid given to fio processes.
pub const FIRST_PID: u32 = 1000;

/// `rw=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RwMode {
    Read,
    Write,
    RandRead,
    RandWrite,
    ReadWrite,
    RandRw,
    Trim,
    RandTrim,
}

impl RwMode {
    fn parse(value: &str) -> Result<RwMode, String> {
        Ok(match value {
            "read" => RwMode::Read,
            "write" => RwMode::Write,
            "randread" => RwMode::RandRead,
            "randwrite" => RwMode::RandWrite,
            "rw" | "readwrite" => RwMode::ReadWrite,
            "randrw" => RwMode::RandRw,
            "trim" => RwMode::Trim,
            "randtrim" => RwMode::RandTrim,
            _ => {
                return Err(format!(
                    "rw={value}: expected read, write, randread, randwrite, rw, readwrite, randrw, trim or randtrim"
                ))
            }
        })
    }

    fn random(self) -> bool {
        matches!(
            self,
            RwMode::RandRead | RwMode::RandWrite | RwMode::RandRw | RwMode::RandTrim
        )
    }
}

/// One job section after `[global]` defaults are applied.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FioJob {
    pub name: String,
    pub rw: RwMode,
    /// Percentage of reads for mixed workloads.
    pub rwmixread: u32,
    pub bs: u64,
    pub iodepth: u32,
    /// Region size; required (`None` only until the job file gives it).
    pub size: Option<u64>,
    pub offset: u64,
    pub numjobs: u32,
    pub ioengine: String,
    pub ioprio: IoPrio,
    /// Bytes per second.
    pub rate: Option<u64>,
    pub runtime: Option<Nanos>,
    pub time_based: bool,
    pub stonewall: bool,
    /// `direct=1`: O_DIRECT on the raw device; fio's default is buffered I/O through the page
    /// cache (`direct=0`).
    pub direct: bool,
    /// `filename`: for buffered jobs, the file (relative names go under [`FIO_DIRECTORY`]).
    pub filename: Option<String>,
    /// Which latencies get percentiles (fio: `clat_percentiles=1`, the others 0).
    pub clat_percentiles: bool,
    pub lat_percentiles: bool,
    pub slat_percentiles: bool,
}

/// Where buffered jobs' files go when `filename` is not absolute (fio uses the working
/// directory; an app's would be its data directory).
pub const FIO_DIRECTORY: &str = "/data/fio";

impl Default for FioJob {
    fn default() -> Self {
        FioJob {
            name: String::new(),
            rw: RwMode::Read,
            rwmixread: 50,
            bs: 4096,
            iodepth: 1,
            size: None,
            offset: 0,
            numjobs: 1,
            ioengine: "psync".to_string(),
            ioprio: IoPrio::NONE,
            rate: None,
            runtime: None,
            time_based: false,
            stonewall: false,
            direct: false,
            filename: None,
            clat_percentiles: true,
            lat_percentiles: false,
            slat_percentiles: false,
        }
    }
}

impl FioJob {
    /// The region the job works on, `(offset, size)` in bytes, checked against a device of
    /// `capacity_bytes`: fio's "you need to specify size=" when there is none, a region past
    /// the device's end, a region smaller than one block. Errors name the job and the fields.
    pub fn check_region(&self, capacity_bytes: u64) -> Result<(u64, u64), String> {
        let name = &self.name;
        let Some(size) = self.size else {
            return Err(format!(
                "job `{name}`: `size` is required (fio: \"you need to specify size=\"), e.g. size=256m"
            ));
        };
        let end = self.offset.saturating_add(size);
        if end > capacity_bytes {
            return Err(format!(
                "job `{name}`: `offset` + `size` ({} + {} = {end} bytes) exceeds the device capacity ({capacity_bytes} bytes)",
                self.offset, size
            ));
        }
        if size < self.bs {
            return Err(format!(
                "job `{name}`: `size` ({size} bytes) is smaller than `bs` ({} bytes)",
                self.bs
            ));
        }
        if self.time_based && self.runtime.is_none() {
            return Err(format!(
                "job `{name}`: `time_based` needs a `runtime` above 0 (fio: \"time_based requires a runtime/timeout setting\")"
            ));
        }
        if self.direct && !self.offset.is_multiple_of(SECTOR_SIZE) {
            // fio uses a byte `offset` as given (only a percentage is aligned, to
            // `offset_align`); O_DIRECT at an offset that is not a multiple of the logical
            // block size fails with EINVAL, and fio stops the job on that error.
            return Err(format!(
                "job `{name}`: `offset`={} is not a multiple of 512 bytes: `direct`=1 (O_DIRECT) I/O at it fails with EINVAL",
                self.offset
            ));
        }
        if !self.direct && matches!(self.rw, RwMode::Trim | RwMode::RandTrim) {
            return Err(format!(
                "job `{name}`: `rw`={} trims a block device: it needs `direct`=1",
                if self.rw == RwMode::Trim {
                    "trim"
                } else {
                    "randtrim"
                }
            ));
        }
        Ok((self.offset, size))
    }

    /// The file of a buffered job clone: `filename` (absolute, or under [`FIO_DIRECTORY`]), else
    /// fio's default name `<job>.<clone>.0`.
    pub fn file_path(&self, clone: u32) -> String {
        match &self.filename {
            Some(name) if name.starts_with('/') => name.clone(),
            Some(name) => format!("{FIO_DIRECTORY}/{name}"),
            None => format!("{FIO_DIRECTORY}/{}.{clone}.0", self.name),
        }
    }

    /// Whether the engine is asynchronous (fio records submission latency only for those).
    pub fn is_async(&self) -> bool {
        matches!(self.ioengine.as_str(), "libaio" | "io_uring" | "posixaio")
    }

    /// `iodepth` as the engine honours it: synchronous engines, and libaio on buffered I/O
    /// (which `io_submit` completes synchronously), keep one I/O in flight.
    pub fn effective_iodepth(&self) -> u32 {
        if self.is_async() && (self.direct || self.ioengine != "libaio") {
            self.iodepth
        } else {
            1
        }
    }
}

/// fio sizes: a number with an optional k/m/g/t suffix, base 1024 (`kb_base=1024`), optional
/// "i" and "b"; "KiB"-style also accepted.
fn parse_fio_size(option: &str, value: &str) -> Result<u64, String> {
    let text = value.trim();
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let bad = || format!("{option}={value}: expected a size such as 4k, 128k, 1m, 2g");
    if digits_end == 0 {
        return Err(bad());
    }
    let number: u64 = text[..digits_end].parse().map_err(|_| bad())?;
    let suffix = text[digits_end..].to_ascii_lowercase();
    let suffix = suffix.trim_end_matches('b').trim_end_matches('i');
    let scale: u64 = match suffix {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        "t" => 1 << 40,
        _ => return Err(bad()),
    };
    number.checked_mul(scale).ok_or_else(bad)
}

/// fio times: seconds without a unit; "m" is minutes as in fio.
fn parse_fio_time(option: &str, value: &str) -> Result<Nanos, String> {
    let text = value.trim();
    if !text.is_empty() && text.chars().all(|c| c.is_ascii_digit()) {
        let too_long = || format!("{option}={value}: too long: at most 365 days (31536000)");
        let seconds: u64 = text.parse().map_err(|_| too_long())?;
        return seconds
            .checked_mul(NS_PER_SEC)
            .filter(|&ns| ns <= crate::units::MAX_DURATION)
            .ok_or_else(too_long);
    }
    let normalized = match text.strip_suffix('m') {
        Some(minutes) if !text.ends_with("ms") => format!("{minutes}min"),
        _ => text.to_string(),
    };
    parse_duration(&normalized).map_err(|error| format!("{option}={value}: {error}"))
}

fn parse_number(option: &str, value: &str, low: u64, high: u64) -> Result<u64, String> {
    let number: u64 = value
        .trim()
        .parse()
        .map_err(|_| format!("{option}={value}: expected an integer"))?;
    if number < low || number > high {
        return Err(format!(
            "{option}={value}: must be between {low} and {high}"
        ));
    }
    Ok(number)
}

fn parse_bool(option: &str, value: Option<&str>) -> Result<bool, String> {
    match value.map(str::trim) {
        None | Some("1") | Some("true") => Ok(true),
        Some("0") | Some("false") => Ok(false),
        Some(other) => Err(format!("{option}={other}: expected 0 or 1")),
    }
}

/// Applies one `option[=value]` to `job`.
fn apply_option(job: &mut FioJob, option: &str, value: Option<&str>) -> Result<(), String> {
    let need = || value.ok_or_else(|| format!("option `{option}` needs a value"));
    match option {
        "name" => job.name = need()?.to_string(),
        "description" => {
            need()?;
        }
        "filename" => {
            let name = need()?.trim();
            if name.is_empty() || name.contains(':') {
                return Err(format!(
                    "filename={name}: expected one file name (several, `:`-separated, are not supported)"
                ));
            }
            job.filename = Some(name.to_string());
        }
        "clat_percentiles" => job.clat_percentiles = parse_bool(option, value)?,
        "lat_percentiles" => job.lat_percentiles = parse_bool(option, value)?,
        "slat_percentiles" => job.slat_percentiles = parse_bool(option, value)?,
        "rw" | "readwrite" => job.rw = RwMode::parse(need()?.trim())?,
        "rwmixread" => job.rwmixread = parse_number(option, need()?, 0, 100)? as u32,
        "rwmixwrite" => job.rwmixread = 100 - parse_number(option, need()?, 0, 100)? as u32,
        "bs" | "blocksize" => {
            let value = need()?;
            if value.contains(',') {
                return Err(format!(
                    "{option}={value}: separate read/write block sizes are not supported"
                ));
            }
            let bs = parse_fio_size(option, value)?;
            if bs == 0 || bs % SECTOR_SIZE != 0 || bs > MAX_BS {
                return Err(format!(
                    "{option}={value}: must be a positive multiple of 512, at most 64m"
                ));
            }
            job.bs = bs;
        }
        "iodepth" => job.iodepth = parse_number(option, need()?, 1, u64::from(MAX_IODEPTH))? as u32,
        "size" => job.size = Some(parse_fio_size(option, need()?)?),
        "offset" => job.offset = parse_fio_size(option, need()?)?,
        "numjobs" => job.numjobs = parse_number(option, need()?, 1, MAX_JOBS as u64)? as u32,
        "direct" => job.direct = parse_bool(option, value)?,
        "buffered" => job.direct = !parse_bool(option, value)?,
        "ioengine" => {
            let engine = need()?.trim();
            match engine {
                "libaio" | "io_uring" | "posixaio" | "sync" | "psync" | "pvsync" | "pvsync2" => {
                    job.ioengine = engine.to_string()
                }
                _ => {
                    return Err(format!(
                        "ioengine={engine}: supported engines are libaio, io_uring, posixaio, sync, psync, pvsync, pvsync2"
                    ))
                }
            }
        }
        "prio" | "ioprio" => {
            job.ioprio.level = parse_number(option, need()?, 0, 7)? as u8;
            if job.ioprio.class == IoPrioClass::None {
                job.ioprio.class = IoPrioClass::Be;
            }
        }
        "prioclass" => {
            job.ioprio.class = match parse_number(option, need()?, 0, 3)? {
                0 => IoPrioClass::None,
                1 => IoPrioClass::Rt,
                2 => IoPrioClass::Be,
                _ => IoPrioClass::Idle,
            }
        }
        "rate" => {
            let value = need()?;
            if value.contains(',') {
                return Err(format!(
                    "rate={value}: separate read/write rates are not supported"
                ));
            }
            let rate = parse_fio_size(option, value)?;
            job.rate = (rate > 0).then_some(rate);
        }
        // fio's default `runtime=0`: no limit.
        "runtime" => job.runtime = Some(parse_fio_time(option, need()?)?).filter(|&ns| ns > 0),
        "time_based" => job.time_based = parse_bool(option, value)?,
        "stonewall" | "wait_for_previous" => job.stonewall = parse_bool(option, value)?,
        _ => return Err(format!("unsupported fio option `{option}`")),
    }
    Ok(())
}

/// Parses a job file. Errors name the line and the option, and cut long values.
pub fn parse_job_file(text: &str) -> Result<Vec<FioJob>, String> {
    parse_jobs(text).map_err(|e| crate::units::cut_message(&e))
}

fn parse_jobs(text: &str) -> Result<Vec<FioJob>, String> {
    let mut global = FioJob::default();
    let mut jobs: Vec<FioJob> = Vec::new();
    let mut current: Option<FioJob> = None;
    let mut in_global = false;
    for (index, raw) in text.lines().enumerate() {
        let line_number = index + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with(';') || line.starts_with('#') {
            continue;
        }
        if let Some(section) = line.strip_prefix('[') {
            let section = section
                .strip_suffix(']')
                .ok_or_else(|| format!("line {line_number}: unterminated section `{line}`"))?
                .trim();
            if let Some(job) = current.take() {
                jobs.push(job);
            }
            in_global = section == "global";
            if !in_global {
                if jobs.len() >= MAX_JOBS {
                    return Err(format!("more than {MAX_JOBS} jobs"));
                }
                current = Some(FioJob {
                    name: section.to_string(),
                    ..global.clone()
                });
            }
            continue;
        }
        let (option, value) = match line.split_once('=') {
            Some((option, value)) => (option.trim(), Some(value.trim())),
            None => (line, None),
        };
        let target = if in_global {
            &mut global
        } else {
            current
                .as_mut()
                .ok_or_else(|| format!("line {line_number}: option `{option}` outside a section"))?
        };
        apply_option(target, option, value)
            .map_err(|error| format!("line {line_number}: {}", crate::units::cut_words(&error)))?;
    }
    if let Some(job) = current.take() {
        jobs.push(job);
    }
    if jobs.is_empty() {
        return Err("the job file defines no job (only [global] or nothing)".to_string());
    }
    check_submitters(&jobs)?;
    Ok(jobs)
}

/// A direction of I/O as fio counts them (`DDIR_READ`, `DDIR_WRITE`, `DDIR_TRIM`).
pub fn ddir(op: IoOp) -> usize {
    match op {
        IoOp::Read => 0,
        IoOp::Write | IoOp::Flush => 1,
        IoOp::Discard => 2,
    }
}

/// fio's names of the directions.
pub const DDIR_NAMES: [&str; 3] = ["read", "write", "trim"];

/// Width of a bandwidth / IOPS sample window: fio's `bw_avg_time` and `iops_avg_time` (500 ms).
pub const SAMPLE_WINDOW_NS: Nanos = 500 * crate::units::NS_PER_MS;

/// `FIO_IO_U_PLAT_BITS`: 2^6 histogram buckets per power of two.
const PLAT_BITS: u32 = 6;
/// `FIO_IO_U_PLAT_VAL`.
const PLAT_VAL: u64 = 1 << PLAT_BITS;
/// `FIO_IO_U_PLAT_NR`: 29 groups of 64 buckets (values up to about 2^34 ns, 17 s, in their own
/// bucket; longer ones in the last).
pub const PLAT_NR: usize = 29 * PLAT_VAL as usize;

/// fio's `plat_val_to_idx`: the histogram bucket of a latency in ns. Values below 2^7 have
/// their own bucket; above, each power of two is split into 64.
pub fn plat_val_to_idx(value: u64) -> usize {
    let msb = if value == 0 {
        0
    } else {
        63 - u64::from(value.leading_zeros())
    };
    if msb <= u64::from(PLAT_BITS) {
        return value as usize;
    }
    let error_bits = msb - u64::from(PLAT_BITS);
    let base = (error_bits + 1) << PLAT_BITS;
    let offset = (PLAT_VAL - 1) & (value >> error_bits);
    ((base + offset) as usize).min(PLAT_NR - 1)
}

/// fio's `plat_idx_to_val`: the value a bucket stands for (the middle of its range).
pub fn plat_idx_to_val(index: usize) -> u64 {
    assert!(index < PLAT_NR, "bucket {index} out of range");
    let index = index as u64;
    if index < (PLAT_VAL << 1) {
        return index;
    }
    let error_bits = (index >> PLAT_BITS) - 1;
    let base = 1u64 << (error_bits + u64::from(PLAT_BITS));
    let k = index % PLAT_VAL;
    base + ((k as f64 + 0.5) * (1u64 << error_bits) as f64) as u64
}

/// One kind of latency (slat, clat or lat) of one direction, kept as fio keeps it: the summary
/// of fio's `struct io_stat`, updated by `add_stat_sample` (stat.c: min, max, count, and the
/// running mean and sum of squared deviations `S` of Welford's method), and the histogram
/// `io_u_plat` (one count per [`plat_val_to_idx`] bucket: fio's `add_lat_percentile_sample`,
/// which its `add_slat_sample`, `add_clat_sample` and `add_lat_sample` call when that kind's
/// percentiles are on; here always, the report choosing what to print). No sample is kept: the
/// memory is constant (the histogram, [`PLAT_NR`] counts, allocated at the first sample),
/// however long the job runs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LatencyStats {
    samples: u64,
    min: Nanos,
    max: Nanos,
    mean: f64,
    /// Welford's `S`: the sum of squared deviations from the mean.
    s: f64,
    /// `io_u_plat`: counts per histogram bucket; empty until the first sample.
    plat: Vec<u64>,
}

impl LatencyStats {
    /// fio's `add_stat_sample` and the histogram count of `add_clat_sample`.
    pub fn record(&mut self, nanos: Nanos) {
        if self.samples == 0 || nanos < self.min {
            self.min = nanos;
        }
        self.max = self.max.max(nanos);
        let value = nanos as f64;
        let delta = value - self.mean;
        if delta != 0.0 {
            self.mean += delta / (self.samples as f64 + 1.0);
            self.s += delta * (value - self.mean);
        }
        self.samples += 1;
        if self.plat.is_empty() {
            self.plat = vec![0; PLAT_NR];
        }
        self.plat[plat_val_to_idx(nanos)] += 1;
    }

    /// The number of latencies recorded.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// The smallest latency (0 before any).
    pub fn min(&self) -> Nanos {
        self.min
    }

    /// The largest latency (0 before any).
    pub fn max(&self) -> Nanos {
        self.max
    }

    /// The mean, as fio's `calc_lat` reports it (Welford's running mean; 0 before any).
    pub fn mean(&self) -> f64 {
        self.mean
    }

    /// The sample standard deviation, as fio's `calc_lat`: `sqrt(S / (n - 1))`, 0 for fewer
    /// than two samples.
    pub fn stddev(&self) -> f64 {
        if self.samples > 1 {
            (self.s / (self.samples as f64 - 1.0)).sqrt()
        } else {
            0.0
        }
    }

    /// The non-empty histogram buckets: (bucket index, count), ascending.
    pub fn buckets(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.plat
            .iter()
            .enumerate()
            .filter(|(_, &count)| count > 0)
            .map(|(index, &count)| (index, count))
    }
}

/// fio's latency ranges of the completion latencies, `io_u_lat_n` / `io_u_lat_u` / `io_u_lat_m`
/// (the "lat (usec): 100=..., 250=..." lines), counted by `io_u_mark_latency` as each I/O
/// completes. The ranges are 2, 4, 10, 20, 50, 100, 250, 500, 750, 1000 in each unit (a value
/// counts in the first range it is below), and 2000 and >=2000 ms.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LatencyRanges {
    /// Below 1 us, per ns range (`io_u_lat_n`).
    pub nsec: [u64; 10],
    /// Below 1 ms, per us range (`io_u_lat_u`).
    pub usec: [u64; 10],
    /// From 1 ms, per ms range (`io_u_lat_m`).
    pub msec: [u64; 12],
}

impl LatencyRanges {
    /// fio's `io_u_mark_latency`: counts one completion latency in its range.
    pub fn mark(&mut self, nanos: Nanos) {
        /// The range of a value in the unit of its row (`io_u_mark_lat_nsec` / `_usec` /
        /// `_msec`).
        fn index(value: u64) -> usize {
            match value {
                0..=1 => 0,
                2..=3 => 1,
                4..=9 => 2,
                10..=19 => 3,
                20..=49 => 4,
                50..=99 => 5,
                100..=249 => 6,
                250..=499 => 7,
                500..=749 => 8,
                750..=999 => 9,
                1000..=1999 => 10,
                _ => 11,
            }
        }
        if nanos < 1_000 {
            self.nsec[index(nanos)] += 1;
        } else if nanos < 1_000_000 {
            self.usec[index(nanos / 1_000)] += 1;
        } else {
            self.msec[index(nanos / 1_000_000)] += 1;
        }
    }

    /// The latencies counted.
    pub fn total(&self) -> u64 {
        self.nsec.iter().chain(&self.usec).chain(&self.msec).sum()
    }
}

/// What one direction of one job clone did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DirectionStats {
    pub ios: u64,
    pub bytes: u64,
    /// Submission latency (asynchronous engines only).
    pub slat: LatencyStats,
    /// Completion latency: from the end of the submission to the completion.
    pub clat: LatencyStats,
    /// Total latency.
    pub lat: LatencyStats,
    /// Bytes and I/Os completed in each [`SAMPLE_WINDOW_NS`] window from the job's start.
    pub window_bytes: Vec<u64>,
    pub window_ios: Vec<u64>,
}

/// What one job clone did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobStats {
    pub directions: [DirectionStats; 3],
    /// I/Os in flight in the job at each submission, counted per fio depth bucket (1, 2, 4, 8,
    /// 16, 32, >=64).
    pub depth_buckets: [u64; 7],
    /// The completion latencies of all directions in fio's latency ranges.
    pub lat_ranges: LatencyRanges,
    pub start_ns: Nanos,
    pub end_ns: Nanos,
}

/// fio's `io_u_map` bucket of a depth.
fn depth_bucket(depth: u32) -> usize {
    match depth {
        0..=1 => 0,
        2..=3 => 1,
        4..=7 => 2,
        8..=15 => 3,
        16..=31 => 4,
        32..=63 => 5,
        _ => 6,
    }
}

/// Callbacks a job's submitters make around each I/O, from the submitting task. The scenario
/// stack uses them to tag bios with the app's foreground state and to record per-op latency.
pub trait IoHooks {
    /// Whether the issuing app is in the foreground now (the bio's hint to the device).
    fn foreground(&self) -> bool {
        false
    }
    /// Just before an I/O of direction `op` is submitted.
    fn started(&self, _op: IoOp) {}
    /// Just after the I/O completed.
    fn finished(&self, _op: IoOp, _bytes: u64) {}
    /// The job stopped on an error (`message` names the job and the error), as fio stops a
    /// job on its first error (`continue_on_error=none`, its default).
    fn failed(&self, _message: &str) {}
}

/// Hooks that do nothing (`mobistack fio`).
pub struct NoHooks;
impl IoHooks for NoHooks {}

/// When an I/O's submission ended and when it completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoTimes {
    pub submitted_ns: Nanos,
    pub completed_ns: Nanos,
}

/// The future of one I/O of a [`JobTarget`]: its times, or the error that failed it.
pub type IoFuture<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<IoTimes, String>> + 'a>>;

/// The future of a [`JobTarget::prepare`]: Ok, or why the job cannot start.
pub type PrepareFuture<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + 'a>>;

/// Where a job clone's I/O goes: the raw device ([`DirectTarget`]) or a file through the page
/// cache (`crate::workload::fio::BufferedTarget`).
pub trait JobTarget {
    /// Called by each submitter before its first I/O, from its task (a buffered job opens its
    /// file here). An error ends the job.
    fn prepare<'a>(&'a self, _sim: &'a Sim) -> PrepareFuture<'a> {
        Box::pin(async { Ok(()) })
    }

    /// Performs one I/O of `bytes` at `offset` of the job's region (device or file), from the
    /// current task, and returns when it completed; an error (the system call's) ends the job.
    fn io<'a>(
        &'a self,
        sim: &'a Sim,
        op: IoOp,
        offset: u64,
        bytes: u64,
        foreground: bool,
    ) -> IoFuture<'a>;

    /// The target as a [`DirectTarget`], whose I/O a submitter awaits in place (no boxed
    /// future per I/O). Default: not one.
    fn as_direct(&self) -> Option<&DirectTarget> {
        None
    }
}

/// O_DIRECT on the block device: bios straight to the block layer.
pub struct DirectTarget {
    pub layer: BlockLayer,
    pub next_bio: Rc<Cell<u64>>,
    pub task: TaskRef,
    pub ioprio: IoPrio,
}

impl JobTarget for DirectTarget {
    fn io<'a>(
        &'a self,
        sim: &'a Sim,
        op: IoOp,
        offset: u64,
        bytes: u64,
        foreground: bool,
    ) -> IoFuture<'a> {
        Box::pin(async move { Ok(self.direct_io(sim, op, offset, bytes, foreground).await) })
    }

    fn as_direct(&self) -> Option<&DirectTarget> {
        Some(self)
    }
}

impl DirectTarget {
    /// [`JobTarget::io`]: one I/O of `bytes` at `offset` of the device.
    pub async fn direct_io(
        &self,
        sim: &Sim,
        op: IoOp,
        offset: u64,
        bytes: u64,
        foreground: bool,
    ) -> IoTimes {
        let layer = &self.layer;
        let started = sim.now();
        let bio = Bio {
            id: self.next_bio.get(),
            op,
            sector: offset / SECTOR_SIZE,
            nr_sectors: (bytes / SECTOR_SIZE) as u32,
            flags: IoFlags {
                // `WRITE_ODIRECT = WRITE | REQ_SYNC` (3.10); reads are sync by nature.
                sync: op == IoOp::Write,
                ..IoFlags::default()
            },
            task: self.task.clone(),
            ioprio: self.ioprio,
            issued_async: false,
            foreground,
            owner_uid: self.task.uid,
            pages: Vec::new(),
            submitted_ns: started,
        };
        let mut id = self.next_bio.get() + 1;
        let max_sectors = layer.with_queue(|queue| queue.max_sectors);
        let pid = self.task.pid;
        if bio.nr_sectors <= max_sectors {
            // One piece (what `split_bio` returns then), without its vectors.
            self.next_bio.set(id);
            layer.start_plug(pid);
            let handle = layer.submit_bio(bio).await;
            layer.finish_plug(pid);
            let submitted_ns = sim.now();
            let completed_ns = submitted_ns.max(layer.wait(pid, &handle).await);
            return IoTimes {
                submitted_ns,
                completed_ns,
            };
        }
        let pieces = split_bio(bio, max_sectors, &mut id);
        self.next_bio.set(id);
        layer.start_plug(pid);
        let mut handles = Vec::with_capacity(pieces.len());
        for piece in pieces {
            handles.push(layer.submit_bio(piece).await);
        }
        layer.finish_plug(pid);
        let submitted_ns = sim.now();
        let mut completed_ns = submitted_ns;
        for handle in &handles {
            completed_ns = completed_ns.max(layer.wait(pid, handle).await);
        }
        IoTimes {
            submitted_ns,
            completed_ns,
        }
    }
}

/// State shared by the submitters of one job clone.
pub struct JobState {
    pub job: FioJob,
    pub pid: u32,
    pub uid: u32,
    pub comm: String,
    region_start: u64,
    region_bytes: u64,
    issued_bytes: Cell<u64>,
    cursor: Cell<u64>,
    in_flight: Cell<u32>,
    rng: RefCell<Rng>,
    stats: RefCell<JobStats>,
    /// The error that stopped the job (fio's `err=`), if one did.
    error: RefCell<Option<String>>,
}

impl JobState {
    /// A job clone run by process `pid` of user `uid` (`comm` in traces) over a region of a
    /// device (or file) `capacity_bytes` large. Errors name the job.
    pub fn new(
        job: FioJob,
        pid: u32,
        uid: u32,
        comm: &str,
        capacity_bytes: u64,
        rng: Rng,
    ) -> Result<JobState, String> {
        let (region_start, region_bytes) = job.check_region(capacity_bytes)?;
        Ok(JobState {
            job,
            pid,
            uid,
            comm: comm.to_string(),
            region_start,
            region_bytes,
            issued_bytes: Cell::new(0),
            cursor: Cell::new(0),
            in_flight: Cell::new(0),
            rng: RefCell::new(rng),
            stats: RefCell::new(JobStats::default()),
            error: RefCell::new(None),
        })
    }

    /// The bytes the job's file must have (buffered jobs): the end of its region.
    pub fn file_bytes(&self) -> u64 {
        self.region_start + self.region_bytes
    }

    /// What the job did so far.
    pub fn stats(&self) -> JobStats {
        self.stats.borrow().clone()
    }

    /// The error that stopped the job, naming the job, if one did.
    pub fn error(&self) -> Option<String> {
        self.error.borrow().clone()
    }

    /// Stops the job on `error` (its other submitters stop before their next I/O), and tells
    /// `hooks` once.
    fn fail(&self, error: &str, hooks: &dyn IoHooks) {
        if self.error.borrow().is_some() {
            return;
        }
        let message = format!("job `{}`: {error}", self.job.name);
        hooks.failed(&message);
        *self.error.borrow_mut() = Some(message);
    }

    /// Starts the job now: spawns one submitter task per slot of the effective `iodepth`, each
    /// with the hooks `hooks(slot)` returns, all doing their I/O on `target`.
    pub fn spawn(
        self: &Rc<Self>,
        sim: &Sim,
        target: Rc<dyn JobTarget>,
        hooks: impl Fn(u32) -> Rc<dyn IoHooks>,
    ) -> Vec<crate::sim::JoinHandle<()>> {
        self.begin(sim.now());
        (0..self.job.effective_iodepth())
            .map(|slot| {
                let task = submitter(sim.clone(), self.clone(), target.clone(), hooks(slot));
                sim.spawn(&format!("{}/{slot}", self.job.name), task)
            })
            .collect()
    }

    /// Marks the job as started at `now` (its runtime, rate and sample windows count from
    /// here). [`JobState::spawn`] calls it; real mode (src/real/exec.rs) calls it for its
    /// threads.
    pub fn begin(&self, now: Nanos) {
        let mut stats = self.stats.borrow_mut();
        stats.start_ns = now;
        stats.end_ns = now;
    }

    /// With `rate`: when the next I/O is due, the time at which the bytes issued so far have
    /// been "paid for" (issue no faster than `rate`); `None` without a rate.
    pub fn rate_due(&self) -> Option<Nanos> {
        let rate = self.job.rate?;
        let start = self.stats.borrow().start_ns;
        Some(
            start
                + (u128::from(self.issued_bytes.get()) * u128::from(NS_PER_SEC) / u128::from(rate))
                    as Nanos,
        )
    }

    /// The next I/O to issue at `now` (its direction and offset in the device or file), or
    /// `None` when the job is done.
    pub fn next_io(&self, now: Nanos) -> Option<(IoOp, u64)> {
        let job = &self.job;
        if self.error.borrow().is_some() {
            return None;
        }
        let start = self.stats.borrow().start_ns;
        if job.runtime.is_some_and(|runtime| now >= start + runtime) {
            return None;
        }
        if !job.time_based && self.issued_bytes.get() >= self.region_bytes {
            return None;
        }
        let blocks = self.region_bytes / job.bs;
        let mut rng = self.rng.borrow_mut();
        let block = if job.rw.random() {
            rng.below(blocks)
        } else {
            let block = self.cursor.get() % blocks;
            self.cursor.set(self.cursor.get() + 1);
            block
        };
        let op = match job.rw {
            RwMode::Read | RwMode::RandRead => IoOp::Read,
            RwMode::Write | RwMode::RandWrite => IoOp::Write,
            RwMode::Trim | RwMode::RandTrim => IoOp::Discard,
            RwMode::ReadWrite | RwMode::RandRw => {
                if rng.below(100) < u64::from(job.rwmixread) {
                    IoOp::Read
                } else {
                    IoOp::Write
                }
            }
        };
        self.issued_bytes.set(self.issued_bytes.get() + job.bs);
        Some((op, self.region_start + block * job.bs))
    }

    /// Accounts one completed I/O that started at `started`.
    pub fn completed(&self, op: IoOp, started: Nanos, times: IoTimes) {
        let mut stats = self.stats.borrow_mut();
        let window = ((times.completed_ns - stats.start_ns) / SAMPLE_WINDOW_NS) as usize;
        let bs = self.job.bs;
        let direction = &mut stats.directions[ddir(op)];
        direction.ios += 1;
        direction.bytes += bs;
        let clat = if self.job.is_async() {
            direction.slat.record(times.submitted_ns - started);
            times.completed_ns - times.submitted_ns
        } else {
            // Synchronous engines: the whole call is completion latency (fio records no slat).
            times.completed_ns - started
        };
        direction.clat.record(clat);
        direction.lat.record(times.completed_ns - started);
        if direction.window_bytes.len() <= window {
            direction.window_bytes.resize(window + 1, 0);
            direction.window_ios.resize(window + 1, 0);
        }
        direction.window_bytes[window] += bs;
        direction.window_ios[window] += 1;
        stats.lat_ranges.mark(clat);
        stats.end_ns = stats.end_ns.max(times.completed_ns);
    }
}

/// One submitter (one slot of `iodepth`) of a job clone.
async fn submitter(
    sim: Sim,
    state: Rc<JobState>,
    target: Rc<dyn JobTarget>,
    hooks: Rc<dyn IoHooks>,
) {
    let job = &state.job;
    if let Err(error) = target.prepare(&sim).await {
        state.fail(&error, hooks.as_ref());
        return;
    }
    loop {
        if let Some(due) = state.rate_due() {
            if due > sim.now() {
                sim.sleep(due - sim.now()).await;
            }
        }
        let Some((op, offset)) = state.next_io(sim.now()) else {
            break;
        };
        hooks.started(op);
        let started = sim.now();
        let depth = state.in_flight.get() + 1;
        state.in_flight.set(depth);
        state.stats.borrow_mut().depth_buckets[depth_bucket(depth)] += 1;
        let times = match target.as_direct() {
            Some(direct) => {
                direct
                    .direct_io(&sim, op, offset, job.bs, hooks.foreground())
                    .await
            }
            None => {
                match target
                    .io(&sim, op, offset, job.bs, hooks.foreground())
                    .await
                {
                    Ok(times) => times,
                    Err(error) => {
                        state.in_flight.set(state.in_flight.get() - 1);
                        state.fail(&error, hooks.as_ref());
                        break;
                    }
                }
            }
        };
        state.in_flight.set(state.in_flight.get() - 1);
        state.completed(op, started, times);
        hooks.finished(op, job.bs);
    }
}

/// The request queue of a device under `elevator`, with its allocation model, optionally tracing
/// under the device's numbers (`179,0` mmcblk0 for eMMC and SD, `8,0` sda for UFS and SATA).
/// Shared by `mobistack fio` and the scenario stack.
pub fn build_queue(
    device: Box<dyn BlockDevice>,
    elevator: &str,
    trace: bool,
) -> Result<RequestQueue, String> {
    let config = super::BlockConfig {
        elevator: elevator.to_string(),
        blktrace: trace,
        ..super::BlockConfig::default()
    };
    RequestQueue::from_config(device, &config, &crate::kernel::KernelConfig::default())
}

/// A job from `option = value` pairs (a scenario's `[app.workload.fio]` table), with fio's
/// names, units and errors. `stonewall` has no meaning inside one app and is rejected.
pub fn job_from_options(
    name: &str,
    options: &[(String, Option<String>)],
) -> Result<FioJob, String> {
    job_from_pairs(name, options).map_err(|e| crate::units::cut_message(&e))
}

fn job_from_pairs(name: &str, options: &[(String, Option<String>)]) -> Result<FioJob, String> {
    let mut job = FioJob {
        name: name.to_string(),
        ..FioJob::default()
    };
    for (option, value) in options {
        if matches!(option.as_str(), "stonewall" | "wait_for_previous" | "name") {
            return Err(format!(
                "fio option `{option}` is not available in an app workload (one app is one job)"
            ));
        }
        apply_option(&mut job, option, value.as_deref())
            .map_err(|e| crate::units::cut_words(&e))?;
    }
    if job.time_based && job.runtime.is_none() {
        return Err(
            "time_based needs a runtime above 0 (fio: \"time_based requires a runtime/timeout setting\")"
                .to_string(),
        );
    }
    check_submitters(std::slice::from_ref(&job))?;
    Ok(job)
}

/// The jobs' submitter tasks (`numjobs` x `iodepth`, summed) stay under [`MAX_SUBMITTERS`].
fn check_submitters(jobs: &[FioJob]) -> Result<(), String> {
    let total: u64 = jobs
        .iter()
        .map(|job| u64::from(job.numjobs) * u64::from(job.iodepth))
        .sum();
    if total > MAX_SUBMITTERS {
        return Err(format!(
            "`numjobs` x `iodepth` adds up to {total} I/Os in flight, more than the {MAX_SUBMITTERS} mobistack runs"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::NS_PER_MS;

    const JOBS: &str = "
; two jobs, fio syntax
[global]
direct=1
ioengine=libaio
size=4m

[seqread]
rw=read
bs=128k
iodepth=4

[randwrite]
stonewall
rw=randwrite
bs=4k
iodepth=8
numjobs=2
prioclass=3
";

    #[test]
    fn job_files_parse_with_global_defaults() {
        let jobs = parse_job_file(JOBS).unwrap();
        assert_eq!(jobs.len(), 2);
        assert_eq!(jobs[0].name, "seqread");
        assert_eq!(
            (jobs[0].bs, jobs[0].iodepth, jobs[0].size),
            (128 << 10, 4, Some(4 << 20))
        );
        assert_eq!(jobs[1].rw, RwMode::RandWrite);
        assert!(jobs[1].stonewall && !jobs[0].stonewall);
        assert_eq!(jobs[1].numjobs, 2);
        assert_eq!(jobs[1].ioprio.class, IoPrioClass::Idle);
        assert_eq!(parse_fio_time("runtime", "30").unwrap(), 30 * NS_PER_SEC);
        assert_eq!(parse_fio_time("runtime", "2m").unwrap(), 120 * NS_PER_SEC);
        assert_eq!(parse_fio_time("runtime", "500ms").unwrap(), 500 * NS_PER_MS);
        // Seconds that would overflow (or pass the documented limit) are an error.
        for huge in ["18446744073709551615", "18446744074", "31536001"] {
            let error = parse_fio_time("runtime", huge).unwrap_err();
            assert!(error.contains("at most 365 days"), "{error}");
        }
    }

    #[test]
    fn histogram_buckets_are_fios() {
        // Small values are exact; above 2^7 each power of two has 64 buckets.
        assert_eq!(plat_val_to_idx(100), 100);
        assert_eq!(plat_idx_to_val(100), 100);
        assert_eq!(plat_val_to_idx(128), 128);
        // 1,000,000 ns: msb 19, 13 error bits, bucket 14*64 + (1e6 >> 13 & 63).
        let index = plat_val_to_idx(1_000_000);
        assert_eq!(index, 14 * 64 + ((1_000_000usize >> 13) & 63));
        let value = plat_idx_to_val(index);
        assert!(
            (value as f64 - 1e6).abs() / 1e6 < 1.0 / 128.0,
            "{value}: within fio's 1/2^(bits+1) error"
        );
        for v in [
            0u64,
            1,
            63,
            64,
            129,
            4_096,
            123_456_789,
            u64::MAX / 4,
            u64::MAX,
        ] {
            assert!(plat_val_to_idx(v) < PLAT_NR, "{v}");
        }
    }

    #[test]
    fn latency_stats_follow_add_stat_sample_and_calc_lat() {
        // A known sequence from ns to seconds, with repeats and a large offset (where a naive
        // sum of squares would lose digits).
        let values: Vec<u64> = (0..10_000u64)
            .map(|i| match i % 5 {
                0 => 3_000_000_000 + (i * 7_919) % 100_003,
                1 => 250_000 + (i * 104_729) % 1_000_000,
                2 => i % 1_000,
                3 => 42,
                _ => 1_000_000_000_000 / (i + 1),
            })
            .collect();
        let mut stats = LatencyStats::default();
        for &value in &values {
            stats.record(value);
        }
        // The two-pass computation over the exact values.
        let n = values.len() as f64;
        let mean = values.iter().map(|&v| v as f64).sum::<f64>() / n;
        let squares: f64 = values.iter().map(|&v| (v as f64 - mean).powi(2)).sum();
        let stddev = (squares / (n - 1.0)).sqrt();
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs();
        assert!(close(stats.mean(), mean), "{} vs {mean}", stats.mean());
        assert!(
            close(stats.stddev(), stddev),
            "{} vs {stddev}",
            stats.stddev()
        );
        assert_eq!(stats.samples(), 10_000);
        assert_eq!(stats.min(), *values.iter().min().unwrap());
        assert_eq!(stats.max(), *values.iter().max().unwrap());
        assert_eq!(stats.buckets().map(|(_, count)| count).sum::<u64>(), 10_000);

        // None, one, and equal samples.
        let mut stats = LatencyStats::default();
        assert_eq!(
            (
                stats.samples(),
                stats.min(),
                stats.max(),
                stats.mean(),
                stats.stddev()
            ),
            (0, 0, 0, 0.0, 0.0)
        );
        assert_eq!(stats.buckets().count(), 0);
        stats.record(5_000);
        assert_eq!(
            (
                stats.samples(),
                stats.min(),
                stats.max(),
                stats.mean(),
                stats.stddev()
            ),
            (1, 5_000, 5_000, 5_000.0, 0.0)
        );
        stats.record(5_000);
        stats.record(0);
        assert_eq!((stats.samples(), stats.min(), stats.max()), (3, 0, 5_000));
        assert!(close(stats.stddev(), (5_000.0f64 * 5_000.0 / 3.0).sqrt()));
        assert_eq!(
            stats.buckets().collect::<Vec<_>>(),
            vec![(0, 1), (plat_val_to_idx(5_000), 2)]
        );
    }

    #[test]
    fn latency_ranges_follow_io_u_mark_latency() {
        let mut ranges = LatencyRanges::default();
        for value in [
            0,
            1,
            2,
            999,
            1_000,
            1_999,
            99_999,
            999_999,
            1_000_000,
            1_999_999_999,
            2_000_000_000,
            u64::MAX,
        ] {
            ranges.mark(value);
        }
        assert_eq!(ranges.nsec, [2, 1, 0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(ranges.usec, [2, 0, 0, 0, 0, 1, 0, 0, 0, 1]);
        assert_eq!(ranges.msec, [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2]);
        assert_eq!(ranges.total(), 12);
    }

    #[test]
    fn unsupported_options_are_errors_naming_them() {
        let error = parse_job_file("[a]\ndirect=1\nverify=md5\n").unwrap_err();
        assert!(
            error.contains("`verify`") && error.contains("line 3"),
            "{error}"
        );
        assert!(parse_job_file("[a]\nbs=4k,64k\n")
            .unwrap_err()
            .contains("bs=4k,64k"));
        assert!(parse_job_file("[global]\nbs=4k\n").is_err());
        assert!(parse_job_file("[a]\nbs=1t\n")
            .unwrap_err()
            .contains("at most 64m"));
        // Found by fuzzing: a long line with spaces was echoed whole.
        let long = format!("[a]\n{} x\n", "word ".repeat(2_000));
        let error = parse_job_file(&long).unwrap_err();
        assert!(error.len() < 1_200, "a {}-byte error", error.len());
        let error = parse_job_file("[a]\nnumjobs=256\niodepth=4096\n").unwrap_err();
        assert!(error.contains("more than the 65536"), "{error}");
        assert!(parse_job_file("[a]\nioengine=mmap\n")
            .unwrap_err()
            .contains("mmap"));
    }
}
