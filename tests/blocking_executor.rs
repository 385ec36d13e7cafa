//! Blocking lanes and isolated executors (`src/blocking/admission.rs`,
//! `src/blocking/executor.rs`, `src/blocking/table.rs`). Closures are held
//! and released through explicit gates; waits for a state are polled under
//! a hang guard, never slept.

mod support;

#[path = "support/blocking.rs"]
mod blocking;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use blocking::{gate, owner, submit_task, until, Lanes};
use rocketmq_runtime::{
    BlockingExecutor, BlockingKind, BlockingPoolPolicy, BlockingTaskState, CanonicalCondition,
    RuntimeConfig, RuntimeErrorContext, RuntimeErrorKind, RuntimeOperation, ShutdownDeadline,
    TaskKind,
};

/// Seeded randomized mix over three lanes: the global running count never
/// exceeds the capacity and no lane exceeds its ceiling.
#[test]
fn random_mixes_never_exceed_global_or_lane_limits() {
    let lanes = Lanes {
        capacity: 4,
        storage: (3, 64),
        metadata: (2, 64),
        cpu: (2, 64),
        ..Lanes::default()
    };
    let (owner, store) = owner(&lanes);
    let executors = [store.storage_io(), store.metadata_io(), store.cpu_crypto()];
    let ceilings = [3, 2, 2];
    let running: Arc<[AtomicUsize; 4]> = Arc::new(Default::default());
    let peaks: Arc<[AtomicUsize; 4]> = Arc::new(Default::default());
    let mut seed = 0x9E37_79B9_7F4A_7C15_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..1_000 {
        let jobs: Vec<usize> = (0..1 + next() % 8).map(|_| (next() % 3) as usize).collect();
        owner.block_on({
            let running = Arc::clone(&running);
            let peaks = Arc::clone(&peaks);
            async move {
                let calls = jobs.into_iter().map(|lane| {
                    let running = Arc::clone(&running);
                    let peaks = Arc::clone(&peaks);
                    let executor = executors[lane].clone();
                    async move {
                        executor
                            .spawn_io("mix", move || {
                                for slot in [lane, 3] {
                                    let now = running[slot].fetch_add(1, Ordering::SeqCst) + 1;
                                    peaks[slot].fetch_max(now, Ordering::SeqCst);
                                }
                                std::thread::yield_now();
                                for slot in [lane, 3] {
                                    running[slot].fetch_sub(1, Ordering::SeqCst);
                                }
                            })
                            .await
                    }
                });
                for result in futures::future::join_all(calls).await {
                    result.expect("admitted");
                }
            }
        });
    }
    assert!(peaks[3].load(Ordering::SeqCst) <= lanes.capacity);
    for lane in 0..3 {
        assert!(
            peaks[lane].load(Ordering::SeqCst) <= ceilings[lane],
            "lane {lane}"
        );
    }
    assert!(peaks[3].load(Ordering::SeqCst) >= 2, "the mix did overlap");
    for executor in &executors {
        let snapshot = executor.snapshot();
        assert_eq!((snapshot.global_running, snapshot.queued), (0, 0));
    }
}

/// A saturated lane starts its waiters in arrival order.
#[test]
fn one_lane_starts_its_waiters_in_arrival_order() {
    let (owner, store) = owner(&Lanes::default());
    let storage = store.storage_io();
    let (held, work) = gate();
    let first = submit_task(&owner, storage, "held", work);
    held.wait_started();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut queued = Vec::new();
    for index in 0..5 {
        let order = Arc::clone(&order);
        queued.push(submit_task(&owner, storage, "queued", move || {
            order.lock().expect("unpoisoned").push(index);
        }));
        let storage = storage.clone();
        owner.block_on(until("queued", move || {
            storage.snapshot().queued == index + 1
        }));
    }
    held.open();
    owner.block_on(async move {
        first.await.expect("joins").expect("ran");
        for task in queued {
            task.await.expect("joins").expect("ran");
        }
    });
    assert_eq!(*order.lock().expect("unpoisoned"), [0, 1, 2, 3, 4]);
}

