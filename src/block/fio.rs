//! A block-level workload that reads fio job files, so users can reuse the jobs they already have.
//!
//! Supported subset (fio's HOWTO names and units): `[global]` and job sections; `rw` / `readwrite`
//! (read, write, randread, randwrite, rw / readwrite, randrw, trim, randtrim), `rwmixread`,
//! `rwmixwrite`, `bs` / `blocksize`, `iodepth`, `size`, `offset`, `numjobs`, `direct`, `ioengine`,
//! `prio`, `prioclass` (and `ioprio` as an alias of `prio`), `rate`, `runtime`, `time_based`,
//! `stonewall` / `wait_for_previous`, `filename` and `description` (informational). Sizes use
//! fio's default base 1024 ("4k" = 4096); `runtime` without a unit is seconds; `rate` is bytes per
//! second. Any other option is an error naming it: nothing is silently ignored.
//!
//! Model of a job: each of the `numjobs` clones is a process (its own pid, so CFQ gives it its own
//! sync queue). O_DIRECT I/O is submitted as bios that bypass the page cache; writes carry
//! REQ_SYNC, as 3.10's `WRITE_ODIRECT` does. An asynchronous engine (libaio, io_uring, posixaio)
//! keeps `iodepth` I/Os in flight, modelled as `iodepth` submitters in the process; synchronous
//! engines (sync, psync, pvsync, pvsync2; psync is fio's default) have depth 1. An I/O larger
//! than `max_sectors` is split into bios submitted under a plug (as `__blkdev_direct_IO` does).
//! Latency is measured from submission to the completion of the last bio, including any sleep in
//! `get_request` (fio's `lat`).
//!
//! Not supported (errors): buffered I/O (`direct=0`, fio's default, needs the page cache), split
//! read/write values ("4k,64k"), and everything not listed above.

use super::blktrace::BlkTrace;
use super::layer::BlockLayer;
use super::queue::{split_bio, QueueStats, RequestQueue};
use super::request::{Bio, IoPrio, IoPrioClass, TaskRef};
use crate::dev::{BlockDevice, IoFlags, IoOp};
use crate::sim::{Rng, Sim, Simulation};
use crate::units::{format_ms, parse_duration, Nanos, NS_PER_SEC, SECTOR_SIZE};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::rc::Rc;

/// Bound on job sections and clones in one file.
const MAX_JOBS: usize = 256;
/// Bound on `iodepth`.
const MAX_IODEPTH: u32 = 4096;
/// First pid given to fio processes.
const FIRST_PID: u32 = 1000;

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
    /// Region size; `None` = the whole device.
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
}

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
        }
    }
}

impl FioJob {
    /// `iodepth` as the engine honours it.
    pub fn effective_iodepth(&self) -> u32 {
        if matches!(self.ioengine.as_str(), "libaio" | "io_uring" | "posixaio") {
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
        let seconds: u64 = text
            .parse()
            .map_err(|_| format!("{option}={value}: too large"))?;
        return Ok(seconds * NS_PER_SEC);
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
        "description" | "filename" => {
            need()?;
        }
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
            if bs == 0 || bs % SECTOR_SIZE != 0 {
                return Err(format!(
                    "{option}={value}: must be a positive multiple of 512"
                ));
            }
            job.bs = bs;
        }
        "iodepth" => job.iodepth = parse_number(option, need()?, 1, u64::from(MAX_IODEPTH))? as u32,
        "size" => job.size = Some(parse_fio_size(option, need()?)?),
        "offset" => job.offset = parse_fio_size(option, need()?)?,
        "numjobs" => job.numjobs = parse_number(option, need()?, 1, MAX_JOBS as u64)? as u32,
        "direct" => {
            if !parse_bool(option, value)? {
                return Err("direct=0: buffered I/O goes through the page cache, which the block-level fio runner does not model; use direct=1".to_string());
            }
        }
        "buffered" => {
            if parse_bool(option, value)? {
                return Err("buffered=1: buffered I/O is not supported by the block-level fio runner; use direct=1".to_string());
            }
        }
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
        "runtime" => job.runtime = Some(parse_fio_time(option, need()?)?),
        "time_based" => job.time_based = parse_bool(option, value)?,
        "stonewall" | "wait_for_previous" => job.stonewall = parse_bool(option, value)?,
        _ => return Err(format!("unsupported fio option `{option}`")),
    }
    Ok(())
}

