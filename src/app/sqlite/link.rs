//! The hand-off between SQLite and the simulated task that owns the connection.
//!
//! SQLite is synchronous C: its VFS calls cannot await. Each connection therefore runs on a
//! stackful coroutine of its own ([`SqliteCoroutine`], the `corosensei` crate) on the
//! simulation's thread: the task resumes it with a [`Command`] and then serves the [`Call`]s the
//! VFS yields (each one a simulated system call or lock, awaited in virtual time), resuming it
//! with each [`Reply`], until SQLite yields [`Event::Done`]. While SQLite computes, the task is
//! inside [`resume`], so virtual time stands still; one OS thread runs both, so no hand-off waits
//! for the OS scheduler and the run is deterministic.
//!
//! A coroutine is never dropped while suspended (that would unwind through SQLite's C frames):
//! [`finish`] resumes it with [`Input::Abort`], every VFS call from then on fails with `EIO`
//! without suspending, SQLite returns an error, unwinds its own frames and closes the connection,
//! and the coroutine returns.

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use std::cell::{Cell, RefCell};

/// A simulated errno, as the VFS returns it to SQLite (Linux's numbers).
pub type Errno = i32;

/// The three F2FS atomic-write ioctls SQLite's batch-atomic commit uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicOp {
    Begin,
    Commit,
    Rollback,
}

/// What the VFS asks the task to do: one system call, lock or clock reading.
#[derive(Debug)]
pub enum Call {
    /// `open(path, flags)` with Linux's flag values (`O_STORE_CONTENTS` added by the task).
    Open {
        path: String,
        flags: u32,
    },
    Close {
        fd: i32,
    },
    Pread {
        fd: i32,
        offset: u64,
        len: usize,
    },
    Pwrite {
        fd: i32,
        offset: u64,
        data: Vec<u8>,
    },
    Ftruncate {
        fd: i32,
        size: u64,
    },
    /// `full_fsync` of os_unix.c: fsync, or fdatasync where SQLite was built with it.
    Sync {
        fd: i32,
    },
    /// `fstat(fd)`: the size.
    Fstat {
        fd: i32,
    },
    /// `ioctl(fd, F2FS_IOC_GET_FEATURES)`: whether the file system offers atomic writes
    /// (`F2FS_FEATURE_ATOMIC_WRITE`) to this build of SQLite.
    AtomicWriteSupported {
        fd: i32,
    },
    /// `ioctl(fd, F2FS_IOC_START_ATOMIC_WRITE / COMMIT_ATOMIC_WRITE / ABORT_VOLATILE_WRITE)`.
    AtomicWrite {
        fd: i32,
        op: AtomicOp,
    },
    Unlink {
        path: String,
    },
    /// `stat(path)`: whether it exists and its size.
    Stat {
        path: String,
    },
    /// `osOpenDirectory` + `full_fsync(dirfd)` + `close`: the directory of `path` made durable.
    SyncDirectory {
        path: String,
    },
    /// `xLock` / `xUnlock` / `xCheckReservedLock` on the database file `path`.
    Lock {
        path: String,
        level: i32,
    },
    Unlock {
        path: String,
        level: i32,
    },
    CheckReserved {
        path: String,
    },
    /// `xShmMap`: region `region` of `size` bytes of `path`'s shared memory (`-shm`).
    ShmMap {
        path: String,
        region: usize,
        size: usize,
        extend: bool,
    },
    ShmLock {
        path: String,
        offset: usize,
        n: usize,
        lock: bool,
        exclusive: bool,
    },
    ShmUnmap {
        path: String,
        delete: bool,
    },
    /// `xSleep`: the busy handler's back-off.
    Sleep {
        micros: u64,
    },
    /// `xCurrentTimeInt64`: virtual time.
    Now,
    /// SQLite's progress handler: `steps` more virtual-machine steps computed. The task charges
    /// their CPU time on a core (virtual time advances, other tasks run) and answers
    /// [`Reply::Flag`]: `true` interrupts the statement (`SQLITE_INTERRUPT`).
    Compute {
        steps: u64,
    },
}

/// The task's answer to a [`Call`].
#[derive(Debug)]
pub enum Reply {
    Done,
    Fd(i32),
    Data(Vec<u8>),
    Size(u64),
    /// `stat`: `None` if the path does not exist.
    Stat(Option<u64>),
    Flag(bool),
    /// A shm region's address (0: not mapped and not extended).
    Pointer(usize),
    /// Virtual time in nanoseconds since the run began.
    Time(u64),
    Error(Errno),
}

/// `EIO`: the answer when the task is gone (the run ended under SQLite's feet).
pub const EIO: Errno = 5;

