//! What a run did to the files under test, for crash states (issue 20's crash-point checking):
//! every version of every page of those files, with its bytes; which version each device
//! write carried; each jbd2 transaction's view of the files (linked, `i_disksize`, block map)
//! and the pages it journaled; the fsyncs; MobiFS's VCT boundaries. `mobistack crashcheck`
//! ([`crate::crashcheck`]) builds each crash state from this log and the device's command
//! history ([`crate::dev::crash`]) without re-running the simulation.
//!
//! The files under test are those created with `O_STORE_CONTENTS` while the log is on (the
//! files whose real bytes the run keeps: SQLite's database and journal). Recording is bounded
//! by [`CrashLog::new`]'s byte budget; past it, recording stops and the log says so.
//!
//! A page's *version* is a global sequence number, given when a write copies into the page
//! (`iov_iter_copy_from_user_atomic` in `generic_perform_write`, or MobiFS's cache write). Versions of one page only grow, so "at least as
//! new as what fsync saw" is a comparison of numbers. A device write carries the versions its
//! pages held when the bio was submitted: pages under writeback are stable (the writer waits
//! in `wait_on_page_writeback`), so they are the versions the device stored.
//!
//! It also records every journal block jbd2 writes with what it holds ([`LogContent`]), the
//! directory blocks each transaction logs, and the renames of files under test.
//!
//! Simplifications: a file's history starts at its creation, so files under test must be
//! created during the run; a file keeps its first path in reports after a rename.

use super::Ino;
use crate::units::Nanos;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

/// Page size of the files under test (the page cache's).
pub const PAGE: usize = 4096;

/// One version of one page.
#[derive(Debug, Clone)]
pub struct PageVersion {
    pub ino: Ino,
    pub index: u64,
    pub at: Nanos,
    /// The page's bytes at this version (attached by the VFS after the copy).
    pub bytes: Option<Rc<[u8]>>,
}

/// What happened to a file under test, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileEventKind {
    Created,
    /// Page `index` now holds `version`.
    Written {
        index: u64,
        version: u64,
    },
    /// `i_size` is now `size` (a write that extended the file).
    Size(u64),
    /// Truncated to `size`: pages at and past `size`'s page boundary are gone.
    Truncated(u64),
    Unlinked,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileEvent {
    pub at: Nanos,
    /// Global order of events (and the version counter's value after the event).
    pub seq: u64,
    pub ino: Ino,
    pub kind: FileEventKind,
}

/// A file under test.
#[derive(Debug, Clone)]
pub struct TrackedFile {
    pub path: String,
    /// The app (process name) that created it.
    pub app: String,
    pub dir: Ino,
    pub name: String,
    /// MobiFS covers it (its state is promised at VCT boundaries; its fsync is
    /// asynchronous).
    pub mobifs: bool,
}

/// An fsync of a file under test: what it was asked to make durable.
#[derive(Debug, Clone)]
pub struct FsyncRecord {
    pub ino: Ino,
    pub start: Nanos,
    /// When it returned (`None`: still running at the end of the run).
    pub end: Option<Nanos>,
    /// The file's size and each page's version when fsync was called.
    pub size: u64,
    pub pages: Vec<(u64, u64)>,
    /// Whether MobiFS covered the file (its fsync is asynchronous by design).
    pub mobifs: bool,
}

/// A file as a jbd2 transaction leaves it on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSnapshot {
    pub ino: Ino,
    /// Its name is in its directory.
    pub linked: bool,
    /// `i_disksize`.
    pub size: u64,
    /// Extents: (first page, first block, pages).
    pub extents: Vec<(u64, u64, u64)>,
}

impl FileSnapshot {
    /// The block page `index` is mapped to.
    pub fn block(&self, index: u64) -> Option<u64> {
        self.extents
            .iter()
            .find(|&&(lblk, _, len)| index >= lblk && index < lblk + len)
            .map(|&(lblk, pblk, _)| pblk + (index - lblk))
    }
}

