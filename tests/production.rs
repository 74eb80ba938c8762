//! The built-in `production/fg-vs-bg` scenario: it parses with its 23 variants, and, run short,
//! points the right way: writeback throttling in front of mq-deadline cuts the foreground
//! reader's latency behind a buffered background writer that floods the device queue.

use mobistack::run::{run_scenario, RunOptions};
use mobistack::scenario;

#[test]
fn fg_vs_bg_parses_with_every_scheduler_on_both_devices() {
    let s = scenario::load("scenarios/production/fg-vs-bg.toml").unwrap();
    let names: Vec<&str> = s.variants.iter().map(|v| v.name.as_str()).collect();
    for device in ["ufs", "emmc"] {
        for scheduler in [
            "cfq",
            "mq-deadline",
            "mq-deadline+wbt",
            "mq-deadline+android",
            "bfq",
            "bfq+android",
            "kyber",
            "none",
        ] {
            let name = format!("{device}-{scheduler}");
            assert!(names.contains(&name.as_str()), "{name} in {names:?}");
        }
    }
    for scheduler in [
        "mq-deadline",
        "mq-deadline+wbt",
        "mq-deadline+android",
        "bfq",
        "bfq+android",
        "kyber",
        "none",
    ] {
        let name = format!("gki-{scheduler}");
        assert!(names.contains(&name.as_str()), "{name} in {names:?}");
    }
    assert_eq!(names.len(), 23);
    // Today's schedulers on the 3.10 stack say they mix eras; the GKI ones and CFQ do not.
    for variant in &s.variants {
        let mixed = !scenario::eras::mixed_eras(&variant.stack).is_empty();
        let today = !variant.name.starts_with("gki-") && !variant.name.ends_with("-cfq");
        assert_eq!(mixed, today, "{}", variant.name);
    }
    // wbt_enable_default: off under Android's GKI config, on under a desktop's.
    let wbt = |name: &str| {
        let v = s.variants.iter().find(|v| v.name == name).unwrap();
        v.stack.block.wbt_min_lat_nsec(&v.stack.kernel, true)
    };
    assert_eq!(wbt("gki-mq-deadline"), None);
    assert_eq!(wbt("ufs-mq-deadline+wbt"), Some(2_000_000));
    assert!(scenario::builtin::find("production/fg-vs-bg").is_some());
}

#[test]
fn fg_vs_bg_direction_wbt_cuts_the_foreground_read_latency() {
    let run = |variant: &str| {
        let mut s = scenario::load("scenarios/production/fg-vs-bg.toml").unwrap();
        s.select_variant(variant).unwrap();
        s.duration = 3 * mobistack::units::NS_PER_SEC;
        let results = run_scenario(&s, &RunOptions::default()).unwrap();
        results.runs[0].apps["gallery"].ops["read"].clone()
    };
    let (plain, throttled) = (run("ufs-mq-deadline"), run("ufs-mq-deadline+wbt"));
    assert!(
        throttled.count > plain.count,
        "{} vs {} reads",
        throttled.count,
        plain.count
    );
    assert!(
        throttled.p50_ns * 2 < plain.p50_ns,
        "gallery read p50: {} ns with wbt, {} ns without",
        throttled.p50_ns,
        plain.p50_ns
    );
}
