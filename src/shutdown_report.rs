//! Shutdown evidence: what a task-group shutdown observed.
//!
//! A [`ShutdownReport`] is a tree mirroring the task-group tree. Each node
//! counts how its group's tasks settled, lists a bounded sample of the tasks
//! that were still registered, and carries the blocking work merged into it.
//!
//! Invariants:
//!
//! 1. Health is the whole-tree AND of zero `leaked`, `failed`, `panicked`,
//!    `timed_out` and `blocking_still_running`.
//! 2. Clone, drop, the health check, `summary` and `to_json` walk the tree
//!    iteratively, so deep trees are safe on small stacks; `to_json` writes
//!    the whole tree at any depth (`json.rs`). The `Serialize` impl recurses
//!    like every derived serializer and so writes at most
//!    `SERIALIZED_DEPTH_LIMIT` levels (`depth.rs`). Known limit: the derived
//!    `Debug` stays recursive in the depth of the tree.
//! 3. At most `REMAINING_TASKS_LIMIT` (64) remaining tasks are listed per
//!    group; the rest are only counted.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::shutdown_deadline::serialize_duration_ms;

mod blocking;
mod depth;
mod json;
mod released;
mod services;
mod summary;

pub use blocking::{
    BlockingExecutorSnapshot, BlockingKind, BlockingLane, BlockingTaskId, BlockingTaskSnapshot,
    BlockingTaskState,
};
pub(crate) use released::{push_failure, ReleasedGroups};
pub use released::{ReleasedGroup, TaskFailure, TaskFailureKind};
pub(crate) use services::{bounded_message, panic_message, payload_text};
pub use services::{ServiceFailureKind, SupervisedServiceReport};
pub use summary::ShutdownReportDisplay;

use crate::task_identity::{
    TaskGroupEventCounts, TaskGroupId, TaskId, TaskKind, TaskName, TaskState,
};

/// Annotation added once by [`ShutdownReport::merge_blocking`] when merged
/// blocking work may still be running.
const BLOCKING_STILL_RUNNING_ANNOTATION: &str =
    "spawn_blocking tasks may continue after timeout; see blocking_still_running";

/// One tracked task as seen when a shutdown report was assembled.
///
/// Serialized with `elapsed` as the integer field `elapsed_ms`.
#[derive(Debug, Clone, Serialize)]
pub struct TaskSnapshot {
    /// The task's identity (serialized as its per-group sequence number).
    pub id: TaskId,
    /// The task's name.
    pub name: TaskName,
    /// The group that owns the task.
    pub group_id: TaskGroupId,
    /// The name of the owning group.
    pub group_name: Arc<str>,
    /// What the task is for.
    pub kind: TaskKind,
    /// The task's state when the snapshot was taken.
    pub state: TaskState,
    /// How long the task has been running: since its submission for an
    /// operation task; for other group tasks, since the end of the first
    /// poll that returned `Pending` (the submitting thread reads no clock
    /// for them, and a task that completes in its first poll never needs
    /// a start time). Zero for a group task whose first poll has not
    /// returned yet: one Tokio has not polled, or one blocked inside its
    /// first poll.
    #[serde(rename = "elapsed_ms", serialize_with = "serialize_duration_ms")]
    pub elapsed: Duration,
}

/// A free-text note attached to a shutdown report, explaining evidence that
/// the counters alone do not (for example aborts whose destruction is not yet
/// confirmed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShutdownAnnotation {
    /// The note.
    pub message: String,
}

