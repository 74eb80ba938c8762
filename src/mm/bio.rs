//! The page cache's boundary with the block layer: [`BlockSubmit`] takes a bio and calls its
//! `bi_end_io` at completion, like `submit_bio`. [`QueueSubmit`] implements it over the block
//! layer's request queue; every page-cache I/O goes through it (there is no path around the
//! block layer, so what tests measure is what scenarios run).

use crate::dev::{IoFlags, IoOp};
use crate::sim::{Blocker, Sim, TaskId, WaitReason, WakeToken};
use crate::units::Nanos;
use serde::Serialize;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::{Rc, Weak};

/// Pages a bio carries: `count` consecutive pages of one inode from `index` (the page cache only
/// builds bios over consecutive pages with consecutive blocks, `mpage_writepages`-style).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageSpan {
    pub ino: u64,
    pub index: u64,
    pub count: u32,
}

/// What a bio carries, for the block I/O account by purpose (issue 10): the file system's
/// role for the block, set where the bio is built. Linux has no such field (the closest is
/// `REQ_META`, which 3.10 sets only on ext4's metadata reads); it is the simulator's label, read
/// by [`IoAccount`] and never by the scheduling path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum IoPurpose {
    /// File data: buffered reads, readahead, writeback, `O_DIRECT`, ordered-mode data.
    Data,
    /// The file system's superblock (ext4's orphan list head).
    Superblock,
    /// A block of ext4's group descriptor table.
    GroupDesc,
    /// A block bitmap.
    BlockBitmap,
    /// An inode bitmap.
    InodeBitmap,
    /// An inode-table block (ext4), or simplefs's inode write.
    Inode,
    /// A directory block (entries or an htree index).
    Directory,
    /// An extent-tree block (leaf or index).
    Extent,
    /// Metadata of a kind the page cache could not tell (no classifier installed).
    Metadata,
    /// A jbd2 descriptor block (`jbd2_journal_get_descriptor_buffer`).
    JournalDescriptor,
    /// A metadata buffer's copy in the log (`jbd2_journal_write_metadata_buffer`).
    JournalMetadata,
    /// The commit block (`journal_submit_commit_record`).
    JournalCommit,
    /// The journal superblock (`jbd2_journal_update_sb_log_tail`).
    JournalSuperblock,
    /// A metadata buffer written home by jbd2's checkpoint (`jbd2_log_do_checkpoint`), whatever
    /// its kind.
    Checkpoint,
    /// An F2FS node block (inode, direct or indirect node), written out of place.
    Node,
    /// A block of F2FS's node address table (NAT).
    Nat,
    /// A block of F2FS's segment information table (SIT).
    Sit,
    /// An F2FS segment summary block (SSA, or the checkpoint pack's compacted summaries).
    Summary,
    /// A block of an F2FS checkpoint pack (`do_checkpoint`: the two CP blocks and orphans).
    CpPack,
    /// A block moved by F2FS's garbage collection (`move_data_block` / `f2fs_move_node_page`,
    /// read and rewrite).
    GcMove,
    /// A discard (`blkdev_issue_discard`).
    Discard,
    /// An empty cache flush (`blkdev_issue_flush`).
    Flush,
}

impl IoPurpose {
    /// Every purpose, in table order.
    pub const ALL: [IoPurpose; 22] = [
        IoPurpose::Data,
        IoPurpose::Superblock,
        IoPurpose::GroupDesc,
        IoPurpose::BlockBitmap,
        IoPurpose::InodeBitmap,
        IoPurpose::Inode,
        IoPurpose::Directory,
        IoPurpose::Extent,
        IoPurpose::Metadata,
        IoPurpose::JournalDescriptor,
        IoPurpose::JournalMetadata,
        IoPurpose::JournalCommit,
        IoPurpose::JournalSuperblock,
        IoPurpose::Checkpoint,
        IoPurpose::Node,
        IoPurpose::Nat,
        IoPurpose::Sit,
        IoPurpose::Summary,
        IoPurpose::CpPack,
        IoPurpose::GcMove,
        IoPurpose::Discard,
        IoPurpose::Flush,
    ];

