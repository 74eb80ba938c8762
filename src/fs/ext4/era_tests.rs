//! ext4 and jbd2 behaviours that differ by kernel era (`[stack.kernel] version`, issue 41):
//! the external journal's data flush (`t_need_data_flush`), `journal_async_commit`'s commit
//! block, and writeback's jbd2 handle around bio submission. Each test names the kernel function
//! whose behaviour it checks and fails on the behaviour the model had before.

use crate::dev::fixed::FixedLatencyDevice;
use crate::fs::ext4::Ext4Config;
use crate::fs::vfs::{Process, Vfs, O_CREAT, O_WRONLY};
use crate::kernel::{CpuConfig, Hz, KernelConfig, KernelVersion};
use crate::mm::bio::{IoCount, IoPurpose};
use crate::mm::{Issuer, VmConfig};
use crate::scenario::StackConfig;
use crate::sim::{Sim, Simulation};
use crate::stack::Stack;
use crate::task::ForegroundState;
use crate::units::{NS_PER_MS, NS_PER_SEC, NS_PER_US};
use std::future::Future;
use std::rc::Rc;

const UID: u32 = 10_000;

#[test]
fn the_predicates_follow_their_commits_releases() {
    use KernelVersion::*;
    // 06bd3c36a733 is in 4.7: 4.4 is before it.
    assert!(!V3_10.files_new_delalloc_blocks_as_ordered_data());
    assert!(!V4_4.files_new_delalloc_blocks_as_ordered_data());
    assert!(V4_19.files_new_delalloc_blocks_as_ordered_data());
    // aac45075f6d7 is in 6.15.
    assert!(!V6_6.will_send_data_barrier_marks_data_flush());
    assert!(Mainline.will_send_data_barrier_marks_data_flush());
    // d4f761074353 (3.19) and 4e7ea81db534 (3.11).
    assert!(!V3_10.forbids_async_commit_with_ordered_data());
    assert!(V4_4.forbids_async_commit_with_ordered_data());
    assert!(!V3_10.stops_writeback_handle_before_final_submit());
    assert!(V4_4.stops_writeback_handle_before_final_submit());
    // 6b8ed62008a4 (5.8).
    assert!(!V4_19.writes_mapped_pages_without_handle());
    assert!(V5_10.writes_mapped_pages_without_handle());
}

#[test]
fn ordered_delalloc_unset_follows_the_version_and_set_overrides_it() {
    let unset = Ext4Config::default();
    assert_eq!(unset.ordered_delalloc, None);
    assert!(!unset.ordered_delalloc(KernelVersion::V3_10));
    assert!(!unset.ordered_delalloc(KernelVersion::V4_4));
    assert!(unset.ordered_delalloc(KernelVersion::V4_19));
    assert!(unset.ordered_delalloc(KernelVersion::Mainline));
    let on: Ext4Config = toml::from_str("ordered_delalloc = true").unwrap();
    assert!(on.ordered_delalloc(KernelVersion::V3_10));
    let off: Ext4Config = toml::from_str("ordered_delalloc = false").unwrap();
    assert!(!off.ordered_delalloc(KernelVersion::V6_6));
}

// --- The external journal's data flush ---------------------------------------------------

/// A scenario stack (eMMC 4.5, noop) with ext4's journal on a second eMMC, under `version`.
struct External {
    sim: Simulation,
    vfs: Rc<Vfs>,
}

impl External {
    fn new(version: KernelVersion) -> External {
        External::with_fs(version, "")
    }

    /// [`External::new`] with `fs` added to its `[fs]` table.
    fn with_fs(version: KernelVersion, fs: &str) -> External {
        let config: StackConfig = toml::from_str(&format!(
            r#"
            [device]
            profile = "emmc-4.5"
            capacity = "2GiB"
            [block]
            elevator = "noop"
            [kernel]
            version = "{version}"
            [fs]
            discard = false
            journal = "external"
            {fs}
            [fs.journal_device]
            profile = "emmc-4.5"
            capacity = "512MiB"
            "#
        ))
        .expect("a stack table");
        let sim = Simulation::new(1);
        let stack = Stack::new_with_storage(
            &sim.handle(),
            &config,
            Rc::new(ForegroundState::new(None)),
            VmConfig::android(),
            Some(1 << 30),
        )
        .expect("the stack");
        let vfs = stack.vfs.clone().expect("storage");
        External { sim, vfs }
    }

