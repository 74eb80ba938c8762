//! A minimal file system without a journal, so that the VFS and page cache can run until ext4 +
//! jbd2 land: a superblock, an inode table and data blocks allocated one 4 KiB block at a time,
//! preferring the block after the file's previous one (ext2's `ext2_find_goal` idea) so that a
//! sequential writer gets contiguous extents. A file laid out at setup (`populate_blocks`)
//! gets the same blocks a run at a time.
//!
//! Layout: block 0 superblock, blocks `1..1 + inode_table_blocks` the inode table (16 inodes of
//! 256 bytes per block, ext4's default inode size), data blocks after.
//!
//! Simplifications: no bitmaps or group descriptors on disk (free space is an in-memory extent
//! map, so allocation issues no metadata I/O); a file's block map is an in-memory extent tree;
//! directories own no data blocks (their entries live in the VFS name space and a directory
//! change dirties only the directory inode); no journal, so a crash is not modelled.

use super::{AddressSpaceOps, Errno, FileSystem, FileSystemOps, Ino, Issuer, LocalBoxFuture};
use crate::dev::{IoFlags, IoOp};
use crate::mm::bio::{BioRequest, IoPurpose};
use crate::mm::Mm;
use crate::sim::sync::Mutex;
use crate::sim::Sim;
use crate::units::PAGE_SIZE;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

/// Inodes per 4 KiB inode-table block: 4096 / 256 (mke2fs default inode size 256 bytes).
pub const INODES_PER_BLOCK: u64 = PAGE_SIZE / 256;
/// Smallest file system accepted: 1 MiB (superblock, inode table of 64 inodes, data blocks).
pub const MIN_FS_BYTES: u64 = 1 << 20;
/// First inode number handed out (ext2/ext4 reserve inodes 1..10; `EXT4_GOOD_OLD_FIRST_INO` 11).
pub const FIRST_INO: Ino = 11;

#[derive(Debug, Clone)]
pub struct SimpleFs {
    nr_blocks: u64,
    inode_table_start: u64,
    nr_inodes: u64,
    /// Free data blocks as extents start -> length, coalesced.
    free: BTreeMap<u64, u64>,
    nr_free: u64,
    /// Per inode: file page index -> (first block, length in blocks), extents coalesced.
    maps: BTreeMap<Ino, BTreeMap<u64, (u64, u64)>>,
    free_inos: Vec<Ino>,
    next_ino: Ino,
}

impl SimpleFs {
    /// A file system over `size_bytes` of disk with room for `nr_inodes` inodes.
    pub fn new(size_bytes: u64, nr_inodes: u64) -> SimpleFs {
        let nr_blocks = size_bytes / PAGE_SIZE;
        let table_blocks = nr_inodes.div_ceil(INODES_PER_BLOCK);
        let data_start = 1 + table_blocks;
        assert!(
            nr_blocks > data_start,
            "file system too small for its inode table"
        );
        let mut free = BTreeMap::new();
        free.insert(data_start, nr_blocks - data_start);
        SimpleFs {
            nr_blocks,
            inode_table_start: 1,
            nr_inodes,
            free,
            nr_free: nr_blocks - data_start,
            maps: BTreeMap::new(),
            free_inos: Vec::new(),
            next_ino: FIRST_INO,
        }
    }

    pub fn nr_blocks(&self) -> u64 {
        self.nr_blocks
    }

    /// Number of extents mapping `ino` (a fragmentation measure for tests).
    pub fn extents(&self, ino: Ino) -> usize {
        self.maps.get(&ino).map_or(0, |m| m.len())
    }

    /// Takes one free block, `goal` if it is free, else the first free block.
    fn alloc_block(&mut self, goal: Option<u64>) -> Option<u64> {
        if let Some(goal) = goal {
            if let Some((&start, &len)) = self.free.range(..=goal).next_back() {
                if goal < start + len {
                    self.free.remove(&start);
                    if goal > start {
                        self.free.insert(start, goal - start);
                    }
                    if goal + 1 < start + len {
                        self.free.insert(goal + 1, start + len - goal - 1);
                    }
                    self.nr_free -= 1;
                    return Some(goal);
                }
            }
        }
        let (&start, &len) = self.free.iter().next()?;
        self.free.remove(&start);
        if len > 1 {
            self.free.insert(start + 1, len - 1);
        }
        self.nr_free -= 1;
        Some(start)
    }

