//! The kernel build a run models (`[stack.kernel]`): its Linux version ([`KernelVersion`]: which
//! era's behaviour the layers follow where versions differ), the tick rate `HZ`, from which every
//! jiffy-based constant of the block layer and the page cache is derived, as the kernel derives
//! them at compile time; and the machine's CPU (`[stack.cpu]`): its cores and what the kernel
//! paths that touch data cost on them ([`CpuConfig`]).
//!
//! Linux measures many of the intervals the papers' stalls depend on in jiffies: CFQ's
//! `slice_idle = HZ / 125`, `CFQ_MIN_TT = 2` jiffies, `BLK_BATCH_TIME = HZ / 50`,
//! `congestion_wait(HZ / 10)`, the dirty-throttling pauses. With HZ = 100 a jiffy is 10 ms and
//! the kernel's integer division makes `HZ / 125` zero jiffies ([`Hz::over`]), which CFQ's
//! `cfq_init` then raises to one jiffy ("could be 0 on HZ < 1000 setups"): `slice_idle` is
//! 10 ms at HZ = 100, not 0. Think times are whole jiffies. The helpers here do the kernel's
//! integer arithmetic so models reproduce those effects instead of idealised millisecond values;
//! where the kernel clamps a result, the model does too.
//!
//! Simplifications: the clock is virtual and exact; `jiffies` is `now / tick` (no boot offset,
//! no `INITIAL_JIFFIES` wrap); timers fire on the tick after their expiry as `mod_timer` does only
//! where a model asks for it (`Hz::next_tick`).

use crate::units::{serde_units, Nanos, NS_PER_SEC, NS_PER_US};
use serde::{Deserialize, Serialize};

/// `CONFIG_HZ`: timer interrupts per second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
#[serde(transparent)]
pub struct Hz(pub u32);

impl Hz {
    /// Length of one jiffy.
    pub fn tick_ns(self) -> Nanos {
        NS_PER_SEC / u64::from(self.0)
    }

    /// `jiffies` at virtual time `now`.
    pub fn jiffies(self, now: Nanos) -> u64 {
        now / self.tick_ns()
    }

    /// Virtual time of jiffy `j`.
    pub fn jiffies_to_ns(self, j: u64) -> Nanos {
        j * self.tick_ns()
    }

    /// `HZ / divisor` in jiffies, with the kernel's integer division (`HZ / 125` at HZ = 100 is
    /// 0).
    pub fn over(self, divisor: u32) -> u64 {
        u64::from(self.0 / divisor)
    }

    /// `HZ * num / den` jiffies (integer arithmetic, as `HZ * 3 / 10`).
    pub fn frac(self, num: u32, den: u32) -> u64 {
        u64::from(self.0) * u64::from(num) / u64::from(den)
    }

    /// `msecs_to_jiffies(ms)`: rounds up to whole jiffies.
    pub fn msecs_to_jiffies(self, ms: u64) -> u64 {
        (ms * u64::from(self.0)).div_ceil(1000)
    }

    /// A duration rounded up to whole jiffies, as a timer armed for it would expire.
    pub fn round_up(self, duration: Nanos) -> Nanos {
        duration.div_ceil(self.tick_ns()) * self.tick_ns()
    }

    /// The first tick at or after `now`.
    pub fn next_tick(self, now: Nanos) -> Nanos {
        self.round_up(now)
    }
}

