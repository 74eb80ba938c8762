//! A mounted ext4 file system (fs/ext4/super.c, 3.10): the mount options (`[stack.fs]`), the
//! journal, the per-inode state the operations need (`struct ext4_inode_info`: the fsync
//! transaction ids, `i_disksize`, delayed-allocation state), the helper that journals the
//! metadata blocks an operation dirtied, and the commit callback that frees blocks and issues
//! discards (`ext4_journal_commit_callback` -> `ext4_free_data_callback`).
//!
//! The operations themselves are in [`super::namei`] (create, mkdir, unlink, rename, evict),
//! [`super::inode`] (write_begin/write_end, timestamps, delayed allocation at writeback,
//! truncate, release) and [`super::fsync`] (`ext4_sync_file`).
//!
//! Simplifications: no `nojournal` mode; `data=journal` is refused (not modelled); quota, xattrs,
//! ACLs and inline data are absent; the orphan list is the superblock's head only (`s_last_orphan`
//! and the inode's `i_dtime` link: each add/delete dirties the superblock and the inode).

use super::alloc::{Ext4Alloc, MountOptions as PlacementOptions};
use super::layout::{JournalPlacement, MkfsOptions};
use super::{MetaKind, Touched};
use crate::dev::{IoFlags, IoOp};
use crate::fs::jbd2::{Handle, Journal, JournalConfig, Tid, JBD2_PID};
use crate::kernel::{Hz, KernelVersion};
use crate::mm::bio::{BioRequest, IoPurpose, LocalBoxFuture};
use crate::mm::{BlockSubmit, Ino, Issuer};
use crate::sim::sync::Completion;
use crate::sim::{Blocker, Sim, WaitReason};
use crate::units::{serde_units, Nanos};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

/// `data=` mount option.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DataMode {
    /// `data=ordered` (default): data reaches the disk before the commit that exposes it.
    #[default]
    Ordered,
    /// `data=writeback`: no ordering between data and metadata.
    Writeback,
    /// `data=journal`: file data journaled with the metadata (delayed allocation off, as
    /// `ext4_fill_super` clears `DELALLOC` for it): each written page's block joins the running
    /// transaction, the commit copies it into the log, the checkpoint writes it home; the page
    /// itself is never written back. fsync commits the transaction that holds the data.
    Journal,
}

/// The file system of `[stack.fs] type`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FsKind {
    /// ext4 with jbd2 ([`super`]).
    #[default]
    Ext4,
    /// [`crate::fs::simplefs`]: no journal, blocks allocated at write time.
    Simplefs,
    /// [`crate::fs::f2fs`]: the log-structured file system (its options below).
    F2fs,
}

/// Where the journal lives.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum JournalLocation {
    /// Inode 8 of the file system (mke2fs default).
    #[default]
    Internal,
    /// A device of its own (`mke2fs -J device=`; one of the JOJ fixes): `journal_device`.
    External,
}

