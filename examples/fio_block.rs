//! Runs a fio job file against a fixed-latency test device under an elevator and prints the
//! per-job table, the merge statistics and, optionally, writes a blkparse-format trace.
//!
//! ```text
//! cargo run --example fio_block -- examples/fio/fg_read_bg_write.fio cfq [--blktrace FILE]
//! ```
//!
//! The device is `FixedLatencyDevice` (one slot, 100 us per command plus 90 MB/s transfer, an
//! eMMC 5.0-like sequential write rate from REFERENCES.md) until the flash models land; the CLI
//! will select real device profiles.

use mobistack::block::fio::{run_fio_file, FioOptions};
use mobistack::dev::fixed::FixedLatencyDevice;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        eprintln!("usage: fio_block <jobfile> <elevator> [--blktrace FILE]");
        std::process::exit(2);
    }
    let text = match std::fs::read_to_string(&args[0]) {
        Ok(text) => text,
        Err(error) => {
            eprintln!("cannot read {}: {error}", args[0]);
            std::process::exit(1);
        }
    };
    let trace_path = args
        .iter()
        .position(|arg| arg == "--blktrace")
        .and_then(|index| args.get(index + 1));
    let device = FixedLatencyDevice::new(1, 100_000, 90_000_000);
    let options = FioOptions {
        seed: 1,
        trace: trace_path.is_some(),
    };
    match run_fio_file(&text, Box::new(device), &args[1], options) {
        Ok(report) => {
            print!("{}", report.table());
            if let (Some(path), Some(trace)) = (trace_path, report.trace.as_ref()) {
                let mut file = std::fs::File::create(path).expect("create trace file");
                trace.write_blkparse(&mut file).expect("write trace");
                println!(
                    "blktrace: {} events written to {path}",
                    trace.events().len()
                );
            }
        }
        Err(error) => {
            eprintln!("error: {error}");
            std::process::exit(1);
        }
    }
}
