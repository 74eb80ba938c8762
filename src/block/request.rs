//! bios and requests: what the file system hands the block layer, and what the block layer queues,
//! merges and hands the device.
//!
//! Models `struct bio` and `struct request` (include/linux/blk_types.h, include/linux/blkdev.h) and
//! the merge rules of block/blk-merge.c (`blk_rq_merge_ok`, `blk_try_merge`, `ll_back_merge_fn`,
//! `ll_front_merge_fn`).
//!
//! Simplifications:
//! - A bio is one contiguous sector range; segments, bvecs and the segment-count limit are not
//!   modelled, only the size limit (`max_sectors`).
//! - The pages a bio carries are an opaque list of [`PageRef`]s that completion hands back to the
//!   submitter; the block layer never looks inside them.
//! - Discards and flushes never merge (3.10 merges discards only in special cases).

use crate::dev::{IoFlags, IoOp};
use crate::units::{Nanos, PAGE_SIZE, SECTOR_SIZE};

/// Identifier of a bio, chosen by the block layer at submission.
pub type BioId = u64;
/// Identifier of a request (the position of its `struct request` in the pool, made unique).
pub type RequestId = u64;

/// Largest request the queue builds by merging: 512 KiB = 1024 sectors (`max_sectors_kb` 512, the
/// usual `BLK_DEF_MAX_SECTORS`-era value for eMMC/UFS hosts; docs/references.md "max request size").
pub const MAX_REQUEST_SECTORS: u32 = (512 * 1024 / SECTOR_SIZE) as u32;

/// Largest discard request (`max_discard_sectors`), separate from `max_sectors` as in Linux:
/// 128 MiB. asm: the mmc host's limit comes from the card's erase geometry and timeouts
/// (`mmc_calc_max_discard`, drivers/mmc/card/queue.c `mmc_queue_setup_discard`, 3.10) and is
/// not published for the S5's card; 128 MiB is one ext4 block group, the largest extent
/// `ext4_free_data_callback` discards at once, so an extent is one discard command.
pub const MAX_DISCARD_SECTORS: u32 = (128 * 1024 * 1024 / SECTOR_SIZE) as u32;

/// Sectors per page.
pub const SECTORS_PER_PAGE: u64 = PAGE_SIZE / SECTOR_SIZE;

pub use crate::task::{IoPrio, IoPrioClass, IOPRIO_BE_NR, IOPRIO_NORM};

/// The task on whose behalf a bio is issued (the `current` of `submit_bio`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
pub struct TaskRef {
    pub pid: u32,
    pub tgid: u32,
    pub uid: u32,
    /// `comm`, the process name that blktrace prints: shared, so that a bio's copy of its
    /// task costs a reference count, not an allocation.
    pub comm: std::rc::Rc<str>,
}

impl TaskRef {
    pub fn new(pid: u32, comm: &str) -> TaskRef {
        TaskRef {
            pid,
            tgid: pid,
            uid: 0,
            comm: comm.into(),
        }
    }
}

/// An opaque reference to a page or buffer a bio carries, handed back at completion (e.g. an
/// inode number and page index, or a buffer-head id). The page cache defines the meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct PageRef {
    pub owner: u64,
    pub index: u64,
}

/// A block I/O, as `submit_bio` receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bio {
    pub id: BioId,
    pub op: IoOp,
    /// First 512-byte sector.
    pub sector: u64,
    /// Length in sectors (0 for a pure flush).
    pub nr_sectors: u32,
    pub flags: IoFlags,
    pub task: TaskRef,
    pub ioprio: IoPrio,
    /// Issued asynchronously on behalf of others (writeback by a flusher or jbd2), which QASIO
    /// needs to tell apart from the sync I/O of the task that waits for it.
    pub issued_async: bool,
    /// Whether the issuing app is in the foreground (passed to the device as a hint).
    pub foreground: bool,
    /// The app owning the data (the pages' owner for page-cache I/O, else the submitter's
    /// uid): FastTrack §4.4's owner of an asynchronous bio, which its I/O dispatcher finds by
    /// LBA.
    pub owner_uid: u32,
    pub pages: Vec<PageRef>,
    /// When `submit_bio` was called.
    pub submitted_ns: Nanos,
}