/// ext4's mount options (`[stack.fs]` with `type = "ext4"`), defaults as Android mounted
/// /data on the papers' phones where they differ from the kernel's (noted per field).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Ext4Config {
    /// Which file system is mounted: `type = "ext4"` (default) or `"simplefs"` (no journal;
    /// the other options then do not apply).
    #[serde(rename = "type")]
    pub kind: FsKind,
    /// `data=`: default ordered.
    pub data: DataMode,
    /// Internal journal (default) or external (`mke2fs -J device=`): then the journal's own
    /// device is `journal_device`.
    pub journal: JournalLocation,
    /// `[stack.fs.journal_device]`: the external journal's device, configured like
    /// `[stack.device]` (profile, capacity, fua, ...); it gets a request queue and elevator of
    /// its own (`[stack.block]`'s settings).
    pub journal_device: Option<crate::dev::DeviceConfig>,
    /// Journal size; default mke2fs's table (`ext2fs_default_journal_size`: 128 MiB from 4 GiB).
    #[serde(default, with = "serde_units::option_size")]
    pub journal_size: Option<u64>,
    /// `commit=`: 5 s (`JBD2_DEFAULT_MAX_COMMIT_AGE`).
    #[serde(with = "serde_units::duration")]
    pub commit: Nanos,
    /// `discard`: freed extents are discarded when their transaction commits. Default on: the
    /// Galaxy S5 mounted /data with it (QASIO §4: "the jbd2 kernel thread issues discard
    /// commands"); the kernel's default is off.
    pub discard: bool,
    /// `barrier` (default on): the commit block is written `WRITE_FLUSH_FUA`.
    pub barrier: bool,
    /// `journal_async_commit` (default off).
    pub journal_async_commit: bool,
    /// `journal_ioprio`: best-effort level of the journal thread's I/O; default 3
    /// (`JBD2_DEFAULT_IOPRIO`... `EXT4_DEF_JOURNAL_IOPRIO` = `IOPRIO_PRIO_VALUE(BE, 3)`).
    pub journal_ioprio: u8,
    /// `delalloc` (default on).
    pub delalloc: bool,
    /// `auto_da_alloc` (default on): replacing a file by rename or truncate-to-zero starts
    /// writing its delayed-allocation data.
    pub auto_da_alloc: bool,
    /// Whether delayed-allocation writeback files the inode on the running transaction's
    /// ordered-data list when it allocates (`ext4_jbd2_file_inode`, which also sets the
    /// transaction's `t_need_data_flush`), so the commit waits for that writeback
    /// (`journal_finish_inode_data_buffers`) and, with an external journal, flushes the file
    /// system's device before its commit block. Not a mount option of ext4: a kernel-version
    /// switch. Unset (default), the version's behaviour
    /// ([`crate::kernel::KernelVersion::files_new_delalloc_blocks_as_ordered_data`]): off in
    /// Linux 3.9 to 4.6, the papers' 3.10 and 4.4 (f3b59291a69d "ext4: remove calls to
    /// ext4_jbd2_file_inode() from delalloc write path": `mpage_da_map_and_submit` files
    /// nothing), on from 4.7 (06bd3c36a733 "ext4: fix data exposure after a crash" files new
    /// blocks in `ext4_map_blocks`). `true` or `false` sets it whatever the version (`true` is
    /// also Linux up to 3.8). Read it with [`Ext4Config::ordered_delalloc`].
    pub ordered_delalloc: Option<bool>,
    /// `dioread_nolock` (`true`) or `dioread_lock` (`false`): buffered writeback allocates
    /// delayed blocks as unwritten extents, files nothing as ordered data for them, and
    /// converts them to written after the data I/O completes, in the `ext4-rsv-conversion`
    /// work ([`super::page_io`]): a commit no longer waits for that data. Unset (default), the
    /// version's behaviour ([`crate::kernel::KernelVersion::mounts_dioread_nolock_by_default`]):
    /// off up to 5.5, on from 5.6 (244adf6426ee "ext4: make dioread_nolock the default"). It
    /// has no effect with `data = "journal"` or `delalloc = false` (`ext4_should_dioread_nolock`;
    /// the `delalloc` condition is c8980e1980cc, 5.6). Read it with
    /// [`Ext4Config::dioread_nolock`].
    pub dioread_nolock: Option<bool>,
    /// F2FS's mount options (`type = "f2fs"` only): `fsync_mode`, `background_gc`,
    /// `inline_data`, `inline_dentry`, `mode`, `active_logs`, `checkpoint_interval`,
    /// `f2fs_preset` ([`crate::fs::f2fs::F2fsOptions`]). `discard` and `barrier` above apply
    /// to F2FS too.
    pub fsync_mode: Option<crate::fs::f2fs::FsyncMode>,
    pub background_gc: Option<bool>,
    pub inline_data: Option<bool>,
    pub inline_dentry: Option<bool>,
    pub mode: Option<crate::fs::f2fs::F2fsMode>,
    pub active_logs: Option<u8>,
    #[serde(default, with = "serde_units::option_duration")]
    pub checkpoint_interval: Option<Nanos>,
    pub f2fs_preset: Option<crate::fs::f2fs::F2fsPreset>,
    /// A deliberate bug for crash-point checking's mutation gate ([`crate::fs::mutant`]):
    /// set by tests only, never read from a scenario file. `None`: the model as it is.
    #[doc(hidden)]
    #[serde(skip)]
    pub mutant: Option<crate::fs::mutant::Mutant>,
}

impl Default for Ext4Config {
    fn default() -> Self {
        Ext4Config {
            kind: FsKind::Ext4,
            data: DataMode::Ordered,
            journal: JournalLocation::Internal,
            journal_device: None,
            journal_size: None,
            commit: crate::fs::jbd2::DEFAULT_COMMIT_INTERVAL_NS,
            discard: true,
            barrier: true,
            journal_async_commit: false,
            journal_ioprio: 3,
            delalloc: true,
            auto_da_alloc: true,
            ordered_delalloc: None,
            dioread_nolock: None,
            fsync_mode: None,
            background_gc: None,
            inline_data: None,
            inline_dentry: None,
            mode: None,
            active_logs: None,
            checkpoint_interval: None,
            f2fs_preset: None,
            mutant: None,
        }
    }
}

impl Ext4Config {
    /// `[stack.fs] type = "simplefs"` with nothing else set.
    pub fn simplefs() -> Self {
        Ext4Config {
            kind: FsKind::Simplefs,
            ..Ext4Config::default()
        }
    }

