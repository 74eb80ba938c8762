//! The many-small-runs rows of `mobistack bench` (issue 49's "speed of many small runs", issue
//! 40's fuzz rates): the cost of a run that does not depend on its length. Wall time is read
//! here, outside any simulation, and only to report speed.

use crate::sim::bench::BenchResult;
use crate::sim::Simulation;
use std::rc::Rc;
use std::time::Instant;

/// The built-in scenario of the many-small-runs rows ([`small_runs`], [`stack_builds`]):
/// QASIO's M1 (500 creat + 4 KiB write + fsync on ext4 beside a buffered background write,
/// through CFQ and the eMMC 4.5 model), the point a sweep over RAM and scheduler runs
/// (issue 49), cut to [`SMALL_RUN_NS`] of virtual time, its `none` variant, seed 1.
pub const SMALL_RUN_SCENARIO: &str = "qasio/m1";
/// Virtual time of one small run: issue 49's "one-second scenarios".
pub const SMALL_RUN_NS: crate::units::Nanos = crate::units::NS_PER_SEC;

/// The scenario of [`small_runs`] and [`stack_builds`], parsed from the built-in source.
fn small_run_scenario() -> crate::scenario::Scenario {
    let source = crate::scenario::builtin::find(SMALL_RUN_SCENARIO)
        .expect("built-in scenario")
        .source;
    let mut scenario =
        crate::scenario::parse(SMALL_RUN_SCENARIO, source).expect("built-in scenario parses");
    scenario.select_variant("none").expect("the none variant");
    scenario.duration = SMALL_RUN_NS;
    scenario
}

/// Many small runs in one process (issue 49's "speed of many small runs"): `runs` times, the
/// built-in [`SMALL_RUN_SCENARIO`] parsed from its source and run for [`SMALL_RUN_NS`], as a
/// sweep point runs (parse, stack build, run, results, teardown). Reports runs per wall second.
pub fn small_runs(runs: u64) -> BenchResult {
    let start = Instant::now();
    for _ in 0..runs {
        let scenario = small_run_scenario();
        crate::run::run_one(&scenario, &scenario.variants[0], 1, |_| {}).expect("small run");
    }
    let wall = start.elapsed().as_secs_f64();
    BenchResult::counted("small-runs", "runs/s", runs, wall)
}

/// The stack of [`small_runs`]' scenario built and torn down `builds` times without running
/// (the engine, the device and block layer, the page cache, ext4's mkfs and mount, jbd2's
/// journal, the daemons): the part of a small run's cost that does not depend on its length.
/// Reports stack builds per wall second.
pub fn stack_builds(builds: u64) -> BenchResult {
    let scenario = small_run_scenario();
    let stack = &scenario.variants[0].stack;
    let start = Instant::now();
    for _ in 0..builds {
        let simulation = Simulation::new(1);
        let sim = simulation.handle();
        let activity = Rc::new(crate::task::ForegroundState::new(None));
        crate::stack::Stack::new_with_storage(&sim, stack, activity, stack.vm.clone(), None)
            .expect("the bench stack builds");
    }
    let wall = start.elapsed().as_secs_f64();
    BenchResult::counted("stack-build", "builds/s", builds, wall)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small run of the bench is the scenario's run: it does I/O in its second; the rows
    /// count what they claim.
    #[test]
    fn a_small_run_runs_its_second() {
        let scenario = small_run_scenario();
        let result = crate::run::run_one(&scenario, &scenario.variants[0], 1, |_| {}).unwrap();
        assert!(result.counters.get("block.requests").copied().unwrap_or(0) > 0);
        assert_eq!(small_runs(1).operations, 1);
        assert_eq!(stack_builds(2).operations, 2);
    }
}
