//! SQLite's side of a connection: the coroutine that owns the `rusqlite::Connection` and runs
//! the commands of its task ([`super::link`]).

use super::link::{self, Call, Command, Input, Outcome, Reply, SqlError, SqliteCoroutine};
use crate::sim::rng::Rng;
use rusqlite::fallible_iterator::FallibleIterator;
use rusqlite::functions::FunctionFlags;
use rusqlite::types::ValueRef;
use rusqlite::{ffi, Connection, OpenFlags, StatementStatus};
use std::ffi::{c_int, c_void};

/// Starts SQLite's coroutine for one connection (not yet running: the task's first resume, with
/// [`Command::Open`], starts it); `seed` seeds its `xRandomness` stream and its `random()`.
pub fn start(seed: u64) -> std::io::Result<SqliteCoroutine> {
    link::start(Rng::named(seed, "sqlite-vfs"), move |first| {
        let first = match first {
            Input::Command(command) => Some(command),
            Input::Reply(_) | Input::Abort => None,
        };
        serve(first, seed);
    })
}

/// Runs commands from `first` on until the task is gone.
fn serve(first: Option<Command>, seed: u64) {
    let mut connection: Option<Connection> = None;
    let mut next = first;
    while let Some(command) = next {
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
                None => Err(SqlError::bridge("no database is open")),
            },
            Command::Close => match connection.take() {
                Some(conn) => conn
                    .close()
                    .map(|()| Outcome::default())
                    .map_err(|(_, e)| failure(&e, 0, "")),
                None => Ok(Outcome::default()),
            },
        };
        next = link::done(result);
    }
    // The task is gone: SQLite closes the connection itself (`sqlite3_close`), its last calls
    // failing with EIO.
    drop(connection);
}

fn open(path: &str, setup: &str, seed: u64) -> Result<(Connection, Outcome), SqlError> {
    super::vfs::register().map_err(SqlError::bridge)?;
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags_and_vfs(path, flags, super::vfs::VFS_NAME)
        .map_err(|e| failure(&e, 0, path))?;
    // SAFETY: the handle is this coroutine's open connection; the handler is a plain function
    // without user data, and the limit a documented `sqlite3_limit` category.
    unsafe {
        ffi::sqlite3_progress_handler(
            conn.handle(),
            PROGRESS_STEPS,
            Some(progress),
            std::ptr::null_mut(),
        );
        ffi::sqlite3_limit(conn.handle(), ffi::SQLITE_LIMIT_LENGTH, MAX_LENGTH_BYTES);
    }
    deterministic_functions(&conn, seed).map_err(|e| failure(&e, 0, ""))?;
    let outcome = execute(&conn, setup)?;
    Ok((conn, outcome))
}

/// Virtual-machine steps between two calls of the progress handler. SQLite's computation is
/// charged on a core in slices of this many steps (60 us each at [`super::SqliteCpu`]'s 60 ns
/// a step), so that virtual time advances while SQLite computes and a statement that never
/// ends still reaches the run's end: the slice is as fine as the CPU model's other segments
/// (`docs/cpu.md`: microseconds to tens of microseconds) while the hand-off it costs (two
/// coroutine switches and the task's charge, about a microsecond of wall time) stays small
/// beside the 1,000 steps' own ~20 us.
pub const PROGRESS_STEPS: c_int = 1_000;

/// Longest string or blob (and table row) a statement may build (`SQLITE_LIMIT_LENGTH`,
/// lowered from SQLite's 1,000,000,000): the simulator keeps every byte a database holds in the
/// host's memory (the page cache stores SQLite's file contents, `O_STORE_CONTENTS`), so one
/// statement may not ask for gigabytes. 16 MiB is 8 times Android's `CursorWindow` (2 MiB,
/// `config_cursorWindowSize`), the largest row an Android app can read back through a `Cursor`.
pub const MAX_LENGTH_BYTES: c_int = 16 << 20;

/// SQLite's progress handler: the steps computed since the last call are charged on a core by
/// the task; a non-zero return interrupts the statement (the app was stopped, or the task is
/// gone because the run ended).
unsafe extern "C" fn progress(_arg: *mut c_void) -> c_int {
    link::guard(1, || {
        match link::call(Call::Compute {
            steps: PROGRESS_STEPS as u64,
        }) {
            Reply::Flag(false) => 0,
            _ => 1,
        }
    })
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
        let n = randomblob_size(ctx.get_raw(0))?;
        let mut blob = Vec::with_capacity(n + 8);
        while blob.len() < n {
            blob.extend_from_slice(&next().to_le_bytes());
        }
        blob.truncate(n);
        Ok(blob)
    })
}