    /// The name in results and tables.
    pub fn name(self) -> &'static str {
        match self {
            IoPurpose::Data => "data",
            IoPurpose::Superblock => "superblock",
            IoPurpose::GroupDesc => "group-desc",
            IoPurpose::BlockBitmap => "block-bitmap",
            IoPurpose::InodeBitmap => "inode-bitmap",
            IoPurpose::Inode => "inode",
            IoPurpose::Directory => "directory",
            IoPurpose::Extent => "extent",
            IoPurpose::Metadata => "metadata",
            IoPurpose::JournalDescriptor => "journal-descriptor",
            IoPurpose::JournalMetadata => "journal-metadata",
            IoPurpose::JournalCommit => "journal-commit",
            IoPurpose::JournalSuperblock => "journal-superblock",
            IoPurpose::Checkpoint => "checkpoint",
            IoPurpose::Node => "node",
            IoPurpose::Nat => "nat",
            IoPurpose::Sit => "sit",
            IoPurpose::Summary => "ssa",
            IoPurpose::CpPack => "cp-pack",
            IoPurpose::GcMove => "gc-move",
            IoPurpose::Discard => "discard",
            IoPurpose::Flush => "flush",
        }
    }

    /// File-system metadata in place (not data, not the journal, not a discard or flush).
    pub fn is_metadata(self) -> bool {
        matches!(
            self,
            IoPurpose::Superblock
                | IoPurpose::GroupDesc
                | IoPurpose::BlockBitmap
                | IoPurpose::InodeBitmap
                | IoPurpose::Inode
                | IoPurpose::Directory
                | IoPurpose::Extent
                | IoPurpose::Metadata
                | IoPurpose::Checkpoint
                | IoPurpose::Node
                | IoPurpose::Nat
                | IoPurpose::Sit
                | IoPurpose::Summary
                | IoPurpose::CpPack
                | IoPurpose::GcMove
        )
    }

    /// A block of the journal.
    pub fn is_journal(self) -> bool {
        matches!(
            self,
            IoPurpose::JournalDescriptor
                | IoPurpose::JournalMetadata
                | IoPurpose::JournalCommit
                | IoPurpose::JournalSuperblock
        )
    }
}

/// A bio as the page cache builds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BioRequest {
    pub op: IoOp,
    pub sector: u64,
    pub nr_sectors: u32,
    pub flags: IoFlags,
    /// Written back on behalf of others (the flusher, kswapd): QASIO's asynchronous I/O.
    pub issued_async: bool,
    /// Whether the issuing task's app is in the foreground.
    pub foreground: bool,
    /// The submitting task (`current`), if submitted from a task.
    pub task: Option<TaskId>,
    /// Its process id.
    pub pid: u32,
    /// UID of the app that owns the first page (FastTrack's owner of the I/O, `Page::uid`).
    pub uid: u32,
    /// The pages, for blktrace-like attribution; `None` for metadata and flushes.
    pub pages: Option<PageSpan>,
    /// What it carries (the account by purpose).
    pub purpose: IoPurpose,
}

impl BioRequest {
    /// A bio over `count` pages starting at page-sized `block`, submitted by `issuer` itself (not
    /// on behalf of others), carrying `pages` when they belong to the page cache, for `purpose`.
    pub fn for_pages(
        op: IoOp,
        block: u64,
        count: u32,
        flags: IoFlags,
        issuer: super::Issuer,
        pages: Option<PageSpan>,
        purpose: IoPurpose,
    ) -> BioRequest {
        BioRequest {
            op,
            sector: block * super::writeback::SECTORS_PER_PAGE,
            nr_sectors: count * super::writeback::SECTORS_PER_PAGE as u32,
            flags,
            issued_async: false,
            foreground: issuer.foreground,
            task: issuer.task,
            pid: issuer.pid,
            uid: issuer.uid,
            pages,
            purpose,
        }
    }
}

/// Who a bio is charged to in the account by purpose: the app (its uid) and the system call
/// that caused it. A task in a system call is its own cause ([`IoAccount::enter_syscall`]); a
/// kernel thread working for a waiter takes the waiter's (jbd2 commits a transaction for the
/// `fsync` that asked for it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoCause {
    pub uid: u32,
    pub syscall: &'static str,
}

