//! What a fio job records of its I/O, as fio records it (stat.c, io_u.c), so memory does not
//! grow with the run's length and the report computes what fio computes: per direction and kind a
//! [`LatencyStats`], fio's `struct io_stat` (`add_stat_sample`: min, max, count, Welford's
//! running mean and `S`, whose `calc_lat` gives the mean and standard deviation) with the
//! histogram `io_u_plat` (`plat_val_to_idx` buckets, from which the report's percentiles and
//! json+ bins come); per job the completion latencies' ranges, [`LatencyRanges`]
//! (`io_u_mark_latency` into `io_u_lat_n` / `_u` / `_m`).

use crate::dev::IoOp;
use crate::units::Nanos;

/// A direction of I/O as fio counts them (`DDIR_READ`, `DDIR_WRITE`, `DDIR_TRIM`).
pub fn ddir(op: IoOp) -> usize {
    match op {
        IoOp::Read => 0,
        IoOp::Write | IoOp::Flush => 1,
        IoOp::Discard => 2,
    }
}

/// fio's names of the directions.
pub const DDIR_NAMES: [&str; 3] = ["read", "write", "trim"];

/// Width of a bandwidth / IOPS sample window: fio's `bw_avg_time` and `iops_avg_time` (500 ms).
pub const SAMPLE_WINDOW_NS: Nanos = 500 * crate::units::NS_PER_MS;

/// `FIO_IO_U_PLAT_BITS`: 2^6 histogram buckets per power of two.
const PLAT_BITS: u32 = 6;
/// `FIO_IO_U_PLAT_VAL`.
const PLAT_VAL: u64 = 1 << PLAT_BITS;
/// `FIO_IO_U_PLAT_NR`: 29 groups of 64 buckets (values up to about 2^34 ns, 17 s, in their own
/// bucket; longer ones in the last).
pub const PLAT_NR: usize = 29 * PLAT_VAL as usize;

/// fio's `plat_val_to_idx`: the histogram bucket of a latency in ns. Values below 2^7 have
/// their own bucket; above, each power of two is split into 64.
pub fn plat_val_to_idx(value: u64) -> usize {
    let msb = if value == 0 {
        0
    } else {
        63 - u64::from(value.leading_zeros())
    };
    if msb <= u64::from(PLAT_BITS) {
        return value as usize;
    }
    let error_bits = msb - u64::from(PLAT_BITS);
    let base = (error_bits + 1) << PLAT_BITS;
    let offset = (PLAT_VAL - 1) & (value >> error_bits);
    ((base + offset) as usize).min(PLAT_NR - 1)
}

/// fio's `plat_idx_to_val`: the value a bucket stands for (the middle of its range).
pub fn plat_idx_to_val(index: usize) -> u64 {
    assert!(index < PLAT_NR, "bucket {index} out of range");
    let index = index as u64;
    if index < (PLAT_VAL << 1) {
        return index;
    }
    let error_bits = (index >> PLAT_BITS) - 1;
    let base = 1u64 << (error_bits + u64::from(PLAT_BITS));
    let k = index % PLAT_VAL;
    base + ((k as f64 + 0.5) * (1u64 << error_bits) as f64) as u64
}

/// One kind of latency (slat, clat or lat) of one direction, kept as fio keeps it: the summary
/// of fio's `struct io_stat`, updated by `add_stat_sample` (stat.c: min, max, count, and the
/// running mean and sum of squared deviations `S` of Welford's method), and the histogram
/// `io_u_plat` (one count per [`plat_val_to_idx`] bucket: fio's `add_lat_percentile_sample`,
/// which its `add_slat_sample`, `add_clat_sample` and `add_lat_sample` call when that kind's
/// percentiles are on; here always, the report choosing what to print). No sample is kept: the
/// memory is constant (the histogram, [`PLAT_NR`] counts, allocated at the first sample),
/// however long the job runs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LatencyStats {
    samples: u64,
    min: Nanos,
    max: Nanos,
    mean: f64,
    /// Welford's `S`: the sum of squared deviations from the mean.
    s: f64,
    /// `io_u_plat`: counts per histogram bucket; empty until the first sample.
    plat: Vec<u64>,
}

impl LatencyStats {
    /// fio's `add_stat_sample` and the histogram count of `add_clat_sample`.
    pub fn record(&mut self, nanos: Nanos) {
        if self.samples == 0 || nanos < self.min {
            self.min = nanos;
        }
        self.max = self.max.max(nanos);
        let value = nanos as f64;
        let delta = value - self.mean;
        if delta != 0.0 {
            self.mean += delta / (self.samples as f64 + 1.0);
            self.s += delta * (value - self.mean);
        }
        self.samples += 1;
        if self.plat.is_empty() {
            self.plat = vec![0; PLAT_NR];
        }
        self.plat[plat_val_to_idx(nanos)] += 1;
    }

