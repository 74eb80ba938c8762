//! `sqlite`: an app that runs SQL through the real SQLite library ([`crate::app::sqlite`]).
//!
//! ```toml
//! [app.workload.sqlite]
//! database = "/data/data/com.example/databases/app.db"
//! preset = "android-4.4"            # or "sqlite" (default), "android-9"
//! journal_mode = "delete"           # delete, truncate, persist, wal, memory, off
//! synchronous = "full"              # off, normal, full
//! setup = ["CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v TEXT)"]
//! statements = ["INSERT INTO t (v) VALUES ('{value}')"]
//! count = 1000                      # transactions
//! ```
//!
//! What runs, one of:
//! - `statements`: the body of each iteration, `{i}` the iteration and `{value}` a string of
//!   `value_size` characters; each statement is its own autocommit transaction unless
//!   `transaction = true` wraps the body in `BEGIN` / `COMMIT`. Each iteration is operation
//!   `transaction` of the results.
//! - `benchmark = "mobibench"`: Mobibench's SQLite mode (ESOS-Lab/Mobibench shell/mobibench.c,
//!   `thread_main_db`): table `tblMyList`, `count` autocommit INSERTs of a 100-character value,
//!   then `count` UPDATEs of random rows, then `count` DELETEs by id (operations `insert`,
//!   `update`, `delete`); `mobibench-insert` / `-update` / `-delete` run one of them (update
//!   and delete on rows inserted before the measurement).
//! - `benchmark = "speedtest"`: the RL Benchmark's sixteen tests of sqlite.org/speed.html at
//!   `scale` ([`speedtest`]), operations `test1` .. `test16`.
//! - `log = "file.sql"`: a SQL statement log replayed, one statement a line (as DICL's
//!   mobile traces record them); each line is operation `statement`, `BEGIN` / `COMMIT` lines
//!   pass through.
//!
//! Failures (no silent end): a statement SQLite refuses stops the app with
//! [`AppContext::fail`], naming the statement (its index, text cut by [`cut`], iteration) and
//! SQLite's message; a replayed `log` instead skips statements whose SQL does not fit the
//! database ([`replay_skips`]), with warnings, and stops on errors of the simulated system.
//!
//! Per-transaction account: for every measured transaction the app's block I/O (the account
//! by purpose, and SQLite's files told apart: `database`, `journal`, `wal`) is summed into
//! counters `sqlite.<what>.writes` / `.write_bytes` and `sqlite.flushes` (of them
//! `sqlite.flushes@<device>` on an external journal's device), `sqlite.fua`, with
//! `sqlite.transactions` to divide by; SQLite's own calls are counted as `sqlite.call.<name>`.

pub mod speedtest;

use crate::app::sqlite::link::Outcome;
use crate::app::sqlite::{
    Database, JournalMode, Preset, SqlError, SqliteCpu, SqliteOptions, SqliteShared, SyncCall,
    Synchronous, SHARED_NAME,
};
use crate::app::AppContext;
use crate::mm::bio::AccountSnapshot;
use crate::units::{cut, serde_units, Nanos};
use rusqlite::ffi;
use serde::{Deserialize, Serialize};
use std::rc::Rc;

/// A built-in benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Benchmark {
    Mobibench,
    MobibenchInsert,
    MobibenchUpdate,
    MobibenchDelete,
    Speedtest,
}

fn default_value_size() -> usize {
    100
}

fn default_scale() -> f64 {
    1.0
}

