//! `mobistack device bench|list|fit`: a closed-loop, fio-like benchmark of a device model at a fixed
//! queue depth, the table beside the profile's published figures, flush and discard latencies, and
//! the calibration (`fit`) of a profile to four measured numbers.
//!
//! The bench drives a [`FlashDevice`] with a plain loop: keep `queue_depth` requests outstanding,
//! jump to the device's next event, collect completions, refill. Sequential tests use 512 KiB
//! requests, random tests 4 KiB requests at uniformly random 4 KiB-aligned offsets (seeded
//! splitmix64), all inside the first quarter of the device, which is written (mapped) beforehand.
//! Throughput is measured from the first submission to the last completion, as fio reports it.

use super::flash::FlashDevice;
use super::profile::{builtin_profile, builtin_profiles, DeviceProfile, Published};
use super::{BlockDevice, DevCompletion, DevRequest, IoFlags, IoOp};
use crate::units::{format_ms, Nanos, NS_PER_SEC, SECTOR_SIZE};
use serde_json::{json, Value};

/// One of the four fio-like patterns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    SeqRead,
    SeqWrite,
    RandRead,
    RandWrite,
}

impl Pattern {
    pub const ALL: [Pattern; 4] = [
        Pattern::SeqRead,
        Pattern::SeqWrite,
        Pattern::RandRead,
        Pattern::RandWrite,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Pattern::SeqRead => "seq read 512KiB",
            Pattern::SeqWrite => "seq write 512KiB",
            Pattern::RandRead => "rand read 4KiB",
            Pattern::RandWrite => "rand write 4KiB",
        }
    }

    fn op(self) -> IoOp {
        match self {
            Pattern::SeqRead | Pattern::RandRead => IoOp::Read,
            Pattern::SeqWrite | Pattern::RandWrite => IoOp::Write,
        }
    }

    fn request_bytes(self) -> u64 {
        match self {
            Pattern::SeqRead | Pattern::SeqWrite => 512 * 1024,
            Pattern::RandRead | Pattern::RandWrite => 4096,
        }
    }

    fn sequential(self) -> bool {
        matches!(self, Pattern::SeqRead | Pattern::SeqWrite)
    }

    fn published(self, published: &Published) -> Option<f64> {
        match self {
            Pattern::SeqRead => published.seq_read_mbps,
            Pattern::SeqWrite => published.seq_write_mbps,
            Pattern::RandRead => published.rand_read_iops,
            Pattern::RandWrite => published.rand_write_iops,
        }
    }
}

/// How much work each bench run does.
#[derive(Debug, Clone, Copy)]
pub struct BenchSize {
    /// Bytes moved by a sequential test.
    pub sequential_bytes: u64,
    /// Requests of a random test.
    pub random_ops: u64,
}

impl Default for BenchSize {
    fn default() -> Self {
        // 256 MiB sequential: many times every profile's write cache, so the figure is the
        // sustained rate; 8192 random requests.
        BenchSize {
            sequential_bytes: 256 * 1024 * 1024,
            random_ops: 8192,
        }
    }
}

/// Result of one run.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct BenchResult {
    pub queue_depth: usize,
    pub ops: u64,
    pub elapsed_ns: Nanos,
    pub mbps: f64,
    pub iops: f64,
    pub mean_latency_ns: f64,
    pub max_latency_ns: Nanos,
}

/// splitmix64 (Steele et al.), the bench's only randomness.
#[derive(Debug, Clone)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Capacity the bench gives the model: the FTL tables only need to cover the tested region.
const BENCH_CAPACITY: u64 = 4 * 1024 * 1024 * 1024;

/// The device a bench runs on: the profile with at most 4 GiB, half written.
pub fn bench_device(profile: &DeviceProfile) -> Result<FlashDevice, String> {
    let mut profile = profile.clone();
    profile.capacity = profile.capacity.min(BENCH_CAPACITY);
    let mut device = FlashDevice::new(profile, None)?;
    device.precondition(0.5)?;
    Ok(device)
}

