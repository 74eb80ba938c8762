//! Real mode on this machine's kernel (issue 42): `mobistack real` leaves the machine as it
//! found it (sysctls, loop devices, mounts, trace instances) after a run that succeeds, one
//! that fails midway (a mount the kernel refuses, after loop device, sysfs and mkfs), and one
//! stopped by SIGINT; it refuses without root before changing anything.
//!
//! These tests need root, loop devices, mkfs.ext4 and tracefs (CI has them). Where they cannot
//! run they fail with the reason: they never pass without having run. They run one at a time
//! (real runs change machine-wide settings) and take about half a minute together.

mod common;

use common::mobistack;
use std::process::Command;
use std::sync::Mutex;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Fails with the reason when the machine cannot run real mode.
fn require_real_machine() {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc_geteuid() };
    assert_eq!(
        uid, 0,
        "real-mode tests need root (loop devices, mkfs, mount, sysctl, tracefs); uid is {uid}"
    );
    assert!(
        std::path::Path::new("/dev/loop-control").exists(),
        "real-mode tests need loop devices: no /dev/loop-control (modprobe loop)"
    );
    for tool in ["losetup", "mkfs.ext4", "mount"] {
        let found = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
            .iter()
            .any(|d| std::path::Path::new(d).join(tool).exists());
        assert!(
            found,
            "real-mode tests need `{tool}` (apt-get install util-linux e2fsprogs)"
        );
    }
}

extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}

/// What a real run may change, as text: the vm sysctls, the loop devices and mounts of real
/// runs, the trace instances, and whether tracefs is mounted.
fn machine_state() -> String {
    let mut state = String::new();
    for name in [
        "dirty_bytes",
        "dirty_background_bytes",
        "dirty_ratio",
        "dirty_background_ratio",
        "dirty_expire_centisecs",
        "dirty_writeback_centisecs",
    ] {
        let value = std::fs::read_to_string(format!("/proc/sys/vm/{name}")).unwrap();
        state.push_str(&format!("vm.{name} = {}", value));
    }
    let losetup = Command::new("losetup").arg("-a").output().unwrap();
    for line in String::from_utf8_lossy(&losetup.stdout).lines() {
        if line.contains("mobistack-real") {
            state.push_str(&format!("loop: {line}\n"));
        }
    }
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
    for line in mounts.lines() {
        if line.contains("mobistack-real") || line.starts_with("nodev /sys/kernel/tracing") {
            state.push_str(&format!("mount: {line}\n"));
        }
        if line.split_whitespace().nth(2) == Some("tracefs") {
            state.push_str(&format!("tracefs: {line}\n"));
        }
    }
    for dir in own_cgroup_dirs() {
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.starts_with("mobistack-real") {
                    state.push_str(&format!("cgroup: {}/{name}\n", dir.display()));
                }
            }
        }
    }
    if let Ok(entries) = std::fs::read_dir("/sys/kernel/tracing/instances") {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with("mobistack") {
                state.push_str(&format!("trace instance: {name}\n"));
            }
        }
    }
    state
}

/// This process's cgroup directory in every mounted hierarchy (where real runs make theirs).
fn own_cgroup_dirs() -> Vec<std::path::PathBuf> {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mut dirs = Vec::new();
    for line in mounts.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 4 || !fields[2].starts_with("cgroup") {
            continue;
        }
        for entry in own.lines() {
            let mut parts = entry.splitn(3, ':');
            let (_, controllers, path) = match (parts.next(), parts.next(), parts.next()) {
                (Some(a), Some(b), Some(c)) => (a, b, c),
                _ => continue,
            };
            let matches = if fields[2] == "cgroup2" {
                controllers.is_empty()
            } else {
                !controllers.is_empty()
                    && controllers
                        .split(',')
                        .all(|c| fields[3].split(',').any(|o| o == c))
            };
            if matches {
                dirs.push(std::path::Path::new(fields[1]).join(path.trim_start_matches('/')));
            }
        }
    }
    dirs
}

/// A scenario file in a fresh temporary directory of its own ([`common::temp_file`]). The
/// tests used to leave a directory per run, with a 175 MB copy of the binary.
fn scenario(name: &str, text: &str) -> (common::TestDir, String) {
    common::temp_file("real-test", name, &format!("{name}.toml"), text)
}

const SMALL: &str = r#"
name = "real-small"
seeds = [1]
duration = "20s"
end = "apps-done"

