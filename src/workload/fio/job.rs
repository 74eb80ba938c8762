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
    /// `rw=<mode>:<n>` on a sequential mode: bytes added to the offset after each I/O (fio's
    /// `ddir_seq_add`, options.c `str_rw_cb`): a hole when positive, backwards when negative.
    pub seq_add: i64,
    /// Block sizes per direction (read, write, trim) when they are not all `bs`: `bs=r,w,t`,
    /// `bssplit`, `bsrange`. `None`: every I/O is `bs` bytes.
    pub sizes: Option<Box<[BlockSizes; 3]>>,
    /// `blockalign`: the alignment of random offsets (fio's default: the smallest block size).
    pub blockalign: Option<u64>,
    /// `random_distribution`: how random offsets are drawn.
    pub distribution: Distribution,
    /// `number_ios`: the clone stops after this many I/Os (if nothing stopped it before).
    pub number_ios: Option<u64>,
    /// `loops`: how many times the region is done (fio's default 1).
    pub loops: u32,
    /// `io_size` / `io_limit`: the bytes of I/O per loop when not `size` (the offsets wrap in
    /// the region).
    pub io_size: Option<u64>,
    /// `offset_increment`: clone `n` of `numjobs` starts at `offset + n * offset_increment`.
    pub offset_increment: u64,
    /// `startdelay`: the job starts this long after its group.
    pub startdelay: Nanos,
    /// `thinktime` (microseconds in the job file): a pause after each I/O.
    pub thinktime: Nanos,
    /// `new_group`: starts a new reporting group (without waiting, unlike `stonewall`).
    pub new_group: bool,
    /// `wait_for`: the job starts when the job of that name has finished.
    pub wait_for: Option<String>,
    /// `group_reporting`: the group's jobs are reported as one.
    pub group_reporting: bool,
    /// `exitall`: when this job finishes, every other job stops.
    pub exitall: bool,
    /// `directory`: where the job's files are (relative ones under [`FIO_DIRECTORY`]).
    pub directory: Option<String>,
    /// `filesize`: the size of the job's file (fio lays it out this large; the default
    /// `size` when there is none).
    pub filesize: Option<u64>,
    /// `rate_iops`: I/Os per second.
    pub rate_iops: Option<u64>,
    /// `rate_process=poisson`: I/Os at exponentially distributed intervals of mean
    /// 1/`rate_iops` (fio's default `linear`: evenly spaced).
    pub poisson: bool,
    /// Options written that change nothing in a simulation, with the reason (printed as notes
    /// so that nothing is ignored silently).
    pub notes: Vec<String>,
}

/// The block sizes of one direction.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub enum BlockSizes {
    /// Every I/O this large.
    Fixed(u64),
    /// `bsrange=min-max`: fio's `get_next_buflen` draws `min + max * r` (r uniform in [0, 1)),
    /// aligned down to `min`, at most `max`.
    Range(u64, u64),
    /// `bssplit`: (size, percent of the I/Os), sorted by percent as fio sorts them (`bs_cmp`).
    Split(Vec<(u64, u32)>),
}

impl BlockSizes {
    /// The smallest size.
    pub fn min(&self) -> u64 {
        match self {
            BlockSizes::Fixed(bs) => *bs,
            BlockSizes::Range(min, _) => *min,
            BlockSizes::Split(split) => split.iter().map(|&(bs, _)| bs).min().unwrap_or(4096),
        }
    }

    /// The largest size.
    pub fn max(&self) -> u64 {
        match self {
            BlockSizes::Fixed(bs) => *bs,
            BlockSizes::Range(_, max) => *max,
            BlockSizes::Split(split) => split.iter().map(|&(bs, _)| bs).max().unwrap_or(4096),
        }
    }
}

/// `random_distribution`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub enum Distribution {
    /// `random` (fio's default): uniform over the region.
    Uniform,
    /// `zoned:a/r:...`: a% of the accesses in the next r% of the region (fio's
    /// `__get_next_rand_offset_zoned`).
    Zoned(Vec<(u32, u32)>),
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
            seq_add: 0,
            sizes: None,
            blockalign: None,
            distribution: Distribution::Uniform,
            number_ios: None,
            loops: 1,
            io_size: None,
            offset_increment: 0,
            startdelay: 0,
            thinktime: 0,
            new_group: false,
            wait_for: None,
            group_reporting: false,
            exitall: false,
            directory: None,
            filesize: None,
            rate_iops: None,
            poisson: false,
            notes: Vec::new(),
        }
    }
}

