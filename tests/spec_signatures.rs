//! Code written against the public signatures compiles and behaves: each
//! test uses one changed signature the way user code does (the modules
//! `owner`, `service_context`, `task_group`, `blocking`, `resources`,
//! `resource_budget`, `metadata_io`, `service_lifecycle`, `critical`,
//! `shutdown_deadline`, `shutdown_report`, `diagnostics`, `context`, and
//! the `common` helpers).

mod support;

use std::sync::Arc;
use std::time::Duration;

use rocketmq_runtime::{
    BudgetLimit, CriticalFailureKind, CriticalFailureState, DrainRequestMethods, FullPolicy,
    MonotonicClock, ResourceBudgetTree, RuntimeContext, ServiceLifecycle, ServiceLifecycleConfig,
    ShutdownReport, TaskKind,
};
use support::guard;

/// A user's clock: no `Debug`, as a clock type from another crate may be.
struct TickClock(std::sync::atomic::AtomicU64);

impl MonotonicClock for TickClock {
    fn now(&self) -> Duration {
        Duration::from_millis(self.0.load(std::sync::atomic::Ordering::Relaxed))
    }
}

#[test]
fn a_clock_without_debug_drives_a_budget_tree() {
    let clock = Arc::new(TickClock(std::sync::atomic::AtomicU64::new(5)));
    let tree = ResourceBudgetTree::with_clock(
        "process",
        BudgetLimit::new(4, 1_024, FullPolicy::Reject),
        clock,
    )
    .expect("valid");
    assert_eq!(tree.root().monotonic_now(), Duration::from_millis(5));
}

/// Sums a counter over a report tree, as `usize`.
fn total(report: &ShutdownReport, counter: fn(&ShutdownReport) -> usize) -> usize {
    let mut sum: usize = 0;
    let mut stack = vec![report];
    while let Some(node) = stack.pop() {
        sum += counter(node);
        stack.extend(&node.children);
    }
    sum
}

#[tokio::test(start_paused = true)]
async fn report_counters_sum_as_usize() {
    let ctx = RuntimeContext::try_from_current("signatures").expect("inside Tokio");
    let component = ctx.service_context("component");
    component
        .spawn("returns", TaskKind::Worker, async {})
        .expect("open");
    tokio::task::yield_now().await;
    let report = guard("shutdown", ctx.shutdown_tasks(Duration::from_secs(1))).await;
    let child = &report.children[0];
    let settled: usize = child.completed
        + child.cancelled
        + child.aborted
        + child.failed
        + child.panicked
        + child.timed_out
        + child.leaked
        + child.blocking_still_running
        + child.remaining_tasks_omitted;
    assert_eq!(settled, 1);
    assert_eq!(total(&report, |node| node.completed), 1);
}

#[test]
fn blocking_task_names_compare_with_str() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let ctx = RuntimeContext::try_from_current("names").expect("inside Tokio");
        let storage = ctx.service_context("store").storage_io().clone();
        let (entered_tx, entered_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let running = tokio::spawn({
            let storage = storage.clone();
            async move {
                storage
                    .spawn_io("flush", move || {
                        entered_tx.send(()).expect("test waits");
                        let _ = release_rx.recv();
                    })
                    .await
            }
        });
        tokio::task::spawn_blocking(move || entered_rx.recv())
            .await
            .expect("joins")
            .expect("closure entered");
        let snapshot = storage.snapshot();
        assert!(snapshot.tasks.iter().any(|task| task.name == "flush"));
        release_tx.send(()).expect("closure waits");
        running.await.expect("joins").expect("ran");
        let _ = ctx.shutdown_tasks(Duration::from_secs(1)).await;
    });
}

#[test]
fn a_lifecycle_config_is_a_struct_literal_of_the_spec_fields() {
    let config = ServiceLifecycleConfig {
        service_name: Arc::from("broker"),
        probe_bind_addr: None,
        shutdown_timeout: Duration::from_secs(20),
        liveness_stale_after: Duration::from_secs(10),
        drain_request_methods: DrainRequestMethods::GetOrPost,
    };
    let lifecycle = ServiceLifecycle::new(config).with_drain_delay(Duration::from_secs(2));
    assert_eq!(lifecycle.config().shutdown_timeout, Duration::from_secs(20));
    assert_eq!(lifecycle.drain_delay(), Duration::from_secs(2));
}

