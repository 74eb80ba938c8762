//! F2FS mounted under the VFS and page cache over a fixed-latency device: what each system call
//! writes, when F2FS checkpoints, garbage collection on a nearly full partition, atomic writes,
//! and the checkpoint invariants (on in debug builds) after many operations.

use crate::dev::fixed::FixedLatencyDevice;
use crate::fs::ext4::{Ext4Config, FsKind};
use crate::fs::vfs::{Process, Vfs, O_CREAT, O_RDONLY, O_RDWR, O_WRONLY};
use crate::fs::FsIoctl;
use crate::kernel::{CpuConfig, Hz};
use crate::mm::bio::{IoCount, IoPurpose};
use crate::mm::VmConfig;
use crate::sim::{Sim, Simulation};
use crate::units::{NS_PER_SEC, NS_PER_US, PAGE_SIZE};
use std::collections::BTreeMap;
use std::future::Future;
use std::rc::Rc;

const UID: u32 = 10_000;

fn f2fs() -> Ext4Config {
    Ext4Config {
        kind: FsKind::F2fs,
        ..Ext4Config::default()
    }
}

struct Rig {
    sim: Simulation,
    vfs: Rc<Vfs>,
}

impl Rig {
    fn new(fs: Ext4Config, size: u64) -> Rig {
        let sim = Simulation::new(1);
        // 100 us + 50 MB/s (eMMC 4.5 sequential write, REFERENCES.md), one slot.
        let device = Box::new(FixedLatencyDevice::new(1, 100 * NS_PER_US, 50_000_000));
        let queue = crate::block::build_queue(device, "noop", true).expect("noop");
        let layer = crate::block::layer::BlockLayer::new(&sim.handle(), queue);
        let vfs = crate::stack::storage_with_fs_on_layer(
            &sim.handle(),
            VmConfig::android(),
            Hz(200),
            CpuConfig::zero_cost(),
            &fs,
            layer,
            size,
        )
        .expect("valid storage");
        vfs.enable_checks();
        Rig { sim, vfs }
    }

    fn run<F, Fut>(&self, body: F)
    where
        F: FnOnce(Sim, Rc<Vfs>, Process) -> Fut + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        crate::fs::test_support::run_app(&self.sim, &self.vfs, UID, body);
        assert_eq!(
            self.vfs.end_of_run_violation(&self.sim.handle()),
            None,
            "F2FS invariants"
        );
    }

    fn counter(&self, name: &str) -> u64 {
        self.vfs
            .fs_counters()
            .into_iter()
            .find(|(n, _)| n == &format!("f2fs.{name}"))
            .unwrap_or_else(|| panic!("no counter f2fs.{name}"))
            .1
    }

    /// The app's counts for `syscall`, by purpose.
    fn of(&self, syscall: &str) -> BTreeMap<IoPurpose, IoCount> {
        self.vfs
            .mm
            .bdev
            .io_account()
            .expect("kept")
            .rows()
            .into_iter()
            .filter(|r| r.uid == UID && r.cause == syscall)
            .map(|r| (r.purpose, r.count))
            .collect()
    }
}

/// Writes (count) by purpose, and the flushes, of `counts`.
fn writes(counts: &BTreeMap<IoPurpose, IoCount>) -> (BTreeMap<IoPurpose, u64>, u64) {
    let writes = counts
        .iter()
        .filter(|(_, c)| c.writes > 0)
        .map(|(&p, c)| (p, c.writes))
        .collect();
    (writes, counts.values().map(|c| c.flushes).sum())
}

#[test]
fn creat_write_fsync_writes_the_data_and_the_inode_block_then_flushes_no_checkpoint() {
    let rig = Rig::new(f2fs(), 1 << 30);
    assert_eq!(rig.vfs.fs_name(), "f2fs");
    rig.run(|sim, vfs, p| async move {
        let fd = vfs.creat(&sim, &p, "/f").await.unwrap();
        vfs.write(&sim, &p, fd, &[1u8; 4096]).await.unwrap();
        vfs.fsync(&sim, &p, fd).await.unwrap();
        vfs.close(&sim, &p, fd).await.unwrap();
    });
    let fsync = rig.of("fsync");
    let expected: BTreeMap<_, _> = [(IoPurpose::Data, 1), (IoPurpose::Node, 1)].into();
    assert_eq!(writes(&fsync), (expected, 1), "{fsync:?}");
    assert!(
        rig.of("creat").is_empty(),
        "creat writes nothing until fsync"
    );
    assert_eq!(rig.counter("fsync_roll_forward"), 1);
    assert_eq!(rig.counter("checkpoints"), 0, "the root is checkpointed");
    assert_eq!(rig.counter("opu_pages"), 1);
}

