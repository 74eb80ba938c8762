//! Where an app's operations spend their time, layer by layer (IOPro's Figure 3 style), and the
//! foreground coefficient C_fg of FastTrack §2.3 (the foreground app's share of the I/O in
//! flight while its operation runs), computed from a run's recorded timeline
//! ([`crate::report::perfetto::RunTimeline`], recorded when `RunOptions::timeline` is set).
//!
//! Per operation (a system-call slice of one of the app's tasks, e.g. Camera's `fsync`), every
//! wait recorded inside it is split:
//! - a wait on a block request (`submit_bio_wait`, `wait_on_page_writeback` and `lock_page` name
//!   the request carrying the page) is cut at the request's life: before it was inserted into the
//!   elevator and after it completed, the wait's own layer; from insertion to its start on the
//!   device, the block layer; on the device, the device;
//! - any other wait goes to its reason's layer ([`crate::sim::WaitReason::layer`]): `mm` is the page cache,
//!   `fs` the file system and journal (a `jbd2_log_wait_commit` stays there, although the commit
//!   waits for its own I/O), `block` the block layer (tags, writeback throttling), `cpu` running
//!   or waiting for a core;
//! - time of the operation in no recorded wait (engine waits, voluntary sleeps) is `other`.
//!
//! C_fg (§2.3: "the ratio of the total amount of I/Os from τ to the total amount of I/Os in the
//! interval [t_start, t_finish]"): the bytes of the requests issued (inserted into the elevator)
//! during the operation that belong to the foreground app (its tasks allocated them, or they
//! carry its pages: the flusher's writeback of its data), over the bytes of all requests
//! issued then. Summed over the app's operations (a ratio of sums).
//!
//! Simplifications: a wait on a page, buffer or transaction is not followed to the request
//! behind it unless the waiting code named the request (a metadata buffer's or a jbd2 commit's
//! I/O counts as `fs`); requests still in flight when the run ended are not in the timeline and
//! count for neither C_fg nor the split; records past the timeline's bound are missing (the
//! caller should check `Timeline::dropped`).

use super::perfetto::RunTimeline;
use crate::sim::timeline::{RequestLife, SliceKind, TaskWait};
use crate::sim::{Blocker, TaskId};
use crate::units::Nanos;
use std::collections::{BTreeMap, BTreeSet};

/// Time of an app's operations by layer, summed over the operations.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct LayerBreakdown {
    /// Operations counted (finished ones).
    pub ops: u64,
    /// Their latencies, summed.
    pub total_ns: Nanos,
    pub page_cache_ns: Nanos,
    pub fs_ns: Nanos,
    pub block_ns: Nanos,
    pub device_ns: Nanos,
    pub cpu_ns: Nanos,
    pub other_ns: Nanos,
    /// Bytes of the requests issued during the operations: the foreground app's, and all.
    pub fg_io_bytes: u64,
    pub all_io_bytes: u64,
}

impl LayerBreakdown {
    /// FastTrack §2.3's C_fg: the foreground app's share of the I/O issued while its
    /// operations ran; `None` when none was.
    pub fn c_fg(&self) -> Option<f64> {
        (self.all_io_bytes > 0).then(|| self.fg_io_bytes as f64 / self.all_io_bytes as f64)
    }

    /// Mean per operation of a summed field, in ms.
    pub fn mean_ms(&self, ns: Nanos) -> f64 {
        if self.ops == 0 {
            0.0
        } else {
            ns as f64 / self.ops as f64 / 1e6
        }
    }

    fn add(&mut self, layer: &str, ns: Nanos) {
        match layer {
            "mm" => self.page_cache_ns += ns,
            "fs" => self.fs_ns += ns,
            "block" => self.block_ns += ns,
            "device" => self.device_ns += ns,
            "cpu" => self.cpu_ns += ns,
            _ => self.other_ns += ns,
        }
    }
}

/// Length of `[start, end)` inside `[from, to)`.
fn overlap(start: Nanos, end: Nanos, from: Nanos, to: Nanos) -> Nanos {
    end.min(to).saturating_sub(start.max(from))
}

/// Splits `wait` into layers (see the module comment) and adds it to `into`.
fn split_wait(wait: &TaskWait, requests: &BTreeMap<u64, &RequestLife>, into: &mut LayerBreakdown) {
    let own = wait.reason.layer();
    let (start, end) = (wait.start_ns, wait.end_ns);
    let request = match wait.blocker {
        Blocker::Request(id) => requests.get(&id),
        _ => None,
    };
    let Some(rq) = request else {
        into.add(own, end - start);
        return;
    };
    let block = overlap(start, end, rq.inserted_ns, rq.device_start_ns);
    let device = overlap(start, end, rq.device_start_ns, rq.completed_ns);
    assert!(block + device <= end - start, "a wait's parts exceed it");
    into.add("block", block);
    into.add("device", device);
    into.add(own, end - start - block - device);
}

