//! fio jobs as workloads: an app of a scenario that runs one fio job (`[app.workload.fio]` holds
//! fio's own options: `rw = "randread"`, `bs = "4k"`, `iodepth = 32`, ...; see [`super::job`] for
//! the supported subset), and `mobistack fio`, which runs a whole job file ([`run_fio_file`]).
//!
//! With `direct=1` a job's bios go straight to the block layer, tagged with the app's UID and
//! foreground state ([`DirectTarget`]); with `direct=0` (fio's default) the job reads and writes
//! a file through the VFS and the page cache ([`BufferedTarget`]): `pread` / `pwrite` of `bs`
//! bytes. The file is laid out before the job starts, on disk and not cached, as fio's layout
//! followed by its default `invalidate=1` leaves it. Each completed I/O is one `read`, `write` or
//! `trim` operation in the app's results.

use super::engine::{
    DirectTarget, IoFuture, IoHooks, IoTimes, JobState, JobTarget, NoHooks, PrepareFuture,
};
use super::job::{job_from_options, parse_job_file, FioJob, FIRST_PID};
use super::output::{FioJobReport, FioReport, LeftAtEnd};
use crate::app::AppContext;
use crate::block::build_queue;
use crate::block::layer::BlockLayer;
use crate::block::request::TaskRef;
use crate::dev::{BlockDevice, IoOp};
use crate::fs::vfs::{Process, Vfs, O_CREAT, O_DIRECT, O_RDWR};
use crate::report::recorder::OpTimer;
use crate::sim::{Sim, Simulation, TaskId};
use crate::units::{Nanos, SECTOR_SIZE};
use serde::{Deserialize, Serialize};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

/// fio options as written in the scenario: strings, integers or booleans.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(transparent)]
pub struct FioWorkloadConfig {
    pub options: BTreeMap<String, toml::Value>,
}

impl FioWorkloadConfig {
    /// The job, named after the app; errors use fio's option names.
    pub fn job(&self, app: &str) -> Result<FioJob, String> {
        let mut pairs = Vec::with_capacity(self.options.len());
        for (option, value) in &self.options {
            let value = match value {
                toml::Value::String(text) => Some(text.clone()),
                toml::Value::Integer(n) => Some(n.to_string()),
                toml::Value::Float(x) => Some(x.to_string()),
                // `time_based = true` is fio's bare `time_based`.
                toml::Value::Boolean(true) => None,
                toml::Value::Boolean(false) => Some("0".to_string()),
                other => {
                    return Err(format!(
                        "fio option `{option}`: expected a string, number or boolean, not {}",
                        other.type_str()
                    ))
                }
            };
            pairs.push((option.clone(), value));
        }
        job_from_options(app, &pairs).map_err(|e| format!("[app.workload.fio]: {e}"))
    }

    /// Whether the job does its I/O on a file (buffered, fio's default `direct=0`, or
    /// O_DIRECT with a `filename` or `directory`), so the stack needs the page cache and a
    /// file system.
    pub fn is_buffered(&self) -> bool {
        self.job("app").is_ok_and(|job| !job.on_device())
    }
}

/// Records each I/O as an operation of the app and tags bios with its foreground state.
struct AppHooks {
    ctx: AppContext,
    timer: RefCell<Option<OpTimer>>,
}

impl IoHooks for AppHooks {
    fn foreground(&self) -> bool {
        self.ctx.stack.activity.is_foreground(self.ctx.uid)
    }
    fn started(&self, op: IoOp) {
        *self.timer.borrow_mut() = Some(self.ctx.begin_op(op_name(op)));
    }
    fn finished(&self, _op: IoOp, bytes: u64) {
        let timer = self.timer.borrow_mut().take().expect("an I/O was started");
        self.ctx.end_op(timer);
        self.ctx.add_counter("bytes", bytes);
    }
    fn failed(&self, message: &str) {
        self.timer.borrow_mut().take();
        self.ctx.fail(format!("fio {message}"));
    }
}

