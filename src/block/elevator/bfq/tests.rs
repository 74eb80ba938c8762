//! BFQ's mechanisms, each pinned by a test that fails without it. The tests drive the elevator
//! directly over a device that serves one request at a time, FIFO, while holding up to
//! `depth` (a queueing flash device seen from the host).

use super::*;
use crate::block::request::test_support::request;
use crate::block::request::{IoPrio, IoPrioClass};
use crate::dev::IoOp;
use crate::units::{NS_PER_MS, NS_PER_US};
use std::collections::VecDeque;

/// What a test's processes do when one of their requests completes: new requests, each at a
/// time.
type React<'a> = dyn FnMut(&Request, Nanos) -> Vec<(Nanos, Request)> + 'a;

struct Sim {
    bfq: Bfq,
    now: Nanos,
    depth: usize,
    /// Service time of a request: fixed part plus per sector.
    base_ns: Nanos,
    per_sector_ns: Nanos,
    in_device: VecDeque<Request>,
    head_done: Nanos,
    submissions: BTreeMap<(Nanos, u64), Request>,
    seq: u64,
    /// (completion time, request) of everything completed.
    completed: Vec<(Nanos, Request)>,
}

impl Sim {
    fn new(base_ns: Nanos, per_sector_ns: Nanos) -> Sim {
        let traits = QueueTraits {
            nonrot: true,
            queue_depth: 32,
        };
        Sim {
            bfq: Bfq::new(traits, Hz(1000), BfqTunables::defaults(Hz(1000))),
            now: 0,
            depth: 32,
            base_ns,
            per_sector_ns,
            in_device: VecDeque::new(),
            head_done: 0,
            submissions: BTreeMap::new(),
            seq: 0,
            completed: Vec::new(),
        }
    }

    /// A simulation whose BFQ is that of Linux `kernel`.
    fn for_kernel(
        base_ns: Nanos,
        per_sector_ns: Nanos,
        kernel: crate::kernel::KernelVersion,
    ) -> Sim {
        let mut sim = Sim::new(base_ns, per_sector_ns);
        let mut tunables = BfqTunables::defaults(Hz(1000));
        tunables.kernel = kernel;
        sim.bfq = Bfq::new(
            QueueTraits {
                nonrot: true,
                queue_depth: 32,
            },
            Hz(1000),
            tunables,
        );
        sim
    }

    fn submit(&mut self, at: Nanos, rq: Request) {
        self.seq += 1;
        self.submissions.insert((at, self.seq), rq);
    }

    fn service(&self, rq: &Request) -> Nanos {
        self.base_ns + u64::from(rq.nr_sectors) * self.per_sector_ns
    }

    fn dispatch(&mut self) {
        while self.in_device.len() < self.depth {
            let Some(mut rq) = self.bfq.dispatch_request(self.now) else {
                break;
            };
            rq.issued_ns = Some(self.now);
            if self.in_device.is_empty() {
                self.head_done = self.now + self.service(&rq);
            }
            self.in_device.push_back(rq);
        }
    }

    /// Runs events until `until`.
    fn run(&mut self, until: Nanos, react: &mut React) {
        loop {
            let done = (!self.in_device.is_empty()).then_some(self.head_done);
            let timer = self.bfq.next_timer();
            let submission = self.submissions.keys().next().map(|&(at, _)| at);
            let Some(next) = [done, timer, submission].into_iter().flatten().min() else {
                break;
            };
            if next > until {
                break;
            }
            self.now = next;
            if done == Some(next) {
                let rq = self.in_device.pop_front().expect("head");
                if let Some(head) = self.in_device.front() {
                    self.head_done = next + self.service(head);
                }
                self.bfq.completed_request(next, &rq);
                for (at, follow) in react(&rq, next) {
                    self.submit(at, follow);
                }
                self.completed.push((next, rq));
            } else if timer == Some(next) {
                self.bfq.timer_fired(next);
            } else {
                let key = *self.submissions.keys().next().expect("submission");
                let rq = self.submissions.remove(&key).expect("submission");
                Elevator::add_request(&mut self.bfq, next, rq);
            }
            self.dispatch();
        }
        self.now = until;
    }