    /// Adds `other`'s latencies, as fio's `sum_stat` (stat.c) sums the jobs of a reporting
    /// group (`group_reporting`): min, max, the counts, the means weighted by their counts,
    /// Chan's combination of the `S` sums, and the histograms.
    pub fn merge(&mut self, other: &LatencyStats) {
        if other.samples == 0 {
            return;
        }
        if self.samples == 0 {
            *self = other.clone();
            return;
        }
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        let (n1, n2) = (self.samples as f64, other.samples as f64);
        let delta = other.mean - self.mean;
        self.mean = (other.mean * n2 + self.mean * n1) / (n1 + n2);
        self.s += other.s + delta * delta * n1 * n2 / (n1 + n2);
        self.samples += other.samples;
        for (mine, theirs) in self.plat.iter_mut().zip(&other.plat) {
            *mine += theirs;
        }
    }

    /// The number of latencies recorded.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// The smallest latency (0 before any).
    pub fn min(&self) -> Nanos {
        self.min
    }

    /// The largest latency (0 before any).
    pub fn max(&self) -> Nanos {
        self.max
    }

    /// The mean, as fio's `calc_lat` reports it (Welford's running mean; 0 before any).
    pub fn mean(&self) -> f64 {
        self.mean
    }

    /// The sample standard deviation, as fio's `calc_lat`: `sqrt(S / (n - 1))`, 0 for fewer
    /// than two samples.
    pub fn stddev(&self) -> f64 {
        if self.samples > 1 {
            (self.s / (self.samples as f64 - 1.0)).sqrt()
        } else {
            0.0
        }
    }

    /// The non-empty histogram buckets: (bucket index, count), ascending.
    pub fn buckets(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.plat
            .iter()
            .enumerate()
            .filter(|(_, &count)| count > 0)
            .map(|(index, &count)| (index, count))
    }
}

/// fio's latency ranges of the completion latencies, `io_u_lat_n` / `io_u_lat_u` / `io_u_lat_m`
/// (the "lat (usec): 100=..., 250=..." lines), counted by `io_u_mark_latency` as each I/O
/// completes. The ranges are 2, 4, 10, 20, 50, 100, 250, 500, 750, 1000 in each unit (a value
/// counts in the first range it is below), and 2000 and >=2000 ms.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LatencyRanges {
    /// Below 1 us, per ns range (`io_u_lat_n`).
    pub nsec: [u64; 10],
    /// Below 1 ms, per us range (`io_u_lat_u`).
    pub usec: [u64; 10],
    /// From 1 ms, per ms range (`io_u_lat_m`).
    pub msec: [u64; 12],
}

impl LatencyRanges {
    /// fio's `io_u_mark_latency`: counts one completion latency in its range.
    pub fn mark(&mut self, nanos: Nanos) {
        /// The range of a value in the unit of its row (`io_u_mark_lat_nsec` / `_usec` /
        /// `_msec`).
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
        if nanos < 1_000 {
            self.nsec[index(nanos)] += 1;
        } else if nanos < 1_000_000 {
            self.usec[index(nanos / 1_000)] += 1;
        } else {
            self.msec[index(nanos / 1_000_000)] += 1;
        }
    }

    /// The latencies counted.
    pub fn total(&self) -> u64 {
        self.nsec.iter().chain(&self.usec).chain(&self.msec).sum()
    }
}

/// What one direction of one job clone did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DirectionStats {
    pub ios: u64,
    pub bytes: u64,
    /// Submission latency (asynchronous engines only).
    pub slat: LatencyStats,
    /// Completion latency: from the end of the submission to the completion.
    pub clat: LatencyStats,
    /// Total latency.
    pub lat: LatencyStats,
    /// Bytes and I/Os completed in each [`SAMPLE_WINDOW_NS`] window from the job's start.
    pub window_bytes: Vec<u64>,
    pub window_ios: Vec<u64>,
}

impl DirectionStats {
    /// Adds another job's I/O of this direction (`group_reporting`): the counts, the
    /// latencies, and the sample windows counted from each job's start.
    pub fn merge(&mut self, other: &DirectionStats) {
        self.ios += other.ios;
        self.bytes += other.bytes;
        self.slat.merge(&other.slat);
        self.clat.merge(&other.clat);
        self.lat.merge(&other.lat);
        for (mine, theirs) in [
            (&mut self.window_bytes, &other.window_bytes),
            (&mut self.window_ios, &other.window_ios),
        ] {
            if mine.len() < theirs.len() {
                mine.resize(theirs.len(), 0);
            }
            for (m, t) in mine.iter_mut().zip(theirs) {
                *m += t;
            }
        }
    }
}

impl JobStats {
    /// Adds another job's statistics (`group_reporting`, stat.c `sum_thread_stats`): the
    /// directions, depths and latency ranges; the run spans both.
    pub fn merge(&mut self, other: &JobStats) {
        for (mine, theirs) in self.directions.iter_mut().zip(&other.directions) {
            mine.merge(theirs);
        }
        for (mine, theirs) in self.depth_buckets.iter_mut().zip(&other.depth_buckets) {
            *mine += theirs;
        }
        for (mine, theirs) in self
            .lat_ranges
            .nsec
            .iter_mut()
            .chain(self.lat_ranges.usec.iter_mut())
            .chain(self.lat_ranges.msec.iter_mut())
            .zip(
                other
                    .lat_ranges
                    .nsec
                    .iter()
                    .chain(&other.lat_ranges.usec)
                    .chain(&other.lat_ranges.msec),
            )
        {
            *mine += theirs;
        }
        self.start_ns = self.start_ns.min(other.start_ns);
        self.end_ns = self.end_ns.max(other.end_ns);
    }
}

