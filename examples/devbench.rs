//! Prints `device bench` for every built-in profile and the flush/discard latencies, as the CLI
//! would (`cargo run --release --example devbench [profile...]`).

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--fit") && args.len() == 5 {
        match mobistack::dev::bench::fit_command(&args[1], &args[2], &args[3], &args[4]) {
            Ok(((text, _), unreached)) => {
                println!("{text}");
                for miss in unreached {
                    eprintln!("not reached: {miss}");
                }
            }
            Err(error) => eprintln!("error: {error}"),
        }
        return;
    }
    if args.first().map(String::as_str) == Some("--list") {
        print!("{}", mobistack::dev::bench::list_report().0);
        return;
    }
    if args.first().map(String::as_str) == Some("--json") && args.len() == 2 {
        match mobistack::dev::bench::bench_report(&args[1]) {
            Ok((_, value)) => println!("{value:#}"),
            Err(error) => eprintln!("error: {error}"),
        }
        return;
    }
    if args.first().map(String::as_str) == Some("--speed") {
        speed();
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

/// Wall time to push 8 GiB of 512 KiB writes (QD32) through the default scenario device, then
/// 8 GiB of random 4 KiB writes over a full device (GC-heavy).
fn speed() {
    use mobistack::dev::bench::SplitMix64;
    use mobistack::dev::{BlockDevice, DevRequest, DeviceConfig, IoFlags, IoOp};
    for (profile, random) in [("emmc-5.0", false), ("ufs-3.1", false), ("emmc-5.1", true)] {
        let started = std::time::Instant::now();
        let config = DeviceConfig {
            profile: profile.into(),
            fill: if random { 1.0 } else { 0.5 },
            ..DeviceConfig::default()
        };
        let mut device = config.build_flash().unwrap();
        let built = started.elapsed();
        let sectors: u32 = if random { 8 } else { 1024 };
        let total = 8u64 * 1024 * 1024 * 1024 / (u64::from(sectors) * 512);
        let region = device.capacity_sectors() / u64::from(sectors);
        let mut rng = SplitMix64(5);
        let (mut issued, mut done, mut now) = (0u64, 0u64, 0u64);
        let mut completions = Vec::new();
        while done < total {
            while issued < total && device.in_flight() < device.queue_depth() {
                let slot = if random {
                    rng.next_u64() % region
                } else {
                    issued % region
                };
                let request = DevRequest {
                    tag: issued,
                    op: IoOp::Write,
                    sector: slot * u64::from(sectors),
                    nr_sectors: sectors,
                    flags: IoFlags::default(),
                    foreground: false,
                };
                device.submit(now, request);
                issued += 1;
            }
            now = device.next_event().unwrap();
            device.advance(now, &mut completions);
            done += completions.len() as u64;
            completions.clear();
        }
        let stats = device.stats();
        println!(
            "{profile}: 8 GiB of {} writes: virtual {:.1} s ({:.1} MB/s), wall {:.2} s (build {:.2} s), GC copied {} pages, erased {} blocks",
            if random { "random 4 KiB" } else { "512 KiB sequential" },
            now as f64 / 1e9,
            8.0 * 1073.741824 / (now as f64 / 1e9),
            started.elapsed().as_secs_f64(),
            built.as_secs_f64(),
            stats.ftl.gc_units_copied,
            stats.ftl.blocks_erased
        );
    }
}
