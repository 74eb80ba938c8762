//! blktrace-style event log of the block layer, written in blkparse's default text format.
//!
//! Records the actions of kernel/trace/blktrace.c that the request path emits: Q (bio queued),
//! M / F (back / front merge), G (get request), S (sleep in `get_request`), I (inserted into the
//! elevator or dispatch list), D (issued to the driver), C (completed). The output follows
//! blkparse's default format (blkparse_fmt.c, `%D %2c %8s %5T.%9t %5p %2a %3d`, then
//! `%S + %n [%C]`, or `[%e]` for completions), e.g.
//!
//! ```text
//!   8,0    0        1     0.000000000  1234  Q  WS 123456 + 8 [proc]
//! ```
//!
//! Simplifications: one CPU (column 0); D and C are attributed to the request's task and to pid 0
//! respectively (the kernel prints whichever context ran the dispatch or the interrupt); the
//! RWBS column follows 3.10's `blk_fill_rwbs` without the readahead and secure flags.
//!
//! The log is bounded: past `capacity` events, further events are counted and dropped (like a
//! full relay buffer), and the writer reports the drop count.

use super::request::{Bio, Request};
use crate::dev::{IoFlags, IoOp};
use crate::units::{Nanos, NS_PER_SEC};
use std::io::{self, Write};

/// Default bound on recorded events.
pub const DEFAULT_CAPACITY: usize = 1 << 22;

/// A blktrace action (`BLK_TA_*`), by its blkparse letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Action {
    Queue,
    BackMerge,
    FrontMerge,
    GetRequest,
    Sleep,
    Insert,
    Issue,
    Complete,
}

impl Action {
    pub fn letter(self) -> char {
        match self {
            Action::Queue => 'Q',
            Action::BackMerge => 'M',
            Action::FrontMerge => 'F',
            Action::GetRequest => 'G',
            Action::Sleep => 'S',
            Action::Insert => 'I',
            Action::Issue => 'D',
            Action::Complete => 'C',
        }
    }
}

/// One event.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TraceEvent {
    pub time_ns: Nanos,
    pub action: Action,
    pub pid: u32,
    pub op: IoOp,
    pub flags: IoFlags,
    pub sector: u64,
    pub nr_sectors: u32,
    pub comm: String,
}

/// `blk_fill_rwbs` (3.10): F for a flush, then W / D / R / N, then F (FUA), S (sync), M (meta).
pub fn rwbs(op: IoOp, flags: IoFlags, nr_sectors: u32) -> String {
    let mut out = String::with_capacity(4);
    if op == IoOp::Flush || flags.preflush {
        out.push('F');
    }
    out.push(match op {
        IoOp::Write => 'W',
        IoOp::Discard => 'D',
        IoOp::Read if nr_sectors > 0 => 'R',
        IoOp::Read | IoOp::Flush => 'N',
    });
    if flags.fua {
        out.push('F');
    }
    if flags.sync {
        out.push('S');
    }
    if flags.meta {
        out.push('M');
    }
    out
}

/// The trace of one request queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlkTrace {
    /// Device numbers printed in the first column (`8,0` is sda, `179,0` mmcblk0).
    pub major: u32,
    pub minor: u32,
    events: Vec<TraceEvent>,
    capacity: usize,
    dropped: u64,
}

impl BlkTrace {
    pub fn new(major: u32, minor: u32, capacity: usize) -> BlkTrace {
        BlkTrace {
            major,
            minor,
            events: Vec::new(),
            capacity,
            dropped: 0,
        }
    }

    fn push(&mut self, event: TraceEvent) {
        if self.events.len() < self.capacity {
            self.events.push(event);
        } else {
            self.dropped += 1;
        }
    }

    /// An event about a bio (Q, M, F, G, S).
    pub fn bio(&mut self, now: Nanos, action: Action, bio: &Bio) {
        self.push(TraceEvent {
            time_ns: now,
            action,
            pid: bio.task.pid,
            op: bio.op,
            flags: bio.flags,
            sector: bio.sector,
            nr_sectors: bio.nr_sectors,
            comm: bio.task.comm.clone(),
        });
    }

