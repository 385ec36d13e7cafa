//! The task table of one shard of a group's spawn gate: an O(1) slab of task
//! records.
//!
//! Invariants:
//!
//! 1. A record is inserted under the group's spawn gate and removed only when
//!    the task's own settlement is applied (see `gate.rs`: a settlement is
//!    published first and applied before any reader looks). A settlement
//!    ticket carries the slot and the low 32 bits of the sequence
//!    ([`SeqCheck`]), so only its own settlement removes a record.
//! 2. The table grows in fixed chunks of `CHUNK_SLOTS` (11) slots that never
//!    move: growing never copies live records. Eleven slots keep a chunk
//!    under 1 KiB, the size from which glibc's allocator starts consolidating
//!    freed blocks.
//! 3. A record is split into a 32-byte hot part (sequence, abort flags, the
//!    task's join handle, or an abort handle when `spawn_with_handle` gave
//!    the join handle to its caller, and its links in the live list) that
//!    every spawn, abort and settlement touches, and a cold part (name,
//!    kind, start time, operation tag) that only registration, start stamps,
//!    reports, diagnostics and operation aborts touch. Tasks that settle in
//!    spawn order share hot lines.
//! 4. Slots are reused; the per-group sequence number (never reused) is
//!    stored in the record, so a stale [`TaskId`](crate::TaskId) never
//!    matches a newer task in the same slot.
//! 5. A settled task's heap name is released when its settlement is applied;
//!    the rest of the cold part (a `&'static str` name included) stays in
//!    place until the slot is reused.
//! 6. While the table is open, the handles of removed records wait in a ring
//!    of at most [`RETAINED_HANDLES`] (128) and every registration takes one
//!    out to drop after its lock. A handle is the last reference to the
//!    finished task's Tokio cell, which the submitting thread allocated; freed
//!    there, glibc's allocator takes no arena lock across threads, a lock that
//!    otherwise shows up on every completion. The ring bounds what finished
//!    tasks keep alive (a cell is about the size of the task's future, up to
//!    16 KiB, and a panicked task's payload stays in it until its join handle
//!    is dropped); only when settlements outrun registrations by more than the
//!    ring does the remover drop the oldest handle itself. A bounded ring,
//!    unlike handles kept in vacant slots or a per-slot cap, neither grows
//!    without limit nor gets stuck on slots nobody reuses.
//! 7. A removal that empties the table restarts it at slot 0, keeps one chunk
//!    and `IDLE_RETAINED_HANDLES` (16) handles, and hands the rest back with
//!    the chunks it frees; they are dropped after the table lock.
//! 8. A large table (at least `COMPACT_MIN_SLOTS`, 1,024, slots) with at most
//!    a quarter of its slots live compacts: the chunks above the highest live
//!    slot are freed and the free list is rebuilt lowest-slot-first (live
//!    records never move: their ids encode the slot). Compaction runs again
//!    only after the live count halves, so its O(slots) scan is amortized.
//!    When no chunk can be freed (a live record sits in the last chunk, as
//!    when tasks settle in spawn order) the check stops after the free slots
//!    above that record (fewer than one chunk) and nothing is rebuilt.
//! 9. A table compacts and retains handles only while its group admits
//!    tasks: the seal stops both (a draining table empties and restarts
//!    anyway), and a sealed table hands handles back at removal (no
//!    registration will take them).
//! 10. Live records form a doubly linked list in registration order (the
//!     *live list*: `head` is the oldest, `tail` the newest, sequences
//!     increase along it). Registration appends at the tail and removal
//!     unlinks, O(1) each and under the table lock registration and
//!     settlement hold anyway: no extra lock and no clock read. Readers that
//!     visit live records ([`TaskTable::live`]) follow the list, so a visit
//!     costs the records it visits, never the vacant slots a burst left
//!     behind (a sparse table pinned by one high slot is walked in O(live)).
//! 11. A sealed table (its group no longer admits tasks) stops unlinking:
//!     it only drains, its slots are never reused, so a removed record
//!     keeps its links and stays in the list as a *stale entry* until the
//!     table empties and restarts. Draining in any order (an abort of every
//!     task settles them out of order) then touches no neighbour record.
//!     The list still visits at most the records live at the seal, and a
//!     visitor counts a stale entry as a visited one (see
//!     [`TaskTable::entries`]), so a bounded walk stays bounded.