#[test]
fn fdatasync_of_an_overwrite_updates_in_place_and_only_flushes() {
    let rig = Rig::new(f2fs(), 1 << 30);
    rig.vfs
        .populate(&rig.sim.handle(), "/db", 8 * PAGE_SIZE)
        .unwrap();
    rig.run(|sim, vfs, p| async move {
        let fd = vfs.open(&sim, &p, "/db", O_RDWR).await.unwrap();
        vfs.pwrite(&sim, &p, fd, &[2u8; 4096], 4096).await.unwrap();
        vfs.fdatasync(&sim, &p, fd).await.unwrap();
        // A larger fsync (more than min_fsync_blocks dirty pages) goes out of place.
        for i in 0..8u64 {
            vfs.pwrite(&sim, &p, fd, &[3u8; 4096], i * 4096)
                .await
                .unwrap();
        }
        vfs.pwrite(&sim, &p, fd, &[3u8; 4096], 8 * 4096)
            .await
            .unwrap();
        vfs.fsync(&sim, &p, fd).await.unwrap();
        vfs.close(&sim, &p, fd).await.unwrap();
    });
    let fdatasync = rig.of("fdatasync");
    let expected: BTreeMap<_, _> = [(IoPurpose::Data, 1)].into();
    assert_eq!(writes(&fdatasync), (expected, 1), "{fdatasync:?}");
    assert_eq!(rig.counter("ipu_pages"), 1);
    assert_eq!(rig.counter("fsync_flush_only"), 1);
    assert_eq!(rig.counter("opu_pages"), 9);
    let fsync = rig.of("fsync");
    assert!(fsync[&IoPurpose::Node].writes >= 1, "{fsync:?}");
}

#[test]
fn a_file_in_a_new_directory_and_a_directory_fsync_checkpoint() {
    let rig = Rig::new(f2fs(), 1 << 30);
    rig.run(|sim, vfs, p| async move {
        vfs.mkdir(&sim, &p, "/d").await.unwrap();
        let fd = vfs.creat(&sim, &p, "/d/f").await.unwrap();
        vfs.write(&sim, &p, fd, &[1u8; 4096]).await.unwrap();
        // need_do_checkpoint: the parent /d is not checkpointed.
        vfs.fsync(&sim, &p, fd).await.unwrap();
        vfs.close(&sim, &p, fd).await.unwrap();
        // A directory's fsync always checkpoints (CP_NON_REGULAR), unless nothing changed.
        let dir = vfs.open(&sim, &p, "/d", O_RDONLY).await.unwrap();
        vfs.fsync(&sim, &p, dir).await.unwrap();
        let fd = vfs.creat(&sim, &p, "/d/g").await.unwrap();
        vfs.fsync(&sim, &p, dir).await.unwrap();
        vfs.close(&sim, &p, fd).await.unwrap();
        vfs.close(&sim, &p, dir).await.unwrap();
    });
    assert_eq!(rig.counter("cp_parent_not_checkpointed"), 1);
    assert_eq!(rig.counter("cp_fsync_dir"), 2);
    assert_eq!(rig.counter("checkpoints"), 2);
    assert_eq!(rig.counter("cp_skipped_clean"), 1);
    let fsync = rig.of("fsync");
    // Two CP packs: each the CP block, a summary block, the second CP block (PREFLUSH+FUA),
    // and a flush before it.
    assert_eq!(fsync[&IoPurpose::CpPack].writes, 4, "{fsync:?}");
    assert_eq!(fsync[&IoPurpose::CpPack].fua, 2, "{fsync:?}");
    assert!(fsync[&IoPurpose::Node].writes >= 3, "{fsync:?}");
}

