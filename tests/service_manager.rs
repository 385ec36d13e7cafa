//! ServiceManager / ServiceTask (`src/task/service_task.rs`): state
//! transitions, wakeups, restarts, and shutdown bounded by the earliest of
//! the requested and the parent-installed deadline (30 s only when neither
//! exists), on paused time.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rocketmq_runtime::task::{ServiceManager, ServiceTask, ServiceTaskContext, ServiceTaskState};
use rocketmq_runtime::{RuntimeErrorKind, RuntimeOperation, ShutdownDeadline, TaskGroup};
use support::{guard, harness};
use tokio::time::Instant;

/// A well-behaved loop: counts rounds and `on_wait_end` calls, returns when
/// stopped.
#[derive(Default)]
struct Counting {
    rounds: AtomicUsize,
    wait_ends: AtomicUsize,
    runs: AtomicUsize,
}

impl ServiceTask for Counting {
    fn get_service_name(&self) -> String {
        "counting".to_owned()
    }

    async fn run(&self, context: &ServiceTaskContext) {
        self.runs.fetch_add(1, Ordering::SeqCst);
        while !context.is_stopped() {
            context.wait_for_running(Duration::from_secs(10)).await;
            self.rounds.fetch_add(1, Ordering::SeqCst);
        }
    }

    async fn on_wait_end(&self) {
        self.wait_ends.fetch_add(1, Ordering::SeqCst);
    }
}

/// A loop that ignores its stop request until the far future.
struct Stubborn;

impl ServiceTask for Stubborn {
    fn get_service_name(&self) -> String {
        "stubborn".to_owned()
    }

    async fn run(&self, _context: &ServiceTaskContext) {
        tokio::time::sleep(Duration::from_secs(3_600)).await;
    }
}

fn manager_group(name: &'static str) -> TaskGroup {
    harness(name)
        .root_group()
        .try_child("broker")
        .expect("open")
}

/// Lets the spawned loop run up to its next await on the paused clock.
async fn settle_loop() {
    for _ in 0..8 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn start_wakeup_make_stop_and_restart() {
    let group = manager_group("service-manager-restart");
    let manager = ServiceManager::new_with_task_group(Counting::default(), group.clone());
    assert_eq!(manager.get_lifecycle_state(), ServiceTaskState::NotStarted);
    manager.start().await.expect("starts");
    assert_eq!(manager.get_lifecycle_state(), ServiceTaskState::Running);
    assert_eq!(group.component_count(), 1, "the run's component");

    // A second start while running is ignored (warn + Ok).
    manager.start().await.expect("ignored");
    settle_loop().await;
    assert_eq!(manager.as_ref().runs.load(Ordering::SeqCst), 1);

    // A wakeup ends the 10 s wait at once, without advancing time.
    let before = Instant::now();
    manager.wakeup();
    settle_loop().await;
    assert_eq!(manager.as_ref().rounds.load(Ordering::SeqCst), 1);
    assert_eq!(manager.as_ref().wait_ends.load(Ordering::SeqCst), 1);
    assert_eq!(Instant::now(), before);

    // Without a wakeup the wait lasts its interval.
    tokio::time::sleep(Duration::from_secs(10)).await;
    settle_loop().await;
    assert_eq!(manager.as_ref().rounds.load(Ordering::SeqCst), 2);

    // make_stop: the loop returns on its own, the state becomes Stopped.
    manager.make_stop();
    settle_loop().await;
    assert_eq!(manager.get_lifecycle_state(), ServiceTaskState::Stopped);

    // A restart runs the loop again in a fresh component and closes the
    // old one, whose report becomes the last report.
    manager.start().await.expect("restarts");
    assert_eq!(manager.get_lifecycle_state(), ServiceTaskState::Running);
    settle_loop().await;
    assert_eq!(manager.as_ref().runs.load(Ordering::SeqCst), 2);
    let previous = manager.last_task_group_shutdown_report().expect("old run");
    assert!(previous.is_healthy());
    assert_eq!(previous.completed, 1);

    guard("shutdown", manager.shutdown()).await.expect("ok");
    assert_eq!(manager.get_lifecycle_state(), ServiceTaskState::Stopped);
    let report = manager.last_task_group_shutdown_report().expect("report");
    assert_eq!(report.name, "rocketmq.service-manager");
    assert!(report.is_healthy(), "{}", report.to_json());
    assert_eq!(report.completed, 1);
    // Shutting down again with nothing running returns at once.
    manager.shutdown().await.expect("ok");
}

#[tokio::test(start_paused = true)]
async fn a_wakeup_before_the_wait_makes_it_return_at_once() {
    let context = ServiceTaskContext::new();
    assert!(!context.is_stopped());
    context.wakeup();
    let before = Instant::now();
    assert!(context.wait_for_running(Duration::from_secs(60)).await);
    assert_eq!(Instant::now(), before, "the pending wakeup was consumed");
    assert!(context.wait_for_running(Duration::from_secs(60)).await);
    assert_eq!(
        Instant::now(),
        before + Duration::from_secs(60),
        "one wakeup ends one wait"
    );
}

/// A loop that ignores its stop request is aborted at the requested
/// deadline; the shutdown returns exactly then.
#[tokio::test(start_paused = true)]
async fn shutdown_never_waits_past_the_requested_deadline() {
    let manager = ServiceManager::new_with_task_group(Stubborn, manager_group("sm-requested"));
    manager.start().await.expect("starts");
    let deadline = ShutdownDeadline::after(Duration::from_secs(5));
    guard("shutdown", manager.shutdown_until(deadline))
        .await
        .expect("ok");
    assert_eq!(Instant::now(), deadline.tokio_instant());
    assert_eq!(manager.get_lifecycle_state(), ServiceTaskState::Stopped);
    let report = manager.last_task_group_shutdown_report().expect("report");
    assert_eq!(report.timed_out, 1, "{}", report.to_json());
    assert!(!report.is_healthy());
}

/// The parent's installed deadline wins when it is earlier than the
/// requested one.
#[tokio::test(start_paused = true)]
async fn the_parent_installed_deadline_bounds_the_shutdown() {
    let parent = manager_group("sm-parent");
    let manager = ServiceManager::new_with_task_group(Stubborn, parent.clone());
    manager.start().await.expect("starts");
    let installed = ShutdownDeadline::after(Duration::from_secs(2));
    // Installing happens when the call is made, before the future is polled.
    let parent_shutdown = parent.shutdown_until(installed);
    guard(
        "shutdown",
        manager.shutdown_until(ShutdownDeadline::after(Duration::from_secs(60))),
    )
    .await
    .expect("ok");
    assert_eq!(Instant::now(), installed.tokio_instant());
    assert_eq!(manager.get_lifecycle_state(), ServiceTaskState::Stopped);
    let _ = guard("parent shutdown", parent_shutdown).await;
}

/// Without a requested or an installed deadline, 30 s apply.
#[tokio::test(start_paused = true)]
async fn the_default_deadline_is_thirty_seconds() {
    let manager = ServiceManager::new_with_task_group(Stubborn, manager_group("sm-default"));
    manager.start().await.expect("starts");
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(60), manager.shutdown())
        .await
        .expect("hang guard: past the 30 s default")
        .expect("ok");
    assert_eq!(Instant::now(), started + Duration::from_secs(30));
}

