//! Runs a [`Workload`]: the create phase, one task per thread instance executing its flowops
//! over the VFS, the event generator, and the master that sleeps through the run time and takes
//! the statistics snapshot.
//!
//! Modelled on filebench 1.5's worker loop and flowops:
//! - `flowop_start`: each thread runs its flowops in order, each `iters` times, forever; a flowop
//!   returning FILEBENCH_ERROR stops the run with an error, FILEBENCH_NORSC ("could not obtain a
//!   file", or a finishon* limit reached) ends the run at once with `set mode quit firstdone`,
//!   ends only that thread with `alldone`, and otherwise stops the run early without valid
//!   results, as filebench does.
//! - The worker loop's own CPU time: every call of a flowop (and every visit of one with
//!   `iters=0`) costs one `[stack.cpu] syscall` on a core before the flowop runs, outside its
//!   latency (`dispatch`), so a flowop that does no I/O still takes time, as filebench's
//!   threads spin on their cores.
//! - `flowop_beginop` / `flowop_endop`: latency is measured around the system calls only, per
//!   flowop name (filebench's FLOW_MASTER roll-up); `endop` without a `beginop` (the limits'
//!   fast path) measures from the thread's previous `beginop`, as filebench does. IO flowops
//!   (FLOW_TYPE_IO) add to the IO summary and to their process's control statistics (which
//!   `finishoncount`, `opslimit`, ... read when they name no target).
//! - flowop_library.c: `flowoplib_read`/`write` (sequential at the descriptor's offset, or
//!   `random` offsets aligned to `iosize` inside the working set), `readwholefile` (reads
//!   `iosize` at a time from offset 0 to the end), `writewholefile` (the source file's nominal
//!   size, `iosize` at a time, with filebench's loop that may write one extra chunk),
//!   `appendfile`, `appendfilerand` (uniform size in `[0, iosize - 1]`; 0 is counted and does
//!   nothing), `createfile`, `openfile`, `closefile`, `deletefile` (skipped while another thread
//!   has the file open), `statfile`, `fsync`, `fsyncset`, `delay`, `hog` (1 ns of CPU per
//!   iteration: one store per cycle at the thesis board's 1 GHz), `block`/`wakeup`, the
//!   eventgen consumers `eventlimit`, `opslimit`, `iopslimit`, `bwlimit`, and `finishoncount`,
//!   `finishonbytes`. A flowop that needs an open descriptor opens one from its fileset first,
//!   and that open is counted as one of its operations (filebench's `flowoplib_filesetup`).
//! - `eventgen_thread`: every ten periods it posts `rate * elapsed` events (truncated), keeps at
//!   most five seconds' worth queued and signals one waiter.
//! - `parser_run` / `parser_pause`: the master sleeps one second at a time until the run time
//!   has passed or the run was stopped, snapshots the statistics (`stats_snap`) and shuts the
//!   threads down; `psrun` snapshots every period too. A run that is the whole simulation
//!   (`mobistack filebench`) stops the engine then, as filebench kills its workers.
//! - A flowop's FILEBENCH_ERROR (and FILEBENCH_NORSC in timeout mode) stops the run without
//!   valid results and the app with [`AppContext::fail`], naming the script line and flowop.
//!
//! Simplified: offsets are tracked per descriptor here and the calls are `pread`/`pwrite` (the
//! VFS has no `lseek`); the end of a file for appends is the size this workload gave it (no
//! other writer touches fileset files); `lseek` costs no system call; the worker loop's CPU
//! time per flowop is one system call's cost (an assumption, see `dispatch`). Thread memory
//! (`memsize`) is only checked against the I/O size, as filebench does; the buffers hold no
//! data.

use super::fileset::{Fileset, IntExpr, Pick, PickFrom};
use super::parser::QuitMode;
use super::script::{Kind, RunKind, Workload};
use super::stats::Snapshot;
use crate::app::AppContext;
use crate::fs::vfs::{Process, Vfs, O_CREAT, O_DIRECT, O_RDONLY, O_RDWR, O_SYNC, O_WRONLY};
use crate::fs::Errno;
use crate::report::recorder::OpTimer;
use crate::sim::sync::WaitQueue;
use crate::sim::{Blocker, Rng, TaskId, WaitReason};
use crate::units::{Nanos, NS_PER_SEC};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// `THREADFLOW_MAXFD`.
const MAX_FD: usize = 128;
/// Bound on one call's buffer: 1 GiB (filebench's `readwholefile` with `iosize=0` reads a whole
/// file at once).
const MAX_BUFFER: u64 = 1 << 30;
/// `hog`: CPU time per iteration (one store per cycle at 1 GHz, the thesis's i.MX 6 board).
const HOG_NS_PER_ITERATION: Nanos = 1;
/// `bwlimit`: one event allows one MiB (`MB` in filebench.h).
const BW_EVENT_BYTES: i64 = 1 << 20;

/// How a flowop ended (FILEBENCH_OK, _NORSC, _ERROR).
enum Outcome {
    Ok,
    NoResource,
    Error(String),
}

/// Why the run is over.
#[derive(Debug, Clone, PartialEq)]
pub enum Abort {
    /// The run time passed, or the app was stopped: a normal end.
    Shutdown,
    /// `firstdone` / `alldone`: the threads finished (FILEBENCH_ABORT_RSRC / _DONE).
    Done,
    /// A flowop failed, or could not obtain a file in timeout mode: no valid results.
    Error(String),
}

/// An open descriptor of a thread (`tf_fd[fd]`, `tf_fse[fd]`).
#[derive(Debug, Clone)]
struct OpenFd {
    vfs_fd: i32,
    fileset: usize,
    /// The file (`tf_fse`); None once `deletefile` took it by this descriptor.
    entry: Option<u32>,
    pos: u64,
}

/// Per-thread state of one flowop instance.
#[derive(Debug, Clone, Default)]
struct Local {
    count: u64,
    bytes: u64,
    /// `fo_constvalue`.
    value: i64,
    tput_last: u64,
    tput_bucket: i64,
}

/// Counters of one process instance (`controlstats`).
#[derive(Debug, Clone, Copy, Default)]
struct Control {
    count: u64,
    bytes: u64,
    rw_count: u64,
    rw_bytes: u64,
}