    /// Whether delayed-allocation writeback files new blocks as ordered data under Linux
    /// `version`: the `ordered_delalloc` override if set, else the version's behaviour
    /// ([`crate::kernel::KernelVersion::files_new_delalloc_blocks_as_ordered_data`]).
    pub fn ordered_delalloc(&self, version: KernelVersion) -> bool {
        self.ordered_delalloc
            .unwrap_or_else(|| version.files_new_delalloc_blocks_as_ordered_data())
    }

    /// Whether `dioread_nolock` is set under Linux `version`: the `dioread_nolock` override if
    /// set, else the version's default
    /// ([`crate::kernel::KernelVersion::mounts_dioread_nolock_by_default`]).
    pub fn dioread_nolock(&self, version: KernelVersion) -> bool {
        self.dioread_nolock
            .unwrap_or_else(|| version.mounts_dioread_nolock_by_default())
    }

    /// `ext4_should_dioread_nolock` for a regular file under Linux `version`: the option set,
    /// and neither `data=journal` nor `nodelalloc` (c8980e1980cc, "ext4: disable dioread_nolock
    /// whenever delayed allocation is disabled", 5.6; applied to every version here). Then
    /// writeback allocates unwritten extents.
    pub fn writes_back_into_unwritten_extents(&self, version: KernelVersion) -> bool {
        self.kind == FsKind::Ext4
            && self.dioread_nolock(version)
            && self.data != DataMode::Journal
            && self.delalloc
    }

    /// What ext4 under Linux `version` refuses at mount: `journal_async_commit` with
    /// `data=ordered` from 3.19 ([`KernelVersion::forbids_async_commit_with_ordered_data`]).
    pub fn check_kernel(&self, version: KernelVersion) -> Result<(), String> {
        if self.kind == FsKind::Ext4
            && self.journal_async_commit
            && self.data == DataMode::Ordered
            && version.forbids_async_commit_with_ordered_data()
        {
            return Err(format!(
                "`journal_async_commit` with `data` = \"ordered\": Linux {version} refuses the mount (\"can't mount with journal_async_commit in data=ordered mode\", since 3.19: d4f761074353); use [stack.kernel] version = \"3.10\", or `data` = \"writeback\" or \"journal\""
            ));
        }
        Ok(())
    }

    /// The F2FS options set in `[stack.fs]`.
    pub fn f2fs_options(&self) -> crate::fs::f2fs::F2fsOptions {
        crate::fs::f2fs::F2fsOptions {
            fsync_mode: self.fsync_mode,
            background_gc: self.background_gc,
            inline_data: self.inline_data,
            inline_dentry: self.inline_dentry,
            mode: self.mode,
            active_logs: self.active_logs,
            checkpoint_interval: self.checkpoint_interval,
            f2fs_preset: self.f2fs_preset,
        }
    }

    /// F2FS's options in force (`type = "f2fs"`).
    pub fn f2fs_config(&self) -> Result<crate::fs::f2fs::F2fsConfig, String> {
        self.f2fs_options().resolve(self.discard, self.barrier)
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.kind != FsKind::F2fs && self.f2fs_options().any_set() {
            return Err(
                "F2FS options (`fsync_mode`, `background_gc`, `inline_data`, `inline_dentry`, `mode`, `active_logs`, `checkpoint_interval`, `f2fs_preset`) need `type` = \"f2fs\""
                    .into(),
            );
        }
        if self.kind == FsKind::F2fs {
            self.f2fs_config()?;
            if self.journal == JournalLocation::External || self.journal_device.is_some() {
                return Err(
                    "F2FS has no journal: remove `journal` and [stack.fs.journal_device]".into(),
                );
            }
        }
        if self.journal_ioprio > 7 {
            return Err(format!(
                "`journal_ioprio` {} must be a best-effort level 0..=7",
                self.journal_ioprio
            ));
        }
        if self.commit == 0 {
            return Err("`commit` must be positive (e.g. \"5s\")".into());
        }
        if self.kind == FsKind::Ext4 {
            match (self.journal, &self.journal_device) {
                (JournalLocation::External, None) => {
                    return Err(
                        "`journal` = \"external\" needs the journal's device: add [stack.fs.journal_device] with its `profile` (e.g. profile = \"emmc-5.0\", capacity = \"512MiB\")"
                            .into(),
                    )
                }
                (JournalLocation::Internal, Some(_)) => {
                    return Err(
                        "`journal_device` is the device of an external journal: set `journal` = \"external\" or remove [stack.fs.journal_device]"
                            .into(),
                    )
                }
                (JournalLocation::External, Some(device)) => {
                    let profile = device
                        .resolve()
                        .map_err(|e| format!("{e} (the external journal's device)"))?;
                    // jbd2 needs JBD2_MIN_JOURNAL_BLOCKS blocks and its superblock.
                    let min = crate::fs::jbd2::MIN_JOURNAL_BLOCKS * crate::units::PAGE_SIZE;
                    if profile.capacity < min {
                        return Err(format!(
                            "`journal_device` of {} bytes is smaller than jbd2's minimum journal ({min} bytes, 1024 blocks)",
                            profile.capacity
                        ));
                    }
                }
                (JournalLocation::Internal, None) => {}
            }
        }
        Ok(())
    }
}

