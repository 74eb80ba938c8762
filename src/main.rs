//! The `mobistack` command: parses arguments, calls the library, prints. Nothing else lives here.

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use mobistack::report::table;
use mobistack::run::{self, RunOptions};
use mobistack::scenario;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Writes to stdout; a closed pipe (`mobistack ... | head`) ends the program quietly instead of
/// panicking the way `print!` does.
fn emit(text: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout
        .write_all(text.as_bytes())
        .and_then(|_| stdout.flush())
    {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: cannot write to stdout: {e}");
        std::process::exit(i32::from(EXIT_RUN_FAILED));
    }
}

macro_rules! out {
    ($($arg:tt)*) => { emit(&format!($($arg)*)) };
}

macro_rules! outln {
    () => { emit("\n") };
    ($($arg:tt)*) => { emit(&(format!($($arg)*) + "\n")) };
}

#[derive(Parser)]
#[command(
    name = "mobistack",
    version,
    about = "Deterministic full-stack simulator of the smartphone storage I/O stack",
    long_about = "mobistack simulates apps, page cache, file system, block layer and storage \
                  device in virtual time, so that a slow system call can be explained and the \
                  papers' techniques compared side by side. See README.md and docs/."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a scenario (a file path, or the name of a built-in scenario) and print its results.
    Run {
        /// Scenario file, or built-in scenario name (see `mobistack list`).
        scenario: String,
        /// Run with this seed instead of the scenario's seeds (repeatable).
        #[arg(long = "seed", value_name = "N")]
        seeds: Vec<u64>,
        /// Run only this variant.
        #[arg(long, value_name = "NAME")]
        variant: Option<String>,
        /// Also write the full results (every histogram and counter) as JSON to FILE.
        #[arg(long, value_name = "FILE")]
        out: Option<std::path::PathBuf>,
        /// Print the results as one JSON object on stdout instead of the table.
        #[arg(long)]
        json: bool,
        /// Worker threads for independent runs (variants x seeds); 0 = one per core.
        #[arg(long, default_value_t = 0, value_name = "N")]
        threads: usize,
        /// Also print the blocked-time breakdown: every wait reason of every operation.
        #[arg(long)]
        breakdown: bool,
        /// Write a blkparse-format trace of the block layer to FILE (FILE.<variant>.<seed> when
        /// the scenario has several runs).
        #[arg(long, value_name = "FILE")]
        blktrace: Option<std::path::PathBuf>,
    },
    /// List the built-in scenarios.
    List {
        /// Print as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Check a scenario file without running it.
    Validate {
        /// Scenario file, or built-in scenario name.
        scenario: String,
        /// Print the resolved variants as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Storage device models: list the profiles, benchmark one, fit one to your measurements.
    #[command(subcommand)]
    Device(DeviceCommand),
    /// Run a fio job file (a supported subset of fio's options) against a device profile under an
    /// elevator, and print per-job latency and throughput with merge statistics.
    Fio {
        /// The job file.
        jobfile: std::path::PathBuf,
        /// Device profile (see `mobistack device list`).
        #[arg(long, default_value = "emmc-5.1", value_name = "PROFILE")]
        device: String,
        /// I/O scheduler: noop, deadline, cfq or mq-deadline.
        #[arg(long, default_value = "cfq", value_name = "NAME")]
        elevator: String,
        /// Write a blkparse-format trace of the block layer to FILE.
        #[arg(long, value_name = "FILE")]
        blktrace: Option<std::path::PathBuf>,
        #[arg(long, default_value_t = 1, value_name = "N")]
        seed: u64,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run a filebench workload (a `.f` file in filebench's WML, or a built-in personality:
    /// fileserver, webserver, varmail, webproxy, fivestreamread) on the simulated stack and print
    /// filebench's own output (per-flowop breakdown and IO Summary).
    Filebench {
        /// The `.f` file, or the name of a built-in personality.
        file: String,
        /// Take the stack from the `[stack]` table of this TOML file (a scenario file works).
        #[arg(long, value_name = "FILE")]
        stack: Option<std::path::PathBuf>,
        /// Device profile (see `mobistack device list`); replaces the stack's.
        #[arg(long, value_name = "PROFILE")]
        device: Option<String>,
        /// I/O scheduler: noop, deadline, cfq or mq-deadline; replaces the stack's.
        #[arg(long, value_name = "NAME")]
        elevator: Option<String>,
        /// Set a script variable, replacing its `set $NAME=...` (repeatable), e.g. --set nfiles=1000.
        #[arg(long = "set", value_name = "NAME=VALUE")]
        set: Vec<String>,
        /// Run time in seconds, replacing the script's `run N` (required if it has no `run`).
        #[arg(long, value_name = "SECONDS")]
        runtime: Option<u64>,
        #[arg(long, default_value_t = 1, value_name = "N")]
        seed: u64,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Replay a block trace (blkparse text, Pixel 6a CSV, DiskSim/MQSim ASCII) on a device model
    /// alone, open loop at its timestamps or closed loop at a queue depth, and print MQSim's
    /// summary (requests, device response time, end-to-end delay) with percentiles.
    Replay {
        /// The trace file.
        trace: std::path::PathBuf,
        /// Device profile (see `mobistack device list`), or a TOML file with a [stack.device]
        /// table (as `mobistack device fit` prints).
        #[arg(long, default_value = "emmc-5.1", value_name = "PROFILE")]
        device: String,
        /// Exported capacity, replacing the profile's (e.g. 16GiB).
        #[arg(long, value_name = "SIZE")]
        capacity: Option<String>,
        /// Fraction of the logical space written before the replay (default 0.5).
        #[arg(long, value_name = "FRACTION")]
        fill: Option<f64>,
        /// blkparse, pixel or disksim (detected from the first lines when not given).
        #[arg(long, value_name = "FORMAT")]
        format: Option<String>,
        /// blkparse: the action replayed, D (requests issued to the driver), Q (bios) or C.
        #[arg(long, default_value = "D", value_name = "ACTION")]
        event: String,
        /// DiskSim: the unit of the time column: s, ms (DiskSim's), us, ns (MQSim's traces).
        #[arg(long, default_value = "ms", value_name = "UNIT")]
        time_unit: String,
        /// Open loop: multiply the trace's times (0.5 replays twice as fast).
        #[arg(long, default_value_t = 1.0, value_name = "X")]
        time_scale: f64,
        /// Closed loop at this many requests outstanding (timestamps ignored).
        #[arg(long, value_name = "N")]
        queue_depth: Option<usize>,
        /// Fold sectors beyond the device's capacity into it instead of failing.
        #[arg(long)]
        wrap: bool,
        /// Skip (and count) lines that do not parse instead of failing.
        #[arg(long)]
        skip_bad_lines: bool,
        /// Stop after this many requests.
        #[arg(long, value_name = "N")]
        max_requests: Option<u64>,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Measure the engine (timer events and task wake-ups per second of wall time, on one core),
    /// the whole stack (virtual seconds simulated per wall second with 8 GiB of writeback) and
    /// device-only trace replay (requests per wall second).
    Bench {
        /// Multiply the amount of work (1 takes about a second in a release build).
        #[arg(long, default_value_t = 4, value_name = "N")]
        scale: u64,
        /// Print as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum DeviceCommand {
    /// List the built-in device profiles.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Sequential (512 KiB) and random (4 KiB) reads and writes at queue depth 1 and 32, beside the
    /// profile's published figures.
    Bench {
        /// Profile name (see `mobistack device list`).
        profile: String,
        #[arg(long)]
        json: bool,
    },
    /// Fit a profile to four measured numbers and print it as a scenario `[stack.device]` table.
    Fit {
        /// Sequential read bandwidth, e.g. 250MB/s.
        #[arg(long, value_name = "BW")]
        seq_read: String,
        /// Sequential write bandwidth, e.g. 125MB/s.
        #[arg(long, value_name = "BW")]
        seq_write: String,
        /// Random 4 KiB read IOPS, e.g. 11000.
        #[arg(long, value_name = "IOPS")]
        rand_read: String,
        /// Random 4 KiB write IOPS, e.g. 13000.
        #[arg(long, value_name = "IOPS")]
        rand_write: String,
        #[arg(long)]
        json: bool,
    },
    /// Flush, FUA and discard latencies of every profile on an idle device.
    Latencies {
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Run {
            scenario,
            seeds,
            variant,
            out,
            json,
            threads,
            breakdown,
            blktrace,
        } => cmd_run(
            &scenario,
            RunArgs {
                seeds,
                variant,
                out,
                json,
                threads,
                breakdown,
                blktrace,
            },
        ),
        Command::List { json } => cmd_list(json),
        Command::Validate { scenario, json } => cmd_validate(&scenario, json),
        Command::Bench { scale, json } => cmd_bench(scale, json),
        Command::Replay {
            trace,
            device,
            capacity,
            fill,
            format,
            event,
            time_unit,
            time_scale,
            queue_depth,
            wrap,
            skip_bad_lines,
            max_requests,
            json,
        } => {
            let args = mobistack::workload::replay::device::CommandArgs {
                trace,
                device,
                capacity,
                fill,
                format,
                event,
                time_unit,
                time_scale,
                queue_depth,
                wrap,
                skip_bad_lines,
                max_requests,
            };
            print_report(
                mobistack::workload::replay::device::run_command(&args)
                    .map(|report| (report.table(), report.json())),
                json,
            )
        }
        Command::Filebench {
            file,
            stack,
            device,
            elevator,
            set,
            runtime,
            seed,
            json,
        } => cmd_filebench(
            &file,
            stack.as_deref(),
            device.as_deref(),
            elevator.as_deref(),
            &set,
            runtime,
            seed,
            json,
        ),
        Command::Device(command) => cmd_device(command),
        Command::Fio {
            jobfile,
            device,
            elevator,
            blktrace,
            seed,
            json,
        } => cmd_fio(&jobfile, &device, &elevator, blktrace, seed, json),
    }
}

#[allow(clippy::too_many_arguments)]
fn cmd_filebench(
    file: &str,
    stack: Option<&std::path::Path>,
    device: Option<&str>,
    elevator: Option<&str>,
    set: &[String],
    runtime: Option<u64>,
    seed: u64,
    json: bool,
) -> ExitCode {
    use mobistack::workload::filebench as fb;
    let prepared = fb::read_script(file).and_then(|(name, text)| {
        let stack = fb::command_line_stack(stack, device, elevator)?;
        let overrides = fb::parse_overrides(set)?;
        Ok((name, text, stack, overrides))
    });
    let (name, text, stack, overrides) = match prepared {
        Ok(prepared) => prepared,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    let options = fb::RunFileOptions {
        seed,
        stack,
        overrides,
        runtime,
    };
    let report = match fb::run_file(&name, &text, &options) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    if json {
        outln!(
            "{}",
            serde_json::to_value(&report).expect("serializable report")
        );
    } else {
        outln!(
            "mobistack filebench: {} on {} under {}",
            report.script,
            report.device,
            report.elevator
        );
        for line in &report.log {
            outln!("{line}");
        }
    }
    if let Some(error) = &report.error {
        eprintln!("error: {error}");
        return ExitCode::from(EXIT_RUN_FAILED);
    }
    ExitCode::SUCCESS
}

fn cmd_fio(
    jobfile: &std::path::Path,
    profile: &str,
    elevator: &str,
    blktrace: Option<std::path::PathBuf>,
    seed: u64,
    json: bool,
) -> ExitCode {
    use mobistack::block::fio::{run_fio_file, FioOptions};
    let text = match std::fs::read_to_string(jobfile) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("error: cannot read {}: {e}", jobfile.display());
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    let config = mobistack::dev::DeviceConfig {
        profile: profile.to_string(),
        ..Default::default()
    };
    let device = match mobistack::dev::build_device(&config, seed) {
        Ok(device) => device,
        Err(e) => {
            eprintln!("error: --device {profile}: {e}");
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    let options = FioOptions {
        seed,
        trace: blktrace.is_some(),
    };
    let report = match run_fio_file(&text, device, elevator, options) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("error: {}: {e}", jobfile.display());
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    if let (Some(path), Some(trace)) = (&blktrace, &report.trace) {
        let written =
            std::fs::File::create(path).and_then(|mut file| trace.write_blkparse(&mut file));
        if let Err(e) = written {
            eprintln!("error: cannot write {}: {e}", path.display());
            return ExitCode::from(EXIT_RUN_FAILED);
        }
    }
    if json {
        outln!("{}", report.json());
    } else {
        out!("{}", report.table());
        if let (Some(path), Some(trace)) = (&blktrace, &report.trace) {
            outln!(
                "blktrace: {} events written to {}",
                trace.events().len(),
                path.display()
            );
        }
    }
    ExitCode::SUCCESS
}

/// Prints a library report as its table or its JSON; a `String` error is bad input.
fn print_report(report: Result<(String, serde_json::Value), String>, json: bool) -> ExitCode {
    match report {
        Ok((table, value)) => {
            if json {
                outln!("{value}");
            } else {
                out!("{table}");
                if !table.ends_with('\n') {
                    outln!();
                }
            }
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(EXIT_BAD_INPUT)
        }
    }
}

fn cmd_device(command: DeviceCommand) -> ExitCode {
    use mobistack::dev::bench;
    match command {
        DeviceCommand::List { json } => print_report(Ok(bench::list_report()), json),
        DeviceCommand::Bench { profile, json } => print_report(bench::bench_report(&profile), json),
        DeviceCommand::Fit {
            seq_read,
            seq_write,
            rand_read,
            rand_write,
            json,
        } => print_report(
            bench::fit_command(&seq_read, &seq_write, &rand_read, &rand_write),
            json,
        ),
        DeviceCommand::Latencies { json } => print_report(bench::flush_discard_report(), json),
    }
}

/// Exit status for bad input (a scenario that does not parse, an unknown variant).
const EXIT_BAD_INPUT: u8 = 2;
/// Exit status for a run that could not finish (e.g. a deadlock).
const EXIT_RUN_FAILED: u8 = 1;

fn load_or_report(name: &str) -> Result<scenario::Scenario, ExitCode> {
    scenario::load(name).map_err(|e| {
        eprintln!("error: {e}");
        ExitCode::from(EXIT_BAD_INPUT)
    })
}

/// A progress bar over virtual time on stderr, shown only on a terminal and only once the run
/// has taken more than a second.
struct Progress {
    bar: ProgressBar,
    started: Instant,
    shown: Mutex<bool>,
    per_job: Vec<AtomicU64>,
}

impl Progress {
    fn new(jobs: usize, duration_ns: u64) -> Arc<Self> {
        let bar = ProgressBar::with_draw_target(
            Some(jobs as u64 * duration_ns / 1_000_000),
            ProgressDrawTarget::hidden(),
        );
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:40} {percent:>3}% of virtual time ({msg})",
            )
            .expect("valid template"),
        );
        bar.set_message(format!("{jobs} run(s)"));
        Arc::new(Progress {
            bar,
            started: Instant::now(),
            shown: Mutex::new(false),
            per_job: (0..jobs).map(|_| AtomicU64::new(0)).collect(),
        })
    }

    fn update(&self, job: usize, now_ns: u64) {
        self.per_job[job].store(now_ns / 1_000_000, Ordering::Relaxed);
        let mut shown = self.shown.lock().expect("progress lock");
        if !*shown && self.started.elapsed().as_secs_f64() > 1.0 && std::io::stderr().is_terminal()
        {
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
            *shown = true;
        }
        drop(shown);
        let done: u64 = self.per_job.iter().map(|a| a.load(Ordering::Relaxed)).sum();
        self.bar.set_position(done);
    }
}

/// The options of `mobistack run`.
struct RunArgs {
    seeds: Vec<u64>,
    variant: Option<String>,
    out: Option<std::path::PathBuf>,
    json: bool,
    threads: usize,
    breakdown: bool,
    blktrace: Option<std::path::PathBuf>,
}

/// Writes each run's blktrace: to `path` for a single run, else to `path.<variant>.<seed>`.
fn write_blktraces(
    path: &std::path::Path,
    results: &mobistack::report::ScenarioResults,
) -> ExitCode {
    let single = results.runs.len() == 1;
    for run in &results.runs {
        let Some(trace) = &run.blktrace else {
            continue;
        };
        let target = if single {
            path.to_path_buf()
        } else {
            let mut name = path.as_os_str().to_owned();
            name.push(format!(".{}.{}", run.variant, run.seed));
            std::path::PathBuf::from(name)
        };
        let written =
            std::fs::File::create(&target).and_then(|mut file| trace.write_blkparse(&mut file));
        if let Err(e) = written {
            eprintln!("error: cannot write {}: {e}", target.display());
            return ExitCode::from(EXIT_RUN_FAILED);
        }
        eprintln!(
            "blktrace: {} events written to {}",
            trace.events().len(),
            target.display()
        );
    }
    ExitCode::SUCCESS
}

fn cmd_run(name: &str, args: RunArgs) -> ExitCode {
    let RunArgs {
        seeds,
        variant,
        out,
        json,
        threads,
        breakdown,
        blktrace,
    } = args;
    let mut scenario = match load_or_report(name) {
        Ok(s) => s,
        Err(code) => return code,
    };
    if blktrace.is_some() {
        for variant in &mut scenario.variants {
            variant.stack.block.blktrace = true;
        }
    }
    if let Some(variant) = variant {
        if let Err(message) = scenario.select_variant(&variant) {
            eprintln!("error: {message}");
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    }
    let mut options = RunOptions {
        seeds: (!seeds.is_empty()).then_some(seeds),
        threads,
        progress: None,
    };
    let progress = Progress::new(run::jobs(&scenario, &options).len(), scenario.duration);
    let hook = progress.clone();
    options.progress = Some(Arc::new(move |job, now| hook.update(job, now)));
    let results = run::run_scenario(&scenario, &options);
    progress.bar.finish_and_clear();
    let results = match results {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_RUN_FAILED);
        }
    };
    if let Some(path) = &blktrace {
        let code = write_blktraces(path, &results);
        if code != ExitCode::SUCCESS {
            return code;
        }
    }
    let json_text = results.to_json();
    if let Some(path) = out {
        if let Err(e) = std::fs::write(&path, &json_text) {
            eprintln!("error: cannot write {}: {e}", path.display());
            return ExitCode::from(EXIT_RUN_FAILED);
        }
    }
    if json {
        out!("{json_text}");
    } else {
        out!("{}", table::render(&results));
        if breakdown {
            out!("\n{}", table::render_breakdown(&results));
        }
    }
    ExitCode::SUCCESS
}

fn cmd_list(json: bool) -> ExitCode {
    let mut entries = Vec::new();
    for builtin in scenario::builtin::BUILTINS {
        let description = scenario::parse(builtin.name, builtin.source)
            .map(|s| s.description)
            .unwrap_or_else(|e| format!("(invalid: {e})"));
        entries.push((builtin.name, description));
    }
    if json {
        let value: Vec<_> = entries
            .iter()
            .map(
                |(name, description)| serde_json::json!({"name": name, "description": description}),
            )
            .collect();
        outln!("{}", serde_json::json!({ "scenarios": value }));
    } else {
        let mut rows = vec![vec!["scenario".to_string(), "description".to_string()]];
        rows.extend(entries.iter().map(|(n, d)| vec![n.to_string(), d.clone()]));
        out!("{}", table::align(&rows));
    }
    ExitCode::SUCCESS
}

fn cmd_validate(name: &str, json: bool) -> ExitCode {
    let scenario = match load_or_report(name) {
        Ok(s) => s,
        Err(code) => return code,
    };
    if json {
        let value = serde_json::json!({
            "scenario": scenario.name,
            "file": scenario.file,
            "valid": true,
            "seeds": scenario.seeds,
            "duration_ns": scenario.duration,
            "apps": scenario.apps.iter().map(|a| a.name.get_ref().clone()).collect::<Vec<_>>(),
            "variants": scenario.variants,
            "timeline": scenario.timeline,
        });
        outln!("{value}");
    } else {
        outln!(
            "{}: ok: scenario `{}`, {} app(s), {} timeline event(s), {} variant(s) ({}), {} seed(s)",
            scenario.file,
            scenario.name,
            scenario.apps.len(),
            scenario.timeline.len(),
            scenario.variants.len(),
            scenario
                .variants
                .iter()
                .map(|v| v.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            scenario.seeds.len()
        );
    }
    ExitCode::SUCCESS
}

fn cmd_bench(scale: u64, json: bool) -> ExitCode {
    if cfg!(debug_assertions) {
        eprintln!("note: this is a debug build; benchmark with `cargo run --release -- bench`");
    }
    let mut results = mobistack::sim::bench::run_all(scale);
    // 8 GiB written in the background over 240 s of virtual time through the whole stack.
    results.push(mobistack::run::bench_stack(8, 240));
    // A DiskSim trace of 4 KiB random reads replayed on the device model alone.
    results.push(mobistack::workload::replay::device::bench(250_000 * scale));
    if json {
        outln!("{}", serde_json::json!({ "bench": results }));
    } else {
        let mut rows = vec![["benchmark", "operations", "wall s", "rate"]
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()];
        for r in &results {
            rows.push(vec![
                r.name.to_string(),
                r.operations.to_string(),
                format!("{:.3}", r.wall_seconds),
                if r.per_second >= 1e6 {
                    format!("{:.2} M {}", r.per_second / 1e6, r.what)
                } else {
                    format!("{:.1} {}", r.per_second, r.what)
                },
            ]);
        }
        out!("{}", table::align(&rows));
    }
    ExitCode::SUCCESS
}
