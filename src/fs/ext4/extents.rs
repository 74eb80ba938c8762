//! A file's extent tree, modelled on Linux 3.10's fs/ext4/extents.c: four extents in the inode
//! (`i_block`), then leaf blocks of 340 extents under an index in the inode, then index blocks
//! (depth 2 and more); extents of at most 32768 blocks, merged with their neighbours when both
//! logically and physically contiguous.
//!
//! The tree only maps; it never allocates on its own. A new leaf or index block is asked of the
//! caller through an allocation callback (`ext4_ext_new_meta_block` -> `ext4_new_meta_blocks`),
//! given the goal Linux computes, so the caller can take it from mballoc and account its
//! bitmap and descriptor; blocks the tree gives up are returned for the caller to free (and
//! revoke). Every change reports which tree nodes it dirtied: the inode (root) or leaf / index
//! blocks by number.
//!
//! Unwritten extents (`EXT4_EXT_MARK_UNWRIT`, `ext4_ext_is_unwritten`) are what writeback
//! allocates under `dioread_nolock` ([`super::page_io`]): an extent records its state, merges only
//! with extents of the same state (`ext4_can_extents_be_merged`; `EXT_UNWRITTEN_MAX_LEN` for
//! unwritten ones), and [`ExtentTree::convert_to_written`] converts a range after its data
//! reached the disk (`ext4_convert_unwritten_extents_endio`: `ext4_split_convert_extents`,
//! `ext4_ext_mark_initialized`, `ext4_ext_try_to_merge`).
//!
//! Simplifications:
//! - No `fallocate`; the conversion splits without `ext4_ext_convert_to_initialized`'s
//!   shortcuts (moving blocks into the initialized left neighbour in place, zeroing out short
//!   extents, `EXT4_EXT_ZERO_LEN`): pieces are set in place or inserted as
//!   `ext4_ext_insert_extent` does, then merged.
//! - Removal is `ext4_ext_remove_space(inode, from, EXT_MAX_BLOCKS - 1)` only (truncate), not
//!   punching holes; the path walk is recursive, visiting the same nodes right to left.
//! - No `ext4_ext_precache`, no checksums; the extent status tree is one cached extent or hole
//!   (the last lookup's), enough for the page-by-page walks of writers and writeback.

use crate::errno::Errno;
use std::collections::BTreeMap;

/// `EXT_INIT_MAX_LEN`: the longest initialized extent, 2^15 blocks (128 MiB).
pub const EXT_INIT_MAX_LEN: u64 = 1 << 15;
/// `EXT_UNWRITTEN_MAX_LEN`: the longest unwritten extent, 2^15 - 1 blocks (the length's top bit
/// marks the state).
pub const EXT_UNWRITTEN_MAX_LEN: u64 = EXT_INIT_MAX_LEN - 1;
/// Entries in the inode's `i_block` (60 bytes): (60 - 12-byte header) / 12 = 4
/// (`ext4_ext_space_root`).
pub const ROOT_ENTRIES: usize = 4;
/// Entries in a 4 KiB tree block: (4096 - 12) / 12 = 340 (`ext4_ext_space_block`,
/// `ext4_ext_space_block_idx`).
pub const BLOCK_ENTRIES: usize = 340;

/// A mapping of `len` logical blocks from `lblk` to physical blocks from `pblk`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Extent {
    pub lblk: u64,
    pub len: u64,
    pub pblk: u64,
    /// Unwritten (`ext4_ext_is_unwritten`): allocated, its data not yet known to be on disk;
    /// reads return zeros.
    pub unwritten: bool,
}

impl Extent {
    /// A written (initialized) extent.
    pub fn written(lblk: u64, len: u64, pblk: u64) -> Extent {
        Extent {
            lblk,
            len,
            pblk,
            unwritten: false,
        }
    }

    fn end(&self) -> u64 {
        self.lblk + self.len
    }

    /// `EXT_INIT_MAX_LEN` or `EXT_UNWRITTEN_MAX_LEN`.
    fn max_len(&self) -> u64 {
        if self.unwritten {
            EXT_UNWRITTEN_MAX_LEN
        } else {
            EXT_INIT_MAX_LEN
        }
    }
}

/// A mapped block: `(lblk, pblk)`.
pub type Mapped = (u64, u64);

/// A tree node dirtied by a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TreeBlock {
    /// The root in the inode's `i_block`: the inode's table block.
    Inode,
    /// A leaf block.
    Leaf(u64),
    /// An index block.
    Index(u64),
}

/// What a change did to the tree's blocks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TreeChange {
    /// Nodes written, in order, each once.
    pub dirtied: Vec<TreeBlock>,
    /// Tree blocks allocated through the callback.
    pub allocated: Vec<u64>,
    /// Tree blocks no longer used: the caller frees them (`EXT4_FREE_BLOCKS_METADATA |
    /// EXT4_FREE_BLOCKS_FORGET`).
    pub freed: Vec<u64>,
}

impl TreeChange {
    fn dirty(&mut self, block: TreeBlock) {
        if !self.dirtied.contains(&block) {
            self.dirtied.push(block);
        }
    }
}

/// The result of truncating (`remove_from`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Removed {
    /// Data blocks unmapped, `(pblk, len)`, from the file's end backwards.
    pub data: Vec<(u64, u64)>,
    pub change: TreeChange,
}

#[derive(Debug, Clone)]
enum Node {
    Leaf(Vec<Extent>),
    /// `(first logical block, child block)`.
    Index(Vec<(u64, u64)>),
}

