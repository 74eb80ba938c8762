//! Idle-interval prediction (MobiFS, ATC'15, §5.3 and Figure 4; evaluated as in §7.4).
//!
//! MobiFS checkpoints while the user is predicted to be idle. A predictor watches the user's
//! operations (touches, merged as §6's user-interaction logger does) and, when asked, says how
//! long an idle interval it expects from now on. Three predictors implement [`IdlePredictor`]:
//!
//! - [`StateMachine`]: the paper's four-state machine (short, long, shorter, longer), reconstructed
//!   below from the prose of §5.3 because the text of Figure 4 is garbled in our copy;
//! - [`LastMinimum`] (LMM): the minimum of the last k intervals, predicted after every operation;
//! - [`LastAverage`] (LAM): the average of the last k intervals, predicted after every operation.
//!
//! [`evaluate`] replays a touch trace through a predictor and counts predictions, responsiveness
//! conflicts (RCs) and predicted length, the two metrics of §7.4. [`merge_touches`] is §6's
//! filter that turns a drag's burst of events into one logical operation.
//!
//! ## Reconstruction of Figure 4
//!
//! What survives of the figure is its legend: "event u — a user operation", "event τ — when
//! m×t_s passes", "event δ — when t_l passes", and the label "do checkpt.". The prose says: each
//! central state (short, long) keeps a history A[1..k] of intervals and predicts their minimum
//! (t_s, t_l); in *short*, a user operation loops, and a timeout τ without one moves to *long*;
//! in *long*, if t_l passes without an operation (δ) the machine goes to *longer* and waits for
//! an operation; an operation later than τ (but before δ) goes to *shorter* ("the interval
//! prediction should be decreased"); an operation before τ goes straight to *short*. From this:
//!
//! - τ is measured from the last operation and is `max(tau, m × t_s)` (`tau` is the floor, and
//!   the whole timeout while A_s is empty); δ is at the last operation + t_l, but not before
//!   τ (when t_l is shorter than τ, t_l has already passed when τ fires: δ follows at once).
//! - Every interval (time between two operations) is classified when it ends: shorter than τ, it
//!   is a short interval, recorded in A_s, and the state becomes *short*; otherwise it is a long
//!   interval, recorded in A_l (this is how *shorter* decreases t_l and *longer* increases it, as
//!   the minimum of a sliding window), and the state becomes *shorter* (it ended before δ) or
//!   *long* (it ended in *longer*, after δ).
//! - *shorter* then behaves exactly as *long* for the next interval (τ, δ and operations have the
//!   same effect); it is kept as a state of its own so that the decrease is visible.
//! - "do checkpt." is reconstructed as the τ event: once τ has passed in the current interval
//!   and the machine is in the long regime (*long* or *shorter*), it predicts the rest of t_l as
//!   idle: `last operation + t_l - now`. It predicts nothing in *short* (the user is operating),
//!   nothing before τ, nothing in *longer* (t_l has passed; the history has no better guess), and
//!   nothing while A_l is empty. Predicting t_l already at the operation that starts a long-regime
//!   interval is the other reading of the figure; it would add the RCs of every switch from long
//!   to short intervals, which the prose says the τ timeout is there to detect.
//!
//! ## Simplifications
//!
//! - Intervals are between logical operations; what the operation is (tap, drag) is not used.
//! - Times are virtual nanoseconds, given by the caller; the predictor reads no clock.
//! - The history is the last k intervals of each regime, oldest dropped first; no ageing by time.
//! - Predictors are pure: the caller delivers operations and timers ([`IdlePredictor::next_timer`]);
//!   [`IdlePredictor::on_user_op`] also catches up on any timer the caller did not deliver.

use crate::units::{Nanos, NS_PER_SEC};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// §6: "some single logical user operations, such as dragging, incurs multiple events with small
/// intervals (< 0.01 ms)"; events closer than this to the previous event are one operation.
pub const DRAG_MERGE_NS: Nanos = 10_000;

/// Upper bound on k (history length), so a typo cannot make a predictor keep millions of entries.
pub const HISTORY_LEN_MAX: usize = 1024;

/// Timers one interval may fire (τ and δ for the state machine); [`evaluate`] asserts it.
const TIMERS_PER_INTERVAL_MAX: usize = 8;

