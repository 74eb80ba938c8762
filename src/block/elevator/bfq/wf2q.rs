//! B-WF2Q+: the hierarchical budget fair queueing engine of block/bfq-wf2q.c (current mainline).
//!
//! What is kept, by kernel function:
//! - Entities (`struct bfq_entity`) for queues and for cgroups (one level of groups below the
//!   root, as Android's blkio hierarchy has), each with `start` / `finish` virtual timestamps,
//!   `budget`, `service`, `weight` / `orig_weight` / `new_weight` and `prio_changed`.
//! - Per sched_data (the root and each group) three service trees, RT / BE / IDLE
//!   (`struct bfq_service_tree`), each with an active tree ordered by finish time, an idle tree,
//!   the system virtual time `vtime` and the weight sum `wsum`.
//! - Timestamping: `bfq_delta` (service << 22 / weight), `bfq_calc_finish`, activation with
//!   back-shifting for a queue that was waiting for a request (`__bfq_activate_entity`,
//!   `bfq_update_fin_time_enqueue`), requeueing of the in-service entity from its received
//!   service (`__bfq_requeue_entity`), deactivation into the idle tree while its finish time is
//!   ahead of `vtime` (`__bfq_deactivate_entity`, `bfq_forget_idle`).
//! - Selection: the eligible entity (`start <= vtime`) with the smallest finish, after the
//!   `vtime` jump that makes one eligible (`bfq_calc_vtime_jump`, `bfq_first_active_entity`),
//!   highest class first with the idle class served once per `BFQ_CL_IDLE_TIMEOUT`
//!   (`bfq_lookup_next_entity`); the cached `next_in_service` and its upward propagation
//!   (`bfq_update_next_in_service`, `bfq_update_parent_budget`); `bfq_get_next_queue` top-down.
//! - Service accounting (`bfq_bfqq_served`, `bfq_bfqq_charge_time`) and weight / class changes
//!   (`__bfq_entity_update_weight_prio`), including the weight-raising coefficient.
//!
//! Simplifications:
//! - The augmented rb-tree (`min_start`) is replaced by ordered sets scanned linearly: the same
//!   choice in O(n) for the handful of queues of a phone. Ties in finish time keep insertion
//!   order, as `bfq_insert` puts equal keys to the right.
//! - Timestamps are plain `u64` (no wrap-around in a run; `bfq_gt` is `>`).
//! - No reference counting: queues and groups live for the run.

use super::queue::QueueId;
use super::{Bfq, Jiffies};
use crate::task::CgroupId;
use std::collections::{BTreeMap, BTreeSet};

pub type EntityId = usize;
pub type GroupId = usize;
/// The root group (`bfqd->root_group`), which has no entity of its own.
pub const ROOT_GROUP: GroupId = 0;
/// `BFQ_IOPRIO_CLASSES`: RT, BE, IDLE service trees.
pub const BFQ_IOPRIO_CLASSES: usize = 3;
/// `WFQ_SERVICE_SHIFT = 22` (bfq-wf2q.c).
const WFQ_SERVICE_SHIFT: u32 = 22;
/// `BFQ_MIN_WEIGHT`, `BFQ_MAX_WEIGHT` (bfq-iosched.h).
const BFQ_MIN_WEIGHT: u32 = 1;
const BFQ_MAX_WEIGHT: u32 = 1000;
/// Class index of a group entity: `BFQ_DEFAULT_GRP_CLASS = IOPRIO_CLASS_BE`.
const GROUP_CLASS_IDX: usize = 1;

/// Which tree of its service tree an entity is on (`entity->tree`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tree {
    None,
    Active,
    Idle,
}

/// `struct bfq_entity`.
#[derive(Debug, Clone)]
pub struct Entity {
    pub weight: u32,
    pub orig_weight: u32,
    pub new_weight: u32,
    pub prio_changed: bool,
    pub start: u64,
    pub finish: u64,
    /// Sectors (B-WF2Q+ works in the service domain).
    pub budget: u64,
    pub service: u64,
    /// `on_st_or_in_serv`: counted in its tree's `wsum`.
    pub on_st: bool,
    pub tree: Tree,
    /// Insertion order, for ties in finish time.
    seq: u64,
    /// The group whose sched_data schedules this entity (`entity->sched_data`).
    pub parent: GroupId,
    /// The queue this entity is, if a leaf.
    pub queue: Option<QueueId>,
    /// The group this entity represents (`entity->my_sched_data`), if not a leaf.
    pub my_group: Option<GroupId>,
}

