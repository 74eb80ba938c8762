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

/// Ordered mode's promise on Linux 3.10 (crash/ordered): delayed-allocation writeback files
/// nothing as ordered data there (f3b59291a69d, 3.9), so a commit carrying the flusher's
/// allocation can reach the media before the data it maps, and a crash exposes blocks the
/// device never wrote with the file's data: the bug 06bd3c36a733 ("ext4: fix data exposure
/// after a crash", 4.7) fixed. Check 6 counts it (data=ordered promises it).
#[test]
fn linux_3_10_exposes_blocks_the_flusher_allocated_before_their_data() {
    let r = check_in("crash/ordered", "ext4-3.10", 300);
    assert!(r.ordered_promised);
    assert!(r.ordered_data.violations > 0, "{:?}", r.ordered_data);
    assert!(
        r.ordered_data.examples[0].contains("app.log"),
        "{:?}",
        r.ordered_data
    );
    assert_eq!(r.fsync_durability.violations, 0, "{:?}", r.fsync_durability);
}

/// 4.19's `ext4_map_blocks` files new blocks (06bd3c36a733): the commit waits for their data.
/// data=writeback orders nothing: it exposes them too, but promises nothing (not counted).
#[test]
fn linux_4_19_keeps_ordered_data_and_data_writeback_does_not_promise_it() {
    let fixed = check_in("crash/ordered", "ext4-4.19", 200);
    assert!(fixed.ordered_data.checked > 200, "{:?}", fixed.ordered_data);
    assert_eq!(fixed.violations(), 0, "{fixed:?}");
    let writeback = check_in("crash/ordered", "ext4-writeback", 200);
    assert!(!writeback.ordered_promised);
    assert!(
        writeback.ordered_data.violations > 0,
        "{:?}",
        writeback.ordered_data
    );
    assert_eq!(writeback.violations(), 0, "{writeback:?}");
}

/// `crashcheck --dump-point N`: one crash state in words, from the device's blocks to the
/// checks' verdicts.
#[test]
fn dump_point_describes_one_crash_state() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mobistack"))
        .args([
            "crashcheck",
            "crash/atomicfile",
            "--variant",
            "ext4",
            "--points",
            "40",
            "--dump-point",
            "30",
        ])
        .output()
        .expect("mobistack runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for expected in [
        "crash point 30 of 40 at",
        "The device (volatile write cache)",
        "journal commit blocks",
        "(inode table of group ",
        "named prefs.xml in directory",
        "do_one_pass's PASS_SCAN from tid",
        "journal commit block of tid",
        "Recovery: ",
        "prefs.xml",
        "The checks:",
        "5 rename is atomic: /data/data/com.example.settings/shared_prefs/prefs.xml: ok",
        "6 ordered data, prefs.xml: ok",
    ] {
        assert!(text.contains(expected), "no `{expected}` in:\n{text}");
    }
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_mobistack"))
        .args([
            "crashcheck",
            "crash/atomicfile",
            "--variant",
            "ext4",
            "--points",
            "10",
        ])
        .args(["--dump-point", "10"])
        .output()
        .expect("mobistack runs");
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("--dump-point 10"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}
