//! `mobistack reproduce joj` (seed 002, I/O Stack Optimization for Smartphones, ATC'13): the
//! Journaling of Journal. 1,000 single-row autocommit INSERTs through the real SQLite
//! (`scenarios/joj/insert.toml`) on ext4 ordered over the eMMC 4.5 profile:
//!
//! 1. the per-transaction account in DELETE, TRUNCATE, PERSIST and WAL modes, the ext4 journal
//!    internal and external, on a device with a write-back cache without FUA and with FUA:
//!    block writes by purpose, KiB and flushes per transaction, beside what SQLite and ext4
//!    should do (SQLite's syncs per commit in each mode; jbd2's commit = descriptor + metadata
//!    blocks + commit block);
//! 2. inserts/s of the 2013 stock stack (DELETE, SQLite's `fsync`, internal journal) and with
//!    each of the paper's fixes and their combination.
//!
//! The paper's text in `../shared/seeds/` is its abstract: the headline figures (39 inserts/s
//! stock; +130 % from the three fixes on the stock stack; 157 inserts/s with F2FS + WAL + the
//! fixes) are the references. The F2FS rows run `[stack.fs] type = "f2fs"` (issue 18).
//! Fix (iii), polling I/O completion, is `[stack.device] completion = "poll"` (each command's
//! time less the interrupt path's cost, `dev::profile::IRQ_COMPLETION_COST`).

use super::{run_all, Headline, ReproduceOptions, Reproduction, Runs, Statistic, Table, TableRow};
use crate::app::sqlite::{JournalMode, SyncCall};
use crate::scenario::{self, Scenario, WorkloadConfig};

const SCENARIO: &str = "joj/insert";
const APP: &str = "db";

/// The modes of the account table and SQLite's syncs per commit in each (synchronous FULL, the
/// bundled SQLite 3.54's pager.c; `app::sqlite::tests` checks them against the calls made).
const MODES: [(JournalMode, &str, f64); 4] = [
    (JournalMode::Delete, "DELETE", 4.0),
    (JournalMode::Truncate, "TRUNCATE", 5.0),
    (JournalMode::Persist, "PERSIST", 5.0),
    (JournalMode::Wal, "WAL", 1.0),
];

/// The scenario with the app's journal mode and sync call set, and its variants replaced by
/// `variants` (name, external journal, FUA).
fn configured(
    base: &Scenario,
    mode: JournalMode,
    sync: SyncCall,
    variants: &[(&str, bool, bool)],
) -> Result<Scenario, String> {
    let mut s = base.clone();
    for app in &mut s.apps {
        if let WorkloadConfig::Sqlite(config) = &mut app.workload {
            config.journal_mode = Some(mode);
            config.sync_call = Some(sync);
        }
    }
    let internal = base
        .variants
        .iter()
        .find(|v| v.name == "internal")
        .ok_or("joj/insert has no `internal` variant")?;
    let external = base
        .variants
        .iter()
        .find(|v| v.name == "external")
        .ok_or("joj/insert has no `external` variant")?;
    s.variants = variants
        .iter()
        .map(|&(name, ext, fua)| {
            let mut v = if ext {
                external.clone()
            } else {
                internal.clone()
            };
            v.name = name.to_string();
            v.stack.device.fua = Some(fua);
            if let Some(device) = v.stack.fs.journal_device.as_mut() {
                device.fua = Some(fua);
            }
            v
        })
        .collect();
    Ok(s)
}

/// One run's per-transaction figures.
struct Account {
    /// F2FS's node, NAT, SIT, SSA, checkpoint-pack and GC blocks per transaction.
    f2fs_meta: f64,
    database: f64,
    journal_file: f64,
    wal: f64,
    ext4_metadata: f64,
    jbd2: f64,
    kib: f64,
    flushes: f64,
    /// Of `flushes`, those asked of an external journal's device.
    journal_device_flushes: f64,
    /// Every block write (SQLite's files, ext4 metadata, jbd2's log).
    writes: f64,
    syncs: f64,
    commits: f64,
    inserts_per_s: f64,
}

