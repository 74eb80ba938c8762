//! Names (fs/ext4/namei.c, ialloc.c, inode.c's `ext4_evict_inode`, 3.10): `ext4_create`,
//! `ext4_mkdir`, `ext4_unlink`, `ext4_rename`, and the eviction of an inode whose last link and
//! last reference are gone. Each runs in one journal handle with the credits 3.10 asks for, and
//! journals the blocks the placement layer reports, in its order (each
//! `ext4_journal_get_write_access` may wait on a buffer under asynchronous write: QASIO's
//! D_meta; each handle start may wait on a locked transaction: I_jhandle).
//!
//! Simplifications: a rename over an existing name frees the replaced inode's entry and, if
//! that was its last link, puts it on the orphan list in the same handle (3.10 does the same);
//! directories are never removed (`rmdir` is not a system call of the model).

use super::mount::{Ext4, DATA_TRANS_BLOCKS, INDEX_EXTRA_TRANS_BLOCKS};
use super::Touched;
use crate::errno::Errno;
use crate::mm::{Ino, Issuer};
use crate::sim::Sim;

impl Ext4 {
    /// `ext4_create` / `ext4_mkdir`: a new inode `name` in `dir`.
    pub async fn create(
        &self,
        sim: &Sim,
        _issuer: Issuer,
        dir: Ino,
        name: &str,
        is_dir: bool,
    ) -> Result<Ino, Errno> {
        // ext4_create: EXT4_DATA_TRANS_BLOCKS + EXT4_INDEX_EXTRA_TRANS_BLOCKS + 3; ext4_mkdir
        // the same (its first block is counted in the data blocks).
        let credits = DATA_TRANS_BLOCKS + INDEX_EXTRA_TRANS_BLOCKS + 3;
        let mut handle = self.start(sim, credits).await;
        let created = self.alloc_mut(sim, |alloc| alloc.create_inode(dir, name, is_dir));
        let (ino, touched) = match created {
            Ok(created) => created,
            Err(errno) => {
                self.journal.stop(sim, handle).await;
                return Err(errno);
            }
        };
        handle = self.journal_touched(sim, handle, &touched).await;
        let tid = handle.tid;
        self.update_fsync_trans(tid, ino, true);
        self.update_fsync_trans(tid, dir, true);
        self.stats.borrow_mut().creates += 1;
        self.journal.stop(sim, handle).await;
        Ok(ino)
    }

    /// `ext4_unlink`: removes `name` from `dir`; `last_link` when the inode's link count drops
    /// to zero, which puts it on the orphan list until it is evicted (3.10 adds it even when no
    /// one has it open; `ext4_evict_inode` takes it off).
    pub async fn unlink(
        &self,
        sim: &Sim,
        _issuer: Issuer,
        dir: Ino,
        name: &str,
        last_link: bool,
    ) -> Result<Ino, Errno> {
        let mut handle = self.start(sim, DATA_TRANS_BLOCKS).await;
        let removed = self.alloc_mut(sim, |alloc| alloc.unlink(dir, name));
        let (ino, touched) = match removed {
            Ok(removed) => removed,
            Err(errno) => {
                self.journal.stop(sim, handle).await;
                return Err(errno);
            }
        };
        handle = self.journal_touched(sim, handle, &touched).await;
        let tid = handle.tid;
        self.update_fsync_trans(tid, dir, true);
        self.update_fsync_trans(tid, ino, false);
        if last_link {
            handle = self.orphan(sim, handle, ino, true).await;
        }
        self.stats.borrow_mut().unlinks += 1;
        self.journal.stop(sim, handle).await;
        Ok(ino)
    }

