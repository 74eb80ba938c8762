//! Large-burst detection of block/bfq-iosched.c (`bfq_handle_burst`, `bfq_reset_burst_list`,
//! `bfq_add_to_burst`): when 8 or more queues (`bfq_large_burst_thresh`) of one group are
//! created within 180 ms of each other (`bfq_burst_interval`), as when a service spawns many
//! workers, they are marked `in_large_burst` and denied weight raising (and lose it if they
//! had it); a queue idle for 10 s after such a burst leaves it.
//!
//! A queue split off a shared one within the last 10 ms (`split_time`) is not a new queue
//! for burst detection; a split puts a queue back in the burst list it was in when merged
//! ([`super::merge`]).

use super::queue::QueueId;
use super::Bfq;

impl Bfq {
    /// `bfq_reset_burst_list`.
    fn reset_burst_list(&mut self, q: QueueId) {
        for item in std::mem::take(&mut self.burst_list) {
            self.queues[item].in_burst_list = false;
        }
        if self.tot_busy_queues() == 0 {
            self.burst_list.push(q);
            self.queues[q].in_burst_list = true;
            self.burst_size = 1;
        } else {
            self.burst_size = 0;
        }
        self.burst_parent = Some(self.queues[q].group);
    }

    /// `bfq_add_to_burst`.
    fn add_to_burst(&mut self, q: QueueId) {
        self.burst_size += 1;
        if self.burst_size == self.large_burst_thresh {
            self.large_burst = true;
            for item in std::mem::take(&mut self.burst_list) {
                self.queues[item].in_burst_list = false;
                self.queues[item].in_large_burst = true;
            }
            self.queues[q].in_large_burst = true;
            self.stats.large_bursts += 1;
        } else {
            self.burst_list.push(q);
            self.queues[q].in_burst_list = true;
        }
    }

    /// Removes a queue from the burst list (`hlist_del_init(&bfqq->burst_list_node)`).
    pub(super) fn remove_from_burst_list(&mut self, q: QueueId) {
        if self.queues[q].in_burst_list {
            self.burst_list.retain(|&x| x != q);
            self.queues[q].in_burst_list = false;
        }
    }

    /// `bfq_handle_burst`, for a just-created sync queue while a burst is running or nothing
    /// is busy.
    pub(super) fn handle_burst(&mut self, q: QueueId) {
        let jiffies = self.jiffies();
        if self.queues[q].in_burst_list
            || self.queues[q].in_large_burst
            || self.queues[q].split_time + self.msecs(10) >= jiffies
        {
            return;
        }
        if self.last_ins_in_burst + self.burst_interval < jiffies
            || Some(self.queues[q].group) != self.burst_parent
        {
            self.large_burst = false;
            self.reset_burst_list(q);
        } else if self.large_burst {
            self.queues[q].in_large_burst = true;
        } else {
            self.add_to_burst(q);
        }
        self.last_ins_in_burst = jiffies;
    }
}