/// The `[app.workload.sqlite]` table.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SqliteConfig {
    /// The database file (absolute path); its directory exists before the run.
    pub database: String,
    #[serde(default)]
    pub preset: Preset,
    #[serde(default)]
    pub journal_mode: Option<JournalMode>,
    #[serde(default)]
    pub synchronous: Option<Synchronous>,
    #[serde(default)]
    pub page_size: Option<u32>,
    #[serde(default)]
    pub journal_size_limit: Option<i64>,
    #[serde(default)]
    pub wal_autocheckpoint: Option<u32>,
    #[serde(default)]
    pub auto_vacuum: Option<bool>,
    /// `fsync` or `fdatasync` for SQLite's syncs (the build option `-Dfdatasync=fdatasync`).
    #[serde(default)]
    pub sync_call: Option<SyncCall>,
    #[serde(default, with = "serde_units::option_duration")]
    pub busy_timeout: Option<Nanos>,
    /// SQLite built with `SQLITE_ENABLE_BATCH_ATOMIC_WRITE` (F2FS atomic writes); default:
    /// the preset's (on for `android-9`).
    #[serde(default)]
    pub batch_atomic_write: Option<bool>,
    /// SQL run once after opening (not measured).
    #[serde(default)]
    pub setup: Vec<String>,
    #[serde(default)]
    pub statements: Vec<String>,
    /// Wrap each iteration's statements in one transaction.
    #[serde(default)]
    pub transaction: bool,
    /// Iterations (statements) or transactions per Mobibench operation; default 1000 for
    /// Mobibench, unbounded for statements.
    #[serde(default)]
    pub count: Option<u64>,
    #[serde(default, with = "serde_units::duration")]
    pub think: Nanos,
    /// Characters of `{value}`.
    #[serde(default = "default_value_size")]
    pub value_size: usize,
    #[serde(default)]
    pub benchmark: Option<Benchmark>,
    /// The speedtest's row-count multiplier.
    #[serde(default = "default_scale")]
    pub scale: f64,
    /// A statement log to replay.
    #[serde(default)]
    pub log: Option<String>,
}

/// Longest statement log read (lines).
pub const MAX_LOG_LINES: usize = 10_000_000;

impl SqliteConfig {
    pub fn options(&self) -> SqliteOptions {
        SqliteOptions {
            preset: self.preset,
            journal_mode: self.journal_mode,
            synchronous: self.synchronous,
            page_size: self.page_size,
            journal_size_limit: self.journal_size_limit,
            wal_autocheckpoint: self.wal_autocheckpoint,
            auto_vacuum: self.auto_vacuum,
            sync_call: self.sync_call,
            busy_timeout: self.busy_timeout,
            batch_atomic_write: self.batch_atomic_write,
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        if !self.database.starts_with('/') || self.database.ends_with('/') {
            return Err(format!(
                "sqlite: `database` `{}` must be an absolute file path",
                self.database
            ));
        }
        self.options().validate()?;
        let sources = usize::from(!self.statements.is_empty())
            + usize::from(self.benchmark.is_some())
            + usize::from(self.log.is_some());
        if sources != 1 {
            return Err(
                "sqlite: give exactly one of `statements`, `benchmark` or `log`".to_string(),
            );
        }
        if !(self.scale > 0.0 && self.scale <= 100.0) {
            return Err(format!(
                "sqlite: `scale` must be in (0, 100], not {}",
                self.scale
            ));
        }
        if let Some(k) = self.statements.iter().position(|s| s.trim().is_empty()) {
            return Err(format!(
                "sqlite: statement {} of `statements` is empty (an iteration would run nothing)",
                k + 1
            ));
        }
        if self.value_size > 1 << 20 {
            return Err("sqlite: `value_size` must be at most 1MiB".into());
        }
        if let Some(log) = &self.log {
            read_log(log)?;
        }
        Ok(())
    }
}

/// One statement of a log file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// Its line number in the file (1-based).
    pub number: usize,
    pub sql: String,
}

/// The statements of a log file: one per non-empty line, `--` comments skipped.
pub fn read_log(path: &str) -> Result<Vec<LogLine>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("sqlite: cannot read `log` {path}: {e}"))?;
    let lines: Vec<LogLine> = text
        .lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line.trim()))
        .filter(|(_, line)| !line.is_empty() && !line.starts_with("--"))
        .map(|(number, sql)| LogLine {
            number,
            sql: sql.to_string(),
        })
        .collect();
    if lines.is_empty() {
        return Err(format!("sqlite: `log` {path} has no statements"));
    }
    if lines.len() > MAX_LOG_LINES {
        return Err(format!(
            "sqlite: `log` {path} has more than {MAX_LOG_LINES} statements"
        ));
    }
    Ok(lines)
}

/// Mobibench's values (shell/mobibench.c `INSERT_STR`, `UPDATE_STR`): 100 characters.
const MOBIBENCH_INSERT: &str = "aaaaaaaaaabbbbbbbbbbccccccccccddddddddddeeeeeeeeeeffffffffffgggggggggghhhhhhhhhhiiiiiiiiiijjjjjjjjjj";
const MOBIBENCH_UPDATE: &str = "ffffffffffgggggggggghhhhhhhhhhiiiiiiiiiijjjjjjjjjjaaaaaaaaaabbbbbbbbbbccccccccccddddddddddeeeeeeeeee";

