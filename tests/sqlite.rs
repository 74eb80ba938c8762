//! Real SQLite in the loop (issue 16) on a scaled copy of the built-in `joj/insert` (100 INSERTs
//! instead of 1,000): the JOJ mechanisms the reproduction reports, each a direction a wrong
//! model would break, and determinism with SQLite's thread in the run.

use mobistack::report::RunResult;
use mobistack::run::{run_scenario, RunOptions};
use mobistack::scenario;

fn run(replacements: &[(&str, &str)]) -> Vec<RunResult> {
    let mut source = scenario::builtin::find("joj/insert")
        .expect("built in")
        .source
        .replace("count = 1000", "count = 100");
    for (from, to) in replacements {
        assert!(source.contains(from), "{from}");
        source = source.replace(from, to);
    }
    let s = scenario::parse("insert.toml", &source).expect("parses");
    run_scenario(&s, &RunOptions::default()).expect("runs").runs
}

fn per_txn(run: &RunResult, counter: &str) -> f64 {
    let counters = &run.apps["db"].counters;
    assert_eq!(counters["sqlite.transactions"], 100, "{:?}", counters);
    counters.get(counter).copied().unwrap_or(0) as f64 / 100.0
}

#[test]
fn delete_mode_commits_the_journal_files_churn_and_fdatasync_persist_removes_it() {
    let stock = run(&[]);
    let internal = &stock[0];
    // 4 syncs per commit (pager.c, checked call by call in app::sqlite::tests); each commit of
    // ext4's journal is descriptor + blocks + commit.
    // (The call counts include opening and creating the table: a few calls over 100.)
    let syncs = per_txn(internal, "sqlite.call.fsync");
    assert!((syncs - 4.0).abs() < 0.1, "{syncs} fsyncs per INSERT");
    let commits = per_txn(internal, "sqlite.journal-commit.writes");
    assert!(commits > 2.0, "DELETE: {commits} jbd2 commits per INSERT");
    assert!(per_txn(internal, "sqlite.journal-metadata.writes") > commits);
    assert!(per_txn(internal, "sqlite.database.writes") >= 1.0);
    assert_eq!(per_txn(internal, "sqlite.journal.writes"), 2.0);
    // The external journal's blocks go to its own device.
    let external = &stock[1];
    assert!(per_txn(external, "sqlite.journal-commit@mmcblk1.writes") > 2.0);
    assert_eq!(per_txn(external, "sqlite.journal-commit.writes"), 0.0);

    // fdatasync + PERSIST: no metadata change per transaction, so (almost) no commit.
    let fixed = run(&[
        ("journal_mode = \"delete\"", "journal_mode = \"persist\""),
        ("sync_call = \"fsync\"", "sync_call = \"fdatasync\""),
    ]);
    let fixed_commits = per_txn(&fixed[0], "sqlite.journal-commit.writes");
    assert!(
        fixed_commits < 0.2,
        "fixed: {fixed_commits} commits per INSERT"
    );
    let mean = |r: &RunResult| r.apps["db"].ops["transaction"].mean_ns;
    assert!(
        mean(&fixed[0]) < 0.8 * mean(internal),
        "the fix shortens an INSERT: {} vs {} ns",
        mean(&fixed[0]),
        mean(internal)
    );

    // WAL: one sync per commit.
    let wal = run(&[("journal_mode = \"delete\"", "journal_mode = \"wal\"")]);
    let wal_syncs = per_txn(&wal[0], "sqlite.call.fsync");
    assert!(
        (wal_syncs - 1.0).abs() < 0.1,
        "{wal_syncs} fsyncs per WAL commit"
    );
    assert!(per_txn(&wal[0], "sqlite.wal.writes") >= 1.0);
    assert!(mean(&wal[0]) < mean(internal));
}

#[test]
fn the_same_scenario_and_seed_give_byte_identical_results_with_sqlite_in_the_loop() {
    let json = |runs: &[RunResult]| serde_json::to_string(runs).unwrap();
    let first = json(&run(&[]));
    let second = json(&run(&[]));
    assert_eq!(first, second);
}

