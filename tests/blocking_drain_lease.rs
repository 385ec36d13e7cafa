//! Drain leases (`src/blocking/lease.rs`): finalization I/O accepted while
//! a scope is open and run after it closes, bounded in count and time,
//! without reopening ordinary admission. Closures are held at gates; waits
//! for a state are polled under a hang guard.

mod support;

#[path = "support/blocking.rs"]
mod blocking;

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use blocking::{hold, owner, spawn_on, submit_task, until, Lanes};
use rocketmq_runtime::{
    BlockingDrainLease, RuntimeErrorKind, RuntimeOperation, RuntimeResult, ShutdownDeadline,
};
use support::guard;

fn after(duration: Duration) -> ShutdownDeadline {
    ShutdownDeadline::after(duration)
}

fn operations(count: usize) -> NonZeroUsize {
    NonZeroUsize::new(count).expect("positive")
}

/// A flag set by the closure that captures it.
fn ran() -> (Arc<AtomicBool>, impl FnOnce() + Send + 'static) {
    let flag = Arc::new(AtomicBool::new(false));
    let set = Arc::clone(&flag);
    (flag, move || set.store(true, Ordering::SeqCst))
}

#[test]
fn closing_one_scope_rejects_normal_work_without_stopping_a_sibling() {
    let (owner, store) = owner(&Lanes::default());
    let sibling = owner.root_context().component("sibling");
    let lease = store
        .storage_io()
        .try_drain_lease(after(Duration::from_secs(30)), operations(1))
        .expect("the scope is open");
    let _ = owner.block_on(
        store
            .task_group()
            .shutdown_until(after(Duration::from_secs(5))),
    );

    let closed = owner
        .block_on(store.storage_io().spawn_io("ordinary", || {}))
        .expect_err("the closed scope refuses ordinary work");
    assert_eq!(closed.kind(), RuntimeErrorKind::Closed);
    let refused = store
        .storage_io()
        .try_drain_lease(after(Duration::from_secs(30)), operations(1))
        .expect_err("no lease once the scope is closed");
    assert_eq!(refused.kind(), RuntimeErrorKind::Closed);
    assert_eq!(
        refused.operation(),
        RuntimeOperation::BlockingQueueAdmission
    );
    owner
        .block_on(sibling.storage_io().spawn_io("sibling", || {}))
        .expect("the sibling scope is not stopped");

    let (flushed, flush) = ran();
    owner
        .block_on(lease.spawn_io("flush", flush))
        .expect("the pre-accepted finalization runs");
    assert!(flushed.load(Ordering::SeqCst));
    // Using the lease did not reopen ordinary admission.
    let still_closed = owner
        .block_on(store.storage_io().spawn_io("ordinary-again", || {}))
        .expect_err("still closed");
    assert_eq!(still_closed.kind(), RuntimeErrorKind::Closed);
}

#[test]
fn cancellation_wakes_an_admission_waiter_before_the_lane_deadline() {
    // Queue waits of 30 s: a `Closed` answer can only come from the wake.
    let (owner, store) = owner(&Lanes::default());
    let storage = store.storage_io();
    let lease = storage
        .try_drain_lease(after(Duration::from_secs(30)), operations(1))
        .expect("open");
    let (held, first) = hold(&owner, storage);
    let (ordinary_ran, ordinary_work) = ran();
    let ordinary = submit_task(&owner, storage, "queued", ordinary_work);
    let probe = storage.clone();
    owner.block_on(until("ordinary queued", || probe.snapshot().queued == 1));
    let lease = Arc::new(lease);
    let (final_ran, final_work) = ran();
    let finalization = {
        let lease = Arc::clone(&lease);
        spawn_on(
            &owner,
            async move { lease.spawn_io("final", final_work).await },
        )
    };
    owner.block_on(until("both queued", || probe.snapshot().queued == 2));

    store.task_group().cancel();
    let woken = owner
        .block_on(guard("the waiter wakes", ordinary))
        .expect("joins")
        .expect_err("woken by the cancellation");
    assert_eq!(woken.kind(), RuntimeErrorKind::Closed);
    assert_eq!(woken.operation(), RuntimeOperation::BlockingQueueAdmission);
    assert_eq!(
        probe.snapshot().queued,
        1,
        "the lease's waiter stays queued"
    );
    held.open();
    owner
        .block_on(guard("the finalization runs", finalization))
        .expect("joins")
        .expect("a pre-accepted submission is not woken by the cancellation");
    owner.block_on(first).expect("joins").expect("ran");
    assert!(final_ran.load(Ordering::SeqCst));
    assert!(
        !ordinary_ran.load(Ordering::SeqCst),
        "a woken waiter never runs"
    );
}

