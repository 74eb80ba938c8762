//! Behaviour of the flash model as a whole: the device-queue priority inversion of FastTrack §3.4
//! and its fix (§4.5), garbage collection under sustained random writes, die parallelism, flush,
//! FUA, discard, the SLC buffer, and the completion invariants.

use super::bench::SplitMix64;
use super::flash::FlashDevice;
use super::profile::{builtin_profile, DeviceConfig, DeviceProfile, SuspendPolicy};
use super::{BlockDevice, DevCompletion, DevRequest, IoFlags, IoOp};
use crate::units::{Nanos, NS_PER_MS, NS_PER_US};
use std::collections::BTreeMap;

const MIB: u64 = 1024 * 1024;
const GIB: u64 = 1024 * MIB;

fn request(tag: u64, op: IoOp, sector: u64, nr_sectors: u32, foreground: bool) -> DevRequest {
    DevRequest {
        tag,
        op,
        sector,
        nr_sectors,
        flags: IoFlags::default(),
        foreground,
    }
}

fn device(profile: DeviceProfile, scheduler: Option<&str>, fill: f64) -> FlashDevice {
    let mut device = FlashDevice::new(profile, scheduler).unwrap();
    device.precondition(fill).unwrap();
    device
}

/// Runs the device until idle, returning completions by tag.
fn drain(device: &mut FlashDevice) -> BTreeMap<u64, DevCompletion> {
    let mut all = BTreeMap::new();
    let mut completions = Vec::new();
    while let Some(at) = device.next_event() {
        device.advance(at, &mut completions);
        for completion in completions.drain(..) {
            assert!(
                all.insert(completion.tag, completion).is_none(),
                "completed twice"
            );
        }
    }
    assert_eq!(device.in_flight(), 0);
    all
}

fn latency(completion: &DevCompletion) -> Nanos {
    completion.completed_ns - completion.submitted_ns
}

/// FastTrack §3.4: with reads served before writes inside the device, a foreground write queued
/// behind background reads waits for them; FastTrack's FG-aware order (§4.5) lets it go first.
#[test]
fn fg_write_waits_behind_bg_reads_under_fifo_read_priority_but_not_under_fg_aware() {
    let mut profile = builtin_profile("emmc-5.1").unwrap();
    profile.capacity = GIB;
    let mut latencies = Vec::new();
    for scheduler in ["fifo-read-priority", "fg-aware"] {
        let mut device = device(profile.clone(), Some(scheduler), 0.5);
        assert!(profile.controller_slots < profile.queue_depth);
        let mut rng = SplitMix64(1);
        let region = device.capacity_sectors() / 2 / 8;
        // A background app fills the device queue with random reads...
        for tag in 0..31 {
            let sector = rng.next_u64() % region * 8;
            device.submit(0, request(tag, IoOp::Read, sector, 8, false));
        }
        // ...and the foreground app writes 4 KiB behind them.
        device.submit(0, request(99, IoOp::Write, 0, 8, true));
        let done = drain(&mut device);
        let write = done[&99];
        let reads_before_write = done
            .values()
            .filter(|c| c.tag != 99 && c.completed_ns <= write.completed_ns)
            .count();
        latencies.push((scheduler, latency(&write), reads_before_write));
    }
    println!("FG 4 KiB write behind 31 BG reads (scheduler, latency ns, reads done first): {latencies:?}");
    let (_, fifo_ns, fifo_reads) = latencies[0];
    let (_, fg_ns, fg_reads) = latencies[1];
    // Under fifo-read-priority the write starts only after every queued read has started.
    assert!(fifo_reads >= 31 - profile.controller_slots, "{latencies:?}");
    assert!(fg_reads <= 1, "{latencies:?}");
    assert!(fifo_ns > 5 * fg_ns, "{latencies:?}");
}

/// Under cmd-priority a request with the priority flag overtakes queued ones of either type.
#[test]
fn cmd_priority_lets_a_flagged_request_overtake() {
    let mut profile = builtin_profile("ufs-2.0").unwrap();
    profile.capacity = GIB;
    let mut results = Vec::new();
    for scheduler in ["fifo-read-priority", "cmd-priority"] {
        let mut device = device(profile.clone(), Some(scheduler), 0.5);
        for tag in 0..31 {
            device.submit(0, request(tag, IoOp::Read, tag * 4096, 8, false));
        }
        let mut flagged = request(99, IoOp::Read, 999 * 8, 8, true);
        flagged.flags.prio = true;
        device.submit(0, flagged);
        results.push(latency(&drain(&mut device)[&99]));
    }
    assert!(results[0] > 2 * results[1], "{results:?}");
}

