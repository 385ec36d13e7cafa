//! `/metrics`: the runtime's own accounting in the OpenMetrics text format,
//! for Prometheus.
//!
//! Opt-in ([`ServiceLifecycle::with_metrics`], or `ROCKETMQ_HEALTH_METRICS=1`
//! through `from_env`). Every scrape renders the sanitized V2 view of the
//! owner's whole task tree (the tree `start` ran in) with the inputs the
//! service supplies (schedules, metadata), plus the lifecycle's state and
//! the owner's process budget, encoded with `prometheus-client`.
//!
//! Invariants:
//!
//! 1. Nothing the view leaves out appears: no task, group or runtime name
//!    or id, and no configuration (labels are the view's fixed wire labels:
//!    task kinds, lane names, lifecycle states).
//! 2. A scrape is bounded like the V2 view it renders (the aggregates scan
//!    the task tables without the spawn path's locks; no detail list).
//! 3. Names follow Prometheus conventions: the `rocketmq_runtime_` prefix,
//!    `_total` on counters, base units (`_bytes`).

use std::sync::Arc;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use super::ServiceLifecycle;
use crate::{
    blocking::BlockingExecutor, diagnostics::RuntimeComponent, diagnostics::RuntimeDiagnostics,
    diagnostics::RuntimeDiagnosticsInputs, resource_budget::ResourceBudget,
    service_lifecycle::ServiceLifecycleState, task_group::TaskGroup,
};

/// The content type of a `/metrics` answer.
#[cfg(feature = "probes")]
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What a scrape reads: supplied by the service.
pub(crate) type MetricsInputs = Arc<dyn Fn() -> RuntimeDiagnosticsInputs + Send + Sync>;

/// The application's own metrics, registered into each scrape's registry
/// (`ServiceLifecycle::with_metrics_collector`).
pub(crate) type MetricsCollector = Arc<dyn Fn(&mut Registry) + Send + Sync>;

/// What a scrape reads, captured by `start`.
pub(crate) struct MetricsSource {
    pub(crate) root: TaskGroup,
    pub(crate) diagnostics: RuntimeDiagnostics,
    pub(crate) lanes: [BlockingExecutor; 3],
    pub(crate) budget: ResourceBudget,
    pub(crate) inputs: MetricsInputs,
    pub(crate) collector: Option<MetricsCollector>,
}

impl std::fmt::Debug for MetricsSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsSource")
            .field("root", &self.root.id())
            .finish_non_exhaustive()
    }
}

