//! Setting the machine up for a real run, and putting it back.
//!
//! [`Machine`] is the guard: every change it makes pushes its undo step first-to-last, and
//! [`Machine::restore`] (also its `Drop`, so an error, a panic or Ctrl-C restores too) runs them
//! last-to-first: trace instance removed, the process moved back out of the run's memory
//! cgroup, the run's cgroups removed, sysctls back, files deleted (which drops their dirty
//! pages, so unmounting does not write gigabytes back), unmount, sysfs back, loop devices
//! detached, image files deleted, tracefs unmounted if this run mounted it.
//!
//! [`preflight`] checks everything that can be checked before changing anything: root, the
//! tools, loop devices, the scheduler, the file system kind, free space, tracefs. A refusal
//! there leaves the machine untouched.

use super::RealError;
use crate::scenario::Variant;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the run's file system lives.
#[derive(Debug, Clone)]
pub enum Target {
    /// An image file of this many bytes in `dir`, on a loop device with direct I/O.
    Image { size: u64, dir: PathBuf },
    /// An existing block device, formatted (its contents are lost).
    Device(PathBuf),
}

/// One block device of the run (the file system's, or the external journal's).
#[derive(Debug, Clone)]
pub struct BlockDev {
    /// `/dev/loop3`.
    pub path: PathBuf,
    /// `loop3` (the name under /sys/block).
    pub name: String,
    pub major: u32,
    pub minor: u32,
}

impl BlockDev {
    fn of(path: &Path) -> Result<BlockDev, RealError> {
        let name = std::fs::canonicalize(path)
            .unwrap_or_else(|_| path.to_path_buf())
            .file_name()
            .and_then(|n| n.to_str())
            .map(str::to_string)
            .ok_or_else(|| RealError::new(format!("{}: not a device path", path.display())))?;
        let dev = read_trimmed(&format!("/sys/class/block/{name}/dev"))?;
        let (major, minor) = dev
            .split_once(':')
            .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
            .ok_or_else(|| RealError::new(format!("/sys/class/block/{name}/dev: `{dev}`")))?;
        Ok(BlockDev {
            path: path.to_path_buf(),
            name,
            major,
            minor,
        })
    }

    /// The kernel's `dev_t` (`MKDEV`: 20 minor bits), as the block trace events' `dev` holds it.
    pub fn dev_t(&self) -> u32 {
        crate::block::blktrace::dev_t(self.major, self.minor)
    }

    /// `/sys/block/<name>/queue/<attr>`: the queue of a whole disk (a partition's queue is its
    /// disk's).
    fn queue_attr(&self, attr: &str) -> String {
        let block = format!("/sys/class/block/{}", self.name);
        let disk = if Path::new(&format!("{block}/partition")).exists() {
            std::fs::canonicalize(&block)
                .ok()
                .and_then(|p| p.parent().map(|d| d.to_path_buf()))
                .map_or(block.clone(), |d| d.display().to_string())
        } else {
            block
        };
        format!("{disk}/queue/{attr}")
    }
}

/// One undo step.
#[derive(Debug)]
enum Undo {
    RemoveFile(PathBuf),
    RemoveDir(PathBuf),
    Detach(PathBuf),
    Unmount(PathBuf),
    /// Write the old value back.
    Write {
        path: String,
        value: String,
    },
    /// A dirty limit: `vm.dirty_bytes` / `vm.dirty_ratio` are one setting (writing one zeroes
    /// the other, mm/page-writeback.c `dirty_bytes_handler`): the one that was set goes back.
    DirtyLimit {
        bytes_path: String,
        ratio_path: String,
        bytes: String,
        ratio: String,
    },
    RemoveTraceInstance(PathBuf),
    UnmountTracefs,
    /// A cgroup the run made (empty once its tasks moved back or ended).
    RemoveCgroup(PathBuf),
}

impl Undo {
    fn apply(&self) -> Result<(), String> {
        match self {
            Undo::RemoveFile(path) => std::fs::remove_file(path)
                .or_else(ignore_missing)
                .map_err(|e| format!("rm {}: {e}", path.display())),
            Undo::RemoveDir(path) => std::fs::remove_dir(path)
                .or_else(ignore_missing)
                .map_err(|e| format!("rmdir {}: {e}", path.display())),
            Undo::Detach(dev) => run("losetup", &["-d", &dev.display().to_string()]).map(|_| ()),
            Undo::Unmount(dir) => unmount(dir),
            Undo::Write { path, value } => write_value(path, value),
            Undo::DirtyLimit {
                bytes_path,
                ratio_path,
                bytes,
                ratio,
            } => {
                if bytes.trim() != "0" {
                    write_value(bytes_path, bytes)
                } else {
                    write_value(ratio_path, ratio)
                }
            }
            Undo::RemoveTraceInstance(dir) => {
                // Events off first: an instance with enabled events can still be removed, but
                // this keeps the kernel from tracing into a buffer that is going away.
                let _ = write_value(&format!("{}/tracing_on", dir.display()), "0");
                std::fs::remove_dir(dir)
                    .or_else(ignore_missing)
                    .map_err(|e| format!("rmdir {}: {e}", dir.display()))
            }
            Undo::UnmountTracefs => run("umount", &[super::trace::TRACEFS]).map(|_| ()),
            Undo::RemoveCgroup(dir) => remove_cgroup(dir),
        }
    }
}

