//! `bfq_limit_depth` with the depths of `bfq_update_depths`: sync reads may use every
//! scheduler tag; async I/O at most 50 % and sync writes 75 % of them, or 3/16 and 6/16 while
//! some queue is weight-raised ("leaving ~63 % of tags for sync reads", so that a starting
//! application's reads find tags under a write storm).
//!
//! Simplifications: the shallow depth is a share of `nr_requests` (the kernel's per-word
//! depth of the sbitmap, which comes to the same share); no per-entity limit
//! (`bfqq_request_over_limit`).

use super::Bfq;

/// `word_depths[wr_busy][sync]` as fractions of the tags (numerator, denominator).
const WORD_DEPTHS: [[(usize, usize); 2]; 2] = [[(1, 2), (3, 4)], [(3, 16), (6, 16)]];

impl Bfq {
    /// The shallow depth of a request of this kind, if limited.
    pub(super) fn depth_limit(&self, nr_requests: usize, sync: bool, write: bool) -> Option<usize> {
        if sync && !write {
            return None;
        }
        let (num, den) = WORD_DEPTHS[usize::from(self.wr_busy_queues > 0)][usize::from(sync)];
        Some((nr_requests * num / den).max(1))
    }
}
