//! blktrace event log of the block layer, written as blktrace's binary per-CPU files (which
//! `blkparse -i`, `btt` and `iowatcher` read) and as blkparse's default text.
//!
//! Records the actions of kernel/trace/blktrace.c that the request path emits: Q (bio queued),
//! M / F (back / front merge, in a plug list or the elevator), G (get request), S (sleep in
//! `get_request`), P (plug: the first request goes on a task's plug list), U / T (unplug: the
//! plug list is flushed explicitly, or because the task sleeps; with the number of requests),
//! I (inserted into the elevator or dispatch list), D (issued to the driver), C (completed).
//!
//! Binary format: `struct blk_io_trace` of include/uapi/linux/blktrace_api.h, version 7
//! (`magic = 0x65617400 | 7`), 48 bytes little-endian, followed by `pdu_len` bytes: the
//! unplug's request count as a big-endian `u64` (as `blk_add_trace_unplug` stores it), or a
//! process name for a `BLK_TN_PROCESS` note (emitted before a pid's first event, as
//! `trace_note_tsk` does, so blkparse can print `[comm]`). `action` is the `__BLK_TA_*` code with
//! the category bits (`BLK_TC_ACT(BLK_TC_READ | WRITE | SYNC | META | DISCARD | FLUSH | FUA)`)
//! in its upper 16 bits, as `__blk_add_trace` sets them; `device` is the kernel's `dev_t`
//! (`major << 20 | minor`); sequence numbers count the events of the CPU from 1 (notes take
//! none). Everything runs on CPU 0, so one file `<name>.blktrace.0`.
//!
//! Text format: blkparse's default (blkparse_fmt.c, `%D %2c %8s %5T.%9t %5p %2a %3d`, then
//! `%S + %n [%C]`, `[%e]` for completions, `[%C] %d` for unplugs), e.g.
//!
//! ```text
//!   8,0    0        1     0.000000000  1234  Q  WS 123456 + 8 [proc]
//! ```
//!
//! The RWBS column is derived from the category bits exactly as blkparse's `fill_rwbs` does, so
//! the text equals what blkparse prints for the binary file (blkparse's times are relative to the
//! first event; these are virtual time).
//!
//! Simplifications: one CPU; D and C are attributed to the request's task and to pid 0
//! respectively (the kernel prints whichever context ran the dispatch or the interrupt); no
//! readahead (A) bit; split (X) and remap (A) events are not emitted.
//!
//! The log is bounded: past `capacity` events, further events are counted and dropped (like a
//! full relay buffer), and the writers report the drop count.

use super::request::{Bio, Request};
use crate::dev::{IoFlags, IoOp};
use crate::units::{Nanos, NS_PER_SEC};
use std::io::{self, Write};

/// Default bound on recorded events.
pub const DEFAULT_CAPACITY: usize = 1 << 22;

/// `BLK_IO_TRACE_MAGIC`.
pub const BLK_IO_TRACE_MAGIC: u32 = 0x6561_7400;
/// `BLK_IO_TRACE_VERSION`.
pub const BLK_IO_TRACE_VERSION: u32 = 7;
/// Bytes of `struct blk_io_trace`.
pub const BLK_IO_TRACE_BYTES: usize = 48;
/// `TASK_COMM_LEN`: the process name of a `BLK_TN_PROCESS` note, NUL-padded.
pub const TASK_COMM_LEN: usize = 16;

/// `enum blktrace_cat` (include/uapi/linux/blktrace_api.h).
pub mod tc {
    pub const READ: u32 = 1 << 0;
    pub const WRITE: u32 = 1 << 1;
    pub const FLUSH: u32 = 1 << 2;
    pub const SYNC: u32 = 1 << 3;
    pub const QUEUE: u32 = 1 << 4;
    pub const REQUEUE: u32 = 1 << 5;
    pub const ISSUE: u32 = 1 << 6;
    pub const COMPLETE: u32 = 1 << 7;
    pub const FS: u32 = 1 << 8;
    pub const PC: u32 = 1 << 9;
    pub const NOTIFY: u32 = 1 << 10;
    pub const AHEAD: u32 = 1 << 11;
    pub const META: u32 = 1 << 12;
    pub const DISCARD: u32 = 1 << 13;
    pub const DRV_DATA: u32 = 1 << 14;
    pub const FUA: u32 = 1 << 15;
    /// `BLK_TC_SHIFT`.
    pub const SHIFT: u32 = 16;