/// An idle-interval predictor: a pure state machine over user operations and its own timers.
pub trait IdlePredictor {
    /// The name used in reports: `fsm`, `lmm`, `lam`.
    fn name(&self) -> &'static str;

    /// A (logical) user operation happened at `now`. Times must not go backwards.
    fn on_user_op(&mut self, now: Nanos);

    /// When the predictor next wants [`IdlePredictor::on_timer`] called, if ever.
    fn next_timer(&self) -> Option<Nanos> {
        None
    }

    /// A timer the predictor asked for is due (`now` is its time).
    fn on_timer(&mut self, _now: Nanos) {}

    /// The idle interval predicted to start at `now`: its length, or `None` when the predictor
    /// does not expect the user to be idle now.
    fn predict(&self, now: Nanos) -> Option<Nanos>;
}

/// A sliding window of the last k intervals.
#[derive(Debug, Clone)]
struct History {
    intervals: VecDeque<Nanos>,
    len_max: usize,
}

impl History {
    fn new(len_max: usize) -> Self {
        assert!(
            (1..=HISTORY_LEN_MAX).contains(&len_max),
            "history length {len_max}"
        );
        History {
            intervals: VecDeque::with_capacity(len_max),
            len_max,
        }
    }

    fn push(&mut self, interval: Nanos) {
        if self.intervals.len() == self.len_max {
            self.intervals.pop_front();
        }
        self.intervals.push_back(interval);
        assert!(self.intervals.len() <= self.len_max);
    }

    fn min(&self) -> Option<Nanos> {
        self.intervals.iter().copied().min()
    }

    fn mean(&self) -> Option<Nanos> {
        if self.intervals.is_empty() {
            return None;
        }
        let sum: u128 = self.intervals.iter().map(|&i| u128::from(i)).sum();
        Some((sum / self.intervals.len() as u128) as Nanos)
    }
}

/// The rest of a predicted interval of `length` that started at `start`, seen from `now`.
fn remaining(start: Nanos, length: Nanos, now: Nanos) -> Option<Nanos> {
    let end = start.saturating_add(length);
    (end > now).then(|| end - now)
}

// ---------------------------------------------------------------------------------------------
// The state machine (Figure 4)
// ---------------------------------------------------------------------------------------------

/// Parameters of [`StateMachine`]. The paper names k, τ and m but gives no values; the defaults
/// are assumptions, each with its reasoning.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct StateMachineConfig {
    /// k: intervals remembered per central state (§5.3 "A[1..k]").
    /// asm: 4 — a few recent intervals, so the minimum follows a change of habit within a few
    /// operations yet one unusually short interval is forgotten after four more.
    pub k: usize,
    /// m: τ = m × t_s (Figure 4's legend, "when m×t_s passes").
    /// asm: 3.0 — an operation three times later than the shortest recent short interval is
    /// well outside the skimming rhythm.
    pub m: f64,
    /// The floor of τ, and τ itself while no short interval is known.
    /// asm: 2 s — a pause shorter than this is part of operating the phone (a tap, a scroll, a
    /// glance), longer is the start of reading; it also keeps τ from collapsing when t_s is a
    /// few hundred milliseconds.
    #[serde(with = "crate::units::serde_units::duration")]
    pub tau: Nanos,
}

impl Default for StateMachineConfig {
    fn default() -> Self {
        StateMachineConfig {
            k: 4,
            m: 3.0,
            tau: 2 * NS_PER_SEC,
        }
    }
}

impl StateMachineConfig {
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=HISTORY_LEN_MAX).contains(&self.k) {
            return Err(format!(
                "k = {} must be between 1 and {HISTORY_LEN_MAX} (intervals remembered)",
                self.k
            ));
        }
        if !self.m.is_finite() || self.m < 1.0 || self.m > 1000.0 {
            return Err(format!(
                "m = {} must be a number from 1 to 1000 (tau = m x t_s must not be shorter than t_s)",
                self.m
            ));
        }
        if self.tau == 0 {
            return Err("tau must be positive, e.g. \"2s\"".into());
        }
        Ok(())
    }
}

/// The states of Figure 4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FsmState {
    /// The user operates with short intervals.
    Short,
    /// The user operates with long intervals.
    Long,
    /// A long interval ended before t_l: t_l was decreased; behaves as `Long`.
    Shorter,
    /// t_l passed without an operation; waits for one, which increases t_l.
    Longer,
}