/// The layer breakdown and C_fg of `app`'s operations named `op` (finished ones) in `run`;
/// `uid` is the app's uid (the foreground app's, for C_fg).
pub fn breakdown(run: &RunTimeline, app: &str, uid: u32, op: &str) -> LayerBreakdown {
    let tasks: BTreeSet<TaskId> = run
        .tasks
        .iter()
        .filter(|t| t.app.as_deref() == Some(app))
        .map(|t| t.id)
        .collect();
    let timeline = &run.timeline;
    let requests: BTreeMap<u64, &RequestLife> =
        timeline.requests.iter().map(|rq| (rq.id, rq)).collect();
    let mut waits: BTreeMap<TaskId, Vec<&TaskWait>> = BTreeMap::new();
    for wait in timeline.waits.iter().filter(|w| tasks.contains(&w.task)) {
        waits.entry(wait.task).or_default().push(wait);
    }
    let mut result = LayerBreakdown::default();
    let slices = timeline.slices.iter().filter(|s| {
        s.kind == SliceKind::Syscall && s.name == op && !s.unfinished && tasks.contains(&s.task)
    });
    for slice in slices {
        let (from, to) = (slice.start_ns, slice.end_ns);
        result.ops += 1;
        result.total_ns += to - from;
        let mut in_waits = 0;
        for wait in waits.get(&slice.task).into_iter().flatten() {
            if wait.start_ns < from || wait.end_ns > to {
                continue;
            }
            split_wait(wait, &requests, &mut result);
            in_waits += wait.end_ns - wait.start_ns;
        }
        assert!(in_waits <= to - from, "waits of one task overlap");
        result.other_ns += to - from - in_waits;
        let issued = timeline
            .requests
            .iter()
            .filter(|rq| (from..to).contains(&rq.inserted_ns));
        for rq in issued {
            let bytes = u64::from(rq.nr_sectors) * crate::units::SECTOR_SIZE;
            result.all_io_bytes += bytes;
            if rq.uid == uid || rq.owner_uid == uid {
                result.fg_io_bytes += bytes;
            }
        }
    }
    let layers = result.page_cache_ns
        + result.fs_ns
        + result.block_ns
        + result.device_ns
        + result.cpu_ns
        + result.other_ns;
    assert_eq!(layers, result.total_ns, "the layers add up to the latency");
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::perfetto::TraceTask;
    use crate::sim::timeline::{TaskSlice, Timeline};
    use crate::sim::WaitReason;

    fn request(
        id: u64,
        uid: u32,
        inserted: Nanos,
        on_device: Nanos,
        done: Nanos,
        nr_sectors: u32,
    ) -> RequestLife {
        RequestLife {
            id,
            device: "179,0".into(),
            elevator: "cfq",
            rwbs: "WS".into(),
            sector: 0,
            nr_sectors,
            comm: String::new(),
            pid: 0,
            uid,
            owner_uid: uid,
            issued_async: false,
            start_ns: inserted,
            inserted_ns: inserted,
            issued_ns: on_device,
            device_start_ns: on_device,
            completed_ns: done,
        }
    }

    fn wait(reason: WaitReason, blocker: Blocker, start_ns: Nanos, end_ns: Nanos) -> TaskWait {
        TaskWait {
            task: TaskId(1),
            reason,
            blocker,
            holder: None,
            start_ns,
            end_ns,
            unfinished: false,
        }
    }

    #[test]
    fn a_wait_on_a_request_is_cut_at_its_life_and_c_fg_counts_bytes_issued_meanwhile() {
        let timeline = Timeline {
            waits: vec![
                wait(WaitReason::OnCpu, Blocker::None, 0, 10),
                // wait_on_page_writeback on R#1: 10..20 before the request is in the elevator
                // (page cache), 20..50 in the elevator, 50..85 on the device, 85..90 after.
                wait(WaitReason::PageWriteback, Blocker::Request(1), 10, 90),
                // A wait outside the operation is not counted.
                wait(WaitReason::BlockIo, Blocker::Request(2), 150, 160),
            ],
            slices: vec![TaskSlice {
                task: TaskId(1),
                kind: SliceKind::Syscall,
                name: "fsync".into(),
                start_ns: 0,
                end_ns: 100,
                unfinished: false,
            }],
            // The app's request (8 sectors), a background one of 24 sectors issued during the
            // fsync, and one issued after it.
            requests: vec![
                request(1, 10_000, 20, 50, 85, 8),
                request(2, 10_001, 0, 120, 200, 24),
                request(3, 10_001, 100, 120, 200, 64),
            ],
            ..Timeline::default()
        };
        let run = RunTimeline {
            timeline,
            tasks: vec![TraceTask {
                id: TaskId(1),
                name: "camera".into(),
                app: Some("camera".into()),
            }],
        };
        let layers = breakdown(&run, "camera", 10_000, "fsync");
        assert_eq!((layers.ops, layers.total_ns), (1, 100));
        assert_eq!(layers.cpu_ns, 10);
        assert_eq!(layers.page_cache_ns, 15);
        assert_eq!(layers.block_ns, 30);
        assert_eq!(layers.device_ns, 35);
        assert_eq!(layers.other_ns, 10, "100 ns minus the 90 ns in waits");
        assert_eq!((layers.fg_io_bytes, layers.all_io_bytes), (4096, 16384));
        assert_eq!(layers.c_fg(), Some(0.25));
        // Another app's view: none of its operations.
        let none = breakdown(&run, "update", 10_001, "fsync");
        assert_eq!((none.ops, none.c_fg()), (0, None));
    }
}
