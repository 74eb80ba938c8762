//! What crash-point checking records of ext4 ([`crate::mm::crashlog`]): at each transaction's
//! `T_FLUSH`, the files under test as the transaction leaves them on disk (their name in the
//! directory, `i_disksize`, the extent map), and each data page the transaction journals
//! (MobiFS's checkpointer, `data=journal`).
//!
//! The snapshot at `T_FLUSH` is the transaction's state because every change of these fields
//! happens inside a handle, and at `T_FLUSH` all handles of the transaction have stopped and
//! none of the next one has started (`jbd2_journal_commit_transaction` switches the running
//! transaction there).

use super::mount::Ext4;
use crate::fs::jbd2::{CrashHook, Tid};
use crate::mm::crashlog::{CrashLog, FileSnapshot, LogContent};
use crate::mm::Ino;
use crate::units::Nanos;
use std::rc::{Rc, Weak};

struct Ext4CrashHook {
    ext4: Weak<Ext4>,
    log: Rc<CrashLog>,
}

impl CrashHook for Ext4CrashHook {
    fn flushing(&self, tid: Tid, buffers: &[u64]) {
        let Some(ext4) = self.ext4.upgrade() else {
            return;
        };
        // The directory blocks it logs, as their copies will hold them: where recovery reads
        // the files' names back from (`ext4_rename` and the other namei operations dirty them
        // in the handle that changes them, `ext4_handle_dirty_dirent_node`).
        let mut sorted = buffers.to_vec();
        sorted.sort_unstable();
        let dirs = ext4.alloc.borrow().directory_blocks_among(&sorted);
        self.log.tid_directory_blocks(tid, dirs);
        let files = self
            .log
            .tracked()
            .into_iter()
            .map(|(ino, dir, name)| ext4.crash_snapshot(ino, dir, &name))
            .collect();
        self.log.tid_flush(tid, files);
    }

    fn commit_block(&self, tid: Tid, block: u64, at: Nanos) {
        self.log.tid_commit(tid, block, at);
    }

    fn log_write(&self, block: u64, offset: u64, at: Nanos, content: LogContent) {
        self.log.log_write(block, offset, at, content);
    }
}

impl Ext4 {
    /// Records, from now on, what each transaction leaves of the files under test in `log`.
    pub fn record_crash(self: &Rc<Self>, log: Rc<CrashLog>) {
        *self.crash.borrow_mut() = Some(log.clone());
        log.journal_layout(self.journal.config.blocks);
        log.metadata_regions(metadata_regions(self.alloc.borrow().layout()));
        self.journal.set_crash_hook(Rc::new(Ext4CrashHook {
            ext4: Rc::downgrade(self),
            log,
        }));
    }

    /// File `ino` (named `name` in `dir`) as the on-disk structures say now.
    fn crash_snapshot(&self, ino: Ino, dir: Ino, name: &str) -> FileSnapshot {
        let alloc = self.alloc.borrow();
        let linked = alloc
            .lookup(dir, name)
            .is_ok_and(|(found, _)| found == Some(ino));
        let size = self.inodes.borrow().get(&ino).map_or(0, |i| i.disksize);
        let extents = alloc
            .extents(ino)
            .iter()
            .map(|e| (e.lblk, e.pblk, e.len))
            .collect();
        FileSnapshot {
            ino,
            linked,
            size,
            extents,
        }
    }

    /// Transaction `tid` journals page `index` of `ino`, home block `block`.
    pub(crate) fn crash_note_journaled(&self, tid: Tid, ino: Ino, index: u64, block: u64) {
        if let Some(log) = self.crash.borrow().as_ref() {
            log.journaled(tid, ino, index, block);
        }
    }
}

/// The fixed metadata of `layout` as described runs `(first block, blocks, what)`: the
/// superblock, the group descriptors, each group's bitmaps and inode table (what a crash-state
/// dump names a block by).
fn metadata_regions(layout: &super::layout::Layout) -> Vec<crate::mm::crashlog::Region> {
    let mut regions = vec![
        (layout.superblock_block(), 1, "the superblock".to_string()),
        (
            layout.gdt_block(0),
            layout.desc_blocks,
            "group descriptors".to_string(),
        ),
    ];
    for g in 0..layout.groups {
        regions.push((
            layout.block_bitmap(g),
            1,
            format!("block bitmap of group {g}"),
        ));
        regions.push((
            layout.inode_bitmap(g),
            1,
            format!("inode bitmap of group {g}"),
        ));
        regions.push((
            layout.inode_table(g),
            layout.inode_table_blocks,
            format!("inode table of group {g}"),
        ));
    }
    regions.sort();
    regions
}
