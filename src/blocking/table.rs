//! The task table of one blocking pool (a managed lane or an isolated
//! executor).
//!
//! Invariants:
//!
//! 1. One record per owned submission: `Queued` → `Running` → removed, or
//!    `Running` → `TimedOutStillRunning` (its caller stopped waiting) until
//!    the closure exits.
//! 2. A guard removes the record when the submission leaves the queue or its
//!    closure exits, whatever ends it; the table wakes its `emptied` waiters
//!    when it becomes empty.
//! 3. `blocking_still_running = running + timed_out_still_running`: a closure
//!    whose caller gave up still counts until it exits.
//! 4. Every refusal counts in `rejected`.
//! 5. A closure running past `warn_after` is reported once, naming its lane
//!    and task, whether its caller still waits or gave up.

use std::collections::HashMap;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::blocking::admission::AdmissionBudget;
use crate::blocking::BlockingPoolPolicy;
use crate::loom::{Arc, AtomicU64, Mutex, Ordering, Weak};
use crate::shutdown_report::{
    BlockingExecutorSnapshot, BlockingKind, BlockingLane, BlockingTaskId, BlockingTaskSnapshot,
    BlockingTaskState,
};
use crate::task_group::BlockingEvidence;

#[derive(Debug)]
struct Record {
    name: Arc<str>,
    kind: BlockingKind,
    state: BlockingTaskState,
    /// When the record entered its current phase (queued, then started).
    since: Instant,
    /// Whether the closure was reported as running past `warn_after`.
    warned: bool,
}

/// Records, rejection count and the admission counts of one pool.
#[derive(Debug)]
pub(crate) struct BlockingTable {
    name: Arc<str>,
    lane: BlockingLane,
    lane_index: usize,
    max_concurrency: usize,
    max_queue_depth: usize,
    /// A closure running longer than this is reported once.
    warn_after: Duration,
    budget: Arc<AdmissionBudget>,
    next_id: AtomicU64,
    rejected: AtomicU64,
    records: Mutex<HashMap<u64, Record>>,
    /// Woken when the table becomes empty.
    emptied: Notify,
}

impl BlockingTable {
    pub(crate) fn new(
        policy: &BlockingPoolPolicy,
        lane: BlockingLane,
        lane_index: usize,
        budget: Arc<AdmissionBudget>,
    ) -> Arc<Self> {
        Arc::new(Self {
            name: Arc::from(policy.name.as_str()),
            lane,
            lane_index,
            max_concurrency: policy.max_concurrency,
            max_queue_depth: policy.max_queue_depth,
            warn_after: policy.warn_after,
            budget,
            next_id: AtomicU64::new(1),
            rejected: AtomicU64::new(0),
            records: Mutex::new(HashMap::new()),
            emptied: Notify::new(),
        })
    }

    pub(crate) fn budget(&self) -> &Arc<AdmissionBudget> {
        &self.budget
    }

    pub(crate) fn lane_index(&self) -> usize {
        self.lane_index
    }

    /// The lane this table's work runs on.
    pub(crate) fn lane(&self) -> BlockingLane {
        self.lane
    }

    /// Closures the pool runs at once.
    pub(crate) fn max_concurrency(&self) -> usize {
        self.max_concurrency
    }

    /// Submissions that may wait for a slot.
    pub(crate) fn max_queue_depth(&self) -> usize {
        self.max_queue_depth
    }

    /// Counts a refused submission.
    pub(crate) fn reject(&self) {
        self.rejected.fetch_add(1, Ordering::Relaxed);
    }

    /// Records a queued submission; the guard removes the record.
    pub(crate) fn insert(self: &Arc<Self>, name: Arc<str>, kind: BlockingKind) -> RecordGuard {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.records.lock().insert(
            id,
            Record {
                name,
                kind,
                state: BlockingTaskState::Queued,
                since: Instant::now(),
                warned: false,
            },
        );
        RecordGuard {
            table: Arc::clone(self),
            id,
        }
    }

    /// Moves a record to `state` if it is still present.
    pub(crate) fn mark(&self, id: u64, state: BlockingTaskState) {
        if let Some(record) = self.records.lock().get_mut(&id) {
            if record.state == BlockingTaskState::Queued {
                record.since = Instant::now();
            }
            record.state = state;
        }
    }

    fn remove(&self, id: u64) {
        let mut records = self.records.lock();
        let removed = records.remove(&id);
        let emptied = removed.is_some() && records.is_empty();
        drop(records);
        if emptied {
            self.emptied.notify_waiters();
        }
        // A slow closure nobody waited for long enough to report is
        // reported as it exits.
        if let Some(record) = removed {
            if record.state.is_still_running() && !record.warned {
                let elapsed = record.since.elapsed();
                if elapsed > self.warn_after {
                    self.warn(&record.name, elapsed);
                }
            }
        }
    }

