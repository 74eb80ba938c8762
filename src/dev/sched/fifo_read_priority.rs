//! `fifo-read-priority`: the order of devices as shipped, as FastTrack §3.4 measured it: reads
//! before writes (flushes and discards count as writes), FIFO within each type. It has no
//! anti-starvation: a stream of reads delays writes indefinitely, which is the priority inversion
//! the paper reports (FG writes wait behind BG reads).

use super::{first_of_best_class, InternalScheduler, QueuedCommand};
use crate::dev::IoOp;
use crate::units::Nanos;
use std::collections::VecDeque;

#[derive(Debug, Clone, Copy, Default)]
pub struct FifoReadPriority;

impl InternalScheduler for FifoReadPriority {
    fn name(&self) -> &'static str {
        "fifo-read-priority"
    }

    fn pick(&mut self, _now: Nanos, queue: &VecDeque<QueuedCommand>) -> usize {
        first_of_best_class(queue, |c| u8::from(c.op != IoOp::Read))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dev::sched::tests::{command, queue as q};

    #[test]
    fn reads_first_then_fifo() {
        let queue = [
            command(1, IoOp::Write, true, false),
            command(2, IoOp::Read, false, false),
            command(3, IoOp::Read, true, false),
        ];
        assert_eq!(FifoReadPriority.pick(0, &q(&queue)), 1);
        assert_eq!(FifoReadPriority.pick(0, &q(&queue[..1])), 0);
        assert_eq!(
            FifoReadPriority.pick(0, &q(&[queue[0], command(4, IoOp::Flush, true, false)])),
            0
        );
    }
}