impl Entity {
    pub fn new(weight: u32, parent: GroupId) -> Entity {
        Entity {
            weight,
            orig_weight: weight,
            new_weight: weight,
            prio_changed: false,
            start: 0,
            finish: 0,
            budget: 0,
            service: 0,
            on_st: false,
            tree: Tree::None,
            seq: 0,
            parent,
            queue: None,
            my_group: None,
        }
    }
}

type Key = (u64, u64, EntityId);

/// `struct bfq_service_tree`.
#[derive(Debug, Clone, Default)]
pub struct ServiceTree {
    active: BTreeSet<Key>,
    idle: BTreeSet<Key>,
    pub vtime: u64,
    pub wsum: u64,
}

/// `struct bfq_sched_data`.
#[derive(Debug, Clone, Default)]
pub struct SchedData {
    pub trees: [ServiceTree; BFQ_IOPRIO_CLASSES],
    pub in_service: Option<EntityId>,
    pub next_in_service: Option<EntityId>,
    pub class_idle_last_service: Jiffies,
}

/// `struct bfq_group`: a cgroup's sched_data, its entity, its async queues.
#[derive(Debug, Clone)]
pub struct Group {
    pub cgroup: CgroupId,
    /// `my_entity`; `None` for the root.
    pub entity: Option<EntityId>,
    pub sd: SchedData,
    pub active_entities: u32,
    /// `async_bfqq[class][level]` and `async_idle_bfqq`, keyed by (class index, level).
    pub async_queues: BTreeMap<(usize, u8), QueueId>,
    pub num_queues_with_pending_reqs: u32,
}

impl Group {
    pub fn new(cgroup: CgroupId, entity: Option<EntityId>, now: Jiffies) -> Group {
        Group {
            cgroup,
            entity,
            sd: SchedData {
                class_idle_last_service: now,
                ..SchedData::default()
            },
            active_entities: 0,
            async_queues: BTreeMap::new(),
            num_queues_with_pending_reqs: 0,
        }
    }
}

/// `bfq_delta`: service mapped to virtual time at `weight`.
pub fn bfq_delta(service: u64, weight: u64) -> u64 {
    assert!(weight > 0, "virtual time of a zero weight");
    (service << WFQ_SERVICE_SHIFT) / weight
}

impl Bfq {
    /// `bfq_class_idx`.
    pub(super) fn class_idx(&self, e: EntityId) -> usize {
        match self.entities[e].queue {
            Some(q) => self.queues[q].ioprio_class_idx,
            None => GROUP_CLASS_IDX,
        }
    }

    fn st(&mut self, g: GroupId, class: usize) -> &mut ServiceTree {
        &mut self.groups[g].sd.trees[class]
    }

    /// The entities from `e` up to (not including) the root: `for_each_entity`.
    pub(super) fn ancestry(&self, e: EntityId) -> Vec<EntityId> {
        let mut chain = vec![e];
        let mut g = self.entities[e].parent;
        while let Some(parent) = self.groups[g].entity {
            chain.push(parent);
            g = self.entities[parent].parent;
        }
        chain
    }

    fn key(&self, e: EntityId) -> Key {
        (self.entities[e].finish, self.entities[e].seq, e)
    }

    /// `bfq_calc_finish`.
    fn calc_finish(&mut self, e: EntityId, service: u64) {
        let entity = &mut self.entities[e];
        entity.finish = entity.start + bfq_delta(service, u64::from(entity.weight));
    }

