//! Energy of the storage device over a run (issue 20; MobiFS, ATC'15, §3 Insight 3 and §7.5).
//!
//! The device is a small power-state machine driven by when it was busy:
//!
//! ```text
//!   standby --(command; wake-up energy)--> active --(last command done)--> tail
//!      ^                                     ^                              |
//!      |                                     +------(command within tail)---+
//!      +------------------(tail timeout passes without a command)-----------+
//! ```
//!
//! - *active* while serving commands (the busy intervals given), at `active_power_mw`;
//! - *tail*: after the last command the controller stays powered for `tail_timeout` (the card's
//!   internal timeout, the host's autosuspend) at `tail_power_mw`;
//! - *standby* after that, at `idle_power_mw`; the next command pays `wakeup_energy_uj`.
//!   §3 Insight 3: "Up to 129% extra energy is used if data is flushed after the device switches
//!   to standby" — the wake-up and the tail it restarts are that fixed overhead here;
//! - on top of the time-based power, each byte costs energy to move and program:
//!   `write_energy_nj_per_byte`, and reads a sixth of it (§3: "reading consumes about 1/6 energy
//!   of writing for the same amount of data", the paper's reference 5);
//! - each flush command costs `flush_energy_uj` (the command and the controller's cache
//!   bookkeeping; the data it writes is already in the bytes written).
//!
//! ## Simplifications
//!
//! - The device is in standby at time 0; a run's first command pays a wake-up.
//! - Power does not depend on the command mix while active (a read-only busy period costs the
//!   same baseline as a write burst); the per-byte terms carry the difference.
//! - No power of the host controller, the bus or the CPU (Li et al., FAST'14, found the software
//!   stack's energy far larger than the device's; it is out of this model's scope).
//! - One tail timeout, no intermediate power levels (eMMC's sleep vs power-off notification).
//! - Random and sequential writes cost the same per byte; the FTL's extra writes (GC) count only
//!   if the caller includes them in `bytes_written`.

use crate::units::{Nanos, NS_PER_MS, NS_PER_SEC};
use serde::{Deserialize, Serialize};

/// The parameters of one device's energy model. In a scenario file every field is required
/// (start from a profile with [`EnergyConfig::for_device`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct EnergyConfig {
    /// Where the numbers come from (printed with results).
    pub name: String,
    /// Power while serving commands, mW, excluding the per-byte energy.
    pub active_power_mw: f64,
    /// Power in the tail after the last command, mW.
    pub tail_power_mw: f64,
    /// How long the device stays in the tail before standby.
    #[serde(with = "crate::units::serde_units::duration")]
    pub tail_timeout: Nanos,
    /// Power in standby, mW.
    pub idle_power_mw: f64,
    /// Energy to leave standby, µJ.
    pub wakeup_energy_uj: f64,
    /// Energy per byte written, nJ.
    pub write_energy_nj_per_byte: f64,
    /// Energy per byte read, nJ.
    pub read_energy_nj_per_byte: f64,
    /// Energy per flush command, µJ.
    pub flush_energy_uj: f64,
}

/// §3 Insight 3, citing its reference 5: "reading consumes about 1/6 energy of writing for the same amount
/// of data".
pub const READ_TO_WRITE_ENERGY: f64 = 1.0 / 6.0;

/// Li, Badam, Chandra, Swanson, Worthington, Zhang, "On the energy overhead of mobile storage
/// systems", FAST'14, §1: their eMMC 4.5 device delivers "close to 70 MBps sequential read, and
/// 40 MBps sequential write" and "consumes less than 250 milliwatts ... of peak power".
const EMMC_PEAK_POWER_MW: f64 = 250.0;
const EMMC_SEQ_WRITE_BYTES_PER_SEC: f64 = 40e6;

/// SD Physical Layer Specification (simplified), default-speed power limit: at most 100 mA per
/// card; at the 3.3 V supply of a phone's slot, 330 mW. Used as the microSD card's peak power.
const MICROSD_PEAK_POWER_MW: f64 = 100.0 * 3.3;
/// SD speed class 10 ("C10"): a sustained sequential write of at least 10 MB/s, the class of the
/// cards of MobiFS's era (the paper's evaluation runs ext4 on a microSD card, §7.1).
const MICROSD_SEQ_WRITE_BYTES_PER_SEC: f64 = 10e6;