/// The failure state is passed by value to every spawn path, and the
/// caller keeps using it through a clone.
#[tokio::test(start_paused = true)]
async fn spawn_critical_takes_the_state_by_value_and_a_clone_stays_usable() {
    let ctx = RuntimeContext::try_from_current("critical").expect("inside Tokio");
    let component = ctx.service_context("component");
    let failures = CriticalFailureState::new();
    component
        .spawn_critical("ctx", TaskKind::Worker, failures.clone(), async {
            panic!("deliberate")
        })
        .expect("open");
    component
        .task_group()
        .spawn_critical("group", TaskKind::Worker, failures.clone(), async {})
        .expect("open");
    component
        .task_spawner()
        .spawn_critical_service("spawner", failures.clone(), async {})
        .expect("open");
    component
        .spawn_critical_service("ctx-service", failures.clone(), async {})
        .expect("open");
    let failure = guard("failure recorded", failures.wait()).await;
    assert_eq!(failure.kind(), CriticalFailureKind::Panicked);
    while failures.occurrences() < 3 {
        tokio::task::yield_now().await;
    }
    assert_eq!(failures.occurrences(), 3, "one panic, two early exits");
    let _ = ctx.shutdown_tasks(Duration::from_secs(1)).await;
}

/// The diagnostics surface (`src/diagnostics.rs`) of the contexts, task
/// groups and the `RuntimeContext` harness, called with the types and field
/// names user code writes.
#[test]
fn diagnostics_signatures_of_the_spec() {
    use rocketmq_runtime::{
        BlockingExecutorSnapshot, RuntimeBlockingSectionV2, RuntimeMetadataSectionV2, RuntimeOwner,
        RuntimeScheduleSectionV2, RuntimeShutdownSectionV2, RuntimeTaskSectionV2,
        TaskGroupEventCounts,
    };
    use rocketmq_runtime::{
        RuntimeBlockingKindV1, RuntimeBlockingLaneV1, RuntimeComponent, RuntimeDiagnostics,
        RuntimeDiagnosticsInputs, RuntimeDiagnosticsScope, RuntimeDiagnosticsSnapshot,
        RuntimeDiagnosticsViewOptions, RuntimeDiagnosticsViewOptionsV2, RuntimeDiagnosticsViewV1,
        RuntimeDiagnosticsViewV2, RuntimeLifecycleStateV1, RuntimeTaskDetailV2, RuntimeTaskDetails,
        RuntimeTaskKindV1,
    };

    let owner = RuntimeOwner::new().expect("runtime builds");
    let root = owner.root_context();
    let diagnostics: &RuntimeDiagnostics = owner.diagnostics();
    let id: &str = diagnostics.runtime_id();
    assert!(id.starts_with("rocketmq-runtime-"));
    let snapshot: RuntimeDiagnosticsSnapshot = root.diagnostics_snapshot();
    let events: TaskGroupEventCounts = snapshot.events;
    let _ = (
        events.poisoned_groups,
        snapshot.registry_slots,
        snapshot.active_tasks,
    );
    let v1: RuntimeDiagnosticsViewV1 = root.diagnostics_view_v1(RuntimeComponent::Broker);
    assert_eq!(v1.schema_version, RuntimeDiagnosticsViewV1::SCHEMA_VERSION);
    let child = root.component("child");
    let _: &RuntimeDiagnostics = child.diagnostics();
    let options = RuntimeDiagnosticsViewOptionsV2 {
        max_detail_entries: 4,
        detail_scan_budget: 16,
        ..RuntimeDiagnosticsViewOptionsV2::default()
    };
    let v2: RuntimeDiagnosticsViewV2 = child.diagnostics_view_v2_with_options(
        RuntimeComponent::NameServer,
        RuntimeDiagnosticsInputs::default(),
        options,
    );
    let tasks: &RuntimeTaskSectionV2 = &v2.tasks;
    let blocking: &RuntimeBlockingSectionV2 = &v2.blocking;
    let schedule: Option<&RuntimeScheduleSectionV2> = v2.schedule.as_ref();
    let metadata: Option<&RuntimeMetadataSectionV2> = v2.metadata.as_ref();
    let shutdown: Option<&RuntimeShutdownSectionV2> = v2.shutdown.as_ref();
    assert_eq!(tasks.scope, RuntimeDiagnosticsScope::Subtree);
    assert_eq!(blocking.scope, RuntimeDiagnosticsScope::ProcessShared);
    assert!(schedule.is_none() && metadata.is_none() && shutdown.is_none());
    assert_eq!(v2.lifecycle_state, RuntimeLifecycleStateV1::Open);
    let _: RuntimeDiagnosticsViewV2 =
        child.diagnostics_view_v2(RuntimeComponent::Proxy, RuntimeDiagnosticsInputs::default());
    let details: RuntimeTaskDetails = child.task_group().diagnostics_task_details(8, 8);
    let listed: &Vec<RuntimeTaskDetailV2> = &details.details;
    let _: (usize, usize, bool) = (
        details.tasks_scanned,
        details.group_entries_scanned,
        details.truncated,
    );
    assert!(listed.is_empty());
    let lanes: Vec<BlockingExecutorSnapshot> = vec![child.storage_io().snapshot()];
    let raw: RuntimeDiagnosticsSnapshot = diagnostics.snapshot(child.task_group(), lanes.clone());
    assert_eq!(raw.blocking_lanes.len(), 1);
    let view = diagnostics.view_v1_with_options(
        RuntimeComponent::Other,
        child.task_group(),
        lanes,
        RuntimeDiagnosticsViewOptions {
            long_running_threshold: Duration::from_secs(5),
            max_task_kind_summaries: 7,
            max_blocking_lane_summaries: 3,
        },
    );
    assert_eq!(
        view.blocking_lanes[0].lane,
        RuntimeBlockingLaneV1::StorageIo
    );
    assert_eq!(
        view.blocking_lanes[0].task_kinds[0].kind,
        RuntimeBlockingKindV1::ShortIo
    );
    assert_eq!(view.task_kinds[0].kind, RuntimeTaskKindV1::Service);
    let _: RuntimeDiagnosticsViewV2 = diagnostics.view_v2(
        RuntimeComponent::Controller,
        child.task_group(),
        Vec::new(),
        RuntimeDiagnosticsInputs::default(),
    );
    for component in [
        RuntimeComponent::Mcp,
        RuntimeComponent::SreControlPlane,
        RuntimeComponent::SreConnector,
    ] {
        let _ = root.diagnostics_view_v1(component);
    }
    owner.block_on(async {
        let harness = RuntimeContext::try_from_current("harness").expect("inside Tokio");
        let _: &RuntimeDiagnostics = harness.diagnostics();
        let _: RuntimeDiagnosticsSnapshot = harness.diagnostics_snapshot();
        let _ = harness.shutdown_tasks(Duration::from_secs(1)).await;
    });
    let _ = owner.shutdown_runtime_blocking().expect("shuts down");
}