    /// `BLK_TC_ACT(act)`.
    pub const fn act(category: u32) -> u32 {
        category << SHIFT
    }
}

/// `__BLK_TN_PROCESS`: a process-name note.
pub const BLK_TN_PROCESS: u32 = tc::act(tc::NOTIFY);

/// A blktrace action (`__BLK_TA_*`), by its blkparse letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Action {
    Queue,
    BackMerge,
    FrontMerge,
    GetRequest,
    Sleep,
    Plug,
    /// The plug list was flushed by the task (`blk_finish_plug`, or a full list).
    UnplugIo,
    /// The plug list was flushed because the task went to sleep (`from_schedule`).
    UnplugTimer,
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
            Action::Plug => 'P',
            Action::UnplugIo => 'U',
            Action::UnplugTimer => 'T',
            Action::Insert => 'I',
            Action::Issue => 'D',
            Action::Complete => 'C',
        }
    }

    /// `BLK_TA_*`: the `__BLK_TA_*` code with its category (blktrace_api.h).
    pub fn code(self) -> u32 {
        let (code, category) = match self {
            Action::Queue => (1, tc::QUEUE),
            Action::BackMerge => (2, tc::QUEUE),
            Action::FrontMerge => (3, tc::QUEUE),
            Action::GetRequest => (4, tc::QUEUE),
            Action::Sleep => (5, tc::QUEUE),
            Action::Issue => (7, tc::ISSUE),
            Action::Complete => (8, tc::COMPLETE),
            Action::Plug => (9, tc::QUEUE),
            Action::UnplugIo => (10, tc::QUEUE),
            Action::UnplugTimer => (11, tc::QUEUE),
            Action::Insert => (12, tc::QUEUE),
        };
        code | tc::act(category)
    }

    /// The action whose `BLK_TA_*` is `code` (the low 16 bits of a trace's `action`).
    pub fn from_code(code: u32) -> Option<Action> {
        [
            Action::Queue,
            Action::BackMerge,
            Action::FrontMerge,
            Action::GetRequest,
            Action::Sleep,
            Action::Plug,
            Action::UnplugIo,
            Action::UnplugTimer,
            Action::Insert,
            Action::Issue,
            Action::Complete,
        ]
        .into_iter()
        .find(|a| a.code() & 0xffff == code & 0xffff)
    }

    /// Plug and unplug events concern the queue, not one I/O: no sector, no size, no RWBS bits.
    fn is_queue_event(self) -> bool {
        matches!(self, Action::Plug | Action::UnplugIo | Action::UnplugTimer)
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
    /// Requests flushed, for an unplug (its pdu).
    pub depth: u32,
    /// The device (major, minor) when the trace holds several ([`BlkTrace::merge`]); `None`:
    /// the trace's own.
    pub device: Option<(u32, u32)>,
}

impl TraceEvent {
    /// The category bits of the I/O (`__blk_add_trace`: direction, then SYNC, META, DISCARD,
    /// FLUSH, FUA). A flush without data is a write (`WRITE_FLUSH`).
    pub fn categories(&self) -> u32 {
        if self.action.is_queue_event() {
            return 0;
        }
        let mut bits = if self.op.is_write() {
            tc::WRITE
        } else {
            tc::READ
        };
        if self.flags.sync {
            bits |= tc::SYNC;
        }
        if self.flags.meta {
            bits |= tc::META;
        }
        if self.op == IoOp::Discard {
            bits |= tc::DISCARD;
        }
        if self.op == IoOp::Flush || self.flags.preflush {
            bits |= tc::FLUSH;
        }
        if self.flags.fua {
            bits |= tc::FUA;
        }
        tc::act(bits)
    }

