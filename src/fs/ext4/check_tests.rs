//! The journal's run-time invariant checks (`src/fs/jbd2/check.rs`, `src/fs/ext4/check.rs`)
//! over ext4 mounted on the page cache, each invariant broken on purpose: the violation is
//! reported with its message and stops the run. (b and e are broken in `src/fs/jbd2/tests.rs`.)

use super::glue::Ext4Ops;
use super::mount::{Ext4, Ext4Config};
use crate::dev::fixed::FixedLatencyDevice;
use crate::fs::vfs::{Process, Vfs, O_CREAT, O_WRONLY};
use crate::kernel::{CpuConfig, Hz};
use crate::mm::bio::QueueSubmit;
use crate::mm::{Issuer, VmConfig};
use crate::sim::{RunEnd, Sim, Simulation};
use crate::units::NS_PER_US;
use std::cell::Cell;
use std::future::Future;
use std::rc::Rc;

struct Rig {
    sim: Simulation,
    vfs: Rc<Vfs>,
    ext4: Rc<Ext4>,
}

impl Rig {
    /// ext4 (`fs`) over the page cache and a 100 us + 50 MB/s device (eMMC 4.5 sequential
    /// write, docs/references.md), one slot, noop; violations recorded rather than panicking.
    fn new(fs: Ext4Config) -> Rig {
        Rig::sized(fs, 1 << 30)
    }

    /// [`Rig::new`] with a file system of `bytes`.
    fn sized(fs: Ext4Config, bytes: u64) -> Rig {
        let sim = Simulation::new(1);
        let handle = sim.handle();
        let device = Box::new(FixedLatencyDevice::new(1, 100 * NS_PER_US, 50_000_000));
        let queue = crate::block::build_queue(device, "noop", false).expect("noop");
        let layer = crate::block::layer::BlockLayer::new(&handle, queue);
        let bdev = QueueSubmit::new(layer, Rc::new(Cell::new(1)));
        let cpu = CpuConfig::zero_cost();
        let cores = Rc::new(crate::sim::cpu::Cpu::new(cpu.cores));
        let (mm, ops): (_, Rc<Ext4Ops>) =
            super::glue::mount(&handle, fs, bytes, Hz(200), bdev.clone(), None, |mapping| {
                crate::mm::Mm::start(
                    &handle,
                    VmConfig::android(),
                    Hz(200),
                    mapping,
                    bdev.clone(),
                    None,
                    cores,
                    cpu,
                )
            })
            .expect("mkfs of 1 GiB");
        let ext4 = ops.ext4.clone();
        ext4.journal.set_panic_on_violation(false);
        let vfs = Vfs::new(&handle, mm, ops, None);
        // The checks under test, on in every build profile (`mobistack run --check`'s call).
        vfs.enable_checks();
        Rig { sim, vfs, ext4 }
    }

    /// Runs `body` as an app task to its end (or until a violation stops the run).
    fn run<F, Fut>(&self, body: F) -> RunEnd
    where
        F: FnOnce(Sim, Rc<Vfs>, Rc<Ext4>, Process) -> Fut + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        let (s, vfs, ext4) = (self.sim.handle(), self.vfs.clone(), self.ext4.clone());
        let process = vfs.new_process(10_000, "app");
        self.sim
            .spawn("app", async move { body(s, vfs, ext4, process).await });
        self.sim.run_until(u64::MAX, true).expect("no deadlock")
    }
}

fn issuer(sim: &Sim) -> Issuer {
    Issuer {
        task: sim.current_task(),
        pid: 1000,
        uid: 10_000,
        foreground: true,
    }
}

/// Writes `bytes` to a new file `path` and makes it durable.
async fn write_file(sim: &Sim, vfs: &Vfs, p: &Process, path: &str, bytes: usize) {
    let fd = vfs.open(sim, p, path, O_CREAT | O_WRONLY).await.unwrap();
    vfs.write(sim, p, fd, &vec![7u8; bytes]).await.unwrap();
    vfs.fsync(sim, p, fd).await.unwrap();
    vfs.close(sim, p, fd).await.unwrap();
}

