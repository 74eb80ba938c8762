//! FastTrack (seed 001: "FastTrack: Foreground App-Aware I/O Management for Improving User
//! Experience of Android Smartphones", USENIX ATC'18): the foreground app's I/O preempts
//! background I/O through the page allocator, the page reclaimer, the I/O dispatcher and the
//! device queue. This module holds the switches and the app status detector's rules; each
//! mechanism lives in the layer it belongs to and is named for FastTrack there:
//!
//! - **App status detector** (§4.1): the UID of the top activity is the scenario timeline's
//!   foreground ([`crate::task::ForegroundState`], changed by `[[timeline]]` events as Android's
//!   activity manager would); the UID-indexed table of processes and threads is
//!   [`crate::task::TaskTable`] (`pids_of`, kept as tasks start). Service UIDs (below
//!   [`AID_APP_START`]) are never foreground and never preempted ([`is_app_uid`]). The kernel
//!   side reads the foreground UID directly, as FastTrack's sysfs hand-off delivers it.
//! - **Preemptive page allocator, PA** (§4.2, `pa`): `src/mm/vmscan.rs` (`alloc_page_global`:
//!   a background holder of the global page-cache lock releases it between reclaim batches when
//!   a foreground allocation waits; foreground waiters take the lock first, regardless of
//!   arrival, [`crate::sim::sync::Mutex::lock_urgent`]) and `src/mm/filemap.rs` (the copies of
//!   `do_generic_file_read` and `generic_perform_write`, one page per segment: at each
//!   segment's end the lock and the core go to a waiting foreground task first,
//!   [`crate::sim::cpu::Cpu::run_urgent`]). Under `page_cache_lock = "linux"` there is no lock
//!   to yield: PA is then the core hand-off alone.
//! - **FG-aware page reclaimer, PR** (§4.3, `pr`): `vmscan::FastTrackReclaim`, victims in the
//!   order BG clean > BG dirty > FG clean > FG dirty.
//! - **I/O dispatcher, ID** (§4.4, `id`): `src/block/queue.rs` (`RequestQueue::insert_request`):
//!   a request of the foreground app goes to the dispatch list instead of the elevator. Sync
//!   requests are the foreground app's by their task; async ones (the flusher's) by their pages'
//!   owner ([`crate::block::request::Bio::owner_uid`]), which is what FastTrack's LBA lookup
//!   finds.
//! - **FG-aware device queue** (§4.5): any FastTrack module turns the detector on, and requests
//!   of the foreground app then carry the foreground flag to the device
//!   (`Request::foreground`), which the device's `fg-aware` scheduler reads
//!   (`[stack.device] scheduler = "fg-aware"`, `src/dev/sched/fg_aware.rs`).
//!
//! Simplifications: no allocation in the model is atomic (`GFP_ATOMIC`: interrupt handlers,
//! spinlocked sections allocate no page-cache page here), so PA's exclusion of atomic context has
//! nothing to exclude.
//!
//! A page's owner (what PR and ID read) is the app that brought the page into the page cache
//! (`page_owner = "first"`, the default): the paper does not define it, and this is how Linux
//! charges a page-cache page to a memory cgroup (3.10's `add_to_page_cache_locked` ->
//! `mem_cgroup_cache_charge`; a later reader or writer of another cgroup does not re-charge
//! it). `page_owner = "last"` makes the owner the app that last read or wrote the page; the two
//! differ only for pages two apps share.

use serde::{Deserialize, Serialize};

/// `AID_APP_START` (Android `system/core/libcutils/include/private/android_filesystem_config.h`):
/// the first UID of installed apps (10000-19999); below it are system services, which FastTrack
/// §4.2 excludes from preemption.
pub const AID_APP_START: u32 = 10_000;

/// Whether `uid` is an installed app's (not a system service's, FastTrack §4.2).
pub fn is_app_uid(uid: u32) -> bool {
    uid >= AID_APP_START
}

/// `[stack.fasttrack]`: FastTrack's modules, each switchable for the ablation of Figure 10
/// (PA, PR, ID alone; FastT- = all three; FastT = all three with the device's `fg-aware`
/// scheduler).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct FastTrackConfig {
    /// The preemptive page allocator (§4.2).
    pub pa: bool,
    /// The FG-aware page reclaimer (§4.3).
    pub pr: bool,
    /// The I/O dispatcher (§4.4).
    pub id: bool,
    /// How the I/O dispatcher moves a foreground request to the dispatch list (§4.4 says only
    /// "moves them to the dispatch queue immediately"; FastTrack's code is not published).
    pub id_path: IdPath,
    /// Which app owns a page for PR and ID.
    pub page_owner: PageOwner,
}

/// Which app owns a page-cache page ([`FastTrackConfig::page_owner`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PageOwner {
    /// The app whose read or write brought the page into the page cache, as a memory cgroup is
    /// charged (`mem_cgroup_cache_charge` at `add_to_page_cache_locked`).
    #[default]
    First,
    /// The app that last read or wrote the page.
    Last,
}

/// The I/O dispatcher's path to the dispatch list ([`FastTrackConfig::id_path`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum IdPath {
    /// Past the I/O scheduler: the request goes straight to the dispatch list and the scheduler
    /// never sees it (its queues, slices and idling carry on as if the request did not exist).
    Bypass,
    /// Through the I/O scheduler's own dispatch: the request is inserted, its queue becomes
    /// the one served and the request is dispatched from it at once (CFQ:
    /// `cfq_dispatch_insert` on the queue made active), so the scheduler keeps serving that
    /// queue (its slice, and its idling for the next request) as it would have. Only CFQ has
    /// this path (the papers' phones ran CFQ); under another scheduler the dispatcher takes the
    /// bypass. The default: it reproduces §5.1's direction for ID (about -11 %) on the N6 with
    /// and without command queueing, where the bypass slows cold launches on a one-command
    /// eMMC by taking them out of CFQ's sync slice (docs/techniques.md). A foreground
    /// write the flusher issues sits in CFQ's shared async queue: it is taken out alone and
    /// the queue CFQ serves keeps its slice (made active, the shared queue would serve the
    /// background apps' writes with it; `Cfq::dispatch_now`).
    #[default]
    Elevator,
}

impl FastTrackConfig {
    /// Whether any module is on (the app status detector runs with any of them, §5.1: "the app
    /// status detector was enabled by default").
    pub fn enabled(&self) -> bool {
        self.pa || self.pr || self.id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_uids_are_not_apps_and_any_module_enables_the_detector() {
        assert!(!is_app_uid(1000), "system_server");
        assert!(!is_app_uid(9999));
        assert!(is_app_uid(10_000));
        assert!(!FastTrackConfig::default().enabled());
        for config in [
            FastTrackConfig {
                pa: true,
                ..Default::default()
            },
            FastTrackConfig {
                pr: true,
                ..Default::default()
            },
            FastTrackConfig {
                id: true,
                ..Default::default()
            },
        ] {
            assert!(config.enabled());
        }
        let parsed: FastTrackConfig = toml::from_str("pa = true\nid = true").unwrap();
        assert!(parsed.pa && parsed.id && !parsed.pr);
        assert_eq!(parsed.page_owner, PageOwner::First);
        let parsed: FastTrackConfig = toml::from_str("pr = true\npage_owner = \"last\"").unwrap();
        assert_eq!(parsed.page_owner, PageOwner::Last);
        assert!(toml::from_str::<FastTrackConfig>("page_owner = \"app\"").is_err());
        assert!(toml::from_str::<FastTrackConfig>("pq = true").is_err());
    }
}
