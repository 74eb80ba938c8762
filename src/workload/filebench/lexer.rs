//! The tokens of filebench's Workload Model Language, as `parser_lex.l` (filebench 1.5) defines
//! them: keywords, numbers with `k`/`m`/`g` suffixes (powers of 1024, `KB`/`MB`/`GB` in
//! filebench.h), `true`/`false`, `$variables`, bare strings (`[/A-Za-z-][/A-Za-z0-9._:;-]*`),
//! quoted strings (whose `$variables` are expanded by `echo`), and the punctuation `{ } ( ) = ,`.
//! `#` starts a comment outside quotes. Every token carries its line.
//!
//! Kept from flex's rules: a keyword is a whole word (flex takes the longest match, so
//! `filesetname` is a keyword and `filesetnames` a string), `fileset[s]*` and `process[es]*`
//! accept their plural spellings, a number immediately followed by a letter other than the
//! suffixes is the number and then a string. Simplified: a variable name may have one character
//! (flex wants two); any other character is an error naming it and its line.

use super::FbError;

/// A token.
#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    /// A keyword (`define`, `flowop`, `iosize`, ...), lower case as written.
    Word(&'static str),
    /// A bare string that is not a keyword (`bigfileset`, `/tmp`, `cvar-gamma`, `mean:16384`).
    Str(String),
    /// An integer, with its suffix applied.
    Int(i64),
    Bool(bool),
    /// `$name` (without the `$` and any braces).
    Var(String),
    /// `"..."`: literal text and `$variables`.
    Quoted(Vec<Piece>),
    Open,
    Close,
    OpenPar,
    ClosePar,
    Assign,
    Comma,
}

/// A part of a quoted string.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    Text(String),
    Var(String),
}

/// A token and the line it starts on.
#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    pub tok: Tok,
    pub line: usize,
}

/// Every keyword of `parser_lex.l` (commands, entities, attributes, values).
const KEYWORDS: &[&str] = &[
    "create",
    "define",
    "debug",
    "domultisync",
    "echo",
    "enable",
    "eventgen",
    "quit",
    "list",
    "run",
    "psrun",
    "set",
    "sleep",
    "system",
    "version",
    "file",
    "files",
    "fileset",
    "process",
    "thread",
    "flowop",
    "randvar",
    "mode",
    "multi",
    "cvar",
    "alldone",
    "blocking",
    "client",
    "dirwidth",
    "dirdepthrv",
    "directio",
    "dirgamma",
    "dsync",
    "entries",
    "fd",
    "filename",
    "filesetname",
    "filesize",
    "firstdone",
    "gamma",
    "highwater",
    "indexed",
    "instances",
    "iosize",
    "iters",
    "leafdirs",
    "master",
    "mean",
    "memsize",
    "ioprio",
    "min",
    "max",
    "name",
    "nice",
    "opennext",
    "paralloc",
    "parameters",
    "path",
    "prealloc",
    "random",
    "randsrc",
    "randtable",
    "rate",
    "readonly",
    "writeonly",
    "reuse",
    "round",
    "seed",
    "size",
    "srcfd",
    "target",
    "timeout",
    "trusttree",
    "type",
    "useism",
    "value",
    "workingset",
    "nousestats",
    "lathist",
    "uniform",
    "tabular",
    "urandom",
    "rand48",
    "noreadahead",
    "in",
    // filebench 1.4 words that 1.4 personalities still use (see the parser).
    "usage",
    "cached",
    "filesizegamma",
];

/// The keyword `word` stands for, if any (with flex's plural rules).
fn keyword(word: &str) -> Option<&'static str> {
    if let Some(found) = KEYWORDS.iter().find(|k| **k == word) {
        return Some(found);
    }
    // fileset[s]* and process[es]*.
    if word.starts_with("fileset") && word[7..].bytes().all(|b| b == b's') {
        return Some("fileset");
    }
    if word.starts_with("process") && word[7..].bytes().all(|b| b == b'e' || b == b's') {
        return Some("process");
    }
    None
}

