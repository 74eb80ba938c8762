//! SQLite's side of a connection: the OS thread that owns the `rusqlite::Connection` and runs
//! the commands of its task ([`super::link`]).

use super::link::{self, Command, Event, Input, Link, Outcome};
use rusqlite::fallible_iterator::FallibleIterator;
use rusqlite::functions::FunctionFlags;
use rusqlite::{Connection, OpenFlags, StatementStatus};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;

/// Starts SQLite's thread for one connection; `seed` seeds its `xRandomness` stream and its
/// `random()`.
pub fn spawn(seed: u64) -> std::io::Result<(Sender<Input>, Receiver<Event>, JoinHandle<()>)> {
    let (inputs_tx, inputs_rx) = channel();
    let (events_tx, events_rx) = channel();
    let handle = std::thread::Builder::new()
        .name("sqlite".into())
        .spawn(move || {
            link::install(Link {
                events: events_tx,
                inputs: inputs_rx,
                random: seed,
            });
            serve(seed);
        })?;
    Ok((inputs_tx, events_rx, handle))
}

fn serve(seed: u64) {
    let mut connection: Option<Connection> = None;
    while let Some(command) = link::next_command() {
        let result = match command {
            Command::Open { path, setup } => match open(&path, &setup, seed) {
                Ok((conn, outcome)) => {
                    connection = Some(conn);
                    Ok(outcome)
                }
                Err(error) => Err(error),
            },
            Command::Execute { sql } => match &connection {
                Some(conn) => execute(conn, &sql),
                None => Err("no database is open".into()),
            },
            Command::Close => match connection.take() {
                Some(conn) => conn
                    .close()
                    .map(|()| Outcome::default())
                    .map_err(|(_, e)| e.to_string()),
                None => Ok(Outcome::default()),
            },
        };
        link::done(result);
    }
    // The task is gone: the connection's last calls fail with EIO as it is dropped.
    drop(connection);
}

fn open(path: &str, setup: &str, seed: u64) -> Result<(Connection, Outcome), String> {
    super::vfs::register()?;
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags_and_vfs(path, flags, super::vfs::VFS_NAME)
        .map_err(|e| format!("open {path}: {e}"))?;
    deterministic_functions(&conn, seed).map_err(|e| e.to_string())?;
    let outcome = execute(&conn, setup)?;
    Ok((conn, outcome))
}

/// `random()` and `randomblob(N)` from a stream of the connection's own, so that SQL using them
/// gives the same rows for the same seed (SQLite's own PRNG is shared by the process).
fn deterministic_functions(conn: &Connection, seed: u64) -> rusqlite::Result<()> {
    let state = std::sync::Mutex::new(seed ^ 0x5151_7e57_0000_0001);
    let next = move || {
        let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
        *s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *s;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let next = std::sync::Arc::new(next);
    let for_random = next.clone();
    conn.create_scalar_function("random", 0, FunctionFlags::SQLITE_UTF8, move |_| {
        Ok(for_random() as i64)
    })?;
    conn.create_scalar_function("randomblob", 1, FunctionFlags::SQLITE_UTF8, move |ctx| {
        let n = ctx.get::<i64>(0)?.clamp(1, 1 << 20) as usize;
        let mut blob = Vec::with_capacity(n + 8);
        while blob.len() < n {
            blob.extend_from_slice(&next().to_le_bytes());
        }
        blob.truncate(n);
        Ok(blob)
    })
}

/// Runs every statement of `sql`.
fn execute(conn: &Connection, sql: &str) -> Result<Outcome, String> {
    let mut outcome = Outcome::default();
    let mut batch = rusqlite::Batch::new(conn, sql);
    while let Some(mut statement) = batch.next().map_err(|e| e.to_string())? {
        outcome.statements += 1;
        if statement.column_count() > 0 {
            let mut rows = statement.raw_query();
            while rows.next().map_err(|e| e.to_string())?.is_some() {
                outcome.rows += 1;
            }
        } else {
            outcome.changes += statement.raw_execute().map_err(|e| e.to_string())? as u64;
        }
        outcome.vm_steps += statement.get_status(StatementStatus::VmStep).max(0) as u64;
    }
    Ok(outcome)
}
