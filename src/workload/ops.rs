//! `ops`: an app that runs a sequence of system calls in a loop, written in the scenario.
//!
//! QASIO's microbenchmarks are such loops (M1: `creat`, `write 4 KiB`, `fsync`, `close`, 500
//! times; M4: `truncate`, `write`, `close`; M5's background task: `truncate` an 8 GB file and
//! write it again), and so are the file patterns of app launches and installs (QASIO §3:
//! `rename`, `write`, `fsync`, `unlink`). One workload kind covers them all:
//!
//! ```toml
//! [app.workload.ops]
//! count = 500                      # iterations (default: until the app is stopped)
//! files = [{ path = "/data/big", size = "8GiB" }]   # exist before the run, on disk
//! steps = [
//!   { op = "creat", path = "/data/m1/file" },
//!   { op = "write", size = "4KiB" },
//!   { op = "fsync" },
//!   { op = "close" },
//! ]
//! ```
//!
//! The app has one current open file: `open` and `creat` set it, `write` / `read` / `fsync` /
//! `fdatasync` / `ftruncate` / `fadvise` / `close` use it. Paths may contain `{i}` (the iteration, from 0).
//! A `write` or `read` with `total` repeats `size`-sized calls until `total` bytes moved. Every
//! call is an operation of the app's results, named after it; each iteration is also recorded
//! as operation `iteration`. An errno is counted (`errno.<NAME>`) and ends the app.

use super::file::{note, syscall};
use crate::app::AppContext;
use crate::fs::vfs::{
    Process, Vfs, O_APPEND, O_CREAT, O_DIRECT, O_EXCL, O_RDONLY, O_RDWR, O_STORE_CONTENTS, O_SYNC,
    O_TRUNC, O_WRONLY,
};
use crate::fs::Errno;
use crate::units::{serde_units, Nanos};
use serde::{Deserialize, Serialize};
use std::rc::Rc;

/// Bound on steps per loop body.
pub const MAX_STEPS: usize = 1024;
/// Bound on one step's `size`: 64 MiB, as for the other file workloads.
pub const MAX_STEP_BYTES: u64 = 64 << 20;

/// A file that exists before the run (its blocks on disk, nothing cached).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PresetFile {
    pub path: String,
    #[serde(with = "serde_units::size")]
    pub size: u64,
}

/// `open` flags as words: `"rdonly"`, `"wronly"`, `"rdwr"`, `"creat"`, `"excl"`, `"trunc"`,
/// `"append"`, `"sync"`, `"direct"`, and `"store-contents"` (not Linux's: a file it creates is
/// a file under test of `mobistack crashcheck`, its pages' versions recorded, as SQLite's are;
/// `O_STORE_CONTENTS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OpenFlag {
    Rdonly,
    Wronly,
    Rdwr,
    Creat,
    Excl,
    Trunc,
    Append,
    Sync,
    Direct,
    StoreContents,
}

fn default_open_flags() -> Vec<OpenFlag> {
    vec![OpenFlag::Rdwr]
}

/// `posix_fadvise` advice (`POSIX_FADV_*`): the one the model implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Advice {
    /// `POSIX_FADV_DONTNEED`.
    Dontneed,
}

/// What a `write` or `read` step moves ([`Step::transfer`]): `size`-sized calls until `total`
/// bytes, at the file position or from `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transfer {
    pub size: u64,
    /// `total`, or one call's `size` when not given.
    pub total: u64,
    pub offset: Option<u64>,
    pub write: bool,
}

