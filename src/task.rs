//! What the kernel knows of tasks beyond their identity: which app is in the foreground, each
//! task's nice value and I/O priority ([`TaskTable`]), and the block cgroups apps belong to with
//! their I/O weights and `io.prio.class` policy ([`Cgroup`], [`PrioPolicy`]).
//!
//! Linux keeps this as task state the lower layers read, not as a call into the app layer:
//! Android's ActivityManager moves the top app's tasks into the `top-app` cgroup (task profiles),
//! and FastTrack's app status detector (§4.1) sends the UID of the top activity down to the
//! kernel. [`ForegroundState`] is that kernel-side copy: the page cache, the block layer and the
//! device read it; the app layer (`crate::app`) and the scenario timeline write it.
//!
//! I/O priority, as the kernel hands it to the block layer:
//! - `ioprio_set(2)` stores a class and level in the task's io context (`ioc->ioprio`,
//!   [`TaskTable::ioprio_set`]). A bio a task submits carries it (blk-mq `bio_set_ioprio` ->
//!   `get_current_ioprio` -> `__get_task_ioprio`, include/linux/ioprio.h of 6.x: class NONE
//!   becomes best effort at (nice + 20) / 5, [`TaskTable::current_ioprio`]). Writeback the
//!   flusher submits is the flusher's own I/O: the priority of the task that dirtied the pages is
//!   not inherited (blk-ioprio.c: "ioprio_set() does not affect page cache writeback I/O").
//! - blk-ioprio (block/blk-ioprio.c, 5.14+; `promote-to-rt` 6.5+) then applies the
//!   `io.prio.class` policy of the bio's cgroup ([`PrioPolicy::apply`], `blkcg_set_ioprio`).
//!
//! Cgroups: a flat hierarchy under the root, each with `io.weight` / `blkio.weight`,
//! `io.bfq.weight` / `blkio.bfq.weight` and `io.prio.class` ([`CgroupConfig`]). An app's
//! processes are in one cgroup: the one its `[[app]] cgroup` names, or, under the Android preset
//! ([`IoPolicy::Android`]), the one its place on screen implies (below). Kernel threads (uid 0:
//! the flusher, kswapd, jbd2) stay in the root. A bio belongs to the cgroup of the task that
//! submits it (`bio_associate_blkg`): the flusher's writeback is the root's, as on Android, whose
//! blkio hierarchy is cgroup v1 and so has no cgroup writeback.
//!
//! The Android preset (`[stack] io_policy = "android"`): libprocessgroup's task profiles put
//! `top-app` (`MaxIoPriority`) and `foreground` (`HighIoPriority`) processes in the blkio root and
//! `background` ones (`LowIoPriority`) in `/dev/blkio/background`
//! (system/core/libprocessgroup/profiles/task_profiles.json); init.rc writes `blkio.weight` 1000
//! for the root, 200 and `blkio.bfq.weight` 10 for `background`, and `blkio.prio.class`
//! `restrict-to-be` for `background` (system/core/rootdir/init.rc, Android 14+); Pixel's
//! `init.storage.rc` (device/google/gs-common, storage/) writes `promote-to-rt` for the root
//! ("Make foreground and background I/O priority different"). The app in the foreground is the
//! top app; every other app (a service included) is in `background`, and it moves when the
//! timeline changes the foreground: the cgroup is read when a request is allocated.
//!
//! Simplifications: one foreground UID (no split screen, no `foreground` vs `top-app` groups
//! apart: both are the blkio root); no per-thread state, the UID stands for every task of the
//! app; no SCHED_FIFO / SCHED_IDLE tasks (`task_nice_ioclass` is best effort); `io.weight` is
//! kept but read by no modelled scheduler (it is blk-iocost's file on cgroup v2 and CFQ's group
//! weight on v1, neither modelled); bios are not refused merges across cgroups
//! (`blk_cgroup_mergeable`).

use serde::{Deserialize, Serialize};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

/// Which app is in the foreground: the UID of the top activity.
#[derive(Debug, Default)]
pub struct ForegroundState {
    foreground_uid: Cell<Option<u32>>,
    switches: Cell<u64>,
}

impl ForegroundState {
    pub fn new(foreground_uid: Option<u32>) -> Self {
        ForegroundState {
            foreground_uid: Cell::new(foreground_uid),
            switches: Cell::new(0),
        }
    }

    pub fn foreground_uid(&self) -> Option<u32> {
        self.foreground_uid.get()
    }

