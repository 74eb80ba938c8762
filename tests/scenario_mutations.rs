//! A mutation harness over the built-in scenarios: every single-line mutation of a field (a value
//! of the wrong type, out of range, with a bad unit, enormous; a misspelled key) either parses or
//! is an error that points at the mutated line (or names it), says what is expected, and cuts
//! long values. Nothing panics.

use mobistack::scenario::{self, builtin::BUILTINS};

/// Replacement values tried for every `key = value` line.
fn bad_values() -> Vec<String> {
    vec![
        "true".into(),
        "-1".into(),
        "0".into(),
        "1.5".into(),
        "\"\"".into(),
        "\"x\"".into(),
        "[]".into(),
        "[1, \"a\"]".into(),
        "{ a = 1 }".into(),
        "\"1 fortnight\"".into(),
        "\"-5ms\"".into(),
        "\"18446744073709551615ns\"".into(),
        "\"99999999999999999999TiB\"".into(),
        "18446744073709551615".into(),
        "\"relative/path\"".into(),
        format!("\"{}\"", "9".repeat(2000)),
        "1e400".into(),
    ]
}

struct Mutation {
    scenario: &'static str,
    /// 1-based line that was changed.
    line: usize,
    text: String,
    what: String,
}

/// Every mutation, in a fixed order.
fn mutations() -> Vec<Mutation> {
    let mut out = Vec::new();
    for builtin in BUILTINS {
        let lines: Vec<&str> = builtin.source.lines().collect();
        for (index, line) in lines.iter().enumerate() {
            let trimmed = line.trim_start();
            if trimmed.starts_with('#') || trimmed.starts_with('[') {
                continue;
            }
            let Some((key, value)) = line.split_once(" = ") else {
                continue;
            };
            // One `key = value` per line is what this mutates: an element of a multi-line array
            // (`{ op = ... }`) or the line that opens one holds more than one value, and
            // replacing the line breaks the TOML around it rather than one field.
            let opens_array = value.trim_start().starts_with('[') && !value.contains(']');
            if trimmed.starts_with('{') || opens_array {
                continue;
            }
            let mut edit = |replacement: String, what: String| {
                let mut edited: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
                edited[index] = replacement;
                out.push(Mutation {
                    scenario: builtin.name,
                    line: index + 1,
                    text: edited.join("\n") + "\n",
                    what,
                });
            };
            for value in bad_values() {
                let shown: String = value.chars().take(30).collect();
                edit(format!("{key} = {value}"), format!("{key} = {shown}"));
            }
            edit(
                line.replacen(key, &format!("{key}x"), 1),
                format!("key {key} -> {key}x"),
            );
        }
    }
    out
}

#[test]
fn every_mutated_field_is_parsed_or_reported_at_its_line_without_a_panic() {
    let mutations = mutations();
    assert!(mutations.len() >= 300, "{} mutations", mutations.len());
    let mut failures = Vec::new();
    let mut errors = 0;
    for m in &mutations {
        let file = format!("{}.toml", m.scenario);
        let result = std::panic::catch_unwind(|| scenario::parse(&file, &m.text));
        let outcome = match result {
            Err(_) => {
                failures.push(format!("{}:{} {}: PANIC", m.scenario, m.line, m.what));
                continue;
            }
            Ok(outcome) => outcome,
        };
        let Err(error) = outcome else { continue };
        errors += 1;
        let text = error.to_string();
        let at_line = error.position.map(|(line, _)| line) == Some(m.line)
            || error.message.contains(&format!("line {}", m.line));
        if !at_line {
            failures.push(format!(
                "{}:{} {}: points at {:?}: {}",
                m.scenario, m.line, m.what, error.position, error.message
            ));
        }
        if text.len() > 600 {
            failures.push(format!(
                "{}:{} {}: {}-byte error",
                m.scenario,
                m.line,
                m.what,
                text.len()
            ));
        }
        for vague in ["did not match any variant", "wanted string or table"] {
            if error.message.contains(vague) {
                failures.push(format!(
                    "{}:{} {}: vague: {}",
                    m.scenario, m.line, m.what, error.message
                ));
            }
        }
    }
    assert!(errors > 200, "only {errors} of the mutations are errors");
    assert!(
        failures.is_empty(),
        "{} of {} mutations ({errors} errors) are reported badly:\n{}",
        failures.len(),
        mutations.len(),
        failures.join("\n")
    );
}