impl EnergyConfig {
    /// An eMMC device.
    pub fn emmc() -> Self {
        // asm: half of the 250 mW peak (Li et al., FAST'14) is the controller and interface
        // while busy, the other half the NAND programming that scales with bytes; the paper
        // gives the peak only, not its split.
        let active_power_mw = EMMC_PEAK_POWER_MW / 2.0;
        // Per byte: the other half of the peak at the 40 MB/s sequential write (FAST'14):
        // 125 mW / 40 MB/s = 3.125 nJ/B.
        let write_energy_nj_per_byte =
            (EMMC_PEAK_POWER_MW / 2.0) * 1e-3 / EMMC_SEQ_WRITE_BYTES_PER_SEC * 1e9;
        EnergyConfig {
            name: "emmc (Li et al. FAST'14 peak power; tail, standby, wake-up assumed)".into(),
            active_power_mw,
            // asm: a fifth of the active baseline — controller clocked, NAND idle.
            tail_power_mw: active_power_mw / 5.0,
            // Linux's mmc core: MMC_AUTOSUSPEND_DELAY_MS = 3000, the card's runtime-PM
            // autosuspend delay after which the host puts it to sleep (later kernels than the
            // paper's 3.0, which had no card runtime PM; the device's own idle timeout is not
            // published).
            tail_timeout: 3 * NS_PER_SEC,
            // asm: 0.5 mW — eMMC standby currents are in the low hundreds of µA (VCC + VCCQ);
            // 150 µA at 3.3 V.
            idle_power_mw: 0.5,
            // asm: leaving sleep (CMD5 awake, re-clocking the bus) takes about a millisecond at
            // the active baseline: 125 µJ.
            wakeup_energy_uj: active_power_mw * 1.0,
            write_energy_nj_per_byte,
            read_energy_nj_per_byte: write_energy_nj_per_byte * READ_TO_WRITE_ENERGY,
            // asm: a cache flush command keeps the controller busy ~1 ms beyond the data it
            // writes (which bytes_written counts): 1 ms at the active baseline.
            flush_energy_uj: active_power_mw * 1.0,
        }
    }

    /// A microSD card (the paper's evaluation device, §7.1).
    pub fn microsd() -> Self {
        // A published bench measurement of a 2 GB Transcend microSD card in a data logger
        // (M. Borgerson, "Micro SD power consumption", Motherboard Forums thread, 23 May 2009):
        // "When the card is really idle, the current draw is well under 1mA. During and after
        // writes it is about 20mA", staying high "~250mS after the end of data transfer", "the
        // same as the write timeout interval for SD cards". A forum post, not a paper: the best
        // card-level figure found; replace it when a measurement of a phone's card is at hand.
        // 20 mA at 3.3 V = 66 mW: the baseline while busy and in the tail.
        let baseline_mw = 20.0 * 3.3;
        // Per byte: the rest of the SD specification's 330 mW peak at class 10's 10 MB/s:
        // (330 - 66) mW / 10 MB/s = 26.4 nJ/B.
        let write_energy_nj_per_byte =
            (MICROSD_PEAK_POWER_MW - baseline_mw) * 1e-3 / MICROSD_SEQ_WRITE_BYTES_PER_SEC * 1e9;
        EnergyConfig {
            name:
                "microsd (SD spec power limit, class 10, measured tail; standby, wake-up assumed)"
                    .into(),
            active_power_mw: baseline_mw,
            tail_power_mw: baseline_mw,
            // The measurement above and the SD specification's 250 ms write timeout.
            tail_timeout: 250 * NS_PER_MS,
            // asm: 0.5 mA at 3.3 V — the measurement says "well under 1mA".
            idle_power_mw: 0.5 * 3.3,
            // asm: selecting a card out of standby (CMD7) and its internal regulator's start take
            // about 10 ms at the baseline: 660 µJ. (The SD specification bounds initialisation at
            // 1 s, but that is power-up, not standby.)
            wakeup_energy_uj: baseline_mw * 10.0,
            write_energy_nj_per_byte,
            read_energy_nj_per_byte: write_energy_nj_per_byte * READ_TO_WRITE_ENERGY,
            // asm: cards of the era had no volatile write cache (the SD 6.0 cache came in 2017);
            // a flush is the command's round trip, ~0.1 ms at the baseline.
            flush_energy_uj: baseline_mw * 0.1,
        }
    }