/// Counts of one (app, cause, purpose) cell of the account.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct IoCount {
    /// Bios submitted (before merging).
    pub bios: u64,
    pub reads: u64,
    pub read_bytes: u64,
    pub writes: u64,
    pub write_bytes: u64,
    pub discards: u64,
    pub discard_bytes: u64,
    /// Cache flushes the device is asked for: empty flush bios, writes with `REQ_PREFLUSH`, and
    /// the flush after a `REQ_FUA` write where the device does not support FUA.
    pub flushes: u64,
    /// Writes the device receives with FUA.
    pub fua: u64,
}

impl IoCount {
    pub fn add(&mut self, other: &IoCount) {
        self.bios += other.bios;
        self.reads += other.reads;
        self.read_bytes += other.read_bytes;
        self.writes += other.writes;
        self.write_bytes += other.write_bytes;
        self.discards += other.discards;
        self.discard_bytes += other.discard_bytes;
        self.flushes += other.flushes;
        self.fua += other.fua;
    }

    fn note(&mut self, bio: &BioRequest, device_fua: bool) {
        let bytes = u64::from(bio.nr_sectors) * crate::units::SECTOR_SIZE;
        self.bios += 1;
        match bio.op {
            IoOp::Read => {
                self.reads += 1;
                self.read_bytes += bytes;
            }
            IoOp::Write => {
                self.writes += 1;
                self.write_bytes += bytes;
            }
            IoOp::Discard => {
                self.discards += 1;
                self.discard_bytes += bytes;
            }
            IoOp::Flush => self.flushes += 1,
        }
        if bio.op != IoOp::Flush && bio.flags.preflush {
            self.flushes += 1;
        }
        if bio.flags.fua {
            if device_fua {
                self.fua += 1;
            } else {
                // The flush machinery's post-flush (`blk_flush_policy`).
                self.flushes += 1;
            }
        }
    }
}

/// What a bio is charged to when no cause is registered for its task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Charge {
    Syscall(&'static str),
    /// A task outside any system call (a kernel thread: the flusher, kswapd, jbd2 on its own
    /// timer), by pid.
    Thread(u32),
}

/// One row of the account.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IoAccountRow {
    pub uid: u32,
    /// The system call, or `[comm]` of the kernel thread that issued the bio on its own.
    pub cause: String,
    pub purpose: IoPurpose,
    /// The device the bios went to, when it is not the file system's own (an external
    /// journal's device, e.g. `mmcblk1`).
    pub device: Option<String>,
    pub count: IoCount,
}

impl IoAccountRow {
    /// The row's purpose as the results name it: `journal-commit`, or on another device than
    /// the file system's `journal-commit@mmcblk1`.
    pub fn purpose_key(&self) -> String {
        purpose_key(self.purpose, self.device.as_deref())
    }
}

/// `journal-commit`, or on a device other than the file system's `journal-commit@mmcblk1`.
fn purpose_key(purpose: IoPurpose, device: Option<&str>) -> String {
    match device {
        None => purpose.name().to_string(),
        Some(device) => format!("{}@{device}", purpose.name()),
    }
}

/// The block I/O account by purpose (issue 10): every bio the page cache and the file system
/// submit, counted at `submit_bio` by (app uid, cause, purpose). Also the registry of each
/// task's current system call (`current`'s syscall, as the VFS entered it).
#[derive(Default)]
pub struct IoAccount {
    causes: RefCell<BTreeMap<TaskId, IoCause>>,
    comms: RefCell<BTreeMap<u32, String>>,
    /// By uid, charge, purpose and device (0: the file system's, else an index into
    /// `devices` + 1).
    counts: RefCell<BTreeMap<(u32, Charge, IoPurpose, u8), IoCount>>,
    /// Names of the other devices that count into this account (an external journal's).
    devices: RefCell<Vec<String>>,
    /// What a user-space library says a file is (SQLite: `database`, `journal`, `wal`), by
    /// inode: data bios of labelled files are also counted by (uid, label).
    labels: RefCell<BTreeMap<u64, &'static str>>,
    files: RefCell<BTreeMap<(u32, &'static str), IoCount>>,
}

/// One app's counts so far, for differences over an interval (a SQLite transaction).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccountSnapshot {
    /// By purpose key ([`IoAccountRow::purpose_key`]), every cause summed.
    pub by_purpose: BTreeMap<String, IoCount>,
    /// Data of labelled files, by label.
    pub by_file: BTreeMap<&'static str, IoCount>,
}

