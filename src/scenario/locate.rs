//! Points scenario errors at the field they are about.
//!
//! Serde reports a value of the wrong type or form with the span of that value, but checks made
//! after deserialization (an `io_size` of 0, an unknown elevator, a fio job larger than the
//! device) only have a message. [`Spans`] keeps the span of every key and value of the document
//! (parsed once more with `toml::de::DeTable`, which keeps them), and [`Spans::blame`] finds the
//! field a message names among the keys of the tables it may be about: a field in backticks
//! first, then a field named as a word. Messages in mobistack name the field they are about in
//! backticks, so the line is the field's, not its table's.

use std::ops::Range;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

/// One step of a path into the document: a key of a table or an index of an array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// `Seg::Key`.
pub fn key(name: &str) -> Seg {
    Seg::Key(name.to_string())
}

/// The spans of a parsed document.
pub struct Spans<'a> {
    root: Spanned<DeValue<'a>>,
}

/// A key of a table with the spans of the key and of its value.
#[derive(Debug, Clone)]
pub struct Entry {
    pub name: String,
    pub key: Range<usize>,
    pub value: Range<usize>,
}

/// What [`Spans::blame`] found: where to point, and other fields the message names.
#[derive(Debug, Clone)]
pub struct Blame {
    pub span: Range<usize>,
    pub field: String,
    /// Other fields the message names (in backticks) and where they are.
    pub related: Vec<(String, Range<usize>)>,
}

/// Identifier-like words of `message` in backticks, in order.
fn quoted(message: &str) -> Vec<&str> {
    message.split('`').skip(1).step_by(2).collect()
}

/// Identifier-like words of `message` (letters, digits, `_`), in order.
fn words(message: &str) -> Vec<&str> {
    message
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect()
}

impl<'a> Spans<'a> {
    /// `None` when `source` is not valid TOML (its syntax error has a position of its own).
    pub fn parse(source: &'a str) -> Option<Spans<'a>> {
        let table = DeTable::parse(source).ok()?;
        let span = table.span();
        Some(Spans {
            root: Spanned::new(span, DeValue::Table(table.into_inner())),
        })
    }

    /// The value at `path` with the span of its key (for table keys) and of the value.
    fn lookup(&self, path: &[Seg]) -> Option<(Option<Range<usize>>, &Spanned<DeValue<'a>>)> {
        let mut at = &self.root;
        let mut key_span = None;
        for seg in path {
            match (seg, at.get_ref()) {
                (Seg::Key(name), DeValue::Table(table)) => {
                    let (k, v) = table.iter().find(|(k, _)| k.get_ref() == name)?;
                    key_span = Some(k.span());
                    at = v;
                }
                (Seg::Index(index), DeValue::Array(array)) => {
                    at = array.get(*index)?;
                    key_span = None;
                }
                _ => return None,
            }
        }
        Some((key_span, at))
    }

    /// The span of the value at `path` (a table's header for a table).
    pub fn value_span(&self, path: &[Seg]) -> Option<Range<usize>> {
        self.lookup(path).map(|(_, value)| value.span())
    }

    /// The keys of the table at `path` in the order they are written, and those of its
    /// sub-tables at every depth as `sub.key` (`custom.published.seq_read_mbps`).
    pub fn entries(&self, path: &[Seg]) -> Vec<Entry> {
        fn collect(prefix: &str, table: &DeTable<'_>, out: &mut Vec<Entry>) {
            for (k, v) in table.iter() {
                let name = if prefix.is_empty() {
                    k.get_ref().to_string()
                } else {
                    format!("{prefix}.{}", k.get_ref())
                };
                out.push(Entry {
                    name: name.clone(),
                    key: k.span(),
                    value: v.span(),
                });
                if let DeValue::Table(sub) = v.get_ref() {
                    collect(&name, sub, out);
                }
            }
        }
        let Some((_, value)) = self.lookup(path) else {
            return Vec::new();
        };
        let DeValue::Table(table) = value.get_ref() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        collect("", table, &mut out);
        out.sort_by_key(|e| e.key.start);
        out
    }

    /// The field `message` is about, among the keys of `tables` (searched in order, e.g. a
    /// variant's override before the base table): the first field the message names in
    /// backticks, else the first it names as a word. A sub-table's key `custom.queue_depth`
    /// matches `queue_depth`, and `custom.published.seq_read_mbps` matches
    /// `published.seq_read_mbps`. `None` when the message names no key of these tables.
    pub fn blame(&self, message: &str, tables: &[Vec<Seg>]) -> Option<Blame> {
        let quoted = quoted(message);
        let words = words(message);
        let entries: Vec<Vec<Entry>> = tables.iter().map(|path| self.entries(path)).collect();
        let matches = |entry: &Entry, word: &str| {
            entry.name == word
                || (!word.is_empty()
                    && entry.name.len() > word.len()
                    && entry.name.ends_with(word)
                    && entry.name[..entry.name.len() - word.len()].ends_with('.'))
        };
        let mut found = None;
        'search: for candidates in [&quoted, &words] {
            for table in &entries {
                for word in candidates.iter() {
                    if let Some(entry) = table.iter().find(|e| matches(e, word)) {
                        found = Some(entry.clone());
                        break 'search;
                    }
                }
            }
        }
        let entry = found?;
        let mut related: Vec<(String, Range<usize>)> = Vec::new();
        for word in &quoted {
            if entry.name == *word || related.iter().any(|(name, _)| name == word) {
                continue;
            }
            if let Some(other) = entries.iter().flatten().find(|e| matches(e, word)) {
                if other.name != entry.name {
                    related.push((word.to_string(), other.value.clone()));
                }
            }
        }
        Some(Blame {
            span: entry.value,
            field: entry.name,
            related,
        })
    }

