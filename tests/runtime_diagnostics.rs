//! Diagnostics: sanitized views (V1, V2), their scopes and bounds, and the
//! bounded task detail list.

mod support;

use std::collections::BTreeSet;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use rocketmq_runtime::{
    BlockingExecutorSnapshot, BlockingLane, ChildServiceContext, MetadataDeadline,
    MetadataIoConfig, MetadataIoSnapshot, MetadataWriteRequest, RuntimeComponent, RuntimeConfig,
    RuntimeDiagnosticsInputs, RuntimeDiagnosticsScope, RuntimeDiagnosticsViewOptions,
    RuntimeDiagnosticsViewOptionsV2, RuntimeDiagnosticsViewV1, RuntimeDiagnosticsViewV2,
    RuntimeOwner, ScheduledExecutionPolicy, ScheduledTaskConfig, ShutdownReport, TaskGroup,
    TaskKind,
};
use serde_json::Value;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// Distinctive strings planted in names, arguments and configuration: no
/// view may contain any of them.
const RUNTIME_NAME: &str = "zz-runtime-name-7f3a";
const GROUP_NAME: &str = "zz-group-name-41c2";
const NESTED_GROUP_NAME: &str = "zz-nested-group-9b0d";
const TASK_NAME: &str = "zz-task-name-c5e8";
const ARGUMENT: &str = "zz-argument-d17f";
const LANE_NAME: &str = "zz-lane-config-6a2b";
const SCHEDULE_NAME: &str = "zz-schedule-name-0e94";
const RESOURCE_NAME: &str = "zz-metadata-resource-83f1";
const TARGET_FILE: &str = "zz-target-file-2c6d.json";
const REPORT_NAME: &str = "zz-report-name-5d70";

/// An owner whose lanes have distinct concurrency bounds (storage 1,
/// metadata 2, cpu 3) and planted names.
fn owner() -> RuntimeOwner {
    let mut config = RuntimeConfig::for_parallelism(RUNTIME_NAME, 2);
    config.max_blocking_threads = 16;
    let lanes = &mut config.blocking_lane_policies;
    for (policy, concurrency) in [
        (&mut lanes.storage_io, 1),
        (&mut lanes.metadata_io, 2),
        (&mut lanes.cpu_crypto, 3),
    ] {
        policy.name = format!("{LANE_NAME}-{concurrency}");
        policy.max_concurrency = concurrency;
    }
    RuntimeOwner::plan(config)
        .expect("valid configuration")
        .build()
        .expect("runtime builds")
}

/// Every object key of a JSON value, recursively.
fn keys(value: &Value, into: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                into.insert(key.clone());
                keys(inner, into);
            }
        }
        Value::Array(items) => items.iter().for_each(|item| keys(item, into)),
        _ => {}
    }
}

/// Asserts that `json` holds none of the planted strings, not `runtime_id`,
/// and no key that names an id, a name or a path.
/// The names, arguments and paths the tests plant, none of which a view
/// may show.
const PLANTED: [&str; 10] = [
    RUNTIME_NAME,
    GROUP_NAME,
    NESTED_GROUP_NAME,
    TASK_NAME,
    ARGUMENT,
    LANE_NAME,
    SCHEDULE_NAME,
    RESOURCE_NAME,
    TARGET_FILE,
    REPORT_NAME,
];

fn assert_sanitized(json: &str, runtime_id: &str) {
    for planted in PLANTED.into_iter().chain([runtime_id]) {
        assert!(!json.contains(planted), "{planted} leaked into {json}");
    }
    let mut found = BTreeSet::new();
    keys(&serde_json::from_str(json).expect("valid JSON"), &mut found);
    for key in &found {
        assert!(
            !(key.contains("id") || key.contains("name") || key.contains("path")),
            "key {key} in {json}"
        );
    }
}

/// A task that holds `argument` until `release` is cancelled.
async fn holding(argument: String, release: CancellationToken) {
    release.cancelled().await;
    drop(argument);
}