[stack.kernel]
version = "6.6"         # a blk-mq kernel, as this machine's: mq-deadline is not in 3.10

[stack.block]
elevator = "mq-deadline"
wbt_lat_usec = 4000

[stack.fs]
type = "ext4"
discard = false
commit = "5s"

[stack.vm]
ram = "4GiB"

[[app]]
name = "db"
[app.workload.sqlite]
database = "/data/db/t.db"
journal_mode = "delete"
setup = ["CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v TEXT)"]
statements = ["INSERT INTO t (v) VALUES ('{value}')"]
count = 20

[[app]]
name = "msg"
nice = 10
ioprio = "be:6"
[app.workload.ops]
count = 20
steps = [
  { op = "creat", path = "/data/msg/m{i}" },
  { op = "write", size = "4KiB" },
  { op = "fsync" },
  { op = "close" },
]

[[app]]
name = "dd"
[app.workload.seq-write]
path = "/data/big"
size = "64MiB"
io_size = "1MiB"

[[variant]]
name = "mq-deadline"

[[variant]]
name = "bfq-external"
[variant.stack.kernel]
config = "distro"       # Android's 6.6 config builds no BFQ; this machine's kernel does
[variant.stack.block]
elevator = "bfq"
[variant.stack.fs]
journal = "external"
[variant.stack.fs.journal_device]
profile = "emmc-5.0"
capacity = "512MiB"
"#;

#[test]
fn a_real_run_reports_results_and_restores_the_machine() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    require_real_machine();
    let before = machine_state();
    let (_dir, path) = scenario("small", SMALL);
    let dir = std::path::Path::new(&path).parent().unwrap();
    let out = dir.join("real.json").display().to_string();
    let csv = dir.join("csv").display().to_string();
    let blktrace = dir.join("real.blk").display().to_string();
    let (status, stdout, stderr) = mobistack(&[
        "real",
        &path,
        "--image",
        "512MiB",
        "--json",
        "--out",
        &out,
        "--csv",
        &csv,
        "--blktrace",
        &blktrace,
    ]);
    assert_eq!(status, 0, "{stderr}");
    assert_eq!(machine_state(), before, "the machine was not restored");
    // The results schema of simulated runs: `compare` and `report` read it unchanged.
    let (status, table, stderr) = mobistack(&[
        "compare",
        &format!("{out}:mq-deadline"),
        &format!("{out}:bfq-external"),
    ]);
    assert_eq!(status, 0, "{stderr}");
    assert!(table.contains("transaction"), "{table}");
    let html = dir.join("real.html").display().to_string();
    let (status, _, stderr) = mobistack(&["report", &out, "-o", &html]);
    assert_eq!(status, 0, "{stderr}");
    assert!(std::fs::read_to_string(dir.join("csv/latency.csv"))
        .unwrap()
        .contains(",db,transaction,"));
    // blkparse text per variant: the commit blocks' flushes are there.
    let trace = std::fs::read_to_string(format!("{blktrace}.mq-deadline")).unwrap();
    assert!(
        trace.lines().any(|l| l.contains(" FWFSM ")),
        "{}",
        &trace[..trace.len().min(2000)]
    );
    let results: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(results["schema"], "mobistack.results");
    let runs = results["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for run in runs {
        let db = &run["apps"]["db"];
        assert_eq!(db["ops"]["transaction"]["count"], 20, "{run}");
        assert_eq!(db["counters"]["real.txn.count"], 20);
        // Each DELETE-mode transaction syncs the journal and the database: at least one
        // cache flush each (jbd2's commit block is REQ_PREFLUSH | REQ_FUA).
        let flushes = db["counters"]["real.txn.flush_requests"].as_u64().unwrap();
        assert!(flushes >= 20, "{flushes} flushes in 20 transactions: {run}");
        assert_eq!(run["apps"]["msg"]["ops"]["fsync"]["count"], 20);
        assert_eq!(run["apps"]["dd"]["counters"]["bytes"], 64 << 20);
        assert_eq!(run["counters"]["real.trace.lost"], 0);
    }
}