/// Capacity 3, storage borrows all of it; a storage waiter arrives before
/// a metadata waiter, yet the freed slot goes to metadata (below its
/// reservation).
#[test]
fn a_lane_below_its_reservation_is_served_before_a_borrower() {
    let lanes = Lanes {
        capacity: 3,
        storage: (3, 8),
        ..Lanes::default()
    };
    let (owner, store) = owner(&lanes);
    let storage = store.storage_io();
    let metadata = store.metadata_io();
    let mut gates = Vec::new();
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let (held, work) = gate();
        tasks.push(submit_task(&owner, storage, "borrower", work));
        held.wait_started();
        gates.push(held);
    }
    assert_eq!(storage.snapshot().lane_borrowed, 2);
    let storage_started = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&storage_started);
    tasks.push(submit_task(&owner, storage, "late-borrower", move || {
        flag.store(true, Ordering::SeqCst);
    }));
    let probe = storage.clone();
    owner.block_on(until("storage queued", move || {
        probe.snapshot().queued == 1
    }));
    let (metadata_gate, work) = gate();
    tasks.push(submit_task(&owner, metadata, "owed", work));
    let probe = metadata.clone();
    owner.block_on(until("metadata queued", move || {
        probe.snapshot().queued == 1
    }));
    gates.remove(0).open();
    metadata_gate.wait_started();
    assert!(
        !storage_started.load(Ordering::SeqCst),
        "the borrower waits"
    );
    assert_eq!(storage.snapshot().queued, 1);
    metadata_gate.open();
    for held in gates {
        held.open();
    }
    owner.block_on(async move {
        for task in tasks {
            task.await.expect("joins").expect("ran");
        }
    });
    assert!(storage_started.load(Ordering::SeqCst));
}

/// A caller that times out gets `TimedOut`; the closure keeps running and
/// keeps its slot (`TimedOutStillRunning`), a new submission waits for
/// that slot, and once the closure exits everything is free.
#[test]
fn a_timed_out_caller_leaves_the_closure_running_with_its_slot() {
    let lanes = Lanes {
        task_timeout: Duration::from_millis(50),
        ..Lanes::default()
    };
    let (owner, store) = owner(&lanes);
    let storage = store.storage_io();
    let (held, work) = gate();
    let error = owner
        .block_on(storage.spawn_io("slow-fsync", work))
        .expect_err("the caller times out");
    assert_eq!(error.kind(), RuntimeErrorKind::TimedOut);
    assert_eq!(error.operation(), RuntimeOperation::BlockingTaskDeadline);
    held.wait_started();
    let snapshot = storage.snapshot();
    assert_eq!(snapshot.timed_out_still_running, 1);
    assert_eq!((snapshot.running, snapshot.lane_running), (0, 1));
    assert_eq!(snapshot.blocking_still_running, 1);
    assert_eq!(
        snapshot.tasks[0].state,
        BlockingTaskState::TimedOutStillRunning
    );
    let ran = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&ran);
    let next = submit_task(&owner, storage, "next", move || {
        flag.store(true, Ordering::SeqCst);
    });
    let probe = storage.clone();
    owner.block_on(until("next queued", move || probe.snapshot().queued == 1));
    assert!(!ran.load(Ordering::SeqCst), "the slot is still taken");
    held.open();
    owner.block_on(async move { next.await.expect("joins").expect("ran") });
    assert!(ran.load(Ordering::SeqCst));
    let snapshot = storage.snapshot();
    assert_eq!(
        (
            snapshot.blocking_still_running,
            snapshot.global_running,
            snapshot.tasks.len()
        ),
        (0, 0, 0)
    );
}

