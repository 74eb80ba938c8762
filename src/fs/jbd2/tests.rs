//! jbd2 behaviour tests over fake metadata buffers and ordered data, and the real block layer
//! (noop) over a fixed-latency device for the log.

use super::test_support::*;
use super::*;
use crate::sim::{Blocker, WaitReason};
use crate::units::{Nanos, NS_PER_MS};

fn default_rig() -> Rig {
    rig(JournalConfig::default())
}

#[test]
fn a_commit_writes_descriptor_copies_and_a_flushed_fua_commit_block() {
    let rig = default_rig();
    let (s, j) = (rig.sim.handle(), rig.journal.clone());
    let app = rig.sim.spawn("app", async move {
        let mut handle = j.start(&s, 8).await;
        for block in [100, 101, 102] {
            j.get_write_access(&s, &handle, block).await;
            j.dirty_metadata(&mut handle, block);
        }
        j.file_inode(&handle, 12);
        let tid = handle.tid;
        j.stop(&s, handle).await;
        let start = s.now();
        assert!(j.complete_transaction(&s, tid).await);
        (tid, s.now() - start)
    });
    rig.sim.run_until(10 * NS_PER_SEC, true).unwrap();
    let (tid, waited) = app.result().unwrap();
    let stats = rig.journal.stats();
    assert_eq!(
        (
            stats.log_descriptor_blocks,
            stats.log_metadata_blocks,
            stats.log_commit_blocks
        ),
        (1, 3, 1)
    );
    assert_eq!(rig.journal.commit_sequence(), tid);
    // Ordered data first: the inode's data was submitted and waited for before the commit
    // block. The descriptor and the three copies (consecutive log blocks, submitted under one
    // plug) merge into one request, overlapped by the 3 ms data wait; then the commit block
    // (flush + FUA, one 1 ms request on the fixed-latency device).
    let calls = rig.data.calls.borrow();
    assert_eq!(calls[0].0, "submit");
    assert_eq!(calls[1].0, "waited");
    assert_eq!(waited, 4 * NS_PER_MS);
    // After the commit the buffers are dirty for writeback home, and pinned by the journal.
    let dirtied = rig.buffers.dirtied.borrow();
    assert_eq!(
        dirtied.iter().map(|&(b, _)| b).collect::<Vec<_>>(),
        vec![100, 101, 102]
    );
    assert!(rig.buffers.get(100).pinned);
    let record = rig.journal.commit_records().pop().unwrap();
    assert_eq!(record.buffers, vec![100, 101, 102]);
    assert!(record.requested && record.barrier);
    let queue = rig.layer.with_queue(|q| q.stats());
    // Five bios, two requests: the log writes' plug merged four of them.
    assert_eq!(
        (queue.bios, queue.requests, queue.plug_merges),
        (5, 2, 3),
        "{queue:?}"
    );
}

/// A holder that starts a handle at 0 (with `start_now` when `at_once`, checking it joined the
/// transaction it created) and keeps it 100 ms, asleep; an fsync at 10 ms that locks the
/// transaction for commit.
fn spawn_holder_and_fsync(rig: &Rig, at_once: bool) {
    let (s, j) = (rig.sim.handle(), rig.journal.clone());
    rig.sim.spawn("holder", async move {
        let handle = if at_once {
            let handle = j
                .start_now(&s, 2)
                .expect("no transaction yet: one is created and joined");
            assert_eq!(j.running_tid(), Some(handle.tid));
            handle
        } else {
            j.start(&s, 2).await
        };
        s.sleep_for(100 * NS_PER_MS, WaitReason::PageWriteback, Blocker::None)
            .await;
        j.stop(&s, handle).await;
    });
    let (s, j) = (rig.sim.handle(), rig.journal.clone());
    rig.sim.spawn("fsync", async move {
        s.sleep(10 * NS_PER_MS).await;
        let tid = j.running_tid().unwrap();
        j.complete_transaction(&s, tid).await;
    });
}

