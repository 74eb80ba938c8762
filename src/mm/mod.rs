//! Memory management: the page cache, writeback, dirty throttling, the page allocator and
//! reclaim, modelled on Linux 3.10 (the kernel the papers patched).
//!
//! - this file: [`VmConfig`], the page table of the page cache (one compact [`Page`] per cached
//!   page, per-inode [`Mapping`]s, the active and inactive LRU lists) and the page-flag waits
//!   (`lock_page`, `wait_on_page_writeback`) on per-page wait queues that exist only while
//!   someone waits (Linux hashes pages onto shared queues and filters wakers by page and bit,
//!   `wake_bit_function`; the effect, only that page's waiters wake, is the same);
//! - [`filemap`]: reads with readahead, buffered writes (`generic_perform_write`), the sync
//!   write-and-wait of fsync (`filemap_write_and_wait_range`), truncation (mm/filemap.c,
//!   mm/readahead.c, mm/truncate.c);
//! - [`writeback`]: dirty limits, `balance_dirty_pages`, the flusher (`wb_do_writeback`,
//!   `wb_writeback`, `write_cache_pages`) (mm/page-writeback.c, fs/fs-writeback.c);
//! - [`vmscan`]: the page allocator, watermarks, direct reclaim and kswapd as 3.10 does them
//!   (no lock across reclaim, direct reclaim does not write file pages), `shrink_page_list` with
//!   a swappable [`vmscan::ReclaimPolicy`], and FastTrack §3.2's global page-cache lock as the
//!   option `page_cache_lock = "global"` (mm/vmscan.c, mm/page_alloc.c);
//! - [`bio`]: the boundary with the block layer.
//!
//! Simplifications (each submodule lists its own):
//! - Pages are metadata (DESIGN.md principle 6): a [`Page`] is 32 bytes of flags, owner and LRU
//!   links in one slab; file contents, for files that ask for them, live in the VFS inode.
//! - One memory zone, page-cache pages only: anonymous memory, slab and the kernel are a fixed
//!   `reserved` amount of RAM; no swap, no mmap, so no mapped pages and no page-table references.
//! - Invariant kept: a page is never dirty and under writeback at once. Linux allows it (a page
//!   redirtied while written); here every writer waits for writeback first (3.10.9 ext4's
//!   `ext4_da_write_begin` calls `wait_on_page_writeback` unconditionally), so the case cannot
//!   arise and is asserted against.

pub mod bio;
pub mod buffer;
pub mod check;
pub mod crashlog;
pub mod filemap;
pub mod radix;
pub mod vmscan;
pub mod writeback;
pub mod zones;

#[cfg(test)]
mod tests;

use crate::errno::Errno;
use crate::kernel::{CpuConfig, Hz, KernelVersion};
use crate::sim::cpu::Cpu;
use crate::sim::sync::{Mutex, WaitQueue};
use crate::sim::{Blocker, Sim, TaskId, WaitReason, WakeToken};
use crate::task::ForegroundState;
use crate::units::{serde_units, Nanos, NS_PER_MS, NS_PER_SEC, PAGE_SIZE};
use serde::{Deserialize, Serialize};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::task::{Context, Poll};

pub use bio::{BioRequest, BlockSubmit, IoAccount, IoCause, IoPurpose, PageSpan};

// ---------------------------------------------------------------------------------------------
// What the page cache needs from the file system
// ---------------------------------------------------------------------------------------------

/// Inode number of a mapping's host (`mapping->host->i_ino`).
pub type Ino = u64;

/// What the page cache asks of the file system that owns a mapping: the block-mapping half of
/// Linux's `address_space_operations` (`get_block`, called from `readpage`, `write_begin` and
/// `writepage`). The page cache defines it and file systems implement it, so `mm` does not
/// depend on `fs` (DESIGN.md, layering). Implementations are pure state: no waiting.
pub trait AddressSpaceOps {
    /// `get_block`: the disk block (4 KiB) of page `index` of `ino`, allocating one when
    /// `create` (`ENOSPC` when the disk is full). `Ok(None)` is a hole.
    fn get_block(&mut self, ino: Ino, index: u64, create: bool) -> Result<Option<u64>, Errno>;
    /// `get_block` without create over a run (`ext4_map_blocks` with a length): the block of
    /// page `index` of `ino` (`None`: a hole) and how many pages from `index` on, at least
    /// one, map the same way: to the blocks that follow it, or into the same hole. The answer
    /// holds until the file system next allocates, frees or moves blocks of `ino`; writeback
    /// keeps it only while it does not sleep, and across `FsHooks::remap_for_writeback`,
    /// so a file system whose remap moves blocks answers one page at a time. Default:
    /// `get_block` for one page.
    fn map_extent(&mut self, ino: Ino, index: u64) -> (Option<u64>, u64) {
        let block = self
            .get_block(ino, index, false)
            .expect("a lookup without create cannot fail");
        (block, 1)
    }
}

/// The file system's answer to "what does metadata block `block` hold?" (installed with
/// [`Mm::set_meta_classifier`]).
pub type MetaClassifier = Rc<dyn Fn(u64) -> bio::IoPurpose>;

/// What a journaling file system's run-time checks see of the page cache's writes (installed
/// with [`Mm::set_write_observer`]; the page cache cannot import the file system).
pub trait WriteObserver {
    /// A write of the block device's pages `[block, block + count)` (metadata buffers going
    /// home: the flusher's, reclaim's or a checkpoint's) is being submitted.
    fn home_write(&self, sim: &Sim, block: u64, count: u64);
    /// Pages `[index, index + count)` of file `ino` reached the device (their writeback ended)
    /// or left the cache unwritten (truncated).
    fn data_settled(&self, ino: Ino, index: u64, count: u64);
}

/// Inode number of the block device's own mapping (`bdev->bd_inode`): its page `i` is disk
/// block `i`. Metadata buffers of a journaling file system live there ([`buffer`]). No file
/// system hands out this number (ext4's and simplefs's inode numbers are far below it).
pub const BDEV_INO: Ino = u64::MAX - 1;

/// An opaque value a [`FsHooks`] method hands back to the page cache to be returned to the file
/// system later (a jbd2 handle held across a write or a writeback batch).
pub type FsToken = Box<dyn std::any::Any>;