fn is_string_start(c: u8) -> bool {
    c == b'/' || c == b'-' || c.is_ascii_alphabetic()
}

fn is_string_char(c: u8) -> bool {
    c == b'/' || c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b':' | b';' | b'-')
}

fn is_var_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Bound on tokens of one file (a personality has a few hundred).
pub const MAX_TOKENS: usize = 1 << 20;

/// Splits `text` into tokens. Errors name `file` and the line.
pub fn tokenize(file: &str, text: &str) -> Result<Vec<Token>, FbError> {
    let bytes = text.as_bytes();
    let mut tokens = Vec::new();
    let mut line = 1usize;
    let mut i = 0usize;
    let error = |line: usize, message: String| FbError::new(file, line, message);
    while i < bytes.len() {
        if tokens.len() >= MAX_TOKENS {
            return Err(error(line, format!("more than {MAX_TOKENS} tokens")));
        }
        let c = bytes[i];
        let start_line = line;
        let mut push = |tok: Tok| {
            tokens.push(Token {
                tok,
                line: start_line,
            })
        };
        match c {
            b'\n' => {
                line += 1;
                i += 1;
            }
            b' ' | b'\t' | b'\r' => i += 1,
            b'#' => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'{' => {
                push(Tok::Open);
                i += 1;
            }
            b'}' => {
                push(Tok::Close);
                i += 1;
            }
            b'(' => {
                push(Tok::OpenPar);
                i += 1;
            }
            b')' => {
                push(Tok::ClosePar);
                i += 1;
            }
            b'=' => {
                push(Tok::Assign);
                i += 1;
            }
            b',' => {
                push(Tok::Comma);
                i += 1;
            }
            b'"' => {
                i += 1;
                let mut pieces: Vec<Piece> = Vec::new();
                let mut text_piece = String::new();
                loop {
                    let Some(&d) = bytes.get(i) else {
                        return Err(error(start_line, "unterminated quoted string".into()));
                    };
                    match d {
                        b'"' => {
                            i += 1;
                            break;
                        }
                        b'\n' => {
                            line += 1;
                            text_piece.push('\n');
                            i += 1;
                        }
                        b'\\' if bytes.get(i + 1) == Some(&b'n') => {
                            text_piece.push('\n');
                            i += 2;
                        }
                        b'\\' if bytes.get(i + 1) == Some(&b'$') => {
                            text_piece.push('$');
                            i += 2;
                        }
                        b'$' => {
                            let (name, next) = variable(bytes, i)
                                .ok_or_else(|| error(line, "`$` without a variable name".into()))?;
                            if !text_piece.is_empty() {
                                pieces.push(Piece::Text(std::mem::take(&mut text_piece)));
                            }
                            pieces.push(Piece::Var(name));
                            i = next;
                        }
                        _ => {
                            // Copy one UTF-8 character.
                            let rest = &text[i..];
                            let ch = rest.chars().next().expect("in bounds");
                            text_piece.push(ch);
                            i += ch.len_utf8();
                        }
                    }
                }
                if !text_piece.is_empty() {
                    pieces.push(Piece::Text(text_piece));
                }
                push(Tok::Quoted(pieces));
            }
            b'$' => {
                let (name, next) = variable(bytes, i)
                    .ok_or_else(|| error(line, "`$` without a variable name".into()))?;
                push(Tok::Var(name));
                i = next;
            }
            b'0'..=b'9' => {
                let (value, next) = number(bytes, i, false)
                    .ok_or_else(|| error(line, "number out of range".into()))?;
                push(Tok::Int(value));
                i = next;
            }
            b'-' if bytes.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                let (value, next) = number(bytes, i + 1, true)
                    .ok_or_else(|| error(line, "number out of range".into()))?;
                push(Tok::Int(value));
                i = next;
            }
            c if is_string_start(c) => {
                let start = i;
                while i < bytes.len() && is_string_char(bytes[i]) {
                    i += 1;
                }
                let word = &text[start..i];
                let tok = match word {
                    "true" => Tok::Bool(true),
                    "false" => Tok::Bool(false),
                    _ => match keyword(word) {
                        Some(k) => Tok::Word(k),
                        None => Tok::Str(word.to_string()),
                    },
                };
                push(tok);
            }
            _ => {
                let ch = text[i..].chars().next().expect("in bounds");
                return Err(error(line, format!("illegal character `{ch}`")));
            }
        }
    }
    Ok(tokens)
}

