//! F2FS mounted: node blocks and the NAT, out-of-place writeback, fsync with roll-forward
//! node blocks, checkpoints, garbage collection, discards and atomic writes, behind the VFS's
//! [`FileSystemOps`] and the page cache's [`AddressSpaceOps`] / [`FsHooks`].
//!
//! Linux functions modelled (fs/f2fs):
//! - `f2fs_do_write_data_page` / `f2fs_outplace_write_data` / `f2fs_inplace_write_data`
//!   ([`F2fs::remap`]): a dirty page taken by writeback gets a new block in its log and the
//!   old one is invalidated, unless the in-place-update policy (`F2FS_IPU_FSYNC`: the
//!   `FI_NEED_IPU` flag fsync sets for fdatasync or at most `min_fsync_blocks` = 8 dirty
//!   pages, `DEF_MIN_FSYNC_BLOCKS`) keeps it in place. The page's direct node is dirtied.
//! - `f2fs_reserve_block` ([`FsHooks::reserve`]): a new page's slot gets `NEW_ADDR`, its
//!   direct node (allocated with a new nid if missing, dirtying its parent) is dirtied.
//! - `f2fs_do_sync_file` ([`F2fs::fsync`]): data written and waited for by the VFS; then a
//!   directory, a file whose parent is not checkpointed (`CP_NODE_NEED_CP`), a renamed file
//!   (`CP_WRONG_PINO`) or `fsync_mode=strict` with an unchekpointed entry checkpoints;
//!   otherwise `f2fs_fsync_node_pages` writes the file's dirty node blocks (the last with the
//!   FSYNC mark, the inode with the DENT mark when its entry is new), waits for them, and
//!   `f2fs_issue_flush` flushes the cache (not with `fsync_mode=nobarrier`). A file with no
//!   appended data and a clean inode only flushes when it was updated in place, else nothing.
//! - `f2fs_write_checkpoint` ([`F2fs::checkpoint`]): `block_operations` writes dirty dentry
//!   blocks and every dirty node block; the NAT and SIT changes go into the summary journals
//!   when they fit (`NAT_JOURNAL_ENTRIES` 38, `SIT_JOURNAL_ENTRIES` 6, f2fs_fs.h), else their
//!   blocks are written; the SSA blocks of segments that left a log; `do_checkpoint` writes
//!   the CP pack (CP block, orphan blocks, compacted data summaries), waits, flushes and
//!   writes the second CP block `REQ_PREFLUSH | REQ_FUA`. Then prefree segments are free and
//!   discarded (`f2fs_clear_prefree_segments`, with `discard`).
//! - `f2fs_balance_fs` / `f2fs_gc` (4.9's loop, [`F2fs::balance_fs`]): when free sections
//!   fall to the reserve, the writer takes `gc_lock` and collects greedy victims (reading
//!   each valid block and rewriting it: data to the cold data log, node blocks to their log)
//!   until enough sections would be free, then checkpoints to free them. The background GC
//!   thread (`gc_thread_func`: sleeps 30 s to 60 s, `DEF_GC_THREAD_MIN/MAX_SLEEP_TIME`, and
//!   collects a cost-benefit victim when the file system has been idle 5 s,
//!   `DEF_IDLE_INTERVAL`) and `f2fs_balance_fs_bg`'s periodic checkpoint (`cp_interval`).
//! - `f2fs_ioc_start_atomic_write` / `f2fs_ioc_commit_atomic_write` /
//!   `f2fs_ioc_abort_volatile_write` (4.x in-memory pages): the file's pages stay dirty in
//!   memory until the commit writes them out of place and syncs its nodes as
//!   `f2fs_do_sync_file(atomic)` does (the last node block `REQ_PREFLUSH | REQ_FUA`, no
//!   separate flush, no wait for node writeback).
//!
//! Simplifications beyond those in [`super`]: `f2fs_balance_fs` runs before every write that
//! reserves or may dirty a block (Linux: only when a new block is reserved); GC moves blocks
//! in the background thread's context the same way as foreground GC (Linux's background GC
//! dirties the pages for writeback); GC does not wait for a page under writeback; a renamed
//! file's `i_pino` is fixed only by a checkpoint; node blocks of a file are found without
//! reading them; indirect node numbering is this model's own (one indirect node per 1018
//! direct nodes, then one double-indirect node); cold files are chosen by mkfs.f2fs's
//! default extension lists (a subset: media and archives cold, `db` hot).

use super::layout::Layout;
use super::segment::{BlockAddr, Log, Owner, Segments};
use super::{F2fsConfig, F2fsMode, FsyncMode};
use crate::dev::{IoFlags, IoOp};
use crate::errno::Errno;
use crate::fs::{AddressSpaceOps, FileSystemOps, FsIoctl, LocalBoxFuture};
use crate::mm::bio::{BioRequest, IoPurpose};
use crate::mm::{BlockSubmit, FsHooks, FsToken, Ino, Issuer, Mm};
use crate::sim::sync::{Completion, Mutex};
use crate::sim::wait::{Blocker, WaitReason};
use crate::sim::Sim;
use crate::units::{Nanos, NS_PER_SEC, PAGE_SIZE};
use std::cell::{Cell, OnceCell, RefCell};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::{Rc, Weak};

/// `NULL_ADDR`: no block.
const NULL_ADDR: BlockAddr = 0;
/// `NEW_ADDR`: reserved, not yet written (Linux uses -1 too).
const NEW_ADDR: BlockAddr = u32::MAX;
/// Data addresses in the inode: `DEF_ADDRS_PER_INODE` 923 minus the 50 slots of the inline
/// xattr area (`DEFAULT_INLINE_XATTR_ADDRS`, on by default since Linux 4.x).
pub const ADDRS_PER_INODE: u64 = 873;
/// Data addresses in a direct node block, and node ids in an indirect one (`ADDRS_PER_BLOCK`,
/// `NIDS_PER_BLOCK`: 1018).
pub const ADDRS_PER_BLOCK: u64 = 1018;
/// `MAX_INLINE_DATA`: bytes of data an inode block holds, 4 x (923 - 50 inline xattr slots - 1
/// reserved) (f2fs.h, `DEF_INLINE_RESERVED_SIZE`).
pub const MAX_INLINE_DATA: u64 = 3488;
/// Entries of an inline directory: `NR_INLINE_DENTRY` = 182 for 4 KiB blocks with inline
/// xattrs (f2fs_fs.h).
pub const NR_INLINE_DENTRY: u64 = 182;
/// Entries of a dentry block: `NR_DENTRY_IN_BLOCK` = 214 (f2fs_fs.h).
pub const NR_DENTRY_IN_BLOCK: u64 = 214;
/// `NAT_JOURNAL_ENTRIES`: NAT changes held in the hot data summary's journal (f2fs_fs.h).
pub const NAT_JOURNAL_ENTRIES: usize = 38;
/// `SIT_JOURNAL_ENTRIES`: SIT changes held in the cold data summary's journal (f2fs_fs.h).
pub const SIT_JOURNAL_ENTRIES: usize = 6;
/// `F2FS_ORPHANS_PER_BLOCK` (f2fs_fs.h).
pub const ORPHANS_PER_BLOCK: u64 = 1020;
/// `DEF_MIN_FSYNC_BLOCKS`: fsync with at most this many dirty pages updates in place.
pub const MIN_FSYNC_BLOCKS: u64 = 8;
/// `DEF_GC_THREAD_MIN_SLEEP_TIME` / `MAX` (gc.h): 30 s and 60 s.
pub const GC_MIN_SLEEP: Nanos = 30 * NS_PER_SEC;
pub const GC_MAX_SLEEP: Nanos = 60 * NS_PER_SEC;
/// `DEF_IDLE_INTERVAL` (f2fs.h): 5 s without requests makes the file system idle.
pub const IDLE_INTERVAL: Nanos = 5 * NS_PER_SEC;
/// `F2FS_ROOT_INO` (f2fs.h); node and meta inodes are 1 and 2.
pub const ROOT_INO: Ino = 3;
/// The GC thread's pid in bios (kernel threads have low pids; after jbd2's 102).
pub const F2FS_GC_PID: u32 = 103;
/// Its name.
pub const F2FS_GC_COMM: &str = "f2fs_gc-8:0";
/// mkfs.f2fs's default cold extensions (`media_ext_lists`, a subset) and hot ones
/// (`hot_ext_lists`).
const COLD_EXTENSIONS: [&str; 12] = [
    "jpg", "jpeg", "gif", "png", "mp4", "mp3", "3gp", "avi", "mkv", "mov", "ogg", "apk",
];
const HOT_EXTENSIONS: [&str; 1] = ["db"];

/// One NAT entry.
#[derive(Debug, Clone, Copy)]
struct NatEntry {
    /// Where the node block is (`NULL_ADDR` before its first write, `NEW_ADDR` after
    /// allocation).
    addr: BlockAddr,
    /// Whether the entry existed at the last checkpoint (`IS_CHECKPOINTED`).
    checkpointed: bool,
    /// Owner: the file and this model's node key (0 = the inode).
    ino: Ino,
    key: u64,
}

/// An F2FS inode's in-memory state (`struct f2fs_inode_info`).
#[derive(Debug, Clone, Default)]
struct FInode {
    is_dir: bool,
    pino: Ino,
    /// `FI_...`: the parent recorded in the inode is stale (renamed across directories).
    wrong_pino: bool,
    /// Data block address per page.
    addrs: Vec<BlockAddr>,
    /// Node key -> nid (key 0 is the inode itself, nid = ino).
    nodes: BTreeMap<u64, u32>,
    append_write: bool,
    update_write: bool,
    need_ipu: bool,
    atomic: bool,
    committing: bool,
    temperature: Option<Log>,
    /// Directory entries (directories).
    entries: u64,
    /// Timestamps changed since the inode block was last written.
    times_dirty: bool,
    /// `FI_INLINE_DATA`: the data lives in the inode block.
    inline: bool,
    /// `i_size` as the file system last saw it (write_end, setattr, setup).
    size: u64,
    /// A write past the inline area reserved a block: convert at write_end.
    convert_pending: bool,
}

