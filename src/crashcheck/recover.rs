//! A crash state's files: what survives of the files under test if power is lost at `t`.
//!
//! 1. Each device write's fate at `t` ([`crate::dev::crash`]): durable, undetermined or never
//!    happened; an undetermined write reached flash or not by a coin drawn per write and per
//!    crash point (any subset is a state the device's cache allows).
//! 2. jbd2's recovery: transactions replay in order from the first recorded one while their
//!    commit block survives (`do_one_pass`'s scan stops at the first missing commit); the
//!    last one replayed, `T'`, gives each file's name, `i_disksize` and extent map.
//! 3. Each page below the size: the version the surviving write at its block carried, or the
//!    version a replayed transaction journaled for that block (MobiFS's VCTs, `data=journal`),
//!    whichever is newer; a block no surviving write of the file covers reads as zeros, and a
//!    block whose surviving write belonged to something else as *foreign*.
//!
//! Simplifications: sectors of a block survive together (4 KiB atomic writes); a commit block
//! that survives implies its transaction's log blocks survived (true with barriers: the commit
//! block's preflush persisted them); the log's tail is not tracked (every transaction up to
//! `T'` counts as replayed, which differs from jbd2 only for blocks a later transaction freed
//! and a replay would overwrite, which revoke records prevent in the kernel and which the
//! journaled-version rule here ignores unless the block is still the page's).

use crate::dev::crash::WriteHistory;
use crate::mm::crashlog::{CrashRecord, Tag};
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
}

/// Per page (ino, index): (tid, version, home block) of each journaled copy, in tid order.
type JournaledCopies = HashMap<(Ino, u64), Vec<(u64, u64, u64)>>;

/// The run's history prepared once for many crash points.
pub struct Prepared<'a> {
    pub record: &'a CrashRecord,
    history: &'a WriteHistory,
    /// Per write: when a flush made it durable (FUA and write-through: its completion).
    durable_at: Vec<Option<Nanos>>,
    /// Per block of interest: the writes covering it, in start order.
    by_block: HashMap<u64, Vec<usize>>,
    /// Per write: the pages it carried, by block.
    tags: HashMap<usize, HashMap<u64, Tag>>,
    /// Per transaction, in order: its commit block's write, if it was issued.
    commits: Vec<(u64, Option<usize>)>,
    /// (ino, index) -> (tid, version, home block) journaled, in tid order.
    journaled: JournaledCopies,
    seed: u64,
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
        let commits = record
            .tids
            .iter()
            .map(|(&tid, t)| {
                let write = t.commit.and_then(|(block, submitted)| {
                    by_block.get(&block).and_then(|list| {
                        list.iter()
                            .copied()
                            .find(|&i| writes[i].start_ns >= submitted)
                    })
                });
                (tid, write)
            })
            .collect();
        Prepared {
            record,
            history,
            durable_at,
            by_block,
            tags,
            commits,
            journaled,
            seed,
        }
    }

    /// Whether write `i` reached flash in crash state (`at`, `point`).
    fn survives(&self, i: usize, at: Nanos, point: u64) -> bool {
        let w = &self.history.writes[i];
        if w.start_ns >= at {
            return false;
        }
        if w.done_ns <= at && self.durable_at[i].is_some_and(|d| d <= at) {
            return true;
        }
        coin(self.seed, point, i as u64)
    }

    fn durable(&self, i: usize, at: Nanos) -> bool {
        let w = &self.history.writes[i];
        w.start_ns < at && w.done_ns <= at && self.durable_at[i].is_some_and(|d| d <= at)
    }

    /// The write block `block` holds in crash state (`at`, `point`): the last durable one, or
    /// a later-started undetermined one that reached flash.
    fn holder(&self, block: u64, at: Nanos, point: u64) -> Option<usize> {
        let list = self.by_block.get(&block)?;
        let started = list.partition_point(|&i| self.history.writes[i].start_ns < at);
        let mut chosen = None;
        for &i in list[..started].iter().rev() {
            if self.durable(i, at) {
                return chosen.or(Some(i));
            }
            if chosen.is_none() && self.survives(i, at, point) {
                chosen = Some(i);
            }
        }
        chosen
    }

    /// The files under test after a crash at `at` (crash point number `point`, which draws
    /// the undetermined writes' fates).
    pub fn recover(&self, at: Nanos, point: u64) -> Recovered {
        let mut replayed = None;
        for &(tid, write) in &self.commits {
            match write {
                Some(i) if self.survives(i, at, point) => replayed = Some(tid),
                _ => break,
            }
        }
        let mut files = BTreeMap::new();
        let Some(tid) = replayed else {
            return Recovered { replayed, files };
        };
        for snap in self.record.tids[&tid].files.iter().filter(|f| f.linked) {
            let pages = (0..snap.size.div_ceil(crate::mm::crashlog::PAGE as u64))
                .map(|index| {
                    let block = snap.block(index);
                    let home = match block {
                        None => PageState::Zero,
                        Some(b) => match self.holder(b, at, point) {
                            None => PageState::Zero,
                            Some(i) => match self.tags.get(&i).and_then(|m| m.get(&b)) {
                                Some(t) if t.ino == snap.ino && t.index == index => {
                                    PageState::Version(t.version)
                                }
                                _ => PageState::Foreign,
                            },
                        },
                    };
                    let journaled = self.journaled.get(&(snap.ino, index)).and_then(|list| {
                        list.iter()
                            .rev()
                            .find(|&&(t, _, home)| t <= tid && Some(home) == block)
                            .map(|&(_, version, _)| version)
                    });
                    match (home, journaled) {
                        (PageState::Version(h), Some(j)) => PageState::Version(h.max(j)),
                        (_, Some(j)) => PageState::Version(j),
                        (home, None) => home,
                    }
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
        Recovered { replayed, files }
    }
}

/// A fair coin per (seed, crash point, write): SplitMix64 of the three.
fn coin(seed: u64, point: u64, write: u64) -> bool {
    let mut z = seed
        ^ point.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ write.wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    z & 1 == 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dev::crash::WriteRecord;
    use crate::mm::crashlog::{CrashLog, FileSnapshot, TrackedFile};

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
        log.tid_commit(1, 9000, 20);
        let mut h = WriteHistory::new(true);
        h.record_write(write(1, 100, 10, 15, false));
        h.record_flush(25, 25); // the commit's preflush
        h.record_write(write(2, 9000, 25, 30, true));
        (h, log.record())
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
}