/// Everything the threads of one filebench app share.
pub struct FbRun {
    ctx: AppContext,
    vfs: Rc<Vfs>,
    pub workload: Rc<Workload>,
    filesets: RefCell<Vec<Fileset>>,
    /// Current size of every file (what an append seeks to), per fileset.
    sizes: RefCell<Vec<Vec<u64>>>,
    idle_wait: Vec<WaitQueue>,
    busy_wait: Vec<WaitQueue>,
    block_wait: Vec<WaitQueue>,
    /// Thread instances that run a flowop of each name (wakeup's targets).
    instances_of: Vec<u64>,
    events: Cell<u64>,
    event_wait: WaitQueue,
    eventgen_enabled: bool,
    stats: RefCell<Snapshot>,
    frozen: Cell<bool>,
    control: RefCell<Vec<Control>>,
    abort: RefCell<Option<Abort>>,
    running: Cell<usize>,
    started_ns: Cell<Nanos>,
    log: RefCell<Vec<String>>,
    /// The final statistics, once the run ended with valid results.
    pub result: RefCell<Option<Snapshot>>,
    /// Periodic snapshots of `psrun`.
    pub periodic: RefCell<Vec<Snapshot>>,
    /// The run is the whole simulation (`mobistack filebench`): the engine stops once the
    /// master has taken the final statistics.
    pub stop_engine_at_end: Cell<bool>,
}

/// Interns flowop names for the results recorder (operation names are `&'static str`); each
/// distinct name is leaked once per process.
fn intern(name: &str) -> &'static str {
    use std::collections::BTreeSet;
    use std::sync::{Mutex, OnceLock};
    static NAMES: OnceLock<Mutex<BTreeSet<&'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(|| Mutex::new(BTreeSet::new()))
        .lock()
        .expect("the name table is never poisoned");
    if let Some(found) = names.get(name) {
        return found;
    }
    let leaked: &'static str = Box::leak(name.to_string().into_boxed_str());
    names.insert(leaked);
    leaked
}

impl FbRun {
    fn now_s(&self) -> f64 {
        (self.ctx.sim.now() - self.started_ns.get()) as f64 / NS_PER_SEC as f64
    }

    /// Appends a line to the log, with filebench's `%4.3f: ` timestamp.
    pub fn say(&self, text: &str) {
        let line = format!("{:.3}: {text}", self.now_s());
        self.log.borrow_mut().push(line);
    }

    /// The log so far.
    pub fn log(&self) -> Vec<String> {
        self.log.borrow().clone()
    }

    fn stopping(&self) -> bool {
        self.abort.borrow().is_some() || self.ctx.is_stopped()
    }

    fn set_abort(&self, abort: Abort) {
        let mut current = self.abort.borrow_mut();
        if current.is_none() {
            *current = Some(abort);
        }
        drop(current);
        self.wake_everyone();
    }

    /// A flowop failed (FILEBENCH_ERROR, or no file in timeout mode): the run stops without
    /// valid results, as `flowop_start` sets `FILEBENCH_ABORT_ERROR`, and the app records why
    /// (the first failure only; the others are its consequences).
    fn fail(&self, message: String) {
        if self.abort.borrow().is_none() {
            self.ctx.fail(message.clone());
        }
        self.set_abort(Abort::Error(message));
    }

    /// The reason the run ended, if it did.
    pub fn abort_reason(&self) -> Option<Abort> {
        self.abort.borrow().clone()
    }

    fn wake_everyone(&self) {
        let sim = &self.ctx.sim;
        for queue in self
            .idle_wait
            .iter()
            .chain(&self.busy_wait)
            .chain(&self.block_wait)
            .chain(std::iter::once(&self.event_wait))
        {
            queue.wake_all(sim);
        }
    }
}

/// The state of one thread instance.
struct Thread {
    process: Process,
    proc_instance: usize,
    /// `tf_utid`: selects the rotor of `opennext` picks.
    utid: usize,
    flowops: Rc<Vec<super::script::Flowop>>,
    memsize: u64,
    fds: Vec<Option<OpenFd>>,
    /// `tf_fse`: the file last opened or created on each descriptor, kept after `closefile`
    /// (which clears only `tf_fd`) until `deletefile` takes it or another open replaces it.
    fses: Vec<Option<(usize, u32)>>,
    fd_rotor: usize,
    locals: Vec<Local>,
    rng: Rng,
    buffer: Vec<u8>,
    /// `tf_stime`: when the last `beginop` was.
    stime: Nanos,
    timer: Option<OpTimer>,
}

impl Thread {
    fn buffer(&mut self, len: u64) -> Result<&mut [u8], String> {
        if len > MAX_BUFFER {
            return Err(format!(
                "an I/O of {len} bytes exceeds the 1 GiB buffer limit"
            ));
        }
        if (self.buffer.len() as u64) < len {
            // Fresh zeroed memory (calloc): untouched pages cost nothing.
            self.buffer = vec![0u8; len as usize];
        }
        Ok(&mut self.buffer[..len as usize])
    }
}

