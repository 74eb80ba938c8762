//! Engine behaviour tests: ordering, primitives, accounting, deadlock reports.

use super::sync::{Completion, Mutex, WaitQueue};
use super::*;
use std::cell::RefCell;
use std::rc::Rc;

fn log() -> Rc<RefCell<Vec<String>>> {
    Rc::new(RefCell::new(Vec::new()))
}

#[test]
fn sleeps_advance_virtual_time_and_ties_keep_spawn_order() {
    let sim = Simulation::new(1);
    let out = log();
    for name in ["a", "b", "c"] {
        let (s, out) = (sim.handle(), out.clone());
        sim.spawn(name, async move {
            s.sleep(100).await;
            out.borrow_mut().push(format!("{name}@{}", s.now()));
            s.sleep(50).await;
            out.borrow_mut().push(format!("{name}@{}", s.now()));
        });
    }
    assert_eq!(sim.run_until(u64::MAX, true), Ok(RunEnd::AllTasksDone));
    assert_eq!(
        *out.borrow(),
        ["a@100", "b@100", "c@100", "a@150", "b@150", "c@150"]
    );
    assert_eq!(sim.now(), 150);
}

#[test]
fn run_stops_at_the_time_limit_and_resumes() {
    let sim = Simulation::new(1);
    let s = sim.handle();
    sim.spawn("ticker", async move {
        for _ in 0..10 {
            s.sleep(1_000).await;
        }
    });
    assert_eq!(sim.run_until(4_500, true), Ok(RunEnd::TimeLimit));
    assert_eq!(sim.now(), 4_500);
    assert_eq!(sim.run_until(u64::MAX, true), Ok(RunEnd::AllTasksDone));
    assert_eq!(sim.now(), 10_000);
}

#[test]
fn wait_queue_wakes_one_in_fifo_order_or_all() {
    let sim = Simulation::new(1);
    let queue = WaitQueue::new();
    let out = log();
    for name in ["first", "second", "third"] {
        let (s, q, out) = (sim.handle(), queue.clone(), out.clone());
        sim.spawn(name, async move {
            q.wait(&s, WaitReason::WaitQueue, Blocker::None).await;
            out.borrow_mut().push(format!("{name}@{}", s.now()));
        });
    }
    let (s, q) = (sim.handle(), queue.clone());
    sim.spawn("waker", async move {
        s.sleep(10).await;
        assert!(q.wake_one(&s));
        s.sleep(10).await;
        assert_eq!(q.wake_all(&s), 2);
        assert!(!q.wake_one(&s), "nobody left");
    });
    sim.run_until(u64::MAX, true).unwrap();
    assert_eq!(*out.borrow(), ["first@10", "second@20", "third@20"]);
}

#[test]
fn mutex_hands_over_in_fifo_order_and_names_its_owner() {
    let sim = Simulation::new(1);
    let lock = Mutex::new(&sim, "i_rwsem", WaitReason::InodeLock);
    let out = log();
    let (s, l) = (sim.handle(), lock.clone());
    let holder = sim.spawn("holder", async move {
        let _guard = l.lock(&s).await;
        s.sleep(1_000).await;
    });
    for name in ["w1", "w2"] {
        let (s, l, out) = (sim.handle(), lock.clone(), out.clone());
        sim.spawn(name, async move {
            s.sleep(1).await;
            let _guard = l.lock(&s).await;
            out.borrow_mut().push(format!("{name}@{}", s.now()));
            s.sleep(100).await;
        });
    }
    assert_eq!(sim.run_until(500, true), Ok(RunEnd::TimeLimit));
    assert_eq!(lock.owner(), Some(holder.task()));
    assert_eq!(lock.waiters(), 2);
    let w1 = TaskId(1);
    let chain = sim.explain_wait(w1);
    assert!(chain.contains("w1 (T1) waits"), "{chain}");
    assert!(
        chain.contains("inode_lock on lock L#0 (i_rwsem)"),
        "{chain}"
    );
    assert!(chain.contains("held by holder (T0)"), "{chain}");
    sim.run_until(u64::MAX, true).unwrap();
    assert_eq!(*out.borrow(), ["w1@1000", "w2@1100"]);
    let blocked = sim.blocked_times(TaskId(2));
    assert_eq!(blocked.get(WaitReason::InodeLock), 1_099);
    assert_eq!(lock.owner(), None);
}

