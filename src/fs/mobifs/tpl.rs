//! Tradeoff-point location (TPL, seed 004 §5.2): when to close the open VCT.
//!
//! Each write adds its bytes to the data staleness `s` (bytes written since the VCT opened, an
//! overwrite counting again) and gives one point of the *e curve*: `e = o / s`, the share of
//! those bytes that overwrote data already in the VCT (§3: the data merged before flushing,
//! hence the energy saved per staleness unit). The best place to close is the curve's peak.
//! To ride over fluctuations, TPL keeps the last `k` points, fits a line by least squares and
//! closes once its gradient is no longer positive (the curve stopped rising); a staleness cap
//! and a time cap stop an unbounded wait for a peak that never comes (§5.2).
//!
//! As in the paper's prototype (§6: the kernel has no floating point, so e is multiplied by
//! 10^3) the fit uses integer arithmetic, but with `e` in millionths: in thousandths, the
//! first overwrites after megabytes of new data leave e at 0 (4 KiB over 8 MiB is 0.0005), the
//! window looks flat and TPL closes the VCT at the very start of the rise — a finding about
//! §6's precision, checked by a test.
//!
//! Simplifications: a point per page-sized part of a write, not per system call (a large
//! write is many points, so the window spans whole writes only when `k` is large enough). A
//! peak needs a rise: a curve still flat at e = 0 (no overwrite yet, as at the start of every
//! VCT) is not a peak, so an append-only app's VCTs close at the caps.

use crate::units::{serde_units, Nanos, NS_PER_SEC};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// The fixed-point scale of `e`: millionths (the paper's prototype: thousandths, §6).
pub const E_SCALE: u64 = 1_000_000;

/// TPL's parameters (`[stack.mobifs]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct TplConfig {
    /// `k`: points in the sliding window of the linear fit. asm: 64 page writes (§5.2 gives
    /// no value; a window of a quarter of a megabyte smooths single-write noise).
    #[serde(default = "default_window")]
    pub window: u32,
    /// Staleness cap: a VCT closes once this many bytes were written into it. asm: 32 MiB
    /// (§5.2 names a cap without its value; a VCT must also fit in one jbd2 transaction).
    #[serde(default = "default_staleness_cap", with = "serde_units::size")]
    pub staleness_cap: u64,
    /// Time cap: a VCT closes at its first write this long after it opened. asm: 120 s (§7.3:
    /// MobiFS's checkpoint intervals average 17.5x ext4's 5 s flush interval, ~90 s).
    #[serde(default = "default_time_cap", with = "serde_units::duration")]
    pub time_cap: Nanos,
}

fn default_window() -> u32 {
    64
}
fn default_staleness_cap() -> u64 {
    32 << 20
}
fn default_time_cap() -> Nanos {
    120 * NS_PER_SEC
}

impl Default for TplConfig {
    fn default() -> Self {
        TplConfig {
            window: default_window(),
            staleness_cap: default_staleness_cap(),
            time_cap: default_time_cap(),
        }
    }
}

impl TplConfig {
    pub fn validate(&self) -> Result<(), String> {
        if !(2..=4096).contains(&self.window) {
            return Err(format!(
                "`tpl.window` {} must be from 2 to 4096 points (a line needs two)",
                self.window
            ));
        }
        if self.staleness_cap < crate::units::PAGE_SIZE {
            return Err(format!(
                "`tpl.staleness-cap` {} bytes must be at least one page (4096)",
                self.staleness_cap
            ));
        }
        if self.time_cap == 0 {
            return Err("`tpl.time-cap` must be longer than zero".into());
        }
        Ok(())
    }
}

/// Why TPL closed a VCT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// The fitted e curve stopped rising.
    Peak,
    /// The staleness cap.
    Staleness,
    /// The time cap.
    Time,
}

/// The e curve of the open VCT.
#[derive(Debug, Clone)]
pub struct Tpl {
    config: TplConfig,
    /// `s`, bytes.
    staleness: u64,
    /// Bytes that overwrote data in the VCT.
    overwritten: u64,
    /// The last `k` points `(s in bytes, e in millionths)`.
    points: VecDeque<(i128, i128)>,
    opened_ns: Option<Nanos>,
    /// Whether e has risen above zero in this VCT (a peak needs a rise before it).
    risen: bool,
}

impl Tpl {
    pub fn new(config: TplConfig) -> Tpl {
        Tpl {
            config,
            staleness: 0,
            overwritten: 0,
            points: VecDeque::new(),
            opened_ns: None,
            risen: false,
        }
    }

    /// `e` now, in millionths.
    pub fn e_ppm(&self) -> u64 {
        (self.overwritten * E_SCALE)
            .checked_div(self.staleness)
            .unwrap_or(0)
    }

    pub fn staleness(&self) -> u64 {
        self.staleness
    }

