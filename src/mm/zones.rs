//! Memory zones as far as the watermarks and the dirty limits depend on them: `ZONE_NORMAL`
//! (lowmem, which the kernel maps permanently) and, on a 32-bit kernel whose RAM exceeds its
//! lowmem, `ZONE_HIGHMEM` (Linux 3.10 mm/page_alloc.c, mm/page-writeback.c).
//!
//! - Zone sizes (`[stack.vm] lowmem`): a 32-bit ARM kernel maps RAM linearly from
//!   `PAGE_OFFSET` up to `vmalloc_min` (arch/arm/mm/mmu.c `sanity_check_meminfo`); the rest is
//!   highmem. With `CONFIG_VMSPLIT_3G` (`PAGE_OFFSET` = 0xC0000000), `VMALLOC_END` = 0xff000000,
//!   the default 240 MiB vmalloc area and `VMALLOC_OFFSET` = 8 MiB, lowmem is at most
//!   0xff000000 - 240 MiB - 8 MiB - 0xC0000000 = 760 MiB ([`ARM_VMSPLIT_3G_LOWMEM`]); a
//!   `vmalloc=` on the command line moves it. `lowmem = 0` (default) is a kernel without
//!   highmem (64-bit, or RAM below the split): one zone, as before.
//! - `min_free_kbytes` (`init_per_zone_wmark_min`): `int_sqrt(16 x lowmem KiB)`, from lowmem
//!   only (`nr_free_buffer_pages` counts the zones below `ZONE_HIGHMEM`).
//! - Watermarks (`__setup_per_zone_wmarks`): lowmem's share of `min_free_kbytes` is all of it
//!   (`tmp = pages_min x managed / lowmem_pages`); highmem's min watermark is `managed / 1024`
//!   clamped to `SWAP_CLUSTER_MAX..128` pages, while its low and high watermarks add `tmp / 4`
//!   and `tmp / 2` of its own, larger, `tmp` ("The WMARK_HIGH-WMARK_LOW and
//!   (WMARK_LOW-WMARK_MIN) deltas controls asynch page reclaim, and so should not be capped for
//!   highmem").
//! - `lowmem_reserve` (`setup_per_zone_lowmem_reserve`): lowmem keeps `highmem pages /
//!   sysctl_lowmem_reserve_ratio[ZONE_NORMAL]` (32) free from allocations that could have used
//!   highmem.
//! - `dirty_balance_reserve` / `totalreserve_pages` (`calculate_totalreserve_pages`): per zone,
//!   its largest `lowmem_reserve` plus its high watermark, at most its size.
//! - Dirtyable memory ([`Zones::global_dirtyable_memory`]): 3.10's `global_dirtyable_memory`
//!   subtracts highmem's dirtyable pages unless `vm.highmem_is_dirtyable` (default 0), so the
//!   dirty thresholds are percentages of lowmem alone; see the function for 3.14's changes.
//!
//! Simplifications: the allocator and reclaim stay one zone ([`Zones::allocator_watermarks`]
//! is the sum of the zones' watermarks: kswapd balances every zone to its high watermark);
//! pages are not placed in zones: each zone holds its share, in proportion to its size, of
//! the free pages, the file LRU and `reserved` (asm: 3.12's fair zone allocator policy,
//! 81c0a2bb515f, spreads page-cache allocations over the zones by size; in 3.10, where only
//! the sum of a zone's free and LRU pages enters the formula, this matters for `reserved` and
//! for pages in flight only); no `ZONE_DMA`, no `ZONE_MOVABLE`, no CMA or carve-outs shrinking
//! the zones; no swap, so anonymous pages are never reclaimable (3.10's
//! `global_reclaimable_pages` would count them with swap on); `zone_dirty_ok` (spreading dirty
//! pages over zones, `__GFP_WRITE`) is not modelled.

use super::vmscan::{Watermarks, SWAP_CLUSTER_MAX};
use super::VmConfig;
use crate::kernel::KernelVersion;
use crate::units::PAGE_SIZE;

