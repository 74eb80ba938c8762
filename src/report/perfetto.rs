//! A run's timeline as a Perfetto trace (`mobistack run --perfetto FILE`): Perfetto's native
//! protobuf format (`perfetto.protos.Trace`, a sequence of `TracePacket`s carrying
//! `TrackDescriptor`s and `TrackEvent`s), which ui.perfetto.dev and `trace_processor` open.
//!
//! Tracks:
//! - a process per app, a thread per task of the app (kernel threads: the process `kernel`);
//!   on a task's track its system calls (and a kernel thread's jbd2 commits and flusher
//!   passes) are slices, and the waits under them child slices named by wait reason and
//!   blocker ("submit_bio_wait on request R#12"), with the blocker, the holder and whether the
//!   wait was still going on when the run ended as arguments;
//! - per device, `requests <dev> (<elevator>)` with one child track per lane: each completed
//!   request is a slice `R#<id> <RWBS> <sectors>` with its phases as children (`queued in
//!   <elevator>` from `get_request` to the driver, its time on a plug list included as the run's
//!   explanations count it, `in driver`, `on device`); a lane holds one request at a time, so
//!   the lanes show how many were in flight. A wait on a request and the request are linked by
//!   a flow arrow from the earlier of the two slices to the later (`flow_ids` on the earlier,
//!   `terminating_flow_ids` on the later);
//! - `foreground app`: which app was in the foreground, as slices;
//! - counters: dirty pages, writeback pages, free memory, elevator and device queue depths,
//!   throughput, sampled at the timeline's period.
//!
//! Messages and field numbers are those of Perfetto's protos (protos/perfetto/trace/
//! trace_packet.proto, track_event/track_event.proto, track_descriptor.proto,
//! process_descriptor.proto, thread_descriptor.proto, counter_descriptor.proto,
//! debug_annotation.proto), declared here with prost's derive for the few fields used.
//! Repeated scalars are declared unpacked, as in the `.proto` (proto2): trace_processor's
//! protozero decoder reads them as declared.
//!
//! Simplifications: pids and tids are made up (app `i`: pid 10000 + i; task `t`: tid
//! 20000 + t); request ids are per device queue, so with an external journal device a wait's
//! flow goes to the request of that id on the file system's device when both have one.

use crate::sim::timeline::{RequestLife, SliceKind, Timeline};
use crate::sim::{Blocker, TaskId};
use crate::units::Nanos;
use prost::Message;
use std::collections::BTreeMap;

/// A task of a traced run, with its app (none: a kernel thread or the engine's own task).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceTask {
    pub id: TaskId,
    pub name: String,
    pub app: Option<String>,
}

/// What `run --perfetto` keeps of a run: its timeline and its tasks.
#[derive(Debug, Clone, PartialEq)]
pub struct RunTimeline {
    pub timeline: Timeline,
    pub tasks: Vec<TraceTask>,
}

/// `perfetto.protos.Trace`.
#[derive(Clone, PartialEq, Message)]
pub struct Trace {
    #[prost(message, repeated, tag = "1")]
    pub packet: Vec<TracePacket>,
}

/// `perfetto.protos.TracePacket` (the fields used).
#[derive(Clone, PartialEq, Message)]
pub struct TracePacket {
    #[prost(uint64, optional, tag = "8")]
    pub timestamp: Option<u64>,
    #[prost(uint32, optional, tag = "10")]
    pub trusted_packet_sequence_id: Option<u32>,
    #[prost(message, optional, tag = "11")]
    pub track_event: Option<TrackEvent>,
    /// `SEQ_INCREMENTAL_STATE_CLEARED` = 1 on the first packet.
    #[prost(uint32, optional, tag = "13")]
    pub sequence_flags: Option<u32>,
    #[prost(message, optional, tag = "60")]
    pub track_descriptor: Option<TrackDescriptor>,
}