/// The Linux version whose behaviour a run models (`[stack.kernel] version`): the releases of
/// the papers' phones (3.10) and of Android's kernels since (4.4 ... 6.6), and `mainline`.
/// Ordered by release, so a behaviour introduced in version X is `self >= X`. Model code asks
/// the predicates below, never the version itself: each predicate names the kernel commit that
/// introduced the behaviour (docs/kernels.md lists them).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Deserialize, Serialize,
)]
pub enum KernelVersion {
    /// Linux 3.0 (2011): the Galaxy Premier I9260 of MobiFS (Android 4.1).
    #[serde(rename = "3.0")]
    V3_0,
    /// Linux 3.4 (2012): the Nexus 5 ("hammerhead", msm 3.4).
    #[serde(rename = "3.4")]
    V3_4,
    /// Linux 3.10 (2013): the Galaxy S5, Nexus 5/6 and the papers' other phones. What the model
    /// implements where no predicate says otherwise.
    #[default]
    #[serde(rename = "3.10")]
    V3_10,
    /// Linux 3.18 (2014): the Pixel ("marlin", msm 3.18).
    #[serde(rename = "3.18")]
    V3_18,
    /// Linux 4.4 (Android's kernels of 2016-2017).
    #[serde(rename = "4.4")]
    V4_4,
    /// Linux 4.19 (Android 10-11 phones).
    #[serde(rename = "4.19")]
    V4_19,
    /// Linux 5.10 (GKI android12-5.10).
    #[serde(rename = "5.10")]
    V5_10,
    /// Linux 5.15 (GKI android13-5.15 / android14-5.15: the Pixel 8).
    #[serde(rename = "5.15")]
    V5_15,
    /// Linux 6.1 (GKI android14-6.1).
    #[serde(rename = "6.1")]
    V6_1,
    /// Linux 6.6 (GKI android15-6.6).
    #[serde(rename = "6.6")]
    V6_6,
    /// The current mainline kernel.
    #[serde(rename = "mainline")]
    Mainline,
}

impl KernelVersion {
    /// Every version, oldest first.
    pub const ALL: [KernelVersion; 11] = [
        KernelVersion::V3_0,
        KernelVersion::V3_4,
        KernelVersion::V3_10,
        KernelVersion::V3_18,
        KernelVersion::V4_4,
        KernelVersion::V4_19,
        KernelVersion::V5_10,
        KernelVersion::V5_15,
        KernelVersion::V6_1,
        KernelVersion::V6_6,
        KernelVersion::Mainline,
    ];

