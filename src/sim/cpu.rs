//! CPU time: the cores of the simulated machine, and tasks that spend time on them.
//!
//! A task that executes kernel code (a system call's entry, `copy_from_user`, page allocation)
//! calls [`Cpu::run`]: it takes a core, holds it for the duration (accounted as
//! [`WaitReason::OnCpu`]) and gives it back. With every core busy it waits in the run queue
//! (accounted as [`WaitReason::CpuWait`]); a freed core is handed to the longest waiter, so a
//! newcomer never overtakes a task already waiting.
//!
//! [`Cpu::run_urgent`] (FastTrack §4.2's page allocator, `[stack.fasttrack] pa`): an urgent
//! task (the foreground app's, in the page cache's segments) waits in a second run queue that
//! is served first, so at the end of a background segment the core goes to a waiting
//! foreground task whatever the arrival order.
//!
//! [`Cpu::run_now`] does a segment at once, without a future, when a core is free and nothing
//! else can happen before the segment ends (the engine's sleep short cut, [`Sim::sleep_now`]);
//! a simulator speed-up for hot callers, with the same results as awaiting the segment;
//! [`Cpu::run_now_n`] does a run of such segments back to back, or none.
//!
//! Simplifications: one run queue (two with urgent tasks), FIFO, no priorities otherwise, no
//! preemption inside a segment (a
//! segment is a few microseconds: one page's copy, one syscall's entry); user-space
//! computation is not modelled (workloads' think time is a voluntary sleep, off-CPU); cores
//! are identical (no big.LITTLE); context switches cost nothing.

use super::sync::WaitQueue;
use super::{Blocker, Sim, WaitReason};
use crate::units::Nanos;
use std::cell::Cell;
use std::future::Future;

/// Bound on cores: more is a configuration mistake.
pub const MAX_CORES: usize = 1024;

/// Counters of a [`Cpu`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuStats {
    /// Segments run.
    pub segments: u64,
    /// Total time on a core, summed over tasks.
    pub busy_ns: Nanos,
    /// Segments that had to wait for a core.
    pub waits: u64,
}

/// The cores of one run.
pub struct Cpu {
    cores: usize,
    busy: Cell<usize>,
    run_queue: WaitQueue,
    /// Urgent waiters ([`Cpu::run_urgent`]), served before `run_queue`.
    urgent_queue: WaitQueue,
    stats: Cell<CpuStats>,
}

impl Cpu {
    /// A machine with `cores` cores (at least one).
    pub fn new(cores: usize) -> Cpu {
        assert!(
            (1..=MAX_CORES).contains(&cores),
            "core count {cores} out of 1..={MAX_CORES}"
        );
        Cpu {
            cores,
            busy: Cell::new(0),
            run_queue: WaitQueue::new(),
            urgent_queue: WaitQueue::new(),
            stats: Cell::new(CpuStats::default()),
        }
    }

    pub fn cores(&self) -> usize {
        self.cores
    }

    /// Cores in use now.
    pub fn busy(&self) -> usize {
        self.busy.get()
    }

    pub fn stats(&self) -> CpuStats {
        self.stats.get()
    }

    /// Runs the current task on a core for `duration` (waiting for a core first if all are
    /// busy). A zero duration costs nothing and never waits.
    pub fn run<'a>(&'a self, sim: &'a Sim, duration: Nanos) -> impl Future<Output = ()> + 'a {
        self.run_queued(sim, duration, WaitReason::OnCpu, false)
    }

