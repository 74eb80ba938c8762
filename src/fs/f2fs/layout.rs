//! F2FS's on-disk geometry as mkfs.f2fs lays it out (f2fs-tools `mkfs/f2fs_format.c`,
//! `f2fs_prepare_super_block` and `get_best_overprovision`): the superblock's two copies in the
//! first 4 KiB blocks, then, from the first 2 MiB boundary, the checkpoint area (two CP packs,
//! one segment each), the SIT and NAT (two copies each, segment-aligned), the SSA (one summary
//! block per main-area segment) and the main area. Blocks are 4 KiB, segments 512 blocks
//! (2 MiB), one segment per section and one section per zone (mkfs's defaults).
//!
//! Simplifications: the partition starts at sector 0 of the device; no zoned devices, no
//! extra devices, no `-e` extension options beyond the defaults.

/// Blocks per segment: `1 << log_blocks_per_seg`, 9 (include/linux/f2fs_fs.h, mkfs default).
pub const BLOCKS_PER_SEG: u64 = 512;
/// Entries of one SIT block: `SIT_ENTRY_PER_BLOCK` = 4096 / 74 = 55 (f2fs_fs.h).
pub const SIT_ENTRY_PER_BLOCK: u64 = 55;
/// Entries of one NAT block: `NAT_ENTRY_PER_BLOCK` = 4096 / 9 = 455 (f2fs_fs.h).
pub const NAT_ENTRY_PER_BLOCK: u64 = 455;
/// Checkpoint packs: `F2FS_NUMBER_OF_CHECKPOINT_PACK` = 2, one segment each.
pub const CP_PACKS: u64 = 2;
/// Active logs: `NR_CURSEG_TYPE` = 6 (hot/warm/cold x data/node).
pub const NR_CURSEG: u64 = 6;

/// Where each area starts, in 4 KiB blocks from the start of the partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub total_blocks: u64,
    /// `segment0_blkaddr`: the checkpoint area's first block.
    pub cp_blkaddr: u64,
    pub sit_blkaddr: u64,
    /// SIT blocks per copy.
    pub sit_blocks: u64,
    pub sit_segments: u64,
    pub nat_blkaddr: u64,
    /// NAT blocks per copy.
    pub nat_blocks: u64,
    pub nat_segments: u64,
    pub ssa_blkaddr: u64,
    pub main_blkaddr: u64,
    /// Segments of the main area (`segment_count_main`).
    pub main_segments: u64,
    /// `reserved_segments` (mkfs's `(2 * (100 / ovp + 1) + 6) * segs_per_sec`).
    pub reserved_segments: u64,
    /// `overprov_segment_count`, the reserved segments included.
    pub ovp_segments: u64,
    /// The overprovision ratio mkfs chose, in hundredths of a percent.
    pub ovp_ratio_centi: u64,
}

impl Layout {
    /// mkfs.f2fs over `size_bytes`. Errors when the partition cannot hold the metadata areas
    /// and the six logs.
    pub fn format(size_bytes: u64) -> Result<Layout, String> {
        let total_blocks = size_bytes / 4096;
        // zone_align_start_offset: the first zone boundary past the two superblock blocks.
        let cp_blkaddr = BLOCKS_PER_SEG;
        let segment_count = total_blocks.saturating_sub(cp_blkaddr) / BLOCKS_PER_SEG;
        if segment_count < 24 {
            return Err(format!(
                "an F2FS partition of {size_bytes} bytes is too small (mkfs.f2fs needs at least \
                 {} MiB here)",
                (24 + 1) * 2
            ));
        }
        let sit_blocks = segment_count.div_ceil(SIT_ENTRY_PER_BLOCK);
        let sit_segments = sit_blocks.div_ceil(BLOCKS_PER_SEG);
        let segment_count_sit = sit_segments * 2;
        // total_valid_blks_available: the blocks after CP and SIT, one NAT entry each.
        let valid_blocks = (segment_count - CP_PACKS - segment_count_sit) * BLOCKS_PER_SEG;
        let nat_blocks = valid_blocks.div_ceil(NAT_ENTRY_PER_BLOCK);
        let nat_segments = nat_blocks.div_ceil(BLOCKS_PER_SEG);
        let segment_count_nat = nat_segments * 2;
        let valid_blocks =
            (segment_count - CP_PACKS - segment_count_sit - segment_count_nat) * BLOCKS_PER_SEG;
        let ssa_blocks = valid_blocks / BLOCKS_PER_SEG + 1;
        let ssa_segments = ssa_blocks.div_ceil(BLOCKS_PER_SEG);
        let meta = CP_PACKS + segment_count_sit + segment_count_nat + ssa_segments;
        let main_segments = segment_count - meta;
        if main_segments < 2 * NR_CURSEG + 8 {
            return Err(format!(
                "an F2FS partition of {size_bytes} bytes leaves {main_segments} main segments; \
                 at least {} are needed",
                2 * NR_CURSEG + 8
            ));
        }
        let (ovp_ratio_centi, reserved_segments, ovp_segments) = best_overprovision(main_segments);
        let sit_blkaddr = cp_blkaddr + CP_PACKS * BLOCKS_PER_SEG;
        let nat_blkaddr = sit_blkaddr + segment_count_sit * BLOCKS_PER_SEG;
        let ssa_blkaddr = nat_blkaddr + segment_count_nat * BLOCKS_PER_SEG;
        let main_blkaddr = ssa_blkaddr + ssa_segments * BLOCKS_PER_SEG;
        Ok(Layout {
            total_blocks,
            cp_blkaddr,
            sit_blkaddr,
            sit_blocks,
            sit_segments,
            nat_blkaddr,
            nat_blocks,
            nat_segments,
            ssa_blkaddr,
            main_blkaddr,
            main_segments,
            reserved_segments,
            ovp_segments,
            ovp_ratio_centi,
        })
    }