impl IoCount {
    /// `self - earlier`, field by field (counts only grow).
    pub fn since(&self, earlier: &IoCount) -> IoCount {
        IoCount {
            bios: self.bios - earlier.bios,
            reads: self.reads - earlier.reads,
            read_bytes: self.read_bytes - earlier.read_bytes,
            writes: self.writes - earlier.writes,
            write_bytes: self.write_bytes - earlier.write_bytes,
            discards: self.discards - earlier.discards,
            discard_bytes: self.discard_bytes - earlier.discard_bytes,
            flushes: self.flushes - earlier.flushes,
            fua: self.fua - earlier.fua,
        }
    }
}

impl AccountSnapshot {
    /// What happened between `earlier` and `self`; empty cells left out.
    pub fn since(&self, earlier: &AccountSnapshot) -> AccountSnapshot {
        fn diff<K: Ord + Clone>(
            now: &BTreeMap<K, IoCount>,
            then: &BTreeMap<K, IoCount>,
        ) -> BTreeMap<K, IoCount> {
            now.iter()
                .map(|(key, count)| {
                    let before = then.get(key).copied().unwrap_or_default();
                    (key.clone(), count.since(&before))
                })
                .filter(|(_, count)| *count != IoCount::default())
                .collect()
        }
        AccountSnapshot {
            by_purpose: diff(&self.by_purpose, &earlier.by_purpose),
            by_file: diff(&self.by_file, &earlier.by_file),
        }
    }
}

impl IoAccount {
    pub fn new() -> Rc<IoAccount> {
        Rc::new(IoAccount::default())
    }

    /// The VFS entered system call `syscall` for `task` of app `uid`; returns the cause it
    /// replaces (a call made from within another keeps the outer one's name).
    pub fn enter_syscall(&self, task: TaskId, uid: u32, syscall: &'static str) -> Option<IoCause> {
        let mut causes = self.causes.borrow_mut();
        let previous = causes.get(&task).copied();
        if previous.is_none() {
            causes.insert(task, IoCause { uid, syscall });
        }
        previous
    }

    /// The system call returns: `previous` is what [`IoAccount::enter_syscall`] returned.
    pub fn leave_syscall(&self, task: TaskId, previous: Option<IoCause>) {
        if previous.is_none() {
            self.causes.borrow_mut().remove(&task);
        }
    }

    /// The cause `task` works for now.
    pub fn cause(&self, task: TaskId) -> Option<IoCause> {
        self.causes.borrow().get(&task).copied()
    }

    /// Sets (or clears) the cause a kernel thread works for.
    pub fn set_cause(&self, task: TaskId, cause: Option<IoCause>) {
        match cause {
            Some(cause) => self.causes.borrow_mut().insert(task, cause),
            None => self.causes.borrow_mut().remove(&task),
        };
    }

    /// Names process `pid`, for rows charged to a kernel thread.
    pub fn register_task(&self, pid: u32, comm: &str) {
        self.comms.borrow_mut().insert(pid, comm.to_string());
    }

    /// Adds a device other than the file system's (an external journal's) named `name`;
    /// returns its index for [`IoAccount::note`].
    pub fn add_device(&self, name: &str) -> u8 {
        let mut devices = self.devices.borrow_mut();
        devices.push(name.to_string());
        u8::try_from(devices.len()).expect("a few devices")
    }

