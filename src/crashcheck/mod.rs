//! Crash-point checking (issue 20, "goes beyond the paper"): `mobistack crashcheck SCENARIO
//! --points N` runs each variant of a scenario once, recording the device's writes and flushes
//! ([`crate::dev::crash`]) and what the run did to the files under test
//! ([`crate::mm::crashlog`]); then, for N crash instants, builds the crash state from that
//! record (no re-run: the technique of CrashMonkey and ALICE), recovers it as jbd2 and MobiFS
//! would, from the journal blocks that survived ([`recover`]) and checks it ([`checks`],
//! [`sqlite`]):
//!
//! 1. point-in-time consistency of each app's files (per VCT under MobiFS);
//! 2. `PRAGMA integrity_check` of each SQLite database, by the real SQLite;
//! 3. fsynced data survive (ext4 without MobiFS);
//! 4. the journal replays no transaction whose log blocks did not all survive;
//! 5. a renamed-over name holds one of the files renamed over it, whole (`AtomicFile`);
//! 6. ordered mode's promise: no mapped block inside a recovered file's size holds anything
//!    but that file's data (no stale or never-written block exposed by a committed extent).
//!
//! `tests/crash_mutants.rs` is the checker's own test suite: deliberate journal and fsync bugs
//! ([`crate::fs::mutant`]) it must catch.
//!
//! Crash instants: three quarters cover the boundaries where the answer changes (just before
//! and at each write's and flush's completion: every flush, FUA, commit block and checkpoint
//! write), evenly spread when there are more boundaries than that; the rest are uniform over
//! the run. Each instant draws the fates of the writes the device had not made durable, so
//! one instant is one of the states the device allows; the same seed gives the same points
//! and the same report.

pub mod checks;
pub mod dump;
pub mod recover;
pub mod sqlite;

use crate::mm::crashlog::{CrashLog, CrashRecord};
use crate::mm::Ino;
use crate::scenario::{Scenario, Variant};
use crate::units::Nanos;
use recover::{Prepared, Recovered};
use serde::Serialize;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::rc::Rc;

/// Default bound on the bytes of page versions a run keeps: 1 GiB.
pub const DEFAULT_BUDGET: u64 = 1 << 30;
/// Most crash points one check takes (each is cheap; the bound keeps a typo from running for
/// hours).
pub const MAX_POINTS: usize = 10_000_000;
/// Violations described in the report, per check.
const EXAMPLES: usize = 5;

/// What to check.
#[derive(Debug, Clone)]
pub struct CrashCheckOptions {
    pub points: usize,
    /// The run's seed (default: the scenario's first).
    pub seed: Option<u64>,
    /// Bytes of page versions kept.
    pub budget: u64,
    /// Torn multi-block requests: an unflushed request may reach flash in part
    /// ([`recover::Prepared::torn`]).
    pub torn: bool,
}

impl Default for CrashCheckOptions {
    fn default() -> Self {
        CrashCheckOptions {
            points: 1_000,
            seed: None,
            budget: DEFAULT_BUDGET,
            torn: false,
        }
    }
}

/// One check's tally.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Tally {
    /// Crash states (or files) checked.
    pub checked: u64,
    pub violations: u64,
    /// The first few, described.
    pub examples: Vec<String>,
}

impl CrashCheckOptions {
    pub fn validate(&self) -> Result<(), String> {
        if self.points == 0 || self.points > MAX_POINTS {
            return Err(format!(
                "--points must be between 1 and {MAX_POINTS} (got {})",
                self.points
            ));
        }
        Ok(())
    }
}

impl Tally {
    fn add(&mut self, violation: Option<String>) {
        self.checked += 1;
        if let Some(v) = violation {
            self.violations += 1;
            if self.examples.len() < EXAMPLES {
                self.examples.push(v);
            }
        }
    }
}