    /// `bfq_active_insert`.
    fn active_insert(&mut self, e: EntityId) {
        self.entity_seq += 1;
        self.entities[e].seq = self.entity_seq;
        let (g, class) = (self.entities[e].parent, self.class_idx(e));
        let key = self.key(e);
        assert!(self.st(g, class).active.insert(key));
        self.entities[e].tree = Tree::Active;
        if let Some(q) = self.entities[e].queue {
            self.active_list.insert(0, q);
        }
        if g != ROOT_GROUP {
            self.groups[g].active_entities += 1;
        }
    }

    /// `bfq_active_extract`.
    pub(super) fn active_extract(&mut self, e: EntityId) {
        let (g, class) = (self.entities[e].parent, self.class_idx(e));
        let key = self.key(e);
        assert!(self.st(g, class).active.remove(&key), "entity not active");
        self.entities[e].tree = Tree::None;
        if let Some(q) = self.entities[e].queue {
            self.active_list.retain(|&x| x != q);
        }
        if g != ROOT_GROUP {
            self.groups[g].active_entities -= 1;
        }
    }

    /// `bfq_idle_insert`.
    fn idle_insert(&mut self, e: EntityId) {
        self.entity_seq += 1;
        self.entities[e].seq = self.entity_seq;
        let (g, class) = (self.entities[e].parent, self.class_idx(e));
        let key = self.key(e);
        assert!(self.st(g, class).idle.insert(key));
        self.entities[e].tree = Tree::Idle;
    }

    /// `bfq_idle_extract`.
    fn idle_extract(&mut self, e: EntityId) {
        let (g, class) = (self.entities[e].parent, self.class_idx(e));
        let key = self.key(e);
        assert!(self.st(g, class).idle.remove(&key), "entity not idle");
        self.entities[e].tree = Tree::None;
    }

    /// `bfq_forget_entity`.
    fn forget_entity(&mut self, e: EntityId) {
        let (g, class) = (self.entities[e].parent, self.class_idx(e));
        let weight = u64::from(self.entities[e].weight);
        self.entities[e].on_st = false;
        let st = self.st(g, class);
        st.wsum = st.wsum.checked_sub(weight).expect("wsum underflow");
    }

    /// `bfq_forget_idle`: drop the idle entity with the smallest finish once `vtime` passed it
    /// (and jump `vtime` past every idle entity when nothing is active).
    fn forget_idle(&mut self, g: GroupId, class: usize) {
        let st = &mut self.groups[g].sd.trees[class];
        if st.active.is_empty() {
            if let Some(&(finish, _, _)) = st.idle.last() {
                if finish <= st.vtime {
                    st.vtime = finish;
                }
            }
        }
        if let Some(&(finish, _, first)) = st.idle.first() {
            if finish <= st.vtime {
                self.idle_extract(first);
                self.forget_entity(first);
            }
        }
    }

    /// `__bfq_entity_update_weight_prio`: applies a pending weight or class change, and the
    /// weight-raising coefficient.
    pub(super) fn update_weight_prio(&mut self, e: EntityId, update_class_too: bool) {
        if !self.entities[e].prio_changed {
            return;
        }
        let (g, old_class) = (self.entities[e].parent, self.class_idx(e));
        let old_weight = u64::from(self.entities[e].weight);
        let st = self.st(g, old_class);
        st.wsum = st.wsum.checked_sub(old_weight).expect("wsum underflow");
        let entity = &mut self.entities[e];
        if entity.new_weight != entity.orig_weight {
            entity.new_weight = entity.new_weight.clamp(BFQ_MIN_WEIGHT, BFQ_MAX_WEIGHT);
            entity.orig_weight = entity.new_weight;
        }
        let queue = entity.queue;
        if let Some(q) = queue {
            if update_class_too {
                self.queues[q].ioprio_class_idx = self.queues[q].new_ioprio_class_idx;
            }
        }
        if queue
            .is_none_or(|q| self.queues[q].ioprio_class_idx == self.queues[q].new_ioprio_class_idx)
        {
            self.entities[e].prio_changed = false;
        }
        let new_class = self.class_idx(e);
        let prev_weight = self.entities[e].weight;
        let wr_coeff = queue.map_or(1, |q| self.queues[q].wr_coeff);
        let new_weight = self.entities[e].orig_weight * wr_coeff;
        if let Some(q) = queue {
            if prev_weight != new_weight {
                self.weights_tree_remove(q);
            }
        }
        self.entities[e].weight = new_weight;
        if let Some(q) = queue {
            if prev_weight != new_weight && wr_coeff == 1 {
                self.weights_tree_add(q);
            }
        }
        self.st(g, new_class).wsum += u64::from(new_weight);
        if new_class != old_class {
            self.entities[e].start = self.st(g, new_class).vtime;
        }
    }

