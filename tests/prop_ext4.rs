//! Properties through the whole stack over ext4 and jbd2 (issue 46): random sequences of
//! `write` / append / `fsync` / `fdatasync` / `ftruncate` / `rename` / `unlink` (and pauses)
//! by one to three apps, each on its own files, run as a scenario (the `ops` workload) over
//! the Linux 3.10 stack (page cache, ext4 ordered with delayed allocation, jbd2, CFQ, an eMMC
//! 4.5 or UFS 2.1 device with a volatile write cache), recorded as `mobistack crashcheck`
//! records a run (`crashcheck::record`: every device write with the file pages it carried,
//! every flush, every journal block jbd2 wrote with what it holds, every fsync with the state
//! it was asked to make durable). Checked, for every sequence:
//!
//! 1. **fsync and fdatasync return only once their file is durable** (`ext4_sync_file`, 3.10:
//!    `filemap_write_and_wait_range`, then `jbd2_complete_transaction` of the inode's
//!    `i_sync_tid` / `i_datasync_tid`, then `blkdev_issue_flush` unless that commit sent the
//!    flush): when the call returns, every page it covered (its version at the call) was
//!    carried by a device write that completed and was made durable (FUA, or a cache flush
//!    that started after the write completed and finished before the return), and a journal
//!    commit whose snapshot of the file has the fsynced size, the file linked, and each page
//!    mapped to the block that write went to, had its commit block made durable the same way.
//! 2. **jbd2's commits are ordered** (`jbd2_journal_commit_transaction`, 3.10, without
//!    `journal_async_commit`): commit blocks are submitted in increasing tid order; every log
//!    block (descriptor, copy) of a transaction is submitted before its commit block and none
//!    after; the log blocks' device writes complete before the commit block's write starts
//!    (the commit record is submitted after the `wait_on_buffer` loop over `io_bufs`), and
//!    with a volatile cache a flush that started after the last of them completed ends before
//!    the commit block's write starts, which is FUA (`WRITE_FLUSH_FUA`, `JBD2_BARRIER`).
//!    And ordered mode's promise (`journal_submit_data_buffers` /
//!    `journal_finish_inode_data_buffers` before the commit record): every page a committed
//!    snapshot maps was written to that block by a write that completed before the commit
//!    block's write started.
//! 3. **The page cache loses nothing**: at the end of the run, every page of every file still
//!    linked holds its last version either on the device (a completed write carried it) or in
//!    the cache, dirty or under writeback.
//!
//! Cases: `PROPTEST_CASES` (default [`DEFAULT_CASES`]; each case is a whole run).

mod prop_support;

use mobistack::crashcheck;
use mobistack::dev::crash::{Fate, WriteHistory, WriteRecord};
use mobistack::fs::mutant::Mutant;
use mobistack::mm::crashlog::{CrashRecord, FileEventKind, LogContent, PAGE};
use mobistack::mm::pg;
use mobistack::run::{run_one_hooked, StackHooks};
use mobistack::scenario;
use mobistack::units::Nanos;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::rc::Rc;

/// Cases per test when `PROPTEST_CASES` is not set.
const DEFAULT_CASES: u32 = 8;

/// Files per app.
const FILES: usize = 3;

