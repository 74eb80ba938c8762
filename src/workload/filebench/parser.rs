//! The grammar of filebench's WML (`parser_gram.y`, filebench 1.5) over [`super::lexer`]'s tokens,
//! producing [`Command`]s with their lines. Attribute names are checked against the grammar's
//! lists for each entity (`attrs_define_fileset`, `attrs_flowop`, ...), so a misspelt attribute
//! is an error naming it, as in filebench.
//!
//! Also accepted, from filebench 1.4.9 personalities (the version of the papers' era): `usage
//! "..."` lines, `define randvar name=$x, ...`, and the fileset attributes `cached` and
//! `filesizegamma` (see [`super::fileset`] for their meaning). Refused with an error naming the
//! construct and its line: `system` (shell commands), `enable multi` / `domultisync`
//! (multi-client runs), `list`, `enable lathist`.
//!
//! Composite flowops (`define flowop name=N, $local, $local=default, iters=I { flowop ... }`)
//! are parsed as `parser_composite_flowop_define` takes them; a flowop that uses one binds its
//! locals with `$local=value` attributes (`get_attr_lvars`).

use super::lexer::{tokenize, Piece, Tok, Token};
use super::FbError;

/// An attribute value as written.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Int(i64),
    Bool(bool),
    /// A bare string.
    Str(String),
    /// A quoted string.
    Quoted(Vec<Piece>),
    /// `$name`: evaluated when used (a random variable draws a new value each time).
    Var(String),
}

/// `name` or `name=value` (a bare name is `true`).
#[derive(Debug, Clone, PartialEq)]
pub struct Attr {
    pub name: &'static str,
    pub value: Value,
    pub line: usize,
}

/// An entry of a `randtable`: `{percent, min, max}`.
#[derive(Debug, Clone, PartialEq)]
pub struct TableEntry {
    pub percent: Value,
    pub min: Value,
    pub max: Value,
}

/// `flowop TYPE name=..., attrs`.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowopDef {
    pub kind: String,
    pub attrs: Vec<Attr>,
    /// `$name=value` bindings of a composite flowop's local variables.
    pub locals: Vec<Local>,
    pub line: usize,
}

/// A composite flowop's local variable: `$name` (no default) or `$name=value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Local {
    pub name: String,
    pub value: Option<Value>,
    pub line: usize,
}

/// `thread attrs { flowops }`.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadDef {
    pub attrs: Vec<Attr>,
    pub flowops: Vec<FlowopDef>,
    pub line: usize,
}

/// What `set $var =` assigns.
#[derive(Debug, Clone, PartialEq)]
pub enum SetValue {
    Int(i64),
    Bool(bool),
    Str(String),
    /// `randvar(...)`: filebench's built-in distributions (fb_random.c).
    Random {
        attrs: Vec<Attr>,
        table: Vec<TableEntry>,
    },
    /// `cvar(type=..., parameters=..., min=, max=, round=)`: a custom variable (fb_cvar.c).
    Custom(Vec<Attr>),
}

/// `set mode quit ...`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuitMode {
    Timeout,
    AllDone,
    FirstDone,
}

/// One command of the script.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    Set {
        name: String,
        value: SetValue,
    },
    Mode(QuitMode),
    NoUseStats,
    DefineFile(Vec<Attr>),
    DefineFileset(Vec<Attr>),
    DefineProcess {
        attrs: Vec<Attr>,
        threads: Vec<ThreadDef>,
    },
    /// `define flowop name=..., $local..., iters=... { flowops }`.
    DefineComposite {
        attrs: Vec<Attr>,
        locals: Vec<Local>,
        flowops: Vec<FlowopDef>,
    },
    Eventgen(Option<Value>),
    CreateFiles,
    Echo(Vec<Piece>),
    /// 1.4.9's `usage "..."`: help text for interactive use; no effect on a run.
    Usage,
    /// `run`, `run N`, `run $var`.
    Run(Option<Value>),
    /// `psrun [period [runtime]]`; a negative period resets statistics after each period.
    Psrun {
        period: i64,
        runtime: i64,
    },
    Sleep(Value),
    Debug(i64),
    Version,
    Quit,
}

