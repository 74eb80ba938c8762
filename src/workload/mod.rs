//! Workloads: what apps do. Each kind is one module with its configuration (a scenario table
//! `[app.workload.<kind>]`) and the async body of the app's tasks.

pub mod file;
pub mod filebench;
pub mod fio;
pub mod ops;
pub mod replay;
pub mod sqlite;
pub mod toy;