fn account(runs: &Runs, variant: &str) -> Account {
    let run = runs.get(variant);
    let app = &run.apps[APP];
    let n = app
        .counters
        .get("sqlite.transactions")
        .copied()
        .unwrap_or(0)
        .max(1) as f64;
    let sum = |pred: &dyn Fn(&str) -> bool, field: &str| -> f64 {
        app.counters
            .iter()
            .filter(|(k, _)| {
                k.strip_prefix("sqlite.")
                    .and_then(|rest| rest.strip_suffix(field))
                    .is_some_and(pred)
            })
            .map(|(_, v)| *v as f64)
            .fold(0.0, |a, b| a + b)
    };
    let purpose = |key: &str| key.split('@').next().unwrap_or(key).to_string();
    let is_jbd2 = |key: &str| purpose(key).starts_with("journal-");
    let is_metadata = |key: &str| {
        matches!(
            purpose(key).as_str(),
            "superblock"
                | "group-desc"
                | "block-bitmap"
                | "inode-bitmap"
                | "inode"
                | "directory"
                | "extent"
                | "metadata"
                | "checkpoint"
        )
    };
    let writes = |pred: &dyn Fn(&str) -> bool| sum(pred, ".writes") / n;
    let bytes = sum(&|_| true, ".write_bytes") / n;
    let syncs = ["fsync", "fdatasync"]
        .iter()
        .map(|c| {
            app.counters
                .get(&format!("sqlite.call.{c}"))
                .copied()
                .unwrap_or(0) as f64
        })
        .fold(0.0, |a, b| a + b);
    let mean_ns = app
        .ops
        .get("transaction")
        .map_or(0.0, |summary| summary.mean_ns);
    let is_f2fs = |key: &str| {
        matches!(
            purpose(key).as_str(),
            "node" | "nat" | "sit" | "ssa" | "cp-pack" | "gc-move"
        )
    };
    Account {
        f2fs_meta: writes(&is_f2fs),
        database: writes(&|k| k == "database"),
        journal_file: writes(&|k| k == "journal"),
        wal: writes(&|k| k == "wal"),
        ext4_metadata: writes(&is_metadata),
        jbd2: writes(&is_jbd2),
        kib: bytes / 1024.0,
        flushes: app.counters.get("sqlite.flushes").copied().unwrap_or(0) as f64 / n,
        journal_device_flushes: app
            .counters
            .iter()
            .filter(|(k, _)| k.starts_with("sqlite.flushes@"))
            .map(|(_, v)| *v as f64)
            .fold(0.0, |a, b| a + b)
            / n,
        writes: writes(&|_| true),
        // The warm-up before the measured transactions made none of these calls.
        syncs: syncs / n,
        commits: writes(&|k| purpose(k) == "journal-commit"),
        inserts_per_s: if mean_ns > 0.0 { 1e9 / mean_ns } else { 0.0 },
    }
}

/// The F2FS table's configurations: (label, file system, mode, batch atomic write).
const F2FS_ROWS: [(&str, crate::fs::ext4::FsKind, JournalMode, bool); 7] = [
    (
        "ext4 DELETE",
        crate::fs::ext4::FsKind::Ext4,
        JournalMode::Delete,
        false,
    ),
    (
        "ext4 TRUNCATE",
        crate::fs::ext4::FsKind::Ext4,
        JournalMode::Truncate,
        false,
    ),
    (
        "ext4 WAL",
        crate::fs::ext4::FsKind::Ext4,
        JournalMode::Wal,
        false,
    ),
    (
        "F2FS DELETE",
        crate::fs::ext4::FsKind::F2fs,
        JournalMode::Delete,
        false,
    ),
    (
        "F2FS DELETE atomic",
        crate::fs::ext4::FsKind::F2fs,
        JournalMode::Delete,
        true,
    ),
    (
        "F2FS TRUNCATE",
        crate::fs::ext4::FsKind::F2fs,
        JournalMode::Truncate,
        false,
    ),
    (
        "F2FS WAL",
        crate::fs::ext4::FsKind::F2fs,
        JournalMode::Wal,
        false,
    ),
];

