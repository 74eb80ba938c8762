//! The block layer: bios and requests, the request queue (plugging, merging, request allocation
//! limits, dispatch to the device, completion), the elevators, and blktrace output.
//!
//! It sits between the file system (which submits [`request::Bio`]s) and a
//! [`crate::dev::BlockDevice`]. See each submodule's documentation for what it models of Linux and
//! what it simplifies.

pub mod blktrace;
pub mod elevator;
pub mod layer;
pub mod qasio;
pub mod queue;
pub mod request;
pub mod tags;
pub mod wbt;

use crate::kernel::{Hz, KernelConfig, KernelVersion};
use serde::{Deserialize, Serialize};

/// The scenario's `[stack.block]` table: the elevator, `nr_requests` and the elevators'
/// tunables as a vendor's init script writes them to `/sys/block/<dev>/queue/` (sysfs units:
/// times in milliseconds, converted to jiffies with `msecs_to_jiffies` as the kernel's store
/// functions do; counts as plain numbers; switches as booleans for sysfs's 0 / 1). A tunable left
/// out keeps the kernel default for the run's `[stack.kernel] hz`.
///
/// ```toml
/// [stack.block]
/// elevator = "cfq"
/// nr_requests = 128
/// [stack.block.cfq]
/// slice_idle = 0          # ms: echo 0 > /sys/block/mmcblk0/queue/iosched/slice_idle
/// quantum = 16
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BlockConfig {
    /// I/O scheduler: `noop`, `deadline`, `cfq` (Linux up to 4.19), `mq-deadline`, `none`,
    /// `bfq`, `kyber` (4.11 / 4.12 and later), or seed 003's `subregion`. A scenario that names
    /// none gets its block layer's era's default ([`BlockConfig::default_elevator`]: `cfq`
    /// up to 4.19, the scheduler of the Android kernels the papers measured, 3.4-3.10; QASIO
    /// §2, FastTrack §2; `mq-deadline` from 5.0). Built in code, the default is `cfq`.
    #[serde(default = "default_elevator")]
    pub elevator: String,
    /// The Linux version whose block layer runs, when it is not `[stack.kernel] version`'s:
    /// a stack of mixed eras (e.g. today's blk-mq elevators over the papers' 3.10 page cache
    /// and ext4), which the results say. Default: the kernel's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<KernelVersion>,
    /// Record a blktrace of the queue (`mobistack run --blktrace FILE` sets it). Default false.
    #[serde(default)]
    pub blktrace: bool,
    /// `queue/nr_requests`: requests per direction (legacy elevators) or scheduler tags (blk-mq).
    /// Default: `BLKDEV_MAX_RQ` = 128 per direction for the legacy elevators, twice the tag-set
    /// depth (at most 256) for mq-deadline (`blk_mq_init_sched`). At least `BLKDEV_MIN_RQ` = 4
    /// (block/blk-sysfs.c `queue_requests_store`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nr_requests: Option<u32>,
    /// Whether a legacy request list can fill (`"linux"`, the default) or never does
    /// (`"unbounded"`, QASIO §4's description of the kernel). See [`RequestList`].
    #[serde(default, skip_serializing_if = "RequestList::is_linux")]
    pub request_list: RequestList,
    /// CFQ's tunables (`queue/iosched/` under cfq).
    #[serde(default)]
    pub cfq: CfqConfig,
    /// deadline's tunables.
    #[serde(default)]
    pub deadline: DeadlineConfig,
    /// mq-deadline's tunables.
    #[serde(default, rename = "mq-deadline")]
    pub mq_deadline: MqDeadlineConfig,
    /// kyber's tunables.
    #[serde(default)]
    pub kyber: KyberConfig,
    /// BFQ's tunables.
    #[serde(default)]
    pub bfq: BfqConfig,
    /// The subregion scheduler's tunables (seed 003 §5.1).
    #[serde(default)]
    pub subregion: SubregionConfig,
    /// Writeback throttling (block/blk-wbt.c) in front of the elevator: an override of the
    /// era's default ([`BlockConfig::wbt_default`]): on for blk-mq queues (`mq-deadline`,
    /// `kyber`, `none`) of a version that has wbt (4.10) built with `CONFIG_BLK_WBT_MQ` (a
    /// desktop distribution's config, not Android's: `[stack.kernel] config`); off under `bfq`
    /// (`bfq_init_queue` disables it) and for the legacy elevators.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wbt: Option<bool>,
    /// `queue/wbt_lat_usec`: wbt's read latency target in microseconds; default 2000
    /// (`wbt_default_latency_nsec`, non-rotational); 0 turns wbt off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wbt_lat_usec: Option<u64>,
}