    /// Sectors completed for `pid` in `[from, to)`.
    fn sectors(&self, pid: u32, from: Nanos, to: Nanos) -> u64 {
        self.completed
            .iter()
            .filter(|(at, rq)| rq.task.pid == pid && (from..to).contains(at))
            .map(|(_, rq)| u64::from(rq.nr_sectors))
            .sum()
    }
}

/// A request with its own id.
fn rq(id: u64, op: IoOp, sector: u64, nr_sectors: u32, pid: u32) -> Request {
    request(id, op, sector, nr_sectors, pid)
}

#[test]
fn weights_follow_the_ioprio_level_and_only_default_weight_queues_may_be_raised() {
    assert_eq!(queue::ioprio_to_weight(0), 80);
    assert_eq!(queue::ioprio_to_weight(4), queue::BFQ_DEFAULT_WEIGHT);
    assert_eq!(queue::ioprio_to_weight(7), 10);
    // A background app at nice 10 (BE6, weight 20) is never deemed interactive.
    let mut sim = Sim::new(100 * NS_PER_US, 0);
    let mut background = rq(1, IoOp::Read, 1000, 8, 7);
    background.nice = 10;
    sim.submit(0, background);
    sim.submit(0, rq(2, IoOp::Read, 900_000, 8, 8));
    sim.run(NS_PER_MS, &mut |_, _| Vec::new());
    let (q7, q8) = (
        sim.bfq.sync_queue_of(7).unwrap(),
        sim.bfq.sync_queue_of(8).unwrap(),
    );
    assert_eq!(sim.bfq.queue(q7).wr_coeff, 1);
    assert_eq!(
        sim.bfq.queue(q8).wr_coeff,
        30,
        "a new default-weight queue is interactive"
    );
}

#[test]
fn bfq_weight_raises_a_new_interactive_reader_and_stops_after_the_raising_period() {
    // A greedy sequential reader (pid 1) keeps four 128 KiB reads outstanding. At 4 s a
    // random reader (pid 2) starts: one 4 KiB read, 5 ms of think time, the next. It is a new
    // sync queue with the default weight: interactive, raised x30 for bfq_wr_duration (3 s on
    // flash at the reference rates), during which BFQ plugs dispatch for it and the greedy
    // reader gets only injected requests. Then the raising ends and the two share the device.
    let mut sim = Sim::new(20 * NS_PER_US, NS_PER_US);
    let mut next_id = 100;
    let mut next_random = 77u64;
    for i in 0..4 {
        sim.submit(0, rq(i + 1, IoOp::Read, 256 * i, 256, 1));
    }
    let reader_start = 4 * NS_PER_SEC;
    let mut sequential_pos = 1024;
    let mut react = |done: &Request, now: Nanos| {
        next_id += 1;
        match done.task.pid {
            1 => {
                sequential_pos += 256;
                vec![(now, rq(next_id, IoOp::Read, sequential_pos, 256, 1))]
            }
            _ => {
                next_random = next_random.wrapping_mul(6364136223846793005) % (1 << 40);
                let sector = 10_000_000 + (next_random % 1_000_000) * 64;
                vec![(now + 5 * NS_PER_MS, rq(next_id, IoOp::Read, sector, 8, 2))]
            }
        }
    };
    sim.run(reader_start, &mut react);
    let greedy = sim.bfq.sync_queue_of(1).unwrap();
    assert_eq!(
        sim.bfq.queue(greedy).wr_coeff,
        1,
        "its own raising ended long ago"
    );
    sim.submit(reader_start, rq(99, IoOp::Read, 50_000_000, 8, 2));
    sim.run(reader_start + NS_PER_MS, &mut react);
    let reader = sim.bfq.sync_queue_of(2).unwrap();
    assert_eq!(sim.bfq.queue(reader).wr_coeff, 30);
    assert_eq!(sim.bfq.weight_of(reader), 40 * 30);
    let duration = sim.bfq.wr_duration_ns();
    assert_eq!(duration, 3 * NS_PER_SEC, "clamped to 3 s on a fast device");
    sim.run(reader_start + duration - 100 * NS_PER_MS, &mut react);
    assert_eq!(
        sim.bfq.queue(reader).wr_coeff,
        30,
        "still raised near the end"
    );
    sim.run(reader_start + duration + 100 * NS_PER_MS, &mut react);
    assert_eq!(
        sim.bfq.queue(reader).wr_coeff,
        1,
        "raising ended after its period"
    );
    assert_eq!(sim.bfq.weight_of(reader), 40);
    sim.run(reader_start + 2 * duration, &mut react);
    // While raised the reader owned the device; afterwards the greedy reader gets it back.
    let raised = sim.sectors(1, reader_start + NS_PER_SEC, reader_start + 2 * NS_PER_SEC);
    let after = sim.sectors(
        1,
        reader_start + duration + NS_PER_SEC,
        reader_start + duration + 2 * NS_PER_SEC,
    );
    assert!(
        2 * raised < after,
        "greedy reader: {raised} sectors/s while the other was raised, {after} after"
    );
}

