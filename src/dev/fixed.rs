//! A device with a fixed per-request latency plus a transfer time at a fixed bandwidth, served in
//! FIFO order by `queue_depth` independent slots. It has no NAND, no cache and no internal
//! scheduling: it exists for tests of the layers above, where a predictable device makes the
//! behaviour under test easy to see.

use super::{BlockDevice, DevCompletion, DevRequest};
use crate::units::{Nanos, NS_PER_SEC, SECTOR_SIZE};
use std::collections::VecDeque;

#[derive(Debug, Clone)]
pub struct FixedLatencyDevice {
    name: String,
    capacity_sectors: u64,
    queue_depth: usize,
    latency_ns: Nanos,
    bytes_per_sec: u64,
    /// Whether it honours FUA ([`BlockDevice::fua`]).
    fua: bool,
    flush_declared: bool,
    /// Per slot: the time at which it becomes free.
    slot_free_at: Vec<Nanos>,
    /// Outstanding requests as (completion time, submission time, tag), in completion order.
    outstanding: VecDeque<(Nanos, Nanos, u64)>,
    now: Nanos,
}

impl FixedLatencyDevice {
    /// `latency_ns` per request plus `size / bytes_per_sec`; `bytes_per_sec == 0` means no
    /// transfer cost.
    pub fn new(queue_depth: usize, latency_ns: Nanos, bytes_per_sec: u64) -> Self {
        assert!(queue_depth > 0, "queue depth must be positive");
        FixedLatencyDevice {
            name: "fixed".to_string(),
            capacity_sectors: 1 << 40,
            queue_depth,
            latency_ns,
            bytes_per_sec,
            fua: true,
            flush_declared: true,
            slot_free_at: vec![0; queue_depth],
            outstanding: VecDeque::new(),
            now: 0,
        }
    }

    fn service_ns(&self, request: &DevRequest) -> Nanos {
        let bytes = u64::from(request.nr_sectors) * SECTOR_SIZE;
        let transfer = if self.bytes_per_sec == 0 {
            0
        } else {
            (u128::from(bytes) * u128::from(NS_PER_SEC) / u128::from(self.bytes_per_sec)) as Nanos
        };
        // A flush after the write (FUA emulated on a device without it) costs another latency.
        let postflush = if request.flags.postflush {
            self.latency_ns
        } else {
            0
        };
        self.latency_ns + transfer + postflush
    }

    /// The same device without FUA support ([`BlockDevice::fua`]).
    pub fn without_fua(mut self) -> Self {
        self.fua = false;
        self
    }
}

impl FixedLatencyDevice {
    /// The same device with no flush declared ([`BlockDevice::flush_declared`]): an SD card
    /// behind the 3.x mmc driver.
    pub fn without_flush(mut self) -> Self {
        self.flush_declared = false;
        self.fua = false;
        self
    }
}

impl BlockDevice for FixedLatencyDevice {
    fn name(&self) -> &str {
        &self.name
    }
    fn capacity_sectors(&self) -> u64 {
        self.capacity_sectors
    }
    fn fua(&self) -> bool {
        self.fua
    }
    fn flush_declared(&self) -> bool {
        self.flush_declared
    }
    fn queue_depth(&self) -> usize {
        self.queue_depth
    }
    fn in_flight(&self) -> usize {
        self.outstanding.len()
    }
    fn submit(&mut self, now: Nanos, request: DevRequest) {
        assert!(self.in_flight() < self.queue_depth, "device queue overflow");
        assert!(now >= self.now, "time went backwards");
        self.now = now;
        let slot = (0..self.queue_depth)
            .min_by_key(|&i| self.slot_free_at[i])
            .expect("queue depth is positive");
        let start = self.slot_free_at[slot].max(now);
        let done = start + self.service_ns(&request);
        self.slot_free_at[slot] = done;
        let position = self.outstanding.partition_point(|&(t, _, _)| t <= done);
        self.outstanding.insert(position, (done, now, request.tag));
    }
    fn next_event(&self) -> Option<Nanos> {
        self.outstanding.front().map(|&(t, _, _)| t)
    }
    fn advance(&mut self, now: Nanos, completions: &mut Vec<DevCompletion>) {
        assert!(now >= self.now, "time went backwards");
        self.now = now;
        while let Some(&(done, submitted, tag)) = self.outstanding.front() {
            if done > now {
                break;
            }
            self.outstanding.pop_front();
            completions.push(DevCompletion {
                tag,
                submitted_ns: submitted,
                completed_ns: done,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dev::{IoFlags, IoOp};

    fn read(tag: u64, sectors: u32) -> DevRequest {
        DevRequest {
            tag,
            op: IoOp::Read,
            sector: 0,
            nr_sectors: sectors,
            flags: IoFlags::default(),
            foreground: false,
        }
    }

    #[test]
    fn one_slot_serves_in_fifo_order() {
        let mut device = FixedLatencyDevice::new(1, 100, 0);
        device.submit(0, read(1, 8));
        assert_eq!(device.next_event(), Some(100));
        let mut done = Vec::new();
        device.advance(99, &mut done);
        assert!(done.is_empty());
        device.advance(100, &mut done);
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].tag, 1);
        assert_eq!(device.in_flight(), 0);
        assert_eq!(device.next_event(), None);
    }

    #[test]
    fn transfer_time_follows_bandwidth() {
        // 1 MB/s: 4096 bytes take 4.096 ms.
        let mut device = FixedLatencyDevice::new(2, 0, 1_000_000);
        device.submit(0, read(1, 8));
        device.submit(0, read(2, 8));
        assert_eq!(device.next_event(), Some(4_096_000));
        let mut done = Vec::new();
        device.advance(4_096_000, &mut done);
        assert_eq!(done.len(), 2, "two slots serve two requests in parallel");
    }
}
