//! The scenario's apps as real threads on the mounted file system.
//!
//! Each app is one thread that sleeps until its `start`, sets its nice value (`setpriority` on
//! its thread id, which Linux applies to the thread) and I/O priority (`ioprio_set`
//! `IOPRIO_WHO_PROCESS` on its thread id), and issues the system calls of its workload in the
//! order, sizes and think times of the simulated workload (src/workload): each call is an
//! operation timed with `CLOCK_MONOTONIC`, named as the simulation names it, so the results
//! line up operation by operation. A failed call is counted as `errno.<NAME>` and ends the app,
//! as in the simulation.
//!
//! Supported workloads: `seq-write` (without `install_to`), `fsync-write`, `ops`, `sqlite` with
//! `statements` (through rusqlite's SQLite with the normal `unix` VFS, the scenario's pragmas),
//! `file-read`, `fio` (not `rw=trim`/`randtrim`), `filebench` (src/real/filebench.rs). An app
//! with a `cgroup` joins it with its thread before its workload starts (src/real/cgroup.rs).
//! Paths are the scenario's, under the mount
//! point. The workloads' own choices come from their own code: `fio`'s I/Os from its
//! [`JobState`] (src/workload/fio/engine.rs `next_io`, `rate_due`), `file-read`'s and `fsync-write`'s
//! offsets from `FileReadConfig::next_read` / `FsyncWriteConfig::next_write`, each with the
//! simulation's generator stream of the scenario's first seed ([`Rng::named`]), so a real run
//! reads and writes the very offsets of the simulated run with that seed.
//!
//! `fio`: each of `numjobs` clones is a file (`FioJob::file_path`, laid out before the run
//! like the simulation's buffered target: written, synced, dropped from the cache), opened
//! with `O_DIRECT` when `direct=1`; each of the engine's `iodepth` slots
//! (`FioJob::effective_iodepth`) is a thread doing `pread` / `pwrite` of `bs` bytes, as the
//! simulation models an asynchronous engine's depth by that many submitters. One difference:
//! the simulation sends `direct=1` I/O to the raw device at the region's offsets, real mode to
//! the job's file on the mounted file system (writing the raw device under a mounted ext4
//! would destroy it), so ext4's block mapping (and an overwrite's timestamp update) is in the
//! real path.

use crate::dev::IoOp;
use crate::scenario::{AppConfig, WorkloadConfig};
use crate::sim::Rng;
use crate::workload::file::{FileReadConfig, FsyncWriteConfig, SeqWriteConfig, WriteMode};
use crate::workload::fio::FioWorkloadConfig;
use crate::workload::fio::{FioJob, JobState, RwMode};
use crate::workload::ops::{expand, OpenFlag, OpsConfig, Step, Transfer};
use crate::workload::sqlite::SqliteConfig;
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// `CLOCK_MONOTONIC` in nanoseconds: the clock of the trace instance (`trace_clock = mono`).
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// One timed system call (or SQL transaction).
#[derive(Debug, Clone)]
pub struct OpSample {
    pub op: String,
    pub start_ns: u64,
    pub latency_ns: u64,
    /// Still running when the run ended (its latency is the time so far).
    pub unfinished: bool,
}

/// What one app did.
#[derive(Debug, Clone, Default)]
pub struct AppRun {
    pub name: String,
    pub uid: u32,
    pub samples: Vec<OpSample>,
    pub counters: BTreeMap<String, u64>,
    /// Each transaction's `[start, end]` (a SQL transaction; a write + fsync; an `ops`
    /// iteration): its block I/O is the events issued within.
    pub transactions: Vec<(u64, u64)>,
    /// Why the app stopped before its end: (when, message).
    pub failure: Option<(u64, String)>,
    pub warnings: Vec<String>,
}

