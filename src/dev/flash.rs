//! `FlashDevice`: an eMMC / UFS / SSD model assembled from the host interface, the internal command
//! queue and its scheduling policy, the controller, the write cache and SLC buffer, the FTL and the
//! NAND array. It implements [`BlockDevice`] as a pure discrete-event state machine.
//!
//! Life of a command:
//! 1. `submit` puts it in the internal queue (at most `queue_depth` commands: eMMC CMDQ 32 tasks,
//!    UFS 32 transfer slots, eMMC before 5.1 one command).
//! 2. The controller works on at most `controller_slots` commands at once. When a slot is free, the
//!    internal scheduling policy ([`super::sched`]) picks the next command from the queue.
//! 3. Starting a command reserves, in order, the resources it needs on busy-until timelines: the
//!    controller firmware (per-command overhead, one core), NAND dies and channels (array reads,
//!    programs, GC, erases), the write cache (admission) and the host bus (one timeline for eMMC,
//!    which is half duplex; one per direction for UFS and SATA, which are full duplex). Its
//!    completion time follows from those reservations.
//! 4. The completion frees its slot at the completion time and the next command starts then.
//!
//! Reads fetch every mapped 4 KiB page of the range from its die (pages of one program unit are read
//! together), then move the data to the host; unmapped pages cost no NAND time (the device returns
//! zeros). Writes are admitted into the write cache chunk by chunk, transferred, and complete; full
//! program units are programmed in the background (FUA and write-through wait for them). FLUSH
//! programs the partial units left in the cache, waits for every program to end, and commits the
//! mapping table with one program if anything changed since the last flush. DISCARD invalidates
//! mappings at a firmware cost per mapped page.
//!
//! Program/erase suspend (profile `suspend`, off by default): a read the policy allows may suspend
//! the NAND program or erase in progress on its die and go ahead of die work not yet started
//! ([`NandArray::read_suspending`]); the programs it moves later carry their consequences: the
//! cache space they hold is released later, and a command that waits for them (a FUA or
//! write-through write, a flush) completes later.
//!
//! Simplifications: sub-4 KiB writes are treated as whole pages (no read-modify-write); a command's
//! reservations are made when it starts, and a later command may only use idle gaps before them
//! (no HPI; only a suspending read moves reservations already made); GC runs on demand, not in
//! idle time; reads of data in the SLC buffer use the native read time. When a suspend moves a
//! program, a command that waits for it completes no earlier than the program's new end, but
//! work placed after the program when the command started (the mapping-table commit of a flush
//! after a FUA write) is not moved with it; a cache admission already granted is not revised.

use super::cache::{SlcBuffer, WriteCache};
use super::ftl::{Ftl, UNMAPPED};
use super::nand::{
    transfer_ns, Geometry, NandArray, Shift, SuspendStats, SuspendTiming, Timeline, Timing,
    MAP_UNIT_BYTES,
};
use super::profile::{DeviceProfile, SuspendPolicy};
use super::sched::{self, InternalScheduler, QueuedCommand};
use super::{BlockDevice, DevCompletion, DevRequest, IoOp};
use crate::units::{Nanos, SECTOR_SIZE};
use std::collections::{BTreeMap, VecDeque};

/// Counters over the device's life (host view and NAND view).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct DeviceStats {
    pub reads: u64,
    pub writes: u64,
    pub flushes: u64,
    pub discards: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub nand_reads: u64,
    pub nand_programs: u64,
    pub slc_programs: u64,
    pub gc_busy_ns: Nanos,
    pub slc_units_migrated: u64,
    pub ftl: super::ftl::FtlStats,
    pub suspend: SuspendStats,
    /// Commands whose completion a suspend moved later.
    pub completions_delayed: u64,
}

/// A started command whose completion waits for NAND programs: those with reservation ids in
/// `from_op..upto_op`, and it completes at `done_ns`.
#[derive(Debug, Clone, Copy)]
struct ProgramWait {
    from_op: u64,
    upto_op: u64,
    done_ns: Nanos,
}

/// The started commands, by (completion time, arrival), each with its (tag, submitted time):
/// a vector sorted by key from the latest to the earliest, so that the command that completes
/// first is taken from the back without moving the others, and an insertion moves only the
/// commands that complete before it (one block move; reads on different dies complete out of
/// start order, so most insertions land inside). A B-tree searched, split and merged its nodes
/// for every command; a deque sorted the other way shifted through its ring. At most
/// `controller_slots` commands (a few dozen) are held.
#[derive(Debug, Default)]
struct ActiveCommands {
    latest_first: Vec<((Nanos, u64), (u64, Nanos))>,
}

