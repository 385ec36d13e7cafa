//! The task table of one group: an O(1) slab of task records.
//!
//! A record is inserted under the group's spawn gate and removed by the task's
//! own settlement. Slots are reused; the per-group sequence number (never
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
    /// Installed after the task is handed to Tokio (outside the gate).
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
/// Slots an idle table keeps allocated.
const IDLE_RETAINED_SLOTS: usize = 1024;

/// Slab of live task records with a free list.
#[derive(Debug)]
pub(crate) struct TaskTable<H> {
    slots: Vec<Slot<H>>,
    free_head: u32,
    len: usize,
    next_seq: u64,
}

impl<H> TaskTable<H> {
    pub(crate) fn new() -> Self {
        Self {
            slots: Vec::new(),
            free_head: NO_FREE,
            len: 0,
            next_seq: 1,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Inserts a record and returns `(seq, slot)`, or `None` when the table
    /// already holds `u32::MAX - 1` live tasks.
    pub(crate) fn insert(
        &mut self,
        name: TaskName,
        kind: TaskKind,
        started: Instant,
    ) -> Option<(u64, u32)> {
        let seq = self.next_seq;
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
            let entry = &mut self.slots[slot as usize];
            if let Slot::Vacant { next_free } = *entry {
                self.free_head = next_free;
            }
            *entry = Slot::Occupied(record);
            slot
        } else {
            let slot = u32::try_from(self.slots.len())
                .ok()
                .filter(|slot| *slot != NO_FREE)?;
            self.slots.push(Slot::Occupied(record));
            slot
        };
        self.next_seq += 1;
        self.len += 1;
        Some((seq, slot))
    }

    pub(crate) fn get_mut(&mut self, slot: u32, seq: u64) -> Option<&mut TaskRecord<H>> {
        match self.slots.get_mut(slot as usize) {
            Some(Slot::Occupied(record)) if record.seq == seq => Some(record),
            _ => None,
        }
    }

    pub(crate) fn contains(&self, slot: u32, seq: u64) -> bool {
        matches!(self.slots.get(slot as usize), Some(Slot::Occupied(record)) if record.seq == seq)
    }

    pub(crate) fn remove(&mut self, slot: u32, seq: u64) -> Option<TaskRecord<H>> {
        let entry = self.slots.get_mut(slot as usize)?;
        match entry {
            Slot::Occupied(record) if record.seq == seq => {}
            _ => return None,
        }
        let old = std::mem::replace(
            entry,
            Slot::Vacant {
                next_free: self.free_head,
            },
        );
        self.free_head = slot;
        self.len -= 1;
        if self.len == 0 {
            // An idle table compacts (no sparse scans after churn) and gives
            // back memory beyond a small working set.
            self.slots.clear();
            self.slots.shrink_to(IDLE_RETAINED_SLOTS);
            self.free_head = NO_FREE;
        }
        match old {
            Slot::Occupied(record) => Some(record),
            Slot::Vacant { .. } => None,
        }
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, &TaskRecord<H>)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(slot, entry)| match entry {
                Slot::Occupied(record) => Some((slot as u32, record)),
                Slot::Vacant { .. } => None,
            })
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut TaskRecord<H>> {
        self.slots.iter_mut().filter_map(|entry| match entry {
            Slot::Occupied(record) => Some(record),
            Slot::Vacant { .. } => None,
        })
    }
}
