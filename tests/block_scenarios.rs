//! Scenarios whose apps issue block I/O through the block layer to a device model.

use mobistack::run::{run_scenario, RunOptions};
use mobistack::scenario;

const SCENARIO: &str = include_str!("../scenarios/fg-read-bg-write.toml");

fn edit(from: &str, to: &str) -> Result<scenario::Scenario, scenario::ScenarioError> {
    assert!(SCENARIO.contains(from), "the scenario contains {from:?}");
    scenario::parse("edited.toml", &SCENARIO.replacen(from, to, 1))
}

#[test]
fn the_background_writer_gets_the_devices_sequential_write_bandwidth() {
    let mut s = scenario::load("fg-read-bg-write").unwrap();
    s.select_variant("noop").unwrap();
    let results = run_scenario(&s, &RunOptions::default()).unwrap();
    let run = &results.runs[0];
    let seconds = run.virtual_ns as f64 / 1e9;
    let mbps = run.apps["update"].counters["bytes"] as f64 / 1e6 / seconds;
    // eMMC 5.1 sequential write: 125 MB/s (REFERENCES.md); queueing 32 deep through the block
    // layer must deliver it, give or take the reader's share.
    assert!(
        (100.0..=130.0).contains(&mbps),
        "background writer {mbps:.1} MB/s"
    );
    // Every op's wait is the block I/O wait, attributed to the block layer.
    let gallery = &run.apps["gallery"];
    assert!(gallery.ops["read"].count > 10);
    assert!(gallery.blocked_by_layer_ns["block"] > 0);
    // The run stops at its duration with the device's queue (32 deep) still busy.
    let in_flight = run.counters["block.dispatched"] - run.counters["block.completed"];
    assert!(in_flight <= 32, "{in_flight} requests in flight at the end");
    assert!(
        run.device.is_object(),
        "device statistics are in the results"
    );
}

/// The 1-based line of the first line of the scenario containing `needle` (after `from` was
/// replaced by `to`).
fn line_in(from: &str, to: &str, needle: &str) -> usize {
    SCENARIO
        .replacen(from, to, 1)
        .lines()
        .position(|l| l.contains(needle))
        .expect("needle in the edited scenario")
        + 1
}

#[test]
fn bad_stack_names_in_variants_are_errors_at_the_field() {
    let err = edit("elevator = \"cfq\"", "elevator = \"anticipatory\"").unwrap_err();
    assert!(err.message.contains("variant `cfq`"), "{err}");
    assert!(
        err.message.contains("unknown `elevator` `anticipatory`"),
        "{err}"
    );
    assert_eq!(
        err.position.unwrap().0,
        line_in(
            "elevator = \"cfq\"",
            "elevator = \"anticipatory\"",
            "\"anticipatory\""
        ),
        "{err}"
    );
    let err = edit("profile = \"emmc-5.1\"", "profile = \"emmc-9\"").unwrap_err();
    assert!(err.message.contains("emmc-9"), "{err}");
    assert_eq!(err.position.unwrap().0, line_in("", "", "profile ="));
    let err = edit("scheduler = \"fg-aware\"", "scheduler = \"fastest\"").unwrap_err();
    assert!(err.message.contains("fastest"), "{err}");
    assert_eq!(err.position.unwrap().0, line_in("", "", "scheduler ="));
    // A capacity the model cannot map is an input error at validation, not a failed run.
    let err = edit("capacity = \"8GiB\"", "capacity = \"16TiB\"").unwrap_err();
    assert!(
        err.message.contains("beyond the model's limit of 4.00 TiB"),
        "{err}"
    );
    assert_eq!(err.position.unwrap().0, line_in("", "", "capacity ="));
}