#[test]
fn bfq_splits_bandwidth_two_to_one_between_groups_of_weight_200_and_100() {
    // Two greedy sequential readers with eight 128 KiB reads outstanding each, in cgroups with
    // io.bfq.weight 200 and 100: B-WF2Q+ serves the two group entities in proportion to their
    // weights, in sectors.
    let mut sim = Sim::new(20 * NS_PER_US, NS_PER_US);
    let group = |id, weight| crate::task::Blkcg {
        id,
        bfq_weight: weight,
    };
    let mut next_id = 0;
    let mut make = move |pid: u32, sector: u64| {
        next_id += 1;
        let mut r = rq(next_id, IoOp::Read, sector, 256, pid);
        r.blkcg = if pid == 1 {
            group(1, 200)
        } else {
            group(2, 100)
        };
        r
    };
    let mut position = [0u64, 0, 1 << 30];
    for pid in [1u32, 2] {
        for _ in 0..8 {
            position[pid as usize] += 256;
            let r = make(pid, position[pid as usize]);
            sim.submit(0, r);
        }
    }
    sim.run(6 * NS_PER_SEC, &mut |done, now| {
        let pid = done.task.pid;
        position[pid as usize] += 256;
        vec![(now, make(pid, position[pid as usize]))]
    });
    let heavy = sim.sectors(1, 2 * NS_PER_SEC, 6 * NS_PER_SEC) as f64;
    let light = sim.sectors(2, 2 * NS_PER_SEC, 6 * NS_PER_SEC) as f64;
    let ratio = heavy / light;
    assert!(
        (1.8..=2.2).contains(&ratio),
        "{heavy} vs {light}: ratio {ratio}"
    );
}

#[test]
fn bfq_injects_the_wakers_io_while_the_woken_queue_idles() {
    // The jbd2 pattern: an app (pid 10) writes with fsync; each write is followed by a journal
    // commit write from jbd2 (pid 20, ioprio BE3, not raised), and the app writes again only
    // after the commit completes. The app's queue is new, hence raised, so BFQ plugs dispatch
    // for it (20 ms) each time it empties, and jbd2's commit would wait for the idle timer.
    // BFQ detects that jbd2 wakes the app (three times within 4 ms of its completion, with a
    // long think time) and injects jbd2's I/O while the app's queue idles.
    let mut sim = Sim::new(NS_PER_MS, 0);
    let mut next_id = 1;
    let write = |id, sector, pid| {
        let mut r = rq(id, IoOp::Write, sector, 8, pid);
        r.flags.sync = true;
        if pid == 20 {
            r.ioc_ioprio = IoPrio::new(IoPrioClass::Be, 3);
        }
        r
    };
    sim.submit(0, write(next_id, 1000, 10));
    let mut commit_latencies = Vec::new();
    sim.run(2 * NS_PER_SEC, &mut |done, now| {
        next_id += 1;
        if done.task.pid == 10 {
            vec![(now, write(next_id, 5_000_000 + 8 * next_id, 20))]
        } else {
            commit_latencies.push((now, now - done.start_ns.max(done.inserted_ns)));
            vec![(now + NS_PER_MS / 2, write(next_id, 1000 + 8 * next_id, 10))]
        }
    });
    let app = sim.bfq.sync_queue_of(10).unwrap();
    let jbd2 = sim.bfq.sync_queue_of(20).unwrap();
    assert_eq!(
        sim.bfq.queue(app).waker,
        Some(jbd2),
        "jbd2 detected as the waker"
    );
    assert!(sim.bfq.queue(app).wr_coeff > 1, "the app is still raised");
    assert!(sim.bfq.stats.injected_waker > 0, "{:?}", sim.bfq.stats);
    let late: Vec<Nanos> = commit_latencies
        .iter()
        .filter(|(at, _)| *at > NS_PER_SEC)
        .map(|&(_, latency)| latency)
        .collect();
    assert!(
        late.len() > 100,
        "{} commits in the last second",
        late.len()
    );
    assert!(
        late.iter().all(|&latency| latency <= 2 * NS_PER_MS),
        "commits wait for the idle slice: {late:?}"
    );
}

