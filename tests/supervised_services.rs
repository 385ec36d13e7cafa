//! Supervised services (`src/supervised.rs`), in paused time: the backoff
//! stays within its jitter bounds, N restarts then a give-up, no restart
//! once shutdown begins, a backoff never holds a shutdown past its
//! deadline, the failed run's reservations are back before the next start,
//! a panic's message reaches the report (and, without a restart policy, the
//! critical-failure record and the group's named failures), a stalled
//! service is named and a critical one fails liveness.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rocketmq_runtime::{
    BudgetLimit, CriticalFailureRecovery, CriticalFailureState, FullPolicy, ResourceBudgetTree,
    RuntimeContext, RuntimeContractPolicy, RuntimeDiagnosticsInputs, RuntimeErrorKind,
    ServiceFailureKind, ServiceLifecycle, ServiceLifecycleConfig, ServiceRestartPolicy,
    ShutdownReport, SupervisedServiceReport, TaskFailureKind,
};
use support::{guard, harness};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// The one service of `report`, by name.
fn service<'a>(report: &'a ShutdownReport, name: &str) -> &'a SupervisedServiceReport {
    report
        .services
        .iter()
        .find(|service| service.name.as_str() == name)
        .unwrap_or_else(|| panic!("no service {name} in {report:#?}"))
}

/// A ready lifecycle whose monitor handles the failures of the returned
/// state by revoking readiness.
fn watched_lifecycle(harness: &RuntimeContext) -> (ServiceLifecycle, CriticalFailureState) {
    let lifecycle = ServiceLifecycle::new(ServiceLifecycleConfig::new("broker"));
    lifecycle.mark_ready().expect("ready");
    let failures = CriticalFailureState::new();
    lifecycle
        .spawn_critical_failure_monitor(
            &harness.service_context("monitors").task_spawner(),
            &failures,
            CriticalFailureRecovery::RevokeReadiness,
        )
        .expect("monitor");
    (lifecycle, failures)
}

/// The backoff before the k-th restart lies in `backoff_bounds(k)`, the
/// delays double up to the maximum, and the jitter moves them.
#[tokio::test(start_paused = true)]
async fn the_backoff_stays_within_its_jitter_bounds() {
    let harness = harness("supervised");
    let component = harness.service_context("broker");
    let policy = ServiceRestartPolicy::new()
        .with_backoff(Duration::from_millis(100), Duration::from_millis(1_000))
        .with_jitter(0.5)
        .with_max_restarts(6, Duration::from_secs(3_600));
    let (started, mut starts) = mpsc::unbounded_channel();
    component
        .spawn_supervised_service("upstream", policy.clone(), move |_run| {
            let started = started.clone();
            async move {
                let _ = started.send(Instant::now());
                Err::<(), _>("connection refused")
            }
        })
        .expect("spawned");
    let mut times = Vec::new();
    for _ in 0..7 {
        times.push(guard("a run", starts.recv()).await.expect("a run"));
    }
    // Doubling from 100 ms, capped at 1 s; half of each may be jittered.
    let bases = [100, 200, 400, 800, 1_000, 1_000].map(Duration::from_millis);
    let mut jittered = false;
    for ((restart, pair), high) in (1_u32..).zip(times.windows(2)).zip(bases) {
        let low = high / 2;
        assert_eq!(policy.backoff_bounds(restart), (low, high));
        let gap = pair[1] - pair[0];
        assert!(
            low <= gap && gap <= high,
            "restart {restart}: {gap:?} not in {low:?}..={high:?}"
        );
        jittered |= gap < high;
    }
    assert!(jittered, "some delay was jittered below its base");
    assert_eq!(
        policy.backoff_bounds(6),
        (Duration::from_millis(500), Duration::from_millis(1_000)),
        "capped at the maximum"
    );
    let report = component
        .task_group()
        .shutdown(Duration::from_secs(5))
        .await;
    let upstream = service(&report, "upstream");
    assert_eq!(
        (upstream.runs, upstream.restarts, upstream.failures),
        (7, 6, 7)
    );
    assert!(
        upstream.gave_up,
        "the seventh failure would be a seventh restart"
    );
    assert_eq!(upstream.last_failure, Some(ServiceFailureKind::Error));
    assert_eq!(upstream.last_message.as_deref(), Some("connection refused"));
    assert!(!report.is_healthy(), "a service that gave up is unhealthy");
    assert!(report.summary().contains("service: upstream (broker): runs 7, restarts 6, last failure error (\"connection refused\"), gave up"), "{}", report.summary());
}