/// Builds the filesets (population and create phase, in no virtual time) and starts the
/// master, the event generator and one task per thread instance. Returns the shared run and
/// the app's tasks.
pub fn start(
    ctx: &AppContext,
    vfs: Rc<Vfs>,
    workload: Rc<Workload>,
) -> Result<(Rc<FbRun>, Vec<TaskId>), String> {
    let sim = ctx.sim.clone();
    let app = ctx.name.to_string();
    let mut log = Vec::new();
    for message in &workload.messages {
        log.push(format!("0.000: {message}"));
    }
    log.push("0.000: Populating and pre-allocating filesets".to_string());
    let mut filesets = Vec::new();
    let mut sizes = Vec::new();
    for spec in &workload.filesets {
        let mut rng = sim.rng(&format!("filebench/{app}/fileset/{}", spec.name));
        // Errors name the script line that defined the fileset.
        let at = |message: String| format!("{}:{}: {message}", workload.file, spec.line);
        let mut set = Fileset::populate(spec.clone(), &mut rng).map_err(at)?;
        let mb = set.bytes as f64 / 1024.0 / 1024.0;
        if spec.is_file {
            log.push(format!("0.000: File {}: {mb:.3}MB", spec.name));
        } else {
            log.push(format!(
                "0.000: {} populated: {} files, avg. dir. width = {}, avg. dir. depth = {:.1}, {} leafdirs, {mb:.3}MB total size",
                spec.name, spec.entries, set.mean_width as i64, set.mean_depth, spec.leafdirs
            ));
        }
        // fileset_create: the directory tree, then the preallocated files and leaf dirs.
        log.push(format!(
            "0.000: Pre-allocating directories in {} tree",
            spec.name
        ));
        for dir in set.dir_paths() {
            vfs.mkdir_all(&sim, &dir).map_err(|e| {
                at(format!(
                    "fileset `{}`: mkdir {dir}: {}",
                    spec.name,
                    e.name()
                ))
            })?;
        }
        log.push(format!("0.000: Pre-allocating files in {} tree", spec.name));
        let mut file_sizes = vec![0u64; set.files.len()];
        for index in 0..set.files.len() as u32 {
            let allocate = rng.next_f64() * 100.0 < spec.prealloc as f64;
            if allocate {
                let size = set.files[index as usize].size;
                let path = set.file_path(index);
                vfs.populate(&sim, &path, size).map_err(|e| {
                    let hint = if e == Errno::ENOSPC {
                        format!(
                            " (the fileset's files total {mb:.3} MB, {} % of them preallocated: lower `size` or `entries` with --set, or give the device a larger `capacity`)",
                            spec.prealloc
                        )
                    } else {
                        String::new()
                    };
                    at(format!(
                        "fileset `{}`: preallocating {path}: {}{hint}",
                        spec.name,
                        e.name()
                    ))
                })?;
                set.set_preexisting(index);
                file_sizes[index as usize] = size;
            }
        }
        for dir in set.leafdir_paths() {
            if rng.next_f64() * 100.0 < spec.prealloc as f64 {
                vfs.mkdir_all(&sim, &dir).map_err(|e| {
                    at(format!(
                        "fileset `{}`: mkdir {dir}: {}",
                        spec.name,
                        e.name()
                    ))
                })?;
            }
        }
        filesets.push(set);
        sizes.push(file_sizes);
    }
    log.push("0.000: Population and pre-allocation of filesets completed".to_string());
    let stat_count = workload.stat_names.len();
    let mut instances_of = vec![0u64; stat_count];
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
    let eventgen_enabled = match &workload.eventgen_rate {
        Some(IntExpr::Const(rate)) => *rate > 0,
        Some(IntExpr::Random(_)) => true,
        None => false,
    };
    let run = Rc::new(FbRun {
        ctx: ctx.clone(),
        vfs: vfs.clone(),
        workload: workload.clone(),
        idle_wait: (0..filesets.len()).map(|_| WaitQueue::new()).collect(),
        busy_wait: (0..filesets.len()).map(|_| WaitQueue::new()).collect(),
        block_wait: (0..stat_count).map(|_| WaitQueue::new()).collect(),
        filesets: RefCell::new(filesets),
        sizes: RefCell::new(sizes),
        instances_of,
        events: Cell::new(0),
        event_wait: WaitQueue::new(),
        eventgen_enabled,
        stats: RefCell::new(Snapshot::new(workload.stat_names.clone(), 0)),
        frozen: Cell::new(true),
        control: RefCell::new(vec![Control::default(); proc_instances]),
        abort: RefCell::new(None),
        running: Cell::new(0),
        started_ns: Cell::new(sim.now()),
        log: RefCell::new(log),
        result: RefCell::new(None),
        periodic: RefCell::new(Vec::new()),
        stop_engine_at_end: Cell::new(false),
    });
    let mut tasks = Vec::new();
    let mut proc_index = 0usize;
    let mut utid = 0usize;
    for process in &workload.processes {
        for p in 0..process.instances {
            for thread in &process.threads {
                let flowops = Rc::new(thread.flowops.clone());
                for t in 0..thread.instances {
                    let name = format!("{app}/{}.{p}/{}.{t}", process.name, thread.name);
                    let vfs_process =
                        vfs.new_process_with_pid(ctx.stack.alloc_pid(), ctx.uid, &thread.name);
                    let state = Thread {
                        process: vfs_process,
                        proc_instance: proc_index,
                        utid,
                        flowops: flowops.clone(),
                        memsize: thread.memsize,
                        fds: vec![None; MAX_FD],
                        fses: vec![None; MAX_FD],
                        fd_rotor: 0,
                        locals: vec![Local::default(); thread.flowops.len()],
                        rng: sim.rng(&format!("filebench/{name}")),
                        buffer: Vec::new(),
                        stime: 0,
                        timer: None,
                    };
                    utid += 1;
                    run.running.set(run.running.get() + 1);
                    let handle = sim.spawn(&name, thread_main(run.clone(), state));
                    tasks.push(handle.task());
                }
            }
            proc_index += 1;
        }
    }
    if let Some(rate) = workload.eventgen_rate.clone() {
        if run.eventgen_enabled {
            sim.spawn_daemon(&format!("{app}/eventgen"), eventgen(run.clone(), rate));
        }
    }
    let master = sim.spawn(&format!("{app}/filebench"), master(run.clone()));
    tasks.push(master.task());
    Ok((run, tasks))
}

/// `eventgen_thread`.
async fn eventgen(run: Rc<FbRun>, rate: IntExpr) {
    let sim = run.ctx.sim.clone();
    let mut rng = sim.rng(&format!("filebench/{}/eventgen", run.ctx.name));
    while !run.stopping() {
        let rate = rate.eval(&mut rng);
        if rate <= 0 {
            return;
        }
        let rate = rate as u64;
        let period = (NS_PER_SEC / rate).saturating_mul(10).max(1000);
        sim.sleep(period).await;
        let count = (u128::from(rate) * u128::from(period) / u128::from(NS_PER_SEC))
            .min(u128::from(u64::MAX / 4)) as u64;
        if run.events.get() < rate.saturating_mul(5) {
            run.events.set(run.events.get().saturating_add(count));
        }
        run.event_wait.wake_one(&sim);
    }
}

/// `parser_run` / `parser_psrun`: waits through the run and takes the snapshots.
async fn master(run: Rc<FbRun>) {
    let sim = run.ctx.sim.clone();
    let workload = run.workload.clone();
    if workload.sleep_before > 0 {
        sim.sleep(workload.sleep_before * NS_PER_SEC).await;
    }
    let instances: u64 = workload.processes.iter().map(|p| p.instances).sum();
    run.say(&format!(
        "Starting {instances} {} instances",
        workload.processes.first().map_or("", |p| p.name.as_str())
    ));
    run.say("Running...");
    *run.stats.borrow_mut() = Snapshot::new(workload.stat_names.clone(), sim.now());
    run.frozen.set(false);
    let timed = workload.mode == QuitMode::Timeout;
    let (runtime, period, reset) = match workload.run {
        RunKind::Run(seconds) => (seconds, None, false),
        RunKind::Psrun { period, runtime } => {
            let runtime = if timed && runtime == 0 { 60 } else { runtime };
            let p = match period {
                0 => 10,
                p => p.unsigned_abs(),
            };
            (runtime, Some(p), period < 0)
        }
    };
    let mut slept = 0u64;
    loop {
        let chunk = match period {
            Some(p) if runtime > 0 => p.min(runtime - slept),
            Some(p) => p,
            None if runtime > 0 => runtime - slept,
            None => u64::MAX,
        };
        slept += pause(&run, chunk).await;
        if run.stopping() || (runtime > 0 && slept >= runtime) {
            break;
        }
        if period.is_some() {
            let snap = run.stats.borrow().finished(sim.now());
            run.say(&format!("Periodic statistics at {slept} s"));
            for line in snap.lines() {
                run.say(&line);
            }
            run.periodic.borrow_mut().push(snap);
            if reset {
                *run.stats.borrow_mut() = Snapshot::new(workload.stat_names.clone(), sim.now());
            }
        }
    }
    run.say(&format!("Run took {slept} seconds..."));
    let valid = !matches!(run.abort_reason(), Some(Abort::Error(_)));
    run.frozen.set(true);
    if valid {
        let snap = run.stats.borrow().finished(sim.now());
        for line in snap.lines() {
            run.say(&line);
        }
        write_counters(&run, &snap);
        *run.result.borrow_mut() = Some(snap);
    } else {
        if let Some(Abort::Error(message)) = run.abort_reason() {
            run.say(&message);
        }
        run.say("NO VALID RESULTS! Filebench run terminated prematurely");
        run.ctx.add_counter("filebench.failed", 1);
    }
    run.say("Shutting down processes");
    run.set_abort(Abort::Shutdown);
    if run.stop_engine_at_end.get() {
        // `filebench -f` kills its worker processes here (procflow_shutdown): a thread still
        // in a long `delay` or `hog` does not keep the command running.
        sim.stop();
    }
}

