//! SQLite's file locks between connections, as the unix VFS implements them over POSIX advisory
//! locks (`unixLock`, `unixUnlock`, `unixCheckReservedLock` and `unixShmLock` in os_unix.c).
//!
//! The unix VFS keeps one `unixInodeInfo` per database file and process: the highest lock any
//! connection holds (`eFileLock`) and how many hold SHARED (`nShared`); the byte-range locks on
//! the pending, reserved and shared bytes make other processes see the same. This table is that
//! state for every connection of a run, whichever app (process) opened it: a conflict is
//! `SQLITE_BUSY` at once, and SQLite's busy handler sleeps (in virtual time) and retries.
//!
//! Simplifications: no lock is ever waited for inside the call (SQLite's unix VFS never uses
//! `F_SETLKW` either); the PENDING byte's effect is kept (a writer holding PENDING stops new
//! SHARED locks) without the separate byte ranges.

use std::collections::{BTreeMap, BTreeSet};

/// SQLite's lock levels (`SQLITE_LOCK_NONE` .. `SQLITE_LOCK_EXCLUSIVE`).
pub const NONE: i32 = 0;
pub const SHARED: i32 = 1;
pub const RESERVED: i32 = 2;
pub const PENDING: i32 = 3;
pub const EXCLUSIVE: i32 = 4;

/// A connection, as the lock table names it.
pub type ConnId = u64;

/// The lock state of one database file.
#[derive(Debug, Default)]
struct FileLock {
    shared: BTreeSet<ConnId>,
    reserved: Option<ConnId>,
    pending: Option<ConnId>,
    exclusive: Option<ConnId>,
}

impl FileLock {
    fn level_of(&self, conn: ConnId) -> i32 {
        if self.exclusive == Some(conn) {
            EXCLUSIVE
        } else if self.pending == Some(conn) {
            PENDING
        } else if self.reserved == Some(conn) {
            RESERVED
        } else if self.shared.contains(&conn) {
            SHARED
        } else {
            NONE
        }
    }

    fn held_by_other(slot: Option<ConnId>, conn: ConnId) -> bool {
        slot.is_some_and(|holder| holder != conn)
    }
}

/// What one shm slot (`WAL_WRITE_LOCK`, `WAL_CKPT_LOCK`, `WAL_RECOVER_LOCK`, the read marks)
/// is held by.
#[derive(Debug, Default, Clone)]
struct ShmSlot {
    shared: BTreeSet<ConnId>,
    exclusive: Option<ConnId>,
}

/// `SQLITE_SHM_NLOCK`: the shm lock slots.
pub const SHM_NLOCK: usize = 8;

/// The lock table of a run: database files by path, shm lock slots by database path.
#[derive(Debug, Default)]
pub struct LockTable {
    files: BTreeMap<String, FileLock>,
    shm: BTreeMap<String, Vec<ShmSlot>>,
}

/// The outcome of a lock request: granted, or `SQLITE_BUSY`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockResult {
    Ok,
    Busy,
}

impl LockTable {
    /// `xLock(level)` of `conn` on `path` (`unixLock`): SHARED, RESERVED or EXCLUSIVE (SQLite
    /// never asks for PENDING; EXCLUSIVE takes PENDING first and keeps it when readers remain).
    pub fn lock(&mut self, path: &str, conn: ConnId, level: i32) -> LockResult {
        let file = self.files.entry(path.to_string()).or_default();
        let current = file.level_of(conn);
        if current >= level {
            return LockResult::Ok;
        }
        match level {
            SHARED => {
                if FileLock::held_by_other(file.pending, conn)
                    || FileLock::held_by_other(file.exclusive, conn)
                {
                    return LockResult::Busy;
                }
                file.shared.insert(conn);
                LockResult::Ok
            }
            RESERVED => {
                debug_assert_eq!(current, SHARED, "RESERVED is taken from SHARED");
                if file.reserved.is_some()
                    || FileLock::held_by_other(file.pending, conn)
                    || FileLock::held_by_other(file.exclusive, conn)
                {
                    return LockResult::Busy;
                }
                file.reserved = Some(conn);
                LockResult::Ok
            }
            _ => {
                // PENDING, then EXCLUSIVE once no other connection reads.
                if FileLock::held_by_other(file.pending, conn)
                    || FileLock::held_by_other(file.exclusive, conn)
                    || FileLock::held_by_other(file.reserved, conn)
                {
                    return LockResult::Busy;
                }
                file.pending = Some(conn);
                if file.shared.iter().any(|&c| c != conn) {
                    return LockResult::Busy;
                }
                if level == EXCLUSIVE {
                    file.exclusive = Some(conn);
                }
                LockResult::Ok
            }
        }
    }

    /// `xUnlock(level)` (`posixUnlock`): down to SHARED or NONE.
    pub fn unlock(&mut self, path: &str, conn: ConnId, level: i32) {
        let Some(file) = self.files.get_mut(path) else {
            return;
        };
        for slot in [&mut file.reserved, &mut file.pending, &mut file.exclusive] {
            if *slot == Some(conn) {
                *slot = None;
            }
        }
        if level == NONE {
            file.shared.remove(&conn);
        }
        if file.shared.is_empty()
            && file.reserved.is_none()
            && file.pending.is_none()
            && file.exclusive.is_none()
        {
            self.files.remove(path);
        }
    }

