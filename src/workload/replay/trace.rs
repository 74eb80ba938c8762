//! Block traces, read one line at a time: memory does not grow with the trace's length.
//!
//! Formats:
//! - **blkparse** text in its default output format (blkparse_fmt.c: `%D %2c %8s %5T.%9t %5p
//!   %2a %3d` then `%S + %n [%C]`), e.g. `  8,0    3       11     0.009507758  697  Q  WS
//!   3414192 + 8 [kjournald]`. One action is replayed (`Q` by default: bios as processes issued
//!   them; `D`: requests as the driver received them; `C`: completions). RWBS gives the
//!   operation and flags (`blk_fill_rwbs`: `F` preflush, `W`/`R`/`D`/`N`, then `F` FUA, `A`
//!   readahead, `S` sync, `M` meta, `E` secure); `FWS 0 + 0` or `FN 0 + 0` (a preflush with no
//!   data) is a flush. Other
//!   actions, `#` comments and blkparse's closing per-CPU and total summary are skipped.
//! - **Pixel CSV** of acsl-technion/MobileBlockIOTraces (Pixel 6a, eBPF at the block layer):
//!   `process,device,rw_flag,sector,size,timestamp` with a header line, `rw_flag` `R` or `W`,
//!   sector and size in 512-byte sectors, the timestamp in seconds; `process` is ftrace's
//!   `comm-pid` (`<...>` when the name was unknown). The `preconditioning_ended` marker row
//!   some files carry is skipped. Reads are synchronous; writes are not (the trace does not say).
//! - **DiskSim ASCII**, the input format MQSim also reads (ASCII_Trace_Definition.h):
//!   `time device lba size-in-sectors flags`, whitespace separated, flags bit 0 set for a read.
//!   DiskSim's times are milliseconds (fractional); MQSim's are integers in its configured
//!   `Time_Unit` (nanoseconds in its shipped workloads), hence the time unit option.
//!
//! A line that does not parse is an error naming the file and line, or, with
//! `skip_bad_lines`, skipped and counted.

use crate::dev::{IoFlags, IoOp};
use crate::units::Nanos;
use std::fmt;
use std::io::BufRead;

/// The largest request a trace may hold: 64 MiB. No Linux host takes more in one request
/// (`max_hw_sectors` of UFS, eMMC and NVMe hosts is at most a few MiB), and the device model keeps
/// per-die busy intervals for every page of a command in flight (found by the replay_run fuzz
/// target: a DiskSim line of 60,001,000 sectors overran them).
pub const MAX_REQUEST_SECTORS: u64 = (64 << 20) / 512;

/// Bound on one line of a trace.
pub const MAX_LINE: usize = 64 * 1024;

/// A trace format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    Blkparse,
    Pixel,
    Disksim,
}

impl Format {
    pub fn parse(name: &str) -> Result<Format, String> {
        match name {
            "blkparse" => Ok(Format::Blkparse),
            "pixel" | "csv" => Ok(Format::Pixel),
            "disksim" | "mqsim" | "ascii" => Ok(Format::Disksim),
            other => Err(format!(
                "unknown trace format `{other}` (blkparse, pixel, disksim)"
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Format::Blkparse => "blkparse",
            Format::Pixel => "pixel",
            Format::Disksim => "disksim",
        }
    }

    /// Guesses the format of a trace from its first non-empty line.
    pub fn detect(first_line: &str) -> Option<Format> {
        let line = first_line.trim();
        let fields: Vec<&str> = line.split_whitespace().collect();
        if line.contains(',') && line.split(',').count() == 6 && !line.contains(' ') {
            return Some(Format::Pixel);
        }
        if fields.first().is_some_and(|f| is_device_pair(f)) {
            return Some(Format::Blkparse);
        }
        if fields.len() == 5 && fields.iter().all(|f| f.parse::<f64>().is_ok()) {
            return Some(Format::Disksim);
        }
        None
    }
}

fn is_device_pair(text: &str) -> bool {
    match text.split_once(',') {
        Some((major, minor)) => {
            !major.is_empty()
                && !minor.is_empty()
                && major.bytes().all(|b| b.is_ascii_digit())
                && minor.bytes().all(|b| b.is_ascii_digit())
        }
        None => false,
    }
}

/// A unit of time for DiskSim ASCII traces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TimeUnit {
    S,
    Ms,
    Us,
    Ns,
}

impl TimeUnit {
    pub fn parse(name: &str) -> Result<TimeUnit, String> {
        match name {
            "s" => Ok(TimeUnit::S),
            "ms" => Ok(TimeUnit::Ms),
            "us" => Ok(TimeUnit::Us),
            "ns" => Ok(TimeUnit::Ns),
            other => Err(format!("unknown time unit `{other}` (s, ms, us, ns)")),
        }
    }