/// The asynchronous half of `address_space_operations` for a file system with a journal and
/// delayed allocation (ext4's `ext4_da_write_begin` / `ext4_da_write_end` / `ext4_da_writepages`
/// / `ext4_da_get_block_prep`): calls that take journal handles and may wait. A file system
/// without them (simplefs) allocates in `get_block(create)` at write time and sets no hooks.
pub trait FsHooks {
    /// `write_begin` before the page is grabbed: ext4 starts a handle (`ext4_journal_start`),
    /// which may wait for a committing transaction (QASIO's I_jhandle).
    fn write_begin<'a>(&'a self, sim: &'a Sim, ino: Ino) -> bio::LocalBoxFuture<'a, FsToken>;
    /// [`FsHooks::write_begin`] when it need not wait; `None` sends the caller to
    /// [`FsHooks::write_begin`] (which then does the same, waits included). A fast path: the
    /// result must be what `write_begin` would give. Default: always `None`.
    fn write_begin_now(&self, _sim: &Sim, _ino: Ino) -> Option<FsToken> {
        None
    }
    /// `ext4_da_get_block_prep` for a page with no block: reserves one for delayed allocation
    /// (`ENOSPC` when the disk is full counting earlier reservations).
    fn reserve(&self, ino: Ino, index: u64) -> Result<(), Errno>;
    /// `write_end` after the page is dirty and unlocked: `reserved` when the page took a new
    /// reservation, `new_size` when the write grew the file (ext4 journals the inode).
    fn write_end<'a>(
        &'a self,
        sim: &'a Sim,
        token: FsToken,
        ino: Ino,
        reserved: bool,
        new_size: Option<u64>,
    ) -> bio::LocalBoxFuture<'a, ()>;
    /// [`FsHooks::write_end`] when nothing in it waits; gives the token back, nothing changed,
    /// when something would (the caller then calls [`FsHooks::write_end`]). A fast path: the
    /// result must be what `write_end` would give. Default: always gives it back.
    fn write_end_now(
        &self,
        _sim: &Sim,
        token: FsToken,
        _ino: Ino,
        _reserved: bool,
        _new_size: Option<u64>,
    ) -> Result<(), FsToken> {
        Err(token)
    }
    /// [`FsHooks::write_end_now`], then, with `begin_next`, [`FsHooks::write_begin_now`] for
    /// the next page of the same write, with nothing in between (the same task, the same
    /// instant): `Ok(Some(token))` is the next page's token, `Ok(None)` an ended write (the
    /// caller begins the next page as usual), `Err` as [`FsHooks::write_end_now`]. A fast
    /// path: the result must be what the two calls would give. Default: the end alone.
    fn write_end_then_begin_now(
        &self,
        sim: &Sim,
        token: FsToken,
        ino: Ino,
        reserved: bool,
        new_size: Option<u64>,
        _begin_next: bool,
    ) -> Result<Option<FsToken>, FsToken> {
        self.write_end_now(sim, token, ino, reserved, new_size)
            .map(|()| None)
    }
    /// `ext4_da_writepages`, one batch: starts a handle and allocates blocks for `unmapped`
    /// (runs of (first page, pages) with no block yet); the page cache then writes the batch
    /// and ends it with [`FsHooks::writepages_end`], so the handle is held across submission.
    fn writepages_begin<'a>(
        &'a self,
        sim: &'a Sim,
        issuer: Issuer,
        ino: Ino,
        unmapped: Vec<(u64, u64)>,
    ) -> bio::LocalBoxFuture<'a, Result<FsToken, Errno>>;
    /// Stops the batch's handle.
    fn writepages_end<'a>(&'a self, sim: &'a Sim, token: FsToken) -> bio::LocalBoxFuture<'a, ()>;
    /// Whether [`FsHooks::writepages_end`] comes before the batch's last bio is submitted
    /// (ext4 from Linux 3.11: `ext4_journal_stop` before the final `ext4_io_submit`) rather
    /// than after every bio (3.10). Default: after.
    fn stops_writepages_handle_before_final_submit(&self) -> bool {
        false
    }
    /// Whether file data is journaled (ext4 `data=journal`): then a written page is not marked
    /// dirty; [`FsHooks::journal_page`] hands its block to the journal instead.
    fn journals_data(&self) -> bool {
        false
    }
    /// `ext4_journalled_write_end`: the page's block (allocated now if it has none) joins the
    /// handle's transaction as a journaled buffer. Returns the (possibly restarted) handle.
    fn journal_page<'a>(
        &'a self,
        _sim: &'a Sim,
        token: FsToken,
        _issuer: Issuer,
        _ino: Ino,
        _index: u64,
    ) -> bio::LocalBoxFuture<'a, FsToken> {
        Box::pin(async move { token })
    }
    /// A log-structured file system's out-of-place write (F2FS's `f2fs_outplace_write_data`):
    /// called for each dirty page as writeback takes it, before its block is looked up, so
    /// the file system can give the page a new block (and free the old one). Default: the
    /// page keeps its block.
    fn remap_for_writeback(&self, _sim: &Sim, _issuer: Issuer, _ino: Ino, _index: u64) {}
    /// Whether the file system takes the dirty page's data without block I/O (F2FS's
    /// `f2fs_write_inline_data`: a small file's data lives in its inode block); the page is
    /// then clean. Default: no.
    fn absorb_for_writeback(&self, _ino: Ino, _index: u64) -> bool {
        false
    }
    /// Whether writeback must leave `ino`'s dirty pages alone for now (F2FS's atomic-write
    /// files keep their pages in memory until the commit ioctl writes them).
    fn holds_back_writeback(&self, _ino: Ino) -> bool {
        false
    }
    /// Linux 3.10's `ext4_da_writepages` bump: a cyclic or partial-range writeback raises its
    /// `nr_to_write` to the inode's run of contiguous dirty delayed pages from where it starts
    /// (`ext4_num_dirty_pages`), at most this many pages (`s_max_writeback_mb_bump`), and
    /// takes the bump back off when it returns. 0: no bump (the default; ext4 from 3.11 on,
    /// F2FS).
    fn writeback_bump_pages(&self) -> u64 {
        0
    }
    /// The completion of a writeback bio of file pages `span`: whether the file system ends
    /// the pages' writeback itself, later, by calling [`Mm::end_writeback_span`] on `mm` (ext4
    /// writing into unwritten extents: `ext4_end_bio` leaves `ext4_finish_bio` to the
    /// conversion work, `ext4_end_io_rsv_work`). Default: no, the page cache ends it now.
    fn defers_end_writeback(&self, _sim: &Sim, _span: bio::PageSpan, _mm: &Rc<Mm>) -> bool {
        false
    }
}

// ---------------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------------

/// Which reclaim order [`vmscan`] uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReclaimPolicyKind {
    /// Linux: oldest inactive pages first, clean pages before dirty ones.
    #[default]
    Linux,
    /// FastTrack §4.3's page reclaimer: BG clean > BG dirty > FG clean > FG dirty
    /// (`[stack.fasttrack] pr = true` selects it).
    Fasttrack,
}

/// Which locking model the page allocator follows (`[stack.vm] page_cache_lock`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PageCacheLock {
    /// Linux 3.10 (mm/page_alloc.c, mm/vmscan.c): `zone->lock` and `lru_lock` held briefly,
    /// nothing held across reclaim's I/O; direct reclaim does not write file pages (only
    /// kswapd does, asynchronously, under pressure) and stalls in `congestion_wait` /
    /// `throttle_direct_reclaim`.
    #[default]
    Linux,
    /// FastTrack §3.2's description: a global page-cache lock taken by every allocation and
    /// held across reclaim (which writes dirty pages and waits for them) and by every
    /// `copy_from_user` / `copy_to_user`.
    Global,
}