#[test]
fn fio_options_in_an_app_are_checked_by_name_at_their_line() {
    let err = edit("ioengine = \"psync\"", "ioengine = \"mmap\"").unwrap_err();
    assert!(err.message.contains("ioengine=mmap"), "{err}");
    assert_eq!(
        err.position.unwrap().0,
        line_in("", "", "ioengine = \"psync\"")
    );
    let err = edit("bs = \"4k\"", "bs = \"4k\"\nzonemode = \"zbd\"").unwrap_err();
    assert!(
        err.message.contains("fio option `zonemode`: zoned I/O"),
        "{err}"
    );
    assert_eq!(
        err.position.unwrap().0,
        line_in("bs = \"4k\"", "bs = \"4k\"\nzonemode = \"zbd\"", "zonemode")
    );
    // A region beyond the device, or smaller than a block, is caught by `validate` (it used to
    // pass validation and fail the run with no line).
    let err = edit("size = \"4g\"", "size = \"64g\"").unwrap_err();
    assert!(err.message.contains("exceeds the device capacity"), "{err}");
    assert_eq!(err.position.unwrap().0, line_in("", "", "offset = \"1g\""));
    let err = edit("size = \"256m\"", "size = \"1k\"").unwrap_err();
    assert!(
        err.message
            .contains("`size` (1024 bytes) is smaller than `bs` (4096 bytes)"),
        "{err}"
    );
    assert_eq!(err.position.unwrap().0, line_in("", "", "size = \"256m\""));
    let err = edit("size = \"256m\"\n", "").unwrap_err();
    assert!(err.message.contains("`size` is required"), "{err}");
}

#[test]
fn the_slowest_read_is_explained_by_where_its_request_waited() {
    let s = scenario::load("fg-read-bg-write").unwrap();
    let results = run_scenario(&s, &RunOptions::default()).unwrap();
    let slowest_read = |variant: &str| {
        let run = results.runs.iter().find(|r| r.variant == variant).unwrap();
        run.apps["gallery"].ops["read"].slowest[0].clone()
    };
    // Parses "..., X ms queued in <elevator>, Y ms on the device)".
    let split = |text: &str| -> (f64, f64) {
        let number_before = |marker: &str| -> f64 {
            let head = &text[..text.find(marker).unwrap()];
            head.rsplit(' ').next().unwrap().parse().unwrap()
        };
        (
            number_before(" ms queued in"),
            number_before(" ms on the device"),
        )
    };
    let noop = slowest_read("noop");
    assert_eq!(noop.waits[0].reason, "submit_bio_wait");
    let (queued, on_device) = split(&noop.waits[0].on);
    assert!(
        on_device > 10.0 * queued,
        "noop: the read waits on the device ({})",
        noop.waits[0].on
    );
    let cfq = slowest_read("cfq");
    let (queued, on_device) = split(&cfq.waits[0].on);
    assert!(
        queued > 2.0 * on_device,
        "cfq: the read waits in the scheduler ({})",
        cfq.waits[0].on
    );
    assert!(cfq.waits[0].on.contains("queued in cfq"));
    assert!(cfq.latency_ns > noop.latency_ns);
    // With program/erase suspend the read no longer waits for the programs on its die: most of
    // what is left is the wait for a host tag (the writes hold the 32 slots).
    let suspend = slowest_read("noop+suspend");
    assert!(
        suspend.latency_ns * 5 < noop.latency_ns,
        "{} ns vs {} ns",
        suspend.latency_ns,
        noop.latency_ns
    );
    let counts = |variant: &str| {
        let run = results.runs.iter().find(|r| r.variant == variant).unwrap();
        let read = &run.apps["gallery"].ops["read"];
        (read.count, run.apps["update"].ops["write"].count)
    };
    let ((reads_plain, writes_plain), (reads_suspend, writes_suspend)) =
        (counts("noop"), counts("noop+suspend"));
    assert!(reads_suspend > 10 * reads_plain);
    // Each suspension costs the die time; the writes lose a little, not most.
    assert!(writes_suspend < writes_plain && writes_suspend * 10 > writes_plain * 9);
}

#[test]
fn block_tunables_and_nice_are_checked_by_name() {
    let ok = edit(
        "[stack.block]\nelevator = \"noop\"",
        "[stack.block]\nelevator = \"noop\"\nnr_requests = 64\n[stack.block.cfq]\nslice_idle = 0\nquantum = 16",
    )
    .unwrap();
    assert_eq!(ok.apps.len(), 2);
    let err = edit(
        "[stack.block]\nelevator = \"noop\"",
        "[stack.block]\nelevator = \"noop\"\n[stack.block.cfq]\nslice_idel = 0",
    )
    .unwrap_err();
    assert!(err.message.contains("slice_idel"), "{err}");
    let err = edit(
        "[stack.block]\nelevator = \"noop\"",
        "[stack.block]\nelevator = \"noop\"\n[stack.block.cfq]\nquantum = 0",
    )
    .unwrap_err();
    assert!(err.message.contains("quantum = 0"), "{err}");
    let err = edit(
        "name = \"update\"\nrole = \"background\"",
        "name = \"update\"\nrole = \"background\"\nnice = 25",
    )
    .unwrap_err();
    assert!(
        err.message.contains("nice = 25") && err.message.contains("-20 and 19"),
        "{err}"
    );
    let background = edit(
        "name = \"update\"\nrole = \"background\"",
        "name = \"update\"\nrole = \"background\"\nnice = 10",
    )
    .unwrap();
    assert_eq!(background.apps[1].nice, 10);
}