    /// The path of the innermost key whose key or value contains byte `offset`, with the
    /// value's type as TOML names it.
    pub fn path_at(&self, offset: usize) -> Option<(Vec<Seg>, &'static str)> {
        fn walk(
            value: &Spanned<DeValue<'_>>,
            offset: usize,
            path: &mut Vec<Seg>,
            best: &mut Option<(Vec<Seg>, &'static str)>,
        ) {
            match value.get_ref() {
                DeValue::Table(table) => {
                    for (k, v) in table.iter() {
                        let inside = k.span().contains(&offset) || v.span().contains(&offset);
                        path.push(Seg::Key(k.get_ref().to_string()));
                        if inside {
                            *best = Some((path.clone(), v.get_ref().type_str()));
                        }
                        walk(v, offset, path, best);
                        path.pop();
                    }
                }
                DeValue::Array(array) => {
                    for (i, v) in array.iter().enumerate() {
                        path.push(Seg::Index(i));
                        if v.span().contains(&offset) && !matches!(v.get_ref(), DeValue::Table(_)) {
                            *best = Some((path.clone(), v.get_ref().type_str()));
                        }
                        walk(v, offset, path, best);
                        path.pop();
                    }
                }
                _ => {}
            }
        }
        let mut best = None;
        walk(&self.root, offset, &mut Vec::new(), &mut best);
        best
    }
}

/// How deep the `toml` parser lets a document nest (`LIMIT` in toml 1.2's `de/parser/mod.rs`):
/// a dotted key of more parts, or arrays and inline tables nested deeper, are an error it may
/// report without a position ("recursion limit").
pub const NESTING_LIMIT: usize = 80;

/// Where `source` first nests deeper than [`NESTING_LIMIT`]: the span of the dotted key (or the
/// bracket) that goes too deep, and what it is. A scan of the text that skips strings and
/// comments, for the parser's error that has no span.
pub fn too_deep(source: &str) -> Option<(Range<usize>, String)> {
    let bytes = source.as_bytes();
    let mut depth = 0usize;
    // The dotted key being read: where it starts and its dots so far.
    let mut key_start: Option<usize> = None;
    let mut dots = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' | b'\'' => {
                key_start.get_or_insert(i);
                i = string_end(bytes, i);
                continue;
            }
            b'#' => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                (key_start, dots) = (None, 0);
                continue;
            }
            b'[' | b'{' => {
                depth += 1;
                if depth > NESTING_LIMIT {
                    let message = format!(
                        "arrays and inline tables nest more than {NESTING_LIMIT} deep here, deeper than the TOML parser allows"
                    );
                    return Some((i..i + 1, message));
                }
                (key_start, dots) = (None, 0);
            }
            b']' | b'}' => {
                depth = depth.saturating_sub(1);
                (key_start, dots) = (None, 0);
            }
            b'.' if key_start.is_some() => {
                dots += 1;
                if dots >= NESTING_LIMIT {
                    let start = key_start.expect("a key is being read");
                    let end = source[start..]
                        .find('\n')
                        .map_or(source.len(), |n| start + n);
                    let parts = source[start..end].matches('.').count() + 1;
                    let message = format!(
                        "this dotted key has {parts} or more parts, deeper than the {NESTING_LIMIT} levels the TOML parser allows"
                    );
                    return Some((start..start + 1, message));
                }
            }
            b' ' | b'\t' => {}
            c if c.is_ascii_alphanumeric() || c == b'_' || c == b'-' => {
                key_start.get_or_insert(i);
            }
            _ => (key_start, dots) = (None, 0),
        }
        i += 1;
    }
    None
}

/// The offset just after the string that starts at `start` (basic or literal, on one line or
/// in triple quotes).
fn string_end(bytes: &[u8], start: usize) -> usize {
    let quote = bytes[start];
    let triple = bytes.len() >= start + 3 && bytes[start..start + 3] == [quote; 3];
    let mut i = start + if triple { 3 } else { 1 };
    while i < bytes.len() {
        if quote == b'"' && bytes[i] == b'\\' {
            i += 2;
            continue;
        }
        if bytes[i] == quote {
            if !triple {
                return i + 1;
            }
            if bytes.len() >= i + 3 && bytes[i..i + 3] == [quote; 3] {
                return i + 3;
            }
        } else if bytes[i] == b'\n' && !triple {
            return i;
        }
        i += 1;
    }
    bytes.len()
}

