//! The checks of a crash state ([`super::recover::Recovered`]) against what the run did:
//!
//! - **point in time**: an app's files equal the app's own state at some instant no later
//!   than the crash (for an app MobiFS covers: at some VCT boundary, its promise, seed 004
//!   §4.2); with plain ext4 an app's files need not be point-in-time (SQLite's journal is what
//!   makes its database consistent), so there the result is reported, not a violation;
//! - **fsync durability**: on ext4 without MobiFS, a file's last fsync that returned before
//!   the crash must have made its data durable: each page at least as new as fsync saw it,
//!   the file linked and at least as long (skipped when the app truncated or unlinked it
//!   since; MobiFS's fsync is asynchronous by design, so its files are not held to it).

use super::recover::{Exposed, Found, PageState, Recovered};
use crate::mm::crashlog::{CrashRecord, FileEventKind, RenameRecord, PAGE};
use crate::mm::Ino;
use crate::units::Nanos;
use std::collections::{BTreeMap, HashMap};

/// What a point-in-time state must match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Consistency {
    /// Names and data, at any instant (what plain ext4 would have to give).
    Files,
    /// Data, at one of the app's VCT boundaries (MobiFS's promise, seed 004 §4.2).
    VctData,
    /// Data, at any instant.
    Data,
}

/// Whether `app`'s files in `state` equal its state after some prefix of the events that
/// happened by `at`. Returns the position of the first such prefix.
///
/// [`Consistency::VctData`]: the prefix must end at one of the app's VCT boundaries;
/// [`Consistency::VctData`] and [`Consistency::Data`] compare only the files' data (size and
/// pages; an absent file counts as empty): MobiFS logs data, and names go to ext4 at once (a
/// file's creation is durable before its first VCT), so its promise is about data.
pub fn point_in_time(
    record: &CrashRecord,
    app: &str,
    consistency: Consistency,
    state: &Recovered,
    at: Nanos,
) -> Option<usize> {
    let data_only = consistency != Consistency::Files;
    let mobifs = consistency == Consistency::VctData;
    let files: Vec<Ino> = record
        .files
        .iter()
        .filter(|(_, f)| f.app == app)
        .map(|(&ino, _)| ino)
        .collect();
    // The target per file: None (absent) or (size, pages).
    let target: HashMap<Ino, Option<(u64, &[PageState])>> = files
        .iter()
        .map(|ino| {
            let t = state.files.get(ino).map(|f| (f.size, f.pages.as_slice()));
            (*ino, if data_only { t.or(Some((0, &[]))) } else { t })
        })
        .collect();
    if target
        .values()
        .flatten()
        .any(|(_, pages)| pages.contains(&PageState::Foreign))
    {
        return None;
    }
    // The current state and how many of its components differ from the target.
    let mut linked: HashMap<Ino, bool> = files.iter().map(|&i| (i, false)).collect();
    let mut size: HashMap<Ino, u64> = files.iter().map(|&i| (i, 0)).collect();
    let mut pages: HashMap<(Ino, u64), u64> = HashMap::new();
    let want_page = |ino: Ino, index: u64| -> Option<u64> {
        let (_, p) = target[&ino]?;
        match p.get(index as usize)? {
            PageState::Version(v) => Some(*v),
            _ => Some(0),
        }
    };
    let mut mismatch = 0i64;
    for &ino in &files {
        if let Some((s, p)) = target[&ino] {
            mismatch += i64::from(!data_only); // linked
            mismatch += i64::from(s != 0);
            mismatch += p.iter().filter(|&&x| x != PageState::Zero).count() as i64;
        }
    }
    let boundaries: Vec<usize> = if mobifs {
        let mut b: Vec<usize> = record
            .vct_closes
            .iter()
            .filter(|(a, _)| a == app)
            .map(|&(_, p)| p)
            .collect();
        b.sort_unstable();
        b
    } else {
        Vec::new()
    };
    let mut next_boundary = 0usize;
    let counts = |position: usize, next_boundary: &mut usize| -> bool {
        if !mobifs {
            return true;
        }
        while *next_boundary < boundaries.len() && boundaries[*next_boundary] < position {
            *next_boundary += 1;
        }
        *next_boundary < boundaries.len() && boundaries[*next_boundary] == position
    };
    // The state before the first event (no file yet) is every app's first state.
    if mismatch == 0 {
        return Some(0);
    }
    for (position, e) in record.events.iter().enumerate() {
        if e.at > at {
            break;
        }
        let Some(t) = target.get(&e.ino) else {
            continue;
        };
        let ino = e.ino;
        // Under MobiFS an unlink empties the file, as far as its data go.
        let kind = match e.kind {
            FileEventKind::Unlinked if data_only => FileEventKind::Truncated(0),
            FileEventKind::Created if data_only => continue,
            kind => kind,
        };
        match kind {
            FileEventKind::Created | FileEventKind::Unlinked => {
                let now = e.kind == FileEventKind::Created;
                let was = linked.insert(ino, now).unwrap_or(false);
                let want = t.is_some();
                mismatch += i64::from(now != want) - i64::from(was != want);
            }
            FileEventKind::Written { index, version } => {
                let old = pages.insert((ino, index), version).unwrap_or(0);
                if let Some(want) = want_page(ino, index) {
                    mismatch += i64::from(old == want) - i64::from(version == want);
                }
            }
            FileEventKind::Size(s) | FileEventKind::Truncated(s) => {
                let old = size.insert(ino, s).unwrap_or(0);
                if let Some((want, _)) = *t {
                    mismatch += i64::from(old == want) - i64::from(s == want);
                }
                if matches!(kind, FileEventKind::Truncated(_)) {
                    let first_gone = s.div_ceil(PAGE as u64);
                    let gone: Vec<u64> = pages
                        .keys()
                        .filter(|&&(i, index)| i == ino && index >= first_gone)
                        .map(|&(_, index)| index)
                        .collect();
                    for index in gone {
                        let old = pages.remove(&(ino, index)).unwrap_or(0);
                        if let Some(want) = want_page(ino, index) {
                            mismatch += i64::from(old == want) - i64::from(want == 0);
                        }
                    }
                }
            }
        }
        if mismatch == 0 && counts(position + 1, &mut next_boundary) {
            return Some(position + 1);
        }
    }
    None
}

