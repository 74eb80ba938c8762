//! The `mobistack` command: parses arguments, calls the library, prints. Nothing else lives here.

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use mobistack::report::table;
use mobistack::run::{self, RunOptions};
use mobistack::scenario::{self, eras};
use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
        /// Also write the full results (every histogram and counter) as JSON to FILE (`-`:
        /// standard output, instead of the table).
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
        /// Also print the block I/O account by purpose: per app and system call (or kernel
        /// thread), the bios, reads, writes, bytes, cache flushes and FUA writes of each purpose
        /// (data, inode, bitmaps, directory, extent, journal descriptor / metadata / commit /
        /// superblock, checkpoint; F2FS's node, nat, sit, ssa, cp-pack, gc-move; discard, flush).
        #[arg(long)]
        io_account: bool,
        /// Write a blkparse-format trace of the block layer to FILE (FILE.<variant>.<seed> when
        /// the scenario has several runs).
        #[arg(long, value_name = "FILE")]
        blktrace: Option<std::path::PathBuf>,
        /// Write a Perfetto trace of each run to FILE (FILE.<variant>.<seed> when the scenario
        /// has several runs), for ui.perfetto.dev or trace_processor: per app and task its
        /// system calls with their waits nested, per device its requests (queued, on the
        /// device) with flow arrows from the waits on them, the foreground app, jbd2 commits,
        /// flusher passes and counters (dirty/writeback/free memory, queue depths, throughput).
        #[arg(long, value_name = "FILE")]
        perfetto: Option<std::path::PathBuf>,
        /// Only trace what overlaps this window of virtual time, e.g. `2s..4.5s` (either end
        /// may be left out: `..3s`, `10s..`).
        #[arg(long, value_name = "START..END", requires = "perfetto")]
        perfetto_window: Option<String>,
        /// Bound on the records of each trace (waits, slices, requests, counter samples); past
        /// it records are dropped and the command says how many.
        #[arg(long, value_name = "N", default_value_t = mobistack::sim::timeline::DEFAULT_MAX_RECORDS, requires = "perfetto")]
        perfetto_max_events: usize,
        /// Period of the trace's counter samples (0: none). A period that would take more
        /// samples over the traced time than --perfetto-max-events is refused (the error names
        /// the smallest period that fits).
        #[arg(
            long,
            value_name = "DURATION",
            default_value = "10ms",
            requires = "perfetto"
        )]
        perfetto_counter_period: String,
        /// Write an HTML report of the results to FILE: one self-contained page (no network
        /// at view time) with latency CDFs, blocked-time breakdowns, throughput over time and
        /// the slowest operations explained, per variant side by side (as `mobistack report`).
        /// `-`: standard output, instead of the table.
        #[arg(long, value_name = "FILE")]
        html: Option<std::path::PathBuf>,
        /// Write the results as tidy CSV files into directory DIR (created if missing), for
        /// pandas and the like: latency.csv (a row per variant x seed x app x op x percentile),
        /// ops.csv, waits.csv (a row per wait reason), throughput.csv (a row per period). Not `-`:
        /// these are four files.
        #[arg(long, value_name = "DIR")]
        csv: Option<std::path::PathBuf>,
        /// Check the page cache's, the journal's and the block layer's invariants as the runs
        /// go (always on in debug builds); a violation ends the run with an error.
        #[arg(long)]
        check: bool,
        /// Latency columns of the table: a comma-separated list of min, mean, p50, p90, p99,
        /// p99.9, p99.99, max; alone, every one of them. Default: mean,p50,p90,p99,max.
        #[arg(long, value_name = "LIST", num_args = 0..=1, default_missing_value = "all")]
        percentiles: Option<String>,
    },
    /// Write the HTML report of a results file (`mobistack run --out RESULTS.json`): one
    /// self-contained page with, per variant side by side, latency CDFs per app and system call
    /// (log axis), blocked time by wait reason and by layer, throughput over time, the slowest
    /// operations explained and the scenario.
    Report {
        /// The results file (JSON of `mobistack run --out`).
        results: std::path::PathBuf,
        /// Where to write the report (`-`: standard output).
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: std::path::PathBuf,
        /// The scenario file (or built-in name) to show; default: the built-in scenario of the
        /// results' name, if there is one.
        #[arg(long, value_name = "SCENARIO")]
        scenario: Option<String>,
    },
    /// Compare two results: per app and system call, the change in p50, p99 and max latency
    /// and in throughput from BASE to OTHER, with the wait reasons whose blocked time per
    /// operation changed most. Each side is a results file (`run --out`), `FILE:VARIANT` for
    /// a file with several variants.
    Compare {
        /// The base results: FILE or FILE:VARIANT.
        base: String,
        /// The results compared to it: FILE or FILE:VARIANT.
        other: String,
        /// Print the comparison as JSON.
        #[arg(long)]
        json: bool,
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
        /// I/O scheduler (`none` is `noop`).
        #[arg(long, default_value = "cfq", value_name = "NAME", value_parser = elevator_parser())]
        elevator: String,
        /// Write a blkparse-format trace of the block layer to FILE.
        #[arg(long, value_name = "FILE")]
        blktrace: Option<std::path::PathBuf>,
        /// Seed of the run's random numbers (random offsets, mixes, the device model): the same
        /// job file, device, elevator and seed give the same results.
        #[arg(long, default_value_t = 1, value_name = "N")]
        seed: u64,
        /// Output format, as fio's: normal (fio's text), json (fio's JSON schema) or json+
        /// (with latency histogram bins, for fio_jsonplus_clat2csv).
        #[arg(long, default_value = "normal", value_name = "FORMAT")]
        output_format: String,
        /// Same as --output-format=json.
        #[arg(long)]
        json: bool,
    },
    /// Size the subregion scheduler (seed 003 §5.1): random reads of 1..32 threads within one
    /// region of 128 MiB..8 GiB on the device model; prints the curve and the chosen subregion
    /// size and batch.
    TuneSubregions {
        /// Device profile (see `mobistack device list`).
        #[arg(long, default_value = "sata-ssd", value_name = "PROFILE")]
        device: String,
        /// Seed of the run's random choices (the same seed gives the same output).
        #[arg(long, default_value_t = 1, value_name = "N")]
        seed: u64,
        /// Print as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run a paper's experiments and print each headline beside the simulated figure (the
    /// paper's relative effect, the simulation's, their ratio, whether the direction holds).
    Reproduce {
        /// The paper: qasio, fasttrack, context-aware, joj or mobifs.
        paper: String,
        /// Print as JSON.
        #[arg(long)]
        json: bool,
        /// Only the runs the headlines need and M1's tables (QASIO: about a minute in release
        /// on two cores; the full reproduction, with M2-M5 and Scenarios A-C, several).
        #[arg(long)]
        quick: bool,
        /// Run every cell over seeds: N (seeds 1..=N) or a list (`1,7,9`). Each seed moves
        /// every app's start up to 0.5 s later (drawn from the seed); each figure is printed as
        /// the mean with its min-max, and each headline's ratio with its min-max. Default: one
        /// run with each scenario's own seed and no jitter.
        #[arg(long, value_name = "N|LIST")]
        seeds: Option<String>,
    },
    /// Crash a scenario's run at N instants and check what survives (issues 20, 45): each app's
    /// files in a state it had (per VCT under MobiFS), SQLite's integrity_check on the recovered
    /// database, fsynced data on ext4, no journal transaction replayed without all its log
    /// blocks, and renamed-over files old or new, whole. The run is simulated once per variant;
    /// each crash state is built from its recorded device writes, and the journal recovered from
    /// the blocks that survived. Exits 3 when a check finds violations.
    Crashcheck {
        /// Scenario name (see `mobistack list`) or path to a `.toml` file.
        scenario: String,
        /// Crash instants per variant: three quarters at write and flush boundaries, the rest
        /// uniform over the run.
        #[arg(long, default_value_t = 1000, value_name = "N")]
        points: usize,
        /// The run's seed (default: the scenario's first).
        #[arg(long, value_name = "N")]
        seed: Option<u64>,
        /// Check one variant only (default: every variant).
        #[arg(long, value_name = "NAME")]
        variant: Option<String>,
        /// MiB of page versions the run may keep for the files under test.
        #[arg(long, default_value_t = 1024, value_name = "MIB")]
        budget: u64,
        /// Print as JSON.
        #[arg(long)]
        json: bool,
        /// Instead of checking, print crash point N (0-based, of the same `--points` and
        /// `--seed`) in words: the device's blocks that survived and were lost, by kind, the
        /// journal as recovery reads it, what it replayed, each file under test page by page,
        /// and the checks' verdicts.
        #[arg(long, value_name = "N", conflicts_with = "json")]
        dump_point: Option<usize>,
        /// Torn multi-block requests: an unflushed request may reach flash in part (a prefix
        /// of its blocks) instead of whole.
        #[arg(long)]
        torn: bool,
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
        /// I/O scheduler; replaces the stack's.
        #[arg(long, value_name = "NAME", value_parser = elevator_parser())]
        elevator: Option<String>,
        /// Set a script variable, replacing its `set $NAME=...` (repeatable), e.g. --set nfiles=1000.
        #[arg(long = "set", value_name = "NAME=VALUE")]
        set: Vec<String>,
        /// Run time in seconds, replacing the script's `run N` (required if it has no `run`).
        #[arg(long, value_name = "SECONDS")]
        runtime: Option<u64>,
        /// Seed of the run's random streams (file sizes, picks, random offsets); the same seed
        /// gives the same output.
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
        /// Open loop: multiply the trace's times (0.5 replays twice as fast); positive and
        /// finite; a replay spans at most 365 days of virtual time. Not with --queue-depth.
        #[arg(
            long,
            default_value_t = 1.0,
            value_name = "X",
            conflicts_with = "queue_depth"
        )]
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
    /// Measure the engine (timer events, callback events and task wake-ups per second of wall
    /// time, on one core), the whole stack (virtual seconds simulated and pages written back per
    /// wall second with 8 GiB of writeback), QASIO's M1, real SQLite's VFS calls and INSERT
    /// statements, device-only trace replay (requests per wall second), fio through the block
    /// layer (block requests per wall second) and many small runs (one-second runs of QASIO's M1
    /// per wall second, and their stack built alone).
    Bench {
        /// Multiply the amount of work (1 takes about a second in a release build).
        #[arg(long, default_value_t = 4, value_name = "N")]
        scale: u64,
        /// Run only the benchmarks whose name starts with PREFIX (`sqlite`, `stack`, `timer`, ...).
        #[arg(long, value_name = "PREFIX")]
        only: Option<String>,
        /// Print as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run a scenario on this machine's real kernel (needs root): ext4 from [stack.fs] on a
    /// loop device, [stack.block] and [stack.vm] through sysfs and sysctl, the apps as threads
    /// issuing the same system calls; block events from tracefs. Everything is restored after
    /// the run, also on error or Ctrl-C. Results in the JSON of `run --out`. See
    /// docs/validation.md for what is supported.
    Real(RealArgs),
    /// Run a scenario simulated and for real (N times) and compare, per app and operation,
    /// p50 / p99 / max and per-transaction block writes and flushes, with a verdict per figure
    /// against the stated tolerance bands.
    CheckReal {
        #[command(flatten)]
        real: RealArgs,
        /// Real repetitions.
        #[arg(long, default_value_t = 3, value_name = "N")]
        reps: usize,
        /// Measure this machine's loop device again for the simulated side's device profile,
        /// instead of using the cached fit (docs/validation.md says where it is cached).
        #[arg(long, conflicts_with = "scenario_device")]
        refit: bool,
        /// Simulate on the scenario's own [stack.device] instead of the fitted profile.
        #[arg(long)]
        scenario_device: bool,
    },
}

