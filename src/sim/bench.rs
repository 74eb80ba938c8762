//! Engine microbenchmarks behind `mobistack bench`: how many timer events and how many task
//! wake-ups the executor processes per second of wall time on one core. Wall time is read here,
//! outside any simulation, and only to report speed.

use super::sync::WaitQueue;
use super::{Blocker, Simulation, WaitReason};
use std::rc::Rc;
use std::time::Instant;

/// One benchmark's outcome.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BenchResult {
    pub name: &'static str,
    pub what: &'static str,
    pub operations: u64,
    pub wall_seconds: f64,
    pub per_second: f64,
}

impl BenchResult {
    /// `operations` done in `wall_seconds` of wall time: `per_second` is their rate.
    pub fn counted(
        name: &'static str,
        what: &'static str,
        operations: u64,
        wall_seconds: f64,
    ) -> BenchResult {
        BenchResult {
            name,
            what,
            operations,
            wall_seconds,
            per_second: operations as f64 / wall_seconds,
        }
    }
}

/// `tasks` tasks each sleep `rounds` times with staggered periods: every sleep is one timer event
/// through the event queue plus one wake-up and one poll.
pub fn timer_events(tasks: u64, rounds: u64) -> BenchResult {
    let sim = Simulation::new(1);
    for t in 0..tasks {
        let s = sim.handle();
        sim.spawn("sleeper", async move {
            for _ in 0..rounds {
                s.sleep(1_000 + t * 7).await;
            }
        });
    }
    let start = Instant::now();
    sim.run_until(u64::MAX, true).expect("no deadlock");
    let wall = start.elapsed().as_secs_f64();
    let events = sim.events_processed();
    assert_eq!(events, tasks * rounds, "one event per sleep");
    BenchResult::counted("timer-events", "events/s", events, wall)
}

/// Callback events that each schedule the next one (the way device models are driven).
pub fn callback_events(chains: u64, length: u64) -> BenchResult {
    fn step(sim: &super::Sim, left: u64) {
        if left > 0 {
            sim.schedule(sim.now() + 500, move |s| step(s, left - 1));
        }
    }
    let sim = Simulation::new(1);
    for _ in 0..chains {
        step(&sim, length);
    }
    let start = Instant::now();
    sim.run_until(u64::MAX, false)
        .expect("no tasks, no deadlock");
    let wall = start.elapsed().as_secs_f64();
    let events = sim.events_processed();
    assert_eq!(events, chains * length);
    BenchResult::counted("callback-events", "events/s", events, wall)
}

/// Pairs of tasks ping-pong through wait queues at one virtual instant: every round trip is two
/// wake-ups and two polls with no timer event.
pub fn wakeups(pairs: u64, rounds: u64) -> BenchResult {
    let sim = Simulation::new(1);
    for _ in 0..pairs {
        let ping = WaitQueue::new();
        let pong = WaitQueue::new();
        let turn = Rc::new(std::cell::Cell::new(0u64));
        for side in 0..2u64 {
            let s = sim.handle();
            let (mine, theirs) = if side == 0 {
                (ping.clone(), pong.clone())
            } else {
                (pong.clone(), ping.clone())
            };
            let turn = turn.clone();
            sim.spawn("pingpong", async move {
                for _ in 0..rounds {
                    while turn.get() % 2 != side {
                        mine.wait(&s, WaitReason::WaitQueue, Blocker::None).await;
                    }
                    turn.set(turn.get() + 1);
                    theirs.wake_one(&s);
                }
            });
        }
    }
    let start = Instant::now();
    sim.run_until(u64::MAX, true).expect("no deadlock");
    let wall = start.elapsed().as_secs_f64();
    let wakes = sim.wakeups();
    // Every hand-off but the first and the last finds the other side waiting.
    assert_eq!(
        wakes,
        pairs * (2 * rounds - 2),
        "each hand-off wakes the other side"
    );
    BenchResult::counted("task-wakeups", "wake-ups/s", wakes, wall)
}

/// The suite `mobistack bench` runs; `scale` multiplies the work (1 = about a second in release).
pub fn run_all(scale: u64) -> Vec<BenchResult> {
    let scale = scale.max(1);
    vec![
        timer_events(1_000, 2_000 * scale),
        callback_events(1_000, 2_000 * scale),
        wakeups(100, 20_000 * scale),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn benchmarks_count_what_they_claim() {
        let timers = timer_events(10, 10);
        assert_eq!(timers.operations, 100);
        let callbacks = callback_events(3, 5);
        assert_eq!(callbacks.operations, 15);
        let wakes = wakeups(2, 10);
        assert_eq!(wakes.operations, 2 * 18);
    }
}