/// Work for SQLite's thread.
#[derive(Debug)]
pub enum Command {
    /// Open the database at `path` and run `setup` (pragmas) on it.
    Open { path: String, setup: String },
    /// Run every statement of `sql`, collecting rows of the last one's results.
    Execute { sql: String },
    /// Close the connection.
    Close,
}

/// What the task resumes SQLite's coroutine with.
#[derive(Debug)]
pub enum Input {
    /// The next command (the first resume, and each one after [`Event::Done`]).
    Command(Command),
    /// The answer to the pending [`Event::Call`].
    Reply(Reply),
    /// The task is gone (the run ended, the app was stopped, the connection is dropped): fail
    /// the pending call and every later one with `EIO`, and end.
    Abort,
}

/// What a command did, for the task's accounting.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Statements run.
    pub statements: u64,
    /// Rows returned by queries.
    pub rows: u64,
    /// Rows changed (`sqlite3_changes` summed over the statements).
    pub changes: u64,
    /// Virtual-machine steps (`SQLITE_STMTSTATUS_VM_STEP` summed), the basis of the CPU cost.
    pub vm_steps: u64,
    /// Pages SQLite read from its page cache misses (`SQLITE_DBSTATUS_CACHE_MISS` delta).
    pub cache_misses: u64,
}

/// A command that failed: SQLite's error, and which of the command's statements failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlError {
    /// SQLite's primary result code (`SQLITE_ERROR` 1, `SQLITE_INTERRUPT` 9, `SQLITE_IOERR` 10,
    /// ...); 0 when the bridge itself failed (SQLite's coroutine is gone).
    pub code: i32,
    /// SQLite's message (`sqlite3_errmsg`), or the bridge's.
    pub message: String,
    /// The failing statement's position among the command's statements (1-based), 0 if
    /// unknown.
    pub statement: u64,
    /// The failing statement's text (from its start to the end of the command's SQL when
    /// SQLite could not prepare it), empty if unknown.
    pub sql: String,
}

impl SqlError {
    /// An error of the bridge, not of SQLite.
    pub fn bridge(message: impl Into<String>) -> SqlError {
        SqlError {
            code: 0,
            message: message.into(),
            statement: 0,
            sql: String::new(),
        }
    }

    /// The statement was interrupted by the task ([`Call::Compute`] answered `true`, or the task
    /// was gone).
    pub fn interrupted(&self) -> bool {
        self.code == rusqlite::ffi::SQLITE_INTERRUPT
    }
}

impl std::fmt::Display for SqlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// What SQLite's coroutine yields to the task.
#[derive(Debug)]
pub enum Event {
    Call(Call),
    /// The command finished: its outcome, or SQLite's error.
    Done(Result<Outcome, SqlError>),
}

/// SQLite's side of one connection: a coroutine that takes commands and replies, yields calls
/// and results, and returns when its task is gone.
pub type SqliteCoroutine = Coroutine<Input, Event, (), DefaultStack>;

/// Bytes of each coroutine's stack (plus corosensei's guard page below it; pages are mapped
/// lazily, so only the depth SQLite reaches costs memory). SQLite recurses at most as deep as its
/// limits allow: the expression walkers to `SQLITE_MAX_EXPR_DEPTH`, 1,000 levels
/// (sqlite.org/limits.html: expression depth is "limited in order to avoid using too much stack
/// space"), while its parser keeps its stack in a fixed array (`YYSTACKDEPTH`). 2 MiB is the stack
/// SQLite had before on an OS thread of its own (Rust's `std::thread` default, "currently 2 MiB
/// on all Tier-1 platforms") and 4 times the deepest use measured (504 KiB), an expression at the
/// 1,000-level limit in a debug build (`the_coroutine_stack_holds_sqlites_deepest_expression`);
/// asm: that margin covers the Rust frames of the VFS callbacks and other compilers' frames.
pub const STACK_BYTES: usize = 2 << 20;

/// What the coroutine's VFS calls reach their task through: the yielder, the seeded randomness
/// and whether the task is gone. Lives on the coroutine's stack for as long as it runs.
struct Context {
    yielder: *const Yielder<Input, Event>,
    /// The deterministic `xRandomness` stream, seeded by the task.
    random: RefCell<crate::sim::rng::Rng>,
    /// The task resumed with [`Input::Abort`], or a VFS callback panicked: calls fail at once.
    aborted: Cell<bool>,
    /// A VFS callback's panic, caught before it could unwind through SQLite ([`guard`]), to
    /// resume in the coroutine's Rust code once SQLite has returned.
    panic: RefCell<Option<Box<dyn std::any::Any + Send>>>,
}