    fn run<F, Fut>(&self, body: F)
    where
        F: FnOnce(Sim, Rc<Vfs>, Process) -> Fut + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        crate::fs::test_support::run_app(&self.sim, &self.vfs, UID, body);
    }

    /// Cache flushes `syscall` asked of the file system's device and of the journal's.
    fn flushes(&self, syscall: &str) -> (u64, u64) {
        let rows = self.vfs.mm.bdev.io_account().expect("kept").rows();
        let mut fs = IoCount::default();
        let mut journal = IoCount::default();
        for row in rows.iter().filter(|r| r.uid == UID && r.cause == syscall) {
            match row.device {
                None => fs.add(&row.count),
                Some(_) => journal.add(&row.count),
            }
        }
        (fs.flushes, journal.flushes)
    }
}

/// `creat` + 4 KiB `write` + `fsync` on an external journal: (flushes of the file system's
/// device, flushes of the journal's) by the fsync.
fn new_file_fsync_flushes(version: KernelVersion) -> (u64, u64) {
    new_file_fsync_flushes_with(version, "")
}

/// [`new_file_fsync_flushes`] with `fs` added to `[fs]`.
fn new_file_fsync_flushes_with(version: KernelVersion, fs: &str) -> (u64, u64) {
    let rig = External::with_fs(version, fs);
    rig.run(|sim, vfs, p| async move {
        let fd = vfs.creat(&sim, &p, "/f").await.unwrap();
        vfs.write(&sim, &p, fd, &[1u8; 4096]).await.unwrap();
        vfs.fsync(&sim, &p, fd).await.unwrap();
        vfs.close(&sim, &p, fd).await.unwrap();
    });
    rig.flushes("fsync")
}

#[test]
fn jbd2_journal_commit_transaction_flushes_the_data_device_for_new_delalloc_blocks_from_4_7() {
    // 3.10 and 4.4 (3.9-4.6): delayed allocation files nothing, t_need_data_flush stays 0, the
    // commit flushes only the journal's device (its commit block's WRITE_FLUSH_FUA), and
    // ext4_sync_file skips its own flush (jbd2_trans_will_send_data_barrier: yes, the
    // transaction still runs): the new block's data may sit in the data device's cache.
    assert_eq!(new_file_fsync_flushes(KernelVersion::V3_10), (0, 1));
    assert_eq!(new_file_fsync_flushes(KernelVersion::V4_4), (0, 1));
    // 4.7+ (06bd3c36a733): ext4_map_blocks files the new block, so the commit flushes the
    // data device before its commit block.
    assert_eq!(new_file_fsync_flushes(KernelVersion::V4_19), (1, 1));
    assert_eq!(
        new_file_fsync_flushes_with(KernelVersion::V6_6, "dioread_nolock = false"),
        (1, 1)
    );
    // 5.6+ mounts with dioread_nolock (244adf6426ee): the block is unwritten, ext4_map_blocks
    // files nothing (EXT4_MAP_UNWRITTEN), t_need_data_flush stays 0 and 6.6 sends no flush to
    // the data device: the missing flush aac45075f6d7 (6.15) adds, modelled for mainline.
    assert_eq!(new_file_fsync_flushes(KernelVersion::V6_6), (0, 1));
    assert_eq!(new_file_fsync_flushes(KernelVersion::Mainline), (1, 1));
}

/// A file written and made durable, then its page overwritten in place (no new block; the
/// mtime changes, so the inode's `i_sync_tid` is the running transaction) and fsynced: the
/// flushes of the second fsync (data device, journal device).
fn overwrite_fsync_flushes(version: KernelVersion) -> (u64, u64) {
    let rig = External::new(version);
    rig.run(|sim, vfs, p| async move {
        let fd = vfs.open(&sim, &p, "/f", O_CREAT | O_WRONLY).await.unwrap();
        vfs.write(&sim, &p, fd, &[1u8; 4096]).await.unwrap();
        vfs.fdatasync(&sim, &p, fd).await.unwrap();
        // A later jiffy: the overwrite updates the mtime (file_update_time).
        sim.sleep(50 * NS_PER_MS).await;
        vfs.pwrite(&sim, &p, fd, &[2u8; 4096], 0).await.unwrap();
        vfs.fsync(&sim, &p, fd).await.unwrap();
        vfs.close(&sim, &p, fd).await.unwrap();
    });
    rig.flushes("fsync")
}