    /// An event about a request (I, D, C).
    pub fn request(&mut self, now: Nanos, action: Action, rq: &Request) {
        let pid = if action == Action::Complete {
            0
        } else {
            rq.task.pid
        };
        self.push(TraceEvent {
            time_ns: now,
            action,
            pid,
            op: rq.op,
            flags: rq.flags,
            sector: rq.sector,
            nr_sectors: rq.nr_sectors,
            comm: rq.task.comm.clone(),
        });
    }

    pub fn events(&self) -> &[TraceEvent] {
        &self.events
    }

    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// One event in blkparse's default format (without the newline).
    pub fn format_event(&self, sequence: u64, event: &TraceEvent) -> String {
        let seconds = event.time_ns / NS_PER_SEC;
        let nanos = event.time_ns % NS_PER_SEC;
        let tail = if event.action == Action::Complete {
            "[0]".to_string()
        } else {
            format!("[{}]", event.comm)
        };
        format!(
            "{:3},{:<3} {:2} {:8} {:5}.{:09} {:5} {:>2} {:>3} {} + {} {}",
            self.major,
            self.minor,
            0,
            sequence,
            seconds,
            nanos,
            event.pid,
            event.action.letter(),
            rwbs(event.op, event.flags, event.nr_sectors),
            event.sector,
            event.nr_sectors,
            tail
        )
    }

    /// Writes every event in blkparse format, sequence numbers from 1.
    pub fn write_blkparse(&self, out: &mut impl Write) -> io::Result<()> {
        for (index, event) in self.events.iter().enumerate() {
            writeln!(out, "{}", self.format_event(index as u64 + 1, event))?;
        }
        if self.dropped > 0 {
            writeln!(
                out,
                "# {} events dropped (trace capacity {})",
                self.dropped, self.capacity
            )?;
        }
        Ok(())
    }

    /// The whole trace as a string.
    pub fn to_blkparse(&self) -> String {
        let mut out = Vec::new();
        self.write_blkparse(&mut out).expect("writing to memory");
        String::from_utf8(out).expect("trace is UTF-8")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::request::test_support::bio;

    #[test]
    fn lines_follow_blkparse_default_format() {
        let mut trace = BlkTrace::new(8, 0, 16);
        let mut write = bio(1, IoOp::Write, 123456, 8, 1234);
        write.task.comm = "proc".to_string();
        trace.bio(0, Action::Queue, &write);
        write.flags.sync = true;
        trace.bio(1_500_000_123, Action::GetRequest, &write);
        let text = trace.to_blkparse();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "  8,0    0        1     0.000000000  1234  Q   W 123456 + 8 [proc]"
        );
        assert_eq!(
            lines[1],
            "  8,0    0        2     1.500000123  1234  G  WS 123456 + 8 [proc]"
        );
    }

    #[test]
    fn rwbs_letters() {
        let flags = IoFlags {
            sync: true,
            meta: true,
            ..IoFlags::default()
        };
        assert_eq!(rwbs(IoOp::Read, flags, 8), "RSM");
        assert_eq!(rwbs(IoOp::Discard, IoFlags::default(), 8), "D");
        assert_eq!(rwbs(IoOp::Flush, IoFlags::default(), 0), "FN");
        let fua = IoFlags {
            fua: true,
            ..IoFlags::default()
        };
        assert_eq!(rwbs(IoOp::Write, fua, 8), "WF");
    }

    #[test]
    fn a_full_trace_counts_what_it_drops() {
        let mut trace = BlkTrace::new(179, 0, 1);
        let read = bio(1, IoOp::Read, 0, 8, 1);
        trace.bio(0, Action::Queue, &read);
        trace.bio(0, Action::GetRequest, &read);
        assert_eq!((trace.events().len(), trace.dropped()), (1, 1));
        assert!(trace.to_blkparse().contains("1 events dropped"));
    }
}
