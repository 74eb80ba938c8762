//! MobiFS (seed 004, ATC'15): memory-centric storage at the system-call layer, over ext4.
//!
//! A covered app's writes go into the page cache and its per-app [`log::WriteLog`] instead of
//! dirtying pages: the pages stay pinned and clean, so neither the flusher's periodic
//! writeback nor `fsync` writes them — `fsync` returns at once (§4: asynchronous fsync). The
//! log groups writes into Versioned Cache Transactions; [`tpl::Tpl`] closes the open VCT at the
//! peak of its e curve (§5.2); the checkpointer (a kernel thread, `mobifs-ckpt`) makes closed
//! VCTs durable and atomic through ext4's journal ([`AtomicStore`], §4.3, implemented by
//! [`crate::fs::ext4::vct`]) when the policy says so, and unpins their pages.
//!
//! - this file: [`MobiFsConfig`] (`[stack.mobifs]`), [`MobiFs`] (the hooks the VFS calls, the
//!   policy engine, the checkpointer thread);
//! - [`log`]: the write log, the page reverse-mapping and VCTs (§4.1-§4.2);
//! - [`tpl`]: tradeoff-point location (§5.2);
//! - [`predict`]: idle-interval prediction (§5.3: the four-state machine, LMM, LAM) and the
//!   evaluator of responsiveness conflicts;
//! - [`sched`]: the VCT scheduler (§5.4: three queues, four rules);
//! - [`idle`]: the `idle` policy that puts them together: checkpoints in predicted idle
//!   intervals of the user's touches, VCTs chosen by the scheduler.
//!
//! What is modelled where the paper is silent, and simplifications:
//! - Coverage is by app (`apps`, or every app): a process whose `comm` is a covered app's name
//!   writes through its app's log, whatever file it writes (§4.1: a log covers the app's
//!   directories; apps here write only their own files).
//! - Only file data is logged. Namespace operations (create, unlink, rename) and truncation go
//!   to ext4 at once and reach flash with its next commit; truncation and unlink drop the
//!   file's pages from the log. So the VCTs of a file are points in time of its *data*; a
//!   rename or unlink may reach flash before data written earlier (a question the paper does
//!   not discuss; `crashcheck` is where it would show).
//! - A covered write skips `file_update_time`: the inode (size, times) is journaled with the
//!   VCT that carries the data.
//! - `sync(2)` from a covered app closes every log's open VCT and waits until all are
//!   committed.
//! - Copies made by copy-on-write are counted against the memory limit, not allocated from
//!   the page cache.

pub mod idle;
pub mod log;
pub mod predict;
pub mod sched;
pub mod tpl;

use crate::errno::Errno;
use crate::mm::{FsToken, Ino, Issuer, Mm};
use crate::sim::sync::WaitQueue;
use crate::sim::{Blocker, Sim, TaskId, WaitReason};
use crate::units::{serde_units, Nanos, NS_PER_SEC, PAGE_SIZE};
use log::{WriteCase, WriteLog};
use serde::{Deserialize, Serialize};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use tpl::{CloseReason, Tpl, TplConfig};

/// How often the policy engine's timer looks at the logs. asm: 1 s (the paper gives none;
/// TPL's time cap is minutes, so a second is fine-grained enough).
pub const POLICY_TICK: Nanos = NS_PER_SEC;

/// The checkpointer's kernel thread: pid and name.
pub const MOBIFS_PID: u32 = 104;
pub const MOBIFS_COMM: &str = "mobifs-ckpt";