impl Node {
    fn len(&self) -> usize {
        match self {
            Node::Leaf(v) => v.len(),
            Node::Index(v) => v.len(),
        }
    }

    fn first_key(&self) -> Option<u64> {
        match self {
            Node::Leaf(v) => v.first().map(|e| e.lblk),
            Node::Index(v) => v.first().map(|&(k, _)| k),
        }
    }
}

/// Where in a node the walk went: the node (`None` = the root in the inode) and the entry.
#[derive(Debug, Clone, Copy)]
struct Step {
    node: Option<u64>,
    pos: usize,
}

/// The allocation callback: `(goal, try_goal)` -> a new block. `goal` `None` means "the
/// inode's goal" (`ext4_inode_to_goal_block`), which the caller knows.
pub type AllocMeta<'a> = dyn FnMut(Option<u64>, bool) -> Result<u64, Errno> + 'a;

/// A range of logical blocks the last lookup found: mapped from `pblk`, or a hole (`None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct CachedRange {
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) pblk: Option<u64>,
    /// A mapped range of an unwritten extent.
    pub(super) unwritten: bool,
}

impl CachedRange {
    /// The block of `lblk`, which lies in the range.
    pub(super) fn block_of(&self, lblk: u64) -> Option<u64> {
        debug_assert!(
            self.start <= lblk && lblk < self.end,
            "lblk outside the range"
        );
        self.pblk.map(|pblk| pblk + (lblk - self.start))
    }
}

/// One inode's extent tree.
#[derive(Debug, Clone)]
pub struct ExtentTree {
    depth: u32,
    root: Node,
    blocks: BTreeMap<u64, Node>,
    /// The extent (or hole) the last [`Self::map`] landed in, dropped by every change: what
    /// ext4's extent status tree (`ext4_es_lookup_extent`, 3.10; `i_cached_extent` before it)
    /// spares a page-by-page writer, a walk of the tree per page.
    cached: std::cell::Cell<Option<CachedRange>>,
}

impl Default for ExtentTree {
    fn default() -> Self {
        ExtentTree::new()
    }
}

/// `ext4_can_extents_be_merged`: `a` then `b`, of the same state, contiguous on both sides,
/// not too long.
fn can_merge(a: &Extent, b: &Extent) -> bool {
    a.unwritten == b.unwritten
        && a.end() == b.lblk
        && a.pblk + a.len == b.pblk
        && a.len + b.len <= a.max_len()
}

/// `ext4_ext_binsearch` / `ext4_ext_binsearch_idx`: the last entry starting at or before
/// `lblk`, or the first.
fn search<T>(entries: &[T], lblk: u64, key: impl Fn(&T) -> u64) -> usize {
    entries
        .partition_point(|e| key(e) <= lblk)
        .saturating_sub(1)
}

impl ExtentTree {
    /// `ext4_ext_tree_init`: an empty tree in the inode.
    pub fn new() -> ExtentTree {
        ExtentTree {
            depth: 0,
            root: Node::Leaf(Vec::new()),
            blocks: BTreeMap::new(),
            cached: std::cell::Cell::new(None),
        }
    }

    /// `ext_depth`.
    pub fn depth(&self) -> u32 {
        self.depth
    }

    fn node(&self, id: Option<u64>) -> &Node {
        match id {
            None => &self.root,
            Some(b) => &self.blocks[&b],
        }
    }

    fn node_mut(&mut self, id: Option<u64>) -> &mut Node {
        match id {
            None => &mut self.root,
            Some(b) => self.blocks.get_mut(&b).expect("tree block"),
        }
    }

    fn capacity(id: Option<u64>) -> usize {
        if id.is_none() {
            ROOT_ENTRIES
        } else {
            BLOCK_ENTRIES
        }
    }

    fn tree_block(&self, id: Option<u64>) -> TreeBlock {
        match id {
            None => TreeBlock::Inode,
            Some(b) => match self.blocks[&b] {
                Node::Leaf(_) => TreeBlock::Leaf(b),
                Node::Index(_) => TreeBlock::Index(b),
            },
        }
    }

    /// `ext4_ext_find_extent`: the walk from the root to the leaf for `lblk`.
    fn find_path(&self, lblk: u64) -> Vec<Step> {
        let mut path = Vec::with_capacity(self.depth as usize + 1);
        let mut id = None;
        loop {
            match self.node(id) {
                Node::Index(entries) => {
                    let pos = search(entries, lblk, |e| e.0);
                    path.push(Step { node: id, pos });
                    id = Some(entries[pos].1);
                }
                Node::Leaf(entries) => {
                    let pos = search(entries, lblk, |e| e.lblk);
                    path.push(Step { node: id, pos });
                    return path;
                }
            }
        }
    }

    fn leaf(&self, path: &[Step]) -> &Vec<Extent> {
        match self.node(path.last().expect("path").node) {
            Node::Leaf(v) => v,
            Node::Index(_) => unreachable!("path ends in a leaf"),
        }
    }

    /// The extent mapping `lblk`, cut to start there: `(pblk, blocks mapped from lblk on)`.
    /// Served from the last lookup's extent or hole when `lblk` is in it; otherwise the walk
    /// of [`Self::find_path`] without keeping the path, which caches the extent or the hole
    /// it lands in.
    pub fn map(&self, lblk: u64) -> Option<(u64, u64)> {
        let range = self.map_range(lblk);
        range
            .pblk
            .map(|pblk| (pblk + (lblk - range.start), range.end - lblk))
    }