/// Counters for the results (`f2fs.*`).
#[derive(Debug, Clone, Default)]
pub struct F2fsStats {
    pub checkpoints: u64,
    pub cp_skipped: u64,
    pub cp_by_fsync_dir: u64,
    pub cp_by_parent: u64,
    pub cp_by_pino: u64,
    pub cp_by_strict: u64,
    pub cp_by_gc: u64,
    pub cp_by_sync: u64,
    pub cp_periodic: u64,
    pub fsync_roll_forward: u64,
    pub fsync_flush_only: u64,
    pub fsync_nothing: u64,
    pub ipu_pages: u64,
    pub opu_pages: u64,
    pub node_writes: u64,
    pub nat_block_writes: u64,
    pub sit_block_writes: u64,
    pub fg_gc: u64,
    pub bg_gc: u64,
    pub gc_moved_data: u64,
    pub gc_moved_nodes: u64,
    pub gc_wait_ns: u64,
    pub inline_writes: u64,
    pub inline_conversions: u64,
    pub atomic_commits: u64,
    pub atomic_aborts: u64,
    pub discards: u64,
    pub no_space: u64,
}

struct State {
    segs: Segments,
    nat: HashMap<u32, NatEntry>,
    dirty_nat: BTreeSet<u32>,
    next_nid: u32,
    free_nids: BTreeSet<u32>,
    /// nids freed since the last checkpoint: reusable after it.
    pending_free_nids: Vec<u32>,
    inodes: HashMap<Ino, FInode>,
    /// Directory entries by (directory, name): the inode each names (F2FS finds them in the
    /// dentry blocks; the model keeps the map).
    names: HashMap<(Ino, String), Ino>,
    dirty_nodes: BTreeSet<u32>,
    /// Dirty dentry blocks: (directory, block index).
    dirty_dents: BTreeSet<(Ino, u64)>,
    /// Inodes with no link left, until evicted (the CP pack's orphan blocks).
    orphans: BTreeSet<Ino>,
    /// Segments that left a log since the last checkpoint: their SSA block is written.
    retired_segments: u64,
    /// Blocks reserved (`NEW_ADDR`) and not yet written.
    reserved_new: u64,
    cp_pack: u64,
    last_cp: Nanos,
    last_request: Nanos,
    stats: F2fsStats,
}

/// The mounted file system.
pub struct F2fs {
    pub config: F2fsConfig,
    state: RefCell<State>,
    mm: OnceCell<Weak<Mm>>,
    bdev: Rc<dyn BlockSubmit>,
    gc_lock: Mutex,
    cp_mutex: Mutex,
    checks: Cell<bool>,
    violation: RefCell<Option<String>>,
    gc_task: Cell<Option<crate::sim::TaskId>>,
}

impl F2fs {
    fn new(sim: &Sim, config: F2fsConfig, layout: Layout, bdev: Rc<dyn BlockSubmit>) -> F2fs {
        let segs = Segments::new(layout, config.active_logs);
        let mut state = State {
            segs,
            nat: HashMap::new(),
            dirty_nat: BTreeSet::new(),
            next_nid: ROOT_INO as u32 + 1,
            free_nids: BTreeSet::new(),
            pending_free_nids: Vec::new(),
            inodes: HashMap::new(),
            names: HashMap::new(),
            dirty_nodes: BTreeSet::new(),
            dirty_dents: BTreeSet::new(),
            orphans: BTreeSet::new(),
            retired_segments: 0,
            reserved_new: 0,
            cp_pack: 0,
            last_cp: 0,
            last_request: 0,
            stats: F2fsStats::default(),
        };
        // mkfs: the root directory's inode block in the hot node log.
        let root = FInode {
            is_dir: true,
            pino: ROOT_INO,
            ..FInode::default()
        };
        state.inodes.insert(ROOT_INO, root);
        state
            .inodes
            .get_mut(&ROOT_INO)
            .expect("root")
            .nodes
            .insert(0, ROOT_INO as u32);
        let addr = state
            .segs
            .allocate(
                Log::HotNode,
                Owner::Node {
                    nid: ROOT_INO as u32,
                },
                0,
                false,
            )
            .expect("an empty file system has room for the root");
        state.nat.insert(
            ROOT_INO as u32,
            NatEntry {
                addr,
                checkpointed: true,
                ino: ROOT_INO,
                key: 0,
            },
        );
        state.segs.settle();
        F2fs {
            config,
            state: RefCell::new(state),
            mm: OnceCell::new(),
            bdev,
            gc_lock: Mutex::new(sim, "f2fs gc_lock", WaitReason::Mutex),
            cp_mutex: Mutex::new(sim, "f2fs cp_mutex", WaitReason::Mutex),
            checks: Cell::new(cfg!(debug_assertions)),
            violation: RefCell::new(None),
            gc_task: Cell::new(None),
        }
    }

    fn mm(&self) -> Rc<Mm> {
        self.mm
            .get()
            .and_then(Weak::upgrade)
            .expect("the page cache outlives the file system")
    }

    pub fn stats(&self) -> F2fsStats {
        self.state.borrow().stats.clone()
    }

    pub fn layout(&self) -> Layout {
        self.state.borrow().segs.layout.clone()
    }

    /// Free, dirty and prefree segments now.
    pub fn segment_counts(&self) -> (u64, u64, u64) {
        let st = self.state.borrow();
        (
            st.segs.free_segments(),
            st.segs.dirty_segments(),
            st.segs.prefree_segments(),
        )
    }

    /// The block of page `index` of `ino`, if written.
    pub fn block_of(&self, ino: Ino, index: u64) -> Option<u64> {
        let st = self.state.borrow();
        let addr = *st.inodes.get(&ino)?.addrs.get(index as usize)?;
        (addr != NULL_ADDR && addr != NEW_ADDR).then_some(u64::from(addr))
    }

    /// The node block address of inode `ino` (its NAT entry).
    pub fn inode_block(&self, ino: Ino) -> Option<u64> {
        let st = self.state.borrow();
        let addr = st.nat.get(&(ino as u32))?.addr;
        (addr != NULL_ADDR && addr != NEW_ADDR).then_some(u64::from(addr))
    }

    /// Whether `ino`'s NAT entry is checkpointed (`f2fs_is_checkpointed_node`).
    pub fn is_checkpointed_node(&self, ino: Ino) -> bool {
        self.state
            .borrow()
            .nat
            .get(&(ino as u32))
            .is_some_and(|e| e.checkpointed)
    }

    pub fn dirty_node_count(&self) -> usize {
        self.state.borrow().dirty_nodes.len()
    }

    // ----------------------------------------------------------------------------------------
    // Nodes
    // ----------------------------------------------------------------------------------------

    /// This model's key of the direct node holding page `index`'s address, with the keys of
    /// the indirect nodes above it (`get_node_path`).
    fn node_path(index: u64) -> (u64, Vec<u64>) {
        if index < ADDRS_PER_INODE {
            return (0, Vec::new());
        }
        let direct = (index - ADDRS_PER_INODE) / ADDRS_PER_BLOCK;
        let key = 1 + direct;
        if direct < 2 {
            return (key, Vec::new());
        }
        let under_indirect = direct - 2;
        let indirect = under_indirect / ADDRS_PER_BLOCK;
        if indirect < 2 {
            return (key, vec![1_000_000 + indirect]);
        }
        (key, vec![2_000_000, 1_000_000 + indirect])
    }

    fn alloc_nid(st: &mut State) -> u32 {
        if let Some(nid) = st.free_nids.pop_first() {
            return nid;
        }
        let nid = st.next_nid;
        st.next_nid += 1;
        nid
    }

    /// The nid of `ino`'s node `key`, allocating it (`f2fs_new_node_page`) and dirtying its
    /// parents when new.
    fn ensure_node(st: &mut State, ino: Ino, key: u64, parents: &[u64]) -> u32 {
        if let Some(&nid) = st.inodes[&ino].nodes.get(&key) {
            return nid;
        }
        let nid = Self::alloc_nid(st);
        st.inodes
            .get_mut(&ino)
            .expect("inode")
            .nodes
            .insert(key, nid);
        st.nat.insert(
            nid,
            NatEntry {
                addr: NEW_ADDR,
                checkpointed: false,
                ino,
                key,
            },
        );
        st.dirty_nat.insert(nid);
        st.dirty_nodes.insert(nid);
        // The parent that records the new nid: the inode for the first two direct and
        // indirect nodes and the double-indirect node, else the indirect node.
        let parent = match parents.last() {
            Some(&p) => {
                let grand: Vec<u64> = parents[..parents.len() - 1].to_vec();
                Self::ensure_node(st, ino, p, &grand)
            }
            None => ino as u32,
        };
        st.dirty_nodes.insert(parent);
        nid
    }

    fn dirty_node_of(st: &mut State, ino: Ino, index: u64) {
        let (key, parents) = Self::node_path(index);
        let nid = Self::ensure_node(st, ino, key, &parents);
        st.dirty_nodes.insert(nid);
    }

    /// The log a node block goes to (`__get_segment_type_6`): direct nodes (and inodes) of
    /// directories hot, of files warm, indirect nodes cold.
    fn node_log(st: &State, nid: u32) -> Log {
        let Some(e) = st.nat.get(&nid) else {
            return Log::ColdNode;
        };
        if e.key >= 1_000_000 {
            return Log::ColdNode;
        }
        if st.inodes.get(&e.ino).is_some_and(|i| i.is_dir) {
            Log::HotNode
        } else {
            Log::WarmNode
        }
    }

    fn data_log(inode: &FInode) -> Log {
        if inode.is_dir {
            Log::HotData
        } else {
            inode.temperature.unwrap_or(Log::WarmData)
        }
    }