    /// The trace's `action` field.
    pub fn action_field(&self) -> u32 {
        self.action.code() | self.categories()
    }

    /// Bytes transferred (`t->bytes`).
    pub fn bytes(&self) -> u32 {
        if self.action.is_queue_event() {
            0
        } else {
            self.nr_sectors.saturating_mul(512)
        }
    }
}

/// blkparse's `fill_rwbs`: F (flush), then D / W / R / N, then F (FUA), A, S, M, from the
/// category bits of `action` and the transfer length.
pub fn rwbs_of(action: u32, bytes: u32) -> String {
    let has = |category: u32| action & tc::act(category) != 0;
    let mut out = String::with_capacity(5);
    if has(tc::FLUSH) {
        out.push('F');
    }
    out.push(if has(tc::DISCARD) {
        'D'
    } else if has(tc::WRITE) {
        'W'
    } else if bytes > 0 {
        'R'
    } else {
        'N'
    });
    if has(tc::FUA) {
        out.push('F');
    }
    if has(tc::AHEAD) {
        out.push('A');
    }
    if has(tc::SYNC) {
        out.push('S');
    }
    if has(tc::META) {
        out.push('M');
    }
    out
}

/// The RWBS column of an I/O event (see [`rwbs_of`]).
pub fn rwbs(op: IoOp, flags: IoFlags, nr_sectors: u32) -> String {
    let event = TraceEvent {
        time_ns: 0,
        action: Action::Queue,
        pid: 0,
        op,
        flags,
        sector: 0,
        nr_sectors,
        comm: String::new(),
        depth: 0,
        device: None,
    };
    rwbs_of(event.action_field(), event.bytes())
}

/// The kernel's `dev_t` (`MKDEV`: 20 minor bits), as `t->device` holds it.
pub fn dev_t(major: u32, minor: u32) -> u32 {
    (major << 20) | (minor & ((1 << 20) - 1))
}

