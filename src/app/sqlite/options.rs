//! How a database is opened: SQLite's pragmas, the build option that picks `fsync` or
//! `fdatasync`, and presets for SQLite's own defaults and Android's.

use crate::units::{serde_units, Nanos, NS_PER_MS};
use serde::{Deserialize, Serialize};

/// `PRAGMA journal_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum JournalMode {
    Delete,
    Truncate,
    Persist,
    Wal,
    Memory,
    Off,
}

impl JournalMode {
    pub fn name(self) -> &'static str {
        match self {
            JournalMode::Delete => "DELETE",
            JournalMode::Truncate => "TRUNCATE",
            JournalMode::Persist => "PERSIST",
            JournalMode::Wal => "WAL",
            JournalMode::Memory => "MEMORY",
            JournalMode::Off => "OFF",
        }
    }
}

/// `PRAGMA synchronous`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Synchronous {
    Off,
    Normal,
    Full,
}

impl Synchronous {
    pub fn name(self) -> &'static str {
        match self {
            Synchronous::Off => "OFF",
            Synchronous::Normal => "NORMAL",
            Synchronous::Full => "FULL",
        }
    }
}

/// What the unix VFS's `full_fsync` calls: `fsync`, unless SQLite was built with
/// `-Dfdatasync=fdatasync` or `-DHAVE_FDATASYNC` (os_unix.c: "We do not trust systems to
/// provide a working fdatasync()"), as AOSP builds it (external/sqlite/dist/Android.mk,
/// `device_sqlite_flags`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SyncCall {
    Fsync,
    Fdatasync,
}

/// A set of defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Preset {
    /// SQLite's compiled-in defaults (sqlite3.c 3.54): DELETE, FULL, 4 KiB pages
    /// (`SQLITE_DEFAULT_PAGE_SIZE` since 3.12.0), no journal size limit, a checkpoint every
    /// 1000 WAL pages (`SQLITE_DEFAULT_WAL_AUTOCHECKPOINT`), no auto-vacuum, `fsync`, no busy
    /// timeout.
    #[default]
    Sqlite,
    /// Android 4.4 (the papers' phones): TRUNCATE and FULL (frameworks/base
    /// core/res/res/values/config.xml `config_defaultJournalMode`, `config_defaultSyncMode`),
    /// the page size of /data's block size (`SQLiteGlobal.getDefaultPageSize`: 4096), journal
    /// size limit 512 KiB (`config_defaultJournalSizeLimit` 524288), WAL checkpoint every 100
    /// pages (`config_defaultWALAutoCheckpoint`), auto-vacuum FULL
    /// (`-DSQLITE_DEFAULT_AUTOVACUUM=1`), `fdatasync` (`-Dfdatasync=fdatasync`), busy timeout
    /// 2.5 s (`BUSY_TIMEOUT_MS` of android_database_SQLiteConnection.cpp).
    #[serde(rename = "android-4.4")]
    Android44,
    /// Android 9 and later: Android 4.4's settings with "compatibility WAL" (WAL for apps that
    /// do not choose a mode, `SQLiteCompatibilityWalFlags`) and WAL's synchronous NORMAL
    /// (`config_defaultWALSyncMode`; asm: the value AOSP ships from Android 9).
    #[serde(rename = "android-9")]
    Android9,
}

/// The `[app.workload.sqlite]` settings of the database, each defaulting to the preset's.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SqliteOptions {
    #[serde(default)]
    pub preset: Preset,
    #[serde(default)]
    pub journal_mode: Option<JournalMode>,
    #[serde(default)]
    pub synchronous: Option<Synchronous>,
    /// Bytes, a power of two 512..=65536.
    #[serde(default)]
    pub page_size: Option<u32>,
    /// Bytes; -1 (no limit) allowed.
    #[serde(default)]
    pub journal_size_limit: Option<i64>,
    /// WAL pages between automatic checkpoints; 0 turns them off.
    #[serde(default)]
    pub wal_autocheckpoint: Option<u32>,
    /// `PRAGMA auto_vacuum = FULL` (before the first table is created).
    #[serde(default)]
    pub auto_vacuum: Option<bool>,
    #[serde(default)]
    pub sync_call: Option<SyncCall>,
    #[serde(default, with = "serde_units::option_duration")]
    pub busy_timeout: Option<Nanos>,
    /// Whether SQLite was built with `SQLITE_ENABLE_BATCH_ATOMIC_WRITE` (its VFS then asks the
    /// file system for atomic writes and, on F2FS, commits DELETE/TRUNCATE/PERSIST
    /// transactions without a rollback journal).
    #[serde(default)]
    pub batch_atomic_write: Option<bool>,
}

/// Every setting decided.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedOptions {
    pub journal_mode: JournalMode,
    pub synchronous: Synchronous,
    pub page_size: u32,
    pub journal_size_limit: i64,
    pub wal_autocheckpoint: u32,
    pub auto_vacuum: bool,
    pub sync_call: SyncCall,
    pub busy_timeout: Nanos,
    pub batch_atomic_write: bool,
}

