//! The metadata actor (`src/metadata_io/actor.rs`): admission, coalescing,
//! fairness, honest commit outcomes, budget charging and shutdown. Writes
//! go through a recording file system whose calls can be held at a gate or
//! fail.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rocketmq_runtime::{
    MetadataDeadline, MetadataFileSystem, MetadataGeneration, MetadataIoAdmissionOutcome,
    MetadataIoCommitOutcome, MetadataIoConfig, MetadataWriteRequest, RuntimeErrorKind,
    RuntimeOperation, RuntimeResult,
};

#[path = "support/metadata.rs"]
mod metadata;

use metadata::{accepted, actor, hold_first_write, owner, payload, request, soon, RecordingFs};

/// With the first write held, 1,000 submissions to one resource produce at
/// most 2 further writes, and every waiter resolves to a generation ≥ its own.
#[test]
fn coalescing_writes_at_most_two_more_generations() {
    let (owner, broker) = owner(None);
    let fs = Arc::new(RecordingFs::default());
    let actor = actor(&broker, &fs, 1);
    let (release, first) = hold_first_write(&owner, &fs, &actor, request("offsets", 1, 64));
    let receipts: Vec<_> = (2..=1_001)
        .map(|generation| accepted(actor.submit(request("offsets", generation, 64), soon())))
        .collect();
    let snapshot = actor.snapshot();
    assert_eq!(snapshot.pending_operations, 2, "one in flight, one queued");
    release.send(()).expect("held write");
    let resolved = owner.block_on(async move {
        let mut resolved = vec![first.wait_until(soon()).await.expect("durable")];
        for receipt in receipts {
            let own = receipt.generation();
            let durable = receipt.wait_until(soon()).await.expect("durable");
            assert!(durable >= own, "{durable:?} < {own:?}");
            resolved.push(durable);
        }
        resolved
    });
    assert_eq!(resolved.len(), 1_001);
    let writes = fs.writes();
    assert!(writes.len() <= 3, "{} writes", writes.len());
    assert_eq!(
        writes.last().map(|(_, generation)| *generation),
        Some(1_001)
    );
    assert_eq!(
        owner
            .root_context()
            .process_budget()
            .snapshot()
            .current_bytes,
        0
    );
}

/// A hot resource submitting continuously does not delay a cold one by
/// more than one hot write: hot-1, cold-1, hot-latest.
#[test]
fn a_cold_resource_is_not_starved_behind_a_hot_one() {
    let (owner, broker) = owner(None);
    let fs = Arc::new(RecordingFs::default());
    let actor = actor(&broker, &fs, 1);
    let (release, hot) = hold_first_write(&owner, &fs, &actor, request("hot", 1, 64));
    let mut receipts = vec![hot];
    for generation in 2..=50 {
        receipts.push(accepted(
            actor.submit(request("hot", generation, 64), soon()),
        ));
        if generation == 10 {
            receipts.push(accepted(actor.submit(request("cold", 1, 64), soon())));
        }
    }
    release.send(()).expect("held write");
    owner.block_on(async move {
        for receipt in receipts {
            receipt.wait_until(soon()).await.expect("durable");
        }
    });
    let order: Vec<String> = fs
        .writes()
        .into_iter()
        .map(|(path, generation)| {
            format!(
                "{}-{generation}",
                path.file_stem().and_then(|s| s.to_str()).unwrap_or("")
            )
        })
        .collect();
    assert_eq!(order, ["hot-1", "cold-1", "hot-50"]);
}