/// `perfetto.protos.TrackDescriptor`.
#[derive(Clone, PartialEq, Message)]
pub struct TrackDescriptor {
    #[prost(uint64, optional, tag = "1")]
    pub uuid: Option<u64>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    #[prost(message, optional, tag = "3")]
    pub process: Option<ProcessDescriptor>,
    #[prost(message, optional, tag = "4")]
    pub thread: Option<ThreadDescriptor>,
    #[prost(uint64, optional, tag = "5")]
    pub parent_uuid: Option<u64>,
    #[prost(message, optional, tag = "8")]
    pub counter: Option<CounterDescriptor>,
    /// `ChildTracksOrdering`: 3 = EXPLICIT (by `sibling_order_rank`).
    #[prost(int32, optional, tag = "11")]
    pub child_ordering: Option<i32>,
    #[prost(int32, optional, tag = "12")]
    pub sibling_order_rank: Option<i32>,
}

/// `perfetto.protos.ProcessDescriptor`.
#[derive(Clone, PartialEq, Message)]
pub struct ProcessDescriptor {
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    #[prost(string, optional, tag = "6")]
    pub process_name: Option<String>,
}

/// `perfetto.protos.ThreadDescriptor`.
#[derive(Clone, PartialEq, Message)]
pub struct ThreadDescriptor {
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    #[prost(int32, optional, tag = "2")]
    pub tid: Option<i32>,
    #[prost(string, optional, tag = "5")]
    pub thread_name: Option<String>,
}

/// `perfetto.protos.CounterDescriptor`.
#[derive(Clone, PartialEq, Message)]
pub struct CounterDescriptor {
    /// `Unit`: 2 = UNIT_COUNT, 3 = UNIT_SIZE_BYTES.
    #[prost(int32, optional, tag = "3")]
    pub unit: Option<i32>,
    #[prost(string, optional, tag = "6")]
    pub unit_name: Option<String>,
}

/// `perfetto.protos.TrackEvent`.
#[derive(Clone, PartialEq, Message)]
pub struct TrackEvent {
    #[prost(message, repeated, tag = "4")]
    pub debug_annotations: Vec<DebugAnnotation>,
    /// `Type`: 1 = SLICE_BEGIN, 2 = SLICE_END, 3 = INSTANT, 4 = COUNTER.
    #[prost(int32, optional, tag = "9")]
    pub r#type: Option<i32>,
    #[prost(uint64, optional, tag = "11")]
    pub track_uuid: Option<u64>,
    #[prost(string, repeated, tag = "22")]
    pub categories: Vec<String>,
    #[prost(string, optional, tag = "23")]
    pub name: Option<String>,
    #[prost(double, optional, tag = "44")]
    pub double_counter_value: Option<f64>,
    #[prost(fixed64, repeated, packed = "false", tag = "47")]
    pub flow_ids: Vec<u64>,
    #[prost(fixed64, repeated, packed = "false", tag = "48")]
    pub terminating_flow_ids: Vec<u64>,
}

/// `perfetto.protos.DebugAnnotation` (name and a scalar value).
#[derive(Clone, PartialEq, Message)]
pub struct DebugAnnotation {
    #[prost(bool, optional, tag = "2")]
    pub bool_value: Option<bool>,
    #[prost(uint64, optional, tag = "3")]
    pub uint_value: Option<u64>,
    #[prost(double, optional, tag = "5")]
    pub double_value: Option<f64>,
    #[prost(string, optional, tag = "6")]
    pub string_value: Option<String>,
    #[prost(string, optional, tag = "10")]
    pub name: Option<String>,
}

pub const TYPE_SLICE_BEGIN: i32 = 1;
pub const TYPE_SLICE_END: i32 = 2;
pub const TYPE_COUNTER: i32 = 4;
const SEQ_INCREMENTAL_STATE_CLEARED: u32 = 1;
const SEQUENCE_ID: u32 = 1;
const CHILD_ORDERING_EXPLICIT: i32 = 3;
const UNIT_COUNT: i32 = 2;

// Track uuids, by range.
const FOREGROUND_TRACK: u64 = 10;
const COUNTER_TRACKS: u64 = 100;
const PROCESS_TRACKS: u64 = 1_000;
const DEVICE_TRACKS: u64 = 5_000;
const THREAD_TRACKS: u64 = 1 << 32;
const LANE_TRACKS: u64 = 2 << 32;
const KERNEL_PID: i32 = 2;
const APP_PID_BASE: i32 = 10_000;
const TID_BASE: i32 = 20_000;

fn annotation_str(name: &str, value: impl Into<String>) -> DebugAnnotation {
    DebugAnnotation {
        name: Some(name.to_string()),
        string_value: Some(value.into()),
        ..DebugAnnotation::default()
    }
}

