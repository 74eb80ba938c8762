//! fio job files: the options (fio's names and units) of a job, parsed into a [`FioJob`].
//!
//! Supported subset (fio's HOWTO names and units): `[global]` and job sections; `rw` / `readwrite`
//! (read, write, randread, randwrite, rw / readwrite, randrw, trim, randtrim), `rwmixread`,
//! `rwmixwrite`, `bs` / `blocksize`, `iodepth`, `size` (required, as in fio), `offset`,
//! `numjobs`, `direct` / `buffered`, `ioengine`, `prio`, `prioclass` (and `ioprio` as an alias
//! of `prio`), `rate`, `runtime`, `time_based`, `stonewall` / `wait_for_previous`, `filename`,
//! `description`, `clat_percentiles`, `lat_percentiles`, `slat_percentiles`. Sizes use fio's
//! default base 1024 ("4k" = 4096); `runtime` without a unit is seconds; `rate` is bytes per
//! second. Any other option is an error naming it: nothing is silently ignored.
//!
//! Not supported (errors): split read/write values ("4k,64k"), trims with `direct=0`, and
//! everything not listed above.

use crate::block::request::{IoPrio, IoPrioClass};
use crate::units::{parse_duration, Nanos, NS_PER_SEC, SECTOR_SIZE};

/// Bound on job sections and clones in one file.
pub const MAX_JOBS: usize = 256;
/// Bound on `iodepth`.
const MAX_IODEPTH: u32 = 4096;
/// Bound on `bs`: 64 MiB (a buffered job holds one buffer of `bs` bytes per job).
pub const MAX_BS: u64 = 64 << 20;
/// Bound on the submitter tasks of a job file (`numjobs` x `iodepth`, summed): 65,536, far
/// below the engine's task limit.
pub const MAX_SUBMITTERS: u64 = 1 << 16;
/// First pid given to fio processes.
pub const FIRST_PID: u32 = 1000;

/// `rw=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RwMode {
    Read,
    Write,
    RandRead,
    RandWrite,
    ReadWrite,
    RandRw,
    Trim,
    RandTrim,
}

impl RwMode {
    fn parse(value: &str) -> Result<RwMode, String> {
        Ok(match value {
            "read" => RwMode::Read,
            "write" => RwMode::Write,
            "randread" => RwMode::RandRead,
            "randwrite" => RwMode::RandWrite,
            "rw" | "readwrite" => RwMode::ReadWrite,
            "randrw" => RwMode::RandRw,
            "trim" => RwMode::Trim,
            "randtrim" => RwMode::RandTrim,
            _ => {
                return Err(format!(
                    "rw={value}: expected read, write, randread, randwrite, rw, readwrite, randrw, trim or randtrim"
                ))
            }
        })
    }

    /// Whether the mode draws random offsets.
    pub fn random(self) -> bool {
        matches!(
            self,
            RwMode::RandRead | RwMode::RandWrite | RwMode::RandRw | RwMode::RandTrim
        )
    }
}

/// One job section after `[global]` defaults are applied.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FioJob {
    pub name: String,
    pub rw: RwMode,
    /// Percentage of reads for mixed workloads.
    pub rwmixread: u32,
    pub bs: u64,
    pub iodepth: u32,
    /// Region size; required (`None` only until the job file gives it).
    pub size: Option<u64>,
    pub offset: u64,
    pub numjobs: u32,
    pub ioengine: String,
    pub ioprio: IoPrio,
    /// Bytes per second.
    pub rate: Option<u64>,
    pub runtime: Option<Nanos>,
    pub time_based: bool,
    pub stonewall: bool,
    /// `direct=1`: O_DIRECT on the raw device; fio's default is buffered I/O through the page
    /// cache (`direct=0`).
    pub direct: bool,
    /// `filename`: for buffered jobs, the file (relative names go under [`FIO_DIRECTORY`]).
    pub filename: Option<String>,
    /// Which latencies get percentiles (fio: `clat_percentiles=1`, the others 0).
    pub clat_percentiles: bool,
    pub lat_percentiles: bool,
    pub slat_percentiles: bool,
}