/// Runs `pattern` at `queue_depth` (capped by the device's) on a fresh bench device.
pub fn run(
    profile: &DeviceProfile,
    pattern: Pattern,
    queue_depth: usize,
    size: BenchSize,
) -> Result<BenchResult, String> {
    let mut device = bench_device(profile)?;
    let queue_depth = queue_depth.min(device.queue_depth()).max(1);
    let bytes = pattern.request_bytes();
    let sectors = (bytes / SECTOR_SIZE) as u32;
    let region_sectors = device.capacity_sectors() / 4 / u64::from(sectors) * u64::from(sectors);
    let ops = if pattern.sequential() {
        (size.sequential_bytes / bytes).max(1)
    } else {
        size.random_ops.max(1)
    };
    let mut rng = SplitMix64(0x6d6f_6269);
    let mut issued = 0u64;
    let mut now: Nanos = 0;
    let mut completions: Vec<DevCompletion> = Vec::with_capacity(queue_depth);
    let mut done = 0u64;
    let mut latency_sum = 0u128;
    let mut latency_max = 0;
    while done < ops {
        while issued < ops && device.in_flight() < queue_depth {
            let sector = if pattern.sequential() {
                (issued * u64::from(sectors)) % region_sectors
            } else {
                rng.next_u64() % (region_sectors / u64::from(sectors)) * u64::from(sectors)
            };
            device.submit(
                now,
                DevRequest {
                    tag: issued,
                    op: pattern.op(),
                    sector,
                    nr_sectors: sectors,
                    flags: IoFlags::default(),
                    foreground: true,
                },
            );
            issued += 1;
        }
        now = device.next_event().expect("requests are outstanding");
        device.advance(now, &mut completions);
        for completion in completions.drain(..) {
            let latency = completion.completed_ns - completion.submitted_ns;
            latency_sum += u128::from(latency);
            latency_max = latency_max.max(latency);
            done += 1;
        }
    }
    let seconds = now as f64 / NS_PER_SEC as f64;
    Ok(BenchResult {
        queue_depth,
        ops,
        elapsed_ns: now,
        mbps: (ops * bytes) as f64 / 1e6 / seconds,
        iops: ops as f64 / seconds,
        mean_latency_ns: latency_sum as f64 / ops as f64,
        max_latency_ns: latency_max,
    })
}

/// The queue depth a vendor figure refers to: 32, or the device's own when smaller.
pub fn vendor_queue_depth(profile: &DeviceProfile) -> usize {
    profile.queue_depth.min(32)
}

fn figure(pattern: Pattern, result: &BenchResult) -> f64 {
    if pattern.sequential() {
        result.mbps
    } else {
        result.iops
    }
}

/// One row of the bench table.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct BenchRow {
    pub test: &'static str,
    pub unit: &'static str,
    pub qd1: BenchResult,
    pub qd32: BenchResult,
    pub published: Option<f64>,
    /// Relative deviation of the vendor-depth result from the published figure.
    pub deviation: Option<f64>,
}

/// Benchmarks `profile` at QD1 and QD32 for the four patterns.
pub fn bench_rows(profile: &DeviceProfile, size: BenchSize) -> Result<Vec<BenchRow>, String> {
    let mut rows = Vec::new();
    for pattern in Pattern::ALL {
        let qd1 = run(profile, pattern, 1, size)?;
        let qd32 = run(profile, pattern, 32, size)?;
        let published = pattern.published(&profile.published);
        let at_vendor_depth = if vendor_queue_depth(profile) == 1 {
            &qd1
        } else {
            &qd32
        };
        let deviation = published.map(|p| figure(pattern, at_vendor_depth) / p - 1.0);
        rows.push(BenchRow {
            test: pattern.name(),
            unit: if pattern.sequential() { "MB/s" } else { "IOPS" },
            qd1,
            qd32,
            published,
            deviation,
        });
    }
    Ok(rows)
}