/// `parser_pause`: one-second sleeps until `seconds` passed or the run stops; returns the
/// seconds slept.
async fn pause(run: &FbRun, seconds: u64) -> u64 {
    let mut slept = 0;
    while slept < seconds {
        run.ctx.sim.sleep(NS_PER_SEC).await;
        slept += 1;
        if run.stopping() {
            break;
        }
    }
    slept
}

fn write_counters(run: &FbRun, snap: &Snapshot) {
    for (counter, value) in snap.counters() {
        run.ctx.add_counter(counter, value);
    }
}

/// One thread instance: `flowop_start`'s loop.
async fn thread_main(run: Rc<FbRun>, mut t: Thread) {
    let sim = run.ctx.sim.clone();
    if run.workload.sleep_before > 0 {
        sim.sleep(run.workload.sleep_before * NS_PER_SEC).await;
    }
    // flowop_initflow: `value` is read once per flowop instance.
    let flowops = t.flowops.clone();
    for (i, flowop) in flowops.iter().enumerate() {
        t.locals[i].value = flowop.value.eval(&mut t.rng);
    }
    // The thread's own flowops; a composite runs its inner ones.
    let top: Vec<usize> = (0..flowops.len()).filter(|&i| !flowops[i].nested).collect();
    let mut next = 0usize;
    'outer: while !run.stopping() {
        let at = top[next];
        let flowop = &flowops[at];
        let count = flowop.iters.eval(&mut t.rng).max(0);
        if count == 0 {
            // The loop visits the flowop and does nothing: still the loop's work.
            dispatch(&run).await;
        }
        for _ in 0..count {
            match exec(&run, &mut t, at).await {
                Outcome::Ok => {}
                Outcome::NoResource => {
                    match run.workload.mode {
                        QuitMode::FirstDone => run.set_abort(Abort::Done),
                        QuitMode::AllDone => {}
                        QuitMode::Timeout => run.fail(format!(
                            "WARNING! Run stopped early: flowop {}-{} could not obtain a file. Please reduce runtime, increase fileset entries ($nfiles), or switch modes.",
                            flowop.name, t.utid
                        )),
                    }
                    break 'outer;
                }
                Outcome::Error(message) => {
                    run.fail(format!(
                        "{}:{}: flowop {} failed: {message}",
                        run.workload.file, flowop.line, flowop.name
                    ));
                    break 'outer;
                }
            }
            if run.stopping() {
                break 'outer;
            }
        }
        next = (next + 1) % top.len();
    }
    // The process exits: its descriptors close (no statistics are kept any more).
    for fd in 0..MAX_FD {
        if let Some(open) = t.fds[fd].take() {
            let _ = run.vfs.close(&sim, &t.process, open.vfs_fd).await;
            if let Some(entry) = open.entry {
                run.filesets.borrow_mut()[open.fileset].unbusy(entry, None, -1);
            }
        }
    }
    run.running.set(run.running.get() - 1);
    if run.running.get() == 0 && run.abort_reason().is_none() {
        run.set_abort(Abort::Done);
    }
}

fn begin(run: &FbRun, t: &mut Thread, flowop: &super::script::Flowop) {
    let _ = flowop;
    t.stime = run.ctx.sim.now();
    if !run.frozen.get() {
        t.timer = Some(run.ctx.begin_op(intern(&flowop.name)));
    }
}

/// `flowop_endop`.
fn end(run: &FbRun, t: &mut Thread, index: usize, bytes: u64) {
    let flowops = t.flowops.clone();
    let flowop = &flowops[index];
    let now = run.ctx.sim.now();
    let latency = now.saturating_sub(t.stime);
    t.locals[index].count += 1;
    t.locals[index].bytes += bytes;
    let kind = flowop.kind;
    {
        let mut control = run.control.borrow_mut();
        let c = &mut control[t.proc_instance];
        if kind.is_io() {
            c.count += 1;
            c.bytes += bytes;
        }
        if kind.is_read() || kind.is_write() {
            c.rw_count += 1;
            c.rw_bytes += bytes;
        }
    }
    let timer = t.timer.take();
    if run.frozen.get() {
        return;
    }
    run.stats.borrow_mut().add(
        flowop.stat,
        kind.is_io(),
        kind.is_read(),
        kind.is_write(),
        latency,
        bytes,
    );
    if let Some(timer) = timer {
        run.ctx.end_op(timer);
    }
}

fn open_flags(run: &FbRun, fileset: usize, flowop: &super::script::Flowop) -> u32 {
    let spec = run.filesets.borrow()[fileset].spec.clone();
    let mut flags = if spec.readonly {
        O_RDONLY
    } else if spec.writeonly {
        O_WRONLY
    } else {
        O_RDWR
    };
    if flowop.dsync {
        flags |= O_SYNC;
    }
    if flowop.directio {
        flags |= O_DIRECT;
    }
    flags
}

/// `flowoplib_fdnum`.
fn fdnum(t: &mut Thread, index: usize) -> usize {
    let flowop = &t.flowops[index];
    if flowop.fd > 0 || !flowop.rotatefd {
        return flowop.fd;
    }
    if t.fd_rotor == 0 {
        t.fd_rotor = MAX_FD;
    }
    t.fd_rotor -= 1;
    t.fd_rotor
}

