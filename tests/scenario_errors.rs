//! Bad scenario input is an error that names the file, the line and the field; never a panic.

use mobistack::scenario::{self, ScenarioError};

const DEMO: &str = include_str!("../scenarios/demo.toml");

fn parse_edit(from: &str, to: &str) -> Result<scenario::Scenario, ScenarioError> {
    assert!(DEMO.contains(from), "the demo contains {from:?}");
    scenario::parse("edited.toml", &DEMO.replacen(from, to, 1))
}

fn line_of(text: &str, needle: &str) -> usize {
    text.lines().position(|l| l.contains(needle)).unwrap() + 1
}

#[test]
fn the_demo_parses_with_two_variants() {
    let s = scenario::parse("demo.toml", DEMO).unwrap();
    assert_eq!(s.variants.len(), 2);
    assert_eq!(s.apps.len(), 3);
    assert_eq!(s.duration, 10_000_000_000);
}

#[test]
fn a_misspelled_field_names_file_line_and_field() {
    let err = parse_edit("interval = \"20ms\"", "intervall = \"20ms\"").unwrap_err();
    let (line, _) = err.position.unwrap();
    assert_eq!(err.file, "edited.toml");
    assert_eq!(line, line_of(DEMO, "interval = \"20ms\""));
    assert!(err.message.contains("unknown field `intervall`"), "{err}");
    assert!(err.to_string().starts_with(&format!("edited.toml:{line}:")));
}

#[test]
fn a_bad_unit_names_the_value_and_its_line() {
    let err = parse_edit("service_time = \"1ms\"", "service_time = \"1 fortnight\"").unwrap_err();
    assert_eq!(err.position.unwrap().0, line_of(DEMO, "service_time"));
    assert!(
        err.message.contains("invalid duration `1 fortnight`"),
        "{err}"
    );
    let err = parse_edit("size = \"64KiB\"", "size = \"64KiBs\"").unwrap_err();
    assert!(err.message.contains("invalid size `64KiBs`"), "{err}");
    let err = parse_edit("duration = \"10s\"", "duration = 10").unwrap_err();
    assert!(err.message.contains("has no unit"), "{err}");
}

#[test]
fn a_misspelled_field_in_a_variant_override_is_caught() {
    let err = parse_edit("policy = \"fg-first\"", "polcy = \"fg-first\"").unwrap_err();
    assert!(err.message.contains("unknown field `polcy`"), "{err}");
    let err = parse_edit("policy = \"fg-first\"", "policy = \"fastest\"").unwrap_err();
    assert!(err.message.contains("unknown variant `fastest`"), "{err}");
}

#[test]
fn unknown_apps_and_duplicates_are_reported_where_they_are() {
    let err = parse_edit("foreground = \"gallery\"", "foreground = \"galery\"").unwrap_err();
    assert!(err.message.contains("unknown app `galery`"), "{err}");
    assert_eq!(
        err.position.unwrap().0,
        line_of(DEMO, "foreground = \"gallery\"")
    );
    let err = parse_edit("name = \"gallery\"", "name = \"camera\"").unwrap_err();
    assert!(
        err.message.contains("app `camera` is defined twice"),
        "{err}"
    );
    let err = parse_edit("name = \"fg-first\"", "name = \"fifo\"").unwrap_err();
    assert!(
        err.message.contains("variant `fifo` is defined twice"),
        "{err}"
    );
}

#[test]
fn missing_or_empty_required_values_are_errors() {
    let err = parse_edit("duration = \"10s\"\n", "").unwrap_err();
    assert!(err.message.contains("`duration` is required"), "{err}");
    let err = parse_edit("seeds = [1]", "seeds = []").unwrap_err();
    assert!(err.message.contains("at least one seed"), "{err}");
    let err = parse_edit("depth = 8", "depth = 0").unwrap_err();
    assert!(err.message.contains("depth"), "{err}");
    let err = parse_edit(
        "at = \"5s\"\nstart",
        "at = \"5s\"\nstop = \"camera\"\nstart",
    )
    .unwrap_err();
    assert!(err.message.contains("exactly one of"), "{err}");
}