fn ignore_missing(e: std::io::Error) -> std::io::Result<()> {
    if e.kind() == std::io::ErrorKind::NotFound {
        Ok(())
    } else {
        Err(e)
    }
}

/// Removes a cgroup directory, retrying while busy: an app's thread that just ended may not
/// have left its cgroup yet (`cgroup_exit` runs late in the task's exit).
fn remove_cgroup(dir: &Path) -> Result<(), String> {
    let mut last = String::new();
    for _ in 0..50 {
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => last = format!("rmdir {}: {e}", dir.display()),
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    Err(last)
}

/// Unmounts `dir` after deleting what the run wrote in it (deleting drops the dirty pages, so
/// the unmount does not wait for gigabytes of writeback). Retries while busy (a thread of a
/// stopped app may still be closing its file).
fn unmount(dir: &Path) -> Result<(), String> {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            let _ = if path.is_dir() && !path.is_symlink() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
        }
    }
    let target = dir.display().to_string();
    let mut last = String::new();
    for _ in 0..50 {
        match run("umount", &[&target]) {
            Ok(_) => return Ok(()),
            Err(e) => last = e,
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    Err(last)
}

/// Runs a command; its stderr is the error.
pub fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{program}: cannot run: {e}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!(
            "`{program} {}` failed ({}): {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

pub(super) fn read_trimmed(path: &str) -> Result<String, RealError> {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .map_err(|e| RealError::new(format!("cannot read {path}: {e}")))
}

fn write_value(path: &str, value: &str) -> Result<(), String> {
    std::fs::write(path, value).map_err(|e| format!("cannot write `{value}` to {path}: {e}"))
}

/// A program in PATH (or the sbin directories, which a non-login root shell may lack).
pub fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"])
        .map(|dir| Path::new(dir).join(name))
        .find(|p| p.is_file());
    found
}

/// The kernel's name of the scenario's elevator, or why there is none: `noop` is blk-mq's
/// `none`, `deadline` is mq-deadline's alias (block/mq-deadline.c `.elevator_alias`); the legacy
/// `cfq` is gone since 5.0 (f382fb0bcef4 "block: remove legacy IO schedulers").
pub fn kernel_elevator(name: &str) -> Result<&str, String> {
    match name {
        "noop" | "none" => Ok("none"),
        "deadline" | "mq-deadline" => Ok("mq-deadline"),
        "bfq" | "kyber" => Ok(name),
        "cfq" => Err("elevator `cfq` (the default of [stack.block]) does not exist on blk-mq kernels \
                      (removed in 5.0): set [stack.block] elevator to none, mq-deadline, kyber or bfq"
            .into()),
        other => Err(format!(
            "elevator `{other}` is a model of this project with no kernel counterpart"
        )),
    }
}

/// The schedulers the kernel offers loop devices (`/sys/block/loopN/queue/scheduler` of any
/// loop device; elevators built as modules load on first use and may be missing here).
fn available_schedulers() -> Option<Vec<String>> {
    let dir = std::fs::read_dir("/sys/block").ok()?;
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with("loop") {
            continue;
        }
        if let Ok(text) = std::fs::read_to_string(entry.path().join("queue/scheduler")) {
            return Some(
                text.split_whitespace()
                    .map(|s| s.trim_matches(|c| c == '[' || c == ']').to_string())
                    .collect(),
            );
        }
    }
    None
}