    pub fn is_foreground(&self, uid: u32) -> bool {
        self.foreground_uid.get() == Some(uid)
    }

    /// Brings `uid` to the top of the activity stack.
    pub fn set_foreground(&self, uid: u32) {
        if self.foreground_uid.get() != Some(uid) {
            self.foreground_uid.set(Some(uid));
            self.switches.set(self.switches.get() + 1);
        }
    }

    /// Foreground changes so far.
    pub fn switches(&self) -> u64 {
        self.switches.get()
    }
}

/// How seed 003's application-aware scheduler (§5.2) classifies an app from the services it
/// uses: a video player is time-sensitive, a download manager bursty, power management plain.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AppIoClass {
    #[default]
    Plain,
    TimeSensitive,
    Bursty,
    /// Time-sensitive while in the foreground, bursty in the background (the thesis's SQL
    /// service example, §5.2): resolved by [`TaskTable::app_class`] when a request is made.
    ForegroundSensitive,
}

/// I/O priority class (include/linux/ioprio.h `IOPRIO_CLASS_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IoPrioClass {
    /// `IOPRIO_CLASS_NONE`: derived from the task's nice value (best effort, level 4 at nice 0).
    None,
    Rt,
    Be,
    Idle,
}

/// I/O priority: class and level 0 (highest) ..= 7 (`IOPRIO_BE_NR` = 8 levels).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct IoPrio {
    pub class: IoPrioClass,
    pub level: u8,
}

/// Number of priority levels inside the RT and BE classes (`IOPRIO_BE_NR`).
pub const IOPRIO_BE_NR: u8 = 8;
/// Level of a nice-0 task (`task_nice_ioprio`: (nice + 20) / 5).
pub const IOPRIO_NORM: u8 = 4;

impl IoPrio {
    pub const NONE: IoPrio = IoPrio {
        class: IoPrioClass::None,
        level: IOPRIO_NORM,
    };

    pub fn new(class: IoPrioClass, level: u8) -> IoPrio {
        assert!(level < IOPRIO_BE_NR, "ioprio level {level} out of range");
        IoPrio { class, level }
    }

    /// The class and level the schedulers use: `IOPRIO_CLASS_NONE` becomes best effort at the
    /// nice-derived level (`task_nice_ioclass`, `task_nice_ioprio` for nice 0).
    pub fn effective(self) -> IoPrio {
        match self.class {
            IoPrioClass::None => IoPrio {
                class: IoPrioClass::Be,
                level: IOPRIO_NORM,
            },
            IoPrioClass::Idle => IoPrio {
                class: IoPrioClass::Idle,
                level: IOPRIO_BE_NR - 1,
            },
            _ => self,
        }
    }
}

impl IoPrio {
    /// `ioprio_best`: the higher of two priorities (RT over BE over IDLE, then the lower level),
    /// with `IOPRIO_CLASS_NONE` counted as best effort level 4.
    pub fn best(a: IoPrio, b: IoPrio) -> IoPrio {
        let (a, b) = (a.effective(), b.effective());
        if a.class == b.class {
            if a.level <= b.level {
                a
            } else {
                b
            }
        } else if a.class < b.class {
            a
        } else {
            b
        }
    }
}

impl Default for IoPrio {
    fn default() -> Self {
        IoPrio::NONE
    }
}

/// `task_nice_ioprio` (include/linux/ioprio.h): the best-effort level a task's nice value maps
/// to, (nice + 20) / 5. A background thread at nice 10 (Android's
/// `THREAD_PRIORITY_BACKGROUND`) gets level 6, a foreground one at nice 0 level 4.
pub fn task_nice_ioprio(nice: i8) -> u8 {
    assert!((-20..=19).contains(&nice), "nice {nice} out of range");
    ((i16::from(nice) + 20) / 5) as u8
}

impl IoPrio {
    /// The priority a task with this `ioprio` and `nice` is served at (`cfq_init_prio_data`):
    /// `IOPRIO_CLASS_NONE` inherits the CPU nice value (`task_nice_ioclass`: best effort, as
    /// no scheduling policy is modelled; `task_nice_ioprio`); the idle class is level 7.
    pub fn for_task(self, nice: i8) -> IoPrio {
        match self.class {
            IoPrioClass::None => IoPrio {
                class: IoPrioClass::Be,
                level: task_nice_ioprio(nice),
            },
            _ => self.effective(),
        }
    }
}

