//! The task's side of a connection: it starts SQLite's coroutine, resumes it with commands and
//! serves the VFS's calls as simulated system calls of the app's process, blocking in virtual
//! time.

use super::link::EIO;
use super::link::{self, Call, Command, Event, Input, Outcome, Reply, SqlError, SqliteCoroutine};
use super::locks::{ConnId, LockResult, LockTable};
use super::options::{ResolvedOptions, SyncCall};
use crate::fs::vfs::{Process, Vfs, O_CREAT, O_RDONLY, O_RDWR, O_STORE_CONTENTS};
use crate::fs::Errno;
use crate::mm::bio::AccountSnapshot;
use crate::sim::Sim;
use crate::units::{Nanos, NS_PER_US};
use corosensei::CoroutineResult;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

/// SQLite's CPU time, charged on a core as SQLite computes: every
/// [`super::coroutine::PROGRESS_STEPS`] virtual-machine steps its progress handler asks the task to
/// charge them ([`Call::Compute`]), so virtual time advances during a long statement; the rest
/// (the steps since the last slice, and the per-statement cost) when the command returns.
///
/// Costs are assumptions (`asm:`) in the style of `[stack.cpu]`: measured on the calibration
/// machine of `docs/cpu.md` by `cargo run --release --example calibrate_sqlite` (the bundled
/// SQLite in memory: 19.9 ns per VM step from a table scan, 3.1 us per prepared statement from
/// Mobibench's INSERT, on an AMD EPYC core) and taken three times slower for a 2014 phone core,
/// as the CPU model does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SqliteCpu {
    /// Per virtual-machine step (`SQLITE_STMTSTATUS_VM_STEP`).
    pub vm_step: Nanos,
    /// Per statement: parse, prepare and finalize.
    pub statement: Nanos,
}

impl Default for SqliteCpu {
    fn default() -> Self {
        SqliteCpu {
            vm_step: 60,
            statement: 9_300,
        }
    }
}

impl SqliteCpu {
    /// The CPU time of a finished command, less `charged_steps` VM steps already charged in
    /// slices while it ran (the slices may count steps of nested statements, such as a schema
    /// read, that the command's own count leaves out).
    pub fn cost(&self, outcome: &Outcome, charged_steps: u64) -> Nanos {
        outcome.vm_steps.saturating_sub(charged_steps) * self.vm_step
            + outcome.statements * self.statement
    }
}

/// `-shm` shared memory of one database: the regions every connection maps.
#[derive(Default)]
struct ShmNode {
    regions: Vec<Box<[u8]>>,
    users: BTreeSet<ConnId>,
    /// Bytes the `-shm` file has (`st_size`).
    file_size: u64,
}

/// What the connections of a run share: SQLite's locks and its shared memory.
#[derive(Default)]
pub struct SqliteShared {
    locks: RefCell<LockTable>,
    shm: RefCell<BTreeMap<String, ShmNode>>,
    next_conn: Cell<ConnId>,
}

/// The name of the shared state in [`crate::stack::Stack::userspace`].
pub const SHARED_NAME: &str = "sqlite";

/// Counts of what SQLite asked of the kernel, by call.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CallCounts {
    pub by_call: BTreeMap<&'static str, u64>,
}

/// What a file is to SQLite, from its name (the suffixes SQLite appends to the database's).
pub fn file_label(path: &str) -> &'static str {
    if path.ends_with("-journal") {
        "journal"
    } else if path.ends_with("-wal") {
        "wal"
    } else if path.ends_with("-shm") {
        "shm"
    } else {
        "database"
    }
}

/// One open database connection of a simulated process.
pub struct Database {
    sim: Sim,
    vfs: Rc<Vfs>,
    process: Rc<Process>,
    shared: Rc<SqliteShared>,
    id: ConnId,
    options: ResolvedOptions,
    cpu: SqliteCpu,
    /// SQLite's side, `None` once closed.
    coroutine: RefCell<Option<SqliteCoroutine>>,
    shm_fd: Cell<Option<i32>>,
    calls: RefCell<CallCounts>,
    /// Asked at each slice of SQLite's computation: `true` interrupts the running statement.
    interrupt: RefCell<Option<Box<dyn Fn() -> bool>>>,
}