    fn nanos(self) -> u64 {
        match self {
            TimeUnit::S => 1_000_000_000,
            TimeUnit::Ms => 1_000_000,
            TimeUnit::Us => 1_000,
            TimeUnit::Ns => 1,
        }
    }
}

/// How to read a trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadOptions {
    pub format: Format,
    /// blkparse: the action replayed (`Q`, `D` or `C`).
    pub action: u8,
    /// DiskSim: the unit of the time column.
    pub time_unit: TimeUnit,
    pub skip_bad_lines: bool,
}

impl ReadOptions {
    pub fn new(format: Format) -> ReadOptions {
        ReadOptions {
            format,
            action: b'Q',
            time_unit: TimeUnit::Ms,
            skip_bad_lines: false,
        }
    }
}

/// A line that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceError {
    pub file: String,
    pub line: u64,
    pub message: String,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}:{}: {}", self.file, self.line, self.message)
        }
    }
}

impl std::error::Error for TraceError {}

/// One I/O of a trace; `process` borrows the reader's line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    pub line: u64,
    /// As written in the trace (not yet relative to its first record).
    pub time_ns: Nanos,
    /// The issuing process's name (blkparse `comm`, the CSV's `comm` without `-pid`, or
    /// `dev<N>` for DiskSim).
    pub process: &'a str,
    /// The issuing pid when the trace gives one (0 otherwise).
    pub pid: u32,
    /// DiskSim's device column, blkparse's minor, the CSV's device.
    pub device: u64,
    pub op: IoOp,
    pub sector: u64,
    pub nr_sectors: u32,
    pub flags: IoFlags,
}

/// Reads records from a buffered source.
pub struct TraceReader<R: BufRead> {
    source: R,
    file: String,
    options: ReadOptions,
    buffer: Vec<u8>,
    line: u64,
    /// Lines skipped because they did not parse (with `skip_bad_lines`).
    pub skipped: u64,
    first_bad: Option<TraceError>,
    in_summary: bool,
    saw_header: bool,
    process_scratch: String,
    /// The device `process_scratch` names ("dev<N>"), so that it is formatted once per change
    /// of device, not once per record.
    scratch_device: Option<u64>,
}

