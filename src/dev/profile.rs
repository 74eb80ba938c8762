//! Device profiles: every parameter of a [`FlashDevice`], with its source, and the scenario's
//! `[device]` table ([`DeviceConfig`]).
//!
//! Sources and the calibration procedure (the same one `mobistack device fit` automates, see
//! [`super::bench::fit_profile`]):
//! - Fixed from public sources: host bus bandwidth and duplex (eMMC HS200 200 MB/s, HS400 400 MB/s,
//!   half duplex; UFS HS-G3 2 lanes 5.8 Gbit/s x 2 x 8b/10b = 1160 MB/s, HS-G4 2320 MB/s, full
//!   duplex; docs/references.md "Interfaces and queues"), host queue depth (eMMC < 5.1: 1, eMMC 5.1 CMDQ
//!   32, UFS 32 per LU), NAND array read / program / erase times per cell type (SimpleSSD/FEMU
//!   figures in docs/references.md: MLC read 48/64 us -> 56 us mean, program 850/2300 us, erase 3 ms;
//!   TLC read 56.5/77.5/106 us -> 80 us mean, erase 3 ms; SLC read 40 us, program 800 us), die
//!   count of the part where known ("512 GB UFS 3.0 = 8 dies").
//! - Calibrated against the vendor figures of docs/references.md, one parameter per figure, each the
//!   mechanism that bounds that figure: `channel_bandwidth` (effective NAND bus rate incl. ECC and
//!   command cycles) from sequential read; `program_time` (or `slc_program_time` when the part has
//!   an SLC buffer, because vendor write figures are measured in it) from sequential write;
//!   `read_overhead` (controller firmware time per command, serial on one core) from random read;
//!   `write_overhead` from random write. Procedure: run `device bench` at the vendor's queue depth
//!   (32, or 1 for parts without command queueing), scale each parameter by the ratio of measured
//!   to published, repeat until within 2 %; the values below are the result, rounded.
//! - Assumptions (no public figure; stated as such): write cache size, SLC buffer size,
//!   over-provisioning (7 %, the usual 2^30/10^9 gap), GC threshold, discard and flush firmware
//!   costs, controller slots (commands worked on at once).

use super::flash::FlashDevice;
use super::sched::SCHEDULER_NAMES;
use super::BlockDevice;
use crate::units::serde_units::{bandwidth, duration, size};
use crate::units::{parse_bandwidth, Nanos, NS_PER_US};
use serde::{Deserialize, Serialize};

/// Host interface family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Interface {
    Emmc,
    Ufs,
    Sata,
    Sd,
}

impl Interface {
    /// The device numbers the kernel gives a device of this kind (what blktrace records):
    /// eMMC and SD cards are `mmcblk0` (block major 179, `MMC_BLOCK_MAJOR`), UFS and SATA
    /// disks `sda` (SCSI disk major 8).
    pub fn device_numbers(self) -> (u32, u32) {
        match self {
            Interface::Emmc | Interface::Sd => (179, 0),
            Interface::Ufs | Interface::Sata => (8, 0),
        }
    }
}

/// The vendor's published figures a profile is calibrated against (None: no public figure).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Published {
    /// Sequential read, MB/s (10^6 bytes per second).
    pub seq_read_mbps: Option<f64>,
    pub seq_write_mbps: Option<f64>,
    /// Random 4 KiB reads per second.
    pub rand_read_iops: Option<f64>,
    pub rand_write_iops: Option<f64>,
    /// Where the figures come from.
    pub source: Option<String>,
}