    /// Takes up to `max` free blocks in one run: from `goal` if it is free, else from the first
    /// free extent, to the end of that free extent at most. The same blocks, in the same order,
    /// as `max` calls of [`SimpleFs::alloc_block`] each given the block after the previous one
    /// as its goal, as long as they stay in one free extent (free extents are coalesced, so the
    /// block after one is in use).
    fn alloc_run(&mut self, goal: Option<u64>, max: u64) -> Option<(u64, u64)> {
        let containing = goal.and_then(|goal| {
            let (&start, &len) = self.free.range(..=goal).next_back()?;
            (goal < start + len).then_some((start, len, goal))
        });
        let (start, len, first) = match containing {
            Some(found) => found,
            None => {
                let (&start, &len) = self.free.iter().next()?;
                (start, len, start)
            }
        };
        let run = max.min(start + len - first);
        self.free.remove(&start);
        if first > start {
            self.free.insert(start, first - start);
        }
        if first + run < start + len {
            self.free.insert(first + run, start + len - first - run);
        }
        self.nr_free -= run;
        Some((first, run))
    }

    /// Maps file pages `start..end` of `ino` that have no block yet: the same blocks and extents
    /// as [`AddressSpaceOps::get_block`] with `create` for each page in turn (the file's next
    /// block the goal), allocated a run at a time instead of a block at a time (a 64 MiB file is
    /// one run, not 16,384 allocations). ENOSPC, with the pages before it mapped, when the disk
    /// fills, as the page-by-page loop would leave it.
    fn map_range(&mut self, ino: Ino, start: u64, end: u64) -> Result<(), Errno> {
        let mut index = start;
        while index < end {
            let map = self.maps.get(&ino).expect("map_range on a live inode");
            let mut goal = None;
            if let Some((&first, &(block, len))) = map.range(..=index).next_back() {
                if index < first + len {
                    index = first + len;
                    continue;
                }
                if index == first + len {
                    goal = Some(block + len);
                }
            }
            let hole_end = map
                .range(index..)
                .next()
                .map_or(end, |(&next, _)| next.min(end));
            let (block, run) = self
                .alloc_run(goal, hole_end - index)
                .ok_or(Errno::ENOSPC)?;
            self.insert_extent(ino, index, block, run);
            index += run;
        }
        Ok(())
    }

    /// Adds extent `index -> (block, len)` to `ino`'s map, merged with the extent before and
    /// the one after when contiguous in both the file and the disk.
    fn insert_extent(&mut self, ino: Ino, index: u64, block: u64, len: u64) {
        let map = self.maps.get_mut(&ino).expect("live inode");
        let previous = map
            .range(..index)
            .next_back()
            .map(|(&first, &(b, l))| (first, b, l));
        let (start, b, len) = match previous {
            Some((first, b, l)) if first + l == index && b + l == block => (first, b, l + len),
            _ => (index, block, len),
        };
        let len = match map.get(&(start + len)) {
            Some(&(next_block, next_len)) if b + len == next_block => {
                map.remove(&(start + len));
                len + next_len
            }
            _ => len,
        };
        map.insert(start, (b, len));
    }

    fn free_range(&mut self, start: u64, len: u64) {
        assert!(len > 0);
        let mut start = start;
        let mut len = len;
        if let Some((&prev, &prev_len)) = self.free.range(..start).next_back() {
            assert!(prev + prev_len <= start, "double free of block {start}");
            if prev + prev_len == start {
                self.free.remove(&prev);
                start = prev;
                len += prev_len;
            }
        }
        if let Some(&next_len) = self.free.get(&(start + len)) {
            self.free.remove(&(start + len));
            len += next_len;
        }
        self.free.insert(start, len);
    }
}

impl AddressSpaceOps for SimpleFs {
    fn get_block(&mut self, ino: Ino, index: u64, create: bool) -> Result<Option<u64>, Errno> {
        let map = self.maps.get(&ino).expect("get_block on a live inode");
        let mut goal = None;
        if let Some((&first, &(block, len))) = map.range(..=index).next_back() {
            if index < first + len {
                return Ok(Some(block + (index - first)));
            }
            if index == first + len {
                goal = Some(block + len);
            }
        }
        if !create {
            return Ok(None);
        }
        let block = self.alloc_block(goal).ok_or(Errno::ENOSPC)?;
        let map = self.maps.get_mut(&ino).expect("live inode");
        // Extend the previous extent when contiguous in both file and disk, else insert.
        let previous = map
            .range(..index)
            .next_back()
            .map(|(&first, &(b, len))| (first, b, len));
        match previous {
            Some((first, b, len)) if first + len == index && b + len == block => {
                map.insert(first, (b, len + 1));
            }
            _ => {
                map.insert(index, (block, 1));
            }
        }
        // Merge with the next extent when it now follows on.
        let (start, (b, len)) = map
            .range(..=index)
            .next_back()
            .map(|(&f, &e)| (f, e))
            .expect("just inserted");
        if let Some(&(next_block, next_len)) = map.get(&(start + len)) {
            if b + len == next_block {
                map.remove(&(start + len));
                map.insert(start, (b, len + next_len));
            }
        }
        Ok(Some(block))
    }
}