    /// The name `[stack.kernel] version` takes.
    pub fn name(self) -> &'static str {
        match self {
            KernelVersion::V3_0 => "3.0",
            KernelVersion::V3_4 => "3.4",
            KernelVersion::V3_10 => "3.10",
            KernelVersion::V3_18 => "3.18",
            KernelVersion::V4_4 => "4.4",
            KernelVersion::V4_19 => "4.19",
            KernelVersion::V5_10 => "5.10",
            KernelVersion::V5_15 => "5.15",
            KernelVersion::V6_1 => "6.1",
            KernelVersion::V6_6 => "6.6",
            KernelVersion::Mainline => "mainline",
        }
    }

    /// `jbd2_journal_force_commit` commits only what exists: the running transaction if there
    /// is one (`__jbd2_journal_force_commit`), else it waits for the committing one, and writes
    /// nothing when the journal is idle. Linux 3.11, commit 9ff864462477 ("jbd2: optimize
    /// jbd2_journal_force_commit", D. Monakhov). Before it (3.10), `jbd2_journal_force_commit`
    /// starts a handle, marks it synchronous and stops it: on an idle journal that opens a
    /// transaction, so an empty one is committed (a commit block with the journal's barrier).
    pub fn has_force_commit_optimization(self) -> bool {
        self > KernelVersion::V3_10
    }

    /// BFQ merges the queues of cooperating processes (`bfq_setup_cooperator`: a queue whose
    /// new request lies within `BFQQ_CLOSE_THR` of another queue's next request) on every
    /// device, flash with command queueing included. Linux 5.2, "block, bfq: do not merge queues
    /// on flash storage with queueing" (P. Valente, 12 March 2019; 8cacc5ab3eac, the hash
    /// quoted from memory and not verified: no history of block/bfq-iosched.c was reachable;
    /// the title is in the 5.2 block pull, for-5.2/block-20190507), made `bfq_setup_cooperator`
    /// return at once when `bfqd->nonrot_with_queueing`. BFQ itself entered mainline in 4.12
    /// (aee69d78dec0 "block, bfq: introduce the BFQ-v0 I/O scheduler as an extra scheduler", with
    /// 36eca8948323 "block, bfq: add Early Queue Merge (EQM)"); for 3.10 and 4.4, which have no
    /// BFQ, this answers as for the first BFQ releases (4.12 to 5.1).
    pub fn bfq_merges_cooperators_on_queueing_flash(self) -> bool {
        self < KernelVersion::V5_10
    }

    /// BFQ stably merges a new sync queue with the last one created in its group when both were
    /// created within `bfq_burst_interval` (180 ms) of each other with the same I/O priority
    /// and class (`bfq_do_or_sched_stable_merge`): at once on flash with command queueing, else
    /// after `bfq_late_stable_merging` (600 ms) unless idling boosts the queue's throughput.
    /// Linux 5.13, 430a67f9d616 ("block, bfq: merge bursts of newly-created queues",
    /// P. Valente); the 600 ms `bfq_activation_stable_merging` / `bfq_late_stable_merging` are
    /// 5.14's 7812472f9730 ("block, bfq: boost throughput by extending queue-merging times").
    pub fn has_bfq_stable_merge(self) -> bool {
        self >= KernelVersion::V5_15
    }

    /// `global_dirtyable_memory` takes the reserve (`dirty_balance_reserve`, later
    /// `totalreserve_pages`) off the free pages only and adds the file LRU after, so a page
    /// cache that fills memory stays dirtyable, and no longer subtracts `min_free_kbytes`.
    /// Linux 3.14, commit a804552b9a15 ("mm/page-writeback.c: fix dirty_balance_reserve
    /// subtraction from dirtyable memory", J. Weiner); the `min_free_kbytes` subtraction
    /// (75f7ad8e043d, 3.9) is gone by 4.4 (J. Weiner's revert: the reserve already holds the
    /// watermarks it sets). 3.10 subtracts the reserve and `min_free_kbytes` from free + file
    /// pages together.
    pub fn dirtyable_reserve_from_free_pages(self) -> bool {
        self > KernelVersion::V3_10
    }

    /// ext4's delayed-allocation writeback files the inode on the running transaction's
    /// ordered-data list when it allocates new blocks (`ext4_map_blocks`: `EXT4_MAP_NEW` ->
    /// `ext4_jbd2_inode_add_write` / `_add_wait` -> `jbd2_journal_file_inode`, which also sets
    /// `t_need_data_flush`): the commit waits for that data and, with an external journal,
    /// flushes the file system's device before its commit block. Linux 4.7, commit
    /// 06bd3c36a733 ("ext4: fix data exposure after a crash", J. Kara). Linux 3.9 to 4.6 (3.10
    /// and 4.4 here) file nothing there: f3b59291a69d ("ext4: remove calls to
    /// ext4_jbd2_file_inode() from delalloc write path", 3.9) took the filing out of
    /// `mpage_da_map_and_submit`.
    pub fn files_new_delalloc_blocks_as_ordered_data(self) -> bool {
        // Up to 3.8 (3.0 and 3.4 here) `mpage_da_map_and_submit` filed the inode itself.
        self < KernelVersion::V3_10 || self >= KernelVersion::V4_19
    }

    /// `jbd2_trans_will_send_data_barrier`, answering yes for a transaction that has not
    /// started committing, marks it `t_need_data_flush`, so that its commit flushes the file
    /// system's device even on an external journal where nothing filed ordered data (before,
    /// `ext4_sync_file` skipped its own flush on that yes and the commit sent none: fsync
    /// could return with the data in the device's cache). Commit aac45075f6d7 ("jbd2: add a
    /// missing data flush during file and fs synchronization", Zhang Yi; posted December
    /// 2024, merged for 6.15, backported to 6.14.y; `Fixes: bbd2be369107`). Modelled for
    /// `mainline` only: 6.6's own code (6.6.0) does not have it.
    pub fn will_send_data_barrier_marks_data_flush(self) -> bool {
        self >= KernelVersion::Mainline
    }

    /// ext4 refuses to mount with `journal_async_commit` in `data=ordered` mode ("can't mount
    /// with journal_async_commit in data=ordered mode"): the commit's one flush comes after
    /// the commit block, so a transaction could replay with its ordered data still in the
    /// device's cache. Linux 3.19, commit d4f761074353 ("ext4: forbid journal_async_commit in
    /// data=ordered mode", J. Kara). 3.10 mounts it (the Galaxy S5's /data did).
    pub fn forbids_async_commit_with_ordered_data(self) -> bool {
        self >= KernelVersion::V4_4
    }

    /// ext4's writeback stops its (non-synchronous) jbd2 handle before it submits an extent's
    /// last bio (`ext4_writepages`: `mpage_map_and_submit_extent`, `ext4_journal_stop`, then
    /// `ext4_io_submit`), so a flusher asleep in the block layer on that bio holds no handle a
    /// commit must wait for. Linux 3.11, commit 4e7ea81db534 ("ext4: restructure writeback
    /// path", J. Kara); 646caa9c8e19 ("ext4: fix deadlock during page writeback", 4.7) keeps a
    /// synchronous handle until after the submit (writeback handles are never synchronous
    /// here). 3.10's `ext4_da_writepages` -> `mpage_da_map_and_submit` submits every bio of
    /// the batch inside its handle.
    pub fn stops_writeback_handle_before_final_submit(self) -> bool {
        self > KernelVersion::V3_10
    }

    /// ext4's writeback starts no jbd2 handle for pages that need no block mapping (their
    /// blocks allocated already): it writes them first with `do_map = 0`. Linux 5.8, commit
    /// 6b8ed62008a4 ("ext4: avoid unnecessary transaction starts during writeback", J. Kara).
    /// Before it every writeback batch started a handle.
    pub fn writes_mapped_pages_without_handle(self) -> bool {
        self >= KernelVersion::V5_10
    }

    /// The legacy (single-queue) request queue and its elevators `noop`, `deadline` and `cfq`
    /// (block/blk-core.c `__get_request`, block/cfq-iosched.c). Removed in 5.0: f382fb0bcef4
    /// ("block: remove legacy IO schedulers", J. Axboe) and "block: remove the legacy request
    /// path" in the same merge window; 4.19 is the last release in the list that has them.
    pub fn has_legacy_request_queue(self) -> bool {
        self <= KernelVersion::V4_19
    }

    /// blk-mq I/O scheduling: the `mq-deadline` elevator and `none` as a choice in
    /// `queue/scheduler`. Linux 4.11: bd166ef183c2 ("blk-mq-sched: add framework for MQ capable
    /// IO schedulers") and 945ffb60c11d ("mq-deadline: add blk-mq adaptation of the deadline
    /// IO scheduler"), J. Axboe.
    pub fn has_blk_mq_scheduling(self) -> bool {
        // The first version of the list from 4.11 on (4.4 predates it).
        self >= KernelVersion::V4_19
    }

    /// The `bfq` and `kyber` blk-mq elevators. Linux 4.12: aee69d78dec0 ("block, bfq:
    /// introduce the BFQ-v0 I/O scheduler as an extra scheduler", P. Valente) and 00e043936e9a
    /// ("blk-mq: introduce Kyber multiqueue I/O scheduler", O. Sandoval).
    pub fn has_bfq_and_kyber(self) -> bool {
        self >= KernelVersion::V4_19
    }

    /// Writeback throttling (block/blk-wbt.c, `CONFIG_BLK_WBT`, `CONFIG_BLK_WBT_MQ` for blk-mq
    /// queues). Linux 4.10: e34cbd307477 ("blk-wbt: add general throttling mechanism") and
    /// 87760e5eef35 ("block: hook up writeback throttling"), J. Axboe. Whether a queue has it
    /// on also depends on the kernel's config ([`KernelBuildConfig::enables_wbt_by_default`]).
    pub fn has_wbt(self) -> bool {
        self >= KernelVersion::V4_19
    }

    /// ext4 mounts with `dioread_nolock` unless told `dioread_lock`: buffered writeback of
    /// delayed blocks allocates them as unwritten extents (`ext4_writepages` ->
    /// `mpage_map_and_submit_extent` -> `ext4_map_blocks(EXT4_GET_BLOCKS_IO_CREATE_EXT)`), which
    /// `ext4_map_blocks` does not file as ordered data (`!(map->m_flags & EXT4_MAP_UNWRITTEN)`),
    /// and converts them after the data I/O completes (`ext4_end_io_rsv_work`). Linux 5.6, commit
    /// 244adf6426ee ("ext4: make dioread_nolock the default", R. Harjani). Before it the option
    /// existed (since 2.6.34) but was off.
    pub fn mounts_dioread_nolock_by_default(self) -> bool {
        self >= KernelVersion::V5_10
    }

    /// The conversion of unwritten extents after a writeback bio completes runs in a jbd2
    /// handle reserved when the writeback started (`ext4_writepages`:
    /// `ext4_journal_start_with_reserve`; the work `ext4_end_io_rsv_work` starts it with
    /// `ext4_journal_start_reserved`), which joins the running transaction even while it is
    /// locked for commit (`start_this_handle` skips `add_transaction_credits` for `h_reserved`).
    /// Linux 3.11, commits 8f7d89f36829 ("jbd2: transaction reservation support") and
    /// 6b523df4fb5a ("ext4: use transaction reservation for extent conversion in
    /// ext4_end_io"), J. Kara. 3.10's `ext4_end_io_work` -> `ext4_convert_unwritten_extents`
    /// starts an ordinary handle, which waits for a locked transaction.
    pub fn has_reserved_conversion_handles(self) -> bool {
        self > KernelVersion::V3_10
    }

    /// With `-o discard`, ext4 discards the extents a commit freed all at once: their bios are
    /// chained (`__blkdev_issue_discard`) and waited for once (`submit_bio_wait`) in
    /// `ext4_process_freed_data`, still from the commit callback on the journal thread. Linux
    /// 4.14, commit a015434480dc ("ext4: send parallel discards on commit completions",
    /// D. Jeong). Before it (3.10's `ext4_free_data_callback`), each freed extent's
    /// `sb_issue_discard` is waited for before the next is issued.
    pub fn sends_parallel_discards_at_commit(self) -> bool {
        // The first version of the list from 4.14 on (4.4 predates it).
        self >= KernelVersion::V4_19
    }

    /// With `-o discard`, ext4 discards freed extents in a work item (`s_discard_work`,
    /// `ext4_discard_work` on `system_unbound_wq`) instead of on the journal thread, so a
    /// commit (and an fsync waiting for it) no longer waits for discards. Linux 5.15, commit
    /// 55cdd0af2bc5 ("ext4: get discard out of jbd2 commit kthread contex", Wang Jianchao;
    /// read in android13-5.15's fs/ext4/mballoc.c).
    pub fn discards_freed_blocks_in_a_work_item(self) -> bool {
        self >= KernelVersion::V5_15
    }

    /// Android's kernel config of this version builds BFQ (`CONFIG_IOSCHED_BFQ`, which has no
    /// default in block/Kconfig.iosched): arch/arm64/configs/gki_defconfig sets
    /// `CONFIG_IOSCHED_BFQ=y` and `CONFIG_BFQ_GROUP_IOSCHED=y` in android12-5.10,
    /// android13/14-5.15 and android14-6.1, and neither in android15-6.6 (read in GrapheneOS's
    /// kernel_common-5.10, -6.1 and -6.6 copies of the branches). `mainline` with the android
    /// config is taken as 6.6's (asm: android16-6.12 not read). Versions before GKI (4.19 and
    /// older) ran vendor defconfigs: not restricted here (their phone presets name what they
    /// ran). `mq-deadline` and `kyber` default to y (`MQ_IOSCHED_DEADLINE`,
    /// `MQ_IOSCHED_KYBER`) and no GKI defconfig turns them off.
    pub fn android_config_builds_bfq(self) -> bool {
        self < KernelVersion::V6_6
    }
}