/// One jbd2 transaction.
#[derive(Debug, Clone, Default)]
pub struct TidRecord {
    /// The files under test as the transaction leaves them (taken at `T_FLUSH`, when its
    /// handles have all stopped and no new one has joined).
    pub files: Vec<FileSnapshot>,
    /// Data pages it journaled: (ino, index, version, home block).
    pub journaled: Vec<(Ino, u64, u64, u64)>,
    /// Its commit block: block number and when it was submitted.
    pub commit: Option<(u64, Nanos)>,
    /// The directory blocks it logs, as their copies hold them: (block, directory, entries
    /// (name, inode)).
    pub dir_blocks: Vec<DirBlock>,
    /// Renames recorded before its `T_FLUSH`: the first this many of
    /// [`CrashRecord::renames`] are in it or an earlier transaction.
    pub renames_before: usize,
}

/// A directory block as a transaction logs it: (block, directory, entries (name, inode)).
pub type DirBlock = (u64, Ino, Vec<(String, Ino)>);

/// A run of blocks of the file system's fixed metadata: (first block, blocks, what they are,
/// e.g. "inode table of group 3").
pub type Region = (u64, u64, String);

/// A rename of a file under test, and what the renamed file held then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenameRecord {
    /// When `rename` returned.
    pub at: Nanos,
    pub ino: Ino,
    /// The new name: its directory, its name and its path.
    pub dir: Ino,
    pub name: String,
    pub path: String,
    /// The file's size and each page's version when renamed.
    pub size: u64,
    pub pages: Vec<(u64, u64)>,
}

/// What a journal block holds as jbd2 wrote it (`fs/jbd2/commit.c`,
/// `jbd2_journal_commit_transaction`; the formats of `include/linux/jbd2.h`), recorded when the
/// write is submitted: what recovery (`fs/jbd2/recovery.c`, `do_one_pass`) reads back from
/// whichever write of the block survived a crash.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LogContent {
    /// A descriptor block of transaction `tid` (`JBD2_DESCRIPTOR_BLOCK`, `h_sequence` = tid):
    /// its tags, the home blocks of the copies that follow it in the log, in order.
    Descriptor { tid: u64, homes: Vec<u64> },
    /// The copy of home block `home` that transaction `tid` logged (no jbd2 header: a copy
    /// whose first word is jbd2's magic is escaped, `JBD2_FLAG_ESCAPE`).
    Copy { tid: u64, home: u64 },
    /// The commit block of `tid` (`JBD2_COMMIT_BLOCK`); `checksum`: it carries the crc32 of
    /// the transaction's descriptor blocks and copies (`JBD2_FEATURE_COMPAT_CHECKSUM`).
    Commit { tid: u64, checksum: bool },
    /// The journal superblock: the log starts at transaction `sequence` (`s_sequence`;
    /// `s_start` is that transaction's first log block).
    Superblock { sequence: u64 },
}

impl LogContent {
    /// The transaction a log block belongs to (`None`: the superblock).
    pub fn tid(&self) -> Option<u64> {
        match *self {
            LogContent::Descriptor { tid, .. }
            | LogContent::Copy { tid, .. }
            | LogContent::Commit { tid, .. } => Some(tid),
            LogContent::Superblock { .. } => None,
        }
    }
}

/// One journal block write as jbd2 submitted it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogWrite {
    /// The device block.
    pub block: u64,
    /// Its offset in the log (0: the journal superblock; the ring is `1..log_blocks`).
    pub offset: u64,
    /// When it was submitted.
    pub at: Nanos,
    pub content: LogContent,
}

/// A page a device write carried: its block and version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tag {
    pub block: u64,
    pub ino: Ino,
    pub index: u64,
    pub version: u64,
}

#[derive(Default)]
struct Inner {
    files: BTreeMap<Ino, TrackedFile>,
    versions: Vec<PageVersion>,
    current: HashMap<(Ino, u64), u64>,
    events: Vec<FileEvent>,
    fsyncs: Vec<FsyncRecord>,
    tids: BTreeMap<u64, TidRecord>,
    tags: HashMap<u64, Vec<Tag>>,
    /// Block -> the page version a write home of that block carries (the last committed
    /// journaled copy: jbd2 writes a journaled buffer home only after its commit).
    journaled_home: HashMap<u64, (Ino, u64, u64)>,
    /// MobiFS's checkpointer: pages of these inodes are journaled as of this event position.
    as_of: HashMap<Ino, usize>,
    /// MobiFS VCT boundaries: (app, events recorded before the close).
    vct_closes: Vec<(String, usize)>,
    log_writes: Vec<LogWrite>,
    log_blocks: u64,
    renames: Vec<RenameRecord>,
    regions: Vec<Region>,
    /// The size of each file under test now.
    sizes: HashMap<Ino, u64>,
    bytes: u64,
    overflowed: bool,
}