/// The size `randomblob(N)` makes: N as `sqlite3_value_int64` reads it, at least 1 (func.c's
/// `randomBlob`: "if( n<1 ) n = 1"); over [`MAX_LENGTH_BYTES`] an error, as SQLite's own
/// function fails with `SQLITE_TOOBIG` over its length limit.
fn randomblob_size(value: ValueRef<'_>) -> rusqlite::Result<usize> {
    let n = match value {
        ValueRef::Integer(n) => n,
        ValueRef::Real(x) => x as i64,
        ValueRef::Text(text) => leading_integer(text),
        ValueRef::Null | ValueRef::Blob(_) => 0,
    };
    if n > i64::from(MAX_LENGTH_BYTES) {
        return Err(rusqlite::Error::UserFunctionError(
            format!(
                "randomblob({n}): larger than the simulator's limit on a string or blob, {} MiB \
                 (SQLITE_LIMIT_LENGTH, lowered from SQLite's 1,000,000,000 bytes because the \
                 simulated page cache keeps every byte of a database in the host's memory)",
                MAX_LENGTH_BYTES >> 20
            )
            .into(),
        ));
    }
    Ok(n.max(1) as usize)
}

/// The integer at the start of `text`, as SQLite converts text to an integer (0 if none).
fn leading_integer(text: &[u8]) -> i64 {
    let text = String::from_utf8_lossy(text);
    let text = text.trim_start();
    let end = text
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || (i == 0 && (c == '-' || c == '+'))))
        .map_or(text.len(), |(i, _)| i);
    text[..end].parse().unwrap_or(0)
}

/// Runs every statement of `sql`.
fn execute(conn: &Connection, sql: &str) -> Result<Outcome, SqlError> {
    let mut outcome = Outcome::default();
    let mut batch = rusqlite::Batch::new(conn, sql);
    // Where the statements run so far end in `sql`: a statement SQLite cannot prepare starts
    // after them (for the error's text).
    let mut done_up_to = Some(0);
    loop {
        let position = outcome.statements + 1;
        let rest = || done_up_to.map_or("", |at| sql[at..].trim_start());
        let mut statement = match batch.next() {
            Ok(Some(statement)) => statement,
            Ok(None) => return Ok(outcome),
            Err(error) => return Err(failure(&error, position, rest())),
        };
        outcome.statements += 1;
        let text = statement.expanded_sql().unwrap_or_default();
        done_up_to = done_up_to
            .and_then(|at| sql[at..].find(&text).map(|i| at + i + text.len()))
            .filter(|_| !text.is_empty());
        if statement.column_count() > 0 {
            let mut rows = statement.raw_query();
            loop {
                match rows.next() {
                    Ok(Some(_)) => outcome.rows += 1,
                    Ok(None) => break,
                    Err(error) => return Err(failure(&error, position, &text)),
                }
            }
        } else {
            outcome.changes += statement
                .raw_execute()
                .map_err(|error| failure(&error, position, &text))?
                as u64;
        }
        outcome.vm_steps += statement.get_status(StatementStatus::VmStep).max(0) as u64;
    }
}

/// SQLite's error as the task sees it: the primary result code, the message, which statement.
fn failure(error: &rusqlite::Error, statement: u64, sql: &str) -> SqlError {
    let (code, message, sql) = match error {
        rusqlite::Error::SqliteFailure(e, message) => (
            e.extended_code & 0xff,
            message.clone().unwrap_or_else(|| e.to_string()),
            sql.to_string(),
        ),
        // A statement SQLite could not prepare, at a token: its message without rusqlite's
        // copy of the SQL.
        rusqlite::Error::SqlInputError { error, msg, .. } => {
            (error.extended_code & 0xff, msg.clone(), sql.to_string())
        }
        other => (ffi::SQLITE_ERROR, other.to_string(), sql.to_string()),
    };
    SqlError {
        code,
        message,
        statement,
        sql,
    }
}