/// Everything that can be checked before the machine is changed.
pub fn preflight(variant: &Variant, target: &Target) -> Result<(), RealError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(RealError::new(
            "real mode needs root (loop devices, mkfs, mount, sysctl, tracefs): run it with sudo",
        ));
    }
    for tool in ["losetup", "mkfs.ext4", "mke2fs", "mount", "umount"] {
        if find_program(tool).is_none() {
            return Err(RealError::new(format!(
                "`{tool}` is not installed (Debian: apt-get install util-linux e2fsprogs)"
            )));
        }
    }
    let stack = &variant.stack;
    super::check_supported_stack(stack).map_err(RealError::new)?;
    let elevator = kernel_elevator(&stack.block.elevator).map_err(RealError::new)?;
    if let Some(available) = available_schedulers() {
        if !available.iter().any(|s| s == elevator) {
            // bfq and kyber may be modules, loaded by the first write of their name.
            let module = Path::new("/sys/module").join(elevator.replace('-', "_"));
            if elevator == "mq-deadline" || elevator == "none" || !module.exists() {
                let loadable = find_program("modprobe").is_some()
                    && run("modprobe", &["-n", &format!("{elevator}-iosched")]).is_ok()
                    || run("modprobe", &["-n", elevator]).is_ok();
                if !loadable {
                    return Err(RealError::new(format!(
                        "scheduler `{elevator}` is not available on this kernel (loop devices offer: {})",
                        available.join(" ")
                    )));
                }
            }
        }
    }
    preflight_cgroups(stack)?;
    if !Path::new(super::trace::TRACEFS).join("events").exists() {
        let filesystems = std::fs::read_to_string("/proc/filesystems").unwrap_or_default();
        if !filesystems.contains("tracefs") {
            return Err(RealError::new(
                "the kernel has no tracefs (CONFIG_FTRACE): block events cannot be recorded",
            ));
        }
    }
    match target {
        Target::Image { size, dir } => {
            if !Path::new("/dev/loop-control").exists() {
                return Err(RealError::new(
                    "no /dev/loop-control: the kernel has no loop devices (modprobe loop)",
                ));
            }
            let devices = if stack.fs.journal == crate::fs::ext4::JournalLocation::External {
                2
            } else {
                1
            };
            let needed = size
                + if devices == 2 {
                    journal_image_size(stack)
                } else {
                    0
                };
            let free = free_bytes(dir)?;
            if free < needed + (1 << 30) {
                return Err(RealError::new(format!(
                    "{} has {} MiB free; the image needs {} MiB and 1 GiB is kept free",
                    dir.display(),
                    free >> 20,
                    needed >> 20
                )));
            }
        }
        Target::Device(path) => {
            let dev = BlockDev::of(path)?;
            let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
            if mounts
                .lines()
                .any(|l| l.split_whitespace().next() == Some(&path.display().to_string()))
            {
                return Err(RealError::new(format!(
                    "{} is mounted: real mode formats the device it is given",
                    path.display()
                )));
            }
            if stack.fs.journal == crate::fs::ext4::JournalLocation::External {
                return Err(RealError::new(format!(
                    "an external journal needs a second device; with --device {} use --image instead",
                    dev.path.display()
                )));
            }
        }
    }
    Ok(())
}

/// Bytes free for an unprivileged file in `dir` (statvfs).
fn free_bytes(dir: &Path) -> Result<u64, RealError> {
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|_| RealError::new(format!("{}: path has a NUL byte", dir.display())))?;
    // SAFETY: `c` is a valid C string and `stat` a valid out-pointer for statvfs.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut stat) } != 0 {
        return Err(RealError::new(format!(
            "{}: {}",
            dir.display(),
            std::io::Error::last_os_error()
        )));
    }
    Ok(stat.f_bavail as u64 * stat.f_frsize as u64)
}

/// The external journal device's size: the journal's size (default 128 MiB, mke2fs's table
/// from 4 GiB up, `ext2fs_default_journal_size`) plus a superblock's room.
fn journal_image_size(stack: &crate::scenario::StackConfig) -> u64 {
    stack.fs.journal_size.unwrap_or(128 << 20) + (4 << 20)
}

/// The guard: the changes made, undone on [`Machine::restore`] or drop.
pub struct Machine {
    undo: Vec<Undo>,
    /// Where the file system is mounted.
    pub mount_dir: PathBuf,
    /// The file system's device, and the external journal's.
    pub devices: Vec<BlockDev>,
    /// What the set-up did, for the report.
    pub log: Vec<String>,
    /// The memory cgroup bounding the run's page cache, and its hierarchy's version (None
    /// when the scenario's RAM is not smaller than the machine's).
    memory_cgroup: Option<(PathBuf, super::cgroup::Version)>,
    /// The file each `[stack.cgroup.<name>]`'s thread joins through (`tasks`), by name.
    pub io_cgroups: std::collections::BTreeMap<String, PathBuf>,
}

impl Machine {
    fn new() -> Machine {
        Machine {
            undo: Vec::new(),
            mount_dir: PathBuf::new(),
            devices: Vec::new(),
            log: Vec::new(),
            memory_cgroup: None,
            io_cgroups: std::collections::BTreeMap::new(),
        }
    }

