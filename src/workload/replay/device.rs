//! Device-only replay (`mobistack replay TRACE --device PROFILE`): a trace's requests go straight
//! to a device model, with no page cache, file system or I/O scheduler, the way a device
//! simulator such as MQSim replays a trace. The device model is driven as a pure state machine
//! (submit, next event, advance) by a plain loop, without the engine: this is the fast path.
//!
//! Host side, modelled on MQSim's trace-based flow and NVMe host interface: a request arrives at
//! its trace time (open loop, optionally scaled) and waits in a FIFO host queue until the
//! device has a free command slot (its queue depth); in closed loop the host keeps `depth`
//! requests outstanding and ignores the timestamps. Reported as MQSim reports a flow: requests
//! generated and serviced, device response time (submission to the device until completion)
//! and end-to-end request delay (arrival until completion), here with percentiles, per
//! direction, and IOPS and bandwidth over the simulated time.
//!
//! Memory stays bounded whatever the trace length: the reader holds one line, the host queue
//! holds at most [`HOST_QUEUE_LIMIT`] arrived requests (reading pauses while it is full; arrival
//! times come from the trace, so delays are still measured from them), and latencies go into
//! fixed-size HDR histograms. Timestamps that go backwards are taken as the previous one.

use super::trace::{beyond_replay_span, scaled_time, ReadOptions, Record, TraceError, TraceReader};
use crate::dev::{BlockDevice, DevCompletion, DevRequest, IoOp};
use crate::units::{format_ms, Nanos, NS_PER_SEC, SECTOR_SIZE};
use hdrhistogram::Histogram;
use std::collections::VecDeque;
use std::fmt::Write as _;
use std::io::BufRead;

/// Bound on requests waiting in the host queue.
pub const HOST_QUEUE_LIMIT: usize = 1 << 20;

/// Open or closed loop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    /// At the trace's timestamps, multiplied by `scale` (0.5 replays twice as fast).
    Open { scale: f64 },
    /// `depth` requests outstanding, timestamps ignored.
    Closed { depth: usize },
}

/// Options of [`replay`].
#[derive(Debug, Clone, Copy)]
pub struct ReplayOptions {
    pub read: ReadOptions,
    pub mode: Mode,
    /// Fold sectors beyond the device's capacity back into it instead of failing.
    pub wrap: bool,
    /// Stop after this many requests.
    pub max_requests: Option<u64>,
}

/// Latency distributions of one direction.
#[derive(Debug, Clone)]
pub struct Direction {
    pub requests: u64,
    pub bytes: u64,
    pub device_ns: Histogram<u64>,
    pub end_to_end_ns: Histogram<u64>,
}

const HISTOGRAM_HIGHEST_NS: u64 = 3_600_000_000_000;

impl Direction {
    fn new() -> Direction {
        let histogram = || {
            Histogram::new_with_bounds(1, HISTOGRAM_HIGHEST_NS, 3).expect("valid histogram bounds")
        };
        Direction {
            requests: 0,
            bytes: 0,
            device_ns: histogram(),
            end_to_end_ns: histogram(),
        }
    }

    fn merge(&mut self, other: &Direction) {
        self.requests += other.requests;
        self.bytes += other.bytes;
        self.device_ns.add(&other.device_ns).expect("same bounds");
        self.end_to_end_ns
            .add(&other.end_to_end_ns)
            .expect("same bounds");
    }
}

/// What a replay measured.
#[derive(Debug, Clone)]
pub struct ReplayReport {
    pub trace: String,
    pub format: &'static str,
    pub device: String,
    pub mode: Mode,
    pub generated: u64,
    pub serviced: u64,
    /// Read, write, discard, flush.
    pub directions: [Direction; 4],
    /// Simulated time from the first arrival to the last completion.
    pub simulated_ns: Nanos,
    pub wall_seconds: f64,
    pub skipped_lines: u64,
    pub first_skipped: Option<TraceError>,
    /// Requests whose sectors were folded into the device.
    pub wrapped: u64,
}

fn direction_index(op: IoOp) -> usize {
    match op {
        IoOp::Read => 0,
        IoOp::Write => 1,
        IoOp::Discard => 2,
        IoOp::Flush => 3,
    }
}