/// What the I/O schedulers read of a task (`current->io_context->ioprio`, `task_nice`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskInfo {
    pub uid: u32,
    pub comm: String,
    /// CPU nice value, -20..=19.
    pub nice: i8,
    /// `ioc->ioprio`, as `ioprio_set` leaves it; class NONE by default.
    pub ioprio: IoPrio,
}

/// `io.prio.class` / `blkio.prio.class` (block/blk-ioprio.c `enum prio_policy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PrioPolicy {
    /// `no-change` (the default).
    #[default]
    NoChange,
    /// `promote-to-rt` (6.5+): every request that is not RT becomes RT level 4.
    PromoteToRt,
    /// `restrict-to-be`: NONE and RT become best effort (the level is kept when it is lower
    /// priority than BE0, i.e. always for BE requests).
    RestrictToBe,
    /// `idle`: every request becomes IDLE.
    Idle,
    /// `none-to-rt`: an alias of `promote-to-rt` since 6.5 (before, it promoted class NONE
    /// only; 6.x's `get_current_ioprio` leaves no bio in class NONE).
    NoneToRt,
}

impl PrioPolicy {
    /// `blkcg_set_ioprio`: the priority a bio leaves blk-ioprio with.
    ///
    /// ```
    /// use mobistack::task::{IoPrio, IoPrioClass, PrioPolicy};
    /// let be2 = IoPrio::new(IoPrioClass::Be, 2);
    /// assert_eq!(PrioPolicy::PromoteToRt.apply(be2), IoPrio::new(IoPrioClass::Rt, 4));
    /// let rt1 = IoPrio::new(IoPrioClass::Rt, 1);
    /// assert_eq!(PrioPolicy::RestrictToBe.apply(rt1), IoPrio::new(IoPrioClass::Be, 0));
    /// assert_eq!(PrioPolicy::RestrictToBe.apply(be2), be2);
    /// ```
    pub fn apply(self, ioprio: IoPrio) -> IoPrio {
        match self {
            PrioPolicy::NoChange => ioprio,
            // "For RT threads, the default priority level is 4 because task_nice is 0."
            PrioPolicy::PromoteToRt | PrioPolicy::NoneToRt => {
                if ioprio.class == IoPrioClass::Rt {
                    ioprio
                } else {
                    IoPrio::new(IoPrioClass::Rt, IOPRIO_NORM)
                }
            }
            // `max_t(u16, bio->bi_ioprio, IOPRIO_PRIO_VALUE(policy, 0))`: the value orders by
            // class (NONE < RT < BE < IDLE), then level, as `IoPrio`'s `Ord` does.
            PrioPolicy::RestrictToBe => ioprio.max(IoPrio::new(IoPrioClass::Be, 0)),
            PrioPolicy::Idle => ioprio.max(IoPrio::new(IoPrioClass::Idle, 0)),
        }
    }
}

/// Which preset places apps in cgroups (`[stack] io_policy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum IoPolicy {
    /// Every app in the root cgroup unless its `[[app]] cgroup` names one.
    #[default]
    None,
    /// Android's task profiles: the foreground app in the root (`top-app`), the others in
    /// `background` (io.weight 200, io.bfq.weight 10, restrict-to-be); the root promote-to-rt.
    Android,
}

/// One cgroup's I/O files, as a scenario writes them (`[stack.cgroup.<name>]`; `root` is the
/// root cgroup). A field left out keeps the kernel default, or the preset's value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CgroupConfig {
    /// `io.weight` / `blkio.weight`, 1..=10000; default 100 (`CGROUP_WEIGHT_DFL`).
    pub weight: Option<u32>,
    /// `io.bfq.weight` / `blkio.bfq.weight`, 1..=1000; default 100 (`BFQ_DEFAULT_GRP_WEIGHT`,
    /// block/bfq-iosched.h).
    pub bfq_weight: Option<u32>,
    /// `io.prio.class`; default `no-change`.
    pub prio_class: Option<PrioPolicy>,
}

/// `CGROUP_WEIGHT_DFL` (include/linux/cgroup.h).
pub const CGROUP_WEIGHT_DFL: u32 = 100;
/// `BFQ_DEFAULT_GRP_WEIGHT` (block/bfq-iosched.h).
pub const BFQ_DEFAULT_GRP_WEIGHT: u32 = 100;
/// `BFQ_MIN_WEIGHT`, `BFQ_MAX_WEIGHT` (block/bfq-iosched.h).
pub const BFQ_WEIGHT_RANGE: std::ops::RangeInclusive<u32> = 1..=1000;
/// `CGROUP_WEIGHT_MIN`, `CGROUP_WEIGHT_MAX`.
pub const CGROUP_WEIGHT_RANGE: std::ops::RangeInclusive<u32> = 1..=10_000;