fn annotation_u64(name: &str, value: u64) -> DebugAnnotation {
    DebugAnnotation {
        name: Some(name.to_string()),
        uint_value: Some(value),
        ..DebugAnnotation::default()
    }
}

fn annotation_ms(name: &str, nanos: Nanos) -> DebugAnnotation {
    DebugAnnotation {
        name: Some(name.to_string()),
        double_value: Some(nanos as f64 / 1e6),
        ..DebugAnnotation::default()
    }
}

fn annotation_bool(name: &str, value: bool) -> DebugAnnotation {
    DebugAnnotation {
        name: Some(name.to_string()),
        bool_value: Some(value),
        ..DebugAnnotation::default()
    }
}

/// A slice to be written on one track.
struct Slice {
    start_ns: Nanos,
    end_ns: Nanos,
    /// Among slices of equal extent, the lower rank is the parent.
    rank: u8,
    name: String,
    category: &'static str,
    args: Vec<DebugAnnotation>,
    /// Flows that start (or continue) here, and flows that end here: a flow goes from the
    /// earlier of its two slices to the later.
    flows: Vec<u64>,
    terminating_flows: Vec<u64>,
}

/// One begin, end or counter event, before it becomes a packet.
struct Event {
    ts: Nanos,
    /// Writing order within a track (events of one track are emitted in nesting order).
    order: u64,
    event: TrackEvent,
}

/// Turns one track's slices into properly nested begin/end events: sorted by start, longest
/// first; a slice that would cross its parent's end is cut at it.
fn nest(track: u64, mut slices: Vec<Slice>, events: &mut Vec<Event>, order: &mut u64) {
    slices.sort_by(|a, b| {
        (a.start_ns, std::cmp::Reverse(a.end_ns), a.rank).cmp(&(
            b.start_ns,
            std::cmp::Reverse(b.end_ns),
            b.rank,
        ))
    });
    let mut open: Vec<Nanos> = Vec::new();
    let end = |ts: Nanos, events: &mut Vec<Event>, order: &mut u64| {
        *order += 1;
        events.push(Event {
            ts,
            order: *order,
            event: TrackEvent {
                r#type: Some(TYPE_SLICE_END),
                track_uuid: Some(track),
                ..TrackEvent::default()
            },
        });
    };
    for slice in slices {
        while let Some(&top) = open.last() {
            if top > slice.start_ns {
                break;
            }
            open.pop();
            end(top, events, order);
        }
        let end_ns = open
            .last()
            .map_or(slice.end_ns, |&top| slice.end_ns.min(top));
        *order += 1;
        events.push(Event {
            ts: slice.start_ns,
            order: *order,
            event: TrackEvent {
                r#type: Some(TYPE_SLICE_BEGIN),
                track_uuid: Some(track),
                categories: vec![slice.category.to_string()],
                name: Some(slice.name),
                debug_annotations: slice.args,
                flow_ids: slice.flows,
                terminating_flow_ids: slice.terminating_flows,
                ..TrackEvent::default()
            },
        });
        open.push(end_ns);
    }
    while let Some(top) = open.pop() {
        end(top, events, order);
    }
}

/// Assigns each request a lane: the lowest whose previous request completed by its start.
fn lanes(requests: &[&RequestLife]) -> Vec<usize> {
    let mut lane_free_at: Vec<Nanos> = Vec::new();
    requests
        .iter()
        .map(
            |rq| match lane_free_at.iter().position(|&t| t <= rq.start_ns) {
                Some(lane) => {
                    lane_free_at[lane] = rq.completed_ns;
                    lane
                }
                None => {
                    lane_free_at.push(rq.completed_ns);
                    lane_free_at.len() - 1
                }
            },
        )
        .collect()
}

/// The trace of one run, encoded.
pub fn encode(run: &RunTimeline) -> Vec<u8> {
    build(run).encode_to_vec()
}

