//! Seed 003 §7.2 on a scaled copy of the built-in `context-aware/video-ioread` (a 5 s clip, a
//! 1 GiB background read): under CFQ the background reader's time slices make the video player's
//! frames late; the subregion scheduler serves them on time.

use mobistack::run::{run_scenario, RunOptions};
use mobistack::scenario;

#[test]
fn cfq_makes_frames_late_where_the_subregion_scheduler_does_not() {
    let source = scenario::builtin::find("context-aware/video-ioread")
        .expect("built in")
        .source
        .replace("count = 450", "count = 150")
        .replace("file_size = \"4GiB\"", "file_size = \"1GiB\"");
    let s = scenario::parse("video-ioread.toml", &source).expect("parses");
    let results = run_scenario(&s, &RunOptions::default()).expect("runs");
    let late = |variant: &str| {
        let run = results.runs.iter().find(|r| r.variant == variant).unwrap();
        let counters = &run.apps["video"].counters;
        assert_eq!(counters["frames"], 150, "{variant}");
        counters.get("late_frames").copied().unwrap_or(0)
    };
    let (cfq, subregion) = (late("cfq"), late("subregion"));
    assert!(cfq >= 3, "CFQ: {cfq} late frames");
    assert!(subregion < cfq, "subregion: {subregion}, CFQ: {cfq}");
}