    /// The extent or hole holding `lblk` as [`Self::map`] finds it (and caches it).
    pub(super) fn map_range(&self, lblk: u64) -> CachedRange {
        match self.cached.get() {
            Some(range) if range.start <= lblk && lblk < range.end => range,
            _ => {
                let range = self.lookup(lblk);
                self.cached.set(Some(range));
                range
            }
        }
    }

    /// The extent holding `lblk`, or the hole around it (bounded by the neighbouring extents,
    /// or by the next index key where the next extent is in another leaf).
    fn lookup(&self, lblk: u64) -> CachedRange {
        let mut node = &self.root;
        // The first logical block not under the subtree the walk is in.
        let mut upper = u64::MAX;
        loop {
            match node {
                Node::Index(entries) => {
                    let pos = search(entries, lblk, |e| e.0);
                    if let Some(&(next, _)) = entries.get(pos + 1) {
                        upper = next;
                    }
                    node = self.node(Some(entries[pos].1));
                }
                Node::Leaf(entries) => {
                    let pos = search(entries, lblk, |e| e.lblk);
                    let Some(ex) = entries.get(pos) else {
                        return CachedRange {
                            start: lblk,
                            end: upper,
                            pblk: None,
                            unwritten: false,
                        };
                    };
                    if lblk < ex.lblk {
                        return CachedRange {
                            start: lblk,
                            end: ex.lblk,
                            pblk: None,
                            unwritten: false,
                        };
                    }
                    if lblk < ex.end() {
                        return CachedRange {
                            start: ex.lblk,
                            end: ex.end(),
                            pblk: Some(ex.pblk),
                            unwritten: ex.unwritten,
                        };
                    }
                    let end = entries.get(pos + 1).map_or(upper, |next| next.lblk);
                    return CachedRange {
                        start: ex.end(),
                        end,
                        pblk: None,
                        unwritten: false,
                    };
                }
            }
        }
    }

    /// `ext4_ext_search_left` / `ext4_ext_search_right`: the closest mapped blocks left and
    /// right of unmapped `lblk`, as `(lblk, pblk)`.
    pub fn neighbours(&self, lblk: u64) -> (Option<Mapped>, Option<Mapped>) {
        let path = self.find_path(lblk);
        let leaf = self.leaf(&path);
        let pos = path.last().expect("path").pos;
        let Some(ex) = leaf.get(pos) else {
            return (None, None);
        };
        if lblk < ex.lblk {
            // Only in the first leaf can `lblk` lie left of the extent found.
            return (None, Some((ex.lblk, ex.pblk)));
        }
        assert!(lblk >= ex.end(), "neighbours of mapped block {lblk}");
        let left = Some((ex.end() - 1, ex.pblk + ex.len - 1));
        let right = match leaf.get(pos + 1) {
            Some(next) => Some((next.lblk, next.pblk)),
            None => self.next_leaf_key(&path).map(|key| {
                let next_path = self.find_path(key);
                let first = self.leaf(&next_path)[0];
                (first.lblk, first.pblk)
            }),
        };
        (left, right)
    }

    /// `ext4_ext_find_goal`: a physical block near where `lblk` would go: extrapolated from
    /// the extent the lookup lands on, else the leaf block itself; `None` for an empty tree
    /// in the inode (then the inode's goal, `ext4_inode_to_goal_block`).
    pub fn find_goal(&self, lblk: u64) -> Option<u64> {
        let path = self.find_path(lblk);
        if let Some(ex) = self.leaf(&path).get(path.last().expect("path").pos) {
            return Some(if lblk > ex.lblk {
                ex.pblk + (lblk - ex.lblk)
            } else {
                ex.pblk.saturating_sub(ex.lblk - lblk)
            });
        }
        path.last().expect("path").node
    }

    /// Every extent in logical order.
    pub fn extents(&self) -> Vec<Extent> {
        let mut out = Vec::new();
        self.collect(None, &mut out);
        out
    }

    fn collect(&self, id: Option<u64>, out: &mut Vec<Extent>) {
        match self.node(id) {
            Node::Leaf(v) => out.extend_from_slice(v),
            Node::Index(v) => {
                for &(_, child) in v {
                    self.collect(Some(child), out);
                }
            }
        }
    }

    /// The tree's blocks (leaves and index blocks).
    pub fn tree_blocks(&self) -> Vec<u64> {
        self.blocks.keys().copied().collect()
    }

    /// Number of leaf blocks.
    pub fn leaf_blocks(&self) -> usize {
        self.blocks
            .values()
            .filter(|n| matches!(n, Node::Leaf(_)))
            .count()
    }

    /// Blocks mapped.
    pub fn mapped_blocks(&self) -> u64 {
        self.extents().iter().map(|e| e.len).sum()
    }

    /// `ext4_ext_insert_extent`: maps `len` blocks at `lblk` to `pblk` (none of them mapped
    /// before), merging with a neighbouring extent when possible, else inserting, splitting a
    /// full leaf (`ext4_ext_create_new_leaf`: `ext4_ext_split` below a node with room, or
    /// `ext4_ext_grow_indepth` when every level is full); then `ext4_ext_try_to_merge`
    /// (including `ext4_ext_try_to_merge_up`, which folds a single small leaf back into the
    /// inode) and `ext4_ext_correct_indexes`.
    pub fn insert(
        &mut self,
        lblk: u64,
        pblk: u64,
        len: u64,
        alloc: &mut AllocMeta<'_>,
    ) -> Result<TreeChange, Errno> {
        self.insert_extent(Extent::written(lblk, len, pblk), alloc)
    }

