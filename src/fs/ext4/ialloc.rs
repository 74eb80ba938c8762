//! Inode allocation, modelled on Linux 3.10's fs/ext4/ialloc.c: the group of a new inode
//! (`find_group_orlov` for directories, spreading top-level ones over flex groups;
//! `find_group_other` for files, next to the parent), the first free inode of the group's
//! bitmap (`__ext4_new_inode`), and freeing (`ext4_free_inode`).
//!
//! Simplifications:
//! - Orlov's hash of a top-level directory's name is the caller's (see [`super::dir::name_hash`]),
//!   not half-MD4 seeded with `s_hash_seed` (random per file system, so only its spread
//!   matters).
//! - No `s_inode_goal`, no `EXT4_INODE_TOPDIR` flag (only the root's children are top-level),
//!   no `bg_itable_unused` / `INODE_UNINIT` bookkeeping (it changes only the descriptor, which
//!   is dirtied anyway); the flex-group counters are summed from the groups when needed.

use super::layout::{Layout, BLOCKS_PER_GROUP, FIRST_INO, FLEX_BG_SIZE};
use crate::mm::Ino;

#[derive(Debug, Clone)]
struct Group {
    /// The inode bitmap, allocated on first use (`None`: all free).
    bitmap: Option<Vec<u64>>,
    free: u64,
    used_dirs: u64,
}

/// Inode bitmaps and the per-group counts (`bg_free_inodes_count`, `bg_used_dirs_count`).
#[derive(Debug, Clone)]
pub struct InodeAlloc {
    inodes_per_group: u64,
    groups: Vec<Group>,
}

/// The Orlov statistics of a group or flex group (`struct orlov_stats`).
#[derive(Debug, Clone, Copy, Default)]
struct Stats {
    free_inodes: u64,
    free_blocks: u64,
    used_dirs: u64,
}

impl InodeAlloc {
    /// The inode tables as mke2fs leaves them: inodes 1..=10 reserved (the root, 2, among
    /// them), lost+found (11) allocated; two directories in group 0.
    pub fn new(layout: &Layout) -> InodeAlloc {
        let mut alloc = InodeAlloc {
            inodes_per_group: layout.inodes_per_group,
            groups: (0..layout.groups)
                .map(|_| Group {
                    bitmap: None,
                    free: layout.inodes_per_group,
                    used_dirs: 0,
                })
                .collect(),
        };
        for ino in 1..=FIRST_INO {
            alloc.set(ino);
        }
        alloc.groups[0].used_dirs = 2;
        alloc
    }

    fn set(&mut self, ino: Ino) {
        let ipg = self.inodes_per_group;
        let group = &mut self.groups[((ino - 1) / ipg) as usize];
        let bit = ((ino - 1) % ipg) as usize;
        let bitmap = group
            .bitmap
            .get_or_insert_with(|| vec![0; (ipg as usize).div_ceil(64)]);
        assert_eq!(
            bitmap[bit / 64] & (1 << (bit % 64)),
            0,
            "inode {ino} allocated twice"
        );
        bitmap[bit / 64] |= 1 << (bit % 64);
        group.free -= 1;
    }

    pub fn groups(&self) -> u64 {
        self.groups.len() as u64
    }

    pub fn free_inodes(&self) -> u64 {
        self.groups.iter().map(|g| g.free).sum()
    }

    pub fn group_free_inodes(&self, group: u64) -> u64 {
        self.groups[group as usize].free
    }

    pub fn is_allocated(&self, ino: Ino) -> bool {
        let ipg = self.inodes_per_group;
        let group = &self.groups[((ino - 1) / ipg) as usize];
        let bit = ((ino - 1) % ipg) as usize;
        group
            .bitmap
            .as_ref()
            .is_some_and(|b| b[bit / 64] & (1 << (bit % 64)) != 0)
    }

    fn dirs(&self) -> u64 {
        self.groups.iter().map(|g| g.used_dirs).sum()
    }