/// Values tried for each field of a custom device, as TOML text: typical ones, the edges of
/// each range and beyond (0, negative, nan, inf, huge), and values of the wrong type.
fn device_field_values() -> FieldValues {
    const NUMBERS: [&str; 9] = [
        "0",
        "1",
        "2",
        "-1",
        "nan",
        "inf",
        "1e30",
        "4294967295",
        "9223372036854775807",
    ];
    let times = vec![
        "\"0ns\"",
        "\"1ns\"",
        "\"56us\"",
        "\"1s\"",
        "\"2s\"",
        "\"1000s\"",
        "\"-5ms\"",
        "nan",
    ];
    let sizes = vec![
        "0",
        "4096",
        "\"4KiB\"",
        "\"16KiB\"",
        "\"1GiB\"",
        "\"4TiB\"",
        "\"5TiB\"",
        "-1",
        "nan",
    ];
    let bandwidths = vec![
        "0",
        "1",
        "\"1kB/s\"",
        "\"400MB/s\"",
        "\"1000GB/s\"",
        "-1",
        "nan",
    ];
    let counts: Vec<&str> = NUMBERS
        .iter()
        .copied()
        .chain(["4", "16", "32", "64", "256", "1024", "1025"])
        .collect();
    let fractions = vec![
        "0.0", "0.07", "1.0", "-0.1", "2.0", "nan", "inf", "-inf", "1e308",
    ];
    let mut fields = vec![
        ("capacity", sizes.clone()),
        ("write_cache", sizes.clone()),
        ("slc_buffer", sizes.clone()),
        ("page_size", sizes),
        ("bus_bandwidth", bandwidths.clone()),
        ("channel_bandwidth", bandwidths),
        ("over_provisioning", fractions),
        (
            "scheduler",
            vec![
                "\"fifo\"",
                "\"fifo-read-priority\"",
                "\"fg-aware\"",
                "\"cfq\"",
                "\"\"",
            ],
        ),
        (
            "suspend",
            vec!["\"off\"", "\"reads\"", "\"foreground\"", "\"all\""],
        ),
    ];
    for field in [
        "queue_depth",
        "controller_slots",
        "channels",
        "dies_per_channel",
        "planes",
        "pages_per_block",
        "gc_free_blocks",
        "packed_write_max",
        "suspend_max",
    ] {
        fields.push((field, counts.clone()));
    }
    for field in [
        "read_overhead",
        "write_overhead",
        "flush_overhead",
        "discard_overhead",
        "discard_per_page",
        "read_time",
        "program_time",
        "erase_time",
        "slc_read_time",
        "slc_program_time",
        "program_suspend_latency",
        "erase_suspend_latency",
        "suspend_resume_overhead",
    ] {
        fields.push((field, times.clone()));
    }
    fields
}

/// Values tried per field, as TOML text.
type FieldValues = Vec<(&'static str, Vec<&'static str>)>;

/// A workload kind, its table's fixed lines, and the values tried for its fields.
type WorkloadValues = (&'static str, &'static str, FieldValues);