    /// The profile for a device profile name: `microsd`, any `emmc*`, and the eMMC numbers for
    /// every other device (asm: UFS and SSD profiles have no published mobile power figures
    /// here; eMMC's stand in, labelled as such).
    pub fn for_device(profile: &str) -> Self {
        if profile == "microsd" {
            Self::microsd()
        } else if profile.starts_with("emmc") {
            Self::emmc()
        } else {
            let mut config = Self::emmc();
            config.name = format!("{profile}: eMMC figures (no published profile)");
            config
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        let fields = [
            ("active-power-mw", self.active_power_mw),
            ("tail-power-mw", self.tail_power_mw),
            ("idle-power-mw", self.idle_power_mw),
            ("wakeup-energy-uj", self.wakeup_energy_uj),
            ("write-energy-nj-per-byte", self.write_energy_nj_per_byte),
            ("read-energy-nj-per-byte", self.read_energy_nj_per_byte),
            ("flush-energy-uj", self.flush_energy_uj),
        ];
        for (name, value) in fields {
            if !value.is_finite() || value < 0.0 {
                return Err(format!("{name} = {value} must be a non-negative number"));
            }
        }
        Ok(())
    }

    /// The energy of a run. Errors (naming the interval) when the busy intervals are not sorted,
    /// overlap, are empty or inverted, or end after the run.
    pub fn energy(&self, inputs: &EnergyInputs) -> Result<EnergyBreakdown, String> {
        self.validate()?;
        check_intervals(inputs.busy, inputs.run_ns)?;
        let mut out = EnergyBreakdown::default();
        // Time after the last command until which the device is in its tail.
        let mut tail_until: Option<Nanos> = None;
        let mut cursor: Nanos = 0;
        for &(start, end) in inputs.busy {
            out.add_gap(cursor, start, tail_until);
            let awake = tail_until.is_some_and(|until| start <= until);
            if !awake {
                out.wakeups += 1;
            }
            out.active_ns += end - start;
            cursor = end;
            tail_until = Some(end.saturating_add(self.tail_timeout));
        }
        out.add_gap(cursor, inputs.run_ns, tail_until);
        assert_eq!(
            out.active_ns + out.tail_ns + out.idle_ns,
            inputs.run_ns,
            "every instant of the run is in one power state"
        );

        let joules = |mw: f64, ns: Nanos| mw * 1e-3 * ns as f64 / NS_PER_SEC as f64;
        out.active_j = joules(self.active_power_mw, out.active_ns);
        out.tail_j = joules(self.tail_power_mw, out.tail_ns);
        out.idle_j = joules(self.idle_power_mw, out.idle_ns);
        out.wakeup_j = self.wakeup_energy_uj * 1e-6 * out.wakeups as f64;
        out.write_j = self.write_energy_nj_per_byte * 1e-9 * inputs.bytes_written as f64;
        out.read_j = self.read_energy_nj_per_byte * 1e-9 * inputs.bytes_read as f64;
        out.flush_j = self.flush_energy_uj * 1e-6 * inputs.flushes as f64;
        out.total_j = out.active_j
            + out.tail_j
            + out.idle_j
            + out.wakeup_j
            + out.write_j
            + out.read_j
            + out.flush_j;
        Ok(out)
    }
}

impl Default for EnergyConfig {
    fn default() -> Self {
        Self::emmc()
    }
}

fn check_intervals(busy: &[(Nanos, Nanos)], run_ns: Nanos) -> Result<(), String> {
    let mut previous_end: Option<Nanos> = None;
    for (index, &(start, end)) in busy.iter().enumerate() {
        if end <= start {
            return Err(format!(
                "busy interval {index} ({start}..{end} ns) is empty or inverted"
            ));
        }
        if let Some(before) = previous_end {
            if start < before {
                return Err(format!(
                    "busy interval {index} starts at {start} ns, before the previous one ends at {before} ns: intervals must be sorted and must not overlap"
                ));
            }
        }
        if end > run_ns {
            return Err(format!(
                "busy interval {index} ends at {end} ns, after the run's {run_ns} ns"
            ));
        }
        previous_end = Some(end);
    }
    Ok(())
}

/// What the device did during a run.
#[derive(Debug, Clone, Copy)]
pub struct EnergyInputs<'a> {
    /// When the device was serving commands: sorted, non-overlapping `(start_ns, end_ns)`.
    pub busy: &'a [(Nanos, Nanos)],
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Flush (cache flush / REQ_PREFLUSH) commands.
    pub flushes: u64,
    /// The run's length; the device's state is accounted over `[0, run_ns)`.
    pub run_ns: Nanos,
}