impl FioJob {
    /// The region the job works on, `(offset, size)` in bytes, checked against a device of
    /// `capacity_bytes`: fio's "you need to specify size=" when there is none (a raw device's
    /// region defaults to the device from `offset` on, a file's to its `filesize`), a region
    /// past the device's end, a region smaller than one block. Errors name the job and the
    /// fields.
    pub fn check_region(&self, capacity_bytes: u64) -> Result<(u64, u64), String> {
        let name = &self.name;
        if let Some(file) = self.filename.as_deref() {
            if matches!(
                file,
                "/dev/null" | "/dev/zero" | "/dev/urandom" | "/dev/random"
            ) {
                return Err(format!(
                    "job `{name}`: filename={file} is a character device: mobistack's fio does I/O on the simulated block device or a file of its file system"
                ));
            }
        }
        if self.raw_device() && !self.direct {
            return Err(format!(
                "job `{name}`: buffered I/O (`direct`=0) on the block device {} goes through the block device's own page cache, which mobistack does not model: use direct=1",
                self.filename.as_deref().unwrap_or_default()
            ));
        }
        let size = match (self.size, self.filesize) {
            (Some(size), _) => size,
            (None, Some(filesize)) => filesize,
            // fio's `get_file_size` of a block device: its size (`BLKGETSIZE64`).
            (None, None) if self.raw_device() => capacity_bytes.saturating_sub(self.offset),
            (None, None) => {
                return Err(format!(
                    "job `{name}`: `size` is required (fio: \"you need to specify size=\"), e.g. size=256m"
                ))
            }
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
        if !self.on_device() && matches!(self.rw, RwMode::Trim | RwMode::RandTrim) {
            return Err(format!(
                "job `{name}`: `rw`={} trims a block device: it needs `direct`=1 and the device (no `filename` or `directory`, or a /dev/ `filename`)",
                if self.rw == RwMode::Trim {
                    "trim"
                } else {
                    "randtrim"
                }
            ));
        }
        Ok((self.offset, size))
    }

    /// Whether `filename` names a block device (`/dev/...`): the simulated device.
    pub fn raw_device(&self) -> bool {
        self.filename
            .as_deref()
            .is_some_and(|name| name.starts_with("/dev/"))
    }

    /// Whether the job does its I/O on the device itself (O_DIRECT bios from sector `offset`):
    /// a `/dev/` file, or `direct=1` with neither `filename` nor `directory` (mobistack's
    /// device job; fio would make a file in its working directory). Otherwise the job does its
    /// I/O on a file of the file system: through the page cache, or with O_DIRECT when
    /// `direct=1` (fio opens its files with O_DIRECT then).
    pub fn on_device(&self) -> bool {
        self.raw_device() || (self.direct && self.filename.is_none() && self.directory.is_none())
    }

    /// The file of a job clone: `filename` (absolute, or under `directory`, or under
    /// [`FIO_DIRECTORY`]), else fio's default name `<job>.<clone>.0` in the directory.
    pub fn file_path(&self, clone: u32) -> String {
        if let Some(name) = self.filename.as_deref().filter(|n| n.starts_with('/')) {
            return name.to_string();
        }
        let directory = match self.directory.as_deref() {
            Some(dir) if dir.starts_with('/') => dir.trim_end_matches('/').to_string(),
            Some(dir) => format!("{FIO_DIRECTORY}/{}", dir.trim_end_matches('/')),
            None => FIO_DIRECTORY.to_string(),
        };
        let directory = if directory.is_empty() {
            "/".to_string()
        } else {
            directory
        };
        let sep = if directory.ends_with('/') { "" } else { "/" };
        match &self.filename {
            Some(name) => format!("{directory}{sep}{name}"),
            None => format!("{directory}{sep}{}.{clone}.0", self.name),
        }
    }

    /// The block sizes of direction `ddir` (0 read, 1 write, 2 trim).
    pub fn block_sizes(&self, ddir: usize) -> BlockSizes {
        match &self.sizes {
            Some(sizes) => sizes[ddir].clone(),
            None => BlockSizes::Fixed(self.bs),
        }
    }

    /// The smallest block size of any direction (fio's default `blockalign`).
    pub fn min_bs(&self) -> u64 {
        match &self.sizes {
            Some(sizes) => sizes.iter().map(BlockSizes::min).min().unwrap_or(self.bs),
            None => self.bs,
        }
    }

    /// The largest block size of any direction (a buffer's size).
    pub fn max_bs(&self) -> u64 {
        match &self.sizes {
            Some(sizes) => sizes.iter().map(BlockSizes::max).max().unwrap_or(self.bs),
            None => self.bs,
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

/// Why an engine is not run, by kind.
fn unsupported_engine(engine: &str) -> String {
    let base = engine.split(':').next().unwrap_or(engine);
    let reason = match base {
        "net" | "netsplice" | "rbd" | "rados" | "gfapi" | "gfapi_async" | "libhdfs"
        | "libiscsi" | "nbd" | "nfs" | "http" | "rdma" | "dfs" | "ime_psync" | "ime_psyncv"
        | "ime_aio" | "libcufile" | "libhipfile" | "libblkio" => {
            "a network or remote-storage engine, which has no meaning in a simulation of a phone's storage stack"
        }
        "sg" | "io_uring_cmd" | "libzbc" | "xnvme" | "spdk" => {
            "a passthrough engine (SCSI generic, NVMe or ZBC commands), which mobistack does not model"
        }
        "filecreate" | "filestat" | "filedelete" | "dircreate" | "dirstat" | "dirdelete"
        | "ftruncate" | "falloc" | "e4defrag" => {
            "a file-system operation engine, which mobistack's fio does not model (filebench workloads do such operations)"
        }
        "cpuio" | "exec" => "an engine that burns CPU or runs a program: the simulation does no CPU work",
        "dev-dax" | "libpmem" | "pmemblk" | "mtd" => {
            "persistent memory or raw NAND (MTD), which is not the storage of the modelled phones"
        }
        "null" | "cpp_null" => {
            "fio's null engine measures fio's own overhead, which the simulation does not model (its I/Os would take no time at all)"
        }
        "mmap" | "page_fault" | "splice" | "vsync" | "solarisaio" | "windowsaio" | "guasi" => {
            "an I/O path mobistack's fio does not model"
        }
        _ => "not an engine mobistack knows",
    };
    format!(
        "ioengine={engine}: {reason}; supported engines are psync (fio's default), sync, pvsync, pvsync2, libaio, io_uring, and posixaio"
    )
}

/// Options that change nothing in a simulation, and why: accepted with a note.
const NO_EFFECT: &[(&str, &str)] = &[
    (
        "gtod_reduce",
        "simulated time is exact and free; the latencies are still reported",
    ),
    ("disable_lat", "the latencies are still reported"),
    ("disable_clat", "the latencies are still reported"),
    ("disable_slat", "the latencies are still reported"),
    ("disable_bw_measurement", "the bandwidth is still reported"),
    (
        "write_lat_log",
        "fio's log files are not written (the JSON and --blktrace are)",
    ),
    (
        "write_bw_log",
        "fio's log files are not written (the JSON and --blktrace are)",
    ),
    (
        "write_iops_log",
        "fio's log files are not written (the JSON and --blktrace are)",
    ),
    (
        "write_hist_log",
        "fio's log files are not written (the JSON and --blktrace are)",
    ),
    ("log_avg_msec", "fio's log files are not written"),
    ("log_offset", "fio's log files are not written"),
    ("log_prio", "fio's log files are not written"),
    (
        "numa_cpu_nodes",
        "the simulation has no CPUs or NUMA nodes to place a job on",
    ),
    (
        "numa_mem_policy",
        "the simulation has no CPUs or NUMA nodes to place a job on",
    ),
    (
        "cpus_allowed",
        "the simulation has no CPUs to place a job on",
    ),
    (
        "cpus_allowed_policy",
        "the simulation has no CPUs to place a job on",
    ),
    ("cpumask", "the simulation has no CPUs to place a job on"),
    (
        "randrepeat",
        "the simulation's random numbers come from --seed",
    ),
    (
        "random_generator",
        "the simulation's random numbers come from --seed",
    ),
    (
        "randseed",
        "the simulation's random numbers come from --seed",
    ),
    (
        "buffer_pattern",
        "the data's contents: the simulated devices neither compress nor deduplicate",
    ),
    (
        "buffer_compress_percentage",
        "the data's contents: the simulated devices neither compress nor deduplicate",
    ),
    (
        "buffer_compress_chunk",
        "the data's contents: the simulated devices neither compress nor deduplicate",
    ),
    (
        "dedupe_percentage",
        "the data's contents: the simulated devices neither compress nor deduplicate",
    ),
    (
        "dedupe_mode",
        "the data's contents: the simulated devices neither compress nor deduplicate",
    ),
    (
        "dedupe_working_set_percentage",
        "the data's contents: the simulated devices neither compress nor deduplicate",
    ),
    (
        "dedupe_global",
        "the data's contents: the simulated devices neither compress nor deduplicate",
    ),
    (
        "scramble_buffers",
        "the data's contents: the simulated devices neither compress nor deduplicate",
    ),
    (
        "zero_buffers",
        "the data's contents: the simulated devices neither compress nor deduplicate",
    ),
    (
        "refill_buffers",
        "the data's contents: the simulated devices neither compress nor deduplicate",
    ),
    (
        "io_submit_mode",
        "submission costs no simulated CPU, inline or offloaded to a thread",
    ),
    (
        "fallocate",
        "the file is laid out on disk before the job starts, whatever the preallocation call",
    ),
    (
        "create_on_open",
        "the file is laid out before the job starts",
    ),
    (
        "invalidate",
        "a laid-out file starts uncached, as fio's default invalidate=1 leaves it",
    ),
    ("unlink", "the simulated files go with the run"),
    (
        "ratemin",
        "not checked: fio ends a job whose rate falls below it; the simulated rate is reported",
    ),
    ("ratecycle", "not checked (see ratemin)"),
    ("error_dump", "I/O errors are reported as they are"),
    (
        "iodepth_batch",
        "each I/O is submitted on its own (no batching of io_submit)",
    ),
    (
        "iodepth_batch_submit",
        "each I/O is submitted on its own (no batching of io_submit)",
    ),
    (
        "iodepth_batch_complete",
        "each completion is reaped on its own",
    ),
    (
        "iodepth_batch_complete_min",
        "each completion is reaped on its own",
    ),
    (
        "iodepth_low",
        "each I/O is submitted on its own (no batching of io_submit)",
    ),
];

/// Options with a meaning mobistack does not model: an error naming the option and why.
const REJECTED: &[(&str, &str)] = &[
    (
        "verify",
        "verification reads back and checks the data; the simulation keeps no data contents",
    ),
    ("do_verify", "verification is not modelled (see verify)"),
    (
        "verify_backlog",
        "verification is not modelled (see verify)",
    ),
    ("verify_async", "verification is not modelled (see verify)"),
    ("verify_fatal", "verification is not modelled (see verify)"),
    (
        "verify_interval",
        "verification is not modelled (see verify)",
    ),
    (
        "verify_pattern",
        "verification is not modelled (see verify)",
    ),
    (
        "flow",
        "fio's token-based flow control between jobs is not modelled",
    ),
    (
        "flow_sleep",
        "fio's token-based flow control between jobs is not modelled",
    ),
    (
        "flow_id",
        "fio's token-based flow control between jobs is not modelled",
    ),
    (
        "zonemode",
        "zoned I/O (strided zones, zoned block devices) is not modelled",
    ),
    ("zonesize", "zoned I/O is not modelled"),
    ("zoneskip", "zoned I/O is not modelled"),
    ("zonerange", "zoned I/O is not modelled"),
    ("max_open_zones", "zoned block devices are not modelled"),
    ("read_beyond_wp", "zoned block devices are not modelled"),
    (
        "latency_target",
        "fio's search for the queue depth that meets a latency target is not modelled",
    ),
    (
        "latency_window",
        "fio's latency-target search is not modelled",
    ),
    (
        "latency_percentile",
        "fio's latency-target search is not modelled",
    ),
    ("ss", "fio's steady-state detection is not modelled"),
    ("ss_dur", "fio's steady-state detection is not modelled"),
    ("ss_ramp", "fio's steady-state detection is not modelled"),
    (
        "cmdprio_percentage",
        "per-I/O priorities are not modelled (a job's prio and prioclass are)",
    ),
    (
        "cmdprio_class",
        "per-I/O priorities are not modelled (a job's prio and prioclass are)",
    ),
    (
        "cmdprio",
        "per-I/O priorities are not modelled (a job's prio and prioclass are)",
    ),
    (
        "cmdprio_bssplit",
        "per-I/O priorities are not modelled (a job's prio and prioclass are)",
    ),
    (
        "fill_device",
        "writing until the file system is full is not modelled",
    ),
    (
        "continue_on_error",
        "only fio's default, none, is modelled: a job stops on its first error",
    ),
    (
        "ignore_error",
        "only fio's default is modelled: a job stops on its first error",
    ),
    (
        "exit_what",
        "only exitall's default (the whole run) is modelled",
    ),
    ("sync", "O_SYNC writes are not modelled by mobistack's fio"),
    (
        "ramp_time",
        "a ramp time excluded from the statistics is not modelled",
    ),
    (
        "filename_format",
        "file names made from a format are not supported: give `filename`",
    ),
];

/// Records that `option` changes nothing here, and why.
fn note(job: &mut FioJob, option: &str, reason: &str) {
    let line = format!("`{option}`: {reason}");
    if !job.notes.contains(&line) {
        job.notes.push(line);
    }
}

/// Whether `text` has a `:` not escaped as `\:`.
fn unescaped_colon(text: &str) -> bool {
    text.replace("\\:", "").contains(':')
}

/// fio's per-direction values (`bs=r,w,t`; options.c `str_split_parse` and the HOWTO): one
/// value is all three directions; `a,b` is reads a, writes and trims b; `a,b,c` each; an
/// empty place keeps the default. `None` where the default stays.
fn per_direction(value: &str) -> [Option<String>; 3] {
    let parts: Vec<&str> = value.trim().split(',').map(str::trim).collect();
    let some = |part: &str| (!part.is_empty()).then(|| part.to_string());
    match parts.as_slice() {
        [all] => [some(all), some(all), some(all)],
        [read, write] => [some(read), some(write), some(write)],
        [read, write, trim, ..] => [some(read), some(write), some(trim)],
        [] => [None, None, None],
    }
}

/// A value given for every direction must be the same in each (a rate per direction is not
/// modelled: the job's I/O is paced as a whole).
fn all_directions_alike(option: &str, value: &str) -> Result<String, String> {
    let given: Vec<String> = per_direction(value).into_iter().flatten().collect();
    match given.first() {
        Some(first) if given.iter().all(|v| v == first) => Ok(first.clone()),
        Some(_) => Err(format!(
            "{option}={value}: different values per direction are not supported"
        )),
        None => Err(format!("option `{option}` needs a value")),
    }
}

/// The job's block sizes per direction so far.
fn directions_of(job: &FioJob) -> [BlockSizes; 3] {
    [job.block_sizes(0), job.block_sizes(1), job.block_sizes(2)]
}

/// Sets the job's block sizes: `bs` alone when every direction has the same fixed size,
/// else `sizes` (and `bs` the smallest, for the checks made against one block).
fn set_sizes(job: &mut FioJob, sizes: [BlockSizes; 3]) {
    match &sizes {
        [BlockSizes::Fixed(a), BlockSizes::Fixed(b), BlockSizes::Fixed(c)] if a == b && b == c => {
            job.bs = *a;
            job.sizes = None;
        }
        _ => {
            job.bs = sizes.iter().map(BlockSizes::min).min().unwrap_or(job.bs);
            job.sizes = Some(Box::new(sizes));
        }
    }
}

/// One block size: a positive multiple of 512 up to [`MAX_BS`].
fn parse_block_size(option: &str, value: &str, part: &str) -> Result<u64, String> {
    let bs = parse_fio_size(option, part)
        .map_err(|_| format!("{option}={value}: expected a size such as 4k, 128k, 1m"))?;
    if bs == 0 || bs % SECTOR_SIZE != 0 || bs > MAX_BS {
        return Err(format!(
            "{option}={value}: must be a positive multiple of 512, at most 64m"
        ));
    }
    Ok(bs)
}

/// One direction of `bssplit`: `size/percent:size/percent...` (options.c `split_parse_ddir`
/// and `bssplit_ddir`: a missing or zero percentage shares what the others leave, a
/// percentage above 100 counts as 100; sorted by percentage as `bs_cmp` sorts them).
fn parse_bssplit(option: &str, value: &str, part: &str) -> Result<BlockSizes, String> {
    let mut entries: Vec<(u64, Option<u32>)> = Vec::new();
    for entry in part.split(':').take_while(|e| !e.is_empty()) {
        let (size, percent) = match entry.split_once('/') {
            Some((size, percent)) => {
                let percent: u32 = percent.trim().parse().map_err(|_| {
                    format!("{option}={value}: `{entry}`: expected size/percent, e.g. 4k/60")
                })?;
                (size, (percent > 0).then_some(percent.min(100)))
            }
            None => (entry, None),
        };
        entries.push((parse_block_size(option, value, size)?, percent));
        if entries.len() > 64 {
            return Err(format!(
                "{option}={value}: more than 64 entries (fio's BSSPLIT_MAX)"
            ));
        }
    }
    if entries.is_empty() {
        return Err(format!(
            "{option}={value}: expected size/percent entries, e.g. 4k/60:64k/40"
        ));
    }
    let given: u32 = entries.iter().filter_map(|e| e.1).sum();
    let missing = entries.iter().filter(|e| e.1.is_none()).count() as u32;
    if given > 100 && missing > 1 {
        return Err(format!(
            "{option}={value}: the percentages add up to more than 100"
        ));
    }
    let share = if missing == 1 && entries.len() == 1 {
        100
    } else {
        100u32
            .saturating_sub(given)
            .checked_div(missing)
            .unwrap_or(0)
    };
    let mut split: Vec<(u64, u32)> = entries
        .into_iter()
        .map(|(size, percent)| (size, percent.unwrap_or(share)))
        .collect();
    split.sort_by_key(|&(_, percent)| percent);
    Ok(BlockSizes::Split(split))
}

/// `random_distribution`: `random`, or `zoned:a/r:...` (percent of accesses / percent of the
/// region; an empty last region is the rest, options.c `parse_zoned_distribution`).
fn parse_distribution(value: &str) -> Result<Distribution, String> {
    if value == "random" {
        return Ok(Distribution::Uniform);
    }
    let Some(zones) = value.strip_prefix("zoned:") else {
        return Err(format!(
            "random_distribution={value}: only random and zoned:... are supported (zipf, pareto, normal and zoned_abs are not)"
        ));
    };
    let mut out = Vec::new();
    let (mut access_sum, mut region_sum) = (0u32, 0u32);
    for zone in zones.split(':').filter(|z| !z.is_empty()) {
        let bad = || format!("random_distribution={value}: `{zone}`: expected access%/region%");
        let (access, region) = zone.split_once('/').ok_or_else(bad)?;
        let access: u32 = access.trim().parse().map_err(|_| bad())?;
        let region: u32 = if region.trim().is_empty() {
            100u32.saturating_sub(region_sum)
        } else {
            region.trim().parse().map_err(|_| bad())?
        };
        access_sum += access;
        region_sum += region;
        out.push((access, region));
    }
    if access_sum != 100 || region_sum != 100 {
        return Err(format!(
            "random_distribution={value}: the accesses and the regions must each add up to 100% (fio: \"Zone distribution does not add up to 100\")"
        ));
    }
    Ok(Distribution::Zoned(out))
}

/// fio times in microseconds without a unit (`thinktime`).
fn parse_fio_time_us(option: &str, value: &str) -> Result<Nanos, String> {
    let text = value.trim();
    if !text.is_empty() && text.chars().all(|c| c.is_ascii_digit()) {
        let us: u64 = text
            .parse()
            .map_err(|_| format!("{option}={value}: too long"))?;
        return us
            .checked_mul(1_000)
            .filter(|&ns| ns <= crate::units::MAX_DURATION)
            .ok_or_else(|| format!("{option}={value}: too long: at most 365 days"));
    }
    parse_fio_time(option, value)
}

/// Applies one `option[=value]` to `job`.
fn apply_option(job: &mut FioJob, option: &str, value: Option<&str>) -> Result<(), String> {
    // fio fails to parse an empty value (a `${VAR}` that is not set, for instance).
    let need = || {
        value
            .filter(|v| !v.trim().is_empty())
            .ok_or_else(|| format!("option `{option}` needs a value"))
    };
    match option {
        "name" => job.name = need()?.to_string(),
        "description" => {
            need()?;
        }
        _ if NO_EFFECT.iter().any(|(name, _)| *name == option) => {
            let reason = NO_EFFECT
                .iter()
                .find(|(name, _)| *name == option)
                .map(|(_, reason)| *reason)
                .unwrap_or_default();
            note(job, option, reason);
        }
        _ if REJECTED.iter().any(|(name, _)| *name == option) => {
            let reason = REJECTED
                .iter()
                .find(|(name, _)| *name == option)
                .map(|(_, reason)| *reason)
                .unwrap_or_default();
            return Err(format!("fio option `{option}`: {reason}"));
        }
        "filename" => {
            let name = need()?.trim();
            // fio separates file names with `:`; `\:` is a colon in a name (filesetup.c
            // `get_next_str`).
            if name.is_empty() || unescaped_colon(name) {
                return Err(format!(
                    "filename={name}: expected one file name (several, `:`-separated, are not supported)"
                ));
            }
            job.filename = Some(name.replace("\\:", ":"));
        }
        "clat_percentiles" => job.clat_percentiles = parse_bool(option, value)?,
        "lat_percentiles" => job.lat_percentiles = parse_bool(option, value)?,
        "slat_percentiles" => job.slat_percentiles = parse_bool(option, value)?,
        "rw" | "readwrite" => {
            let value = need()?.trim();
            let (mode, postfix) = match value.split_once(':') {
                Some((mode, postfix)) => (mode, Some(postfix)),
                None => (value, None),
            };
            job.rw = RwMode::parse(mode)?;
            job.seq_add = 0;
            if let Some(postfix) = postfix {
                if job.rw.random() {
                    return Err(format!(
                        "rw={value}: a random mode's `:<nr>` (a new random offset every nr I/Os) is not supported"
                    ));
                }
                let (negative, digits) = match postfix.trim().strip_prefix('-') {
                    Some(rest) => (true, rest),
                    None => (false, postfix.trim()),
                };
                let add = parse_fio_size(option, digits)? as i64;
                job.seq_add = if negative { -add } else { add };
            }
        }
        "rwmixread" => job.rwmixread = parse_number(option, need()?, 0, 100)? as u32,
        "rwmixwrite" => job.rwmixread = 100 - parse_number(option, need()?, 0, 100)? as u32,
        "bs" | "blocksize" => {
            let value = need()?;
            let parts = per_direction(value);
            let mut sizes = directions_of(job);
            for (ddir, part) in parts.iter().enumerate() {
                if let Some(part) = part {
                    sizes[ddir] = BlockSizes::Fixed(parse_block_size(option, value, part)?);
                }
            }
            set_sizes(job, sizes);
        }
        "bsrange" | "blocksize_range" => {
            let value = need()?;
            let mut sizes = directions_of(job);
            for (ddir, part) in per_direction(value).iter().enumerate() {
                if let Some(part) = part {
                    let (low, high) = part.split_once(['-', ':']).ok_or_else(|| {
                        format!("{option}={value}: expected min-max, e.g. 4k-64k")
                    })?;
                    let low = parse_block_size(option, value, low)?;
                    let high = parse_block_size(option, value, high)?;
                    // fio swaps a range given the wrong way round (parse.c `check_range`).
                    let (low, high) = (low.min(high), low.max(high));
                    sizes[ddir] = if low == high {
                        BlockSizes::Fixed(low)
                    } else {
                        BlockSizes::Range(low, high)
                    };
                }
            }
            set_sizes(job, sizes);
        }
        "bssplit" => {
            let value = need()?;
            let mut sizes = directions_of(job);
            for (ddir, part) in per_direction(value).iter().enumerate() {
                if let Some(part) = part {
                    sizes[ddir] = parse_bssplit(option, value, part)?;
                }
            }
            set_sizes(job, sizes);
        }
        "blockalign" | "ba" => {
            let value = need()?;
            // One alignment for all directions: the read one (fio keeps one per direction).
            let first = per_direction(value)[0].clone().unwrap_or_default();
            job.blockalign = Some(parse_block_size(option, value, &first)?);
        }
        "random_distribution" => job.distribution = parse_distribution(need()?.trim())?,
        "number_ios" => job.number_ios = Some(parse_fio_size(option, need()?)?).filter(|&n| n > 0),
        "loops" => job.loops = parse_number(option, need()?, 1, u64::from(u32::MAX))? as u32,
        "io_size" | "io_limit" => {
            job.io_size = Some(parse_fio_size(option, need()?)?).filter(|&n| n > 0)
        }
        "offset_increment" => job.offset_increment = parse_fio_size(option, need()?)?,
        "startdelay" => job.startdelay = parse_fio_time(option, need()?)?,
        // fio's `thinktime` is in microseconds without a unit (`is_time`, base us).
        "thinktime" => job.thinktime = parse_fio_time_us(option, need()?)?,
        "new_group" => job.new_group = parse_bool(option, value)?,
        "wait_for" => job.wait_for = Some(need()?.trim().to_string()),
        "group_reporting" => job.group_reporting = parse_bool(option, value)?,
        "exitall" => job.exitall = parse_bool(option, value)?,
        "directory" => {
            let dir = need()?.trim();
            if dir.is_empty() || unescaped_colon(dir) {
                return Err(format!(
                    "directory={dir}: expected one directory (several, `:`-separated, are not supported)"
                ));
            }
            job.directory = Some(dir.replace("\\:", ":"));
        }
        "filesize" => {
            let value = need()?;
            if value.contains(['-', ',']) {
                return Err(format!(
                    "{option}={value}: a range of file sizes is not supported"
                ));
            }
            job.filesize = Some(parse_fio_size(option, value)?);
        }
        "nrfiles" | "nr_files" => {
            if parse_number(option, need()?, 1, u64::from(u32::MAX))? != 1 {
                return Err(format!(
                    "{option}={}: a job on several files is not supported (one file per job)",
                    need()?
                ));
            }
        }
        "rate_iops" => {
            let value = need()?;
            let rate = parse_fio_size(option, &all_directions_alike(option, value)?)?;
            job.rate_iops = (rate > 0).then_some(rate);
        }
        "rate_process" => {
            job.poisson = match need()?.trim() {
                "linear" => false,
                "poisson" => true,
                other => return Err(format!("rate_process={other}: expected linear or poisson")),
            }
        }
        "thread" | "threads" => {
            parse_bool(option, value)?;
            note(job, option, "a job's clones are tasks of the simulation either way; Linux gives threads and processes their own I/O context alike");
        }
        "norandommap" => {
            parse_bool(option, value)?;
            note(
                job,
                option,
                "random offsets are always drawn with repeats (fio's norandommap behaviour)",
            );
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
                _ => return Err(unsupported_engine(engine)),
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
            let rate = parse_fio_size(option, &all_directions_alike(option, value)?)?;
            job.rate = (rate > 0).then_some(rate);
        }
        // fio's default `runtime=0`: no limit. `timeout` is fio's alias.
        "runtime" | "timeout" => {
            job.runtime = Some(parse_fio_time(option, need()?)?).filter(|&ns| ns > 0)
        }
        "time_based" => job.time_based = parse_bool(option, value)?,
        "stonewall" | "wait_for_previous" => job.stonewall = parse_bool(option, value)?,
        _ => return Err(format!("unsupported fio option `{option}`")),
    }
    Ok(())
}

/// Parses a job file. Errors name the line and the option, and cut long values. `${VAR}`
/// expands to nothing, as in fio for a variable that is not set: [`parse_job_file_env`] takes
/// the environment.
pub fn parse_job_file(text: &str) -> Result<Vec<FioJob>, String> {
    parse_job_file_env(text, &|_| None)
}

/// [`parse_job_file`] with `env` giving the value of `${VAR}` (`mobistack fio` passes the
/// process's environment, as fio reads its own: options.c `fio_option_dup_subs`).
pub fn parse_job_file_env(
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<FioJob>, String> {
    parse_jobs(text, env).map_err(|e| crate::units::cut_message(&e))
}

/// A line without its comment: fio's `strip_blank_end` (parse.c) cuts a line at its first `;`
/// or `#`, wherever it is, and the blanks before it.
fn strip_comment(line: &str) -> &str {
    let end = line.find([';', '#']).unwrap_or(line.len());
    line[..end].trim()
}

/// `${VAR}` replaced by `env`'s value, or by nothing (options.c `fio_option_dup_subs`).
/// fio's own keywords (`$pagesize`, `$mb_memory`, `$ncpus`, with arithmetic through `bc`) are
/// an error: their values are the machine's.
fn substitute(line: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    for keyword in ["$pagesize", "$mb_memory", "$ncpus"] {
        if line.contains(keyword) {
            return Err(format!(
                "fio's keyword `{keyword}` (the machine's value, with arithmetic) is not supported"
            ));
        }
    }
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find('}') {
            Some(end) if end > 0 => {
                out.push_str(&env(&after[..end]).unwrap_or_default());
                rest = &after[end + 1..];
            }
            _ => {
                out.push_str("${");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    Ok(out)
}

fn parse_jobs(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Vec<FioJob>, String> {
    let mut global = FioJob::default();
    let mut jobs: Vec<FioJob> = Vec::new();
    let mut current: Option<FioJob> = None;
    let mut in_global = false;
    for (index, raw) in text.lines().enumerate() {
        let line_number = index + 1;
        let line = strip_comment(raw);
        if line.is_empty() {
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
            // init.c: a section whose name starts with "global" is the global one.
            in_global = section.starts_with("global");
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
        if line.starts_with("include ") {
            return Err(format!(
                "line {line_number}: `include` of another job file is not supported"
            ));
        }
        let line = substitute(line, env).map_err(|e| format!("line {line_number}: {e}"))?;
        let (option, value) = match line.split_once('=') {
            Some((option, value)) => (option.trim(), Some(value.trim())),
            None => (line.as_str(), None),
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
    check_wait_for(&jobs)?;
    check_submitters(&jobs)?;
    Ok(jobs)
}

/// `wait_for` names an earlier job (init.c `wait_for_ok`: "waitee job unknown", or not
/// before the waiter).
fn check_wait_for(jobs: &[FioJob]) -> Result<(), String> {
    for (index, job) in jobs.iter().enumerate() {
        if let Some(waitee) = &job.wait_for {
            if waitee == &job.name {
                return Err(format!("job `{}`: wait_for names the job itself", job.name));
            }
            if !jobs[..index].iter().any(|j| &j.name == waitee) {
                return Err(format!(
                    "job `{}`: wait_for={waitee}: no job of that name before it (fio: \"waitee job {waitee} unknown\")",
                    job.name
                ));
            }
        }
    }
    Ok(())
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
        if matches!(
            option.as_str(),
            "stonewall"
                | "wait_for_previous"
                | "name"
                | "new_group"
                | "wait_for"
                | "group_reporting"
                | "exitall"
        ) {
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
    if let Some(note) = job.notes.first() {
        return Err(format!(
            "fio option {note}: it changes nothing in a simulation, so a scenario does not take it"
        ));
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
pub(crate) mod tests {
    use super::*;
    use crate::units::NS_PER_MS;

    /// Two jobs in fio syntax (also the runner's tests' input).
    pub(crate) const JOBS: &str = "
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
        assert!(parse_job_file("[a]\nbs=4k,64k,x\n")
            .unwrap_err()
            .contains("bs=4k,64k,x"));
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

    /// The fio syntax of fio's own examples (init.c `__parse_jobs_ini`, parse.c
    /// `strip_blank_end`, options.c `fio_option_dup_subs` and `str_rw_cb`, fio 3.33).
    #[test]
    fn fio_syntax_comments_variables_escapes_and_offset_modifiers() {
        let env = |name: &str| (name == "FIO_BS").then(|| "8k".to_string());
        let text = "[global]\t; a comment\nsize=1m # another\nbs=${FIO_BS}\n\
                    [backwards]\nrw=read:-8k\nfilename=iscsi\\://host\\:disk\n\
                    [hole]\nrw=write:112k\nnumjobs=4\t; 4 clones\niodepth=${UNSET}1\n";
        let jobs = parse_job_file_env(text, &env).unwrap();
        assert_eq!(jobs.len(), 2);
        assert_eq!((jobs[0].size, jobs[0].bs), (Some(1 << 20), 8 << 10));
        assert_eq!((jobs[0].rw, jobs[0].seq_add), (RwMode::Read, -(8 << 10)));
        assert_eq!(jobs[0].filename.as_deref(), Some("iscsi://host:disk"));
        assert_eq!(
            (jobs[1].seq_add, jobs[1].numjobs, jobs[1].iodepth),
            (112 << 10, 4, 1)
        );
        // Without the environment, `${FIO_BS}` is empty, as in fio: an error naming bs.
        let error = parse_job_file(text).unwrap_err();
        assert!(
            error.contains("line 3") && error.contains("`bs`"),
            "{error}"
        );
        // An unescaped `:` is a list of files.
        assert!(parse_job_file("[a]\nsize=1m\nfilename=a:b\n")
            .unwrap_err()
            .contains("several"));
        assert!(parse_job_file("[a]\nsize=$mb_memory\n")
            .unwrap_err()
            .contains("$mb_memory"));
        assert!(parse_job_file("[a]\nrw=randread:8\nsize=1m\n")
            .unwrap_err()
            .contains("randread:8"));
    }

    /// fio's per-direction values and block-size options (options.c `str_split_parse`,
    /// `bssplit_ddir`; the HOWTO's `bs=8k,32k`).
    #[test]
    fn block_sizes_per_direction_bssplit_and_bsrange_as_fio_reads_them() {
        let job = &parse_job_file("[a]\nsize=1m\nbs=8k,32k\n").unwrap()[0];
        assert_eq!(job.block_sizes(0), BlockSizes::Fixed(8 << 10));
        assert_eq!(job.block_sizes(1), BlockSizes::Fixed(32 << 10));
        assert_eq!(job.block_sizes(2), BlockSizes::Fixed(32 << 10));
        assert_eq!(job.bs, 8 << 10);
        let job = &parse_job_file("[a]\nsize=1m\nbs=,8k,\n").unwrap()[0];
        assert_eq!(job.block_sizes(0), BlockSizes::Fixed(4096));
        assert_eq!(job.block_sizes(1), BlockSizes::Fixed(8 << 10));
        assert_eq!(job.block_sizes(2), BlockSizes::Fixed(4096));
        // bssplit: sorted by percentage; a missing share takes what is left.
        let job = &parse_job_file("[a]\nsize=1m\nbssplit=64k/40:1024k/60,1m/100\n").unwrap()[0];
        assert_eq!(
            job.block_sizes(0),
            BlockSizes::Split(vec![(64 << 10, 40), (1 << 20, 60)])
        );
        assert_eq!(job.block_sizes(1), BlockSizes::Split(vec![(1 << 20, 100)]));
        let job = &parse_job_file("[a]\nsize=1m\nbssplit=4k/60:8k:16k\n").unwrap()[0];
        assert_eq!(
            job.block_sizes(1),
            BlockSizes::Split(vec![(8 << 10, 20), (16 << 10, 20), (4 << 10, 60)])
        );
        assert_eq!((job.min_bs(), job.max_bs()), (4 << 10, 16 << 10));
        // bsrange with one size is that size.
        let job = &parse_job_file("[a]\nsize=1m\nbsrange=4k-4k\n").unwrap()[0];
        assert_eq!((job.sizes.is_none(), job.bs), (true, 4096));
        let job = &parse_job_file("[a]\nsize=1m\nbsrange=16k-1m\n").unwrap()[0];
        assert_eq!(job.block_sizes(0), BlockSizes::Range(16 << 10, 1 << 20));
        let job =
            &parse_job_file("[a]\nsize=1m\nrandom_distribution=zoned:50/5:30/15:20/\n").unwrap()[0];
        assert_eq!(
            job.distribution,
            Distribution::Zoned(vec![(50, 5), (30, 15), (20, 80)])
        );
        assert!(parse_job_file("[a]\nsize=1m\nrandom_distribution=zipf:0.5\n").is_err());
        assert!(parse_job_file("[a]\nsize=1m\nrate=1m,2m\n")
            .unwrap_err()
            .contains("per direction"));
        assert_eq!(
            parse_job_file("[a]\nsize=1m\nrate=300,300,300\n").unwrap()[0].rate,
            Some(300)
        );
    }

    /// Options with no meaning here are noted, options mobistack does not model are refused
    /// with the reason, engines by kind.
    #[test]
    fn options_without_effect_are_noted_and_unmodelled_ones_refused_with_a_reason() {
        let job = &parse_job_file("[a]\nsize=1m\nthread\nnorandommap\nrandrepeat=0\n").unwrap()[0];
        assert_eq!(job.notes.len(), 3, "{:?}", job.notes);
        assert!(job.notes[2].contains("--seed"), "{:?}", job.notes);
        let error = parse_job_file("[a]\nsize=1m\nverify=crc32c\n").unwrap_err();
        assert!(
            error.contains("`verify`") && error.contains("data contents"),
            "{error}"
        );
        let error = parse_job_file("[a]\nioengine=net\n").unwrap_err();
        assert!(error.contains("network"), "{error}");
        let error = parse_job_file("[a]\nioengine=sg\n").unwrap_err();
        assert!(error.contains("passthrough"), "{error}");
        // A scenario's job takes no option that changes nothing.
        let pairs = [("norandommap".to_string(), None)];
        assert!(job_from_options("app", &pairs)
            .unwrap_err()
            .contains("norandommap"));
        // wait_for names an earlier job.
        assert!(parse_job_file("[a]\nsize=1m\nwait_for=b\n[b]\nsize=1m\n")
            .unwrap_err()
            .contains("waitee"));
    }

    /// Where a job's I/O goes: a /dev/ file or a device job is the device (its region the
    /// device's when no size is given, as fio sizes a block device); a file with `direct=1` is
    /// a file opened with O_DIRECT (filesetup.c), under `directory`.
    #[test]
    fn files_directories_and_raw_devices() {
        let jobs = parse_job_file(
            "[dev]\ndirect=1\nfilename=/dev/sdb\noffset=1m\n\
             [file]\ndirect=1\ndirectory=/data1\nfilename=f\nsize=1m\n\
             [rel]\ndirectory=tmp\nfilesize=2m\n\
             [plain]\ndirect=1\nsize=1m\n",
        )
        .unwrap();
        assert!(jobs[0].on_device() && jobs[0].raw_device());
        assert_eq!(jobs[0].check_region(8 << 20).unwrap(), (1 << 20, 7 << 20));
        assert!(!jobs[1].on_device());
        assert_eq!(jobs[1].file_path(0), "/data1/f");
        assert_eq!(jobs[2].file_path(1), "/data/fio/tmp/rel.1.0");
        assert_eq!(jobs[2].check_region(8 << 20).unwrap(), (0, 2 << 20));
        assert!(jobs[3].on_device());
        let error = parse_job_file("[a]\nfilename=/dev/sda\n").unwrap()[0]
            .check_region(8 << 20)
            .unwrap_err();
        assert!(error.contains("direct=1"), "{error}");
        let error = parse_job_file("[a]\nfilename=/dev/null\nsize=1m\n").unwrap()[0]
            .check_region(8 << 20)
            .unwrap_err();
        assert!(error.contains("character device"), "{error}");
    }
}
