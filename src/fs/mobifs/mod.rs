//! MobiFS (ATC'15): memory-centric storage with versioned cache transactions (issue 20).
pub mod predict;
pub mod sched;