/// Picks a file, waiting while no file of the fileset is idle.
async fn pick(
    run: &FbRun,
    fileset: usize,
    from: PickFrom,
    tid: usize,
    index: Option<u32>,
) -> Option<u32> {
    loop {
        let outcome = run.filesets.borrow_mut()[fileset].pick(from, tid, index);
        match outcome {
            Pick::Picked(i) => return Some(i),
            Pick::None => return None,
            Pick::Wait => {
                if run.stopping() {
                    return None;
                }
                run.idle_wait[fileset]
                    .wait(&run.ctx.sim, WaitReason::WaitQueue, Blocker::None)
                    .await;
            }
        }
    }
}

/// `fileset_unbusy`, waking the threads waiting for an idle file or for this file.
fn unbusy(run: &FbRun, fileset: usize, entry: u32, exists: Option<bool>, open_delta: i64) {
    run.filesets.borrow_mut()[fileset].unbusy(entry, exists, open_delta);
    run.idle_wait[fileset].wake_one(&run.ctx.sim);
    run.busy_wait[fileset].wake_all(&run.ctx.sim);
}

/// Waits until `entry` is not busy and takes it.
async fn grab(run: &FbRun, fileset: usize, entry: u32) -> bool {
    loop {
        if run.filesets.borrow_mut()[fileset].try_grab(entry) {
            return true;
        }
        if run.stopping() {
            return false;
        }
        run.busy_wait[fileset]
            .wait(&run.ctx.sim, WaitReason::WaitQueue, Blocker::None)
            .await;
    }
}

fn pick_index(t: &mut Thread, index: usize, fileset: &Fileset) -> Option<u32> {
    let flowop = &t.flowops[index];
    flowop.index.as_ref().map(|expr| {
        let value = expr.eval_f64(&mut t.rng).max(0.0) as u64;
        (value % fileset.files.len().max(1) as u64) as u32
    })
}

/// `flowoplib_openfile_common`: opens a file of the flowop's fileset on slot `fd`.
async fn open_common(run: &FbRun, t: &mut Thread, index: usize, fd: usize) -> Outcome {
    let flowops = t.flowops.clone();
    let flowop = &flowops[index];
    let Some(fileset) = flowop.fileset else {
        return Outcome::Error("flowop NULL file".into());
    };
    if t.fds[fd].is_some() {
        return Outcome::Error(format!("attempted to open without closing on fd {fd}"));
    }
    let tid = if flowop.rotatefd { t.utid } else { 0 };
    let by_index = pick_index(t, index, &run.filesets.borrow()[fileset]);
    let Some(entry) = pick(run, fileset, PickFrom::Existing, tid, by_index).await else {
        return Outcome::NoResource;
    };
    let path = run.filesets.borrow()[fileset].file_path(entry);
    let flags = open_flags(run, fileset, flowop);
    begin(run, t, flowop);
    let result = run.vfs.open(&run.ctx.sim, &t.process, &path, flags).await;
    end(run, t, index, 0);
    match result {
        Ok(vfs_fd) => {
            unbusy(run, fileset, entry, None, 1);
            t.fses[fd] = Some((fileset, entry));
            t.fds[fd] = Some(OpenFd {
                vfs_fd,
                fileset,
                entry: Some(entry),
                pos: 0,
            });
            Outcome::Ok
        }
        Err(errno) => {
            unbusy(run, fileset, entry, None, 0);
            Outcome::Error(format!("failed to open {path}: {}", errno.name()))
        }
    }
}

/// `flowoplib_filesetup`: the descriptor to use, opened if needed, and the working set size.
async fn filesetup(run: &FbRun, t: &mut Thread, index: usize) -> Result<(usize, u64), Outcome> {
    let fd = fdnum(t, index);
    let flowops = t.flowops.clone();
    let flowop = &flowops[index];
    if fd > 0 {
        if let (Some(open), Some(named)) = (&t.fds[fd], flowop.fileset) {
            if open.entry.is_some() && open.fileset != named {
                let sets = run.filesets.borrow();
                return Err(Outcome::Error(format!(
                    "name of fd referenced fileset name ({}) CONFLICTS with flowop supplied fileset name ({})",
                    sets[open.fileset].spec.name, sets[named].spec.name
                )));
            }
        }
    }
    if t.fds[fd].is_none() {
        match open_common(run, t, index, fd).await {
            Outcome::Ok => {}
            other => return Err(other),
        }
    }
    let open = t.fds[fd].as_ref().expect("opened above");
    let wss = if flowop.wss > 0 {
        flowop.wss
    } else {
        match open.entry {
            Some(entry) => run.filesets.borrow()[open.fileset].files[entry as usize].size,
            None => 0,
        }
    };
    Ok((fd, wss))
}

/// `flowoplib_iobufsetup`'s checks.
fn iobuf_check(t: &Thread, index: usize, iosize: u64) -> Result<(), Outcome> {
    let flowop = &t.flowops[index];
    match iobuf_error(&flowop.name, flowop.directio, t.memsize, iosize) {
        Some(message) => Err(Outcome::Error(message)),
        None => Ok(()),
    }
}

/// `flowoplib_iobufsetup`'s checks of flowop `name`'s I/O size against its thread's `memsize`
/// (0: unbounded; O_DIRECT needs 512 bytes more for alignment): the error filebench prints, if
/// any. Shared with real mode (`real::filebench`).
pub(crate) fn iobuf_error(name: &str, directio: bool, memsize: u64, iosize: u64) -> Option<String> {
    if iosize == 0 {
        return Some(format!("zero iosize for thread {name}"));
    }
    let needed = if directio { iosize + 512 } else { iosize };
    (memsize != 0 && memsize < needed)
        .then(|| format!("tf_memsize smaller than IO size for thread {name}"))
}

fn errno_outcome(what: &str, errno: Errno) -> Outcome {
    Outcome::Error(format!("{what} failed: {}", errno.name()))
}

/// `read(2)` at the descriptor's offset (or `offset`), advancing it.
async fn read_at(
    run: &FbRun,
    t: &mut Thread,
    fd: usize,
    len: u64,
    offset: Option<u64>,
) -> Result<u64, Outcome> {
    let open = t.fds[fd].clone().expect("an open descriptor");
    let at = offset.unwrap_or(open.pos);
    let sim = run.ctx.sim.clone();
    let vfs = run.vfs.clone();
    t.buffer(len).map_err(Outcome::Error)?;
    // The buffer leaves the thread while the call is in flight (the call awaits).
    let mut buffer = std::mem::take(&mut t.buffer);
    let result = vfs
        .pread(
            &sim,
            &t.process,
            open.vfs_fd,
            &mut buffer[..len as usize],
            at,
        )
        .await;
    t.buffer = buffer;
    let n = result.map_err(|e| errno_outcome("read", e))? as u64;
    if let Some(slot) = t.fds[fd].as_mut() {
        slot.pos = at + n;
    }
    Ok(n)
}

