//! Scenario files: what to simulate, written in TOML with human units.
//!
//! A scenario names its seeds and duration, the stack configuration, the apps with their
//! workloads, a timeline of events (an app starts, stops, comes to the foreground), and *variants*:
//! named overrides of the stack configuration that are run side by side. Every table rejects
//! unknown fields, and every error names the file, the line and the field.
//!
//! ```toml
//! name = "demo"
//! seeds = [1]
//! duration = "10s"
//!
//! [stack.toy]
//! policy = "fifo"
//!
//! [[app]]
//! name = "camera"
//! role = "foreground"
//! [app.workload.toy-io]
//! interval = "20ms"
//!
//! [[variant]]
//! name = "fg-first"
//! [variant.stack.toy]
//! policy = "fg-first"
//! ```
//!
//! The schema grows with the stack: later sections are added with defaults, so existing files keep
//! their meaning. See `docs/scenarios.md` for every field.

pub mod builtin;
mod schema;

pub use schema::*;

use std::fmt;
use std::path::Path;

/// A scenario that could not be read: the file, where in it, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    pub file: String,
    /// 1-based line and column, when the error points into the file.
    pub position: Option<(usize, usize)>,
    pub message: String,
    /// The offending source line, for display.
    pub source_line: Option<String>,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.position {
            Some((line, column)) => {
                write!(f, "{}:{line}:{column}: {}", self.file, self.message)?;
                if let Some(text) = &self.source_line {
                    write!(f, "\n{line:>5} | {text}\n      | {:>column$}", "^")?;
                }
                Ok(())
            }
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for ScenarioError {}

impl ScenarioError {
    fn at(file: &str, source: &str, span: Option<std::ops::Range<usize>>, message: String) -> Self {
        let position = span.map(|s| line_column(source, s.start));
        let source_line =
            position.and_then(|(line, _)| source.lines().nth(line - 1).map(String::from));
        ScenarioError {
            file: file.to_string(),
            position,
            message,
            source_line,
        }
    }
}

/// 1-based line and column of byte `offset` in `source`.
fn line_column(source: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(source.len());
    let before = &source[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, column)
}

/// Reads a scenario from a path, or from the built-in set when `name_or_path` names one and no
/// such file exists.
pub fn load(name_or_path: &str) -> Result<Scenario, ScenarioError> {
    let path = Path::new(name_or_path);
    if path.exists() {
        let source = std::fs::read_to_string(path).map_err(|e| ScenarioError {
            file: name_or_path.to_string(),
            position: None,
            message: format!("cannot read: {e}"),
            source_line: None,
        })?;
        return parse(name_or_path, &source);
    }
    match builtin::find(name_or_path) {
        Some(builtin) => parse(&format!("scenarios/{}.toml", builtin.name), builtin.source),
        None => Err(ScenarioError {
            file: name_or_path.to_string(),
            position: None,
            message: format!(
                "no such file, and no built-in scenario of that name (built-in: {})",
                builtin::names().join(", ")
            ),
            source_line: None,
        }),
    }
}

/// Parses scenario `source`; `file` is used in error messages.
pub fn parse(file: &str, source: &str) -> Result<Scenario, ScenarioError> {
    let document: ScenarioFile = toml::from_str(source)
        .map_err(|e| ScenarioError::at(file, source, e.span(), e.message().to_string()))?;
    // The untyped document, for merging variant overrides field by field over the base stack.
    let raw: toml::Table = toml::from_str(source)
        .map_err(|e| ScenarioError::at(file, source, e.span(), e.message().to_string()))?;
    Scenario::from_file(file, source, document, &raw)
}