/// Identifier of a cgroup in the task table; the root is 0.
pub type CgroupId = u32;
/// The root cgroup.
pub const ROOT_CGROUP: CgroupId = 0;
/// Name of the Android preset's background group (`/dev/blkio/background`).
pub const ANDROID_BACKGROUND: &str = "background";

/// A cgroup's I/O settings as the block layer reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cgroup {
    pub id: CgroupId,
    pub name: String,
    pub weight: u32,
    pub bfq_weight: u32,
    pub prio_class: PrioPolicy,
}

/// What a request records of its cgroup (`rq->bio->bi_blkg`): which group, and the group's
/// `io.bfq.weight` when the request was allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Blkcg {
    pub id: CgroupId,
    pub bfq_weight: u32,
}

impl Default for Blkcg {
    fn default() -> Self {
        Blkcg {
            id: ROOT_CGROUP,
            bfq_weight: BFQ_DEFAULT_GRP_WEIGHT,
        }
    }
}

/// Parses an I/O priority as `ionice` names it: `rt:N`, `be:N` (N = 0..=7), `idle`, `none`.
///
/// ```
/// use mobistack::task::{parse_ioprio, IoPrio, IoPrioClass};
/// assert_eq!(parse_ioprio("rt:0"), Ok(IoPrio::new(IoPrioClass::Rt, 0)));
/// assert!(parse_ioprio("be:8").is_err());
/// ```
pub fn parse_ioprio(text: &str) -> Result<IoPrio, String> {
    let bad = || {
        format!(
            "invalid I/O priority `{text}`: expected `rt:N`, `be:N` (N 0..=7), `idle` or `none`"
        )
    };
    let (class, level) = match text.split_once(':') {
        Some((class, level)) => (class, Some(level.parse::<u8>().map_err(|_| bad())?)),
        None => (text, None),
    };
    match (class, level) {
        ("rt", Some(level)) if level < IOPRIO_BE_NR => Ok(IoPrio::new(IoPrioClass::Rt, level)),
        ("be", Some(level)) if level < IOPRIO_BE_NR => Ok(IoPrio::new(IoPrioClass::Be, level)),
        ("idle", None) => Ok(IoPrio::new(IoPrioClass::Idle, IOPRIO_BE_NR - 1)),
        ("none", None) => Ok(IoPrio::NONE),
        _ => Err(bad()),
    }
}

/// The task table (pid -> uid, comm, nice, ioprio), shared by the stack: processes are
/// registered when created (with their app's nice value and I/O priority), the block layer
/// reads it when it allocates a request (`cfq_set_request` uses the allocating task's io
/// context; blk-mq's `bio_set_ioprio` the submitting task's and its cgroup's). It also holds
/// the cgroups and which app is in which.
#[derive(Debug)]
pub struct TaskTable {
    tasks: RefCell<BTreeMap<u32, TaskInfo>>,
    /// The nice value an app's processes start with, by uid.
    app_nice: RefCell<BTreeMap<u32, i8>>,
    /// The I/O priority an app's processes start with (`ioprio_set` at start), by uid.
    app_ioprio: RefCell<BTreeMap<u32, IoPrio>>,
    /// Seed 003's class of each app that has one, by uid.
    app_class: RefCell<BTreeMap<u32, AppIoClass>>,
    /// Cgroups by id; the root is entry 0.
    cgroups: RefCell<Vec<Cgroup>>,
    /// Apps placed in a cgroup by the scenario, by uid.
    app_cgroup: RefCell<BTreeMap<u32, CgroupId>>,
    /// The preset placing the other apps, and the foreground state it reads.
    policy: Cell<IoPolicy>,
    activity: RefCell<Option<Rc<ForegroundState>>>,
}

impl Default for TaskTable {
    fn default() -> Self {
        TaskTable {
            tasks: RefCell::default(),
            app_nice: RefCell::default(),
            app_ioprio: RefCell::default(),
            app_class: RefCell::default(),
            cgroups: RefCell::new(vec![Cgroup {
                id: ROOT_CGROUP,
                name: "root".into(),
                weight: CGROUP_WEIGHT_DFL,
                bfq_weight: BFQ_DEFAULT_GRP_WEIGHT,
                prio_class: PrioPolicy::NoChange,
            }]),
            app_cgroup: RefCell::default(),
            policy: Cell::new(IoPolicy::None),
            activity: RefCell::new(None),
        }
    }
}