/// Sums the per-transaction account into the app's counters.
struct TransactionAccount {
    transactions: u64,
}

impl TransactionAccount {
    fn add(&mut self, ctx: &AppContext, delta: &AccountSnapshot) {
        self.transactions += 1;
        ctx.add_counter("sqlite.transactions", 1);
        let mut flushes = 0;
        let mut fua = 0;
        // Flushes asked of a device other than the file system's (an external journal's).
        let mut flushes_elsewhere: std::collections::BTreeMap<&str, u64> = Default::default();
        for (key, count) in &delta.by_purpose {
            flushes += count.flushes;
            fua += count.fua;
            if let Some((_, device)) = key.split_once('@') {
                *flushes_elsewhere.entry(device).or_default() += count.flushes;
            }
            if key == "data" || key.starts_with("data@") {
                continue; // told apart by file below
            }
            if count.writes > 0 {
                ctx.add_counter(&format!("sqlite.{key}.writes"), count.writes);
                ctx.add_counter(&format!("sqlite.{key}.write_bytes"), count.write_bytes);
            }
            if count.discards > 0 {
                ctx.add_counter(&format!("sqlite.{key}.discards"), count.discards);
            }
        }
        let data_writes: u64 = delta
            .by_purpose
            .iter()
            .filter(|(key, _)| *key == "data")
            .map(|(_, c)| c.writes)
            .sum();
        let mut labelled = 0;
        for (label, count) in &delta.by_file {
            if count.writes > 0 {
                labelled += count.writes;
                ctx.add_counter(&format!("sqlite.{label}.writes"), count.writes);
                ctx.add_counter(&format!("sqlite.{label}.write_bytes"), count.write_bytes);
            }
        }
        if data_writes > labelled {
            ctx.add_counter("sqlite.other-data.writes", data_writes - labelled);
        }
        ctx.add_counter("sqlite.flushes", flushes);
        for (device, n) in flushes_elsewhere {
            ctx.add_counter(&format!("sqlite.flushes@{device}"), n);
        }
        ctx.add_counter("sqlite.fua", fua);
    }
}

/// Runs `sql` as operation `op`, with its block I/O in the per-transaction account. SQLite's
/// error is counted (`sqlite.error.*`) and returned.
async fn measured(
    ctx: &AppContext,
    db: &Database,
    account: &mut TransactionAccount,
    op: &'static str,
    sql: &str,
) -> Result<Outcome, SqlError> {
    ctx.sim.step(op).await;
    let before = db.account();
    let timer = ctx.begin_op(op);
    let result = db.execute(sql).await;
    // A statement interrupted because the app was stopped ends here too, at its interruption.
    ctx.end_op(timer);
    match &result {
        Ok(_) => {
            if let (Some(before), Some(after)) = (before, db.account()) {
                account.add(ctx, &after.since(&before));
            }
        }
        Err(error) => count_error(ctx, error),
    }
    result
}

/// Counts SQLite's error by kind: `sqlite.error.busy` / `ioerr` / `full` / `other`.
fn count_error(ctx: &AppContext, error: &SqlError) {
    let kind = match error.code {
        ffi::SQLITE_BUSY | ffi::SQLITE_LOCKED => "sqlite.error.busy",
        ffi::SQLITE_IOERR => "sqlite.error.ioerr",
        ffi::SQLITE_FULL => "sqlite.error.full",
        _ => "sqlite.error.other",
    };
    ctx.add_counter(kind, 1);
}

/// `what` failed with `error`: the app's failure message, naming the failing statement of a
/// command of several (`BEGIN; ...; COMMIT`, or several statements in one string).
fn failure_message(what: &str, error: &SqlError) -> String {
    let inner = if error.statement > 1 && !error.sql.is_empty() {
        format!(
            ", its statement {} (`{}`)",
            error.statement,
            cut(&error.sql)
        )
    } else {
        String::new()
    };
    format!("{what}{inner}: {}", error.message)
}

/// The app stops with `error` from `what`; an interruption because the app was stopped (by
/// the timeline, or by another of its tasks' failure) is not a failure of its own.
fn fail(ctx: &AppContext, what: &str, error: &SqlError) {
    if error.interrupted() && ctx.is_stopped() {
        return;
    }
    ctx.fail(failure_message(what, error));
}

