//! Queue merging of block/bfq-iosched.c: the queues of cooperating processes are merged into
//! one shared queue, served as one stream, and split again when the shared queue turns seeky.
//!
//! - **Cooperators** (Early Queue Merge, 4.12: 36eca8948323 "block, bfq: add Early Queue Merge
//!   (EQM)"). When a sync request (`__bfq_insert_request`) or bio (`bfq_allow_bio_merge`)
//!   arrives, `bfq_setup_cooperator` looks for a queue whose I/O is within `BFQQ_CLOSE_THR`
//!   (8192 sectors, 4 MiB) of it: first the in-service queue (close to `in_serv_last_pos`,
//!   the end of its last dispatched request), then the queue whose next request is nearest
//!   (`bfq_find_close_cooperator`, `bfqq_find_close` over the group's `rq_pos_tree`).
//!   `bfq_may_be_close_cooperator`: both sync, same class and not idle, neither seeky
//!   (`BFQQ_SEEKY`), the candidate not too late for merging; and the two in the same group
//!   (`entity.parent`). `bfq_too_late_for_merging`: a queue that has received service since it
//!   last became busy, more than `bfq_merge_time_limit` (HZ / 10) after its first I/O of that
//!   period, is not merged (true cooperators start together). `bfq_setup_merge` schedules the
//!   redirection (`bfqq->new_bfqq`, at the end of any chain) and `bfq_merge_bfqqs` performs it
//!   on the process's next request: its io_context then points to the shared queue (`coop`),
//!   which inherits its weight raising, I/O-bound flag and waker; the state of both queues is
//!   saved in their processes' io_contexts (`bfq_bfqq_save_state`).
//!   Since 5.2 none of this happens on flash with command queueing (`nonrot_with_queueing`:
//!   non-rotational, and `hw_tag` not disproved): [`KernelVersion::bfq_merges_cooperators_on_queueing_flash`].
//! - **Split** (`bfq_get_bfqq_handle_split`, `bfq_split_bfqq`): a shared queue found seeky
//!   (`BFQQ_SEEKY`) at an expiration is marked `split_coop` (`__bfq_bfqq_expire`); the next
//!   request of each of its processes gives that process a queue of its own again (the shared
//!   queue itself if it is the last one), with the state saved at the merge
//!   (`bfq_bfqq_resume_state`), its burst membership and its waker; `split_time` keeps the new
//!   queue out of burst detection and think-time updates for a while.
//! - **Stable merge** (5.13, 430a67f9d616 "block, bfq: merge bursts of newly-created queues";
//!   600 ms constants from 5.14's 7812472f9730): [`KernelVersion::has_bfq_stable_merge`]. A new
//!   sync queue created within `bfq_burst_interval` (180 ms) of the last one created in its
//!   group (`last_bfqq_created`), with the same `ioprio` and class, is merged with it at
//!   creation on flash with queueing (`bfq_do_early_stable_merge`); elsewhere the merge is
//!   scheduled (`bic->stable_merge_bfqq`) and done by `bfq_setup_cooperator` once the queue is
//!   `bfq_late_stable_merging` (600 ms) old, unless idling boosts its throughput
//!   (`bfq_setup_stable_merge`). `last_bfqq_created` moves to a new queue only when that is
//!   created more than `bfq_activation_stable_merging` (600 ms) after it, or with another
//!   priority. A stably merged process (`stably_merged`) is never split.
//!
//! Simplifications:
//! - `bfqq_find_close` scans the group's queues for the next requests nearest below and above
//!   the sector and tries the nearer first (the kernel tries the rb-tree parent of the leaf,
//!   then its neighbour on the other side); queues whose next requests share a sector all count
//!   (the kernel's tree keeps the first); the tree membership tests (`bfq_too_late_for_merging`,
//!   idle class) are made at the lookup instead of at `bfq_pos_tree_add_move`.
//! - Reference counts are process references only (`bfqq_process_refs`); queues are never
//!   freed, a queue left without processes leaves the burst list when its last process
//!   reference goes.
//! - No OOM queue; one actuator.
//! - `bfq_setup_cooperator` follows an existing `new_bfqq` before the too-late test (mainline
//!   order; 4.19 tests first).
//!
//! [`KernelVersion::bfq_merges_cooperators_on_queueing_flash`]: crate::kernel::KernelVersion::bfq_merges_cooperators_on_queueing_flash
//! [`KernelVersion::has_bfq_stable_merge`]: crate::kernel::KernelVersion::has_bfq_stable_merge