    /// Writes node `nid` out of place: a new block in its log, the old one invalidated, the
    /// NAT updated in memory. Returns the new address.
    fn relocate_node(&self, st: &mut State, nid: u32, now: Nanos) -> Option<BlockAddr> {
        let log = Self::node_log(st, nid);
        let ssr = self.ssr_allowed(st);
        let new = st.segs.allocate(log, Owner::Node { nid }, now, ssr)?;
        let entry = st
            .nat
            .get_mut(&nid)
            .expect("a node being written has a NAT entry");
        let old = entry.addr;
        entry.addr = new;
        if old != NULL_ADDR && old != NEW_ADDR {
            st.segs.invalidate(old);
        }
        st.dirty_nat.insert(nid);
        st.stats.node_writes += 1;
        Some(new)
    }

    fn ssr_allowed(&self, st: &State) -> bool {
        self.config.mode == F2fsMode::Adaptive
            && st
                .segs
                .need_ssr(st.dirty_nodes.len() as u64, st.dirty_dents.len() as u64)
    }

    // ----------------------------------------------------------------------------------------
    // Data
    // ----------------------------------------------------------------------------------------

    fn set_addr(inode: &mut FInode, index: u64, addr: BlockAddr) {
        let i = index as usize;
        if inode.addrs.len() <= i {
            inode.addrs.resize(i + 1, NULL_ADDR);
        }
        inode.addrs[i] = addr;
    }

    /// `f2fs_outplace_write_data`'s allocation (`f2fs_allocate_data_block`) for page `index` of
    /// `ino`: a new block in `log`, the old one invalidated (or its `NEW_ADDR` reservation
    /// released), the address recorded and the page's direct node dirtied. `None` when the
    /// inode is gone or no block exists anywhere. Shared by writeback, checkpoints' dentry
    /// blocks, GC moves, inline conversion and `O_DIRECT`.
    fn place_data(
        st: &mut State,
        ino: Ino,
        index: u64,
        log: Log,
        now: Nanos,
        ssr: bool,
    ) -> Option<BlockAddr> {
        let old = st
            .inodes
            .get(&ino)?
            .addrs
            .get(index as usize)
            .copied()
            .unwrap_or(NULL_ADDR);
        let new = st
            .segs
            .allocate(log, Owner::Data { ino, index }, now, ssr)?;
        if old == NEW_ADDR {
            st.reserved_new -= 1;
        } else if old != NULL_ADDR {
            st.segs.invalidate(old);
        }
        Self::set_addr(st.inodes.get_mut(&ino).expect("inode"), index, new);
        Self::dirty_node_of(st, ino, index);
        Some(new)
    }

    /// `f2fs_do_write_data_page` for one page taken by writeback.
    fn remap(&self, sim: &Sim, ino: Ino, index: u64) {
        let mut guard = self.state.borrow_mut();
        let st = &mut *guard;
        let ssr = self.ssr_allowed(st);
        let Some(inode) = st.inodes.get(&ino) else {
            return;
        };
        let old = inode
            .addrs
            .get(index as usize)
            .copied()
            .unwrap_or(NULL_ADDR);
        let written = old != NULL_ADDR && old != NEW_ADDR;
        let ipu = written
            && self.config.mode == F2fsMode::Adaptive
            && inode.need_ipu
            && !inode.committing;
        if ipu {
            st.inodes.get_mut(&ino).expect("inode").update_write = true;
            st.stats.ipu_pages += 1;
            return;
        }
        let log = Self::data_log(inode);
        if Self::place_data(st, ino, index, log, sim.now(), ssr).is_none() {
            // No block anywhere: the page keeps its block (or stays unwritten).
            st.stats.no_space += 1;
            return;
        }
        st.inodes.get_mut(&ino).expect("inode").append_write = true;
        st.stats.opu_pages += 1;
    }

    /// `f2fs_reserve_block`: `NEW_ADDR` for a page with no block.
    fn reserve_page(&self, ino: Ino, index: u64) -> Result<(), Errno> {
        let mut guard = self.state.borrow_mut();
        let st = &mut *guard;
        let Some(inode) = st.inodes.get_mut(&ino) else {
            return Ok(());
        };
        if inode.inline {
            if index == 0 {
                // prepare_write_begin: page 0 of an inline file needs no block.
                return Ok(());
            }
            // A write past the inline area: f2fs_convert_inline_page at write_end.
            inode.convert_pending = true;
        }
        let old = inode
            .addrs
            .get(index as usize)
            .copied()
            .unwrap_or(NULL_ADDR);
        if old != NULL_ADDR {
            return Ok(());
        }
        // inc_valid_block_count: data and node blocks plus reservations within the user
        // blocks.
        if st.segs.valid_blocks + st.reserved_new + 1 > st.segs.layout.user_blocks() {
            return Err(Errno::ENOSPC);
        }
        st.reserved_new += 1;
        Self::set_addr(st.inodes.get_mut(&ino).expect("inode"), index, NEW_ADDR);
        Self::dirty_node_of(st, ino, index);
        Ok(())
    }

    /// `f2fs_write_inline_data` for page 0 of an inline file taken by writeback: the data is
    /// copied into the inode block, which is now dirty; no block I/O.
    fn absorb_inline(&self, ino: Ino, index: u64) -> bool {
        let mut st = self.state.borrow_mut();
        let Some(inode) = st.inodes.get_mut(&ino) else {
            return false;
        };
        if !inode.inline || index != 0 {
            return false;
        }
        inode.append_write = true;
        st.dirty_nodes.insert(ino as u32);
        st.stats.inline_writes += 1;
        true
    }

    /// Records `ino`'s size; converts an inline file that outgrew its inode block
    /// (`f2fs_convert_inline_inode` / `f2fs_convert_inline_page`).
    async fn note_size(&self, sim: &Sim, issuer: Issuer, ino: Ino, size: u64) {
        let outgrown = {
            let mut st = self.state.borrow_mut();
            let Some(inode) = st.inodes.get_mut(&ino) else {
                return;
            };
            let outgrown = inode.inline && (inode.convert_pending || size > MAX_INLINE_DATA);
            if !outgrown {
                inode.size = size;
            }
            outgrown
        };
        if outgrown {
            self.convert_inline(sim, issuer, ino).await;
        }
        if let Some(inode) = self.state.borrow_mut().inodes.get_mut(&ino) {
            inode.size = size;
        }
    }

    /// `f2fs_convert_inline_page`: an inline file leaves its inode block (it outgrew it, or an
    /// atomic write starts); page 0's data gets a block and is written now, unless page 0 is
    /// dirty in the cache (writeback will write it) or the file is empty.
    async fn convert_inline(&self, sim: &Sim, issuer: Issuer, ino: Ino) {
        let had_data = {
            let mut st = self.state.borrow_mut();
            let Some(inode) = st.inodes.get_mut(&ino) else {
                return;
            };
            if !inode.inline {
                return;
            }
            inode.inline = false;
            inode.convert_pending = false;
            let had_data = inode.size > 0;
            st.stats.inline_conversions += 1;
            had_data
        };
        let dirty = self
            .mm()
            .page_flags(ino, 0)
            .is_some_and(|f| f & crate::mm::pg::DIRTY != 0);
        if !had_data || dirty {
            return;
        }
        let block = {
            let mut guard = self.state.borrow_mut();
            let st = &mut *guard;
            let ssr = self.ssr_allowed(st);
            let log = Self::data_log(&st.inodes[&ino]);
            let Some(addr) = Self::place_data(st, ino, 0, log, sim.now(), ssr) else {
                st.stats.no_space += 1;
                return;
            };
            st.inodes.get_mut(&ino).expect("inode").append_write = true;
            u64::from(addr)
        };
        let bio = BioRequest::for_pages(
            IoOp::Write,
            block,
            1,
            Self::sync_write_flags(),
            issuer,
            None,
            IoPurpose::Data,
        );
        crate::mm::bio::submit_bio_wait(&*self.bdev, sim, bio).await;
    }

    /// Frees the blocks of pages `first..` of `ino` (`f2fs_truncate_data_blocks_range`).
    fn truncate_from(st: &mut State, ino: Ino, first: u64) {
        let Some(inode) = st.inodes.get_mut(&ino) else {
            return;
        };
        let first = first as usize;
        if inode.addrs.len() <= first {
            return;
        }
        let tail: Vec<BlockAddr> = inode.addrs.drain(first..).collect();
        let mut touched = BTreeSet::new();
        for (i, addr) in tail.into_iter().enumerate() {
            if addr == NEW_ADDR {
                st.reserved_new -= 1;
            } else if addr != NULL_ADDR {
                st.segs.invalidate(addr);
            } else {
                continue;
            }
            touched.insert(Self::node_path((first + i) as u64).0);
        }
        for key in touched {
            if let Some(&nid) = st.inodes[&ino].nodes.get(&key) {
                st.dirty_nodes.insert(nid);
            }
        }
        st.dirty_nodes.insert(ino as u32);
    }

    // ----------------------------------------------------------------------------------------
    // Namespace
    // ----------------------------------------------------------------------------------------

    fn temperature_of(name: &str) -> Option<Log> {
        let ext = name.rsplit_once('.')?.1.to_ascii_lowercase();
        if COLD_EXTENSIONS.contains(&ext.as_str()) {
            Some(Log::ColdData)
        } else if HOT_EXTENSIONS.contains(&ext.as_str()) {
            Some(Log::HotData)
        } else {
            None
        }
    }

    /// A new inode: nid, inode block to be written (`f2fs_new_inode`, `f2fs_init_inode_metadata`).
    fn new_inode(st: &mut State, dir: Ino, name: &str, is_dir: bool, inline: bool) -> Ino {
        let nid = Self::alloc_nid(st);
        let ino = Ino::from(nid);
        let inode = FInode {
            is_dir,
            pino: dir,
            inline: inline && !is_dir,
            temperature: if is_dir {
                None
            } else {
                Self::temperature_of(name)
            },
            ..FInode::default()
        };
        st.inodes.insert(ino, inode);
        st.names.insert((dir, name.to_string()), ino);
        st.inodes.get_mut(&ino).expect("new").nodes.insert(0, nid);
        st.nat.insert(
            nid,
            NatEntry {
                addr: NEW_ADDR,
                checkpointed: false,
                ino,
                key: 0,
            },
        );
        st.dirty_nat.insert(nid);
        st.dirty_nodes.insert(nid);
        ino
    }