#[test]
fn a_pre_accepted_lease_allows_only_its_bounded_finalization_io() {
    let (owner, store) = owner(&Lanes::default());
    let storage = store.storage_io();
    let lease = storage
        .try_drain_lease(after(Duration::from_secs(30)), operations(2))
        .expect("open");
    assert_eq!(lease.remaining_operations(), 2);
    store.task_group().cancel();

    // A submission whose closure never runs gives its share back.
    let expired = owner
        .block_on(lease.spawn_io_until("expired", ShutdownDeadline::after(Duration::ZERO), || {}))
        .expect_err("its own deadline passed");
    assert_eq!(expired.kind(), RuntimeErrorKind::TimedOut);
    assert_eq!(lease.remaining_operations(), 2);

    let count = Arc::new(AtomicUsize::new(0));
    for name in ["offsets", "commit-log"] {
        let count = Arc::clone(&count);
        owner
            .block_on(lease.spawn_io(name, move || count.fetch_add(1, Ordering::SeqCst)))
            .expect("within the allowance");
    }
    let rejected_before = storage.snapshot().rejected;
    let (third_ran, third) = ran();
    let exhausted = owner
        .block_on(lease.spawn_io("third", third))
        .expect_err("the allowance is spent");
    assert_eq!(exhausted.kind(), RuntimeErrorKind::CapacityExhausted);
    assert_eq!(
        exhausted.operation(),
        RuntimeOperation::BlockingQueueAdmission
    );
    assert!(!third_ran.load(Ordering::SeqCst));
    assert_eq!(count.load(Ordering::SeqCst), 2);
    assert_eq!(lease.remaining_operations(), 0);
    assert_eq!(storage.snapshot().rejected, rejected_before + 1);
    let ordinary = owner
        .block_on(storage.spawn_io("ordinary", || {}))
        .expect_err("ordinary work stays refused");
    assert_eq!(ordinary.kind(), RuntimeErrorKind::Closed);
}

#[test]
fn root_cancellation_preserves_pre_accepted_finalization() {
    let (owner, store) = owner(&Lanes::default());
    let sibling = owner.root_context().component("sibling");
    let lease = store
        .metadata_io()
        .try_drain_lease(after(Duration::from_secs(30)), operations(1))
        .expect("open");
    // The owner's task shutdown cancels the root (and every scope under it)
    // and installs its deadline; Tokio keeps running.
    let report = owner.block_on(owner.shutdown_tasks_until(after(Duration::from_secs(30))));
    assert!(report.is_healthy());
    for scope in [&store, &sibling] {
        let error = owner
            .block_on(scope.metadata_io().spawn_io("ordinary", || {}))
            .expect_err("root cancellation closes every normal scope");
        assert_eq!(error.kind(), RuntimeErrorKind::Closed);
    }
    let (flushed, flush) = ran();
    owner
        .block_on(lease.spawn_io("flush", flush))
        .expect("pre-accepted finalization survives the root cancellation");
    assert!(flushed.load(Ordering::SeqCst));
}

#[test]
fn a_lease_never_extends_its_deadline() {
    let (owner, store) = owner(&Lanes::default());
    let storage = store.storage_io();
    let expired = storage
        .try_drain_lease(ShutdownDeadline::after(Duration::ZERO), operations(1))
        .expect_err("an expired lease is refused");
    assert_eq!(expired.kind(), RuntimeErrorKind::TimedOut);

    let deadline = after(Duration::from_millis(100));
    let lease = storage
        .try_drain_lease(deadline, operations(2))
        .expect("open");
    assert_eq!(lease.deadline(), deadline);
    // The lane is held past the lease's deadline: a submission asking for
    // an hour still gives up at the lease's deadline.
    let (held, first) = hold(&owner, storage);
    let (late_ran, late) = ran();
    let error = owner
        .block_on(guard(
            "the lease's deadline ends the wait",
            lease.spawn_io_until("asks-for-an-hour", after(Duration::from_secs(3_600)), late),
        ))
        .expect_err("no slot before the lease's deadline");
    assert_eq!(error.kind(), RuntimeErrorKind::TimedOut);
    assert!(deadline.is_expired());
    assert_eq!(lease.remaining_operations(), 2, "the share went back");
    held.open();
    owner.block_on(first).expect("joins").expect("ran");
    // Past its deadline the lease starts nothing, however free the lane.
    let refused = owner
        .block_on(lease.spawn_io("after-the-deadline", || {}))
        .expect_err("past the lease's deadline");
    assert_eq!(refused.kind(), RuntimeErrorKind::TimedOut);
    assert!(!late_ran.load(Ordering::SeqCst));
}

