//! Ownership model: owner, contexts, cancellation tree, owner shutdown paths.

mod support;

use std::time::Duration;

use rocketmq_runtime::{
    RuntimeConfig, RuntimeContractPolicy, RuntimeContractViolation, RuntimeErrorKind,
    RuntimeOperation, RuntimeOwner, ScopeId, ShutdownDeadline, TaskGroupLifecycleState, TaskKind,
};

fn small_owner() -> RuntimeOwner {
    RuntimeOwner::plan(RuntimeConfig::for_parallelism("test-owner", 2))
        .expect("valid config")
        .build()
        .expect("runtime builds")
}

#[test]
fn quick_start_service_observes_cancellation_and_report_is_healthy() {
    let owner = RuntimeOwner::plan(RuntimeConfig::broker_default())
        .expect("valid")
        .build()
        .expect("builds");
    let broker = owner.root_context().component("broker");
    let cancellation = broker.task_group().cancellation_token();
    broker
        .spawn_service("heartbeat", async move {
            cancellation.cancelled().await;
        })
        .expect("open group accepts");
    let report = owner.shutdown_runtime_blocking().expect("outside tokio");
    assert!(report.is_healthy(), "{}", report.to_json());
    assert_eq!(report.children.len(), 1);
    assert_eq!(
        report.children[0].cancelled, 1,
        "the service returned because it was cancelled"
    );
}

#[test]
fn plan_validates_only_and_reports_the_first_failing_policy() {
    let mut config = RuntimeConfig::for_parallelism("x", 2);
    config.worker_threads = 0;
    config.thread_name = " ".into();
    let error = RuntimeOwner::plan(config).expect_err("invalid");
    assert_eq!(
        error,
        RuntimeContractViolation::InvalidConfiguration {
            policy: RuntimeContractPolicy::WorkerThreadsPositive
        }
    );
}

#[test]
fn cancellation_flows_down_never_up_or_sideways() {
    let owner = small_owner();
    let root = owner.root_context();
    let parent = root.component("parent");
    let left = parent.component("left");
    let right = parent.component("right");
    let grandchild = left.component("grandchild");
    let spawner = left.task_spawner();
    let spawner_token = spawner.cancellation_token();

    spawner_token.cancel();
    assert!(
        !left.task_group().cancellation_token().is_cancelled(),
        "spawner token is a child"
    );

    left.task_group().cancel();
    assert!(grandchild.task_group().cancellation_token().is_cancelled());
    assert!(!parent.task_group().cancellation_token().is_cancelled());
    assert!(!right.task_group().cancellation_token().is_cancelled());

    let fresh_spawner_token = right.task_spawner().cancellation_token();
    parent.task_group().cancel();
    assert!(right.task_group().cancellation_token().is_cancelled());
    assert!(
        fresh_spawner_token.is_cancelled(),
        "owner cancellation reaches spawner tokens"
    );
    let report = owner.shutdown_runtime_blocking().expect("outside tokio");
    assert!(report.is_healthy(), "{}", report.to_json());
}

#[test]
fn clones_share_the_group_and_children_get_distinct_ids() {
    let owner = small_owner();
    let a = owner.root_context().component("same-name");
    let b = owner.root_context().component("same-name");
    assert_ne!(a.task_group().id(), b.task_group().id(), "names are labels");
    let a2 = a.clone();
    assert_eq!(a2.task_group().id(), a.task_group().id());
    a2.task_group().cancel();
    assert!(a.task_group().cancellation_token().is_cancelled());
    let report = owner.shutdown_runtime_blocking().expect("outside tokio");
    assert_eq!(report.children.len(), 2, "one child report per group");
}

#[test]
fn group_ids_are_unique_across_owners() {
    let first = small_owner();
    let second = small_owner();
    let a = first.root_context().component("c");
    let b = second.root_context().component("c");
    assert_ne!(a.task_group().id(), b.task_group().id());
    assert_ne!(
        first.root_context().runtime_id(),
        second.root_context().runtime_id()
    );
    assert_eq!(a.runtime_id(), first.root_context().runtime_id());
}

#[test]
fn scope_ids_are_validated() {
    assert!(ScopeId::try_new("  ").is_err());
    assert!(ScopeId::try_new(String::new()).is_err());
    assert_eq!(
        ScopeId::try_new("broker").expect("valid").as_str(),
        "broker"
    );
    assert!(ScopeId::try_from(String::from("ok")).is_ok());
}

#[test]
fn component_after_shutdown_is_closed_counted_and_try_component_errors() {
    let owner = small_owner();
    let broker = owner.root_context().component("broker");
    let report =
        owner.block_on(owner.shutdown_tasks_until(ShutdownDeadline::after(Duration::from_secs(5))));
    assert!(report.is_healthy());

    let closed = broker.component("late");
    assert_eq!(
        closed.task_group().lifecycle_state(),
        TaskGroupLifecycleState::ShutdownCompleted
    );
    assert!(closed.task_group().cancellation_token().is_cancelled());
    let error = closed
        .spawn("x", TaskKind::Worker, async {})
        .expect_err("closed");
    assert_eq!(error.kind(), RuntimeErrorKind::Closed);
    let _again = owner.root_context().component("late-root");
    assert_eq!(
        broker.task_group().event_counts().closed_component_requests,
        2
    );

    let error = broker.try_component("late").expect_err("closed");
    assert_eq!(error.kind(), RuntimeErrorKind::Closed);
    assert_eq!(error.operation(), RuntimeOperation::CreateTaskGroupChild);
    let late_report = owner.block_on(closed.task_group().shutdown(Duration::ZERO));
    assert!(late_report.is_healthy());
}

