//! ext4 mounted under the VFS and page cache: the system calls' journaling, ordered data,
//! delayed allocation and metadata buffers, over a fixed-latency device.

use crate::dev::fixed::FixedLatencyDevice;
use crate::fs::ext4::Ext4Config;
use crate::fs::vfs::{Process, Vfs, O_CREAT, O_WRONLY};
use crate::kernel::{CpuConfig, Hz};
use crate::mm::VmConfig;
use crate::sim::{Sim, Simulation};
use crate::units::NS_PER_US;
use std::collections::BTreeMap;
use std::future::Future;
use std::rc::Rc;

struct Rig {
    sim: Simulation,
    vfs: Rc<Vfs>,
}

impl Rig {
    fn new(fs: Ext4Config) -> Rig {
        let sim = Simulation::new(1);
        // 100 us + 50 MB/s (eMMC 4.5 sequential write, REFERENCES.md), one slot.
        let device = Box::new(FixedLatencyDevice::new(1, 100 * NS_PER_US, 50_000_000));
        let vfs = crate::stack::storage_with_fs(
            &sim.handle(),
            VmConfig::android(),
            Hz(200),
            CpuConfig::zero_cost(),
            &fs,
            device,
            "noop",
            1 << 30,
        )
        .expect("valid storage");
        Rig { sim, vfs }
    }

    fn run<F, Fut>(&self, body: F)
    where
        F: FnOnce(Sim, Rc<Vfs>, Process) -> Fut + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        let (s, vfs) = (self.sim.handle(), self.vfs.clone());
        let process = vfs.new_process(10_000, "app");
        self.sim
            .spawn("app", async move { body(s, vfs, process).await });
        self.sim.run_until(u64::MAX, true).expect("no deadlock");
    }

    fn counters(&self) -> BTreeMap<String, u64> {
        self.vfs.fs_counters().into_iter().collect()
    }
}

#[test]
fn creat_write_fsync_commits_the_metadata_after_the_data() {
    let rig = Rig::new(Ext4Config::default());
    assert_eq!(rig.vfs.fs_name(), "ext4");
    rig.run(|sim, vfs, p| async move {
        let fd = vfs.open(&sim, &p, "/f", O_CREAT | O_WRONLY).await.unwrap();
        vfs.write(&sim, &p, fd, &[1u8; 4096]).await.unwrap();
        // Delayed allocation: no block yet.
        assert_eq!(
            vfs.fs_counters()
                .iter()
                .find(|(n, _)| n == "ext4.allocations")
                .unwrap()
                .1,
            0
        );
        vfs.fsync(&sim, &p, fd).await.unwrap();
        vfs.close(&sim, &p, fd).await.unwrap();
    });
    let c = rig.counters();
    assert_eq!(c["ext4.creates"], 1);
    // The data page is allocated at writeback (fsync's filemap_write_and_wait_range).
    assert_eq!(c["ext4.allocations"], 1);
    assert_eq!(c["ext4.allocated_blocks"], 1);
    assert_eq!(c["ext4.fsyncs_committed"], 1);
    assert!(c["jbd2.commits"] >= 1, "{c:?}");
    assert!(c["jbd2.log_descriptor_blocks"] >= 1);
    assert!(c["jbd2.log_commit_blocks"] >= 1);
    // Create: inode bitmap, group descriptor, inode table, directory block; allocation: block
    // bitmap (and the same descriptor and inode block).
    assert!(c["jbd2.log_metadata_blocks"] >= 5, "{c:?}");
    let mm = rig.vfs.mm.stats();
    assert!(
        mm.pages_written_sync >= 1,
        "the data page was written by fsync: {mm:?}"
    );
}