fn parse_u64(field: &[u8]) -> Option<u64> {
    if field.is_empty() || field.len() > 20 {
        return None;
    }
    let mut value: u64 = 0;
    for &b in field {
        if !b.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    Some(value)
}

/// A non-negative decimal number of `unit_ns` nanoseconds, exactly (`12.345` ms = 12345000 ns).
fn parse_time(field: &[u8], unit_ns: u64) -> Option<Nanos> {
    // A plain integer, the common case (DiskSim traces in ns), in one pass: at most 19 digits
    // cannot overflow a u64; the result is what the general path below gives.
    if !field.is_empty() && field.len() <= 19 {
        let mut value = 0u64;
        let mut plain = true;
        for &b in field {
            let digit = b.wrapping_sub(b'0');
            if digit > 9 {
                plain = false;
                break;
            }
            value = value * 10 + u64::from(digit);
        }
        if plain {
            return value.checked_mul(unit_ns);
        }
    }
    let (whole, fraction) = match field.iter().position(|&b| b == b'.') {
        Some(dot) => (&field[..dot], &field[dot + 1..]),
        None => (field, &field[field.len()..]),
    };
    if fraction.iter().any(|b| !b.is_ascii_digit())
        || whole.iter().any(|b| !b.is_ascii_digit())
        || (whole.is_empty() && fraction.is_empty())
        || fraction.len() > 18
    {
        // Exponents and other spellings: through f64.
        let text = std::str::from_utf8(field).ok()?;
        let value: f64 = text.parse().ok()?;
        if !(0.0..1.8e19).contains(&(value * unit_ns as f64)) {
            return None;
        }
        return Some((value * unit_ns as f64).round() as u64);
    }
    let whole = if whole.is_empty() {
        0
    } else {
        parse_u64(whole)?
    };
    let mut nanos = whole.checked_mul(unit_ns)?;
    if !fraction.is_empty() {
        let digits = parse_u64(fraction)? as u128;
        let scale = 10u128.pow(fraction.len() as u32);
        nanos = nanos.checked_add((digits * u128::from(unit_ns) / scale) as u64)?;
    }
    Some(nanos)
}

fn trim(mut bytes: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = bytes {
        if first.is_ascii_whitespace() {
            bytes = rest;
        } else {
            break;
        }
    }
    while let [rest @ .., last] = bytes {
        if last.is_ascii_whitespace() {
            bytes = rest;
        } else {
            break;
        }
    }
    bytes
}

/// The result of parsing one line.
enum Parsed {
    Record {
        time_ns: Nanos,
        pid: u32,
        device: u64,
        op: IoOp,
        sector: u64,
        nr_sectors: u32,
        flags: IoFlags,
        /// The process name's byte range in the line.
        process: (usize, usize),
        /// Whether `process` is a DiskSim device number to format.
        synthetic_name: bool,
    },
    Skip,
}

/// blkparse's RWBS: the operation and flags, or None for an event without data.
fn rwbs(field: &[u8], nr_sectors: u32) -> Result<Option<(IoOp, IoFlags)>, String> {
    let mut flags = IoFlags::default();
    let mut rest = field;
    if let [b'F', tail @ ..] = rest {
        if tail
            .first()
            .is_some_and(|b| matches!(b, b'W' | b'R' | b'D' | b'N'))
        {
            flags.preflush = true;
            rest = tail;
        }
    }
    let (op, tail) = match rest {
        [b'W', tail @ ..] => (Some(IoOp::Write), tail),
        [b'R', tail @ ..] => (Some(IoOp::Read), tail),
        [b'D', tail @ ..] => (Some(IoOp::Discard), tail),
        [b'N', tail @ ..] => (None, tail),
        _ => {
            return Err(format!(
                "RWBS `{}` names no operation",
                String::from_utf8_lossy(field)
            ))
        }
    };
    for &b in tail {
        match b {
            b'F' => flags.fua = true,
            b'S' => flags.sync = true,
            b'M' => flags.meta = true,
            b'A' | b'E' => {}
            _ => {
                return Err(format!(
                    "RWBS `{}` has an unknown flag `{}`",
                    String::from_utf8_lossy(field),
                    b as char
                ))
            }
        }
    }
    Ok(match op {
        // An empty preflush bio (`blkdev_issue_flush`, jbd2's and fsync's cache flush) is
        // traced `FWS 0 + 0` by 3.10 and later, `FN 0 + 0` by older blkparse.
        Some(IoOp::Write) | None if flags.preflush && nr_sectors == 0 => Some((IoOp::Flush, flags)),
        Some(op) => Some((op, flags)),
        None => None,
    })
}

impl<R: BufRead> TraceReader<R> {
    pub fn new(source: R, file: &str, options: ReadOptions) -> TraceReader<R> {
        TraceReader {
            source,
            file: file.to_string(),
            options,
            buffer: Vec::with_capacity(256),
            line: 0,
            skipped: 0,
            first_bad: None,
            in_summary: false,
            saw_header: false,
            process_scratch: String::new(),
            scratch_device: None,
        }
    }

    /// Lines read so far.
    pub fn lines(&self) -> u64 {
        self.line
    }

    /// The first line skipped with `skip_bad_lines`, for reports.
    pub fn first_skipped(&self) -> Option<&TraceError> {
        self.first_bad.as_ref()
    }

    fn error(&self, message: String) -> TraceError {
        TraceError {
            file: self.file.clone(),
            line: self.line,
            message,
        }
    }

    /// The next record, or None at the end of the trace.
    pub fn next_record(&mut self) -> Result<Option<Record<'_>>, TraceError> {
        loop {
            self.buffer.clear();
            let read = std::io::Read::take(&mut self.source, MAX_LINE as u64 + 1)
                .read_until(b'\n', &mut self.buffer)
                .map_err(|e| self.error(format!("cannot read: {e}")))?;
            if read == 0 {
                return Ok(None);
            }
            self.line += 1;
            if self.buffer.len() > MAX_LINE && self.buffer.last() != Some(&b'\n') {
                return Err(self.error(format!("line longer than {MAX_LINE} bytes")));
            }
            let parsed = match self.options.format {
                Format::Blkparse => self.parse_blkparse(),
                Format::Pixel => self.parse_pixel(),
                Format::Disksim => self.parse_disksim(),
            }
            .and_then(|parsed| match parsed {
                Parsed::Record { nr_sectors, .. }
                    if u64::from(nr_sectors) > MAX_REQUEST_SECTORS =>
                {
                    Err(format!(
                        "a request of {nr_sectors} sectors ({} MiB) is larger than the {} MiB a replayed request may be (Linux splits requests at the queue's max_hw_sectors, a few MiB at most on UFS, eMMC and NVMe hosts); split the trace's requests",
                        (u64::from(nr_sectors) * 512) >> 20,
                        (MAX_REQUEST_SECTORS * 512) >> 20
                    ))
                }
                other => Ok(other),
            });
            match parsed {
                Ok(Parsed::Skip) => continue,
                Ok(Parsed::Record {
                    time_ns,
                    pid,
                    device,
                    op,
                    sector,
                    nr_sectors,
                    flags,
                    process,
                    synthetic_name,
                }) => {
                    let process = if synthetic_name {
                        if self.scratch_device != Some(device) {
                            use std::fmt::Write;
                            self.process_scratch.clear();
                            write!(self.process_scratch, "dev{device}")
                                .expect("formatting into a String cannot fail");
                            self.scratch_device = Some(device);
                        }
                        self.process_scratch.as_str()
                    } else {
                        std::str::from_utf8(&self.buffer[process.0..process.1]).unwrap_or("?")
                    };
                    return Ok(Some(Record {
                        line: self.line,
                        time_ns,
                        process,
                        pid,
                        device,
                        op,
                        sector,
                        nr_sectors,
                        flags,
                    }));
                }
                Err(message) => {
                    let error = self.error(message);
                    if !self.options.skip_bad_lines {
                        return Err(error);
                    }
                    self.skipped += 1;
                    if self.first_bad.is_none() {
                        self.first_bad = Some(error);
                    }
                }
            }
        }
    }

    fn parse_blkparse(&mut self) -> Result<Parsed, String> {
        let line = trim(&self.buffer);
        if line.is_empty() || line[0] == b'#' || self.in_summary {
            return Ok(Parsed::Skip);
        }
        let mut fields = [(0usize, 0usize); 10];
        let base = line.as_ptr() as usize - self.buffer.as_ptr() as usize;
        let mut count = 0;
        let mut at = 0;
        while count < 10 && at < line.len() {
            while at < line.len() && line[at].is_ascii_whitespace() {
                at += 1;
            }
            let start = at;
            while at < line.len() && !line[at].is_ascii_whitespace() {
                at += 1;
            }
            if start < at {
                fields[count] = (start, at);
                count += 1;
            }
        }
        let field = |i: usize| &line[fields[i].0..fields[i].1];
        let first = std::str::from_utf8(field(0)).unwrap_or("");
        if !is_device_pair(first) {
            // blkparse's closing summary ("CPU0 (8,0):", "Total (8,0):", ...).
            if first.starts_with("CPU") || first.starts_with("Total") {
                self.in_summary = true;
                return Ok(Parsed::Skip);
            }
            return Err(format!(
                "not a blkparse event line (expected `major,minor` first, found `{first}`)"
            ));
        }
        if count < 6 {
            return Err("a blkparse event line has at least 6 fields".into());
        }
        let action = field(5);
        if action.len() != 1 || action[0] != self.options.action {
            return Ok(Parsed::Skip);
        }
        if count < 10 {
            return Err(format!(
                "`{}` event without `sector + size`",
                self.options.action as char
            ));
        }
        let minor = first
            .split_once(',')
            .and_then(|(_, m)| m.parse::<u64>().ok())
            .unwrap_or(0);
        let time_ns = parse_time(field(3), 1_000_000_000)
            .ok_or_else(|| format!("bad time `{}`", String::from_utf8_lossy(field(3))))?;
        let pid = parse_u64(field(4))
            .filter(|&p| p <= u64::from(u32::MAX))
            .ok_or_else(|| format!("bad pid `{}`", String::from_utf8_lossy(field(4))))?
            as u32;
        let sector = parse_u64(field(7))
            .ok_or_else(|| format!("bad sector `{}`", String::from_utf8_lossy(field(7))))?;
        if field(8) != b"+" {
            return Err("expected `sector + size`".into());
        }
        let nr_sectors = parse_u64(field(9))
            .filter(|&n| n <= u64::from(u32::MAX))
            .ok_or_else(|| format!("bad size `{}`", String::from_utf8_lossy(field(9))))?
            as u32;
        let Some((op, flags)) = rwbs(field(6), nr_sectors)? else {
            return Ok(Parsed::Skip);
        };
        if nr_sectors == 0 && op != IoOp::Flush {
            return Err(format!("a {op:?} of 0 sectors"));
        }
        // The process: `[comm]` after the size, possibly with spaces.
        let rest = &line[fields[9].1..];
        let open = rest.iter().position(|&b| b == b'[');
        let close = rest.iter().rposition(|&b| b == b']');
        let process = match (open, close) {
            (Some(open), Some(close)) if close > open => {
                let start = base + fields[9].1 + open + 1;
                (start, start + (close - open - 1))
            }
            _ => (base, base),
        };
        Ok(Parsed::Record {
            time_ns,
            pid,
            device: minor,
            op,
            sector,
            nr_sectors,
            flags,
            process,
            synthetic_name: false,
        })
    }

    fn parse_pixel(&mut self) -> Result<Parsed, String> {
        let line = trim(&self.buffer);
        if line.is_empty() {
            return Ok(Parsed::Skip);
        }
        let unquoted = line
            .strip_prefix(b"\"")
            .and_then(|l| l.strip_suffix(b"\""))
            .unwrap_or(line);
        if unquoted == b"preconditioning_ended" {
            return Ok(Parsed::Skip);
        }
        let base = line.as_ptr() as usize - self.buffer.as_ptr() as usize;
        let mut fields = [(0usize, 0usize); 6];
        let mut count = 0;
        let mut start = 0;
        for (i, &b) in line.iter().enumerate() {
            if b == b',' {
                if count == 6 {
                    return Err("expected 6 comma-separated fields, found more".into());
                }
                fields[count] = (start, i);
                count += 1;
                start = i + 1;
            }
        }
        if count != 5 {
            return Err(format!(
                "expected 6 comma-separated fields (process,device,rw_flag,sector,size,timestamp), found {}",
                count + 1
            ));
        }
        fields[5] = (start, line.len());
        let field = |i: usize| trim(&line[fields[i].0..fields[i].1]);
        if !self.saw_header && self.line == 1 && field(2) == b"rw_flag" {
            self.saw_header = true;
            return Ok(Parsed::Skip);
        }
        let device = parse_u64(field(1))
            .ok_or_else(|| format!("bad device `{}`", String::from_utf8_lossy(field(1))))?;
        let op = match field(2) {
            b"R" | b"r" => IoOp::Read,
            b"W" | b"w" => IoOp::Write,
            other => {
                return Err(format!(
                    "rw_flag `{}` is neither R nor W",
                    String::from_utf8_lossy(other)
                ))
            }
        };
        let sector = parse_u64(field(3))
            .ok_or_else(|| format!("bad sector `{}`", String::from_utf8_lossy(field(3))))?;
        let nr_sectors = parse_u64(field(4))
            .filter(|&n| n > 0 && n <= u64::from(u32::MAX))
            .ok_or_else(|| format!("bad size `{}`", String::from_utf8_lossy(field(4))))?
            as u32;
        let time_ns = parse_time(field(5), 1_000_000_000)
            .ok_or_else(|| format!("bad timestamp `{}`", String::from_utf8_lossy(field(5))))?;
        // `comm-pid`: the pid after the last dash.
        let (p0, p1) = fields[0];
        let name = &line[p0..p1];
        let (process, pid) = match name.iter().rposition(|&b| b == b'-') {
            Some(dash) => match parse_u64(&name[dash + 1..]) {
                Some(pid) if pid <= u64::from(u32::MAX) => ((p0, p0 + dash), pid as u32),
                _ => ((p0, p1), 0),
            },
            None => ((p0, p1), 0),
        };
        Ok(Parsed::Record {
            time_ns,
            pid,
            device,
            op,
            sector,
            nr_sectors,
            flags: IoFlags {
                sync: op == IoOp::Read,
                ..IoFlags::default()
            },
            process: (base + process.0, base + process.1),
            synthetic_name: false,
        })
    }

    fn parse_disksim(&mut self) -> Result<Parsed, String> {
        let line = trim(&self.buffer);
        if line.is_empty() || line[0] == b'#' {
            return Ok(Parsed::Skip);
        }
        let mut fields: [&[u8]; 5] = [&[]; 5];
        let mut count = 0;
        // The whitespace-separated fields, in one pass over the line.
        let mut at = 0;
        loop {
            while at < line.len() && line[at].is_ascii_whitespace() {
                at += 1;
            }
            if at == line.len() {
                break;
            }
            let start = at;
            while at < line.len() && !line[at].is_ascii_whitespace() {
                at += 1;
            }
            if count == 5 {
                return Err("expected 5 fields (time device lba size flags), found more".into());
            }
            fields[count] = &line[start..at];
            count += 1;
        }
        if count != 5 {
            return Err(format!(
                "expected 5 fields (time device lba size flags), found {count}"
            ));
        }
        let time_ns = parse_time(fields[0], self.options.time_unit.nanos())
            .ok_or_else(|| format!("bad time `{}`", String::from_utf8_lossy(fields[0])))?;
        let device = parse_u64(fields[1])
            .ok_or_else(|| format!("bad device `{}`", String::from_utf8_lossy(fields[1])))?;
        let sector = parse_u64(fields[2])
            .ok_or_else(|| format!("bad block number `{}`", String::from_utf8_lossy(fields[2])))?;
        let nr_sectors = parse_u64(fields[3])
            .filter(|&n| n > 0 && n <= u64::from(u32::MAX))
            .ok_or_else(|| format!("bad size `{}`", String::from_utf8_lossy(fields[3])))?
            as u32;
        let flags = parse_u64(fields[4])
            .ok_or_else(|| format!("bad flags `{}`", String::from_utf8_lossy(fields[4])))?;
        let op = if flags & 1 == 1 {
            IoOp::Read
        } else {
            IoOp::Write
        };
        Ok(Parsed::Record {
            time_ns,
            pid: 0,
            device,
            op,
            sector,
            nr_sectors,
            flags: IoFlags {
                sync: op == IoOp::Read,
                ..IoFlags::default()
            },
            process: (0, 0),
            synthetic_name: true,
        })
    }
}

