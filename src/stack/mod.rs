//! The simulated stack of one run, assembled from a variant's [`StackConfig`]: the layers the
//! apps' system calls go through. Today: the block layer over a device model (built when an app
//! needs it), the VFS and page cache over it (built by [`Stack::new_with_storage`] when an app
//! does file I/O), and the toy server and lock table of the foundation.

pub mod bench;
pub mod toy;

use crate::block::build_queue;
use crate::block::layer::BlockLayer;
use crate::block::queue::RequestQueue;
use crate::scenario::StackConfig;
use crate::sim::sync::Mutex;
use crate::sim::{Sim, WaitReason};
use crate::task::{ForegroundState, TaskTable};
use crate::units::SECTOR_SIZE;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

/// The first request id of an external journal device's queue (the file system's device numbers
/// its requests from 1): ids stay unique in the run, and the journal device's 57th request
/// reads as R#1000000000057 in an explanation.
pub const JOURNAL_DEVICE_FIRST_REQUEST: crate::block::request::RequestId = 1_000_000_000_001;

/// The block layer and the device under it.
pub struct BlockStack {
    pub layer: BlockLayer,
    /// Bio ids are unique across the stack.
    pub next_bio: Rc<Cell<u64>>,
    pub capacity_bytes: u64,
}

pub struct Stack {
    pub activity: Rc<ForegroundState>,
    /// Every process's nice value and I/O priority (the block layer reads it).
    pub tasks: Rc<TaskTable>,
    pub toy_server: Rc<toy::ToyServer>,
    /// Present when some app issues block I/O.
    pub block: Option<BlockStack>,
    /// An external journal's device and its own request queue (`[stack.fs] journal =
    /// "external"`), with its name (`mmcblk1`).
    pub journal_block: Option<(BlockStack, String)>,
    /// The VFS and page cache (over `block`), present when some app does file I/O.
    pub vfs: Option<Rc<crate::fs::vfs::Vfs>>,
    named_locks: RefCell<BTreeMap<String, Mutex>>,
    /// State user-space libraries share between the apps of a run (SQLite's lock table and
    /// shared memory), by library name; the stack does not know its type.
    userspace: RefCell<BTreeMap<&'static str, Rc<dyn std::any::Any>>>,
    next_pid: Cell<u32>,
}

/// First pid handed to app processes (below it: init, kernel threads and system daemons).
pub const FIRST_APP_PID: u32 = 1000;

impl Stack {
    /// Builds the stack and starts its daemons. `with_block` builds the device and block layer
    /// (costly for large devices, so only when an app needs them).
    pub fn new(
        sim: &Sim,
        config: &StackConfig,
        activity: Rc<ForegroundState>,
        with_block: bool,
    ) -> Result<Rc<Stack>, String> {
        let toy_server = toy::ToyServer::start(sim, config.toy.clone(), activity.clone());
        let tasks = Rc::new(TaskTable::new());
        tasks.configure_cgroups(config.io_policy, &config.cgroup, Some(activity.clone()))?;
        let block = if with_block {
            let device = crate::dev::build_device(&config.device, sim.seed())?;
            let capacity_bytes = device.capacity_sectors() * SECTOR_SIZE;
            let mut queue = RequestQueue::from_config(device, &config.block, &config.kernel)?;
            queue.set_task_table(tasks.clone());
            queue.set_qasio(config.qasio.clone());
            queue.set_fasttrack(config.fasttrack);
            Some(BlockStack {
                layer: BlockLayer::new(sim, queue),
                next_bio: Rc::new(Cell::new(1)),
                capacity_bytes,
            })
        } else {
            None
        };
        Ok(Rc::new(Stack {
            activity,
            tasks,
            toy_server,
            block,
            journal_block: None,
            vfs: None,
            named_locks: RefCell::new(BTreeMap::new()),
            userspace: RefCell::new(BTreeMap::new()),
            next_pid: Cell::new(FIRST_APP_PID),
        }))
    }