fn lanes_of(context: &ChildServiceContext) -> Vec<BlockingExecutorSnapshot> {
    BlockingLane::ALL
        .iter()
        .map(|lane| context.blocking(*lane).snapshot())
        .collect()
}

fn request(generation: u64, dir: &std::path::Path) -> MetadataWriteRequest {
    MetadataWriteRequest::new(
        RESOURCE_NAME,
        generation,
        dir.join(TARGET_FILE),
        format!("{{\"argument\":\"{ARGUMENT}\"}}").into_bytes(),
    )
}

/// Schedules, a metadata snapshot and a shutdown report with planted names.
fn inputs(
    owner: &RuntimeOwner,
    context: &ChildServiceContext,
    dir: &std::path::Path,
) -> RuntimeDiagnosticsInputs {
    let schedules = context.scheduled_tasks("maintenance");
    let argument = ARGUMENT.to_string();
    let _ = schedules
        .schedule(
            ScheduledTaskConfig::fixed_delay(SCHEDULE_NAME, Duration::from_secs(3_600))
                .with_initial_delay(Duration::from_secs(3_600)),
            ScheduledExecutionPolicy::default(),
            move || {
                let argument = argument.clone();
                async move { drop(argument) }
            },
        )
        .expect("registered");
    let actor = MetadataIoConfig::default()
        .into_plan()
        .expect("valid")
        .with_max_concurrent_writes(NonZeroUsize::MIN)
        .start(context)
        .expect("started");
    let deadline = MetadataDeadline::after(Duration::from_secs(30));
    let receipt = match actor.submit(request(1, dir), deadline).expect("admitted") {
        rocketmq_runtime::MetadataIoAdmissionOutcome::Accepted(receipt) => receipt,
        other => panic!("{other:?}"),
    };
    owner
        .block_on(receipt.wait_until(deadline))
        .expect("durable");
    let mut report = ShutdownReport::new(REPORT_NAME, Duration::from_millis(12));
    report.cancelled = 3;
    report.timed_out = 1;
    RuntimeDiagnosticsInputs {
        schedule: schedules.snapshot(),
        metadata: Some(actor.snapshot()),
        shutdown: Some(report),
    }
}

#[test]
fn views_carry_no_names_ids_arguments_or_configuration() {
    let owner = owner();
    let dir = tempfile::tempdir().expect("temporary directory");
    let context = owner.root_context().component(GROUP_NAME);
    let nested = context.component(NESTED_GROUP_NAME);
    let release = CancellationToken::new();
    owner.block_on(async {
        for group in [context.task_group(), nested.task_group()] {
            for kind in TaskKind::ALL {
                group
                    .spawn(
                        TASK_NAME.to_string(),
                        kind,
                        holding(ARGUMENT.to_string(), release.clone()),
                    )
                    .expect("spawned");
            }
        }
    });
    let inputs = inputs(&owner, &context, dir.path());
    assert!(inputs.metadata.as_ref().is_some_and(|metadata| {
        metadata
            .resources
            .iter()
            .any(|resource| &*resource.resource == RESOURCE_NAME)
    }));
    let runtime_id = owner.diagnostics().runtime_id().to_string();
    assert!(runtime_id.starts_with("rocketmq-runtime-"));

    let v1 = context.diagnostics_view_v1(RuntimeComponent::Broker);
    assert_sanitized(
        &serde_json::to_string(&v1).expect("serializes"),
        &runtime_id,
    );
    let options = RuntimeDiagnosticsViewOptionsV2 {
        max_detail_entries: 64,
        detail_scan_budget: 64,
        ..RuntimeDiagnosticsViewOptionsV2::default()
    };
    let v2 = context.diagnostics_view_v2_with_options(RuntimeComponent::Broker, inputs, options);
    assert!(v2.schedule.is_some() && v2.metadata.is_some() && v2.shutdown.is_some());
    assert!(!v2.details.is_empty());
    assert_sanitized(
        &serde_json::to_string(&v2).expect("serializes"),
        &runtime_id,
    );
    // The one-line summary says the same in words, also without names.
    let summary = v2.summary();
    assert!(
        !summary.contains('\n') && !summary.contains('{'),
        "{summary}"
    );
    for part in [
        "broker open: ",
        &format!("{} tasks", v2.tasks.task_count),
        "blocking ",
        "schedules ",
        "metadata ",
        "oldest tasks: ",
    ] {
        assert!(summary.contains(part), "{part:?} missing from {summary}");
    }
    for planted in PLANTED.into_iter().chain([runtime_id.as_str()]) {
        assert!(
            !summary.contains(planted),
            "{planted} leaked into {summary}"
        );
    }
    // The raw snapshot, by contrast, names the runtime, the group and the lanes.
    let raw = serde_json::to_string(&context.diagnostics_snapshot()).expect("serializes");
    assert!(raw.contains(&runtime_id) && raw.contains(LANE_NAME) && raw.contains(GROUP_NAME));

    release.cancel();
    let _ = owner.shutdown_runtime_blocking().expect("shuts down");
}

