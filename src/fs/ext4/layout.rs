//! ext4 on-disk geometry as `mke2fs -t ext4 -T default -b 4096` of e2fsprogs 1.42 (1.42.9,
//! December 2013, the era of Linux 3.10) lays it out: block groups, sparse superblock backups,
//! group descriptor table and reserved GDT blocks, `flex_bg` packing of bitmaps and inode
//! tables, the blocks mke2fs itself allocates (root directory, lost+found, resize inode) and the
//! internal journal.
//!
//! Sources (e2fsprogs 1.42.9): `misc/mke2fs.conf.in` (`[defaults]`: blocksize 4096, inode_size
//! 256, inode_ratio 16384; `ext4`: has_journal, extent, huge_file, flex_bg, uninit_bg,
//! dir_nlink, extra_isize, `auto_64-bit_support`), `misc/mke2fs.c` (`PRS`: inode count from the
//! ratio, `flex_bg_size` 16; `main`: tables, root, lost+found, resize inode, journal, in that
//! order), `lib/ext2fs/initialize.c` (`ext2fs_initialize`, `calc_reserved_gdt_blocks`),
//! `lib/ext2fs/alloc_tables.c` (`ext2fs_allocate_group_table`, `flexbg_offset`),
//! `lib/ext2fs/mkjournal.c` (`ext2fs_default_journal_size`, `write_journal_inode`),
//! `lib/ext2fs/alloc.c` (`ext2fs_new_block2`: first free block at or after the goal); Linux
//! 3.10 `fs/ext4/balloc.c` (`ext4_bg_has_super`, `ext4_group_sparse`, `ext4_bg_num_gdb`).
//!
//! Simplifications:
//! - Block size is fixed at 4 KiB (one page; mobistack's unit) and `s_first_data_block` is 0,
//!   as mke2fs sets for 4 KiB blocks. The usage type is `default` (`-T default`): mke2fs would
//!   pick `small` (inode_size 128, ratio 4096) below 512 MiB and `floppy` below 3 MiB; the
//!   issue asks for one geometry at every size, so the `[defaults]` values are used throughout.
//! - No `bigalloc`, `meta_bg`, `64bit` (mke2fs 1.42 turns `64bit` on only above 2^32 blocks,
//!   16 TiB, which [`Layout::new`] rejects), RAID stride, or bad blocks.
//! - Android phones of the era formatted `/data` with AOSP's `make_ext4fs`, not mke2fs (no
//!   flex_bg, journal = blocks/64 up to 32768); that layout is not modelled (yet).

use std::collections::BTreeMap;
use std::fmt;

/// Block size in bytes: mke2fs.conf `[defaults] blocksize = 4096`.
pub const BLOCK_SIZE: u64 = 4096;
/// Blocks per group: one block bitmap's worth of bits, `blocksize * 8` (`ext2fs_initialize`:
/// `set_field(s_blocks_per_group, fs->blocksize * 8)`).
pub const BLOCKS_PER_GROUP: u64 = BLOCK_SIZE * 8;
/// Inode size: mke2fs.conf `inode_size = 256` (both `[defaults]` and `ext4`).
pub const INODE_SIZE: u64 = 256;
/// Inodes per inode-table block: 4096 / 256.
pub const INODES_PER_BLOCK: u64 = BLOCK_SIZE / INODE_SIZE;
/// Bytes of file system per inode: mke2fs.conf `[defaults] inode_ratio = 16384`.
pub const INODE_RATIO: u64 = 16384;
/// Groups per flex group: mke2fs.c `get_int_from_profile(fs_types, "flex_bg_size", 16)`.
pub const FLEX_BG_SIZE: u64 = 16;
/// Group descriptor size without the `64bit` feature: `EXT2_MIN_DESC_SIZE` (32 bytes).
/// mke2fs.conf's `auto_64-bit_support = 1` enables `64bit` (and 64-byte descriptors,
/// `EXT2_MIN_DESC_SIZE_64BIT`) only for file systems of more than 2^32 blocks.
pub const DESC_SIZE: u64 = 32;
/// Descriptors per GDT block: 4096 / 32.
pub const DESCS_PER_BLOCK: u64 = BLOCK_SIZE / DESC_SIZE;
/// Block numbers per block (`EXT2_ADDR_PER_BLOCK`): the cap on reserved GDT blocks.
pub const ADDR_PER_BLOCK: u64 = BLOCK_SIZE / 4;
/// Reserved-blocks percentage: mke2fs `-m` default 5 % (`reserved_ratio = 5.0`).
pub const RESERVED_PERCENT: u64 = 5;
/// Root directory inode (`EXT2_ROOT_INO`).
pub const ROOT_INO: u64 = 2;
/// Resize inode (`EXT2_RESIZE_INO`), holding the reserved GDT blocks.
pub const RESIZE_INO: u64 = 7;
/// Journal inode (`EXT2_JOURNAL_INO`).
pub const JOURNAL_INO: u64 = 8;
/// First non-reserved inode (`EXT2_GOOD_OLD_FIRST_INO`); mke2fs gives it to lost+found.
pub const FIRST_INO: u64 = 11;
/// lost+found's size: mke2fs `create_lost_and_found` expands it to at least 16 KiB.
pub const LOST_FOUND_BLOCKS: u64 = 4;
/// Largest file system accepted: 2^32 blocks (beyond, mke2fs 1.42 switches to `64bit`).
pub const MAX_BLOCKS: u64 = 1 << 32;