    /// Like [`Stack::new`] with the block layer, plus the storage layers above it: the page
    /// cache configured by `vm` (starting the flusher and kswapd), a
    /// [`SimpleFs`](crate::fs::simplefs::SimpleFs) of `fs_size` bytes (default: the whole
    /// device) and the VFS. The page cache submits through the same `BlockLayer` and bio-id
    /// counter as block workloads (fio), so both can run in one scenario.
    pub fn new_with_storage(
        sim: &Sim,
        config: &StackConfig,
        activity: Rc<ForegroundState>,
        vm: crate::mm::VmConfig,
        fs_size: Option<u64>,
    ) -> Result<Rc<Stack>, String> {
        vm.validate()?;
        let toy_server = toy::ToyServer::start(sim, config.toy.clone(), activity.clone());
        let tasks = Rc::new(TaskTable::new());
        tasks.configure_cgroups(config.io_policy, &config.cgroup, Some(activity.clone()))?;
        let device = crate::dev::build_device(&config.device, sim.seed())?;
        let capacity_bytes = device.capacity_sectors() * SECTOR_SIZE;
        let mut queue = RequestQueue::from_config(device, &config.block, &config.kernel)?;
        queue.set_task_table(tasks.clone());
        queue.set_qasio(config.qasio.clone());
        queue.set_fasttrack(config.fasttrack);
        let block = BlockStack {
            layer: BlockLayer::new(sim, queue),
            next_bio: Rc::new(Cell::new(1)),
            capacity_bytes,
        };
        let fs_size = fs_size.unwrap_or(capacity_bytes).min(capacity_bytes);
        let bdev = crate::mm::bio::QueueSubmit::new(block.layer.clone(), block.next_bio.clone());
        // An external journal: a second device with a request queue and elevator of its own,
        // counting into the file system's account (its bios keep their causes).
        let journal_block = match (&config.fs.journal_device, config.fs.journal) {
            (Some(device_config), crate::fs::ext4::JournalLocation::External)
                if config.fs.kind == crate::fs::ext4::FsKind::Ext4 =>
            {
                let device = crate::dev::build_device(device_config, sim.seed())
                    .map_err(|e| format!("[stack.fs.journal_device]: {e}"))?;
                let fs_numbers = block.layer.with_queue(|q| q.device().device_numbers());
                let (major, minor) = second_device_numbers(fs_numbers, device.device_numbers());
                let capacity_bytes = device.capacity_sectors() * SECTOR_SIZE;
                let mut queue = RequestQueue::from_config(device, &config.block, &config.kernel)?;
                queue.number_requests_from(JOURNAL_DEVICE_FIRST_REQUEST);
                queue.set_task_table(tasks.clone());
                queue.set_qasio(config.qasio.clone());
                queue.set_fasttrack(config.fasttrack);
                if config.block.blktrace {
                    queue.enable_trace(crate::block::blktrace::BlkTrace::new(
                        major,
                        minor,
                        crate::block::blktrace::DEFAULT_CAPACITY,
                    ));
                }
                let name = device_name(major, minor);
                Some((
                    BlockStack {
                        layer: BlockLayer::with_device_numbers(sim, queue, (major, minor)),
                        next_bio: block.next_bio.clone(),
                        capacity_bytes,
                    },
                    name,
                ))
            }
            _ => None,
        };
        let journal_device = journal_block.as_ref().map(|(journal, name)| {
            let account =
                crate::mm::BlockSubmit::io_account(&*bdev).expect("a queue keeps an account");
            let submit: Rc<dyn crate::mm::BlockSubmit> = crate::mm::bio::QueueSubmit::with_account(
                journal.layer.clone(),
                journal.next_bio.clone(),
                account,
                Some(name),
            );
            (submit, journal.capacity_bytes)
        });
        // FastTrack §4.3: the page reclaimer replaces the kernel's victim order.
        let mut vm = vm;
        if config.fasttrack.pr {
            vm.reclaim_policy = crate::mm::ReclaimPolicyKind::Fasttrack;
        }
        let vfs = storage_over(
            sim,
            vm,
            &config.kernel,
            config.cpu.clone(),
            &config.fs,
            bdev,
            journal_device,
            fs_size,
            Some(activity.clone()),
        )?;
        vfs.mm.fasttrack_pa.set(config.fasttrack.pa);
        vfs.mm
            .owner_is_last_toucher
            .set(config.fasttrack.page_owner == crate::fasttrack::PageOwner::Last);
        if config.mobifs.enabled {
            let touches = match &config.user {
                Some(user) => user_touches(user, sim.seed())?,
                None => Vec::new(),
            };
            vfs.mount_mobifs(sim, config.mobifs.clone(), touches)?;
        }
        if config.fs.kind == crate::fs::ext4::FsKind::Ext4 {
            // The journal thread's I/O priority: the mount's journal_ioprio (best effort).
            tasks.ioprio_set(
                crate::fs::jbd2::JBD2_PID,
                crate::task::IoPrio::new(crate::task::IoPrioClass::Be, config.fs.journal_ioprio),
            );
        }
        Ok(Rc::new(Stack {
            activity,
            tasks,
            toy_server,
            block: Some(block),
            journal_block,
            vfs: Some(vfs),
            named_locks: RefCell::new(BTreeMap::new()),
            userspace: RefCell::new(BTreeMap::new()),
            next_pid: Cell::new(FIRST_APP_PID),
        }))
    }

