//! The block I/O account by purpose (issue 10) of single system calls on ext4 ordered: which
//! bios each call causes, what they carry and how many cache flushes they ask for.

use crate::dev::fixed::FixedLatencyDevice;
use crate::fs::ext4::Ext4Config;
use crate::fs::vfs::{Process, Vfs, O_APPEND, O_WRONLY};
use crate::kernel::{CpuConfig, Hz, KernelConfig, KernelVersion};
use crate::mm::bio::{IoAccountRow, IoCount, IoPurpose};
use crate::mm::VmConfig;
use crate::sim::{Sim, Simulation};
use crate::units::NS_PER_US;
use std::collections::BTreeMap;
use std::future::Future;
use std::rc::Rc;

const UID: u32 = 10_000;

struct Rig {
    sim: Simulation,
    vfs: Rc<Vfs>,
    layer: crate::block::layer::BlockLayer,
}

impl Rig {
    fn new(fs: Ext4Config) -> Rig {
        Rig::on(fs, FixedLatencyDevice::new(1, 100 * NS_PER_US, 50_000_000))
    }

    /// Over `device` (default: 100 us + 50 MB/s, eMMC 4.5 sequential write, REFERENCES.md, one
    /// slot).
    fn on(fs: Ext4Config, device: FixedLatencyDevice) -> Rig {
        Rig::with_kernel(fs, device, KernelVersion::default())
    }

    /// Over `device`, following Linux `version` where versions differ.
    fn with_kernel(fs: Ext4Config, device: FixedLatencyDevice, version: KernelVersion) -> Rig {
        let sim = Simulation::new(1);
        let device = Box::new(device);
        let queue = crate::block::build_queue(device, "noop", true).expect("noop");
        let layer = crate::block::layer::BlockLayer::new(&sim.handle(), queue);
        let kernel = KernelConfig {
            version,
            hz: Hz(200),
            ..Default::default()
        };
        let vfs = crate::stack::storage_with_kernel_on_layer(
            &sim.handle(),
            VmConfig::android(),
            &kernel,
            CpuConfig::zero_cost(),
            &fs,
            layer.clone(),
            1 << 30,
        )
        .expect("valid storage");
        Rig { sim, vfs, layer }
    }

    fn run<F, Fut>(&self, body: F)
    where
        F: FnOnce(Sim, Rc<Vfs>, Process) -> Fut + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        crate::fs::test_support::run_app(&self.sim, &self.vfs, UID, body);
    }

    fn rows(&self) -> Vec<IoAccountRow> {
        self.vfs.mm.bdev.io_account().expect("kept").rows()
    }

    /// The app's counts for `syscall`, by purpose.
    fn of(&self, syscall: &str) -> BTreeMap<IoPurpose, IoCount> {
        self.rows()
            .into_iter()
            .filter(|r| r.uid == UID && r.cause == syscall)
            .map(|r| (r.purpose, r.count))
            .collect()
    }
}

/// Writes (count, bytes) by purpose, and the flushes, of `counts`.
fn writes(counts: &BTreeMap<IoPurpose, IoCount>) -> (BTreeMap<IoPurpose, (u64, u64)>, u64) {
    let writes = counts
        .iter()
        .filter(|(_, c)| c.writes > 0)
        .map(|(&p, c)| (p, (c.writes, c.write_bytes)))
        .collect();
    (writes, counts.values().map(|c| c.flushes).sum())
}

#[test]
fn creat_write_fsync_costs_data_a_descriptor_five_copies_and_a_flushed_commit() {
    let rig = Rig::new(Ext4Config::default());
    rig.run(|sim, vfs, p| async move {
        let fd = vfs.creat(&sim, &p, "/f").await.unwrap();
        vfs.write(&sim, &p, fd, &[1u8; 4096]).await.unwrap();
        vfs.fsync(&sim, &p, fd).await.unwrap();
        vfs.close(&sim, &p, fd).await.unwrap();
    });
    // creat and write only read metadata (into the journal's running transaction); fsync writes
    // the data (delayed allocation: allocated now, reading the block bitmap) and the commit:
    // the inode bitmap, group descriptor, inode-table block (the new inode and the root
    // directory's share it), directory block and block bitmap, one descriptor for them, and the
    // commit block with a preceding flush and FUA (WRITE_FLUSH_FUA).
    let creat = rig.of("creat");
    assert_eq!(writes(&creat), (BTreeMap::new(), 0), "{creat:?}");
    assert_eq!(
        creat.keys().copied().collect::<Vec<_>>(),
        vec![
            IoPurpose::GroupDesc,
            IoPurpose::InodeBitmap,
            IoPurpose::Inode,
            IoPurpose::Directory
        ],
        "creat reads the buffers it journals"
    );
    assert!(
        rig.of("write").is_empty(),
        "a delayed-allocation write is all in memory"
    );
    let fsync = rig.of("fsync");
    let expected: BTreeMap<_, _> = [
        (IoPurpose::Data, (1, 4096)),
        (IoPurpose::JournalDescriptor, (1, 4096)),
        (IoPurpose::JournalMetadata, (5, 5 * 4096)),
        (IoPurpose::JournalCommit, (1, 4096)),
    ]
    .into();
    assert_eq!(writes(&fsync), (expected, 1), "{fsync:?}");
    assert_eq!(fsync[&IoPurpose::JournalCommit].fua, 1);
    assert_eq!(fsync[&IoPurpose::BlockBitmap].reads, 1);
}