/// The fixes table's configurations: (label, mode, sync call, external journal, polling).
const FIXES: [(&str, JournalMode, SyncCall, bool, bool); 8] = [
    (
        "stock (DELETE, fsync, internal journal, interrupts)",
        JournalMode::Delete,
        SyncCall::Fsync,
        false,
        false,
    ),
    (
        "(i) fdatasync",
        JournalMode::Delete,
        SyncCall::Fdatasync,
        false,
        false,
    ),
    (
        "(i) fdatasync + PERSIST (no journal create/delete)",
        JournalMode::Persist,
        SyncCall::Fdatasync,
        false,
        false,
    ),
    (
        "(ii) external journal",
        JournalMode::Delete,
        SyncCall::Fsync,
        true,
        false,
    ),
    (
        "(iii) polling I/O completion",
        JournalMode::Delete,
        SyncCall::Fsync,
        false,
        true,
    ),
    (
        "(i) + (ii) + (iii)",
        JournalMode::Persist,
        SyncCall::Fdatasync,
        true,
        true,
    ),
    (
        "(i) + (iii)",
        JournalMode::Persist,
        SyncCall::Fdatasync,
        false,
        true,
    ),
    (
        "WAL + (i) + (ii) + (iii) (paper: with F2FS)",
        JournalMode::Wal,
        SyncCall::Fdatasync,
        true,
        true,
    ),
];

/// The modes and kernels of the per-era account (the scenario's default kernel's rows come
/// from the account over every mode).
const ERA_MODES: [JournalMode; 2] = [JournalMode::Delete, JournalMode::Wal];
const ERA_VERSIONS: [crate::kernel::KernelVersion; 2] = [
    crate::kernel::KernelVersion::V6_6,
    crate::kernel::KernelVersion::Mainline,
];

/// A row of the per-era table: `scenario`'s kernel version, the mode, the variant.
fn era_row(scenario: &Scenario, mode: &str, variant: &str, a: &Account) -> TableRow {
    let version = scenario
        .variants
        .iter()
        .find(|v| v.name == variant)
        .map(|v| v.stack.kernel.version)
        .unwrap_or_default();
    TableRow {
        label: format!("{version} {mode} {variant}"),
        values: vec![
            Some(a.writes),
            Some(a.jbd2),
            Some(a.commits),
            Some(a.flushes),
            Some(a.journal_device_flushes),
            Some(a.inserts_per_s),
        ],
    }
}

