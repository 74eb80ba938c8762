//! MobiFS's per-app write log and its Versioned Cache Transactions (seed 004 §4.1-§4.2).
//!
//! The write log is a chronological record of an app's writes, in sections: the *active*
//! section (the open VCT, which accepts new entries) and the *closed* section (closed VCTs,
//! protected from modification, waiting for the checkpointer). A page reverse-mapping leads
//! from a cached page to the entry holding its latest version. A write meets one of §4.2's
//! three cases ([`WriteCase`]):
//!
//! 1. the page has no reverse-mapping: a new entry is appended to the open VCT;
//! 2. the reverse-mapping points into a closed (or committing) VCT: the page is copied on
//!    write — the closed VCT keeps the old version in a private copy, a new entry for the new
//!    version goes to the open VCT, and the reverse-mapping moves to it;
//! 3. the reverse-mapping points into the open VCT: the page is overwritten in place (the only
//!    place overwriting and reordering are allowed).
//!
//! A VCT is open, then closed (never reopened), then committed: the checkpointer takes the
//! oldest closed VCT ([`WriteLog::begin_commit`]), makes its pages durable atomically, and
//! [`WriteLog::finish_commit`] evicts it: pages whose latest version it held are unpinned,
//! copies it held are freed.
//!
//! Memory: every page with a reverse-mapping is pinned in the page cache; every copy made by
//! case 2 is one more page. [`WriteLog::pinned_pages`] is their sum, what §6.1's memory limit
//! bounds.
//!
//! Simplifications:
//! - The log is a `VecDeque` of VCTs, each a map from page to version, not §6's circular array
//!   with a spinlock on the tail and a mutex on the head; the reverse-mapping is a `HashMap`
//!   (§6: a hash table with per-bucket locks). No locks: the simulation is single-threaded.
//!   Order inside a VCT is not kept: reordering inside one VCT is allowed (§4.2), and the
//!   checkpointer appends a VCT's pages in file order.
//! - A copy made by case 2 is MobiFS memory counted here, not a page of the page cache.
//! - Truncation and unlink drop a file's entries from every VCT not being committed
//!   ([`WriteLog::forget`]); a committing VCT keeps them but the checkpointer skips pages the
//!   file no longer has (so a VCT is not a point in time for a file truncated meanwhile).

use crate::mm::Ino;
use crate::units::{Nanos, PAGE_SIZE};
use std::collections::{BTreeMap, HashMap, VecDeque};

/// A VCT's identity: its sequence number in the app's log (1, 2, ...).
pub type VctId = u64;

/// Which of §4.2's three cases a write to one page met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteCase {
    /// (1) Not in the log: a new entry in the open VCT.
    Append,
    /// (2) In a closed VCT: copy-on-write, a new entry for the new version.
    CopyOnWrite,
    /// (3) In the open VCT: overwritten in place.
    Overwrite,
}

/// A VCT's life (§4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VctState {
    /// Accepts new entries (the active section).
    Open,
    /// Protected, waiting for the checkpointer (the closed section).
    Closed,
    /// The checkpointer is making it durable; still protected.
    Committing,
}

/// Removes `vct`'s entries for pages `index >= from` of `ino` (an entry that was not its
/// page's latest version was a copy, counted in `copies`). Returns whether any went.
fn drop_entries(
    vct: &mut Vct,
    rmap: &HashMap<(Ino, u64), VctId>,
    copies: &mut u64,
    ino: Ino,
    from: u64,
) -> bool {
    let gone: Vec<(Ino, u64)> = vct
        .entries
        .range((ino, from)..=(ino, u64::MAX))
        .map(|(&k, _)| k)
        .collect();
    for key in &gone {
        vct.entries.remove(key);
        if rmap.get(key) != Some(&vct.id) {
            *copies -= 1;
        }
    }
    !gone.is_empty()
}

/// One entry: a page of a file at one version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub ino: Ino,
    pub index: u64,
    /// The log's write sequence number of the last write to this page that the entry holds.
    pub version: u64,
}