/// The metadata surface (`src/metadata_io.rs`, its target registry, and the
/// owner's `RuntimeResources`): a store that commits, observes, reads its
/// confirmed generation and retires its target, written with the public
/// types.
#[test]
fn metadata_signatures_of_the_spec() {
    use std::num::NonZeroUsize;

    use rocketmq_runtime::{
        MetadataDeadline, MetadataGeneration, MetadataIoActor, MetadataIoActorLimitsProfile,
        MetadataIoBlockingLaneProfile, MetadataIoCommitAdmissionOutcome,
        MetadataIoCommitObservation, MetadataIoCommitOutcome, MetadataIoConfig,
        MetadataIoEffectiveProfile, MetadataIoLegacyBlockingField, MetadataIoObserver,
        MetadataIoReceipt, MetadataIoSnapshot, MetadataLimitSource, MetadataTargetIdentity,
        MetadataTargetRegistryStats, MetadataTargetRetirementOutcome, MetadataWriteRequest,
        RuntimeConfig, RuntimeOwner, RuntimeResult,
    };

    let dir = tempfile::tempdir().expect("tempdir");
    let owner = RuntimeOwner::plan(RuntimeConfig::for_parallelism("metadata-spec", 2))
        .expect("valid")
        .with_metadata_target_capacity(NonZeroUsize::new(8).expect("positive"))
        .build()
        .expect("runtime");
    let actor: MetadataIoActor = MetadataIoConfig::default()
        .into_plan()
        .expect("valid")
        .start(&owner.root_context().component("store"))
        .expect("started");
    let deadline = MetadataDeadline::after(Duration::from_secs(30));
    let target = dir.path().join("topics.json");

    let request = MetadataWriteRequest::new("topics", 1, &target, b"{}".to_vec())
        .with_lane_deadline(deadline);
    let _: Option<MetadataDeadline> = request.lane_deadline();
    let committed: RuntimeResult<MetadataIoCommitAdmissionOutcome> =
        owner.block_on(actor.submit_commit(request, deadline));
    assert!(matches!(
        committed,
        Ok(MetadataIoCommitAdmissionOutcome::Completed(
            MetadataIoCommitOutcome::Durable(_)
        ))
    ));
    let observed: MetadataIoCommitObservation = owner
        .block_on(actor.submit_next_observed("topics", &target, b"{\"a\":1}".to_vec(), deadline))
        .expect("admitted");
    assert!(!observed.requires_reconciliation());
    assert!(matches!(
        observed.settled(),
        Some(MetadataIoCommitOutcome::Durable(_))
    ));
    let generation: MetadataGeneration = observed.generation();
    assert_eq!(observed.unobserved_generation(), None);
    let _: RuntimeResult<MetadataIoCommitAdmissionOutcome> = owner
        .block_on(actor.submit_next_commit("topics", &target, b"{\"a\":2}".to_vec(), deadline));
    let receipt: MetadataIoReceipt = match actor
        .submit_next("topics", &target, b"{\"a\":3}".to_vec(), deadline)
        .expect("admitted")
    {
        rocketmq_runtime::MetadataIoAdmissionOutcome::Accepted(receipt) => receipt,
        other => panic!("{other:?}"),
    };
    let identity: MetadataTargetIdentity = receipt.target_identity();
    assert_eq!(actor.target_identity("topics"), Some(identity));
    let last: MetadataIoCommitObservation = owner.block_on(receipt.observe_until(deadline));
    assert!(last.generation() > generation);
    assert_eq!(
        actor.confirmed_durable_generation("topics"),
        Some(last.generation())
    );
    let _: RuntimeResult<MetadataIoCommitObservation> = owner.block_on(actor.submit_observed(
        MetadataWriteRequest::new(
            "topics",
            last.generation().get() + 1,
            &target,
            b"{}".to_vec(),
        ),
        deadline,
    ));

    let observer: MetadataIoObserver = actor.observer();
    let _: Option<MetadataIoSnapshot> = observer.snapshot();
    let profile: MetadataIoEffectiveProfile = actor.effective_profile();
    let lane: &MetadataIoBlockingLaneProfile = &profile.blocking_lane;
    let limits: &MetadataIoActorLimitsProfile = &profile.actor_limits;
    let legacy: &[MetadataIoLegacyBlockingField; 3] = &profile.legacy_blocking_fields;
    assert_eq!(limits.max_waiters, 4 * limits.max_pending_operations);
    assert!(limits.max_concurrent_writes <= lane.max_concurrency);
    assert!(legacy
        .iter()
        .all(|field| field.effective_source == MetadataLimitSource::BlockingLanePolicy));

    let stats: MetadataTargetRegistryStats = owner.resources().metadata_target_stats();
    assert_eq!((stats.capacity, stats.retained_targets), (8, 1));
    let open: RuntimeResult<MetadataTargetRetirementOutcome> =
        actor.retire_target_for_new_identity("topics");
    assert_eq!(
        open.ok(),
        Some(MetadataTargetRetirementOutcome::AdmissionOpen)
    );
    let stopped = owner.block_on(actor.shutdown_until(deadline));
    assert!(!stopped.timed_out);
    assert_eq!(
        actor.retire_target_for_new_identity("topics").ok(),
        Some(MetadataTargetRetirementOutcome::Retired)
    );
    assert_eq!(
        owner.resources().metadata_target_stats().retained_targets,
        0
    );
    let _ = owner.shutdown_runtime_blocking().expect("shuts down");
}