/// The paper's predictor (§5.3, Figure 4, as reconstructed in the module documentation).
#[derive(Debug, Clone)]
pub struct StateMachine {
    config: StateMachineConfig,
    state: FsmState,
    short: History,
    long: History,
    /// The last operation; `None` before the first.
    last_op: Option<Nanos>,
    /// τ has fired in the current interval.
    tau_passed: bool,
}

impl StateMachine {
    /// A machine in the short state with empty histories. The configuration must be valid
    /// ([`StateMachineConfig::validate`]); an invalid one is an error here too.
    pub fn new(config: StateMachineConfig) -> Result<Self, String> {
        config.validate()?;
        Ok(StateMachine {
            short: History::new(config.k),
            long: History::new(config.k),
            config,
            state: FsmState::Short,
            last_op: None,
            tau_passed: false,
        })
    }

    pub fn state(&self) -> FsmState {
        self.state
    }

    /// t_s: the minimum of the short history.
    pub fn t_short(&self) -> Option<Nanos> {
        self.short.min()
    }

    /// t_l: the minimum of the long history.
    pub fn t_long(&self) -> Option<Nanos> {
        self.long.min()
    }

    /// τ, measured from the last operation: `max(tau, m × t_s)`.
    pub fn tau(&self) -> Nanos {
        match self.short.min() {
            Some(t_short) => {
                let scaled = (t_short as f64 * self.config.m).min(u64::MAX as f64) as Nanos;
                scaled.max(self.config.tau)
            }
            None => self.config.tau,
        }
    }

    fn long_regime(&self) -> bool {
        matches!(self.state, FsmState::Long | FsmState::Shorter)
    }

    /// Fires every timer due strictly before `now` (an operation at the very instant of a
    /// timeout counts as later than it).
    fn catch_up(&mut self, now: Nanos) {
        for _ in 0..TIMERS_PER_INTERVAL_MAX {
            match self.next_timer() {
                Some(at) if at < now => self.on_timer(at),
                _ => return,
            }
        }
        panic!("state machine timers do not settle before {now}: {self:?}");
    }
}

impl IdlePredictor for StateMachine {
    fn name(&self) -> &'static str {
        "fsm"
    }

    fn on_user_op(&mut self, now: Nanos) {
        let Some(last) = self.last_op else {
            self.last_op = Some(now);
            return;
        };
        assert!(
            now >= last,
            "user operation at {now} before the previous one at {last}"
        );
        self.catch_up(now);
        let interval = now - last;
        if !self.tau_passed && interval < self.tau() {
            // "if the user operation comes so quickly (before τ) ... the state is directly set
            // to short interval"; in short, "it will loop".
            self.short.push(interval);
            self.state = FsmState::Short;
        } else {
            // A long interval: ended before δ -> shorter (t_l decreases); after δ, in longer
            // -> long (t_l increases).
            self.long.push(interval);
            self.state = match self.state {
                FsmState::Longer => FsmState::Long,
                _ => FsmState::Shorter,
            };
        }
        self.last_op = Some(now);
        self.tau_passed = false;
    }

    fn next_timer(&self) -> Option<Nanos> {
        let last = self.last_op?;
        if self.state == FsmState::Longer {
            return None; // waits for an operation
        }
        if !self.tau_passed {
            return Some(last.saturating_add(self.tau()));
        }
        if self.long_regime() {
            // δ: t_l passes (only once a long interval is known). When t_l is shorter than τ
            // (τ grew with t_s since), t_l has already passed at τ: δ comes at τ's instant.
            return self
                .long
                .min()
                .map(|t_long| last.saturating_add(t_long.max(self.tau())));
        }
        None
    }

    fn on_timer(&mut self, now: Nanos) {
        let Some(last) = self.last_op else { return };
        if !self.tau_passed {
            if now < last.saturating_add(self.tau()) {
                return; // not due: a stale timer
            }
            self.tau_passed = true;
            if self.state == FsmState::Short {
                // "the machine assumes that the user may begin a long interval".
                self.state = FsmState::Long;
            }
            return;
        }
        if self.long_regime() {
            if let Some(t_long) = self.long.min() {
                if now >= last.saturating_add(t_long.max(self.tau())) {
                    self.state = FsmState::Longer;
                }
            }
        }
    }

    fn predict(&self, now: Nanos) -> Option<Nanos> {
        let last = self.last_op?;
        if !self.tau_passed || !self.long_regime() {
            return None;
        }
        remaining(last, self.long.min()?, now)
    }
}