/// Where the journal lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JournalPlacement {
    /// Inside the file system (inode 8), `blocks` long, or the mke2fs default size when `None`.
    Internal { blocks: Option<u64> },
    /// On another device (`mke2fs -J device=`): no blocks here.
    External,
}

/// What `mke2fs` is told beyond the defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MkfsOptions {
    pub journal: JournalPlacement,
}

impl Default for MkfsOptions {
    fn default() -> Self {
        MkfsOptions {
            journal: JournalPlacement::Internal { blocks: None },
        }
    }
}

/// Why a geometry cannot be made: an operating error reported to the user, not a bug.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LayoutError {
    /// The device is smaller than the smallest ext4 mke2fs would make with these options.
    TooSmall {
        size_bytes: u64,
        min_bytes: u64,
        why: &'static str,
    },
    /// More than 2^32 blocks.
    TooLarge { size_bytes: u64 },
    /// A journal size outside mke2fs's bounds (1024 blocks .. half the free space).
    BadJournalSize { blocks: u64, why: &'static str },
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayoutError::TooSmall {
                size_bytes,
                min_bytes,
                why,
            } => write!(
                f,
                "ext4: a {size_bytes}-byte device is too small ({why}); the smallest is \
                 {min_bytes} bytes"
            ),
            LayoutError::TooLarge { size_bytes } => write!(
                f,
                "ext4: a {size_bytes}-byte device needs more than 2^32 blocks (64bit is not modelled)"
            ),
            LayoutError::BadJournalSize { blocks, why } => {
                write!(f, "ext4: journal of {blocks} blocks: {why}")
            }
        }
    }
}

impl std::error::Error for LayoutError {}

/// `ext2fs_default_journal_size` (lib/ext2fs/mkjournal.c, 1.42.9): journal blocks for a file
/// system of `blocks` blocks, `None` below 2048 blocks ("Filesystem too small for a journal").
/// With 4 KiB blocks: 4 MiB below 128 MiB, 16 MiB below 1 GiB, 32 MiB below 2 GiB, 64 MiB
/// below 4 GiB, 128 MiB from 4 GiB up. (Later e2fsprogs grew it to 1 GiB for large file
/// systems; 1.42 stops at 32768 blocks.)
pub fn default_journal_blocks(blocks: u64) -> Option<u64> {
    match blocks {
        0..2048 => None,
        2048..32768 => Some(1024),
        32768..262144 => Some(4096),
        262144..524288 => Some(8192),
        524288..1048576 => Some(16384),
        _ => Some(32768),
    }
}

/// `ext4_group_sparse` (fs/ext4/balloc.c): groups 0 and 1 and powers of 3, 5 and 7 carry a
/// superblock and GDT copy (`sparse_super`).
pub fn group_has_super(group: u64) -> bool {
    fn is_power_of(mut n: u64, base: u64) -> bool {
        while n > 1 && n.is_multiple_of(base) {
            n /= base;
        }
        n == 1
    }
    if group <= 1 {
        return true;
    }
    if group.is_multiple_of(2) {
        return false;
    }
    is_power_of(group, 3) || is_power_of(group, 5) || is_power_of(group, 7)
}

