//! Device-internal scheduling: which queued command the controller starts next.
//!
//! A device holds up to its host queue depth of commands (eMMC CMDQ tasks, UFS transfer slots) but
//! works on only `controller_slots` of them at once; when a slot frees, the policy picks the next
//! command from the internal queue. FastTrack (§3.4) observed that devices as shipped serve reads
//! before writes and are FIFO otherwise, so a foreground write waits behind background reads; §4.5
//! proposes an FG-aware order. Each policy is one file with one struct; all are pure functions of
//! the queue (DESIGN.md principle 7).

mod cmd_priority;
mod fg_aware;
mod fifo_read_priority;

pub use cmd_priority::CmdPriority;
pub use fg_aware::FgAware;
pub use fifo_read_priority::FifoReadPriority;

use crate::dev::{IoFlags, IoOp};
use crate::units::Nanos;

/// What a policy may look at in a queued command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueuedCommand {
    /// Arrival order at the device (strictly increasing).
    pub seq: u64,
    pub op: IoOp,
    pub flags: IoFlags,
    pub foreground: bool,
    pub submitted_ns: Nanos,
}

/// A device-internal scheduling policy.
pub trait InternalScheduler: std::fmt::Debug {
    fn name(&self) -> &'static str;
    /// Index in `queue` (arrival order, never empty) of the command to start next.
    fn pick(&mut self, now: Nanos, queue: &[QueuedCommand]) -> usize;
}

/// Policy names accepted by [`by_name`].
pub const SCHEDULER_NAMES: [&str; 3] = ["fifo-read-priority", "fg-aware", "cmd-priority"];

pub fn by_name(name: &str) -> Result<Box<dyn InternalScheduler>, String> {
    match name {
        "fifo-read-priority" => Ok(Box::new(FifoReadPriority)),
        "fg-aware" => Ok(Box::new(FgAware)),
        "cmd-priority" => Ok(Box::new(CmdPriority)),
        _ => Err(format!(
            "unknown device scheduler `{name}`; known: {}",
            SCHEDULER_NAMES.join(", ")
        )),
    }
}

/// Index of the first command (in arrival order) with the smallest `class`. Class 0 is the
/// best there is, so the scan stops at the first command of class 0 (the common case: the
/// oldest command is usually of the best class).
pub(crate) fn first_of_best_class(
    queue: &[QueuedCommand],
    class: impl Fn(&QueuedCommand) -> u8,
) -> usize {
    assert!(!queue.is_empty(), "pick on an empty queue");
    debug_assert!(
        queue.windows(2).all(|pair| pair[0].seq < pair[1].seq),
        "queue is in arrival order"
    );
    let mut best = 0;
    let mut best_class = class(&queue[0]);
    for (index, command) in queue.iter().enumerate().skip(1) {
        if best_class == 0 {
            break;
        }
        let class = class(command);
        if class < best_class {
            best = index;
            best_class = class;
        }
    }
    best
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub fn command(seq: u64, op: IoOp, foreground: bool, prio: bool) -> QueuedCommand {
        QueuedCommand {
            seq,
            op,
            flags: IoFlags {
                prio,
                ..IoFlags::default()
            },
            foreground,
            submitted_ns: seq,
        }
    }

    #[test]
    fn unknown_name_is_an_error() {
        assert!(by_name("fifo-read-priority").is_ok());
        let error = by_name("noop").unwrap_err();
        assert!(error.contains("fg-aware"), "{error}");
    }
}