/// What MobiFS's checkpointer needs from the flash store under it (§4.3): the four calls.
/// The store guarantees that the pages appended between `begin` and `end` become durable
/// atomically.
pub trait AtomicStore {
    /// `BEGIN TRANSACTION` for `pages` pages of `inodes` files.
    fn begin<'a>(
        &'a self,
        sim: &'a Sim,
        pages: u64,
        inodes: u64,
    ) -> crate::fs::LocalBoxFuture<'a, Result<FsToken, Errno>>;
    /// `APPEND ENTRY`: page `index` of `ino`.
    fn append<'a>(
        &'a self,
        sim: &'a Sim,
        token: FsToken,
        issuer: Issuer,
        ino: Ino,
        index: u64,
    ) -> crate::fs::LocalBoxFuture<'a, FsToken>;
    /// The file's size as the transaction leaves it.
    fn set_size<'a>(
        &'a self,
        sim: &'a Sim,
        token: FsToken,
        ino: Ino,
        size: u64,
    ) -> crate::fs::LocalBoxFuture<'a, FsToken>;
    /// `END TRANSACTION`: returns the store's transaction id.
    fn end<'a>(&'a self, sim: &'a Sim, token: FsToken) -> crate::fs::LocalBoxFuture<'a, u64>;
    /// `WAIT SYNC`: waits until transaction `tid` is durable.
    fn wait_sync<'a>(
        &'a self,
        sim: &'a Sim,
        issuer: Issuer,
        tid: u64,
    ) -> crate::fs::LocalBoxFuture<'a, ()>;
    /// The largest transaction, in pages over `inodes` files.
    fn max_pages(&self, inodes: u64) -> u64;
}

/// When the checkpointer runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckpointPolicy {
    /// As soon as a VCT closes (§7.3's "immediate checkpointing without considering user
    /// interactions").
    #[default]
    Immediate,
    /// Every `interval`: the open VCTs close and everything is checkpointed (a fixed-period
    /// baseline, like ext4's 5 s commit).
    Interval,
    /// In the idle intervals predicted from the user's touches, VCTs chosen by the scheduler
    /// (§5.3-§5.4; [`idle`]). Needs a user (`[stack.user]`).
    Idle,
}

/// `[stack.mobifs]`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct MobiFsConfig {
    /// Whether MobiFS is mounted over the file system (ext4 only).
    #[serde(default)]
    pub enabled: bool,
    /// The apps it covers, by name; empty: every app (§1: apps vulnerable to local data loss
    /// can be left on a regular partition).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub apps: Vec<String>,
    /// Memory the logs may pin (pages plus copies); beyond it MobiFS checkpoints to release
    /// memory and writers wait (§6.1). Default 100 MiB (§7.2: "having an extra 100 MB memory,
    /// MobiFS can support an app running 17.4 minutes without flushing in the worst case").
    #[serde(default = "default_memory_limit", with = "serde_units::size")]
    pub memory_limit: u64,
    /// When the checkpointer runs.
    #[serde(default)]
    pub policy: CheckpointPolicy,
    /// The period of the `interval` policy. Default 5 s (ext4's commit interval, the baseline
    /// §7.3 compares with).
    #[serde(default = "default_interval", with = "serde_units::duration")]
    pub interval: Nanos,
    /// Tradeoff-point location (`[stack.mobifs.tpl]`).
    #[serde(default)]
    pub tpl: TplConfig,
    /// The `idle` policy's predictor: `fsm` (§5.3's state machine), `lmm` or `lam`.
    #[serde(default)]
    pub predictor: idle::PredictorKind,
    /// The state machine's parameters (`[stack.mobifs.fsm]`; `k` is also LMM's and LAM's
    /// history).
    #[serde(default)]
    pub fsm: predict::StateMachineConfig,
    /// Log truncates in the VCTs (this model's fix for what `mobistack crashcheck` finds, not
    /// the paper's design): a covered file's truncate becomes part of the open VCT and reaches
    /// ext4 with its checkpoint, and closed VCTs keep the pages they closed with. Default off:
    /// the paper's MobiFS logs writes only, and a truncate reaches ext4 at once.
    #[serde(default)]
    pub log_truncate: bool,
}

fn default_memory_limit() -> u64 {
    100 << 20
}
fn default_interval() -> Nanos {
    5 * NS_PER_SEC
}

impl Default for MobiFsConfig {
    fn default() -> Self {
        MobiFsConfig {
            enabled: false,
            apps: Vec::new(),
            memory_limit: default_memory_limit(),
            policy: CheckpointPolicy::default(),
            interval: default_interval(),
            tpl: TplConfig::default(),
            predictor: idle::PredictorKind::default(),
            fsm: predict::StateMachineConfig::default(),
            log_truncate: false,
        }
    }
}