/// The recorder (shared by the page cache, the VFS, ext4, jbd2 and MobiFS).
pub struct CrashLog {
    budget: u64,
    inner: RefCell<Inner>,
}

/// A finished log, for the checker.
#[derive(Debug, Clone, Default)]
pub struct CrashRecord {
    pub files: BTreeMap<Ino, TrackedFile>,
    /// Version `v` is `versions[v - 1]`.
    pub versions: Vec<PageVersion>,
    pub events: Vec<FileEvent>,
    pub fsyncs: Vec<FsyncRecord>,
    pub tids: BTreeMap<u64, TidRecord>,
    /// Request id -> the pages it carried.
    pub tags: HashMap<u64, Vec<Tag>>,
    /// MobiFS VCT boundaries: (app, position in `events`: the events before it are in).
    pub vct_closes: Vec<(String, usize)>,
    /// Every journal block written, in submission order.
    pub log_writes: Vec<LogWrite>,
    /// The journal's size in blocks (its superblock and the ring); 0: no journal recorded.
    pub log_blocks: u64,
    /// Renames of files under test, in order.
    pub renames: Vec<RenameRecord>,
    /// The file system's fixed metadata, for describing blocks (`crashcheck --dump-point`).
    pub regions: Vec<Region>,
    /// Bytes of page versions kept.
    pub bytes: u64,
    /// The budget ran out: the log is incomplete.
    pub overflowed: bool,
}

impl CrashLog {
    /// A log that keeps at most `budget` bytes of page versions.
    pub fn new(budget: u64) -> Rc<CrashLog> {
        Rc::new(CrashLog {
            budget,
            inner: RefCell::new(Inner::default()),
        })
    }

    /// A file under test was created. Its inode number may be one a removed file had
    /// (`ext4_new_inode` reuses freed inodes): none of that file's pages are this one's.
    pub fn track(&self, at: Nanos, ino: Ino, file: TrackedFile) {
        let mut inner = self.inner.borrow_mut();
        inner.current.retain(|&(i, _), _| i != ino);
        inner.files.insert(ino, file);
        inner.sizes.insert(ino, 0);
        let seq = inner.versions.len() as u64;
        inner.events.push(FileEvent {
            at,
            seq,
            ino,
            kind: FileEventKind::Created,
        });
    }

    pub fn is_tracked(&self, ino: Ino) -> bool {
        self.inner.borrow().files.contains_key(&ino)
    }

    /// The sequence number now (the last version given).
    pub fn seq(&self) -> u64 {
        self.inner.borrow().versions.len() as u64
    }

    /// The page cache copied into page `index` of `ino`: a new version. Returns it (0 when the
    /// file is not under test).
    pub fn page_written(&self, at: Nanos, ino: Ino, index: u64) -> u64 {
        let mut inner = self.inner.borrow_mut();
        if !inner.files.contains_key(&ino) || inner.overflowed {
            return 0;
        }
        inner.versions.push(PageVersion {
            ino,
            index,
            at,
            bytes: None,
        });
        let version = inner.versions.len() as u64;
        inner.current.insert((ino, index), version);
        inner.events.push(FileEvent {
            at,
            seq: version,
            ino,
            kind: FileEventKind::Written { index, version },
        });
        version
    }

    /// The bytes page `index` of `ino` holds now (after the VFS's copy): attached to its
    /// current version.
    pub fn attach_bytes(&self, ino: Ino, index: u64, bytes: &[u8]) {
        let mut inner = self.inner.borrow_mut();
        let Some(&version) = inner.current.get(&(ino, index)) else {
            return;
        };
        let mut page = vec![0u8; PAGE];
        let n = bytes.len().min(PAGE);
        page[..n].copy_from_slice(&bytes[..n]);
        let slot = &mut inner.versions[version as usize - 1];
        let fresh = slot.bytes.is_none();
        slot.bytes = Some(page.into());
        if fresh {
            inner.bytes += PAGE as u64;
            if inner.bytes > self.budget {
                inner.overflowed = true;
            }
        }
    }

