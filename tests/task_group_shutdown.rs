//! Task-group shutdown: deadlines, cached reports, leaks, deep trees.

mod support;

use std::time::Duration;

use rocketmq_runtime::{
    RuntimeContext, ShutdownDeadline, ShutdownReport, TaskGroupLifecycleState, TaskKind,
};
use support::{guard, harness, tree_nodes};
use tokio::time::Instant;

/// Spawns one task of every spawn path into `group`, each returning once
/// `token` is cancelled; returns how many.
fn spawn_every_kind_until(
    group: &rocketmq_runtime::TaskGroup,
    token: &tokio_util::sync::CancellationToken,
) -> usize {
    let waits = || {
        let token = token.clone();
        async move { token.cancelled().await }
    };
    let failures = rocketmq_runtime::CriticalFailureState::new();
    let operation = rocketmq_runtime::OperationContext::without_deadline(TaskKind::Worker);
    group
        .spawn("worker", TaskKind::Worker, waits())
        .expect("open");
    group.spawn_service("service", waits()).expect("open");
    group
        .spawn_with_handle("handle", TaskKind::Other, waits())
        .expect("open");
    group
        .spawn_critical("critical", TaskKind::Worker, failures.clone(), waits())
        .expect("open");
    group
        .spawn_critical_service("critical-service", failures.clone(), waits())
        .expect("open");
    group
        .spawn_draining_operation(&operation, "draining", waits())
        .expect("open");
    assert_eq!(failures.occurrences(), 0);
    6
}

/// A task that returns normally after its group's token was cancelled is
/// counted `cancelled`, not `completed`, for every spawn path, in a
/// graceful and in an immediate report; one that returned before stays
/// `completed`.
#[tokio::test(start_paused = true)]
async fn tasks_returning_after_cancellation_count_as_cancelled_in_every_report() {
    let ctx = harness("cancelled-returns");
    // Graceful: the shutdown's own cancellation.
    let graceful = ctx.root_group().try_child("graceful").expect("open");
    graceful
        .spawn("early", TaskKind::Worker, async {})
        .expect("open");
    tokio::task::yield_now().await;
    let kinds = spawn_every_kind_until(&graceful, &graceful.cancellation_token());
    tokio::task::yield_now().await;
    let report = guard("graceful", graceful.shutdown(Duration::from_secs(5))).await;
    assert!(report.is_healthy(), "{}", report.to_json());
    assert_eq!(report.completed, 1, "{}", report.to_json());
    assert_eq!(report.cancelled, kinds, "{}", report.to_json());

    // Immediate: a broadcast cancellation the tasks obey, then
    // `shutdown_now` reports what settled.
    let immediate = ctx.root_group().try_child("immediate").expect("open");
    let kinds = spawn_every_kind_until(&immediate, &immediate.cancellation_token());
    tokio::task::yield_now().await;
    immediate.cancel();
    while immediate.task_count() > 0 {
        tokio::task::yield_now().await;
    }
    let report = immediate.shutdown_now();
    assert_eq!(report.cancelled, kinds, "{}", report.to_json());
    assert_eq!(report.completed + report.aborted + report.leaked, 0);
    let _ = guard("harness", ctx.shutdown_tasks(Duration::from_secs(1))).await;
}

/// A service that ignores cancellation is aborted at the deadline.
///
/// ```text
/// t=0   shutdown_until(t=5s): cancel broadcast, the service keeps running
/// t=5s  deadline: the service is aborted, counted in timed_out
/// ```
#[tokio::test(start_paused = true)]
async fn a_service_ignoring_cancellation_is_aborted_at_the_deadline() {
    let ctx = harness("deadline");
    let svc = ctx.service_context("stubborn");
    svc.spawn_service("ignores-cancel", std::future::pending::<()>())
        .expect("open");
    let cooperative_token = svc.task_group().cancellation_token();
    svc.spawn_service(
        "cooperative",
        async move { cooperative_token.cancelled().await },
    )
    .expect("open");
    let start = Instant::now();
    let deadline = ShutdownDeadline::after(Duration::from_secs(5));
    let report = ctx.shutdown_tasks_until(deadline).await;
    let returned = Instant::now();
    assert!(
        returned >= deadline.tokio_instant(),
        "waited for the deadline"
    );
    assert!(
        returned - start <= Duration::from_secs(5) + Duration::from_millis(1),
        "returned {:?} after start",
        returned - start
    );
    let child = &report.children[0];
    assert!(child.timed_out >= 1, "{}", report.to_json());
    assert_eq!(
        child.cancelled, 1,
        "the cooperative service returned at cancellation"
    );
    assert_eq!(child.aborted + child.leaked, 1);
    assert!(!report.is_healthy());
}

