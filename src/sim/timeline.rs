//! A run's timeline: what each task did and waited for, when, for the Perfetto trace of
//! `mobistack run --perfetto` (issue 19).
//!
//! Off by default (no cost but a branch): [`Sim::enable_timeline`](super::Sim::enable_timeline)
//! turns it on. It keeps what the engine and the layers already know, at the moment they know
//! it, rather than a second bookkeeping:
//! - every wait that ends (the record [`Sim::wake`](super::Sim::wake) makes for the blocked-time
//!   account and the operations' wait logs), and at the end of the run the waits still going on;
//! - named slices of a task: the system calls the results recorder times (`OpTimer`), the jbd2
//!   commits of `kjournald2`, the flusher's `wb_writeback` passes;
//! - each completed block request's life (allocated, inserted into the elevator, issued to the
//!   driver, on the device, completed), from the block layer's completion path;
//! - the intervals in which a device's driver could take no request (every command slot held),
//!   so that a request's time in the elevator splits into the elevator's choice and the wait
//!   for a device slot ([`SlotsFull`]);
//! - counters sampled at a fixed period between events (dirty, writeback and free pages, queue
//!   depths, bytes completed), read without scheduling anything, so a traced run processes the
//!   same events as an untraced one;
//! - foreground switches.
//!
//! Bounds: records that end before the window's start or begin after its end are left out, and
//! past `max_records` further records are counted in `dropped`, not kept (the CLI says so).
//!
//! Simplifications: back-to-back waits of one task with the same reason and blocker (a run of
//! CPU segments, one per page copied) are merged into one record, as the operations' wait logs
//! merge them, but never across the boundary of a slice; voluntary sleeps (think time, a
//! daemon's timer) are not recorded: they are the absence of activity.

use super::wait::{Blocker, TaskId, WaitReason};
use crate::units::Nanos;
use std::collections::BTreeMap;

/// What to record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimelineConfig {
    /// Records that overlap `[start_ns, end_ns]` are kept.
    pub start_ns: Nanos,
    pub end_ns: Nanos,
    /// Bound on records kept (waits, slices, requests, counter samples, foreground switches).
    pub max_records: usize,
    /// Period of the counter samples; 0: none.
    pub counter_period_ns: Nanos,
}

/// Default bound on records: a trace of about 100 MB at most.
pub const DEFAULT_MAX_RECORDS: usize = 1_000_000;
/// Default counter period: 10 ms, a hundred samples per second of virtual time (the kernel's
/// `dirty_writeback_interval` is 5 s and `HZ` 100-300, so state changes visibly at this grain).
pub const DEFAULT_COUNTER_PERIOD_NS: Nanos = 10_000_000;

impl Default for TimelineConfig {
    fn default() -> Self {
        TimelineConfig {
            start_ns: 0,
            end_ns: Nanos::MAX,
            max_records: DEFAULT_MAX_RECORDS,
            counter_period_ns: DEFAULT_COUNTER_PERIOD_NS,
        }
    }
}

impl TimelineConfig {
    /// The whole run's waits, slices and requests without counter samples: what an analysis of
    /// waits (the per-layer breakdown, a check of the requests waited on) reads.
    pub fn without_counters() -> Self {
        TimelineConfig {
            counter_period_ns: 0,
            ..TimelineConfig::default()
        }
    }
}

/// One wait of one task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskWait {
    pub task: TaskId,
    pub reason: WaitReason,
    pub blocker: Blocker,
    pub holder: Option<TaskId>,
    pub start_ns: Nanos,
    pub end_ns: Nanos,
    /// Still going on when the run ended (`end_ns` is the end of the run).
    pub unfinished: bool,
}

/// What a named slice of a task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SliceKind {
    /// A system call of an app, timed by the results recorder.
    Syscall,
    /// A kernel thread's unit of work (a jbd2 commit, a flusher pass).
    Kernel,
}

/// A named slice of a task's time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskSlice {
    pub task: TaskId,
    pub kind: SliceKind,
    pub name: String,
    pub start_ns: Nanos,
    pub end_ns: Nanos,
    /// Still in progress when the run ended.
    pub unfinished: bool,
}

