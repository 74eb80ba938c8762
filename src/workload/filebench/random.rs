//! filebench's random variables, drawn from mobistack's seeded streams instead of `drand48` and
//! the Mersenne twister, so that runs are deterministic and reproducible per seed.
//!
//! - `gamma_dist_knuth` (gamma_dist.c, also cvars/cvar-gamma.c): Knuth's algorithm G for shape
//!   `a <= 1` and algorithm A for `a > 1` (TAOCP vol. 2, 3rd ed., pp. 586-587 and 134), scaled by
//!   `b` (filebench passes `mean / gamma`). Used for file sizes (`cvar-gamma`, 1.4.9's
//!   `filesizegamma`) and directory widths and depths (`dirgamma`).
//! - Custom variables (`cvar(type=..., parameters=k:v;k:v, min=, max=, round=)`, fb_cvar.c
//!   `get_cvar_value` and cvars/cvar-*.c with mtwist's randistrs.c): `cvar-gamma` (mean 4096,
//!   gamma 1.5), `cvar-uniform` (lower 0, upper 1), `cvar-normal` (mean 0, sigma 1, polar
//!   method), `cvar-exponential` (mean 1), `cvar-lognormal` (shape 1, scale 1: `exp(normal(scale,
//!   shape))`), `cvar-erlang` (shape 1, rate 1; randistrs' `rds_erlang` takes the rate as its mean,
//!   as filebench passes it), `cvar-weibull` (shape 1, scale 1), `cvar-triangular` (lower 0,
//!   upper 1, mode 0.5). `round` rounds to the nearer multiple, then the value is clamped to
//!   `[min, max]` (defaults `DBL_MIN`, `DBL_MAX`).
//! - `randvar(type=uniform|gamma|tabular, min=, mean=, gamma=, round=, seed=, randtable=...)`
//!   (fb_random.c): `rand_uniform_get`, `rand_gamma_get`, `rand_table_get` with their quirks
//!   (`gamma` is given x1000; a gamma randvar without `mean` has mean `gamma`; a table is
//!   normalised to mean 1 and scaled to `mean`, default the table's mean).
//!
//! A variable draws from the stream of whoever evaluates it (a thread, or a fileset while it is
//! populated); a randvar with an explicit `seed` keeps its own stream derived from that seed, so
//! its sequence is the same in every run (filebench's `erand48` seeded by `seed`).

use crate::sim::Rng;
use std::cell::RefCell;

/// Knuth's algorithm G (shape `a <= 1`).
fn gamma_alg_g(a: f64, rng: &mut Rng) -> f64 {
    let p = std::f64::consts::E / (a + std::f64::consts::E);
    // Rejection sampling: the expected number of rounds is below 1.4 for every shape; the bound
    // only guards against a broken source.
    for _ in 0..1_000_000 {
        let u = rng.next_f64();
        let mut v = rng.next_f64();
        while v == 0.0 {
            v = rng.next_f64();
        }
        let (x, q) = if u < p {
            let x = v.powf(1.0 / a);
            (x, (-x).exp())
        } else {
            let x = 1.0 - v.ln();
            (x, x.powf(a - 1.0))
        };
        if rng.next_f64() < q {
            return x;
        }
    }
    panic!("gamma algorithm G did not accept in a million rounds (a = {a})");
}

/// Knuth's algorithm A (shape `a > 1`).
fn gamma_alg_a(a: f64, rng: &mut Rng) -> f64 {
    let s = (2.0 * a - 1.0).sqrt();
    for _ in 0..1_000_000 {
        let u = rng.next_f64();
        let y = (std::f64::consts::PI * u).tan();
        let x = s * y + a - 1.0;
        if x <= 0.0 {
            continue;
        }
        let v = rng.next_f64();
        if v > (1.0 + y * y) * ((a - 1.0) * (x / (a - 1.0)).ln() - s * y).exp() {
            continue;
        }
        return x;
    }
    panic!("gamma algorithm A did not accept in a million rounds (a = {a})");
}

/// `gamma_dist_knuth(a, b)`: a gamma variate of shape `a` and scale `b` (mean `a * b`).
pub fn gamma_dist_knuth(a: f64, b: f64, rng: &mut Rng) -> f64 {
    assert!(a > 0.0, "gamma shape must be positive");
    if a <= 1.0 {
        b * gamma_alg_g(a, rng)
    } else {
        b * gamma_alg_a(a, rng)
    }
}