    /// A write of `bytes` to the open VCT, `overwrite` when it met case 3. Returns whether the
    /// VCT should close now, and why.
    pub fn on_write(&mut self, bytes: u64, overwrite: bool, now: Nanos) -> Option<CloseReason> {
        let opened = *self.opened_ns.get_or_insert(now);
        self.staleness += bytes;
        if overwrite {
            self.overwritten += bytes;
        }
        self.points
            .push_back((self.staleness as i128, self.e_ppm() as i128));
        if self.points.len() > self.config.window as usize {
            self.points.pop_front();
        }
        if self.staleness >= self.config.staleness_cap {
            return Some(CloseReason::Staleness);
        }
        if now.saturating_sub(opened) >= self.config.time_cap {
            return Some(CloseReason::Time);
        }
        self.risen |= self.overwritten > 0;
        if self.risen && self.points.len() == self.config.window as usize && self.slope_sign() <= 0
        {
            return Some(CloseReason::Peak);
        }
        None
    }

    /// The sign of the least-squares gradient of e over s in the window: with n points,
    /// `n*sum(xy) - sum(x)*sum(y)` (the denominator `n*sum(x^2) - sum(x)^2` is positive when
    /// the points have distinct s, which they do: s grows with every write).
    fn slope_sign(&self) -> i32 {
        let n = self.points.len() as i128;
        let (mut sx, mut sy, mut sxy) = (0i128, 0i128, 0i128);
        for &(x, y) in &self.points {
            sx += x;
            sy += y;
            sxy += x * y;
        }
        let numerator = n * sxy - sx * sy;
        numerator.signum() as i32
    }

    /// The VCT closed: a new curve starts at e = 0 (§5.2, Figure 3).
    pub fn reset(&mut self) {
        self.staleness = 0;
        self.overwritten = 0;
        self.points.clear();
        self.opened_ns = None;
        self.risen = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::PAGE_SIZE;

    fn config(window: u32) -> TplConfig {
        TplConfig {
            window,
            staleness_cap: 1 << 30,
            time_cap: 1000 * NS_PER_SEC,
        }
    }

    /// Feeds page writes (`true` = an overwrite inside the VCT) until TPL closes.
    fn run(tpl: &mut Tpl, writes: impl IntoIterator<Item = bool>) -> Option<(usize, CloseReason)> {
        for (k, overwrite) in writes.into_iter().enumerate() {
            if let Some(reason) = tpl.on_write(PAGE_SIZE, overwrite, 0) {
                return Some((k, reason));
            }
        }
        None
    }

    #[test]
    fn a_flat_curve_is_not_a_peak() {
        let mut tpl = Tpl::new(config(8));
        assert_eq!(run(&mut tpl, std::iter::repeat_n(false, 10_000)), None);
        assert_eq!(tpl.e_ppm(), 0);
    }

    #[test]
    fn the_vct_closes_once_e_stops_rising() {
        // 100 new pages, then 100 overwrites (e rises), then new pages (e falls).
        let writes = (0..100)
            .map(|_| false)
            .chain((0..100).map(|_| true))
            .chain((0..1000).map(|_| false));
        let mut tpl = Tpl::new(config(8));
        let (at, reason) = run(&mut tpl, writes).expect("closes");
        assert_eq!(reason, CloseReason::Peak);
        assert!(
            (200..=208).contains(&at),
            "closed at write {at}, near the peak at 200"
        );
    }

    #[test]
    fn a_rising_curve_runs_to_the_staleness_cap() {
        let mut tpl = Tpl::new(TplConfig {
            staleness_cap: 64 * PAGE_SIZE,
            ..config(8)
        });
        let writes = (0..16).map(|_| false).chain(std::iter::repeat(true));
        assert_eq!(run(&mut tpl, writes), Some((63, CloseReason::Staleness)));
    }

    #[test]
    fn the_time_cap_closes_a_vct_that_waits_for_a_peak() {
        let mut tpl = Tpl::new(TplConfig {
            time_cap: 10,
            ..config(8)
        });
        assert_eq!(tpl.on_write(PAGE_SIZE, false, 100), None);
        assert_eq!(tpl.on_write(PAGE_SIZE, false, 109), None);
        assert_eq!(tpl.on_write(PAGE_SIZE, false, 110), Some(CloseReason::Time));
        tpl.reset();
        assert_eq!(tpl.staleness(), 0);
        assert_eq!(
            tpl.on_write(PAGE_SIZE, false, 200),
            None,
            "the clock restarts"
        );
    }

    #[test]
    fn millionths_see_the_first_overwrites_after_megabytes_that_thousandths_miss() {
        // 8 MiB of new data, then overwrites: e after the first overwrite is 0.0005, zero in
        // the paper's thousandths. With millionths the window sees the rise and does not
        // close at its start.
        let mut tpl = Tpl::new(config(64));
        let writes = (0..2048).map(|_| false).chain((0..2048).map(|_| true));
        assert_eq!(run(&mut tpl, writes), None);
        let after_one = PAGE_SIZE * 1000 / (2049 * PAGE_SIZE);
        assert_eq!(
            after_one, 0,
            "in thousandths the first overwrite leaves e at 0"
        );
    }

    #[test]
    fn bad_parameters_are_refused_by_name() {
        assert!(config(1).validate().unwrap_err().contains("tpl.window"));
        let c = TplConfig {
            staleness_cap: 1,
            ..config(8)
        };
        assert!(c.validate().unwrap_err().contains("staleness-cap"));
        let c = TplConfig {
            time_cap: 0,
            ..config(8)
        };
        assert!(c.validate().unwrap_err().contains("time-cap"));
        assert_eq!(TplConfig::default().validate(), Ok(()));
    }
}