impl Database {
    /// Opens `path` for `process` with `options` (the pragmas run as part of the open). `seed`
    /// seeds SQLite's randomness for this connection.
    #[allow(clippy::too_many_arguments)]
    pub async fn open(
        sim: &Sim,
        vfs: Rc<Vfs>,
        process: Rc<Process>,
        shared: Rc<SqliteShared>,
        path: &str,
        options: ResolvedOptions,
        cpu: SqliteCpu,
        seed: u64,
    ) -> Result<Database, SqlError> {
        let id = shared.next_conn.get() + 1;
        shared.next_conn.set(id);
        let coroutine = super::coroutine::start(seed ^ id.rotate_left(32)).map_err(|e| {
            SqlError::bridge(format!("cannot allocate SQLite's coroutine stack: {e}"))
        })?;
        let db = Database {
            sim: sim.clone(),
            vfs,
            process,
            shared,
            id,
            cpu,
            coroutine: RefCell::new(Some(coroutine)),
            shm_fd: Cell::new(None),
            calls: RefCell::new(CallCounts::default()),
            interrupt: RefCell::new(None),
            options: options.clone(),
        };
        db.run(Command::Open {
            path: path.to_string(),
            setup: options.setup_sql(),
        })
        .await?;
        Ok(db)
    }

    /// Runs the statements of `sql`.
    pub async fn execute(&self, sql: &str) -> Result<Outcome, SqlError> {
        self.run(Command::Execute {
            sql: sql.to_string(),
        })
        .await
    }

    /// Closes the connection (SQLite's `sqlite3_close`: its last unlocks and closes).
    pub async fn close(self) -> Result<(), SqlError> {
        // Dropping `self` then ends the coroutine, which waits for a next command.
        self.run(Command::Close).await.map(|_| ())
    }

    /// Interrupts a running statement (`SQLITE_INTERRUPT`) at its next slice of computation
    /// once `stopped` says so (the app was stopped).
    pub fn interrupt_when(&self, stopped: impl Fn() -> bool + 'static) {
        *self.interrupt.borrow_mut() = Some(Box::new(stopped));
    }

    fn interrupted(&self) -> bool {
        self.interrupt
            .borrow()
            .as_ref()
            .is_some_and(|stopped| stopped())
    }

    /// The calls SQLite made so far, by name.
    pub fn calls(&self) -> CallCounts {
        self.calls.borrow().clone()
    }

    /// Resumes SQLite with `input` until its next call or the command's end. SQLite computes
    /// meanwhile, on this thread: virtual time stands still.
    fn resume(&self, input: Input) -> Result<Event, SqlError> {
        let mut slot = self.coroutine.borrow_mut();
        let Some(coroutine) = slot.as_mut().filter(|coroutine| !coroutine.done()) else {
            return Err(SqlError::bridge("the connection is closed"));
        };
        match link::resume(coroutine, input) {
            CoroutineResult::Yield(event) => Ok(event),
            CoroutineResult::Return(()) => Err(SqlError::bridge("SQLite's coroutine ended")),
        }
    }

    async fn run(&self, command: Command) -> Result<Outcome, SqlError> {
        let mut input = Input::Command(command);
        // VM steps charged in slices while the command runs.
        let mut charged_steps = 0;
        loop {
            match self.resume(input)? {
                Event::Call(call) => {
                    if let Call::Compute { steps } = call {
                        charged_steps += steps;
                    }
                    self.sim.step("sqlite").await;
                    input = Input::Reply(self.serve(call).await);
                }
                Event::Done(result) => {
                    if let Ok(outcome) = &result {
                        let cost = self.cpu.cost(outcome, charged_steps);
                        if cost > 0 {
                            self.vfs.mm.cpu.run(&self.sim, cost).await;
                        }
                    }
                    return result;
                }
            }
        }
    }

    /// Labels `path`'s data in the block I/O account by what it is to SQLite.
    fn label(&self, path: &str) {
        let (Some(account), Some(ino)) = (self.vfs.mm.bdev.io_account(), self.vfs.ino_of(path))
        else {
            return;
        };
        account.label_file(ino, file_label(path));
    }

    /// This connection's app's block I/O so far (the account by purpose and by SQLite file).
    pub fn account(&self) -> Option<AccountSnapshot> {
        self.vfs
            .mm
            .bdev
            .io_account()
            .map(|account| account.snapshot(self.process.uid))
    }

    fn count(&self, name: &'static str) {
        *self.calls.borrow_mut().by_call.entry(name).or_default() += 1;
    }

    async fn sync(&self, fd: i32) -> Result<(), Errno> {
        match self.options.sync_call {
            SyncCall::Fsync => {
                self.count("fsync");
                self.vfs.fsync(&self.sim, &self.process, fd).await
            }
            SyncCall::Fdatasync => {
                self.count("fdatasync");
                self.vfs.fdatasync(&self.sim, &self.process, fd).await
            }
        }
    }

    /// A lock operation: `fcntl(F_SETLK)` costs a system call.
    async fn fcntl(&self) {
        self.count("fcntl");
        let cost = self.vfs.mm.cpu_costs.syscall;
        self.vfs.mm.cpu.run(&self.sim, cost).await;
    }