/// Every parameter of a flash device model. In a scenario file, durations, sizes and bandwidths
/// are written with units ("56us", "16KiB", "400MB/s").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceProfile {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub interface: Interface,
    /// Exported (logical) capacity.
    #[serde(with = "size")]
    pub capacity: u64,
    /// Commands the host may have outstanding.
    pub queue_depth: usize,
    /// Commands the controller works on at once; the rest wait in the internal queue.
    pub controller_slots: usize,
    pub full_duplex: bool,
    #[serde(with = "bandwidth")]
    pub bus_bandwidth: u64,
    /// Firmware time per command on the controller core.
    #[serde(with = "duration")]
    pub read_overhead: Nanos,
    #[serde(with = "duration")]
    pub write_overhead: Nanos,
    #[serde(with = "duration")]
    pub flush_overhead: Nanos,
    #[serde(with = "duration")]
    pub discard_overhead: Nanos,
    /// Firmware time per mapped 4 KiB page a discard unmaps.
    #[serde(with = "duration")]
    pub discard_per_page: Nanos,
    pub channels: u32,
    pub dies_per_channel: u32,
    pub planes: u32,
    #[serde(with = "size")]
    pub page_size: u64,
    pub pages_per_block: u32,
    #[serde(with = "duration")]
    pub read_time: Nanos,
    #[serde(with = "duration")]
    pub program_time: Nanos,
    #[serde(with = "duration")]
    pub erase_time: Nanos,
    #[serde(with = "duration")]
    pub slc_read_time: Nanos,
    #[serde(with = "duration")]
    pub slc_program_time: Nanos,
    #[serde(with = "bandwidth")]
    pub channel_bandwidth: u64,
    /// Volatile write cache; 0 = write-through.
    #[serde(with = "size")]
    pub write_cache: u64,
    /// SLC-mode write buffer (WriteBooster / TurboWrite); 0 = none.
    #[serde(with = "size")]
    pub slc_buffer: u64,
    /// Extra physical space as a fraction of the logical space.
    pub over_provisioning: f64,
    /// Garbage collection starts when a die has this many free blocks or fewer.
    pub gc_free_blocks: u32,
    /// Default internal scheduling policy.
    pub scheduler: String,
    /// Writes per eMMC 4.5 packed command the card and host accept (`EXT_CSD_MAX_PACKED_WRITES`
    /// with the host's `MMC_CAP2_PACKED_WR`, Samsung's packed writes); 0 = none. No built-in
    /// profile sets it: no source says which of the papers' phones enabled it.
    #[serde(default)]
    pub packed_write_max: u32,
    /// UFS Command Priority (the CP flag of the command UPIU, UFS 2.1 / JESD220C on): whether
    /// the host marks real-time requests for the device. The device's `cmd-priority` scheduler
    /// is what serves them first. Default false.
    #[serde(default)]
    pub cmd_priority: bool,
    /// Whether the device honours FUA writes. eMMC: Linux's mmc driver declares FUA (and, in
    /// 3.x, cache flushes at all) only for a card with reliable writes and CMD23
    /// (`mmc_blk_alloc_req`: `MMC_BLK_REL_WR` -> `blk_queue_flush(q, REQ_FLUSH | REQ_FUA)`);
    /// UFS/SCSI: when the device reports DPOFUA (`sd_read_cache_type`). Default true for every
    /// built-in profile (the papers' phones' cards report reliable writes: an assumption, no
    /// source names their EXT_CSD); `[stack.device] fua = false` models a device without.
    #[serde(default = "fua_default")]
    pub fua: bool,
    /// Which reads may suspend a NAND program or erase in progress on their die (and go ahead
    /// of die work not yet started): `off` (default), `foreground` (reads the host marks
    /// foreground, FastTrack's flag, or high priority, `REQ_PRIO` / UFS CP), `reads` (every
    /// read). No built-in profile turns it on: whether a shipped eMMC/UFS firmware suspends
    /// programs for reads is not published (JEDEC specifies host-visible interrupts, eMMC HPI,
    /// JESD84-B45 §6.6 "High Priority Interrupt", which stops a host command, not a NAND
    /// operation), so as-shipped behaviour stays what mobistack modelled before.
    #[serde(default)]
    pub suspend: SuspendPolicy,
    /// From a suspend request to the die accepting a read, when programming. Default 100 us:
    /// MQSim's `Suspend_Program_Time` (Tavakkol et al., FAST'18, ssdconfig.xml default); a
    /// program suspends at the end of an ISPP program/verify step (Wu & He, FAST'12).
    #[serde(with = "duration", default = "program_suspend_default")]
    pub program_suspend_latency: Nanos,
    /// The same for an erase (and GC work). Default 700 us: MQSim's `Suspend_Erase_Time`.
    #[serde(with = "duration", default = "erase_suspend_default")]
    pub erase_suspend_latency: Nanos,
    /// Added to the suspended operation's remaining time when it resumes. asm: 20 us, one
    /// ISPP step redone (the step the suspend cut short restarts; no public figure).
    #[serde(with = "duration", default = "resume_overhead_default")]
    pub suspend_resume_overhead: Nanos,
    /// Suspensions one program or erase accepts; after that, reads wait for it to end (parts
    /// bound them so that a stream of reads cannot starve a program). asm: 4.
    #[serde(default = "suspend_max_default")]
    pub suspend_max: u32,
    #[serde(default)]
    pub published: Published,
}

/// Which reads may suspend a program or erase (see [`DeviceProfile::suspend`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SuspendPolicy {
    #[default]
    Off,
    Foreground,
    Reads,
}

impl SuspendPolicy {
    /// Whether a read with these marks may suspend die work.
    pub fn allows(self, foreground: bool, prio: bool) -> bool {
        match self {
            SuspendPolicy::Off => false,
            SuspendPolicy::Foreground => foreground || prio,
            SuspendPolicy::Reads => true,
        }
    }
}

fn fua_default() -> bool {
    true
}

fn program_suspend_default() -> Nanos {
    100 * US
}

fn erase_suspend_default() -> Nanos {
    700 * US
}

fn resume_overhead_default() -> Nanos {
    20 * US
}

fn suspend_max_default() -> u32 {
    4
}

/// Longest time one NAND operation, firmware step or suspend step of a profile may take: 1 s.
/// The slowest built-in figure is the microSD card's 9.92 ms per write command; a bound far
/// above every part keeps the device's sums of times far from overflow and catches a unit
/// mistake ("1000s" for "1000us").
pub const MAX_STEP_TIME: Nanos = crate::units::NS_PER_SEC;
/// Most channels, and most dies per channel, of a profile; their product is bounded by
/// [`MAX_DIES`]. UFS 4.0 controllers have 8 channels (docs/references.md); 1024 is the model's
/// bound, not a part's.
pub const MAX_DIES: u32 = 1024;
/// Most planes of a die: 16 (parts of 2014 on have 2 to 6; a bound on the model's program unit).
pub const MAX_PLANES: u32 = 16;
/// Largest NAND page: 1 MiB (parts have 2 to 16 KiB; a bound on the model's program unit).
pub const MAX_PAGE_SIZE: u64 = 1 << 20;
/// Most pages per block: 16,384 (3D TLC parts have about 1,000 to 3,000; a bound on the block).
pub const MAX_PAGES_PER_BLOCK: u32 = 16_384;
/// Largest GC reserve: 1,024 free blocks per die. The reserve is added on top of the data
/// blocks, so a larger one only costs memory (FTLs keep a few blocks: SimpleSSD's default GC
/// threshold is 5 % of the blocks, the built-in profiles 3 blocks).
pub const MAX_GC_FREE_BLOCKS: u32 = 1024;
/// Most writes per eMMC packed command: 255, the range of the one-byte
/// `EXT_CSD_MAX_PACKED_WRITES` (JESD84-B45, EXT_CSD[500]).
pub const MAX_PACKED_WRITES: u32 = 255;
/// Most suspensions of one program or erase: 1,000 (asm: no part publishes its bound; a bound on
/// the model's work per operation).
pub const MAX_SUSPENDS: u32 = 1000;

