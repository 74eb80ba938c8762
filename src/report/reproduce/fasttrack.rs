//! `mobistack reproduce fasttrack` (seed 001, ATC'18): the six FG x BG combinations of Figure 10
//! (Gallery, Camera, Game under Update and Backup, `scenarios/fasttrack/`) on the Nexus 6's
//! eMMC and the Galaxy S6's UFS, each as FG-only (the scenario without its background app),
//! FG+BG (Linux as shipped), PA, PR, ID, FastT- (all three) and FastT (all three with the
//! device's FG-aware queue), under the kernel's page-cache locking (`linux`, the default) and
//! under the paper's global lock (`global`). The response time of an action is the foreground
//! app's operation that the user waits for: a Gallery launch or a Game load (one `iteration`),
//! a Camera switch (its `fsync`). `--quick`: the Nexus 6 only.

use super::{run_all, Headline, ReproduceOptions, Reproduction, Runs, Statistic, Table, TableRow};
use crate::report::layers::Layer;
use crate::scenario;

/// The FG x BG scenarios: (built-in name, label, foreground app, its measured operation).
const COMBOS: [(&str, &str, &str, &str); 6] = [
    (
        "fasttrack/gallery-update",
        "Gallery / Update",
        "gallery",
        "iteration",
    ),
    (
        "fasttrack/camera-update",
        "Camera / Update",
        "camera",
        "fsync",
    ),
    (
        "fasttrack/game-update",
        "Game / Update",
        "game",
        "iteration",
    ),
    (
        "fasttrack/gallery-backup",
        "Gallery / Backup",
        "gallery",
        "iteration",
    ),
    (
        "fasttrack/camera-backup",
        "Camera / Backup",
        "camera",
        "fsync",
    ),
    (
        "fasttrack/game-backup",
        "Game / Backup",
        "game",
        "iteration",
    ),
];

/// Figure 10's versions, in its order; "fg-only" is built by dropping the background app.
/// "id" (and "fastt-", "fastt") is ID through CFQ's own dispatch (`id_path = "elevator"`, the
/// default); "id-bypass" is ID past the I/O scheduler (`id_path = "bypass"`), the other reading:
/// §4.4 does not say which path its dispatcher takes.
const VERSIONS: [&str; 8] = [
    "fg-only",
    "fg+bg",
    "pa",
    "pr",
    "id",
    "id-bypass",
    "fastt-",
    "fastt",
];

/// The phones: (label, device profile, `[stack.device] queue_depth` override). FastTrack §5:
/// N6 eMMC, S6 UFS. The N6 is the headline phone as shipped: its 3.10 mmc driver has no eMMC
/// command queueing (mainline gained it in 4.15, 1e8e55b67030 "mmc: block: Add CQE support"),
/// so the card sees one command at a time whatever it supports (the scenarios' own
/// `queue_depth = 1`, as the `nexus-6` preset). The third is the same card with its 32-task
/// queue, as a 4.15+ driver would drive it: not as shipped.
const PHONES: [(&str, &str, Option<usize>); 3] = [
    ("N6", "emmc-5.1", Some(1)),
    ("S6", "ufs-2.0", None),
    (
        "N6 with command queueing (not as shipped)",
        "emmc-5.1",
        None,
    ),
];

/// The locking models: (label, `[stack.vm] page_cache_lock`).
const LOCKS: [(&str, crate::mm::PageCacheLock); 2] = [
    ("linux", crate::mm::PageCacheLock::Linux),
    ("global", crate::mm::PageCacheLock::Global),
];

/// Mean response time (ms) of every version of one combination on one phone and lock model.
struct Cell {
    ms: Vec<f64>,
}

impl Cell {
    fn of(&self, version: &str) -> f64 {
        self.ms[VERSIONS
            .iter()
            .position(|v| *v == version)
            .expect("a version")]
    }
}

/// Runs `combo` on `profile` (with `queue_depth` when given) under `lock`: the scenario's
/// variants plus FG-only.
#[allow(clippy::too_many_arguments)]
fn run_combo(
    name: &str,
    app: &str,
    op: &str,
    profile: &str,
    queue_depth: Option<usize>,
    lock: crate::mm::PageCacheLock,
    options: &ReproduceOptions,
) -> Result<Cell, String> {
    let base = scenario::load(name).map_err(|e| e.to_string())?;
    let retarget = |mut s: scenario::Scenario| {
        for v in &mut s.variants {
            v.stack.device.profile = profile.to_string();
            v.stack.device.queue_depth = queue_depth;
            v.stack.vm.page_cache_lock = lock;
        }
        s
    };
    let together = retarget(base.clone());
    let mut alone = base;
    alone
        .apps
        .retain(|a| a.role != crate::scenario::Role::Background);
    alone.variants.retain(|v| v.name == "fg+bg");
    alone.variants[0].name = "fg-only".into();
    let alone = retarget(alone);
    let (together, alone) = (run_all(&together, options)?, run_all(&alone, options)?);
    let mean_ms = |runs: &Runs, variant: &str| {
        runs.get(variant).apps[app]
            .ops
            .get(op)
            .map_or(0.0, |summary| summary.mean_ns / 1e6)
    };
    let ms = VERSIONS
        .iter()
        .map(|&version| {
            if version == "fg-only" {
                mean_ms(&alone, "fg-only")
            } else {
                mean_ms(&together, version)
            }
        })
        .collect();
    Ok(Cell { ms })
}