/// One system call of the loop body.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(tag = "op", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Step {
    /// `open(path, flags)`; default flags `["rdwr"]`.
    Open {
        path: String,
        #[serde(default = "default_open_flags")]
        flags: Vec<OpenFlag>,
    },
    /// `creat(path)` = `open(path, O_CREAT | O_WRONLY | O_TRUNC)`.
    Creat {
        path: String,
    },
    /// `write(size)` at the file position (or `pwrite` at `offset`), repeated until `total`.
    Write {
        #[serde(with = "serde_units::size")]
        size: u64,
        #[serde(default, with = "serde_units::option_size")]
        total: Option<u64>,
        #[serde(default, with = "serde_units::option_size")]
        offset: Option<u64>,
    },
    /// `read(size)` at the file position (or `pread` at `offset`), repeated until `total`.
    Read {
        #[serde(with = "serde_units::size")]
        size: u64,
        #[serde(default, with = "serde_units::option_size")]
        total: Option<u64>,
        #[serde(default, with = "serde_units::option_size")]
        offset: Option<u64>,
    },
    /// `fsync` of the current file. (Struct variants, so that `deny_unknown_fields` rejects
    /// stray fields: serde ignores them on unit variants of internally tagged enums.)
    Fsync {},
    /// `sync(2)`: every dirty page and the file system's metadata.
    Sync {},
    Fdatasync {},
    Close {},
    /// `truncate(path, size)`.
    Truncate {
        path: String,
        #[serde(with = "serde_units::size")]
        size: u64,
    },
    /// `ftruncate(size)` of the current file.
    Ftruncate {
        #[serde(with = "serde_units::size")]
        size: u64,
    },
    Unlink {
        path: String,
    },
    Rename {
        from: String,
        to: String,
    },
    Mkdir {
        path: String,
    },
    Stat {
        path: String,
    },
    /// `posix_fadvise` of the current file over `[offset, offset + len)` (default: the whole
    /// file). Only `advice = "dontneed"` is modelled: writeback of the range's dirty pages is
    /// started, then its clean, idle pages leave the page cache. With it an app's next read of
    /// the file is cold, as in a cold app launch (FastTrack §2.2: "launched without any
    /// preloaded data").
    Fadvise {
        advice: Advice,
        #[serde(default, with = "serde_units::size")]
        offset: u64,
        #[serde(default, with = "serde_units::size")]
        len: u64,
    },
    /// Think time (off-CPU).
    Sleep {
        #[serde(with = "serde_units::duration")]
        duration: Nanos,
    },
}

impl Step {
    /// The data a `write` or `read` step moves; `None` for the other steps.
    pub fn transfer(&self) -> Option<Transfer> {
        let (size, total, offset, write) = match self {
            Step::Write {
                size,
                total,
                offset,
            } => (*size, *total, *offset, true),
            Step::Read {
                size,
                total,
                offset,
            } => (*size, *total, *offset, false),
            _ => return None,
        };
        Some(Transfer {
            size,
            total: total.unwrap_or(size),
            offset,
            write,
        })
    }

    /// The operation name in the results.
    pub fn name(&self) -> &'static str {
        match self {
            Step::Open { .. } => "open",
            Step::Creat { .. } => "creat",
            Step::Write { .. } => "write",
            Step::Read { .. } => "read",
            Step::Fsync {} => "fsync",
            Step::Sync {} => "sync",
            Step::Fdatasync {} => "fdatasync",
            Step::Close {} => "close",
            Step::Truncate { .. } => "truncate",
            Step::Ftruncate { .. } => "ftruncate",
            Step::Unlink { .. } => "unlink",
            Step::Rename { .. } => "rename",
            Step::Mkdir { .. } => "mkdir",
            Step::Stat { .. } => "stat",
            Step::Fadvise { .. } => "fadvise",
            Step::Sleep { .. } => "sleep",
        }
    }

    /// The paths the step names (a rename's both).
    pub(crate) fn paths(&self) -> Vec<&str> {
        match self {
            Step::Open { path, .. }
            | Step::Creat { path }
            | Step::Truncate { path, .. }
            | Step::Unlink { path }
            | Step::Mkdir { path }
            | Step::Stat { path } => vec![path],
            Step::Rename { from, to } => vec![from, to],
            _ => Vec::new(),
        }
    }
}

/// The `[app.workload.ops]` table.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct OpsConfig {
    /// Iterations of the loop; default: until the app is stopped or the run ends.
    #[serde(default)]
    pub count: Option<u64>,
    /// Think time between iterations.
    #[serde(default, with = "serde_units::duration")]
    pub think: Nanos,
    /// Files created (on disk, uncached) before the run.
    #[serde(default)]
    pub files: Vec<PresetFile>,
    pub steps: Vec<Step>,
}

