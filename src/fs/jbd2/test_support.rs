//! Fakes for tests of jbd2 and of the file systems over it: metadata buffers whose writes take
//! a fixed time and can be made to look asynchronous, ordered data that takes a fixed time, and
//! a journal over the real block layer (noop) and a fixed-latency device.

use super::*;
use crate::block::elevator::noop::Noop;
use crate::block::layer::BlockLayer;
use crate::block::queue::{AllocModel, RequestQueue};
use crate::dev::fixed::FixedLatencyDevice;
use crate::mm::bio::QueueSubmit;
use crate::sim::{Blocker, Simulation, WaitReason};
use crate::units::NS_PER_MS;
use std::collections::BTreeMap;

/// Faults a test can inject into the journal to break one of its invariants on purpose.
#[derive(Default)]
pub struct Faults {
    /// The commit does not wait for the ordered data (`journal_finish_inode_data_buffers`
    /// skipped): breaks invariant c.
    pub skip_data_wait: Cell<bool>,
}

/// One fake buffer: dirty, locked by a task, or under a write that ends at a time.
#[derive(Debug, Default, Clone, Copy)]
pub struct FakeBuffer {
    pub dirty: bool,
    pub locked: bool,
    pub write_ends: Option<u64>,
    pub pinned: bool,
}

/// Metadata buffers whose writes take `write_ns` and whose locks wait on a queue.
pub struct FakeBuffers {
    pub buffers: RefCell<BTreeMap<u64, FakeBuffer>>,
    pub queue: crate::sim::sync::WaitQueue,
    pub write_ns: u64,
    pub homes_written: RefCell<Vec<u64>>,
    pub dirtied: RefCell<Vec<(u64, u64)>>,
}

impl FakeBuffers {
    pub fn new(write_ns: u64) -> Rc<FakeBuffers> {
        Rc::new(FakeBuffers {
            buffers: RefCell::new(BTreeMap::new()),
            queue: crate::sim::sync::WaitQueue::new(),
            write_ns,
            homes_written: RefCell::new(Vec::new()),
            dirtied: RefCell::new(Vec::new()),
        })
    }

    /// Starts an asynchronous write of `block` (the flusher writing it home) that ends after
    /// `duration`.
    pub fn async_write(self: &Rc<Self>, sim: &Sim, block: u64, duration: u64) {
        let ends = sim.now() + duration;
        let mut buffers = self.buffers.borrow_mut();
        let buffer = buffers.entry(block).or_default();
        buffer.dirty = false;
        buffer.write_ends = Some(ends);
        drop(buffers);
        let me = self.clone();
        sim.schedule(ends, move |sim| {
            me.buffers.borrow_mut().get_mut(&block).unwrap().write_ends = None;
            me.queue.wake_all(sim);
        });
    }

    pub fn get(&self, block: u64) -> FakeBuffer {
        self.buffers
            .borrow()
            .get(&block)
            .copied()
            .unwrap_or_default()
    }
}

impl MetaBuffers for FakeBuffers {
    fn lock_buffer<'a>(&'a self, sim: &'a Sim, block: u64) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            loop {
                let buffer = self.get(block);
                if !buffer.locked && buffer.write_ends.is_none() {
                    self.buffers.borrow_mut().entry(block).or_default().locked = true;
                    return;
                }
                self.queue
                    .wait(sim, WaitReason::BufferLock, Blocker::Buffer(block))
                    .await;
            }
        })
    }

    fn trylock_buffer(&self, block: u64) -> bool {
        let mut buffers = self.buffers.borrow_mut();
        let buffer = buffers.entry(block).or_default();
        let free = !buffer.locked && buffer.write_ends.is_none();
        buffer.locked |= free;
        free
    }

    fn unlock_buffer(&self, sim: &Sim, block: u64) {
        self.buffers.borrow_mut().get_mut(&block).unwrap().locked = false;
        self.queue.wake_all(sim);
    }

    fn test_clear_dirty(&self, block: u64) -> bool {
        let mut buffers = self.buffers.borrow_mut();
        let buffer = buffers.entry(block).or_default();
        std::mem::replace(&mut buffer.dirty, false)
    }

    fn mark_dirty(&self, sim: &Sim, block: u64) {
        self.buffers.borrow_mut().entry(block).or_default().dirty = true;
        self.dirtied.borrow_mut().push((block, sim.now()));
    }

    fn is_clean(&self, block: u64) -> bool {
        let buffer = self.get(block);
        !buffer.dirty && buffer.write_ends.is_none()
    }

    fn write_home<'a>(&'a self, sim: &'a Sim, block: u64) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            if self.get(block).dirty {
                self.homes_written.borrow_mut().push(block);
                self.buffers.borrow_mut().get_mut(&block).unwrap().dirty = false;
                sim.sleep_for(self.write_ns, WaitReason::BlockIo, Blocker::Buffer(block))
                    .await;
            }
            while self.get(block).write_ends.is_some() {
                self.queue
                    .wait(sim, WaitReason::BufferLock, Blocker::Buffer(block))
                    .await;
            }
        })
    }

    fn pin(&self, block: u64, pinned: bool) {
        self.buffers.borrow_mut().entry(block).or_default().pinned = pinned;
    }
}

/// Ordered data whose writes of each inode take `ns`.
pub struct FakeData {
    pub ns: u64,
    pub calls: RefCell<Vec<(&'static str, u64, u64)>>,
}

impl OrderedData for FakeData {
    fn submit<'a>(&'a self, sim: &'a Sim, ino: Ino) -> LocalBoxFuture<'a, ()> {
        self.calls.borrow_mut().push(("submit", ino, sim.now()));
        Box::pin(async {})
    }

    fn wait<'a>(&'a self, sim: &'a Sim, ino: Ino) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            sim.sleep_for(self.ns, WaitReason::PageWriteback, Blocker::None)
                .await;
            self.calls.borrow_mut().push(("waited", ino, sim.now()));
        })
    }
}

pub struct Rig {
    pub sim: Simulation,
    pub journal: Rc<Journal>,
    pub buffers: Rc<FakeBuffers>,
    pub data: Rc<FakeData>,
    pub layer: BlockLayer,
    /// The log device, for tests that submit bios of their own.
    #[allow(dead_code)]
    pub bdev: Rc<QueueSubmit>,
}

/// A journal of `blocks` blocks over a 1 ms-per-request device.
pub fn rig(config: JournalConfig) -> Rig {
    let sim = Simulation::new(1);
    let queue = RequestQueue::new(
        Box::new(Noop::new()),
        Box::new(FixedLatencyDevice::new(1, NS_PER_MS, 0)),
        AllocModel::Legacy { nr_requests: 128 },
    );
    let layer = BlockLayer::new(&sim.handle(), queue);
    let bdev = QueueSubmit::new(layer.clone(), Rc::new(Cell::new(1)));
    let buffers = FakeBuffers::new(NS_PER_MS);
    let data = Rc::new(FakeData {
        ns: 3 * NS_PER_MS,
        calls: RefCell::new(Vec::new()),
    });
    let journal = Journal::load(
        &sim.handle(),
        config,
        buffers.clone(),
        data.clone(),
        bdev.clone(),
    );
    // The journal's checks, on in every build profile (a release build turns them off by
    // default; the tests of the checks must not depend on the profile).
    journal.enable_checks();
    Rig {
        sim,
        journal,
        buffers,
        data,
        layer,
        bdev,
    }
}
