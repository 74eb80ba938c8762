//! The device's volatile write cache and its SLC write buffer.
//!
//! Write cache: host writes land in controller RAM (eMMC 4.5+ CACHE_CTRL, UFS volatile cache) and
//! complete once transferred; the cache gathers them per die until a full program unit is ready,
//! then the unit is programmed and its space is released when the program ends. A write that finds
//! the cache full waits until enough space is released (admission is FIFO, like UFS RTT flow
//! control). FLUSH and FUA wait until the data they cover is programmed. A cache of 0 bytes means
//! write-through: every write is programmed before it completes.
//!
//! SLC buffer (WriteBooster, Samsung TurboWrite): a slice of the NAND is used in SLC mode; host
//! programs go there at the SLC program time while it has room, otherwise straight to TLC/MLC at the
//! native program time. The buffer drains to TLC when a die is idle: the idle time of a die
//! (measured lazily when it is next used) is credited to migration at `slc_read + program` per
//! program unit.
//!
//! Simplifications: space is released in FIFO order of admission (a program that ends before an
//! earlier one still frees its space at the later time), so release times are monotone; reads of
//! data still in the cache are served as reads of its NAND location; the SLC buffer only changes
//! program time and capacity accounting (the FTL places data in the same blocks either way); a
//! migration step interrupted by a new command is not charged; when a program/erase suspend
//! moves a program's end later ([`WriteCache::delay_release`]), a release an admission has
//! already counted is not taken back (the admission stands).

use crate::units::Nanos;
use std::collections::VecDeque;

#[derive(Debug, Clone)]
pub struct WriteCache {
    capacity_bytes: u64,
    used_bytes: u64,
    /// Scheduled space releases, FIFO with monotone times: (time, bytes, program id, the
    /// program's own end before the FIFO hold).
    releases: VecDeque<(Nanos, u64, u64, Nanos)>,
    /// Releases already counted by an admission when a suspend moved their program.
    pub late_moves: u64,
    /// No admission is ever granted before this time (FIFO admission).
    admit_floor_ns: Nanos,
    /// Time by which every scheduled program has ended.
    persisted_ns: Nanos,
    /// Per die: logical pages waiting for a full program unit.
    pub buffers: Vec<Vec<u32>>,
}

impl WriteCache {
    pub fn new(capacity_bytes: u64, dies: u32, units_per_program: u32) -> Self {
        WriteCache {
            capacity_bytes,
            used_bytes: 0,
            releases: VecDeque::new(),
            late_moves: 0,
            admit_floor_ns: 0,
            persisted_ns: 0,
            buffers: (0..dies)
                .map(|_| Vec::with_capacity(units_per_program as usize))
                .collect(),
        }
    }

    pub fn write_through(&self) -> bool {
        self.capacity_bytes == 0
    }

    pub fn capacity_bytes(&self) -> u64 {
        self.capacity_bytes
    }

    /// Bytes held (buffered or waiting for their program to end) as of the last admission.
    pub fn used_bytes(&self) -> u64 {
        self.used_bytes
    }

    /// Time at which every program scheduled so far has ended.
    pub fn persisted_ns(&self) -> Nanos {
        self.persisted_ns
    }

    fn apply_releases_until(&mut self, time: Nanos) {
        while let Some(&(at, bytes, _, _)) = self.releases.front() {
            if at > time {
                break;
            }
            self.releases.pop_front();
            assert!(
                self.used_bytes >= bytes,
                "cache release exceeds its contents"
            );
            self.used_bytes -= bytes;
        }
    }

    /// Earliest time at or after `at` when `bytes` fit, taking that space; `None` when they do not
    /// fit even after every scheduled release (the caller must schedule programs for buffered
    /// data and ask again).
    pub fn admit(&mut self, bytes: u64, at: Nanos) -> Option<Nanos> {
        assert!(!self.write_through());
        assert!(
            bytes <= self.capacity_bytes,
            "a chunk larger than the cache"
        );
        let mut time = at.max(self.admit_floor_ns);
        self.apply_releases_until(time);
        let mut freeable = 0;
        let mut needed_until = None;
        for &(release_at, release_bytes, _, _) in &self.releases {
            if self.used_bytes - freeable + bytes <= self.capacity_bytes {
                break;
            }
            freeable += release_bytes;
            needed_until = Some(release_at);
        }
        if self.used_bytes - freeable + bytes > self.capacity_bytes {
            return None;
        }
        if let Some(release_at) = needed_until {
            time = time.max(release_at);
            self.apply_releases_until(time);
        }
        self.admit_floor_ns = time;
        self.used_bytes += bytes;
        assert!(self.used_bytes <= self.capacity_bytes);
        Some(time)
    }

    /// Space of `bytes` is released at `at`, the end of the program `program` (a NAND
    /// reservation id) holding them.
    pub fn release_at(&mut self, at: Nanos, bytes: u64, program: u64) {
        self.persisted_ns = self.persisted_ns.max(at);
        if self.write_through() {
            return;
        }
        let monotone = self
            .releases
            .back()
            .map_or(at, |&(last, _, _, _)| last.max(at));
        self.releases.push_back((monotone, bytes, program, at));
    }