/// Parses a job file. Errors name the line and the option.
pub fn parse_job_file(text: &str) -> Result<Vec<FioJob>, String> {
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
            .map_err(|error| format!("line {line_number}: {error}"))?;
    }
    if let Some(job) = current.take() {
        jobs.push(job);
    }
    if jobs.is_empty() {
        return Err("the job file defines no job (only [global] or nothing)".to_string());
    }
    Ok(jobs)
}

/// Latency distribution of one direction of one job.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct LatencySummary {
    pub ios: u64,
    pub bytes: u64,
    pub mean_ns: f64,
    pub p50_ns: Nanos,
    pub p90_ns: Nanos,
    pub p99_ns: Nanos,
    pub max_ns: Nanos,
}

impl LatencySummary {
    fn from_samples(mut samples: Vec<Nanos>, bytes: u64) -> LatencySummary {
        if samples.is_empty() {
            return LatencySummary::default();
        }
        samples.sort_unstable();
        let percentile = |p: usize| samples[((samples.len() * p).div_ceil(100)).max(1) - 1];
        LatencySummary {
            ios: samples.len() as u64,
            bytes,
            mean_ns: samples.iter().map(|&s| s as f64).sum::<f64>() / samples.len() as f64,
            p50_ns: percentile(50),
            p90_ns: percentile(90),
            p99_ns: percentile(99),
            max_ns: *samples.last().expect("non-empty"),
        }
    }
}

/// Results of one job clone.
#[derive(Debug, Clone, serde::Serialize)]
pub struct JobResult {
    pub name: String,
    pub pid: u32,
    pub read: LatencySummary,
    pub write: LatencySummary,
    pub start_ns: Nanos,
    pub end_ns: Nanos,
}

impl JobResult {
    fn elapsed_ns(&self) -> Nanos {
        self.end_ns.saturating_sub(self.start_ns).max(1)
    }
}

/// Everything a fio run produced.
pub struct FioReport {
    pub elevator: String,
    pub device: String,
    pub jobs: Vec<JobResult>,
    pub stats: QueueStats,
    pub trace: Option<BlkTrace>,
    pub end_ns: Nanos,
}

/// Options of [`run_fio`].
#[derive(Debug, Clone, Copy)]
pub struct FioOptions {
    pub seed: u64,
    /// Record a blktrace log.
    pub trace: bool,
}

impl Default for FioOptions {
    fn default() -> Self {
        FioOptions {
            seed: 1,
            trace: false,
        }
    }
}

/// Callbacks a job's submitters make around each I/O, from the submitting task. The scenario
/// stack uses them to tag bios with the app's foreground state and to record per-op latency.
pub trait IoHooks {
    /// Whether the issuing app is in the foreground now (the bio's hint to the device).
    fn foreground(&self) -> bool {
        false
    }
    /// Just before an I/O is submitted.
    fn started(&self) {}
    /// Just after the I/O completed.
    fn finished(&self, _op: IoOp, _bytes: u64) {}
}

struct NoHooks;
impl IoHooks for NoHooks {}

/// State shared by the submitters of one job clone.
pub struct JobState {
    job: FioJob,
    pid: u32,
    uid: u32,
    comm: String,
    region_start: u64,
    region_bytes: u64,
    start_ns: Cell<Nanos>,
    issued_bytes: Cell<u64>,
    cursor: Cell<u64>,
    rng: RefCell<Rng>,
    samples: RefCell<[Vec<Nanos>; 2]>,
    bytes_done: Cell<[u64; 2]>,
    end_ns: Cell<Nanos>,
}

