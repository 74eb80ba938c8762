//! `cmd-priority`: the UFS Command Priority (CP) flag (and the eMMC CMDQ task priority bit).
//! Commands with the priority flag (`IoFlags::prio`, set by Linux for RT-class requests) are
//! started first, FIFO among themselves; all others are FIFO.

use super::{first_of_best_class, InternalScheduler, QueuedCommand};
use crate::units::Nanos;

#[derive(Debug, Clone, Copy, Default)]
pub struct CmdPriority;

impl InternalScheduler for CmdPriority {
    fn name(&self) -> &'static str {
        "cmd-priority"
    }

    fn pick(&mut self, _now: Nanos, queue: &[QueuedCommand]) -> usize {
        first_of_best_class(queue, |c| u8::from(!c.flags.prio))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dev::sched::tests::command;
    use crate::dev::IoOp;

    #[test]
    fn prio_first_then_fifo_regardless_of_type() {
        let queue = [
            command(1, IoOp::Write, false, false),
            command(2, IoOp::Read, false, false),
            command(3, IoOp::Write, false, true),
        ];
        assert_eq!(CmdPriority.pick(0, &queue), 2);
        assert_eq!(CmdPriority.pick(0, &queue[..2]), 0);
    }
}