    /// Adds or removes an entry of `dir` (`f2fs_add_link` / `f2fs_delete_entry`): an inline
    /// directory dirties its inode block, a larger one the dentry block holding the name.
    fn touch_dentry(&self, st: &mut State, dir: Ino, name: &str, delta: i64) {
        let Some(d) = st.inodes.get_mut(&dir) else {
            return;
        };
        d.entries = d.entries.saturating_add_signed(delta);
        let entries = d.entries.max(1);
        if self.config.inline_dentry && entries <= NR_INLINE_DENTRY {
            st.dirty_nodes.insert(dir as u32);
            return;
        }
        let blocks = entries.div_ceil(NR_DENTRY_IN_BLOCK);
        let hash = name
            .bytes()
            .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
        st.dirty_dents.insert((dir, hash % blocks));
        st.dirty_nodes.insert(dir as u32);
    }

    // ----------------------------------------------------------------------------------------
    // I/O helpers
    // ----------------------------------------------------------------------------------------

    /// Submits `bios` and returns a completion per bio.
    async fn submit_all(&self, sim: &Sim, bios: Vec<BioRequest>) -> Vec<(u64, Completion<()>)> {
        let mut out = Vec::with_capacity(bios.len());
        for bio in bios {
            let done: Completion<()> = Completion::new();
            let signal = done.clone();
            let id = self
                .bdev
                .submit_bio(sim, bio, Box::new(move |s, _| signal.complete(s, ())))
                .await;
            out.push((id, done));
        }
        out
    }

    async fn wait_all(sim: &Sim, waits: Vec<(u64, Completion<()>)>) {
        for (id, done) in waits {
            done.wait(sim, WaitReason::BlockIo, Blocker::Request(id))
                .await;
        }
    }

    async fn submit_and_wait(&self, sim: &Sim, bios: Vec<BioRequest>) {
        let waits = self.submit_all(sim, bios).await;
        Self::wait_all(sim, waits).await;
    }

    /// Bios writing `blocks` (sorted, merged where consecutive).
    fn write_bios(
        blocks: &[u64],
        flags: IoFlags,
        issuer: Issuer,
        purpose: IoPurpose,
        op: IoOp,
    ) -> Vec<BioRequest> {
        let mut sorted = blocks.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let mut bios = Vec::new();
        // bio_add_page stops at the queue's max_sectors (512 KiB); a discard at its own
        // limit.
        let cap = if op == IoOp::Discard {
            crate::block::request::MAX_DISCARD_SECTORS / 8
        } else {
            crate::mm::writeback::MAX_BIO_PAGES
        };
        let mut run: Option<(u64, u32)> = None;
        for b in sorted {
            match run {
                Some((start, n)) if start + u64::from(n) == b && n < cap => {
                    run = Some((start, n + 1))
                }
                _ => {
                    if let Some((start, n)) = run.take() {
                        bios.push(BioRequest::for_pages(
                            op, start, n, flags, issuer, None, purpose,
                        ));
                    }
                    run = Some((b, 1));
                }
            }
        }
        if let Some((start, n)) = run {
            bios.push(BioRequest::for_pages(
                op, start, n, flags, issuer, None, purpose,
            ));
        }
        bios
    }

    fn sync_write_flags() -> IoFlags {
        // WRITE_SYNC: REQ_SYNC | REQ_NOIDLE (3.x), as f2fs's WB_SYNC_ALL node writes.
        IoFlags {
            sync: true,
            noidle: true,
            ..IoFlags::default()
        }
    }

    fn meta_flags() -> IoFlags {
        // f2fs_submit_page_write of META: REQ_SYNC | REQ_META | REQ_PRIO.
        IoFlags {
            sync: true,
            meta: true,
            prio: true,
            noidle: true,
            ..IoFlags::default()
        }
    }

    async fn flush(&self, sim: &Sim, issuer: Issuer) {
        crate::mm::bio::blkdev_issue_flush(&*self.bdev, sim, issuer).await;
    }

    /// Writes the dirty node blocks `nids` out of place; returns their new addresses' bios.
    fn node_write_bios(
        &self,
        sim: &Sim,
        nids: &[u32],
        issuer: Issuer,
        last_fua: bool,
    ) -> Vec<BioRequest> {
        let mut st = self.state.borrow_mut();
        let mut blocks = Vec::new();
        for &nid in nids {
            st.dirty_nodes.remove(&nid);
            if !st.nat.contains_key(&nid) {
                continue;
            }
            match self.relocate_node(&mut st, nid, sim.now()) {
                Some(addr) => blocks.push(u64::from(addr)),
                None => {
                    st.stats.no_space += 1;
                }
            }
        }
        drop(st);
        if blocks.is_empty() {
            return Vec::new();
        }
        if !last_fua {
            return Self::write_bios(
                &blocks,
                Self::sync_write_flags(),
                issuer,
                IoPurpose::Node,
                IoOp::Write,
            );
        }
        // Atomic commit: the last node block (the FSYNC-marked one) carries PREFLUSH | FUA.
        let last = *blocks.last().expect("not empty");
        let mut bios = Self::write_bios(
            &blocks[..blocks.len() - 1],
            Self::sync_write_flags(),
            issuer,
            IoPurpose::Node,
            IoOp::Write,
        );
        let flags = IoFlags {
            preflush: self.config.barrier,
            fua: self.config.barrier,
            ..Self::sync_write_flags()
        };
        bios.push(BioRequest::for_pages(
            IoOp::Write,
            last,
            1,
            flags,
            issuer,
            None,
            IoPurpose::Node,
        ));
        bios
    }

    /// `SBI_IS_DIRTY`: anything a checkpoint would write.
    fn is_dirty(&self) -> bool {
        let st = self.state.borrow();
        !st.dirty_nodes.is_empty()
            || !st.dirty_nat.is_empty()
            || !st.dirty_dents.is_empty()
            || !st.segs.dirty_sentries.is_empty()
            || st.segs.prefree_segments() > 0
            || st.inodes.values().any(|i| i.times_dirty)
    }

    fn note_request(&self, sim: &Sim) {
        self.state.borrow_mut().last_request = sim.now();
    }

    // ----------------------------------------------------------------------------------------
    // fsync
    // ----------------------------------------------------------------------------------------