/// A profile where per-command firmware time is negligible, so NAND resources dominate.
fn parallel_profile() -> DeviceProfile {
    let mut profile = builtin_profile("emmc-5.1").unwrap();
    profile.capacity = GIB;
    profile.read_overhead = NS_PER_US;
    profile.write_overhead = NS_PER_US;
    // Fast channels and bus, so transfers do not hide the array time.
    profile.channel_bandwidth = 1_000_000_000;
    profile.bus_bandwidth = 1_000_000_000;
    profile
}

#[test]
fn requests_to_different_dies_proceed_in_parallel_and_to_the_same_die_do_not() {
    let profile = parallel_profile();
    let read_ns = profile.read_time;
    // Four reads, each on a different die (dies 0..4 sit on both channels).
    let mut spread = device(profile.clone(), None, 0.5);
    for die in 0..4u32 {
        let sector = spread.sector_on_die(die, 0);
        spread.submit(0, request(u64::from(die), IoOp::Read, sector, 8, false));
    }
    let spread_end = drain(&mut spread)
        .values()
        .map(|c| c.completed_ns)
        .max()
        .unwrap();
    // Four reads of different program units on die 0.
    let mut same = device(profile.clone(), None, 0.5);
    let mut sector = 0;
    for tag in 0..4u64 {
        sector = same.sector_on_die(0, sector + 64 * 8 * 8);
        same.submit(0, request(tag, IoOp::Read, sector, 8, false));
    }
    let same_end = drain(&mut same)
        .values()
        .map(|c| c.completed_ns)
        .max()
        .unwrap();
    println!("4 reads on 4 dies end at {spread_end} ns; 4 reads on one die end at {same_end} ns");
    assert!(
        spread_end < 2 * read_ns,
        "different dies overlap: {spread_end} ns"
    );
    assert!(same_end >= 4 * read_ns, "one die serialises: {same_end} ns");
    assert_eq!(same.nand().die_busy_ns(0), 4 * read_ns);
    assert_eq!(same.nand().die_busy_ns(1), 0);
}

/// Sustained random 4 KiB writes on a full device: once free blocks run out, greedy GC copies
/// valid pages and erases blocks on the dies, and write latency rises.
#[test]
fn sustained_random_writes_on_a_full_device_trigger_gc_and_latency_rises() {
    let mut profile = builtin_profile("emmc-5.1").unwrap();
    profile.capacity = 256 * MIB;
    profile.pages_per_block = 32;
    let mut device = device(profile, None, 1.0);
    let units = device.capacity_sectors() / 8;
    let mut rng = SplitMix64(3);
    let total = 32_768u64;
    let window = 4096u64;
    let mut issued = 0;
    let mut now = 0;
    let mut completions = Vec::new();
    let mut latencies = Vec::with_capacity(total as usize);
    let mut gc_copied_at_first_window = None;
    while (latencies.len() as u64) < total {
        while issued < total && device.in_flight() < 32 {
            let sector = rng.next_u64() % units * 8;
            device.submit(now, request(issued, IoOp::Write, sector, 8, false));
            issued += 1;
        }
        now = device.next_event().unwrap();
        device.advance(now, &mut completions);
        for completion in completions.drain(..) {
            latencies.push(latency(&completion));
        }
        if latencies.len() as u64 >= window && gc_copied_at_first_window.is_none() {
            gc_copied_at_first_window = Some(device.stats().ftl.gc_units_copied);
        }
    }
    let mean = |slice: &[Nanos]| slice.iter().sum::<Nanos>() / slice.len() as Nanos;
    let first = mean(&latencies[..window as usize]);
    let last = mean(&latencies[(total - window) as usize..]);
    let stats = device.stats();
    assert_eq!(
        gc_copied_at_first_window,
        Some(0),
        "no GC while free blocks last"
    );
    assert!(
        stats.ftl.gc_units_copied > 0 && stats.ftl.blocks_erased > 0,
        "{stats:?}"
    );
    assert!(stats.gc_busy_ns > 0);
    println!(
        "random 4 KiB writes at QD32 on a full device: mean latency of the first {window} {first} ns, of the last {window} {last} ns; {:?}",
        stats.ftl
    );
    assert!(
        last > 2 * first,
        "GC raises latency: first {first} ns, last {last} ns"
    );
}