/// Whether the workload kind runs in real mode; the error names it.
pub fn check_supported(app: &AppConfig) -> Result<(), String> {
    let name = app.name.get_ref();
    let kind = match &app.workload {
        WorkloadConfig::SeqWrite(c) if c.install_to.is_none() => return Ok(()),
        WorkloadConfig::SeqWrite(_) => "seq-write with install_to",
        WorkloadConfig::FsyncWrite(_) | WorkloadConfig::Ops(_) | WorkloadConfig::FileRead(_) => {
            return Ok(())
        }
        WorkloadConfig::Sqlite(c) if !c.statements.is_empty() => return Ok(()),
        WorkloadConfig::Fio(c) => {
            let job = c.job(name).map_err(|e| format!("app `{name}`: {e}"))?;
            if matches!(job.rw, RwMode::Trim | RwMode::RandTrim) {
                "fio with rw=trim or randtrim (a trim needs the raw device)"
            } else {
                return Ok(());
            }
        }
        WorkloadConfig::Sqlite(_) => "sqlite with benchmark or log (only statements)",
        WorkloadConfig::ToyIo(_) => "toy-io",
        WorkloadConfig::ToyLocks(_) => "toy-locks",
        WorkloadConfig::Filebench(c) => {
            return super::filebench::check_supported(c)
                .map_err(|what| format!("app `{name}`: not supported in real mode yet: {what}"))
        }
        WorkloadConfig::Video(_) => "video",
        WorkloadConfig::Replay(_) => "replay",
    };
    Err(format!(
        "app `{name}`: not supported in real mode yet: {kind} (docs/validation.md lists what is)"
    ))
}

/// Creates what exists before the run: the workloads' directories and preset files (written,
/// synced, dropped from the page cache: on disk, nothing cached, as the simulation's
/// `populate`). Runs before the trace starts.
pub fn prepare(apps: &[AppConfig], root: &Path, seed: u64) -> Result<(), String> {
    // A file several apps preset is laid out once, by the first (the simulation's `populate`
    // leaves an existing file as it is: EEXIST).
    let mut laid_out = std::collections::BTreeSet::new();
    for app in apps {
        let mut paths: Vec<String> = Vec::new();
        let mut presets: Vec<(String, u64)> = Vec::new();
        match &app.workload {
            WorkloadConfig::SeqWrite(c) => paths.push(c.path.clone()),
            WorkloadConfig::FsyncWrite(c) => {
                paths.push(c.path.clone());
                if c.prefill && c.region > 0 {
                    presets.push((c.path.clone(), c.region));
                }
            }
            WorkloadConfig::Ops(c) => {
                paths.extend(c.files.iter().map(|f| f.path.clone()));
                presets.extend(c.files.iter().map(|f| (f.path.clone(), f.size)));
                for step in &c.steps {
                    paths.extend(step.paths().into_iter().map(|p| expand(p, 0)));
                }
            }
            WorkloadConfig::Sqlite(c) => paths.push(c.database.clone()),
            WorkloadConfig::FileRead(c) => {
                paths.push(c.path.clone());
                presets.push((c.path.clone(), c.file_size));
            }
            WorkloadConfig::Fio(c) => {
                for (path, bytes) in fio_files(c, app.name.get_ref())? {
                    paths.push(path.clone());
                    presets.push((path, bytes));
                }
            }
            WorkloadConfig::Filebench(c) => {
                super::filebench::prepare(c, app.name.get_ref(), seed, root)?
            }
            _ => {}
        }
        for path in &paths {
            if let Some(parent) = under(root, path).parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| format!("mkdir -p {}: {e}", parent.display()))?;
            }
        }
        for (path, size) in presets {
            if laid_out.insert(path.clone()) {
                populate(&under(root, &path), size)?;
            }
        }
    }
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    Ok(())
}

/// The jobs' clones of a `fio` app: each one's job (named as the simulation names it) and its
/// file and size (the end of its region).
fn fio_clones(config: &FioWorkloadConfig, app: &str) -> Result<Vec<(FioJob, u32)>, String> {
    let job = config.job(app).map_err(|e| format!("app `{app}`: {e}"))?;
    Ok((0..job.numjobs)
        .map(|clone| {
            let name = if job.numjobs > 1 {
                format!("{app}.{clone}")
            } else {
                app.to_string()
            };
            (
                FioJob {
                    name,
                    ..job.clone()
                },
                clone,
            )
        })
        .collect())
}

/// The files a `fio` app's clones work on, with their sizes (`offset` + `size`).
fn fio_files(config: &FioWorkloadConfig, app: &str) -> Result<Vec<(String, u64)>, String> {
    Ok(fio_clones(config, app)?
        .into_iter()
        .map(|(job, clone)| {
            let bytes = job.offset + job.size.unwrap_or(0);
            (job.file_path(clone), bytes)
        })
        .collect())
}

fn populate(path: &Path, size: u64) -> Result<(), String> {
    let err = |e: std::io::Error| format!("creating preset file {}: {e}", path.display());
    let mut file = File::create(path).map_err(err)?;
    let chunk = vec![0x5au8; 1 << 20];
    let mut left = size;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        file.write_all(&chunk[..n]).map_err(err)?;
        left -= n as u64;
    }
    file.sync_all().map_err(err)?;
    fadvise_dontneed(&file, 0, 0);
    Ok(())
}