    /// Builds a stack around an existing VFS (tests and examples that assemble the storage
    /// layers themselves with [`storage`]).
    pub fn with_vfs(
        sim: &Sim,
        config: &StackConfig,
        activity: Rc<ForegroundState>,
        vfs: Rc<crate::fs::vfs::Vfs>,
    ) -> Rc<Stack> {
        let toy_server = toy::ToyServer::start(sim, config.toy.clone(), activity.clone());
        Rc::new(Stack {
            activity,
            tasks: Rc::new(TaskTable::new()),
            toy_server,
            block: None,
            journal_block: None,
            vfs: Some(vfs),
            named_locks: RefCell::new(BTreeMap::new()),
            userspace: RefCell::new(BTreeMap::new()),
            next_pid: Cell::new(FIRST_APP_PID),
        })
    }

    /// The run's shared state of user-space library `name`, created on first use.
    pub fn userspace<T: Default + 'static>(&self, name: &'static str) -> Rc<T> {
        let mut slots = self.userspace.borrow_mut();
        let slot = slots
            .entry(name)
            .or_insert_with(|| Rc::new(T::default()) as Rc<dyn std::any::Any>);
        slot.clone()
            .downcast::<T>()
            .unwrap_or_else(|_| panic!("user-space state `{name}` used with two types"))
    }

    /// A fresh process id.
    pub fn alloc_pid(&self) -> u32 {
        let pid = self.next_pid.get();
        self.next_pid.set(pid + 1);
        pid
    }

    /// The toy lock called `name`, created on first use.
    pub fn named_lock(&self, sim: &Sim, name: &str) -> Mutex {
        self.named_locks
            .borrow_mut()
            .entry(name.to_string())
            .or_insert_with(|| Mutex::new(sim, name, WaitReason::Mutex))
            .clone()
    }

    /// Counters of the stack's layers, for the results.
    pub fn counters(&self) -> BTreeMap<String, u64> {
        let mut counters = BTreeMap::new();
        counters.insert("toy.served".to_string(), self.toy_server.served());
        if let Some(block) = &self.block {
            let stats = block.layer.with_queue(|queue| queue.stats());
            insert_queue_counters(&mut counters, "block", &stats);
            let qasio = block.layer.with_queue(|queue| queue.qasio_stats());
            for dependency in crate::block::qasio::Dependency::ALL {
                let slot = dependency as usize;
                let name = dependency.name();
                counters.insert(format!("qasio.{name}.detected"), qasio.detected[slot]);
                counters.insert(format!("qasio.{name}.boosted"), qasio.boosted[slot]);
            }
            let (fasttrack, dispatched) = block
                .layer
                .with_queue(|queue| (queue.fasttrack(), queue.fasttrack_dispatched()));
            if fasttrack.enabled() {
                counters.insert("fasttrack.id_dispatched".into(), dispatched);
                if let Some(vfs) = &self.vfs {
                    counters.insert("fasttrack.pa_yields".into(), vfs.mm.stats().pa_yields);
                }
            }
        }
        if let Some(vfs) = &self.vfs {
            let mm = vfs.mm.stats();
            for (name, value) in [
                ("pages_dirtied", mm.pages_dirtied),
                ("pages_written_async", mm.pages_written_async),
                ("pages_written_sync", mm.pages_written_sync),
                ("file_pages_written", mm.file_pages_written),
                ("pages_read", mm.pages_read),
                ("reclaimed_clean", mm.reclaimed_clean),
                ("reclaimed_dirty", mm.reclaimed_dirty),
                ("direct_reclaims", mm.direct_reclaims),
                ("pageout_direct", mm.pageout_direct),
                ("pageout_kswapd", mm.pageout_kswapd),
                ("direct_reclaim_dirty_kept", mm.direct_reclaim_dirty_kept),
                ("throttle_pauses", mm.throttle_pauses),
                ("throttle_ns", mm.throttle_ns),
                ("write_stable_waits", mm.write_stable_waits),
                ("max_dirty_writeback_pages", mm.max_dirty_writeback),
            ] {
                counters.insert(format!("mm.{name}"), value);
            }
            let vfs_stats = vfs.stats();
            counters.insert("vfs.syscalls".into(), vfs_stats.syscalls);
            counters.insert("vfs.errors".into(), vfs_stats.errors);
            counters.extend(vfs.fs_counters());
        }
        self.journal_device_counters(&mut counters);
        counters
    }

    /// Per-device counters of an external journal's request queue (`journal_device.block.*`,
    /// the same names as the file system's device's `block.*`).
    fn journal_device_counters(&self, counters: &mut BTreeMap<String, u64>) {
        let Some((journal, _)) = &self.journal_block else {
            return;
        };
        let stats = journal.layer.with_queue(|queue| queue.stats());
        insert_queue_counters(counters, "journal_device.block", &stats);
    }

    /// The block I/O account by purpose of the page cache's and file system's bios.
    pub fn io_account_rows(&self) -> Vec<crate::mm::bio::IoAccountRow> {
        self.vfs
            .as_ref()
            .and_then(|vfs| vfs.mm.bdev.io_account())
            .map_or_else(Vec::new, |account| account.rows())
    }

    /// The block layer's trace, when the configuration asked for one.
    pub fn blktrace(&self) -> Option<crate::block::blktrace::BlkTrace> {
        let block = self.block.as_ref()?;
        let trace = block.layer.with_queue(|queue| queue.trace().cloned())?;
        // An external journal's device: its events beside the file system's device's, each
        // with its own device numbers.
        let journal = self
            .journal_block
            .as_ref()
            .and_then(|(journal, _)| journal.layer.with_queue(|queue| queue.trace().cloned()));
        Some(match journal {
            Some(journal) => trace.merge(&journal),
            None => trace,
        })
    }

    /// The device model's own statistics (NAND, GC, cache), or null without a device.
    /// The storage device's energy over `[0, run_ns)` ([`crate::dev::energy`], the profile of
    /// the device's kind), as counters in microjoules (`energy.*_uj`) and wake-ups; empty
    /// without a block layer.
    pub fn energy_counters(&self, run_ns: crate::units::Nanos) -> BTreeMap<String, u64> {
        let mut counters = BTreeMap::new();
        let Some(block) = &self.block else {
            return counters;
        };
        let name = block
            .layer
            .with_queue(|queue| queue.device().name().to_string());
        let stats = self.device_stats();
        let field = |key: &str| stats.get(key).and_then(|v| v.as_u64()).unwrap_or(0);
        let busy = block.layer.busy_intervals();
        let inputs = crate::dev::energy::EnergyInputs {
            busy: &busy,
            bytes_read: field("read_bytes"),
            bytes_written: field("write_bytes"),
            flushes: field("flushes"),
            run_ns,
        };
        let config = crate::dev::energy::EnergyConfig::for_device(&name);
        let Ok(e) = config.energy(&inputs) else {
            return counters;
        };
        counters.insert(
            "energy.standby_uw".into(),
            (config.idle_power_mw * 1e3).round() as u64,
        );
        let uj = |joules: f64| (joules * 1e6).round() as u64;
        for (key, joules) in [
            ("total_uj", e.total_j),
            ("active_uj", e.active_j),
            ("tail_uj", e.tail_j),
            ("idle_uj", e.idle_j),
            ("wakeup_uj", e.wakeup_j),
            ("write_uj", e.write_j),
            ("read_uj", e.read_j),
            ("flush_uj", e.flush_j),
        ] {
            counters.insert(format!("energy.{key}"), uj(joules));
        }
        counters.insert("energy.wakeups".into(), e.wakeups);
        counters
    }

    /// Starts recording for crash-point checking ([`crate::crashcheck`]): the device's
    /// writes and flushes, the versions of the files under test (keeping at most `budget`
    /// bytes of them) and what each journal transaction leaves of them.
    pub fn record_crash(&self, budget: u64) -> Result<Rc<crate::mm::crashlog::CrashLog>, String> {
        let (Some(block), Some(vfs)) = (&self.block, &self.vfs) else {
            return Err("crash-point checking needs a scenario with file I/O".into());
        };
        let log = crate::mm::crashlog::CrashLog::new(budget);
        vfs.record_crash(log.clone())?;
        let volatile = block.layer.with_queue(|q| q.device().write_cache());
        block.layer.record_commands(volatile);
        Ok(log)
    }

    /// The device's recorded writes and flushes (recording stops).
    pub fn take_crash_history(&self) -> Option<crate::dev::crash::WriteHistory> {
        self.block.as_ref().and_then(|b| b.layer.take_commands())
    }

    pub fn device_stats(&self) -> serde_json::Value {
        match &self.block {
            Some(block) => block.layer.with_queue(|queue| queue.device().stats_json()),
            None => serde_json::Value::Null,
        }
    }
}

