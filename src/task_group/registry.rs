//! The task table of one group: an O(1) slab of task records.
//!
//! A record is inserted under the group's spawn gate and removed by the task's
//! own settlement. The table grows in fixed chunks that never move (growing
//! never copies live records). Slots are reused; the per-group sequence number (never
//! reused) is stored in the record, so a stale [`TaskId`](crate::TaskId) never
//! matches a newer task in the same slot.

use tokio::time::Instant;

use crate::task_group::identity::{TaskKind, TaskName};

/// Something that can abort a task: Tokio's `AbortHandle` in production, a
/// recording fake in the loom models.
pub(crate) trait AbortTarget {
    fn abort(&self);
}

impl AbortTarget for tokio::task::AbortHandle {
    fn abort(&self) {
        tokio::task::AbortHandle::abort(self);
    }
}

/// The registry record of one live task.
#[derive(Debug)]
pub(crate) struct TaskRecord<H> {
    pub(crate) seq: u64,
    pub(crate) name: TaskName,
    pub(crate) kind: TaskKind,
    pub(crate) started: Instant,
    /// Installed after the task is handed to Tokio (outside the gate);
    /// taken (and used outside the gate) by the first abort request.
    pub(crate) handle: Option<H>,
    /// An abort was requested; honoured when the handle is installed.
    pub(crate) abort_requested: bool,
    /// The abort came from a shutdown deadline (counts as `timed_out`).
    pub(crate) deadline_aborted: bool,
}

#[derive(Debug)]
enum Slot<H> {
    Occupied(TaskRecord<H>),
    Vacant { next_free: u32 },
}

const NO_FREE: u32 = u32::MAX;
/// Live records one table can index (the gate packs a shard index beside
/// the slot in a `u32`).
pub(crate) const MAX_SLOTS: u32 = 1 << 26;
/// Slots per chunk. Chunks never move, so growing the table never copies
/// live records. 15 records of 64 bytes keep a chunk under 1 KiB, the size
/// from which glibc's allocator starts consolidating freed blocks.
const CHUNK_SLOTS: usize = 15;
/// Chunks an idle table keeps allocated.
const IDLE_RETAINED_CHUNKS: usize = 1;

/// Chunked slab of live task records with a free list.
#[derive(Debug)]
#[repr(C)]
pub(crate) struct TaskTable<H> {
    len: usize,
    /// Slots handed out since the table was last empty.
    high_water: u32,
    free_head: u32,
    /// Read-mostly: only a new chunk changes it.
    chunks: Vec<Box<[Slot<H>]>>,
}