/// Bound on cgroups (a phone has a handful).
pub const MAX_CGROUPS: usize = 64;

impl TaskTable {
    pub fn new() -> TaskTable {
        TaskTable::default()
    }

    /// The nice value the processes of app `uid` are created with.
    pub fn set_app_nice(&self, uid: u32, nice: i8) {
        assert!((-20..=19).contains(&nice), "nice {nice} out of range");
        self.app_nice.borrow_mut().insert(uid, nice);
    }

    /// The I/O priority the processes of app `uid` set when they start (`ioprio_set`).
    pub fn set_app_ioprio(&self, uid: u32, ioprio: IoPrio) {
        self.app_ioprio.borrow_mut().insert(uid, ioprio);
    }

    /// Seed 003's class of app `uid` (`[[app]] io_class`).
    pub fn set_app_class(&self, uid: u32, class: AppIoClass) {
        self.app_class.borrow_mut().insert(uid, class);
    }

    /// The class of app `uid` now: `foreground-sensitive` resolves by the foreground app.
    pub fn app_class(&self, uid: u32) -> AppIoClass {
        let class = self
            .app_class
            .borrow()
            .get(&uid)
            .copied()
            .unwrap_or_default();
        if class != AppIoClass::ForegroundSensitive {
            return class;
        }
        let foreground = self
            .activity
            .borrow()
            .as_ref()
            .is_some_and(|activity| activity.is_foreground(uid));
        if foreground {
            AppIoClass::TimeSensitive
        } else {
            AppIoClass::Bursty
        }
    }

    /// A process of app `uid` was created: it runs at the app's nice value and I/O priority
    /// (class NONE unless the app sets one).
    pub fn register(&self, pid: u32, uid: u32, comm: &str) {
        let nice = self.app_nice.borrow().get(&uid).copied().unwrap_or(0);
        let ioprio = self
            .app_ioprio
            .borrow()
            .get(&uid)
            .copied()
            .unwrap_or(IoPrio::NONE);
        self.tasks.borrow_mut().insert(
            pid,
            TaskInfo {
                uid,
                comm: comm.to_string(),
                nice,
                ioprio,
            },
        );
    }

    /// `setpriority` / `set_user_nice`.
    pub fn set_nice(&self, pid: u32, nice: i8) {
        assert!((-20..=19).contains(&nice), "nice {nice} out of range");
        if let Some(task) = self.tasks.borrow_mut().get_mut(&pid) {
            task.nice = nice;
        }
    }

    /// `ioprio_set(IOPRIO_WHO_PROCESS, pid, ioprio)`.
    pub fn ioprio_set(&self, pid: u32, ioprio: IoPrio) {
        if let Some(task) = self.tasks.borrow_mut().get_mut(&pid) {
            task.ioprio = ioprio;
        }
    }

    /// FastTrack §4.1's app status detector, kernel side: whether `uid` is the foreground app
    /// (the top activity's UID) and an installed app, not a service (`AID_APP_START`).
    pub fn is_foreground_app(&self, uid: u32) -> bool {
        crate::fasttrack::is_app_uid(uid)
            && self
                .activity
                .borrow()
                .as_ref()
                .is_some_and(|activity| activity.is_foreground(uid))
    }

    /// FastTrack §4.1's UID-indexed table: the processes and threads of app `uid`, as tasks
    /// registered them.
    pub fn pids_of(&self, uid: u32) -> Vec<u32> {
        self.tasks
            .borrow()
            .iter()
            .filter(|(_, info)| info.uid == uid)
            .map(|(&pid, _)| pid)
            .collect()
    }

    pub fn get(&self, pid: u32) -> Option<TaskInfo> {
        self.tasks.borrow().get(&pid).cloned()
    }

    /// The io context a request allocated by task `pid` of app `uid` carries: its `ioprio` and
    /// nice value. A task never registered (a fio job's thread) runs at its app's values.
    pub fn io_context(&self, pid: u32, uid: u32) -> (IoPrio, i8) {
        match self.tasks.borrow().get(&pid) {
            Some(task) => (task.ioprio, task.nice),
            None => (
                self.app_ioprio
                    .borrow()
                    .get(&uid)
                    .copied()
                    .unwrap_or(IoPrio::NONE),
                self.app_nice.borrow().get(&uid).copied().unwrap_or(0),
            ),
        }
    }

