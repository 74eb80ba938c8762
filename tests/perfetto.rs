//! `run --perfetto`: the trace of a small page-cache scenario decodes as Perfetto's protobuf
//! format and has the tracks, nested slices, flows and counters the run recorded, in agreement
//! with the run's own results (its operation counts, its slowest read's explanation).

use mobistack::report::perfetto::{self, Trace, TrackEvent, TYPE_SLICE_BEGIN, TYPE_SLICE_END};
use mobistack::run::run_one_traced;
use mobistack::sim::timeline::TimelineConfig;
use mobistack::units::NS_PER_MS;
use std::collections::BTreeMap;

/// bg-write-fg-read, shortened: 4 s, a 256 MiB background write, cfq.
fn scenario() -> mobistack::scenario::Scenario {
    let source = mobistack::scenario::builtin::find("bg-write-fg-read")
        .unwrap()
        .source
        .replace("duration = \"20s\"", "duration = \"4s\"")
        .replace("size = \"1GiB\"", "size = \"256MiB\"");
    let mut scenario = mobistack::scenario::parse("small.toml", &source).unwrap();
    scenario.select_variant("cfq").unwrap();
    scenario
}

fn run(config: Option<TimelineConfig>) -> mobistack::report::RunResult {
    let scenario = scenario();
    run_one_traced(&scenario, &scenario.variants[0], 1, false, config, |_| {}).unwrap()
}

/// A decoded trace, indexed.
struct Decoded {
    trace: Trace,
    /// Track uuid -> (name, its process's name for a thread track).
    tracks: BTreeMap<u64, (String, Option<String>)>,
}

impl Decoded {
    fn new(bytes: &[u8]) -> Decoded {
        let trace = perfetto::decode(bytes).expect("the trace decodes");
        let mut processes = BTreeMap::new();
        for packet in &trace.packet {
            if let Some(process) = packet
                .track_descriptor
                .as_ref()
                .and_then(|d| d.process.as_ref())
            {
                processes.insert(process.pid.unwrap(), process.process_name.clone().unwrap());
            }
        }
        let mut tracks = BTreeMap::new();
        for packet in &trace.packet {
            let Some(descriptor) = &packet.track_descriptor else {
                continue;
            };
            let (name, process) = match (&descriptor.thread, &descriptor.process) {
                (Some(thread), _) => (
                    thread.thread_name.clone().unwrap(),
                    processes.get(&thread.pid.unwrap()).cloned(),
                ),
                (None, Some(process)) => (process.process_name.clone().unwrap(), None),
                (None, None) => (descriptor.name.clone().unwrap(), None),
            };
            tracks.insert(descriptor.uuid.unwrap(), (name, process));
        }
        Decoded { trace, tracks }
    }

    fn events(&self) -> impl Iterator<Item = (u64, &TrackEvent)> {
        self.trace
            .packet
            .iter()
            .filter_map(|p| Some((p.timestamp.unwrap(), p.track_event.as_ref()?)))
    }

    fn track_named(&self, name: &str) -> Option<u64> {
        self.tracks
            .iter()
            .find(|(_, (n, _))| n == name)
            .map(|(uuid, _)| *uuid)
    }

    /// Every slice as (track, start, end, depth, begin event), by pairing begins and ends per
    /// track; panics if a track's events do not nest.
    fn slices(&self) -> Vec<(u64, u64, u64, usize, &TrackEvent)> {
        let mut open: BTreeMap<u64, Vec<(u64, &TrackEvent)>> = BTreeMap::new();
        let mut slices = Vec::new();
        let mut last_ts = 0;
        for (ts, event) in self.events() {
            assert!(ts >= last_ts, "events in time order");
            last_ts = ts;
            let track = event.track_uuid.unwrap();
            match event.r#type.unwrap() {
                TYPE_SLICE_BEGIN => open.entry(track).or_default().push((ts, event)),
                TYPE_SLICE_END => {
                    let stack = open.get_mut(&track).expect("an end has a begin");
                    let (start, begin) = stack.pop().expect("an end has a begin");
                    slices.push((track, start, ts, stack.len(), begin));
                }
                _ => {}
            }
        }
        assert!(open.values().all(Vec::is_empty), "every slice ends");
        slices
    }
}

fn annotation<'a>(event: &'a TrackEvent, name: &str) -> Option<&'a perfetto::DebugAnnotation> {
    event
        .debug_annotations
        .iter()
        .find(|a| a.name.as_deref() == Some(name))
}