/// A command and its line.
#[derive(Debug, Clone, PartialEq)]
pub struct Stmt {
    pub command: Command,
    pub line: usize,
}

/// `attrs_define_proc`.
const PROCESS_ATTRS: &[&str] = &["name", "instances", "nice"];
/// `attrs_define_thread`.
const THREAD_ATTRS: &[&str] = &["name", "memsize", "useism", "instances", "ioprio"];
/// `attrs_define_file`, plus 1.4.9's `cached`.
const FILE_ATTRS: &[&str] = &[
    "name",
    "path",
    "size",
    "prealloc",
    "paralloc",
    "reuse",
    "trusttree",
    "readonly",
    "writeonly",
    "cached",
];
/// `attrs_define_fileset`, plus 1.4.9's `cached` and `filesizegamma`.
const FILESET_ATTRS: &[&str] = &[
    "name",
    "path",
    "entries",
    "size",
    "filesize",
    "prealloc",
    "paralloc",
    "reuse",
    "trusttree",
    "readonly",
    "writeonly",
    "dirwidth",
    "dirdepthrv",
    "dirgamma",
    "leafdirs",
    "cached",
    "filesizegamma",
];
/// `attrs_flowop`.
const FLOWOP_ATTRS: &[&str] = &[
    "workingset",
    "filename",
    "filesetname",
    "name",
    "random",
    "fd",
    "srcfd",
    "opennext",
    "dsync",
    "directio",
    "indexed",
    "target",
    "iters",
    "value",
    "blocking",
    "highwater",
    "iosize",
    "noreadahead",
];
/// `randvar_attr_name`, `type` and `randsrc`.
const RANDVAR_ATTRS: &[&str] = &[
    "name", "seed", "gamma", "mean", "min", "round", "type", "randsrc",
];
/// `cvar_attr_name`.
const CVAR_ATTRS: &[&str] = &["type", "parameters", "min", "max", "round"];

/// Bound on commands, threads per process and flowops per thread.
pub const MAX_ITEMS: usize = 100_000;

struct Parser<'a> {
    file: &'a str,
    tokens: Vec<Token>,
    at: usize,
}

/// Parses a script. Errors name `file` and the line.
pub fn parse(file: &str, text: &str) -> Result<Vec<Stmt>, FbError> {
    let tokens = tokenize(file, text)?;
    let mut parser = Parser {
        file,
        tokens,
        at: 0,
    };
    let mut stmts = Vec::new();
    while parser.peek().is_some() {
        if stmts.len() >= MAX_ITEMS {
            return Err(parser.error_here(format!("more than {MAX_ITEMS} commands")));
        }
        stmts.push(parser.command()?);
    }
    Ok(stmts)
}