/// The trace of one run.
pub fn build(run: &RunTimeline) -> Trace {
    let timeline = &run.timeline;
    let mut descriptors: Vec<TrackDescriptor> = Vec::new();
    let mut events: Vec<Event> = Vec::new();
    let mut order = 0u64;
    let trace_end = timeline
        .waits
        .iter()
        .map(|w| w.end_ns)
        .chain(timeline.slices.iter().map(|s| s.end_ns))
        .chain(timeline.requests.iter().map(|r| r.completed_ns))
        .chain(timeline.counters.iter().map(|c| c.at_ns))
        .max()
        .unwrap_or(0)
        .min(timeline.window.1);

    // Processes: one per app in the order the tasks were spawned, then the kernel's.
    let mut app_pids: BTreeMap<&str, i32> = BTreeMap::new();
    for task in &run.tasks {
        if let Some(app) = &task.app {
            let next = APP_PID_BASE + app_pids.len() as i32;
            app_pids.entry(app.as_str()).or_insert(next);
        }
    }
    let mut processes: Vec<(i32, String)> = app_pids
        .iter()
        .map(|(app, pid)| (*pid, app.to_string()))
        .collect();
    processes.sort();
    processes.push((KERNEL_PID, "kernel".to_string()));
    for (pid, name) in &processes {
        descriptors.push(TrackDescriptor {
            uuid: Some(PROCESS_TRACKS + *pid as u64),
            process: Some(ProcessDescriptor {
                pid: Some(*pid),
                process_name: Some(name.clone()),
            }),
            ..TrackDescriptor::default()
        });
    }

    // The requests, in order of start; a wait on one gets a flow to it.
    let mut requests: Vec<&RequestLife> = timeline.requests.iter().collect();
    requests.sort_by_key(|r| (r.start_ns, r.id));
    let mut request_index: BTreeMap<u64, usize> = BTreeMap::new();
    for (index, request) in requests.iter().enumerate() {
        request_index.entry(request.id).or_insert(index);
    }
    // Per request: (flow, whether the flow ends at the request).
    let mut request_flows: Vec<Vec<(u64, bool)>> = vec![Vec::new(); requests.len()];

    // Threads: the tasks that did something recorded.
    let mut by_task: BTreeMap<TaskId, Vec<Slice>> = BTreeMap::new();
    for slice in &timeline.slices {
        let mut args = Vec::new();
        if slice.unfinished {
            args.push(annotation_bool("unfinished", true));
        }
        by_task.entry(slice.task).or_default().push(Slice {
            start_ns: slice.start_ns,
            end_ns: slice.end_ns,
            rank: 0,
            name: slice.name.clone(),
            category: match slice.kind {
                SliceKind::Syscall => "syscall",
                SliceKind::Kernel => "kernel",
            },
            args,
            flows: Vec::new(),
            terminating_flows: Vec::new(),
        });
    }
    let task_name = |id: TaskId| {
        run.tasks
            .get(id.0 as usize)
            .map_or_else(|| id.to_string(), |t| t.name.clone())
    };
    for (index, wait) in timeline.waits.iter().enumerate() {
        let mut args = vec![
            annotation_str("reason", wait.reason.name()),
            annotation_str("layer", wait.reason.layer()),
            annotation_str("blocker", wait.blocker.to_string()),
        ];
        if let Some(holder) = wait.holder {
            args.push(annotation_str("held_by", task_name(holder)));
        }
        if wait.unfinished {
            args.push(annotation_bool("unfinished", true));
        }
        let (mut flows, mut terminating_flows) = (Vec::new(), Vec::new());
        if let Blocker::Request(id) = wait.blocker {
            args.push(annotation_u64("request", id));
            if let Some(&request) = request_index.get(&id) {
                let flow = index as u64 + 1;
                // The arrow goes from the earlier slice to the later one.
                let ends_at_request = requests[request].start_ns > wait.start_ns;
                if ends_at_request {
                    flows.push(flow);
                } else {
                    terminating_flows.push(flow);
                }
                request_flows[request].push((flow, ends_at_request));
            }
        }
        let name = match wait.blocker {
            Blocker::None => wait.reason.name().to_string(),
            blocker => format!("{} on {blocker}", wait.reason.name()),
        };
        by_task.entry(wait.task).or_default().push(Slice {
            start_ns: wait.start_ns,
            end_ns: wait.end_ns,
            rank: 1,
            name,
            category: "wait",
            args,
            flows,
            terminating_flows,
        });
    }
    for (task, slices) in by_task {
        let info = run.tasks.get(task.0 as usize);
        let pid = info
            .and_then(|t| t.app.as_deref())
            .and_then(|app| app_pids.get(app).copied())
            .unwrap_or(KERNEL_PID);
        let uuid = THREAD_TRACKS + u64::from(task.0);
        descriptors.push(TrackDescriptor {
            uuid: Some(uuid),
            thread: Some(ThreadDescriptor {
                pid: Some(pid),
                tid: Some(TID_BASE + task.0 as i32),
                thread_name: Some(task_name(task)),
            }),
            ..TrackDescriptor::default()
        });
        nest(uuid, slices, &mut events, &mut order);
    }

    // Requests: a parent track per device, a child track per lane.
    let mut devices: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (index, request) in requests.iter().enumerate() {
        devices
            .entry(request.device.as_str())
            .or_default()
            .push(index);
    }
    for (device_index, (device, indexes)) in devices.iter().enumerate() {
        let device_uuid = DEVICE_TRACKS + device_index as u64;
        let elevator = requests[indexes[0]].elevator;
        descriptors.push(TrackDescriptor {
            uuid: Some(device_uuid),
            name: Some(format!("requests {device} ({elevator})")),
            child_ordering: Some(CHILD_ORDERING_EXPLICIT),
            ..TrackDescriptor::default()
        });
        let device_requests: Vec<&RequestLife> = indexes.iter().map(|&i| requests[i]).collect();
        let lane_of = lanes(&device_requests);
        let lane_count = lane_of.iter().max().map_or(0, |m| m + 1);
        let mut per_lane: Vec<Vec<Slice>> = (0..lane_count).map(|_| Vec::new()).collect();
        for ((&index, request), &lane) in indexes.iter().zip(&device_requests).zip(&lane_of) {
            per_lane[lane].extend(request_slices(request, &request_flows[index]));
        }
        for (lane, slices) in per_lane.into_iter().enumerate() {
            let uuid = LANE_TRACKS + ((device_index as u64) << 24) + lane as u64;
            descriptors.push(TrackDescriptor {
                uuid: Some(uuid),
                name: Some(format!("{device} lane {lane}")),
                parent_uuid: Some(device_uuid),
                sibling_order_rank: Some(lane as i32),
                ..TrackDescriptor::default()
            });
            nest(uuid, slices, &mut events, &mut order);
        }
    }

    // The foreground app.
    if !timeline.foreground.is_empty() {
        descriptors.push(TrackDescriptor {
            uuid: Some(FOREGROUND_TRACK),
            name: Some("foreground app".to_string()),
            ..TrackDescriptor::default()
        });
        let mut slices = Vec::new();
        for (i, (at, app)) in timeline.foreground.iter().enumerate() {
            let until = timeline
                .foreground
                .get(i + 1)
                .map_or(trace_end, |(next, _)| *next)
                .max(*at);
            slices.push(Slice {
                start_ns: *at,
                end_ns: until,
                rank: 0,
                name: app.clone(),
                category: "foreground",
                args: Vec::new(),
                flows: Vec::new(),
                terminating_flows: Vec::new(),
            });
        }
        nest(FOREGROUND_TRACK, slices, &mut events, &mut order);
    }

    // Counters, in order of first appearance.
    let mut counter_tracks: Vec<&'static str> = Vec::new();
    for sample in &timeline.counters {
        let index = match counter_tracks.iter().position(|&n| n == sample.name) {
            Some(index) => index,
            None => {
                counter_tracks.push(sample.name);
                descriptors.push(TrackDescriptor {
                    uuid: Some(COUNTER_TRACKS + counter_tracks.len() as u64 - 1),
                    name: Some(sample.name.to_string()),
                    counter: Some(CounterDescriptor {
                        unit: Some(UNIT_COUNT),
                        unit_name: None,
                    }),
                    ..TrackDescriptor::default()
                });
                counter_tracks.len() - 1
            }
        };
        order += 1;
        events.push(Event {
            ts: sample.at_ns,
            order,
            event: TrackEvent {
                r#type: Some(TYPE_COUNTER),
                track_uuid: Some(COUNTER_TRACKS + index as u64),
                double_counter_value: Some(sample.value),
                ..TrackEvent::default()
            },
        });
    }

    // Descriptors first, then the events in time order (each track's own order kept).
    events.sort_by_key(|e| (e.ts, e.order));
    let mut packets = Vec::with_capacity(descriptors.len() + events.len());
    for descriptor in descriptors {
        packets.push(TracePacket {
            timestamp: Some(0),
            trusted_packet_sequence_id: Some(SEQUENCE_ID),
            sequence_flags: packets.is_empty().then_some(SEQ_INCREMENTAL_STATE_CLEARED),
            track_descriptor: Some(descriptor),
            ..TracePacket::default()
        });
    }
    for event in events {
        packets.push(TracePacket {
            timestamp: Some(event.ts),
            trusted_packet_sequence_id: Some(SEQUENCE_ID),
            track_event: Some(event.event),
            ..TracePacket::default()
        });
    }
    Trace { packet: packets }
}

