//! Kyber: block/kyber-iosched.c, current mainline (the histogram version, 5.0+).
//!
//! What is kept, by kernel function:
//! - Scheduling domains (`kyber_sched_domain`): READ, WRITE (sync or not), DISCARD, OTHER, each
//!   a FIFO of requests and a pool of tokens (`domain_tokens`, an sbitmap of `kyber_depth` =
//!   256 / 128 / 64 / 16): a request is dispatched only with a token of its domain, held until
//!   it completes (`kyber_get_domain_token`, `rq_clear_domain_token`).
//! - Dispatch (`kyber_dispatch_request`, `kyber_dispatch_cur_domain`): batches per domain
//!   (`kyber_batch_size` 16 / 8 / 1 / 1), then the next domain round robin, wrapping to the
//!   current one when no other has requests or tokens.
//! - Latency accounting (`add_latency_sample`, `kyber_completed_request`): for READ, WRITE and
//!   DISCARD, a histogram of 8 buckets of a quarter of the domain's target each (4 "good" up to
//!   the target, 4 "bad"), for the total latency (from allocation, `start_time_ns`) and the I/O
//!   latency (from issue, `io_start_time_ns`); targets `read_lat_nsec` 2 ms, `write_lat_nsec`
//!   10 ms, discard 5 s (`kyber_latency_targets`). Each completion pulls the timer to at most
//!   HZ / 10 away (`timer_reduce`).
//! - The timer (`kyber_timer_fn`, `calculate_percentile`): a percentile is computed once a
//!   domain has 500 samples or one second has passed since its first; if any domain's I/O
//!   latency p90 is in a bad bucket the device is congested, and every domain with a good total
//!   latency p99 is throttled to `depth * (p99 bucket + 1) / 4` (a p99 at 3/4 of the target cuts
//!   the depth to 3/4); a domain with a bad p99 is always given more (`(bucket + 1) / 4`, up to
//!   2x), clamped to 1..=`kyber_depth` (`kyber_resize_domain`). A p99 computed without
//!   congestion is remembered for the next congestion (`domain_p99`).
//! - `kyber_limit_depth`: async requests may hold 75 % of the scheduler tags
//!   (`KYBER_ASYNC_PERCENT`, `kyber_depth_updated`).
//!
//! Simplifications:
//! - One hardware queue and one software queue: the per-CPU `kcq` lists are the domain FIFOs
//!   and the per-CPU histograms are summed as they are filled (the timer flushes them anyway).
//! - A bio merges into one of the last 8 requests of its domain (`blk_bio_list_merge` checks 8),
//!   back or front.
//! - Flushes bypass the elevator in the request queue, so the OTHER domain stays empty.

use super::{Elevator, RqStore};
use crate::block::request::{Bio, MergeKind, Request, RequestId};
use crate::dev::IoOp;
use crate::kernel::Hz;
use crate::units::{Nanos, NS_PER_MS, NS_PER_SEC};
use std::collections::VecDeque;

/// `enum { KYBER_READ, KYBER_WRITE, KYBER_DISCARD, KYBER_OTHER }`.
pub const KYBER_READ: usize = 0;
pub const KYBER_WRITE: usize = 1;
pub const KYBER_DISCARD: usize = 2;
pub const KYBER_OTHER: usize = 3;
const KYBER_NUM_DOMAINS: usize = 4;

