//! File systems and the VFS.
//!
//! - [`vfs`]: the system calls of simulated tasks (open/creat, read, write, pread/pwrite, fsync,
//!   fdatasync, truncate/ftruncate, unlink, rename, mkdir, stat, close), per-task fd tables and
//!   the name space, over the page cache of [`crate::mm`].
//! - [`FileSystemOps`]: what the VFS calls on a mounted file system, shaped after Linux's
//!   `inode_operations` (create, mkdir, unlink, rename, setattr), `file_operations` (fsync,
//!   release) and `super_operations` (evict_inode, dirty_inode); the page cache's half
//!   (`address_space_operations`) is [`AddressSpaceOps`] plus, for a file system with a journal
//!   and delayed allocation, [`crate::mm::FsHooks`]. [`ext4`] (with [`jbd2`]) is the default;
//!   [`simplefs`] (no journal) is `[stack.fs] type = "simplefs"`.
//! - [`FileSystem`]: the pure block-mapping state a simple file system keeps (inode numbers,
//!   where inodes live, free blocks).
//!
//! A workload mistake (a bad fd, a missing file) is an [`Errno`] returned to the workload and
//! counted in the results, never a panic.

pub mod ext4;
pub mod f2fs;
pub mod jbd2;
pub mod mobifs;
pub mod mutant;
pub mod simplefs;
pub mod vfs;

/// Test support shared by the file systems' tests.
#[cfg(test)]
pub(crate) mod test_support {
    use crate::fs::vfs::{Process, Vfs};
    use crate::sim::{Sim, Simulation};
    use std::future::Future;
    use std::rc::Rc;

    /// Runs `body` as task `app` of a new process of `uid` on `vfs` until the simulation has
    /// nothing left to do; panics on a deadlock.
    pub(crate) fn run_app<F, Fut>(sim: &Simulation, vfs: &Rc<Vfs>, uid: u32, body: F)
    where
        F: FnOnce(Sim, Rc<Vfs>, Process) -> Fut + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        let (s, vfs) = (sim.handle(), vfs.clone());
        let process = vfs.new_process(uid, "app");
        sim.spawn("app", async move { body(s, vfs, process).await });
        sim.run_until(u64::MAX, true).expect("no deadlock");
    }
}

pub use crate::errno::Errno;
pub use crate::mm::bio::LocalBoxFuture;
pub use crate::mm::{AddressSpaceOps, Ino, Issuer};
use crate::sim::sync::Mutex;
use crate::sim::Sim;

