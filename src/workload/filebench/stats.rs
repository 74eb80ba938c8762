//! Filebench's statistics and its summary (stats.c): per flowop name (the FLOW_MASTER roll-up)
//! count, bytes, total / min / max latency, reads and writes; the IO totals over the IO flowops;
//! and `stats_snap`'s text, line for line:
//!
//! ```text
//! Per-Operation Breakdown
//! statfile1            258061ops     4300ops/s   0.0mb/s    0.134ms/op [0.002ms - 38.716ms]
//! IO Summary: 2838706 ops 47304.690 ops/s 4300/8601 rd/wr 1116.8mb/s 1.011ms/op
//! ```
//!
//! Flowops print newest definition first (filebench keeps its flowop list head-inserted); "mb"
//! is MiB (`MB_FLOAT`). A flowop that ran no operation prints a minimum of 0 (filebench prints
//! its `ULLONG_MAX` sentinel).

use crate::units::{Nanos, NS_PER_SEC};

/// `struct flowstats`, the part the summary uses.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct FlowStats {
    pub count: u64,
    pub bytes: u64,
    pub rcount: u64,
    pub wcount: u64,
    pub total_lat_ns: u128,
    /// 0 when no operation was counted.
    pub min_lat_ns: Nanos,
    pub max_lat_ns: Nanos,
}

impl FlowStats {
    fn add(&mut self, read: bool, write: bool, latency: Nanos, bytes: u64) {
        if self.count == 0 || latency < self.min_lat_ns {
            self.min_lat_ns = latency;
        }
        self.max_lat_ns = self.max_lat_ns.max(latency);
        self.count += 1;
        self.bytes += bytes;
        self.total_lat_ns += u128::from(latency);
        if read {
            self.rcount += 1;
        } else if write {
            self.wcount += 1;
        }
    }

    /// Mean latency in milliseconds (`fs_total_lat / (fs_count * SEC2MS_FLOAT)`).
    pub fn ms_per_op(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.total_lat_ns as f64 / (self.count as f64 * 1e6)
        }
    }
}

/// The statistics of a run (or of one `psrun` period).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Snapshot {
    pub names: Vec<String>,
    pub flowops: Vec<FlowStats>,
    /// Totals over the IO flowops (FLOW_TYPE_IO).
    pub io: FlowStats,
    pub start_ns: Nanos,
    pub end_ns: Nanos,
}

const MIB: f64 = 1024.0 * 1024.0;

impl Snapshot {
    pub fn new(names: Vec<String>, start_ns: Nanos) -> Snapshot {
        Snapshot {
            flowops: vec![FlowStats::default(); names.len()],
            names,
            io: FlowStats::default(),
            start_ns,
            end_ns: start_ns,
        }
    }

    /// `flowop_endop`'s bookkeeping.
    pub fn add(
        &mut self,
        stat: usize,
        io: bool,
        read: bool,
        write: bool,
        latency: Nanos,
        bytes: u64,
    ) {
        self.flowops[stat].add(read, write, latency, bytes);
        if io {
            self.io.add(read, write, latency, bytes);
        }
    }

    /// A copy ending now.
    pub fn finished(&self, now: Nanos) -> Snapshot {
        Snapshot {
            end_ns: now,
            ..self.clone()
        }
    }

    pub fn elapsed_ns(&self) -> Nanos {
        self.end_ns.saturating_sub(self.start_ns)
    }

    fn seconds(&self) -> f64 {
        (self.elapsed_ns() as f64 / NS_PER_SEC as f64).max(1e-9)
    }

    /// IO operations per second (the figure filebench users quote).
    pub fn ops_per_second(&self) -> f64 {
        self.io.count as f64 / self.seconds()
    }

    /// The app counters of a run with valid results (`filebench.*`), as simulated and real
    /// runs report them.
    pub fn counters(&self) -> [(&'static str, u64); 7] {
        let io = &self.io;
        [
            ("filebench.ops", io.count),
            ("filebench.reads", io.rcount),
            ("filebench.writes", io.wcount),
            ("filebench.bytes", io.bytes),
            (
                "filebench.latency_ns",
                io.total_lat_ns.min(u128::from(u64::MAX)) as u64,
            ),
            ("filebench.run_ns", self.elapsed_ns()),
            (
                "filebench.ops_per_s_x1000",
                (self.ops_per_second() * 1000.0).round() as u64,
            ),
        ]
    }

    /// The statistics of the flowop called `name`.
    pub fn flowop(&self, name: &str) -> Option<&FlowStats> {
        self.names
            .iter()
            .position(|n| n == name)
            .map(|i| &self.flowops[i])
    }

    /// `stats_snap`'s lines: the per-operation breakdown and the IO summary.
    pub fn lines(&self) -> Vec<String> {
        let seconds = self.seconds();
        let mut lines = vec!["Per-Operation Breakdown".to_string()];
        for (name, stats) in self.names.iter().zip(&self.flowops).rev() {
            lines.push(format!(
                "{:<20} {}ops {:8.0}ops/s {:5.1}mb/s {:8.3}ms/op [{:.3}ms - {:5.3}ms]",
                name,
                stats.count,
                stats.count as f64 / seconds,
                stats.bytes as f64 / MIB / seconds,
                stats.ms_per_op(),
                stats.min_lat_ns as f64 / 1e6,
                stats.max_lat_ns as f64 / 1e6,
            ));
        }
        let io = &self.io;
        lines.push(format!(
            "IO Summary: {:5} ops {:5.3} ops/s {:.0}/{:.0} rd/wr {:5.1}mb/s {:5.3}ms/op",
            io.count,
            io.count as f64 / seconds,
            io.rcount as f64 / seconds,
            io.wcount as f64 / seconds,
            io.bytes as f64 / MIB / seconds,
            io.ms_per_op(),
        ));
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_follows_stats_snap() {
        let mut snap = Snapshot::new(vec!["readfile1".into(), "limit".into()], 0);
        snap.add(0, true, true, false, 2_000_000, 1 << 20);
        snap.add(0, true, true, false, 4_000_000, 1 << 20);
        snap.add(1, false, false, false, 1_000, 0);
        let snap = snap.finished(2 * NS_PER_SEC);
        let lines = snap.lines();
        assert_eq!(lines[0], "Per-Operation Breakdown");
        // Newest definition first.
        assert!(lines[1].starts_with("limit "), "{lines:?}");
        assert_eq!(
            lines[2],
            "readfile1            2ops        1ops/s   1.0mb/s    3.000ms/op [2.000ms - 4.000ms]"
        );
        assert_eq!(
            lines[3],
            "IO Summary:     2 ops 1.000 ops/s 1/0 rd/wr   1.0mb/s 3.000ms/op"
        );
        assert_eq!(snap.flowop("limit").unwrap().count, 1);
        assert_eq!(snap.ops_per_second(), 1.0);
    }
}
