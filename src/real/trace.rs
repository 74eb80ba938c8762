//! Block events from tracefs: `block/block_bio_queue`, `block_rq_insert`, `block_rq_issue`,
//! `block_rq_complete` of the run's devices, recorded in a trace instance of the run's own
//! (`instances/mobistack-<pid>`: its own buffer and clock, nothing of the global trace touched),
//! with `trace_clock = mono` so that event times and the apps' `CLOCK_MONOTONIC` operation
//! times share one clock.
//!
//! The events' text (include/trace/events/block.h `TP_printk`) is parsed into [`BlockEvent`]s
//! and from them into the project's blktrace events ([`crate::block::blktrace::TraceEvent`]),
//! so a real run writes the same blkparse text as a simulated one. Kernels from 6.x print the
//! request's ioprio after the sector range; older ones do not: the parser takes both.

use super::machine::{BlockDev, Machine};
use super::RealError;
use crate::block::blktrace::{Action, TraceEvent};
use crate::dev::{IoFlags, IoOp};
use std::path::PathBuf;

/// Where tracefs is mounted (since 4.1; /sys/kernel/debug/tracing is its older path).
pub const TRACEFS: &str = "/sys/kernel/tracing";

/// The events recorded.
pub const EVENTS: [&str; 4] = [
    "block_bio_queue",
    "block_rq_insert",
    "block_rq_issue",
    "block_rq_complete",
];

/// Per-CPU buffer: 32 MiB holds about 300,000 events per CPU, a few GiB of writeback in 1 MiB
/// bios with every stage traced. Lost events are counted ([`Trace::lost`]).
const BUFFER_KB: u32 = 32 * 1024;

/// One parsed event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockEvent {
    /// `CLOCK_MONOTONIC` nanoseconds (microsecond resolution, as the trace prints).
    pub time_ns: u64,
    pub action: Action,
    pub major: u32,
    pub minor: u32,
    pub rwbs: String,
    pub sector: u64,
    pub nr_sectors: u32,
    pub pid: u32,
    pub comm: String,
}

impl BlockEvent {
    /// A write with data (not an empty flush, not a discard).
    pub fn is_data_write(&self) -> bool {
        self.rwbs.contains('W') && self.nr_sectors > 0
    }

    /// A request or bio asking for a cache flush: `REQ_PREFLUSH` (the leading F) or `REQ_FUA`
    /// (an F after the direction letter); an empty flush request prints "FF" or "FN".
    pub fn is_flush(&self) -> bool {
        self.rwbs.contains('F')
    }

    /// An empty flush request (`REQ_OP_FLUSH`): what the device is asked to do for each
    /// preflush and for each FUA write to a device without FUA (block/blk-flush.c).
    pub fn is_flush_request(&self) -> bool {
        self.rwbs.starts_with('F') && self.nr_sectors == 0 && !self.rwbs.contains('D')
    }

    /// The project's blktrace event (for blkparse text).
    pub fn to_trace_event(&self, since_ns: u64) -> TraceEvent {
        let letters: Vec<char> = self.rwbs.chars().collect();
        let direction = letters.iter().position(|c| "WRDN".contains(*c));
        let preflush = direction.is_some_and(|d| d > 0) || direction.is_none();
        let op = match direction.map(|d| letters[d]) {
            Some('W') if self.nr_sectors > 0 => IoOp::Write,
            Some('R') => IoOp::Read,
            Some('D') => IoOp::Discard,
            _ => IoOp::Flush,
        };
        let after = direction.map_or(&letters[..0], |d| &letters[d + 1..]);
        let flags = IoFlags {
            sync: after.contains(&'S'),
            meta: after.contains(&'M'),
            fua: after.contains(&'F') && op != IoOp::Flush,
            preflush: preflush && op != IoOp::Flush,
            ..IoFlags::default()
        };
        TraceEvent {
            time_ns: self.time_ns.saturating_sub(since_ns),
            action: self.action,
            pid: self.pid,
            op,
            flags,
            sector: self.sector,
            nr_sectors: self.nr_sectors,
            comm: self.comm.clone(),
            depth: 0,
            device: Some((self.major, self.minor)),
        }
    }
}

/// A recording in progress.
pub struct Trace {
    dir: PathBuf,
}

impl Trace {
    /// Starts recording the block events of `devices` (the instance is removed when `machine`
    /// restores).
    pub fn start(machine: &mut Machine, devices: &[BlockDev]) -> Result<Trace, RealError> {
        machine.ensure_tracefs()?;
        let dir = PathBuf::from(TRACEFS)
            .join("instances")
            .join(format!("mobistack-{}", std::process::id()));
        machine.make_trace_instance(&dir)?;
        let file = |name: &str| dir.join(name).display().to_string();
        machine.write(&file("tracing_on"), "0")?;
        machine.write(&file("trace_clock"), "mono")?;
        machine.write(&file("buffer_size_kb"), &BUFFER_KB.to_string())?;
        let filter = devices
            .iter()
            .map(|d| format!("dev == {}", d.dev_t()))
            .collect::<Vec<_>>()
            .join(" || ");
        for event in EVENTS {
            machine.write(&file(&format!("events/block/{event}/filter")), &filter)?;
            machine.write(&file(&format!("events/block/{event}/enable")), "1")?;
        }
        machine.write(&file("trace"), "")?;
        machine.write(&file("tracing_on"), "1")?;
        Ok(Trace { dir })
    }