impl MobiFsConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.memory_limit < 64 * PAGE_SIZE {
            return Err(format!(
                "`memory-limit` {} bytes is below 64 pages (256 KiB)",
                self.memory_limit
            ));
        }
        if self.interval == 0 {
            return Err("`interval` must be longer than zero".into());
        }
        self.fsm.validate().map_err(|e| format!("`fsm`: {e}"))?;
        self.tpl.validate()
    }
}

/// MobiFS's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MobiFsStats {
    /// fsync/fdatasync calls answered from memory.
    pub async_fsyncs: u64,
    /// VCTs closed, by reason.
    pub closed_peak: u64,
    pub closed_staleness: u64,
    pub closed_time: u64,
    pub closed_size: u64,
    pub closed_memory: u64,
    pub closed_sync: u64,
    pub closed_interval: u64,
    /// Checkpoints (VCTs made durable) and the pages and time they took.
    pub checkpoints: u64,
    pub checkpoint_pages: u64,
    pub checkpoint_ns: Nanos,
    /// Pages skipped at checkpoint because their file lost them (truncate, unlink).
    pub skipped_pages: u64,
    /// Writers that waited for memory, and for how long in all.
    pub throttled: u64,
    pub throttled_ns: Nanos,
    /// Most pages pinned at once over every log.
    pub peak_pinned_pages: u64,
}

/// The VFS's answer to "does page `index` still belong to file `ino`?".
pub type PageAlive = Box<dyn Fn(Ino, u64) -> bool>;

/// One covered app: its log and its e curve.
struct AppLog {
    name: String,
    log: WriteLog,
    tpl: Tpl,
}

/// MobiFS over a mounted file system.
pub struct MobiFs {
    config: MobiFsConfig,
    mm: Rc<Mm>,
    store: Rc<dyn AtomicStore>,
    /// Logs by app name (deterministic order).
    apps: RefCell<BTreeMap<String, AppLog>>,
    /// The app each file's pages are logged in (the first covered writer's; §6: `i_private`).
    owner: RefCell<BTreeMap<Ino, String>>,
    /// Files evicted: pages of theirs still in a committing VCT are skipped.
    dead: RefCell<BTreeSet<Ino>>,
    /// Crash-point checking: the recorder's sequence number at each VCT's close.
    crash_stamps: RefCell<BTreeMap<(String, log::VctId), usize>>,
    /// The checkpointer sleeps here.
    work: WaitQueue,
    /// Writers over the memory limit, and `sync` callers, sleep here.
    released: WaitQueue,
    /// `sync(2)` callers waiting: the checkpointer commits everything while positive.
    syncing: Cell<u32>,
    /// Pages a single VCT may hold (the store's transaction limit).
    max_vct_pages: u64,
    task: Cell<Option<TaskId>>,
    stats: RefCell<MobiFsStats>,
    /// Whether a page still belongs to its file (the VFS's answer; truncation races).
    page_alive: RefCell<Option<PageAlive>>,
    /// The `idle` policy's predictor and scheduler.
    idle: Option<RefCell<idle::IdlePolicy>>,
    /// A checkpoint is being written.
    checkpointing: Cell<bool>,
}