#[test]
fn async_and_sync_writes_get_a_limited_share_of_the_tags() {
    let sim = Sim::new(NS_PER_MS, 0);
    assert_eq!(sim.bfq.depth_limit(64, true, false), None);
    assert_eq!(sim.bfq.depth_limit(64, false, true), Some(32));
    assert_eq!(sim.bfq.depth_limit(64, true, true), Some(48));
}

#[test]
fn a_burst_of_new_queues_is_denied_weight_raising() {
    // Ten processes start reading within a few ms of each other (a service spawning workers).
    // The first seven are raised as new queues; the eighth makes the burst large: it and the
    // later ones are not raised, and the first seven lose their raising at their next request.
    let mut sim = Sim::new(100 * NS_PER_US, 0);
    for pid in 1..=10u64 {
        sim.submit(
            pid * NS_PER_MS,
            rq(pid, IoOp::Read, 100_000 * pid, 8, pid as u32),
        );
        sim.submit(
            40 * NS_PER_MS + pid * NS_PER_MS,
            rq(100 + pid, IoOp::Read, 100_000 * pid + 8, 8, pid as u32),
        );
    }
    sim.run(20 * NS_PER_MS, &mut |_, _| Vec::new());
    let raised = |sim: &Sim, pid| sim.bfq.queue(sim.bfq.sync_queue_of(pid).unwrap()).wr_coeff > 1;
    assert!((1..=7).all(|pid| raised(&sim, pid)));
    assert!((8..=10).all(|pid| !raised(&sim, pid)));
    sim.run(100 * NS_PER_MS, &mut |_, _| Vec::new());
    for pid in 1..=10 {
        let q = sim.bfq.sync_queue_of(pid).unwrap();
        assert!(sim.bfq.queue(q).in_large_burst, "pid {pid}");
        assert_eq!(sim.bfq.queue(q).wr_coeff, 1, "pid {pid}");
    }
    assert_eq!(sim.bfq.stats.large_bursts, 1);
}

fn async_write(id: u64, sector: u64, pid: u32, level: u8) -> Request {
    let mut rq = request(id, IoOp::Write, sector, 8, pid);
    rq.flags.sync = false;
    rq.ioc_ioprio = IoPrio::new(IoPrioClass::Be, level);
    rq.ioprio = rq.ioc_ioprio;
    rq
}

#[test]
fn a_boosted_request_leaves_its_queue_before_the_others() {
    // QASIO §5.3: a task blocks on the last of the flusher's 50 writes.
    let mut bfq = Sim::new(100 * NS_PER_US, 0).bfq;
    for i in 1..=50u64 {
        Elevator::add_request(&mut bfq, 0, async_write(i, 64 * i, 10, 4));
    }
    assert_eq!(
        Elevator::dispatch_request(&mut bfq, 0).unwrap().id,
        1,
        "sector order"
    );
    assert!(Elevator::boost(&mut bfq, 0, 50));
    assert!(
        !Elevator::boost(&mut bfq, 0, 50),
        "already on the QASIO list"
    );
    assert!(!Elevator::boost(&mut bfq, 0, 999), "not queued");
    assert_eq!(Elevator::dispatch_request(&mut bfq, 0).unwrap().id, 50);
    let mut sync = request(200, IoOp::Read, 1 << 30, 8, 30);
    sync.flags.sync = true;
    Elevator::add_request(&mut bfq, 0, sync);
    assert!(
        !Elevator::boost(&mut bfq, 0, 200),
        "a sync queue's request needs no boost"
    );
}