/// How a legacy (3.10) request list limits allocation (`[stack.block] request_list`).
///
/// QASIO §4 describes the kernel as having "room for additional I/Os in memory and request
/// queues" while a foreground task waits on queued asynchronous I/O. 3.10's `__get_request`
/// (block/blk-core.c) does not: once `nr_requests` of a direction are allocated, a submitter that
/// is not a batcher sleeps in `get_request` until one is freed, and a flusher writing an 8 GB
/// file keeps the asynchronous list full. The kernel's behaviour is the default; the paper's
/// description is this labelled option, so both can be reported (`mobistack reproduce qasio`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RequestList {
    /// Linux 3.10: `nr_requests` per direction, batchers, sleepers in `get_request`, the
    /// congestion thresholds (block/blk-core.c `__get_request`, `__freed_request`).
    #[default]
    Linux,
    /// QASIO §4's description: the list never fills, so `get_request` never sleeps and the
    /// queue is never congested. Legacy elevators only (blk-mq's scheduler tags are another
    /// mechanism, which the paper does not describe).
    Unbounded,
}

impl RequestList {
    pub fn is_linux(&self) -> bool {
        *self == RequestList::Linux
    }
}

/// `queue/iosched/` of CFQ (block/cfq-iosched.c `cfq_attrs`). Times in ms.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CfqConfig {
    pub quantum: Option<u32>,
    pub fifo_expire_sync: Option<u32>,
    pub fifo_expire_async: Option<u32>,
    /// KiB.
    pub back_seek_max: Option<u32>,
    pub back_seek_penalty: Option<u32>,
    pub slice_sync: Option<u32>,
    pub slice_async: Option<u32>,
    pub slice_async_rq: Option<u32>,
    pub slice_idle: Option<u32>,
    pub group_idle: Option<u32>,
    pub low_latency: Option<bool>,
    pub target_latency: Option<u32>,
}

/// `queue/iosched/` of deadline (block/deadline-iosched.c `deadline_attrs`). Times in ms.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct DeadlineConfig {
    pub read_expire: Option<u32>,
    pub write_expire: Option<u32>,
    pub writes_starved: Option<u32>,
    pub front_merges: Option<bool>,
    pub fifo_batch: Option<u32>,
}

/// `queue/iosched/` of mq-deadline (block/mq-deadline.c `deadline_attrs`). Times in ms.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct MqDeadlineConfig {
    pub read_expire: Option<u32>,
    pub write_expire: Option<u32>,
    pub writes_starved: Option<u32>,
    pub front_merges: Option<bool>,
    pub fifo_batch: Option<u32>,
    pub prio_aging_expire: Option<u32>,
    /// Scheduler tags writes and async reads may hold; at most `nr_requests`.
    pub async_depth: Option<u32>,
}

/// `[stack.block.subregion]`: seed 003's subregion deadline scheduler
/// ([`elevator::subregion`]). Times in ms.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SubregionConfig {
    /// Subregion size (e.g. "2GiB", the default: seed 003 §6.1).
    #[serde(
        with = "crate::units::serde_units::option_size",
        skip_serializing_if = "Option::is_none"
    )]
    pub size: Option<u64>,
    /// Requests per subregion turn (default 16).
    pub batch: Option<u32>,
    pub read_expire: Option<u32>,
    pub write_expire: Option<u32>,
    /// TBA of the bandwidth reservation (§5.2, §6.2: the device's sequential read figure), e.g.
    /// "250MB/s"; without it bursty apps are not held.
    #[serde(
        with = "crate::units::serde_units::option_bandwidth",
        skip_serializing_if = "Option::is_none"
    )]
    pub total_bandwidth: Option<u64>,
}

impl SubregionConfig {
    pub fn validate(&self) -> Result<(), String> {
        if let Some(size) = self.size {
            if size < 4096 || size % crate::units::SECTOR_SIZE != 0 {
                return Err(format!(
                    "[stack.block.subregion] `size` = {size} bytes is invalid: it must be a whole number of sectors, at least 4 KiB"
                ));
            }
        }
        if self.batch == Some(0) {
            return Err("[stack.block.subregion] `batch` = 0 is invalid: at least 1".into());
        }
        if self.total_bandwidth == Some(0) {
            return Err("[stack.block.subregion] `total_bandwidth` = 0 is invalid: give the device's sequential read rate, e.g. \"250MB/s\"".into());
        }
        Ok(())
    }

    pub fn tunables(&self) -> elevator::subregion::SubregionTunables {
        let defaults = elevator::subregion::SubregionTunables::default();
        let ms = |value: Option<u32>, default: u64| {
            value.map_or(default, |ms| u64::from(ms) * crate::units::NS_PER_MS)
        };
        elevator::subregion::SubregionTunables {
            size_sectors: self.size.map_or(defaults.size_sectors, |bytes| {
                bytes / crate::units::SECTOR_SIZE
            }),
            batch: self.batch.unwrap_or(defaults.batch),
            expire: [
                ms(self.read_expire, defaults.expire[0]),
                ms(self.write_expire, defaults.expire[1]),
            ],
            total_bandwidth: self.total_bandwidth,
        }
    }
}

/// `queue/iosched/` of kyber (block/kyber-iosched.c `kyber_sched_attrs`): targets in ns.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct KyberConfig {
    pub read_lat_nsec: Option<u64>,
    pub write_lat_nsec: Option<u64>,
}

