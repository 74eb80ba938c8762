//! Apps and their tasks: the activity manager (which app is on screen), and the context an app's
//! task runs with (its identity, the stack, the results recorder).

use crate::report::recorder::{OpTimer, Recorder};
use crate::sim::Sim;
use crate::stack::Stack;
use std::cell::Cell;
use std::rc::Rc;

/// Which app is in the foreground: the UID of the top activity (FastTrack §4.1's app status
/// detector reads the same fact from the ActivityManager).
#[derive(Debug, Default)]
pub struct ActivityManager {
    foreground_uid: Cell<Option<u32>>,
    switches: Cell<u64>,
}

impl ActivityManager {
    pub fn new(foreground_uid: Option<u32>) -> Self {
        ActivityManager {
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

    pub fn switches(&self) -> u64 {
        self.switches.get()
    }
}

/// What an app's task runs with.
#[derive(Clone)]
pub struct AppContext {
    pub sim: Sim,
    pub index: usize,
    pub name: Rc<str>,
    pub uid: u32,
    pub stack: Rc<Stack>,
    pub recorder: Rc<Recorder>,
    stopped: Rc<Cell<bool>>,
}

impl AppContext {
    pub fn new(
        sim: Sim,
        index: usize,
        name: &str,
        uid: u32,
        stack: Rc<Stack>,
        recorder: Rc<Recorder>,
    ) -> Self {
        AppContext {
            sim,
            index,
            name: Rc::from(name),
            uid,
            stack,
            recorder,
            stopped: Rc::new(Cell::new(false)),
        }
    }

    /// Whether the timeline stopped this app; workloads check it between operations.
    pub fn is_stopped(&self) -> bool {
        self.stopped.get()
    }

    pub fn stop(&self) {
        self.stopped.set(true);
    }

    /// Starts timing operation `op` of the current task.
    pub fn begin_op(&self, op: &'static str) -> OpTimer {
        self.recorder.begin_op(&self.sim, &self.name, op)
    }

    /// Records the operation's latency and the time the task was blocked during it, per reason.
    pub fn end_op(&self, timer: OpTimer) {
        self.recorder.end_op(&self.sim, &self.name, timer);
    }

    pub fn add_counter(&self, counter: &str, amount: u64) {
        self.recorder.add_counter(&self.name, counter, amount);
    }
}
