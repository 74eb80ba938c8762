//! One crash state in words (`mobistack crashcheck SCENARIO --dump-point N`): what the device
//! kept and lost at crash point `N` (the same points, and the same draws of the cache's
//! unflushed writes, as a check with the same `--points` and `--seed`), the journal as
//! recovery reads it, what `do_one_pass` replayed, each file under test page by page, and the
//! checks' verdicts. For a person reading a violation the checks reported ("crash point N at
//! ... ns"), and for seeing what the model believes survives.
//!
//! Blocks are named by what the run wrote there: a page version of a file under test (from the
//! tags its bio carried), a journal block (descriptor with its tags, metadata copy, commit
//! block, journal superblock: [`crate::mm::crashlog::LogContent`]), a directory block a
//! transaction logged, the file system's fixed metadata (superblock, group descriptors,
//! bitmaps, inode tables: [`crate::mm::crashlog::Region`]); anything else is "other" (extent
//! blocks, files not under test).

use super::checks;
use super::recover::{Found, PageState, Prepared, Recovered};
use crate::mm::crashlog::{CrashRecord, FileSnapshot, LogContent};
use crate::units::Nanos;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Lines of the list of unflushed writes (the rest are counted).
const MAX_UNFLUSHED_LINES: usize = 40;
/// Lines of the journal's listing (the earliest transactions' are elided past it).
const MAX_LOG_LINES: usize = 40;

/// The dump of crash point `n` of `variant` (the checks' `options.points` and seed).
pub fn dump_point(
    scenario: &crate::scenario::Scenario,
    variant: &crate::scenario::Variant,
    options: &super::CrashCheckOptions,
    n: usize,
) -> Result<String, String> {
    options.validate()?;
    let seed = options.seed.unwrap_or(scenario.seeds[0]);
    let (history, record, run_ns) = super::record(scenario, variant, seed, options.budget)?;
    let points = super::crash_points(&history, options.points, seed, run_ns);
    let Some(&at) = points.get(n) else {
        return Err(format!(
            "--dump-point {n}: variant `{}` has crash points 0..{} with --points {}",
            variant.name,
            points.len(),
            options.points
        ));
    };
    let prepared = Prepared::new(&history, &record, seed).torn(options.torn);
    let state = prepared.recover(at, n as u64);
    let mut out = format!(
        "crashcheck {} variant {} (seed {seed}): crash point {n} of {} at {} ({at} ns)\n",
        scenario.name,
        variant.name,
        points.len(),
        seconds(at)
    );
    let names = Names::new(&record);
    device(&mut out, &prepared, &names, at, n as u64);
    journal(&mut out, &prepared, &names, at, n as u64);
    files(&mut out, &prepared, &state, at, n as u64);
    verdicts(&mut out, variant, &record, &state, at)?;
    Ok(out)
}

fn seconds(ns: Nanos) -> String {
    format!("{:.6} s", ns as f64 / 1e9)
}

/// What each block the run wrote is, by kind.
struct Names<'a> {
    record: &'a CrashRecord,
    /// Directory blocks some transaction logged.
    directories: BTreeMap<u64, crate::mm::Ino>,
}

impl<'a> Names<'a> {
    fn new(record: &'a CrashRecord) -> Names<'a> {
        let mut directories = BTreeMap::new();
        for t in record.tids.values() {
            for (block, dir, _) in &t.dir_blocks {
                directories.insert(*block, *dir);
            }
        }
        Names {
            record,
            directories,
        }
    }

    /// What home block `block` is, when it is metadata the record knows.
    fn home(&self, block: u64) -> String {
        if let Some(dir) = self.directories.get(&block) {
            return format!("directory block of inode {dir}");
        }
        let region = self
            .record
            .regions
            .iter()
            .rev()
            .find(|(first, len, _)| block >= *first && block < first + len);
        match region {
            Some((first, _, what)) if what.starts_with("inode table") => {
                format!("{what}, block {}", block - first)
            }
            Some((_, _, what)) => what.clone(),
            None => "metadata or data of a file not under test".into(),
        }
    }

    /// What write `i` carried at `block`.
    fn block(&self, prepared: &Prepared, i: usize, block: u64) -> String {
        if let Some(t) = prepared.tags.get(&i).and_then(|m| m.get(&block)) {
            return format!(
                "{} page {} version {}",
                self.file(t.ino),
                t.index,
                t.version
            );
        }
        if let Some(content) = self.log_content(prepared, i, block) {
            return describe_log(content, self);
        }
        self.home(block)
    }

    fn file(&self, ino: crate::mm::Ino) -> String {
        self.record
            .files
            .get(&ino)
            .map_or(format!("inode {ino}"), |f| f.name.clone())
    }

    /// The journal block write `i` carried at `block` (the last one jbd2 submitted at or
    /// before the write's start).
    fn log_content(&self, prepared: &Prepared, i: usize, block: u64) -> Option<&'a LogContent> {
        let list = prepared.log_by_block.get(&block)?;
        let start = prepared.history.writes[i].start_ns;
        let k = list.partition_point(|&(submitted, _)| submitted <= start);
        let (_, index) = *list.get(k.checked_sub(1)?)?;
        Some(&self.record.log_writes[index].content)
    }
}

