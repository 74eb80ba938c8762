//! Named, seeded random streams (DESIGN.md principle 3).
//!
//! `Rng::named(seed, "flusher")` derives a stream from the run's seed and the stream's name, so a
//! new consumer of randomness gets a stream of its own and does not shift anybody else's numbers.
//! The generator is xoshiro256** seeded through SplitMix64 (Blackman and Vigna), written here so
//! the sequence can never change under a dependency upgrade.

/// FNV-1a over the name: stable across platforms and releases, unlike `std`'s hasher.
fn fnv1a(text: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[derive(Debug, Clone)]
pub struct Rng {
    state: [u64; 4],
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        let mut sm = seed;
        let state = [
            splitmix64(&mut sm),
            splitmix64(&mut sm),
            splitmix64(&mut sm),
            splitmix64(&mut sm),
        ];
        Rng { state }
    }

    /// The stream called `name` of the run seeded with `seed`.
    pub fn named(seed: u64, name: &str) -> Self {
        Rng::new(seed ^ fnv1a(name).rotate_left(17))
    }

    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.state;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in [0, bound); `bound` must be positive. Lemire's multiply-shift with rejection.
    pub fn below(&mut self, bound: u64) -> u64 {
        assert!(bound > 0, "empty range");
        let threshold = bound.wrapping_neg() % bound;
        loop {
            let product = u128::from(self.next_u64()) * u128::from(bound);
            if (product as u64) >= threshold {
                return (product >> 64) as u64;
            }
        }
    }

    /// Uniform in [low, high].
    pub fn range_inclusive(&mut self, low: u64, high: u64) -> u64 {
        assert!(low <= high, "empty range");
        if high - low == u64::MAX {
            return self.next_u64();
        }
        low + self.below(high - low + 1)
    }

    /// Exponentially distributed with the given mean (for Poisson arrivals).
    pub fn exponential(&mut self, mean: f64) -> f64 {
        let u = 1.0 - self.next_f64(); // in (0, 1]
        -mean * u.ln()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_and_name_repeat_the_sequence() {
        let mut a = Rng::named(7, "flusher");
        let mut b = Rng::named(7, "flusher");
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
    }

    #[test]
    fn names_and_seeds_give_independent_streams() {
        let first: Vec<u64> = (0..4).map(|_| Rng::named(7, "a").next_u64()).collect();
        let mut other = Rng::named(7, "b");
        let mut reseeded = Rng::named(8, "a");
        assert_ne!(first[0], other.next_u64());
        assert_ne!(first[0], reseeded.next_u64());
    }

    #[test]
    fn bounded_draws_stay_in_range_and_cover_it() {
        let mut rng = Rng::new(1);
        let mut seen = [false; 6];
        for _ in 0..1000 {
            let v = rng.range_inclusive(10, 15);
            assert!((10..=15).contains(&v));
            seen[(v - 10) as usize] = true;
        }
        assert!(seen.iter().all(|&s| s), "every value drawn at least once");
        let mean: f64 = (0..10_000).map(|_| rng.exponential(5.0)).sum::<f64>() / 10_000.0;
        assert!((mean - 5.0).abs() < 0.3, "exponential mean {mean}");
    }
}