use super::queue::{QueueId, Ttime, SMALLEST_FROM_NOW};
use super::{Bfq, Jiffies};
use crate::units::Nanos;

/// `BFQQ_CLOSE_THR = 8 * 1024` sectors.
pub const BFQQ_CLOSE_THR: u64 = 8 * 1024;
/// `bfq_activation_stable_merging = 600` ms (7812472f9730).
const BFQ_ACTIVATION_STABLE_MERGING_MS: u64 = 600;
/// `bfq_late_stable_merging = 600` ms (7812472f9730).
const BFQ_LATE_STABLE_MERGING_MS: u64 = 600;

/// The `saved_*` fields of `struct bfq_iocq_bfqq_data`.
#[derive(Debug, Clone, Default)]
pub struct SavedState {
    pub has_short_ttime: bool,
    pub io_bound: bool,
    pub last_serv_time_ns: Nanos,
    pub inject_limit: u32,
    pub decrease_time_jif: Jiffies,
    /// `saved_weight` (the entity's `orig_weight`; 0 = never saved).
    pub weight: u32,
    pub ttime: Ttime,
    pub io_start_time: Nanos,
    pub tot_idle_time: Nanos,
    pub in_large_burst: bool,
    pub was_in_burst_list: bool,
    pub wr_coeff: u32,
    pub wr_start_at_switch_to_srt: Jiffies,
    pub service_from_wr: u64,
    pub last_wr_start_finish: Jiffies,
    pub wr_cur_max_time: Jiffies,
}

impl Bfq {
    /// Whether `bfq_setup_cooperator` looks for close cooperators on this device in this era
    /// (not on flash with queueing since 5.2).
    fn coop_merging_enabled(&self) -> bool {
        !self.nonrot_with_queueing || self.t.kernel.bfq_merges_cooperators_on_queueing_flash()
    }

    /// Whether a sync request or bio of queue `q` may lead `bfq_setup_cooperator` anywhere: a
    /// cheap test that keeps the common case (no merging possible) off the lookup.
    pub(super) fn may_cooperate(&self, q: QueueId, pid: u32) -> bool {
        self.queues[q].sync
            && (self.queues[q].new_bfqq.is_some()
                || self.coop_merging_enabled()
                || self
                    .bics
                    .get(&pid)
                    .is_some_and(|bic| bic.stable_merge_bfqq.is_some()))
    }

    /// `bfq_too_late_for_merging`.
    pub(super) fn too_late_for_merging(&self, q: QueueId) -> bool {
        let queue = &self.queues[q];
        let merge_time_limit = self.hz.over(10) as Jiffies;
        queue.service_from_backlogged > 0 && queue.first_io_time + merge_time_limit < self.jiffies()
    }