impl ActiveCommands {
    fn len(&self) -> usize {
        self.latest_first.len()
    }

    /// The command that completes first.
    fn first(&self) -> Option<((Nanos, u64), (u64, Nanos))> {
        self.latest_first.last().copied()
    }

    /// Where `key` is, or would go, in the latest-first order.
    fn position(&self, key: &(Nanos, u64)) -> Result<usize, usize> {
        self.latest_first.binary_search_by(|(k, _)| key.cmp(k))
    }

    /// Adds a command; returns the one it replaced under the same key, if any.
    fn insert(&mut self, key: (Nanos, u64), value: (u64, Nanos)) -> Option<(u64, Nanos)> {
        match self.position(&key) {
            Ok(at) => Some(std::mem::replace(&mut self.latest_first[at].1, value)),
            Err(at) => {
                self.latest_first.insert(at, (key, value));
                None
            }
        }
    }

    fn remove(&mut self, key: &(Nanos, u64)) -> Option<(u64, Nanos)> {
        if self
            .latest_first
            .last()
            .is_some_and(|(first, _)| first == key)
        {
            return self.latest_first.pop().map(|(_, value)| value);
        }
        let at = self.position(key).ok()?;
        Some(self.latest_first.remove(at).1)
    }
}

#[derive(Debug)]
pub struct FlashDevice {
    profile: DeviceProfile,
    capacity_sectors: u64,
    now_ns: Nanos,
    next_seq: u64,
    /// Commands waiting for a controller slot, in arrival order, with their requests (rings:
    /// the oldest, the usual pick, leaves without moving the others).
    queue: VecDeque<QueuedCommand>,
    queued_requests: VecDeque<DevRequest>,
    /// Started commands by (completion time, arrival) -> (tag, submitted time).
    active: ActiveCommands,
    scheduler: Box<dyn InternalScheduler>,
    nand: NandArray,
    ftl: Ftl,
    cache: WriteCache,
    slc: SlcBuffer,
    controller_free_ns: Nanos,
    /// Host bus: index 0 is host-to-device (and both directions when half duplex), 1 device-to-host.
    bus: [Timeline; 2],
    /// Die that receives the next mapping-table commit.
    meta_die: u32,
    dirty_since_flush: bool,
    scratch_lpns: Vec<u32>,
    die_marks: Vec<bool>,
    stats: DeviceStats,
    suspend: SuspendTiming,
    /// Started commands (by arrival) that wait for programs a suspend may move.
    program_waits: BTreeMap<u64, ProgramWait>,
    scratch_shifts: Vec<Shift>,
}

impl FlashDevice {
    /// Builds a device from a validated profile; `scheduler` overrides the profile's policy.
    pub fn new(profile: DeviceProfile, scheduler: Option<&str>) -> Result<Self, String> {
        profile.validate()?;
        let scheduler = sched::by_name(scheduler.unwrap_or(&profile.scheduler))?;
        let geometry = Geometry {
            channels: profile.channels,
            dies_per_channel: profile.dies_per_channel,
            planes: profile.planes,
            page_bytes: profile.page_size as u32,
            pages_per_block: profile.pages_per_block,
        };
        let timing = Timing {
            read_ns: profile.read_time,
            program_ns: profile.program_time,
            erase_ns: profile.erase_time,
            slc_program_ns: profile.slc_program_time,
            slc_read_ns: profile.slc_read_time,
            channel_bytes_per_sec: profile.channel_bandwidth,
        };
        let logical_units = profile.capacity / MAP_UNIT_BYTES;
        let dies = geometry.dies();
        let ftl = Ftl::new(
            logical_units,
            dies,
            geometry.units_per_program(),
            geometry.units_per_block(),
            profile.over_provisioning,
            profile.gc_free_blocks,
        )?;
        let cache = WriteCache::new(profile.write_cache, dies, geometry.units_per_program());
        let slc = SlcBuffer::new(
            profile.slc_buffer / MAP_UNIT_BYTES,
            dies,
            geometry.units_per_program(),
            timing.slc_read_ns + timing.program_ns,
        );
        Ok(FlashDevice {
            capacity_sectors: logical_units * (MAP_UNIT_BYTES / SECTOR_SIZE),
            now_ns: 0,
            next_seq: 0,
            queue: VecDeque::with_capacity(profile.queue_depth),
            queued_requests: VecDeque::with_capacity(profile.queue_depth),
            active: ActiveCommands::default(),
            scheduler,
            nand: NandArray::new(geometry, timing),
            ftl,
            cache,
            slc,
            controller_free_ns: 0,
            bus: [Timeline::default(), Timeline::default()],
            meta_die: 0,
            dirty_since_flush: false,
            scratch_lpns: Vec::with_capacity(geometry.units_per_program() as usize),
            die_marks: vec![false; dies as usize],
            stats: DeviceStats::default(),
            suspend: SuspendTiming {
                program_suspend_ns: profile.program_suspend_latency,
                erase_suspend_ns: profile.erase_suspend_latency,
                resume_ns: profile.suspend_resume_overhead,
                max_per_op: profile.suspend_max,
            },
            program_waits: BTreeMap::new(),
            scratch_shifts: Vec::new(),
            profile,
        })
    }