/// One VCT.
#[derive(Debug, Clone)]
pub struct Vct {
    pub id: VctId,
    pub state: VctState,
    /// Its entries: page -> version held.
    entries: BTreeMap<(Ino, u64), u64>,
    pub opened_ns: Nanos,
    pub closed_ns: Option<Nanos>,
    /// Bytes written into it (§5.2's data staleness `s` of this VCT).
    pub staleness_bytes: u64,
    /// Bytes of writes that overwrote a page already in it (case 3).
    pub overwritten_bytes: u64,
    /// The size each file it touched had after its last write in it: the checkpointer makes
    /// the size durable with the data.
    pub sizes: BTreeMap<Ino, u64>,
}

impl Vct {
    fn new(id: VctId, now: Nanos) -> Vct {
        Vct {
            id,
            state: VctState::Open,
            entries: BTreeMap::new(),
            opened_ns: now,
            closed_ns: None,
            staleness_bytes: 0,
            overwritten_bytes: 0,
            sizes: BTreeMap::new(),
        }
    }

    /// Pages the checkpointer must write.
    pub fn pages(&self) -> u64 {
        self.entries.len() as u64
    }

    /// Its entries in file order.
    pub fn entries(&self) -> impl Iterator<Item = Entry> + '_ {
        self.entries.iter().map(|(&(ino, index), &version)| Entry {
            ino,
            index,
            version,
        })
    }
}

/// Counters of one write log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogStats {
    /// Page writes by case.
    pub appends: u64,
    pub copies_on_write: u64,
    pub overwrites: u64,
    /// Bytes written into the log (the app's data, before any overwrite).
    pub bytes_written: u64,
    pub vcts_closed: u64,
    pub vcts_committed: u64,
    /// Pages committed (each version once).
    pub pages_committed: u64,
}

/// Bound on the VCTs of one log (closed ones waiting plus the open one): more means the
/// checkpointer never runs, a runaway model.
pub const MAX_VCTS: usize = 1 << 16;

/// One app's write log.
#[derive(Debug, Default)]
pub struct WriteLog {
    /// Oldest first; the open VCT, if any, is last.
    vcts: VecDeque<Vct>,
    /// The page reverse-mapping: page -> the VCT holding its latest version.
    rmap: HashMap<(Ino, u64), VctId>,
    next_vct: VctId,
    next_version: u64,
    /// Entries that are not their page's latest version: copies made by case 2 (or pages
    /// truncated while their VCT was being committed), still held.
    copies: u64,
    stats: LogStats,
}

impl WriteLog {
    pub fn new() -> WriteLog {
        WriteLog {
            next_vct: 1,
            ..WriteLog::default()
        }
    }

    pub fn stats(&self) -> LogStats {
        self.stats
    }

    /// Pages pinned: every page with a reverse-mapping, plus the copies VCTs hold.
    pub fn pinned_pages(&self) -> u64 {
        self.rmap.len() as u64 + self.copies
    }

    /// Copies made by copy-on-write and still held.
    pub fn copies(&self) -> u64 {
        self.copies
    }

    /// Whether the log holds nothing.
    pub fn is_empty(&self) -> bool {
        self.vcts.iter().all(|v| v.entries.is_empty())
    }

    fn position(&self, id: VctId) -> Option<usize> {
        // VCT ids increase by one along the deque.
        let first = self.vcts.front()?.id;
        let at = usize::try_from(id.checked_sub(first)?).ok()?;
        (self.vcts.get(at)?.id == id).then_some(at)
    }

    /// The open VCT, if any.
    pub fn open(&self) -> Option<&Vct> {
        self.vcts.back().filter(|v| v.state == VctState::Open)
    }

