//! The block layer: bios and requests, the request queue (plugging, merging, request allocation
//! limits, dispatch to the device, completion), the elevators, and blktrace output.
//!
//! It sits between the file system (which submits [`request::Bio`]s) and a
//! [`crate::dev::BlockDevice`]. See each submodule's documentation for what it models of Linux and
//! what it simplifies.

pub mod blktrace;
pub mod elevator;
pub mod fio;
pub mod layer;
pub mod queue;
pub mod request;

use serde::{Deserialize, Serialize};

/// The scenario's `[stack.block]` table.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BlockConfig {
    /// I/O scheduler: `noop`, `deadline`, `cfq` or `mq-deadline`. Default `cfq`: the scheduler of
    /// the Android kernels the papers measured (3.4-3.10; QASIO §2, FastTrack §2).
    #[serde(default = "default_elevator")]
    pub elevator: String,
    /// Record a blktrace of the queue (`mobistack run --blktrace FILE` sets it). Default false.
    #[serde(default)]
    pub blktrace: bool,
}

fn default_elevator() -> String {
    "cfq".to_string()
}

impl Default for BlockConfig {
    fn default() -> Self {
        BlockConfig {
            elevator: default_elevator(),
            blktrace: false,
        }
    }
}

impl BlockConfig {
    pub fn validate(&self) -> Result<(), String> {
        if elevator::ELEVATOR_NAMES.contains(&self.elevator.as_str()) || self.elevator == "none" {
            Ok(())
        } else {
            Err(format!(
                "unknown `elevator` `{}`: expected one of {}",
                self.elevator,
                elevator::ELEVATOR_NAMES.join(", ")
            ))
        }
    }
}