impl KyberConfig {
    pub fn validate(&self) -> Result<(), String> {
        for (field, value) in [
            ("read_lat_nsec", self.read_lat_nsec),
            ("write_lat_nsec", self.write_lat_nsec),
        ] {
            if value == Some(0) {
                return Err(format!(
                    "[stack.block.kyber] {field} = 0 is invalid: a latency target must be positive"
                ));
            }
        }
        Ok(())
    }

    /// The kernel defaults (2 ms reads, 10 ms writes) overridden by the values given.
    pub fn tunables(&self) -> elevator::kyber::KyberTunables {
        let defaults = elevator::kyber::KyberTunables::default();
        elevator::kyber::KyberTunables {
            read_lat_nsec: self.read_lat_nsec.unwrap_or(defaults.read_lat_nsec),
            write_lat_nsec: self.write_lat_nsec.unwrap_or(defaults.write_lat_nsec),
        }
    }
}

/// `queue/iosched/` of BFQ (block/bfq-iosched.c `bfq_attrs`), in sysfs units: times in ms
/// (`slice_idle_us` in us), `max_budget` in sectors (0: automatic), switches as booleans.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct BfqConfig {
    pub fifo_expire_sync: Option<u32>,
    pub fifo_expire_async: Option<u32>,
    /// KiB.
    pub back_seek_max: Option<u32>,
    pub back_seek_penalty: Option<u32>,
    pub slice_idle: Option<u32>,
    pub slice_idle_us: Option<u32>,
    pub max_budget: Option<u64>,
    pub timeout_sync: Option<u32>,
    pub strict_guarantees: Option<bool>,
    pub low_latency: Option<bool>,
}

impl BfqConfig {
    /// The kernel's store functions clamp below their minimum; a scenario value below it is
    /// rejected instead, naming the field.
    pub fn validate(&self) -> Result<(), String> {
        for (field, value) in [
            ("fifo_expire_sync", self.fifo_expire_sync),
            ("fifo_expire_async", self.fifo_expire_async),
            ("back_seek_penalty", self.back_seek_penalty),
            ("timeout_sync", self.timeout_sync),
        ] {
            at_least("bfq", field, value, 1)?;
        }
        if self.slice_idle.is_some() && self.slice_idle_us.is_some() {
            return Err(
                "[stack.block.bfq] slice_idle and slice_idle_us both set: give one".to_string(),
            );
        }
        Ok(())
    }

    /// `bfq_init_queue` defaults at `hz`, overridden by the values given (`bfq_*_store`).
    pub fn tunables(&self, hz: Hz) -> elevator::bfq::BfqTunables {
        use crate::units::{NS_PER_MS, NS_PER_US};
        let mut t = elevator::bfq::BfqTunables::defaults(hz);
        let ms =
            |value: Option<u32>, default: u64| value.map_or(default, |v| u64::from(v) * NS_PER_MS);
        t.fifo_expire = [
            ms(self.fifo_expire_async, t.fifo_expire[0]),
            ms(self.fifo_expire_sync, t.fifo_expire[1]),
        ];
        t.back_seek_max_kib = self.back_seek_max.map_or(t.back_seek_max_kib, u64::from);
        t.back_seek_penalty = self
            .back_seek_penalty
            .map_or(t.back_seek_penalty, u64::from);
        t.slice_idle = ms(self.slice_idle, t.slice_idle);
        if let Some(us) = self.slice_idle_us {
            t.slice_idle = u64::from(us) * NS_PER_US;
        }
        t.max_budget = self.max_budget.unwrap_or(t.max_budget);
        if let Some(timeout) = self.timeout_sync {
            t.timeout = hz.msecs_to_jiffies(u64::from(timeout)) as i64;
        }
        t.low_latency = self.low_latency.unwrap_or(t.low_latency);
        if let Some(strict) = self.strict_guarantees {
            // bfq_strict_guarantees_store raises slice_idle to 8 ms.
            if strict && t.slice_idle < 8 * NS_PER_MS {
                t.slice_idle = 8 * NS_PER_MS;
            }
            t.strict_guarantees = strict;
        }
        t
    }
}

/// `BLKDEV_MIN_RQ = 4` (include/linux/blkdev.h): the smallest `nr_requests` sysfs accepts.
pub const BLKDEV_MIN_RQ: u32 = 4;

/// Fails with a message naming the field when `value` is below `min`.
fn at_least(table: &str, field: &str, value: Option<u32>, min: u32) -> Result<(), String> {
    match value {
        Some(v) if v < min => Err(format!(
            "[stack.block.{table}] {field} = {v} is invalid: it must be at least {min}"
        )),
        _ => Ok(()),
    }
}

impl CfqConfig {
    /// The kernel's store functions clamp below their minimum (`STORE_FUNCTION(..., MIN, ...)`);
    /// a scenario value below it is rejected instead, naming the field.
    pub fn validate(&self) -> Result<(), String> {
        for (field, value, min) in [
            ("quantum", self.quantum, 1),
            ("fifo_expire_sync", self.fifo_expire_sync, 1),
            ("fifo_expire_async", self.fifo_expire_async, 1),
            ("back_seek_penalty", self.back_seek_penalty, 1),
            ("slice_sync", self.slice_sync, 1),
            ("slice_async", self.slice_async, 1),
            ("slice_async_rq", self.slice_async_rq, 1),
            ("target_latency", self.target_latency, 1),
        ] {
            at_least("cfq", field, value, min)?;
        }
        Ok(())
    }