/// One block request's life, as the block layer saw it complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestLife {
    pub id: u64,
    /// The device, as blktrace names it ("179,0").
    pub device: String,
    /// The elevator it was queued in.
    pub elevator: &'static str,
    /// blkparse's RWBS ("WS", "RM", ...).
    pub rwbs: String,
    pub sector: u64,
    pub nr_sectors: u32,
    /// The allocating task's `comm` and pid.
    pub comm: String,
    pub pid: u32,
    /// The allocating task's app (uid), and the uid owning the pages it carries (the app whose
    /// dirty pages the flusher writes back; the allocating task's otherwise).
    pub uid: u32,
    pub owner_uid: u32,
    /// Issued on behalf of others (writeback).
    pub issued_async: bool,
    /// `get_request`: allocated (its first bio queued).
    pub start_ns: Nanos,
    /// Inserted into the elevator (after its plug was flushed).
    pub inserted_ns: Nanos,
    /// Taken by the driver.
    pub issued_ns: Nanos,
    /// On the device (later than `issued_ns` for a request the mmc driver prepared ahead).
    pub device_start_ns: Nanos,
    pub completed_ns: Nanos,
}

/// An interval in which a device's driver could take no request from the elevator: every
/// command slot of the device was held (SCSI/UFS `scsi_request_fn` and blk-mq stop at
/// `queue_depth` commands; 3.10's mmc driver, `mmc_queue_thread`, at its two: one on the card,
/// one fetched and prepared). A request waiting in the elevator meanwhile waits for a device
/// slot, not for the elevator's choice. Recorded when the state ends (an interval still open
/// at the end of the run is not kept).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotsFull {
    /// The device, as blktrace names it ("179,0").
    pub device: String,
    pub start_ns: Nanos,
    pub end_ns: Nanos,
}

/// A counter's value at an instant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CounterSample {
    pub name: &'static str,
    pub at_ns: Nanos,
    pub value: f64,
}

/// The recorded timeline of one run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timeline {
    pub waits: Vec<TaskWait>,
    pub slices: Vec<TaskSlice>,
    pub requests: Vec<RequestLife>,
    /// When each device's slots were all held, per device in time order.
    pub slots_full: Vec<SlotsFull>,
    pub counters: Vec<CounterSample>,
    /// (when, app name): the foreground app from then on.
    pub foreground: Vec<(Nanos, String)>,
    /// Records not kept: past the bound.
    pub dropped: u64,
    /// The window recorded, `[start, end]` in ns.
    pub window: (Nanos, Nanos),
}

/// The recording state inside the engine.
#[derive(Debug)]
pub(crate) struct TimelineRecorder {
    pub config: TimelineConfig,
    pub timeline: Timeline,
    kept: usize,
    /// Per task: the index of its last wait record, while the next wait may extend it.
    mergeable: BTreeMap<TaskId, usize>,
}

impl TimelineRecorder {
    pub fn new(config: TimelineConfig) -> Self {
        assert!(config.start_ns <= config.end_ns, "an empty timeline window");
        TimelineRecorder {
            config,
            timeline: Timeline {
                window: (config.start_ns, config.end_ns),
                ..Timeline::default()
            },
            kept: 0,
            mergeable: BTreeMap::new(),
        }
    }

    fn in_window(&self, start_ns: Nanos, end_ns: Nanos) -> bool {
        end_ns >= self.config.start_ns && start_ns <= self.config.end_ns
    }

    /// Counts a record against the bound; false when it must be dropped.
    fn admit(&mut self) -> bool {
        if self.kept >= self.config.max_records {
            self.timeline.dropped += 1;
            return false;
        }
        self.kept += 1;
        true
    }