/// An interrupting shutdown aborts the loop at once; with the deadline
/// already passed it confirms within the 1 s allowance.
#[tokio::test(start_paused = true)]
async fn an_interrupting_shutdown_aborts_within_the_confirmation_allowance() {
    let manager = ServiceManager::new_with_task_group(Stubborn, manager_group("sm-interrupt"));
    manager.start().await.expect("starts");
    settle_loop().await;
    let deadline = ShutdownDeadline::after(Duration::ZERO);
    guard(
        "interrupting shutdown",
        manager.shutdown_with_interrupt_until(true, deadline),
    )
    .await
    .expect("ok");
    assert!(Instant::now() <= deadline.tokio_instant() + Duration::from_secs(1));
    assert_eq!(manager.get_lifecycle_state(), ServiceTaskState::Stopped);
    let report = manager.last_task_group_shutdown_report().expect("report");
    assert_eq!(report.aborted, 1, "{}", report.to_json());
    assert_eq!(report.timed_out, 0, "an explicit abort is not a timeout");
}

/// A cooperative loop stops well before a generous deadline.
#[tokio::test(start_paused = true)]
async fn a_cooperative_loop_stops_at_once() {
    let manager =
        ServiceManager::new_with_task_group(Counting::default(), manager_group("sm-coop"));
    manager.start().await.expect("starts");
    settle_loop().await;
    let started = Instant::now();
    guard(
        "shutdown",
        manager
            .shutdown_with_interrupt_until(false, ShutdownDeadline::after(Duration::from_secs(45))),
    )
    .await
    .expect("ok");
    assert_eq!(
        Instant::now(),
        started,
        "no time passes for a cooperative loop"
    );
    assert!(manager
        .last_task_group_shutdown_report()
        .expect("report")
        .is_healthy());
}

/// Cancelling the parent group stops the loop through its context.
#[tokio::test(start_paused = true)]
async fn the_parent_cancellation_stops_the_loop() {
    let parent = manager_group("sm-cancel");
    let manager = ServiceManager::new_with_task_group(Counting::default(), parent.clone());
    manager.start().await.expect("starts");
    settle_loop().await;
    parent.cancel();
    settle_loop().await;
    assert_eq!(manager.get_lifecycle_state(), ServiceTaskState::Stopped);
    let report = guard("parent", parent.shutdown(Duration::from_secs(1))).await;
    assert!(report.is_healthy(), "{}", report.to_json());
}

