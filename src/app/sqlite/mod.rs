//! Real SQLite in a simulated app (issue 16): the library, unmodified and built from its bundled
//! amalgamation, with a VFS whose every file operation is a simulated system call of the app's
//! process.
//!
//! - [`link`]: the hand-off between SQLite's coroutine and the simulated task, on one thread.
//! - [`coroutine`]: SQLite's side (the `rusqlite::Connection`), on a stack of its own.
//! - [`vfs`]: the `"mobistack"` VFS, method by method the unix VFS's system calls.
//! - [`connection`]: [`Database`], the task's handle, serving the VFS's calls in virtual time.
//! - [`locks`]: SQLite's file and shm locks between connections.
//! - [`options`]: pragmas, the fsync/fdatasync build option, presets (SQLite's, Android's).
//!
//! Determinism: SQLite runs only while its task waits for it, its randomness and clock come
//! from the run, and `random()` / `randomblob()` are the connection's own seeded stream; the same
//! scenario and seed give the same system calls in the same order.

pub mod connection;
pub mod coroutine;
pub mod link;
pub mod locks;
pub mod options;
pub mod vfs;

pub use connection::{Database, SqliteCpu, SqliteShared, SHARED_NAME};
pub use link::SqlError;
pub use options::{JournalMode, Preset, ResolvedOptions, SqliteOptions, SyncCall, Synchronous};

#[cfg(test)]
mod tests;