    /// Records a write of `bytes` bytes to page `index` of `ino` (one page's part of a write
    /// system call), the file being `size` bytes long afterwards. Returns the case it met.
    pub fn record_write(
        &mut self,
        ino: Ino,
        index: u64,
        bytes: u64,
        size: u64,
        now: Nanos,
    ) -> WriteCase {
        debug_assert!(bytes <= PAGE_SIZE);
        self.next_version += 1;
        let version = self.next_version;
        self.open_at(now);
        let open = self.vcts.back_mut().expect("an open VCT");
        let case = match self.rmap.get(&(ino, index)) {
            Some(&vct) if vct == open.id => WriteCase::Overwrite,
            // The closed VCT keeps the old version, now a copy.
            Some(_) => WriteCase::CopyOnWrite,
            None => WriteCase::Append,
        };
        open.staleness_bytes += bytes;
        if case == WriteCase::Overwrite {
            open.overwritten_bytes += bytes;
        }
        open.sizes.insert(ino, size);
        open.entries.insert((ino, index), version);
        let open_id = open.id;
        self.rmap.insert((ino, index), open_id);
        self.stats.bytes_written += bytes;
        match case {
            WriteCase::Append => self.stats.appends += 1,
            WriteCase::CopyOnWrite => {
                self.copies += 1;
                self.stats.copies_on_write += 1;
            }
            WriteCase::Overwrite => self.stats.overwrites += 1,
        }
        case
    }

    /// Closes the open VCT (moves the active section into the closed section). Returns its id,
    /// or `None` when there is no open VCT with entries.
    pub fn close(&mut self, now: Nanos) -> Option<VctId> {
        let open = self.vcts.back_mut().filter(|v| {
            v.state == VctState::Open && !(v.entries.is_empty() && v.sizes.is_empty())
        })?;
        open.state = VctState::Closed;
        open.closed_ns = Some(now);
        self.stats.vcts_closed += 1;
        Some(open.id)
    }

    /// Closed VCTs waiting for the checkpointer, oldest first.
    pub fn closed(&self) -> impl Iterator<Item = &Vct> {
        self.vcts.iter().filter(|v| v.state == VctState::Closed)
    }

    /// The oldest VCT, if it is closed: the only one the checkpointer may take (an app's VCTs
    /// commit in order, or a crash could expose a later one without an earlier one).
    pub fn next_to_commit(&self) -> Option<&Vct> {
        self.vcts.front().filter(|v| v.state == VctState::Closed)
    }

    /// Whether a VCT is being committed.
    pub fn committing(&self) -> bool {
        self.vcts
            .front()
            .is_some_and(|v| v.state == VctState::Committing)
    }

    /// The checkpointer takes VCT `id` (which must be [`WriteLog::next_to_commit`]): it becomes
    /// committing; returns its entries in file order and the file sizes to make durable.
    pub fn begin_commit(&mut self, id: VctId) -> (Vec<Entry>, BTreeMap<Ino, u64>) {
        let vct = self.vcts.front_mut().expect("a VCT to commit");
        assert!(
            vct.id == id && vct.state == VctState::Closed,
            "VCT {id} is not the oldest closed VCT"
        );
        vct.state = VctState::Committing;
        (vct.entries().collect(), vct.sizes.clone())
    }

    /// Whether page `index` of `ino` is still in committing VCT `id` (not truncated since).
    pub fn still_in(&self, id: VctId, ino: Ino, index: u64) -> bool {
        self.position(id)
            .is_some_and(|p| self.vcts[p].entries.contains_key(&(ino, index)))
    }

    /// VCT `id` is durable: it leaves the log. Returns the pages to unpin (those whose latest
    /// version it held); copies it held for pages written again later are freed.
    pub fn finish_commit(&mut self, id: VctId) -> Vec<(Ino, u64)> {
        let vct = self.vcts.pop_front().expect("a committing VCT");
        assert!(
            vct.id == id && vct.state == VctState::Committing,
            "VCT {id} finished out of order"
        );
        let mut unpin = Vec::new();
        for &key in vct.entries.keys() {
            if self.rmap.get(&key) == Some(&id) {
                self.rmap.remove(&key);
                unpin.push(key);
            } else {
                self.copies -= 1;
            }
        }
        self.stats.vcts_committed += 1;
        self.stats.pages_committed += vct.pages();
        unpin
    }