/// Where buffered jobs' files go when `filename` is not absolute (fio uses the working
/// directory; an app's would be its data directory).
pub const FIO_DIRECTORY: &str = "/data/fio";

impl Default for FioJob {
    fn default() -> Self {
        FioJob {
            name: String::new(),
            rw: RwMode::Read,
            rwmixread: 50,
            bs: 4096,
            iodepth: 1,
            size: None,
            offset: 0,
            numjobs: 1,
            ioengine: "psync".to_string(),
            ioprio: IoPrio::NONE,
            rate: None,
            runtime: None,
            time_based: false,
            stonewall: false,
            direct: false,
            filename: None,
            clat_percentiles: true,
            lat_percentiles: false,
            slat_percentiles: false,
        }
    }
}

impl FioJob {
    /// The region the job works on, `(offset, size)` in bytes, checked against a device of
    /// `capacity_bytes`: fio's "you need to specify size=" when there is none, a region past
    /// the device's end, a region smaller than one block. Errors name the job and the fields.
    pub fn check_region(&self, capacity_bytes: u64) -> Result<(u64, u64), String> {
        let name = &self.name;
        let Some(size) = self.size else {
            return Err(format!(
                "job `{name}`: `size` is required (fio: \"you need to specify size=\"), e.g. size=256m"
            ));
        };
        let end = self.offset.saturating_add(size);
        if end > capacity_bytes {
            return Err(format!(
                "job `{name}`: `offset` + `size` ({} + {} = {end} bytes) exceeds the device capacity ({capacity_bytes} bytes)",
                self.offset, size
            ));
        }
        if size < self.bs {
            return Err(format!(
                "job `{name}`: `size` ({size} bytes) is smaller than `bs` ({} bytes)",
                self.bs
            ));
        }
        if self.time_based && self.runtime.is_none() {
            return Err(format!(
                "job `{name}`: `time_based` needs a `runtime` above 0 (fio: \"time_based requires a runtime/timeout setting\")"
            ));
        }
        if self.direct && !self.offset.is_multiple_of(SECTOR_SIZE) {
            // fio uses a byte `offset` as given (only a percentage is aligned, to
            // `offset_align`); O_DIRECT at an offset that is not a multiple of the logical
            // block size fails with EINVAL, and fio stops the job on that error.
            return Err(format!(
                "job `{name}`: `offset`={} is not a multiple of 512 bytes: `direct`=1 (O_DIRECT) I/O at it fails with EINVAL",
                self.offset
            ));
        }
        if !self.direct && matches!(self.rw, RwMode::Trim | RwMode::RandTrim) {
            return Err(format!(
                "job `{name}`: `rw`={} trims a block device: it needs `direct`=1",
                if self.rw == RwMode::Trim {
                    "trim"
                } else {
                    "randtrim"
                }
            ));
        }
        Ok((self.offset, size))
    }

    /// The file of a buffered job clone: `filename` (absolute, or under [`FIO_DIRECTORY`]), else
    /// fio's default name `<job>.<clone>.0`.
    pub fn file_path(&self, clone: u32) -> String {
        match &self.filename {
            Some(name) if name.starts_with('/') => name.clone(),
            Some(name) => format!("{FIO_DIRECTORY}/{name}"),
            None => format!("{FIO_DIRECTORY}/{}.{clone}.0", self.name),
        }
    }

    /// Whether the engine is asynchronous (fio records submission latency only for those).
    pub fn is_async(&self) -> bool {
        matches!(self.ioengine.as_str(), "libaio" | "io_uring" | "posixaio")
    }

    /// `iodepth` as the engine honours it: synchronous engines, and libaio on buffered I/O
    /// (which `io_submit` completes synchronously), keep one I/O in flight.
    pub fn effective_iodepth(&self) -> u32 {
        if self.is_async() && (self.direct || self.ioengine != "libaio") {
            self.iodepth
        } else {
            1
        }
    }
}

