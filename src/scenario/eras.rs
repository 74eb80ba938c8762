//! Era switches (issue 41): the behaviours that follow `[stack.kernel] version`, their
//! effective setting in a resolved stack and what set each one: the scenario, its phone preset,
//! or the era's default. `mobistack validate` prints them; results name a stack that mixes eras.
//!
//! One row per switch ([`EraSwitch`]): a new era switch adds its row in [`era_switches`] (and,
//! when a setting can belong to another era than the kernel's, a line in [`mixed_eras`]).
//!
//! Era defaults that depend on the version cannot be serde defaults; [`with_era_defaults`]
//! writes them into a scenario's stack table before it is deserialized (today: the elevator).

use super::StackConfig;
use crate::block::{BlockConfig, BlockEraSource, WbtDefault};
use crate::kernel::{KernelBuildConfig, KernelVersion};
use serde::Serialize;
use std::collections::BTreeSet;

/// Which fields of a stack the scenario wrote and which its phone preset wrote, as dotted
/// paths under `[stack]` (`block.elevator`, `kernel.version`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Provenance {
    scenario: BTreeSet<String>,
    /// The preset's name and its fields.
    phone: Option<(String, BTreeSet<String>)>,
}

impl Provenance {
    /// The provenance of a scenario's stack table (the base stack with a variant's overrides,
    /// before its phone preset is put underneath).
    pub fn of(stack: &toml::Table) -> Provenance {
        let phone = stack
            .get("phone")
            .and_then(|v| v.as_str())
            .and_then(|name| {
                super::phones::preset(name)
                    .ok()
                    .map(|table| (name.to_string(), paths(&table)))
            });
        Provenance {
            scenario: paths(stack),
            phone,
        }
    }

    /// Who set field `path`: "scenario", "phone `pixel-8`", or `otherwise`.
    fn set_by(&self, path: &str, otherwise: impl FnOnce() -> String) -> String {
        if self.scenario.contains(path) {
            return "scenario".into();
        }
        match &self.phone {
            Some((name, fields)) if fields.contains(path) => format!("phone `{name}`"),
            _ => otherwise(),
        }
    }

    fn sets(&self, path: &str) -> bool {
        self.scenario.contains(path) || self.phone.as_ref().is_some_and(|(_, f)| f.contains(path))
    }
}

/// Every leaf of `table` as a dotted path.
fn paths(table: &toml::Table) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    fn walk(prefix: &str, table: &toml::Table, out: &mut BTreeSet<String>) {
        for (key, value) in table {
            let path = if prefix.is_empty() {
                key.clone()
            } else {
                format!("{prefix}.{key}")
            };
            match value {
                toml::Value::Table(inner) => walk(&path, inner, out),
                _ => {
                    out.insert(path);
                }
            }
        }
    }
    walk("", table, &mut out);
    out
}

/// The stack table with the era's defaults written where the scenario and its phone left a
/// field out: `[stack.block] elevator` ([`BlockConfig::default_elevator`] of the block layer's
/// version). A version that does not parse is left for deserialization to report.
pub fn with_era_defaults(mut stack: toml::Table) -> toml::Table {
    let version_at = |table: Option<&toml::Value>| -> Option<KernelVersion> {
        table?
            .get("version")
            .cloned()
            .and_then(|v| v.try_into::<KernelVersion>().ok())
    };
    let kernel = version_at(stack.get("kernel")).unwrap_or_default();
    let block_version = version_at(stack.get("block")).unwrap_or(kernel);
    let block = stack
        .entry("block")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    if let Some(block) = block.as_table_mut() {
        block.entry("elevator").or_insert_with(|| {
            toml::Value::String(BlockConfig::default_elevator(block_version).to_string())
        });
    }
    stack
}