/// How long the user model's touches are drawn for: the run's first day.
pub const TOUCH_HORIZON: crate::units::Nanos = 24 * 3600 * crate::units::NS_PER_SEC;

/// The touches of the phone's user over [`TOUCH_HORIZON`] (its own stream of the run's seed),
/// drags merged as MobiFS's interaction logger does (§6: events under 0.01 ms apart).
fn user_touches(
    user: &crate::app::user::UserModelConfig,
    seed: u64,
) -> Result<Vec<crate::units::Nanos>, String> {
    let mut rng = crate::sim::rng::Rng::named(seed, "user");
    crate::fs::mobifs::predict::merge_touches(
        &user.touches(&mut rng, TOUCH_HORIZON),
        crate::fs::mobifs::predict::DRAG_MERGE_NS,
    )
}

/// Device numbers for a second device beside one numbered `first`: its own kind's numbers,
/// moved to the next disk when the kind is the same (`mmcblk1` is 179,8 with the mmc block
/// driver's default `CONFIG_MMC_BLOCK_MINORS` = 8; `sdb` is 8,16: `SD_MINORS` = 16 in
/// drivers/scsi/sd.c).
pub fn second_device_numbers(first: (u32, u32), second: (u32, u32)) -> (u32, u32) {
    if first.0 != second.0 {
        return second;
    }
    let minors_per_disk = if second.0 == 179 { 8 } else { 16 };
    (second.0, first.1 + minors_per_disk)
}