#[test]
fn check_a_a_journaled_buffer_written_home_before_its_commit_is_a_violation() {
    // creat journals the new inode's table block in the running transaction; a home write of
    // that buffer now (as if jbd2 had left it dirty for writeback) precedes its commit block.
    let rig = Rig::new(Ext4Config::default());
    let end = rig.run(|sim, vfs, ext4, p| async move {
        let fd = vfs.open(&sim, &p, "/f", O_CREAT | O_WRONLY).await.unwrap();
        let ino = vfs.ino_of("/f").unwrap();
        let block = ext4.placement().inode_block(ino);
        let tid = ext4.journal.running_tid().unwrap();
        assert_eq!(ext4.journal.buffer_transaction(block), Some(tid));
        vfs.mm.mark_buffer_dirty(&sim, block);
        vfs.mm.write_buffer_home(&sim, block, issuer(&sim)).await;
        vfs.close(&sim, &p, fd).await.unwrap();
    });
    assert_eq!(end, RunEnd::Stopped, "the violation stops the run");
    let message = rig.ext4.journal.violation().expect("a violation");
    assert!(
        message.contains("home write of a metadata buffer")
            && message.contains("before the commit block of transaction 1, which journaled it, completed (last durable commit 0)"),
        "{message}"
    );
    assert!(message.contains("task app"), "{message}");
}

#[test]
fn check_a_buffers_go_home_after_their_commit_without_a_violation() {
    // The same buffer, written home once its transaction committed: no violation.
    let rig = Rig::new(Ext4Config::default());
    let end = rig.run(|sim, vfs, ext4, p| async move {
        write_file(&sim, &vfs, &p, "/f", 4096).await;
        let block = ext4.placement().inode_block(vfs.ino_of("/f").unwrap());
        assert!(
            !vfs.mm.buffer_is_clean(block),
            "dirty for writeback after the commit"
        );
        vfs.mm.write_buffer_home(&sim, block, issuer(&sim)).await;
        assert!(vfs.mm.buffer_is_clean(block));
    });
    assert_ne!(end, RunEnd::Stopped);
    assert_eq!(rig.ext4.journal.violation(), None);
}

/// Ordered data written back asynchronously (`filemap_flush`: allocated in the running
/// transaction, submitted, not waited for), then that transaction's commit, with
/// `journal_async_commit` so that the commit block goes out right after the log blocks.
fn ordered_data_then_commit(skip_data_wait: bool) -> (RunEnd, Option<String>) {
    // Linux 4.7+ (and up to 3.8): delayed-allocation writeback files the inode, so the
    // commit owes its data to the device first.
    let config = Ext4Config {
        journal_async_commit: true,
        ordered_delalloc: Some(true),
        ..Ext4Config::default()
    };
    let rig = Rig::new(config);
    rig.ext4.journal.faults.skip_data_wait.set(skip_data_wait);
    let end = rig.run(|sim, vfs, ext4, p| async move {
        let fd = vfs.open(&sim, &p, "/f", O_CREAT | O_WRONLY).await.unwrap();
        vfs.write(&sim, &p, fd, &vec![7u8; 64 << 10]).await.unwrap();
        let ino = vfs.ino_of("/f").unwrap();
        vfs.mm.filemap_flush(&sim, ino, issuer(&sim)).await;
        let tid = ext4.journal.running_tid().unwrap();
        ext4.journal.complete_transaction(&sim, tid).await;
        vfs.close(&sim, &p, fd).await.unwrap();
    });
    (end, rig.ext4.journal.violation())
}

#[test]
fn check_c_a_commit_block_before_its_ordered_data_is_a_violation() {
    let (end, violation) = ordered_data_then_commit(false);
    assert_ne!(end, RunEnd::Stopped);
    assert_eq!(violation, None, "the commit waits for the data");
    let (end, violation) = ordered_data_then_commit(true);
    assert_eq!(end, RunEnd::Stopped);
    let message = violation.expect("a violation without the data wait");
    assert!(
        message.contains("commit block of transaction 1 submitted while 16 page(s) of ordered data it exposes are not on the device")
            && message.contains("pages 0..16 (transaction 1)"),
        "{message}"
    );
    assert!(message.contains("task jbd2"), "{message}");
}