/// The VM knobs of one run (`/proc/sys/vm/*` and the machine's RAM). Scenario table
/// `[stack.vm]`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct VmConfig {
    /// Physical memory. Default 2 GiB (Galaxy S5, QASIO's phone; Nexus 5 has 2 GB too).
    #[serde(with = "serde_units::size")]
    pub ram: u64,
    /// Memory that the page cache cannot use (kernel, apps' anonymous memory). Default 0.
    #[serde(with = "serde_units::size")]
    pub reserved: u64,
    /// Lowmem (`ZONE_NORMAL`) of a 32-bit kernel: RAM above it is highmem (`ZONE_HIGHMEM`),
    /// which the dirty limits leave out unless `highmem_is_dirtyable` ([`zones`]). A 32-bit
    /// ARM kernel with `CONFIG_VMSPLIT_3G` and the default 240 MiB vmalloc area has 760 MiB
    /// (`vmalloc_min`, arch/arm/mm/mmu.c; [`zones::ARM_VMSPLIT_3G_LOWMEM`]); a `vmalloc=` on
    /// the kernel command line moves it. Default 0: no highmem (a 64-bit kernel), as is a
    /// value of `ram` or more (all RAM below the split).
    #[serde(with = "serde_units::size")]
    pub lowmem: u64,
    /// `vm.highmem_is_dirtyable` (`vm_highmem_is_dirtyable`, mm/page-writeback.c): whether
    /// highmem counts in the dirtyable memory the dirty ratios apply to. Default false, the
    /// kernel's (0).
    pub highmem_is_dirtyable: bool,
    /// `dirty_expire_centisecs`: 3000 = 30 s (mm/page-writeback.c); Android of the QASIO era
    /// 200 = 2 s (QASIO §6).
    #[serde(with = "serde_units::duration")]
    pub dirty_expire: Nanos,
    /// `dirty_writeback_centisecs`: 500 = 5 s (mm/page-writeback.c): the flusher's period.
    #[serde(with = "serde_units::duration")]
    pub dirty_writeback_interval: Nanos,
    /// `dirty_background_ratio`: 10 % of dirtyable memory (mm/page-writeback.c); Android 5 %
    /// (QASIO §6).
    pub dirty_background_ratio: u32,
    /// `dirty_background_bytes`: overrides the ratio when non-zero. Default 0.
    #[serde(with = "serde_units::size")]
    pub dirty_background_bytes: u64,
    /// `dirty_ratio`: 20 % (mm/page-writeback.c; Android keeps the kernel default).
    pub dirty_ratio: u32,
    /// `dirty_bytes`: overrides the ratio when non-zero. Default 0.
    #[serde(with = "serde_units::size")]
    pub dirty_bytes: u64,
    /// Longest single `balance_dirty_pages` pause: `MAX_PAUSE` = HZ/5 = 200 ms
    /// (mm/page-writeback.c; LWN 456904).
    #[serde(with = "serde_units::duration")]
    pub max_pause: Nanos,
    /// `read_ahead_kb`: 128 KiB (`VM_MAX_READAHEAD`, include/linux/mm.h).
    #[serde(with = "serde_units::size")]
    pub read_ahead: u64,
    /// `min_free_kbytes`; 0 = the kernel's formula sqrt(16 x lowmem KiB), clamped to
    /// 128 KiB..64 MiB (`init_per_zone_wmark_min`, mm/page_alloc.c).
    #[serde(with = "serde_units::size")]
    pub min_free: u64,
    /// Reclaim order.
    pub reclaim_policy: ReclaimPolicyKind,
    /// The allocation path's locking model. `linux` (default) is Linux 3.10's code: no global
    /// allocator lock, direct reclaim never writes file pages and holds nothing across I/O.
    /// `global` is FastTrack §3.2's description of it: one global page-cache lock held across
    /// allocation, reclaim (direct reclaim writes dirty pages and waits for them) and the
    /// `copy_from_user` / `copy_to_user` of each page.
    pub page_cache_lock: PageCacheLock,
    /// Clean file pages of other apps in the page cache when the run starts, in bytes: a phone
    /// in use runs with its memory full (the page cache grows until kswapd holds free memory
    /// at the zone's watermarks), not with an empty cache. They belong to one file,
    /// `/.cached-apps` (UID 1000, `AID_SYSTEM`), sit on the inactive list and are read by
    /// nobody; filling stops at the high watermark. Default 0 (the run starts with the page
    /// cache empty).
    #[serde(with = "serde_units::size")]
    pub cached: u64,
    /// Removed: `direct_reclaim_writes = true` was FastTrack's allocation path, now
    /// `page_cache_lock = "global"`; `false` was 3.10's, now the default `"linux"`. Accepted
    /// only to say so.
    #[serde(default, skip_serializing)]
    pub direct_reclaim_writes: Option<bool>,
}

impl Default for VmConfig {
    /// Linux defaults (mm/page-writeback.c, mm/page_alloc.c).
    fn default() -> Self {
        VmConfig {
            ram: 2 << 30,
            reserved: 0,
            lowmem: 0,
            highmem_is_dirtyable: false,
            dirty_expire: 30 * NS_PER_SEC,
            dirty_writeback_interval: 5 * NS_PER_SEC,
            dirty_background_ratio: 10,
            dirty_background_bytes: 0,
            dirty_ratio: 20,
            dirty_bytes: 0,
            max_pause: 200 * NS_PER_MS,
            read_ahead: 128 << 10,
            min_free: 0,
            reclaim_policy: ReclaimPolicyKind::Linux,
            page_cache_lock: PageCacheLock::Linux,
            cached: 0,
            direct_reclaim_writes: None,
        }
    }
}

