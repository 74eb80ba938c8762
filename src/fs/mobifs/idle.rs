//! MobiFS's `idle` checkpointing policy (seed 004 §5.3-§5.4, §6): checkpoint in the idle
//! intervals a predictor expects from the user's touches, choosing VCTs with the three-queue
//! scheduler.
//!
//! - The user interaction logger takes the touches of the scenario's user model (`[stack.user]`,
//!   `crate::app::user`, drawn by the stack), merged as §6's filter does (events under 0.01 ms
//!   apart are one operation), and feeds them to the predictor
//!   ([`super::predict`]: the state machine, LMM or LAM).
//! - While closed VCTs wait and no interval is open, the policy asks the predictor at every
//!   tick (and at the predictor's own timers) whether an idle interval starts now; a
//!   prediction opens `[now, now + length)`.
//! - Inside the interval the checkpointer asks the scheduler ([`super::sched`]) for an app
//!   whose first VCT fits the time left (rule 3), commits it and that app's next VCTs while
//!   they fit (affinity), and sends an app it could not finish back to the lowest queue
//!   (rule 4). The time a page takes is learnt from the checkpoints done (a running mean).
//! - A touch inside an open interval is a responsiveness conflict (RC), as §7.4 counts them;
//!   a touch while a checkpoint is being written is counted too (the conflict that costs).
//!
//! Simplifications: the interval stays open to its predicted end even after a touch (each further touch
//! is one more RC); the predictor's timers are served at the policy's tick ([`IDLE_TICK`]).

use super::predict::{IdlePredictor, LastAverage, LastMinimum, StateMachine, StateMachineConfig};
use super::sched::{AppId, VctScheduler};
use crate::units::{Nanos, NS_PER_MS};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How often the idle policy looks at the predictor. asm: 100 ms (well under the state
/// machine's 2 s tau floor, so its timers are late by at most a twentieth of it).
pub const IDLE_TICK: Nanos = 100 * NS_PER_MS;
/// The time to checkpoint one page before any checkpoint was measured. asm: 1 ms (a 4 KiB
/// page written twice at a microSD card's ~10 MB/s sequential rate, with the commit's share).
pub const INITIAL_NS_PER_PAGE: Nanos = NS_PER_MS;

/// Which predictor the idle policy uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PredictorKind {
    /// §5.3's four-state machine.
    #[default]
    Fsm,
    /// Last minimum (§7.4's conservative baseline).
    Lmm,
    /// Last average (§7.4's other baseline).
    Lam,
}

impl PredictorKind {
    pub fn build(self, fsm: StateMachineConfig) -> Result<Box<dyn IdlePredictor>, String> {
        Ok(match self {
            PredictorKind::Fsm => Box::new(StateMachine::new(fsm)?),
            PredictorKind::Lmm => Box::new(LastMinimum::new(fsm.k)?),
            PredictorKind::Lam => Box::new(LastAverage::new(fsm.k)?),
        })
    }
}

/// Counters of the idle policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IdleStats {
    /// Logical user operations (after merging drags).
    pub touches: u64,
    /// Idle intervals predicted (and opened).
    pub predictions: u64,
    /// Touches inside an open predicted interval.
    pub conflicts: u64,
    /// Touches while a checkpoint was being written.
    pub touches_during_checkpoint: u64,
    /// Checkpoints chosen inside a predicted interval.
    pub chosen: u64,
    /// Checkpoints the scheduler chose with no feasible candidate (rule 2's fallback).
    pub fallback_picks: u64,
    /// Predicted time, in all.
    pub predicted_ns: Nanos,
}

/// The idle policy's state.
pub struct IdlePolicy {
    predictor: Box<dyn IdlePredictor>,
    scheduler: VctScheduler,
    /// Scheduler ids of app logs, by name, and back.
    ids: BTreeMap<String, AppId>,
    names: Vec<String>,
    /// The end of the open predicted interval.
    open_until: Option<Nanos>,
    /// The app being checkpointed in this interval (affinity).
    current: Option<AppId>,
    /// Checkpointed pages and the time they took, for the running mean.
    measured_pages: u64,
    measured_ns: Nanos,
    pub stats: IdleStats,
}

