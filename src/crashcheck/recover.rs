//! A crash state's files: what survives of the files under test if power is lost at `t`.
//!
//! 1. Each device write's fate at `t` ([`crate::dev::crash`]): durable, undetermined or never
//!    happened; an undetermined write reached flash or not by a coin drawn per write and per
//!    crash point (any subset is a state the device's cache allows).
//! 2. jbd2's recovery from the journal blocks that survived ([`Prepared::scan_log`]): every
//!    block jbd2 wrote is recorded with what it holds (descriptor blocks with their tags and
//!    tid, copies with their home block and tid, commit blocks with their tid and whether they
//!    carry a checksum, the journal superblock with `s_sequence`:
//!    [`crate::mm::crashlog::LogContent`]); the crash state's log is whichever write of each
//!    block survived. `do_one_pass` (fs/jbd2/recovery.c, 3.10) runs on it: `PASS_SCAN` from
//!    the superblock's transaction while each block has the expected sequence (and, with
//!    `JBD2_FEATURE_COMPAT_CHECKSUM`, while each commit block's checksum matches the copies),
//!    `PASS_REVOKE` (no revoke blocks: the model writes none), `PASS_REPLAY`, which writes
//!    every named copy home whatever its log block holds: a copy that did not survive is a
//!    [`BadReplay`]. The last transaction replayed, `T'`, gives each file's name,
//!    `i_disksize` and extent map.
//! 3. Each page below the size: the version the surviving write at its block carried, or the
//!    version a replayed transaction journaled for that block (MobiFS's VCTs, `data=journal`),
//!    whichever is newer (*foreign* when the journaled copy's log block did not survive); a
//!    block no surviving write of the file covers reads as zeros, and a block whose surviving
//!    write belonged to something else as *foreign*. A mapped page that holds no version of
//!    itself is an [`Exposed`] block (ordered mode's promise, check 6); a hole is not.
//!
//! Simplifications: sectors of a block survive together (4 KiB atomic writes), and so do the
//! blocks of one request unless [`Prepared::torn`] (then a prefix of them); the file view
//! of `T'` (names, sizes, extents) is ext4's state at `T'`'s `T_FLUSH`
//! ([`crate::fs::ext4::crash`]), not read back from the replayed inode table and directory
//! blocks, so a metadata copy replayed with stale bytes is counted ([`BadReplay`]) but not
//! carried into the files; a journaled data copy applies only while its home block is still
//! the page's, which stands in for revoke records; transactions before the superblock's
//! `s_sequence` count as checkpointed home.

use crate::dev::crash::WriteHistory;
use crate::mm::crashlog::{CrashRecord, LogContent, Tag};
use crate::mm::Ino;
use crate::units::Nanos;
use std::collections::{BTreeMap, HashMap};

/// What a page of a recovered file reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PageState {
    /// A version of this page.
    Version(u64),
    /// Zeros: a hole, or a block no write reached.
    Zero,
    /// Bytes of something else (another file's data, metadata).
    Foreign,
}

/// A recovered file under test.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RecoveredFile {
    pub ino: Ino,
    pub size: u64,
    pub pages: Vec<PageState>,
}

/// The files under test after a crash at `at`: the linked ones (an unlinked or never-created
/// file is absent).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Recovered {
    /// The last transaction replayed (`None`: none recorded survived).
    pub replayed: Option<u64>,
    pub files: BTreeMap<Ino, RecoveredFile>,
    /// Copies recovery wrote home from log blocks that did not hold them: a replayed
    /// transaction whose log blocks did not all survive.
    pub bad_replays: Vec<BadReplay>,
    /// The names of the files under test, as the recovered directory blocks hold them:
    /// (directory, name) -> inode.
    pub names: BTreeMap<(Ino, String), Ino>,
    /// Pages inside a recovered file's size whose block is mapped but holds no version of
    /// that page: blocks the device never made durable with the file's data (ordered mode's
    /// promise, [`super::checks::ordered_data`]). Holes are not listed (they read zeros by
    /// the file system's own map).
    pub exposed: Vec<Exposed>,
}

/// A mapped page inside a recovered file's size that holds none of the file's data.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Exposed {
    pub ino: Ino,
    pub index: u64,
    pub block: u64,
    pub found: Found,
}