/// The operation an I/O is recorded as.
fn op_name(op: IoOp) -> &'static str {
    match op {
        IoOp::Read => "read",
        IoOp::Write => "write",
        IoOp::Discard => "trim",
        IoOp::Flush => "flush",
    }
}

/// I/O on a file of the file system: `pread` / `pwrite` through the page cache (`direct=0`), or
/// with O_DIRECT (`direct=1`: fio opens its files with `O_DIRECT`, filesetup.c
/// `file_open`), which the VFS turns into bios of the file's blocks.
pub struct BufferedTarget {
    vfs: Rc<Vfs>,
    process: Process,
    path: String,
    /// Open with `O_DIRECT`.
    direct: bool,
    /// The open file, once the first submitter opened it (`prepare`).
    fd: Cell<Option<i32>>,
    opening: Cell<bool>,
    opened: crate::sim::sync::WaitQueue,
    /// Why the file could not be opened: every submitter ends.
    failed: RefCell<Option<String>>,
    /// The data of writes and the buffers of reads, one per call in flight, kept for the next
    /// calls. The contents are never looked at (the file is opened without
    /// `O_STORE_CONTENTS`, so the VFS keeps no bytes), so a buffer is only grown, never cleared.
    buffers: RefCell<Vec<Vec<u8>>>,
}

impl BufferedTarget {
    /// Lays out `path` (`bytes` long, on disk, not cached: fio's layout then `invalidate=1`)
    /// for process `task`. Not a system call: no time passes. The file is opened by the job's
    /// first submitter.
    pub fn new(
        sim: &Sim,
        vfs: Rc<Vfs>,
        task: &TaskRef,
        path: &str,
        bytes: u64,
        direct: bool,
    ) -> Result<BufferedTarget, String> {
        let parent = match path.rfind('/') {
            Some(0) | None => "/",
            Some(i) => &path[..i],
        };
        vfs.mkdir_all(sim, parent)
            .map_err(|e| format!("cannot create {parent}: {}", e.name()))?;
        match vfs.populate(sim, path, bytes) {
            Ok(_) | Err(crate::fs::Errno::EEXIST) => {}
            Err(e) => return Err(format!("cannot lay out {path}: {}", e.name())),
        }
        let process = vfs.new_process_with_pid(task.pid, task.uid, &task.comm);
        Ok(BufferedTarget {
            vfs,
            process,
            path: path.to_string(),
            direct,
            fd: Cell::new(None),
            opening: Cell::new(false),
            opened: crate::sim::sync::WaitQueue::new(),
            failed: RefCell::new(None),
            buffers: RefCell::new(Vec::new()),
        })
    }
}

impl BufferedTarget {
    /// `open`'s flags: read-write, created, and `O_DIRECT` for `direct=1`.
    fn open_flags(&self) -> u32 {
        let direct = if self.direct { O_DIRECT } else { 0 };
        O_CREAT | O_RDWR | direct
    }
}

impl JobTarget for BufferedTarget {
    fn prepare<'a>(&'a self, sim: &'a Sim) -> PrepareFuture<'a> {
        Box::pin(async move {
            if self.opening.replace(true) {
                while self.fd.get().is_none() && self.failed.borrow().is_none() {
                    self.opened
                        .wait(
                            sim,
                            crate::sim::WaitReason::Completion,
                            crate::sim::Blocker::None,
                        )
                        .await;
                }
            } else {
                match self
                    .vfs
                    .open(sim, &self.process, &self.path, self.open_flags())
                    .await
                {
                    Ok(fd) => self.fd.set(Some(fd)),
                    Err(errno) => {
                        *self.failed.borrow_mut() =
                            Some(format!("open {}: {}", self.path, errno.name()))
                    }
                }
                self.opened.wake_all(sim);
            }
            match self.failed.borrow().as_ref() {
                Some(error) => Err(error.clone()),
                None => Ok(()),
            }
        })
    }