// ---------------------------------------------------------------------------------------------
// The baselines of §7.4
// ---------------------------------------------------------------------------------------------

/// What both baselines keep: the last k intervals between operations and the last operation.
#[derive(Debug, Clone)]
struct RecentIntervals {
    history: History,
    last_op: Option<Nanos>,
}

impl RecentIntervals {
    fn new(k: usize) -> Result<Self, String> {
        if !(1..=HISTORY_LEN_MAX).contains(&k) {
            return Err(format!("k = {k} must be between 1 and {HISTORY_LEN_MAX}"));
        }
        Ok(RecentIntervals {
            history: History::new(k),
            last_op: None,
        })
    }

    fn on_user_op(&mut self, now: Nanos) {
        if let Some(last) = self.last_op {
            assert!(
                now >= last,
                "user operation at {now} before the previous one at {last}"
            );
            self.history.push(now - last);
        }
        self.last_op = Some(now);
    }
}

/// LMM: predicts, after each operation, the minimum of the last k intervals.
#[derive(Debug, Clone)]
pub struct LastMinimum(RecentIntervals);

impl LastMinimum {
    /// `k` must be in 1..=[`HISTORY_LEN_MAX`].
    pub fn new(k: usize) -> Result<Self, String> {
        RecentIntervals::new(k).map(LastMinimum)
    }
}

impl IdlePredictor for LastMinimum {
    fn name(&self) -> &'static str {
        "lmm"
    }

    fn on_user_op(&mut self, now: Nanos) {
        self.0.on_user_op(now);
    }

    fn predict(&self, now: Nanos) -> Option<Nanos> {
        remaining(self.0.last_op?, self.0.history.min()?, now)
    }
}

/// LAM: predicts, after each operation, the average of the last k intervals (rounded down).
#[derive(Debug, Clone)]
pub struct LastAverage(RecentIntervals);

impl LastAverage {
    /// `k` must be in 1..=[`HISTORY_LEN_MAX`].
    pub fn new(k: usize) -> Result<Self, String> {
        RecentIntervals::new(k).map(LastAverage)
    }
}

impl IdlePredictor for LastAverage {
    fn name(&self) -> &'static str {
        "lam"
    }

    fn on_user_op(&mut self, now: Nanos) {
        self.0.on_user_op(now);
    }

    fn predict(&self, now: Nanos) -> Option<Nanos> {
        remaining(self.0.last_op?, self.0.history.mean()?, now)
    }
}

// ---------------------------------------------------------------------------------------------
// The user-interaction logger's filter (§6) and the evaluator (§7.4)
// ---------------------------------------------------------------------------------------------

/// Merges events closer than `threshold_ns` to the event before them into one logical
/// operation, dated at its first event (a drag is one operation however long it lasts, since
/// each of its events is close to the previous one). `events` must be sorted.
pub fn merge_touches(events: &[Nanos], threshold_ns: Nanos) -> Result<Vec<Nanos>, String> {
    check_sorted(events)?;
    let mut operations = Vec::new();
    let mut previous: Option<Nanos> = None;
    for &event in events {
        match previous {
            Some(before) if event - before < threshold_ns => {}
            _ => operations.push(event),
        }
        previous = Some(event);
    }
    Ok(operations)
}

fn check_sorted(times: &[Nanos]) -> Result<(), String> {
    match times.windows(2).position(|pair| pair[1] < pair[0]) {
        Some(at) => Err(format!(
            "touch times must be sorted: touch {} at {} ns comes after {} ns",
            at + 1,
            times[at + 1],
            times[at]
        )),
        None => Ok(()),
    }
}

/// What [`evaluate`] counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct PredictionQuality {
    /// User operations replayed.
    pub operations: u64,
    /// Idle intervals predicted.
    pub predictions: u64,
    /// Responsiveness conflicts: operations inside a predicted idle interval.
    pub conflicts: u64,
    /// Predictions that had at least one conflict.
    pub mispredictions: u64,
    /// Sum of the predicted intervals' lengths.
    pub predicted_ns_total: u128,
}