/// A critical service restarts N times, then gives up: its panic message
/// reaches the report and the critical-failure record, and readiness is
/// revoked (today's critical-failure rules).
#[tokio::test(start_paused = true)]
async fn n_restarts_then_a_give_up_that_follows_the_critical_rules() {
    let harness = harness("supervised");
    let component = harness.service_context("broker");
    let (lifecycle, failures) = watched_lifecycle(&harness);
    let mut recorded = failures.subscribe(4).expect("capacity");
    let policy = ServiceRestartPolicy::new()
        .with_max_restarts(2, Duration::from_secs(60))
        .critical(failures.clone());
    component
        .spawn_supervised_service("replicator", policy, |run| async move {
            panic!("replica {} lost\nits lease", run.attempt());
            #[allow(unreachable_code)]
            Ok::<(), String>(())
        })
        .expect("spawned");
    // Waiting lets paused time run through the backoffs.
    let failure = guard("the give-up", recorded.recv())
        .await
        .expect("recorded");
    assert_eq!(
        failures.message(&failure).as_deref(),
        Some("replica 2 lost\\nits lease")
    );
    for _ in 0..1_000 {
        if !lifecycle.is_ready() {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(!lifecycle.is_ready(), "the monitor revoked readiness");
    let report = component
        .task_group()
        .shutdown(Duration::from_secs(5))
        .await;
    let replicator = service(&report, "replicator");
    assert_eq!((replicator.runs, replicator.restarts), (3, 2));
    assert!(replicator.gave_up);
    assert_eq!(replicator.last_failure, Some(ServiceFailureKind::Panic));
    assert_eq!(
        replicator.last_message.as_deref(),
        Some("replica 2 lost\\nits lease"),
        "the last run's message, escaped"
    );
    assert_eq!(report.panicked, 0, "the supervisor caught the panics");
    assert_eq!(
        failures.occurrences(),
        1,
        "one give-up, one critical failure"
    );
    let recorded = harness
        .shutdown_tasks(Duration::from_secs(5))
        .await
        .services
        .len();
    assert_eq!(recorded, 1, "the owner's report lists it too");
}

/// A panic's message also reaches the critical-failure record of a
/// critical service without a restart policy, and the group's named
/// failures of any task.
#[tokio::test(start_paused = true)]
async fn a_panic_message_reaches_the_critical_record_and_the_named_failures() {
    let harness = harness("supervised");
    let component = harness.service_context("broker");
    let failures = CriticalFailureState::new();
    component
        .spawn_critical_service("flusher", failures.clone(), async {
            panic!("disk \"sda\" vanished")
        })
        .expect("spawned");
    let failure = guard("recorded", failures.wait()).await;
    assert_eq!(
        failures.message(&failure).as_deref(),
        Some("disk \\\"sda\\\" vanished")
    );
    let report = component
        .task_group()
        .shutdown(Duration::from_secs(5))
        .await;
    let named = &report.failures[0];
    assert_eq!(named.failure, TaskFailureKind::Panicked);
    assert_eq!(named.message.as_deref(), Some("disk \\\"sda\\\" vanished"));
}

/// No restart once the group's shutdown began: a service waiting in its
/// backoff ends at the cancellation, so the shutdown neither waits for the
/// backoff nor exceeds its deadline; a run that ignores the cancellation is
/// aborted at the deadline like any task.
#[tokio::test(start_paused = true)]
async fn no_restart_after_shutdown_begins_and_a_backoff_never_delays_it() {
    let harness = harness("supervised");
    let component = harness.service_context("broker");
    let (started, mut starts) = mpsc::unbounded_channel();
    let policy =
        ServiceRestartPolicy::new().with_backoff(Duration::from_secs(10), Duration::from_secs(60));
    component
        .spawn_supervised_service("upstream", policy.clone(), move |_run| {
            let started = started.clone();
            async move {
                let _ = started.send(());
                Err::<(), _>("refused")
            }
        })
        .expect("spawned");
    guard("first run", starts.recv()).await.expect("a run");
    let began = Instant::now();
    let report = component
        .task_group()
        .shutdown(Duration::from_secs(1))
        .await;
    assert!(
        began.elapsed() < Duration::from_secs(1),
        "{:?}",
        began.elapsed()
    );
    let upstream = service(&report, "upstream");
    assert_eq!((upstream.runs, upstream.restarts), (1, 0));
    assert!(!upstream.gave_up, "stopped, not given up");
    assert_eq!(report.timed_out, 0);
    // The backoff would have ended at 10 s: nothing restarts later.
    tokio::time::advance(Duration::from_secs(20)).await;
    assert!(starts.try_recv().is_err(), "no run after the shutdown");

    // A run that ignores the cancellation is aborted at the deadline.
    let stubborn = harness.service_context("stubborn");
    stubborn
        .spawn_supervised_service("stubborn", ServiceRestartPolicy::new(), |_run| async {
            std::future::pending::<Result<(), String>>().await
        })
        .expect("spawned");
    tokio::task::yield_now().await;
    let began = Instant::now();
    let report = stubborn.task_group().shutdown(Duration::from_secs(1)).await;
    assert_eq!(
        began.elapsed(),
        Duration::from_secs(1),
        "within the deadline"
    );
    assert_eq!(report.timed_out, 1);
    assert!(
        service(&report, "stubborn").running,
        "it was running when aborted"
    );
}

/// What the failed run held (a budget reservation, a lane permit) is given
/// back before the next run starts.
#[tokio::test(start_paused = true)]
async fn the_failed_runs_reservations_are_back_before_the_next_start() {
    let harness = harness("supervised");
    let component = harness.service_context("broker");
    let budget = ResourceBudgetTree::new("process", BudgetLimit::new(1, 1_024, FullPolicy::Reject))
        .expect("valid")
        .root();
    let lane = component.storage_io().clone();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (ended, mut ends) = mpsc::unbounded_channel();
    let policy = ServiceRestartPolicy::new()
        .with_backoff(Duration::from_millis(1), Duration::from_millis(1))
        .with_max_restarts(2, Duration::from_secs(60));
    let seen_by_runs = Arc::clone(&seen);
    component
        .spawn_supervised_service("writer", policy, move |run| {
            let (budget, lane, seen, ended) = (
                budget.clone(),
                lane.clone(),
                Arc::clone(&seen_by_runs),
                ended.clone(),
            );
            async move {
                let at_start = budget.snapshot().current_count;
                // The whole budget (count 1): the next run gets it only if
                // this one's reservation was released.
                let permit = budget.try_acquire_data(512);
                let lease = lane.try_drain_lease(
                    rocketmq_runtime::ShutdownDeadline::after(Duration::from_secs(60)),
                    std::num::NonZeroUsize::MIN,
                );
                seen.lock().expect("seen").push((
                    run.attempt(),
                    at_start,
                    permit.is_ok(),
                    lease.is_ok(),
                ));
                let _ = ended.send(());
                let _held = (permit, lease);
                Err::<(), _>("write failed")
            }
        })
        .expect("spawned");
    for _ in 0..3 {
        guard("a run", ends.recv()).await.expect("a run");
    }
    let seen = seen.lock().expect("seen").clone();
    assert_eq!(
        seen,
        vec![(0, 0, true, true), (1, 0, true, true), (2, 0, true, true)],
        "every run found the budget empty and got the reservation"
    );
    let _ = component
        .task_group()
        .shutdown(Duration::from_secs(5))
        .await;
}

/// A run that records no progress within its deadline is named as stalled
/// (report, V2 view and its summary); a critical one fails liveness until
/// it records progress again; with `restart_on_stall` it is restarted as a
/// `stall` failure.
#[tokio::test(start_paused = true)]
async fn a_stalled_service_is_named_and_a_critical_one_fails_liveness() {
    let harness = harness("supervised");
    let component = harness.service_context("broker");
    let (lifecycle, failures) = watched_lifecycle(&harness);
    let (resume, resumed) = tokio::sync::watch::channel(false);
    let (started, mut starts) = mpsc::unbounded_channel();
    let policy = ServiceRestartPolicy::new()
        .with_progress_deadline(Duration::from_secs(5))
        .critical(failures.clone());
    component
        .spawn_supervised_service("index-builder", policy, move |run| {
            let mut resumed = resumed.clone();
            let started = started.clone();
            async move {
                run.record_progress();
                let _ = started.send(());
                // Stuck until the test lets it go on.
                let _ = resumed.wait_for(|go| *go).await;
                loop {
                    run.record_progress();
                    tokio::select! {
                        () = run.cancellation_token().cancelled() => return Ok::<(), String>(()),
                        () = tokio::time::sleep(Duration::from_secs(1)) => {}
                    }
                }
            }
        })
        .expect("spawned");
    guard("the run started", starts.recv())
        .await
        .expect("a run");
    tokio::time::advance(Duration::from_secs(4)).await;
    lifecycle.record_progress();
    assert!(lifecycle.is_live(), "within its progress deadline");
    tokio::time::advance(Duration::from_secs(2)).await;
    lifecycle.record_progress();
    assert!(!lifecycle.is_live(), "a critical service stalled");
    assert!(
        lifecycle.is_ready(),
        "readiness is not what a stall changes"
    );
    assert_eq!(failures.stalled_services(), vec!["index-builder".into()]);
    let view = component.diagnostics_view_v2(
        rocketmq_runtime::RuntimeComponent::Broker,
        RuntimeDiagnosticsInputs::default(),
    );
    assert!(view.services[0].stalled);
    assert!(
        view.summary()
            .contains("services: index-builder (0 restarts, stalled)"),
        "{}",
        view.summary()
    );
    resume.send(true).expect("resume");
    tokio::task::yield_now().await;
    assert!(lifecycle.is_live(), "progress again");
    let report = component
        .task_group()
        .shutdown(Duration::from_secs(5))
        .await;
    let builder = service(&report, "index-builder");
    assert!(!builder.stalled && builder.failures == 0);

    // With restart_on_stall, a stalled run is dropped and restarted.
    let restarting = harness.service_context("restarting");
    let policy = ServiceRestartPolicy::new()
        .with_progress_deadline(Duration::from_secs(5))
        .restart_on_stall(true)
        .with_max_restarts(1, Duration::from_secs(60));
    let (started, mut starts) = mpsc::unbounded_channel();
    restarting
        .spawn_supervised_service("stuck", policy, move |_run| {
            let _ = started.send(());
            std::future::pending::<Result<(), String>>()
        })
        .expect("spawned");
    guard("the first run", starts.recv()).await.expect("a run");
    guard("the restart", starts.recv()).await.expect("a run");
    // Sleeping lets paused time run to the second stall.
    tokio::time::sleep(Duration::from_secs(30)).await;
    let report = restarting
        .task_group()
        .shutdown(Duration::from_secs(5))
        .await;
    let stuck = service(&report, "stuck");
    assert_eq!((stuck.runs, stuck.restarts), (2, 1));
    assert_eq!(stuck.last_failure, Some(ServiceFailureKind::Stall));
    assert!(stuck.gave_up, "the second stall would be a second restart");
}

/// A service's evidence outlives its group: a component that is dropped
/// still has its services in the owner's report.
#[tokio::test(start_paused = true)]
async fn the_evidence_outlives_a_dropped_group() {
    let harness = harness("supervised");
    {
        let component = harness.service_context("transient");
        component
            .spawn_supervised_service(
                "once",
                ServiceRestartPolicy::new().with_max_restarts(0, Duration::from_secs(1)),
                |_run| async { Err::<(), _>("bad config") },
            )
            .expect("spawned");
        tokio::task::yield_now().await;
    }
    let report = harness.shutdown_tasks(Duration::from_secs(5)).await;
    let once = service(&report, "once");
    assert!(once.gave_up);
    assert_eq!(once.group, "transient");
}

/// A policy the supervisor cannot follow is refused, naming the rule.
#[tokio::test]
async fn invalid_policies_are_refused_naming_the_rule() {
    let harness = harness("supervised");
    let component = harness.service_context("broker");
    for (policy, rule) in [
        (
            ServiceRestartPolicy::new().with_backoff(Duration::ZERO, Duration::from_secs(1)),
            RuntimeContractPolicy::RestartBackoffOrdered,
        ),
        (
            ServiceRestartPolicy::new()
                .with_backoff(Duration::from_secs(2), Duration::from_secs(1)),
            RuntimeContractPolicy::RestartBackoffOrdered,
        ),
        (
            ServiceRestartPolicy::new().with_jitter(1.5),
            RuntimeContractPolicy::RestartJitterFraction,
        ),
        (
            ServiceRestartPolicy::new().with_jitter(f64::NAN),
            RuntimeContractPolicy::RestartJitterFraction,
        ),
        (
            ServiceRestartPolicy::new().with_max_restarts(3, Duration::ZERO),
            RuntimeContractPolicy::RestartWindowPositive,
        ),
        (
            ServiceRestartPolicy::new().restart_on_stall(true),
            RuntimeContractPolicy::ProgressDeadlinePositive,
        ),
    ] {
        let error = component
            .spawn_supervised_service("bad", policy, |_run| async { Ok::<(), String>(()) })
            .expect_err("refused");
        assert_eq!(error.kind(), RuntimeErrorKind::Configuration);
        assert!(error.to_string().contains(rule.as_str()), "{error}");
        assert!(error.to_string().contains("expected"), "{error}");
    }
    // No backoff at all is a valid choice: restart at once.
    component
        .spawn_supervised_service(
            "eager",
            ServiceRestartPolicy::new().with_backoff(Duration::ZERO, Duration::ZERO),
            |_run| async { Ok::<(), String>(()) },
        )
        .expect("zero backoff");
}