#[derive(Debug, Clone)]
enum Op {
    /// `pwrite(len)` at `offset` (bytes).
    Write {
        file: usize,
        offset: u64,
        len: u64,
    },
    /// `write(len)` to a file opened `O_APPEND`.
    Append {
        file: usize,
        len: u64,
    },
    Fsync {
        file: usize,
    },
    Fdatasync {
        file: usize,
    },
    /// `ftruncate(size)`.
    Truncate {
        file: usize,
        size: u64,
    },
    Rename {
        from: usize,
        to: usize,
    },
    Unlink {
        file: usize,
    },
    /// Think time, ms (lets the flusher and the journal's timer run).
    Sleep {
        ms: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let file = 0..FILES;
    prop_oneof![
        4 => (file.clone(), 0u64..96 * 1024, 1u64..=24 * 1024)
            .prop_map(|(file, offset, len)| Op::Write { file, offset, len }),
        2 => (file.clone(), 1u64..=16 * 1024).prop_map(|(file, len)| Op::Append { file, len }),
        3 => file.clone().prop_map(|file| Op::Fsync { file }),
        2 => file.clone().prop_map(|file| Op::Fdatasync { file }),
        1 => (file.clone(), 0u64..64 * 1024).prop_map(|(file, size)| Op::Truncate { file, size }),
        1 => (file.clone(), file.clone()).prop_map(|(from, to)| Op::Rename { from, to }),
        1 => file.prop_map(|file| Op::Unlink { file }),
        2 => prop_oneof![3 => 1u64..50, 1 => 1u64..6000].prop_map(|ms| Op::Sleep { ms }),
    ]
}

#[derive(Debug, Clone)]
struct Case {
    device: &'static str,
    elevator: &'static str,
    /// `[stack.fs] ordered_delalloc`: 3.10's writeback files no delayed-allocation block as
    /// ordered data (its default, `false`); Linux 4.7 does (06bd3c36a733, "ext4: fix data
    /// exposure after a crash").
    ordered_delalloc: bool,
    apps: Vec<Vec<Op>>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop_oneof![Just("emmc-4.5"), Just("ufs-2.1")],
        prop_oneof![Just("cfq"), Just("noop"), Just("deadline")],
        any::<bool>(),
        proptest::collection::vec(proptest::collection::vec(op(), 1..30), 1..=3),
    )
        .prop_map(|(device, elevator, ordered_delalloc, apps)| Case {
            device,
            elevator,
            ordered_delalloc,
            apps,
        })
}

fn path(app: usize, file: usize) -> String {
    format!("/data/app{app}/f{file}")
}

/// The ops steps of one app: every file operation opens the file (creating it, as a file
/// under test: `store-contents`) and closes it after; a rename or unlink of a file that does
/// not exist is left out (the ops workload stops an app at its first errno).
fn steps(app: usize, ops: &[Op]) -> String {
    let mut exists = [false; FILES];
    let mut out = String::new();
    let open = |out: &mut String, file: usize, flags: &str| {
        writeln!(
            out,
            "  {{ op = \"open\", path = \"{}\", flags = [{flags}\"creat\", \"store-contents\"] }},",
            path(app, file)
        )
        .unwrap();
    };
    for op in ops {
        match *op {
            Op::Write { file, offset, len } => {
                open(&mut out, file, "\"rdwr\", ");
                writeln!(
                    out,
                    "  {{ op = \"write\", size = \"{len}B\", offset = \"{offset}B\" }},"
                )
                .unwrap();
                out.push_str("  { op = \"close\" },\n");
                exists[file] = true;
            }
            Op::Append { file, len } => {
                open(&mut out, file, "\"wronly\", \"append\", ");
                writeln!(out, "  {{ op = \"write\", size = \"{len}B\" }},").unwrap();
                out.push_str("  { op = \"close\" },\n");
                exists[file] = true;
            }
            Op::Fsync { file } | Op::Fdatasync { file } => {
                open(&mut out, file, "\"rdwr\", ");
                let call = if matches!(op, Op::Fsync { .. }) {
                    "fsync"
                } else {
                    "fdatasync"
                };
                writeln!(out, "  {{ op = \"{call}\" }},").unwrap();
                out.push_str("  { op = \"close\" },\n");
                exists[file] = true;
            }
            Op::Truncate { file, size } => {
                open(&mut out, file, "\"rdwr\", ");
                writeln!(out, "  {{ op = \"ftruncate\", size = \"{size}B\" }},").unwrap();
                out.push_str("  { op = \"close\" },\n");
                exists[file] = true;
            }
            Op::Rename { from, to } => {
                if exists[from] && from != to {
                    writeln!(
                        out,
                        "  {{ op = \"rename\", from = \"{}\", to = \"{}\" }},",
                        path(app, from),
                        path(app, to)
                    )
                    .unwrap();
                    exists[from] = false;
                    exists[to] = true;
                }
            }
            Op::Unlink { file } => {
                if exists[file] {
                    writeln!(
                        out,
                        "  {{ op = \"unlink\", path = \"{}\" }},",
                        path(app, file)
                    )
                    .unwrap();
                    exists[file] = false;
                }
            }
            Op::Sleep { ms } => {
                writeln!(out, "  {{ op = \"sleep\", duration = \"{ms}ms\" }},").unwrap();
            }
        }
    }
    if out.is_empty() {
        // Every op left out: the ops workload needs one step.
        out.push_str("  { op = \"sleep\", duration = \"1ms\" },\n");
    }
    out
}