/// Who owns a block that mke2fs allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum MkfsOwner {
    /// Superblock, GDT, reserved GDT blocks, bitmaps, inode tables.
    Metadata,
    /// Root directory's first block (`ext2fs_mkdir`).
    RootDir,
    /// lost+found's blocks.
    LostFound,
    /// The resize inode's double-indirect block.
    ResizeInode,
    /// The journal (inode 8).
    Journal,
}

/// The geometry of one file system: every location the operations need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// `s_blocks_count` (possibly trimmed: mke2fs drops a last group too small for its
    /// metadata plus 50 blocks).
    pub blocks_count: u64,
    /// `s_r_blocks_count`: 5 % reserved for root.
    pub r_blocks_count: u64,
    /// Number of block groups.
    pub groups: u64,
    /// `s_inodes_per_group`.
    pub inodes_per_group: u64,
    /// Inode-table blocks per group (`s_itb_per_group`).
    pub inode_table_blocks: u64,
    /// GDT blocks (`s_gdb_count`).
    pub desc_blocks: u64,
    /// `s_reserved_gdt_blocks` (`calc_reserved_gdt_blocks`: room to grow 1024x, capped at
    /// 1024 blocks).
    pub reserved_gdt_blocks: u64,
    /// Journal blocks in the order of the journal file (`(start, len)` runs), empty when the
    /// journal is external.
    pub journal: Vec<(u64, u64)>,
    /// Blocks mke2fs allocated, as runs `start -> (len, owner)`, coalesced per owner.
    used: BTreeMap<u64, (u64, MkfsOwner)>,
}