#[test]
fn a_handle_waits_while_a_holder_asleep_keeps_the_transaction_locked() {
    // QASIO I_jhandle: A holds a handle and sleeps 100 ms (as on an asynchronous write); C asks
    // for a commit at 10 ms; B wants a handle at 20 ms and waits until A stops.
    let rig = default_rig();
    spawn_holder_and_fsync(&rig, false);
    let (s, j) = (rig.sim.handle(), rig.journal.clone());
    let late = rig.sim.spawn("late", async move {
        s.sleep(20 * NS_PER_MS).await;
        let start = s.now();
        let handle = j.start(&s, 2).await;
        let waited = s.now() - start;
        j.stop(&s, handle).await;
        waited
    });
    rig.sim.run_until(50 * NS_PER_MS, true).unwrap();
    let chain = rig.sim.explain_wait(late.task());
    assert!(
        chain.contains("start_this_handle on transaction tid 1 held by jbd2")
            && chain.contains("j_wait_updates on transaction tid 1 held by holder"),
        "{chain}"
    );
    rig.sim.run_until(10 * NS_PER_SEC, true).unwrap();
    assert_eq!(late.result().unwrap(), 80 * NS_PER_MS);
    assert_eq!(rig.journal.stats().handle_waits, 1);
}

#[test]
fn get_write_access_waits_for_an_asynchronous_write_of_the_buffer() {
    // QASIO D_meta: the flusher is writing buffer 7 home until 50 ms.
    let rig = default_rig();
    rig.buffers
        .async_write(&rig.sim.handle(), 7, 50 * NS_PER_MS);
    let (s, j) = (rig.sim.handle(), rig.journal.clone());
    let app = rig.sim.spawn("app", async move {
        s.sleep(10 * NS_PER_MS).await;
        let mut handle = j.start(&s, 1).await;
        let before = s.blocked_times(s.current_task().unwrap());
        j.get_write_access(&s, &handle, 7).await;
        j.dirty_metadata(&mut handle, 7);
        j.stop(&s, handle).await;
        s.blocked_times(s.current_task().unwrap())
            .since(&before)
            .get(WaitReason::BufferLock)
    });
    rig.sim.run_until(10 * NS_PER_SEC, true).unwrap();
    assert_eq!(app.result().unwrap(), 40 * NS_PER_MS);
}

#[test]
fn a_buffer_being_committed_is_frozen_before_its_log_write_and_waited_for_during_it() {
    // Transaction 1 journals buffer 5 and commits at 1 ms; its log writes are on the device
    // from then. A writer wanting buffer 5 during the log write waits (BJ_Shadow); the buffer
    // then belongs to transaction 2 and is not marked dirty by commit 1.
    let rig = default_rig();
    let (s, j) = (rig.sim.handle(), rig.journal.clone());
    rig.sim.spawn("first", async move {
        let mut handle = j.start(&s, 1).await;
        j.get_write_access(&s, &handle, 5).await;
        j.dirty_metadata(&mut handle, 5);
        let tid = handle.tid;
        j.stop(&s, handle).await;
        s.sleep(NS_PER_MS).await;
        j.log_start_commit(&s, tid);
    });
    let (s, j) = (rig.sim.handle(), rig.journal.clone());
    let second = rig.sim.spawn("second", async move {
        s.sleep(NS_PER_MS + NS_PER_MS / 2).await;
        let mut handle = j.start(&s, 1).await;
        let start = s.now();
        j.get_write_access(&s, &handle, 5).await;
        let waited = s.now() - start;
        j.dirty_metadata(&mut handle, 5);
        let tid = handle.tid;
        j.stop(&s, handle).await;
        (tid, waited)
    });
    rig.sim.run_until(10 * NS_PER_SEC, false).unwrap();
    let (tid, waited) = second.result().unwrap();
    assert_eq!(tid, 2);
    assert!(waited > 0, "waited for the shadow write");
    assert_eq!(rig.journal.stats().shadow_waits, 1);
    assert_eq!(
        rig.journal.commit_sequence(),
        2,
        "the timer committed tid 2"
    );
    // Buffer 5 was dirtied for writeback only after commit 2 (commit 1's copy was superseded).
    let dirtied = rig.buffers.dirtied.borrow();
    assert_eq!(dirtied.len(), 1, "{dirtied:?}");
}