    /// Reports the running closure `id` as slow, once: its caller has
    /// waited `warn_after` for it.
    pub(crate) fn warn_slow(&self, id: u64) {
        let mut records = self.records.lock();
        let Some(record) = records.get_mut(&id) else {
            return;
        };
        if !record.state.is_still_running() || std::mem::replace(&mut record.warned, true) {
            return;
        }
        let name = Arc::clone(&record.name);
        let elapsed = record.since.elapsed();
        drop(records);
        self.warn(&name, elapsed);
    }

    /// The warning for a closure running past `warn_after`.
    fn warn(&self, task: &str, elapsed: Duration) {
        tracing::warn!(
            lane = self.lane.as_str(),
            pool = %self.name,
            task,
            elapsed_ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
            warn_after_ms = u64::try_from(self.warn_after.as_millis()).unwrap_or(u64::MAX),
            "blocking closure running longer than warn_after"
        );
    }

    /// Submissions still owned: queued, running or abandoned but running.
    /// Holds the records' lock (a test of the drop order keeps a record
    /// from being removed while it watches the permit).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn hold_records(&self) -> impl Drop + '_ {
        self.records.lock()
    }

    pub(crate) fn len(&self) -> usize {
        self.records.lock().len()
    }

    pub(crate) fn emptied(&self) -> &Notify {
        &self.emptied
    }

    /// Running closures plus abandoned ones still running.
    pub(crate) fn blocking_still_running(&self) -> usize {
        self.records
            .lock()
            .values()
            .filter(|record| record.state.is_still_running())
            .count()
    }

    /// The full snapshot (task names included).
    pub(crate) fn snapshot(&self) -> BlockingExecutorSnapshot {
        let counts = self.budget.counts(self.lane_index);
        let now = Instant::now();
        let records = self.records.lock();
        let (mut running, mut timed_out) = (0, 0);
        let mut oldest_queue_wait = Duration::ZERO;
        let mut tasks: Vec<BlockingTaskSnapshot> = records
            .iter()
            .map(|(id, record)| {
                let elapsed = now.saturating_duration_since(record.since);
                match record.state {
                    BlockingTaskState::Queued => {
                        oldest_queue_wait = oldest_queue_wait.max(elapsed);
                    }
                    BlockingTaskState::Running => running += 1,
                    BlockingTaskState::TimedOutStillRunning => timed_out += 1,
                    BlockingTaskState::Completed | BlockingTaskState::JoinFailed => {}
                }
                BlockingTaskSnapshot {
                    id: BlockingTaskId::new(*id),
                    name: record.name.to_string(),
                    kind: record.kind,
                    state: record.state,
                    elapsed,
                }
            })
            .collect();
        drop(records);
        tasks.sort_by_key(|task| task.id.as_u64());
        BlockingExecutorSnapshot {
            name: Arc::clone(&self.name),
            lane: self.lane,
            max_concurrency: self.max_concurrency,
            max_queue_depth: self.max_queue_depth,
            global_capacity: counts.global_capacity,
            global_running: counts.global_running,
            global_available: counts.global_capacity.saturating_sub(counts.global_running),
            lane_reserved: counts.lane_reserved,
            lane_running: counts.lane_running,
            lane_borrowed: counts.lane_running.saturating_sub(counts.lane_reserved),
            // Waiters in the admission queue: a submission counts as queued
            // once it holds its place in line (its record may say `Queued`
            // a moment earlier).
            queued: counts.queued,
            running,
            timed_out_still_running: timed_out,
            blocking_still_running: running + timed_out,
            rejected: self.rejected.load(Ordering::Relaxed),
            oldest_queue_wait,
            tasks,
        }
    }
}

/// Owns one record; removes it when dropped.
#[derive(Debug)]
pub(crate) struct RecordGuard {
    table: Arc<BlockingTable>,
    id: u64,
}

/// The tree's view of a table (`task_group.rs`, invariant 3).
impl BlockingEvidence for BlockingTable {
    fn blocking_still_running(&self) -> usize {
        BlockingTable::blocking_still_running(self)
    }

    fn emptied(&self) -> &Notify {
        BlockingTable::emptied(self)
    }

    fn snapshot(&self) -> BlockingExecutorSnapshot {
        BlockingTable::snapshot(self)
    }
}

impl BlockingTable {
    /// This table as evidence for a task tree (registered weakly).
    pub(crate) fn evidence(self: &Arc<Self>) -> Weak<dyn BlockingEvidence> {
        let weak: Weak<Self> = Arc::downgrade(self);
        weak
    }
}

impl RecordGuard {
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The closure starts: `Queued` becomes `Running` (a record the caller
    /// already gave up on stays `TimedOutStillRunning`).
    pub(crate) fn mark_started(&self) {
        if let Some(record) = self.table.records.lock().get_mut(&self.id) {
            if record.state == BlockingTaskState::Queued {
                record.since = Instant::now();
                record.state = BlockingTaskState::Running;
            }
        }
    }
}

impl Drop for RecordGuard {
    fn drop(&mut self) {
        self.table.remove(self.id);
    }
}