/// One era switch of a resolved stack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EraSwitch {
    /// `kernel`, `block`, `fs`, ...
    pub layer: &'static str,
    /// The switch (a field name, or the kernel function whose behaviour it is).
    pub switch: &'static str,
    /// Its effective setting.
    pub value: String,
    /// "scenario", "phone `name`", or the era whose default it is and why.
    pub set_by: String,
}

/// The era switches of `stack` with what set each (`provenance`: the scenario's and its phone's
/// fields).
pub fn era_switches(stack: &StackConfig, provenance: &Provenance) -> Vec<EraSwitch> {
    let kernel = &stack.kernel;
    let version = kernel.version;
    let row = |layer, switch, value: String, set_by: String| EraSwitch {
        layer,
        switch,
        value,
        set_by,
    };
    let mut rows = vec![row(
        "kernel",
        "version",
        version.to_string(),
        provenance.set_by("kernel.version", || {
            "default (3.10: the papers' phones)".into()
        }),
    )];
    let block = &stack.block;
    let era = block.era(kernel);
    let config = kernel.build_config_for(era.version);
    rows.push(row(
        "kernel",
        "config",
        config.name().into(),
        provenance.set_by("kernel.config", || {
            format!(
                "era {}: {}",
                era.version,
                match KernelBuildConfig::default_for(era.version) {
                    KernelBuildConfig::Android => "a phone's (GKI or vendor defconfig)",
                    KernelBuildConfig::Distro => "a desktop distribution's",
                }
            )
        }),
    ));
    rows.push(row(
        "block",
        "version",
        era.version.to_string(),
        match era.source {
            BlockEraSource::Kernel => "[stack.kernel] version".into(),
            BlockEraSource::Scenario => provenance.set_by("block.version", || "scenario".into()),
            BlockEraSource::Elevator => format!(
                "elevator `{}` (not in Linux {version}): mixed eras",
                block.elevator
            ),
        },
    ));
    rows.push(row(
        "block",
        "elevator",
        block.elevator.clone(),
        provenance.set_by("block.elevator", || {
            format!("era {}: the kernel's default", era.version)
        }),
    ));
    let blk_mq = crate::block::BLK_MQ_ELEVATORS.contains(&block.elevator.as_str());
    rows.push(row(
        "block",
        "request queue",
        if blk_mq { "blk-mq" } else { "legacy" }.into(),
        "elevator".into(),
    ));
    let wbt = match block.wbt_min_lat_nsec(kernel, blk_mq) {
        Some(ns) => format!("on ({} us)", ns / 1_000),
        None => "off".into(),
    };
    let wbt_set_by = if provenance.sets("block.wbt") || provenance.sets("block.wbt_lat_usec") {
        let path = if provenance.sets("block.wbt") {
            "block.wbt"
        } else {
            "block.wbt_lat_usec"
        };
        provenance.set_by(path, String::new)
    } else {
        let default = block.wbt_default(kernel);
        match default {
            WbtDefault::Config | WbtDefault::On => {
                format!(
                    "era {} with config {}: {}",
                    era.version,
                    config.name(),
                    default.explain()
                )
            }
            _ => format!("era {}: {}", era.version, default.explain()),
        }
    };
    rows.push(row("block", "wbt", wbt, wbt_set_by));
    rows.push(row(
        "fs",
        "jbd2_journal_force_commit on an idle journal",
        if version.has_force_commit_optimization() {
            "writes nothing"
        } else {
            "commits an empty transaction"
        }
        .into(),
        format!("era {version} (9ff864462477, 3.11)"),
    ));
    rows.extend(fs_and_mm_switches(stack, provenance));
    rows
}

