//! SQLite over the simulated ext4: the system calls each journal mode makes per commit, the
//! contents read back, locks between connections, and determinism.

use super::options::{JournalMode, Preset, SqliteOptions, SyncCall};
use super::{Database, SqliteCpu, SqliteShared};
use crate::dev::fixed::FixedLatencyDevice;
use crate::fs::ext4::Ext4Config;
use crate::fs::vfs::Vfs;
use crate::kernel::{CpuConfig, Hz};
use crate::mm::VmConfig;
use crate::sim::{Sim, Simulation};
use crate::units::NS_PER_US;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::Future;
use std::rc::Rc;

struct Rig {
    sim: Simulation,
    vfs: Rc<Vfs>,
    shared: Rc<SqliteShared>,
}

impl Rig {
    fn new() -> Rig {
        Rig::on(&Ext4Config::default())
    }

    /// Over the file system `fs` (`[stack.fs]`).
    fn on(fs: &Ext4Config) -> Rig {
        let sim = Simulation::new(7);
        // 100 us + 50 MB/s, one slot: a plain device (eMMC 4.5 class sequential write).
        let device = Box::new(FixedLatencyDevice::new(1, 100 * NS_PER_US, 50_000_000));
        let vfs = crate::stack::storage_with_fs(
            &sim.handle(),
            VmConfig::android(),
            Hz(200),
            CpuConfig::zero_cost(),
            fs,
            device,
            "noop",
            1 << 30,
        )
        .expect("valid storage");
        vfs.mkdir_all(&sim.handle(), "/data/db").unwrap();
        Rig {
            sim,
            vfs,
            shared: Rc::new(SqliteShared::default()),
        }
    }

    fn run<F, Fut>(&self, body: F)
    where
        F: FnOnce(Sim, Rc<Vfs>, Rc<SqliteShared>) -> Fut + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        let (s, vfs, shared) = (self.sim.handle(), self.vfs.clone(), self.shared.clone());
        self.sim
            .spawn("app", async move { body(s, vfs, shared).await });
        self.sim.run_until(u64::MAX, true).expect("no deadlock");
    }
}

async fn open(
    sim: &Sim,
    vfs: &Rc<Vfs>,
    shared: &Rc<SqliteShared>,
    uid: u32,
    options: &SqliteOptions,
) -> Database {
    let process = Rc::new(vfs.new_process(uid, "db"));
    Database::open(
        sim,
        vfs.clone(),
        process,
        shared.clone(),
        "/data/db/test.db",
        options.resolve(),
        SqliteCpu::default(),
        1,
    )
    .await
    .expect("opens")
}

/// Calls per autocommit INSERT in `mode` (synchronous FULL, fsync), after a warm-up insert.
fn calls_per_insert(mode: JournalMode) -> BTreeMap<&'static str, u64> {
    calls_per_insert_on(&Ext4Config::default(), mode, false)
}

/// The same on `fs`, SQLite built with `SQLITE_ENABLE_BATCH_ATOMIC_WRITE` or not.
fn calls_per_insert_on(
    fs: &Ext4Config,
    mode: JournalMode,
    batch_atomic_write: bool,
) -> BTreeMap<&'static str, u64> {
    let rig = Rig::on(fs);
    let result = Rc::new(RefCell::new(BTreeMap::new()));
    let out = result.clone();
    rig.run(move |sim, vfs, shared| async move {
        let options = SqliteOptions {
            journal_mode: Some(mode),
            batch_atomic_write: Some(batch_atomic_write),
            ..SqliteOptions::default()
        };
        let db = open(&sim, &vfs, &shared, 10_001, &options).await;
        db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
            .await
            .unwrap();
        db.execute("INSERT INTO t (v) VALUES ('warm')")
            .await
            .unwrap();
        let before = db.calls().by_call;
        for i in 0..10 {
            db.execute(&format!("INSERT INTO t (v) VALUES ('row {i}')"))
                .await
                .unwrap();
        }
        let after = db.calls().by_call;
        let outcome = db.execute("SELECT v FROM t").await.unwrap();
        assert_eq!(outcome.rows, 11, "every row reads back");
        let mut per = BTreeMap::new();
        for (name, count) in after {
            let delta = count - before.get(name).copied().unwrap_or(0);
            if delta > 0 {
                assert_eq!(delta % 10, 0, "{name}: {delta} calls over 10 inserts");
                per.insert(name, delta / 10);
            }
        }
        db.close().await.unwrap();
        *out.borrow_mut() = per;
    });
    let per = result.borrow().clone();
    per
}