impl std::fmt::Display for KernelVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Whose `.config` the kernel was built with (`[stack.kernel] config`): what a version's code
/// does by default where a Kconfig option decides (today: whether blk-mq queues start with
/// writeback throttling).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum KernelBuildConfig {
    /// A phone's: Android's GKI defconfig (arch/arm64/configs/gki_defconfig of android12-5.10,
    /// android13/14-5.15, android14-6.1, android15-6.6) or, before GKI, the vendor's defconfig.
    /// None of them turns wbt on for blk-mq queues: 5.10, 5.15 and 6.1 leave `CONFIG_BLK_WBT`
    /// unset (its Kconfig entry has no default), 6.6 sets `CONFIG_BLK_WBT=y` with
    /// `# CONFIG_BLK_WBT_MQ is not set` (wbt built, `queue/wbt_lat_usec` writable, off until
    /// written). Pre-GKI vendor configs: asm: not enabled (their kernels ran the legacy queue).
    Android,
    /// A desktop distribution's (Fedora, Debian, Ubuntu: `CONFIG_BLK_WBT=y`,
    /// `CONFIG_BLK_WBT_MQ=y`, asm: as their published configs of the 5.x/6.x kernels): wbt on
    /// for every blk-mq queue but BFQ's (`wbt_enable_default`).
    Distro,
}

