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
        Rig::with_vm(fs, VmConfig::android())
    }

    fn with_vm(fs: Ext4Config, vm: VmConfig) -> Rig {
        Rig::with_cpu(fs, vm, CpuConfig::zero_cost())
    }

    fn with_cpu(fs: Ext4Config, vm: VmConfig, cpu: CpuConfig) -> Rig {
        let sim = Simulation::new(1);
        // 100 us + 50 MB/s (eMMC 4.5 sequential write, REFERENCES.md), one slot.
        let device = Box::new(FixedLatencyDevice::new(1, 100 * NS_PER_US, 50_000_000));
        let vfs = crate::stack::storage_with_fs(
            &sim.handle(),
            vm,
            Hz(200),
            cpu,
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
        crate::fs::test_support::run_app(&self.sim, &self.vfs, 10_000, body);
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

/// A rig whose flusher stays out of the way: 8 GiB of RAM, thresholds far above what the
/// tests dirty, nothing expires for an hour.
fn quiet_flusher_rig(fs: Ext4Config) -> Rig {
    let vm = VmConfig {
        ram: 8 << 30,
        dirty_background_ratio: 50,
        dirty_ratio: 80,
        dirty_expire: 3_600 * crate::units::NS_PER_SEC,
        dirty_writeback_interval: 3_600 * crate::units::NS_PER_SEC,
        ..VmConfig::android()
    };
    Rig::with_vm(fs, vm)
}

fn flusher_issuer(sim: &Sim) -> crate::mm::Issuer {
    crate::mm::Issuer {
        task: sim.current_task(),
        pid: crate::mm::FLUSHER_PID,
        uid: 0,
        foreground: false,
    }
}

/// Creates `path` and writes `mib` MiB of `byte` to it in 1 MiB calls; returns the open fd.
async fn create_and_write(
    sim: &Sim,
    vfs: &Vfs,
    process: &Process,
    path: &str,
    mib: usize,
    byte: u8,
) -> i32 {
    let fd = vfs
        .open(sim, process, path, O_CREAT | O_WRONLY)
        .await
        .unwrap();
    let chunk = vec![byte; 1 << 20];
    for _ in 0..mib {
        vfs.write(sim, process, fd, &chunk).await.unwrap();
    }
    fd
}

/// Pages a cyclic `WB_SYNC_NONE` writeback of `nr_to_write` pages writes from a 64 MiB file
/// whose pages are all dirty and delayed.
fn cyclic_pass_of_a_delayed_file(fs: Ext4Config, nr_to_write: u64) -> u64 {
    use crate::mm::writeback::{SyncMode, WbRange};
    let rig = quiet_flusher_rig(fs);
    let written = Rc::new(std::cell::Cell::new(0));
    let out = written.clone();
    rig.run(move |sim, vfs, p| async move {
        create_and_write(&sim, &vfs, &p, "/big", 64, 7).await;
        let ino = vfs.stat(&sim, &p, "/big").await.unwrap().ino;
        assert_eq!(vfs.mm.dirty_pages(ino), 16_384, "nothing written yet");
        let n = vfs
            .mm
            .writepages(
                &sim,
                ino,
                SyncMode::None,
                nr_to_write,
                WbRange::Cyclic,
                flusher_issuer(&sim),
                false,
            )
            .await;
        out.set(n);
    });
    written.get()
}

#[test]
fn ext4_3_10_bumps_a_cyclic_writeback_to_the_run_of_delayed_pages() {
    // ext4_da_writepages (3.10): nr_to_write 1024 is raised to ext4_num_dirty_pages, the 16384
    // contiguous delayed pages (under s_max_writeback_mb_bump's 32768), so the pass writes
    // the whole file; without delayed allocation there is no bump.
    assert_eq!(
        cyclic_pass_of_a_delayed_file(Ext4Config::default(), 1024),
        16_384
    );
    let nodelalloc = Ext4Config {
        delalloc: false,
        ..Ext4Config::default()
    };
    assert_eq!(cyclic_pass_of_a_delayed_file(nodelalloc, 1024), 1024);
}

#[test]
fn background_writeback_also_writes_pages_dirtied_while_it_runs() {
    // write_cache_pages_da looks dirty pages up as it goes (PAGECACHE_TAG_DIRTY, not the
    // TOWRITE snapshot of WB_SYNC_ALL): a pass over a 128 MiB file that sleeps in get_request
    // (128 requests of 512 KiB queued, 1.3 s of this device) also writes the pages an
    // appender dirties past the old end of file meanwhile, up to its nr_to_write.
    use crate::mm::writeback::{SyncMode, WbRange};
    let rig = quiet_flusher_rig(Ext4Config::default());
    let (s, vfs) = (rig.sim.handle(), rig.vfs.clone());
    let appender = vfs.new_process(10_001, "appender");
    let started = Rc::new(std::cell::Cell::new(false));
    let go = started.clone();
    s.clone().spawn("appender", async move {
        let fd = create_and_write(&s, &vfs, &appender, "/log", 128, 1).await;
        go.set(true);
        // One page every millisecond for 2 s, past the 128 MiB the pass was started on.
        for _ in 0..2_000 {
            s.sleep(crate::units::NS_PER_MS).await;
            vfs.write(&s, &appender, fd, &[2u8; 4096]).await.unwrap();
        }
    });
    let written = Rc::new(std::cell::Cell::new(0));
    let out = written.clone();
    rig.run(move |sim, vfs, p| async move {
        while !started.get() {
            sim.sleep(crate::units::NS_PER_MS).await;
        }
        let ino = vfs.stat(&sim, &p, "/log").await.unwrap().ino;
        let n = vfs
            .mm
            .writepages(
                &sim,
                ino,
                SyncMode::None,
                u64::MAX,
                WbRange::Cyclic,
                flusher_issuer(&sim),
                false,
            )
            .await;
        out.set(n);
    });
    let n = written.get();
    assert!(
        n > 32_768 + 500,
        "the pass wrote {n} pages: the 32768 dirty when it began and the appended ones"
    );
}

/// What a run of [`contended_appends`] leaves: every counter of the file system, each task's
/// end time and blocked time by reason, the run's end; and the counters.
fn contended_appends(fast_paths: bool) -> (String, BTreeMap<String, u64>) {
    // Small RAM and a short expiry: the flusher writes the file while it grows; a 100 ms
    // commit interval and an fsyncing task keep transactions locked and committing under the
    // writer (handles that wait, inode buffers frozen or shadowed by a commit).
    let vm = VmConfig {
        ram: 64 << 20,
        dirty_expire: 50 * crate::units::NS_PER_MS,
        dirty_writeback_interval: 20 * crate::units::NS_PER_MS,
        ..VmConfig::android()
    };
    let fs = Ext4Config {
        commit: 100 * crate::units::NS_PER_MS,
        ..Ext4Config::default()
    };
    // Copies and system calls take CPU time: a handle is held for as long as its page's copy.
    let rig = Rig::with_cpu(fs, vm, CpuConfig::default());
    rig.vfs.mm.set_write_fast_paths(fast_paths);
    let (s, vfs) = (rig.sim.handle(), rig.vfs.clone());
    let writer = rig.sim.spawn("writer", async move {
        let p = vfs.new_process(10_000, "writer");
        let fd = vfs.open(&s, &p, "/big", O_CREAT | O_WRONLY).await.unwrap();
        // Appends (the file grows: the inode is journaled per page), then rewrites of pages
        // the flusher may be writing (wait_on_page_writeback inside the handle).
        for i in 0..96u64 {
            let at = (i % 8) * (64 << 10);
            vfs.pwrite(&s, &p, fd, &[i as u8; 64 << 10], at)
                .await
                .unwrap();
            s.sleep(NS_PER_US * 1_000).await;
        }
        // Commits the transaction its last write_end recorded in the inode (i_sync_tid), or
        // only flushes if that one committed already.
        vfs.fsync(&s, &p, fd).await.unwrap();
        vfs.close(&s, &p, fd).await.unwrap();
        s.now()
    });
    let (s, vfs) = (rig.sim.handle(), rig.vfs.clone());
    let syncer = rig.sim.spawn("syncer", async move {
        let p = vfs.new_process(10_001, "syncer");
        let fd = vfs
            .open(&s, &p, "/small", O_CREAT | O_WRONLY)
            .await
            .unwrap();
        for i in 0..60u8 {
            vfs.write(&s, &p, fd, &[i; 4096]).await.unwrap();
            vfs.fsync(&s, &p, fd).await.unwrap();
            s.sleep(NS_PER_US * 1_000).await;
        }
        s.now()
    });
    rig.sim.run_until(u64::MAX, true).expect("no deadlock");
    let s = rig.sim.handle();
    let seen = format!(
        "{:?}\nwriter {} {:?}\nsyncer {} {:?}\nend {}",
        rig.counters(),
        writer.result().unwrap(),
        s.blocked_times(writer.task()),
        syncer.result().unwrap(),
        s.blocked_times(syncer.task()),
        s.now()
    );
    (seen, rig.counters())
}

#[test]
fn the_write_fast_paths_change_nothing_but_the_work_done() {
    // ext4's write_begin_now / write_end_now (and jbd2's start_now / get_write_access_now)
    // must give what the waiting paths give, wait for wait: the run with them and without them
    // is the same, down to every task's blocked time by reason.
    let (with, counters) = contended_appends(true);
    let (without, _) = contended_appends(false);
    assert_eq!(with, without);
    // The run went through the fall-backs too: handles that waited for a locked transaction,
    // inode buffers frozen by a commit and waited for while written to the log.
    for counter in [
        "jbd2.handle_waits",
        "jbd2.frozen_copies",
        "jbd2.shadow_waits",
    ] {
        assert!(counters[counter] > 0, "{counter}: {with}");
    }
}