    /// Counts `bio`, submitted by `task` to device `device` (0: the file system's; else from
    /// [`IoAccount::add_device`]) that honours FUA or not.
    pub fn note(&self, task: Option<TaskId>, bio: &BioRequest, device: u8, device_fua: bool) {
        let cause = task.and_then(|t| self.cause(t));
        let (uid, charge) = match cause {
            Some(cause) => (cause.uid, Charge::Syscall(cause.syscall)),
            // A kernel thread's own I/O: data to the app owning the pages (FastTrack's owner);
            // metadata written home to no app (uid 0), since a buffer's page belongs to whoever
            // read it first, not to the operations that dirtied it since.
            None if bio.purpose.is_metadata() => (0, Charge::Thread(bio.pid)),
            None => (bio.uid, Charge::Thread(bio.pid)),
        };
        self.counts
            .borrow_mut()
            .entry((uid, charge, bio.purpose, device))
            .or_default()
            .note(bio, device_fua);
        if bio.purpose == IoPurpose::Data {
            if let Some(label) = bio
                .pages
                .and_then(|span| self.labels.borrow().get(&span.ino).copied())
            {
                self.files
                    .borrow_mut()
                    .entry((uid, label))
                    .or_default()
                    .note(bio, device_fua);
            }
        }
    }

    /// Labels the data of inode `ino` (a user-space library's file kind).
    pub fn label_file(&self, ino: u64, label: &'static str) {
        self.labels.borrow_mut().insert(ino, label);
    }

    /// App `uid`'s counts so far.
    pub fn snapshot(&self, uid: u32) -> AccountSnapshot {
        let devices = self.devices.borrow();
        let mut snapshot = AccountSnapshot::default();
        for (&(row_uid, _, purpose, device), count) in self.counts.borrow().iter() {
            if row_uid != uid {
                continue;
            }
            let key = purpose_key(
                purpose,
                (device > 0).then(|| devices[device as usize - 1].as_str()),
            );
            snapshot.by_purpose.entry(key).or_default().add(count);
        }
        for (&(row_uid, label), count) in self.files.borrow().iter() {
            if row_uid == uid {
                snapshot.by_file.entry(label).or_default().add(count);
            }
        }
        snapshot
    }

    /// Every non-empty cell, by uid, cause and purpose.
    pub fn rows(&self) -> Vec<IoAccountRow> {
        let comms = self.comms.borrow();
        let devices = self.devices.borrow();
        self.counts
            .borrow()
            .iter()
            .map(|(&(uid, charge, purpose, device), count)| IoAccountRow {
                uid,
                cause: match charge {
                    Charge::Syscall(name) => name.to_string(),
                    Charge::Thread(pid) => {
                        format!("[{}]", comms.get(&pid).map_or("?", String::as_str))
                    }
                },
                purpose,
                device: (device > 0).then(|| devices[device as usize - 1].clone()),
                count: *count,
            })
            .collect()
    }
}

/// `bi_end_io`: called once, at completion, with the request id.
pub type EndIo = Box<dyn FnOnce(&Sim, u64)>;

