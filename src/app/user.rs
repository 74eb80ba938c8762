//! A user at the touch screen: when touch events happen (MobiFS, ATC'15, §5.3 and §6).
//!
//! §5.3 observes that "users usually switch back and forth between short and long intervals,
//! e.g., when reading News Feeds on Facebook, the user may quickly skim some posts before
//! spending time to read one", and §6 that a drag "incurs multiple events with small intervals
//! (< 0.01 ms)". The model is a two-regime Markov process over operations:
//!
//! - in the *short* regime (skimming) the interval to the next operation is
//!   `interval_min + Exp(short_interval_mean - interval_min)`; in the *long* regime (reading) the
//!   same with `long_interval_mean`;
//! - after each operation the regime switches with probability `switch_probability`, so a
//!   regime lasts a geometric number of operations (mean `1 / switch_probability`);
//! - an operation is a drag with probability `drag_probability`: it emits `drag_events` events
//!   `drag_event_gap` apart (below §6's 0.01 ms, so the logger's filter merges them); the next
//!   interval is measured from the drag's last event.
//!
//! ## Simplifications
//!
//! - Intervals within a regime are independent (no diurnal pattern, no per-app habits); the
//!   paper did not publish its traces' distributions, so exponential tails are an assumption.
//! - Which app the user touches, and what the touch does, are not modelled: only times.
//! - The first operation comes one short interval after time 0; the user starts skimming.

use crate::sim::rng::Rng;
use crate::units::{Nanos, NS_PER_MS, NS_PER_SEC, NS_PER_US};
use serde::{Deserialize, Serialize};

/// Touch events one call of [`UserModelConfig::touches`] emits at most; past it the trace ends
/// early (a bound, so a mistaken duration cannot exhaust memory).
pub const TOUCHES_MAX: usize = 10_000_000;

/// Events of one drag at most (a bound on the configuration).
pub const DRAG_EVENTS_MAX: u32 = 10_000;

/// The user model's parameters. The paper reports no distribution of its users' intervals; the
/// defaults are assumptions with their reasoning.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct UserModelConfig {
    /// Mean interval between operations while skimming.
    /// asm: 1.5 s — a flick, a glance at a headline and the next flick.
    #[serde(with = "crate::units::serde_units::duration")]
    pub short_interval_mean: Nanos,
    /// Mean interval while reading one item.
    /// asm: 30 s — reading a post or an article's screenful before the next touch.
    #[serde(with = "crate::units::serde_units::duration")]
    pub long_interval_mean: Nanos,
    /// The shortest interval between two distinct operations.
    /// asm: 150 ms — two deliberate taps faster than this are not separate actions.
    #[serde(with = "crate::units::serde_units::duration")]
    pub interval_min: Nanos,
    /// Probability of switching regime after an operation.
    /// asm: 0.2 — about five operations per regime: a few posts skimmed, then one read for
    /// a few screens.
    pub switch_probability: f64,
    /// Probability that an operation is a drag (a scroll) rather than a tap.
    /// asm: 0.5 — news-feed use is mostly scrolling and tapping in comparable numbers.
    pub drag_probability: f64,
    /// Events a drag emits.
    /// asm: 20 — a scroll gesture of a few hundred milliseconds reports many move events; what
    /// matters to the filter is that they are close together, not how many.
    pub drag_events: u32,
    /// Time between a drag's events; §6 says these are "< 0.01 ms" apart.
    /// asm: 5 µs — below §6's bound, so [`crate::fs::mobifs::predict::merge_touches`] with
    /// its 0.01 ms threshold merges them.
    #[serde(with = "crate::units::serde_units::duration")]
    pub drag_event_gap: Nanos,
}

impl Default for UserModelConfig {
    fn default() -> Self {
        UserModelConfig {
            short_interval_mean: 1_500 * NS_PER_MS,
            long_interval_mean: 30 * NS_PER_SEC,
            interval_min: 150 * NS_PER_MS,
            switch_probability: 0.2,
            drag_probability: 0.5,
            drag_events: 20,
            drag_event_gap: 5 * NS_PER_US,
        }
    }
}

fn check_probability(name: &str, value: f64) -> Result<(), String> {
    if value.is_finite() && (0.0..=1.0).contains(&value) {
        Ok(())
    } else {
        Err(format!(
            "{name} = {value} must be a probability from 0 to 1"
        ))
    }
}