/// The scenario of a case: the 3.10 stack (the default kernel) on `device`, one app per op
/// list, the run ending when the apps are done.
fn scenario_text(case: &Case) -> String {
    let mut text = format!(
        "name = \"prop-ext4\"\nseeds = [1]\nduration = \"600s\"\nend = \"apps-done\"\n\
         [stack.device]\nprofile = \"{}\"\ncapacity = \"1GiB\"\n\
         [stack.block]\nelevator = \"{}\"\n\
         [stack.fs]\nordered_delalloc = {}\n\
         [stack.vm]\nram = \"512MiB\"\ndirty_expire = \"1s\"\n",
        case.device, case.elevator, case.ordered_delalloc
    );
    for (app, ops) in case.apps.iter().enumerate() {
        write!(
            text,
            "[[app]]\nname = \"app{app}\"\nrole = \"{}\"\n[app.workload.ops]\ncount = 1\nsteps = [\n{}]\n",
            if app == 0 { "foreground" } else { "background" },
            steps(app, ops)
        )
        .unwrap();
    }
    text
}

/// What a run leaves to check.
struct Recorded {
    history: WriteHistory,
    record: CrashRecord,
    /// Whether writeback files delayed-allocation blocks as ordered data (then the commit
    /// waits for them: property 2's ordered-mode check applies).
    ordered_delalloc: bool,
    /// Page flags at the end of the run of every tracked file's pages: (ino, index) -> flags.
    cached: BTreeMap<(u64, u64), u16>,
}

/// Runs the case's scenario, recording it as `crashcheck::record` does, and the page cache's
/// state of the files under test at the end.
fn run(case: &Case, mutant: Option<Mutant>) -> Result<Recorded, TestCaseError> {
    let text = scenario_text(case);
    let scenario = scenario::parse("prop-ext4.toml", &text)
        .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
    let mut variant = scenario.variants[0].clone();
    variant.stack.fs.mutant = mutant;
    let log = RefCell::new(None);
    let history = RefCell::new(None);
    let cached = RefCell::new(BTreeMap::new());
    let hooks = StackHooks {
        before: Box::new(|stack| {
            *log.borrow_mut() = Some(stack.record_crash(crashcheck::DEFAULT_BUDGET)?);
            Ok(())
        }),
        after: Box::new(|stack| {
            *history.borrow_mut() = stack.take_crash_history();
            let vfs = stack.vfs.as_ref().expect("file I/O");
            let record = log.borrow().as_ref().map(|l: &Rc<_>| l.record());
            let record: CrashRecord = record.expect("recorded");
            for &ino in record.files.keys() {
                for index in 0..vfs.mm.nr_pages(ino) as u64 * 2 + 64 {
                    if let Some(flags) = vfs.mm.page_flags(ino, index) {
                        cached.borrow_mut().insert((ino, index), flags);
                    }
                }
            }
        }),
    };
    let result = run_one_hooked(
        &scenario,
        &variant,
        1,
        mutant.is_none(),
        None,
        |_| {},
        Some(hooks),
    )
    .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
    prop_assert_eq!(result.end.as_str(), "apps-done", "{}", text);
    for (name, app) in &result.apps {
        let errnos: Vec<_> = app
            .counters
            .keys()
            .filter(|k| k.starts_with("errno"))
            .collect();
        prop_assert!(errnos.is_empty(), "{}: {:?}\n{}", name, errnos, text);
    }
    let record = log.into_inner().map(|l| l.record()).expect("recorded");
    prop_assert!(!record.overflowed);
    Ok(Recorded {
        history: history.into_inner().expect("the device recorded"),
        record,
        ordered_delalloc: case.ordered_delalloc,
        cached: cached.into_inner(),
    })
}

