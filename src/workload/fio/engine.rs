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

use super::job::{BlockSizes, Distribution, FioJob, RwMode};
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

/// One I/O a job issues: its direction, offset (in the device or file) and size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextIo {
    pub op: IoOp,
    pub offset: u64,
    pub bytes: u64,
}

/// State shared by the submitters of one job clone.
pub struct JobState {
    pub job: FioJob,
    pub pid: u32,
    pub uid: u32,
    pub comm: String,
    region_start: u64,
    region_bytes: u64,
    /// The bytes the job does before it ends (unless `time_based`): `io_size` (else the
    /// region) times `loops`.
    limit_bytes: u64,
    issued_bytes: Cell<u64>,
    issued_ios: Cell<u64>,
    /// The next sequential offset in the region (fio's `last_pos - file_offset`).
    seq_next: Cell<u64>,
    /// With `rate_process=poisson`: when the next I/O is due.
    poisson_due: Cell<Nanos>,
    /// `exitall`: another job ended the run.
    stopped: Cell<bool>,
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
        let limit_bytes = job
            .io_size
            .unwrap_or(region_bytes)
            .saturating_mul(u64::from(job.loops));
        Ok(JobState {
            job,
            pid,
            uid,
            comm: comm.to_string(),
            region_start,
            region_bytes,
            limit_bytes,
            issued_bytes: Cell::new(0),
            issued_ios: Cell::new(0),
            seq_next: Cell::new(0),
            poisson_due: Cell::new(0),
            stopped: Cell::new(false),
            in_flight: Cell::new(0),
            rng: RefCell::new(rng),
            stats: RefCell::new(JobStats::default()),
            error: RefCell::new(None),
        })
    }

    /// The bytes the job's file must have (file jobs): the end of its region, or `filesize`
    /// when larger.
    pub fn file_bytes(&self) -> u64 {
        (self.region_start + self.region_bytes).max(self.job.filesize.unwrap_or(0))
    }

    /// Stops the job before its next I/O (`exitall` of another job).
    pub fn stop(&self) {
        self.stopped.set(true);
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

    /// With `rate` or `rate_iops`: when the next I/O is due, the time at which the bytes and
    /// I/Os issued so far have been "paid for" (issue no faster than the rate; with
    /// `rate_process=poisson`, I/Os at exponentially distributed intervals, fio's
    /// `usec_for_io`); `None` without a rate.
    pub fn rate_due(&self) -> Option<Nanos> {
        let start = self.stats.borrow().start_ns;
        let by_bytes = self.job.rate.map(|rate| {
            start
                + (u128::from(self.issued_bytes.get()) * u128::from(NS_PER_SEC) / u128::from(rate))
                    as Nanos
        });
        let by_ios = self.job.rate_iops.map(|iops| {
            if self.job.poisson {
                start.max(self.poisson_due.get())
            } else {
                start
                    + (u128::from(self.issued_ios.get()) * u128::from(NS_PER_SEC)
                        / u128::from(iops)) as Nanos
            }
        });
        match (by_bytes, by_ios) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }

    /// The next I/O to issue at `now` (its direction and offset in the device or file), or
    /// `None` when the job is done. Real mode (src/real/exec.rs) does `bs`-sized I/Os.
    pub fn next_io(&self, now: Nanos) -> Option<(IoOp, u64)> {
        self.next(now).map(|io| (io.op, io.offset))
    }

    /// The next I/O to issue at `now`, or `None` when the job is done: its runtime passed, its
    /// bytes (`size` or `io_size`, times `loops`) or `number_ios` were issued, an error or
    /// `exitall` stopped it. The offset is drawn before the direction and the size (the
    /// random numbers' order of the runs this model made before `bssplit`).
    pub fn next(&self, now: Nanos) -> Option<NextIo> {
        let job = &self.job;
        if self.error.borrow().is_some() || self.stopped.get() {
            return None;
        }
        let start = self.stats.borrow().start_ns;
        if job.runtime.is_some_and(|runtime| now >= start + runtime) {
            return None;
        }
        if !job.time_based && self.issued_bytes.get() >= self.limit_bytes {
            return None;
        }
        if job.number_ios.is_some_and(|n| self.issued_ios.get() >= n) {
            return None;
        }
        let mut rng = self.rng.borrow_mut();
        let random_offset = if job.rw.random() {
            Some(self.random_offset(&mut rng))
        } else {
            None
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
        let (offset, bytes) = match random_offset {
            Some(offset) => (offset, self.block_size(&mut rng, op, offset)),
            None => self.sequential(&mut rng, op),
        };
        if job.rate_iops.is_some() && job.poisson {
            let iops = job.rate_iops.unwrap_or(1) as f64;
            let gap = rng.exponential(NS_PER_SEC as f64 / iops) as Nanos;
            self.poisson_due
                .set(start.max(self.poisson_due.get()) + gap);
        }
        self.issued_bytes.set(self.issued_bytes.get() + bytes);
        self.issued_ios.set(self.issued_ios.get() + 1);
        Some(NextIo {
            op,
            offset: self.region_start + offset,
            bytes,
        })
    }

    /// A random offset in the region (relative to its start), aligned to `blockalign` (fio's
    /// default: the smallest block size), drawn with repeats (fio's `norandommap`): uniform,
    /// or in the zones of `random_distribution=zoned` (io_u.c
    /// `__get_next_rand_offset_zoned`: a zone by its share of the accesses, then a block in
    /// it). With one block size, the draw this model always made: `block * bs`.
    fn random_offset(&self, rng: &mut Rng) -> u64 {
        let job = &self.job;
        let align = job.blockalign.unwrap_or_else(|| job.min_bs()).max(1);
        let min_bs = job.min_bs();
        // Blocks at which the smallest I/O fits in the region.
        let blocks = if job.sizes.is_none() && job.blockalign.is_none() {
            self.region_bytes / job.bs
        } else {
            (self.region_bytes.saturating_sub(min_bs) / align + 1).max(1)
        };
        match &job.distribution {
            Distribution::Uniform => rng.below(blocks) * align,
            Distribution::Zoned(zones) => {
                let pick = rng.below(100) as u32;
                let (mut access, mut region_before) = (0u32, 0u32);
                for &(share, region) in zones {
                    access += share;
                    if pick < access || region_before + region >= 100 {
                        let first = blocks * u64::from(region_before) / 100;
                        let last =
                            (blocks * u64::from(region_before + region) / 100).max(first + 1);
                        return (first + rng.below(last - first)).min(blocks - 1) * align;
                    }
                    region_before += region;
                }
                rng.below(blocks) * align
            }
        }
    }

    /// The size of an I/O of direction `op` at `offset` (relative): the fixed size, or one
    /// drawn as fio's `get_next_buflen` draws it (io_u.c), fitting in the region.
    fn block_size(&self, rng: &mut Rng, op: IoOp, offset: u64) -> u64 {
        let room = self.region_bytes.saturating_sub(offset);
        let sizes = self.job.block_sizes(ddir(op));
        let (min, max) = (sizes.min(), sizes.max());
        if min == max {
            return min;
        }
        if room < min {
            return min;
        }
        // fio's `__rand` of 32 bits and `frand_max`.
        let frand_max = u64::from(u32::MAX);
        // fio draws until a size fits; bounded here (a split whose only fitting size has no
        // share would never end), then the smallest size.
        for _ in 0..1_000 {
            let r = rng.next_u64() >> 32;
            let drawn = match &sizes {
                BlockSizes::Split(split) => {
                    let mut chosen = min;
                    let mut perc = 0u64;
                    for &(bs, share) in split {
                        if share == 0 {
                            continue;
                        }
                        chosen = bs;
                        perc += u64::from(share);
                        if r / perc <= frand_max / 100 && bs <= room {
                            break;
                        }
                    }
                    chosen
                }
                _ => min + (max as f64 * (r as f64 / (frand_max as f64 + 1.0))) as u64,
            };
            // Aligned down to the smallest size, at most the largest.
            let size = (drawn - drawn % min).min(max);
            if size <= room {
                return size;
            }
        }
        min
    }

    /// The next sequential I/O: its offset (relative) and size. fio's `get_next_seq_offset`:
    /// after an I/O, the next starts where it ended plus `rw=...:<n>` (`ddir_seq_add`); past
    /// the region's end it wraps to the start (a hole) or, backwards, to the end. A size that
    /// does not fit before the end wraps to the start.
    fn sequential(&self, rng: &mut Rng, op: IoOp) -> (u64, u64) {
        let region = self.region_bytes;
        let add = self.job.seq_add;
        let mut pos = self.seq_next.get();
        if pos != 0 && add != 0 {
            pos = pos.wrapping_add(add as u64);
            if pos >= region {
                pos = if add > 0 {
                    0
                } else {
                    region
                        .wrapping_add(add as u64)
                        .min(region.saturating_sub(1))
                };
            }
        }
        let mut bytes = self.block_size(rng, op, pos);
        if pos + bytes > region {
            pos = 0;
            bytes = self.block_size(rng, op, pos);
        }
        self.seq_next.set(pos + bytes);
        (pos, bytes)
    }

    /// Accounts one completed I/O of `bs` bytes that started at `started`.
    pub fn completed(&self, op: IoOp, bs: u64, started: Nanos, times: IoTimes) {
        let mut stats = self.stats.borrow_mut();
        let window = ((times.completed_ns - stats.start_ns) / SAMPLE_WINDOW_NS) as usize;
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
        let Some(NextIo { op, offset, bytes }) = state.next(sim.now()) else {
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
                    .direct_io(&sim, op, offset, bytes, hooks.foreground())
                    .await
            }
            None => match target.io(&sim, op, offset, bytes, hooks.foreground()).await {
                Ok(times) => times,
                Err(error) => {
                    state.in_flight.set(state.in_flight.get() - 1);
                    state.fail(&error, hooks.as_ref());
                    break;
                }
            },
        };
        state.in_flight.set(state.in_flight.get() - 1);
        state.completed(op, bytes, started, times);
        hooks.finished(op, bytes);
        if job.thinktime > 0 {
            // fio's `thinktime`: the job pauses after an I/O before the next.
            sim.sleep(job.thinktime).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::fio::job::parse_job_file;

    fn state(text: &str) -> JobState {
        let job = parse_job_file(text).unwrap().remove(0);
        JobState::new(job, 1, 0, "fio", 1 << 30, Rng::new(1)).unwrap()
    }

    /// The I/Os a job issues at time 0 until it is done: (offset, bytes).
    fn ios(state: &JobState) -> Vec<(u64, u64)> {
        std::iter::from_fn(|| state.next(0).map(|io| (io.offset, io.bytes))).collect()
    }

    /// fio 3.33 io_u.c `get_next_seq_offset`: `rw=read:-8k` reads backwards from the end
    /// after the first block (backwards-read.fio), `rw=write:112k` leaves holes and wraps.
    #[test]
    fn sequential_offsets_follow_get_next_seq_offset() {
        let backwards = ios(&state("[b]\nrw=read:-8k\nbs=4k\nsize=32k\n"));
        let offsets: Vec<u64> = backwards.iter().map(|&(o, _)| o >> 10).collect();
        assert_eq!(offsets, [0, 24, 20, 16, 12, 8, 4, 0]);
        let holes = ios(&state("[h]\nrw=write:12k\nbs=4k\nsize=32k\noffset=4k\n"));
        let offsets: Vec<u64> = holes.iter().map(|&(o, _)| o >> 10).collect();
        // Relative 0, 16, then 32 is past the 32k region: back to 0.
        assert_eq!(offsets, [4, 20, 4, 20, 4, 20, 4, 20]);
        // Plain sequential I/O: the blocks in order, as before offset modifiers.
        let plain = ios(&state("[p]\nrw=read\nbs=4k\nsize=16k\n"));
        assert_eq!(
            plain,
            [(0, 4096), (4096, 4096), (8192, 4096), (12288, 4096)]
        );
    }

    /// `number_ios`, `loops` and `io_size` end a job as fio's `io_u.c` / backend.c count them.
    #[test]
    fn number_ios_loops_and_io_size_bound_a_job() {
        assert_eq!(
            ios(&state("[n]\nrw=read\nsize=64k\nnumber_ios=3\n")).len(),
            3
        );
        let looped = ios(&state("[l]\nrw=read\nsize=16k\nloops=3\n"));
        assert_eq!(looped.len(), 12);
        assert_eq!(looped[4], (0, 4096));
        let sized = ios(&state("[s]\nrw=write\nsize=16k\nio_size=40k\n"));
        assert_eq!(sized.len(), 10);
    }

    /// `bssplit` sizes in their shares (io_u.c `get_next_buflen`), each I/O in the region and
    /// aligned to the smallest size; `random_distribution=zoned` keeps its shares of accesses
    /// in its zones.
    #[test]
    fn bssplit_sizes_and_zoned_offsets_keep_their_shares() {
        let job = state("[z]\nrw=randwrite\nsize=64m\nbssplit=4k/70:64k/30\nnumber_ios=20000\n");
        let drawn = ios(&job);
        // The region's 64 MiB end the job first: about 3,000 I/Os of 22 KiB on average.
        let small = drawn.iter().filter(|&&(_, b)| b == 4096).count() as f64;
        let share = small / drawn.len() as f64;
        assert!((0.66..0.74).contains(&share), "{share} of {}", drawn.len());
        assert!(drawn
            .iter()
            .all(|&(o, b)| o % 4096 == 0 && o + b <= 64 << 20 && (b == 4096 || b == 64 << 10)));
        let zoned = state(
            "[z]\nrw=randread\nsize=100m\nbs=4k\nrandom_distribution=zoned:60/10:40/\nnumber_ios=20000\n",
        );
        let hot = ios(&zoned).iter().filter(|&&(o, _)| o < 10 << 20).count() as f64;
        assert!((0.57..0.63).contains(&(hot / 20_000.0)), "{hot}");
    }
}