impl UserModelConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.interval_min == 0 {
            return Err("interval-min must be positive, e.g. \"150ms\"".into());
        }
        if self.short_interval_mean <= self.interval_min {
            return Err(format!(
                "short-interval-mean ({} ns) must be longer than interval-min ({} ns)",
                self.short_interval_mean, self.interval_min
            ));
        }
        if self.long_interval_mean < self.short_interval_mean {
            return Err(format!(
                "long-interval-mean ({} ns) must not be shorter than short-interval-mean ({} ns)",
                self.long_interval_mean, self.short_interval_mean
            ));
        }
        check_probability("switch-probability", self.switch_probability)?;
        check_probability("drag-probability", self.drag_probability)?;
        if !(1..=DRAG_EVENTS_MAX).contains(&self.drag_events) {
            return Err(format!(
                "drag-events = {} must be between 1 and {DRAG_EVENTS_MAX}",
                self.drag_events
            ));
        }
        let drag_span = self
            .drag_event_gap
            .saturating_mul(u64::from(self.drag_events - 1));
        if drag_span >= self.interval_min {
            return Err(format!(
                "drag-event-gap x (drag-events - 1) = {drag_span} ns must be shorter than interval-min ({} ns): a drag would overlap the next operation",
                self.interval_min
            ));
        }
        Ok(())
    }

    /// Touch event times in `[0, duration_ns)`, sorted, drawn from `rng`. The configuration
    /// must be valid ([`UserModelConfig::validate`]); an invalid one gives no touches rather
    /// than a panic. At most [`TOUCHES_MAX`] events.
    pub fn touches(&self, rng: &mut Rng, duration_ns: Nanos) -> Vec<Nanos> {
        if self.validate().is_err() {
            return Vec::new();
        }
        let mut touches = Vec::new();
        let mut long_regime = false;
        let mut last: Nanos = 0;
        loop {
            let mean = if long_regime {
                self.long_interval_mean
            } else {
                self.short_interval_mean
            };
            let spread = rng.exponential((mean - self.interval_min) as f64);
            let interval = self
                .interval_min
                .saturating_add(spread.min(u64::MAX as f64 / 2.0) as Nanos);
            let start = last.saturating_add(interval);
            if start >= duration_ns {
                break;
            }
            let events = if rng.next_f64() < self.drag_probability {
                self.drag_events
            } else {
                1
            };
            for event in 0..u64::from(events) {
                let at = start + event * self.drag_event_gap;
                if at >= duration_ns || touches.len() >= TOUCHES_MAX {
                    break;
                }
                touches.push(at);
                last = at;
            }
            if touches.len() >= TOUCHES_MAX {
                break;
            }
            if rng.next_f64() < self.switch_probability {
                long_regime = !long_regime;
            }
        }
        debug_assert!(touches.windows(2).all(|pair| pair[0] < pair[1]));
        touches
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::mobifs::predict::{merge_touches, DRAG_MERGE_NS};

    fn intervals(times: &[Nanos]) -> Vec<Nanos> {
        times.windows(2).map(|pair| pair[1] - pair[0]).collect()
    }

    #[test]
    fn touches_are_sorted_inside_the_run_and_deterministic() {
        let config = UserModelConfig::default();
        let duration = 3_600 * NS_PER_SEC;
        let first = config.touches(&mut Rng::named(1, "user"), duration);
        let again = config.touches(&mut Rng::named(1, "user"), duration);
        let other = config.touches(&mut Rng::named(2, "user"), duration);
        assert_eq!(first, again);
        assert_ne!(first, other);
        assert!(first.len() > 100);
        assert!(first.windows(2).all(|pair| pair[0] < pair[1]));
        assert!(*first.last().unwrap() < duration);
    }

    #[test]
    fn drags_become_single_operations_after_the_filter() {
        let config = UserModelConfig {
            drag_probability: 1.0,
            ..Default::default()
        };
        let events = config.touches(&mut Rng::new(4), 600 * NS_PER_SEC);
        let operations = merge_touches(&events, DRAG_MERGE_NS).unwrap();
        assert!(operations.len() > 10);
        // Every operation except perhaps one cut by the end of the run is a whole drag.
        assert!(events.len() >= (operations.len() - 1) * config.drag_events as usize);
        assert!(intervals(&operations)
            .iter()
            .all(|&i| i >= config.interval_min));
        let taps = UserModelConfig {
            drag_probability: 0.0,
            ..Default::default()
        };
        let events = taps.touches(&mut Rng::new(4), 600 * NS_PER_SEC);
        assert_eq!(merge_touches(&events, DRAG_MERGE_NS).unwrap(), events);
    }

    #[test]
    fn the_two_regimes_show_in_the_intervals() {
        let config = UserModelConfig {
            drag_probability: 0.0,
            ..Default::default()
        };
        let touches = config.touches(&mut Rng::new(9), 10 * 3_600 * NS_PER_SEC);
        let gaps = intervals(&touches);
        // The regimes are symmetric, so each has half the operations; below 5 s fall ~97 % of
        // the short regime's intervals and ~15 % of the long one's: a ratio near 1.3.
        let short = gaps.iter().filter(|&&g| g < 5 * NS_PER_SEC).count();
        let long = gaps.len() - short;
        let ratio = short as f64 / long as f64;
        assert!((1.0..1.6).contains(&ratio), "short {short} long {long}");
        let mean = gaps.iter().sum::<u64>() as f64 / gaps.len() as f64;
        let expected = (config.short_interval_mean + config.long_interval_mean) as f64 / 2.0;
        assert!(
            (mean / expected - 1.0).abs() < 0.2,
            "mean {mean} expected {expected}"
        );
        // Regimes persist: a short interval is more often followed by a short one.
        let after_short: Vec<bool> = gaps
            .windows(2)
            .filter(|pair| pair[0] < 5 * NS_PER_SEC)
            .map(|pair| pair[1] < 5 * NS_PER_SEC)
            .collect();
        let stay = after_short.iter().filter(|&&s| s).count() as f64 / after_short.len() as f64;
        assert!(stay > 0.65, "short followed by short {stay}");
    }

    #[test]
    fn never_switching_keeps_the_user_skimming() {
        let config = UserModelConfig {
            switch_probability: 0.0,
            drag_probability: 0.0,
            ..Default::default()
        };
        let touches = config.touches(&mut Rng::new(2), 600 * NS_PER_SEC);
        assert!(intervals(&touches).iter().all(|&g| g < 20 * NS_PER_SEC));
        let mean = touches.last().unwrap() / touches.len() as u64;
        assert!(mean < 2 * config.short_interval_mean, "{mean}");
    }

    #[test]
    fn validation_names_the_field() {
        let check = |config: UserModelConfig, field: &str| {
            let error = config.validate().unwrap_err();
            assert!(error.starts_with(field), "{error}");
            assert!(config.touches(&mut Rng::new(1), NS_PER_SEC).is_empty());
        };
        let base = UserModelConfig::default();
        base.validate().unwrap();
        check(
            UserModelConfig {
                interval_min: 0,
                ..base.clone()
            },
            "interval-min",
        );
        check(
            UserModelConfig {
                short_interval_mean: 100 * NS_PER_MS,
                ..base.clone()
            },
            "short-interval-mean",
        );
        check(
            UserModelConfig {
                long_interval_mean: NS_PER_SEC,
                ..base.clone()
            },
            "long-interval-mean",
        );
        check(
            UserModelConfig {
                switch_probability: 1.5,
                ..base.clone()
            },
            "switch-probability",
        );
        check(
            UserModelConfig {
                drag_probability: f64::NAN,
                ..base.clone()
            },
            "drag-probability",
        );
        check(
            UserModelConfig {
                drag_events: 0,
                ..base.clone()
            },
            "drag-events",
        );
        check(
            UserModelConfig {
                drag_event_gap: 10 * NS_PER_MS,
                ..base.clone()
            },
            "drag-event-gap",
        );
    }

    #[test]
    fn config_parses_kebab_case_with_units_and_rejects_unknown_fields() {
        let config: UserModelConfig =
            toml::from_str("short-interval-mean = \"2s\"\nswitch-probability = 0.1").unwrap();
        assert_eq!(config.short_interval_mean, 2 * NS_PER_SEC);
        assert_eq!(config.switch_probability, 0.1);
        assert_eq!(
            config.long_interval_mean,
            UserModelConfig::default().long_interval_mean
        );
        assert!(toml::from_str::<UserModelConfig>("short-mean = \"2s\"").is_err());
    }
}