impl DeviceProfile {
    /// Checks user-supplied numbers, field by field in the order of the struct: every field of
    /// a custom profile, so that a profile that passes builds a device. Errors name the field
    /// in backticks and its valid range.
    pub fn validate(&self) -> Result<(), String> {
        let name = &self.name;
        let fail = |what: String| Err(format!("device profile `{name}`: {what}"));
        if self.queue_depth == 0 || self.queue_depth > 256 {
            return fail(format!(
                "`queue_depth` {} must be between 1 and 256",
                self.queue_depth
            ));
        }
        if self.controller_slots == 0 || self.controller_slots > self.queue_depth {
            return fail(format!(
                "`controller_slots` {} must be between 1 and `queue_depth` ({})",
                self.controller_slots, self.queue_depth
            ));
        }
        for (field, value) in [
            ("bus_bandwidth", self.bus_bandwidth),
            ("channel_bandwidth", self.channel_bandwidth),
        ] {
            if value == 0 {
                return fail(format!(
                    "`{field}` 0 must be positive (at least 1 B/s, e.g. \"400MB/s\")"
                ));
            }
        }
        self.check_times()?;
        self.check_geometry()?;
        let geometry = self.geometry();
        let unit = geometry.program_unit_bytes();
        let dies = u64::from(geometry.dies());
        let blocks_min = 8 * unit * u64::from(self.pages_per_block) * dies;
        if self.capacity < blocks_min {
            return fail(format!(
                "`capacity` {} B is below 8 blocks per die ({blocks_min} B)",
                self.capacity
            ));
        }
        if self.capacity > MAX_CAPACITY {
            return fail(format!(
                "`capacity` {} is beyond the model's limit of {} (its 32-bit page map stops at about 15 TiB); a smaller capacity, e.g. \"8GiB\", behaves the same for most workloads",
                crate::units::format_size(self.capacity),
                crate::units::format_size(MAX_CAPACITY)
            ));
        }
        if self.write_cache != 0
            && (self.write_cache < 2 * unit * dies || self.write_cache > MAX_CAPACITY)
        {
            return fail(format!(
                "`write_cache` {} B must be 0 (write-through) or between two program units per die ({} B) and {}",
                self.write_cache,
                2 * unit * dies,
                crate::units::format_size(MAX_CAPACITY)
            ));
        }
        // An SLC buffer may exceed an overridden `capacity` (`ufs-3.1` with capacity = "4GiB"):
        // it then holds every write, as a new part's empty buffer does.
        if self.slc_buffer > MAX_CAPACITY {
            return fail(format!(
                "`slc_buffer` {} B must be between 0 (none) and {}",
                self.slc_buffer,
                crate::units::format_size(MAX_CAPACITY)
            ));
        }
        if !(0.0..=1.0).contains(&self.over_provisioning) {
            return fail(format!(
                "`over_provisioning` {} must be a fraction between 0 and 1 (e.g. 0.07)",
                self.over_provisioning
            ));
        }
        if !(2..=MAX_GC_FREE_BLOCKS).contains(&self.gc_free_blocks) {
            return fail(format!(
                "`gc_free_blocks` {} must be between 2 (GC needs a block to copy into) and {MAX_GC_FREE_BLOCKS}",
                self.gc_free_blocks
            ));
        }
        let (blocks_per_die, slots) = super::ftl::Ftl::layout(
            self.capacity / super::nand::MAP_UNIT_BYTES,
            geometry.dies(),
            geometry.units_per_program(),
            geometry.units_per_block(),
            self.over_provisioning,
            self.gc_free_blocks,
        );
        if slots >= u64::from(super::ftl::UNMAPPED) {
            return fail(format!(
                "`capacity` {} with `over_provisioning` {} and `gc_free_blocks` {} needs {blocks_per_die} blocks per die, {slots} physical 4 KiB pages in all: more than the model's 32-bit page map holds ({}); lower `capacity`",
                crate::units::format_size(self.capacity),
                self.over_provisioning,
                self.gc_free_blocks,
                super::ftl::UNMAPPED
            ));
        }
        if !SCHEDULER_NAMES.contains(&self.scheduler.as_str()) {
            return fail(format!(
                "unknown `scheduler` `{}`; known: {}",
                self.scheduler,
                SCHEDULER_NAMES.join(", ")
            ));
        }
        if self.packed_write_max > MAX_PACKED_WRITES {
            return fail(format!(
                "`packed_write_max` {} must be between 0 (none) and {MAX_PACKED_WRITES} (EXT_CSD_MAX_PACKED_WRITES is one byte)",
                self.packed_write_max
            ));
        }
        if self.suspend_max > MAX_SUSPENDS {
            return fail(format!(
                "`suspend_max` {} must be between 0 and {MAX_SUSPENDS}",
                self.suspend_max
            ));
        }
        self.published.validate().or_else(fail)
    }

    /// The NAND geometry of the profile (valid after [`DeviceProfile::check_geometry`]).
    fn geometry(&self) -> super::nand::Geometry {
        super::nand::Geometry {
            channels: self.channels,
            dies_per_channel: self.dies_per_channel,
            planes: self.planes,
            page_bytes: self.page_size as u32,
            pages_per_block: self.pages_per_block,
        }
    }

    /// `channels`, `dies_per_channel`, `planes`, `page_size`, `pages_per_block`, each within its
    /// range before any is multiplied.
    fn check_geometry(&self) -> Result<(), String> {
        let name = &self.name;
        let fail = |what: String| Err(format!("device profile `{name}`: {what}"));
        for (field, value, max) in [
            ("channels", self.channels, MAX_DIES),
            ("dies_per_channel", self.dies_per_channel, MAX_DIES),
            ("planes", self.planes, MAX_PLANES),
        ] {
            if !(1..=max).contains(&value) {
                return fail(format!("`{field}` {value} must be between 1 and {max}"));
            }
        }
        if self.channels * self.dies_per_channel > MAX_DIES {
            return fail(format!(
                "`channels` x `dies_per_channel` = {} dies is more than the model's {MAX_DIES}",
                self.channels * self.dies_per_channel
            ));
        }
        let unit = super::nand::MAP_UNIT_BYTES;
        if !(unit..=MAX_PAGE_SIZE).contains(&self.page_size) || !self.page_size.is_multiple_of(unit)
        {
            return fail(format!(
                "`page_size` {} B must be a multiple of the 4 KiB mapping unit between 4 KiB and {} KiB",
                self.page_size,
                MAX_PAGE_SIZE / 1024
            ));
        }
        if !(2..=MAX_PAGES_PER_BLOCK).contains(&self.pages_per_block) {
            return fail(format!(
                "`pages_per_block` {} must be between 2 and {MAX_PAGES_PER_BLOCK}",
                self.pages_per_block
            ));
        }
        self.geometry().validate().or_else(fail)
    }