#[tokio::test(start_paused = true)]
async fn repeated_shutdowns_return_the_identical_cached_report() {
    let ctx = harness("cached");
    let svc = ctx.service_context("svc");
    svc.spawn_service("stubborn", std::future::pending::<()>())
        .expect("open");
    let first = ctx.shutdown_tasks(Duration::from_secs(1)).await;
    let second = ctx.shutdown_tasks(Duration::from_secs(100)).await;
    let immediate = ctx.shutdown_tasks_now();
    assert_eq!(first.to_json(), second.to_json());
    assert_eq!(first.to_json(), immediate.to_json());
    let child_again = svc.task_group().shutdown(Duration::ZERO).await;
    assert_eq!(child_again.to_json(), first.children[0].to_json());
}

#[tokio::test(start_paused = true)]
async fn a_dropped_shutdown_future_can_be_called_again_and_completes() {
    let ctx = harness("dropped");
    let group = ctx.root_group().try_child("svc").expect("open");
    let (release_tx, release_rx) = tokio::sync::oneshot::channel::<()>();
    group
        .spawn_service("waits-for-release", async move {
            let _ = release_rx.await;
        })
        .expect("open");
    {
        let pending = group.shutdown(Duration::from_secs(60));
        // Poll it a little, then drop it mid-way.
        let polled = tokio::time::timeout(Duration::from_millis(10), pending).await;
        assert!(polled.is_err(), "still waiting for the service");
    }
    assert_eq!(group.lifecycle_state(), TaskGroupLifecycleState::Closed);
    assert!(group.spawn("late", TaskKind::Worker, async {}).is_err());
    release_tx.send(()).expect("service waiting");
    let report = guard("second shutdown", group.shutdown(Duration::from_secs(60))).await;
    assert_eq!(report.cancelled, 1, "returned after cancellation");
    assert!(report.is_healthy(), "{}", report.to_json());
}

#[tokio::test(start_paused = true)]
async fn deadlines_only_tighten_and_an_earlier_one_wakes_a_later_waiter() {
    let ctx = harness("tighten");
    let group = ctx.root_group().try_child("svc").expect("open");
    let child = group.try_child("child").expect("open");
    group
        .spawn_service("stubborn", std::future::pending::<()>())
        .expect("open");
    let late = ShutdownDeadline::after(Duration::from_secs(60));
    let early = ShutdownDeadline::after(Duration::from_secs(2));
    let start = Instant::now();
    let waiter = {
        let group = group.clone();
        tokio::spawn(async move { group.shutdown_until(late).await })
    };
    tokio::task::yield_now().await;
    assert_eq!(group.shutdown_deadline(), Some(late));
    assert_eq!(
        child.shutdown_deadline(),
        Some(late),
        "installed on the subtree"
    );
    // Never polled: the deadline is still installed at the call.
    drop(group.shutdown_until(early));
    assert_eq!(group.shutdown_deadline(), Some(early));
    assert_eq!(child.shutdown_deadline(), Some(early));
    drop(group.shutdown_until(late));
    assert_eq!(
        group.shutdown_deadline(),
        Some(early),
        "a later deadline never extends"
    );
    let report = guard("waiter", waiter).await.expect("joined");
    assert!(Instant::now() - start <= Duration::from_secs(2) + Duration::from_millis(1));
    assert!(report.timed_out >= 1);
}