#[test]
fn urgent_lockers_pass_earlier_ordinary_waiters_but_not_each_other() {
    // FastTrack §4.2: the foreground app's waiters take the page-cache lock first, regardless
    // of arrival; among urgent waiters, arrival order.
    let sim = Simulation::new(1);
    let lock = Mutex::new(&sim, "page_cache_lock", WaitReason::PageAlloc);
    let out = log();
    let (s, l) = (sim.handle(), lock.clone());
    sim.spawn("holder", async move {
        let _guard = l.lock(&s).await;
        s.sleep(1_000).await;
    });
    for (name, at, urgent) in [
        ("bg1", 1, false),
        ("bg2", 2, false),
        ("fg1", 3, true),
        ("fg2", 4, true),
    ] {
        let (s, l, out) = (sim.handle(), lock.clone(), out.clone());
        sim.spawn(name, async move {
            s.sleep(at).await;
            let _guard = if urgent {
                l.lock_urgent(&s).await
            } else {
                l.lock(&s).await
            };
            out.borrow_mut().push(format!("{name}@{}", s.now()));
            s.sleep(100).await;
        });
    }
    assert_eq!(sim.run_until(500, true), Ok(RunEnd::TimeLimit));
    assert_eq!((lock.waiters(), lock.urgent_waiters()), (4, 2));
    sim.run_until(u64::MAX, true).unwrap();
    assert_eq!(
        *out.borrow(),
        ["fg1@1000", "fg2@1100", "bg1@1200", "bg2@1300"]
    );
    assert_eq!(lock.urgent_waiters(), 0);
}

#[test]
fn completion_delivers_its_value_to_every_waiter() {
    let sim = Simulation::new(1);
    let done: Completion<u32> = Completion::new();
    let total = Rc::new(RefCell::new(0));
    for _ in 0..3 {
        let (s, d, total) = (sim.handle(), done.clone(), total.clone());
        sim.spawn("waiter", async move {
            let v = d.wait(&s, WaitReason::Device, Blocker::Request(7)).await;
            *total.borrow_mut() += v;
            assert_eq!(s.now(), 250);
        });
    }
    let (s, d) = (sim.handle(), done.clone());
    sim.schedule(250, move |_| d.complete(&s, 5));
    sim.run_until(u64::MAX, true).unwrap();
    assert_eq!(*total.borrow(), 15);
    assert_eq!(sim.blocked_times(TaskId(0)).get(WaitReason::Device), 250);
}

#[test]
fn completion_wakes_its_waiters_in_the_order_they_came() {
    // The first waiter is kept apart from the others (inline); the order must not change.
    let sim = Simulation::new(1);
    let done: Completion<u32> = Completion::new();
    let order = Rc::new(RefCell::new(Vec::new()));
    for waiter in 0..4u32 {
        let (s, d, order) = (sim.handle(), done.clone(), order.clone());
        sim.spawn("waiter", async move {
            s.sleep(u64::from(10 * waiter)).await;
            d.wait(&s, WaitReason::Device, Blocker::None).await;
            order.borrow_mut().push(waiter);
        });
    }
    let (s, d) = (sim.handle(), done.clone());
    sim.schedule(100, move |_| d.complete(&s, 1));
    sim.run_until(u64::MAX, true).unwrap();
    assert_eq!(*order.borrow(), vec![0, 1, 2, 3]);
}

#[test]
fn a_completion_is_recycled_only_when_nothing_else_holds_it() {
    let sim = Simulation::new(1);
    let mut done: Completion<u32> = Completion::new();
    let (s, d) = (sim.handle(), done.clone());
    let waiter = sim.spawn("waiter", async move {
        d.wait(&s, WaitReason::Device, Blocker::None).await
    });
    let (s, d) = (sim.handle(), done.clone());
    sim.schedule(100, move |_| d.complete(&s, 7));
    assert!(!done.recycle(), "the waiter and the event hold it");
    sim.run_until(u64::MAX, true).unwrap();
    assert_eq!(waiter.result(), Some(7));
    assert!(done.is_done());
    assert!(done.recycle(), "the waiter finished and the event ran");
    assert!(!done.is_done());
    // As new: it completes and wakes a waiter again.
    let (s, d) = (sim.handle(), done.clone());
    let again = sim.spawn("again", async move {
        d.wait(&s, WaitReason::Device, Blocker::None).await
    });
    let (s, d) = (sim.handle(), done.clone());
    sim.schedule(200, move |_| d.complete(&s, 9));
    sim.run_until(u64::MAX, true).unwrap();
    assert_eq!(again.result(), Some(9));
}