    /// Sets up the machine for `variant`: devices, file system, mount, queue and sysctls. On
    /// error the changes made so far are undone before it returns.
    pub fn set_up(variant: &Variant, target: &Target, tag: &str) -> Result<Machine, RealError> {
        let mut machine = Machine::new();
        let stack = &variant.stack;
        let work = match target {
            Target::Image { dir, .. } => dir.join(format!("mobistack-real-{tag}")),
            Target::Device(_) => std::env::temp_dir().join(format!("mobistack-real-{tag}")),
        };
        machine.make_dir(&work)?;
        let main = match target {
            Target::Image { size, .. } => machine.attach_image(&work.join("fs.img"), *size)?,
            Target::Device(path) => BlockDev::of(path)?,
        };
        machine.devices.push(main.clone());
        let journal = if stack.fs.journal == crate::fs::ext4::JournalLocation::External {
            let dev = machine.attach_image(&work.join("journal.img"), journal_image_size(stack))?;
            machine.devices.push(dev.clone());
            Some(dev)
        } else {
            None
        };
        for dev in machine.devices.clone() {
            machine.set_queue(&dev, stack)?;
        }
        machine.make_fs(&main, journal.as_ref(), stack)?;
        let mount_dir = work.join("mnt");
        machine.make_dir(&mount_dir)?;
        machine.mount(&main, &mount_dir, stack)?;
        machine.mount_dir = mount_dir;
        machine.set_sysctls(stack)?;
        machine.make_memory_cgroup(stack.vm.ram, tag)?;
        machine.make_io_cgroups(stack, tag)?;
        Ok(machine)
    }