impl Bio {
    /// Sector just past the end.
    pub fn end_sector(&self) -> u64 {
        self.sector + u64::from(self.nr_sectors)
    }

    /// `rq_is_sync` / `op_is_sync`: reads are always synchronous; writes only with REQ_SYNC.
    pub fn is_sync(&self) -> bool {
        !self.op.is_write() || self.flags.sync
    }

    /// Flushes and FUA/preflush writes go through the flush machinery, not the elevator.
    pub fn is_flush(&self) -> bool {
        self.op == IoOp::Flush || self.flags.preflush || self.flags.fua || self.flags.postflush
    }
}

/// The bios of a request, in sector order: the first inline (a request is born with one bio,
/// and under random I/O most never take another), a vector once a merge adds one, so that
/// allocating a request allocates nothing on the heap.
#[derive(Clone)]
pub struct BioIds(BioIdsRepr);

#[derive(Clone)]
enum BioIdsRepr {
    One([BioId; 1]),
    Many(Vec<BioId>),
}

impl BioIds {
    /// A request's first bio.
    pub fn one(id: BioId) -> BioIds {
        BioIds(BioIdsRepr::One([id]))
    }

    /// Appends a bio (a back merge).
    pub fn push(&mut self, id: BioId) {
        match &mut self.0 {
            BioIdsRepr::One([first]) => self.0 = BioIdsRepr::Many(vec![*first, id]),
            BioIdsRepr::Many(ids) => ids.push(id),
        }
    }

    /// Prepends a bio (a front merge).
    pub fn push_front(&mut self, id: BioId) {
        match &mut self.0 {
            BioIdsRepr::One([first]) => self.0 = BioIdsRepr::Many(vec![id, *first]),
            BioIdsRepr::Many(ids) => ids.insert(0, id),
        }
    }

    pub fn as_slice(&self) -> &[BioId] {
        match &self.0 {
            BioIdsRepr::One(one) => one,
            BioIdsRepr::Many(ids) => ids,
        }
    }
}

impl std::ops::Deref for BioIds {
    type Target = [BioId];
    fn deref(&self) -> &[BioId] {
        self.as_slice()
    }
}

impl<'a> IntoIterator for &'a BioIds {
    type Item = &'a BioId;
    type IntoIter = std::slice::Iter<'a, BioId>;
    fn into_iter(self) -> Self::IntoIter {
        self.as_slice().iter()
    }
}

