//! ext4's on-disk structures and allocators as pure state machines: which disk blocks every
//! operation reads and dirties, modelled on Linux 3.10's fs/ext4 and the layout of e2fsprogs
//! 1.42's mke2fs. No I/O and no waiting: the operations layer (jbd2 handles, metadata
//! buffers, the page cache) calls these and journals the blocks they report.
//!
//! - [`layout`]: geometry (groups, flex_bg packing, GDT and reserved GDT, sparse superblock
//!   backups, the journal's place and size).
//! - [`mballoc`]: the block allocator (goal, normalization, inode and locality-group
//!   preallocation, group scan criteria, frees held until their transaction commits).
//! - [`ialloc`]: inode placement (Orlov for directories, the parent's flex group for files).
//! - [`extents`]: each inode's extent tree (in-inode root, leaves, index blocks).
//! - [`dir`]: directory entries in blocks, linear then htree (`dir_index`).
//! - [`alloc`]: [`alloc::Ext4Alloc`], the façade the operations layer calls.
//!
//! Every mutating call returns the metadata blocks it dirtied as a [`Touched`] set, in the
//! order Linux calls `ext4_journal_get_write_access` on them, each block once: the caller takes
//! a jbd2 handle and journals each (`jbd2_journal_get_write_access` + `dirty_metadata`).
//! Simplifications common to all submodules are listed in `docs/ext4.md`; each submodule lists
//! its own.

#[cfg(test)]
mod account_tests;
pub mod alloc;
pub mod check;
#[cfg(test)]
mod check_tests;
pub mod crash;
pub mod dir;
#[cfg(test)]
mod era_tests;
pub mod extents;
pub mod fsync;
pub mod glue;
pub mod ialloc;
pub mod inode;
pub mod layout;
pub mod mballoc;
pub mod mount;
pub mod namei;
#[cfg(test)]
mod ops_tests;
pub mod page_io;
pub mod vct;
#[cfg(test)]
mod vfs_tests;

pub use mount::{DataMode, Ext4, Ext4Config, Ext4Stats, FsKind, JournalLocation};

/// A jbd2 transaction id (`tid_t`; widened to 64 bits so that it never wraps in a run).
pub type Tid = u64;

/// What a dirtied metadata block holds (the buffer's role, for journaling and for the block
/// I/O account by purpose).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MetaKind {
    /// The superblock (orphan list head `s_last_orphan`).
    Superblock,
    /// A block of the group descriptor table.
    GroupDesc,
    /// A group's block bitmap.
    BlockBitmap,
    /// A group's inode bitmap.
    InodeBitmap,
    /// An inode-table block (holding an inode that changed).
    InodeTable,
    /// A directory block (entries, or an htree index).
    Directory,
    /// An extent-tree leaf block.
    ExtentLeaf,
    /// An extent-tree index block.
    ExtentIndex,
    /// A file's data block journaled like metadata (`data=journal`: `ext4_journalled_write_end`
    /// -> `ext4_handle_dirty_metadata` on the page's buffers).
    JournaledData,
}

impl MetaKind {
    /// The account's purpose for I/O on a block of this kind.
    pub fn purpose(self) -> crate::mm::IoPurpose {
        use crate::mm::IoPurpose;
        match self {
            MetaKind::Superblock => IoPurpose::Superblock,
            MetaKind::GroupDesc => IoPurpose::GroupDesc,
            MetaKind::BlockBitmap => IoPurpose::BlockBitmap,
            MetaKind::InodeBitmap => IoPurpose::InodeBitmap,
            MetaKind::InodeTable => IoPurpose::Inode,
            MetaKind::Directory => IoPurpose::Directory,
            MetaKind::ExtentLeaf | MetaKind::ExtentIndex => IoPurpose::Extent,
            MetaKind::JournaledData => IoPurpose::Data,
        }
    }
}

/// The metadata blocks one operation dirtied: each block once, in first-touch order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Touched {
    pub blocks: Vec<(u64, MetaKind)>,
}

impl Touched {
    pub fn new() -> Touched {
        Touched::default()
    }

    /// Records that `block` (of `kind`) was dirtied; a block already recorded keeps its place.
    pub fn add(&mut self, block: u64, kind: MetaKind) {
        if let Some(&(_, previous)) = self.blocks.iter().find(|&&(b, _)| b == block) {
            assert_eq!(previous, kind, "block {block} dirtied as two kinds");
            return;
        }
        self.blocks.push((block, kind));
    }

    /// Adds every block of `other`, keeping first-touch order.
    pub fn merge(&mut self, other: &Touched) {
        for &(block, kind) in &other.blocks {
            self.add(block, kind);
        }
    }

    pub fn contains(&self, block: u64) -> bool {
        self.blocks.iter().any(|&(b, _)| b == block)
    }

    /// The blocks of one kind, in order.
    pub fn of_kind(&self, kind: MetaKind) -> Vec<u64> {
        self.blocks
            .iter()
            .filter(|&&(_, k)| k == kind)
            .map(|&(b, _)| b)
            .collect()
    }

    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touched_keeps_first_touch_order_without_duplicates() {
        let mut t = Touched::new();
        t.add(9, MetaKind::InodeBitmap);
        t.add(1, MetaKind::GroupDesc);
        t.add(9, MetaKind::InodeBitmap);
        t.add(1057, MetaKind::InodeTable);
        assert_eq!(
            t.blocks,
            vec![
                (9, MetaKind::InodeBitmap),
                (1, MetaKind::GroupDesc),
                (1057, MetaKind::InodeTable)
            ]
        );
        assert_eq!(t.of_kind(MetaKind::GroupDesc), vec![1]);
    }
}