/// Figure 12's versions beside FG-only and FastT-: FastT's device side in two steps, the
/// FG-aware queue alone (`fastt` with `suspend = "off"`) and with program/erase suspend for
/// foreground reads (the scenarios' `fastt`).
const FIG12_VERSIONS: [&str; 4] = ["fg-only", "fastt-", "fastt-queue", "fastt"];

/// The Figure 12 pairs: (built-in name, label, foreground app, its measured operation).
const FIG12_COMBOS: [(&str, &str, &str, &str); 2] = [
    (
        "fasttrack/camera-update",
        "Camera / Update",
        "camera",
        "fsync",
    ),
    (
        "fasttrack/camera-backup",
        "Camera / Backup",
        "camera",
        "fsync",
    ),
];

/// Figure 12 analogue for one pair on the N6 under `lock`: mean response time (ms) of each of
/// [`FIG12_VERSIONS`], then the NAND suspensions of the `fastt` run (suspends, reads served in
/// an existing suspension, reads placed ahead of queued die work).
fn run_fig12(
    name: &str,
    app: &str,
    op: &str,
    lock: crate::mm::PageCacheLock,
    options: &ReproduceOptions,
) -> Result<Vec<f64>, String> {
    let mut s = scenario::load(name).map_err(|e| e.to_string())?;
    let find = |s: &scenario::Scenario, name: &str| {
        s.variants
            .iter()
            .find(|v| v.name == name)
            .cloned()
            .ok_or(format!("no {name} variant"))
    };
    let fastt = find(&s, "fastt")?;
    let mut queue_only = fastt.clone();
    queue_only.name = "fastt-queue".into();
    queue_only.stack.device.suspend = Some(crate::dev::profile::SuspendPolicy::Off);
    let mut alone = find(&s, "fg+bg")?;
    alone.name = "fg-only".into();
    s.variants = vec![find(&s, "fastt-")?, queue_only, fastt];
    let mut solo = s.clone();
    solo.apps
        .retain(|a| a.role != crate::scenario::Role::Background);
    solo.variants = vec![alone];
    for scenario in [&mut s, &mut solo] {
        for v in &mut scenario.variants {
            v.stack.device.profile = PHONES[0].1.to_string();
            v.stack.device.queue_depth = PHONES[0].2;
            v.stack.vm.page_cache_lock = lock;
        }
    }
    let (together, solo) = (run_all(&s, options)?, run_all(&solo, options)?);
    let mut values: Vec<f64> = FIG12_VERSIONS
        .iter()
        .map(|&version| {
            let runs = if version == "fg-only" {
                &solo
            } else {
                &together
            };
            runs.get(version).apps[app]
                .ops
                .get(op)
                .map_or(0.0, |summary| summary.mean_ns / 1e6)
        })
        .collect();
    let suspend = &together.get("fastt").device["suspend"];
    for counter in ["suspends", "reads_in_suspension", "reads_ahead_of_queued"] {
        values.push(suspend[counter].as_f64().unwrap_or(0.0));
    }
    Ok(values)
}

/// The versions of the per-layer tables: (label, variant, with the background app).
const LAYER_VERSIONS: [(&str, &str, bool); 3] = [
    ("FG-only", "fg+bg", false),
    ("FG+BG", "fg+bg", true),
    ("FastT", "fastt", true),
];

/// The user-visible actions split by layer (FastTrack §2.2's three use cases, under Update):
/// (built-in scenario, action, foreground app, the operation that is the action). `--quick`
/// splits the Camera switch only.
const LAYER_ACTIONS: [(&str, &str, &str, &str); 3] = [
    (
        "fasttrack/camera-update",
        "Camera switch (fsync) under Update",
        "camera",
        "fsync",
    ),
    (
        "fasttrack/gallery-update",
        "Gallery launch (iteration) under Update",
        "gallery",
        "iteration",
    ),
    (
        "fasttrack/game-update",
        "Game load (iteration) under Update",
        "game",
        "iteration",
    ),
];

/// The per-layer split's columns: the action, each [`Layer`], C_fg, records dropped.
fn layer_columns() -> Vec<String> {
    std::iter::once("action".to_string())
        .chain(Layer::ALL.iter().map(|l| l.name().to_string()))
        .chain(["C_fg".to_string(), "records dropped".to_string()])
        .collect()
}

/// Paths listed per version in the explanation of an action's split.
const EXPLAINED_PATHS: usize = 8;