/// The rename promise (POSIX `rename(2)`, which Android's `AtomicFile` and
/// `SharedPreferences` rely on: write `<name>.new`, fsync it, rename it over `<name>`): after
/// a crash, a name some file under test was renamed to holds one of the files renamed over it,
/// whole (its size and every page as they were when it was renamed): the last one renamed
/// before the recovered transaction's `T_FLUSH` or a later one; it may be absent only if no
/// rename onto it had to be in. Returns a violation, described, or `None`.
pub fn rename_atomicity(
    record: &CrashRecord,
    state: &Recovered,
    at: Nanos,
    path: &str,
) -> Option<String> {
    let renames: Vec<&RenameRecord> = record
        .renames
        .iter()
        .filter(|r| r.path == path && r.at <= at)
        .collect();
    let last = renames.last()?;
    let visible = state
        .replayed
        .and_then(|t| record.tids.get(&t))
        .map_or(0, |t| t.renames_before);
    let must = record.renames[..visible.min(record.renames.len())]
        .iter()
        .filter(|r| r.path == path)
        .count();
    let found = state.names.get(&(last.dir, last.name.clone())).copied();
    let Some(ino) = found else {
        return (must > 0).then(|| {
            format!(
                "{path} is absent, but the rename over it at {} ns was in the recovered \
                 transaction",
                renames[must - 1].at
            )
        });
    };
    let whole = |r: &RenameRecord| {
        r.ino == ino
            && state.files.get(&ino).is_some_and(|f| {
                f.size == r.size
                    && r.pages.iter().all(|&(index, version)| {
                        index >= f.pages.len() as u64
                            || f.pages[index as usize] == PageState::Version(version)
                    })
            })
    };
    let first = must.saturating_sub(1);
    if renames[first..].iter().any(|r| whole(r)) {
        return None;
    }
    let file = state
        .files
        .get(&ino)
        .map_or("no such file".to_string(), |f| {
            format!(
                "size {}, pages {:?}",
                f.size,
                f.pages.iter().take(4).collect::<Vec<_>>()
            )
        });
    Some(format!(
        "{path} is inode {ino} ({file}): not whole any file renamed over it since the rename \
         at {} ns (inode {}, size {})",
        renames[first].at, renames[first].ino, renames[first].size
    ))
}