/// `kyber_depth`: the most tokens of each domain.
pub const KYBER_DEPTH: [u32; KYBER_NUM_DOMAINS] = [256, 128, 64, 16];
/// `kyber_batch_size`.
const KYBER_BATCH_SIZE: [u32; KYBER_NUM_DOMAINS] = [16, 8, 1, 1];
/// `kyber_latency_targets` (READ, WRITE, DISCARD), in ns.
pub const KYBER_LATENCY_TARGETS: [Nanos; 3] = [2 * NS_PER_MS, 10 * NS_PER_MS, 5 * NS_PER_SEC];
/// `KYBER_LATENCY_SHIFT = 2`: buckets are a quarter of the target wide.
const KYBER_LATENCY_SHIFT: u32 = 2;
/// `KYBER_GOOD_BUCKETS`: the buckets at or under the target.
pub const KYBER_GOOD_BUCKETS: i32 = 1 << KYBER_LATENCY_SHIFT;
/// `KYBER_LATENCY_BUCKETS`.
const KYBER_LATENCY_BUCKETS: usize = 2 << KYBER_LATENCY_SHIFT;
/// `KYBER_ASYNC_PERCENT = 75`.
const KYBER_ASYNC_PERCENT: usize = 75;
/// `calculate_percentile` waits for this many samples (or one second).
const PERCENTILE_SAMPLES: u32 = 500;

const TOTAL_LATENCY: usize = 0;
const IO_LATENCY: usize = 1;

/// The tunables of `queue/iosched/` (`read_lat_nsec`, `write_lat_nsec`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KyberTunables {
    pub read_lat_nsec: Nanos,
    pub write_lat_nsec: Nanos,
}

impl Default for KyberTunables {
    fn default() -> Self {
        KyberTunables {
            read_lat_nsec: KYBER_LATENCY_TARGETS[KYBER_READ],
            write_lat_nsec: KYBER_LATENCY_TARGETS[KYBER_WRITE],
        }
    }
}

/// `struct kyber_queue_data` and `struct kyber_hctx_data`.
#[derive(Debug)]
pub struct Kyber {
    hz: Hz,
    /// `khd->rqs[domain]`: queued requests per domain, FIFO.
    rqs: [VecDeque<RequestId>; KYBER_NUM_DOMAINS],
    store: RqStore,
    /// `domain_tokens[domain].sb.depth` and the tokens in use.
    depth: [u32; KYBER_NUM_DOMAINS],
    in_use: [u32; KYBER_NUM_DOMAINS],
    cur_domain: usize,
    batching: u32,
    latency_targets: [Nanos; 3],
    /// `latency_buckets[domain][type][bucket]`.
    buckets: [[[u32; KYBER_LATENCY_BUCKETS]; 2]; 3],
    /// `latency_timeout[domain]` in jiffies (0: none).
    latency_timeout: [u64; 3],
    domain_p99: [i32; 3],
    /// When the timer fires, if armed.
    timer: Option<Nanos>,
}

impl Kyber {
    pub fn new(hz: Hz, tunables: KyberTunables) -> Kyber {
        assert!(tunables.read_lat_nsec > 0 && tunables.write_lat_nsec > 0);
        Kyber {
            hz,
            rqs: Default::default(),
            store: RqStore::default(),
            depth: KYBER_DEPTH,
            in_use: [0; KYBER_NUM_DOMAINS],
            cur_domain: 0,
            batching: 0,
            latency_targets: [
                tunables.read_lat_nsec,
                tunables.write_lat_nsec,
                KYBER_LATENCY_TARGETS[KYBER_DISCARD],
            ],
            buckets: [[[0; KYBER_LATENCY_BUCKETS]; 2]; 3],
            latency_timeout: [0; 3],
            domain_p99: [-1; 3],
            timer: None,
        }
    }

    /// `kyber_sched_domain`.
    pub fn sched_domain(op: IoOp) -> usize {
        match op {
            IoOp::Read => KYBER_READ,
            IoOp::Write => KYBER_WRITE,
            IoOp::Discard => KYBER_DISCARD,
            IoOp::Flush => KYBER_OTHER,
        }
    }

    /// The current token depth of a domain (`domain_tokens[domain].sb.depth`).
    pub fn domain_depth(&self, domain: usize) -> u32 {
        self.depth[domain]
    }