/// `write(2)` at the descriptor's offset (or `offset`), advancing it and the file's size.
async fn write_at(
    run: &FbRun,
    t: &mut Thread,
    fd: usize,
    len: u64,
    offset: Option<u64>,
) -> Result<u64, Outcome> {
    let open = t.fds[fd].clone().expect("an open descriptor");
    let at = offset.unwrap_or(open.pos);
    let sim = run.ctx.sim.clone();
    let vfs = run.vfs.clone();
    t.buffer(len).map_err(Outcome::Error)?;
    let buffer = std::mem::take(&mut t.buffer);
    let result = vfs
        .pwrite(&sim, &t.process, open.vfs_fd, &buffer[..len as usize], at)
        .await;
    t.buffer = buffer;
    let n = result.map_err(|e| errno_outcome("write", e))? as u64;
    if let Some(slot) = t.fds[fd].as_mut() {
        slot.pos = at + n;
    }
    if let Some(entry) = open.entry {
        let mut sizes = run.sizes.borrow_mut();
        let size = &mut sizes[open.fileset][entry as usize];
        *size = (*size).max(at + n);
    }
    Ok(n)
}

/// The end of the descriptor's file (`lseek(fd, 0, SEEK_END)`).
fn end_of_file(run: &FbRun, t: &Thread, fd: usize) -> u64 {
    let open = t.fds[fd].as_ref().expect("an open descriptor");
    match open.entry {
        Some(entry) => run.sizes.borrow()[open.fileset][entry as usize],
        None => open.pos,
    }
}

/// `fb_random64(max, round)`: uniform in `[0, max - round]`, rounded down to `round`.
pub(crate) fn random64(rng: &mut Rng, max: u64, round: u64) -> u64 {
    let span = max.saturating_sub(round);
    let value = (rng.next_f64() * span as f64) as u64;
    match value.checked_div(round) {
        Some(units) => units * round,
        None => value,
    }
}

/// The CPU time of the worker loop's own work for one flowop, outside its system calls:
/// `flowop_start` reads the iteration count and calls the flowop's function, which takes the
/// start time (`flowop_beginop`, `gethrtime`), and `flowop_endop` takes the end time, locks
/// `controlstats_lock` and adds to the statistics. Charged as one `[stack.cpu] syscall` (the
/// CPU model's cost of a system call's entry and exit, `docs/cpu.md`): assumed the same order
/// of magnitude, since `gethrtime` is `clock_gettime`, itself a system call on the 32-bit ARM
/// kernels of the papers' phones (no vDSO for it before Linux 4.1). A flowop that does no I/O
/// (`eventlimit` without an event generator, `fsyncset` with no file open, `delay value=0`)
/// therefore still takes time, as in filebench, where such a thread spins on its core. With
/// `syscall = 0` it yields instead, so that a thread that cannot progress is the engine's
/// zero-time livelock (an error naming the task), never a loop that does not return.
async fn dispatch(run: &FbRun) {
    let mm = &run.vfs.mm;
    match mm.cpu_costs.syscall {
        0 => run.ctx.sim.yield_now().await,
        cost => mm.cpu.run(&run.ctx.sim, cost).await,
    }
}

