//! The requests the device holds, in slots indexed by tag: the driver's tag map
//! (`blk_queue_tag->tag_index`, blk-mq's `tags->rqs[]`). The device is handed the slot number as
//! the command's tag and completes by it, so a completion finds its request by index. The
//! tag a request gets is the most recently freed slot (a stack), which only the devices see:
//! they echo tags back and order nothing by them (the flash model orders its started commands
//! by completion time and arrival, the fixed-latency model by completion time alone).
//!
//! Simplifications: no tag depth limit of its own; the table grows to the most requests the
//! device held at once (its queue depth, or a packed command's writes).

use super::request::{Request, RequestId};

#[derive(Debug, Default)]
pub struct InFlight {
    slots: Vec<Option<Request>>,
    /// Free slots, the most recently freed last.
    free: Vec<u32>,
    len: usize,
}

impl InFlight {
    pub fn new() -> InFlight {
        InFlight::default()
    }

    /// The tag `insert` will use next.
    pub fn next_tag(&self) -> u64 {
        match self.free.last() {
            Some(&slot) => u64::from(slot),
            None => self.slots.len() as u64,
        }
    }

    /// Holds `rq` under [`next_tag`](Self::next_tag), which it returns.
    pub fn insert(&mut self, rq: Request) -> u64 {
        self.len += 1;
        match self.free.pop() {
            Some(slot) => {
                let entry = &mut self.slots[slot as usize];
                assert!(entry.is_none(), "tag {slot} in use");
                *entry = Some(rq);
                u64::from(slot)
            }
            None => {
                self.slots.push(Some(rq));
                self.slots.len() as u64 - 1
            }
        }
    }

    /// The request of `tag`, which is freed.
    pub fn remove(&mut self, tag: u64) -> Option<Request> {
        let rq = self.slots.get_mut(tag as usize)?.take()?;
        self.free.push(tag as u32);
        self.len -= 1;
        Some(rq)
    }

    /// The request with id `id`, if held (a search of at most the device's queue depth; only
    /// for explaining waits and QASIO's boost).
    pub fn get_by_id(&self, id: RequestId) -> Option<&Request> {
        self.slots.iter().flatten().find(|rq| rq.id == id)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// The held requests with their tags, by tag (the block layer's checks).
    pub fn requests(&self) -> impl Iterator<Item = (u64, &Request)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(tag, slot)| slot.as_ref().map(|rq| (tag as u64, rq)))
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::request::test_support::request;
    use crate::dev::IoOp;
    use std::collections::BTreeMap;

    /// Against a map by tag and by id: every request comes back under the tag it was given,
    /// tags in use are distinct, lookups by id find what the map holds.
    #[test]
    fn tags_hold_requests_as_a_map_does() {
        let mut tags = InFlight::new();
        let mut by_tag: BTreeMap<u64, RequestId> = BTreeMap::new();
        let mut rng = crate::sim::rng::Rng::new(0x5eed_1234_abcd_0001);
        let mut id = 0;
        for step in 0..50_000u64 {
            let grow = (step / 1000) % 2 == 0;
            let roll = rng.next_u64() % 10;
            if (grow && roll < 6 || !grow && roll < 3) && by_tag.len() < 64 {
                id += 1;
                let expected = tags.next_tag();
                let tag = tags.insert(request(id, IoOp::Read, 8 * id, 8, 1));
                assert_eq!(tag, expected);
                assert!(by_tag.insert(tag, id).is_none(), "tag {tag} given twice");
            } else if !by_tag.is_empty() {
                let pick = (rng.next_u64() % by_tag.len() as u64) as usize;
                let (&tag, &want) = by_tag.iter().nth(pick).expect("picked inside");
                let rq = tags.remove(tag).expect("a held tag");
                assert_eq!(rq.id, want);
                by_tag.remove(&tag);
                assert!(tags.remove(tag).is_none(), "a freed tag is empty");
            }
            assert_eq!(tags.len(), by_tag.len());
            assert_eq!(tags.is_empty(), by_tag.is_empty());
            let probe = rng.next_u64() % (id + 2);
            let held = by_tag.values().any(|&v| v == probe);
            assert_eq!(tags.get_by_id(probe).map(|rq| rq.id), held.then_some(probe));
        }
        assert!(tags.remove(1 << 40).is_none());
    }
}