impl FileSystem for SimpleFs {
    fn name(&self) -> &str {
        "simplefs"
    }

    fn alloc_inode(&mut self) -> Result<Ino, Errno> {
        if let Some(ino) = self.free_inos.pop() {
            self.maps.insert(ino, BTreeMap::new());
            return Ok(ino);
        }
        if self.next_ino >= FIRST_INO + self.nr_inodes {
            return Err(Errno::ENOSPC);
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        self.maps.insert(ino, BTreeMap::new());
        Ok(ino)
    }

    fn free_inode(&mut self, ino: Ino) {
        self.truncate_blocks(ino, 0);
        assert!(
            self.maps.remove(&ino).is_some(),
            "free of unknown inode {ino}"
        );
        self.free_inos.push(ino);
    }

    fn truncate_blocks(&mut self, ino: Ino, first_index: u64) {
        let Some(map) = self.maps.get_mut(&ino) else {
            return;
        };
        let mut to_free = Vec::new();
        // An extent straddling `first_index` keeps its head.
        if let Some((&first, &(block, len))) = map.range(..first_index).next_back() {
            if first + len > first_index {
                let keep = first_index - first;
                map.insert(first, (block, keep));
                to_free.push((block + keep, len - keep));
            }
        }
        let tail: Vec<u64> = map.range(first_index..).map(|(&f, _)| f).collect();
        for first in tail {
            let (block, len) = map.remove(&first).expect("listed");
            to_free.push((block, len));
        }
        for (block, len) in to_free {
            self.nr_free += len;
            self.free_range(block, len);
        }
    }

    fn inode_block(&self, ino: Ino) -> u64 {
        assert!(ino >= FIRST_INO);
        self.inode_table_start + (ino - FIRST_INO) / INODES_PER_BLOCK
    }

    fn free_blocks(&self) -> u64 {
        self.nr_free
    }
}

/// [`SimpleFs`] mounted: the VFS's operations over it, with `generic_file_fsync` (the data
/// first, then the inode-table block written synchronously under `i_mutex` when the inode is
/// dirty, then a cache flush).
pub struct SimpleFsOps {
    fs: Rc<RefCell<SimpleFs>>,
    mm: Rc<Mm>,
    root: Ino,
}

impl SimpleFsOps {
    /// Mounts `fs` (which the page cache `mm` maps through) and allocates its root directory.
    pub fn mount(fs: Rc<RefCell<SimpleFs>>, mm: Rc<Mm>) -> Rc<SimpleFsOps> {
        let root = fs
            .borrow_mut()
            .alloc_inode()
            .expect("an inode for the root");
        Rc::new(SimpleFsOps { fs, mm, root })
    }
}

impl FileSystemOps for SimpleFsOps {
    fn name(&self) -> &str {
        "simplefs"
    }

    fn root(&self) -> Ino {
        self.root
    }

    fn create<'a>(
        &'a self,
        _sim: &'a Sim,
        _issuer: Issuer,
        dir: Ino,
        name: &'a str,
        is_dir: bool,
    ) -> LocalBoxFuture<'a, Result<Ino, Errno>> {
        Box::pin(async move { self.create_at_setup(dir, name, is_dir) })
    }

    fn create_at_setup(&self, _dir: Ino, _name: &str, _is_dir: bool) -> Result<Ino, Errno> {
        self.fs.borrow_mut().alloc_inode()
    }

    fn populate_blocks(&self, ino: Ino, size: u64) -> Result<(), Errno> {
        self.fs
            .borrow_mut()
            .map_range(ino, 0, size.div_ceil(PAGE_SIZE))
    }

    fn unlink<'a>(
        &'a self,
        _sim: &'a Sim,
        _issuer: Issuer,
        _dir: Ino,
        _name: &'a str,
        _last_link: bool,
    ) -> LocalBoxFuture<'a, Result<(), Errno>> {
        Box::pin(async { Ok(()) })
    }

    fn rename<'a>(
        &'a self,
        _sim: &'a Sim,
        _issuer: Issuer,
        _old_dir: Ino,
        _old_name: &'a str,
        _new_dir: Ino,
        _new_name: &'a str,
        _replaced_last_link: bool,
    ) -> LocalBoxFuture<'a, Result<(), Errno>> {
        Box::pin(async { Ok(()) })
    }

    fn evict<'a>(&'a self, _sim: &'a Sim, _issuer: Issuer, ino: Ino) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move { self.fs.borrow_mut().free_inode(ino) })
    }

    fn setattr_size<'a>(
        &'a self,
        _sim: &'a Sim,
        _issuer: Issuer,
        ino: Ino,
        old_size: u64,
        new_size: u64,
    ) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            if new_size < old_size {
                self.fs
                    .borrow_mut()
                    .truncate_blocks(ino, new_size.div_ceil(PAGE_SIZE));
            }
        })
    }

    fn update_time<'a>(&'a self, _sim: &'a Sim, _ino: Ino) -> LocalBoxFuture<'a, ()> {
        Box::pin(async {})
    }

    fn fsync<'a>(
        &'a self,
        sim: &'a Sim,
        issuer: Issuer,
        ino: Ino,
        _datasync: bool,
        write_inode: bool,
        i_mutex: Mutex,
    ) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            let guard = i_mutex.lock(sim).await;
            if write_inode {
                // sync_inode_metadata: the inode-table block, synchronously.
                let block = self.fs.borrow().inode_block(ino);
                self.mm
                    .submit_wait(sim, inode_write_bio(block, issuer))
                    .await;
            }
            drop(guard);
            // blkdev_issue_flush: persist the device's volatile cache.
            crate::mm::bio::blkdev_issue_flush(&*self.mm.bdev, sim, issuer).await;
        })
    }

    fn sync_fs<'a>(&'a self, sim: &'a Sim, issuer: Issuer) -> LocalBoxFuture<'a, ()> {
        // No journal: the device cache is flushed (blkdev_issue_flush).
        Box::pin(async move {
            crate::mm::bio::blkdev_issue_flush(&*self.mm.bdev, sim, issuer).await;
        })
    }

    fn open_for_write(&self, _ino: Ino) {}

    fn release_writer(&self, _ino: Ino) -> bool {
        false
    }

    fn flush_on_rename(&self, _ino: Ino) -> bool {
        false
    }
}

