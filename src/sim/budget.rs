//! A bound on the events one simulation processes, for callers that run inputs they do not
//! trust (the fuzzing harness, [`crate::fuzzing`]).
//!
//! [`Simulation::set_event_limit`](super::Simulation::set_event_limit) bounds one simulation.
//! The entry points behind the commands (`run_fio`, `filebench::run_file`, a scenario run) build
//! their simulation inside, so [`with_event_limit`] sets the bound for every simulation created
//! on this thread while a closure runs, and reports afterwards whether a run reached it and
//! which engine error (deadlock, livelock) a run ended with. Nothing here is read in the event
//! loop's hot path: the bound is checked once per [`super::executor::PROGRESS_EVERY_EVENTS`]
//! events, next to the progress hook, so a run may pass it by up to that many events.
//!
//! Simplifications: one scope per thread at a time (scopes do not nest: an inner scope replaces
//! the outer bound until it ends, then the outer one is back).

use super::executor::SimError;
use std::cell::RefCell;

/// What the runs inside one [`with_event_limit`] scope did with the bound.
#[derive(Debug, Clone, Default)]
pub struct BudgetReport {
    /// A run reached the event bound and ended there ([`super::RunEnd::EventLimit`]).
    pub event_limit_reached: bool,
    /// The first engine error a run ended with (a deadlock or a zero-time livelock).
    pub engine_error: Option<SimError>,
}

struct Scope {
    max_events: u64,
    report: BudgetReport,
}

thread_local! {
    static SCOPE: RefCell<Option<Scope>> = const { RefCell::new(None) };
}

/// Runs `f` with every simulation created on this thread meanwhile bounded to `max_events`
/// processed events; returns `f`'s value and what the runs did with the bound.
pub fn with_event_limit<T>(max_events: u64, f: impl FnOnce() -> T) -> (T, BudgetReport) {
    let outer = SCOPE.with(|scope| {
        scope.borrow_mut().replace(Scope {
            max_events,
            report: BudgetReport::default(),
        })
    });
    // Restores the outer scope even if `f` panics (a test that expects a panic goes on).
    struct Restore(Option<Option<Scope>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let outer = self.0.take().expect("restored once");
            SCOPE.with(|scope| *scope.borrow_mut() = outer);
        }
    }
    let restore = Restore(Some(outer));
    let value = f();
    let report = SCOPE.with(|scope| {
        scope
            .borrow_mut()
            .as_mut()
            .map(|s| std::mem::take(&mut s.report))
            .unwrap_or_default()
    });
    drop(restore);
    (value, report)
}

/// The event bound of a simulation created now on this thread (`u64::MAX`: none).
pub(super) fn current_event_limit() -> u64 {
    SCOPE.with(|scope| scope.borrow().as_ref().map_or(u64::MAX, |s| s.max_events))
}

/// Notes how a run ended, for the scope's report (nothing outside a scope).
pub(super) fn note_run_end(end: &Result<super::RunEnd, SimError>) {
    SCOPE.with(|scope| {
        if let Some(scope) = scope.borrow_mut().as_mut() {
            match end {
                Ok(super::RunEnd::EventLimit) => scope.report.event_limit_reached = true,
                Ok(_) => {}
                Err(error) => {
                    scope
                        .report
                        .engine_error
                        .get_or_insert_with(|| error.clone());
                }
            }
        }
    });
}