    /// `bfq_bfqq_served`: charges `served` sectors to the queue and its ancestors and advances
    /// their trees' virtual time.
    pub(super) fn bfqq_served(&mut self, q: QueueId, served: u64) {
        let jiffies = self.jiffies();
        let queue = &mut self.queues[q];
        if queue.service_from_backlogged == 0 {
            queue.first_io_time = jiffies;
        }
        if queue.wr_coeff > 1 {
            queue.service_from_wr += served;
        }
        queue.service_from_backlogged += served;
        let leaf = queue.entity;
        for e in self.ancestry(leaf) {
            let (g, class) = (self.entities[e].parent, self.class_idx(e));
            self.entities[e].service += served;
            let st = self.st(g, class);
            st.vtime += bfq_delta(served, st.wsum);
            self.forget_idle(g, class);
        }
    }

    /// `bfq_bfqq_charge_time`: a slow queue is charged what it would have received at the peak
    /// rate for the time it held the device.
    pub(super) fn charge_time(&mut self, q: QueueId, time_ms: u64) {
        let e = self.queues[q].entity;
        let service = self.entities[e].service;
        let timeout_ms = (self.t.timeout as u64) * 1000 / u64::from(self.hz.0);
        let mut charge = service;
        if time_ms > 0 && time_ms < timeout_ms {
            charge = self.bfq_max_budget * time_ms / timeout_ms;
        }
        charge = charge.max(service);
        if charge > self.entities[e].budget {
            self.entities[e].budget = charge;
        }
        self.bfqq_served(q, charge - service);
    }

    /// `bfq_update_fin_time_enqueue`.
    fn update_fin_time_enqueue(&mut self, e: EntityId, backshifted: bool) {
        self.update_weight_prio(e, true);
        let budget = self.entities[e].budget;
        self.calc_finish(e, budget);
        let (g, class) = (self.entities[e].parent, self.class_idx(e));
        let vtime = self.st(g, class).vtime;
        if backshifted && vtime > self.entities[e].finish {
            let mut delta = vtime - self.entities[e].finish;
            if let Some(q) = self.entities[e].queue {
                delta /= u64::from(self.queues[q].wr_coeff);
            }
            self.entities[e].start += delta;
            self.entities[e].finish += delta;
        }
        self.active_insert(e);
    }

    /// `__bfq_activate_entity`: a true activation.
    fn activate_entity(&mut self, e: EntityId, non_blocking_wait_rq: bool) {
        let (g, class) = (self.entities[e].parent, self.class_idx(e));
        let vtime = self.st(g, class).vtime;
        let (backshifted, min_vstart) = if non_blocking_wait_rq && vtime > self.entities[e].finish {
            (true, self.entities[e].finish)
        } else {
            (false, vtime)
        };
        if self.entities[e].tree == Tree::Idle {
            self.idle_extract(e);
            let finish = self.entities[e].finish;
            self.entities[e].start = min_vstart.max(finish);
        } else {
            assert!(
                !self.entities[e].on_st,
                "activating an entity already on its tree"
            );
            self.entities[e].start = min_vstart;
            let weight = u64::from(self.entities[e].weight);
            self.st(g, class).wsum += weight;
            self.entities[e].on_st = true;
        }
        self.update_fin_time_enqueue(e, backshifted);
    }

    /// `__bfq_requeue_entity`.
    fn requeue_entity(&mut self, e: EntityId) {
        let g = self.entities[e].parent;
        if self.groups[g].sd.in_service == Some(e) {
            // Extracted before its finish time moves (the tree is keyed by it).
            if self.entities[e].tree == Tree::Active {
                self.active_extract(e);
            }
            let service = self.entities[e].service;
            self.calc_finish(e, service);
            self.entities[e].start = self.entities[e].finish;
        } else {
            self.active_extract(e);
        }
        self.update_fin_time_enqueue(e, false);
    }