    /// [`Self::insert`] of `new` in its state (written or unwritten:
    /// `EXT4_GET_BLOCKS_UNWRIT_EXT` marks the extent before `ext4_ext_insert_extent`).
    pub fn insert_extent(
        &mut self,
        new: Extent,
        alloc: &mut AllocMeta<'_>,
    ) -> Result<TreeChange, Errno> {
        assert!(new.len > 0, "empty extent");
        self.cached.set(None);
        let mut change = TreeChange::default();
        let mut remaining = new;
        // An extent longer than its state's most is inserted in pieces.
        while remaining.len > 0 {
            let piece = Extent {
                len: remaining.len.min(remaining.max_len()),
                ..remaining
            };
            self.insert_one(piece, alloc, &mut change)?;
            remaining.lblk += piece.len;
            remaining.pblk += piece.len;
            remaining.len -= piece.len;
        }
        Ok(change)
    }

    fn insert_one(
        &mut self,
        new: Extent,
        alloc: &mut AllocMeta<'_>,
        change: &mut TreeChange,
    ) -> Result<(), Errno> {
        assert!(
            self.map(new.lblk).is_none() && self.map(new.end() - 1).is_none(),
            "extent {new:?} overlaps a mapped block"
        );
        // Those lookups cached the hole this extent fills.
        self.cached.set(None);
        let mut path = self.find_path(new.lblk);
        let leaf_id = path.last().expect("path").node;
        // Try to merge into the extent found, or its neighbour on the side of `new`.
        if let Node::Leaf(entries) = self.node_mut(leaf_id) {
            if !entries.is_empty() {
                let mut pos = path.last().expect("path").pos;
                let mut try_append = true;
                if pos + 1 < entries.len() && entries[pos].end() < new.lblk {
                    pos += 1;
                    try_append = false;
                } else if pos > 0 && new.end() < entries[pos].lblk {
                    pos -= 1;
                }
                let merged = if try_append && can_merge(&entries[pos], &new) {
                    entries[pos].len += new.len;
                    true
                } else if can_merge(&new, &entries[pos]) {
                    entries[pos].lblk = new.lblk;
                    entries[pos].pblk = new.pblk;
                    entries[pos].len += new.len;
                    true
                } else {
                    false
                };
                if merged {
                    path.last_mut().expect("path").pos = pos;
                    self.after_insert(&mut path, change);
                    return Ok(());
                }
            }
        }
        if self.node(leaf_id).len() >= Self::capacity(leaf_id) {
            // Probably the next leaf has room, when `new` goes after this leaf's last extent.
            let last_lblk = self.leaf(&path).last().map_or(0, |e| e.lblk);
            let next = (new.lblk > last_lblk)
                .then(|| self.next_leaf_key(&path))
                .flatten();
            let next_has_room = next.is_some_and(|key| {
                let next_path = self.find_path(key);
                let id = next_path.last().expect("path").node;
                self.node(id).len() < Self::capacity(id)
            });
            if next_has_room {
                path = self.find_path(next.expect("checked"));
            } else {
                self.create_new_leaf(&path, new, alloc, change)?;
                path = self.find_path(new.lblk);
            }
        }
        // has_space: insert in order.
        let step = path.last_mut().expect("path");
        let Node::Leaf(entries) = self.node_mut(step.node) else {
            unreachable!()
        };
        let at = entries.partition_point(|e| e.lblk < new.lblk);
        entries.insert(at, new);
        step.pos = at;
        self.after_insert(&mut path, change);
        Ok(())
    }

    /// The unwritten runs within `[lblk, lblk + len)`, as `(lblk, len)` in logical order.
    pub fn unwritten_runs(&self, lblk: u64, len: u64) -> Vec<(u64, u64)> {
        let end = lblk + len;
        let mut runs = Vec::new();
        let mut at = lblk;
        while at < end {
            let range = self.map_range(at);
            let stop = range.end.min(end);
            if range.pblk.is_some() && range.unwritten {
                runs.push((at, stop - at));
            }
            at = stop;
        }
        runs
    }

    /// `ext4_convert_unwritten_extents_endio` over `[lblk, lblk + len)` (what
    /// `ext4_map_blocks(EXT4_GET_BLOCKS_IO_CONVERT_EXT)` does for the range of a completed
    /// write): each unwritten extent in it is split at the range's edges
    /// (`ext4_split_convert_extents`), the part inside marked initialized
    /// (`ext4_ext_mark_initialized`) and merged with its neighbours (`ext4_ext_try_to_merge`).
    /// Written blocks and holes are left alone. A split that needs a new leaf takes it through
    /// `alloc`, as an insert does.
    pub fn convert_to_written(
        &mut self,
        lblk: u64,
        len: u64,
        alloc: &mut AllocMeta<'_>,
    ) -> Result<TreeChange, Errno> {
        let mut change = TreeChange::default();
        for (start, run) in self.unwritten_runs(lblk, len) {
            // A run is one extent's part (map_range stops at each extent's end).
            let mut at = start;
            while at < start + run {
                let range = self.map_range(at);
                let stop = range.end.min(start + run);
                self.convert_one(at, stop, alloc, &mut change)?;
                at = stop;
            }
        }
        self.cached.set(None);
        Ok(change)
    }

