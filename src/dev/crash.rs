//! Crash states of a device from its recorded command history (issue 20's crash-point
//! checking, the technique of CrashMonkey and ALICE): the run is simulated once while the block
//! layer records every write and flush the device completed ([`WriteHistory`]); a crash at any
//! virtual instant is then built from the history instead of re-running the simulation.
//!
//! What survives a crash at `t`, as the block layer's contract with a device with a volatile
//! write cache has it (`REQ_PREFLUSH` / `REQ_FUA`, Documentation/block/writeback_cache_control):
//!
//! - a write completed before `t` is **durable** if it was FUA, or if a flush *started* after
//!   the write completed and itself completed before `t` (a flush persists what the device had
//!   acknowledged when it received the flush);
//! - on a write-through device (no volatile cache) every completed write is durable;
//! - every other write completed before `t`, and every write in flight at `t` (started, not
//!   completed), is **undetermined**: it may or may not have reached flash, in any order the
//!   cache allows; a sector holds either its last durable write or any undetermined write to
//!   it issued after that one;
//! - writes that started after `t` never happened.
//!
//! [`WriteHistory::crash_points`] chooses instants that cover every boundary where the answer
//! changes (just before and at each write's and flush's completion), plus random ones;
//! [`CrashState::image`] draws one concrete image: which write each sector holds.
//!
//! Simplifications: sectors are atomic units (no torn sectors); discards are not recorded (a
//! discarded sector keeps its last content); a write is durable or lost as a whole per sector,
//! never half-programmed.

use crate::units::Nanos;
use std::collections::BTreeMap;

/// Bound on the commands one history records (about 64 bytes each).
pub const MAX_COMMANDS: usize = 1 << 24;

/// One recorded write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteRecord {
    /// The block layer's request id (to join with what the request carried).
    pub id: u64,
    pub sector: u64,
    pub sectors: u32,
    pub fua: bool,
    /// When the device started it and when it completed.
    pub start_ns: Nanos,
    pub done_ns: Nanos,
}

/// A device's completed commands, in completion order.
#[derive(Debug, Clone, Default)]
pub struct WriteHistory {
    /// Whether the device has a volatile write cache (else every completed write is durable).
    pub volatile_cache: bool,
    pub writes: Vec<WriteRecord>,
    /// Flushes: (start, completion).
    pub flushes: Vec<(Nanos, Nanos)>,
}

/// Whether a write survives a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    Durable,
    Undetermined,
    /// Started after the crash.
    NeverHappened,
}

/// The writes of a history at one crash instant.
#[derive(Debug, Clone)]
pub struct CrashState {
    pub at: Nanos,
    /// Indexes into [`WriteHistory::writes`] by fate (a write in flight at the crash is
    /// undetermined).
    pub durable: Vec<usize>,
    pub undetermined: Vec<usize>,
}

impl WriteHistory {
    pub fn new(volatile_cache: bool) -> WriteHistory {
        WriteHistory {
            volatile_cache,
            ..WriteHistory::default()
        }
    }

    /// A write the device completed. Returns `false` (and records nothing) past
    /// [`MAX_COMMANDS`].
    pub fn record_write(&mut self, record: WriteRecord) -> bool {
        if self.len() >= MAX_COMMANDS {
            return false;
        }
        self.writes.push(record);
        true
    }

    /// A flush the device completed.
    pub fn record_flush(&mut self, start_ns: Nanos, done_ns: Nanos) -> bool {
        if self.len() >= MAX_COMMANDS {
            return false;
        }
        self.flushes.push((start_ns, done_ns));
        true
    }

    pub fn len(&self) -> usize {
        self.writes.len() + self.flushes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What happened to write `w` if the device lost power at `at`.
    pub fn fate(&self, w: &WriteRecord, at: Nanos) -> Fate {
        if w.start_ns >= at {
            return Fate::NeverHappened;
        }
        if w.done_ns > at {
            return Fate::Undetermined;
        }
        if !self.volatile_cache || w.fua {
            return Fate::Durable;
        }
        let flushed = self
            .flushes
            .iter()
            .any(|&(start, done)| start >= w.done_ns && done <= at);
        if flushed {
            Fate::Durable
        } else {
            Fate::Undetermined
        }
    }

    /// The crash state at `at`.
    pub fn crash_at(&self, at: Nanos) -> CrashState {
        let mut state = CrashState {
            at,
            durable: Vec::new(),
            undetermined: Vec::new(),
        };
        for (i, w) in self.writes.iter().enumerate() {
            match self.fate(w, at) {
                Fate::Durable => state.durable.push(i),
                Fate::Undetermined => state.undetermined.push(i),
                Fate::NeverHappened => {}
            }
        }
        state
    }

    /// `n` crash instants: first every boundary where a write's or flush's fate changes (the
    /// instant a command completes, and just before), in time order and thinned evenly if
    /// there are more than `n`; the rest drawn uniformly over the history with `below` (a
    /// random number below its argument: the run's seeded generator). Sorted, without
    /// duplicates.
    pub fn crash_points(&self, n: usize, below: &mut dyn FnMut(u64) -> u64) -> Vec<Nanos> {
        let mut boundaries: Vec<Nanos> = self
            .writes
            .iter()
            .map(|w| w.done_ns)
            .chain(self.flushes.iter().map(|&(_, done)| done))
            .flat_map(|t| [t.saturating_sub(1), t])
            .collect();
        boundaries.sort_unstable();
        boundaries.dedup();
        let mut points: Vec<Nanos> = if boundaries.len() > n {
            (0..n)
                .map(|i| boundaries[i * boundaries.len() / n])
                .collect()
        } else {
            boundaries
        };
        let end = points.last().copied().unwrap_or(0).max(1);
        while points.len() < n {
            points.push(below(end + 1));
        }
        points.sort_unstable();
        points.dedup();
        points
    }
}

impl CrashState {
    /// One concrete image: for each sector written, the index of the write it holds. The
    /// last durable write of each sector is the floor; each undetermined write issued after it
    /// survives with probability one half (drawn with `below`, as for
    /// [`WriteHistory::crash_points`]), and of those surviving the last issued wins (the cache
    /// held the newest data it had).
    pub fn image(
        &self,
        history: &WriteHistory,
        below: &mut dyn FnMut(u64) -> u64,
    ) -> BTreeMap<u64, usize> {
        let mut sectors: BTreeMap<u64, usize> = BTreeMap::new();
        // Durable writes in issue order: the last one per sector holds it.
        let mut durable = self.durable.clone();
        durable.sort_by_key(|&i| (history.writes[i].start_ns, i));
        for i in durable {
            let w = &history.writes[i];
            for s in w.sector..w.sector + u64::from(w.sectors) {
                sectors.insert(s, i);
            }
        }
        let mut undetermined = self.undetermined.clone();
        undetermined.sort_by_key(|&i| (history.writes[i].start_ns, i));
        for i in undetermined {
            if below(2) == 0 {
                continue;
            }
            let w = &history.writes[i];
            for s in w.sector..w.sector + u64::from(w.sectors) {
                let floor = sectors.get(&s).map(|&d| history.writes[d].start_ns);
                if floor.is_none_or(|f| f <= w.start_ns) {
                    sectors.insert(s, i);
                }
            }
        }
        sectors
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::rng::Rng;

    fn below(rng: &mut Rng) -> impl FnMut(u64) -> u64 + '_ {
        move |bound| rng.below(bound)
    }

