//! fio in one place: its job files ([`job`]: fio's options parsed with fio's names, units and
//! errors), their execution as submitter tasks over the block layer or the page cache
//! ([`engine`], [`run`]), what a job records of its I/O as fio records it ([`stats`]), and the
//! results in fio's own formats ([`output`]: the normal text, JSON and json+).
//!
//! `mobistack fio` runs a whole job file ([`run_fio_file`]); a scenario's app runs one job
//! (`[app.workload.fio]`, [`FioWorkloadConfig`], [`start`]).

pub mod engine;
pub mod job;
pub mod output;
pub mod run;
pub mod stats;

pub use engine::{
    DirectTarget, IoFuture, IoHooks, IoTimes, JobState, JobTarget, NextIo, NoHooks, PrepareFuture,
};
pub use job::{
    job_from_options, parse_job_file, parse_job_file_env, BlockSizes, Distribution, FioJob, RwMode,
    FIO_DIRECTORY, FIRST_PID,
};
pub use output::{FioJobReport, FioReport, LeftAtEnd};
pub use run::{
    bench, run_fio, run_fio_classified, run_fio_file, run_fio_file_classified, start,
    BufferedTarget, FioError, FioOptions, FioProgress, FioWorkloadConfig,
};
pub use stats::{DirectionStats, JobStats, LatencyRanges, LatencyStats};
