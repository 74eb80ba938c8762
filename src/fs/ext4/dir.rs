//! Directories, modelled on Linux 3.10's fs/ext4/namei.c: entries (`ext4_dir_entry_2`, 8
//! bytes + the name rounded up to 4) in 4 KiB blocks; a linear directory while it has one block
//! (`ext4_add_entry` scans its blocks for room); with `dir_index`, a full single block turns
//! into an htree (`make_indexed_dir`: block 0 becomes the `dx_root`, its entries move to a new
//! block that is split at once), whose leaves are chosen by name hash (`dx_probe`) and split in
//! two by size when full (`do_split`), the index growing a second level when the root's 508
//! slots are used (`ext4_dx_add_entry`).
//!
//! Blocks are the directory's logical blocks; the caller maps them to disk through the
//! directory's extent tree and allocates the blocks an addition appends (`ext4_append`).
//!
//! Simplifications:
//! - Space in a block is a byte count: Linux finds room in one entry's slack (`rec_len` beyond
//!   its name), so a block whose free bytes are scattered may refuse an entry that fits here.
//! - The name hash is 32-bit FNV-1a ([`name_hash`]), not half-MD4 with the file system's random
//!   `s_hash_seed`; hash collisions across a split (`continued`) are not special-cased.
//! - Directories never shrink (neither does 3.10); no inline data, no checksums.

use crate::errno::Errno;
use crate::mm::Ino;
use std::collections::BTreeMap;

/// Directory block size.
pub const DIR_BLOCK_BYTES: u32 = 4096;
/// `dx_root_limit`: (4096 - `EXT4_DIR_REC_LEN(1)` - `EXT4_DIR_REC_LEN(2)` - 8-byte
/// `dx_root_info`) / 8-byte `dx_entry` = 508.
pub const DX_ROOT_LIMIT: usize = 508;
/// `dx_node_limit`: (4096 - `EXT4_DIR_REC_LEN(0)`) / 8 = 511.
pub const DX_NODE_LIMIT: usize = 511;
/// Bytes of "." and ".." in a new directory's first block (`ext4_init_new_dir`).
const DOT_DOTDOT_BYTES: u32 = 24;

/// `EXT4_DIR_REC_LEN`: an entry's size, 8 bytes + the name, rounded up to 4.
pub fn rec_len(name: &str) -> u32 {
    (name.len() as u32 + 8 + 3) & !3
}

/// The directory hash of a name (the low bit cleared, as `dx_hack_hash` and friends return).
pub fn name_hash(name: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in name.as_bytes() {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    h & !1
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Leaf,
    DxRoot,
    DxNode,
}

#[derive(Debug, Clone)]
struct Block {
    role: Role,
    used: u32,
    /// name -> inode (leaves only).
    entries: BTreeMap<Box<str>, Ino>,
}

impl Block {
    fn leaf(used: u32) -> Block {
        Block {
            role: Role::Leaf,
            used,
            entries: BTreeMap::new(),
        }
    }
}

/// What an addition or removal did, in directory blocks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DirChange {
    /// Blocks written, in order, each once.
    pub dirtied: Vec<u32>,
    /// Blocks appended (the caller allocates them; they are dirtied too).
    pub appended: Vec<u32>,
}

impl DirChange {
    fn dirty(&mut self, block: u32) {
        if !self.dirtied.contains(&block) {
            self.dirtied.push(block);
        }
    }
}

/// One directory's entries and blocks.
#[derive(Debug, Clone)]
pub struct Dir {
    blocks: Vec<Block>,
    /// `indirect_levels` of an htree directory: `None` while linear.
    levels: Option<u8>,
    /// The dx root's entries `(hash, block)` (sorted; the first's hash is 0).
    root: Vec<(u32, u32)>,
    /// Second-level index nodes' entries.
    nodes: BTreeMap<u32, Vec<(u32, u32)>>,
    /// name -> its block.
    names: BTreeMap<Box<str>, u32>,
}

impl Default for Dir {
    fn default() -> Self {
        Dir::new()
    }
}

impl Dir {
    /// `ext4_init_new_dir`: one block holding "." and "..".
    pub fn new() -> Dir {
        Dir {
            blocks: vec![Block::leaf(DOT_DOTDOT_BYTES)],
            levels: None,
            root: Vec::new(),
            nodes: BTreeMap::new(),
            names: BTreeMap::new(),
        }
    }