    pub fn profile(&self) -> &DeviceProfile {
        &self.profile
    }

    pub fn scheduler_name(&self) -> &'static str {
        self.scheduler.name()
    }

    pub fn stats(&self) -> DeviceStats {
        let mut stats = self.stats;
        stats.ftl = self.ftl.stats;
        stats.slc_units_migrated = self.slc.units_migrated;
        stats.suspend = self.nand.suspend_stats();
        stats
    }

    pub fn ftl(&self) -> &Ftl {
        &self.ftl
    }

    pub fn nand(&self) -> &NandArray {
        &self.nand
    }

    /// The first sector stored on `die` at or after `from_sector` (for tests and benches that want
    /// to aim at a die).
    pub fn sector_on_die(&self, die: u32, from_sector: u64) -> u64 {
        let sectors_per_unit = MAP_UNIT_BYTES / SECTOR_SIZE;
        let mut lpn = (from_sector / sectors_per_unit) as u32;
        while self.ftl.die_of(lpn) != die {
            lpn += 1;
        }
        u64::from(lpn) * sectors_per_unit
    }

    /// Maps the first `fraction` of the logical space as if written sequentially once, at no time
    /// cost (a phone that is part full; reads of unwritten pages cost no NAND time).
    pub fn precondition(&mut self, fraction: f64) -> Result<(), String> {
        if !(0.0..=1.0).contains(&fraction) {
            return Err(format!(
                "fill {fraction} must be a fraction between 0 and 1"
            ));
        }
        let units = (self.ftl.logical_units() as f64 * fraction) as u64;
        if self.ftl.precondition_sequential(units) {
            return Ok(());
        }
        // Not a fresh FTL: program the pages, one program unit at a time.
        let per_program = u64::from(self.nand.geometry.units_per_program());
        let mut lpns = Vec::with_capacity(per_program as usize);
        let mut first = 0u64;
        while first < units {
            let last = (first + per_program).min(units);
            lpns.clear();
            lpns.extend((first..last).map(|l| l as u32));
            let die = self.ftl.die_of(first as u32);
            let work = self.ftl.program(die, &lpns);
            assert_eq!(work.units_copied, 0, "a sequential fill never needs GC");
            first = last;
        }
        Ok(())
    }

    fn lpn_range(&self, request: &DevRequest) -> std::ops::Range<u32> {
        let end_sector = request.sector + u64::from(request.nr_sectors);
        assert!(
            end_sector <= self.capacity_sectors,
            "request beyond the device: sectors {}..{} of {}",
            request.sector,
            end_sector,
            self.capacity_sectors
        );
        let sectors_per_unit = MAP_UNIT_BYTES / SECTOR_SIZE;
        let first = request.sector / sectors_per_unit;
        let last = end_sector.div_ceil(sectors_per_unit);
        first as u32..last as u32
    }

    fn bus_index(&self, to_host: bool) -> usize {
        usize::from(self.profile.full_duplex && to_host)
    }

    /// Credits a die's idle time before `at` to SLC-to-TLC migration.
    fn touch_die(&mut self, die: u32, at: Nanos) {
        let idle = at.saturating_sub(self.nand.die_free_ns(die));
        if idle > 0 && self.slc.enabled() {
            self.slc.idle(die, idle);
        }
    }

    /// Programs the lpns buffered for `die` (padding the unit) from `at`; returns the end.
    fn program_buffer(&mut self, die: u32, at: Nanos) -> Nanos {
        let mut lpns = std::mem::take(&mut self.scratch_lpns);
        lpns.clear();
        lpns.extend_from_slice(&self.cache.buffers[die as usize]);
        self.cache.buffers[die as usize].clear();
        assert!(!lpns.is_empty(), "programming an empty buffer");
        let work = self.ftl.program(die, &lpns);
        self.touch_die(die, at);
        let timing = self.nand.timing;
        let mut start = at;
        if work.units_copied > 0 || work.blocks_erased > 0 {
            let per_program = u64::from(self.nand.geometry.units_per_program());
            let copies = work.units_copied.div_ceil(per_program);
            let gc_ns = copies * (timing.read_ns + timing.program_ns)
                + work.blocks_erased * timing.erase_ns;
            start = self.nand.occupy(die, at, gc_ns).0;
            self.stats.gc_busy_ns += gc_ns;
        }
        let program_ns = if self.slc.enabled() && self.slc.take(die) {
            self.stats.slc_programs += 1;
            timing.slc_program_ns
        } else {
            timing.program_ns
        };
        let (end, program) = self.nand.program(die, start, program_ns);
        self.stats.nand_programs += 1;
        self.cache
            .release_at(end, lpns.len() as u64 * MAP_UNIT_BYTES, program);
        self.scratch_lpns = lpns;
        self.dirty_since_flush = true;
        end
    }

    /// Puts `lpn` in its die's buffer at `at`; returns the end of the program it triggered.
    fn buffer_lpn(&mut self, lpn: u32, at: Nanos) -> Option<Nanos> {
        let die = self.ftl.die_of(lpn);
        let buffer = &mut self.cache.buffers[die as usize];
        if buffer.contains(&lpn) {
            // Overwrite of data still in the cache: the new copy replaces the old one in place.
            self.cache.drop_bytes(MAP_UNIT_BYTES);
            return None;
        }
        buffer.push(lpn);
        if buffer.len() == self.nand.geometry.units_per_program() as usize {
            Some(self.program_buffer(die, at))
        } else {
            None
        }
    }

    /// Puts `lpns` (consecutive, within one striping unit, so all on `die`) in the die's buffer
    /// at `at`, as [`Self::buffer_lpn`] does one at a time; returns the end of the program they
    /// triggered. Into an empty buffer they go at once: distinct pages find no copy there, and
    /// at most the last fills the unit.
    fn buffer_run(&mut self, die: u32, lpns: std::ops::Range<u32>, at: Nanos) -> Option<Nanos> {
        let buffer = &mut self.cache.buffers[die as usize];
        if !buffer.is_empty() {
            let mut program_end = None;
            for lpn in lpns {
                debug_assert_eq!(self.ftl.die_of(lpn), die);
                program_end = program_end.or(self.buffer_lpn(lpn, at));
            }
            return program_end;
        }
        buffer.extend(lpns);
        (buffer.len() == self.nand.geometry.units_per_program() as usize)
            .then(|| self.program_buffer(die, at))
    }

    /// Programs every partial buffer from `at`; returns the latest program end (or `at`).
    fn destage_all(&mut self, at: Nanos) -> Nanos {
        let mut end = at;
        for die in 0..self.nand.geometry.dies() {
            if !self.cache.buffers[die as usize].is_empty() {
                end = end.max(self.program_buffer(die, at));
            }
        }
        end
    }

    fn read(&mut self, start: Nanos, request: &DevRequest) -> Nanos {
        let read_ns = self.nand.timing.read_ns;
        let suspending = self
            .profile
            .suspend
            .allows(request.foreground, request.flags.prio);
        let mut first_ready: Option<Nanos> = None;
        let mut ready = start;
        let mut last_bytes = 0;
        let mut group: Option<(u32, u32, u64)> = None; // (program unit, die, units)
        let range = self.lpn_range(request);
        let mut flush_group = |device: &mut Self, group: (u32, u32, u64)| {
            let (_, die, units) = group;
            device.touch_die(die, start);
            let bytes = units * MAP_UNIT_BYTES;
            let mut shifts = std::mem::take(&mut device.scratch_shifts);
            shifts.clear();
            let suspended = if suspending {
                let timing = device.suspend;
                device
                    .nand
                    .read_suspending(die, start, read_ns, bytes, &timing, &mut shifts)
            } else {
                None
            };
            let end = match suspended {
                Some(end) => {
                    device.apply_shifts(&shifts);
                    end
                }
                None => device.nand.read(die, start, read_ns, bytes),
            };
            device.scratch_shifts = shifts;
            device.stats.nand_reads += 1;
            first_ready = Some(first_ready.map_or(end, |t: Nanos| t.min(end)));
            ready = ready.max(end);
            last_bytes = units * MAP_UNIT_BYTES;
        };
        for lpn in range {
            let ppn = self.ftl.lookup(lpn);
            if ppn == UNMAPPED {
                continue;
            }
            let unit = self.ftl.program_unit_of(ppn);
            match group {
                Some((current, die, units)) if current == unit => {
                    group = Some((current, die, units + 1))
                }
                _ => {
                    if let Some(done) = group.take() {
                        flush_group(self, done);
                    }
                    group = Some((unit, self.ftl.die_of(lpn), 1));
                }
            }
        }
        if let Some(done) = group.take() {
            flush_group(self, done);
        }
        let bytes = u64::from(request.nr_sectors) * SECTOR_SIZE;
        let bus = self.bus_index(true);
        let bus_ns = transfer_ns(bytes, self.profile.bus_bandwidth);
        let last_ns = transfer_ns(last_bytes.min(bytes), self.profile.bus_bandwidth);
        // The transfer to the host streams pages as they arrive; it is modelled as one burst
        // that ends no earlier than the last page plus its own transfer.
        let earliest = first_ready
            .unwrap_or(start)
            .max((ready + last_ns).saturating_sub(bus_ns));
        let bus_start = self.bus[bus].first_fit(earliest, bus_ns);
        self.bus[bus].reserve(bus_start, bus_ns);
        let bus_end = bus_start + bus_ns;
        self.stats.read_bytes += bytes;
        bus_end
    }

    fn write(&mut self, start: Nanos, request: &DevRequest) -> Nanos {
        let through = self.cache.write_through() || request.flags.fua;
        let per_program = self.nand.geometry.units_per_program();
        let range = self.lpn_range(request);
        let bus = self.bus_index(false);
        let mut cursor = start;
        let mut done = start;
        let mut first = range.start;
        while first < range.end {
            let last = (first + per_program).min(range.end);
            let bytes = u64::from(last - first) * MAP_UNIT_BYTES;
            let admitted = if self.cache.write_through() {
                cursor
            } else {
                match self.cache.admit(bytes, cursor) {
                    Some(at) => at,
                    None => {
                        self.destage_all(cursor);
                        self.cache
                            .admit(bytes, cursor)
                            .expect("destaging frees the whole cache")
                    }
                }
            };
            let chunk_ns = transfer_ns(bytes, self.profile.bus_bandwidth);
            let bus_start = self.bus[bus].first_fit(admitted, chunk_ns);
            self.bus[bus].reserve(bus_start, chunk_ns);
            let bus_end = bus_start + chunk_ns;
            cursor = bus_end;
            // The chunk's pages by striping unit: each run is on one die.
            let mut lpn = first;
            while lpn < last {
                let run_end = (lpn - lpn % per_program)
                    .saturating_add(per_program)
                    .min(last);
                let die = self.ftl.die_of(lpn);
                let program_end = self.buffer_run(die, lpn..run_end, cursor);
                if through {
                    self.die_marks[die as usize] = true;
                    if let Some(end) = program_end {
                        done = done.max(end);
                    }
                }
                lpn = run_end;
            }
            first = last;
        }
        done = done.max(cursor);
        if through {
            for die in 0..self.nand.geometry.dies() {
                if std::mem::take(&mut self.die_marks[die as usize])
                    && !self.cache.buffers[die as usize].is_empty()
                {
                    done = done.max(self.program_buffer(die, cursor));
                }
            }
        }
        self.stats.write_bytes += u64::from(request.nr_sectors) * SECTOR_SIZE;
        done
    }

    fn flush(&mut self, start: Nanos) -> Nanos {
        let mut done = self.destage_all(start).max(self.cache.persisted_ns());
        if self.dirty_since_flush {
            // Commit of the FTL's mapping-table/log page: one program, SLC mode when available.
            let die = self.meta_die;
            self.meta_die = (self.meta_die + 1) % self.nand.geometry.dies();
            self.touch_die(die, start);
            let timing = self.nand.timing;
            let program_ns = if self.slc.enabled() {
                timing.slc_program_ns
            } else {
                timing.program_ns
            };
            done = done.max(self.nand.program(die, start, program_ns).0);
            self.stats.nand_programs += 1;
            self.dirty_since_flush = false;
        }
        done
    }

    fn discard(&mut self, start: Nanos, request: &DevRequest) -> Nanos {
        let mut mapped = 0u64;
        for lpn in self.lpn_range(request) {
            let die = self.ftl.die_of(lpn) as usize;
            if let Some(position) = self.cache.buffers[die].iter().position(|&l| l == lpn) {
                self.cache.buffers[die].swap_remove(position);
                self.cache.drop_bytes(MAP_UNIT_BYTES);
            }
            if self.ftl.discard(lpn) {
                mapped += 1;
            }
        }
        if mapped > 0 {
            self.dirty_since_flush = true;
        }
        // The per-page mapping updates run on the controller after the command overhead.
        let end = self.controller_free_ns.max(start) + mapped * self.profile.discard_per_page;
        self.controller_free_ns = end;
        end
    }

    /// Carries the moves of a suspend to what depends on the moved programs: cache releases and
    /// the completions of commands that wait for them.
    fn apply_shifts(&mut self, shifts: &[Shift]) {
        for shift in shifts {
            assert!(shift.new_end_ns > shift.old_end_ns, "a shift moves later");
            self.cache.delay_release(shift.id, shift.new_end_ns);
            for (&seq, wait) in self.program_waits.iter_mut() {
                if !(wait.from_op..wait.upto_op).contains(&shift.id)
                    || shift.new_end_ns <= wait.done_ns
                {
                    continue;
                }
                let value = self
                    .active
                    .remove(&(wait.done_ns, seq))
                    .expect("a waiting command is active");
                wait.done_ns = shift.new_end_ns;
                let previous = self.active.insert((wait.done_ns, seq), value);
                assert!(previous.is_none(), "completion keys are unique");
                self.stats.completions_delayed += 1;
            }
        }
    }

    /// Which programs a command started now waits for: the ones it reserved (FUA or
    /// write-through), or every one reserved so far (a flush, before or after a write).
    fn program_wait(&self, request: &DevRequest, from_op: u64) -> Option<(u64, u64)> {
        let upto_op = self.nand.next_op_id();
        match request.op {
            IoOp::Flush => Some((0, upto_op)),
            IoOp::Write if request.flags.preflush || request.flags.postflush => Some((0, upto_op)),
            IoOp::Write if request.flags.fua || self.cache.write_through() => {
                Some((from_op, upto_op))
            }
            _ => None,
        }
    }

    /// Starts `request` at `now` and returns its completion time.
    fn execute(&mut self, now: Nanos, request: &DevRequest) -> Nanos {
        let overhead = match request.op {
            IoOp::Read => self.profile.read_overhead,
            IoOp::Write => self.profile.write_overhead,
            IoOp::Flush => self.profile.flush_overhead,
            IoOp::Discard => self.profile.discard_overhead,
        };
        self.nand.prune(now);
        self.bus.iter_mut().for_each(|line| line.prune(now));
        let start = self.controller_free_ns.max(now) + overhead;
        self.controller_free_ns = start;
        let done = match request.op {
            IoOp::Read => {
                self.stats.reads += 1;
                self.read(start, request)
            }
            IoOp::Write => {
                self.stats.writes += 1;
                // blk-flush issues a write's pre- and post-flush as flush commands of their
                // own (blk_kick_flush); each costs the firmware's flush_overhead to start, as
                // a flush request does.
                let flush_overhead = self.profile.flush_overhead;
                let start = if request.flags.preflush {
                    self.flush(start + flush_overhead)
                } else {
                    start
                };
                let written = self.write(start, request);
                if request.flags.postflush {
                    self.stats.flushes += 1;
                    self.flush(written + flush_overhead)
                } else {
                    written
                }
            }
            IoOp::Flush => {
                self.stats.flushes += 1;
                self.flush(start)
            }
            IoOp::Discard => {
                self.stats.discards += 1;
                self.discard(start, request)
            }
        };
        assert!(done >= now, "a command completes after it starts");
        done
    }

    /// When the controller can take the next queued command, if one is waiting for it.
    fn next_dispatch(&self) -> Option<Nanos> {
        let waiting = !self.queue.is_empty() && self.active.len() < self.profile.controller_slots;
        waiting.then_some(self.controller_free_ns.max(self.now_ns))
    }

    /// Starts queued commands while a slot is free and the controller is idle: the firmware picks
    /// the next command only when it is ready to process one, so the policy sees every command
    /// that arrived meanwhile.
    fn dispatch(&mut self, now: Nanos) {
        while self.active.len() < self.profile.controller_slots
            && !self.queue.is_empty()
            && self.controller_free_ns <= now
        {
            let index = self.scheduler.pick(now, &self.queue);
            assert!(
                index < self.queue.len(),
                "scheduler picked outside the queue"
            );
            // The oldest command, the usual pick, leaves the rings without a shift.
            let (command, request) = if index == 0 {
                (self.queue.pop_front(), self.queued_requests.pop_front())
            } else {
                (self.queue.remove(index), self.queued_requests.remove(index))
            };
            let command = command.expect("picked inside the queue");
            let request = request.expect("a request per queued command");
            let from_op = self.nand.next_op_id();
            let done = self.execute(now, &request);
            if self.profile.suspend != SuspendPolicy::Off {
                if let Some((from_op, upto_op)) = self.program_wait(&request, from_op) {
                    self.program_waits.insert(
                        command.seq,
                        ProgramWait {
                            from_op,
                            upto_op,
                            done_ns: done,
                        },
                    );
                }
            }
            let previous = self
                .active
                .insert((done, command.seq), (request.tag, command.submitted_ns));
            assert!(previous.is_none());
        }
    }
}