/// A boxed future, for the object-safe async method of [`BlockSubmit`].
pub type LocalBoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// `submit_bio`: queue a bio; may sleep while the queue has no free request (`get_request`).
/// Returns the request id, for waits that name it.
pub trait BlockSubmit {
    fn submit_bio<'a>(
        &'a self,
        sim: &'a Sim,
        bio: BioRequest,
        end_io: EndIo,
    ) -> LocalBoxFuture<'a, u64>;
    /// Bios submitted and not yet completed.
    fn in_flight(&self) -> usize;
    /// `blk_start_plug` for task `pid`: its bios gather in its plug list until
    /// [`Self::finish_plug`] (or it sleeps). Default: no plugging.
    fn start_plug(&self, _pid: u32) {}
    /// `blk_finish_plug`: the plug list goes to the elevator, merged.
    fn finish_plug(&self, _pid: u32) {}
    /// Names process `pid` (its `comm` and uid) for the bios it submits.
    fn register_task(&self, _pid: u32, _uid: u32, _comm: &str) {}
    /// Records, from now on, the page versions each write carries (crash-point checking);
    /// devices without a request queue ignore it.
    fn set_crash_log(&self, _log: Rc<super::crashlog::CrashLog>) {}
    /// The account by purpose of the bios submitted here, if kept.
    fn io_account(&self) -> Option<Rc<IoAccount>> {
        None
    }
    /// QASIO (seed 000 §5): the running task blocks on request `request`, a dependency of type
    /// `dependency` ([`crate::block::qasio`]). Default: nothing.
    fn boost(&self, _sim: &Sim, _request: u64, _dependency: crate::block::qasio::Dependency) {}
    /// A task paused in `balance_dirty_pages` now (`bdi->last_bdp_sleep`, which writeback
    /// throttling reads).
    fn note_dirty_sleep(&self, _sim: &Sim) {}
    /// `bdi_write_congested` / `nr_bdi_congested[BLK_RW_ASYNC] > 0`: the device's request list
    /// is over its congestion threshold.
    fn congested(&self) -> bool {
        false
    }
    /// `congestion_wait(BLK_RW_ASYNC, timeout)`: sleeps (reason `congestion_wait`) until a
    /// request is freed while the device is under its congestion-off threshold
    /// (`clear_bdi_congested` wakes the waiters) or `timeout` passes.
    fn congestion_wait<'a>(&'a self, sim: &'a Sim, timeout: Nanos) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            sim.sleep_for(timeout, WaitReason::CongestionWait, Blocker::None)
                .await;
        })
    }
}

/// `blkdev_issue_flush`: an empty `WRITE_FLUSH` (REQ_SYNC | REQ_NOIDLE | REQ_PREFLUSH, sector 0,
/// no pages) from `issuer` to `bdev`, waited for.
pub async fn blkdev_issue_flush(bdev: &dyn BlockSubmit, sim: &Sim, issuer: super::Issuer) {
    let flags = IoFlags {
        sync: true,
        noidle: true,
        preflush: true,
        ..IoFlags::default()
    };
    let bio = BioRequest::for_pages(IoOp::Flush, 0, 0, flags, issuer, None, IoPurpose::Flush);
    submit_bio_wait(bdev, sim, bio).await;
}

/// `submit_bio_wait`: submits `bio` to `bdev` and waits for it (reason `submit_bio_wait`, the
/// request as blocker).
pub async fn submit_bio_wait(bdev: &dyn BlockSubmit, sim: &Sim, bio: BioRequest) {
    let done: crate::sim::sync::Completion<()> = crate::sim::sync::Completion::new();
    let signal = done.clone();
    let id = bdev
        .submit_bio(sim, bio, Box::new(move |sim, _| signal.complete(sim, ())))
        .await;
    done.wait(sim, WaitReason::BlockIo, Blocker::Request(id))
        .await;
}

/// [`BlockSubmit`] over the block layer's request queue ([`crate::block::layer::BlockLayer`]):
/// plugging, merging, `get_request`, the elevator and the device.
///
/// The page cache's end_io runs as the block layer's `bi_end_io`
/// ([`crate::block::layer::BlockLayer::submit_bio_end_io`]), in the completion event and before
/// the tasks waiting on the pages run, with no task of its own. Bios carry the
/// submitting process (`TaskRef` with the pid, uid and comm registered by
/// [`BlockSubmit::register_task`]), `REQ_SYNC`, `issued_async`, the foreground hint and their
/// pages as [`crate::block::request::PageRef`]s (owner = inode, index = page).
pub struct QueueSubmit {
    me: Weak<QueueSubmit>,
    layer: crate::block::layer::BlockLayer,
    /// Bio ids, shared with the stack's other block users (`BlockStack::next_bio`).
    next_bio: Rc<Cell<u64>>,
    in_flight: Cell<usize>,
    tasks: RefCell<BTreeMap<u32, (u32, String)>>,
    /// `BDI_async_congested`, and the tasks in `congestion_wait` (`congestion_wqh`).
    congested: Cell<bool>,
    /// One entry per task: a task waits once at a time, so its newest token replaces one left
    /// behind by a wait that ended by its timeout.
    congestion_waiters: RefCell<BTreeMap<TaskId, WakeToken>>,
    /// The account by purpose (shared with an external journal's device).
    account: Rc<IoAccount>,
    /// This device in the account (0: the file system's own).
    account_device: u8,
    /// Crash-point checking's recorder: each write's pages and versions.
    crash: RefCell<Option<Rc<super::crashlog::CrashLog>>>,
}