impl VmConfig {
    /// Android of the QASIO era: `dirty_expire_centisecs` 200 and `dirty_background_ratio` 5
    /// (QASIO §6, set by Android's init.rc), the rest Linux defaults.
    pub fn android() -> Self {
        VmConfig {
            dirty_expire: 2 * NS_PER_SEC,
            dirty_background_ratio: 5,
            ..VmConfig::default()
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.ram < 16 << 20 {
            return Err(format!("vm `ram` must be at least 16MiB, not {}", self.ram));
        }
        if self.lowmem != 0 && self.lowmem < 16 << 20 {
            return Err(format!(
                "vm `lowmem` must be at least 16MiB (or 0: no highmem), not {} bytes",
                self.lowmem
            ));
        }
        if self.reserved + (8 << 20) > self.ram {
            return Err("vm `reserved` must leave at least 8MiB of `ram` to the page cache".into());
        }
        if self.dirty_ratio == 0 || self.dirty_ratio > 100 || self.dirty_background_ratio > 100 {
            return Err("vm dirty ratios must be percentages, dirty_ratio above 0".into());
        }
        if self.max_pause == 0 {
            return Err("vm `max_pause` must be positive".into());
        }
        if self.cached > self.ram - self.reserved {
            return Err(format!(
                "vm `cached` ({} bytes) must fit in the page cache: `ram` - `reserved` = {} bytes",
                self.cached,
                self.ram - self.reserved
            ));
        }
        if let Some(writes) = self.direct_reclaim_writes {
            let instead = if writes { "global" } else { "linux" };
            return Err(format!(
                "vm `direct_reclaim_writes` was removed: write `page_cache_lock = \"{instead}\"` \
                 (\"linux\": 3.10, direct reclaim never writes file pages; \"global\": FastTrack \
                 §3.2, one lock across allocation, reclaim and copies, direct reclaim writes and \
                 waits for dirty pages)"
            ));
        }
        Ok(())
    }

    /// Pages the page cache may use.
    pub fn managed_pages(&self) -> u64 {
        (self.ram - self.reserved) / PAGE_SIZE
    }

    /// Whether the kernel has a highmem zone: `lowmem` set and below `ram`.
    pub fn has_highmem(&self) -> bool {
        self.lowmem != 0 && self.lowmem / PAGE_SIZE < self.ram / PAGE_SIZE
    }
}

// ---------------------------------------------------------------------------------------------
// Pages
// ---------------------------------------------------------------------------------------------

/// Index of a page in the page slab.
pub type PageId = u32;
const NIL: PageId = u32::MAX;

/// Page flags (include/linux/page-flags.h), as bits of [`Page::flags`].
pub mod pg {
    /// `PG_locked`: I/O or a writer owns the page.
    pub const LOCKED: u16 = 1 << 0;
    /// `PG_uptodate`: the contents are valid.
    pub const UPTODATE: u16 = 1 << 1;
    /// `PG_dirty`: modified since last written.
    pub const DIRTY: u16 = 1 << 2;
    /// `PG_writeback`: being written to disk.
    pub const WRITEBACK: u16 = 1 << 3;
    /// `PG_referenced`: accessed since last scanned.
    pub const REFERENCED: u16 = 1 << 4;
    /// `PG_active`: on the active LRU list.
    pub const ACTIVE: u16 = 1 << 5;
    /// `PG_reclaim`: reclaim wants it once writeback ends (`rotate_reclaimable_page`).
    pub const RECLAIM: u16 = 1 << 6;
    /// `PG_readahead`: reaching this page triggers asynchronous readahead.
    pub const READAHEAD: u16 = 1 << 7;
    /// The journal holds a reference to the page's buffer (`jh` / `b_count`): reclaim cannot
    /// free it (`try_to_release_page` fails). Block-device pages only.
    pub const PINNED: u16 = 1 << 8;
    /// Dirtied while its write was in flight: Linux lets a buffer be dirty and under write at
    /// once (`mark_buffer_dirty` during `end_buffer_async_write`'s wait) and writes it again;
    /// here the page becomes dirty when that write ends. Block-device pages only.
    pub const REDIRTY: u16 = 1 << 9;
    /// A task waits on the page's wait queue (mainline's `PG_waiters`, Linux 4.10; 3.10 has no
    /// such bit): unlocking a page without it skips the queue lookup. A simulator speed-up
    /// only: a page whose bit is clear has no queue (debug builds check at every unlock).
    pub const WAITERS: u16 = 1 << 10;
}

/// Wait queues of pages, by (inode, index): hashed with the simulation's fixed id hasher.
type PageWaitQueues = std::collections::HashMap<
    (Ino, u64),
    WaitQueue,
    std::hash::BuildHasherDefault<crate::sim::idmap::IdHasher>,
>;

/// One cached page: 32 bytes, no heap.
#[derive(Debug, Clone, Copy)]
pub struct Page {
    pub ino: Ino,
    pub index: u64,
    pub flags: u16,
    /// Which LRU list the page is on.
    lru: Lru,
    /// The app (UID) that owns the page (FastTrack's page owner): the one that brought it in,
    /// or under `[stack.fasttrack] page_owner = "last"` the last to read or write it
    /// ([`Mm::touch_owner`]).
    pub uid: u32,
    prev: PageId,
    next: PageId,
}

impl Page {
    pub fn has(&self, flag: u16) -> bool {
        self.flags & flag != 0
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Lru {
    None = 0,
    Inactive = 1,
    Active = 2,
}

/// An intrusive doubly-linked LRU list over the slab: `head` is the most recently added page,
/// `tail` the oldest (Linux adds at the head and reclaims from the tail).
#[derive(Debug, Clone, Copy)]
struct LruList {
    head: PageId,
    tail: PageId,
    len: u64,
}

impl Default for LruList {
    fn default() -> Self {
        LruList {
            head: NIL,
            tail: NIL,
            len: 0,
        }
    }
}

/// The pages of one inode (`struct address_space`), with the dirty and writeback tags of its
/// radix tree as ordered sets of page indexes ([`radix`]).
#[derive(Debug, Default)]
pub struct Mapping {
    pub pages: radix::RadixMap<PageId>,
    /// `PAGECACHE_TAG_DIRTY`.
    pub dirty: radix::RadixSet,
    /// `PAGECACHE_TAG_WRITEBACK`, with the block request carrying each page (0 until its bio is
    /// submitted), so a wait on the page can name the request (QASIO's dependency on an async
    /// request; `elv_boost` needs the same link).
    pub writeback: radix::RadixMap<u64>,
    /// Pages locked for a read in flight, with the block request reading each, so a wait on
    /// the locked page can name the request (the kernel finds it through the page's bio).
    pub reading: radix::RadixMap<u64>,
    /// `inode->dirtied_when` in jiffies: when the inode went from clean to dirty (valid while
    /// it is on a writeback list).
    pub dirtied_when: u64,
    /// Which writeback list the inode is on (`inode->i_wb_list`).
    pub wb_list: WbList,
    /// `mapping->writeback_index`: where cyclic writeback resumes.
    pub writeback_index: u64,
}

/// The writeback list an inode with dirty pages is on (fs/fs-writeback.c): `b_dirty` until the
/// flusher queues it, `b_io` while queued for this pass, `b_more_io` when its slice was used up
/// and it waits for its next turn; `Sync` while the flusher writes it (`I_SYNC`: off the lists,
/// its dirty state only recorded).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum WbList {
    #[default]
    None,
    Dirty,
    Io,
    MoreIo,
    Sync,
}

/// Counters of the memory-management layer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MmStats {
    pub pages_dirtied: u64,
    pub pages_written_async: u64,
    pub pages_written_sync: u64,
    /// Pages of files (not the block device's buffers) written, sync or async: the app data
    /// that writeback and fsync flushed (MobiFS §7.5 compares this "data flushed").
    pub file_pages_written: u64,
    pub pages_read: u64,
    pub readahead_pages: u64,
    pub reclaimed_clean: u64,
    pub reclaimed_dirty: u64,
    pub direct_reclaims: u64,
    /// Dirty pages written by direct reclaim (`pageout` from an allocating task).
    pub pageout_direct: u64,
    /// Dirty pages written by kswapd.
    pub pageout_kswapd: u64,
    /// Dirty pages a direct reclaimer found and left to the flusher (`PG_reclaim` set, page
    /// kept): 3.10's "Only kswapd can writeback filesystem pages".
    pub direct_reclaim_dirty_kept: u64,
    pub kswapd_runs: u64,
    pub throttle_pauses: u64,
    pub throttle_ns: u64,
    pub write_stable_waits: u64,
    pub flusher_kupdate_pages: u64,
    pub flusher_background_pages: u64,
    /// Pages the flusher wrote because reclaim asked (`wakeup_flusher_threads`).
    pub flusher_reclaim_pages: u64,
    /// High-water mark of dirty + writeback pages.
    pub max_dirty_writeback: u64,
    /// Direct reclaimers throttled in `throttle_direct_reclaim`.
    pub direct_throttles: u64,
    /// `congestion_wait`s of reclaim (`too_many_isolated`, `throttle_vm_writeout`).
    pub congestion_waits: u64,
    /// Allocations served from the reserve below the min watermark (no OOM killer).
    pub reserve_allocs: u64,
    /// FastTrack PA: a background holder released the global page-cache lock to a waiting
    /// foreground allocation between reclaim batches.
    pub pa_yields: u64,
}

/// The mutable state of the page cache.
pub struct MmState {
    pages: Vec<Page>,
    free_ids: Vec<PageId>,
    /// Free pages of RAM (managed pages minus cached pages).
    pub nr_free: u64,
    /// Pages taken from the free pool and not yet in the cache (an allocation in progress).
    pub nr_allocating: u64,
    lru: [LruList; 3],
    pub mappings: BTreeMap<Ino, Mapping>,
    /// `wb->b_dirty`: dirty inodes by (dirtied_when in jiffies, ino), oldest first.
    pub b_dirty: BTreeSet<(u64, Ino)>,
    /// `wb->b_io`: inodes queued for the current writeback pass, next to serve first.
    pub b_io: VecDeque<Ino>,
    /// `wb->b_more_io`: inodes that used their slice, in the order they were requeued.
    pub b_more_io: VecDeque<Ino>,
    /// The inode the flusher is writing (`I_SYNC`), if any.
    pub wb_syncing: Option<Ino>,
    /// `NR_FILE_DIRTY`.
    pub nr_dirty: u64,
    /// `NR_WRITEBACK`.
    pub nr_writeback: u64,
    pub stats: MmStats,
    /// The zone's reclaim state (isolated pages, scan count, congestion).
    pub zone: vmscan::ZoneReclaimState,
    /// The device's bandwidth estimate and dirty ratelimit (`struct backing_dev_info`).
    pub bdi: writeback::Bdi,
    /// The last metadata buffer looked up by [`MmState::find_buffer_page`] and its page: the
    /// write path takes the same inode buffer over page after page. Checked against the page
    /// before use (a freed slot has no flags; a reused one another index or inode).
    buffer_memo: (u64, PageId),
}

/// Who performs an operation: the task (for waits and bios), its app and whether that app is in
/// the foreground.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Issuer {
    pub task: Option<TaskId>,
    /// Process id, for the block layer (CFQ keeps a queue per process).
    pub pid: u32,
    pub uid: u32,
    pub foreground: bool,
}

/// Process id of the flusher thread in bios (kernel threads have low pids).
pub const FLUSHER_PID: u32 = 100;
/// Process id of kswapd in bios.
pub const KSWAPD_PID: u32 = 101;