impl<H> TaskTable<H> {
    pub(crate) fn new() -> Self {
        Self {
            chunks: Vec::new(),
            len: 0,
            high_water: 0,
            free_head: NO_FREE,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    fn slot(&self, slot: u32) -> Option<&Slot<H>> {
        if slot >= self.high_water {
            return None;
        }
        let slot = slot as usize;
        self.chunks
            .get(slot / CHUNK_SLOTS)
            .map(|chunk| &chunk[slot % CHUNK_SLOTS])
    }

    fn slot_mut(&mut self, slot: u32) -> Option<&mut Slot<H>> {
        if slot >= self.high_water {
            return None;
        }
        let slot = slot as usize;
        self.chunks
            .get_mut(slot / CHUNK_SLOTS)
            .map(|chunk| &mut chunk[slot % CHUNK_SLOTS])
    }

    /// Inserts a record with the caller's (group-unique) `seq` and returns
    /// its slot, or `None` when the table holds `MAX_SLOTS` live tasks.
    pub(crate) fn insert(
        &mut self,
        seq: u64,
        name: TaskName,
        kind: TaskKind,
        started: Instant,
    ) -> Option<u32> {
        let record = TaskRecord {
            seq,
            name,
            kind,
            started,
            handle: None,
            abort_requested: false,
            deadline_aborted: false,
        };
        let slot = if self.free_head != NO_FREE {
            let slot = self.free_head;
            let entry = self.slot_mut(slot)?;
            let Slot::Vacant { next_free } = *entry else {
                unreachable!("the free list only links vacant slots");
            };
            *entry = Slot::Occupied(record);
            self.free_head = next_free;
            slot
        } else {
            let slot = self.high_water;
            if slot >= MAX_SLOTS {
                return None;
            }
            let index = slot as usize;
            if index / CHUNK_SLOTS == self.chunks.len() {
                self.chunks.push(
                    (0..CHUNK_SLOTS)
                        .map(|_| Slot::Vacant { next_free: NO_FREE })
                        .collect(),
                );
            }
            self.chunks[index / CHUNK_SLOTS][index % CHUNK_SLOTS] = Slot::Occupied(record);
            self.high_water += 1;
            slot
        };
        self.len += 1;
        Some(slot)
    }

    pub(crate) fn get_mut(&mut self, slot: u32, seq: u64) -> Option<&mut TaskRecord<H>> {
        match self.slot_mut(slot) {
            Some(Slot::Occupied(record)) if record.seq == seq => Some(record),
            _ => None,
        }
    }

    pub(crate) fn contains(&self, slot: u32, seq: u64) -> bool {
        matches!(self.slot(slot), Some(Slot::Occupied(record)) if record.seq == seq)
    }

    pub(crate) fn remove(&mut self, slot: u32, seq: u64) -> Option<TaskRecord<H>> {
        let free_head = self.free_head;
        let entry = self.slot_mut(slot)?;
        match entry {
            Slot::Occupied(record) if record.seq == seq => {}
            _ => return None,
        }
        let Slot::Occupied(record) = std::mem::replace(
            entry,
            Slot::Vacant {
                next_free: free_head,
            },
        ) else {
            unreachable!("checked occupied above");
        };
        self.free_head = slot;
        self.len -= 1;
        if self.len == 0 {
            // An idle table restarts from slot 0 (no sparse scans after
            // churn) and gives back memory beyond a small working set.
            self.free_head = NO_FREE;
            self.high_water = 0;
            self.chunks.truncate(IDLE_RETAINED_CHUNKS);
        }
        Some(record)
    }

    /// Slots handed out since the table was last empty (an index bound).
    pub(crate) fn high_water(&self) -> u32 {
        self.high_water
    }

    /// Live records whose slot index lies in `range`.
    pub(crate) fn records_mut(
        &mut self,
        range: std::ops::Range<u32>,
    ) -> impl Iterator<Item = &mut TaskRecord<H>> {
        let start = range.start as usize;
        let len = range.end.saturating_sub(range.start) as usize;
        let first_chunk = start / CHUNK_SLOTS;
        self.chunks
            .iter_mut()
            .skip(first_chunk)
            .flat_map(|chunk| chunk.iter_mut())
            .skip(start - first_chunk * CHUNK_SLOTS)
            .take(len)
            .filter_map(|entry| match entry {
                Slot::Occupied(record) => Some(record),
                Slot::Vacant { .. } => None,
            })
    }

    fn occupied(&self) -> impl Iterator<Item = (u32, &Slot<H>)> {
        self.chunks
            .iter()
            .flat_map(|chunk| chunk.iter())
            .take(self.high_water as usize)
            .enumerate()
            .map(|(slot, entry)| (slot as u32, entry))
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, &TaskRecord<H>)> {
        self.occupied().filter_map(|(slot, entry)| match entry {
            Slot::Occupied(record) => Some((slot, record)),
            Slot::Vacant { .. } => None,
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn insert(table: &mut TaskTable<()>) -> (u64, u32) {
        thread_local!(static NEXT: std::cell::Cell<u64> = const { std::cell::Cell::new(1) });
        let seq = NEXT.with(|next| next.replace(next.get() + 1));
        let slot = table
            .insert(seq, TaskName::from("t"), TaskKind::Worker, Instant::now())
            .expect("room");
        (seq, slot)
    }

    #[test]
    fn slots_are_reused_but_sequences_never_are() {
        let mut table = TaskTable::new();
        let first = insert(&mut table);
        let second = insert(&mut table);
        assert!(table.remove(first.1, first.0).is_some());
        let third = insert(&mut table);
        assert_eq!(third.1, first.1, "the freed slot is reused");
        assert!(third.0 > second.0);
        assert_ne!(third.0, first.0);
        assert!(
            !table.contains(first.1, first.0),
            "a stale id never matches"
        );
        assert!(table.contains(third.1, third.0));
        assert!(table.remove(first.1, first.0).is_none());
        assert_eq!(table.len(), 2);
        assert!(table.remove(second.1, second.0).is_some());
        assert!(table.remove(third.1, third.0).is_some());
        assert_eq!(table.len(), 0);
        assert_eq!(table.high_water(), 0, "an idle table restarts at slot 0");
    }

    #[test]
    fn growth_crosses_chunks_and_ranges_find_every_record() {
        let mut table = TaskTable::new();
        let keys: Vec<_> = (0..CHUNK_SLOTS * 3 + 5)
            .map(|_| insert(&mut table))
            .collect();
        for (seq, slot) in &keys {
            assert!(table.contains(*slot, *seq));
        }
        // Free every other record, then walk in uneven ranges.
        for (seq, slot) in keys.iter().step_by(2) {
            assert!(table.remove(*slot, *seq).is_some());
        }
        let mut seen = 0;
        let mut next = 0;
        while next < table.high_water() {
            let end = (next + 7).min(table.high_water());
            seen += table.records_mut(next..end).count();
            next = end;
        }
        assert_eq!(seen, table.len());
        assert_eq!(table.iter().count(), table.len());
        for (seq, slot) in keys.iter().skip(1).step_by(2) {
            assert!(table.remove(*slot, *seq).is_some());
        }
        assert_eq!(table.len(), 0);
        assert!(table.chunks.len() <= IDLE_RETAINED_CHUNKS);
    }
}
