//! The cgroups of a real run: the page cache bounded by a memory cgroup of the scenario's RAM,
//! and the apps' I/O cgroups with the weights of `[stack.cgroup.<name>]`.
//!
//! Where: every cgroup the run makes is a child of the cgroup this process is already in (per
//! hierarchy, from /proc/self/cgroup), named `mobistack-real-<tag>`, so a run never escapes the
//! limits it was started under and never touches a cgroup it did not make. Both cgroup
//! versions are handled, as the kernel offers them (a hybrid machine has v1 `memory` and
//! `blkio` hierarchies beside an empty unified one):
//!
//! - memory: v1 `memory.limit_in_bytes`, v2 `memory.max` (mm/memcontrol.c; the page cache a
//!   task faults in is charged to its memcg, `mem_cgroup_charge`, and reclaimed within it when
//!   the limit is reached, `try_charge` -> `try_to_free_mem_cgroup_pages`). The whole process
//!   moves in (`cgroup.procs`) after the files that exist before the run were laid out and
//!   dropped from the cache, and moves back before the cgroup is removed; pages it charged are
//!   reparented by the kernel on removal. On v2 the controller must be enabled in the parent's
//!   `cgroup.subtree_control`: the run enables it if it can (it cannot where the parent holds
//!   processes other than the root's, "no internal processes") and disables it afterwards.
//!   Simplified: with v1 (no cgroup writeback) the dirty limits stay the global ones, which
//!   the run sets from the scenario's RAM; with v2 the kernel also applies its per-memcg dirty
//!   limits (`mdtc`, balance_dirty_pages), which follow the same RAM.
//! - I/O: each `[stack.cgroup.<name>]` an app names is a cgroup with `weight` as `io.weight`
//!   (v2; blk-iocost, effective only where `io.cost.qos` is enabled) or `blkio.weight` (v1,
//!   where a legacy controller offers it), `bfq_weight` as `io.bfq.weight` / `blkio.bfq.weight`
//!   (block/bfq-cgroup.c, read by BFQ's group scheduling) and `prio_class` as `io.prio.class` /
//!   `blkio.prio.class` (block/blk-ioprio.c). Apps are threads of this process; cgroup v1 places
//!   threads (`tasks`), so each app's thread joins its cgroup and the threads it starts inherit
//!   it. cgroup v2's `io` is a domain controller, which places whole processes: apps in
//!   different I/O cgroups are refused there. A file the kernel lacks (no BFQ group
//!   scheduling, no blk-ioprio, no iocost) is refused with its name.

use super::machine::read_trimmed;
use std::path::{Path, PathBuf};

/// The cgroup version a controller is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

/// Where a controller is for this process: its version and this process's cgroup directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub version: Version,
    /// This process's cgroup in that hierarchy (`<mount>/<path from /proc/self/cgroup>`).
    pub own: PathBuf,
}

/// Finds `controller` (`memory`, or `io` / its v1 name `blkio`) from the text of /proc/mounts
/// and /proc/self/cgroup; a v1 hierarchy wins over the unified one (the kernel binds a
/// controller to one of them).
pub fn locate_in(
    controller: &str,
    mounts: &str,
    self_cgroup: &str,
    v2_controllers: &str,
) -> Option<Place> {
    let v1_name = if controller == "io" {
        "blkio"
    } else {
        controller
    };
    for line in mounts.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 4 || fields[2] != "cgroup" {
            continue;
        }
        if !fields[3].split(',').any(|o| o == v1_name) {
            continue;
        }
        let path = self_cgroup.lines().find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            controllers
                .split(',')
                .any(|c| c == v1_name)
                .then(|| path.to_string())
        })?;
        return Some(Place {
            version: Version::V1,
            own: join(fields[1], &path),
        });
    }
    let v2_name = if controller == "blkio" {
        "io"
    } else {
        controller
    };
    if !v2_controllers.split_whitespace().any(|c| c == v2_name) {
        return None;
    }
    let mount = mounts.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        (fields.len() >= 3 && fields[2] == "cgroup2").then(|| fields[1].to_string())
    })?;
    let path = self_cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::").map(str::to_string))?;
    Some(Place {
        version: Version::V2,
        own: join(&mount, &path),
    })
}

fn join(mount: &str, path: &str) -> PathBuf {
    Path::new(mount).join(path.trim_start_matches('/'))
}

