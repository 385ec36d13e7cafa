//! Diagnostics: what a running process owns, raw or sanitized.
//!
//! Three ways to look, from most to least detailed:
//!
//! * [`RuntimeDiagnostics::snapshot`] (and `diagnostics_snapshot()` on the
//!   contexts): raw figures of one group with its identity, its tree's
//!   absorbed failures ([`TaskGroupEventCounts`]) and the owner's blocking
//!   lanes *with their task names*. For the process's own logs, not for an
//!   API others can call.
//! * [`RuntimeDiagnosticsViewV1`] and [`RuntimeDiagnosticsViewV2`]: versioned,
//!   sanitized views for authenticated operational APIs. V1 aggregates per
//!   task kind and per blocking lane; V2 adds explicit scopes, optional
//!   sections for inputs the caller owns (schedules, a metadata actor, a
//!   shutdown report) and an on-demand, bounded, name-free task detail
//!   list. Authentication remains the caller's responsibility.
//! * [`TaskGroup::diagnostics_task_details`]: only the bounded detail list,
//!   without the whole-tree aggregates.
//!
//! None of this needs Tokio's unstable features or a console subscriber;
//! it does not replace health checks or performance measurements.
//!
//! Invariants:
//!
//! 1. Sanitization: a view carries no runtime id, task id, group id, task or
//!    group name, lane or executor name, argument, path or configuration
//!    text. Its strings are the schema version, the timestamp and fixed
//!    wire labels; everything else is a count, a bound or a duration. One
//!    exception, in V2 only: the supervised services section names each
//!    supervised service (a name the application declared for a long-lived
//!    service, as it names a queue for `/metrics`) with its last failure's
//!    message, bounded and escaped (`shutdown_report/services.rs`); an
//!    application that must not show them keeps those services
//!    unsupervised or the view private.
//! 2. Lane summaries are keyed by the snapshot's typed
//!    [`BlockingLane`](crate::BlockingLane), never by position in the input,
//!    and come out in [`BlockingLane::ALL`](crate::BlockingLane::ALL) order;
//!    a lane given twice is summarized from its first snapshot.
//! 3. Each of the seven task kinds keeps its own count and wire label
//!    ([`RuntimeTaskKindV1`], an exhaustive mapping of
//!    [`TaskKind`](crate::TaskKind)).
//! 4. A bound that omits anything sets `truncated` on its section; V2's
//!    top-level `truncated` is the OR of its sections'. A V2 section whose
//!    input was not supplied is absent (`None`, skipped in JSON), never an
//!    empty section.
//! 5. The aggregates visit every live task and group of the subtree (see
//!    the task group's diagnostic walks); the detail list examines at most
//!    its scan budget of tasks and of descendant group entries, so its cost
//!    does not grow with the tree.
//! 6. `observed_at` is the wall clock at the start of the view, RFC 3339 in
//!    UTC with milliseconds.

mod clock;
mod details;
mod labels;
mod v1;
mod v2;

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

pub use details::{RuntimeTaskDetailV2, RuntimeTaskDetails};
pub use labels::{
    RuntimeBlockingKindV1, RuntimeBlockingLaneV1, RuntimeComponent, RuntimeDiagnosticsScope,
    RuntimeLifecycleStateV1, RuntimeTaskKindV1,
};
pub use v1::{
    RuntimeBlockingKindSummaryV1, RuntimeBlockingLaneSummaryV1, RuntimeDiagnosticsViewOptions,
    RuntimeDiagnosticsViewV1, RuntimeTaskKindSummaryV1,
};
pub use v2::{
    RuntimeBlockingSectionV2, RuntimeDiagnosticsInputs, RuntimeDiagnosticsViewOptionsV2,
    RuntimeDiagnosticsViewV2, RuntimeMetadataSectionV2, RuntimeScheduleSectionV2,
    RuntimeShutdownSectionV2, RuntimeTaskSectionV2,
};

use crate::shutdown_report::BlockingExecutorSnapshot;
use crate::task_group::TaskGroup;
use crate::task_identity::{TaskGroupEventCounts, TaskGroupId, TaskGroupLifecycleState};

/// The diagnostics of one runtime (an owner or a harness): its id and the
/// functions that build snapshots and views of its groups.
///
/// Every context of an owner hands out the same one
/// (`diagnostics()`); the contexts' `diagnostics_*` methods call it with
/// their own group and the owner's blocking lanes.
#[derive(Debug, Clone)]
pub struct RuntimeDiagnostics {
    runtime_id: Arc<str>,
}