#[test]
fn jbd2_trans_will_send_data_barrier_marks_the_running_transaction_in_mainline() {
    // Up to 6.14 (6.6 here): the running transaction filed nothing, ext4_sync_file trusts the
    // commit to flush, and the commit flushes only the journal's device.
    assert_eq!(overwrite_fsync_flushes(KernelVersion::V6_6), (0, 1));
    // aac45075f6d7: jbd2_trans_will_send_data_barrier sets t_need_data_flush on it.
    assert_eq!(overwrite_fsync_flushes(KernelVersion::Mainline), (1, 1));
}

// --- journal_async_commit ------------------------------------------------------------------

/// ext4 over a 100 us + 50 MB/s device (eMMC 4.5 sequential write, docs/references.md), one
/// slot, with a request queue built from `block`, under `version`.
struct Rig {
    sim: Simulation,
    vfs: Rc<Vfs>,
}

impl Rig {
    fn new(fs: Ext4Config, version: KernelVersion, block: crate::block::BlockConfig) -> Rig {
        let sim = Simulation::new(1);
        let device = Box::new(FixedLatencyDevice::new(1, 100 * NS_PER_US, 50_000_000));
        let kernel = KernelConfig {
            version,
            hz: Hz(200),
            ..KernelConfig::default()
        };
        let queue =
            crate::block::queue::RequestQueue::from_config(device, &block, &kernel).expect("queue");
        let layer = crate::block::layer::BlockLayer::new(&sim.handle(), queue);
        let vfs = crate::stack::storage_with_kernel_on_layer(
            &sim.handle(),
            VmConfig::android(),
            &kernel,
            CpuConfig::zero_cost(),
            &fs,
            layer,
            1 << 30,
        )
        .expect("valid storage");
        Rig { sim, vfs }
    }

    fn noop() -> crate::block::BlockConfig {
        crate::block::BlockConfig {
            elevator: "noop".into(),
            ..Default::default()
        }
    }

    /// Runs each of `bodies` as a task of its own process, to their ends.
    fn run(&self, bodies: Vec<(&str, Task)>) {
        for (name, body) in bodies {
            let (s, vfs) = (self.sim.handle(), self.vfs.clone());
            let process = vfs.new_process(UID, name);
            self.sim
                .spawn(name, async move { body(s, vfs, process).await });
        }
        self.sim.run_until(u64::MAX, true).expect("no deadlock");
    }

    fn of(&self, syscall: &str, purpose: IoPurpose) -> IoCount {
        let mut count = IoCount::default();
        for row in self.vfs.mm.bdev.io_account().expect("kept").rows() {
            if row.uid == UID && row.cause == syscall && row.purpose == purpose {
                count.add(&row.count);
            }
        }
        count
    }
}

type Task = Box<dyn FnOnce(Sim, Rc<Vfs>, Process) -> std::pin::Pin<Box<dyn Future<Output = ()>>>>;

fn task<F, Fut>(body: F) -> Task
where
    F: FnOnce(Sim, Rc<Vfs>, Process) -> Fut + 'static,
    Fut: Future<Output = ()> + 'static,
{
    Box::new(move |sim, vfs, p| Box::pin(body(sim, vfs, p)))
}

/// `creat` + 4 KiB `write` + `fsync` with `journal_async_commit` (barriers `barrier`) under
/// 3.10: the fsync's commit block and its empty flushes.
fn async_commit_fsync(barrier: bool) -> (IoCount, IoCount) {
    let fs = Ext4Config {
        journal_async_commit: true,
        barrier,
        ..Ext4Config::default()
    };
    let rig = Rig::new(fs, KernelVersion::V3_10, Rig::noop());
    rig.run(vec![(
        "app",
        task(|sim, vfs, p| async move {
            let fd = vfs.creat(&sim, &p, "/f").await.unwrap();
            vfs.write(&sim, &p, fd, &[1u8; 4096]).await.unwrap();
            vfs.fsync(&sim, &p, fd).await.unwrap();
            vfs.close(&sim, &p, fd).await.unwrap();
        }),
    )]);
    (
        rig.of("fsync", IoPurpose::JournalCommit),
        rig.of("fsync", IoPurpose::Flush),
    )
}