fn describe_log(content: &LogContent, names: &Names) -> String {
    match content {
        LogContent::Descriptor { tid, homes } => {
            let shown: Vec<String> = homes.iter().take(8).map(|h| h.to_string()).collect();
            format!(
                "journal descriptor of tid {tid}, {} tags (home blocks {}{})",
                homes.len(),
                shown.join(", "),
                if homes.len() > 8 { ", ..." } else { "" }
            )
        }
        LogContent::Copy { tid, home } => {
            format!(
                "journal copy of block {home} ({}) for tid {tid}",
                names.home(*home)
            )
        }
        LogContent::Commit { tid, checksum } => format!(
            "journal commit block of tid {tid}{}",
            if *checksum { " (with checksum)" } else { "" }
        ),
        LogContent::Superblock { sequence } => {
            format!("journal superblock, s_sequence {sequence}")
        }
    }
}

/// The fate of write `i` at the crash, in words.
fn fate(prepared: &Prepared, i: usize, at: Nanos, point: u64) -> &'static str {
    let w = &prepared.history.writes[i];
    if w.start_ns >= at {
        "never happened"
    } else if prepared.durable(i, at) {
        "durable"
    } else if prepared.survives(i, at, point) {
        "survived (not yet durable; reached flash in this draw)"
    } else {
        "lost (not yet durable; did not reach flash in this draw)"
    }
}

/// The device: counts by fate, blocks by kind, and the writes not yet durable, each with its
/// fate in this draw.
fn device(out: &mut String, prepared: &Prepared, names: &Names, at: Nanos, point: u64) {
    let history = prepared.history;
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    let mut kinds: BTreeMap<(String, &str), u64> = BTreeMap::new();
    let mut unflushed = Vec::new();
    for (i, w) in history.writes.iter().enumerate() {
        if w.start_ns >= at {
            continue;
        }
        let f = fate(prepared, i, at, point);
        let short = f.split(' ').next().unwrap_or(f);
        *counts.entry(short).or_default() += 1;
        if short != "durable" {
            unflushed.push(i);
        }
        for block in w.sector / 8..(w.sector + u64::from(w.sectors)).div_ceil(8) {
            *kinds
                .entry((kind(prepared, names, i, block), short))
                .or_default() += 1;
        }
    }
    let _ = writeln!(
        out,
        "\nThe device ({} write cache): {} writes started before the crash: {} durable, {} \
         survived and {} lost of those not yet durable (completed but not flushed, or in \
         flight)",
        if history.volatile_cache {
            "volatile"
        } else {
            "write-through"
        },
        counts.values().sum::<u64>(),
        counts.get("durable").unwrap_or(&0),
        counts.get("survived").unwrap_or(&0),
        counts.get("lost").unwrap_or(&0),
    );
    let _ = writeln!(
        out,
        "  (writes the device had not started, still queued in the block layer, are not on the \
         media)\n  blocks written, by kind (durable / survived / lost):"
    );
    let mut by_kind: BTreeMap<&str, [u64; 3]> = BTreeMap::new();
    for ((k, f), n) in &kinds {
        let slot = match *f {
            "durable" => 0,
            "survived" => 1,
            _ => 2,
        };
        by_kind.entry(k.as_str()).or_default()[slot] += n;
    }
    for (k, [d, s, l]) in by_kind {
        let _ = writeln!(out, "    {k:<52} {d:>7} / {s:>5} / {l:>5}");
    }
    if unflushed.is_empty() {
        return;
    }
    let _ = writeln!(out, "  writes not yet durable at the crash:");
    for &i in unflushed.iter().take(MAX_UNFLUSHED_LINES) {
        let w = &history.writes[i];
        let first = w.sector / 8;
        let last = (w.sector + u64::from(w.sectors)).div_ceil(8) - 1;
        let blocks = if first == last {
            format!("block {first}")
        } else {
            format!("blocks {first}-{last}")
        };
        let what = names.block(prepared, i, first);
        let _ = writeln!(
            out,
            "    request {} {blocks}{}, {} at {}: {}; {what}{}",
            w.id,
            if w.fua { " FUA" } else { "" },
            if w.done_ns > at {
                "in flight"
            } else {
                "completed"
            },
            seconds(w.start_ns),
            fate(prepared, i, at, point),
            if last > first { ", ..." } else { "" }
        );
    }
    if unflushed.len() > MAX_UNFLUSHED_LINES {
        let _ = writeln!(
            out,
            "    ... and {} more",
            unflushed.len() - MAX_UNFLUSHED_LINES
        );
    }
}

