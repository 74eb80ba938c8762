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