pub(super) fn fadvise_dontneed(file: &File, offset: u64, len: u64) -> i32 {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid fd; posix_fadvise only reads its arguments.
    unsafe {
        libc::posix_fadvise(
            file.as_raw_fd(),
            offset as libc::off_t,
            len as libc::off_t,
            libc::POSIX_FADV_DONTNEED,
        )
    }
}

/// The scenario's absolute `path` under the mount point.
pub fn under(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

/// How an app's thread runs: its record, the mount point, the stop flag, the seed of the
/// workloads' generators.
struct Ctx<'a> {
    root: &'a Path,
    stop: &'a AtomicBool,
    seed: u64,
    run: AppRun,
}

/// A failed call: counted, and the app ends.
struct Failed;

impl Ctx<'_> {
    /// A context for another thread of the same app: an empty record of the same app.
    fn thread(&self) -> Ctx<'_> {
        Ctx {
            root: self.root,
            stop: self.stop,
            seed: self.seed,
            run: AppRun {
                name: self.run.name.clone(),
                uid: self.run.uid,
                ..AppRun::default()
            },
        }
    }

    /// Adds what another thread of the app recorded.
    fn absorb(&mut self, run: AppRun) {
        self.run.samples.extend(run.samples);
        for (counter, n) in run.counters {
            self.add(&counter, n);
        }
        self.run.transactions.extend(run.transactions);
        self.run.transactions.sort_unstable();
        if self.run.failure.is_none() {
            self.run.failure = run.failure;
        }
        self.run.warnings.extend(run.warnings);
    }

    /// The simulation's generator stream `name` of the scenario's first seed.
    fn rng(&self, stream: &str) -> Rng {
        Rng::named(self.seed, stream)
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn path(&self, path: &str) -> PathBuf {
        under(self.root, path)
    }

    fn add(&mut self, counter: &str, n: u64) {
        *self.run.counters.entry(counter.to_string()).or_insert(0) += n;
    }

    /// Runs `call` as operation `op`.
    fn timed<T>(
        &mut self,
        op: &str,
        call: impl FnOnce() -> std::io::Result<T>,
    ) -> Result<T, Failed> {
        let start = now_ns();
        let result = call();
        self.run.samples.push(OpSample {
            op: op.to_string(),
            start_ns: start,
            latency_ns: now_ns() - start,
            unfinished: false,
        });
        result.map_err(|e| {
            let name = errno_name(e.raw_os_error().unwrap_or(0));
            self.add(&format!("errno.{name}"), 1);
            self.run.failure = Some((now_ns(), format!("{op}: {e}")));
            Failed
        })
    }

    /// Sleeps `ns` (off-CPU), waking early when the app is stopped; false if it was.
    fn sleep(&self, ns: u64) -> bool {
        let until = now_ns() + ns;
        loop {
            if self.stopped() {
                return false;
            }
            let now = now_ns();
            if now >= until {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_nanos(
                (until - now).min(10_000_000),
            ));
        }
    }
}

/// Linux errno names of the calls these workloads make.
pub(super) fn errno_name(code: i32) -> String {
    match code {
        libc::ENOENT => "ENOENT".into(),
        libc::EEXIST => "EEXIST".into(),
        libc::ENOSPC => "ENOSPC".into(),
        libc::EIO => "EIO".into(),
        libc::EINVAL => "EINVAL".into(),
        libc::EBADF => "EBADF".into(),
        libc::ENOTDIR => "ENOTDIR".into(),
        libc::EISDIR => "EISDIR".into(),
        libc::ENOTEMPTY => "ENOTEMPTY".into(),
        libc::EFBIG => "EFBIG".into(),
        0 => "other".into(),
        n => format!("E{n}"),
    }
}

/// The `ioprio_set` value of `"rt:N"`, `"be:N"`, `"idle"` (include/uapi/linux/ioprio.h:
/// class << 13 | level).
pub fn ioprio_value(text: &str) -> Result<i32, String> {
    let (class, level) = match text.split_once(':') {
        Some(("rt", n)) => (1, n),
        Some(("be", n)) => (2, n),
        None if text == "idle" => (3, "0"),
        _ => return Err(format!("ioprio `{text}`: expected rt:N, be:N or idle")),
    };
    let level: i32 = level
        .parse()
        .ok()
        .filter(|l| (0..8).contains(l))
        .ok_or_else(|| format!("ioprio `{text}`: level must be 0..=7"))?;
    Ok((class << 13) | level)
}