#[test]
fn an_async_queue_in_service_yields_to_a_qasio_of_another_queue() {
    // The flusher's writes (BE4) and the journal thread's discards (BE3) are two async
    // queues; a task waits on a request of the one not in service: it is served next.
    let mut bfq = Sim::new(100 * NS_PER_US, 0).bfq;
    for i in 1..=50u64 {
        Elevator::add_request(&mut bfq, 0, async_write(i, 64 * i, 10, 4));
    }
    for i in 0..2u64 {
        Elevator::add_request(&mut bfq, 0, async_write(101 + i, (1 << 20) + 64 * i, 20, 3));
    }
    let first = Elevator::dispatch_request(&mut bfq, 0).unwrap().id;
    let other = if first <= 50 { 102 } else { 50 };
    let in_service = bfq.in_service().expect("a queue in service");
    assert_ne!(Some(&in_service), bfq.rq_queue.get(&other));
    assert!(Elevator::boost(&mut bfq, 0, other));
    assert_eq!(Elevator::dispatch_request(&mut bfq, 0).unwrap().id, other);
    assert_eq!(bfq.in_service(), Some(in_service), "served out of turn");
    assert_eq!(bfq.stats.qasio_served_out_of_turn, 1);
}

use crate::kernel::KernelVersion;

/// Two threads of one app read one file region in interleaved 128 KiB chunks (pid 1 the even
/// chunks, pid 2 the odd ones), each keeping two reads outstanding (a readahead window) and
/// issuing the next at each completion: the classic cooperating readers. The device serves one
/// command at a time (an eMMC without command queueing, as the 3.10 phones had). `class2` is
/// the second thread's I/O class. Returns the simulation after `duration`.
fn interleaved_readers(kernel: KernelVersion, class2: IoPrioClass, duration: Nanos) -> Sim {
    let mut sim = Sim::for_kernel(50 * NS_PER_US, NS_PER_US, kernel);
    sim.depth = 1;
    let chunk = 256u64;
    let base = 1_000_000u64;
    let read = move |id: u64, k: u64, pid: u32| {
        let mut r = rq(id, IoOp::Read, base + k * chunk, chunk as u32, pid);
        if pid == 2 {
            r.ioc_ioprio = IoPrio::new(class2, 4);
            r.ioprio = r.ioc_ioprio;
        }
        r
    };
    sim.submit(0, read(1, 0, 1));
    sim.submit(0, read(2, 2, 1));
    sim.submit(10 * NS_PER_US, read(3, 1, 2));
    sim.submit(10 * NS_PER_US, read(4, 3, 2));
    let mut next_chunk = [0u64, 4, 5];
    let mut next_id = 10;
    sim.run(duration, &mut |done, now| {
        let pid = done.task.pid;
        let k = next_chunk[pid as usize];
        next_chunk[pid as usize] += 2;
        next_id += 1;
        vec![(now, read(next_id, k, pid))]
    });
    sim
}

/// Dispatches (in completion order: the device is FIFO) that do not start where the previous
/// one ended.
fn seeks(sim: &Sim) -> usize {
    sim.completed
        .windows(2)
        .filter(|pair| pair[1].1.sector != pair[0].1.end_sector())
        .count()
}