#[test]
fn fsync_waits_through_the_commit_callback() {
    // QASIO I_jcommit: the callback (ext4's discards) takes 200 ms; the waiter of the tid wakes
    // only after it.
    let rig = default_rig();
    rig.journal.set_commit_callback(Box::new(|sim: &Sim, _tid| {
        let sim = sim.clone();
        Box::pin(async move {
            sim.sleep_for(200 * NS_PER_MS, WaitReason::Discard, Blocker::None)
                .await;
        })
    }));
    let (s, j) = (rig.sim.handle(), rig.journal.clone());
    let app = rig.sim.spawn("app", async move {
        let mut handle = j.start(&s, 1).await;
        j.get_write_access(&s, &handle, 9).await;
        j.dirty_metadata(&mut handle, 9);
        let tid = handle.tid;
        j.stop(&s, handle).await;
        let start = s.now();
        j.complete_transaction(&s, tid).await;
        s.now() - start
    });
    rig.sim.run_until(10 * NS_PER_SEC, true).unwrap();
    assert!(app.result().unwrap() >= 200 * NS_PER_MS);
    let jbd2 = rig.journal.thread().unwrap();
    assert_eq!(
        rig.sim.blocked_times(jbd2).get(WaitReason::Discard),
        200 * NS_PER_MS
    );
    // The phase account: the callback's 200 ms are in its phase, and the phases add up to the
    // commit's duration.
    let phases = rig.journal.stats().phase_ns;
    assert_eq!(phases.callback, 200 * NS_PER_MS, "{phases:?}");
    let record = rig.journal.commit_records().pop().unwrap();
    let sum = phases.updates
        + phases.data_submit
        + phases.log_submit
        + phases.data_wait
        + phases.log_wait
        + phases.callback;
    assert_eq!(sum, record.finished_ns - record.started_ns, "{phases:?}");
}

#[test]
fn the_timer_commits_a_transaction_at_the_commit_interval() {
    let rig = default_rig();
    let (s, j) = (rig.sim.handle(), rig.journal.clone());
    rig.sim.spawn("app", async move {
        s.sleep(NS_PER_SEC).await;
        let mut handle = j.start(&s, 1).await;
        j.get_write_access(&s, &handle, 3).await;
        j.dirty_metadata(&mut handle, 3);
        j.stop(&s, handle).await;
    });
    rig.sim.run_until(5_999 * NS_PER_MS, false).unwrap();
    assert_eq!(rig.journal.commit_sequence(), 0);
    rig.sim.run_until(6_100 * NS_PER_MS, false).unwrap();
    assert_eq!(rig.journal.commit_sequence(), 1);
    let record = rig.journal.commit_records().pop().unwrap();
    assert_eq!(record.started_ns, 6 * NS_PER_SEC, "1 s + commit=5 s");
    assert!(!record.requested);
}

#[test]
fn a_full_log_makes_the_starting_task_checkpoint() {
    // A 1,024-block log (256 buffers per transaction) and buffers never written home by
    // writeback: after a few full transactions, a new handle must checkpoint (write the oldest
    // transaction's buffers home) before it may start.
    let config = JournalConfig {
        blocks: MIN_JOURNAL_BLOCKS,
        ..JournalConfig::default()
    };
    let rig = rig(config);
    let (s, j) = (rig.sim.handle(), rig.journal.clone());
    let app = rig.sim.spawn("app", async move {
        let mut block = 10_000u64;
        for _ in 0..12 {
            let mut handle = j.start(&s, 200).await;
            for _ in 0..200 {
                j.get_write_access(&s, &handle, block).await;
                j.dirty_metadata(&mut handle, block);
                block += 1;
            }
            let tid = handle.tid;
            j.stop(&s, handle).await;
            j.complete_transaction(&s, tid).await;
        }
    });
    rig.sim.run_until(100 * NS_PER_SEC, true).unwrap();
    assert!(app.result().is_some());
    let stats = rig.journal.stats();
    assert!(stats.checkpoints > 0, "{stats:?}");
    assert!(stats.checkpoint_writes >= 200, "{stats:?}");
    assert!(stats.tail_updates > 0);
    assert_eq!(stats.commits, 12);
    assert!(!rig.buffers.homes_written.borrow().is_empty());
    assert!(rig.journal.free_blocks() < MIN_JOURNAL_BLOCKS);
    let blocked = rig.sim.blocked_times(app.task());
    assert!(blocked.get(WaitReason::BlockIo) > 0);
}