impl KernelBuildConfig {
    /// The name `[stack.kernel] config` takes.
    pub fn name(self) -> &'static str {
        match self {
            KernelBuildConfig::Android => "android",
            KernelBuildConfig::Distro => "distro",
        }
    }

    /// The config a version is built with when the scenario does not say: `mainline` runs on
    /// no phone, so a desktop distribution's; every other version is a phone kernel's.
    pub fn default_for(version: KernelVersion) -> KernelBuildConfig {
        if version == KernelVersion::Mainline {
            KernelBuildConfig::Distro
        } else {
            KernelBuildConfig::Android
        }
    }

    /// `CONFIG_BLK_WBT_MQ` (`wbt_enable_default` turns wbt on for a blk-mq queue only with it).
    pub fn enables_wbt_by_default(self) -> bool {
        self == KernelBuildConfig::Distro
    }

    /// Whether a kernel of `version` built with this config has elevator `name` compiled in
    /// (so `/sys/block/*/queue/scheduler` offers it): everything the version has, but BFQ
    /// under an Android config that leaves `CONFIG_IOSCHED_BFQ` out
    /// ([`KernelVersion::android_config_builds_bfq`]). A desktop distribution's config builds
    /// every elevator (asm: Fedora, Debian and Ubuntu build BFQ and Kyber as modules).
    pub fn builds_elevator(self, version: KernelVersion, name: &str) -> bool {
        !(self == KernelBuildConfig::Android
            && name == "bfq"
            && !version.android_config_builds_bfq())
    }
}