/// The report of one variant.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct VariantReport {
    pub variant: String,
    pub seed: u64,
    /// Virtual length of the run.
    pub run_ns: Nanos,
    pub volatile_cache: bool,
    /// Torn multi-block requests were modelled (`--torn`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub torn: bool,
    pub writes: u64,
    pub flushes: u64,
    pub transactions: u64,
    pub files: Vec<String>,
    pub page_versions: u64,
    pub bytes_kept: u64,
    pub points: u64,
    /// Distinct recovered states among the points.
    pub distinct_states: u64,
    /// Points where no recorded transaction survived (the files are as before the run).
    pub nothing_replayed: u64,
    /// Whether MobiFS covers the apps (then point-in-time is its promise, per VCT).
    pub mobifs: bool,
    /// Check 1, per app and point (under MobiFS: data at a VCT boundary).
    pub point_in_time: Tally,
    /// Under MobiFS, check 1 relaxed to data at any instant (a state the app had, though at no
    /// VCT boundary): what the strict check's violations still satisfy.
    pub point_in_time_any_instant: Option<Tally>,
    /// Check 2, per database and distinct state.
    pub sqlite_integrity: Tally,
    /// Check 3, per file with a completed fsync and point.
    pub fsync_durability: Tally,
    /// fsync checks skipped: the file was truncated or unlinked since.
    pub fsync_skipped: u64,
    /// Check 4, per point: recovery replays no transaction whose log blocks did not all
    /// survive (it would write stale log blocks home as metadata).
    pub journal_replay: Tally,
    /// Check 5, per renamed-over name and point: the name holds one of the files renamed
    /// over it, whole ([`checks::rename_atomicity`]).
    pub rename_atomicity: Tally,
    /// Whether the mount promises check 6 (ext4 `data=ordered` or `data=journal`; not
    /// `data=writeback`, whose commits do not wait for data: reported, not counted).
    pub ordered_promised: bool,
    /// Check 6, per recovered file under test and point: no mapped block inside its size
    /// holds anything but its own data ([`checks::ordered_data`]).
    pub ordered_data: Tally,
    /// Wall-clock seconds: the run, and the checks.
    #[serde(skip)]
    pub run_seconds: f64,
    #[serde(skip)]
    pub check_seconds: f64,
}

impl VariantReport {
    /// Violations of the checks that are promises (point-in-time only under MobiFS).
    pub fn violations(&self) -> u64 {
        self.sqlite_integrity.violations
            + self.fsync_durability.violations
            + self.journal_replay.violations
            + self.rename_atomicity.violations
            + if self.ordered_promised {
                self.ordered_data.violations
            } else {
                0
            }
            + if self.mobifs {
                self.point_in_time.violations
            } else {
                0
            }
    }
}

/// Runs `variant` of `scenario` once, recording for crash states.
pub fn record(
    scenario: &Scenario,
    variant: &Variant,
    seed: u64,
    budget: u64,
) -> Result<(crate::dev::crash::WriteHistory, CrashRecord, Nanos), String> {
    let log: RefCell<Option<Rc<CrashLog>>> = RefCell::new(None);
    let history = RefCell::new(None);
    let hooks = crate::run::StackHooks {
        before: Box::new(|stack| {
            *log.borrow_mut() = Some(stack.record_crash(budget)?);
            Ok(())
        }),
        after: Box::new(|stack| {
            *history.borrow_mut() = stack.take_crash_history();
        }),
    };
    let result =
        crate::run::run_one_hooked(scenario, variant, seed, false, None, |_| {}, Some(hooks))
            .map_err(|e| e.to_string())?;
    let record = log
        .into_inner()
        .map(|l| l.record())
        .ok_or("the run recorded nothing")?;
    if record.overflowed {
        return Err(format!(
            "the files under test wrote more than the budget of {} bytes of page versions \
             (--budget)",
            budget
        ));
    }
    let history = history.into_inner().ok_or("the device recorded nothing")?;
    if history.len() >= crate::dev::crash::MAX_COMMANDS {
        return Err(format!(
            "the run issued more than {} device commands: too long to record",
            crate::dev::crash::MAX_COMMANDS
        ));
    }
    Ok((history, record, result.virtual_ns))
}

/// The crash instants: boundaries first, then uniform ones.
pub fn crash_points(
    history: &crate::dev::crash::WriteHistory,
    n: usize,
    seed: u64,
    end: Nanos,
) -> Vec<Nanos> {
    let mut rng = crate::sim::rng::Rng::new(seed ^ 0xC4A5_4C4E_C4A5_4C4E);
    let boundaries = n - n / 4;
    let mut points = history.crash_points(boundaries, &mut |b| rng.below(b));
    points.truncate(boundaries);
    while points.len() < n {
        points.push(1 + rng.below(end.max(1)));
    }
    points.sort_unstable();
    points
}