/// What an exposed block holds instead of the file's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Found {
    /// No write of the run survived at the block: what it held before the run (mkfs's zeros
    /// here; on a used phone, some deleted file's data).
    NeverWritten,
    /// A version of another page of a file under test (the same file at another index, or
    /// another file): data freed and reallocated.
    OtherPage { ino: Ino, index: u64, version: u64 },
    /// A write that carried no page of a file under test: metadata, or a file not under test.
    NotFileData { write: u64 },
    /// A journaled copy of the page whose log block did not survive (check 4's bad replay).
    LostLogCopy { tid: u64 },
}

/// A log block a replayed transaction's descriptor names, which did not survive: recovery
/// (`do_one_pass`, `PASS_REPLAY`) copies whatever the block holds to `home`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BadReplay {
    pub tid: u64,
    pub home: u64,
    /// The log offset of the copy.
    pub offset: u64,
    /// What the block holds instead (`None`: nothing the run wrote there).
    pub found: Option<LogContent>,
}

/// What jbd2's recovery finds in the log ([`Prepared::scan_log`]).
pub(super) struct LogScan {
    /// `s_sequence` of the surviving journal superblock: earlier transactions were
    /// checkpointed.
    pub(super) first: u64,
    /// `end_transaction`: the first transaction not replayed.
    pub(super) end: u64,
    /// Per replayed copy (tid, home): whether its log block held it.
    pub(super) copies: HashMap<(u64, u64), bool>,
    pub(super) bad: Vec<BadReplay>,
}

/// Per page (ino, index): (tid, version, home block) of each journaled copy, in tid order.
type JournaledCopies = HashMap<(Ino, u64), Vec<(u64, u64, u64)>>;

/// The run's history prepared once for many crash points.
pub struct Prepared<'a> {
    pub record: &'a CrashRecord,
    pub(super) history: &'a WriteHistory,
    /// Per write: when a flush made it durable (FUA and write-through: its completion).
    pub(super) durable_at: Vec<Option<Nanos>>,
    /// Per block of interest: the writes covering it, in start order.
    pub(super) by_block: HashMap<u64, Vec<usize>>,
    /// Per write: the pages it carried, by block.
    pub(super) tags: HashMap<usize, HashMap<u64, Tag>>,
    /// Per journal block: (submission time, index into `record.log_writes`), in time order.
    pub(super) log_by_block: HashMap<u64, Vec<(Nanos, usize)>>,
    /// Per log offset: its device block.
    pub(super) offset_block: HashMap<u64, u64>,
    /// Per directory block: the transactions that logged it, in tid order, with what its
    /// copy holds (the record's `dir_blocks` entry).
    pub(super) dir_versions: BTreeMap<u64, Vec<(u64, usize)>>,
    /// Per transaction: the log offset of its first block (first descriptor, else commit).
    pub(super) tid_start: HashMap<u64, u64>,
    /// (ino, index) -> (tid, version, home block) journaled, in tid order.
    pub(super) journaled: JournaledCopies,
    pub(super) seed: u64,
    /// Torn multi-block requests ([`Prepared::torn`]).
    pub(super) torn: bool,
}