/// Lowmem of a 32-bit ARM kernel with `CONFIG_VMSPLIT_3G` and no `vmalloc=`: `vmalloc_min` =
/// `VMALLOC_END` (0xff000000) - 240 MiB - `VMALLOC_OFFSET` (8 MiB), less `PAGE_OFFSET`
/// (0xC0000000): 760 MiB (arch/arm/mm/mmu.c, arch/arm/include/asm/pgtable.h, Linux 3.10).
pub const ARM_VMSPLIT_3G_LOWMEM: u64 = 0xff00_0000 - (240 << 20) - (8 << 20) - 0xc000_0000;

/// `sysctl_lowmem_reserve_ratio[ZONE_NORMAL]` = 32 (mm/page_alloc.c): lowmem keeps 1/32 of
/// highmem's pages back from allocations that may use highmem.
pub const LOWMEM_RESERVE_RATIO: u64 = 32;

/// Largest highmem min watermark: `clamp(managed / 1024, SWAP_CLUSTER_MAX, 128)`
/// (`__setup_per_zone_wmarks`).
const HIGHMEM_MIN_WMARK_MAX: u64 = 128;

/// One zone's sizes and reserves, in pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Zone {
    /// `managed_pages`.
    pub managed: u64,
    /// `watermark[WMARK_MIN / LOW / HIGH]`.
    pub watermarks: Watermarks,
    /// The largest of `lowmem_reserve[]` (what the zone keeps back from allocations that could
    /// have used a higher zone).
    pub lowmem_reserve: u64,
    /// `zone->dirty_balance_reserve` (3.10; `zone->totalreserve_pages` from 4.5): the largest
    /// `lowmem_reserve` plus the high watermark, at most the zone's size.
    pub totalreserve: u64,
}

/// The run's zones: lowmem always, highmem on a 32-bit kernel with more RAM than lowmem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Zones {
    /// `ZONE_NORMAL`.
    pub lowmem: Zone,
    /// `ZONE_HIGHMEM`, if the kernel has one.
    pub highmem: Option<Zone>,
    /// `min_free_kbytes` in pages.
    pub min_free_pages: u64,
}

impl Zones {
    /// The zones of `config`: one zone of the managed pages without `lowmem`, as the model
    /// always had; lowmem and highmem with it.
    pub fn new(config: &VmConfig) -> Zones {
        if !config.has_highmem() {
            let managed = config.managed_pages();
            let min_free_pages = min_free_pages(config, managed);
            let watermarks = zone_watermarks(min_free_pages, min_free_pages);
            return Zones {
                lowmem: Zone {
                    managed,
                    watermarks,
                    lowmem_reserve: 0,
                    totalreserve: watermarks.high.min(managed),
                },
                highmem: None,
                min_free_pages,
            };
        }
        let lowmem = config.lowmem / PAGE_SIZE;
        let highmem = config.ram / PAGE_SIZE - lowmem;
        let min_free_pages = min_free_pages(config, lowmem);
        // __setup_per_zone_wmarks: tmp = pages_min x managed / lowmem_pages.
        let lowmem_marks = zone_watermarks(min_free_pages, min_free_pages);
        let highmem_tmp = min_free_pages * highmem / lowmem;
        let highmem_min = (highmem / 1024).clamp(SWAP_CLUSTER_MAX as u64, HIGHMEM_MIN_WMARK_MAX);
        let highmem_marks = Watermarks {
            min: highmem_min,
            low: highmem_min + highmem_tmp / 4,
            high: highmem_min + highmem_tmp / 2,
        };
        let lowmem_reserve = highmem / LOWMEM_RESERVE_RATIO;
        Zones {
            lowmem: Zone {
                managed: lowmem,
                watermarks: lowmem_marks,
                lowmem_reserve,
                totalreserve: (lowmem_reserve + lowmem_marks.high).min(lowmem),
            },
            highmem: Some(Zone {
                managed: highmem,
                watermarks: highmem_marks,
                lowmem_reserve: 0,
                totalreserve: highmem_marks.high.min(highmem),
            }),
            min_free_pages,
        }
    }

    /// The watermarks of the model's single allocator zone: the sum of the zones' (kswapd
    /// keeps reclaiming until every zone is above its own high watermark). Without highmem,
    /// lowmem's.
    pub fn allocator_watermarks(&self) -> Watermarks {
        let mut marks = self.lowmem.watermarks;
        if let Some(high) = &self.highmem {
            marks.min += high.watermarks.min;
            marks.low += high.watermarks.low;
            marks.high += high.watermarks.high;
        }
        marks
    }

