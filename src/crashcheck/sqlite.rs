//! SQLite's own verdict on a crash state: the recovered database (and its rollback journal or
//! WAL, when they survived) written to a scratch directory and opened by the real SQLite
//! (rusqlite's bundled build, its default `unix` VFS, not mobistack's simulated one), which
//! rolls a hot journal back or replays the WAL as it would on the phone after a reboot; then
//! `PRAGMA integrity_check`.

use super::recover::{PageState, Recovered, RecoveredFile};
use crate::mm::crashlog::{CrashRecord, PAGE};
use crate::mm::Ino;
use std::path::{Path, PathBuf};

/// A database under test and its companion files.
#[derive(Debug, Clone)]
pub struct Database {
    pub path: String,
    pub db: Ino,
    pub journal: Option<Ino>,
    pub wal: Option<Ino>,
}

/// The databases among the files under test: every file not named `-journal`, `-wal` or
/// `-shm` whose first recorded bytes begin with SQLite's header (or that never got any).
pub fn databases(record: &CrashRecord) -> Vec<Database> {
    let by_path = |path: String| {
        record
            .files
            .iter()
            .find(|(_, f)| f.path == path)
            .map(|(&ino, _)| ino)
    };
    record
        .files
        .iter()
        .filter(|(_, f)| {
            !(f.path.ends_with("-journal") || f.path.ends_with("-wal") || f.path.ends_with("-shm"))
        })
        .filter(|(&ino, _)| {
            let first = record
                .versions
                .iter()
                .find(|v| v.ino == ino && v.index == 0)
                .and_then(|v| v.bytes.clone());
            first.is_none_or(|b| b.starts_with(b"SQLite format 3\0"))
        })
        .map(|(&ino, f)| Database {
            path: f.path.clone(),
            db: ino,
            journal: by_path(format!("{}-journal", f.path)),
            wal: by_path(format!("{}-wal", f.path)),
        })
        .collect()
}

/// The bytes of a recovered file: each page's version, zeros, or a pattern for foreign data.
pub fn file_bytes(record: &CrashRecord, file: &RecoveredFile) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(file.pages.len() * PAGE);
    for (index, page) in file.pages.iter().enumerate() {
        match page {
            PageState::Version(v) => {
                let version = &record.versions[*v as usize - 1];
                let bytes = version.bytes.as_ref().ok_or_else(|| {
                    format!(
                        "version {v} of page {index} of inode {} has no bytes",
                        file.ino
                    )
                })?;
                out.extend_from_slice(bytes);
            }
            PageState::Zero => out.resize(out.len() + PAGE, 0),
            // Another file's data or metadata: not SQLite's.
            PageState::Foreign => out.resize(out.len() + PAGE, 0xA5),
        }
    }
    out.truncate(file.size as usize);
    Ok(out)
}

/// SQLite's verdict: `Ok(None)` when `PRAGMA integrity_check` says `ok` (or the database is
/// absent), `Ok(Some(report))` otherwise; `Err` when the check itself could not run.
pub fn check(
    record: &CrashRecord,
    db: &Database,
    state: &Recovered,
    scratch: &Path,
) -> Result<Option<String>, String> {
    let Some(file) = state.files.get(&db.db) else {
        return Ok(None);
    };
    let path = scratch.join("test.db");
    let companions = [
        (db.journal, scratch.join("test.db-journal")),
        (db.wal, scratch.join("test.db-wal")),
    ];
    let write = |p: &PathBuf, bytes: &[u8]| {
        std::fs::write(p, bytes).map_err(|e| format!("{}: {e}", p.display()))
    };
    for (_, p) in &companions {
        let _ = std::fs::remove_file(p);
    }
    let _ = std::fs::remove_file(scratch.join("test.db-shm"));
    write(&path, &file_bytes(record, file)?)?;
    for (ino, p) in &companions {
        if let Some(f) = ino.and_then(|ino| state.files.get(&ino)) {
            write(p, &file_bytes(record, f)?)?;
        }
    }
    let verdict = (|| -> rusqlite::Result<Vec<String>> {
        let conn = rusqlite::Connection::open_with_flags_and_vfs(
            &path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE,
            c"unix",
        )?;
        let mut stmt = conn.prepare("PRAGMA integrity_check")?;
        let rows = stmt.query_map([], |row| row.get::<_, String>(0))?;
        rows.collect()
    })();
    Ok(match verdict {
        Ok(rows) if rows == ["ok"] => None,
        Ok(rows) => Some(rows.join("; ")),
        Err(e) => Some(format!("SQLite refused the file: {e}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mm::crashlog::{CrashLog, TrackedFile};

    #[test]
    fn a_real_database_passes_and_a_torn_one_fails() {
        let scratch =
            std::env::temp_dir().join(format!("mobistack-sqlite-test-{}", std::process::id()));
        std::fs::create_dir_all(&scratch).unwrap();
        // A real database, page size 4096, two pages.
        let source = scratch.join("source.db");
        let _ = std::fs::remove_file(&source);
        {
            let conn = rusqlite::Connection::open(&source).unwrap();
            conn.execute_batch(
                "PRAGMA page_size=4096; CREATE TABLE t(x); INSERT INTO t VALUES(randomblob(3000));",
            )
            .unwrap();
        }
        let bytes = std::fs::read(&source).unwrap();
        assert_eq!(bytes.len() % PAGE, 0);
        let log = CrashLog::new(1 << 20);
        log.track(
            0,
            7,
            TrackedFile {
                path: "/test.db".into(),
                app: "a".into(),
                dir: 2,
                name: "test.db".into(),
                mobifs: false,
            },
        );
        let pages = bytes.len() / PAGE;
        for i in 0..pages {
            log.page_written(1, 7, i as u64);
            log.attach_bytes(7, i as u64, &bytes[i * PAGE..(i + 1) * PAGE]);
        }
        let record = log.record();
        let dbs = databases(&record);
        assert_eq!(dbs.len(), 1);
        let state = |pages: Vec<PageState>| Recovered {
            replayed: Some(1),
            bad_replays: Vec::new(),
            names: Default::default(),
            exposed: Vec::new(),
            files: [(
                7,
                RecoveredFile {
                    ino: 7,
                    size: bytes.len() as u64,
                    pages,
                },
            )]
            .into_iter()
            .collect(),
        };
        let whole: Vec<PageState> = (1..=pages as u64).map(PageState::Version).collect();
        assert_eq!(check(&record, &dbs[0], &state(whole), &scratch), Ok(None));
        let mut torn: Vec<PageState> = (1..=pages as u64).map(PageState::Version).collect();
        *torn.last_mut().unwrap() = PageState::Foreign;
        let verdict = check(&record, &dbs[0], &state(torn), &scratch).unwrap();
        assert!(verdict.is_some(), "a foreign page is corruption");
        std::fs::remove_dir_all(&scratch).unwrap();
    }
}