thread_local! {
    /// The context of the coroutine running on this thread now, null outside one: set by the
    /// coroutine when it starts and after each suspension (another connection's coroutine may
    /// have run meanwhile), cleared by [`resume`] when it suspends or returns.
    static CURRENT: Cell<*const Context> = const { Cell::new(std::ptr::null()) };
}

/// Starts SQLite's coroutine for one connection: `body` runs on its own stack with the link to
/// the task installed, given the first input; `random` seeds `xRandomness`.
pub fn start(
    random: crate::sim::rng::Rng,
    body: impl FnOnce(Input) + 'static,
) -> std::io::Result<SqliteCoroutine> {
    let stack = DefaultStack::new(STACK_BYTES)?;
    Ok(Coroutine::with_stack(stack, move |yielder, first| {
        let context = Context {
            yielder,
            random: RefCell::new(random),
            aborted: Cell::new(false),
            panic: RefCell::new(None),
        };
        CURRENT.with(|current| current.set(&context));
        #[cfg(test)]
        let _running = tests::Running::start();
        body(first);
        resume_panic();
    }))
}

/// Resumes `coroutine` with `input` until it yields or returns (SQLite computes meanwhile).
/// Panics of the coroutine's Rust code propagate here, as corosensei forwards them.
pub fn resume(coroutine: &mut SqliteCoroutine, input: Input) -> CoroutineResult<Event, ()> {
    /// Clears [`CURRENT`] however the resume ends, so no VFS call outside a coroutine finds a
    /// stale context.
    struct Clear;
    impl Drop for Clear {
        fn drop(&mut self) {
            CURRENT.with(|current| current.set(std::ptr::null()));
        }
    }
    let _clear = Clear;
    coroutine.resume(input)
}

/// Ends `coroutine` without unwinding through SQLite: resumed with [`Input::Abort`], it fails
/// its pending call, SQLite returns and closes its connection, and the coroutine returns.
pub fn finish(mut coroutine: SqliteCoroutine) {
    if coroutine.started() && !coroutine.done() {
        // After Abort no call suspends again ([`call`], [`done`]), so one resume ends it. A
        // panic of the coroutine's Rust code on the way out is dropped here, as the thread's
        // was when the thread design joined it: this runs in `Drop`, maybe while unwinding.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            resume(&mut coroutine, Input::Abort)
        }));
    }
    if !coroutine.started() {
        // Nothing ran on its stack: dropping it only drops the body.
        return;
    }
    if coroutine.done() {
        #[cfg(test)]
        tests::measure_stack(coroutine.into_stack());
    } else {
        // Unreachable by the protocol above; dropping it would force an unwind through C frames,
        // so its stack is leaked instead.
        std::mem::forget(coroutine);
    }
}

/// The running coroutine's context, if this code runs on one.
fn with_context<T>(f: impl FnOnce(&Context) -> T) -> Option<T> {
    let context = CURRENT.with(Cell::get);
    // SAFETY: CURRENT is non-null only while the coroutine whose stack holds the context runs
    // (set by it, cleared by `resume` as soon as it suspends or returns).
    (!context.is_null()).then(|| f(unsafe { &*context }))
}

/// Suspends the running coroutine with `event` and returns the task's input, re-installing the
/// coroutine's context (another coroutine may have run while this one was suspended).
fn suspend(event: Event) -> Option<Input> {
    let context = CURRENT.with(Cell::get);
    if context.is_null() {
        return None;
    }
    // SAFETY: as in `with_context`; the yielder belongs to the coroutine running this code.
    let input = unsafe { (*(*context).yielder).suspend(event) };
    CURRENT.with(|current| current.set(context));
    if matches!(input, Input::Abort) {
        // SAFETY: the context lives on this coroutine's stack, which is running again.
        unsafe { (*context).aborted.set(true) };
    }
    Some(input)
}

/// Whether the task is gone (or this code runs outside a coroutine).
fn gone() -> bool {
    with_context(|context| context.aborted.get()).unwrap_or(true)
}

/// Yields `call` to the task and returns its reply (the VFS's only way out). Outside a
/// coroutine, or once the task is gone, the answer is `EIO` without suspending.
pub fn call(call: Call) -> Reply {
    if gone() {
        return Reply::Error(EIO);
    }
    match suspend(Event::Call(call)) {
        Some(Input::Reply(reply)) => reply,
        // Abort, or a command while a call is pending (a protocol error of the task).
        Some(Input::Command(_) | Input::Abort) | None => Reply::Error(EIO),
    }
}