/// The era switches of ext4/jbd2 and the page cache: `ordered_delalloc` (an override of
/// [`KernelVersion::files_new_delalloc_blocks_as_ordered_data`]), `dioread_nolock` (of
/// [`KernelVersion::mounts_dioread_nolock_by_default`]), the writeback handle, the
/// dirtyable memory's reserve and a 32-bit phone's lowmem.
fn fs_and_mm_switches(stack: &StackConfig, provenance: &Provenance) -> Vec<EraSwitch> {
    let version = stack.kernel.version;
    let mut rows = Vec::new();
    let mut row = |layer, switch, value: String, set_by: String| {
        rows.push(EraSwitch {
            layer,
            switch,
            value,
            set_by,
        })
    };
    row(
        "fs",
        "ordered_delalloc (delalloc blocks filed as ordered data)",
        stack.fs.ordered_delalloc(version).to_string(),
        provenance.set_by("fs.ordered_delalloc", || {
            format!("era {version} (on up to 3.8: f3b59291a69d; again from 4.7: 06bd3c36a733)")
        }),
    );
    row(
        "fs",
        "dioread_nolock (writeback into unwritten extents)",
        stack.fs.dioread_nolock(version).to_string(),
        provenance.set_by("fs.dioread_nolock", || {
            format!("era {version} (on from 5.6: 244adf6426ee)")
        }),
    );
    row(
        "fs",
        "ext4 writeback's handle at the final submit",
        if version.stops_writeback_handle_before_final_submit() {
            "stopped before it"
        } else {
            "held across it"
        }
        .into(),
        format!("era {version} (4e7ea81db534, 3.11)"),
    );
    row(
        "mm",
        "dirtyable memory's reserve",
        if version.dirtyable_reserve_from_free_pages() {
            "off free pages only"
        } else {
            "off free + file pages, and min_free_kbytes"
        }
        .into(),
        format!("era {version} (a804552b9a15, 3.14)"),
    );
    if stack.vm.has_highmem() {
        row(
            "mm",
            "dirtyable memory",
            if stack.vm.highmem_is_dirtyable {
                "all of RAM (highmem_is_dirtyable)".into()
            } else {
                format!("lowmem only ({} MiB)", stack.vm.lowmem >> 20)
            },
            provenance.set_by("vm.lowmem", || "scenario".into()),
        );
    }
    rows
}

