//! filebench in real mode: a `[app.workload.filebench]` script's thread instances as real
//! threads issuing its flowops' system calls on the mounted file system.
//!
//! The script is loaded by the simulation's own code (src/workload/filebench `script::load`),
//! and every choice a flowop makes comes from the simulation's own state and generator streams
//! of the scenario's first seed: the filesets are populated by `Fileset::populate` from the
//! stream `filebench/<app>/fileset/<name>` and preallocated with the same draws
//! (src/workload/filebench/interp.rs `start`), files are picked by `Fileset::pick` (its rotors,
//! busy files, the idle wait), sizes and offsets come from each thread's stream
//! `filebench/<app>/<process>.<p>/<thread>.<t>`. So the real run works on the simulated run's
//! files, with the same sizes, in the same tree. What differs is only the interleaving of the
//! threads, which the real kernel decides.
//!
//! The flowops follow filebench 1.5's `flowop_library.c` as interp.rs models them (its module
//! doc lists each one's semantics), with real calls: `open(2)` with the fileset's access mode
//! (`O_SYNC` with `dsync`, `O_DIRECT` with `directio`), `pread`/`pwrite` at the descriptor's
//! offset, `fsync(2)`, `close(2)`, `unlink(2)`, `stat(2)`; latency is measured around the calls
//! (`flowop_beginop` / `flowop_endop`) with `CLOCK_MONOTONIC` and recorded per flowop name, as
//! the simulated app records it; `filebench.*` counters come from the same statistics snapshot
//! (`stats::Snapshot::counters`). The run is `parser_run`'s: `sleep` before it, statistics from
//! the start of the run time, `run N` seconds (or until the threads are done in `alldone` /
//! `firstdone` mode, or the scenario ends), then the threads are stopped.
//!
//! The preallocated files are written before the run, synced and dropped from the page cache
//! ([`prepare`]; the simulation's `populate` lays them out on disk, uncached).
//!
//! Simplified or not supported: the event generator (`eventgen`, and so `eventlimit`,
//! `opslimit`, `iopslimit`, `bwlimit` with a rate) is refused; `psrun`'s periodic snapshots are
//! not taken (only the final one); `hog` spins `value` iterations of a store on the real CPU;
//! one mutex guards the shared state (filebench has a lock per fileset), held only between
//! system calls.

use super::exec::{errno_name, now_ns, under, AlignedBuffer, AppRun, OpSample};
use crate::sim::Rng;
use crate::workload::filebench::fileset::{Fileset, IntExpr, Pick, PickFrom};
use crate::workload::filebench::interp::{iobuf_error, random64};
use crate::workload::filebench::parser::QuitMode;
use crate::workload::filebench::script::{Kind, RunKind, Workload};
use crate::workload::filebench::stats::Snapshot;
use crate::workload::filebench::FilebenchConfig;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// `THREADFLOW_MAXFD`.
const MAX_FD: usize = 128;
/// Bound on one call's buffer (as interp.rs: `readwholefile` with `iosize=0` reads a file at once).
const MAX_BUFFER: u64 = 1 << 30;
/// How often a waiting thread looks at the stop flag (which is outside the mutex).
const WAIT_SLICE: Duration = Duration::from_millis(20);

/// What real mode cannot run of the script (loaded as the simulation loads it).
pub fn check_supported(config: &FilebenchConfig) -> Result<(), String> {
    let workload = config.load()?;
    if workload.eventgen_rate.is_some() {
        return Err(
            "filebench `eventgen` (the event generator and the rate limits that read it)".into(),
        );
    }
    Ok(())
}

/// One fileset as the simulation sets it up: the tree, which files exist before the run and
/// their sizes, and the directories made.
struct Planned {
    set: Fileset,
    sizes: Vec<u64>,
    dirs: Vec<String>,
}

/// interp.rs `start`'s population and preallocation, draw for draw, without touching a disk.
fn plan_filesets(workload: &Workload, app: &str, seed: u64) -> Result<Vec<Planned>, String> {
    let mut planned = Vec::new();
    for spec in &workload.filesets {
        let mut rng = Rng::named(seed, &format!("filebench/{app}/fileset/{}", spec.name));
        let at = |message: String| format!("{}:{}: {message}", workload.file, spec.line);
        let mut set = Fileset::populate(spec.clone(), &mut rng).map_err(at)?;
        let mut dirs = set.dir_paths();
        let mut sizes = vec![0u64; set.files.len()];
        for index in 0..set.files.len() as u32 {
            if rng.next_f64() * 100.0 < spec.prealloc as f64 {
                set.set_preexisting(index);
                sizes[index as usize] = set.files[index as usize].size;
            }
        }
        for dir in set.leafdir_paths() {
            if rng.next_f64() * 100.0 < spec.prealloc as f64 {
                dirs.push(dir);
            }
        }
        planned.push(Planned { set, sizes, dirs });
    }
    Ok(planned)
}

/// The create phase on the real file system: the directories, then every preallocated file
/// written, all synced, and each dropped from the page cache (on disk, uncached, as the
/// simulation's `populate`). Runs before the trace starts.
pub fn prepare(config: &FilebenchConfig, app: &str, seed: u64, root: &Path) -> Result<(), String> {
    let workload = config.load()?;
    let planned = plan_filesets(&workload, app, seed)?;
    let mut files = Vec::new();
    for plan in &planned {
        for dir in &plan.dirs {
            let path = under(root, dir);
            std::fs::create_dir_all(&path)
                .map_err(|e| format!("app `{app}`: mkdir -p {}: {e}", path.display()))?;
        }
        for (index, &size) in plan.sizes.iter().enumerate() {
            if plan.set.files[index].exists {
                files.push((under(root, &plan.set.file_path(index as u32)), size));
            }
        }
    }
    let chunk = vec![0x5au8; 1 << 20];
    for (path, size) in &files {
        let err = |e: std::io::Error| format!("app `{app}`: preallocating {}: {e}", path.display());
        let file = File::create(path).map_err(err)?;
        let mut done = 0u64;
        while done < *size {
            let n = (*size - done).min(chunk.len() as u64) as usize;
            file.write_all_at(&chunk[..n], done).map_err(err)?;
            done += n as u64;
        }
    }
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    for (path, _) in &files {
        if let Ok(file) = File::open(path) {
            super::exec::fadvise_dontneed(&file, 0, 0);
        }
    }
    Ok(())
}