impl MobiFs {
    /// Mounts MobiFS over `store` (the file system under `mm`) and starts its checkpointer;
    /// `touches` are the user's operations (sorted, drags merged), which the `idle` policy's
    /// interaction logger watches.
    pub fn start(
        sim: &Sim,
        config: MobiFsConfig,
        mm: Rc<Mm>,
        store: Rc<dyn AtomicStore>,
        touches: Vec<Nanos>,
    ) -> Result<Rc<MobiFs>, String> {
        config.validate()?;
        // A VCT over a handful of files must fit one transaction.
        let max_vct_pages = store.max_pages(8);
        if max_vct_pages < 16 {
            return Err(format!(
                "the journal's transactions hold {max_vct_pages} pages: too few for MobiFS's VCTs"
            ));
        }
        let idle = match config.policy {
            CheckpointPolicy::Idle => Some(RefCell::new(idle::IdlePolicy::new(
                config.predictor,
                config.fsm.clone(),
            )?)),
            _ => None,
        };
        if config.policy == CheckpointPolicy::Idle && touches.is_empty() {
            return Err("MobiFS's idle policy has no user to watch: add [stack.user]".into());
        }
        let fs = Rc::new(MobiFs {
            config,
            mm: mm.clone(),
            store,
            apps: RefCell::new(BTreeMap::new()),
            owner: RefCell::new(BTreeMap::new()),
            dead: RefCell::new(BTreeSet::new()),
            crash_stamps: RefCell::new(BTreeMap::new()),
            work: WaitQueue::new(),
            released: WaitQueue::new(),
            syncing: Cell::new(0),
            max_vct_pages,
            task: Cell::new(None),
            stats: RefCell::new(MobiFsStats::default()),
            page_alive: RefCell::new(None),
            idle,
            checkpointing: Cell::new(false),
        });
        mm.bdev.register_task(MOBIFS_PID, 0, MOBIFS_COMM);
        let (s, f) = (sim.clone(), fs.clone());
        let handle = sim.spawn_daemon(MOBIFS_COMM, async move { f.checkpointer(&s).await });
        fs.task.set(Some(handle.task()));
        let (s, f) = (sim.clone(), fs.clone());
        sim.spawn_daemon("mobifs-policy", async move { f.policy_timer(&s).await });
        if !touches.is_empty() {
            let (s, f) = (sim.clone(), fs.clone());
            sim.spawn_daemon("mobifs-user", async move { f.user(&s, touches).await });
        }
        Ok(fs)
    }

    pub fn config(&self) -> &MobiFsConfig {
        &self.config
    }

    /// The VFS tells MobiFS how to ask whether a page still belongs to its file.
    pub fn set_page_alive(&self, alive: PageAlive) {
        *self.page_alive.borrow_mut() = Some(alive);
    }

    /// Whether a process named `comm` writes through MobiFS.
    pub fn covers(&self, comm: &str) -> bool {
        self.config.apps.is_empty() || self.config.apps.iter().any(|a| a == comm)
    }

    pub fn stats(&self) -> MobiFsStats {
        *self.stats.borrow()
    }

    /// Pages pinned by every log.
    pub fn pinned_pages(&self) -> u64 {
        self.apps
            .borrow()
            .values()
            .map(|a| a.log.pinned_pages())
            .sum()
    }

    fn limit_pages(&self) -> u64 {
        self.config.memory_limit / PAGE_SIZE
    }