fn format_figure(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

/// `mobistack device bench <profile>`: the table and the JSON.
pub fn bench_report(profile_name: &str) -> Result<(String, Value), String> {
    let profile = builtin_profile(profile_name)?;
    bench_profile_report(&profile, BenchSize::default())
}

pub fn bench_profile_report(
    profile: &DeviceProfile,
    size: BenchSize,
) -> Result<(String, Value), String> {
    let rows = bench_rows(profile, size)?;
    let mut table = format!(
        "device {} ({}), queue depth {}, scheduler {}\n",
        profile.name, profile.description, profile.queue_depth, profile.scheduler
    );
    table.push_str(&format!(
        "{:<18} {:>5} {:>10} {:>10} {:>10} {:>8}   {:>10} {:>10}\n",
        "test", "unit", "QD1", "QD32", "published", "dev", "lat QD1 ms", "lat QD32 ms"
    ));
    for row in &rows {
        table.push_str(&format!(
            "{:<18} {:>5} {:>10} {:>10} {:>10} {:>8}   {:>10} {:>10}\n",
            row.test,
            row.unit,
            format_figure(figure_of(row, &row.qd1)),
            format_figure(figure_of(row, &row.qd32)),
            row.published.map_or("n/a".to_string(), format_figure),
            row.deviation
                .map_or("".to_string(), |d| format!("{:+.1}%", d * 100.0)),
            format_ms(row.qd1.mean_latency_ns),
            format_ms(row.qd32.mean_latency_ns),
        ));
    }
    if vendor_queue_depth(profile) == 1 {
        table.push_str("(no command queue: QD32 runs at QD1; published figures compared at QD1)\n");
    } else {
        table.push_str("(published figures compared at QD32)\n");
    }
    let value = json!({
        "profile": profile.name,
        "description": profile.description,
        "queue_depth": profile.queue_depth,
        "scheduler": profile.scheduler,
        "published_source": profile.published.source,
        "rows": rows,
    });
    Ok((table, value))
}

fn figure_of(row: &BenchRow, result: &BenchResult) -> f64 {
    if row.unit == "MB/s" {
        result.mbps
    } else {
        result.iops
    }
}

/// `mobistack device list`: name, interface, queue depth, description.
pub fn list_report() -> (String, Value) {
    let mut table = format!(
        "{:<10} {:<5} {:>3}  {}\n",
        "profile", "bus", "QD", "description"
    );
    let mut entries = Vec::new();
    for profile in builtin_profiles() {
        let interface = serde_json::to_value(profile.interface).unwrap_or(Value::Null);
        table.push_str(&format!(
            "{:<10} {:<5} {:>3}  {}\n",
            profile.name,
            interface.as_str().unwrap_or(""),
            profile.queue_depth,
            profile.description
        ));
        entries.push(json!({
            "name": profile.name,
            "interface": interface,
            "queue_depth": profile.queue_depth,
            "description": profile.description,
            "published": profile.published,
            "sources": super::profile::SOURCES_FILE,
            "assumptions": assumptions_json(),
        }));
    }
    table.push_str(&format!(
        "(sources: {}; parameters without a public figure are assumptions, see `device latencies`)\n",
        super::profile::SOURCES_FILE
    ));
    (table, Value::Array(entries))
}

/// The parameters every built-in profile assumes, as JSON (`{name: what}`).
fn assumptions_json() -> Value {
    Value::Object(
        super::profile::ASSUMED_PARAMETERS
            .iter()
            .map(|(name, what)| (name.to_string(), json!(what)))
            .collect(),
    )
}

/// Latency of single commands on an idle device (after the previous one completed).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FlushDiscardLatencies {
    pub profile: String,
    /// FLUSH with nothing written since the last flush.
    pub flush_clean_ns: Nanos,
    /// FLUSH right after 1 MiB of random 4 KiB writes (QD1) completed.
    pub flush_after_1mib_random_ns: Nanos,
    /// FUA 4 KiB write on an idle device.
    pub fua_write_4k_ns: Nanos,
    pub discard_4k_ns: Nanos,
    pub discard_1mib_ns: Nanos,
    pub discard_64mib_ns: Nanos,
}

