//! The execution of a fio job as a process of submitter tasks (fio's backend.c and io_u.c):
//! a [`JobState`] per job clone, its submitters, and where their I/O goes ([`JobTarget`]).
//!
//! Model of a job: each of the `numjobs` clones is a process (its own pid, so CFQ gives it its own
//! sync queue). Where its I/O goes is a [`JobTarget`]: with `direct=1` the raw device through the
//! block layer ([`DirectTarget`]: bios that bypass the page cache; writes carry REQ_SYNC, as 3.10's
//! `WRITE_ODIRECT` does; an I/O larger than `max_sectors` is split into bios submitted under a
//! plug, as `__blkdev_direct_IO` does); with `direct=0` (fio's default) a file through the VFS and
//! the page cache (`crate::workload::fio::run::BufferedTarget`). An asynchronous engine (libaio,
//! io_uring, posixaio) keeps `iodepth` I/Os in flight, modelled as `iodepth` submitters in the
//! process; synchronous engines (sync, psync, pvsync, pvsync2; psync is fio's default) have depth
//! 1, and so does libaio with buffered I/O (Linux runs it synchronously inside `io_submit`).
//!
//! Latencies as fio defines them: `slat` from the start of the I/O to the end of its submission
//! (asynchronous engines only: a sleep in `get_request` is submission time), `clat` from there
//! to completion, `lat` the sum. Completions are also counted in 500 ms windows (fio's
//! `bw_avg_time` / `iops_avg_time`) for the bandwidth and IOPS samples.

use super::job::{FioJob, RwMode};
use super::stats::{ddir, depth_bucket, JobStats, SAMPLE_WINDOW_NS};
use crate::block::layer::BlockLayer;
use crate::block::queue::split_bio;
use crate::block::request::{Bio, IoPrio, TaskRef};
use crate::dev::{IoFlags, IoOp};
use crate::sim::{Rng, Sim};
use crate::units::{Nanos, NS_PER_SEC, SECTOR_SIZE};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

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

