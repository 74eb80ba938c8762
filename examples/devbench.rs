//! Prints `device bench` for every built-in profile and the flush/discard latencies, as the CLI
//! would (`cargo run --release --example devbench [profile...]`).

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--fit") && args.len() == 5 {
        match mobistack::dev::bench::fit_command(&args[1], &args[2], &args[3], &args[4]) {
            Ok((text, _)) => println!("{text}"),
            Err(error) => eprintln!("error: {error}"),
        }
        return;
    }
    if args.first().map(String::as_str) == Some("--calibrate") {
        args.remove(0);
        calibrate(&args);
        return;
    }
    let names: Vec<String> = if args.is_empty() {
        mobistack::dev::profile_names()
            .iter()
            .map(|s| s.to_string())
            .collect()
    } else {
        args
    };
    for name in &names {
        match mobistack::dev::bench::bench_report(name) {
            Ok((table, _)) => println!("{table}"),
            Err(error) => eprintln!("error: {error}"),
        }
    }
    match mobistack::dev::bench::flush_discard_report() {
        Ok((table, _)) => println!("{table}"),
        Err(error) => eprintln!("error: {error}"),
    }
}

/// Runs the fit procedure on built-in profiles against their own published figures and prints the
/// calibrated parameters (the procedure documented in `dev::profile`).
fn calibrate(names: &[String]) {
    use mobistack::dev::bench::{fit_profile, BenchSize};
    for profile in mobistack::dev::profile::builtin_profiles() {
        if !names.is_empty() && !names.contains(&profile.name) {
            continue;
        }
        let fitted = fit_profile(&profile, &profile.published, BenchSize::default(), 10).unwrap();
        println!(
            "{}: channel_bandwidth {} B/s, program_time {} ns, slc_program_time {} ns, read_overhead {} ns, write_overhead {} ns",
            fitted.name,
            fitted.channel_bandwidth,
            fitted.program_time,
            fitted.slc_program_time,
            fitted.read_overhead,
            fitted.write_overhead
        );
    }
}