    /// `totalreserve_pages` (3.10: `dirty_balance_reserve`): the zones' reserves summed.
    pub fn totalreserve(&self) -> u64 {
        self.lowmem.totalreserve + self.highmem.map_or(0, |zone| zone.totalreserve)
    }

    /// Highmem's share of `pages` (asm: in proportion to its size; see the module).
    fn highmem_share(&self, pages: u64) -> u64 {
        self.highmem.map_or(0, |high| {
            let total = u128::from(self.lowmem.managed + high.managed);
            (u128::from(pages) * u128::from(high.managed) / total) as u64
        })
    }

    /// `global_dirtyable_memory` of `version`, given the free pages and the file LRU pages.
    ///
    /// 3.10 (3.10.9, the Galaxy S5's): `x = free + file LRU`, less `dirty_balance_reserve`;
    /// unless `highmem_is_dirtyable`, less `highmem_dirtyable_memory(x)`: highmem's free + LRU
    /// pages less its reserve, not below 0 (c8b74c2f6604 "mm: fix calculation of dirtyable
    /// memory", 3.8) and at most `x`; less `min_free_kbytes` (75f7ad8e043d "page-writeback.c:
    /// subtract min_free_kbytes from dirtyable memory", 3.9); plus 1.
    ///
    /// Later ([`KernelVersion::dirtyable_reserve_from_free_pages`]): the reserve comes off the
    /// free pages only, then the file LRU is added (a804552b9a15 "mm/page-writeback.c: fix
    /// dirty_balance_reserve subtraction from dirtyable memory", 3.14), highmem's likewise (its
    /// high watermark off its free pages, 4.8's `highmem_dirtyable_memory`), and
    /// `min_free_kbytes` is no longer subtracted (gone by 4.4: the watermarks it sets are
    /// already in `totalreserve_pages`). A cache that fills memory (free pages below the
    /// reserve) thus keeps all of its pages dirtyable.
    pub fn global_dirtyable_memory(
        &self,
        free: u64,
        lru: u64,
        highmem_is_dirtyable: bool,
        version: KernelVersion,
    ) -> u64 {
        if version.dirtyable_reserve_from_free_pages() {
            let mut x = free - free.min(self.totalreserve()) + lru;
            if !highmem_is_dirtyable {
                if let Some(high) = &self.highmem {
                    let (free_h, lru_h) = (self.highmem_share(free), self.highmem_share(lru));
                    let dirtyable_h = free_h - free_h.min(high.watermarks.high) + lru_h;
                    x -= x.min(dirtyable_h);
                }
            }
            return x + 1;
        }
        let mut x = free + lru;
        x -= x.min(self.totalreserve());
        if !highmem_is_dirtyable {
            if let Some(high) = &self.highmem {
                let dirtyable_h = self
                    .highmem_share(free + lru)
                    .saturating_sub(high.totalreserve);
                x -= x.min(dirtyable_h);
            }
        }
        x -= x.min(self.min_free_pages);
        x + 1
    }
}

/// `min_free_kbytes` in pages: `[stack.vm] min_free`, or `init_per_zone_wmark_min`'s
/// `int_sqrt(lowmem_kbytes x 16)` clamped to 128..65536 KiB, of `lowmem_pages`.
fn min_free_pages(config: &VmConfig, lowmem_pages: u64) -> u64 {
    let min_kib = if config.min_free > 0 {
        config.min_free / 1024
    } else {
        let lowmem_kib = lowmem_pages * PAGE_SIZE / 1024;
        ((lowmem_kib * 16) as f64)
            .sqrt()
            .floor()
            .clamp(128.0, 65536.0) as u64
    };
    (min_kib * 1024 / PAGE_SIZE).max(1)
}