const DIRECTION_NAMES: [&str; 4] = ["read", "write", "discard", "flush"];

/// A request between its arrival and its completion.
#[derive(Debug, Clone, Copy)]
struct Pending {
    arrival_ns: Nanos,
    op: IoOp,
    sector: u64,
    nr_sectors: u32,
    flags: crate::dev::IoFlags,
}

/// Device events between two calls of a replay's progress hook: often enough for a progress
/// bar (a few hundred times per wall second), rarely enough to cost nothing.
const PROGRESS_EVERY: u64 = 4096;

/// Replays `reader` on `device`. Errors name the trace's file and line.
pub fn replay<R: BufRead>(
    reader: TraceReader<R>,
    trace_name: &str,
    device: Box<dyn BlockDevice>,
    options: ReplayOptions,
) -> Result<ReplayReport, TraceError> {
    replay_with_progress(reader, trace_name, device, options, &|_| {})
}

/// [`replay`], calling `progress` with the virtual time reached every [`PROGRESS_EVERY`]
/// events (a progress bar; it does not change the results).
pub fn replay_with_progress<R: BufRead>(
    mut reader: TraceReader<R>,
    trace_name: &str,
    mut device: Box<dyn BlockDevice>,
    options: ReplayOptions,
    progress: &dyn Fn(Nanos),
) -> Result<ReplayReport, TraceError> {
    let mut events = 0u64;
    let mut tick = |now: Nanos| {
        events += 1;
        if events.is_multiple_of(PROGRESS_EVERY) {
            progress(now);
        }
    };
    let wall = std::time::Instant::now();
    let capacity = device.capacity_sectors();
    let queue_depth = match options.mode {
        Mode::Closed { depth } => depth.clamp(1, device.queue_depth()),
        Mode::Open { .. } => device.queue_depth(),
    };
    let limit = options.max_requests.unwrap_or(u64::MAX);
    let mut directions = [
        Direction::new(),
        Direction::new(),
        Direction::new(),
        Direction::new(),
    ];
    // Slots of requests on the device, by tag.
    let mut slots: Vec<Option<(Pending, Nanos)>> = vec![None; queue_depth];
    let mut free: Vec<usize> = (0..queue_depth).rev().collect();
    let mut host: VecDeque<Pending> = VecDeque::new();
    let mut completions: Vec<DevCompletion> = Vec::with_capacity(queue_depth);
    let mut first_time: Option<Nanos> = None;
    let mut last_arrival: Nanos = 0;
    let mut generated = 0u64;
    let mut serviced = 0u64;
    let mut wrapped = 0u64;
    let mut trace_done = false;
    let mut now: Nanos = 0;
    let scale = match options.mode {
        Mode::Open { scale } => scale,
        Mode::Closed { .. } => 1.0,
    };

    // Reads the next record into a request.
    let mut next = |reader: &mut TraceReader<R>,
                    generated: &mut u64,
                    wrapped: &mut u64,
                    last_arrival: &mut Nanos|
     -> Result<Option<Pending>, TraceError> {
        if *generated >= limit {
            return Ok(None);
        }
        let Some(record) = reader.next_record()? else {
            return Ok(None);
        };
        let Record {
            line,
            time_ns,
            op,
            mut sector,
            nr_sectors,
            flags,
            ..
        } = record;
        let end = sector.saturating_add(u64::from(nr_sectors));
        if end > capacity {
            if !options.wrap || u64::from(nr_sectors) > capacity {
                return Err(TraceError {
                    file: trace_name.to_string(),
                    line,
                    message: format!(
                        "sectors {sector}..{end} are beyond the device's {capacity} sectors (replay with wrapping to fold them in)"
                    ),
                });
            }
            sector %= capacity - u64::from(nr_sectors) + 1;
            *wrapped += 1;
        }
        let base = *first_time.get_or_insert(time_ns);
        let relative = time_ns.saturating_sub(base);
        // Closed loop ignores the timestamps.
        let arrival = match options.mode {
            Mode::Closed { .. } => 0,
            Mode::Open { .. } => scaled_time(relative, scale).ok_or_else(|| TraceError {
                file: trace_name.to_string(),
                line,
                message: beyond_replay_span(relative, scale, "--time-scale"),
            })?,
        };
        let arrival = arrival.max(*last_arrival);
        *last_arrival = arrival;
        *generated += 1;
        Ok(Some(Pending {
            arrival_ns: arrival,
            op,
            sector,
            nr_sectors,
            flags,
        }))
    };

    let submit = |device: &mut Box<dyn BlockDevice>,
                  slots: &mut Vec<Option<(Pending, Nanos)>>,
                  free: &mut Vec<usize>,
                  now: Nanos,
                  request: Pending| {
        let slot = free.pop().expect("a free slot");
        slots[slot] = Some((request, now));
        device.submit(
            now,
            DevRequest {
                tag: slot as u64,
                op: request.op,
                sector: request.sector,
                nr_sectors: request.nr_sectors,
                flags: request.flags,
                foreground: false,
            },
        );
    };

    let complete = |completions: &mut Vec<DevCompletion>,
                    slots: &mut Vec<Option<(Pending, Nanos)>>,
                    free: &mut Vec<usize>,
                    directions: &mut [Direction; 4],
                    serviced: &mut u64| {
        for done in completions.drain(..) {
            let slot = done.tag as usize;
            let (request, _) = slots[slot]
                .take()
                .expect("a completion of a request in flight");
            free.push(slot);
            let direction = &mut directions[direction_index(request.op)];
            direction.requests += 1;
            direction.bytes += u64::from(request.nr_sectors) * SECTOR_SIZE;
            let device_ns = done.completed_ns - done.submitted_ns;
            let end_to_end = done.completed_ns - request.arrival_ns;
            direction
                .device_ns
                .saturating_record(device_ns.clamp(1, HISTOGRAM_HIGHEST_NS));
            direction
                .end_to_end_ns
                .saturating_record(end_to_end.clamp(1, HISTOGRAM_HIGHEST_NS));
            *serviced += 1;
        }
    };

    match options.mode {
        Mode::Closed { .. } => loop {
            while !trace_done && device.in_flight() < queue_depth {
                match next(&mut reader, &mut generated, &mut wrapped, &mut last_arrival)? {
                    Some(mut request) => {
                        request.arrival_ns = now;
                        submit(&mut device, &mut slots, &mut free, now, request);
                    }
                    None => trace_done = true,
                }
            }
            let Some(at) = device.next_event() else {
                if device.in_flight() == 0 {
                    break;
                }
                panic!("the device has requests in flight and no next event");
            };
            now = now.max(at);
            tick(now);
            device.advance(now, &mut completions);
            complete(
                &mut completions,
                &mut slots,
                &mut free,
                &mut directions,
                &mut serviced,
            );
        },
        Mode::Open { .. } => {
            let mut lookahead = next(&mut reader, &mut generated, &mut wrapped, &mut last_arrival)?;
            if let Some(first) = &lookahead {
                now = first.arrival_ns;
            }
            loop {
                while device.in_flight() < queue_depth {
                    let Some(request) = host.pop_front() else {
                        break;
                    };
                    submit(&mut device, &mut slots, &mut free, now, request);
                }
                let arrival = if host.len() < HOST_QUEUE_LIMIT {
                    lookahead.map(|r| r.arrival_ns)
                } else {
                    None
                };
                let event = device.next_event();
                match (arrival, event) {
                    (None, None) => {
                        if lookahead.is_none() && host.is_empty() {
                            break;
                        }
                        assert!(
                            device.in_flight() < queue_depth || event.is_some(),
                            "a full device with no next event"
                        );
                        // The host queue is full and the device idle: cannot happen, as a
                        // full host queue means every slot is busy.
                        unreachable!("host queue full while the device is idle");
                    }
                    (Some(at), event) if event.is_none_or(|e| at <= e) => {
                        now = now.max(at);
                        tick(now);
                        if device.in_flight() > 0 {
                            device.advance(now, &mut completions);
                            complete(
                                &mut completions,
                                &mut slots,
                                &mut free,
                                &mut directions,
                                &mut serviced,
                            );
                        }
                        host.push_back(lookahead.take().expect("an arrival"));
                        lookahead =
                            next(&mut reader, &mut generated, &mut wrapped, &mut last_arrival)?;
                    }
                    (_, Some(at)) => {
                        now = now.max(at);
                        tick(now);
                        device.advance(now, &mut completions);
                        complete(
                            &mut completions,
                            &mut slots,
                            &mut free,
                            &mut directions,
                            &mut serviced,
                        );
                    }
                    (Some(_), None) => unreachable!("handled by the arm above"),
                }
            }
        }
    }
    assert_eq!(serviced, generated, "every request completes exactly once");
    Ok(ReplayReport {
        trace: trace_name.to_string(),
        format: reader_format(options.read),
        device: device.name().to_string(),
        mode: options.mode,
        generated,
        serviced,
        directions,
        simulated_ns: now,
        wall_seconds: wall.elapsed().as_secs_f64(),
        skipped_lines: reader.skipped,
        first_skipped: reader.first_skipped().cloned(),
        wrapped,
    })
}