    /// `i_size` of `ino` grew to `size`.
    pub fn size(&self, at: Nanos, ino: Ino, size: u64) {
        self.event(at, ino, FileEventKind::Size(size));
    }

    /// `ino` was truncated to `size`: pages past it are gone.
    pub fn truncated(&self, at: Nanos, ino: Ino, size: u64) {
        if !self.is_tracked(ino) {
            return;
        }
        let first_gone = size.div_ceil(PAGE as u64);
        self.inner
            .borrow_mut()
            .current
            .retain(|&(i, index), _| i != ino || index < first_gone);
        self.event(at, ino, FileEventKind::Truncated(size));
    }

    /// `ino`'s name was removed.
    pub fn unlinked(&self, at: Nanos, ino: Ino) {
        self.event(at, ino, FileEventKind::Unlinked);
    }

    fn event(&self, at: Nanos, ino: Ino, kind: FileEventKind) {
        let mut inner = self.inner.borrow_mut();
        if !inner.files.contains_key(&ino) {
            return;
        }
        if let FileEventKind::Size(size) | FileEventKind::Truncated(size) = kind {
            inner.sizes.insert(ino, size);
        }
        let seq = inner.versions.len() as u64;
        inner.events.push(FileEvent { at, seq, ino, kind });
    }

    /// An fsync of `ino` (size `size`) began; returns its record's number for
    /// [`CrashLog::fsync_end`].
    pub fn fsync_start(&self, at: Nanos, ino: Ino, size: u64, mobifs: bool) -> Option<usize> {
        let mut inner = self.inner.borrow_mut();
        if !inner.files.contains_key(&ino) {
            return None;
        }
        let mut pages: Vec<(u64, u64)> = inner
            .current
            .iter()
            .filter(|(&(i, _), _)| i == ino)
            .map(|(&(_, index), &v)| (index, v))
            .collect();
        pages.sort_unstable();
        inner.fsyncs.push(FsyncRecord {
            ino,
            start: at,
            end: None,
            size,
            pages,
            mobifs,
        });
        Some(inner.fsyncs.len() - 1)
    }

    pub fn fsync_end(&self, record: usize, at: Nanos) {
        self.inner.borrow_mut().fsyncs[record].end = Some(at);
    }

    /// The tags of a write bio over `[block, block + count)` of file `ino` (`None`: a block
    /// device write, which carries a journaled page if one of its blocks is the home of one).
    pub fn tags_for(&self, ino: Option<Ino>, first_index: u64, block: u64, count: u64) -> Vec<Tag> {
        let inner = self.inner.borrow();
        let mut tags = Vec::new();
        match ino {
            Some(ino) if inner.files.contains_key(&ino) => {
                for k in 0..count {
                    if let Some(&version) = inner.current.get(&(ino, first_index + k)) {
                        tags.push(Tag {
                            block: block + k,
                            ino,
                            index: first_index + k,
                            version,
                        });
                    }
                }
            }
            Some(_) => {}
            None => {
                for b in block..block + count {
                    if let Some(&(ino, index, version)) = inner.journaled_home.get(&b) {
                        tags.push(Tag {
                            block: b,
                            ino,
                            index,
                            version,
                        });
                    }
                }
            }
        }
        tags
    }

    /// Request `request` completed carrying `tags`.
    pub fn device_write(&self, request: u64, tags: Vec<Tag>) {
        if tags.is_empty() {
            return;
        }
        self.inner
            .borrow_mut()
            .tags
            .entry(request)
            .or_default()
            .extend(tags);
    }

    /// The files under test (for the file system's snapshot at `T_FLUSH`).
    pub fn tracked(&self) -> Vec<(Ino, Ino, String)> {
        self.inner
            .borrow()
            .files
            .iter()
            .map(|(&ino, f)| (ino, f.dir, f.name.clone()))
            .collect()
    }