/// Sets the calling thread's nice value and I/O priority.
fn set_priorities(app: &AppConfig) -> Result<(), String> {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) } as libc::id_t;
    if app.nice != 0 {
        // SAFETY: plain syscall on this thread's id.
        let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, i32::from(app.nice)) };
        if rc != 0 {
            return Err(format!(
                "setpriority(nice {}): {}",
                app.nice,
                std::io::Error::last_os_error()
            ));
        }
    }
    if let Some(text) = &app.ioprio {
        let value = ioprio_value(text)?;
        // SAFETY: ioprio_set(IOPRIO_WHO_PROCESS = 1, tid, value).
        let rc = unsafe { libc::syscall(libc::SYS_ioprio_set, 1, tid, value) };
        if rc != 0 {
            return Err(format!(
                "ioprio_set({text}): {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

/// Runs app `app` from `t0` (+ its start) until its workload ends or `stop` is set; `seed` is
/// the scenario's first seed (the workloads' generators).
pub fn run_app(
    app: &AppConfig,
    uid: u32,
    seed: u64,
    t0: u64,
    root: &Path,
    cgroup: Option<&Path>,
    stop: &AtomicBool,
) -> AppRun {
    let mut ctx = Ctx {
        root,
        stop,
        seed,
        run: AppRun {
            name: app.name.get_ref().clone(),
            uid,
            ..AppRun::default()
        },
    };
    let wait = (t0 + app.start).saturating_sub(now_ns());
    if !ctx.sleep(wait) {
        return ctx.run;
    }
    if let Err(message) = set_priorities(app).and_then(|()| join_cgroup(cgroup)) {
        ctx.run.failure = Some((now_ns(), message));
        return ctx.run;
    }
    if cgroup.is_some() {
        ctx.add("real.cgroup.joined", 1);
    }
    let _ = match &app.workload {
        WorkloadConfig::SeqWrite(c) => seq_write(&mut ctx, c),
        WorkloadConfig::FsyncWrite(c) => fsync_write(&mut ctx, c),
        WorkloadConfig::Ops(c) => ops(&mut ctx, c),
        WorkloadConfig::Sqlite(c) => sqlite(&mut ctx, c),
        WorkloadConfig::FileRead(c) => file_read(&mut ctx, c),
        WorkloadConfig::Fio(c) => fio(&mut ctx, c),
        WorkloadConfig::Filebench(c) => {
            let name = ctx.run.name.clone();
            let run = super::filebench::run(c, &name, uid, seed, root, stop);
            ctx.absorb(run);
            Ok(())
        }
        _ => Ok(()), // refused by check_supported before the run
    };
    ctx.run
}

/// Moves the calling thread into the app's I/O cgroup (`tasks` of a cgroup v1 hierarchy,
/// src/real/cgroup.rs); the threads it starts inherit it.
fn join_cgroup(tasks: Option<&Path>) -> Result<(), String> {
    let Some(tasks) = tasks else {
        return Ok(());
    };
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) };
    std::fs::write(tasks, tid.to_string())
        .map_err(|e| format!("joining the app's cgroup ({}): {e}", tasks.display()))
}

/// A 4 KiB block, the alignment `O_DIRECT` needs.
#[derive(Clone, Copy)]
#[repr(C, align(4096))]
struct Block([u8; 4096]);

/// An `io_size` buffer aligned for `O_DIRECT` (4 KiB), zero-filled.
pub(super) struct AlignedBuffer {
    blocks: Vec<Block>,
    len: usize,
}

impl AlignedBuffer {
    pub(super) fn new(len: usize) -> AlignedBuffer {
        AlignedBuffer {
            blocks: vec![Block([0; 4096]); len.div_ceil(4096)],
            len,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn bytes(&self) -> &[u8] {
        // SAFETY: the blocks are `len.div_ceil(4096) * 4096` initialised bytes, `len` of them
        // viewed; `Block` is plain bytes with no padding.
        unsafe { std::slice::from_raw_parts(self.blocks.as_ptr().cast::<u8>(), self.len) }
    }

    pub(super) fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as `bytes`, exclusively borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.blocks.as_mut_ptr().cast::<u8>(), self.len) }
    }
}

/// `seq-write`: src/workload/file.rs `seq_write`.
fn seq_write(ctx: &mut Ctx, config: &SeqWriteConfig) -> Result<(), Failed> {
    let path = ctx.path(&config.path);
    let mut options = OpenOptions::new();
    options.write(true).create(true).truncate(true);
    match config.mode {
        WriteMode::Buffered => {}
        WriteMode::Sync => {
            options.custom_flags(libc::O_SYNC);
        }
        WriteMode::Direct => {
            options.custom_flags(libc::O_DIRECT);
        }
    }
    let mut file = ctx.timed("open", || options.open(&path))?;
    let aligned = AlignedBuffer::new(config.io_size as usize);
    let buffer = aligned.bytes();
    let mut written = 0u64;
    let mut since_sync = 0u64;
    while written < config.size && !ctx.stopped() {
        if config.think > 0 && !ctx.sleep(config.think) {
            break;
        }
        let n = config.io_size.min(config.size - written) as usize;
        let done = ctx.timed("write", || file.write(&buffer[..n]))? as u64;
        written += done;
        since_sync += done;
        ctx.add("bytes", done);
        if config.fsync_every > 0 && since_sync >= config.fsync_every {
            since_sync = 0;
            ctx.timed("fsync", || file.sync_all())?;
        }
    }
    if config.fsync_at_end && !ctx.stopped() {
        ctx.timed("fsync", || file.sync_all())?;
    }
    ctx.timed("close", || {
        drop(file);
        Ok(())
    })
}

/// `fsync-write`: src/workload/file.rs `fsync_write`.
fn fsync_write(ctx: &mut Ctx, config: &FsyncWriteConfig) -> Result<(), Failed> {
    let path = ctx.path(&config.path);
    let file = ctx.timed("open", || {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
    })?;
    let buffer = vec![0u8; config.io_size as usize];
    let mut rng = ctx.rng(&format!("fsync-write/{}", ctx.run.name));
    let (mut done, mut end) = (0u64, 0u64);
    while !ctx.stopped() && config.count.is_none_or(|c| done < c) {
        if config.think > 0 && !ctx.sleep(config.think) {
            break;
        }
        let at = config.next_write(end, &mut rng);
        let start = now_ns();
        ctx.timed("write", || file.write_all_at(&buffer, at))?;
        end = end.max(at + config.io_size);
        if config.datasync {
            ctx.timed("fdatasync", || file.sync_data())?;
        } else {
            ctx.timed("fsync", || file.sync_all())?;
        }
        ctx.run.transactions.push((start, now_ns()));
        ctx.add("transactions", 1);
        ctx.add("bytes", config.io_size);
        done += 1;
    }
    ctx.timed("close", || {
        drop(file);
        Ok(())
    })
}

/// `file-read`: src/workload/file.rs `file_read`.
fn file_read(ctx: &mut Ctx, config: &FileReadConfig) -> Result<(), Failed> {
    let path = ctx.path(&config.path);
    let mut options = OpenOptions::new();
    options.read(true);
    if config.direct {
        options.custom_flags(libc::O_DIRECT);
    }
    let file = ctx.timed("open", || options.open(&path))?;
    let mut rng = ctx.rng(&format!("file-read/{}", ctx.run.name));
    let mut buffer = AlignedBuffer::new(config.io_size as usize);
    let (mut done, mut offset) = (0u64, 0u64);
    while !ctx.stopped() && config.count.is_none_or(|c| done < c) {
        let Some(at) = config.next_read(offset, &mut rng) else {
            break;
        };
        if config.think > 0 && !ctx.sleep(config.think) {
            break;
        }
        let head = buffer.bytes_mut();
        let n = ctx.timed("read", || file.read_at(head, at))? as u64;
        ctx.add("bytes", n);
        offset = at + n.max(1);
        done += 1;
    }
    // The simulated app's close is not an operation of its results (`note`, not `syscall`).
    drop(file);
    Ok(())
}

/// `fio`: src/workload/fio/run.rs `start` (one job per app, `numjobs` clones, each with
/// `effective_iodepth` submitters), every clone on its own file (module doc).
fn fio(ctx: &mut Ctx, config: &FioWorkloadConfig) -> Result<(), Failed> {
    let clones = match fio_clones(config, &ctx.run.name) {
        Ok(clones) => clones,
        Err(message) => {
            ctx.run.failure = Some((now_ns(), message));
            return Err(Failed);
        }
    };
    let runs: Vec<AppRun> = std::thread::scope(|scope| {
        let parent = &*ctx;
        let handles: Vec<_> = clones
            .into_iter()
            .map(|(job, clone)| scope.spawn(move || fio_clone(parent, job, clone)))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a fio thread does not panic"))
            .collect()
    });
    for run in runs {
        ctx.absorb(run);
    }
    Ok(())
}

/// One clone of a fio job: its file opened as fio opens it, and one thread per slot of its
/// engine's depth sharing the job's state.
fn fio_clone(parent: &Ctx, job: FioJob, clone: u32) -> Vec<AppRun> {
    let mut ctx = parent.thread();
    let path = ctx.path(&job.file_path(clone));
    let writes = !matches!(job.rw, RwMode::Read | RwMode::RandRead);
    let mut options = OpenOptions::new();
    options.read(true).write(writes);
    if job.direct {
        options.custom_flags(libc::O_DIRECT);
    }
    // Not an operation: the simulated job opens its file in `prepare`, untimed.
    let file = match options.open(&path) {
        Ok(file) => file,
        Err(e) => {
            let name = errno_name(e.raw_os_error().unwrap_or(0));
            ctx.add(&format!("errno.{name}"), 1);
            ctx.run.failure = Some((now_ns(), format!("open {}: {e}", path.display())));
            return vec![ctx.run];
        }
    };
    let rng = ctx.rng(&format!("fio/{}", job.name));
    let depth = job.effective_iodepth();
    let ioprio = job.ioprio;
    let state = match JobState::new(job, 0, ctx.run.uid, &ctx.run.name, u64::MAX, rng) {
        Ok(state) => std::sync::Mutex::new(state),
        Err(message) => {
            ctx.run.failure = Some((now_ns(), message));
            return vec![ctx.run];
        }
    };
    state.lock().expect("not poisoned").begin(now_ns());
    let failed = AtomicBool::new(false);
    let mut runs: Vec<AppRun> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..depth)
            .map(|_| {
                let (ctx, state, file, failed) = (ctx.thread(), &state, &file, &failed);
                scope.spawn(move || fio_submitter(ctx, state, file, ioprio, failed))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a fio thread does not panic"))
            .collect()
    });
    drop(file);
    runs.push(ctx.run);
    runs
}