/// How a flowop ended (FILEBENCH_OK, _NORSC, _ERROR).
enum Outcome {
    Ok,
    NoResource,
    Error(String),
}

/// Why the run is over (interp.rs `Abort`).
#[derive(Debug, Clone, PartialEq)]
enum Abort {
    Shutdown,
    Done,
    Error(String),
}

/// Counters of one process instance (`controlstats`).
#[derive(Debug, Clone, Copy, Default)]
struct Control {
    count: u64,
    bytes: u64,
    rw_count: u64,
    rw_bytes: u64,
}

/// Everything the threads share, behind [`Run::state`].
struct Shared {
    workload: Workload,
    filesets: Vec<Fileset>,
    /// Current size of every file (what an append seeks to), per fileset.
    sizes: Vec<Vec<u64>>,
    stats: Snapshot,
    frozen: bool,
    control: Vec<Control>,
    abort: Option<Abort>,
    running: usize,
    /// Thread instances running a flowop of each statistic (wakeup's targets).
    instances_of: Vec<u64>,
    /// Bumped by `wakeup` per statistic: a `block` waits for a change.
    wakeups: Vec<u64>,
    failure: Option<(u64, String)>,
}

// SAFETY: the script's values hold `Rc`s and `RefCell`s (random variables, fileset specs),
// which are not thread-safe. Every one of them is reached only through the mutex of
// [`Run::state`]: threads copy out plain values ([`Fo`], paths, sizes) and never an `Rc`, so no
// two threads touch a reference count or a `RefCell` at once, and the last owner drops them
// after every thread has been joined.
unsafe impl Send for Shared {}

/// The shared run.
struct Run<'a> {
    state: Mutex<Shared>,
    changed: Condvar,
    stop: &'a AtomicBool,
}

impl Run<'_> {
    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn stopping(&self, s: &Shared) -> bool {
        s.abort.is_some() || self.stop.load(Ordering::Relaxed)
    }

    /// Waits for a change (or a slice of time, to see the stop flag).
    fn wait<'g>(&self, guard: MutexGuard<'g, Shared>) -> MutexGuard<'g, Shared> {
        match self.changed.wait_timeout(guard, WAIT_SLICE) {
            Ok((guard, _)) => guard,
            Err(e) => e.into_inner().0,
        }
    }

    fn set_abort(&self, s: &mut Shared, abort: Abort) {
        if s.abort.is_none() {
            s.abort = Some(abort);
        }
        self.changed.notify_all();
    }

    /// A flowop failed: the run stops without valid results, the app records why (the first).
    fn fail(&self, message: String) {
        let mut s = self.lock();
        if s.abort.is_none() && s.failure.is_none() {
            s.failure = Some((now_ns(), message.clone()));
        }
        self.set_abort(&mut s, Abort::Error(message));
    }

    /// `fileset_unbusy`, waking the waiters.
    fn unbusy(&self, fileset: usize, entry: u32, exists: Option<bool>, open_delta: i64) {
        self.lock().filesets[fileset].unbusy(entry, exists, open_delta);
        self.changed.notify_all();
    }

    /// Picks a file, waiting while no file of the fileset is idle.
    fn pick(&self, fileset: usize, from: PickFrom, tid: usize, index: Option<u32>) -> Option<u32> {
        let mut s = self.lock();
        loop {
            match s.filesets[fileset].pick(from, tid, index) {
                Pick::Picked(i) => return Some(i),
                Pick::None => return None,
                Pick::Wait if self.stopping(&s) => return None,
                Pick::Wait => s = self.wait(s),
            }
        }
    }

    /// Waits until `entry` is not busy and takes it.
    fn grab(&self, fileset: usize, entry: u32) -> bool {
        let mut s = self.lock();
        loop {
            if s.filesets[fileset].try_grab(entry) {
                return true;
            }
            if self.stopping(&s) {
                return false;
            }
            s = self.wait(s);
        }
    }
}

/// A flowop's plain attributes, copied out of the script (its `IntExpr`s stay in [`Shared`]).
#[derive(Debug, Clone)]
struct Fo {
    name: String,
    kind: Kind,
    line: usize,
    stat: usize,
    fileset: Option<usize>,
    fd: usize,
    srcfd: usize,
    wss: u64,
    random: bool,
    dsync: bool,
    directio: bool,
    rotatefd: bool,
    target: Option<String>,
    target_local: Option<usize>,
    inner: Vec<usize>,
    nested: bool,
}

/// Which of a flowop's integer attributes to draw.
#[derive(Clone, Copy)]
enum Attr {
    Iosize,
    Iters,
    Value,
}

/// An open descriptor of a thread.
struct OpenFd {
    file: File,
    fileset: usize,
    entry: Option<u32>,
    pos: u64,
}

/// Per-thread state of one flowop instance.
#[derive(Debug, Clone, Default)]
struct Local {
    count: u64,
    bytes: u64,
    value: i64,
}

/// One thread instance.
struct Worker {
    process: usize,
    thread: usize,
    proc_instance: usize,
    utid: usize,
    memsize: u64,
    flowops: Vec<Fo>,
    fds: Vec<Option<OpenFd>>,
    fses: Vec<Option<(usize, u32)>>,
    fd_rotor: usize,
    locals: Vec<Local>,
    rng: Rng,
    buffer: AlignedBuffer,
    stime: u64,
    samples: Vec<OpSample>,
}

impl Worker {
    /// Draws attribute `attr` of flowop `i` from this thread's stream.
    fn draw(&mut self, run: &Run, i: usize, attr: Attr) -> i64 {
        let s = run.lock();
        let flowop = &s.workload.processes[self.process].threads[self.thread].flowops[i];
        let expr: &IntExpr = match attr {
            Attr::Iosize => &flowop.iosize,
            Attr::Iters => &flowop.iters,
            Attr::Value => &flowop.value,
        };
        expr.eval(&mut self.rng)
    }