fn reader_format(options: ReadOptions) -> &'static str {
    options.format.name()
}

fn us(nanos: f64) -> String {
    format!("{:.0}", nanos / 1000.0)
}

impl ReplayReport {
    /// Requests replayed per second of wall time.
    pub fn requests_per_wall_second(&self) -> f64 {
        self.serviced as f64 / self.wall_seconds.max(1e-9)
    }

    fn total(&self) -> Direction {
        let mut total = Direction::new();
        for direction in &self.directions {
            total.merge(direction);
        }
        total
    }

    /// MQSim's flow summary, then the details.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let mode = match self.mode {
            Mode::Open { scale: 1.0 } => "open loop at the trace's timestamps".to_string(),
            Mode::Open { scale } => format!("open loop at the trace's timestamps x {scale}"),
            Mode::Closed { depth } => format!("closed loop at queue depth {depth}"),
        };
        let _ = writeln!(
            out,
            "replay of {} ({}) on {}: {mode}",
            self.trace, self.format, self.device
        );
        let total = self.total();
        // MQSim (main.cpp collect_results): whole microseconds, truncated.
        let _ = writeln!(
            out,
            "Flow {} - total requests generated: {} total requests serviced:{}",
            self.trace, self.generated, self.serviced
        );
        let _ = writeln!(
            out,
            "                   - device response time: {} (us) end-to-end request delay:{} (us)",
            (total.device_ns.mean() / 1000.0) as u64,
            (total.end_to_end_ns.mean() / 1000.0) as u64
        );
        let seconds = (self.simulated_ns as f64 / NS_PER_SEC as f64).max(1e-9);
        let _ = writeln!(
            out,
            "{:<8} {:>9} {:>10} {:>9} | {:>8} {:>8} {:>8} {:>8} {:>9} | {:>8} {:>8} {:>8} {:>8} {:>9}",
            "op", "requests", "IOPS", "MB/s", "dev mean", "p50", "p99", "p99.9", "max us",
            "e2e mean", "p50", "p99", "p99.9", "max us"
        );
        for (name, direction) in DIRECTION_NAMES
            .iter()
            .copied()
            .zip(self.directions.iter())
            .chain(std::iter::once(("all", &total)))
        {
            if direction.requests == 0 {
                continue;
            }
            let d = &direction.device_ns;
            let e = &direction.end_to_end_ns;
            let _ = writeln!(
                out,
                "{:<8} {:>9} {:>10.0} {:>9.1} | {:>8} {:>8} {:>8} {:>8} {:>9} | {:>8} {:>8} {:>8} {:>8} {:>9}",
                name,
                direction.requests,
                direction.requests as f64 / seconds,
                direction.bytes as f64 / 1e6 / seconds,
                us(d.mean()),
                us(d.value_at_quantile(0.5) as f64),
                us(d.value_at_quantile(0.99) as f64),
                us(d.value_at_quantile(0.999) as f64),
                us(d.max() as f64),
                us(e.mean()),
                us(e.value_at_quantile(0.5) as f64),
                us(e.value_at_quantile(0.99) as f64),
                us(e.value_at_quantile(0.999) as f64),
                us(e.max() as f64),
            );
        }
        let _ = writeln!(
            out,
            "simulated {} ms in {:.3} s of wall time: {:.0} requests per wall second",
            format_ms(self.simulated_ns as f64),
            self.wall_seconds,
            self.requests_per_wall_second()
        );
        if self.wrapped > 0 {
            let _ = writeln!(
                out,
                "{} requests folded into the device's capacity",
                self.wrapped
            );
        }
        if self.skipped_lines > 0 {
            let first = self
                .first_skipped
                .as_ref()
                .map(|e| format!(" (first: {e})"))
                .unwrap_or_default();
            let _ = writeln!(out, "{} bad lines skipped{first}", self.skipped_lines);
        }
        out
    }

    /// Every figure as JSON.
    pub fn json(&self) -> serde_json::Value {
        let seconds = (self.simulated_ns as f64 / NS_PER_SEC as f64).max(1e-9);
        let summary = |h: &Histogram<u64>| {
            serde_json::json!({
                "mean": h.mean(),
                "min": h.min(),
                "p50": h.value_at_quantile(0.5),
                "p90": h.value_at_quantile(0.9),
                "p99": h.value_at_quantile(0.99),
                "p999": h.value_at_quantile(0.999),
                "max": h.max(),
            })
        };
        let mut directions = serde_json::Map::new();
        let total = self.total();
        for (name, direction) in DIRECTION_NAMES
            .iter()
            .copied()
            .zip(self.directions.iter())
            .chain(std::iter::once(("all", &total)))
        {
            directions.insert(
                name.to_string(),
                serde_json::json!({
                    "requests": direction.requests,
                    "bytes": direction.bytes,
                    "iops": direction.requests as f64 / seconds,
                    "bandwidth_bytes_per_sec": direction.bytes as f64 / seconds,
                    "device_response_ns": summary(&direction.device_ns),
                    "end_to_end_delay_ns": summary(&direction.end_to_end_ns),
                }),
            );
        }
        serde_json::json!({
            "trace": self.trace,
            "format": self.format,
            "device": self.device,
            "generated": self.generated,
            "serviced": self.serviced,
            "simulated_ns": self.simulated_ns,
            "wall_seconds": self.wall_seconds,
            "requests_per_wall_second": self.requests_per_wall_second(),
            "skipped_lines": self.skipped_lines,
            "wrapped": self.wrapped,
            "directions": directions,
        })
    }
}