    fn io<'a>(
        &'a self,
        sim: &'a Sim,
        op: IoOp,
        offset: u64,
        bytes: u64,
        _foreground: bool,
    ) -> IoFuture<'a> {
        Box::pin(async move {
            // A system call: a step for the engine's livelock detection (a cached read may
            // cost no virtual time).
            sim.step(op_name(op)).await;
            let fd = self.fd.get().expect("prepared");
            let mut buffer = self.buffers.borrow_mut().pop().unwrap_or_default();
            if buffer.len() < bytes as usize {
                // Zeroed by the allocator (`calloc`): a large buffer's pages stay the kernel's
                // zero page, since nothing reads or writes them.
                buffer = vec![0; bytes as usize];
            }
            let data = &mut buffer[..bytes as usize];
            // An error (ENOSPC) ends the job, as fio's default `continue_on_error=none` does.
            let result = match op {
                IoOp::Read => self.vfs.pread(sim, &self.process, fd, data, offset).await,
                _ => self.vfs.pwrite(sim, &self.process, fd, data, offset).await,
            };
            self.buffers.borrow_mut().push(buffer);
            let call = if op == IoOp::Read { "pread" } else { "pwrite" };
            result.map_err(|errno| {
                format!(
                    "{call} of {bytes} bytes at offset {offset} of {}: {}",
                    self.path,
                    errno.name()
                )
            })?;
            Ok(IoTimes {
                submitted_ns: sim.now(),
                completed_ns: sim.now(),
            })
        })
    }
}

/// Starts the app's job clones; returns their tasks.
pub fn start(ctx: &AppContext, config: &FioWorkloadConfig) -> Result<Vec<TaskId>, String> {
    let block = ctx
        .stack
        .block
        .as_ref()
        .expect("the stack has a block layer when an app runs fio");
    let job = config.job(&ctx.name)?;
    let mut tasks = Vec::new();
    for clone in 0..job.numjobs {
        let name = if job.numjobs > 1 {
            format!("{}.{clone}", ctx.name)
        } else {
            ctx.name.to_string()
        };
        let rng = ctx.sim.rng(&format!("fio/{name}"));
        let pid = ctx.stack.alloc_pid();
        let state = Rc::new(JobState::new(
            FioJob {
                name,
                offset: clone_offset(&job, clone),
                ..job.clone()
            },
            pid,
            ctx.uid,
            &ctx.name,
            block.capacity_bytes,
            rng,
        )?);
        let hooks = |_| -> Rc<dyn IoHooks> {
            Rc::new(AppHooks {
                ctx: ctx.clone(),
                timer: RefCell::new(None),
            })
        };
        let task = task_ref(pid, ctx.uid, &ctx.name);
        let target: Rc<dyn JobTarget> = if job.on_device() {
            Rc::new(DirectTarget {
                layer: block.layer.clone(),
                next_bio: block.next_bio.clone(),
                task,
                ioprio: job.ioprio,
            })
        } else {
            let vfs = ctx
                .stack
                .vfs
                .clone()
                .expect("a buffered fio job's stack has the page cache");
            Rc::new(BufferedTarget::new(
                &ctx.sim,
                vfs,
                &task,
                &job.file_path(clone),
                state.file_bytes(),
                job.direct,
            )?)
        };
        let handles = state.spawn(&ctx.sim, target, hooks);
        tasks.extend(handles.iter().map(|h| h.task()));
    }
    Ok(tasks)
}

/// The `offset` of clone `clone` of `job`: `offset + clone * offset_increment` (fio's
/// `get_start_offset` with `subjob_number`).
fn clone_offset(job: &FioJob, clone: u32) -> u64 {
    job.offset
        .saturating_add(job.offset_increment.saturating_mul(u64::from(clone)))
}

/// One job clone of `mobistack fio`, with its reporting group and its end.
#[derive(Clone)]
struct Member {
    state: Rc<JobState>,
    clone: u32,
    /// The job's section (fio names every clone after it).
    section: String,
    groupid: u32,
    done: Rc<Done>,
}

/// The end of a job clone, which `wait_for` waits for.
#[derive(Default)]
struct Done {
    done: Cell<bool>,
    queue: crate::sim::sync::WaitQueue,
}

impl Done {
    async fn wait(&self, sim: &Sim) {
        while !self.done.get() {
            self.queue
                .wait(
                    sim,
                    crate::sim::WaitReason::Completion,
                    crate::sim::Blocker::None,
                )
                .await;
        }
    }

