//! The results of `mobistack fio` in fio's own formats: the normal text output and the JSON
//! (`--output-format=json`, and `json+` with latency histogram bins), so that fio's analysis
//! and plotting scripts (`fio_jsonplus_clat2csv`, `fio2gnuplot`'s JSON readers, ...) read them.
//!
//! The JSON follows fio 3.33's `show_thread_status_json` / `add_ddir_status_json` (stat.c):
//! `fio version`, `jobs[]` with `jobname`, `groupid`, `read` / `write` / `trim` (`io_bytes`,
//! `io_kbytes`, `bw_bytes`, `bw` in KiB/s, `iops`, `runtime` in ms, `total_ios`, `slat_ns`,
//! `clat_ns`, `lat_ns` with `min`, `max`, `mean`, `stddev`, `N` and a `percentile` map keyed
//! "99.000000", `bw_*` and `iops_*` over 500 ms samples), `sync`, `iodepth_level`,
//! `latency_ns` / `_us` / `_ms`. Percentiles and bins use fio's histogram (`plat_val_to_idx`: 64
//! buckets per power of two, a value's bucket reported as its middle), so they are what fio
//! would print for the same latencies.
//!
//! What differs, and why: times are virtual (`timestamp` 0, `elapsed` in virtual seconds); CPU
//! time is not modelled (`usr_cpu`, `sys_cpu`, `ctx`, `majf`, `minf` are 0); there is no
//! `disk_util` (the block layer's merge counts are in the extra `mobistack` object, with the
//! device and elevator). Each job clone of `numjobs` is its own entry under the job's name, as
//! fio lists them without `group_reporting`.

use crate::block::blktrace::BlkTrace;
use crate::block::fio::{DirectionStats, FioJob, JobStats, LatencySamples, DDIR_NAMES};
use crate::block::queue::QueueStats;
use crate::units::{Nanos, NS_PER_MS, NS_PER_SEC};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The fio version whose output format this follows.
pub const FIO_VERSION: &str = "fio-3.33";

/// fio's default `percentile_list`.
pub const PERCENTILES: [f64; 17] = [
    1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95,
    99.99,
];

/// `FIO_IO_U_PLAT_BITS`: 2^6 buckets per power of two.
const PLAT_BITS: u32 = 6;
const PLAT_VAL: u64 = 1 << PLAT_BITS;
/// `FIO_IO_U_PLAT_NR`: 29 groups of 64 buckets.
const PLAT_NR: u64 = 29 * PLAT_VAL;

/// fio's `plat_val_to_idx`: the histogram bucket of a latency in ns.
pub fn plat_val_to_idx(value: u64) -> u64 {
    let msb = if value == 0 {
        0
    } else {
        63 - u64::from(value.leading_zeros())
    };
    if msb <= u64::from(PLAT_BITS) {
        return value;
    }
    let error_bits = msb - u64::from(PLAT_BITS);
    let base = (error_bits + 1) << PLAT_BITS;
    let offset = (PLAT_VAL - 1) & (value >> error_bits);
    (base + offset).min(PLAT_NR - 1)
}

/// fio's `plat_idx_to_val`: the value a bucket stands for (the middle of its range).
pub fn plat_idx_to_val(index: u64) -> u64 {
    assert!(index < PLAT_NR, "bucket {index} out of range");
    if index < (PLAT_VAL << 1) {
        return index;
    }
    let error_bits = (index >> PLAT_BITS) - 1;
    let base = 1u64 << (error_bits + u64::from(PLAT_BITS));
    let k = index % PLAT_VAL;
    base + ((k as f64 + 0.5) * (1u64 << error_bits) as f64) as u64
}

/// Count, min, max, mean and (sample) standard deviation, as fio's `calc_lat`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LatencyStat {
    pub samples: u64,
    pub min: u64,
    pub max: u64,
    pub mean: f64,
    pub stddev: f64,
}

impl LatencyStat {
    pub fn of(latencies: &LatencySamples) -> LatencyStat {
        let values = &latencies.samples;
        if values.is_empty() {
            return LatencyStat::default();
        }
        let n = values.len() as f64;
        let mean = values.iter().map(|&v| v as f64).sum::<f64>() / n;
        let squares: f64 = values.iter().map(|&v| (v as f64 - mean).powi(2)).sum();
        LatencyStat {
            samples: values.len() as u64 + latencies.dropped,
            min: *values.iter().min().expect("non-empty"),
            max: *values.iter().max().expect("non-empty"),
            mean,
            stddev: if values.len() > 1 {
                (squares / (n - 1.0)).sqrt()
            } else {
                0.0
            },
        }
    }
}