/// A request's slice and its phases.
fn request_slices(rq: &RequestLife, flows: &[(u64, bool)]) -> Vec<Slice> {
    let mut slices = vec![Slice {
        start_ns: rq.start_ns,
        end_ns: rq.completed_ns,
        rank: 0,
        name: format!("R#{} {} {}", rq.id, rq.rwbs, rq.nr_sectors),
        category: "request",
        args: vec![
            annotation_u64("request", rq.id),
            annotation_str("rwbs", rq.rwbs.clone()),
            annotation_u64("sector", rq.sector),
            annotation_u64("sectors", u64::from(rq.nr_sectors)),
            annotation_str("task", format!("{}[{}]", rq.comm, rq.pid)),
            annotation_bool("async_writeback", rq.issued_async),
            annotation_ms("queued_ms", rq.issued_ns.saturating_sub(rq.start_ns)),
            annotation_ms("plugged_ms", rq.inserted_ns.saturating_sub(rq.start_ns)),
            annotation_ms(
                "in_driver_ms",
                rq.device_start_ns.saturating_sub(rq.issued_ns),
            ),
            annotation_ms(
                "on_device_ms",
                rq.completed_ns.saturating_sub(rq.device_start_ns),
            ),
        ],
        flows: flows
            .iter()
            .filter(|(_, ends)| !ends)
            .map(|(flow, _)| *flow)
            .collect(),
        terminating_flows: flows
            .iter()
            .filter(|(_, ends)| *ends)
            .map(|(flow, _)| *flow)
            .collect(),
    }];
    // Queued: from `get_request` to the driver, plug list included, as the run's explanations
    // count it ("94.1 ms queued in cfq").
    let phases = [
        (
            format!("queued in {}", rq.elevator),
            rq.start_ns,
            rq.issued_ns,
        ),
        ("in driver".to_string(), rq.issued_ns, rq.device_start_ns),
        ("on device".to_string(), rq.device_start_ns, rq.completed_ns),
    ];
    for (name, start_ns, end_ns) in phases {
        if end_ns > start_ns {
            slices.push(Slice {
                start_ns,
                end_ns,
                rank: 1,
                name,
                category: "request",
                args: Vec::new(),
                flows: Vec::new(),
                terminating_flows: Vec::new(),
            });
        }
    }
    slices
}

/// What `run --perfetto` prints about a trace it wrote, with the bound's message when records
/// were dropped.
pub fn summary(run: &RunTimeline, path: &str, bytes: usize) -> String {
    let timeline = &run.timeline;
    let mut text = format!(
        "perfetto: {path}: {} system calls and kernel slices, {} waits, {} requests, {} counter samples ({} bytes; open in ui.perfetto.dev or trace_processor)",
        timeline.slices.len(),
        timeline.waits.len(),
        timeline.requests.len(),
        timeline.counters.len(),
        bytes
    );
    if timeline.dropped > 0 {
        text.push_str(&format!(
            "\nperfetto: {path}: the bound of {} records was reached: {} later records were dropped (raise --perfetto-max-events or narrow --perfetto-window)",
            timeline.waits.len()
                + timeline.slices.len()
                + timeline.requests.len()
                + timeline.slots_full.len()
                + timeline.counters.len()
                + timeline.foreground.len(),
            timeline.dropped
        ));
    }
    text
}

/// Decodes a trace (for tests and tools).
pub fn decode(bytes: &[u8]) -> Result<Trace, prost::DecodeError> {
    Trace::decode(bytes)
}