    /// The tunables in jiffies at tick rate `hz`: the 3.10 defaults overridden by the values
    /// given (ms through `msecs_to_jiffies`, as `cfq_*_store` converts them).
    pub fn tunables(&self, hz: Hz) -> elevator::cfq::CfqTunables {
        let mut t = elevator::cfq::CfqTunables::defaults(hz);
        let ms = |value: Option<u32>, default: u64| {
            value.map_or(default, |v| hz.msecs_to_jiffies(u64::from(v)))
        };
        t.quantum = self.quantum.unwrap_or(t.quantum);
        t.fifo_expire = [
            ms(self.fifo_expire_async, t.fifo_expire[0]),
            ms(self.fifo_expire_sync, t.fifo_expire[1]),
        ];
        t.back_seek_max_kib = self.back_seek_max.map_or(t.back_seek_max_kib, u64::from);
        t.back_seek_penalty = self
            .back_seek_penalty
            .map_or(t.back_seek_penalty, u64::from);
        t.slice = [
            ms(self.slice_async, t.slice[0]),
            ms(self.slice_sync, t.slice[1]),
        ];
        t.slice_async_rq = self.slice_async_rq.unwrap_or(t.slice_async_rq);
        t.slice_idle = ms(self.slice_idle, t.slice_idle);
        t.group_idle = ms(self.group_idle, t.group_idle);
        t.low_latency = self.low_latency.unwrap_or(t.low_latency);
        t.target_latency = ms(self.target_latency, t.target_latency);
        t
    }
}

impl DeadlineConfig {
    pub fn validate(&self) -> Result<(), String> {
        at_least("deadline", "fifo_batch", self.fifo_batch, 1)
    }

    /// `deadline_init_queue` defaults at `hz`, overridden by the values given.
    pub fn tunables(&self, hz: Hz) -> elevator::deadline::DeadlineTunables {
        let mut t = elevator::deadline::DeadlineTunables::defaults(hz);
        let ms = |value: Option<u32>, default: u64| {
            value.map_or(default, |v| hz.msecs_to_jiffies(u64::from(v)))
        };
        t.fifo_expire = [
            ms(self.read_expire, t.fifo_expire[0]),
            ms(self.write_expire, t.fifo_expire[1]),
        ];
        t.writes_starved = self.writes_starved.unwrap_or(t.writes_starved);
        t.front_merges = self.front_merges.unwrap_or(t.front_merges);
        t.fifo_batch = self.fifo_batch.unwrap_or(t.fifo_batch);
        t
    }
}

impl MqDeadlineConfig {
    pub fn validate(&self) -> Result<(), String> {
        at_least("mq-deadline", "fifo_batch", self.fifo_batch, 1)?;
        at_least("mq-deadline", "async_depth", self.async_depth, 1)
    }

    /// `dd_init_sched` defaults at `hz`, overridden by the values given.
    pub fn tunables(&self, hz: Hz) -> elevator::mq_deadline::MqDeadlineTunables {
        let mut t = elevator::mq_deadline::MqDeadlineTunables::defaults(hz);
        let ms = |value: Option<u32>, default: u64| {
            value.map_or(default, |v| hz.msecs_to_jiffies(u64::from(v)))
        };
        t.fifo_expire = [
            ms(self.read_expire, t.fifo_expire[0]),
            ms(self.write_expire, t.fifo_expire[1]),
        ];
        t.writes_starved = self.writes_starved.unwrap_or(t.writes_starved);
        t.front_merges = self.front_merges.unwrap_or(t.front_merges);
        t.fifo_batch = self.fifo_batch.unwrap_or(t.fifo_batch);
        t.prio_aging_expire = ms(self.prio_aging_expire, t.prio_aging_expire);
        t.async_depth = self.async_depth.map(|d| d as usize);
        t
    }
}

fn default_elevator() -> String {
    "cfq".to_string()
}

impl Default for BlockConfig {
    fn default() -> Self {
        BlockConfig {
            elevator: default_elevator(),
            blktrace: false,
            nr_requests: None,
            request_list: RequestList::Linux,
            cfq: CfqConfig::default(),
            deadline: DeadlineConfig::default(),
            mq_deadline: MqDeadlineConfig::default(),
            kyber: KyberConfig::default(),
            bfq: BfqConfig::default(),
            subregion: SubregionConfig::default(),
            wbt: None,
            wbt_lat_usec: None,
            version: None,
        }
    }
}

/// Which Linux version's block layer a stack runs ([`BlockConfig::era`]) and what chose it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockEra {
    pub version: KernelVersion,
    pub source: BlockEraSource,
}