impl ShutdownAnnotation {
    /// An annotation with the given message.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

/// The evidence one task-group shutdown produced, with one child report per
/// child group.
///
/// # Counters
///
/// | Field | Counts |
/// | --- | --- |
/// | `completed` | Tasks whose future returned before their group's token was cancelled. |
/// | `cancelled` | Tasks that ended because their group was cancelled: dropped at the cancellation (a cancellable service, an operation task), or returned after it. |
/// | `aborted` | Tasks destroyed by an abort, whoever requested it. |
/// | `failed` | Critical services that returned before their group was cancelled (a failure without a panic; see [`TaskGroup::spawn_critical_service`](crate::TaskGroup::spawn_critical_service)). |
/// | `panicked` | Tasks that panicked while polled or dropped (a destructor panic after a return or an abort counts here, once). |
/// | `timed_out` | Tasks this shutdown aborted when its deadline expired, plus the tasks still registered (`leaked`). An abort requested earlier through `abort_task` is counted in `aborted` only, never here. |
/// | `leaked` | Tasks still registered when the report was assembled. |
/// | `blocking_still_running` | Blocking closures that may still execute (merged with [`merge_blocking`](Self::merge_blocking)). |
///
/// # Health
///
/// [`is_healthy`](Self::is_healthy) is `true` only when `leaked`, `failed`,
/// `panicked`, `timed_out` and `blocking_still_running` are zero in this report
/// **and in every descendant**. `aborted` and `cancelled` never make a report
/// unhealthy: cancelling and aborting is how a shutdown is supposed to end
/// work.
///
/// # Remaining tasks
///
/// `remaining_tasks` lists at most [`REMAINING_TASKS_LIMIT`](Self::REMAINING_TASKS_LIMIT)
/// (64) snapshots of the tasks still registered; `remaining_tasks_omitted`
/// counts the rest, so the report stays small however many tasks leaked.
/// `leaked` still counts every one of them.
///
/// # What a report proves
///
/// A report is point-in-time evidence. A report from an immediate shutdown
/// (`shutdown_now`, an owner's drop) is **not** proof of cleanup: it requests
/// aborts and returns without waiting, so futures not yet destroyed appear as
/// `leaked`, and their destructors may still be running. Blocking snapshots
/// likewise do not stop closures that outlive a deadline.
///
/// # Serialization and depth
///
/// `elapsed` is serialized as the integer field `elapsed_ms`. [`Clone`],
/// [`is_healthy`](Self::is_healthy), [`summary`](Self::summary),
/// [`to_json`](Self::to_json) and drop walk the tree iteratively, so very
/// deep trees are safe on small stacks, and `to_json` writes the whole tree
/// at any depth. The [`Serialize`] impl (for other formats, or a report
/// embedded in another document) recurses once per level, so it writes at
/// most [`SERIALIZED_DEPTH_LIMIT`](Self::SERIALIZED_DEPTH_LIMIT) levels of
/// `children`; a deeper subtree becomes one element
/// `{"truncated": true, "omitted_groups": n}`. Within that depth both give
/// the same JSON. Known limit: the derived [`Debug`] remains recursive in
/// the depth of the tree.
#[derive(Debug)]
#[must_use = "the report is the shutdown's evidence: log, return or inspect it"]
pub struct ShutdownReport {
    /// The group's name.
    pub name: String,
    /// How long the shutdown took (JSON: `elapsed_ms`).
    pub elapsed: Duration,
    /// Tasks whose future returned before their group was cancelled.
    pub completed: usize,
    /// Tasks that ended because their group was cancelled (dropped at the
    /// cancellation, or returned after it).
    pub cancelled: usize,
    /// Tasks destroyed by an abort (explicit or at the deadline).
    pub aborted: usize,
    /// Critical services that returned before their group was cancelled.
    pub failed: usize,
    /// Tasks that panicked while polled or dropped.
    pub panicked: usize,
    /// Tasks this shutdown aborted at its deadline, plus `leaked`.
    pub timed_out: usize,
    /// Tasks still registered when the report was assembled.
    pub leaked: usize,
    /// Blocking closures that may still execute.
    pub blocking_still_running: usize,
    /// One report per child group (the `Serialize` impl writes
    /// [`SERIALIZED_DEPTH_LIMIT`](Self::SERIALIZED_DEPTH_LIMIT) levels,
    /// [`to_json`](Self::to_json) all of them).
    pub children: Vec<ShutdownReport>,
    /// Up to [`REMAINING_TASKS_LIMIT`](Self::REMAINING_TASKS_LIMIT) snapshots
    /// of tasks still registered.
    pub remaining_tasks: Vec<TaskSnapshot>,
    /// Tasks still registered beyond those listed in `remaining_tasks`.
    pub remaining_tasks_omitted: usize,
    /// The named stragglers: up to
    /// [`REMAINING_TASKS_LIMIT`](Self::REMAINING_TASKS_LIMIT) of the tasks
    /// this group's shutdown deadline aborted (state `Aborted`, with their
    /// age at the report), so an operator sees which tasks ignored
    /// cancellation. Omitted from JSON when empty.
    pub timed_out_tasks: Vec<TaskSnapshot>,
    /// Tasks the deadline aborted beyond those listed in
    /// `timed_out_tasks`. Omitted from JSON when zero.
    pub timed_out_tasks_omitted: usize,
    /// Blocking submissions that were running or timed out but still running.
    pub blocking_tasks: Vec<BlockingTaskSnapshot>,
    /// Notes explaining the evidence.
    pub annotations: Vec<ShutdownAnnotation>,
    /// Why the shutdown happened (`signal`, `pre_stop`, `internal`,
    /// `critical_failure`): set on the tree owner's report from the first
    /// shutdown request of a started
    /// [`ServiceLifecycle`](crate::ServiceLifecycle), or with
    /// [`with_reason`](Self::with_reason). Omitted from JSON when unset;
    /// never affects health.
    pub reason: Option<String>,
    /// Failures this group absorbed without an error: its own poisoning and
    /// the closed groups it handed to late `component` requests. Omitted
    /// from JSON when zero.
    pub events: TaskGroupEventCounts,
    /// Up to [`TaskFailure::LIMIT`] of this group's failed tasks, by name
    /// (its `failed` and `panicked` count them all). Omitted from JSON when
    /// empty.
    pub failures: Vec<TaskFailure>,
    /// Failed tasks beyond those listed in `failures`. Omitted from JSON
    /// when zero.
    pub failures_omitted: usize,
    /// The child groups that left the tree before this report was assembled
    /// (their last handle dropped, their tasks settled), one entry per name
    /// with their settled counters, events and named failures; a failure
    /// among them makes the report unhealthy. At most
    /// [`ReleasedGroup::LIMIT`] entries. Omitted from JSON when empty.
    pub released: Vec<ReleasedGroup>,
    /// Released groups summed into the [`ReleasedGroup::OTHER`] entry
    /// (beyond [`ReleasedGroup::LIMIT`] names). Omitted from JSON when
    /// zero.
    pub released_omitted: usize,
    /// The supervised services of this report's subtree (on the report's
    /// top node only), by name: runs, restarts, the last failure, whether
    /// one gave up (which makes the report unhealthy) or is stalled. At
    /// most [`SupervisedServiceReport::LIMIT`] entries. Omitted from JSON
    /// when empty.
    pub services: Vec<SupervisedServiceReport>,
    /// Supervised services beyond those listed in `services`. Omitted from
    /// JSON when zero.
    pub services_omitted: usize,
}

impl ShutdownReport {
    /// Records why the shutdown happened.
    pub fn with_reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    /// Most task snapshots kept in `remaining_tasks`.
    pub const REMAINING_TASKS_LIMIT: usize = 64;

