//! A task's record in the table: the 32-byte hot part and its state word,
//! the cold part, and what a removal gives back (see the `registry` module
//! docs for the invariants they keep).

use tokio::time::Instant;

use super::{Chunk, NIL};
use crate::task_identity::{TaskKind, TaskName};

/// Something that can abort a task: Tokio's `AbortHandle` in production, a
/// recording fake in the loom models.
pub(crate) trait AbortTarget {
    fn abort(&self);
}

/// What a task's record keeps to abort it: the task's own join handle when
/// nobody else takes it (no extra reference to the Tokio cell is created,
/// and none is given back at spawn), or an abort handle when the caller
/// keeps the join handle (`spawn_with_handle`).
#[derive(Debug)]
pub(crate) enum TaskHandle {
    Join(tokio::task::JoinHandle<()>),
    Abort(tokio::task::AbortHandle),
}

impl AbortTarget for TaskHandle {
    fn abort(&self) {
        match self {
            Self::Join(handle) => handle.abort(),
            Self::Abort(handle) => handle.abort(),
        }
    }
}

/// Set in a vacant slot's state word (the rest is the next free slot).
pub(super) const VACANT: u64 = 1 << 63;
/// An abort was requested; honoured when the handle is installed.
pub(super) const ABORT_REQUESTED: u64 = 1 << 62;
/// The abort came from a shutdown deadline (counts as `timed_out`).
pub(super) const DEADLINE_ABORTED: u64 = 1 << 61;
/// The cold part holds a heap name, released at settlement.
pub(super) const OWNED_NAME: u64 = 1 << 60;
/// Sequence bits of an occupied slot's state word.
pub(crate) const SEQ_MASK: u64 = OWNED_NAME - 1;

/// The hot part of a task's record, 32 bytes: touched by every spawn,
/// abort and settlement. Tasks that settle in spawn order share lines.
#[derive(Debug)]
pub(crate) struct TaskRecord<H> {
    /// `VACANT | next free`, or flags | sequence.
    pub(super) state: u64,
    /// Installed after the task is handed to Tokio (outside the gate) and
    /// used in place by abort requests; taken at removal (see the module
    /// docs for where it goes).
    pub(crate) handle: Option<H>,
    /// The previous (older) and next (newer) live records of the live list,
    /// or [`NIL`]; meaningless in a vacant slot.
    pub(super) prev: u32,
    pub(super) next: u32,
}

impl<H> TaskRecord<H> {
    pub(super) fn vacant(next_free: u32) -> Self {
        Self {
            state: VACANT | u64::from(next_free),
            handle: None,
            prev: NIL,
            next: NIL,
        }
    }

    pub(super) fn is_occupied_by(&self, seq: u64) -> bool {
        self.state & (VACANT | SEQ_MASK) == seq
    }

    /// Occupied, by a task whose sequence has these low bits.
    pub(super) fn is_occupied_by_check(&self, check: SeqCheck) -> bool {
        self.state & VACANT == 0 && seq_check(self.state & SEQ_MASK) == check
    }

    pub(super) fn next_free(&self) -> Option<u32> {
        (self.state & VACANT != 0).then_some(self.state as u32)
    }

    /// The group-unique sequence of the task.
    pub(crate) fn seq(&self) -> u64 {
        self.state & SEQ_MASK
    }

    pub(crate) fn abort_requested(&self) -> bool {
        self.state & ABORT_REQUESTED != 0
    }

    /// Marks the record aborted (once); true if this is the first request.
    pub(crate) fn mark_abort(&mut self, by_deadline: bool) -> bool {
        if self.abort_requested() {
            return false;
        }
        self.state |= ABORT_REQUESTED;
        if by_deadline {
            self.state |= DEADLINE_ABORTED;
        }
        true
    }
}

/// The cold part of a task's record: written at registration, read only by
/// reports and operation aborts. A `&'static str` name stays in place after
/// the record's removal until the slot is reused (removal does not touch
/// it); a heap name is released at removal.
#[derive(Debug)]
pub(crate) struct TaskInfo {
    pub(crate) name: TaskName,
    pub(crate) kind: TaskKind,
    /// When the task started: its submission for an operation task (the
    /// submission reads the clock anyway), else the end of its first poll
    /// that returned `Pending` (see [`TaskTable::stamp`]). `None` until
    /// then: a task that Tokio has not polled yet, or whose first poll is
    /// still running.
    pub(crate) started: Option<Instant>,
    /// The operation the task belongs to (see [`crate::OperationContext`]).
    pub(crate) operation: Option<OperationTag>,
}

/// The process-unique id of an [`OperationContext`](crate::OperationContext)
/// that tags its tasks in the owner's table.
pub(crate) type OperationTag = std::num::NonZeroU64;

/// What a settlement removed.
#[derive(Debug)]
pub(crate) struct Removed<H> {
    pub(crate) abort_requested: bool,
    pub(crate) deadline_aborted: bool,
    /// The handle to drop: the removed record's once the table is
    /// sealed, or the oldest kept one when the ring is full.
    pub(crate) handle: Option<H>,
    /// Chunks and kept handles the table gave back: the caller drops them
    /// after releasing its lock.
    pub(crate) released: Released<H>,
}

impl<H> Removed<H> {
    /// Whether dropping this frees anything (a handle or chunks).
    pub(crate) fn holds_something(&self) -> bool {
        self.handle.is_some()
            || !self.released.chunks.is_empty()
            || !self.released.handles.is_empty()
    }
}

/// Chunks and kept handles a table gave back, dropped by whoever holds this
/// after its lock is released (dropping a handle may free a task's memory).
#[derive(Debug)]
pub(crate) struct Released<H> {
    pub(super) chunks: Vec<Box<Chunk<H>>>,
    pub(super) handles: Vec<H>,
}

impl<H> Default for Released<H> {
    fn default() -> Self {
        Self {
            chunks: Vec::new(),
            handles: Vec::new(),
        }
    }
}

/// The low 32 bits of a task's sequence, carried by its settlement ticket.
///
/// Only the task's own settlement removes its record, so while the ticket
/// exists the slot holds that task: the bits are a consistency check, kept
/// small so the ticket (group pointer, slot, check) fits in 16 bytes and a
/// trivial task's Tokio cell stays in the smallest size class.
pub(crate) type SeqCheck = u32;

/// The [`SeqCheck`] of `seq`.
pub(crate) const fn seq_check(seq: u64) -> SeqCheck {
    seq as u32
}
