//! File systems and the VFS.
//!
//! - [`vfs`]: the system calls of simulated tasks (open/creat, read, write, pread/pwrite, fsync,
//!   fdatasync, truncate/ftruncate, unlink, rename, mkdir, stat, close), per-task fd tables and
//!   the name space, over the page cache of [`crate::mm`].
//! - [`FileSystem`]: what the VFS and the page cache need from the on-disk file system (block
//!   mapping and allocation, inode numbers and where inodes live on disk). ext4/jbd2 will implement
//!   it in its own issue; until then [`simplefs`] (no journal) lets everything above run.
//!
//! A workload mistake (a bad fd, a missing file) is an [`Errno`] returned to the workload and
//! counted in the results, never a panic.

pub mod simplefs;
pub mod vfs;

use std::fmt;

/// Linux error numbers returned by the simulated system calls (include/uapi/asm-generic/errno-base.h).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Errno {
    /// 2: no such file or directory.
    ENOENT,
    /// 9: bad file descriptor.
    EBADF,
    /// 17: file exists.
    EEXIST,
    /// 20: not a directory.
    ENOTDIR,
    /// 21: is a directory.
    EISDIR,
    /// 22: invalid argument.
    EINVAL,
    /// 24: too many open files.
    EMFILE,
    /// 27: file too large.
    EFBIG,
    /// 28: no space left on device.
    ENOSPC,
    /// 39: directory not empty.
    ENOTEMPTY,
}

impl Errno {
    pub fn code(self) -> i32 {
        match self {
            Errno::ENOENT => 2,
            Errno::EBADF => 9,
            Errno::EEXIST => 17,
            Errno::ENOTDIR => 20,
            Errno::EISDIR => 21,
            Errno::EINVAL => 22,
            Errno::EMFILE => 24,
            Errno::EFBIG => 27,
            Errno::ENOSPC => 28,
            Errno::ENOTEMPTY => 39,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Errno::ENOENT => "ENOENT",
            Errno::EBADF => "EBADF",
            Errno::EEXIST => "EEXIST",
            Errno::ENOTDIR => "ENOTDIR",
            Errno::EISDIR => "EISDIR",
            Errno::EINVAL => "EINVAL",
            Errno::EMFILE => "EMFILE",
            Errno::EFBIG => "EFBIG",
            Errno::ENOSPC => "ENOSPC",
            Errno::ENOTEMPTY => "ENOTEMPTY",
        }
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.code())
    }
}

impl std::error::Error for Errno {}

/// Inode number.
pub type Ino = u64;

/// What the VFS and page cache need from the on-disk file system: inode numbers, where an
/// inode's metadata lives, and the mapping of file pages to disk blocks (`get_block`).
/// Blocks are 4 KiB (one page). Implementations are pure state (no waiting); the I/O their
/// metadata needs is issued by the VFS through the page cache's block device.
pub trait FileSystem {
    fn name(&self) -> &str;
    /// Allocates an inode number (`ialloc`); `ENOSPC` when the inode table is full.
    fn alloc_inode(&mut self) -> Result<Ino, Errno>;
    /// Frees an inode number and every block it maps.
    fn free_inode(&mut self, ino: Ino);
    /// `get_block`: the disk block of page `index` of `ino`, allocating one when `create`
    /// (`ENOSPC` when the disk is full). `Ok(None)` is a hole.
    fn get_block(&mut self, ino: Ino, index: u64, create: bool) -> Result<Option<u64>, Errno>;
    /// Frees the blocks of pages `first_index..` (truncate).
    fn truncate_blocks(&mut self, ino: Ino, first_index: u64);
    /// The disk block holding the inode (its slot in the inode table), written when the
    /// inode's metadata is written back or synced.
    fn inode_block(&self, ino: Ino) -> u64;
    /// Free data blocks left.
    fn free_blocks(&self) -> u64;
}