#[test]
fn each_journal_mode_syncs_as_sqlite_documents() {
    // What the bundled SQLite (3.54) does per commit with synchronous FULL. The rollback
    // journal is closed when the lock is released (pager_unlock) and reopened with
    // SQLITE_OPEN_CREATE by the next transaction, so unixOpen marks it UNIXFILE_DIRSYNC each time
    // and its first sync also syncs the directory. syncJournal syncs the journal before and
    // after writing the header's record count (fullSync, no SQLITE_IOCAP_SEQUENTIAL); then the
    // database is synced.
    // DELETE: journal x2 + directory + database = 4, and the journal unlinked.
    let delete = calls_per_insert(JournalMode::Delete);
    assert_eq!(delete.get("fsync"), Some(&4), "{delete:?}");
    assert_eq!(delete.get("unlink"), Some(&1), "{delete:?}");
    // TRUNCATE: the same 4, plus the sync after truncating the journal to zero
    // (pager_end_transaction: "Make sure the new file size is written into the inode right
    // away", Mozilla bug 1072773) = 5; no unlink.
    let truncate = calls_per_insert(JournalMode::Truncate);
    assert_eq!(truncate.get("fsync"), Some(&5), "{truncate:?}");
    assert_eq!(truncate.get("ftruncate"), Some(&1), "{truncate:?}");
    assert_eq!(truncate.get("unlink"), None, "{truncate:?}");
    // PERSIST: the header zeroed by a write and synced (zeroJournalHdr) = 5; no truncate.
    let persist = calls_per_insert(JournalMode::Persist);
    assert_eq!(persist.get("fsync"), Some(&5), "{persist:?}");
    assert_eq!(persist.get("ftruncate"), None, "{persist:?}");
    assert_eq!(persist.get("unlink"), None, "{persist:?}");
    let wal = calls_per_insert(JournalMode::Wal);
    assert_eq!(wal.get("fsync"), Some(&1), "{wal:?}");
}

#[test]
fn android_preset_syncs_with_fdatasync_and_a_second_connection_waits_for_the_lock() {
    let rig = Rig::new();
    let log = Rc::new(RefCell::new(Vec::new()));
    let out = log.clone();
    rig.run(move |sim, vfs, shared| async move {
        let options = SqliteOptions {
            preset: Preset::Android44,
            ..SqliteOptions::default()
        };
        assert_eq!(options.resolve().sync_call, SyncCall::Fdatasync);
        let a = open(&sim, &vfs, &shared, 10_001, &options).await;
        a.execute("CREATE TABLE t (x)").await.unwrap();
        let b = open(&sim, &vfs, &shared, 10_002, &options).await;
        // `a` holds a write transaction; `b`'s write is BUSY, and its busy handler sleeps in
        // virtual time until `a` commits.
        a.execute("BEGIN IMMEDIATE; INSERT INTO t VALUES (1)")
            .await
            .unwrap();
        let sim2 = sim.clone();
        let waiter = sim.spawn("b", async move {
            let start = sim2.now();
            b.execute("INSERT INTO t VALUES (2)").await.unwrap();
            let waited = sim2.now() - start;
            let rows = b.execute("SELECT * FROM t").await.unwrap().rows;
            b.close().await.unwrap();
            (waited, rows)
        });
        sim.sleep(50_000 * NS_PER_US).await;
        a.execute("COMMIT").await.unwrap();
        let (waited, rows) = waiter.join(&sim).await;
        out.borrow_mut().push((waited, rows));
        assert!(a.calls().by_call.contains_key("fdatasync"));
        assert!(!a.calls().by_call.contains_key("fsync"));
        a.close().await.unwrap();
    });
    let (waited, rows) = log.borrow()[0];
    assert!(
        waited >= 40_000 * NS_PER_US,
        "b waited {waited} ns for a's lock"
    );
    assert_eq!(rows, 2);
}

