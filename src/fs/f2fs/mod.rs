//! F2FS, the log-structured file system of Android's /data since about 2018, modelled on
//! Linux's fs/f2fs (4.9 for the GC loop, mainline for `f2fs_do_sync_file`, which has kept its
//! shape since 4.x) and mkfs.f2fs's layout. `[stack.fs] type = "f2fs"`; `docs/f2fs.md`
//! explains the model and its options.
//!
//! - [`layout`]: mkfs.f2fs's areas (checkpoint packs, SIT, NAT, SSA, main area) and
//!   overprovisioning.
//! - [`segment`]: the segment manager: six logs, block allocation with slack space
//!   recycling, invalidation, prefree segments freed at checkpoints, GC victims.
//! - [`fs`]: the mounted file system: node blocks and the NAT, out-of-place data writeback,
//!   `fsync` with roll-forward node blocks, checkpoints, foreground and background GC,
//!   discards, atomic writes, and the VFS's and page cache's interfaces.
//!
//! Simplifications common to the modules: node pages and dentry blocks are kept by the file
//! system (always cached, never reclaimed) rather than in the node inode's and directories'
//! page cache; `cp_rwsem` is
//! not modelled (operations do not wait for a checkpoint's `block_operations`); no extent
//! cache, no compression, no encryption, no quota, no multiple devices, no zoned devices.

pub mod fs;
pub mod layout;
pub mod segment;
#[cfg(test)]
mod tests;

pub use fs::{mount, F2fs, F2fsOps};

use crate::units::{serde_units, Nanos, NS_PER_SEC};
use serde::{Deserialize, Serialize};

/// `fsync_mode=` (fs/f2fs/super.c).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FsyncMode {
    /// `posix` (default): fsync writes the file's node blocks with roll-forward marks; a
    /// checkpoint only when F2FS needs one.
    #[default]
    Posix,
    /// `strict`: also a checkpoint when the file's directory entry is not yet checkpointed
    /// (`CP_RECOVER_DIR`, simplified).
    Strict,
    /// `nobarrier`: as posix, without the cache flush at the end of fsync.
    Nobarrier,
}

/// `mode=` (fs/f2fs/super.c).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum F2fsMode {
    /// `adaptive` (default): slack space recycling into dirty segments when free segments
    /// run low, and in-place updates for fdatasync and small fsyncs (`F2FS_IPU_FSYNC`).
    #[default]
    Adaptive,
    /// `lfs`: strictly log-structured, every write to a new block of a clean segment.
    Lfs,
}

/// F2FS's mount options as the model uses them, resolved from `[stack.fs]`.
#[derive(Debug, Clone, PartialEq)]
pub struct F2fsConfig {
    pub fsync_mode: FsyncMode,
    /// `background_gc=on` (default, super.c `BGGC_MODE_ON`).
    pub background_gc: bool,
    /// `discard` (default on in the model: Android's fstab mounts /data with it).
    pub discard: bool,
    /// `nobarrier` off: cache flushes are issued.
    pub barrier: bool,
    /// `inline_dentry` (default on since Linux 3.17... set by default in `default_options`):
    /// a small directory's entries live in its inode block.
    pub inline_dentry: bool,
    /// `inline_data` (default on, `default_options`): a regular file's data up to
    /// `MAX_INLINE_DATA` (3,488 bytes) lives in its inode block.
    pub inline_data: bool,
    pub mode: F2fsMode,
    /// `active_logs=` 2, 4 or 6 (default 6, `NR_CURSEG_TYPE`).
    pub active_logs: u8,
    /// `checkpoint` interval: `cp_interval` sysfs, default 60 s (`DEF_CP_INTERVAL`).
    pub checkpoint_interval: Nanos,
}

impl Default for F2fsConfig {
    fn default() -> Self {
        F2fsConfig {
            fsync_mode: FsyncMode::Posix,
            background_gc: true,
            discard: true,
            barrier: true,
            inline_dentry: true,
            inline_data: true,
            mode: F2fsMode::Adaptive,
            active_logs: 6,
            checkpoint_interval: 60 * NS_PER_SEC,
        }
    }
}

/// The F2FS options of `[stack.fs]` (each unset one takes its default); valid only with
/// `type = "f2fs"`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct F2fsOptions {
    /// `fsync_mode`: "posix" (default), "strict", "nobarrier".
    pub fsync_mode: Option<FsyncMode>,
    /// `background_gc`: true (default) or false.
    pub background_gc: Option<bool>,
    /// `inline_data`: true (default).
    pub inline_data: Option<bool>,
    /// `inline_dentry`: true (default).
    pub inline_dentry: Option<bool>,
    /// `mode`: "adaptive" (default) or "lfs".
    pub mode: Option<F2fsMode>,
    /// `active_logs`: 2, 4 or 6 (default).
    pub active_logs: Option<u8>,
    /// The checkpoint interval (`cp_interval`), default "60s".
    #[serde(default, with = "serde_units::option_duration")]
    pub checkpoint_interval: Option<Nanos>,
    /// `f2fs_preset = "android"`: the options Android's fstab gives /data (see
    /// [`F2fsOptions::resolve`]); explicit options win.
    pub f2fs_preset: Option<F2fsPreset>,
}

/// Named sets of F2FS mount options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum F2fsPreset {
    /// The kernel's defaults (mount with no options).
    Kernel,
    /// AOSP's /data line for F2FS (`fstab.<device>`: `discard`, `fsync_mode=nobarrier` on
    /// Pixel devices; asm: from AOSP device trees of 2019-2023, not checked against one file
    /// here), background GC on, adaptive mode, six logs.
    Android,
}

impl F2fsOptions {
    /// Whether any option is set (they are errors with another file system).
    pub fn any_set(&self) -> bool {
        *self != F2fsOptions::default()
    }

    /// The options in force: the preset's, then the explicit ones; `discard` and `barrier`
    /// come from `[stack.fs]`'s shared fields.
    pub fn resolve(&self, discard: bool, barrier: bool) -> Result<F2fsConfig, String> {
        let mut config = F2fsConfig {
            discard,
            barrier,
            ..F2fsConfig::default()
        };
        if self.f2fs_preset == Some(F2fsPreset::Android) {
            config.fsync_mode = FsyncMode::Nobarrier;
            config.discard = true;
        }
        if let Some(mode) = self.fsync_mode {
            config.fsync_mode = mode;
        }
        if let Some(on) = self.background_gc {
            config.background_gc = on;
        }
        if let Some(on) = self.inline_dentry {
            config.inline_dentry = on;
        }
        if let Some(on) = self.inline_data {
            config.inline_data = on;
        }
        if let Some(mode) = self.mode {
            config.mode = mode;
        }
        if let Some(logs) = self.active_logs {
            if ![2, 4, 6].contains(&logs) {
                return Err(format!("`active_logs` {logs} must be 2, 4 or 6"));
            }
            config.active_logs = logs;
        }
        if let Some(interval) = self.checkpoint_interval {
            if interval == 0 {
                return Err("`checkpoint_interval` must be positive".into());
            }
            config.checkpoint_interval = interval;
        }
        Ok(config)
    }
}
