//! The simulated stack of one run, assembled from a variant's [`StackConfig`]: the layers the
//! apps' system calls go through. Today: the block layer over a device model (built when an app
//! needs it), and the toy server and lock table of the foundation. Page cache and file systems
//! join it issue by issue.

pub mod toy;

use crate::app::ActivityManager;
use crate::block::fio::build_queue;
use crate::block::layer::BlockLayer;
use crate::scenario::StackConfig;
use crate::sim::sync::Mutex;
use crate::sim::{Sim, WaitReason};
use crate::units::SECTOR_SIZE;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

/// The block layer and the device under it.
pub struct BlockStack {
    pub layer: BlockLayer,
    /// Bio ids are unique across the stack.
    pub next_bio: Rc<Cell<u64>>,
    pub capacity_bytes: u64,
}

pub struct Stack {
    pub activity: Rc<ActivityManager>,
    pub toy_server: Rc<toy::ToyServer>,
    /// Present when some app issues block I/O.
    pub block: Option<BlockStack>,
    named_locks: RefCell<BTreeMap<String, Mutex>>,
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
        activity: Rc<ActivityManager>,
        with_block: bool,
    ) -> Result<Rc<Stack>, String> {
        let toy_server = toy::ToyServer::start(sim, config.toy.clone(), activity.clone());
        let block = if with_block {
            let device = crate::dev::build_device(&config.device, sim.seed())?;
            let capacity_bytes = device.capacity_sectors() * SECTOR_SIZE;
            let queue = build_queue(device, &config.block.elevator, false)?;
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
            toy_server,
            block,
            named_locks: RefCell::new(BTreeMap::new()),
            next_pid: Cell::new(FIRST_APP_PID),
        }))
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
            ] {
                counters.insert(format!("block.{name}"), value);
            }
        }
        counters
    }

    /// The device model's own statistics (NAND, GC, cache), or null without a device.
    pub fn device_stats(&self) -> serde_json::Value {
        match &self.block {
            Some(block) => block.layer.with_queue(|queue| queue.device().stats_json()),
            None => serde_json::Value::Null,
        }
    }
}