    /// `get_current_ioprio` / `__get_task_ioprio` (include/linux/ioprio.h, 6.x): the priority a
    /// bio of task `pid` gets when it has none: the task's `ioprio_set` value, or for class
    /// NONE best effort at (nice + 20) / 5.
    pub fn current_ioprio(&self, pid: u32, uid: u32) -> IoPrio {
        let (ioprio, nice) = self.io_context(pid, uid);
        ioprio.for_task(nice)
    }

    /// Sets the cgroups up: the preset `policy`, then the scenario's `[stack.cgroup.<name>]`
    /// tables (`root` is the root cgroup) over it. `activity` is what the Android preset reads
    /// to place apps. Errors name a bad value.
    pub fn configure_cgroups(
        &self,
        policy: IoPolicy,
        cgroups: &BTreeMap<String, CgroupConfig>,
        activity: Option<Rc<ForegroundState>>,
    ) -> Result<(), String> {
        self.policy.set(policy);
        *self.activity.borrow_mut() = activity;
        if policy == IoPolicy::Android {
            let root = self.cgroup_id("root").expect("the root exists");
            {
                let mut all = self.cgroups.borrow_mut();
                all[root as usize].weight = 1000;
                all[root as usize].prio_class = PrioPolicy::PromoteToRt;
            }
            let background = self.add_cgroup(ANDROID_BACKGROUND)?;
            let mut all = self.cgroups.borrow_mut();
            let group = &mut all[background as usize];
            group.weight = 200;
            group.bfq_weight = 10;
            group.prio_class = PrioPolicy::RestrictToBe;
        }
        for (name, config) in cgroups {
            let id = match self.cgroup_id(name) {
                Some(id) => id,
                None => self.add_cgroup(name)?,
            };
            let mut all = self.cgroups.borrow_mut();
            let group = &mut all[id as usize];
            if let Some(weight) = config.weight {
                if !CGROUP_WEIGHT_RANGE.contains(&weight) {
                    return Err(format!(
                        "[stack.cgroup.{name}] weight = {weight} is invalid: io.weight is 1..=10000"
                    ));
                }
                group.weight = weight;
            }
            if let Some(weight) = config.bfq_weight {
                if !BFQ_WEIGHT_RANGE.contains(&weight) {
                    return Err(format!(
                        "[stack.cgroup.{name}] bfq_weight = {weight} is invalid: io.bfq.weight is 1..=1000"
                    ));
                }
                group.bfq_weight = weight;
            }
            if let Some(policy) = config.prio_class {
                group.prio_class = policy;
            }
        }
        Ok(())
    }

    fn add_cgroup(&self, name: &str) -> Result<CgroupId, String> {
        let mut all = self.cgroups.borrow_mut();
        if all.len() >= MAX_CGROUPS {
            return Err(format!("at most {MAX_CGROUPS} cgroups are supported"));
        }
        if name.is_empty() || name.contains('/') {
            return Err(format!(
                "cgroup name `{name}` must be non-empty, without `/`"
            ));
        }
        let id = all.len() as CgroupId;
        all.push(Cgroup {
            id,
            name: name.to_string(),
            weight: CGROUP_WEIGHT_DFL,
            bfq_weight: BFQ_DEFAULT_GRP_WEIGHT,
            prio_class: PrioPolicy::NoChange,
        });
        Ok(id)
    }

    /// The cgroup called `name` (`root` for the root), if it exists.
    pub fn cgroup_id(&self, name: &str) -> Option<CgroupId> {
        self.cgroups
            .borrow()
            .iter()
            .find(|group| group.name == name)
            .map(|group| group.id)
    }

    /// Puts app `uid`'s processes in cgroup `name` (the scenario's `[[app]] cgroup`); they stay
    /// there whatever the preset says.
    pub fn set_app_cgroup(&self, uid: u32, name: &str) -> Result<(), String> {
        let id = self.cgroup_id(name).ok_or_else(|| {
            let names: Vec<String> = self
                .cgroups
                .borrow()
                .iter()
                .map(|g| g.name.clone())
                .collect();
            format!("unknown cgroup `{name}` (cgroups: {})", names.join(", "))
        })?;
        self.app_cgroup.borrow_mut().insert(uid, id);
        Ok(())
    }