#[test]
fn join_returns_the_task_output_and_accounts_join_time() {
    let sim = Simulation::new(1);
    let s = sim.handle();
    let child = sim.spawn("child", async move {
        s.sleep(40).await;
        42u64
    });
    let s = sim.handle();
    let parent = sim.spawn("parent", async move { child.join(&s).await + 1 });
    sim.run_until(u64::MAX, true).unwrap();
    assert_eq!(parent.result(), Some(43));
    assert_eq!(sim.blocked_times(parent.task()).get(WaitReason::Join), 40);
}

#[test]
fn a_stale_wake_of_an_ended_wait_is_ignored() {
    let sim = Simulation::new(1);
    let queue = WaitQueue::new();
    let (s, q) = (sim.handle(), queue.clone());
    let task = sim.spawn("sleeper", async move {
        // First wait ends by the wake at 10; its token must not end the second wait.
        q.wait(&s, WaitReason::WaitQueue, Blocker::None).await;
        s.sleep(100).await;
        s.now()
    });
    let (s, q) = (sim.handle(), queue.clone());
    sim.spawn("waker", async move {
        s.sleep(10).await;
        q.wake_one(&s);
    });
    sim.run_until(u64::MAX, true).unwrap();
    assert_eq!(task.result(), Some(110));
    let stale = WakeToken {
        task: task.task(),
        token: 1,
    };
    assert!(!sim.wake(stale), "a finished task cannot be woken");
}

#[test]
fn tasks_that_wait_on_each_other_end_the_run_with_a_deadlock_report() {
    let sim = Simulation::new(1);
    let a = Mutex::new(&sim, "a", WaitReason::BufferLock);
    let b = Mutex::new(&sim, "b", WaitReason::InodeLock);
    let (s, first, second) = (sim.handle(), a.clone(), b.clone());
    sim.spawn("writer", async move {
        let _held = first.lock(&s).await;
        s.sleep(10).await;
        let _never = second.lock(&s).await;
    });
    let (s, first, second) = (sim.handle(), b.clone(), a.clone());
    sim.spawn("fsync", async move {
        let _held = first.lock(&s).await;
        s.sleep(10).await;
        let _never = second.lock(&s).await;
    });
    let error = sim.run_until(u64::MAX, true).unwrap_err();
    let report = error.deadlock().expect("a deadlock");
    assert_eq!(report.blocked.len(), 2);
    assert_eq!(report.now_ns, 10);
    let text = report.to_string();
    assert!(text.contains("deadlock at"), "{text}");
    assert!(text.contains("writer (T0) waits"), "{text}");
    assert!(text.contains("held by fsync (T1)"), "{text}");
    assert!(text.contains("closes the cycle"), "{text}");
}

#[test]
fn a_daemon_waiting_forever_is_not_a_deadlock() {
    let sim = Simulation::new(1);
    let queue = WaitQueue::new();
    let (s, q) = (sim.handle(), queue.clone());
    sim.spawn_daemon("flusher", async move {
        loop {
            q.wait(&s, WaitReason::WaitQueue, Blocker::None).await;
        }
    });
    let s = sim.handle();
    sim.spawn("app", async move { s.sleep(5).await });
    assert_eq!(sim.run_until(u64::MAX, true), Ok(RunEnd::AllTasksDone));
    assert_eq!(sim.run_until(u64::MAX, false), Ok(RunEnd::Idle));
}

#[test]
#[should_panic(expected = "returned Pending without blocking")]
fn a_foreign_future_that_never_blocks_through_the_engine_is_caught() {
    let sim = Simulation::new(1);
    sim.spawn("bad", std::future::pending::<()>());
    let _ = sim.run_until(u64::MAX, true);
}

