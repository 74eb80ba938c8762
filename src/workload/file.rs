//! File-level workloads over the VFS ([`crate::fs::vfs`]): what apps do with files.
//!
//! - `seq-write` ([`SeqWriteConfig`]): creates a file and writes it sequentially in `io_size`
//!   writes (a download, a backup, QASIO's 8 GB background write), buffered, `O_SYNC` or
//!   `O_DIRECT`, optionally fsyncing every `fsync_every` bytes and at the end, then optionally
//!   installing it elsewhere (`install_to`: read back, written out, fsynced, the original
//!   unlinked: a downloaded package installed).
//! - `file-read` ([`FileReadConfig`]): reads a preexisting file (created with its blocks on disk
//!   and nothing cached when missing), sequentially or at random offsets, with think time
//!   (a gallery, a game loading assets, a media player).
//! - `fsync-write` ([`FsyncWriteConfig`]): small writes each followed by fsync or fdatasync (a
//!   database commit, a messaging app).
//! - `video` ([`VideoConfig`]): a video player, time-sensitive periodic reads (seed 003 §7.2):
//!   frame `k` is due at `k / fps` from the start and reads `bitrate / fps` bytes; a frame whose
//!   read ends after the next frame is due is late (counters `frames`, `late_frames`). The next
//!   read starts at its due time, or at once when the player is behind.
//!
//! The directory of each workload's file is created at setup (it exists on the phone).
//!
//! Each syscall is an operation of the app's results (`creat`, `write`, `read`, `fsync`, ...)
//! with its latency and blocked time by reason; an errno is counted as `errno.<NAME>` and ends
//! the workload (it is the scenario's mistake, reported, not a crash).

use crate::app::AppContext;
use crate::fs::vfs::{
    Process, Vfs, O_CREAT, O_DIRECT, O_RDONLY, O_RDWR, O_SYNC, O_TRUNC, O_WRONLY,
};
use crate::fs::Errno;
use crate::units::{serde_units, Nanos, PAGE_SIZE};
use serde::{Deserialize, Serialize};
use std::rc::Rc;

/// How written data reaches the disk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WriteMode {
    /// Through the page cache, written back by the flusher.
    #[default]
    Buffered,
    /// `O_SYNC`: each write is synced before it returns.
    Sync,
    /// `O_DIRECT`: bypasses the page cache.
    Direct,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SeqWriteConfig {
    pub path: String,
    /// Bytes to write.
    #[serde(with = "serde_units::size")]
    pub size: u64,
    /// Bytes per write(); default 1 MiB.
    #[serde(default = "default_seq_io", with = "serde_units::size")]
    pub io_size: u64,
    #[serde(default)]
    pub mode: WriteMode,
    /// fsync after every this many bytes (0 = never during the write).
    #[serde(default, with = "serde_units::size")]
    pub fsync_every: u64,
    /// fsync once at the end.
    #[serde(default)]
    pub fsync_at_end: bool,
    /// Think time between writes.
    #[serde(default, with = "serde_units::duration")]
    pub think: Nanos,
    /// Install the written file here afterwards (a downloaded package installed): the file is
    /// read back in `io_size` reads, each written to this file (created), which is fsynced;
    /// then the written file is unlinked, as the package installer deletes the package.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_to: Option<String>,
}

impl Default for SeqWriteConfig {
    /// The serde defaults, with an empty path and size (a scenario must give both).
    fn default() -> Self {
        SeqWriteConfig {
            path: String::new(),
            size: 0,
            io_size: default_seq_io(),
            mode: WriteMode::default(),
            fsync_every: 0,
            fsync_at_end: false,
            think: 0,
            install_to: None,
        }
    }
}

impl Default for FileReadConfig {
    /// The serde defaults, with an empty path and size (a scenario must give both).
    fn default() -> Self {
        FileReadConfig {
            path: String::new(),
            file_size: 0,
            io_size: default_small_io(),
            pattern: ReadPattern::default(),
            think: 0,
            count: None,
            direct: false,
        }
    }
}