/// fio sizes: a number with an optional k/m/g/t suffix, base 1024 (`kb_base=1024`), optional
/// "i" and "b"; "KiB"-style also accepted.
fn parse_fio_size(option: &str, value: &str) -> Result<u64, String> {
    let text = value.trim();
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let bad = || format!("{option}={value}: expected a size such as 4k, 128k, 1m, 2g");
    if digits_end == 0 {
        return Err(bad());
    }
    let number: u64 = text[..digits_end].parse().map_err(|_| bad())?;
    let suffix = text[digits_end..].to_ascii_lowercase();
    let suffix = suffix.trim_end_matches('b').trim_end_matches('i');
    let scale: u64 = match suffix {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        "t" => 1 << 40,
        _ => return Err(bad()),
    };
    number.checked_mul(scale).ok_or_else(bad)
}

/// fio times: seconds without a unit; "m" is minutes as in fio.
fn parse_fio_time(option: &str, value: &str) -> Result<Nanos, String> {
    let text = value.trim();
    if !text.is_empty() && text.chars().all(|c| c.is_ascii_digit()) {
        let too_long = || format!("{option}={value}: too long: at most 365 days (31536000)");
        let seconds: u64 = text.parse().map_err(|_| too_long())?;
        return seconds
            .checked_mul(NS_PER_SEC)
            .filter(|&ns| ns <= crate::units::MAX_DURATION)
            .ok_or_else(too_long);
    }
    let normalized = match text.strip_suffix('m') {
        Some(minutes) if !text.ends_with("ms") => format!("{minutes}min"),
        _ => text.to_string(),
    };
    parse_duration(&normalized).map_err(|error| format!("{option}={value}: {error}"))
}

fn parse_number(option: &str, value: &str, low: u64, high: u64) -> Result<u64, String> {
    let number: u64 = value
        .trim()
        .parse()
        .map_err(|_| format!("{option}={value}: expected an integer"))?;
    if number < low || number > high {
        return Err(format!(
            "{option}={value}: must be between {low} and {high}"
        ));
    }
    Ok(number)
}

fn parse_bool(option: &str, value: Option<&str>) -> Result<bool, String> {
    match value.map(str::trim) {
        None | Some("1") | Some("true") => Ok(true),
        Some("0") | Some("false") => Ok(false),
        Some(other) => Err(format!("{option}={other}: expected 0 or 1")),
    }
}

/// Applies one `option[=value]` to `job`.
fn apply_option(job: &mut FioJob, option: &str, value: Option<&str>) -> Result<(), String> {
    let need = || value.ok_or_else(|| format!("option `{option}` needs a value"));
    match option {
        "name" => job.name = need()?.to_string(),
        "description" => {
            need()?;
        }
        "filename" => {
            let name = need()?.trim();
            if name.is_empty() || name.contains(':') {
                return Err(format!(
                    "filename={name}: expected one file name (several, `:`-separated, are not supported)"
                ));
            }
            job.filename = Some(name.to_string());
        }
        "clat_percentiles" => job.clat_percentiles = parse_bool(option, value)?,
        "lat_percentiles" => job.lat_percentiles = parse_bool(option, value)?,
        "slat_percentiles" => job.slat_percentiles = parse_bool(option, value)?,
        "rw" | "readwrite" => job.rw = RwMode::parse(need()?.trim())?,
        "rwmixread" => job.rwmixread = parse_number(option, need()?, 0, 100)? as u32,
        "rwmixwrite" => job.rwmixread = 100 - parse_number(option, need()?, 0, 100)? as u32,
        "bs" | "blocksize" => {
            let value = need()?;
            if value.contains(',') {
                return Err(format!(
                    "{option}={value}: separate read/write block sizes are not supported"
                ));
            }
            let bs = parse_fio_size(option, value)?;
            if bs == 0 || bs % SECTOR_SIZE != 0 || bs > MAX_BS {
                return Err(format!(
                    "{option}={value}: must be a positive multiple of 512, at most 64m"
                ));
            }
            job.bs = bs;
        }
        "iodepth" => job.iodepth = parse_number(option, need()?, 1, u64::from(MAX_IODEPTH))? as u32,
        "size" => job.size = Some(parse_fio_size(option, need()?)?),
        "offset" => job.offset = parse_fio_size(option, need()?)?,
        "numjobs" => job.numjobs = parse_number(option, need()?, 1, MAX_JOBS as u64)? as u32,
        "direct" => job.direct = parse_bool(option, value)?,
        "buffered" => job.direct = !parse_bool(option, value)?,
        "ioengine" => {
            let engine = need()?.trim();
            match engine {
                "libaio" | "io_uring" | "posixaio" | "sync" | "psync" | "pvsync" | "pvsync2" => {
                    job.ioengine = engine.to_string()
                }
                _ => {
                    return Err(format!(
                        "ioengine={engine}: supported engines are libaio, io_uring, posixaio, sync, psync, pvsync, pvsync2"
                    ))
                }
            }
        }
        "prio" | "ioprio" => {
            job.ioprio.level = parse_number(option, need()?, 0, 7)? as u8;
            if job.ioprio.class == IoPrioClass::None {
                job.ioprio.class = IoPrioClass::Be;
            }
        }
        "prioclass" => {
            job.ioprio.class = match parse_number(option, need()?, 0, 3)? {
                0 => IoPrioClass::None,
                1 => IoPrioClass::Rt,
                2 => IoPrioClass::Be,
                _ => IoPrioClass::Idle,
            }
        }
        "rate" => {
            let value = need()?;
            if value.contains(',') {
                return Err(format!(
                    "rate={value}: separate read/write rates are not supported"
                ));
            }
            let rate = parse_fio_size(option, value)?;
            job.rate = (rate > 0).then_some(rate);
        }
        // fio's default `runtime=0`: no limit.
        "runtime" => job.runtime = Some(parse_fio_time(option, need()?)?).filter(|&ns| ns > 0),
        "time_based" => job.time_based = parse_bool(option, value)?,
        "stonewall" | "wait_for_previous" => job.stonewall = parse_bool(option, value)?,
        _ => return Err(format!("unsupported fio option `{option}`")),
    }
    Ok(())
}