    /// `need_do_checkpoint`: why fsync of `ino` must checkpoint, if it must.
    fn cp_reason(&self, st: &State, ino: Ino) -> Option<&'static str> {
        let inode = &st.inodes[&ino];
        if inode.is_dir {
            return Some("non-regular");
        }
        if inode.wrong_pino {
            return Some("wrong-pino");
        }
        let checkpointed = |n: Ino| st.nat.get(&(n as u32)).is_some_and(|e| e.checkpointed);
        if !checkpointed(inode.pino) {
            return Some("node-need-cp");
        }
        if self.config.fsync_mode == FsyncMode::Strict && !checkpointed(ino) {
            return Some("recover-dir");
        }
        None
    }

    /// `f2fs_do_sync_file` after the data was written and waited for.
    pub async fn fsync(&self, sim: &Sim, issuer: Issuer, ino: Ino, datasync: bool, atomic: bool) {
        self.note_request(sim);
        // Some(reason) to checkpoint, None to write the nodes; Err(flush) when nothing needs
        // recovery information (flush only if data was updated in place).
        let decision: Result<Option<&'static str>, bool> = {
            let mut st = self.state.borrow_mut();
            let Some(inode) = st.inodes.get_mut(&ino) else {
                return;
            };
            inode.need_ipu = false;
            // f2fs_skip_inode_update: fdatasync skips an inode dirtied by timestamps only
            // (a size change dirtied its block already, in write_end or setattr).
            if !datasync && inode.times_dirty && !inode.is_dir {
                inode.times_dirty = false;
                st.dirty_nodes.insert(ino as u32);
            }
            let inode = &st.inodes[&ino];
            let has_dirty_nodes = inode.nodes.values().any(|n| st.dirty_nodes.contains(n));
            if !inode.is_dir && !has_dirty_nodes && !inode.append_write && !atomic {
                Err(inode.update_write)
            } else {
                Ok(self.cp_reason(&st, ino))
            }
        };
        let reason = match decision {
            Ok(reason) => reason,
            Err(true) => {
                self.state.borrow_mut().stats.fsync_flush_only += 1;
                self.flush_out(sim, issuer, ino).await;
                return;
            }
            Err(false) => {
                self.state.borrow_mut().stats.fsync_nothing += 1;
                return;
            }
        };
        if let Some(reason) = reason {
            {
                let mut st = self.state.borrow_mut();
                match reason {
                    "non-regular" => st.stats.cp_by_fsync_dir += 1,
                    "wrong-pino" => st.stats.cp_by_pino += 1,
                    "node-need-cp" => st.stats.cp_by_parent += 1,
                    _ => st.stats.cp_by_strict += 1,
                }
            }
            self.checkpoint(sim, issuer).await;
            let mut st = self.state.borrow_mut();
            if let Some(inode) = st.inodes.get_mut(&ino) {
                // try_to_fix_pino: the checkpoint recorded the parent.
                inode.wrong_pino = false;
                inode.append_write = false;
                inode.update_write = false;
            }
            return;
        }
        // f2fs_fsync_node_pages: the file's dirty node blocks, direct nodes first and the
        // inode (FSYNC mark; DENT mark when its entry is not checkpointed) last.
        let nids: Vec<u32> = {
            let st = self.state.borrow();
            let inode = &st.inodes[&ino];
            let mut nids: Vec<u32> = inode
                .nodes
                .iter()
                .filter(|(&k, n)| k != 0 && st.dirty_nodes.contains(n))
                .map(|(_, &n)| n)
                .collect();
            nids.push(ino as u32);
            nids
        };
        self.state.borrow_mut().stats.fsync_roll_forward += 1;
        let bios = self.node_write_bios(sim, &nids, issuer, atomic);
        let waits = self.submit_all(sim, bios).await;
        if !atomic {
            // f2fs_wait_on_node_pages_writeback.
            Self::wait_all(sim, waits).await;
        }
        {
            let mut st = self.state.borrow_mut();
            if let Some(inode) = st.inodes.get_mut(&ino) {
                inode.append_write = false;
            }
        }
        if self.checks.get() && !atomic {
            // Roll-forward records are on the device before fsync returns: every node block
            // the fsync took has an address (others may have dirtied it again since).
            let st = self.state.borrow();
            if let Some(&n) = nids.iter().find(|n| {
                st.nat
                    .get(n)
                    .is_some_and(|e| e.addr == NULL_ADDR || e.addr == NEW_ADDR)
            }) {
                drop(st);
                self.record_violation(format!(
                    "fsync of inode {ino} returns with node {n} never written (roll-forward)"
                ));
            }
        }
        if !atomic {
            self.flush_out(sim, issuer, ino).await;
        }
    }

    async fn flush_out(&self, sim: &Sim, issuer: Issuer, ino: Ino) {
        if self.config.fsync_mode != FsyncMode::Nobarrier && self.config.barrier {
            self.flush(sim, issuer).await;
        }
        if let Some(inode) = self.state.borrow_mut().inodes.get_mut(&ino) {
            inode.update_write = false;
        }
    }

    // ----------------------------------------------------------------------------------------
    // Checkpoint
    // ----------------------------------------------------------------------------------------

    /// `f2fs_write_checkpoint`.
    pub async fn checkpoint(&self, sim: &Sim, issuer: Issuer) {
        let _cp = self.cp_mutex.lock(sim).await;
        if !self.is_dirty() {
            // f2fs_write_checkpoint: nothing changed since the last one (!SBI_IS_DIRTY).
            self.state.borrow_mut().stats.cp_skipped += 1;
            return;
        }
        let now = sim.now();
        // block_operations: dirty dentry blocks (f2fs_sync_dirty_inodes(DIR_INODE)).
        let dent_bios = {
            let mut guard = self.state.borrow_mut();
            let st = &mut *guard;
            let dents: Vec<(Ino, u64)> = std::mem::take(&mut st.dirty_dents).into_iter().collect();
            let ssr = self.ssr_allowed(st);
            let mut blocks = Vec::new();
            for (dir, blk) in dents {
                if !st.inodes.contains_key(&dir) {
                    continue;
                }
                let Some(new) = Self::place_data(st, dir, blk, Log::HotData, now, ssr) else {
                    st.stats.no_space += 1;
                    continue;
                };
                blocks.push(u64::from(new));
            }
            // Inodes whose timestamps changed: f2fs_write_inode updates their blocks.
            let stale: Vec<Ino> = st
                .inodes
                .iter()
                .filter(|(_, i)| i.times_dirty)
                .map(|(&ino, _)| ino)
                .collect();
            for ino in stale {
                st.inodes.get_mut(&ino).expect("inode").times_dirty = false;
                st.dirty_nodes.insert(ino as u32);
            }
            Self::write_bios(
                &blocks,
                Self::sync_write_flags(),
                issuer,
                IoPurpose::Directory,
                IoOp::Write,
            )
        };
        self.submit_and_wait(sim, dent_bios).await;
        // f2fs_sync_node_pages: every dirty node block.
        let nids: Vec<u32> = self.state.borrow().dirty_nodes.iter().copied().collect();
        let node_bios = self.node_write_bios(sim, &nids, issuer, false);
        self.submit_and_wait(sim, node_bios).await;
        // f2fs_flush_nat_entries / f2fs_flush_sit_entries, the SSA blocks, the CP pack.
        let (meta_bios, tail, stats_update) = {
            let mut st = self.state.borrow_mut();
            let layout = st.segs.layout.clone();
            let copy = (st.cp_pack + 1) % 2;
            let mut nat_blocks = Vec::new();
            if st.dirty_nat.len() > NAT_JOURNAL_ENTRIES {
                nat_blocks = st
                    .dirty_nat
                    .iter()
                    .map(|&nid| layout.nat_block(nid, copy))
                    .collect();
                nat_blocks.sort_unstable();
                nat_blocks.dedup();
            }
            let mut sit_blocks = Vec::new();
            if st.segs.dirty_sentries.len() > SIT_JOURNAL_ENTRIES {
                sit_blocks = st
                    .segs
                    .dirty_sentries
                    .iter()
                    .map(|&s| layout.sit_block(s, copy))
                    .collect();
                sit_blocks.sort_unstable();
                sit_blocks.dedup();
            }
            // SSA blocks of segments that left a log since the last checkpoint.
            let retired = st.segs.stats.new_segments + st.segs.stats.ssr_segments;
            let ssa_count = retired - st.retired_segments;
            st.retired_segments = retired;
            let first_ssa = layout.ssa_block(st.segs.current_segment(Log::WarmData));
            let ssa_blocks: Vec<u64> = (0..ssa_count.min(layout.main_segments))
                .map(|i| {
                    first_ssa.min(layout.main_blkaddr - ssa_count.min(layout.main_segments)) + i
                })
                .collect();
            // do_checkpoint: CP block, orphan blocks, compacted data summaries (7-byte
            // entries of the three data logs plus the two journals; at most 3 blocks).
            let pack = (st.cp_pack + 1) % 2;
            let orphan_blocks = (st.orphans.len() as u64).div_ceil(ORPHANS_PER_BLOCK);
            let summary_bytes = 7 * st.segs.data_log_fill()
                + 13 * st.dirty_nat.len().min(NAT_JOURNAL_ENTRIES) as u64
                + 78 * st.segs.dirty_sentries.len().min(SIT_JOURNAL_ENTRIES) as u64;
            let summary_blocks = summary_bytes.div_ceil(PAGE_SIZE).clamp(1, 3);
            let head: Vec<u64> = (0..1 + orphan_blocks)
                .map(|i| layout.cp_block(pack, i))
                .collect();
            let sums: Vec<u64> = (0..summary_blocks)
                .map(|i| layout.cp_block(pack, 1 + orphan_blocks + i))
                .collect();
            let tail = layout.cp_block(pack, 1 + orphan_blocks + summary_blocks);
            let mut bios = Self::write_bios(
                &nat_blocks,
                Self::meta_flags(),
                issuer,
                IoPurpose::Nat,
                IoOp::Write,
            );
            bios.extend(Self::write_bios(
                &sit_blocks,
                Self::meta_flags(),
                issuer,
                IoPurpose::Sit,
                IoOp::Write,
            ));
            bios.extend(Self::write_bios(
                &ssa_blocks,
                Self::meta_flags(),
                issuer,
                IoPurpose::Summary,
                IoOp::Write,
            ));
            bios.extend(Self::write_bios(
                &head,
                Self::meta_flags(),
                issuer,
                IoPurpose::CpPack,
                IoOp::Write,
            ));
            bios.extend(Self::write_bios(
                &sums,
                Self::meta_flags(),
                issuer,
                IoPurpose::Summary,
                IoOp::Write,
            ));
            (
                bios,
                tail,
                (nat_blocks.len() as u64, sit_blocks.len() as u64),
            )
        };
        self.submit_and_wait(sim, meta_bios).await;
        // f2fs_flush_device_cache, then commit_checkpoint: the second CP block with
        // REQ_PREFLUSH | REQ_FUA (META_FLUSH).
        if self.config.barrier {
            self.flush(sim, issuer).await;
        }
        let flags = IoFlags {
            preflush: self.config.barrier,
            fua: self.config.barrier,
            ..Self::meta_flags()
        };
        let bio =
            BioRequest::for_pages(IoOp::Write, tail, 1, flags, issuer, None, IoPurpose::CpPack);
        crate::mm::bio::submit_bio_wait(&*self.bdev, sim, bio).await;
        // The checkpoint is on disk: NAT entries checkpointed, SIT bitmaps, prefree -> free.
        let freed = {
            let mut st = self.state.borrow_mut();
            st.cp_pack = (st.cp_pack + 1) % 2;
            st.stats.checkpoints += 1;
            st.stats.nat_block_writes += stats_update.0;
            st.stats.sit_block_writes += stats_update.1;
            st.last_cp = sim.now();
            for nid in std::mem::take(&mut st.dirty_nat) {
                if let Some(e) = st.nat.get_mut(&nid) {
                    e.checkpointed = true;
                }
            }
            let pending = std::mem::take(&mut st.pending_free_nids);
            st.free_nids.extend(pending);
            st.segs.checkpoint_done()
        };
        if self.checks.get() {
            self.check_consistency();
        }
        if self.config.discard && !freed.is_empty() {
            let layout = self.layout();
            let blocks: Vec<u64> = freed
                .iter()
                .flat_map(|&s| {
                    let start = layout.seg_start(s);
                    start..start + super::layout::BLOCKS_PER_SEG
                })
                .collect();
            let mut bios = Self::write_bios(
                &blocks,
                IoFlags::default(),
                issuer,
                IoPurpose::Discard,
                IoOp::Discard,
            );
            for bio in &mut bios {
                bio.issued_async = true;
            }
            self.state.borrow_mut().stats.discards += bios.len() as u64;
            // Discards are asynchronous (the discard thread); nobody waits for them.
            let _ = self.submit_all(sim, bios).await;
        }
    }

    // ----------------------------------------------------------------------------------------
    // Garbage collection
    // ----------------------------------------------------------------------------------------

    fn not_enough_free(&self, freed: u64) -> bool {
        let st = self.state.borrow();
        st.segs.not_enough_free(
            st.dirty_nodes.len() as u64,
            st.dirty_dents.len() as u64,
            freed,
        )
    }

    /// `f2fs_balance_fs`: when free sections are short, GC under `gc_lock` (mainline passes
    /// `init_gc_type = BG_GC`: a checkpoint first if prefree segments exist, then foreground
    /// GC if still short).
    pub async fn balance_fs(&self, sim: &Sim, issuer: Issuer) {
        if !self.not_enough_free(0) {
            return;
        }
        let start = sim.now();
        let _gc = self.gc_lock.lock(sim).await;
        if self.not_enough_free(0) {
            self.gc(sim, issuer, true).await;
        }
        self.state.borrow_mut().stats.gc_wait_ns += sim.now() - start;
    }

    /// `f2fs_gc` (mainline's loop). From `balance_fs` (`short`): checkpoint to free prefree
    /// segments, then foreground GC of greedy victims until enough sections would be free,
    /// checkpointing again whenever free sections are within `NR_GC_CHECKPOINT_SECS` (3) of
    /// the threshold and prefree segments exist, and once at the end (4.9) so the freed
    /// sections are usable. From the GC thread: one cost-benefit victim. Returns segments
    /// emptied.
    async fn gc(&self, sim: &Sim, issuer: Issuer, short: bool) -> u64 {
        let mut foreground = false;
        let mut freed = 0;
        let mut total = 0;
        let mut tried = BTreeSet::new();
        if short {
            if self.state.borrow().segs.prefree_segments() > 0 {
                self.state.borrow_mut().stats.cp_by_gc += 1;
                self.checkpoint(sim, issuer).await;
            }
            if !self.not_enough_free(0) {
                return 0;
            }
            foreground = true;
        }
        loop {
            let victim = {
                let st = self.state.borrow();
                if foreground {
                    st.segs.greedy_victim(&tried)
                } else {
                    st.segs.cost_benefit_victim(&tried)
                }
            };
            let Some(victim) = victim else {
                break;
            };
            tried.insert(victim);
            self.move_segment(sim, issuer, victim).await;
            {
                let mut st = self.state.borrow_mut();
                if foreground {
                    st.stats.fg_gc += 1;
                } else {
                    st.stats.bg_gc += 1;
                }
            }
            if self.state.borrow().segs.valid_in(victim) == 0 {
                freed += 1;
                total += 1;
            }
            if !foreground || !self.not_enough_free(freed) {
                break;
            }
            let near = {
                let st = self.state.borrow();
                st.segs.free_segments() <= st.segs.layout.reserved_segments + 3
                    && st.segs.prefree_segments() > 0
            };
            if near {
                self.state.borrow_mut().stats.cp_by_gc += 1;
                self.checkpoint(sim, issuer).await;
                freed = 0;
                tried.clear();
            }
        }
        if foreground && self.state.borrow().segs.prefree_segments() > 0 {
            self.state.borrow_mut().stats.cp_by_gc += 1;
            self.checkpoint(sim, issuer).await;
        }
        total
    }

    /// `do_garbage_collect` of one segment: reads its valid blocks and writes them anew.
    async fn move_segment(&self, sim: &Sim, issuer: Issuer, segno: u32) {
        let blocks = self.state.borrow().segs.valid_blocks_of(segno);
        if blocks.is_empty() {
            return;
        }
        let addrs: Vec<u64> = blocks.iter().map(|&(a, _)| u64::from(a)).collect();
        let read_flags = IoFlags {
            sync: true,
            ..IoFlags::default()
        };
        let reads = Self::write_bios(&addrs, read_flags, issuer, IoPurpose::GcMove, IoOp::Read);
        self.submit_and_wait(sim, reads).await;
        let now = sim.now();
        let new_blocks = {
            let mut guard = self.state.borrow_mut();
            let st = &mut *guard;
            let mut out = Vec::new();
            for (addr, owner) in blocks {
                // The block may have been overwritten or freed while it was read.
                if st.segs.owner(addr) != Some(owner) {
                    continue;
                }
                match owner {
                    Owner::Data { ino, index } => {
                        // The summary matched: the page's address is `addr`.
                        let ssr = self.ssr_allowed(st);
                        let Some(new) = Self::place_data(st, ino, index, Log::ColdData, now, ssr)
                        else {
                            st.stats.no_space += 1;
                            break;
                        };
                        st.stats.gc_moved_data += 1;
                        out.push(u64::from(new));
                    }
                    Owner::Node { nid } => {
                        let Some(new) = self.relocate_node(st, nid, now) else {
                            st.stats.no_space += 1;
                            break;
                        };
                        st.dirty_nodes.remove(&nid);
                        st.stats.node_writes -= 1;
                        st.stats.gc_moved_nodes += 1;
                        out.push(u64::from(new));
                    }
                }
            }
            out
        };
        let writes = Self::write_bios(
            &new_blocks,
            Self::sync_write_flags(),
            issuer,
            IoPurpose::GcMove,
            IoOp::Write,
        );
        self.submit_and_wait(sim, writes).await;
    }

    /// The GC thread (`gc_thread_func`) with `f2fs_balance_fs_bg`'s periodic checkpoint.
    async fn gc_thread(self: Rc<Self>, sim: Sim) {
        let issuer = Issuer {
            task: sim.current_task(),
            pid: F2FS_GC_PID,
            uid: 0,
            foreground: false,
        };
        let mut wait = GC_MIN_SLEEP;
        let mut next_gc = sim.now() + wait;
        let mut next_cp = sim.now() + self.config.checkpoint_interval;
        loop {
            let next = next_gc.min(next_cp);
            sim.sleep(next.saturating_sub(sim.now())).await;
            let now = sim.now();
            if now >= next_gc {
                let idle = now.saturating_sub(self.state.borrow().last_request) >= IDLE_INTERVAL;
                if self.config.background_gc && idle {
                    if let Some(_gc) = self.gc_lock.try_lock(&sim) {
                        let moved = self.gc(&sim, issuer, false).await;
                        // decrease_sleep_time / increase_sleep_time (10 s steps).
                        wait = if moved > 0 {
                            GC_MIN_SLEEP
                        } else {
                            (wait + 10 * NS_PER_SEC).min(GC_MAX_SLEEP)
                        };
                    }
                } else {
                    wait = (wait + 10 * NS_PER_SEC).min(GC_MAX_SLEEP);
                }
                next_gc = sim.now() + wait;
            }
            if sim.now() >= next_cp {
                // f2fs_balance_fs_bg: a checkpoint once CP_TIME has passed since the last.
                let since = sim.now().saturating_sub(self.state.borrow().last_cp);
                if since >= self.config.checkpoint_interval && self.is_dirty() {
                    self.state.borrow_mut().stats.cp_periodic += 1;
                    self.checkpoint(&sim, issuer).await;
                }
                let last = self.state.borrow().last_cp;
                next_cp = (last + self.config.checkpoint_interval).max(sim.now() + NS_PER_SEC);
            }
        }
    }

    // ----------------------------------------------------------------------------------------
    // Invariants
    // ----------------------------------------------------------------------------------------

    fn record_violation(&self, what: String) {
        let mut v = self.violation.borrow_mut();
        if v.is_none() {
            *v = Some(what);
        }
    }

    /// A checkpoint is consistent: the SIT's valid blocks are exactly the blocks the files
    /// and the NAT reference, each referenced once, each owned by its referrer.
    pub fn check_consistency(&self) {
        if let Some(what) = self.consistency_error() {
            self.record_violation(what);
        }
    }

    fn consistency_error(&self) -> Option<String> {
        let st = self.state.borrow();
        let mut referenced = 0u64;
        for (&ino, inode) in &st.inodes {
            for (index, &addr) in inode.addrs.iter().enumerate() {
                if addr == NULL_ADDR || addr == NEW_ADDR {
                    continue;
                }
                referenced += 1;
                let expected = Owner::Data {
                    ino,
                    index: index as u64,
                };
                if st.segs.owner(addr) != Some(expected) {
                    return Some(format!(
                        "f2fs: page {ino}:{index} points at block {addr}, whose summary is not it"
                    ));
                }
            }
        }
        for (&nid, e) in &st.nat {
            if e.addr == NULL_ADDR || e.addr == NEW_ADDR {
                continue;
            }
            referenced += 1;
            if st.segs.owner(e.addr) != Some(Owner::Node { nid }) {
                return Some(format!(
                    "f2fs: NAT entry of node {nid} points at block {}, whose summary is not it",
                    e.addr
                ));
            }
        }
        let valid = st.segs.total_valid();
        if valid != referenced || valid != st.segs.valid_blocks {
            return Some(format!(
                "f2fs: SIT counts {valid} valid blocks, files and NAT reference {referenced}"
            ));
        }
        None
    }

    // ----------------------------------------------------------------------------------------
    // Atomic writes
    // ----------------------------------------------------------------------------------------

    async fn atomic_ioctl(
        &self,
        sim: &Sim,
        issuer: Issuer,
        ino: Ino,
        cmd: FsIoctl,
        i_mutex: Mutex,
    ) -> Result<(), Errno> {
        self.note_request(sim);
        let is_dir = self.state.borrow().inodes.get(&ino).map(|i| i.is_dir);
        match is_dir {
            None => return Err(Errno::EBADF),
            Some(true) => return Err(Errno::EINVAL),
            Some(false) => {}
        }
        let mm = self.mm();
        match cmd {
            FsIoctl::StartAtomicWrite => {
                let _g = i_mutex.lock(sim).await;
                // f2fs_ioc_start_atomic_write writes back what is dirty first and leaves
                // inline data (f2fs_convert_inline_inode).
                mm.write_and_wait_range(sim, ino, 0, u64::MAX, issuer).await;
                self.convert_inline(sim, issuer, ino).await;
                self.state
                    .borrow_mut()
                    .inodes
                    .get_mut(&ino)
                    .expect("inode")
                    .atomic = true;
                Ok(())
            }
            FsIoctl::CommitAtomicWrite => {
                let _g = i_mutex.lock(sim).await;
                if !self.state.borrow().inodes[&ino].atomic {
                    return Ok(());
                }
                self.balance_fs(sim, issuer).await;
                self.state
                    .borrow_mut()
                    .inodes
                    .get_mut(&ino)
                    .expect("inode")
                    .committing = true;
                // f2fs_commit_inmem_pages: every page out of place, waited for.
                mm.write_and_wait_range(sim, ino, 0, u64::MAX, issuer).await;
                self.fsync(sim, issuer, ino, false, true).await;
                let mut st = self.state.borrow_mut();
                let inode = st.inodes.get_mut(&ino).expect("inode");
                inode.committing = false;
                inode.atomic = false;
                st.stats.atomic_commits += 1;
                Ok(())
            }
            FsIoctl::AbortAtomicWrite => {
                let _g = i_mutex.lock(sim).await;
                let was_atomic = {
                    let mut st = self.state.borrow_mut();
                    let inode = st.inodes.get_mut(&ino).expect("inode");
                    std::mem::replace(&mut inode.atomic, false)
                };
                if was_atomic {
                    // f2fs_drop_inmem_pages: the in-memory pages are dropped; reserved blocks
                    // never written are released.
                    mm.truncate_pages(sim, ino, 0, u64::MAX).await;
                    let mut st = self.state.borrow_mut();
                    let released: u64 = {
                        let inode = st.inodes.get_mut(&ino).expect("inode");
                        let mut n = 0;
                        for a in inode.addrs.iter_mut() {
                            if *a == NEW_ADDR {
                                *a = NULL_ADDR;
                                n += 1;
                            }
                        }
                        n
                    };
                    st.reserved_new -= released;
                    st.stats.atomic_aborts += 1;
                }
                Ok(())
            }
        }
    }
}