#[test]
fn shutdown_runtime_blocking_inside_tokio_is_unsupported_without_panicking() {
    let owner = small_owner();
    let host = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("host runtime");
    let result = host.block_on(async move {
        owner.shutdown_runtime_blocking_until(ShutdownDeadline::after(Duration::from_secs(1)))
    });
    let error = result.expect_err("inside a Tokio context");
    assert_eq!(error.kind(), RuntimeErrorKind::Unsupported);
    assert_eq!(error.operation(), RuntimeOperation::ShutdownRuntimeBlocking);
    // It says why and names the fix.
    let message = error.to_string();
    assert!(message.contains("inside a Tokio runtime"), "{message}");
    assert!(message.contains("outside `block_on`"), "{message}");
    assert!(message.contains("`RuntimeContext` in tests"), "{message}");
}

/// The owner's Tokio metrics, read-only, for a metrics reader.
#[test]
fn runtime_metrics_read_the_owned_runtime() {
    let owner = small_owner();
    assert_eq!(
        owner.runtime_metrics().num_workers(),
        owner.config().worker_threads
    );
    let _ = owner.shutdown_runtime_blocking().expect("outside Tokio");
}

#[test]
fn shutdown_background_returns_immediate_evidence() {
    let owner = small_owner();
    let worker = owner.root_context().component("worker");
    worker
        .spawn("parked", TaskKind::Worker, std::future::pending::<()>())
        .expect("accepted");
    let report = owner.shutdown_background();
    assert_eq!(report.children.len(), 1);
    let child = &report.children[0];
    assert_eq!(child.leaked + child.aborted, 1, "{}", report.to_json());
}

#[test]
fn dropping_an_owner_without_shutdown_runs_the_emergency_path() {
    let owner = small_owner();
    let group = owner.root_context().component("svc").task_group().clone();
    group
        .spawn("parked", TaskKind::Worker, std::future::pending::<()>())
        .expect("accepted");
    drop(owner);
    assert_eq!(
        group.lifecycle_state(),
        TaskGroupLifecycleState::ShutdownCompleted
    );
    assert!(group.cancellation_token().is_cancelled());
}

#[test]
fn runtime_new_uses_the_default_profile() {
    let owner = RuntimeOwner::new().expect("default builds");
    assert_eq!(owner.config().thread_name, "rocketmq-runtime");
    assert_eq!(owner.root_context().name(), "rocketmq-runtime");
    let report = owner.shutdown_runtime_blocking().expect("outside tokio");
    assert!(report.is_healthy());
}

/// Every worker is blocked by synchronous code, so no Tokio timer can fire:
/// the standard-clock backstop still ends `shutdown_runtime_blocking_*`.
#[test]
fn a_blocked_runtime_still_shuts_down_within_the_backstop() {
    let mut config = RuntimeConfig::for_parallelism("blocked", 1);
    config.worker_threads = 1;
    let owner = RuntimeOwner::plan(config)
        .expect("valid")
        .build()
        .expect("builds");
    let (release, blocked) = std::sync::mpsc::channel::<()>();
    let (entered_tx, entered) = std::sync::mpsc::channel::<()>();
    owner
        .root_context()
        .component("stuck")
        .spawn("blocks-the-worker", TaskKind::Worker, async move {
            let _ = entered_tx.send(());
            // Blocks the only worker thread until the test releases it.
            let _ = blocked.recv();
        })
        .expect("accepted");
    entered
        .recv_timeout(Duration::from_secs(30))
        .expect("the blocking task started");
    let (done_tx, done) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let report = owner.shutdown_runtime_blocking_with_timeout(Duration::from_millis(100));
        let _ = done_tx.send(report);
    });
    let report = done
        .recv_timeout(Duration::from_secs(30))
        .expect("hang guard: the backstop did not end the shutdown")
        .expect("outside tokio");
    assert!(!report.is_healthy(), "{}", report.to_json());
    assert_eq!(report.children[0].leaked, 1);
    release.send(()).expect("worker still blocked");
}

#[test]
fn owner_and_harness_shutdowns_install_their_deadline_at_the_call() {
    let owner = small_owner();
    let svc = owner.root_context().component("svc");
    let deadline = ShutdownDeadline::after(Duration::from_secs(10));
    drop(owner.shutdown_tasks_until(deadline));
    assert_eq!(svc.task_group().shutdown_deadline(), Some(deadline));

    let host = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("host");
    host.block_on(async {
        let ctx = rocketmq_runtime::RuntimeContext::try_from_current("h").expect("inside tokio");
        let child = ctx.service_context("child");
        let deadline = ShutdownDeadline::after(Duration::from_secs(10));
        drop(ctx.shutdown_tasks_until(deadline));
        assert_eq!(child.task_group().shutdown_deadline(), Some(deadline));
    });
}

thread_local! {
    static HELD: std::cell::RefCell<Option<rocketmq_runtime::ChildServiceContext>> =
        const { std::cell::RefCell::new(None) };
}

/// A context held by a thread-local is dropped during thread-local teardown
/// without aborting the process.
#[test]
fn dropping_a_group_during_thread_local_teardown_does_not_abort() {
    let owner = small_owner();
    let parent = owner.root_context().component("parent");
    let worker = parent.clone();
    std::thread::spawn(move || {
        // Registered first, so destroyed after the runtime's own thread-locals.
        HELD.with(|held| *held.borrow_mut() = Some(worker.component("held")));
        // Touch the group-release machinery on this thread.
        drop(worker.component("temporary"));
    })
    .join()
    .expect("the thread exits cleanly");
    assert_eq!(parent.task_group().component_count(), 0);
    let report = owner.shutdown_runtime_blocking().expect("outside tokio");
    assert!(report.is_healthy());
}
