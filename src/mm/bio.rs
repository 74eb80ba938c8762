//! The page cache's boundary with the block layer: [`BlockSubmit`] takes a bio and calls its
//! `bi_end_io` at completion, like `submit_bio`. [`QueueSubmit`] implements it over the block
//! layer's request queue; every page-cache I/O goes through it (there is no path around the
//! block layer, so what tests measure is what scenarios run).

use crate::dev::{IoFlags, IoOp};
use crate::sim::{Blocker, Sim, TaskId, WaitReason, WakeToken};
use crate::units::Nanos;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
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
    /// A task paused in `balance_dirty_pages` now (`bdi->last_bdp_sleep`, which writeback
    /// throttling reads).
    fn note_dirty_sleep(&self, _sim: &Sim) {}
    /// `bdi_write_congested` / `nr_bdi_congested[BLK_RW_ASYNC] > 0`: the device's request list
    /// is over its congestion threshold.
    fn congested(&self) -> bool {
        false
    }
    /// `congestion_wait(BLK_RW_ASYNC, timeout)`: sleeps (reason `congestion_wait`) until a
    /// request is freed while the device is under its congestion-off threshold
    /// (`clear_bdi_congested` wakes the waiters) or `timeout` passes.
    fn congestion_wait<'a>(&'a self, sim: &'a Sim, timeout: Nanos) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            sim.sleep_for(timeout, WaitReason::CongestionWait, Blocker::None)
                .await;
        })
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
    /// `BDI_async_congested`, and the tasks in `congestion_wait` (`congestion_wqh`).
    congested: Cell<bool>,
    /// One entry per task: a task waits once at a time, so its newest token replaces one left
    /// behind by a wait that ended by its timeout.
    congestion_waiters: RefCell<BTreeMap<TaskId, WakeToken>>,
}

/// `queue_congestion_on_threshold` / `queue_congestion_off_threshold` of a request list of
/// `nr_requests` (`blk_queue_congestion_threshold`, block/blk-core.c): 113 and 103 for 128.
pub fn congestion_thresholds(nr_requests: usize) -> (usize, usize) {
    let on = (nr_requests - nr_requests / 8 + 1).min(nr_requests);
    let off = (nr_requests - nr_requests / 8)
        .saturating_sub(nr_requests / 16 + 1)
        .max(1);
    (on, off)
}

impl QueueSubmit {
    pub fn new(layer: crate::block::layer::BlockLayer, next_bio: Rc<Cell<u64>>) -> Rc<QueueSubmit> {
        Rc::new_cyclic(|me| QueueSubmit {
            me: me.clone(),
            layer,
            next_bio,
            in_flight: Cell::new(0),
            tasks: RefCell::new(BTreeMap::new()),
            congested: Cell::new(false),
            congestion_waiters: RefCell::new(BTreeMap::new()),
        })
    }

    /// The request list's congestion thresholds, or `None` for blk-mq scheduler tags (blk-mq
    /// never marks a device congested).
    fn thresholds(&self) -> Option<(usize, usize)> {
        match self.layer.with_queue(|q| q.alloc_model()) {
            crate::block::queue::AllocModel::Legacy { nr_requests } => {
                Some(congestion_thresholds(nr_requests))
            }
            crate::block::queue::AllocModel::Mq { .. } => None,
        }
    }

    /// After a request was allocated (`__get_request`: congested once the list reaches the on
    /// threshold).
    fn note_allocated(&self) {
        if let Some((on, _)) = self.thresholds() {
            if self.layer.with_queue(|q| q.allocated()) >= on {
                self.congested.set(true);
            }
        }
    }

    /// After a request was freed (`__freed_request`: under the off threshold the device is
    /// not congested and `clear_bdi_congested` wakes the congestion waiters).
    fn note_freed(&self, sim: &Sim) {
        let Some((_, off)) = self.thresholds() else {
            return;
        };
        if self.layer.with_queue(|q| q.allocated()) < off {
            self.congested.set(false);
            let waiters = std::mem::take(&mut *self.congestion_waiters.borrow_mut());
            for token in waiters.into_values() {
                sim.wake(token);
            }
        }
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
                me.note_freed(s);
            });
            // Counted before submission: the bio may complete before the task runs again.
            self.in_flight.set(self.in_flight.get() + 1);
            let handle = self.layer.submit_bio_end_io(block_bio, on_completion).await;
            self.note_allocated();
            handle.request
        })
    }

    fn in_flight(&self) -> usize {
        self.in_flight.get()
    }

    fn note_dirty_sleep(&self, _sim: &Sim) {
        self.layer.note_dirty_sleep();
    }

    fn register_task(&self, pid: u32, uid: u32, comm: &str) {
        self.layer.register_task(pid, uid, comm);
        self.tasks.borrow_mut().insert(pid, (uid, comm.to_string()));
    }

    fn congested(&self) -> bool {
        self.congested.get()
    }

    fn congestion_wait<'a>(&'a self, sim: &'a Sim, timeout: Nanos) -> LocalBoxFuture<'a, ()> {
        Box::pin(CongestionWait {
            submit: self,
            sim,
            timeout,
            token: None,
        })
    }
}

/// The future of [`QueueSubmit`]'s `congestion_wait`: `io_schedule_timeout` on
/// `congestion_wqh`.
struct CongestionWait<'a> {
    submit: &'a QueueSubmit,
    sim: &'a Sim,
    timeout: Nanos,
    token: Option<WakeToken>,
}

impl Future for CongestionWait<'_> {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        match self.token {
            Some(token) if self.sim.was_woken(token) => std::task::Poll::Ready(()),
            Some(_) => std::task::Poll::Pending,
            None => {
                let token = self
                    .sim
                    .block_current(WaitReason::CongestionWait, Blocker::None, None);
                self.sim.wake_at(self.sim.now() + self.timeout, token);
                self.submit
                    .congestion_waiters
                    .borrow_mut()
                    .insert(token.task, token);
                self.token = Some(token);
                std::task::Poll::Pending
            }
        }
    }
}