#[test]
fn the_root_shutdown_deadline_bounds_a_pre_accepted_slot() {
    let (owner, store) = owner(&Lanes::default());
    let storage = store.storage_io();
    let lease = storage
        .try_drain_lease(after(Duration::from_secs(3_600)), operations(2))
        .expect("open");
    let (held, first) = hold(&owner, storage);
    // The root's shutdown installs its deadline on the whole tree; the
    // held closure keeps the shutdown waiting until that deadline.
    let root_deadline = after(Duration::from_millis(100));
    let report = owner.block_on(owner.shutdown_tasks_until(root_deadline));
    assert!(root_deadline.is_expired());
    assert!(!report.is_healthy(), "the held closure outlived it");
    let (late_ran, late) = ran();
    let error = owner
        .block_on(lease.spawn_io("after-the-root-deadline", late))
        .expect_err("the root's deadline caps the lease's hour");
    assert_eq!(error.kind(), RuntimeErrorKind::TimedOut);
    assert_eq!(error.operation(), RuntimeOperation::BlockingTaskDeadline);
    assert!(!late_ran.load(Ordering::SeqCst));
    assert_eq!(lease.remaining_operations(), 2);
    held.open();
    owner.block_on(first).expect("joins").expect("ran");
}

#[test]
fn a_finalization_slot_waits_for_queue_capacity_released_by_a_closing_scope() {
    // One storage slot and a queue of one place, both taken by a sibling.
    let (owner, store) = owner(&Lanes {
        storage: (1, 1),
        ..Lanes::default()
    });
    let sibling = owner.root_context().component("sibling");
    let lease = Arc::new(
        store
            .storage_io()
            .try_drain_lease(after(Duration::from_secs(30)), operations(1))
            .expect("open"),
    );
    let (held, first) = hold(&owner, sibling.storage_io());
    let (queued_ran, queued_work) = ran();
    let queued = submit_task(&owner, sibling.storage_io(), "queued", queued_work);
    let probe = store.storage_io().clone();
    owner.block_on(until("the queue is full", || probe.snapshot().queued == 1));
    let full = owner
        .block_on(store.storage_io().spawn_io("ordinary", || {}))
        .expect_err("an ordinary submission is refused at once");
    assert_eq!(full.kind(), RuntimeErrorKind::CapacityExhausted);

    let (final_ran, final_work) = ran();
    let finalization = {
        let lease = Arc::clone(&lease);
        spawn_on(
            &owner,
            async move { lease.spawn_io("final", final_work).await },
        )
    };
    // The finalization waits for room (it is neither refused nor queued).
    owner.block_on(until("the finalization waits", || {
        probe.snapshot().tasks.len() == 3
    }));
    assert_eq!(probe.snapshot().queued, 1);
    assert!(!finalization.is_finished());

    // The sibling closes: its queued waiter leaves and frees the place.
    sibling.task_group().cancel();
    let woken = owner.block_on(queued).expect("joins").expect_err("closed");
    assert_eq!(woken.kind(), RuntimeErrorKind::Closed);
    owner.block_on(until("the finalization queued", || {
        probe.snapshot().queued == 1
    }));
    held.open();
    owner
        .block_on(guard("the finalization runs", finalization))
        .expect("joins")
        .expect("ran after the held closure");
    owner.block_on(first).expect("joins").expect("ran");
    assert!(final_ran.load(Ordering::SeqCst));
    assert!(!queued_ran.load(Ordering::SeqCst));
}

#[test]
fn the_allowance_is_shared_across_concurrent_submissions() {
    let (owner, store) = owner(&Lanes {
        capacity: 4,
        storage: (4, 16),
        ..Lanes::default()
    });
    let lease = Arc::new(
        store
            .storage_io()
            .try_drain_lease(after(Duration::from_secs(30)), operations(3))
            .expect("open"),
    );
    store.task_group().cancel();
    let ran_count = Arc::new(AtomicUsize::new(0));
    let results: Vec<RuntimeResult<()>> = owner.block_on(async {
        let submissions = (0..8).map(|index| {
            let lease: Arc<BlockingDrainLease> = Arc::clone(&lease);
            let ran_count = Arc::clone(&ran_count);
            tokio::spawn(async move {
                lease
                    .spawn_io(format!("flush-{index}"), move || {
                        ran_count.fetch_add(1, Ordering::SeqCst);
                    })
                    .await
            })
        });
        futures::future::join_all(submissions)
            .await
            .into_iter()
            .map(|joined| joined.expect("joins"))
            .collect()
    });
    let accepted = results.iter().filter(|result| result.is_ok()).count();
    let exhausted = results
        .iter()
        .filter_map(|result| result.as_ref().err())
        .filter(|error| error.kind() == RuntimeErrorKind::CapacityExhausted)
        .count();
    assert_eq!((accepted, exhausted), (3, 5));
    assert_eq!(ran_count.load(Ordering::SeqCst), 3);
    assert_eq!(lease.remaining_operations(), 0);
}