/// Joules by component, and the time in each power state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct EnergyBreakdown {
    pub active_j: f64,
    pub tail_j: f64,
    pub idle_j: f64,
    pub wakeup_j: f64,
    pub write_j: f64,
    pub read_j: f64,
    pub flush_j: f64,
    pub total_j: f64,
    pub active_ns: Nanos,
    pub tail_ns: Nanos,
    pub idle_ns: Nanos,
    /// Times the device left standby.
    pub wakeups: u64,
}

impl EnergyBreakdown {
    /// Accounts the gap `[from, to)` between commands: tail until `tail_until`, then standby.
    fn add_gap(&mut self, from: Nanos, to: Nanos, tail_until: Option<Nanos>) {
        assert!(from <= to, "gap {from}..{to}");
        let tail_end = tail_until.map_or(from, |until| until.clamp(from, to));
        self.tail_ns += tail_end - from;
        self.idle_ns += to - tail_end;
    }
}

/// Joules per byte of app data (the paper's energy-per-byte comparison); `None` for no bytes.
pub fn joules_per_byte(breakdown: &EnergyBreakdown, app_bytes: u64) -> Option<f64> {
    (app_bytes > 0).then(|| breakdown.total_j / app_bytes as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = NS_PER_MS;
    const S: Nanos = NS_PER_SEC;

    fn run<'a>(busy: &'a [(Nanos, Nanos)], bytes_written: u64) -> EnergyInputs<'a> {
        EnergyInputs {
            busy,
            bytes_read: 0,
            bytes_written,
            flushes: 0,
            run_ns: 60 * S,
        }
    }

    #[test]
    fn states_cover_the_run_and_components_add_up() {
        let config = EnergyConfig::emmc();
        let busy = [
            (S, S + 10 * MS),
            (S + 500 * MS, S + 520 * MS),
            (30 * S, 30 * S + 5 * MS),
        ];
        let out = config.energy(&run(&busy, 1 << 20)).unwrap();
        assert_eq!(out.active_ns, 35 * MS);
        // The second command comes within the 3 s tail: one wake-up for the first two.
        assert_eq!(out.wakeups, 2);
        assert_eq!(out.tail_ns, 490 * MS + 3 * S + 3 * S);
        assert_eq!(out.active_ns + out.tail_ns + out.idle_ns, 60 * S);
        let sum = out.active_j
            + out.tail_j
            + out.idle_j
            + out.wakeup_j
            + out.write_j
            + out.read_j
            + out.flush_j;
        assert!((out.total_j - sum).abs() < 1e-12);
        assert!(out.write_j > 0.0 && out.idle_j > 0.0);
    }

    #[test]
    fn energy_grows_with_bytes_written() {
        let config = EnergyConfig::microsd();
        let busy = [(S, 2 * S)];
        let small = config.energy(&run(&busy, 1 << 20)).unwrap();
        let large = config.energy(&run(&busy, 8 << 20)).unwrap();
        assert!(large.total_j > small.total_j);
        assert!((large.write_j / small.write_j - 8.0).abs() < 1e-9);
    }

    #[test]
    fn reads_cost_a_sixth_of_writes_per_byte() {
        for config in [EnergyConfig::emmc(), EnergyConfig::microsd()] {
            let ratio = config.read_energy_nj_per_byte / config.write_energy_nj_per_byte;
            assert!((ratio - 1.0 / 6.0).abs() < 1e-12, "{}", config.name);
        }
    }

    #[test]
    fn spreading_flushes_past_the_tail_costs_wake_ups() {
        // The same ten 5 ms bursts, back to back within the tail or each after standby.
        let config = EnergyConfig::microsd();
        let batched: Vec<(Nanos, Nanos)> = (0..10)
            .map(|i| (S + i * 10 * MS, S + i * 10 * MS + 5 * MS))
            .collect();
        let spread: Vec<(Nanos, Nanos)> = (0..10)
            .map(|i| (S + i * 5 * S, S + i * 5 * S + 5 * MS))
            .collect();
        let mut inputs = run(&batched, 1 << 20);
        inputs.flushes = 10;
        let together = config.energy(&inputs).unwrap();
        inputs.busy = &spread;
        let apart = config.energy(&inputs).unwrap();
        assert_eq!(together.wakeups, 1);
        assert_eq!(apart.wakeups, 10);
        assert!(apart.wakeup_j > together.wakeup_j);
        assert!(apart.tail_j > together.tail_j);
        assert!(apart.total_j > together.total_j);
        assert_eq!(apart.write_j, together.write_j);
    }

    #[test]
    fn an_idle_run_costs_only_standby() {
        let config = EnergyConfig::emmc();
        let out = config.energy(&run(&[], 0)).unwrap();
        assert_eq!(out.wakeups, 0);
        assert_eq!(out.idle_ns, 60 * S);
        assert!((out.total_j - config.idle_power_mw * 1e-3 * 60.0).abs() < 1e-12);
        assert_eq!(joules_per_byte(&out, 0), None);
        let per_byte = joules_per_byte(&out, 1_000).unwrap();
        assert!((per_byte - out.total_j / 1_000.0).abs() < 1e-18);
    }

    #[test]
    fn the_tail_is_cut_by_the_end_of_the_run() {
        let config = EnergyConfig::emmc();
        let inputs = EnergyInputs {
            busy: &[(0, MS)],
            bytes_read: 4096,
            bytes_written: 0,
            flushes: 1,
            run_ns: 2 * S,
        };
        let out = config.energy(&inputs).unwrap();
        assert_eq!(out.tail_ns, 2 * S - MS);
        assert_eq!(out.idle_ns, 0);
        assert_eq!(out.wakeups, 1);
        assert!(out.read_j > 0.0 && out.flush_j > 0.0);
    }

    #[test]
    fn bad_intervals_are_errors_naming_the_interval() {
        let config = EnergyConfig::emmc();
        let error = config.energy(&run(&[(5, 5)], 0)).unwrap_err();
        assert!(error.contains("interval 0"), "{error}");
        let error = config.energy(&run(&[(0, 10), (5, 20)], 0)).unwrap_err();
        assert!(
            error.contains("interval 1") && error.contains("overlap"),
            "{error}"
        );
        let error = config.energy(&run(&[(0, 61 * S)], 0)).unwrap_err();
        assert!(error.contains("after the run"), "{error}");
        let bad = EnergyConfig {
            tail_power_mw: -1.0,
            ..EnergyConfig::emmc()
        };
        assert!(bad
            .energy(&run(&[], 0))
            .unwrap_err()
            .starts_with("tail-power-mw"));
        assert!(bad.validate().is_err());
    }

    #[test]
    fn profiles_by_device_name_and_deterministic_results() {
        assert_eq!(EnergyConfig::for_device("microsd"), EnergyConfig::microsd());
        assert_eq!(EnergyConfig::for_device("emmc-5.1"), EnergyConfig::emmc());
        let ufs = EnergyConfig::for_device("ufs-2.1");
        assert!(ufs.name.contains("ufs-2.1"));
        ufs.validate().unwrap();
        let busy = [(S, 2 * S), (10 * S, 11 * S)];
        let first = EnergyConfig::microsd()
            .energy(&run(&busy, 123_456))
            .unwrap();
        let second = EnergyConfig::microsd()
            .energy(&run(&busy, 123_456))
            .unwrap();
        assert_eq!(first, second);
    }

    #[test]
    fn config_round_trips_through_toml_and_rejects_unknown_fields() {
        let config = EnergyConfig::microsd();
        let text = toml::to_string(&config).unwrap();
        assert!(text.contains("tail-timeout = "), "{text}");
        let back: EnergyConfig = toml::from_str(&text).unwrap();
        assert_eq!(back, config);
        let typo = text.replace("idle-power-mw", "idle-mw");
        assert!(toml::from_str::<EnergyConfig>(&typo).is_err());
    }
}