impl PartialEq for BioIds {
    fn eq(&self, other: &BioIds) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for BioIds {}

impl PartialEq<Vec<BioId>> for BioIds {
    fn eq(&self, other: &Vec<BioId>) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl std::fmt::Debug for BioIds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

/// How a bio joined an existing request (`ELEVATOR_BACK_MERGE` / `ELEVATOR_FRONT_MERGE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum MergeKind {
    Back,
    Front,
}

/// A request: one or more contiguous bios the device serves as one command.
///
/// The fields live in one heap block ([`RequestFields`], reached through `Deref`), so that a
/// request moves as a pointer between the plug list, the elevator, the dispatch list, the
/// in-flight table and the completion report: a `struct request` stays where `get_request`
/// allocated it and the kernel passes pointers. (The fields by value, about 200 bytes, were
/// copied some sixteen times per request.)
#[derive(Clone, PartialEq, Eq)]
pub struct Request(Box<RequestFields>);

impl std::ops::Deref for Request {
    type Target = RequestFields;
    fn deref(&self) -> &RequestFields {
        &self.0
    }
}

impl std::ops::DerefMut for Request {
    fn deref_mut(&mut self) -> &mut RequestFields {
        &mut self.0
    }
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// The fields of a [`Request`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestFields {
    pub id: RequestId,
    pub op: IoOp,
    pub sector: u64,
    pub nr_sectors: u32,
    pub flags: IoFlags,
    /// The task that allocated the request (its first bio's task).
    pub task: TaskRef,
    pub ioprio: IoPrio,
    /// The allocating task's nice value (`task_nice(current)` at `cfq_set_request`): the
    /// level of an `IOPRIO_CLASS_NONE` request's queue.
    pub nice: i8,
    /// The allocating task's `ioc->ioprio` (what `ioprio_set` left; class NONE by default), which
    /// BFQ reads for the queue's class and weight (`bfq_check_ioprio_change`), where `ioprio` is
    /// the request's own priority (`req_get_ioprio`, after blk-ioprio on blk-mq queues).
    pub ioc_ioprio: IoPrio,
    /// The cgroup of the allocating task (`rq->bio->bi_blkg`).
    pub blkcg: crate::task::Blkcg,
    pub issued_async: bool,
    pub foreground: bool,
    /// The first bio's [`Bio::owner_uid`].
    pub owner_uid: u32,
    /// Seed 003's class of the allocating task's app (plain unless the scenario says).
    pub app_class: crate::task::AppIoClass,
    /// Bios in sector order.
    pub bios: BioIds,
    pub pages: Vec<PageRef>,
    /// `rq->start_time`: when the request was allocated (`get_request`).
    pub start_ns: Nanos,
    /// When it was inserted into the elevator.
    pub inserted_ns: Nanos,
    /// `rq->fifo_time`: the elevator's deadline for it (set by the elevator at insertion).
    pub fifo_time_ns: Nanos,
    /// When the driver took it (blktrace D, `blk_start_request`), once issued.
    pub issued_ns: Option<Nanos>,
    /// When it reached the device: at D, or later for a request the mmc driver fetched ahead
    /// while the card was busy.
    pub device_start_ns: Option<Nanos>,
    /// `rq->wbt_flags`: what writeback throttling accounts this request as.
    pub wbt: super::wbt::WbtFlags,
}

impl Request {
    /// The command the device receives for this request, tagged with its id (the request
    /// queue tags it with its in-flight slot instead, [`super::tags::InFlight`]). The host driver
    /// sets the command's priority bit for requests of the RT I/O class (ufshcd's Command
    /// Priority, `IOPRIO_CLASS_RT`; the eMMC CMDQ task priority bit likewise), on top of
    /// REQ_PRIO.
    pub fn dev_request(&self) -> crate::dev::DevRequest {
        let mut flags = self.flags;
        flags.prio |= self.ioprio.class == IoPrioClass::Rt;
        crate::dev::DevRequest {
            tag: self.id,
            op: self.op,
            sector: self.sector,
            nr_sectors: self.nr_sectors,
            flags,
            foreground: self.foreground,
        }
    }

    /// `blk_rq_init` + `init_request_from_bio`.
    pub fn from_bio(id: RequestId, bio: &Bio, now: Nanos) -> Request {
        Request(Box::new(RequestFields::from_bio(
            id,
            bio,
            now,
            bio.pages.clone(),
        )))
    }

    /// [`Request::from_bio`] in the heap block of a freed request (the request pool's
    /// `mempool_alloc` of a `struct request` that `blk_put_request` returned): the block and
    /// the page list's capacity are reused, nothing else of the old request is kept.
    pub fn reinit_from_bio(&mut self, id: RequestId, bio: &Bio, now: Nanos) {
        let mut pages = std::mem::take(&mut self.0.pages);
        pages.clear();
        pages.extend_from_slice(&bio.pages);
        *self.0 = RequestFields::from_bio(id, bio, now, pages);
    }
}

impl RequestFields {
    fn from_bio(id: RequestId, bio: &Bio, now: Nanos, pages: Vec<PageRef>) -> RequestFields {
        RequestFields {
            id,
            op: bio.op,
            sector: bio.sector,
            nr_sectors: bio.nr_sectors,
            flags: bio.flags,
            task: bio.task.clone(),
            ioprio: bio.ioprio,
            nice: 0,
            ioc_ioprio: IoPrio::NONE,
            blkcg: crate::task::Blkcg::default(),
            issued_async: bio.issued_async,
            foreground: bio.foreground,
            owner_uid: bio.owner_uid,
            app_class: crate::task::AppIoClass::Plain,
            bios: BioIds::one(bio.id),
            pages,
            start_ns: now,
            inserted_ns: now,
            fifo_time_ns: 0,
            issued_ns: None,
            device_start_ns: None,
            wbt: super::wbt::WbtFlags::default(),
        }
    }
}

impl Request {
    pub fn end_sector(&self) -> u64 {
        self.sector + u64::from(self.nr_sectors)
    }