/// The body of a `sqlite` app.
pub async fn sqlite(ctx: AppContext, config: SqliteConfig) {
    if let Err(error) = config.validate() {
        // The scenario's parser validated it already; kept for callers that build the config.
        ctx.add_counter("errno.EINVAL", 1);
        ctx.fail_to_start(error);
        return;
    }
    let Some(vfs) = ctx.stack.vfs.clone() else {
        ctx.add_counter("errno.no-storage-stack", 1);
        ctx.fail_to_start("sqlite: the scenario has no storage stack for the database");
        return;
    };
    if let Some(i) = config.database.rfind('/').filter(|&i| i > 0) {
        if let Err(errno) = vfs.mkdir_all(&ctx.sim, &config.database[..i]) {
            ctx.add_counter("errno.ENOTDIR", 1);
            ctx.fail_to_start(format!(
                "sqlite: cannot create the directory of `database` {}: {errno:?}",
                config.database
            ));
            return;
        }
    }
    let process = Rc::new(vfs.new_process_with_pid(ctx.stack.alloc_pid(), ctx.uid, &ctx.name));
    let shared: Rc<SqliteShared> = ctx.stack.userspace(SHARED_NAME);
    let seed = ctx.sim.seed() ^ (ctx.index as u64 + 1).wrapping_mul(0x2545_f491_4f6c_dd1d);
    let timer = ctx.begin_op("open");
    let db = Database::open(
        &ctx.sim,
        vfs,
        process,
        shared,
        &config.database,
        config.options().resolve(),
        SqliteCpu::default(),
        seed,
    )
    .await;
    ctx.end_op(timer);
    let db = match db {
        Ok(db) => db,
        Err(error) => {
            count_error(&ctx, &error);
            fail(&ctx, &format!("opening {}", config.database), &error);
            return;
        }
    };
    {
        let ctx = ctx.clone();
        db.interrupt_when(move || ctx.is_stopped());
    }
    for (k, sql) in config.setup.iter().enumerate() {
        if let Err(error) = db.execute(sql).await {
            count_error(&ctx, &error);
            let what = format!("statement {} of `setup` (`{}`)", k + 1, cut(sql));
            fail(&ctx, &what, &error);
            return;
        }
    }
    let mut account = TransactionAccount { transactions: 0 };
    match (&config.benchmark, &config.log) {
        (Some(Benchmark::Speedtest), _) => speedtest_body(&ctx, &db, &config, &mut account).await,
        (Some(benchmark), _) => mobibench(&ctx, &db, &config, *benchmark, &mut account).await,
        (None, Some(log)) => replay(&ctx, &db, log, &mut account).await,
        (None, None) => statements(&ctx, &db, &config, &mut account).await,
    }
    let calls = db.calls();
    for (name, count) in calls.by_call {
        ctx.add_counter(&format!("sqlite.call.{name}"), count);
    }
    if let Err(error) = db.close().await {
        count_error(&ctx, &error);
        fail(&ctx, "closing the database", &error);
    }
}

fn value(size: usize, iteration: u64) -> String {
    // Printable and distinct per iteration, as an app's payload would be.
    let seed = format!("v{iteration}-");
    seed.chars().cycle().take(size).collect()
}

impl SqliteConfig {
    /// Iteration `iteration`'s `statements`, with `{i}` the iteration and `{value}` its payload
    /// of `value_size` bytes (the simulated app's and real mode's, `crate::real`).
    pub fn statements_of(&self, iteration: u64) -> Vec<String> {
        let payload = value(self.value_size, iteration);
        self.statements
            .iter()
            .map(|s| {
                s.replace("{i}", &iteration.to_string())
                    .replace("{value}", &payload)
            })
            .collect()
    }
}

