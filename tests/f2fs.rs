//! F2FS end to end: the foreground-GC stall scenario (issue 18) on a scaled copy, and F2FS
//! under real SQLite in `reproduce joj`'s configurations.

use mobistack::run::{run_scenario, RunOptions};
use mobistack::scenario;

/// `f2fs/fg-gc-stall` on a 512 MiB device with a 300 MiB rewritten file and 30 s: the same
/// fill ratio, half the time.
fn scaled(variant: &str) -> mobistack::report::results::RunResult {
    let builtin = scenario::builtin::find("f2fs/fg-gc-stall").unwrap();
    let source = builtin
        .source
        .replace("capacity = \"1GiB\"", "capacity = \"512MiB\"")
        .replace("region = \"600MiB\"", "region = \"300MiB\"")
        .replace("duration = \"60s\"", "duration = \"30s\"");
    let mut s = scenario::parse("f2fs/fg-gc-stall (scaled)", &source).unwrap();
    s.variants.retain(|v| v.name == variant);
    run_scenario(&s, &RunOptions::default())
        .unwrap()
        .runs
        .remove(0)
}

#[test]
fn a_foreground_write_waits_in_f2fs_foreground_gc_on_a_nearly_full_partition() {
    let lfs = scaled("lfs");
    assert!(
        lfs.counters["f2fs.fg_gc_segments"] > 0,
        "{:?}",
        lfs.counters
    );
    assert!(lfs.counters["f2fs.gc_moved_data"] > 0);
    let write = &lfs.apps["messenger"].ops["write"];
    // A 4 KiB buffered write is microseconds; behind foreground GC it takes milliseconds.
    assert!(
        write.max_ns > 20_000_000,
        "the messenger's slowest write: {} ns",
        write.max_ns
    );
    // The slowest one is explained by the GC's I/O and the checkpoint that ends it.
    let slowest = &write.slowest[0];
    assert!(
        slowest
            .waits
            .iter()
            .any(|w| w.reason == "submit_bio_wait" || w.reason == "mutex_lock"),
        "{slowest:?}"
    );
    let ext4 = scaled("ext4");
    assert!(
        ext4.apps["messenger"].ops["write"].max_ns * 10 < write.max_ns,
        "ext4 has no cleaning: its writes stay in memory"
    );
}