    /// `xCheckReservedLock` (`unixCheckReservedLock`): whether any connection holds RESERVED or
    /// more on `path`.
    pub fn reserved(&self, path: &str) -> bool {
        self.files.get(path).is_some_and(|file| {
            file.reserved.is_some() || file.pending.is_some() || file.exclusive.is_some()
        })
    }

    /// The level `conn` holds on `path`.
    pub fn level(&self, path: &str, conn: ConnId) -> i32 {
        self.files
            .get(path)
            .map_or(NONE, |file| file.level_of(conn))
    }

    /// `xShmLock(offset, n, flags)` (`unixShmLock`): `lock` or unlock, `exclusive` or shared,
    /// slots `offset..offset + n`.
    pub fn shm_lock(
        &mut self,
        path: &str,
        conn: ConnId,
        offset: usize,
        n: usize,
        lock: bool,
        exclusive: bool,
    ) -> LockResult {
        if offset + n > SHM_NLOCK || n == 0 {
            return LockResult::Busy;
        }
        let slots = self
            .shm
            .entry(path.to_string())
            .or_insert_with(|| vec![ShmSlot::default(); SHM_NLOCK]);
        let range = offset..offset + n;
        if !lock {
            for slot in &mut slots[range] {
                slot.shared.remove(&conn);
                if slot.exclusive == Some(conn) {
                    slot.exclusive = None;
                }
            }
            return LockResult::Ok;
        }
        let conflict = slots[range.clone()].iter().any(|slot| {
            FileLock::held_by_other(slot.exclusive, conn)
                || (exclusive && slot.shared.iter().any(|&c| c != conn))
        });
        if conflict {
            return LockResult::Busy;
        }
        for slot in &mut slots[range] {
            if exclusive {
                slot.exclusive = Some(conn);
            } else {
                slot.shared.insert(conn);
            }
        }
        LockResult::Ok
    }

    /// Drops every shm lock of `conn` on `path` (`xShmUnmap`).
    pub fn shm_release(&mut self, path: &str, conn: ConnId) {
        if let Some(slots) = self.shm.get_mut(path) {
            for slot in slots.iter_mut() {
                slot.shared.remove(&conn);
                if slot.exclusive == Some(conn) {
                    slot.exclusive = None;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DB: &str = "/data/db";

    #[test]
    fn readers_share_and_a_writer_reserves_then_waits_for_readers() {
        let mut table = LockTable::default();
        assert_eq!(table.lock(DB, 1, SHARED), LockResult::Ok);
        assert_eq!(table.lock(DB, 2, SHARED), LockResult::Ok);
        assert!(!table.reserved(DB));
        assert_eq!(table.lock(DB, 1, RESERVED), LockResult::Ok);
        assert!(table.reserved(DB));
        // One RESERVED at a time.
        assert_eq!(table.lock(DB, 2, RESERVED), LockResult::Busy);
        // EXCLUSIVE waits for reader 2 but keeps PENDING, which stops new readers.
        assert_eq!(table.lock(DB, 1, EXCLUSIVE), LockResult::Busy);
        assert_eq!(table.level(DB, 1), PENDING);
        assert_eq!(table.lock(DB, 3, SHARED), LockResult::Busy);
        table.unlock(DB, 2, NONE);
        assert_eq!(table.lock(DB, 1, EXCLUSIVE), LockResult::Ok);
        assert_eq!(table.level(DB, 1), EXCLUSIVE);
        assert_eq!(table.lock(DB, 3, SHARED), LockResult::Busy);
        table.unlock(DB, 1, SHARED);
        assert_eq!(table.level(DB, 1), SHARED);
        assert!(!table.reserved(DB));
        assert_eq!(table.lock(DB, 3, SHARED), LockResult::Ok);
        table.unlock(DB, 1, NONE);
        table.unlock(DB, 3, NONE);
        assert!(table.files.is_empty(), "an unlocked file leaves no state");
    }

    #[test]
    fn shm_slots_exclude_writers_and_share_readers() {
        let mut table = LockTable::default();
        assert_eq!(table.shm_lock(DB, 1, 0, 1, true, true), LockResult::Ok);
        assert_eq!(table.shm_lock(DB, 2, 0, 1, true, true), LockResult::Busy);
        assert_eq!(table.shm_lock(DB, 2, 3, 1, true, false), LockResult::Ok);
        assert_eq!(table.shm_lock(DB, 1, 3, 1, true, false), LockResult::Ok);
        assert_eq!(table.shm_lock(DB, 1, 2, 2, true, true), LockResult::Busy);
        assert_eq!(table.shm_lock(DB, 2, 3, 1, false, false), LockResult::Ok);
        assert_eq!(table.shm_lock(DB, 1, 2, 2, true, true), LockResult::Ok);
        table.shm_release(DB, 1);
        assert_eq!(table.shm_lock(DB, 2, 0, 8, true, true), LockResult::Ok);
        assert_eq!(table.shm_lock(DB, 2, 7, 2, true, true), LockResult::Busy);
    }
}