    /// Levels of `children` the [`Serialize`] impl writes (see the type's
    /// docs): bounded so that a derived serializer's recursion over a
    /// 100,000-deep report fits a 1 MiB thread stack.
    /// [`to_json`](Self::to_json) has no such bound.
    pub const SERIALIZED_DEPTH_LIMIT: usize = 32;

    /// An empty report: every counter zero, no children, no snapshots.
    pub fn new(name: impl Into<String>, elapsed: Duration) -> Self {
        Self {
            name: name.into(),
            elapsed,
            completed: 0,
            cancelled: 0,
            aborted: 0,
            failed: 0,
            panicked: 0,
            timed_out: 0,
            leaked: 0,
            blocking_still_running: 0,
            children: Vec::new(),
            remaining_tasks: Vec::new(),
            remaining_tasks_omitted: 0,
            timed_out_tasks: Vec::new(),
            timed_out_tasks_omitted: 0,
            blocking_tasks: Vec::new(),
            annotations: Vec::new(),
            reason: None,
            events: TaskGroupEventCounts::default(),
            failures: Vec::new(),
            failures_omitted: 0,
            released: Vec::new(),
            released_omitted: 0,
            services: Vec::new(),
            services_omitted: 0,
        }
    }

    /// Whether the whole tree is healthy: `leaked`, `failed`, `panicked`,
    /// `timed_out` and `blocking_still_running` are zero in this report and in
    /// every descendant, and no released group (`released`) counts a
    /// failed, panicked or timed-out task. `aborted` and `cancelled` do not matter.
    ///
    /// Walks the tree iteratively.
    pub fn is_healthy(&self) -> bool {
        self.visit_iter().all(Self::node_is_healthy)
    }

    /// `Ok(())` when [`is_healthy`](Self::is_healthy), otherwise `Err` with
    /// the report's JSON, for use in tests and shutdown checks
    /// (`report.assert_no_task_leak().unwrap()` prints the evidence).
    pub fn assert_no_task_leak(&self) -> Result<(), String> {
        if self.is_healthy() {
            Ok(())
        } else {
            Err(self.to_json())
        }
    }

    /// Logs the report's JSON at `warn` level when it is not
    /// [healthy](Self::is_healthy); does nothing otherwise.
    pub fn log_if_unhealthy(&self) {
        if !self.is_healthy() {
            tracing::warn!(
                group = %self.name,
                report = %self.to_json(),
                "shutdown report is unhealthy"
            );
        }
    }