    /// `indexed=`: the file index the flowop names, if it does.
    fn pick_index(&mut self, run: &Run, i: usize, fileset: usize) -> Option<u32> {
        let s = run.lock();
        let flowop = &s.workload.processes[self.process].threads[self.thread].flowops[i];
        let files = s.filesets[fileset].files.len().max(1) as u64;
        flowop.index.as_ref().map(|expr| {
            let value = expr.eval_f64(&mut self.rng).max(0.0) as u64;
            (value % files) as u32
        })
    }

    fn buffer(&mut self, len: u64) -> Result<(), String> {
        if len > MAX_BUFFER {
            return Err(format!(
                "an I/O of {len} bytes exceeds the 1 GiB buffer limit"
            ));
        }
        if (self.buffer.len() as u64) < len {
            self.buffer = AlignedBuffer::new(len as usize);
        }
        Ok(())
    }

    /// `flowop_beginop`.
    fn begin(&mut self) {
        self.stime = now_ns();
    }

    /// `flowop_endop`.
    fn end(&mut self, run: &Run, index: usize, bytes: u64) {
        let now = now_ns();
        let latency = now.saturating_sub(self.stime);
        self.locals[index].count += 1;
        self.locals[index].bytes += bytes;
        let flowop = &self.flowops[index];
        let kind = flowop.kind;
        let mut s = run.lock();
        let c = &mut s.control[self.proc_instance];
        if kind.is_io() {
            c.count += 1;
            c.bytes += bytes;
        }
        if kind.is_read() || kind.is_write() {
            c.rw_count += 1;
            c.rw_bytes += bytes;
        }
        if s.frozen {
            return;
        }
        s.stats.add(
            flowop.stat,
            kind.is_io(),
            kind.is_read(),
            kind.is_write(),
            latency,
            bytes,
        );
        drop(s);
        self.samples.push(OpSample {
            op: flowop.name.clone(),
            start_ns: self.stime,
            latency_ns: latency,
            unfinished: false,
        });
    }

    /// `flowoplib_fdnum`.
    fn fdnum(&mut self, index: usize) -> usize {
        let flowop = &self.flowops[index];
        if flowop.fd > 0 || !flowop.rotatefd {
            return flowop.fd;
        }
        if self.fd_rotor == 0 {
            self.fd_rotor = MAX_FD;
        }
        self.fd_rotor -= 1;
        self.fd_rotor
    }
}

fn io_error(what: &str, e: &std::io::Error) -> Outcome {
    Outcome::Error(format!(
        "{what} failed: {}",
        errno_name(e.raw_os_error().unwrap_or(0))
    ))
}

/// The open options of a flowop on `fileset` (interp.rs `open_flags`).
fn open_options(run: &Run, fileset: usize, flowop: &Fo, create: bool) -> OpenOptions {
    let s = run.lock();
    let spec = &s.filesets[fileset].spec;
    let mut options = OpenOptions::new();
    if spec.readonly {
        options.read(true);
    } else if spec.writeonly {
        options.write(true);
    } else {
        options.read(true).write(true);
    }
    let mut custom = 0;
    if flowop.dsync {
        custom |= libc::O_SYNC;
    }
    if flowop.directio {
        custom |= libc::O_DIRECT;
    }
    if create {
        custom |= libc::O_CREAT;
    }
    options.custom_flags(custom).mode(0o644);
    options
}

fn file_path(run: &Run, root: &Path, fileset: usize, entry: u32) -> std::path::PathBuf {
    under(root, &run.lock().filesets[fileset].file_path(entry))
}

/// `flowoplib_openfile_common`.
fn open_common(run: &Run, root: &Path, w: &mut Worker, index: usize, fd: usize) -> Outcome {
    let flowop = w.flowops[index].clone();
    let Some(fileset) = flowop.fileset else {
        return Outcome::Error("flowop NULL file".into());
    };
    if w.fds[fd].is_some() {
        return Outcome::Error(format!("attempted to open without closing on fd {fd}"));
    }
    let tid = if flowop.rotatefd { w.utid } else { 0 };
    let by_index = w.pick_index(run, index, fileset);
    let Some(entry) = run.pick(fileset, PickFrom::Existing, tid, by_index) else {
        return Outcome::NoResource;
    };
    let path = file_path(run, root, fileset, entry);
    let options = open_options(run, fileset, &flowop, false);
    w.begin();
    let result = options.open(&path);
    w.end(run, index, 0);
    match result {
        Ok(file) => {
            run.unbusy(fileset, entry, None, 1);
            w.fses[fd] = Some((fileset, entry));
            w.fds[fd] = Some(OpenFd {
                file,
                fileset,
                entry: Some(entry),
                pos: 0,
            });
            Outcome::Ok
        }
        Err(e) => {
            run.unbusy(fileset, entry, None, 0);
            io_error(&format!("open {}", path.display()), &e)
        }
    }
}

/// `flowoplib_filesetup`: the descriptor to use, opened if needed, and the working set size.
fn filesetup(
    run: &Run,
    root: &Path,
    w: &mut Worker,
    index: usize,
) -> Result<(usize, u64), Outcome> {
    let fd = w.fdnum(index);
    let flowop = w.flowops[index].clone();
    if fd > 0 {
        if let (Some(open), Some(named)) = (&w.fds[fd], flowop.fileset) {
            if open.entry.is_some() && open.fileset != named {
                let s = run.lock();
                return Err(Outcome::Error(format!(
                    "name of fd referenced fileset name ({}) CONFLICTS with flowop supplied fileset name ({})",
                    s.filesets[open.fileset].spec.name, s.filesets[named].spec.name
                )));
            }
        }
    }
    if w.fds[fd].is_none() {
        match open_common(run, root, w, index, fd) {
            Outcome::Ok => {}
            other => return Err(other),
        }
    }
    let open = w.fds[fd].as_ref().expect("opened above");
    let wss = if flowop.wss > 0 {
        flowop.wss
    } else {
        match open.entry {
            Some(entry) => run.lock().filesets[open.fileset].files[entry as usize].size,
            None => 0,
        }
    };
    Ok((fd, wss))
}