#[test]
fn malformed_toml_and_missing_files_are_errors() {
    let err = scenario::parse("broken.toml", "name = \"x\"\n[stack\n").unwrap_err();
    assert_eq!(err.position.unwrap().0, 2);
    let err = scenario::load("/nonexistent/scenario.toml").unwrap_err();
    assert!(err.message.contains("no built-in scenario"), "{err}");
}

#[test]
fn selecting_an_unknown_variant_lists_the_known_ones() {
    let mut s = scenario::parse("demo.toml", DEMO).unwrap();
    let err = s.select_variant("nope").unwrap_err();
    assert!(err.contains("fifo, fg-first"), "{err}");
    assert_eq!(
        s.variants.len(),
        2,
        "a failed selection keeps every variant"
    );
    s.select_variant("fg-first").unwrap();
    assert_eq!(s.variants.len(), 1);
}

#[test]
fn every_builtin_scenario_is_valid() {
    for builtin in scenario::builtin::BUILTINS {
        scenario::parse(builtin.name, builtin.source)
            .unwrap_or_else(|e| panic!("built-in {} is invalid: {e}", builtin.name));
    }
}

#[test]
fn the_readme_example_scenario_is_valid() {
    let readme = include_str!("../README.md");
    let start = readme.find("```toml\n").expect("README has a TOML example") + "```toml\n".len();
    let end = start + readme[start..].find("```").expect("the example ends");
    let s = scenario::parse("README.md", &readme[start..end]).unwrap();
    assert_eq!(s.variants.len(), 2);
    assert_eq!(s.apps.len(), 2);
}

const BG: &str = include_str!("../scenarios/bg-write-fg-read.toml");

fn parse_bg_edit(from: &str, to: &str) -> ScenarioError {
    assert!(BG.contains(from), "the scenario contains {from:?}");
    scenario::parse("edited.toml", &BG.replacen(from, to, 1)).unwrap_err()
}

#[test]
fn a_lock_listed_twice_is_an_input_error_at_its_line() {
    // It used to pass validation and trip an engine assertion in the run (exit 101).
    let source = "name = \"dup\"\nduration = \"1s\"\n\n[[app]]\nname = \"locker\"\n[app.workload.toy-locks]\nlocks = [\"inode\", \"inode\"]\nhold = \"1ms\"\n";
    let err = scenario::parse("dup.toml", source).unwrap_err();
    assert_eq!(err.position.unwrap().0, 7, "{err}");
    assert!(err.message.contains("names `inode` twice"), "{err}");
}

#[test]
fn values_of_the_wrong_type_name_the_field_and_what_is_expected() {
    let err = parse_bg_edit("role = \"foreground\"", "role = 5");
    assert_eq!(
        err.message,
        "field `role`: expected one of `foreground`, `background`, `service`, found integer"
    );
    assert_eq!(
        err.position.unwrap().0,
        line_of(BG, "role = \"foreground\"")
    );
    let err = parse_bg_edit("capacity = \"8GiB\"", "capacity = true");
    assert!(
        err.message.starts_with("field `capacity`: expected a size")
            && err.message.contains("e.g. \"4KiB\""),
        "{err}"
    );
    let err = parse_bg_edit("think = \"20ms\"", "think = 1.5");
    assert!(err.message.contains("field `think`"), "{err}");
    assert!(err.message.contains("\"1.5ms\""), "{err}");
    let err = parse_bg_edit("[app.workload.file-read]\n", "workload = 3\n[app.x]\n");
    assert!(err.message.contains("field `workload`"), "{err}");
    assert!(err.message.contains("`file-read`"), "{err}");
    assert!(!err.message.contains("untagged"), "{err}");
    assert!(!err.message.contains("wanted string or table"), "{err}");
}

#[test]
fn a_huge_bad_value_is_cut_in_the_message_and_the_shown_line() {
    let huge = format!("think = \"{}ms\"", "7".repeat(1_000_000));
    let err = parse_bg_edit("think = \"20ms\"", &huge);
    let text = err.to_string();
    assert!(text.len() < 600, "{} bytes: {}", text.len(), &text[..300]);
    assert!(text.contains("(1000002 characters)"), "{text}");
    assert_eq!(err.position.unwrap().0, line_of(BG, "think = \"20ms\""));
}