/// The inode-table block written by `sync_inode_metadata`: `WRITE_SYNC` (`sync_dirty_buffer`,
/// REQ_SYNC | REQ_NOIDLE) of metadata (include/linux/fs.h, 3.10).
fn inode_write_bio(block: u64, issuer: Issuer) -> BioRequest {
    let flags = IoFlags {
        sync: true,
        meta: true,
        noidle: true,
        ..IoFlags::default()
    };
    BioRequest::for_pages(IoOp::Write, block, 1, flags, issuer, None, IoPurpose::Inode)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_allocation_makes_one_extent_and_truncate_frees_it() {
        let mut fs = SimpleFs::new(64 << 20, 1024);
        let free_before = fs.free_blocks();
        let ino = fs.alloc_inode().unwrap();
        let first = fs.get_block(ino, 0, true).unwrap().unwrap();
        for i in 1..100 {
            assert_eq!(fs.get_block(ino, i, true).unwrap(), Some(first + i));
        }
        assert_eq!(fs.extents(ino), 1);
        assert_eq!(fs.get_block(ino, 200, false).unwrap(), None, "a hole");
        fs.truncate_blocks(ino, 50);
        assert_eq!(fs.free_blocks(), free_before - 50);
        assert_eq!(fs.get_block(ino, 60, false).unwrap(), None);
        fs.free_inode(ino);
        assert_eq!(fs.free_blocks(), free_before);
        assert_eq!(
            fs.free.len(),
            1,
            "free space coalesced back into one extent"
        );
    }

    /// `populate_blocks`' run-at-a-time allocation (`map_range`) leaves the file system exactly
    /// as `get_block` page by page would: same blocks, extents, free space and ENOSPC point, on
    /// fragmented file systems with holes and mapped pages in the range.
    #[test]
    fn map_range_allocates_what_get_block_page_by_page_would() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |bound: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % bound
        };
        for _ in 0..200 {
            let mut fs = SimpleFs::new((64 + next(512)) * PAGE_SIZE, 32);
            let inos: Vec<Ino> = (0..3).map(|_| fs.alloc_inode().unwrap()).collect();
            for _ in 0..next(40) {
                let ino = inos[next(3) as usize];
                match next(4) {
                    0 => fs.truncate_blocks(ino, next(64)),
                    _ => {
                        let _ = fs.get_block(ino, next(128), true);
                    }
                }
            }
            let ino = inos[next(3) as usize];
            let (start, len) = (next(96), next(700));
            let mut by_page = fs.clone();
            let expected = (start..start + len)
                .try_for_each(|index| by_page.get_block(ino, index, true).map(|_| ()));
            let got = fs.map_range(ino, start, start + len);
            assert_eq!(got, expected);
            assert_eq!(format!("{fs:?}"), format!("{by_page:?}"));
        }
    }

    #[test]
    fn a_full_disk_is_enospc_not_a_panic() {
        let mut fs = SimpleFs::new(64 * PAGE_SIZE, 16);
        let ino = fs.alloc_inode().unwrap();
        let free = fs.free_blocks();
        for i in 0..free {
            fs.get_block(ino, i, true).unwrap();
        }
        assert_eq!(fs.get_block(ino, free, true), Err(Errno::ENOSPC));
    }
}