impl BlockDevice for FlashDevice {
    fn name(&self) -> &str {
        &self.profile.name
    }

    fn device_numbers(&self) -> (u32, u32) {
        self.profile.interface.device_numbers()
    }

    fn capacity_sectors(&self) -> u64 {
        self.capacity_sectors
    }

    /// eMMC and SD cards without a command queue sit behind the mmc block driver.
    fn mmc_host(&self) -> bool {
        matches!(
            self.profile.interface,
            super::profile::Interface::Emmc | super::profile::Interface::Sd
        ) && self.profile.queue_depth == 1
    }
    fn queue_depth(&self) -> usize {
        self.profile.queue_depth
    }

    fn in_flight(&self) -> usize {
        self.queue.len() + self.active.len()
    }

    fn command_priority(&self) -> bool {
        self.profile.cmd_priority
    }

    fn write_cache(&self) -> bool {
        self.profile.write_cache > 0
    }

    fn fua(&self) -> bool {
        self.profile.fua
    }

    /// The mmc block driver declares a flush only for an eMMC card with reliable writes:
    /// `mmc_blk_alloc_req` (drivers/mmc/card/block.c, 3.0 to 3.18) calls `blk_queue_flush(q,
    /// REQ_FLUSH | REQ_FUA)` under `mmc_card_mmc(card) && MMC_BLK_CMD23 && reliable write`, so an
    /// SD card's queue has no flush and the block layer drops its flushes. Mainline's
    /// `mmc_blk_alloc_req` (drivers/mmc/core/block.c) declares a cache for an SD card only when
    /// the card reports the SD 6.0 cache feature (`mmc_cache_enabled`), which the modelled UHS-I
    /// card (MobiFS's 2013 microSD) does not have: no flush in any era.
    fn flush_declared(&self) -> bool {
        !matches!(self.profile.interface, super::profile::Interface::Sd)
    }

