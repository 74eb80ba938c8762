//! What the property tests share (tests/prop_*.rs).

use proptest::prelude::ProptestConfig;

/// A property's configuration: `PROPTEST_CASES` cases if set, else `default_cases`; a fixed
/// seed, so a run is reproducible; no failure files written into the checkout.
pub fn config(default_cases: u32, seed: u64) -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|cases| cases.parse().ok())
            .unwrap_or(default_cases),
        rng_seed: proptest::test_runner::RngSeed::Fixed(seed),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}