/// How `stack` mixes eras, one line per layer that runs another version's code than
/// `[stack.kernel] version`; empty when it does not.
pub fn mixed_eras(stack: &StackConfig) -> Vec<String> {
    let version = stack.kernel.version;
    let mut lines: Vec<String> = stack.block.mixed_era(&stack.kernel).into_iter().collect();
    if let Some(set) = stack.fs.ordered_delalloc {
        if set != version.files_new_delalloc_blocks_as_ordered_data() {
            lines.push(format!(
                "ext4's delayed allocation {} its blocks as ordered data (`[stack.fs] ordered_delalloc = {set}`), which Linux {version} does not",
                if set { "files" } else { "does not file" }
            ));
        }
    }
    if let Some(set) = stack.fs.dioread_nolock {
        if set != version.mounts_dioread_nolock_by_default() {
            lines.push(format!(
                "ext4 mounts with {} (`[stack.fs] dioread_nolock = {set}`), which Linux {version} does not by default",
                if set { "dioread_nolock" } else { "dioread_lock" }
            ));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    const APP: &str = "[[app]]\nname = \"a\"\n[app.workload.toy-io]\ninterval = \"20ms\"\n";

    fn parse(stack: &str) -> Result<super::super::Scenario, String> {
        let source = format!("name = \"e\"\nduration = \"1s\"\n{stack}\n{APP}");
        super::super::parse("e.toml", &source).map_err(|e| e.to_string())
    }

    fn value<'a>(rows: &'a [EraSwitch], layer: &str, switch: &str) -> &'a EraSwitch {
        rows.iter()
            .find(|r| r.layer == layer && r.switch == switch)
            .unwrap()
    }

    #[test]
    fn the_elevator_defaults_to_the_eras_and_a_missing_one_is_refused_naming_the_version() {
        let s = parse("[stack.kernel]\nversion = \"6.6\"\n").unwrap();
        assert_eq!(s.variants[0].stack.block.elevator, "mq-deadline");
        let s = parse("[stack.kernel]\nversion = \"4.19\"\n").unwrap();
        assert_eq!(s.variants[0].stack.block.elevator, "cfq");
        let error = parse("[stack.kernel]\nversion = \"6.1\"\n[stack.block]\nelevator = \"cfq\"\n")
            .unwrap_err();
        assert!(
            error.contains("e.toml:6")
                && error.contains("[stack.block] `elevator` `cfq` is not in Linux 6.1")
                && error.contains("its elevators: mq-deadline, kyber, bfq, none)")
                && error.contains("`cfq` is in Linux 3.0 to 4.19"),
            "{error}"
        );
        let error = parse("[stack.block]\nelevator = \"bfq\"\n").unwrap_err();
        assert!(
            error.contains("not in Linux 3.10 (its elevators: noop, deadline, cfq")
                && error.contains("4.19 and later"),
            "{error}"
        );
        let error = parse("[stack.kernel]\nversion = \"4.4\"\n[stack.block]\nelevator = \"mq-deadline\"\nwbt = true\n")
            .unwrap_err();
        assert!(error.contains("`elevator` `mq-deadline`"), "{error}");
    }

    #[test]
    fn bfq_on_a_gki_6_6_kernel_is_refused_naming_the_file_field_version_and_config() {
        let error = parse("[stack.kernel]\nversion = \"6.6\"\n[stack.block]\nelevator = \"bfq\"\n")
            .unwrap_err();
        assert!(
            error.contains("e.toml:6")
                && error.contains("[stack.block] `elevator` `bfq` is not built in Linux 6.6")
                && error.contains("config = \"android\"")
                && error.contains("gki_defconfig sets no CONFIG_IOSCHED_BFQ"),
            "{error}"
        );
        // The Pixel 8's 5.15 and a desktop-built 6.6 have it.
        assert!(parse("[stack]\nphone = \"pixel-8\"\n").is_ok());
        assert!(parse(
            "[stack.kernel]\nversion = \"6.6\"\nconfig = \"distro\"\n[stack.block]\nelevator = \"bfq\"\n"
        )
        .is_ok());
    }

    #[test]
    fn a_block_layer_of_another_era_is_allowed_when_the_scenario_says_so_and_reported() {
        let s = parse("[stack.block]\nelevator = \"bfq\"\nversion = \"mainline\"\n").unwrap();
        let stack = &s.variants[0].stack;
        assert_eq!(
            mixed_eras(stack),
            vec!["the block layer of Linux mainline (`[stack.block] version`) over Linux 3.10"]
        );
        let rows = era_switches(stack, &s.variants[0].provenance);
        assert_eq!(value(&rows, "block", "version").value, "mainline");
        assert_eq!(value(&rows, "block", "elevator").set_by, "scenario");
        assert!(mixed_eras(&parse("").unwrap().variants[0].stack).is_empty());
    }

    #[test]
    fn wbt_follows_the_version_and_the_kernel_config_unless_the_scenario_sets_it() {
        let wbt = |stack: &str| {
            let s = parse(stack).unwrap();
            let rows = era_switches(&s.variants[0].stack, &s.variants[0].provenance);
            let row = value(&rows, "block", "wbt").clone();
            (row.value, row.set_by)
        };
        // GKI: CONFIG_BLK_WBT_MQ is not set.
        let (on, by) = wbt("[stack.kernel]\nversion = \"6.6\"\n");
        assert_eq!(on, "off");
        assert!(by.contains("config android"), "{by}");
        assert_eq!(
            wbt("[stack.kernel]\nversion = \"6.6\"\nconfig = \"distro\"\n").0,
            "on (2000 us)"
        );
        assert_eq!(
            wbt("[stack.kernel]\nversion = \"mainline\"\n").0,
            "on (2000 us)"
        );
        let (on, by) =
            wbt("[stack.kernel]\nversion = \"mainline\"\n[stack.block]\nelevator = \"bfq\"\n");
        assert_eq!((on.as_str(), by.contains("bfq_init_queue")), ("off", true));
        assert_eq!(
            wbt("[stack.kernel]\nversion = \"6.1\"\n[stack.block]\nwbt = true\n"),
            ("on (2000 us)".into(), "scenario".into())
        );
        assert_eq!(wbt("").0, "off", "3.10's CFQ: a legacy queue");
    }

    #[test]
    fn a_phone_sets_the_kernel_version_and_validate_says_so() {
        let s = parse("[stack]\nphone = \"nexus-5\"\n").unwrap();
        let rows = era_switches(&s.variants[0].stack, &s.variants[0].provenance);
        let version = value(&rows, "kernel", "version");
        assert_eq!(
            (version.value.as_str(), version.set_by.as_str()),
            ("3.4", "phone `nexus-5`")
        );
        assert_eq!(value(&rows, "block", "elevator").set_by, "phone `nexus-5`");
        let s =
            parse("[stack]\nphone = \"nexus-5\"\n[stack.kernel]\nversion = \"3.10\"\n").unwrap();
        let rows = era_switches(&s.variants[0].stack, &s.variants[0].provenance);
        assert_eq!(value(&rows, "kernel", "version").set_by, "scenario");
    }

    #[test]
    fn ordered_delalloc_follows_the_era_and_an_override_that_departs_from_it_is_a_mixed_era() {
        const SWITCH: &str = "ordered_delalloc (delalloc blocks filed as ordered data)";
        for (version, filed) in [("3.4", "true"), ("3.10", "false"), ("6.6", "true")] {
            let s = parse(&format!("[stack.kernel]\nversion = \"{version}\"\n")).unwrap();
            let v = &s.variants[0];
            let rows = era_switches(&v.stack, &v.provenance);
            assert_eq!(value(&rows, "fs", SWITCH).value, filed, "{version}");
            assert!(
                value(&rows, "fs", SWITCH).set_by.starts_with("era"),
                "{version}"
            );
            assert!(mixed_eras(&v.stack).is_empty(), "{version}");
        }
        let s = parse("[stack.kernel]\nversion = \"6.6\"\n[stack.fs]\nordered_delalloc = false\n")
            .unwrap();
        let v = &s.variants[0];
        let rows = era_switches(&v.stack, &v.provenance);
        assert_eq!(value(&rows, "fs", SWITCH).value, "false");
        assert_eq!(value(&rows, "fs", SWITCH).set_by, "scenario");
        let mixed = mixed_eras(&v.stack);
        assert_eq!(mixed.len(), 1, "{mixed:?}");
        assert!(mixed[0].contains("Linux 6.6"), "{mixed:?}");
    }

    #[test]
    fn dioread_nolock_is_on_from_5_6_and_an_override_that_departs_from_it_is_a_mixed_era() {
        const SWITCH: &str = "dioread_nolock (writeback into unwritten extents)";
        for (version, on) in [("3.10", "false"), ("4.19", "false"), ("5.10", "true")] {
            let s = parse(&format!("[stack.kernel]\nversion = \"{version}\"\n")).unwrap();
            let v = &s.variants[0];
            let rows = era_switches(&v.stack, &v.provenance);
            assert_eq!(value(&rows, "fs", SWITCH).value, on, "{version}");
            assert!(mixed_eras(&v.stack).is_empty(), "{version}");
        }
        let s = parse("[stack.kernel]\nversion = \"6.6\"\n[stack.fs]\ndioread_nolock = false\n")
            .unwrap();
        let v = &s.variants[0];
        let rows = era_switches(&v.stack, &v.provenance);
        assert_eq!(value(&rows, "fs", SWITCH).value, "false");
        assert_eq!(value(&rows, "fs", SWITCH).set_by, "scenario");
        let mixed = mixed_eras(&v.stack);
        assert_eq!(mixed.len(), 1, "{mixed:?}");
        assert!(mixed[0].contains("dioread_lock"), "{mixed:?}");
    }
}