use std::collections::VecDeque;

use tokio::time::Instant;

use crate::task_identity::{TaskKind, TaskName};

mod record;

pub(crate) use record::*;

const NO_FREE: u32 = u32::MAX;
/// The end of the live list.
const NIL: u32 = u32::MAX;
/// Removed records' handles one table keeps for its registrations to
/// drop: as many as a settler applies at once (`gate::SETTLER_APPLY`).
pub(crate) const RETAINED_HANDLES: usize = 128;
/// Handles an emptied table keeps (the rest go with the emptying removal).
const IDLE_RETAINED_HANDLES: usize = 16;
/// Live records one table can index (the gate packs a shard index beside
/// the slot in a `u32`).
pub(crate) const MAX_SLOTS: u32 = 1 << 26;
/// Slots per chunk. Chunks never move, so growing the table never copies
/// live records. 11 slots (32-byte hot and 56-byte cold parts) keep a chunk
/// under 1 KiB, the size from which glibc's allocator starts consolidating
/// freed blocks.
const CHUNK_SLOTS: usize = 11;

/// Chunks an idle table keeps allocated.
const IDLE_RETAINED_CHUNKS: usize = 1;
/// A table at least this large compacts when a quarter or less of its slots
/// are live (see [`TaskTable::compact`]).
const COMPACT_MIN_SLOTS: u32 = 1024;

#[derive(Debug)]
pub(crate) struct Chunk<H> {
    hot: [TaskRecord<H>; CHUNK_SLOTS],
    cold: [Option<TaskInfo>; CHUNK_SLOTS],
}

impl<H> Chunk<H> {
    fn new() -> Box<Self> {
        Box::new(Self {
            hot: std::array::from_fn(|_| TaskRecord::vacant(NO_FREE)),
            cold: std::array::from_fn(|_| None),
        })
    }
}

fn split(slot: u32) -> (usize, usize) {
    (slot as usize / CHUNK_SLOTS, slot as usize % CHUNK_SLOTS)
}

/// Chunked slab of live task records with a free list.
#[derive(Debug)]
pub(crate) struct TaskTable<H> {
    len: usize,
    /// Compact only once `len` is below this (halves after each compaction,
    /// so a table pinned by one high slot does not rescan on every removal).
    compact_below: usize,
    /// Slots handed out since the table was last empty.
    high_water: u32,
    /// Removed records' handles are kept for registrations to drop (false
    /// once sealed: no registration will come).
    retain_handles: bool,
    free_head: u32,
    /// The oldest and newest live records (the live list), or [`NIL`].
    head: u32,
    tail: u32,
    /// Removal unlinks (false once sealed: see the module docs).
    unlink_on_remove: bool,
    /// Handles of removed records, oldest first, for registrations to drop
    /// (see the module docs).
    retained: VecDeque<H>,
    /// Read-mostly: only a new chunk changes it.
    chunks: Vec<Box<Chunk<H>>>,
}

impl<H> TaskTable<H> {
    pub(crate) fn new() -> Self {
        Self {
            len: 0,
            compact_below: usize::MAX,
            high_water: 0,
            retain_handles: true,
            free_head: NO_FREE,
            head: NIL,
            tail: NIL,
            unlink_on_remove: true,
            retained: VecDeque::new(),
            chunks: Vec::new(),
        }
    }