    /// Every time of the profile within its range: NAND operations positive, firmware and
    /// suspend steps possibly zero, all at most [`MAX_STEP_TIME`].
    fn check_times(&self) -> Result<(), String> {
        let name = &self.name;
        let positive = [
            ("read_time", self.read_time),
            ("program_time", self.program_time),
            ("erase_time", self.erase_time),
            ("slc_read_time", self.slc_read_time),
            ("slc_program_time", self.slc_program_time),
        ];
        let zero_allowed = [
            ("read_overhead", self.read_overhead),
            ("write_overhead", self.write_overhead),
            ("flush_overhead", self.flush_overhead),
            ("discard_overhead", self.discard_overhead),
            ("discard_per_page", self.discard_per_page),
            ("program_suspend_latency", self.program_suspend_latency),
            ("erase_suspend_latency", self.erase_suspend_latency),
            ("suspend_resume_overhead", self.suspend_resume_overhead),
        ];
        let checks = positive
            .iter()
            .map(|&(field, value)| (field, value, 1))
            .chain(zero_allowed.iter().map(|&(field, value)| (field, value, 0)));
        for (field, value, min) in checks {
            if !(min..=MAX_STEP_TIME).contains(&value) {
                return Err(format!(
                    "device profile `{name}`: `{field}` {} must be between {} and 1s",
                    short_duration(value),
                    if min == 0 { "0" } else { "1ns" }
                ));
            }
        }
        Ok(())
    }
}