    /// A covered write of `[pos, pos + len)` to `ino` by app `app` (the bytes are already in
    /// the page cache, pinned: [`Mm::cache_write`]); the file is `size` bytes long after it.
    /// Records each page in the app's log, lets TPL close the VCT, and wakes the checkpointer
    /// when there is work.
    pub fn record_write(&self, sim: &Sim, app: &str, ino: Ino, pos: u64, len: u64, size: u64) {
        let now = sim.now();
        // A file written under an evicted file's inode number is a new file (ext4 hands freed
        // numbers out again): it is alive.
        self.dead.borrow_mut().remove(&ino);
        let owner = self
            .owner
            .borrow_mut()
            .entry(ino)
            .or_insert_with(|| app.to_string())
            .clone();
        let mut apps = self.apps.borrow_mut();
        let entry = apps.entry(owner.clone()).or_insert_with(|| AppLog {
            name: owner,
            log: WriteLog::new(),
            tpl: Tpl::new(self.config.tpl),
        });
        // A VCT closes at a write's end, never inside it: the VCT records the file's size after
        // the whole write, so a write split across two VCTs would leave the first with a size
        // covering pages it does not hold (found by `mobistack crashcheck`).
        let mut close = false;
        let mut at = pos;
        while at < pos + len {
            let index = at / PAGE_SIZE;
            let bytes = (PAGE_SIZE - at % PAGE_SIZE).min(pos + len - at);
            let case = entry.log.record_write(ino, index, bytes, size, now);
            let mut reason = entry.tpl.on_write(bytes, case == WriteCase::Overwrite, now);
            if reason.is_none()
                && entry
                    .log
                    .open()
                    .is_some_and(|v| v.pages() >= self.max_vct_pages)
            {
                reason = Some(CloseReason::Staleness);
                self.stats.borrow_mut().closed_size += 1;
            } else if let Some(reason) = reason {
                let mut stats = self.stats.borrow_mut();
                match reason {
                    CloseReason::Peak => stats.closed_peak += 1,
                    CloseReason::Staleness => stats.closed_staleness += 1,
                    CloseReason::Time => stats.closed_time += 1,
                }
            }
            close |= reason.is_some();
            at += bytes;
        }
        let mut closed = None;
        if close {
            closed = entry.log.close(now);
            self.note_closed(&entry.name, closed);
            entry.tpl.reset();
        }
        drop(apps);
        let pinned = self.pinned_pages();
        {
            let mut stats = self.stats.borrow_mut();
            stats.peak_pinned_pages = stats.peak_pinned_pages.max(pinned);
        }
        if closed.is_some() && self.config.policy == CheckpointPolicy::Immediate {
            self.work.wake_all(sim);
        }
    }

    /// After a covered write, outside the inode lock: while the logs pin more than the memory
    /// limit, close the writer's open VCT and wait for the checkpointer to release memory.
    pub async fn throttle(&self, sim: &Sim) {
        if self.pinned_pages() < self.limit_pages() {
            return;
        }
        let start = sim.now();
        self.stats.borrow_mut().throttled += 1;
        while self.pinned_pages() >= self.limit_pages() {
            if !self.anything_to_commit() {
                let closed = self.close_all(sim);
                self.stats.borrow_mut().closed_memory += closed;
                if closed == 0 && !self.any_committing() {
                    // Nothing left to release (copies of pages all in flight): give up.
                    break;
                }
            }
            self.work.wake_all(sim);
            self.released
                .wait_on_holder(
                    sim,
                    WaitReason::MobiFsMemory,
                    Blocker::None,
                    self.task.get(),
                )
                .await;
        }
        self.stats.borrow_mut().throttled_ns += sim.now() - start;
    }

    /// A covered `fsync`: nothing to do now; durability comes with the checkpoint.
    pub fn fsync(&self) {
        self.stats.borrow_mut().async_fsyncs += 1;
    }

    /// `sync(2)`: every open VCT closes and the caller waits until every log is committed.
    pub async fn sync(&self, sim: &Sim) {
        let closed = self.close_all(sim);
        self.stats.borrow_mut().closed_sync += closed;
        self.commit_all(sim, WaitReason::MobiFsMemory).await;
    }

    /// Has the checkpointer commit every closed VCT whatever the policy (`syncing` counts as
    /// pressure in [`MobiFs::pick`]) and waits, as `reason`, until none is left or being
    /// committed.
    async fn commit_all(&self, sim: &Sim, reason: WaitReason) {
        self.syncing.set(self.syncing.get() + 1);
        self.work.wake_all(sim);
        while self.anything_to_commit() || self.any_committing() {
            self.released
                .wait_on_holder(sim, reason, Blocker::None, self.task.get())
                .await;
        }
        self.syncing.set(self.syncing.get() - 1);
    }

    /// Pages `index >= from` of `ino` are gone (truncate; `from == 0` and `evicted` for an
    /// evicted inode): they leave the logs and lose their pin.
    /// Whether a truncate of `ino` goes into its app's open VCT (`log-truncate`, for a file
    /// MobiFS logs).
    pub fn logs_truncate(&self, ino: Ino) -> bool {
        self.config.log_truncate && self.owner.borrow().contains_key(&ino)
    }