impl IdlePolicy {
    pub fn new(kind: PredictorKind, fsm: StateMachineConfig) -> Result<IdlePolicy, String> {
        Ok(IdlePolicy {
            predictor: kind.build(fsm)?,
            scheduler: VctScheduler::new(),
            ids: BTreeMap::new(),
            names: Vec::new(),
            open_until: None,
            current: None,
            measured_pages: 0,
            measured_ns: 0,
            stats: IdleStats::default(),
        })
    }

    fn id(&mut self, app: &str) -> AppId {
        if let Some(&id) = self.ids.get(app) {
            return id;
        }
        let id = AppId::try_from(self.names.len()).expect("few apps");
        self.ids.insert(app.to_string(), id);
        self.names.push(app.to_string());
        id
    }

    /// The time one page takes to checkpoint: the running mean of the checkpoints done.
    pub fn ns_per_page(&self) -> Nanos {
        self.measured_ns
            .checked_div(self.measured_pages)
            .unwrap_or(INITIAL_NS_PER_PAGE)
            .max(1)
    }

    /// A user operation at `now`.
    pub fn on_touch(&mut self, now: Nanos, checkpointing: bool) {
        self.stats.touches += 1;
        if self.open_until.is_some_and(|end| now < end) {
            self.stats.conflicts += 1;
        }
        if checkpointing {
            self.stats.touches_during_checkpoint += 1;
        }
        self.predictor.on_user_op(now);
    }

    /// A tick at `now` with `pending` closed VCTs waiting: serves the predictor's timers, ends
    /// an elapsed interval, and opens a new one if the predictor expects idleness now.
    /// Returns whether an interval is open.
    pub fn tick(&mut self, now: Nanos, pending: bool) -> bool {
        while let Some(at) = self.predictor.next_timer().filter(|&at| at <= now) {
            self.predictor.on_timer(at);
        }
        if self.open_until.is_some_and(|end| now >= end) {
            self.open_until = None;
            self.current = None;
        }
        if self.open_until.is_none() && pending {
            if let Some(length) = self.predictor.predict(now).filter(|&l| l > 0) {
                self.open_until = Some(now + length);
                self.stats.predictions += 1;
                self.stats.predicted_ns += length;
            }
        }
        self.open_until.is_some()
    }

    /// Inside an open interval, which app's oldest closed VCT to commit: `closed` gives each
    /// app log with a committable VCT and that VCT's pages (and whether it has more after
    /// it). `None` outside an interval or when nothing fits the time left and the app in
    /// hand is done.
    pub fn choose(&mut self, now: Nanos, closed: &[(String, u64)]) -> Option<String> {
        let end = self.open_until.filter(|&end| now < end)?;
        let left = end - now;
        let per_page = self.ns_per_page();
        // Affinity: stay with the app in hand while its next VCT fits.
        if let Some(current) = self.current {
            let name = self.names[current as usize].clone();
            match closed.iter().find(|(n, _)| *n == name) {
                Some(&(_, pages)) if pages.saturating_mul(per_page) <= left => {
                    self.stats.chosen += 1;
                    return Some(name);
                }
                Some(&(_, pages)) => {
                    // Rule 4: what is left of it goes back to the lowest queue.
                    self.scheduler.requeue_unfinished(current, pages);
                    self.current = None;
                }
                None => {
                    self.scheduler.remove(current);
                    self.current = None;
                }
            }
        }
        // Apps whose VCTs were all committed meanwhile (memory pressure) leave the queues.
        for queue in 0..super::sched::QUEUE_COUNT {
            for id in self.scheduler.queue(queue) {
                let name = &self.names[id as usize];
                if !closed.iter().any(|(n, _)| n == name) {
                    self.scheduler.remove(id);
                }
            }
        }
        // Rule 2: apps with work enter (the lowest queue) or refresh their first VCT's size.
        for (name, pages) in closed {
            let id = self.id(name);
            let _ = self.scheduler.enqueue(id, *pages);
        }
        let pick = self.scheduler.pick(left, per_page)?;
        if !pick.feasible {
            self.stats.fallback_picks += 1;
        }
        self.stats.chosen += 1;
        self.current = Some(pick.app);
        Some(self.names[pick.app as usize].clone())
    }