#[test]
fn the_same_seed_gives_the_same_interleaving() {
    fn trace(seed: u64) -> Vec<(u64, u32)> {
        let sim = Simulation::new(seed);
        let out = Rc::new(RefCell::new(Vec::new()));
        for id in 0..4u32 {
            let (s, out) = (sim.handle(), out.clone());
            sim.spawn("worker", async move {
                let mut rng = s.rng(&format!("worker-{id}"));
                for _ in 0..20 {
                    s.sleep(rng.below(1_000)).await;
                    out.borrow_mut().push((s.now(), id));
                }
            });
        }
        sim.run_until(u64::MAX, true).unwrap();
        let v = out.borrow().clone();
        v
    }
    assert_eq!(trace(3), trace(3));
    assert_ne!(trace(3), trace(4));
}

#[test]
fn a_wait_log_keeps_each_ended_wait_in_order() {
    let sim = Simulation::new(1);
    let lock = Mutex::new(&sim, "j_state_lock", WaitReason::JournalHandle);
    let (s, l) = (sim.handle(), lock.clone());
    sim.spawn("holder", async move {
        let _held = l.lock(&s).await;
        s.sleep(30).await;
    });
    let (s, l) = (sim.handle(), lock.clone());
    let worker = sim.spawn("worker", async move {
        let me = s.current_task().unwrap();
        s.start_wait_log(me);
        s.sleep(5).await;
        drop(l.lock(&s).await);
        s.sleep_for(7, WaitReason::DirtyThrottle, Blocker::None)
            .await;
        s.take_wait_log(me)
    });
    sim.run_until(u64::MAX, true).unwrap();
    let log = worker.result().unwrap();
    let reasons: Vec<WaitReason> = log.records.iter().map(|r| r.wait.reason).collect();
    assert_eq!(
        reasons,
        [
            WaitReason::Sleep,
            WaitReason::JournalHandle,
            WaitReason::DirtyThrottle
        ]
    );
    let lock_wait = log.records[1];
    assert_eq!(lock_wait.ended_ns - lock_wait.wait.since_ns, 25);
    assert_eq!(lock_wait.wait.holder, Some(TaskId(0)));
    assert_eq!(
        sim.describe_blocker(lock_wait.wait.blocker),
        "lock L#0 (j_state_lock)"
    );
    assert_eq!(log.dropped, 0);
    assert!(
        sim.take_wait_log(worker.task()).records.is_empty(),
        "logging stopped"
    );
}

#[test]
fn wait_logs_are_bounded_and_keep_the_longest_waits() {
    let sim = Simulation::new(1);
    let s = sim.handle();
    let task = sim.spawn("sleeper", async move {
        let me = s.current_task().unwrap();
        s.start_wait_log(me);
        // Alternating reasons, so no two waits merge; the last wait is the longest.
        for i in 0..(MAX_LOGGED_WAITS + 10) {
            let reason = if i % 2 == 0 {
                WaitReason::Sleep
            } else {
                WaitReason::DirtyThrottle
            };
            s.sleep_for(1, reason, Blocker::None).await;
        }
        s.sleep_for(1_000, WaitReason::BufferLock, Blocker::Buffer(7))
            .await;
        s.take_wait_log(me)
    });
    sim.run_until(u64::MAX, true).unwrap();
    let log = task.result().unwrap();
    assert_eq!(log.records.len(), MAX_LOGGED_WAITS);
    assert_eq!(log.dropped, 11);
    let last = log.records.last().unwrap();
    assert_eq!(
        (last.wait.reason, last.ended_ns - last.wait.since_ns),
        (WaitReason::BufferLock, 1_000),
        "a long wait after the log filled is kept"
    );
}