fn describe(tok: &Tok) -> String {
    match tok {
        Tok::Word(w) => format!("`{w}`"),
        Tok::Str(s) => format!("`{s}`"),
        Tok::Int(n) => format!("`{n}`"),
        Tok::Bool(b) => format!("`{b}`"),
        Tok::Var(v) => format!("`${v}`"),
        Tok::Quoted(_) => "a quoted string".into(),
        Tok::Open => "`{`".into(),
        Tok::Close => "`}`".into(),
        Tok::OpenPar => "`(`".into(),
        Tok::ClosePar => "`)`".into(),
        Tok::Assign => "`=`".into(),
        Tok::Comma => "`,`".into(),
    }
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.tokens.get(self.at).map(|t| &t.tok)
    }

    fn line(&self) -> usize {
        self.tokens
            .get(self.at)
            .or_else(|| self.tokens.last())
            .map_or(1, |t| t.line)
    }

    fn error_here(&self, message: String) -> FbError {
        FbError::new(self.file, self.line(), message)
    }

    fn next(&mut self) -> Option<Tok> {
        let tok = self.tokens.get(self.at).map(|t| t.tok.clone());
        if tok.is_some() {
            self.at += 1;
        }
        tok
    }

    fn unexpected(&self, expected: &str) -> FbError {
        match self.peek() {
            Some(tok) => self.error_here(format!("expected {expected}, found {}", describe(tok))),
            None => self.error_here(format!("expected {expected}, found the end of the file")),
        }
    }

    fn expect(&mut self, tok: Tok, what: &str) -> Result<(), FbError> {
        if self.peek() == Some(&tok) {
            self.at += 1;
            Ok(())
        } else {
            Err(self.unexpected(what))
        }
    }

    fn eat(&mut self, tok: &Tok) -> bool {
        if self.peek() == Some(tok) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn word(&mut self, word: &str) -> bool {
        self.eat(&Tok::Word(keyword_static(word)))
    }

    fn command(&mut self) -> Result<Stmt, FbError> {
        let line = self.line();
        let command = match self.next() {
            Some(Tok::Word(w)) => match w {
                "set" => self.set()?,
                "define" => self.define()?,
                "eventgen" => {
                    if self.peek() == Some(&Tok::Word("rate")) {
                        let attrs = self.attrs(&["rate"], "an event generator")?;
                        Command::Eventgen(attrs.into_iter().last().map(|a| a.value))
                    } else {
                        Command::Eventgen(None)
                    }
                }
                "create" => {
                    if !self.word("files") {
                        return Err(self.unexpected("`files` after `create`"));
                    }
                    Command::CreateFiles
                }
                "echo" => Command::Echo(self.quoted()?),
                "usage" => {
                    self.quoted()?;
                    Command::Usage
                }
                "run" => match self.peek() {
                    Some(Tok::Int(_)) | Some(Tok::Var(_)) => {
                        let value = self.value()?;
                        Command::Run(Some(value))
                    }
                    _ => Command::Run(None),
                },
                "psrun" => {
                    let mut numbers = Vec::new();
                    while let Some(Tok::Int(n)) = self.peek() {
                        numbers.push(*n);
                        self.at += 1;
                        if numbers.len() == 2 {
                            break;
                        }
                    }
                    if numbers.get(1).is_some_and(|&r| r < 0) {
                        return Err(self.error_here("psrun's runtime must not be negative".into()));
                    }
                    Command::Psrun {
                        period: numbers.first().copied().unwrap_or(0),
                        runtime: numbers.get(1).copied().unwrap_or(0),
                    }
                }
                "sleep" => match self.peek() {
                    Some(Tok::Int(n)) if *n >= 0 => Command::Sleep(self.value()?),
                    Some(Tok::Var(_)) => Command::Sleep(self.value()?),
                    _ => return Err(self.unexpected("a number of seconds or a $variable")),
                },
                "debug" => match self.next() {
                    Some(Tok::Int(n)) if n >= 0 => Command::Debug(n),
                    _ => return Err(self.error_here("expected a debug level".into())),
                },
                "version" => Command::Version,
                "quit" => Command::Quit,
                "system" => {
                    return Err(FbError::new(
                        self.file,
                        line,
                        "`system` is not supported: a simulated run cannot execute shell commands"
                            .into(),
                    ))
                }
                "enable" | "domultisync" => {
                    let what = if w == "enable" && self.peek() == Some(&Tok::Word("lathist")) {
                        "`enable lathist` (latency histograms) is not supported"
                    } else {
                        "multi-client synchronisation (`enable multi`, `domultisync`) is not supported"
                    };
                    return Err(FbError::new(self.file, line, what.into()));
                }
                "list" => {
                    return Err(FbError::new(
                        self.file,
                        line,
                        "`list` (an interactive listing) is not supported".into(),
                    ))
                }
                other => {
                    return Err(FbError::new(
                        self.file,
                        line,
                        format!("expected a command, found `{other}`"),
                    ))
                }
            },
            Some(tok) => {
                return Err(FbError::new(
                    self.file,
                    line,
                    format!("expected a command, found {}", describe(&tok)),
                ))
            }
            None => unreachable!("command() is called with tokens left"),
        };
        Ok(Stmt { command, line })
    }

    fn quoted(&mut self) -> Result<Vec<Piece>, FbError> {
        match self.next() {
            Some(Tok::Quoted(pieces)) => Ok(pieces),
            _ => {
                self.at -= 1;
                Err(self.unexpected("a quoted string"))
            }
        }
    }

    fn set(&mut self) -> Result<Command, FbError> {
        if self.word("mode") {
            if self.word("nousestats") {
                return Ok(Command::NoUseStats);
            }
            if !self.word("quit") {
                return Err(self.unexpected("`quit` or `nousestats` after `set mode`"));
            }
            let mode = if self.word("timeout") {
                QuitMode::Timeout
            } else if self.word("alldone") {
                QuitMode::AllDone
            } else if self.word("firstdone") {
                QuitMode::FirstDone
            } else {
                return Err(self.unexpected("`timeout`, `alldone` or `firstdone`"));
            };
            return Ok(Command::Mode(mode));
        }
        let name = match self.next() {
            Some(Tok::Var(name)) => name,
            _ => {
                self.at = self.at.saturating_sub(1);
                return Err(self.unexpected("a $variable after `set`"));
            }
        };
        self.expect(Tok::Assign, "`=`")?;
        let value = match self.next() {
            Some(Tok::Int(n)) => SetValue::Int(n),
            Some(Tok::Bool(b)) => SetValue::Bool(b),
            Some(Tok::Str(s)) => SetValue::Str(s),
            Some(Tok::Quoted(pieces)) => SetValue::Str(
                pieces
                    .iter()
                    .map(|p| match p {
                        Piece::Text(t) => t.clone(),
                        Piece::Var(v) => format!("${v}"),
                    })
                    .collect(),
            ),
            Some(Tok::Word("randvar")) => {
                self.expect(Tok::OpenPar, "`(` after `randvar`")?;
                let (attrs, table) = self.randvar_attrs()?;
                self.expect(Tok::ClosePar, "`)`")?;
                SetValue::Random { attrs, table }
            }
            Some(Tok::Word("cvar")) => {
                self.expect(Tok::OpenPar, "`(` after `cvar`")?;
                let attrs = self.attrs(CVAR_ATTRS, "a custom variable")?;
                self.expect(Tok::ClosePar, "`)`")?;
                SetValue::Custom(attrs)
            }
            _ => {
                self.at = self.at.saturating_sub(1);
                return Err(self.unexpected(
                    "an integer, `true`/`false`, a string, `randvar(...)` or `cvar(...)`",
                ));
            }
        };
        Ok(Command::Set { name, value })
    }

    fn define(&mut self) -> Result<Command, FbError> {
        let line = self.line();
        match self.next() {
            Some(Tok::Word("file")) => Ok(Command::DefineFile(self.attrs(FILE_ATTRS, "a file")?)),
            Some(Tok::Word("fileset")) => Ok(Command::DefineFileset(
                self.attrs(FILESET_ATTRS, "a fileset")?,
            )),
            Some(Tok::Word("process")) => {
                let attrs = self.attrs(PROCESS_ATTRS, "a process")?;
                self.expect(Tok::Open, "`{` after the process attributes")?;
                let mut threads = Vec::new();
                while self.word("thread") {
                    threads.push(self.thread()?);
                    if threads.len() > MAX_ITEMS {
                        return Err(self.error_here("too many threads".into()));
                    }
                }
                if threads.is_empty() {
                    return Err(self.unexpected("`thread`"));
                }
                self.expect(Tok::Close, "`}` closing the process")?;
                Ok(Command::DefineProcess { attrs, threads })
            }
            Some(Tok::Word("randvar")) => {
                // filebench 1.4.9: `define randvar name=$x, type=gamma, ...`.
                let (attrs, table) = self.randvar_attrs()?;
                let Some(name) = attrs.iter().find(|a| a.name == "name") else {
                    return Err(FbError::new(
                        self.file,
                        line,
                        "randvar specifies no name".into(),
                    ));
                };
                let name = match &name.value {
                    Value::Var(v) => v.clone(),
                    Value::Str(s) => s.trim_start_matches('$').to_string(),
                    _ => {
                        return Err(FbError::new(
                            self.file,
                            line,
                            "a randvar's name must be a $variable".into(),
                        ))
                    }
                };
                let attrs = attrs.into_iter().filter(|a| a.name != "name").collect();
                Ok(Command::Set {
                    name,
                    value: SetValue::Random { attrs, table },
                })
            }
            Some(Tok::Word("flowop")) => {
                // parser_composite_flowop_define: `name`, `iters` and local variables.
                let (attrs, locals) =
                    self.attrs_and_locals(&["name", "iters"], "a composite flowop")?;
                self.expect(Tok::Open, "`{` after the composite flowop's attributes")?;
                let flowops = self.flowops()?;
                self.expect(Tok::Close, "`}` closing the composite flowop")?;
                Ok(Command::DefineComposite {
                    attrs,
                    locals,
                    flowops,
                })
            }
            _ => {
                self.at = self.at.saturating_sub(1);
                Err(self.unexpected("`file`, `fileset`, `process` or `randvar` after `define`"))
            }
        }
    }

    fn thread(&mut self) -> Result<ThreadDef, FbError> {
        let line = self.line();
        let attrs = self.attrs(THREAD_ATTRS, "a thread")?;
        self.expect(Tok::Open, "`{` after the thread attributes")?;
        let flowops = self.flowops()?;
        self.expect(Tok::Close, "`}` closing the thread")?;
        Ok(ThreadDef {
            attrs,
            flowops,
            line,
        })
    }

    /// `flowop TYPE attrs` lines, at least one.
    fn flowops(&mut self) -> Result<Vec<FlowopDef>, FbError> {
        let mut flowops = Vec::new();
        while self.word("flowop") {
            let line = self.line();
            let kind = match self.next() {
                Some(Tok::Str(kind)) => kind,
                // A flowop type that happens to be a keyword (none of filebench's are).
                Some(Tok::Word(w)) => w.to_string(),
                _ => {
                    self.at -= 1;
                    return Err(self.unexpected("a flowop type"));
                }
            };
            let (attrs, locals) = if matches!(self.peek(), Some(Tok::Word(_) | Tok::Var(_))) {
                self.attrs_and_locals(FLOWOP_ATTRS, "a flowop")?
            } else {
                (Vec::new(), Vec::new())
            };
            flowops.push(FlowopDef {
                kind,
                attrs,
                locals,
                line,
            });
            if flowops.len() > MAX_ITEMS {
                return Err(self.error_here("too many flowops".into()));
            }
        }
        if flowops.is_empty() {
            return Err(self.unexpected("`flowop`"));
        }
        Ok(flowops)
    }

    /// Attributes mixed with `$local[=value]` (a composite flowop's local variables).
    fn attrs_and_locals(
        &mut self,
        allowed: &[&str],
        entity: &str,
    ) -> Result<(Vec<Attr>, Vec<Local>), FbError> {
        let mut attrs = Vec::new();
        let mut locals = Vec::new();
        loop {
            if let Some(Tok::Var(name)) = self.peek() {
                let name = name.clone();
                let line = self.line();
                self.at += 1;
                let value = if self.eat(&Tok::Assign) {
                    Some(self.value()?)
                } else {
                    None
                };
                locals.push(Local { name, value, line });
            } else {
                attrs.push(self.attr(allowed, entity)?);
            }
            if attrs.len() + locals.len() > MAX_ITEMS {
                return Err(self.error_here("too many attributes".into()));
            }
            if !self.eat(&Tok::Comma) {
                return Ok((attrs, locals));
            }
        }
    }

    fn value(&mut self) -> Result<Value, FbError> {
        match self.next() {
            Some(Tok::Int(n)) => Ok(Value::Int(n)),
            Some(Tok::Bool(b)) => Ok(Value::Bool(b)),
            Some(Tok::Str(s)) => Ok(Value::Str(s)),
            Some(Tok::Quoted(pieces)) => Ok(Value::Quoted(pieces)),
            Some(Tok::Var(v)) => Ok(Value::Var(v)),
            // A keyword used as a value (e.g. `type=gamma`, `randsrc=rand48`).
            Some(Tok::Word(w)) => Ok(Value::Str(w.to_string())),
            _ => {
                self.at = self.at.saturating_sub(1);
                Err(self.unexpected("a value"))
            }
        }
    }

    /// `name[=value], ...` with names from `allowed`.
    fn attrs(&mut self, allowed: &[&str], entity: &str) -> Result<Vec<Attr>, FbError> {
        let mut attrs = Vec::new();
        loop {
            attrs.push(self.attr(allowed, entity)?);
            if attrs.len() > MAX_ITEMS {
                return Err(self.error_here("too many attributes".into()));
            }
            if !self.eat(&Tok::Comma) {
                return Ok(attrs);
            }
        }
    }

    /// One `name[=value]` with a name from `allowed`.
    fn attr(&mut self, allowed: &[&str], entity: &str) -> Result<Attr, FbError> {
        let line = self.line();
        let name = match self.peek() {
            Some(Tok::Word(w)) if allowed.contains(w) => *w,
            Some(Tok::Word(w)) => {
                return Err(self.error_here(format!("`{w}` is not an attribute of {entity}")))
            }
            Some(Tok::Str(s)) => {
                return Err(self.error_here(format!(
                    "`{s}` is not an attribute of {entity} (attributes: {})",
                    allowed.join(", ")
                )))
            }
            _ => return Err(self.unexpected(&format!("an attribute of {entity}"))),
        };
        self.at += 1;
        let value = if self.eat(&Tok::Assign) {
            self.value()?
        } else {
            Value::Bool(true)
        };
        Ok(Attr { name, value, line })
    }

    fn randvar_attrs(&mut self) -> Result<(Vec<Attr>, Vec<TableEntry>), FbError> {
        let mut attrs = Vec::new();
        let mut table = Vec::new();
        loop {
            if self.word("randtable") {
                self.expect(Tok::Assign, "`=` after `randtable`")?;
                self.expect(Tok::Open, "`{` opening the table")?;
                loop {
                    self.expect(Tok::Open, "`{percent, min, max}`")?;
                    let percent = self.value()?;
                    self.expect(Tok::Comma, "`,`")?;
                    let min = self.value()?;
                    self.expect(Tok::Comma, "`,`")?;
                    let max = self.value()?;
                    self.expect(Tok::Close, "`}`")?;
                    table.push(TableEntry { percent, min, max });
                    if table.len() > 100 {
                        return Err(self.error_here("a randtable has at most 100 entries".into()));
                    }
                    if !self.eat(&Tok::Comma) {
                        break;
                    }
                }
                self.expect(Tok::Close, "`}` closing the table")?;
            } else {
                attrs.push(self.attr(RANDVAR_ATTRS, "a random variable")?);
                if attrs.len() > MAX_ITEMS {
                    return Err(self.error_here("too many attributes".into()));
                }
            }
            if !self.eat(&Tok::Comma) {
                return Ok((attrs, table));
            }
        }
    }
}