/// `get_block` for the page cache, over the mounted file system.
#[derive(Default)]
pub struct F2fsMapping {
    fs: OnceCell<Weak<F2fs>>,
}

impl AddressSpaceOps for F2fsMapping {
    fn get_block(&mut self, ino: Ino, index: u64, create: bool) -> Result<Option<u64>, Errno> {
        let fs = self
            .fs
            .get()
            .and_then(Weak::upgrade)
            .expect("mounted before use");
        if let Some(block) = fs.block_of(ino, index) {
            return Ok(Some(block));
        }
        if !create {
            return Ok(None);
        }
        // O_DIRECT's f2fs_map_blocks(F2FS_GET_BLOCK_DIO): a block now, out of place (an
        // inline file leaves its inode block first; its inline bytes are not rewritten here).
        if let Some(inode) = fs.state.borrow_mut().inodes.get_mut(&ino) {
            inode.inline = false;
        }
        fs.reserve_page(ino, index)?;
        let mut st = fs.state.borrow_mut();
        let ssr = fs.ssr_allowed(&st);
        let log = st.inodes.get(&ino).map_or(Log::WarmData, F2fs::data_log);
        let now = st.last_request;
        let addr = F2fs::place_data(&mut st, ino, index, log, now, ssr).ok_or(Errno::ENOSPC)?;
        st.inodes.get_mut(&ino).expect("placed").append_write = true;
        Ok(Some(u64::from(addr)))
    }
}