/// The first device write of block `block` that started at or after `at` (a journal block is
/// recorded when submitted; the device starts it later).
fn write_of(history: &WriteHistory, block: u64, at: Nanos) -> Option<&WriteRecord> {
    history
        .writes
        .iter()
        .filter(|w| {
            w.start_ns >= at && w.sector <= block * 8 && block * 8 < w.sector + u64::from(w.sectors)
        })
        .min_by_key(|w| w.start_ns)
}

fn durable_at(history: &WriteHistory, w: &WriteRecord, at: Nanos) -> bool {
    history.fate(w, at) == Fate::Durable
}

/// Property 1 (module documentation).
fn check_fsyncs(rec: &Recorded) -> Result<(), TestCaseError> {
    let (history, record) = (&rec.history, &rec.record);
    for f in record.fsyncs.iter().filter(|f| !f.mobifs) {
        let Some(end) = f.end else { continue };
        let pages = f.size.div_ceil(PAGE as u64);
        // The data: each covered page's version, durable at the return, and where it went.
        let mut blocks = BTreeMap::new();
        for &(index, version) in f.pages.iter().filter(|&&(i, _)| i < pages) {
            let found = history
                .writes
                .iter()
                .filter(|w| durable_at(history, w, end))
                .filter_map(|w| record.tags.get(&w.id))
                .flatten()
                .filter(|t| t.ino == f.ino && t.index == index && t.version >= version)
                .max_by_key(|t| t.version);
            let Some(tag) = found else {
                let mut seen = String::new();
                for w in &history.writes {
                    for t in record.tags.get(&w.id).into_iter().flatten() {
                        if t.ino == f.ino && t.index == index {
                            let _ = write!(
                                seen,
                                " [version {} block {}: {:.3} -> {:.3} ms, fua {}]",
                                t.version,
                                t.block,
                                w.start_ns as f64 / 1e6,
                                w.done_ns as f64 / 1e6,
                                w.fua
                            );
                        }
                    }
                }
                let flushes: Vec<_> = history
                    .flushes
                    .iter()
                    .filter(|&&(s, _)| s >= f.start && s <= end)
                    .map(|&(s, d)| (s as f64 / 1e6, d as f64 / 1e6))
                    .collect();
                return Err(TestCaseError::fail(format!(
                    "fsync of ino {} ({:.3} ms -> {:.3} ms) returned with page {index} version {version} not durable; writes of the page:{seen}; flushes during the fsync (ms): {flushes:?}",
                    f.ino,
                    f.start as f64 / 1e6,
                    end as f64 / 1e6
                )));
            };
            blocks.insert(index, tag.block);
        }
        // The metadata: a durable commit with this state of the file.
        let committed = record.tids.iter().any(|(_, tid)| {
            let Some((block, submitted)) = tid.commit else {
                return false;
            };
            let durable =
                write_of(history, block, submitted).is_some_and(|w| durable_at(history, w, end));
            durable
                && tid.files.iter().any(|s| {
                    s.ino == f.ino
                        && s.linked
                        && s.size == f.size
                        && blocks.iter().all(|(&i, &b)| s.block(i) == Some(b))
                })
        });
        if !committed {
            let mut seen = String::new();
            for (id, tid) in &record.tids {
                let durable = tid.commit.and_then(|(block, submitted)| {
                    write_of(history, block, submitted)
                        .map(|w| (durable_at(history, w, end), w.done_ns))
                });
                for s in tid.files.iter().filter(|s| s.ino == f.ino) {
                    let _ = writeln!(
                        seen,
                        "  tid {id}: commit {:?} (durable at the return, done at), linked {}, size {}, extents {:?}",
                        durable, s.linked, s.size, s.extents
                    );
                }
            }
            return Err(TestCaseError::fail(format!(
                "fsync of ino {} ({:.3} ms -> {:.3} ms, size {}, data at {:?}) returned before a commit of its size and mapping was durable; the transactions' snapshots of it:\n{seen}",
                f.ino,
                f.start as f64 / 1e6,
                end as f64 / 1e6,
                f.size,
                blocks
            )));
        }
    }
    Ok(())
}