/// The kernel's name of the disk numbered `(major, minor)`: `mmcblk<n>` for 179 (mmc), else
/// `sd<letter>` (8: SCSI disks, UFS's).
pub fn device_name(major: u32, minor: u32) -> String {
    if major == 179 {
        format!("mmcblk{}", minor / 8)
    } else {
        let letter = (b'a' + (minor / 16).min(25) as u8) as char;
        format!("sd{letter}")
    }
}

/// The storage layers under the VFS over `device` (tests and examples): a
/// [`SimpleFs`](crate::fs::simplefs::SimpleFs) of `fs_size` bytes, the page cache with the CPU
/// costs of `cpu` and the default tick rate ([`crate::kernel::KernelConfig`]), and the block
/// layer's request queue with `elevator` (`noop`, `deadline`, `cfq`, `mq-deadline`) and its
/// kernel-default request allocation. Errors name a bad elevator, VM or CPU configuration.
#[allow(clippy::too_many_arguments)]
pub fn storage(
    sim: &Sim,
    vm: crate::mm::VmConfig,
    cpu: crate::kernel::CpuConfig,
    device: Box<dyn crate::dev::BlockDevice>,
    elevator: &str,
    fs_size: u64,
    activity: Option<Rc<ForegroundState>>,
) -> Result<Rc<crate::fs::vfs::Vfs>, String> {
    let hz = crate::kernel::KernelConfig::default().hz;
    storage_with_hz(sim, vm, hz, cpu, device, elevator, fs_size, activity)
}