impl PredictionQuality {
    /// §7.4's first metric: RCs per prediction (0 when nothing was predicted).
    pub fn conflicts_per_prediction(&self) -> f64 {
        if self.predictions == 0 {
            0.0
        } else {
            self.conflicts as f64 / self.predictions as f64
        }
    }

    /// §7.4's second metric (before dividing by LAM's): the mean predicted interval, ns.
    pub fn mean_predicted_ns(&self) -> f64 {
        if self.predictions == 0 {
            0.0
        } else {
            self.predicted_ns_total as f64 / self.predictions as f64
        }
    }
}

/// Replays `operations` (logical user operations, sorted; pass touches through
/// [`merge_touches`] first) through `predictor` and counts the quality of its predictions.
///
/// Counting rules:
/// - The predictor sees every operation ([`IdlePredictor::on_user_op`]) and every timer it asks
///   for that falls strictly before the next operation ([`IdlePredictor::on_timer`]); timers
///   after the last operation are not replayed (the trace has ended).
/// - A prediction is made at an operation or a timer, when the predictor returns a positive
///   length and no predicted interval is open. The interval `[now, now + length)` is then open:
///   MobiFS would checkpoint for all of it (§7.4), so no new prediction is made until it ends.
/// - Every operation at a time inside an open interval is one RC; one prediction can thus cause
///   several (§5.3). An operation at the interval's end is not an RC. After an operation the
///   interval stays open (the checkpoint still runs) until its end.
/// - `predicted_ns_total` sums the predicted lengths in full, also for intervals that a conflict
///   interrupted or that run past the last operation.
pub fn evaluate(
    predictor: &mut dyn IdlePredictor,
    operations: &[Nanos],
) -> Result<PredictionQuality, String> {
    check_sorted(operations)?;
    let mut replay = Replay::default();
    for &now in operations {
        let mut previous_timer: Option<Nanos> = None;
        for fired in 0.. {
            let Some(at) = predictor.next_timer().filter(|&at| at < now) else {
                break;
            };
            assert!(
                fired < TIMERS_PER_INTERVAL_MAX,
                "{} asks for more than {TIMERS_PER_INTERVAL_MAX} timers in one interval",
                predictor.name()
            );
            assert!(
                previous_timer.is_none_or(|before| at >= before),
                "{} timer goes back in time",
                predictor.name()
            );
            predictor.on_timer(at);
            previous_timer = Some(at);
            replay.consider(&*predictor, at);
        }
        replay.operation(now);
        predictor.on_user_op(now);
        replay.consider(&*predictor, now);
    }
    Ok(replay.quality)
}

/// [`evaluate`]'s state: the counts and the predicted interval now open.
#[derive(Default)]
struct Replay {
    quality: PredictionQuality,
    open_until: Option<Nanos>,
    open_had_conflict: bool,
}

impl Replay {
    fn is_open(&self, now: Nanos) -> bool {
        self.open_until.is_some_and(|end| now < end)
    }

    /// Counts an operation at `now` (before the predictor sees it).
    fn operation(&mut self, now: Nanos) {
        self.quality.operations += 1;
        if self.is_open(now) {
            self.quality.conflicts += 1;
            if !self.open_had_conflict {
                self.quality.mispredictions += 1;
                self.open_had_conflict = true;
            }
        }
    }