#[test]
fn back_to_back_waits_of_one_reason_are_one_record() {
    let sim = Simulation::new(1);
    let s = sim.handle();
    let task = sim.spawn("copier", async move {
        let me = s.current_task().unwrap();
        s.start_wait_log(me);
        for _ in 0..1_000 {
            s.sleep_for(3, WaitReason::OnCpu, Blocker::None).await;
        }
        s.sleep_for(5, WaitReason::PageLock, Blocker::None).await;
        s.sleep_for(3, WaitReason::OnCpu, Blocker::None).await;
        s.take_wait_log(me)
    });
    sim.run_until(u64::MAX, true).unwrap();
    let log = task.result().unwrap();
    let spans: Vec<(WaitReason, u64)> = log
        .records
        .iter()
        .map(|r| (r.wait.reason, r.ended_ns - r.wait.since_ns))
        .collect();
    assert_eq!(
        spans,
        [
            (WaitReason::OnCpu, 3_000),
            (WaitReason::PageLock, 5),
            (WaitReason::OnCpu, 3)
        ]
    );
}

#[test]
fn a_task_that_yields_forever_at_one_instant_is_a_livelock_naming_it() {
    let sim = Simulation::new(1);
    sim.set_step_limit(1000);
    let s = sim.handle();
    sim.spawn("spinner", async move {
        s.sleep(5).await;
        loop {
            s.yield_now().await;
        }
    });
    let error = sim.run_until(u64::MAX, true).unwrap_err();
    let livelock = error.livelock().expect("a livelock, not a deadlock");
    assert_eq!(livelock.now_ns, 5);
    assert_eq!(livelock.task.as_ref().unwrap().1, "spinner");
    assert_eq!(livelock.steps, 1001, "one more than the limit");
    let text = error.to_string();
    assert!(text.contains("zero-time livelock"), "{text}");
    assert!(text.contains("task `spinner` (T0)"), "{text}");
    assert!(text.contains("sleep or yield"), "{text}");
    // The run is over: running again reports the same livelock.
    assert!(sim
        .run_until(u64::MAX, true)
        .unwrap_err()
        .livelock()
        .is_some());
}

#[test]
fn a_loop_of_steps_that_never_blocks_is_a_livelock_naming_the_operation() {
    // A system call served from memory in 0 ns never returns Pending: without `Sim::step` the
    // loop would spin inside one poll forever.
    let sim = Simulation::new(1);
    sim.set_step_limit(500);
    let s = sim.handle();
    sim.spawn("reader", async move {
        loop {
            s.step("read").await;
        }
    });
    let error = sim.run_until(u64::MAX, true).unwrap_err();
    let text = error.to_string();
    assert!(text.contains("task `reader`"), "{text}");
    assert!(
        text.contains("`read` system calls that take no virtual time"),
        "{text}"
    );
}

#[test]
fn tasks_that_wake_each_other_at_one_instant_are_a_livelock_naming_the_last_wait() {
    // No event at all: each poll of one task wakes the other. The report is made at a poll and
    // names what the task was woken from (its last wait, read from the task's wait slot).
    let sim = Simulation::new(1);
    sim.set_step_limit(300);
    let (ping, pong) = (WaitQueue::new(), WaitQueue::new());
    for (name, mine, theirs) in [
        ("ping", ping.clone(), pong.clone()),
        ("pong", pong.clone(), ping.clone()),
    ] {
        let s = sim.handle();
        sim.spawn(name, async move {
            loop {
                theirs.wake_one(&s);
                mine.wait(&s, WaitReason::WaitQueue, Blocker::Buffer(7))
                    .await;
            }
        });
    }
    let error = sim.run_until(u64::MAX, true).unwrap_err();
    let livelock = error.livelock().expect("a livelock");
    assert_eq!(livelock.steps, 301);
    assert_eq!(
        livelock.doing,
        Doing::Woken(WaitReason::WaitQueue, Blocker::Buffer(7))
    );
    assert!(
        error
            .to_string()
            .contains("a `wait_event` wait on buffer #7 that ends at once"),
        "{error}"
    );
}

#[test]
fn callbacks_that_reschedule_at_the_same_instant_are_a_livelock() {
    fn again(sim: &Sim) {
        sim.schedule(sim.now(), again);
    }
    let sim = Simulation::new(1);
    sim.set_step_limit(200);
    sim.schedule(7, again);
    let error = sim.run_until(u64::MAX, false).unwrap_err();
    let livelock = error.livelock().unwrap();
    assert_eq!((livelock.now_ns, livelock.task.clone()), (7, None));
    assert!(
        error.to_string().contains("events were processed"),
        "{error}"
    );
}