#[test]
fn a_buffered_fio_app_reads_through_the_page_cache() {
    // fio's default, direct=0: the job reads a file through the VFS and the page cache (its
    // reads wait on pages, readahead makes large requests), beside an O_DIRECT job.
    let source = r#"name = "buffered-fio"
duration = "2s"
[stack.device]
profile = "emmc-5.1"
capacity = "2GiB"
[[app]]
name = "reader"
role = "foreground"
[app.workload.fio]
rw = "read"
bs = "4k"
size = "8m"
[[app]]
name = "raw"
[app.workload.fio]
direct = 1
rw = "randread"
bs = "4k"
size = "8m"
offset = "1g"
"#;
    let s = scenario::parse("buffered.toml", source).unwrap();
    let results = run_scenario(&s, &RunOptions::default()).unwrap();
    let run = &results.runs[0];
    let reader = &run.apps["reader"];
    assert_eq!(reader.ops["read"].count, 2048);
    assert!(reader.blocked_ns.contains_key("lock_page"), "{reader:?}");
    assert!(!run.apps["raw"].blocked_ns.contains_key("lock_page"));
    assert!(run.counters["mm.pages_read"] >= 2048, "{:?}", run.counters);
    // 8 MiB in 4 KiB reads, but readahead asks for larger requests.
    let requests = run.counters["block.requests"];
    assert!(requests < 2048 + 2048 / 4, "{requests}");
}

/// With an external journal two request queues number requests: each id still names one
/// request of the run (the journal device's from `JOURNAL_DEVICE_FIRST_REQUEST`), and every
/// wait on a request finds that request, on its device, in the run's timeline. (Both queues
/// numbered from 1 before: a wait on the journal device's R#5 was drawn to the data device's.)
#[test]
fn with_an_external_journal_every_request_id_names_one_request_on_one_device() {
    let mut s = scenario::load("scenarios/io-account.toml").expect("loads");
    s.select_variant("external-journal").expect("variant");
    let options = RunOptions {
        timeline: Some(mobistack::sim::timeline::TimelineConfig::without_counters()),
        ..RunOptions::default()
    };
    let results = run_scenario(&s, &options).expect("runs");
    let timeline = &results.runs[0]
        .timeline
        .as_ref()
        .expect("recorded")
        .timeline;
    assert_eq!(timeline.dropped, 0);
    let mut by_id = std::collections::BTreeMap::new();
    for rq in &timeline.requests {
        assert!(
            by_id.insert(rq.id, rq.device.as_str()).is_none(),
            "R#{} twice",
            rq.id
        );
    }
    let devices: std::collections::BTreeSet<&str> = by_id.values().copied().collect();
    assert_eq!(devices.len(), 2, "{devices:?}");
    let first = mobistack::stack::JOURNAL_DEVICE_FIRST_REQUEST;
    for device in devices {
        let ids: Vec<u64> = by_id
            .iter()
            .filter(|(_, d)| **d == device)
            .map(|(id, _)| *id)
            .collect();
        let high = ids.iter().filter(|&&id| id >= first).count();
        assert!(
            high == 0 || high == ids.len(),
            "{device}: ids on both sides of {first}"
        );
    }
    assert!(by_id.keys().any(|&id| id >= first), "journal requests");
    let waits_on_requests = timeline
        .waits
        .iter()
        .filter_map(|w| match w.blocker {
            mobistack::sim::Blocker::Request(id) => Some(id),
            _ => None,
        })
        .collect::<Vec<_>>();
    assert!(!waits_on_requests.is_empty());
    assert!(
        waits_on_requests.iter().all(|id| by_id.contains_key(id)),
        "every wait's request was recorded"
    );
}
