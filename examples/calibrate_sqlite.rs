//! Calibrates [`mobistack::app::sqlite::SqliteCpu`]: the bundled SQLite's CPU time per prepared
//! statement and per virtual-machine step on this machine, in memory (no I/O), with Mobibench's
//! INSERT and a trivial `SELECT 1`. `cargo run --release --example calibrate_sqlite`.
//!
//! The simulator's defaults are this machine's figures taken three times slower for a 2014
//! phone core, as `[stack.cpu]` does (docs/cpu.md).

use rusqlite::{Connection, StatementStatus};
use std::time::Instant;

/// (ns per statement, VM steps per statement) of `sql` run `n` times, prepared each time as
/// `sqlite3_exec` does.
fn measure(conn: &Connection, sql: &str, n: u32) -> (f64, f64) {
    let mut steps = 0u64;
    let start = Instant::now();
    for _ in 0..n {
        let mut statement = conn.prepare(sql).expect("prepares");
        if statement.column_count() > 0 {
            let mut rows = statement.raw_query();
            while rows.next().expect("steps").is_some() {}
        } else {
            statement.raw_execute().expect("runs");
        }
        steps += statement.get_status(StatementStatus::VmStep) as u64;
    }
    let ns = start.elapsed().as_nanos() as f64 / f64::from(n);
    (ns, steps as f64 / f64::from(n))
}

fn main() {
    let conn = Connection::open_in_memory().expect("opens");
    conn.execute_batch(
        "PRAGMA journal_mode = MEMORY;
         CREATE TABLE tblMyList (id INTEGER PRIMARY KEY autoincrement, Value TEXT not null, creation_date long);",
    )
    .expect("creates");
    let insert = "INSERT INTO tblMyList(Value) VALUES('aaaaaaaaaabbbbbbbbbbccccccccccddddddddddeeeeeeeeeeffffffffffgggggggggghhhhhhhhhhiiiiiiiiiijjjjjjjjjj');";
    let n = 200_000;
    // Warm up.
    measure(&conn, "SELECT 1", 10_000);
    measure(&conn, insert, 10_000);
    let (select_ns, select_steps) = measure(&conn, "SELECT 1", n);
    let (insert_ns, insert_steps) = measure(&conn, insert, n);
    let (scan_ns, scan_steps) = measure(
        &conn,
        "SELECT count(*) FROM tblMyList WHERE Value LIKE '%jj%'",
        20,
    );
    // Two unknowns, per statement (a) and per step (b): ns = a + b * steps, from the insert and
    // the scan (the scan is almost all steps).
    let per_step = (scan_ns - insert_ns) / (scan_steps - insert_steps);
    let per_statement = insert_ns - per_step * insert_steps;
    println!("SELECT 1: {select_ns:.0} ns, {select_steps:.0} VM steps");
    println!("INSERT:   {insert_ns:.0} ns, {insert_steps:.0} VM steps");
    println!("scan:     {scan_ns:.0} ns, {scan_steps:.0} VM steps");
    println!("per VM step: {per_step:.1} ns; per statement: {per_statement:.0} ns");
    println!(
        "x3 for a 2014 phone core: vm_step = {:.0} ns, statement = {:.1} us",
        per_step * 3.0,
        per_statement * 3.0 / 1000.0
    );
}