#[test]
fn flush_waits_for_cached_writes_and_a_clean_flush_is_cheap() {
    let mut profile = builtin_profile("emmc-5.1").unwrap();
    profile.capacity = GIB;
    let mut device = device(profile.clone(), None, 0.5);
    device.submit(0, request(0, IoOp::Flush, 0, 0, false));
    let clean = latency(&drain(&mut device)[&0]);
    assert_eq!(clean, profile.flush_overhead, "nothing to persist");
    let now = NS_PER_MS;
    device.submit(now, request(1, IoOp::Write, 0, 8, false));
    let write = drain(&mut device)[&1];
    assert!(
        latency(&write) < profile.program_time,
        "a cached write does not wait for NAND"
    );
    device.submit(write.completed_ns, request(2, IoOp::Flush, 0, 0, false));
    let dirty = latency(&drain(&mut device)[&2]);
    assert!(
        dirty >= profile.program_time,
        "the flush programs the cached page: {dirty}"
    );
    let mut fua = request(3, IoOp::Write, 4096, 8, false);
    fua.flags.fua = true;
    device.submit(100 * NS_PER_MS, fua);
    assert!(latency(&drain(&mut device)[&3]) >= profile.program_time);
}

#[test]
fn a_write_carrying_its_flushes_pays_each_flush_command_like_a_flush_request() {
    // blk-flush (block/blk-flush.c, blk_flush_complete_seq / blk_kick_flush) turns a
    // REQ_PREFLUSH | REQ_FUA write into a flush command, the write, and (no native FUA) a
    // post-flush command: each flush is a command of its own with the firmware's cost to
    // start it. The model carries them on the one write; it must charge the same. Before
    // this, a commit block's flushes cost nothing on a clean cache, and a device fitted to a
    // measured flush (`device fit --measure`) made an fsync 5x too short.
    let commit_latency = |flush_overhead: Nanos| {
        let mut profile = builtin_profile("emmc-5.1").unwrap();
        profile.capacity = GIB;
        profile.flush_overhead = flush_overhead;
        let mut device = device(profile, None, 0.5);
        let mut commit = request(0, IoOp::Write, 0, 8, false);
        commit.flags.preflush = true;
        commit.flags.postflush = true;
        device.submit(0, commit);
        latency(&drain(&mut device)[&0])
    };
    let free = commit_latency(0);
    let costly = commit_latency(2 * NS_PER_MS);
    assert_eq!(
        costly - free,
        2 * 2 * NS_PER_MS,
        "each of the two flush commands costs flush_overhead ({free} ns -> {costly} ns)"
    );
}

#[test]
fn discard_unmaps_and_costs_time_per_mapped_page() {
    let mut profile = builtin_profile("ufs-2.0").unwrap();
    profile.capacity = GIB;
    let mut device = device(profile.clone(), None, 0.5);
    let sectors = 16 * MIB / 512;
    device.submit(0, request(0, IoOp::Discard, 0, sectors as u32, false));
    let mapped = latency(&drain(&mut device)[&0]);
    assert_eq!(
        mapped,
        profile.discard_overhead + 4096 * profile.discard_per_page
    );
    assert_eq!(device.ftl().lookup(0), super::ftl::UNMAPPED);
    // Discarding it again finds nothing mapped.
    device.submit(
        NS_PER_MS * 100,
        request(1, IoOp::Discard, 0, sectors as u32, false),
    );
    assert_eq!(latency(&drain(&mut device)[&1]), profile.discard_overhead);
    // Reads of discarded pages cost no NAND time.
    let busy_before = device.nand().die_busy_ns(0);
    device.submit(NS_PER_MS * 200, request(2, IoOp::Read, 0, 8, false));
    drain(&mut device);
    assert_eq!(device.nand().die_busy_ns(0), busy_before);
}

/// WriteBooster: writes go at SLC speed until the buffer is full, then at TLC speed.
#[test]
fn sequential_writes_slow_down_when_the_slc_buffer_is_exhausted() {
    let mut profile = builtin_profile("ufs-3.1").unwrap();
    profile.capacity = 2 * GIB;
    profile.slc_buffer = 64 * MIB;
    let mut device = device(profile, None, 0.0);
    let chunk = 1024u32; // 512 KiB
    let mut now = 0;
    let mut completions = Vec::new();
    let mut times = Vec::new();
    let total = 512u64; // 256 MiB
    let mut issued = 0;
    while (times.len() as u64) < total {
        while issued < total && device.in_flight() < 32 {
            device.submit(
                now,
                request(issued, IoOp::Write, issued * u64::from(chunk), chunk, false),
            );
            issued += 1;
        }
        now = device.next_event().unwrap();
        device.advance(now, &mut completions);
        times.extend(completions.drain(..).map(|c| c.completed_ns));
    }
    // Time for the first 32 MiB against the last 32 MiB.
    let early = times[63] - times[0];
    let late = times[511] - times[448];
    println!("SLC buffer 64 MiB: first 32 MiB in {early} ns, last 32 MiB in {late} ns");
    assert!(late > 3 * early, "early {early} ns, late {late} ns");
    assert!(device.stats().slc_programs > 0);
}