    /// A bare loop device with direct I/O over an image of `size` bytes in `dir`, its queue
    /// under `none` (what `device fit --measure` probes, src/real/fit.rs). Needs root and
    /// loop devices; undone like a run's set-up.
    pub fn bare_loop(dir: &Path, size: u64, tag: &str) -> Result<Machine, RealError> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err(RealError::new(
                "measuring a loop device needs root (losetup): run it with sudo",
            ));
        }
        if find_program("losetup").is_none() || !Path::new("/dev/loop-control").exists() {
            return Err(RealError::new(
                "no loop devices: `losetup` (util-linux) and /dev/loop-control are needed",
            ));
        }
        let free = free_bytes(dir)?;
        if free < size + (1 << 30) {
            return Err(RealError::new(format!(
                "{} has {} MiB free; the image needs {} MiB and 1 GiB to spare",
                dir.display(),
                free >> 20,
                size >> 20
            )));
        }
        let mut machine = Machine::new();
        let work = dir.join(format!("mobistack-real-{tag}"));
        machine.make_dir(&work)?;
        let dev = machine.attach_image(&work.join("probe.img"), size)?;
        // The loop device is this run's own and is detached at the end: no undo.
        write_value(&dev.queue_attr("scheduler"), "none").map_err(RealError::new)?;
        machine.devices.push(dev);
        Ok(machine)
    }

    fn make_dir(&mut self, dir: &Path) -> Result<(), RealError> {
        std::fs::create_dir(dir)
            .map_err(|e| RealError::new(format!("mkdir {}: {e}", dir.display())))?;
        self.undo.push(Undo::RemoveDir(dir.to_path_buf()));
        Ok(())
    }

    fn attach_image(&mut self, image: &Path, size: u64) -> Result<BlockDev, RealError> {
        let file = std::fs::File::create(image)
            .map_err(|e| RealError::new(format!("create {}: {e}", image.display())))?;
        self.undo.push(Undo::RemoveFile(image.to_path_buf()));
        file.set_len(size)
            .map_err(|e| RealError::new(format!("truncate {}: {e}", image.display())))?;
        drop(file);
        let image_arg = image.display().to_string();
        let out = run(
            "losetup",
            &["--find", "--show", "--direct-io=on", &image_arg],
        )
        .map_err(RealError::new)?;
        let path = PathBuf::from(out.trim());
        self.undo.push(Undo::Detach(path.clone()));
        self.log.push(format!(
            "losetup --direct-io=on {} ({} MiB) -> {}",
            image.display(),
            size >> 20,
            path.display()
        ));
        BlockDev::of(&path)
    }

    /// Writes `value` to a sysfs or procfs file, remembering the old value.
    fn set_value(&mut self, path: &str, value: &str) -> Result<(), RealError> {
        let old = read_trimmed(path)?;
        write_value(path, value).map_err(RealError::new)?;
        self.log.push(format!("{path} = {value} (was {old})"));
        self.undo.push(Undo::Write {
            path: path.to_string(),
            value: old,
        });
        Ok(())
    }

    /// `[stack.block]` through the device's queue: scheduler first (switching it resets
    /// `nr_requests`, block/elevator.c `elevator_switch` -> `blk_mq_init_sched`), then
    /// `nr_requests`, `wbt_lat_usec`, and `read_ahead_kb` from `[stack.vm] read_ahead`.
    fn set_queue(
        &mut self,
        dev: &BlockDev,
        stack: &crate::scenario::StackConfig,
    ) -> Result<(), RealError> {
        let elevator = kernel_elevator(&stack.block.elevator).map_err(RealError::new)?;
        let scheduler = dev.queue_attr("scheduler");
        let old = read_trimmed(&scheduler)?;
        let current = old
            .split_whitespace()
            .find(|s| s.starts_with('['))
            .map(|s| s.trim_matches(|c| c == '[' || c == ']').to_string())
            .unwrap_or_else(|| "none".into());
        write_value(&scheduler, elevator).map_err(|e| {
            RealError::new(format!(
                "scheduler `{elevator}` is not available for {} ({e}; offered: {old})",
                dev.name
            ))
        })?;
        self.log
            .push(format!("{scheduler} = {elevator} (was {current})"));
        self.undo.push(Undo::Write {
            path: scheduler,
            value: current,
        });
        if let Some(n) = stack.block.nr_requests {
            self.set_value(&dev.queue_attr("nr_requests"), &n.to_string())?;
        }
        // Always written, so the real queue runs the wbt the model resolves. Leaving it to the
        // kernel is not enough: any earlier write of `wbt_lat_usec` (a run that set it and
        // restored it) leaves the device's wbt in a manual state for its lifetime, which a
        // switch to BFQ no longer turns off (`wbt_disable_default` acts only on the default
        // state), so a real `bfq` run measured wbt on while the model had it off.
        let usec = wbt_lat_usec(stack);
        self.set_value(&dev.queue_attr("wbt_lat_usec"), &usec.to_string())?;
        let read_ahead_kb = (stack.vm.read_ahead / 1024).to_string();
        self.set_value(&dev.queue_attr("read_ahead_kb"), &read_ahead_kb)
    }

    /// mkfs.ext4 with `[stack.fs]`'s journal: its size, or an external journal device made
    /// with `mke2fs -O journal_dev`. Lazy inode-table and journal initialisation are off, so no
    /// `ext4lazyinit` thread writes during the run.
    fn make_fs(
        &mut self,
        main: &BlockDev,
        journal: Option<&BlockDev>,
        stack: &crate::scenario::StackConfig,
    ) -> Result<(), RealError> {
        let mut args: Vec<String> = vec![
            "-q".into(),
            "-F".into(),
            "-b".into(),
            "4096".into(),
            "-E".into(),
            "lazy_itable_init=0,lazy_journal_init=0,nodiscard".into(),
        ];
        if let Some(journal) = journal {
            let jpath = journal.path.display().to_string();
            run(
                "mke2fs",
                &["-q", "-F", "-O", "journal_dev", "-b", "4096", &jpath],
            )
            .map_err(RealError::new)?;
            args.push("-J".into());
            args.push(format!("device={jpath}"));
        } else if let Some(size) = stack.fs.journal_size {
            args.push("-J".into());
            args.push(format!("size={}", (size >> 20).max(1)));
        }
        args.push(main.path.display().to_string());
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        run("mkfs.ext4", &refs).map_err(RealError::new)?;
        self.log.push(format!("mkfs.ext4 {}", args.join(" ")));
        Ok(())
    }

    fn mount(
        &mut self,
        main: &BlockDev,
        dir: &Path,
        stack: &crate::scenario::StackConfig,
    ) -> Result<(), RealError> {
        let options = mount_options(&stack.fs);
        let dev = main.path.display().to_string();
        let target = dir.display().to_string();
        run("mount", &["-t", "ext4", "-o", &options, &dev, &target])
            .map_err(|e| RealError::new(format!("mounting with `{options}` ([stack.fs]): {e}")))?;
        self.undo.push(Undo::Unmount(dir.to_path_buf()));
        self.log.push(format!("mount -o {options} {dev} {target}"));
        Ok(())
    }

    /// `[stack.vm]` through sysctl: the dirty limits in bytes, from the scenario's RAM and
    /// ratios (the kernel's ratios apply to the machine's dirtyable memory, not the scenario's
    /// RAM), the expiry and the flusher's period.
    fn set_sysctls(&mut self, stack: &crate::scenario::StackConfig) -> Result<(), RealError> {
        let vm = &stack.vm;
        let dirty = if vm.dirty_bytes > 0 {
            vm.dirty_bytes
        } else {
            vm.ram / 100 * u64::from(vm.dirty_ratio)
        };
        let background = if vm.dirty_background_bytes > 0 {
            vm.dirty_background_bytes
        } else {
            vm.ram / 100 * u64::from(vm.dirty_background_ratio)
        };
        self.set_dirty_limit("dirty_bytes", "dirty_ratio", dirty)?;
        self.set_dirty_limit(
            "dirty_background_bytes",
            "dirty_background_ratio",
            background,
        )?;
        let centisecs = |ns: u64| (ns / 10_000_000).to_string();
        self.set_value(
            "/proc/sys/vm/dirty_expire_centisecs",
            &centisecs(vm.dirty_expire),
        )?;
        self.set_value(
            "/proc/sys/vm/dirty_writeback_centisecs",
            &centisecs(vm.dirty_writeback_interval),
        )
    }

    fn set_dirty_limit(&mut self, bytes: &str, ratio: &str, value: u64) -> Result<(), RealError> {
        let bytes_path = format!("/proc/sys/vm/{bytes}");
        let ratio_path = format!("/proc/sys/vm/{ratio}");
        let old_bytes = read_trimmed(&bytes_path)?;
        let old_ratio = read_trimmed(&ratio_path)?;
        // The kernel refuses dirty_bytes below two pages (dirty_bytes_min).
        let value = value.max(2 * 4096);
        write_value(&bytes_path, &value.to_string()).map_err(RealError::new)?;
        self.undo.push(Undo::DirtyLimit {
            bytes_path: bytes_path.clone(),
            ratio_path,
            bytes: old_bytes.clone(),
            ratio: old_ratio.clone(),
        });
        self.log.push(format!(
            "vm.{bytes} = {value} (was {old_bytes}, {ratio} {old_ratio})"
        ));
        Ok(())
    }

    /// A memory cgroup of `ram` bytes under this process's own memory cgroup, when `ram` is
    /// smaller than the machine's memory (src/real/cgroup.rs). The process joins it later
    /// ([`Machine::enter_memory_cgroup`]).
    fn make_memory_cgroup(&mut self, ram: u64, tag: &str) -> Result<(), RealError> {
        use super::cgroup;
        if !needs_memory_cgroup(ram) {
            return Ok(());
        }
        let place = cgroup::locate("memory").ok_or_else(|| RealError::new(NO_MEMCG))?;
        if place.version == cgroup::Version::V2 {
            self.enable_v2_controller(&place.own, "memory")?;
        }
        let dir = place.own.join(format!("mobistack-real-{tag}"));
        std::fs::create_dir(&dir)
            .map_err(|e| RealError::new(format!("mkdir {}: {e}", dir.display())))?;
        self.undo.push(Undo::RemoveCgroup(dir.clone()));
        let limit = dir.join(cgroup::memory_limit_file(place.version));
        write_value(&limit.display().to_string(), &ram.to_string()).map_err(RealError::new)?;
        self.log
            .push(format!("{} = {ram} (the scenario's RAM)", limit.display()));
        self.memory_cgroup = Some((dir, place.version));
        Ok(())
    }

    /// cgroup v2: `+<controller>` in `<own>/cgroup.subtree_control` (undone afterwards), so
    /// the run's child cgroups have it. The kernel refuses it where `own` holds processes and
    /// is not the root ("no internal processes"): then real mode cannot make the cgroup.
    fn enable_v2_controller(&mut self, own: &Path, controller: &str) -> Result<(), RealError> {
        let control = own.join("cgroup.subtree_control").display().to_string();
        let enabled = read_trimmed(&control)?;
        if enabled.split_whitespace().any(|c| c == controller) {
            return Ok(());
        }
        write_value(&control, &format!("+{controller}")).map_err(|e| {
            RealError::new(format!(
                "cgroup v2: cannot enable the `{controller}` controller for the run's cgroups \
                 under {} ({e}): a cgroup holding processes cannot enable controllers for its \
                 children unless it is the root; start real mode from the root cgroup or from a \
                 delegated cgroup whose subtree has `{controller}` enabled",
                own.display()
            ))
        })?;
        self.undo.push(Undo::Write {
            path: control,
            value: format!("-{controller}"),
        });
        Ok(())
    }

    /// Moves this whole process into the memory cgroup (nothing without one), and back on
    /// restore. Called after the files that exist before the run are laid out.
    pub fn enter_memory_cgroup(&mut self) -> Result<(), RealError> {
        let Some((dir, _)) = &self.memory_cgroup else {
            return Ok(());
        };
        let pid = std::process::id().to_string();
        let back = super::cgroup::locate("memory")
            .map(|p| p.own.join("cgroup.procs"))
            .ok_or_else(|| RealError::new(NO_MEMCG))?;
        let into = dir.join("cgroup.procs");
        write_value(&into.display().to_string(), &pid).map_err(RealError::new)?;
        self.undo.push(Undo::Write {
            path: back.display().to_string(),
            value: pid,
        });
        self.log.push(format!(
            "process {} -> {}",
            std::process::id(),
            into.display()
        ));
        Ok(())
    }

    /// The memory cgroup's limit and the most it held (v1 `memory.max_usage_in_bytes`, v2
    /// `memory.peak`), in bytes; None without one (or where the kernel has no peak file).
    pub fn memory_cgroup_usage(&self) -> Option<(u64, u64)> {
        let (dir, version) = self.memory_cgroup.as_ref()?;
        let read = |file: &str| {
            read_trimmed(&dir.join(file).display().to_string())
                .ok()?
                .parse::<u64>()
                .ok()
        };
        let peak = match version {
            super::cgroup::Version::V1 => read("memory.max_usage_in_bytes")?,
            super::cgroup::Version::V2 => read("memory.peak")?,
        };
        Some((read(super::cgroup::memory_limit_file(*version))?, peak))
    }

    /// A cgroup per `[stack.cgroup.<name>]` (not `root`) under this process's own I/O cgroup,
    /// with the scenario's weights; apps' threads join them ([`Machine::io_cgroups`]).
    fn make_io_cgroups(
        &mut self,
        stack: &crate::scenario::StackConfig,
        tag: &str,
    ) -> Result<(), RealError> {
        use super::cgroup;
        let groups: Vec<_> = stack.cgroup.iter().filter(|(n, _)| *n != "root").collect();
        if groups.is_empty() {
            return Ok(());
        }
        let place = cgroup::locate("io").ok_or_else(|| RealError::new(NO_IO_CGROUP))?;
        if place.version == cgroup::Version::V2 {
            return Err(RealError::new(V2_IO_THREADS));
        }
        let base = place.own.join(format!("mobistack-real-{tag}"));
        std::fs::create_dir(&base)
            .map_err(|e| RealError::new(format!("mkdir {}: {e}", base.display())))?;
        self.undo.push(Undo::RemoveCgroup(base.clone()));
        for (name, config) in groups {
            let dir = base.join(name);
            std::fs::create_dir(&dir)
                .map_err(|e| RealError::new(format!("mkdir {}: {e}", dir.display())))?;
            self.undo.push(Undo::RemoveCgroup(dir.clone()));
            for (file, value) in cgroup::io_settings(place.version, config) {
                let path = dir.join(&file);
                if !path.exists() {
                    return Err(RealError::new(format!(
                        "[stack.cgroup.{name}]: this kernel's I/O cgroups have no `{file}` \
                         ({}): the controller or scheduler behind it is not built or not loaded",
                        path.display()
                    )));
                }
                write_value(&path.display().to_string(), &value)
                    .map_err(|e| RealError::new(format!("[stack.cgroup.{name}]: {e}")))?;
                self.log.push(format!("{} = {value}", path.display()));
            }
            self.io_cgroups
                .insert(name.clone(), dir.join(cgroup::thread_file(place.version)));
        }
        Ok(())
    }

    /// Mounts tracefs at [`super::trace::TRACEFS`] if it is not mounted (unmounted on restore).
    pub fn ensure_tracefs(&mut self) -> Result<(), RealError> {
        if Path::new(super::trace::TRACEFS).join("events").exists() {
            return Ok(());
        }
        run("mount", &["-t", "tracefs", "nodev", super::trace::TRACEFS]).map_err(RealError::new)?;
        self.undo.push(Undo::UnmountTracefs);
        Ok(())
    }

    /// A trace instance directory to remove on restore.
    pub fn make_trace_instance(&mut self, dir: &Path) -> Result<(), RealError> {
        std::fs::create_dir(dir)
            .map_err(|e| RealError::new(format!("mkdir {}: {e}", dir.display())))?;
        self.undo.push(Undo::RemoveTraceInstance(dir.to_path_buf()));
        Ok(())
    }

    /// Writes a value of the run's own (a trace instance's file): no undo needed.
    pub fn write(&self, path: &str, value: &str) -> Result<(), RealError> {
        write_value(path, value).map_err(RealError::new)
    }

    /// Undoes every change, last first. Returns what could not be undone.
    pub fn restore(&mut self) -> Vec<String> {
        let mut failed = Vec::new();
        while let Some(step) = self.undo.pop() {
            if let Err(e) = step.apply() {
                failed.push(e);
            }
        }
        failed
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        for failure in self.restore() {
            eprintln!("warning: real mode could not restore: {failure}");
        }
    }
}

