//! The VCT scheduler (MobiFS, ATC'15, §5.4): which app's closed VCTs to checkpoint in a
//! predicted idle interval.
//!
//! The paper schedules apps (an app's VCTs go together: "whenever a VCT is selected to be
//! scheduled, other VCTs of the same app are prioritized") through three priority queues and
//! four rules, in descending precedence:
//!
//! 1. *Transaction affinity*: an app skipped in a queue moves up one queue (if there is one).
//! 2. *Transaction age*: apps enter the lowest queue and rise as Rule 1 moves them; when no
//!    queue has a feasible app, the app with the shortest first VCT in the highest non-empty
//!    queue is chosen.
//! 3. *Transaction length*: an app is feasible only if its first VCT fits in the rest of the
//!    predicted interval (its pages times the caller's cost per page, at most the time left).
//! 4. *Queue replenishment*: an app that could not checkpoint all its VCTs in its scheduled time
//!    goes back to the lowest queue ([`VctScheduler::requeue_unfinished`]).
//!
//! [`VctScheduler::pick`] scans the queues from the highest to the lowest and each queue from
//! its oldest entry (enqueue sequence) on; the first feasible app is chosen. "Skipped" is read
//! as *examined and found infeasible*: those apps, scanned before the choice, are promoted one
//! queue (Rule 1); apps after the choice were not examined and stay. When nothing is feasible,
//! every app was examined: the fallback of Rule 2 is chosen and all the others are promoted.
//!
//! ## Simplifications
//!
//! - The scheduler sees an app's first VCT only (its length in pages); the caller (the
//!   checkpointer) runs the app's VCTs in order and calls back when it runs out of time.
//! - Cost is linear in pages (`ns_per_page` from the caller); the paper's length is "the number
//!   of pages to checkpoint".
//! - Ties: the queue is ordered by enqueue sequence (older first); a promoted app keeps its
//!   sequence, so it queues by age among the apps already there. Among equally short VCTs in
//!   the fallback, the older app wins.

use crate::units::Nanos;
use serde::Serialize;

/// An app, as the scheduler knows it (its uid or an index chosen by the caller).
pub type AppId = u32;

/// §5.4: "The algorithm maintains three queues".
pub const QUEUE_COUNT: usize = 3;

/// The lowest-priority queue, where apps enter (Rule 2) and return (Rule 4).
pub const QUEUE_LOWEST: usize = 0;

/// The highest-priority queue.
pub const QUEUE_HIGHEST: usize = QUEUE_COUNT - 1;

/// Apps the scheduler holds at most: a bound, so a bug that enqueues without end stops loudly.
pub const APPS_MAX: usize = 65_536;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    app: AppId,
    first_vct_pages: u64,
    /// Enqueue sequence: the age order within a queue.
    sequence: u64,
}

/// The scheduler's choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Pick {
    pub app: AppId,
    pub first_vct_pages: u64,
    /// The queue it was chosen from (0 lowest .. 2 highest).
    pub queue: usize,
    /// Whether its first VCT fits in the available time (Rule 3), or it is Rule 2's fallback.
    pub feasible: bool,
    /// Its first VCT's cost: pages × ns per page (saturating).
    pub first_vct_ns: Nanos,
}

/// Three queues of apps with closed VCTs (§5.4).
#[derive(Debug, Clone, Default)]
pub struct VctScheduler {
    /// Each queue in enqueue-sequence order; index 0 is the lowest priority.
    queues: [Vec<Entry>; QUEUE_COUNT],
    next_sequence: u64,
}

impl VctScheduler {
    pub fn new() -> Self {
        Self::default()
    }

    /// Apps queued, in all queues.
    pub fn len(&self) -> usize {
        self.queues.iter().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.queues.iter().all(Vec::is_empty)
    }

    /// The queue `app` is in, if it is queued.
    pub fn queue_of(&self, app: AppId) -> Option<usize> {
        self.find(app).map(|(queue, _)| queue)
    }

    /// The apps of queue `queue` in scan order (oldest first); empty for a queue that does not
    /// exist.
    pub fn queue(&self, queue: usize) -> Vec<AppId> {
        self.queues
            .get(queue)
            .map(|entries| entries.iter().map(|e| e.app).collect())
            .unwrap_or_default()
    }

