//! The kernel build a run models (`[stack.kernel]`): the tick rate `HZ`, from which every
//! jiffy-based constant of the block layer and the page cache is derived, as the kernel derives
//! them at compile time.
//!
//! Linux measures many of the intervals the papers' stalls depend on in jiffies: CFQ's
//! `slice_idle = HZ / 125`, `CFQ_MIN_TT = 2` jiffies, `BLK_BATCH_TIME = HZ / 50`,
//! `congestion_wait(HZ / 10)`, the dirty-throttling pauses. With HZ = 100 a jiffy is 10 ms and
//! the kernel's integer division makes `HZ / 125` zero jiffies ([`Hz::over`]), which CFQ's
//! `cfq_init` then raises to one jiffy ("could be 0 on HZ < 1000 setups"): `slice_idle` is
//! 10 ms at HZ = 100, not 0. Think times are whole jiffies. The helpers here do the kernel's integer arithmetic so models reproduce those
//! effects instead of idealised millisecond values.
//!
//! Simplifications: the clock is virtual and exact; `jiffies` is `now / tick` (no boot offset,
//! no `INITIAL_JIFFIES` wrap); timers fire on the tick after their expiry as `mod_timer` does only
//! where a model asks for it (`Hz::next_tick`).

use crate::units::{Nanos, NS_PER_SEC};
use serde::{Deserialize, Serialize};

/// `CONFIG_HZ`: timer interrupts per second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
#[serde(transparent)]
pub struct Hz(pub u32);

impl Hz {
    /// Length of one jiffy.
    pub fn tick_ns(self) -> Nanos {
        NS_PER_SEC / u64::from(self.0)
    }

    /// `jiffies` at virtual time `now`.
    pub fn jiffies(self, now: Nanos) -> u64 {
        now / self.tick_ns()
    }

    /// Virtual time of jiffy `j`.
    pub fn jiffies_to_ns(self, j: u64) -> Nanos {
        j * self.tick_ns()
    }

    /// `HZ / divisor` in jiffies, with the kernel's integer division (`HZ / 125` at HZ = 100 is
    /// 0).
    pub fn over(self, divisor: u32) -> u64 {
        u64::from(self.0 / divisor)
    }

    /// `HZ * num / den` jiffies (integer arithmetic, as `HZ * 3 / 10`).
    pub fn frac(self, num: u32, den: u32) -> u64 {
        u64::from(self.0) * u64::from(num) / u64::from(den)
    }

    /// `msecs_to_jiffies(ms)`: rounds up to whole jiffies.
    pub fn msecs_to_jiffies(self, ms: u64) -> u64 {
        (ms * u64::from(self.0)).div_ceil(1000)
    }

    /// A duration rounded up to whole jiffies, as a timer armed for it would expire.
    pub fn round_up(self, duration: Nanos) -> Nanos {
        duration.div_ceil(self.tick_ns()) * self.tick_ns()
    }

    /// The first tick at or after `now`.
    pub fn next_tick(self, now: Nanos) -> Nanos {
        self.round_up(now)
    }
}

/// The `[stack.kernel]` table.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct KernelConfig {
    /// `CONFIG_HZ`. Default 100: the `config HZ` default of arch/arm64/Kconfig and of
    /// arch/arm/Kconfig for platforms without a fixed rate in Linux 3.10 (the papers' phones
    /// ran 3.4-3.10). Samsung's ARM platforms forced 200 (`HZ_FIXED`, removed upstream in 2016:
    /// "All Samsung platforms, including the Exynos, are selecting HZ_FIXED with 200 Hz",
    /// K. Kozlowski, "ARM: Drop fixed 200 Hz timer requirement from Samsung platforms"); the
    /// Nexus 6P ran 300. Current x86 desktop kernels commonly use 250 or 1000.
    pub hz: Hz,
}

/// Accepted tick rates: the choices of the kernel's `HZ_*` Kconfig entries.
pub const HZ_CHOICES: [u32; 7] = [100, 200, 250, 300, 500, 1000, 128];

impl Default for KernelConfig {
    fn default() -> Self {
        KernelConfig { hz: Hz(100) }
    }
}

impl KernelConfig {
    pub fn validate(&self) -> Result<(), String> {
        if !HZ_CHOICES.contains(&self.hz.0) {
            return Err(format!(
                "[stack.kernel] hz = {} is not a kernel tick rate: expected one of 100, 200, 250, 300, 500, 1000 (or 128)",
                self.hz.0
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::NS_PER_MS;

    #[test]
    fn jiffy_arithmetic_is_the_kernels() {
        let hz = Hz(100);
        assert_eq!(hz.tick_ns(), 10 * NS_PER_MS);
        assert_eq!(hz.over(125), 0, "HZ / 125 is 0 jiffies at HZ = 100");
        assert_eq!(Hz(1000).over(125), 8);
        assert_eq!(Hz(300).over(125), 2);
        assert_eq!(hz.frac(3, 10), 30);
        assert_eq!(hz.msecs_to_jiffies(1), 1, "rounds up");
        assert_eq!(hz.msecs_to_jiffies(20), 2);
        assert_eq!(hz.jiffies(25 * NS_PER_MS), 2);
        assert_eq!(hz.round_up(11 * NS_PER_MS), 20 * NS_PER_MS);
        assert_eq!(hz.next_tick(20 * NS_PER_MS), 20 * NS_PER_MS);
    }

    #[test]
    fn an_unusual_tick_rate_is_an_input_error() {
        assert!(KernelConfig::default().validate().is_ok());
        let bad = KernelConfig { hz: Hz(0) };
        assert!(bad.validate().unwrap_err().contains("hz = 0"));
    }
}
