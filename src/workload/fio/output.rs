//! The results of `mobistack fio` in fio's own formats: the normal text output and the JSON
//! (`--output-format=json`, and `json+` with latency histogram bins), so that fio's analysis
//! and plotting scripts (`fio_jsonplus_clat2csv`, `fio2gnuplot`'s JSON readers, ...) read them.
//!
//! The JSON follows fio 3.33's `show_thread_status_json` / `add_ddir_status_json` (stat.c):
//! `fio version`, `jobs[]` with `jobname`, `groupid`, `read` / `write` / `trim` (`io_bytes`,
//! `io_kbytes`, `bw_bytes`, `bw` in KiB/s, `iops`, `runtime` in ms, `total_ios`, `slat_ns`,
//! `clat_ns`, `lat_ns` with `min`, `max`, `mean`, `stddev`, `N` and a `percentile` map keyed
//! "99.000000", `bw_*` and `iops_*` over 500 ms samples), `sync`, `iodepth_level`,
//! `latency_ns` / `_us` / `_ms`. The numbers are read from what the job recorded as fio records
//! it ([`super::stats::LatencyStats`], [`super::stats::LatencyRanges`]): min, max, and
//! `calc_lat`'s mean and standard deviation from Welford's running sums; percentiles
//! (`calc_clat_percentiles`) and bins from the histogram `io_u_plat` (`plat_val_to_idx`: 64
//! buckets per power of two, a value's bucket reported as its middle), so they are what fio
//! would print for the same latencies; the latency ranges from `io_u_lat_n` / `_u` / `_m`.
//!
//! What differs, and why: times are virtual (`timestamp` 0, `elapsed` in virtual seconds); CPU
//! time is not modelled (`usr_cpu`, `sys_cpu`, `ctx`, `majf`, `minf` are 0); there is no
//! `disk_util` (the block layer's merge counts are in the extra `mobistack` object, with the
//! device and elevator). Each job clone of `numjobs` is its own entry under the job's name, as
//! fio lists them without `group_reporting`.

use super::job::FioJob;
pub use super::stats::{plat_idx_to_val, plat_val_to_idx};
use super::stats::{DirectionStats, JobStats, LatencyStats, DDIR_NAMES};
use crate::block::blktrace::BlkTrace;
use crate::block::queue::QueueStats;
use crate::units::{Nanos, NS_PER_MS, NS_PER_SEC};
use serde_json::{json, Map, Value};
use std::fmt::Write as _;

/// The fio version whose output format this follows.
pub const FIO_VERSION: &str = "fio-3.33";

/// fio's default `percentile_list`.
pub const PERCENTILES: [f64; 17] = [
    1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95,
    99.99,
];

/// fio's `calc_clat_percentiles`: for each of [`PERCENTILES`], the value of the first bucket at
/// which the running count reaches that share of the samples.
pub fn percentiles(latencies: &LatencyStats) -> Vec<(f64, u64)> {
    let total = latencies.samples() as f64;
    let mut out = Vec::with_capacity(PERCENTILES.len());
    let mut sum = 0u64;
    let mut next = 0;
    for (index, count) in latencies.buckets() {
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
    /// The job clones reported as this one: 1, or a group's with `group_reporting`.
    pub clones: u32,
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
    /// What the kernel still had to do when the last job ended.
    pub left_at_end: LeftAtEnd,
}

/// The kernel's work left when the last job ended. fio reports its jobs' own I/O and exits
/// without waiting for the page cache (`end_fsync=0`, its default): buffered jobs leave dirty
/// pages and writeback or readahead bios in flight, which the kernel would finish after fio
/// exits. Counted here, not waited for; 0 and 0 for `direct=1` jobs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct LeftAtEnd {
    /// Bios submitted to the block layer and not yet completed.
    pub bios_in_flight: u64,
    /// Dirty pages of the jobs' files still in the page cache.
    pub dirty_pages: u64,
}

/// Bandwidth (KiB/s) or IOPS samples of full [`super::stats::SAMPLE_WINDOW_NS`] windows:
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