impl Layout {
    /// The geometry `mke2fs -t ext4 -T default -b 4096` gives a device of `size_bytes`.
    pub fn new(size_bytes: u64, options: &MkfsOptions) -> Result<Layout, LayoutError> {
        let mut blocks = size_bytes / BLOCK_SIZE;
        if blocks > MAX_BLOCKS {
            return Err(LayoutError::TooLarge { size_bytes });
        }
        let min_bytes = Self::min_size_bytes(options);
        let too_small = |why| LayoutError::TooSmall {
            size_bytes,
            min_bytes,
            why,
        };
        if blocks < 2048 {
            // ext2fs_default_journal_size's floor; without a journal mke2fs would go lower,
            // but the tables below (flex_bg packing) need this much anyway.
            return Err(too_small("fewer than 2048 blocks of 4 KiB"));
        }
        // PRS: s_inodes_count = blocks * blocksize / inode_ratio, fixed before the last-group
        // trim (ext2fs_initialize keeps it, recomputing only inodes per group).
        let inodes_wanted = blocks * BLOCK_SIZE / INODE_RATIO;
        // ext2fs_initialize's retry loop: drop a last partial group too small for its tables.
        let (groups, ipg, itb, desc_blocks, rsv_gdt) = loop {
            let groups = blocks.div_ceil(BLOCKS_PER_GROUP);
            let desc_blocks = groups.div_ceil(DESCS_PER_BLOCK);
            let inodes = inodes_wanted.max(FIRST_INO + 1);
            let ipg = inodes.div_ceil(groups);
            assert!(
                ipg <= BLOCK_SIZE * 8,
                "16 KiB per inode never needs more inodes"
            );
            // Fill the inode-table blocks, then round down to a multiple of 8.
            let itb = (ipg * INODE_SIZE).div_ceil(BLOCK_SIZE);
            let ipg = ((itb * BLOCK_SIZE / INODE_SIZE).max(8)) & !7;
            let itb = (ipg * INODE_SIZE).div_ceil(BLOCK_SIZE);
            // calc_reserved_gdt_blocks.
            let max_blocks = if blocks < 0xffff_ffff / 1024 {
                blocks * 1024
            } else {
                0xffff_ffff
            };
            let rsv_groups = max_blocks.div_ceil(BLOCKS_PER_GROUP);
            let rsv_gdt = (rsv_groups.div_ceil(DESCS_PER_BLOCK) - desc_blocks).min(ADDR_PER_BLOCK);
            let mut overhead = 2 + itb;
            if group_has_super(groups - 1) {
                overhead += 1 + desc_blocks + rsv_gdt;
            }
            let rem = blocks % BLOCKS_PER_GROUP;
            if groups == 1 && rem != 0 && rem < overhead {
                return Err(too_small("the only group cannot hold its tables"));
            }
            if rem != 0 && rem < overhead + 50 {
                blocks -= rem;
                continue;
            }
            break (groups, ipg, itb, desc_blocks, rsv_gdt);
        };
        let mut layout = Layout {
            blocks_count: blocks,
            // mke2fs: r_blocks = reserved_ratio * blocks / 100 (a double, truncated).
            r_blocks_count: blocks * RESERVED_PERCENT / 100,
            groups,
            inodes_per_group: ipg,
            inode_table_blocks: itb,
            desc_blocks,
            reserved_gdt_blocks: rsv_gdt,
            journal: Vec::new(),
            used: BTreeMap::new(),
        };
        // ext2fs_reserve_super_and_bgd, then ext2fs_allocate_tables (flex_bg packing).
        for group in 0..groups {
            let base = layout.base_meta_blocks(group);
            if base > 0 {
                layout.mark_used(layout.group_first_block(group), base, MkfsOwner::Metadata);
            }
        }
        for flex in 0..groups.div_ceil(FLEX_BG_SIZE) {
            let first = flex * FLEX_BG_SIZE;
            let members = (groups - first).min(FLEX_BG_SIZE);
            let start = layout.flex_meta_start(first);
            let end = start + 2 * FLEX_BG_SIZE + members * itb;
            let flex_end = layout.group_first_block(first + members - 1)
                + layout.group_blocks(first + members - 1);
            if end > flex_end {
                return Err(too_small(
                    "the flex group's bitmaps and inode tables do not fit",
                ));
            }
            for member in first..first + members {
                layout.mark_used(layout.block_bitmap(member), 1, MkfsOwner::Metadata);
                layout.mark_used(layout.inode_bitmap(member), 1, MkfsOwner::Metadata);
                layout.mark_used(layout.inode_table(member), itb, MkfsOwner::Metadata);
            }
        }
        // create_root_dir, create_lost_and_found: ext2fs_mkdir / ext2fs_expand_dir take the
        // first free block from block 0 (ext2fs_new_block2 with goal 0).
        let root = layout
            .first_free(0)
            .ok_or_else(|| too_small("no room for /"))?;
        layout.mark_used(root, 1, MkfsOwner::RootDir);
        for _ in 0..LOST_FOUND_BLOCKS {
            let block = layout
                .first_free(0)
                .ok_or_else(|| too_small("no room for lost+found"))?;
            layout.mark_used(block, 1, MkfsOwner::LostFound);
        }
        // ext2fs_create_resize_inode: the double-indirect block, goal just past where group
        // 0's tables would be without flex_bg (res_gdt.c: sb_blk + desc_blocks + rsv + 2 +
        // itb, sb_blk = s_first_data_block = 0).
        let goal = desc_blocks + rsv_gdt + 2 + itb;
        let dind = layout
            .first_free(goal)
            .ok_or_else(|| too_small("no room for the resize inode"))?;
        layout.mark_used(dind, 1, MkfsOwner::ResizeInode);
        if let JournalPlacement::Internal { blocks: wanted } = options.journal {
            let default = default_journal_blocks(blocks)
                .ok_or_else(|| too_small("too small for a journal"))?;
            // figure_journal_size (misc/util.c): a size given by the user must be 1024 ..
            // 10,240,000 blocks and at most half the free blocks; the default is not checked.
            if let Some(blocks) = wanted {
                if !(1024..=10_240_000).contains(&blocks) {
                    return Err(LayoutError::BadJournalSize {
                        blocks,
                        why: "must be between 1024 and 10,240,000 blocks",
                    });
                }
                if blocks > layout.free_blocks() / 2 {
                    return Err(LayoutError::BadJournalSize {
                        blocks,
                        why: "more than half of the free blocks",
                    });
                }
            }
            let journal_blocks = wanted.unwrap_or(default);
            layout.allocate_journal(journal_blocks);
        }
        Ok(layout)
    }