    /// `bfq_find_close_cooperator` / `bfqq_find_close`: the queue of `q`'s group whose next
    /// request starts nearest `sector`, within `BFQQ_CLOSE_THR`, unless that is `q` itself.
    fn find_close_cooperator(&self, q: QueueId, sector: u64) -> Option<QueueId> {
        let group = self.queues[q].group;
        let mut below: Option<(u64, QueueId)> = None;
        let mut above: Option<(u64, QueueId)> = None;
        for (candidate, queue) in self.queues.iter().enumerate() {
            // bfq_pos_tree_add_move: idle-class queues, queues without a next request and
            // queues too late for merging are not in the tree.
            if queue.group != group || queue.ioprio_class_idx == 2 {
                continue;
            }
            let Some(next) = queue.next_rq else {
                continue;
            };
            if self.too_late_for_merging(candidate) {
                continue;
            }
            let pos = self.store.get(next).sector;
            if pos <= sector {
                if below.is_none_or(|(best, _)| pos > best) {
                    below = Some((pos, candidate));
                }
            } else if above.is_none_or(|(best, _)| pos < best) {
                above = Some((pos, candidate));
            }
        }
        let mut nearest: Vec<(u64, QueueId)> = [below, above]
            .into_iter()
            .flatten()
            .map(|(pos, candidate)| (pos.abs_diff(sector), candidate))
            .collect();
        nearest.sort_unstable();
        let (distance, found) = *nearest.first()?;
        (distance <= BFQQ_CLOSE_THR && found != q).then_some(found)
    }

    /// `bfq_setup_merge`: schedules the redirection of `q`'s processes to `new` (the end of
    /// `new`'s chain), taking their references in advance.
    fn setup_merge(&mut self, q: QueueId, new: QueueId) -> Option<QueueId> {
        if self.queues[new].process_refs == 0 {
            return None;
        }
        let mut new = new;
        for _ in 0..self.queues.len() {
            match self.queues[new].new_bfqq {
                Some(next) if next == q => return None,
                Some(next) => new = next,
                None => break,
            }
        }
        let process_refs = self.queues[q].process_refs;
        if process_refs == 0 || self.queues[new].process_refs == 0 {
            return None;
        }
        if self.queues[new].group != self.queues[q].group {
            return None;
        }
        self.queues[q].new_bfqq = Some(new);
        self.queues[new].process_refs += process_refs;
        Some(new)
    }

    /// `bfq_may_be_close_cooperator`.
    fn may_be_close_cooperator(&self, q: QueueId, new: QueueId) -> bool {
        let (a, b) = (&self.queues[q], &self.queues[new]);
        !self.too_late_for_merging(new)
            && a.ioprio_class_idx != 2
            && b.ioprio_class_idx != 2
            && a.ioprio_class_idx == b.ioprio_class_idx
            && !self.seeky(q)
            && !self.seeky(new)
            && a.sync
            && b.sync
    }

    /// `bfq_setup_stable_merge`: the delayed stable merge of process `pid`'s queue `q` with
    /// `stable`, unless idling boosts `q`'s throughput.
    fn setup_stable_merge(&mut self, q: QueueId, stable: QueueId, pid: u32) -> Option<QueueId> {
        let proc_ref = self.queues[q]
            .process_refs
            .min(self.queues[stable].process_refs);
        self.bics.get_mut(&pid)?.stable_merge_bfqq = None;
        if self.idling_boosts_thr_without_issues(q) || proc_ref == 0 {
            return None;
        }
        let new = self.setup_merge(q, stable)?;
        self.mark_stably_merged(pid, new);
        Some(new)
    }

    /// `bic->stably_merged` for process `pid` and for the owner of `new`, if it has one.
    fn mark_stably_merged(&mut self, pid: u32, new: QueueId) {
        if let Some(owner) = self.queues[new].bic {
            if let Some(bic) = self.bics.get_mut(&owner) {
                bic.stably_merged = true;
            }
        }
        if let Some(bic) = self.bics.get_mut(&pid) {
            bic.stably_merged = true;
        }
        self.stats.stable_merges += 1;
    }