/// fio's latency buckets (`io_u_lat_n/u/m`) of the completion latencies: percentages per range
/// (`stat_calc_lat_n` / `_u` / `_m`).
fn latency_ranges(jobs: &JobStats) -> [Vec<(&'static str, f64)>; 3] {
    const RANGES: [&str; 10] = [
        "2", "4", "10", "20", "50", "100", "250", "500", "750", "1000",
    ];
    const MS_RANGES: [&str; 12] = [
        "2", "4", "10", "20", "50", "100", "250", "500", "750", "1000", "2000", ">=2000",
    ];
    let counts = &jobs.lat_ranges;
    let total = counts.total();
    let shares = |names: &[&'static str], counts: &[u64]| -> Vec<(&'static str, f64)> {
        names
            .iter()
            .zip(counts)
            .map(|(name, &count)| {
                let share = if total == 0 {
                    0.0
                } else {
                    100.0 * count as f64 / total as f64
                };
                (*name, share)
            })
            .collect()
    };
    [
        shares(&RANGES, &counts.nsec),
        shares(&RANGES, &counts.usec),
        shares(&MS_RANGES, &counts.msec),
    ]
}

/// `add_ddir_lat_json`: min, max, mean, stddev, N, and with `with_percentiles` the percentile
/// map (and for json+ the histogram bins).
fn lat_json(latencies: &LatencyStats, with_percentiles: bool, plus: bool) -> Value {
    let mut object = Map::new();
    object.insert("min".into(), json!(latencies.min()));
    object.insert("max".into(), json!(latencies.max()));
    object.insert("mean".into(), json!(latencies.mean()));
    object.insert("stddev".into(), json!(latencies.stddev()));
    object.insert("N".into(), json!(latencies.samples()));
    if with_percentiles && latencies.samples() > 0 {
        let mut map = Map::new();
        for (p, value) in percentiles(latencies) {
            map.insert(format!("{p:.6}"), json!(value));
        }
        object.insert("percentile".into(), Value::Object(map));
        if plus {
            let mut bins = Map::new();
            for (index, count) in latencies.buckets() {
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
        let full_windows = (report.elapsed_ns() / super::stats::SAMPLE_WINDOW_NS) as usize;
        let per_second = NS_PER_SEC as f64 / super::stats::SAMPLE_WINDOW_NS as f64;
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

    /// The jobs as fio reports them: each clone, except that the clones of a reporting group
    /// whose jobs set `group_reporting` are one entry, named after the group's first job
    /// (stat.c `__show_run_stats`: one `thread_stat` per group then).
    pub fn reported(&self) -> Vec<FioJobReport> {
        let mut out: Vec<FioJobReport> = Vec::new();
        for report in &self.jobs {
            match out.last_mut() {
                Some(last)
                    if report.job.group_reporting
                        && last.job.group_reporting
                        && last.groupid == report.groupid =>
                {
                    last.stats.merge(&report.stats);
                    last.clones += report.clones;
                }
                _ => out.push(report.clone()),
            }
        }
        out
    }

    /// fio's JSON (`--output-format=json`), or json+ with the histogram bins (`plus`).
    pub fn json(&self, plus: bool) -> Value {
        let jobs: Vec<Value> = self
            .reported()
            .iter()
            .map(|j| self.job_json(j, plus))
            .collect();
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
                "left_at_end": self.left_at_end,
                "queue": self.queue,
            },
        })
    }

    /// fio's normal text output.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for report in &self.jobs {
            let job = &report.job;
            let range = |d: usize| {
                let sizes = job.block_sizes(d);
                format!("{}B-{}B", sizes.min(), sizes.max())
            };
            let _ = writeln!(
                out,
                "{}: (g={}): rw={}, bs=(R) {}, (W) {}, (T) {}, ioengine={}, iodepth={}",
                job.name,
                report.groupid,
                rw_name(job),
                range(0),
                range(1),
                range(2),
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
        for report in &self.reported() {
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
        let left = self.left_at_end;
        if left.bios_in_flight + left.dirty_pages > 0 {
            let dirty = if left.dirty_pages > 0 {
                format!(
                    ", {} dirty pages ({}) in the page cache",
                    left.dirty_pages,
                    num2str(left.dirty_pages * crate::units::PAGE_SIZE, 4, 1, true, "B")
                )
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "Left to the kernel when the jobs ended: {} bios in flight (writeback, readahead){dirty}; fio exits without waiting for them (end_fsync=0)",
                left.bios_in_flight,
            );
        }
        out
    }

    fn job_text(&self, report: &FioJobReport, out: &mut String) {
        let job = &report.job;
        let _ = writeln!(
            out,
            "{}: (groupid={}, jobs={}): err= 0: pid={}: virtual time {:.3}-{:.3} s",
            job.name,
            report.groupid,
            report.clones,
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
                if latencies.samples() > 0 {
                    display_lat(label, latencies, out);
                }
            }
            for (enabled, label, latencies) in [
                (job.slat_percentiles, "slat", &direction.slat),
                (job.clat_percentiles, "clat", &direction.clat),
                (job.lat_percentiles, "lat", &direction.lat),
            ] {
                if enabled && latencies.samples() > 0 {
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
    use super::job::RwMode;
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
fn display_lat(label: &str, stat: &LatencyStats, out: &mut String) {
    let (mut min, mut max, mut mean, mut dev) =
        (stat.min(), stat.max(), stat.mean(), stat.stddev());
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
fn show_percentiles(label: &str, latencies: &LatencyStats, out: &mut String) {
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
    use std::collections::BTreeMap;

    use crate::workload::fio::stats::LatencyRanges;

    fn recorded(values: impl IntoIterator<Item = u64>) -> LatencyStats {
        let mut stats = LatencyStats::default();
        for value in values {
            stats.record(value);
        }
        stats
    }

    /// Latencies from ns to seconds, with repeats: a fixed pseudo-random sequence.
    fn spread(count: usize) -> Vec<u64> {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        (0..count)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                // A magnitude of 2^0 .. 2^33 ns, then a value within it.
                let bits = state % 34;
                ((state >> 8) & ((1u64 << bits) - 1)) | (1u64 << bits >> 1)
            })
            .collect()
    }

    #[test]
    fn percentiles_follow_calc_clat_percentiles() {
        let latencies = recorded(1..=100);
        let values = percentiles(&latencies);
        assert_eq!(values.len(), PERCENTILES.len());
        assert_eq!(values[0], (1.0, 1));
        assert_eq!(values[6], (50.0, 50));
        assert_eq!(values[12], (99.0, 99));
        assert_eq!(values[16], (99.99, 100));
    }

    #[test]
    fn percentiles_and_bins_are_those_of_the_samples() {
        // The computation over kept samples this replaced: bucket every sample, then walk the
        // buckets.
        /// Percentiles (percentile, value) and bins (value, count).
        type Histogram = (Vec<(f64, u64)>, Vec<(u64, u64)>);
        fn reference(samples: &[u64]) -> Histogram {
            let mut counts: BTreeMap<usize, u64> = BTreeMap::new();
            for &value in samples {
                *counts.entry(plat_val_to_idx(value)).or_insert(0) += 1;
            }
            let total = samples.len() as f64;
            let mut out = Vec::new();
            let mut sum = 0u64;
            let mut next = 0;
            for (&index, &count) in &counts {
                sum += count;
                while next < PERCENTILES.len() && sum as f64 >= PERCENTILES[next] / 100.0 * total {
                    out.push((PERCENTILES[next], plat_idx_to_val(index)));
                    next += 1;
                }
                if next == PERCENTILES.len() {
                    break;
                }
            }
            let bins = counts
                .into_iter()
                .map(|(index, count)| (plat_idx_to_val(index), count))
                .collect();
            (out, bins)
        }
        for samples in [
            spread(10_000),
            spread(7),
            vec![42],
            vec![0, 0, u64::MAX],
            (0..5_000).map(|i| 90_000 + i * 37).collect(),
        ] {
            let stats = recorded(samples.iter().copied());
            let (expected, expected_bins) = reference(&samples);
            assert_eq!(percentiles(&stats), expected);
            let bins: Vec<(u64, u64)> = stats
                .buckets()
                .map(|(index, count)| (plat_idx_to_val(index), count))
                .collect();
            assert_eq!(bins, expected_bins);
            let json = lat_json(&stats, true, true);
            assert_eq!(json["N"], samples.len() as u64);
            let json_bins: u64 = json["bins"]
                .as_object()
                .unwrap()
                .values()
                .map(|count| count.as_u64().unwrap())
                .sum();
            assert_eq!(json_bins, samples.len() as u64);
        }
    }

    #[test]
    fn latency_ranges_are_the_completion_latencies_shares() {
        // The computation over kept samples this replaced.
        fn reference(samples: &[u64]) -> [[u64; 12]; 3] {
            fn index(value: u64) -> usize {
                [2, 4, 10, 20, 50, 100, 250, 500, 750, 1000, 2000]
                    .iter()
                    .position(|&bound| value < bound)
                    .unwrap_or(11)
            }
            let mut counts = [[0u64; 12]; 3];
            for &nanos in samples {
                if nanos < 1_000 {
                    counts[0][index(nanos)] += 1;
                } else if nanos < 1_000_000 {
                    counts[1][index(nanos / 1_000)] += 1;
                } else {
                    counts[2][index(nanos / 1_000_000)] += 1;
                }
            }
            counts
        }
        let samples = spread(5_000);
        let mut stats = JobStats::default();
        for &value in &samples {
            stats.lat_ranges.mark(value);
        }
        assert_eq!(stats.lat_ranges.total(), 5_000);
        let expected = reference(&samples);
        let ranges = latency_ranges(&stats);
        for (row, (shares, counts)) in ranges.iter().zip(&expected).enumerate() {
            for (i, (_, share)) in shares.iter().enumerate() {
                assert_eq!(
                    *share,
                    100.0 * counts[i] as f64 / 5_000.0,
                    "row {row} range {i}"
                );
            }
        }
        // Some known values: 1 ns, 999 ns, 1 us, 249 us, 1 ms, 2 s.
        let mut ranges = LatencyRanges::default();
        for value in [1, 999, 1_000, 249_999, 1_000_000, 2_000_000_000] {
            ranges.mark(value);
        }
        assert_eq!((ranges.nsec[0], ranges.nsec[9]), (1, 1));
        assert_eq!((ranges.usec[0], ranges.usec[6]), (1, 1));
        assert_eq!((ranges.msec[0], ranges.msec[11]), (1, 1));
        let empty = latency_ranges(&JobStats::default());
        assert!(empty.iter().flatten().all(|(_, share)| *share == 0.0));
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