#[tokio::test]
async fn shutdown_moves_through_closing_closed_completed_and_woken_tasks_see_closed() {
    let ctx = harness("states");
    let group = ctx.root_group().try_child("svc").expect("open");
    assert_eq!(group.lifecycle_state(), TaskGroupLifecycleState::Open);
    let (seen_tx, seen_rx) = tokio::sync::oneshot::channel();
    let observer = group.clone();
    let token = group.cancellation_token();
    group
        .spawn_service("observer", async move {
            token.cancelled().await;
            let _ = seen_tx.send(observer.lifecycle_state());
        })
        .expect("open");
    let report = guard("shutdown", group.shutdown(Duration::from_secs(5))).await;
    assert_eq!(
        seen_rx.await.expect("observed"),
        TaskGroupLifecycleState::Closed
    );
    assert_eq!(
        group.lifecycle_state(),
        TaskGroupLifecycleState::ShutdownCompleted
    );
    assert!(report.is_healthy());
}

#[tokio::test]
async fn children_shut_down_concurrently_with_the_parent_tasks() {
    let ctx = harness("concurrent");
    let parent = ctx.root_group().try_child("parent").expect("open");
    let child = parent.try_child("child").expect("open");
    let (tx, rx) = tokio::sync::oneshot::channel();
    let token = parent.cancellation_token();
    let watched = child.clone();
    parent
        .spawn_service("watches-child", async move {
            token.cancelled().await;
            // Waits for the child group to finish its shutdown: only possible
            // if the child is driven concurrently with this task.
            while watched.lifecycle_state() != TaskGroupLifecycleState::ShutdownCompleted {
                tokio::task::yield_now().await;
            }
            let _ = tx.send(());
        })
        .expect("open");
    let child_token = child.cancellation_token();
    child
        .spawn_service("child-svc", async move { child_token.cancelled().await })
        .expect("open");
    let report = guard("shutdown", parent.shutdown(Duration::from_secs(5))).await;
    rx.await.expect("parent task saw the child complete");
    assert!(report.is_healthy(), "{}", report.to_json());
    assert_eq!(report.children.len(), 1);
    assert_eq!(report.children[0].cancelled, 1);
}

/// A remaining task's `elapsed` counts from its first poll that returned
/// `Pending` (a group task), from its submission (an operation task), and
/// is zero for a group task Tokio has not polled yet.
///
/// ```text
/// t=0   spawn "waiting" (polled: parks) and an operation task
/// t=2s  spawn "unpolled" (never polled before the report)
/// t=5s  shutdown_now: waiting 5000 ms, operation 5000 ms, unpolled 0 ms
/// ```
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn remaining_tasks_report_time_since_their_start() {
    let ctx = harness("elapsed");
    let group = ctx.root_group().try_child("svc").expect("open");
    group
        .spawn("waiting", TaskKind::Worker, std::future::pending::<()>())
        .expect("open");
    let operation = rocketmq_runtime::OperationContext::without_deadline(TaskKind::Worker);
    group
        .spawn_operation(&operation, "request", std::future::pending::<()>())
        .expect("open");
    // Both are polled once (and park) before the clock moves.
    tokio::task::yield_now().await;
    tokio::time::advance(Duration::from_secs(2)).await;
    group
        .spawn("unpolled", TaskKind::Worker, std::future::pending::<()>())
        .expect("open");
    tokio::time::advance(Duration::from_secs(3)).await;
    // Current thread and no yield since: "unpolled" has not run yet.
    let report = group.shutdown_now();
    let elapsed = |name: &str| {
        report
            .remaining_tasks
            .iter()
            .find(|task| task.name.as_str() == name)
            .map(|task| task.elapsed)
            .unwrap_or_else(|| panic!("{name} is listed: {}", report.to_json()))
    };
    assert_eq!(elapsed("waiting"), Duration::from_secs(5));
    assert_eq!(elapsed("request"), Duration::from_secs(5));
    assert_eq!(elapsed("unpolled"), Duration::ZERO);
    assert_eq!(report.leaked, 3);
}

#[test]
fn ten_thousand_leaked_tasks_are_capped_in_the_report() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let ctx = harness("leaks");
        let group = ctx.root_group().try_child("svc").expect("open");
        for _ in 0..10_000 {
            group
                .spawn("parked", TaskKind::Worker, std::future::pending::<()>())
                .expect("open");
        }
        // Current thread: nothing is destroyed before this returns.
        let report = group.shutdown_now();
        assert_eq!(report.leaked, 10_000);
        assert_eq!(
            report.remaining_tasks.len(),
            ShutdownReport::REMAINING_TASKS_LIMIT
        );
        assert_eq!(report.remaining_tasks_omitted, 9_936);
        assert_eq!(report.aborted, 0);
        assert!(
            report.to_json().len() < 64 * 1024,
            "{} bytes",
            report.to_json().len()
        );
        assert!(!report.is_healthy());
    });
}