/// Property 2 (module documentation).
fn check_commits(rec: &Recorded) -> Result<(), TestCaseError> {
    let (history, record) = (&rec.history, &rec.record);
    let mut last_tid = None;
    for (c, commit) in record.log_writes.iter().enumerate() {
        let LogContent::Commit { tid, .. } = commit.content else {
            continue;
        };
        prop_assert!(
            last_tid.is_none_or(|last| tid > last),
            "commit of tid {} after tid {:?}",
            tid,
            last_tid
        );
        last_tid = Some(tid);
        let blocks: Vec<_> = record
            .log_writes
            .iter()
            .enumerate()
            .filter(|(_, lw)| {
                matches!(
                    lw.content,
                    LogContent::Descriptor { .. } | LogContent::Copy { .. }
                ) && lw.content.tid() == Some(tid)
            })
            .collect();
        prop_assert!(
            blocks.iter().all(|&(i, _)| i < c),
            "tid {}: a log block submitted after its commit block",
            tid
        );
        let Some(commit_write) = write_of(history, commit.block, commit.at) else {
            continue; // the commit block's write had not completed at the end of the run
        };
        let mut last_done = 0;
        for (_, lw) in &blocks {
            let w = write_of(history, lw.block, lw.at);
            let Some(w) =
                w.filter(|w| w.start_ns < commit_write.start_ns || w.id == commit_write.id)
            else {
                return Err(TestCaseError::fail(format!(
                    "tid {tid}: log block {} had not completed when the commit block started at {} ns",
                    lw.block, commit_write.start_ns
                )));
            };
            prop_assert!(
                w.done_ns <= commit_write.start_ns,
                "tid {}: log block {} completed at {} ns, after its commit block started at {} ns",
                tid,
                lw.block,
                w.done_ns,
                commit_write.start_ns
            );
            last_done = last_done.max(w.done_ns);
        }
        if history.volatile_cache {
            prop_assert!(commit_write.fua, "tid {}: the commit block is not FUA", tid);
            let preflush = history
                .flushes
                .iter()
                .any(|&(start, done)| start >= last_done && done <= commit_write.start_ns);
            prop_assert!(
                preflush,
                "tid {}: no flush between its log blocks (done at {} ns) and its commit block (started at {} ns)",
                tid,
                last_done,
                commit_write.start_ns
            );
        }
        if rec.ordered_delalloc {
            check_ordered(rec, tid, commit_write)?;
        }
    }
    Ok(())
}

/// Ordered mode (property 2): the pages transaction `tid`'s snapshot maps were written to
/// their blocks before its commit block's write started. Checked only where writeback files
/// delayed-allocation blocks as ordered data (`ordered_delalloc`, Linux 4.7+): in 3.10 a
/// commit that another task's fsync starts while writeback's data is in flight does not wait
/// for it (`ext4_map_blocks` files no `EXT4_GET_BLOCKS_DELALLOC_RESERVE` allocation), and the
/// property finds exactly that: a committed block map whose data was not yet written.
fn check_ordered(
    rec: &Recorded,
    tid: u64,
    commit_write: &WriteRecord,
) -> Result<(), TestCaseError> {
    let (history, record) = (&rec.history, &rec.record);
    let Some(t) = record.tids.get(&tid) else {
        return Ok(());
    };
    for s in t.files.iter().filter(|s| s.linked) {
        for index in 0..s.size.div_ceil(PAGE as u64) {
            let Some(block) = s.block(index) else {
                continue;
            };
            let written = history.writes.iter().any(|w| {
                w.done_ns <= commit_write.start_ns
                    && record.tags.get(&w.id).is_some_and(|tags| {
                        tags.iter()
                            .any(|g| g.ino == s.ino && g.index == index && g.block == block)
                    })
            });
            prop_assert!(
                written,
                "tid {}: ino {} page {} is mapped to block {} but nothing was written there before the commit block started at {} ns",
                tid,
                s.ino,
                index,
                block,
                commit_write.start_ns
            );
        }
    }
    Ok(())
}

