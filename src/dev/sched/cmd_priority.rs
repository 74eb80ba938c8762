//! `cmd-priority`: the UFS Command Priority (CP) flag (and the eMMC CMDQ task priority bit).
//! Commands with the priority flag (`IoFlags::prio`, which the host driver sets for requests of
//! the RT I/O class, see `Request::dev_request`) are started first; among commands of equal
//! priority the device keeps its own order, that of devices as shipped (reads before writes,
//! FastTrack §3.4), FIFO within each class.
//!
//! The priority bit is a hint added to a device's scheduling, not a replacement for it: a device
//! that honours CP still serves a plain read before plain writes. (Modelled as "CP first, then
//! FIFO" it made every unflagged read wait behind every queued write, slower than the device
//! without CP: in `fg-read-bg-write`, p50 66.6 ms instead of 50.4 ms.)

use super::{first_of_best_class, InternalScheduler, QueuedCommand};
use crate::dev::IoOp;
use crate::units::Nanos;
use std::collections::VecDeque;

#[derive(Debug, Clone, Copy, Default)]
pub struct CmdPriority;

/// 0 = flagged read, 1 = flagged write, 2 = read, 3 = write (flushes and discards are writes).
fn class(command: &QueuedCommand) -> u8 {
    2 * u8::from(!command.flags.prio) + u8::from(command.op != IoOp::Read)
}

impl InternalScheduler for CmdPriority {
    fn name(&self) -> &'static str {
        "cmd-priority"
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
    fn prio_first_then_reads_before_writes_then_fifo() {
        let queue = [
            command(1, IoOp::Write, false, false),
            command(2, IoOp::Read, false, false),
            command(3, IoOp::Write, false, true),
            command(4, IoOp::Read, false, false),
        ];
        // A flagged command first, whatever its type.
        assert_eq!(CmdPriority.pick(0, &q(&queue)), 2);
        // Without one, a plain read before plain writes (it used to be FIFO: the write).
        assert_eq!(CmdPriority.pick(0, &q(&queue[..2])), 1);
        assert_eq!(CmdPriority.pick(0, &q(&[queue[0], queue[1], queue[3]])), 1);
        assert_eq!(CmdPriority.pick(0, &q(&queue[..1])), 0);
    }
}