    fn find(&self, app: AppId) -> Option<(usize, usize)> {
        self.queues.iter().enumerate().find_map(|(queue, entries)| {
            entries
                .iter()
                .position(|e| e.app == app)
                .map(|index| (queue, index))
        })
    }

    fn insert(&mut self, queue: usize, entry: Entry) {
        let entries = &mut self.queues[queue];
        let at = entries.partition_point(|e| e.sequence < entry.sequence);
        entries.insert(at, entry);
    }

    /// An app has closed VCTs, the first `first_vct_pages` long. A new app enters the lowest
    /// queue (Rule 2); an app already queued keeps its queue and age and has its first VCT's
    /// length updated. Errors when [`APPS_MAX`] apps are already queued.
    pub fn enqueue(&mut self, app: AppId, first_vct_pages: u64) -> Result<(), String> {
        if let Some((queue, index)) = self.find(app) {
            self.queues[queue][index].first_vct_pages = first_vct_pages;
            return Ok(());
        }
        if self.len() >= APPS_MAX {
            return Err(format!(
                "VCT scheduler is full: {APPS_MAX} apps queued, app {app} refused"
            ));
        }
        self.push_lowest(app, first_vct_pages);
        Ok(())
    }

    fn push_lowest(&mut self, app: AppId, first_vct_pages: u64) {
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        self.insert(
            QUEUE_LOWEST,
            Entry {
                app,
                first_vct_pages,
                sequence,
            },
        );
    }

    /// Rule 4: `app`, chosen by [`VctScheduler::pick`], ran out of its scheduled time with VCTs
    /// left, the first now `first_vct_pages` long; it goes to the tail of the lowest queue (a
    /// new sequence: it is the youngest there). If it was queued again meanwhile it is moved.
    pub fn requeue_unfinished(&mut self, app: AppId, first_vct_pages: u64) {
        self.remove(app);
        self.push_lowest(app, first_vct_pages);
        assert!(self.len() <= APPS_MAX + 1);
    }

    /// Forgets `app` (its VCTs were all checkpointed, or the app went away). Whether it was
    /// queued.
    pub fn remove(&mut self, app: AppId) -> bool {
        match self.find(app) {
            Some((queue, index)) => {
                self.queues[queue].remove(index);
                true
            }
            None => false,
        }
    }