#[test]
fn the_trace_shows_each_syscall_its_waits_and_the_requests_they_waited_on() {
    let result = run(Some(TimelineConfig::default()));
    let timeline = result.timeline.as_ref().expect("a timeline was recorded");
    assert_eq!(timeline.timeline.dropped, 0);
    let decoded = Decoded::new(&perfetto::encode(timeline));
    let slices = decoded.slices();

    // A process per app and one for the kernel; the gallery's task is a thread of its app.
    for app in ["gallery", "backup", "messenger", "kernel"] {
        assert!(decoded.track_named(app).is_some(), "process {app}");
    }
    let gallery = decoded
        .tracks
        .iter()
        .find(|(_, (name, process))| name == "gallery" && process.as_deref() == Some("gallery"))
        .map(|(uuid, _)| *uuid)
        .expect("the gallery's thread track");

    // Every system call of the run is a top-level slice on its task's track.
    let reads: Vec<_> = slices
        .iter()
        .filter(|(track, _, _, depth, e)| {
            *track == gallery && *depth == 0 && e.name.as_deref() == Some("read")
        })
        .collect();
    let summary = &result.apps["gallery"].ops["read"];
    assert_eq!(reads.len() as u64, summary.count + summary.unfinished);
    let longest = reads.iter().map(|(_, s, e, _, _)| e - s).max().unwrap();
    assert_eq!(
        longest, summary.max_ns,
        "the slowest read lasts as long in the trace"
    );

    // Waits are children of system calls on app tasks, named by reason and blocker.
    let waits: Vec<_> = slices
        .iter()
        .filter(|(_, _, _, _, e)| e.categories == ["wait"])
        .collect();
    assert!(!waits.is_empty());
    // (Apps compute between system calls too: CPU time may stand alone.)
    for (track, _, _, depth, event) in &waits {
        let (_, process) = &decoded.tracks[track];
        let layer = annotation(event, "layer").and_then(|a| a.string_value.as_deref());
        if process.as_deref() != Some("kernel") && layer != Some("cpu") {
            assert_eq!(*depth, 1, "an app's wait under a syscall: {:?}", event.name);
        }
    }

    // The slowest read's longest wait is on a request; its flow leads to that request's slice,
    // whose time queued in cfq is what the run's explanation of that read says.
    let slowest = &summary.slowest[0];
    let explained = &slowest.waits[0];
    let (_, start, _, _, _) = reads
        .iter()
        .find(|(_, s, e, _, _)| e - s == slowest.latency_ns)
        .unwrap();
    let wait = waits
        .iter()
        .filter(|(track, s, _, _, _)| track == &gallery && s >= start)
        .find(|(_, s, _, _, _)| *s == explained.start_ns)
        .unwrap_or_else(|| {
            panic!(
                "the explained wait {explained:?} is in the trace: {:?}",
                waits
                    .iter()
                    .filter(|(track, s, _, _, _)| track == &gallery && s >= start)
                    .take(5)
                    .map(|w| (w.1, w.2, w.4.name.clone()))
                    .collect::<Vec<_>>()
            )
        });
    let request_id = annotation(wait.4, "request")
        .and_then(|a| a.uint_value)
        .unwrap();
    assert!(
        explained
            .on
            .starts_with(&format!("request R#{request_id} ")),
        "{}",
        explained.on
    );
    // One flow, from the earlier of the two slices (here the request, queued before the read
    // waited on it) to the later.
    assert_eq!(wait.4.flow_ids.len() + wait.4.terminating_flow_ids.len(), 1);
    let flow = wait.4.terminating_flow_ids[0];
    let request = slices
        .iter()
        .find(|(_, _, _, _, e)| e.categories == ["request"] && e.flow_ids.contains(&flow))
        .expect("the flow's other end is a request");
    assert!(request.1 <= wait.1, "the flow starts at the earlier slice");
    assert!(request
        .4
        .name
        .as_deref()
        .unwrap()
        .starts_with(&format!("R#{request_id} ")));
    let queued = slices
        .iter()
        .find(|(track, s, _, depth, e)| {
            track == &request.0
                && *depth == 1
                && *s == request.1
                && e.name.as_deref() == Some("queued in cfq")
        })
        .expect("the request's time in the elevator");
    let queued_ms = mobistack::units::format_ms((queued.2 - queued.1) as f64);
    assert!(
        explained
            .on
            .contains(&format!(", {queued_ms} ms queued in cfq")),
        "trace says {queued_ms} ms; the run says {}",
        explained.on
    );
    // Its lane is under the device's request track.
    let (lane, _) = &decoded.tracks[&request.0];
    assert!(lane.starts_with("179,0 lane "), "{lane}");
    assert!(decoded.track_named("requests 179,0 (cfq)").is_some());

    // Kernel threads' work: flusher passes and jbd2 commits.
    let kernel_slices: Vec<&str> = slices
        .iter()
        .filter(|(_, _, _, _, e)| e.categories == ["kernel"])
        .map(|(_, _, _, _, e)| e.name.as_deref().unwrap())
        .collect();
    assert!(kernel_slices
        .iter()
        .any(|n| n.starts_with("wb_writeback (")));
    assert!(kernel_slices
        .iter()
        .any(|n| n.starts_with("jbd2 commit tid ")));

    // The foreground app, and counters every 10 ms from 0 to the end (4 s): 401 samples each
    // (throughput from the second sample on).
    let foreground = decoded.track_named("foreground app").unwrap();
    assert!(slices
        .iter()
        .any(|(track, _, _, _, e)| *track == foreground && e.name.as_deref() == Some("gallery")));
    for (counter, samples) in [
        ("dirty pages", 401),
        ("writeback pages", 401),
        ("free memory MiB", 401),
        ("elevator queue depth", 401),
        ("device queue depth", 401),
        ("throughput MB/s", 400),
    ] {
        let uuid = decoded.track_named(counter).expect(counter);
        let values: Vec<f64> = decoded
            .events()
            .filter(|(_, e)| e.track_uuid == Some(uuid))
            .map(|(_, e)| e.double_counter_value.unwrap())
            .collect();
        assert_eq!(values.len(), samples, "{counter}");
        assert!(values.iter().any(|v| *v > 0.0), "{counter} moves");
    }
}