/// The `'static` spelling of a keyword (for comparing tokens).
fn keyword_static(word: &str) -> &'static str {
    match word {
        "files" => "files",
        "mode" => "mode",
        "nousestats" => "nousestats",
        "quit" => "quit",
        "timeout" => "timeout",
        "alldone" => "alldone",
        "firstdone" => "firstdone",
        "thread" => "thread",
        "flowop" => "flowop",
        "randtable" => "randtable",
        _ => unreachable!("keyword_static({word})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VARMAIL_HEAD: &str = r#"
set $dir=/tmp
set $filesize=cvar(type=cvar-gamma,parameters=mean:16384;gamma:1.5)
define fileset name=bigfileset,path=$dir,size=$filesize,entries=1000,dirwidth=1000000,prealloc=80
define process name=filereader,instances=1
{
  thread name=filereaderthread,memsize=10m,instances=16
  {
    flowop deletefile name=deletefile1,filesetname=bigfileset
    flowop appendfilerand name=appendfilerand2,iosize=16k,fd=1
    flowop opslimit name=limit
  }
}
echo  "Varmail personality successfully loaded"
run 60
"#;

    #[test]
    fn a_personality_parses_into_commands() {
        let stmts = parse("varmail.f", VARMAIL_HEAD).unwrap();
        assert_eq!(stmts.len(), 6);
        assert_eq!(stmts[0].line, 2);
        match &stmts[1].command {
            Command::Set {
                name,
                value: SetValue::Custom(attrs),
            } => {
                assert_eq!(name, "filesize");
                assert_eq!(attrs[0].value, Value::Str("cvar-gamma".into()));
                assert_eq!(attrs[1].value, Value::Str("mean:16384;gamma:1.5".into()));
            }
            other => panic!("{other:?}"),
        }
        match &stmts[3].command {
            Command::DefineProcess { threads, .. } => {
                let flowops = &threads[0].flowops;
                assert_eq!(flowops.len(), 3);
                assert_eq!(flowops[1].kind, "appendfilerand");
                assert_eq!(flowops[1].line, 10);
                assert_eq!(flowops[2].attrs.len(), 1);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(stmts[5].command, Command::Run(Some(Value::Int(60))));
    }

    #[test]
    fn randvars_modes_and_runs() {
        let text = "set mode quit firstdone\nset $r = randvar(type=tabular, min=1k, round=1k, randtable = {{50, 1k, 4k},{50, 8k, 8k}})\ndefine randvar name=$g, type=gamma, mean=5632, gamma=1500\npsrun -10 30\n";
        let stmts = parse("r.f", text).unwrap();
        assert_eq!(stmts[0].command, Command::Mode(QuitMode::FirstDone));
        match &stmts[1].command {
            Command::Set {
                value: SetValue::Random { attrs, table },
                ..
            } => {
                assert_eq!(attrs.len(), 3);
                assert_eq!(table.len(), 2);
            }
            other => panic!("{other:?}"),
        }
        match &stmts[2].command {
            Command::Set {
                name,
                value: SetValue::Random { attrs, .. },
            } => {
                assert_eq!(name, "g");
                assert_eq!(attrs.len(), 3);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            stmts[3].command,
            Command::Psrun {
                period: -10,
                runtime: 30
            }
        );
    }

    #[test]
    fn mistakes_are_errors_with_line_and_construct() {
        let error = parse("x.f", "set $a=1\ndefine fileset name=a,pth=/tmp\n").unwrap_err();
        assert_eq!(error.line, 2);
        assert!(error.message.contains("`pth`"), "{error}");
        let error = parse("x.f", "define file name=a,path=/t,entries=3\n").unwrap_err();
        assert!(
            error
                .message
                .contains("`entries` is not an attribute of a file"),
            "{error}"
        );
        let error = parse("x.f", "\n\nsystem \"rm -rf /\"\n").unwrap_err();
        assert_eq!(error.line, 3);
        assert!(error.message.contains("system"), "{error}");
        let error = parse("x.f", "define flowop name=x, $a { }").unwrap_err();
        assert!(error.message.contains("`flowop`"), "{error}");
        let error = parse("x.f", "define process name=p {\n thread name=t {\n }\n}").unwrap_err();
        assert_eq!(error.line, 3);
        assert!(parse("x.f", "run 60 garbage").is_err());
        assert!(parse(
            "x.f",
            "define process name=p { thread name=t { flowop read name=r }"
        )
        .is_err());
    }
}