    /// Seals the table: it stops compacting and keeping handles (the ones
    /// already kept go when the table empties). A sealed
    /// group's table only drains, and an empty table restarts at slot 0 and
    /// trims itself anyway, so scanning it while it drains would only hold
    /// the table lock that readers and batch applications need.
    pub(crate) fn seal(&mut self) {
        self.compact_below = 0;
        self.retain_handles = false;
        self.unlink_on_remove = false;
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// True when an insertion would find no slot.
    pub(crate) fn is_full(&self) -> bool {
        self.free_head == NO_FREE && self.high_water >= MAX_SLOTS
    }

    /// Slots handed out since the table was last empty (an index bound).
    pub(crate) fn high_water(&self) -> u32 {
        self.high_water
    }

    fn hot(&self, slot: u32) -> Option<&TaskRecord<H>> {
        if slot >= self.high_water {
            return None;
        }
        let (chunk, index) = split(slot);
        self.chunks.get(chunk).map(|chunk| &chunk.hot[index])
    }

    fn hot_mut(&mut self, slot: u32) -> Option<&mut TaskRecord<H>> {
        if slot >= self.high_water {
            return None;
        }
        let (chunk, index) = split(slot);
        self.chunks
            .get_mut(chunk)
            .map(|chunk| &mut chunk.hot[index])
    }

    /// Inserts a record with the caller's (group-unique, below 2^61) `seq`
    /// and returns its slot and the oldest kept handle of a removed record
    /// (drop it after releasing the lock), or `None` when the
    /// table holds `MAX_SLOTS` live tasks.
    pub(crate) fn insert(
        &mut self,
        seq: u64,
        name: TaskName,
        kind: TaskKind,
        started: Option<Instant>,
        operation: Option<OperationTag>,
    ) -> Option<(u32, Option<H>)> {
        debug_assert!(seq != 0 && seq & !SEQ_MASK == 0);
        let slot = if self.free_head != NO_FREE {
            self.free_head
        } else {
            let slot = self.high_water;
            if slot >= MAX_SLOTS {
                return None;
            }
            if split(slot).0 == self.chunks.len() {
                self.chunks.push(Chunk::new());
            }
            self.high_water += 1;
            slot
        };
        let (chunk, index) = split(slot);
        let chunk = &mut self.chunks[chunk];
        if slot == self.free_head {
            self.free_head = chunk.hot[index].next_free().unwrap_or(NO_FREE);
        }
        let owned = if name.is_static() { 0 } else { OWNED_NAME };
        let tail = self.tail;
        let record = &mut chunk.hot[index];
        record.state = (seq & SEQ_MASK) | owned;
        record.handle = None;
        record.prev = tail;
        record.next = NIL;
        let retained = self.retained.pop_front();
        // Replaces (and drops) the info a settled task left behind.
        chunk.cold[index] = Some(TaskInfo {
            name,
            kind,
            started,
            operation,
        });
        self.len += 1;
        // Appended at the tail of the live list.
        if tail == NIL {
            self.head = slot;
        } else {
            self.linked_mut(tail).next = slot;
        }
        self.tail = slot;
        Some((slot, retained))
    }

    /// The hot part of a live record named by the live list (always
    /// allocated: live records never leave their chunk).
    fn linked_mut(&mut self, slot: u32) -> &mut TaskRecord<H> {
        let (chunk, index) = split(slot);
        &mut self.chunks[chunk].hot[index]
    }

    /// Takes the record between `prev` and `next` out of the live list.
    fn unlink(&mut self, prev: u32, next: u32) {
        if prev == NIL {
            self.head = next;
        } else {
            self.linked_mut(prev).next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.linked_mut(next).prev = prev;
        }
    }

    /// Records when a task started, unless its record already has a start
    /// time (or the task is gone: the check no longer matches).
    pub(crate) fn stamp(&mut self, slot: u32, check: SeqCheck, at: Instant) {
        if !self
            .hot(slot)
            .is_some_and(|record| record.is_occupied_by_check(check))
        {
            return;
        }
        let (chunk, index) = split(slot);
        if let Some(info) = &mut self.chunks[chunk].cold[index] {
            info.started.get_or_insert(at);
        }
    }

    pub(crate) fn get_mut(&mut self, slot: u32, seq: u64) -> Option<&mut TaskRecord<H>> {
        self.hot_mut(slot)
            .filter(|record| record.is_occupied_by(seq))
    }

    pub(crate) fn contains(&self, slot: u32, seq: u64) -> bool {
        self.hot(slot)
            .is_some_and(|record| record.is_occupied_by(seq))
    }

    /// The cold part of the live record a settlement ticket names (read
    /// before [`remove`](Self::remove) when the task failed, so its name
    /// stays in the evidence).
    pub(crate) fn info(&self, slot: u32, check: SeqCheck) -> Option<&TaskInfo> {
        self.hot(slot)
            .filter(|record| record.is_occupied_by_check(check))?;
        let (chunk, index) = split(slot);
        self.chunks[chunk].cold[index].as_ref()
    }

    /// Removes a settled task's record (see [`SeqCheck`]), touching only
    /// its hot part.
    pub(crate) fn remove(&mut self, slot: u32, check: SeqCheck) -> Option<Removed<H>> {
        let free_head = self.free_head;
        let record = self
            .hot_mut(slot)
            .filter(|record| record.is_occupied_by_check(check))?;
        let owned = record.state & OWNED_NAME != 0;
        let (prev, next) = (record.prev, record.next);
        let mut handle = record.handle.take();
        let mut removed = Removed {
            abort_requested: record.state & ABORT_REQUESTED != 0,
            deadline_aborted: record.state & DEADLINE_ABORTED != 0,
            handle: None,
            released: Released::default(),
        };
        record.state = VACANT | u64::from(free_head);
        if self.unlink_on_remove {
            self.unlink(prev, next);
        }
        if owned {
            let (chunk, index) = split(slot);
            self.chunks[chunk].cold[index] = None;
        }
        self.free_head = slot;
        if self.retain_handles {
            if let Some(kept) = handle.take() {
                if self.retained.len() >= RETAINED_HANDLES {
                    handle = self.retained.pop_front();
                }
                self.retained.push_back(kept);
            }
        }
        removed.handle = handle;
        self.len -= 1;
        if self.len == 0 {
            // An idle table restarts from slot 0 (no sparse scans after
            // churn) and gives back memory beyond a small working set.
            self.free_head = NO_FREE;
            self.high_water = 0;
            (self.head, self.tail) = (NIL, NIL);
            self.compact_below = usize::MAX;
            removed.released = self.release_chunks(IDLE_RETAINED_CHUNKS);
            let keep = if self.retain_handles {
                IDLE_RETAINED_HANDLES
            } else {
                0
            };
            if self.retained.len() > keep {
                let surplus = self.retained.len() - keep;
                removed.released.handles = self.retained.drain(..surplus).collect();
            }
        } else if self.high_water >= COMPACT_MIN_SLOTS
            && self.len < (self.high_water / 4) as usize
            && self.len <= self.compact_below
        {
            removed.released = self.compact();
        }
        Some(removed)
    }

    /// Gives back the chunks above the highest live slot and rebuilds the
    /// free list lowest-slot-first, so a table that held a burst keeps only
    /// what its live tasks need (live records never move: their ids encode
    /// the slot). O(high water); amortized by `compact_below`.
    ///
    /// When no chunk can be given back (a live record sits in the last
    /// chunk, as when tasks settle in spawn order) nothing is rebuilt and
    /// `compact_below` stays: the check cost at most one chunk's worth of
    /// slots, and the next removal checks again.
    fn compact(&mut self) -> Released<H> {
        let highest_live = (0..self.high_water).rev().find(|slot| {
            self.hot(*slot)
                .is_some_and(|record| record.next_free().is_none())
        });
        let high_water = highest_live.map_or(0, |slot| slot + 1);
        let keep_chunks = (high_water as usize)
            .div_ceil(CHUNK_SLOTS)
            .max(IDLE_RETAINED_CHUNKS);
        if keep_chunks >= self.chunks.len() {
            return Released::default();
        }
        let released = self.release_chunks(keep_chunks);
        self.high_water = high_water;
        self.free_head = NO_FREE;
        for slot in (0..high_water).rev() {
            let (chunk, index) = split(slot);
            let record = &mut self.chunks[chunk].hot[index];
            if record.next_free().is_some() {
                record.state = VACANT | u64::from(self.free_head);
                self.free_head = slot;
            }
        }
        self.compact_below = self.len / 2;
        released
    }

    /// Detaches the chunks beyond the first `keep`.
    fn release_chunks(&mut self, keep: usize) -> Released<H> {
        Released {
            chunks: if keep < self.chunks.len() {
                self.chunks.split_off(keep)
            } else {
                Vec::new()
            },
            handles: Vec::new(),
        }
    }

    /// The live list's entries, oldest first: `Some` for a live record
    /// (slot, hot and cold parts), `None` for a stale entry of a sealed
    /// table (see the module docs). Each step costs one entry, whatever the
    /// vacant slots around it.
    pub(crate) fn entries(&self) -> impl Iterator<Item = Option<(u32, &TaskRecord<H>, &TaskInfo)>> {
        let mut next = self.head;
        std::iter::from_fn(move || {
            if next == NIL {
                return None;
            }
            let slot = next;
            let (chunk, index) = split(slot);
            let chunk = &self.chunks[chunk];
            let record = &chunk.hot[index];
            next = record.next;
            let live = record.state & VACANT == 0;
            Some(
                chunk.cold[index]
                    .as_ref()
                    .filter(|_| live)
                    .map(|info| (slot, record, info)),
            )
        })
    }

    /// Live records (slot, hot and cold parts), oldest first.
    pub(crate) fn live(&self) -> impl Iterator<Item = (u32, &TaskRecord<H>, &TaskInfo)> {
        self.entries().flatten()
    }

    /// The cold parts of live records in slot order: a sequential scan of
    /// every slot up to the high water, for visits of every record (no
    /// dependent loads, unlike the list). Costs the slots, vacant or not.
    pub(crate) fn occupied(&self) -> impl Iterator<Item = &TaskInfo> {
        let high_water = self.high_water as usize;
        self.chunks
            .iter()
            .flat_map(|chunk| chunk.hot.iter().zip(chunk.cold.iter()))
            .take(high_water)
            .filter_map(|(record, info)| match (record.state & VACANT, info) {
                (0, Some(info)) => Some(info),
                _ => None,
            })
    }

    /// Live records (hot part, mutable; cold part) whose slot index lies in
    /// `range`. Occupancy is read from the hot part: the cold part is only
    /// touched if the caller reads it.
    pub(crate) fn records_mut(
        &mut self,
        range: std::ops::Range<u32>,
    ) -> impl Iterator<Item = (u32, &mut TaskRecord<H>, &Option<TaskInfo>)> {
        let start = range.start as usize;
        let len = range.end.saturating_sub(range.start) as usize;
        let first_chunk = start / CHUNK_SLOTS;
        self.chunks
            .iter_mut()
            .skip(first_chunk)
            .flat_map(|chunk| chunk.hot.iter_mut().zip(chunk.cold.iter()))
            .skip(start - first_chunk * CHUNK_SLOTS)
            .take(len)
            .zip(range.start..)
            .filter(|((record, _), _)| record.next_free().is_none())
            .map(|((record, info), slot)| (slot, record, info))
    }
}

// A chunk of production records stays under 1 KiB (invariant 2).
const _: () = assert!(std::mem::size_of::<Chunk<TaskHandle>>() < 1024);
const _: () = assert!(std::mem::size_of::<TaskRecord<TaskHandle>>() == 32);

#[cfg(all(test, not(loom)))]
mod tests;