#[test]
fn an_oversized_transaction_commits_before_another_handle_joins() {
    // max 256 buffers per transaction: a handle asking for 200 credits while 100 are
    // outstanding must wait for a new transaction.
    let config = JournalConfig {
        blocks: MIN_JOURNAL_BLOCKS,
        ..JournalConfig::default()
    };
    let rig = rig(config);
    let (s, j) = (rig.sim.handle(), rig.journal.clone());
    let first = rig.sim.spawn("first", async move {
        let handle = j.start(&s, 100).await;
        let tid = handle.tid;
        s.sleep(10 * NS_PER_MS).await;
        j.stop(&s, handle).await;
        tid
    });
    let (s, j) = (rig.sim.handle(), rig.journal.clone());
    let second = rig.sim.spawn("second", async move {
        s.sleep(NS_PER_MS).await;
        let handle = j.start(&s, 200).await;
        let tid = handle.tid;
        j.stop(&s, handle).await;
        (tid, s.now())
    });
    rig.sim.run_until(10 * NS_PER_SEC, true).unwrap();
    let (tid, at) = second.result().unwrap();
    assert_eq!(tid, first.result().unwrap() + 1);
    assert!(
        at >= 10 * NS_PER_MS,
        "it waited for the first handle's stop"
    );
}

// The run-time invariant checks (check.rs), each broken on purpose.

#[test]
#[should_panic(
    expected = "commit of transaction 2 starts before transaction 1 submitted its commit block"
)]
fn check_b_a_second_commit_may_not_start_before_the_first_submitted_its_commit_block() {
    // A second commit thread (kjournald2 is one thread in jbd2) starts committing transaction 2
    // while the commit of 1 still waits for its ordered data (3 ms), before its commit block.
    let rig = default_rig();
    let (s, j) = (rig.sim.handle(), rig.journal.clone());
    rig.sim.spawn("app", async move {
        let mut handle = j.start(&s, 2).await;
        j.get_write_access(&s, &handle, 100).await;
        j.dirty_metadata(&mut handle, 100);
        j.file_inode(&handle, 12);
        let first = handle.tid;
        j.stop(&s, handle).await;
        j.log_start_commit(&s, first);
        s.sleep(NS_PER_MS).await;
        let mut handle = j.start(&s, 2).await;
        assert_eq!(
            handle.tid,
            first + 1,
            "the commit of 1 switched transactions"
        );
        j.get_write_access(&s, &handle, 200).await;
        j.dirty_metadata(&mut handle, 200);
        j.stop(&s, handle).await;
        j.commit_transaction(&s).await;
    });
    rig.sim.run_until(10 * NS_PER_SEC, true).unwrap();
}

#[test]
fn check_b_commit_blocks_complete_in_increasing_tid_order() {
    // Driving the checker's commit-order state machine wrongly: transaction 2's commit block
    // completes, then 1's.
    let rig = default_rig();
    rig.journal.set_panic_on_violation(false);
    let (s, j) = (rig.sim.handle(), rig.journal.clone());
    rig.sim.spawn("driver", async move {
        j.check_commit_block_done(&s, 2);
        assert!(j.violation().is_none());
        j.check_commit_block_done(&s, 1);
    });
    let end = rig.sim.run_until(NS_PER_SEC, true).unwrap();
    assert_eq!(
        end,
        crate::sim::RunEnd::Stopped,
        "a violation stops the run"
    );
    let message = rig.journal.violation().expect("a violation");
    assert!(
        message.contains("commit block of transaction 1 completed after that of 2"),
        "{message}"
    );
    assert!(message.contains("task driver"), "{message}");
}

#[test]
fn check_e_t_updates_may_reach_zero_only_by_handle_stops() {
    // A holder keeps its handle for 100 ms; at 10 ms someone asks for the commit and t_updates
    // is forced to zero without a stop (a lost update): the commit must not go on.
    let rig = default_rig();
    rig.journal.set_panic_on_violation(false);
    let (s, j) = (rig.sim.handle(), rig.journal.clone());
    rig.sim.spawn("holder", async move {
        let handle = j.start(&s, 2).await;
        s.sleep_for(100 * NS_PER_MS, WaitReason::PageWriteback, Blocker::None)
            .await;
        j.stop(&s, handle).await;
    });
    let (s, j) = (rig.sim.handle(), rig.journal.clone());
    rig.sim.spawn("breaker", async move {
        s.sleep(10 * NS_PER_MS).await;
        let tid = j.running_tid().unwrap();
        j.log_start_commit(&s, tid);
        s.sleep(NS_PER_MS).await;
        j.state.borrow_mut().running.as_mut().unwrap().updates = 0;
        j.wait_updates.wake_all(&s);
    });
    let end = rig.sim.run_until(10 * NS_PER_SEC, true).unwrap();
    assert_eq!(end, crate::sim::RunEnd::Stopped);
    let message = rig.journal.violation().expect("a violation");
    assert!(
        message.contains(
            "t_updates of transaction 1 is zero with 1 handle(s) not stopped, held by holder"
        ),
        "{message}"
    );
}