/// A mounted file system as the VFS drives it. The VFS keeps the name space (dentries) and the
/// in-memory inode (`i_size`, `i_nlink`, `i_mutex`); the file system owns its on-disk metadata
/// and how it is made durable. Names are a parent directory's inode and one path component.
/// Every method that may wait is asynchronous and runs in the calling task.
pub trait FileSystemOps {
    fn name(&self) -> &str;
    /// The root directory's inode.
    fn root(&self) -> Ino;
    /// `vfs_create` / `vfs_mkdir`: a new inode with an entry `name` in `dir`.
    fn create<'a>(
        &'a self,
        sim: &'a Sim,
        issuer: Issuer,
        dir: Ino,
        name: &'a str,
        is_dir: bool,
    ) -> LocalBoxFuture<'a, Result<Ino, Errno>>;
    /// The same at setup, before the run: no time passes and nothing is journaled (the file
    /// existed on the phone).
    fn create_at_setup(&self, dir: Ino, name: &str, is_dir: bool) -> Result<Ino, Errno>;
    /// Gives a file created at setup blocks for its first `size` bytes, on disk already.
    fn populate_blocks(&self, ino: Ino, size: u64) -> Result<(), Errno>;
    /// `vfs_unlink`: removes `name` from `dir`; `last_link` when the inode's link count drops
    /// to zero (ext4 puts it on the orphan list until it is evicted).
    fn unlink<'a>(
        &'a self,
        sim: &'a Sim,
        issuer: Issuer,
        dir: Ino,
        name: &'a str,
        last_link: bool,
    ) -> LocalBoxFuture<'a, Result<(), Errno>>;
    /// `vfs_rename`: moves an entry, replacing a file at the target (`replaced_last_link` when
    /// that was its last link).
    #[allow(clippy::too_many_arguments)]
    fn rename<'a>(
        &'a self,
        sim: &'a Sim,
        issuer: Issuer,
        old_dir: Ino,
        old_name: &'a str,
        new_dir: Ino,
        new_name: &'a str,
        replaced_last_link: bool,
    ) -> LocalBoxFuture<'a, Result<(), Errno>>;
    /// `evict_inode` of an inode with no links and no opener (its pages are gone already).
    fn evict<'a>(&'a self, sim: &'a Sim, issuer: Issuer, ino: Ino) -> LocalBoxFuture<'a, ()>;
    /// `setattr` of the size, under `i_mutex`, after the page cache dropped the pages past
    /// `new_size`.
    fn setattr_size<'a>(
        &'a self,
        sim: &'a Sim,
        issuer: Issuer,
        ino: Ino,
        old_size: u64,
        new_size: u64,
    ) -> LocalBoxFuture<'a, ()>;
    /// `file_update_time` before a write, under `i_mutex` (`dirty_inode`).
    fn update_time<'a>(&'a self, sim: &'a Sim, ino: Ino) -> LocalBoxFuture<'a, ()>;
    /// `fsync` after the data was written and waited for (`filemap_write_and_wait_range`):
    /// makes the inode durable. `write_inode` says whether the VFS's inode is dirty (what
    /// `generic_file_fsync` checks; a journaling file system uses its own transaction ids);
    /// `i_mutex` is the inode's lock, taken as the file system's fsync takes it.
    fn fsync<'a>(
        &'a self,
        sim: &'a Sim,
        issuer: Issuer,
        ino: Ino,
        datasync: bool,
        write_inode: bool,
        i_mutex: Mutex,
    ) -> LocalBoxFuture<'a, ()>;
    /// `fsync` is about to write `ino`'s data (`dirty_pages` of them): F2FS decides here
    /// whether the data is updated in place (`FI_NEED_IPU`). Default: nothing.
    fn fsync_begin(&self, _ino: Ino, _datasync: bool, _dirty_pages: u64) {}
    /// A file-system `ioctl` on an open file (`i_mutex` is its inode lock). Default: `ENOTTY`
    /// (the file system does not know the command).
    fn ioctl<'a>(
        &'a self,
        _sim: &'a Sim,
        _issuer: Issuer,
        _ino: Ino,
        _cmd: FsIoctl,
        _i_mutex: Mutex,
    ) -> LocalBoxFuture<'a, Result<(), Errno>> {
        Box::pin(async { Err(Errno::ENOTTY) })
    }
    /// Whether the file system supports atomic writes (`F2FS_IOC_GET_FEATURES` reporting
    /// `F2FS_FEATURE_ATOMIC_WRITE`), which SQLite's VFS asks before batching a commit.
    fn supports_atomic_write(&self) -> bool {
        false
    }
    /// `sync_fs(sb, wait = 1)` after `sync(2)` wrote and waited for every dirty page: makes
    /// the file system's metadata durable (ext4: commit the running transaction and wait;
    /// F2FS: a checkpoint). Default: nothing (simplefs flushes the device cache).
    fn sync_fs<'a>(&'a self, sim: &'a Sim, issuer: Issuer) -> LocalBoxFuture<'a, ()> {
        let _ = (sim, issuer);
        Box::pin(async {})
    }
    /// A file is opened for writing.
    fn open_for_write(&self, ino: Ino);
    /// The last writer's `release`; true when the file system wants the file's delayed data
    /// flushed now (ext4's `auto_da_alloc` after a truncate to zero).
    fn release_writer(&self, ino: Ino) -> bool;
    /// Whether renaming over a file should first flush `ino`'s delayed data (`auto_da_alloc`).
    fn flush_on_rename(&self, ino: Ino) -> bool;
    /// Counters of the file system (and its journal) for the results, as (name, value).
    /// The store MobiFS's checkpointer commits VCTs to (ext4's journal); `None` when the
    /// file system has none.
    fn atomic_store(&self) -> Option<std::rc::Rc<dyn mobifs::AtomicStore>> {
        None
    }
    fn counters(&self) -> Vec<(String, u64)> {
        Vec::new()
    }
    /// Records, from now on, what each journal transaction leaves of the files under test
    /// (crash-point checking, [`crate::mm::crashlog`]). Only ext4 with an internal journal
    /// supports it.
    fn record_crash(&self, _log: std::rc::Rc<crate::mm::crashlog::CrashLog>) -> Result<(), String> {
        Err(format!(
            "crash-point checking needs ext4 (this file system is {})",
            self.name()
        ))
    }
    /// Turns the file system's run-time invariant checks on (`mobistack run --check`; they
    /// are on in debug builds).
    fn enable_checks(&self) {}
    /// The first invariant violation its checks found, if any.
    fn violation(&self) -> Option<String> {
        None
    }
    /// The checks due at the end of a run (handles still open, ext4).
    fn check_end_of_run(&self, _sim: &Sim) {}
}

/// File-system `ioctl` commands the VFS passes through ([`FileSystemOps::ioctl`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsIoctl {
    /// `F2FS_IOC_START_ATOMIC_WRITE`: the file's writes stay in memory until the commit.
    StartAtomicWrite,
    /// `F2FS_IOC_COMMIT_ATOMIC_WRITE`: writes them out of place and syncs the file's nodes.
    CommitAtomicWrite,
    /// `F2FS_IOC_ABORT_VOLATILE_WRITE`: drops them.
    AbortAtomicWrite,
}

/// What the VFS needs from the on-disk file system: inode numbers and where an inode's metadata
/// lives; the mapping of file pages to disk blocks (`get_block`) is the page cache's
/// [`AddressSpaceOps`], which every file system implements too.
/// Blocks are 4 KiB (one page). Implementations are pure state (no waiting); the I/O their
/// metadata needs is issued by the VFS through the page cache's block device.
pub trait FileSystem: AddressSpaceOps {
    fn name(&self) -> &str;
    /// Allocates an inode number (`ialloc`); `ENOSPC` when the inode table is full.
    fn alloc_inode(&mut self) -> Result<Ino, Errno>;
    /// Frees an inode number and every block it maps.
    fn free_inode(&mut self, ino: Ino);
    /// Frees the blocks of pages `first_index..` (truncate).
    fn truncate_blocks(&mut self, ino: Ino, first_index: u64);
    /// The disk block holding the inode (its slot in the inode table), written when the
    /// inode's metadata is written back or synced.
    fn inode_block(&self, ino: Ino) -> u64;
    /// Free data blocks left.
    fn free_blocks(&self) -> u64;
}