/// Each workload kind with values tried for its fields (the rest of its table is fixed).
fn workload_values() -> Vec<WorkloadValues> {
    let sizes = vec![
        "0", "1", "\"512B\"", "\"4KiB\"", "\"1MiB\"", "\"1GiB\"", "\"1TiB\"", "-1", "nan",
    ];
    let times = vec!["\"0ns\"", "\"1ms\"", "\"1s\"", "\"-1ms\"", "nan"];
    let counts = vec!["0", "1", "4", "1000", "-1", "nan", "18446744073709551615"];
    vec![
        (
            "seq-write",
            "path = \"/data/a\"\nsize = \"1MiB\"",
            vec![
                ("size", sizes.clone()),
                ("io_size", sizes.clone()),
                ("fsync_every", sizes.clone()),
                ("think", times.clone()),
                (
                    "mode",
                    vec!["\"buffered\"", "\"sync\"", "\"direct\"", "\"x\""],
                ),
            ],
        ),
        (
            "file-read",
            "path = \"/data/b\"\nfile_size = \"1MiB\"",
            vec![
                ("file_size", sizes.clone()),
                ("io_size", sizes.clone()),
                ("think", times.clone()),
                ("count", counts.clone()),
                ("pattern", vec!["\"random\"", "\"sequential\"", "\"x\""]),
                ("direct", vec!["true", "false", "1"]),
            ],
        ),
        (
            "fsync-write",
            "path = \"/data/c\"",
            vec![
                ("io_size", sizes.clone()),
                ("region", sizes.clone()),
                ("think", times.clone()),
                ("count", counts.clone()),
                ("prefill", vec!["true", "false"]),
            ],
        ),
        (
            "video",
            "path = \"/data/v\"\nfile_size = \"8MiB\"\nbitrate = \"1MB/s\"",
            vec![
                ("file_size", sizes.clone()),
                (
                    "bitrate",
                    vec!["0", "\"1B/s\"", "\"1MB/s\"", "\"1TB/s\"", "-1"],
                ),
                ("fps", counts.clone()),
                ("count", counts.clone()),
            ],
        ),
        (
            "toy-io",
            "interval = \"1ms\"",
            vec![
                ("interval", times.clone()),
                ("depth", counts.clone()),
                ("count", counts.clone()),
                ("size", sizes.clone()),
            ],
        ),
        (
            "sqlite",
            "database = \"/data/data/x/databases/a.db\"\nstatements = [\"SELECT 1\"]",
            vec![
                ("count", counts.clone()),
                ("value_size", counts.clone()),
                ("page_size", vec!["512", "4096", "65536", "3000", "0", "-1"]),
                (
                    "journal_mode",
                    vec!["\"delete\"", "\"wal\"", "\"off\"", "\"x\""],
                ),
                ("synchronous", vec!["\"off\"", "\"full\"", "\"x\""]),
                (
                    "statements",
                    vec![
                        "[\"\"]",
                        "[\"-- only a comment\"]",
                        "[\"SELEKT 1\"]",
                        "[\"CREATE TABLE IF NOT EXISTS t(v); INSERT INTO t VALUES({i})\"]",
                        "[]",
                    ],
                ),
                ("benchmark", vec!["\"mobibench\"", "\"speedtest\"", "\"x\""]),
                (
                    "busy_timeout",
                    vec!["\"0ns\"", "\"1ms\"", "\"1.5ms\"", "\"1000d\""],
                ),
            ],
        ),
        (
            "filebench",
            "file = \"varmail\"",
            vec![
                (
                    "file",
                    vec![
                        "\"varmail\"",
                        "\"webserver\"",
                        "\"nosuch\"",
                        "\"fuzz/corpus/filebench_run/delay-zero.f\"",
                    ],
                ),
                (
                    "set",
                    vec![
                        "{ nfiles = 10 }",
                        "{ nfile = 10 }",
                        "{ nfiles = 0 }",
                        "{ filesize = \"1k\" }",
                        "{ nthreads = -1 }",
                        "{ iosize = 0 }",
                    ],
                ),
                ("runtime", times.clone()),
            ],
        ),
        (
            "replay",
            "trace = \"fuzz/corpus/replay_run/pixel.csv\"",
            vec![
                (
                    "trace",
                    vec![
                        "\"fuzz/corpus/replay_run/pixel.csv\"",
                        "\"fuzz/corpus/replay_run/disksim.txt\"",
                        "\"fuzz/corpus/replay_run/blkparse.txt\"",
                        "\"fuzz/corpus/replay_run/pixel-timestamp-near-2-64.csv\"",
                        "\"/nonexistent\"",
                    ],
                ),
                ("mode", vec!["\"open\"", "\"closed\"", "\"x\""]),
                ("time_scale", vec!["1.0", "0.0", "-1.0", "nan", "1e300"]),
                ("queue_depth", counts.clone()),
                ("wrap", vec!["true", "false"]),
                ("max_requests", counts.clone()),
            ],
        ),
        (
            "fio",
            "rw = \"randread\"\nbs = \"4k\"\nsize = \"1m\"",
            vec![
                ("rw", vec!["\"read\"", "\"randwrite\"", "\"trim\"", "\"x\""]),
                ("bs", vec!["\"4k\"", "\"0\"", "\"1\"", "\"1g\"", "\"-1\""]),
                ("size", vec!["\"1m\"", "\"0\"", "\"1t\"", "\"100t\""]),
                ("iodepth", vec!["1", "32", "0", "100000"]),
                ("direct", vec!["0", "1", "2"]),
                ("numjobs", vec!["1", "4", "0", "1000000"]),
            ],
        ),
    ]
}

/// A scenario of 1 ms with a custom device (the `emmc-5.1` profile written out, with `edits`
/// applied) and one app running `kind` with `workload_edits`.
fn generated_scenario(
    device_edits: &[(&str, &str)],
    fill: &str,
    (kind, base, _): &WorkloadValues,
    workload_edits: &[(&str, &str)],
) -> String {
    let mut profile = mobistack::dev::profile::builtin_profile("emmc-5.1").unwrap();
    profile.published = Default::default();
    let mut device: toml::Table = toml::Table::try_from(&profile).unwrap();
    device.remove("published");
    let mut text = String::from("name = \"generated\"\nduration = \"1ms\"\n");
    text +=
        &format!("[stack.device]\nprofile = \"custom\"\nfill = {fill}\n[stack.device.custom]\n");
    for (key, value) in &device {
        let value = device_edits
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map_or(value.to_string(), |(_, v)| v.to_string());
        text += &format!("{key} = {value}\n");
    }
    text += &format!("\n[[app]]\nname = \"a\"\n[app.workload.{kind}]\n");
    let mut lines: Vec<(String, String)> = base
        .lines()
        .map(|l| l.split_once(" = ").unwrap())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    for (key, value) in workload_edits {
        match lines.iter_mut().find(|(k, _)| k == key) {
            Some(line) => line.1 = value.to_string(),
            None => lines.push((key.to_string(), value.to_string())),
        }
    }
    for (key, value) in lines {
        text += &format!("{key} = {value}\n");
    }
    text
}