/// A start the parent refuses keeps the refusal's kind, names
/// `SpawnServiceTask` and restores the state.
#[tokio::test(start_paused = true)]
async fn a_refused_start_restores_the_state() {
    let parent = manager_group("sm-refused");
    let _ = parent.shutdown(Duration::from_secs(1)).await;
    let manager = ServiceManager::new_with_task_group(Counting::default(), parent);
    let error = manager.start().await.expect_err("the parent is closed");
    assert_eq!(error.kind(), RuntimeErrorKind::Closed);
    assert_eq!(error.operation(), RuntimeOperation::SpawnServiceTask);
    assert_eq!(manager.get_lifecycle_state(), ServiceTaskState::NotStarted);
}

/// A loop that panics.
struct Panicking;

impl ServiceTask for Panicking {
    fn get_service_name(&self) -> String {
        "panicking".to_owned()
    }

    async fn run(&self, _context: &ServiceTaskContext) {
        panic!("the loop broke");
    }
}

/// A panicking loop ends its run (`Stopped`), so the manager can start it
/// again; a refused restart leaves it `Stopped`, not `Running`.
#[tokio::test(start_paused = true)]
async fn a_panicking_loop_ends_its_run() {
    let parent = manager_group("sm-panic");
    let manager = ServiceManager::new_with_task_group(Panicking, parent.clone());
    manager.start().await.expect("starts");
    settle_loop().await;
    assert_eq!(manager.get_lifecycle_state(), ServiceTaskState::Stopped);
    manager.start().await.expect("restarts after the panic");
    settle_loop().await;
    assert_eq!(manager.get_lifecycle_state(), ServiceTaskState::Stopped);
    let report = manager
        .last_task_group_shutdown_report()
        .expect("first run");
    assert_eq!(report.panicked, 1, "{}", report.to_json());
    let _ = parent.shutdown(Duration::from_secs(1)).await;
    let error = manager.start().await.expect_err("the parent is closed");
    assert_eq!(error.kind(), RuntimeErrorKind::Closed);
    assert_eq!(manager.get_lifecycle_state(), ServiceTaskState::Stopped);
}

/// Dropping a shutdown future midway still completes the stop: the state
/// becomes `Stopped` and the report records the loop it aborted.
#[tokio::test(start_paused = true)]
async fn a_dropped_shutdown_still_stops_the_run() {
    let manager = ServiceManager::new_with_task_group(Stubborn, manager_group("sm-dropped"));
    manager.start().await.expect("starts");
    settle_loop().await;
    let cut_short = tokio::time::timeout(
        Duration::from_secs(1),
        manager.shutdown_until(ShutdownDeadline::after(Duration::from_secs(60))),
    )
    .await;
    assert!(cut_short.is_err(), "the stubborn loop outlives the timeout");
    assert_eq!(manager.get_lifecycle_state(), ServiceTaskState::Stopped);
    let report = manager.last_task_group_shutdown_report().expect("report");
    assert!(!report.is_healthy(), "{}", report.to_json());
    manager.start().await.expect("startable again");
    assert_eq!(manager.get_lifecycle_state(), ServiceTaskState::Running);
    manager
        .shutdown_with_interrupt(true)
        .await
        .expect("interrupted");
}

/// Shared tasks: `new_arc_with_task_group` and `AsRef` see the same task.
#[tokio::test(start_paused = true)]
async fn a_shared_task_is_the_same_task() {
    let task = Arc::new(Counting::default());
    let manager =
        ServiceManager::new_arc_with_task_group(Arc::clone(&task), manager_group("sm-arc"));
    manager.start().await.expect("starts");
    settle_loop().await;
    assert_eq!(task.runs.load(Ordering::SeqCst), 1);
    assert!(std::ptr::eq(manager.as_ref(), &*task));
    manager.shutdown().await.expect("ok");
}

/// A run whose task is aborted before its first poll (the parent shut down
/// at once) still ends `Stopped`, so a supervisor can start it again.
#[tokio::test(start_paused = true)]
async fn a_run_aborted_before_its_first_poll_ends_stopped() {
    let group = manager_group("service-manager-unpolled");
    let manager = ServiceManager::new_with_task_group(Counting::default(), group.clone());
    manager.start().await.expect("starts");
    assert_eq!(manager.get_lifecycle_state(), ServiceTaskState::Running);
    let _report = group.shutdown_now();
    settle_loop().await;
    assert_eq!(manager.get_lifecycle_state(), ServiceTaskState::Stopped);
}