#[test]
fn append_fdatasync_commits_the_allocation_and_the_size() {
    let rig = Rig::new(Ext4Config::default());
    rig.vfs.populate(&rig.sim.handle(), "/log", 8192).unwrap();
    rig.run(|sim, vfs, p| async move {
        let fd = vfs
            .open(&sim, &p, "/log", O_WRONLY | O_APPEND)
            .await
            .unwrap();
        vfs.write(&sim, &p, fd, &[1u8; 4096]).await.unwrap();
        vfs.fdatasync(&sim, &p, fd).await.unwrap();
        vfs.close(&sim, &p, fd).await.unwrap();
    });
    // The size changed, so fdatasync commits (i_datasync_tid): block bitmap, group descriptor
    // and inode (its in-inode extent grew), behind the data.
    let fdatasync = rig.of("fdatasync");
    let expected: BTreeMap<_, _> = [
        (IoPurpose::Data, (1, 4096)),
        (IoPurpose::JournalDescriptor, (1, 4096)),
        (IoPurpose::JournalMetadata, (3, 3 * 4096)),
        (IoPurpose::JournalCommit, (1, 4096)),
    ]
    .into();
    assert_eq!(writes(&fdatasync), (expected, 1), "{fdatasync:?}");
}

#[test]
fn rename_then_fsync_of_the_directory_commits_two_blocks() {
    let rig = Rig::new(Ext4Config::default());
    rig.vfs.populate(&rig.sim.handle(), "/a", 8192).unwrap();
    rig.run(|sim, vfs, p| async move {
        vfs.rename(&sim, &p, "/a", "/b").await.unwrap();
        let dir = vfs.open(&sim, &p, "/", 0).await.unwrap();
        vfs.fsync(&sim, &p, dir).await.unwrap();
    });
    // rename reads the directory block; the directory's fsync commits it and the inode-table
    // block holding the directory's and the file's inodes.
    let rename = rig.of("rename");
    assert_eq!(writes(&rename), (BTreeMap::new(), 0));
    assert_eq!(rename[&IoPurpose::Directory].reads, 1);
    let expected: BTreeMap<_, _> = [
        (IoPurpose::JournalDescriptor, (1, 4096)),
        (IoPurpose::JournalMetadata, (2, 2 * 4096)),
        (IoPurpose::JournalCommit, (1, 4096)),
    ]
    .into();
    assert_eq!(writes(&rig.of("fsync")), (expected, 1));
}

#[test]
fn without_barriers_fsync_asks_for_no_flush_and_a_timer_commit_is_the_journal_threads() {
    let rig = Rig::new(Ext4Config {
        barrier: false,
        ..Ext4Config::default()
    });
    rig.run(|sim, vfs, p| async move {
        let fd = vfs.creat(&sim, &p, "/f").await.unwrap();
        vfs.write(&sim, &p, fd, &[1u8; 4096]).await.unwrap();
        vfs.fsync(&sim, &p, fd).await.unwrap();
        // A second file's creation commits by the journal thread's 5 s timer.
        let _ = vfs.creat(&sim, &p, "/g").await.unwrap();
        sim.sleep(6 * crate::units::NS_PER_SEC).await;
    });
    let fsync = rig.of("fsync");
    let (w, flushes) = writes(&fsync);
    assert_eq!(flushes, 0, "barrier=0: a plain WRITE_SYNC commit block");
    assert_eq!(w[&IoPurpose::JournalCommit], (1, 4096));
    assert_eq!(fsync[&IoPurpose::JournalCommit].fua, 0);
    let jbd2: Vec<_> = rig
        .rows()
        .into_iter()
        .filter(|r| r.cause.starts_with("[jbd2"))
        .collect();
    assert!(
        jbd2.iter()
            .any(|r| r.uid == 0 && r.purpose == IoPurpose::JournalCommit),
        "{jbd2:?}"
    );
}