#[test]
fn admission_rules() {
    let (owner, broker) = owner(None);
    let fs = Arc::new(RecordingFs::default());
    let actor = actor(&broker, &fs, 1);
    let error = actor
        .submit(request("a", 1, 8), MetadataDeadline::after(Duration::ZERO))
        .expect_err("expired");
    assert_eq!(error.kind(), RuntimeErrorKind::TimedOut);
    assert_eq!(error.operation(), RuntimeOperation::AdmitMetadataSnapshot);
    let receipt = accepted(actor.submit(request("a", 5, 8), soon()));
    owner.block_on(async { receipt.wait_until(soon()).await.expect("durable") });
    // An older generation resolves at once to the durable one.
    let old = accepted(actor.submit(request("a", 3, 8), soon()));
    let durable = owner.block_on(async { old.wait_until(soon()).await.expect("durable") });
    assert_eq!(durable, MetadataGeneration::new(5));
    // Another resource at this target is a conflict (the registry keeps
    // `a`'s history here; moving `a` itself is covered by
    // `a_resource_moves_target_only_without_pending_work`).
    let squatter = MetadataWriteRequest::new("b", 1u64, "/tmp/rocketmq-test/a.json", payload(1, 8));
    assert!(matches!(
        actor.submit(squatter, soon()).expect("answered"),
        MetadataIoAdmissionOutcome::TargetConflict(_)
    ));
    actor.stop_admission();
    let error = actor
        .submit(request("a", 9, 8), soon())
        .expect_err("stopped");
    assert_eq!(error.kind(), RuntimeErrorKind::Closed);
    assert_eq!(error.operation(), RuntimeOperation::MetadataIoClosed);
    let profile = actor.effective_profile();
    assert_eq!(profile.actor_limits.max_concurrent_writes, 1);
    assert_eq!(profile.actor_limits.max_waiters, 4 * 1_024);
}

/// A failure before the rename is `FailedBeforeCommit` and advances
/// nothing; the next submission succeeds once the fault clears. A failure
/// at the parent sync is `CommitOutcomeUnknown` and fences the target.
#[test]
fn commit_outcomes_are_honest() {
    let (owner, broker) = owner(None);
    let fs = Arc::new(RecordingFs::default());
    let actor = actor(&broker, &fs, 1);
    for step in [
        RuntimeOperation::MetadataCreateTemporary,
        RuntimeOperation::MetadataWriteTemporary,
        RuntimeOperation::MetadataSyncTemporary,
        RuntimeOperation::MetadataReplaceTarget,
    ] {
        *fs.fail_with.lock().expect("unpoisoned") = Some(step);
        let receipt = accepted(actor.submit_next(
            "state",
            "/tmp/rocketmq-test/state.json",
            payload(0, 16),
            soon(),
        ));
        let outcome =
            owner.block_on(async { receipt.wait_until_outcome(soon()).await.expect("settled") });
        match outcome {
            MetadataIoCommitOutcome::FailedBeforeCommit(error) => {
                assert_eq!(error.operation(), step)
            }
            other => panic!("unexpected {other:?}"),
        }
        let snapshot = actor.snapshot();
        assert_eq!(
            snapshot.resources[0].durable_generation, None,
            "nothing published"
        );
        *fs.fail_with.lock().expect("unpoisoned") = None;
    }
    let receipt = accepted(actor.submit_next(
        "state",
        "/tmp/rocketmq-test/state.json",
        payload(0, 16),
        soon(),
    ));
    let durable = owner.block_on(async { receipt.wait_until(soon()).await.expect("clears") });
    assert_eq!(
        actor.snapshot().resources[0].durable_generation,
        Some(durable)
    );
    *fs.fail_with.lock().expect("unpoisoned") = Some(RuntimeOperation::MetadataSyncParent);
    let receipt = accepted(actor.submit_next(
        "state",
        "/tmp/rocketmq-test/state.json",
        payload(0, 16),
        soon(),
    ));
    let outcome =
        owner.block_on(async { receipt.wait_until_outcome(soon()).await.expect("settled") });
    assert!(matches!(
        outcome,
        MetadataIoCommitOutcome::CommitOutcomeUnknown(_)
    ));
    let error = actor
        .submit_next(
            "state",
            "/tmp/rocketmq-test/state.json",
            payload(0, 16),
            soon(),
        )
        .expect_err("fenced");
    assert_eq!(error.kind(), RuntimeErrorKind::ContextUnavailable);
    assert_eq!(error.operation(), RuntimeOperation::MetadataResourceTarget);
}