    /// `bfq_setup_cooperator`: the queue the I/O of process `pid` at `sector`, arriving for
    /// its sync queue `q`, is to be redirected to, if any.
    pub(super) fn setup_cooperator(
        &mut self,
        q: QueueId,
        sector: u64,
        pid: u32,
    ) -> Option<QueueId> {
        if let Some(mut new) = self.queues[q].new_bfqq {
            for _ in 0..self.queues.len() {
                match self.queues[new].new_bfqq {
                    Some(next) => new = next,
                    None => break,
                }
            }
            return Some(new);
        }
        if self.t.kernel.has_bfq_stable_merge() && !self.nonrot_with_queueing {
            let late = self.msecs(BFQ_LATE_STABLE_MERGING_MS);
            let jiffies = self.jiffies();
            let queue = &self.queues[q];
            let stable = self.bics.get(&pid).and_then(|bic| bic.stable_merge_bfqq);
            if let Some(stable) = stable {
                if queue.sync
                    && !queue.just_created
                    && queue.split_time + late < jiffies
                    && queue.creation_time + late < jiffies
                {
                    return self.setup_stable_merge(q, stable, pid);
                }
            }
        }
        if !self.coop_merging_enabled() || self.too_late_for_merging(q) {
            return None;
        }
        if self.tot_busy_queues() == 1 {
            return None;
        }
        if let Some(in_service) = self.in_service_queue {
            if in_service != q
                && sector.abs_diff(self.in_serv_last_pos) <= BFQQ_CLOSE_THR
                && self.queues[q].group == self.queues[in_service].group
                && self.may_be_close_cooperator(q, in_service)
            {
                if let Some(new) = self.setup_merge(q, in_service) {
                    return Some(new);
                }
            }
        }
        let new = self.find_close_cooperator(q, sector)?;
        if self.may_be_close_cooperator(q, new) {
            return self.setup_merge(q, new);
        }
        None
    }

    /// `bfq_bfqq_save_state`: `q`'s state into its owner's io_context.
    fn save_state(&mut self, q: QueueId) {
        let Some(owner) = self.queues[q].bic else {
            return;
        };
        let jiffies = self.jiffies();
        let duration = self.wr_duration();
        let queue = &self.queues[q];
        let previous_service_from_wr = self
            .bics
            .get(&owner)
            .map_or(0, |bic| bic.saved.service_from_wr);
        let mut saved = SavedState {
            has_short_ttime: queue.has_short_ttime,
            io_bound: queue.io_bound,
            last_serv_time_ns: queue.last_serv_time_ns,
            inject_limit: queue.inject_limit,
            decrease_time_jif: queue.decrease_time_jif,
            weight: self.entities[queue.entity].orig_weight,
            ttime: queue.ttime,
            io_start_time: queue.io_start_time,
            tot_idle_time: queue.tot_idle_time,
            in_large_burst: queue.in_large_burst,
            was_in_burst_list: queue.in_burst_list,
            wr_coeff: queue.wr_coeff,
            wr_start_at_switch_to_srt: queue.wr_start_at_switch_to_srt,
            service_from_wr: queue.service_from_wr,
            last_wr_start_finish: queue.last_wr_start_finish,
            wr_cur_max_time: queue.wr_cur_max_time,
        };
        if queue.just_created && !queue.in_large_burst && self.t.low_latency {
            // Merged before its first request made it raised: save the raising it would have
            // had, so that a soon split does not lose it.
            saved.wr_coeff = self.wr_coeff;
            saved.wr_start_at_switch_to_srt = SMALLEST_FROM_NOW;
            saved.wr_cur_max_time = duration;
            saved.last_wr_start_finish = jiffies;
            saved.service_from_wr = previous_service_from_wr;
        }
        if let Some(bic) = self.bics.get_mut(&owner) {
            bic.saved = saved;
        }
    }

