//! mobistack: a deterministic, full-stack simulator of the smartphone storage I/O stack.
//!
//! The layout mirrors the stack (see `docs/architecture.md`): [`sim`] (the engine), [`dev`]
//! (storage devices), [`block`] (block layer and elevators), [`stack`] (the layers of one run, assembled from a scenario), [`app`]
//! (apps), [`task`] (the foreground state the kernel reads), [`workload`], [`report`] (results), [`scenario`] (files),
//! [`run`] (running scenarios). The `mobistack` binary only parses arguments and prints.
//!
//! ```
//! let scenario = mobistack::scenario::load("demo").unwrap();
//! let results = mobistack::run::run_scenario(&scenario, &Default::default()).unwrap();
//! assert_eq!(results.runs.len(), scenario.variants.len() * scenario.seeds.len());
//! ```

// The documentation is for the project's developers: it links private items on purpose
// (`cargo doc --document-private-items` renders them).
#![allow(rustdoc::private_intra_doc_links)]

pub mod app;
pub mod block;
pub mod crashcheck;
pub mod dev;
pub mod errno;
pub mod fasttrack;
pub mod fs;
pub mod fuzzing;
pub mod kernel;
pub mod mm;
pub mod real;
pub mod report;
pub mod run;
pub mod scenario;
pub mod sim;
pub mod stack;
pub mod task;
pub mod units;
pub mod workload;
