//! What the kernel knows of tasks beyond their identity: which app is in the foreground, and
//! each task's nice value and I/O priority ([`TaskTable`]).
//!
//! Linux keeps this as task state the lower layers read, not as a call into the app layer:
//! Android's ActivityManager moves the top app's tasks into the `top-app` cgroup (task profiles),
//! and FastTrack's app status detector (§4.1) sends the UID of the top activity down to the
//! kernel. [`ForegroundState`] is that kernel-side copy: the page cache, the block layer and the
//! device read it; the app layer (`crate::app`) and the scenario timeline write it.
//!
//! Simplifications: one foreground UID (no split screen, no `foreground` vs `top-app` groups
//! yet); no per-thread state, the UID stands for every task of the app.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;

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

/// The task table (pid -> uid, comm, nice, ioprio), shared by the stack: processes are
/// registered when created (with their app's nice value), the block layer reads it when it
/// allocates a request (`cfq_set_request` uses the allocating task's io context).
#[derive(Debug, Default)]
pub struct TaskTable {
    tasks: RefCell<BTreeMap<u32, TaskInfo>>,
    /// The nice value an app's processes start with, by uid.
    app_nice: RefCell<BTreeMap<u32, i8>>,
}

impl TaskTable {
    pub fn new() -> TaskTable {
        TaskTable::default()
    }

    /// The nice value the processes of app `uid` are created with.
    pub fn set_app_nice(&self, uid: u32, nice: i8) {
        assert!((-20..=19).contains(&nice), "nice {nice} out of range");
        self.app_nice.borrow_mut().insert(uid, nice);
    }

    /// A process of app `uid` was created: it runs at the app's nice value, I/O class NONE.
    pub fn register(&self, pid: u32, uid: u32, comm: &str) {
        let nice = self.app_nice.borrow().get(&uid).copied().unwrap_or(0);
        self.tasks.borrow_mut().insert(
            pid,
            TaskInfo {
                uid,
                comm: comm.to_string(),
                nice,
                ioprio: IoPrio::NONE,
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

    pub fn get(&self, pid: u32) -> Option<TaskInfo> {
        self.tasks.borrow().get(&pid).cloned()
    }

    /// The io context a request allocated by task `pid` of app `uid` carries: its `ioprio` and
    /// nice value. A task never registered (a fio job's thread) runs at its app's nice value.
    pub fn io_context(&self, pid: u32, uid: u32) -> (IoPrio, i8) {
        match self.tasks.borrow().get(&pid) {
            Some(task) => (task.ioprio, task.nice),
            None => (
                IoPrio::NONE,
                self.app_nice.borrow().get(&uid).copied().unwrap_or(0),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