/// `struct ext4_inode_info`, the part the operations need.
#[derive(Debug, Clone, Default)]
pub(crate) struct InodeInfo {
    /// `i_sync_tid`: the last transaction that changed the inode.
    pub sync_tid: Tid,
    /// `i_datasync_tid`: the last transaction that changed what `fdatasync` must persist
    /// (size on disk, block mapping).
    pub datasync_tid: Tid,
    /// `i_disksize`: the size the on-disk inode says.
    pub disksize: u64,
    /// `i_size` as the VFS last told us.
    pub size: u64,
    /// Pages written but not yet allocated (`i_reserved_data_blocks`).
    pub delalloc_pages: u64,
    /// The jiffy of the last timestamp update (`current_fs_time` is tick-grained).
    pub mtime_jiffy: Option<u64>,
    /// On the orphan list.
    pub orphan: bool,
    /// `EXT4_STATE_DA_ALLOC_CLOSE`: truncated to zero; flush delayed data on close.
    pub da_alloc_close: bool,
    /// Open for writing (`i_writecount`).
    pub writers: u32,
}

/// Counters of the file system layer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Ext4Stats {
    pub creates: u64,
    pub unlinks: u64,
    pub renames: u64,
    pub truncates: u64,
    pub evictions: u64,
    /// Writeback allocations (`ext4_map_blocks` with create) and blocks they allocated.
    pub allocations: u64,
    pub allocated_blocks: u64,
    pub timestamp_updates: u64,
    pub fsyncs_committed: u64,
    pub fsyncs_flush_only: u64,
    /// Directory fsyncs (`ext4_force_commit`) that waited for a commit (also counted in
    /// `fsyncs_committed`), and those that found the journal idle (3.11+: nothing written).
    pub dir_fsyncs_committed: u64,
    pub dir_fsyncs_idle: u64,
    pub discards: u64,
    pub discarded_blocks: u64,
    pub orphan_adds: u64,
    /// `data=journal`: pages whose block was journaled.
    pub journaled_data_pages: u64,
    /// MobiFS VCTs begun on the journal ([`super::vct`]).
    pub vct_commits: u64,
    /// VCTs whose handle had to restart in a second transaction (not atomic).
    pub vct_split: u64,
    /// `dioread_nolock`: completed writeback bios whose unwritten extents the
    /// `ext4-rsv-conversion` work converted, and the blocks they wrote.
    pub unwritten_conversions: u64,
    pub converted_blocks: u64,
}

/// A mounted ext4.
pub struct Ext4 {
    pub config: Ext4Config,
    pub(crate) alloc: RefCell<Ext4Alloc>,
    pub journal: Rc<Journal>,
    pub(crate) inodes: RefCell<BTreeMap<Ino, InodeInfo>>,
    /// The file system's block device (discards, cache flushes).
    pub(crate) bdev: Rc<dyn BlockSubmit>,
    pub(crate) hz: Hz,
    /// The Linux version whose behaviour the file system and its journal follow where versions
    /// differ (`[stack.kernel] version`; default 3.10): [`Ext4::set_kernel_version`].
    pub(crate) kernel: std::cell::Cell<crate::kernel::KernelVersion>,
    pub(crate) stats: RefCell<Ext4Stats>,
    /// Blocks reserved for delayed allocation, over every inode (`s_dirtyclusters_counter`).
    pub(crate) reserved_blocks: std::cell::Cell<u64>,
    /// What each metadata block journaled so far holds (the buffer's role), for the account by
    /// purpose: recorded before the buffer is first read, kept while the block is metadata
    /// (a freed directory or extent block taken again for metadata gets its new kind).
    pub(crate) meta_kinds: RefCell<BTreeMap<u64, MetaKind>>,
    /// Invariant d's record of blocks freed by transactions not yet durable ([`super::check`]).
    pub(crate) freed_check: RefCell<super::check::FreedBlocks>,
    /// The page cache reports when ordered data reaches the device (mounted over it by
    /// [`super::glue::mount`]), so invariant c can follow each allocated page.
    pub(crate) ordered_data_tracked: std::cell::Cell<bool>,
    /// Crash-point checking's recorder ([`Ext4::record_crash`]).
    pub(crate) crash: RefCell<Option<Rc<crate::mm::crashlog::CrashLog>>>,
    /// The last (inode, inode-table block) [`Ext4::inode_block`] answered (the layout never
    /// changes; inode 0 does not exist).
    last_inode_block: std::cell::Cell<(Ino, u64)>,
    /// Completed writeback into unwritten extents awaiting conversion ([`super::page_io`]).
    pub(crate) conversions: RefCell<std::collections::VecDeque<super::page_io::PendingConversion>>,
    /// Wakes the `ext4-rsv-conversion` worker.
    pub(crate) conversion_wake: crate::sim::sync::WaitQueue,
    /// The worker's task, spawned at the first conversion.
    pub(crate) conversion_worker: std::cell::Cell<Option<crate::sim::TaskId>>,
    /// `s_discard_list`: freed extents waiting for the discard work item (5.15 on,
    /// [`Ext4::queue_discard_work`]).
    discard_list: RefCell<std::collections::VecDeque<(u64, u64)>>,
    /// `s_discard_work` is queued or running.
    discard_work_queued: std::cell::Cell<bool>,
}