    /// `log-truncate`: `ino` truncated (or extended) to `length`, logged in the open VCT; the
    /// pages past it lose their pin (the page cache drops them).
    pub fn record_truncate(&self, sim: &Sim, ino: Ino, length: u64) {
        let owner = self.owner.borrow().get(&ino).cloned();
        let Some(owner) = owner else {
            return;
        };
        let unpin = match self.apps.borrow_mut().get_mut(&owner) {
            Some(app) => app.log.record_truncate(ino, length, sim.now()),
            None => return,
        };
        for index in unpin {
            self.mm.unpin_page(ino, index);
        }
    }

    pub fn forget(&self, ino: Ino, from: u64, evicted: bool) {
        let owner = self.owner.borrow().get(&ino).cloned();
        if let Some(owner) = owner {
            if let Some(app) = self.apps.borrow_mut().get_mut(&owner) {
                for index in app.log.forget(ino, from) {
                    self.mm.unpin_page(ino, index);
                }
            }
        }
        if evicted {
            self.owner.borrow_mut().remove(&ino);
            self.dead.borrow_mut().insert(ino);
        }
    }

    /// Crash-point checking: VCT `id` of `app` closed (if one did) at the log's sequence
    /// number now, the state its checkpoint makes durable.
    fn note_closed(&self, app: &str, id: Option<log::VctId>) {
        if let (Some(id), Some(crash)) = (id, self.mm.crash_log()) {
            let seq = crash.vct_closed(app);
            self.crash_stamps
                .borrow_mut()
                .insert((app.to_string(), id), seq);
        }
    }

    /// Closes every log's open VCT; returns how many closed.
    fn close_all(&self, sim: &Sim) -> u64 {
        let mut closed = 0;
        for app in self.apps.borrow_mut().values_mut() {
            let id = app.log.close(sim.now());
            self.note_closed(&app.name, id);
            if id.is_some() {
                closed += 1;
                app.tpl.reset();
            }
        }
        closed
    }

    fn anything_to_commit(&self) -> bool {
        self.apps
            .borrow()
            .values()
            .any(|a| a.log.next_to_commit().is_some())
    }

    fn any_committing(&self) -> bool {
        self.apps.borrow().values().any(|a| a.log.committing())
    }

    /// The policy engine: the log whose oldest closed VCT the checkpointer commits next, if
    /// it should run now. Under memory pressure or a `sync`, any closed VCT; otherwise as the
    /// policy says. Among candidates, the VCT closed first (then the app's name).
    fn pick(&self, now: Nanos) -> Option<String> {
        let pressure = self.pinned_pages() >= self.limit_pages() || self.syncing.get() > 0;
        if !pressure && self.config.policy == CheckpointPolicy::Interval {
            // The timer closes VCTs and wakes the checkpointer with `syncing` raised.
            return None;
        }
        if let (false, Some(idle)) = (pressure, &self.idle) {
            let closed: Vec<(String, u64)> = self
                .apps
                .borrow()
                .values()
                .filter_map(|a| a.log.next_to_commit().map(|v| (a.name.clone(), v.pages())))
                .collect();
            return idle.borrow_mut().choose(now, &closed);
        }
        self.apps
            .borrow()
            .values()
            .filter_map(|a| {
                a.log
                    .next_to_commit()
                    .map(|v| (v.closed_ns.unwrap_or(0), a.name.clone()))
            })
            .min()
            .map(|(_, name)| name)
    }

    /// The checkpointer thread (§6: sleeps while there is no VCT to checkpoint).
    async fn checkpointer(&self, sim: &Sim) {
        let issuer = Issuer {
            task: self.task.get().or(sim.current_task()),
            pid: MOBIFS_PID,
            uid: 0,
            foreground: false,
        };
        loop {
            match self.pick(sim.now()) {
                Some(app) => {
                    self.commit_oldest(sim, issuer, &app).await;
                    self.released.wake_all(sim);
                }
                None => {
                    self.released.wake_all(sim);
                    self.work.wait(sim, WaitReason::Sleep, Blocker::None).await;
                }
            }
        }
    }

