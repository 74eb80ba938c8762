//! Linux error numbers (include/uapi/asm-generic/errno-base.h): what a simulated system call
//! returns when it fails. Shared by every layer that can fail a call (the page cache's `ENOSPC`
//! from block allocation, the VFS's `ENOENT`), like `units`.

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
    /// 25: inappropriate ioctl for device (a command the file system does not know).
    ENOTTY,
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
            Errno::ENOTTY => 25,
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
            Errno::ENOTTY => "ENOTTY",
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