    /// `bfq_activate_requeue_entity`.
    fn activate_requeue_entity(
        &mut self,
        e: EntityId,
        non_blocking_wait_rq: bool,
        requeue: bool,
        expiration: bool,
    ) {
        let mut current = Some(e);
        while let Some(x) = current {
            let g = self.entities[x].parent;
            if self.groups[g].sd.in_service == Some(x) || self.entities[x].tree == Tree::Active {
                self.requeue_entity(x);
            } else {
                self.activate_entity(x, non_blocking_wait_rq);
            }
            if !self.update_next_in_service(g, Some(x), expiration) && !requeue {
                break;
            }
            current = self.groups[g].entity;
        }
    }

    /// `__bfq_deactivate_entity`.
    fn deactivate_one(&mut self, e: EntityId, ins_into_idle_tree: bool) -> bool {
        if !self.entities[e].on_st {
            return false;
        }
        let (g, class) = (self.entities[e].parent, self.class_idx(e));
        let is_in_service = self.groups[g].sd.in_service == Some(e);
        // Out of its tree before its finish time moves: the trees are keyed by finish time (the
        // kernel's rb-tree erase needs no key). An in-service entity is on the active tree
        // after a requeue while in service.
        match self.entities[e].tree {
            Tree::Active => self.active_extract(e),
            Tree::Idle if !is_in_service => self.idle_extract(e),
            _ => {}
        }
        if is_in_service {
            let service = self.entities[e].service;
            self.calc_finish(e, service);
            self.groups[g].sd.in_service = None;
        }
        if !ins_into_idle_tree || self.entities[e].finish <= self.st(g, class).vtime {
            self.forget_entity(e);
        } else {
            self.idle_insert(e);
        }
        true
    }

    /// `bfq_deactivate_entity`.
    fn deactivate_entity(&mut self, e: EntityId, ins_into_idle_tree: bool, expiration: bool) {
        let mut ins = ins_into_idle_tree;
        let mut current = Some(e);
        let mut requeue_from = None;
        while let Some(x) = current {
            let g = self.entities[x].parent;
            let parent = self.groups[g].entity;
            if !self.deactivate_one(x, ins) {
                return;
            }
            if self.groups[g].sd.next_in_service == Some(x) {
                self.update_next_in_service(g, None, expiration);
            }
            if self.groups[g].sd.next_in_service.is_some() || self.groups[g].sd.in_service.is_some()
            {
                requeue_from = parent;
                break;
            }
            ins = true;
            current = parent;
        }
        let mut current = requeue_from;
        while let Some(x) = current {
            self.requeue_entity(x);
            let g = self.entities[x].parent;
            if !self.update_next_in_service(g, Some(x), expiration) && !expiration {
                break;
            }
            current = self.groups[g].entity;
        }
    }

    /// `__bfq_lookup_next_entity`.
    fn lookup_in_tree(&mut self, g: GroupId, class: usize, in_service: bool) -> Option<EntityId> {
        let st = &self.groups[g].sd.trees[class];
        if st.active.is_empty() {
            return None;
        }
        let min_start = st
            .active
            .iter()
            .map(|&(_, _, e)| self.entities[e].start)
            .min()
            .expect("non-empty");
        let new_vtime = min_start.max(st.vtime);
        if !in_service && new_vtime > st.vtime {
            self.st(g, class).vtime = new_vtime;
            self.forget_idle(g, class);
        }
        let st = &self.groups[g].sd.trees[class];
        st.active
            .iter()
            .map(|&(_, _, e)| e)
            .find(|&e| self.entities[e].start <= new_vtime)
    }