    pub fn wait(&mut self, wait: TaskWait) {
        if wait.reason.is_voluntary() || !self.in_window(wait.start_ns, wait.end_ns) {
            return;
        }
        if let Some(&index) = self.mergeable.get(&wait.task) {
            let last = &mut self.timeline.waits[index];
            if last.end_ns == wait.start_ns
                && last.reason == wait.reason
                && last.blocker == wait.blocker
                && last.holder == wait.holder
            {
                last.end_ns = wait.end_ns;
                last.unfinished = wait.unfinished;
                return;
            }
        }
        if !self.admit() {
            return;
        }
        self.mergeable.insert(wait.task, self.timeline.waits.len());
        self.timeline.waits.push(wait);
    }

    /// A slice boundary of `task`: its next wait starts a record of its own.
    pub fn boundary(&mut self, task: TaskId) {
        self.mergeable.remove(&task);
    }

    pub fn slice(&mut self, slice: TaskSlice) {
        self.boundary(slice.task);
        if self.in_window(slice.start_ns, slice.end_ns) && self.admit() {
            self.timeline.slices.push(slice);
        }
    }

    pub fn request(&mut self, request: RequestLife) {
        if self.in_window(request.start_ns, request.completed_ns) && self.admit() {
            self.timeline.requests.push(request);
        }
    }

    pub fn slots_full(&mut self, interval: SlotsFull) {
        if self.in_window(interval.start_ns, interval.end_ns) && self.admit() {
            self.timeline.slots_full.push(interval);
        }
    }

    pub fn counter(&mut self, sample: CounterSample) {
        if self.in_window(sample.at_ns, sample.at_ns) && self.admit() {
            self.timeline.counters.push(sample);
        }
    }

    pub fn foreground(&mut self, at_ns: Nanos, app: &str) {
        // The app in the foreground when the window opens is kept whenever it switched.
        if at_ns <= self.config.end_ns && self.admit() {
            self.timeline.foreground.push((at_ns, app.to_string()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait(task: u32, reason: WaitReason, start_ns: Nanos, end_ns: Nanos) -> TaskWait {
        TaskWait {
            task: TaskId(task),
            reason,
            blocker: Blocker::None,
            holder: None,
            start_ns,
            end_ns,
            unfinished: false,
        }
    }

    #[test]
    fn contiguous_waits_merge_but_not_across_a_slice_boundary() {
        let mut recorder = TimelineRecorder::new(TimelineConfig::default());
        recorder.wait(wait(1, WaitReason::OnCpu, 0, 10));
        recorder.wait(wait(1, WaitReason::OnCpu, 10, 20));
        assert_eq!(recorder.timeline.waits.len(), 1);
        assert_eq!(recorder.timeline.waits[0].end_ns, 20);
        recorder.boundary(TaskId(1));
        recorder.wait(wait(1, WaitReason::OnCpu, 20, 30));
        assert_eq!(recorder.timeline.waits.len(), 2, "a boundary stops merging");
        // Another task's wait does not extend this one.
        recorder.wait(wait(2, WaitReason::OnCpu, 30, 40));
        recorder.wait(wait(1, WaitReason::OnCpu, 30, 40));
        assert_eq!(recorder.timeline.waits.len(), 3);
        assert_eq!(recorder.timeline.waits[1].end_ns, 40);
        recorder.wait(wait(1, WaitReason::Sleep, 40, 90));
        assert_eq!(recorder.timeline.waits.len(), 3, "sleeps are not recorded");
    }

    #[test]
    fn the_window_and_the_bound_leave_records_out() {
        let mut recorder = TimelineRecorder::new(TimelineConfig {
            start_ns: 100,
            end_ns: 200,
            max_records: 2,
            counter_period_ns: 30,
        });
        recorder.wait(wait(1, WaitReason::BlockIo, 0, 99));
        recorder.wait(wait(1, WaitReason::BlockIo, 201, 300));
        assert!(recorder.timeline.waits.is_empty(), "outside the window");
        recorder.wait(wait(1, WaitReason::BlockIo, 50, 150));
        recorder.wait(wait(2, WaitReason::BlockIo, 150, 250));
        recorder.wait(wait(3, WaitReason::BlockIo, 160, 170));
        assert_eq!(recorder.timeline.waits.len(), 2);
        assert_eq!(recorder.timeline.dropped, 1, "past the bound");
    }
}
