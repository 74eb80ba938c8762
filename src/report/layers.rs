//! Where an app's operations spend their time, layer by layer (IOPro's Figure 3 style, FastTrack
//! §3.1), and the foreground coefficient C_fg of FastTrack §2.3 (the foreground app's share of
//! the I/O in flight while its operation runs), computed from a run's recorded timeline
//! ([`crate::report::perfetto::RunTimeline`], recorded when `RunOptions::timeline` is set).
//!
//! Every nanosecond of an operation (a named slice of one of the app's tasks: a system call such
//! as Camera's `fsync`, or the action that contains several, such as a launch's `iteration`)
//! goes to exactly one layer ([`Layer`]), so the layers add up to the operation's latency:
//! - a wait on a block request (`submit_bio_wait`, `wait_on_page_writeback` and `lock_page` name
//!   the request carrying the page) is cut at the request's life: before the request existed
//!   and after it completed, the wait's own layer; allocated and on its submitter's plug list,
//!   the block layer; in the elevator (or on the dispatch list), the block layer while the
//!   driver could have taken a request, the **device queue** while every device slot was held
//!   (the timeline's [`crate::sim::timeline::SlotsFull`]: the request waits for a slot, not for
//!   the elevator's choice); fetched by the mmc driver and waiting for the card, the device
//!   queue; on the device, the device;
//! - a wait for work another task does on the waiter's behalf (`jbd2_log_wait_commit` waits
//!   for the commit thread, a join or completion for the task that ends it; see
//!   [`follows_holder`]) is split as that task's own waits over the same interval, recursively
//!   ([`MAX_HOLDER_DEPTH`] hand-offs deep, never back to a task already in the chain); the
//!   holder's time in no recorded wait stays in the waiter's own layer. So an `fsync`'s commit
//!   wait becomes the commit's waits: its journal writes, its cache flush and the ordered data
//!   it waits for (Camera's own pages in CFQ's async queue, behind Update's) in the block layer,
//!   the device queue and the device;
//! - a wait for a lock (a mutex, the page allocator's lock, `start_this_handle`) is the lock's
//!   layer, whatever its holder does meanwhile: the waiter is held in that layer, as IOPro
//!   counts it;
//! - any other wait goes to its reason's layer ([`crate::sim::WaitReason::layer`]): `mm` is the
//!   page cache, `fs` the file system and journal, `block` the block layer (request allocation,
//!   writeback throttling), `cpu` running or waiting for a core;
//! - time of the operation in no recorded wait (engine waits without a holder, voluntary sleeps)
//!   is `other`.
//!
//! Each piece also keeps its path (the chain of waits and the request's phase, e.g.
//! `jbd2_log_wait_commit > jbd2/mmcblk0p1-8: wait_on_page_writeback > in cfq`), so the split of an
//! action comes with its explanation ([`LayerBreakdown::explained`]).
//!
//! C_fg (§2.3: "the ratio of the total amount of I/Os from τ to the total amount of I/Os in the
//! interval [t_start, t_finish]"): the bytes of the requests issued (inserted into the elevator)
//! during the operation that belong to the foreground app (its tasks allocated them, or they
//! carry its pages: the flusher's writeback of its data), over the bytes of all requests
//! issued then. Summed over the app's operations (a ratio of sums).
//!
//! Simplifications: a wait on a page or buffer whose request was not yet known when the wait
//! began (the bio not yet in a request) is not followed to the request that later carried it:
//! it stays in its own layer; requests still in flight when the run ended are not in the
//! timeline and count for neither C_fg nor the split, nor do intervals of full device slots
//! still open then; records past the timeline's bound are missing (the caller should check
//! `Timeline::dropped`).

use super::perfetto::RunTimeline;
use crate::sim::timeline::{RequestLife, SliceKind, TaskWait};
use crate::sim::{Blocker, TaskId, WaitReason};
use crate::units::Nanos;
use std::collections::{BTreeMap, BTreeSet};

