//! The deterministic simulation engine: virtual time, events, `async` tasks that block in virtual
//! time, blocking primitives with wait reasons, named random streams and engine benchmarks.
//!
//! ```
//! use mobistack::sim::{Simulation, WaitReason, Blocker, sync::WaitQueue};
//! let sim = Simulation::new(1);
//! let queue = WaitQueue::new();
//! let (s, q) = (sim.handle(), queue.clone());
//! sim.spawn("sleeper", async move {
//!     q.wait(&s, WaitReason::WaitQueue, Blocker::None).await;
//!     s.now()
//! });
//! let (s, q) = (sim.handle(), queue.clone());
//! sim.spawn("waker", async move {
//!     s.sleep(1_000).await;
//!     q.wake_one(&s);
//! });
//! sim.run_until(u64::MAX, true).unwrap();
//! assert_eq!(sim.now(), 1_000);
//! ```

pub mod bench;
pub mod budget;
pub mod cpu;
pub mod executor;
pub mod idmap;
mod queue;
pub mod rng;
pub mod sync;
pub mod timeline;
pub mod wait;

#[cfg(test)]
mod tests;

pub use executor::{
    BlockedTask, Deadlock, Doing, JoinHandle, Livelock, RunEnd, SharedCallback, Sim, SimError,
    Simulation, Sleep, Step, WaitLog, WaitRecord, WakeToken, MAX_LOGGED_WAITS,
    MAX_STEPS_AT_ONE_INSTANT,
};
pub use idmap::{id_map, IdMap};
pub use rng::Rng;
pub use wait::{BlockedTimes, Blocker, TaskId, Wait, WaitReason};