impl JobState {
    /// A job clone run by process `pid` of user `uid` (`comm` in traces) over the device
    /// `capacity_bytes` large. Errors name the job.
    pub fn new(
        job: FioJob,
        pid: u32,
        uid: u32,
        comm: &str,
        capacity_bytes: u64,
        rng: Rng,
    ) -> Result<JobState, String> {
        let region_start = job.offset;
        let region_bytes = match job.size {
            Some(size) => size,
            None => capacity_bytes.saturating_sub(region_start),
        };
        if region_start + region_bytes > capacity_bytes {
            return Err(format!(
                "job `{}`: offset + size ({} bytes) exceeds the device capacity ({capacity_bytes} bytes)",
                job.name,
                region_start + region_bytes
            ));
        }
        if region_bytes < job.bs {
            return Err(format!("job `{}`: size is smaller than bs", job.name));
        }
        if job.time_based && job.runtime.is_none() {
            return Err(format!("job `{}`: time_based needs runtime", job.name));
        }
        Ok(JobState {
            job,
            pid,
            uid,
            comm: comm.to_string(),
            region_start,
            region_bytes,
            start_ns: Cell::new(0),
            issued_bytes: Cell::new(0),
            cursor: Cell::new(0),
            rng: RefCell::new(rng),
            samples: RefCell::new([Vec::new(), Vec::new()]),
            bytes_done: Cell::new([0, 0]),
            end_ns: Cell::new(0),
        })
    }

    /// Starts the job now: spawns one submitter task per slot of the effective `iodepth`, each
    /// with the hooks `hooks(slot)` returns.
    pub fn spawn(
        self: &Rc<Self>,
        sim: &Sim,
        layer: &BlockLayer,
        next_bio: &Rc<Cell<u64>>,
        hooks: impl Fn(u32) -> Rc<dyn IoHooks>,
    ) -> Vec<crate::sim::JoinHandle<()>> {
        self.start_ns.set(sim.now());
        self.end_ns.set(sim.now());
        (0..self.job.effective_iodepth())
            .map(|slot| {
                let task = submitter(
                    sim.clone(),
                    layer.clone(),
                    self.clone(),
                    next_bio.clone(),
                    hooks(slot),
                );
                sim.spawn(&format!("{}/{slot}", self.job.name), task)
            })
            .collect()
    }