/// The `[stack.kernel]` table.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct KernelConfig {
    /// The Linux version whose behaviour the model follows where versions differ
    /// ([`KernelVersion`]). Default 3.10: the papers' phones, and what the model implements.
    pub version: KernelVersion,
    /// The kernel's `.config` ([`KernelBuildConfig`]); default: a phone's (`android`) for every
    /// version but `mainline` (`distro`). See [`KernelConfig::build_config_for`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<KernelBuildConfig>,
    /// `CONFIG_HZ`. Default 100: the `config HZ` default of arch/arm64/Kconfig and of
    /// arch/arm/Kconfig for platforms without a fixed rate in Linux 3.10 (the papers' phones
    /// ran 3.4-3.10). Samsung's ARM platforms forced 200 (`HZ_FIXED`, removed upstream in 2016:
    /// "All Samsung platforms, including the Exynos, are selecting HZ_FIXED with 200 Hz",
    /// K. Kozlowski, "ARM: Drop fixed 200 Hz timer requirement from Samsung platforms"); the
    /// Nexus 6P ran 300. Current x86 desktop kernels commonly use 250 or 1000.
    pub hz: Hz,
}

/// Accepted tick rates: the choices of the kernel's `HZ_*` Kconfig entries.
pub const HZ_CHOICES: [u32; 7] = [100, 200, 250, 300, 500, 1000, 128];

impl Default for KernelConfig {
    fn default() -> Self {
        KernelConfig {
            version: KernelVersion::default(),
            config: None,
            hz: Hz(100),
        }
    }
}

impl KernelConfig {
    /// The `.config` the code of `version` runs with: `config` if the scenario gives one, else
    /// [`KernelBuildConfig::default_for`] `version` (a layer of another era than the kernel's,
    /// `[stack.block] version`, gets that era's default).
    pub fn build_config_for(&self, version: KernelVersion) -> KernelBuildConfig {
        self.config
            .unwrap_or_else(|| KernelBuildConfig::default_for(version))
    }