/// A layer of the stack, as the breakdown counts time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layer {
    /// The page cache and memory management (page locks and writeback bits, allocation,
    /// reclaim, dirty throttling).
    PageCache,
    /// The file system and its journal.
    Fs,
    /// The block layer: request allocation, plugs, the elevator's choice, writeback throttling.
    Block,
    /// Waiting for a device slot: in the elevator or on the dispatch list while every slot is
    /// held, or fetched by the mmc driver while the card serves another command.
    DeviceQueue,
    /// On the device.
    Device,
    /// Running on a core or waiting for one.
    Cpu,
    /// In no recorded wait.
    Other,
}

impl Layer {
    /// Every layer, in the tables' order.
    pub const ALL: [Layer; 7] = [
        Layer::PageCache,
        Layer::Fs,
        Layer::Block,
        Layer::DeviceQueue,
        Layer::Device,
        Layer::Cpu,
        Layer::Other,
    ];

    /// The column name.
    pub fn name(self) -> &'static str {
        match self {
            Layer::PageCache => "page cache",
            Layer::Fs => "fs/journal",
            Layer::Block => "block",
            Layer::DeviceQueue => "device queue",
            Layer::Device => "device",
            Layer::Cpu => "cpu",
            Layer::Other => "other",
        }
    }

    /// The layer of a wait reason ([`WaitReason::layer`]); the engine's generic waits are
    /// `Other`.
    fn of(reason: WaitReason) -> Layer {
        match reason.layer() {
            "mm" => Layer::PageCache,
            "fs" => Layer::Fs,
            "block" => Layer::Block,
            "device" => Layer::Device,
            "cpu" => Layer::Cpu,
            _ => Layer::Other,
        }
    }
}

/// Time of an app's operations by layer, summed over the operations.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct LayerBreakdown {
    /// Operations counted (finished ones).
    pub ops: u64,
    /// Their latencies, summed.
    pub total_ns: Nanos,
    pub page_cache_ns: Nanos,
    pub fs_ns: Nanos,
    pub block_ns: Nanos,
    /// Waiting for a device slot ([`Layer::DeviceQueue`]).
    pub device_queue_ns: Nanos,
    pub device_ns: Nanos,
    pub cpu_ns: Nanos,
    pub other_ns: Nanos,
    /// Bytes of the requests issued during the operations: the foreground app's, and all.
    pub fg_io_bytes: u64,
    pub all_io_bytes: u64,
    /// The same time by path (the chain of waits, then the request's phase) and layer, summed
    /// over the operations: what each layer's time was spent on.
    #[serde(skip)]
    pub explained: BTreeMap<(String, Layer), Nanos>,
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

    /// The summed time of `layer`.
    pub fn of(&self, layer: Layer) -> Nanos {
        match layer {
            Layer::PageCache => self.page_cache_ns,
            Layer::Fs => self.fs_ns,
            Layer::Block => self.block_ns,
            Layer::DeviceQueue => self.device_queue_ns,
            Layer::Device => self.device_ns,
            Layer::Cpu => self.cpu_ns,
            Layer::Other => self.other_ns,
        }
    }

    /// The layers' sum (equal to `total_ns`: [`breakdown`] checks it).
    pub fn layers_sum(&self) -> Nanos {
        Layer::ALL.iter().map(|&layer| self.of(layer)).sum()
    }

    /// The `n` longest paths, longest first: (path, layer, summed ns).
    pub fn top_paths(&self, n: usize) -> Vec<(&str, Layer, Nanos)> {
        let mut paths: Vec<(&str, Layer, Nanos)> = self
            .explained
            .iter()
            .map(|((path, layer), &ns)| (path.as_str(), *layer, ns))
            .collect();
        paths.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| (a.0, a.1).cmp(&(b.0, b.1))));
        paths.truncate(n);
        paths
    }

    fn add(&mut self, layer: Layer, path: &str, ns: Nanos) {
        if ns == 0 {
            return;
        }
        *match layer {
            Layer::PageCache => &mut self.page_cache_ns,
            Layer::Fs => &mut self.fs_ns,
            Layer::Block => &mut self.block_ns,
            Layer::DeviceQueue => &mut self.device_queue_ns,
            Layer::Device => &mut self.device_ns,
            Layer::Cpu => &mut self.cpu_ns,
            Layer::Other => &mut self.other_ns,
        } += ns;
        *self.explained.entry((path.to_string(), layer)).or_default() += ns;
    }
}