/// `value` in the largest unit that writes it whole ("1000s", "56us", "7ns").
fn short_duration(value: Nanos) -> String {
    let units = [(1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us")];
    match units
        .iter()
        .find(|(scale, _)| value != 0 && value.is_multiple_of(*scale))
    {
        Some((scale, unit)) => format!("{}{unit}", value / scale),
        None => format!("{value}ns"),
    }
}

impl Published {
    /// Each figure, when given, a positive finite number.
    fn validate(&self) -> Result<(), String> {
        for (field, value) in [
            ("seq_read_mbps", self.seq_read_mbps),
            ("seq_write_mbps", self.seq_write_mbps),
            ("rand_read_iops", self.rand_read_iops),
            ("rand_write_iops", self.rand_write_iops),
        ] {
            if let Some(value) = value.filter(|v| !(v.is_finite() && *v > 0.0)) {
                return Err(format!(
                    "`published.{field}` {value} must be a positive number"
                ));
            }
        }
        Ok(())
    }
}

/// Where the built-in profiles' parameters come from: the file every `source` cites.
pub const SOURCES_FILE: &str = "docs/references.md";

/// Parameters of every built-in profile that have no public figure (marked `asm:` below):
/// what each is, for the outputs that print costs depending on them.
pub const ASSUMED_PARAMETERS: [(&str, &str); 5] = [
    (
        "flush_overhead",
        "firmware time to start a cache flush (50 us, every profile)",
    ),
    (
        "discard_overhead",
        "UNMAP/ERASE command decode (100 us, every profile)",
    ),
    (
        "discard_per_page",
        "mapping-table update per unmapped 4 KiB page (1 us, every profile)",
    ),
    (
        "write_cache",
        "size of the volatile write cache (controller RAM)",
    ),
    (
        "controller_slots",
        "commands the controller works on at once",
    ),
];

/// Largest device capacity a profile may have: 4 TiB (phones ship up to 1 TB). The FTL's maps
/// are lazy (about 16 KiB of memory per GiB of capacity, `run::MEMORY_PER_DEVICE_GIB`, plus
/// what the data written costs), and its 32-bit page map could not go past ~15 TiB at all.
pub const MAX_CAPACITY: u64 = 4 << 40;

const US: Nanos = NS_PER_US;
const MIB: u64 = 1024 * 1024;
const GIB: u64 = 1024 * MIB;
const MB: u64 = 1_000_000;

// NAND timings (docs/references.md, SimpleSSD/FEMU).
/// MLC read: mean of LSB/MSB 48/64 us.
const MLC_READ: Nanos = 56 * US;
/// TLC read: mean of LSB/CSB/MSB 56.5/77.5/106 us.
const TLC_READ: Nanos = 80 * US;
/// SLC read 40 us (also SLC-mode reads of MLC/TLC parts).
const SLC_READ: Nanos = 40 * US;
/// MLC program: mean of LSB/MSB 850/2300 us.
const MLC_PROGRAM: Nanos = 1575 * US;
/// TLC program: mean of LSB/CSB/MSB 820/2225/5734 us.
const TLC_PROGRAM: Nanos = 2926 * US;
/// SLC program 800 us.
const SLC_PROGRAM: Nanos = 800 * US;
/// MLC and TLC erase 3 ms.
const ERASE: Nanos = 3000 * US;

/// Parameters shared by the built-in profiles unless a profile says otherwise (assumptions,
/// see the module comment).
fn base(name: &str, interface: Interface) -> DeviceProfile {
    DeviceProfile {
        name: name.to_string(),
        description: String::new(),
        interface,
        // asm: a 32 GB phone.
        capacity: 32 * GIB,
        // eMMC 5.1 CMDQ 32 tasks; UFS 32 transfer slots per LU (UFSHCI nutrs); SATA NCQ 32.
        queue_depth: 32,
        // asm: the controller works on half of its queue at once, so the internal order matters
        // (FastTrack §3.4: "modern flash storage maintains its own internal queue").
        controller_slots: 16,
        // eMMC is half duplex; HS400 400 MB/s (docs/references.md).
        full_duplex: false,
        bus_bandwidth: 400 * MB,
        // Placeholders: every profile calibrates its own.
        read_overhead: 20 * US,
        write_overhead: 20 * US,
        // asm: firmware time to start a cache flush.
        flush_overhead: 50 * US,
        // asm: UNMAP/ERASE command decode.
        discard_overhead: 100 * US,
        // asm (no public figure): mapping-table update per unmapped 4 KiB page, i.e. about
        // 0.26 s per GiB discarded.
        discard_per_page: US,
        channels: 2,
        dies_per_channel: 2,
        // asm: two planes, 16 KiB pages (MLC/TLC of 2014 on), 128 pages per MLC block.
        planes: 2,
        page_size: 16 * 1024,
        pages_per_block: 128,
        read_time: MLC_READ,
        program_time: MLC_PROGRAM,
        erase_time: ERASE,
        slc_read_time: SLC_READ,
        slc_program_time: SLC_PROGRAM,
        channel_bandwidth: 200 * MB,
        // asm: 4 MiB of controller RAM for the write cache.
        write_cache: 4 * MIB,
        slc_buffer: 0,
        // asm: 7 %, the usual consumer over-provisioning (raw GiB of NAND sold as GB).
        over_provisioning: 0.07,
        // asm: GC when a die is down to 3 free blocks.
        gc_free_blocks: 3,
        // FastTrack §3.4: devices as shipped serve reads first, FIFO within a type.
        scheduler: "fifo-read-priority".to_string(),
        packed_write_max: 0,
        cmd_priority: false,
        // asm: FUA honoured (see the field).
        fua: true,
        // Off; the costs' sources are on the fields.
        suspend: SuspendPolicy::Off,
        program_suspend_latency: program_suspend_default(),
        erase_suspend_latency: erase_suspend_default(),
        suspend_resume_overhead: resume_overhead_default(),
        suspend_max: suspend_max_default(),
        published: Published::default(),
    }
}

fn samsung(seq_read: f64, seq_write: f64, rand_read: f64, rand_write: f64) -> Published {
    Published {
        seq_read_mbps: Some(seq_read),
        seq_write_mbps: Some(seq_write),
        rand_read_iops: Some(rand_read),
        rand_write_iops: Some(rand_write),
        source: Some(
            "Samsung lineup table (cdrinfo.com, liliputing.com), docs/references.md".into(),
        ),
    }
}

/// The built-in profiles. "cal:" marks a parameter calibrated by the procedure of the module
/// comment against the profile's published figures (the value is the fit's result, rounded);
/// "asm:" marks an assumption; everything else cites its source.
pub fn builtin_profiles() -> Vec<DeviceProfile> {
    vec![
        DeviceProfile {
            description: "eMMC 4.5, HS200, MLC, no command queue (2013 phones, Nexus 5 class)"
                .into(),
            // asm: 16 GB part, as in the phones of the era.
            capacity: 16 * GIB,
            // eMMC before 5.1 has no command queue: one command at a time.
            queue_depth: 1,
            controller_slots: 1,
            // HS200: 200 MB/s, half duplex (docs/references.md).
            bus_bandwidth: 200 * MB,
            // asm: one channel, four 32 Gb MLC dies with 8 KiB pages (2013 MLC).
            channels: 1,
            dies_per_channel: 4,
            page_size: 8 * 1024,
            pages_per_block: 256,
            // cal: seq read 140 MB/s (ONFI 2.x 133-166 MT/s bus).
            channel_bandwidth: 147 * MB,
            // cal: seq write 50 MB/s (within SimpleSSD's MLC 850-2300 us).
            program_time: 1206 * US,
            // cal: rand read 7,000 IOPS at QD1.
            read_overhead: 38 * US,
            // cal: rand write 2,000 IOPS at QD1 (this generation's small-write path is slow).
            write_overhead: 480 * US,
            // asm: 1 MiB cache (CACHE_CTRL, new in eMMC 4.5).
            write_cache: MIB,
            published: samsung(140.0, 50.0, 7000.0, 2000.0),
            ..base("emmc-4.5", Interface::Emmc)
        },
        DeviceProfile {
            description: "eMMC 5.0, HS400, MLC, no command queue (Galaxy S5 class, QASIO's phone)"
                .into(),
            // QASIO §6: the Galaxy S5 has 16 GB of eMMC.
            capacity: 16 * GIB,
            // No CMDQ before eMMC 5.1.
            queue_depth: 1,
            controller_slots: 1,
            // HS400 400 MB/s half duplex (base).
            // asm: one channel, four 32 Gb MLC dies.
            channels: 1,
            dies_per_channel: 4,
            // cal: seq read 250 MB/s.
            channel_bandwidth: 276 * MB,
            // cal: seq write 90 MB/s.
            program_time: 1362 * US,
            // cal: rand read 7,000 IOPS at QD1.
            read_overhead: 62 * US,
            // cal: rand write 13,000 IOPS at QD1.
            write_overhead: 67 * US,
            published: samsung(250.0, 90.0, 7000.0, 13000.0),
            ..base("emmc-5.0", Interface::Emmc)
        },
        DeviceProfile {
            description: "eMMC 5.1, HS400, CMDQ 32, MLC (Nexus 6 class)".into(),
            // CMDQ: 32 tasks (base queue_depth 32); asm: 16 worked on at once (base).
            // asm: 64 GB of 64 Gb MLC dies on 2 channels.
            channels: 2,
            dies_per_channel: 4,
            // cal: seq read 250 MB/s.
            channel_bandwidth: 125 * MB,
            // cal: seq write 125 MB/s.
            program_time: 1868 * US,
            // cal: rand read 11,000 IOPS at QD32 (controller-bound).
            read_overhead: 91 * US,
            // cal: rand write 13,000 IOPS at QD32 (controller-bound).
            write_overhead: 77 * US,
            published: samsung(250.0, 125.0, 11000.0, 13000.0),
            ..base("emmc-5.1", Interface::Emmc)
        },
        DeviceProfile {
            description: "UFS 2.0, HS-G3 x2, 32 slots, MLC (Galaxy S6 class, FastTrack's S6)"
                .into(),
            // UFS is full duplex; HS-G3 2 lanes: 2 x 5.8 Gbit/s x 8b/10b = 1160 MB/s.
            full_duplex: true,
            bus_bandwidth: 1160 * MB,
            // asm: 128 GB of 128 Gb MLC dies on 2 channels.
            channels: 2,
            dies_per_channel: 4,
            // cal: seq read 350 MB/s.
            channel_bandwidth: 175 * MB,
            // cal: seq write 150 MB/s (lands on SimpleSSD's MLC mean, 1575 us).
            program_time: 1587 * US,
            // cal: rand read 19,000 IOPS at QD32.
            read_overhead: 53 * US,
            // cal: rand write 14,000 IOPS at QD32.
            write_overhead: 71 * US,
            published: Published {
                source: Some(
                    "Samsung lineup table, UFS 2.0 128 GB (2015), docs/references.md".into(),
                ),
                ..samsung(350.0, 150.0, 19000.0, 14000.0)
            },
            ..base("ufs-2.0", Interface::Ufs)
        },
        DeviceProfile {
            description: "UFS 2.1, HS-G3 x2, 32 slots, TLC with SLC buffer (2017 flagships)".into(),
            full_duplex: true,
            // HS-G3 x2 as UFS 2.0.
            bus_bandwidth: 1160 * MB,
            // asm: 8 TLC dies (64-layer 512 Gb) on 2 channels.
            channels: 2,
            dies_per_channel: 4,
            // SimpleSSD TLC timings.
            read_time: TLC_READ,
            program_time: TLC_PROGRAM,
            pages_per_block: 192,
            // cal: seq read 860 MB/s.
            channel_bandwidth: 430 * MB,
            // cal: rand read 42,000 IOPS at QD32.
            read_overhead: 24 * US,
            // cal: rand write 40,000 IOPS at QD32.
            write_overhead: 25 * US,
            // asm: 4 GiB SLC-mode buffer (TurboWrite).
            slc_buffer: 4 * GIB,
            // cal: seq write 255 MB/s, measured inside the SLC buffer (SimpleSSD SLC: 800 us).
            slc_program_time: 984 * US,
            // asm: 8 MiB cache.
            write_cache: 8 * MIB,
            // UFS 2.1 (JESD220C, 2016) added Command Priority.
            cmd_priority: true,
            published: Published {
                source: Some(
                    "Samsung lineup table, UFS 2.1 512 GB (2017), docs/references.md".into(),
                ),
                ..samsung(860.0, 255.0, 42000.0, 40000.0)
            },
            ..base("ufs-2.1", Interface::Ufs)
        },
        DeviceProfile {
            description: "UFS 3.1, HS-G4 x2, 32 slots, TLC with WriteBooster (2020 flagships)"
                .into(),
            full_duplex: true,
            // HS-G4 2 lanes: 2 x 11.6 Gbit/s x 8b/10b = 2320 MB/s.
            bus_bandwidth: 2320 * MB,
            // 8 dies of 512 Gb (docs/references.md: 512 GB = 8 dies), each with independent
            // multi-plane reads on 2 plane groups; the model's unit of parallelism is the die, so
            // each plane group is a die here: 16 single-plane "dies".
            channels: 2,
            dies_per_channel: 8,
            planes: 1,
            // SimpleSSD TLC read time.
            read_time: TLC_READ,
            // cal: native (one-shot 3D TLC) program = WriteBooster program x 1568/556, the ratio
            // of 1 MiB QD32 writes with and without WriteBooster on UFS 4.0 (docs/references.md);
            // SimpleSSD's planar-TLC mean (2926 us) would make the post-buffer rate 4x too slow.
            program_time: 612 * US,
            pages_per_block: 192,
            // cal: seq read 2,100 MB/s.
            channel_bandwidth: 1050 * MB,
            // cal: rand read 100,000 IOPS at QD32.
            read_overhead: 10 * US,
            // cal: rand write 70,000 IOPS at QD32.
            write_overhead: 14 * US,
            // asm: 8 GiB WriteBooster buffer.
            slc_buffer: 8 * GIB,
            // cal: seq write 1,200 MB/s, inside the WriteBooster buffer.
            slc_program_time: 217 * US,
            // asm: 16 MiB cache.
            write_cache: 16 * MIB,
            // Command Priority since UFS 2.1 (JESD220C).
            cmd_priority: true,
            published: Published {
                source: Some(
                    "Samsung lineup table, UFS 3.1 512 GB (2020), docs/references.md".into(),
                ),
                ..samsung(2100.0, 1200.0, 100000.0, 70000.0)
            },
            ..base("ufs-3.1", Interface::Ufs)
        },
        DeviceProfile {
            description: "SATA SSD, 8 GB, SATA II, MLC, NCQ 32 (the context-aware thesis's disk)"
                .into(),
            // Thesis §6: an 8 GB SATA SSD on a Freescale i.MX6 SABRE board.
            capacity: 8 * GIB,
            // SATA II: 3 Gbit/s with 8b/10b = 300 MB/s; NCQ 32 (base); full duplex link.
            full_duplex: true,
            bus_bandwidth: 300 * MB,
            // asm (no published figure for the disk): 4 channels of one 16 Gb MLC die,
            // 8 KiB pages, ONFI 1.x 100 MB/s channels, SimpleSSD MLC timings.
            channels: 4,
            dies_per_channel: 1,
            page_size: 8 * 1024,
            channel_bandwidth: 100 * MB,
            read_overhead: 40 * US,
            write_overhead: 40 * US,
            published: Published {
                source: Some(
                    "no published figure for the thesis's disk; parameters assumed".into(),
                ),
                ..Published::default()
            },
            ..base("sata-ssd", Interface::Sata)
        },
        DeviceProfile {
            description: "microSD card, UHS-I SDR50, MLC, one command at a time (MobiFS's medium)"
                .into(),
            // asm: 16 GB card (MobiFS §5 used two Kingston microSD cards).
            capacity: 16 * GIB,
            // SD has no command queue in UHS-I.
            queue_depth: 1,
            controller_slots: 1,
            // SDR50: 50 MB/s bus (SD Physical Layer spec), half duplex.
            bus_bandwidth: 50 * MB,
            // asm: one die behind a slow controller.
            channels: 1,
            dies_per_channel: 1,
            channel_bandwidth: 40 * MB,
            read_overhead: 500 * US,
            // cal: random write ~100 IOPS at QD1 (cards remap small writes through a
            // block-level FTL; modelled as firmware time per write command), with each write
            // programmed before it completes (write-through, below): `device bench microsd`
            // gives 100 IOPS (9.92 ms when a volatile cache hid the program time).
            write_overhead: 7520 * US,
            // Write-through: an SD card before the SD 6.0 cache function holds DAT0 busy while
            // it programs a write (SD Physical Layer Simplified Specification, "busy" after a
            // write block command), and has no flush command for the host to send; the mmc
            // driver declares no flush for it (`FlashDevice::flush_declared`). A write is
            // durable when it completes. (Until 2026-11-29 the profile had a 512 KiB volatile
            // cache, an assumption, which the model flushed with flushes the kernel never sends.)
            write_cache: 0,
            published: Published {
                rand_write_iops: Some(100.0),
                source: Some(
                    "Samsung microSD random write ~100 IOPS (cdrinfo.com), docs/references.md"
                        .into(),
                ),
                ..Published::default()
            },
            ..base("microsd", Interface::Sd)
        },
    ]
}

/// Names of the built-in profiles.
pub fn profile_names() -> Vec<&'static str> {
    vec![
        "emmc-4.5", "emmc-5.0", "emmc-5.1", "ufs-2.0", "ufs-2.1", "ufs-3.1", "sata-ssd", "microsd",
    ]
}

/// A built-in profile by name.
pub fn builtin_profile(name: &str) -> Result<DeviceProfile, String> {
    builtin_profiles()
        .into_iter()
        .find(|p| p.name == name)
        .ok_or_else(|| {
            format!(
                "unknown device profile `{name}`; known: {}",
                profile_names().join(", ")
            )
        })
}

/// The scenario file's `[device]` table.
///
/// ```toml
/// [device]
/// profile = "ufs-2.0"
/// scheduler = "fg-aware"      # optional: internal scheduling policy override
/// capacity = "8GiB"           # optional override
/// fill = 0.5                  # fraction of the logical space already written
/// suspend = "foreground"      # optional: reads that may suspend a NAND program/erase
/// ```
/// A profile printed by `mobistack device fit` goes under `[device.custom]` and replaces `profile`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DeviceConfig {
    pub profile: String,
    pub scheduler: Option<String>,
    #[serde(with = "opt_size", skip_serializing_if = "Option::is_none")]
    pub capacity: Option<u64>,
    pub queue_depth: Option<usize>,
    pub controller_slots: Option<usize>,
    /// Packed write commands: writes per command (overrides the profile's 0).
    pub packed_write_max: Option<u32>,
    #[serde(with = "opt_size", skip_serializing_if = "Option::is_none")]
    pub write_cache: Option<u64>,
    /// Whether the device honours FUA writes (overrides the profile's `fua`).
    pub fua: Option<bool>,
    /// Program/erase suspend policy (overrides the profile's `suspend`).
    pub suspend: Option<SuspendPolicy>,
    /// Fraction of the logical space mapped at start (written once, sequentially).
    pub fill: f64,
    pub custom: Option<DeviceProfile>,
    /// How the host learns that a command completed: `"interrupt"` (default, as the profiles
    /// were measured) or `"poll"` (seed 002's fix iii: the waiting task polls the controller,
    /// so the interrupt handler and the context switch to the woken task,
    /// [`IRQ_COMPLETION_COST`], leave each command's time).
    pub completion: Completion,
}