    /// The segment number (in the main area) of block `blkaddr`.
    pub fn segno(&self, blkaddr: u64) -> u32 {
        debug_assert!(blkaddr >= self.main_blkaddr);
        ((blkaddr - self.main_blkaddr) / BLOCKS_PER_SEG) as u32
    }

    /// The first block of main-area segment `segno`.
    pub fn seg_start(&self, segno: u32) -> u64 {
        self.main_blkaddr + u64::from(segno) * BLOCKS_PER_SEG
    }

    /// Blocks users may fill: the main area minus the overprovisioned segments
    /// (`user_block_count`).
    pub fn user_blocks(&self) -> u64 {
        (self.main_segments - self.ovp_segments) * BLOCKS_PER_SEG
    }

    /// The block of CP pack `pack` (0 or 1), `offset` blocks in.
    pub fn cp_block(&self, pack: u64, offset: u64) -> u64 {
        self.cp_blkaddr + pack * BLOCKS_PER_SEG + offset
    }

    /// The NAT block holding node `nid`, in copy `copy` (0 or 1): `current_nat_addr`.
    pub fn nat_block(&self, nid: u32, copy: u64) -> u64 {
        let block_off = u64::from(nid) / NAT_ENTRY_PER_BLOCK;
        let seg_off = block_off / BLOCKS_PER_SEG;
        self.nat_blkaddr
            + seg_off * 2 * BLOCKS_PER_SEG
            + copy * BLOCKS_PER_SEG
            + block_off % BLOCKS_PER_SEG
    }

    /// The SIT block holding segment `segno`'s entry, in copy `copy`: `current_sit_addr`.
    pub fn sit_block(&self, segno: u32, copy: u64) -> u64 {
        let block_off = u64::from(segno) / SIT_ENTRY_PER_BLOCK;
        self.sit_blkaddr + copy * self.sit_segments * BLOCKS_PER_SEG + block_off
    }

    /// The SSA block summarising segment `segno`.
    pub fn ssa_block(&self, segno: u32) -> u64 {
        self.ssa_blkaddr + u64::from(segno)
    }
}

/// mkfs.f2fs's `get_best_overprovision`: the ratio that leaves users the most space, with the
/// reserved segments it implies. Returns (ratio in 1/100 %, reserved, overprovisioned
/// segments including the reserved ones).
fn best_overprovision(main_segments: u64) -> (u64, u64, u64) {
    // Candidates in hundredths of a percent: 10..95 % by 5 for small partitions, else
    // 0.01..10 % by 0.01 (f2fs_format.c).
    let (start, end, step) = if main_segments < 256 {
        (1000u64, 9500u64, 500u64)
    } else {
        (1, 1000, 1)
    };
    let mut best = (0u64, 0u64, 0u64, 0u64); // (space, ratio, reserved, ovp)
    let mut candidate = start;
    while candidate <= end {
        // reserved = (2 * (100 / candidate + 1) + 6) * segs_per_sec, in floating point then
        // truncated as mkfs's double arithmetic does.
        let ratio = candidate as f64 / 100.0;
        let reserved = ((2.0 * (100.0 / ratio + 1.0) + 6.0) as u64).min(main_segments);
        let ovp = ((main_segments - reserved) as f64 * ratio / 100.0) as u64;
        let space = main_segments.saturating_sub(reserved + ovp);
        if space > best.0 {
            best = (space, candidate, reserved, ovp + reserved);
        }
        candidate += step;
    }
    (best.1, best.2, best.3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_32_gib_partition_gets_mkfs_like_areas() {
        let l = Layout::format(32 << 30).unwrap();
        assert_eq!(l.cp_blkaddr, 512);
        assert_eq!(l.sit_blkaddr, 512 + 1024);
        // 16383 segments: 298 SIT blocks, one segment per copy.
        assert_eq!(l.sit_blocks, 298);
        assert_eq!(l.sit_segments, 1);
        assert!(l.nat_segments >= 18, "one NAT entry per main block");
        assert!(l.main_blkaddr > l.ssa_blkaddr);
        assert_eq!((l.main_blkaddr - l.cp_blkaddr) % BLOCKS_PER_SEG, 0);
        // mkfs picks a small ratio for a large partition: about 1-3 %.
        assert!(
            (50..=400).contains(&l.ovp_ratio_centi),
            "{}",
            l.ovp_ratio_centi
        );
        assert!(l.reserved_segments < l.ovp_segments);
        assert!(l.user_blocks() < l.main_segments * BLOCKS_PER_SEG);
    }

    #[test]
    fn small_partitions_use_the_coarse_ratio_table_and_tiny_ones_fail() {
        let l = Layout::format(256 << 20).unwrap();
        assert!(l.main_segments < 256);
        assert_eq!(l.ovp_ratio_centi % 500, 0);
        assert!(Layout::format(20 << 20).is_err());
    }

    #[test]
    fn nat_and_sit_copies_are_a_segment_apart() {
        let l = Layout::format(8 << 30).unwrap();
        assert_eq!(l.nat_block(7, 1), l.nat_block(7, 0) + BLOCKS_PER_SEG);
        assert_eq!(l.nat_block(455, 0), l.nat_block(0, 0) + 1);
        assert_eq!(
            l.sit_block(0, 1),
            l.sit_block(0, 0) + l.sit_segments * BLOCKS_PER_SEG
        );
        assert_eq!(l.segno(l.seg_start(3) + 5), 3);
    }
}
