//! The V2 view: scoped sections, optional sections for inputs the caller
//! owns, and the bounded detail list.

use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::clock::rfc3339_utc;
use super::details::{collect, RuntimeTaskDetailV2};
use super::labels::{RuntimeComponent, RuntimeDiagnosticsScope, RuntimeLifecycleStateV1};
use super::millis;
use super::v1::{
    bounded, kind_summaries, lane_summaries, RuntimeBlockingLaneSummaryV1,
    RuntimeDiagnosticsViewOptions, RuntimeTaskKindSummaryV1,
};
use crate::metadata_io::MetadataIoSnapshot;
use crate::scheduled::ScheduledTaskSnapshot;
use crate::shutdown_report::BlockingExecutorSnapshot;
use crate::shutdown_report::{ShutdownReport, SupervisedServiceReport};
use crate::task_group::TaskGroup;

/// Bounds of a V2 view, the long-running threshold and the budgets of its
/// detail list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeDiagnosticsViewOptionsV2 {
    /// A started task at least this old counts as long running (30 s).
    pub long_running_threshold: Duration,
    /// Task-kind summaries to emit, in kind order (7: all of them).
    pub max_task_kind_summaries: usize,
    /// Lane summaries to emit, in lane order (3: all of them).
    pub max_blocking_lane_summaries: usize,
    /// Schedule snapshots the schedule section examines (16).
    pub max_schedule_tasks: usize,
    /// Metadata resources the metadata section examines (32).
    pub max_metadata_resources: usize,
    /// Details to emit (0: no detail list).
    pub max_detail_entries: usize,
    /// Tasks, and descendant group entries, the detail list may examine
    /// (0: no detail list).
    pub detail_scan_budget: usize,
}

impl Default for RuntimeDiagnosticsViewOptionsV2 {
    fn default() -> Self {
        let v1 = RuntimeDiagnosticsViewOptions::default();
        Self {
            long_running_threshold: v1.long_running_threshold,
            max_task_kind_summaries: v1.max_task_kind_summaries,
            max_blocking_lane_summaries: v1.max_blocking_lane_summaries,
            max_schedule_tasks: 16,
            max_metadata_resources: 32,
            max_detail_entries: 0,
            detail_scan_budget: 0,
        }
    }
}

/// State the caller owns and hands to a V2 view; each supplied input adds
/// its section, an input left out leaves its section absent.
#[derive(Debug, Clone, Default)]
pub struct RuntimeDiagnosticsInputs {
    /// Snapshots of the caller's schedules
    /// ([`ScheduledTaskGroup::snapshot`](crate::ScheduledTaskGroup)); an
    /// empty list supplies nothing.
    pub schedule: Vec<ScheduledTaskSnapshot>,
    /// The caller's metadata actor
    /// ([`MetadataIoActor::snapshot`](crate::MetadataIoActor::snapshot)).
    pub metadata: Option<MetadataIoSnapshot>,
    /// A shutdown report the caller holds.
    pub shutdown: Option<ShutdownReport>,
}

/// The tasks of the viewed subtree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuntimeTaskSectionV2 {
    /// Always `subtree`.
    pub scope: RuntimeDiagnosticsScope,
    /// Groups of the subtree, the viewed one included.
    pub task_group_count: usize,
    /// Live tasks of the subtree.
    pub task_count: usize,
    /// Live tasks of the viewed group itself.
    pub local_task_count: usize,
    /// Tasks started at least the threshold ago.
    pub long_running: usize,
    /// The oldest task's age since its start.
    pub max_elapsed_millis: u64,
    /// Per task kind, in kind order, at most `max_task_kind_summaries`.
    pub task_kinds: Vec<RuntimeTaskKindSummaryV1>,
    /// The kind summaries were cut.
    pub truncated: bool,
}

/// The managed blocking lanes given to the view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuntimeBlockingSectionV2 {
    /// `process_shared`: the lanes serve the whole owner.
    pub scope: RuntimeDiagnosticsScope,
    /// Jobs waiting, over every lane observed.
    pub queued: usize,
    /// Jobs running, over every lane observed.
    pub running: usize,
    /// Timed-out jobs still running, over every lane observed.
    pub timed_out_still_running: usize,
    /// Closures still running, over every lane observed.
    pub blocking_still_running: usize,
    /// Per lane, in lane order, at most `max_blocking_lane_summaries`.
    pub lanes: Vec<RuntimeBlockingLaneSummaryV1>,
    /// The lane summaries were cut.
    pub truncated: bool,
}