#[test]
fn a_rename_across_directories_makes_the_next_fsync_checkpoint() {
    let rig = Rig::new(f2fs(), 1 << 30);
    rig.run(|sim, vfs, p| async move {
        vfs.mkdir(&sim, &p, "/a").await.unwrap();
        vfs.mkdir(&sim, &p, "/b").await.unwrap();
        let fd = vfs.creat(&sim, &p, "/a/f").await.unwrap();
        vfs.close(&sim, &p, fd).await.unwrap();
        let dir = vfs.open(&sim, &p, "/a", O_RDONLY).await.unwrap();
        vfs.fsync(&sim, &p, dir).await.unwrap();
        vfs.close(&sim, &p, dir).await.unwrap();
        vfs.rename(&sim, &p, "/a/f", "/b/f").await.unwrap();
        let fd = vfs.open(&sim, &p, "/b/f", O_RDWR).await.unwrap();
        vfs.fsync(&sim, &p, fd).await.unwrap();
        vfs.close(&sim, &p, fd).await.unwrap();
    });
    assert_eq!(rig.counter("cp_wrong_pino"), 1);
    assert_eq!(rig.counter("checkpoints"), 2);
}

/// A 128 MiB F2FS (mkfs's coarse overprovisioning table, a few dozen reserved segments) with
/// `/big` filling `percent` % of what users may use, on disk. Returns its pages.
fn nearly_full(rig: &Rig, percent: u64) -> u64 {
    let layout = crate::fs::f2fs::layout::Layout::format(128 << 20).unwrap();
    let pages = layout.user_blocks() * percent / 100;
    rig.vfs
        .populate(&rig.sim.handle(), "/big", pages * PAGE_SIZE)
        .unwrap();
    pages
}

/// Rewrites `writes` random pages of `/big` (`pages` long) with an fsync every 64 writes and
/// at the end: the old copies become scattered invalid blocks.
async fn rewrite_at_random(sim: &Sim, vfs: &Vfs, p: &Process, pages: u64, writes: u64) {
    let fd = vfs.open(sim, p, "/big", O_WRONLY).await.unwrap();
    let mut rng = sim.rng("f2fs-tests/rewrite");
    for i in 0..writes {
        let page = rng.below(pages);
        vfs.pwrite(sim, p, fd, &[5u8; 4096], page * PAGE_SIZE)
            .await
            .unwrap();
        if i % 64 == 63 {
            vfs.fsync(sim, p, fd).await.unwrap();
        }
    }
    vfs.fsync(sim, p, fd).await.unwrap();
    vfs.close(sim, p, fd).await.unwrap();
}

#[test]
fn foreground_gc_frees_sections_on_a_nearly_full_partition_and_keeps_the_invariants() {
    let rig = Rig::new(f2fs(), 128 << 20);
    // 85 % full, rewritten three times over: free segments run out; GC must clean.
    let file_pages = nearly_full(&rig, 85);
    rig.run(move |sim, vfs, p| async move {
        rewrite_at_random(&sim, &vfs, &p, file_pages, file_pages * 3).await;
    });
    assert!(rig.counter("fg_gc_segments") > 0, "foreground GC ran");
    assert!(
        rig.counter("cp_gc") > 0,
        "each foreground GC ends in a checkpoint"
    );
    // Greedy victims: whatever segments hold the fewest valid blocks (here mostly node
    // segments, whose blocks every fsync rewrites).
    assert!(rig.counter("gc_moved_data") + rig.counter("gc_moved_nodes") > 0);
    assert_eq!(rig.counter("no_space"), 0, "GC kept up");
    assert!(
        rig.counter("gc_wait_us") > 0,
        "the writer waited in f2fs_balance_fs"
    );
}

#[test]
fn lfs_mode_never_recycles_slack_space() {
    let mut fs = f2fs();
    fs.mode = Some(crate::fs::f2fs::F2fsMode::Lfs);
    let rig = Rig::new(fs, 128 << 20);
    let file_pages = nearly_full(&rig, 80);
    rig.run(move |sim, vfs, p| async move {
        rewrite_at_random(&sim, &vfs, &p, file_pages, file_pages * 2).await;
    });
    assert_eq!(rig.counter("ssr_segments"), 0);
    assert_eq!(
        rig.counter("ipu_pages"),
        0,
        "lfs mode writes nothing in place"
    );
    assert!(rig.counter("fg_gc_segments") > 0);
}