    pub fn validate(&self) -> Result<(), String> {
        if !HZ_CHOICES.contains(&self.hz.0) {
            return Err(format!(
                "`hz` {} is not a kernel tick rate: expected one of 100, 200, 250, 300, 500, 1000 (or 128)",
                self.hz.0
            ));
        }
        Ok(())
    }
}

/// The `[stack.cpu]` table: the cores and the CPU cost of the kernel paths that move data.
///
/// Costs are spent on a core ([`crate::sim::cpu::Cpu`]) while the task holds what the kernel
/// holds at that point (the page lock and `i_mutex` during `copy_from_user`), so a writer that
/// dirties pages does so at a real rate and a cached read takes real time.
///
/// Defaults are a 2014 phone (the papers' Galaxy S5 / Nexus 5 class). They are assumptions
/// (`asm:`) scaled from a calibration measured on an x86 server core (AMD EPYC, KVM guest,
/// Linux 6.x, tmpfs: the procedure is `scripts/calibrate-cpu.c`, see `docs/cpu.md`): there, a
/// cached 4 KiB `pread` costs 1.45 us, 1 MiB ones run at 3.7 GB/s (copy + per-page walk), the
/// per-call part is about 0.35 us, and writing a new 4 KiB page costs 1.7 us more than
/// overwriting one (allocation, zeroing, LRU insertion). A Cortex-A15/Krait core of 2014 is
/// assumed three times slower (single-thread memory copy of mobile SoCs of that era is about
/// 1-2 GB/s: e.g. lmbench `bw_mem bcopy` 1.96 GB/s on a Cortex-A53 SoC, TI SPRADG0A
/// Table 3-1). [`CpuConfig::desktop`] gives the calibration machine's own values.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CpuConfig {
    /// Cores that run tasks. Default 4: the big cluster of the Galaxy S5's Exynos 5422 ("quad
    /// Cortex-A15 and quad Cortex-A7", seed 000 §6); the Nexus 5's Snapdragon 800 has 4 Krait
    /// cores.
    pub cores: usize,
    /// Fixed cost of one system call: entry, exit and the VFS's per-call work (fd lookup,
    /// `rw_verify_area`, `file_update_time`). Default 1 us (asm: 3 x the 0.35 us calibrated).
    #[serde(with = "serde_units::duration")]
    pub syscall: Nanos,
    /// Bandwidth of moving data between user buffers and the page cache, per page walked
    /// (`copy_from_user` / `copy_to_user` plus the page lookup). Default 1.2 GB/s (asm: the
    /// calibrated 3.7 GB/s / 3).
    #[serde(with = "serde_units::bandwidth")]
    pub copy_bandwidth: u64,
    /// Cost of allocating a page-cache page and inserting it (`__alloc_pages` fast path,
    /// zeroing where needed, `add_to_page_cache_lru`). Default 5 us (asm: 3 x 1.7 us).
    #[serde(with = "serde_units::duration")]
    pub page_alloc: Nanos,
    /// Cost of scanning one page in reclaim (isolating it from the LRU,
    /// `page_check_references`, and for a clean page `__remove_mapping` and the free),
    /// charged to the task that reclaims: an allocating task in direct reclaim, or kswapd.
    /// Default 1.6 us (asm: `page_alloc` less zeroing a page, `copy_ns(4096)`: the same list
    /// and radix-tree work without the zeroing; 5 us - 3.4 us).
    #[serde(with = "serde_units::duration")]
    pub page_reclaim: Nanos,
}

/// Cores of [`CpuConfig::zero_cost`]: enough that no test task ever waits for one.
const MAX_ZERO_COST_CORES: usize = 64;

impl Default for CpuConfig {
    fn default() -> Self {
        CpuConfig {
            cores: 4,
            syscall: NS_PER_US,
            copy_bandwidth: 1_200_000_000,
            page_alloc: 5 * NS_PER_US,
            page_reclaim: 1_600,
        }
    }
}