/// What chose a stack's block-layer version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockEraSource {
    /// `[stack.kernel] version`: the block layer of the kernel's own era.
    Kernel,
    /// `[stack.block] version`.
    Scenario,
    /// A stack built in code (not parsed from a scenario, which would be refused) names an
    /// elevator its kernel version does not have: the block layer is `mainline`'s, the code the
    /// blk-mq elevators model.
    Elevator,
}

/// Why wbt is on or off by default ([`BlockConfig::wbt_default`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WbtDefault {
    /// On: a blk-mq queue of a version with wbt, built with `CONFIG_BLK_WBT_MQ`
    /// (`wbt_enable_default`).
    On,
    /// Off: a legacy request queue (the model's wbt throttles blk-mq queues; the legacy
    /// queue's `CONFIG_BLK_WBT_SQ` defaulted to n).
    LegacyQueue,
    /// Off: the block layer's version predates wbt (4.10).
    NotInVersion,
    /// Off: `bfq_init_queue` disables it (`wbt_disable_default`).
    Bfq,
    /// Off: the kernel's config does not set `CONFIG_BLK_WBT_MQ` (Android's).
    Config,
}

impl WbtDefault {
    /// In words, for `mobistack validate`.
    pub fn explain(self) -> &'static str {
        match self {
            WbtDefault::On => "CONFIG_BLK_WBT_MQ=y: wbt_enable_default",
            WbtDefault::LegacyQueue => "legacy request queue",
            WbtDefault::NotInVersion => "the block layer's version predates wbt (4.10)",
            WbtDefault::Bfq => "bfq_init_queue disables it",
            WbtDefault::Config => "the kernel config does not set CONFIG_BLK_WBT_MQ",
        }
    }
}

/// The blk-mq elevators (5.0+; `none` is blk-mq without a scheduler).
pub const BLK_MQ_ELEVATORS: [&str; 4] = ["mq-deadline", "bfq", "kyber", "none"];