const NO_MEMCG: &str = "the scenario's RAM is smaller than this machine's, and the kernel has \
    no memory cgroup controller mounted (cgroup v1 `memory` or v2 with `memory`): the page cache \
    cannot be bounded to it";
const NO_IO_CGROUP: &str = "[stack.cgroup.<name>]: the kernel has no I/O cgroup controller \
    mounted (cgroup v1 `blkio` or v2 `io`): cgroup I/O weights cannot be set";
const V2_IO_THREADS: &str = "[stack.cgroup.<name>] on cgroup v2: the `io` controller places \
    whole processes and real mode runs the apps as threads of one process: not supported in \
    real mode yet (cgroup v1's `blkio` places threads)";

/// Whether the scenario's RAM is smaller than the machine's (then a memory cgroup bounds it).
pub fn needs_memory_cgroup(ram: u64) -> bool {
    super::cgroup::machine_ram().is_some_and(|machine| ram < machine)
}

/// The cgroup checks that need no change of the machine: the controllers exist.
pub fn preflight_cgroups(stack: &crate::scenario::StackConfig) -> Result<(), RealError> {
    use super::cgroup;
    if needs_memory_cgroup(stack.vm.ram) && cgroup::locate("memory").is_none() {
        return Err(RealError::new(NO_MEMCG));
    }
    if stack.cgroup.keys().any(|n| n != "root") {
        match cgroup::locate("io") {
            None => return Err(RealError::new(NO_IO_CGROUP)),
            Some(place) if place.version == cgroup::Version::V2 => {
                return Err(RealError::new(V2_IO_THREADS))
            }
            Some(_) => {}
        }
    }
    if let Some(root) = stack.cgroup.get("root") {
        if *root != crate::task::CgroupConfig::default() {
            return Err(RealError::new(
                "[stack.cgroup.root]: real mode does not change the weights of the cgroup it \
                 runs in; name a cgroup of the run's own instead",
            ));
        }
    }
    Ok(())
}