/// [`locate_in`] on this machine.
pub fn locate(controller: &str) -> Option<Place> {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let v2 = mounts
        .lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields.len() >= 3 && fields[2] == "cgroup2").then(|| fields[1].to_string())
        })
        .and_then(|mount| {
            std::fs::read_to_string(Path::new(&mount).join("cgroup.controllers")).ok()
        })
        .unwrap_or_default();
    locate_in(controller, &mounts, &own, &v2)
}

/// The machine's memory (`MemTotal` of /proc/meminfo), in bytes.
pub fn machine_ram() -> Option<u64> {
    let text = read_trimmed("/proc/meminfo").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
        .map(|kib| kib * 1024)
}

/// The file that bounds a memory cgroup.
pub fn memory_limit_file(version: Version) -> &'static str {
    match version {
        Version::V1 => "memory.limit_in_bytes",
        Version::V2 => "memory.max",
    }
}

/// The file where a thread joins a cgroup: v1 places threads (`tasks`); v2 only whole
/// processes outside threaded subtrees (`cgroup.procs`).
pub fn thread_file(version: Version) -> &'static str {
    match version {
        Version::V1 => "tasks",
        Version::V2 => "cgroup.threads",
    }
}

/// The settings of one I/O cgroup: (file, value) for each the scenario sets.
pub fn io_settings(version: Version, config: &crate::task::CgroupConfig) -> Vec<(String, String)> {
    let prefix = match version {
        Version::V1 => "blkio",
        Version::V2 => "io",
    };
    let mut settings = Vec::new();
    if let Some(weight) = config.weight {
        // v2's io.weight takes "default N"; v1's blkio.weight a bare number.
        let value = match version {
            Version::V1 => weight.to_string(),
            Version::V2 => format!("default {weight}"),
        };
        settings.push((format!("{prefix}.weight"), value));
    }
    if let Some(weight) = config.bfq_weight {
        settings.push((format!("{prefix}.bfq.weight"), weight.to_string()));
    }
    if let Some(policy) = config.prio_class {
        let value = serde_json::to_value(policy)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        settings.push((format!("{prefix}.prio.class"), value));
    }
    settings
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID_MOUNTS: &str = "tmpfs /sys/fs/cgroup tmpfs rw 0 0\n\
        cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0\n\
        cgroup /sys/fs/cgroup/blkio cgroup rw,relatime,blkio 0 0\n\
        cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n";
    const HYBRID_SELF: &str = "7:blkio:/\n4:memory:/jobs/a1\n0::/\n";

    #[test]
    fn finds_v1_controllers_of_a_hybrid_machine_under_the_process_own_cgroup() {
        let memory = locate_in("memory", HYBRID_MOUNTS, HYBRID_SELF, "hugetlb").unwrap();
        assert_eq!(memory.version, Version::V1);
        assert_eq!(memory.own, PathBuf::from("/sys/fs/cgroup/memory/jobs/a1"));
        let io = locate_in("io", HYBRID_MOUNTS, HYBRID_SELF, "hugetlb").unwrap();
        assert_eq!(io.version, Version::V1);
        assert_eq!(io.own, PathBuf::from("/sys/fs/cgroup/blkio"));
    }

    #[test]
    fn finds_the_unified_hierarchy_when_it_has_the_controller() {
        let mounts = "cgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate 0 0\n";
        let own = "0::/user.slice/session-1.scope\n";
        let io = locate_in("io", mounts, own, "cpuset cpu io memory pids").unwrap();
        assert_eq!(io.version, Version::V2);
        assert_eq!(
            io.own,
            PathBuf::from("/sys/fs/cgroup/user.slice/session-1.scope")
        );
        assert_eq!(locate_in("io", mounts, own, "cpu memory"), None);
    }

    #[test]
    fn writes_each_weight_in_the_file_and_format_of_its_version() {
        let config = crate::task::CgroupConfig {
            weight: Some(200),
            bfq_weight: Some(300),
            prio_class: Some(crate::task::PrioPolicy::RestrictToBe),
        };
        assert_eq!(
            io_settings(Version::V2, &config),
            vec![
                ("io.weight".to_string(), "default 200".to_string()),
                ("io.bfq.weight".to_string(), "300".to_string()),
                ("io.prio.class".to_string(), "restrict-to-be".to_string()),
            ]
        );
        assert_eq!(io_settings(Version::V1, &config)[1].0, "blkio.bfq.weight");
    }
}