    /// Converts `[start, stop)`, inside one unwritten extent: the extent's entry keeps its left
    /// unwritten part if it has one (else becomes the written part, merged in place), and the
    /// other parts are inserted.
    fn convert_one(
        &mut self,
        start: u64,
        stop: u64,
        alloc: &mut AllocMeta<'_>,
        change: &mut TreeChange,
    ) -> Result<(), Errno> {
        self.cached.set(None);
        let mut path = self.find_path(start);
        let step = *path.last().expect("path");
        let Node::Leaf(entries) = self.node_mut(step.node) else {
            unreachable!("path ends in a leaf")
        };
        let ex = entries[step.pos];
        debug_assert!(ex.unwritten && ex.lblk <= start && stop <= ex.end());
        let written = Extent {
            lblk: start,
            len: stop - start,
            pblk: ex.pblk + (start - ex.lblk),
            unwritten: false,
        };
        let right = Extent {
            lblk: stop,
            len: ex.end() - stop,
            pblk: ex.pblk + (stop - ex.lblk),
            unwritten: true,
        };
        if start > ex.lblk {
            entries[step.pos].len = start - ex.lblk;
            change.dirty(self.tree_block(step.node));
            self.insert_one(written, alloc, change)?;
        } else {
            entries[step.pos] = written;
            self.after_insert(&mut path, change);
        }
        if right.len > 0 {
            self.cached.set(None);
            self.insert_one(right, alloc, change)?;
        }
        Ok(())
    }

    /// `ext4_ext_next_leaf_block`: the first key of the leaf after the path's.
    fn next_leaf_key(&self, path: &[Step]) -> Option<u64> {
        for step in path[..path.len() - 1].iter().rev() {
            if let Node::Index(entries) = self.node(step.node) {
                if step.pos + 1 < entries.len() {
                    return Some(entries[step.pos + 1].0);
                }
            }
        }
        None
    }

    /// The `merge:` tail of `ext4_ext_insert_extent`.
    fn after_insert(&mut self, path: &mut [Step], change: &mut TreeChange) {
        let step = *path.last().expect("path");
        let Node::Leaf(entries) = self.node_mut(step.node) else {
            unreachable!()
        };
        // ext4_ext_try_to_merge: with the previous extent, else with the following ones.
        let mut pos = step.pos;
        if pos > 0 && can_merge(&entries[pos - 1], &entries[pos]) {
            pos -= 1;
        }
        while pos + 1 < entries.len() && can_merge(&entries[pos], &entries[pos + 1]) {
            entries[pos].len += entries[pos + 1].len;
            entries.remove(pos + 1);
        }
        path.last_mut().expect("path").pos = pos;
        if self.try_to_merge_up(change) {
            change.dirty(TreeBlock::Inode);
            return;
        }
        self.correct_indexes(path, change);
        change.dirty(self.tree_block(step.node));
    }

    /// `ext4_ext_try_to_merge_up`: depth 1, one index in the inode, a leaf that fits in the
    /// inode: copy it up and give its block back.
    fn try_to_merge_up(&mut self, change: &mut TreeChange) -> bool {
        let Node::Index(root) = &self.root else {
            return false;
        };
        if self.depth != 1 || root.len() != 1 {
            return false;
        }
        let leaf_block = root[0].1;
        if self.blocks[&leaf_block].len() > ROOT_ENTRIES {
            return false;
        }
        let leaf = self.blocks.remove(&leaf_block).expect("leaf");
        self.root = leaf;
        self.depth = 0;
        change.dirtied.retain(|&b| b != TreeBlock::Leaf(leaf_block));
        change.freed.push(leaf_block);
        true
    }

    /// `ext4_ext_correct_indexes`: when a leaf's first extent changed, its key in the index
    /// above (and above that, while first) follows.
    fn correct_indexes(&mut self, path: &[Step], change: &mut TreeChange) {
        let depth = path.len() - 1;
        let leaf = path[depth];
        if depth == 0 || leaf.pos != 0 {
            return;
        }
        let border = self.node(leaf.node).first_key().expect("non-empty leaf");
        for k in (0..depth).rev() {
            let step = path[k];
            let Node::Index(entries) = self.node_mut(step.node) else {
                unreachable!()
            };
            if entries[step.pos].0 != border {
                entries[step.pos].0 = border;
                let block = self.tree_block(step.node);
                change.dirty(block);
            }
            if step.pos != 0 {
                break;
            }
        }
    }

    /// `ext4_ext_create_new_leaf`.
    fn create_new_leaf(
        &mut self,
        path: &[Step],
        new: Extent,
        alloc: &mut AllocMeta<'_>,
        change: &mut TreeChange,
    ) -> Result<(), Errno> {
        let mut path = path.to_vec();
        loop {
            // Walk up to the first level with a free index slot.
            let depth = path.len() - 1;
            let mut at = depth;
            while at > 0 && self.node(path[at].node).len() >= Self::capacity(path[at].node) {
                at -= 1;
            }
            let has_room = self.node(path[at].node).len() < Self::capacity(path[at].node);
            if has_room && at < depth {
                return self.split(&path, new, at, alloc, change);
            }
            self.grow_indepth(alloc, change)?;
            path = self.find_path(new.lblk);
            let leaf = path.last().expect("path").node;
            if self.node(leaf).len() < Self::capacity(leaf) {
                return Ok(());
            }
        }
    }