#[test]
fn wal_readers_share_the_shm_while_a_writer_appends() {
    let rig = Rig::new();
    let log = Rc::new(RefCell::new(Vec::new()));
    let out = log.clone();
    rig.run(move |sim, vfs, shared| async move {
        let options = SqliteOptions {
            preset: Preset::Android9,
            ..SqliteOptions::default()
        };
        let writer = open(&sim, &vfs, &shared, 10_001, &options).await;
        writer
            .execute("CREATE TABLE t (x); INSERT INTO t VALUES (1)")
            .await
            .unwrap();
        let reader = open(&sim, &vfs, &shared, 10_002, &options).await;
        // A read transaction open in the reader does not block the writer in WAL mode, and
        // the reader keeps its snapshot until it ends.
        reader.execute("BEGIN; SELECT * FROM t").await.unwrap();
        writer.execute("INSERT INTO t VALUES (2)").await.unwrap();
        let during = reader.execute("SELECT * FROM t").await.unwrap().rows;
        reader.execute("COMMIT").await.unwrap();
        let after = reader.execute("SELECT * FROM t").await.unwrap().rows;
        out.borrow_mut().push((during, after));
        let calls = writer.calls().by_call;
        assert!(
            vfs.ino_of("/data/db/test.db-wal").is_some(),
            "the WAL exists"
        );
        assert!(vfs.ino_of("/data/db/test.db-shm").is_some(), "so does -shm");
        assert!(calls.contains_key("fdatasync"), "{calls:?}");
        reader.close().await.unwrap();
        writer.close().await.unwrap();
        // The last connection checkpoints and deletes the WAL and -shm (SQLite's default).
        assert!(vfs.ino_of("/data/db/test.db-wal").is_none());
        assert!(vfs.ino_of("/data/db/test.db-shm").is_none());
    });
    assert_eq!(
        log.borrow()[0],
        (1, 2),
        "snapshot isolation, then the new row"
    );
}

fn f2fs() -> Ext4Config {
    Ext4Config {
        kind: crate::fs::ext4::FsKind::F2fs,
        ..Ext4Config::default()
    }
}

#[test]
fn on_f2fs_a_batch_atomic_commit_replaces_the_rollback_journal_by_two_ioctls() {
    let batch = calls_per_insert_on(&f2fs(), JournalMode::Delete, true);
    // F2FS_IOC_START_ATOMIC_WRITE + F2FS_IOC_COMMIT_ATOMIC_WRITE, then the database's sync;
    // no journal is opened, written, synced or unlinked.
    assert_eq!(batch.get("ioctl"), Some(&2), "{batch:?}");
    assert_eq!(batch.get("unlink"), None, "{batch:?}");
    assert_eq!(batch.get("fsync"), Some(&1), "{batch:?}");
    assert!(!batch.contains_key("open"), "{batch:?}");
    // Without the build flag SQLite on F2FS makes ext4's calls.
    let plain = calls_per_insert_on(&f2fs(), JournalMode::Delete, false);
    assert_eq!(plain, calls_per_insert(JournalMode::Delete));
    assert_eq!(plain.get("ioctl"), None);
}

#[test]
fn the_batch_atomic_build_changes_nothing_on_ext4() {
    let with = calls_per_insert_on(&Ext4Config::default(), JournalMode::Delete, true);
    assert_eq!(with, calls_per_insert(JournalMode::Delete));
}