/// The kind of block `block` as write `i` wrote it (for the counts).
fn kind(prepared: &Prepared, names: &Names, i: usize, block: u64) -> String {
    if let Some(t) = prepared.tags.get(&i).and_then(|m| m.get(&block)) {
        return format!("data of {}", names.file(t.ino));
    }
    if let Some(content) = names.log_content(prepared, i, block) {
        return match content {
            LogContent::Descriptor { .. } => "journal descriptor blocks",
            LogContent::Copy { .. } => "journal metadata copies",
            LogContent::Commit { .. } => "journal commit blocks",
            LogContent::Superblock { .. } => "journal superblock",
        }
        .into();
    }
    let home = names.home(block);
    match home.find(" of group") {
        Some(cut) => format!("{}s", &home[..cut]),
        None if home.starts_with("directory block") => "directory blocks".into(),
        None => home,
    }
}

/// The journal as `do_one_pass` reads it: from the superblock's transaction through the block
/// that ended the scan, each block with what survived there and what was lost.
fn journal(out: &mut String, prepared: &Prepared, names: &Names, at: Nanos, point: u64) {
    let record = prepared.record;
    if record.log_blocks == 0 {
        return;
    }
    let scan = prepared.scan_log(at, point);
    let sb = match prepared.log_content(0, at, point) {
        Some(LogContent::Superblock { sequence }) => format!("s_sequence {sequence}"),
        _ => "as mkfs left it (transaction 1 first)".into(),
    };
    let _ = writeln!(
        out,
        "\nThe journal ({} blocks): superblock {sb}; do_one_pass's PASS_SCAN from tid {}",
        record.log_blocks, scan.first
    );
    let Some(&start) = prepared.tid_start.get(&scan.first) else {
        let _ = writeln!(
            out,
            "  no block of tid {} was written: nothing to replay",
            scan.first
        );
        return;
    };
    let mut lines: Vec<String> = Vec::new();
    let mut offset = start;
    let mut next = scan.first;
    let describe = |c: Option<&LogContent>| {
        c.map_or("nothing the run wrote (zeros)".to_string(), |c| {
            describe_log(c, names)
        })
    };
    loop {
        let found = prepared.log_content(offset, at, point);
        let block = prepared.offset_block.get(&offset).copied();
        // The newest write of the block submitted before the crash, if it is not the one found.
        let lost = block.and_then(|b| {
            let list = prepared.log_by_block.get(&b)?;
            let k = list.partition_point(|&(submitted, _)| submitted < at);
            let (_, index) = *list.get(k.checked_sub(1)?)?;
            let newest = &record.log_writes[index].content;
            (Some(newest) != found).then_some(newest)
        });
        lines.push(format!(
            "  offset {offset} (block {}): {}{}",
            block.map_or("-".into(), |b| b.to_string()),
            describe(found),
            lost.map_or(String::new(), |c| format!(
                "  [LOST: {}]",
                describe_log(c, names)
            ))
        ));
        match found {
            Some(LogContent::Descriptor { tid, homes }) if *tid == next => {
                let first = prepared.next_offset(offset);
                let mut intact = 0;
                for &home in homes {
                    offset = prepared.next_offset(offset);
                    let copy = prepared.log_content(offset, at, point);
                    if copy == Some(&LogContent::Copy { tid: next, home }) {
                        intact += 1;
                    } else {
                        lines.push(format!(
                            "  offset {offset}: {}  [NOT tid {next}'s copy of block {home} ({}): \
                             replaying it writes this over block {home}]",
                            describe(copy),
                            names.home(home)
                        ));
                    }
                }
                if intact > 0 {
                    let shown: Vec<String> = homes
                        .iter()
                        .take(3)
                        .map(|&h| format!("{h} ({})", names.home(h)))
                        .collect();
                    lines.push(format!(
                        "  offsets {first}-{offset}: {intact} of the {} copies of tid {next} \
                         intact: blocks {}{}",
                        homes.len(),
                        shown.join(", "),
                        if homes.len() > 3 { ", ..." } else { "" }
                    ));
                }
            }
            Some(LogContent::Commit { tid, .. }) if *tid == next && next < scan.end => next += 1,
            Some(LogContent::Commit { tid, .. }) if *tid == next => {
                lines.push(format!(
                    "  -> the commit block's checksum does not match tid {next}'s blocks: the \
                     log ends before it"
                ));
                break;
            }
            _ => {
                lines.push(format!(
                    "  -> the log ends here: PASS_SCAN expected a block of tid {next}"
                ));
                break;
            }
        }
        offset = prepared.next_offset(offset);
    }
    if lines.len() > MAX_LOG_LINES {
        let cut = lines.len() - (MAX_LOG_LINES - 4);
        let _ = writeln!(out, "{}", lines[..4].join("\n"));
        let _ = writeln!(out, "  ... {} lines (earlier transactions) ...", cut - 4);
        let _ = writeln!(out, "{}", lines[cut..].join("\n"));
    } else {
        let _ = writeln!(out, "{}", lines.join("\n"));
    }
    let replayed: Vec<u64> = (scan.first..scan.end).collect();
    let _ = writeln!(
        out,
        "Recovery: {}; {} copies written home, {} of them from log blocks that did not hold them",
        match replayed.as_slice() {
            [] => "no transaction replayed".to_string(),
            [one] => format!("tid {one} replayed"),
            [first, .., last] => format!("tids {first}..={last} replayed"),
        },
        scan.copies.len(),
        scan.bad.len()
    );
}