/// The drain lease (`src/blocking/lease.rs`):
/// `try_drain_lease(ShutdownDeadline, NonZeroUsize)` and the lease's
/// `spawn_io`, `spawn_io_until` and `remaining_operations`.
#[test]
fn drain_lease_signatures_of_the_spec() {
    use std::num::NonZeroUsize;

    use rocketmq_runtime::{
        BlockingDrainLease, BlockingExecutor, RuntimeOwner, RuntimeResult, ShutdownDeadline,
    };

    let owner = RuntimeOwner::new().expect("runtime builds");
    let store = owner.root_context().component("store");
    let lane: &BlockingExecutor = store.storage_io();
    let deadline = ShutdownDeadline::after(Duration::from_secs(30));
    let lease: RuntimeResult<BlockingDrainLease> =
        lane.try_drain_lease(deadline, NonZeroUsize::new(2).expect("positive"));
    let lease = lease.expect("open");
    let _ = owner.block_on(store.task_group().shutdown_until(deadline));
    let flushed: RuntimeResult<usize> = owner.block_on(lease.spawn_io("flush", || 1));
    let synced: RuntimeResult<()> = owner.block_on(lease.spawn_io_until("sync", deadline, || ()));
    assert_eq!(flushed.expect("ran"), 1);
    synced.expect("ran");
    let remaining: usize = lease.remaining_operations();
    assert_eq!(remaining, 0);
    let _ = owner.shutdown_runtime_blocking().expect("shuts down");
}