#[test]
fn a_run_that_fails_midway_restores_the_machine() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    require_real_machine();
    let before = machine_state();
    // The loop device is attached, its queue set and the file system made before the mount,
    // which the kernel refuses: "can't mount with journal_async_commit in data=ordered mode"
    // (fs/ext4/super.c `ext4_check_opt_consistency`).
    // The model accepts the option on 3.10 (the Galaxy S5 mounted it), with today's block
    // layer over it (mq-deadline): a stack of mixed eras, which is fine for this purpose.
    let text = SMALL
        .replace(
            "commit = \"5s\"",
            "commit = \"5s\"\njournal_async_commit = true",
        )
        .replace("version = \"6.6\"", "version = \"3.10\"")
        .replace(
            "elevator = \"mq-deadline\"",
            "elevator = \"mq-deadline\"\nversion = \"mainline\"",
        );
    let (_dir, path) = scenario("fails", &text);
    let (status, _, stderr) = mobistack(&["real", &path, "--image", "512MiB"]);
    assert_eq!(status, 1, "{stderr}");
    assert!(stderr.contains("mounting with"), "{stderr}");
    assert_eq!(machine_state(), before, "the machine was not restored");
}

#[test]
fn sigint_stops_the_run_and_restores_the_machine() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    require_real_machine();
    let before = machine_state();
    let text = SMALL
        .replace("end = \"apps-done\"", "")
        .replace("duration = \"20s\"", "duration = \"60s\"")
        .replace("count = 20\nsteps", "think = \"10ms\"\nsteps");
    let (_dir, path) = scenario("sigint", &text);
    let child = Command::new(env!("CARGO_BIN_EXE_mobistack"))
        .args([
            "real",
            &path,
            "--image",
            "512MiB",
            "--variant",
            "mq-deadline",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(4));
    let changed = machine_state();
    assert_ne!(
        changed, before,
        "the run had not set the machine up after 4 s"
    );
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert_eq!(machine_state(), before, "the machine was not restored");
}

#[test]
fn without_root_it_refuses_before_changing_anything() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    require_real_machine();
    let before = machine_state();
    let (_dir, path) = scenario("nonroot", SMALL);
    // The binary and the scenario where an unprivileged user can reach them (the checkout may
    // be under a home directory only root can enter).
    let dir = std::path::Path::new(&path).parent().unwrap();
    let binary = dir.join("mobistack");
    std::fs::copy(env!("CARGO_BIN_EXE_mobistack"), &binary).unwrap();
    for (file, mode) in [
        (dir, 0o755),
        (binary.as_path(), 0o755),
        (std::path::Path::new(&path), 0o644),
    ] {
        std::fs::set_permissions(file, std::os::unix::fs::PermissionsExt::from_mode(mode)).unwrap();
    }
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&binary)
        .args(["real", &path])
        .output()
        .expect("setpriv (util-linux) runs");
    // The copy is 180 MB: every test run left one in /tmp.
    let _ = std::fs::remove_file(&binary);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("needs root"), "{stderr}");
    assert_eq!(machine_state(), before);
}

/// fio jobs (O_DIRECT random reads at depth 4 through libaio's submitters, a buffered
/// sequential write) and a `file-read` app run in real mode (before: "not supported in real
/// mode yet: fio"), each I/O an operation as the simulation records it, and the machine is put
/// back.
#[test]
fn fio_jobs_and_file_reads_run_for_real() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    require_real_machine();
    let before = machine_state();
    let (_dir, path) = scenario(
        "fio",
        r#"
name = "real-fio"
seeds = [1]
duration = "30s"
end = "apps-done"

[stack.kernel]
version = "6.6"

[stack.block]
elevator = "none"

[stack.fs]
type = "ext4"
discard = false

[stack.vm]
ram = "4GiB"

[[app]]
name = "rand"
[app.workload.fio]
direct = 1
rw = "randread"
bs = "4k"
size = "16m"
ioengine = "libaio"
iodepth = 4

[[app]]
name = "seqw"
[app.workload.fio]
rw = "write"
bs = "64k"
size = "8m"

[[app]]
name = "gallery"
[app.workload.file-read]
path = "/data/media/g.db"
file_size = "8MiB"
io_size = "4KiB"
pattern = "random"
count = 50
"#,
    );
    let (status, stdout, stderr) = mobistack(&["real", &path, "--image", "512MiB", "--json"]);
    assert_eq!(status, 0, "{stderr}");
    assert_eq!(machine_state(), before, "the machine was not restored");
    let results: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let run = &results["runs"][0];
    let apps = &run["apps"];
    // Not time-based: a job issues `size` / `bs` I/Os (src/workload/fio/engine.rs `next_io`).
    assert_eq!(apps["rand"]["ops"]["read"]["count"], 4096, "{run}");
    assert_eq!(apps["rand"]["counters"]["bytes"], 16 << 20);
    assert_eq!(apps["seqw"]["ops"]["write"]["count"], 128, "{run}");
    assert_eq!(apps["gallery"]["ops"]["read"]["count"], 50, "{run}");
    assert!(apps["gallery"]["ops"]["open"].is_object(), "{run}");
    // O_DIRECT reads bypass the page cache: each is a read request on the device.
    let reads = run["counters"]["real.block.read_requests"]
        .as_u64()
        .unwrap();
    assert!(reads >= 4096, "{reads} read requests: {run}");
}

