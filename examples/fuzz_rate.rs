//! Runs every file of a corpus directory through a fuzz target's harness function
//! (`mobistack::fuzzing::run_target`), in process and in the order of the file names, and prints
//! the executions per second and the slowest inputs: the fuzzers' per-execution cost without
//! libFuzzer, for profiling (`perf record`) and for before/after comparisons
//! (docs/fuzzing.md, "The rate").
//!
//! ```sh
//! cargo build --release --example fuzz_rate
//! target/release/examples/fuzz_rate fio_run fuzz/corpus/fio_run [ROUNDS]
//! ```

use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        eprintln!("usage: fuzz_rate TARGET CORPUS_DIR [ROUNDS]");
        std::process::exit(2);
    }
    let (target, dir) = (&args[0], &args[1]);
    let rounds: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
    let mut files: Vec<_> = match std::fs::read_dir(dir) {
        Ok(entries) => entries.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        Err(error) => {
            eprintln!("{dir}: {error}");
            std::process::exit(2);
        }
    };
    files.sort();
    let inputs: Vec<(String, Vec<u8>)> = files
        .iter()
        .filter_map(|path| Some((path.display().to_string(), std::fs::read(path).ok()?)))
        .collect();
    let mut slowest: Vec<(f64, String, String)> = Vec::new();
    let (mut ran, mut rejected, mut limited) = (0u64, 0u64, 0u64);
    let start = Instant::now();
    for round in 0..rounds {
        for (name, data) in &inputs {
            let one = Instant::now();
            let outcome = mobistack::fuzzing::run_target(target, data);
            let seconds = one.elapsed().as_secs_f64();
            let what = match &outcome {
                None => {
                    eprintln!("unknown target {target}");
                    std::process::exit(2);
                }
                Some(Ok(r)) if r.event_limit_reached => {
                    limited += 1;
                    "event limit".to_string()
                }
                Some(Ok(_)) => {
                    ran += 1;
                    "ran".to_string()
                }
                Some(Err(e)) => {
                    rejected += 1;
                    let text = e.to_string();
                    text.chars().take(60).collect()
                }
            };
            if round == 0 {
                slowest.push((seconds, name.clone(), what));
            }
        }
    }
    let wall = start.elapsed().as_secs_f64();
    let executions = (inputs.len() * rounds) as f64;
    println!(
        "{target}: {} inputs x {rounds}: {executions} executions in {wall:.3} s, {:.0} exec/s, \
         {:.3} ms each (ran {ran}, event limit {limited}, rejected {rejected})",
        inputs.len(),
        executions / wall,
        1e3 * wall / executions,
    );
    slowest.sort_by(|a, b| b.0.total_cmp(&a.0));
    let total: f64 = slowest.iter().map(|s| s.0).sum();
    println!("slowest of round 1 (of {total:.3} s):");
    for (seconds, name, what) in slowest.iter().take(10) {
        println!("  {:8.2} ms  {name}  ({what})", seconds * 1e3);
    }
}