/// `flowoplib_iobufsetup`'s checks, as the simulation makes them.
fn iobuf_check(w: &Worker, index: usize, iosize: u64) -> Result<(), Outcome> {
    let flowop = &w.flowops[index];
    match iobuf_error(&flowop.name, flowop.directio, w.memsize, iosize) {
        Some(message) => Err(Outcome::Error(message)),
        None => Ok(()),
    }
}

/// `read(2)` at the descriptor's offset (or `offset`), advancing it.
fn read_at(w: &mut Worker, fd: usize, len: u64, offset: Option<u64>) -> Result<u64, Outcome> {
    w.buffer(len).map_err(Outcome::Error)?;
    let open = w.fds[fd].as_mut().expect("an open descriptor");
    let at = offset.unwrap_or(open.pos);
    let n = open
        .file
        .read_at(&mut w.buffer.bytes_mut()[..len as usize], at)
        .map_err(|e| io_error("read", &e))? as u64;
    open.pos = at + n;
    Ok(n)
}

/// `write(2)` at the descriptor's offset (or `offset`), advancing it and the file's size.
fn write_at(
    run: &Run,
    w: &mut Worker,
    fd: usize,
    len: u64,
    offset: Option<u64>,
) -> Result<u64, Outcome> {
    w.buffer(len).map_err(Outcome::Error)?;
    let open = w.fds[fd].as_mut().expect("an open descriptor");
    let at = offset.unwrap_or(open.pos);
    let n = open
        .file
        .write_at(&w.buffer.bytes()[..len as usize], at)
        .map_err(|e| io_error("write", &e))? as u64;
    open.pos = at + n;
    if let Some(entry) = open.entry {
        let mut s = run.lock();
        let size = &mut s.sizes[open.fileset][entry as usize];
        *size = (*size).max(at + n);
    }
    Ok(n)
}

/// Sleeps `ns`, waking early when the run stops; false if it did.
fn sleep(run: &Run, ns: u64) -> bool {
    let until = now_ns().saturating_add(ns);
    loop {
        if run.stopping(&run.lock()) {
            return false;
        }
        let now = now_ns();
        if now >= until {
            return true;
        }
        std::thread::sleep(Duration::from_nanos((until - now).min(10_000_000)));
    }
}

/// Runs flowop `index` of the thread once (interp.rs `exec`, with real calls).
fn exec(run: &Run, root: &Path, w: &mut Worker, index: usize) -> Outcome {
    let flowop = w.flowops[index].clone();
    match flowop.kind {
        Kind::Read | Kind::Write => read_or_write(run, root, w, index),
        Kind::ReadWholeFile => read_whole_file(run, root, w, index),
        Kind::WriteWholeFile => write_whole_file(run, root, w, index),
        Kind::AppendFile | Kind::AppendFileRand => append_file(run, root, w, index),
        Kind::OpenFile => {
            let fd = w.fdnum(index);
            open_common(run, root, w, index, fd)
        }
        Kind::CreateFile => create_file(run, root, w, index),
        Kind::CloseFile => close_file(run, w, index),
        Kind::DeleteFile => delete_file(run, root, w, index),
        Kind::Fsync => fsync_file(run, w, index),
        Kind::FsyncSet => fsync_set(run, w, index),
        Kind::StatFile => stat_file(run, root, w, index),
        Kind::Delay => {
            let seconds = w.draw(run, index, Attr::Value).max(0) as u64;
            w.begin();
            sleep(run, seconds.saturating_mul(1_000_000_000));
            w.end(run, index, 0);
            Outcome::Ok
        }
        Kind::Composite => composite(run, root, w, index),
        Kind::Hog => {
            let iterations = w.draw(run, index, Attr::Value).max(0) as u64;
            w.begin();
            let mut sink = 0u64;
            for i in 0..iterations {
                sink = std::hint::black_box(sink ^ i);
            }
            w.end(run, index, 0);
            Outcome::Ok
        }
        Kind::Block => block(run, w, index),
        Kind::Wakeup => wakeup(run, w, index),
        // Without an event generator (refused before the run) these do nothing, as in
        // interp.rs.
        Kind::EventLimit | Kind::OpsLimit | Kind::IopsLimit | Kind::BwLimit => Outcome::Ok,
        Kind::FinishOnCount | Kind::FinishOnBytes => finish_on(run, w, index),
    }
}

/// `flowoplib_read` / `flowoplib_write`.
fn read_or_write(run: &Run, root: &Path, w: &mut Worker, index: usize) -> Outcome {
    let flowop = w.flowops[index].clone();
    let iosize = w.draw(run, index, Attr::Iosize).max(0) as u64;
    let (fd, wss) = match filesetup(run, root, w, index) {
        Ok(v) => v,
        Err(outcome) => return outcome,
    };
    if let Err(outcome) = iobuf_check(w, index, iosize) {
        return outcome;
    }
    let offset = if flowop.random {
        if iosize > wss {
            return Outcome::Error(format!(
                "file size smaller than IO size for thread {}",
                flowop.name
            ));
        }
        Some(random64(&mut w.rng, wss, iosize))
    } else {
        None
    };
    w.begin();
    let result = if flowop.kind == Kind::Read {
        read_at(w, fd, iosize, offset)
    } else {
        write_at(run, w, fd, iosize, offset).map(|_| iosize)
    };
    match result {
        Ok(n) => {
            w.end(run, index, n);
            if n == 0 && flowop.kind == Kind::Read {
                if let Some(slot) = w.fds[fd].as_mut() {
                    slot.pos = 0;
                }
            }
            Outcome::Ok
        }
        Err(outcome) => {
            w.end(run, index, 0);
            outcome
        }
    }
}

