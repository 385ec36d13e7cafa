//! Blocking work across runtimes and owners, and the blocking rules the
//! lane tests do not reach: one global capacity for every context of an
//! owner (`src/service_context.rs`, invariant 3), a lane used after its
//! owner is gone, the drop order inside the closure wrapper
//! (`src/blocking/executor.rs`, invariant 2), a grant that comes after the
//! queue deadline (`src/blocking/submit.rs`), an isolated executor built
//! outside Tokio. The cap of a blocking deadline by the scope's installed
//! shutdown deadline (`src/blocking/executor.rs`, invariant 1) is in
//! `blocking_drain_lease`
//! (`the_root_shutdown_deadline_bounds_a_pre_accepted_slot`).

mod support;

#[path = "support/blocking.rs"]
mod blocking;

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use blocking::{gate, owner, submit_task, until, Lanes};
use rocketmq_runtime::{
    BlockingExecutor, BlockingExecutorSnapshot, BlockingPoolPolicy, RuntimeErrorKind,
    RuntimeOperation, ShutdownDeadline,
};
use support::{guard, harness};

fn other_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("another runtime")
}

fn flag() -> (Arc<AtomicBool>, impl FnOnce() + Send + 'static) {
    let flag = Arc::new(AtomicBool::new(false));
    let set = Arc::clone(&flag);
    (flag, move || set.store(true, Ordering::SeqCst))
}

/// The lanes of two contexts draw on one global capacity
/// (`src/service_context.rs`, invariant 3).
#[test]
fn two_contexts_share_one_global_blocking_capacity() {
    let (owner, store) = owner(&Lanes {
        capacity: 3,
        storage: (3, 8),
        metadata: (3, 8),
        ..Lanes::default()
    });
    let other = owner.root_context().component("other");
    let (first, first_work) = gate();
    let (second, second_work) = gate();
    let (third, third_work) = gate();
    let a = submit_task(&owner, store.storage_io(), "store-a", first_work);
    let b = submit_task(&owner, store.storage_io(), "store-b", second_work);
    let c = submit_task(&owner, other.metadata_io(), "other-c", third_work);
    for gate in [&first, &second, &third] {
        gate.wait_started();
    }
    // Both contexts see the same global count, and the other context's
    // storage submission (its lane below its ceiling) has to wait.
    assert_eq!(store.storage_io().snapshot().global_running, 3);
    assert_eq!(other.storage_io().snapshot().global_running, 3);
    let (waited_ran, waited) = flag();
    let waiting = submit_task(&owner, other.storage_io(), "other-storage", waited);
    let probe = other.storage_io().clone();
    owner.block_on(until("queued", || probe.snapshot().queued == 1));
    let lane = probe.snapshot();
    assert!(
        lane.lane_running < lane.max_concurrency,
        "the storage lane has room; the global capacity does not"
    );
    assert!(!waited_ran.load(Ordering::SeqCst));
    first.open();
    owner
        .block_on(waiting)
        .expect("joins")
        .expect("runs once the other context frees a slot");
    assert!(waited_ran.load(Ordering::SeqCst));
    second.open();
    third.open();
    for task in [a, b, c] {
        owner.block_on(task).expect("joins").expect("ran");
    }
}

/// After the owner is destroyed, a managed lane, an isolated executor and a
/// drain lease kept from it refuse with `Closed` on another runtime, and
/// never call the closure.
#[test]
fn a_lane_used_after_its_owner_is_gone_refuses_and_never_calls_the_closure() {
    let (owner, store) = owner(&Lanes::default());
    let storage = store.storage_io().clone();
    let isolated =
        BlockingExecutor::new_isolated(BlockingPoolPolicy::default(), store.task_group().clone())
            .expect("valid");
    let lease = storage
        .try_drain_lease(
            ShutdownDeadline::after(Duration::from_secs(3_600)),
            NonZeroUsize::MIN,
        )
        .expect("open");
    let report = owner
        .shutdown_runtime_blocking_with_timeout(Duration::from_secs(5))
        .expect("outside Tokio");
    assert!(report.is_healthy());

    let other = other_runtime();
    for executor in [&storage, &isolated] {
        let (ran, work) = flag();
        let error = other
            .block_on(executor.spawn_io("after-the-owner", work))
            .expect_err("the owner is gone");
        assert_eq!(error.kind(), RuntimeErrorKind::Closed);
        assert!(!ran.load(Ordering::SeqCst));
    }
    let (ran, work) = flag();
    let error = other
        .block_on(lease.spawn_io("after-the-owner", work))
        .expect_err("the owner's runtime is gone");
    assert_eq!(error.kind(), RuntimeErrorKind::Closed);
    assert!(!ran.load(Ordering::SeqCst));
    assert_eq!(storage.snapshot().tasks.len(), 0);
}