#[test]
fn fsync_data_writes_carry_req_noidle_and_background_writeback_does_not() {
    // include/linux/fs.h (3.10): WB_SYNC_ALL writeback writes with WRITE_SYNC =
    // REQ_SYNC | REQ_NOIDLE (so CFQ does not idle after an fsync's last write); the flusher's
    // WB_SYNC_NONE writeback with plain WRITE. Kills the mutant that drops REQ_NOIDLE in
    // writeback's bio (`noidle: sync` -> `noidle: false`), which every other test survived.
    let rig = Rig::new(Ext4Config::default());
    rig.run(|sim, vfs, p| async move {
        let fd = vfs.creat(&sim, &p, "/synced").await.unwrap();
        vfs.write(&sim, &p, fd, &[1u8; 16384]).await.unwrap();
        vfs.fsync(&sim, &p, fd).await.unwrap();
        let bg = vfs.creat(&sim, &p, "/background").await.unwrap();
        vfs.write(&sim, &p, bg, &[2u8; 16384]).await.unwrap();
        // Past dirty_expire (Android: 2 s, VmConfig::android) and a kupdate period.
        sim.sleep(10 * crate::units::NS_PER_SEC).await;
    });
    let trace = rig
        .layer
        .with_queue(|q| q.trace().cloned())
        .expect("traced");
    let data_writes: Vec<(String, crate::dev::IoFlags)> = trace
        .events()
        .iter()
        .filter(|e| {
            e.action == crate::block::blktrace::Action::Queue
                && e.op == crate::dev::IoOp::Write
                && !e.comm.starts_with("jbd2")
        })
        .map(|e| (e.comm.clone(), e.flags))
        .collect();
    let from = |prefix: &'static str| {
        data_writes
            .iter()
            .filter(move |(c, _)| c.starts_with(prefix))
    };
    assert!(from("app").count() > 0, "{data_writes:?}");
    assert!(
        from("app").all(|(_, f)| f.sync && f.noidle),
        "fsync's data writes are WRITE_SYNC: {data_writes:?}"
    );
    assert!(from("flush").count() > 0, "{data_writes:?}");
    assert!(
        from("flush").all(|(_, f)| !f.sync && !f.noidle),
        "the flusher's writes are plain WRITE: {data_writes:?}"
    );
}

#[test]
fn blktrace_marks_metadata_reads_m_and_journal_writes_as_3_10_does() {
    let rig = Rig::new(Ext4Config::default());
    rig.run(|sim, vfs, p| async move {
        let fd = vfs.creat(&sim, &p, "/f").await.unwrap();
        vfs.write(&sim, &p, fd, &[1u8; 4096]).await.unwrap();
        vfs.fsync(&sim, &p, fd).await.unwrap();
    });
    let trace = rig
        .layer
        .with_queue(|q| q.trace().cloned())
        .expect("traced");
    let queued: Vec<(String, String)> = trace
        .events()
        .iter()
        .filter(|e| e.action == crate::block::blktrace::Action::Queue)
        .map(|e| {
            (
                e.comm.clone(),
                crate::block::blktrace::rwbs(e.op, e.flags, e.nr_sectors),
            )
        })
        .collect();
    let of = |comm_prefix: &str, rwbs: &str| {
        queued
            .iter()
            .filter(|(c, r)| c.starts_with(comm_prefix) && r == rwbs)
            .count()
    };
    // Inode bitmap, inode table, directory and block bitmap: READ | REQ_META | REQ_PRIO; the
    // group descriptor block: sb_bread's plain READ.
    assert_eq!(of("app", "RM"), 4, "{queued:?}");
    assert_eq!(of("app", "R"), 1, "{queued:?}");
    // fsync's data: WRITE_SYNC. The journal thread's descriptor and copies: WRITE_SYNC with no
    // REQ_META in 3.10; the commit block WRITE_FLUSH_FUA.
    assert_eq!(of("app", "WS"), 1, "{queued:?}");
    assert_eq!(of("jbd2", "WS"), 6, "{queued:?}");
    assert_eq!(of("jbd2", "FWFS"), 1, "{queued:?}");
    assert!(
        queued
            .iter()
            .all(|(_, r)| !r.starts_with('W') || !r.contains('M')),
        "no write carries REQ_META in 3.10: {queued:?}"
    );
}