    async fn serve(&self, call: Call) -> Reply {
        let (sim, vfs, process) = (&self.sim, &self.vfs, &*self.process);
        let error = |errno: Errno| Reply::Error(errno.code());
        match call {
            Call::Open { path, flags } => {
                self.count("open");
                match vfs
                    .open(sim, process, &path, flags | O_STORE_CONTENTS)
                    .await
                {
                    Ok(fd) => {
                        self.label(&path);
                        Reply::Fd(fd)
                    }
                    Err(errno) => error(errno),
                }
            }
            Call::Close { fd } => {
                self.count("close");
                match vfs.close(sim, process, fd).await {
                    Ok(()) => Reply::Done,
                    Err(errno) => error(errno),
                }
            }
            Call::Pread { fd, offset, len } => {
                self.count("pread");
                let mut buf = vec![0u8; len];
                match vfs.pread(sim, process, fd, &mut buf, offset).await {
                    Ok(n) => {
                        buf.truncate(n);
                        Reply::Data(buf)
                    }
                    Err(errno) => error(errno),
                }
            }
            Call::Pwrite { fd, offset, data } => {
                self.count("pwrite");
                match vfs.pwrite(sim, process, fd, &data, offset).await {
                    Ok(n) => Reply::Size(n as u64),
                    Err(errno) => error(errno),
                }
            }
            Call::Ftruncate { fd, size } => {
                self.count("ftruncate");
                match vfs.ftruncate(sim, process, fd, size).await {
                    Ok(()) => Reply::Done,
                    Err(errno) => error(errno),
                }
            }
            Call::Sync { fd } => match self.sync(fd).await {
                Ok(()) => Reply::Done,
                Err(errno) => error(errno),
            },
            Call::Fstat { fd } => {
                self.count("fstat");
                match vfs.fstat(sim, process, fd).await {
                    Ok(stat) => Reply::Size(stat.size),
                    Err(errno) => error(errno),
                }
            }
            Call::AtomicWriteSupported { fd: _ } => {
                self.count("ioctl");
                Reply::Flag(self.options.batch_atomic_write && vfs.supports_atomic_write())
            }
            Call::AtomicWrite { fd, op } => {
                self.count("ioctl");
                let cmd = match op {
                    super::link::AtomicOp::Begin => crate::fs::FsIoctl::StartAtomicWrite,
                    super::link::AtomicOp::Commit => crate::fs::FsIoctl::CommitAtomicWrite,
                    super::link::AtomicOp::Rollback => crate::fs::FsIoctl::AbortAtomicWrite,
                };
                match vfs.ioctl(sim, process, fd, cmd).await {
                    Ok(()) => Reply::Done,
                    Err(errno) => error(errno),
                }
            }
            Call::Unlink { path } => {
                self.count("unlink");
                match vfs.unlink(sim, process, &path).await {
                    Ok(()) => Reply::Done,
                    Err(errno) => error(errno),
                }
            }
            Call::Stat { path } => {
                self.count("stat");
                match vfs.stat(sim, process, &path).await {
                    Ok(stat) => Reply::Stat(Some(match stat.kind {
                        crate::fs::vfs::FileKind::Directory => 1,
                        crate::fs::vfs::FileKind::Regular => stat.size,
                    })),
                    Err(Errno::ENOENT) => Reply::Stat(None),
                    Err(errno) => error(errno),
                }
            }
            Call::SyncDirectory { path } => {
                let dir = match path.rfind('/') {
                    Some(0) | None => "/".to_string(),
                    Some(i) => path[..i].to_string(),
                };
                self.count("open");
                match vfs.open(sim, process, &dir, O_RDONLY).await {
                    Ok(fd) => {
                        let synced = self.sync(fd).await;
                        self.count("close");
                        let _ = vfs.close(sim, process, fd).await;
                        match synced {
                            Ok(()) => Reply::Done,
                            Err(errno) => error(errno),
                        }
                    }
                    Err(errno) => error(errno),
                }
            }
            Call::Lock { path, level } => {
                self.fcntl().await;
                let result = self.shared.locks.borrow_mut().lock(&path, self.id, level);
                Reply::Flag(result == LockResult::Ok)
            }
            Call::Unlock { path, level } => {
                self.fcntl().await;
                self.shared.locks.borrow_mut().unlock(&path, self.id, level);
                Reply::Done
            }
            Call::CheckReserved { path } => {
                self.fcntl().await;
                Reply::Flag(self.shared.locks.borrow().reserved(&path))
            }
            Call::ShmMap {
                path,
                region,
                size,
                extend,
            } => self.shm_map(&path, region, size, extend).await,
            Call::ShmLock {
                path,
                offset,
                n,
                lock,
                exclusive,
            } => {
                self.fcntl().await;
                let result = self
                    .shared
                    .locks
                    .borrow_mut()
                    .shm_lock(&path, self.id, offset, n, lock, exclusive);
                Reply::Flag(result == LockResult::Ok)
            }
            Call::ShmUnmap { path, delete } => self.shm_unmap(&path, delete).await,
            Call::Sleep { micros } => {
                sim.sleep(micros * NS_PER_US).await;
                Reply::Done
            }
            Call::Now => Reply::Time(sim.now()),
            Call::Compute { steps } => {
                self.vfs.mm.cpu.run(sim, steps * self.cpu.vm_step).await;
                Reply::Flag(self.interrupted())
            }
        }
    }