/// A path as people read it: `app[1].workload.fio.size`.
pub fn dotted(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Key(name) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(name);
            }
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// The name of the last key of `path`.
pub fn last_key(path: &[Seg]) -> Option<&str> {
    path.iter().rev().find_map(|seg| match seg {
        Seg::Key(name) => Some(name.as_str()),
        Seg::Index(_) => None,
    })
}

/// Replaces the value at `path` in `table` with `value` (for asking serde what it expects).
pub fn replace(table: &mut toml::Table, path: &[Seg], value: toml::Value) -> bool {
    let Some((Seg::Key(last), parents)) = path.split_last() else {
        return false;
    };
    let mut at = table;
    let mut iter = parents.iter().peekable();
    while let Some(seg) = iter.next() {
        let Seg::Key(name) = seg else { return false };
        let next = match at.get_mut(name) {
            Some(v) => v,
            None => return false,
        };
        let next = match (next, iter.peek()) {
            (toml::Value::Array(array), Some(Seg::Index(i))) => {
                iter.next();
                match array.get_mut(*i) {
                    Some(v) => v,
                    None => return false,
                }
            }
            (v, _) => v,
        };
        match next {
            toml::Value::Table(t) => at = t,
            _ => return false,
        }
    }
    at.insert(last.clone(), value);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "name = \"x\"\n[stack.device]\nprofile = \"emmc-5.1\"\ncapacity = \"8GiB\"\n[stack.device.custom]\nqueue_depth = 4\n[[app]]\nname = \"a\"\n[app.workload.file-read]\nfile_size = \"1KiB\"\nio_size = \"4KiB\"\n";

    fn line(offset: usize) -> usize {
        DOC[..offset].matches('\n').count() + 1
    }

    #[test]
    fn blame_prefers_a_field_in_backticks_and_names_the_others() {
        let spans = Spans::parse(DOC).unwrap();
        let table = vec![key("app"), Seg::Index(0), key("workload"), key("file-read")];
        let blame = spans
            .blame(
                "file-read `file_size` must be at least `io_size`",
                std::slice::from_ref(&table),
            )
            .unwrap();
        assert_eq!(
            (blame.field.as_str(), line(blame.span.start)),
            ("file_size", 10)
        );
        assert_eq!(blame.related[0].0, "io_size");
        assert_eq!(line(blame.related[0].1.start), 11);
        // A word, when nothing is in backticks; a sub-table's key by its last part.
        let device = vec![key("stack"), key("device")];
        let blame = spans
            .blame(
                "device profile `emmc-5.1`: `queue_depth` 0",
                std::slice::from_ref(&device),
            )
            .unwrap();
        assert_eq!(blame.field, "custom.queue_depth");
        let blame = spans
            .blame("unknown device profile `x`", &[device])
            .unwrap();
        assert_eq!(line(blame.span.start), 3);
        assert!(spans.blame("nothing here", &[table]).is_none());
    }

    #[test]
    fn too_deep_finds_the_dotted_key_or_bracket_past_the_limit() {
        let deep_key = format!(
            "a = 1\n# x.y.z\ns = \"a.b\"\n{} = 1\n",
            ["k"; 100].join(".")
        );
        let (span, message) = too_deep(&deep_key).unwrap();
        assert_eq!(span.start, deep_key.find("k.k").unwrap());
        assert!(message.contains("100 or more parts"), "{message}");
        let header = format!("[{}]\n", ["t"; 81].join("."));
        assert_eq!(too_deep(&header).unwrap().0.start, 1);
        let brackets = format!("x = 1\na = {}", "[".repeat(200));
        assert_eq!(too_deep(&brackets).unwrap().0.start, 10 + NESTING_LIMIT);
        assert!(too_deep(&format!("{} = 1\nv = 1.5\n", ["k"; 80].join("."))).is_none());
        assert!(too_deep("s = \"[[[[\\\"\"\nt = '''{{{'''\n").is_none());
    }

    #[test]
    fn path_at_finds_the_innermost_key() {
        let spans = Spans::parse(DOC).unwrap();
        let offset = DOC.find("\"1KiB\"").unwrap() + 1;
        let (path, kind) = spans.path_at(offset).unwrap();
        assert_eq!(dotted(&path), "app[0].workload.file-read.file_size");
        assert_eq!(kind, "string");
        let mut table: toml::Table = toml::from_str(DOC).unwrap();
        assert!(replace(&mut table, &path, toml::Value::Integer(1)));
        assert_eq!(
            table["app"][0]["workload"]["file-read"]["file_size"].as_integer(),
            Some(1)
        );
    }
}