/// `flowoplib_readwholefile`.
fn read_whole_file(run: &Run, root: &Path, w: &mut Worker, index: usize) -> Outcome {
    let (fd, wss) = match filesetup(run, root, w, index) {
        Ok(v) => v,
        Err(outcome) => return outcome,
    };
    let mut iosize = w.draw(run, index, Attr::Iosize).max(0) as u64;
    if iosize == 0 {
        iosize = wss;
    }
    if iosize > 0 {
        if let Err(outcome) = iobuf_check(w, index, iosize) {
            return outcome;
        }
    }
    w.begin();
    if let Some(slot) = w.fds[fd].as_mut() {
        slot.pos = 0;
    }
    let mut bytes = 0u64;
    // An empty file with `iosize=0` reads nothing (interp.rs: no read at all).
    if iosize > 0 {
        loop {
            match read_at(w, fd, iosize, None) {
                Ok(0) => break,
                Ok(n) => bytes += n,
                Err(outcome) => {
                    w.end(run, index, bytes);
                    return outcome;
                }
            }
        }
    }
    w.end(run, index, bytes);
    Outcome::Ok
}

/// `flowoplib_writewholefile`.
fn write_whole_file(run: &Run, root: &Path, w: &mut Worker, index: usize) -> Outcome {
    let flowop = w.flowops[index].clone();
    let (fd, mut wss) = match filesetup(run, root, w, index) {
        Ok(v) => v,
        Err(outcome) => return outcome,
    };
    let mut iosize = w.draw(run, index, Attr::Iosize).max(0) as u64;
    if iosize == 0 {
        iosize = wss;
    }
    if iosize > 0 {
        if let Err(outcome) = iobuf_check(w, index, iosize) {
            return outcome;
        }
    }
    let src = w.fds[flowop.srcfd]
        .as_ref()
        .and_then(|o| o.entry.map(|e| (o.fileset, e)));
    if flowop.srcfd != 0 && src.is_none() {
        return Outcome::Error(format!("flowop {}: NULL src file", flowop.name));
    }
    if let Some((set, entry)) = src {
        wss = run.lock().filesets[set].files[entry as usize].size;
    }
    let mut wsize = wss.min(iosize);
    let mut bytes = 0u64;
    w.begin();
    let mut seek = 0u64;
    // filebench's loop: the remaining size is computed before `seek` advances.
    while seek < wss {
        match write_at(run, w, fd, wsize, None) {
            Ok(n) if n == wsize => {}
            Ok(n) => {
                w.end(run, index, 0);
                return Outcome::Error(format!("wrote {n} of {wsize} bytes"));
            }
            Err(outcome) => {
                w.end(run, index, 0);
                return outcome;
            }
        }
        let written = wsize;
        wsize = (wss - seek).min(iosize);
        bytes += written;
        seek += wsize;
    }
    w.end(run, index, bytes);
    Outcome::Ok
}

/// `flowoplib_appendfile` / `flowoplib_appendfilerand`.
fn append_file(run: &Run, root: &Path, w: &mut Worker, index: usize) -> Outcome {
    let flowop = w.flowops[index].clone();
    let iosize = w.draw(run, index, Attr::Iosize).max(0) as u64;
    let size = if flowop.kind == Kind::AppendFileRand {
        if iosize == 0 {
            return Outcome::Error(format!("zero iosize for flowop {}", flowop.name));
        }
        let size = random64(&mut w.rng, iosize, 1);
        if size == 0 {
            w.begin();
            w.end(run, index, 0);
            return Outcome::Ok;
        }
        size
    } else {
        iosize
    };
    let fd = match filesetup(run, root, w, index) {
        Ok((fd, _)) => fd,
        Err(outcome) => return outcome,
    };
    if let Err(outcome) = iobuf_check(w, index, size) {
        return outcome;
    }
    w.begin();
    let at = {
        let open = w.fds[fd].as_ref().expect("an open descriptor");
        match open.entry {
            Some(entry) => run.lock().sizes[open.fileset][entry as usize],
            None => open.pos,
        }
    };
    match write_at(run, w, fd, size, Some(at)) {
        Ok(n) if n == size => {
            w.end(run, index, size);
            Outcome::Ok
        }
        Ok(n) => {
            w.end(run, index, n);
            Outcome::Error(format!("failed to write {size} bytes"))
        }
        Err(outcome) => {
            w.end(run, index, 0);
            outcome
        }
    }
}

/// `flowoplib_closefile`.
fn close_file(run: &Run, w: &mut Worker, index: usize) -> Outcome {
    let fd = w.fdnum(index);
    let Some(open) = w.fds[fd].as_ref() else {
        return Outcome::Error(format!("attempted to close an already closed fd {fd}"));
    };
    let Some(entry) = open.entry else {
        return Outcome::Error(format!("fd {fd} has no file (it was deleted)"));
    };
    let fileset = open.fileset;
    if !run.grab(fileset, entry) {
        return Outcome::Ok;
    }
    let open = w.fds[fd].take().expect("checked above");
    w.begin();
    // close(2): dropping the descriptor closes it (std ignores close's result).
    drop(open.file);
    w.end(run, index, 0);
    run.unbusy(fileset, entry, None, -1);
    Outcome::Ok
}

/// `flowoplib_fsync`.
fn fsync_file(run: &Run, w: &mut Worker, index: usize) -> Outcome {
    let fd = w.fdnum(index);
    let Some(open) = w.fds[fd].as_ref() else {
        return Outcome::Error(format!("attempted to fsync a closed fd {fd}"));
    };
    if open.entry.is_none() {
        return Outcome::Error("attempted to fsync a file without an entry".into());
    }
    w.begin();
    let result = w.fds[fd].as_ref().expect("open").file.sync_all();
    w.end(run, index, 0);
    match result {
        Ok(()) => Outcome::Ok,
        Err(e) => io_error("fsync", &e),
    }
}

/// `flowoplib_fsyncset`.
fn fsync_set(run: &Run, w: &mut Worker, index: usize) -> Outcome {
    let flowop = w.flowops[index].clone();
    for fd in 0..MAX_FD {
        let Some(open) = w.fds[fd].as_ref() else {
            continue;
        };
        if open.entry.is_none() || Some(open.fileset) != flowop.fileset {
            continue;
        }
        w.begin();
        let result = w.fds[fd].as_ref().expect("open").file.sync_all();
        w.end(run, index, 0);
        if let Err(e) = result {
            return io_error("fsync", &e);
        }
    }
    Outcome::Ok
}