#[test]
fn atomic_writes_stay_in_memory_until_the_commit_writes_them_with_a_fua_node() {
    let rig = Rig::new(f2fs(), 1 << 30);
    rig.vfs
        .populate(&rig.sim.handle(), "/db", 4 * PAGE_SIZE)
        .unwrap();
    rig.run(|sim, vfs, p| async move {
        let fd = vfs.open(&sim, &p, "/db", O_RDWR).await.unwrap();
        vfs.ioctl(&sim, &p, fd, FsIoctl::StartAtomicWrite)
            .await
            .unwrap();
        for i in 0..3u64 {
            vfs.pwrite(&sim, &p, fd, &[1u8; 4096], i * 4096)
                .await
                .unwrap();
        }
        // Past dirty_expire and a flusher period: writeback leaves the pages alone.
        sim.sleep(40 * NS_PER_SEC).await;
        let ino = vfs.ino_of("/db").unwrap();
        assert_eq!(vfs.mm.dirty_pages(ino), 3, "held back from writeback");
        vfs.ioctl(&sim, &p, fd, FsIoctl::CommitAtomicWrite)
            .await
            .unwrap();
        assert_eq!(vfs.mm.dirty_pages(ino), 0);
        // An aborted batch: its pages are dropped, nothing is written.
        vfs.ioctl(&sim, &p, fd, FsIoctl::StartAtomicWrite)
            .await
            .unwrap();
        vfs.pwrite(&sim, &p, fd, &[2u8; 4096], 0).await.unwrap();
        vfs.ioctl(&sim, &p, fd, FsIoctl::AbortAtomicWrite)
            .await
            .unwrap();
        assert_eq!(vfs.mm.dirty_pages(ino), 0);
        vfs.close(&sim, &p, fd).await.unwrap();
    });
    let ioctl = rig.of("ioctl");
    assert_eq!(
        ioctl[&IoPurpose::Data].writes,
        1,
        "one bio of three pages: {ioctl:?}"
    );
    assert_eq!(ioctl[&IoPurpose::Data].write_bytes, 3 * 4096);
    assert_eq!(ioctl[&IoPurpose::Node].writes, 1);
    assert_eq!(
        ioctl[&IoPurpose::Node].fua,
        1,
        "the FSYNC-marked node is FUA"
    );
    assert_eq!(rig.counter("atomic_commits"), 1);
    assert_eq!(rig.counter("atomic_aborts"), 1);
    assert_eq!(
        rig.counter("opu_pages"),
        3,
        "the aborted page was never written"
    );
}

#[test]
fn ext4_answers_the_atomic_ioctls_with_enotty() {
    let rig = Rig::new(Ext4Config::default(), 1 << 30);
    assert!(!rig.vfs.supports_atomic_write());
    rig.run(|sim, vfs, p| async move {
        let fd = vfs.open(&sim, &p, "/f", O_CREAT | O_RDWR).await.unwrap();
        assert_eq!(
            vfs.ioctl(&sim, &p, fd, FsIoctl::StartAtomicWrite).await,
            Err(crate::errno::Errno::ENOTTY)
        );
        vfs.close(&sim, &p, fd).await.unwrap();
    });
}

#[test]
fn many_creates_unlinks_and_overwrites_leave_a_consistent_checkpoint() {
    let mut fs = f2fs();
    fs.checkpoint_interval = Some(2 * NS_PER_SEC);
    let rig = Rig::new(fs, 256 << 20);
    rig.run(|sim, vfs, p| async move {
        vfs.mkdir(&sim, &p, "/d").await.unwrap();
        for round in 0..300u64 {
            let path = format!("/d/f{}", round % 37);
            let fd = vfs.open(&sim, &p, &path, O_CREAT | O_RDWR).await.unwrap();
            let pages = 1 + round % 5;
            for i in 0..pages {
                vfs.pwrite(&sim, &p, fd, &[1u8; 4096], (i + round % 3) * 4096)
                    .await
                    .unwrap();
            }
            match round % 4 {
                0 => vfs.fsync(&sim, &p, fd).await.unwrap(),
                1 => vfs.fdatasync(&sim, &p, fd).await.unwrap(),
                _ => {}
            }
            vfs.close(&sim, &p, fd).await.unwrap();
            if round % 7 == 3 {
                let _ = vfs.unlink(&sim, &p, &path).await;
            }
            if round % 11 == 5 {
                let _ = vfs.rename(&sim, &p, &path, "/d/renamed").await;
            }
            sim.sleep(50_000_000).await;
        }
    });
    assert!(rig.counter("checkpoints") >= 3, "periodic checkpoints ran");
}