    /// Program `program` now ends at `end` (a suspend moved it later): its release, and the
    /// releases held behind it, move with it.
    pub fn delay_release(&mut self, program: u64, end: Nanos) {
        self.persisted_ns = self.persisted_ns.max(end);
        let Some(index) = self.releases.iter().position(|r| r.2 == program) else {
            self.late_moves += u64::from(!self.write_through());
            return;
        };
        assert!(
            end >= self.releases[index].3,
            "a suspend never hastens a program"
        );
        self.releases[index].3 = end;
        let mut floor = if index == 0 {
            0
        } else {
            self.releases[index - 1].0
        };
        for release in self.releases.iter_mut().skip(index) {
            release.0 = floor.max(release.3);
            floor = release.0;
        }
    }

    /// Frees space at once (data discarded while still in the cache).
    pub fn drop_bytes(&mut self, bytes: u64) {
        if self.write_through() {
            return;
        }
        assert!(self.used_bytes >= bytes);
        self.used_bytes -= bytes;
    }
}

/// SLC-mode write buffer, accounted per die.
#[derive(Debug, Clone)]
pub struct SlcBuffer {
    capacity_units_per_die: u64,
    used_units: Vec<u64>,
    /// Die time to migrate one program unit from SLC to TLC (SLC read + native program).
    migrate_ns_per_program: Nanos,
    units_per_program: u64,
    pub units_migrated: u64,
}

impl SlcBuffer {
    pub fn new(
        capacity_units: u64,
        dies: u32,
        units_per_program: u32,
        migrate_ns_per_program: Nanos,
    ) -> Self {
        SlcBuffer {
            capacity_units_per_die: capacity_units / u64::from(dies),
            used_units: vec![0; dies as usize],
            migrate_ns_per_program: migrate_ns_per_program.max(1),
            units_per_program: u64::from(units_per_program),
            units_migrated: 0,
        }
    }

    pub fn enabled(&self) -> bool {
        self.capacity_units_per_die > 0
    }

    pub fn used_units(&self, die: u32) -> u64 {
        self.used_units[die as usize]
    }

    /// The die was idle for `idle_ns`: migrate what fits in that time.
    pub fn idle(&mut self, die: u32, idle_ns: Nanos) {
        let used = &mut self.used_units[die as usize];
        if *used == 0 || idle_ns == 0 {
            return;
        }
        let programs = idle_ns / self.migrate_ns_per_program;
        let units = (programs * self.units_per_program).min(*used);
        *used -= units;
        self.units_migrated += units;
    }

    /// Tries to place one program unit in SLC mode on `die`; false when the buffer is full.
    pub fn take(&mut self, die: u32) -> bool {
        let used = &mut self.used_units[die as usize];
        if *used + self.units_per_program > self.capacity_units_per_die {
            return false;
        }
        *used += self.units_per_program;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admission_waits_for_releases_in_fifo_order() {
        let mut cache = WriteCache::new(8192, 1, 1);
        assert_eq!(cache.admit(4096, 0), Some(0));
        assert_eq!(cache.admit(4096, 10), Some(10));
        assert_eq!(cache.admit(4096, 20), None, "full and nothing scheduled");
        cache.release_at(500, 4096, 1);
        cache.release_at(300, 4096, 2);
        // The second release is held to the first's time (FIFO).
        assert_eq!(cache.admit(4096, 20), Some(500));
        assert_eq!(cache.admit(4096, 30), Some(500));
        assert_eq!(cache.persisted_ns(), 500);
    }

    #[test]
    fn a_delayed_program_delays_its_release_and_those_held_behind_it() {
        let mut cache = WriteCache::new(3 * 4096, 1, 1);
        for at in [0, 1, 2] {
            assert_eq!(cache.admit(4096, at), Some(at));
        }
        cache.release_at(100, 4096, 7);
        cache.release_at(200, 4096, 8);
        cache.delay_release(7, 250);
        assert_eq!(cache.persisted_ns(), 250);
        // Both releases now happen at 250 (the second is held behind the first).
        assert_eq!(cache.admit(4096, 10), Some(250));
        assert_eq!(cache.admit(4096, 10), Some(250));
        assert_eq!(cache.late_moves, 0);
        cache.delay_release(7, 300);
        assert_eq!(cache.late_moves, 1, "already counted by an admission");
    }

    #[test]
    fn slc_buffer_fills_and_drains_when_idle() {
        let mut slc = SlcBuffer::new(16, 2, 4, 1000);
        assert!(slc.take(0));
        assert!(slc.take(0));
        assert!(!slc.take(0), "8 units per die");
        slc.idle(0, 1500);
        assert_eq!(slc.used_units(0), 4);
        assert!(slc.take(0));
    }
}