/// One action (`scenario`'s `app` operation `op`) on the N6 under `page_cache_lock = "linux"`,
/// split by layer from the recorded timeline, with C_fg (FastTrack §2.3): the split table (one
/// row per [`LAYER_VERSIONS`]: mean ms of the action, of each layer, then C_fg and the
/// timeline records dropped) and the explanation table (the longest paths of FG+BG and FastT,
/// mean ms per action).
fn run_layers(
    scenario_name: &str,
    app: &str,
    op: &str,
    options: &ReproduceOptions,
) -> Result<(Vec<TableRow>, Vec<TableRow>), String> {
    let base = scenario::load(scenario_name).map_err(|e| e.to_string())?;
    let run_options = crate::run::RunOptions {
        timeline: Some(crate::sim::timeline::TimelineConfig::without_counters()),
        ..options.run_options()
    };
    let (mut rows, mut explained) = (Vec::new(), Vec::new());
    for (label, variant, with_background) in LAYER_VERSIONS {
        let mut s = base.clone();
        s.select_variant(variant)?;
        if !with_background {
            s.apps
                .retain(|a| a.role != crate::scenario::Role::Background);
        }
        for v in &mut s.variants {
            v.stack.device.profile = PHONES[0].1.to_string();
            v.stack.device.queue_depth = PHONES[0].2;
        }
        let results = crate::run::run_scenario(&options.scenario(&s), &run_options)
            .map_err(|e| e.to_string())?;
        let run = &results.runs[0];
        let timeline = run
            .timeline
            .as_ref()
            .ok_or("the run recorded no timeline")?;
        let uid = run.apps[app].uid;
        let layers = crate::report::layers::breakdown(timeline, app, uid, op);
        let ms = |ns| Some(layers.mean_ms(ns));
        let values = std::iter::once(ms(layers.total_ns))
            .chain(Layer::ALL.iter().map(|&l| ms(layers.of(l))))
            .chain([layers.c_fg(), Some(timeline.timeline.dropped as f64)])
            .collect();
        rows.push(TableRow {
            label: label.to_string(),
            values,
        });
        if with_background {
            for (path, layer, ns) in layers.top_paths(EXPLAINED_PATHS) {
                explained.push(TableRow {
                    label: format!("{label}: {path} [{}]", layer.name()),
                    values: vec![ms(ns)],
                });
            }
        }
    }
    Ok((rows, explained))
}

/// Today's answer on a UFS phone beside FastTrack (issue 13): each combination's `fg+bg` on the
/// S6 with BFQ, Android's task profiles and UFS command priority, then with FastT on top.
/// Returns (FG+BG, production, production + FastT, FastT) mean response times in ms.
fn run_production(
    name: &str,
    app: &str,
    op: &str,
    options: &ReproduceOptions,
) -> Result<[f64; 4], String> {
    let mut s = scenario::load(name).map_err(|e| e.to_string())?;
    let base = s
        .variants
        .iter()
        .find(|v| v.name == "fg+bg")
        .cloned()
        .ok_or("no fg+bg variant")?;
    let fastt = s
        .variants
        .iter()
        .find(|v| v.name == "fastt")
        .cloned()
        .ok_or("no fastt variant")?;
    let production = |mut v: crate::scenario::Variant, name: &str| {
        v.name = name.into();
        v.stack.block.elevator = "bfq".into();
        v.stack.io_policy = crate::task::IoPolicy::Android;
        v.stack.device.scheduler = Some("cmd-priority".into());
        v
    };
    let mut variants = vec![base.clone(), fastt.clone()];
    variants.push(production(base, "production"));
    let mut both = production(fastt, "production+fastt");
    // FastT's device queue is the FG-aware one; with command priority on, keep FastT's.
    both.stack.device.scheduler = Some("fg-aware".into());
    variants.push(both);
    for v in &mut variants {
        v.stack.device.profile = PHONES[1].1.into();
        v.stack.device.queue_depth = PHONES[1].2;
    }
    s.variants = variants;
    let runs = run_all(&s, options)?;
    let ms = |variant: &str| {
        runs.get(variant).apps[app]
            .ops
            .get(op)
            .map_or(0.0, |summary| summary.mean_ns / 1e6)
    };
    Ok([
        ms("fg+bg"),
        ms("production"),
        ms("production+fastt"),
        ms("fastt"),
    ])
}

/// Figure 13's further background apps ("four more I/O-heavy BG apps", §5.3), added after
/// Camera / Update's Update in this order: Backup, then these. Each is an assumption of this
/// reproduction (the paper does not name them).
const MORE_BG_APPS: [&str; 4] = [
    // A music app downloading an album.
    "[[app]]\nname = \"music\"\nrole = \"background\"\n[app.workload.seq-write]\npath = \"/data/music/album.flac\"\nsize = \"512MiB\"\nio_size = \"256KiB\"\nthink = \"5ms\"\n",
    // The media scanner reading new files.
    "[[app]]\nname = \"scanner\"\nrole = \"background\"\n[app.workload.file-read]\npath = \"/data/media/dcim.bin\"\nfile_size = \"512MiB\"\nio_size = \"128KiB\"\nthink = \"2ms\"\n",
    // A messenger syncing its database.
    "[[app]]\nname = \"messenger\"\nrole = \"background\"\n[app.workload.fsync-write]\npath = \"/data/messenger/db\"\nio_size = \"16KiB\"\nthink = \"20ms\"\ncount = 1000\n",
    // A cloud-photo app restoring pictures.
    "[[app]]\nname = \"photos\"\nrole = \"background\"\n[app.workload.seq-write]\npath = \"/data/photos/restore.bin\"\nsize = \"512MiB\"\nio_size = \"1MiB\"\nthink = \"10ms\"\n",
];