/// Property 3 (module documentation).
fn check_page_cache(rec: &Recorded) -> Result<(), TestCaseError> {
    let (history, record) = (&rec.history, &rec.record);
    // The files' pages and sizes as the run left them.
    let mut current: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    let mut gone: BTreeMap<u64, bool> = BTreeMap::new();
    for e in &record.events {
        match e.kind {
            FileEventKind::Written { index, version } => {
                current.insert((e.ino, index), version);
            }
            FileEventKind::Truncated(size) => {
                let keep = size.div_ceil(PAGE as u64);
                current.retain(|&(ino, index), _| ino != e.ino || index < keep);
            }
            // An inode number is reused by a later file: its pages start afresh.
            FileEventKind::Unlinked => {
                gone.insert(e.ino, true);
                current.retain(|&(ino, _), _| ino != e.ino);
            }
            FileEventKind::Created => {
                gone.insert(e.ino, false);
                current.retain(|&(ino, _), _| ino != e.ino);
            }
            FileEventKind::Size(_) => {}
        }
    }
    let mut on_device: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    for w in &history.writes {
        for t in record.tags.get(&w.id).into_iter().flatten() {
            let v = on_device.entry((t.ino, t.index)).or_default();
            *v = (*v).max(t.version);
        }
    }
    for (&(ino, index), &version) in &current {
        if gone.get(&ino).copied().unwrap_or(false) {
            continue;
        }
        let written = on_device.get(&(ino, index)).is_some_and(|&v| v >= version);
        let flags = rec.cached.get(&(ino, index)).copied().unwrap_or(0);
        let pending = flags & (pg::DIRTY | pg::WRITEBACK) != 0;
        prop_assert!(
            written || pending,
            "ino {} page {}: version {} is neither on the device nor dirty in the cache (flags {:#x})",
            ino,
            index,
            version,
            flags
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        max_shrink_iters: 2000,
        ..prop_support::config(DEFAULT_CASES, 0x6578_7434)
    })]

    /// Properties 1-3 of the module documentation, for random file operations of one to
    /// three apps over ext4 / jbd2 (Linux 3.10).
    #[test]
    fn ext4_fsync_jbd2_commits_and_the_page_cache_keep_their_promises(case in case()) {
        let recorded = run(&case, None)?;
        check_all(&recorded)?;
    }
}

fn check_all(recorded: &Recorded) -> Result<(), TestCaseError> {
    check_fsyncs(recorded)?;
    check_commits(recorded)?;
    check_page_cache(recorded)
}

/// The first bug the properties found (`ext4_da_write_end`, Linux 3.10): a write that grows
/// the file and ends in a block already allocated moves `i_disksize` at once
/// (`ext4_da_should_update_i_disksize`), as a datasync change. The model moved it only when
/// writeback allocated blocks, so here the fsync after the one-byte append committed the size
/// of before it: the appended byte was lost to a crash after fsync returned. The minimal case
/// proptest shrank to.
#[test]
fn linux_3_10_fsync_after_an_append_into_an_allocated_block_commits_the_new_size() {
    let case = Case {
        device: "emmc-4.5",
        elevator: "cfq",
        ordered_delalloc: false,
        apps: vec![vec![
            Op::Write {
                file: 2,
                offset: 18242,
                len: 6335,
            },
            Op::Fdatasync { file: 2 },
            Op::Append { file: 2, len: 1 },
            Op::Fsync { file: 2 },
        ]],
    };
    let recorded = run(&case, None).expect("the run");
    let last = recorded.record.fsyncs.last().expect("an fsync");
    assert_eq!(last.size, 24578);
    check_fsyncs(&recorded).expect("the fsynced size is committed");
    // fdatasync too: the size change is a datasync change.
    let mut case = case;
    case.apps[0][3] = Op::Fdatasync { file: 2 };
    check_fsyncs(&run(&case, None).expect("the run")).expect("the fdatasynced size is committed");
}

/// The second (Linux 3.10 `ext4_setattr` -> `ext4_truncate` -> `ext4_ext_truncate`, which sets
/// `i_disksize = i_size` for every size change): an `ftruncate` that grows the file moved only
/// `i_size` in the model, so the fsync after it committed the old size. The minimal case.
#[test]
fn linux_3_10_fsync_after_ftruncate_up_commits_the_new_size() {
    let case = Case {
        device: "emmc-4.5",
        elevator: "cfq",
        ordered_delalloc: false,
        apps: vec![vec![
            Op::Truncate { file: 1, size: 1 },
            Op::Fsync { file: 1 },
        ]],
    };
    let recorded = run(&case, None).expect("the run");
    assert_eq!(recorded.record.fsyncs.last().expect("an fsync").size, 1);
    check_fsyncs(&recorded).expect("the fsynced size is committed");
}