/// Mixed random traffic: every request completes exactly once, in time order, deterministically.
/// With program/erase suspend on (every read may suspend), too: moved completions keep the
/// order and the once-only delivery.
#[test]
fn mixed_traffic_completes_every_request_once_and_is_deterministic() {
    for suspend in [SuspendPolicy::Off, SuspendPolicy::Reads] {
        let (first, stats) = mixed_traffic(suspend);
        assert_eq!(first.len(), 3000);
        let mut tags: Vec<u64> = first.iter().map(|c| c.0).collect();
        assert!(
            first.windows(2).all(|w| w[0].2 <= w[1].2),
            "completion order is time order"
        );
        tags.sort_unstable();
        tags.dedup();
        assert_eq!(tags.len(), 3000, "each request completes exactly once");
        assert!(first.iter().all(|c| c.2 >= c.1));
        assert_eq!(
            (first, stats),
            mixed_traffic(suspend),
            "same inputs, same outputs"
        );
        println!("{suspend:?}: {:?}", stats.suspend);
        if suspend == SuspendPolicy::Off {
            assert_eq!(stats.suspend, Default::default());
        } else {
            assert!(stats.suspend.suspends > 0, "{:?}", stats.suspend);
            assert!(
                stats.completions_delayed > 0,
                "FUA writes and flushes were moved"
            );
        }
        assert!(stats.nand_programs > 0);
    }
}

type CompletionLog = Vec<(u64, Nanos, Nanos)>;

fn mixed_traffic(suspend: SuspendPolicy) -> (CompletionLog, super::flash::DeviceStats) {
    {
        let config = DeviceConfig {
            profile: "emmc-5.1".into(),
            capacity: Some(GIB),
            suspend: Some(suspend),
            ..DeviceConfig::default()
        };
        let mut device = config.build_flash().unwrap();
        let units = device.capacity_sectors() / 8;
        let mut rng = SplitMix64(11);
        let mut now = 0;
        let mut log = Vec::new();
        let mut completions = Vec::new();
        for tag in 0..3000u64 {
            while device.in_flight() >= device.queue_depth() {
                now = device.next_event().unwrap();
                device.advance(now, &mut completions);
            }
            let op = match rng.next_u64() % 20 {
                0 => IoOp::Flush,
                1 => IoOp::Discard,
                2..=9 => IoOp::Read,
                _ => IoOp::Write,
            };
            let sectors = if op == IoOp::Flush {
                0
            } else {
                8 << (rng.next_u64() % 6)
            };
            let sector = (rng.next_u64() % (units - 64)) * 8;
            let mut r = request(tag, op, sector, sectors, rng.next_u64() & 1 == 0);
            r.flags.sync = rng.next_u64() & 1 == 0;
            r.flags.fua = op == IoOp::Write && rng.next_u64().is_multiple_of(4);
            device.submit(now, r);
            now += rng.next_u64() % (200 * NS_PER_US);
            device.advance(now, &mut completions);
        }
        while let Some(at) = device.next_event() {
            device.advance(at, &mut completions);
        }
        for c in &completions {
            log.push((c.tag, c.submitted_ns, c.completed_ns));
        }
        (log, device.stats())
    }
}