/// Like [`storage_with_hz`] with the file system `fs` (`[stack.fs]`: ext4 or simplefs).
#[allow(clippy::too_many_arguments)]
pub fn storage_with_fs(
    sim: &Sim,
    vm: crate::mm::VmConfig,
    hz: crate::kernel::Hz,
    cpu: crate::kernel::CpuConfig,
    fs: &crate::fs::ext4::Ext4Config,
    device: Box<dyn crate::dev::BlockDevice>,
    elevator: &str,
    fs_size: u64,
) -> Result<Rc<crate::fs::vfs::Vfs>, String> {
    vm.validate()?;
    let queue = build_queue(device, elevator, false)?;
    let layer = BlockLayer::new(sim, queue);
    storage_with_fs_on_layer(sim, vm, hz, cpu, fs, layer, fs_size)
}

/// Like [`storage_with_fs`] over an existing block layer (a test that reads its trace).
pub fn storage_with_fs_on_layer(
    sim: &Sim,
    vm: crate::mm::VmConfig,
    hz: crate::kernel::Hz,
    cpu: crate::kernel::CpuConfig,
    fs: &crate::fs::ext4::Ext4Config,
    layer: BlockLayer,
    fs_size: u64,
) -> Result<Rc<crate::fs::vfs::Vfs>, String> {
    storage_with_kernel_on_layer(sim, vm, &kernel_with_hz(hz), cpu, fs, layer, fs_size)
}

/// Like [`storage_with_fs_on_layer`] with a whole kernel build (`[stack.kernel]`: its version
/// and tick rate).
pub fn storage_with_kernel_on_layer(
    sim: &Sim,
    vm: crate::mm::VmConfig,
    kernel: &crate::kernel::KernelConfig,
    cpu: crate::kernel::CpuConfig,
    fs: &crate::fs::ext4::Ext4Config,
    layer: BlockLayer,
    fs_size: u64,
) -> Result<Rc<crate::fs::vfs::Vfs>, String> {
    vm.validate()?;
    let bdev = crate::mm::bio::QueueSubmit::new(layer, Rc::new(Cell::new(1)));
    storage_over(sim, vm, kernel, cpu, fs, bdev, None, fs_size, None)
}

/// Like [`storage`] with the kernel's tick rate `hz`.
#[allow(clippy::too_many_arguments)]
pub fn storage_with_hz(
    sim: &Sim,
    vm: crate::mm::VmConfig,
    hz: crate::kernel::Hz,
    cpu: crate::kernel::CpuConfig,
    device: Box<dyn crate::dev::BlockDevice>,
    elevator: &str,
    fs_size: u64,
    activity: Option<Rc<ForegroundState>>,
) -> Result<Rc<crate::fs::vfs::Vfs>, String> {
    vm.validate()?;
    let queue = build_queue(device, elevator, false)?;
    let layer = BlockLayer::new(sim, queue);
    let bdev = crate::mm::bio::QueueSubmit::new(layer, Rc::new(Cell::new(1)));
    let fs = crate::fs::ext4::Ext4Config::simplefs();
    storage_over(
        sim,
        vm,
        &kernel_with_hz(hz),
        cpu,
        &fs,
        bdev,
        None,
        fs_size,
        activity,
    )
}

/// The storage layers under the VFS over an existing block layer (`mobistack fio`'s buffered
/// jobs): a [`SimpleFs`](crate::fs::simplefs::SimpleFs) of `fs_size` bytes and the page cache
/// configured by `vm` with the default CPU costs and tick rate, submitting through `layer` with bio ids from
/// `next_bio`.
pub fn storage_on_layer(
    sim: &Sim,
    vm: crate::mm::VmConfig,
    layer: &BlockLayer,
    next_bio: Rc<Cell<u64>>,
    fs_size: u64,
) -> Result<Rc<crate::fs::vfs::Vfs>, String> {
    vm.validate()?;
    let bdev = crate::mm::bio::QueueSubmit::new(layer.clone(), next_bio);
    let cpu = crate::kernel::CpuConfig::default();
    let hz = crate::kernel::KernelConfig::default().hz;
    let fs = crate::fs::ext4::Ext4Config::simplefs();
    storage_over(
        sim,
        vm,
        &kernel_with_hz(hz),
        cpu,
        &fs,
        bdev,
        None,
        fs_size,
        None,
    )
}