impl<'a> Prepared<'a> {
    pub fn new(history: &'a WriteHistory, record: &'a CrashRecord, seed: u64) -> Prepared<'a> {
        let writes = &history.writes;
        // A flush persists what completed before it started: per write, the earliest
        // completion of a flush that started at or after the write completed.
        let mut flushes = history.flushes.clone();
        flushes.sort_unstable();
        let mut suffix_min = vec![Nanos::MAX; flushes.len() + 1];
        for i in (0..flushes.len()).rev() {
            suffix_min[i] = suffix_min[i + 1].min(flushes[i].1);
        }
        let durable_at = writes
            .iter()
            .map(|w| {
                if !history.volatile_cache || w.fua {
                    return Some(w.done_ns);
                }
                let first = flushes.partition_point(|&(start, _)| start < w.done_ns);
                let done = suffix_min[first];
                (done != Nanos::MAX).then_some(done)
            })
            .collect();
        let by_id: HashMap<u64, usize> =
            writes.iter().enumerate().map(|(i, w)| (w.id, i)).collect();
        let mut tags: HashMap<usize, HashMap<u64, Tag>> = HashMap::new();
        for (id, list) in &record.tags {
            if let Some(&i) = by_id.get(id) {
                let entry = tags.entry(i).or_default();
                for t in list {
                    entry.insert(t.block, *t);
                }
            }
        }
        // Blocks of interest: those tagged writes cover, every journaled page's home and
        // every commit block.
        let mut interesting: Vec<u64> = tags.values().flat_map(|m| m.keys().copied()).collect();
        let mut journaled: JournaledCopies = HashMap::new();
        for (&tid, t) in &record.tids {
            for &(ino, index, version, block) in &t.journaled {
                journaled
                    .entry((ino, index))
                    .or_default()
                    .push((tid, version, block));
                interesting.push(block);
            }
            if let Some((block, _)) = t.commit {
                interesting.push(block);
            }
            for f in &t.files {
                for &(_, pblk, len) in &f.extents {
                    interesting.extend(pblk..pblk + len);
                }
            }
        }
        let mut log_by_block: HashMap<u64, Vec<(Nanos, usize)>> = HashMap::new();
        let mut offset_block = HashMap::new();
        // A transaction starts at its first descriptor block (submitted in log order), or at
        // its commit block when it logged no copy.
        let mut tid_start: HashMap<u64, u64> = HashMap::new();
        let mut commit_at: HashMap<u64, u64> = HashMap::new();
        for (k, w) in record.log_writes.iter().enumerate() {
            log_by_block.entry(w.block).or_default().push((w.at, k));
            offset_block.insert(w.offset, w.block);
            interesting.push(w.block);
            match w.content {
                LogContent::Descriptor { tid, .. } => {
                    tid_start.entry(tid).or_insert(w.offset);
                }
                LogContent::Commit { tid, .. } => {
                    commit_at.entry(tid).or_insert(w.offset);
                }
                _ => {}
            }
        }
        for (tid, offset) in commit_at {
            tid_start.entry(tid).or_insert(offset);
        }
        for list in log_by_block.values_mut() {
            list.sort_by_key(|&(at, k)| (at, k));
        }
        let mut dir_versions: BTreeMap<u64, Vec<(u64, usize)>> = BTreeMap::new();
        for (&tid, t) in &record.tids {
            for (k, (block, _, _)) in t.dir_blocks.iter().enumerate() {
                dir_versions.entry(*block).or_default().push((tid, k));
            }
        }
        interesting.sort_unstable();
        interesting.dedup();
        let mut by_block: HashMap<u64, Vec<usize>> =
            interesting.iter().map(|&b| (b, Vec::new())).collect();
        let mut order: Vec<usize> = (0..writes.len()).collect();
        order.sort_by_key(|&i| (writes[i].start_ns, i));
        for &i in &order {
            let w = &writes[i];
            let first = w.sector / 8;
            let last = (w.sector + u64::from(w.sectors)).div_ceil(8);
            for b in first..last {
                if let Some(list) = by_block.get_mut(&b) {
                    list.push(i);
                }
            }
        }
        Prepared {
            record,
            history,
            durable_at,
            by_block,
            tags,
            log_by_block,
            offset_block,
            dir_versions,
            tid_start,
            journaled,
            seed,
            torn: false,
        }
    }

    /// With `torn`, a multi-block request the device had not made durable may reach flash
    /// in part: a prefix of its blocks, 1 to all, drawn per write and crash point (asm: the
    /// device programs a request's 4 KiB blocks in order and each block atomically; neither
    /// eMMC without reliable write nor UFS promises a request atomic, so power lost
    /// mid-request may leave part of it). Without it (the default), a request survives or is
    /// lost whole.
    pub fn torn(mut self, torn: bool) -> Prepared<'a> {
        self.torn = torn;
        self
    }

    /// Whether write `i` reached flash at `block` in crash state (`at`, `point`): as
    /// [`Prepared::survives`], and with torn requests only within the prefix drawn.
    pub(super) fn survives_at(&self, i: usize, block: u64, at: Nanos, point: u64) -> bool {
        if !self.survives(i, at, point) {
            return false;
        }
        if !self.torn || self.durable(i, at) {
            return true;
        }
        let w = &self.history.writes[i];
        let first = w.sector / 8;
        let blocks = (w.sector + u64::from(w.sectors)).div_ceil(8) - first;
        let prefix = 1 + mix(self.seed ^ TORN_SALT, point, i as u64) % blocks.max(1);
        block < first + prefix
    }

    /// Whether write `i` reached flash in crash state (`at`, `point`).
    pub(super) fn survives(&self, i: usize, at: Nanos, point: u64) -> bool {
        let w = &self.history.writes[i];
        if w.start_ns >= at {
            return false;
        }
        if w.done_ns <= at && self.durable_at[i].is_some_and(|d| d <= at) {
            return true;
        }
        coin(self.seed, point, i as u64)
    }

    pub(super) fn durable(&self, i: usize, at: Nanos) -> bool {
        let w = &self.history.writes[i];
        w.start_ns < at && w.done_ns <= at && self.durable_at[i].is_some_and(|d| d <= at)
    }

    /// The write block `block` holds in crash state (`at`, `point`): the last durable one, or
    /// a later-started undetermined one that reached flash.
    pub(super) fn holder(&self, block: u64, at: Nanos, point: u64) -> Option<usize> {
        let list = self.by_block.get(&block)?;
        let started = list.partition_point(|&i| self.history.writes[i].start_ns < at);
        let mut chosen = None;
        for &i in list[..started].iter().rev() {
            if self.durable(i, at) {
                return chosen.or(Some(i));
            }
            if chosen.is_none() && self.survives_at(i, block, at, point) {
                chosen = Some(i);
            }
        }
        chosen
    }

    /// What log offset `offset` holds in crash state (`at`, `point`): the content of the
    /// surviving write of its block (`None`: no write of the run survived there; mkfs left
    /// the journal zeroed, no jbd2 magic).
    pub(super) fn log_content(&self, offset: u64, at: Nanos, point: u64) -> Option<&LogContent> {
        let block = *self.offset_block.get(&offset)?;
        let i = self.holder(block, at, point)?;
        let start = self.history.writes[i].start_ns;
        let list = self.log_by_block.get(&block)?;
        let k = list.partition_point(|&(submitted, _)| submitted <= start);
        let (_, index) = *list.get(k.checked_sub(1)?)?;
        Some(&self.record.log_writes[index].content)
    }

    /// The next log offset (`wrap` in fs/jbd2/recovery.c: the ring is `1..log_blocks`).
    pub(super) fn next_offset(&self, offset: u64) -> u64 {
        let blocks = self.record.log_blocks;
        if blocks > 1 && offset + 1 >= blocks {
            offset + 1 - (blocks - 1)
        } else {
            offset + 1
        }
    }

    /// jbd2's recovery of the log as it is in crash state (`at`, `point`): `do_one_pass`
    /// (fs/jbd2/recovery.c, 3.10; mainline's is the same for what the model writes).
    ///
    /// - `PASS_SCAN`: from the journal superblock's `s_sequence` and that transaction's
    ///   first block, each block must carry jbd2's magic and the expected sequence, else the
    ///   log ends there. A descriptor block is skipped with the blocks its tags name; a commit
    ///   block ends its transaction and the next one is expected. With
    ///   `JBD2_FEATURE_COMPAT_CHECKSUM` (`journal_async_commit`), the commit block's crc32
    ///   must match the descriptor blocks and copies read (`calc_chksums`): a mismatch ends
    ///   the log before that transaction (`info->end_transaction`).
    /// - `PASS_REVOKE`: the model's jbd2 writes no revoke blocks (`src/fs/jbd2`'s
    ///   simplifications), so no block is revoked.
    /// - `PASS_REPLAY`: every copy a replayed transaction's descriptors name is written home,
    ///   whatever its log block holds: without checksums nothing tells a stale block from the
    ///   copy, so a copy whose block did not survive is a [`BadReplay`].
    pub(super) fn scan_log(&self, at: Nanos, point: u64) -> LogScan {
        // The superblock: the last surviving write of offset 0; before any, the log as the
        // mount left it, transaction 1 first.
        let first = match self.log_content(0, at, point) {
            Some(&LogContent::Superblock { sequence }) => sequence,
            _ => 1,
        };
        let mut scan = LogScan {
            first,
            end: first,
            copies: HashMap::new(),
            bad: Vec::new(),
        };
        let Some(&start) = self.tid_start.get(&first) else {
            return scan;
        };
        let mut offset = start;
        let mut next = first;
        let mut slots: Vec<(u64, u64)> = Vec::new();
        let mut replay: Vec<(u64, Vec<(u64, u64)>)> = Vec::new();
        // PASS_SCAN.
        loop {
            match self.log_content(offset, at, point) {
                Some(LogContent::Descriptor { tid, homes }) if *tid == next => {
                    for &home in homes {
                        offset = self.next_offset(offset);
                        slots.push((home, offset));
                    }
                    offset = self.next_offset(offset);
                }
                Some(&LogContent::Commit { tid, checksum }) if tid == next => {
                    let intact = |&(home, slot): &(u64, u64)| {
                        self.log_content(slot, at, point) == Some(&LogContent::Copy { tid, home })
                    };
                    if checksum && !slots.iter().all(intact) {
                        break;
                    }
                    replay.push((tid, std::mem::take(&mut slots)));
                    next += 1;
                    offset = self.next_offset(offset);
                }
                _ => break,
            }
        }
        scan.end = next;
        // PASS_REPLAY (PASS_REVOKE revokes nothing).
        for (tid, slots) in replay {
            for (home, slot) in slots {
                let found = self.log_content(slot, at, point);
                let intact = found == Some(&LogContent::Copy { tid, home });
                scan.copies.insert((tid, home), intact);
                if !intact {
                    scan.bad.push(BadReplay {
                        tid,
                        home,
                        offset: slot,
                        found: found.cloned(),
                    });
                }
            }
        }
        scan
    }

    /// The names of the files under test after recovery up to transaction `tid`: each
    /// directory block as the last transaction up to `tid` that logged it left it (ext4's
    /// namei operations log every directory block they change, in the same handle); a block
    /// whose copy was replayed from a log block that did not survive holds no name.
    fn names(&self, tid: u64, scan: &LogScan) -> BTreeMap<(Ino, String), Ino> {
        let mut names = BTreeMap::new();
        for (&block, versions) in &self.dir_versions {
            let k = versions.partition_point(|&(t, _)| t <= tid);
            let Some(&(t, index)) = k.checked_sub(1).map(|k| &versions[k]) else {
                continue;
            };
            if t >= scan.first && scan.copies.get(&(t, block)) == Some(&false) {
                continue;
            }
            let (_, dir, entries) = &self.record.tids[&t].dir_blocks[index];
            for (name, ino) in entries {
                if self.record.files.contains_key(ino) {
                    names.insert((*dir, name.clone()), *ino);
                }
            }
        }
        names
    }

    /// The files under test after a crash at `at` (crash point number `point`, which draws
    /// the undetermined writes' fates).
    pub fn recover(&self, at: Nanos, point: u64) -> Recovered {
        let scan = self.scan_log(at, point);
        // The file system as the last replayed transaction left it: the last recorded
        // transaction before `end_transaction`.
        let replayed = self
            .record
            .tids
            .range(..scan.end)
            .next_back()
            .map(|(&tid, _)| tid);
        let mut files = BTreeMap::new();
        let Some(tid) = replayed else {
            return Recovered {
                replayed,
                files,
                bad_replays: scan.bad,
                names: BTreeMap::new(),
                exposed: Vec::new(),
            };
        };
        let names = self.names(tid, &scan);
        let mut exposed = Vec::new();
        let linked: std::collections::BTreeSet<Ino> = names.values().copied().collect();
        for snap in self.record.tids[&tid]
            .files
            .iter()
            .filter(|f| linked.contains(&f.ino))
        {
            let pages = (0..snap.size.div_ceil(crate::mm::crashlog::PAGE as u64))
                .map(|index| {
                    let (page, found) = self.page(snap, index, tid, &scan, at, point);
                    if let (Some(found), Some(block)) = (found, snap.block(index)) {
                        exposed.push(Exposed {
                            ino: snap.ino,
                            index,
                            block,
                            found,
                        });
                    }
                    page
                })
                .collect();
            files.insert(
                snap.ino,
                RecoveredFile {
                    ino: snap.ino,
                    size: snap.size,
                    pages,
                },
            );
        }
        Recovered {
            replayed,
            files,
            bad_replays: scan.bad,
            names,
            exposed,
        }
    }

    /// Page `index` of the file `snap` (transaction `tid`'s view) in crash state (`at`,
    /// `point`): the version the surviving write at its block carried; or the version a
    /// replayed transaction journaled for that block, whichever is newer (*foreign* if that
    /// copy's log block did not survive); zeros where no write of the file reached it. With
    /// it, for a mapped page holding no version of itself, what the block holds instead.
    fn page(
        &self,
        snap: &crate::mm::crashlog::FileSnapshot,
        index: u64,
        tid: u64,
        scan: &LogScan,
        at: Nanos,
        point: u64,
    ) -> (PageState, Option<Found>) {
        let block = snap.block(index);
        let (home, found) = match block {
            None => (PageState::Zero, None),
            Some(b) => match self.holder(b, at, point) {
                None => (PageState::Zero, Some(Found::NeverWritten)),
                Some(i) => match self.tags.get(&i).and_then(|m| m.get(&b)) {
                    Some(t) if t.ino == snap.ino && t.index == index => {
                        (PageState::Version(t.version), None)
                    }
                    Some(t) => (
                        PageState::Foreign,
                        Some(Found::OtherPage {
                            ino: t.ino,
                            index: t.index,
                            version: t.version,
                        }),
                    ),
                    None => (
                        PageState::Foreign,
                        Some(Found::NotFileData {
                            write: self.history.writes[i].id,
                        }),
                    ),
                },
            },
        };
        // The newest journaled copy up to the replayed transaction: replayed from the log
        // (garbage when its log block did not survive) or, before the log's start,
        // checkpointed home.
        let journaled = self.journaled.get(&(snap.ino, index)).and_then(|list| {
            list.iter()
                .rev()
                .find(|&&(t, _, home)| t <= tid && Some(home) == block)
                .map(|&(t, version, home)| {
                    let intact =
                        t < scan.first || scan.copies.get(&(t, home)).copied().unwrap_or(true);
                    (t, version, intact)
                })
        });
        match (home, journaled) {
            (_, Some((t, _, false))) => (PageState::Foreign, Some(Found::LostLogCopy { tid: t })),
            (PageState::Version(h), Some((_, j, true))) => (PageState::Version(h.max(j)), None),
            (_, Some((_, j, true))) => (PageState::Version(j), None),
            (home, None) => (home, found),
        }
    }
}