/// `$name`, `${name}` or `$(name)` at `at`; returns the name and the index after it.
fn variable(bytes: &[u8], at: usize) -> Option<(String, usize)> {
    let mut i = at + 1;
    while i < bytes.len() && matches!(bytes[i], b'(' | b'{') {
        i += 1;
    }
    if !bytes.get(i).is_some_and(u8::is_ascii_alphabetic) {
        return None;
    }
    let start = i;
    while i < bytes.len() && is_var_char(bytes[i]) {
        i += 1;
    }
    let name = String::from_utf8_lossy(&bytes[start..i]).into_owned();
    while i < bytes.len() && matches!(bytes[i], b')' | b'}') {
        i += 1;
    }
    Some((name, i))
}

/// Digits at `at` with an optional `k`, `m` or `g` suffix.
fn number(bytes: &[u8], at: usize, negative: bool) -> Option<(i64, usize)> {
    let mut i = at;
    let mut value: i64 = 0;
    while i < bytes.len() && bytes[i].is_ascii_digit() {
        value = value
            .checked_mul(10)?
            .checked_add(i64::from(bytes[i] - b'0'))?;
        i += 1;
    }
    if negative {
        return Some((-value, i));
    }
    let scale: i64 = match bytes.get(i) {
        Some(b'k') => 1 << 10,
        Some(b'm') => 1 << 20,
        Some(b'g') => 1 << 30,
        _ => 1,
    };
    if scale > 1 {
        i += 1;
    }
    Some((value.checked_mul(scale)?, i))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(text: &str) -> Vec<Tok> {
        tokenize("t.f", text)
            .unwrap()
            .into_iter()
            .map(|t| t.tok)
            .collect()
    }

    #[test]
    fn tokens_follow_parser_lex() {
        assert_eq!(
            toks("set $iosize=1m # comment\nrun 60"),
            vec![
                Tok::Word("set"),
                Tok::Var("iosize".into()),
                Tok::Assign,
                Tok::Int(1 << 20),
                Tok::Word("run"),
                Tok::Int(60),
            ]
        );
        assert_eq!(
            toks("filesetname=bigfileset,filesets prealloc"),
            vec![
                Tok::Word("filesetname"),
                Tok::Assign,
                Tok::Str("bigfileset".into()),
                Tok::Comma,
                Tok::Word("fileset"),
                Tok::Word("prealloc"),
            ]
        );
        assert_eq!(
            toks("parameters=mean:131072;gamma:1.5)"),
            vec![
                Tok::Word("parameters"),
                Tok::Assign,
                Tok::Str("mean:131072;gamma:1.5".into()),
                Tok::ClosePar,
            ]
        );
        assert_eq!(
            toks("-5 16k true"),
            vec![Tok::Int(-5), Tok::Int(16384), Tok::Bool(true)]
        );
        assert_eq!(
            toks("echo \"a $x b\""),
            vec![
                Tok::Word("echo"),
                Tok::Quoted(vec![
                    Piece::Text("a ".into()),
                    Piece::Var("x".into()),
                    Piece::Text(" b".into())
                ])
            ]
        );
    }

    #[test]
    fn errors_name_the_line() {
        let error = tokenize("w.f", "set $a=1\n\nset $b=@").unwrap_err();
        assert_eq!((error.line, error.file.as_str()), (3, "w.f"));
        assert!(error.message.contains('@'), "{error}");
        assert!(tokenize("w.f", "echo \"open")
            .unwrap_err()
            .message
            .contains("unterminated"));
        assert!(tokenize("w.f", "set $x=99999999999999999999").is_err());
    }
}