    pub fn is_sync(&self) -> bool {
        !self.op.is_write() || self.flags.sync
    }

    pub fn is_write(&self) -> bool {
        self.op.is_write()
    }

    pub fn bytes(&self) -> u64 {
        u64::from(self.nr_sectors) * SECTOR_SIZE
    }

    /// `blk_rq_merge_ok` (3.10): same data direction and op, both mergeable (no flush/FUA), and
    /// the merged size within `max_sectors` (`ll_back_merge_fn`). Sync-ness is not compared here:
    /// CFQ refuses a sync bio into an async request through its queue check
    /// (`cfq_allow_merge`); noop and deadline merge them. Elevators add their own rules
    /// (`elv_rq_merge_ok` -> `elevator_allow_merge_fn`).
    pub fn merge_ok(&self, bio: &Bio, max_sectors: u32) -> bool {
        let mergeable_op = matches!(self.op, IoOp::Read | IoOp::Write);
        mergeable_op
            && self.op == bio.op
            && !bio.is_flush()
            && !self.flags.fua
            && !self.flags.preflush
            && !self.flags.postflush
            && self.nr_sectors + bio.nr_sectors <= max_sectors
    }

    /// `blk_try_merge`: where the bio would join this request, if it is adjacent.
    pub fn try_merge(&self, bio: &Bio) -> Option<MergeKind> {
        if self.end_sector() == bio.sector {
            Some(MergeKind::Back)
        } else if bio.end_sector() == self.sector {
            Some(MergeKind::Front)
        } else {
            None
        }
    }

