//! Runs one of the engine's microbenchmarks (`src/sim/bench.rs`) and prints its rate, for
//! measuring the executor under a profiler: the work is fixed by the arguments, so
//! `valgrind --tool=cachegrind --cache-sim=no target/release/examples/engine_bench timer 200`
//! counts the same instructions on every run (divide by the events printed).
//!
//! `cargo build --release --example engine_bench`, then
//! `engine_bench timer|callback|wakeup ROUNDS`:
//! - `timer`: 1,000 tasks each sleeping ROUNDS times (ROUNDS x 1,000 timer events);
//! - `callback`: 1,000 chains of ROUNDS callback events each;
//! - `wakeup`: 100 pairs of tasks ping-ponging ROUNDS times (about 2 x ROUNDS x 100 wake-ups).

use mobistack::sim::bench;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rounds = args.get(1).and_then(|r| r.parse::<u64>().ok());
    let result = match (args.first().map(String::as_str), rounds) {
        (Some("timer"), Some(n)) => bench::timer_events(1_000, n),
        (Some("callback"), Some(n)) => bench::callback_events(1_000, n),
        (Some("wakeup"), Some(n)) => bench::wakeups(100, n),
        _ => {
            eprintln!("usage: engine_bench timer|callback|wakeup ROUNDS");
            std::process::exit(2);
        }
    };
    println!(
        "{}: {} {} in {:.3} s: {:.2} M {}",
        result.name,
        result.operations,
        if result.what == "events/s" {
            "events"
        } else {
            "wake-ups"
        },
        result.wall_seconds,
        result.per_second / 1e6,
        result.what
    );
}
