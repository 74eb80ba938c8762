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
use std::collections::VecDeque;

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
    /// Index in `queue` (arrival order, never empty) of the command to start next. The queue is
    /// a ring, so that the device takes its oldest command without moving the others.
    fn pick(&mut self, now: Nanos, queue: &VecDeque<QueuedCommand>) -> usize;
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
    queue: &VecDeque<QueuedCommand>,
    class: impl Fn(&QueuedCommand) -> u8,
) -> usize {
    let first = queue.front().expect("pick on an empty queue");
    debug_assert!(
        queue
            .iter()
            .zip(queue.iter().skip(1))
            .all(|(a, b)| a.seq < b.seq),
        "queue is in arrival order"
    );
    let mut best_class = class(first);
    if best_class == 0 {
        return 0;
    }
    let mut best = 0;
    for (offset, command) in queue.range(1..).enumerate() {
        let class = class(command);
        if class < best_class {
            best = offset + 1;
            best_class = class;
            if best_class == 0 {
                break;
            }
        }
    }
    best
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The device's queue holding `commands`, oldest first.
    pub fn queue(commands: &[QueuedCommand]) -> VecDeque<QueuedCommand> {
        commands.iter().copied().collect()
    }

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