/// The page cache and memory of one run.
pub struct Mm {
    pub(crate) me: Weak<Mm>,
    pub config: VmConfig,
    pub(crate) fs: Rc<RefCell<dyn AddressSpaceOps>>,
    /// The file system's journaled write and writeback paths, if it has them.
    pub(crate) hooks: RefCell<Option<Rc<dyn FsHooks>>>,
    /// What each block of the block device's mapping holds (the file system's metadata kinds),
    /// for the account by purpose; [`bio::IoPurpose::Metadata`] without one.
    meta_purpose: RefCell<Option<MetaClassifier>>,
    /// The file system's checks' view of writes ([`WriteObserver`]).
    write_observer: RefCell<Option<Rc<dyn WriteObserver>>>,
    /// Crash-point checking's recorder ([`crashlog`]), when the run records one.
    crash: RefCell<Option<Rc<crashlog::CrashLog>>>,
    pub(crate) bdev: Rc<dyn BlockSubmit>,
    pub(crate) activity: Option<Rc<ForegroundState>>,
    state: RefCell<MmState>,
    /// Wait queues of pages someone waits on, by (inode, index).
    /// A hash map (never iterated): a page's unlock or end of writeback looks its queue up.
    page_waitqueues: RefCell<PageWaitQueues>,
    /// FastTrack §3.2's global page-cache lock (`page_cache_lock = "global"` only).
    pub(crate) alloc_lock: Mutex,
    /// Direct reclaimers that made no progress wait here for pages to be freed or written.
    pub(crate) free_wait: WaitQueue,
    /// `pgdat->pfmemalloc_wait`: direct reclaimers throttled until kswapd restores free pages
    /// above half the min watermark (`throttle_direct_reclaim`).
    pub(crate) pfmemalloc_wait: WaitQueue,
    pub(crate) kswapd_wake: TimedWake,
    pub(crate) flusher_wake: TimedWake,
    /// The flusher's work list, delayed-work timer and kupdate clock.
    pub(crate) flusher: writeback::FlusherState,
    /// `CONFIG_HZ` of the kernel: the page cache's times are jiffies.
    pub hz: Hz,
    /// `global_dirty_limit`: follows the dirty threshold, slowly when it falls.
    pub(crate) global_dirty_limit: Cell<u64>,
    /// `global_update_bandwidth`'s `update_time` (jiffies).
    pub(crate) global_update_time: Cell<u64>,
    pub(crate) policy: RefCell<Box<dyn vmscan::ReclaimPolicy>>,
    /// FastTrack §4.2's preemptive page allocator (`[stack.fasttrack] pa`).
    pub(crate) fasttrack_pa: Cell<bool>,
    /// `[stack.fasttrack] page_owner = "last"`: a read or write makes its app the page's owner.
    pub(crate) owner_is_last_toucher: Cell<bool>,
    pub(crate) watermarks: vmscan::Watermarks,
    /// The zones the watermarks and the dirty limits are computed over (`[stack.vm] lowmem`).
    pub zones: zones::Zones,
    /// The Linux version whose behaviour the page cache follows where versions differ
    /// (`[stack.kernel] version`; default 3.10): [`Mm::set_kernel_version`].
    kernel_version: Cell<KernelVersion>,
    /// The machine's cores, on which copies and allocations spend time.
    pub cpu: Rc<Cpu>,
    /// What those cost (`[stack.cpu]`).
    pub cpu_costs: CpuConfig,
    flusher_task: Cell<Option<TaskId>>,
    kswapd_task: Cell<Option<TaskId>>,
    /// Whether `generic_perform_write` tries the file system's fast paths first
    /// ([`FsHooks::write_begin_now`], [`FsHooks::write_end_now`]) and its own (the page grab
    /// and the copy with their CPU segments awaited directly); on by default. Results are the
    /// same either way; tests compare the two.
    write_fast_paths: Cell<bool>,
    /// Whether invariants are checked ([`check`]): debug builds, or `--check`.
    checks: Cell<bool>,
    check_count: Cell<u64>,
    violation: RefCell<Option<String>>,
    panic_on_violation: Cell<bool>,
}