#[test]
fn journal_submit_commit_record_writes_a_plain_block_then_one_flush_with_journal_async_commit() {
    // JBD2_FEATURE_INCOMPAT_ASYNC_COMMIT: the commit block is WRITE_SYNC, neither flushed
    // before nor FUA; jbd2_journal_commit_transaction then issues one blkdev_issue_flush of
    // the journal's device after it.
    let (commit, flush) = async_commit_fsync(true);
    assert_eq!(
        (commit.writes, commit.flushes, commit.fua),
        (1, 0, 0),
        "{commit:?}"
    );
    assert_eq!(flush.flushes, 1, "{flush:?}");
    // Without barriers neither the commit block nor anything after it asks for a flush.
    let (commit, flush) = async_commit_fsync(false);
    assert_eq!(
        (commit.writes, commit.flushes, commit.fua),
        (1, 0, 0),
        "{commit:?}"
    );
    assert_eq!(flush.flushes, 0, "{flush:?}");
}

#[test]
fn ext4_refuses_journal_async_commit_in_data_ordered_mode_from_3_19() {
    let fs = Ext4Config {
        journal_async_commit: true,
        ..Ext4Config::default()
    };
    assert_eq!(fs.check_kernel(KernelVersion::V3_10), Ok(()));
    let err = fs.check_kernel(KernelVersion::V6_6).unwrap_err();
    assert!(
        err.contains("journal_async_commit") && err.contains("d4f761074353"),
        "{err}"
    );
    let writeback = Ext4Config {
        data: super::mount::DataMode::Writeback,
        ..fs
    };
    assert_eq!(writeback.check_kernel(KernelVersion::V6_6), Ok(()));
    // A scenario's validation says so, naming the table.
    let stack: StackConfig =
        toml::from_str("[kernel]\nversion = \"6.6\"\n[fs]\njournal_async_commit = true\n").unwrap();
    let err = stack.validate().unwrap_err();
    assert!(err.contains("journal_async_commit"), "{err}");
}

// --- writeback's handle around submission --------------------------------------------------

/// 48 256 KiB files written through the page cache, then written back one after the other
/// by a "flusher" task (`filemap_flush`: each file one `ext4_writepages` batch of one bio)
/// into a request queue of 4 requests per direction, so that it sleeps in `get_request`;
/// meanwhile an app fsyncs a new file (its data waits behind the flusher's requests in noop's
/// FIFO; the flusher has files left to write when the commit starts). Returns how long the fsync's commit waited for open
/// handles (`T_LOCKED`, `j_wait_updates`), over every commit.
fn commit_wait_for_handles(version: KernelVersion) -> u64 {
    let block = crate::block::BlockConfig {
        nr_requests: Some(4),
        ..Rig::noop()
    };
    // Filing (4.7+) only adds a wait for data, not for handles: keep it off to isolate them.
    let fs = Ext4Config {
        ordered_delalloc: Some(false),
        ..Ext4Config::default()
    };
    let rig = Rig::new(fs, version, block);
    let written: Vec<String> = (0..48).map(|i| format!("/bg{i}")).collect();
    let flusher = task(move |sim, vfs, p| async move {
        for path in &written {
            let fd = vfs.open(&sim, &p, path, O_CREAT | O_WRONLY).await.unwrap();
            vfs.write(&sim, &p, fd, &vec![3u8; 256 << 10])
                .await
                .unwrap();
            vfs.close(&sim, &p, fd).await.unwrap();
        }
        let issuer = Issuer {
            task: sim.current_task(),
            pid: 2000,
            uid: 0,
            foreground: false,
        };
        for path in &written {
            let ino = vfs.ino_of(path).unwrap();
            vfs.mm.filemap_flush(&sim, ino, issuer).await;
        }
    });
    let app = task(|sim, vfs, p| async move {
        // The flusher is asleep in get_request by now.
        sim.sleep(NS_PER_MS).await;
        let fd = vfs.creat(&sim, &p, "/f").await.unwrap();
        vfs.write(&sim, &p, fd, &[1u8; 4096]).await.unwrap();
        vfs.fsync(&sim, &p, fd).await.unwrap();
        vfs.close(&sim, &p, fd).await.unwrap();
    });
    rig.run(vec![("flusher", flusher), ("app", app)]);
    let counter = |name: &str| {
        rig.vfs
            .fs_counters()
            .into_iter()
            .find(|(n, _)| n == name)
            .map_or(0, |(_, v)| v)
    };
    assert!(counter("jbd2.requested_commits") > 0, "the fsync committed");
    counter("jbd2.commit_ns.updates")
}