#[test]
fn check_e_a_task_that_ends_holding_a_handle_is_reported_at_the_end_of_the_run() {
    let rig = default_rig();
    rig.journal.set_panic_on_violation(false);
    let (s, j) = (rig.sim.handle(), rig.journal.clone());
    rig.sim.spawn("leaker", async move {
        // Returns without jbd2_journal_stop (the handle is dropped unstopped).
        let _leaked = j.start(&s, 2).await;
    });
    let (s, j) = (rig.sim.handle(), rig.journal.clone());
    rig.sim.spawn("blocked", async move {
        // Holds its handle across the end of the run, blocked: not a violation.
        let handle = j.start(&s, 2).await;
        s.sleep(20 * NS_PER_SEC).await;
        j.stop(&s, handle).await;
    });
    rig.sim.run_until(NS_PER_SEC, false).unwrap();
    rig.journal.check_end_of_run(&rig.sim.handle());
    let message = rig.journal.violation().expect("a violation");
    assert!(
        message.contains("task leaker")
            && message.contains("finished holding a handle of transaction 1"),
        "{message}"
    );
    assert!(!message.contains("task blocked"), "{message}");
}

#[test]
fn start_now_joins_at_once_or_says_why_it_must_wait_and_changes_nothing() {
    // A holder keeps transaction 1 open for 100 ms; an fsync at 10 ms locks it for commit.
    let rig = default_rig();
    spawn_holder_and_fsync(&rig, true);
    let (s, j) = (rig.sim.handle(), rig.journal.clone());
    let late = rig.sim.spawn("late", async move {
        s.sleep(20 * NS_PER_MS).await;
        let before = j.stats();
        let blocked = j.start_now(&s, 2).map(|h| h.tid);
        assert_eq!(
            j.stats(),
            before,
            "a handle that cannot start changes nothing"
        );
        // The waiting path then waits for the commit's switch, as it would have.
        let handle = j.start(&s, 2).await;
        let (tid, at) = (handle.tid, s.now());
        assert!(j.stop_now(&s, handle).is_none(), "not a synchronous handle");
        (blocked, tid, at)
    });
    rig.sim.run_until(10 * NS_PER_SEC, true).unwrap();
    let (blocked, tid, at) = late.result().unwrap();
    assert!(
        matches!(blocked, Err(StartBlocked::Locked(1))),
        "{blocked:?}"
    );
    assert_eq!((tid, at), (2, 100 * NS_PER_MS));
    assert_eq!(rig.journal.stats().handle_waits, 1);
}

#[test]
fn get_write_access_now_takes_over_only_an_unlocked_buffer_its_transaction_holds() {
    let rig = default_rig();
    let (s, j, buffers) = (rig.sim.handle(), rig.journal.clone(), rig.buffers.clone());
    let app = rig.sim.spawn("app", async move {
        let mut handle = j.start(&s, 4).await;
        // Not journaled in this transaction yet: the waiting path's work.
        let first = j.get_write_access_now(&s, &handle, 7);
        j.get_write_access(&s, &handle, 7).await;
        j.dirty_metadata(&mut handle, 7);
        let joined = j.get_write_access_now(&s, &handle, 7);
        // Under a write home (its lock held): nothing may change, the caller must wait.
        buffers.async_write(&s, 7, 5 * NS_PER_MS);
        buffers.buffers.borrow_mut().get_mut(&7).unwrap().dirty = true;
        let locked = j.get_write_access_now(&s, &handle, 7);
        let still_dirty = buffers.get(7).dirty;
        s.sleep(10 * NS_PER_MS).await;
        let after = j.get_write_access_now(&s, &handle, 7);
        let cleaned = !buffers.get(7).dirty;
        j.stop(&s, handle).await;
        (first, joined, locked, still_dirty, after, cleaned)
    });
    rig.sim.run_until(10 * NS_PER_SEC, true).unwrap();
    assert_eq!(
        app.result().unwrap(),
        (false, true, false, true, true, true),
        "(not joined, joined, locked, untouched while locked, unlocked, taken over)"
    );
}