/// A statement that computes forever (SQLite's progress handler yields every
/// [`super::coroutine::PROGRESS_STEPS`] VM steps).
const ENDLESS: &str =
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c";

#[test]
fn a_run_ending_mid_transaction_aborts_sqlites_coroutine_which_closes_its_connection() {
    // The task is dropped with SQLite suspended inside a statement of an open transaction (in
    // its progress handler, `sqlite3_progress_handler`, on the coroutine's stack). Dropping the
    // coroutine as it is would unwind through SQLite's C frames (corosensei's forced unwind:
    // the process aborts); the Database resumes it with an abort instead, SQLite fails the
    // statement, closes the connection (`sqlite3_close`, its unlock and close failing with EIO)
    // and the coroutine returns.
    let rig = Rig::new();
    let (sim, vfs, shared) = (rig.sim.handle(), rig.vfs.clone(), rig.shared.clone());
    let reached = Rc::new(std::cell::Cell::new(false));
    let flag = reached.clone();
    rig.sim.spawn("app", async move {
        let db = open(&sim, &vfs, &shared, 10_001, &SqliteOptions::default()).await;
        db.execute("CREATE TABLE t (x); BEGIN; INSERT INTO t VALUES (1)")
            .await
            .unwrap();
        flag.set(true);
        let _ = db.execute(ENDLESS).await;
        unreachable!("the statement never ends");
    });
    rig.sim
        .run_until(50_000_000, true)
        .expect("stops at the limit");
    assert!(reached.get());
    assert_eq!(super::link::tests::running(), 1, "suspended mid-statement");
    drop(rig);
    assert_eq!(super::link::tests::running(), 0, "returned, not leaked");
}

#[test]
fn a_connection_dropped_between_statements_and_one_closed_both_end_their_coroutine() {
    let rig = Rig::new();
    rig.run(|sim, vfs, shared| async move {
        let options = SqliteOptions::default();
        let closed = open(&sim, &vfs, &shared, 10_001, &options).await;
        let dropped = open(&sim, &vfs, &shared, 10_002, &options).await;
        assert_eq!(super::link::tests::running(), 2);
        closed.execute("CREATE TABLE t (x)").await.unwrap();
        closed.close().await.unwrap();
        assert_eq!(super::link::tests::running(), 1);
        dropped.execute("SELECT * FROM t").await.unwrap();
        drop(dropped);
        assert_eq!(super::link::tests::running(), 0);
    });
}

#[test]
fn the_coroutine_stack_holds_sqlites_deepest_expression() {
    // `SQLITE_MAX_EXPR_DEPTH` (1,000): SQLite's expression walkers and code generator
    // (`sqlite3ExprCodeTarget`) recurse once per level, the deepest recursion its limits allow.
    // An expression just under the limit (`~` nests one level per parser-stack entry, within
    // `SQLITE_MAX_PARSER_DEPTH`'s 2,500) runs on the coroutine's stack with room to spare; one
    // over it is refused (`sqlite3ExprCheckHeight`).
    fn nested(depth: usize) -> String {
        format!("SELECT {}1", "~".repeat(depth))
    }
    let rig = Rig::new();
    rig.run(|sim, vfs, shared| async move {
        let db = open(&sim, &vfs, &shared, 10_001, &SqliteOptions::default()).await;
        db.execute(&nested(998)).await.expect("within the limit");
        let error = db.execute(&nested(1_001)).await.unwrap_err();
        assert!(
            error.message.contains("too large (maximum depth 1000)"),
            "{error:?}"
        );
        db.close().await.unwrap();
    });
    let used = super::link::tests::deepest_stack();
    println!(
        "deepest coroutine stack: {} KiB of {} KiB",
        used >> 10,
        super::link::STACK_BYTES >> 10
    );
    assert!(used > 0 && used * 2 < super::link::STACK_BYTES, "{used}");
}