#[test]
fn without_fua_the_commit_block_costs_a_second_flush() {
    let body = |sim: Sim, vfs: Rc<Vfs>, p: Process| async move {
        let fd = vfs.creat(&sim, &p, "/f").await.unwrap();
        vfs.write(&sim, &p, fd, &[1u8; 4096]).await.unwrap();
        vfs.fsync(&sim, &p, fd).await.unwrap();
    };
    let with = Rig::new(Ext4Config::default());
    with.run(body);
    let without = Rig::on(
        Ext4Config::default(),
        FixedLatencyDevice::new(1, 100 * NS_PER_US, 50_000_000).without_fua(),
    );
    without.run(body);
    // WRITE_FLUSH_FUA: a flush, the block with FUA; without FUA the block layer flushes again
    // after the block (REQ_FSEQ_POSTFLUSH), one more device latency.
    let commit = |rig: &Rig| rig.of("fsync")[&IoPurpose::JournalCommit];
    assert_eq!((commit(&with).flushes, commit(&with).fua), (1, 1));
    assert_eq!((commit(&without).flushes, commit(&without).fua), (2, 0));
    assert!(
        without.sim.handle().now() >= with.sim.handle().now() + 100 * NS_PER_US,
        "the post-flush takes its own device time"
    );
}

/// The default device of [`Rig::new`].
fn emmc() -> FixedLatencyDevice {
    FixedLatencyDevice::new(1, 100 * NS_PER_US, 50_000_000)
}

/// An fsync of the root directory on a journal with nothing running (the file system was
/// populated before the run; nothing else happens), under Linux `version`.
fn idle_directory_fsync(version: KernelVersion) -> Rig {
    let rig = Rig::with_kernel(Ext4Config::default(), emmc(), version);
    rig.run(|sim, vfs, p| async move {
        let dir = vfs.open(&sim, &p, "/", 0).await.unwrap();
        vfs.fsync(&sim, &p, dir).await.unwrap();
    });
    rig
}

#[test]
fn idle_directory_fsync_commits_an_empty_transaction_in_3_10_jbd2_journal_force_commit() {
    // ext4_sync_file -> ext4_force_commit (a directory is data-journalled for
    // ext4_should_journal_data) -> 3.10's jbd2_journal_force_commit: jbd2_journal_start opens a
    // transaction, the synchronous jbd2_journal_stop commits it: no descriptor, no copies, one
    // commit block with WRITE_FLUSH_FUA, and no flush of ext4_sync_file's own.
    let rig = idle_directory_fsync(KernelVersion::V3_10);
    let fsync = rig.of("fsync");
    let expected: BTreeMap<_, _> = [(IoPurpose::JournalCommit, (1, 4096))].into();
    assert_eq!(writes(&fsync), (expected, 1), "{fsync:?}");
    assert_eq!(fsync[&IoPurpose::JournalCommit].fua, 1);
    assert_eq!(
        rig.vfs.mm.bdev.io_account().unwrap().rows().len(),
        fsync.len()
    );
}

#[test]
fn idle_directory_fsync_writes_nothing_from_3_11_jbd2_journal_force_commit() {
    // 3.11+ (9ff864462477, "jbd2: optimize jbd2_journal_force_commit"):
    // __jbd2_journal_force_commit finds neither a running nor a committing transaction and
    // returns: no commit block, no flush. 6.4+ reaches it through ext4_fsync_journal's
    // !S_ISREG branch, the same call.
    for version in [
        KernelVersion::V4_4,
        KernelVersion::V6_6,
        KernelVersion::Mainline,
    ] {
        let rig = idle_directory_fsync(version);
        let fsync = rig.of("fsync");
        assert_eq!(writes(&fsync), (BTreeMap::new(), 0), "{version}: {fsync:?}");
        assert!(rig.rows().is_empty(), "{version}: {:?}", rig.rows());
    }
}

#[test]
fn directory_fsync_commits_the_running_transaction_in_every_version() {
    // With a running transaction (a rename's), 3.10's synchronous handle joins and commits it;
    // 3.11+'s __jbd2_journal_force_commit starts its commit and waits: the same I/O, and no
    // flush beyond the commit block's.
    for version in [KernelVersion::V3_10, KernelVersion::V6_6] {
        let rig = Rig::with_kernel(Ext4Config::default(), emmc(), version);
        rig.vfs.populate(&rig.sim.handle(), "/a", 8192).unwrap();
        rig.run(|sim, vfs, p| async move {
            vfs.rename(&sim, &p, "/a", "/b").await.unwrap();
            let dir = vfs.open(&sim, &p, "/", 0).await.unwrap();
            vfs.fsync(&sim, &p, dir).await.unwrap();
        });
        let expected: BTreeMap<_, _> = [
            (IoPurpose::JournalDescriptor, (1, 4096)),
            (IoPurpose::JournalMetadata, (2, 2 * 4096)),
            (IoPurpose::JournalCommit, (1, 4096)),
        ]
        .into();
        assert_eq!(writes(&rig.of("fsync")), (expected, 1), "{version}");
    }
}