    /// `ext4_rename`: moves `old_name` of `old_dir` to `new_name` of `new_dir`, replacing what
    /// was there (`replaced_last_link`: the replaced inode loses its last link). With
    /// `auto_da_alloc`, replacing an existing file starts writing the renamed file's delayed
    /// data (`ext4_alloc_da_blocks`, done by the caller through the page cache: see
    /// [`Ext4::wants_da_flush_on_rename`]).
    #[allow(clippy::too_many_arguments)]
    pub async fn rename(
        &self,
        sim: &Sim,
        _issuer: Issuer,
        old_dir: Ino,
        old_name: &str,
        new_dir: Ino,
        new_name: &str,
        replaced_last_link: bool,
    ) -> Result<Option<Ino>, Errno> {
        // ext4_rename: 2 * EXT4_DATA_TRANS_BLOCKS + EXT4_INDEX_EXTRA_TRANS_BLOCKS + 2.
        let credits = 2 * DATA_TRANS_BLOCKS + INDEX_EXTRA_TRANS_BLOCKS + 2;
        let mut handle = self.start(sim, credits).await;
        let result = self.alloc_mut(sim, |alloc| {
            let mut touched = Touched::new();
            let replaced = match alloc.lookup(new_dir, new_name)?.0 {
                Some(_) => {
                    let (ino, t) = alloc.unlink(new_dir, new_name)?;
                    touched.merge(&t);
                    Some(ino)
                }
                None => None,
            };
            let (ino, t) = alloc.remove_entry(old_dir, old_name)?;
            touched.merge(&t);
            let t = alloc.add_entry(new_dir, new_name, ino)?;
            touched.merge(&t);
            let inode_block = alloc.inode_block(ino);
            touched.add(inode_block, super::MetaKind::InodeTable);
            Ok::<_, Errno>((ino, replaced, touched))
        });
        let (ino, replaced, touched) = match result {
            Ok(result) => result,
            Err(errno) => {
                self.journal.stop(sim, handle).await;
                return Err(errno);
            }
        };
        if self.config.mutant != Some(crate::fs::mutant::Mutant::RenameNotJournaled) {
            handle = self.journal_touched(sim, handle, &touched).await;
        }
        let tid = handle.tid;
        for dir in [old_dir, new_dir] {
            self.update_fsync_trans(tid, dir, true);
        }
        self.update_fsync_trans(tid, ino, false);
        if let Some(replaced) = replaced {
            self.update_fsync_trans(tid, replaced, false);
            if replaced_last_link {
                handle = self.orphan(sim, handle, replaced, true).await;
            }
        }
        self.stats.borrow_mut().renames += 1;
        self.journal.stop(sim, handle).await;
        Ok(replaced)
    }

    /// Whether a rename that replaced a file should start writing the renamed file's delayed
    /// data (`auto_da_alloc` and delayed pages pending, `ext4_rename` -> `ext4_alloc_da_blocks`).
    pub fn wants_da_flush_on_rename(&self, ino: Ino) -> bool {
        self.config.auto_da_alloc
            && self
                .inodes
                .borrow()
                .get(&ino)
                .is_some_and(|i| i.delalloc_pages > 0)
    }

    /// `ext4_evict_inode` of an inode with no link and no reference left: its blocks are freed
    /// (held until the transaction commits, then discarded), it leaves the orphan list, and its
    /// inode is freed. The caller dropped its pages first (`truncate_inode_pages`).
    pub async fn evict(&self, sim: &Sim, _issuer: Issuer, ino: Ino) {
        // ext4_blocks_for_truncate + 3 (at most a tree's worth of blocks is dirtied).
        let credits = DATA_TRANS_BLOCKS + 3;
        let mut handle = self.start(sim, credits).await;
        let tid = handle.tid;
        let touched = self.alloc_mut(sim, |alloc| alloc.free_inode(ino, tid));
        // ext4_orphan_del first dirties the superblock and the inode, then ext4_free_inode the
        // bitmaps: journal the orphan blocks before the rest, as 3.10 orders them.
        if self.inodes.borrow().get(&ino).is_some_and(|i| i.orphan) {
            handle = self.orphan(sim, handle, ino, false).await;
        }
        handle = self.journal_touched(sim, handle, &touched).await;
        if let Some(info) = self.inodes.borrow_mut().remove(&ino) {
            self.release_reservations(info.delalloc_pages);
        }
        self.stats.borrow_mut().evictions += 1;
        self.journal.stop(sim, handle).await;
    }
}