    /// Transaction `tid` reached `T_FLUSH` leaving the files as `files`.
    pub fn tid_flush(&self, tid: u64, files: Vec<FileSnapshot>) {
        let mut inner = self.inner.borrow_mut();
        let renames = inner.renames.len();
        let record = inner.tids.entry(tid).or_default();
        record.files = files;
        record.renames_before = renames;
    }

    /// Transaction `tid` journals page `index` of `ino` (home block `block`) as data.
    pub fn journaled(&self, tid: u64, ino: Ino, index: u64, block: u64) {
        let mut inner = self.inner.borrow_mut();
        if !inner.files.contains_key(&ino) {
            return;
        }
        let version = match inner.as_of.get(&ino) {
            Some(&at) => latest_as_of(&inner.events[..at], ino, index),
            None => inner.current.get(&(ino, index)).copied().unwrap_or(0),
        };
        inner
            .tids
            .entry(tid)
            .or_default()
            .journaled
            .push((ino, index, version, block));
    }

    /// Transaction `tid`'s commit block (block `block`) is being submitted: its journaled
    /// pages become what their home blocks get written with.
    pub fn tid_commit(&self, tid: u64, block: u64, at: Nanos) {
        let mut inner = self.inner.borrow_mut();
        let record = inner.tids.entry(tid).or_default();
        record.commit = Some((block, at));
        let journaled = record.journaled.clone();
        for (ino, index, version, home) in journaled {
            inner.journaled_home.insert(home, (ino, index, version));
        }
    }

    /// MobiFS's checkpointer journals the pages of `inos` as they were at event position
    /// `at` (its VCT's close, [`CrashLog::vct_closed`]) until [`CrashLog::checkpoint_done`].
    pub fn checkpoint_as_of(&self, inos: &[Ino], at: usize) {
        let mut inner = self.inner.borrow_mut();
        for &ino in inos {
            inner.as_of.insert(ino, at);
        }
    }

    /// The position of the next event (a VCT boundary taken now).
    pub fn position(&self) -> usize {
        self.inner.borrow().events.len()
    }

    pub fn checkpoint_done(&self) {
        self.inner.borrow_mut().as_of.clear();
    }

    /// A VCT of `app` closed; returns its position among the events (those before it are
    /// in the VCT or an earlier one).
    pub fn vct_closed(&self, app: &str) -> usize {
        let mut inner = self.inner.borrow_mut();
        let at = inner.events.len();
        inner.vct_closes.push((app.to_string(), at));
        at
    }

    /// Transaction `tid` logs these directory blocks (at its `T_FLUSH`).
    pub fn tid_directory_blocks(&self, tid: u64, blocks: Vec<DirBlock>) {
        self.inner
            .borrow_mut()
            .tids
            .entry(tid)
            .or_default()
            .dir_blocks = blocks;
    }

    /// File `ino` was renamed to `name` in `dir` (`path`); a file it replaced is
    /// [`CrashLog::unlinked`] by the caller.
    pub fn renamed(&self, at: Nanos, ino: Ino, dir: Ino, name: &str, path: &str) {
        let mut inner = self.inner.borrow_mut();
        let Some(file) = inner.files.get_mut(&ino) else {
            return;
        };
        file.dir = dir;
        file.name = name.to_string();
        let mut pages: Vec<(u64, u64)> = inner
            .current
            .iter()
            .filter(|(&(i, _), _)| i == ino)
            .map(|(&(_, index), &v)| (index, v))
            .collect();
        pages.sort_unstable();
        let size = inner.sizes.get(&ino).copied().unwrap_or(0);
        inner.renames.push(RenameRecord {
            at,
            ino,
            dir,
            name: name.to_string(),
            path: path.to_string(),
            size,
            pages,
        });
    }

    /// The file system's fixed metadata lies in `regions` (for describing blocks).
    pub fn metadata_regions(&self, regions: Vec<Region>) {
        self.inner.borrow_mut().regions = regions;
    }

    /// The journal has `blocks` blocks (its superblock at offset 0, then the ring).
    pub fn journal_layout(&self, blocks: u64) {
        self.inner.borrow_mut().log_blocks = blocks;
    }