    /// A checkpoint of `pages` pages took `ns`.
    pub fn measured(&mut self, pages: u64, ns: Nanos) {
        self.measured_pages += pages;
        self.measured_ns += ns;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::NS_PER_SEC;

    const S: Nanos = NS_PER_SEC;

    fn lam() -> IdlePolicy {
        let fsm = StateMachineConfig {
            k: 2,
            ..StateMachineConfig::default()
        };
        IdlePolicy::new(PredictorKind::Lam, fsm).unwrap()
    }

    /// Touches 10 s apart: LAM predicts 10 s of idleness after each.
    fn trained() -> IdlePolicy {
        let mut p = lam();
        for t in [0, 10, 20] {
            p.on_touch(t * S, false);
        }
        p
    }

    #[test]
    fn no_interval_opens_without_pending_vcts_and_nothing_is_chosen_outside_one() {
        let mut p = trained();
        assert!(!p.tick(20 * S, false));
        assert_eq!(p.choose(20 * S, &[("a".into(), 1)]), None);
        assert!(p.tick(20 * S, true));
        assert_eq!(p.stats.predictions, 1);
        assert_eq!(p.stats.predicted_ns, 10 * S);
        // The interval ends at its predicted end.
        assert!(!p.tick(30 * S, false));
    }

    #[test]
    fn a_touch_inside_the_interval_is_a_conflict() {
        let mut p = trained();
        p.tick(20 * S, true);
        p.on_touch(25 * S, true);
        p.on_touch(26 * S, false);
        assert_eq!(p.stats.conflicts, 2);
        assert_eq!(p.stats.touches_during_checkpoint, 1);
        p.tick(31 * S, false);
        p.on_touch(32 * S, false);
        assert_eq!(p.stats.conflicts, 2, "outside the interval: no conflict");
    }

    #[test]
    fn only_vcts_that_fit_the_interval_are_chosen_and_the_app_in_hand_keeps_priority() {
        let mut p = trained();
        p.tick(20 * S, true);
        // 1 ms a page: 10 s holds 10,000 pages. "big" does not fit, "small" does.
        let closed = vec![("big".to_string(), 20_000), ("small".to_string(), 3_000)];
        assert_eq!(p.choose(20 * S, &closed).as_deref(), Some("small"));
        assert_eq!(p.stats.fallback_picks, 0);
        // Affinity: small's next VCT fits the time left; it stays in hand.
        let closed = vec![("big".to_string(), 20_000), ("small".to_string(), 4_000)];
        assert_eq!(p.choose(23 * S, &closed).as_deref(), Some("small"));
        // Its next one does not fit the 2 s left: back to the lowest queue (rule 4). Nothing
        // fits, so the scheduler falls back to the shortest VCT of the highest queue (rule 2):
        // "big", promoted when it was skipped (rule 1), not "small", now in the lowest.
        let closed = vec![("big".to_string(), 20_000), ("small".to_string(), 5_000)];
        assert_eq!(p.choose(28 * S, &closed).as_deref(), Some("big"));
        assert_eq!(p.stats.fallback_picks, 1);
        assert_eq!(p.stats.chosen, 3);
    }

    #[test]
    fn the_time_a_page_takes_is_learnt_from_checkpoints() {
        let mut p = lam();
        assert_eq!(p.ns_per_page(), INITIAL_NS_PER_PAGE);
        p.measured(100, 300 * NS_PER_MS);
        p.measured(100, 100 * NS_PER_MS);
        assert_eq!(p.ns_per_page(), 2 * NS_PER_MS);
    }
}