async fn statements(
    ctx: &AppContext,
    db: &Database,
    config: &SqliteConfig,
    account: &mut TransactionAccount,
) {
    let mut iteration = 0u64;
    while !ctx.is_stopped() && config.count.is_none_or(|c| iteration < c) {
        if config.think > 0 && iteration > 0 {
            ctx.sim.sleep(config.think).await;
        }
        let body = config.statements_of(iteration);
        if config.transaction {
            let sql = format!("BEGIN;\n{};\nCOMMIT;", body.join(";\n"));
            if let Err(error) = measured(ctx, db, account, "transaction", &sql).await {
                let what = format!(
                    "iteration {iteration}'s transaction (`statements` in BEGIN .. COMMIT)"
                );
                fail(ctx, &what, &error);
                return;
            }
        } else {
            for (k, sql) in body.iter().enumerate() {
                let what = || {
                    format!(
                        "statement {} of `statements` (`{}`), iteration {iteration}",
                        k + 1,
                        cut(&config.statements[k])
                    )
                };
                match measured(ctx, db, account, "transaction", sql).await {
                    Ok(outcome) if outcome.statements == 0 => {
                        // Nothing to run costs no time: the loop would spin at one instant.
                        ctx.fail(format!(
                            "{} holds no SQL statement (it is empty or only comments)",
                            what()
                        ));
                        return;
                    }
                    Ok(_) => {}
                    Err(error) => {
                        fail(ctx, &what(), &error);
                        return;
                    }
                }
            }
        }
        iteration += 1;
    }
}

/// Rows inserted per call when Mobibench's update and delete phases fill the table before
/// the measurement: one transaction, sent in pieces so that a huge `count` does not build
/// one huge string.
const FILL_ROWS_PER_CALL: u64 = 1_000;

async fn mobibench(
    ctx: &AppContext,
    db: &Database,
    config: &SqliteConfig,
    benchmark: Benchmark,
    account: &mut TransactionAccount,
) {
    let n = config.count.unwrap_or(1000);
    let create = "CREATE TABLE IF NOT EXISTS tblMyList (id INTEGER PRIMARY KEY autoincrement, Value TEXT not null, creation_date long);";
    if let Err(error) = db.execute(create).await {
        count_error(ctx, &error);
        fail(ctx, "mobibench's CREATE TABLE", &error);
        return;
    }
    let insert = format!("INSERT INTO tblMyList(Value) VALUES('{MOBIBENCH_INSERT}');");
    let phases: &[&'static str] = match benchmark {
        Benchmark::Mobibench => &["insert", "update", "delete"],
        Benchmark::MobibenchInsert => &["insert"],
        Benchmark::MobibenchUpdate => &["update"],
        Benchmark::MobibenchDelete => &["delete"],
        Benchmark::Speedtest => unreachable!("the speedtest has its own body"),
    };
    if phases[0] != "insert" {
        // The rows to update or delete, inserted before the measurement in one transaction.
        let what = "mobibench's rows inserted before the measurement";
        let mut left = n;
        let mut piece = "BEGIN;".to_string();
        loop {
            let rows = left.min(FILL_ROWS_PER_CALL);
            left -= rows;
            piece.push_str(&vec![insert.as_str(); rows as usize].join("\n"));
            if left == 0 || ctx.is_stopped() {
                piece.push_str("\nCOMMIT;");
            }
            if let Err(error) = db.execute(&piece).await {
                count_error(ctx, &error);
                fail(ctx, what, &error);
                return;
            }
            if left == 0 || ctx.is_stopped() {
                break;
            }
            piece.clear();
        }
    }
    // Mobibench's update picks `rand() % n + 1` after `srand(i)`: a row per transaction, here
    // from a seeded stream.
    let mut random = crate::sim::rng::Rng::named(ctx.sim.seed(), "mobibench");
    for &phase in phases {
        for i in 0..n {
            if ctx.is_stopped() {
                return;
            }
            let sql = match phase {
                "insert" => insert.clone(),
                "update" => {
                    let id = random.below(n) + 1;
                    format!("UPDATE tblMyList SET Value = '{MOBIBENCH_UPDATE}' WHERE id = {id};")
                }
                _ => format!("DELETE FROM tblMyList WHERE id={};", i + 1),
            };
            if let Err(error) = measured(ctx, db, account, phase, &sql).await {
                fail(
                    ctx,
                    &format!("mobibench {phase} {} (`{}`)", i + 1, cut(&sql)),
                    &error,
                );
                return;
            }
        }
    }
}