/// FastT with QASIO's boost of every dependency type: the journal's waits for the background
/// apps' ordered data (D_data) and metadata (D_meta), which FastTrack's detector does not see
/// (the waiter is jbd2, a kernel thread, and the pages are background apps').
const FASTT_QASIO_VARIANT: &str = "
[[variant]]
name = \"fastt+qasio\"
description = \"FastT and QASIO's boost of the asynchronous writes the journal waits on\"
[variant.stack.fasttrack]
pa = true
pr = true
id = true
[variant.stack.device]
scheduler = \"fg-aware\"
suspend = \"foreground\"
[variant.stack.qasio]
boost = [\"data-sync\", \"meta\", \"discard\"]
";

/// The Figure 13 scenario: `fasttrack/camera-update` with `n` background apps (1..=6: Update,
/// Backup, then [`MORE_BG_APPS`]) and the variant `fastt+qasio` beside Figure 10's versions.
pub fn many_bg_scenario(n: usize) -> Result<String, String> {
    if !(1..=2 + MORE_BG_APPS.len()).contains(&n) {
        return Err(format!(
            "{n} background apps: Figure 13's analogue has 1 to {}",
            2 + MORE_BG_APPS.len()
        ));
    }
    let camera_update = scenario::builtin::find("fasttrack/camera-update")
        .ok_or("no fasttrack/camera-update")?
        .source;
    let backup = scenario::builtin::find("fasttrack/camera-backup")
        .ok_or("no fasttrack/camera-backup")?
        .source;
    let backup_app = &backup[backup
        .find("[[app]]\nname = \"backup\"")
        .ok_or("no backup app")?
        ..backup
            .find("\n# FastTrack's Figure 10 ablation")
            .ok_or("no variants")?];
    let at = camera_update
        .find("\n# FastTrack's Figure 10 ablation")
        .ok_or("no variants")?;
    let mut source = camera_update[..at].to_string();
    let extra = std::iter::once(backup_app).chain(MORE_BG_APPS);
    for app in extra.take(n - 1) {
        source.push('\n');
        source.push_str(app);
    }
    source.push_str(&camera_update[at..]);
    source.push_str(FASTT_QASIO_VARIANT);
    Ok(source)
}

/// Figure 13 analogue: Camera's switch with `n` background apps ([`many_bg_scenario`]), on the
/// N6 under the kernel's locking. Returns the FG+BG, FastT and FastT + QASIO mean ms.
fn run_many_bg(n: usize, options: &ReproduceOptions) -> Result<[f64; 3], String> {
    let source = many_bg_scenario(n)?;
    let mut s =
        scenario::parse(&format!("camera-{n}-bg.toml"), &source).map_err(|e| e.to_string())?;
    s.variants
        .retain(|v| matches!(v.name.as_str(), "fg+bg" | "fastt" | "fastt+qasio"));
    let runs = run_all(&s, options)?;
    let ms = |variant: &str| {
        runs.get(variant).apps["camera"]
            .ops
            .get("fsync")
            .map_or(0.0, |summary| summary.mean_ns / 1e6)
    };
    Ok([ms("fg+bg"), ms("fastt"), ms("fastt+qasio")])
}

/// A combination's slowdown under its background app, as (1, FG+BG / FG-only).
fn slowdown(cell: &Cell) -> (f64, f64) {
    normalised(cell.of("fg-only"), cell.of("fg+bg"))
}

/// `after` over `before` as (1, after / before): a figure in "x FG-only".
fn normalised(before: f64, after: f64) -> (f64, f64) {
    (1.0, after / before.max(1e-9))
}

/// The mean over the combinations of the ms FastT- saves over FG+BG.
fn mean_saved_ms(cells: &[Cell]) -> f64 {
    cells
        .iter()
        .map(|c| c.of("fg+bg") - c.of("fastt-"))
        .sum::<f64>()
        / cells.len() as f64
}

/// Why a headline on the S6 has no simulated figure under `--quick`.
const QUICK_S6: &str = "--quick runs the N6 only (run without --quick)";

/// The paper's headlines, each with its exact figure and phone, beside the simulated figures:
/// `n6` and `s6` are the Figure 10 cells under the kernel's locking ([`COMBOS`] order; `s6`
/// `None` under `--quick`), `six` Figure 13's (FG+BG, FastT, FastT + QASIO) with six
/// background apps on the N6.
fn paper_headlines(n6: &[Cell], s6: Option<&[Cell]>, six: [f64; 3]) -> Vec<Headline> {
    let (gallery_update, camera_update, gallery_backup) = (0, 1, 3);
    let s6_change = |what: &str,
                     source: &'static str,
                     unit: &'static str,
                     paper: (f64, f64),
                     simulated: Option<(f64, f64)>| match simulated {
        Some(simulated) => Headline::change(what, source, unit, Statistic::Mean, paper, simulated),
        None => Headline::not_modelled(
            what,
            source,
            unit,
            Statistic::Mean,
            super::Measure::Change(paper.0, paper.1),
            QUICK_S6,
        ),
    };
    let fg_only_n6 = n6[camera_update].of("fg-only");
    let mut headlines = vec![
        s6_change(
            "Camera switch under Update over FG-only, S6",
            "§2.2, Figure 1(b): S6, x19.5 under heavy BG I/O",
            "x FG-only",
            (1.0, 19.5),
            s6.map(|c| slowdown(&c[camera_update])),
        ),
        Headline::change(
            "Camera switch under Update over FG-only, N6",
            "§2.2, beside Figure 1(b): N6, x11",
            "x FG-only",
            Statistic::Mean,
            (1.0, 11.0),
            slowdown(&n6[camera_update]),
        ),
        Headline::change(
            "Gallery launch under Update over FG-only, N6",
            "§2.2, Figure 1(a): N6, FG+Update x2.4",
            "x FG-only",
            Statistic::Mean,
            (1.0, 2.4),
            slowdown(&n6[gallery_update]),
        ),
        Headline::change(
            "Gallery launch under Backup over FG-only, N6",
            "§2.2, Figure 1(a): N6, FG+Backup x1.6",
            "x FG-only",
            Statistic::Mean,
            (1.0, 1.6),
            slowdown(&n6[gallery_backup]),
        ),
        s6_change(
            "Gallery launch under Update over FG-only, S6",
            "§2.2, Figure 1(a): S6, FG+Update x2.6",
            "x FG-only",
            (1.0, 2.6),
            s6.map(|c| slowdown(&c[gallery_update])),
        ),
        s6_change(
            "Gallery launch under Backup over FG-only, S6",
            "§2.2, Figure 1(a): S6, FG+Backup x1.7",
            "x FG-only",
            (1.0, 1.7),
            s6.map(|c| slowdown(&c[gallery_backup])),
        ),
        Headline::relative(
            "FastT- over FG+BG, mean of the six pairs, N6",
            "§5.1, Figure 10: FastT- -74 % on average (four phones)",
            "% of FG+BG",
            Statistic::Mean,
            26.0,
            mean_change(n6, "fg+bg", "fastt-"),
        ),
        Headline::relative(
            "ID alone over FG+BG, mean of the six pairs, N6",
            "§5.1, Figure 10: ID about -11 % on average",
            "% of FG+BG",
            Statistic::Mean,
            89.0,
            mean_change(n6, "fg+bg", "id"),
        ),
        Headline::relative(
            "ID past the I/O scheduler (id_path bypass) over FG+BG, six pairs, N6",
            "§5.1, Figure 10: ID about -11 % on average",
            "% of FG+BG",
            Statistic::Mean,
            89.0,
            mean_change(n6, "fg+bg", "id-bypass"),
        ),
        Headline::change(
            "Camera switch under Update, N6: FastT- -> FastT",
            "§5.2, Figure 12: N6, 2.53 s -> 0.75 s (FG-only 0.6 s; emulated device)",
            "ms",
            Statistic::Mean,
            (2530.0, 750.0),
            (
                n6[camera_update].of("fastt-"),
                n6[camera_update].of("fastt"),
            ),
        ),
        Headline::relative(
            "FastT over FG+BG, Camera switch with six BG apps, N6",
            "§5.3, Figure 13: -94 % at six BG apps (phone not stated)",
            "% of FG+BG",
            Statistic::Mean,
            6.0,
            (100.0, 100.0 * six[1] / six[0].max(1e-9)),
        ),
        Headline::change(
            "FastT over FG-only, Camera switch with six BG apps, N6",
            "§5.3, Figure 13: normalised switch time 1.27 at six BG apps",
            "x FG-only",
            Statistic::Mean,
            (1.0, 1.27),
            normalised(fg_only_n6, six[1]),
        ),
        Headline::change(
            "FG+BG over FG-only, Camera switch with six BG apps, N6",
            "§1 (Figure 13's FG+BG): up to +2,319 %",
            "x FG-only",
            Statistic::Mean,
            (1.0, 24.19),
            normalised(fg_only_n6, six[0]),
        ),
    ];
    match s6 {
        Some(s6) => {
            headlines.push(Headline::relative(
                "FastT- over FG+BG, mean of the six pairs, S6",
                "§5.1, Figure 10: FastT- -74 % on average (four phones)",
                "% of FG+BG",
                Statistic::Mean,
                26.0,
                mean_change(s6, "fg+bg", "fastt-"),
            ));
            headlines.push(Headline::level(
                "FastT-'s absolute cut (ms saved, mean of six pairs), S6 (UFS) over N6 (eMMC)",
                "§5.1: \"the absolute numbers of I/O latencies reduced by FastT- are almost the same\" on UFS and eMMC",
                "x",
                Statistic::Mean,
                1.0,
                mean_saved_ms(s6) / mean_saved_ms(n6),
            ));
            // A directional claim about a ratio: judged as the change from 1 (as good on both)
            // to the S6's relative cut over the N6's, so a smaller cut on UFS is `opposite`.
            let n6_cut = mean_change(n6, "fg+bg", "fastt-").1 / 100.0 - 1.0;
            let s6_cut = mean_change(s6, "fg+bg", "fastt-").1 / 100.0 - 1.0;
            headlines.push(Headline::change(
                "FastT- works better on UFS: its relative cut, S6 over N6",
                "§5.1 with §5: the same absolute cut on UFS's 3x throughput (derived: 3x the relative cut)",
                "x the N6's cut",
                Statistic::Mean,
                (1.0, 3.0),
                (1.0, s6_cut / n6_cut),
            ));
        }
        None => {
            for (what, source, paper) in [
                (
                    "FastT- over FG+BG, mean of the six pairs, S6",
                    "§5.1, Figure 10: FastT- -74 % on average (four phones)",
                    super::Measure::Change(100.0, 26.0),
                ),
                (
                    "FastT-'s absolute cut (ms saved, mean of six pairs), S6 (UFS) over N6 (eMMC)",
                    "§5.1: \"the absolute numbers of I/O latencies reduced by FastT- are almost the same\" on UFS and eMMC",
                    super::Measure::Level(1.0),
                ),
                (
                    "FastT- works better on UFS: its relative cut, S6 over N6",
                    "§5.1 with §5: the same absolute cut on UFS's 3x throughput (derived: 3x the relative cut)",
                    super::Measure::Change(1.0, 3.0),
                ),
            ] {
                headlines.push(Headline::not_modelled(
                    what,
                    source,
                    "x",
                    Statistic::Mean,
                    paper,
                    QUICK_S6,
                ));
            }
        }
    }
    headlines
}

/// Mean over the combinations of `after / before` (each combination weighs the same, as the
/// paper's "on average"), as a (100, 100 x mean ratio) pair.
fn mean_change(cells: &[Cell], before: &str, after: &str) -> (f64, f64) {
    let ratios: Vec<f64> = cells
        .iter()
        .map(|c| c.of(after) / c.of(before).max(1e-9))
        .collect();
    (
        100.0,
        100.0 * ratios.iter().sum::<f64>() / ratios.len() as f64,
    )
}

pub(super) fn fasttrack(
    options: &ReproduceOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<Reproduction, String> {
    let phones: &[(&str, &str, Option<usize>)] = if options.quick { &PHONES[..1] } else { &PHONES };
    // results[phone][lock][combo]
    let mut results: Vec<Vec<Vec<Cell>>> = Vec::new();
    for &(phone, profile, queue_depth) in phones {
        let mut by_lock = Vec::new();
        for (lock_label, lock) in LOCKS {
            let mut cells = Vec::new();
            for (name, _, app, op) in COMBOS {
                progress(&format!("{name} on {phone} ({profile}), lock {lock_label}"));
                cells.push(run_combo(
                    name,
                    app,
                    op,
                    profile,
                    queue_depth,
                    lock,
                    options,
                )?);
            }
            by_lock.push(cells);
        }
        results.push(by_lock);
    }
    let n6 = &results[0][0];
    let s6 = results.get(1).map(|by_lock| by_lock[0].as_slice());
    // Figure 13: Camera's switch with 2..6 background apps (6 only under --quick).
    let many: Vec<usize> = if options.quick {
        vec![6]
    } else {
        (2..=6).collect()
    };
    let mut fig13 = Vec::new();
    for n in many {
        progress(&format!("Camera switch with {n} background apps"));
        fig13.push((n, run_many_bg(n, options)?));
    }
    let six = fig13.last().expect("six background apps").1;
    let mut headlines = paper_headlines(n6, s6, six);
    if let Some(queueing) = results.get(2) {
        headlines.push(Headline::relative(
            "FastT- over FG+BG, mean of the six pairs, N6 with command queueing (not as shipped)",
            "§5.1, Figure 10: FastT- -74 % on average (four phones)",
            "% of FG+BG",
            Statistic::Mean,
            26.0,
            mean_change(&queueing[0], "fg+bg", "fastt-"),
        ));
        headlines.push(Headline::relative(
            "ID alone over FG+BG, mean of the six pairs, N6 with command queueing (not as shipped)",
            "§5.1, Figure 10: ID about -11 % on average",
            "% of FG+BG",
            Statistic::Mean,
            89.0,
            mean_change(&queueing[0], "fg+bg", "id"),
        ));
    }
    let mut tables = Vec::new();
    let mut fig12_rows = Vec::new();
    for (lock_label, lock) in LOCKS {
        for (name, label, app, op) in FIG12_COMBOS {
            progress(&format!(
                "Figure 12: {name} on N6, FG-aware queue with and without suspend, lock {lock_label}"
            ));
            let values = run_fig12(name, app, op, lock, options)?;
            fig12_rows.push(TableRow {
                label: format!("{label} ({app} {op}), lock {lock_label}"),
                values: values.into_iter().map(Some).collect(),
            });
        }
    }
    tables.push(Table {
        title: "Figure 12 analogue: Camera switch on N6 (emmc-5.1, one command at a time as shipped), FastT's device side: mean response time (ms) and FastT's NAND suspensions".into(),
        note: "paper (emulated storage): Camera / Update FG-only 0.6 s, FastT- 2.53 s, FastT 0.75 s. FASTT-QUEUE = FastT- + the FG-aware device queue; FASTT = that + program/erase suspend for FG reads (`suspend = \"foreground\"`, docs/devices.md). A Camera switch is an fsync: its I/O is writes and a cache flush, which a read suspend cannot speed up".into(),
        columns: [
            "FG-ONLY",
            "FASTT-",
            "FASTT-QUEUE",
            "FASTT",
            "suspends",
            "reads in a suspension",
            "reads ahead of queued",
        ]
        .map(String::from)
        .to_vec(),
        rows: fig12_rows,
    });
    let actions = if options.quick {
        &LAYER_ACTIONS[..1]
    } else {
        &LAYER_ACTIONS[..]
    };
    for &(name, action, app, op) in actions {
        progress(&format!(
            "{action} on N6, per layer and C_fg (timeline recorded)"
        ));
        let (rows, explained) = run_layers(name, app, op, options)?;
        tables.push(Table {
            title: format!("{action} on {}, page_cache_lock = \"linux\": mean ms per layer (IOPro Fig. 3 style, FastTrack §3.1) and C_fg (FastTrack §2.3)", PHONES[0].0),
            note: "src/report/layers.rs: every ns of the action in one layer (the layers add up to it). A wait on a request is cut at the request's life (plugged or in the elevator with a device slot free: block; in the elevator with every device slot held, or in the mmc driver's second slot: device queue; on the device: device); a wait for work another task does for the waiter (jbd2_log_wait_commit) is split as that task's waits; a lock wait stays in the lock's layer. C_fg = the foreground app's share of the bytes issued during its actions (paper §2.3, Fig. 2: 0.77 for app switches in a month of real use, not under Update). Paper, S6 under Update (Fig. 3): the page cache 32-51 % of the execution time, the block layer negligible".into(),
            columns: layer_columns(),
            rows,
        });
        tables.push(Table {
            title: format!("{action} on {}: where the time goes, the {EXPLAINED_PATHS} longest paths of FG+BG and FastT (mean ms per action)", PHONES[0].0),
            note: "path = the chain of waits (a hand-off names the task waited for, then its waits), then the request's phase; [layer] as in the split".into(),
            columns: vec!["ms".to_string()],
            rows: explained,
        });
    }
    for (p, (phone, profile, queue_depth)) in phones.iter().enumerate() {
        let device = match queue_depth {
            Some(depth) => format!("{profile}, queue_depth = {depth}"),
            None => profile.to_string(),
        };
        for (l, (lock_label, _)) in LOCKS.iter().enumerate() {
            let cells = &results[p][l];
            tables.push(Table {
                title: format!(
                    "Figure 10 analogue: mean response time (ms), {phone} ({device}), page_cache_lock = \"{lock_label}\""
                ),
                note: if *lock_label == "linux" {
                    "Linux 3.10's locking (no lock across reclaim): PA is the FG-first hand-off of the core alone".into()
                } else {
                    "FastTrack §3.2's global page-cache lock (the paper's model)".into()
                },
                columns: VERSIONS.iter().map(|v| v.to_uppercase()).collect(),
                rows: COMBOS
                    .iter()
                    .zip(cells)
                    .map(|((_, label, app, op), cell)| TableRow {
                        label: format!("{label} ({app} {op})"),
                        values: cell.ms.iter().map(|&ms| Some(ms)).collect(),
                    })
                    .chain(std::iter::once(TableRow {
                        label: "mean, % of FG+BG".into(),
                        values: VERSIONS
                            .iter()
                            .map(|v| Some(mean_change(cells, "fg+bg", v).1))
                            .collect(),
                    }))
                    .collect(),
            });
        }
    }
    let fg_only = n6[1].of("fg-only");
    tables.push(Table {
        title: format!("Figure 13 analogue: Camera switch time with {} background apps, normalised to FG-only ({}, linux)", if options.quick { "6" } else { "2..6" }, PHONES[0].0),
        note: "paper (§5.3, Figure 13): FastT 1.1 -> 1.27 from 2 to 6 BG apps; FastT -94 % over FG+BG at 6; FG+BG up to +2,319 % (§1). BG apps: Update, Backup, then music download, media scan, messenger sync, photo restore (assumed). FastT + QASIO (no paper has it): QASIO's boost of the background writes the journal's commit waits on (ordered data, metadata), which FastTrack's detector does not see".into(),
        columns: ["FG+BG", "FastT", "FastT + QASIO"].map(String::from).to_vec(),
        rows: fig13
            .iter()
            .map(|(n, ms)| TableRow {
                label: format!("{n} BG apps"),
                values: ms.iter().map(|&ms| Some(ms / fg_only.max(1e-9))).collect(),
            })
            .collect(),
    });
    if !options.quick {
        let mut rows = Vec::new();
        for (name, label, app, op) in COMBOS {
            progress(&format!(
                "{name} on S6: BFQ + Android task profiles + UFS command priority"
            ));
            let values = run_production(name, app, op, options)?;
            rows.push(TableRow {
                label: format!("{label} ({app} {op})"),
                values: values.iter().map(|&ms| Some(ms)).collect(),
            });
        }
        tables.push(Table {
            title: "FastT beside today's answer, S6 (ufs-2.0), page_cache_lock = \"linux\": mean response time (ms)".into(),
            note: "production = BFQ + Android's task profiles (FG app in top-app, others in background) + UFS command priority; no paper has this".into(),
            columns: ["FG+BG", "production", "production + FastT", "FastT"]
                .map(String::from)
                .to_vec(),
            rows,
        });
    }
    Ok(Reproduction::new(
        "fasttrack",
        options.quick,
        headlines,
        tables,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_change_weighs_each_pair_the_same() {
        let cell = |fg_bg: f64, fastt: f64| Cell {
            ms: VERSIONS
                .iter()
                .map(|v| match *v {
                    "fg+bg" => fg_bg,
                    "fastt-" => fastt,
                    _ => 1.0,
                })
                .collect(),
        };
        // -50 % on a 1000 ms pair and +0 % on a 10 ms pair: -25 % on average, not -49.5 %.
        let cells = [cell(1000.0, 500.0), cell(10.0, 10.0)];
        assert_eq!(mean_change(&cells, "fg+bg", "fastt-"), (100.0, 75.0));
        assert_eq!(cells[0].of("fastt-"), 500.0);
    }

    #[test]
    fn fastt_turns_suspend_on_for_foreground_reads_and_fastt_minus_does_not() {
        use crate::dev::profile::SuspendPolicy;
        for (name, _, _, _) in COMBOS {
            let s = scenario::load(name).expect("built in");
            let variant = |n: &str| s.variants.iter().find(|v| v.name == n).unwrap().clone();
            let fastt = variant("fastt").stack.device;
            assert_eq!(fastt.suspend, Some(SuspendPolicy::Foreground), "{name}");
            assert_eq!(fastt.scheduler.as_deref(), Some("fg-aware"), "{name}");
            let minus = variant("fastt-").stack.device.resolve().unwrap();
            assert_eq!(minus.suspend, SuspendPolicy::Off, "{name}");
        }
        assert!(FIG12_COMBOS.iter().all(|c| COMBOS.contains(c)));
    }

    /// Cells whose every version takes `ms`, FG-only `fg_only` and FG+BG `fg_bg`.
    fn uniform(fg_only: f64, fg_bg: f64, ms: f64) -> Cell {
        Cell {
            ms: VERSIONS
                .iter()
                .map(|v| match *v {
                    "fg-only" => fg_only,
                    "fg+bg" => fg_bg,
                    _ => ms,
                })
                .collect(),
        }
    }

    /// Each headline names its figure and phone: the x19.5 is the S6 Camera switch of
    /// Figure 1(b) and the x11 the N6's; Figure 13 and the UFS claim are headlines judged by
    /// size; without the S6 (`--quick`) its headlines are not modelled, never filled in.
    #[test]
    fn headlines_name_the_papers_figure_and_phone_and_take_the_simulated_values() {
        use super::super::Verdict;
        let n6: Vec<Cell> = (0..6).map(|_| uniform(100.0, 1100.0, 550.0)).collect();
        let s6: Vec<Cell> = (0..6).map(|_| uniform(100.0, 1950.0, 500.0)).collect();
        let find = |headlines: &[Headline], what: &str| {
            headlines
                .iter()
                .find(|h| h.what == what)
                .unwrap_or_else(|| panic!("no headline {what}"))
                .clone()
        };
        let all = paper_headlines(&n6, Some(&s6), [2000.0, 127.0, 120.0]);
        let s6_switch = find(&all, "Camera switch under Update over FG-only, S6");
        assert!(s6_switch.source.contains("Figure 1(b): S6, x19.5"));
        assert_eq!(
            s6_switch.simulated,
            Some(super::super::Measure::Change(1.0, 19.5))
        );
        assert_eq!(s6_switch.verdict(), Verdict::Matches);
        let n6_switch = find(&all, "Camera switch under Update over FG-only, N6");
        assert!(n6_switch.source.contains("N6, x11"));
        assert_eq!(
            n6_switch.verdict(),
            Verdict::Matches,
            "x11 simulated as x11"
        );
        let six = find(&all, "FastT over FG+BG, Camera switch with six BG apps, N6");
        assert!(six.source.contains("Figure 13"));
        assert_eq!(
            six.simulated,
            Some(super::super::Measure::Change(100.0, 6.35))
        );
        let ufs = find(
            &all,
            "FastT-'s absolute cut (ms saved, mean of six pairs), S6 (UFS) over N6 (eMMC)",
        );
        assert_eq!(
            ufs.simulated,
            Some(super::super::Measure::Level(1450.0 / 550.0))
        );
        assert!(matches!(ufs.verdict(), Verdict::Stronger(_)));
        // "FastT- works better on UFS" is directional: a deeper relative cut on the S6 (74 %
        // against 50 %) holds it, a shallower one is the opposite of the claim.
        let better = "FastT- works better on UFS: its relative cut, S6 over N6";
        assert!(find(&all, better).direction_holds());
        let shallow: Vec<Cell> = (0..6).map(|_| uniform(100.0, 1950.0, 1800.0)).collect();
        let reversed = paper_headlines(&n6, Some(&shallow), [2000.0, 127.0, 120.0]);
        assert_eq!(find(&reversed, better).verdict(), Verdict::Opposite);
        let quick = paper_headlines(&n6, None, [2000.0, 127.0, 120.0]);
        assert_eq!(quick.len(), all.len());
        for h in quick.iter().filter(|h| h.what.contains("S6")) {
            assert_eq!(h.verdict(), Verdict::NotModelled, "{}", h.what);
        }
    }

    /// The N6 as shipped: every FastTrack scenario drives its eMMC one command at a time
    /// (shamu's 3.10 mmc driver has no command queueing), and the headline phone is that one.
    #[test]
    fn the_n6_is_driven_one_command_at_a_time_as_its_3_10_kernel_drives_it() {
        assert_eq!(PHONES[0], ("N6", "emmc-5.1", Some(1)));
        for (name, _, _, _) in COMBOS {
            let s = scenario::load(name).expect("built in");
            for v in &s.variants {
                assert_eq!(v.stack.device.queue_depth, Some(1), "{name} {}", v.name);
            }
        }
    }

    #[test]
    fn every_combination_names_a_built_in_scenario_with_every_version() {
        for (name, _, app, _) in COMBOS {
            let s = scenario::load(name).expect("built in");
            assert!(
                s.apps.iter().any(|a| a.name.get_ref() == app),
                "{name}: {app}"
            );
            for version in &VERSIONS[1..] {
                assert!(
                    s.variants.iter().any(|v| v.name == *version),
                    "{name}: {version}"
                );
            }
        }
    }
}