fn check_path(path: &str) -> Result<(), String> {
    if !path.starts_with('/') {
        return Err(format!("ops: path `{path}` must be absolute"));
    }
    Ok(())
}

impl OpsConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.steps.is_empty() || self.steps.len() > MAX_STEPS {
            return Err(format!(
                "ops: `steps` must list 1..={MAX_STEPS} system calls, not {}",
                self.steps.len()
            ));
        }
        for file in &self.files {
            check_path(&file.path)?;
        }
        for step in &self.steps {
            for path in step.paths() {
                check_path(path)?;
            }
            match step {
                Step::Write { size, total, .. } | Step::Read { size, total, .. } => {
                    if *size == 0 || *size > MAX_STEP_BYTES {
                        return Err(format!(
                            "ops: {} `size` must be 1 byte..64MiB, not {size}",
                            step.name()
                        ));
                    }
                    if total.is_some_and(|t| t < *size) {
                        return Err(format!(
                            "ops: {} `total` must be at least `size`",
                            step.name()
                        ));
                    }
                }
                Step::Open { flags, .. } => {
                    let access = flags
                        .iter()
                        .filter(|f| {
                            matches!(f, OpenFlag::Rdonly | OpenFlag::Wronly | OpenFlag::Rdwr)
                        })
                        .count();
                    if access != 1 {
                        return Err(
                            "ops: open `flags` need exactly one of \"rdonly\", \"wronly\", \"rdwr\""
                                .into(),
                        );
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

fn open_flags(flags: &[OpenFlag]) -> u32 {
    flags.iter().fold(0, |acc, flag| {
        acc | match flag {
            OpenFlag::Rdonly => O_RDONLY,
            OpenFlag::Wronly => O_WRONLY,
            OpenFlag::Rdwr => O_RDWR,
            OpenFlag::Creat => O_CREAT,
            OpenFlag::Excl => O_EXCL,
            OpenFlag::Trunc => O_TRUNC,
            OpenFlag::Append => O_APPEND,
            OpenFlag::Sync => O_SYNC,
            OpenFlag::Direct => O_DIRECT,
            OpenFlag::StoreContents => O_STORE_CONTENTS,
        }
    })
}

/// `{i}` in a path becomes the iteration.
pub(crate) fn expand(path: &str, iteration: u64) -> String {
    path.replace("{i}", &iteration.to_string())
}

/// Creates the directories of every path the workload names (they exist on the phone) and the
/// preset files. Returns false (after counting the errno) on failure.
fn setup(ctx: &AppContext, vfs: &Vfs, config: &OpsConfig) -> bool {
    let mut dirs: Vec<String> = config
        .files
        .iter()
        .map(|f| f.path.clone())
        .chain(
            config
                .steps
                .iter()
                .flat_map(|s| s.paths().into_iter().map(|p| expand(p, 0))),
        )
        .filter_map(|path| match path.rfind('/') {
            Some(0) | None => None,
            Some(i) => Some(path[..i].to_string()),
        })
        .collect();
    dirs.sort();
    dirs.dedup();
    for dir in dirs {
        if let Err(errno) = vfs.mkdir_all(&ctx.sim, &dir) {
            note::<()>(ctx, &Err(errno));
            return false;
        }
    }
    for file in &config.files {
        match vfs.populate(&ctx.sim, &file.path, file.size) {
            Ok(_) | Err(Errno::EEXIST) => {}
            Err(errno) => {
                note::<()>(ctx, &Err(errno));
                return false;
            }
        }
    }
    true
}

/// Runs one `write` or `read` step: `size`-sized calls until `total` bytes moved.
async fn transfer(
    ctx: &AppContext,
    vfs: &Vfs,
    process: &Process,
    fd: i32,
    step: &Step,
    buffer: &mut Vec<u8>,
) -> bool {
    let Some(Transfer {
        size,
        total,
        offset,
        write,
    }) = step.transfer()
    else {
        unreachable!("transfer of a step that moves no data")
    };
    let sim = &ctx.sim;
    buffer.resize(size as usize, 0);
    let mut moved = 0u64;
    while moved < total && !ctx.is_stopped() {
        let n = size.min(total - moved) as usize;
        let at = offset.map(|o| o + moved);
        let done = if write {
            let call = async {
                match at {
                    Some(at) => vfs.pwrite(sim, process, fd, &buffer[..n], at).await,
                    None => vfs.write(sim, process, fd, &buffer[..n]).await,
                }
            };
            syscall(ctx, "write", call).await
        } else {
            let (head, _) = buffer.split_at_mut(n);
            let call = async {
                match at {
                    Some(at) => vfs.pread(sim, process, fd, head, at).await,
                    None => vfs.read(sim, process, fd, head).await,
                }
            };
            syscall(ctx, "read", call).await
        };
        let Some(done) = done else {
            return false;
        };
        if done == 0 {
            // End of file (read) or nothing written: the step is over.
            break;
        }
        ctx.add_counter("bytes", done as u64);
        moved += done as u64;
    }
    true
}

/// The body of an `ops` app.
pub async fn ops(ctx: AppContext, config: OpsConfig) {
    if config.validate().is_err() {
        ctx.add_counter("errno.EINVAL", 1);
        return;
    }
    let Some(vfs) = ctx.stack.vfs.clone() else {
        ctx.add_counter("errno.no-storage-stack", 1);
        return;
    };
    if !setup(&ctx, &vfs, &config) {
        return;
    }
    let process = vfs.new_process_with_pid(ctx.stack.alloc_pid(), ctx.uid, &ctx.name);
    run_loop(&ctx, &vfs, &process, &config).await;
}

async fn run_loop(ctx: &AppContext, vfs: &Rc<Vfs>, process: &Process, config: &OpsConfig) {
    let sim = ctx.sim.clone();
    let mut fd: Option<i32> = None;
    let mut buffer = Vec::new();
    let mut iteration = 0u64;
    while !ctx.is_stopped() && config.count.is_none_or(|c| iteration < c) {
        if config.think > 0 && iteration > 0 {
            sim.sleep(config.think).await;
        }
        let timer = ctx.begin_op("iteration");
        for step in &config.steps {
            if ctx.is_stopped() {
                break;
            }
            let ok = match step {
                Step::Open { path, flags } => {
                    let path = expand(path, iteration);
                    let call = vfs.open(&sim, process, &path, open_flags(flags));
                    syscall(ctx, "open", call).await.map(|new| fd = Some(new))
                }
                Step::Creat { path } => {
                    let path = expand(path, iteration);
                    let call = vfs.creat(&sim, process, &path);
                    syscall(ctx, "creat", call).await.map(|new| fd = Some(new))
                }
                Step::Write { .. } | Step::Read { .. } => match fd {
                    Some(fd) => {
                        if transfer(ctx, vfs, process, fd, step, &mut buffer).await {
                            Some(())
                        } else {
                            None
                        }
                    }
                    None => no_file(ctx),
                },
                Step::Sync {} => syscall(ctx, "sync", vfs.sync(&sim, process)).await,
                Step::Fsync {} => match fd {
                    Some(fd) => syscall(ctx, "fsync", vfs.fsync(&sim, process, fd)).await,
                    None => no_file(ctx),
                },
                Step::Fdatasync {} => match fd {
                    Some(fd) => syscall(ctx, "fdatasync", vfs.fdatasync(&sim, process, fd)).await,
                    None => no_file(ctx),
                },
                Step::Close {} => match fd.take() {
                    Some(fd) => syscall(ctx, "close", vfs.close(&sim, process, fd)).await,
                    None => no_file(ctx),
                },
                Step::Truncate { path, size } => {
                    let path = expand(path, iteration);
                    let call = vfs.truncate(&sim, process, &path, *size);
                    syscall(ctx, "truncate", call).await
                }
                Step::Ftruncate { size } => match fd {
                    Some(fd) => {
                        let call = vfs.ftruncate(&sim, process, fd, *size);
                        syscall(ctx, "ftruncate", call).await
                    }
                    None => no_file(ctx),
                },
                Step::Unlink { path } => {
                    let path = expand(path, iteration);
                    syscall(ctx, "unlink", vfs.unlink(&sim, process, &path)).await
                }
                Step::Rename { from, to } => {
                    let (from, to) = (expand(from, iteration), expand(to, iteration));
                    syscall(ctx, "rename", vfs.rename(&sim, process, &from, &to)).await
                }
                Step::Mkdir { path } => {
                    let path = expand(path, iteration);
                    syscall(ctx, "mkdir", vfs.mkdir(&sim, process, &path)).await
                }
                Step::Stat { path } => {
                    let path = expand(path, iteration);
                    syscall(ctx, "stat", vfs.stat(&sim, process, &path))
                        .await
                        .map(|_| ())
                }
                Step::Fadvise {
                    advice: Advice::Dontneed,
                    offset,
                    len,
                } => match fd {
                    Some(fd) => {
                        let call = vfs.fadvise_dontneed(&sim, process, fd, *offset, *len);
                        syscall(ctx, "fadvise", call).await.map(|_| ())
                    }
                    None => no_file(ctx),
                },
                Step::Sleep { duration } => {
                    sim.sleep(*duration).await;
                    Some(())
                }
            };
            if ok.is_none() {
                ctx.end_op(timer);
                return;
            }
        }
        ctx.end_op(timer);
        iteration += 1;
    }
    if let Some(fd) = fd {
        let result = vfs.close(&sim, process, fd).await;
        note(ctx, &result);
    }
}

/// A step that needs an open file found none: the scenario's mistake, counted as `EBADF`.
fn no_file(ctx: &AppContext) -> Option<()> {
    note::<()>(ctx, &Err(Errno::EBADF));
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<OpsConfig, String> {
        toml::from_str::<OpsConfig>(text).map_err(|e| e.to_string())
    }

    #[test]
    fn steps_parse_with_their_fields_and_reject_unknown_ones() {
        let config = parse(
            r#"
            count = 3
            steps = [
              { op = "creat", path = "/d/f{i}" },
              { op = "write", size = "4KiB", total = "1MiB" },
              { op = "open", path = "/d/g", flags = ["rdwr", "sync"] },
              { op = "fsync" },
              { op = "sleep", duration = "5ms" },
            ]
            "#,
        )
        .unwrap();
        assert!(config.validate().is_ok());
        assert_eq!(config.steps.len(), 5);
        assert_eq!(
            config.steps[1],
            Step::Write {
                size: 4096,
                total: Some(1 << 20),
                offset: None
            }
        );
        assert_eq!(expand("/d/f{i}", 7), "/d/f7");
        let error = parse(r#"steps = [{ op = "fsync", path = "/x" }]"#).unwrap_err();
        assert!(error.contains("path"), "{error}");
        let error = parse(r#"steps = [{ op = "frobnicate" }]"#).unwrap_err();
        assert!(error.contains("frobnicate"), "{error}");
        let fadvise = parse(r#"steps = [{ op = "fadvise", advice = "dontneed", len = "1MiB" }]"#);
        assert_eq!(
            fadvise.unwrap().steps[0],
            Step::Fadvise {
                advice: Advice::Dontneed,
                offset: 0,
                len: 1 << 20
            }
        );
        let error = parse(r#"steps = [{ op = "fadvise", advice = "willneed" }]"#).unwrap_err();
        assert!(error.contains("willneed"), "{error}");
    }

    #[test]
    fn invalid_bodies_are_input_errors() {
        let empty = parse("steps = []").unwrap();
        assert!(empty.validate().unwrap_err().contains("steps"));
        let relative = parse(r#"steps = [{ op = "unlink", path = "x" }]"#).unwrap();
        assert!(relative.validate().unwrap_err().contains("absolute"));
        let flags = parse(r#"steps = [{ op = "open", path = "/x", flags = ["creat"] }]"#).unwrap();
        assert!(flags.validate().unwrap_err().contains("rdwr"));
        let total = parse(r#"steps = [{ op = "read", size = "8KiB", total = "4KiB" }]"#).unwrap();
        assert!(total.validate().unwrap_err().contains("total"));
    }
}