    fn packed_write_max(&self) -> u32 {
        if self.mmc_host() {
            self.profile.packed_write_max
        } else {
            0
        }
    }

    /// One command: the firmware overhead once, then each write in order (its data on the bus,
    /// its pages into the cache); all complete when the last does.
    fn submit_packed(&mut self, now: Nanos, requests: &[DevRequest]) {
        assert_eq!(self.in_flight(), 0, "a packed command on a busy card");
        assert!(
            !requests.is_empty() && requests.len() <= self.packed_write_max() as usize,
            "packed command of {} writes",
            requests.len()
        );
        assert!(now >= self.now_ns, "time went backwards");
        self.now_ns = now;
        self.nand.prune(now);
        self.bus.iter_mut().for_each(|line| line.prune(now));
        let start = self.controller_free_ns.max(now) + self.profile.write_overhead;
        self.controller_free_ns = start;
        let mut done = start;
        let from_op = self.nand.next_op_id();
        for request in requests {
            assert_eq!(request.op, IoOp::Write, "only writes are packed");
            self.stats.writes += 1;
            done = self.write(done, request);
        }
        for request in requests {
            let seq = self.next_seq;
            self.next_seq += 1;
            self.active.insert((done, seq), (request.tag, now));
            if self.profile.suspend != SuspendPolicy::Off {
                if let Some((from_op, upto_op)) = self.program_wait(request, from_op) {
                    self.program_waits.insert(
                        seq,
                        ProgramWait {
                            from_op,
                            upto_op,
                            done_ns: done,
                        },
                    );
                }
            }
        }
    }