/// `flowop_composite`: one pass through the inner flowops, each `iters` times.
fn composite(run: &Run, root: &Path, w: &mut Worker, index: usize) -> Outcome {
    let flowop = w.flowops[index].clone();
    // flowop_composite: one pass through the inner flowops, each `iters` times.
    for &inner in &flowop.inner {
        let count = w.draw(run, inner, Attr::Iters).max(0);
        for _ in 0..count {
            match exec(run, root, w, inner) {
                Outcome::Ok => {}
                other => return other,
            }
            if run.stopping(&run.lock()) {
                return Outcome::Ok;
            }
        }
    }
    Outcome::Ok
}

/// `flowoplib_block`: waits for a `wakeup` of this flowop.
fn block(run: &Run, w: &mut Worker, index: usize) -> Outcome {
    let flowop = w.flowops[index].clone();
    w.begin();
    let mut s = run.lock();
    let seen = s.wakeups[flowop.stat];
    while s.wakeups[flowop.stat] == seen && !run.stopping(&s) {
        s = run.wait(s);
    }
    drop(s);
    w.end(run, index, 0);
    Outcome::Ok
}

/// `flowoplib_wakeup`.
fn wakeup(run: &Run, w: &mut Worker, index: usize) -> Outcome {
    let flowop = w.flowops[index].clone();
    let target = flowop.target.clone().unwrap_or_default();
    let (stat, instances) = {
        let s = run.lock();
        let stat = s
            .workload
            .stat_names
            .iter()
            .position(|n| *n == target)
            .expect("wakeup targets are checked at load");
        (stat, s.instances_of[stat])
    };
    for _ in 0..instances {
        w.begin();
        w.end(run, index, 0);
    }
    run.lock().wakeups[stat] += 1;
    run.changed.notify_all();
    Outcome::Ok
}

/// `flowoplib_finishoncount` / `flowoplib_finishonbytes`.
fn finish_on(run: &Run, w: &mut Worker, index: usize) -> Outcome {
    let flowop = w.flowops[index].clone();
    let control = run.lock().control[w.proc_instance];
    let limit = w.locals[index].value.max(0) as u64;
    let reached = match (flowop.kind, flowop.target_local) {
        (Kind::FinishOnCount, Some(target)) => w.locals[target].count >= limit,
        (Kind::FinishOnCount, None) => control.count >= limit,
        (_, Some(target)) => w.locals[target].bytes > limit,
        (_, None) => control.bytes > limit,
    };
    w.begin();
    w.end(run, index, 0);
    if reached {
        Outcome::NoResource
    } else {
        Outcome::Ok
    }
}

/// `flowoplib_createfile`.
fn create_file(run: &Run, root: &Path, w: &mut Worker, index: usize) -> Outcome {
    let flowop = w.flowops[index].clone();
    let fd = w.fdnum(index);
    if w.fds[fd].is_some() {
        return Outcome::Error(format!("attempted to create without closing on fd {fd}"));
    }
    let Some(fileset) = flowop.fileset else {
        return Outcome::Error("flowop NULL file".into());
    };
    let by_index = w.pick_index(run, index, fileset);
    let Some(entry) = run.pick(fileset, PickFrom::Missing, 0, by_index) else {
        return Outcome::NoResource;
    };
    let path = file_path(run, root, fileset, entry);
    let options = open_options(run, fileset, &flowop, true);
    w.begin();
    let result = options.open(&path);
    w.end(run, index, 0);
    match result {
        Ok(file) => {
            run.lock().sizes[fileset][entry as usize] = 0;
            run.unbusy(fileset, entry, Some(true), 1);
            w.fses[fd] = Some((fileset, entry));
            w.fds[fd] = Some(OpenFd {
                file,
                fileset,
                entry: Some(entry),
                pos: 0,
            });
            Outcome::Ok
        }
        Err(e) => {
            run.unbusy(fileset, entry, Some(false), 0);
            io_error(&format!("create {}", path.display()), &e)
        }
    }
}

/// `flowoplib_deletefile`.
fn delete_file(run: &Run, root: &Path, w: &mut Worker, index: usize) -> Outcome {
    let flowop = w.flowops[index].clone();
    let fd = w.fdnum(index);
    // The file of `tf_fse[fd]`, open or closed since.
    let by_fd = if fd > 0 { w.fses[fd].take() } else { None };
    if by_fd.is_some() {
        if let Some(open) = w.fds[fd].as_mut() {
            open.entry = None;
        }
    }
    let (fileset, entry) = match by_fd {
        Some((set, entry)) => {
            if !run.grab(set, entry) {
                return Outcome::Ok;
            }
            (set, entry)
        }
        None => {
            let Some(set) = flowop.fileset else {
                return Outcome::Error("flowop NULL file".into());
            };
            let by_index = w.pick_index(run, index, set);
            match run.pick(set, PickFrom::Existing, 0, by_index) {
                Some(entry) => (set, entry),
                None => return Outcome::NoResource,
            }
        }
    };
    let open_count = run.lock().filesets[fileset].files[entry as usize].open_count;
    let own_fd_open = fd > 0 && w.fds[fd].is_some();
    if (own_fd_open && open_count > 1) || (!own_fd_open && open_count > 0) {
        // Someone else has it open: filebench leaves it.
        run.unbusy(fileset, entry, None, 0);
        return Outcome::Ok;
    }
    let path = file_path(run, root, fileset, entry);
    w.begin();
    let result = std::fs::remove_file(&path);
    w.end(run, index, 0);
    run.lock().sizes[fileset][entry as usize] = 0;
    run.unbusy(fileset, entry, Some(false), -i64::from(open_count));
    match result {
        // filebench ignores unlink's result; a file already gone is the case a run meets.
        Ok(()) => Outcome::Ok,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Outcome::Ok,
        Err(e) => io_error(&format!("unlink {}", path.display()), &e),
    }
}