#[test]
fn durations_past_the_documented_limit_are_rejected_not_saturated() {
    let err = parse_bg_edit(
        "duration = \"20s\"",
        "duration = \"18446744073709551615ns\"",
    );
    assert!(err.message.contains("at most 365 days"), "{err}");
    assert_eq!(err.position.unwrap().0, line_of(BG, "duration = \"20s\""));
}

#[test]
fn checks_after_parsing_point_at_the_field_not_the_table_name() {
    // io_size = 0 used to point at the app's `name` line.
    let err = parse_bg_edit("io_size = \"4KiB\"", "io_size = 0");
    assert_eq!(
        err.position.unwrap().0,
        line_of(BG, "io_size = \"4KiB\""),
        "{err}"
    );
    // A cross-field check names the other field's line.
    let err = parse_bg_edit("file_size = \"256MiB\"", "file_size = \"2KiB\"");
    assert!(err.message.contains("`io_size` is at line"), "{err}");
    // A VM knob in the base stack checked for a variant points at the knob.
    let err = parse_bg_edit("dirty_background_ratio = 5", "dirty_background_ratio = 500");
    assert_eq!(
        err.position.unwrap().0,
        line_of(BG, "dirty_background_ratio"),
        "{err}"
    );
    let err = parse_edit("name = \"demo\"", "name = \"\"").unwrap_err();
    assert_eq!(err.position.unwrap().0, line_of(DEMO, "name = \"demo\""));
    let err = parse_edit("duration = \"10s\"", "duration = 0").unwrap_err();
    assert_eq!(err.position.unwrap().0, line_of(DEMO, "duration = \"10s\""));
    // Two foreground apps: the second one's role, naming the first one's line.
    let err = parse_bg_edit("role = \"background\"", "role = \"foreground\"");
    assert_eq!(
        err.position.unwrap().0,
        line_of(BG, "role = \"background\"")
    );
    let first = format!("(line {})", line_of(BG, "role = \"foreground\""));
    assert!(err.message.contains(&first), "{err}");
}

#[test]
fn more_runs_than_the_limit_is_an_error_at_the_seeds() {
    let seeds: Vec<String> = (0..=scenario::MAX_RUNS / 4)
        .map(|s| s.to_string())
        .collect();
    let err = parse_bg_edit("seeds = [1]", &format!("seeds = [{}]", seeds.join(", ")));
    assert!(err.message.contains("more than the limit of 1000"), "{err}");
    assert_eq!(err.position.unwrap().0, line_of(BG, "seeds = [1]"));
}

#[test]
fn more_workload_tasks_than_the_limit_is_an_error_not_an_engine_assertion() {
    let mut source = String::from("name = \"many\"\nduration = \"1s\"\n");
    for i in 0..5 {
        source.push_str(&format!(
            "[[app]]\nname = \"a{i}\"\n[app.workload.fio]\ndirect = 1\nrw = \"randread\"\nsize = \"1m\"\nioengine = \"libaio\"\niodepth = 256\nnumjobs = 256\n"
        ));
    }
    let err = scenario::parse("many.toml", &source).unwrap_err();
    assert!(
        err.message.contains("more than the limit of 262144"),
        "{err}"
    );
    assert!(err.message.contains("`a4`"), "{err}");
    assert_eq!(
        err.position.unwrap().0,
        line_of(&source, "name = \"a4\"") + 1
    );
}

#[test]
fn a_long_value_with_spaces_and_backticks_is_cut_too() {
    // Found by fuzzing: a profile name with a backtick and runs of spaces was echoed in pieces.
    let value = format!("x`{}", "cc c   ".repeat(1_000));
    let source = DEMO.replacen(
        "[stack.toy]",
        &format!("[stack.device]\nprofile = \"{value}\"\n\n[stack.toy]"),
        1,
    );
    let err = scenario::parse("long.toml", &source).unwrap_err();
    let text = err.to_string();
    assert!(text.len() < 1_400, "a {}-byte error", text.len());
    assert_eq!(
        err.position.unwrap().0,
        line_of(&source, "profile = "),
        "{err}"
    );
}