/// One submitter of a fio job clone: the job's next I/O (paced by its `rate`) until it is
/// done, the run stops or another submitter failed (fio stops a job on its first error).
fn fio_submitter(
    mut ctx: Ctx,
    state: &std::sync::Mutex<JobState>,
    file: &File,
    ioprio: crate::task::IoPrio,
    failed: &AtomicBool,
) -> AppRun {
    if let Err(message) = set_job_ioprio(ioprio) {
        ctx.run.failure = Some((now_ns(), message));
        failed.store(true, Ordering::Relaxed);
        return ctx.run;
    }
    let bs = state.lock().expect("not poisoned").job.bs;
    let mut buffer = AlignedBuffer::new(bs as usize);
    while !ctx.stopped() && !failed.load(Ordering::Relaxed) {
        let due = state.lock().expect("not poisoned").rate_due();
        if let Some(due) = due {
            if !ctx.sleep(due.saturating_sub(now_ns())) {
                break;
            }
        }
        let next = state.lock().expect("not poisoned").next_io(now_ns());
        let Some((op, offset)) = next else {
            break;
        };
        let result = match op {
            IoOp::Read => {
                let head = buffer.bytes_mut();
                ctx.timed("read", || file.read_at(head, offset))
            }
            _ => {
                let data = buffer.bytes();
                ctx.timed("write", || file.write_at(data, offset))
            }
        };
        match result {
            Ok(n) => ctx.add("bytes", n as u64),
            Err(Failed) => {
                failed.store(true, Ordering::Relaxed);
                break;
            }
        }
    }
    ctx.run
}

