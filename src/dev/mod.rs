//! Storage devices: the bottom of the stack.
//!
//! A device is a pure, discrete-event state machine (DESIGN.md principle 7): the block layer hands it
//! requests with [`BlockDevice::submit`], asks when it next has something to do with
//! [`BlockDevice::next_event`], and lets virtual time pass with [`BlockDevice::advance`], which
//! reports the requests that completed. The device never awaits and never reads a clock of its own,
//! so the same model can be driven by the simulator, by `mobistack device bench`, or by a test.

pub mod bench;
pub mod cache;
pub mod crash;
pub mod energy;
pub mod fixed;
pub mod flash;
pub mod ftl;
pub mod nand;
pub mod profile;
pub mod sched;

pub use flash::FlashDevice;
pub use profile::{build_device, profile_names, Completion, DeviceConfig, DeviceProfile};

use crate::units::Nanos;

/// A xorshift64 generator for the device models' property tests (dev may not import
/// `sim::rng`): the same sequence for the same non-zero seed.
#[cfg(test)]
pub(crate) fn test_rng(seed: u64) -> impl FnMut() -> u64 {
    assert_ne!(seed, 0, "xorshift needs a non-zero seed");
    let mut state = seed;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

/// What a request asks the device to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IoOp {
    Read,
    Write,
    /// Cache flush (REQ_PREFLUSH without data): persist the volatile write cache.
    Flush,
    /// Discard / TRIM / UNMAP of the sector range.
    Discard,
}

impl IoOp {
    pub fn is_write(self) -> bool {
        matches!(self, IoOp::Write | IoOp::Discard | IoOp::Flush)
    }
}

/// Request flags, named after Linux's `REQ_*` flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize)]
pub struct IoFlags {
    /// REQ_SYNC: someone waits for this request.
    pub sync: bool,
    /// REQ_META: file-system metadata.
    pub meta: bool,
    /// REQ_PRIO: boosted priority (also the UFS Command Priority / eMMC CMDQ priority bit).
    pub prio: bool,
    /// REQ_FUA: write through the volatile cache.
    pub fua: bool,
    /// REQ_PREFLUSH: flush the volatile cache before this request.
    pub preflush: bool,
    /// `REQ_FSEQ_POSTFLUSH` of the block layer's flush sequence: flush the cache after this
    /// write. Set by the request queue, never by a submitter: a FUA write to a device that does
    /// not support FUA becomes the write and a cache flush after it (`blk_flush_policy`,
    /// block/blk-flush.c).
    pub postflush: bool,
    /// REQ_NOIDLE (3.x): the submitter will not issue more I/O right after this one, so CFQ
    /// should not idle for it. `WRITE_SYNC`, `WRITE_FLUSH`, `WRITE_FUA` and `WRITE_FLUSH_FUA`
    /// carry it; `WRITE_ODIRECT` and reads do not (include/linux/fs.h, 3.10).
    pub noidle: bool,
}

impl IoFlags {
    /// What a queue whose driver declares no flush leaves of a bio's flags: no preflush, no
    /// FUA, no post-flush (`generic_make_request_checks`, 3.10; `submit_bio_noacct`, mainline;
    /// [`BlockDevice::flush_declared`]).
    pub fn without_flush(self) -> IoFlags {
        IoFlags {
            fua: false,
            preflush: false,
            postflush: false,
            ..self
        }
    }
}

/// A request as the device sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DevRequest {
    /// Identifier chosen by the submitter, returned in the completion (like a blk-mq tag).
    pub tag: u64,
    pub op: IoOp,
    /// First 512-byte sector.
    pub sector: u64,
    /// Length in 512-byte sectors (0 for a flush).
    pub nr_sectors: u32,
    pub flags: IoFlags,
    /// Whether the issuing app is in the foreground (FastTrack's hint to the device queue).
    pub foreground: bool,
}

/// A finished request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DevCompletion {
    pub tag: u64,
    pub submitted_ns: Nanos,
    pub completed_ns: Nanos,
}