const IO_ACCOUNT: &str = include_str!("../scenarios/io-account.toml");

#[test]
fn an_external_journal_without_its_device_names_the_journal_field_and_its_line() {
    // The external-journal variant without its [variant.stack.fs.journal_device] table.
    let cut = IO_ACCOUNT
        .find("\n[variant.stack.fs.journal_device]")
        .expect("the variant's device table");
    let source = &IO_ACCOUNT[..cut];
    let err = scenario::parse("edited.toml", source).unwrap_err();
    assert_eq!(err.file, "edited.toml");
    let (line, _) = err.position.expect("a position");
    assert_eq!(line, line_of(source, "journal = \"external\""), "{err}");
    assert!(
        err.message.contains("variant `external-journal`: [stack.fs] `journal` = \"external\" needs the journal's device: add [stack.fs.journal_device]"),
        "{err}"
    );
    // A journal device for an internal journal is an error at the device's table too.
    let source = IO_ACCOUNT.replace("journal = \"external\"", "journal = \"internal\"");
    let err = scenario::parse("edited.toml", &source).unwrap_err();
    assert!(
        err.message
            .contains("`journal_device` is the device of an external journal"),
        "{err}"
    );
    // The journal's device is checked like [stack.device].
    let source = IO_ACCOUNT.replace("capacity = \"512MiB\"", "capacity = \"1MiB\"");
    let err = scenario::parse("edited.toml", &source).unwrap_err();
    assert!(
        err.message
            .contains("device profile `emmc-5.0`: `capacity` 1048576 B"),
        "{err}"
    );
}

#[test]
fn an_unbounded_request_list_under_a_blk_mq_variant_names_the_variant_and_the_field() {
    // `request_list = "unbounded"` (QASIO §4's description) is a legacy request list's; a
    // variant moving the queue to mq-deadline is an error at the field, naming the variant.
    let source = include_str!("../scenarios/qasio/m1.toml").replacen(
        "elevator = \"cfq\"",
        "elevator = \"cfq\"\nrequest_list = \"unbounded\"",
        1,
    );
    let err = scenario::parse("m1.toml", &source).unwrap_err();
    assert!(err.message.contains("variant `mq-deadline`"), "{err}");
    assert!(err.message.contains("`request_list`"), "{err}");
    assert_eq!(
        err.position.unwrap().0,
        line_of(&source, "request_list = \"unbounded\""),
        "{err}"
    );
}

/// A scenario with a custom device (the built-in `emmc-5.1` profile written out whole, as
/// `device fit` prints one) whose `field` line is replaced by `field = value`.
fn custom_device_scenario(field: &str, value: &str) -> String {
    let profile = mobistack::dev::profile::builtin_profile("emmc-5.1").unwrap();
    let table = toml::to_string(&profile).unwrap();
    // The `[published]` sub-table is left out (it would need its full header).
    let table = table.split("\n[published]").next().unwrap();
    let prefix = format!("{field} = ");
    assert!(
        table.lines().any(|l| l.starts_with(&prefix)),
        "the profile has `{field}`"
    );
    let edited: Vec<String> = table
        .lines()
        .map(|l| {
            if l.starts_with(&prefix) {
                format!("{field} = {value}")
            } else {
                l.to_string()
            }
        })
        .collect();
    format!(
        "name = \"custom\"\nduration = \"1ms\"\n[stack.device]\nprofile = \"custom\"\n[stack.device.custom]\n{}\n\n[[app]]\nname = \"w\"\n[app.workload.seq-write]\npath = \"/data/f\"\nsize = \"1MiB\"\n",
        edited.join("\n")
    )
}