#[test]
fn bursts_at_one_instant_below_the_limit_and_steps_across_time_are_fine() {
    // 100,000 wakes of one task at one instant (thousands of completions at once, each waking
    // the same waiter) and as many events: below the limit.
    let sim = Simulation::new(1);
    let queue = WaitQueue::new();
    let (s, q) = (sim.handle(), queue.clone());
    let waiter = sim.spawn("waiter", async move {
        let mut woken = 0u64;
        while woken < 100_000 {
            q.wait(&s, WaitReason::BlockIo, Blocker::None).await;
            woken += 1;
        }
        woken
    });
    let (s, q) = (sim.handle(), queue.clone());
    sim.spawn("completions", async move {
        s.sleep(10).await;
        for _ in 0..100_000 {
            let q = q.clone();
            s.schedule(s.now(), move |sim| {
                q.wake_one(sim);
            });
            s.yield_now().await;
        }
    });
    assert_eq!(sim.run_until(u64::MAX, true), Ok(RunEnd::AllTasksDone));
    assert_eq!(waiter.result(), Some(100_000));
    // Steps spread over time never add up: a thousand-step limit, ten thousand steps at
    // distinct instants.
    let sim = Simulation::new(1);
    sim.set_step_limit(1000);
    let s = sim.handle();
    sim.spawn("ticker", async move {
        for _ in 0..10_000 {
            s.step("read").await;
            s.sleep(1).await;
        }
    });
    assert_eq!(sim.run_until(u64::MAX, true), Ok(RunEnd::AllTasksDone));
}