/// The mount options of `[stack.fs]`.
pub fn mount_options(fs: &crate::fs::ext4::Ext4Config) -> String {
    use crate::fs::ext4::DataMode;
    let mut options = vec![
        match fs.data {
            DataMode::Ordered => "data=ordered",
            DataMode::Journal => "data=journal",
            DataMode::Writeback => "data=writeback",
        }
        .to_string(),
        format!("commit={}", (fs.commit / 1_000_000_000).max(1)),
        if fs.discard { "discard" } else { "nodiscard" }.to_string(),
        if fs.barrier { "barrier" } else { "nobarrier" }.to_string(),
        // data=journal: ext4 refuses an explicit `delalloc` and clears it itself
        // (`ext4_check_opt_consistency`, "can't mount with both data=journal and delalloc").
        if fs.data == DataMode::Journal {
            "nodelalloc"
        } else if fs.delalloc {
            "delalloc"
        } else {
            "nodelalloc"
        }
        .to_string(),
        if fs.auto_da_alloc {
            "auto_da_alloc"
        } else {
            "noauto_da_alloc"
        }
        .to_string(),
        format!("journal_ioprio={}", fs.journal_ioprio),
    ];
    if fs.journal_async_commit {
        options.push("journal_async_commit".into());
    }
    // Only when the scenario sets it: unset is the running kernel's default (on from 5.6).
    match fs.dioread_nolock {
        Some(true) => options.push("dioread_nolock".into()),
        Some(false) => options.push("dioread_lock".into()),
        None => {}
    }
    options.join(",")
}