#[test]
fn refusals_full_queue_long_running_expired_deadline_and_dropped_waiters() {
    let lanes = Lanes {
        storage: (1, 1),
        ..Lanes::default()
    };
    let (owner, store) = owner(&lanes);
    let storage = store.storage_io();
    let (held, work) = gate();
    let first = submit_task(&owner, storage, "held", work);
    held.wait_started();
    let queued = submit_task(&owner, storage, "queued", || {});
    let probe = storage.clone();
    owner.block_on(until("queued", move || probe.snapshot().queued == 1));
    // Full queue: refused at once.
    let error = owner
        .block_on(storage.spawn_io("overflow", || {}))
        .expect_err("queue full");
    assert_eq!(error.kind(), RuntimeErrorKind::CapacityExhausted);
    assert_eq!(error.operation(), RuntimeOperation::BlockingQueueAdmission);
    // LongRunning: always refused.
    let error = owner
        .block_on(
            store
                .cpu_crypto()
                .spawn("loop", BlockingKind::LongRunning, || {}),
        )
        .expect_err("long running");
    assert_eq!(error.kind(), RuntimeErrorKind::Unsupported);
    assert_eq!(error.condition(), CanonicalCondition::Unimplemented);
    assert_eq!(store.cpu_crypto().snapshot().rejected, 1);
    assert_eq!(storage.snapshot().rejected, 1);
    // A queued submission whose caller is dropped leaves no record.
    queued.abort();
    let probe = storage.clone();
    owner.block_on(until("withdrawn", move || probe.snapshot().queued == 0));
    held.open();
    owner.block_on(async move { first.await.expect("joins").expect("ran") });
    // A deadline that passed before the start: the closure never runs.
    let ran = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&ran);
    let error = owner
        .block_on(storage.spawn_io_until(
            "late",
            ShutdownDeadline::after(Duration::ZERO),
            move || flag.store(true, Ordering::SeqCst),
        ))
        .expect_err("expired");
    assert_eq!(error.kind(), RuntimeErrorKind::TimedOut);
    assert!(!ran.load(Ordering::SeqCst));
    let snapshot = storage.snapshot();
    assert_eq!((snapshot.global_running, snapshot.tasks.len()), (0, 0));
}

/// A closing scope refuses new work and wakes its queued waiters with
/// `Closed`; a sibling scope's executor still works.
#[test]
fn a_cancelled_scope_refuses_and_wakes_its_queue() {
    let (owner, store) = owner(&Lanes::default());
    let storage = store.storage_io();
    let sibling = owner
        .root_context()
        .component("sibling")
        .storage_io()
        .clone();
    let (held, work) = gate();
    let first = submit_task(&owner, storage, "held", work);
    held.wait_started();
    let ran = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&ran);
    let queued = submit_task(&owner, storage, "queued", move || {
        flag.store(true, Ordering::SeqCst);
    });
    let probe = storage.clone();
    owner.block_on(until("queued", move || probe.snapshot().queued == 1));
    store.task_group().cancel();
    let error = owner
        .block_on(async move { queued.await.expect("joins") })
        .expect_err("woken closed");
    assert_eq!(error.kind(), RuntimeErrorKind::Closed);
    let error = owner
        .block_on(storage.spawn_io("after", || {}))
        .expect_err("closed scope");
    assert_eq!(error.kind(), RuntimeErrorKind::Closed);
    held.open();
    owner.block_on(async move { first.await.expect("joins").expect("ran") });
    assert!(!ran.load(Ordering::SeqCst), "a woken waiter never runs");
    owner
        .block_on(sibling.spawn_io("sibling", || {}))
        .expect("the sibling scope is open");
}