impl BlockConfig {
    /// The elevator Linux `version` gives a queue when nobody writes `queue/scheduler`: CFQ
    /// while the legacy request queue exists (`CONFIG_DEFAULT_IOSCHED` defaults to cfq,
    /// block/Kconfig.iosched), then mq-deadline (`elevator_get_default` for a single hardware
    /// queue, block/elevator.c). Phones' init scripts may choose another (the phone presets:
    /// e.g. the Pixels' BFQ, device/google/zuma conf/init.zuma.rc).
    pub fn default_elevator(version: KernelVersion) -> &'static str {
        if version.has_legacy_request_queue() {
            "cfq"
        } else {
            "mq-deadline"
        }
    }

    /// The Linux version whose block layer runs under `kernel` ([`BlockEra`]).
    pub fn era(&self, kernel: &KernelConfig) -> BlockEra {
        if let Some(version) = self.version {
            return BlockEra {
                version,
                source: BlockEraSource::Scenario,
            };
        }
        if elevator::version_has(kernel.version, &self.elevator) {
            BlockEra {
                version: kernel.version,
                source: BlockEraSource::Kernel,
            }
        } else {
            BlockEra {
                version: KernelVersion::Mainline,
                source: BlockEraSource::Elevator,
            }
        }
    }

    /// Whether wbt is on when `[stack.block] wbt` does not say, and why.
    pub fn wbt_default(&self, kernel: &KernelConfig) -> WbtDefault {
        let era = self.era(kernel).version;
        if !BLK_MQ_ELEVATORS.contains(&self.elevator.as_str()) {
            WbtDefault::LegacyQueue
        } else if !era.has_wbt() {
            WbtDefault::NotInVersion
        } else if self.elevator == "bfq" {
            WbtDefault::Bfq
        } else if !kernel.build_config_for(era).enables_wbt_by_default() {
            WbtDefault::Config
        } else {
            WbtDefault::On
        }
    }

    /// Whether the block layer of this stack is of another era than its kernel, in words
    /// ("the block layer of Linux mainline (`[stack.block] version`) over Linux 3.10").
    pub fn mixed_era(&self, kernel: &KernelConfig) -> Option<String> {
        let era = self.era(kernel);
        if era.version == kernel.version {
            return None;
        }
        let why = match era.source {
            BlockEraSource::Scenario => "`[stack.block] version`".to_string(),
            _ => format!(
                "elevator `{}`, which Linux {} does not have",
                self.elevator, kernel.version
            ),
        };
        Some(format!(
            "the block layer of Linux {} ({why}) over Linux {}",
            era.version, kernel.version
        ))
    }

    /// What a scenario file may not ask of its kernel's era: an elevator or wbt its block
    /// layer's version does not have. (Stacks built in code are not refused: they run the
    /// blk-mq elevators' mainline block layer, [`BlockEraSource::Elevator`].)
    pub fn check_era(&self, kernel: &KernelConfig) -> Result<(), String> {
        let version = self.version.unwrap_or(kernel.version);
        if !elevator::version_has(version, &self.elevator) {
            let since = elevator::versions_with(&self.elevator).map_or(String::new(), |v| {
                format!(
                    "; `{}` is in Linux {v} of the versions modelled",
                    self.elevator
                )
            });
            return Err(format!(
                "`elevator` `{}` is not in Linux {version} (its elevators: {}){since}: set [stack.kernel] version to one that has it, or [stack.block] version to run that version's block layer over this kernel (a stack of mixed eras, which the results report)",
                self.elevator,
                elevator::elevators_of(version).join(", ")
            ));
        }
        let config = kernel.build_config_for(version);
        if !config.builds_elevator(version, &self.elevator) {
            return Err(format!(
                "`elevator` `{}` is not built in Linux {version} with [stack.kernel] config = \"{}\" (android15-6.6's arch/arm64/configs/gki_defconfig sets no CONFIG_IOSCHED_BFQ, so /sys/block/*/queue/scheduler does not offer it; the kernel keeps its default, mq-deadline): choose mq-deadline, kyber or none, Linux 6.1 or earlier, or config = \"distro\"",
                self.elevator,
                config.name()
            ));
        }
        if self.wbt == Some(true) && !version.has_wbt() {
            return Err(format!(
                "`wbt` = true: Linux {version} has no writeback throttling (4.10, e34cbd307477 \"blk-wbt: add general throttling mechanism\")"
            ));
        }
        Ok(())
    }

    /// wbt's read target in ns if wbt is on for this configuration under `kernel` (`blk_mq`:
    /// whether the queue is a blk-mq one): `[stack.block] wbt`, else
    /// [`BlockConfig::wbt_default`].
    pub fn wbt_min_lat_nsec(&self, kernel: &KernelConfig, blk_mq: bool) -> Option<u64> {
        let on = self
            .wbt
            .unwrap_or(blk_mq && self.wbt_default(kernel) == WbtDefault::On);
        match self.wbt_lat_usec {
            Some(0) => None,
            _ if !on => None,
            Some(usec) => Some(usec * 1000),
            None => Some(wbt::DEFAULT_MIN_LAT_NSEC_NONROT),
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        if !(elevator::ELEVATOR_NAMES.contains(&self.elevator.as_str()) || self.elevator == "none")
        {
            return Err(format!(
                "unknown `elevator` `{}`: expected one of {}",
                self.elevator,
                elevator::ELEVATOR_NAMES.join(", ")
            ));
        }
        at_least("", "nr_requests", self.nr_requests, BLKDEV_MIN_RQ)
            .map_err(|e| e.replace("[stack.block.]", "[stack.block]"))?;
        if self.request_list == RequestList::Unbounded
            && BLK_MQ_ELEVATORS.contains(&self.elevator.as_str())
        {
            return Err(format!(
                "`request_list` = \"unbounded\" applies to the 3.10 legacy request lists; `{}` is a blk-mq elevator, which allocates scheduler tags",
                self.elevator
            ));
        }
        if self.wbt == Some(true) && !BLK_MQ_ELEVATORS.contains(&self.elevator.as_str()) {
            return Err(format!(
                "`wbt` = true needs a blk-mq elevator ({}); `{}` is a 3.10 legacy elevator",
                BLK_MQ_ELEVATORS.join(", "),
                self.elevator
            ));
        }
        self.cfq.validate()?;
        self.deadline.validate()?;
        self.mq_deadline.validate()?;
        self.kyber.validate()?;
        self.bfq.validate()?;
        self.subregion.validate()?;
        if let (Some(depth), Some(nr)) = (self.mq_deadline.async_depth, self.nr_requests) {
            if depth > nr {
                return Err(format!(
                    "[stack.block.mq-deadline] async_depth = {depth} is invalid: it must be at most nr_requests ({nr})"
                ));
            }
        }
        Ok(())
    }
}