/// Runs flowop `index` of the thread once, after the worker loop's own work for it.
async fn exec(run: &FbRun, t: &mut Thread, index: usize) -> Outcome {
    dispatch(run).await;
    let flowops = t.flowops.clone();
    let flowop = &flowops[index];
    let sim = run.ctx.sim.clone();
    match flowop.kind {
        Kind::Read | Kind::Write => {
            let iosize = flowop.iosize.eval(&mut t.rng).max(0) as u64;
            let (fd, wss) = match filesetup(run, t, index).await {
                Ok(v) => v,
                Err(outcome) => return outcome,
            };
            if let Err(outcome) = iobuf_check(t, index, iosize) {
                return outcome;
            }
            let offset = if flowop.random {
                if iosize > wss {
                    return Outcome::Error(format!(
                        "file size smaller than IO size for thread {}",
                        flowop.name
                    ));
                }
                Some(random64(&mut t.rng, wss, iosize))
            } else {
                None
            };
            begin(run, t, flowop);
            if flowop.kind == Kind::Read {
                match read_at(run, t, fd, iosize, offset).await {
                    Ok(n) => {
                        end(run, t, index, n);
                        if n == 0 {
                            if let Some(slot) = t.fds[fd].as_mut() {
                                slot.pos = 0;
                            }
                        }
                    }
                    Err(outcome) => {
                        end(run, t, index, 0);
                        return outcome;
                    }
                }
            } else {
                match write_at(run, t, fd, iosize, offset).await {
                    Ok(_) => end(run, t, index, iosize),
                    Err(outcome) => {
                        end(run, t, index, 0);
                        return outcome;
                    }
                }
            }
            Outcome::Ok
        }
        Kind::ReadWholeFile => {
            let (fd, wss) = match filesetup(run, t, index).await {
                Ok(v) => v,
                Err(outcome) => return outcome,
            };
            let mut iosize = flowop.iosize.eval(&mut t.rng).max(0) as u64;
            if iosize == 0 {
                iosize = wss;
            }
            if iosize > 0 {
                if let Err(outcome) = iobuf_check(t, index, iosize) {
                    return outcome;
                }
            }
            begin(run, t, flowop);
            if let Some(slot) = t.fds[fd].as_mut() {
                slot.pos = 0;
            }
            let mut bytes = 0u64;
            if iosize > 0 {
                loop {
                    match read_at(run, t, fd, iosize, None).await {
                        Ok(0) => break,
                        Ok(n) => bytes += n,
                        Err(outcome) => {
                            end(run, t, index, bytes);
                            return outcome;
                        }
                    }
                }
            }
            end(run, t, index, bytes);
            Outcome::Ok
        }
        Kind::WriteWholeFile => {
            let (fd, mut wss) = match filesetup(run, t, index).await {
                Ok(v) => v,
                Err(outcome) => return outcome,
            };
            let mut iosize = flowop.iosize.eval(&mut t.rng).max(0) as u64;
            if iosize == 0 {
                iosize = wss;
            }
            if iosize > 0 {
                if let Err(outcome) = iobuf_check(t, index, iosize) {
                    return outcome;
                }
            }
            let src = t.fds[flowop.srcfd]
                .as_ref()
                .and_then(|o| o.entry.map(|e| (o.fileset, e)));
            if flowop.srcfd != 0 && src.is_none() {
                return Outcome::Error(format!("flowop {}: NULL src file", flowop.name));
            }
            if let Some((set, entry)) = src {
                wss = run.filesets.borrow()[set].files[entry as usize].size;
            }
            let mut wsize = wss.min(iosize);
            let mut bytes = 0u64;
            begin(run, t, flowop);
            let mut seek = 0u64;
            // filebench's loop: the remaining size is computed before `seek` advances.
            while seek < wss {
                match write_at(run, t, fd, wsize, None).await {
                    Ok(n) if n == wsize => {}
                    Ok(n) => {
                        end(run, t, index, 0);
                        return Outcome::Error(format!("wrote {n} of {wsize} bytes"));
                    }
                    Err(outcome) => {
                        end(run, t, index, 0);
                        return outcome;
                    }
                }
                let written = wsize;
                wsize = (wss - seek).min(iosize);
                bytes += written;
                seek += wsize;
            }
            end(run, t, index, bytes);
            Outcome::Ok
        }
        Kind::AppendFile | Kind::AppendFileRand => {
            let iosize = flowop.iosize.eval(&mut t.rng).max(0) as u64;
            let size = if flowop.kind == Kind::AppendFileRand {
                if iosize == 0 {
                    return Outcome::Error(format!("zero iosize for flowop {}", flowop.name));
                }
                let size = random64(&mut t.rng, iosize, 1);
                if size == 0 {
                    begin(run, t, flowop);
                    end(run, t, index, 0);
                    return Outcome::Ok;
                }
                size
            } else {
                iosize
            };
            let fd = match filesetup(run, t, index).await {
                Ok((fd, _)) => fd,
                Err(outcome) => return outcome,
            };
            if let Err(outcome) = iobuf_check(t, index, size) {
                return outcome;
            }
            begin(run, t, flowop);
            let at = end_of_file(run, t, fd);
            match write_at(run, t, fd, size, Some(at)).await {
                Ok(n) if n == size => {
                    end(run, t, index, size);
                    Outcome::Ok
                }
                Ok(n) => {
                    end(run, t, index, n);
                    Outcome::Error(format!("failed to write {size} bytes"))
                }
                Err(outcome) => {
                    end(run, t, index, 0);
                    outcome
                }
            }
        }
        Kind::OpenFile => {
            let fd = fdnum(t, index);
            open_common(run, t, index, fd).await
        }
        Kind::CreateFile => {
            let fd = fdnum(t, index);
            if t.fds[fd].is_some() {
                return Outcome::Error(format!("attempted to create without closing on fd {fd}"));
            }
            let Some(fileset) = flowop.fileset else {
                return Outcome::Error("flowop NULL file".into());
            };
            let by_index = pick_index(t, index, &run.filesets.borrow()[fileset]);
            let Some(entry) = pick(run, fileset, PickFrom::Missing, 0, by_index).await else {
                return Outcome::NoResource;
            };
            let path = run.filesets.borrow()[fileset].file_path(entry);
            let flags = open_flags(run, fileset, flowop) | O_CREAT;
            begin(run, t, flowop);
            let result = run.vfs.open(&sim, &t.process, &path, flags).await;
            end(run, t, index, 0);
            match result {
                Ok(vfs_fd) => {
                    run.sizes.borrow_mut()[fileset][entry as usize] = 0;
                    unbusy(run, fileset, entry, Some(true), 1);
                    t.fses[fd] = Some((fileset, entry));
                    t.fds[fd] = Some(OpenFd {
                        vfs_fd,
                        fileset,
                        entry: Some(entry),
                        pos: 0,
                    });
                    Outcome::Ok
                }
                Err(errno) => {
                    unbusy(run, fileset, entry, Some(false), 0);
                    Outcome::Error(format!("failed to create file {path}: {}", errno.name()))
                }
            }
        }
        Kind::CloseFile => {
            let fd = fdnum(t, index);
            let Some(open) = t.fds[fd].clone() else {
                return Outcome::Error(format!("attempted to close an already closed fd {fd}"));
            };
            let Some(entry) = open.entry else {
                return Outcome::Error(format!("fd {fd} has no file (it was deleted)"));
            };
            if !grab(run, open.fileset, entry).await {
                return Outcome::Ok;
            }
            begin(run, t, flowop);
            let result = run.vfs.close(&sim, &t.process, open.vfs_fd).await;
            end(run, t, index, 0);
            unbusy(run, open.fileset, entry, None, -1);
            t.fds[fd] = None;
            match result {
                Ok(()) => Outcome::Ok,
                Err(errno) => errno_outcome("close", errno),
            }
        }
        Kind::DeleteFile => {
            let fd = fdnum(t, index);
            // flowoplib_deletefile: the file of `tf_fse[fd]`, open or closed since.
            let by_fd = if fd > 0 { t.fses[fd].take() } else { None };
            if by_fd.is_some() {
                if let Some(open) = t.fds[fd].as_mut() {
                    open.entry = None;
                }
            }
            let (fileset, entry) = match by_fd {
                Some((set, entry)) => {
                    if !grab(run, set, entry).await {
                        return Outcome::Ok;
                    }
                    (set, entry)
                }
                None => {
                    let Some(set) = flowop.fileset else {
                        return Outcome::Error("flowop NULL file".into());
                    };
                    let by_index = pick_index(t, index, &run.filesets.borrow()[set]);
                    match pick(run, set, PickFrom::Existing, 0, by_index).await {
                        Some(entry) => (set, entry),
                        None => return Outcome::NoResource,
                    }
                }
            };
            let open_count = run.filesets.borrow()[fileset].files[entry as usize].open_count;
            let own_fd_open = fd > 0 && t.fds[fd].is_some();
            if (own_fd_open && open_count > 1) || (!own_fd_open && open_count > 0) {
                // Someone else has it open: filebench leaves it.
                unbusy(run, fileset, entry, None, 0);
                return Outcome::Ok;
            }
            let path = run.filesets.borrow()[fileset].file_path(entry);
            begin(run, t, flowop);
            let result = run.vfs.unlink(&sim, &t.process, &path).await;
            end(run, t, index, 0);
            run.sizes.borrow_mut()[fileset][entry as usize] = 0;
            unbusy(run, fileset, entry, Some(false), -i64::from(open_count));
            match result {
                // filebench ignores unlink's result; a file already gone (deleted through
                // another thread's descriptor) is the case a run meets.
                Ok(()) | Err(Errno::ENOENT) => Outcome::Ok,
                Err(errno) => errno_outcome(&format!("unlink {path}"), errno),
            }
        }
        Kind::Fsync => {
            let fd = fdnum(t, index);
            let Some(open) = t.fds[fd].clone() else {
                return Outcome::Error(format!("attempted to fsync a closed fd {fd}"));
            };
            if open.entry.is_none() {
                return Outcome::Error("attempted to fsync a file without an entry".into());
            }
            begin(run, t, flowop);
            let result = run.vfs.fsync(&sim, &t.process, open.vfs_fd).await;
            end(run, t, index, 0);
            match result {
                Ok(()) => Outcome::Ok,
                Err(errno) => errno_outcome("fsync", errno),
            }
        }
        Kind::FsyncSet => {
            for fd in 0..MAX_FD {
                let Some(open) = t.fds[fd].clone() else {
                    continue;
                };
                if open.entry.is_none() || Some(open.fileset) != flowop.fileset {
                    continue;
                }
                begin(run, t, flowop);
                let result = run.vfs.fsync(&sim, &t.process, open.vfs_fd).await;
                end(run, t, index, 0);
                if let Err(errno) = result {
                    return errno_outcome("fsync", errno);
                }
            }
            Outcome::Ok
        }
        Kind::StatFile => {
            let fd = fdnum(t, index);
            if fd > 0 {
                if let Some(open) = t.fds[fd].clone() {
                    let Some(entry) = open.entry else {
                        return Outcome::Error(format!("trying to stat a NULL file at fd {fd}"));
                    };
                    let path = run.filesets.borrow()[open.fileset].file_path(entry);
                    begin(run, t, flowop);
                    let _ = run.vfs.stat(&sim, &t.process, &path).await;
                    end(run, t, index, 0);
                    return Outcome::Ok;
                }
            }
            let Some(set) = flowop.fileset else {
                return Outcome::Error("statfile with no fileset specified".into());
            };
            let by_index = pick_index(t, index, &run.filesets.borrow()[set]);
            let Some(entry) = pick(run, set, PickFrom::Existing, 0, by_index).await else {
                return Outcome::NoResource;
            };
            let path = run.filesets.borrow()[set].file_path(entry);
            begin(run, t, flowop);
            let _ = run.vfs.stat(&sim, &t.process, &path).await;
            end(run, t, index, 0);
            unbusy(run, set, entry, None, 0);
            Outcome::Ok
        }
        Kind::Delay => {
            let seconds = flowop.value.eval(&mut t.rng).max(0) as u64;
            begin(run, t, flowop);
            sim.sleep(seconds.saturating_mul(NS_PER_SEC)).await;
            end(run, t, index, 0);
            Outcome::Ok
        }
        Kind::Composite => {
            // flowop_composite: one pass through the inner flowops, each `iters` times; no
            // statistics of its own.
            for &inner in &flowop.inner {
                if run.stopping() {
                    return Outcome::Ok;
                }
                let count = flowops[inner].iters.eval(&mut t.rng).max(0);
                if count == 0 {
                    dispatch(run).await;
                }
                for _ in 0..count {
                    match Box::pin(exec(run, t, inner)).await {
                        Outcome::Ok => {}
                        other => return other,
                    }
                    if run.stopping() {
                        return Outcome::Ok;
                    }
                }
            }
            Outcome::Ok
        }
        Kind::Hog => {
            let iterations = flowop.value.eval(&mut t.rng).max(0) as u64;
            begin(run, t, flowop);
            run.vfs
                .mm
                .cpu
                .run(&sim, iterations * HOG_NS_PER_ITERATION)
                .await;
            end(run, t, index, 0);
            Outcome::Ok
        }
        Kind::Block => {
            begin(run, t, flowop);
            if !run.stopping() {
                run.block_wait[flowop.stat]
                    .wait(&sim, WaitReason::WaitQueue, Blocker::None)
                    .await;
            }
            end(run, t, index, 0);
            Outcome::Ok
        }
        Kind::Wakeup => {
            let target = flowop.target.clone().unwrap_or_default();
            let stat = run
                .workload
                .stat_names
                .iter()
                .position(|n| *n == target)
                .expect("wakeup targets are checked at load");
            for _ in 0..run.instances_of[stat] {
                begin(run, t, flowop);
                end(run, t, index, 0);
            }
            run.block_wait[stat].wake_all(&sim);
            Outcome::Ok
        }
        Kind::EventLimit => {
            if !run.eventgen_enabled {
                return Outcome::Ok;
            }
            begin(run, t, flowop);
            take_events(run, 1).await;
            end(run, t, index, 0);
            Outcome::Ok
        }
        Kind::OpsLimit | Kind::IopsLimit | Kind::BwLimit => {
            if !run.eventgen_enabled {
                return Outcome::Ok;
            }
            let control = run.control.borrow()[t.proc_instance];
            let measure = match (flowop.kind, flowop.target_local) {
                (Kind::BwLimit, Some(target)) => t.locals[target].bytes,
                (_, Some(target)) => t.locals[target].count,
                (Kind::OpsLimit, None) => control.count,
                (Kind::IopsLimit, None) => control.rw_count,
                (_, None) => control.rw_bytes,
            };
            let local = &mut t.locals[index];
            if local.tput_last == 0 {
                local.tput_last = measure;
                return Outcome::Ok;
            }
            let delta = measure - local.tput_last;
            local.tput_bucket -= delta as i64;
            local.tput_last = measure;
            if local.tput_bucket >= 0 {
                end(run, t, index, 0);
                return Outcome::Ok;
            }
            let owed = -t.locals[index].tput_bucket;
            let (events, credit) = if flowop.kind == Kind::BwLimit {
                let events = owed / BW_EVENT_BYTES + 1;
                (events as u64, events * BW_EVENT_BYTES)
            } else {
                (owed as u64, owed)
            };
            begin(run, t, flowop);
            if take_events(run, events).await {
                t.locals[index].tput_bucket += credit;
            }
            end(run, t, index, 0);
            Outcome::Ok
        }
        Kind::FinishOnCount | Kind::FinishOnBytes => {
            let control = run.control.borrow()[t.proc_instance];
            let limit = t.locals[index].value.max(0) as u64;
            let reached = match (flowop.kind, flowop.target_local) {
                (Kind::FinishOnCount, Some(target)) => t.locals[target].count >= limit,
                (Kind::FinishOnCount, None) => control.count >= limit,
                (_, Some(target)) => t.locals[target].bytes > limit,
                (_, None) => control.bytes > limit,
            };
            begin(run, t, flowop);
            end(run, t, index, 0);
            if reached {
                Outcome::NoResource
            } else {
                Outcome::Ok
            }
        }
    }
}

/// Takes `events` from the event queue, waiting for the generator; false if the run stopped.
async fn take_events(run: &FbRun, events: u64) -> bool {
    loop {
        if run.events.get() >= events {
            run.events.set(run.events.get() - events);
            return true;
        }
        if run.stopping() {
            return false;
        }
        run.event_wait
            .wait(&run.ctx.sim, WaitReason::Sleep, Blocker::None)
            .await;
    }
}
