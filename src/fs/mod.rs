//! File systems and the VFS.
//!
//! - [`vfs`]: the system calls of simulated tasks (open/creat, read, write, pread/pwrite, fsync,
//!   fdatasync, truncate/ftruncate, unlink, rename, mkdir, stat, close), per-task fd tables and
//!   the name space, over the page cache of [`crate::mm`].
//! - [`FileSystem`]: what the VFS and the page cache need from the on-disk file system (block
//!   mapping and allocation, inode numbers and where inodes live on disk). [`simplefs`] (no
//!   journal) lets everything above run; [`ext4`] holds ext4's on-disk structures and
//!   allocators (pure state; jbd2 and the ext4 operations are issue 10's other half).
//!
//! A workload mistake (a bad fd, a missing file) is an [`Errno`] returned to the workload and
//! counted in the results, never a panic.

pub mod ext4;
pub mod jbd2;
pub mod simplefs;
pub mod vfs;

pub use crate::errno::Errno;
pub use crate::mm::{AddressSpaceOps, Ino};

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