    /// The policy engine's timer: every [`POLICY_TICK`], open VCTs older than TPL's time cap
    /// close (the cap holds even when no write comes to check it); under the `interval`
    /// policy, every `interval` everything closes and is committed.
    async fn policy_timer(&self, sim: &Sim) {
        let mut next_interval = self.config.interval;
        let mut next_tick = POLICY_TICK;
        loop {
            match &self.idle {
                Some(idle) => {
                    sim.sleep(idle::IDLE_TICK).await;
                    let pending = self.anything_to_commit();
                    if idle.borrow_mut().tick(sim.now(), pending) && pending {
                        self.work.wake_all(sim);
                    }
                    if sim.now() < next_tick {
                        continue;
                    }
                    next_tick = sim.now() + POLICY_TICK;
                }
                None => sim.sleep(POLICY_TICK).await,
            }
            let now = sim.now();
            let mut closed = 0;
            for app in self.apps.borrow_mut().values_mut() {
                let expired = app
                    .log
                    .open()
                    .is_some_and(|v| now.saturating_sub(v.opened_ns) >= self.config.tpl.time_cap);
                if expired {
                    let id = app.log.close(now);
                    self.note_closed(&app.name, id);
                    if id.is_some() {
                        app.tpl.reset();
                        closed += 1;
                    }
                }
            }
            self.stats.borrow_mut().closed_time += closed;
            if closed > 0 && self.config.policy == CheckpointPolicy::Immediate {
                self.work.wake_all(sim);
            }
            if self.config.policy == CheckpointPolicy::Interval && now >= next_interval {
                next_interval = now + self.config.interval;
                let closed = self.close_all(sim);
                self.stats.borrow_mut().closed_interval += closed;
                if self.anything_to_commit() {
                    self.commit_all(sim, WaitReason::Sleep).await;
                }
            }
        }
    }

    /// The user interaction logger (§6): each touch of the user model goes to the predictor.
    async fn user(&self, sim: &Sim, touches: Vec<Nanos>) {
        for at in touches {
            sim.sleep(at.saturating_sub(sim.now())).await;
            if let Some(idle) = &self.idle {
                idle.borrow_mut()
                    .on_touch(sim.now(), self.checkpointing.get());
            }
        }
    }

    /// Commits app `app`'s oldest closed VCT: BEGIN, APPEND each page, the sizes, END,
    /// WAIT_SYNC; then the VCT leaves the log and its pages are unpinned.
    async fn commit_oldest(&self, sim: &Sim, issuer: Issuer, app: &str) {
        let start = sim.now();
        let (id, entries, sizes) = {
            let mut apps = self.apps.borrow_mut();
            let log = &mut apps.get_mut(app).expect("a log").log;
            let id = log.next_to_commit().expect("a closed VCT").id;
            let (entries, sizes) = log.begin_commit(id);
            (id, entries, sizes)
        };
        let alive = |ino: Ino, index: u64| {
            !self.dead.borrow().contains(&ino)
                && self
                    .apps
                    .borrow()
                    .get(app)
                    .is_some_and(|a| a.log.still_in(id, ino, index))
                && (self.config.log_truncate
                    || self
                        .page_alive
                        .borrow()
                        .as_ref()
                        .is_none_or(|f| f(ino, index)))
        };
        let pages = entries.len() as u64;
        self.checkpointing.set(true);
        // Crash-point checking: the pages go to the journal as the VCT closed them.
        let crash = self.mm.crash_log();
        if let Some(crash) = &crash {
            let stamp = self
                .crash_stamps
                .borrow_mut()
                .remove(&(app.to_string(), id));
            let inos: BTreeSet<Ino> = sizes
                .keys()
                .copied()
                .chain(entries.iter().map(|e| e.ino))
                .collect();
            let inos: Vec<Ino> = inos.into_iter().collect();
            crash.checkpoint_as_of(&inos, stamp.unwrap_or_else(|| crash.position()));
        }
        match self.store.begin(sim, pages, sizes.len() as u64).await {
            Ok(mut token) => {
                for e in &entries {
                    if alive(e.ino, e.index) {
                        token = self.store.append(sim, token, issuer, e.ino, e.index).await;
                    } else {
                        self.stats.borrow_mut().skipped_pages += 1;
                    }
                }
                for (&ino, &size) in &sizes {
                    if !self.dead.borrow().contains(&ino) {
                        token = self.store.set_size(sim, token, ino, size).await;
                    }
                }
                let tid = self.store.end(sim, token).await;
                self.store.wait_sync(sim, issuer, tid).await;
            }
            Err(_) => {
                // Cannot happen: VCTs close before they outgrow a transaction.
                unreachable!("VCT of {pages} pages refused by the store");
            }
        }
        self.checkpointing.set(false);
        if let Some(crash) = &crash {
            crash.checkpoint_done();
        }
        if let Some(idle) = &self.idle {
            idle.borrow_mut().measured(pages, sim.now() - start);
        }
        let unpin = {
            let mut apps = self.apps.borrow_mut();
            let log = &mut apps.get_mut(app).expect("a log").log;
            let unpin = log.finish_commit(id);
            debug_assert_eq!(log.check(), Ok(()));
            unpin
        };
        for (ino, index) in unpin {
            self.mm.unpin_page(ino, index);
        }
        let mut stats = self.stats.borrow_mut();
        stats.checkpoints += 1;
        stats.checkpoint_pages += pages;
        stats.checkpoint_ns += sim.now() - start;
    }