/// With a 1 MiB managed limit, a second actor's snapshot is refused while
/// the first holds the bytes; the charge returns to 0 after the write,
/// also after its observer timed out.
#[test]
fn snapshots_are_charged_to_the_shared_process_budget() {
    let (owner, broker) = owner(Some(1 << 20));
    let store = owner.root_context().component("store");
    let fs = Arc::new(RecordingFs::default());
    let first = actor(&broker, &fs, 1);
    let second = actor(&store, &fs, 1);
    let (release, held) = hold_first_write(&owner, &fs, &first, request("offsets", 1, 768 << 10));
    let error = second
        .submit(request("topics", 1, 512 << 10), soon())
        .expect_err("budget");
    assert_eq!(error.kind(), RuntimeErrorKind::CapacityExhausted);
    assert_eq!(error.operation(), RuntimeOperation::AdmitMetadataBytes);
    let timed_out = owner.block_on(async {
        held.wait_until(MetadataDeadline::after(Duration::from_millis(20)))
            .await
    });
    assert_eq!(
        timed_out.expect_err("observer timeout").kind(),
        RuntimeErrorKind::TimedOut
    );
    let process = owner.root_context().process_budget();
    assert_eq!(process.snapshot().current_bytes, 768 << 10, "still charged");
    release.send(()).expect("held write");
    let probe = process.clone();
    owner.block_on(support::guard("charge returns", async move {
        while probe.snapshot().current_bytes != 0 {
            tokio::task::yield_now().await;
        }
    }));
    let receipt = accepted(second.submit(request("topics", 1, 512 << 10), soon()));
    owner.block_on(async { receipt.wait_until(soon()).await.expect("fits now") });
}

/// A write held past the shutdown deadline is reported unfinished, and the
/// runtime's report shows its blocking closure still running.
#[test]
fn shutdown_reports_an_unfinished_generation() {
    let (owner, broker) = owner(None);
    let fs = Arc::new(RecordingFs::default());
    let actor = actor(&broker, &fs, 1);
    let (release, receipt) = hold_first_write(&owner, &fs, &actor, request("offsets", 7, 64));
    let report =
        owner.block_on(actor.shutdown_until(MetadataDeadline::after(Duration::from_millis(50))));
    assert!(report.timed_out);
    assert_eq!(report.unfinished.len(), 1);
    assert_eq!(
        report.unfinished[0].in_flight_generation,
        Some(MetadataGeneration::new(7))
    );
    drop(receipt);
    let runtime = owner
        .shutdown_runtime_blocking_with_timeout(Duration::from_millis(100))
        .expect("outside Tokio");
    assert!(runtime.blocking_still_running >= 1, "{}", runtime.to_json());
    release.send(()).expect("held write");
}