/// Ordered mode's promise (ext4 `data=ordered`, Documentation/filesystems/ext4: "all data
/// are forced directly out to the main file system prior to its metadata being committed to
/// the journal"): after recovery, no mapped block inside a file's size holds anything but a
/// version of that page of that file. A transaction that maps a block into a file (the extent
/// and `i_disksize` of the flusher's allocation) commits only after the block's data is on
/// the media: `jbd2_journal_commit_transaction` submits the data of the inodes filed on the
/// transaction (`journal_submit_data_buffers`) and waits for it
/// (`journal_finish_inode_data_buffers`) before its commit block, whose preflush then makes
/// it durable. Holes read zeros by the file system's own map and are not exposures.
///
/// Returns, per file under test present in `state` (in inode order), `None` or the violation
/// described: the first exposed page, what its block holds, the transaction that mapped it.
pub fn ordered_data(record: &CrashRecord, state: &Recovered) -> Vec<(Ino, Option<String>)> {
    state
        .files
        .values()
        .map(|file| {
            let mut exposed = state.exposed.iter().filter(|e| e.ino == file.ino);
            let violation = exposed.next().map(|first| {
                let more = exposed.count();
                format!(
                    "{} page {} (block {}) inside its recovered size of {} B holds {}; {}{}",
                    record.files[&file.ino].path,
                    first.index,
                    first.block,
                    file.size,
                    describe_found(record, first.found),
                    mapped_by(record, state, first),
                    match more {
                        0 => String::new(),
                        n => format!(" ({n} more such pages)"),
                    }
                )
            });
            (file.ino, violation)
        })
        .collect()
}

/// What an exposed block holds, in words.
fn describe_found(record: &CrashRecord, found: Found) -> String {
    match found {
        Found::NeverWritten => {
            "no write of the run (what the block held before: stale data, zeros after mkfs)".into()
        }
        Found::OtherPage {
            ino,
            index,
            version,
        } => format!(
            "version {version} of page {index} of {} (freed and reallocated)",
            record
                .files
                .get(&ino)
                .map_or("another file", |f| f.path.as_str())
        ),
        Found::NotFileData { write } => {
            format!("request {write}'s data, not this file's (metadata or another file)")
        }
        Found::LostLogCopy { tid } => {
            format!("transaction {tid}'s journaled copy, whose log block did not survive")
        }
    }
}

/// The transaction that made `e`'s block part of its file: the earliest of the transactions
/// up to the replayed one that map it without a break, with its commit block's submission.
fn mapped_by(record: &CrashRecord, state: &Recovered, e: &Exposed) -> String {
    let Some(replayed) = state.replayed else {
        return String::new();
    };
    let maps = |t: &crate::mm::crashlog::TidRecord| {
        t.files.iter().any(|f| {
            f.ino == e.ino && f.block(e.index) == Some(e.block) && f.size > e.index * PAGE as u64
        })
    };
    let mut first = None;
    for (&tid, t) in record.tids.range(..=replayed).rev() {
        if !maps(t) {
            break;
        }
        first = Some((tid, t.commit));
    }
    match first {
        Some((tid, Some((_, at)))) => format!(
            "transaction {tid} mapped it (commit block submitted at {at} ns) and is replayed \
             without the block's data"
        ),
        Some((tid, None)) => format!("transaction {tid} mapped it"),
        None => String::new(),
    }
}

/// An fsync whose data did not survive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostFsync {
    pub ino: Ino,
    pub fsync_end: Nanos,
    pub what: String,
}

/// Outcome of the fsync check at one crash point.
#[derive(Debug, Clone, Default)]
pub struct FsyncOutcome {
    /// Files whose last completed fsync was checked.
    pub checked: u64,
    /// Skipped: truncated or unlinked since that fsync.
    pub skipped: u64,
    pub lost: Vec<LostFsync>,
}