/// How command completions reach the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Completion {
    #[default]
    Interrupt,
    Poll,
}

/// The interrupt-driven completion path's cost per command, which polling removes: the
/// interrupt handler, the softirq that completes the request and the context switch to the
/// woken task. Yang, Minturn and Hady, "When Poll Is Better than Interrupt" (FAST'12): about
/// 5 us on their x86 host (interrupt-driven 9.0 us against 4.4 us polled for a 512-byte read);
/// asm: three times that on a 2013 phone core, as `[stack.cpu]` scales its calibration
/// (docs/cpu.md). The profiles' per-command overheads were fitted to latencies measured from
/// user space with interrupts, so they include it; `completion = "poll"` subtracts it.
pub const IRQ_COMPLETION_COST: Nanos = 15 * US;

impl Default for DeviceConfig {
    fn default() -> Self {
        DeviceConfig {
            profile: "emmc-5.1".to_string(),
            scheduler: None,
            capacity: None,
            queue_depth: None,
            controller_slots: None,
            packed_write_max: None,
            write_cache: None,
            fua: None,
            suspend: None,
            // Assumption: a phone half full.
            fill: 0.5,
            custom: None,
            completion: Completion::Interrupt,
        }
    }
}

impl DeviceConfig {
    /// The profile with this configuration's overrides applied.
    pub fn resolve(&self) -> Result<DeviceProfile, String> {
        let mut profile = match &self.custom {
            Some(custom) => custom.clone(),
            None => builtin_profile(&self.profile)?,
        };
        if let Some(capacity) = self.capacity {
            profile.capacity = capacity;
        }
        if let Some(depth) = self.queue_depth {
            profile.queue_depth = depth;
            profile.controller_slots = profile.controller_slots.min(depth);
        }
        if let Some(slots) = self.controller_slots {
            profile.controller_slots = slots;
        }
        if let Some(packed) = self.packed_write_max {
            profile.packed_write_max = packed;
        }
        if let Some(cache) = self.write_cache {
            profile.write_cache = cache;
        }
        if let Some(fua) = self.fua {
            profile.fua = fua;
        }
        if let Some(suspend) = self.suspend {
            profile.suspend = suspend;
        }
        if let Some(scheduler) = &self.scheduler {
            profile.scheduler = scheduler.clone();
        }
        if self.completion == Completion::Poll {
            profile.read_overhead = profile.read_overhead.saturating_sub(IRQ_COMPLETION_COST);
            profile.write_overhead = profile.write_overhead.saturating_sub(IRQ_COMPLETION_COST);
        }
        profile.validate()?;
        Ok(profile)
    }