    /// `add_latency_sample`.
    fn add_latency_sample(&mut self, domain: usize, kind: usize, latency: Nanos) {
        let target = self.latency_targets[domain];
        let bucket = if latency > 0 {
            let divisor = (target >> KYBER_LATENCY_SHIFT).max(1);
            (((latency - 1) / divisor) as usize).min(KYBER_LATENCY_BUCKETS - 1)
        } else {
            0
        };
        self.buckets[domain][kind][bucket] += 1;
    }

    /// `calculate_percentile`: the bucket of the given percentile, or -1 without enough
    /// samples (fewer than 500 and less than a second since the first was looked at). The
    /// buckets are cleared once used.
    fn calculate_percentile(
        &mut self,
        jiffies: u64,
        domain: usize,
        kind: usize,
        percentile: u32,
    ) -> i32 {
        let buckets = &mut self.buckets[domain][kind];
        let samples: u32 = buckets.iter().sum();
        if samples == 0 {
            return -1;
        }
        if self.latency_timeout[domain] == 0 {
            self.latency_timeout[domain] = (jiffies + u64::from(self.hz.0)).max(1);
        }
        if samples < PERCENTILE_SAMPLES && jiffies < self.latency_timeout[domain] {
            return -1;
        }
        self.latency_timeout[domain] = 0;
        let mut percentile_samples = (samples * percentile).div_ceil(100);
        let mut bucket = 0;
        while bucket < KYBER_LATENCY_BUCKETS - 1 {
            if buckets[bucket] >= percentile_samples {
                break;
            }
            percentile_samples -= buckets[bucket];
            bucket += 1;
        }
        *buckets = [0; KYBER_LATENCY_BUCKETS];
        bucket as i32
    }

    /// `kyber_resize_domain`.
    fn resize_domain(&mut self, domain: usize, depth: u32) {
        self.depth[domain] = depth.clamp(1, KYBER_DEPTH[domain]);
    }

    /// `kyber_timer_fn`.
    fn timer_fn(&mut self, now: Nanos) {
        let jiffies = self.hz.jiffies(now);
        let mut bad = false;
        for domain in 0..KYBER_OTHER {
            let p90 = self.calculate_percentile(jiffies, domain, IO_LATENCY, 90);
            if p90 >= KYBER_GOOD_BUCKETS {
                bad = true;
            }
        }
        for domain in 0..KYBER_OTHER {
            let mut p99 = self.calculate_percentile(jiffies, domain, TOTAL_LATENCY, 99);
            if bad {
                if p99 < 0 {
                    p99 = self.domain_p99[domain];
                }
                self.domain_p99[domain] = -1;
            } else if p99 >= 0 {
                self.domain_p99[domain] = p99;
            }
            if p99 < 0 {
                continue;
            }
            if bad || p99 >= KYBER_GOOD_BUCKETS {
                let depth = (self.depth[domain] * (p99 as u32 + 1)) >> KYBER_LATENCY_SHIFT;
                self.resize_domain(domain, depth);
            }
        }
    }

    /// `kyber_get_domain_token` for the current domain.
    fn get_domain_token(&mut self) -> bool {
        let domain = self.cur_domain;
        if self.in_use[domain] < self.depth[domain] {
            self.in_use[domain] += 1;
            true
        } else {
            false
        }
    }

    /// `kyber_dispatch_cur_domain`.
    fn dispatch_cur_domain(&mut self) -> Option<Request> {
        let domain = self.cur_domain;
        let id = *self.rqs[domain].front()?;
        if !self.get_domain_token() {
            return None;
        }
        self.batching += 1;
        self.rqs[domain].pop_front();
        Some(self.store.remove(id))
    }
}