#[tokio::test]
async fn child_links_are_weak_and_live_descendants_keep_ancestors() {
    let ctx = harness("weak");
    let root = ctx.root_group().clone();
    let a = root.try_child("a").expect("open");
    let a_clone = a.clone();
    assert_eq!(root.component_count(), 1);
    drop(a);
    assert_eq!(root.component_count(), 1, "a clone is still alive");
    drop(a_clone);
    assert_eq!(root.component_count(), 0, "the last handle unregisters");

    let parent = root.try_child("parent").expect("open");
    let grandchild = parent
        .try_child("mid")
        .expect("open")
        .try_child("leaf")
        .expect("open");
    drop(parent);
    assert_eq!(
        root.component_count(),
        1,
        "a live descendant keeps its ancestors"
    );
    let report = guard("shutdown", ctx.shutdown_tasks(Duration::from_secs(5))).await;
    assert_eq!(tree_nodes(&report), 4);
    assert_eq!(
        grandchild.lifecycle_state(),
        TaskGroupLifecycleState::ShutdownCompleted
    );
    drop(grandchild);
    assert_eq!(root.component_count(), 0);
}

#[tokio::test]
async fn component_requests_during_shutdown_are_annotated() {
    let ctx = harness("annotate");
    let broker = ctx.service_context("broker");
    let (tx, rx) = tokio::sync::oneshot::channel();
    let token = broker.task_group().cancellation_token();
    let requester = broker.clone();
    broker
        .spawn_service("asks-late", async move {
            token.cancelled().await;
            let closed = requester.component("too-late");
            let _ = tx.send(closed.task_group().lifecycle_state());
        })
        .expect("open");
    let report = guard("shutdown", ctx.shutdown_tasks(Duration::from_secs(5))).await;
    assert_eq!(
        rx.await.expect("sent"),
        TaskGroupLifecycleState::ShutdownCompleted
    );
    let child = &report.children[0];
    assert!(
        child
            .annotations
            .iter()
            .any(|a| a.message
                == "1 component requests after admission closed received closed groups"),
        "{}",
        report.to_json()
    );
    assert_eq!(
        broker.task_group().event_counts().closed_component_requests,
        1
    );
}

/// Runs `body` on a current-thread runtime on a thread with a 1 MiB stack.
fn on_small_stack<F, Fut>(name: &'static str, body: F)
where
    F: FnOnce(RuntimeContext) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move { body(harness(name)).await });
        })
        .expect("thread")
        .join()
        .expect("completed on a 1 MiB stack");
}

fn chain(ctx: &RuntimeContext, depth: usize) -> rocketmq_runtime::TaskGroup {
    let mut leaf = ctx.root_group().try_child("level").expect("open");
    for _ in 1..depth {
        leaf = leaf.try_child("level").expect("open");
    }
    leaf
}

#[test]
fn a_512_deep_chain_shuts_down_gracefully_on_a_1_mib_stack() {
    on_small_stack("deep", |ctx| async move {
        let leaf = chain(&ctx, 512);
        let token = leaf.cancellation_token();
        leaf.spawn_service("leaf-svc", async move { token.cancelled().await })
            .expect("open");
        let report = ctx.shutdown_tasks(Duration::from_secs(10)).await;
        assert_eq!(tree_nodes(&report), 513);
        assert!(report.is_healthy());
        let cloned = report.clone();
        assert!(cloned.is_healthy());
        assert_eq!(
            leaf.lifecycle_state(),
            TaskGroupLifecycleState::ShutdownCompleted
        );
    });
}

#[test]
fn a_1024_deep_chain_shuts_down_immediately_on_a_1_mib_stack() {
    on_small_stack("deep-now", |ctx| async move {
        let _leaf = chain(&ctx, 1024);
        let report = ctx.shutdown_tasks_now();
        assert_eq!(tree_nodes(&report), 1025);
        assert!(report.is_healthy());
    });
}

#[test]
fn a_4096_deep_chain_drops_on_a_1_mib_stack() {
    on_small_stack("deep-drop", |ctx| async move {
        let leaf = chain(&ctx, 4096);
        assert_eq!(ctx.root_group().component_count(), 1);
        drop(leaf);
        assert_eq!(ctx.root_group().component_count(), 0);
    });
}

