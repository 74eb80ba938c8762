//! `fg-aware`: FastTrack §4.5's device-level scheduler. The host marks each command with whether
//! the issuing app is in the foreground (a flag in a reserved SCSI opcode field in the paper); the
//! device serves FG reads, then FG writes, then BG reads, then BG writes, FIFO within a class.
//! Flushes and discards are writes of their issuer's class.

use super::{first_of_best_class, InternalScheduler, QueuedCommand};
use crate::dev::IoOp;
use crate::units::Nanos;
use std::collections::VecDeque;

#[derive(Debug, Clone, Copy, Default)]
pub struct FgAware;

/// 0 = FG read, 1 = FG write, 2 = BG read, 3 = BG write (FastTrack §4.5).
fn class(command: &QueuedCommand) -> u8 {
    let write = u8::from(command.op != IoOp::Read);
    let background = u8::from(!command.foreground);
    2 * background + write
}

impl InternalScheduler for FgAware {
    fn name(&self) -> &'static str {
        "fg-aware"
    }

    fn pick(&mut self, _now: Nanos, queue: &VecDeque<QueuedCommand>) -> usize {
        first_of_best_class(queue, class)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dev::sched::tests::{command, queue as q};

    #[test]
    fn fg_read_fg_write_bg_read_bg_write() {
        let queue = [
            command(1, IoOp::Write, false, false),
            command(2, IoOp::Read, false, false),
            command(3, IoOp::Write, true, false),
            command(4, IoOp::Read, true, false),
        ];
        let mut policy = FgAware;
        assert_eq!(policy.pick(0, &q(&queue)), 3);
        assert_eq!(policy.pick(0, &q(&queue[..3])), 2);
        assert_eq!(policy.pick(0, &q(&queue[..2])), 1);
        assert_eq!(policy.pick(0, &q(&queue[..1])), 0);
    }
}