    /// The next I/O to issue, or `None` when the job is done.
    fn next_io(&self, now: Nanos) -> Option<(IoOp, u64)> {
        let job = &self.job;
        if job
            .runtime
            .is_some_and(|runtime| now >= self.start_ns.get() + runtime)
        {
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
}

/// One submitter (one slot of `iodepth`) of a job clone.
async fn submitter(
    sim: Sim,
    layer: BlockLayer,
    state: Rc<JobState>,
    next_bio: Rc<Cell<u64>>,
    hooks: Rc<dyn IoHooks>,
) {
    let job = &state.job;
    loop {
        if let Some(rate) = job.rate {
            // Issue no faster than `rate`: the next I/O is due when the bytes issued so far have
            // been "paid for".
            let due = state.start_ns.get()
                + (u128::from(state.issued_bytes.get()) * u128::from(NS_PER_SEC) / u128::from(rate))
                    as Nanos;
            if due > sim.now() {
                sim.sleep(due - sim.now()).await;
            }
        }
        let Some((op, offset)) = state.next_io(sim.now()) else {
            break;
        };
        hooks.started();
        let started = sim.now();
        let bio = Bio {
            id: next_bio.get(),
            op,
            sector: offset / SECTOR_SIZE,
            nr_sectors: (job.bs / SECTOR_SIZE) as u32,
            flags: IoFlags {
                // `WRITE_ODIRECT = WRITE | REQ_SYNC` (3.10); reads are sync by nature.
                sync: op == IoOp::Write,
                ..IoFlags::default()
            },
            task: TaskRef {
                pid: state.pid,
                tgid: state.pid,
                uid: state.uid,
                comm: state.comm.clone(),
            },
            ioprio: job.ioprio,
            issued_async: false,
            foreground: hooks.foreground(),
            pages: Vec::new(),
            submitted_ns: started,
        };
        let mut id = next_bio.get() + 1;
        let max_sectors = layer.with_queue(|queue| queue.max_sectors);
        let pieces = split_bio(bio, max_sectors, &mut id);
        next_bio.set(id);
        layer.start_plug(state.pid);
        let mut handles = Vec::with_capacity(pieces.len());
        for piece in pieces {
            handles.push(layer.submit_bio(piece).await);
        }
        layer.finish_plug(state.pid);
        let mut finished = started;
        for handle in &handles {
            finished = finished.max(layer.wait(state.pid, handle).await);
        }
        let direction = usize::from(op != IoOp::Read);
        state.samples.borrow_mut()[direction].push(finished - started);
        let mut bytes = state.bytes_done.get();
        bytes[direction] += job.bs;
        state.bytes_done.set(bytes);
        state.end_ns.set(state.end_ns.get().max(finished));
        hooks.finished(op, job.bs);
    }
}

/// The request queue of a device under `elevator`, with its allocation model, optionally tracing
/// (as `179,0`: mmcblk0, the eMMC of the papers' phones). Shared by `mobistack fio` and the
/// scenario stack.
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
    RequestQueue::from_config(device, &config, crate::kernel::KernelConfig::default().hz)
}

/// A job from `option = value` pairs (a scenario's `[app.workload.fio]` table), with fio's
/// names, units and errors. `stonewall` has no meaning inside one app and is rejected.
pub fn job_from_options(
    name: &str,
    options: &[(String, Option<String>)],
) -> Result<FioJob, String> {
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
        apply_option(&mut job, option, value.as_deref())?;
    }
    if job.time_based && job.runtime.is_none() {
        return Err("time_based needs runtime".to_string());
    }
    Ok(job)
}

/// Runs `jobs` against `device` under `elevator` in a fresh simulation.
pub fn run_fio(
    jobs: &[FioJob],
    device: Box<dyn BlockDevice>,
    elevator: &str,
    options: FioOptions,
) -> Result<FioReport, String> {
    let device_name = device.name().to_string();
    let capacity_bytes = device.capacity_sectors() * SECTOR_SIZE;
    let queue = build_queue(device, elevator, options.trace)?;
    let sim = Simulation::new(options.seed);
    let layer = BlockLayer::new(&sim.handle(), queue);
    let next_bio = Rc::new(Cell::new(1u64));
    // Clones, grouped by stonewall.
    let mut groups: Vec<Vec<Rc<JobState>>> = Vec::new();
    let mut pid = FIRST_PID;
    for job in jobs {
        if job.stonewall || groups.is_empty() {
            groups.push(Vec::new());
        }
        for clone in 0..job.numjobs {
            let name = if job.numjobs > 1 {
                format!("{}.{clone}", job.name)
            } else {
                job.name.clone()
            };
            let rng = sim.rng(&format!("fio/{name}"));
            let state = JobState::new(
                FioJob {
                    name,
                    ..job.clone()
                },
                pid,
                0,
                "fio",
                capacity_bytes,
                rng,
            )?;
            groups
                .last_mut()
                .expect("a group exists")
                .push(Rc::new(state));
            pid += 1;
        }
    }
    let all: Vec<Rc<JobState>> = groups.iter().flatten().cloned().collect();
    let handle = sim.handle();
    let coordinator_layer = layer.clone();
    sim.spawn("fio", async move {
        for group in groups {
            let mut joins = Vec::new();
            for state in group {
                joins.extend(
                    state.spawn(&handle, &coordinator_layer, &next_bio, |_| Rc::new(NoHooks)),
                );
            }
            for join in joins {
                join.join(&handle).await;
            }
        }
    });
    sim.run_until(u64::MAX, true)
        .map_err(|deadlock| format!("fio run deadlocked: {deadlock}"))?;
    assert_eq!(
        layer.pending_bios(),
        0,
        "bios left in flight at the end of the run"
    );
    let results = all
        .iter()
        .map(|state| {
            let samples = std::mem::take(&mut *state.samples.borrow_mut());
            let [read, write] = samples;
            let bytes = state.bytes_done.get();
            JobResult {
                name: state.job.name.clone(),
                pid: state.pid,
                read: LatencySummary::from_samples(read, bytes[0]),
                write: LatencySummary::from_samples(write, bytes[1]),
                start_ns: state.start_ns.get(),
                end_ns: state.end_ns.get(),
            }
        })
        .collect();
    let (stats, trace) = layer.with_queue(|queue| (queue.stats(), queue.trace().cloned()));
    Ok(FioReport {
        elevator: elevator.to_string(),
        device: device_name,
        jobs: results,
        stats,
        trace,
        end_ns: sim.now(),
    })
}

