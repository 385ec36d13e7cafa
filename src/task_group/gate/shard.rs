//! One shard of the gate's task table: its registration side (table lock,
//! records, counters) and its settlement side (settle lock, pending
//! settlements and start stamps, the settled count), and how pending
//! settlements are applied. See the gate's module docs for the protocol.

use tokio::time::Instant;

use super::SHARDS;
use crate::loom::{AtomicU64, Mutex, Ordering};
use crate::shutdown_report::{push_failure, TaskFailure, TaskFailureKind};
use crate::task_group::registry::{Removed, SeqCheck, TaskTable};
use crate::task_identity::TaskEnd;

/// The shard a registration from this thread uses: threads are numbered in
/// the order they first submit, and thread `n` uses shard `n % SHARDS`.
#[cfg(not(loom))]
pub(super) fn home_shard() -> usize {
    use std::cell::Cell;

    use crate::loom::StaticAtomicU64;

    pub(super) const UNASSIGNED: usize = usize::MAX;
    static NEXT_THREAD: StaticAtomicU64 = StaticAtomicU64::new(0);
    thread_local! {
        static HOME: Cell<usize> = const { Cell::new(UNASSIGNED) };
    }
    HOME.try_with(|home| {
        let mut shard = home.get();
        if shard == UNASSIGNED {
            shard = (NEXT_THREAD.fetch_add(1, Ordering::Relaxed) % SHARDS as u64) as usize;
            home.set(shard);
        }
        shard
    })
    // A submission from a thread-local destructor: any shard is correct.
    .unwrap_or(0)
}

/// Pending settlements after which a settler applies them itself (two under
/// loom, so the models reach this path). Until then the submitting thread
/// applies them (every [`REGISTER_APPLY_EVERY`] registrations), so the
/// records stay in its cache; this bounds what a shard whose submitter went
/// quiet keeps pending (each pending record still holds its task's handle,
/// and so the task's Tokio cell).
#[cfg(not(loom))]
pub(crate) const SETTLER_APPLY: usize = 128;
#[cfg(loom)]
pub(crate) const SETTLER_APPLY: usize = 2;

/// Pending settlements (and stamps) copied out per settle-lock hold when
/// applying (one under loom, so the models reach the loop).
#[cfg(not(loom))]
pub(super) const APPLY_BATCH: usize = 64;
#[cfg(loom)]
pub(super) const APPLY_BATCH: usize = 1;

/// Every this many registrations in a shard, the registration applies the
/// shard's pending settlements first (under loom: every registration). The
/// submitting thread then removes the records it wrote and reuses their
/// slots while they are still in its cache, instead of a completing worker
/// pulling them over and the next registration pulling them back.
#[cfg(not(loom))]
pub(super) const REGISTER_APPLY_EVERY: u64 = 32;
#[cfg(loom)]
pub(super) const REGISTER_APPLY_EVERY: u64 = 1;

/// Lifetime settlement counters (per shard; summed for reports).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct SettleCounters {
    pub(crate) completed: usize,
    pub(crate) cancelled: usize,
    pub(crate) aborted: usize,
    pub(crate) panicked: usize,
    pub(crate) failed: usize,
    /// Tasks aborted by a shutdown deadline that have since settled.
    pub(crate) deadline_aborted_settled: usize,
    /// Live records whose abort was requested (destruction unconfirmed).
    pub(crate) live_abort_requested: usize,
}

impl SettleCounters {
    pub(super) fn add(&mut self, other: &SettleCounters) {
        self.completed += other.completed;
        self.cancelled += other.cancelled;
        self.aborted += other.aborted;
        self.panicked += other.panicked;
        self.failed += other.failed;
        self.deadline_aborted_settled += other.deadline_aborted_settled;
        self.live_abort_requested += other.live_abort_requested;
    }
}

/// What a settlement changed, acted on after the lock is released.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SettleEffect {
    pub(crate) idle: bool,
    pub(crate) poisoned_now: bool,
}