#[test]
fn tracing_changes_no_result_and_the_trace_is_deterministic() {
    let plain = run(None);
    let traced = run(Some(TimelineConfig::default()));
    let again = run(Some(TimelineConfig::default()));
    let bytes = perfetto::encode(traced.timeline.as_ref().unwrap());
    assert_eq!(bytes, perfetto::encode(again.timeline.as_ref().unwrap()));
    let mut without = traced.clone();
    without.timeline = None;
    assert_eq!(
        without, plain,
        "recording the timeline changes nothing in the results"
    );
}

#[test]
fn the_window_and_the_bound_limit_the_trace() {
    let window = TimelineConfig {
        start_ns: 1000 * NS_PER_MS,
        end_ns: 1500 * NS_PER_MS,
        ..TimelineConfig::default()
    };
    let result = run(Some(window));
    let timeline = result.timeline.as_ref().unwrap();
    let decoded = Decoded::new(&perfetto::encode(timeline));
    for (_, start, end, _, event) in decoded.slices().into_iter().filter(|s| s.3 == 0) {
        assert!(
            end >= window.start_ns && start <= window.end_ns,
            "{:?} at {start}..{end} is outside the window",
            event.name
        );
    }
    let counters: Vec<u64> = decoded
        .events()
        .filter(|(_, e)| e.double_counter_value.is_some())
        .map(|(ts, _)| ts)
        .collect();
    assert!(counters
        .iter()
        .all(|ts| (window.start_ns..=window.end_ns).contains(ts)));
    assert!(!counters.is_empty());

    let bounded = run(Some(TimelineConfig {
        max_records: 500,
        ..TimelineConfig::default()
    }));
    let timeline = bounded.timeline.as_ref().unwrap();
    let kept = timeline.timeline.waits.len()
        + timeline.timeline.slices.len()
        + timeline.timeline.requests.len()
        + timeline.timeline.slots_full.len()
        + timeline.timeline.counters.len()
        + timeline.timeline.foreground.len();
    assert_eq!(kept, 500);
    assert!(timeline.timeline.dropped > 0);
    let message = perfetto::summary(timeline, "t.pftrace", 0);
    assert!(
        message.contains("the bound of 500 records was reached"),
        "{message}"
    );
    Decoded::new(&perfetto::encode(timeline)).slices();
}

/// Optional: Perfetto's own schema (the `perfetto` Python package's `perfetto_trace_pb2`) reads
/// the trace, and scripts/perfetto_query.py finds there the request the run's explanation of the
/// gallery's slowest read names, with the same time queued. Skipped, saying so, where Python or
/// the package is missing (`pip install perfetto protobuf`).
#[test]
fn perfettos_own_schema_reads_the_trace_when_its_python_package_is_installed() {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_string());
    let has_package = std::process::Command::new(&python)
        .args([
            "-c",
            "import perfetto.protos.perfetto.trace.perfetto_trace_pb2",
        ])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_package {
        eprintln!("skipped: `{python}` cannot import Perfetto's Python package (pip install perfetto protobuf)");
        return;
    }
    let result = run(Some(TimelineConfig::default()));
    let path =
        std::env::temp_dir().join(format!("mobistack-perfetto-{}.pftrace", std::process::id()));
    std::fs::write(&path, perfetto::encode(result.timeline.as_ref().unwrap())).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/perfetto_query.py");
    let output = std::process::Command::new(&python)
        .arg(script)
        .arg(&path)
        .output()
        .unwrap();
    std::fs::remove_file(&path).ok();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let explained = &result.apps["gallery"].ops["read"].slowest[0].waits[0];
    let id = explained.on.split_whitespace().nth(1).unwrap();
    assert!(
        text.contains(&format!("that request: {id} ")),
        "{text} vs {}",
        explained.on
    );
}