    fn finish(&self, sim: &Sim) {
        self.done.set(true);
        self.queue.wake_all(sim);
    }
}

/// Runs one clone once its group starts: after the jobs it `wait_for`s and its `startdelay`,
/// its submitters; when they end, its end is signalled, and with `exitall` every other job
/// stops (fio's `exitall`: "terminate all jobs when one finishes").
async fn start_clone(
    sim: Sim,
    member: Member,
    waits: Vec<Rc<Done>>,
    target: Rc<dyn JobTarget>,
    everyone: Rc<Vec<Rc<JobState>>>,
) {
    for done in &waits {
        done.wait(&sim).await;
    }
    let job = &member.state.job;
    if job.startdelay > 0 {
        sim.sleep(job.startdelay).await;
    }
    let joins = member.state.spawn(&sim, target, |_| Rc::new(NoHooks));
    for join in joins {
        join.join(&sim).await;
    }
    member.done.finish(&sim);
    if job.exitall {
        for state in everyone.iter() {
            state.stop();
        }
    }
}

fn task_ref(pid: u32, uid: u32, comm: &str) -> TaskRef {
    TaskRef {
        pid,
        tgid: pid,
        uid,
        comm: comm.into(),
    }
}

/// Receives the virtual time now and then (a progress bar).
pub type FioProgress = Arc<dyn Fn(Nanos) + Send + Sync>;

/// Options of [`run_fio`].
#[derive(Clone)]
pub struct FioOptions {
    pub seed: u64,
    /// Record a blktrace log.
    pub trace: bool,
    /// Memory and writeback of the page cache, for buffered jobs (`direct=0`).
    pub vm: crate::mm::VmConfig,
    pub progress: Option<FioProgress>,
}

impl Default for FioOptions {
    fn default() -> Self {
        FioOptions {
            seed: 1,
            trace: false,
            vm: crate::mm::VmConfig::default(),
            progress: None,
        }
    }
}

/// Runs `jobs` against `device` under `elevator` in a fresh simulation: each `stonewall` waits
/// for the jobs before it and starts a new reporting group, as in fio.
pub fn run_fio(
    jobs: &[FioJob],
    device: Box<dyn BlockDevice>,
    elevator: &str,
    options: FioOptions,
) -> Result<FioReport, String> {
    run_fio_classified(jobs, device, elevator, options).map_err(|e| e.to_string())
}