impl Default for FsyncWriteConfig {
    /// The serde defaults, with an empty path (a scenario must give it).
    fn default() -> Self {
        FsyncWriteConfig {
            path: String::new(),
            io_size: default_small_io(),
            region: 0,
            prefill: false,
            datasync: false,
            think: 0,
            count: None,
        }
    }
}

fn default_seq_io() -> u64 {
    1 << 20
}

fn default_small_io() -> u64 {
    PAGE_SIZE
}

/// Bound on one syscall's size: 64 MiB.
pub const MAX_IO_SIZE: u64 = 64 << 20;

fn check_io(kind: &str, io_size: u64) -> Result<(), String> {
    if io_size == 0 || io_size > MAX_IO_SIZE {
        return Err(format!(
            "{kind} `io_size` must be 1 byte..64MiB, not {io_size}"
        ));
    }
    Ok(())
}

fn check_path(kind: &str, path: &str) -> Result<(), String> {
    if !path.starts_with('/') {
        return Err(format!("{kind} `path` must be absolute, not `{path}`"));
    }
    Ok(())
}

impl SeqWriteConfig {
    pub fn validate(&self) -> Result<(), String> {
        check_path("seq-write", &self.path)?;
        if let Some(target) = &self.install_to {
            if !target.starts_with('/') {
                return Err(format!(
                    "seq-write `install_to` must be an absolute path, not `{target}`"
                ));
            }
            if *target == self.path {
                return Err(format!(
                    "seq-write `install_to` is the written file itself (`{target}`)"
                ));
            }
        }
        check_io("seq-write", self.io_size)
    }
}

/// Order of reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReadPattern {
    #[default]
    Sequential,
    /// Uniform random `io_size`-aligned offsets.
    Random,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FileReadConfig {
    pub path: String,
    /// Size of the file, created on disk (uncached) if it does not exist.
    #[serde(with = "serde_units::size")]
    pub file_size: u64,
    /// Bytes per read(); default 4 KiB.
    #[serde(default = "default_small_io", with = "serde_units::size")]
    pub io_size: u64,
    #[serde(default)]
    pub pattern: ReadPattern,
    /// Think time between reads.
    #[serde(default, with = "serde_units::duration")]
    pub think: Nanos,
    /// Reads to do; default: until the end of the file (sequential) or of the run (random).
    #[serde(default)]
    pub count: Option<u64>,
    /// O_DIRECT reads.
    #[serde(default)]
    pub direct: bool,
}

impl FileReadConfig {
    /// The offset of the next read, the previous one having ended at `offset` (0 at first):
    /// `offset` itself when sequential (`None` at the end of the file), else a uniform random
    /// `io_size`-aligned offset drawn from `rng`. Shared by the simulated app and real mode.
    pub fn next_read(&self, offset: u64, rng: &mut crate::sim::Rng) -> Option<u64> {
        match self.pattern {
            ReadPattern::Sequential => (offset < self.file_size).then_some(offset),
            ReadPattern::Random => {
                let slots = (self.file_size / self.io_size).max(1);
                Some(rng.below(slots) * self.io_size)
            }
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        check_path("file-read", &self.path)?;
        check_io("file-read", self.io_size)?;
        if self.file_size < self.io_size {
            return Err("file-read `file_size` must be at least `io_size`".into());
        }
        Ok(())
    }
}

/// `[app.workload.video]`: a video player reading its file frame by frame.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct VideoConfig {
    pub path: String,
    /// Size of the file, created on disk (uncached) if it does not exist.
    #[serde(with = "serde_units::size")]
    pub file_size: u64,
    /// Encoded bit rate, as a bandwidth (e.g. "1MB/s" for 8 Mbit/s 1080p).
    #[serde(with = "serde_units::bandwidth")]
    pub bitrate: u64,
    /// Frames per second; default 30.
    #[serde(default = "default_fps")]
    pub fps: u32,
    /// Frames to play; default: to the end of the file or of the run.
    #[serde(default)]
    pub count: Option<u64>,
}

fn default_fps() -> u32 {
    30
}

