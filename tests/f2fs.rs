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

/// The built-in `joj/insert` scaled to 100 INSERTs on `fs` with `replacements`; the run of its
/// internal-journal variant.
fn joj(fs: &str, replacements: &[(&str, &str)]) -> mobistack::report::results::RunResult {
    let mut source = scenario::builtin::find("joj/insert")
        .unwrap()
        .source
        .replace("count = 1000", "count = 100")
        .replace("type = \"ext4\"", &format!("type = \"{fs}\""))
        .replace("data = \"ordered\"", "");
    for (from, to) in replacements {
        assert!(source.contains(from), "{from}");
        source = source.replace(from, to);
    }
    // The external-journal variant is ext4's only.
    let external = source.find("[[variant]]\nname = \"external\"").unwrap();
    source.truncate(external);
    let mut s = scenario::parse("insert.toml", &source).unwrap();
    s.variants.retain(|v| v.name == "internal");
    run_scenario(&s, &RunOptions::default())
        .unwrap()
        .runs
        .remove(0)
}

fn per_txn(run: &mobistack::report::results::RunResult, counter: &str) -> f64 {
    let counters = &run.apps["db"].counters;
    assert_eq!(counters["sqlite.transactions"], 100, "{counters:?}");
    counters.get(counter).copied().unwrap_or(0) as f64 / 100.0
}

#[test]
fn sqlite_on_f2fs_checkpoints_per_journal_and_atomic_writes_remove_the_journal() {
    let delete = joj("f2fs", &[]);
    // SQLite syncs the journal's directory each transaction: a checkpoint on F2FS.
    let cps = delete.counters["f2fs.checkpoints"] as f64 / 100.0;
    assert!((0.9..1.2).contains(&cps), "{cps} checkpoints per INSERT");
    assert!(per_txn(&delete, "sqlite.cp-pack.writes") >= 2.0);
    assert_eq!(
        per_txn(&delete, "sqlite.journal-commit.writes"),
        0.0,
        "no jbd2"
    );
    let atomic = joj(
        "f2fs",
        &[(
            "value_size = 100",
            "value_size = 100\nbatch_atomic_write = true",
        )],
    );
    assert_eq!(
        per_txn(&atomic, "sqlite.journal.writes"),
        0.0,
        "no rollback journal"
    );
    assert!(per_txn(&atomic, "sqlite.flushes") < 1.2);
    assert!(atomic.apps["db"].counters["sqlite.call.ioctl"] >= 200);
    let mean = |r: &mobistack::report::results::RunResult| r.apps["db"].ops["transaction"].mean_ns;
    assert!(
        mean(&atomic) * 2.0 < mean(&delete),
        "atomic writes at least double inserts/s: {} vs {}",
        mean(&atomic),
        mean(&delete)
    );
    // WAL: one fsync per commit, on F2FS the WAL's block, the inode block and a flush.
    let wal = joj(
        "f2fs",
        &[("journal_mode = \"delete\"", "journal_mode = \"wal\"")],
    );
    let ext4_wal = joj(
        "ext4",
        &[("journal_mode = \"delete\"", "journal_mode = \"wal\"")],
    );
    assert!(per_txn(&wal, "sqlite.node.writes") <= 1.1);
    assert!(
        mean(&wal) < mean(&ext4_wal),
        "F2FS's fsync beats ext4's commit"
    );
}