/// A lowmem zone's watermarks: min = its share `tmp` of `pages_min`, low = min + tmp / 4, high
/// = min + tmp / 2.
fn zone_watermarks(min: u64, tmp: u64) -> Watermarks {
    Watermarks {
        min,
        low: min + tmp / 4,
        high: min + tmp / 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn galaxy_s5() -> VmConfig {
        VmConfig {
            ram: 2 << 30,
            lowmem: ARM_VMSPLIT_3G_LOWMEM,
            ..VmConfig::default()
        }
    }

    #[test]
    fn arm_3g_split_leaves_760_mib_of_lowmem() {
        assert_eq!(ARM_VMSPLIT_3G_LOWMEM, 760 * MIB);
    }

    #[test]
    fn without_highmem_the_zone_is_the_old_single_zone() {
        let config = VmConfig::default();
        let zones = Zones::new(&config);
        assert!(zones.highmem.is_none());
        // 2 GiB: int_sqrt(2 GiB in KiB x 16) = 5792 KiB = 1448 pages; low = min x 5/4, high =
        // min x 3/2, and the reserve is the high watermark.
        assert_eq!(zones.min_free_pages, 1448);
        let marks = Watermarks {
            min: 1448,
            low: 1810,
            high: 2172,
        };
        assert_eq!(zones.allocator_watermarks(), marks);
        assert_eq!(zones.totalreserve(), marks.high);
    }

    #[test]
    fn setup_per_zone_wmarks_and_lowmem_reserve_3_10_on_a_2_gib_32_bit_phone() {
        // __setup_per_zone_wmarks, setup_per_zone_lowmem_reserve and
        // calculate_totalreserve_pages of Linux 3.10 with 760 MiB of lowmem and 1288 MiB of
        // highmem.
        let zones = Zones::new(&galaxy_s5());
        let (low, high) = (zones.lowmem, zones.highmem.unwrap());
        assert_eq!((low.managed, high.managed), (194_560, 329_728));
        // min_free_kbytes from lowmem only: int_sqrt(778240 x 16) = 3528 KiB = 882 pages.
        assert_eq!(zones.min_free_pages, 882);
        assert_eq!(
            low.watermarks,
            Watermarks {
                min: 882,
                low: 1102,
                high: 1323
            }
        );
        // Highmem: min = clamp(329728 / 1024, 32, 128) = 128; tmp = 882 x 329728 / 194560
        // = 1494.
        assert_eq!(
            high.watermarks,
            Watermarks {
                min: 128,
                low: 128 + 373,
                high: 128 + 747
            }
        );
        assert_eq!(low.lowmem_reserve, 329_728 / 32);
        assert_eq!(low.totalreserve, 10_304 + 1323);
        assert_eq!(high.totalreserve, 875);
    }

    #[test]
    fn global_dirtyable_memory_3_10_leaves_highmem_out_unless_it_is_dirtyable() {
        // Linux 3.10 global_dirtyable_memory, vm_highmem_is_dirtyable = 0: free + file pages
        // of lowmem, less lowmem's dirty_balance_reserve and min_free_kbytes.
        let config = galaxy_s5();
        let zones = Zones::new(&config);
        let all = config.managed_pages();
        let (free, lru) = (all / 4, all - all / 4);
        let lowmem_only = zones.global_dirtyable_memory(free, lru, false, KernelVersion::V3_10);
        assert_eq!(lowmem_only, 194_560 - (10_304 + 1323) - 882 + 1);
        let everything = zones.global_dirtyable_memory(free, lru, true, KernelVersion::V3_10);
        assert_eq!(everything, all - zones.totalreserve() - 882 + 1);
        assert!(everything > 2 * lowmem_only);
    }

    #[test]
    fn global_dirtyable_memory_from_3_14_keeps_a_full_cache_dirtyable() {
        // With memory full of page cache (free pages below the reserve), 3.10 subtracts the
        // reserve and min_free_kbytes from the cache; later kernels take the reserve off the
        // free pages only (a804552b9a15) and no longer subtract min_free_kbytes.
        let zones = Zones::new(&VmConfig::default());
        let all = VmConfig::default().managed_pages();
        let free = zones.allocator_watermarks().low;
        let lru = all - free;
        let old = zones.global_dirtyable_memory(free, lru, false, KernelVersion::V3_10);
        let new = zones.global_dirtyable_memory(free, lru, false, KernelVersion::V5_10);
        assert_eq!(old, all - zones.totalreserve() - zones.min_free_pages + 1);
        assert_eq!(new, lru + 1);
        // With highmem, later kernels leave out highmem's share less its high watermark.
        let zones = Zones::new(&galaxy_s5());
        let new = zones.global_dirtyable_memory(0, all, false, KernelVersion::V5_10);
        assert_eq!(new, all - all * 329_728 / 524_288 + 1);
    }
}
