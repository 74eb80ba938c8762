//! The simulated stack of one run, assembled from a variant's [`StackConfig`]: the layers the
//! apps' system calls go through. In the foundation it holds the toy server and the toy lock
//! table; the real layers (block queue, device, page cache, file system) join it issue by issue.

pub mod toy;

use crate::app::ActivityManager;
use crate::scenario::StackConfig;
use crate::sim::sync::Mutex;
use crate::sim::{Sim, WaitReason};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

pub struct Stack {
    pub activity: Rc<ActivityManager>,
    pub toy_server: Rc<toy::ToyServer>,
    named_locks: RefCell<BTreeMap<String, Mutex>>,
}

impl Stack {
    /// Builds the stack and starts its daemons.
    pub fn new(sim: &Sim, config: &StackConfig, activity: Rc<ActivityManager>) -> Rc<Stack> {
        let toy_server = toy::ToyServer::start(sim, config.toy.clone(), activity.clone());
        Rc::new(Stack {
            activity,
            toy_server,
            named_locks: RefCell::new(BTreeMap::new()),
        })
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
        counters
    }
}
