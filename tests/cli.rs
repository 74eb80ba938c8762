//! The `mobistack` binary: exit codes, JSON output, error text.

use std::process::Command;

fn mobistack(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mobistack"))
        .args(args)
        .output()
        .expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn run_prints_a_table_or_one_json_object() {
    let (code, table, _) = mobistack(&["run", "demo", "--variant", "fg-first"]);
    assert_eq!(code, 0);
    assert!(
        table.contains("fg-first") && !table.contains("fifo "),
        "{table}"
    );
    let (code, json, _) = mobistack(&["run", "demo", "--json", "--seed", "3"]);
    assert_eq!(code, 0);
    let value: serde_json::Value = serde_json::from_str(&json).expect("one JSON object");
    assert_eq!(value["schema"], "mobistack.results");
    assert_eq!(value["runs"].as_array().unwrap().len(), 2);
    assert_eq!(value["runs"][0]["seed"], 3);
}

#[test]
fn bad_input_exits_2_and_a_failed_run_exits_1() {
    let (code, _, err) = mobistack(&["validate", "no-such-scenario"]);
    assert_eq!(code, 2);
    assert!(err.contains("no built-in scenario"), "{err}");
    let (code, _, err) = mobistack(&["run", "demo", "--variant", "nope"]);
    assert_eq!(code, 2);
    assert!(err.contains("no variant `nope`"), "{err}");
    let (code, _, err) = mobistack(&["run", "deadlock"]);
    assert_eq!(code, 1);
    assert!(err.contains("deadlock at"), "{err}");
}

#[test]
fn list_and_validate_describe_the_builtins() {
    let (code, out, _) = mobistack(&["list", "--json"]);
    assert_eq!(code, 0);
    let value: serde_json::Value = serde_json::from_str(&out).unwrap();
    let names: Vec<&str> = value["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"demo") && names.contains(&"deadlock"));
    let (code, out, _) = mobistack(&["validate", "demo"]);
    assert_eq!(code, 0);
    assert!(out.contains("2 variant(s) (fifo, fg-first)"), "{out}");
}
