//! `mobistack crashcheck` (issue 20): crash states built from a run's recorded device writes,
//! recovered as jbd2 would, checked against what the app did. ext4 with barriers must keep
//! every fsynced byte and SQLite's database intact; the same run without barriers on a card
//! with a volatile cache must lose both, or the checks could not tell.

use mobistack::crashcheck::{check_variant, CrashCheckOptions, VariantReport};

fn check(variant: &str, points: usize) -> VariantReport {
    let scenario = mobistack::scenario::load("crash/sqlite").expect("built-in scenario");
    let v = scenario
        .variants
        .iter()
        .find(|v| v.name == variant)
        .expect("variant");
    let options = CrashCheckOptions {
        points,
        ..CrashCheckOptions::default()
    };
    check_variant(&scenario, v, &options, &mut |_, _| {}).expect("crashcheck runs")
}

#[test]
fn ext4_with_barriers_keeps_fsynced_data_and_the_database_intact() {
    let r = check("ext4", 400);
    assert!(
        r.volatile_cache,
        "the card has a volatile cache: flushes matter"
    );
    assert!(r.transactions > 100 && r.writes > 1000, "{r:?}");
    assert!(r.fsync_durability.checked > 100, "{r:?}");
    assert_eq!(r.fsync_durability.violations, 0, "{:?}", r.fsync_durability);
    assert!(r.sqlite_integrity.checked > 50, "{r:?}");
    assert_eq!(r.sqlite_integrity.violations, 0, "{:?}", r.sqlite_integrity);
    assert!(
        r.distinct_states > 50,
        "the points cover many states: {}",
        r.distinct_states
    );
}

#[test]
fn without_barriers_fsynced_data_and_the_database_are_lost() {
    let r = check("ext4-nobarrier", 400);
    assert_eq!(r.flushes, 0, "nobarrier sends no flush");
    assert!(
        r.fsync_durability.violations > r.fsync_durability.checked / 2,
        "{:?}",
        r.fsync_durability
    );
    assert!(
        r.sqlite_integrity.violations > 0,
        "{:?}",
        r.sqlite_integrity
    );
}

#[test]
fn the_same_seed_gives_the_same_report() {
    let a = serde_json::to_string(&check("ext4", 150)).unwrap();
    let b = serde_json::to_string(&check("ext4", 150)).unwrap();
    assert_eq!(a, b);
}