/// randistrs.c `rds_normal` (polar method).
fn normal(mean: f64, sigma: f64, rng: &mut Rng) -> f64 {
    loop {
        let x = 2.0 * rng.next_f64() - 1.0;
        let y = 2.0 * rng.next_f64() - 1.0;
        let mag = x * x + y * y;
        if mag > 1.0 || mag == 0.0 {
            continue;
        }
        let offset = ((-2.0 * mag.ln()) / mag).sqrt();
        return mean + sigma * x * offset;
    }
}

fn nonzero_uniform(rng: &mut Rng) -> f64 {
    loop {
        let v = rng.next_f64();
        if v != 0.0 {
            return v;
        }
    }
}

/// A distribution with its parameters.
#[derive(Debug, Clone, PartialEq)]
pub enum Distribution {
    Gamma {
        mean: f64,
        gamma: f64,
    },
    Uniform {
        lower: f64,
        upper: f64,
    },
    Normal {
        mean: f64,
        sigma: f64,
    },
    Exponential {
        mean: f64,
    },
    LogNormal {
        shape: f64,
        scale: f64,
    },
    Erlang {
        shape: i64,
        rate: f64,
    },
    Weibull {
        shape: f64,
        scale: f64,
    },
    Triangular {
        lower: f64,
        upper: f64,
        mode: f64,
    },
    /// randvar type=uniform: `min + p * 2 * (mean - min)`.
    RandUniform {
        min: f64,
        mean: f64,
    },
    /// randvar type=gamma: `min + gamma_dist_knuth(gamma, (mean - min) / gamma)`.
    RandGamma {
        min: f64,
        mean: f64,
        gamma: f64,
    },
    /// randvar type=tabular: 100 slots of (base, range), normalised to mean 1.
    RandTable {
        min: f64,
        mean: f64,
        slots: Vec<(f64, f64)>,
    },
}

impl Distribution {
    fn draw(&self, rng: &mut Rng) -> f64 {
        match *self {
            Distribution::Gamma { mean, gamma } => gamma_dist_knuth(gamma, mean / gamma, rng),
            Distribution::Uniform { lower, upper } => lower + rng.next_f64() * (upper - lower),
            Distribution::Normal { mean, sigma } => normal(mean, sigma, rng),
            Distribution::Exponential { mean } => -mean * nonzero_uniform(rng).ln(),
            Distribution::LogNormal { shape, scale } => normal(scale, shape, rng).exp(),
            Distribution::Erlang { shape, rate } => {
                let order = shape.max(1);
                loop {
                    let mut product = rng.next_f64();
                    for _ in 1..order {
                        product *= rng.next_f64();
                    }
                    if product != 0.0 {
                        return -rate * product.ln() / order as f64;
                    }
                }
            }
            Distribution::Weibull { shape, scale } => {
                scale * ((-nonzero_uniform(rng).ln()).ln() / shape).exp()
            }
            Distribution::Triangular { lower, upper, mode } => {
                let scaled_mode = (mode - lower) / (upper - lower);
                let u = rng.next_f64();
                let r = if u <= scaled_mode {
                    (scaled_mode * u).sqrt()
                } else {
                    1.0 - ((1.0 - scaled_mode) * (1.0 - u)).sqrt()
                };
                lower + (upper - lower) * r
            }
            Distribution::RandUniform { min, mean } => rng.next_f64() * (2.0 * (mean - min)) + min,
            Distribution::RandGamma { min, mean, gamma } => {
                gamma_dist_knuth(gamma, (mean - min) / gamma, rng) + min
            }
            Distribution::RandTable {
                min,
                mean,
                ref slots,
            } => {
                let percent = rng.next_f64() * slots.len() as f64;
                let index = (percent as usize).min(slots.len() - 1);
                let (base, range) = slots[index];
                let value = base + range * (percent - index as f64);
                value * (mean - min) + min
            }
        }
    }
}

/// How a variable's draws are post-processed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Shaping {
    /// fb_cvar.c `get_cvar_value`: round to the nearer multiple of `round` (0: none), clamp.
    Custom { min: f64, max: f64, round: u64 },
    /// fb_random.c: `round(value / round) * round` (0: none).
    Randvar { round: f64 },
}

/// A random variable of the script.
#[derive(Debug)]
pub struct RandomVar {
    pub distribution: Distribution,
    pub shaping: Shaping,
    /// The variable's own stream, when the script gave it a `seed`.
    pub own: Option<RefCell<Rng>>,
}