    /// Chooses the app to checkpoint in `available_ns` of predicted idle time, first VCTs
    /// costing `ns_per_page` a page, and takes it out of the queues (the caller checkpoints its
    /// VCTs, then calls [`VctScheduler::requeue_unfinished`] if time ran out). `None` when no app
    /// is queued.
    pub fn pick(&mut self, available_ns: Nanos, ns_per_page: Nanos) -> Option<Pick> {
        if self.is_empty() {
            return None;
        }
        let cost = |entry: &Entry| entry.first_vct_pages.saturating_mul(ns_per_page);
        let mut skipped: Vec<(usize, AppId)> = Vec::new();
        let mut chosen: Option<(usize, Entry, bool)> = None;
        'scan: for queue in (0..QUEUE_COUNT).rev() {
            for entry in &self.queues[queue] {
                if cost(entry) <= available_ns {
                    chosen = Some((queue, *entry, true));
                    break 'scan;
                }
                skipped.push((queue, entry.app));
            }
        }
        let (queue, entry, feasible) = match chosen {
            Some(choice) => choice,
            None => {
                // Rule 2's fallback: the shortest first VCT of the highest non-empty queue.
                let queue = (0..QUEUE_COUNT)
                    .rev()
                    .find(|&queue| !self.queues[queue].is_empty())
                    .expect("a non-empty scheduler has a non-empty queue");
                let entry = *self.queues[queue]
                    .iter()
                    .min_by_key(|e| (e.first_vct_pages, e.sequence))
                    .expect("queue is not empty");
                skipped.retain(|&(_, app)| app != entry.app);
                (queue, entry, false)
            }
        };
        let removed = self.remove(entry.app);
        assert!(removed, "chosen app {} is queued", entry.app);
        // Rule 1: every app skipped moves up one queue (the highest queue's stay).
        for (from, app) in skipped {
            if from == QUEUE_HIGHEST {
                continue;
            }
            let (queue, index) = self.find(app).expect("skipped app is queued");
            assert_eq!(queue, from, "app {app} moved twice in one pick");
            let moved = self.queues[queue].remove(index);
            self.insert(queue + 1, moved);
        }
        Some(Pick {
            app: entry.app,
            first_vct_pages: entry.first_vct_pages,
            queue,
            feasible,
            first_vct_ns: cost(&entry),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NS_PER_PAGE: Nanos = 1_000;

    #[test]
    fn apps_enter_the_lowest_queue_in_order() {
        let mut scheduler = VctScheduler::new();
        for app in [7, 3, 9] {
            scheduler.enqueue(app, 10).unwrap();
        }
        assert_eq!(scheduler.queue(QUEUE_LOWEST), vec![7, 3, 9]);
        assert!(scheduler.queue(QUEUE_HIGHEST).is_empty());
        // The oldest feasible app is chosen.
        let pick = scheduler.pick(1_000_000, NS_PER_PAGE).unwrap();
        assert_eq!(pick.app, 7);
        assert!(pick.feasible);
        assert_eq!(pick.first_vct_ns, 10 * NS_PER_PAGE);
        assert_eq!(scheduler.len(), 2);
    }

    #[test]
    fn affinity_promotes_a_skipped_app() {
        let mut scheduler = VctScheduler::new();
        scheduler.enqueue(1, 500).unwrap(); // too long for 100 pages' time
        scheduler.enqueue(2, 50).unwrap();
        let pick = scheduler.pick(100 * NS_PER_PAGE, NS_PER_PAGE).unwrap();
        assert_eq!(pick.app, 2);
        assert_eq!(
            scheduler.queue_of(1),
            Some(1),
            "skipped app moved up one queue"
        );
        // Skipped again: to the highest queue, and it stays there.
        scheduler.enqueue(3, 10).unwrap();
        assert_eq!(
            scheduler.pick(100 * NS_PER_PAGE, NS_PER_PAGE).unwrap().app,
            3
        );
        assert_eq!(scheduler.queue_of(1), Some(QUEUE_HIGHEST));
        scheduler.enqueue(4, 10).unwrap();
        assert_eq!(
            scheduler.pick(100 * NS_PER_PAGE, NS_PER_PAGE).unwrap().app,
            4
        );
        assert_eq!(scheduler.queue_of(1), Some(QUEUE_HIGHEST));
    }

    #[test]
    fn apps_after_the_choice_are_not_skipped() {
        let mut scheduler = VctScheduler::new();
        scheduler.enqueue(1, 10).unwrap();
        scheduler.enqueue(2, 500).unwrap();
        assert_eq!(
            scheduler.pick(100 * NS_PER_PAGE, NS_PER_PAGE).unwrap().app,
            1
        );
        assert_eq!(scheduler.queue_of(2), Some(QUEUE_LOWEST));
    }

    #[test]
    fn higher_queues_are_served_first() {
        let mut scheduler = VctScheduler::new();
        scheduler.enqueue(1, 500).unwrap();
        scheduler.enqueue(2, 50).unwrap();
        scheduler.pick(100 * NS_PER_PAGE, NS_PER_PAGE).unwrap(); // 2 chosen, 1 promoted
        scheduler.enqueue(3, 5).unwrap();
        // With time for both, the promoted app 1 goes before the older-queue newcomer 3.
        let pick = scheduler.pick(1_000 * NS_PER_PAGE, NS_PER_PAGE).unwrap();
        assert_eq!((pick.app, pick.queue), (1, 1));
    }

    #[test]
    fn with_nothing_feasible_the_shortest_of_the_highest_queue_is_chosen() {
        let mut scheduler = VctScheduler::new();
        scheduler.enqueue(1, 900).unwrap();
        scheduler.enqueue(2, 300).unwrap();
        scheduler.enqueue(3, 100).unwrap();
        // Only 3 fits; 1 and 2 are skipped and promoted.
        assert_eq!(
            scheduler.pick(100 * NS_PER_PAGE, NS_PER_PAGE).unwrap().app,
            3
        );
        assert_eq!(scheduler.queue(1), vec![1, 2]);
        scheduler.enqueue(4, 200).unwrap(); // lowest queue, shorter than both
        let pick = scheduler.pick(10 * NS_PER_PAGE, NS_PER_PAGE).unwrap();
        assert_eq!(
            pick.app, 2,
            "shortest in the highest non-empty queue, not 4"
        );
        assert!(!pick.feasible);
        assert_eq!(pick.queue, 1);
        // Everyone else was examined and skipped: 1 to the highest queue, 4 up one.
        assert_eq!(scheduler.queue_of(1), Some(2));
        assert_eq!(scheduler.queue_of(4), Some(1));
    }

    #[test]
    fn an_unfinished_app_goes_back_to_the_lowest_queue() {
        let mut scheduler = VctScheduler::new();
        scheduler.enqueue(1, 500).unwrap();
        scheduler.enqueue(2, 10).unwrap();
        scheduler.pick(100 * NS_PER_PAGE, NS_PER_PAGE).unwrap(); // 1 promoted
        scheduler.enqueue(5, 10).unwrap();
        let pick = scheduler.pick(1_000 * NS_PER_PAGE, NS_PER_PAGE).unwrap();
        assert_eq!(pick.app, 1);
        scheduler.requeue_unfinished(1, 40);
        assert_eq!(
            scheduler.queue(QUEUE_LOWEST),
            vec![5, 1],
            "youngest at the tail"
        );
        assert!(scheduler.remove(5));
        assert!(!scheduler.remove(5));
        let pick = scheduler.pick(1_000 * NS_PER_PAGE, NS_PER_PAGE).unwrap();
        assert_eq!((pick.app, pick.first_vct_pages), (1, 40));
        assert!(scheduler.pick(0, NS_PER_PAGE).is_none());
    }

    #[test]
    fn enqueue_of_a_queued_app_updates_its_length_in_place() {
        let mut scheduler = VctScheduler::new();
        scheduler.enqueue(1, 500).unwrap();
        scheduler.enqueue(2, 10).unwrap();
        scheduler.pick(100 * NS_PER_PAGE, NS_PER_PAGE).unwrap();
        scheduler.enqueue(1, 20).unwrap();
        assert_eq!(scheduler.queue_of(1), Some(1));
        assert_eq!(scheduler.len(), 1);
        assert_eq!(
            scheduler
                .pick(20 * NS_PER_PAGE, NS_PER_PAGE)
                .unwrap()
                .first_vct_pages,
            20
        );
    }

    #[test]
    fn cost_saturates_instead_of_overflowing() {
        let mut scheduler = VctScheduler::new();
        scheduler.enqueue(1, u64::MAX).unwrap();
        let pick = scheduler.pick(Nanos::MAX - 1, Nanos::MAX).unwrap();
        assert_eq!(pick.first_vct_ns, Nanos::MAX);
        assert!(!pick.feasible);
    }

    #[test]
    fn the_same_operations_give_the_same_choices() {
        let run = || {
            let mut rng = crate::sim::rng::Rng::new(5);
            let mut scheduler = VctScheduler::new();
            let mut picks = Vec::new();
            for step in 0..2_000u32 {
                match rng.below(4) {
                    0 | 1 => scheduler
                        .enqueue(rng.below(40) as u32, rng.below(1_000))
                        .unwrap(),
                    2 => {
                        if let Some(pick) = scheduler.pick(rng.below(500_000), NS_PER_PAGE) {
                            if rng.below(3) == 0 {
                                scheduler.requeue_unfinished(pick.app, rng.below(1_000));
                            }
                            picks.push((step, pick));
                        }
                    }
                    _ => {
                        scheduler.remove(rng.below(40) as u32);
                    }
                }
                assert!(scheduler.len() <= 40);
            }
            picks
        };
        let first = run();
        assert!(first.len() > 100);
        assert_eq!(first, run());
    }
}