    /// A truncate of `ino` to `length` logged in the open VCT (`log-truncate`, this model's
    /// fix for the truncate finding, not the paper's design): the open VCT's size for the file
    /// becomes `length` and its pages past it leave it; closed VCTs keep theirs (they are
    /// immutable: the versions they closed with are what their checkpoint writes), which from
    /// now on are copies. Returns the pages that lose their pin (every page past `length`).
    pub fn record_truncate(&mut self, ino: Ino, length: u64, now: Nanos) -> Vec<u64> {
        let from = length.div_ceil(PAGE_SIZE);
        self.open_at(now);
        let open = self.vcts.back_mut().expect("an open VCT");
        let open_id = open.id;
        open.sizes.insert(ino, length);
        drop_entries(open, &self.rmap, &mut self.copies, ino, from);
        // A closed or committing VCT holding a page's latest version keeps it as a copy.
        self.unmap_from(ino, from, |holder| holder != open_id)
    }

    /// Pages `index >= from` of `ino` are gone (truncate, unlink): their entries leave every
    /// VCT that is not being committed, and they lose their pin. Returns the pages unpinned.
    pub fn forget(&mut self, ino: Ino, from: u64) -> Vec<u64> {
        for vct in self.vcts.iter_mut() {
            if vct.state == VctState::Committing {
                continue;
            }
            let gone = drop_entries(vct, &self.rmap, &mut self.copies, ino, from);
            if gone || vct.sizes.contains_key(&ino) {
                if from == 0 {
                    vct.sizes.remove(&ino);
                } else if let Some(size) = vct.sizes.get_mut(&ino) {
                    *size = (*size).min(from * PAGE_SIZE);
                }
            }
        }
        let committing = self
            .vcts
            .front()
            .filter(|v| v.state == VctState::Committing)
            .map(|v| v.id);
        // The committing VCT still holds its versions: from now on copies, freed when it
        // finishes.
        self.unmap_from(ino, from, |holder| Some(holder) == committing)
    }

    /// Opens a VCT at `now` unless one is open.
    fn open_at(&mut self, now: Nanos) {
        if self.vcts.back().is_none_or(|v| v.state != VctState::Open) {
            assert!(self.vcts.len() < MAX_VCTS, "write log holds too many VCTs");
            let id = self.next_vct;
            self.next_vct += 1;
            self.vcts.push_back(Vct::new(id, now));
        }
    }

    /// Pages `index >= from` of `ino` lose their reverse mapping (and their pin); a VCT the
    /// page's latest version stays in (`kept(holder)`) holds it as a copy from now on.
    /// Returns the pages, in index order.
    fn unmap_from(&mut self, ino: Ino, from: u64, kept: impl Fn(VctId) -> bool) -> Vec<u64> {
        let mut unpinned: Vec<u64> = self
            .rmap
            .keys()
            .filter(|&&(i, index)| i == ino && index >= from)
            .map(|&(_, index)| index)
            .collect();
        unpinned.sort_unstable();
        for &index in &unpinned {
            if self.rmap.remove(&(ino, index)).is_some_and(&kept) {
                self.copies += 1;
            }
        }
        unpinned
    }

    /// VCTs in the log (committing, closed and open), oldest first.
    pub fn vcts(&self) -> impl Iterator<Item = &Vct> {
        self.vcts.iter()
    }