/// Per file, the fsyncs (record indexes) in order of completion.
pub fn fsyncs_by_file(record: &CrashRecord) -> BTreeMap<Ino, Vec<usize>> {
    let mut by: BTreeMap<Ino, Vec<usize>> = BTreeMap::new();
    for (i, f) in record.fsyncs.iter().enumerate() {
        if f.end.is_some() && !f.mobifs {
            by.entry(f.ino).or_default().push(i);
        }
    }
    for list in by.values_mut() {
        list.sort_by_key(|&i| (record.fsyncs[i].end, i));
    }
    by
}

/// Truncates and unlinks per file, by time.
pub fn shrinks_by_file(record: &CrashRecord) -> BTreeMap<Ino, Vec<Nanos>> {
    let mut by: BTreeMap<Ino, Vec<Nanos>> = BTreeMap::new();
    for e in &record.events {
        if matches!(
            e.kind,
            FileEventKind::Truncated(_) | FileEventKind::Unlinked
        ) {
            by.entry(e.ino).or_default().push(e.at);
        }
    }
    by
}

/// The fsync check at a crash at `at`.
pub fn fsync_durability(
    record: &CrashRecord,
    by_file: &BTreeMap<Ino, Vec<usize>>,
    shrinks: &BTreeMap<Ino, Vec<Nanos>>,
    state: &Recovered,
    at: Nanos,
) -> FsyncOutcome {
    let mut out = FsyncOutcome::default();
    for (&ino, list) in by_file {
        let done = list.partition_point(|&i| record.fsyncs[i].end.is_some_and(|e| e <= at));
        let Some(&last) = done.checked_sub(1).map(|k| &list[k]) else {
            continue;
        };
        let f = &record.fsyncs[last];
        let shrunk = shrinks
            .get(&ino)
            .is_some_and(|s| s.iter().any(|&t| t >= f.start && t <= at));
        if shrunk {
            out.skipped += 1;
            continue;
        }
        out.checked += 1;
        let end = f.end.unwrap_or(0);
        let Some(file) = state.files.get(&ino) else {
            out.lost.push(LostFsync {
                ino,
                fsync_end: end,
                what: "the file is gone".into(),
            });
            continue;
        };
        if file.size < f.size {
            out.lost.push(LostFsync {
                ino,
                fsync_end: end,
                what: format!("size {} < {} fsynced", file.size, f.size),
            });
            continue;
        }
        let pages = f.size.div_ceil(PAGE as u64);
        for &(index, version) in f.pages.iter().filter(|&&(i, _)| i < pages) {
            let ok = matches!(file.pages.get(index as usize), Some(PageState::Version(v)) if *v >= version);
            if !ok {
                out.lost.push(LostFsync {
                    ino,
                    fsync_end: end,
                    what: format!(
                        "page {index}: {:?}, fsynced version {version}",
                        file.pages.get(index as usize)
                    ),
                });
                break;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crashcheck::recover::RecoveredFile;
    use crate::mm::crashlog::{CrashLog, TrackedFile};

    fn log_with_two_writes(mobifs: bool) -> (CrashRecord, usize) {
        let log = CrashLog::new(1 << 20);
        log.track(
            0,
            5,
            TrackedFile {
                path: "/db".into(),
                app: "a".into(),
                dir: 2,
                name: "db".into(),
                mobifs,
            },
        );
        log.page_written(10, 5, 0); // v1
        log.size(10, 5, 4096);
        log.page_written(20, 5, 1); // v2
        log.size(20, 5, 8192);
        let boundary = log.vct_closed("a");
        let rec = log.fsync_start(30, 5, 8192, mobifs).unwrap();
        log.fsync_end(rec, 40);
        log.page_written(50, 5, 0); // v3
        (log.record(), boundary)
    }

    fn state(size: u64, pages: Vec<PageState>) -> Recovered {
        Recovered {
            replayed: Some(1),
            bad_replays: Vec::new(),
            names: Default::default(),
            exposed: Vec::new(),
            files: [(
                5,
                RecoveredFile {
                    ino: 5,
                    size,
                    pages,
                },
            )]
            .into_iter()
            .collect(),
        }
    }

    #[test]
    fn a_state_the_app_had_is_point_in_time_and_a_mix_is_not() {
        let (r, _) = log_with_two_writes(false);
        let had = state(8192, vec![PageState::Version(1), PageState::Version(2)]);
        assert!(point_in_time(&r, "a", Consistency::Files, &had, 100).is_some());
        let later = state(8192, vec![PageState::Version(3), PageState::Version(2)]);
        assert!(point_in_time(&r, "a", Consistency::Files, &later, 100).is_some());
        assert!(
            point_in_time(&r, "a", Consistency::Files, &later, 45).is_none(),
            "version 3 was written after the crash"
        );
        // Page 1 without page 0's first version: never the app's state.
        let mix = state(8192, vec![PageState::Zero, PageState::Version(2)]);
        assert!(point_in_time(&r, "a", Consistency::Files, &mix, 100).is_none());
        let empty = Recovered {
            replayed: None,
            bad_replays: Vec::new(),
            names: Default::default(),
            exposed: Vec::new(),
            files: BTreeMap::new(),
        };
        assert_eq!(
            point_in_time(&r, "a", Consistency::Files, &empty, 100),
            Some(0)
        );
    }

    #[test]
    fn under_mobifs_only_vct_boundaries_count() {
        let (r, boundary) = log_with_two_writes(true);
        // Size 4096 with page 0 at v1: the app's state between its two writes, but no VCT
        // closed there.
        let between = state(4096, vec![PageState::Version(1)]);
        assert!(point_in_time(&r, "a", Consistency::Files, &between, 100).is_some());
        assert!(point_in_time(&r, "a", Consistency::VctData, &between, 100).is_none());
        // The VCT closed after the second write (its page and size).
        let at_close = state(8192, vec![PageState::Version(1), PageState::Version(2)]);
        assert_eq!(
            point_in_time(&r, "a", Consistency::VctData, &at_close, 100),
            Some(boundary)
        );
        // Created on ext4, no VCT yet: linked and empty is MobiFS's initial state (data
        // only), but not a state the app had on plain ext4 (it never had the file empty and
        // unlinked... it had it empty and linked, at creation: that one counts).
        let created = state(0, vec![]);
        assert_eq!(
            point_in_time(&r, "a", Consistency::Data, &between, 100),
            Some(3),
            "data at any instant: after the creation, the first write and its size"
        );
        assert_eq!(
            point_in_time(&r, "a", Consistency::VctData, &created, 100),
            Some(0)
        );
        assert_eq!(
            point_in_time(&r, "a", Consistency::Files, &created, 100),
            Some(1)
        );
    }

    /// Check 6 names the file, the page, the block and what it holds.
    #[test]
    fn ordered_data_reports_an_exposed_block() {
        let (r, _) = log_with_two_writes(false);
        let mut s = state(8192, vec![PageState::Version(1), PageState::Zero]);
        assert_eq!(ordered_data(&r, &s), vec![(5, None)]);
        s.exposed.push(Exposed {
            ino: 5,
            index: 1,
            block: 77,
            found: Found::NeverWritten,
        });
        let out = ordered_data(&r, &s);
        let text = out[0].1.as_deref().expect("a violation");
        assert!(
            text.starts_with(
                "/db page 1 (block 77) inside its recovered size of 8192 B holds no write"
            ),
            "{text}"
        );
    }

    #[test]
    fn fsynced_pages_must_survive_at_least_as_new() {
        let (r, _) = log_with_two_writes(false);
        let by = fsyncs_by_file(&r);
        let shrinks = shrinks_by_file(&r);
        let good = state(8192, vec![PageState::Version(3), PageState::Version(2)]);
        let out = fsync_durability(&r, &by, &shrinks, &good, 60);
        assert_eq!((out.checked, out.lost.len()), (1, 0));
        let lost = state(8192, vec![PageState::Version(1), PageState::Zero]);
        let out = fsync_durability(&r, &by, &shrinks, &lost, 60);
        assert_eq!(out.lost.len(), 1, "{:?}", out.lost);
        let out = fsync_durability(&r, &by, &shrinks, &lost, 39);
        assert_eq!(out.checked, 0, "the fsync had not returned");
        let short = state(4096, vec![PageState::Version(1)]);
        assert_eq!(
            fsync_durability(&r, &by, &shrinks, &short, 60).lost.len(),
            1
        );
    }
}