/// The page cache's write and writeback hooks.
pub struct F2fsHooks {
    fs: Rc<F2fs>,
    issuers: Rc<crate::fs::ext4::glue::Issuers>,
}

impl FsHooks for F2fsHooks {
    fn write_begin<'a>(&'a self, sim: &'a Sim, _ino: Ino) -> LocalBoxFuture<'a, FsToken> {
        Box::pin(async move {
            self.fs.note_request(sim);
            let issuer = self.issuers.current(sim);
            self.fs.balance_fs(sim, issuer).await;
            Box::new(()) as FsToken
        })
    }

    fn reserve(&self, ino: Ino, index: u64) -> Result<(), Errno> {
        self.fs.reserve_page(ino, index)
    }

    fn write_end<'a>(
        &'a self,
        sim: &'a Sim,
        _token: FsToken,
        ino: Ino,
        _reserved: bool,
        new_size: Option<u64>,
    ) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            let size = match new_size {
                Some(size) => {
                    // f2fs_i_size_write: the inode block is dirty.
                    self.fs.state.borrow_mut().dirty_nodes.insert(ino as u32);
                    Some(size)
                }
                None => {
                    let st = self.fs.state.borrow();
                    st.inodes
                        .get(&ino)
                        .filter(|i| i.convert_pending)
                        .map(|i| i.size)
                }
            };
            if let Some(size) = size {
                let issuer = self.issuers.current(sim);
                self.fs.note_size(sim, issuer, ino, size).await;
            }
        })
    }

    fn writepages_begin<'a>(
        &'a self,
        sim: &'a Sim,
        issuer: Issuer,
        _ino: Ino,
        _unmapped: Vec<(u64, u64)>,
    ) -> LocalBoxFuture<'a, Result<FsToken, Errno>> {
        Box::pin(async move {
            self.issuers.record(issuer);
            // f2fs_write_single_data_page: writeback balances the file system too.
            self.fs.balance_fs(sim, issuer).await;
            Ok(Box::new(()) as FsToken)
        })
    }

    fn writepages_end<'a>(&'a self, _sim: &'a Sim, _token: FsToken) -> LocalBoxFuture<'a, ()> {
        Box::pin(async {})
    }

    fn remap_for_writeback(&self, sim: &Sim, _issuer: Issuer, ino: Ino, index: u64) {
        self.fs.remap(sim, ino, index);
    }

    fn absorb_for_writeback(&self, ino: Ino, index: u64) -> bool {
        self.fs.absorb_inline(ino, index)
    }

    fn holds_back_writeback(&self, ino: Ino) -> bool {
        self.fs
            .state
            .borrow()
            .inodes
            .get(&ino)
            .is_some_and(|i| i.atomic && !i.committing)
    }
}

/// F2FS as the VFS drives it.
pub struct F2fsOps {
    pub fs: Rc<F2fs>,
    issuers: Rc<crate::fs::ext4::glue::Issuers>,
}

impl FileSystemOps for F2fsOps {
    fn name(&self) -> &str {
        "f2fs"
    }

    fn root(&self) -> Ino {
        ROOT_INO
    }