/// A fio job's `prio` / `prioclass` on the calling thread (`ioprio_set`, as fio sets it per
/// job); nothing for class NONE (the app's own priority, inherited by the thread, applies).
fn set_job_ioprio(ioprio: crate::task::IoPrio) -> Result<(), String> {
    use crate::task::IoPrioClass;
    let class = match ioprio.class {
        IoPrioClass::None => return Ok(()),
        IoPrioClass::Rt => 1,
        IoPrioClass::Be => 2,
        IoPrioClass::Idle => 3,
    };
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) };
    let value = (class << 13) | i32::from(ioprio.level);
    // SAFETY: ioprio_set(IOPRIO_WHO_PROCESS = 1, tid, value).
    if unsafe { libc::syscall(libc::SYS_ioprio_set, 1, tid, value) } != 0 {
        return Err(format!(
            "fio ioprio_set(class {class}, level {}): {}",
            ioprio.level,
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

fn open_options(flags: &[OpenFlag]) -> OpenOptions {
    let mut options = OpenOptions::new();
    let mut custom = 0;
    for flag in flags {
        match flag {
            OpenFlag::Rdonly => {
                options.read(true);
            }
            OpenFlag::Wronly => {
                options.write(true);
            }
            OpenFlag::Rdwr => {
                options.read(true).write(true);
            }
            OpenFlag::Creat => custom |= libc::O_CREAT,
            OpenFlag::Excl => custom |= libc::O_EXCL,
            OpenFlag::Trunc => custom |= libc::O_TRUNC,
            OpenFlag::Append => custom |= libc::O_APPEND,
            OpenFlag::Sync => custom |= libc::O_SYNC,
            OpenFlag::Direct => custom |= libc::O_DIRECT,
            // The simulator's: crash-point checking keeps the file's pages; nothing on a
            // real file system.
            OpenFlag::StoreContents => {}
        }
    }
    options.custom_flags(custom).mode(0o644);
    options
}

fn no_file(ctx: &mut Ctx) -> Result<(), Failed> {
    ctx.add("errno.EBADF", 1);
    ctx.run.failure = Some((
        now_ns(),
        "a step needs an open file and none is open".into(),
    ));
    Err(Failed)
}

/// `ops`: src/workload/ops.rs `run_loop`.
fn ops(ctx: &mut Ctx, config: &OpsConfig) -> Result<(), Failed> {
    let mut file: Option<File> = None;
    let mut buffer = Vec::new();
    let mut iteration = 0u64;
    while !ctx.stopped() && config.count.is_none_or(|c| iteration < c) {
        if config.think > 0 && iteration > 0 && !ctx.sleep(config.think) {
            break;
        }
        let start = now_ns();
        for step in &config.steps {
            if ctx.stopped() {
                break;
            }
            ops_step(ctx, step, iteration, &mut file, &mut buffer)?;
        }
        let end = now_ns();
        ctx.run.samples.push(OpSample {
            op: "iteration".into(),
            start_ns: start,
            latency_ns: end - start,
            unfinished: false,
        });
        ctx.run.transactions.push((start, end));
        iteration += 1;
    }
    Ok(())
}

fn ops_step(
    ctx: &mut Ctx,
    step: &Step,
    iteration: u64,
    file: &mut Option<File>,
    buffer: &mut Vec<u8>,
) -> Result<(), Failed> {
    let path_of = |ctx: &Ctx, p: &str| ctx.path(&expand(p, iteration));
    match step {
        Step::Open { path, flags } => {
            let path = path_of(ctx, path);
            *file = Some(ctx.timed("open", || open_options(flags).open(&path))?);
        }
        Step::Creat { path } => {
            let path = path_of(ctx, path);
            *file = Some(ctx.timed("creat", || File::create(&path))?);
        }
        Step::Write { .. } | Step::Read { .. } => match file {
            Some(f) => transfer(ctx, f, step, buffer)?,
            None => return no_file(ctx),
        },
        Step::Sync {} => ctx.timed("sync", || {
            // SAFETY: sync has no preconditions.
            unsafe { libc::sync() };
            Ok(())
        })?,
        Step::Fsync {} => match file {
            Some(f) => ctx.timed("fsync", || f.sync_all())?,
            None => return no_file(ctx),
        },
        Step::Fdatasync {} => match file {
            Some(f) => ctx.timed("fdatasync", || f.sync_data())?,
            None => return no_file(ctx),
        },
        Step::Close {} => match file.take() {
            Some(f) => ctx.timed("close", || {
                drop(f);
                Ok(())
            })?,
            None => return no_file(ctx),
        },
        Step::Truncate { path, size } => {
            let path = path_of(ctx, path);
            ctx.timed("truncate", || {
                OpenOptions::new().write(true).open(&path)?.set_len(*size)
            })?
        }
        Step::Ftruncate { size } => match file {
            Some(f) => ctx.timed("ftruncate", || f.set_len(*size))?,
            None => return no_file(ctx),
        },
        Step::Unlink { path } => {
            let path = path_of(ctx, path);
            ctx.timed("unlink", || std::fs::remove_file(&path))?
        }
        Step::Rename { from, to } => {
            let (from, to) = (path_of(ctx, from), path_of(ctx, to));
            ctx.timed("rename", || std::fs::rename(&from, &to))?
        }
        Step::Mkdir { path } => {
            let path = path_of(ctx, path);
            ctx.timed("mkdir", || std::fs::create_dir(&path))?
        }
        Step::Stat { path } => {
            let path = path_of(ctx, path);
            ctx.timed("stat", || std::fs::metadata(&path).map(|_| ()))?
        }
        Step::Fadvise { offset, len, .. } => match file {
            Some(f) => {
                let (offset, len) = (*offset, *len);
                ctx.timed("fadvise", || match fadvise_dontneed(f, offset, len) {
                    0 => Ok(()),
                    e => Err(std::io::Error::from_raw_os_error(e)),
                })?
            }
            None => return no_file(ctx),
        },
        Step::Sleep { duration } => {
            ctx.sleep(*duration);
        }
    }
    Ok(())
}

/// An `ops` `write` or `read` step: `size`-sized calls until `total` bytes moved.
fn transfer(
    ctx: &mut Ctx,
    file: &mut File,
    step: &Step,
    buffer: &mut Vec<u8>,
) -> Result<(), Failed> {
    let Some(Transfer {
        size,
        total,
        offset,
        write,
    }) = step.transfer()
    else {
        return Ok(());
    };
    buffer.resize(size as usize, 0);
    let mut moved = 0u64;
    while moved < total && !ctx.stopped() {
        let n = size.min(total - moved) as usize;
        let at = offset.map(|o| o + moved);
        let done = if write {
            ctx.timed("write", || match at {
                Some(at) => file.write_at(&buffer[..n], at),
                None => file.write(&buffer[..n]),
            })?
        } else {
            let head = &mut buffer[..n];
            ctx.timed("read", || match at {
                Some(at) => file.read_at(head, at),
                None => file.read(head),
            })?
        };
        if done == 0 {
            break;
        }
        ctx.add("bytes", done as u64);
        moved += done as u64;
    }
    Ok(())
}

/// Runs every statement of `sql`, stepping through any rows.
fn run_sql(conn: &rusqlite::Connection, sql: &str) -> rusqlite::Result<()> {
    use rusqlite::fallible_iterator::FallibleIterator;
    let mut batch = rusqlite::Batch::new(conn, sql);
    while let Some(mut statement) = batch.next()? {
        let mut rows = statement.raw_query();
        while rows.next()?.is_some() {}
    }
    Ok(())
}

/// `sqlite` with `statements`: src/workload/sqlite `statements`, through SQLite's `unix` VFS.
fn sqlite(ctx: &mut Ctx, config: &SqliteConfig) -> Result<(), Failed> {
    let options = config.options().resolve();
    if options.sync_call == crate::app::sqlite::SyncCall::Fdatasync {
        ctx.run.warnings.push(
            "sync_call = fdatasync: the bundled SQLite calls fsync unless built with \
             HAVE_FDATASYNC; real mode runs it as built"
                .into(),
        );
    }
    let path = ctx.path(&config.database);
    let sql_error = |ctx: &mut Ctx, what: String, e: rusqlite::Error| {
        ctx.add("sqlite.error", 1);
        ctx.run.failure = Some((now_ns(), format!("{what}: {e}")));
        Failed
    };
    let start = now_ns();
    let conn = rusqlite::Connection::open_with_flags_and_vfs(
        &path,
        rusqlite::OpenFlags::default(),
        "unix",
    )
    .and_then(|conn| run_sql(&conn, &options.setup_sql()).map(|()| conn));
    ctx.run.samples.push(OpSample {
        op: "open".into(),
        start_ns: start,
        latency_ns: now_ns() - start,
        unfinished: false,
    });
    let conn = conn.map_err(|e| sql_error(ctx, format!("opening {}", config.database), e))?;
    for (k, sql) in config.setup.iter().enumerate() {
        run_sql(&conn, sql)
            .map_err(|e| sql_error(ctx, format!("statement {} of `setup`", k + 1), e))?;
    }
    let mut iteration = 0u64;
    while !ctx.stopped() && config.count.is_none_or(|c| iteration < c) {
        if config.think > 0 && iteration > 0 && !ctx.sleep(config.think) {
            break;
        }
        let body = config.statements_of(iteration);
        let batches = if config.transaction {
            vec![format!("BEGIN;\n{};\nCOMMIT;", body.join(";\n"))]
        } else {
            body
        };
        for sql in batches {
            let start = now_ns();
            let result = run_sql(&conn, &sql);
            let end = now_ns();
            ctx.run.samples.push(OpSample {
                op: "transaction".into(),
                start_ns: start,
                latency_ns: end - start,
                unfinished: false,
            });
            result.map_err(|e| sql_error(ctx, format!("iteration {iteration}"), e))?;
            ctx.run.transactions.push((start, end));
            ctx.add("sqlite.transactions", 1);
        }
        iteration += 1;
    }
    Ok(())
}
