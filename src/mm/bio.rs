//! The page cache's boundary with the block layer: [`BlockSubmit`] takes a bio and calls its
//! `bi_end_io` at completion, like `submit_bio`.
//!
//! Until the block layer's request queue (branch `block-layer`) is merged, [`DirectDevice`]
//! implements it by driving a [`crate::dev::BlockDevice`] directly in virtual time: a FIFO of
//! outstanding bios, at most `nr_requests` synchronous and `nr_requests` asynchronous ones
//! (submitters beyond that sleep in `get_request`, which in Linux 3.10 counts the two kinds
//! apart, `rl->count[is_sync]`), dispatched to the device as its queue depth allows.
//! It has no elevator, no plugging and no merging: the page cache already builds bios of up to
//! 512 KiB of contiguous blocks, and the sync/async distinction is carried in the bio
//! (`flags.sync`, `issued_async`) for the real queue to act on.

use crate::dev::{BlockDevice, DevCompletion, DevRequest, IoFlags, IoOp};
use crate::sim::sync::WaitQueue;
use crate::sim::{Blocker, Sim, TaskId, WaitReason};
use crate::units::Nanos;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::rc::{Rc, Weak};

/// Pages a bio carries: `count` consecutive pages of one inode from `index` (the page cache only
/// builds bios over consecutive pages with consecutive blocks, `mpage_writepages`-style).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageSpan {
    pub ino: u64,
    pub index: u64,
    pub count: u32,
}

/// A bio as the page cache builds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BioRequest {
    pub op: IoOp,
    pub sector: u64,
    pub nr_sectors: u32,
    pub flags: IoFlags,
    /// Written back on behalf of others (the flusher, kswapd): QASIO's asynchronous I/O.
    pub issued_async: bool,
    /// Whether the issuing task's app is in the foreground.
    pub foreground: bool,
    /// The submitting task (`current`), if submitted from a task.
    pub task: Option<TaskId>,
    /// Its process id.
    pub pid: u32,
    /// UID of the app that last touched the first page (FastTrack's owner of the I/O).
    pub uid: u32,
    /// The pages, for blktrace-like attribution; `None` for metadata and flushes.
    pub pages: Option<PageSpan>,
}

impl BioRequest {
    /// A bio over `count` pages starting at page-sized `block`, submitted by `issuer` itself (not
    /// on behalf of others), carrying `pages` when they belong to the page cache.
    pub fn for_pages(
        op: IoOp,
        block: u64,
        count: u32,
        flags: IoFlags,
        issuer: super::Issuer,
        pages: Option<PageSpan>,
    ) -> BioRequest {
        BioRequest {
            op,
            sector: block * super::writeback::SECTORS_PER_PAGE,
            nr_sectors: count * super::writeback::SECTORS_PER_PAGE as u32,
            flags,
            issued_async: false,
            foreground: issuer.foreground,
            task: issuer.task,
            pid: issuer.pid,
            uid: issuer.uid,
            pages,
        }
    }
}

/// `bi_end_io`: called once, at completion, with the request id.
pub type EndIo = Box<dyn FnOnce(&Sim, u64)>;

/// A boxed future, for the object-safe async method of [`BlockSubmit`].
pub type LocalBoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// `submit_bio`: queue a bio; may sleep while the queue has no free request (`get_request`).
/// Returns the request id, for waits that name it.
pub trait BlockSubmit {
    fn submit_bio<'a>(
        &'a self,
        sim: &'a Sim,
        bio: BioRequest,
        end_io: EndIo,
    ) -> LocalBoxFuture<'a, u64>;
    /// Bios submitted and not yet completed.
    fn in_flight(&self) -> usize;
    /// Names process `pid` (its `comm` and uid) for the bios it submits.
    fn register_task(&self, _pid: u32, _uid: u32, _comm: &str) {}
}

/// `nr_requests` of the legacy block layer (REFERENCES.md: 128, block/blk-core.c
/// `BLKDEV_MAX_RQ`).
pub const DEFAULT_NR_REQUESTS: usize = 128;

/// Counters of a [`DirectDevice`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirectDeviceStats {
    pub reads: u64,
    pub writes: u64,
    pub async_writes: u64,
    pub flushes: u64,
    pub read_sectors: u64,
    pub write_sectors: u64,
}