/// [`run_fio`], telling bad input ([`FioError::Input`]) from a run that could not finish.
pub fn run_fio_classified(
    jobs: &[FioJob],
    device: Box<dyn BlockDevice>,
    elevator: &str,
    options: FioOptions,
) -> Result<FioReport, FioError> {
    let device_name = device.name().to_string();
    let capacity_bytes = device.capacity_sectors() * SECTOR_SIZE;
    let queue = build_queue(device, elevator, options.trace)?;
    let simulation = Simulation::new(options.seed);
    let sim = simulation.handle();
    if let Some(progress) = options.progress.clone() {
        sim.set_progress_hook(move |now| progress(now));
    }
    let layer = BlockLayer::new(&sim, queue);
    let next_bio = Rc::new(Cell::new(1u64));
    let vfs = if jobs.iter().any(|job| !job.on_device()) {
        Some(crate::stack::storage_on_layer(
            &sim,
            options.vm.clone(),
            &layer,
            next_bio.clone(),
            capacity_bytes,
        )?)
    } else {
        None
    };
    let vfs_at_end = vfs.clone();
    // Clones, grouped by stonewall (a group starts when the one before it ended), each with
    // its reporting group (init.c `add_job`: a new one at a `stonewall` or `new_group` after
    // jobs).
    let mut groups: Vec<Vec<Member>> = Vec::new();
    let mut sections: Vec<String> = Vec::new();
    let mut pid = FIRST_PID;
    let mut groupid = 0u32;
    let mut jobs_in_group = 0u32;
    for job in jobs {
        if job.stonewall || groups.is_empty() {
            groups.push(Vec::new());
        }
        if (job.stonewall || job.new_group) && jobs_in_group > 0 {
            groupid += 1;
            jobs_in_group = 0;
        }
        jobs_in_group += 1;
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
                    offset: clone_offset(job, clone),
                    ..job.clone()
                },
                pid,
                0,
                "fio",
                capacity_bytes,
                rng,
            )?;
            groups.last_mut().expect("a group exists").push(Member {
                state: Rc::new(state),
                clone,
                section: job.name.clone(),
                groupid,
                done: Rc::new(Done::default()),
            });
            sections.push(job.name.clone());
            pid += 1;
        }
    }
    let all: Vec<Member> = groups.iter().flatten().cloned().collect();
    let everyone: Rc<Vec<Rc<JobState>>> = Rc::new(all.iter().map(|c| c.state.clone()).collect());
    let handle = sim.clone();
    let coordinator_layer = layer.clone();
    let failure: Rc<RefCell<Option<String>>> = Rc::new(RefCell::new(None));
    let failed = failure.clone();
    let waitees = all.clone();
    sim.spawn("fio", async move {
        for group in groups {
            let mut starters = Vec::new();
            for member in group {
                // `wait_for`: every clone of the named job (init.c `wait_for_ok`: an earlier job).
                let waits: Vec<Rc<Done>> = member
                    .state
                    .job
                    .wait_for
                    .as_ref()
                    .map(|name| {
                        waitees
                            .iter()
                            .filter(|c| &c.section == name)
                            .map(|c| c.done.clone())
                            .collect()
                    })
                    .unwrap_or_default();
                let target: Rc<dyn JobTarget> = if member.state.job.on_device() {
                    Rc::new(DirectTarget {
                        layer: coordinator_layer.clone(),
                        next_bio: next_bio.clone(),
                        task: task_ref(member.state.pid, 0, "fio"),
                        ioprio: member.state.job.ioprio,
                    })
                } else {
                    let vfs = vfs.clone().expect("file jobs have a VFS");
                    let task = task_ref(member.state.pid, 0, "fio");
                    let path = member.state.job.file_path(member.clone);
                    let bytes = member.state.file_bytes();
                    let direct = member.state.job.direct;
                    match BufferedTarget::new(&handle, vfs, &task, &path, bytes, direct) {
                        Ok(target) => Rc::new(target),
                        Err(message) => {
                            *failed.borrow_mut() =
                                Some(format!("job `{}`: {message}", member.state.job.name));
                            return;
                        }
                    }
                };
                let starter = start_clone(handle.clone(), member, waits, target, everyone.clone());
                starters.push(handle.spawn("fio-start", starter));
            }
            for starter in starters {
                starter.join(&handle).await;
            }
        }
    });
    sim.run_until(u64::MAX, true)
        .map_err(|error| FioError::Run(format!("fio run could not finish: {error}")))?;
    if let Some(message) = failure.borrow_mut().take() {
        return Err(FioError::Run(message));
    }
    // fio stops a job on its first error and exits with an error.
    if let Some(error) = all.iter().find_map(|member| member.state.error()) {
        return Err(FioError::Run(error));
    }
    let left_at_end = LeftAtEnd {
        bios_in_flight: layer.pending_bios() as u64,
        dirty_pages: vfs_at_end.as_deref().map_or(0, dirty_pages),
    };
    // A direct I/O returns when its bios completed: only the page cache leaves bios behind.
    assert!(
        vfs_at_end.is_some() || left_at_end.bios_in_flight == 0,
        "direct jobs left {} bios in flight",
        left_at_end.bios_in_flight
    );
    let reports = all
        .iter()
        .zip(sections)
        .map(|(member, section)| FioJobReport {
            job: FioJob {
                // fio names every clone after its section.
                name: section,
                ..member.state.job.clone()
            },
            groupid: member.groupid,
            pid: member.state.pid,
            stats: member.state.stats(),
            clones: 1,
        })
        .collect();
    let (queue_stats, trace) = layer.with_queue(|queue| (queue.stats(), queue.trace().cloned()));
    Ok(FioReport {
        elevator: elevator.to_string(),
        device: device_name,
        jobs: reports,
        queue: queue_stats,
        trace,
        end_ns: sim.now(),
        left_at_end,
    })
}