fn run_builtin(name: &str, replacements: &[(&str, &str)]) -> RunResult {
    let mut source = scenario::builtin::find(name)
        .expect("built in")
        .source
        .to_string();
    for (from, to) in replacements {
        assert!(source.contains(from), "{from}");
        source = source.replace(from, to);
    }
    let s = scenario::parse("builtin.toml", &source).expect("parses");
    let mut runs = run_scenario(&s, &RunOptions::default()).expect("runs").runs;
    runs.remove(0)
}

#[test]
fn mobibench_runs_its_three_operations_and_the_speedtest_its_sixteen_tests() {
    let mobibench = run_builtin("sqlite/mobibench", &[("count = 1000", "count = 20")]);
    let app = &mobibench.apps["mobibench"];
    for op in ["insert", "update", "delete"] {
        assert_eq!(app.ops[op].count, 20, "{op}");
    }
    // Android's build: fdatasync, never fsync.
    assert!(app.counters["sqlite.call.fdatasync"] >= 60);
    assert!(!app.counters.contains_key("sqlite.call.fsync"));
    assert!(!app.counters.keys().any(|k| k.starts_with("sqlite.error")));

    let speedtest = run_builtin("sqlite/speedtest", &[("scale = 1.0", "scale = 0.01")]);
    let app = &speedtest.apps["rlbench"];
    for test in 1..=16 {
        assert_eq!(app.ops[&format!("test{test}")].count, 1, "test{test}");
    }
    assert!(!app.counters.keys().any(|k| k.starts_with("sqlite.error")));
    // Test 1 (autocommit INSERTs) waits for storage far longer than test 4 (SELECTs).
    assert!(app.ops["test1"].mean_ns > 10.0 * app.ops["test4"].mean_ns);
}

#[test]
fn a_statement_log_replays_line_by_line() {
    let log = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/workloads/sql/contacts-sync.sql"
    );
    let result = run_builtin(
        "joj/insert",
        &[(
            "statements = [\"INSERT INTO t (v) VALUES ('{value}')\"]",
            &format!("log = \"{log}\""),
        )],
    );
    let app = &result.apps["db"];
    assert_eq!(app.ops["statement"].count, 14, "every statement of the log");
    assert!(!app.counters.keys().any(|k| k.starts_with("sqlite.error")));
}

#[test]
fn reproduce_joj_quick_reports_the_fixes_direction_from_its_own_runs() {
    let options = mobistack::report::reproduce::ReproduceOptions {
        quick: true,
        threads: 0,
    };
    let r = mobistack::report::reproduce::reproduce("joj", &options, &mut |_| {}).expect("runs");
    assert_eq!(r.headlines.len(), 3);
    for h in &r.headlines {
        let (stock, fixed) = h.simulated;
        assert!(
            stock > 20.0 && stock < 200.0,
            "{}: stock {stock} inserts/s",
            h.what
        );
        assert!(fixed > 1.2 * stock, "{}: {stock} -> {fixed}", h.what);
    }
    let table = &r.tables[0];
    let inserts = |label: &str| {
        table
            .rows
            .iter()
            .find(|row| row.label.starts_with(label))
            .and_then(|row| row.values[0])
            .unwrap_or_else(|| panic!("row {label}"))
    };
    // Polling removes the interrupt path: a little faster, never slower.
    assert!(inserts("(iii)") > inserts("stock"));
    assert!(inserts("(i) fdatasync + PERSIST") > inserts("(i) fdatasync"));
}

#[test]
fn data_journal_moves_sqlites_in_place_writes_into_ext4s_log() {
    let ordered = run(&[]);
    let journaled = run(&[("data = \"ordered\"", "data = \"journal\"")]);
    let in_place =
        |r: &RunResult| per_txn(r, "sqlite.database.writes") + per_txn(r, "sqlite.journal.writes");
    assert!(in_place(&ordered[0]) >= 3.0);
    assert_eq!(
        in_place(&journaled[0]),
        0.0,
        "data=journal writes no data in place"
    );
    let log = |r: &RunResult| per_txn(r, "sqlite.journal-metadata.writes");
    assert!(log(&journaled[0]) > log(&ordered[0]) + 3.0);
}