impl RandomVar {
    /// The next value, drawn from `rng` unless the variable has its own stream.
    pub fn sample(&self, rng: &mut Rng) -> f64 {
        let raw = match &self.own {
            Some(own) => self.distribution.draw(&mut own.borrow_mut()),
            None => self.distribution.draw(rng),
        };
        match self.shaping {
            Shaping::Custom { min, max, round } => {
                let mut value = raw;
                if round > 0 {
                    let num = value as u64;
                    let lower = num - num % round;
                    let upper = lower + round;
                    value = if num - lower > upper - num {
                        upper as f64
                    } else {
                        lower as f64
                    };
                }
                value.clamp(min, max)
            }
            Shaping::Randvar { round } => {
                if round == 0.0 {
                    raw
                } else {
                    (raw / round).round() * round
                }
            }
        }
    }

    /// The mean of the distribution before shaping (what `fileset_populate` reads as a random
    /// dirwidth's mean).
    pub fn mean(&self) -> f64 {
        match self.distribution {
            Distribution::Gamma { mean, .. }
            | Distribution::Normal { mean, .. }
            | Distribution::Exponential { mean }
            | Distribution::RandUniform { mean, .. }
            | Distribution::RandGamma { mean, .. }
            | Distribution::RandTable { mean, .. } => mean,
            Distribution::Uniform { lower, upper } => (lower + upper) / 2.0,
            Distribution::LogNormal { shape, scale } => (scale + shape * shape / 2.0).exp(),
            Distribution::Erlang { rate, .. } => rate,
            Distribution::Weibull { .. } | Distribution::Triangular { .. } => {
                let mut rng = Rng::new(0);
                (0..1000)
                    .map(|_| self.distribution.draw(&mut rng))
                    .sum::<f64>()
                    / 1000.0
            }
        }
    }
}

/// Parses a cvar's `type` and `parameters` (`key:value;key:value`, cvar_tokens.c). Unknown
/// types and parameters are errors, as the cvar libraries make them.
pub fn custom_distribution(kind: &str, parameters: &str) -> Result<Distribution, String> {
    let mut pairs: Vec<(String, String, bool)> = Vec::new();
    for part in parameters.split(';').filter(|p| !p.trim().is_empty()) {
        let (key, value) = part
            .split_once(':')
            .ok_or_else(|| format!("cvar parameter `{part}` is not `key:value`"))?;
        pairs.push((key.trim().to_string(), value.trim().to_string(), false));
    }
    let mut take = |key: &str, default: f64| -> Result<f64, String> {
        match pairs.iter_mut().find(|(k, _, _)| k == key) {
            Some((_, value, used)) => {
                *used = true;
                value
                    .parse::<f64>()
                    .map_err(|_| format!("cvar parameter `{key}:{value}` is not a number"))
            }
            None => Ok(default),
        }
    };
    let distribution = match kind {
        "cvar-gamma" => {
            let mean = take("mean", 4096.0)?;
            let gamma = take("gamma", 1.5)?;
            if gamma <= 0.0 {
                return Err(format!("cvar-gamma: gamma must be greater than 0, not {gamma}"));
            }
            Distribution::Gamma { mean, gamma }
        }
        "cvar-uniform" => Distribution::Uniform {
            lower: take("lower", 0.0)?,
            upper: take("upper", 1.0)?,
        },
        "cvar-normal" => Distribution::Normal {
            mean: take("mean", 0.0)?,
            sigma: take("sigma", 1.0)?,
        },
        "cvar-exponential" => {
            let mean = take("mean", 1.0)?;
            Distribution::Exponential {
                mean: mean.max(0.0),
            }
        }
        "cvar-lognormal" => Distribution::LogNormal {
            shape: take("shape", 1.0)?,
            scale: take("scale", 1.0)?,
        },
        "cvar-erlang" => Distribution::Erlang {
            shape: take("shape", 1.0)? as i64,
            rate: take("rate", 1.0)?,
        },
        "cvar-weibull" => {
            let shape = take("shape", 1.0)?;
            if shape <= 0.0 {
                return Err("cvar-weibull: shape must be positive".into());
            }
            Distribution::Weibull {
                shape,
                scale: take("scale", 1.0)?,
            }
        }
        "cvar-triangular" => {
            let lower = take("lower", 0.0)?;
            let upper = take("upper", 1.0)?;
            let mode = take("mode", 0.5)?;
            if upper <= lower || mode < lower || mode > upper {
                return Err(format!(
                    "cvar-triangular: need lower < upper and lower <= mode <= upper ({lower}, {upper}, {mode})"
                ));
            }
            Distribution::Triangular { lower, upper, mode }
        }
        other => {
            return Err(format!(
                "unknown custom variable type `{other}` (supported: cvar-gamma, cvar-uniform, cvar-normal, cvar-exponential, cvar-lognormal, cvar-erlang, cvar-weibull, cvar-triangular)"
            ))
        }
    };
    if let Some((key, _, _)) = pairs.iter().find(|(_, _, used)| !used) {
        return Err(format!("{kind}: unsupported parameter `{key}`"));
    }
    Ok(distribution)
}