async fn speedtest_body(
    ctx: &AppContext,
    db: &Database,
    config: &SqliteConfig,
    account: &mut TransactionAccount,
) {
    if speedtest::scaled_below_one(config.scale) {
        ctx.warn(format!(
            "sqlite: `scale` {} makes speed.html's smallest count (100 SELECTs) less than one; \
             every count is at least 1, so the tests are not in the page's proportions",
            config.scale
        ));
    }
    for test in speedtest::tests(config.scale, ctx.sim.seed()) {
        let timer = ctx.begin_op(test.name);
        for batch in &test.batches {
            if ctx.is_stopped() {
                ctx.end_op(timer);
                return;
            }
            if let Err(error) = measured(ctx, db, account, "statement", batch).await {
                ctx.end_op(timer);
                fail(
                    ctx,
                    &format!("speedtest {} ({})", test.name, test.title),
                    &error,
                );
                return;
            }
        }
        ctx.end_op(timer);
    }
}

/// Whether a replayed log goes on past a statement that failed with SQLite's primary result
/// code `code`: yes for errors that say the log's SQL does not fit the database being built
/// (a trace that starts after the schema was made, rows it refers to missing: `SQLITE_ERROR`,
/// `SQLITE_CONSTRAINT`, `SQLITE_MISMATCH`, `SQLITE_RANGE`, `SQLITE_TOOBIG`); no for errors of
/// the simulated system itself (I/O error, full file system, busy, corrupt, interrupted), which
/// stop the app as they would stop the app that wrote the log.
pub fn replay_skips(code: i32) -> bool {
    matches!(
        code,
        ffi::SQLITE_ERROR
            | ffi::SQLITE_CONSTRAINT
            | ffi::SQLITE_MISMATCH
            | ffi::SQLITE_RANGE
            | ffi::SQLITE_TOOBIG
    )
}

/// Failed statements of a replayed log shown one by one in the warnings (the rest are counted).
const SKIPPED_SHOWN: usize = 3;

async fn replay(ctx: &AppContext, db: &Database, log: &str, account: &mut TransactionAccount) {
    let lines = match read_log(log) {
        Ok(lines) => lines,
        Err(error) => {
            ctx.add_counter("errno.ENOENT", 1);
            ctx.fail_to_start(error);
            return;
        }
    };
    let mut skipped = 0usize;
    for line in &lines {
        if ctx.is_stopped() {
            break;
        }
        let Err(error) = measured(ctx, db, account, "statement", &line.sql).await else {
            continue;
        };
        let what = format!("`log` {log} line {} (`{}`)", line.number, cut(&line.sql));
        if !replay_skips(error.code) {
            fail(ctx, &what, &error);
            break;
        }
        skipped += 1;
        if skipped <= SKIPPED_SHOWN {
            ctx.warn(format!(
                "sqlite: skipped {}",
                failure_message(&what, &error)
            ));
        }
    }
    if skipped > 0 {
        ctx.warn(format!(
            "sqlite: {skipped} of the {} statements of `log` {log} failed and were skipped (a \
             replayed log goes on where its SQL does not fit the database, e.g. a trace that \
             lacks the schema; an I/O error, a full disk or a busy database stops the app)",
            lines.len()
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<SqliteConfig, String> {
        toml::from_str::<SqliteConfig>(text).map_err(|e| e.to_string())
    }

    #[test]
    fn one_source_of_sql_and_an_absolute_database() {
        let ok = parse("database = \"/d/a.db\"\nbenchmark = \"mobibench\"").unwrap();
        assert!(ok.validate().is_ok());
        let none = parse("database = \"/d/a.db\"").unwrap();
        assert!(none.validate().unwrap_err().contains("exactly one"));
        let two =
            parse("database = \"/d/a.db\"\nbenchmark = \"speedtest\"\nstatements = [\"SELECT 1\"]")
                .unwrap();
        assert!(two.validate().unwrap_err().contains("exactly one"));
        let relative = parse("database = \"a.db\"\nstatements = [\"SELECT 1\"]").unwrap();
        assert!(relative.validate().unwrap_err().contains("absolute"));
        let missing = parse("database = \"/d/a.db\"\nlog = \"/nonexistent/x.sql\"").unwrap();
        assert!(missing.validate().unwrap_err().contains("cannot read"));
        assert!(parse("database = \"/d/a.db\"\nbenchmark = \"tpcc\"").is_err());
    }

    #[test]
    fn mobibench_values_are_a_hundred_characters() {
        assert_eq!(MOBIBENCH_INSERT.len(), 100);
        assert_eq!(MOBIBENCH_UPDATE.len(), 100);
        assert_eq!(value(100, 7).len(), 100);
    }
}