    /// `bfq_bfqq_resume_state`: process `pid`'s saved state into its (new or own) queue `q`.
    fn resume_state(&mut self, q: QueueId, pid: u32, already_existing: bool) {
        let Some(saved) = self.bics.get(&pid).map(|bic| bic.saved.clone()) else {
            return;
        };
        let jiffies = self.jiffies();
        let busy = already_existing && self.queues[q].busy;
        let low_latency = self.t.low_latency;
        let e = self.queues[q].entity;
        if saved.weight > 0 {
            self.entities[e].new_weight = saved.weight;
        }
        let queue = &mut self.queues[q];
        queue.has_short_ttime = saved.has_short_ttime;
        queue.io_bound = saved.io_bound;
        queue.last_serv_time_ns = saved.last_serv_time_ns;
        queue.inject_limit = saved.inject_limit;
        queue.decrease_time_jif = saved.decrease_time_jif;
        queue.ttime = saved.ttime;
        queue.io_start_time = saved.io_start_time;
        queue.tot_idle_time = saved.tot_idle_time;
        let mut old_wr_coeff = 1;
        if low_latency {
            old_wr_coeff = queue.wr_coeff;
            queue.wr_coeff = saved.wr_coeff;
        }
        queue.service_from_wr = saved.service_from_wr;
        queue.wr_start_at_switch_to_srt = saved.wr_start_at_switch_to_srt;
        queue.last_wr_start_finish = saved.last_wr_start_finish;
        queue.wr_cur_max_time = saved.wr_cur_max_time;
        if queue.wr_coeff > 1
            && (queue.in_large_burst
                || queue.last_wr_start_finish + queue.wr_cur_max_time < jiffies)
        {
            if queue.wr_cur_max_time == self.wr_rt_max_time
                && !queue.in_large_burst
                && queue.wr_start_at_switch_to_srt + self.wr_duration() >= jiffies
            {
                self.switch_back_to_interactive_wr(q);
            } else {
                self.queues[q].wr_coeff = 1;
            }
        }
        self.entities[e].prio_changed = true;
        if !busy {
            return;
        }
        let wr_coeff = self.queues[q].wr_coeff;
        if old_wr_coeff == 1 && wr_coeff > 1 {
            self.wr_busy_queues += 1;
        } else if old_wr_coeff > 1 && wr_coeff == 1 {
            self.wr_busy_queues -= 1;
        }
    }

    /// `bfq_reassign_last_bfqq`: the group's `last_bfqq_created`, if `cur`, becomes `new`.
    fn reassign_last_bfqq(&mut self, cur: QueueId, new: Option<QueueId>) {
        let group = self.queues[cur].group;
        if self.last_bfqq_created.get(&group) == Some(&cur) {
            match new {
                Some(new) => self.last_bfqq_created.insert(group, new),
                None => self.last_bfqq_created.remove(&group),
            };
        }
    }

    /// `bfq_release_process_ref`: a process stops using `q`.
    pub(super) fn release_process_ref(&mut self, q: QueueId) {
        let queue = &self.queues[q];
        if queue.busy && queue.sort_list.is_empty() && self.in_service_queue != Some(q) {
            self.del_bfqq_busy(q, false);
        }
        self.reassign_last_bfqq(q, None);
        let queue = &mut self.queues[q];
        queue.process_refs = queue.process_refs.saturating_sub(1);
        if queue.process_refs == 0 {
            // bfq_put_queue: a freed queue leaves the burst list.
            self.remove_from_burst_list(q);
        }
    }

    /// `bic_set_bfqq` for process `pid`'s sync or async queue.
    fn bic_set_bfqq(&mut self, pid: u32, sync: bool, q: Option<QueueId>) {
        let Some(bic) = self.bics.get_mut(&pid) else {
            return;
        };
        let old = if sync { bic.sync } else { bic.async_queue };
        if sync {
            bic.sync = q;
        } else {
            bic.async_queue = q;
        }
        if q.is_some() && bic.stable_merge_bfqq == q {
            bic.stable_merge_bfqq = None;
        }
        if let Some(old) = old {
            if self.queues[old].bic == Some(pid) {
                self.queues[old].bic = None;
            }
        }
    }

