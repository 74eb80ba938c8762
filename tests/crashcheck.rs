//! `mobistack crashcheck` (issue 20): crash states built from a run's recorded device writes,
//! recovered as jbd2 would, checked against what the app did. ext4 with barriers must keep
//! every fsynced byte and SQLite's database intact; the same run without barriers on a card
//! with a volatile cache must lose both, or the checks could not tell.

use mobistack::crashcheck::{check_variant, CrashCheckOptions, VariantReport};

fn check(variant: &str, points: usize) -> VariantReport {
    check_in("crash/sqlite", variant, points)
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

/// The finding: MobiFS's VCTs log writes only, and SQLite's `ftruncate` of its journal reaches
/// ext4 at once, so a crash can pair the database as a VCT left it with a journal truncated
/// later: no state the app had at a VCT boundary.
#[test]
fn mobifs_without_logged_truncates_breaks_its_point_in_time_promise() {
    let r = check("mobifs", 300);
    assert!(r.mobifs);
    assert_eq!(r.point_in_time.checked, 300);
    assert!(r.point_in_time.violations > 0, "{:?}", r.point_in_time);
    assert_eq!(
        r.fsync_durability.checked, 0,
        "MobiFS's fsync is asynchronous"
    );
}

/// With truncates logged in the VCTs (and a VCT never closing inside a write), every crash
/// state is the app's data at one of its VCT boundaries.
#[test]
fn with_truncates_in_the_vcts_every_crash_state_is_a_vct_boundary() {
    let r = check("mobifs-log-truncate", 300);
    assert_eq!(r.point_in_time.checked, 300);
    assert_eq!(r.point_in_time.violations, 0, "{:?}", r.point_in_time);
    assert!(r.sqlite_integrity.checked > 10, "{r:?}");
    assert_eq!(r.sqlite_integrity.violations, 0, "{:?}", r.sqlite_integrity);
    assert!(r.distinct_states > 10, "checkpoints throughout the run");
}

fn check_in(scenario: &str, variant: &str, points: usize) -> VariantReport {
    let scenario = mobistack::scenario::load(scenario).expect("built-in scenario");
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

/// The finding's scope: in WAL mode SQLite never truncates or unlinks during the run, and
/// MobiFS keeps its promise; in DELETE mode each transaction unlinks the journal, which no
/// VCT logs, with or without `log-truncate`.
#[test]
fn mobifs_keeps_its_promise_under_wal_but_not_under_delete() {
    let wal = check_in("crash/sqlite-wal", "mobifs", 200);
    assert_eq!(wal.point_in_time.violations, 0, "{:?}", wal.point_in_time);
    assert!(
        wal.files.iter().any(|f| f.ends_with("-wal")),
        "{:?}",
        wal.files
    );
    assert_eq!(wal.sqlite_integrity.violations, 0);
    let delete = check_in("crash/sqlite-delete", "mobifs-log-truncate", 200);
    assert!(
        delete.point_in_time.violations > 0,
        "{:?}",
        delete.point_in_time
    );
}