    /// `ext4_ext_split`: below level `at` (which has room), a new leaf and new index blocks
    /// take the entries right of the path; `at` gets an index for them.
    fn split(
        &mut self,
        path: &[Step],
        new: Extent,
        at: usize,
        alloc: &mut AllocMeta<'_>,
        change: &mut TreeChange,
    ) -> Result<(), Errno> {
        let depth = path.len() - 1;
        let leaf = path[depth];
        let leaf_entries = self.leaf(path).clone();
        let border = if leaf.pos + 1 < leaf_entries.len() {
            leaf_entries[leaf.pos + 1].lblk
        } else {
            new.lblk
        };
        let goal = self.find_goal(new.lblk);
        let mut fresh = Vec::new();
        for _ in at..depth {
            let block = alloc(goal, false)?;
            assert!(
                !self.blocks.contains_key(&block),
                "tree block {block} reused"
            );
            change.allocated.push(block);
            fresh.push(block);
        }
        // The new leaf: the old leaf's extents right of the path.
        let new_leaf = fresh[depth - at - 1];
        let moved: Vec<Extent> = if leaf.pos + 1 < leaf_entries.len() {
            let Node::Leaf(entries) = self.node_mut(leaf.node) else {
                unreachable!()
            };
            entries.split_off(leaf.pos + 1)
        } else {
            Vec::new()
        };
        if !moved.is_empty() {
            let block = self.tree_block(leaf.node);
            change.dirty(block);
        }
        self.blocks.insert(new_leaf, Node::Leaf(moved));
        change.dirty(TreeBlock::Leaf(new_leaf));
        // Intermediate index blocks, bottom up.
        let mut below = new_leaf;
        for (k, &block) in (at + 1..depth)
            .rev()
            .zip(fresh[..depth - at - 1].iter().rev())
        {
            let step = path[k];
            let Node::Index(entries) = self.node_mut(step.node) else {
                unreachable!()
            };
            let mut moved = entries.split_off(step.pos + 1);
            if !moved.is_empty() {
                let old = self.tree_block(step.node);
                change.dirty(old);
            }
            moved.insert(0, (border, below));
            self.blocks.insert(block, Node::Index(moved));
            change.dirty(TreeBlock::Index(block));
            below = block;
        }
        // ext4_ext_insert_index at level `at`.
        let step = path[at];
        let Node::Index(entries) = self.node_mut(step.node) else {
            unreachable!("a level with room above a full leaf is an index")
        };
        let pos = if border > entries[step.pos].0 {
            step.pos + 1
        } else {
            step.pos
        };
        entries.insert(pos, (border, below));
        let block = self.tree_block(step.node);
        change.dirty(block);
        Ok(())
    }

    /// `ext4_ext_grow_indepth`: the root's entries move to a new block; the root becomes an
    /// index with one entry for it. The goal is just before the first child (with
    /// `EXT4_MB_HINT_TRY_GOAL`), or the inode's goal at depth 0.
    fn grow_indepth(
        &mut self,
        alloc: &mut AllocMeta<'_>,
        change: &mut TreeChange,
    ) -> Result<(), Errno> {
        let (goal, try_goal) = match &self.root {
            Node::Index(entries) if entries[0].1 > 0 => (Some(entries[0].1 - 1), true),
            _ => (None, false),
        };
        let block = alloc(goal, try_goal)?;
        assert!(
            !self.blocks.contains_key(&block),
            "tree block {block} reused"
        );
        change.allocated.push(block);
        let old = std::mem::replace(&mut self.root, Node::Index(Vec::new()));
        let key = old.first_key().unwrap_or(0);
        let kind = match old {
            Node::Leaf(_) => TreeBlock::Leaf(block),
            Node::Index(_) => TreeBlock::Index(block),
        };
        self.blocks.insert(block, old);
        self.root = Node::Index(vec![(key, block)]);
        self.depth += 1;
        change.dirty(kind);
        change.dirty(TreeBlock::Inode);
        Ok(())
    }

    /// `ext4_ext_remove_space(inode, from, EXT_MAX_BLOCKS - 1)` (truncate): unmaps every block
    /// from `from` on, shortening an extent that straddles it; leaves and index blocks left
    /// empty are freed and dropped from their parent (`ext4_ext_rm_idx`); an empty tree goes
    /// back to depth 0 in the inode.
    pub fn remove_from(&mut self, from: u64) -> Removed {
        self.cached.set(None);
        let mut removed = Removed::default();
        self.remove_in(None, from, &mut removed);
        if self.root.len() == 0 && self.depth > 0 {
            self.depth = 0;
            self.root = Node::Leaf(Vec::new());
            removed.change.dirty(TreeBlock::Inode);
        }
        self.cached.set(None);
        removed
    }