    /// The cgroup of task `pid` of app `uid` now (`task_css(current, io_cgrp_id)`): kernel
    /// threads (uid 0) in the root, an app where the scenario put it, else where the preset
    /// puts it (Android: the foreground app in the root, the others in `background`).
    pub fn cgroup_of(&self, pid: u32, uid: u32) -> CgroupId {
        let _ = pid;
        if uid == 0 {
            return ROOT_CGROUP;
        }
        if let Some(&id) = self.app_cgroup.borrow().get(&uid) {
            return id;
        }
        match self.policy.get() {
            IoPolicy::None => ROOT_CGROUP,
            IoPolicy::Android => {
                let foreground = self
                    .activity
                    .borrow()
                    .as_ref()
                    .is_some_and(|activity| activity.is_foreground(uid));
                if foreground {
                    ROOT_CGROUP
                } else {
                    self.cgroup_id(ANDROID_BACKGROUND)
                        .expect("the Android preset made `background`")
                }
            }
        }
    }

    /// A cgroup's settings.
    pub fn cgroup(&self, id: CgroupId) -> Cgroup {
        self.cgroups.borrow()[id as usize].clone()
    }

    /// What a request of task `pid` of app `uid` records of its cgroup.
    pub fn blkcg(&self, pid: u32, uid: u32) -> Blkcg {
        let id = self.cgroup_of(pid, uid);
        Blkcg {
            id,
            bfq_weight: self.cgroups.borrow()[id as usize].bfq_weight,
        }
    }