type Labels = Vec<(&'static str, String)>;

/// A view's fixed wire label (its `serde` form).
fn wire<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|value| value.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn gauge(registry: &mut Registry, name: &str, help: &str, value: i64) {
    let metric = Gauge::<i64>::default();
    metric.set(value);
    registry.register(name, help, metric);
}

fn counter(registry: &mut Registry, name: &str, help: &str, value: u64) {
    let metric = Counter::<u64>::default();
    metric.inc_by(value);
    registry.register(name, help, metric);
}

fn family(registry: &mut Registry, name: &str, help: &str) -> Family<Labels, Gauge<i64>> {
    let family = Family::<Labels, Gauge<i64>>::default();
    registry.register(name, help, family.clone());
    family
}

fn as_i64(value: usize) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Renders one scrape.
pub(crate) fn render(lifecycle: &ServiceLifecycle, source: &MetricsSource) -> String {
    let lanes: Vec<_> = source
        .lanes
        .iter()
        .map(BlockingExecutor::snapshot)
        .collect();
    let view = source.diagnostics.view_v2(
        RuntimeComponent::Other,
        &source.root,
        lanes,
        (source.inputs)(),
    );
    let mut root = Registry::default();
    let registry = root.sub_registry_with_prefix("rocketmq_runtime");

    let scope = wire(&view.tasks.scope);
    let tasks = family(registry, "tasks", "Active tasks by kind");
    let long = family(
        registry,
        "tasks_long_running",
        "Active tasks running longer than the view's threshold, by kind",
    );
    for summary in &view.tasks.task_kinds {
        let labels = vec![("kind", wire(&summary.kind)), ("scope", scope.clone())];
        tasks.get_or_create(&labels).set(as_i64(summary.active));
        long.get_or_create(&labels)
            .set(as_i64(summary.long_running));
    }
    gauge(
        registry,
        "task_groups",
        "Task groups in the tree",
        as_i64(view.tasks.task_group_count),
    );

    let queued = family(
        registry,
        "blocking_queued",
        "Blocking submissions waiting for a slot, by lane",
    );
    let running = family(
        registry,
        "blocking_running",
        "Blocking closures running, by lane",
    );
    let abandoned = family(
        registry,
        "blocking_timed_out_still_running",
        "Blocking closures whose caller gave up and that still run, by lane",
    );
    for lane in &view.blocking.lanes {
        let labels = vec![("lane", wire(&lane.lane))];
        queued.get_or_create(&labels).set(as_i64(lane.queued));
        running.get_or_create(&labels).set(as_i64(lane.running));
        abandoned
            .get_or_create(&labels)
            .set(as_i64(lane.timed_out_still_running));
    }

    if let Some(schedule) = &view.schedule {
        counter(
            registry,
            "schedule_runs",
            "Scheduled runs started",
            schedule.runs,
        );
        counter(
            registry,
            "schedule_skips",
            "Scheduled ticks skipped",
            schedule.skips,
        );
        counter(
            registry,
            "schedule_overlaps",
            "Scheduled runs that overlapped a previous run",
            schedule.overlaps,
        );
        counter(
            registry,
            "schedule_failures",
            "Scheduled runs that failed",
            schedule.failures,
        );
        gauge(
            registry,
            "schedule_active_runs",
            "Scheduled runs in progress",
            i64::try_from(schedule.active_runs).unwrap_or(i64::MAX),
        );
    }
    if let Some(metadata) = &view.metadata {
        let retained = Gauge::<i64>::default();
        retained.set(as_i64(metadata.retained_bytes));
        registry.register_with_unit(
            "metadata_retained",
            "Bytes of metadata snapshots queued or being written",
            Unit::Bytes,
            retained,
        );
        gauge(
            registry,
            "metadata_retained_operations",
            "Metadata snapshots queued or being written",
            as_i64(metadata.retained_operations),
        );
        gauge(
            registry,
            "metadata_waiters",
            "Receipts waiting for durability",
            as_i64(metadata.waiters),
        );
    }

    let state = lifecycle.state();
    let states = family(
        registry,
        "lifecycle_state",
        "1 for the service's current lifecycle state",
    );
    for candidate in [
        ServiceLifecycleState::Starting,
        ServiceLifecycleState::Ready,
        ServiceLifecycleState::Draining,
        ServiceLifecycleState::Stopped,
        ServiceLifecycleState::Failed,
    ] {
        states
            .get_or_create(&vec![("state", candidate.as_str().to_owned())])
            .set(i64::from(candidate == state));
    }
    gauge(
        registry,
        "ready",
        "1 while /readyz answers 200",
        i64::from(lifecycle.is_ready()),
    );
    gauge(
        registry,
        "live",
        "1 while /livez answers 200",
        i64::from(lifecycle.is_live()),
    );

    let events = source.root.event_counts();
    counter(
        registry,
        "poisoned_groups",
        "Task groups poisoned by a panic",
        events.poisoned_groups,
    );
    counter(
        registry,
        "closed_component_requests",
        "Component requests answered with a closed group",
        events.closed_component_requests,
    );

    let budget = source.budget.snapshot();
    let limit = source.budget.limit().capacity;
    for (name, help, value) in [
        (
            "process_budget_used",
            "Bytes reserved from the process budget",
            budget.current_bytes,
        ),
        (
            "process_budget_limit",
            "The process budget's byte limit",
            limit.bytes,
        ),
    ] {
        let metric = Gauge::<i64>::default();
        metric.set(as_i64(value));
        registry.register_with_unit(name, help, Unit::Bytes, metric);
    }
    gauge(
        registry,
        "process_budget_reservations",
        "Reservations held on the process budget",
        as_i64(budget.current_count),
    );

    // Queues the application exported, one series per label it chose
    // (`BudgetedQueue::export_metrics`).
    let queues = source.budget.node.tree.exported_queue_counts();
    if !queues.is_empty() {
        let depth = family(registry, "queue_depth", "Items queued, by exported queue");
        let refused = Family::<Labels, Counter<u64>>::default();
        registry.register(
            "queue_refused",
            "Pushes refused, by exported queue",
            refused.clone(),
        );
        let dropped = Family::<Labels, Counter<u64>>::default();
        registry.register(
            "queue_dropped",
            "Items an exported queue discarded (stale, coalesced, slow-consumer close)",
            dropped.clone(),
        );
        for (label, queued, refusals, discarded) in queues {
            let labels = vec![("queue", label.to_owned())];
            depth.get_or_create(&labels).set(as_i64(queued));
            refused.get_or_create(&labels).inc_by(refusals);
            dropped.get_or_create(&labels).inc_by(discarded);
        }
    }

    // Supervised services, one series per service name (at most
    // `SupervisedServiceReport::LIMIT`: the label set stays bounded).
    let (services, services_omitted) = source.root.supervised_services();
    if !services.is_empty() {
        let restarts = Family::<Labels, Counter<u64>>::default();
        registry.register(
            "service_restarts",
            "Runs of a supervised service started after a failure",
            restarts.clone(),
        );
        let failures = Family::<Labels, Counter<u64>>::default();
        registry.register(
            "service_failures",
            "Runs of a supervised service that panicked, returned an error or stalled",
            failures.clone(),
        );
        let gave_up = family(
            registry,
            "service_gave_up",
            "1 when a supervised service stopped restarting",
        );
        let stalled = family(
            registry,
            "service_stalled",
            "1 when a supervised service's run is past its progress deadline",
        );
        for service in &services {
            let labels = vec![("service", service.name.to_string())];
            restarts.get_or_create(&labels).inc_by(service.restarts);
            failures.get_or_create(&labels).inc_by(service.failures);
            gave_up
                .get_or_create(&labels)
                .set(i64::from(service.gave_up));
            stalled
                .get_or_create(&labels)
                .set(i64::from(service.stalled));
        }
        gauge(
            registry,
            "services_unlisted",
            "Supervised services beyond the listed ones",
            as_i64(services_omitted),
        );
    }

    // The application's own metrics, under its own names.
    if let Some(collect) = &source.collector {
        collect(&mut root);
    }

    let mut text = String::new();
    // Writing into a `String` cannot fail.
    let _ = encode(&mut text, &root);
    text
}