    /// `bfq_lookup_next_entity`.
    fn lookup_next_entity(&mut self, g: GroupId, expiration: bool) -> Option<EntityId> {
        let jiffies = self.jiffies();
        let mut first_class = 0;
        if self.groups[g].sd.class_idle_last_service + self.cl_idle_timeout < jiffies {
            if !self.groups[g].sd.trees[BFQ_IOPRIO_CLASSES - 1]
                .active
                .is_empty()
            {
                first_class = BFQ_IOPRIO_CLASSES - 1;
            }
            self.groups[g].sd.class_idle_last_service = jiffies;
        }
        let in_service = self.groups[g].sd.in_service.is_some() && !expiration;
        (first_class..BFQ_IOPRIO_CLASSES)
            .find_map(|class| self.lookup_in_tree(g, class, in_service))
    }

    /// `bfq_update_parent_budget`.
    fn update_parent_budget(&mut self, next: EntityId) -> bool {
        let g = self.entities[next].parent;
        match self.groups[g].entity {
            Some(group_entity) => {
                let budget = self.entities[next].budget;
                let changed = self.entities[group_entity].budget > budget;
                self.entities[group_entity].budget = budget;
                changed
            }
            None => false,
        }
    }

    /// `bfq_update_next_in_service`: whether the change may make the group's entity the next
    /// to serve for its own parent.
    fn update_next_in_service(
        &mut self,
        g: GroupId,
        new_entity: Option<EntityId>,
        expiration: bool,
    ) -> bool {
        let old_next = self.groups[g].sd.next_in_service;
        let mut next = old_next;
        let mut change_without_lookup = false;
        if let Some(new) = new_entity.filter(|&new| Some(new) != old_next) {
            change_without_lookup = true;
            if let Some(current) = old_next {
                let class = self.class_idx(new);
                let vtime = self.groups[g].sd.trees[class].vtime;
                change_without_lookup = class == self.class_idx(current)
                    && self.entities[new].start <= vtime
                    && self.entities[current].finish > self.entities[new].finish;
            }
            if change_without_lookup {
                next = Some(new);
            }
        }
        if !change_without_lookup {
            next = self.lookup_next_entity(g, expiration);
        }
        let mut parent_sched_may_change = false;
        if let Some(n) = next {
            let budget_changed = self.update_parent_budget(n);
            parent_sched_may_change = old_next.is_none() || budget_changed;
        }
        self.groups[g].sd.next_in_service = next;
        parent_sched_may_change
    }

    /// `bfq_no_longer_next_in_service`.
    fn no_longer_next_in_service(&self, e: EntityId) -> bool {
        match self.entities[e].my_group {
            None => true,
            Some(g) => self.groups[g].active_entities == 1,
        }
    }

    /// `bfq_get_next_queue`: descends from the root through `next_in_service`, setting each
    /// entity in service.
    pub(super) fn get_next_queue(&mut self) -> Option<QueueId> {
        if self.tot_busy_queues() == 0 {
            return None;
        }
        let mut g = ROOT_GROUP;
        let leaf = loop {
            let e = self.groups[g].sd.next_in_service?;
            self.groups[g].sd.in_service = Some(e);
            self.entities[e].service = 0;
            if self.no_longer_next_in_service(e) {
                self.active_extract(e);
            }
            match self.entities[e].my_group {
                Some(child) => g = child,
                None => break e,
            }
        };
        let mut current = Some(leaf);
        while let Some(x) = current {
            let g = self.entities[x].parent;
            if !self.update_next_in_service(g, None, false) {
                break;
            }
            current = self.groups[g].entity;
        }
        self.entities[leaf].queue
    }

    /// `__bfq_bfqd_reset_in_service`.
    pub(super) fn reset_in_service(&mut self) {
        let q = self.in_service_queue.take().expect("no queue in service");
        self.queues[q].wait_request = false;
        self.idle_timer = None;
        for e in self.ancestry(self.queues[q].entity) {
            let g = self.entities[e].parent;
            self.groups[g].sd.in_service = None;
        }
    }

    /// `next_queue_may_preempt`.
    pub(super) fn next_queue_may_preempt(&self) -> bool {
        let sd = &self.groups[ROOT_GROUP].sd;
        sd.next_in_service != sd.in_service
    }