    fn flex_stats(&self, flex: u64, free_blocks: &dyn Fn(u64) -> u64) -> Stats {
        let first = flex * FLEX_BG_SIZE;
        let end = (first + FLEX_BG_SIZE).min(self.groups());
        let mut s = Stats::default();
        for g in first..end {
            s.free_inodes += self.groups[g as usize].free;
            s.free_blocks += free_blocks(g);
            s.used_dirs += self.groups[g as usize].used_dirs;
        }
        s
    }

    /// `find_group_orlov`: top-level directories (children of the root) go to the flex group
    /// with the fewest directories among those with at least average free inodes and blocks,
    /// searched from a hash of the name; other directories (and files whose parent's flex
    /// group is full) to the first flex group from the parent's last allocation with room
    /// (`max_dirs`, `min_inodes`, `min_clusters`); then the first group of that flex group
    /// with a free inode. Falls back to the first group from the parent's with at least
    /// average free inodes, then any free inode. `free_blocks(group)` is the group's free
    /// block count.
    pub fn find_group_orlov(
        &self,
        parent_group: u64,
        last_alloc_group: Option<u64>,
        top_level_dir: bool,
        name_hash: u32,
        free_blocks: &dyn Fn(u64) -> u64,
    ) -> Option<u64> {
        let real_groups = self.groups();
        let nflex = real_groups.div_ceil(FLEX_BG_SIZE);
        let free_inodes = self.free_inodes();
        let all_free_blocks: u64 = (0..real_groups).map(free_blocks).sum();
        let avefreei = free_inodes / nflex;
        let avefreec = all_free_blocks / nflex;
        let found_flex = |flex: u64| -> Option<u64> {
            let first = flex * FLEX_BG_SIZE;
            (first..(first + FLEX_BG_SIZE).min(real_groups))
                .find(|&g| self.groups[g as usize].free > 0)
        };
        if top_level_dir {
            let start = name_hash as u64 % nflex;
            let mut best: Option<u64> = None;
            let mut best_ndir = self.inodes_per_group;
            for i in 0..nflex {
                let flex = (start + i) % nflex;
                let s = self.flex_stats(flex, free_blocks);
                if s.free_inodes == 0
                    || s.used_dirs >= best_ndir
                    || s.free_inodes < avefreei
                    || s.free_blocks < avefreec
                {
                    continue;
                }
                best = Some(flex);
                best_ndir = s.used_dirs;
            }
            if let Some(group) = best.and_then(found_flex) {
                return Some(group);
            }
        } else {
            let ipg = self.inodes_per_group as i64;
            let flex = FLEX_BG_SIZE as i64;
            let max_dirs = self.dirs() / nflex + self.inodes_per_group / 16;
            let min_inodes = (avefreei as i64 - ipg * flex / 4).max(1);
            let min_blocks = avefreec as i64 - BLOCKS_PER_GROUP as i64 * flex / 4;
            let start = last_alloc_group.unwrap_or(parent_group) / FLEX_BG_SIZE;
            for i in 0..nflex {
                let f = (start + i) % nflex;
                let s = self.flex_stats(f, free_blocks);
                if s.used_dirs >= max_dirs
                    || (s.free_inodes as i64) < min_inodes
                    || (s.free_blocks as i64) < min_blocks
                {
                    continue;
                }
                if let Some(group) = found_flex(f) {
                    return Some(group);
                }
                break;
            }
        }
        // fallback
        let avefreei = free_inodes / real_groups;
        for floor in [avefreei, 0] {
            for i in 0..real_groups {
                let g = (parent_group + i) % real_groups;
                let free = self.groups[g as usize].free;
                if free > 0 && free >= floor {
                    return Some(g);
                }
            }
        }
        None
    }