/// The arguments of `mobistack real` (and `check-real`).
#[derive(clap::Args)]
struct RealArgs {
    /// Scenario file, or built-in scenario name.
    scenario: String,
    /// Run only this variant (repeatable; default all).
    #[arg(long = "variant", value_name = "NAME")]
    variants: Vec<String>,
    /// Use this block device (it is formatted: its contents are lost) instead of an image.
    #[arg(long, value_name = "PATH", conflicts_with = "image")]
    device: Option<std::path::PathBuf>,
    /// Size of the image file on a loop device (default 4GiB; sparse).
    #[arg(long, value_name = "SIZE")]
    image: Option<String>,
    /// Directory of the image file (default $MOBISTACK_REAL_DIR, else /tmp).
    #[arg(long, value_name = "DIR")]
    dir: Option<std::path::PathBuf>,
    /// Write the results as JSON to FILE (`-`: standard output).
    #[arg(long, value_name = "FILE")]
    out: Option<std::path::PathBuf>,
    /// Write the block events as blkparse text to FILE (FILE.<variant> with several).
    #[arg(long, value_name = "FILE")]
    blktrace: Option<std::path::PathBuf>,
    /// Write the results as tidy CSV files into directory DIR, as `run --csv` (`real` only).
    #[arg(long, value_name = "DIR")]
    csv: Option<std::path::PathBuf>,
    /// Print JSON instead of the table.
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand)]
enum DeviceCommand {
    /// List the built-in device profiles.
    List {
        /// Print as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Sequential (512 KiB) and random (4 KiB) reads and writes at queue depth 1 and 32, beside the
    /// profile's published figures.
    Bench {
        /// Profile name (see `mobistack device list`).
        profile: String,
        /// Print as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Fit a profile to four measured numbers and print it as a scenario `[stack.device]` table;
    /// with --measure, measure this machine's loop device (as `real` makes it) and fit to that.
    Fit {
        /// Sequential read bandwidth, e.g. 250MB/s.
        #[arg(long, value_name = "BW", required_unless_present = "measure")]
        seq_read: Option<String>,
        /// Sequential write bandwidth, e.g. 125MB/s.
        #[arg(long, value_name = "BW", required_unless_present = "measure")]
        seq_write: Option<String>,
        /// Random 4 KiB read IOPS, e.g. 11000.
        #[arg(long, value_name = "IOPS", required_unless_present = "measure")]
        rand_read: Option<String>,
        /// Random 4 KiB write IOPS, e.g. 13000.
        #[arg(long, value_name = "IOPS", required_unless_present = "measure")]
        rand_write: Option<String>,
        /// Measure a loop device with direct I/O over an image on this machine's disk (needs
        /// root; about half a minute): sequential 512 KiB at depth 32, random 4 KiB at depth 1
        /// and 32, cache flushes; fit the random figures at depth 1 and take the flush.
        #[arg(long, conflicts_with_all = ["seq_read", "seq_write", "rand_read", "rand_write"])]
        measure: bool,
        /// With --measure: the image's size (default 2GiB).
        #[arg(long, value_name = "SIZE", requires = "measure")]
        image: Option<String>,
        /// With --measure: the image's directory (default $MOBISTACK_REAL_DIR, else /tmp).
        #[arg(long, value_name = "DIR", requires = "measure")]
        dir: Option<std::path::PathBuf>,
        /// Print as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Flush, FUA and discard latencies of every profile on an idle device.
    Latencies {
        /// Print as JSON.
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
            io_account,
            blktrace,
            perfetto,
            perfetto_window,
            perfetto_max_events,
            perfetto_counter_period,
            html,
            csv,
            check,
            percentiles,
        } => cmd_run(
            &scenario,
            RunArgs {
                seeds,
                variant,
                out,
                json,
                threads,
                breakdown,
                io_account,
                blktrace,
                perfetto: perfetto.map(|path| PerfettoArgs {
                    path,
                    window: perfetto_window,
                    max_events: perfetto_max_events,
                    counter_period: perfetto_counter_period,
                }),
                html,
                csv,
                check,
                percentiles,
            },
        ),
        Command::Report {
            results,
            output,
            scenario,
        } => cmd_report(&results, &output, scenario.as_deref()),
        Command::Compare { base, other, json } => cmd_compare(&base, &other, json),
        Command::List { json } => cmd_list(json),
        Command::Validate { scenario, json } => cmd_validate(&scenario, json),
        Command::Bench { scale, only, json } => cmd_bench(scale, only.as_deref(), json),
        Command::Reproduce {
            paper,
            json,
            quick,
            seeds,
        } => cmd_reproduce(&paper, json, quick, seeds.as_deref()),
        Command::Crashcheck {
            scenario,
            points,
            seed,
            variant,
            budget,
            json,
            dump_point,
            torn,
        } => cmd_crashcheck(
            &scenario,
            crashcheck_options(points, seed, budget, torn),
            variant,
            json,
            dump_point,
        ),
        Command::TuneSubregions { device, seed, json } => cmd_tune_subregions(&device, seed, json),
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
            let progress = Progress::new(1, None, &format!("replay {}", args.trace.display()));
            let hook = progress.clone();
            let report =
                mobistack::workload::replay::device::run_command(&args, &|now| hook.update(0, now));
            progress.finish();
            print_report(report.map(|report| (report.table(), report.json())), json)
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
        Command::Real(args) => cmd_real(args),
        Command::CheckReal {
            real,
            reps,
            refit,
            scenario_device,
        } => {
            let device = if scenario_device {
                mobistack::real::check::DeviceChoice::Scenario
            } else {
                mobistack::real::check::DeviceChoice::Fit { refit }
            };
            cmd_check_real(real, reps, &device)
        }
        Command::Fio {
            jobfile,
            device,
            elevator,
            blktrace,
            seed,
            output_format,
            json,
        } => {
            let format = if json {
                "json".to_string()
            } else {
                output_format
            };
            cmd_fio(&jobfile, &device, &elevator, blktrace, seed, &format)
        }
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
    let progress = Progress::new(1, None, &format!("filebench {name}"));
    let hook = progress.clone();
    let report = fb::run_file_with_progress(&name, &text, &options, move |now| hook.update(0, now));
    progress.finish();
    let report = match report {
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
    format: &str,
) -> ExitCode {
    use mobistack::workload::fio::{parse_job_file_env, run_fio_classified, FioError, FioOptions};
    let plus = match format {
        "normal" | "json" => false,
        "json+" => true,
        other => {
            eprintln!(
                "error: --output-format `{}`: expected normal, json or json+",
                mobistack::units::cut(other)
            );
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    let text = match std::fs::read_to_string(jobfile) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("error: cannot read {}: {e}", jobfile.display());
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    // `${VAR}` from the environment, as fio reads it.
    let jobs = match parse_job_file_env(&text, &|name| std::env::var(name).ok()) {
        Ok(jobs) => jobs,
        Err(e) => {
            eprintln!("error: {}: {e}", jobfile.display());
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    // Options that change nothing in a simulation are said, never ignored silently.
    let mut said = std::collections::BTreeSet::new();
    for note in jobs.iter().flat_map(|job| &job.notes) {
        if said.insert(note.clone()) {
            eprintln!("note: {}: {note}", jobfile.display());
        }
    }
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
    let mut outputs = OutputFiles::default();
    let targets = match blktrace
        .as_deref()
        .map(|path| create_trace_files(&mut outputs, path))
        .transpose()
    {
        Ok(targets) => targets,
        Err(message) => {
            eprintln!("error: --blktrace: {message}");
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    let progress = Progress::new(1, None, &format!("fio {}", jobfile.display()));
    let hook = progress.clone();
    let options = FioOptions {
        seed,
        trace: blktrace.is_some(),
        progress: Some(Arc::new(move |now| hook.update(0, now))),
        ..FioOptions::default()
    };
    let report = run_fio_classified(&jobs, device, elevator, options);
    progress.finish();
    let report = match report {
        Ok(report) => report,
        Err(FioError::Input(e)) => {
            eprintln!("error: {}: {e}", jobfile.display());
            return ExitCode::from(EXIT_BAD_INPUT);
        }
        Err(FioError::Run(e)) => {
            eprintln!("error: {}: {e}", jobfile.display());
            return ExitCode::from(EXIT_RUN_FAILED);
        }
    };
    if let (Some(path), Some(targets), Some(trace)) = (&blktrace, &targets, &report.trace) {
        if let Err(message) = write_trace(&mut outputs, targets, trace, path) {
            eprintln!("error: {message}");
            return ExitCode::from(EXIT_RUN_FAILED);
        }
    }
    outputs.keep();
    if format == "normal" {
        out!("{}", report.text());
    } else {
        let json = serde_json::to_string_pretty(&report.json(plus)).expect("JSON");
        outln!("{json}");
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
        DeviceCommand::Bench { profile, json } => print_report(
            with_spinner(&format!("device bench {profile}"), || {
                bench::bench_report(&profile)
            }),
            json,
        ),
        DeviceCommand::Fit {
            measure: true,
            image,
            dir,
            json,
            ..
        } => cmd_device_fit_measure(image.as_deref(), dir, json),
        DeviceCommand::Fit {
            seq_read,
            seq_write,
            rand_read,
            rand_write,
            json,
            ..
        } => {
            // clap requires the four without --measure.
            let [seq_read, seq_write, rand_read, rand_write] =
                [seq_read, seq_write, rand_read, rand_write].map(Option::unwrap_or_default);
            let fitted = with_spinner("device fit", || {
                bench::fit_command(&seq_read, &seq_write, &rand_read, &rand_write)
            });
            match fitted {
                Ok((report, unreached)) => {
                    let code = print_report(Ok(report), json);
                    if unreached.is_empty() {
                        code
                    } else {
                        for miss in &unreached {
                            eprintln!("error: device fit could not reach a target: {miss}");
                        }
                        ExitCode::from(EXIT_RUN_FAILED)
                    }
                }
                Err(message) => print_report(Err(message), json),
            }
        }
        DeviceCommand::Latencies { json } => print_report(
            with_spinner("device latencies", bench::flush_discard_report),
            json,
        ),
    }
}

/// `mobistack device fit --measure`: this machine's loop device, measured and fitted.
fn cmd_device_fit_measure(
    image: Option<&str>,
    dir: Option<std::path::PathBuf>,
    json: bool,
) -> ExitCode {
    let mut options = mobistack::real::fit::MeasureOptions::default();
    if let Some(text) = image {
        match mobistack::units::parse_size(text) {
            Ok(size) if size >= 64 << 20 => options.size = size,
            Ok(_) => {
                eprintln!("error: --image {text}: at least 64MiB");
                return ExitCode::from(EXIT_BAD_INPUT);
            }
            Err(e) => {
                eprintln!("error: --image: {e}");
                return ExitCode::from(EXIT_BAD_INPUT);
            }
        }
    }
    if let Some(dir) = dir {
        options.dir = dir;
    }
    match mobistack::real::fit::fit_command(&options) {
        Ok(report) => print_report(Ok(report), json),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(EXIT_RUN_FAILED)
        }
    }
}

/// Exit status for bad input (a scenario that does not parse, an unknown variant).
const EXIT_BAD_INPUT: u8 = 2;
/// Exit status for a run that could not finish (e.g. a deadlock).
const EXIT_RUN_FAILED: u8 = 1;
/// Exit status of `run` when every run finished but an app's workload stopped before its end
/// (a SQL statement SQLite refused, a flowop that failed): the results are printed, and each
/// app's `failure` says why.
const EXIT_APP_FAILED: u8 = 4;

fn load_or_report(name: &str) -> Result<scenario::Scenario, ExitCode> {
    scenario::load(name).map_err(|e| {
        eprintln!("error: {e}");
        ExitCode::from(EXIT_BAD_INPUT)
    })
}

/// Wall time after which a progress bar appears (shorter commands print nothing extra).
const PROGRESS_AFTER: Duration = Duration::from_secs(1);
/// How often the bar is redrawn once shown.
const PROGRESS_TICK: Duration = Duration::from_millis(100);

/// Whether a progress bar should be on screen: only on a terminal, and only once the command
/// has run for [`PROGRESS_AFTER`].
fn progress_visible(elapsed: Duration, is_terminal: bool) -> bool {
    is_terminal && elapsed >= PROGRESS_AFTER
}

/// A progress bar on stderr, driven by wall time: a thread shows it once the command has run
/// for a second (on a terminal only) and redraws it every 100 ms from what the simulation last
/// reported (virtual time per run, which the engine reports every 1,024 events), so it moves
/// for every long command, however rarely the simulation reports.
struct Progress {
    bar: ProgressBar,
    /// Virtual time reached per run, in ms.
    per_job: Vec<AtomicU64>,
    /// What a spinner shows when the command says what is advancing (runs done, crash points
    /// checked) rather than reporting virtual time.
    status: std::sync::Mutex<Option<String>>,
    stop: AtomicBool,
}

/// The message of a spinner (a bar of unknown total): the command's `status` when it set one,
/// else the virtual time reached once there is any, else just `what` (never a virtual time of
/// 0.000 s that no run reports).
fn spinner_message(what: &str, status: Option<&str>, virtual_ms: u64) -> String {
    match status {
        Some(status) => status.to_string(),
        None if virtual_ms > 0 => {
            format!("{what}: {:.3} s of virtual time", virtual_ms as f64 / 1e3)
        }
        None => what.to_string(),
    }
}

impl Progress {
    /// A bar over `jobs` runs of `total_ns` virtual time each, or (None) a spinner with the
    /// virtual time reached.
    fn new(jobs: usize, total_ns: Option<u64>, what: &str) -> Arc<Self> {
        let (bar, template) = match total_ns {
            Some(total) => (
                ProgressBar::with_draw_target(
                    Some(jobs as u64 * total / 1_000_000),
                    ProgressDrawTarget::hidden(),
                ),
                "{spinner} [{elapsed_precise}] {bar:40} {percent:>3}% of virtual time ({msg})",
            ),
            None => (
                ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden()),
                "{spinner} [{elapsed_precise}] {msg}",
            ),
        };
        bar.set_style(ProgressStyle::with_template(template).expect("valid template"));
        bar.set_message(what.to_string());
        let progress = Arc::new(Progress {
            bar,
            per_job: (0..jobs.max(1)).map(|_| AtomicU64::new(0)).collect(),
            status: std::sync::Mutex::new(None),
            stop: AtomicBool::new(false),
        });
        let watcher = progress.clone();
        let what = what.to_string();
        let unknown_total = total_ns.is_none();
        std::thread::spawn(move || {
            let started = Instant::now();
            let mut shown = false;
            while !watcher.stop.load(Ordering::Relaxed) {
                std::thread::sleep(PROGRESS_TICK);
                if watcher.stop.load(Ordering::Relaxed) {
                    break;
                }
                if !shown && progress_visible(started.elapsed(), std::io::stderr().is_terminal()) {
                    watcher.bar.set_draw_target(ProgressDrawTarget::stderr());
                    shown = true;
                }
                let done: u64 = watcher
                    .per_job
                    .iter()
                    .map(|a| a.load(Ordering::Relaxed))
                    .sum();
                watcher.bar.set_position(done);
                if unknown_total {
                    let status = watcher.status.lock().expect("no panic holds it").clone();
                    watcher
                        .bar
                        .set_message(spinner_message(&what, status.as_deref(), done));
                }
                watcher.bar.tick();
            }
        });
        progress
    }

    /// What is advancing, shown by a spinner instead of the virtual time (see
    /// [`spinner_message`]).
    fn set_status(&self, status: String) {
        *self.status.lock().expect("no panic holds it") = Some(status);
    }

    /// Prints `line` on stderr without tearing the bar.
    fn println(&self, line: &str) {
        self.bar.suspend(|| eprintln!("{line}"));
    }

    /// From any worker: run `job` reached virtual time `now_ns`.
    fn update(&self, job: usize, now_ns: u64) {
        self.per_job[job].store(now_ns / 1_000_000, Ordering::Relaxed);
    }

    fn finish(&self) {
        self.stop.store(true, Ordering::Relaxed);
        self.bar.finish_and_clear();
    }
}

/// The I/O schedulers `--elevator` accepts: the block layer's own list
/// ([`mobistack::block::elevator::ELEVATOR_NAMES`]), so the help cannot drift from the code.
fn elevator_parser() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(mobistack::block::elevator::ELEVATOR_NAMES.iter().map(
        |&name| match name {
            "noop" => clap::builder::PossibleValue::new(name).alias("none"),
            _ => clap::builder::PossibleValue::new(name),
        },
    ))
}

/// Runs `work` with a spinner for commands without virtual time to report (device benchmarks).
fn with_spinner<T>(what: &str, work: impl FnOnce() -> T) -> T {
    let progress = Progress::new(1, None, what);
    let value = work();
    progress.finish();
    value
}

/// The options of `mobistack run`.
struct RunArgs {
    seeds: Vec<u64>,
    variant: Option<String>,
    out: Option<std::path::PathBuf>,
    json: bool,
    threads: usize,
    breakdown: bool,
    io_account: bool,
    blktrace: Option<std::path::PathBuf>,
    perfetto: Option<PerfettoArgs>,
    html: Option<std::path::PathBuf>,
    csv: Option<std::path::PathBuf>,
    check: bool,
    percentiles: Option<String>,
}

/// The `--perfetto*` options of `mobistack run`.
struct PerfettoArgs {
    path: std::path::PathBuf,
    window: Option<String>,
    max_events: usize,
    counter_period: String,
}

impl PerfettoArgs {
    /// The timeline to record; errors name the option.
    fn config(&self) -> Result<mobistack::sim::timeline::TimelineConfig, String> {
        use mobistack::units::parse_duration;
        let (start_ns, end_ns) = match &self.window {
            None => (0, u64::MAX),
            Some(window) => {
                let (start, end) = window.split_once("..").ok_or_else(|| {
                    format!("--perfetto-window `{window}`: expected START..END, e.g. 2s..4.5s")
                })?;
                let parse = |text: &str, default: u64| {
                    if text.trim().is_empty() {
                        return Ok(default);
                    }
                    parse_duration(text.trim())
                        .map_err(|e| format!("--perfetto-window `{window}`: {e}"))
                };
                let (start_ns, end_ns) = (parse(start, 0)?, parse(end, u64::MAX)?);
                if start_ns > end_ns {
                    return Err(format!(
                        "--perfetto-window `{window}`: the start is after the end"
                    ));
                }
                (start_ns, end_ns)
            }
        };
        let counter_period_ns = parse_duration(&self.counter_period)
            .map_err(|e| format!("--perfetto-counter-period `{}`: {e}", self.counter_period))?;
        Ok(mobistack::sim::timeline::TimelineConfig {
            start_ns,
            end_ns,
            max_records: self.max_events,
            counter_period_ns,
        })
    }
}

/// Refuses a `--perfetto-counter-period` that would take more counter samples over the traced
/// part of a run of `duration_ns` than `--perfetto-max-events` (the records a trace keeps):
/// every sample past it would be dropped, and taking them is what makes a 2 s run with a 1 ns
/// period last minutes. An error rather than a clamped period, because it comes before any
/// simulating and names the smallest period that fits; a clamp would hand back a trace at a
/// period the user did not ask for.
fn check_counter_period(
    config: &mobistack::sim::timeline::TimelineConfig,
    period_text: &str,
    duration_ns: u64,
) -> Result<(), String> {
    let period = config.counter_period_ns;
    let span = config
        .end_ns
        .min(duration_ns)
        .saturating_sub(config.start_ns);
    if period == 0 || span / period <= config.max_records as u64 {
        return Ok(());
    }
    let smallest = span.div_ceil(config.max_records.max(1) as u64);
    Err(format!(
        "--perfetto-counter-period {period_text} samples the counters {} times over the {} s traced, more than the {} records a trace keeps (--perfetto-max-events): use a period of at least {smallest} ns, a narrower --perfetto-window, or a larger --perfetto-max-events",
        span / period,
        span as f64 / 1e9,
        config.max_records
    ))
}

/// Files a command will write, created before the simulation so that an unwritable path is
/// reported at once, not after minutes of simulating; removed again if the command fails
/// before filling them. The path `-` is standard output (see [`OutputFiles::create_or_stdout`]).
#[derive(Default)]
struct OutputFiles {
    files: Vec<(std::path::PathBuf, Sink)>,
    done: bool,
}

/// Where one output goes.
enum Sink {
    File(std::fs::File),
    Stdout,
    Written,
}

/// The path that means standard output.
const STDOUT_PATH: &str = "-";

impl OutputFiles {
    /// Creates (truncates) `path`; the error names it. `-` is refused: the output is several
    /// files or binary, not for standard output.
    fn create(&mut self, path: &std::path::Path) -> Result<usize, String> {
        if path.as_os_str() == STDOUT_PATH {
            return Err(
                "`-` (standard output) is not supported here: give a file name".to_string(),
            );
        }
        let file = std::fs::File::create(path)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        self.files.push((path.to_path_buf(), Sink::File(file)));
        Ok(self.files.len() - 1)
    }

    /// As [`OutputFiles::create`], but `-` is standard output (at most one output may be).
    fn create_or_stdout(&mut self, path: &std::path::Path) -> Result<usize, String> {
        if path.as_os_str() != STDOUT_PATH {
            return self.create(path);
        }
        if self.writes_stdout() {
            return Err("only one output can be `-` (standard output)".to_string());
        }
        self.files.push((path.to_path_buf(), Sink::Stdout));
        Ok(self.files.len() - 1)
    }

    /// Whether an output goes to standard output (so the table does not).
    fn writes_stdout(&self) -> bool {
        self.files
            .iter()
            .any(|(path, _)| path.as_os_str() == STDOUT_PATH)
    }

    /// Writes into output `index` (created by [`OutputFiles::create`]).
    fn write(
        &mut self,
        index: usize,
        fill: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
    ) -> Result<(), String> {
        let (path, sink) = &mut self.files[index];
        let result = match std::mem::replace(sink, Sink::Written) {
            Sink::File(file) => {
                let mut writer = std::io::BufWriter::new(file);
                fill(&mut writer).and_then(|()| writer.flush())
            }
            Sink::Stdout => {
                let mut stdout = std::io::stdout().lock();
                fill(&mut stdout).and_then(|()| stdout.flush())
            }
            Sink::Written => panic!("each output file is written once"),
        };
        result.map_err(|e| match e.kind() {
            std::io::ErrorKind::BrokenPipe => std::process::exit(0),
            _ => format!("cannot write {}: {e}", path.display()),
        })
    }

    /// The command succeeded: keep the files.
    fn keep(&mut self) {
        self.done = true;
    }
}

impl Drop for OutputFiles {
    fn drop(&mut self) {
        if !self.done {
            for (path, sink) in &self.files {
                if !matches!(sink, Sink::Stdout) && path.as_os_str() != STDOUT_PATH {
                    std::fs::remove_file(path).ok();
                }
            }
        }
    }
}

use std::io::Write as _;

/// The blktrace outputs of one run: blkparse text at `text`, blktrace binary at
/// `text.blktrace.0` (so `blkparse -i <text>` reads it).
struct TraceTargets {
    text: usize,
    binary: usize,
}

/// `path` for a single run, else `path.<variant>.<seed>`.
fn trace_name(
    path: &std::path::Path,
    single: bool,
    variant: &str,
    seed: u64,
) -> std::path::PathBuf {
    if single {
        return path.to_path_buf();
    }
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{variant}.{seed}"));
    std::path::PathBuf::from(name)
}

/// Creates the text and binary trace files of a trace named `name`.
fn create_trace_files(
    outputs: &mut OutputFiles,
    name: &std::path::Path,
) -> Result<TraceTargets, String> {
    let text = outputs.create(name)?;
    let mut binary = name.as_os_str().to_owned();
    binary.push(".blktrace.0");
    let binary = outputs.create(std::path::Path::new(&binary))?;
    Ok(TraceTargets { text, binary })
}

/// Writes a trace into its two files and says where.
fn write_trace(
    outputs: &mut OutputFiles,
    targets: &TraceTargets,
    trace: &mobistack::block::blktrace::BlkTrace,
    name: &std::path::Path,
) -> Result<(), String> {
    outputs.write(targets.text, |mut w| trace.write_blkparse(&mut w))?;
    outputs.write(targets.binary, |mut w| trace.write_binary(&mut w))?;
    let name = name.display();
    eprintln!(
        "blktrace: {} events written to {name} (blkparse text) and {name}.blktrace.0 (binary: blkparse -i {name}; btt -i {name}.blktrace.0)",
        trace.events().len(),
    );
    Ok(())
}

fn cmd_run(name: &str, args: RunArgs) -> ExitCode {
    let RunArgs {
        seeds,
        variant,
        out,
        json,
        threads,
        breakdown,
        io_account,
        blktrace,
        perfetto,
        html,
        csv,
        check,
        percentiles,
    } = args;
    let timeline = match perfetto.as_ref().map(PerfettoArgs::config).transpose() {
        Ok(config) => config,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    let table_options = match percentiles.as_deref().map(table::Stat::parse_list) {
        None => table::TableOptions::default(),
        Some(Ok(stats)) => table::TableOptions { stats },
        Some(Err(message)) => {
            eprintln!("error: {message}");
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    let mut scenario = match load_or_report(name) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let period_checked = timeline.zip(perfetto.as_ref()).map(|(config, args)| {
        check_counter_period(&config, &args.counter_period, scenario.duration)
    });
    if let Some(Err(message)) = period_checked {
        eprintln!("error: {message}");
        return ExitCode::from(EXIT_BAD_INPUT);
    }
    if blktrace.is_some() {
        if !scenario.apps.iter().any(|a| a.workload.needs_block()) {
            eprintln!(
                "error: --blktrace: scenario `{}` has no block layer to trace (no app does block or file I/O; toy workloads use the toy server)",
                scenario.name
            );
            return ExitCode::from(EXIT_BAD_INPUT);
        }
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
        check,
        timeline,
    };
    let jobs = run::jobs(&scenario, &options);
    // Enough memory for the runs held at once, checked before building anything.
    if let Some(available) = run::available_memory() {
        let estimate = run::memory_estimate(&scenario, &options);
        if let Err(message) = run::check_memory(&estimate, available) {
            eprintln!("error: scenario `{}`: {message}", scenario.name);
            return ExitCode::from(EXIT_RUN_FAILED);
        }
    }
    // Every output file exists before the simulation starts.
    let mut outputs = OutputFiles::default();
    let out_file = match out
        .as_deref()
        .map(|path| outputs.create_or_stdout(path))
        .transpose()
    {
        Ok(index) => index,
        Err(message) => {
            eprintln!("error: --out: {message}");
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    let mut traces = std::collections::BTreeMap::new();
    if let Some(path) = &blktrace {
        for &(variant, seed) in &jobs {
            let variant = scenario.variants[variant].name.clone();
            let trace_path = trace_name(path, jobs.len() == 1, &variant, seed);
            match create_trace_files(&mut outputs, &trace_path) {
                Ok(targets) => {
                    traces.insert((variant, seed), (trace_path, targets));
                }
                Err(message) => {
                    eprintln!("error: --blktrace: {message}");
                    return ExitCode::from(EXIT_BAD_INPUT);
                }
            }
        }
    }
    let html_file = match html
        .as_deref()
        .map(|path| outputs.create_or_stdout(path))
        .transpose()
    {
        Ok(index) => index,
        Err(message) => {
            eprintln!("error: --html: {message}");
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    let mut csv_files = Vec::new();
    if let Some(dir) = &csv {
        if dir.as_os_str() == STDOUT_PATH {
            eprintln!("error: --csv: `-` (standard output) is not supported: the CSVs are four files; give a directory");
            return ExitCode::from(EXIT_BAD_INPUT);
        }
        if let Err(e) = std::fs::create_dir_all(dir) {
            eprintln!("error: --csv: cannot create {}: {e}", dir.display());
            return ExitCode::from(EXIT_BAD_INPUT);
        }
        for name in mobistack::report::csv::FILES {
            match outputs.create(&dir.join(name)) {
                Ok(index) => csv_files.push(index),
                Err(message) => {
                    eprintln!("error: --csv: {message}");
                    return ExitCode::from(EXIT_BAD_INPUT);
                }
            }
        }
    }
    let mut perfetto_files = std::collections::BTreeMap::new();
    if let Some(perfetto) = &perfetto {
        for &(variant, seed) in &jobs {
            let variant = scenario.variants[variant].name.clone();
            let path = trace_name(&perfetto.path, jobs.len() == 1, &variant, seed);
            match outputs.create(&path) {
                Ok(index) => {
                    perfetto_files.insert((variant, seed), (path, index));
                }
                Err(message) => {
                    eprintln!("error: --perfetto: {message}");
                    return ExitCode::from(EXIT_BAD_INPUT);
                }
            }
        }
    }
    let progress = Progress::new(
        jobs.len(),
        Some(scenario.duration),
        &format!("{} run(s)", jobs.len()),
    );
    let hook = progress.clone();
    options.progress = Some(Arc::new(move |job, now| hook.update(job, now)));
    let results = run::run_scenario(&scenario, &options);
    progress.finish();
    let results = match results {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_RUN_FAILED);
        }
    };
    for run in &results.runs {
        let (Some(trace), Some((path, targets))) =
            (&run.blktrace, traces.get(&(run.variant.clone(), run.seed)))
        else {
            continue;
        };
        if let Err(message) = write_trace(&mut outputs, targets, trace, path) {
            eprintln!("error: {message}");
            return ExitCode::from(EXIT_RUN_FAILED);
        }
    }
    for run in &results.runs {
        let (Some(timeline), Some((path, index))) = (
            &run.timeline,
            perfetto_files.get(&(run.variant.clone(), run.seed)),
        ) else {
            continue;
        };
        let bytes = mobistack::report::perfetto::encode(timeline);
        if let Err(message) = outputs.write(*index, |w| w.write_all(&bytes)) {
            eprintln!("error: {message}");
            return ExitCode::from(EXIT_RUN_FAILED);
        }
        eprintln!(
            "{}",
            mobistack::report::perfetto::summary(
                timeline,
                &path.display().to_string(),
                bytes.len()
            )
        );
    }
    if let Some(dir) = &csv {
        let files = mobistack::report::csv::files(&results);
        for (index, (_, text)) in csv_files.iter().zip(files) {
            if let Err(message) = outputs.write(*index, |w| w.write_all(text.as_bytes())) {
                eprintln!("error: {message}");
                return ExitCode::from(EXIT_RUN_FAILED);
            }
        }
        eprintln!(
            "csv: {} written in {}",
            mobistack::report::csv::FILES.join(", "),
            dir.display()
        );
    }
    let json_text = results.to_json();
    if let (Some(index), Some(path)) = (html_file, &html) {
        let view = mobistack::report::html::ResultsView::parse(&json_text)
            .expect("the run's own results parse");
        let page = mobistack::report::html::render(&view, scenario::source(name).as_deref());
        if let Err(message) = outputs.write(index, |w| w.write_all(page.as_bytes())) {
            eprintln!("error: {message}");
            return ExitCode::from(EXIT_RUN_FAILED);
        }
        if path.as_os_str() != STDOUT_PATH {
            eprintln!("html: report written to {}", path.display());
        }
    }
    if let Some(index) = out_file {
        if let Err(message) = outputs.write(index, |w| w.write_all(json_text.as_bytes())) {
            eprintln!("error: {message}");
            return ExitCode::from(EXIT_RUN_FAILED);
        }
    }
    let stdout_taken = outputs.writes_stdout();
    outputs.keep();
    if stdout_taken {
        // `--out -` or `--html -`: standard output holds that output alone.
    } else if json {
        out!("{json_text}");
    } else {
        out!("{}", table::render_with(&results, &table_options));
        if breakdown {
            out!("\n{}", table::render_breakdown(&results));
        }
        if io_account {
            out!("\n{}", table::render_io_account(&results));
        }
    }
    let failed: Vec<String> = results
        .runs
        .iter()
        .flat_map(|run| {
            run.apps
                .iter()
                .filter(|(_, app)| app.failure.is_some())
                .map(move |(name, _)| format!("{name} ({} seed {})", run.variant, run.seed))
        })
        .collect();
    if !failed.is_empty() {
        eprintln!(
            "error: {} app run(s) stopped before their workload's end: {} (the results say why)",
            failed.len(),
            mobistack::units::cut(&failed.join(", "))
        );
        return ExitCode::from(EXIT_APP_FAILED);
    }
    ExitCode::SUCCESS
}

fn cmd_report(
    results: &std::path::Path,
    output: &std::path::Path,
    scenario: Option<&str>,
) -> ExitCode {
    let json = match std::fs::read_to_string(results) {
        Ok(json) => json,
        Err(e) => {
            eprintln!("error: cannot read {}: {e}", results.display());
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    let view = match mobistack::report::html::ResultsView::parse(&json) {
        Ok(view) => view,
        Err(message) => {
            eprintln!("error: {}: {message}", results.display());
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    let source = match scenario {
        Some(name) => {
            match scenario::source(name) {
                Some(source) => Some(source),
                None => {
                    eprintln!("error: --scenario {name}: no such file, and no built-in scenario of that name");
                    return ExitCode::from(EXIT_BAD_INPUT);
                }
            }
        }
        None => scenario::builtin::find(&view.scenario).map(|b| b.source.to_string()),
    };
    let page = mobistack::report::html::render(&view, source.as_deref());
    let mut outputs = OutputFiles::default();
    let written = outputs
        .create_or_stdout(output)
        .and_then(|index| outputs.write(index, |w| w.write_all(page.as_bytes())));
    if let Err(message) = written {
        eprintln!("error: {message}");
        return ExitCode::from(EXIT_BAD_INPUT);
    }
    outputs.keep();
    eprintln!(
        "report: {} ({} variant(s), {} run(s) of scenario `{}`)",
        output.display(),
        view.variants().len(),
        view.runs.len(),
        view.scenario
    );
    ExitCode::SUCCESS
}

/// A side of `compare`: `FILE` or `FILE:VARIANT`, read and its variant chosen.
fn compare_side(
    spec: &str,
) -> Result<
    (
        mobistack::report::html::ResultsView,
        mobistack::report::compare::Side,
    ),
    String,
> {
    let (file, variant) = match spec.rsplit_once(':') {
        Some((file, variant)) if !std::path::Path::new(spec).exists() => (file, Some(variant)),
        _ => (spec, None),
    };
    let json = std::fs::read_to_string(file).map_err(|e| format!("cannot read {file}: {e}"))?;
    let view =
        mobistack::report::html::ResultsView::parse(&json).map_err(|e| format!("{file}: {e}"))?;
    let variant = mobistack::report::compare::pick_variant(&view, file, variant)?;
    Ok((
        view,
        mobistack::report::compare::Side {
            file: file.to_string(),
            variant,
        },
    ))
}

/// The scenario and options of `real` / `check-real`, or the exit code of bad input.
fn real_setup(
    args: &RealArgs,
) -> Result<(scenario::Scenario, mobistack::real::RealOptions), ExitCode> {
    let scenario = scenario::load(&args.scenario).map_err(|e| {
        eprintln!("error: {e}");
        ExitCode::from(EXIT_BAD_INPUT)
    })?;
    let size = match args.image.as_deref().map(mobistack::units::parse_size) {
        None => 4 << 30,
        Some(Ok(size)) => size,
        Some(Err(e)) => {
            eprintln!("error: --image: {e}");
            return Err(ExitCode::from(EXIT_BAD_INPUT));
        }
    };
    let mut options = mobistack::real::RealOptions::image(size);
    if let Some(dir) = &args.dir {
        options.target = mobistack::real::machine::Target::Image {
            size,
            dir: dir.clone(),
        };
    }
    if let Some(device) = &args.device {
        options.target = mobistack::real::machine::Target::Device(device.clone());
    }
    options.variants = args.variants.clone();
    options.blktrace = args.blktrace.clone();
    Ok((scenario, options))
}

fn cmd_real(args: RealArgs) -> ExitCode {
    let (scenario, options) = match real_setup(&args) {
        Ok(setup) => setup,
        Err(code) => return code,
    };
    let results = match mobistack::real::run_real(&scenario, &options) {
        Ok(results) => results,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_RUN_FAILED);
        }
    };
    if let Some(dir) = &args.csv {
        let written = std::fs::create_dir_all(dir).and_then(|()| {
            mobistack::report::csv::files(&results)
                .into_iter()
                .try_for_each(|(name, text)| std::fs::write(dir.join(name), text))
        });
        if let Err(e) = written {
            eprintln!("error: --csv {}: {e}", dir.display());
            return ExitCode::from(EXIT_RUN_FAILED);
        }
    }
    let json = results.to_json();
    match &args.out {
        Some(path) if path.as_os_str() == "-" => out!("{json}"),
        Some(path) => {
            if let Err(e) = std::fs::write(path, &json) {
                eprintln!("error: cannot write {}: {e}", path.display());
                return ExitCode::from(EXIT_RUN_FAILED);
            }
        }
        None => {}
    }
    if args.json {
        if args.out.as_deref() != Some(std::path::Path::new("-")) {
            out!("{json}");
        }
    } else if args.out.as_deref() != Some(std::path::Path::new("-")) {
        out!(
            "{}",
            table::render_with(&results, &table::TableOptions::default())
        );
    }
    if results
        .runs
        .iter()
        .any(|r| r.apps.values().any(|a| a.failure.is_some()))
    {
        return ExitCode::from(EXIT_APP_FAILED);
    }
    ExitCode::SUCCESS
}

fn cmd_check_real(
    args: RealArgs,
    reps: usize,
    device: &mobistack::real::check::DeviceChoice,
) -> ExitCode {
    let (scenario, options) = match real_setup(&args) {
        Ok(setup) => setup,
        Err(code) => return code,
    };
    match mobistack::real::check::check_real(&scenario, &options, reps, device) {
        Ok(checks) => {
            if args.json {
                outln!(
                    "{}",
                    serde_json::to_string_pretty(&checks).expect("the checks serialise")
                );
            } else {
                out!("{}", mobistack::real::check::render(&checks));
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(EXIT_RUN_FAILED)
        }
    }
}

fn cmd_compare(base: &str, other: &str, json: bool) -> ExitCode {
    let (base, other) = match (compare_side(base), compare_side(other)) {
        (Ok(base), Ok(other)) => (base, other),
        (Err(message), _) | (_, Err(message)) => {
            eprintln!("error: {message}");
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    let comparison = mobistack::report::compare::compare((&base.0, base.1), (&other.0, other.1));
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&comparison).expect("the comparison serialises")
        );
    } else {
        out!("{}", mobistack::report::compare::render(&comparison));
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
            "kernel_versions": scenario
                .variants
                .iter()
                .map(|v| (v.name.clone(), v.stack.kernel.version.name()))
                .collect::<std::collections::BTreeMap<_, _>>(),
            "era_switches": scenario
                .variants
                .iter()
                .map(|v| (v.name.clone(), eras::era_switches(&v.stack, &v.provenance)))
                .collect::<std::collections::BTreeMap<_, _>>(),
            "mixed_eras": scenario
                .variants
                .iter()
                .map(|v| (v.name.clone(), eras::mixed_eras(&v.stack)))
                .filter(|(_, mixed)| !mixed.is_empty())
                .collect::<std::collections::BTreeMap<_, _>>(),
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
        outln!("  kernel version: {}", kernel_versions(&scenario));
        out!("{}", era_switch_tables(&scenario));
    }
    ExitCode::SUCCESS
}

/// The era switches of each variant ([`eras::era_switches`]): one table per group of variants
/// whose switches are the same, then how each variant mixes eras.
fn era_switch_tables(scenario: &mobistack::scenario::Scenario) -> String {
    let mut groups: Vec<(Vec<&str>, Vec<eras::EraSwitch>)> = Vec::new();
    for variant in &scenario.variants {
        let rows = eras::era_switches(&variant.stack, &variant.provenance);
        match groups.iter_mut().find(|(_, other)| *other == rows) {
            Some((names, _)) => names.push(&variant.name),
            None => groups.push((vec![&variant.name], rows)),
        }
    }
    let mut out = String::new();
    for (names, rows) in &groups {
        out.push_str(&format!("  era switches ({}):\n", names.join(", ")));
        let mut table = vec![["layer", "switch", "value", "set by"].map(String::from)];
        table.extend(rows.iter().map(|row| {
            [
                row.layer.to_string(),
                row.switch.to_string(),
                row.value.clone(),
                row.set_by.clone(),
            ]
        }));
        let widths: Vec<usize> = (0..3)
            .map(|c| {
                table
                    .iter()
                    .map(|r| r[c].chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        for row in &table {
            out.push_str(&format!(
                "    {:w0$}  {:w1$}  {:w2$}  {}\n",
                row[0],
                row[1],
                row[2],
                row[3],
                w0 = widths[0],
                w1 = widths[1],
                w2 = widths[2]
            ));
        }
    }
    for variant in &scenario.variants {
        for mixed in eras::mixed_eras(&variant.stack) {
            out.push_str(&format!(
                "  warning: variant `{}` mixes eras: {mixed}\n",
                variant.name
            ));
        }
    }
    out
}

/// The effective `[stack.kernel] version` of a scenario: one version when every variant runs
/// the same, else each variant's (`name 3.10, other 6.6`).
fn kernel_versions(scenario: &mobistack::scenario::Scenario) -> String {
    let versions: Vec<_> = scenario
        .variants
        .iter()
        .map(|v| v.stack.kernel.version)
        .collect();
    if versions.windows(2).all(|w| w[0] == w[1]) {
        return versions.first().copied().unwrap_or_default().to_string();
    }
    scenario
        .variants
        .iter()
        .map(|v| format!("{} {}", v.name, v.stack.kernel.version))
        .collect::<Vec<_>>()
        .join(", ")
}

fn cmd_tune_subregions(device: &str, seed: u64, json: bool) -> ExitCode {
    use mobistack::report::tune;
    let sweep = with_spinner(&format!("tune-subregions {device}"), || {
        tune::tune_subregions(device, seed)
    });
    match sweep {
        Ok(sweep) => {
            if json {
                out!(
                    "{}",
                    serde_json::to_string_pretty(&sweep).expect("a sweep serializes")
                );
            } else {
                out!("{}", tune::render(&sweep));
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: --device {device}: {e}");
            ExitCode::from(EXIT_BAD_INPUT)
        }
    }
}

fn cmd_reproduce(paper: &str, json: bool, quick: bool, seeds: Option<&str>) -> ExitCode {
    use mobistack::report::reproduce;
    if !reproduce::PAPERS.contains(&paper) {
        eprintln!(
            "error: no reproduction for `{paper}`: known papers are {}",
            reproduce::PAPERS.join(", ")
        );
        return ExitCode::from(EXIT_BAD_INPUT);
    }
    let seeds = match seeds.map(reproduce::parse_seeds).transpose() {
        Ok(seeds) => seeds,
        Err(message) => {
            eprintln!("error: --seeds: {message}");
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    let options = reproduce::ReproduceOptions {
        quick,
        threads: 0,
        seed: None,
    };
    let progress = Progress::new(1, None, &format!("reproduce {paper}"));
    let mut started = 0usize;
    let mut report = |run: &str| {
        // Each call starts the next run: the ones before it are done.
        progress.println(&format!("reproduce {paper}: running {run}"));
        progress.set_status(format!(
            "reproduce {paper}: {started} run(s) done, now {run}"
        ));
        started += 1;
    };
    let reproduction = match &seeds {
        Some(seeds) => reproduce::reproduce_seeds(paper, &options, seeds, &mut report),
        None => reproduce::reproduce(paper, &options, &mut report),
    };
    progress.finish();
    match reproduction {
        Ok(reproduction) if json => {
            outln!("{}", reproduce::json(&reproduction));
            ExitCode::SUCCESS
        }
        Ok(reproduction) => {
            out!("{}", reproduce::render_all(&reproduction));
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(EXIT_RUN_FAILED)
        }
    }
}

/// Exit status of `crashcheck` when a check found violations.
const EXIT_VIOLATIONS: u8 = 3;

/// `crashcheck`'s options from its arguments (`budget_mib` in MiB).
fn crashcheck_options(
    points: usize,
    seed: Option<u64>,
    budget_mib: u64,
    torn: bool,
) -> mobistack::crashcheck::CrashCheckOptions {
    mobistack::crashcheck::CrashCheckOptions {
        points,
        seed,
        budget: budget_mib.saturating_mul(1 << 20),
        torn,
    }
}

fn cmd_crashcheck(
    name: &str,
    options: mobistack::crashcheck::CrashCheckOptions,
    variant: Option<String>,
    json: bool,
    dump_point: Option<usize>,
) -> ExitCode {
    use mobistack::crashcheck;
    let mut scenario = match load_or_report(name) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let selected = match &variant {
        Some(name) => scenario.select_variant(name),
        None => Ok(()),
    };
    if let Err(message) = selected.and_then(|()| options.validate()) {
        eprintln!("error: {message}");
        return ExitCode::from(EXIT_BAD_INPUT);
    }
    if let Some(n) = dump_point {
        for variant in &scenario.variants {
            match crashcheck::dump::dump_point(&scenario, variant, &options, n) {
                Ok(text) => out!("{text}"),
                Err(message) => {
                    eprintln!("error: {message}");
                    return ExitCode::from(EXIT_RUN_FAILED);
                }
            }
        }
        return ExitCode::SUCCESS;
    }
    let progress = Progress::new(1, None, &format!("crashcheck {}", scenario.name));
    progress.set_status(format!(
        "crashcheck {}: simulating the run whose writes are crashed",
        scenario.name
    ));
    let reports = crashcheck::check_scenario(&scenario, &options, &mut |variant, done, total| {
        progress.set_status(format!(
            "crashcheck {} {variant}: {done}/{total} crash points checked",
            scenario.name
        ));
    });
    progress.finish();
    match reports {
        Ok(reports) => {
            if json {
                let rows: Vec<_> = reports
                    .iter()
                    .map(|r| {
                        let mut v = serde_json::to_value(r).expect("serialisable");
                        v["run_seconds"] = serde_json::json!(r.run_seconds);
                        v["check_seconds"] = serde_json::json!(r.check_seconds);
                        v
                    })
                    .collect();
                outln!(
                    "{}",
                    serde_json::json!({ "scenario": scenario.name, "variants": rows })
                );
            } else {
                out!("{}", crashcheck::render(&scenario, &reports));
            }
            if reports.iter().any(|r| r.violations() > 0) {
                ExitCode::from(EXIT_VIOLATIONS)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(EXIT_RUN_FAILED)
        }
    }
}

fn cmd_bench(scale: u64, only: Option<&str>, json: bool) -> ExitCode {
    use mobistack::sim::bench::BenchResult;
    if cfg!(debug_assertions) {
        eprintln!("note: this is a debug build; benchmark with `cargo run --release -- bench`");
    }
    type Bench = Box<dyn Fn() -> Vec<BenchResult>>;
    // Each group by the names of its rows, run only when `--only` selects one of them.
    let groups: Vec<(&[&str], Bench)> = vec![
        (
            &["timer-events", "callback-events", "task-wakeups"],
            Box::new(move || mobistack::sim::bench::run_all(scale)),
        ),
        // 8 GiB written in the background over 240 s of virtual time through the whole stack.
        (
            &["stack-8gib-write", "stack-writeback"],
            Box::new(|| mobistack::run::bench_stack(8, 240).to_vec()),
        ),
        // QASIO's M1 with its 8 GB background write through ext4, CFQ and the eMMC model.
        (
            &["qasio-m1-8gib"],
            Box::new(|| vec![mobistack::run::bench_qasio_m1(8)]),
        ),
        // Real SQLite in the loop: autocommit INSERTs through the VFS bridge.
        (
            &["sqlite-inserts", "sqlite-statements"],
            Box::new(move || mobistack::run::bench_sqlite(2_000 * scale).to_vec()),
        ),
        // A DiskSim trace of 4 KiB random reads replayed on the device model alone.
        (
            &["device-replay"],
            Box::new(move || vec![mobistack::workload::replay::device::bench(250_000 * scale)]),
        ),
        // fio's 4 KiB random reads at QD32 through the block layer and the device model.
        (
            &["device-fio"],
            Box::new(move || vec![mobistack::workload::fio::bench(1_000 * scale)]),
        ),
        // Many small runs in one process (QASIO's M1 for 1 s each), and their stack alone.
        (
            &["small-runs", "stack-build"],
            Box::new(move || {
                vec![
                    mobistack::stack::bench::small_runs(25 * scale),
                    mobistack::stack::bench::stack_builds(250 * scale),
                ]
            }),
        ),
    ];
    let selected =
        |names: &[&str]| only.is_none_or(|prefix| names.iter().any(|n| n.starts_with(prefix)));
    if !groups.iter().any(|(names, _)| selected(names)) {
        let names: Vec<&str> = groups
            .iter()
            .flat_map(|(names, _)| names.iter().copied())
            .collect();
        eprintln!(
            "error: --only {}: no benchmark's name starts with it (the benchmarks: {})",
            only.unwrap_or_default(),
            names.join(", ")
        );
        return ExitCode::from(EXIT_BAD_INPUT);
    }
    let results = with_spinner("bench", || {
        groups
            .iter()
            .filter(|(names, _)| selected(names))
            .flat_map(|(_, bench)| bench())
            .collect::<Vec<_>>()
    });
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every subcommand, at every depth, with its path (`device fit`).
    fn subcommands(command: &clap::Command, path: String, out: &mut Vec<(String, clap::Command)>) {
        for sub in command.get_subcommands() {
            let name = format!("{path} {}", sub.get_name()).trim().to_string();
            out.push((name.clone(), sub.clone()));
            subcommands(sub, name, out);
        }
    }

    #[test]
    fn every_argument_of_every_subcommand_has_help_text() {
        use clap::CommandFactory;
        let mut all = Vec::new();
        subcommands(&Cli::command(), String::new(), &mut all);
        assert!(all.len() >= 15, "{} subcommands", all.len());
        let mut missing = Vec::new();
        for (path, command) in &all {
            if command.get_about().is_none() {
                missing.push(format!("{path}: no description"));
            }
            for arg in command.get_arguments() {
                let builtin = matches!(arg.get_id().as_str(), "help" | "version");
                if !builtin && arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} {}", arg.get_id()));
                }
            }
        }
        assert!(
            missing.is_empty(),
            "arguments without help text: {missing:?}"
        );
    }

    #[test]
    fn a_spinner_shows_what_advances_and_never_a_virtual_time_nobody_reports() {
        // `crashcheck` and `reproduce joj` sat at "0.000 s of virtual time".
        assert_eq!(
            spinner_message(
                "crashcheck x",
                Some("crashcheck x base: 10/100 crash points checked"),
                0
            ),
            "crashcheck x base: 10/100 crash points checked"
        );
        assert_eq!(spinner_message("fio job", None, 0), "fio job");
        assert_eq!(
            spinner_message("fio job", None, 1500),
            "fio job: 1.500 s of virtual time"
        );
    }

    #[test]
    fn the_progress_bar_shows_only_on_a_terminal_after_a_second() {
        assert!(!progress_visible(Duration::from_millis(999), true));
        assert!(progress_visible(Duration::from_millis(1000), true));
        assert!(!progress_visible(Duration::from_secs(60), false));
    }
}