    /// Like [`Cpu::run`], with the time on the core accounted under `reason`: kernel work done
    /// on behalf of an operation that is itself a stall for it (e.g. direct reclaim scanning
    /// the LRU for an allocation, [`WaitReason::DirectReclaim`]).
    pub fn run_as<'a>(
        &'a self,
        sim: &'a Sim,
        duration: Nanos,
        reason: WaitReason,
    ) -> impl Future<Output = ()> + 'a {
        self.run_queued(sim, duration, reason, false)
    }

    /// Like [`Cpu::run`]; when `urgent`, a wait for a core is served before every
    /// non-urgent waiter (FastTrack's foreground-first hand-off of the core).
    ///
    /// (These wrappers return `run_queued`'s future itself: a CPU segment is two per page
    /// written, and each `async` layer around it cost its own state and poll.)
    pub fn run_urgent<'a>(
        &'a self,
        sim: &'a Sim,
        duration: Nanos,
        urgent: bool,
    ) -> impl Future<Output = ()> + 'a {
        self.run_queued(sim, duration, WaitReason::OnCpu, urgent)
    }

    /// A segment of `duration` under `reason` run now, when a core is free and nothing else
    /// can happen before the segment ends ([`Sim::sleep_now`]): what awaiting [`Cpu::run_as`]
    /// (or `run_urgent`: with a core free, urgency changes nothing) does then, without a
    /// future. Returns false, nothing changed, otherwise; the caller then awaits the segment.
    #[inline]
    pub fn run_now(&self, sim: &Sim, duration: Nanos, reason: WaitReason) -> bool {
        if duration == 0 {
            return true;
        }
        // A free core means nobody waits for one: a task queues only while every core is
        // busy, and `release` frees a core only when both queues are empty. The segment takes
        // the core and gives it back with nothing run in between (that is what `sleep_now`
        // checks), so `release` would only free it again: the core count is left as it is
        // and neither queue is looked at.
        if self.busy.get() >= self.cores {
            return false;
        }
        debug_assert!(self.urgent_queue.is_empty() && self.run_queue.is_empty());
        if !sim.sleep_now(duration, reason, Blocker::None) {
            return false;
        }
        let mut stats = self.stats.get();
        stats.segments += 1;
        stats.busy_ns += duration;
        self.stats.set(stats);
        true
    }

    /// `n` segments of `duration` each under `reason`, back to back, run now when a core is
    /// free and nothing else can happen before the last ends ([`Sim::sleep_now_n`]): what `n`
    /// calls of [`Cpu::run_now`] in a row do when all succeed. Returns false, nothing
    /// changed, otherwise (also when only some could run now); the caller then runs them one
    /// by one. For a run of pages copied with nothing between their copies.
    pub fn run_now_n(&self, sim: &Sim, duration: Nanos, n: u64, reason: WaitReason) -> bool {
        if duration == 0 || n == 0 {
            return true;
        }
        // As in `run_now`: nobody waits for a free core, and the core count is left alone.
        if self.busy.get() >= self.cores {
            return false;
        }
        if !sim.sleep_now_n(duration, n, reason, Blocker::None) {
            return false;
        }
        let mut stats = self.stats.get();
        stats.segments += n;
        stats.busy_ns += duration * n;
        self.stats.set(stats);
        true
    }

    async fn run_queued(&self, sim: &Sim, duration: Nanos, reason: WaitReason, urgent: bool) {
        if duration == 0 {
            return;
        }
        let mut stats = self.stats.get();
        stats.segments += 1;
        stats.busy_ns += duration;
        if self.busy.get() < self.cores {
            self.busy.set(self.busy.get() + 1);
        } else {
            stats.waits += 1;
            self.stats.set(stats);
            // Woken only by `release`, which hands its core over (busy stays the same).
            let queue = if urgent {
                &self.urgent_queue
            } else {
                &self.run_queue
            };
            queue.wait(sim, WaitReason::CpuWait, Blocker::None).await;
            stats = self.stats.get();
        }
        self.stats.set(stats);
        assert!(self.busy.get() <= self.cores, "more cores busy than exist");
        sim.sleep_for(duration, reason, Blocker::None).await;
        self.release(sim);
    }

    /// Gives the core to the first task in the run queue, or frees it.
    fn release(&self, sim: &Sim) {
        assert!(self.busy.get() > 0, "release of a core nobody holds");
        if !self.urgent_queue.wake_one(sim) && !self.run_queue.wake_one(sim) {
            self.busy.set(self.busy.get() - 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::Simulation;
    use std::rc::Rc;

    #[test]
    fn an_urgent_task_gets_the_next_free_core_before_earlier_waiters() {
        // One core; a background task runs 10 segments back to back, another background task
        // waits for the core from t=1, a foreground (urgent) task asks at t=2: it runs as soon
        // as the first segment ends, before the earlier waiter.
        let sim = Simulation::new(1);
        let cpu = Rc::new(Cpu::new(1));
        let (s, c) = (sim.handle(), cpu.clone());
        sim.spawn("bg-copy", async move {
            for _ in 0..10 {
                c.run(&s, 10).await;
            }
        });
        let mut handles = Vec::new();
        for (name, at, urgent) in [("bg", 1, false), ("fg", 2, true)] {
            let (s, c) = (sim.handle(), cpu.clone());
            handles.push(sim.spawn(name, async move {
                s.sleep(at).await;
                c.run_urgent(&s, 10, urgent).await;
                s.now()
            }));
        }
        sim.run_until(u64::MAX, true).unwrap();
        let done: Vec<u64> = handles.iter().map(|h| h.result().unwrap()).collect();
        assert_eq!(done, vec![30, 20], "fg at 10..20, then bg at 20..30");
    }

    #[test]
    fn tasks_beyond_the_cores_wait_in_the_run_queue_in_arrival_order() {
        let sim = Simulation::new(1);
        let cpu = Rc::new(Cpu::new(2));
        let mut handles = Vec::new();
        for i in 0..5u64 {
            let (s, c) = (sim.handle(), cpu.clone());
            handles.push(sim.spawn(&format!("t{i}"), async move {
                c.run(&s, 10).await;
                s.now()
            }));
        }
        sim.run_until(u64::MAX, true).unwrap();
        let done: Vec<u64> = handles.iter().map(|h| h.result().unwrap()).collect();
        assert_eq!(done, vec![10, 10, 20, 20, 30]);
        let waited = sim.blocked_times(handles[4].task());
        assert_eq!(waited.get(WaitReason::CpuWait), 20);
        assert_eq!(waited.get(WaitReason::OnCpu), 10);
        assert_eq!(waited.stalled_total(), 20, "running is not a stall");
        assert_eq!(
            cpu.stats(),
            CpuStats {
                segments: 5,
                busy_ns: 50,
                waits: 3
            }
        );
        assert_eq!(cpu.busy(), 0);
    }

    #[test]
    fn a_freed_core_goes_to_the_waiter_not_to_a_newcomer() {
        let sim = Simulation::new(1);
        let cpu = Rc::new(Cpu::new(1));
        let order = Rc::new(std::cell::RefCell::new(Vec::new()));
        for (name, start) in [("first", 0u64), ("waiter", 1), ("newcomer", 10)] {
            let (s, c, o) = (sim.handle(), cpu.clone(), order.clone());
            sim.spawn(name, async move {
                s.sleep(start).await;
                c.run(&s, 10).await;
                o.borrow_mut().push((name, s.now()));
            });
        }
        sim.run_until(u64::MAX, true).unwrap();
        assert_eq!(
            *order.borrow(),
            vec![("first", 10), ("waiter", 20), ("newcomer", 30)]
        );
    }

    #[test]
    fn zero_time_costs_nothing() {
        let sim = Simulation::new(1);
        let cpu = Rc::new(Cpu::new(1));
        let (s, c) = (sim.handle(), cpu.clone());
        sim.spawn("t", async move { c.run(&s, 0).await });
        sim.run_until(u64::MAX, true).unwrap();
        assert_eq!((sim.now(), cpu.stats().segments), (0, 0));
    }

    /// Three tasks on two cores run segments (some at once, some waiting for a core or behind
    /// a timer), with `run_now` tried first or not at all; what each task saw and the
    /// engine's and the CPU's counters.
    fn segments_with(run_now: bool) -> String {
        let sim = Simulation::new(1);
        let cpu = Rc::new(Cpu::new(2));
        let mut handles = Vec::new();
        for (i, name) in ["a", "b", "c"].into_iter().enumerate() {
            let (s, c) = (sim.handle(), cpu.clone());
            handles.push(sim.spawn(name, async move {
                let task = s.current_task().unwrap();
                s.start_wait_log(task);
                let mut seen = Vec::new();
                for round in 0..40u64 {
                    let cost = 3 + (round * 7 + i as u64 * 5) % 11;
                    let reason = if round % 3 == 0 {
                        WaitReason::DirectReclaim
                    } else {
                        WaitReason::OnCpu
                    };
                    if !(run_now && c.run_now(&s, cost, reason)) {
                        c.run_as(&s, cost, reason).await;
                    }
                    seen.push(s.now());
                    if round % 5 == i as u64 {
                        s.sleep(4).await;
                    }
                }
                let log = s.take_wait_log(task);
                (seen, format!("{:?}", log.records), log.dropped)
            }));
        }
        // A timer task whose events fall inside segments.
        let s = sim.handle();
        sim.spawn("timer", async move {
            for _ in 0..30 {
                s.sleep(9).await;
            }
        });
        sim.run_until(u64::MAX, true).unwrap();
        let s = sim.handle();
        let mut out = format!(
            "events {} wakeups {} now {} cpu {:?}\n",
            s.events_processed(),
            s.wakeups(),
            s.now(),
            cpu.stats()
        );
        for h in &handles {
            out += &format!(
                "{:?} {:?}\n",
                h.result().unwrap(),
                s.blocked_times(h.task())
            );
        }
        out
    }

    #[test]
    fn a_segment_run_now_is_the_segment_awaited() {
        let with = segments_with(true);
        assert_eq!(with, segments_with(false));
        // Segments waited for a core too (the comparison covers the fall-back).
        assert!(!with.contains("waits: 0"), "{with}");
    }

    /// One task on one core runs segments among everything that changes what may happen
    /// before a segment ends (what `Sim::sleep_now`'s cached horizon must follow): events it
    /// schedules itself inside and past its next segment, tasks it spawns and wakes, a
    /// sampler and a timeline's counters, a run cut into slices by time limits, and a second
    /// application task that finishes (a run that ends when its tasks are done). Each round
    /// runs one to four segments back to back. `mode`: 0 no `run_now`, 1 `run_now`, 2
    /// `run_now` with the sleep short cut off (never at once), 3 `run_now_n` for the round's
    /// segments, else `run_now` one by one.
    fn segments_among_changes(mode: u8) -> (String, u64) {
        let sim = Simulation::new(1);
        sim.set_sleep_short_cut(mode != 2);
        sim.enable_timeline(crate::sim::timeline::TimelineConfig {
            start_ns: 0,
            end_ns: Nanos::MAX,
            max_records: 100_000,
            counter_period_ns: 37,
        });
        let sampled = Rc::new(Cell::new(0u64));
        let seen_by_sampler = sampled.clone();
        sim.set_timeline_sampler(move |s, at| {
            seen_by_sampler.set(
                (seen_by_sampler.get().wrapping_mul(31) + at).wrapping_add(s.events_processed()),
            );
            s.timeline_counter(at, "events", s.events_processed() as f64);
        });
        let cpu = Rc::new(Cpu::new(1));
        let fired = Rc::new(std::cell::RefCell::new(Vec::new()));
        let (s, c, f) = (sim.handle(), cpu.clone(), fired.clone());
        let worker = sim.spawn("worker", async move {
            let me = s.current_task().unwrap();
            s.start_wait_log(me);
            let queue = crate::sim::sync::WaitQueue::new();
            let mut seen = Vec::new();
            for round in 0..300u64 {
                let cost = 2 + round % 7;
                match round % 11 {
                    // An event inside the next segment, at its end, just after it.
                    0 => {
                        let f = f.clone();
                        s.schedule(s.now() + cost / 2, move |s| f.borrow_mut().push(s.now()));
                    }
                    1 => {
                        let f = f.clone();
                        s.schedule(s.now() + cost, move |s| f.borrow_mut().push(s.now()));
                    }
                    2 => {
                        let f = f.clone();
                        s.schedule(s.now() + cost + 1, move |s| f.borrow_mut().push(s.now()));
                    }
                    // A task made ready: it runs before the segment ends.
                    3 => {
                        let (s2, f) = (s.clone(), f.clone());
                        s.spawn_daemon("helper", async move {
                            f.borrow_mut().push(1_000_000 + s2.now());
                        });
                    }
                    // A waiter woken by this task (a wake pushes onto the ready queue).
                    4 => {
                        let (s2, q) = (s.clone(), queue.clone());
                        s.spawn_daemon("waiter", async move {
                            q.wait(&s2, WaitReason::WaitQueue, Blocker::None).await;
                        });
                    }
                    5 => {
                        queue.wake_all(&s);
                    }
                    _ => {}
                }
                let reason = if round % 4 == 0 {
                    WaitReason::DirectReclaim
                } else {
                    WaitReason::OnCpu
                };
                let segments = 1 + round % 4;
                if !(mode == 3 && c.run_now_n(&s, cost, segments, reason)) {
                    for _ in 0..segments {
                        if !(mode > 0 && c.run_now(&s, cost, reason)) {
                            c.run_as(&s, cost, reason).await;
                        }
                    }
                }
                seen.push(s.now());
                if round % 23 == 0 {
                    let log = s.take_wait_log(me);
                    seen.push(log.records.len() as u64 * 1_000_000 + log.dropped);
                    for r in &log.records {
                        seen.extend([r.wait.since_ns, r.ended_ns, r.wait.reason as u64]);
                    }
                    s.start_wait_log(me);
                }
                if round % 17 == 0 {
                    s.sleep(3).await;
                }
            }
            seen
        });
        let s = sim.handle();
        let short = sim.spawn("short", async move {
            for _ in 0..5 {
                s.sleep(50).await;
            }
        });
        let mut ends = Vec::new();
        let mut limit = 0;
        while !sim.is_finished(worker.task()) || !sim.is_finished(short.task()) {
            limit += 97;
            ends.push(sim.run_until(limit, true).unwrap());
        }
        let timeline = sim.take_timeline().unwrap();
        let s = sim.handle();
        let text = format!(
            "events {} wakeups {} now {} cpu {:?}\nends {:?}\nseen {:?}\nfired {:?}\n\
             sampled {}\nblocked {:?}\nwaits {:?}\ncounters {:?}",
            s.events_processed(),
            s.wakeups(),
            s.now(),
            cpu.stats(),
            ends,
            worker.result().unwrap(),
            fired.borrow(),
            sampled.get(),
            s.blocked_times(worker.task()),
            timeline.waits,
            timeline.counters,
        );
        (text, s.sleeps_short_cut())
    }

    #[test]
    fn run_now_among_events_tasks_samplers_and_limits_is_the_segment_awaited() {
        let (awaited, _) = segments_among_changes(0);
        let (at_once, short_cut) = segments_among_changes(1);
        assert_eq!(at_once, awaited);
        assert!(short_cut > 100, "most segments run at once: {short_cut}");
        let (never_at_once, short_cut) = segments_among_changes(2);
        assert_eq!(never_at_once, awaited);
        assert_eq!(short_cut, 0);
        let (in_runs, short_cut) = segments_among_changes(3);
        assert_eq!(in_runs, awaited);
        assert!(short_cut > 100, "most segments run at once: {short_cut}");
    }

    #[test]
    fn run_now_refuses_without_a_free_core_and_changes_nothing() {
        let sim = Simulation::new(1);
        let cpu = Rc::new(Cpu::new(1));
        let (s, c) = (sim.handle(), cpu.clone());
        sim.spawn("holder", async move { c.run(&s, 100).await });
        let (s, c) = (sim.handle(), cpu.clone());
        let refused = sim.spawn("other", async move {
            s.sleep(10).await;
            let before = (c.busy(), c.stats(), s.now());
            let ran = c.run_now(&s, 5, WaitReason::OnCpu);
            (ran, before == (c.busy(), c.stats(), s.now()))
        });
        sim.run_until(u64::MAX, true).unwrap();
        assert_eq!(refused.result().unwrap(), (false, true));
    }
}