/// The caller's schedules, aggregated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuntimeScheduleSectionV2 {
    /// `local`: the schedules the caller supplied.
    pub scope: RuntimeDiagnosticsScope,
    /// Snapshots examined (at most `max_schedule_tasks`).
    pub tasks_scanned: usize,
    /// Of those, schedules still registered (`running`).
    pub tasks_emitted: usize,
    /// Runs in progress.
    pub active_runs: u64,
    /// Runs that returned.
    pub runs: u64,
    /// Ticks skipped.
    pub skips: u64,
    /// Ticks that found a run still going.
    pub overlaps: u64,
    /// Failed runs.
    pub failures: u64,
    /// The longest run.
    pub max_elapsed_millis: u64,
    /// Snapshots were left unexamined.
    pub truncated: bool,
}

/// The caller's metadata actor, aggregated (no resource names or paths).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuntimeMetadataSectionV2 {
    /// `local`: the actor the caller supplied.
    pub scope: RuntimeDiagnosticsScope,
    /// The actor admits submissions.
    pub accepting: bool,
    /// Generations in flight or queued.
    pub retained_operations: usize,
    /// Their payload bytes.
    pub retained_bytes: usize,
    /// Receipts waiting, over the resources examined.
    pub waiters: usize,
    /// Resources examined (at most `max_metadata_resources`).
    pub resources_scanned: usize,
    /// Of those, resources with a generation in flight or queued, or a
    /// waiter.
    pub resources_emitted: usize,
    /// Resources were left unexamined.
    pub truncated: bool,
}

/// A shutdown report the caller supplied, in counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuntimeShutdownSectionV2 {
    /// `subtree`: a report covers its group and descendants.
    pub scope: RuntimeDiagnosticsScope,
    /// How long the shutdown took.
    pub elapsed_millis: u64,
    /// Tasks that ended on cancellation.
    pub cancelled: usize,
    /// Critical services that failed.
    pub failed: usize,
    /// Tasks aborted at the deadline.
    pub timed_out: usize,
    /// Tasks still registered after the shutdown.
    pub leaked: usize,
}

/// The sanitized V2 view (see the module docs for what it never holds).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuntimeDiagnosticsViewV2 {
    /// [`SCHEMA_VERSION`](Self::SCHEMA_VERSION).
    pub schema_version: &'static str,
    /// When the view was taken (RFC 3339, UTC).
    pub observed_at: String,
    /// The component the caller named.
    pub component: RuntimeComponent,
    /// The viewed group's state.
    pub lifecycle_state: RuntimeLifecycleStateV1,
    /// The subtree's tasks.
    pub tasks: RuntimeTaskSectionV2,
    /// The blocking lanes given.
    pub blocking: RuntimeBlockingSectionV2,
    /// Present only when schedules were supplied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<RuntimeScheduleSectionV2>,
    /// Present only when a metadata snapshot was supplied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<RuntimeMetadataSectionV2>,
    /// Present only when a shutdown report was supplied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shutdown: Option<RuntimeShutdownSectionV2>,
    /// The supervised services of the viewed subtree, by name (the one
    /// named section: module invariant 1), at most
    /// [`SupervisedServiceReport::LIMIT`] (`truncated` when more). Omitted
    /// from JSON when empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<SupervisedServiceReport>,
    /// The detail list: empty unless both `max_detail_entries` and
    /// `detail_scan_budget` are non-zero.
    pub details: Vec<RuntimeTaskDetailV2>,
    /// The scan budget the detail list had.
    pub detail_scan_budget: usize,
    /// Tasks the detail list examined: compare with `tasks.task_count` to
    /// see how much of the subtree it covers.
    pub details_scanned: usize,
    /// The OR of the sections' `truncated`.
    pub truncated: bool,
}

impl RuntimeDiagnosticsViewV2 {
    /// The V2 schema version.
    pub const SCHEMA_VERSION: &'static str = "rocketmq.runtime-diagnostics.v2";