impl VideoConfig {
    pub fn validate(&self) -> Result<(), String> {
        check_path("video", &self.path)?;
        if self.fps == 0 || self.fps > 1000 {
            return Err(format!("video `fps` = {} must be 1..=1000", self.fps));
        }
        let frame = self.frame_bytes();
        if frame == 0 {
            return Err("video `bitrate` is too low: a frame would be 0 bytes".into());
        }
        if self.file_size < frame {
            return Err("video `file_size` must hold at least one frame".into());
        }
        Ok(())
    }

    /// Bytes read per frame: `bitrate / fps`.
    pub fn frame_bytes(&self) -> u64 {
        self.bitrate / u64::from(self.fps)
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FsyncWriteConfig {
    pub path: String,
    /// Bytes per write(); default 4 KiB.
    #[serde(default = "default_small_io", with = "serde_units::size")]
    pub io_size: u64,
    /// Writes go to random `io_size`-aligned offsets below this size; 0 = append.
    #[serde(default, with = "serde_units::size")]
    pub region: u64,
    /// fdatasync instead of fsync.
    #[serde(default)]
    pub datasync: bool,
    /// Think time between transactions.
    #[serde(default, with = "serde_units::duration")]
    pub think: Nanos,
    /// Transactions (write + sync); default: until the run ends.
    #[serde(default)]
    pub count: Option<u64>,
    /// The file exists with `region` bytes on disk before the run (a database or a download
    /// being rewritten in place), so every write overwrites; default false (writes to a
    /// region past the file's end extend it).
    #[serde(default)]
    pub prefill: bool,
}

impl FsyncWriteConfig {
    /// The offset of the next write, the writes so far having ended at `end`: a uniform random
    /// `io_size`-aligned slot of `region` drawn from `rng`, or `end` (appending) without a
    /// region. Shared by the simulated app and real mode.
    pub fn next_write(&self, end: u64, rng: &mut crate::sim::Rng) -> u64 {
        match self.region / self.io_size {
            0 => end,
            slots => rng.below(slots) * self.io_size,
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        check_path("fsync-write", &self.path)?;
        check_io("fsync-write", self.io_size)
    }
}

/// The stack's VFS, with the directory of `path` created as it exists on the phone before the
/// app runs (setup: no time passes).
fn vfs_of(ctx: &AppContext, path: &str) -> Option<Rc<Vfs>> {
    let Some(vfs) = ctx.stack.vfs.clone() else {
        ctx.add_counter("errno.no-storage-stack", 1);
        return None;
    };
    let parent = match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    };
    if let Err(errno) = vfs.mkdir_all(&ctx.sim, parent) {
        ctx.add_counter(&format!("errno.{}", errno.name()), 1);
        return None;
    }
    Some(vfs)
}

/// Records an errno of the app; returns whether the call succeeded.
pub(crate) fn note<T>(ctx: &AppContext, result: &Result<T, Errno>) -> bool {
    match result {
        Ok(_) => true,
        Err(errno) => {
            ctx.add_counter(&format!("errno.{}", errno.name()), 1);
            false
        }
    }
}

/// Times one system call as operation `op` of the app and notes its errno; `None` on error.
/// Each call is a step of the task for the engine's livelock detection: a call served from
/// memory may take no virtual time and never block, and a loop of them with no think time
/// would otherwise spin forever inside one poll.
pub(crate) async fn syscall<T>(
    ctx: &AppContext,
    op: &'static str,
    call: impl std::future::Future<Output = Result<T, Errno>>,
) -> Option<T> {
    ctx.sim.step(op).await;
    let timer = ctx.begin_op(op);
    let result = call.await;
    ctx.end_op(timer);
    note(ctx, &result).then(|| result.expect("checked"))
}

/// The start of every file workload: a valid configuration, the stack's VFS with the file's
/// directory, and the app's process.
fn start(ctx: &AppContext, valid: Result<(), String>, path: &str) -> Option<(Rc<Vfs>, Process)> {
    if valid.is_err() {
        ctx.add_counter("errno.EINVAL", 1);
        return None;
    }
    let vfs = vfs_of(ctx, path)?;
    let process = vfs.new_process_with_pid(ctx.stack.alloc_pid(), ctx.uid, &ctx.name);
    Some((vfs, process))
}

/// The body of a `seq-write` app.
pub async fn seq_write(ctx: AppContext, config: SeqWriteConfig) {
    let Some((vfs, process)) = start(&ctx, config.validate(), &config.path) else {
        return;
    };
    if let Some(target) = &config.install_to {
        if vfs_of(&ctx, target).is_none() {
            return;
        }
    }
    let sim = ctx.sim.clone();
    let mut flags = O_CREAT | O_WRONLY | O_TRUNC;
    match config.mode {
        WriteMode::Buffered => {}
        WriteMode::Sync => flags |= O_SYNC,
        WriteMode::Direct => flags |= O_DIRECT,
    }
    let open = vfs.open(&sim, &process, &config.path, flags);
    let Some(fd) = syscall(&ctx, "open", open).await else {
        return;
    };
    let buffer = vec![0u8; config.io_size as usize];
    let mut written = 0u64;
    let mut since_sync = 0u64;
    while written < config.size && !ctx.is_stopped() {
        if config.think > 0 {
            sim.sleep(config.think).await;
        }
        let n = config.io_size.min(config.size - written) as usize;
        let write = vfs.write(&sim, &process, fd, &buffer[..n]);
        let Some(done) = syscall(&ctx, "write", write).await else {
            break;
        };
        let done = done as u64;
        assert!(done > 0, "write of {n} bytes returned 0");
        written += done;
        since_sync += done;
        ctx.add_counter("bytes", done);
        if config.fsync_every > 0 && since_sync >= config.fsync_every {
            since_sync = 0;
            syscall(&ctx, "fsync", vfs.fsync(&sim, &process, fd)).await;
        }
    }
    if config.fsync_at_end {
        syscall(&ctx, "fsync", vfs.fsync(&sim, &process, fd)).await;
    }
    let result = vfs.close(&sim, &process, fd).await;
    if note(&ctx, &result) && written == config.size {
        if let Some(target) = &config.install_to {
            install(&ctx, &vfs, &process, &config.path, target, config.io_size).await;
        }
    }
}

/// `seq-write`'s `install_to`: `package` read back and written to `target` in `io_size`
/// calls as fast as they go (operations `install_read`, `install_write`, `install_fsync`),
/// then the package unlinked (`unlink`).
async fn install(
    ctx: &AppContext,
    vfs: &Vfs,
    process: &Process,
    package: &str,
    target: &str,
    io_size: u64,
) {
    let sim = &ctx.sim;
    let Some(src) = syscall(ctx, "open", vfs.open(sim, process, package, O_RDONLY)).await else {
        return;
    };
    let flags = O_CREAT | O_WRONLY | O_TRUNC;
    let Some(dst) = syscall(ctx, "open", vfs.open(sim, process, target, flags)).await else {
        note(ctx, &vfs.close(sim, process, src).await);
        return;
    };
    let mut buffer = vec![0u8; io_size as usize];
    while !ctx.is_stopped() {
        let read = vfs.read(sim, process, src, &mut buffer);
        let Some(n) = syscall(ctx, "install_read", read).await else {
            break;
        };
        if n == 0 {
            break;
        }
        let write = vfs.write(sim, process, dst, &buffer[..n]);
        let Some(done) = syscall(ctx, "install_write", write).await else {
            break;
        };
        assert_eq!(done, n, "a buffered write of {n} bytes is whole");
        ctx.add_counter("install_bytes", done as u64);
    }
    if !ctx.is_stopped() {
        syscall(ctx, "install_fsync", vfs.fsync(sim, process, dst)).await;
    }
    note(ctx, &vfs.close(sim, process, dst).await);
    note(ctx, &vfs.close(sim, process, src).await);
    if !ctx.is_stopped() {
        syscall(ctx, "unlink", vfs.unlink(sim, process, package)).await;
    }
}

/// The body of a `file-read` app.
pub async fn file_read(ctx: AppContext, config: FileReadConfig) {
    let Some((vfs, process)) = start(&ctx, config.validate(), &config.path) else {
        return;
    };
    let sim = ctx.sim.clone();
    match vfs.populate(&sim, &config.path, config.file_size) {
        Ok(_) | Err(Errno::EEXIST) => {}
        Err(errno) => {
            note::<()>(&ctx, &Err(errno));
            return;
        }
    }
    let flags = O_RDONLY | if config.direct { O_DIRECT } else { 0 };
    let open = vfs.open(&sim, &process, &config.path, flags);
    let Some(fd) = syscall(&ctx, "open", open).await else {
        return;
    };
    let mut rng = sim.rng(&format!("file-read/{}", ctx.name));
    let mut buffer = vec![0u8; config.io_size as usize];
    let mut done = 0u64;
    let mut offset = 0u64;
    while !ctx.is_stopped() && config.count.is_none_or(|c| done < c) {
        let Some(at) = config.next_read(offset, &mut rng) else {
            break;
        };
        if config.think > 0 {
            sim.sleep(config.think).await;
        }
        let read = vfs.pread(&sim, &process, fd, &mut buffer, at);
        let Some(n) = syscall(&ctx, "read", read).await else {
            break;
        };
        let n = n as u64;
        ctx.add_counter("bytes", n);
        offset = at + n.max(1);
        done += 1;
    }
    let result = vfs.close(&sim, &process, fd).await;
    note(&ctx, &result);
}

/// The body of a `video` app (module doc).
pub async fn video(ctx: AppContext, config: VideoConfig) {
    let Some((vfs, process)) = start(&ctx, config.validate(), &config.path) else {
        return;
    };
    let sim = ctx.sim.clone();
    match vfs.populate(&sim, &config.path, config.file_size) {
        Ok(_) | Err(Errno::EEXIST) => {}
        Err(errno) => {
            note::<()>(&ctx, &Err(errno));
            return;
        }
    }
    let open = vfs.open(&sim, &process, &config.path, O_RDONLY);
    let Some(fd) = syscall(&ctx, "open", open).await else {
        return;
    };
    let frame_bytes = config.frame_bytes();
    let period = crate::units::NS_PER_SEC / u64::from(config.fps);
    let mut buffer = vec![0u8; frame_bytes as usize];
    let start = sim.now();
    let mut frame = 0u64;
    while !ctx.is_stopped() && config.count.is_none_or(|c| frame < c) {
        let offset = frame * frame_bytes;
        if offset + frame_bytes > config.file_size {
            break;
        }
        let due = start + frame * period;
        if sim.now() < due {
            sim.sleep(due - sim.now()).await;
        }
        let read = vfs.pread(&sim, &process, fd, &mut buffer, offset);
        let Some(n) = syscall(&ctx, "frame", read).await else {
            break;
        };
        ctx.add_counter("bytes", n as u64);
        ctx.add_counter("frames", 1);
        if sim.now() > due + period {
            ctx.add_counter("late_frames", 1);
        }
        frame += 1;
    }
    let result = vfs.close(&sim, &process, fd).await;
    note(&ctx, &result);
}

/// The body of an `fsync-write` app.
pub async fn fsync_write(ctx: AppContext, config: FsyncWriteConfig) {
    let Some((vfs, process)) = start(&ctx, config.validate(), &config.path) else {
        return;
    };
    let sim = ctx.sim.clone();
    if config.prefill && config.region > 0 {
        if let Err(errno) = vfs.populate(&sim, &config.path, config.region) {
            ctx.add_counter(&format!("errno.{}", errno.name()), 1);
            return;
        }
    }
    let open = vfs.open(&sim, &process, &config.path, O_CREAT | O_RDWR);
    let Some(fd) = syscall(&ctx, "open", open).await else {
        return;
    };
    let mut rng = sim.rng(&format!("fsync-write/{}", ctx.name));
    let buffer = vec![0u8; config.io_size as usize];
    let mut done = 0u64;
    let mut end = 0u64;
    while !ctx.is_stopped() && config.count.is_none_or(|c| done < c) {
        if config.think > 0 {
            sim.sleep(config.think).await;
        }
        let at = config.next_write(end, &mut rng);
        let write = vfs.pwrite(&sim, &process, fd, &buffer, at);
        if syscall(&ctx, "write", write).await.is_none() {
            break;
        }
        end = end.max(at + config.io_size);
        let synced = if config.datasync {
            syscall(&ctx, "fdatasync", vfs.fdatasync(&sim, &process, fd)).await
        } else {
            syscall(&ctx, "fsync", vfs.fsync(&sim, &process, fd)).await
        };
        if synced.is_none() {
            break;
        }
        ctx.add_counter("transactions", 1);
        ctx.add_counter("bytes", config.io_size);
        done += 1;
    }
    let result = vfs.close(&sim, &process, fd).await;
    note(&ctx, &result);
}

#[cfg(test)]
mod stack_tests {
    use super::*;
    use crate::report::recorder::Recorder;
    use crate::scenario::StackConfig;
    use crate::sim::Simulation;
    use crate::stack::Stack;
    use crate::task::ForegroundState;
    use crate::units::{NS_PER_MS, NS_PER_SEC};

    /// A scenario's default storage stack (the eMMC 5.1 profile, CFQ, Android's vm settings, an
    /// 8 GiB file system) with `foreground` the foreground app, and a recorder for the apps.
    fn storage_stack(
        foreground: Option<u32>,
    ) -> (Simulation, Rc<Stack>, Rc<crate::fs::vfs::Vfs>, Rc<Recorder>) {
        let simulation = Simulation::new(7);
        let stack = Stack::new_with_storage(
            &simulation.handle(),
            &StackConfig::default(),
            Rc::new(ForegroundState::new(foreground)),
            crate::mm::VmConfig::android(),
            Some(8 << 30),
        )
        .expect("default stack");
        let vfs = stack.vfs.clone().expect("storage");
        (simulation, stack, vfs, Rc::new(Recorder::new()))
    }

    #[test]
    fn file_workloads_run_on_the_scenario_stack_with_a_flash_device() {
        // The default [stack.device] (eMMC 5.1 profile) and [stack.block] (CFQ) of a scenario.
        let (simulation, stack, vfs, recorder) = storage_stack(Some(10_001));
        let sim = simulation.handle();
        let ctx = |i: usize, name: &str, uid: u32| {
            AppContext::new(sim.clone(), i, name, uid, stack.clone(), recorder.clone())
        };
        sim.spawn(
            "backup",
            seq_write(
                ctx(0, "backup", 10_000),
                SeqWriteConfig {
                    path: "/sdcard/backup".into(),
                    size: 256 << 20,
                    fsync_at_end: true,
                    ..SeqWriteConfig::default()
                },
            ),
        );
        sim.spawn(
            "gallery",
            file_read(
                ctx(1, "gallery", 10_001),
                FileReadConfig {
                    path: "/sdcard/photos".into(),
                    file_size: 64 << 20,
                    pattern: ReadPattern::Random,
                    think: 50 * NS_PER_MS,
                    count: Some(100),
                    ..FileReadConfig::default()
                },
            ),
        );
        sim.run_until(60 * NS_PER_SEC, true).expect("no deadlock");
        let backup = recorder.app_result("backup", 10_000);
        let gallery = recorder.app_result("gallery", 10_001);
        assert_eq!(backup.counters["bytes"], 256 << 20);
        assert_eq!(backup.ops["fsync"].count, 1);
        assert_eq!(gallery.ops["read"].count, 100);
        let counters = stack.counters();
        assert_eq!(counters["vfs.errors"], 0);
        assert!(counters["block.requests"] > 0, "{counters:?}");
        assert!(counters["mm.pages_written_async"] > 0, "{counters:?}");
        // Every page of the backup reached the device by the end of its fsync; what may be
        // left dirty is metadata the last commit journaled, waiting for its checkpoint (the
        // run ends when the apps are done, before kupdate comes round).
        let state = vfs.mm.state();
        for (ino, mapping) in &state.mappings {
            assert!(
                mapping.dirty.is_empty() || *ino == crate::mm::BDEV_INO,
                "inode {ino} has {} dirty pages",
                mapping.dirty.len()
            );
        }
    }

    /// `install_to`: the package is read back and written out whole, fsynced, then deleted;
    /// the installed file holds every byte on the device afterwards.
    #[test]
    fn a_downloaded_package_is_installed_then_deleted() {
        let (simulation, stack, vfs, recorder) = storage_stack(None);
        let sim = simulation.handle();
        let ctx = AppContext::new(
            sim.clone(),
            0,
            "update",
            10_000,
            stack.clone(),
            recorder.clone(),
        );
        let size = 32u64 << 20;
        sim.spawn(
            "update",
            seq_write(
                ctx,
                SeqWriteConfig {
                    path: "/data/app/update.apk".into(),
                    size,
                    install_to: Some("/data/app/update/base.obb".into()),
                    ..SeqWriteConfig::default()
                },
            ),
        );
        sim.run_until(60 * NS_PER_SEC, true).expect("no deadlock");
        let update = recorder.app_result("update", 10_000);
        assert_eq!(update.counters["bytes"], size);
        assert_eq!(update.counters["install_bytes"], size);
        assert_eq!(update.ops["install_write"].count, size >> 20);
        // The last read finds the end of the file.
        assert_eq!(update.ops["install_read"].count, (size >> 20) + 1);
        assert_eq!(update.ops["install_fsync"].count, 1);
        assert_eq!(update.ops["unlink"].count, 1);
        assert!(
            !update.counters.keys().any(|k| k.starts_with("errno.")),
            "{:?}",
            update.counters
        );
        let process = vfs.new_process(10_000, "check");
        let found = Rc::new(std::cell::RefCell::new(Vec::new()));
        let out = found.clone();
        let s = sim.clone();
        sim.spawn("check", async move {
            for path in ["/data/app/update.apk", "/data/app/update/base.obb"] {
                let stat = vfs.stat(&s, &process, path).await;
                out.borrow_mut().push(stat.map(|stat| stat.size));
            }
        });
        sim.run_until(61 * NS_PER_SEC, true).expect("no deadlock");
        assert_eq!(*found.borrow(), vec![Err(Errno::ENOENT), Ok(size)]);
    }
}

#[cfg(test)]
mod config_tests {
    use super::*;

    #[test]
    fn workload_tables_read_human_units_and_reject_unknown_fields() {
        let write: SeqWriteConfig =
            toml::from_str("path = \"/sdcard/backup.tar\"\nsize = \"8GiB\"\nmode = \"sync\"")
                .unwrap();
        assert_eq!((write.size, write.io_size), (8 << 30, 1 << 20));
        assert_eq!(write.mode, WriteMode::Sync);
        let read: FileReadConfig = toml::from_str(
            "path = \"/p\"\nfile_size = \"256MiB\"\npattern = \"random\"\nthink = \"20ms\"",
        )
        .unwrap();
        assert_eq!(read.io_size, PAGE_SIZE);
        assert_eq!(read.think, 20_000_000);
        assert!(read.validate().is_ok());
        let sync: FsyncWriteConfig = toml::from_str("path = \"/db\"\ndatasync = true").unwrap();
        assert_eq!(
            sync,
            FsyncWriteConfig {
                path: "/db".into(),
                datasync: true,
                ..Default::default()
            }
        );
        assert!(toml::from_str::<SeqWriteConfig>("path = \"/a\"\nsize = 1\nbs = 4").is_err());
        let install: SeqWriteConfig =
            toml::from_str("path = \"/a\"\nsize = 1\ninstall_to = \"/b/c\"").unwrap();
        assert_eq!(install.install_to.as_deref(), Some("/b/c"));
        assert!(install.validate().is_ok());
        for bad in ["relative", "/a"] {
            let config = SeqWriteConfig {
                install_to: Some(bad.into()),
                ..install.clone()
            };
            assert!(config.validate().is_err(), "{bad}");
        }
        assert!(SeqWriteConfig {
            path: "relative".into(),
            ..Default::default()
        }
        .validate()
        .is_err());
    }
}