impl Preset {
    pub fn defaults(self) -> ResolvedOptions {
        let sqlite = ResolvedOptions {
            journal_mode: JournalMode::Delete,
            synchronous: Synchronous::Full,
            page_size: 4096,
            journal_size_limit: -1,
            wal_autocheckpoint: 1000,
            auto_vacuum: false,
            sync_call: SyncCall::Fsync,
            busy_timeout: 0,
            batch_atomic_write: false,
        };
        let android44 = ResolvedOptions {
            journal_mode: JournalMode::Truncate,
            synchronous: Synchronous::Full,
            page_size: 4096,
            journal_size_limit: 524_288,
            wal_autocheckpoint: 100,
            auto_vacuum: true,
            sync_call: SyncCall::Fdatasync,
            busy_timeout: 2_500 * NS_PER_MS,
            batch_atomic_write: false,
        };
        match self {
            Preset::Sqlite => sqlite,
            Preset::Android44 => android44,
            Preset::Android9 => ResolvedOptions {
                journal_mode: JournalMode::Wal,
                synchronous: Synchronous::Normal,
                // external/sqlite/dist/Android.bp builds with
                // -DSQLITE_ENABLE_BATCH_ATOMIC_WRITE from Android 9 (asm: the release the
                // flag appeared in AOSP's build file; not checked against one revision here).
                batch_atomic_write: true,
                ..android44
            },
        }
    }
}

impl SqliteOptions {
    pub fn validate(&self) -> Result<(), String> {
        if let Some(size) = self.page_size {
            if !(512..=65536).contains(&size) || !size.is_power_of_two() {
                return Err(format!(
                    "sqlite: `page_size` {size} must be a power of two from 512 to 65536"
                ));
            }
        }
        if let Some(limit) = self.journal_size_limit {
            if limit < -1 {
                return Err(format!(
                    "sqlite: `journal_size_limit` {limit} must be -1 (no limit) or a size in bytes"
                ));
            }
        }
        // Both pragmas take a C int (`sqlite3_busy_timeout(db, int ms)`,
        // `sqlite3_wal_autocheckpoint(db, int N)`): a larger value would wrap.
        if let Some(pages) = self.wal_autocheckpoint {
            if pages > i32::MAX as u32 {
                return Err(format!(
                    "sqlite: `wal_autocheckpoint` {pages} must be at most {} pages",
                    i32::MAX
                ));
            }
        }
        if let Some(timeout) = self.busy_timeout {
            if timeout % NS_PER_MS != 0 || timeout / NS_PER_MS > i32::MAX as u64 {
                return Err(format!(
                    "sqlite: `busy_timeout` {} ms must be whole milliseconds, at most {} ms \
                     (PRAGMA busy_timeout takes an int of milliseconds)",
                    crate::units::format_ms(timeout as f64),
                    i32::MAX
                ));
            }
        }
        Ok(())
    }

    pub fn resolve(&self) -> ResolvedOptions {
        let base = self.preset.defaults();
        ResolvedOptions {
            journal_mode: self.journal_mode.unwrap_or(base.journal_mode),
            synchronous: self.synchronous.unwrap_or(base.synchronous),
            page_size: self.page_size.unwrap_or(base.page_size),
            journal_size_limit: self.journal_size_limit.unwrap_or(base.journal_size_limit),
            wal_autocheckpoint: self.wal_autocheckpoint.unwrap_or(base.wal_autocheckpoint),
            auto_vacuum: self.auto_vacuum.unwrap_or(base.auto_vacuum),
            sync_call: self.sync_call.unwrap_or(base.sync_call),
            busy_timeout: self.busy_timeout.unwrap_or(base.busy_timeout),
            batch_atomic_write: self.batch_atomic_write.unwrap_or(base.batch_atomic_write),
        }
    }
}

impl ResolvedOptions {
    /// The pragmas run when the connection opens, in the order SQLite needs (page size and
    /// auto-vacuum before the first table; the journal mode last, as Android's
    /// `SQLiteConnection.setJournalMode` runs after `setPageSize`).
    pub fn setup_sql(&self) -> String {
        let mut sql = format!(
            "PRAGMA page_size = {};\nPRAGMA auto_vacuum = {};\nPRAGMA busy_timeout = {};\n",
            self.page_size,
            if self.auto_vacuum { "FULL" } else { "NONE" },
            self.busy_timeout / NS_PER_MS,
        );
        sql.push_str(&format!(
            "PRAGMA synchronous = {};\nPRAGMA journal_size_limit = {};\nPRAGMA wal_autocheckpoint = {};\nPRAGMA journal_mode = {};\n",
            self.synchronous.name(),
            self.journal_size_limit,
            self.wal_autocheckpoint,
            self.journal_mode.name(),
        ));
        sql
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_fill_what_the_scenario_leaves_out() {
        let options: SqliteOptions =
            toml::from_str("preset = \"android-4.4\"\njournal_mode = \"wal\"").unwrap();
        let resolved = options.resolve();
        assert_eq!(resolved.journal_mode, JournalMode::Wal);
        assert_eq!(resolved.sync_call, SyncCall::Fdatasync);
        assert_eq!(resolved.journal_size_limit, 524_288);
        let plain = SqliteOptions::default().resolve();
        assert_eq!(plain.journal_mode, JournalMode::Delete);
        assert_eq!(plain.sync_call, SyncCall::Fsync);
        assert!(plain.setup_sql().contains("PRAGMA journal_mode = DELETE"));
        assert_eq!(
            Preset::Android9.defaults().synchronous,
            Synchronous::Normal,
            "Android 9's WAL runs NORMAL"
        );
    }

    #[test]
    fn bad_values_are_named() {
        let options: SqliteOptions = toml::from_str("page_size = 3000").unwrap();
        assert!(options.validate().unwrap_err().contains("page_size"));
        let options: SqliteOptions = toml::from_str("journal_size_limit = -5").unwrap();
        assert!(options
            .validate()
            .unwrap_err()
            .contains("journal_size_limit"));
        assert!(toml::from_str::<SqliteOptions>("journal_mode = \"fast\"").is_err());
    }
}
