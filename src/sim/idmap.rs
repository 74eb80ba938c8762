//! Hash maps keyed by the simulation's sequential ids (request ids, bio ids).
//!
//! A `BTreeMap<u64, V>` keyed by ids that are mostly removed from the front moves its values
//! inside its nodes on every removal: with ~200-byte requests as values that memmove was the
//! largest single cost of the block layer's device path (issue 17's profile). A hash map stores
//! each value once and moves it only on growth. Only maps whose iteration order cannot matter may
//! use it (never iterated, or only for order-free results: a sum, a find by a unique id): the
//! hasher is fixed (no random state), so the layout is deterministic anyway, but its order is
//! not the ids' order.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A hash map keyed by `u64` ids.
pub type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;

/// A new, empty [`IdMap`].
pub fn id_map<V>() -> IdMap<V> {
    IdMap::default()
}

/// Fibonacci hashing of one `u64` (Knuth, TAOCP 6.4): a multiply by 2^64 / phi spreads
/// sequential ids over the high bits the table's control bytes use, and keeps the low bits
/// (the bucket index) distinct for consecutive ids.
#[derive(Debug, Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` keys are expected; any other key still hashes deterministically.
        for &byte in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(byte)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, id: u64) {
        self.0 = (self.0 ^ id).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_ids_spread_over_buckets_and_control_bytes() {
        let hash = |id: u64| {
            let mut h = IdHasher::default();
            h.write_u64(id);
            h.finish()
        };
        // Consecutive ids differ in their low bits (bucket) and in their top 7 bits (control).
        let low: std::collections::BTreeSet<u64> = (0..64).map(|id| hash(id) & 63).collect();
        assert_eq!(low.len(), 64);
        let top: std::collections::BTreeSet<u64> = (0..1024).map(|id| hash(id) >> 57).collect();
        assert!(top.len() > 100, "{}", top.len());
        assert_ne!(hash(1), hash(2));
    }

    #[test]
    fn the_map_finds_what_was_inserted() {
        let mut map = id_map();
        for id in 0..10_000u64 {
            map.insert(id * 3, id);
        }
        for id in (0..10_000u64).step_by(2) {
            assert_eq!(map.remove(&(id * 3)), Some(id));
        }
        assert_eq!(map.len(), 5_000);
        assert_eq!(map.get(&3), Some(&1));
        assert_eq!(map.get(&6), None);
    }
}