fn lane_labels(view: &RuntimeDiagnosticsViewV1) -> Vec<(String, Option<usize>)> {
    let json = serde_json::to_value(view).expect("serializes");
    json["blocking_lanes"]
        .as_array()
        .expect("lanes")
        .iter()
        .map(|lane| {
            (
                lane["lane"].as_str().expect("label").to_string(),
                lane["max_concurrency"].as_u64().map(|bound| bound as usize),
            )
        })
        .collect()
}

#[test]
fn lane_labels_come_from_the_typed_lane_whatever_the_input_order() {
    let owner = owner();
    let context = owner.root_context().component("lanes");
    let group = context.task_group();
    let diagnostics = owner.diagnostics();
    let expected = vec![
        ("storage_io".to_string(), Some(1)),
        ("metadata_io".to_string(), Some(2)),
        ("cpu_crypto".to_string(), Some(3)),
    ];
    let lanes = lanes_of(&context);
    let in_order = diagnostics.view_v1(RuntimeComponent::Other, group, &lanes);
    assert_eq!(lane_labels(&in_order), expected);
    let reversed: Vec<_> = lanes.iter().rev().cloned().collect();
    let view = diagnostics.view_v1(RuntimeComponent::Other, group, reversed);
    assert_eq!(lane_labels(&view), expected, "reversed input");
    let partial = vec![lanes[2].clone(), lanes[0].clone()];
    let view = diagnostics.view_v1(RuntimeComponent::Other, group, partial);
    assert_eq!(
        lane_labels(&view),
        vec![expected[0].clone(), expected[2].clone()]
    );
    let only_cpu = diagnostics.view_v1(RuntimeComponent::Other, group, &lanes[2..]);
    assert_eq!(lane_labels(&only_cpu), vec![expected[2].clone()]);
    assert!(!only_cpu.truncated, "a lane not given is not a cut");
    let cut = diagnostics.view_v1_with_options(
        RuntimeComponent::Other,
        group,
        &lanes,
        RuntimeDiagnosticsViewOptions {
            max_blocking_lane_summaries: 2,
            ..RuntimeDiagnosticsViewOptions::default()
        },
    );
    assert_eq!(lane_labels(&cut), expected[..2].to_vec());
    assert!(cut.truncated);
    drop(owner);
}