    /// Blocks in the directory (`i_size / 4096`).
    pub fn blocks(&self) -> u32 {
        self.blocks.len() as u32
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    pub fn is_indexed(&self) -> bool {
        self.levels.is_some()
    }

    /// Entries in name order.
    pub fn entries(&self) -> impl Iterator<Item = (&str, Ino)> + '_ {
        self.names
            .iter()
            .map(|(n, &b)| (&**n, self.blocks[b as usize].entries[n]))
    }

    /// The entries block `l` holds (name, inode), in name order (crash-point checking reads
    /// a directory back block by block, as the journal logged it).
    pub fn block_entries(&self, l: u32) -> impl Iterator<Item = (&str, Ino)> + '_ {
        self.blocks[l as usize]
            .entries
            .iter()
            .map(|(n, &i)| (&**n, i))
    }

    /// `dx_probe`: the index entries walked and the leaf for `hash`.
    fn probe(&self, hash: u32) -> (Vec<(u32, usize)>, u32) {
        let pick = |entries: &[(u32, u32)]| entries.partition_point(|e| e.0 <= hash).max(1) - 1;
        let mut frames = Vec::new();
        let pos = pick(&self.root);
        frames.push((0, pos));
        let mut block = self.root[pos].1;
        if self.levels == Some(1) {
            let node = &self.nodes[&block];
            let pos = pick(node);
            frames.push((block, pos));
            block = node[pos].1;
        }
        (frames, block)
    }

    /// `ext4_find_entry` / `ext4_dx_find_entry`: the inode of `name` and the blocks read to
    /// find it (every block up to the one holding it when linear; index and leaf with htree).
    pub fn lookup(&self, name: &str) -> (Option<Ino>, Vec<u32>) {
        match self.levels {
            Some(_) => {
                let (frames, leaf) = self.probe(name_hash(name));
                let mut read: Vec<u32> = frames.iter().map(|&(b, _)| b).collect();
                read.push(leaf);
                (self.blocks[leaf as usize].entries.get(name).copied(), read)
            }
            None => match self.names.get(name) {
                Some(&b) => (
                    Some(self.blocks[b as usize].entries[name]),
                    (0..=b).collect(),
                ),
                None => (None, (0..self.blocks()).collect()),
            },
        }
    }

    /// How many blocks adding `name` may append (for the caller to check free space first).
    pub fn blocks_needed(&self, name: &str) -> u32 {
        let size = rec_len(name);
        match self.levels {
            None => {
                if self.blocks.iter().any(|b| b.used + size <= DIR_BLOCK_BYTES) {
                    0
                } else if self.blocks.len() == 1 {
                    2
                } else {
                    1
                }
            }
            Some(_) => {
                let (_, leaf) = self.probe(name_hash(name));
                if self.blocks[leaf as usize].used + size <= DIR_BLOCK_BYTES {
                    0
                } else {
                    2
                }
            }
        }
    }

    fn append(&mut self, block: Block, change: &mut DirChange) -> u32 {
        let lblk = self.blocks.len() as u32;
        self.blocks.push(block);
        change.appended.push(lblk);
        lblk
    }

    /// Appends an empty leaf block to a linear directory (mke2fs's `ext2fs_expand_dir`, which
    /// gives lost+found its extra blocks): what filling the directory until a block is appended
    /// and removing the fill leaves, without the fill.
    pub fn append_empty_leaf(&mut self) {
        assert!(
            self.levels.is_none(),
            "an indexed directory grows by splits"
        );
        self.blocks.push(Block::leaf(0));
    }

    fn put(&mut self, block: u32, name: &str, ino: Ino) {
        let b = &mut self.blocks[block as usize];
        assert_eq!(b.role, Role::Leaf);
        b.used += rec_len(name);
        assert!(
            b.used <= DIR_BLOCK_BYTES,
            "directory block {block} overfull"
        );
        b.entries.insert(name.into(), ino);
        self.names.insert(name.into(), block);
    }

    /// `ext4_add_entry`: adds `name -> ino`; `dir_index` is the file system feature.
    pub fn add(&mut self, name: &str, ino: Ino, dir_index: bool) -> Result<DirChange, Errno> {
        if name.is_empty() || name.len() > 255 {
            return Err(Errno::EINVAL);
        }
        if self.names.contains_key(name) {
            return Err(Errno::EEXIST);
        }
        let size = rec_len(name);
        let mut change = DirChange::default();
        if self.levels.is_some() {
            self.dx_add(name, ino, &mut change)?;
            return Ok(change);
        }
        if let Some(b) = (0..self.blocks()).find(|&b| {
            let block = &self.blocks[b as usize];
            block.used + size <= DIR_BLOCK_BYTES
        }) {
            self.put(b, name, ino);
            change.dirty(b);
            return Ok(change);
        }
        if self.blocks.len() == 1 && dir_index {
            self.make_indexed_dir(&mut change);
            let hash = name_hash(name);
            let (frames, leaf) = self.probe(hash);
            self.do_split(leaf, &frames, &mut change);
            let (_, leaf) = self.probe(hash);
            self.put(leaf, name, ino);
            change.dirty(leaf);
            return Ok(change);
        }
        let b = self.append(Block::leaf(0), &mut change);
        self.put(b, name, ino);
        change.dirty(b);
        Ok(change)
    }

    /// `make_indexed_dir`: block 0's entries move to a new block 1, block 0 becomes the root
    /// indexing it; the full block is then split by `dx_add`.
    fn make_indexed_dir(&mut self, change: &mut DirChange) {
        let entries = std::mem::take(&mut self.blocks[0].entries);
        let used = self.blocks[0].used - DOT_DOTDOT_BYTES;
        self.blocks[0].role = Role::DxRoot;
        self.blocks[0].used = DIR_BLOCK_BYTES;
        let moved = Block {
            role: Role::Leaf,
            used,
            entries,
        };
        let b = self.append(moved, change);
        for name in self.blocks[b as usize].entries.keys() {
            self.names.insert(name.clone(), b);
        }
        self.root = vec![(0, b)];
        self.levels = Some(0);
        change.dirty(0);
        change.dirty(b);
    }

    /// `ext4_dx_add_entry`.
    fn dx_add(&mut self, name: &str, ino: Ino, change: &mut DirChange) -> Result<(), Errno> {
        let hash = name_hash(name);
        let (mut frames, leaf) = self.probe(hash);
        if self.blocks[leaf as usize].used + rec_len(name) <= DIR_BLOCK_BYTES {
            self.put(leaf, name, ino);
            change.dirty(leaf);
            return Ok(());
        }
        // Need to split the index first?
        let (index_block, _) = *frames.last().expect("frames");
        let index_full = if index_block == 0 {
            self.root.len() >= DX_ROOT_LIMIT
        } else {
            self.nodes[&index_block].len() >= DX_NODE_LIMIT
        };
        if index_full {
            if self.levels == Some(1) {
                if self.root.len() >= DX_ROOT_LIMIT {
                    return Err(Errno::ENOSPC); // "Directory index full!"
                }
                // Split the index node in two, the root indexing both.
                let node = self.nodes.get_mut(&index_block).expect("node");
                let upper = node.split_off(node.len() / 2);
                let hash2 = upper[0].0;
                let new_node = self.append(
                    Block {
                        role: Role::DxNode,
                        used: DIR_BLOCK_BYTES,
                        entries: BTreeMap::new(),
                    },
                    change,
                );
                self.nodes.insert(new_node, upper);
                let at = self.root.partition_point(|e| e.0 <= hash2);
                self.root.insert(at, (hash2, new_node));
                change.dirty(index_block);
                change.dirty(new_node);
                change.dirty(0);
            } else {
                // The root moves into a new node; the root indexes it alone.
                let new_node = self.append(
                    Block {
                        role: Role::DxNode,
                        used: DIR_BLOCK_BYTES,
                        entries: BTreeMap::new(),
                    },
                    change,
                );
                let entries = std::mem::replace(&mut self.root, vec![(0, new_node)]);
                self.nodes.insert(new_node, entries);
                self.levels = Some(1);
                change.dirty(0);
                change.dirty(new_node);
            }
            let (f, _) = self.probe(hash);
            frames = f;
        }
        self.do_split(leaf, &frames, change);
        let (_, leaf) = self.probe(hash);
        self.put(leaf, name, ino);
        change.dirty(leaf);
        Ok(())
    }

    /// `do_split`: a new block takes the upper half (by size) of the leaf's entries in hash
    /// order; the index gets its first hash.
    fn do_split(&mut self, leaf: u32, frames: &[(u32, usize)], change: &mut DirChange) {
        let mut map: Vec<(u32, Box<str>)> = self.blocks[leaf as usize]
            .entries
            .keys()
            .map(|n| (name_hash(n), n.clone()))
            .collect();
        map.sort();
        let mut size = 0;
        let mut moving = 0;
        for (_, n) in map.iter().rev() {
            if size + rec_len(n) / 2 > DIR_BLOCK_BYTES / 2 {
                break;
            }
            size += rec_len(n);
            moving += 1;
        }
        let split = map.len() - moving;
        assert!(split > 0 && moving > 0, "splitting a block of one entry");
        let hash2 = map[split].0;
        let continued = (hash2 == map[split - 1].0) as u32;
        let new_leaf = self.append(Block::leaf(0), change);
        for (_, n) in &map[split..] {
            let ino = self.blocks[leaf as usize].entries.remove(n).expect("entry");
            self.blocks[leaf as usize].used -= rec_len(n);
            self.put(new_leaf, n, ino);
        }
        // dx_insert_block into the bottom index of the path.
        let (index_block, _) = *frames.last().expect("frames");
        let entries = if index_block == 0 {
            &mut self.root
        } else {
            self.nodes.get_mut(&index_block).expect("node")
        };
        let at = entries.partition_point(|e| e.0 <= hash2 + continued);
        entries.insert(at, (hash2 + continued, new_leaf));
        change.dirty(new_leaf);
        change.dirty(leaf);
        change.dirty(index_block);
    }

    /// `ext4_delete_entry`: removes `name`, returning its inode and the block written.
    pub fn remove(&mut self, name: &str) -> Result<(Ino, DirChange), Errno> {
        let block = self.names.remove(name).ok_or(Errno::ENOENT)?;
        let b = &mut self.blocks[block as usize];
        let ino = b.entries.remove(name).expect("entry in its block");
        b.used -= rec_len(name);
        let mut change = DirChange::default();
        change.dirty(block);
        Ok((ino, change))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_block_then_an_htree_that_splits_by_hash() {
        let mut d = Dir::new();
        // 20-byte entries ("file-00000": 10 + 8 = 18 -> 20): (4096 - 24) / 20 = 203 fit.
        let mut i = 0u64;
        loop {
            let name = format!("file-{i:05}");
            if d.blocks_needed(&name) > 0 {
                break;
            }
            let c = d.add(&name, 100 + i, true).unwrap();
            assert_eq!(c.dirtied, vec![0]);
            i += 1;
        }
        assert_eq!(i, 203);
        // The next one converts to an htree: root in block 0, two leaves.
        let name = format!("file-{i:05}");
        let c = d.add(&name, 100 + i, true).unwrap();
        assert!(d.is_indexed());
        assert_eq!(c.appended, vec![1, 2]);
        assert!(c.dirtied.contains(&0) && c.dirtied.contains(&1) && c.dirtied.contains(&2));
        for j in 0..=i {
            let (ino, read) = d.lookup(&format!("file-{j:05}"));
            assert_eq!(ino, Some(100 + j));
            assert_eq!(read.len(), 2, "root and leaf");
        }
        // Keep adding: leaves split, one appended block at a time.
        for j in i + 1..5000 {
            let c = d.add(&format!("file-{j:05}"), 100 + j, true).unwrap();
            assert!(c.appended.len() <= 2);
            assert!(!c.dirtied.is_empty());
        }
        assert_eq!(d.len(), 5000);
        assert!(d.blocks() > 25 && d.blocks() < 60, "{} blocks", d.blocks());
        let (ino, _) = d.lookup("file-04321");
        assert_eq!(ino, Some(4421));
        let (ino, change) = d.remove("file-04321").unwrap();
        assert_eq!(ino, 4421);
        assert_eq!(change.dirtied.len(), 1);
        assert_eq!(d.lookup("file-04321").0, None);
        assert_eq!(d.remove("file-04321"), Err(Errno::ENOENT));
    }

    #[test]
    fn without_dir_index_blocks_are_appended_linearly() {
        let mut d = Dir::new();
        for j in 0..1000u64 {
            d.add(&format!("file-{j:05}"), j + 12, false).unwrap();
        }
        assert!(!d.is_indexed());
        assert_eq!(d.blocks(), 5);
        let (ino, read) = d.lookup("file-00999");
        assert_eq!(ino, Some(1011));
        assert_eq!(read, vec![0, 1, 2, 3, 4]);
        assert_eq!(d.add("file-00001", 5, false), Err(Errno::EEXIST));
    }

    #[test]
    fn a_second_index_level_after_508_leaves() {
        let mut d = Dir::new();
        let mut j = 0u64;
        while d.levels != Some(1) {
            d.add(&format!("a-rather-long-file-name-{j:08}"), j + 12, true)
                .unwrap();
            j += 1;
        }
        assert!(d.root.len() == 1 && d.nodes.len() == 1);
        for k in (0..j).step_by(101) {
            assert_eq!(
                d.lookup(&format!("a-rather-long-file-name-{k:08}")).0,
                Some(k + 12)
            );
        }
        let (_, read) = d.lookup("a-rather-long-file-name-00000000");
        assert_eq!(read.len(), 3, "root, node, leaf");
    }
}