#[test]
fn fdatasync_after_an_overwrite_only_flushes_and_fsync_commits_the_mtime() {
    // Overwriting an allocated page changes only the mtime (journaled once per tick in
    // ext4_dirty_inode): fdatasync skips the commit (i_datasync_tid is older), fsync does not.
    let rig = Rig::new(Ext4Config::default());
    rig.vfs
        .populate(&rig.sim.handle(), "/db", 64 << 10)
        .unwrap();
    rig.run(|sim, vfs, p| async move {
        let fd = vfs.open(&sim, &p, "/db", O_WRONLY).await.unwrap();
        vfs.pwrite(&sim, &p, fd, &[2u8; 4096], 8192).await.unwrap();
        vfs.fdatasync(&sim, &p, fd).await.unwrap();
        let commits = |vfs: &Vfs| {
            vfs.fs_counters()
                .into_iter()
                .find(|(n, _)| n == "jbd2.requested_commits")
                .unwrap()
                .1
        };
        let before = commits(&vfs);
        assert_eq!(before, 0, "fdatasync asked for no commit");
        vfs.fsync(&sim, &p, fd).await.unwrap();
        assert_eq!(commits(&vfs), 1, "fsync commits the mtime change");
        vfs.close(&sim, &p, fd).await.unwrap();
    });
    let c = rig.counters();
    assert_eq!(c["ext4.fsyncs_flush_only"], 1);
    assert_eq!(c["ext4.fsyncs_committed"], 1);
    assert_eq!(c["ext4.allocations"], 0, "an overwrite allocates nothing");
}

#[test]
fn unlink_frees_blocks_at_commit_with_discards() {
    let rig = Rig::new(Ext4Config::default());
    rig.vfs
        .populate(&rig.sim.handle(), "/old", 1 << 20)
        .unwrap();
    rig.run(|sim, vfs, p| async move {
        vfs.unlink(&sim, &p, "/old").await.unwrap();
        // A later fsync of another file forces the commit that frees the blocks.
        let fd = vfs
            .open(&sim, &p, "/new", O_CREAT | O_WRONLY)
            .await
            .unwrap();
        vfs.write(&sim, &p, fd, &[3u8; 4096]).await.unwrap();
        vfs.fsync(&sim, &p, fd).await.unwrap();
        vfs.close(&sim, &p, fd).await.unwrap();
    });
    let c = rig.counters();
    assert_eq!(c["ext4.unlinks"], 1);
    assert_eq!(c["ext4.evictions"], 1);
    assert_eq!(c["ext4.discarded_blocks"], 256, "{c:?}");
    assert_eq!(
        c["ext4.discards"], 1,
        "one extent, one discard (under max_discard_sectors)"
    );
}

#[test]
fn simplefs_is_selected_by_type_and_has_no_journal() {
    let rig = Rig::new(Ext4Config::simplefs());
    assert_eq!(rig.vfs.fs_name(), "simplefs");
    rig.run(|sim, vfs, p| async move {
        let fd = vfs.open(&sim, &p, "/f", O_CREAT | O_WRONLY).await.unwrap();
        vfs.write(&sim, &p, fd, &[1u8; 4096]).await.unwrap();
        vfs.fsync(&sim, &p, fd).await.unwrap();
    });
    assert!(rig.counters().is_empty());
}

#[test]
fn data_journal_puts_the_data_in_the_log_and_fsync_commits_it_without_writeback() {
    // data=journal (ext4_journalled_write_end): the written page's block is allocated at once
    // and journaled; the page is never dirty, so fsync writes nothing in place and commits the
    // transaction holding the data; an overwrite followed by fdatasync commits again (the data
    // changed), unlike data=ordered's flush-only fdatasync.
    let rig = Rig::new(Ext4Config {
        data: crate::fs::ext4::DataMode::Journal,
        ..Ext4Config::default()
    });
    rig.run(|sim, vfs, p| async move {
        let fd = vfs.open(&sim, &p, "/f", O_CREAT | O_WRONLY).await.unwrap();
        vfs.write(&sim, &p, fd, &[1u8; 8192]).await.unwrap();
        assert_eq!(vfs.stat(&sim, &p, "/f").await.unwrap().cached_pages, 2);
        vfs.fsync(&sim, &p, fd).await.unwrap();
        vfs.pwrite(&sim, &p, fd, &[2u8; 4096], 0).await.unwrap();
        vfs.fdatasync(&sim, &p, fd).await.unwrap();
        vfs.close(&sim, &p, fd).await.unwrap();
    });
    let c = rig.counters();
    assert_eq!(c["ext4.journaled_data_pages"], 3);
    // Allocated at write time, in the handle, not by writeback.
    assert_eq!(c["ext4.allocated_blocks"], 2);
    assert_eq!(c["ext4.fsyncs_committed"], 2, "{c:?}");
    let mm = rig.vfs.mm.stats();
    assert_eq!(
        mm.pages_written_sync, 0,
        "no data page written in place: {mm:?}"
    );
    // The log holds the two data blocks and the metadata of the create and the allocation.
    assert!(c["jbd2.log_metadata_blocks"] >= 2 + 5, "{c:?}");
}