/// Parses a job file. Errors name the line and the option, and cut long values.
pub fn parse_job_file(text: &str) -> Result<Vec<FioJob>, String> {
    parse_jobs(text).map_err(|e| crate::units::cut_message(&e))
}

fn parse_jobs(text: &str) -> Result<Vec<FioJob>, String> {
    let mut global = FioJob::default();
    let mut jobs: Vec<FioJob> = Vec::new();
    let mut current: Option<FioJob> = None;
    let mut in_global = false;
    for (index, raw) in text.lines().enumerate() {
        let line_number = index + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with(';') || line.starts_with('#') {
            continue;
        }
        if let Some(section) = line.strip_prefix('[') {
            let section = section
                .strip_suffix(']')
                .ok_or_else(|| format!("line {line_number}: unterminated section `{line}`"))?
                .trim();
            if let Some(job) = current.take() {
                jobs.push(job);
            }
            in_global = section == "global";
            if !in_global {
                if jobs.len() >= MAX_JOBS {
                    return Err(format!("more than {MAX_JOBS} jobs"));
                }
                current = Some(FioJob {
                    name: section.to_string(),
                    ..global.clone()
                });
            }
            continue;
        }
        let (option, value) = match line.split_once('=') {
            Some((option, value)) => (option.trim(), Some(value.trim())),
            None => (line, None),
        };
        let target = if in_global {
            &mut global
        } else {
            current
                .as_mut()
                .ok_or_else(|| format!("line {line_number}: option `{option}` outside a section"))?
        };
        apply_option(target, option, value)
            .map_err(|error| format!("line {line_number}: {}", crate::units::cut_words(&error)))?;
    }
    if let Some(job) = current.take() {
        jobs.push(job);
    }
    if jobs.is_empty() {
        return Err("the job file defines no job (only [global] or nothing)".to_string());
    }
    check_submitters(&jobs)?;
    Ok(jobs)
}

/// A job from `option = value` pairs (a scenario's `[app.workload.fio]` table), with fio's
/// names, units and errors. `stonewall` has no meaning inside one app and is rejected.
pub fn job_from_options(
    name: &str,
    options: &[(String, Option<String>)],
) -> Result<FioJob, String> {
    job_from_pairs(name, options).map_err(|e| crate::units::cut_message(&e))
}