    /// Removes from node `id`; returns whether it is now empty.
    fn remove_in(&mut self, id: Option<u64>, from: u64, removed: &mut Removed) -> bool {
        match self.node(id).clone() {
            Node::Leaf(entries) => {
                let mut changed = false;
                let mut keep = Vec::with_capacity(entries.len());
                let mut freed = Vec::new();
                for ex in entries {
                    if ex.end() <= from {
                        keep.push(ex);
                    } else if ex.lblk < from {
                        let head = from - ex.lblk;
                        freed.push((ex.pblk + head, ex.len - head));
                        keep.push(Extent { len: head, ..ex });
                        changed = true;
                    } else {
                        freed.push((ex.pblk, ex.len));
                        changed = true;
                    }
                }
                removed.data.extend(freed.into_iter().rev());
                let empty = keep.is_empty();
                *self.node_mut(id) = Node::Leaf(keep);
                if changed && !(empty && id.is_some()) {
                    let block = self.tree_block(id);
                    removed.change.dirty(block);
                }
                empty
            }
            Node::Index(entries) => {
                let first = search(&entries, from, |e| e.0);
                let mut keep = entries.clone();
                let mut changed = false;
                for i in (first..entries.len()).rev() {
                    let (_, child) = entries[i];
                    if self.remove_in(Some(child), from, removed) {
                        self.blocks.remove(&child);
                        removed.change.freed.push(child);
                        keep.remove(i);
                        changed = true;
                    }
                }
                let empty = keep.is_empty();
                *self.node_mut(id) = Node::Index(keep);
                if changed && !(empty && id.is_some()) {
                    let block = self.tree_block(id);
                    removed.change.dirty(block);
                }
                empty
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bump allocator for tree blocks, far from the data.
    fn bump(next: &mut u64) -> impl FnMut(Option<u64>, bool) -> Result<u64, Errno> + '_ {
        move |_, _| {
            *next += 1;
            Ok(*next)
        }
    }

    #[test]
    fn contiguous_inserts_merge_into_one_extent_up_to_32768_blocks() {
        let mut t = ExtentTree::new();
        let mut next = 1_000_000;
        for i in 0..40_000u64 {
            let c = t.insert(i, 5000 + i, 1, &mut bump(&mut next)).unwrap();
            assert_eq!(c.dirtied, vec![TreeBlock::Inode]);
        }
        assert_eq!(
            t.extents(),
            vec![
                Extent::written(0, 32768, 5000),
                Extent::written(32768, 40_000 - 32768, 5000 + 32768)
            ]
        );
        assert_eq!(t.map(40_000 - 1), Some((5000 + 39_999, 1)));
        assert_eq!(t.map(40_000), None);
        assert_eq!(t.depth(), 0);
    }

    #[test]
    fn a_fifth_extent_moves_the_tree_into_a_leaf_and_the_leaf_splits_at_341() {
        let mut t = ExtentTree::new();
        let mut next = 1_000_000;
        // Discontiguous extents: every other block.
        for i in 0..4u64 {
            t.insert(i * 2, 10 * i, 1, &mut bump(&mut next)).unwrap();
        }
        assert_eq!(t.depth(), 0);
        let c = t.insert(8, 40, 1, &mut bump(&mut next)).unwrap();
        assert_eq!(t.depth(), 1);
        assert_eq!(c.allocated, vec![1_000_001]);
        assert_eq!(
            c.dirtied,
            vec![TreeBlock::Leaf(1_000_001), TreeBlock::Inode],
            "the new leaf and the inode's index"
        );
        for i in 5..340u64 {
            let c = t.insert(i * 2, 10 * i, 1, &mut bump(&mut next)).unwrap();
            assert_eq!(c.dirtied, vec![TreeBlock::Leaf(1_000_001)]);
        }
        assert_eq!(t.leaf_blocks(), 1);
        // The 341st appended extent goes to a new leaf of its own (split at the end).
        let c = t.insert(680, 3400, 1, &mut bump(&mut next)).unwrap();
        assert_eq!(c.allocated, vec![1_000_002]);
        assert_eq!(
            c.dirtied,
            vec![TreeBlock::Leaf(1_000_002), TreeBlock::Inode]
        );
        assert_eq!(t.leaf_blocks(), 2);
        assert_eq!(t.map(680), Some((3400, 1)));
        assert_eq!(t.map(2), Some((10, 1)));
        assert_eq!(t.extents().len(), 341);
    }

    #[test]
    fn depth_two_after_four_full_leaves_and_truncate_frees_the_tree() {
        let mut t = ExtentTree::new();
        let mut next = 1_000_000;
        let n = 4 * 340 + 100;
        for i in 0..n {
            t.insert(i * 2, 10 * i, 1, &mut bump(&mut next)).unwrap();
        }
        assert_eq!(t.depth(), 2, "five leaves need an index block");
        assert_eq!(t.extents().len(), n as usize);
        for i in (0..n).step_by(97) {
            assert_eq!(t.map(i * 2), Some((10 * i, 1)));
            assert_eq!(t.map(i * 2 + 1), None);
        }
        let tree_blocks = t.tree_blocks().len();
        // Truncate half: leaves right of the cut are freed.
        let r = t.remove_from(n);
        assert_eq!(r.data.len(), (n / 2) as usize);
        assert_eq!(r.data[0], (10 * (n - 1), 1), "from the end backwards");
        assert!(!r.change.freed.is_empty());
        assert_eq!(t.extents().len(), (n / 2) as usize);
        // Truncate everything: every tree block is freed, the root is an empty leaf again.
        let r2 = t.remove_from(0);
        assert_eq!(r.change.freed.len() + r2.change.freed.len(), tree_blocks);
        assert_eq!(t.depth(), 0);
        assert!(t.extents().is_empty());
        assert!(r2.change.dirtied.contains(&TreeBlock::Inode));
    }

    #[test]
    fn truncate_shortens_the_straddling_extent() {
        let mut t = ExtentTree::new();
        let mut next = 0;
        t.insert(0, 100, 50, &mut bump(&mut next)).unwrap();
        let r = t.remove_from(20);
        assert_eq!(r.data, vec![(120, 30)]);
        assert_eq!(r.change.dirtied, vec![TreeBlock::Inode]);
        assert_eq!(t.map(19), Some((119, 1)));
        assert_eq!(t.map(20), None);
    }

    fn unwritten(lblk: u64, len: u64, pblk: u64) -> Extent {
        Extent {
            unwritten: true,
            ..Extent::written(lblk, len, pblk)
        }
    }

    #[test]
    fn unwritten_extents_merge_apart_from_written_ones_and_convert_by_splitting_then_merging() {
        // ext4_can_extents_be_merged: only extents of one state merge.
        let mut t = ExtentTree::new();
        let mut next = 10_000;
        t.insert(0, 100, 10, &mut bump(&mut next)).unwrap();
        t.insert_extent(unwritten(10, 20, 110), &mut bump(&mut next))
            .unwrap();
        t.insert_extent(unwritten(30, 10, 130), &mut bump(&mut next))
            .unwrap();
        assert_eq!(
            t.extents(),
            vec![Extent::written(0, 10, 100), unwritten(10, 30, 110)]
        );
        assert_eq!(t.unwritten_runs(0, 100), vec![(10, 30)]);
        // ext4_convert_unwritten_extents_endio of the middle: split in three.
        let change = t.convert_to_written(20, 10, &mut bump(&mut next)).unwrap();
        assert_eq!(change.dirtied, vec![TreeBlock::Inode]);
        assert_eq!(
            t.extents(),
            vec![
                Extent::written(0, 10, 100),
                unwritten(10, 10, 110),
                Extent::written(20, 10, 120),
                unwritten(30, 10, 130)
            ]
        );
        // The rest converts and ext4_ext_try_to_merge folds it back into one extent.
        t.convert_to_written(0, 40, &mut bump(&mut next)).unwrap();
        assert_eq!(t.extents(), vec![Extent::written(0, 40, 100)]);
        assert!(t.unwritten_runs(0, 40).is_empty());
    }

    #[test]
    fn converting_in_a_full_root_splits_into_a_leaf() {
        // Four unwritten extents fill the inode; converting the middle of one needs two more
        // entries: ext4_ext_insert_extent moves the tree into a leaf.
        let mut t = ExtentTree::new();
        let mut next = 10_000;
        for i in 0..4 {
            t.insert_extent(unwritten(i * 100, 50, 1000 * (i + 1)), &mut bump(&mut next))
                .unwrap();
        }
        let change = t.convert_to_written(110, 10, &mut bump(&mut next)).unwrap();
        assert_eq!(change.allocated, vec![10_001], "the new leaf");
        assert_eq!(t.depth(), 1);
        assert_eq!(t.extents().len(), 6);
        assert_eq!(t.map(115), Some((2015, 5)));
        assert_eq!(t.unwritten_runs(100, 50), vec![(100, 10), (120, 30)]);
    }

    #[test]
    fn goal_follows_the_nearest_extent() {
        let mut t = ExtentTree::new();
        let mut next = 0;
        assert_eq!(t.find_goal(0), None);
        t.insert(10, 500, 5, &mut bump(&mut next)).unwrap();
        assert_eq!(t.find_goal(20), Some(510));
        assert_eq!(t.find_goal(0), Some(490));
        assert_eq!(t.neighbours(20), (Some((14, 504)), None));
        assert_eq!(t.neighbours(3), (None, Some((10, 500))));
    }

    #[test]
    fn merge_up_folds_a_small_leaf_back_into_the_inode() {
        let mut t = ExtentTree::new();
        let mut next = 1_000_000;
        for i in 0..5u64 {
            t.insert(i * 10, i * 10, 1, &mut bump(&mut next)).unwrap();
        }
        assert_eq!(t.depth(), 1);
        // Filling the holes merges extents; at four the leaf fits in the inode again.
        let mut freed = Vec::new();
        for i in 0..4u64 {
            let c = t.insert(i * 10 + 1, i * 10 + 1, 9, &mut bump(&mut next));
            freed.extend(c.unwrap().freed);
        }
        assert_eq!(t.extents().len(), 1);
        assert_eq!(t.depth(), 0);
        assert_eq!(freed, vec![1_000_001]);
    }

    /// The mapping from the extent list itself, no tree walk and no cache.
    fn reference_map(t: &ExtentTree, lblk: u64) -> Option<(u64, u64)> {
        t.extents()
            .into_iter()
            .find(|e| e.lblk <= lblk && lblk < e.end())
            .map(|e| (e.pblk + (lblk - e.lblk), e.end() - lblk))
    }

    #[test]
    fn cached_lookups_match_the_extent_list_through_inserts_and_truncates() {
        // Depth 2 (more than 4 x 340 discontiguous extents), holes between and around the
        // extents, lookups in a sequential sweep (the cache serves them) and a scattered order
        // (it misses), with the tree changed between sweeps: a stale cached extent or hole
        // would disagree with the list.
        let mut t = ExtentTree::new();
        let mut next = 10_000_000;
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut scattered = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % 9_000
        };
        let check = |t: &ExtentTree, scattered: &mut dyn FnMut() -> u64| {
            for lblk in 0..9_000 {
                assert_eq!(
                    t.map(lblk),
                    reference_map(t, lblk),
                    "sequential, lblk {lblk}"
                );
            }
            for _ in 0..3_000 {
                let lblk = scattered();
                assert_eq!(
                    t.map(lblk),
                    reference_map(t, lblk),
                    "scattered, lblk {lblk}"
                );
            }
        };
        for i in 0..1_500u64 {
            t.insert(10 + i * 4, 100_000 + i * 7, 2, &mut bump(&mut next))
                .unwrap();
        }
        assert_eq!(t.depth(), 2);
        check(&t, &mut scattered);
        // Fill one hole (an insert next to a cached hole) and look again.
        t.map(13);
        t.insert(12, 100_002, 2, &mut bump(&mut next)).unwrap();
        assert_eq!(t.map(13), Some((100_003, 1)));
        check(&t, &mut scattered);
        t.map(5_000);
        t.remove_from(4_001);
        assert_eq!(t.map(5_000), None);
        check(&t, &mut scattered);
        t.remove_from(0);
        check(&t, &mut scattered);
    }
}
