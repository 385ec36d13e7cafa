//! The task table of one blocking pool (a managed lane or an isolated
//! executor): one record per queued, running or abandoned-but-running
//! submission, removed by a guard when the submission leaves the queue or
//! its closure exits.

use std::collections::HashMap;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::blocking::admission::AdmissionBudget;
use crate::blocking::{
    BlockingExecutorSnapshot, BlockingKind, BlockingLane, BlockingPoolPolicy, BlockingTaskId,
    BlockingTaskSnapshot, BlockingTaskState,
};
use crate::loom::{Arc, AtomicU64, Mutex, Ordering};

#[derive(Debug)]
struct Record {
    name: Arc<str>,
    kind: BlockingKind,
    state: BlockingTaskState,
    /// When the record entered its current phase (queued, then started).
    since: Instant,
}

/// Records, rejection count and the admission counts of one pool.
#[derive(Debug)]
pub(crate) struct BlockingTable {
    name: Arc<str>,
    lane: BlockingLane,
    lane_index: usize,
    max_concurrency: usize,
    max_queue_depth: usize,
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
        if records.remove(&id).is_some() && records.is_empty() {
            drop(records);
            self.emptied.notify_waiters();
        }
    }

    /// Submissions still owned: queued, running or abandoned but running.
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