/// Dirty pages of all files in `vfs`'s page cache.
fn dirty_pages(vfs: &Vfs) -> u64 {
    vfs.mm
        .dirty_inodes()
        .into_iter()
        .map(|ino| vfs.mm.dirty_pages(ino))
        .sum()
}

/// Parses `text` and runs it: the library entry point behind `mobistack fio`.
pub fn run_fio_file(
    text: &str,
    device: Box<dyn BlockDevice>,
    elevator: &str,
    options: FioOptions,
) -> Result<FioReport, String> {
    run_fio_file_classified(text, device, elevator, options).map_err(|e| e.to_string())
}

/// Why a job file gave no report: its input is wrong (exit status 2 of `mobistack fio`), or
/// the run could not finish (a deadlock or zero-time livelock of the engine, a job stopped by
/// an I/O error as fio's `continue_on_error=none` stops it: exit status 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FioError {
    Input(String),
    Run(String),
}

/// Errors found before the run starts (a job the device or the stack cannot take) are input.
impl From<String> for FioError {
    fn from(message: String) -> Self {
        FioError::Input(message)
    }
}

impl std::fmt::Display for FioError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FioError::Input(message) | FioError::Run(message) => f.write_str(message),
        }
    }
}

/// [`run_fio_file`], telling bad input from a run that could not finish.
pub fn run_fio_file_classified(
    text: &str,
    device: Box<dyn BlockDevice>,
    elevator: &str,
    options: FioOptions,
) -> Result<FioReport, FioError> {
    let jobs = parse_job_file(text).map_err(FioError::Input)?;
    run_fio_classified(&jobs, device, elevator, options)
}