/// What one job clone did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobStats {
    pub directions: [DirectionStats; 3],
    /// I/Os in flight in the job at each submission, counted per fio depth bucket (1, 2, 4, 8,
    /// 16, 32, >=64).
    pub depth_buckets: [u64; 7],
    /// The completion latencies of all directions in fio's latency ranges.
    pub lat_ranges: LatencyRanges,
    pub start_ns: Nanos,
    pub end_ns: Nanos,
}

/// fio's `io_u_map` bucket of a depth.
pub(super) fn depth_bucket(depth: u32) -> usize {
    match depth {
        0..=1 => 0,
        2..=3 => 1,
        4..=7 => 2,
        8..=15 => 3,
        16..=31 => 4,
        32..=63 => 5,
        _ => 6,
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
        assert_eq!(index, 14 * 64 + ((1_000_000usize >> 13) & 63));
        let value = plat_idx_to_val(index);
        assert!(
            (value as f64 - 1e6).abs() / 1e6 < 1.0 / 128.0,
            "{value}: within fio's 1/2^(bits+1) error"
        );
        for v in [
            0u64,
            1,
            63,
            64,
            129,
            4_096,
            123_456_789,
            u64::MAX / 4,
            u64::MAX,
        ] {
            assert!(plat_val_to_idx(v) < PLAT_NR, "{v}");
        }
    }

    #[test]
    fn latency_stats_follow_add_stat_sample_and_calc_lat() {
        // A known sequence from ns to seconds, with repeats and a large offset (where a naive
        // sum of squares would lose digits).
        let values: Vec<u64> = (0..10_000u64)
            .map(|i| match i % 5 {
                0 => 3_000_000_000 + (i * 7_919) % 100_003,
                1 => 250_000 + (i * 104_729) % 1_000_000,
                2 => i % 1_000,
                3 => 42,
                _ => 1_000_000_000_000 / (i + 1),
            })
            .collect();
        let mut stats = LatencyStats::default();
        for &value in &values {
            stats.record(value);
        }
        // The two-pass computation over the exact values.
        let n = values.len() as f64;
        let mean = values.iter().map(|&v| v as f64).sum::<f64>() / n;
        let squares: f64 = values.iter().map(|&v| (v as f64 - mean).powi(2)).sum();
        let stddev = (squares / (n - 1.0)).sqrt();
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs();
        assert!(close(stats.mean(), mean), "{} vs {mean}", stats.mean());
        assert!(
            close(stats.stddev(), stddev),
            "{} vs {stddev}",
            stats.stddev()
        );
        assert_eq!(stats.samples(), 10_000);
        assert_eq!(stats.min(), *values.iter().min().unwrap());
        assert_eq!(stats.max(), *values.iter().max().unwrap());
        assert_eq!(stats.buckets().map(|(_, count)| count).sum::<u64>(), 10_000);

        // None, one, and equal samples.
        let mut stats = LatencyStats::default();
        assert_eq!(
            (
                stats.samples(),
                stats.min(),
                stats.max(),
                stats.mean(),
                stats.stddev()
            ),
            (0, 0, 0, 0.0, 0.0)
        );
        assert_eq!(stats.buckets().count(), 0);
        stats.record(5_000);
        assert_eq!(
            (
                stats.samples(),
                stats.min(),
                stats.max(),
                stats.mean(),
                stats.stddev()
            ),
            (1, 5_000, 5_000, 5_000.0, 0.0)
        );
        stats.record(5_000);
        stats.record(0);
        assert_eq!((stats.samples(), stats.min(), stats.max()), (3, 0, 5_000));
        assert!(close(stats.stddev(), (5_000.0f64 * 5_000.0 / 3.0).sqrt()));
        assert_eq!(
            stats.buckets().collect::<Vec<_>>(),
            vec![(0, 1), (plat_val_to_idx(5_000), 2)]
        );
    }

    #[test]
    fn latency_ranges_follow_io_u_mark_latency() {
        let mut ranges = LatencyRanges::default();
        for value in [
            0,
            1,
            2,
            999,
            1_000,
            1_999,
            99_999,
            999_999,
            1_000_000,
            1_999_999_999,
            2_000_000_000,
            u64::MAX,
        ] {
            ranges.mark(value);
        }
        assert_eq!(ranges.nsec, [2, 1, 0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(ranges.usec, [2, 0, 0, 0, 0, 1, 0, 0, 0, 1]);
        assert_eq!(ranges.msec, [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2]);
        assert_eq!(ranges.total(), 12);
    }
}