    fn submit(&mut self, now: Nanos, request: DevRequest) {
        assert!(
            self.in_flight() < self.profile.queue_depth,
            "device queue overflow"
        );
        assert!(now >= self.now_ns, "time went backwards");
        self.now_ns = now;
        let seq = self.next_seq;
        self.next_seq += 1;
        self.queue.push_back(QueuedCommand {
            seq,
            op: request.op,
            flags: request.flags,
            foreground: request.foreground,
            submitted_ns: now,
        });
        self.queued_requests.push_back(request);
        self.dispatch(now);
    }

    fn next_event(&self) -> Option<Nanos> {
        let completion = self.active.first().map(|((done, _), _)| done);
        match (completion, self.next_dispatch()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn advance(&mut self, now: Nanos, completions: &mut Vec<DevCompletion>) {
        assert!(now >= self.now_ns, "time went backwards");
        // Bound: every iteration completes or starts at least one command.
        loop {
            let completion = self.active.first();
            let dispatch = self.next_dispatch();
            match (completion, dispatch) {
                (Some(((done, seq), (tag, submitted))), _)
                    if done <= now && dispatch.is_none_or(|d| done <= d) =>
                {
                    assert!(done >= self.now_ns, "completion in the past");
                    self.active.remove(&(done, seq));
                    if let Some(wait) = self.program_waits.remove(&seq) {
                        assert_eq!(wait.done_ns, done, "a waiting command completes when due");
                    }
                    self.now_ns = done;
                    completions.push(DevCompletion {
                        tag,
                        submitted_ns: submitted,
                        completed_ns: done,
                    });
                    self.dispatch(done);
                }
                (_, Some(at)) if at <= now => {
                    let before = self.queue.len();
                    self.now_ns = at;
                    self.dispatch(at);
                    assert!(
                        self.queue.len() < before,
                        "a dispatch event starts a command"
                    );
                }
                _ => break,
            }
        }
        self.now_ns = now;
    }

    fn stats_json(&self) -> serde_json::Value {
        serde_json::to_value(self.stats()).unwrap_or(serde_json::Value::Null)
    }
}

#[cfg(test)]
mod active_tests {
    use super::ActiveCommands;
    use std::collections::BTreeMap;

    /// The vector keeps the B-tree's order (reversed) and answers under any mix of inserts (in order and
    /// out of order, as a suspend's delayed completions are) and removals.
    #[test]
    fn active_commands_behave_as_a_sorted_map() {
        let mut active = ActiveCommands::default();
        let mut model: BTreeMap<(u64, u64), (u64, u64)> = BTreeMap::new();
        let mut next = crate::dev::test_rng(0x2545_f491_4f6c_dd1d);
        for step in 0..20_000u64 {
            let roll = next() % 10;
            if roll < 5 || model.is_empty() {
                // Completion times mostly increase, sometimes not; keys sometimes repeat.
                let done = if roll == 0 {
                    next() % 1000
                } else {
                    1000 + step
                };
                let key = (done, next() % 4);
                let value = (step, done);
                assert_eq!(active.insert(key, value), model.insert(key, value));
            } else if roll < 8 {
                let first = model.keys().next().copied().expect("not empty");
                assert_eq!(active.remove(&first), model.remove(&first));
            } else {
                let key = (next() % 1000, next() % 4);
                assert_eq!(active.remove(&key), model.remove(&key));
            }
            assert_eq!(active.len(), model.len());
            assert_eq!(
                active.first(),
                model.iter().next().map(|(&key, &value)| (key, value))
            );
        }
        let sorted: Vec<_> = active.latest_first.iter().rev().copied().collect();
        let expected: Vec<_> = model.into_iter().collect();
        assert_eq!(sorted, expected);
    }
}