impl CpuConfig {
    /// The calibration machine (an x86 server core, see the type's documentation): 0.35 us per
    /// call, 3.7 GB/s, 1.7 us per new page (0.6 us to reclaim one: 1.7 us less a 4 KiB
    /// zeroing at 3.7 GB/s); 8 cores.
    pub fn desktop() -> Self {
        CpuConfig {
            cores: 8,
            syscall: 350,
            copy_bandwidth: 3_700_000_000,
            page_alloc: 1_700,
            page_reclaim: 600,
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        if !(1..=crate::sim::cpu::MAX_CORES).contains(&self.cores) {
            return Err(format!(
                "`cores` {} must be 1..={}",
                self.cores,
                crate::sim::cpu::MAX_CORES
            ));
        }
        if self.copy_bandwidth == 0 {
            return Err("`copy_bandwidth` must be positive (e.g. \"1.2GB/s\")".into());
        }
        Ok(())
    }

    /// No CPU cost at all: for tests that isolate I/O timing (every syscall and copy takes no
    /// time). Not a machine; scenarios cannot name it.
    pub fn zero_cost() -> Self {
        CpuConfig {
            cores: MAX_ZERO_COST_CORES,
            syscall: 0,
            copy_bandwidth: u64::MAX,
            page_alloc: 0,
            page_reclaim: 0,
        }
    }

    /// Time to copy `bytes` between a user buffer and the page cache (whole nanoseconds,
    /// truncated).
    pub fn copy_ns(&self, bytes: u64) -> Nanos {
        (u128::from(bytes) * u128::from(NS_PER_SEC) / u128::from(self.copy_bandwidth)) as Nanos
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::NS_PER_MS;

    #[test]
    fn jiffy_arithmetic_is_the_kernels() {
        let hz = Hz(100);
        assert_eq!(hz.tick_ns(), 10 * NS_PER_MS);
        assert_eq!(hz.over(125), 0, "HZ / 125 is 0 jiffies at HZ = 100");
        assert_eq!(Hz(1000).over(125), 8);
        assert_eq!(Hz(300).over(125), 2);
        assert_eq!(hz.frac(3, 10), 30);
        assert_eq!(hz.msecs_to_jiffies(1), 1, "rounds up");
        assert_eq!(hz.msecs_to_jiffies(20), 2);
        assert_eq!(hz.jiffies(25 * NS_PER_MS), 2);
        assert_eq!(hz.round_up(11 * NS_PER_MS), 20 * NS_PER_MS);
        assert_eq!(hz.next_tick(20 * NS_PER_MS), 20 * NS_PER_MS);
    }

    #[test]
    fn copies_cost_their_bytes_over_the_bandwidth() {
        let cpu = CpuConfig::default();
        assert_eq!(cpu.copy_ns(4096), 3_413, "4 KiB at 1.2 GB/s");
        assert_eq!(cpu.copy_ns(0), 0);
        assert_eq!(CpuConfig::desktop().copy_ns(3_700), 1_000);
        assert_eq!(CpuConfig::zero_cost().copy_ns(1 << 30), 0);
        assert!(CpuConfig {
            cores: 0,
            ..cpu.clone()
        }
        .validate()
        .is_err());
        assert!(CpuConfig {
            copy_bandwidth: 0,
            ..cpu
        }
        .validate()
        .is_err());
    }

    #[test]
    fn an_unusual_tick_rate_is_an_input_error() {
        assert!(KernelConfig::default().validate().is_ok());
        let bad = KernelConfig {
            hz: Hz(0),
            ..Default::default()
        };
        assert!(bad.validate().unwrap_err().contains("`hz` 0"));
    }

    #[test]
    fn kernel_versions_parse_by_name_default_to_3_10_and_order_by_release() {
        assert_eq!(KernelConfig::default().version, KernelVersion::V3_10);
        for version in KernelVersion::ALL {
            let table: KernelConfig =
                toml::from_str(&format!("version = \"{}\"", version.name())).unwrap();
            assert_eq!(table.version, version);
        }
        assert!(KernelVersion::ALL.windows(2).all(|w| w[0] < w[1]));
        let err = toml::from_str::<KernelConfig>("version = \"5.4\"").unwrap_err();
        assert!(err.to_string().contains("6.6"), "{err}");
        assert!(!KernelVersion::V3_10.has_force_commit_optimization());
        assert!(KernelVersion::V4_4.has_force_commit_optimization());
    }
}