/// `mobistack bench`'s device-fio row: fio's 4 KiB random reads at queue depth 32 (libaio,
/// `direct=1`) on `ufs-3.1` under noop for `runtime_ms` of virtual time (about 100 requests per
/// virtual millisecond). Every request goes the whole device path: `submit_bio`, the plug, the
/// request queue and elevator, the driver, the device model and the completion back to the
/// submitting task. Reports simulated block requests per wall second (issue 17's device-path
/// goal).
pub fn bench(runtime_ms: u64) -> crate::sim::bench::BenchResult {
    let text = format!(
        "[randread]\ndirect=1\nsize=16g\nruntime={runtime_ms}ms\ntime_based\nrw=randread\nbs=4k\n\
         ioengine=libaio\niodepth=32\n"
    );
    let config = crate::dev::DeviceConfig {
        profile: "ufs-3.1".to_string(),
        ..Default::default()
    };
    let device = crate::dev::build_device(&config, 1).expect("the built-in ufs-3.1 profile");
    let start = std::time::Instant::now();
    let report = run_fio_file(&text, device, "noop", FioOptions::default()).expect("bench job");
    let wall = start.elapsed().as_secs_f64();
    let requests = report.queue.completed;
    crate::sim::bench::BenchResult::counted(
        "device-fio",
        "block requests per wall s",
        requests,
        wall,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dev::fixed::FixedLatencyDevice;
    use crate::units::NS_PER_MS;

    #[test]
    fn the_device_benchmark_counts_the_requests_it_completed() {
        let result = bench(20);
        // ufs-3.1 serves 4 KiB random reads at QD32 at about 100k IOPS: 20 ms is about 2,000.
        assert!((1_500..=2_500).contains(&result.operations), "{result:?}");
        assert!(result.per_second > 0.0);
    }

    use crate::workload::fio::job::tests::JOBS;

    fn traced() -> FioOptions {
        FioOptions {
            seed: 7,
            trace: true,
            ..FioOptions::default()
        }
    }

    #[test]
    fn a_job_file_runs_and_reports_latency_and_throughput() {
        // 1 slot, 100 us per request plus 100 MB/s.
        let device = FixedLatencyDevice::new(1, 100_000, 100_000_000);
        let report = run_fio_file(JOBS, Box::new(device), "cfq", traced()).unwrap();
        assert_eq!(report.jobs.len(), 3);
        let seqread = &report.jobs[0];
        assert_eq!(seqread.stats.directions[0].ios, 32);
        assert_eq!(seqread.stats.directions[0].bytes, 4 << 20);
        assert_eq!(seqread.groupid, 0);
        // The stonewalled group starts after the first ends, as group 1.
        assert!(report.jobs[1].stats.start_ns >= seqread.stats.end_ns);
        for clone in &report.jobs[1..] {
            assert_eq!(clone.stats.directions[1].ios, 1024);
            assert_eq!((clone.job.name.as_str(), clone.groupid), ("randwrite", 1));
        }
        // Sequential reads at depth 4 merge in the queue.
        assert!(report.queue.back_merges + report.queue.plug_merges > 0);
        let text = report.text();
        assert!(
            text.contains("seqread: (groupid=0, jobs=1)") && text.contains("Run status group 1"),
            "{text}"
        );
        let json = report.json(false);
        assert_eq!(json["jobs"][1]["jobname"], "randwrite");
        assert_eq!(json["jobs"][1]["write"]["total_ios"], 1024);
        let trace = report.trace.as_ref().unwrap().to_blkparse();
        assert!(
            trace.lines().any(|line| line.contains(" C ")),
            "no completion in trace"
        );
        // Deterministic: the same run gives the same trace.
        let device = FixedLatencyDevice::new(1, 100_000, 100_000_000);
        let again = run_fio_file(JOBS, Box::new(device), "cfq", traced()).unwrap();
        assert_eq!(again.trace.unwrap().to_blkparse(), trace);
    }

    #[test]
    fn rate_limits_throughput() {
        let text = "[r]\ndirect=1\nrw=read\nbs=4k\nsize=1m\nrate=1m\n";
        let device = FixedLatencyDevice::new(1, 50_000, 0);
        let report = run_fio_file(text, Box::new(device), "noop", FioOptions::default()).unwrap();
        // 1 MiB at 1 MiB/s: about one second.
        let stats = &report.jobs[0].stats;
        let elapsed = stats.end_ns - stats.start_ns;
        assert!(
            (990 * NS_PER_MS..=1_001 * NS_PER_MS).contains(&elapsed),
            "{elapsed}"
        );
    }

    #[test]
    fn async_engines_split_submission_and_completion_latency() {
        // A queue of one: the libaio job's second I/O waits for a request slot... no: CFQ's
        // legacy pool is 128; with depth 4 on a one-slot device the I/Os queue in the elevator,
        // so clat holds the queueing and slat the submission.
        let text = "[a]\ndirect=1\nrw=randread\nbs=4k\nsize=1m\nioengine=libaio\niodepth=4\n";
        let device = FixedLatencyDevice::new(1, 100_000, 0);
        let report = run_fio_file(text, Box::new(device), "noop", FioOptions::default()).unwrap();
        let stats = &report.jobs[0].stats;
        let read = &stats.directions[0];
        // Every I/O has its slat, clat and lat, and lat = slat + clat: the sums (means) add up,
        // and the smallest lat is no less than the smallest slat plus the smallest clat.
        let (slat, clat, lat) = (&read.slat, &read.clat, &read.lat);
        assert_eq!(
            (slat.samples(), clat.samples(), lat.samples()),
            (256, 256, 256)
        );
        let sum = slat.mean() + clat.mean();
        assert!(
            (lat.mean() - sum).abs() <= 1e-9 * sum,
            "{} vs {sum}",
            lat.mean()
        );
        assert!(lat.min() >= slat.min() + clat.min());
        assert!(lat.max() <= slat.max() + clat.max());
        assert!(clat.min() >= 100_000, "{}", clat.min());
        assert_eq!(stats.lat_ranges.total(), 256);
        // A sync engine has no slat, and clat = lat.
        let text = "[s]\ndirect=1\nrw=randread\nbs=4k\nsize=64k\n";
        let device = FixedLatencyDevice::new(1, 100_000, 0);
        let report = run_fio_file(text, Box::new(device), "noop", FioOptions::default()).unwrap();
        let read = &report.jobs[0].stats.directions[0];
        assert_eq!(read.slat.samples(), 0);
        assert_eq!(read.slat.buckets().count(), 0);
        assert_eq!(read.clat.samples(), 16);
        assert_eq!(read.clat, read.lat);
    }

    /// fio's job control (init.c `add_job`, backend.c): `startdelay` delays a job's start,
    /// `wait_for` starts a job when another ended, `exitall` ends every job when one ends,
    /// `new_group` starts a reporting group without waiting, `group_reporting` reports a
    /// group as one job (stat.c `sum_thread_stats`).
    #[test]
    fn job_control_and_group_reporting() {
        let text = "[global]\ndirect=1\nrw=read\nbs=4k\nsize=400k\n\
                    [first]\n\
                    [late]\nstartdelay=50ms\n\
                    [after]\nwait_for=first\nnew_group\n\
                    [stopper]\nstonewall\nnumber_ios=5\nexitall\n\
                    [stopped]\ntime_based\nruntime=10\n";
        let device = FixedLatencyDevice::new(1, 100_000, 0);
        let report = run_fio_file(text, Box::new(device), "noop", FioOptions::default()).unwrap();
        let stats = |i: usize| &report.jobs[i].stats;
        assert_eq!(stats(1).start_ns, 50 * NS_PER_MS);
        assert!(stats(2).start_ns >= stats(0).end_ns);
        let groups: Vec<u32> = report.jobs.iter().map(|j| j.groupid).collect();
        assert_eq!(groups, [0, 0, 1, 2, 2]);
        // exitall: the time-based job ends with the five-I/O one, not after 10 s.
        assert_eq!(stats(3).directions[0].ios, 5);
        assert!(
            stats(4).end_ns < stats(3).end_ns + NS_PER_MS,
            "{:?}",
            stats(4)
        );
        // group_reporting: four clones reported as one job of four.
        let text = "[g]\ndirect=1\nrw=randread\nsize=1m\nnumjobs=4\ngroup_reporting\n";
        let device = FixedLatencyDevice::new(4, 100_000, 0);
        let report = run_fio_file(text, Box::new(device), "noop", FioOptions::default()).unwrap();
        assert_eq!(report.jobs.len(), 4);
        let reported = report.reported();
        assert_eq!((reported.len(), reported[0].clones), (1, 4));
        assert_eq!(reported[0].stats.directions[0].ios, 4 * 256);
        let json = report.json(false);
        assert_eq!(json["jobs"].as_array().unwrap().len(), 1);
        assert_eq!(json["jobs"][0]["read"]["clat_ns"]["N"], 1024);
        assert!(report.text().contains("g: (groupid=0, jobs=4)"));
    }

    /// `direct=1` with a `filename` opens the file through the file system with O_DIRECT (fio's
    /// filesetup.c `file_open`), not the raw device from sector 0: no page of it is cached or
    /// left dirty, unlike the same job buffered.
    #[test]
    fn direct_with_a_filename_is_o_direct_on_the_file() {
        let run = |direct: u32| {
            let text =
                format!("[w]\ndirect={direct}\nfilename=data.bin\nrw=write\nbs=64k\nsize=4m\n");
            let device = FixedLatencyDevice::new(4, 50_000, 200_000_000);
            run_fio_file(&text, Box::new(device), "noop", traced()).unwrap()
        };
        let direct = run(1);
        assert_eq!(direct.jobs[0].stats.directions[1].bytes, 4 << 20);
        assert_eq!(direct.left_at_end.dirty_pages, 0);
        // The file's blocks are the file system's: the first write is not at sector 0.
        let trace = direct.trace.as_ref().unwrap().to_blkparse();
        assert!(
            !trace
                .lines()
                .any(|l| l.contains(" Q ") && l.contains(" W") && l.contains(" 0 + ")),
            "{trace}"
        );
        let buffered = run(0);
        assert!(buffered.left_at_end.dirty_pages > 0);
    }
}