/// The `wbt_lat_usec` the model resolves for `stack` on a blk-mq queue (real mode's loop
/// devices are blk-mq): the scenario's `[stack.block] wbt` / `wbt_lat_usec`, else the era's and
/// config's default ([`crate::block::BlockConfig::wbt_min_lat_nsec`]); 0 turns wbt off.
pub fn wbt_lat_usec(stack: &crate::scenario::StackConfig) -> u64 {
    stack
        .block
        .wbt_min_lat_nsec(&stack.kernel, true)
        .map_or(0, |ns| ns / 1000)
}

#[cfg(test)]
mod wbt_tests {
    use super::wbt_lat_usec;

    fn stack(toml: &str) -> crate::scenario::StackConfig {
        let source = format!(
            "name = \"w\"\nduration = \"1s\"\n{toml}\n[[app]]\nname = \"a\"\n[app.workload.fsync-write]\npath = \"/data/f\"\nio_size = \"4KiB\"\nregion = \"1MiB\"\nthink = \"10ms\"\n"
        );
        let scenario = crate::scenario::parse("w.toml", &source).expect("valid scenario");
        scenario.variants[0].stack.clone()
    }

    #[test]
    fn the_real_queue_gets_the_wbt_the_model_resolves() {
        // A distribution's mainline: wbt on for mq-deadline at the default 2 ms read target,
        // off under BFQ (wbt_disable_default), off when the scenario says so.
        let distro = "[stack.kernel]\nversion = \"mainline\"\nconfig = \"distro\"\n";
        let of = |block: &str| wbt_lat_usec(&stack(&format!("[stack]\n{distro}{block}")));
        assert_eq!(of("[stack.block]\nelevator = \"mq-deadline\"\n"), 2000);
        assert_eq!(of("[stack.block]\nelevator = \"bfq\"\n"), 0);
        assert_eq!(
            of("[stack.block]\nelevator = \"mq-deadline\"\nwbt = false\n"),
            0
        );
        assert_eq!(
            of("[stack.block]\nelevator = \"mq-deadline\"\nwbt_lat_usec = 500\n"),
            500
        );
        // Android's config: no wbt.
        let gki = "[stack]\n[stack.kernel]\nversion = \"6.1\"\nconfig = \"android\"\n[stack.block]\nelevator = \"mq-deadline\"\n";
        assert_eq!(wbt_lat_usec(&stack(gki)), 0);
    }
}