#[test]
fn bfq_setup_cooperator_merges_interleaved_readers_into_one_sequential_stream_on_4_19() {
    // Linux 4.19: the second reader's second request lies within BFQQ_CLOSE_THR of the end of
    // the in-service queue's last dispatch (in_serv_last_pos); both queues are new (not
    // bfq_too_late_for_merging), sync, same class, not seeky: bfq_setup_cooperator schedules
    // the merge and bfq_merge_bfqqs redirects the process. The shared queue holds both
    // threads' chunks and serves them in sector order: one sequential stream.
    let sim = interleaved_readers(KernelVersion::V4_19, IoPrioClass::Be, 200 * NS_PER_MS);
    let (q1, q2) = (
        sim.bfq.sync_queue_of(1).unwrap(),
        sim.bfq.sync_queue_of(2).unwrap(),
    );
    assert_eq!(q1, q2, "one shared queue: {:?}", sim.bfq.stats);
    assert!(sim.bfq.queue(q1).coop);
    assert_eq!(
        (sim.bfq.stats.queue_merges, sim.bfq.stats.stable_merges),
        (1, 0),
        "4.19 has no stable merge"
    );
    assert!(sim.completed.len() > 500, "{}", sim.completed.len());
    assert_eq!(seeks(&sim), 0, "one sequential stream");
    // The same readers when the queues may not be merged (the second thread in the RT class:
    // bfq_may_be_close_cooperator): two queues served in turn, the stream seeks.
    let apart = interleaved_readers(KernelVersion::V4_19, IoPrioClass::Rt, 200 * NS_PER_MS);
    assert_eq!(apart.bfq.stats.queue_merges, 0);
    assert!(seeks(&apart) > 300, "{} seeks", seeks(&apart));
}

#[test]
fn bfq_setup_cooperator_leaves_cooperators_alone_on_flash_with_queueing_from_5_2() {
    // 5.10: "block, bfq: do not merge queues on flash storage with queueing" (5.2).
    // nonrot_with_queueing starts true on a non-rotational device and bfq_update_hw_tag never
    // disproves it here (the in-service queue has fewer than BFQ_HW_QUEUE_THRESHOLD requests
    // queued and dispatched), so bfq_setup_cooperator returns at once; 5.10 has no stable
    // merge either.
    let sim = interleaved_readers(KernelVersion::V5_10, IoPrioClass::Be, 200 * NS_PER_MS);
    assert_eq!(sim.bfq.stats.queue_merges, 0, "{:?}", sim.bfq.stats);
    assert_ne!(sim.bfq.sync_queue_of(1), sim.bfq.sync_queue_of(2));
    assert!(seeks(&sim) > 300, "{} seeks", seeks(&sim));
}

#[test]
fn bfq_split_bfqq_splits_a_shared_queue_that_turns_seeky() {
    // 4.19: the cooperating readers of the test above are merged; at 100 ms both switch to
    // random 4 KiB reads over 4 GiB. The shared queue becomes BFQQ_SEEKY, is marked
    // split_coop at its next expiration (__bfq_bfqq_expire), and the next request of each
    // process gives it a queue of its own again (bfq_get_bfqq_handle_split, bfq_split_bfqq;
    // the last process keeps the shared queue, no longer coop).
    let mut sim = Sim::for_kernel(50 * NS_PER_US, NS_PER_US, KernelVersion::V4_19);
    sim.depth = 1;
    let (chunk, base) = (256u64, 1_000_000u64);
    for (id, k, pid, at) in [(1, 0, 1, 0), (2, 2, 1, 0), (3, 1, 2, 10), (4, 3, 2, 10)] {
        sim.submit(
            at * NS_PER_US,
            rq(id, IoOp::Read, base + k * chunk, chunk as u32, pid),
        );
    }
    let mut next_chunk = [0u64, 4, 5];
    let mut next_id = 10u64;
    let mut random = 12345u64;
    let switch_at = 100 * NS_PER_MS;
    let mut react = |done: &Request, now: Nanos| {
        let pid = done.task.pid;
        next_id += 1;
        if now < switch_at {
            let k = next_chunk[pid as usize];
            next_chunk[pid as usize] += 2;
            return vec![(
                now,
                rq(next_id, IoOp::Read, base + k * chunk, chunk as u32, pid),
            )];
        }
        random = random
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let sector = (random >> 20) % (8 << 20) / 8 * 8;
        vec![(now, rq(next_id, IoOp::Read, sector, 8, pid))]
    };
    sim.run(switch_at, &mut react);
    let shared = sim.bfq.sync_queue_of(1).unwrap();
    assert_eq!(sim.bfq.sync_queue_of(2), Some(shared), "merged first");
    assert_eq!(sim.bfq.stats.queue_splits, 0);
    sim.run(switch_at + 200 * NS_PER_MS, &mut react);
    let (q1, q2) = (
        sim.bfq.sync_queue_of(1).unwrap(),
        sim.bfq.sync_queue_of(2).unwrap(),
    );
    assert_ne!(q1, q2, "split: {:?}", sim.bfq.stats);
    assert!(sim.bfq.stats.queue_splits >= 2, "{:?}", sim.bfq.stats);
    assert!(!sim.bfq.queue(q1).coop && !sim.bfq.queue(q2).coop);
    assert!(
        q1 == shared || q2 == shared,
        "the last process keeps the shared queue"
    );
}