#[test]
fn f2fs_options_are_checked() {
    let ext4 = Ext4Config {
        fsync_mode: Some(crate::fs::f2fs::FsyncMode::Strict),
        ..Ext4Config::default()
    };
    assert!(ext4.validate().unwrap_err().contains("type"));
    let mut fs = f2fs();
    fs.active_logs = Some(3);
    assert!(fs.validate().unwrap_err().contains("active_logs"));
    let mut fs = f2fs();
    fs.f2fs_preset = Some(crate::fs::f2fs::F2fsPreset::Android);
    let config = fs.f2fs_config().unwrap();
    assert_eq!(config.fsync_mode, crate::fs::f2fs::FsyncMode::Nobarrier);
    assert!(config.discard);
}

#[test]
fn nobarrier_fsync_sends_no_flush() {
    let mut fs = f2fs();
    fs.fsync_mode = Some(crate::fs::f2fs::FsyncMode::Nobarrier);
    let rig = Rig::new(fs, 1 << 30);
    rig.run(|sim, vfs, p| async move {
        let fd = vfs.creat(&sim, &p, "/f").await.unwrap();
        vfs.write(&sim, &p, fd, &[1u8; 4096]).await.unwrap();
        vfs.fsync(&sim, &p, fd).await.unwrap();
        vfs.close(&sim, &p, fd).await.unwrap();
    });
    assert_eq!(writes(&rig.of("fsync")).1, 0);
}

#[test]
fn the_gc_thread_cleans_a_victim_once_the_file_system_is_idle() {
    let rig = Rig::new(f2fs(), 256 << 20);
    rig.vfs
        .populate(&rig.sim.handle(), "/big", 4096 * PAGE_SIZE)
        .unwrap();
    rig.run(|sim, vfs, p| async move {
        let fd = vfs.open(&sim, &p, "/big", O_WRONLY).await.unwrap();
        // Every fourth page rewritten: the file's old segments keep three quarters valid.
        for page in (0..4096u64).step_by(4) {
            vfs.pwrite(&sim, &p, fd, &[5u8; 4096], page * PAGE_SIZE)
                .await
                .unwrap();
        }
        vfs.fsync(&sim, &p, fd).await.unwrap();
        vfs.close(&sim, &p, fd).await.unwrap();
        // Busy for the GC thread's first wake-ups, then idle for two minutes.
        sim.sleep(120 * NS_PER_SEC).await;
    });
    assert!(rig.counter("bg_gc_segments") > 0, "the GC thread ran");
    assert!(rig.counter("gc_moved_data") > 0);
    assert_eq!(rig.counter("fg_gc_segments"), 0, "plenty of free sections");
    assert!(rig.counter("cp_periodic") > 0, "balance_fs_bg's checkpoint");
}