impl QueueSubmit {
    pub fn new(layer: crate::block::layer::BlockLayer, next_bio: Rc<Cell<u64>>) -> Rc<QueueSubmit> {
        QueueSubmit::with_account(layer, next_bio, IoAccount::new(), None)
    }

    /// Like [`QueueSubmit::new`], counting into `account` (an external journal's device shares
    /// the file system's), as device `name` (None: the file system's own device).
    pub fn with_account(
        layer: crate::block::layer::BlockLayer,
        next_bio: Rc<Cell<u64>>,
        account: Rc<IoAccount>,
        name: Option<&str>,
    ) -> Rc<QueueSubmit> {
        let account_device = name.map_or(0, |name| account.add_device(name));
        Rc::new_cyclic(|me| QueueSubmit {
            me: me.clone(),
            layer,
            next_bio,
            in_flight: Cell::new(0),
            tasks: RefCell::new(BTreeMap::new()),
            congested: Cell::new(false),
            congestion_waiters: RefCell::new(BTreeMap::new()),
            account,
            account_device,
            crash: RefCell::new(None),
        })
    }

    /// The queue's congestion thresholds ([`crate::block::queue::RequestQueue::congestion_thresholds`]:
    /// none for blk-mq or a request list that never fills).
    fn thresholds(&self) -> Option<(usize, usize)> {
        self.layer.with_queue(|q| q.congestion_thresholds())
    }

    /// After a request was allocated (`__get_request`: congested once the list reaches the on
    /// threshold).
    fn note_allocated(&self) {
        if let Some((on, _)) = self.thresholds() {
            if self.layer.with_queue(|q| q.allocated()) >= on {
                self.congested.set(true);
            }
        }
    }

    /// After a request was freed (`__freed_request`: under the off threshold the device is
    /// not congested and `clear_bdi_congested` wakes the congestion waiters).
    fn note_freed(&self, sim: &Sim) {
        let Some((_, off)) = self.thresholds() else {
            return;
        };
        if self.layer.with_queue(|q| q.allocated()) < off {
            self.congested.set(false);
            let waiters = std::mem::take(&mut *self.congestion_waiters.borrow_mut());
            for token in waiters.into_values() {
                sim.wake(token);
            }
        }
    }

    pub fn layer(&self) -> &crate::block::layer::BlockLayer {
        &self.layer
    }

    fn task_ref(&self, pid: u32) -> crate::block::request::TaskRef {
        let tasks = self.tasks.borrow();
        let (uid, comm) = tasks
            .get(&pid)
            .map_or((0, "?"), |(uid, comm)| (*uid, comm.as_str()));
        crate::block::request::TaskRef {
            pid,
            tgid: pid,
            uid,
            comm: comm.into(),
        }
    }
}