/// A synthetic DiskSim-format trace (nanosecond times, as MQSim reads them): `requests` 4 KiB
/// random reads, aligned, over the first `span_sectors`, one every `interval_ns`. Used by
/// `mobistack bench` and to compare with MQSim (`docs/performance.md`).
pub fn synthetic_random_reads(
    requests: u64,
    interval_ns: Nanos,
    span_sectors: u64,
    seed: u64,
) -> Vec<u8> {
    let mut rng = crate::sim::Rng::new(seed);
    let mut out = Vec::with_capacity(requests as usize * 32);
    let slots = (span_sectors / 8).max(1);
    for i in 0..requests {
        let sector = rng.below(slots) * 8;
        let _ = writeln!(
            StringWriter(&mut out),
            "{} 0 {} 8 1",
            i * interval_ns,
            sector
        );
    }
    out
}

/// `fmt::Write` into a byte vector.
struct StringWriter<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for StringWriter<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// `mobistack bench`'s device-replay row: 4 KiB random reads at 20,000 per second (a quarter
/// of the profile's queue-depth-32 rate, so the device keeps up) from a DiskSim trace in
/// memory, parsed as it is read, on the `sata-ssd` profile.
pub fn bench(requests: u64) -> crate::sim::bench::BenchResult {
    let text = synthetic_random_reads(requests, 50_000, 2 << 21, 1);
    let config = crate::dev::DeviceConfig {
        profile: "sata-ssd".to_string(),
        capacity: Some(2 << 30),
        ..Default::default()
    };
    let device = crate::dev::build_device(&config, 1).expect("the sata-ssd profile builds");
    let mut read = ReadOptions::new(super::trace::Format::Disksim);
    read.time_unit = super::trace::TimeUnit::Ns;
    let reader = TraceReader::new(text.as_slice(), "bench.trace", read);
    let report = replay(
        reader,
        "bench.trace",
        device,
        ReplayOptions {
            read,
            mode: Mode::Open { scale: 1.0 },
            wrap: false,
            max_requests: None,
        },
    )
    .expect("the synthetic trace replays");
    crate::sim::bench::BenchResult {
        name: "device-replay",
        what: "requests/s",
        operations: report.serviced,
        wall_seconds: report.wall_seconds,
        per_second: report.requests_per_wall_second(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dev::fixed::FixedLatencyDevice;
    use crate::workload::replay::trace::{Format, TimeUnit};

    fn options(mode: Mode) -> ReplayOptions {
        let mut read = ReadOptions::new(Format::Disksim);
        read.time_unit = TimeUnit::Us;
        ReplayOptions {
            read,
            mode,
            wrap: false,
            max_requests: None,
        }
    }

    fn run(text: &str, mode: Mode, device: FixedLatencyDevice) -> Result<ReplayReport, TraceError> {
        let options = options(mode);
        let reader = TraceReader::new(text.as_bytes(), "t.trace", options.read);
        replay(reader, "t.trace", Box::new(device), options)
    }

    #[test]
    fn open_loop_requests_queue_in_the_host_when_the_device_is_full() {
        // One slot, 100 us per request; three reads arriving together at 0 us, one at 1000 us.
        let text = "0 0 0 8 1\n0 0 8 8 1\n0 0 16 8 0\n1000 0 24 8 1\n";
        let report = run(
            text,
            Mode::Open { scale: 1.0 },
            FixedLatencyDevice::new(1, 100_000, 0),
        )
        .unwrap();
        assert_eq!((report.generated, report.serviced), (4, 4));
        let reads = &report.directions[0];
        assert_eq!(reads.requests, 3);
        assert_eq!(report.directions[1].requests, 1);
        // Device time is always 100 us; end-to-end grows with the host queue (100, 200, 300).
        let total = report.total();
        assert!((99_000..=101_000).contains(&total.device_ns.max()));
        assert!(
            (299_000..=301_000).contains(&total.end_to_end_ns.max()),
            "{}",
            total.end_to_end_ns.max()
        );
        assert_eq!(report.simulated_ns, 1_100_000);
        let table = report.table();
        assert!(
            table.contains("total requests generated: 4 total requests serviced:4"),
            "{table}"
        );
        // Twice as fast.
        let fast = run(
            text,
            Mode::Open { scale: 0.5 },
            FixedLatencyDevice::new(1, 100_000, 0),
        )
        .unwrap();
        assert_eq!(fast.simulated_ns, 600_000);
    }

    #[test]
    fn closed_loop_keeps_the_depth_and_ignores_timestamps() {
        let text = "0 0 0 8 1\n5000 0 8 8 1\n9000 0 16 8 1\n9999 0 24 8 1\n";
        let report = run(
            text,
            Mode::Closed { depth: 2 },
            FixedLatencyDevice::new(4, 100_000, 0),
        )
        .unwrap();
        assert_eq!(report.serviced, 4);
        assert_eq!(report.simulated_ns, 200_000);
    }

    #[test]
    fn sectors_beyond_the_device_are_errors_or_wrapped() {
        let text = "0 0 0 8 1\n1 0 2000000000000 8 1\n";
        let error = run(
            text,
            Mode::Open { scale: 1.0 },
            FixedLatencyDevice::new(1, 1000, 0),
        )
        .unwrap_err();
        assert_eq!(error.line, 2);
        let mut wrapping = options(Mode::Open { scale: 1.0 });
        wrapping.wrap = true;
        let reader = TraceReader::new(text.as_bytes(), "t", wrapping.read);
        let report = replay(
            reader,
            "t",
            Box::new(FixedLatencyDevice::new(1, 1000, 0)),
            wrapping,
        )
        .unwrap();
        assert_eq!((report.serviced, report.wrapped), (2, 1));
    }

    #[test]
    fn the_mqsim_profile_example_is_a_valid_device() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/devices/mqsim-default.toml"
        );
        let config = device_config(path).unwrap();
        let profile = config.resolve().unwrap();
        assert_eq!((profile.channels, profile.dies_per_channel), (8, 8));
        assert_eq!(config.fill, 0.7);
        assert!(device_config("sata-ssd").unwrap().resolve().is_ok());
    }

    #[test]
    fn the_bench_replays_every_request() {
        let result = bench(2000);
        assert_eq!(result.operations, 2000);
        assert!(result.per_second > 0.0);
    }
}