    pub fn build_flash(&self) -> Result<FlashDevice, String> {
        let profile = self.resolve()?;
        let mut device = FlashDevice::new(profile, None)?;
        device.precondition(self.fill)?;
        Ok(device)
    }
}

/// Builds the device a scenario asks for. `seed` is accepted for interface stability: the model
/// is deterministic and currently draws no random numbers.
pub fn build_device(config: &DeviceConfig, seed: u64) -> Result<Box<dyn BlockDevice>, String> {
    let _ = seed;
    Ok(Box::new(config.build_flash()?))
}

/// Parses the four numbers of `device fit` (e.g. "250MB/s", "11000").
pub fn parse_fit_targets(
    seq_read: &str,
    seq_write: &str,
    rand_read: &str,
    rand_write: &str,
) -> Result<Published, String> {
    let bandwidth = |text: &str| -> Result<f64, String> {
        parse_bandwidth(text)
            .map(|b| b as f64 / MB as f64)
            .map_err(|e| e.to_string())
    };
    let iops = |text: &str| -> Result<f64, String> {
        let value: f64 = text
            .trim()
            .trim_end_matches("IOPS")
            .trim()
            .parse()
            .map_err(|_| format!("invalid IOPS `{text}`: expected a number such as 11000"))?;
        if value <= 0.0 || !value.is_finite() {
            return Err(format!("IOPS `{text}` must be positive"));
        }
        Ok(value)
    };
    Ok(Published {
        seq_read_mbps: Some(bandwidth(seq_read)?),
        seq_write_mbps: Some(bandwidth(seq_write)?),
        rand_read_iops: Some(iops(rand_read)?),
        rand_write_iops: Some(iops(rand_write)?),
        source: Some("fitted to user measurements".into()),
    })
}

