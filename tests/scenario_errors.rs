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