/// The third (the crash log, not ext4): a new file under test that reuses a removed file's
/// inode number inherited its pages' versions, so its fsync was asked to make durable a page
/// it never had. The minimal case.
#[test]
fn a_file_that_reuses_an_inode_number_starts_without_pages() {
    let case = Case {
        device: "emmc-4.5",
        elevator: "cfq",
        ordered_delalloc: false,
        apps: vec![vec![
            Op::Write {
                file: 0,
                offset: 0,
                len: 1,
            },
            Op::Write {
                file: 2,
                offset: 0,
                len: 1,
            },
            Op::Unlink { file: 2 },
            Op::Truncate { file: 2, size: 1 },
            Op::Fsync { file: 2 },
        ]],
    };
    let recorded = run(&case, None).expect("the run");
    let last = recorded.record.fsyncs.last().expect("an fsync");
    assert!(last.pages.is_empty(), "{:?}", last.pages);
    check_fsyncs(&recorded).expect("the fsync keeps its promise");
}

/// The fourth (`jbd2_trans_will_send_data_barrier`, 3.10): once a committing transaction's
/// commit record is being written (`T_COMMIT_JFLUSH`), its preflush is out and covers no
/// data write that completes later, so `ext4_sync_file` must flush itself. The model said
/// "the commit will flush" for the whole commit: this fsync (UFS: the data write and the
/// commit record in flight together) returned with its data in the device's cache. The
/// minimal case.
#[test]
fn linux_3_10_fsync_during_a_commit_record_flushes_its_own_data() {
    let case = Case {
        device: "ufs-2.1",
        elevator: "cfq",
        ordered_delalloc: false,
        apps: vec![vec![
            Op::Append { file: 0, len: 1 },
            Op::Write {
                file: 0,
                offset: 953,
                len: 1,
            },
            Op::Fdatasync { file: 0 },
            Op::Fsync { file: 0 },
            Op::Append { file: 0, len: 1 },
            Op::Write {
                file: 1,
                offset: 0,
                len: 1,
            },
            Op::Write {
                file: 1,
                offset: 0,
                len: 1,
            },
            Op::Fsync { file: 0 },
        ]],
    };
    check_fsyncs(&run(&case, None).expect("the run")).expect("every fsync keeps its promise");
}

/// Runs up to `tries` random cases with `mutant` in the file system; the first case whose
/// properties fail, if any (its message).
fn first_failure(mutant: Mutant, tries: u32) -> Option<String> {
    use proptest::test_runner::{Config, TestRunner};
    let mut runner = TestRunner::new_with_rng(
        Config {
            failure_persistence: None,
            ..Config::default()
        },
        proptest::test_runner::TestRng::deterministic_rng(
            proptest::test_runner::RngAlgorithm::ChaCha,
        ),
    );
    let strategy = case();
    for _ in 0..tries {
        let mut case = strategy.new_tree(&mut runner).expect("a case").current();
        // Writeback files its blocks as ordered data (4.7's rule), so that the ordered-mode
        // property applies and mutant (c) can show.
        case.ordered_delalloc = true;
        match run(&case, Some(mutant)).and_then(|r| check_all(&r)) {
            Ok(()) => {}
            Err(e) => return Some(format!("{e}")),
        }
    }
    None
}

/// The properties catch the journal and fsync mutants of crash-point checking's gate
/// (`mobistack::fs::mutant`, issue 45): each is seen to fail on a few random cases.
#[test]
fn the_properties_catch_the_journal_and_fsync_mutants() {
    for mutant in [
        Mutant::CommitBeforeLog,
        Mutant::NoPreflush,
        Mutant::NoOrderedWait,
        Mutant::FsyncNoFlush,
    ] {
        let failure = first_failure(mutant, 40);
        eprintln!("{}: {:?}", mutant.name(), failure);
        assert!(
            failure.is_some(),
            "mutant {} survives the properties",
            mutant.name()
        );
    }
}
