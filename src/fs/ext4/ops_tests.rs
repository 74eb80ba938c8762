//! The ext4 operations over jbd2, with fake metadata buffers and ordered data and the real
//! block layer (noop, 1 ms per request) for discards and flushes.

use super::layout::ROOT_INO;
use super::mount::{Ext4, Ext4Config};
use crate::block::elevator::noop::Noop;
use crate::block::layer::BlockLayer;
use crate::block::queue::{AllocModel, RequestQueue};
use crate::dev::fixed::FixedLatencyDevice;
use crate::fs::jbd2::test_support::{FakeBuffers, FakeData};
use crate::kernel::Hz;
use crate::mm::bio::QueueSubmit;
use crate::mm::Issuer;
use crate::sim::{Blocker, Sim, Simulation, WaitReason};
use crate::units::{NS_PER_MS, NS_PER_SEC};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

struct Rig {
    sim: Simulation,
    ext4: Rc<Ext4>,
    buffers: Rc<FakeBuffers>,
    layer: BlockLayer,
    /// The ordered-data calls jbd2 made (`submit` / `waited`, inode, time).
    data: Rc<FakeData>,
}

fn rig(config: Ext4Config) -> Rig {
    rig_with(config, 1)
}

/// `config` over a device that serves `depth` requests at once (1 ms each).
fn rig_with(config: Ext4Config, depth: usize) -> Rig {
    let sim = Simulation::new(1);
    let queue = RequestQueue::new(
        Box::new(Noop::new()),
        Box::new(FixedLatencyDevice::new(depth, NS_PER_MS, 0)),
        AllocModel::Legacy { nr_requests: 128 },
    );
    let layer = BlockLayer::new(&sim.handle(), queue);
    let bdev = QueueSubmit::new(layer.clone(), Rc::new(Cell::new(1)));
    let buffers = FakeBuffers::new(NS_PER_MS);
    let data = Rc::new(FakeData {
        ns: 0,
        calls: RefCell::new(Vec::new()),
    });
    let ext4 = Ext4::mount(
        &sim.handle(),
        config,
        1 << 30,
        Hz(100),
        buffers.clone(),
        data.clone(),
        bdev,
        None,
    )
    .expect("mkfs of 1 GiB");
    Rig {
        sim,
        ext4,
        buffers,
        layer,
        data,
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

#[test]
fn an_fsync_after_create_commits_the_blocks_ext4_create_dirtied() {
    let rig = rig(Ext4Config::default());
    let (s, e) = (rig.sim.handle(), rig.ext4.clone());
    let app = rig.sim.spawn("app", async move {
        let ino = e
            .create(&s, issuer(&s), ROOT_INO, "f", false)
            .await
            .unwrap();
        assert!(e.fsync(&s, issuer(&s), ino, false).await, "a commit");
        ino
    });
    rig.sim.run_until(10 * NS_PER_SEC, true).unwrap();
    let ino = app.result().unwrap();
    let record = rig.ext4.journal.commit_records().pop().unwrap();
    let placement = rig.ext4.placement();
    let layout = placement.layout();
    let group = placement.inode_group(ino).unwrap();
    // ext4_create: inode bitmap, group descriptor, the new inode's table block (shared with
    // the root's), the root's directory block.
    assert!(record.buffers.contains(&layout.inode_bitmap(group)));
    assert!(record.buffers.contains(&layout.gdt_block(group)));
    assert!(record.buffers.contains(&layout.inode_block(ino)));
    assert!(record.buffers.contains(&layout.inode_block(ROOT_INO)));
    assert!(record.requested && record.barrier);
    assert_eq!(rig.ext4.stats().fsyncs_committed, 1);
    // After the commit the buffers are dirty, to be written home by writeback.
    assert!(rig.buffers.get(layout.inode_bitmap(group)).dirty);
}

#[test]
fn fdatasync_of_an_overwrite_only_flushes_the_device_cache() {
    let rig = rig(Ext4Config::default());
    let (s, e) = (rig.sim.handle(), rig.ext4.clone());
    let app = rig.sim.spawn("app", async move {
        let ino = e
            .create(&s, issuer(&s), ROOT_INO, "db", false)
            .await
            .unwrap();
        // Write 4 pages and have writeback allocate them, then sync: one commit.
        for _ in 0..4 {
            let handle = e.write_begin(&s).await;
            e.write_end(&s, handle, ino, true, Some(16384)).await;
        }
        e.allocate_for_writeback(&s, issuer(&s), ino, 0, 4)
            .await
            .unwrap();
        assert!(e.fsync(&s, issuer(&s), ino, true).await);
        let commits = e.journal.stats().commits;
        // Overwrite page 2 in place: no size change, no allocation.
        let handle = e.write_begin(&s).await;
        e.write_end(&s, handle, ino, false, None).await;
        e.allocate_for_writeback(&s, issuer(&s), ino, 2, 1)
            .await
            .unwrap();
        let committed = e.fsync(&s, issuer(&s), ino, true).await;
        (committed, commits, e.journal.stats().commits)
    });
    rig.sim.run_until(10 * NS_PER_SEC, true).unwrap();
    let (committed, before, after) = app.result().unwrap();
    assert!(!committed, "fdatasync waited for no commit");
    assert_eq!(before, after);
    assert_eq!(rig.ext4.stats().fsyncs_flush_only, 1);
    let queue = rig.layer.with_queue(|q| q.stats());
    assert!(queue.requests > 0);
}

#[test]
fn a_deleted_files_blocks_are_discarded_by_the_commit_an_fsync_waits_for() {
    // QASIO's M1/M5 chain: unlink frees blocks in transaction T; the commit of T discards them
    // (the journal thread waits: D_discard), and an fsync waiting for T waits with it
    // (I_jcommit).
    let rig = rig(Ext4Config::default());
    let (s, e) = (rig.sim.handle(), rig.ext4.clone());
    let app = rig.sim.spawn("app", async move {
        let big = e
            .create(&s, issuer(&s), ROOT_INO, "big", false)
            .await
            .unwrap();
        for _ in 0..2048 {
            let handle = e.write_begin(&s).await;
            e.write_end(&s, handle, big, true, None).await;
        }
        e.allocate_for_writeback(&s, issuer(&s), big, 0, 2048)
            .await
            .unwrap();
        e.fsync(&s, issuer(&s), big, false).await;
        e.unlink(&s, issuer(&s), ROOT_INO, "big", true)
            .await
            .unwrap();
        e.evict(&s, issuer(&s), big).await;
        let small = e
            .create(&s, issuer(&s), ROOT_INO, "small", false)
            .await
            .unwrap();
        let before = s.blocked_times(s.current_task().unwrap());
        e.fsync(&s, issuer(&s), small, false).await;
        s.blocked_times(s.current_task().unwrap())
            .since(&before)
            .get(WaitReason::JournalCommit)
    });
    rig.sim.run_until(60 * NS_PER_SEC, true).unwrap();
    let waited = app.result().unwrap();
    let stats = rig.ext4.stats();
    assert_eq!(stats.discarded_blocks, 2048);
    assert_eq!(
        stats.discards, 1,
        "one 2048-block extent, one discard (under max_discard_sectors)"
    );
    let jbd2 = rig.ext4.journal.thread().unwrap();
    let discard = rig.sim.blocked_times(jbd2).get(WaitReason::Discard);
    assert_eq!(
        discard, NS_PER_MS,
        "one 1 ms discard, waited for by the journal thread"
    );
    assert!(waited >= discard, "the fsync waited through the discards");
}

#[test]
fn a_writer_asleep_in_its_handle_holds_every_new_handle_behind_a_commit() {
    // QASIO scenario B: the thumbnail writer has a handle from ext4_da_write_begin and sleeps
    // (on a page under writeback); a commit locks the transaction; the camera's create waits.
    let rig = rig(Ext4Config::default());
    let (s, e) = (rig.sim.handle(), rig.ext4.clone());
    rig.sim.spawn("thumbnail", async move {
        let ino = e
            .create(&s, issuer(&s), ROOT_INO, "thumb", false)
            .await
            .unwrap();
        let handle = e.write_begin(&s).await;
        s.sleep_for(100 * NS_PER_MS, WaitReason::PageWriteback, Blocker::None)
            .await;
        e.write_end(&s, handle, ino, true, Some(1024)).await;
    });
    let (s, e) = (rig.sim.handle(), rig.ext4.clone());
    rig.sim.spawn("fsync", async move {
        s.sleep(10 * NS_PER_MS).await;
        let tid = e.journal.running_tid().unwrap();
        e.journal.complete_transaction(&s, tid).await;
    });
    let (s, e) = (rig.sim.handle(), rig.ext4.clone());
    let camera = rig.sim.spawn("camera", async move {
        s.sleep(20 * NS_PER_MS).await;
        let start = s.now();
        e.create(&s, issuer(&s), ROOT_INO, "shot", false)
            .await
            .unwrap();
        s.now() - start
    });
    rig.sim.run_until(10 * NS_PER_SEC, true).unwrap();
    let waited = camera.result().unwrap();
    assert!(waited >= 80 * NS_PER_MS, "camera waited {waited} ns");
    let blocked = rig.sim.blocked_times(camera.task());
    assert!(blocked.get(WaitReason::JournalHandle) >= 80 * NS_PER_MS);
}

#[test]
fn a_timestamp_is_journaled_once_per_tick() {
    let rig = rig(Ext4Config::default());
    let (s, e) = (rig.sim.handle(), rig.ext4.clone());
    rig.sim.spawn("app", async move {
        let ino = e
            .create(&s, issuer(&s), ROOT_INO, "f", false)
            .await
            .unwrap();
        for _ in 0..10 {
            e.update_time(&s, ino).await;
        }
        s.sleep(10 * NS_PER_MS).await;
        e.update_time(&s, ino).await;
    });
    rig.sim.run_until(10 * NS_PER_SEC, true).unwrap();
    assert_eq!(
        rig.ext4.stats().timestamp_updates,
        2,
        "HZ = 100: 10 ms ticks"
    );
}

#[test]
fn a_truncate_goes_through_the_orphan_list_and_holds_its_frees_until_commit() {
    let rig = rig(Ext4Config {
        discard: false,
        ..Ext4Config::default()
    });
    let (s, e) = (rig.sim.handle(), rig.ext4.clone());
    let app = rig.sim.spawn("app", async move {
        let ino = e
            .create(&s, issuer(&s), ROOT_INO, "f", false)
            .await
            .unwrap();
        for _ in 0..256 {
            let handle = e.write_begin(&s).await;
            e.write_end(&s, handle, ino, true, None).await;
        }
        e.allocate_for_writeback(&s, issuer(&s), ino, 0, 256)
            .await
            .unwrap();
        let pending = |e: &Ext4| e.placement().mballoc().pending_blocks();
        let before = pending(&e);
        e.truncate(&s, ino, 0).await;
        let truncated = pending(&e);
        e.fsync(&s, issuer(&s), ino, false).await;
        (before, truncated, pending(&e))
    });
    rig.sim.run_until(10 * NS_PER_SEC, true).unwrap();
    let (before, truncated, committed) = app.result().unwrap();
    assert_eq!(
        (before, truncated, committed),
        (0, 256, 0),
        "frees are held until their transaction commits"
    );
    assert_eq!(rig.ext4.stats().orphan_adds, 1);
    let sb = rig.ext4.placement().layout().superblock_block();
    let journaled: Vec<u64> = rig
        .ext4
        .journal
        .commit_records()
        .iter()
        .flat_map(|r| r.buffers.clone())
        .collect();
    assert!(
        journaled.contains(&sb),
        "the orphan list dirtied the superblock"
    );
}

/// `rig` with Linux `version` over a device that serves `depth` requests at once (1 ms each).
fn rig_on(version: crate::kernel::KernelVersion, depth: usize) -> Rig {
    let rig = rig_with(Ext4Config::default(), depth);
    rig.ext4.set_kernel_version(version);
    rig
}

/// What the commit that frees three files' extents costs under `version` (`-o discard`, a
/// device serving 8 requests at once, 1 ms each): the journal thread's wait for discards,
/// the fsync's wait for that commit, and the discards issued by the end. Five files are
/// written one after another and the first, third and fifth deleted, so that the freed
/// extents are apart (adjacent ones would be freed as one).
fn three_extents_freed_under(version: crate::kernel::KernelVersion) -> (u64, u64, u64) {
    let rig = rig_on(version, 8);
    let (s, e) = (rig.sim.handle(), rig.ext4.clone());
    let app = rig.sim.spawn("app", async move {
        let mut files = Vec::new();
        for name in ["a", "b", "c", "d", "e"] {
            let ino = e
                .create(&s, issuer(&s), ROOT_INO, name, false)
                .await
                .unwrap();
            for _ in 0..256 {
                let handle = e.write_begin(&s).await;
                e.write_end(&s, handle, ino, true, None).await;
            }
            e.allocate_for_writeback(&s, issuer(&s), ino, 0, 256)
                .await
                .unwrap();
            files.push((name, ino));
        }
        e.fsync(&s, issuer(&s), files[0].1, false).await;
        for (name, ino) in files.into_iter().step_by(2) {
            e.unlink(&s, issuer(&s), ROOT_INO, name, true)
                .await
                .unwrap();
            e.evict(&s, issuer(&s), ino).await;
        }
        let small = e
            .create(&s, issuer(&s), ROOT_INO, "small", false)
            .await
            .unwrap();
        let before = s.blocked_times(s.current_task().unwrap());
        e.fsync(&s, issuer(&s), small, false).await;
        let waited = s
            .blocked_times(s.current_task().unwrap())
            .since(&before)
            .get(WaitReason::JournalCommit);
        // The run ends with the app: leave a worker time to finish its discards.
        s.sleep(NS_PER_SEC).await;
        waited
    });
    rig.sim.run_until(60 * NS_PER_SEC, true).unwrap();
    let fsync_waited = app.result().unwrap();
    let jbd2 = rig.ext4.journal.thread().unwrap();
    let journal_discard_wait = rig.sim.blocked_times(jbd2).get(WaitReason::Discard);
    (
        journal_discard_wait,
        fsync_waited,
        rig.ext4.stats().discards,
    )
}

#[test]
fn ext4_free_data_callback_waits_for_each_extents_discard_in_turn_on_3_10() {
    let (journal, fsync, discards) = three_extents_freed_under(crate::kernel::KernelVersion::V3_10);
    assert_eq!(discards, 3, "one discard per freed extent");
    assert_eq!(
        journal,
        3 * NS_PER_MS,
        "three 1 ms discards, one after another"
    );
    assert_eq!(
        fsync,
        2 * NS_PER_MS + journal,
        "the fsync waited through them"
    );
}

#[test]
fn ext4_process_freed_data_waits_once_for_parallel_discards_from_4_14() {
    let (journal, fsync, discards) = three_extents_freed_under(crate::kernel::KernelVersion::V4_19);
    assert_eq!(discards, 3);
    assert_eq!(
        journal, NS_PER_MS,
        "three discards on the device at once, one wait"
    );
    assert_eq!(fsync, 2 * NS_PER_MS + journal);
}

#[test]
fn ext4_discard_work_takes_the_discards_off_the_journal_thread_from_5_15() {
    let (_, late, _) = three_extents_freed_under(crate::kernel::KernelVersion::V5_10);
    let (journal, fsync, discards) = three_extents_freed_under(crate::kernel::KernelVersion::V5_15);
    assert_eq!(discards, 3, "the work item discarded every extent");
    assert_eq!(journal, 0, "the journal thread waits for no discard");
    assert_eq!(
        late - fsync,
        NS_PER_MS,
        "the fsync no longer waits for them (5.10: the commit's 2 ms and 1 ms of discards)"
    );
}

/// MobiFS's checkpoint (a VCT: `vct_begin`, `vct_append`, `vct_end`, `vct_wait_sync`) journals
/// a new page as data. `ext4_map_blocks` files an inode as ordered data only when
/// `ext4_should_order_data`, never for journaled data, so under Linux 3.0 (whose delayed
/// allocation files new blocks) the commit submits and waits for no ordered data of it, and
/// the page's contents reach the device in the journal.
#[test]
fn journal_data_page_files_no_ordered_data_under_3_0() {
    let rig = rig_on(crate::kernel::KernelVersion::V3_0, 1);
    assert!(rig
        .ext4
        .config
        .ordered_delalloc(crate::kernel::KernelVersion::V3_0));
    let (s, e) = (rig.sim.handle(), rig.ext4.clone());
    let app = rig.sim.spawn("mobifs-ckpt", async move {
        let ino = e
            .create(&s, issuer(&s), ROOT_INO, "vct", false)
            .await
            .unwrap();
        let vct = e.vct_begin(&s, 1, 1).await.unwrap();
        let vct = e.vct_append(&s, vct, issuer(&s), ino, 0).await;
        let vct = e.vct_size(&s, vct, ino, 4096).await;
        let tid = e.vct_end(&s, vct).await;
        e.vct_wait_sync(&s, issuer(&s), tid).await;
        ino
    });
    rig.sim.run_until(10 * NS_PER_SEC, true).unwrap();
    let ino = app.result().unwrap();
    assert!(rig.ext4.is_mapped(ino, 0), "the page got its block");
    assert_eq!(rig.ext4.stats().journaled_data_pages, 1);
    assert!(
        rig.data.calls.borrow().iter().all(|&(_, i, _)| i != ino),
        "no ordered data of the VCT's inode: {:?}",
        rig.data.calls.borrow()
    );
}
