//! The VFS: system calls of simulated tasks over the page cache and a [`FileSystemOps`].
//!
//! A [`Process`] owns a file-descriptor table; every call is an `async fn` that blocks in
//! virtual time inside the layers below and returns `Result<_, Errno>`: a workload mistake is an
//! errno, never a panic.
//!
//! The VFS keeps the name space (dentries) and the in-memory inode (`i_size`, `i_nlink`,
//! `i_mutex`); the mounted file system ([`FileSystemOps`]: ext4 or simplefs) owns its on-disk
//! metadata and its sync, and the page cache calls the file system's write hooks.
//!
//! Locking follows Linux 3.10: `write` holds the inode's `i_mutex` (wait reason `inode_lock`)
//! around `file_update_time` and `generic_perform_write` and then, for `O_SYNC`, syncs after
//! releasing it (`generic_write_sync`); `fsync` writes and waits for the data without the lock
//! (`filemap_write_and_wait_range`), then calls the file system's fsync (which takes the lock
//! as `ext4_sync_file` / `generic_file_fsync` do); truncate holds it while dropping pages and
//! calling `setattr`.
//!
//! Simplifications: paths are absolute, with no `.`/`..`, symlinks, permissions or `rmdir`; a
//! directory's entries live here, and a change to a directory only marks its inode dirty
//! (written at the next fsync of that directory); `stat` costs no I/O; file contents are kept
//! only for files created with [`O_STORE_CONTENTS`] (for other files `read` leaves the buffer
//! as it was); `O_DIRECT` transfers whole pages covering the request.

use super::mobifs::{MobiFs, MobiFsConfig};
use super::{Errno, FileSystemOps, Ino};
use crate::mm::filemap::FileRaState;
use crate::mm::writeback::DirtyThrottleState;
use crate::mm::{Issuer, Mm};
use crate::sim::sync::Mutex;
use crate::sim::{Sim, WaitReason};
use crate::task::ForegroundState;
use crate::units::{Nanos, PAGE_SIZE};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

/// The file whose pages stand for other apps' cached file data (`[stack.vm] cached`).
pub const CACHED_APPS_PATH: &str = "/.cached-apps";
/// Android's `AID_SYSTEM` (system/core/include/private/android_filesystem_config.h).
const AID_SYSTEM: u32 = 1000;

/// `open` flags, with Linux's values (include/uapi/asm-generic/fcntl.h).
pub const O_RDONLY: u32 = 0;
pub const O_WRONLY: u32 = 0o1;
pub const O_RDWR: u32 = 0o2;
const O_ACCMODE: u32 = 0o3;
pub const O_CREAT: u32 = 0o100;
pub const O_EXCL: u32 = 0o200;
pub const O_TRUNC: u32 = 0o1000;
pub const O_APPEND: u32 = 0o2000;
pub const O_DIRECT: u32 = 0o40000;
pub const O_SYNC: u32 = 0o4010000;
/// mobistack's own flag (no Linux meaning): a file created with it keeps its real bytes, for
/// workloads that read back what they wrote (e.g. SQLite databases).
pub const O_STORE_CONTENTS: u32 = 1 << 30;

/// `RLIMIT_NOFILE` default soft limit (1024).
pub const MAX_FDS: i32 = 1024;
/// Longest path accepted (`PATH_MAX`).
pub const PATH_MAX: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Regular,
    Directory,
}

/// What `stat` returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub ino: Ino,
    pub kind: FileKind,
    pub size: u64,
    pub nlink: u32,
    pub mtime_ns: Nanos,
    /// Pages of the file in the page cache (not a `stat` field; handy for tests and reports).
    pub cached_pages: u64,
}

struct Inode {
    kind: FileKind,
    size: u64,
    nlink: u32,
    open: u32,
    mtime_ns: Nanos,
    /// `i_mutex`.
    lock: Mutex,
    /// `I_DIRTY_SYNC`: metadata changed since it was last written.
    meta_dirty: bool,
    /// `I_DIRTY_DATASYNC`: the size changed (fdatasync must write the inode).
    size_dirty: bool,
    contents: Option<BTreeMap<u64, Box<[u8]>>>,
}

struct OpenFile {
    ino: Ino,
    flags: u32,
    pos: u64,
    ra: FileRaState,
}

/// A process: identity and file-descriptor table.
pub struct Process {
    pub pid: u32,
    pub uid: u32,
    pub comm: String,
    files: RefCell<BTreeMap<i32, OpenFile>>,
    throttle: Cell<DirtyThrottleState>,
}

/// Counters of the VFS.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VfsStats {
    pub syscalls: u64,
    pub errors: u64,
    pub bytes_written: u64,
    pub bytes_read: u64,
    pub fsyncs: u64,
}

struct VfsState {
    names: BTreeMap<String, Ino>,
    inodes: BTreeMap<Ino, Inode>,
    stats: VfsStats,
}

/// A system call entered ([`Vfs::enter`]): the task and the cause it replaced.
struct Entered {
    task: Option<crate::sim::TaskId>,
    previous: Option<crate::mm::IoCause>,
}

/// The VFS of one run.
pub struct Vfs {
    pub mm: Rc<Mm>,
    fs: Rc<dyn FileSystemOps>,
    activity: Option<Rc<ForegroundState>>,
    state: RefCell<VfsState>,
    next_pid: Cell<u32>,
    /// MobiFS (seed 004), when mounted over the file system ([`Vfs::mount_mobifs`]).
    mobifs: RefCell<Option<Rc<MobiFs>>>,
}

fn parent_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