/// The discard work item's worker (`ext4_discard_work` on `system_unbound_wq`, 5.15 on): pid
/// and name in bios and traces.
pub const DISCARD_WORK_PID: u32 = 105;
pub const DISCARD_WORK_COMM: &str = "kworker/u:ext4-discard";

/// Largest discard bio: `blkdev_issue_discard` splits at the queue's `max_discard_sectors`
/// ([`crate::block::request::MAX_DISCARD_SECTORS`], 128 MiB).
pub const DISCARD_MAX_BLOCKS: u64 = crate::block::request::MAX_DISCARD_SECTORS as u64 / 8;

/// `s_max_writeback_mb_bump` = 128 MiB in 4 KiB pages (fs/ext4/super.c of 3.10, the
/// `max_writeback_mb_bump` sysfs default; removed with the writeback rewrite of 3.11): the most
/// `ext4_da_writepages` raises a cyclic writeback's `nr_to_write` to.
pub const MAX_WRITEBACK_MB_BUMP_PAGES: u64 = 128 * 1024 * 1024 / crate::units::PAGE_SIZE;

/// Credits asked for when a handle must be extended or restarted mid-operation (a truncate of a
/// large file frees blocks in many groups).
pub const RESTART_CREDITS: u64 = 64;

/// Handle credits (fs/ext4/ext4_jbd2.h, 3.10, with extents and no quota):
/// `EXT4_SINGLEDATA_TRANS_BLOCKS` = 20 with extents.
pub const SINGLEDATA_TRANS_BLOCKS: u64 = 20;
/// `EXT4_XATTR_TRANS_BLOCKS` = 6.
pub const XATTR_TRANS_BLOCKS: u64 = 6;
/// `EXT4_DATA_TRANS_BLOCKS` = single data + xattr - 2 (+ quota, none).
pub const DATA_TRANS_BLOCKS: u64 = SINGLEDATA_TRANS_BLOCKS + XATTR_TRANS_BLOCKS - 2;
/// `EXT4_INDEX_EXTRA_TRANS_BLOCKS` = 8.
pub const INDEX_EXTRA_TRANS_BLOCKS: u64 = 8;