    /// Checks the log's invariants; `Err` names the first one broken.
    pub fn check(&self) -> Result<(), String> {
        for (k, v) in self.vcts.iter().enumerate() {
            if k > 0 && v.id != self.vcts[k - 1].id + 1 {
                return Err(format!("VCT ids not consecutive at {}", v.id));
            }
            if v.state == VctState::Open && k + 1 != self.vcts.len() {
                return Err(format!("open VCT {} is not the last", v.id));
            }
            if v.state == VctState::Committing && k != 0 {
                return Err(format!("committing VCT {} is not the oldest", v.id));
            }
        }
        for (&(ino, index), &id) in &self.rmap {
            let held = self
                .position(id)
                .is_some_and(|p| self.vcts[p].entries.contains_key(&(ino, index)));
            if !held {
                return Err(format!(
                    "page {ino}:{index} maps to VCT {id}, which lacks it"
                ));
            }
        }
        let entries: u64 = self.vcts.iter().map(|v| v.pages()).sum();
        if self.copies + self.rmap.len() as u64 != entries {
            return Err(format!(
                "{} copies + {} mapped pages != {} entries",
                self.copies,
                self.rmap.len(),
                entries
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u64 = PAGE_SIZE;

    #[test]
    fn the_three_write_cases_of_section_4_2() {
        let mut log = WriteLog::new();
        assert_eq!(log.record_write(1, 0, P, P, 0), WriteCase::Append);
        assert_eq!(log.record_write(1, 0, P, P, 1), WriteCase::Overwrite);
        assert_eq!(log.pinned_pages(), 1);
        let id = log.close(2).expect("closed");
        // Writing a page of a closed VCT copies it: the closed VCT keeps its version.
        assert_eq!(log.record_write(1, 0, 100, P, 3), WriteCase::CopyOnWrite);
        assert_eq!(log.copies(), 1);
        assert_eq!(log.pinned_pages(), 2);
        assert_eq!(log.record_write(1, 0, 100, P, 4), WriteCase::Overwrite);
        assert_eq!(log.copies(), 1);
        let vcts: Vec<_> = log.vcts().map(|v| (v.id, v.state, v.pages())).collect();
        assert_eq!(
            vcts,
            vec![(id, VctState::Closed, 1), (id + 1, VctState::Open, 1)]
        );
        let s = log.stats();
        assert_eq!((s.appends, s.overwrites, s.copies_on_write), (1, 2, 1));
        assert_eq!(log.check(), Ok(()));
    }

    #[test]
    fn a_closed_vct_keeps_the_version_it_closed_with() {
        let mut log = WriteLog::new();
        log.record_write(7, 3, P, 4 * P, 0);
        let id = log.close(1).unwrap();
        log.record_write(7, 3, P, 4 * P, 2);
        let (entries, sizes) = log.begin_commit(id);
        assert_eq!(entries.len(), 1);
        assert_eq!(
            entries[0].version, 1,
            "the closed VCT's version, not the new one"
        );
        assert_eq!(sizes[&7], 4 * P);
        // The page's latest version is in the open VCT: committing frees only the copy.
        assert_eq!(log.finish_commit(id), vec![]);
        assert_eq!(log.copies(), 0);
        assert_eq!(log.pinned_pages(), 1);
        assert_eq!(log.check(), Ok(()));
    }

    #[test]
    fn a_logged_truncate_leaves_closed_vcts_whole_and_empties_the_open_one() {
        let mut log = WriteLog::new();
        log.record_write(7, 0, P, 2 * P, 0);
        log.record_write(7, 1, P, 2 * P, 0);
        let closed = log.close(1).unwrap();
        log.record_write(7, 1, P, 2 * P, 2); // copy-on-write: the closed VCT keeps v2
        let unpinned = log.record_truncate(7, 100, 3);
        assert_eq!(unpinned, vec![1], "page 1 leaves the cache");
        assert_eq!(log.check(), Ok(()));
        // The closed VCT is as it closed: both pages, the size it closed with.
        let (entries, sizes) = log.begin_commit(closed);
        assert_eq!(entries.len(), 2);
        assert_eq!(sizes[&7], 2 * P);
        // The open VCT holds the truncate alone: no page, the new size; it can close.
        let open = log.open().expect("an open VCT");
        assert_eq!((open.pages(), open.sizes[&7]), (0, 100));
        assert!(log.close(4).is_some(), "a VCT with only a truncate closes");
        log.finish_commit(closed);
        assert_eq!(
            log.copies(),
            0,
            "the old page 1 was a copy, freed with its VCT"
        );
        assert_eq!(log.check(), Ok(()));
    }

    #[test]
    fn committing_unpins_pages_whose_latest_version_it_held() {
        let mut log = WriteLog::new();
        for index in 0..4 {
            log.record_write(1, index, P, 4 * P, 0);
        }
        let first = log.close(1).unwrap();
        log.record_write(1, 0, P, 4 * P, 2);
        let second = log.close(3).unwrap();
        assert_eq!(log.next_to_commit().map(|v| v.id), Some(first));
        log.begin_commit(first);
        assert!(log.committing());
        assert!(log.next_to_commit().is_none(), "one VCT commits at a time");
        let unpinned = log.finish_commit(first);
        assert_eq!(unpinned, vec![(1, 1), (1, 2), (1, 3)]);
        assert_eq!(log.pinned_pages(), 1);
        log.begin_commit(second);
        assert_eq!(log.finish_commit(second), vec![(1, 0)]);
        assert_eq!(log.pinned_pages(), 0);
        assert!(log.is_empty());
        assert_eq!(log.stats().vcts_committed, 2);
        assert_eq!(log.stats().pages_committed, 5);
    }

    #[test]
    #[should_panic(expected = "not the oldest closed VCT")]
    fn vcts_commit_in_order() {
        let mut log = WriteLog::new();
        log.record_write(1, 0, P, P, 0);
        log.close(1).unwrap();
        log.record_write(1, 1, P, 2 * P, 2);
        let second = log.close(3).unwrap();
        log.begin_commit(second);
    }

    #[test]
    fn truncation_drops_pages_from_every_vct_not_being_committed() {
        let mut log = WriteLog::new();
        for index in 0..4 {
            log.record_write(1, index, P, 4 * P, 0);
        }
        log.record_write(2, 0, P, P, 0);
        let first = log.close(1).unwrap();
        log.record_write(1, 3, P, 4 * P, 2); // a copy of page 3 in the first VCT
        assert_eq!(log.forget(1, 2), vec![2, 3]);
        assert_eq!(log.copies(), 0);
        assert_eq!(log.pinned_pages(), 3);
        assert_eq!(log.check(), Ok(()));
        let (entries, sizes) = log.begin_commit(first);
        assert_eq!(entries.len(), 3);
        assert_eq!(sizes[&1], 2 * P, "the size is cut at the truncation");
        // Unlink while committing: the committing VCT keeps its entries (as copies).
        assert_eq!(log.forget(1, 0), vec![0, 1]);
        assert!(!log.still_in(first, 1, 5));
        assert!(log.still_in(first, 1, 0));
        assert_eq!(log.check(), Ok(()));
        assert_eq!(log.finish_commit(first), vec![(2, 0)]);
        assert_eq!(log.pinned_pages(), 0);
        assert_eq!(log.check(), Ok(()));
    }

    #[test]
    fn closing_an_empty_log_does_nothing() {
        let mut log = WriteLog::new();
        assert_eq!(log.close(0), None);
        log.record_write(1, 0, P, P, 0);
        assert!(log.close(1).is_some());
        assert_eq!(
            log.close(2),
            None,
            "a closed VCT cannot be closed (or reopened) again"
        );
        assert_eq!(log.stats().vcts_closed, 1);
    }

    #[test]
    fn staleness_and_overwrites_are_counted_per_vct() {
        let mut log = WriteLog::new();
        log.record_write(1, 0, P, P, 0);
        log.record_write(1, 0, P / 2, P, 0);
        log.record_write(1, 1, P, 2 * P, 0);
        let open = log.open().unwrap();
        assert_eq!(open.staleness_bytes, 2 * P + P / 2);
        assert_eq!(open.overwritten_bytes, P / 2);
        assert_eq!(open.sizes[&1], 2 * P);
    }
}