impl Elevator for Kyber {
    fn name(&self) -> &'static str {
        "kyber"
    }

    /// `kyber_bio_merge` -> `blk_bio_list_merge` over the bio's domain list (its last 8).
    fn merge_bio(
        &mut self,
        _now: Nanos,
        bio: &Bio,
        max_sectors: u32,
    ) -> Option<(RequestId, MergeKind)> {
        let list = &self.rqs[Self::sched_domain(bio.op)];
        let recent: Vec<RequestId> = list.iter().rev().take(8).copied().collect();
        let (id, kind, _) = self.store.merge(bio, max_sectors, true, |rq| {
            recent.contains(&rq.id) && rq.ioprio == bio.ioprio
        })?;
        Some((id, kind))
    }

    /// `kyber_insert_requests`.
    fn add_request(&mut self, now: Nanos, mut rq: Request) {
        rq.inserted_ns = now;
        self.rqs[Self::sched_domain(rq.op)].push_back(rq.id);
        self.store.insert(rq);
    }

    /// `kyber_dispatch_request`.
    fn dispatch_request(&mut self, _now: Nanos) -> Option<Request> {
        if self.batching < KYBER_BATCH_SIZE[self.cur_domain] {
            if let Some(rq) = self.dispatch_cur_domain() {
                return Some(rq);
            }
        }
        self.batching = 0;
        for _ in 0..KYBER_NUM_DOMAINS {
            self.cur_domain = (self.cur_domain + 1) % KYBER_NUM_DOMAINS;
            if let Some(rq) = self.dispatch_cur_domain() {
                return Some(rq);
            }
        }
        None
    }

    /// `kyber_completed_request` and `kyber_finish_request`.
    fn completed_request(&mut self, now: Nanos, rq: &Request) {
        let domain = Self::sched_domain(rq.op);
        assert!(self.in_use[domain] > 0, "kyber token released twice");
        self.in_use[domain] -= 1;
        if domain == KYBER_OTHER {
            return;
        }
        self.add_latency_sample(domain, TOTAL_LATENCY, now.saturating_sub(rq.start_ns));
        let issued = rq.issued_ns.unwrap_or(now);
        self.add_latency_sample(domain, IO_LATENCY, now.saturating_sub(issued));
        // `timer_reduce(&kqd->timer, jiffies + HZ / 10)`: fires on that tick.
        let tick = self.hz.tick_ns();
        let expiry = (self.hz.jiffies(now) + self.hz.over(10)) * tick;
        self.timer = Some(self.timer.map_or(expiry, |armed| armed.min(expiry)));
    }

    fn queued(&self) -> usize {
        self.store.len()
    }

    fn next_timer(&self) -> Option<Nanos> {
        self.timer
    }

    fn timer_fired(&mut self, now: Nanos) {
        self.timer = None;
        self.timer_fn(now);
    }

    fn queued_requests(&self) -> Vec<&Request> {
        self.store.requests()
    }

    /// `khd->rqs[domain]` holds the queued requests of its domain, once each; the domain's
    /// tokens in use (`domain_tokens`, held from dispatch to completion) equal its dispatched
    /// requests not completed.
    fn check(&self, dispatched: &[&Request]) -> Result<(), String> {
        self.store.check()?;
        let listed: usize = self.rqs.iter().map(VecDeque::len).sum();
        super::check_count(
            "kyber's queued requests",
            self.store.len() as u64,
            "are on its domain lists (khd->rqs)",
            listed as u64,
        )?;
        let mut ids: Vec<RequestId> = self.rqs.iter().flatten().copied().collect();
        ids.sort_unstable();
        ids.dedup();
        if ids.len() != listed {
            return Err("kyber: a request is on the domain lists twice".into());
        }
        for (domain, list) in self.rqs.iter().enumerate() {
            if let Some(&id) = list.iter().find(|&&id| {
                !self.store.contains(id) || Self::sched_domain(self.store.get(id).op) != domain
            }) {
                return Err(format!(
                    "kyber: R#{id} on domain {domain}'s list is not a queued request of it"
                ));
            }
            let in_flight = dispatched
                .iter()
                .filter(|rq| Self::sched_domain(rq.op) == domain)
                .count();
            super::check_count(
                &format!("kyber domain_tokens[{domain}] in use"),
                u64::from(self.in_use[domain]),
                "requests of the domain are dispatched and not completed",
                in_flight as u64,
            )?;
        }
        Ok(())
    }

    /// `kyber_limit_depth`: async requests get `async_depth` = 75 % of the tags.
    fn limit_depth(&self, nr_requests: usize, sync: bool, _write: bool) -> Option<usize> {
        (!sync).then(|| (nr_requests * KYBER_ASYNC_PERCENT / 100).max(1))
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::queue::{AllocModel, RequestQueue, SubmitOutcome};
    use crate::block::request::test_support::*;

    #[test]
    fn latency_buckets_are_quarters_of_the_target() {
        let mut kyber = Kyber::new(Hz(1000), KyberTunables::default());
        for latency in [1, 500_000, 500_001, 2_000_000, 2_000_001, 100_000_000] {
            kyber.add_latency_sample(KYBER_READ, IO_LATENCY, latency);
        }
        assert_eq!(
            kyber.buckets[KYBER_READ][IO_LATENCY],
            [2, 1, 0, 1, 1, 0, 0, 1]
        );
        // Six samples: no percentile before a second has passed since the first look.
        assert_eq!(
            kyber.calculate_percentile(0, KYBER_READ, IO_LATENCY, 90),
            -1
        );
        assert_eq!(
            kyber.calculate_percentile(1000, KYBER_READ, IO_LATENCY, 90),
            7,
            "the 6th of 6 samples (ceil(5.4)), 100 ms, is in the last bucket"
        );
        assert_eq!(
            kyber.buckets[KYBER_READ][IO_LATENCY], [0; 8],
            "used and cleared"
        );
        for latency in [1, 500_000, 500_001, 2_000_000, 2_000_001, 100_000_000] {
            kyber.add_latency_sample(KYBER_READ, IO_LATENCY, latency);
        }
        assert_eq!(
            kyber.calculate_percentile(2000, KYBER_READ, IO_LATENCY, 50),
            -1
        );
        assert_eq!(
            kyber.calculate_percentile(3000, KYBER_READ, IO_LATENCY, 50),
            1,
            "the 3rd of 6 samples is in the second bucket"
        );
    }

    /// A writer keeps `backlog` async writes queued or in flight and, if `reads`, a reader
    /// reads every 2 ms, over a serial device (0.25 ms per command) under kyber, until `until`.
    /// Returns the latencies of the reads that completed in the last second.
    fn run(
        queue: &mut RequestQueue,
        now: &mut Nanos,
        until: Nanos,
        backlog: usize,
        reads: bool,
        (next_id, writes_out): (&mut u64, &mut usize),
    ) -> Vec<Nanos> {
        let mut next_read = *now;
        let mut read_latencies = Vec::new();
        while *now < until {
            while *writes_out < backlog {
                let write = bio(*next_id, IoOp::Write, 10_000 * *next_id, 8, 1);
                *next_id += 1;
                assert!(matches!(
                    queue.submit_bio(*now, &write),
                    SubmitOutcome::Queued(_)
                ));
                *writes_out += 1;
            }
            if reads && *now >= next_read {
                let read = bio(*next_id, IoOp::Read, 10_000 * *next_id + 5, 8, 2);
                *next_id += 1;
                queue.submit_bio(*now, &read);
                next_read = *now + 2 * NS_PER_MS;
            }
            *now = queue
                .next_event()
                .into_iter()
                .chain(reads.then_some(next_read.max(*now)))
                .min()
                .unwrap();
            for (done, rq) in queue.advance(*now).completed {
                match rq.op {
                    IoOp::Write => *writes_out -= 1,
                    _ if done + NS_PER_SEC >= until => read_latencies.push(done - rq.start_ns),
                    _ => {}
                }
            }
        }
        read_latencies
    }

    fn write_depth(queue: &RequestQueue) -> u32 {
        let kyber = queue.elevator().as_any().unwrap();
        kyber
            .downcast_ref::<Kyber>()
            .unwrap()
            .domain_depth(KYBER_WRITE)
    }

    #[test]
    fn kyber_cuts_write_depth_while_reads_miss_their_target_stops_once_they_meet_it_and_restores_it_when_writes_miss_theirs(
    ) {
        // 1. A writer keeps 24 writes outstanding (~6 ms each, inside the 10 ms write target)
        //    while reads wait behind them in the device (~6 ms, over their 2 ms target): the
        //    read I/O p90 is bad (congestion), and the write domain, whose p99 is good (its
        //    third bucket), is cut to 3/4 at each percentile window (about a second of reads)
        //    until no more than ~7 writes sit in the device ahead of a read.
        // 2. Reads now meet their target: no congestion, no more cuts; writes still meet
        //    theirs, so kyber leaves the depth where it is (it only eases a domain whose own
        //    latency is bad).
        // 3. The reads stop and the writer's backlog grows to 96 (~24 ms, far over 10 ms): the
        //    write domain's bad p99 doubles its depth at each window, back to the maximum.
        let device = SerialDevice::new(NS_PER_MS / 4);
        let mut queue = RequestQueue::new(
            Box::new(Kyber::new(Hz(1000), KyberTunables::default())),
            Box::new(device),
            AllocModel::Mq { nr_requests: 256 },
        );
        let (mut now, mut next_id, mut writes_out) = (0, 1, 0);
        assert_eq!(write_depth(&queue), 128);
        let second = NS_PER_SEC;
        let missed = run(
            &mut queue,
            &mut now,
            2 * second,
            24,
            true,
            (&mut next_id, &mut writes_out),
        );
        assert!(
            missed.iter().all(|&latency| latency > 2 * NS_PER_MS),
            "reads start over their target: {missed:?}"
        );
        assert!(write_depth(&queue) < 128, "cut once congestion is seen");
        let met = run(
            &mut queue,
            &mut now,
            15 * second,
            24,
            true,
            (&mut next_id, &mut writes_out),
        );
        let cut = write_depth(&queue);
        assert!(cut <= 8, "write depth {cut} after congestion");
        let p90 = {
            let mut sorted = met.clone();
            sorted.sort_unstable();
            sorted[sorted.len() * 9 / 10]
        };
        assert!(p90 <= 2 * NS_PER_MS, "reads meet their target: p90 {p90}");
        run(
            &mut queue,
            &mut now,
            18 * second,
            24,
            true,
            (&mut next_id, &mut writes_out),
        );
        assert_eq!(
            write_depth(&queue),
            cut,
            "no congestion, writes meet their target"
        );
        run(
            &mut queue,
            &mut now,
            21 * second,
            96,
            false,
            (&mut next_id, &mut writes_out),
        );
        assert_eq!(write_depth(&queue), 128, "restored");
    }
}

/// The checks can fail: tokens in use that drift from the dispatched requests are found.
#[cfg(test)]
mod check_tests {
    use super::*;
    use crate::block::request::test_support::request;

    #[test]
    fn kyber_domain_tokens_in_use_that_drift_are_found() {
        let mut kyber = Kyber::new(Hz(250), KyberTunables::default());
        kyber.add_request(0, request(1, IoOp::Read, 0, 8, 1));
        kyber.add_request(0, request(2, IoOp::Write, 1000, 8, 2));
        let dispatched = kyber.dispatch_request(0).expect("a request");
        kyber.check(&[&dispatched]).expect("consistent");
        kyber.in_use[KYBER_WRITE] += 1;
        let what = kyber.check(&[&dispatched]).expect_err("tokens");
        assert!(what.contains("kyber domain_tokens[1] in use = 1"), "{what}");
    }
}