/// The non-empty histogram buckets of some latencies: (bucket index, count), ascending.
fn buckets(latencies: &LatencySamples) -> Vec<(u64, u64)> {
    let mut counts: BTreeMap<u64, u64> = BTreeMap::new();
    for &value in &latencies.samples {
        *counts.entry(plat_val_to_idx(value)).or_insert(0) += 1;
    }
    counts.into_iter().collect()
}

/// fio's `calc_clat_percentiles`: for each of [`PERCENTILES`], the value of the first bucket at
/// which the running count reaches that share of the samples.
pub fn percentiles(latencies: &LatencySamples) -> Vec<(f64, u64)> {
    let buckets = buckets(latencies);
    let total = latencies.samples.len() as f64;
    let mut out = Vec::with_capacity(PERCENTILES.len());
    let mut sum = 0u64;
    let mut next = 0;
    for (index, count) in buckets {
        sum += count;
        while next < PERCENTILES.len() && sum as f64 >= PERCENTILES[next] / 100.0 * total {
            out.push((PERCENTILES[next], plat_idx_to_val(index)));
            next += 1;
        }
        if next == PERCENTILES.len() {
            break;
        }
    }
    out
}

/// fio's `num2str`: `num` (in units of `base`) with at most `max_digits` digits, scaled by
/// 1000 (SI prefixes) or 1024 (IEC, `binary`), rounding the carry, plus the unit.
pub fn num2str(mut num: u64, max_digits: usize, base: u64, binary: bool, unit: &str) -> String {
    const SI: [&str; 7] = ["", "k", "M", "G", "T", "P", "E"];
    const IEC: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    let thousand: u64 = if binary { 1024 } else { 1000 };
    let prefixes = if binary { IEC } else { SI };
    let mut post = 0;
    let mut base = base;
    while base > 1 {
        base /= thousand;
        post += 1;
    }
    let mut modulo: Option<u64> = None;
    let mut carry = false;
    while post < prefixes.len() {
        if num.to_string().len() <= max_digits {
            break;
        }
        let m = num % thousand;
        modulo = Some(m);
        num /= thousand;
        carry = m >= thousand / 2;
        post += 1;
    }
    if post >= prefixes.len() {
        post = 0;
    }
    let Some(modulo) = modulo else {
        return format!("{num}{}{unit}", prefixes[post]);
    };
    let digits = num.to_string().len();
    if max_digits.saturating_sub(digits) <= 1 {
        if carry {
            num += 1;
        }
        return format!("{num}{}{unit}", prefixes[post]);
    }
    let decimals = max_digits - digits - 1;
    let fraction = format!("{:.*}", decimals, modulo as f64 / thousand as f64);
    if fraction.starts_with('1') {
        num += 1;
    }
    format!("{num}.{}{}{unit}", &fraction[2..], prefixes[post])
}

/// One job clone's results.
#[derive(Debug, Clone)]
pub struct FioJobReport {
    pub job: FioJob,
    /// Reporting group: a `stonewall` starts a new one, as in fio.
    pub groupid: u32,
    pub pid: u32,
    pub stats: JobStats,
}

impl FioJobReport {
    /// The job's runtime in ms as fio reports it (at least 1 once it did I/O).
    fn runtime_ms(&self) -> u64 {
        let ns = self.stats.end_ns.saturating_sub(self.stats.start_ns);
        if ns == 0 {
            return 0;
        }
        ((ns + NS_PER_MS / 2) / NS_PER_MS).max(1)
    }

    fn elapsed_ns(&self) -> Nanos {
        self.stats.end_ns.saturating_sub(self.stats.start_ns).max(1)
    }

    /// Bytes per second over the job's run.
    fn bw_bytes(&self, direction: &DirectionStats) -> f64 {
        direction.bytes as f64 * NS_PER_SEC as f64 / self.elapsed_ns() as f64
    }

    fn iops(&self, direction: &DirectionStats) -> f64 {
        direction.ios as f64 * NS_PER_SEC as f64 / self.elapsed_ns() as f64
    }
}