    fn create<'a>(
        &'a self,
        sim: &'a Sim,
        issuer: Issuer,
        dir: Ino,
        name: &'a str,
        is_dir: bool,
    ) -> LocalBoxFuture<'a, Result<Ino, Errno>> {
        Box::pin(async move {
            self.issuers.record(issuer);
            self.fs.note_request(sim);
            self.fs.balance_fs(sim, issuer).await;
            let mut st = self.fs.state.borrow_mut();
            if st.segs.valid_blocks + st.reserved_new + 1 > st.segs.layout.user_blocks() {
                return Err(Errno::ENOSPC);
            }
            let ino = F2fs::new_inode(&mut st, dir, name, is_dir, self.fs.config.inline_data);
            self.fs.touch_dentry(&mut st, dir, name, 1);
            Ok(ino)
        })
    }

    fn create_at_setup(&self, dir: Ino, name: &str, is_dir: bool) -> Result<Ino, Errno> {
        let mut st = self.fs.state.borrow_mut();
        let ino = F2fs::new_inode(&mut st, dir, name, is_dir, self.fs.config.inline_data);
        if let Some(d) = st.inodes.get_mut(&dir) {
            d.entries += 1;
        }
        settle_setup(&self.fs, &mut st)?;
        Ok(ino)
    }

    fn populate_blocks(&self, ino: Ino, size: u64) -> Result<(), Errno> {
        let pages = size.div_ceil(PAGE_SIZE);
        let mut st = self.fs.state.borrow_mut();
        {
            let inode = st.inodes.get_mut(&ino).ok_or(Errno::ENOENT)?;
            inode.size = size;
            if inode.inline && size <= MAX_INLINE_DATA {
                // The data is in the inode block, written at setup.
                return settle_setup(&self.fs, &mut st);
            }
            inode.inline = false;
        }
        let log = st.inodes.get(&ino).map_or(Log::WarmData, F2fs::data_log);
        for index in 0..pages {
            if st.segs.valid_blocks + 1 > st.segs.layout.user_blocks() {
                return Err(Errno::ENOSPC);
            }
            let addr = st
                .segs
                .allocate(log, Owner::Data { ino, index }, 0, false)
                .ok_or(Errno::ENOSPC)?;
            F2fs::set_addr(st.inodes.get_mut(&ino).ok_or(Errno::ENOENT)?, index, addr);
            F2fs::dirty_node_of(&mut st, ino, index);
        }
        settle_setup(&self.fs, &mut st)
    }

    fn unlink<'a>(
        &'a self,
        sim: &'a Sim,
        issuer: Issuer,
        dir: Ino,
        name: &'a str,
        _last_link: bool,
    ) -> LocalBoxFuture<'a, Result<(), Errno>> {
        Box::pin(async move {
            self.issuers.record(issuer);
            self.fs.note_request(sim);
            self.fs.balance_fs(sim, issuer).await;
            let mut st = self.fs.state.borrow_mut();
            self.fs.touch_dentry(&mut st, dir, name, -1);
            if let Some(ino) = st.names.remove(&(dir, name.to_string())) {
                // The inode's link count changed: its block is dirty; with no link left it
                // is an orphan until evicted.
                st.dirty_nodes.insert(ino as u32);
                st.orphans.insert(ino);
            }
            Ok(())
        })
    }

    fn rename<'a>(
        &'a self,
        sim: &'a Sim,
        issuer: Issuer,
        old_dir: Ino,
        old_name: &'a str,
        new_dir: Ino,
        new_name: &'a str,
        replaced_last_link: bool,
    ) -> LocalBoxFuture<'a, Result<(), Errno>> {
        Box::pin(async move {
            self.issuers.record(issuer);
            self.fs.note_request(sim);
            self.fs.balance_fs(sim, issuer).await;
            let mut st = self.fs.state.borrow_mut();
            self.fs.touch_dentry(&mut st, old_dir, old_name, -1);
            let delta = if replaced_last_link { 0 } else { 1 };
            self.fs.touch_dentry(&mut st, new_dir, new_name, delta);
            // f2fs_rename: the moved inode's ctime changes (its block is dirty); moved to
            // another directory, its recorded parent is stale (file_lost_pino) until a
            // checkpoint. A replaced inode loses its link.
            if let Some(replaced) = st.names.remove(&(new_dir, new_name.to_string())) {
                st.dirty_nodes.insert(replaced as u32);
                st.orphans.insert(replaced);
            }
            if let Some(ino) = st.names.remove(&(old_dir, old_name.to_string())) {
                st.names.insert((new_dir, new_name.to_string()), ino);
                if let Some(inode) = st.inodes.get_mut(&ino) {
                    inode.times_dirty = true;
                    if old_dir != new_dir {
                        inode.wrong_pino = true;
                        inode.pino = new_dir;
                    }
                }
            }
            Ok(())
        })
    }

    fn evict<'a>(&'a self, sim: &'a Sim, _issuer: Issuer, ino: Ino) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            self.fs.note_request(sim);
            let mut guard = self.fs.state.borrow_mut();
            let st = &mut *guard;
            F2fs::truncate_from(st, ino, 0);
            let Some(inode) = st.inodes.remove(&ino) else {
                return;
            };
            // f2fs_remove_inode_page: every node block invalidated, its nid freed after the
            // next checkpoint.
            for (_, nid) in inode.nodes {
                st.dirty_nodes.remove(&nid);
                if let Some(e) = st.nat.remove(&nid) {
                    if e.addr != NULL_ADDR && e.addr != NEW_ADDR {
                        st.segs.invalidate(e.addr);
                    }
                }
                st.dirty_nat.insert(nid);
                st.pending_free_nids.push(nid);
            }
            st.orphans.remove(&ino);
        })
    }

    fn setattr_size<'a>(
        &'a self,
        sim: &'a Sim,
        issuer: Issuer,
        ino: Ino,
        old_size: u64,
        new_size: u64,
    ) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            self.fs.note_request(sim);
            {
                let mut st = self.fs.state.borrow_mut();
                if new_size < old_size {
                    F2fs::truncate_from(&mut st, ino, new_size.div_ceil(PAGE_SIZE));
                }
                st.dirty_nodes.insert(ino as u32);
            }
            self.fs.note_size(sim, issuer, ino, new_size).await;
        })
    }

    fn update_time<'a>(&'a self, _sim: &'a Sim, ino: Ino) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            if let Some(inode) = self.fs.state.borrow_mut().inodes.get_mut(&ino) {
                inode.times_dirty = true;
            }
        })
    }

    fn fsync_begin(&self, ino: Ino, datasync: bool, dirty_pages: u64) {
        // f2fs_do_sync_file: FI_NEED_IPU for fdatasync or a small fsync.
        if let Some(inode) = self.fs.state.borrow_mut().inodes.get_mut(&ino) {
            inode.need_ipu = datasync || dirty_pages <= MIN_FSYNC_BLOCKS;
        }
    }

    fn fsync<'a>(
        &'a self,
        sim: &'a Sim,
        issuer: Issuer,
        ino: Ino,
        datasync: bool,
        _write_inode: bool,
        i_mutex: Mutex,
    ) -> LocalBoxFuture<'a, ()> {
        Box::pin(async move {
            self.issuers.record(issuer);
            // F2FS keeps its own inode dirtiness (timestamps, size), as f2fs_do_sync_file
            // asks f2fs_skip_inode_update rather than the VFS.
            let _guard = i_mutex.lock(sim).await;
            self.fs.fsync(sim, issuer, ino, datasync, false).await;
        })
    }

    fn ioctl<'a>(
        &'a self,
        sim: &'a Sim,
        issuer: Issuer,
        ino: Ino,
        cmd: FsIoctl,
        i_mutex: Mutex,
    ) -> LocalBoxFuture<'a, Result<(), Errno>> {
        Box::pin(async move {
            self.issuers.record(issuer);
            self.fs.atomic_ioctl(sim, issuer, ino, cmd, i_mutex).await
        })
    }

    fn supports_atomic_write(&self) -> bool {
        true
    }

    fn sync_fs<'a>(&'a self, sim: &'a Sim, issuer: Issuer) -> LocalBoxFuture<'a, ()> {
        // f2fs_sync_fs: a checkpoint (CP_SYNC), skipped when nothing changed.
        Box::pin(async move {
            self.issuers.record(issuer);
            self.fs.note_request(sim);
            self.fs.state.borrow_mut().stats.cp_by_sync += 1;
            self.fs.checkpoint(sim, issuer).await;
        })
    }

    fn open_for_write(&self, _ino: Ino) {}

    fn release_writer(&self, _ino: Ino) -> bool {
        false
    }

    fn flush_on_rename(&self, _ino: Ino) -> bool {
        false
    }

    fn counters(&self) -> Vec<(String, u64)> {
        let s = self.fs.stats();
        let (free, dirty, prefree) = self.fs.segment_counts();
        let segs = self.fs.state.borrow().segs.stats.clone();
        [
            ("checkpoints", s.checkpoints),
            ("cp_skipped_clean", s.cp_skipped),
            ("cp_fsync_dir", s.cp_by_fsync_dir),
            ("cp_parent_not_checkpointed", s.cp_by_parent),
            ("cp_wrong_pino", s.cp_by_pino),
            ("cp_strict", s.cp_by_strict),
            ("cp_gc", s.cp_by_gc),
            ("cp_sync", s.cp_by_sync),
            ("cp_periodic", s.cp_periodic),
            ("fsync_roll_forward", s.fsync_roll_forward),
            ("fsync_flush_only", s.fsync_flush_only),
            ("fsync_nothing", s.fsync_nothing),
            ("ipu_pages", s.ipu_pages),
            ("opu_pages", s.opu_pages),
            ("node_writes", s.node_writes),
            ("nat_block_writes", s.nat_block_writes),
            ("sit_block_writes", s.sit_block_writes),
            ("fg_gc_segments", s.fg_gc),
            ("bg_gc_segments", s.bg_gc),
            ("gc_moved_data", s.gc_moved_data),
            ("gc_moved_nodes", s.gc_moved_nodes),
            ("gc_wait_us", s.gc_wait_ns / 1000),
            ("inline_writes", s.inline_writes),
            ("inline_conversions", s.inline_conversions),
            ("atomic_commits", s.atomic_commits),
            ("atomic_aborts", s.atomic_aborts),
            ("discard_bios", s.discards),
            ("no_space", s.no_space),
            ("new_segments", segs.new_segments),
            ("ssr_segments", segs.ssr_segments),
            ("free_segments", free),
            ("dirty_segments", dirty),
            ("prefree_segments", prefree),
        ]
        .into_iter()
        .map(|(k, v)| (format!("f2fs.{k}"), v))
        .collect()
    }

    fn enable_checks(&self) {
        self.fs.checks.set(true);
    }

    fn violation(&self) -> Option<String> {
        self.fs.violation.borrow().clone()
    }

    fn check_end_of_run(&self, _sim: &Sim) {
        self.fs.check_consistency();
    }
}

/// Setup operations leave everything checkpointed (the phone booted from a clean state).
fn settle_setup(fs: &F2fs, st: &mut State) -> Result<(), Errno> {
    let dirty: Vec<u32> = std::mem::take(&mut st.dirty_nodes).into_iter().collect();
    for nid in dirty {
        if st.nat.contains_key(&nid) && fs.relocate_node(st, nid, 0).is_none() {
            return Err(Errno::ENOSPC);
        }
    }
    st.stats.node_writes = 0;
    // Only entries changed since the last settle are not checkpointed yet (each new or
    // rewritten node is in dirty_nat): thousands of setup files stay linear.
    for nid in std::mem::take(&mut st.dirty_nat) {
        if let Some(e) = st.nat.get_mut(&nid) {
            e.checkpointed = true;
        }
    }
    st.dirty_dents.clear();
    st.segs.settle();
    st.retired_segments = st.segs.stats.new_segments + st.segs.stats.ssr_segments;
    Ok(())
}

/// Mounts F2FS over `size_bytes` of `bdev`, starting the page cache through `start_mm` and the
/// GC thread.
pub fn mount(
    sim: &Sim,
    config: F2fsConfig,
    size_bytes: u64,
    bdev: Rc<dyn BlockSubmit>,
    start_mm: impl FnOnce(Rc<RefCell<dyn AddressSpaceOps>>) -> Rc<Mm>,
) -> Result<(Rc<Mm>, Rc<F2fsOps>), String> {
    let layout = Layout::format(size_bytes)?;
    let mapping = Rc::new(RefCell::new(F2fsMapping::default()));
    let mm = start_mm(mapping.clone());
    let fs = Rc::new(F2fs::new(sim, config, layout, bdev.clone()));
    let _ = fs.mm.set(Rc::downgrade(&mm));
    let _ = mapping.borrow().fs.set(Rc::downgrade(&fs));
    let issuers = Rc::new(crate::fs::ext4::glue::Issuers::default());
    mm.set_fs_hooks(Rc::new(F2fsHooks {
        fs: fs.clone(),
        issuers: issuers.clone(),
    }));
    bdev.register_task(F2FS_GC_PID, 0, F2FS_GC_COMM);
    let (s, f) = (sim.clone(), fs.clone());
    let handle = sim.spawn_daemon(F2FS_GC_COMM, async move { f.gc_thread(s).await });
    fs.gc_task.set(Some(handle.task()));
    issuers.record(Issuer {
        task: Some(handle.task()),
        pid: F2FS_GC_PID,
        uid: 0,
        foreground: false,
    });
    Ok((mm, Rc::new(F2fsOps { fs, issuers })))
}
