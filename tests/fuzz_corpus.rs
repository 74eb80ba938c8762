//! Replays every file of every fuzz corpus (`fuzz/corpus/<target>/`) and every saved finding
//! (`fuzz/regressions/<target>/`) through `mobistack::fuzzing`, the functions the fuzz targets
//! call: no input may panic or be a finding (a deadlock or livelock, see the harness's header).
//!
//! A regression that still fails is listed in [`KNOWN_FAILURES`] (its fix is on its way in
//! another change): it is not run (some still hang) and is named on stderr, never silently.
//! Remove a file from the list when its fix lands. Each input runs in its own thread with a
//! wall-time bound ([`TIME_LIMIT`]), so a new hang fails the test with the file's name instead of
//! hanging CI.

use mobistack::fuzzing::{run_target, Error, TARGETS};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// `target/file` of each regression that still panics, hangs or is a finding. Empty: every
/// finding of the fuzz runs so far is fixed (the fio end-of-run assertion, the filebench
/// zero-time flowops, the replay time overflow, SQLite's runaway statement and empty statements,
/// the fileset size sum); a new finding goes in fuzz/regressions/ and here until its fix lands.
const KNOWN_FAILURES: &[&str] = &[];

/// Wall time one input may take (the slowest seed takes well under a second in the test build).
const TIME_LIMIT: Duration = Duration::from_secs(20);

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .map(|e| e.expect("a directory entry").path())
                .collect()
        })
        .unwrap_or_default();
    files.retain(|path| path.is_file());
    files.sort();
    files
}

/// Runs one input in a thread of its own, bounded by [`TIME_LIMIT`]: Ok with the product's
/// rejection if any, Err with the panic, the finding or the hang.
fn replay(target: &'static str, path: &Path) -> Result<Option<String>, String> {
    let data = std::fs::read(path).expect("readable corpus file");
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(run_one(target, &data));
    });
    match receive.recv_timeout(TIME_LIMIT) {
        Ok(result) => result,
        Err(_) => Err(format!("hang: still running after {TIME_LIMIT:?}")),
    }
}

fn run_one(target: &str, data: &[u8]) -> Result<Option<String>, String> {
    match std::panic::catch_unwind(|| run_target(target, data)) {
        Ok(Some(Err(Error::Finding(message)))) => Err(format!("finding: {message}")),
        Ok(Some(Err(Error::Input(message)))) => Ok(Some(message)),
        Ok(Some(Ok(_))) => Ok(None),
        Ok(None) => panic!("unknown target {target}"),
        Err(panic) => Err(format!(
            "panic: {}",
            panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        )),
    }
}

#[test]
fn every_corpus_and_regression_input_runs_without_a_panic_or_a_finding() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut failures = Vec::new();
    let mut skipped = Vec::new();
    let mut count = 0;
    for target in TARGETS {
        let corpus = files(&root.join("corpus").join(target));
        assert!(!corpus.is_empty(), "fuzz/corpus/{target} has no seeds");
        let regressions = files(&root.join("regressions").join(target));
        for path in corpus.iter().chain(&regressions) {
            count += 1;
            let name = format!(
                "{target}/{}",
                path.file_name().unwrap_or_default().to_string_lossy()
            );
            if regressions.contains(path) && KNOWN_FAILURES.contains(&name.as_str()) {
                skipped.push(name);
                continue;
            }
            let started = Instant::now();
            let result = replay(target, path);
            let seconds = started.elapsed().as_secs_f64();
            match result {
                Ok(None) => eprintln!("{name}: ran, {seconds:.2} s"),
                Ok(Some(why)) => eprintln!("{name}: rejected, {seconds:.2} s: {why}"),
                Err(why) => failures.push(format!("{}: {why}", path.display())),
            }
        }
    }
    if !skipped.is_empty() {
        eprintln!(
            "not run: {} known failures (KNOWN_FAILURES in tests/fuzz_corpus.rs):",
            skipped.len()
        );
        for line in &skipped {
            eprintln!("  {line}");
        }
    }
    assert!(count > 0);
    for known in KNOWN_FAILURES {
        assert!(
            root.join("regressions").join(known).is_file(),
            "KNOWN_FAILURES names {known}, which is not in fuzz/regressions"
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