/// Parses `text` and runs it: the library entry point behind `mobistack fio`.
pub fn run_fio_file(
    text: &str,
    device: Box<dyn BlockDevice>,
    elevator: &str,
    options: FioOptions,
) -> Result<FioReport, String> {
    let jobs = parse_job_file(text)?;
    run_fio(&jobs, device, elevator, options)
}

impl FioReport {
    /// A printable table: one row per job clone and direction, then the merge statistics.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "fio on {} under {} ({} ms of virtual time)",
            self.device,
            self.elevator,
            format_ms(self.end_ns as f64)
        );
        let _ = writeln!(
            out,
            "{:<16} {:>5} {:>5} {:>8} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "job",
            "pid",
            "dir",
            "ios",
            "IOPS",
            "MiB/s",
            "mean ms",
            "p50 ms",
            "p90 ms",
            "p99 ms",
            "max ms"
        );
        for job in &self.jobs {
            for (dir, summary) in [("read", &job.read), ("write", &job.write)] {
                if summary.ios == 0 {
                    continue;
                }
                let seconds = job.elapsed_ns() as f64 / NS_PER_SEC as f64;
                let _ = writeln!(
                    out,
                    "{:<16} {:>5} {:>5} {:>8} {:>10.0} {:>10.2} {:>9} {:>9} {:>9} {:>9} {:>9}",
                    job.name,
                    job.pid,
                    dir,
                    summary.ios,
                    summary.ios as f64 / seconds,
                    summary.bytes as f64 / seconds / (1 << 20) as f64,
                    format_ms(summary.mean_ns),
                    format_ms(summary.p50_ns as f64),
                    format_ms(summary.p90_ns as f64),
                    format_ms(summary.p99_ns as f64),
                    format_ms(summary.max_ns as f64),
                );
            }
        }
        let stats = &self.stats;
        let _ = writeln!(
            out,
            "merges: {} bios -> {} requests ({} plug merges, {} back merges, {} front merges; {:.2} bios/request); {} get_request sleeps",
            stats.bios,
            stats.requests,
            stats.plug_merges,
            stats.back_merges,
            stats.front_merges,
            stats.bios as f64 / stats.requests.max(1) as f64,
            stats.alloc_sleeps
        );
        out
    }

    /// Every number of the run, for the JSON results file.
    pub fn json(&self) -> serde_json::Value {
        let jobs: BTreeMap<String, serde_json::Value> = self
            .jobs
            .iter()
            .map(|job| {
                let seconds = job.elapsed_ns() as f64 / NS_PER_SEC as f64;
                let direction = |summary: &LatencySummary| {
                    serde_json::json!({
                        "ios": summary.ios,
                        "bytes": summary.bytes,
                        "iops": summary.ios as f64 / seconds,
                        "bandwidth_bytes_per_sec": summary.bytes as f64 / seconds,
                        "latency_ns": {
                            "mean": summary.mean_ns,
                            "p50": summary.p50_ns,
                            "p90": summary.p90_ns,
                            "p99": summary.p99_ns,
                            "max": summary.max_ns,
                        },
                    })
                };
                (
                    job.name.clone(),
                    serde_json::json!({
                        "pid": job.pid,
                        "start_ns": job.start_ns,
                        "end_ns": job.end_ns,
                        "read": direction(&job.read),
                        "write": direction(&job.write),
                    }),
                )
            })
            .collect();
        serde_json::json!({
            "elevator": self.elevator,
            "device": self.device,
            "end_ns": self.end_ns,
            "jobs": jobs,
            "queue": self.stats,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dev::fixed::FixedLatencyDevice;
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
    }

    #[test]
    fn unsupported_options_are_errors_naming_them() {
        let error = parse_job_file("[a]\ndirect=1\nverify=md5\n").unwrap_err();
        assert!(
            error.contains("`verify`") && error.contains("line 3"),
            "{error}"
        );
        let error = parse_job_file("[a]\ndirect=0\n").unwrap_err();
        assert!(error.contains("direct=0"), "{error}");
        assert!(parse_job_file("[a]\nbs=4k,64k\n")
            .unwrap_err()
            .contains("bs=4k,64k"));
        assert!(parse_job_file("[global]\nbs=4k\n").is_err());
        assert!(parse_job_file("[a]\nioengine=mmap\n")
            .unwrap_err()
            .contains("mmap"));
    }

    #[test]
    fn a_job_file_runs_and_reports_latency_and_throughput() {
        // 1 slot, 100 us per request plus 100 MB/s.
        let device = FixedLatencyDevice::new(1, 100_000, 100_000_000);
        let options = FioOptions {
            seed: 7,
            trace: true,
        };
        let report = run_fio_file(JOBS, Box::new(device), "cfq", options).unwrap();
        assert_eq!(report.jobs.len(), 3);
        let seqread = &report.jobs[0];
        assert_eq!(seqread.read.ios, 32);
        assert_eq!(seqread.read.bytes, 4 << 20);
        // The stonewalled group starts after the first ends.
        assert!(report.jobs[1].start_ns >= seqread.end_ns);
        for clone in &report.jobs[1..] {
            assert_eq!(clone.write.ios, 1024);
        }
        // Sequential reads at depth 4 merge in the queue.
        assert!(report.stats.back_merges + report.stats.plug_merges > 0);
        let table = report.table();
        assert!(
            table.contains("seqread") && table.contains("randwrite.1"),
            "{table}"
        );
        let json = report.json();
        assert_eq!(json["jobs"]["randwrite.0"]["write"]["ios"], 1024);
        let trace = report.trace.as_ref().unwrap().to_blkparse();
        assert!(
            trace.lines().any(|line| line.contains(" C ")),
            "no completion in trace"
        );
        // Deterministic: the same run gives the same trace.
        let device = FixedLatencyDevice::new(1, 100_000, 100_000_000);
        let again = run_fio_file(JOBS, Box::new(device), "cfq", options).unwrap();
        assert_eq!(again.trace.unwrap().to_blkparse(), trace);
    }

    #[test]
    fn rate_limits_throughput() {
        let text = "[r]\ndirect=1\nrw=read\nbs=4k\nsize=1m\nrate=1m\n";
        let device = FixedLatencyDevice::new(1, 50_000, 0);
        let report = run_fio_file(text, Box::new(device), "noop", FioOptions::default()).unwrap();
        // 1 MiB at 1 MiB/s: about one second.
        let elapsed = report.jobs[0].end_ns - report.jobs[0].start_ns;
        assert!(
            (990 * NS_PER_MS..=1_001 * NS_PER_MS).contains(&elapsed),
            "{elapsed}"
        );
    }
}