/// Drives a device directly (see the module documentation).
pub struct DirectDevice {
    me: Weak<DirectDevice>,
    device: RefCell<Box<dyn BlockDevice>>,
    nr_requests: usize,
    pending: RefCell<VecDeque<DevRequest>>,
    /// Outstanding bios: end_io and whether the bio counts as synchronous.
    end_ios: RefCell<BTreeMap<u64, (EndIo, bool)>>,
    /// Outstanding (async, sync) bios (`rl->count[]`).
    counts: Cell<[usize; 2]>,
    /// Waiters for an async / a sync request (`rl->wait[]`).
    request_wait: [WaitQueue; 2],
    armed_at: Cell<Option<Nanos>>,
    next_tag: Cell<u64>,
    stats: Cell<DirectDeviceStats>,
    completions: RefCell<Vec<DevCompletion>>,
}

impl DirectDevice {
    pub fn new(device: Box<dyn BlockDevice>, nr_requests: usize) -> Rc<DirectDevice> {
        assert!(nr_requests > 0);
        Rc::new_cyclic(|me| DirectDevice {
            me: me.clone(),
            device: RefCell::new(device),
            nr_requests,
            pending: RefCell::new(VecDeque::new()),
            end_ios: RefCell::new(BTreeMap::new()),
            counts: Cell::new([0, 0]),
            request_wait: [WaitQueue::new(), WaitQueue::new()],
            armed_at: Cell::new(None),
            next_tag: Cell::new(1),
            stats: Cell::new(DirectDeviceStats::default()),
            completions: RefCell::new(Vec::new()),
        })
    }

    pub fn stats(&self) -> DirectDeviceStats {
        self.stats.get()
    }

    pub fn capacity_sectors(&self) -> u64 {
        self.device.borrow().capacity_sectors()
    }

    fn dispatch(&self, sim: &Sim) {
        let mut device = self.device.borrow_mut();
        let mut pending = self.pending.borrow_mut();
        while device.in_flight() < device.queue_depth() {
            let Some(request) = pending.pop_front() else {
                break;
            };
            device.submit(sim.now(), request);
        }
        let next = device.next_event();
        drop(device);
        drop(pending);
        if let Some(at) = next {
            if self.armed_at.get().is_none_or(|armed| at < armed) {
                self.armed_at.set(Some(at));
                let me = self.me.clone();
                sim.schedule(at, move |sim| {
                    if let Some(me) = me.upgrade() {
                        me.on_timer(sim, at);
                    }
                });
            }
        }
    }

    fn on_timer(&self, sim: &Sim, at: Nanos) {
        if self.armed_at.get() == Some(at) {
            self.armed_at.set(None);
        }
        let mut completions = std::mem::take(&mut *self.completions.borrow_mut());
        self.device
            .borrow_mut()
            .advance(sim.now(), &mut completions);
        for done in completions.drain(..) {
            let (end_io, sync) = self
                .end_ios
                .borrow_mut()
                .remove(&done.tag)
                .expect("every completion matches one submitted bio");
            let mut counts = self.counts.get();
            counts[usize::from(sync)] -= 1;
            self.counts.set(counts);
            end_io(sim, done.tag);
            self.request_wait[usize::from(sync)].wake_one(sim);
        }
        *self.completions.borrow_mut() = completions;
        if self.armed_at.get().is_some_and(|armed| armed <= sim.now()) {
            self.armed_at.set(None);
        }
        self.dispatch(sim);
    }
}

impl BlockSubmit for DirectDevice {
    fn submit_bio<'a>(
        &'a self,
        sim: &'a Sim,
        bio: BioRequest,
        end_io: EndIo,
    ) -> LocalBoxFuture<'a, u64> {
        Box::pin(async move {
            // get_request: sleep while every request of this kind is in use. Reads and
            // REQ_SYNC writes are synchronous (`rw_is_sync`).
            let sync = bio.op == IoOp::Read || bio.flags.sync;
            while self.counts.get()[usize::from(sync)] >= self.nr_requests {
                self.request_wait[usize::from(sync)]
                    .wait(sim, WaitReason::RequestAlloc, Blocker::None)
                    .await;
            }
            let mut counts = self.counts.get();
            counts[usize::from(sync)] += 1;
            self.counts.set(counts);
            let tag = self.next_tag.get();
            self.next_tag.set(tag + 1);
            let mut stats = self.stats.get();
            match bio.op {
                IoOp::Read => {
                    stats.reads += 1;
                    stats.read_sectors += u64::from(bio.nr_sectors);
                }
                IoOp::Write => {
                    stats.writes += 1;
                    stats.write_sectors += u64::from(bio.nr_sectors);
                    if bio.issued_async {
                        stats.async_writes += 1;
                    }
                }
                IoOp::Flush => stats.flushes += 1,
                IoOp::Discard => {}
            }
            self.stats.set(stats);
            self.end_ios.borrow_mut().insert(tag, (end_io, sync));
            self.pending.borrow_mut().push_back(DevRequest {
                tag,
                op: bio.op,
                sector: bio.sector,
                nr_sectors: bio.nr_sectors,
                flags: bio.flags,
                foreground: bio.foreground,
            });
            self.dispatch(sim);
            tag
        })
    }

    fn in_flight(&self) -> usize {
        self.end_ios.borrow().len()
    }
}