/// `flowoplib_statfile`.
fn stat_file(run: &Run, root: &Path, w: &mut Worker, index: usize) -> Outcome {
    let flowop = w.flowops[index].clone();
    let fd = w.fdnum(index);
    if fd > 0 {
        if let Some(open) = w.fds[fd].as_ref() {
            let Some(entry) = open.entry else {
                return Outcome::Error(format!("trying to stat a NULL file at fd {fd}"));
            };
            let path = file_path(run, root, open.fileset, entry);
            w.begin();
            let _ = std::fs::metadata(&path);
            w.end(run, index, 0);
            return Outcome::Ok;
        }
    }
    let Some(set) = flowop.fileset else {
        return Outcome::Error("statfile with no fileset specified".into());
    };
    let by_index = w.pick_index(run, index, set);
    let Some(entry) = run.pick(set, PickFrom::Existing, 0, by_index) else {
        return Outcome::NoResource;
    };
    let path = file_path(run, root, set, entry);
    w.begin();
    let _ = std::fs::metadata(&path);
    w.end(run, index, 0);
    run.unbusy(set, entry, None, 0);
    Outcome::Ok
}

/// One thread instance: `flowop_start`'s loop. Returns its samples.
fn thread_main(run: &Run, root: &Path, mut w: Worker) -> Vec<OpSample> {
    let sleep_before = run.lock().workload.sleep_before;
    if sleep_before > 0 && !sleep(run, sleep_before * 1_000_000_000) {
        return finish_thread(run, w);
    }
    // flowop_initflow: `value` is read once per flowop instance.
    for i in 0..w.flowops.len() {
        w.locals[i].value = w.draw(run, i, Attr::Value);
    }
    let top: Vec<usize> = (0..w.flowops.len())
        .filter(|&i| !w.flowops[i].nested)
        .collect();
    let (file, mode) = {
        let s = run.lock();
        (s.workload.file.clone(), s.workload.mode)
    };
    let mut next = 0usize;
    'outer: while !top.is_empty() && !run.stopping(&run.lock()) {
        let at = top[next];
        let count = w.draw(run, at, Attr::Iters).max(0);
        for _ in 0..count {
            match exec(run, root, &mut w, at) {
                Outcome::Ok => {}
                Outcome::NoResource => {
                    match mode {
                        QuitMode::FirstDone => run.set_abort(&mut run.lock(), Abort::Done),
                        QuitMode::AllDone => {}
                        QuitMode::Timeout => run.fail(format!(
                            "WARNING! Run stopped early: flowop {}-{} could not obtain a file. Please reduce runtime, increase fileset entries ($nfiles), or switch modes.",
                            w.flowops[at].name, w.utid
                        )),
                    }
                    break 'outer;
                }
                Outcome::Error(message) => {
                    let flowop = &w.flowops[at];
                    run.fail(format!(
                        "{file}:{}: flowop {} failed: {message}",
                        flowop.line, flowop.name
                    ));
                    break 'outer;
                }
            }
            if run.stopping(&run.lock()) {
                break 'outer;
            }
        }
        next = (next + 1) % top.len();
    }
    finish_thread(run, w)
}

/// The thread exits: its descriptors close; the last one ends the run (FILEBENCH_ABORT_DONE).
fn finish_thread(run: &Run, mut w: Worker) -> Vec<OpSample> {
    for fd in 0..MAX_FD {
        if let Some(open) = w.fds[fd].take() {
            drop(open.file);
            if let Some(entry) = open.entry {
                run.lock().filesets[open.fileset].unbusy(entry, None, -1);
            }
        }
    }
    let mut s = run.lock();
    s.running -= 1;
    if s.running == 0 && s.abort.is_none() {
        run.set_abort(&mut s, Abort::Done);
    }
    drop(s);
    run.changed.notify_all();
    w.samples
}

/// The run time in seconds (0: until the threads are done), interp.rs `master`.
fn runtime(workload: &Workload) -> u64 {
    match workload.run {
        RunKind::Run(seconds) => seconds,
        RunKind::Psrun { runtime, .. } => {
            if workload.mode == QuitMode::Timeout && runtime == 0 {
                60
            } else {
                runtime
            }
        }
    }
}

/// The app's workers, one per thread instance (interp.rs `start`).
fn workers(workload: &Workload, app: &str, seed: u64) -> Vec<Worker> {
    let mut workers = Vec::new();
    let mut proc_index = 0usize;
    let mut utid = 0usize;
    for (pi, process) in workload.processes.iter().enumerate() {
        for p in 0..process.instances {
            for (ti, thread) in process.threads.iter().enumerate() {
                let flowops: Vec<Fo> = thread
                    .flowops
                    .iter()
                    .map(|f| Fo {
                        name: f.name.clone(),
                        kind: f.kind,
                        line: f.line,
                        stat: f.stat,
                        fileset: f.fileset,
                        fd: f.fd,
                        srcfd: f.srcfd,
                        wss: f.wss,
                        random: f.random,
                        dsync: f.dsync,
                        directio: f.directio,
                        rotatefd: f.rotatefd,
                        target: f.target.clone(),
                        target_local: f.target_local,
                        inner: f.inner.clone(),
                        nested: f.nested,
                    })
                    .collect();
                for t in 0..thread.instances {
                    let name = format!("{app}/{}.{p}/{}.{t}", process.name, thread.name);
                    workers.push(Worker {
                        rng: Rng::named(seed, &format!("filebench/{name}")),
                        process: pi,
                        thread: ti,
                        proc_instance: proc_index,
                        utid,
                        memsize: thread.memsize,
                        locals: vec![Local::default(); flowops.len()],
                        flowops: flowops.clone(),
                        fds: (0..MAX_FD).map(|_| None).collect(),
                        fses: vec![None; MAX_FD],
                        fd_rotor: 0,
                        buffer: AlignedBuffer::new(0),
                        stime: 0,
                        samples: Vec::new(),
                    });
                    utid += 1;
                }
            }
            proc_index += 1;
        }
    }
    workers
}