    /// `find_group_other` with flex_bg: the first group of the parent's flex group with a
    /// free inode, then of the flex group of the parent's last allocation, else Orlov.
    pub fn find_group_other(
        &self,
        parent_group: u64,
        last_alloc_group: Option<u64>,
        free_blocks: &dyn Fn(u64) -> u64,
    ) -> Option<u64> {
        let groups = self.groups();
        let mut starts = vec![parent_group];
        starts.extend(last_alloc_group);
        for start in starts {
            let first = start - start % FLEX_BG_SIZE;
            for g in first..(first + FLEX_BG_SIZE).min(groups) {
                if self.groups[g as usize].free > 0 {
                    return Some(g);
                }
            }
        }
        self.find_group_orlov(parent_group, last_alloc_group, false, 0, free_blocks)
    }

    /// The inode-number search of `__ext4_new_inode`: the first free inode of `group`, else
    /// of the following groups. Returns the inode and its group.
    pub fn alloc(&mut self, group: u64, is_dir: bool) -> Option<(Ino, u64)> {
        let groups = self.groups();
        for i in 0..groups {
            let g = (group + i) % groups;
            let state = &self.groups[g as usize];
            if state.free == 0 {
                continue;
            }
            let bit = match &state.bitmap {
                None => 0,
                Some(bitmap) => bitmap
                    .iter()
                    .enumerate()
                    .find(|(_, &w)| w != u64::MAX)
                    .map(|(i, &w)| i as u64 * 64 + (!w).trailing_zeros() as u64)
                    .expect("a group with free inodes has a clear bit"),
            };
            assert!(bit < self.inodes_per_group);
            let ino = g * self.inodes_per_group + bit + 1;
            self.set(ino);
            if is_dir {
                self.groups[g as usize].used_dirs += 1;
            }
            return Some((ino, g));
        }
        None
    }

    /// `ext4_free_inode`: clears the inode's bit.
    pub fn free(&mut self, ino: Ino, is_dir: bool) {
        assert!(ino > FIRST_INO, "freeing reserved inode {ino}");
        let ipg = self.inodes_per_group;
        let group = &mut self.groups[((ino - 1) / ipg) as usize];
        let bit = ((ino - 1) % ipg) as usize;
        let bitmap = group.bitmap.as_mut().expect("freeing a free inode");
        assert_ne!(
            bitmap[bit / 64] & (1 << (bit % 64)),
            0,
            "inode {ino} freed twice"
        );
        bitmap[bit / 64] &= !(1 << (bit % 64));
        group.free += 1;
        if is_dir {
            group.used_dirs -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::layout::MkfsOptions;
    use super::*;

    #[test]
    fn files_stay_in_the_parents_flex_group_and_top_dirs_spread() {
        let layout = Layout::new(16 << 30, &MkfsOptions::default()).unwrap();
        let mut ia = InodeAlloc::new(&layout);
        let free_blocks = |g: u64| layout.group_free_blocks(g);
        // A file under the root: group 0, first free inode after lost+found (12).
        let g = ia.find_group_other(0, None, &free_blocks).unwrap();
        assert_eq!(g, 0);
        assert_eq!(ia.alloc(g, false), Some((12, 0)));
        // Top-level directories go to the flex group with the fewest directories among those
        // with average free inodes and blocks: flex 0 has / and lost+found, flex 4 the
        // journal (below-average free blocks), so seven go to the six others, one twice.
        let mut flexes = std::collections::BTreeMap::new();
        for hash in [1u32, 2, 3, 4, 5, 6, 7] {
            let g = ia
                .find_group_orlov(0, None, true, hash, &free_blocks)
                .unwrap();
            let (ino, got) = ia.alloc(g, true).unwrap();
            assert_eq!(got, g);
            assert_eq!(g % 16, 0, "the flex group's first group");
            assert_eq!((ino - 1) / 8192, g);
            *flexes.entry(g / 16).or_insert(0) += 1;
        }
        assert_eq!(
            flexes.keys().copied().collect::<Vec<_>>(),
            vec![1, 2, 3, 5, 6, 7]
        );
        ia.free(12, false);
        assert!(!ia.is_allocated(12));
        assert_eq!(ia.alloc(0, false), Some((12, 0)));
    }
}