/// The request queue of a device under `elevator`, with its allocation model, optionally tracing
/// under the device's numbers (`179,0` mmcblk0 for eMMC and SD, `8,0` sda for UFS and SATA).
/// Shared by `mobistack fio` and the scenario stack.
pub fn build_queue(
    device: Box<dyn crate::dev::BlockDevice>,
    elevator: &str,
    trace: bool,
) -> Result<queue::RequestQueue, String> {
    let config = BlockConfig {
        elevator: elevator.to_string(),
        blktrace: trace,
        ..BlockConfig::default()
    };
    queue::RequestQueue::from_config(device, &config, &crate::kernel::KernelConfig::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<BlockConfig, String> {
        let config: BlockConfig = toml::from_str(text).map_err(|e| e.to_string())?;
        config.validate()?;
        Ok(config)
    }

    #[test]
    fn subregion_tunables_parse_with_units_and_bad_values_are_named() {
        let config = parse(
            "elevator = \"subregion\"\n[subregion]\nsize = \"1GiB\"\nbatch = 8\nread_expire = 50\n",
        )
        .unwrap();
        let tunables = config.subregion.tunables();
        assert_eq!(tunables.size_sectors, (1 << 30) / 512);
        assert_eq!(tunables.batch, 8);
        assert_eq!(
            tunables.expire,
            [
                50 * crate::units::NS_PER_MS,
                5_000 * crate::units::NS_PER_MS
            ]
        );
        let defaults = parse("elevator = \"subregion\"\n")
            .unwrap()
            .subregion
            .tunables();
        assert_eq!(defaults.size_sectors, (2u64 << 30) / 512);
        let error = parse("[subregion]\nbatch = 0\n").unwrap_err();
        assert!(
            error.contains("[stack.block.subregion] `batch` = 0"),
            "{error}"
        );
        let error = parse("[subregion]\nsize = \"100B\"\n").unwrap_err();
        assert!(error.contains("`size` = 100 bytes"), "{error}");
    }

    #[test]
    fn tunables_are_sysfs_milliseconds_converted_to_jiffies() {
        let config = parse(
            "elevator = \"cfq\"\nnr_requests = 64\n[cfq]\nslice_idle = 0\nslice_sync = 45\nquantum = 16\nlow_latency = false\n[deadline]\nread_expire = 250\n[mq-deadline]\nprio_aging_expire = 1000\n",
        )
        .unwrap();
        let hz = Hz(100);
        let cfq = config.cfq.tunables(hz);
        assert_eq!(cfq.slice_idle, 0, "slice_idle = 0 turns idling off");
        assert_eq!(cfq.slice[1], 5, "msecs_to_jiffies(45) rounds up");
        assert_eq!((cfq.quantum, cfq.low_latency), (16, false));
        assert_eq!(cfq.slice[0], 4, "unset: HZ / 25");
        assert_eq!(config.deadline.tunables(hz).fifo_expire, [25, 500]);
        assert_eq!(config.mq_deadline.tunables(hz).prio_aging_expire, 100);
        assert_eq!(config.nr_requests, Some(64));
    }

    #[test]
    fn invalid_and_unknown_tunables_are_errors_naming_the_field() {
        let error = parse("[cfq]\nquantum = 0\n").unwrap_err();
        assert!(
            error.contains("quantum") && error.contains("[stack.block.cfq]"),
            "{error}"
        );
        let error = parse("[cfq]\nslice_idel = 8\n").unwrap_err();
        assert!(error.contains("slice_idel"), "{error}");
        let error = parse("nr_requests = 2\n").unwrap_err();
        assert!(
            error.contains("[stack.block] nr_requests = 2") && error.contains("at least 4"),
            "{error}"
        );
        let error = parse("[deadline]\nfifo_batch = 0\n").unwrap_err();
        assert!(error.contains("fifo_batch"), "{error}");
        let error = parse("nr_requests = 8\n[mq-deadline]\nasync_depth = 9\n").unwrap_err();
        assert!(error.contains("async_depth = 9"), "{error}");
    }

    #[test]
    fn wbt_is_on_for_blk_mq_queues_but_bfq_and_off_for_legacy_elevators() {
        // A desktop kernel (CONFIG_BLK_WBT_MQ=y): wbt_enable_default.
        let desktop = KernelConfig {
            version: KernelVersion::Mainline,
            ..KernelConfig::default()
        };
        let on = |text: &str| parse(text).unwrap().wbt_min_lat_nsec(&desktop, true);
        assert_eq!(on("elevator = \"mq-deadline\"\n"), Some(2_000_000));
        assert_eq!(on("elevator = \"kyber\"\n"), Some(2_000_000));
        assert_eq!(on("elevator = \"none\"\nwbt = false\n"), None);
        assert_eq!(on("elevator = \"none\"\nwbt_lat_usec = 0\n"), None);
        assert_eq!(
            on("elevator = \"mq-deadline\"\nwbt_lat_usec = 5000\n"),
            Some(5_000_000)
        );
        assert_eq!(on("elevator = \"bfq\"\n"), None, "bfq_init_queue");
        let legacy = parse("elevator = \"cfq\"\n").unwrap();
        assert_eq!(
            legacy.wbt_min_lat_nsec(&KernelConfig::default(), false),
            None
        );
        let error = parse("elevator = \"cfq\"\nwbt = true\n").unwrap_err();
        assert!(
            error.contains("`wbt` = true") && error.contains("cfq"),
            "{error}"
        );
    }

    /// `wbt_enable_default` (block/blk-wbt.c) turns wbt on for a blk-mq queue only with
    /// `CONFIG_BLK_WBT_MQ`, which Android's GKI defconfigs (android12-5.10 .. android15-6.6)
    /// do not set; 3.10 has no wbt (4.10). Before the era switch the model turned it on for
    /// every blk-mq queue but BFQ's, whatever the kernel.
    #[test]
    fn wbt_default_follows_the_version_and_the_kernel_config() {
        let mq = parse("elevator = \"mq-deadline\"\n").unwrap();
        let kernel = |version, config| KernelConfig {
            version,
            config,
            ..KernelConfig::default()
        };
        let gki = kernel(KernelVersion::V6_6, None);
        assert_eq!(mq.wbt_default(&gki), WbtDefault::Config);
        assert_eq!(mq.wbt_min_lat_nsec(&gki, true), None, "GKI 6.6: off");
        let distro = kernel(
            KernelVersion::V6_6,
            Some(crate::kernel::KernelBuildConfig::Distro),
        );
        assert_eq!(mq.wbt_min_lat_nsec(&distro, true), Some(2_000_000));
        let old = kernel(
            KernelVersion::V4_4,
            Some(crate::kernel::KernelBuildConfig::Distro),
        );
        let mut mq_on_4_4 = mq.clone();
        mq_on_4_4.version = Some(KernelVersion::V4_4);
        assert_eq!(mq_on_4_4.wbt_default(&old), WbtDefault::NotInVersion);
        // A stack built in code that names mq-deadline over 3.10 runs mainline's block layer
        // (a desktop's config): as before the era switch.
        let paper = KernelConfig::default();
        assert_eq!(mq.era(&paper).source, BlockEraSource::Elevator);
        assert_eq!(mq.wbt_min_lat_nsec(&paper, true), Some(2_000_000));
        assert!(mq.mixed_era(&paper).unwrap().contains("over Linux 3.10"));
        assert!(mq
            .check_era(&paper)
            .unwrap_err()
            .contains("`elevator` `mq-deadline`"));
    }

    /// Android's GKI defconfig builds BFQ up to android14-6.1 and not in android15-6.6
    /// (`CONFIG_IOSCHED_BFQ` unset): a scenario asking a 6.6 phone kernel for BFQ is refused,
    /// naming the version and the config; a desktop config still builds it.
    #[test]
    fn gki_6_6_does_not_build_bfq_and_a_scenario_asking_for_it_is_refused() {
        use crate::kernel::KernelBuildConfig;
        let bfq = parse("elevator = \"bfq\"\n").unwrap();
        let kernel = |version, config| KernelConfig {
            version,
            config,
            ..KernelConfig::default()
        };
        let error = bfq
            .check_era(&kernel(KernelVersion::V6_6, None))
            .unwrap_err();
        assert!(error.contains("Linux 6.6"), "{error}");
        assert!(error.contains("config = \"android\""), "{error}");
        assert!(error.contains("CONFIG_IOSCHED_BFQ"), "{error}");
        for version in [
            KernelVersion::V5_10,
            KernelVersion::V5_15,
            KernelVersion::V6_1,
        ] {
            assert!(bfq.check_era(&kernel(version, None)).is_ok(), "{version}");
        }
        let desktop = kernel(KernelVersion::V6_6, Some(KernelBuildConfig::Distro));
        assert!(bfq.check_era(&desktop).is_ok());
        for name in ["mq-deadline", "kyber", "none"] {
            let other = parse(&format!("elevator = \"{name}\"\n")).unwrap();
            assert!(other.check_era(&kernel(KernelVersion::V6_6, None)).is_ok());
        }
        // A 6.6 block layer under a mainline kernel built with Android's config: the same.
        let mut mixed = bfq.clone();
        mixed.version = Some(KernelVersion::V6_6);
        let android_mainline = kernel(KernelVersion::Mainline, Some(KernelBuildConfig::Android));
        assert!(mixed.check_era(&android_mainline).is_err());
    }

    #[test]
    fn the_legacy_elevators_end_at_4_19_and_the_blk_mq_ones_start_at_4_11_and_4_12() {
        use elevator::{elevators_of, version_has, versions_with};
        assert_eq!(
            elevators_of(KernelVersion::V3_10),
            ["noop", "deadline", "cfq"]
        );
        assert_eq!(
            elevators_of(KernelVersion::V4_19),
            [
                "noop",
                "deadline",
                "cfq",
                "mq-deadline",
                "kyber",
                "bfq",
                "none"
            ]
        );
        assert!(
            !version_has(KernelVersion::V5_10, "cfq"),
            "f382fb0bcef4 (5.0)"
        );
        assert!(
            version_has(KernelVersion::V5_10, "subregion"),
            "a paper's, in no kernel"
        );
        assert_eq!(versions_with("bfq").unwrap(), "4.19 and later");
        assert_eq!(versions_with("cfq").unwrap(), "3.0 to 4.19");
        assert_eq!(versions_with("anticipatory"), None);
        assert_eq!(BlockConfig::default_elevator(KernelVersion::V4_19), "cfq");
        assert_eq!(
            BlockConfig::default_elevator(KernelVersion::V5_10),
            "mq-deadline"
        );
    }

    #[test]
    fn request_list_is_linux_unless_the_papers_unbounded_list_is_asked_for() {
        let config = parse("elevator = \"cfq\"\n").unwrap();
        assert_eq!(config.request_list, RequestList::Linux);
        // The default is left out when written back (results of older runs stay the same).
        let written = toml::to_string(&config).unwrap();
        assert!(!written.contains("request_list"), "{written}");
        let config = parse("request_list = \"unbounded\"\n").unwrap();
        assert_eq!(config.request_list, RequestList::Unbounded);
        assert!(toml::to_string(&config)
            .unwrap()
            .contains("request_list = \"unbounded\""));
        let error =
            parse("elevator = \"mq-deadline\"\nrequest_list = \"unbounded\"\n").unwrap_err();
        assert!(
            error.contains("`request_list`") && error.contains("mq-deadline"),
            "{error}"
        );
        assert!(parse("request_list = \"roomy\"\n").is_err());
    }
}