/// How many hand-offs a wait is followed through ([`follows_holder`]): an fsync's commit wait
/// (1), the commit thread's wait for another task (2), and one more.
pub const MAX_HOLDER_DEPTH: usize = 3;

/// Whether a wait for `reason` waits for work its holder does on the waiter's behalf, so that
/// its time is the holder's waits: `jbd2_log_wait_commit` (the commit thread commits the
/// waiter's transaction), a join, a completion or wait queue the holder ends, a full journal
/// another task checkpoints, discards issued by the commit. Locks are not followed: a task
/// waiting for a lock is held in the lock's layer.
pub fn follows_holder(reason: WaitReason) -> bool {
    matches!(
        reason,
        WaitReason::JournalCommit
            | WaitReason::Join
            | WaitReason::Completion
            | WaitReason::WaitQueue
            | WaitReason::JournalSpace
            | WaitReason::Discard
    )
}

/// Length of `[start, end)` inside `[from, to)`.
fn overlap(start: Nanos, end: Nanos, from: Nanos, to: Nanos) -> Nanos {
    end.min(to).saturating_sub(start.max(from))
}

/// A run's timeline indexed for the split.
struct Index<'a> {
    /// Each task's waits, in time order (a task's waits never overlap).
    waits: BTreeMap<TaskId, Vec<&'a TaskWait>>,
    requests: BTreeMap<u64, &'a RequestLife>,
    /// Per device: the intervals in which every slot was held, in time order.
    slots_full: BTreeMap<&'a str, Vec<(Nanos, Nanos)>>,
    names: BTreeMap<TaskId, &'a str>,
}