/// A shared callback scheduled many times: each event calls it once, in time order and, at one
/// instant, in scheduling order with the boxed callbacks; the pending events keep it alive.
#[test]
fn shared_callbacks_run_in_order_with_boxed_ones() {
    struct Recorder {
        log: Rc<RefCell<Vec<(u64, &'static str)>>>,
    }
    impl super::SharedCallback for Recorder {
        fn call(self: Rc<Self>, sim: &super::Sim) {
            self.log.borrow_mut().push((sim.now(), "shared"));
        }
    }
    let sim = Simulation::new(1);
    let log = Rc::new(RefCell::new(Vec::new()));
    let recorder = Rc::new(Recorder { log: log.clone() });
    let handle = sim.handle();
    handle.schedule_shared(20, recorder.clone());
    let boxed = log.clone();
    sim.schedule(20, move |sim| boxed.borrow_mut().push((sim.now(), "boxed")));
    handle.schedule_shared(20, recorder.clone());
    handle.schedule_shared(5, recorder);
    sim.run_until(u64::MAX, false).unwrap();
    assert_eq!(
        *log.borrow(),
        vec![(5, "shared"), (20, "shared"), (20, "boxed"), (20, "shared")]
    );
}

/// A run with CPU segments, sleeps, wake-ups and a sampler, with the sleep short cut on or
/// off: what each task saw (times, waits), the event and wake-up counts, the samples and the
/// timeline's waits.
fn short_cut_run(short_cut: bool) -> (Vec<String>, u64, u64, u64, String) {
    let sim = Simulation::new(7);
    sim.set_sleep_short_cut(short_cut);
    sim.enable_timeline(super::timeline::TimelineConfig {
        start_ns: 0,
        end_ns: u64::MAX,
        max_records: 10_000,
        counter_period_ns: 0,
    });
    let cpu = Rc::new(super::cpu::Cpu::new(2));
    let queue = WaitQueue::new();
    let out = log();
    let samples = log();
    let sampled = samples.clone();
    sim.add_sampler(0, 5_000, 700, move |s, at| {
        sampled
            .borrow_mut()
            .push(format!("{at}:{}", s.events_processed()));
    });
    // A writer alone on the machine most of the time (its segments are short-cut), a task
    // waking it now and then, a third one competing for the two cores, and a timer callback.
    let tasks: Vec<(&str, u64, u64)> =
        vec![("writer", 3, 40), ("waker", 250, 6), ("rival", 900, 3)];
    let mut ids = Vec::new();
    for (name, gap, rounds) in tasks {
        let (s, c, q, out) = (sim.handle(), cpu.clone(), queue.clone(), out.clone());
        ids.push(
            sim.spawn(name, async move {
                for i in 0..rounds {
                    c.run(&s, gap).await;
                    match name {
                        "writer" if i % 10 == 9 => {
                            q.wait(&s, WaitReason::WaitQueue, Blocker::None).await;
                        }
                        "waker" => {
                            q.wake_all(&s);
                            s.sleep(gap).await;
                        }
                        _ => {
                            s.sleep_for(gap / 2, WaitReason::DirtyThrottle, Blocker::None)
                                .await
                        }
                    }
                    out.borrow_mut().push(format!("{name}:{i}@{}", s.now()));
                }
            })
            .task(),
        );
    }
    let o = out.clone();
    sim.schedule(1_234, move |s| {
        o.borrow_mut().push(format!("call@{}", s.now()))
    });
    sim.run_until(u64::MAX, true).unwrap();
    for id in &ids {
        let b = sim.blocked_times(*id);
        out.borrow_mut().push(format!("{b:?}"));
    }
    out.borrow_mut().extend(samples.borrow().iter().cloned());
    let timeline = format!("{:?}", sim.take_timeline().map(|t| t.waits));
    let seen = out.borrow().clone();
    (
        seen,
        sim.events_processed(),
        sim.wakeups(),
        sim.sleeps_short_cut(),
        timeline,
    )
}

#[test]
fn the_sleep_short_cut_changes_nothing_but_the_queue_work() {
    let (seen, events, wakeups, short, timeline) = short_cut_run(true);
    let (seen_off, events_off, wakeups_off, short_off, timeline_off) = short_cut_run(false);
    assert!(short > 0, "the short cut fired");
    assert_eq!(short_off, 0);
    assert_eq!(seen, seen_off);
    assert_eq!((events, wakeups), (events_off, wakeups_off));
    assert_eq!(timeline, timeline_off);
}

#[test]
fn a_sleep_is_not_short_cut_past_the_run_limit_or_an_event_due_first() {
    let sim = Simulation::new(1);
    let s = sim.handle();
    let done = Rc::new(RefCell::new(Vec::new()));
    let d = done.clone();
    sim.spawn("sleeper", async move {
        s.sleep(100).await;
        d.borrow_mut().push(s.now());
        s.sleep(100).await;
        d.borrow_mut().push(s.now());
    });
    let d = done.clone();
    sim.schedule(150, move |s| d.borrow_mut().push(1_000_000 + s.now()));
    // The first sleep ends past the limit: the run stops at the limit with it pending.
    assert_eq!(sim.run_until(50, true), Ok(RunEnd::TimeLimit));
    assert_eq!((sim.now(), done.borrow().len()), (50, 0));
    sim.run_until(u64::MAX, true).unwrap();
    // The callback at 150 runs before the second sleep's end at 200.
    assert_eq!(*done.borrow(), vec![100, 1_000_150, 200]);
}

/// A task that sleeps forever in 1 ns steps: without a bound, a run to `u64::MAX` would not end.
fn endless_ticker(sim: &Simulation) {
    let s = sim.handle();
    sim.spawn("ticker", async move {
        loop {
            s.sleep(1).await;
        }
    });
}

#[test]
fn the_event_limit_ends_a_run_as_a_normal_end() {
    let sim = Simulation::new(1);
    sim.set_event_limit(10_000);
    endless_ticker(&sim);
    assert_eq!(sim.run_until(u64::MAX, true), Ok(RunEnd::EventLimit));
    // Checked every PROGRESS_EVERY_EVENTS events: the run stops within that many past the bound.
    let events = sim.events_processed();
    assert!((10_000..10_000 + executor::PROGRESS_EVERY_EVENTS).contains(&events));
}

#[test]
fn a_budget_scope_bounds_the_simulations_made_inside_and_reports_it() {
    let ((), report) = budget::with_event_limit(5_000, || {
        let sim = Simulation::new(1);
        endless_ticker(&sim);
        assert_eq!(sim.run_until(u64::MAX, true), Ok(RunEnd::EventLimit));
    });
    assert!(report.event_limit_reached);
    assert!(report.engine_error.is_none());
    // Outside the scope, no bound.
    let sim = Simulation::new(1);
    endless_ticker(&sim);
    assert_eq!(sim.run_until(1_000_000, true), Ok(RunEnd::TimeLimit));
}