/// A minimal executor with no Tokio context: polls `future` on this thread,
/// parking between wake-ups.
fn block_on_plain_thread<F: std::future::Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(std::sync::Arc::new(Unpark(std::thread::current())));
    let mut context = std::task::Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let std::task::Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
        std::thread::park();
    }
}

/// A shutdown polled by another executor (no Tokio context on the thread)
/// still times its deadline on the owner's runtime, instead of panicking
/// for want of a timer.
#[test]
fn a_shutdown_polled_outside_tokio_still_meets_its_deadline() {
    let owner = rocketmq_runtime::RuntimeOwner::plan(
        rocketmq_runtime::RuntimeConfig::for_parallelism("plain-executor", 2),
    )
    .expect("valid")
    .with_memory_limit(rocketmq_runtime::ProcessMemoryLimit::configured(1 << 30).expect("positive"))
    .build()
    .expect("owner");
    let component = owner.root_context().component("stubborn");
    component
        .spawn_service("ignores-cancel", std::future::pending::<()>())
        .expect("open");
    let group = component.task_group().clone();
    let report = block_on_plain_thread(group.shutdown(Duration::from_millis(200)));
    assert_eq!(report.timed_out, 1, "{}", report.to_json());
    assert!(!report.is_healthy());
}

/// A shut-down 4,096-deep chain (its cached report and settled evidence
/// nest 4,096 levels) is freed without recursing, on a 1 MiB stack.
#[test]
fn a_4096_deep_chain_shut_down_and_dropped_on_a_1_mib_stack() {
    on_small_stack("deep-shutdown-drop", |ctx| async move {
        let leaf = chain(&ctx, 4096);
        let report = ctx.shutdown_tasks_now();
        assert_eq!(tree_nodes(&report), 4097);
        assert!(report.is_healthy());
        drop((report, leaf));
        drop(ctx);
    });
}

/// A shutdown seals the whole accepted subtree before it cancels anything
/// (`src/task_group/shutdown.rs`, step 3). A task of a leaf, woken by the
/// cancellation, tries to register work in every group of the subtree (its
/// own, its parent, a sibling subtree, the root of the shutdown) and to
/// create children: every attempt is refused as `Closed`, so nothing joins
/// after the seal.
#[tokio::test]
async fn shutdown_seals_the_whole_subtree_before_it_cancels() {
    use rocketmq_runtime::RuntimeErrorKind;

    let ctx = harness("seal-first");
    let root = ctx.root_group().try_child("root").expect("open");
    let middle = root.try_child("middle").expect("open");
    let leaf = middle.try_child("leaf").expect("open");
    let sibling = root.try_child("sibling").expect("open");
    let (refusals_tx, refusals_rx) = tokio::sync::oneshot::channel();
    let token = leaf.cancellation_token();
    let targets = [root.clone(), middle.clone(), leaf.clone(), sibling.clone()];
    leaf.spawn_service("late-registrar", async move {
        token.cancelled().await;
        let mut kinds = Vec::new();
        for group in &targets {
            kinds.push(
                group
                    .spawn("late", TaskKind::Worker, async {})
                    .expect_err("sealed before the cancellation")
                    .kind(),
            );
            kinds.push(
                group
                    .try_child("late-child")
                    .expect_err("sealed before the cancellation")
                    .kind(),
            );
        }
        let _ = refusals_tx.send(kinds);
    })
    .expect("open");
    let report = guard("shutdown", root.shutdown(Duration::from_secs(5))).await;
    let kinds = refusals_rx.await.expect("the woken task tried");
    assert_eq!(kinds, vec![RuntimeErrorKind::Closed; 8]);
    assert!(report.is_healthy(), "{}", report.to_json());
    assert_eq!(
        tree_nodes(&report),
        4,
        "root, middle, leaf, sibling: nothing late"
    );
}

