//! mobistack: a deterministic, full-stack simulator of the smartphone storage I/O stack.
//!
//! The layout mirrors the stack (see `../shared/DESIGN.md` and `docs/architecture.md`):
//! `sim` (engine), `dev` (storage devices), `block` (block layer and elevators), `mm` (page cache,
//! writeback, reclaim), `fs` (file systems), `app` (tasks and apps), `workload`, `report`,
//! `scenario`.

pub mod block;
pub mod dev;
pub mod sim;
pub mod units;
