//! The V1 view: per-task-kind and per-lane summaries of a subtree, and the
//! summary builders V2 reuses.

use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::clock::rfc3339_utc;
use super::labels::{
    RuntimeBlockingKindV1, RuntimeBlockingLaneV1, RuntimeComponent, RuntimeLifecycleStateV1,
    RuntimeTaskKindV1,
};
use super::millis;
use crate::shutdown_report::{BlockingExecutorSnapshot, BlockingLane};
use crate::task_group::{TaskGroup, TaskTally};
use crate::task_identity::TaskKind;

/// Bounds and the long-running threshold of a V1 view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeDiagnosticsViewOptions {
    /// A started task at least this old counts as long running (30 s).
    pub long_running_threshold: Duration,
    /// Task-kind summaries to emit, in kind order (7: all of them).
    pub max_task_kind_summaries: usize,
    /// Lane summaries to emit, in lane order (3: all of them).
    pub max_blocking_lane_summaries: usize,
}

impl Default for RuntimeDiagnosticsViewOptions {
    fn default() -> Self {
        Self {
            long_running_threshold: Duration::from_secs(30),
            max_task_kind_summaries: TaskKind::ALL.len(),
            max_blocking_lane_summaries: BlockingLane::ALL.len(),
        }
    }
}

/// One task kind across the subtree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuntimeTaskKindSummaryV1 {
    /// The kind.
    pub kind: RuntimeTaskKindV1,
    /// Live tasks of this kind.
    pub active: usize,
    /// Of those, started at least the threshold ago.
    pub long_running: usize,
    /// The oldest one's age since its start (0 if none started).
    pub max_elapsed_millis: u64,
}

/// One blocking-job kind in a lane.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuntimeBlockingKindSummaryV1 {
    /// The kind.
    pub kind: RuntimeBlockingKindV1,
    /// Jobs of this kind in the lane's table (queued or running).
    pub active: usize,
    /// The oldest one's time in its current state.
    pub max_elapsed_millis: u64,
}

/// One managed blocking lane.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuntimeBlockingLaneSummaryV1 {
    /// The lane (from its typed identity).
    pub lane: RuntimeBlockingLaneV1,
    /// The lane's concurrency bound (`None`: unbounded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<usize>,
    /// The lane's queue bound (`None`: unbounded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_queue_depth: Option<usize>,
    /// Jobs waiting for a slot.
    pub queued: usize,
    /// Jobs running.
    pub running: usize,
    /// Jobs whose caller timed out while their closure still runs.
    pub timed_out_still_running: usize,
    /// Closures still running (running plus timed out).
    pub blocking_still_running: usize,
    /// Per job kind, in kind order.
    pub task_kinds: Vec<RuntimeBlockingKindSummaryV1>,
}

/// The sanitized V1 view (see the module docs for what it never holds).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuntimeDiagnosticsViewV1 {
    /// [`SCHEMA_VERSION`](Self::SCHEMA_VERSION).
    pub schema_version: &'static str,
    /// When the view was taken (RFC 3339, UTC).
    pub observed_at: String,
    /// The component the caller named.
    pub component: RuntimeComponent,
    /// The viewed group's state.
    pub lifecycle_state: RuntimeLifecycleStateV1,
    /// Groups of the subtree, the viewed one included.
    pub task_group_count: usize,
    /// Live tasks of the subtree.
    pub task_count: usize,
    /// Per task kind, in kind order, at most `max_task_kind_summaries`.
    pub task_kinds: Vec<RuntimeTaskKindSummaryV1>,
    /// Per lane, in lane order, at most `max_blocking_lane_summaries`.
    pub blocking_lanes: Vec<RuntimeBlockingLaneSummaryV1>,
    /// A bound omitted summaries.
    pub truncated: bool,
}

impl RuntimeDiagnosticsViewV1 {
    /// The V1 schema version.
    pub const SCHEMA_VERSION: &'static str = "rocketmq.runtime-diagnostics.v1";
}

/// The first `max` of `items`, and whether any were cut.
pub(super) fn bounded<T>(mut items: Vec<T>, max: usize) -> (Vec<T>, bool) {
    let cut = items.len() > max;
    items.truncate(max);
    (items, cut)
}

/// The task-kind summaries of `tally`, in kind order.
pub(super) fn kind_summaries(tally: &TaskTally) -> Vec<RuntimeTaskKindSummaryV1> {
    TaskKind::ALL
        .iter()
        .zip(&tally.kinds)
        .map(|(kind, figures)| RuntimeTaskKindSummaryV1 {
            kind: (*kind).into(),
            active: figures.active,
            long_running: figures.long_running,
            max_elapsed_millis: millis(figures.max_elapsed),
        })
        .collect()
}

/// The lane summaries of `lanes`: the first snapshot of each typed lane,
/// in lane order (invariant 2 of the module docs).
pub(super) fn lane_summaries(
    lanes: &[BlockingExecutorSnapshot],
) -> Vec<RuntimeBlockingLaneSummaryV1> {
    BlockingLane::ALL
        .iter()
        .filter_map(|lane| lanes.iter().find(|snapshot| snapshot.lane == *lane))
        .map(lane_summary)
        .collect()
}

fn lane_summary(snapshot: &BlockingExecutorSnapshot) -> RuntimeBlockingLaneSummaryV1 {
    let task_kinds = RuntimeBlockingKindV1::ALL
        .iter()
        .map(|kind| {
            let jobs = snapshot
                .tasks
                .iter()
                .filter(|task| RuntimeBlockingKindV1::from(task.kind) == *kind);
            let (active, max_elapsed) = jobs.fold((0, Duration::ZERO), |(count, max), task| {
                (count + 1, max.max(task.elapsed))
            });
            RuntimeBlockingKindSummaryV1 {
                kind: *kind,
                active,
                max_elapsed_millis: millis(max_elapsed),
            }
        })
        .collect();
    let limit = |bound: usize| (bound != usize::MAX).then_some(bound);
    RuntimeBlockingLaneSummaryV1 {
        lane: snapshot.lane.into(),
        max_concurrency: limit(snapshot.max_concurrency),
        max_queue_depth: limit(snapshot.max_queue_depth),
        queued: snapshot.queued,
        running: snapshot.running,
        timed_out_still_running: snapshot.timed_out_still_running,
        blocking_still_running: snapshot.blocking_still_running,
        task_kinds,
    }
}

pub(super) fn view(
    component: RuntimeComponent,
    group: &TaskGroup,
    lanes: &[BlockingExecutorSnapshot],
    options: &RuntimeDiagnosticsViewOptions,
) -> RuntimeDiagnosticsViewV1 {
    let observed_at = rfc3339_utc(SystemTime::now());
    let tally = group.tally(options.long_running_threshold);
    let (task_kinds, kinds_cut) = bounded(kind_summaries(&tally), options.max_task_kind_summaries);
    let (blocking_lanes, lanes_cut) =
        bounded(lane_summaries(lanes), options.max_blocking_lane_summaries);
    RuntimeDiagnosticsViewV1 {
        schema_version: RuntimeDiagnosticsViewV1::SCHEMA_VERSION,
        observed_at,
        component,
        lifecycle_state: group.lifecycle_state().into(),
        task_group_count: tally.groups,
        task_count: tally.tasks,
        task_kinds,
        blocking_lanes,
        truncated: kinds_cut || lanes_cut,
    }
}
