//! Operations: admission, owner binding, the six outcomes, waits and wait
//! policies (`src/operation.rs` and `src/operation/`).

mod support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rocketmq_runtime::{
    OperationContext, OperationOutcome, OperationOutcomeObserver, OperationWaitOutcome,
    OperationWaitPolicy, RuntimeErrorKind, RuntimeOperation, ShutdownDeadline, TaskGroup, TaskKind,
};
use support::{guard, harness, owner_with_group, tree_sum, PanicsOnDrop};
use tokio::sync::oneshot;
use tokio::time::Instant;

fn counts(operation: &OperationContext) -> Vec<(OperationOutcome, u64)> {
    operation
        .outcomes()
        .into_iter()
        .filter(|(_, count)| *count > 0)
        .collect()
}

fn op_in(after: Duration) -> OperationContext {
    OperationContext::new((Instant::now() + after).into_std(), TaskKind::Worker)
}

/// Yields until `group` lists no task (bounded by the caller's guard).
async fn until_settled(group: &TaskGroup) {
    while group.task_count() > 0 {
        tokio::task::yield_now().await;
    }
}

/// An operation bound to `owner` by one task that waits for `release`,
/// plus a second group (`stranger`) of the same tree.
fn bound_operation(
    harness: &rocketmq_runtime::RuntimeContext,
) -> (TaskGroup, TaskGroup, OperationContext, oneshot::Sender<()>) {
    let owner = harness.root_group().try_child("owner").expect("open");
    let stranger = harness.root_group().try_child("stranger").expect("open");
    let op = OperationContext::without_deadline(TaskKind::Worker);
    let (release, released) = oneshot::channel::<()>();
    owner
        .spawn_operation(&op, "bound", async move {
            let _ = released.await;
        })
        .expect("binds");
    (owner, stranger, op, release)
}

#[tokio::test(start_paused = true)]
async fn completed_outcome_and_no_task_group() {
    let harness = harness("ops");
    let group = harness.root_group().clone();
    let children = group.component_count();
    let op = OperationContext::without_deadline(TaskKind::Worker);
    let ran = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&ran);
    let id = group
        .spawn_operation(&op, "request", async move {
            flag.store(true, Ordering::SeqCst);
        })
        .expect("open");
    assert!(group.owns_task(id));
    assert_eq!(group.component_count(), children, "no group per operation");
    assert!(guard("wait", op.wait(&group, Duration::from_secs(1)))
        .await
        .expect("owner"));
    assert!(ran.load(Ordering::SeqCst));
    assert!(!group.contains_task(id));
    assert_eq!(counts(&op), [(OperationOutcome::Completed, 1)]);
    assert_eq!(op.active_task_count(), 0);
}

