//! Apps and their tasks: the context an app's task runs with (its identity, the stack, the
//! results recorder). Which app is on screen is kernel-side task state, [`crate::task::ForegroundState`],
//! which the timeline (Android's ActivityManager) sets and the lower layers read.

pub mod sqlite;
pub mod user;

use crate::report::recorder::{OpTimer, Recorder};
use crate::sim::Sim;
use crate::stack::Stack;
use std::cell::Cell;
use std::rc::Rc;

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

    /// The workload stops before its end, and says why (issue 40: no silent end): recorded as
    /// the app's `failure` in the results, printed under the table, and `mobistack run` exits
    /// with status 4. The app's other tasks stop at their next check of
    /// [`AppContext::is_stopped`]. The caller returns after this.
    pub fn fail(&self, message: impl Into<String>) {
        self.recorder
            .fail(&self.sim, &self.name, None, message.into());
        self.stop();
    }

    /// The workload could not start (set-up failed when the app was started): a failure
    /// reported under the app's own name.
    pub fn fail_to_start(&self, message: impl Into<String>) {
        let task = Some(self.name.to_string());
        self.recorder
            .fail(&self.sim, &self.name, task, message.into());
        self.stop();
    }

    /// A value the workload clamped or ignored, kept once per text in the app's `warnings`
    /// and printed under the table.
    pub fn warn(&self, message: impl Into<String>) {
        self.recorder.warn(&self.name, message.into());
    }

    pub fn add_counter(&self, counter: &str, amount: u64) {
        self.recorder.add_counter(&self.name, counter, amount);
    }
}