/// The owner shuts down while a closure runs: the report shows it and is
/// unhealthy; after the closure exits a fresh snapshot shows 0.
#[test]
fn a_closure_outliving_the_shutdown_makes_the_owner_report_unhealthy() {
    let (owner, store) = owner(&Lanes::default());
    let storage = store.storage_io();
    let (held, work) = gate();
    let caller = storage.clone();
    let cancelled = store.task_group().cancellation_token();
    store
        .spawn("flush", TaskKind::Worker, async move {
            tokio::select! {
                () = cancelled.cancelled() => {}
                _ = caller.spawn_io("flush-segment", work) => {}
            }
        })
        .expect("open");
    held.wait_started();
    let report = owner
        .shutdown_runtime_blocking_with_timeout(Duration::from_millis(200))
        .expect("outside Tokio");
    assert_eq!(report.blocking_still_running, 1, "{}", report.to_json());
    assert_eq!(report.blocking_tasks.len(), 1, "counted once");
    assert!(!report.is_healthy());
    assert!(report
        .blocking_tasks
        .iter()
        .any(|task| &*task.name == "flush-segment"));
    assert_eq!(
        report.children[0].timed_out, 0,
        "the caller observed cancellation"
    );
    held.open();
    // The runtime is gone: wait on another one (hang-guarded) for the
    // closure to exit.
    let waiter = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a waiting runtime");
    let probe = storage.clone();
    waiter.block_on(until("the closure exits", move || {
        probe.snapshot().blocking_still_running == 0
    }));
    assert_eq!(storage.snapshot().global_running, 0);
}

#[test]
fn isolated_executors_stop_and_shut_down_on_their_own() {
    let (owner, store) = owner(&Lanes::default());
    let policy = BlockingPoolPolicy {
        name: "isolated".to_owned(),
        max_concurrency: 1,
        max_queue_depth: 4,
        ..BlockingPoolPolicy::default()
    };
    let isolated =
        BlockingExecutor::new_isolated(policy.clone(), store.task_group().clone()).expect("valid");
    let sibling = BlockingExecutor::new(policy, store.task_group().clone()).expect("valid");
    let (held, work) = gate();
    let running = submit_task(&owner, &isolated, "held", work);
    held.wait_started();
    let ran = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&ran);
    let queued = submit_task(&owner, &isolated, "queued", move || {
        flag.store(true, Ordering::SeqCst);
    });
    let probe = isolated.clone();
    owner.block_on(until("queued", move || probe.snapshot().queued == 1));
    isolated.clone().stop_admission().expect("isolated");
    let error = owner
        .block_on(async move { queued.await.expect("joins") })
        .expect_err("woken closed");
    assert_eq!(error.kind(), RuntimeErrorKind::Closed);
    let report = owner
        .block_on(isolated.shutdown_until(ShutdownDeadline::after(Duration::from_millis(50))))
        .expect("isolated");
    assert!(!report.completed);
    assert_eq!(report.pending_operations, 1);
    assert_eq!(report.snapshot.running, 1);
    owner
        .block_on(sibling.spawn_io("sibling", || {}))
        .expect("a sibling executor is unaffected");
    held.open();
    owner.block_on(async move { running.await.expect("joins").expect("ran") });
    let report = owner
        .block_on(isolated.shutdown_until(ShutdownDeadline::after(Duration::from_secs(30))))
        .expect("isolated");
    assert!(report.completed, "the retry succeeds");
    assert_eq!(report.pending_operations, 0);
    assert!(!ran.load(Ordering::SeqCst), "a stopped waiter never runs");
    let error = store
        .storage_io()
        .stop_admission()
        .expect_err("managed lane");
    assert_eq!(error.kind(), RuntimeErrorKind::Unsupported);
    assert_eq!(
        error.operation(),
        RuntimeOperation::ShutdownBlockingExecutor
    );
    assert!(
        store.task_group().lifecycle_state() == rocketmq_runtime::TaskGroupLifecycleState::Open
    );
}

/// Closures run on the owner's blocking pool even when the submission is
/// polled on another runtime, and large results arrive intact.
#[test]
fn closures_run_on_the_owner_runtime() {
    let (owner, store) = owner(&Lanes::default());
    let storage = store.storage_io();
    let other = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("another runtime");
    let thread_name = other
        .block_on(storage.spawn_io("where", || std::thread::current().name().map(str::to_owned)))
        .expect("ran");
    assert_eq!(thread_name.as_deref(), Some("blocking"));
    let big = other
        .block_on(storage.spawn_io("big", || [7u8; 64 * 1024]))
        .expect("ran");
    assert!(big.iter().all(|byte| *byte == 7));
    let future = storage.spawn_io("capture", {
        let capture = [1u8; 64 * 1024];
        move || capture.len()
    });
    assert!(
        std::mem::size_of_val(&future) < 4 * 1024,
        "the closure is boxed"
    );
    assert_eq!(other.block_on(future).expect("ran"), 64 * 1024);
    drop(owner);
}