/// Whether a run of `scenario` starts: its stack builds and no app fails to start (an app's
/// failure recorded at time 0 by the app itself, `AppContext::fail_to_start`).
fn run_starts(scenario: &scenario::Scenario) -> Result<(), String> {
    for variant in &scenario.variants {
        let result =
            mobistack::run::run_one(scenario, variant, 1, |_| {}).map_err(|e| e.to_string())?;
        for (name, app) in &result.apps {
            if let Some(failure) = app
                .failure
                .as_ref()
                .filter(|f| f.at_ns == 0 && &f.task == name)
            {
                return Err(format!("app `{name}` did not start: {}", failure.message));
            }
        }
    }
    Ok(())
}

/// `validate` accepts exactly the scenarios whose runs start: one that validates builds its
/// stack and starts its apps (a run only starts what validates, by construction, since `run`
/// parses with the same checks). Generated: a custom device with up to three fields set over
/// their domain (nan, inf, 0, negative, huge, wrong type), a `fill`, and one app of each
/// workload kind (file workloads, toy, sqlite, filebench, replay, fio) with up to two fields set
/// likewise; 400 cases, each run for 1 ms.
#[test]
fn a_scenario_that_validates_starts_to_run() {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};
    let fields = device_field_values();
    let workloads = workload_values();
    let strategy = (
        proptest::collection::vec((0..fields.len(), 0usize..1000), 0..4),
        prop_oneof![3 => Just("0.5"), 1 => proptest::sample::select(vec!["0.0", "1.0", "nan", "1.5", "-0.5"])],
        0..workloads.len(),
        proptest::collection::vec((0usize..1000, 0usize..1000), 0..3),
    );
    // A fixed sample (the deterministic generator): the floor on validated cases below must not
    // depend on the run.
    let mut runner = TestRunner::new_with_rng(
        Config {
            cases: 400,
            failure_persistence: None,
            ..Config::default()
        },
        proptest::test_runner::TestRng::deterministic_rng(
            proptest::test_runner::RngAlgorithm::ChaCha,
        ),
    );
    let validated = std::cell::Cell::new(0usize);
    let validated_kinds = std::cell::RefCell::new(std::collections::BTreeSet::new());
    let cases = std::cell::Cell::new(0usize);
    let result = runner.run(&strategy, |(device_picks, fill, kind, workload_picks)| {
        let device_edits: Vec<(&str, &str)> = device_picks
            .iter()
            .map(|&(f, v)| (fields[f].0, fields[f].1[v % fields[f].1.len()]))
            .collect();
        let workload = &workloads[kind];
        let workload_edits: Vec<(&str, &str)> = workload_picks
            .iter()
            .map(|&(f, v)| {
                let (field, values) = &workload.2[f % workload.2.len()];
                (*field, values[v % values.len()])
            })
            .collect();
        let text = generated_scenario(&device_edits, fill, workload, &workload_edits);
        cases.set(cases.get() + 1);
        if let Ok(parsed) = scenario::parse("generated.toml", &text) {
            validated.set(validated.get() + 1);
            validated_kinds.borrow_mut().insert(workload.0);
            if let Err(error) = run_starts(&parsed) {
                prop_assert!(false, "validates but does not start: {error}\n{text}");
            }
        }
        Ok(())
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
    // Both sides are exercised: enough scenarios validate (and run) to mean something.
    assert!(
        validated.get() * 5 >= cases.get(),
        "only {} of {} generated scenarios validate",
        validated.get(),
        cases.get()
    );
    let kinds: Vec<&str> = workloads.iter().map(|w| w.0).collect();
    let missing: Vec<&&str> = kinds
        .iter()
        .filter(|k| !validated_kinds.borrow().contains(*k))
        .collect();
    assert!(
        missing.is_empty(),
        "no generated scenario of {missing:?} validated"
    );
    eprintln!(
        "{} of {} generated scenarios validated and started",
        validated.get(),
        cases.get()
    );
}