    /// `bio_attempt_back_merge` / `bio_attempt_front_merge`: appends or prepends the bio. The
    /// request keeps its task and its flags (3.10 only reconciles the failfast bits) and takes
    /// the better I/O priority (`ioprio_best`). The foreground hint, mobistack's own, is OR-ed.
    pub fn merge_bio(&mut self, bio: &Bio, kind: MergeKind) {
        assert_eq!(
            self.try_merge(bio),
            Some(kind),
            "merge of a non-adjacent bio"
        );
        match kind {
            MergeKind::Back => {
                self.bios.push(bio.id);
                self.pages.extend_from_slice(&bio.pages);
            }
            MergeKind::Front => {
                self.sector = bio.sector;
                self.bios.push_front(bio.id);
                let mut pages = bio.pages.clone();
                pages.append(&mut self.pages);
                self.pages = pages;
            }
        }
        self.nr_sectors += bio.nr_sectors;
        if self.ioprio != bio.ioprio {
            self.ioprio = IoPrio::best(self.ioprio, bio.ioprio);
        }
        self.foreground |= bio.foreground;
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    use super::*;

    /// A bio for tests: `op` at `sector`, `nr_sectors` long, from `pid`.
    pub fn bio(id: BioId, op: IoOp, sector: u64, nr_sectors: u32, pid: u32) -> Bio {
        Bio {
            id,
            op,
            sector,
            nr_sectors,
            flags: IoFlags::default(),
            task: TaskRef::new(pid, &format!("task{pid}")),
            ioprio: IoPrio::NONE,
            issued_async: false,
            foreground: false,
            owner_uid: 0,
            pages: Vec::new(),
            submitted_ns: 0,
        }
    }

    pub fn request(id: RequestId, op: IoOp, sector: u64, nr_sectors: u32, pid: u32) -> Request {
        Request::from_bio(id, &bio(id, op, sector, nr_sectors, pid), 0)
    }

    /// A device that queues up to 32 commands and serves them one at a time, FIFO, each taking
    /// `service_ns`: a read queued behind writes waits for them inside the device, which is
    /// what latency-driven throttles (wbt, kyber) watch.
    pub struct SerialDevice {
        service_ns: Nanos,
        queue: std::collections::VecDeque<(u64, Nanos)>,
        busy: Option<(u64, Nanos, Nanos)>,
    }

    impl SerialDevice {
        pub fn new(service_ns: Nanos) -> SerialDevice {
            SerialDevice {
                service_ns,
                queue: Default::default(),
                busy: None,
            }
        }
    }

    impl crate::dev::BlockDevice for SerialDevice {
        fn name(&self) -> &str {
            "serial"
        }
        fn capacity_sectors(&self) -> u64 {
            1 << 40
        }
        fn queue_depth(&self) -> usize {
            32
        }
        fn in_flight(&self) -> usize {
            self.queue.len() + usize::from(self.busy.is_some())
        }
        fn submit(&mut self, now: Nanos, request: crate::dev::DevRequest) {
            self.queue.push_back((request.tag, now));
            if self.busy.is_none() {
                let (tag, submitted) = self.queue.pop_front().unwrap();
                self.busy = Some((tag, submitted, now + self.service_ns));
            }
        }
        fn next_event(&self) -> Option<Nanos> {
            self.busy.map(|(_, _, done)| done)
        }
        fn advance(&mut self, now: Nanos, completions: &mut Vec<crate::dev::DevCompletion>) {
            while let Some((tag, submitted, done)) = self.busy {
                if done > now {
                    break;
                }
                completions.push(crate::dev::DevCompletion {
                    tag,
                    submitted_ns: submitted,
                    completed_ns: done,
                });
                self.busy = self
                    .queue
                    .pop_front()
                    .map(|(tag, submitted)| (tag, submitted, done + self.service_ns));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::*;
    use super::*;

    /// A request rebuilt in a freed one's heap block equals a new one: nothing of the old
    /// request (merged bios, pages, times, priorities) survives.
    #[test]
    fn a_reused_request_equals_a_new_one() {
        let mut old = request(1, IoOp::Write, 100, 8, 1);
        let mut back = bio(2, IoOp::Write, 108, 8, 1);
        back.pages = vec![PageRef { owner: 7, index: 3 }; 5];
        old.merge_bio(&back, MergeKind::Back);
        old.issued_ns = Some(9);
        old.device_start_ns = Some(10);
        old.fifo_time_ns = 11;
        old.nice = 4;
        let mut fresh = bio(3, IoOp::Read, 4000, 16, 2);
        fresh.pages = vec![PageRef { owner: 1, index: 2 }];
        fresh.foreground = true;
        old.reinit_from_bio(30, &fresh, 77);
        assert_eq!(old, Request::from_bio(30, &fresh, 77));
        fresh.pages.clear();
        old.reinit_from_bio(31, &fresh, 78);
        assert_eq!(old, Request::from_bio(31, &fresh, 78));
    }

    #[test]
    fn adjacent_bios_merge_back_and_front() {
        let mut rq = request(1, IoOp::Write, 100, 8, 1);
        let back = bio(2, IoOp::Write, 108, 8, 1);
        let front = bio(3, IoOp::Write, 92, 8, 1);
        assert_eq!(rq.try_merge(&back), Some(MergeKind::Back));
        assert_eq!(rq.try_merge(&front), Some(MergeKind::Front));
        rq.merge_bio(&back, MergeKind::Back);
        rq.merge_bio(&front, MergeKind::Front);
        assert_eq!((rq.sector, rq.nr_sectors), (92, 24));
        assert_eq!(rq.bios, vec![3, 1, 2]);
        assert_eq!(rq.try_merge(&bio(4, IoOp::Write, 200, 8, 1)), None);
    }

    #[test]
    fn bio_ids_keep_sector_order_inline_and_spilled() {
        let mut ids = BioIds::one(5);
        assert_eq!(ids, vec![5]);
        assert_eq!(ids.len(), 1);
        let inline = ids.clone();
        ids.push(6);
        ids.push_front(4);
        ids.push(7);
        assert_eq!(ids, vec![4, 5, 6, 7]);
        assert_ne!(ids, inline);
        let mut front = BioIds::one(9);
        front.push_front(8);
        assert_eq!(front.as_slice(), &[8, 9]);
        assert_eq!((&front).into_iter().copied().sum::<u64>(), 17);
        assert_eq!(format!("{front:?}"), "[8, 9]");
    }

    #[test]
    fn merge_respects_size_direction_and_flush_flags() {
        let rq = request(1, IoOp::Write, 0, MAX_REQUEST_SECTORS - 8, 1);
        assert!(rq.merge_ok(&bio(2, IoOp::Write, 1016, 8, 1), MAX_REQUEST_SECTORS));
        assert!(!rq.merge_ok(&bio(2, IoOp::Write, 1016, 16, 1), MAX_REQUEST_SECTORS));
        assert!(!rq.merge_ok(&bio(2, IoOp::Read, 1016, 8, 1), MAX_REQUEST_SECTORS));
        let mut sync_write = bio(2, IoOp::Write, 1016, 8, 1);
        sync_write.flags.sync = true;
        assert!(rq.merge_ok(&sync_write, MAX_REQUEST_SECTORS));
        let mut fua = bio(2, IoOp::Write, 1016, 8, 1);
        fua.flags.fua = true;
        assert!(!rq.merge_ok(&fua, MAX_REQUEST_SECTORS));
        let discard = request(3, IoOp::Discard, 0, 8, 1);
        assert!(!discard.merge_ok(&bio(4, IoOp::Discard, 8, 8, 1), MAX_REQUEST_SECTORS));
    }

    #[test]
    fn ioprio_best_prefers_class_then_level() {
        let rt7 = IoPrio::new(IoPrioClass::Rt, 7);
        let be0 = IoPrio::new(IoPrioClass::Be, 0);
        assert_eq!(IoPrio::best(be0, rt7), rt7);
        assert_eq!(IoPrio::best(IoPrio::NONE, be0), be0);
        let idle = IoPrio::new(IoPrioClass::Idle, 0);
        assert_eq!(
            IoPrio::best(idle, IoPrio::NONE),
            IoPrio::new(IoPrioClass::Be, 4)
        );
        let mut rq = request(1, IoOp::Write, 0, 8, 1);
        let mut rt_bio = bio(2, IoOp::Write, 8, 8, 1);
        rt_bio.ioprio = rt7;
        rq.merge_bio(&rt_bio, MergeKind::Back);
        assert_eq!(rq.ioprio, rt7, "a merged request takes the best priority");
    }

    #[test]
    fn the_driver_sets_the_command_priority_bit_for_rt_requests() {
        let mut rq = request(1, IoOp::Read, 0, 8, 1);
        assert!(!rq.dev_request().flags.prio);
        rq.ioprio = IoPrio::new(IoPrioClass::Rt, 4);
        assert!(rq.dev_request().flags.prio, "IOPRIO_CLASS_RT -> CP");
        assert!(!rq.flags.prio, "REQ_PRIO (which CFQ reads) is unchanged");
        rq.ioprio = IoPrio::new(IoPrioClass::Be, 0);
        assert!(!rq.dev_request().flags.prio);
    }

    #[test]
    fn ioprio_none_is_best_effort_four() {
        assert_eq!(IoPrio::NONE.effective(), IoPrio::new(IoPrioClass::Be, 4));
        assert_eq!(
            IoPrio::new(IoPrioClass::Idle, 0).effective().class,
            IoPrioClass::Idle
        );
    }
}