fn one(
    device: &mut FlashDevice,
    now: &mut Nanos,
    op: IoOp,
    sector: u64,
    sectors: u32,
    fua: bool,
) -> Nanos {
    let submitted = *now;
    device.submit(
        submitted,
        DevRequest {
            tag: 0,
            op,
            sector,
            nr_sectors: sectors,
            flags: IoFlags {
                fua,
                ..IoFlags::default()
            },
            foreground: true,
        },
    );
    let mut completions = Vec::new();
    while completions.is_empty() {
        *now = device.next_event().expect("one request outstanding");
        device.advance(*now, &mut completions);
    }
    *now - submitted
}

pub fn flush_discard_latencies(profile: &DeviceProfile) -> Result<FlushDiscardLatencies, String> {
    let mut device = bench_device(profile)?;
    let mut now: Nanos = 0;
    let flush_clean_ns = one(&mut device, &mut now, IoOp::Flush, 0, 0, false);
    let mut rng = SplitMix64(7);
    let region_units = device.capacity_sectors() / 4 / 8;
    for _ in 0..256 {
        let sector = rng.next_u64() % region_units * 8;
        one(&mut device, &mut now, IoOp::Write, sector, 8, false);
    }
    let flush_after_1mib_random_ns = one(&mut device, &mut now, IoOp::Flush, 0, 0, false);
    // Let background work settle before the single-command measurements.
    now += NS_PER_SEC;
    let fua_write_4k_ns = one(&mut device, &mut now, IoOp::Write, 8 * 1024, 8, true);
    now += NS_PER_SEC;
    let discard_4k_ns = one(&mut device, &mut now, IoOp::Discard, 1 << 20, 8, false);
    let discard_1mib_ns = one(&mut device, &mut now, IoOp::Discard, 2 << 20, 2048, false);
    let discard_64mib_ns = one(&mut device, &mut now, IoOp::Discard, 3 << 20, 131072, false);
    Ok(FlushDiscardLatencies {
        profile: profile.name.clone(),
        flush_clean_ns,
        flush_after_1mib_random_ns,
        fua_write_4k_ns,
        discard_4k_ns,
        discard_1mib_ns,
        discard_64mib_ns,
    })
}

/// Flush and discard latencies of every built-in profile, as a table and JSON.
pub fn flush_discard_report() -> Result<(String, Value), String> {
    let mut table = format!(
        "{:<10} {:>12} {:>14} {:>10} {:>11} {:>11} {:>12}\n",
        "profile",
        "flush clean",
        "flush 1MiB rnd",
        "FUA 4KiB",
        "discard 4K",
        "discard 1M",
        "discard 64M"
    );
    let mut rows = Vec::new();
    for profile in builtin_profiles() {
        let l = flush_discard_latencies(&profile)?;
        table.push_str(&format!(
            "{:<10} {:>12} {:>14} {:>10} {:>11} {:>11} {:>12}\n",
            l.profile,
            format_ms(l.flush_clean_ns as f64),
            format_ms(l.flush_after_1mib_random_ns as f64),
            format_ms(l.fua_write_4k_ns as f64),
            format_ms(l.discard_4k_ns as f64),
            format_ms(l.discard_1mib_ns as f64),
            format_ms(l.discard_64mib_ns as f64),
        ));
        rows.push(l);
    }
    table.push_str("(latencies in ms, one command on an otherwise idle device)\n");
    table.push_str(&format!(
        "sources: NAND program and read times, buses: {} (SimpleSSD/FEMU timings, JEDEC/UFS buses); a flush of cached data costs the programs of that data.\n\
         assumptions (no public figure; the same for every profile): flush_overhead 50 us to start a flush (`flush clean`); \
         discard_overhead 100 us per command plus discard_per_page 1 us per mapped 4 KiB page (`discard` columns).\n",
        super::profile::SOURCES_FILE
    ));
    let value = json!({
        "latencies": rows,
        "sources": super::profile::SOURCES_FILE,
        "assumptions": {
            "flush clean": "flush_overhead: firmware time to start a flush, assumed 50 us (no public figure)",
            "discard": "discard_overhead 100 us + discard_per_page 1 us per mapped 4 KiB page, assumed (no public figure)",
            "flush after writes": "the programs of the cached data: NAND program time from the sources, plus flush_overhead",
            "FUA": "the write path and the programs of its data: from the sources",
        },
    });
    Ok((table, value))
}