/// Everything a fio run produced.
pub struct FioReport {
    pub elevator: String,
    pub device: String,
    pub jobs: Vec<FioJobReport>,
    pub queue: QueueStats,
    pub trace: Option<BlkTrace>,
    /// Virtual time at the end of the run.
    pub end_ns: Nanos,
}

/// Bandwidth (KiB/s) or IOPS samples of full [`crate::block::fio::SAMPLE_WINDOW_NS`] windows:
/// (min, max, mean, stddev, samples), as fio's `bw_stat` / `iops_stat`.
fn window_stat(windows: &[u64], full: usize, per_second: f64) -> (u64, u64, f64, f64, u64) {
    let values: Vec<f64> = windows
        .iter()
        .take(full)
        .map(|&v| v as f64 * per_second)
        .collect();
    if values.is_empty() {
        return (0, 0, 0.0, 0.0, 0);
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let dev = if values.len() > 1 {
        (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
    } else {
        0.0
    };
    let min = values.iter().cloned().fold(f64::INFINITY, f64::min);
    let max = values.iter().cloned().fold(0.0, f64::max);
    (min as u64, max as u64, mean, dev, values.len() as u64)
}

/// fio's latency buckets (`io_u_lat_n/u/m`) of the completion latencies: percentages per range.
fn latency_ranges(jobs: &JobStats) -> [Vec<(&'static str, f64)>; 3] {
    const RANGES: [&str; 10] = [
        "2", "4", "10", "20", "50", "100", "250", "500", "750", "1000",
    ];
    const MS_RANGES: [&str; 12] = [
        "2", "4", "10", "20", "50", "100", "250", "500", "750", "1000", "2000", ">=2000",
    ];
    fn index(value: u64) -> usize {
        match value {
            0..=1 => 0,
            2..=3 => 1,
            4..=9 => 2,
            10..=19 => 3,
            20..=49 => 4,
            50..=99 => 5,
            100..=249 => 6,
            250..=499 => 7,
            500..=749 => 8,
            750..=999 => 9,
            1000..=1999 => 10,
            _ => 11,
        }
    }
    let mut counts = [[0u64; 12]; 3];
    let mut total = 0u64;
    for direction in &jobs.directions {
        for &nanos in &direction.clat.samples {
            total += 1;
            if nanos < 1_000 {
                counts[0][index(nanos)] += 1;
            } else if nanos < 1_000_000 {
                counts[1][index(nanos / 1_000)] += 1;
            } else {
                counts[2][index(nanos / 1_000_000)] += 1;
            }
        }
    }
    let share = |count: u64| {
        if total == 0 {
            0.0
        } else {
            100.0 * count as f64 / total as f64
        }
    };
    [
        RANGES
            .iter()
            .enumerate()
            .map(|(i, r)| (*r, share(counts[0][i])))
            .collect(),
        RANGES
            .iter()
            .enumerate()
            .map(|(i, r)| (*r, share(counts[1][i])))
            .collect(),
        MS_RANGES
            .iter()
            .enumerate()
            .map(|(i, r)| (*r, share(counts[2][i])))
            .collect(),
    ]
}

/// `add_ddir_lat_json`: min, max, mean, stddev, N, and with `with_percentiles` the percentile
/// map (and for json+ the histogram bins).
fn lat_json(latencies: &LatencySamples, with_percentiles: bool, plus: bool) -> Value {
    let stat = LatencyStat::of(latencies);
    let mut object = Map::new();
    object.insert("min".into(), json!(stat.min));
    object.insert("max".into(), json!(stat.max));
    object.insert("mean".into(), json!(stat.mean));
    object.insert("stddev".into(), json!(stat.stddev));
    object.insert("N".into(), json!(stat.samples));
    if with_percentiles && stat.samples > 0 {
        let mut map = Map::new();
        for (p, value) in percentiles(latencies) {
            map.insert(format!("{p:.6}"), json!(value));
        }
        object.insert("percentile".into(), Value::Object(map));
        if plus {
            let mut bins = Map::new();
            for (index, count) in buckets(latencies) {
                bins.insert(plat_idx_to_val(index).to_string(), json!(count));
            }
            object.insert("bins".into(), Value::Object(bins));
        }
    }
    Value::Object(object)
}

/// fio's io_u_map percentages over depth buckets 1, 2, 4, 8, 16, 32, >=64.
fn depth_json(counts: &[u64; 7], names: [&str; 7]) -> Value {
    let total: u64 = counts.iter().sum();
    let mut object = Map::new();
    for (i, name) in names.iter().enumerate() {
        let share = if total == 0 {
            0.0
        } else {
            100.0 * counts[i] as f64 / total as f64
        };
        object.insert(name.to_string(), json!(share));
    }
    Value::Object(object)
}

impl FioReport {
    /// The groups' aggregate bandwidth per direction (KiB/s), for `bw_agg`.
    fn group_bw_kib(&self, groupid: u32, direction: usize) -> f64 {
        self.jobs
            .iter()
            .filter(|j| j.groupid == groupid)
            .map(|j| j.bw_bytes(&j.stats.directions[direction]) / 1024.0)
            .sum()
    }

    fn direction_json(&self, report: &FioJobReport, d: usize, plus: bool) -> Value {
        let direction = &report.stats.directions[d];
        let job = &report.job;
        let runtime = if direction.ios > 0 {
            report.runtime_ms()
        } else {
            0
        };
        let bw_bytes = if runtime > 0 {
            report.bw_bytes(direction) as u64
        } else {
            0
        };
        let iops = if runtime > 0 {
            report.iops(direction)
        } else {
            0.0
        };
        let full_windows = (report.elapsed_ns() / crate::block::fio::SAMPLE_WINDOW_NS) as usize;
        let per_second = NS_PER_SEC as f64 / crate::block::fio::SAMPLE_WINDOW_NS as f64;
        let (bw_min, bw_max, bw_mean, bw_dev, bw_samples) =
            window_stat(&direction.window_bytes, full_windows, per_second / 1024.0);
        let (iops_min, iops_max, iops_mean, iops_dev, iops_samples) =
            window_stat(&direction.window_ios, full_windows, per_second);
        let aggregate = self.group_bw_kib(report.groupid, d);
        let bw_agg = if bw_samples > 0 && aggregate > 0.0 {
            100.0 * bw_mean / aggregate
        } else {
            0.0
        };
        json!({
            "io_bytes": direction.bytes,
            "io_kbytes": direction.bytes >> 10,
            "bw_bytes": bw_bytes,
            "bw": bw_bytes / 1024,
            "iops": iops,
            "runtime": runtime,
            "total_ios": direction.ios,
            "short_ios": 0,
            "drop_ios": 0,
            "slat_ns": lat_json(&direction.slat, job.slat_percentiles, plus),
            "clat_ns": lat_json(&direction.clat, job.clat_percentiles, plus),
            "lat_ns": lat_json(&direction.lat, job.lat_percentiles, plus),
            "bw_min": bw_min,
            "bw_max": bw_max,
            "bw_agg": bw_agg,
            "bw_mean": bw_mean,
            "bw_dev": bw_dev,
            "bw_samples": bw_samples,
            "iops_min": iops_min,
            "iops_max": iops_max,
            "iops_mean": iops_mean,
            "iops_stddev": iops_dev,
            "iops_samples": iops_samples,
        })
    }

    fn job_json(&self, report: &FioJobReport, plus: bool) -> Value {
        let job = &report.job;
        let [lat_n, lat_u, lat_m] = latency_ranges(&report.stats);
        let ranges = |ranges: Vec<(&str, f64)>| {
            Value::Object(
                ranges
                    .into_iter()
                    .map(|(name, share)| (name.to_string(), json!(share)))
                    .collect(),
            )
        };
        let total_ios: u64 = report.stats.directions.iter().map(|d| d.ios).sum();
        // Each I/O is submitted and completed on its own: io_submit / getevents of one.
        let mut one_at_a_time = [0u64; 7];
        one_at_a_time[1] = total_ios;
        let mut options = Map::new();
        options.insert("rw".into(), json!(rw_name(job)));
        options.insert("bs".into(), json!(job.bs.to_string()));
        options.insert("ioengine".into(), json!(job.ioengine));
        options.insert("iodepth".into(), json!(job.iodepth.to_string()));
        options.insert("direct".into(), json!(if job.direct { "1" } else { "0" }));
        if let Some(size) = job.size {
            options.insert("size".into(), json!(size.to_string()));
        }
        json!({
            "jobname": job.name,
            "groupid": report.groupid,
            "error": 0,
            "eta": 0,
            "elapsed": report.elapsed_ns().div_ceil(NS_PER_SEC),
            "job options": options,
            "read": self.direction_json(report, 0, plus),
            "write": self.direction_json(report, 1, plus),
            "trim": self.direction_json(report, 2, plus),
            "sync": {
                "total_ios": 0,
                "lat_ns": {"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0},
            },
            "job_runtime": report.runtime_ms(),
            "usr_cpu": 0.0,
            "sys_cpu": 0.0,
            "ctx": 0,
            "majf": 0,
            "minf": 0,
            "iodepth_level": depth_json(
                &report.stats.depth_buckets,
                ["1", "2", "4", "8", "16", "32", ">=64"],
            ),
            "iodepth_submit": depth_json(&one_at_a_time, ["0", "4", "8", "16", "32", "64", ">=64"]),
            "iodepth_complete": depth_json(&one_at_a_time, ["0", "4", "8", "16", "32", "64", ">=64"]),
            "latency_ns": ranges(lat_n),
            "latency_us": ranges(lat_u),
            "latency_ms": ranges(lat_m),
            "latency_depth": job.iodepth,
            "latency_target": 0,
            "latency_percentile": 100.0,
            "latency_window": 0,
        })
    }

    /// fio's JSON (`--output-format=json`), or json+ with the histogram bins (`plus`).
    pub fn json(&self, plus: bool) -> Value {
        let jobs: Vec<Value> = self.jobs.iter().map(|j| self.job_json(j, plus)).collect();
        json!({
            "fio version": FIO_VERSION,
            "timestamp": 0,
            "timestamp_ms": 0,
            "time": "Thu Jan  1 00:00:00 1970",
            "jobs": jobs,
            "mobistack": {
                "version": env!("CARGO_PKG_VERSION"),
                "note": "simulated: virtual time, no CPU accounting",
                "device": self.device,
                "elevator": self.elevator,
                "end_ns": self.end_ns,
                "queue": self.queue,
            },
        })
    }

    /// fio's normal text output.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for report in &self.jobs {
            let job = &report.job;
            let bs = job.bs;
            let _ = writeln!(
                out,
                "{}: (g={}): rw={}, bs=(R) {bs}B-{bs}B, (W) {bs}B-{bs}B, (T) {bs}B-{bs}B, ioengine={}, iodepth={}",
                job.name,
                report.groupid,
                rw_name(job),
                job.ioengine,
                job.iodepth
            );
        }
        let _ = writeln!(
            out,
            "{FIO_VERSION} job file, simulated by mobistack on {} under {} ({} s of virtual time)",
            self.device,
            self.elevator,
            format_seconds(self.end_ns)
        );
        for report in &self.jobs {
            out.push('\n');
            self.job_text(report, &mut out);
        }
        let groups: std::collections::BTreeSet<u32> = self.jobs.iter().map(|j| j.groupid).collect();
        for group in groups {
            let _ = writeln!(out, "\nRun status group {group} (all jobs):");
            for (d, name) in ["READ", "WRITE", "TRIM"].iter().enumerate() {
                let members: Vec<&FioJobReport> = self
                    .jobs
                    .iter()
                    .filter(|j| j.groupid == group && j.stats.directions[d].ios > 0)
                    .collect();
                if members.is_empty() {
                    continue;
                }
                let bytes: u64 = members.iter().map(|j| j.stats.directions[d].bytes).sum();
                let runs: Vec<u64> = members.iter().map(|j| j.runtime_ms()).collect();
                let run_max = *runs.iter().max().expect("members");
                let run_min = *runs.iter().min().expect("members");
                let bws: Vec<u64> = members
                    .iter()
                    .map(|j| j.bw_bytes(&j.stats.directions[d]) as u64)
                    .collect();
                let group_bw = (bytes as f64 * 1000.0 / run_max.max(1) as f64) as u64;
                let bw = |value: u64, binary: bool| num2str(value, 4, 1, binary, "B/s");
                let min_bw = *bws.iter().min().expect("members");
                let max_bw = *bws.iter().max().expect("members");
                let _ = writeln!(
                    out,
                    "{name:>7}: bw={} ({}), {}-{} ({}-{}), io={} ({}), run={run_min}-{run_max}msec",
                    bw(group_bw, true),
                    bw(group_bw, false),
                    bw(min_bw, true),
                    bw(max_bw, true),
                    bw(min_bw, false),
                    bw(max_bw, false),
                    num2str(bytes, 4, 1, true, "B"),
                    num2str(bytes, 4, 1, false, "B"),
                );
            }
        }
        let q = &self.queue;
        let _ = writeln!(
            out,
            "\nBlock layer ({}, {}): {} bios -> {} requests ({} plug merges, {} back merges, {} front merges; {:.2} bios/request); {} get_request sleeps",
            self.device,
            self.elevator,
            q.bios,
            q.requests,
            q.plug_merges,
            q.back_merges,
            q.front_merges,
            q.bios as f64 / q.requests.max(1) as f64,
            q.alloc_sleeps
        );
        out
    }

    fn job_text(&self, report: &FioJobReport, out: &mut String) {
        let job = &report.job;
        let _ = writeln!(
            out,
            "{}: (groupid={}, jobs=1): err= 0: pid={}: virtual time {:.3}-{:.3} s",
            job.name,
            report.groupid,
            report.pid,
            report.stats.start_ns as f64 / 1e9,
            report.stats.end_ns as f64 / 1e9
        );
        for (d, name) in DDIR_NAMES.iter().enumerate() {
            let direction = &report.stats.directions[d];
            if direction.ios == 0 {
                continue;
            }
            let runtime = report.runtime_ms();
            let bw = report.bw_bytes(direction) as u64;
            let _ = writeln!(
                out,
                "  {name}: IOPS={}, BW={} ({})({}/{runtime}msec)",
                num2str(report.iops(direction) as u64, 4, 1, false, ""),
                num2str(bw, 4, 1, true, "B/s"),
                num2str(bw, 4, 1, false, "B/s"),
                num2str(direction.bytes, 4, 1, true, "B"),
            );
            for (label, latencies) in [
                ("slat", &direction.slat),
                ("clat", &direction.clat),
                (" lat", &direction.lat),
            ] {
                let stat = LatencyStat::of(latencies);
                if stat.samples > 0 {
                    display_lat(label, stat, out);
                }
            }
            for (enabled, label, latencies) in [
                (job.slat_percentiles, "slat", &direction.slat),
                (job.clat_percentiles, "clat", &direction.clat),
                (job.lat_percentiles, "lat", &direction.lat),
            ] {
                if enabled && !latencies.samples.is_empty() {
                    show_percentiles(label, latencies, out);
                }
            }
        }
        let units = ["nsec", "usec", "msec"];
        for (unit, ranges) in units.iter().zip(latency_ranges(&report.stats)) {
            let shown: Vec<String> = ranges
                .iter()
                .filter(|(_, share)| *share > 0.0)
                .map(|(range, share)| format!("{range}={share:.2}%"))
                .collect();
            for line in shown.chunks(5) {
                let _ = writeln!(out, "  lat ({unit})   : {}", line.join(", "));
            }
        }
        let _ = writeln!(
            out,
            "  cpu          : usr=0.00%, sys=0.00%, ctx=0, majf=0, minf=0"
        );
        let depths = &report.stats.depth_buckets;
        let total: u64 = depths.iter().sum::<u64>().max(1);
        let names = ["1", "2", "4", "8", "16", "32", ">=64"];
        let shares: Vec<String> = names
            .iter()
            .zip(depths)
            .map(|(name, count)| format!("{name}={:.1}%", 100.0 * *count as f64 / total as f64))
            .collect();
        let _ = writeln!(out, "  IO depths    : {}", shares.join(", "));
        let d = &report.stats.directions;
        let _ = writeln!(
            out,
            "     issued rwts: total={},{},{},0 short=0,0,0,0 dropped=0,0,0,0",
            d[0].ios, d[1].ios, d[2].ios
        );
    }
}

fn format_seconds(nanos: Nanos) -> String {
    format!("{:.3}", nanos as f64 / 1e9)
}

/// `rw=` as fio prints it.
fn rw_name(job: &FioJob) -> &'static str {
    use crate::block::fio::RwMode;
    match job.rw {
        RwMode::Read => "read",
        RwMode::Write => "write",
        RwMode::RandRead => "randread",
        RwMode::RandWrite => "randwrite",
        RwMode::ReadWrite => "rw",
        RwMode::RandRw => "randrw",
        RwMode::Trim => "trim",
        RwMode::RandTrim => "randtrim",
    }
}

/// fio's `display_lat`: "clat (usec): min=..., max=..., avg=..., stdev=..." in the unit fio
/// picks (`nsec_to_msec`, `nsec_to_usec`).
fn display_lat(label: &str, stat: LatencyStat, out: &mut String) {
    let (mut min, mut max, mut mean, mut dev) = (stat.min, stat.max, stat.mean, stat.stddev);
    let unit = if min > 2_000_000 && max > 99_999_999 && dev > 1_000_000.0 {
        min /= 1_000_000;
        max /= 1_000_000;
        mean /= 1e6;
        dev /= 1e6;
        "msec"
    } else if min > 2_000 && max > 99_999 && dev > 1_000.0 {
        min /= 1_000;
        max /= 1_000;
        mean /= 1e3;
        dev /= 1e3;
        "usec"
    } else {
        "nsec"
    };
    let _ = writeln!(
        out,
        "    {label} ({unit}): min={}, max={}, avg={mean:5.02}, stdev={dev:5.02}",
        num2str(min, 6, 1, false, ""),
        num2str(max, 6, 1, false, ""),
    );
}

/// fio's `show_clat_percentiles`: four to a line, in the unit the range calls for.
fn show_percentiles(label: &str, latencies: &LatencySamples, out: &mut String) {
    let values = percentiles(latencies);
    if values.is_empty() {
        return;
    }
    let min = values.iter().map(|(_, v)| *v).min().expect("non-empty");
    let max = values.iter().map(|(_, v)| *v).max().expect("non-empty");
    let (unit, scale_down) = if min > 2_000_000 && max > 99_999_999 {
        ("msec", 2)
    } else if min > 2_000 && max > 99_999 {
        ("usec", 1)
    } else {
        ("nsec", 0)
    };
    let divisor = 1000u64.pow(scale_down);
    let width = (((max / divisor).max(1) as f64).log10() as usize + 1).max(5);
    let per_line = (80 - 7) / (2 + 10 + width);
    let _ = write!(out, "    {label} percentiles ({unit}):\n     |");
    for (j, (p, value)) in values.iter().enumerate() {
        if j != 0 && j % per_line == 0 {
            out.push_str("     |");
        }
        let mut value = *value;
        for _ in 0..scale_down {
            value = value.div_ceil(1000);
        }
        let last = j == values.len() - 1;
        let _ = write!(
            out,
            " {p:5.2}th=[{value:width$}]{}",
            if last { '\n' } else { ',' }
        );
        if !last && j % per_line == per_line - 1 {
            out.push('\n');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_fios() {
        // Small values are exact; above 2^7 each power of two has 64 buckets.
        assert_eq!(plat_val_to_idx(100), 100);
        assert_eq!(plat_idx_to_val(100), 100);
        assert_eq!(plat_val_to_idx(128), 128);
        // 1,000,000 ns: msb 19, 13 error bits, bucket 14*64 + (1e6 >> 13 & 63).
        let index = plat_val_to_idx(1_000_000);
        assert_eq!(index, 14 * 64 + ((1_000_000u64 >> 13) & 63));
        let value = plat_idx_to_val(index);
        assert!(
            (value as f64 - 1e6).abs() / 1e6 < 1.0 / 128.0,
            "{value}: within fio's 1/2^(bits+1) error"
        );
        for v in [0u64, 1, 63, 64, 129, 4_096, 123_456_789, u64::MAX / 4] {
            assert!(plat_val_to_idx(v) < PLAT_NR, "{v}");
        }
    }

    #[test]
    fn percentiles_follow_calc_clat_percentiles() {
        let latencies = LatencySamples {
            samples: (1..=100).collect(),
            dropped: 0,
        };
        let values = percentiles(&latencies);
        assert_eq!(values.len(), PERCENTILES.len());
        assert_eq!(values[0], (1.0, 1));
        assert_eq!(values[6], (50.0, 50));
        assert_eq!(values[12], (99.0, 99));
        assert_eq!(values[16], (99.99, 100));
    }

    #[test]
    fn num2str_matches_fio() {
        // Examples from fio's own output.
        assert_eq!(num2str(18_768_000, 4, 1, true, "B/s"), "17.9MiB/s");
        assert_eq!(num2str(18_768_000, 4, 1, false, "B/s"), "18.8MB/s");
        assert_eq!(num2str(4_071_424, 4, 1, true, "B"), "3976KiB");
        assert_eq!(num2str(4_071_424, 4, 1, false, "B"), "4071kB");
        assert_eq!(num2str(14_998_000, 6, 1, false, ""), "14998k");
        assert_eq!(num2str(4580, 4, 1, false, ""), "4580");
        assert_eq!(num2str(45_800, 4, 1, false, ""), "45.8k");
    }
}