/// The default kernel build at tick rate `hz` (the helpers that take only `hz`).
fn kernel_with_hz(hz: crate::kernel::Hz) -> crate::kernel::KernelConfig {
    crate::kernel::KernelConfig {
        hz,
        ..Default::default()
    }
}

/// The file system (`fs`: ext4 or simplefs), page cache and VFS over a block path.
#[allow(clippy::too_many_arguments)]
fn storage_over(
    sim: &Sim,
    vm: crate::mm::VmConfig,
    kernel: &crate::kernel::KernelConfig,
    cpu: crate::kernel::CpuConfig,
    fs: &crate::fs::ext4::Ext4Config,
    bdev: Rc<dyn crate::mm::BlockSubmit>,
    journal_device: Option<(Rc<dyn crate::mm::BlockSubmit>, u64)>,
    fs_size: u64,
    activity: Option<Rc<ForegroundState>>,
) -> Result<Rc<crate::fs::vfs::Vfs>, String> {
    if fs_size < crate::fs::simplefs::MIN_FS_BYTES {
        return Err(format!(
            "file system of {fs_size} bytes is too small (at least {} bytes)",
            crate::fs::simplefs::MIN_FS_BYTES
        ));
    }
    cpu.validate()?;
    let hz = kernel.hz;
    let cached = vm.cached;
    let cores = Rc::new(crate::sim::cpu::Cpu::new(cpu.cores));
    let start_mm = |mapping: Rc<RefCell<dyn crate::mm::AddressSpaceOps>>| {
        crate::mm::Mm::start(
            sim,
            vm,
            hz,
            mapping,
            bdev.clone(),
            activity.clone(),
            cores,
            cpu,
        )
    };
    let vfs = match fs.kind {
        crate::fs::ext4::FsKind::Simplefs => {
            // One inode per 16 KiB of disk (mke2fs's default bytes-per-inode ratio), at least 64.
            let simple = Rc::new(RefCell::new(crate::fs::simplefs::SimpleFs::new(
                fs_size,
                (fs_size / 16384).max(64),
            )));
            let mm = start_mm(simple.clone());
            let ops = crate::fs::simplefs::SimpleFsOps::mount(simple, mm.clone());
            crate::fs::vfs::Vfs::new(sim, mm, ops, activity)
        }
        crate::fs::ext4::FsKind::F2fs => {
            fs.validate()?;
            let (mm, ops) =
                crate::fs::f2fs::mount(sim, fs.f2fs_config()?, fs_size, bdev.clone(), start_mm)?;
            crate::fs::vfs::Vfs::new(sim, mm, ops, activity)
        }
        crate::fs::ext4::FsKind::Ext4 => {
            let (mm, ops) = crate::fs::ext4::glue::mount(
                sim,
                fs.clone(),
                fs_size,
                hz,
                bdev.clone(),
                journal_device,
                start_mm,
            )?;
            ops.ext4.set_kernel_version(kernel.version);
            crate::fs::vfs::Vfs::new(sim, mm, ops, activity)
        }
    };
    vfs.mm.set_kernel_version(kernel.version);
    if cached > 0 {
        vfs.prefill_cached(sim, cached)
            .map_err(|errno| format!("vm `cached`: the file of cached pages: {errno:?}"))?;
    }
    Ok(vfs)
}

/// A request queue's counters as `<prefix>.<name>`.
fn insert_queue_counters(
    counters: &mut BTreeMap<String, u64>,
    prefix: &str,
    stats: &crate::block::queue::QueueStats,
) {
    for (name, value) in [
        ("bios", stats.bios),
        ("bio_sectors", stats.bio_sectors),
        ("plug_merges", stats.plug_merges),
        ("back_merges", stats.back_merges),
        ("front_merges", stats.front_merges),
        ("requests", stats.requests),
        ("dispatched", stats.dispatched),
        ("completed", stats.completed),
        ("get_request_sleeps", stats.alloc_sleeps),
        ("plug_flushes", stats.plug_flushes),
        ("wbt_sleeps", stats.wbt_sleeps),
    ] {
        counters.insert(format!("{prefix}.{name}"), value);
    }
}
