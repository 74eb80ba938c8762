//! Results: what a run measured, recorded while it runs ([`recorder`]), kept as serialisable data
//! ([`results`], the versioned JSON of `--out` and `--json`) and printed as a table ([`table`]).

pub mod compare;
pub mod csv;
pub mod html;
pub mod layers;
pub mod perfetto;
pub mod recorder;
pub mod reproduce;
pub mod results;
pub mod table;
pub mod tune;

pub use results::{OpSummary, RunResult, ScenarioResults};