/// [`BlockSubmit`] over the block layer's request queue ([`crate::block::layer::BlockLayer`]):
/// plugging, merging, `get_request`, the elevator and the device.
///
/// The page cache's end_io runs as the block layer's `bi_end_io`
/// ([`crate::block::layer::BlockLayer::submit_bio_end_io`]), in the completion event and before
/// the tasks waiting on the pages run, with no task of its own. Bios carry the
/// submitting process (`TaskRef` with the pid, uid and comm registered by
/// [`BlockSubmit::register_task`]), `REQ_SYNC`, `issued_async`, the foreground hint and their
/// pages as [`crate::block::request::PageRef`]s (owner = inode, index = page).
pub struct QueueSubmit {
    me: Weak<QueueSubmit>,
    layer: crate::block::layer::BlockLayer,
    /// Bio ids, shared with the stack's other block users (`BlockStack::next_bio`).
    next_bio: Rc<Cell<u64>>,
    in_flight: Cell<usize>,
    tasks: RefCell<BTreeMap<u32, (u32, String)>>,
}

impl QueueSubmit {
    pub fn new(layer: crate::block::layer::BlockLayer, next_bio: Rc<Cell<u64>>) -> Rc<QueueSubmit> {
        Rc::new_cyclic(|me| QueueSubmit {
            me: me.clone(),
            layer,
            next_bio,
            in_flight: Cell::new(0),
            tasks: RefCell::new(BTreeMap::new()),
        })
    }

    pub fn layer(&self) -> &crate::block::layer::BlockLayer {
        &self.layer
    }

    fn task_ref(&self, pid: u32) -> crate::block::request::TaskRef {
        let tasks = self.tasks.borrow();
        let (uid, comm) = tasks
            .get(&pid)
            .map_or((0, "?"), |(uid, comm)| (*uid, comm.as_str()));
        crate::block::request::TaskRef {
            pid,
            tgid: pid,
            uid,
            comm: comm.to_string(),
        }
    }
}

impl BlockSubmit for QueueSubmit {
    fn submit_bio<'a>(
        &'a self,
        sim: &'a Sim,
        bio: BioRequest,
        end_io: EndIo,
    ) -> LocalBoxFuture<'a, u64> {
        Box::pin(async move {
            use crate::block::request::{Bio, IoPrio, PageRef};
            let id = self.next_bio.get();
            self.next_bio.set(id + 1);
            let pages = bio.pages.map_or_else(Vec::new, |span| {
                (span.index..span.index + u64::from(span.count))
                    .map(|index| PageRef {
                        owner: span.ino,
                        index,
                    })
                    .collect()
            });
            let block_bio = Bio {
                id,
                op: bio.op,
                sector: bio.sector,
                nr_sectors: bio.nr_sectors,
                flags: bio.flags,
                task: self.task_ref(bio.pid),
                ioprio: IoPrio::NONE,
                issued_async: bio.issued_async,
                foreground: bio.foreground,
                pages,
                submitted_ns: sim.now(),
            };
            let me = self.me.clone();
            let on_completion: crate::block::layer::EndIo = Box::new(move |s, request| {
                let me = me.upgrade().expect("the adapter outlives its bios");
                me.in_flight.set(me.in_flight.get() - 1);
                end_io(s, request);
            });
            // Counted before submission: the bio may complete before the task runs again.
            self.in_flight.set(self.in_flight.get() + 1);
            let handle = self.layer.submit_bio_end_io(block_bio, on_completion).await;
            handle.request
        })
    }

    fn in_flight(&self) -> usize {
        self.in_flight.get()
    }

    fn register_task(&self, pid: u32, uid: u32, comm: &str) {
        self.tasks.borrow_mut().insert(pid, (uid, comm.to_string()));
    }
}