/// When a record `relative_ns` after the trace's first is replayed at `time_scale` (positive
/// and finite, checked by the caller): None beyond [`crate::units::MAX_DURATION`] (365 days),
/// the longest virtual time a replay spans, so that the arrival plus the device's service
/// times never overflow virtual time.
pub fn scaled_time(relative_ns: Nanos, time_scale: f64) -> Option<Nanos> {
    if time_scale == 1.0 {
        return (relative_ns <= crate::units::MAX_DURATION).then_some(relative_ns);
    }
    let scaled = (relative_ns as f64 * time_scale).round();
    (scaled <= crate::units::MAX_DURATION as f64).then_some(scaled as Nanos)
}

/// The error of a record whose replay time [`scaled_time`] rejects, naming the time, the
/// trace's first and the scale option (`option`, e.g. `--time-scale`).
pub fn beyond_replay_span(relative_ns: Nanos, time_scale: f64, option: &str) -> String {
    /// A number short: exponent notation when very large or small.
    fn short(x: f64) -> String {
        if x != 0.0 && !(1e-6..1e15).contains(&x.abs()) {
            format!("{x:e}")
        } else {
            format!("{x}")
        }
    }
    let seconds = relative_ns as f64 / 1e9;
    let scaled = if time_scale == 1.0 {
        String::new()
    } else {
        format!(
            ", {} s at {option} {}",
            short(seconds * time_scale),
            short(time_scale)
        )
    };
    format!(
        "this request comes {} s after the trace's first{scaled}: a replay spans at most 365 days of virtual time ({} s)",
        short(seconds),
        crate::units::MAX_DURATION / crate::units::NS_PER_SEC
    )
}