    /// Stops recording and returns the events, oldest first, and the number lost.
    pub fn stop(self, machine: &Machine) -> Result<(Vec<BlockEvent>, u64), RealError> {
        let file = |name: &str| self.dir.join(name).display().to_string();
        machine.write(&file("tracing_on"), "0")?;
        let text = std::fs::read_to_string(file("trace"))
            .map_err(|e| RealError::new(format!("cannot read {}: {e}", file("trace"))))?;
        let lost = lost_events(&text);
        let mut events: Vec<BlockEvent> = text.lines().filter_map(parse_line).collect();
        events.sort_by_key(|e| e.time_ns);
        Ok((events, lost))
    }
}

/// `# entries-in-buffer/entries-written: 66/70`: the difference was overwritten.
fn lost_events(text: &str) -> u64 {
    text.lines()
        .take(10)
        .find_map(|l| l.split_once("entries-in-buffer/entries-written:"))
        .and_then(|(_, counts)| {
            let counts = counts.split_whitespace().next()?;
            let (held, written) = counts.split_once('/')?;
            Some(written.parse::<u64>().ok()? - held.parse::<u64>().ok()?)
        })
        .unwrap_or(0)
}

/// Parses one line of a trace file, e.g.
/// `jbd2/loop0-8-22088 [001] ..... 9866.528644: block_rq_issue: 7,0 WSM 28672 () 2097160 + 56 be,0,3 [jbd2/loop0-8]`.
pub fn parse_line(line: &str) -> Option<BlockEvent> {
    if line.starts_with('#') {
        return None;
    }
    let (head, rest) = line.split_once(": block_")?;
    let (name, payload) = rest.split_once(": ")?;
    let action = match name {
        "bio_queue" => Action::Queue,
        "rq_insert" => Action::Insert,
        "rq_issue" => Action::Issue,
        "rq_complete" => Action::Complete,
        _ => return None,
    };
    let time = head.split_whitespace().last()?;
    let (secs, frac) = time.split_once('.')?;
    let frac_ns = format!("{frac:0<9}").get(..9)?.parse::<u64>().ok()?;
    let time_ns = secs.parse::<u64>().ok()? * 1_000_000_000 + frac_ns;
    let task = head.trim_start();
    let task = &task[..task.rfind(" [")?].trim_end();
    let (_, pid) = task.rsplit_once('-')?;
    let tokens: Vec<&str> = payload.split_whitespace().collect();
    let (major, minor) = tokens.first()?.split_once(',')?;
    let rwbs = tokens.get(1)?.to_string();
    let plus = tokens.iter().position(|t| *t == "+")?;
    let sector = tokens.get(plus - 1)?.parse::<u64>().unwrap_or(0);
    let nr_sectors = tokens.get(plus + 1)?.parse::<u32>().ok()?;
    // The issuing task's comm is the last bracketed field of bio and rq events (not of a
    // completion, whose brackets hold the error).
    let comm = payload
        .rsplit_once('[')
        .map(|(_, c)| c.trim_end_matches(']').to_string())
        .unwrap_or_default();
    Some(BlockEvent {
        time_ns,
        action,
        major: major.parse().ok()?,
        minor: minor.parse().ok()?,
        rwbs,
        // A completed flush prints sector (u64)-1.
        sector: if sector == u64::MAX { 0 } else { sector },
        nr_sectors,
        pid: pid.parse().ok()?,
        comm,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_block_events_of_a_6_x_trace() {
        let issue = parse_line("    jbd2/loop0-8-22088   [001] .....  9866.528644: block_rq_issue: 7,0 WSM 28672 () 2097160 + 56 be,0,3 [jbd2/loop0-8]").unwrap();
        assert_eq!(issue.action, Action::Issue);
        assert_eq!((issue.major, issue.minor), (7, 0));
        assert_eq!(issue.time_ns, 9_866_528_644_000);
        assert_eq!((issue.sector, issue.nr_sectors), (2_097_160, 56));
        assert_eq!((issue.pid, issue.comm.as_str()), (22088, "jbd2/loop0-8"));
        assert!(issue.is_data_write() && !issue.is_flush());
        let commit = parse_line("    jbd2/loop0-8-22088   [001] .....  9866.528746: block_bio_queue: 7,0 FWFSM 2097216 + 8 [jbd2/loop0-8]").unwrap();
        assert!(commit.is_flush() && commit.is_data_write() && !commit.is_flush_request());
        let event = commit.to_trace_event(0);
        assert!(event.flags.preflush && event.flags.fua && event.op == IoOp::Write);
        let flush = parse_line("     ksoftirqd/0-14      [000] ..s..  9866.528922: block_rq_complete: 7,0 FF () 18446744073709551615 + 0 none,0,0 [0]").unwrap();
        assert!(flush.is_flush_request() && !flush.is_data_write());
        assert_eq!(flush.to_trace_event(0).op, IoOp::Flush);
        // 5.x: no ioprio field.
        let old =
            parse_line(" dd-100 [000] d..1  12.000001: block_rq_insert: 8,0 W 4096 () 8 + 8 [dd]")
                .unwrap();
        assert_eq!(
            (old.sector, old.nr_sectors, old.comm.as_str()),
            (8, 8, "dd")
        );
        assert!(parse_line("# tracer: nop").is_none());
    }

    #[test]
    fn counts_overwritten_events() {
        let text = "# tracer: nop\n#\n# entries-in-buffer/entries-written: 66/70   #P:2\n";
        assert_eq!(lost_events(text), 4);
    }
}