impl BlockSubmit for QueueSubmit {
    fn submit_bio<'a>(
        &'a self,
        sim: &'a Sim,
        bio: BioRequest,
        end_io: EndIo,
    ) -> LocalBoxFuture<'a, u64> {
        Box::pin(async move {
            use crate::block::request::{Bio, IoPrio, PageRef};
            let device_fua = self.layer.with_queue(|q| q.device().fua());
            if self.layer.flush_declared() {
                self.account
                    .note(sim.current_task(), &bio, self.account_device, device_fua);
            } else if bio.op != IoOp::Flush {
                // The block layer drops the flush and FUA flags (BlockLayer::submit_bio), and
                // an empty flush ends there: neither is counted as a device command.
                let mut counted = bio.clone();
                counted.flags = bio.flags.without_flush();
                self.account.note(
                    sim.current_task(),
                    &counted,
                    self.account_device,
                    device_fua,
                );
            }
            let id = self.next_bio.get();
            self.next_bio.set(id + 1);
            let pages = bio.pages.map_or_else(Vec::new, |span| {
                (span.index..span.index + u64::from(span.count))
                    .map(|index| PageRef {
                        owner: span.ino,
                        index,
                    })
                    .collect()
            });
            let block_bio = Bio {
                id,
                op: bio.op,
                sector: bio.sector,
                nr_sectors: bio.nr_sectors,
                flags: bio.flags,
                task: self.task_ref(bio.pid),
                ioprio: IoPrio::NONE,
                issued_async: bio.issued_async,
                foreground: bio.foreground,
                owner_uid: bio.uid,
                pages,
                submitted_ns: sim.now(),
            };
            // Crash-point checking: the versions the pages hold now, which the device stores
            // (pages under writeback are stable).
            let crash = self
                .crash
                .borrow()
                .clone()
                .filter(|_| bio.op == IoOp::Write);
            let tags = crash.as_ref().map(|log| {
                let block = bio.sector / super::writeback::SECTORS_PER_PAGE;
                let count = u64::from(bio.nr_sectors) / super::writeback::SECTORS_PER_PAGE;
                match bio.pages {
                    Some(span) if span.ino != super::BDEV_INO => {
                        log.tags_for(Some(span.ino), span.index, block, count)
                    }
                    _ => log.tags_for(None, 0, block, count),
                }
            });
            let me = self.me.clone();
            let on_completion: crate::block::layer::EndIo = Box::new(move |s, request| {
                let me = me.upgrade().expect("the adapter outlives its bios");
                me.in_flight.set(me.in_flight.get() - 1);
                end_io(s, request);
                me.note_freed(s);
            });
            // Counted before submission: the bio may complete before the task runs again.
            self.in_flight.set(self.in_flight.get() + 1);
            let handle = self.layer.submit_bio_end_io(block_bio, on_completion).await;
            if let (Some(log), Some(tags)) = (crash, tags) {
                log.device_write(handle.request, tags);
            }
            self.note_allocated();
            handle.request
        })
    }

    fn in_flight(&self) -> usize {
        self.in_flight.get()
    }

    fn start_plug(&self, pid: u32) {
        self.layer.start_plug(pid);
    }

    fn finish_plug(&self, pid: u32) {
        self.layer.finish_plug(pid);
    }

    fn boost(&self, _sim: &Sim, request: u64, dependency: crate::block::qasio::Dependency) {
        self.layer.boost(request, dependency);
    }

    fn note_dirty_sleep(&self, _sim: &Sim) {
        self.layer.note_dirty_sleep();
    }

    fn io_account(&self) -> Option<Rc<IoAccount>> {
        Some(self.account.clone())
    }

    fn set_crash_log(&self, log: Rc<super::crashlog::CrashLog>) {
        *self.crash.borrow_mut() = Some(log);
    }

    fn register_task(&self, pid: u32, uid: u32, comm: &str) {
        self.account.register_task(pid, comm);
        self.layer.register_task(pid, uid, comm);
        self.tasks.borrow_mut().insert(pid, (uid, comm.to_string()));
    }

    fn congested(&self) -> bool {
        self.congested.get()
    }

    fn congestion_wait<'a>(&'a self, sim: &'a Sim, timeout: Nanos) -> LocalBoxFuture<'a, ()> {
        Box::pin(CongestionWait {
            submit: self,
            sim,
            timeout,
            token: None,
        })
    }
}

/// The future of [`QueueSubmit`]'s `congestion_wait`: `io_schedule_timeout` on
/// `congestion_wqh`.
struct CongestionWait<'a> {
    submit: &'a QueueSubmit,
    sim: &'a Sim,
    timeout: Nanos,
    token: Option<WakeToken>,
}

impl Future for CongestionWait<'_> {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        match self.token {
            Some(token) if self.sim.was_woken(token) => std::task::Poll::Ready(()),
            Some(_) => std::task::Poll::Pending,
            None => {
                let token = self
                    .sim
                    .block_current(WaitReason::CongestionWait, Blocker::None, None);
                self.sim.wake_at(self.sim.now() + self.timeout, token);
                self.submit
                    .congestion_waiters
                    .borrow_mut()
                    .insert(token.task, token);
                self.token = Some(token);
                std::task::Poll::Pending
            }
        }
    }
}