#[test]
fn every_bad_custom_device_field_is_an_error_at_its_own_line_with_its_range() {
    // Each of these passed `validate` and then failed `run` (nan over-provisioning, a zero
    // GC reserve), panicked (4e9 channels) or ran a device no part has; errors pointed at
    // the `profile` line.
    let cases = [
        ("over_provisioning", "nan", "between 0 and 1"),
        ("over_provisioning", "2.0", "between 0 and 1"),
        ("over_provisioning", "-0.1", "between 0 and 1"),
        ("over_provisioning", "inf", "between 0 and 1"),
        ("planes", "0", "between 1 and 16"),
        ("channels", "0", "between 1 and 1024"),
        ("channels", "4000000000", "between 1 and 1024"),
        ("dies_per_channel", "0", "between 1 and 1024"),
        ("pages_per_block", "0", "between 2 and 16384"),
        ("page_size", "4095", "multiple of the 4 KiB mapping unit"),
        ("gc_free_blocks", "0", "between 2"),
        ("gc_free_blocks", "1000000", "and 1024"),
        ("erase_time", "\"0ns\"", "between 1ns and 1s"),
        ("slc_read_time", "\"0ns\"", "between 1ns and 1s"),
        ("read_overhead", "\"1000s\"", "between 0 and 1s"),
        ("suspend_resume_overhead", "\"2s\"", "between 0 and 1s"),
        ("bus_bandwidth", "0", "must be positive"),
        ("slc_buffer", "\"5TiB\"", "and 4.00 TiB"),
        ("write_cache", "\"5TiB\"", "and 4.00 TiB"),
        ("packed_write_max", "100000", "between 0 (none) and 255"),
        ("suspend_max", "100000", "between 0 and 1000"),
        ("queue_depth", "0", "between 1 and 256"),
        ("scheduler", "\"cfq\"", "known:"),
    ];
    for (field, value, range) in cases {
        let source = custom_device_scenario(field, value);
        let err = scenario::parse("custom.toml", &source).unwrap_err();
        let line = line_of(&source, &format!("{field} = {value}"));
        assert_eq!(
            err.position.map(|p| p.0),
            Some(line),
            "{field} = {value}: {err}"
        );
        let column = format!("{field} = ").len() + 1;
        assert_eq!(err.position.unwrap().1, column, "{err}");
        assert!(err.message.contains(&format!("`{field}`")), "{err}");
        assert!(err.message.contains(range), "{field} = {value}: {err}");
    }
    // A capacity whose GC reserve overflows the 32-bit page map names both fields.
    let source = custom_device_scenario("gc_free_blocks", "1024")
        .replace("capacity = 34359738368", "capacity = \"4TiB\"")
        .replace("planes = 2", "planes = 16")
        .replace("pages_per_block = 128", "pages_per_block = 16384");
    let err = scenario::parse("custom.toml", &source).unwrap_err();
    assert!(err.message.contains("32-bit page map"), "{err}");
    // A published figure, two tables down, is found at its own line too.
    let source = custom_device_scenario("scheduler", "\"fifo-read-priority\"").replace(
        "[[app]]",
        "[stack.device.custom.published]\nseq_read_mbps = nan\n\n[[app]]",
    );
    let err = scenario::parse("custom.toml", &source).unwrap_err();
    assert_eq!(
        err.position.map(|p| p.0),
        Some(line_of(&source, "seq_read_mbps = nan")),
        "{err}"
    );
}

#[test]
fn nesting_deeper_than_the_parser_allows_names_the_line_and_column() {
    let head = "name = \"x\"\nduration = \"1s\"\n";
    let dotted = ["a"; 10_000].join(".");
    for (text, column) in [
        (format!("{head}{dotted} = 1\n"), 1),
        (format!("{head}[{dotted}]\n"), 2),
        (format!("{head}b = {{ {dotted} = 1 }}\n"), 7),
        (format!("{head}b = {}\n", "[".repeat(10_000)), 85),
        (format!("{head}b = {}1\n", "{ a = ".repeat(10_000)), 485),
    ] {
        let err = scenario::parse("deep.toml", &text).unwrap_err();
        assert_eq!(err.position, Some((3, column)), "{err}");
        assert!(err.message.contains("recurs"), "{err}");
    }
}