/// Each file under test: absent or its size, names and pages, with the write that holds each
/// page and its fate.
fn files(out: &mut String, prepared: &Prepared, state: &Recovered, at: Nanos, point: u64) {
    let record = prepared.record;
    let snapshot: BTreeMap<crate::mm::Ino, &FileSnapshot> = state
        .replayed
        .and_then(|t| record.tids.get(&t))
        .map(|t| t.files.iter().map(|f| (f.ino, f)).collect())
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "\nThe files under test, as {} left them:",
        state
            .replayed
            .map_or("mkfs (no transaction replayed)".to_string(), |t| format!(
                "transaction {t}"
            ))
    );
    for (ino, file) in &record.files {
        let Some(recovered) = state.files.get(ino) else {
            let _ = writeln!(
                out,
                "  {} (inode {ino}, app {}): absent",
                file.path, file.app
            );
            continue;
        };
        let extents = snapshot.get(ino).map_or(String::new(), |s| {
            let shown: Vec<String> = s
                .extents
                .iter()
                .take(6)
                .map(|&(l, p, n)| format!("{l}->{p}+{n}"))
                .collect();
            format!(
                ", extents {}{}",
                shown.join(" "),
                if s.extents.len() > 6 { " ..." } else { "" }
            )
        });
        let linked: Vec<String> = state
            .names
            .iter()
            .filter(|(_, &i)| i == *ino)
            .map(|((dir, name), _)| format!("{name} in directory {dir}"))
            .collect();
        let _ = writeln!(
            out,
            "  {} (inode {ino}, app {}): named {}, {} B{extents}",
            file.path,
            file.app,
            linked.join(" and "),
            recovered.size
        );
        let mut runs: Vec<(u64, u64, String)> = Vec::new();
        for (index, page) in recovered.pages.iter().enumerate() {
            let index = index as u64;
            let block = snapshot.get(ino).and_then(|s| s.block(index));
            let exposed = state
                .exposed
                .iter()
                .find(|e| e.ino == *ino && e.index == index);
            let label = match (page, block, exposed) {
                (_, _, Some(e)) => format!(
                    "EXPOSED (check 6): {}",
                    match e.found {
                        Found::NeverWritten => "never written in the run".to_string(),
                        Found::OtherPage {
                            ino,
                            index,
                            version,
                        } => format!("holds version {version} of page {index} of inode {ino}"),
                        Found::NotFileData { write } => format!("holds request {write}'s data"),
                        Found::LostLogCopy { tid } => format!("tid {tid}'s lost journal copy"),
                    }
                ),
                (PageState::Zero, None, _) => "hole (zeros)".into(),
                (PageState::Version(_), Some(b), _) => match prepared.holder(b, at, point) {
                    Some(i) => format!("its data, {}", fate(prepared, i, at, point)),
                    None => "its data, from the journal".into(),
                },
                (PageState::Version(_), None, _) => "its data, from the journal".into(),
                (other, _, _) => format!("{other:?}"),
            };
            match runs.last_mut() {
                Some((_, last, l)) if *l == label && *last + 1 == index => *last = index,
                _ => runs.push((index, index, label)),
            }
        }
        for (first, last, label) in runs {
            let versions: Vec<String> = (first..=last.min(first + 3))
                .filter_map(|k| match recovered.pages[k as usize] {
                    PageState::Version(v) => Some(v.to_string()),
                    _ => None,
                })
                .collect();
            let _ = writeln!(
                out,
                "    {}: {label}{}",
                if first == last {
                    format!("page {first}")
                } else {
                    format!("pages {first}-{last}")
                },
                if versions.is_empty() {
                    String::new()
                } else {
                    format!(
                        " (versions {}{})",
                        versions.join(", "),
                        if last > first + 3 { ", ..." } else { "" }
                    )
                }
            );
        }
    }
}