fn job_from_pairs(name: &str, options: &[(String, Option<String>)]) -> Result<FioJob, String> {
    let mut job = FioJob {
        name: name.to_string(),
        ..FioJob::default()
    };
    for (option, value) in options {
        if matches!(option.as_str(), "stonewall" | "wait_for_previous" | "name") {
            return Err(format!(
                "fio option `{option}` is not available in an app workload (one app is one job)"
            ));
        }
        apply_option(&mut job, option, value.as_deref())
            .map_err(|e| crate::units::cut_words(&e))?;
    }
    if job.time_based && job.runtime.is_none() {
        return Err(
            "time_based needs a runtime above 0 (fio: \"time_based requires a runtime/timeout setting\")"
                .to_string(),
        );
    }
    check_submitters(std::slice::from_ref(&job))?;
    Ok(job)
}

/// The jobs' submitter tasks (`numjobs` x `iodepth`, summed) stay under [`MAX_SUBMITTERS`].
fn check_submitters(jobs: &[FioJob]) -> Result<(), String> {
    let total: u64 = jobs
        .iter()
        .map(|job| u64::from(job.numjobs) * u64::from(job.iodepth))
        .sum();
    if total > MAX_SUBMITTERS {
        return Err(format!(
            "`numjobs` x `iodepth` adds up to {total} I/Os in flight, more than the {MAX_SUBMITTERS} mobistack runs"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::NS_PER_MS;

    const JOBS: &str = "
; two jobs, fio syntax
[global]
direct=1
ioengine=libaio
size=4m

[seqread]
rw=read
bs=128k
iodepth=4

[randwrite]
stonewall
rw=randwrite
bs=4k
iodepth=8
numjobs=2
prioclass=3
";

    #[test]
    fn job_files_parse_with_global_defaults() {
        let jobs = parse_job_file(JOBS).unwrap();
        assert_eq!(jobs.len(), 2);
        assert_eq!(jobs[0].name, "seqread");
        assert_eq!(
            (jobs[0].bs, jobs[0].iodepth, jobs[0].size),
            (128 << 10, 4, Some(4 << 20))
        );
        assert_eq!(jobs[1].rw, RwMode::RandWrite);
        assert!(jobs[1].stonewall && !jobs[0].stonewall);
        assert_eq!(jobs[1].numjobs, 2);
        assert_eq!(jobs[1].ioprio.class, IoPrioClass::Idle);
        assert_eq!(parse_fio_time("runtime", "30").unwrap(), 30 * NS_PER_SEC);
        assert_eq!(parse_fio_time("runtime", "2m").unwrap(), 120 * NS_PER_SEC);
        assert_eq!(parse_fio_time("runtime", "500ms").unwrap(), 500 * NS_PER_MS);
        // Seconds that would overflow (or pass the documented limit) are an error.
        for huge in ["18446744073709551615", "18446744074", "31536001"] {
            let error = parse_fio_time("runtime", huge).unwrap_err();
            assert!(error.contains("at most 365 days"), "{error}");
        }
    }

    #[test]
    fn unsupported_options_are_errors_naming_them() {
        let error = parse_job_file("[a]\ndirect=1\nverify=md5\n").unwrap_err();
        assert!(
            error.contains("`verify`") && error.contains("line 3"),
            "{error}"
        );
        assert!(parse_job_file("[a]\nbs=4k,64k\n")
            .unwrap_err()
            .contains("bs=4k,64k"));
        assert!(parse_job_file("[global]\nbs=4k\n").is_err());
        assert!(parse_job_file("[a]\nbs=1t\n")
            .unwrap_err()
            .contains("at most 64m"));
        // Found by fuzzing: a long line with spaces was echoed whole.
        let long = format!("[a]\n{} x\n", "word ".repeat(2_000));
        let error = parse_job_file(&long).unwrap_err();
        assert!(error.len() < 1_200, "a {}-byte error", error.len());
        let error = parse_job_file("[a]\nnumjobs=256\niodepth=4096\n").unwrap_err();
        assert!(error.contains("more than the 65536"), "{error}");
        assert!(parse_job_file("[a]\nioengine=mmap\n")
            .unwrap_err()
            .contains("mmap"));
    }
}