/// Fits `base`'s calibrated parameters (see the profile module comment) to `targets` by repeated
/// benchmarking: each parameter is scaled by the ratio of measured to target figure until every
/// figure is within 2 % or `rounds` are done.
pub fn fit_profile(
    base: &DeviceProfile,
    targets: &Published,
    size: BenchSize,
    rounds: usize,
) -> Result<DeviceProfile, String> {
    let depth = vendor_queue_depth(base);
    fit_profile_at(base, targets, size, rounds, |_| depth)
}

/// [`fit_profile`] with each pattern's target measured at queue depth `depth(pattern)` (real
/// mode's `device fit --measure` fits the random patterns at depth 1, src/real/fit.rs).
pub fn fit_profile_at(
    base: &DeviceProfile,
    targets: &Published,
    size: BenchSize,
    rounds: usize,
    depth: impl Fn(Pattern) -> usize,
) -> Result<DeviceProfile, String> {
    let mut profile = base.clone();
    profile.published = targets.clone();
    for _ in 0..rounds {
        let mut worst: f64 = 0.0;
        for pattern in Pattern::ALL {
            let Some(target) = pattern.published(targets) else {
                continue;
            };
            let measured = figure(pattern, &run(&profile, pattern, depth(pattern), size)?);
            worst = worst.max((measured / target - 1.0).abs());
            let ratio = (measured / target).clamp(0.5, 2.0);
            match pattern {
                Pattern::SeqRead => {
                    let scaled = profile.channel_bandwidth as f64 / ratio;
                    profile.channel_bandwidth =
                        (scaled as u64).clamp(1_000_000, 10 * profile.bus_bandwidth);
                }
                Pattern::SeqWrite => {
                    let time = if profile.slc_buffer > 0 {
                        &mut profile.slc_program_time
                    } else {
                        &mut profile.program_time
                    };
                    *time = ((*time as f64 * ratio) as Nanos).max(10_000);
                }
                Pattern::RandRead | Pattern::RandWrite => {
                    let overhead = if pattern == Pattern::RandRead {
                        &mut profile.read_overhead
                    } else {
                        &mut profile.write_overhead
                    };
                    let delta = NS_PER_SEC as f64 / target - NS_PER_SEC as f64 / measured;
                    let adjusted = (*overhead as f64 + delta).max(1_000.0);
                    *overhead = adjusted as Nanos;
                }
            }
        }
        if worst < 0.02 {
            break;
        }
    }
    Ok(profile)
}

/// A `[stack.device]` table using `profile` as its custom profile, as TOML.
pub fn scenario_toml(profile: &DeviceProfile) -> Result<String, String> {
    let scenario = json!({ "stack": { "device": { "profile": profile.name, "custom": profile } } });
    toml::to_string(&scenario).map_err(|e| e.to_string())
}

/// How far from a target a fitted figure may end: the fit aims at 2 %, and reports a target it
/// misses by more than 5 % as unreached.
pub const FIT_TOLERANCE: f64 = 0.05;

/// `mobistack device fit --seq-read 250MB/s --seq-write 125MB/s --rand-read 11000 --rand-write
/// 13000`: parses the four numbers and fits a profile to them. The report comes with the targets
/// the fit could not reach (each with what it reached and what bounds it), which make the
/// command fail.
pub fn fit_command(
    seq_read: &str,
    seq_write: &str,
    rand_read: &str,
    rand_write: &str,
) -> Result<((String, Value), Vec<String>), String> {
    let targets = super::profile::parse_fit_targets(seq_read, seq_write, rand_read, rand_write)?;
    let (text, value) = fit_report(&targets)?;
    let unreached = unreached_targets(&value);
    Ok(((text, value), unreached))
}