impl Mm {
    /// Builds the page cache over `fs` and `bdev` and starts its kernel threads (the flusher
    /// and kswapd).
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        sim: &Sim,
        config: VmConfig,
        hz: Hz,
        fs: Rc<RefCell<dyn AddressSpaceOps>>,
        bdev: Rc<dyn BlockSubmit>,
        activity: Option<Rc<ForegroundState>>,
        cpu: Rc<Cpu>,
        cpu_costs: CpuConfig,
    ) -> Rc<Mm> {
        config.validate().expect("a validated VM configuration");
        cpu_costs.validate().expect("a validated CPU configuration");
        let managed = config.managed_pages();
        let zones = zones::Zones::new(&config);
        let watermarks = zones.allocator_watermarks();
        let policy = vmscan::policy_for(config.reclaim_policy);
        let mm = Rc::new_cyclic(|me| Mm {
            me: me.clone(),
            fs,
            hooks: RefCell::new(None),
            write_fast_paths: Cell::new(true),
            meta_purpose: RefCell::new(None),
            write_observer: RefCell::new(None),
            crash: RefCell::new(None),
            bdev,
            activity,
            state: RefCell::new(MmState {
                pages: Vec::new(),
                free_ids: Vec::new(),
                nr_free: managed,
                nr_allocating: 0,
                lru: [LruList::default(); 3],
                mappings: BTreeMap::new(),
                b_dirty: BTreeSet::new(),
                b_io: VecDeque::new(),
                b_more_io: VecDeque::new(),
                wb_syncing: None,
                nr_dirty: 0,
                nr_writeback: 0,
                stats: MmStats::default(),
                zone: vmscan::ZoneReclaimState::default(),
                bdi: writeback::Bdi::new(),
                buffer_memo: (u64::MAX, 0),
            }),
            page_waitqueues: RefCell::new(PageWaitQueues::default()),
            alloc_lock: Mutex::new(sim, "page_cache_lock", WaitReason::PageAlloc),
            free_wait: WaitQueue::new(),
            pfmemalloc_wait: WaitQueue::new(),
            kswapd_wake: TimedWake::default(),
            flusher_wake: TimedWake::default(),
            flusher: writeback::FlusherState::default(),
            hz,
            global_dirty_limit: Cell::new(0),
            global_update_time: Cell::new(0),
            policy: RefCell::new(policy),
            fasttrack_pa: Cell::new(false),
            owner_is_last_toucher: Cell::new(false),
            watermarks,
            zones,
            kernel_version: Cell::new(KernelVersion::default()),
            config,
            cpu,
            cpu_costs,
            flusher_task: Cell::new(None),
            kswapd_task: Cell::new(None),
            checks: Cell::new(cfg!(debug_assertions)),
            check_count: Cell::new(0),
            violation: RefCell::new(None),
            panic_on_violation: Cell::new(cfg!(test)),
        });
        let flusher = {
            let (s, m) = (sim.clone(), mm.clone());
            sim.spawn_daemon("flush-179:0", async move { m.flusher(&s).await })
        };
        mm.flusher_task.set(Some(flusher.task()));
        // writeback_set_ratelimit at boot: global_dirty_limit starts at the threshold.
        mm.global_dirty_limit.set(mm.dirty_limits().1);
        mm.bdev.register_task(FLUSHER_PID, 0, "flush-179:0");
        mm.bdev.register_task(KSWAPD_PID, 0, "kswapd0");
        let kswapd = {
            let (s, m) = (sim.clone(), mm.clone());
            sim.spawn_daemon("kswapd0", async move { m.kswapd(&s).await })
        };
        mm.kswapd_task.set(Some(kswapd.task()));
        mm
    }

    pub fn stats(&self) -> MmStats {
        self.state.borrow().stats
    }

    /// Installs the file system's [`FsHooks`] (once it is mounted over this page cache).
    pub fn set_fs_hooks(&self, hooks: Rc<dyn FsHooks>) {
        *self.hooks.borrow_mut() = Some(hooks);
    }

    /// Installs the file system's classifier of its metadata blocks (ext4 knows each buffer's
    /// kind from when it journaled or read it; the page cache cannot import the file system).
    pub fn set_meta_classifier(&self, classify: MetaClassifier) {
        *self.meta_purpose.borrow_mut() = Some(classify);
    }

    /// Installs the file system's [`WriteObserver`] (its invariant checks).
    pub fn set_write_observer(&self, observer: Rc<dyn WriteObserver>) {
        *self.write_observer.borrow_mut() = Some(observer);
    }

    /// Records, from now on, the versions of the pages of the files under test into `log`.
    pub fn set_crash_log(&self, log: Rc<crashlog::CrashLog>) {
        self.bdev.set_crash_log(log.clone());
        *self.crash.borrow_mut() = Some(log);
    }

    /// The crash-point recorder, if the run keeps one.
    pub fn crash_log(&self) -> Option<Rc<crashlog::CrashLog>> {
        self.crash.borrow().clone()
    }

    /// The installed [`WriteObserver`], if any.
    pub(crate) fn write_observer(&self) -> Option<Rc<dyn WriteObserver>> {
        self.write_observer.borrow().clone()
    }

    /// The purpose of I/O on page `index` of `ino`: data, or for the block device's mapping
    /// the metadata kind of block `index`.
    pub(crate) fn purpose_of(&self, ino: Ino, index: u64) -> bio::IoPurpose {
        if ino != BDEV_INO {
            return bio::IoPurpose::Data;
        }
        self.meta_purpose
            .borrow()
            .as_ref()
            .map_or(bio::IoPurpose::Metadata, |classify| classify(index))
    }

    pub(crate) fn fs_hooks(&self) -> Option<Rc<dyn FsHooks>> {
        self.hooks.borrow().clone()
    }

    /// Turns the write path's fast paths on or off (on by default): the file system's
    /// (`FsHooks::write_begin_now` / `write_end_now`) and the page cache's own (the page
    /// grabbed and copied with the CPU segments awaited directly). Off, every step goes the
    /// waiting way; results are the same (the fast paths' test compares the two).
    pub fn set_write_fast_paths(&self, on: bool) {
        self.write_fast_paths.set(on);
    }

    /// `get_block` without allocation: the block device's mapping is the identity.
    pub(crate) fn map_block(&self, ino: Ino, index: u64) -> Option<u64> {
        if ino == BDEV_INO {
            return Some(index);
        }
        self.fs
            .borrow_mut()
            .get_block(ino, index, false)
            .expect("a lookup without create cannot fail")
    }

    pub fn flusher_task(&self) -> Option<TaskId> {
        self.flusher_task.get()
    }

    pub fn kswapd_task(&self) -> Option<TaskId> {
        self.kswapd_task.get()
    }

    /// (free, cached, dirty, writeback) pages.
    pub fn page_counts(&self) -> (u64, u64, u64, u64) {
        let state = self.state.borrow();
        let cached = state.pages.len() as u64 - state.free_ids.len() as u64;
        (state.nr_free, cached, state.nr_dirty, state.nr_writeback)
    }

    /// (inactive, active) LRU lengths.
    pub fn lru_sizes(&self) -> (u64, u64) {
        let state = self.state.borrow();
        (
            state.lru[Lru::Inactive as usize].len,
            state.lru[Lru::Active as usize].len,
        )
    }

    /// The flags of page `index` of `ino`, if cached.
    pub fn page_flags(&self, ino: Ino, index: u64) -> Option<u16> {
        let state = self.state.borrow();
        let id = state.mappings.get(&ino)?.pages.get(index)?;
        Some(state.pages[id as usize].flags)
    }

    /// Cached pages of `ino`.
    /// The files with dirty pages, in inode order (`sync_inodes_sb`'s list; the block
    /// device's own mapping excluded).
    pub fn dirty_inodes(&self) -> Vec<Ino> {
        let state = self.state();
        let mut inos: Vec<Ino> = state
            .mappings
            .iter()
            .filter(|(&ino, m)| ino != BDEV_INO && !m.dirty.is_empty())
            .map(|(&ino, _)| ino)
            .collect();
        inos.sort_unstable();
        inos
    }

    /// Dirty pages of `ino` in the cache (`get_dirty_pages`).
    pub fn dirty_pages(&self, ino: Ino) -> u64 {
        self.state()
            .mappings
            .get(&ino)
            .map_or(0, |m| m.dirty.iter().count() as u64)
    }

    pub fn nr_pages(&self, ino: Ino) -> usize {
        self.state
            .borrow()
            .mappings
            .get(&ino)
            .map_or(0, |m| m.pages.len())
    }

    pub(crate) fn state(&self) -> std::cell::RefMut<'_, MmState> {
        self.state.borrow_mut()
    }

    /// A read or write of page `id` by app `uid`: under `[stack.fasttrack] page_owner =
    /// "last"` the app becomes the page's owner; by default the owner stays the app that
    /// brought the page in (as `mem_cgroup_cache_charge` charged it at insertion).
    pub(crate) fn touch_owner(&self, state: &mut MmState, id: PageId, uid: u32) {
        if self.owner_is_last_toucher.get() {
            state.pages[id as usize].uid = uid;
        }
    }

    pub(crate) fn rc(&self) -> Rc<Mm> {
        self.me.upgrade().expect("the page cache is alive")
    }

    /// The wait queue of page (ino, index), created for a waiter.
    fn page_waitqueue(&self, ino: Ino, index: u64) -> WaitQueue {
        self.page_waitqueues
            .borrow_mut()
            .entry((ino, index))
            .or_default()
            .clone()
    }

    /// Wakes every waiter of the page; each re-checks its condition (and waits again on a new
    /// queue if it still holds).
    pub(crate) fn wake_page(&self, sim: &Sim, ino: Ino, index: u64) {
        let queue = {
            let mut queues = self.page_waitqueues.borrow_mut();
            // Most pages are unlocked with no one waiting on any page.
            if queues.is_empty() {
                return;
            }
            queues.remove(&(ino, index))
        };
        if let Some(queue) = queue {
            queue.wake_all(sim);
        }
    }

    /// `find_get_page`.
    pub(crate) fn find_page(&self, ino: Ino, index: u64) -> Option<PageId> {
        let state = self.state.borrow();
        state.mappings.get(&ino)?.pages.get(index)
    }

    /// `wait_on_page_bit` for `flag` of page (ino, index): returns once the page does not have
    /// the flag or is no longer cached.
    pub(crate) async fn wait_on_page_bit(
        &self,
        sim: &Sim,
        ino: Ino,
        index: u64,
        flag: u16,
        reason: WaitReason,
    ) {
        loop {
            let busy = self
                .find_page(ino, index)
                .is_some_and(|id| self.state.borrow().pages[id as usize].has(flag));
            if !busy {
                return;
            }
            // A page under writeback or being read names the request carrying it.
            let request = match flag {
                pg::WRITEBACK => self.writeback_request(ino, index),
                pg::LOCKED => self.read_request(ino, index),
                _ => None,
            };
            // QASIO §5.2: a task blocking on a page (or buffer) under writeback is where a
            // quasi-asynchronous I/O is detected; the block layer boosts it if enabled.
            if let (pg::WRITEBACK, Some(id)) = (flag, request) {
                let dependency = if reason == WaitReason::BufferLock {
                    crate::block::qasio::Dependency::Meta
                } else {
                    crate::block::qasio::Dependency::DataSync
                };
                self.bdev.boost(sim, id, dependency);
            }
            let blocker = request.map_or(Blocker::Page { ino, index }, Blocker::Request);
            self.mark_page_waiters(ino, index);
            self.page_waitqueue(ino, index)
                .wait(sim, reason, blocker)
                .await;
        }
    }

    /// The block request writing page (ino, index), if it is under writeback and submitted.
    pub fn writeback_request(&self, ino: Ino, index: u64) -> Option<u64> {
        let state = self.state.borrow();
        let request = state.mappings.get(&ino)?.writeback.get(index)?;
        (request != 0).then_some(request)
    }

    /// The block request reading page (ino, index), while the read is in flight.
    pub fn read_request(&self, ino: Ino, index: u64) -> Option<u64> {
        let state = self.state.borrow();
        state.mappings.get(&ino)?.reading.get(index)
    }

    /// `wait_on_page_writeback` (QASIO D_data when a writer waits, D_sync when fsync does).
    pub async fn wait_on_page_writeback(&self, sim: &Sim, ino: Ino, index: u64) {
        self.wait_on_page_bit(sim, ino, index, pg::WRITEBACK, WaitReason::PageWriteback)
            .await;
    }

    /// `lock_page`: returns the locked page, or `None` if it left the cache meanwhile.
    pub(crate) async fn lock_page(&self, sim: &Sim, ino: Ino, index: u64) -> Option<PageId> {
        loop {
            if let Some(id) = self.trylock_cached_page(ino, index)? {
                return Some(id);
            }
            let blocker = self
                .read_request(ino, index)
                .map_or(Blocker::Page { ino, index }, Blocker::Request);
            self.mark_page_waiters(ino, index);
            self.page_waitqueue(ino, index)
                .wait(sim, WaitReason::PageLock, blocker)
                .await;
        }
    }

    /// `trylock_page` of page `index` of `ino` if cached, in one lookup: `Some(Some(id))`
    /// locked now, `Some(None)` locked by someone else, `None` not cached. [`Mm::lock_page`]'s
    /// first step; callers on a hot path use it to make `lock_page`'s future only when the
    /// page is locked.
    pub(crate) fn trylock_cached_page(&self, ino: Ino, index: u64) -> Option<Option<PageId>> {
        let mut state = self.state.borrow_mut();
        let id = state.mappings.get(&ino)?.pages.get(index)?;
        let page = &mut state.pages[id as usize];
        if page.has(pg::LOCKED) {
            return Some(None);
        }
        page.flags |= pg::LOCKED;
        Some(Some(id))
    }

    pub(crate) fn trylock_page(&self, id: PageId) -> bool {
        let mut state = self.state.borrow_mut();
        let page = &mut state.pages[id as usize];
        if page.has(pg::LOCKED) {
            return false;
        }
        page.flags |= pg::LOCKED;
        true
    }

    pub(crate) fn unlock_page(&self, sim: &Sim, id: PageId) {
        let (ino, index, waiters) = {
            let mut state = self.state.borrow_mut();
            let page = &mut state.pages[id as usize];
            assert!(page.has(pg::LOCKED), "unlock of an unlocked page");
            let waiters = page.has(pg::WAITERS);
            page.flags &= !(pg::LOCKED | pg::WAITERS);
            (page.ino, page.index, waiters)
        };
        self.wake_page_if_waiters(sim, ino, index, waiters);
    }

    /// [`pg::WAITERS`] on the cached page (ino, index), before a task waits on its queue.
    fn mark_page_waiters(&self, ino: Ino, index: u64) {
        let mut state = self.state.borrow_mut();
        let id = state
            .mappings
            .get(&ino)
            .and_then(|m| m.pages.get(index))
            .expect("a task waits only on a cached page");
        state.pages[id as usize].flags |= pg::WAITERS;
    }

    /// `wake_up_page` of a page whose [`pg::WAITERS`] bit the caller read (and cleared):
    /// without it, the page has no wait queue to look up.
    pub(crate) fn wake_page_if_waiters(&self, sim: &Sim, ino: Ino, index: u64, waiters: bool) {
        if waiters {
            self.wake_page(sim, ino, index);
        } else {
            debug_assert!(
                !self.page_waitqueues.borrow().contains_key(&(ino, index)),
                "page {ino}:{index} has waiters but not pg::WAITERS"
            );
        }
    }

    pub(crate) fn page(&self, id: PageId) -> Page {
        self.state.borrow().pages[id as usize]
    }

    pub(crate) fn set_flags(&self, id: PageId, set: u16, clear: u16) {
        let mut state = self.state.borrow_mut();
        let page = &mut state.pages[id as usize];
        page.flags = (page.flags | set) & !clear;
    }
}