#[test]
fn ext4_writepages_stops_its_handle_before_the_final_submit_from_3_11() {
    // 3.10: ext4_da_writepages -> mpage_da_map_and_submit submits the bio inside the handle;
    // the flusher sleeps in get_request holding it, and the commit's T_LOCKED waits for it
    // until a request frees (a 256 KiB write takes 5.3 ms on this device).
    let old = commit_wait_for_handles(KernelVersion::V3_10);
    assert!(old > NS_PER_MS, "3.10's commit waited {old} ns for handles");
    // 3.11+ (4e7ea81db534): ext4_journal_stop before the final ext4_io_submit.
    for version in [KernelVersion::V4_4, KernelVersion::V6_6] {
        let new = commit_wait_for_handles(version);
        assert!(
            new < NS_PER_MS / 10,
            "{version}'s commit waited {new} ns for handles (3.10: {old})"
        );
    }
}

// --- dioread_nolock: writeback into unwritten extents ------------------------------------------

/// What [`bg_writeback_under_a_commit`] saw.
#[derive(Debug)]
struct NolockRun {
    /// `journal_finish_inode_data_buffers`' wait, over every commit.
    data_wait_ns: u64,
    /// `ext4-rsv-conversion` completions handled, and their blocks.
    conversions: u64,
    converted_blocks: u64,
    /// Whether the background file's `fdatasync` after its writeback committed a transaction
    /// (the conversion's) rather than only flushing.
    bg_fdatasync_committed: bool,
}

/// A background task writes 8 MiB to /bg and starts its writeback (`filemap_flush`, as the
/// flusher: ~168 ms on this device); 1 ms later an app creates /f and fsyncs it, committing the
/// transaction in which /bg's blocks were allocated. After /bg's data is on disk, the
/// background task `fdatasync`s /bg.
fn bg_writeback_under_a_commit(version: KernelVersion, dioread_nolock: Option<bool>) -> NolockRun {
    let fs = Ext4Config {
        dioread_nolock,
        discard: false,
        ..Ext4Config::default()
    };
    let rig = Rig::new(fs, version, Rig::noop());
    let bg_committed = Rc::new(std::cell::Cell::new(false));
    let committed = bg_committed.clone();
    let bg = task(move |sim, vfs, p| async move {
        let fd = vfs.open(&sim, &p, "/bg", O_CREAT | O_WRONLY).await.unwrap();
        vfs.write(&sim, &p, fd, &vec![3u8; 8 << 20]).await.unwrap();
        let issuer = Issuer {
            task: sim.current_task(),
            pid: 2000,
            uid: 0,
            foreground: false,
        };
        let ino = vfs.ino_of("/bg").unwrap();
        vfs.mm.filemap_flush(&sim, ino, issuer).await;
        sim.sleep(NS_PER_SEC).await;
        let before = fs_counter(&vfs, "ext4.fsyncs_committed");
        vfs.fdatasync(&sim, &p, fd).await.unwrap();
        committed.set(fs_counter(&vfs, "ext4.fsyncs_committed") > before);
        vfs.close(&sim, &p, fd).await.unwrap();
    });
    let app = task(|sim, vfs, p| async move {
        sim.sleep(NS_PER_MS).await;
        let fd = vfs.creat(&sim, &p, "/f").await.unwrap();
        vfs.fsync(&sim, &p, fd).await.unwrap();
        vfs.close(&sim, &p, fd).await.unwrap();
    });
    rig.run(vec![("bg", bg), ("app", app)]);
    NolockRun {
        data_wait_ns: fs_counter(&rig.vfs, "jbd2.commit_ns.data_wait"),
        conversions: fs_counter(&rig.vfs, "ext4.unwritten_conversions"),
        converted_blocks: fs_counter(&rig.vfs, "ext4.converted_blocks"),
        bg_fdatasync_committed: bg_committed.get(),
    }
}