pub fn joj(
    options: &ReproduceOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<Reproduction, String> {
    let base = scenario::load(SCENARIO).map_err(|e| e.to_string())?;
    // 1. The fixes on the stock device (the profile's FUA).
    let mut fix_rows = Vec::new();
    let mut inserts = Vec::new();
    for (label, mode, sync, external, poll) in FIXES {
        progress(&format!("joj: {label}"));
        let mut s = configured(&base, mode, sync, &[("run", external, true)])?;
        if poll {
            for v in &mut s.variants {
                v.stack.device.completion = crate::dev::Completion::Poll;
                if let Some(device) = v.stack.fs.journal_device.as_mut() {
                    device.completion = crate::dev::Completion::Poll;
                }
            }
        }
        let runs = run_all(&s, options)?;
        let a = account(&runs, "run");
        inserts.push(a.inserts_per_s);
        fix_rows.push(TableRow {
            label: label.to_string(),
            values: vec![
                Some(a.inserts_per_s),
                Some(a.syncs),
                Some(a.commits),
                Some(a.jbd2),
                Some(a.kib),
                Some(a.flushes),
            ],
        });
    }
    let stock = inserts[0];
    let fixed = inserts[5];
    let wal_fixed = inserts[7];
    // F2FS + WAL + (i) + (iii): the paper's best stack (the external journal is ext4's).
    progress("joj: F2FS + WAL + fixes");
    let f2fs_wal_fixed = {
        let mut s = configured(
            &base,
            JournalMode::Wal,
            SyncCall::Fdatasync,
            &[("run", false, true)],
        )?;
        for v in &mut s.variants {
            v.stack.fs.kind = crate::fs::ext4::FsKind::F2fs;
            v.stack.device.completion = crate::dev::Completion::Poll;
        }
        let runs = run_all(&s, options)?;
        account(&runs, "run").inserts_per_s
    };
    let headlines = vec![
        Headline::level(
            "inserts/s of the stock Android I/O stack (DELETE, fsync, ext4, interrupts)",
            "abstract: 39 ins/sec",
            "inserts/s",
            Statistic::Throughput,
            39.0,
            stock,
        ),
        Headline::relative(
            "inserts/s, stock -> the three fixes on the stock stack (ext4)",
            "abstract: +130 %",
            "inserts/s",
            Statistic::Throughput,
            230.0,
            (stock, fixed),
        ),
        Headline::level(
            "inserts/s of F2FS + WAL + the fixes (fdatasync, polling)",
            "abstract: 157 ins/sec",
            "inserts/s",
            Statistic::Throughput,
            157.0,
            f2fs_wal_fixed,
        ),
        Headline::change(
            "inserts/s, stock -> F2FS + WAL + the fixes (fdatasync, polling)",
            "abstract: 39 -> 157 (+300 %)",
            "inserts/s",
            Statistic::Throughput,
            (39.0, 157.0),
            (stock, f2fs_wal_fixed),
        ),
        Headline::change(
            "inserts/s, stock -> ext4 + WAL + the fixes (no F2FS)",
            "abstract: 39 -> 157 (with F2FS)",
            "inserts/s",
            Statistic::Throughput,
            (39.0, 157.0),
            (stock, wal_fixed),
        ),
    ];
    let mut tables = vec![Table {
        title: "Inserts/s on the eMMC 4.5 profile: the stock stack and the paper's fixes".into(),
        note:
            "1,000 autocommit INSERTs, synchronous FULL, ext4 data=ordered, the device with FUA. \
               (i) = eliminating unnecessary metadata journaling: SQLite's syncs as fdatasync \
               (AOSP builds SQLite with -Dfdatasync=fdatasync) and the journal kept \
               (PERSIST) instead of created and unlinked each transaction; (ii) = ext4's \
               journal on its own device; (iii) = polling I/O completion (each command's \
               time less the interrupt path, `[stack.device] completion = \"poll\"`). \
               Per-transaction columns: SQLite's syncs, jbd2 commits, jbd2 blocks written, \
               KiB written, device cache flushes."
                .into(),
        columns: vec![
            "inserts/s".into(),
            "syncs".into(),
            "commits".into(),
            "jbd2 blk".into(),
            "KiB".into(),
            "flushes".into(),
        ],
        rows: fix_rows,
    }];
    if !options.quick {
        // 2. ext4's data modes, stock SQLite (DELETE, fsync), internal and external journal.
        let mut rows = Vec::new();
        for (label, data) in [
            ("data=ordered", crate::fs::ext4::DataMode::Ordered),
            ("data=writeback", crate::fs::ext4::DataMode::Writeback),
            ("data=journal", crate::fs::ext4::DataMode::Journal),
        ] {
            progress(&format!("joj: {label}"));
            let mut s = configured(
                &base,
                JournalMode::Delete,
                SyncCall::Fsync,
                &[("internal", false, true), ("external", true, true)],
            )?;
            for v in &mut s.variants {
                v.stack.fs.data = data;
            }
            let runs = run_all(&s, options)?;
            for variant in ["internal", "external"] {
                let a = account(&runs, variant);
                rows.push(TableRow {
                    label: format!("{label} {variant}"),
                    values: vec![
                        Some(a.inserts_per_s),
                        Some(a.database + a.journal_file),
                        Some(a.jbd2),
                        Some(a.commits),
                        Some(a.kib),
                        Some(a.flushes),
                    ],
                });
            }
        }
        tables.push(Table {
            title: "ext4's data modes under SQLite (DELETE, fsync, synchronous FULL)".into(),
            note: "data=journal journals file data with the metadata (no delayed allocation): \
                   SQLite's database and journal pages go to the log at commit and home at \
                   checkpoint, so a transaction writes no data blocks in place (`files` is \
                   SQLite's files written in place during the transaction). data=writeback \
                   differs from ordered only where ordered mode files inodes for ordered data, \
                   which delayed allocation on the Galaxy S5's 3.10 does not (docs/ext4.md)."
                .into(),
            columns: vec![
                "inserts/s".into(),
                "files".into(),
                "jbd2".into(),
                "commits".into(),
                "KiB".into(),
                "flushes".into(),
            ],
            rows,
        });
        // 3. F2FS beside ext4: each journal mode, and DELETE with atomic writes.
        let mut rows = Vec::new();
        for (label, fs, mode, batch) in F2FS_ROWS {
            progress(&format!("joj: {label}"));
            let mut s = configured(&base, mode, SyncCall::Fsync, &[("run", false, true)])?;
            for v in &mut s.variants {
                v.stack.fs.kind = fs;
            }
            for app in &mut s.apps {
                if let WorkloadConfig::Sqlite(config) = &mut app.workload {
                    config.batch_atomic_write = Some(batch);
                }
            }
            let runs = run_all(&s, options)?;
            let a = account(&runs, "run");
            let run = runs.get("run");
            let checkpoints = run.counters.get("f2fs.checkpoints").copied().unwrap_or(0) as f64
                / run.apps[APP]
                    .counters
                    .get("sqlite.transactions")
                    .copied()
                    .unwrap_or(1)
                    .max(1) as f64;
            rows.push(TableRow {
                label: label.to_string(),
                values: vec![
                    Some(a.inserts_per_s),
                    Some(a.database),
                    Some(if mode == JournalMode::Wal {
                        a.wal
                    } else {
                        a.journal_file
                    }),
                    Some(a.ext4_metadata + a.jbd2 + a.f2fs_meta),
                    Some(a.kib),
                    Some(a.flushes),
                    Some(checkpoints),
                ],
            });
        }
        tables.push(Table {
            title: "F2FS beside ext4 (seed 002's F2FS rows): per transaction, SQLite's fsync".into(),
            note: "1,000 autocommit INSERTs, synchronous FULL, eMMC 4.5 with FUA, `discard` off. `fs meta` is ext4's in-place metadata plus jbd2's log on ext4, and F2FS's node, NAT, SIT, SSA and checkpoint-pack blocks on F2FS. On F2FS an fsync writes the file's data out of place and its node blocks with roll-forward marks, no checkpoint; but SQLite fsyncs the directory of a journal it opens with O_CREAT (os_unix.c's UNIXFILE_DIRSYNC) and a directory's fsync is a checkpoint on F2FS (need_do_checkpoint: CP_NON_REGULAR), so DELETE, TRUNCATE and PERSIST checkpoint once per transaction. `atomic` = SQLite built with SQLITE_ENABLE_BATCH_ATOMIC_WRITE (AOSP's build): the rollback journal is replaced by F2FS_IOC_START/COMMIT_ATOMIC_WRITE."
                .into(),
            columns: vec![
                "inserts/s".into(),
                "db".into(),
                "journal".into(),
                "fs meta".into(),
                "KiB".into(),
                "flushes".into(),
                "CPs".into(),
            ],
            rows,
        });
        // 4. The account: every mode x journal x FUA.
        let variants: [(&str, bool, bool); 4] = [
            ("internal/no-fua", false, false),
            ("internal/fua", false, true),
            ("external/no-fua", true, false),
            ("external/fua", true, true),
        ];
        let mut rows = Vec::new();
        let mut era_rows = Vec::new();
        for (mode, name, expected_syncs) in MODES {
            progress(&format!("joj: account, {name}"));
            let s = configured(&base, mode, SyncCall::Fsync, &variants)?;
            let runs = run_all(&s, options)?;
            for (variant, _, _) in variants {
                let a = account(&runs, variant);
                if ERA_MODES.contains(&mode) {
                    era_rows.push(era_row(&base, name, variant, &a));
                }
                let blocks_per_commit = if a.commits > 0.0 {
                    a.jbd2 / a.commits
                } else {
                    0.0
                };
                rows.push(TableRow {
                    label: format!("{name} {variant}"),
                    values: vec![
                        Some(a.database),
                        Some(if mode == JournalMode::Wal {
                            a.wal
                        } else {
                            a.journal_file
                        }),
                        Some(a.ext4_metadata),
                        Some(a.jbd2),
                        Some(a.kib),
                        Some(a.flushes),
                        Some(a.syncs),
                        Some(expected_syncs),
                        Some(a.commits),
                        Some(blocks_per_commit),
                        Some(a.inserts_per_s),
                    ],
                });
            }
        }
        tables.push(Table {
            title: "The write amplification of one INSERT: per-transaction account".into(),
            note: "Per transaction, block writes by purpose: SQLite's database file, its \
                   journal (the WAL in WAL mode), ext4 metadata written in place, jbd2's log \
                   (descriptor + metadata copies + commit, on the journal's device); KiB \
                   written; device cache flushes (with FUA the commit block is a FUA write, \
                   without it a flush follows). `syncs` are SQLite's fsync calls, `expected` \
                   what the bundled SQLite's pager.c makes per commit in that mode; `blk/commit` \
                   is jbd2's commit size (descriptor + metadata blocks + commit block). ext4's \
                   metadata reaches its home location later, by jbd2's checkpoint and the \
                   flusher, charged to no app: 0 here is that, not an absence of metadata."
                .into(),
            columns: vec![
                "db".into(),
                "journal".into(),
                "ext4 meta".into(),
                "jbd2".into(),
                "KiB".into(),
                "flushes".into(),
                "syncs".into(),
                "expected".into(),
                "commits".into(),
                "blk/commit".into(),
                "inserts/s".into(),
            ],
            rows,
        });
        // 5. DELETE and WAL under the later kernels (the rows above are 3.10's).
        for version in ERA_VERSIONS {
            for (mode, name, _) in MODES.iter().filter(|m| ERA_MODES.contains(&m.0)) {
                progress(&format!("joj: account, {name}, Linux {version}"));
                let mut s = configured(&base, *mode, SyncCall::Fsync, &variants)?;
                for v in &mut s.variants {
                    v.stack.kernel.version = version;
                }
                let runs = run_all(&s, options)?;
                for (variant, _, _) in variants {
                    era_rows.push(era_row(&s, name, variant, &account(&runs, variant)));
                }
            }
        }
        tables.push(Table {
            title:
                "Per transaction under each kernel era: DELETE and WAL, block writes and flushes"
                    .into(),
            note: "`[stack.kernel] version` per row (3.10 is the scenario's default), SQLite's \
                   fsync, ext4 data=ordered. `writes` is every block write of the transaction \
                   (SQLite's files, ext4 metadata, jbd2's log); `flushes` every cache flush \
                   asked of either device (a FUA write on a device without FUA costs one after \
                   it), `@journal` those of the external journal's device. 3.10 directory \
                   fsyncs commit an empty transaction on an idle journal (3.11 stops that); \
                   from 4.7 delayed allocation files new blocks (`t_need_data_flush`), so an \
                   external journal's commit flushes the file system's device first, until \
                   5.6's dioread_nolock default (244adf6426ee) allocates unwritten extents, \
                   which are never filed (6.6: no such flush); mainline also flushes it for \
                   every fsync whose transaction is still running (aac45075f6d7). \
                   docs/sqlite.md derives each figure from the kernels' code."
                .into(),
            columns: vec![
                "writes".into(),
                "jbd2".into(),
                "commits".into(),
                "flushes".into(),
                "@journal".into(),
                "inserts/s".into(),
            ],
            rows: era_rows,
        });
    }
    Ok(Reproduction::new("joj", options.quick, headlines, tables))
}