impl Mm {
    /// `[stack.vm] cached`: puts pages `0..pages` of file `ino` in the page cache as if they
    /// had been read before the run (clean, up to date, on the inactive list, owned by `uid`),
    /// without I/O, until free pages reach the high watermark. Returns the pages added.
    pub fn prefill_clean(&self, ino: Ino, pages: u64, uid: u32) -> u64 {
        let high = self.watermarks.high;
        let mut state = self.state();
        let mut added = 0;
        while added < pages && state.prefill_page(ino, added, uid, high) {
            added += 1;
        }
        added
    }
}

impl MmState {
    /// The page of metadata buffer `block` (`index` `block` of the block device's mapping), if
    /// cached: [`Mapping`]'s lookup, remembered for the next call on the same block.
    fn find_buffer_page(&mut self, block: u64) -> Option<PageId> {
        let (memo_block, memo_id) = self.buffer_memo;
        if memo_block == block {
            let page = &self.pages[memo_id as usize];
            if page.flags != 0 && page.ino == BDEV_INO && page.index == block {
                return Some(memo_id);
            }
        }
        let id = self.mappings.get(&BDEV_INO)?.pages.get(block)?;
        self.buffer_memo = (block, id);
        Some(id)
    }

    /// Takes a slab slot for a new page (the free-page count was already charged).
    fn new_page(&mut self, ino: Ino, index: u64, uid: u32, flags: u16) -> PageId {
        let page = Page {
            ino,
            index,
            flags,
            lru: Lru::None,
            uid,
            prev: NIL,
            next: NIL,
        };
        match self.free_ids.pop() {
            Some(id) => {
                self.pages[id as usize] = page;
                id
            }
            None => {
                assert!(self.pages.len() < NIL as usize, "page slab limit");
                self.pages.push(page);
                (self.pages.len() - 1) as PageId
            }
        }
    }

    fn lru_add_head(&mut self, id: PageId, list: Lru) {
        assert_eq!(
            self.pages[id as usize].lru,
            Lru::None,
            "page already on a list"
        );
        let l = list as usize;
        let head = self.lru[l].head;
        {
            let page = &mut self.pages[id as usize];
            page.lru = list;
            page.prev = NIL;
            page.next = head;
            if list == Lru::Active {
                page.flags |= pg::ACTIVE;
            } else {
                page.flags &= !pg::ACTIVE;
            }
        }
        if head != NIL {
            self.pages[head as usize].prev = id;
        } else {
            self.lru[l].tail = id;
        }
        self.lru[l].head = id;
        self.lru[l].len += 1;
    }

    fn lru_add_tail(&mut self, id: PageId, list: Lru) {
        assert_eq!(
            self.pages[id as usize].lru,
            Lru::None,
            "page already on a list"
        );
        let l = list as usize;
        let tail = self.lru[l].tail;
        {
            let page = &mut self.pages[id as usize];
            page.lru = list;
            page.next = NIL;
            page.prev = tail;
            if list == Lru::Active {
                page.flags |= pg::ACTIVE;
            } else {
                page.flags &= !pg::ACTIVE;
            }
        }
        if tail != NIL {
            self.pages[tail as usize].next = id;
        } else {
            self.lru[l].head = id;
        }
        self.lru[l].tail = id;
        self.lru[l].len += 1;
    }

    fn lru_del(&mut self, id: PageId) {
        let Page {
            lru, prev, next, ..
        } = self.pages[id as usize];
        if lru == Lru::None {
            return;
        }
        let l = lru as usize;
        if prev != NIL {
            self.pages[prev as usize].next = next;
        } else {
            self.lru[l].head = next;
        }
        if next != NIL {
            self.pages[next as usize].prev = prev;
        } else {
            self.lru[l].tail = prev;
        }
        self.lru[l].len -= 1;
        let page = &mut self.pages[id as usize];
        page.lru = Lru::None;
        page.prev = NIL;
        page.next = NIL;
    }

    /// Page `index` of `ino` as if read before the run: clean, up to date, unlocked, on the
    /// inactive list, owned by `uid`. False (nothing added) when free pages are at the high
    /// watermark `high`.
    fn prefill_page(&mut self, ino: Ino, index: u64, uid: u32, high: u64) -> bool {
        if self.nr_free <= high {
            return false;
        }
        self.nr_free -= 1;
        let id = self.add_to_page_cache(ino, index, uid, pg::UPTODATE);
        self.pages[id as usize].flags &= !pg::LOCKED;
        true
    }

    /// `add_to_page_cache_lru`: a new page, locked, on the inactive list.
    fn add_to_page_cache(&mut self, ino: Ino, index: u64, uid: u32, flags: u16) -> PageId {
        self.add_to_page_cache_if_vacant(ino, index, uid, flags)
            .unwrap_or_else(|| panic!("page {ino}:{index} added twice"))
    }

    /// `add_to_page_cache_lru` unless a page is already at (ino, index) (`None` then, nothing
    /// changed), with the mapping looked up once for the check and the insertion.
    fn add_to_page_cache_if_vacant(
        &mut self,
        ino: Ino,
        index: u64,
        uid: u32,
        flags: u16,
    ) -> Option<PageId> {
        // The id `new_page` is about to hand out.
        let id = match self.free_ids.last() {
            Some(&id) => id,
            None => PageId::try_from(self.pages.len()).expect("page ids fit"),
        };
        let mapping = self.mappings.entry(ino).or_default();
        if !mapping.pages.insert_if_vacant(index, id) {
            return None;
        }
        let new = self.new_page(ino, index, uid, flags | pg::LOCKED);
        debug_assert_eq!(new, id, "new_page hands out the last freed id, or the next");
        self.lru_add_head(id, Lru::Inactive);
        Some(id)
    }