    /// The smallest device [`Layout::new`] accepts: 2048 blocks (8 MiB), the floor of
    /// `ext2fs_default_journal_size` (and, with 4 KiB blocks, enough for one group's tables).
    pub fn min_size_bytes(_options: &MkfsOptions) -> u64 {
        2048 * BLOCK_SIZE
    }

    /// `write_journal_inode`: the goal is the middle group, with flex_bg rounded down to its
    /// flex group (then the first group with free blocks), and the emptier of that group and
    /// the next; blocks are then taken one at a time, first free from the previous one.
    fn allocate_journal(&mut self, mut count: u64) {
        let mut group = self.group_of(self.blocks_count / 2);
        let start;
        if group > FLEX_BG_SIZE {
            group &= !(FLEX_BG_SIZE - 1);
            while group < self.groups && self.group_free_blocks(group) == 0 {
                group += 1;
            }
            if group == self.groups {
                group = 0;
            }
            start = group;
        } else {
            start = group.saturating_sub(1);
        }
        let end = if group + 1 < self.groups {
            group + 1
        } else {
            group
        };
        let mut best = start;
        for candidate in start + 1..=end {
            if self.group_free_blocks(candidate) > self.group_free_blocks(best) {
                best = candidate;
            }
        }
        let mut goal = self.group_first_block(best);
        while count > 0 {
            let block = self
                .first_free(goal)
                .expect("journal size checked against free space");
            // Take the whole free run at once (the same blocks one-at-a-time would take).
            let run_end = self
                .used
                .range(block..)
                .next()
                .map_or(self.blocks_count, |(&s, _)| s);
            let take = (run_end - block).min(count);
            self.mark_used(block, take, MkfsOwner::Journal);
            match self.journal.last_mut() {
                Some((s, l)) if *s + *l == block => *l += take,
                _ => self.journal.push((block, take)),
            }
            count -= take;
            goal = block + take;
        }
    }

    fn mark_used(&mut self, start: u64, len: u64, owner: MkfsOwner) {
        assert!(
            len > 0 && start + len <= self.blocks_count,
            "mkfs block {start}+{len}"
        );
        if let Some((&s, &(l, _))) = self.used.range(..start + len).next_back() {
            assert!(s + l <= start, "mkfs allocated block {start} twice");
        }
        let mut start = start;
        let mut len = len;
        if let Some((&s, &(l, o))) = self.used.range(..start).next_back() {
            if s + l == start && o == owner {
                self.used.remove(&s);
                start = s;
                len += l;
            }
        }
        if let Some(&(l, o)) = self.used.get(&(start + len)) {
            if o == owner {
                self.used.remove(&(start + len));
                len += l;
            }
        }
        self.used.insert(start, (len, owner));
    }

    /// `ext2fs_new_block2`: the first free block at or after `goal`, wrapping to block 0.
    fn first_free(&self, goal: u64) -> Option<u64> {
        let scan = |from: u64, to: u64| -> Option<u64> {
            let mut candidate = from;
            if let Some((&s, &(l, _))) = self.used.range(..=from).next_back() {
                candidate = candidate.max(s + l);
            }
            for (&s, &(l, _)) in self.used.range(candidate..) {
                if s > candidate {
                    break;
                }
                candidate = s + l;
            }
            (candidate < to).then_some(candidate)
        };
        scan(goal, self.blocks_count).or_else(|| scan(0, goal))
    }