/// The interface between the block layer and a device model.
pub trait BlockDevice {
    /// Short name of the model or profile, for reports.
    fn name(&self) -> &str;
    /// Capacity in 512-byte sectors.
    fn capacity_sectors(&self) -> u64;
    /// How many requests the host may have outstanding at once (eMMC CMDQ 32, UFS 32 per LU, 1
    /// for eMMC before 5.1).
    fn queue_depth(&self) -> usize;
    /// Requests submitted and not yet completed.
    fn in_flight(&self) -> usize;
    /// Whether the host reaches the device through Linux's mmc block driver without command
    /// queueing (eMMC before 5.1, SD): its queue thread double-buffers requests
    /// (`mmc_queue_thread`, see `crate::block::queue`). SCSI/UFS and CMDQ hosts issue while the
    /// device has a free slot. Default: false.
    fn mmc_host(&self) -> bool {
        false
    }
    /// Writes the card accepts in one eMMC 4.5 packed command (`EXT_CSD_MAX_PACKED_WRITES`, used
    /// by the mmc driver when the host has `MMC_CAP2_PACKED_WR`); 0 or 1: no packed commands.
    fn packed_write_max(&self) -> u32 {
        0
    }
    /// Whether the device honours a command priority flag the host sets on real-time requests
    /// (UFS 2.1+ Command Priority, `UPIU_CMD_FLAGS_CP`; JESD220C). Default: false.
    fn command_priority(&self) -> bool {
        false
    }
    /// Whether the driver declares a cache flush to the block layer (`blk_queue_flush(q,
    /// REQ_FLUSH | REQ_FUA)` in 3.10, `blk_queue_write_cache(q, true, ..)` since 4.7). Without
    /// it the block layer ends an empty flush bio at once and strips the flush and FUA flags of
    /// a write (`generic_make_request_checks`, 3.10; `submit_bio_noacct`, mainline), so nothing
    /// reaches the device. Default: true.
    fn flush_declared(&self) -> bool {
        true
    }
    /// Whether the device honours FUA writes (the driver's `blk_queue_flush(q, REQ_FLUSH |
    /// REQ_FUA)`); without it the block layer turns a FUA write into the write and a cache
    /// flush after it. Default: true.
    fn fua(&self) -> bool {
        true
    }
    /// Whether the device has a volatile write cache (`QUEUE_FLAG_WC`, which writeback
    /// throttling reads). Default: false.
    fn write_cache(&self) -> bool {
        false
    }
    /// Hands a packed write command to an idle device at `now`: one command (one firmware
    /// overhead) carrying every write of `requests` in order; they complete together.
    /// Precondition: `in_flight() == 0` and `requests.len() <= packed_write_max()`.
    fn submit_packed(&mut self, now: Nanos, requests: &[DevRequest]) {
        let _ = (now, requests);
        panic!("{} takes no packed commands", self.name());
    }
    /// Hands a request to the device at time `now`. Precondition: `in_flight() < queue_depth()`.
    fn submit(&mut self, now: Nanos, request: DevRequest);
    /// The earliest time at which the device's state changes by itself (a completion or an
    /// internal step), or `None` when it is idle.
    fn next_event(&self) -> Option<Nanos>;
    /// Moves the device to time `now` (never earlier than the last call), appending every request
    /// that completed at or before `now` to `completions` in completion order.
    fn advance(&mut self, now: Nanos, completions: &mut Vec<DevCompletion>);
    /// The block device numbers (major, minor) the host gives it, as blktrace records them:
    /// `mmcblk0` (179, 0) for eMMC and SD cards, `sda` (8, 0) for UFS and SATA. Default: `sda`.
    fn device_numbers(&self) -> (u32, u32) {
        (8, 0)
    }
    /// Model-specific counters for the results file (e.g. NAND programs, GC copies, erases);
    /// `Null` when the model keeps none.
    fn stats_json(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
}

#[cfg(test)]
mod tests;