/// A panicking closure still releases its slot and record; a queue wait
/// that runs out is `TimedOut` at admission; refusals of a closed scope
/// carry the `Unavailable` condition; an isolated executor's running
/// closure counts in the tree owner's report.
#[test]
fn panics_queue_timeouts_conditions_and_isolated_evidence() {
    let lanes = Lanes {
        queue_timeout: Duration::from_millis(50),
        ..Lanes::default()
    };
    let (owner, store) = owner(&lanes);
    let storage = store.storage_io();
    let error = owner
        .block_on(storage.spawn_io("panics", || panic!("closure failed")))
        .expect_err("a join error");
    assert_eq!(error.operation(), RuntimeOperation::RunBlockingTask);
    let snapshot = storage.snapshot();
    assert_eq!((snapshot.global_running, snapshot.tasks.len()), (0, 0));
    let (held, work) = gate();
    let running = submit_task(&owner, storage, "held", work);
    held.wait_started();
    let error = owner
        .block_on(storage.spawn_io("waits-too-long", || {}))
        .expect_err("no slot in time");
    assert_eq!(error.kind(), RuntimeErrorKind::TimedOut);
    assert_eq!(error.operation(), RuntimeOperation::BlockingQueueAdmission);
    assert_eq!(storage.snapshot().queued, 0, "the timed-out waiter left");
    held.open();
    owner.block_on(async move { running.await.expect("joins").expect("ran") });

    let isolated = BlockingExecutor::new_isolated(
        BlockingPoolPolicy {
            name: "isolated".to_owned(),
            ..BlockingPoolPolicy::default()
        },
        store.task_group().clone(),
    )
    .expect("valid");
    let (held, work) = gate();
    let cancelled = store.task_group().cancellation_token();
    let caller = isolated.clone();
    store
        .spawn("isolated-caller", TaskKind::Worker, async move {
            tokio::select! {
                () = cancelled.cancelled() => {}
                _ = caller.spawn_io("isolated-work", work) => {}
            }
        })
        .expect("open");
    held.wait_started();
    store.task_group().cancel();
    let error = owner
        .block_on(storage.spawn_io("after-cancel", || {}))
        .expect_err("closed scope");
    assert_eq!(error.condition(), CanonicalCondition::Unavailable);
    let report = owner
        .shutdown_runtime_blocking_with_timeout(Duration::from_millis(200))
        .expect("outside Tokio");
    assert_eq!(report.blocking_still_running, 1, "{}", report.to_json());
    assert_eq!(&*report.blocking_tasks[0].name, "isolated-work");
    held.open();
}

/// A managed submission admitted by its lane can still wait in Tokio's
/// blocking pool when isolated executors fill it. If its operation deadline
/// passes before a pool thread picks it up, the closure never runs
/// (`src/blocking/executor.rs`, invariant 1): the caller gets `TimedOut`
/// and the record goes away.
#[test]
fn a_closure_that_reaches_a_pool_thread_after_its_deadline_never_runs() {
    let lanes = Lanes::default();
    let (owner, store) = owner(&lanes);
    // Fill every Tokio blocking thread (capacity 3 + headroom 2) through an
    // isolated executor, which the managed capacity does not count.
    let isolated = BlockingExecutor::new_isolated(
        BlockingPoolPolicy {
            name: "bulk".to_owned(),
            max_concurrency: 16,
            max_queue_depth: 16,
            ..BlockingPoolPolicy::default()
        },
        store.task_group().clone(),
    )
    .expect("valid");
    let mut config = RuntimeConfig::for_parallelism("blocking", 2);
    config.max_blocking_threads = lanes.capacity;
    let pool = config.tokio_blocking_threads();
    let mut held = Vec::new();
    let mut running = Vec::new();
    for _ in 0..pool {
        let (gate, work) = gate();
        running.push(submit_task(&owner, &isolated, "bulk", work));
        gate.wait_started();
        held.push(gate);
    }
    let ran = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&ran);
    let storage = store.storage_io();
    let error = owner
        .block_on(storage.spawn_io_until(
            "late",
            ShutdownDeadline::after(Duration::from_millis(100)),
            move || flag.store(true, Ordering::SeqCst),
        ))
        .expect_err("no pool thread before the deadline");
    assert_eq!(error.kind(), RuntimeErrorKind::TimedOut);
    for gate in held {
        gate.open();
    }
    for task in running {
        owner
            .block_on(async move { task.await.expect("joins") })
            .expect("ran");
    }
    let probe = storage.clone();
    owner.block_on(until("the late job is picked up and dropped", move || {
        probe.snapshot().blocking_still_running == 0 && probe.snapshot().queued == 0
    }));
    assert!(!ran.load(Ordering::SeqCst), "started after its deadline");
}