/// A settlement published but not yet applied to the table.
#[derive(Debug, Clone, Copy)]
pub(super) struct PendingSettle {
    pub(super) local: u32,
    pub(super) check: SeqCheck,
    pub(super) result: TaskEnd,
}

/// One shard: a registration side and a settlement side, each on its own
/// cache line(s) (see the module docs).
#[derive(Debug)]
#[repr(C)]
pub(super) struct Shard<H> {
    pub(super) reg: RegSide<H>,
    pub(super) settle: SettleSide,
}

/// What submissions touch: the registered count beside the table lock.
#[derive(Debug)]
#[repr(C, align(64))]
pub(super) struct RegSide<H> {
    /// Tasks ever registered in this shard; changed under the table lock
    /// and read without it (idle detection, `len`).
    pub(super) registered: AtomicU64,
    pub(super) state: Mutex<ShardState<H>>,
}

/// What settlements touch: the settled count beside the settle lock.
#[derive(Debug)]
#[repr(C, align(64))]
pub(super) struct SettleSide {
    /// Tasks of this shard ever settled; changed under the settle lock and
    /// read without it. `registered - settled` is the shard's live count.
    pub(super) settled: AtomicU64,
    pub(super) pending: Mutex<Pending>,
}

/// A task's start time, published by its first poll that returned
/// `Pending` and not yet written to its record.
#[derive(Debug, Clone, Copy)]
pub(super) struct PendingStamp {
    pub(super) local: u32,
    pub(super) check: SeqCheck,
    pub(super) at: Instant,
}

#[derive(Debug, Default)]
pub(super) struct Pending {
    pub(super) entries: Vec<PendingSettle>,
    /// Start times to write to their records (see [`Gate::stamp`]).
    pub(super) stamps: Vec<PendingStamp>,
    /// A registered count read earlier (a lower bound): while `settled`
    /// stays below it the shard is busy, without reading the registration
    /// side's line.
    pub(super) known_registered: u64,
}

#[derive(Debug)]
pub(super) struct ShardState<H> {
    /// Registrations this shard has numbered: its next task gets sequence
    /// `next_local * SHARDS + shard + 1` (group-unique, never reused,
    /// increasing within the shard).
    pub(super) next_local: u64,
    pub(super) table: TaskTable<H>,
    pub(super) counters: SettleCounters,
    /// The first [`TaskFailure::LIMIT`] tasks of this shard that panicked
    /// or failed, by name (read from their records as their settlements
    /// are applied; only a failure pays for it).
    pub(super) failures: Vec<TaskFailure>,
    /// Failed tasks of this shard beyond `failures`.
    pub(super) failures_omitted: usize,
    /// Messages of panicked tasks whose settlement is not applied yet, by
    /// record (empty unless a task panicked).
    pub(super) panic_messages: Vec<(u32, SeqCheck, String)>,
}

impl<H> Shard<H> {
    /// Tasks registered and not settled.
    pub(super) fn live(&self) -> u64 {
        // Settled first: every settled task was registered before, so the
        // difference never underflows and is zero only if every task
        // registered when `registered` is read has settled.
        let settled = self.settle.settled.load(Ordering::SeqCst);
        self.reg.registered.load(Ordering::SeqCst) - settled
    }
}

/// Handles and chunks an application freed: dropped after the locks are
/// released (a dropped handle may free a task's memory).
pub(super) type Graveyard<H> = Vec<Removed<H>>;