    /// blk-mq's `bio_set_ioprio`: a bio of task `pid` of app `uid` that carries `ioprio` (class
    /// NONE when its submitter set none) leaves with the task's priority when it had none, then
    /// its cgroup's `io.prio.class` policy applied (`blkcg_set_ioprio`).
    pub fn bio_set_ioprio(&self, pid: u32, uid: u32, ioprio: IoPrio) -> IoPrio {
        let ioprio = if ioprio.class == IoPrioClass::None {
            self.current_ioprio(pid, uid)
        } else {
            ioprio
        };
        let group = self.cgroup_of(pid, uid);
        self.cgroups.borrow()[group as usize]
            .prio_class
            .apply(ioprio)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_foreground_sensitive_app_is_time_sensitive_only_in_the_foreground() {
        let table = TaskTable::new();
        let activity = Rc::new(ForegroundState::new(Some(10_000)));
        table
            .configure_cgroups(IoPolicy::None, &Default::default(), Some(activity.clone()))
            .unwrap();
        table.set_app_class(10_000, AppIoClass::ForegroundSensitive);
        table.set_app_class(10_001, AppIoClass::Bursty);
        assert_eq!(table.app_class(10_000), AppIoClass::TimeSensitive);
        activity.set_foreground(10_001);
        assert_eq!(table.app_class(10_000), AppIoClass::Bursty);
        assert_eq!(
            table.app_class(10_001),
            AppIoClass::Bursty,
            "a fixed class stays"
        );
        assert_eq!(table.app_class(10_002), AppIoClass::Plain);
    }

    #[test]
    fn a_switch_is_counted_only_when_the_foreground_changes() {
        let state = ForegroundState::new(Some(10_000));
        assert!(state.is_foreground(10_000));
        state.set_foreground(10_000);
        assert_eq!(state.switches(), 0);
        state.set_foreground(10_001);
        assert!(state.is_foreground(10_001) && !state.is_foreground(10_000));
        assert_eq!(
            (state.switches(), state.foreground_uid()),
            (1, Some(10_001))
        );
    }

    #[test]
    fn nice_maps_to_a_best_effort_level_and_ioprio_set_overrides_it() {
        assert_eq!(task_nice_ioprio(0), 4);
        assert_eq!(task_nice_ioprio(10), 6, "THREAD_PRIORITY_BACKGROUND is BE6");
        assert_eq!(task_nice_ioprio(-20), 0);
        assert_eq!(task_nice_ioprio(19), 7);
        let table = TaskTable::new();
        table.set_app_nice(10_001, 10);
        table.register(1001, 10_001, "backup");
        assert_eq!(table.io_context(1001, 10_001), (IoPrio::NONE, 10));
        assert_eq!(IoPrio::NONE.for_task(10), IoPrio::new(IoPrioClass::Be, 6));
        table.ioprio_set(1001, IoPrio::new(IoPrioClass::Idle, 0));
        let (ioprio, nice) = table.io_context(1001, 10_001);
        assert_eq!(ioprio.for_task(nice), IoPrio::new(IoPrioClass::Idle, 7));
        assert_eq!(
            table.io_context(2000, 10_001).1,
            10,
            "unregistered: the app's nice"
        );
    }

    #[test]
    fn blk_ioprio_policies_map_classes_as_blkcg_set_ioprio_does() {
        let rt0 = IoPrio::new(IoPrioClass::Rt, 0);
        let rt6 = IoPrio::new(IoPrioClass::Rt, 6);
        let be6 = IoPrio::new(IoPrioClass::Be, 6);
        let idle = IoPrio::new(IoPrioClass::Idle, 7);
        let rt4 = IoPrio::new(IoPrioClass::Rt, 4);
        for policy in [PrioPolicy::PromoteToRt, PrioPolicy::NoneToRt] {
            assert_eq!(policy.apply(be6), rt4);
            assert_eq!(policy.apply(idle), rt4);
            assert_eq!(policy.apply(rt0), rt0, "RT keeps its level");
        }
        assert_eq!(
            PrioPolicy::RestrictToBe.apply(rt6),
            IoPrio::new(IoPrioClass::Be, 0),
            "RT becomes BE0: max(RT6, BE0)"
        );
        assert_eq!(PrioPolicy::RestrictToBe.apply(be6), be6);
        assert_eq!(PrioPolicy::RestrictToBe.apply(idle), idle);
        assert_eq!(
            PrioPolicy::Idle.apply(rt0),
            IoPrio::new(IoPrioClass::Idle, 0)
        );
        assert_eq!(PrioPolicy::NoChange.apply(rt6), rt6);
    }

    #[test]
    fn the_android_preset_moves_apps_between_top_app_and_background() {
        let activity = Rc::new(ForegroundState::new(Some(10_000)));
        let table = TaskTable::new();
        table
            .configure_cgroups(IoPolicy::Android, &BTreeMap::new(), Some(activity.clone()))
            .unwrap();
        table.register(1000, 10_000, "camera");
        table.register(1001, 10_001, "backup");
        table.register(5, 0, "flush-179:0");
        let background = table.cgroup_id(ANDROID_BACKGROUND).unwrap();
        assert_eq!(table.cgroup_of(1000, 10_000), ROOT_CGROUP);
        assert_eq!(table.cgroup_of(1001, 10_001), background);
        assert_eq!(
            table.cgroup_of(5, 0),
            ROOT_CGROUP,
            "kernel threads stay in the root"
        );
        let group = table.cgroup(background);
        assert_eq!(
            (group.weight, group.bfq_weight, group.prio_class),
            (200, 10, PrioPolicy::RestrictToBe)
        );
        // The foreground app's bios are promoted to RT4, the background app's stay BE at its
        // nice level, and so are the flusher's (root): writeback does not inherit the
        // dirtying app's class.
        let rt4 = IoPrio::new(IoPrioClass::Rt, 4);
        assert_eq!(table.bio_set_ioprio(1000, 10_000, IoPrio::NONE), rt4);
        assert_eq!(
            table.bio_set_ioprio(1001, 10_001, IoPrio::NONE),
            IoPrio::new(IoPrioClass::Be, 4)
        );
        assert_eq!(table.bio_set_ioprio(5, 0, IoPrio::NONE), rt4);
        activity.set_foreground(10_001);
        assert_eq!(table.cgroup_of(1000, 10_000), background);
        assert_eq!(table.cgroup_of(1001, 10_001), ROOT_CGROUP);
        assert_eq!(table.blkcg(1000, 10_000).bfq_weight, 10);
    }

    #[test]
    fn ioprio_set_is_the_tasks_and_the_flusher_keeps_its_own() {
        let table = TaskTable::new();
        table.set_app_ioprio(10_000, parse_ioprio("be:1").unwrap());
        table.register(1000, 10_000, "db");
        table.register(5, 0, "flush-179:0");
        assert_eq!(
            table.current_ioprio(1000, 10_000),
            IoPrio::new(IoPrioClass::Be, 1)
        );
        assert_eq!(
            table.current_ioprio(5, 0),
            IoPrio::new(IoPrioClass::Be, 4),
            "the flusher issues writeback at its own (nice 0) priority"
        );
        assert!(parse_ioprio("rt").is_err());
        let error = table.set_app_cgroup(10_000, "games").unwrap_err();
        assert!(error.contains("games") && error.contains("root"), "{error}");
        let mut bad = BTreeMap::new();
        bad.insert(
            "bg".to_string(),
            CgroupConfig {
                bfq_weight: Some(0),
                ..CgroupConfig::default()
            },
        );
        let error = table
            .configure_cgroups(IoPolicy::None, &bad, None)
            .unwrap_err();
        assert!(error.contains("bfq_weight = 0"), "{error}");
    }
}