/// Opens a trace file (format `format`, or detected from its first line when None).
pub fn open(
    path: &std::path::Path,
    format: Option<Format>,
) -> Result<(std::io::BufReader<std::fs::File>, Format), TraceError> {
    let file_name = path.display().to_string();
    let fail = |message: String| TraceError {
        file: file_name.clone(),
        line: 0,
        message,
    };
    let file = std::fs::File::open(path).map_err(|e| fail(format!("cannot open: {e}")))?;
    let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
    let format = match format {
        Some(format) => format,
        None => {
            let head = reader
                .fill_buf()
                .map_err(|e| fail(format!("cannot read: {e}")))?;
            let text = String::from_utf8_lossy(head);
            let mut lines = text.lines().filter(|l| !l.trim().is_empty());
            let first = lines.next().unwrap_or("");
            let second = lines.next().unwrap_or("");
            Format::detect(first)
                .or_else(|| Format::detect(second))
                .ok_or_else(|| {
                    fail("cannot tell the trace format from its first lines; give it (blkparse, pixel, disksim)".into())
                })?
        }
    };
    Ok((reader, format))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Line, time, process, pid, op, sector, size, flags.
    type Row = (u64, Nanos, String, u32, IoOp, u64, u32, IoFlags);

    fn records(text: &str, options: ReadOptions) -> Result<Vec<Row>, TraceError> {
        let mut reader = TraceReader::new(text.as_bytes(), "t", options);
        let mut out = Vec::new();
        while let Some(r) = reader.next_record()? {
            out.push((
                r.line,
                r.time_ns,
                r.process.to_string(),
                r.pid,
                r.op,
                r.sector,
                r.nr_sectors,
                r.flags,
            ));
        }
        Ok(out)
    }

    #[test]
    fn blkparse_lines_give_the_chosen_action() {
        let text = "\
  8,0    0        1     0.000000000  1234  Q  WS 123456 + 8 [proc name]
  8,0    0        2     0.000001000  1234  G  WS 123456 + 8 [proc name]
  8,0    0        3     0.000002000  1234  D  WS 123456 + 8 [proc name]
  8,0    0        4     1.500000123     0  C  WS 123456 + 8 [0]
  8,0    0        5     1.600000000    77  Q FWFSM 99 + 8 [jbd2/sda1-8]
  8,0    0        6     1.700000000    77  Q  FN 0 + 0 [jbd2/sda1-8]
  8,0    0        7     1.750000000    77  Q FWS 0 + 0 [jbd2/sda1-8]
  8,0    0        8     1.800000000    12  P   N [kworker]
# 0 events dropped
CPU0 (8,0):
 Reads Queued:           0,        0KiB	 Writes Queued:           3,       12KiB
Total (8,0):
";
        let q = records(text, ReadOptions::new(Format::Blkparse)).unwrap();
        assert_eq!(q.len(), 4);
        assert_eq!(q[0].2, "proc name");
        assert_eq!(
            (q[0].3, q[0].4, q[0].5, q[0].6),
            (1234, IoOp::Write, 123456, 8)
        );
        assert!(q[0].7.sync);
        let f = q[1].7;
        assert!(f.preflush && f.fua && f.sync && f.meta, "{f:?}");
        assert_eq!(q[2].4, IoOp::Flush);
        assert_eq!((q[3].4, q[3].6), (IoOp::Flush, 0));
        let mut options = ReadOptions::new(Format::Blkparse);
        options.action = b'C';
        let c = records(text, options).unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].1, 1_500_000_123);
        let error = records(
            "  8,0 0 1 0.0 1 Q WS x + 8 [a]\n",
            ReadOptions::new(Format::Blkparse),
        )
        .unwrap_err();
        assert_eq!(error.line, 1);
        assert!(error.message.contains("sector"), "{error}");
    }

    #[test]
    fn pixel_csv_rows_with_header_crlf_and_marker() {
        let text = "proces,device,rw_flag,sector,size,timestamp\r\nloop40-2757,8388608,R,206567552,8,653406.907265\r\n<...>-21515,8388608,W,21557936,16,653408.082164\r\npreconditioning_ended\r\nkworker/u17:0-21515,8388608,W,1,8,653408.083012\r\n";
        let rows = records(text, ReadOptions::new(Format::Pixel)).unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!((rows[0].2.as_str(), rows[0].3), ("loop40", 2757));
        assert_eq!(rows[0].1, 653_406_907_265_000);
        assert_eq!((rows[1].2.as_str(), rows[1].4), ("<...>", IoOp::Write));
        assert_eq!(rows[2].2, "kworker/u17:0");
        assert!(rows[0].7.sync && !rows[1].7.sync);
    }

    #[test]
    fn disksim_rows_in_any_time_unit() {
        let text = "0.5 0 1024 8 1\n1.25 1 2048 16 0\n";
        let rows = records(text, ReadOptions::new(Format::Disksim)).unwrap();
        assert_eq!(
            (rows[0].1, rows[0].4, rows[0].2.as_str()),
            (500_000, IoOp::Read, "dev0")
        );
        assert_eq!(
            (rows[1].1, rows[1].4, rows[1].6),
            (1_250_000, IoOp::Write, 16)
        );
        let mut ns = ReadOptions::new(Format::Disksim);
        ns.time_unit = TimeUnit::Ns;
        let rows = records("938513000 4 264719034 16 0\n", ns).unwrap();
        assert_eq!(rows[0].1, 938_513_000);
    }

    #[test]
    fn bad_lines_are_errors_or_skipped_and_counted() {
        let text = "0.5 0 1024 8 1\nnonsense\n1.0 0 2048 8 0 extra\n2.0 0 4096 8 0\n";
        let error = records(text, ReadOptions::new(Format::Disksim)).unwrap_err();
        assert_eq!((error.file.as_str(), error.line), ("t", 2));
        let mut options = ReadOptions::new(Format::Disksim);
        options.skip_bad_lines = true;
        let mut reader = TraceReader::new(text.as_bytes(), "t", options);
        let mut n = 0;
        while reader.next_record().unwrap().is_some() {
            n += 1;
        }
        assert_eq!((n, reader.skipped), (2, 2));
        assert_eq!(reader.first_skipped().unwrap().line, 2);
        assert!(records("a,b\n", ReadOptions::new(Format::Pixel)).is_err());
        assert!(
            records("x-1,8,Q,0,8,1.0\n", ReadOptions::new(Format::Pixel))
                .unwrap_err()
                .message
                .contains("rw_flag")
        );
    }

    #[test]
    fn formats_are_detected_and_times_parse_exactly() {
        assert_eq!(
            Format::detect("  8,0    0        1     0.000000000  1  Q  W 1 + 8 [a]"),
            Some(Format::Blkparse)
        );
        assert_eq!(
            Format::detect("proces,device,rw_flag,sector,size,timestamp"),
            Some(Format::Pixel)
        );
        assert_eq!(
            Format::detect("938513000 4 264719034 16 0"),
            Some(Format::Disksim)
        );
        assert_eq!(parse_time(b"12.345", 1_000_000), Some(12_345_000));
        // Plain integers (one pass) and the limits around it.
        assert_eq!(parse_time(b"0", 1), Some(0));
        assert_eq!(parse_time(b"123450000", 1), Some(123_450_000));
        assert_eq!(parse_time(b"0012", 1_000), Some(12_000));
        assert_eq!(
            parse_time(b"9999999999999999999", 1),
            Some(9_999_999_999_999_999_999)
        );
        assert_eq!(parse_time(b"9999999999999999999", 2), None, "overflow");
        assert_eq!(parse_time(b"18446744073709551615", 1), Some(u64::MAX));
        assert_eq!(parse_time(b"18446744073709551616", 1), None);
        assert_eq!(parse_time(b"12a", 1), None);
        assert_eq!(parse_time(b"", 1), None);
        assert_eq!(parse_time(b"1e3", 1_000), Some(1_000_000));
        assert_eq!(parse_time(b"-1", 1), None);
    }
}
