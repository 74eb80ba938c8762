//! The toy workloads of the foundation stack.
//!
//! - `toy-io`: streams of synthetic requests to the toy server ([`crate::stack::toy::ToyServer`]):
//!   think for `interval`, send one request, wait for it; `depth` such streams per app.
//! - `toy-locks`: takes named locks in the listed order, holding each for `hold` before taking the
//!   next, then releases them. Two apps taking the same locks in opposite orders deadlock, which
//!   is how the engine's deadlock report is exercised end to end.
//!
//! Both exist to drive the engine, the scenario format and the results before the real layers
//! arrive; they model no real app.

use crate::app::AppContext;
use crate::sim::{Blocker, WaitReason};
use crate::units::{serde_units, Nanos, PAGE_SIZE};
use serde::{Deserialize, Serialize};

/// How requests of one stream are spaced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Arrival {
    /// Exactly `interval` of think time between a completion and the next request.
    #[default]
    Fixed,
    /// Exponentially distributed think time with mean `interval`.
    Poisson,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ToyIoConfig {
    /// Think time between a request's completion and the stream's next request.
    #[serde(with = "serde_units::duration")]
    pub interval: Nanos,
    #[serde(default)]
    pub arrival: Arrival,
    /// Concurrent request streams (tasks) of this app.
    #[serde(default = "one")]
    pub depth: u32,
    /// Requests per stream; unlimited when absent (the run's duration ends it).
    #[serde(default)]
    pub count: Option<u64>,
    /// Bytes per request, counted in the app's throughput.
    #[serde(default = "page", with = "serde_units::size")]
    pub size: u64,
}

fn one() -> u32 {
    1
}

fn page() -> u64 {
    PAGE_SIZE
}

/// Bound on streams per app.
pub const MAX_DEPTH: u32 = 1024;

impl ToyIoConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.depth == 0 || self.depth > MAX_DEPTH {
            return Err(format!(
                "toy-io `depth` must be 1..={MAX_DEPTH}, not {}",
                self.depth
            ));
        }
        if self.count == Some(0) {
            return Err("toy-io `count` must be positive when given".into());
        }
        Ok(())
    }
}

/// One stream of `toy-io`.
pub async fn toy_io_stream(ctx: AppContext, config: ToyIoConfig, stream: u32) {
    let sim = ctx.sim.clone();
    let server = ctx.stack.toy_server.clone();
    let mut rng = sim.rng(&format!("toy-io/{}/{stream}", ctx.name));
    let mut sent = 0u64;
    while !ctx.is_stopped() && config.count.is_none_or(|c| sent < c) {
        let think = match config.arrival {
            Arrival::Fixed => config.interval,
            Arrival::Poisson => rng.exponential(config.interval as f64).round() as Nanos,
        };
        sim.sleep(think).await;
        if ctx.is_stopped() {
            break;
        }
        let op = ctx.begin_op("io");
        server.submit(&sim, ctx.uid).await;
        ctx.end_op(op);
        ctx.add_counter("bytes", config.size);
        sent += 1;
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ToyLocksConfig {
    /// Lock names, taken in this order.
    pub locks: Vec<String>,
    /// How long each lock is held before the next is taken.
    #[serde(with = "serde_units::duration")]
    pub hold: Nanos,
    /// Rounds of taking all locks; default 1.
    #[serde(default = "one_round")]
    pub count: u64,
}

fn one_round() -> u64 {
    1
}

impl ToyLocksConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.locks.is_empty() {
            return Err(
                "toy-locks `locks` must name at least one lock, e.g. locks = [\"inode\"]".into(),
            );
        }
        for (i, name) in self.locks.iter().enumerate() {
            if self.locks[..i].contains(name) {
                return Err(format!(
                    "toy-locks `locks` names `{name}` twice: a task cannot take a lock it already holds (list each lock once)"
                ));
            }
        }
        if self.count == 0 {
            return Err("toy-locks `count` must be positive".into());
        }
        Ok(())
    }
}

/// The body of a `toy-locks` app.
pub async fn toy_locks(ctx: AppContext, config: ToyLocksConfig) {
    let sim = ctx.sim.clone();
    for _ in 0..config.count {
        if ctx.is_stopped() {
            break;
        }
        let op = ctx.begin_op("lock-round");
        let mut guards = Vec::new();
        for name in &config.locks {
            let lock = ctx.stack.named_lock(&sim, name);
            guards.push(lock.lock(&sim).await);
            sim.sleep_for(config.hold, WaitReason::Sleep, Blocker::None)
                .await;
        }
        drop(guards);
        ctx.end_op(op);
    }
}