impl<H> ShardState<H> {
    /// Applies the stamps and settlements pending on `side` (the caller
    /// holds this table's lock): writes start times, then removes each
    /// settled record and counts its result. The settle lock is held only
    /// to copy out a batch of each at a time, so settlers are not held up
    /// by the removals, and both lists keep their capacity. Everything
    /// published before the last batch is applied before this returns
    /// (under the table lock throughout, so a stamp that finds its record
    /// removed finds the slot vacant and is dropped).
    pub(super) fn apply_pending(&mut self, side: &SettleSide, graveyard: &mut Graveyard<H>) {
        // Filled only when something is pending: a read with nothing to
        // apply costs one settle-lock round trip and no copy.
        let mut settled = None;
        let mut stamped = None;
        loop {
            let (settled_count, stamped_count, more) = {
                let mut pending = side.pending.lock();
                let settled_count = take_batch(&mut pending.entries, &mut settled);
                let stamped_count = take_batch(&mut pending.stamps, &mut stamped);
                let more = !pending.entries.is_empty() || !pending.stamps.is_empty();
                (settled_count, stamped_count, more)
            };
            // Stamps first: a task both stamped and settled is then just
            // removed.
            if let Some(batch) = &stamped {
                for stamp in &batch[..stamped_count] {
                    self.table.stamp(stamp.local, stamp.check, stamp.at);
                }
            }
            if let Some(batch) = &settled {
                for entry in &batch[..settled_count] {
                    self.apply(*entry, graveyard);
                }
            }
            if !more {
                return;
            }
        }
    }

    /// Removes one settled task's record and counts its result.
    pub(super) fn apply(&mut self, settled: PendingSettle, graveyard: &mut Graveyard<H>) {
        let failure = match settled.result {
            TaskEnd::Panicked => Some(TaskFailureKind::Panicked),
            TaskEnd::Failed => Some(TaskFailureKind::Failed),
            _ => None,
        };
        if let Some(failure) = failure {
            self.record_failure(settled, failure);
        }
        let Some(removed) = self.table.remove(settled.local, settled.check) else {
            debug_assert!(false, "a pending settlement's record is missing");
            return;
        };
        let counters = &mut self.counters;
        match settled.result {
            TaskEnd::Completed => counters.completed += 1,
            TaskEnd::Cancelled => counters.cancelled += 1,
            TaskEnd::Aborted => counters.aborted += 1,
            TaskEnd::Panicked => counters.panicked += 1,
            TaskEnd::Failed => counters.failed += 1,
        }
        if removed.abort_requested {
            counters.live_abort_requested -= 1;
        }
        // A deadline abort counts as a timeout only if it ended the task: a
        // task that completed while the abort raced it is just completed.
        if removed.deadline_aborted && settled.result != TaskEnd::Completed {
            counters.deadline_aborted_settled += 1;
        }
        if removed.holds_something() {
            graveyard.push(removed);
        }
    }
}

impl<H> ShardState<H> {
    /// Keeps the name of a task that panicked or failed (before its
    /// record is removed), bounded by [`TaskFailure::LIMIT`].
    fn record_failure(&mut self, settled: PendingSettle, failure: TaskFailureKind) {
        let message = self
            .panic_messages
            .iter()
            .position(|(local, check, _)| (*local, *check) == (settled.local, settled.check))
            .map(|index| self.panic_messages.swap_remove(index).2);
        if self.failures.len() >= TaskFailure::LIMIT {
            self.failures_omitted += 1;
            return;
        }
        if let Some(info) = self.table.info(settled.local, settled.check) {
            let failure = TaskFailure {
                name: info.name.clone(),
                kind: info.kind,
                failure,
                message,
            };
            push_failure(&mut self.failures, &mut self.failures_omitted, failure);
        }
    }
}

/// Moves up to [`APPLY_BATCH`] entries from the end of `list` into
/// `buffer` (created on first use) and returns how many.
pub(super) fn take_batch<T: Copy>(
    list: &mut Vec<T>,
    buffer: &mut Option<[T; APPLY_BATCH]>,
) -> usize {
    let Some(&first) = list.first() else {
        return 0;
    };
    let batch = buffer.get_or_insert([first; APPLY_BATCH]);
    let count = list.len().min(APPLY_BATCH);
    let rest = list.len() - count;
    batch[..count].copy_from_slice(&list[rest..]);
    list.truncate(rest);
    count
}