    /// `__delete_from_page_cache` + free: the page must be clean, not under writeback.
    fn delete_from_page_cache(&mut self, id: PageId) {
        let page = self.pages[id as usize];
        assert!(
            !page.has(pg::DIRTY) && !page.has(pg::WRITEBACK),
            "freeing page {}:{} that is dirty or under writeback",
            page.ino,
            page.index
        );
        self.lru_del(id);
        let mapping = self
            .mappings
            .get_mut(&page.ino)
            .expect("page has a mapping");
        assert_eq!(mapping.pages.remove(page.index), Some(id));
        // An inode the flusher is writing stays pinned (`I_SYNC`); `requeue_inode` drops it.
        if mapping.pages.is_empty()
            && mapping.dirty.is_empty()
            && mapping.writeback.is_empty()
            && mapping.wb_list != WbList::Sync
        {
            self.mappings.remove(&page.ino);
        }
        self.pages[id as usize].flags = 0;
        self.free_ids.push(id);
        self.nr_free += 1;
        // free_one_page: the zone is reclaimable again.
        self.zone.pages_scanned = 0;
        self.zone.all_unreclaimable = false;
    }

    /// `__set_page_dirty`: tags the page and, on the inode's first dirty page,
    /// `__mark_inode_dirty` puts it on `b_dirty` with `dirtied_when = jiffies` (unless the
    /// flusher is writing it: `I_SYNC`, only its state changes). Returns whether the page was
    /// newly dirtied and whether the device had no dirty inode before (`!wb_has_dirty_io`: the
    /// caller then arms the flusher's timer, `bdi_wakeup_thread_delayed`).
    fn set_page_dirty(&mut self, id: PageId, jiffies: u64) -> (bool, bool) {
        let page = self.pages[id as usize];
        assert!(
            !page.has(pg::WRITEBACK),
            "page {}:{} dirtied under writeback (write_begin must wait_on_page_writeback)",
            page.ino,
            page.index
        );
        // set_page_dirty: a redirtied page is no longer to be reclaimed on writeback end.
        self.pages[id as usize].flags &= !pg::RECLAIM;
        if page.has(pg::DIRTY) {
            return (false, false);
        }
        let had_dirty_io = self.wb_has_dirty_io();
        self.pages[id as usize].flags |= pg::DIRTY;
        self.nr_dirty += 1;
        self.stats.pages_dirtied += 1;
        let mapping = self
            .mappings
            .get_mut(&page.ino)
            .expect("page has a mapping");
        mapping.dirty.insert(page.index);
        let mut first_dirty_inode = false;
        if mapping.wb_list == WbList::None {
            mapping.dirtied_when = jiffies;
            mapping.wb_list = WbList::Dirty;
            self.b_dirty.insert((jiffies, page.ino));
            first_dirty_inode = !had_dirty_io;
        }
        let total = self.nr_dirty + self.nr_writeback;
        self.stats.max_dirty_writeback = self.stats.max_dirty_writeback.max(total);
        (true, first_dirty_inode)
    }

    /// `wb_has_dirty_io`: some inode is on a writeback list (or being written by the flusher).
    pub(crate) fn wb_has_dirty_io(&self) -> bool {
        !self.b_dirty.is_empty()
            || !self.b_io.is_empty()
            || !self.b_more_io.is_empty()
            || self.wb_syncing.is_some()
    }

    /// Takes inode `ino` off whichever writeback list it is on (`inode_wb_list_del`).
    fn wb_list_del(&mut self, ino: Ino) {
        let Some(mapping) = self.mappings.get_mut(&ino) else {
            return;
        };
        match mapping.wb_list {
            WbList::None | WbList::Sync => return,
            WbList::Dirty => {
                let removed = self.b_dirty.remove(&(mapping.dirtied_when, ino));
                assert!(removed, "inode {ino} not on b_dirty");
            }
            WbList::Io => self.b_io.retain(|&i| i != ino),
            WbList::MoreIo => self.b_more_io.retain(|&i| i != ino),
        }
        mapping.wb_list = WbList::None;
    }

    /// Clears the dirty bit and tag (`clear_page_dirty_for_io` / `cancel_dirty_page`). An inode
    /// left without dirty pages leaves its writeback list at once (simplification: Linux leaves
    /// it until the flusher or `sync_inode_metadata` finds it clean); one the flusher is
    /// writing stays with the flusher, which requeues it (`requeue_inode`).
    fn clear_page_dirty(&mut self, id: PageId) -> bool {
        let page = self.pages[id as usize];
        if !page.has(pg::DIRTY) {
            return false;
        }
        self.pages[id as usize].flags &= !pg::DIRTY;
        self.nr_dirty -= 1;
        let mapping = self
            .mappings
            .get_mut(&page.ino)
            .expect("page has a mapping");
        mapping.dirty.remove(page.index);
        if mapping.dirty.is_empty() {
            self.wb_list_del(page.ino);
        }
        true
    }

    /// `clear_page_dirty_for_io` + `set_page_writeback`: [`MmState::clear_page_dirty`] and
    /// the writeback bit and tag, with the mapping looked up once for both tags.
    fn start_writeback(&mut self, id: PageId) {
        let page = &mut self.pages[id as usize];
        assert!(page.has(pg::LOCKED), "writeback of an unlocked page");
        assert!(page.has(pg::DIRTY), "writeback of a clean page");
        page.flags = (page.flags & !pg::DIRTY) | pg::WRITEBACK;
        let (ino, index) = (page.ino, page.index);
        self.nr_dirty -= 1;
        self.nr_writeback += 1;
        let mapping = self.mappings.get_mut(&ino).expect("page has a mapping");
        mapping.dirty.remove(index);
        mapping.writeback.insert(index, 0);
        if mapping.dirty.is_empty() {
            self.wb_list_del(ino);
        }
    }

    /// `mark_page_accessed`: referenced on first touch; a referenced inactive page moves to the
    /// active list.
    fn mark_page_accessed(&mut self, id: PageId) {
        let page = self.pages[id as usize];
        if page.lru == Lru::Inactive && page.has(pg::REFERENCED) {
            self.lru_del(id);
            self.lru_add_head(id, Lru::Active);
            self.pages[id as usize].flags &= !pg::REFERENCED;
        } else if !page.has(pg::REFERENCED) {
            self.pages[id as usize].flags |= pg::REFERENCED;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A wait that a timer or another task can end, for kernel threads' `schedule_timeout`
// ---------------------------------------------------------------------------------------------

/// A kernel thread's interruptible sleep: `wait(until)` sleeps until `until` or until `wake()`
/// (like a flusher's `schedule_timeout` that `wb_wakeup` cuts short).
#[derive(Default)]
pub struct TimedWake {
    token: Cell<Option<WakeToken>>,
    /// A wake that came while the thread was running: the next wait returns at once.
    pending: Cell<bool>,
}

impl TimedWake {
    pub fn wake(&self, sim: &Sim) {
        match self.token.take() {
            Some(token) => {
                sim.wake(token);
            }
            None => self.pending.set(true),
        }
    }

    /// Sleeps until `until` (or forever when `None`) or a wake.
    pub fn wait<'a>(&'a self, sim: &'a Sim, until: Option<Nanos>) -> TimedWakeWait<'a> {
        TimedWakeWait {
            owner: self,
            sim,
            until,
            token: None,
        }
    }
}

pub struct TimedWakeWait<'a> {
    owner: &'a TimedWake,
    sim: &'a Sim,
    until: Option<Nanos>,
    token: Option<WakeToken>,
}

impl Future for TimedWakeWait<'_> {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        match self.token {
            Some(token) => {
                if self.sim.was_woken(token) {
                    if self.owner.token.get() == Some(token) {
                        self.owner.token.set(None);
                    }
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            }
            None => {
                if self.owner.pending.replace(false) {
                    return Poll::Ready(());
                }
                let token = self
                    .sim
                    .block_current(WaitReason::Sleep, Blocker::None, None);
                if let Some(until) = self.until {
                    self.sim.wake_at(until.max(self.sim.now()), token);
                }
                self.owner.token.set(Some(token));
                self.token = Some(token);
                Poll::Pending
            }
        }
    }
}