/// A fair coin per (seed, crash point, write).
fn coin(seed: u64, point: u64, write: u64) -> bool {
    mix(seed, point, write) & 1 == 1
}

/// Salt of the torn prefix's draw (independent of the survival coin's).
const TORN_SALT: u64 = 0x7E57_0F7E_A2ED_0001;

/// SplitMix64 of (seed, crash point, write).
fn mix(seed: u64, point: u64, write: u64) -> u64 {
    let mut z = seed
        ^ point.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ write.wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dev::crash::WriteRecord;
    use crate::mm::crashlog::{CrashLog, FileSnapshot, LogContent, TrackedFile};

    fn write(id: u64, block: u64, start: Nanos, done: Nanos, fua: bool) -> WriteRecord {
        WriteRecord {
            id,
            sector: block * 8,
            sectors: 8,
            fua,
            start_ns: start,
            done_ns: done,
        }
    }

    /// One file, one page at block 100; its data write (request 1) and tid 1's commit block
    /// at log block 9000 (request 2, preflush + FUA).
    fn run() -> (WriteHistory, CrashRecord) {
        let log = CrashLog::new(1 << 20);
        log.track(
            0,
            12,
            TrackedFile {
                path: "/f".into(),
                app: "a".into(),
                dir: 2,
                name: "f".into(),
                mobifs: false,
            },
        );
        log.page_written(1, 12, 0);
        log.size(1, 12, 4096);
        log.device_write(1, log.tags_for(Some(12), 0, 100, 1));
        log.tid_flush(
            1,
            vec![FileSnapshot {
                ino: 12,
                linked: true,
                size: 4096,
                extents: vec![(0, 100, 1)],
            }],
        );
        log.journal_layout(1024);
        log.tid_directory_blocks(1, vec![(50, 2, vec![("f".into(), 12)])]);
        log.tid_commit(1, 9000, 20);
        log.log_write(
            9000,
            1,
            20,
            LogContent::Commit {
                tid: 1,
                checksum: false,
            },
        );
        let mut h = WriteHistory::new(true);
        h.record_write(write(1, 100, 10, 15, false));
        h.record_flush(25, 25); // the commit's preflush
        h.record_write(write(2, 9000, 25, 30, true));
        (h, log.record())
    }

    /// Transaction 1 logs a copy of metadata block 500: its descriptor at log offset 1
    /// (block 9001, request 3), the copy at offset 2 (block 9002, request 4, completing at
    /// `copy_done`), its commit block at offset 3 (block 9003, request 5: the preflush at 25,
    /// then FUA). A copy completing after the preflush started is not made durable by it (the
    /// commit block reached the media first: mutant (a)'s ordering).
    fn logged(copy_done: Nanos, checksum: bool) -> (WriteHistory, CrashRecord) {
        let log = CrashLog::new(1 << 20);
        log.journal_layout(1024);
        log.tid_flush(1, Vec::new());
        let entries = [
            (
                9001,
                1,
                LogContent::Descriptor {
                    tid: 1,
                    homes: vec![500],
                },
            ),
            (9002, 2, LogContent::Copy { tid: 1, home: 500 }),
            (9003, 3, LogContent::Commit { tid: 1, checksum }),
        ];
        for (block, offset, content) in entries {
            log.log_write(block, offset, 12, content);
        }
        let mut h = WriteHistory::new(true);
        h.record_write(write(3, 9001, 12, 15, false));
        h.record_write(write(4, 9002, 12, copy_done, false));
        h.record_flush(25, 25);
        h.record_write(write(5, 9003, 25, 30, true));
        (h, log.record())
    }

    #[test]
    fn do_one_pass_replays_a_whole_transaction() {
        let (h, r) = logged(16, false);
        let p = Prepared::new(&h, &r, 1);
        for point in 0..32 {
            let after = p.recover(31, point);
            assert_eq!(after.replayed, Some(1));
            assert!(after.bad_replays.is_empty(), "{:?}", after.bad_replays);
        }
    }

    /// 3.10's do_one_pass without checksums replays a transaction whose descriptor and commit
    /// blocks survived whatever its copies' blocks hold.
    #[test]
    fn do_one_pass_without_checksums_replays_a_copy_that_did_not_survive() {
        let (h, r) = logged(28, false);
        let p = Prepared::new(&h, &r, 1);
        let states: Vec<Recovered> = (0..64).map(|point| p.recover(31, point)).collect();
        assert!(states.iter().all(|s| s.replayed == Some(1)));
        let bad: Vec<&BadReplay> = states.iter().flat_map(|s| &s.bad_replays).collect();
        assert!(!bad.is_empty(), "some points lose the copy");
        assert!(bad.len() < 64, "some points keep it");
        assert_eq!(
            *bad[0],
            BadReplay {
                tid: 1,
                home: 500,
                offset: 2,
                found: None
            }
        );
    }

    /// With JBD2_FEATURE_COMPAT_CHECKSUM (journal_async_commit) the commit block's crc32 does
    /// not match a lost copy: do_one_pass ends the log before the transaction.
    #[test]
    fn do_one_pass_with_checksums_refuses_a_transaction_with_a_lost_copy() {
        let (h, r) = logged(28, true);
        let p = Prepared::new(&h, &r, 1);
        let outcomes: std::collections::BTreeSet<Option<u64>> = (0..64)
            .map(|point| p.recover(31, point))
            .inspect(|s| assert!(s.bad_replays.is_empty()))
            .map(|s| s.replayed)
            .collect();
        assert_eq!(outcomes, [None, Some(1)].into_iter().collect());
    }

    /// A lost descriptor block ends the log (no jbd2 magic where PASS_SCAN expects one).
    #[test]
    fn do_one_pass_stops_at_a_lost_descriptor() {
        let (mut h, r) = logged(16, false);
        h.writes[0].done_ns = 27; // the descriptor completes after the preflush started
        let p = Prepared::new(&h, &r, 1);
        let outcomes: std::collections::BTreeSet<Option<u64>> =
            (0..64).map(|point| p.recover(31, point).replayed).collect();
        assert_eq!(outcomes, [None, Some(1)].into_iter().collect());
    }

    /// The journal superblock's s_sequence: the scan starts at that transaction (earlier ones
    /// were checkpointed), whatever is left of theirs in the log.
    #[test]
    fn the_scan_starts_at_the_superblocks_sequence() {
        let (mut h, r) = logged(16, false);
        let mut r = r;
        r.tids.insert(2, Default::default());
        r.tids.insert(3, Default::default());
        r.log_writes.push(crate::mm::crashlog::LogWrite {
            block: 8999,
            offset: 0,
            at: 40,
            content: LogContent::Superblock { sequence: 3 },
        });
        h.record_write(write(6, 8999, 40, 45, true));
        let p = Prepared::new(&h, &r, 1);
        assert_eq!(p.recover(40, 0).replayed, Some(1), "no superblock yet");
        let after = p.recover(46, 0);
        assert_eq!(after.replayed, Some(2), "transactions before 3 are home");
    }

    #[test]
    fn a_committed_transaction_brings_back_its_ordered_data() {
        let (h, r) = run();
        let p = Prepared::new(&h, &r, 1);
        let after = p.recover(31, 0);
        assert_eq!(after.replayed, Some(1));
        assert_eq!(after.files[&12].pages, vec![PageState::Version(1)]);
        let before_commit = p.recover(24, 0);
        assert_eq!(before_commit.replayed, None, "no commit block yet");
        assert!(before_commit.files.is_empty());
    }

    #[test]
    fn an_in_flight_commit_survives_on_some_crash_points_only() {
        let (h, r) = run();
        let p = Prepared::new(&h, &r, 1);
        let outcomes: std::collections::BTreeSet<Option<u64>> =
            (0..64).map(|point| p.recover(28, point).replayed).collect();
        assert_eq!(outcomes, [None, Some(1)].into_iter().collect());
    }

    #[test]
    fn an_unflushed_data_write_may_be_lost_behind_a_commit_without_barrier() {
        // The same run without the preflush and FUA: the data write is undetermined at any
        // crash, so some crash states have the committed size over a block never written.
        let (mut h, r) = run();
        h.flushes.clear();
        h.writes[1].fua = false;
        let p = Prepared::new(&h, &r, 1);
        let pages: std::collections::BTreeSet<Vec<PageState>> = (0..64)
            .map(|point| p.recover(1000, point))
            .filter(|s| s.replayed == Some(1))
            .map(|s| s.files[&12].pages.clone())
            .collect();
        assert!(pages.contains(&vec![PageState::Zero]), "{pages:?}");
        assert!(pages.contains(&vec![PageState::Version(1)]), "{pages:?}");
    }

    /// Ordered mode's promise (check 6): a committed extent whose data write did not survive
    /// exposes its block (what `jbd2_journal_commit_transaction` prevents by waiting for the
    /// ordered data before the commit block); a surviving write exposes nothing.
    #[test]
    fn a_committed_extent_over_a_lost_data_write_exposes_its_block() {
        let (mut h, r) = run();
        h.flushes.clear();
        h.writes[1].fua = false;
        let p = Prepared::new(&h, &r, 1);
        let states: Vec<Recovered> = (0..64)
            .map(|point| p.recover(1000, point))
            .filter(|s| s.replayed == Some(1))
            .collect();
        for s in &states {
            let zero = s.files[&12].pages == vec![PageState::Zero];
            let expected = zero.then_some(Exposed {
                ino: 12,
                index: 0,
                block: 100,
                found: Found::NeverWritten,
            });
            assert_eq!(s.exposed.first(), expected.as_ref(), "{s:?}");
        }
        assert!(states.iter().any(|s| !s.exposed.is_empty()));
    }

    /// A torn request: the descriptor and its copy merged into one two-block write, not yet
    /// durable when the commit block is (no preflush before it). Whole requests keep or lose
    /// both; torn ones may keep the descriptor without the copy, which 3.10's `do_one_pass`
    /// (no checksums) replays anyway (check 4).
    #[test]
    fn a_torn_request_keeps_a_descriptor_without_its_copy() {
        let (mut h, r) = logged(16, false);
        // One merged request over blocks 9001-9002 (the descriptor and the copy).
        h.writes.remove(1);
        h.writes[0].sectors = 16;
        h.writes[0].done_ns = 28;
        let bad = |p: &Prepared| {
            (0..64)
                .filter(|&k| !p.recover(31, k).bad_replays.is_empty())
                .count()
        };
        let whole = Prepared::new(&h, &r, 1);
        assert_eq!(
            bad(&whole),
            0,
            "a whole request keeps its copy with its descriptor"
        );
        let torn = Prepared::new(&h, &r, 1).torn(true);
        let n = bad(&torn);
        assert!(n > 0 && n < 64, "{n} of 64 points replay a lost copy");
    }

    /// A hole inside the size (no block mapped) reads zeros by the file system's own map: not
    /// an exposed block.
    #[test]
    fn a_hole_is_not_an_exposed_block() {
        let (h, mut r) = run();
        let snap = &mut r.tids.get_mut(&1).unwrap().files[0];
        snap.size = 3 * 4096;
        let p = Prepared::new(&h, &r, 1);
        let s = p.recover(31, 0);
        assert_eq!(
            s.files[&12].pages,
            vec![PageState::Version(1), PageState::Zero, PageState::Zero]
        );
        assert!(s.exposed.is_empty(), "{:?}", s.exposed);
    }
}