/// An isolated executor built on a thread outside Tokio runs its closures
/// on the runtime of the group it was given, whichever runtime polls the
/// submission.
#[test]
fn an_isolated_executor_built_outside_tokio_uses_its_group() {
    let (owner, store) = owner(&Lanes::default());
    assert!(tokio::runtime::Handle::try_current().is_err());
    let isolated = BlockingExecutor::new_isolated(
        BlockingPoolPolicy {
            name: "adapter".to_owned(),
            ..BlockingPoolPolicy::default()
        },
        store.task_group().clone(),
    )
    .expect("valid");
    let thread = other_runtime()
        .block_on(isolated.spawn_io("where", || std::thread::current().name().map(str::to_owned)))
        .expect("ran");
    assert_eq!(thread.as_deref(), Some("blocking"), "the owner's threads");
    // Its running closures count in the owner's report.
    let (held, work) = gate();
    let _caller = submit_task(&owner, &isolated, "held", work);
    held.wait_started();
    let report = owner
        .shutdown_runtime_blocking_with_timeout(Duration::from_millis(100))
        .expect("outside Tokio");
    assert_eq!(report.blocking_still_running, 1);
    held.open();
}

/// A closure's captures are dropped while its permit and its record are
/// still held, also when it panics (`src/blocking/executor.rs`,
/// invariant 2).
#[test]
fn captures_are_dropped_before_the_permit_and_the_record() {
    struct Probe {
        executor: BlockingExecutor,
        seen: Arc<Mutex<Option<BlockingExecutorSnapshot>>>,
    }
    impl Drop for Probe {
        fn drop(&mut self) {
            *self.seen.lock().expect("unpoisoned") = Some(self.executor.snapshot());
        }
    }
    let (owner, store) = owner(&Lanes::default());
    let storage = store.storage_io();
    for panics in [false, true] {
        let seen = Arc::new(Mutex::new(None));
        let probe = Probe {
            executor: storage.clone(),
            seen: Arc::clone(&seen),
        };
        let result = owner.block_on(storage.spawn_io("probe", move || {
            let _probe = probe;
            assert!(!panics, "the closure panics");
        }));
        assert_eq!(result.is_err(), panics);
        let at_drop = seen.lock().expect("unpoisoned").take().expect("dropped");
        assert_eq!(
            (at_drop.lane_running, at_drop.tasks.len()),
            (1, 1),
            "permit and record held while the captures drop"
        );
        let after = storage.snapshot();
        assert_eq!((after.lane_running, after.tasks.len()), (0, 0));
    }
}

/// A slot handed to a waiter after its queue deadline passed (the waiter
/// was not polled in between) is not used: the closure never runs, the
/// caller gets `TimedOut`, and the slot goes to the next waiter.
#[tokio::test(start_paused = true)]
async fn a_grant_after_the_queue_deadline_never_runs_its_closure() {
    let harness = harness("grant");
    let store = harness.service_context("store");
    let isolated = BlockingExecutor::new_isolated(
        BlockingPoolPolicy {
            name: "one-slot".to_owned(),
            max_concurrency: 1,
            max_queue_depth: 4,
            queue_timeout: Duration::from_millis(50),
            task_timeout: Duration::from_secs(30),
            ..BlockingPoolPolicy::default()
        },
        store.task_group().clone(),
    )
    .expect("valid");
    let (held, work) = gate();
    let first = tokio::spawn({
        let isolated = isolated.clone();
        async move { isolated.spawn_io("held", work).await }
    });
    while held.started.try_recv().is_err() {
        tokio::task::yield_now().await;
    }
    // The late waiter is polled once (it queues), then not until the end.
    let (late_ran, late_work) = flag();
    let late = isolated.spawn_io("late", late_work);
    tokio::pin!(late);
    assert!(futures::poll!(late.as_mut()).is_pending());
    assert_eq!(isolated.snapshot().queued, 1);
    tokio::time::advance(Duration::from_millis(100)).await;
    // The held closure exits: its release grants the slot to the waiter,
    // whose queue deadline has passed.
    held.open();
    guard(
        "the slot is granted",
        until("granted", || isolated.snapshot().queued == 0),
    )
    .await;
    let (next_ran, next_work) = flag();
    let next = tokio::spawn({
        let isolated = isolated.clone();
        async move { isolated.spawn_io("next", next_work).await }
    });
    let error = late.await.expect_err("the queue deadline passed first");
    assert_eq!(error.kind(), RuntimeErrorKind::TimedOut);
    assert_eq!(error.operation(), RuntimeOperation::BlockingQueueAdmission);
    assert!(!late_ran.load(Ordering::SeqCst));
    guard("the next waiter runs", next)
        .await
        .expect("joins")
        .expect("the slot went on");
    assert!(next_ran.load(Ordering::SeqCst));
    first.await.expect("joins").expect("ran");
    let _ = harness.shutdown_tasks(Duration::from_secs(1)).await;
}
