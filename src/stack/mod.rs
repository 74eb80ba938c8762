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
    /// The VFS, page cache and block device of the file-level workloads (`None` on the toy
    /// stack alone). Built by [`Stack::with_storage`].
    pub vfs: Option<Rc<crate::fs::vfs::Vfs>>,
    named_locks: RefCell<BTreeMap<String, Mutex>>,
}

impl Stack {
    /// Builds the stack and starts its daemons.
    pub fn new(sim: &Sim, config: &StackConfig, activity: Rc<ActivityManager>) -> Rc<Stack> {
        let toy_server = toy::ToyServer::start(sim, config.toy.clone(), activity.clone());
        Rc::new(Stack {
            activity,
            toy_server,
            vfs: None,
            named_locks: RefCell::new(BTreeMap::new()),
        })
    }

    /// Builds the stack with the storage layers: the page cache with `vm`, a [`SimpleFs`] of
    /// `fs_size` bytes on `device` behind `block` (the block layer's request queue with an
    /// elevator, or the direct FIFO adapter), and the VFS over them; starts the flusher and
    /// kswapd.
    ///
    /// [`SimpleFs`]: crate::fs::simplefs::SimpleFs
    pub fn with_storage(
        sim: &Sim,
        config: &StackConfig,
        activity: Rc<ActivityManager>,
        vm: crate::mm::VmConfig,
        device: Box<dyn crate::dev::BlockDevice>,
        block: &BlockPath,
        fs_size: u64,
    ) -> Result<Rc<Stack>, String> {
        let toy_server = toy::ToyServer::start(sim, config.toy.clone(), activity.clone());
        let vfs = storage(sim, vm, device, block, fs_size, Some(activity.clone()))?;
        Ok(Rc::new(Stack {
            activity,
            toy_server,
            vfs: Some(vfs),
            named_locks: RefCell::new(BTreeMap::new()),
        }))
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
        if let Some(vfs) = &self.vfs {
            let mm = vfs.mm.stats();
            for (name, value) in [
                ("mm.pages_dirtied", mm.pages_dirtied),
                ("mm.pages_written_async", mm.pages_written_async),
                ("mm.pages_written_sync", mm.pages_written_sync),
                ("mm.pages_read", mm.pages_read),
                ("mm.reclaimed_clean", mm.reclaimed_clean),
                ("mm.reclaimed_dirty", mm.reclaimed_dirty),
                ("mm.direct_reclaims", mm.direct_reclaims),
                ("mm.throttle_pauses", mm.throttle_pauses),
                ("mm.write_stable_waits", mm.write_stable_waits),
                ("mm.max_dirty_writeback_pages", mm.max_dirty_writeback),
                ("vfs.errors", vfs.stats().errors),
            ] {
                counters.insert(name.to_string(), value);
            }
        }
        counters
    }
}

/// How the page cache reaches the device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockPath {
    /// The block layer's request queue with the named elevator (`noop`, `deadline`, `cfq`,
    /// `mq-deadline`) and its kernel-default request allocation.
    Queue { elevator: String },
    /// [`DirectDevice`](crate::mm::DirectDevice): FIFO, no elevator, no merging (tests).
    Direct,
}

/// The storage layers under the VFS: a [`SimpleFs`](crate::fs::simplefs::SimpleFs) of
/// `fs_size` bytes, the page cache and `block` over `device`. Errors name a bad elevator.
pub fn storage(
    sim: &Sim,
    vm: crate::mm::VmConfig,
    device: Box<dyn crate::dev::BlockDevice>,
    block: &BlockPath,
    fs_size: u64,
    activity: Option<Rc<ActivityManager>>,
) -> Result<Rc<crate::fs::vfs::Vfs>, String> {
    use crate::block::elevator::{new_elevator, QueueTraits};
    use crate::block::queue::{tag_set_depth, AllocModel, RequestQueue};
    use crate::fs::FileSystem;
    // One inode per 16 KiB of disk (mke2fs's default bytes-per-inode ratio).
    let fs: Rc<RefCell<dyn FileSystem>> = Rc::new(RefCell::new(
        crate::fs::simplefs::SimpleFs::new(fs_size, (fs_size / 16384).max(64)),
    ));
    let bdev: Rc<dyn crate::mm::BlockSubmit> = match block {
        BlockPath::Direct => {
            crate::mm::DirectDevice::new(device, crate::mm::bio::DEFAULT_NR_REQUESTS)
        }
        BlockPath::Queue { elevator } => {
            let depth = device.queue_depth();
            let traits = QueueTraits {
                // Flash: no seek penalty (QUEUE_FLAG_NONROT, set by the mmc and ufs drivers).
                nonrot: true,
                queue_depth: depth,
            };
            let scheduler = new_elevator(elevator, traits)?;
            let alloc = AllocModel::default_for(elevator, tag_set_depth(depth));
            let queue = RequestQueue::new(scheduler, device, alloc);
            let layer = crate::block::layer::BlockLayer::new(sim, queue);
            crate::mm::bio::QueueSubmit::new(sim, layer)
        }
    };
    let mm = crate::mm::Mm::start(sim, vm, fs.clone(), bdev, activity.clone());
    Ok(crate::fs::vfs::Vfs::new(sim, mm, fs, activity))
}