/// The validation suite's scenarios (scenarios/validation, run by its run.sh and compared in
/// docs/validation.md) are accepted by the model as they stand, and model the real side's kernel:
/// this machine's distribution 6.18 as `mainline` with a distribution's config (wbt on, BFQ
/// built). Two of them were refused (a `bfq` variant at 6.6 with Android's config) from the
/// elevators-per-config change until the suite's next run. Needs no root: only `validate`.
#[test]
fn every_validation_scenario_validates_as_the_real_machines_mainline_distro_kernel() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/validation");
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .expect("scenarios/validation exists")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 7, "the suite's seven scenarios: {files:?}");
    for file in files {
        let path = file.display().to_string();
        let (code, out, err) = mobistack(&["validate", &path]);
        assert_eq!(code, 0, "{path}: {err}");
        assert!(
            out.contains("kernel version: mainline"),
            "{path}: the real side's kernel is 6.18: {out}"
        );
        assert!(
            out.contains("era mainline with config distro: CONFIG_BLK_WBT_MQ=y"),
            "{path}: the real side's kernel is a distribution's build (wbt on): {out}"
        );
    }
}

/// filebench in real mode (src/real/filebench.rs), in a memory cgroup of the scenario's RAM and
/// an I/O cgroup with a BFQ weight (src/real/cgroup.rs), on this machine's kernel (a
/// distribution's 6.18 here: cgroup v1 `memory` and `blkio` beside an empty unified
/// hierarchy): varmail's flowops run on real files, the page cache the run charges is bounded by
/// the cgroup, the app's thread joins its cgroup, and the machine is restored (cgroups removed).
#[test]
fn filebench_runs_for_real_in_the_scenarios_memory_and_io_cgroups() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    require_real_machine();
    let before = machine_state();
    let (_dir, path) = scenario(
        "filebench",
        r#"
name = "real-filebench"
seeds = [1]
duration = "10s"

[stack.kernel]
version = "mainline"
config = "distro"

[stack.block]
elevator = "bfq"

[stack.fs]
type = "ext4"
discard = false

[stack.vm]
ram = "1GiB"

[stack.cgroup.mail]
bfq_weight = 50

[[app]]
name = "mail"
cgroup = "mail"
[app.workload.filebench]
file = "varmail"
runtime = "2s"
set = { dir = "/data", nthreads = 4 }
"#,
    );
    let (status, stdout, stderr) = mobistack(&["real", &path, "--image", "512MiB", "--json"]);
    assert_eq!(status, 0, "{stderr}");
    assert_eq!(machine_state(), before, "the machine was not restored");
    let results: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let run = &results["runs"][0];
    let mail = &run["apps"]["mail"];
    assert!(mail["failure"].is_null(), "{run}");
    // varmail's flowops, named as the simulation names them (workloads/filebench/varmail.f).
    for op in [
        "deletefile1",
        "createfile2",
        "appendfilerand2",
        "fsyncfile2",
        "readfile4",
    ] {
        assert!(
            mail["ops"][op]["count"].as_u64().unwrap_or(0) > 0,
            "no `{op}`: {run}"
        );
    }
    assert!(
        mail["counters"]["filebench.ops"].as_u64().unwrap() > 0,
        "{run}"
    );
    assert_eq!(mail["counters"]["real.cgroup.joined"], 1, "{run}");
    // The memory cgroup had the scenario's RAM and held what the run charged.
    assert_eq!(
        run["counters"]["real.memcg.limit_bytes"],
        1u64 << 30,
        "{run}"
    );
    let peak = run["counters"]["real.memcg.peak_bytes"].as_u64().unwrap();
    assert!(peak > 0 && peak <= 1 << 30, "{peak}");
}