/// `Option<u64>` sizes in human units.
mod opt_size {
    use super::*;
    use serde::{Deserializer, Serializer};

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        #[derive(Deserialize)]
        struct Wrap(#[serde(with = "size")] u64);
        Ok(Option::<Wrap>::deserialize(d)?.map(|Wrap(v)| v))
    }

    pub fn serialize<S: Serializer>(value: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(v) => s.serialize_u64(*v),
            None => s.serialize_none(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_profile_is_valid_and_named() {
        let profiles = builtin_profiles();
        let names: Vec<&str> = profiles.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, profile_names());
        for profile in &profiles {
            profile.validate().unwrap();
        }
    }

    #[test]
    fn unknown_profile_and_bad_numbers_are_errors() {
        let error = builtin_profile("emmc-9").unwrap_err();
        assert!(error.contains("emmc-5.1"), "{error}");
        let config = DeviceConfig {
            queue_depth: Some(0),
            ..DeviceConfig::default()
        };
        assert!(config.resolve().unwrap_err().contains("queue_depth"));
        let config = DeviceConfig {
            scheduler: Some("cfq".into()),
            ..DeviceConfig::default()
        };
        assert!(config.resolve().unwrap_err().contains("fg-aware"));
    }

    #[test]
    fn config_parses_from_toml_in_human_units() {
        let config: DeviceConfig = toml::from_str(
            "profile = \"ufs-2.0\"\nscheduler = \"fg-aware\"\ncapacity = \"1GiB\"\nfill = 0.25\n",
        )
        .unwrap();
        assert_eq!(config.capacity, Some(GIB));
        let profile = config.resolve().unwrap();
        assert_eq!(profile.scheduler, "fg-aware");
        assert!(toml::from_str::<DeviceConfig>("profil = \"x\"").is_err());
    }

    #[test]
    fn a_profile_round_trips_through_toml() {
        let profile = builtin_profile("ufs-3.1").unwrap();
        let text = toml::to_string(&profile).unwrap();
        let back: DeviceProfile = toml::from_str(&text).unwrap();
        assert_eq!(back, profile);
    }

    #[test]
    fn polling_removes_the_interrupt_path_from_each_command() {
        let interrupt = DeviceConfig {
            profile: "emmc-4.5".into(),
            ..DeviceConfig::default()
        };
        let poll = DeviceConfig {
            completion: Completion::Poll,
            ..interrupt.clone()
        };
        let (a, b) = (interrupt.resolve().unwrap(), poll.resolve().unwrap());
        assert_eq!(a.read_overhead - b.read_overhead, IRQ_COMPLETION_COST);
        assert_eq!(a.write_overhead - b.write_overhead, IRQ_COMPLETION_COST);
        let parsed: DeviceConfig = toml::from_str("completion = \"poll\"").unwrap();
        assert_eq!(parsed.completion, Completion::Poll);
        assert!(toml::from_str::<DeviceConfig>("completion = \"spin\"").is_err());
    }
}
