//! Task admission: the spawn gate, poisoning, task identity and settlement.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use rocketmq_runtime::{
    RuntimeConfig, RuntimeErrorKind, RuntimeOperation, RuntimeOwner, TaskGroupLifecycleState,
    TaskKind, TaskName,
};
use support::{guard, harness, PanicsOnDrop};

/// 8 threads × 10,000 spawns race one shutdown on a multi-thread runtime:
/// every submission is either accepted (and then in the report) or rejected
/// with `Closed`; nothing leaks.
#[test]
fn spawns_racing_shutdown_are_accepted_or_rejected_never_lost() {
    const THREADS: usize = 8;
    const PER_THREAD: usize = 10_000;
    let owner = RuntimeOwner::plan(RuntimeConfig::for_parallelism("race", 2))
        .expect("valid")
        .build()
        .expect("builds");
    let component = owner.root_context().component("race");
    let group = component.task_group().clone();
    let start = Arc::new(Barrier::new(THREADS + 1));
    let accepted = Arc::new(AtomicUsize::new(0));
    let rejected = Arc::new(AtomicUsize::new(0));
    let ran = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let group = group.clone();
            let start = Arc::clone(&start);
            let accepted = Arc::clone(&accepted);
            let rejected = Arc::clone(&rejected);
            let ran = Arc::clone(&ran);
            std::thread::spawn(move || {
                start.wait();
                for _ in 0..PER_THREAD {
                    let ran = Arc::clone(&ran);
                    match group.spawn("racer", TaskKind::Worker, async move {
                        ran.fetch_add(1, Ordering::Relaxed);
                    }) {
                        Ok(_) => accepted.fetch_add(1, Ordering::Relaxed),
                        Err(error) => {
                            assert_eq!(error.kind(), RuntimeErrorKind::Closed);
                            assert_eq!(error.operation(), RuntimeOperation::SpawnTaskGroupTask);
                            rejected.fetch_add(1, Ordering::Relaxed)
                        }
                    };
                }
            })
        })
        .collect();
    start.wait();
    // Let some spawns land before the shutdown races the rest.
    while accepted.load(Ordering::Relaxed) < 1_000 {
        std::hint::spin_loop();
    }
    let report = owner.block_on(group.shutdown(Duration::from_secs(30)));
    for thread in threads {
        thread.join().expect("spawner thread");
    }
    let accepted = accepted.load(Ordering::Relaxed);
    let rejected = rejected.load(Ordering::Relaxed);
    assert_eq!(accepted + rejected, THREADS * PER_THREAD);
    assert!(rejected > 0, "the shutdown raced the spawners");
    assert_eq!(report.leaked, 0, "{}", report.to_json());
    assert_eq!(
        report.completed + report.cancelled + report.aborted + report.panicked,
        accepted,
        "every accepted task is in the report"
    );
    assert!(report.is_healthy());
    assert_eq!(group.task_count(), 0);
    let final_report = owner.shutdown_runtime_blocking().expect("outside tokio");
    assert!(final_report.is_healthy());
}

#[tokio::test]
async fn a_panicking_task_poisons_its_open_group_once() {
    let ctx = harness("poison");
    let svc = ctx.service_context("svc");
    let sibling = ctx.service_context("sibling");
    let group = svc.task_group().clone();
    let (id, handle) = group
        .spawn_with_handle("boom", TaskKind::Worker, async {
            panic!("deliberate test panic");
        })
        .expect("open");
    let joined = guard("panicking task", handle).await;
    assert!(joined
        .expect_err("panic reaches the join handle")
        .is_panic());
    assert!(!group.contains_task(id));
    assert_eq!(group.lifecycle_state(), TaskGroupLifecycleState::Poisoned);
    assert_eq!(group.event_counts().poisoned_groups, 1);

    let error = group
        .spawn("later", TaskKind::Worker, async {})
        .expect_err("poisoned");
    assert_eq!(error.kind(), RuntimeErrorKind::Poisoned);
    let error = svc.try_component("child").expect_err("poisoned");
    assert_eq!(error.kind(), RuntimeErrorKind::Poisoned);
    assert_eq!(
        error.condition(),
        rocketmq_runtime::CanonicalCondition::Unavailable
    );
    sibling
        .spawn("fine", TaskKind::Worker, async {})
        .expect("a sibling is not poisoned");

    let report = guard("shutdown", group.shutdown(Duration::from_secs(5))).await;
    assert_eq!(report.panicked, 1);
    assert!(!report.is_healthy());
    assert_eq!(
        group.lifecycle_state(),
        TaskGroupLifecycleState::ShutdownCompleted
    );
    let root_report = guard("root shutdown", ctx.shutdown_tasks(Duration::from_secs(5))).await;
    assert_eq!(
        group.event_counts().poisoned_groups,
        1,
        "poisoned exactly once"
    );
    assert!(!root_report.is_healthy());
}