    /// `bfq_merge_bfqqs`: process `pid`'s io_context moves from `q` to `q`'s `new_bfqq`,
    /// which is returned.
    pub(super) fn merge_bfqqs(&mut self, pid: u32, q: QueueId) -> QueueId {
        let new = self.queues[q]
            .new_bfqq
            .expect("merging a queue with no merge scheduled");
        self.save_state(q);
        self.save_state(new);
        if self.queues[q].io_bound {
            self.queues[new].io_bound = true;
        }
        self.queues[q].io_bound = false;
        // The cooperators of new's processes let q's waker inject when they have no I/O.
        if let Some(waker) = self.queues[q]
            .waker
            .filter(|&w| w != new && self.queues[new].waker.is_none())
        {
            self.queues[new].waker = Some(waker);
            self.queues[new].tentative_waker = None;
            self.queues[waker].woken.insert(0, new);
        }
        if self.queues[new].wr_coeff == 1 && self.queues[q].wr_coeff > 1 {
            let (from, busy) = (self.queues[q].clone(), self.queues[new].busy);
            let to = &mut self.queues[new];
            to.wr_coeff = from.wr_coeff;
            to.wr_cur_max_time = from.wr_cur_max_time;
            to.last_wr_start_finish = from.last_wr_start_finish;
            to.wr_start_at_switch_to_srt = from.wr_start_at_switch_to_srt;
            if busy {
                self.wr_busy_queues += 1;
            }
            let e = self.queues[new].entity;
            self.entities[e].prio_changed = true;
        }
        if self.queues[q].wr_coeff > 1 {
            self.queues[q].wr_coeff = 1;
            let e = self.queues[q].entity;
            self.entities[e].prio_changed = true;
            if self.queues[q].busy {
                self.wr_busy_queues -= 1;
            }
        }
        self.bic_set_bfqq(pid, true, Some(new));
        self.queues[new].coop = true;
        self.queues[new].bic = None;
        self.queues[q].bic = None;
        self.reassign_last_bfqq(q, Some(new));
        self.release_process_ref(q);
        self.stats.queue_merges += 1;
        new
    }

    /// `bfq_do_or_sched_stable_merge`, for process `pid`'s just-created sync queue `q`: the
    /// queue the process is to use.
    pub(super) fn do_or_sched_stable_merge(&mut self, q: QueueId, pid: u32) -> QueueId {
        let group = self.queues[q].group;
        let Some(&last) = self.last_bfqq_created.get(&group) else {
            self.last_bfqq_created.insert(group, q);
            return q;
        };
        let activation = self.msecs(BFQ_ACTIVATION_STABLE_MERGING_MS);
        let (new, old) = (&self.queues[q], &self.queues[last]);
        if old.creation_time + activation < new.creation_time
            || old.ioprio != new.ioprio
            || old.ioprio_class_idx != new.ioprio_class_idx
        {
            self.last_bfqq_created.insert(group, q);
        } else if old.creation_time + self.burst_interval >= new.creation_time {
            if self.nonrot_with_queueing {
                return self.do_early_stable_merge(q, pid, last);
            }
            if let Some(bic) = self.bics.get_mut(&pid) {
                bic.stable_merge_bfqq = Some(last);
            }
        }
        q
    }

    /// `bfq_do_early_stable_merge`.
    fn do_early_stable_merge(&mut self, q: QueueId, pid: u32, last: QueueId) -> QueueId {
        let Some(new) = self.setup_merge(q, last) else {
            return q;
        };
        self.mark_stably_merged(pid, new);
        self.queues[q].bic = Some(pid);
        self.merge_bfqqs(pid, q)
    }

    /// `bfq_waker_bfqq`: `q`'s waker, unless merging has left it without processes.
    fn waker_bfqq(&self, q: QueueId) -> Option<QueueId> {
        let waker = self.queues[q].waker?;
        let mut new = self.queues[q].new_bfqq;
        for _ in 0..self.queues.len() {
            let Some(next) = new else {
                break;
            };
            if next == waker {
                return (self.queues[waker].process_refs != 1).then_some(waker);
            }
            new = self.queues[next].new_bfqq;
        }
        (self.queues[waker].process_refs != 0).then_some(waker)
    }