/// Phases only move forward (`src/task_group/gate.rs`, invariant 1), as an
/// outside observer sees it: a thread sampling a group's state while it
/// shuts down sees the states in shutdown order (never back), `Closed` and
/// `ShutdownCompleted` only once the token is cancelled, and
/// `ShutdownCompleted` as soon as the shutdown has returned. Repeated, so a
/// late completion mark would be caught.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_states_are_observed_in_shutdown_order() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    const ORDER: [TaskGroupLifecycleState; 4] = [
        TaskGroupLifecycleState::Open,
        TaskGroupLifecycleState::Closing,
        TaskGroupLifecycleState::Closed,
        TaskGroupLifecycleState::ShutdownCompleted,
    ];
    let ctx = harness("watched");
    for round in 0..200 {
        let group = ctx.root_group().try_child("watched").expect("open");
        let child = group.try_child("child").expect("open");
        for watched in [&group, &child] {
            let token = watched.cancellation_token();
            watched
                .spawn_service("cooperative", async move { token.cancelled().await })
                .expect("open");
        }
        let returned = Arc::new(AtomicBool::new(false));
        let watcher = {
            let (group, returned) = (group.clone(), Arc::clone(&returned));
            std::thread::spawn(move || {
                let mut seen = vec![group.lifecycle_state()];
                loop {
                    // Read before the state: a `true` here means the
                    // shutdown returned before the state below was read.
                    let done = returned.load(Ordering::Acquire);
                    let state = group.lifecycle_state();
                    if matches!(
                        state,
                        TaskGroupLifecycleState::Closed
                            | TaskGroupLifecycleState::ShutdownCompleted
                    ) {
                        assert!(
                            group.cancellation_token().is_cancelled(),
                            "{state:?} before cancellation"
                        );
                    }
                    if seen.last() != Some(&state) {
                        seen.push(state);
                    }
                    if done {
                        assert_eq!(
                            state,
                            TaskGroupLifecycleState::ShutdownCompleted,
                            "read after the shutdown returned"
                        );
                        return seen;
                    }
                }
            })
        };
        let report = guard("shutdown", group.shutdown(Duration::from_secs(5))).await;
        returned.store(true, Ordering::Release);
        let seen = watcher.join().expect("watcher");
        let positions: Vec<usize> = seen
            .iter()
            .map(|state| {
                ORDER
                    .iter()
                    .position(|expected| expected == state)
                    .expect("a shutdown state")
            })
            .collect();
        assert!(
            positions.windows(2).all(|pair| pair[0] < pair[1]),
            "round {round}: {seen:?}"
        );
        assert!(report.is_healthy(), "{}", report.to_json());
    }
}

/// A 2-worker owner named `name`.
fn small_owner(name: &'static str) -> rocketmq_runtime::RuntimeOwner {
    rocketmq_runtime::RuntimeOwner::plan(rocketmq_runtime::RuntimeConfig::for_parallelism(name, 2))
        .expect("valid")
        .build()
        .expect("owner")
}

/// Spawns a task named `task` into `group` that panics, and waits for its
/// settlement.
async fn panic_in(group: &rocketmq_runtime::TaskGroup, task: &'static str) {
    let id = group
        .spawn_service(task, async { panic!("injected failure") })
        .expect("open");
    assert!(
        group.wait_task(id, Duration::from_secs(30)).await,
        "the panicking task settles"
    );
}

/// Evidence outlives its group: a component whose task panicked and whose
/// handle the application dropped still makes the owner's report
/// unhealthy, and the report names it in `released`.
#[test]
fn a_released_component_that_panicked_keeps_the_owner_report_unhealthy() {
    let owner = small_owner("released");
    let broker = owner.root_context().component("broker");
    owner.block_on(async {
        let storage = broker.component("storage");
        panic_in(storage.task_group(), "flush").await;
        drop(storage);
    });
    // The settled task lets go of its group on its worker just after the
    // settlement `wait_task` saw.
    support::spin_until("storage leaves", || {
        broker.task_group().component_count() == 0
    });
    let report = owner.block_on(owner.shutdown_tasks());
    drop(broker);
    assert!(!report.is_healthy(), "{}", report.to_json());
    let broker = &report.children[0];
    let released = broker
        .released
        .iter()
        .find(|entry| entry.name == "storage")
        .unwrap_or_else(|| panic!("storage released: {}", report.to_json()));
    assert_eq!((released.groups, released.panicked), (1, 1));
    assert_eq!(released.events.poisoned_groups, 1);
    assert_eq!(released.failures.len(), 1);
    assert_eq!(released.failures[0].name.as_str(), "flush");
    assert_eq!(
        released.failures[0].failure,
        rocketmq_runtime::TaskFailureKind::Panicked
    );
    let summary = report.summary();
    assert!(summary.contains("released: storage"), "{summary}");
    assert!(summary.contains("panicked: flush"), "{summary}");
    assert!(report.to_json().contains("\"released\""));
}