#[tokio::test]
async fn a_destructor_panic_is_a_panic() {
    let ctx = harness("drop-panic");
    let group = ctx.root_group().try_child("svc").expect("open");
    let (_, handle) = group
        .spawn_with_handle("drops", TaskKind::Worker, async {
            let _guard = PanicsOnDrop;
        })
        .expect("open");
    let _ = guard("task", handle).await;
    let report = guard("shutdown", group.shutdown(Duration::from_secs(1))).await;
    assert_eq!(report.panicked, 1);
    assert_eq!(report.completed, 0);
}

/// A future that returns at once and panics when it is destroyed after
/// returning (its destructor runs after the poll that completed it).
struct ReadyThenPanicsOnDrop(#[allow(dead_code)] PanicsOnDrop);

impl std::future::Future for ReadyThenPanicsOnDrop {
    type Output = ();

    fn poll(self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        std::task::Poll::Ready(())
    }
}

/// A destructor panic after the future returned, and one while an abort
/// destroys it, are each counted once as `panicked` and reach the task's
/// join handle as a panic, as a panic in `poll` does.
#[tokio::test]
async fn a_destructor_panic_reaches_the_join_handle_and_settles_once() {
    let ctx = harness("drop-panic-join");
    let group = ctx.root_group().try_child("svc").expect("open");
    let (_, returned) = group
        .spawn_with_handle(
            "returns-then-panics",
            TaskKind::Worker,
            ReadyThenPanicsOnDrop(PanicsOnDrop),
        )
        .expect("open");
    let error = guard("returned task", returned)
        .await
        .expect_err("the destructor panic reaches the handle");
    assert!(error.is_panic(), "{error:?}");

    let report = guard("shutdown", group.shutdown(Duration::from_secs(1))).await;
    assert_eq!(report.panicked, 1, "{}", report.to_json());
    assert_eq!(report.aborted + report.completed + report.cancelled, 0);

    // The first panic poisoned that group: the abort case gets its own.
    let group = ctx.root_group().try_child("svc-2").expect("open");
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let (id, aborted) = group
        .spawn_with_handle("aborted-then-panics", TaskKind::Worker, async move {
            let _guard = PanicsOnDrop;
            let _ = started_tx.send(());
            std::future::pending::<()>().await;
        })
        .expect("open");
    guard("started", started_rx).await.expect("task started");
    assert!(group.abort_task(id));
    let error = guard("aborted task", aborted)
        .await
        .expect_err("the destructor panic reaches the handle");
    assert!(error.is_panic(), "an abort whose drop panicked: {error:?}");

    let report = guard("shutdown", group.shutdown(Duration::from_secs(1))).await;
    assert_eq!(report.panicked, 1, "{}", report.to_json());
    assert_eq!(report.aborted + report.completed + report.cancelled, 0);
}

#[tokio::test]
async fn foreign_task_ids_are_never_found_aborted_or_waited_for() {
    let ctx = harness("foreign");
    let a = ctx.root_group().try_child("a").expect("open");
    let b = ctx.root_group().try_child("b").expect("open");
    let (gate_tx, gate_rx) = tokio::sync::oneshot::channel::<()>();
    let id = a
        .spawn("parked", TaskKind::Worker, async move {
            let _ = gate_rx.await;
        })
        .expect("open");
    assert!(
        a.owns_task(id) && a.contains_task(id),
        "visible as soon as spawn returns"
    );
    assert!(!b.owns_task(id));
    assert!(!b.contains_task(id));
    assert!(!b.abort_task(id));
    assert!(!guard("foreign wait", b.wait_task(id, Duration::from_secs(3600))).await);
    assert!(
        !guard(
            "foreign abort",
            b.abort_task_and_wait(id, Duration::from_secs(3600))
        )
        .await
    );
    assert!(a.contains_task(id), "untouched by the foreign group");

    gate_tx.send(()).expect("task waiting");
    assert!(guard("own wait", a.wait_task(id, Duration::from_secs(10))).await);
    assert!(a.owns_task(id), "mine but finished");
    assert!(!a.contains_task(id));
    assert!(guard("absent wait", a.wait_task(id, Duration::ZERO)).await);
    assert!(!a.abort_task(id), "finished tasks are not aborted");
    assert!(!guard("absent abort", a.abort_task_and_wait(id, Duration::ZERO)).await);
    let report = guard("shutdown", ctx.shutdown_tasks(Duration::from_secs(5))).await;
    assert!(report.is_healthy());
}

#[tokio::test]
async fn double_abort_counts_one_abort_and_is_not_a_timeout() {
    let ctx = harness("abort");
    let group = ctx.root_group().try_child("svc").expect("open");
    let id = group
        .spawn("parked", TaskKind::Worker, std::future::pending::<()>())
        .expect("open");
    assert!(group.abort_task(id));
    assert!(group.abort_task(id), "still registered until destroyed");
    // Current-thread runtime: the task cannot be destroyed before we yield.
    assert!(
        guard(
            "abort",
            group.abort_task_and_wait(id, Duration::from_secs(10))
        )
        .await
    );
    assert!(!group.contains_task(id));
    let report = guard("shutdown", group.shutdown(Duration::from_secs(5))).await;
    assert_eq!(report.aborted, 1);
    assert_eq!(report.timed_out, 0, "an explicit abort is not a timeout");
    assert!(report.is_healthy(), "aborted alone is healthy");
}

#[test]
fn a_task_whose_destructor_still_runs_stays_registered() {
    struct SlowDrop(std::sync::mpsc::Receiver<()>);
    impl Drop for SlowDrop {
        fn drop(&mut self) {
            // Blocks the dropping thread until the test releases it.
            let _ = self.0.recv();
        }
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (release_tx, release_rx) = std::sync::mpsc::channel();
    let (dropping_tx, dropping_rx) = std::sync::mpsc::channel::<()>();
    let ctx = rt.block_on(async { harness("slow-drop") });
    let group = ctx.root_group().try_child("svc").expect("open");
    let id = group
        .spawn("slow", TaskKind::Worker, async move {
            let _slow = SlowDrop(release_rx);
            let _ = dropping_tx.send(());
        })
        .expect("open");
    dropping_rx.recv().expect("task body ran");
    // The body returned; its destructor is blocked: the task is not settled.
    assert!(group.contains_task(id));
    let waited = rt.block_on(group.wait_task(id, Duration::ZERO));
    assert!(!waited);
    let immediate = group.shutdown_now();
    assert_eq!(immediate.leaked, 1, "{}", immediate.to_json());
    release_tx.send(()).expect("destructor waiting");
    assert!(rt.block_on(group.wait_task(id, Duration::from_secs(10))));
    rt.shutdown_background();
}

#[tokio::test]
async fn cancellable_services_are_dropped_on_cancellation_and_count_as_cancelled() {
    let ctx = harness("cancellable");
    let group = ctx.root_group().try_child("svc").expect("open");
    let dropped = Arc::new(AtomicUsize::new(0));
    struct CountDrop(Arc<AtomicUsize>);
    impl Drop for CountDrop {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let marker = CountDrop(Arc::clone(&dropped));
    group
        .spawn_cancellable_service("loop", async move {
            let _marker = marker;
            std::future::pending::<()>().await;
        })
        .expect("open");
    let report = guard("shutdown", group.shutdown(Duration::from_secs(5))).await;
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
    assert_eq!(report.cancelled, 1);
    assert_eq!(report.aborted, 0);
    assert!(report.is_healthy());
}

#[tokio::test]
async fn task_names_accept_static_and_owned_forms() {
    let ctx = harness("names");
    let group = ctx.root_group().try_child("svc").expect("open");
    let dynamic = format!("conn-{}", 7);
    let shared: Arc<str> = Arc::from("shared");
    group
        .spawn("static", TaskKind::Worker, async {})
        .expect("open");
    group
        .spawn(dynamic.clone(), TaskKind::Worker, async {})
        .expect("open");
    group
        .spawn(&dynamic, TaskKind::Worker, async {})
        .expect("open");
    group
        .spawn(Arc::clone(&shared), TaskKind::Worker, async {})
        .expect("open");
    group
        .spawn(&shared, TaskKind::Worker, async {})
        .expect("open");
    group
        .spawn(
            String::from("boxed").into_boxed_str(),
            TaskKind::Worker,
            async {},
        )
        .expect("open");
    assert_eq!(TaskName::from("a").as_str(), "a");
    assert_eq!(TaskName::from(dynamic.clone()).to_string(), "conn-7");
    let report = guard("shutdown", group.shutdown(Duration::from_secs(5))).await;
    // Tasks first polled after the shutdown's cancellation count as
    // cancelled.
    assert_eq!(report.completed + report.cancelled, 6);
}