/// The `common` helpers at their public paths
/// (`rocketmq_runtime::common::{file_utils, time_utils, parse_config_file}`).
#[cfg(all(feature = "config-file", feature = "time-utils"))]
#[test]
fn common_helper_paths_of_the_spec() {
    use rocketmq_runtime::common::{file_utils, parse_config_file, time_utils};
    use rocketmq_runtime::RuntimeResult;

    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("topics.json");
    let written: RuntimeResult<()> = file_utils::string_to_file("{\"topics\": 2}", &path);
    written.expect("written");
    let read: RuntimeResult<String> = file_utils::file_to_string(&path);
    assert_eq!(read.expect("read"), "{\"topics\": 2}");
    let parsed: RuntimeResult<serde_json::Value> =
        parse_config_file::parse_config_file(path.clone());
    assert_eq!(parsed.expect("JSON")["topics"], 2);
    let (millis, nanos, secs): (u64, u64, u64) = (
        time_utils::current_millis(),
        time_utils::current_nano(),
        time_utils::current_secs(),
    );
    assert!(millis > 0 && nanos > 0 && secs > 0);
    let _: u64 = time_utils::compute_next_minutes_time_millis();
    let _: u64 = time_utils::compute_next_morning_time_millis();
    let _: String = time_utils::time_millis_to_human_string(0);
    let _: bool = time_utils::is_it_time_to_do("04;16");
    let _: Option<std::time::SystemTime> =
        time_utils::parse_date("20261202083005", time_utils::YYYYMMDDHHMMSS);
    let _: Option<i64> =
        time_utils::parse_date_to_millis("20261202083005", time_utils::YYYYMMDDHHMMSS);
}

/// `MetadataIoCommitObservation::settled()` hands the outcome back by value
/// (a caller keeps it past the observation), and `MetadataDurability` says
/// what admission knew of a generation.
#[test]
fn metadata_observation_settles_by_value_and_durability_is_named() {
    use rocketmq_runtime::{
        MetadataDeadline, MetadataDurability, MetadataIoAdmissionOutcome, MetadataIoCommitOutcome,
        MetadataIoConfig, MetadataWriteRequest, RuntimeConfig, RuntimeOwner,
    };

    let dir = tempfile::tempdir().expect("tempdir");
    let owner = RuntimeOwner::plan(RuntimeConfig::for_parallelism("durability-spec", 2))
        .expect("valid")
        .build()
        .expect("runtime");
    let actor = MetadataIoConfig::default()
        .into_plan()
        .expect("valid")
        .start(&owner.root_context().component("store"))
        .expect("started");
    let deadline = MetadataDeadline::after(Duration::from_secs(30));
    let target = dir.path().join("topics.json");
    let submit = |generation: u64| match actor
        .submit(
            MetadataWriteRequest::new("topics", generation, &target, b"{}".to_vec()),
            deadline,
        )
        .expect("admitted")
    {
        MetadataIoAdmissionOutcome::Accepted(receipt) => receipt,
        other => panic!("{other:?}"),
    };
    let first = submit(2);
    assert_eq!(first.durability(), MetadataDurability::Accepted);
    let observation = owner.block_on(first.observe_until(deadline));
    let outcome: Option<MetadataIoCommitOutcome> = observation.settled();
    drop(observation);
    assert!(matches!(outcome, Some(MetadataIoCommitOutcome::Durable(g)) if g.get() == 2));
    let covered = submit(1);
    assert_eq!(
        covered.durability(),
        MetadataDurability::Durable(2.into()),
        "an older generation is covered by the durable one at admission"
    );
    let report = owner.shutdown_runtime_blocking().expect("shuts down");
    assert!(report.is_healthy(), "{}", report.to_json());
}