/// Two processes of the same class and priority whose first sync reads arrive `gap` apart,
/// far from each other on the device (no cooperators), on a device with command queueing.
fn two_new_processes(kernel: KernelVersion, gap: Nanos) -> Sim {
    let mut sim = Sim::for_kernel(100 * NS_PER_US, 0, kernel);
    let mut next_id = 0;
    sim.submit(0, rq(1, IoOp::Read, 1_000_000, 8, 1));
    sim.submit(gap, rq(2, IoOp::Read, 900_000_000, 8, 2));
    let mut random = 99u64;
    sim.run(gap + 100 * NS_PER_MS, &mut |done, now| {
        next_id += 1;
        random = random.wrapping_mul(6364136223846793005).wrapping_add(1);
        let offset = (random >> 24) % 100_000 * 8;
        let base = if done.task.pid == 1 { 0 } else { 800_000_000 };
        vec![(
            now + NS_PER_MS,
            rq(100 + next_id, IoOp::Read, base + offset, 8, done.task.pid),
        )]
    });
    sim
}

#[test]
fn bfq_do_or_sched_stable_merge_merges_queues_created_within_180_ms_from_5_13() {
    // Same ioprio and class, same group, created 50 ms apart: on 6.6 (430a67f9d616, 5.13) the
    // second queue is merged with the first at its creation (bfq_do_early_stable_merge: flash
    // with queueing), for good (stably_merged: never split); 4.19 has no stable merge and the
    // processes are no cooperators (their I/O is far apart).
    let modern = two_new_processes(KernelVersion::V6_6, 50 * NS_PER_MS);
    assert_eq!(modern.bfq.stats.stable_merges, 1, "{:?}", modern.bfq.stats);
    assert_eq!(modern.bfq.sync_queue_of(1), modern.bfq.sync_queue_of(2));
    let old = two_new_processes(KernelVersion::V4_19, 50 * NS_PER_MS);
    assert_eq!(old.bfq.stats.queue_merges, 0, "{:?}", old.bfq.stats);
    assert_ne!(old.bfq.sync_queue_of(1), old.bfq.sync_queue_of(2));
    // 300 ms apart: beyond bfq_burst_interval, no stable merge on 6.6 either.
    let late = two_new_processes(KernelVersion::V6_6, 300 * NS_PER_MS);
    assert_eq!(late.bfq.stats.queue_merges, 0, "{:?}", late.bfq.stats);
    assert_ne!(late.bfq.sync_queue_of(1), late.bfq.sync_queue_of(2));
}

#[test]
fn an_in_service_queue_requeued_then_served_leaves_the_active_tree_on_deactivation() {
    // __bfq_requeue_entity re-inserts an in-service entity into the active tree; served more,
    // its finish time moves (__bfq_deactivate_entity: bfq_calc_finish from its service). The
    // model's trees are keyed by finish time, so the entity must leave the tree before its
    // finish moves (this panicked with "entity not active" in fg-vs-bg's Android variants when
    // processes start together).
    let mut bfq = Sim::new(100 * NS_PER_US, 0).bfq;
    for i in 1..=3u64 {
        Elevator::add_request(&mut bfq, 0, rq(i, IoOp::Read, 1000 + 8 * i, 8, 1));
    }
    assert!(Elevator::dispatch_request(&mut bfq, 0).is_some());
    let q = bfq.in_service().expect("in service");
    bfq.requeue_bfqq(q, false);
    bfq.bfqq_served(q, 64);
    bfq.del_bfqq_busy(q, false);
    assert!(!bfq.queue(q).busy);
}
