//! Critical tasks and failure recovery (`src/critical.rs`).

mod support;

use std::time::Duration;

use rocketmq_runtime::{
    CriticalFailureKind, CriticalFailureRecovery, CriticalFailureState, DependencyReadiness,
    ServiceLifecycle, ServiceLifecycleConfig, ServiceLifecycleState, ShutdownReason, TaskKind,
};
use support::{guard, harness};

#[tokio::test(start_paused = true)]
async fn a_panicking_critical_service_under_each_recovery() {
    for recovery in [
        CriticalFailureRecovery::RevokeReadiness,
        CriticalFailureRecovery::FailService,
        CriticalFailureRecovery::FailAndRequestShutdown,
    ] {
        let harness = harness("critical");
        let component = harness.service_context("broker");
        let lifecycle = ServiceLifecycle::new(ServiceLifecycleConfig::new("broker"));
        lifecycle.mark_ready().expect("ready");
        let failures = CriticalFailureState::new();
        let monitors = harness.service_context("monitors");
        lifecycle
            .spawn_critical_failure_monitor(&monitors.task_spawner(), &failures, recovery)
            .expect("monitor");
        // Through the context itself (its spawn methods delegate to its
        // group).
        component
            .spawn_critical_service("replicator", failures.clone(), async {
                panic!("replication broke")
            })
            .expect("spawned");
        guard("handled", async {
            while lifecycle.dependency_readiness() == DependencyReadiness::Ready {
                tokio::task::yield_now().await;
            }
        })
        .await;
        assert!(!lifecycle.is_ready(), "{recovery:?}: readiness revoked");
        assert_eq!(failures.occurrences(), 1);
        assert_eq!(failures.pending(), None, "handled exactly once");
        let (state, shutdown) = (lifecycle.state(), lifecycle.shutdown_request());
        match recovery {
            CriticalFailureRecovery::RevokeReadiness => {
                assert_eq!((state, shutdown), (ServiceLifecycleState::Ready, None));
            }
            CriticalFailureRecovery::FailService => {
                assert_eq!((state, shutdown), (ServiceLifecycleState::Failed, None));
            }
            CriticalFailureRecovery::FailAndRequestShutdown => {
                assert_eq!(state, ServiceLifecycleState::Failed);
                assert_eq!(
                    shutdown.map(|request| request.reason),
                    Some(ShutdownReason::Internal)
                );
            }
        }
        let _ = harness.shutdown_tasks(Duration::from_secs(1)).await;
    }
}

/// A lifecycle started under a fresh harness tree, after `early_request`.
async fn started_lifecycle(
    name: &'static str,
    early_request: Option<ShutdownReason>,
) -> (rocketmq_runtime::RuntimeContext, ServiceLifecycle) {
    let tree = harness(name);
    let lifecycle = ServiceLifecycle::new(ServiceLifecycleConfig::new("broker"));
    if let Some(reason) = early_request {
        lifecycle.request_shutdown(reason);
    }
    lifecycle
        .start(&tree.service_context("lifecycle"))
        .await
        .expect("started");
    (tree, lifecycle)
}

/// The first request's reason reaches the tree owner's report once the
/// lifecycle was started under that tree: `critical_failure` for a critical
/// failure, the request's label otherwise (also when it came before
/// `start`), nothing without a request; child reports carry none.
#[tokio::test(start_paused = true)]
async fn the_shutdown_reason_reaches_the_owner_report() {
    let root_reason = |report: &rocketmq_runtime::ShutdownReport| {
        assert!(
            report.children.iter().all(|child| child.reason.is_none()),
            "only the tree owner's report carries the reason"
        );
        report.reason.clone()
    };

    // A critical failure under FailAndRequestShutdown.
    let (tree, lifecycle) = started_lifecycle("critical-reason", None).await;
    lifecycle.mark_ready().expect("ready");
    let failures = CriticalFailureState::new();
    lifecycle
        .spawn_critical_failure_monitor(
            &tree.service_context("monitors").task_spawner(),
            &failures,
            CriticalFailureRecovery::FailAndRequestShutdown,
        )
        .expect("monitor");
    tree.service_context("broker")
        .task_group()
        .spawn_critical_service("replicator", failures.clone(), async {
            panic!("replication broke")
        })
        .expect("spawned");
    let request = guard("requested", lifecycle.wait_for_shutdown()).await;
    assert_eq!(request.reason, ShutdownReason::Internal);
    // A later request changes nothing.
    lifecycle.request_shutdown(ShutdownReason::Signal);
    let report = tree.shutdown_tasks(Duration::from_secs(1)).await;
    assert_eq!(root_reason(&report).as_deref(), Some("critical_failure"));
    // A component requested after the shutdown is a detached closed group:
    // it has no parent but is not the tree owner, so no reason.
    let late = tree.service_context("late");
    assert_eq!(late.task_group().shutdown_now().reason, None);

    // A drain request made before `start` is recorded when it starts.
    let (tree, _lifecycle) =
        started_lifecycle("pre-stop-reason", Some(ShutdownReason::PreStop)).await;
    let report = tree.shutdown_tasks(Duration::from_secs(1)).await;
    assert_eq!(root_reason(&report).as_deref(), Some("pre_stop"));

    // No request: no reason.
    let (tree, _lifecycle) = started_lifecycle("no-reason", None).await;
    let report = tree.shutdown_tasks(Duration::from_secs(1)).await;
    assert_eq!(root_reason(&report), None);
    assert!(!report.to_json().contains("\"reason\""));
}