/// A file system that panics fails the write (`RunBlockingTask`,
/// `Internal`); the resource is not stuck and the actor still drains.
#[test]
fn a_panicking_file_system_fails_the_write_and_blocks_nothing() {
    #[derive(Debug)]
    struct Panicking;

    impl MetadataFileSystem for Panicking {
        fn persist_atomic(&self, _: &Path, _: &[u8]) -> RuntimeResult<()> {
            panic!("file system bug")
        }
    }

    let (owner, broker) = owner(None);
    let actor = MetadataIoConfig::default()
        .into_plan()
        .expect("valid")
        .start_with_file_system(&broker, Arc::new(Panicking))
        .expect("started");
    for generation in 1..=2 {
        let receipt = accepted(actor.submit(request("offsets", generation, 16), soon()));
        let outcome =
            owner.block_on(async { receipt.wait_until_outcome(soon()).await.expect("settled") });
        match outcome {
            MetadataIoCommitOutcome::FailedBeforeCommit(error) => {
                assert_eq!(error.operation(), RuntimeOperation::RunBlockingTask);
                assert_eq!(error.kind(), RuntimeErrorKind::Internal);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    let report = owner.block_on(actor.shutdown_until(soon()));
    assert!(!report.timed_out && report.unfinished.is_empty());
    assert_eq!(actor.snapshot().pending_operations, 0);
}

/// The owner's group is torn down (`shutdown_now`) while generation 1 is
/// still being written and generation 2 is queued:
/// * generation 2 will never be written, so its waiter is closed at once
///   (`Closed(MetadataWorkerStopped)`), not left until its own deadline;
/// * the target stays owned while generation 1's closure runs, so another
///   actor of the same owner cannot write the resource concurrently (an
///   older generation could land over a newer one);
/// * once generation 1 is durable the target is free again.
#[test]
fn an_aborted_coordinator_closes_queued_work_and_keeps_the_target_until_its_write_ends() {
    let (owner, broker) = owner(None);
    let fs = Arc::new(RecordingFs::default());
    let first_actor = actor(&broker, &fs, 1);
    let (release, first) = hold_first_write(&owner, &fs, &first_actor, request("topics", 1, 64));
    let queued =
        owner.block_on(async { accepted(first_actor.submit(request("topics", 2, 64), soon())) });
    let _ = broker.task_group().shutdown_now();
    let error = owner
        .block_on(queued.wait_until_outcome(soon()))
        .expect_err("the queued generation is closed");
    assert_eq!(error.kind(), RuntimeErrorKind::Closed);
    assert_eq!(error.operation(), RuntimeOperation::MetadataWorkerStopped);
    assert_eq!(
        first_actor.snapshot().pending_operations,
        1,
        "only the write in flight"
    );

    let other = owner.root_context().component("broker-2");
    let second_actor = actor(&other, &fs, 1);
    let conflict = owner
        .block_on(async { second_actor.submit(request("topics", 3, 64), soon()) })
        .expect("answered");
    assert!(
        matches!(conflict, MetadataIoAdmissionOutcome::TargetConflict(_)),
        "the target is still being written by the first actor"
    );

    release.send(()).expect("the held write waits");
    let outcome = owner
        .block_on(first.wait_until_outcome(soon()))
        .expect("resolved");
    assert!(
        matches!(outcome, MetadataIoCommitOutcome::Durable(_)),
        "{outcome:?}"
    );
    let receipt = owner.block_on(support::guard("the target is released", async {
        loop {
            match second_actor
                .submit(request("topics", 3, 64), soon())
                .expect("answered")
            {
                MetadataIoAdmissionOutcome::Accepted(receipt) => break receipt,
                MetadataIoAdmissionOutcome::TargetConflict(_) => tokio::task::yield_now().await,
            }
        }
    }));
    let outcome = owner
        .block_on(receipt.wait_until_outcome(soon()))
        .expect("resolved");
    assert!(
        matches!(outcome, MetadataIoCommitOutcome::Durable(_)),
        "{outcome:?}"
    );
    let generations: Vec<u64> = fs
        .writes()
        .into_iter()
        .map(|(_, generation)| generation)
        .collect();
    assert_eq!(generations, [1, 3], "generation 2 was never written");
}

/// The owner's target registry keeps every target's history (4,096
/// targets); a new target beyond that is refused as `CapacityExhausted`,
/// not misreported as a conflict with another resource.
#[test]
fn a_full_target_registry_is_capacity_exhausted_not_a_conflict() {
    let (owner, broker) = owner(None);
    let fs = Arc::new(RecordingFs::default());
    let first = actor(&broker, &fs, 4);
    let other = owner.root_context().component("broker-2");
    let second = actor(&other, &fs, 4);
    owner.block_on(async {
        for index in 0..4_096 {
            let actor = if index % 2 == 0 { &first } else { &second };
            let receipt = accepted(actor.submit(request(&format!("r{index}"), 1, 8), soon()));
            let _ = receipt.wait_until_outcome(soon()).await.expect("durable");
        }
    });
    let error = owner
        .block_on(async { second.submit(request("one-more", 1, 8), soon()) })
        .expect_err("the registry is full");
    assert_eq!(error.kind(), RuntimeErrorKind::CapacityExhausted);
    assert_eq!(error.operation(), RuntimeOperation::AdmitMetadataOperation);
    // A known target still works.
    let receipt = owner.block_on(async { accepted(second.submit(request("r1", 2, 8), soon())) });
    let _ = owner
        .block_on(receipt.wait_until_outcome(soon()))
        .expect("durable");
}

/// One target spelled two ways (`dir/./x` and `dir/x`) is one target: the
/// second spelling is not a conflict for the same resource.
#[test]
fn a_target_spelled_differently_is_the_same_target() {
    let (owner, broker) = owner(None);
    let fs = Arc::new(RecordingFs::default());
    let actor = actor(&broker, &fs, 1);
    let spelled = |path: &str, generation: u64| {
        MetadataWriteRequest::new("alias", generation, path, payload(generation, 8))
    };
    owner.block_on(async {
        for (path, generation) in [
            ("/tmp/rocketmq-test/./alias.json", 1),
            ("/tmp/rocketmq-test/alias.json", 2),
            ("/tmp/rocketmq-test/sub/../alias.json", 3),
        ] {
            let receipt = accepted(actor.submit(spelled(path, generation), soon()));
            let _ = receipt.wait_until_outcome(soon()).await.expect("durable");
        }
    });
    assert_eq!(fs.writes().len(), 3);
}

/// A resource may move to another target while it has no pending work
/// (`src/metadata_io/actor.rs`); with a write in flight the move is a
/// conflict.
#[test]
fn a_resource_moves_target_only_without_pending_work() {
    let (owner, broker) = owner(None);
    let fs = Arc::new(RecordingFs::default());
    let actor = actor(&broker, &fs, 1);
    let at = |path: &str, generation: u64| {
        MetadataWriteRequest::new("offsets", generation, path, payload(generation, 8))
    };
    let (release, first) =
        hold_first_write(&owner, &fs, &actor, at("/tmp/rocketmq-test/a.json", 1));
    let conflict = owner
        .block_on(async { actor.submit(at("/tmp/rocketmq-test/b.json", 2), soon()) })
        .expect("answered");
    assert!(
        matches!(conflict, MetadataIoAdmissionOutcome::TargetConflict(_)),
        "generation 1 is still being written to a.json"
    );
    release.send(()).expect("held write");
    let _ = owner
        .block_on(first.wait_until_outcome(soon()))
        .expect("durable");
    let moved = owner
        .block_on(async { accepted(actor.submit(at("/tmp/rocketmq-test/b.json", 3), soon())) });
    let outcome = owner
        .block_on(moved.wait_until_outcome(soon()))
        .expect("resolved");
    assert!(
        matches!(outcome, MetadataIoCommitOutcome::Durable(_)),
        "{outcome:?}"
    );
    let targets: Vec<_> = fs
        .writes()
        .into_iter()
        .map(|(path, generation)| (path.file_name().unwrap_or_default().to_owned(), generation))
        .collect();
    assert_eq!(
        targets,
        [("a.json".into(), 1), ("b.json".into(), 3)],
        "generation 3 went to the new target"
    );
}

/// The coordinator is aborted before its first poll (current-thread
/// runtime, `shutdown_now` right after the first submission): its exit
/// still runs, so the actor releases its target once the write ends and
/// another actor of the owner can take the target over.
#[tokio::test]
async fn a_coordinator_aborted_before_its_first_poll_still_releases_its_targets() {
    let harness = support::harness("metadata-unpolled");
    let fs = Arc::new(RecordingFs::default());
    let first_context = harness.service_context("broker");
    let first = actor(&first_context, &fs, 1);
    let receipt = accepted(first.submit(request("offsets", 1, 8), soon()));
    let _ = first_context.task_group().shutdown_now();
    let outcome = support::guard("the write ends", receipt.wait_until_outcome(soon()))
        .await
        .expect("resolved");
    assert!(
        matches!(outcome, MetadataIoCommitOutcome::Durable(_)),
        "{outcome:?}"
    );
    let second = actor(&harness.service_context("broker-2"), &fs, 1);
    let receipt = support::guard("the target is released", async {
        loop {
            match second
                .submit(request("offsets", 2, 8), soon())
                .expect("answered")
            {
                MetadataIoAdmissionOutcome::Accepted(receipt) => break receipt,
                MetadataIoAdmissionOutcome::TargetConflict(_) => tokio::task::yield_now().await,
            }
        }
    })
    .await;
    let outcome = receipt.wait_until_outcome(soon()).await.expect("resolved");
    assert!(
        matches!(outcome, MetadataIoCommitOutcome::Durable(_)),
        "{outcome:?}"
    );
}

/// `src/metadata_io/actor.rs`, invariant 6 (README: "the actual blocking
/// closure owns its snapshot and permit together, including after
/// cancellation destroys the actor or coordinator"): with every handle
/// dropped and the coordinator aborted at its group's deadline, the actor
/// is gone while its write still runs; the closure keeps its charge and its
/// target until it exits, then records the durable generation in the
/// owner's registry.
#[test]
fn a_running_write_does_not_keep_the_actor_alive() {
    let (owner, broker) = owner(None);
    let fs = Arc::new(RecordingFs::default());
    let first = actor(&broker, &fs, 1);
    let observer = first.observer();
    let process = owner.root_context().process_budget();
    let (release, receipt) = hold_first_write(&owner, &fs, &first, request("offsets", 1, 4096));
    drop(first);
    let report = owner.block_on(broker.task_group().shutdown(Duration::from_millis(20)));
    assert_eq!(
        report.timed_out,
        1,
        "the coordinator waited for its write: {}",
        report.to_json()
    );
    // The abort is requested at the deadline; the coordinator's future is
    // destroyed when its worker gets to it (its record stays until then).
    let group = broker.task_group().clone();
    owner.block_on(support::guard("the coordinator is destroyed", async move {
        while group.task_count() > 0 {
            tokio::task::yield_now().await;
        }
    }));
    assert!(
        observer.snapshot().is_none(),
        "the actor and its coordinator are destroyed while the write runs: {}",
        report.to_json()
    );
    assert_eq!(
        process.snapshot().current_bytes,
        4096,
        "the closure owns its charge"
    );
    let other = owner.root_context().component("broker-2");
    let second = actor(&other, &fs, 1);
    assert!(
        matches!(
            second
                .submit(request("offsets", 2, 64), soon())
                .expect("answered"),
            MetadataIoAdmissionOutcome::TargetConflict(_)
        ),
        "the running closure still holds the target"
    );
    let closed = owner
        .block_on(receipt.wait_until_outcome(soon()))
        .expect_err("nobody is left to tell");
    assert_eq!(closed.operation(), RuntimeOperation::MetadataWorkerStopped);
    release.send(()).expect("the held write waits");
    let probe = process.clone();
    owner.block_on(support::guard("the closure ends", async move {
        while probe.snapshot().current_bytes != 0 {
            tokio::task::yield_now().await;
        }
    }));
    assert_eq!(
        second.confirmed_durable_generation("offsets"),
        Some(MetadataGeneration::new(1)),
        "the write recorded its generation without the actor"
    );
    let receipt = owner.block_on(support::guard("the target is released", async {
        loop {
            match second
                .submit(request("offsets", 2, 64), soon())
                .expect("answered")
            {
                MetadataIoAdmissionOutcome::Accepted(receipt) => break receipt,
                MetadataIoAdmissionOutcome::TargetConflict(_) => tokio::task::yield_now().await,
            }
        }
    }));
    assert_eq!(
        owner
            .block_on(receipt.wait_until(soon()))
            .expect("durable")
            .get(),
        2
    );
}

/// `src/metadata_io/actor.rs`, invariant 5: after an unknown commit outcome
/// fences the target, a generation queued before the fence still runs (as
/// in the original design) and its waiter gets its outcome; every new
/// submission is refused, even one the durable generation covers.
#[test]
fn a_generation_queued_before_a_fence_still_runs() {
    let (owner, broker) = owner(None);
    let fs = Arc::new(RecordingFs::default());
    let actor = actor(&broker, &fs, 1);
    *fs.fail_generation.lock().expect("unpoisoned") =
        Some((1, RuntimeOperation::MetadataSyncParent));
    let (release, unknown) = hold_first_write(&owner, &fs, &actor, request("state", 1, 16));
    let queued = accepted(actor.submit(request("state", 2, 16), soon()));
    release.send(()).expect("held write");
    let outcome = owner
        .block_on(unknown.wait_until_outcome(soon()))
        .expect("settled");
    assert!(
        matches!(outcome, MetadataIoCommitOutcome::CommitOutcomeUnknown(_)),
        "{outcome:?}"
    );
    let outcome = owner
        .block_on(queued.wait_until_outcome(soon()))
        .expect("settled");
    assert!(
        matches!(outcome, MetadataIoCommitOutcome::Durable(generation) if generation.get() == 2),
        "the queued generation ran: {outcome:?}"
    );
    for generation in [3, 2] {
        let error = actor
            .submit(request("state", generation, 16), soon())
            .expect_err("fenced");
        assert_eq!(error.kind(), RuntimeErrorKind::ContextUnavailable);
        assert_eq!(error.operation(), RuntimeOperation::MetadataResourceTarget);
    }
    let generations: Vec<u64> = fs.writes().into_iter().map(|(_, g)| g).collect();
    assert_eq!(generations, [2]);
}

/// A file system whose writes all wait at one gate, counting how many run
/// at once.
#[derive(Debug, Default)]
struct GatedFs {
    running: std::sync::atomic::AtomicUsize,
    most: std::sync::atomic::AtomicUsize,
    open: std::sync::Mutex<bool>,
    opened: std::sync::Condvar,
}

impl MetadataFileSystem for GatedFs {
    fn persist_atomic(&self, _: &Path, _: &[u8]) -> RuntimeResult<()> {
        use std::sync::atomic::Ordering;
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        let mut open = self.open.lock().expect("unpoisoned");
        while !*open {
            open = self.opened.wait(open).expect("unpoisoned");
        }
        drop(open);
        self.running.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    }
}

/// Different resources are written concurrently up to
/// `min(max_concurrent_writes, lane concurrency)`: with 8 writers asked for
/// and a metadata lane of 2, two writes run and the other two resources
/// wait queued; all four end durable.
#[test]
fn concurrent_writes_are_capped_by_the_lane_concurrency() {
    use std::num::NonZeroUsize;
    use std::sync::atomic::Ordering;

    let mut config = rocketmq_runtime::RuntimeConfig::for_parallelism("lane-capped", 2);
    config.blocking_lane_policies.metadata_io.max_concurrency = 2;
    let owner = rocketmq_runtime::RuntimeOwner::plan(config)
        .expect("valid")
        .build()
        .expect("builds");
    let fs = Arc::new(GatedFs::default());
    let actor = MetadataIoConfig::default()
        .into_plan()
        .expect("valid")
        .with_max_concurrent_writes(NonZeroUsize::new(8).expect("positive"))
        .start_with_file_system(
            &owner.root_context().component("store"),
            Arc::clone(&fs) as Arc<dyn MetadataFileSystem>,
        )
        .expect("started");
    assert_eq!(
        actor.effective_profile().actor_limits.max_concurrent_writes,
        2
    );
    let receipts: Vec<_> = ["a", "b", "c", "d"]
        .into_iter()
        .map(|resource| accepted(actor.submit(request(resource, 1, 16), soon())))
        .collect();
    owner.block_on(support::guard("two writes run", async {
        while fs.running.load(Ordering::SeqCst) < 2 {
            tokio::task::yield_now().await;
        }
    }));
    let snapshot = actor.snapshot();
    let in_flight = snapshot
        .resources
        .iter()
        .filter(|resource| resource.in_flight_generation.is_some())
        .count();
    let queued = snapshot
        .resources
        .iter()
        .filter(|resource| resource.queued_generation.is_some())
        .count();
    assert_eq!((in_flight, queued), (2, 2));
    *fs.open.lock().expect("unpoisoned") = true;
    fs.opened.notify_all();
    for receipt in receipts {
        owner.block_on(receipt.wait_until(soon())).expect("durable");
    }
    assert_eq!(
        fs.most.load(Ordering::SeqCst),
        2,
        "never more than the lane's 2"
    );
}

/// Cancelling the actor's group stops admission (`Closed`,
/// `MetadataIoClosed`); the work accepted before it is still written.
#[test]
fn group_cancellation_stops_actor_admission() {
    let (owner, broker) = owner(None);
    let fs = Arc::new(RecordingFs::default());
    let actor = actor(&broker, &fs, 1);
    let (release, first) = hold_first_write(&owner, &fs, &actor, request("offsets", 1, 16));
    let queued = accepted(actor.submit(request("offsets", 2, 16), soon()));
    broker.task_group().cancel();
    let refused = actor
        .submit(request("offsets", 3, 16), soon())
        .expect_err("admission stopped by the group's cancellation");
    assert_eq!(refused.kind(), RuntimeErrorKind::Closed);
    assert_eq!(refused.operation(), RuntimeOperation::MetadataIoClosed);
    assert!(!actor.snapshot().accepting);
    release.send(()).expect("held write");
    owner.block_on(first.wait_until(soon())).expect("durable");
    assert_eq!(
        owner
            .block_on(queued.wait_until(soon()))
            .expect("durable")
            .get(),
        2
    );
    let generations: Vec<u64> = fs.writes().into_iter().map(|(_, g)| g).collect();
    assert_eq!(generations, [1, 2]);
}