    /// `unixShmMap`: opens `-shm` on first use (the first connection truncates it to 3 bytes,
    /// `unixLockSharedMemory`), extends it by writing the last byte of each new 4 KiB page,
    /// and maps the region (memory of the run, shared by the connections).
    async fn shm_map(&self, path: &str, region: usize, size: usize, extend: bool) -> Reply {
        let (sim, vfs, process) = (&self.sim, &self.vfs, &*self.process);
        let shm_path = format!("{path}-shm");
        if self.shm_fd.get().is_none() {
            self.count("open");
            let fd = match vfs
                .open(sim, process, &shm_path, O_RDWR | O_CREAT | O_STORE_CONTENTS)
                .await
            {
                Ok(fd) => fd,
                Err(errno) => return Reply::Error(errno.code()),
            };
            self.shm_fd.set(Some(fd));
            self.label(&shm_path);
            let first = {
                let mut shm = self.shared.shm.borrow_mut();
                let node = shm.entry(path.to_string()).or_default();
                let first = node.users.is_empty();
                node.users.insert(self.id);
                first
            };
            if first {
                self.fcntl().await;
                self.count("ftruncate");
                let _ = vfs.ftruncate(sim, process, fd, 3).await;
                if let Some(node) = self.shared.shm.borrow_mut().get_mut(path) {
                    node.file_size = 3;
                }
            }
        }
        let Some(fd) = self.shm_fd.get() else {
            return Reply::Error(EIO);
        };
        let (mapped, file_size) = {
            let shm = self.shared.shm.borrow();
            let node = &shm[path];
            (node.regions.len(), node.file_size)
        };
        if region < mapped {
            let shm = self.shared.shm.borrow();
            return Reply::Pointer(shm[path].regions[region].as_ptr() as usize);
        }
        let needed = ((region + 1) * size) as u64;
        if file_size < needed {
            if !extend {
                return Reply::Pointer(0);
            }
            const PAGE: u64 = 4096;
            for page in file_size / PAGE..needed / PAGE {
                self.count("pwrite");
                if let Err(errno) = vfs
                    .pwrite(sim, process, fd, &[0u8], page * PAGE + PAGE - 1)
                    .await
                {
                    return Reply::Error(errno.code());
                }
            }
        }
        let mut shm = self.shared.shm.borrow_mut();
        let node = shm.get_mut(path).expect("node opened above");
        node.file_size = node.file_size.max(needed);
        while node.regions.len() <= region {
            node.regions.push(vec![0u8; size].into_boxed_slice());
        }
        Reply::Pointer(node.regions[region].as_ptr() as usize)
    }

    /// `unixShmUnmap`: the connection's locks and descriptor go; the last one out deletes
    /// `-shm` when SQLite asks.
    async fn shm_unmap(&self, path: &str, delete: bool) -> Reply {
        self.shared.locks.borrow_mut().shm_release(path, self.id);
        let last = {
            let mut shm = self.shared.shm.borrow_mut();
            match shm.get_mut(path) {
                Some(node) => {
                    node.users.remove(&self.id);
                    node.users.is_empty()
                }
                None => false,
            }
        };
        if let Some(fd) = self.shm_fd.take() {
            self.count("close");
            let _ = self.vfs.close(&self.sim, &self.process, fd).await;
        }
        if last {
            self.shared.shm.borrow_mut().remove(path);
            if delete {
                self.count("unlink");
                let _ = self
                    .vfs
                    .unlink(&self.sim, &self.process, &format!("{path}-shm"))
                    .await;
            }
        }
        Reply::Done
    }
}

impl Drop for Database {
    /// Ends SQLite's coroutine, mid-statement if the task was dropped during one (the run ended,
    /// the app was killed): resumed with an abort, SQLite fails the pending call, returns and
    /// closes its connection on its own stack ([`link::finish`]).
    fn drop(&mut self) {
        if let Some(coroutine) = self.coroutine.get_mut().take() {
            link::finish(coroutine);
        }
    }
}
