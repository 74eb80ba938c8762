//! The hand-off between SQLite's thread and the simulated task that owns the connection.
//!
//! SQLite is synchronous C: its VFS calls cannot await. Each connection therefore runs on an OS
//! thread of its own, in lockstep with its task: the task sends a [`Command`] and then serves
//! the [`Call`]s the VFS makes (each one a simulated system call or lock, awaited in virtual
//! time) until SQLite answers [`Event::Done`]. While SQLite computes, the simulation thread is
//! blocked on the channel, so virtual time stands still and only one of the two threads ever
//! runs: the run stays single-threaded in effect and deterministic. The messages are plain data
//! (`Send`); nothing of the simulation crosses to SQLite's thread.

use std::cell::RefCell;
use std::sync::mpsc::{Receiver, Sender};

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

/// Polls of the channel before a receiver parks its thread. The two threads hand off in
/// lockstep, each answer usually a few microseconds away; parking and waking a thread (a futex
/// round trip) costs tens of microseconds. So a receiver first polls, yielding its core between
/// polls (when runs share the cores, the thread it waits for may need that very core), and
/// parks only after that. Only speed depends on it: the messages and their order are the same
/// either way.
const POLLS: u32 = 2_000;

/// Receives from `rx`, polling (and yielding) briefly before blocking.
pub fn receive<T>(rx: &Receiver<T>) -> Result<T, std::sync::mpsc::RecvError> {
    for _ in 0..POLLS {
        match rx.try_recv() {
            Ok(value) => return Ok(value),
            Err(std::sync::mpsc::TryRecvError::Empty) => std::thread::yield_now(),
            Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                return Err(std::sync::mpsc::RecvError)
            }
        }
    }
    rx.recv()
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

/// Messages to SQLite's thread.
#[derive(Debug)]
pub enum Input {
    Command(Command),
    Reply(Reply),
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
    /// ...); 0 when the bridge itself failed (SQLite's thread is gone).
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

/// Messages from SQLite's thread.
#[derive(Debug)]
pub enum Event {
    Call(Call),
    /// The command finished: its outcome, or SQLite's error.
    Done(Result<Outcome, SqlError>),
}

/// The link of the current (SQLite) thread to its task.
pub struct Link {
    pub events: Sender<Event>,
    pub inputs: Receiver<Input>,
    /// The deterministic `xRandomness` stream, seeded by the task.
    pub random: crate::sim::rng::Rng,
}

thread_local! {
    static LINK: RefCell<Option<Link>> = const { RefCell::new(None) };
}

/// Installs the link of this thread (SQLite's thread, once, before opening the database).
pub fn install(link: Link) {
    LINK.with(|slot| *slot.borrow_mut() = Some(link));
}

/// Sends `call` to the task and waits for its reply (the VFS's only way out). A thread without
/// a link, or whose task is gone, gets `EIO`.
pub fn call(call: Call) -> Reply {
    LINK.with(|slot| {
        let slot = slot.borrow();
        let Some(link) = slot.as_ref() else {
            return Reply::Error(EIO);
        };
        if link.events.send(Event::Call(call)).is_err() {
            return Reply::Error(EIO);
        }
        match receive(&link.inputs) {
            Ok(Input::Reply(reply)) => reply,
            // A command while a call is pending is a protocol error of the task: fail the call.
            Ok(Input::Command(_)) | Err(_) => Reply::Error(EIO),
        }
    })
}

/// The next command for this thread; `None` when the task is gone.
pub fn next_command() -> Option<Command> {
    LINK.with(|slot| {
        let slot = slot.borrow();
        let link = slot.as_ref()?;
        loop {
            match receive(&link.inputs) {
                Ok(Input::Command(command)) => return Some(command),
                // A stray reply (the task answered a call SQLite gave up on): skip it.
                Ok(Input::Reply(_)) => continue,
                Err(_) => return None,
            }
        }
    })
}

/// Reports the end of a command.
pub fn done(result: Result<Outcome, SqlError>) {
    LINK.with(|slot| {
        if let Some(link) = slot.borrow().as_ref() {
            // The task may be gone; then nobody waits for the answer.
            let _ = link.events.send(Event::Done(result));
        }
    });
}

/// Fills `out` from the thread's deterministic random stream, for `xRandomness`.
pub fn randomness(out: &mut [u8]) {
    LINK.with(|slot| {
        let mut slot = slot.borrow_mut();
        for chunk in out.chunks_mut(8) {
            let word = slot.as_mut().map_or(0, |link| link.random.next_u64());
            chunk.copy_from_slice(&word.to_le_bytes()[..chunk.len()]);
        }
    });
}