/// Raw figures of one group (see the module docs: names included).
#[derive(Debug, Clone, Serialize)]
pub struct RuntimeDiagnosticsSnapshot {
    /// `rocketmq-runtime-<n>`, unique in the process.
    pub runtime_id: String,
    /// The name of the snapshot's root: the group it was taken of (a
    /// child context's snapshot covers its own subtree, so its root is the
    /// component, not the owner's root).
    pub root_name: String,
    /// The group's id.
    pub group_id: TaskGroupId,
    /// Its parent's id (`None` for a root).
    pub parent_group_id: Option<TaskGroupId>,
    /// Its lifecycle state.
    pub lifecycle_state: TaskGroupLifecycleState,
    /// Its own live tasks ([`TaskGroup::task_count`]).
    pub task_count: usize,
    /// Its live direct children ([`TaskGroup::component_count`]).
    pub child_count: usize,
    /// Live tasks of its whole subtree.
    pub active_tasks: usize,
    /// Task-table slots its subtree keeps allocated (live and vacant): far
    /// above `active_tasks` only while a recent burst's tables shrink.
    pub registry_slots: usize,
    /// Failures its tree absorbed without an error.
    pub events: TaskGroupEventCounts,
    /// The blocking lanes given to the snapshot, as given.
    pub blocking_lanes: Vec<BlockingExecutorSnapshot>,
}

impl RuntimeDiagnostics {
    /// The diagnostics of the runtime numbered `n`.
    pub(crate) fn new(n: u64) -> Self {
        Self {
            runtime_id: format!("rocketmq-runtime-{n}").into(),
        }
    }

    /// `rocketmq-runtime-<n>`, unique in the process (never in a view).
    pub fn runtime_id(&self) -> &str {
        &self.runtime_id
    }

    /// Raw figures of `group` and its subtree, with `blocking_lanes`.
    ///
    /// Visits every live task and group of the subtree (each task table
    /// under its lock).
    pub fn snapshot(
        &self,
        group: &TaskGroup,
        blocking_lanes: Vec<BlockingExecutorSnapshot>,
    ) -> RuntimeDiagnosticsSnapshot {
        let tally = group.tally(Duration::MAX);
        RuntimeDiagnosticsSnapshot {
            runtime_id: self.runtime_id.to_string(),
            root_name: group.name().to_string(),
            group_id: group.id(),
            parent_group_id: group.parent_id(),
            lifecycle_state: group.lifecycle_state(),
            task_count: tally.local_tasks,
            child_count: group.component_count(),
            active_tasks: tally.tasks,
            registry_slots: tally.registry_slots,
            events: group.event_counts(),
            blocking_lanes,
        }
    }

    /// The V1 view of `group`'s subtree and `lanes` with the default
    /// options.
    pub fn view_v1(
        &self,
        component: RuntimeComponent,
        group: &TaskGroup,
        lanes: impl AsRef<[BlockingExecutorSnapshot]>,
    ) -> RuntimeDiagnosticsViewV1 {
        self.view_v1_with_options(
            component,
            group,
            lanes,
            RuntimeDiagnosticsViewOptions::default(),
        )
    }

    /// The V1 view of `group`'s subtree and `lanes`.
    pub fn view_v1_with_options(
        &self,
        component: RuntimeComponent,
        group: &TaskGroup,
        lanes: impl AsRef<[BlockingExecutorSnapshot]>,
        options: RuntimeDiagnosticsViewOptions,
    ) -> RuntimeDiagnosticsViewV1 {
        v1::view(component, group, lanes.as_ref(), &options)
    }

    /// The V2 view of `group`'s subtree, `lanes` and `inputs` with the
    /// default options (no detail list).
    pub fn view_v2(
        &self,
        component: RuntimeComponent,
        group: &TaskGroup,
        lanes: impl AsRef<[BlockingExecutorSnapshot]>,
        inputs: RuntimeDiagnosticsInputs,
    ) -> RuntimeDiagnosticsViewV2 {
        self.view_v2_with_options(
            component,
            group,
            lanes,
            inputs,
            RuntimeDiagnosticsViewOptionsV2::default(),
        )
    }

    /// The V2 view of `group`'s subtree, `lanes` and `inputs`.
    pub fn view_v2_with_options(
        &self,
        component: RuntimeComponent,
        group: &TaskGroup,
        lanes: impl AsRef<[BlockingExecutorSnapshot]>,
        inputs: RuntimeDiagnosticsInputs,
        options: RuntimeDiagnosticsViewOptionsV2,
    ) -> RuntimeDiagnosticsViewV2 {
        v2::view(component, group, lanes.as_ref(), inputs, &options)
    }
}

/// Whole milliseconds of `duration`, saturated.
fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