    /// The report as pretty-printed JSON: the whole tree, at any depth
    /// (written iteratively, so a deep tree is safe on a small stack).
    ///
    /// Never fails: if serialization fails, the result is a JSON object
    /// `{"serialization_error": "<reason>"}`.
    pub fn to_json(&self) -> String {
        match json::compact(self) {
            Ok(compact) => json::pretty(&compact),
            Err(error) => {
                serde_json::json!({ "serialization_error": error.to_string() }).to_string()
            }
        }
    }

    /// Merges a blocking executor's snapshot into this report.
    ///
    /// Adds the snapshot's `blocking_still_running` to this report's count,
    /// appends every task snapshot it lists (the submissions its executor
    /// still owned: queued, running, or timed out but still running), and,
    /// when the merged count is non-zero, adds
    /// (once per report) the annotation
    /// `"spawn_blocking tasks may continue after timeout; see blocking_still_running"`.
    /// A non-zero merge therefore makes the report unhealthy.
    pub fn merge_blocking(&mut self, snapshot: BlockingExecutorSnapshot) {
        self.blocking_still_running = self
            .blocking_still_running
            .saturating_add(snapshot.blocking_still_running);
        self.blocking_tasks.extend(snapshot.tasks);
        if self.blocking_still_running > 0
            && !self
                .annotations
                .iter()
                .any(|note| note.message == BLOCKING_STILL_RUNNING_ANNOTATION)
        {
            self.annotate(BLOCKING_STILL_RUNNING_ANNOTATION);
        }
    }

    /// Records a task that is still registered: kept in `remaining_tasks`
    /// while fewer than [`REMAINING_TASKS_LIMIT`](Self::REMAINING_TASKS_LIMIT)
    /// are listed, otherwise counted in `remaining_tasks_omitted`. Does not
    /// touch `leaked`; the caller counts that.
    pub(crate) fn push_remaining(&mut self, snapshot: TaskSnapshot) {
        if self.remaining_tasks.len() < Self::REMAINING_TASKS_LIMIT {
            self.remaining_tasks.push(snapshot);
        } else {
            self.remaining_tasks_omitted = self.remaining_tasks_omitted.saturating_add(1);
        }
    }

    /// Appends an annotation.
    pub(crate) fn annotate(&mut self, message: impl Into<String>) {
        self.annotations.push(ShutdownAnnotation::new(message));
    }

    /// Every report of the tree, this one first, in pre-order; iterative.
    pub(crate) fn visit_iter(&self) -> impl Iterator<Item = &ShutdownReport> + '_ {
        PreOrder { stack: vec![self] }
    }

    /// Health of this node alone.
    fn node_is_healthy(&self) -> bool {
        self.leaked == 0
            && self.failed == 0
            && self.panicked == 0
            && self.timed_out == 0
            && self.blocking_still_running == 0
            && self.released.iter().all(ReleasedGroup::is_healthy)
            && self
                .services
                .iter()
                .all(SupervisedServiceReport::is_healthy)
    }

    /// A copy of this node without its children (with room for them).
    fn clone_node(&self) -> Self {
        Self {
            name: self.name.clone(),
            elapsed: self.elapsed,
            completed: self.completed,
            cancelled: self.cancelled,
            aborted: self.aborted,
            failed: self.failed,
            panicked: self.panicked,
            timed_out: self.timed_out,
            leaked: self.leaked,
            blocking_still_running: self.blocking_still_running,
            children: Vec::with_capacity(self.children.len()),
            remaining_tasks: self.remaining_tasks.clone(),
            remaining_tasks_omitted: self.remaining_tasks_omitted,
            timed_out_tasks: self.timed_out_tasks.clone(),
            timed_out_tasks_omitted: self.timed_out_tasks_omitted,
            blocking_tasks: self.blocking_tasks.clone(),
            annotations: self.annotations.clone(),
            reason: self.reason.clone(),
            events: self.events,
            failures: self.failures.clone(),
            failures_omitted: self.failures_omitted,
            released: self.released.clone(),
            released_omitted: self.released_omitted,
            services: self.services.clone(),
            services_omitted: self.services_omitted,
        }
    }
}

/// Iterative: a deep chain of children clones on a small stack.
impl Clone for ShutdownReport {
    fn clone(&self) -> Self {
        /// A node being copied: its source, the next child to copy, and the
        /// copy built so far.
        struct Frame<'a> {
            source: &'a ShutdownReport,
            next_child: usize,
            copy: ShutdownReport,
        }