    /// Asks for a prediction at `now` unless a predicted interval is open.
    fn consider(&mut self, predictor: &dyn IdlePredictor, now: Nanos) {
        if self.is_open(now) {
            return;
        }
        if let Some(length) = predictor.predict(now).filter(|&length| length > 0) {
            self.quality.predictions += 1;
            self.quality.predicted_ns_total += u128::from(length);
            self.open_until = Some(now.saturating_add(length));
            self.open_had_conflict = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::NS_PER_MS;

    const S: Nanos = NS_PER_SEC;

    fn fsm() -> StateMachine {
        StateMachine::new(StateMachineConfig::default()).unwrap()
    }

    /// Feeds operations and delivers due timers in between, as a driver would.
    fn drive(machine: &mut StateMachine, operations: &[Nanos]) {
        for &now in operations {
            while let Some(at) = machine.next_timer().filter(|&at| at < now) {
                machine.on_timer(at);
            }
            machine.on_user_op(now);
        }
    }

    /// Bursts of `burst` operations `gap` apart, each followed by a pause of `pause(i)`.
    fn bursts_and_reads(
        cycles: usize,
        burst: usize,
        gap: Nanos,
        pause: impl Fn(usize) -> Nanos,
    ) -> Vec<Nanos> {
        let mut now = 0;
        let mut times = Vec::new();
        for cycle in 0..cycles {
            for _ in 0..burst {
                times.push(now);
                now += gap;
            }
            now += pause(cycle);
        }
        times
    }

    #[test]
    fn short_intervals_keep_the_machine_in_short_and_predict_nothing() {
        let mut machine = fsm();
        drive(&mut machine, &[0, S / 2, S, 3 * S / 2]);
        assert_eq!(machine.state(), FsmState::Short);
        assert_eq!(machine.t_short(), Some(S / 2));
        assert_eq!(machine.predict(3 * S / 2), None);
    }

    #[test]
    fn short_moves_to_long_after_tau_without_a_touch() {
        let mut machine = fsm();
        drive(&mut machine, &[0, S, 2 * S]);
        // t_s = 1 s, tau = max(2 s, 3 x 1 s) = 3 s.
        assert_eq!(machine.tau(), 3 * S);
        assert_eq!(machine.next_timer(), Some(5 * S));
        machine.on_timer(5 * S - 1); // early: ignored
        assert_eq!(machine.state(), FsmState::Short);
        machine.on_timer(5 * S);
        assert_eq!(machine.state(), FsmState::Long);
    }

    #[test]
    fn long_interval_ending_before_t_long_goes_to_shorter_and_decreases_t_long() {
        let mut machine = fsm();
        drive(&mut machine, &[0, S, 2 * S, 32 * S]); // a 30 s interval
        assert_eq!(machine.state(), FsmState::Shorter);
        assert_eq!(machine.t_long(), Some(30 * S));
        drive(&mut machine, &[52 * S]); // 20 s: past tau, before t_l
        assert_eq!(machine.state(), FsmState::Shorter);
        assert_eq!(machine.t_long(), Some(20 * S));
    }

    #[test]
    fn t_long_passing_goes_to_longer_and_the_next_touch_back_to_long() {
        let mut machine = fsm();
        drive(&mut machine, &[0, S, 21 * S]); // t_l = 20 s, state shorter
        assert_eq!(machine.state(), FsmState::Shorter);
        machine.on_timer(machine.next_timer().unwrap()); // tau
        assert_eq!(machine.state(), FsmState::Shorter);
        let delta = machine.next_timer().unwrap();
        assert_eq!(delta, 41 * S);
        machine.on_timer(delta);
        assert_eq!(machine.state(), FsmState::Longer);
        assert_eq!(machine.next_timer(), None, "longer waits for an operation");
        machine.on_user_op(71 * S); // 50 s
        assert_eq!(machine.state(), FsmState::Long);
        assert_eq!(machine.t_long(), Some(20 * S), "minimum of 20 s and 50 s");
    }

    #[test]
    fn t_long_shorter_than_tau_gives_delta_at_tau_not_before_it() {
        // Grow t_s so that tau = 3 x t_s exceeds t_l.
        let mut machine = fsm();
        drive(&mut machine, &[0, 3 * S]); // long: t_l = 3 s
        drive(&mut machine, &[4 * S + S / 2]); // 1.5 s short? tau = 2 s: yes
        assert_eq!(machine.tau(), 9 * S / 2);
        // 5.5 s: long; delta came with tau (at 9 s), so via longer to long; t_l stays 3 s.
        drive(&mut machine, &[10 * S]);
        assert_eq!(machine.t_long(), Some(3 * S));
        assert_eq!(machine.state(), FsmState::Long);
        let tau_at = machine.next_timer().unwrap();
        assert_eq!(tau_at, 10 * S + 9 * S / 2);
        machine.on_timer(tau_at);
        let delta_at = machine.next_timer().unwrap();
        assert_eq!(delta_at, tau_at, "t_l (3 s) already passed at tau (4.5 s)");
        machine.on_timer(delta_at);
        assert_eq!(machine.state(), FsmState::Longer);
        assert_eq!(machine.predict(delta_at), None);
    }

    #[test]
    fn a_quick_touch_in_long_switches_straight_to_short() {
        let mut machine = fsm();
        drive(&mut machine, &[0, S, 21 * S]);
        assert_eq!(machine.state(), FsmState::Shorter);
        drive(&mut machine, &[21 * S + 500 * NS_PER_MS]);
        assert_eq!(machine.state(), FsmState::Short);
        assert_eq!(machine.t_short(), Some(500 * NS_PER_MS));
    }

    #[test]
    fn operations_without_timers_catch_up_on_the_timeouts() {
        // No timer delivered: the 30 s operation still counts as after tau and after t_l.
        let mut machine = fsm();
        machine.on_user_op(0);
        machine.on_user_op(S);
        machine.on_user_op(21 * S); // t_l = 20 s
        machine.on_user_op(71 * S); // via longer
        assert_eq!(machine.state(), FsmState::Long);
        assert_eq!(machine.t_long(), Some(20 * S));
    }

    #[test]
    fn the_machine_predicts_the_rest_of_t_long_once_tau_passes_in_the_long_regime() {
        let mut machine = fsm();
        drive(&mut machine, &[0, S, 21 * S]); // t_l = 20 s, tau = 3 s
        assert_eq!(machine.predict(21 * S), None, "nothing before tau");
        machine.on_timer(24 * S);
        assert_eq!(machine.predict(24 * S), Some(17 * S));
        assert_eq!(machine.predict(30 * S), Some(11 * S));
        machine.on_timer(41 * S);
        assert_eq!(machine.predict(41 * S), None, "nothing in longer");
    }

    #[test]
    fn last_minimum_never_predicts_longer_than_the_shortest_of_its_history() {
        let mut rng = crate::sim::rng::Rng::new(3);
        let k = 5;
        let mut lmm = LastMinimum::new(k).unwrap();
        let mut now = 0;
        let mut intervals: Vec<Nanos> = Vec::new();
        lmm.on_user_op(now);
        for _ in 0..500 {
            let interval = 1 + rng.below(60 * S);
            now += interval;
            intervals.push(interval);
            lmm.on_user_op(now);
            let recent = &intervals[intervals.len().saturating_sub(k)..];
            let predicted = lmm.predict(now).unwrap();
            assert_eq!(predicted, *recent.iter().min().unwrap());
            assert!(recent.iter().all(|&i| predicted <= i));
        }
    }

    #[test]
    fn last_average_predicts_the_mean_of_the_last_k() {
        let mut lam = LastAverage::new(2).unwrap();
        assert_eq!(lam.predict(0), None);
        for now in [0, 2 * S, 3 * S, 7 * S] {
            lam.on_user_op(now);
        }
        // Last two intervals: 1 s and 4 s.
        assert_eq!(lam.predict(7 * S), Some(5 * S / 2));
        assert_eq!(lam.predict(8 * S), Some(3 * S / 2), "the rest of it");
    }

    #[test]
    fn evaluate_counts_every_operation_inside_a_predicted_interval() {
        // LAM with k = 1: after the 10 s interval it predicts 10 s; the four operations 1 s
        // apart that follow fall inside it: 4 RCs from one misprediction.
        let mut lam = LastAverage::new(1).unwrap();
        let ops = [0, 10 * S, 11 * S, 12 * S, 13 * S, 14 * S, 20 * S];
        let quality = evaluate(&mut lam, &ops).unwrap();
        assert_eq!(quality.operations, 7);
        assert_eq!(quality.conflicts, 4);
        assert_eq!(quality.mispredictions, 1);
        // Predictions: at 10 s (10 s long, open until 20 s), then at 20 s (the last interval
        // is 6 s).
        assert_eq!(quality.predictions, 2);
        assert_eq!(quality.predicted_ns_total, u128::from(16 * S));
    }

    #[test]
    fn an_operation_at_the_end_of_the_interval_is_not_a_conflict() {
        let mut lmm = LastMinimum::new(1).unwrap();
        let quality = evaluate(&mut lmm, &[0, 5 * S, 10 * S]).unwrap();
        assert_eq!(quality.conflicts, 0);
        assert_eq!(quality.predictions, 2);
    }

    #[test]
    fn on_bursts_and_reads_the_machine_beats_lam_on_conflicts_and_lmm_on_length() {
        let mut rng = crate::sim::rng::Rng::new(11);
        let pauses: Vec<Nanos> = (0..200).map(|_| 15 * S + rng.below(30 * S)).collect();
        let mut now = 0;
        let mut ops = Vec::new();
        for pause in &pauses {
            let burst = 2 + rng.below(6);
            for _ in 0..burst {
                ops.push(now);
                now += 300 * NS_PER_MS + rng.below(900 * NS_PER_MS);
            }
            now += pause;
        }
        let k = StateMachineConfig::default().k;
        let fsm_quality = evaluate(&mut fsm(), &ops).unwrap();
        let lmm_quality = evaluate(&mut LastMinimum::new(k).unwrap(), &ops).unwrap();
        let lam_quality = evaluate(&mut LastAverage::new(k).unwrap(), &ops).unwrap();
        assert!(fsm_quality.predictions > 100, "{fsm_quality:?}");
        assert!(
            fsm_quality.conflicts_per_prediction() < lam_quality.conflicts_per_prediction(),
            "fsm {fsm_quality:?} lam {lam_quality:?}"
        );
        assert!(fsm_quality.conflicts < lam_quality.conflicts);
        assert!(
            fsm_quality.mean_predicted_ns() > lmm_quality.mean_predicted_ns(),
            "fsm {fsm_quality:?} lmm {lmm_quality:?}"
        );
        assert!(lam_quality.mean_predicted_ns() > lmm_quality.mean_predicted_ns());
    }

    #[test]
    fn regular_long_reads_give_the_machine_no_conflicts() {
        // Every pause is 20 s: after learning, each tau predicts exactly up to the next burst.
        let ops = bursts_and_reads(20, 3, S, |_| 20 * S);
        let quality = evaluate(&mut fsm(), &ops).unwrap();
        assert_eq!(quality.conflicts, 0, "{quality:?}");
        assert!(quality.predictions >= 18, "{quality:?}");
    }

    #[test]
    fn evaluation_is_deterministic() {
        let ops = bursts_and_reads(50, 4, 700 * NS_PER_MS, |i| (10 + (i as u64 * 7) % 31) * S);
        let first = evaluate(&mut fsm(), &ops).unwrap();
        let second = evaluate(&mut fsm(), &ops).unwrap();
        assert_eq!(first, second);
        assert!(first.predictions > 0);
    }

    #[test]
    fn merge_filter_makes_a_drag_one_operation() {
        let events = [0, 3_000, 6_000, 9_000, 12_000, 5 * S, 5 * S + 20_000];
        let ops = merge_touches(&events, DRAG_MERGE_NS).unwrap();
        assert_eq!(ops, vec![0, 5 * S, 5 * S + 20_000]);
        assert_eq!(merge_touches(&events, 1).unwrap().len(), events.len());
    }

    #[test]
    fn unsorted_touches_are_an_error_not_a_panic() {
        let error = merge_touches(&[5, 3], DRAG_MERGE_NS).unwrap_err();
        assert!(error.contains("sorted"), "{error}");
        let error = evaluate(&mut LastMinimum::new(2).unwrap(), &[0, 9, 4]).unwrap_err();
        assert!(error.contains("touch 2"), "{error}");
    }

    #[test]
    fn config_validation_names_the_field_and_parses_kebab_case() {
        let mut config = StateMachineConfig {
            k: 0,
            ..Default::default()
        };
        assert!(config.validate().unwrap_err().starts_with("k "));
        config.k = 4;
        config.m = 0.5;
        assert!(config.validate().unwrap_err().starts_with("m "));
        config.m = f64::NAN;
        assert!(config.validate().unwrap_err().starts_with("m "));
        config.m = 3.0;
        config.tau = 0;
        assert!(config.validate().unwrap_err().starts_with("tau "));
        assert!(StateMachine::new(config).is_err());
        assert!(LastMinimum::new(0).is_err());
        assert!(LastAverage::new(HISTORY_LEN_MAX + 1).is_err());

        let parsed: StateMachineConfig = toml::from_str("k = 6\ntau = \"1500ms\"").unwrap();
        assert_eq!(parsed.k, 6);
        assert_eq!(parsed.tau, 1500 * NS_PER_MS);
        assert_eq!(parsed.m, StateMachineConfig::default().m);
        assert!(toml::from_str::<StateMachineConfig>("history = 3").is_err());
        StateMachineConfig::default().validate().unwrap();
    }
}