/// Builds a randvar table (fb_random.c `randdist_init`): entries of (percent, min, max) must
/// total 100 %; returns the 100 normalised slots and the table's mean.
pub fn random_table(entries: &[(i64, f64, f64)]) -> Result<(Vec<(f64, f64)>, f64), String> {
    let mut slots = Vec::with_capacity(100);
    let mut table_mean = 0.0;
    let mut table_min = f64::MAX;
    for &(percent, min, max) in entries {
        if percent < 0 {
            return Err("a randtable percentage must not be negative".into());
        }
        table_min = table_min.min(min);
        table_mean += (min + max) / 2.0 * percent as f64;
        for _ in 0..percent {
            slots.push((min, max - min));
        }
    }
    if slots.len() != 100 {
        return Err(format!(
            "the randtable's percentages total {} %, not 100 %",
            slots.len()
        ));
    }
    let mean = table_mean / 100.0;
    let spread = mean - table_min;
    if spread == 0.0 {
        return Ok((vec![(0.0, 0.0); 100], mean));
    }
    for slot in &mut slots {
        *slot = ((slot.0 - table_min) / spread, slot.1 / spread);
    }
    Ok((slots, mean))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mean_of(var: &RandomVar, n: usize) -> f64 {
        let mut rng = Rng::new(42);
        (0..n).map(|_| var.sample(&mut rng)).sum::<f64>() / n as f64
    }

    #[test]
    fn gamma_variates_have_the_requested_mean() {
        for (mean, gamma) in [(131072.0, 1.5), (16384.0, 1.5), (20.0, 0.5), (3.0, 1.0)] {
            let var = RandomVar {
                distribution: custom_distribution(
                    "cvar-gamma",
                    &format!("mean:{mean};gamma:{gamma}"),
                )
                .unwrap(),
                shaping: Shaping::Custom {
                    min: f64::MIN_POSITIVE,
                    max: f64::MAX,
                    round: 0,
                },
                own: None,
            };
            let measured = mean_of(&var, 40_000);
            assert!(
                (measured / mean - 1.0).abs() < 0.03,
                "gamma {gamma}: mean {measured} vs {mean}"
            );
        }
    }

    #[test]
    fn custom_variables_round_and_clamp() {
        let var = RandomVar {
            distribution: custom_distribution("cvar-uniform", "lower:4096;upper:8192").unwrap(),
            shaping: Shaping::Custom {
                min: 5000.0,
                max: 8000.0,
                round: 1000,
            },
            own: None,
        };
        let mut rng = Rng::new(1);
        for _ in 0..1000 {
            let v = var.sample(&mut rng);
            assert!((5000.0..=8000.0).contains(&v), "{v}");
            assert_eq!(v % 1000.0, 0.0);
        }
        assert!(custom_distribution("cvar-gamma", "mean:1;shape:2")
            .unwrap_err()
            .contains("shape"));
        assert!(custom_distribution("cvar-zipf", "")
            .unwrap_err()
            .contains("cvar-zipf"));
    }

    #[test]
    fn randvar_tables_follow_their_percentages() {
        let (slots, mean) = random_table(&[(50, 1024.0, 1024.0), (50, 8192.0, 8192.0)]).unwrap();
        assert_eq!(mean, 4608.0);
        let var = RandomVar {
            distribution: Distribution::RandTable {
                min: 0.0,
                mean,
                slots,
            },
            shaping: Shaping::Randvar { round: 1024.0 },
            own: None,
        };
        let mut rng = Rng::new(3);
        let small = (0..2000).filter(|_| var.sample(&mut rng) <= 1024.0).count();
        assert!((900..1100).contains(&small), "{small}");
        assert!(random_table(&[(60, 1.0, 2.0)]).unwrap_err().contains("60"));
    }
}