    /// jbd2 submits a write of journal block `block` (log offset `offset`) holding `content`.
    pub fn log_write(&self, block: u64, offset: u64, at: Nanos, content: LogContent) {
        self.inner.borrow_mut().log_writes.push(LogWrite {
            block,
            offset,
            at,
            content,
        });
    }

    /// The log so far.
    pub fn record(&self) -> CrashRecord {
        let inner = self.inner.borrow();
        CrashRecord {
            files: inner.files.clone(),
            versions: inner.versions.clone(),
            events: inner.events.clone(),
            fsyncs: inner.fsyncs.clone(),
            tids: inner.tids.clone(),
            tags: inner.tags.clone(),
            vct_closes: inner.vct_closes.clone(),
            log_writes: inner.log_writes.clone(),
            log_blocks: inner.log_blocks,
            renames: inner.renames.clone(),
            regions: inner.regions.clone(),
            bytes: inner.bytes,
            overflowed: inner.overflowed,
        }
    }
}

/// The version page `index` of `ino` held after `events` (0: none).
fn latest_as_of(events: &[FileEvent], ino: Ino, index: u64) -> u64 {
    let mut version = 0;
    for e in events.iter().filter(|e| e.ino == ino) {
        match e.kind {
            FileEventKind::Written {
                index: i,
                version: v,
            } if i == index => version = v,
            FileEventKind::Truncated(size) if index >= size.div_ceil(PAGE as u64) => version = 0,
            _ => {}
        }
    }
    version
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str) -> TrackedFile {
        TrackedFile {
            path: format!("/{name}"),
            app: "app".into(),
            dir: 2,
            name: name.into(),
            mobifs: false,
        }
    }

    #[test]
    fn versions_grow_and_only_files_under_test_get_them() {
        let log = CrashLog::new(1 << 20);
        log.track(0, 10, file("db"));
        assert_eq!(log.page_written(1, 10, 0), 1);
        assert_eq!(log.page_written(2, 11, 0), 0, "not under test");
        assert_eq!(log.page_written(3, 10, 0), 2);
        assert_eq!(log.page_written(3, 10, 1), 3);
        let tags = log.tags_for(Some(10), 0, 100, 3);
        assert_eq!(
            tags.iter()
                .map(|t| (t.block, t.version))
                .collect::<Vec<_>>(),
            vec![(100, 2), (101, 3)],
            "page 2 has no version: no tag"
        );
    }

    #[test]
    fn truncate_drops_versions_and_fsync_sees_the_current_ones() {
        let log = CrashLog::new(1 << 20);
        log.track(0, 10, file("j"));
        log.page_written(1, 10, 0);
        log.page_written(1, 10, 1);
        log.truncated(2, 10, 100);
        let rec = log.fsync_start(3, 10, 100, false).expect("tracked");
        log.fsync_end(rec, 4);
        let r = log.record();
        assert_eq!(r.fsyncs[0].pages, vec![(0, 1)], "page 1 was truncated away");
        assert_eq!(r.fsyncs[0].end, Some(4));
    }

    #[test]
    fn a_checkpoint_journals_the_version_as_of_its_vct() {
        let log = CrashLog::new(1 << 20);
        log.track(0, 10, file("db"));
        log.page_written(1, 10, 0);
        let closed = log.vct_closed("app");
        log.page_written(2, 10, 0); // into the next VCT
        log.checkpoint_as_of(&[10], closed);
        log.journaled(7, 10, 0, 500);
        log.checkpoint_done();
        log.tid_commit(7, 9000, 3);
        assert_eq!(log.record().tids[&7].journaled, vec![(10, 0, 1, 500)]);
        let home = log.tags_for(None, 0, 499, 2);
        assert_eq!(home.len(), 1);
        assert_eq!((home[0].block, home[0].version), (500, 1));
    }

    #[test]
    fn the_budget_stops_recording() {
        let log = CrashLog::new(PAGE as u64);
        log.track(0, 10, file("db"));
        log.page_written(1, 10, 0);
        log.attach_bytes(10, 0, b"a");
        assert!(!log.record().overflowed);
        log.page_written(1, 10, 1);
        log.attach_bytes(10, 1, b"b");
        assert!(log.record().overflowed);
        assert_eq!(log.page_written(2, 10, 2), 0, "no versions past the budget");
    }
}
