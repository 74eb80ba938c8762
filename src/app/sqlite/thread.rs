//! SQLite's side of a connection: the OS thread that owns the `rusqlite::Connection` and runs
//! the commands of its task ([`super::link`]).

use super::link::{self, Command, Event, Input, Link, Outcome};
use crate::sim::rng::Rng;
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
                random: Rng::named(seed, "sqlite-vfs"),
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
    let rng = std::sync::Mutex::new(Rng::named(seed, "sqlite-random"));
    let next = move || rng.lock().unwrap_or_else(|e| e.into_inner()).next_u64();
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