impl Ext4 {
    /// `mke2fs -t ext4` over `size_bytes` then mount: the placement state, the journal (its
    /// blocks inside the file system, or on `journal_device` when external).
    #[allow(clippy::too_many_arguments)]
    pub fn mount(
        sim: &Sim,
        config: Ext4Config,
        size_bytes: u64,
        hz: Hz,
        buffers: Rc<dyn crate::fs::jbd2::MetaBuffers>,
        data: Rc<dyn crate::fs::jbd2::OrderedData>,
        bdev: Rc<dyn BlockSubmit>,
        journal_device: Option<(Rc<dyn BlockSubmit>, u64)>,
    ) -> Result<Rc<Ext4>, String> {
        config.validate()?;
        let placement = match (config.journal, &journal_device) {
            (JournalLocation::Internal, _) => JournalPlacement::Internal {
                blocks: config.journal_size.map(|b| b / crate::units::PAGE_SIZE),
            },
            (JournalLocation::External, Some(_)) => JournalPlacement::External,
            (JournalLocation::External, None) => {
                return Err(
                    "[stack.fs] journal = \"external\" needs a journal device ([stack.fs] journal_device)"
                        .into(),
                )
            }
        };
        let alloc = Ext4Alloc::mkfs(
            size_bytes,
            &MkfsOptions { journal: placement },
            PlacementOptions {
                // ext4_fill_super: data=journal clears DELALLOC.
                delalloc: config.delalloc && config.data != DataMode::Journal,
                dir_index: true,
            },
        )
        .map_err(|e| format!("mkfs.ext4: {e}"))?;
        let (log_device, journal_config) = match journal_device {
            None => {
                let runs = alloc.journal().to_vec();
                let blocks: u64 = runs.iter().map(|&(_, len)| len).sum();
                (
                    bdev.clone(),
                    JournalConfig {
                        blocks,
                        first_block: runs.first().map_or(0, |&(start, _)| start),
                        extents: runs,
                        commit_interval: config.commit,
                        barrier: config.barrier,
                        async_commit: config.journal_async_commit,
                        mutant: config.mutant,
                    },
                )
            }
            Some((device, device_bytes)) => {
                let default_blocks =
                    super::layout::default_journal_blocks(size_bytes / crate::units::PAGE_SIZE)
                        .unwrap_or(32_768);
                let blocks = config
                    .journal_size
                    .map_or(default_blocks, |b| b / crate::units::PAGE_SIZE)
                    .min(device_bytes / crate::units::PAGE_SIZE);
                (
                    device,
                    JournalConfig {
                        blocks,
                        first_block: 0,
                        extents: Vec::new(),
                        commit_interval: config.commit,
                        barrier: config.barrier,
                        async_commit: config.journal_async_commit,
                        mutant: config.mutant,
                    },
                )
            }
        };
        journal_config.validate()?;
        let external = config.journal == JournalLocation::External;
        let journal = Journal::load(sim, journal_config, buffers, data, log_device);
        if external {
            // j_fs_dev != j_dev: commits flush the file system's device before their commit
            // block when they carry ordered data.
            journal.set_fs_device(bdev.clone());
        }
        let ext4 = Rc::new(Ext4 {
            config,
            alloc: RefCell::new(alloc),
            journal,
            inodes: RefCell::new(BTreeMap::new()),
            bdev,
            hz,
            kernel: std::cell::Cell::new(crate::kernel::KernelVersion::default()),
            stats: RefCell::new(Ext4Stats::default()),
            reserved_blocks: std::cell::Cell::new(0),
            meta_kinds: RefCell::new(BTreeMap::new()),
            freed_check: RefCell::new(Default::default()),
            ordered_data_tracked: std::cell::Cell::new(false),
            crash: RefCell::new(None),
            last_inode_block: std::cell::Cell::new((0, 0)),
            conversions: RefCell::new(std::collections::VecDeque::new()),
            conversion_wake: crate::sim::sync::WaitQueue::new(),
            conversion_worker: std::cell::Cell::new(None),
            discard_list: RefCell::new(std::collections::VecDeque::new()),
            discard_work_queued: std::cell::Cell::new(false),
        });
        let checking = ext4.journal.checks_enabled();
        ext4.alloc.borrow_mut().record_events(checking);
        let weak = Rc::downgrade(&ext4);
        ext4.journal
            .set_commit_callback(Box::new(move |sim: &Sim, tid: Tid| {
                let ext4 = weak
                    .upgrade()
                    .expect("the file system outlives its journal");
                let sim = sim.clone();
                Box::pin(async move { ext4.free_data_callback(&sim, tid).await })
                    as LocalBoxFuture<'static, ()>
            }));
        Ok(ext4)
    }

    pub fn stats(&self) -> Ext4Stats {
        *self.stats.borrow()
    }

    /// The inode-table block holding `ino` (`__ext4_get_inode_loc`'s block), the last answer
    /// remembered: an appending write asks once per page.
    pub(crate) fn inode_block(&self, ino: Ino) -> u64 {
        let (last, block) = self.last_inode_block.get();
        if last == ino && ino != 0 {
            return block;
        }
        let block = self.alloc.borrow().inode_block(ino);
        self.last_inode_block.set((ino, block));
        block
    }