/// What `mobistack replay` is asked for.
#[derive(Debug, Clone)]
pub struct CommandArgs {
    pub trace: std::path::PathBuf,
    /// A profile name, or a TOML file with a `[stack.device]` table (as `mobistack device fit`
    /// prints it) or a `[device]` table.
    pub device: String,
    pub capacity: Option<String>,
    pub fill: Option<f64>,
    pub format: Option<String>,
    pub event: String,
    pub time_unit: String,
    pub time_scale: f64,
    pub queue_depth: Option<usize>,
    pub wrap: bool,
    pub skip_bad_lines: bool,
    pub max_requests: Option<u64>,
}

/// The device configuration `--device` names: a built-in profile, or a TOML file.
pub fn device_config(arg: &str) -> Result<crate::dev::DeviceConfig, String> {
    let path = std::path::Path::new(arg);
    if !path.is_file() {
        return Ok(crate::dev::DeviceConfig {
            profile: arg.to_string(),
            ..Default::default()
        });
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let table: toml::Table =
        toml::from_str(&text).map_err(|e| format!("{}: {}", path.display(), e.message()))?;
    let device = table
        .get("stack")
        .and_then(|s| s.get("device"))
        .or_else(|| table.get("device"))
        .ok_or_else(|| format!("{} has no [stack.device] or [device] table", path.display()))?;
    device
        .clone()
        .try_into::<crate::dev::DeviceConfig>()
        .map_err(|e| format!("{}: {}", path.display(), e.message()))
}

/// `mobistack replay`: builds the device, opens the trace and replays it, calling `progress`
/// with the virtual time reached now and then.
pub fn run_command(args: &CommandArgs, progress: &dyn Fn(Nanos)) -> Result<ReplayReport, String> {
    use super::trace::{self, Format, TimeUnit};
    let mut config = device_config(&args.device)?;
    if let Some(capacity) = &args.capacity {
        config.capacity = Some(crate::units::parse_size(capacity).map_err(|e| e.to_string())?);
    }
    if let Some(fill) = args.fill {
        if !(0.0..=1.0).contains(&fill) {
            return Err(format!("--fill {fill} must be between 0 and 1"));
        }
        config.fill = fill;
    }
    let device = crate::dev::build_device(&config, 1)?;
    let format = args.format.as_deref().map(Format::parse).transpose()?;
    let (source, format) = trace::open(&args.trace, format).map_err(|e| e.to_string())?;
    let mut read = ReadOptions::new(format);
    read.action = match args.event.as_str() {
        "Q" => b'Q',
        "D" => b'D',
        "C" => b'C',
        other => return Err(format!("--event must be Q, D or C, not `{other}`")),
    };
    read.time_unit = TimeUnit::parse(&args.time_unit)?;
    read.skip_bad_lines = args.skip_bad_lines;
    if !(args.time_scale > 0.0 && args.time_scale.is_finite()) {
        return Err(format!(
            "--time-scale {} must be a positive finite number",
            args.time_scale
        ));
    }
    let mode = match args.queue_depth {
        Some(0) => return Err("--queue-depth must be positive".into()),
        Some(depth) => Mode::Closed { depth },
        None => Mode::Open {
            scale: args.time_scale,
        },
    };
    let name = args.trace.display().to_string();
    let reader = TraceReader::new(source, &name, read);
    replay_with_progress(
        reader,
        &name,
        device,
        ReplayOptions {
            read,
            mode,
            wrap: args.wrap,
            max_requests: args.max_requests,
        },
        progress,
    )
    .map_err(|e| e.to_string())
}
