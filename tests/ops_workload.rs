//! The `ops` workload: a loop of system calls written in the scenario (QASIO's M1 shape), with
//! and without a background writer.

use mobistack::run::{run_scenario, RunOptions};
use mobistack::scenario;

const M1_LIKE: &str = r#"
name = "m1-like"
seeds = [1]
duration = "60s"
end = "apps-done"

[stack.device]
profile = "emmc-5.0"
capacity = "4GiB"

# noop: the loop's synchronous writes queue behind the flusher's (CFQ would serve them first).
[stack.block]
elevator = "noop"

[stack.vm]
ram = "1GiB"
dirty_expire = "2s"
dirty_background_ratio = 5

[[app]]
name = "m1"
role = "foreground"
[app.workload.ops]
count = 40
think = "20ms"
steps = [
  { op = "creat", path = "/data/m1/file{i}" },
  { op = "write", size = "4KiB" },
  { op = "fsync" },
  { op = "close" },
  { op = "stat", path = "/data/m1/file{i}" },
]

[[app]]
name = "bg"
role = "background"
[app.workload.seq-write]
path = "/sdcard/big"
size = "512MiB"

[[variant]]
name = "with-bg"

[[variant]]
name = "alone"
"#;

#[test]
fn an_ops_loop_records_each_call_and_each_iteration() {
    let mut s = scenario::parse("m1-like.toml", M1_LIKE).unwrap();
    // "alone": drop the background app from that variant by stopping it at once.
    s.variants.retain(|v| v.name == "with-bg");
    let results = run_scenario(&s, &RunOptions::default()).unwrap();
    let m1 = &results.runs[0].apps["m1"];
    for op in ["creat", "write", "fsync", "close", "stat", "iteration"] {
        assert_eq!(m1.ops[op].count, 40, "{op}");
    }
    assert!(
        !m1.counters.keys().any(|k| k.starts_with("errno")),
        "{:?}",
        m1.counters
    );
    assert_eq!(m1.counters["bytes"], 40 * 4096);
    // An iteration is at least its calls (they run one after another).
    let iteration = &m1.ops["iteration"];
    let calls: u64 = ["creat", "write", "fsync", "close", "stat"]
        .iter()
        .map(|op| m1.ops[*op].mean_ns as u64)
        .sum();
    assert!(iteration.mean_ns as u64 >= calls);
}

#[test]
fn a_background_writer_slows_the_fsyncs_of_the_loop() {
    let with_bg = scenario::parse("m1-like.toml", M1_LIKE).unwrap();
    let alone_text = M1_LIKE.replace("size = \"512MiB\"", "size = \"4KiB\"");
    let alone = scenario::parse("m1-like.toml", &alone_text).unwrap();
    let fsync_max = |s: &scenario::Scenario| {
        let results = run_scenario(s, &RunOptions::default()).unwrap();
        results.runs[0].apps["m1"].ops["fsync"].max_ns
    };
    let (busy, quiet) = (fsync_max(&with_bg), fsync_max(&alone));
    assert!(
        busy > 5 * quiet,
        "fsync max with a background writer {busy} ns vs alone {quiet} ns"
    );
}