/// Runs a VFS callback's `body`, catching its panic so that it never unwinds through SQLite's C
/// frames (the callbacks are `extern "C"`: it would abort the process): the callback answers
/// `failed`, every later call fails at once, and the panic resumes in the coroutine's Rust code
/// when SQLite has returned ([`done`]), reaching the task through `resume` as corosensei forwards
/// it.
pub fn guard<T>(failed: T, body: impl FnOnce() -> T) -> T {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        Ok(value) => value,
        Err(panic) => {
            with_context(|context| {
                context.aborted.set(true);
                context.panic.borrow_mut().get_or_insert(panic);
            });
            failed
        }
    }
}

/// Resumes the panic a VFS callback left ([`guard`]), if any, in the coroutine's Rust frames.
fn resume_panic() {
    if let Some(panic) = with_context(|context| context.panic.borrow_mut().take()).flatten() {
        std::panic::resume_unwind(panic);
    }
}

/// Reports the end of a command and returns the next one; `None` when the task is gone.
pub fn done(result: Result<Outcome, SqlError>) -> Option<Command> {
    resume_panic();
    if gone() {
        return None;
    }
    match suspend(Event::Done(result)) {
        Some(Input::Command(command)) => Some(command),
        // A reply with no call pending is a protocol error of the task: end as if gone.
        Some(Input::Reply(_) | Input::Abort) | None => None,
    }
}

/// Fills `out` from the coroutine's deterministic random stream, for `xRandomness` (zeros
/// outside a coroutine).
pub fn randomness(out: &mut [u8]) {
    let filled = with_context(|context| {
        let mut random = context.random.borrow_mut();
        for chunk in out.chunks_mut(8) {
            let word = random.next_u64();
            chunk.copy_from_slice(&word.to_le_bytes()[..chunk.len()]);
        }
    });
    if filled.is_none() {
        out.fill(0);
    }
}

/// What the tests observe of the coroutines on their thread.
#[cfg(test)]
pub mod tests {
    use std::cell::Cell;

    thread_local! {
        static RUNNING: Cell<usize> = const { Cell::new(0) };
        static DEEPEST: Cell<usize> = const { Cell::new(0) };
    }

    /// Counts a coroutine's body as running until dropped (also when it unwinds).
    pub struct Running;

    impl Running {
        pub fn start() -> Running {
            RUNNING.with(|n| n.set(n.get() + 1));
            Running
        }
    }

    impl Drop for Running {
        fn drop(&mut self) {
            RUNNING.with(|n| n.set(n.get() - 1));
        }
    }

    /// Coroutines of this thread whose body started and has not returned.
    pub fn running() -> usize {
        RUNNING.with(Cell::get)
    }

    /// The most stack any finished coroutine of this thread used, in bytes.
    pub fn deepest_stack() -> usize {
        DEEPEST.with(Cell::get)
    }

    #[test]
    fn a_panic_in_a_vfs_callback_fails_the_call_and_resumes_once_sqlite_has_returned() {
        // `guard` stands for the `extern "C"` frame: the panic stops there, later calls fail
        // without suspending, and the panic reaches the resumer when the command ends.
        let mut coroutine = super::start(crate::sim::rng::Rng::named(1, "t"), |_| {
            let answer = super::guard(-1, || -> i32 { panic!("boom in a callback") });
            assert_eq!(answer, -1);
            assert!(matches!(
                super::call(super::Call::Now),
                super::Reply::Error(super::EIO)
            ));
            super::done(Ok(super::Outcome::default()));
            unreachable!("done resumes the panic");
        })
        .expect("a stack");
        let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            super::resume(&mut coroutine, super::Input::Abort)
        }))
        .expect_err("the callback's panic reaches the resumer");
        assert_eq!(panic.downcast_ref::<&str>(), Some(&"boom in a callback"));
        assert!(coroutine.done());
        assert_eq!(running(), 0);
    }

    /// Records how deep `stack` was used: the fresh mapping is zeros, so the lowest non-zero
    /// byte above the guard page marks the deepest frame.
    pub fn measure_stack(stack: corosensei::stack::DefaultStack) {
        use corosensei::stack::Stack;
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let (low, high) = (stack.limit().get() + page, stack.base().get());
        // SAFETY: [low, high) is the stack's usable mapping (its guard page is below `low`),
        // owned by `stack` and no longer in use by the finished coroutine.
        let bytes = unsafe { std::slice::from_raw_parts(low as *const u8, high - low) };
        let used = bytes
            .iter()
            .position(|&b| b != 0)
            .map_or(0, |i| high - low - i);
        DEEPEST.with(|deepest| deepest.set(deepest.get().max(used)));
    }
}