/// A foreign permit's item and permit are public fields
/// (`src/resource_budget/queue.rs`).
#[test]
fn a_foreign_permit_exposes_its_item_and_permit_as_fields() {
    use rocketmq_runtime::{BudgetedQueue, ForeignPermit};

    let limit = || BudgetLimit::new(4, 1_024, FullPolicy::Reject);
    let ours = ResourceBudgetTree::new("process", limit()).expect("valid");
    let theirs = ResourceBudgetTree::new("other", limit()).expect("valid");
    let queue = BudgetedQueue::new(ours.root());
    let permit = theirs.root().try_acquire_data(10).expect("fits");
    let Err(ForeignPermit { item, permit }) = queue.try_push_budgeted("request", permit) else {
        panic!("a permit of another tree is handed back");
    };
    assert_eq!(item, "request");
    assert_eq!(permit.bytes(), 10);
    assert_eq!(
        theirs.root().snapshot().current_count,
        1,
        "still charged where it was"
    );
}

/// The blocking-thread bounds are module-level constants of `src/config.rs`
/// (as well as associated ones), and `RuntimeContractViolation` is
/// exhaustive: this `match` names every variant without a wildcard arm.
#[test]
fn blocking_bounds_are_constants_and_violations_are_exhaustive() {
    use rocketmq_runtime::{
        RuntimeConfig, RuntimeContractViolation, MAX_ENTRYPOINT_BLOCKING_THREADS,
        MIN_ENTRYPOINT_BLOCKING_THREADS,
    };

    assert_eq!(
        (
            MIN_ENTRYPOINT_BLOCKING_THREADS,
            MAX_ENTRYPOINT_BLOCKING_THREADS
        ),
        (3, 512)
    );
    assert_eq!(
        RuntimeConfig::MAX_ENTRYPOINT_BLOCKING_THREADS,
        MAX_ENTRYPOINT_BLOCKING_THREADS
    );
    let violation = RuntimeConfig::for_parallelism("bounds", 1)
        .with_max_blocking_threads(MAX_ENTRYPOINT_BLOCKING_THREADS + 1)
        .expect_err("above the bound");
    let named = match violation {
        RuntimeContractViolation::InvalidConfiguration { .. } => "configuration",
        RuntimeContractViolation::InvalidMemoryLimit { .. } => "memory",
        RuntimeContractViolation::InvalidSchedule { .. } => "schedule",
        RuntimeContractViolation::InvalidMetadataConfiguration { .. } => "metadata",
        RuntimeContractViolation::EmptyBudgetName
        | RuntimeContractViolation::InvalidBudgetName
        | RuntimeContractViolation::ZeroBudgetCapacity { .. }
        | RuntimeContractViolation::ZeroBudgetRate
        | RuntimeContractViolation::ZeroBudgetMaxAge
        | RuntimeContractViolation::ReserveExceedsBudgetCapacity { .. }
        | RuntimeContractViolation::ReserveWithoutBudgetCapacity { .. }
        | RuntimeContractViolation::ChildBudgetExceedsParent { .. }
        | RuntimeContractViolation::ChildBudgetMaxAgeExceedsParent
        | RuntimeContractViolation::PermitTargetInDifferentTree => "budget",
    };
    assert_eq!(named, "configuration");
}