    /// The placement state (read-only), for tests and reports.
    pub fn placement(&self) -> std::cell::Ref<'_, Ext4Alloc> {
        self.alloc.borrow()
    }

    /// The issuer of the journal thread's I/O (discards run in the commit callback).
    fn jbd2_issuer(&self, sim: &Sim) -> Issuer {
        Issuer {
            task: sim.current_task(),
            pid: JBD2_PID,
            uid: 0,
            foreground: false,
        }
    }

    /// `ext4_journal_start`.
    pub(crate) async fn start(&self, sim: &Sim, credits: u64) -> Handle {
        self.journal.start(sim, credits).await
    }

    /// Journals every block of `touched` in `handle` (`ext4_journal_get_write_access` +
    /// `ext4_handle_dirty_metadata`), in the order they were touched.
    /// A handle that runs out of credits is extended, or restarted in a new transaction when
    /// its own is full or locked (`ext4_journal_extend` / `ext4_journal_restart`, as truncate
    /// and eviction of large files do).
    pub(crate) async fn journal_touched(
        &self,
        sim: &Sim,
        handle: Handle,
        touched: &Touched,
    ) -> Handle {
        self.journal_blocks(sim, handle, &touched.blocks).await
    }

    /// [`Ext4::journal_touched`] over `blocks` (distinct, in the order they were touched).
    async fn journal_blocks(
        &self,
        sim: &Sim,
        mut handle: Handle,
        blocks: &[(u64, MetaKind)],
    ) -> Handle {
        for &(block, kind) in blocks {
            self.record_meta_kind(block, kind);
        }
        for &(block, _kind) in blocks {
            let already = self.journal.buffer_in(&handle, block);
            if handle.credits == 0 && !already {
                let wanted = (blocks.len() as u64).clamp(1, RESTART_CREDITS);
                if !self.journal.extend(&mut handle, wanted) {
                    handle = self.journal.restart(sim, handle, wanted).await;
                }
            }
            self.journal.get_write_access(sim, &handle, block).await;
            self.journal.dirty_metadata(&mut handle, block);
        }
        handle
    }

    /// Records what metadata block `block` holds (the purpose of its I/O).
    pub(crate) fn record_meta_kind(&self, block: u64, kind: MetaKind) {
        let mut kinds = self.meta_kinds.borrow_mut();
        // A block journaled again keeps its kind: one lookup, no rewrite.
        if kinds.get(&block) != Some(&kind) {
            kinds.insert(block, kind);
        }
    }

    /// `ext4_mark_inode_dirty` in `handle`: journals the inode's table block and records the
    /// transaction in `i_sync_tid` (and `i_datasync_tid` when `datasync`).
    pub(crate) async fn mark_inode_dirty(
        &self,
        sim: &Sim,
        handle: Handle,
        ino: Ino,
        datasync: bool,
    ) -> Handle {
        let block = self.alloc.borrow().inode_block(ino);
        let handle = self
            .journal_blocks(sim, handle, &[(block, MetaKind::InodeTable)])
            .await;
        self.update_fsync_trans(handle.tid, ino, datasync);
        handle
    }

    /// `ext4_update_inode_fsync_trans`.
    pub(crate) fn update_fsync_trans(&self, tid: Tid, ino: Ino, datasync: bool) {
        let mut inodes = self.inodes.borrow_mut();
        let info = inodes.entry(ino).or_default();
        info.sync_tid = info.sync_tid.max(tid);
        if datasync {
            info.datasync_tid = info.datasync_tid.max(tid);
        }
    }

    /// `ext4_orphan_add` / `ext4_orphan_del`: the superblock's orphan head and the inode.
    pub(crate) async fn orphan(&self, sim: &Sim, handle: Handle, ino: Ino, add: bool) -> Handle {
        let (sb, inode_block) = {
            let alloc = self.alloc.borrow();
            (alloc.layout().superblock_block(), alloc.inode_block(ino))
        };
        let mut touched = Touched::new();
        touched.add(sb, MetaKind::Superblock);
        touched.add(inode_block, MetaKind::InodeTable);
        let handle = self.journal_touched(sim, handle, &touched).await;
        self.update_fsync_trans(handle.tid, ino, false);
        let mut inodes = self.inodes.borrow_mut();
        inodes.entry(ino).or_default().orphan = add;
        if add {
            self.stats.borrow_mut().orphan_adds += 1;
        }
        handle
    }

    /// The purpose of I/O on metadata block `block` (the kind it was journaled as).
    pub fn meta_purpose(&self, block: u64) -> IoPurpose {
        self.meta_kinds
            .borrow()
            .get(&block)
            .map_or(IoPurpose::Metadata, |&kind| kind.purpose())
    }

    /// The blocks transaction `tid` freed become free once it has committed, and with `-o
    /// discard` they are discarded, in the way of the kernel's era:
    /// - up to 4.13 (`ext4_free_data_callback`, from the commit callback on the journal
    ///   thread): one `sb_issue_discard` per freed extent, each waited for before the next;
    /// - 4.14 to 5.14 (`ext4_process_freed_data`, a015434480dc "ext4: send parallel discards
    ///   on commit completions"): every extent's discard chained (`__blkdev_issue_discard`),
    ///   submitted together and waited for once (`submit_bio_wait`), still on the journal
    ///   thread;
    /// - from 5.15 (55cdd0af2bc5 "ext4: get discard out of jbd2 commit kthread contex"): the
    ///   extents go on `s_discard_list` and `s_discard_work` discards them in a worker
    ///   (`ext4_discard_work` -> `ext4_try_to_trim_range`, one extent after another); the
    ///   commit waits for none of it.
    ///
    /// While the journal thread waits, an fsync waiting for the commit waits with it (QASIO's
    /// D_discard, which a QASIO boost may shorten). Simplification: the blocks return to the
    /// buddy before their discard is issued (3.10 frees them after it; from 5.15 the trim
    /// holds them busy while it runs), so an allocation may take a block being discarded.
    pub(crate) async fn free_data_callback(self: &Rc<Self>, sim: &Sim, tid: Tid) {
        let freed = self.alloc.borrow_mut().release_committed(tid);
        if !self.config.discard || freed.is_empty() {
            return;
        }
        let version = self.kernel.get();
        if version.discards_freed_blocks_in_a_work_item() {
            self.queue_discard_work(sim, freed);
            return;
        }
        let issuer = self.jbd2_issuer(sim);
        if version.sends_parallel_discards_at_commit() {
            self.discard_and_wait(sim, issuer, &freed, true).await;
        } else {
            for extent in freed {
                self.discard_and_wait(sim, issuer, &[extent], true).await;
            }
        }
    }

    /// `ext4_process_freed_data` with `-o discard` from 5.15: the extents join
    /// `s_discard_list`, and `s_discard_work` is queued unless it is already (a running
    /// worker takes what is added while it runs).
    fn queue_discard_work(self: &Rc<Self>, sim: &Sim, freed: Vec<(u64, u64)>) {
        self.discard_list.borrow_mut().extend(freed);
        if self.discard_work_queued.replace(true) {
            return;
        }
        let (ext4, s) = (self.clone(), sim.clone());
        sim.spawn_daemon(
            DISCARD_WORK_COMM,
            async move { ext4.discard_work(&s).await },
        );
    }

    /// `ext4_discard_work`: each queued extent discarded and waited for in turn.
    async fn discard_work(&self, sim: &Sim) {
        let issuer = Issuer {
            task: sim.current_task(),
            pid: DISCARD_WORK_PID,
            uid: 0,
            foreground: false,
        };
        loop {
            let next = self.discard_list.borrow_mut().pop_front();
            let Some(extent) = next else { break };
            self.discard_and_wait(sim, issuer, &[extent], false).await;
        }
        self.discard_work_queued.set(false);
    }

    /// Discards `extents` from `issuer` and waits until every bio has completed
    /// (`blkdev_issue_discard`, block/blk-lib.c: each extent's bios cut at the queue's discard
    /// limit, all submitted, then `wait_for_completion_io` / `submit_bio_wait`). The bios carry
    /// no `REQ_SYNC`, so CFQ queues them as asynchronous I/O. `journal_waits`: the journal
    /// thread is the one waiting (QASIO's D_discard: the bios are marked for its boost).
    async fn discard_and_wait(
        &self,
        sim: &Sim,
        issuer: Issuer,
        extents: &[(u64, u64)],
        journal_waits: bool,
    ) {
        let pieces: Vec<(u64, u64)> = extents
            .iter()
            .flat_map(|&(start, len)| {
                (0..len)
                    .step_by(DISCARD_MAX_BLOCKS as usize)
                    .map(move |at| (start + at, (len - at).min(DISCARD_MAX_BLOCKS)))
            })
            .collect();
        if pieces.is_empty() {
            return;
        }
        let outstanding = Rc::new(std::cell::Cell::new(pieces.len()));
        let done: Completion<()> = Completion::new();
        let mut submitted = Vec::with_capacity(pieces.len());
        for (start, len) in pieces {
            {
                let mut stats = self.stats.borrow_mut();
                stats.discards += 1;
                stats.discarded_blocks += len;
            }
            let bio = BioRequest {
                issued_async: true,
                ..BioRequest::for_pages(
                    IoOp::Discard,
                    start,
                    len as u32,
                    IoFlags::default(),
                    issuer,
                    None,
                    IoPurpose::Discard,
                )
            };
            let (signal, left) = (done.clone(), outstanding.clone());
            let id = self
                .bdev
                .submit_bio(
                    sim,
                    bio,
                    Box::new(move |s, _| {
                        left.set(left.get() - 1);
                        if left.get() == 0 {
                            signal.complete(s, ());
                        }
                    }),
                )
                .await;
            submitted.push(id);
        }
        // QASIO's D_discard: the journal thread blocks on its asynchronous discards.
        if journal_waits && outstanding.get() > 0 {
            for &id in &submitted {
                self.bdev
                    .boost(sim, id, crate::block::qasio::Dependency::Discard);
            }
        }
        let last = submitted.last().copied().unwrap_or(0);
        done.wait(sim, WaitReason::Discard, Blocker::Request(last))
            .await;
    }

    /// `blkdev_issue_flush` from `issuer`, waited for.
    pub(crate) async fn issue_flush(&self, sim: &Sim, issuer: Issuer) {
        crate::mm::bio::blkdev_issue_flush(&*self.bdev, sim, issuer).await;
    }
}