impl<'a> Index<'a> {
    fn of(run: &'a RunTimeline) -> Index<'a> {
        let timeline = &run.timeline;
        let mut waits: BTreeMap<TaskId, Vec<&TaskWait>> = BTreeMap::new();
        for wait in &timeline.waits {
            waits.entry(wait.task).or_default().push(wait);
        }
        for list in waits.values_mut() {
            list.sort_by_key(|w| (w.start_ns, w.end_ns));
        }
        let mut slots_full: BTreeMap<&str, Vec<(Nanos, Nanos)>> = BTreeMap::new();
        for interval in &timeline.slots_full {
            slots_full
                .entry(interval.device.as_str())
                .or_default()
                .push((interval.start_ns, interval.end_ns));
        }
        for list in slots_full.values_mut() {
            list.sort_unstable();
        }
        Index {
            waits,
            requests: timeline.requests.iter().map(|rq| (rq.id, rq)).collect(),
            slots_full,
            names: run.tasks.iter().map(|t| (t.id, t.name.as_str())).collect(),
        }
    }

    /// Time of `[from, to)` in which every slot of `device` was held.
    fn slots_full_within(&self, device: &str, from: Nanos, to: Nanos) -> Nanos {
        let Some(intervals) = self.slots_full.get(device) else {
            return 0;
        };
        let first = intervals.partition_point(|&(_, end)| end <= from);
        intervals[first..]
            .iter()
            .take_while(|&&(start, _)| start < to)
            .map(|&(start, end)| overlap(start, end, from, to))
            .sum()
    }

    /// Splits `task`'s time in `[from, to)` into `into`, each wait under `path`; `chain` holds
    /// the tasks whose waits are being split (the waiter first). Returns the time covered by
    /// recorded waits.
    fn split_task(
        &self,
        task: TaskId,
        (from, to): (Nanos, Nanos),
        path: &str,
        chain: &mut Vec<TaskId>,
        into: &mut LayerBreakdown,
    ) -> Nanos {
        let Some(waits) = self.waits.get(&task) else {
            return 0;
        };
        let first = waits.partition_point(|w| w.end_ns <= from);
        let mut covered = 0;
        for wait in waits[first..].iter().take_while(|w| w.start_ns < to) {
            let (start, end) = (wait.start_ns.max(from), wait.end_ns.min(to));
            if start >= end {
                continue;
            }
            self.split_wait(wait, (start, end), path, chain, into);
            covered += end - start;
        }
        assert!(covered <= to - from, "waits of task {task} overlap");
        covered
    }

    /// Splits the part `[start, end)` of `wait` (see the module comment).
    fn split_wait(
        &self,
        wait: &TaskWait,
        (start, end): (Nanos, Nanos),
        path: &str,
        chain: &mut Vec<TaskId>,
        into: &mut LayerBreakdown,
    ) {
        let own = Layer::of(wait.reason);
        let path = if path.is_empty() {
            wait.reason.name().to_string()
        } else if path.ends_with(':') {
            format!("{path} {}", wait.reason.name())
        } else {
            format!("{path} > {}", wait.reason.name())
        };
        if let Blocker::Request(id) = wait.blocker {
            if let Some(rq) = self.requests.get(&id) {
                self.split_request(rq, (start, end), own, &path, into);
                return;
            }
        }
        let holder = wait
            .holder
            .filter(|h| follows_holder(wait.reason) && !chain.contains(h));
        match holder {
            Some(holder) if chain.len() <= MAX_HOLDER_DEPTH => {
                let name = self.names.get(&holder).copied().unwrap_or("?");
                let inner = format!("{path} > {name}:");
                chain.push(holder);
                let covered = self.split_task(holder, (start, end), &inner, chain, into);
                chain.pop();
                into.add(
                    own,
                    &format!("{path} ({name} in no wait)"),
                    end - start - covered,
                );
            }
            _ => into.add(own, &path, end - start),
        }
    }

    /// Splits `[start, end)` of a wait on request `rq` at the request's life.
    fn split_request(
        &self,
        rq: &RequestLife,
        (start, end): (Nanos, Nanos),
        own: Layer,
        path: &str,
        into: &mut LayerBreakdown,
    ) {
        let part = |from: Nanos, to: Nanos| overlap(start, end, from, to);
        let before = part(0, rq.start_ns);
        let plugged = part(rq.start_ns, rq.inserted_ns);
        let queued = part(rq.inserted_ns, rq.issued_ns);
        let slot_wait =
            self.slots_full_within(&rq.device, start.max(rq.inserted_ns), end.min(rq.issued_ns));
        let in_driver = part(rq.issued_ns, rq.device_start_ns);
        let on_device = part(rq.device_start_ns, rq.completed_ns);
        let after = part(rq.completed_ns, Nanos::MAX);
        debug_assert!(slot_wait <= queued);
        debug_assert_eq!(
            before + plugged + queued + in_driver + on_device + after,
            end - start
        );
        into.add(own, &format!("{path} (before its request)"), before);
        into.add(Layer::Block, &format!("{path} > plugged"), plugged);
        into.add(
            Layer::Block,
            &format!("{path} > in {}", rq.elevator),
            queued - slot_wait,
        );
        into.add(
            Layer::DeviceQueue,
            &format!("{path} > in {}, all device slots held", rq.elevator),
            slot_wait,
        );
        into.add(
            Layer::DeviceQueue,
            &format!("{path} > in the driver"),
            in_driver,
        );
        into.add(Layer::Device, &format!("{path} > on the device"), on_device);
        into.add(own, &format!("{path} (after completion)"), after);
    }
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
    let index = Index::of(run);
    let mut result = LayerBreakdown::default();
    let slices = timeline.slices.iter().filter(|s| {
        s.kind == SliceKind::Syscall && s.name == op && !s.unfinished && tasks.contains(&s.task)
    });
    for slice in slices {
        let (from, to) = (slice.start_ns, slice.end_ns);
        result.ops += 1;
        result.total_ns += to - from;
        let mut chain = vec![slice.task];
        let covered = index.split_task(slice.task, (from, to), "", &mut chain, &mut result);
        result.add(Layer::Other, "in no recorded wait", to - from - covered);
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
    assert_eq!(
        result.layers_sum(),
        result.total_ns,
        "the layers add up to the latency"
    );
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::perfetto::TraceTask;
    use crate::sim::timeline::{SlotsFull, TaskSlice, Timeline};

    fn request(
        id: u64,
        uid: u32,
        inserted: Nanos,
        (issued, on_device): (Nanos, Nanos),
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
            issued_ns: issued,
            device_start_ns: on_device,
            completed_ns: done,
        }
    }

    fn wait(
        task: u32,
        reason: WaitReason,
        blocker: Blocker,
        start_ns: Nanos,
        end_ns: Nanos,
    ) -> TaskWait {
        TaskWait {
            task: TaskId(task),
            reason,
            blocker,
            holder: None,
            start_ns,
            end_ns,
            unfinished: false,
        }
    }

    fn slice(task: u32, name: &str, start_ns: Nanos, end_ns: Nanos) -> TaskSlice {
        TaskSlice {
            task: TaskId(task),
            kind: SliceKind::Syscall,
            name: name.into(),
            start_ns,
            end_ns,
            unfinished: false,
        }
    }

    fn task(id: u32, name: &str, app: Option<&str>) -> TraceTask {
        TraceTask {
            id: TaskId(id),
            name: name.into(),
            app: app.map(String::from),
        }
    }

    #[test]
    fn a_wait_on_a_request_is_cut_at_its_life_and_c_fg_counts_bytes_issued_meanwhile() {
        let timeline = Timeline {
            waits: vec![
                wait(1, WaitReason::OnCpu, Blocker::None, 0, 10),
                // wait_on_page_writeback on R#1: 10..20 before the request is in the elevator
                // (page cache), 20..50 in the elevator, 50..85 on the device, 85..90 after.
                wait(1, WaitReason::PageWriteback, Blocker::Request(1), 10, 90),
                // A wait outside the operation is not counted.
                wait(1, WaitReason::BlockIo, Blocker::Request(2), 150, 160),
            ],
            slices: vec![slice(1, "fsync", 0, 100)],
            // The app's request (8 sectors), a background one of 24 sectors issued during the
            // fsync, and one issued after it.
            requests: vec![
                request(1, 10_000, 20, (50, 50), 85, 8),
                request(2, 10_001, 0, (120, 120), 200, 24),
                request(3, 10_001, 100, (120, 120), 200, 64),
            ],
            ..Timeline::default()
        };
        let run = RunTimeline {
            timeline,
            tasks: vec![task(1, "camera", Some("camera"))],
        };
        let layers = breakdown(&run, "camera", 10_000, "fsync");
        assert_eq!((layers.ops, layers.total_ns), (1, 100));
        assert_eq!(layers.cpu_ns, 10);
        assert_eq!(layers.page_cache_ns, 15);
        assert_eq!(layers.block_ns, 30);
        assert_eq!(layers.device_queue_ns, 0, "no slot wait recorded");
        assert_eq!(layers.device_ns, 35);
        assert_eq!(layers.other_ns, 10, "100 ns minus the 90 ns in waits");
        assert_eq!((layers.fg_io_bytes, layers.all_io_bytes), (4096, 16384));
        assert_eq!(layers.c_fg(), Some(0.25));
        // Another app's view: none of its operations.
        let none = breakdown(&run, "update", 10_001, "fsync");
        assert_eq!((none.ops, none.c_fg()), (0, None));
    }

    /// A Camera-like switch (3.10 `ext4_sync_file`) with every layer's wait set by a parameter:
    /// a page-cache lock held by a background task for `x` (its holder is in the device
    /// meanwhile: a lock is not followed), then `jbd2_log_wait_commit` on the commit thread,
    /// which waits on its journal write: plugged for `p`, in CFQ with a free slot for `y`, in
    /// CFQ with every device slot held for `q`, in the mmc driver's second slot for `m`, on the
    /// device for `z`; then the commit thread runs for `c` (fs) and the switch ends after `r`
    /// on a core. The split equals the parameters and adds up to the switch's latency.
    #[test]
    fn the_split_of_an_action_with_known_waits_equals_them_and_follows_the_commit() {
        let (x, p, y, q, m, z, c, r) = (7_000, 500, 11_000, 13_000, 1_700, 17_000, 2_300, 900);
        let commit_start = x;
        let rq_start = commit_start + 100;
        let inserted = rq_start + p;
        let issued = inserted + y + q;
        let on_device = issued + m;
        let done = on_device + z;
        let commit_end = done + c;
        let end = commit_end + r;
        let mut lock_wait = wait(1, WaitReason::PageAlloc, Blocker::Lock(4), 0, x);
        lock_wait.holder = Some(TaskId(3));
        let mut commit_wait = wait(
            1,
            WaitReason::JournalCommit,
            Blocker::Transaction(9),
            commit_start,
            commit_end,
        );
        commit_wait.holder = Some(TaskId(2));
        let mut journal_rq = request(5, 0, inserted, (issued, on_device), done, 8);
        journal_rq.start_ns = rq_start;
        let timeline = Timeline {
            waits: vec![
                lock_wait,
                commit_wait,
                wait(1, WaitReason::OnCpu, Blocker::None, commit_end, end),
                // The commit thread: on a core before its write, then waiting on it.
                wait(2, WaitReason::OnCpu, Blocker::None, commit_start, rq_start),
                wait(2, WaitReason::BlockIo, Blocker::Request(5), rq_start, done),
                // The lock's holder waits on the device meanwhile: not the waiter's time.
                wait(3, WaitReason::BlockIo, Blocker::Request(6), 0, x),
            ],
            slices: vec![slice(1, "fsync", 0, end)],
            requests: vec![journal_rq, request(6, 10_001, 0, (0, 0), x, 8)],
            slots_full: vec![
                // Held while the journal write waits in CFQ after `y`, and before it (cut).
                SlotsFull {
                    device: "179,0".into(),
                    start_ns: inserted + y,
                    end_ns: issued + 40,
                },
                SlotsFull {
                    device: "179,0".into(),
                    start_ns: 0,
                    end_ns: inserted,
                },
                // Another device's slots do not count.
                SlotsFull {
                    device: "179,32".into(),
                    start_ns: 0,
                    end_ns: end,
                },
            ],
            ..Timeline::default()
        };
        let run = RunTimeline {
            timeline,
            tasks: vec![
                task(1, "camera", Some("camera")),
                task(2, "jbd2/mmcblk0p1-8", None),
                task(3, "update", Some("update")),
            ],
        };
        let layers = breakdown(&run, "camera", 10_000, "fsync");
        assert_eq!(layers.page_cache_ns, x, "the lock hold");
        assert_eq!(layers.block_ns, p + y, "plugged, then CFQ's choice");
        assert_eq!(layers.device_queue_ns, q + m, "waiting for a device slot");
        assert_eq!(layers.device_ns, z);
        assert_eq!(layers.fs_ns, c, "the commit thread in no wait");
        assert_eq!(
            layers.cpu_ns,
            100 + r,
            "the commit thread's, then the switch's own"
        );
        assert_eq!(layers.other_ns, 0);
        assert_eq!(layers.total_ns, end);
        assert_eq!(layers.layers_sum(), end);
        let path = |p: &str, layer: Layer| layers.explained.get(&(p.to_string(), layer)).copied();
        assert_eq!(
            path(
                "jbd2_log_wait_commit > jbd2/mmcblk0p1-8: submit_bio_wait > in cfq, all device slots held",
                Layer::DeviceQueue
            ),
            Some(q)
        );
        assert_eq!(path("alloc_pages", Layer::PageCache), Some(x));
        assert_eq!(
            layers.top_paths(1)[0],
            (
                "jbd2_log_wait_commit > jbd2/mmcblk0p1-8: submit_bio_wait > on the device",
                Layer::Device,
                z
            )
        );
    }

    /// The same split of a real run: the block layer over a one-slot device serving each
    /// command in `z`. A background task takes a page-cache lock, starts a write and holds the
    /// lock for `x`; the foreground action waits for the lock (`x`, page cache), then reads:
    /// its read waits in the elevator while the write holds the device's one slot (`z - x`,
    /// device queue), then is served (`z`, device). The block layer records the slot wait.
    #[test]
    fn in_a_synthetic_run_the_split_equals_the_lock_hold_the_slot_wait_and_the_service() {
        use crate::block::elevator::noop::Noop;
        use crate::block::layer::BlockLayer;
        use crate::block::queue::{AllocModel, RequestQueue};
        use crate::block::request::test_support::bio;
        use crate::dev::fixed::FixedLatencyDevice;
        use crate::dev::IoOp;
        use crate::sim::sync::Mutex;
        use crate::sim::timeline::TimelineConfig;
        use crate::sim::Simulation;
        use crate::units::NS_PER_MS;
        use std::cell::Cell;
        use std::rc::Rc;

        let (x, z) = (3 * NS_PER_MS, 5 * NS_PER_MS);
        let sim = Simulation::new(1);
        let handle = sim.handle();
        handle.enable_timeline(TimelineConfig::without_counters());
        let queue = RequestQueue::new(
            Box::new(Noop::new()),
            Box::new(FixedLatencyDevice::new(1, z, 0)),
            AllocModel::Legacy { nr_requests: 8 },
        );
        let layer = BlockLayer::new(&handle, queue);
        let lock = Mutex::new(&handle, "page cache", WaitReason::PageAlloc);
        let (l, m, s) = (layer.clone(), lock.clone(), handle.clone());
        let background = sim.spawn("update", async move {
            let _guard = m.lock(&s).await;
            let _write = l.submit_bio(bio(1, IoOp::Write, 1 << 20, 8, 2)).await;
            s.sleep(x).await;
        });
        let (l, m, s) = (layer.clone(), lock.clone(), handle.clone());
        let fg_task = Rc::new(Cell::new(None));
        let fg = fg_task.clone();
        sim.spawn("camera", async move {
            let me = s.current_task().expect("a task");
            fg.set(Some(me));
            s.timeline_begin(me);
            drop(m.lock(&s).await);
            l.submit_bio_wait(bio(2, IoOp::Read, 0, 8, 1)).await;
            s.timeline_slice(me, SliceKind::Syscall, || "switch".into(), 0);
        });
        sim.run_until(u64::MAX, true).unwrap();
        let timeline = handle.take_timeline().expect("recorded");
        assert!(!timeline.slots_full.is_empty(), "the slot wait is recorded");
        let camera = fg_task.get().expect("ran");
        let run = RunTimeline {
            timeline,
            tasks: vec![
                TraceTask {
                    id: camera,
                    name: "camera".into(),
                    app: Some("camera".into()),
                },
                TraceTask {
                    id: background.task(),
                    name: "update".into(),
                    app: Some("update".into()),
                },
            ],
        };
        let layers = breakdown(&run, "camera", 0, "switch");
        assert_eq!(layers.ops, 1);
        assert_eq!(layers.total_ns, 2 * z);
        assert_eq!(layers.page_cache_ns, x, "{layers:?}");
        assert_eq!(layers.device_queue_ns, z - x, "{layers:?}");
        assert_eq!(layers.device_ns, z, "{layers:?}");
        assert_eq!(
            layers.block_ns + layers.fs_ns + layers.cpu_ns + layers.other_ns,
            0,
            "{layers:?}"
        );
    }
}