/// A grandchild released into its parent, then the parent released into
/// the root: the root's entry for the parent carries both, and a healthy
/// release keeps the report healthy.
#[tokio::test]
async fn released_evidence_folds_up_and_healthy_releases_stay_healthy() {
    let ctx = harness("fold");
    let root = ctx.root_group().clone();
    let parent = root.try_child("parent").expect("open");
    let child = parent.try_child("child").expect("open");
    panic_in(&child, "inner").await;
    drop(child);
    let quiet = root.try_child("quiet").expect("open");
    let id = quiet.spawn_service("done", async {}).expect("open");
    assert!(quiet.wait_task(id, Duration::from_secs(30)).await);
    drop(quiet);
    let sibling = root.try_child("quiet").expect("open");
    drop(sibling);
    drop(parent);
    let report = guard("shutdown", ctx.shutdown_tasks(Duration::from_secs(5))).await;
    let entry = |name: &str| {
        report
            .released
            .iter()
            .find(|entry| entry.name == name)
            .unwrap_or_else(|| panic!("{name} missing: {}", report.to_json()))
    };
    let parent = entry("parent");
    assert_eq!((parent.groups, parent.panicked), (1, 1));
    assert_eq!(parent.failures[0].name.as_str(), "inner");
    let quiet = entry("quiet");
    assert_eq!((quiet.groups, quiet.completed), (2, 1));
    assert!(quiet.is_healthy());
    assert!(!report.is_healthy());
}

/// Every released name gets an entry up to the limit; the rest are summed
/// into one last entry, counted in `released_omitted`, and no counter is
/// lost.
#[tokio::test]
async fn released_entries_are_bounded_without_losing_counters() {
    let ctx = harness("bounded");
    let root = ctx.root_group().clone();
    let names = rocketmq_runtime::ReleasedGroup::LIMIT + 6;
    for index in 0..names {
        let child = root.try_child(format!("child-{index}")).expect("open");
        if index + 1 == names {
            panic_in(&child, "last").await;
        }
    }
    let report = guard("shutdown", ctx.shutdown_tasks(Duration::from_secs(5))).await;
    assert_eq!(
        report.released.len(),
        rocketmq_runtime::ReleasedGroup::LIMIT
    );
    let other = report.released.last().expect("entries");
    assert_eq!(other.name, rocketmq_runtime::ReleasedGroup::OTHER);
    assert_eq!(report.released_omitted, 7);
    assert_eq!(other.groups, 7);
    assert_eq!(other.panicked, 1, "a counter beyond the limit still counts");
    let groups: usize = report.released.iter().map(|entry| entry.groups).sum();
    assert_eq!(groups, names);
    assert!(!report.is_healthy());
}

/// A group's own report carries its poisoning and its failed tasks by
/// name; a report without any keeps the JSON it had (no new keys).
#[tokio::test]
async fn a_group_report_names_its_failures_and_events() {
    let ctx = harness("events");
    let broker = ctx.service_context("broker");
    panic_in(broker.task_group(), "handler").await;
    let _closed = broker.component("late");
    let report = guard("shutdown", ctx.shutdown_tasks(Duration::from_secs(5))).await;
    let node = &report.children[0];
    assert_eq!(node.events.poisoned_groups, 1, "{}", report.to_json());
    assert_eq!(node.events.closed_component_requests, 1);
    assert_eq!(node.failures.len(), 1);
    assert_eq!(node.failures[0].name.as_str(), "handler");
    assert_eq!(
        report.events.poisoned_groups, 0,
        "the root was not poisoned"
    );

    let healthy = ShutdownReport::new("clean", Duration::ZERO).to_json();
    for key in [
        "events",
        "failures",
        "failures_omitted",
        "released",
        "released_omitted",
    ] {
        assert!(!healthy.contains(&format!("\"{key}\"")), "{key}: {healthy}");
    }
}