    fn write(id: u64, sector: u64, start: Nanos, done: Nanos, fua: bool) -> WriteRecord {
        WriteRecord {
            id,
            sector,
            sectors: 8,
            fua,
            start_ns: start,
            done_ns: done,
        }
    }

    #[test]
    fn a_flush_makes_the_writes_completed_before_it_durable() {
        let mut h = WriteHistory::new(true);
        h.record_write(write(1, 0, 0, 10, false));
        h.record_flush(20, 30);
        h.record_write(write(2, 8, 25, 35, false));
        let before = h.crash_at(29);
        assert_eq!((before.durable.len(), before.undetermined.len()), (0, 2));
        let after = h.crash_at(40);
        assert_eq!(
            after.durable,
            vec![0],
            "write 2 completed after the flush started"
        );
        assert_eq!(after.undetermined, vec![1]);
    }

    #[test]
    fn fua_is_durable_at_completion_and_write_through_devices_need_no_flush() {
        let mut h = WriteHistory::new(true);
        h.record_write(write(1, 0, 0, 10, true));
        assert_eq!(h.fate(&h.writes[0], 9), Fate::Undetermined, "in flight");
        assert_eq!(h.fate(&h.writes[0], 10), Fate::Durable);
        let mut through = WriteHistory::new(false);
        through.record_write(write(1, 0, 0, 10, false));
        assert_eq!(through.fate(&through.writes[0], 10), Fate::Durable);
        assert_eq!(through.fate(&through.writes[0], 0), Fate::NeverHappened);
    }

    #[test]
    fn an_image_holds_the_last_durable_write_or_a_later_undetermined_one() {
        let mut h = WriteHistory::new(true);
        h.record_write(write(1, 0, 0, 10, false));
        h.record_flush(10, 20);
        h.record_write(write(2, 0, 30, 40, false));
        let state = h.crash_at(50);
        let mut seen = std::collections::BTreeSet::new();
        let mut rng = Rng::new(1);
        for _ in 0..64 {
            seen.insert(state.image(&h, &mut below(&mut rng))[&0]);
        }
        assert_eq!(
            seen,
            [0, 1].into_iter().collect(),
            "old or new, nothing else"
        );
        // Once a second flush covers write 2, only it remains possible.
        h.record_flush(45, 46);
        let state = h.crash_at(50);
        for _ in 0..16 {
            assert_eq!(state.image(&h, &mut below(&mut rng))[&0], 1);
        }
    }

    #[test]
    fn crash_points_cover_every_completion_boundary_then_random_instants() {
        let mut h = WriteHistory::new(true);
        h.record_write(write(1, 0, 0, 10, false));
        h.record_flush(12, 20);
        let mut rng = Rng::new(3);
        let points = h.crash_points(8, &mut below(&mut rng));
        for t in [9, 10, 19, 20] {
            assert!(points.contains(&t), "{t} in {points:?}");
        }
        assert!(points.windows(2).all(|p| p[0] < p[1]));
        assert!(points.len() >= 4 && points.len() <= 8);
        // Fewer points than boundaries: thinned evenly, still sorted.
        let thin = h.crash_points(2, &mut below(&mut rng));
        assert_eq!(thin.len(), 2);
    }

    #[test]
    fn the_same_seed_draws_the_same_images() {
        let mut h = WriteHistory::new(true);
        for i in 0..20 {
            h.record_write(write(i, (i % 4) * 8, i * 10, i * 10 + 5, false));
        }
        let state = h.crash_at(1000);
        let a = state.image(&h, &mut below(&mut Rng::new(9)));
        let b = state.image(&h, &mut below(&mut Rng::new(9)));
        assert_eq!(a, b);
    }
}