    /// `bfq_activate_bfqq`.
    fn activate_bfqq(&mut self, q: QueueId) {
        let e = self.queues[q].entity;
        let non_blocking_wait_rq = self.queues[q].non_blocking_wait_rq;
        self.activate_requeue_entity(e, non_blocking_wait_rq, false, false);
        self.queues[q].non_blocking_wait_rq = false;
    }

    /// `bfq_requeue_bfqq`.
    pub(super) fn requeue_bfqq(&mut self, q: QueueId, expiration: bool) {
        let e = self.queues[q].entity;
        let requeue = self.in_service_queue == Some(q);
        self.activate_requeue_entity(e, false, requeue, expiration);
    }

    /// `bfq_add_bfqq_busy`.
    pub(super) fn add_bfqq_busy(&mut self, q: QueueId) {
        self.activate_bfqq(q);
        let queue = &mut self.queues[q];
        assert!(!queue.busy, "queue made busy twice");
        queue.busy = true;
        queue.busy_class_idx = queue.ioprio_class_idx;
        self.busy_queues[queue.busy_class_idx] += 1;
        if queue.dispatched == 0 {
            self.add_in_groups_with_pending_reqs(q);
            if self.queues[q].wr_coeff == 1 {
                self.weights_tree_add(q);
            }
        }
        if self.queues[q].wr_coeff > 1 {
            self.wr_busy_queues += 1;
        }
        // Move the queue to the head of its waker's woken list.
        if let Some(waker) = self.queues[q].waker {
            let woken = &mut self.queues[waker].woken;
            if let Some(position) = woken.iter().position(|&x| x == q) {
                woken.remove(position);
                woken.insert(0, q);
            }
        }
    }

    /// `bfq_del_bfqq_busy`.
    pub(super) fn del_bfqq_busy(&mut self, q: QueueId, expiration: bool) {
        let queue = &mut self.queues[q];
        assert!(queue.busy, "queue not busy");
        queue.busy = false;
        self.busy_queues[queue.busy_class_idx] -= 1;
        if queue.wr_coeff > 1 {
            self.wr_busy_queues -= 1;
        }
        let e = queue.entity;
        self.deactivate_entity(e, true, expiration);
        if self.queues[q].dispatched == 0 {
            self.del_in_groups_with_pending_reqs(q);
            self.weights_tree_remove(q);
        }
    }

    /// `bfq_add_bfqq_in_groups_with_pending_reqs`.
    pub(super) fn add_in_groups_with_pending_reqs(&mut self, q: QueueId) {
        if self.queues[q].in_groups_with_pending_reqs {
            return;
        }
        self.queues[q].in_groups_with_pending_reqs = true;
        let g = self.queues[q].group;
        if self.groups[g].num_queues_with_pending_reqs == 0 {
            self.num_groups_with_pending_reqs += 1;
        }
        self.groups[g].num_queues_with_pending_reqs += 1;
    }

    /// `bfq_del_bfqq_in_groups_with_pending_reqs`.
    pub(super) fn del_in_groups_with_pending_reqs(&mut self, q: QueueId) {
        if !self.queues[q].in_groups_with_pending_reqs {
            return;
        }
        self.queues[q].in_groups_with_pending_reqs = false;
        let g = self.queues[q].group;
        self.groups[g].num_queues_with_pending_reqs -= 1;
        if self.groups[g].num_queues_with_pending_reqs == 0 {
            self.num_groups_with_pending_reqs -= 1;
        }
    }

    /// The weight-raising-free weight counters (`bfq_weights_tree_add`).
    pub(super) fn weights_tree_add(&mut self, q: QueueId) {
        if self.queues[q].weight_counter.is_some() {
            return;
        }
        let weight = self.entities[self.queues[q].entity].weight;
        *self.queue_weights.entry(weight).or_insert(0) += 1;
        self.queues[q].weight_counter = Some(weight);
    }

    /// `bfq_weights_tree_remove`.
    pub(super) fn weights_tree_remove(&mut self, q: QueueId) {
        if let Some(weight) = self.queues[q].weight_counter.take() {
            let count = self.queue_weights.get_mut(&weight).expect("weight counter");
            *count -= 1;
            if *count == 0 {
                self.queue_weights.remove(&weight);
            }
        }
    }
}