#[tokio::test]
async fn each_task_kind_keeps_its_own_count_and_label() {
    let harness = support::harness("kinds");
    let context = harness.service_context("kinds");
    let release = CancellationToken::new();
    for (index, kind) in TaskKind::ALL.into_iter().enumerate() {
        for _ in 0..=index {
            context
                .task_group()
                .spawn("task", kind, holding(String::new(), release.clone()))
                .expect("spawned");
        }
    }
    let view = context.diagnostics_view_v1(RuntimeComponent::Broker);
    let json = serde_json::to_value(&view).expect("serializes");
    let summaries: Vec<(String, u64)> = json["task_kinds"]
        .as_array()
        .expect("kinds")
        .iter()
        .map(|kind| {
            (
                kind["kind"].as_str().expect("label").to_string(),
                kind["active"].as_u64().expect("count"),
            )
        })
        .collect();
    let expected: Vec<(String, u64)> = TaskKind::ALL
        .iter()
        .enumerate()
        .map(|(index, kind)| (kind.as_str().to_string(), index as u64 + 1))
        .collect();
    assert_eq!(summaries, expected);
    assert_eq!(view.task_count, 28);
    assert!(!view.truncated);
    assert_eq!(json["schema_version"], "rocketmq.runtime-diagnostics.v1");
    assert_eq!(json["component"], "broker");
    assert_eq!(json["lifecycle_state"], "open");
    release.cancel();
    let _ = harness.shutdown_tasks(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn observed_at_is_rfc3339_utc_and_now() {
    let harness = support::harness("clock");
    let view = harness
        .service_context("clock")
        .diagnostics_view_v1(RuntimeComponent::NameServer);
    assert!(view.observed_at.ends_with('Z'), "{}", view.observed_at);
    let observed = humantime::parse_rfc3339(&view.observed_at).expect("RFC 3339");
    let now = SystemTime::now();
    let skew = now
        .duration_since(observed)
        .unwrap_or_else(|early| early.duration());
    assert!(
        skew < Duration::from_secs(1),
        "{} vs {now:?}",
        view.observed_at
    );
    let v2 = harness
        .service_context("clock-v2")
        .diagnostics_view_v2(RuntimeComponent::Proxy, RuntimeDiagnosticsInputs::default());
    humantime::parse_rfc3339(&v2.observed_at).expect("RFC 3339");
}

/// Spawns `count` idle tasks into `group`, each ended by its own sender.
fn idle_tasks(group: &TaskGroup, count: usize) -> Vec<oneshot::Sender<()>> {
    (0..count)
        .map(|_| {
            let (release, wait) = oneshot::channel::<()>();
            group
                .spawn("idle", TaskKind::Worker, async move {
                    let _ = wait.await;
                })
                .expect("spawned");
            release
        })
        .collect()
}

async fn wait_for_tasks(group: &TaskGroup, count: usize) {
    support::guard("tasks settle", async {
        while group.task_count() != count {
            tokio::task::yield_now().await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_detail_request_after_churn_examines_only_its_budget() {
    let harness = support::harness("churn");
    let context = harness.service_context("churn");
    let group = context.task_group().clone();
    let mut releases = idle_tasks(&group, 4_096);
    // All but the 16 newest tasks end: the tables keep their high slots.
    let keep = releases.split_off(4_096 - 16);
    drop(releases);
    wait_for_tasks(&group, 16).await;
    let slots = context.diagnostics_snapshot();
    assert!(
        slots.registry_slots > 1_000,
        "the tables stay sparse: {slots:?}"
    );
    let details = group.diagnostics_task_details(7, 3);
    assert_eq!(details.tasks_scanned, 7);
    assert_eq!(details.details.len(), 3);
    assert_eq!(details.group_entries_scanned, 0);
    assert!(details.truncated);
    assert!(details
        .details
        .iter()
        .all(|detail| detail.scope == RuntimeDiagnosticsScope::Local));
    drop(keep);
    wait_for_tasks(&group, 0).await;

    // A table emptied by churn, then refilled.
    let refill = idle_tasks(&group, 8);
    let details = group.diagnostics_task_details(7, 3);
    assert_eq!((details.tasks_scanned, details.details.len()), (7, 3));
    assert!(details.truncated);
    let everything = group.diagnostics_task_details(8, 8);
    assert_eq!(everything.tasks_scanned, 8);
    assert!(!everything.truncated, "nothing left over");
    drop(refill);
    let _ = harness.shutdown_tasks(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_wide_tree_of_empty_children_is_scanned_up_to_the_budget() {
    let harness = support::harness("wide");
    let root = harness.service_context("wide").task_group().clone();
    let children: Vec<TaskGroup> = (0..4_096)
        .map(|index| root.try_child(format!("child-{index}")).expect("child"))
        .collect();
    let details = root.diagnostics_task_details(7, 3);
    assert_eq!(details.group_entries_scanned, 7);
    assert_eq!(details.tasks_scanned, 0);
    assert!(details.details.is_empty());
    assert!(details.truncated);
    // A dropped group unregisters its link.
    drop(children);
    let after = root.diagnostics_task_details(7, 3);
    assert_eq!(after.group_entries_scanned, 0);
    assert!(!after.truncated);
    let _ = harness.shutdown_tasks(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_512_deep_chain_is_walked_on_a_1_mib_stack() {
    let harness = support::harness("deep");
    let root = harness.service_context("deep").task_group().clone();
    let mut chain = vec![root.clone()];
    for depth in 0..512 {
        let child = chain
            .last()
            .expect("parent")
            .try_child(format!("level-{depth}"))
            .expect("child");
        chain.push(child);
    }
    let release = CancellationToken::new();
    chain
        .last()
        .expect("leaf")
        .spawn(
            "leaf",
            TaskKind::Service,
            holding(String::new(), release.clone()),
        )
        .expect("spawned");
    let walker = root.clone();
    let diagnostics = harness.diagnostics().clone();
    let (details, view) = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(move || {
            let details = walker.diagnostics_task_details(1_024, 8);
            let view = diagnostics.view_v1(RuntimeComponent::Other, &walker, Vec::new());
            (details, view)
        })
        .expect("thread starts")
        .join()
        .expect("no stack overflow");
    assert_eq!(details.group_entries_scanned, 512);
    assert_eq!(details.tasks_scanned, 1);
    assert_eq!(details.details.len(), 1);
    assert_eq!(details.details[0].scope, RuntimeDiagnosticsScope::Subtree);
    assert!(!details.truncated);
    assert_eq!(view.task_group_count, 513);
    assert_eq!(view.task_count, 1);
    release.cancel();
    let _ = harness.shutdown_tasks(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn zero_budgets_on_a_non_empty_tree_are_truncated() {
    let harness = support::harness("zero");
    let context = harness.service_context("zero");
    let group = context.task_group();
    let empty = group.diagnostics_task_details(0, 0);
    assert_eq!((empty.tasks_scanned, empty.group_entries_scanned), (0, 0));
    assert!(!empty.truncated, "an empty tree leaves nothing out");
    let release = CancellationToken::new();
    group
        .spawn(
            "one",
            TaskKind::Worker,
            holding(String::new(), release.clone()),
        )
        .expect("spawned");
    let zero = group.diagnostics_task_details(0, 0);
    assert_eq!((zero.tasks_scanned, zero.details.len()), (0, 0));
    assert!(zero.truncated);
    let no_output = group.diagnostics_task_details(5, 0);
    assert_eq!(no_output.tasks_scanned, 1);
    assert!(no_output.details.is_empty());
    assert!(no_output.truncated, "the output budget cut a task");
    release.cancel();
    let _ = harness.shutdown_tasks(Duration::from_secs(5)).await;
}

fn metadata(resources: usize) -> MetadataIoSnapshot {
    MetadataIoSnapshot {
        accepting: true,
        pending_operations: 2,
        pending_bytes: 64,
        max_pending_operations: 8,
        max_pending_bytes: 1_024,
        resources: (0..resources)
            .map(|index| rocketmq_runtime::MetadataIoResourceSnapshot {
                resource: format!("resource-{index}").into(),
                target: Some(PathBuf::from(format!("/tmp/{index}")).into()),
                durable_generation: None,
                in_flight_generation: None,
                queued_generation: None,
                waiter_count: 1,
            })
            .collect(),
    }
}

#[tokio::test]
async fn v2_sections_carry_their_scope_and_are_absent_without_input() {
    let harness = support::harness("scopes");
    let context = harness.service_context("scopes");
    let nested = context.component("nested");
    let release = CancellationToken::new();
    context
        .task_group()
        .spawn(
            "local",
            TaskKind::Service,
            holding(String::new(), release.clone()),
        )
        .expect("spawned");
    nested
        .task_group()
        .spawn(
            "nested",
            TaskKind::Worker,
            holding(String::new(), release.clone()),
        )
        .expect("spawned");

    let bare = context.diagnostics_view_v2(RuntimeComponent::Broker, Default::default());
    assert_eq!(bare.tasks.scope, RuntimeDiagnosticsScope::Subtree);
    assert_eq!((bare.tasks.task_count, bare.tasks.local_task_count), (2, 1));
    assert_eq!(bare.tasks.task_group_count, 2);
    assert_eq!(bare.blocking.scope, RuntimeDiagnosticsScope::ProcessShared);
    assert_eq!(bare.blocking.lanes.len(), 3);
    assert!(bare.schedule.is_none() && bare.metadata.is_none() && bare.shutdown.is_none());
    assert!(bare.details.is_empty() && bare.details_scanned == 0);
    assert!(!bare.truncated);
    let json = serde_json::to_value(&bare).expect("serializes");
    for absent in ["schedule", "metadata", "shutdown"] {
        assert!(
            json.get(absent).is_none(),
            "{absent} must be absent, not empty"
        );
    }
    assert_eq!(
        json["schema_version"],
        RuntimeDiagnosticsViewV2::SCHEMA_VERSION
    );
    assert_eq!(json["tasks"]["scope"], "subtree");
    assert_eq!(json["blocking"]["scope"], "process_shared");

    // Each input adds its section with its scope.
    let schedules = context.scheduled_tasks("jobs");
    for name in ["a", "b"] {
        let _ = schedules
            .schedule(
                ScheduledTaskConfig::fixed_delay(name, Duration::from_secs(3_600))
                    .with_initial_delay(Duration::from_secs(3_600)),
                ScheduledExecutionPolicy::default(),
                || async {},
            )
            .expect("registered");
    }
    let with_schedule = context.diagnostics_view_v2(
        RuntimeComponent::Broker,
        RuntimeDiagnosticsInputs {
            schedule: schedules.snapshot(),
            ..Default::default()
        },
    );
    let section = with_schedule.schedule.as_ref().expect("present");
    assert_eq!(section.scope, RuntimeDiagnosticsScope::Local);
    assert_eq!((section.tasks_scanned, section.tasks_emitted), (2, 2));
    assert!(!section.truncated && !with_schedule.truncated);
    assert!(with_schedule.metadata.is_none() && with_schedule.shutdown.is_none());

    let with_metadata = context.diagnostics_view_v2(
        RuntimeComponent::Broker,
        RuntimeDiagnosticsInputs {
            metadata: Some(metadata(3)),
            ..Default::default()
        },
    );
    let section = with_metadata.metadata.as_ref().expect("present");
    assert_eq!(section.scope, RuntimeDiagnosticsScope::Local);
    assert_eq!((section.resources_scanned, section.waiters), (3, 3));
    assert_eq!(
        (section.retained_operations, section.retained_bytes),
        (2, 64)
    );
    assert!(with_metadata.schedule.is_none() && with_metadata.shutdown.is_none());

    let mut report = ShutdownReport::new("report", Duration::from_millis(1_500));
    report.leaked = 2;
    let with_shutdown = context.diagnostics_view_v2(
        RuntimeComponent::Broker,
        RuntimeDiagnosticsInputs {
            shutdown: Some(report),
            ..Default::default()
        },
    );
    let section = with_shutdown.shutdown.as_ref().expect("present");
    assert_eq!(section.scope, RuntimeDiagnosticsScope::Subtree);
    assert_eq!((section.elapsed_millis, section.leaked), (1_500, 2));
    assert!(with_shutdown.schedule.is_none() && with_shutdown.metadata.is_none());

    // `truncated` is the OR of the sections'.
    let cut_schedule = context.diagnostics_view_v2_with_options(
        RuntimeComponent::Broker,
        RuntimeDiagnosticsInputs {
            schedule: schedules.snapshot(),
            metadata: Some(metadata(3)),
            ..Default::default()
        },
        RuntimeDiagnosticsViewOptionsV2 {
            max_schedule_tasks: 1,
            ..Default::default()
        },
    );
    let schedule = cut_schedule.schedule.as_ref().expect("present");
    assert!(schedule.truncated && schedule.tasks_scanned == 1);
    assert!(!cut_schedule.tasks.truncated && !cut_schedule.blocking.truncated);
    assert!(!cut_schedule.metadata.as_ref().expect("present").truncated);
    assert!(cut_schedule.truncated);
    let cut_metadata = context.diagnostics_view_v2_with_options(
        RuntimeComponent::Broker,
        RuntimeDiagnosticsInputs {
            metadata: Some(metadata(3)),
            ..Default::default()
        },
        RuntimeDiagnosticsViewOptionsV2 {
            max_metadata_resources: 2,
            ..Default::default()
        },
    );
    let section = cut_metadata.metadata.as_ref().expect("present");
    assert!(section.truncated && section.resources_scanned == 2 && section.waiters == 2);
    assert!(cut_metadata.truncated);
    for (kinds, lanes) in [(3, 3), (7, 1)] {
        let cut = context.diagnostics_view_v2_with_options(
            RuntimeComponent::Broker,
            RuntimeDiagnosticsInputs::default(),
            RuntimeDiagnosticsViewOptionsV2 {
                max_task_kind_summaries: kinds,
                max_blocking_lane_summaries: lanes,
                ..Default::default()
            },
        );
        assert_eq!(cut.tasks.truncated, kinds < 7);
        assert_eq!(cut.blocking.truncated, lanes < 3);
        assert!(cut.truncated);
    }

    // The detail list needs both budgets.
    // Four tasks: two spawned, and the two schedules' drivers.
    for (entries, budget, expected) in [(0, 10, 0), (10, 0, 0), (10, 10, 4), (1, 10, 1)] {
        let view = context.diagnostics_view_v2_with_options(
            RuntimeComponent::Broker,
            RuntimeDiagnosticsInputs::default(),
            RuntimeDiagnosticsViewOptionsV2 {
                max_detail_entries: entries,
                detail_scan_budget: budget,
                ..Default::default()
            },
        );
        assert_eq!(view.details.len(), expected, "({entries}, {budget})");
        assert_eq!(view.detail_scan_budget, budget);
        assert_eq!(view.details_scanned, if expected == 0 { 0 } else { 4 });
        assert!(!view.truncated, "the detail list is not a section");
    }
    release.cancel();
    let _ = harness.shutdown_tasks(Duration::from_secs(5)).await;
}

/// A child context's raw snapshot covers its own subtree: its root is the
/// component (not the owner's root), and its counts are the subtree's.
#[test]
fn a_child_snapshot_is_rooted_at_its_component() {
    let owner = owner();
    let broker = owner.root_context().component("broker");
    let store = broker.component("store");
    let _elsewhere = owner.root_context().component("namesrv");
    let release = CancellationToken::new();
    owner.block_on(async {
        store
            .spawn_service("flush", holding(String::new(), release.clone()))
            .expect("spawned");
    });
    let snapshot = broker.diagnostics_snapshot();
    assert_eq!(snapshot.root_name, "broker");
    assert_eq!(snapshot.group_id, broker.task_group().id());
    assert_eq!(
        (
            snapshot.task_count,
            snapshot.child_count,
            snapshot.active_tasks
        ),
        (0, 1, 1)
    );
    assert_eq!(store.diagnostics_snapshot().root_name, "store");
    assert_eq!(
        owner.root_context().diagnostics_snapshot().root_name,
        RUNTIME_NAME
    );
    release.cancel();
    let report = owner.shutdown_runtime_blocking().expect("shuts down");
    assert!(report.is_healthy(), "{}", report.to_json());
}