/// A bound operation holds its owner group only while it has accepted tasks
/// (`src/operation.rs`, invariant 6; a parent holds its children weakly:
/// `src/task_group.rs`, invariant 5): with a task running, dropping the
/// group's last handle leaves the group listed under its parent (the task
/// still settles into it); once the operation is idle the group is
/// unregistered, although the operation lives on.
#[tokio::test(start_paused = true)]
async fn a_bound_operation_keeps_its_owner_only_while_it_has_tasks() {
    let harness = harness("ops");
    let root = harness.root_group().clone();
    let before = root.component_count();
    let owner = root.try_child("owner").expect("open");
    assert_eq!(root.component_count(), before + 1);
    let op = OperationContext::without_deadline(TaskKind::Worker);
    let (started_tx, started) = oneshot::channel::<()>();
    let (release, released) = oneshot::channel::<()>();
    owner
        .spawn_operation(&op, "holds-the-owner", async move {
            let _ = started_tx.send(());
            let _ = released.await;
        })
        .expect("open");
    drop(owner);
    guard("start", started).await.expect("the task runs");
    assert_eq!(
        root.component_count(),
        before + 1,
        "a running task keeps its owner group"
    );
    release.send(()).expect("the task waits");
    guard("idle", async {
        while op.active_task_count() > 0 {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert_eq!(
        root.component_count(),
        before,
        "an idle operation keeps no group alive"
    );
    assert_eq!(counts(&op), [(OperationOutcome::Completed, 1)]);
}

#[tokio::test(start_paused = true)]
async fn cancelled_outcome_drops_the_future() {
    let harness = harness("ops");
    let group = harness.root_group().clone();
    let op = OperationContext::without_deadline(TaskKind::Worker);
    let dropped = Arc::new(AtomicBool::new(false));
    let guard_flag = DropFlag(Arc::clone(&dropped));
    group
        .spawn_operation(&op, "request", async move {
            let _flag = guard_flag;
            std::future::pending::<()>().await;
        })
        .expect("open");
    tokio::task::yield_now().await;
    assert!(
        guard("cancel", op.cancel_and_wait(&group, Duration::from_secs(5)))
            .await
            .expect("owner")
    );
    assert!(dropped.load(Ordering::SeqCst));
    assert!(op.is_cancelled() && op.is_admission_closed());
    assert_eq!(counts(&op), [(OperationOutcome::Cancelled, 1)]);
}

#[tokio::test(start_paused = true)]
async fn deadline_outcome_at_the_operation_deadline() {
    let harness = harness("ops");
    let group = harness.root_group().clone();
    let op = op_in(Duration::from_secs(3));
    group
        .spawn_operation(&op, "request", std::future::pending())
        .expect("open");
    let started = Instant::now();
    assert!(guard("wait", op.wait(&group, Duration::from_secs(10)))
        .await
        .expect("owner"));
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(3),
        "dropped at the deadline"
    );
    assert_eq!(counts(&op), [(OperationOutcome::DeadlineExceeded, 1)]);
    // The deadline has passed: admission refuses, counting nothing.
    let refused = group
        .spawn_operation(&op, "late", async {})
        .expect_err("expired");
    assert_eq!(refused.kind(), RuntimeErrorKind::Closed);
    assert_eq!(refused.operation(), RuntimeOperation::SpawnOperation);
    assert_eq!(counts(&op), [(OperationOutcome::DeadlineExceeded, 1)]);
}

#[tokio::test(start_paused = true)]
async fn owner_cancelled_outcome_wins_over_operation_cancellation() {
    let harness = harness("ops");
    let root = harness.root_group().clone();
    let group = root.try_child("owner").expect("open");
    let op = OperationContext::without_deadline(TaskKind::Worker);
    let polled = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&polled);
    group
        .spawn_operation(&op, "request", async move {
            flag.store(true, Ordering::SeqCst);
        })
        .expect("open");
    // Both stop conditions are due before the first poll: the owner wins
    // and the work is never polled.
    group.cancel();
    op.cancel();
    assert!(guard("wait", op.wait(&group, Duration::from_secs(1)))
        .await
        .expect("owner"));
    assert!(!polled.load(Ordering::SeqCst));
    assert_eq!(counts(&op), [(OperationOutcome::OwnerCancelled, 1)]);
    // A parked task is woken by the owner's cancellation.
    let parked = OperationContext::without_deadline(TaskKind::Worker);
    let group = root.try_child("owner-2").expect("open");
    group
        .spawn_operation(&parked, "parked", std::future::pending())
        .expect("open");
    tokio::task::yield_now().await;
    root.cancel();
    assert!(guard("wait", parked.wait(&group, Duration::from_secs(1)))
        .await
        .expect("owner"));
    assert_eq!(counts(&parked), [(OperationOutcome::OwnerCancelled, 1)]);
    // Both due before a parked task's next poll (its wake-ups armed): the
    // owner still wins, in either order of the two cancellations.
    for owner_first in [true, false] {
        let parent = harness.root_group().try_child("parent").expect("open");
        let group = parent.try_child("owner").expect("open");
        let op = OperationContext::without_deadline(TaskKind::Worker);
        group
            .spawn_operation(&op, "parked", std::future::pending())
            .expect("open");
        tokio::task::yield_now().await;
        if owner_first {
            group.cancel();
            op.cancel();
        } else {
            op.cancel();
            group.cancel();
        }
        assert!(guard("wait", op.wait(&group, Duration::from_secs(1)))
            .await
            .expect("owner"));
        assert_eq!(counts(&op), [(OperationOutcome::OwnerCancelled, 1)]);
    }
}

#[tokio::test(start_paused = true)]
async fn panicked_outcome_poisons_the_owner() {
    let harness = harness("ops");
    let group = harness.root_group().try_child("owner").expect("open");
    let op = OperationContext::without_deadline(TaskKind::Worker);
    group
        .spawn_operation(&op, "request", async { panic!("request failed") })
        .expect("open");
    assert!(guard("wait", op.wait(&group, Duration::from_secs(1)))
        .await
        .expect("owner"));
    assert_eq!(counts(&op), [(OperationOutcome::Panicked, 1)]);
    let refused = group
        .spawn_operation(&op, "next", async {})
        .expect_err("poisoned owner");
    assert_eq!(refused.kind(), RuntimeErrorKind::Poisoned);
    assert_eq!(op.active_task_count(), 0, "the refusal was rolled back");
    assert_eq!(counts(&op), [(OperationOutcome::Panicked, 1)]);
}

/// A panic while an operation task's future is destroyed makes its outcome
/// `Panicked` (a panic in poll or drop: `src/task_group/completion.rs`,
/// invariant 3), however the task stopped: here one that completed and one
/// that a wait aborted. A panic is never hidden behind the reason the task
/// stopped.
#[tokio::test(start_paused = true)]
async fn a_panic_while_the_future_is_destroyed_is_panicked() {
    let harness = harness("ops");
    for aborted in [false, true] {
        let group = harness.root_group().try_child("owner").expect("open");
        let op = OperationContext::without_deadline(TaskKind::Worker);
        let guard_value = PanicsOnDrop;
        // Borrowed, not moved into the body: dropped with the future.
        group
            .spawn_operation(&op, "panics-when-destroyed", async move {
                let _borrowed = &guard_value;
                if aborted {
                    std::future::pending::<()>().await;
                }
            })
            .expect("open");
        tokio::task::yield_now().await;
        let settled = if aborted {
            op.wait_until(&group, ShutdownDeadline::after(Duration::ZERO))
                .await
                .expect("owner");
            guard("destroyed", until_settled(&group)).await;
            true
        } else {
            guard("wait", op.wait(&group, Duration::from_secs(1)))
                .await
                .expect("owner")
        };
        assert!(settled);
        assert_eq!(counts(&op), [(OperationOutcome::Panicked, 1)]);
    }
}

#[tokio::test(start_paused = true)]
async fn aborted_outcome_from_wait_until_at_its_deadline() {
    let harness = harness("ops");
    let group = harness.root_group().clone();
    let op = OperationContext::without_deadline(TaskKind::Worker);
    let bystander = OperationContext::without_deadline(TaskKind::Worker);
    group
        .spawn_operation(&op, "stuck", std::future::pending())
        .expect("open");
    let other = group
        .spawn_operation(&bystander, "bystander", std::future::pending())
        .expect("open");
    let deadline = ShutdownDeadline::after(Duration::from_secs(2));
    let settled = guard("wait_until", op.wait_until(&group, deadline))
        .await
        .expect("owner");
    assert!(!settled);
    assert_eq!(
        Instant::now(),
        deadline.tokio_instant(),
        "returns at the deadline"
    );
    // The abort was requested; confirmation is the owner's business.
    guard("abort settles", async {
        while op.active_task_count() > 0 {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert_eq!(counts(&op), [(OperationOutcome::Aborted, 1)]);
    assert!(
        group.contains_task(other),
        "only the operation's tasks abort"
    );
    bystander.cancel();
}

#[tokio::test(start_paused = true)]
async fn draining_operation_survives_owner_cancellation() {
    let harness = harness("ops");
    let group = harness.root_group().try_child("owner").expect("open");
    let op = op_in(Duration::from_secs(60));
    let (release, released) = oneshot::channel::<()>();
    let finished = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&finished);
    group
        .spawn_draining_operation(&op, "drain", async move {
            let _ = released.await;
            flag.store(true, Ordering::SeqCst);
        })
        .expect("open");
    tokio::task::yield_now().await;
    group.cancel();
    tokio::task::yield_now().await;
    assert_eq!(op.active_task_count(), 1, "owner cancellation is ignored");
    release.send(()).expect("task waits");
    assert!(guard("wait", op.wait(&group, Duration::from_secs(1)))
        .await
        .expect("owner"));
    assert!(finished.load(Ordering::SeqCst));
    assert_eq!(counts(&op), [(OperationOutcome::Completed, 1)]);
}

#[tokio::test(start_paused = true)]
async fn draining_operation_still_stops_at_its_deadline() {
    let harness = harness("ops");
    let group = harness.root_group().try_child("owner").expect("open");
    let op = op_in(Duration::from_secs(5));
    group
        .spawn_draining_operation(&op, "drain", std::future::pending())
        .expect("open");
    group.cancel();
    let started = Instant::now();
    assert!(guard("wait", op.wait(&group, Duration::from_secs(30)))
        .await
        .expect("owner"));
    assert_eq!(started.elapsed(), Duration::from_secs(5));
    assert_eq!(counts(&op), [(OperationOutcome::DeadlineExceeded, 1)]);
}

/// A draining operation that ignores its owner's cancellation is still
/// bounded by a wait (which aborts it) and by the owner's shutdown deadline
/// (`src/operation/run.rs`, invariant 1; README: "task-group shutdown still
/// bound it").
#[tokio::test(start_paused = true)]
async fn draining_operation_is_still_aborted_by_a_wait_and_by_shutdown() {
    let harness = harness("ops");
    let group = harness.root_group().try_child("owner").expect("open");
    let waited = OperationContext::without_deadline(TaskKind::Worker);
    group
        .spawn_draining_operation(&waited, "drain", std::future::pending())
        .expect("open");
    group.cancel();
    tokio::task::yield_now().await;
    assert_eq!(
        waited.active_task_count(),
        1,
        "owner cancellation is ignored"
    );
    let deadline = ShutdownDeadline::after(Duration::from_secs(2));
    assert!(!waited.wait_until(&group, deadline).await.expect("owner"));
    guard("aborted", until_settled(&group)).await;
    assert_eq!(counts(&waited), [(OperationOutcome::Aborted, 1)]);

    let group = harness.root_group().try_child("shut-down").expect("open");
    let shut = OperationContext::without_deadline(TaskKind::Worker);
    group
        .spawn_draining_operation(&shut, "drain", std::future::pending())
        .expect("open");
    tokio::task::yield_now().await;
    let started = Instant::now();
    let report = guard("shutdown", group.shutdown(Duration::from_secs(3))).await;
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(3),
        "bounded by its deadline"
    );
    assert_eq!(report.timed_out, 1, "{}", report.to_json());
    assert_eq!(shut.active_task_count(), 0);
    assert_eq!(counts(&shut), [(OperationOutcome::Aborted, 1)]);
}

#[tokio::test(start_paused = true)]
async fn refused_submissions_change_no_counter() {
    let harness = harness("ops");
    let group = harness.root_group().clone();
    for close in [
        OperationContext::close_admission as fn(&OperationContext),
        OperationContext::cancel,
    ] {
        let op = OperationContext::without_deadline(TaskKind::Worker);
        close(&op);
        let tasks = group.task_count();
        let error = group
            .spawn_draining_operation(&op, "refused", async {})
            .expect_err("closed");
        assert_eq!(error.kind(), RuntimeErrorKind::Closed);
        assert_eq!(error.operation(), RuntimeOperation::SpawnOperation);
        assert_eq!(group.task_count(), tasks);
        assert_eq!(op.active_task_count(), 0);
        assert!(counts(&op).is_empty());
    }
    let expired = op_in(Duration::ZERO);
    let tasks = group.task_count();
    let error = group
        .spawn_operation(&expired, "refused", async {})
        .expect_err("expired");
    assert_eq!(error.kind(), RuntimeErrorKind::Closed);
    assert_eq!(group.task_count(), tasks);
    assert_eq!(expired.active_task_count(), 0);
    assert!(counts(&expired).is_empty());
    // A group that refuses (shut down) rolls the admission back.
    let closed = harness.root_group().try_child("closed").expect("open");
    let _ = closed.shutdown(Duration::from_secs(1)).await;
    let op = OperationContext::without_deadline(TaskKind::Worker);
    let error = closed
        .spawn_operation(&op, "refused", async {})
        .expect_err("group closed");
    assert_eq!(error.kind(), RuntimeErrorKind::Closed);
    assert_eq!(error.operation(), RuntimeOperation::SpawnTaskGroupTask);
    assert_eq!(op.active_task_count(), 0);
    assert!(counts(&op).is_empty());
    // ... and does not bind the operation to it.
    group
        .spawn_operation(&op, "accepted", async {})
        .expect("first accepted submission binds here");
    assert!(op
        .wait(&group, Duration::from_secs(1))
        .await
        .expect("owner"));
}

#[tokio::test(start_paused = true)]
async fn a_wrong_owner_is_refused_everywhere_and_admission_stays_open() {
    let harness = harness("ops");
    let (owner, stranger, op, release) = bound_operation(&harness);
    let wrong = stranger
        .spawn_operation(&op, "elsewhere", async {})
        .expect_err("bound elsewhere");
    assert_eq!(wrong.kind(), RuntimeErrorKind::Internal);
    assert_eq!(wrong.operation(), RuntimeOperation::OperationOwner);
    let now = ShutdownDeadline::after(Duration::ZERO);
    let wrong = op
        .wait_with_policy(&stranger, OperationWaitPolicy::new(now, now))
        .await
        .expect_err("wrong owner");
    assert_eq!(wrong.operation(), RuntimeOperation::OperationOwner);
    assert!(!op.is_admission_closed(), "a wrong owner closes nothing");
    let wrong = op
        .cancel_and_wait(&stranger, Duration::from_secs(1))
        .await
        .expect_err("wrong owner");
    assert_eq!(wrong.operation(), RuntimeOperation::OperationOwner);
    assert!(!op.is_cancelled(), "a wrong owner cancels nothing");
    assert!(op.wait(&stranger, Duration::ZERO).await.is_err());
    owner
        .spawn_operation(&op, "second", async {})
        .expect("admission stays open");
    release.send(()).expect("first waits");
    assert!(op
        .wait(&owner, Duration::from_secs(1))
        .await
        .expect("owner"));
    assert_eq!(counts(&op), [(OperationOutcome::Completed, 2)]);
}

/// `wait` returns only once the count is zero and the owner lists no task
/// of the operation, including a task accepted while it waits.
#[tokio::test(start_paused = true)]
async fn wait_includes_tasks_accepted_during_the_wait() {
    let harness = harness("ops");
    let group = harness.root_group().clone();
    let op = OperationContext::without_deadline(TaskKind::Worker);
    let (first_tx, first_rx) = oneshot::channel::<()>();
    let (second_tx, second_rx) = oneshot::channel::<()>();
    let first = group
        .spawn_operation(&op, "first", async move {
            let _ = first_rx.await;
        })
        .expect("open");
    let waiter = {
        let op = op.clone();
        let group = group.clone();
        tokio::spawn(async move { op.wait(&group, Duration::from_secs(60)).await })
    };
    tokio::task::yield_now().await;
    let second = group
        .spawn_operation(&op, "second", async move {
            let _ = second_rx.await;
        })
        .expect("open");
    first_tx.send(()).expect("first waits");
    until_first_gone(&group, first).await;
    tokio::task::yield_now().await;
    assert!(!waiter.is_finished(), "the second task keeps the wait open");
    assert!(group.contains_task(second));
    second_tx.send(()).expect("second waits");
    assert!(guard("waiter", waiter)
        .await
        .expect("joins")
        .expect("owner"));
    assert!(!group.contains_task(first) && !group.contains_task(second));
    assert_eq!(op.active_task_count(), 0);
    assert_eq!(counts(&op), [(OperationOutcome::Completed, 2)]);
}

async fn until_first_gone(group: &TaskGroup, id: rocketmq_runtime::TaskId) {
    guard("first settles", async {
        while group.contains_task(id) {
            tokio::task::yield_now().await;
        }
    })
    .await;
}

/// `wait(timeout)` counts its confirmation second from `timeout`, not from
/// the moment it noticed the timeout: a waiter woken late (here two seconds
/// late, by one jump of the paused clock) aborts and returns without adding
/// a second of its own, although the operation stays active (the aborted
/// task's destructor submits another task).
#[tokio::test(start_paused = true)]
async fn a_late_wait_adds_no_confirmation_beyond_timeout_plus_one_second() {
    struct SubmitsOnDrop(TaskGroup, OperationContext);
    impl Drop for SubmitsOnDrop {
        fn drop(&mut self) {
            self.0
                .spawn_operation(&self.1, "accepted-after-the-abort", std::future::pending())
                .expect("wait does not close admission");
        }
    }
    let harness = harness("ops");
    let group = harness.root_group().clone();
    let op = OperationContext::without_deadline(TaskKind::Worker);
    let on_drop = SubmitsOnDrop(group.clone(), op.clone());
    group
        .spawn_operation(&op, "aborted-at-the-timeout", async move {
            let _on_drop = on_drop;
            std::future::pending::<()>().await;
        })
        .expect("open");
    let waiter = tokio::spawn({
        let (op, group) = (op.clone(), group.clone());
        async move { op.wait(&group, Duration::from_secs(1)).await }
    });
    tokio::task::yield_now().await;
    tokio::time::advance(Duration::from_secs(3)).await;
    let woken = Instant::now();
    let settled = guard("wait", waiter).await.expect("waiter task");
    assert!(!settled.expect("owner"), "a task was aborted");
    assert_eq!(
        Instant::now(),
        woken,
        "no confirmation window past timeout + 1 s"
    );
    assert_eq!(op.active_task_count(), 1, "the late task still runs");
    op.cancel();
    guard("cancelled", until_settled(&group)).await;
}

#[tokio::test(start_paused = true)]
async fn waits_never_return_after_their_deadline() {
    let harness = harness("ops");
    let group = harness.root_group().clone();
    for cancel in [false, true] {
        let op = OperationContext::without_deadline(TaskKind::Worker);
        // Pending until aborted (or, with `cancel`, dropped by the
        // operation's cancellation, which settles it before the deadline).
        group
            .spawn_draining_operation(&op, "slow", std::future::pending())
            .expect("open");
        let deadline = ShutdownDeadline::after(Duration::from_millis(1_500));
        let result = if cancel {
            // Cancellation settles it at once: the wait completes early.
            op.cancel_and_wait_until(&group, deadline).await
        } else {
            op.wait_until(&group, deadline).await
        }
        .expect("owner");
        assert!(Instant::now() <= deadline.tokio_instant());
        assert_eq!(result, cancel);
    }
    // `wait(timeout)` returns at the timeout when the abort is confirmed.
    let op = OperationContext::without_deadline(TaskKind::Worker);
    group
        .spawn_operation(&op, "slow", std::future::pending())
        .expect("open");
    let started = Instant::now();
    assert!(!op
        .wait(&group, Duration::from_secs(2))
        .await
        .expect("owner"));
    assert!(started.elapsed() <= Duration::from_secs(3));
    assert_eq!(counts(&op), [(OperationOutcome::Aborted, 1)]);
}

/// A task whose destructor blocks cannot be confirmed: `wait(timeout)` and
/// `cancel_and_wait(timeout)` still return within timeout + 1 s.
#[test]
fn wait_returns_within_timeout_plus_one_second_when_destruction_hangs() {
    let (owner, group) = owner_with_group("ops");
    for cancel in [false, true] {
        let op = OperationContext::without_deadline(TaskKind::Worker);
        let (unblock, blocked) = std::sync::mpsc::channel::<()>();
        let entered = Arc::new(std::sync::Barrier::new(2));
        let drop_guard = BlockingDrop {
            entered: Arc::clone(&entered),
            release: Mutex::new(blocked),
        };
        group
            .spawn_operation(&op, "hangs-on-drop", async move {
                let _guard = drop_guard;
                std::future::pending::<()>().await;
            })
            .expect("open");
        let timeout = Duration::from_millis(200);
        let (result, elapsed) = owner.block_on({
            let op = op.clone();
            let group = group.clone();
            async move {
                let started = Instant::now();
                let result = if cancel {
                    op.cancel_and_wait(&group, timeout).await
                } else {
                    op.wait(&group, timeout).await
                };
                (result, started.elapsed())
            }
        });
        entered.wait();
        // `src/operation.rs`, invariant 2: while the future is still being
        // destroyed, nothing is published and the task still counts.
        assert_eq!(op.active_task_count(), 1);
        assert!(counts(&op).is_empty(), "{:?}", counts(&op));
        assert!(!result.expect("owner"));
        assert!(
            elapsed >= timeout + Duration::from_secs(1) - Duration::from_millis(50),
            "waited for confirmation: {elapsed:?}"
        );
        assert!(
            elapsed <= timeout + Duration::from_secs(1) + Duration::from_millis(500),
            "bounded by timeout + 1 s (+ scheduling slack): {elapsed:?}"
        );
        unblock.send(()).expect("destructor waits");
    }
    let report = owner.shutdown_runtime_blocking().expect("outside Tokio");
    assert!(report.is_healthy(), "{}", report.to_json());
}

#[tokio::test(start_paused = true)]
async fn wait_with_policy_gives_each_result() {
    let harness = harness("ops");
    let group = harness.root_group().clone();
    // Completed: everything settles within the grace period.
    let op = OperationContext::without_deadline(TaskKind::Worker);
    group.spawn_operation(&op, "quick", async {}).expect("open");
    let policy = OperationWaitPolicy::new(
        ShutdownDeadline::after(Duration::from_secs(1)),
        ShutdownDeadline::after(Duration::from_secs(2)),
    );
    assert_eq!(
        op.wait_with_policy(&group, policy).await.expect("owner"),
        OperationWaitOutcome::Completed
    );
    assert!(op.is_admission_closed(), "the policy closes admission");
    // AbortConfirmed: grace runs out, the abort is confirmed in time.
    let op = OperationContext::without_deadline(TaskKind::Worker);
    group
        .spawn_draining_operation(&op, "stuck", std::future::pending())
        .expect("open");
    let graceful = ShutdownDeadline::after(Duration::from_secs(1));
    let policy =
        OperationWaitPolicy::new(graceful, ShutdownDeadline::after(Duration::from_secs(3)));
    assert_eq!(
        op.wait_with_policy(&group, policy).await.expect("owner"),
        OperationWaitOutcome::AbortConfirmed
    );
    assert!(Instant::now() < policy.confirmation().tokio_instant());
    assert_eq!(counts(&op), [(OperationOutcome::Aborted, 1)]);
    // Unconfirmed: zero confirmation on a current-thread runtime.
    let op = OperationContext::without_deadline(TaskKind::Worker);
    group
        .spawn_draining_operation(&op, "stuck", std::future::pending())
        .expect("open");
    let now = ShutdownDeadline::after(Duration::ZERO);
    let policy = OperationWaitPolicy::new(ShutdownDeadline::after(Duration::from_secs(9)), now);
    assert_eq!(policy.graceful(), now, "grace is capped by confirmation");
    assert_eq!(
        op.wait_with_policy(&group, policy).await.expect("owner"),
        OperationWaitOutcome::Unconfirmed { remaining_tasks: 1 }
    );
    until_settled(&group).await;
    assert_eq!(counts(&op), [(OperationOutcome::Aborted, 1)]);
}

/// Spawns an operation task that blocks its worker inside `poll` and waits
/// until it does; the task returns once the sender is used (or dropped).
fn spawn_blocked_in_poll(group: &TaskGroup, op: &OperationContext) -> std::sync::mpsc::Sender<()> {
    let (unblock, blocked) = std::sync::mpsc::channel::<()>();
    let (entered_tx, entered_rx) = std::sync::mpsc::channel::<()>();
    group
        .spawn_operation(op, "blocks-in-poll", async move {
            entered_tx.send(()).expect("test waits");
            // Blocks this worker inside `poll` until released.
            let _ = blocked.recv();
        })
        .expect("open");
    entered_rx.recv().expect("task entered its poll");
    unblock
}

/// A task blocked inside `poll` cannot be aborted: on the real clock,
/// `wait_until` and `cancel_and_wait_until` still return `false` no later
/// than their deadline (plus scheduling slack).
#[test]
fn wait_until_returns_at_its_deadline_when_a_task_blocks_in_poll() {
    let (owner, group) = owner_with_group("ops");
    for cancel in [false, true] {
        let op = OperationContext::without_deadline(TaskKind::Worker);
        let unblock = spawn_blocked_in_poll(&group, &op);
        let (result, deadline) = owner.block_on({
            let op = op.clone();
            let group = group.clone();
            async move {
                let deadline = ShutdownDeadline::after(Duration::from_millis(300));
                let result = if cancel {
                    op.cancel_and_wait_until(&group, deadline).await
                } else {
                    op.wait_until(&group, deadline).await
                };
                (result, deadline)
            }
        });
        let returned = Instant::now();
        assert!(!result.expect("owner"), "the blocked task is unconfirmed");
        assert!(
            returned <= deadline.tokio_instant() + Duration::from_millis(250),
            "returned {:?} after the deadline",
            returned.saturating_duration_since(deadline.tokio_instant())
        );
        unblock.send(()).expect("task waits");
    }
    // The owner's shutdown report accounts for a task that a wait left
    // unconfirmed (still blocked when the owner shuts down).
    let reported = group.try_child("reported").expect("open");
    let op = OperationContext::without_deadline(TaskKind::Worker);
    let unblock = spawn_blocked_in_poll(&reported, &op);
    let report = owner.block_on({
        let (op, reported) = (op.clone(), reported.clone());
        async move {
            let deadline = ShutdownDeadline::after(Duration::from_millis(100));
            assert!(!op.wait_until(&reported, deadline).await.expect("owner"));
            reported.shutdown(Duration::from_millis(100)).await
        }
    });
    unblock.send(()).expect("task waits");
    assert_eq!(report.leaked, 1, "{}", report.to_json());
    assert!(!report.is_healthy());
    // Only that group's (cached) report counts a task past its deadline.
    let report = owner.shutdown_runtime_blocking().expect("outside Tokio");
    assert_eq!(
        tree_sum(&report, |node| node.timed_out),
        1,
        "{}",
        report.to_json()
    );
}

#[tokio::test(start_paused = true)]
async fn priorities_when_several_stop_conditions_are_due_together() {
    let harness = harness("ops");
    let group = harness.root_group().clone();
    // The deadline and the work become ready at the same instant: the
    // deadline wins.
    let deadline = Instant::now() + Duration::from_secs(1);
    let op = OperationContext::new(deadline.into_std(), TaskKind::Worker);
    group
        .spawn_operation(
            &op,
            "races-its-deadline",
            tokio::time::sleep_until(deadline),
        )
        .expect("open");
    assert!(op
        .wait(&group, Duration::from_secs(5))
        .await
        .expect("owner"));
    assert_eq!(counts(&op), [(OperationOutcome::DeadlineExceeded, 1)]);
    // Cancellation and an expired deadline: cancellation wins.
    let op = op_in(Duration::from_secs(1));
    group
        .spawn_draining_operation(&op, "parked", std::future::pending())
        .expect("open");
    tokio::task::yield_now().await;
    tokio::time::advance(Duration::from_secs(2)).await;
    op.cancel();
    assert!(op
        .wait(&group, Duration::from_secs(5))
        .await
        .expect("owner"));
    assert_eq!(counts(&op), [(OperationOutcome::Cancelled, 1)]);
    // A draining operation with a cancelled owner is still stopped by its
    // own cancellation.
    let owner = group.try_child("owner").expect("open");
    let op = OperationContext::without_deadline(TaskKind::Worker);
    owner
        .spawn_draining_operation(&op, "drain", std::future::pending())
        .expect("open");
    owner.cancel();
    tokio::task::yield_now().await;
    assert_eq!(op.active_task_count(), 1);
    assert!(op
        .cancel_and_wait(&owner, Duration::from_secs(5))
        .await
        .expect("owner"));
    assert_eq!(counts(&op), [(OperationOutcome::Cancelled, 1)]);
}

#[tokio::test(start_paused = true)]
async fn cancellation_token_is_a_child_cancelled_with_the_operation() {
    let op = OperationContext::without_deadline(TaskKind::Worker);
    let token = op.cancellation_token();
    token.cancel();
    assert!(
        !op.is_cancelled(),
        "cancelling the child does not cancel the operation"
    );
    let token = op.cancellation_token();
    assert!(!token.is_cancelled());
    op.cancel();
    assert!(token.is_cancelled());
    assert!(
        op.cancellation_token().is_cancelled(),
        "a later token is born cancelled"
    );
    let late = OperationContext::without_deadline(TaskKind::Worker);
    late.cancel();
    assert!(
        late.cancellation_token().is_cancelled(),
        "created after cancel"
    );
}

#[tokio::test(start_paused = true)]
async fn wrong_owner_on_the_deadline_waits_changes_nothing() {
    let harness = harness("ops");
    let (owner, stranger, op, release) = bound_operation(&harness);
    let deadline = ShutdownDeadline::after(Duration::ZERO);
    let error = op
        .wait_until(&stranger, deadline)
        .await
        .expect_err("wrong owner");
    assert_eq!(error.operation(), RuntimeOperation::OperationOwner);
    let error = op
        .cancel_and_wait_until(&stranger, deadline)
        .await
        .expect_err("wrong owner");
    assert_eq!(error.operation(), RuntimeOperation::OperationOwner);
    assert!(!op.is_cancelled() && !op.is_admission_closed());
    assert_eq!(op.active_task_count(), 1, "nothing was aborted");
    // An expired operation used with a wrong owner reports the owner.
    let expiring = op_in(Duration::from_secs(1));
    owner
        .spawn_operation(&expiring, "bound", async {})
        .expect("binds");
    tokio::time::advance(Duration::from_secs(2)).await;
    let error = stranger
        .spawn_operation(&expiring, "elsewhere", async {})
        .expect_err("wrong owner");
    assert_eq!(error.operation(), RuntimeOperation::OperationOwner);
    release.send(()).expect("task waits");
    assert!(op
        .wait(&owner, Duration::from_secs(1))
        .await
        .expect("owner"));
}

#[derive(Debug, Default)]
struct Recorder(Mutex<Vec<(TaskKind, OperationOutcome)>>);

impl OperationOutcomeObserver for Recorder {
    fn on_outcome(&self, kind: TaskKind, outcome: OperationOutcome) {
        self.0.lock().expect("unpoisoned").push((kind, outcome));
    }
}

#[tokio::test(start_paused = true)]
async fn observer_sees_each_outcome_once_and_installs_only_before_submission() {
    let harness = harness("ops");
    let group = harness.root_group().clone();
    let op = OperationContext::without_deadline(TaskKind::Worker);
    let recorder = Arc::new(Recorder::default());
    op.set_outcome_observer(recorder.clone()).expect("first");
    assert_eq!(
        op.set_outcome_observer(recorder.clone())
            .expect_err("only once")
            .kind(),
        RuntimeErrorKind::ContextUnavailable
    );
    let service_view = op.with_task_kind(TaskKind::Service);
    group.spawn_operation(&op, "a", async {}).expect("open");
    group
        .spawn_operation(&service_view, "b", std::future::pending())
        .expect("open");
    tokio::task::yield_now().await;
    op.cancel();
    assert!(op
        .wait(&group, Duration::from_secs(1))
        .await
        .expect("owner"));
    let mut seen = recorder.0.lock().expect("unpoisoned").clone();
    seen.sort_by_key(|(_, outcome)| *outcome);
    assert_eq!(
        seen,
        [
            (TaskKind::Worker, OperationOutcome::Completed),
            (TaskKind::Service, OperationOutcome::Cancelled)
        ]
    );
    let late = OperationContext::without_deadline(TaskKind::Worker);
    group.spawn_operation(&late, "a", async {}).expect("open");
    assert!(
        late.set_outcome_observer(recorder).is_err(),
        "after the first submission"
    );
}

/// 10,000 operations on a multi-thread runtime, each spawning tasks and
/// waiting in a loop while completions race registrations: every accepted
/// task is counted exactly once and no wait sees a stale active entry.
#[test]
fn churn_counts_every_task_once_and_never_leaves_a_stale_entry() {
    const OPERATIONS: usize = 10_000;
    const ROUNDS: usize = 3;
    let (owner, group) = owner_with_group("churn");
    let failed_waits = Arc::new(AtomicUsize::new(0));
    let runtime = owner.block_on(async { tokio::runtime::Handle::current() });
    let drivers: Vec<_> = (0..4)
        .map(|_| {
            let group = group.clone();
            let failed_waits = Arc::clone(&failed_waits);
            {
                runtime.spawn(async move {
                    let mut ops = Vec::with_capacity(OPERATIONS / 4);
                    for _ in 0..OPERATIONS / 4 {
                        let op = OperationContext::without_deadline(TaskKind::Worker);
                        for _ in 0..ROUNDS {
                            let first = group.spawn_operation(&op, "req", async {}).expect("open");
                            let second = group
                                .spawn_draining_operation(&op, "req", tokio::task::yield_now())
                                .expect("open");
                            if !op
                                .wait(&group, Duration::from_secs(30))
                                .await
                                .expect("owner")
                            {
                                failed_waits.fetch_add(1, Ordering::Relaxed);
                            }
                            assert_eq!(op.active_task_count(), 0);
                            // `src/operation/gate.rs`, invariant 2: the
                            // owner lists neither task.
                            assert!(!group.contains_task(first) && !group.contains_task(second));
                        }
                        ops.push(op);
                    }
                    ops
                })
            }
        })
        .collect();
    let ops: Vec<OperationContext> = owner.block_on(async move {
        let mut all = Vec::new();
        for driver in drivers {
            all.extend(guard("driver", driver).await.expect("driver"));
        }
        all
    });
    assert_eq!(failed_waits.load(Ordering::Relaxed), 0, "no wait lost");
    assert_eq!(ops.len(), OPERATIONS);
    for op in &ops {
        assert_eq!(
            counts(op),
            [(OperationOutcome::Completed, 2 * ROUNDS as u64)]
        );
    }
    assert_eq!(group.task_count(), 0);
    let report = owner.shutdown_runtime_blocking().expect("outside Tokio");
    assert!(report.is_healthy(), "{}", report.to_json());
}

/// Registration racing completion across threads: outcomes sum to the
/// accepted submissions, exactly once each.
#[test]
fn outcomes_sum_to_accepted_submissions_under_contention() {
    const THREADS: usize = 4;
    const PER_THREAD: usize = 2_500;
    let (owner, group) = owner_with_group("race");
    let op = OperationContext::without_deadline(TaskKind::Worker);
    let start = Arc::new(std::sync::Barrier::new(THREADS));
    let threads: Vec<_> = (0..THREADS)
        .map(|index| {
            let group = group.clone();
            let op = op.clone();
            let start = Arc::clone(&start);
            std::thread::spawn(move || {
                start.wait();
                let mut accepted = 0u64;
                for n in 0..PER_THREAD {
                    if index == 0 && n == PER_THREAD / 2 {
                        op.close_admission();
                    }
                    if group.spawn_draining_operation(&op, "req", async {}).is_ok() {
                        accepted += 1;
                    }
                }
                accepted
            })
        })
        .collect();
    let accepted: u64 = threads
        .into_iter()
        .map(|thread| thread.join().expect("submitter"))
        .sum();
    let settled = owner.block_on({
        let op = op.clone();
        let group = group.clone();
        async move { op.wait(&group, Duration::from_secs(30)).await }
    });
    assert!(settled.expect("owner"));
    let total: u64 = op.outcomes().iter().map(|(_, count)| count).sum();
    assert_eq!(total, accepted);
    assert_eq!(op.outcome_count(OperationOutcome::Completed), accepted);
    assert!(accepted >= (PER_THREAD / 2) as u64);
    let report = owner.shutdown_runtime_blocking().expect("outside Tokio");
    assert_eq!(tree_sum(&report, |node| node.completed) as u64, accepted);
}

struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Blocks its destructor until released (a destructor that never returns
/// in time).
struct BlockingDrop {
    entered: Arc<std::sync::Barrier>,
    release: Mutex<std::sync::mpsc::Receiver<()>>,
}

impl Drop for BlockingDrop {
    fn drop(&mut self) {
        self.entered.wait();
        let _ = self.release.lock().expect("unpoisoned").recv();
    }
}

/// The deadline timer fires up to a driver tick late; a task woken by its
/// own work after its deadline has passed is still stopped by the deadline
/// (`src/operation/run.rs`, invariant 3: the deadline outranks completion),
/// not completed.
#[tokio::test(start_paused = true)]
async fn a_deadline_passed_before_a_later_poll_wins_over_completion() {
    let harness = harness("ops");
    let group = harness.root_group().clone();
    let op = op_in(Duration::from_millis(10));
    let (finish, finished) = oneshot::channel::<()>();
    let ran_to_end = Arc::new(AtomicBool::new(false));
    group
        .spawn_operation(&op, "request", {
            let ran_to_end = Arc::clone(&ran_to_end);
            async move {
                let _ = finished.await;
                ran_to_end.store(true, Ordering::SeqCst);
            }
        })
        .expect("open");
    // First poll: the work is pending, the wake-ups (and the timer) armed.
    tokio::task::yield_now().await;
    // The work becomes ready, and the clock passes the deadline before the
    // task runs again and before the driver fires the timer.
    finish.send(()).expect("task waiting");
    tokio::time::advance(Duration::from_millis(20)).await;
    assert!(guard("wait", op.wait(&group, Duration::from_secs(1)))
        .await
        .expect("owner"));
    assert_eq!(counts(&op), [(OperationOutcome::DeadlineExceeded, 1)]);
    assert!(
        !ran_to_end.load(Ordering::SeqCst),
        "the work was not resumed"
    );
}

/// A future whose destructor calls back into its operation.
struct CallsBackOnDrop(OperationContext);

impl std::future::Future for CallsBackOnDrop {
    type Output = ();
    fn poll(self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        std::task::Poll::Pending
    }
}

impl Drop for CallsBackOnDrop {
    fn drop(&mut self) {
        // Takes the operation's lock that a first submission holds while
        // it binds the operation to its owner.
        let _token = self.0.cancellation_token();
    }
}

/// On a runtime that has shut down, Tokio drops a spawned future inline. A
/// first (binding) submission must not hold the operation's binding lock
/// then: the future's destructor and the outcome observer may call back
/// into the operation. The task settles as aborted; nothing deadlocks.
#[test]
fn a_first_submission_dropped_inline_by_a_stopped_runtime_does_not_deadlock() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let harness = runtime.block_on(async { harness("gone") });
    let group = harness.root_group().clone();
    drop(runtime);
    let (done, finished) = std::sync::mpsc::channel();
    let submitter = std::thread::spawn(move || {
        let op = OperationContext::without_deadline(TaskKind::Worker);
        let spawned = group.spawn_operation(&op, "dropped", CallsBackOnDrop(op.clone()));
        let _ = done.send((spawned.is_ok(), op.outcomes(), op.active_task_count()));
    });
    let (accepted, outcomes, active) = finished
        .recv_timeout(Duration::from_secs(30))
        .expect("hang guard: the first submission deadlocked");
    submitter.join().expect("submitter");
    assert!(accepted, "registered, then dropped by the stopped runtime");
    assert_eq!(active, 0);
    assert!(
        outcomes.contains(&(OperationOutcome::Aborted, 1)),
        "{outcomes:?}"
    );
}