/// An ordinary `spawn_until` with a far deadline is capped by the scope's
/// installed shutdown deadline (`src/blocking/executor.rs`, invariant 1).
/// The lane is full, a 1 s deadline is installed on the scope (still open:
/// the shutdown future is dropped unpolled), and the submission with an
/// hour's deadline times out at 1 s, before the lane's 5 s queue timeout,
/// without running.
///
/// ```text
/// t=0       lane full; scope deadline 1 s installed; spawn_until(1 h) queued
/// t=999ms   still queued
/// t=1s      TimedOut, the closure never ran
/// ```
///
/// Paused time does not advance by itself while blocking closures run, so
/// the test advances it.
#[tokio::test(start_paused = true)]
async fn an_ordinary_spawn_until_is_capped_by_the_scope_deadline() {
    let ctx = support::harness("scope-capped");
    let scope = ctx.service_context("scope");
    let lane = scope.storage_io().clone();
    let slots = lane.policy().max_concurrency;
    assert!(lane.policy().queue_timeout > Duration::from_secs(1));
    let mut gates = Vec::new();
    for _ in 0..slots {
        let (held, work) = gate();
        let lane = lane.clone();
        let task = tokio::spawn(async move { lane.spawn_io("held", work).await });
        // Yields (never idles) until it runs.
        until("the held closure starts", || {
            held.started.try_recv().is_ok()
        })
        .await;
        gates.push((held, task));
    }
    drop(
        scope
            .task_group()
            .shutdown_until(ShutdownDeadline::after(Duration::from_secs(1))),
    );
    assert_eq!(
        scope.task_group().lifecycle_state(),
        rocketmq_runtime::TaskGroupLifecycleState::Open,
        "only the deadline is installed"
    );
    let ran = Arc::new(AtomicBool::new(false));
    let submission = {
        let (lane, ran) = (lane.clone(), Arc::clone(&ran));
        tokio::spawn(async move {
            lane.spawn_until(
                "capped",
                BlockingKind::ShortIo,
                ShutdownDeadline::after(Duration::from_secs(3_600)),
                move || ran.store(true, Ordering::SeqCst),
            )
            .await
        })
    };
    until("the submission is queued", || lane.snapshot().queued == 1).await;
    tokio::time::advance(Duration::from_millis(999)).await;
    assert!(
        !submission.is_finished(),
        "still queued before the scope deadline"
    );
    tokio::time::advance(Duration::from_millis(1)).await;
    // The expiry wakes it at once; a bounded number of yields (not a wait
    // in time) lets it finish, so a missing cap fails here, not by hanging.
    for _ in 0..1_000 {
        if submission.is_finished() {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(
        submission.is_finished(),
        "timed out at the scope's 1 s deadline"
    );
    let error = submission
        .await
        .expect("joined")
        .expect_err("capped by the scope deadline");
    assert_eq!(error.kind(), RuntimeErrorKind::TimedOut);
    assert!(!ran.load(Ordering::SeqCst), "never started");
    for (held, task) in gates {
        held.open();
        task.await.expect("joined").expect("ran");
    }
    let report = ctx.shutdown_tasks(Duration::from_secs(5)).await;
    assert!(report.is_healthy(), "{}", report.to_json());
}

/// Starts `submitters` storage-lane submissions that block until the write
/// guard is dropped, on an owner planned for 2 CPUs with the storage lane's
/// queue depth `depth` (`None`: the default), and returns the refusals once
/// every submission is running, queued or refused.
fn storage_lane_under(
    submitters: usize,
    depth: Option<usize>,
) -> Vec<rocketmq_runtime::RuntimeError> {
    let mut config = RuntimeConfig::for_parallelism("sizing", 2);
    if let Some(depth) = depth {
        config.blocking_lane_policies.storage_io.max_queue_depth = depth;
    }
    let owner = rocketmq_runtime::RuntimeOwner::plan(config)
        .expect("valid configuration")
        .build()
        .expect("runtime builds");
    let broker = owner.root_context().component("broker");
    let storage = broker.storage_io();
    let held = Arc::new(std::sync::RwLock::new(()));
    let closed = held.write().expect("unpoisoned");
    let refusals = Arc::new(Mutex::new(Vec::new()));
    let admitted: Vec<_> = (0..submitters)
        .map(|_| {
            let storage = storage.clone();
            let held = Arc::clone(&held);
            let refusals = Arc::clone(&refusals);
            blocking::spawn_on(&owner, async move {
                let outcome = storage
                    .spawn_io("write", move || drop(held.read().expect("unpoisoned")))
                    .await;
                if let Err(error) = outcome {
                    refusals.lock().expect("unpoisoned").push(error);
                }
            })
        })
        .collect();
    let policy = RuntimeConfig::for_parallelism("sizing", 2)
        .blocking_lane_policies
        .storage_io;
    let room = policy.max_concurrency + depth.unwrap_or(policy.max_queue_depth);
    let probe = (storage.clone(), Arc::clone(&refusals));
    owner.block_on(until("every submission settled in the lane", move || {
        let snapshot = probe.0.snapshot();
        let refused = probe.1.lock().expect("unpoisoned").len();
        snapshot.running + snapshot.queued + refused == submitters
    }));
    assert!(storage.snapshot().running + storage.snapshot().queued <= room);
    drop(closed);
    for task in admitted {
        owner.block_on(task).expect("submitter");
    }
    let refusals = std::mem::take(&mut *refusals.lock().expect("unpoisoned"));
    refusals
}

/// The sizing rule the defaults document: the storage lane planned for 2
/// CPUs runs 8 closures and queues 32, so of 64 concurrent submitters 24
/// are refused at once with `CapacityExhausted`, and the refusal names the
/// lane, its limits and the setting to raise; a queue depth of
/// `submitters - max_concurrency` admits them all.
#[test]
fn the_default_storage_lane_refuses_submitters_beyond_its_slots_and_queue_and_names_the_setting() {
    let policy = RuntimeConfig::for_parallelism("sizing", 2)
        .blocking_lane_policies
        .storage_io;
    assert_eq!((policy.max_concurrency, policy.max_queue_depth), (8, 32));
    let refusals = storage_lane_under(64, None);
    assert_eq!(refusals.len(), 64 - 8 - 32);
    for refusal in &refusals {
        assert_eq!(refusal.kind(), RuntimeErrorKind::CapacityExhausted);
        assert_eq!(
            refusal.operation(),
            RuntimeOperation::BlockingQueueAdmission
        );
        assert!(matches!(
            refusal.context(),
            Some(RuntimeErrorContext::LaneFull {
                lane: "storage-io",
                max_concurrency: 8,
                max_queue_depth: 32,
                ..
            })
        ));
        let message = refusal.to_string();
        assert!(
            message.contains("scope sizing/broker, lane storage-io full (8 running, 32 waiting): raise RuntimeConfig::blocking_lane_policies.storage_io.max_queue_depth"),
            "{message}"
        );
    }
    assert!(storage_lane_under(64, Some(64 - 8)).is_empty());
}