fn fs_counter(vfs: &Vfs, name: &str) -> u64 {
    vfs.fs_counters()
        .into_iter()
        .find(|(n, _)| n == name)
        .map_or(0, |(_, v)| v)
}

#[test]
fn ext4_map_blocks_files_no_unwritten_blocks_so_a_6_6_commit_does_not_wait_for_background_data() {
    // 6.6 (dioread_nolock by default, 244adf6426ee): ext4_writepages allocates unwritten
    // extents, ext4_map_blocks files nothing (EXT4_MAP_UNWRITTEN), and the app's commit writes
    // its log without waiting for /bg's 8 MiB.
    let nolock = bg_writeback_under_a_commit(KernelVersion::V6_6, None);
    assert_eq!(nolock.data_wait_ns, 0, "{nolock:?}");
    // ext4_end_io_rsv_work converted every block after its bio completed, in a transaction
    // after the app's: /bg's fdatasync commits it (i_datasync_tid moved there).
    assert!(nolock.conversions > 0, "{nolock:?}");
    assert_eq!(nolock.converted_blocks, 2048, "{nolock:?}");
    assert!(nolock.bg_fdatasync_committed, "{nolock:?}");
    // dioread_lock on 6.6: the blocks are written extents filed as ordered data (06bd3c36a733),
    // and the commit waits for /bg's data; /bg's fdatasync then has nothing to commit.
    let lock = bg_writeback_under_a_commit(KernelVersion::V6_6, Some(false));
    assert!(lock.data_wait_ns > 100 * NS_PER_MS, "{lock:?}");
    assert_eq!(lock.conversions, 0, "{lock:?}");
    assert!(!lock.bg_fdatasync_committed, "{lock:?}");
    // 3.10: no dioread_nolock, nothing filed either (f3b59291a69d): no wait, no conversion.
    let old = bg_writeback_under_a_commit(KernelVersion::V3_10, None);
    assert_eq!(old.data_wait_ns, 0, "{old:?}");
    assert_eq!(old.conversions, 0, "{old:?}");
    assert!(!old.bg_fdatasync_committed, "{old:?}");
    // dioread_nolock set on 3.10 (the option exists since 2.6.34): the same conversion, in an
    // ordinary handle (no reserved handles before 3.11, 8f7d89f36829).
    let old_nolock = bg_writeback_under_a_commit(KernelVersion::V3_10, Some(true));
    assert_eq!(old_nolock.data_wait_ns, 0, "{old_nolock:?}");
    assert_eq!(old_nolock.converted_blocks, 2048, "{old_nolock:?}");
    assert!(old_nolock.bg_fdatasync_committed, "{old_nolock:?}");
}

#[test]
fn ext4_sync_file_waits_for_the_conversion_of_the_files_unwritten_extents_on_6_6() {
    // file_write_and_wait_range waits for the pages' writeback, which ext4_end_bio leaves to
    // the conversion work (ext4_release_io_end -> ext4_finish_bio); the conversion moved
    // i_datasync_tid to its transaction, which ext4_sync_file commits.
    let rig = Rig::new(Ext4Config::default(), KernelVersion::V6_6, Rig::noop());
    rig.run(vec![(
        "app",
        task(|sim, vfs, p| async move {
            let fd = vfs.creat(&sim, &p, "/f").await.unwrap();
            vfs.write(&sim, &p, fd, &vec![1u8; 1 << 20]).await.unwrap();
            vfs.fsync(&sim, &p, fd).await.unwrap();
            assert_eq!(fs_counter(&vfs, "ext4.converted_blocks"), 256);
            // The conversion's transaction committed with the fsync: a second fdatasync finds
            // i_datasync_tid committed and only flushes.
            let flush_only = fs_counter(&vfs, "ext4.fsyncs_flush_only");
            vfs.fdatasync(&sim, &p, fd).await.unwrap();
            assert_eq!(fs_counter(&vfs, "ext4.fsyncs_flush_only"), flush_only + 1);
            vfs.close(&sim, &p, fd).await.unwrap();
        }),
    )]);
}