    /// The view in one line of words, for a log or an operator's terminal
    /// (the JSON form carries every field):
    ///
    /// ```text
    /// broker open: 12 tasks in 4 groups (1 long-running, oldest 1500 ms; service 3, operation 9); blocking 1 running, 0 queued; schedules 2 active runs, 0 failures; metadata 1 retained (4096 B), 0 waiters; oldest tasks: service 1500 ms, operation 20 ms
    /// ```
    ///
    /// Sections the view has not (schedules, metadata, the detail list)
    /// are left out.
    pub fn summary(&self) -> String {
        use std::fmt::Write as _;
        let tasks = &self.tasks;
        let mut line = format!(
            "{} {}: {} tasks in {} groups ({} long-running, oldest {} ms",
            label(&self.component),
            label(&self.lifecycle_state),
            tasks.task_count,
            tasks.task_group_count,
            tasks.long_running,
            tasks.max_elapsed_millis,
        );
        let active = tasks.task_kinds.iter().filter(|kind| kind.active > 0);
        for (index, kind) in active.enumerate() {
            let separator = if index == 0 { "; " } else { ", " };
            let _ = write!(line, "{separator}{} {}", label(&kind.kind), kind.active);
        }
        let blocking = &self.blocking;
        let _ = write!(
            line,
            "); blocking {} running, {} queued",
            blocking.running, blocking.queued
        );
        if blocking.timed_out_still_running > 0 {
            let _ = write!(
                line,
                ", {} timed out still running",
                blocking.timed_out_still_running
            );
        }
        if let Some(schedule) = &self.schedule {
            let _ = write!(
                line,
                "; schedules {} active runs, {} failures",
                schedule.active_runs, schedule.failures
            );
        }
        if let Some(metadata) = &self.metadata {
            let _ = write!(
                line,
                "; metadata {} retained ({} B), {} waiters{}",
                metadata.retained_operations,
                metadata.retained_bytes,
                metadata.waiters,
                if metadata.accepting {
                    ""
                } else {
                    ", not accepting"
                }
            );
        }
        for (index, service) in self.services.iter().enumerate() {
            let separator = if index == 0 { "; services: " } else { ", " };
            let _ = write!(
                line,
                "{separator}{} ({} restarts",
                service.name, service.restarts
            );
            if let Some(kind) = service.last_failure {
                let _ = write!(line, ", last failure {kind}");
            }
            if service.gave_up {
                let _ = write!(line, ", gave up");
            }
            if service.stalled {
                let _ = write!(line, ", stalled");
            }
            line.push(')');
        }
        for (index, detail) in self.details.iter().enumerate() {
            let separator = if index == 0 { "; oldest tasks: " } else { ", " };
            let _ = write!(
                line,
                "{separator}{} {} ms",
                label(&detail.kind),
                detail.elapsed_millis
            );
        }
        line
    }
}

/// A label's wire name (`broker`, `running`, `service`).
fn label(value: &impl Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(name)) => name,
        _ => String::from("?"),
    }
}

fn schedule_section(schedules: &[ScheduledTaskSnapshot], max: usize) -> RuntimeScheduleSectionV2 {
    let examined = &schedules[..schedules.len().min(max)];
    let sum = |field: fn(&ScheduledTaskSnapshot) -> u64| {
        examined.iter().map(field).fold(0_u64, u64::saturating_add)
    };
    RuntimeScheduleSectionV2 {
        scope: RuntimeDiagnosticsScope::Local,
        tasks_scanned: examined.len(),
        tasks_emitted: examined.iter().filter(|schedule| schedule.running).count(),
        active_runs: sum(|schedule| schedule.active_runs),
        runs: sum(|schedule| schedule.runs),
        skips: sum(|schedule| schedule.skips),
        overlaps: sum(|schedule| schedule.overlaps),
        failures: sum(|schedule| schedule.failures),
        max_elapsed_millis: examined
            .iter()
            .map(|schedule| schedule.max_elapsed_ms)
            .max()
            .unwrap_or(0),
        truncated: schedules.len() > examined.len(),
    }
}

