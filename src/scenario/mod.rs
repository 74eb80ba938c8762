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
pub mod eras;
pub mod locate;
pub mod phones;
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
    /// The offending source line for display (cut around the column when long), with the
    /// 1-based column of the caret in it.
    pub source_line: Option<(String, usize)>,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.position {
            Some((line, column)) => {
                write!(f, "{}:{line}:{column}: {}", self.file, self.message)?;
                if let Some((text, caret)) = &self.source_line {
                    write!(f, "\n{line:>5} | {text}\n      | {:>caret$}", "^")?;
                }
                Ok(())
            }
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for ScenarioError {}

impl ScenarioError {
    pub(crate) fn at(
        file: &str,
        source: &str,
        span: Option<std::ops::Range<usize>>,
        message: String,
    ) -> Self {
        let position = span.map(|s| line_column(source, s.start));
        let source_line = position.and_then(|(line, column)| {
            source
                .lines()
                .nth(line - 1)
                .map(|text| window(text, column))
        });
        ScenarioError {
            file: file.to_string(),
            position,
            message: crate::units::cut_message(&shorten_quoted(&message)),
            source_line,
        }
    }
}

/// Longest source line shown under an error, in characters.
const SHOWN_LINE_CHARS: usize = 100;

/// The part of a long `line` around 1-based `column` (at most [`SHOWN_LINE_CHARS`] characters,
/// "..." where cut) and the caret's column within it.
fn window(line: &str, column: usize) -> (String, usize) {
    let chars: Vec<char> = line.chars().collect();
    if chars.len() <= SHOWN_LINE_CHARS {
        return (line.to_string(), column);
    }
    // Columns are byte-based; find the character index of the column's byte.
    let byte = column.saturating_sub(1).min(line.len());
    let at = line.char_indices().take_while(|(i, _)| *i < byte).count();
    let start = at.saturating_sub(20);
    let end = (start + SHOWN_LINE_CHARS).min(chars.len());
    let mut text = String::new();
    if start > 0 {
        text.push_str("...");
    }
    text.extend(&chars[start..end]);
    if end < chars.len() {
        text.push_str("...");
    }
    let shown = at - start + 1 + if start > 0 { 3 } else { 0 };
    (text, shown)
}

/// Cuts every backticked part of `message` longer than twice [`crate::units::SHOWN_CHARS`] (values
/// echoed by serde or by checks), so no error repeats a huge value whole.
fn shorten_quoted(message: &str) -> String {
    let parts: Vec<&str> = message.split('`').collect();
    if parts.len() < 3 {
        return message.to_string();
    }
    let mut out = String::with_capacity(message.len().min(1024));
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            out.push('`');
        }
        // Twice the shown length, so that what `cut` made is never cut again.
        if i % 2 == 1 && i + 1 < parts.len() && part.chars().count() > 2 * crate::units::SHOWN_CHARS
        {
            out.push_str(&crate::units::cut(part));
        } else {
            out.push_str(part);
        }
    }
    out
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
/// The TOML text of a scenario file or built-in scenario, as [`load`] would read it.
pub fn source(name_or_path: &str) -> Option<String> {
    let path = Path::new(name_or_path);
    if path.exists() {
        return std::fs::read_to_string(path).ok();
    }
    builtin::find(name_or_path).map(|b| b.source.to_string())
}

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
    let spans = locate::Spans::parse(source);
    let document: ScenarioFile =
        toml::from_str(source).map_err(|e| toml_error(file, source, spans.as_ref(), &e))?;
    // The untyped document, for merging variant overrides field by field over the base stack.
    let raw: toml::Table =
        toml::from_str(source).map_err(|e| toml_error(file, source, spans.as_ref(), &e))?;
    let spans = spans.expect("a document that deserializes parses");
    Scenario::from_file(file, source, &spans, document, &raw)
}

/// A TOML or schema error, with the field it is about named and, for a value of the wrong
/// type, what was expected.
fn toml_error(
    file: &str,
    source: &str,
    spans: Option<&locate::Spans<'_>>,
    error: &toml::de::Error,
) -> ScenarioError {
    let mut span = error.span();
    let mut message = error.message().trim_end().to_string();
    if span.is_none() {
        // The parser's "recursion limit" has no position: find where the nesting goes too deep.
        if let Some((deep, explained)) = locate::too_deep(source) {
            span = Some(deep);
            message = format!("{message}: {explained}");
        }
    }
    let located = spans.zip(span.clone()).and_then(|(spans, span)| {
        spans
            .path_at(span.start)
            .or_else(|| spans.path_at(span.end.saturating_sub(1)))
    });
    if let Some((path, found)) = located {
        let field = locate::last_key(&path).unwrap_or("value").to_string();
        let vague = message.contains("wanted string or table")
            || message.contains("did not match any variant");
        if let Some(rest) = message.strip_prefix("invalid type: ") {
            // serde's "invalid type: boolean `true`, expected a size: ...": field first.
            message = match rest.split_once(", expected ") {
                Some((got, expected)) => {
                    let got = match got {
                        "sequence" => "an array",
                        "map" => "a table",
                        other => other,
                    };
                    format!("field `{field}`: expected {expected}, found {got}")
                }
                None => format!("field `{field}`: invalid type: {rest}"),
            };
        } else if vague {
            let expected = expected_at(source, &path)
                .unwrap_or_else(|| "a value as documented in docs/scenarios.md".to_string());
            message = format!("field `{field}`: expected {expected}, found {found}");
        } else if !message.contains(&format!("`{field}`")) {
            message = format!("field `{field}`: {message}");
        }
    }
    ScenarioError::at(file, source, span, message)
}

/// What serde expects at `path`, found by putting a string there and reading the error (an
/// enum lists its variants: "one of `foreground`, `background`, `service`").
fn expected_at(source: &str, path: &[locate::Seg]) -> Option<String> {
    let mut table: toml::Table = toml::from_str::<toml::Table>(source).ok()?;
    if !locate::replace(&mut table, path, toml::Value::String("?".into())) {
        return None;
    }
    let text = toml::to_string(&table).ok()?;
    let error = toml::from_str::<ScenarioFile>(&text).err()?;
    let message = error.message();
    let expected = message.split_once("expected ")?.1.trim_end();
    Some(expected.trim_end_matches('.').to_string())
}