/// Runs app `app`'s script until its run time passed, its threads are done, or `stop` is set
/// (the scenario's end). `seed` is the scenario's first seed.
pub fn run(
    config: &FilebenchConfig,
    app: &str,
    uid: u32,
    seed: u64,
    root: &Path,
    stop: &AtomicBool,
) -> AppRun {
    let mut result = AppRun {
        name: app.to_string(),
        uid,
        ..AppRun::default()
    };
    let loaded = config
        .load()
        .and_then(|w| plan_filesets(&w, app, seed).map(|p| (w, p)));
    let (workload, planned) = match loaded {
        Ok(v) => v,
        Err(message) => {
            result.failure = Some((now_ns(), message));
            return result;
        }
    };
    let workers = workers(&workload, app, seed);
    let mut instances_of = vec![0u64; workload.stat_names.len()];
    let mut proc_instances = 0usize;
    for process in &workload.processes {
        for _ in 0..process.instances {
            proc_instances += 1;
            for thread in &process.threads {
                for flowop in &thread.flowops {
                    instances_of[flowop.stat] += thread.instances;
                }
            }
        }
    }
    let (filesets, sizes): (Vec<_>, Vec<_>) = planned.into_iter().map(|p| (p.set, p.sizes)).unzip();
    let names = workload.stat_names.clone();
    let stats_len = names.len();
    let run = Run {
        state: Mutex::new(Shared {
            filesets,
            sizes,
            stats: Snapshot::new(names.clone(), now_ns()),
            frozen: true,
            control: vec![Control::default(); proc_instances],
            abort: None,
            running: workers.len(),
            instances_of,
            wakeups: vec![0; stats_len],
            failure: None,
            workload,
        }),
        changed: Condvar::new(),
        stop,
    };
    let samples: Vec<OpSample> = std::thread::scope(|scope| {
        let handles: Vec<_> = workers
            .into_iter()
            .map(|w| {
                let run = &run;
                scope.spawn(move || thread_main(run, root, w))
            })
            .collect();
        master(&run, &mut result, names);
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a filebench thread does not panic"))
            .collect()
    });
    result.samples = samples;
    result.samples.sort_by_key(|s| s.start_ns);
    let s = run.lock();
    if let Some(failure) = &s.failure {
        result.failure = Some(failure.clone());
    }
    result
}

/// `parser_run`: waits through the run, takes the final statistics, stops the threads.
fn master(run: &Run, result: &mut AppRun, names: Vec<String>) {
    let (sleep_before, seconds) = {
        let s = run.lock();
        (s.workload.sleep_before, runtime(&s.workload))
    };
    if sleep_before > 0 {
        sleep(run, sleep_before * 1_000_000_000);
    }
    {
        let mut s = run.lock();
        s.stats = Snapshot::new(names, now_ns());
        s.frozen = false;
    }
    let mut slept = 0u64;
    while seconds == 0 || slept < seconds {
        if !sleep(run, 1_000_000_000) {
            break;
        }
        slept += 1;
    }
    let mut s = run.lock();
    s.frozen = true;
    if matches!(s.abort, Some(Abort::Error(_))) {
        result.counters.insert("filebench.failed".into(), 1);
    } else {
        let snap = s.stats.finished(now_ns());
        for (counter, value) in snap.counters() {
            result.counters.insert(counter.into(), value);
        }
    }
    run.set_abort(&mut s, Abort::Shutdown);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(toml: &str) -> FilebenchConfig {
        toml::from_str(toml).expect("a filebench table")
    }

    #[test]
    fn plans_the_simulated_filesets_draw_for_draw() {
        // interp.rs `start` on the same seed: the same tree, the same preallocated files.
        let config = config("file = \"varmail\"\nset = { nfiles = 50, dir = \"/data\" }\n");
        let workload = config.load().unwrap();
        let planned = plan_filesets(&workload, "mail", 1).unwrap();
        assert_eq!(planned.len(), 1);
        let plan = &planned[0];
        assert_eq!(plan.set.files.len(), 50);
        let existing = plan.set.existing_count();
        // 80 % preallocated, drawn per file.
        assert!((30..=50).contains(&existing), "{existing}");
        assert!(plan.set.file_path(0).starts_with("/data/bigfileset/"));
        let again = plan_filesets(&workload, "mail", 1).unwrap();
        assert_eq!(again[0].sizes, plan.sizes);
        let other = plan_filesets(&workload, "mail", 2).unwrap();
        assert_ne!(other[0].sizes, plan.sizes);
    }

    #[test]
    fn refuses_the_event_generator() {
        let dir = std::env::temp_dir().join(format!("mobistack-fb-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = dir.join("rate.f");
        std::fs::write(
            &script,
            "define fileset name=f,path=/data,size=4k,entries=10,dirwidth=10,prealloc\n\
             define process name=p,instances=1\n{\n  thread name=t,memsize=1m,instances=1\n  {\n    flowop eventlimit name=limit\n  }\n}\n\
             eventgen rate=10\nrun 1\n",
        )
        .unwrap();
        let config = config(&format!("file = \"{}\"\n", script.display()));
        let error = check_supported(&config).unwrap_err();
        assert!(error.contains("eventgen"), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn runs_varmail_on_a_plain_directory() {
        // The flowops on real files (no root needed: a directory stands in for the mount).
        let dir = std::env::temp_dir().join(format!("mobistack-fb-run-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // The personality's 1,000 files: with a few dozen, the deletes a thread skips (the file
        // is open elsewhere) drain the missing files until a create finds none, which ends a
        // filebench run in timeout mode ("could not obtain a file"), as it should.
        let config = config(
            "file = \"varmail\"\nruntime = \"1s\"\nset = { nthreads = 4, dir = \"/data\" }\n",
        );
        prepare(&config, "mail", 1, &dir).unwrap();
        let stop = AtomicBool::new(false);
        let run = run(&config, "mail", 10_000, 1, &dir, &stop);
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(run.failure.is_none(), "{:?}", run.failure);
        let ops = run.counters.get("filebench.ops").copied().unwrap_or(0);
        assert!(ops > 0, "{:?}", run.counters);
        for op in ["deletefile1", "createfile2", "fsyncfile2", "readfile3"] {
            assert!(run.samples.iter().any(|s| s.op == op), "no `{op}`");
        }
        // Every sample is a flowop of the script, named as the simulation names it.
        assert!(run.samples.iter().all(|s| s.op.contains("file")));
    }
}