    /// Blocks mke2fs allocated, as `(start, len, owner)` runs in block order.
    pub fn used_runs(&self) -> impl Iterator<Item = (u64, u64, MkfsOwner)> + '_ {
        self.used.iter().map(|(&s, &(l, o))| (s, l, o))
    }

    /// Free blocks after mkfs (`s_free_blocks_count`).
    pub fn free_blocks(&self) -> u64 {
        self.blocks_count - self.used.values().map(|&(l, _)| l).sum::<u64>()
    }

    /// Free blocks of `group` after mkfs (`bg_free_blocks_count`).
    pub fn group_free_blocks(&self, group: u64) -> u64 {
        let first = self.group_first_block(group);
        let end = first + self.group_blocks(group);
        let mut used = 0;
        if let Some((&s, &(l, _))) = self.used.range(..first).next_back() {
            used += (s + l).min(end).saturating_sub(first);
        }
        for (&s, &(l, _)) in self.used.range(first..end) {
            used += (s + l).min(end) - s;
        }
        self.group_blocks(group) - used
    }

    /// `s_inodes_count`.
    pub fn inodes_count(&self) -> u64 {
        self.inodes_per_group * self.groups
    }

    /// `ext4_group_first_block_no`.
    pub fn group_first_block(&self, group: u64) -> u64 {
        group * BLOCKS_PER_GROUP
    }

    /// Blocks in `group` (the last group may be short).
    pub fn group_blocks(&self, group: u64) -> u64 {
        assert!(group < self.groups, "group {group} of {}", self.groups);
        (self.blocks_count - self.group_first_block(group)).min(BLOCKS_PER_GROUP)
    }

    /// `ext4_get_group_number`.
    pub fn group_of(&self, block: u64) -> u64 {
        block / BLOCKS_PER_GROUP
    }

    /// `ext4_num_base_meta_clusters`: superblock + GDT + reserved GDT blocks at the start of a
    /// group with a superblock copy, 0 elsewhere.
    pub fn base_meta_blocks(&self, group: u64) -> u64 {
        if group_has_super(group) {
            1 + self.desc_blocks + self.reserved_gdt_blocks
        } else {
            0
        }
    }

    /// First block of the packed bitmaps and inode tables of the flex group of `group`
    /// (`flexbg_offset`: the first free block of the flex group's first group).
    fn flex_meta_start(&self, group: u64) -> u64 {
        let first = group - group % FLEX_BG_SIZE;
        self.group_first_block(first) + self.base_meta_blocks(first)
    }

    /// Block bitmap of `group`: the flex group's bitmaps are consecutive from its start.
    pub fn block_bitmap(&self, group: u64) -> u64 {
        self.flex_meta_start(group) + group % FLEX_BG_SIZE
    }

    /// Inode bitmap of `group`: `flex_bg_size` blocks after the first block bitmap
    /// (`ext2fs_allocate_group_table`: `prev_block = block_bitmap_loc + flexbg_size`).
    pub fn inode_bitmap(&self, group: u64) -> u64 {
        self.flex_meta_start(group) + FLEX_BG_SIZE + group % FLEX_BG_SIZE
    }

    /// First inode-table block of `group`: the flex group's tables follow its inode bitmaps.
    pub fn inode_table(&self, group: u64) -> u64 {
        self.flex_meta_start(group)
            + 2 * FLEX_BG_SIZE
            + (group % FLEX_BG_SIZE) * self.inode_table_blocks
    }

    /// Group of inode `ino` (`(ino - 1) / inodes_per_group`).
    pub fn inode_group(&self, ino: u64) -> u64 {
        assert!(ino >= 1 && ino <= self.inodes_count(), "inode {ino}");
        (ino - 1) / self.inodes_per_group
    }

    /// The inode-table block holding inode `ino` (`__ext4_get_inode_loc`).
    pub fn inode_block(&self, ino: u64) -> u64 {
        let group = self.inode_group(ino);
        let index = (ino - 1) % self.inodes_per_group;
        self.inode_table(group) + index / INODES_PER_BLOCK
    }

    /// The primary GDT block holding `group`'s descriptor (`ext4_get_group_desc`: block
    /// `s_first_data_block + 1 + group / descs_per_block`).
    pub fn gdt_block(&self, group: u64) -> u64 {
        assert!(group < self.groups);
        1 + group / DESCS_PER_BLOCK
    }

    /// The superblock's block (it sits at byte 1024 of block 0 with 4 KiB blocks).
    pub fn superblock_block(&self) -> u64 {
        0
    }

    /// The first block mke2fs left free for data: the first free block from block 0.
    pub fn first_data_block(&self) -> u64 {
        self.first_free(0)
            .expect("a fresh file system has free blocks")
    }

    /// The internal journal's blocks as one range `start..end` when contiguous (it is
    /// whenever its goal group was empty, as on every device of 1 GiB and more), else `None`
    /// (see [`Layout::journal`] for the runs).
    pub fn journal_range(&self) -> Option<std::ops::Range<u64>> {
        match self.journal.as_slice() {
            [(start, len)] => Some(*start..start + len),
            _ => None,
        }
    }

    /// Total journal blocks (0 when external).
    pub fn journal_blocks(&self) -> u64 {
        self.journal.iter().map(|&(_, l)| l).sum()
    }

    /// Whether `block` holds file-system metadata placed by mke2fs (superblocks, GDTs,
    /// bitmaps, inode tables), as `ext4_data_block_valid` checks with its system zones.
    pub fn is_static_metadata(&self, block: u64) -> bool {
        self.used
            .range(..=block)
            .next_back()
            .is_some_and(|(&s, &(l, o))| block < s + l && o == MkfsOwner::Metadata)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;

    /// Expected numbers worked out from e2fsprogs 1.42.9's code (module doc), not from
    /// running this module:
    /// - blocks 16 GiB / 4 KiB = 4,194,304; groups 4,194,304 / 32,768 = 128;
    /// - inodes 16 GiB / 16 KiB = 1,048,576; per group 8192, 512 table blocks;
    /// - 128 descriptors of 32 bytes fill 1 GDT block; reserved GDT:
    ///   max_blocks = 0xffffffff (4,194,304 is not below 0xffffffff / 1024), rsv_groups =
    ///   ceil(0xffffffff / 32768) = 131,072, ceil(131,072 / 128) - 1 = 1023 blocks;
    /// - group 0: superblock 0, GDT 1, reserved GDT 2..1024, block bitmaps 1025..1040,
    ///   inode bitmaps 1041..1056, inode tables 1057..9248 (16 x 512); root dir 9249,
    ///   lost+found 9250..9253, resize inode's block: goal 0 + 1 + 1023 + 2 + 512 = 1538 is
    ///   inside the tables, so the first free block after, 9254;
    /// - journal 32,768 blocks (128 MiB, >= 1M blocks); middle block 2,097,152 is group 64,
    ///   a flex group start (64 > 16, 64 & ~15 = 64), compared with group 65: group 64 holds
    ///   the flex tables (8224 blocks), group 65 is empty (65 is no power of 3, 5, 7), so
    ///   the journal is all of group 65: blocks 2,129,920..2,162,687.
    #[test]
    fn sixteen_gib_matches_mke2fs_1_42() {
        let l = Layout::new(16 * GIB, &MkfsOptions::default()).unwrap();
        assert_eq!(l.blocks_count, 4_194_304);
        assert_eq!(l.groups, 128);
        assert_eq!(l.inodes_per_group, 8192);
        assert_eq!(l.inodes_count(), 1_048_576);
        assert_eq!(l.inode_table_blocks, 512);
        assert_eq!(l.desc_blocks, 1);
        assert_eq!(l.reserved_gdt_blocks, 1023);
        assert_eq!(l.r_blocks_count, 209_715);
        assert_eq!(l.block_bitmap(0), 1025);
        assert_eq!(l.block_bitmap(15), 1040);
        assert_eq!(l.inode_bitmap(0), 1041);
        assert_eq!(l.inode_table(0), 1057);
        assert_eq!(l.inode_table(1), 1569);
        assert_eq!(l.inode_table(15) + 511, 9248);
        // Flex group 1 (groups 16..31) starts at group 16's first block: no superblock there.
        assert_eq!(l.block_bitmap(16), 16 * 32768);
        assert_eq!(l.inode_bitmap(16), 16 * 32768 + 16);
        assert_eq!(l.inode_table(16), 16 * 32768 + 32);
        assert_eq!(l.first_data_block(), 9255);
        let owners: Vec<_> = l
            .used_runs()
            .filter(|&(s, _, _)| (9249..9255).contains(&s))
            .collect();
        assert_eq!(
            owners,
            vec![
                (9249, 1, MkfsOwner::RootDir),
                (9250, 4, MkfsOwner::LostFound),
                (9254, 1, MkfsOwner::ResizeInode)
            ]
        );
        assert_eq!(l.journal_range(), Some(2_129_920..2_162_688));
        assert_eq!(l.journal_blocks(), 32768);
        // Sparse superblock backups: 1, 3, 5, 7, 9, 25, 27, 49, 81, 125 (each 1025 blocks).
        let backups: Vec<u64> = (0..l.groups).filter(|&g| group_has_super(g)).collect();
        assert_eq!(backups, vec![0, 1, 3, 5, 7, 9, 25, 27, 49, 81, 125]);
        assert_eq!(l.group_free_blocks(1), 32768 - 1025);
        assert_eq!(l.group_free_blocks(2), 32768);
        assert_eq!(l.group_free_blocks(65), 0);
        assert_eq!(l.group_free_blocks(64), 32768 - 8224);
        assert_eq!(l.inode_block(ROOT_INO), 1057);
        assert_eq!(l.inode_block(17), 1058);
        assert_eq!(l.inode_block(8193), l.inode_table(1));
        assert_eq!(l.gdt_block(127), 1);
        let used = 11 * 1025 + 8 * (32 + 16 * 512) + 6 + 32768;
        assert_eq!(l.free_blocks(), 4_194_304 - used);
    }

    /// 64 MiB = 16,384 blocks: one (short) group; 4096 inodes, 256 table blocks; reserved GDT
    /// ceil(ceil(16,384 x 1024 / 32,768) / 128) - 1 = 3 (blocks 2..4); block bitmap 5, inode
    /// bitmap 5 + 16 = 21, inode table 37..292; blocks 6..20 and 22..36 stay free (room for
    /// the bitmaps of 15 more groups), so root takes 6, lost+found 7..10, the resize block's
    /// goal 0 + 1 + 3 + 2 + 256 = 262 gives 293, and the 1024-block journal (4 MiB, < 32,768
    /// blocks) goes first-fit from group 0: 11..20, 22..36, 294..1292.
    #[test]
    fn sixty_four_mib_test_device() {
        let l = Layout::new(64 * MIB, &MkfsOptions::default()).unwrap();
        assert_eq!(l.blocks_count, 16_384);
        assert_eq!(l.groups, 1);
        assert_eq!(l.inodes_per_group, 4096);
        assert_eq!(l.inode_table_blocks, 256);
        assert_eq!(l.reserved_gdt_blocks, 3);
        assert_eq!(l.block_bitmap(0), 5);
        assert_eq!(l.inode_bitmap(0), 21);
        assert_eq!(l.inode_table(0), 37);
        assert_eq!(
            l.journal,
            vec![(11, 10), (22, 15), (294, 999)],
            "first fit around the flex holes"
        );
        assert_eq!(l.journal_range(), None);
        assert_eq!(l.journal_blocks(), 1024);
        assert_eq!(l.first_data_block(), 1293);
        // Used: 5 (sb, GDT, 3 reserved) + 2 bitmaps + 256 table + 6 mkfs blocks + 1024.
        assert_eq!(l.free_blocks(), 16_384 - 1293);
    }

    #[test]
    fn journal_size_table_and_external_journal() {
        assert_eq!(default_journal_blocks(2047), None);
        assert_eq!(default_journal_blocks(16_384), Some(1024));
        assert_eq!(default_journal_blocks(200_000), Some(4096));
        assert_eq!(default_journal_blocks(300_000), Some(8192));
        assert_eq!(default_journal_blocks(600_000), Some(16_384));
        assert_eq!(default_journal_blocks(1 << 20), Some(32_768));
        let ext = MkfsOptions {
            journal: JournalPlacement::External,
        };
        let l = Layout::new(16 * GIB, &ext).unwrap();
        assert!(l.journal.is_empty());
        assert_eq!(l.group_free_blocks(65), 32768);
        let sized = MkfsOptions {
            journal: JournalPlacement::Internal { blocks: Some(4096) },
        };
        assert_eq!(
            Layout::new(16 * GIB, &sized).unwrap().journal_blocks(),
            4096
        );
    }

    #[test]
    fn too_small_is_a_clear_error() {
        let err = Layout::new(MIB, &MkfsOptions::default()).unwrap_err();
        assert!(matches!(err, LayoutError::TooSmall { .. }));
        assert!(err.to_string().contains("too small"), "{err}");
        assert!(Layout::new(8 * MIB, &MkfsOptions::default()).is_ok());
    }

    #[test]
    fn a_short_last_group_is_dropped_when_it_cannot_hold_its_tables() {
        // 2 groups + 100 blocks: the third group (no superblock: 2 is even) needs 2 + 512
        // blocks + 50, so mke2fs trims the file system to 2 full groups.
        let l = Layout::new((2 * 32768 + 100) * BLOCK_SIZE, &MkfsOptions::default()).unwrap();
        assert_eq!(l.blocks_count, 65_536);
        assert_eq!(l.groups, 2);
    }
}