    /// `bfq_put_cooperator`: drops the references `q`'s scheduled merges took.
    fn put_cooperator(&mut self, q: QueueId) {
        let mut next = self.queues[q].new_bfqq;
        for _ in 0..self.queues.len() {
            let Some(cur) = next else {
                break;
            };
            next = self.queues[cur].new_bfqq;
            let queue = &mut self.queues[cur];
            queue.process_refs = queue.process_refs.saturating_sub(1);
        }
    }

    /// `bfq_split_bfqq`: process `pid` leaves the shared queue `q`; returns `q` if the process
    /// was its last one (it becomes the process's own again).
    fn split_bfqq(&mut self, pid: u32, q: QueueId) -> Option<QueueId> {
        self.stats.queue_splits += 1;
        if self.queues[q].process_refs == 1 && self.queues[q].new_bfqq.is_none() {
            let queue = &mut self.queues[q];
            queue.pid = pid;
            queue.coop = false;
            queue.split_coop = false;
            return Some(q);
        }
        self.bic_set_bfqq(pid, true, None);
        self.put_cooperator(q);
        self.release_process_ref(q);
        None
    }

    /// `__bfq_get_bfqq_handle_split` for a process without a queue: a new queue (`split`: in
    /// place of a shared one it left, with its saved burst membership).
    fn new_bfqq_for(
        &mut self,
        pid: u32,
        g: super::wf2q::GroupId,
        rq: &crate::block::request::Request,
        sync: bool,
        split: bool,
    ) -> QueueId {
        let q = self.get_queue(g, rq, sync, split);
        self.bic_set_bfqq(pid, sync, Some(q));
        if split && sync {
            let saved = self
                .bics
                .get(&pid)
                .map(|bic| (bic.saved.was_in_burst_list, bic.saved.in_large_burst));
            let (was_in_burst_list, saved_in_large_burst) = saved.unwrap_or_default();
            if (was_in_burst_list && self.large_burst) || saved_in_large_burst {
                self.queues[q].in_large_burst = true;
            } else {
                self.queues[q].in_large_burst = false;
                if was_in_burst_list && !self.queues[q].in_burst_list {
                    self.burst_list.push(q);
                    self.queues[q].in_burst_list = true;
                }
            }
            self.queues[q].split_time = self.jiffies();
        }
        q
    }

    /// `bfq_get_bfqq_handle_split`: the queue of process `pid` for a request, created if
    /// needed, split off a shared queue that turned seeky.
    pub(super) fn get_bfqq_handle_split(
        &mut self,
        pid: u32,
        g: super::wf2q::GroupId,
        rq: &crate::block::request::Request,
        sync: bool,
    ) -> QueueId {
        let bic = &self.bics[&pid];
        let existing = if sync { bic.sync } else { bic.async_queue };
        let stably_merged = bic.stably_merged;
        let Some(q) = existing else {
            return self.new_bfqq_for(pid, g, rq, sync, false);
        };
        let queue = &self.queues[q];
        if !queue.coop || !queue.split_coop || stably_merged {
            return q;
        }
        let waker = self.waker_bfqq(q);
        if self.queues[q].in_large_burst {
            if let Some(bic) = self.bics.get_mut(&pid) {
                bic.saved.in_large_burst = true;
            }
        }
        if let Some(own) = self.split_bfqq(pid, q) {
            self.resume_state(own, pid, true);
            return own;
        }
        let q = self.new_bfqq_for(pid, g, rq, sync, true);
        self.resume_state(q, pid, false);
        self.queues[q].waker = waker;
        self.queues[q].tentative_waker = None;
        if let Some(waker) = waker {
            self.queues[waker].woken.insert(0, q);
        }
        q
    }
}
