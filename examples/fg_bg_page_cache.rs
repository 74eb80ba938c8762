//! A background writer and a foreground reader over the page cache, printed as the results
//! table plus the blocked-time breakdown by reason.
//!
//! `cargo run --release --example fg_bg_page_cache -- [background GiB] [seconds] [linux|android]`
//! (defaults: 2 GiB, 60 s, android).

use mobistack::mm::VmConfig;
use mobistack::report::results::{ScenarioResults, RESULTS_SCHEMA, RESULTS_VERSION};
use mobistack::units::NS_PER_SEC;
use mobistack::workload::file::example::{render_blocked, run, FgBgExample};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let gib: f64 = args.first().map_or(2.0, |a| a.parse().expect("GiB"));
    let seconds: u64 = args.get(1).map_or(60, |a| a.parse().expect("seconds"));
    let vm = match args.get(2).map(String::as_str) {
        Some("linux") => VmConfig::default(),
        None | Some("android") => VmConfig::android(),
        Some(other) => panic!("unknown VM preset `{other}` (linux or android)"),
    };
    let example = FgBgExample {
        vm,
        duration: seconds * NS_PER_SEC,
        background_write: (gib * (1u64 << 30) as f64) as u64,
        ..FgBgExample::default()
    };
    let wall = std::time::Instant::now();
    let result = run(&example, 1);
    let elapsed = wall.elapsed();
    let results = ScenarioResults {
        schema: RESULTS_SCHEMA,
        version: RESULTS_VERSION,
        scenario: "fg-bg-page-cache".into(),
        description: "background seq-write + foreground random reads + fsync messenger".into(),
        duration_ns: example.duration,
        runs: vec![result.clone()],
    };
    println!("{}", mobistack::report::table::render(&results));
    println!("blocked time by reason:\n{}", render_blocked(&result));
    for (counter, value) in &result.counters {
        println!("{counter:32} {value}");
    }
    eprintln!(
        "simulated {} s in {:.2} s of wall time ({} events)",
        seconds,
        elapsed.as_secs_f64(),
        result.events
    );
}