        let mut stack = vec![Frame {
            source: self,
            next_child: 0,
            copy: self.clone_node(),
        }];
        loop {
            let top = stack
                .last_mut()
                .expect("the clone stack holds the root until the end");
            if let Some(child) = top.source.children.get(top.next_child) {
                top.next_child += 1;
                stack.push(Frame {
                    source: child,
                    next_child: 0,
                    copy: child.clone_node(),
                });
                continue;
            }
            let done = stack.pop().expect("the clone stack is not empty").copy;
            match stack.last_mut() {
                Some(parent) => parent.copy.children.push(done),
                None => return done,
            }
        }
    }
}

/// Pre-order walk over a report tree with an explicit stack.
struct PreOrder<'a> {
    stack: Vec<&'a ShutdownReport>,
}

impl<'a> Iterator for PreOrder<'a> {
    type Item = &'a ShutdownReport;

    fn next(&mut self) -> Option<Self::Item> {
        let node = self.stack.pop()?;
        self.stack.extend(node.children.iter().rev());
        Some(node)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn task(seq: u64) -> TaskSnapshot {
        let group = TaskGroupId::next();
        TaskSnapshot {
            id: TaskId::new(group, seq, 0),
            name: TaskName::from("leaky"),
            group_id: group,
            group_name: Arc::from("component"),
            kind: TaskKind::Worker,
            state: TaskState::Leaked,
            elapsed: Duration::from_millis(1_500),
        }
    }

    #[test]
    fn push_remaining_keeps_64_and_counts_the_rest() {
        let mut report = ShutdownReport::new("root", Duration::ZERO);
        for seq in 1..=10_000 {
            report.push_remaining(task(seq));
        }
        report.leaked = 10_000;
        report.timed_out = 10_000;
        assert_eq!(
            report.remaining_tasks.len(),
            ShutdownReport::REMAINING_TASKS_LIMIT
        );
        assert_eq!(report.remaining_tasks_omitted, 9_936);
        let json = report.to_json();
        assert!(
            json.len() < 64 * 1024,
            "report JSON is {} bytes",
            json.len()
        );
        assert!(json.contains("\"remaining_tasks_omitted\": 9936"));
        assert!(json.contains("\"elapsed_ms\": 1500"));
        assert!(json.contains("\"state\": \"leaked\""));
    }

    #[test]
    fn merge_blocking_appends_every_task_snapshot() {
        let blocking = |id, state| BlockingTaskSnapshot {
            id: BlockingTaskId::new(id),
            name: "fsync".to_owned(),
            kind: BlockingKind::ShortIo,
            state,
            elapsed: Duration::from_secs(2),
        };
        let snapshot = BlockingExecutorSnapshot {
            name: Arc::from("rocketmq-blocking.storage-io"),
            lane: BlockingLane::StorageIo,
            max_concurrency: 4,
            max_queue_depth: 16,
            global_capacity: 8,
            global_running: 2,
            global_available: 6,
            lane_reserved: 1,
            lane_running: 2,
            lane_borrowed: 1,
            queued: 1,
            running: 1,
            timed_out_still_running: 1,
            blocking_still_running: 2,
            rejected: 0,
            oldest_queue_wait: Duration::ZERO,
            tasks: vec![
                blocking(1, BlockingTaskState::Queued),
                blocking(2, BlockingTaskState::Running),
                blocking(3, BlockingTaskState::Completed),
                blocking(4, BlockingTaskState::JoinFailed),
                blocking(5, BlockingTaskState::TimedOutStillRunning),
            ],
        };
        let mut report = ShutdownReport::new("root", Duration::ZERO);
        report.merge_blocking(snapshot.clone());
        report.merge_blocking(snapshot);
        let ids: Vec<u64> = report
            .blocking_tasks
            .iter()
            .map(|t| t.id.as_u64())
            .collect();
        assert_eq!(ids, [1, 2, 3, 4, 5, 1, 2, 3, 4, 5]);
        assert_eq!(report.blocking_still_running, 4);
        assert_eq!(report.annotations.len(), 1);
        assert!(!report.is_healthy());
    }

    #[test]
    fn visit_iter_walks_the_tree_in_pre_order() {
        let mut report = ShutdownReport::new("root", Duration::ZERO);
        report
            .children
            .push(ShutdownReport::new("child", Duration::ZERO));
        let names: Vec<&str> = report.visit_iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["root", "child"]);
    }
}