#[test]
fn a_small_file_lives_in_its_inode_block_until_it_outgrows_it() {
    let rig = Rig::new(f2fs(), 1 << 30);
    rig.run(|sim, vfs, p| async move {
        let fd = vfs.creat(&sim, &p, "/prefs.xml").await.unwrap();
        vfs.write(&sim, &p, fd, &[1u8; 1024]).await.unwrap();
        vfs.fsync(&sim, &p, fd).await.unwrap();
        vfs.close(&sim, &p, fd).await.unwrap();
        // Past MAX_INLINE_DATA (3,488 bytes): the data leaves the inode block.
        let fd = vfs
            .open(&sim, &p, "/prefs.xml", O_WRONLY | crate::fs::vfs::O_APPEND)
            .await
            .unwrap();
        vfs.write(&sim, &p, fd, &[2u8; 4096]).await.unwrap();
        vfs.fdatasync(&sim, &p, fd).await.unwrap();
        vfs.close(&sim, &p, fd).await.unwrap();
    });
    let fsync = rig.of("fsync");
    let expected: BTreeMap<_, _> = [(IoPurpose::Node, 1)].into();
    assert_eq!(
        writes(&fsync),
        (expected, 1),
        "inline: the inode block only: {fsync:?}"
    );
    assert_eq!(rig.counter("inline_writes"), 1);
    assert_eq!(rig.counter("inline_conversions"), 1);
    let fdatasync = rig.of("fdatasync");
    assert_eq!(
        fdatasync[&IoPurpose::Data].write_bytes,
        2 * 4096,
        "{fdatasync:?}"
    );
}

#[test]
fn without_inline_data_a_small_file_takes_a_block() {
    let mut fs = f2fs();
    fs.inline_data = Some(false);
    let rig = Rig::new(fs, 1 << 30);
    rig.run(|sim, vfs, p| async move {
        let fd = vfs.creat(&sim, &p, "/prefs.xml").await.unwrap();
        vfs.write(&sim, &p, fd, &[1u8; 1024]).await.unwrap();
        vfs.fsync(&sim, &p, fd).await.unwrap();
        vfs.close(&sim, &p, fd).await.unwrap();
    });
    let expected: BTreeMap<_, _> = [(IoPurpose::Data, 1), (IoPurpose::Node, 1)].into();
    assert_eq!(writes(&rig.of("fsync")), (expected, 1));
    assert_eq!(rig.counter("inline_writes"), 0);
}

#[test]
fn files_and_directories_made_at_setup_are_checkpointed() {
    let rig = Rig::new(f2fs(), 1 << 30);
    for d in 0..7 {
        rig.vfs
            .mkdir_all(&rig.sim.handle(), &format!("/setup/dir{d}"))
            .unwrap();
    }
    for i in 0..500 {
        rig.vfs
            .populate(
                &rig.sim.handle(),
                &format!("/setup/dir{}/f{i}", i % 7),
                8192,
            )
            .unwrap();
    }
    rig.run(|sim, vfs, p| async move {
        // A new file in a directory made at setup: its parent is checkpointed, so fsync
        // writes roll-forward nodes and checkpoints nothing.
        let fd = vfs.creat(&sim, &p, "/setup/dir3/new").await.unwrap();
        vfs.write(&sim, &p, fd, &[1u8; 4096]).await.unwrap();
        vfs.fsync(&sim, &p, fd).await.unwrap();
        vfs.close(&sim, &p, fd).await.unwrap();
    });
    assert_eq!(rig.counter("checkpoints"), 0);
    assert_eq!(rig.counter("fsync_roll_forward"), 1);
}

#[test]
fn sync_writes_every_dirty_page_and_checkpoints_f2fs_or_commits_ext4() {
    for fs in [f2fs(), Ext4Config::default()] {
        let is_f2fs = fs.kind == FsKind::F2fs;
        let rig = Rig::new(fs, 1 << 30);
        rig.run(|sim, vfs, p| async move {
            for name in ["/a", "/b"] {
                let fd = vfs.creat(&sim, &p, name).await.unwrap();
                vfs.write(&sim, &p, fd, &[1u8; 8192]).await.unwrap();
                vfs.close(&sim, &p, fd).await.unwrap();
            }
            vfs.sync(&sim, &p).await.unwrap();
            for name in ["/a", "/b"] {
                assert_eq!(vfs.mm.dirty_pages(vfs.ino_of(name).unwrap()), 0);
            }
        });
        let sync = rig.of("sync");
        assert_eq!(sync[&IoPurpose::Data].write_bytes, 4 * 4096, "{sync:?}");
        if is_f2fs {
            assert_eq!(rig.counter("cp_sync"), 1);
            assert_eq!(rig.counter("checkpoints"), 1);
            assert!(sync[&IoPurpose::CpPack].fua >= 1, "{sync:?}");
        } else {
            assert_eq!(sync[&IoPurpose::JournalCommit].writes, 1, "{sync:?}");
        }
    }
}