    /// Counters for the run's results, `mobifs.*`.
    pub fn counters(&self) -> Vec<(String, u64)> {
        let s = self.stats();
        let mut logs = log::LogStats::default();
        for app in self.apps.borrow().values() {
            let l = app.log.stats();
            logs.appends += l.appends;
            logs.copies_on_write += l.copies_on_write;
            logs.overwrites += l.overwrites;
            logs.bytes_written += l.bytes_written;
            logs.vcts_closed += l.vcts_closed;
            logs.vcts_committed += l.vcts_committed;
            logs.pages_committed += l.pages_committed;
        }
        [
            ("bytes_logged", logs.bytes_written),
            ("appends", logs.appends),
            ("copies_on_write", logs.copies_on_write),
            ("overwrites", logs.overwrites),
            ("vcts_closed", logs.vcts_closed),
            ("vcts_committed", logs.vcts_committed),
            ("pages_committed", logs.pages_committed),
            ("async_fsyncs", s.async_fsyncs),
            ("closed_peak", s.closed_peak),
            ("closed_staleness", s.closed_staleness),
            ("closed_time", s.closed_time),
            ("closed_size", s.closed_size),
            ("closed_memory", s.closed_memory),
            ("closed_sync", s.closed_sync),
            ("closed_interval", s.closed_interval),
            ("checkpoints", s.checkpoints),
            ("checkpoint_ms", s.checkpoint_ns / 1_000_000),
            ("skipped_pages", s.skipped_pages),
            ("throttled", s.throttled),
            ("throttled_ms", s.throttled_ns / 1_000_000),
            ("peak_pinned_pages", s.peak_pinned_pages),
            ("pinned_pages_at_end", self.pinned_pages()),
        ]
        .into_iter()
        .map(|(k, v)| (format!("mobifs.{k}"), v))
        .collect::<Vec<_>>()
        .into_iter()
        .chain(self.idle.iter().flat_map(|idle| {
            let s = idle.borrow().stats;
            [
                ("touches", s.touches),
                ("predictions", s.predictions),
                ("conflicts", s.conflicts),
                ("touches_during_checkpoint", s.touches_during_checkpoint),
                ("chosen", s.chosen),
                ("fallback_picks", s.fallback_picks),
                ("predicted_ms", s.predicted_ns / 1_000_000),
            ]
            .into_iter()
            .map(|(k, v)| (format!("mobifs.idle.{k}"), v))
            .collect::<Vec<_>>()
        }))
        .collect()
    }

    /// Checks every log's invariants.
    pub fn violation(&self) -> Option<String> {
        self.apps.borrow().values().find_map(|a| {
            a.log
                .check()
                .err()
                .map(|e| format!("mobifs {}: {e}", a.name))
        })
    }
}