/// The last component of `path`.
fn leaf(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn check_path(path: &str) -> Result<(), Errno> {
    if !path.starts_with('/') || path.len() > PATH_MAX || (path.len() > 1 && path.ends_with('/')) {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

impl Vfs {
    /// A VFS with an empty root directory over `fs` and `mm` (which must share the same `fs`).
    pub fn new(
        sim: &Sim,
        mm: Rc<Mm>,
        fs: Rc<dyn FileSystemOps>,
        activity: Option<Rc<ForegroundState>>,
    ) -> Rc<Vfs> {
        let root = fs.root();
        let mut inodes = BTreeMap::new();
        inodes.insert(root, Self::new_inode(sim, root, FileKind::Directory, false));
        let mut names = BTreeMap::new();
        names.insert("/".to_string(), root);
        Rc::new(Vfs {
            mm,
            fs,
            activity,
            state: RefCell::new(VfsState {
                names,
                inodes,
                stats: VfsStats::default(),
            }),
            next_pid: Cell::new(1000),
            mobifs: RefCell::new(None),
        })
    }

    /// Mounts MobiFS (seed 004) over the file system: covered apps' writes go to its write
    /// logs, their fsyncs return at once, and its checkpointer commits VCTs to the file
    /// system's journal; `touches` are the user's operations (its idle policy's input).
    pub fn mount_mobifs(
        self: &Rc<Self>,
        sim: &Sim,
        config: MobiFsConfig,
        touches: Vec<crate::units::Nanos>,
    ) -> Result<(), String> {
        let store = self.fs.atomic_store().ok_or_else(|| {
            format!(
                "MobiFS needs ext4's journal for its checkpointer; the file system is {}",
                self.fs.name()
            )
        })?;
        let mobifs = MobiFs::start(sim, config, self.mm.clone(), store, touches)?;
        let vfs = Rc::downgrade(self);
        mobifs.set_page_alive(Box::new(move |ino, index| {
            vfs.upgrade().is_some_and(|vfs| {
                vfs.state
                    .borrow()
                    .inodes
                    .get(&ino)
                    .is_some_and(|inode| index * PAGE_SIZE < inode.size)
            })
        }));
        *self.mobifs.borrow_mut() = Some(mobifs);
        Ok(())
    }

    /// MobiFS, if mounted.
    pub fn mobifs(&self) -> Option<Rc<MobiFs>> {
        self.mobifs.borrow().clone()
    }

    /// MobiFS if it covers `process`.
    fn mobifs_for(&self, process: &Process) -> Option<Rc<MobiFs>> {
        self.mobifs
            .borrow()
            .as_ref()
            .filter(|m| m.covers(&process.comm))
            .cloned()
    }

    fn new_inode(sim: &Sim, ino: Ino, kind: FileKind, contents: bool) -> Inode {
        Inode {
            kind,
            size: 0,
            nlink: 1,
            open: 0,
            mtime_ns: sim.now(),
            lock: Mutex::new(sim, &format!("i_mutex:{ino}"), WaitReason::InodeLock),
            meta_dirty: true,
            size_dirty: false,
            contents: contents.then(BTreeMap::new),
        }
    }

    pub fn stats(&self) -> VfsStats {
        self.state.borrow().stats
    }

    /// The mounted file system's name (`ext4`, `simplefs`).
    pub fn fs_name(&self) -> &str {
        self.fs.name()
    }

    /// The file system's counters (`ext4.*`, `jbd2.*`).
    pub fn fs_counters(&self) -> Vec<(String, u64)> {
        let mut counters = self.fs.counters();
        if let Some(mobifs) = self.mobifs() {
            counters.extend(mobifs.counters());
        }
        counters
    }

    /// The inode `path` names, if it exists.
    pub fn ino_of(&self, path: &str) -> Option<Ino> {
        self.state.borrow().names.get(path).copied()
    }

    /// Turns the run-time invariant checks of the page cache and the file system on (release
    /// builds: `mobistack run --check`; debug builds have them on).
    pub fn enable_checks(&self) {
        self.mm.enable_checks();
        self.fs.enable_checks();
    }

    /// Records, from now on, the files created with [`O_STORE_CONTENTS`] for crash-point
    /// checking ([`crate::mm::crashlog`]): their versions, the writes that carry them and the
    /// journal's transactions.
    pub fn record_crash(&self, log: Rc<crate::mm::crashlog::CrashLog>) -> Result<(), String> {
        self.fs.record_crash(log.clone())?;
        self.mm.set_crash_log(log);
        Ok(())
    }

    /// Runs the checks due at the end of a run, then returns the first violation the page
    /// cache's or the file system's checks found, if any.
    pub fn end_of_run_violation(&self, sim: &Sim) -> Option<String> {
        if self.mm.violation().is_none() && self.fs.violation().is_none() {
            self.fs.check_end_of_run(sim);
        }
        self.mm
            .violation()
            .or_else(|| self.fs.violation())
            .or_else(|| self.mobifs().and_then(|m| m.violation()))
    }

    /// A new process with an empty fd table and a pid of the VFS's own (for tests without a
    /// [`crate::stack::Stack`]; in a stack use [`Vfs::new_process_with_pid`] with
    /// `Stack::alloc_pid`, so pids stay unique across workloads).
    pub fn new_process(&self, uid: u32, comm: &str) -> Process {
        let pid = self.next_pid.get();
        self.next_pid.set(pid + 1);
        self.new_process_with_pid(pid, uid, comm)
    }

    /// A new process `pid` with an empty fd table.
    pub fn new_process_with_pid(&self, pid: u32, uid: u32, comm: &str) -> Process {
        self.mm.bdev.register_task(pid, uid, comm);
        Process {
            pid,
            uid,
            comm: comm.to_string(),
            files: RefCell::new(BTreeMap::new()),
            throttle: Cell::new(DirtyThrottleState::default()),
        }
    }

    fn issuer(&self, sim: &Sim, process: &Process) -> Issuer {
        Issuer {
            task: sim.current_task(),
            pid: process.pid,
            uid: process.uid,
            foreground: self
                .activity
                .as_ref()
                .is_some_and(|a| a.is_foreground(process.uid)),
        }
    }

    /// System call entry: the task's current system call is `syscall` for the account by
    /// purpose (every bio it causes until [`Vfs::count`] is charged to it), then the fixed CPU
    /// cost of every call (`[stack.cpu] syscall`).
    async fn enter(&self, sim: &Sim, process: &Process, syscall: &'static str) -> Entered {
        let task = sim.current_task();
        let previous = match (self.mm.bdev.io_account(), task) {
            (Some(account), Some(task)) => account.enter_syscall(task, process.uid, syscall),
            _ => None,
        };
        self.mm.cpu.run(sim, self.mm.cpu_costs.syscall).await;
        Entered { task, previous }
    }

    /// System call exit: counts the call and its error, and ends the task's current system call.
    fn count<T>(&self, entered: Entered, result: Result<T, Errno>) -> Result<T, Errno> {
        if let (Some(account), Some(task)) = (self.mm.bdev.io_account(), entered.task) {
            account.leave_syscall(task, entered.previous);
        }
        let mut state = self.state.borrow_mut();
        state.stats.syscalls += 1;
        if result.is_err() {
            state.stats.errors += 1;
        }
        result
    }

    fn lookup(&self, path: &str) -> Result<Ino, Errno> {
        check_path(path)?;
        self.state
            .borrow()
            .names
            .get(path)
            .copied()
            .ok_or(Errno::ENOENT)
    }

    fn lookup_parent_dir(&self, path: &str) -> Result<Ino, Errno> {
        let parent = self.lookup(parent_of(path))?;
        match self.state.borrow().inodes[&parent].kind {
            FileKind::Directory => Ok(parent),
            FileKind::Regular => Err(Errno::ENOTDIR),
        }
    }

    fn fd_ino(&self, process: &Process, fd: i32) -> Result<(Ino, u32), Errno> {
        process
            .files
            .borrow()
            .get(&fd)
            .map(|f| (f.ino, f.flags))
            .ok_or(Errno::EBADF)
    }

    /// `vfs_create` / `vfs_mkdir` from a system call: the file system's create (ext4
    /// journals it), then the dentry.
    async fn create(
        &self,
        sim: &Sim,
        issuer: crate::mm::Issuer,
        path: &str,
        kind: FileKind,
        contents: bool,
    ) -> Result<Ino, Errno> {
        let parent = self.lookup_parent_dir(path)?;
        let is_dir = kind == FileKind::Directory;
        let ino = self
            .fs
            .create(sim, issuer, parent, leaf(path), is_dir)
            .await?;
        // Another task may have created it while this one waited in the journal.
        if self.lookup(path).is_ok() {
            return Err(Errno::EEXIST);
        }
        self.add_dentry(sim, path, parent, ino, kind, contents);
        Ok(ino)
    }

    /// The same at setup: no time passes, nothing is journaled.
    fn create_at_setup(&self, sim: &Sim, path: &str, kind: FileKind) -> Result<Ino, Errno> {
        let parent = self.lookup_parent_dir(path)?;
        let ino = self
            .fs
            .create_at_setup(parent, leaf(path), kind == FileKind::Directory)?;
        self.add_dentry(sim, path, parent, ino, kind, false);
        Ok(ino)
    }

    fn add_dentry(
        &self,
        sim: &Sim,
        path: &str,
        parent: Ino,
        ino: Ino,
        kind: FileKind,
        contents: bool,
    ) {
        let mut state = self.state.borrow_mut();
        state
            .inodes
            .insert(ino, Self::new_inode(sim, ino, kind, contents));
        state.names.insert(path.to_string(), ino);
        let dir = state.inodes.get_mut(&parent).expect("parent inode");
        dir.meta_dirty = true;
        dir.mtime_ns = sim.now();
    }

    /// `open(2)`.
    pub async fn open(
        &self,
        sim: &Sim,
        process: &Process,
        path: &str,
        flags: u32,
    ) -> Result<i32, Errno> {
        self.open_as(sim, process, path, flags, "open").await
    }

    /// `open(2)` entered as `syscall`.
    async fn open_as(
        &self,
        sim: &Sim,
        process: &Process,
        path: &str,
        flags: u32,
        syscall: &'static str,
    ) -> Result<i32, Errno> {
        let entered = self.enter(sim, process, syscall).await;
        let result = self.do_open(sim, process, path, flags).await;
        self.count(entered, result)
    }

    /// `creat(2)` = `open(path, O_CREAT | O_WRONLY | O_TRUNC)`.
    pub async fn creat(&self, sim: &Sim, process: &Process, path: &str) -> Result<i32, Errno> {
        self.open_as(sim, process, path, O_CREAT | O_WRONLY | O_TRUNC, "creat")
            .await
    }

    async fn do_open(
        &self,
        sim: &Sim,
        process: &Process,
        path: &str,
        flags: u32,
    ) -> Result<i32, Errno> {
        check_path(path)?;
        if flags & O_ACCMODE == O_ACCMODE {
            return Err(Errno::EINVAL);
        }
        let writable = flags & O_ACCMODE != O_RDONLY;
        let (ino, created) = match self.lookup(path) {
            Ok(ino) => {
                if flags & O_CREAT != 0 && flags & O_EXCL != 0 {
                    return Err(Errno::EEXIST);
                }
                (ino, false)
            }
            Err(Errno::ENOENT) if flags & O_CREAT != 0 => {
                let issuer = self.issuer(sim, process);
                let contents = flags & O_STORE_CONTENTS != 0;
                let ino = self
                    .create(sim, issuer, path, FileKind::Regular, contents)
                    .await?;
                if let (true, Some(log)) = (contents, self.mm.crash_log()) {
                    let file = crate::mm::crashlog::TrackedFile {
                        path: path.to_string(),
                        app: process.comm.clone(),
                        dir: self.lookup_parent_dir(path)?,
                        name: leaf(path).to_string(),
                        mobifs: self.mobifs_for(process).is_some(),
                    };
                    log.track(sim.now(), ino, file);
                }
                (ino, true)
            }
            Err(errno) => return Err(errno),
        };
        if self.state.borrow().inodes[&ino].kind == FileKind::Directory && writable {
            return Err(Errno::EISDIR);
        }
        let fd = {
            let files = process.files.borrow();
            (0..MAX_FDS)
                .find(|fd| !files.contains_key(fd))
                .ok_or(Errno::EMFILE)?
        };
        process.files.borrow_mut().insert(
            fd,
            OpenFile {
                ino,
                flags,
                pos: 0,
                ra: FileRaState::default(),
            },
        );
        self.state
            .borrow_mut()
            .inodes
            .get_mut(&ino)
            .expect("inode")
            .open += 1;
        if writable {
            self.fs.open_for_write(ino);
        }
        // do_last (fs/namei.c, 3.10): a file this open created is not truncated
        // (`if (*opened & FILE_CREATED) { open_flag &= ~O_TRUNC; will_truncate = false; }`).
        if flags & O_TRUNC != 0 && writable && !created {
            let issuer = self.issuer(sim, process);
            self.do_truncate(sim, issuer, ino, 0).await;
        }
        Ok(fd)
    }

    /// `close(2)`.
    pub async fn close(&self, sim: &Sim, process: &Process, fd: i32) -> Result<(), Errno> {
        let entered = self.enter(sim, process, "close").await;
        let result = match process.files.borrow_mut().remove(&fd) {
            None => Err(Errno::EBADF),
            Some(file) => Ok((file.ino, file.flags & O_ACCMODE != O_RDONLY)),
        };
        let issuer = self.issuer(sim, process);
        let result = match result {
            Ok((ino, writable)) => {
                if writable && self.fs.release_writer(ino) {
                    // ext4_release_file: auto_da_alloc after a truncate to zero.
                    self.mm.filemap_flush(sim, ino, issuer).await;
                }
                let evict = {
                    let mut state = self.state.borrow_mut();
                    let inode = state.inodes.get_mut(&ino).expect("open inode");
                    inode.open -= 1;
                    inode.open == 0 && inode.nlink == 0
                };
                if evict {
                    self.evict(sim, issuer, ino).await;
                }
                Ok(())
            }
            Err(errno) => Err(errno),
        };
        self.count(entered, result)
    }

    /// `evict`: drops the pages and frees the inode and its blocks.
    async fn evict(&self, sim: &Sim, issuer: crate::mm::Issuer, ino: Ino) {
        if let Some(mobifs) = self.mobifs() {
            mobifs.forget(ino, 0, true);
        }
        self.mm.truncate_pages(sim, ino, 0, u64::MAX).await;
        self.state.borrow_mut().inodes.remove(&ino);
        self.fs.evict(sim, issuer, ino).await;
    }

    /// `read(2)` at the file position.
    pub async fn read(
        &self,
        sim: &Sim,
        process: &Process,
        fd: i32,
        buf: &mut [u8],
    ) -> Result<usize, Errno> {
        let entered = self.enter(sim, process, "read").await;
        let pos = match process.files.borrow().get(&fd) {
            None => return self.count(entered, Err(Errno::EBADF)),
            Some(file) => file.pos,
        };
        let result = self.do_read(sim, process, fd, buf, pos).await;
        if let Ok(n) = result {
            if let Some(file) = process.files.borrow_mut().get_mut(&fd) {
                file.pos = pos + n as u64;
            }
        }
        self.count(entered, result)
    }

    /// `pread(2)`.
    pub async fn pread(
        &self,
        sim: &Sim,
        process: &Process,
        fd: i32,
        buf: &mut [u8],
        offset: u64,
    ) -> Result<usize, Errno> {
        let entered = self.enter(sim, process, "pread").await;
        let result = self.do_read(sim, process, fd, buf, offset).await;
        self.count(entered, result)
    }

    async fn do_read(
        &self,
        sim: &Sim,
        process: &Process,
        fd: i32,
        buf: &mut [u8],
        offset: u64,
    ) -> Result<usize, Errno> {
        let (ino, flags) = self.fd_ino(process, fd)?;
        if flags & O_ACCMODE == O_WRONLY {
            return Err(Errno::EBADF);
        }
        let (kind, size) = {
            let state = self.state.borrow();
            let inode = &state.inodes[&ino];
            (inode.kind, inode.size)
        };
        if kind == FileKind::Directory {
            return Err(Errno::EISDIR);
        }
        if offset >= size || buf.is_empty() {
            return Ok(0);
        }
        let len = (buf.len() as u64).min(size - offset);
        let issuer = self.issuer(sim, process);
        if flags & O_DIRECT != 0 {
            let first = offset / PAGE_SIZE;
            let last = (offset + len - 1) / PAGE_SIZE;
            self.mm
                .direct_io(sim, ino, first, last - first + 1, false, issuer)
                .await?;
        } else {
            let mut ra = process
                .files
                .borrow()
                .get(&fd)
                .map(|f| f.ra)
                .unwrap_or_default();
            self.mm
                .file_read(sim, ino, offset, len, size, &mut ra, issuer)
                .await;
            if let Some(file) = process.files.borrow_mut().get_mut(&fd) {
                file.ra = ra;
            }
        }
        self.copy_out(ino, offset, &mut buf[..len as usize]);
        self.state.borrow_mut().stats.bytes_read += len;
        Ok(len as usize)
    }

    fn copy_out(&self, ino: Ino, offset: u64, buf: &mut [u8]) {
        let state = self.state.borrow();
        let Some(contents) = state.inodes.get(&ino).and_then(|i| i.contents.as_ref()) else {
            return;
        };
        let mut done = 0usize;
        while done < buf.len() {
            let at = offset + done as u64;
            let (index, within) = (at / PAGE_SIZE, (at % PAGE_SIZE) as usize);
            let n = (PAGE_SIZE as usize - within).min(buf.len() - done);
            match contents.get(&index) {
                Some(page) => buf[done..done + n].copy_from_slice(&page[within..within + n]),
                None => buf[done..done + n].fill(0),
            }
            done += n;
        }
    }

    fn copy_in(&self, ino: Ino, offset: u64, data: &[u8]) {
        let mut state = self.state.borrow_mut();
        let Some(contents) = state.inodes.get_mut(&ino).and_then(|i| i.contents.as_mut()) else {
            return;
        };
        let mut done = 0usize;
        while done < data.len() {
            let at = offset + done as u64;
            let (index, within) = (at / PAGE_SIZE, (at % PAGE_SIZE) as usize);
            let n = (PAGE_SIZE as usize - within).min(data.len() - done);
            let page = contents
                .entry(index)
                .or_insert_with(|| vec![0u8; PAGE_SIZE as usize].into_boxed_slice());
            page[within..within + n].copy_from_slice(&data[done..done + n]);
            done += n;
        }
        // Crash-point checking keeps each version's bytes.
        if let Some(log) = self.mm.crash_log().filter(|log| log.is_tracked(ino)) {
            let first = offset / PAGE_SIZE;
            let last = (offset + data.len() as u64 - 1) / PAGE_SIZE;
            for index in first..=last {
                if let Some(page) = contents.get(&index) {
                    log.attach_bytes(ino, index, page);
                }
            }
        }
    }

    /// `write(2)` at the file position (at the end with `O_APPEND`).
    pub async fn write(
        &self,
        sim: &Sim,
        process: &Process,
        fd: i32,
        data: &[u8],
    ) -> Result<usize, Errno> {
        let entered = self.enter(sim, process, "write").await;
        let result = self.do_write(sim, process, fd, data, None).await;
        self.count(entered, result)
    }

    /// `pwrite(2)`.
    pub async fn pwrite(
        &self,
        sim: &Sim,
        process: &Process,
        fd: i32,
        data: &[u8],
        offset: u64,
    ) -> Result<usize, Errno> {
        let entered = self.enter(sim, process, "pwrite").await;
        let result = self.do_write(sim, process, fd, data, Some(offset)).await;
        self.count(entered, result)
    }

    async fn do_write(
        &self,
        sim: &Sim,
        process: &Process,
        fd: i32,
        data: &[u8],
        offset: Option<u64>,
    ) -> Result<usize, Errno> {
        let (ino, flags) = self.fd_ino(process, fd)?;
        if flags & O_ACCMODE == O_RDONLY {
            return Err(Errno::EBADF);
        }
        if data.is_empty() {
            return Ok(0);
        }
        let issuer = self.issuer(sim, process);
        let mobifs = self.mobifs_for(process).filter(|_| flags & O_DIRECT == 0);
        let lock = self.state.borrow().inodes[&ino].lock.clone();
        let guard = lock.lock(sim).await;
        // file_update_time: ext4 journals the inode once per tick (ext4_dirty_inode). Under
        // MobiFS the inode is journaled with the VCT that carries the data.
        if mobifs.is_none() {
            self.fs.update_time(sim, ino).await;
        }
        let size = self.state.borrow().inodes[&ino].size;
        let pos = match offset {
            Some(offset) => offset,
            None if flags & O_APPEND != 0 => size,
            None => process.files.borrow().get(&fd).map_or(0, |f| f.pos),
        };
        let len = data.len() as u64;
        let (written, error) = if flags & O_DIRECT != 0 {
            let first = pos / PAGE_SIZE;
            let last = (pos + len - 1) / PAGE_SIZE;
            match self
                .mm
                .direct_io(sim, ino, first, last - first + 1, true, issuer)
                .await
            {
                Ok(()) => (len, None),
                Err(errno) => (0, Some(errno)),
            }
        } else if let Some(mobifs) = &mobifs {
            // MobiFS's write: into the page cache, pinned and clean, and into the app's log.
            let written = self.mm.cache_write(sim, ino, pos, len, size, issuer).await;
            let new_size = size.max(pos + written);
            if let Some(log) = self.mm.crash_log().filter(|_| new_size > size) {
                // Before the VCT may close: the size is part of it.
                log.size(sim.now(), ino, new_size);
            }
            mobifs.record_write(sim, &process.comm, ino, pos, written, new_size);
            (written, None)
        } else {
            let mut throttle = process.throttle.get();
            let outcome = self
                .mm
                .perform_write(sim, ino, pos, len, size, issuer, &mut throttle)
                .await;
            process.throttle.set(throttle);
            outcome
        };
        if written > 0 {
            self.copy_in(ino, pos, &data[..written as usize]);
            let mut state = self.state.borrow_mut();
            state.stats.bytes_written += written;
            let inode = state.inodes.get_mut(&ino).expect("inode");
            if pos + written > inode.size {
                inode.size = pos + written;
                inode.size_dirty = true;
                if let Some(log) = self.mm.crash_log().filter(|_| mobifs.is_none()) {
                    log.size(sim.now(), ino, inode.size);
                }
            }
            inode.mtime_ns = sim.now();
            inode.meta_dirty = true;
        }
        drop(guard);
        if offset.is_none() {
            if let Some(file) = process.files.borrow_mut().get_mut(&fd) {
                file.pos = pos + written;
            }
        }
        if let Some(mobifs) = &mobifs {
            // Over the memory limit, the writer waits for the checkpointer (§6.1).
            mobifs.throttle(sim).await;
        }
        if written > 0 && flags & O_SYNC == O_SYNC {
            // generic_write_sync after the lock is released.
            self.do_fsync(sim, process, ino, false).await;
        }
        match (written, error) {
            (0, Some(errno)) => Err(errno),
            (n, _) => Ok(n as usize),
        }
    }

    /// `fsync(2)`.
    pub async fn fsync(&self, sim: &Sim, process: &Process, fd: i32) -> Result<(), Errno> {
        self.sync_fd(sim, process, fd, false).await
    }

    /// `fdatasync(2)`: like fsync, but the inode is written only if its size changed.
    pub async fn fdatasync(&self, sim: &Sim, process: &Process, fd: i32) -> Result<(), Errno> {
        self.sync_fd(sim, process, fd, true).await
    }

    /// `vfs_fsync`: the common path of fsync and fdatasync.
    async fn sync_fd(
        &self,
        sim: &Sim,
        process: &Process,
        fd: i32,
        datasync: bool,
    ) -> Result<(), Errno> {
        let entered = self
            .enter(sim, process, if datasync { "fdatasync" } else { "fsync" })
            .await;
        let result = match self.fd_ino(process, fd) {
            Ok((ino, _)) => {
                self.do_fsync(sim, process, ino, datasync).await;
                Ok(())
            }
            Err(errno) => Err(errno),
        };
        self.count(entered, result)
    }

    /// `vfs_fsync`: the data written and waited for without `i_mutex`
    /// (`filemap_write_and_wait_range`, where ext4 allocates delayed blocks), then the file
    /// system makes the inode durable (`ext4_sync_file`: the commit of its transaction, or a
    /// flush; `generic_file_fsync`: the inode block and a flush).
    async fn do_fsync(&self, sim: &Sim, process: &Process, ino: Ino, datasync: bool) {
        // Crash-point checking: what this fsync must make durable, and when it returned.
        let record = self.mm.crash_log().and_then(|log| {
            let size = self.state.borrow().inodes[&ino].size;
            let mobifs = self.mobifs_for(process).is_some();
            log.fsync_start(sim.now(), ino, size, mobifs)
                .map(|record| (log, record))
        });
        self.do_fsync_inner(sim, process, ino, datasync).await;
        if let Some((log, record)) = record {
            log.fsync_end(record, sim.now());
        }
    }

    async fn do_fsync_inner(&self, sim: &Sim, process: &Process, ino: Ino, datasync: bool) {
        let issuer = self.issuer(sim, process);
        self.state.borrow_mut().stats.fsyncs += 1;
        if let Some(mobifs) = self.mobifs_for(process) {
            // MobiFS's asynchronous fsync: durability comes with the checkpoint (seed 004 §4).
            mobifs.fsync();
            return;
        }
        self.fs.fsync_begin(ino, datasync, self.mm.dirty_pages(ino));
        self.mm
            .write_and_wait_range(sim, ino, 0, u64::MAX, issuer)
            .await;
        let (lock, write_inode) = {
            let mut state = self.state.borrow_mut();
            let inode = state.inodes.get_mut(&ino).expect("inode");
            let needed = if datasync {
                inode.size_dirty
            } else {
                inode.meta_dirty || inode.size_dirty
            };
            if needed {
                inode.meta_dirty = false;
                inode.size_dirty = false;
            }
            (inode.lock.clone(), needed)
        };
        self.fs
            .fsync(sim, issuer, ino, datasync, write_inode, lock)
            .await;
    }

    /// `truncate(2)`.
    pub async fn truncate(
        &self,
        sim: &Sim,
        process: &Process,
        path: &str,
        length: u64,
    ) -> Result<(), Errno> {
        let entered = self.enter(sim, process, "truncate").await;
        let result = match self.lookup(path) {
            Ok(ino) if self.state.borrow().inodes[&ino].kind == FileKind::Directory => {
                Err(Errno::EISDIR)
            }
            Ok(ino) => {
                let issuer = self.issuer(sim, process);
                self.do_truncate(sim, issuer, ino, length).await;
                Ok(())
            }
            Err(errno) => Err(errno),
        };
        self.count(entered, result)
    }

    /// `sync(2)`: every dirty page written and waited for (`sync_inodes_sb`, `WB_SYNC_ALL`),
    /// then the file system's `sync_fs` (ext4 commits its journal, F2FS checkpoints).
    pub async fn sync(&self, sim: &Sim, process: &Process) -> Result<(), Errno> {
        let entered = self.enter(sim, process, "sync").await;
        let issuer = self.issuer(sim, process);
        if let Some(mobifs) = self.mobifs_for(process) {
            mobifs.sync(sim).await;
        }
        for ino in self.mm.dirty_inodes() {
            self.mm
                .write_and_wait_range(sim, ino, 0, u64::MAX, issuer)
                .await;
        }
        self.fs.sync_fs(sim, issuer).await;
        self.count(entered, Ok(()))
    }

    /// `ioctl(2)` with a file-system command (F2FS's atomic-write commands); `ENOTTY` when
    /// the mounted file system does not know it.
    pub async fn ioctl(
        &self,
        sim: &Sim,
        process: &Process,
        fd: i32,
        cmd: super::FsIoctl,
    ) -> Result<(), Errno> {
        let entered = self.enter(sim, process, "ioctl").await;
        let result = match self.fd_ino(process, fd) {
            Ok((ino, _)) => {
                let issuer = self.issuer(sim, process);
                let lock = self.state.borrow().inodes[&ino].lock.clone();
                self.fs.ioctl(sim, issuer, ino, cmd, lock).await
            }
            Err(errno) => Err(errno),
        };
        self.count(entered, result)
    }

    /// Whether the mounted file system offers atomic writes (F2FS).
    pub fn supports_atomic_write(&self) -> bool {
        self.fs.supports_atomic_write()
    }

    /// `posix_fadvise(fd, offset, len, POSIX_FADV_DONTNEED)` (mm/fadvise.c, 3.10): starts
    /// writeback of the range's dirty pages, then drops the range's clean, idle pages. `len` 0
    /// means to the end of the file. 3.10 rounds the first page up (a partial first page
    /// stays) but takes the page holding the range's last byte even when the range covers it
    /// only in part (`end_index = endbyte >> PAGE_CACHE_SHIFT`; later kernels keep that partial
    /// page too). Returns the pages dropped (the system call itself returns 0).
    pub async fn fadvise_dontneed(
        &self,
        sim: &Sim,
        process: &Process,
        fd: i32,
        offset: u64,
        len: u64,
    ) -> Result<u64, Errno> {
        let entered = self.enter(sim, process, "fadvise64").await;
        let result = match self.fd_ino(process, fd) {
            Ok((ino, _)) => {
                // endbyte = offset + len - 1, or -1 ("as much as possible") for len 0 or an
                // overflow.
                let end = match offset.checked_add(len) {
                    Some(end) if len > 0 => (end - 1) / PAGE_SIZE,
                    _ => u64::MAX,
                };
                let start = offset.div_ceil(PAGE_SIZE);
                if end < start {
                    Ok(0)
                } else {
                    let issuer = self.issuer(sim, process);
                    Ok(self.mm.fadvise_dontneed(sim, ino, start, end, issuer).await)
                }
            }
            Err(errno) => Err(errno),
        };
        self.count(entered, result)
    }

    /// `ftruncate(2)`.
    pub async fn ftruncate(
        &self,
        sim: &Sim,
        process: &Process,
        fd: i32,
        length: u64,
    ) -> Result<(), Errno> {
        let entered = self.enter(sim, process, "ftruncate").await;
        let result = match self.fd_ino(process, fd) {
            Ok((_, flags)) if flags & O_ACCMODE == O_RDONLY => Err(Errno::EINVAL),
            Ok((ino, _)) => {
                let issuer = self.issuer(sim, process);
                self.do_truncate(sim, issuer, ino, length).await;
                Ok(())
            }
            Err(errno) => Err(errno),
        };
        self.count(entered, result)
    }

    async fn do_truncate(&self, sim: &Sim, issuer: crate::mm::Issuer, ino: Ino, length: u64) {
        let lock = self.state.borrow().inodes[&ino].lock.clone();
        let guard = lock.lock(sim).await;
        let size = self.state.borrow().inodes[&ino].size;
        let first_gone = length.div_ceil(PAGE_SIZE);
        // Crash-point checking: the truncate happens now, before MobiFS may log it (the tail
        // of a partial last page is zeroed in the cache, not written: past the size, it
        // keeps its version).
        if let Some(log) = self.mm.crash_log() {
            if length < size {
                log.truncated(sim.now(), ino, length);
            } else if length > size {
                log.size(sim.now(), ino, length);
            }
        }
        // MobiFS with `log-truncate`: the truncate goes into the open VCT and reaches ext4
        // with its checkpoint.
        let logged = self.mobifs().filter(|m| m.logs_truncate(ino));
        if let Some(mobifs) = &logged {
            mobifs.record_truncate(sim, ino, length);
        }
        if length < size {
            if let Some(mobifs) = self.mobifs().filter(|_| logged.is_none()) {
                mobifs.forget(ino, first_gone, false);
            }
            self.mm.truncate_pages(sim, ino, first_gone, u64::MAX).await;
        }
        // ext4_setattr: the size in a handle (with the orphan list and the freed blocks when
        // shrinking); simplefs frees the blocks.
        if logged.is_none() {
            self.fs.setattr_size(sim, issuer, ino, size, length).await;
        }
        if length < size {
            let mut state = self.state.borrow_mut();
            let inode = state.inodes.get_mut(&ino).expect("inode");
            if let Some(contents) = inode.contents.as_mut() {
                contents.retain(|&index, _| index < first_gone);
                if !length.is_multiple_of(PAGE_SIZE) {
                    if let Some(page) = contents.get_mut(&(length / PAGE_SIZE)) {
                        page[(length % PAGE_SIZE) as usize..].fill(0);
                    }
                }
            }
        }
        let mut state = self.state.borrow_mut();
        let inode = state.inodes.get_mut(&ino).expect("inode");
        if inode.size != length {
            inode.size = length;
            inode.size_dirty = true;
        }
        inode.meta_dirty = true;
        inode.mtime_ns = sim.now();
        drop(state);
        drop(guard);
    }

    /// `unlink(2)`.
    pub async fn unlink(&self, sim: &Sim, process: &Process, path: &str) -> Result<(), Errno> {
        let entered = self.enter(sim, process, "unlink").await;
        let issuer = self.issuer(sim, process);
        let result = self.do_unlink(sim, issuer, path).await;
        self.count(entered, result)
    }

    async fn do_unlink(
        &self,
        sim: &Sim,
        issuer: crate::mm::Issuer,
        path: &str,
    ) -> Result<(), Errno> {
        let ino = self.lookup(path)?;
        let parent = self.lookup_parent_dir(path)?;
        let (kind, nlink) = {
            let state = self.state.borrow();
            (state.inodes[&ino].kind, state.inodes[&ino].nlink)
        };
        if kind == FileKind::Directory {
            return Err(Errno::EISDIR);
        }
        self.fs
            .unlink(sim, issuer, parent, leaf(path), nlink == 1)
            .await?;
        if let Some(log) = self.mm.crash_log() {
            log.unlinked(sim.now(), ino);
        }
        let evict = {
            let mut state = self.state.borrow_mut();
            state.names.remove(path);
            let dir = state.inodes.get_mut(&parent).expect("parent");
            dir.meta_dirty = true;
            dir.mtime_ns = sim.now();
            let inode = state.inodes.get_mut(&ino).expect("inode");
            inode.nlink -= 1;
            inode.nlink == 0 && inode.open == 0
        };
        if evict {
            self.evict(sim, issuer, ino).await;
        }
        Ok(())
    }

    /// `rename(2)`: replaces a regular file at `to`; a directory moves with its entries.
    pub async fn rename(
        &self,
        sim: &Sim,
        process: &Process,
        from: &str,
        to: &str,
    ) -> Result<(), Errno> {
        let entered = self.enter(sim, process, "rename").await;
        let issuer = self.issuer(sim, process);
        let result = self.do_rename(sim, issuer, from, to).await;
        self.count(entered, result)
    }

    async fn do_rename(
        &self,
        sim: &Sim,
        issuer: crate::mm::Issuer,
        from: &str,
        to: &str,
    ) -> Result<(), Errno> {
        let ino = self.lookup(from)?;
        check_path(to)?;
        let new_parent = self.lookup_parent_dir(to)?;
        let old_parent = self.lookup_parent_dir(from)?;
        if from == to {
            return Ok(());
        }
        let kind = self.state.borrow().inodes[&ino].kind;
        if kind == FileKind::Directory && to.starts_with(&format!("{from}/")) {
            return Err(Errno::EINVAL);
        }
        // ext4_rename: replacing a file first starts writing the source's delayed data
        // (auto_da_alloc: ext4_alloc_da_blocks = filemap_flush), before the handle.
        if self.lookup(to).is_ok() && self.fs.flush_on_rename(ino) {
            self.mm.filemap_flush(sim, ino, issuer).await;
        }
        let replaced_last_link = self
            .lookup(to)
            .ok()
            .is_some_and(|target| self.state.borrow().inodes[&target].nlink == 1);
        if let Ok(target) = self.lookup(to) {
            let state = self.state.borrow();
            match (kind, state.inodes[&target].kind) {
                (FileKind::Regular, FileKind::Directory) => return Err(Errno::EISDIR),
                (FileKind::Directory, FileKind::Regular) => return Err(Errno::ENOTDIR),
                _ => {}
            }
        }
        self.fs
            .rename(
                sim,
                issuer,
                old_parent,
                leaf(from),
                new_parent,
                leaf(to),
                replaced_last_link,
            )
            .await?;
        let mut evict = None;
        if let Ok(target) = self.lookup(to) {
            let state = self.state.borrow();
            match (kind, state.inodes[&target].kind) {
                (FileKind::Regular, FileKind::Directory) => return Err(Errno::EISDIR),
                (FileKind::Directory, FileKind::Regular) => return Err(Errno::ENOTDIR),
                (FileKind::Directory, FileKind::Directory) => {
                    let prefix = format!("{to}/");
                    if state
                        .names
                        .range(prefix.clone()..)
                        .next()
                        .is_some_and(|(n, _)| n.starts_with(&prefix))
                    {
                        return Err(Errno::ENOTEMPTY);
                    }
                }
                (FileKind::Regular, FileKind::Regular) => {}
            }
            drop(state);
            let mut state = self.state.borrow_mut();
            if let Some(log) = self.mm.crash_log() {
                log.unlinked(sim.now(), target);
            }
            let target_inode = state.inodes.get_mut(&target).expect("target");
            target_inode.nlink -= 1;
            if target_inode.nlink == 0 && target_inode.open == 0 {
                evict = Some(target);
            }
            state.names.remove(to);
        }
        {
            let mut state = self.state.borrow_mut();
            let prefix = format!("{from}/");
            let moved: Vec<(String, Ino)> = state
                .names
                .range(prefix.clone()..)
                .take_while(|(n, _)| n.starts_with(&prefix))
                .map(|(n, &i)| (n.clone(), i))
                .collect();
            for (name, child) in moved {
                state.names.remove(&name);
                state
                    .names
                    .insert(format!("{to}/{}", &name[prefix.len()..]), child);
            }
            state.names.remove(from);
            state.names.insert(to.to_string(), ino);
            for dir in [old_parent, new_parent] {
                let inode = state.inodes.get_mut(&dir).expect("parent");
                inode.meta_dirty = true;
                inode.mtime_ns = sim.now();
            }
        }
        if let Some(log) = self.mm.crash_log() {
            log.renamed(sim.now(), ino, new_parent, leaf(to), to);
        }
        if let Some(target) = evict {
            self.evict(sim, issuer, target).await;
        }
        Ok(())
    }

    /// `mkdir(2)`.
    pub async fn mkdir(&self, sim: &Sim, process: &Process, path: &str) -> Result<(), Errno> {
        let entered = self.enter(sim, process, "mkdir").await;
        let result = match self.lookup(path) {
            Ok(_) => Err(Errno::EEXIST),
            Err(Errno::ENOENT) => {
                let issuer = self.issuer(sim, process);
                self.create(sim, issuer, path, FileKind::Directory, false)
                    .await
                    .map(|_| ())
            }
            Err(errno) => Err(errno),
        };
        self.count(entered, result)
    }

    /// What `stat` and `fstat` report of inode `ino`.
    fn stat_of(&self, ino: Ino) -> Stat {
        let state = self.state.borrow();
        let inode = &state.inodes[&ino];
        Stat {
            ino,
            kind: inode.kind,
            size: inode.size,
            nlink: inode.nlink,
            mtime_ns: inode.mtime_ns,
            cached_pages: self.mm.nr_pages(ino) as u64,
        }
    }

    /// `stat(2)`.
    pub async fn stat(&self, sim: &Sim, process: &Process, path: &str) -> Result<Stat, Errno> {
        let entered = self.enter(sim, process, "stat").await;
        let result = self.lookup(path).map(|ino| self.stat_of(ino));
        self.count(entered, result)
    }

    /// `fstat(2)`.
    pub async fn fstat(&self, sim: &Sim, process: &Process, fd: i32) -> Result<Stat, Errno> {
        let entered = self.enter(sim, process, "fstat").await;
        let result = self.fd_ino(process, fd).map(|(ino, _)| self.stat_of(ino));
        self.count(entered, result)
    }

    /// Creates directory `path` and its missing parents, as they exist on the phone before the
    /// run (`mkdir -p` at setup: no time passes).
    pub fn mkdir_all(&self, sim: &Sim, path: &str) -> Result<(), Errno> {
        check_path(path)?;
        let mut at = String::new();
        for part in path.split('/').filter(|p| !p.is_empty()) {
            at.push('/');
            at.push_str(part);
            match self.lookup(&at) {
                Ok(ino) if self.state.borrow().inodes[&ino].kind == FileKind::Directory => {}
                Ok(_) => return Err(Errno::ENOTDIR),
                Err(_) => {
                    self.create_at_setup(sim, &at, FileKind::Directory)?;
                }
            }
        }
        Ok(())
    }

    /// Creates `path` of `size` bytes with its blocks on disk and nothing cached, as if it had
    /// been written before the run (a preexisting file: photos, an app's data). Not a system
    /// call: no time passes.
    /// `[stack.vm] cached` ([`crate::mm::VmConfig::cached`]): file [`CACHED_APPS_PATH`] of
    /// `bytes` on disk, and as many of its pages in the page cache as fit above the high
    /// watermark, clean and owned by UID 1000 (`AID_SYSTEM`). Returns the pages cached.
    pub fn prefill_cached(&self, sim: &Sim, bytes: u64) -> Result<u64, Errno> {
        let ino = self.populate(sim, CACHED_APPS_PATH, bytes)?;
        Ok(self
            .mm
            .prefill_clean(ino, bytes.div_ceil(PAGE_SIZE), AID_SYSTEM))
    }

    pub fn populate(&self, sim: &Sim, path: &str, size: u64) -> Result<Ino, Errno> {
        check_path(path)?;
        if self.lookup(path).is_ok() {
            return Err(Errno::EEXIST);
        }
        let ino = self.create_at_setup(sim, path, FileKind::Regular)?;
        self.fs.populate_blocks(ino, size)?;
        let mut state = self.state.borrow_mut();
        let inode = state.inodes.get_mut(&ino).expect("inode");
        inode.size = size;
        inode.meta_dirty = false;
        Ok(ino)
    }
}