/// The targets of a fit report missed by more than [`FIT_TOLERANCE`], explained.
pub fn unreached_targets(report: &Value) -> Vec<String> {
    let template = report["template"].as_str().unwrap_or("?");
    let profile = &report["profile"];
    let mut out = Vec::new();
    for row in report["check"].as_array().into_iter().flatten() {
        let Some(deviation) = row["deviation"].as_f64() else {
            continue;
        };
        if deviation.abs() <= FIT_TOLERANCE {
            continue;
        }
        let test = row["test"].as_str().unwrap_or("?");
        let unit = row["unit"].as_str().unwrap_or("");
        let target = row["published"].as_f64().unwrap_or(0.0);
        let reached = target * (1.0 + deviation);
        let bound = match test {
            t if t.starts_with("seq read") => format!(
                "sequential reads are bounded by the host bus ({} MB/s) and the {template} template's dies and NAND read time",
                profile["bus_bandwidth"].as_u64().unwrap_or(0) / 1_000_000
            ),
            t if t.starts_with("seq write") => format!(
                "sequential writes are bounded by the host bus ({} MB/s) and the {template} template's dies",
                profile["bus_bandwidth"].as_u64().unwrap_or(0) / 1_000_000
            ),
            _ => format!(
                "random I/O is bounded by the {template} template's queue depth, dies and NAND times"
            ),
        };
        out.push(format!(
            "{test}: reached {} {unit}, target {} ({:+.1}%): {bound}",
            format_figure(reached),
            format_figure(target),
            deviation * 100.0
        ));
    }
    out
}

/// The built-in template closest to `targets` by host bus: `ufs-3.1` above 1000 MB/s of
/// sequential reads, `ufs-2.1` above 330 MB/s, else `emmc-5.1`.
pub fn fit_template(targets: &Published) -> &'static str {
    let seq_read = targets.seq_read_mbps.unwrap_or(0.0);
    if seq_read > 1000.0 {
        "ufs-3.1"
    } else if seq_read > 330.0 {
        "ufs-2.1"
    } else {
        "emmc-5.1"
    }
}