/// The trace of one request queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlkTrace {
    /// Device numbers (`8,0` is sda, `179,0` mmcblk0).
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
            comm: bio.task.comm.to_string(),
            depth: 0,
            device: None,
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
            comm: rq.task.comm.to_string(),
            depth: 0,
            device: None,
        });
    }

    /// A plug (P) or unplug (U, T, with the number of requests flushed) of task `pid`.
    pub fn plug(&mut self, now: Nanos, action: Action, pid: u32, comm: &str, depth: u32) {
        assert!(action.is_queue_event(), "{action:?} is not a plug event");
        self.push(TraceEvent {
            time_ns: now,
            action,
            pid,
            op: IoOp::Read,
            flags: IoFlags::default(),
            sector: 0,
            nr_sectors: 0,
            comm: comm.to_string(),
            depth,
            device: None,
        });
    }

    pub fn events(&self) -> &[TraceEvent] {
        &self.events
    }

    /// The device of `event`: its own, or the trace's.
    pub fn device_of(&self, event: &TraceEvent) -> (u32, u32) {
        event.device.unwrap_or((self.major, self.minor))
    }

    /// The traces of two devices as one (what `blkparse -i a -i b` reads): every event keeps
    /// its device, in time order (this trace's first at equal times); the numbers of the
    /// result are this trace's.
    pub fn merge(&self, other: &BlkTrace) -> BlkTrace {
        let mine = self.events.iter().map(|e| TraceEvent {
            device: Some(self.device_of(e)),
            ..e.clone()
        });
        let theirs: Vec<TraceEvent> = other
            .events
            .iter()
            .map(|e| TraceEvent {
                device: Some(other.device_of(e)),
                ..e.clone()
            })
            .collect();
        let mut events = Vec::with_capacity(self.events.len() + theirs.len());
        let mut theirs = theirs.into_iter().peekable();
        for event in mine {
            while theirs.peek().is_some_and(|t| t.time_ns < event.time_ns) {
                events.extend(theirs.next());
            }
            events.push(event);
        }
        events.extend(theirs);
        BlkTrace {
            major: self.major,
            minor: self.minor,
            events,
            capacity: self.capacity + other.capacity,
            dropped: self.dropped + other.dropped,
        }
    }

    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// One event in blkparse's default format (without the newline).
    pub fn format_event(&self, sequence: u64, event: &TraceEvent) -> String {
        let seconds = event.time_ns / NS_PER_SEC;
        let nanos = event.time_ns % NS_PER_SEC;
        let (major, minor) = self.device_of(event);
        let head = format!(
            "{:3},{:<3} {:2} {:8} {:5}.{:09} {:5} {:>2} {:>3}",
            major,
            minor,
            0,
            sequence,
            seconds,
            nanos,
            event.pid,
            event.action.letter(),
            rwbs_of(event.action_field(), event.bytes()),
        );
        match event.action {
            Action::Plug => format!("{head} [{}]", event.comm),
            Action::UnplugIo | Action::UnplugTimer => {
                format!("{head} [{}] {}", event.comm, event.depth)
            }
            Action::Complete => format!("{head} {} + {} [0]", event.sector, event.nr_sectors),
            _ => format!(
                "{head} {} + {} [{}]",
                event.sector, event.nr_sectors, event.comm
            ),
        }
    }

    /// Writes every event in blkparse format, sequence numbers from 1.
    pub fn write_blkparse(&self, out: &mut impl Write) -> io::Result<()> {
        // blkparse numbers each device's events on its own.
        let mut sequences: std::collections::BTreeMap<(u32, u32), u64> = Default::default();
        for event in &self.events {
            let sequence = sequences.entry(self.device_of(event)).or_insert(0);
            *sequence += 1;
            writeln!(out, "{}", self.format_event(*sequence, event))?;
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

    /// Writes the trace as blktrace's binary format: the contents of `<name>.blktrace.0`
    /// (CPU 0, the only one), with a `BLK_TN_PROCESS` note before each pid's first event.
    pub fn write_binary(&self, out: &mut impl Write) -> io::Result<()> {
        let mut named: std::collections::BTreeSet<(u32, u32)> = std::collections::BTreeSet::new();
        let mut sequences: std::collections::BTreeMap<u32, u32> = Default::default();
        let mut record = Vec::with_capacity(BLK_IO_TRACE_BYTES + TASK_COMM_LEN);
        for event in &self.events {
            let (major, minor) = self.device_of(event);
            let device = dev_t(major, minor);
            let sequence = sequences.entry(device).or_insert(0);
            *sequence += 1;
            let sequence = *sequence;
            if named.insert((device, event.pid)) {
                let mut comm = [0u8; TASK_COMM_LEN];
                let name = if event.pid == 0 {
                    "swapper/0"
                } else {
                    event.comm.as_str()
                };
                let length = name.len().min(TASK_COMM_LEN - 1);
                comm[..length].copy_from_slice(&name.as_bytes()[..length]);
                record.clear();
                push_header(
                    &mut record,
                    Header {
                        sequence: 0,
                        time_ns: event.time_ns,
                        sector: 0,
                        bytes: 0,
                        action: BLK_TN_PROCESS,
                        pid: event.pid,
                        device,
                        pdu_len: TASK_COMM_LEN as u16,
                    },
                );
                record.extend_from_slice(&comm);
                out.write_all(&record)?;
            }
            let unplug = matches!(event.action, Action::UnplugIo | Action::UnplugTimer);
            record.clear();
            push_header(
                &mut record,
                Header {
                    sequence,
                    time_ns: event.time_ns,
                    sector: event.sector,
                    bytes: event.bytes(),
                    action: event.action_field(),
                    pid: event.pid,
                    device,
                    pdu_len: if unplug { 8 } else { 0 },
                },
            );
            if unplug {
                record.extend_from_slice(&u64::from(event.depth).to_be_bytes());
            }
            out.write_all(&record)?;
        }
        Ok(())
    }

    /// The binary trace in memory (see [`BlkTrace::write_binary`]).
    pub fn to_binary(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_binary(&mut out).expect("writing to memory");
        out
    }
}

/// The fields of `struct blk_io_trace` that vary (magic, cpu and error are fixed).
struct Header {
    sequence: u32,
    time_ns: Nanos,
    sector: u64,
    bytes: u32,
    action: u32,
    pid: u32,
    device: u32,
    pdu_len: u16,
}

fn push_header(out: &mut Vec<u8>, h: Header) {
    out.extend_from_slice(&(BLK_IO_TRACE_MAGIC | BLK_IO_TRACE_VERSION).to_le_bytes());
    out.extend_from_slice(&h.sequence.to_le_bytes());
    out.extend_from_slice(&h.time_ns.to_le_bytes());
    out.extend_from_slice(&h.sector.to_le_bytes());
    out.extend_from_slice(&h.bytes.to_le_bytes());
    out.extend_from_slice(&h.action.to_le_bytes());
    out.extend_from_slice(&h.pid.to_le_bytes());
    out.extend_from_slice(&h.device.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes()); // cpu
    out.extend_from_slice(&0u16.to_le_bytes()); // error
    out.extend_from_slice(&h.pdu_len.to_le_bytes());
}

/// One record of a binary trace, as read back by [`decode_binary`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinaryRecord {
    pub magic: u32,
    pub sequence: u32,
    pub time_ns: u64,
    pub sector: u64,
    pub bytes: u32,
    pub action: u32,
    pub pid: u32,
    pub device: u32,
    pub cpu: u32,
    pub error: u16,
    pub pdu: Vec<u8>,
}