#[test]
fn holders_count_handles_per_task_as_a_map_would() {
    // The transaction's holders (a sorted vector) against a BTreeMap of task -> handles.
    let mut rng = crate::sim::rng::Rng::new(17);
    let mut holders = Holders::default();
    let mut reference: std::collections::BTreeMap<crate::sim::TaskId, u32> = Default::default();
    for _ in 0..20_000 {
        let task = crate::sim::TaskId(rng.below(6) as u32);
        if rng.below(2) == 0 {
            holders.add(task);
            *reference.entry(task).or_insert(0) += 1;
        } else {
            let held = reference.get(&task).copied().unwrap_or(0);
            assert_eq!(holders.remove_one(task), held > 0);
            match held {
                0 => {}
                1 => {
                    reference.remove(&task);
                }
                _ => *reference.get_mut(&task).unwrap() -= 1,
            }
        }
        assert_eq!(holders.first(), reference.keys().next().copied());
    }
}

/// Three tasks write "pages" in a loop: each page's handle is stopped and the next page's started
/// at the same instant, with time passing inside a page, the inode buffer taken every third
/// page, a synchronous page every fiftieth (each task's at another time, so that the others hold
/// handles in the transaction it locks) and commits by the timer in between. With `fused`
/// the pair goes through `stop_and_start_now` when it can (stop and start when it refuses).
/// Returns what the tasks and the journal saw, and how often the pair was fused and refused.
fn handle_chains(fused: bool, commit_interval: Nanos) -> (String, u64, u64) {
    let rig = rig(JournalConfig {
        commit_interval,
        ..JournalConfig::default()
    });
    let counts = std::rc::Rc::new(std::cell::Cell::new((0u64, 0u64)));
    let tasks: Vec<_> = (0..3u64)
        .map(|t| {
            let (s, j, counts) = (rig.sim.handle(), rig.journal.clone(), counts.clone());
            rig.sim.spawn(&format!("writer{t}"), async move {
                let mut seen = Vec::new();
                let mut handle = j.start(&s, 2).await;
                for page in 0..200u64 {
                    if page % 3 == t {
                        j.get_write_access(&s, &handle, 100 + t).await;
                        j.dirty_metadata(&mut handle, 100 + t);
                    }
                    // Out of phase with each other and with the commit timer.
                    s.sleep(700_000 + t * 410_000).await;
                    handle.sync = page % 50 == 49 - 7 * t;
                    seen.push((page, handle.tid, handle.credits, s.now()));
                    handle = match fused {
                        true => match j.stop_and_start_now(&s, handle, 2) {
                            Ok(next) => {
                                counts.set((counts.get().0 + 1, counts.get().1));
                                next
                            }
                            Err(handle) => {
                                counts.set((counts.get().0, counts.get().1 + 1));
                                j.stop(&s, handle).await;
                                j.start(&s, 2).await
                            }
                        },
                        false => {
                            j.stop(&s, handle).await;
                            j.start(&s, 2).await
                        }
                    };
                }
                j.stop(&s, handle).await;
                let me = s.current_task().unwrap();
                (seen, s.blocked_times(me))
            })
        })
        .collect();
    rig.sim.run_until(10 * NS_PER_SEC, true).unwrap();
    let results: Vec<_> = tasks.iter().map(|t| t.result().unwrap()).collect();
    let seen = format!(
        "{results:?} {:?} {:?} {}",
        rig.journal.stats(),
        rig.journal.commit_records(),
        rig.sim.now()
    );
    let (fused_pairs, refused) = counts.get();
    (seen, fused_pairs, refused)
}

#[test]
fn a_stop_and_start_at_once_is_a_stop_then_a_start() {
    // Commits by the synchronous handles only (the others' handles then meet a locked
    // transaction before it expires), and with an interval shorter than a commit (three 1 ms
    // requests: transactions expire while the journal thread still commits the one before).
    for commit_interval in [NS_PER_SEC, 1_500_000] {
        let (fused, fused_pairs, refused) = handle_chains(true, commit_interval);
        let (unfused, _, _) = handle_chains(false, commit_interval);
        assert_eq!(fused, unfused, "commit interval {commit_interval}");
        // Both ways were taken: pairs fused, and pairs refused (synchronous handles,
        // transactions past their commit time or locked by the commit).
        assert!(
            fused_pairs > 100 && refused > 4,
            "{fused_pairs} fused, {refused} refused"
        );
    }
}