/// With the notification channel full, the failure is still handled
/// exactly once; later failures count but never replace the pending one.
#[tokio::test(start_paused = true)]
async fn a_full_notification_channel_loses_nothing() {
    let failures = CriticalFailureState::new();
    let mut subscription = failures.subscribe(1).expect("capacity");
    assert!(failures.subscribe(0).is_err());
    let first = failures.record(CriticalFailureKind::Panicked, TaskKind::Service);
    failures.record(CriticalFailureKind::Unrecoverable, TaskKind::Worker);
    failures.record(CriticalFailureKind::ExitedUnexpectedly, TaskKind::Service);
    assert_eq!(subscription.try_recv(), Some(first));
    assert_eq!(
        subscription.try_recv(),
        None,
        "the full channel dropped notifications"
    );
    assert_eq!(failures.occurrences(), 3);
    assert_eq!(failures.pending(), Some(first), "the first stays pending");
    assert_eq!(failures.wait().await, first);
    assert_eq!(failures.handle(), Some(first));
    assert_eq!(failures.handle(), None, "exactly once");
}

#[tokio::test(start_paused = true)]
async fn a_critical_service_is_expected_to_exit_only_after_cancellation() {
    let harness = harness("critical");
    let context = harness.service_context("broker");
    let group = context.task_group().clone();
    let failures = CriticalFailureState::new();
    group
        .spawn_critical_service("early-exit", failures.clone(), async {})
        .expect("spawned");
    let token = group.cancellation_token();
    group
        .spawn_critical_service("orderly", failures.clone(), async move {
            token.cancelled().await
        })
        .expect("spawned");
    // A library holding only a spawner can spawn critical work too.
    context
        .task_spawner()
        .spawn_critical("worker", TaskKind::Worker, failures.clone(), async {})
        .expect("spawned");
    guard("early exit recorded", failures.wait()).await;
    assert_eq!(
        failures.pending().map(|f| f.kind()),
        Some(CriticalFailureKind::ExitedUnexpectedly)
    );
    group.cancel();
    let report = harness.shutdown_tasks(Duration::from_secs(1)).await;
    assert_eq!(
        failures.occurrences(),
        1,
        "a normal worker return and an exit after cancellation record nothing"
    );
    // The report counts the early exit as `failed` (and is unhealthy), the
    // orderly exit as `cancelled`, the worker as `completed`.
    let broker = &report.children[0];
    assert_eq!(
        (broker.failed, broker.cancelled, broker.completed),
        (1, 1, 1),
        "{}",
        report.to_json()
    );
    assert!(!report.is_healthy());
}

/// A monitor whose scope is cancelled before its first poll stops without
/// taking anything (the cancellation wins), and the pending failure stays
/// pending for the next handler (`src/critical.rs`, invariant 1).
#[tokio::test(start_paused = true)]
async fn a_monitor_cancelled_before_its_first_poll_leaves_the_failure_pending() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    let harness = harness("monitor-cancelled");
    let monitors = harness.service_context("monitors");
    let failures = CriticalFailureState::new();
    let failure = failures.record(CriticalFailureKind::Panicked, TaskKind::Service);
    let handled = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&handled);
    failures
        .spawn_monitor(&monitors.task_spawner(), "monitor", move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
        })
        .expect("spawned");
    // Cancelled before the monitor's task is first polled.
    monitors.task_group().cancel();
    let report = guard("shutdown", harness.shutdown_tasks(Duration::from_secs(1))).await;
    assert!(report.is_healthy(), "{}", report.to_json());
    assert_eq!(handled.load(Ordering::SeqCst), 0, "the cancellation won");
    assert_eq!(failures.pending(), Some(failure), "still pending");
    assert_eq!(failures.handle(), Some(failure));
}

/// Competing monitors handle each record exactly once (`src/critical.rs`,
/// invariant 1): three monitors, three failures recorded one after another
/// (each once the previous one was handled): three handler calls in all.
#[tokio::test(start_paused = true)]
async fn competing_monitors_handle_each_record_exactly_once() {
    use std::sync::Arc;

    let harness = harness("competing-monitors");
    let monitors = harness.service_context("monitors");
    let failures = CriticalFailureState::new();
    let handled = Arc::new(std::sync::Mutex::new(Vec::new()));
    for index in 0..3 {
        let handled = Arc::clone(&handled);
        failures
            .spawn_monitor(&monitors.task_spawner(), "monitor", move |failure| {
                handled.lock().expect("unpoisoned").push((index, failure));
            })
            .expect("spawned");
    }
    tokio::task::yield_now().await;
    let mut recorded = Vec::new();
    for round in 1..=3 {
        recorded.push(failures.record(CriticalFailureKind::Panicked, TaskKind::Service));
        guard("handled", async {
            while handled.lock().expect("unpoisoned").len() < round {
                tokio::task::yield_now().await;
            }
        })
        .await;
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            handled.lock().expect("unpoisoned").len(),
            round,
            "exactly once"
        );
        assert_eq!(failures.pending(), None);
    }
    let taken: Vec<_> = handled
        .lock()
        .expect("unpoisoned")
        .iter()
        .map(|(_, failure)| *failure)
        .collect();
    assert_eq!(taken, recorded);
    monitors.task_group().cancel();
    let report = guard("shutdown", harness.shutdown_tasks(Duration::from_secs(1))).await;
    assert!(report.is_healthy(), "{}", report.to_json());
}