/// Reads a little-endian binary trace (a `.blktrace.N` file) record by record, checking the
/// magic and version as blkparse's `verify_trace` does.
pub fn decode_binary(mut bytes: &[u8]) -> Result<Vec<BinaryRecord>, String> {
    let mut records = Vec::new();
    while !bytes.is_empty() {
        if bytes.len() < BLK_IO_TRACE_BYTES {
            return Err(format!("{} trailing bytes", bytes.len()));
        }
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4"));
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8"));
        let u16_at = |at: usize| u16::from_le_bytes(bytes[at..at + 2].try_into().expect("2"));
        let magic = u32_at(0);
        if magic & 0xffff_ff00 != BLK_IO_TRACE_MAGIC || magic & 0xff != BLK_IO_TRACE_VERSION {
            return Err(format!("bad magic {magic:#x} at record {}", records.len()));
        }
        let pdu_len = usize::from(u16_at(46));
        if bytes.len() < BLK_IO_TRACE_BYTES + pdu_len {
            return Err(format!("record {} cut short", records.len()));
        }
        records.push(BinaryRecord {
            magic,
            sequence: u32_at(4),
            time_ns: u64_at(8),
            sector: u64_at(16),
            bytes: u32_at(24),
            action: u32_at(28),
            pid: u32_at(32),
            device: u32_at(36),
            cpu: u32_at(40),
            error: u16_at(44),
            pdu: bytes[BLK_IO_TRACE_BYTES..BLK_IO_TRACE_BYTES + pdu_len].to_vec(),
        });
        bytes = &bytes[BLK_IO_TRACE_BYTES + pdu_len..];
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::request::test_support::bio;

    #[test]
    fn lines_follow_blkparse_default_format() {
        let mut trace = BlkTrace::new(8, 0, 16);
        let mut write = bio(1, IoOp::Write, 123456, 8, 1234);
        write.task.comm = "proc".into();
        trace.bio(0, Action::Queue, &write);
        write.flags.sync = true;
        trace.bio(1_500_000_123, Action::GetRequest, &write);
        trace.plug(1_500_000_123, Action::Plug, 1234, "proc", 0);
        trace.plug(1_500_000_200, Action::UnplugIo, 1234, "proc", 3);
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
        assert_eq!(
            lines[2],
            "  8,0    0        3     1.500000123  1234  P   N [proc]"
        );
        assert_eq!(
            lines[3],
            "  8,0    0        4     1.500000200  1234  U   N [proc] 3"
        );
    }

    #[test]
    fn rwbs_letters_follow_fill_rwbs() {
        let flags = IoFlags {
            sync: true,
            meta: true,
            ..IoFlags::default()
        };
        assert_eq!(rwbs(IoOp::Read, flags, 8), "RSM");
        assert_eq!(rwbs(IoOp::Discard, IoFlags::default(), 8), "D");
        // An empty flush is WRITE_FLUSH: F, then W.
        let sync = IoFlags {
            sync: true,
            ..IoFlags::default()
        };
        assert_eq!(rwbs(IoOp::Flush, sync, 0), "FWS");
        let fua = IoFlags {
            fua: true,
            ..IoFlags::default()
        };
        assert_eq!(rwbs(IoOp::Write, fua, 8), "WF");
        assert_eq!(rwbs(IoOp::Read, IoFlags::default(), 0), "N");
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

    #[test]
    fn the_binary_format_is_struct_blk_io_trace_version_7() {
        let mut trace = BlkTrace::new(179, 0, 16);
        let mut write = bio(1, IoOp::Write, 2048, 16, 1001);
        write.task.comm = "a-very-long-process-name".into();
        write.flags.sync = true;
        write.flags.fua = true;
        trace.bio(1_000, Action::Queue, &write);
        trace.plug(1_000, Action::Plug, 1001, &write.task.comm, 0);
        trace.plug(2_000, Action::UnplugTimer, 1001, &write.task.comm, 2);
        let read = bio(2, IoOp::Read, 8, 8, 1002);
        trace.bio(3_000, Action::Queue, &read);
        let bytes = trace.to_binary();
        let records = decode_binary(&bytes).unwrap();
        // note(1001), Q, P, T, note(1002), Q
        assert_eq!(records.len(), 6);
        let note = &records[0];
        assert_eq!(note.magic, 0x6561_7407);
        assert_eq!(
            note.action,
            1 << 26,
            "BLK_TN_PROCESS = BLK_TC_ACT(BLK_TC_NOTIFY)"
        );
        assert_eq!((note.pid, note.sequence), (1001, 0));
        assert_eq!(
            &note.pdu[..],
            b"a-very-long-pro\0",
            "TASK_COMM_LEN, NUL-terminated"
        );
        let queue = &records[1];
        assert_eq!(queue.sequence, 1);
        assert_eq!(
            (queue.time_ns, queue.sector, queue.bytes),
            (1_000, 2048, 8192)
        );
        // __BLK_TA_QUEUE | BLK_TC_ACT(QUEUE | WRITE | SYNC | FUA)
        assert_eq!(
            queue.action,
            1 | ((1 << 4 | 1 << 1 | 1 << 3 | 1 << 15) << 16)
        );
        assert_eq!(queue.device, 179 << 20, "MKDEV(179, 0)");
        assert_eq!((queue.cpu, queue.error), (0, 0));
        assert!(queue.pdu.is_empty());
        let plug = &records[2];
        assert_eq!(
            (plug.action, plug.sector, plug.bytes),
            (9 | (1 << 4) << 16, 0, 0)
        );
        let unplug = &records[3];
        assert_eq!(unplug.action, 11 | (1 << 4) << 16, "__BLK_TA_UNPLUG_TIMER");
        assert_eq!(unplug.pdu, 2u64.to_be_bytes(), "the depth, big-endian");
        assert_eq!(unplug.sequence, 3);
        assert_eq!((records[4].pid, records[4].sequence), (1002, 0));
        let read = &records[5];
        assert_eq!(read.action, 1 | ((1 << 4 | 1 << 0) << 16));
        assert_eq!(read.sequence, 4, "notes take no sequence number");
        assert_eq!(rwbs_of(read.action, read.bytes), "R");
        assert_eq!(Action::from_code(read.action), Some(Action::Queue));
        assert!(decode_binary(&bytes[..47]).is_err());
    }
}