/// `mobistack device fit`: picks the closest built-in template (by host bus and queueing) and
/// fits it to the four numbers. Returns the profile as a TOML `[stack.device.custom]` block and JSON.
pub fn fit_report(targets: &Published) -> Result<(String, Value), String> {
    let template = fit_template(targets);
    let mut base = builtin_profile(template)?;
    base.name = "fitted".to_string();
    base.description = format!("fitted to user measurements from the {template} template");
    let profile = fit_profile(&base, targets, BenchSize::default(), 10)?;
    let rows = bench_rows(&profile, BenchSize::default())?;
    let mut text = String::from("# paste into a scenario file\n");
    text.push_str(&scenario_toml(&profile)?);
    text.push_str("\n# check:\n");
    for row in &rows {
        let at = if vendor_queue_depth(&profile) == 1 {
            &row.qd1
        } else {
            &row.qd32
        };
        text.push_str(&format!(
            "# {:<18} {:>10} {} (target {}, {:+.1}%)\n",
            row.test,
            format_figure(figure_of(row, at)),
            row.unit,
            row.published.map_or("n/a".into(), format_figure),
            row.deviation.unwrap_or(0.0) * 100.0
        ));
    }
    let value = json!({ "template": template, "profile": profile, "check": rows });
    Ok((text, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> BenchSize {
        BenchSize {
            sequential_bytes: 64 * 1024 * 1024,
            random_ops: 1500,
        }
    }

    #[test]
    fn fit_reaches_user_numbers_from_a_template() {
        let mut base = builtin_profile("emmc-5.1").unwrap();
        base.capacity = 1 << 30;
        let targets =
            crate::dev::profile::parse_fit_targets("200MB/s", "100MB/s", "9000", "10000").unwrap();
        let fitted = fit_profile(&base, &targets, small(), 10).unwrap();
        for pattern in Pattern::ALL {
            let measured = figure(pattern, &run(&fitted, pattern, 32, small()).unwrap());
            let target = pattern.published(&targets).unwrap();
            assert!(
                (measured / target - 1.0).abs() < 0.05,
                "{pattern:?}: {measured} vs {target}"
            );
        }
        assert!(
            fitted.channel_bandwidth < base.channel_bandwidth,
            "slower reads, slower channel"
        );
        assert!(
            fitted.program_time > base.program_time,
            "slower writes, longer program"
        );
    }

    #[test]
    fn a_fitted_profile_pastes_back_into_a_scenario() {
        let mut profile = builtin_profile("ufs-2.1").unwrap();
        profile.name = "fitted".into();
        profile.capacity = 1 << 30;
        let text = format!(
            "name = \"fitted\"\nduration = \"1s\"\n{}",
            scenario_toml(&profile).unwrap()
        );
        let scenario = crate::scenario::parse("fitted.toml", &text).unwrap();
        let device = &scenario.variants[0].stack.device;
        assert_eq!(device.resolve().unwrap(), profile);
    }

    /// The calibration holds: every published figure of every built-in profile within +-25 %.
    #[test]
    fn every_builtin_profile_matches_its_published_figures() {
        let size = BenchSize {
            sequential_bytes: 128 * 1024 * 1024,
            random_ops: 2000,
        };
        for profile in builtin_profiles() {
            let depth = vendor_queue_depth(&profile);
            for pattern in Pattern::ALL {
                let Some(published) = pattern.published(&profile.published) else {
                    continue;
                };
                let measured = figure(pattern, &run(&profile, pattern, depth, size).unwrap());
                let deviation = measured / published - 1.0;
                assert!(
                    deviation.abs() <= 0.25,
                    "{} {:?}: {measured:.0} vs {published}",
                    profile.name,
                    pattern
                );
            }
        }
    }

    #[test]
    fn a_fit_that_cannot_reach_a_target_says_which_and_why() {
        // 5 GB/s of sequential reads: beyond UFS 3.1's 2.32 GB/s bus.
        let targets =
            crate::dev::profile::parse_fit_targets("5GB/s", "100MB/s", "10000", "10000").unwrap();
        let (_, value) = fit_report(&targets).unwrap();
        let unreached = unreached_targets(&value);
        assert_eq!(unreached.len(), 1, "{unreached:?}");
        assert!(
            unreached[0].starts_with("seq read 512KiB: reached"),
            "{unreached:?}"
        );
        assert!(
            unreached[0].contains("host bus (2320 MB/s)"),
            "{unreached:?}"
        );
        let reachable =
            crate::dev::profile::parse_fit_targets("200MB/s", "100MB/s", "9000", "10000").unwrap();
        let (_, value) = fit_report(&reachable).unwrap();
        assert!(unreached_targets(&value).is_empty());
    }

    #[test]
    fn fit_targets_reject_bad_numbers() {
        assert!(crate::dev::profile::parse_fit_targets("250", "1MB/s", "1", "1").is_err());
        assert!(crate::dev::profile::parse_fit_targets("250MB/s", "1MB/s", "-3", "1").is_err());
        assert!(crate::dev::profile::parse_fit_targets("250MB/s", "1MB/s", "lots", "1").is_err());
    }

    #[test]
    fn queue_depth_raises_random_read_throughput_on_a_queued_device() {
        let mut profile = builtin_profile("ufs-2.0").unwrap();
        profile.capacity = 1 << 30;
        let qd1 = run(&profile, Pattern::RandRead, 1, small()).unwrap();
        let qd32 = run(&profile, Pattern::RandRead, 32, small()).unwrap();
        assert_eq!(qd32.queue_depth, 32);
        assert!(qd32.iops > 2.0 * qd1.iops, "{qd1:?} {qd32:?}");
        let mut emmc = builtin_profile("emmc-5.0").unwrap();
        emmc.capacity = 1 << 30;
        assert_eq!(
            run(&emmc, Pattern::RandRead, 32, small())
                .unwrap()
                .queue_depth,
            1
        );
    }
}