fn state_hash(files: &[Option<&recover::RecoveredFile>]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    files.hash(&mut h);
    h.finish()
}

/// Checks `variant` of `scenario` at `options.points` crash points; `progress(done, total)`.
pub fn check_variant(
    scenario: &Scenario,
    variant: &Variant,
    options: &CrashCheckOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<VariantReport, String> {
    options.validate()?;
    let seed = options.seed.unwrap_or(scenario.seeds[0]);
    let wall = std::time::Instant::now();
    let (history, record, run_ns) = record(scenario, variant, seed, options.budget)?;
    let run_seconds = wall.elapsed().as_secs_f64();
    let wall = std::time::Instant::now();
    if record.files.is_empty() {
        return Err(format!(
            "variant `{}` created no file under test (files created with O_STORE_CONTENTS, \
             such as SQLite's): nothing to check",
            variant.name
        ));
    }
    let prepared = Prepared::new(&history, &record, seed).torn(options.torn);
    let points = crash_points(&history, options.points, seed, run_ns);
    let apps: BTreeMap<String, bool> = record
        .files
        .values()
        .map(|f| (f.app.clone(), f.mobifs))
        .collect();
    let mobifs = apps.values().any(|&m| m);
    let databases = sqlite::databases(&record);
    let fsyncs = checks::fsyncs_by_file(&record);
    let shrinks = checks::shrinks_by_file(&record);
    let rename_targets: std::collections::BTreeSet<String> =
        record.renames.iter().map(|r| r.path.clone()).collect();
    let scratch = Scratch::new()?;
    let mut report = VariantReport {
        variant: variant.name.clone(),
        seed,
        run_ns,
        volatile_cache: history.volatile_cache,
        torn: options.torn,
        writes: history.writes.len() as u64,
        flushes: history.flushes.len() as u64,
        transactions: record.tids.len() as u64,
        files: record.files.values().map(|f| f.path.clone()).collect(),
        page_versions: record.versions.len() as u64,
        bytes_kept: record.bytes,
        points: points.len() as u64,
        distinct_states: 0,
        nothing_replayed: 0,
        mobifs,
        point_in_time: Tally::default(),
        point_in_time_any_instant: mobifs.then(Tally::default),
        sqlite_integrity: Tally::default(),
        fsync_durability: Tally::default(),
        fsync_skipped: 0,
        journal_replay: Tally::default(),
        rename_atomicity: Tally::default(),
        ordered_promised: variant.stack.fs.data != crate::fs::ext4::DataMode::Writeback,
        ordered_data: Tally::default(),
        run_seconds,
        check_seconds: 0.0,
    };
    let mut distinct: HashSet<u64> = HashSet::new();
    let mut pit_cache: HashMap<(String, checks::Consistency, u64), Option<usize>> = HashMap::new();
    let mut sqlite_cache: HashMap<(Ino, u64), Option<String>> = HashMap::new();
    let app_files: BTreeMap<&str, Vec<Ino>> =
        record
            .files
            .iter()
            .fold(BTreeMap::new(), |mut m, (&ino, f)| {
                m.entry(f.app.as_str()).or_default().push(ino);
                m
            });
    let total = points.len() as u64;
    for (k, &at) in points.iter().enumerate() {
        let state: Recovered = prepared.recover(at, k as u64);
        let all: Vec<Option<&recover::RecoveredFile>> =
            record.files.keys().map(|i| state.files.get(i)).collect();
        distinct.insert(state_hash(&all));
        if state.replayed.is_none() {
            report.nothing_replayed += 1;
        }
        // 1. Point in time, per app.
        for (app, inos) in &app_files {
            let files: Vec<Option<&recover::RecoveredFile>> =
                inos.iter().map(|i| state.files.get(i)).collect();
            let hash = state_hash(&files);
            let app_mobifs = apps[*app];
            let mut holds = |consistency: checks::Consistency| {
                let first = *pit_cache
                    .entry((app.to_string(), consistency, hash))
                    .or_insert_with(|| {
                        checks::point_in_time(&record, app, consistency, &state, Nanos::MAX)
                    });
                first.is_some_and(|p| p == 0 || record.events[p - 1].at <= at)
            };
            let ok = holds(if app_mobifs {
                checks::Consistency::VctData
            } else {
                checks::Consistency::Files
            });
            if app_mobifs {
                let any = holds(checks::Consistency::Data);
                if let Some(t) = report.point_in_time_any_instant.as_mut() {
                    t.add((!any).then(|| {
                        format!(
                            "crash point {k} at {at} ns: app `{app}`'s data ({}) are in no state the app \
                             had",
                            describe(&record, &state, inos)
                        )
                    }));
                }
            }
            report.point_in_time.add((!ok).then(|| {
                format!(
                    "crash point {k} at {at} ns: app `{app}`'s files ({}) are in no state the app had{}",
                    describe(&record, &state, inos),
                    if app_mobifs { " at a VCT boundary" } else { "" }
                )
            }));
        }
        // 2. SQLite's integrity_check, per distinct database state.
        for db in &databases {
            let files: Vec<Option<&recover::RecoveredFile>> = [Some(db.db), db.journal, db.wal]
                .into_iter()
                .map(|i| i.and_then(|i| state.files.get(&i)))
                .collect();
            let key = (db.db, state_hash(&files));
            if let std::collections::hash_map::Entry::Vacant(slot) = sqlite_cache.entry(key) {
                let verdict = sqlite::check(&record, db, &state, &scratch.0)?;
                report.sqlite_integrity.add(verdict.clone().map(|v| {
                    format!(
                        "crash point {k} at {at} ns: {} ({}): {v}",
                        db.path,
                        describe(
                            &record,
                            &state,
                            &[Some(db.db), db.journal, db.wal]
                                .into_iter()
                                .flatten()
                                .collect::<Vec<_>>()
                        )
                    )
                }));
                slot.insert(verdict);
            }
        }
        // 3. fsynced data survive.
        let outcome = checks::fsync_durability(&record, &fsyncs, &shrinks, &state, at);
        report.fsync_skipped += outcome.skipped;
        report.fsync_durability.checked += outcome.checked - outcome.lost.len() as u64;
        for lost in outcome.lost {
            report.fsync_durability.add(Some(format!(
                "crash point {k} at {at} ns: {} fsynced by {} ns: {}",
                record.files[&lost.ino].path, lost.fsync_end, lost.what
            )));
        }
        // 4. The journal replays only transactions whose log blocks all survived.
        report
            .journal_replay
            .add(state.bad_replays.first().map(|bad| {
                format!(
                    "crash point {k} at {at} ns: {}{}",
                    describe_bad_replay(bad),
                    match state.bad_replays.len() {
                        1 => String::new(),
                        n => format!(" ({} more such blocks)", n - 1),
                    }
                )
            }));
        // 5. A renamed-over name holds one of the files renamed over it, whole.
        for path in &rename_targets {
            if record.renames.iter().any(|r| &r.path == path && r.at <= at) {
                report.rename_atomicity.add(
                    checks::rename_atomicity(&record, &state, at, path)
                        .map(|v| format!("crash point {k} at {at} ns: {v}")),
                );
            }
        }
        // 6. Ordered mode: no block inside a file's size that the device never made durable
        // with its data.
        for (_, violation) in checks::ordered_data(&record, &state) {
            report
                .ordered_data
                .add(violation.map(|v| format!("crash point {k} at {at} ns: {v}")));
        }
        progress(k as u64 + 1, total);
    }
    drop(scratch);
    report.distinct_states = distinct.len() as u64;
    report.check_seconds = wall.elapsed().as_secs_f64();
    Ok(report)
}

/// The scratch directory SQLite's checks write to, removed however the check ends.
struct Scratch(std::path::PathBuf);

impl Scratch {
    /// A new one: one per check (checks may run in parallel in one process).
    fn new() -> Result<Scratch, String> {
        static SCRATCH: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "mobistack-crashcheck-{}-{}",
            std::process::id(),
            SCRATCH.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Scratch(path))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A short description of some recovered files: name, size and the transaction replayed.
fn describe(record: &CrashRecord, state: &Recovered, inos: &[Ino]) -> String {
    let files: Vec<String> = inos
        .iter()
        .map(|ino| {
            let name = record.files[ino].name.as_str();
            match state.files.get(ino) {
                None => format!("{name} absent"),
                Some(f) => format!("{name} {} B", f.size),
            }
        })
        .collect();
    format!(
        "{}; replayed through tid {}",
        files.join(", "),
        state.replayed.map_or("none".into(), |t| t.to_string())
    )
}

/// A replayed copy whose log block did not survive, in words.
fn describe_bad_replay(bad: &recover::BadReplay) -> String {
    use crate::mm::crashlog::LogContent;
    let found = match &bad.found {
        None => "nothing written in this run (zeros)".to_string(),
        Some(LogContent::Copy { tid, home }) => {
            format!("transaction {tid}'s copy of block {home}")
        }
        Some(LogContent::Descriptor { tid, .. }) => format!("a descriptor block of {tid}"),
        Some(LogContent::Commit { tid, .. }) => format!("the commit block of {tid}"),
        Some(LogContent::Superblock { .. }) => "the journal superblock".to_string(),
    };
    format!(
        "transaction {} is replayed (its descriptor and commit blocks survived) but its log \
         block at offset {} holds {found}, not its copy of block {}: recovery writes that \
         to block {}",
        bad.tid, bad.offset, bad.home, bad.home
    )
}

/// Checks every variant of `scenario` (`Scenario::select_variant` narrows it to one).
pub fn check_scenario(
    scenario: &Scenario,
    options: &CrashCheckOptions,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<Vec<VariantReport>, String> {
    scenario
        .variants
        .iter()
        .map(|v| check_variant(scenario, v, options, &mut |d, t| progress(&v.name, d, t)))
        .collect()
}

/// The reports as a table.
pub fn render(scenario: &Scenario, reports: &[VariantReport]) -> String {
    let empty = Tally::default();
    let mut out = format!("crashcheck {}\n", scenario.name);
    for r in reports {
        out += &format!(
            "\nvariant {} (seed {}): {:.1} s virtual, {} writes and {} flushes recorded ({}), \
             {} transactions, {} page versions of {} file(s) ({:.1} MB kept)\n",
            r.variant,
            r.seed,
            r.run_ns as f64 / 1e9,
            r.writes,
            r.flushes,
            match (r.volatile_cache, r.torn) {
                (true, false) => "volatile cache",
                (true, true) => "volatile cache, torn requests",
                (false, false) => "write-through cache",
                (false, true) => "write-through cache, torn requests",
            },
            r.transactions,
            r.page_versions,
            r.files.len(),
            r.bytes_kept as f64 / 1e6,
        );
        out += &format!(
            "  {} crash points, {} distinct recovered states ({} with no transaction replayed); \
             run {:.1} s, checks {:.1} s\n",
            r.points, r.distinct_states, r.nothing_replayed, r.run_seconds, r.check_seconds
        );
        let rows = [
            (
                if r.mobifs {
                    "1 point-in-time (per VCT, MobiFS's promise)"
                } else {
                    "1 point-in-time (not promised by ext4)"
                },
                &r.point_in_time,
            ),
            (
                "1' point-in-time (data, any instant)",
                r.point_in_time_any_instant.as_ref().unwrap_or(&empty),
            ),
            (
                "2 SQLite integrity_check (distinct states)",
                &r.sqlite_integrity,
            ),
            ("3 fsynced data survive", &r.fsync_durability),
            (
                "4 journal replays only whole transactions",
                &r.journal_replay,
            ),
            (
                "5 rename is atomic (old or new, whole)",
                &r.rename_atomicity,
            ),
            (
                if r.ordered_promised {
                    "6 ordered data: no unwritten block in a file"
                } else {
                    "6 ordered data (not promised: data=writeback)"
                },
                &r.ordered_data,
            ),
        ];
        let rows: Vec<(&str, &Tally)> = rows
            .into_iter()
            .filter(|(name, _)| !name.starts_with("1'") || r.mobifs)
            .collect();
        for (name, t) in &rows {
            out += &format!(
                "  {name:<46} {:>8} checked {:>8} violations\n",
                t.checked, t.violations
            );
        }
        if r.fsync_skipped > 0 {
            out += &format!(
                "  (fsync checks skipped: the file was truncated or unlinked since: {})\n",
                r.fsync_skipped
            );
        }
        for (name, t) in &rows {
            for e in &t.examples {
                let label = name.split(' ').next().unwrap_or("");
                out += &format!("  {label}: {e}\n");
            }
        }
    }
    out
}