/// The checks' verdicts at this point.
fn verdicts(
    out: &mut String,
    variant: &crate::scenario::Variant,
    record: &CrashRecord,
    state: &Recovered,
    at: Nanos,
) -> Result<(), String> {
    let _ = writeln!(out, "\nThe checks:");
    let mut line = |name: &str, verdict: Option<String>| {
        let _ = writeln!(
            out,
            "  {name}: {}",
            verdict.map_or("ok".to_string(), |v| format!("VIOLATION: {v}"))
        );
    };
    let apps: std::collections::BTreeSet<(String, bool)> = record
        .files
        .values()
        .map(|f| (f.app.clone(), f.mobifs))
        .collect();
    for (app, mobifs) in &apps {
        let consistency = if *mobifs {
            checks::Consistency::VctData
        } else {
            checks::Consistency::Files
        };
        let held = checks::point_in_time(record, app, consistency, state, at).is_some();
        let name = format!(
            "1 point in time, app {app}{}",
            if *mobifs {
                " (per VCT, promised)"
            } else {
                " (not promised by ext4)"
            }
        );
        line(
            &name,
            (!held).then(|| "its files are in no state the app had".to_string()),
        );
    }
    let databases = super::sqlite::databases(record);
    if !databases.is_empty() {
        let scratch = super::Scratch::new()?;
        for db in &databases {
            let verdict = super::sqlite::check(record, db, state, &scratch.0)?;
            line(&format!("2 SQLite integrity_check of {}", db.path), verdict);
        }
    }
    let fsyncs = checks::fsyncs_by_file(record);
    let shrinks = checks::shrinks_by_file(record);
    let outcome = checks::fsync_durability(record, &fsyncs, &shrinks, state, at);
    line(
        &format!("3 fsynced data survive ({} files checked)", outcome.checked),
        outcome.lost.first().map(|l| {
            format!(
                "{} fsynced by {} ns: {}",
                record.files[&l.ino].path, l.fsync_end, l.what
            )
        }),
    );
    line(
        "4 journal replays only whole transactions",
        state.bad_replays.first().map(|b| {
            format!(
                "tid {} replays block {} from log offset {}, which does not hold it",
                b.tid, b.home, b.offset
            )
        }),
    );
    let targets: std::collections::BTreeSet<&str> =
        record.renames.iter().map(|r| r.path.as_str()).collect();
    for path in targets {
        if record.renames.iter().any(|r| r.path == path && r.at <= at) {
            line(
                &format!("5 rename is atomic: {path}"),
                checks::rename_atomicity(record, state, at, path),
            );
        }
    }
    let promised = variant.stack.fs.data != crate::fs::ext4::DataMode::Writeback;
    for (ino, verdict) in checks::ordered_data(record, state) {
        line(
            &format!(
                "6 ordered data, {}{}",
                record.files[&ino].name,
                if promised {
                    ""
                } else {
                    " (not promised: data=writeback)"
                }
            ),
            verdict,
        );
    }
    Ok(())
}