/// Program suspend: a foreground read that finds its die programming a FUA write's data waits
/// for the program without suspend, and with it is served after the suspend latency; the
/// write (which waits for its program) then completes later by the suspend latency, the read
/// and the resume overhead. A background read does not suspend under the `foreground` policy.
#[test]
fn a_foreground_read_suspends_a_program_and_the_write_behind_it_completes_later() {
    let mut profile = builtin_profile("emmc-5.1").unwrap();
    profile.capacity = GIB;
    let run = |suspend: SuspendPolicy, foreground: bool| {
        let mut profile = profile.clone();
        profile.suspend = suspend;
        let mut device = device(profile.clone(), None, 0.5);
        let target = device.sector_on_die(0, 0);
        let other = device.sector_on_die(0, target + 64 * 1024);
        let mut write = request(1, IoOp::Write, target, 8, false);
        write.flags.fua = true;
        device.submit(0, write);
        // Half a millisecond in, the die is programming.
        let mut completions = Vec::new();
        device.advance(500 * NS_PER_US, &mut completions);
        assert!(completions.is_empty());
        device.submit(
            500 * NS_PER_US,
            request(2, IoOp::Read, other, 8, foreground),
        );
        let done = drain(&mut device);
        (latency(&done[&2]), done[&1].completed_ns, device.stats())
    };
    let (read_waits, write_done, plain) = run(SuspendPolicy::Off, true);
    let (read_suspends, write_later, suspended) = run(SuspendPolicy::Foreground, true);
    let (bg_read, bg_write, bg) = run(SuspendPolicy::Foreground, false);
    println!(
        "read behind a program: {read_waits} ns without suspend, {read_suspends} ns with; write done {write_done} -> {write_later}"
    );
    assert_eq!(plain.suspend.suspends, 0);
    assert_eq!(suspended.suspend.suspends, 1);
    assert_eq!(bg.suspend, Default::default(), "a BG read does not suspend");
    assert_eq!((bg_read, bg_write), (read_waits, write_done));
    // Without suspend the read waits for most of the program (1.868 ms, from about 0.1 ms).
    assert!(read_waits > profile.program_time / 2, "{read_waits}");
    // With it: firmware overhead, suspend latency, array read, channel and bus transfers.
    let transfers = 2 * 50 * NS_PER_US;
    assert!(
        read_suspends
            <= profile.read_overhead
                + profile.program_suspend_latency
                + profile.read_time
                + transfers,
        "{read_suspends}"
    );
    assert!(read_suspends >= profile.program_suspend_latency + profile.read_time);
    assert_eq!(
        write_later - write_done,
        profile.program_suspend_latency + profile.read_time + profile.suspend_resume_overhead,
        "the FUA write completes when its resumed program ends"
    );
}

/// eMMC's bus is half duplex: a write's data transfer and a read's data transfer take turns; on a
/// full-duplex link (UFS) they overlap.
#[test]
fn half_duplex_bus_serialises_opposite_transfers() {
    let mut ends = Vec::new();
    for full_duplex in [false, true] {
        let mut profile = parallel_profile();
        profile.full_duplex = full_duplex;
        // A slow bus, so the transfers dominate.
        profile.bus_bandwidth = 50_000_000;
        let mut device = device(profile, None, 0.5);
        device.submit(0, request(0, IoOp::Write, 1 << 20, 1024, false));
        device.submit(0, request(1, IoOp::Read, 0, 1024, false));
        let done = drain(&mut device);
        ends.push(done.values().map(|c| c.completed_ns).max().unwrap());
    }
    let transfer_ns = 512 * 1024 * 1_000_000_000 / 50_000_000;
    assert!(ends[0] >= 2 * transfer_ns, "half duplex: {ends:?}");
    assert!(
        ends[1] < transfer_ns + transfer_ns / 2,
        "full duplex: {ends:?}"
    );
}

/// WriteBooster flush: an idle device migrates its SLC buffer to TLC, so writes are fast again.
#[test]
fn the_slc_buffer_drains_to_tlc_while_the_device_is_idle() {
    let mut profile = builtin_profile("ufs-3.1").unwrap();
    profile.capacity = 2 * GIB;
    profile.slc_buffer = 64 * MIB;
    let mut device = device(profile, None, 0.0);
    let chunk = 1024u32; // 512 KiB
                         // Writes `count` chunks from `first` at QD32 starting at `start`; returns the elapsed time.
    let burst = |device: &mut FlashDevice, first: u64, count: u64, start: Nanos| -> Nanos {
        let mut now = start;
        let mut completions = Vec::new();
        let (mut issued, mut done) = (0, 0);
        while done < count {
            while issued < count && device.in_flight() < 32 {
                let sector = (first + issued) * u64::from(chunk);
                device.submit(
                    now,
                    request(first + issued, IoOp::Write, sector, chunk, false),
                );
                issued += 1;
            }
            now = device.next_event().unwrap();
            device.advance(now, &mut completions);
            done += completions.drain(..).count() as u64;
        }
        now - start
    };
    // Exhaust the buffer (256 MiB), then write 32 MiB at once and after 10 s of idle time.
    let exhaust = burst(&mut device, 0, 512, 0);
    let busy = burst(&mut device, 512, 64, exhaust);
    let after_idle = burst(&mut device, 576, 64, exhaust + busy + 10 * NS_PER_MS * 1000);
    println!(
        "32 MiB right after exhausting the SLC buffer: {busy} ns; after 10 s idle: {after_idle} ns"
    );
    assert!(device.stats().slc_units_migrated > 0);
    assert!(
        busy > 3 * after_idle,
        "busy {busy} ns, after idle {after_idle} ns"
    );
}