fn metadata_section(snapshot: &MetadataIoSnapshot, max: usize) -> RuntimeMetadataSectionV2 {
    let examined = &snapshot.resources[..snapshot.resources.len().min(max)];
    RuntimeMetadataSectionV2 {
        scope: RuntimeDiagnosticsScope::Local,
        accepting: snapshot.accepting,
        retained_operations: snapshot.pending_operations,
        retained_bytes: snapshot.pending_bytes,
        waiters: examined.iter().map(|resource| resource.waiter_count).sum(),
        resources_scanned: examined.len(),
        resources_emitted: examined
            .iter()
            .filter(|resource| {
                resource.in_flight_generation.is_some()
                    || resource.queued_generation.is_some()
                    || resource.waiter_count > 0
            })
            .count(),
        truncated: snapshot.resources.len() > examined.len(),
    }
}

fn shutdown_section(report: &ShutdownReport) -> RuntimeShutdownSectionV2 {
    RuntimeShutdownSectionV2 {
        scope: RuntimeDiagnosticsScope::Subtree,
        elapsed_millis: millis(report.elapsed),
        cancelled: report.cancelled,
        failed: report.failed,
        timed_out: report.timed_out,
        leaked: report.leaked,
    }
}

pub(super) fn view(
    component: RuntimeComponent,
    group: &TaskGroup,
    lanes: &[BlockingExecutorSnapshot],
    inputs: RuntimeDiagnosticsInputs,
    options: &RuntimeDiagnosticsViewOptionsV2,
) -> RuntimeDiagnosticsViewV2 {
    let observed_at = rfc3339_utc(SystemTime::now());
    let tally = group.tally(options.long_running_threshold);
    let all_kinds = kind_summaries(&tally);
    let long_running = all_kinds.iter().map(|kind| kind.long_running).sum();
    let max_elapsed_millis = all_kinds
        .iter()
        .map(|kind| kind.max_elapsed_millis)
        .max()
        .unwrap_or(0);
    let (task_kinds, kinds_cut) = bounded(all_kinds, options.max_task_kind_summaries);
    let tasks = RuntimeTaskSectionV2 {
        scope: RuntimeDiagnosticsScope::Subtree,
        task_group_count: tally.groups,
        task_count: tally.tasks,
        local_task_count: tally.local_tasks,
        long_running,
        max_elapsed_millis,
        task_kinds,
        truncated: kinds_cut,
    };
    let all_lanes = lane_summaries(lanes);
    let total = |field: fn(&RuntimeBlockingLaneSummaryV1) -> usize| {
        all_lanes.iter().map(field).sum::<usize>()
    };
    let (queued, running) = (total(|lane| lane.queued), total(|lane| lane.running));
    let timed_out_still_running = total(|lane| lane.timed_out_still_running);
    let blocking_still_running = total(|lane| lane.blocking_still_running);
    let (lanes, lanes_cut) = bounded(all_lanes, options.max_blocking_lane_summaries);
    let blocking = RuntimeBlockingSectionV2 {
        scope: RuntimeDiagnosticsScope::ProcessShared,
        queued,
        running,
        timed_out_still_running,
        blocking_still_running,
        lanes,
        truncated: lanes_cut,
    };
    let schedule = (!inputs.schedule.is_empty())
        .then(|| schedule_section(&inputs.schedule, options.max_schedule_tasks));
    let metadata = inputs
        .metadata
        .as_ref()
        .map(|snapshot| metadata_section(snapshot, options.max_metadata_resources));
    let shutdown = inputs.shutdown.as_ref().map(shutdown_section);
    let (details, details_scanned) =
        if options.max_detail_entries > 0 && options.detail_scan_budget > 0 {
            let sample = collect(
                group,
                options.detail_scan_budget,
                options.max_detail_entries,
            );
            (sample.details, sample.tasks_scanned)
        } else {
            (Vec::new(), 0)
        };
    let (services, services_omitted) = group.supervised_services();
    let truncated = tasks.truncated
        || blocking.truncated
        || services_omitted > 0
        || schedule.as_ref().is_some_and(|section| section.truncated)
        || metadata.as_ref().is_some_and(|section| section.truncated);
    RuntimeDiagnosticsViewV2 {
        schema_version: RuntimeDiagnosticsViewV2::SCHEMA_VERSION,
        observed_at,
        component,
        lifecycle_state: group.lifecycle_state().into(),
        tasks,
        blocking,
        schedule,
        metadata,
        shutdown,
        services,
        details,
        detail_scan_budget: options.detail_scan_budget,
        details_scanned,
        truncated,
    }
}