/// The inodes the commit of a delayed-allocation write-back's transaction filed.
fn filed_by_writeback(ordered_delalloc: bool) -> (Vec<u64>, u64) {
    let config = Ext4Config {
        ordered_delalloc: Some(ordered_delalloc),
        ..Ext4Config::default()
    };
    let rig = Rig::new(config);
    let ino = std::rc::Rc::new(std::cell::Cell::new(0));
    let seen = ino.clone();
    rig.run(move |sim, vfs, ext4, p| async move {
        let fd = vfs.open(&sim, &p, "/f", O_CREAT | O_WRONLY).await.unwrap();
        vfs.write(&sim, &p, fd, &vec![7u8; 64 << 10]).await.unwrap();
        seen.set(vfs.ino_of("/f").unwrap());
        vfs.mm.filemap_flush(&sim, seen.get(), issuer(&sim)).await;
        let tid = ext4.journal.running_tid().unwrap();
        ext4.journal.complete_transaction(&sim, tid).await;
        vfs.close(&sim, &p, fd).await.unwrap();
    });
    let record = rig.ext4.journal.commit_records().pop().unwrap();
    (record.inodes, ino.get())
}

#[test]
fn delalloc_writeback_files_its_inode_only_outside_linux_3_9_to_4_6() {
    // 3.10 (f3b59291a69d): mpage_da_map_and_submit files nothing, so a commit never waits for
    // the flusher's writeback of a delayed-allocation file; 4.7's ext4_map_blocks files it.
    let (filed, ino) = filed_by_writeback(false);
    assert!(!filed.contains(&ino), "3.10 filed {filed:?}");
    let (filed, ino) = filed_by_writeback(true);
    assert!(filed.contains(&ino), "4.7 did not file {ino}: {filed:?}");
}

/// A 64 MiB file system nearly filled by one file, whose blocks a truncate frees in the running
/// transaction; when `early`, they go back to the allocator before that transaction commits
/// (`ext4_free_data_callback` run too soon); then a second file larger than the space left
/// elsewhere is written.
fn fill_truncate_write(early: bool) -> (RunEnd, Option<String>) {
    let rig = Rig::sized(Ext4Config::default(), 64 << 20);
    let end = rig.run(move |sim, vfs, ext4, p| async move {
        let free = crate::fs::FileSystem::free_blocks(&*ext4.placement());
        // Room for the extent tree's blocks and the second file's directory entry.
        let big = (free - 64) as usize * 4096;
        write_file(&sim, &vfs, &p, "/big", big).await;
        let fd = vfs.open(&sim, &p, "/big", O_WRONLY).await.unwrap();
        vfs.ftruncate(&sim, &p, fd, 0).await.unwrap();
        vfs.close(&sim, &p, fd).await.unwrap();
        let tid = ext4.journal.running_tid().unwrap();
        if early {
            ext4.alloc.borrow_mut().release_committed(tid);
        }
        let fd = vfs.open(&sim, &p, "/g", O_CREAT | O_WRONLY).await.unwrap();
        // Without the early release the allocator keeps the pending blocks out (the write
        // back may find no space); with it, it hands them out again.
        let _ = vfs.write(&sim, &p, fd, &vec![8u8; 1 << 20]).await;
        let _ = vfs.fsync(&sim, &p, fd).await;
        let _ = vfs.close(&sim, &p, fd).await;
    });
    (end, rig.ext4.journal.violation())
}

#[test]
fn check_d_a_freed_block_reused_before_its_transaction_commits_is_a_violation() {
    let (end, violation) = fill_truncate_write(false);
    assert_ne!(end, RunEnd::Stopped);
    assert_eq!(violation, None);
    let (end, violation) = fill_truncate_write(true);
    assert_eq!(end, RunEnd::Stopped);
    let message = violation.expect("a violation");
    assert!(
        message.contains("at ext4_mb_new_blocks")
            && message.contains("freed by transaction 2 wait for its commit"),
        "{message}"
    );
}
