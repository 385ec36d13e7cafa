//! Metadata target histories and the commit/observe APIs (rules in
//! `src/metadata_io/targets.rs` and `src/metadata_io/actor.rs`): retirement
//! and its outcomes, the registry's capacity and stats, `submit_commit` /
//! `submit_observed` / `observe_until`, lane deadlines, waiter and budget
//! bounds, and the shutdown report. Writes go through the recording file
//! system of `support/metadata.rs`.

mod support;

#[path = "support/metadata.rs"]
mod metadata;

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use metadata::{accepted, actor, hold_first_write, owner, payload, request, soon, RecordingFs};
use rocketmq_runtime::{
    ChildServiceContext, MetadataDeadline, MetadataFileSystem, MetadataGeneration, MetadataIoActor,
    MetadataIoAdmissionOutcome, MetadataIoCommitAdmissionOutcome, MetadataIoCommitObservation,
    MetadataIoCommitOutcome, MetadataIoConfig, MetadataLimitSource,
    MetadataTargetRetirementOutcome, MetadataWriteRequest, RuntimeConfig, RuntimeErrorContext,
    RuntimeErrorKind, RuntimeOperation, RuntimeOwner,
};

/// An owner keeping at most `capacity` target histories, with its `broker`
/// component.
fn owner_with_capacity(capacity: usize) -> (RuntimeOwner, ChildServiceContext) {
    let owner = RuntimeOwner::plan(RuntimeConfig::for_parallelism("targets", 2))
        .expect("valid")
        .with_metadata_target_capacity(NonZeroUsize::new(capacity).expect("positive"))
        .build()
        .expect("builds");
    let broker = owner.root_context().component("broker");
    (owner, broker)
}

/// A request of `resource` at `path`.
fn at(resource: &str, path: &str, generation: u64) -> MetadataWriteRequest {
    MetadataWriteRequest::new(resource, generation, path, payload(generation, 16))
}

/// Stops `actor`, waits for its work and retires `resource`.
fn retire(
    owner: &RuntimeOwner,
    actor: &MetadataIoActor,
    resource: &str,
) -> MetadataTargetRetirementOutcome {
    let report = owner.block_on(actor.shutdown_until(soon()));
    assert!(!report.timed_out, "{report:?}");
    actor
        .retire_target_for_new_identity(resource)
        .expect("an outcome")
}

fn durable(owner: &RuntimeOwner, actor: &MetadataIoActor, request: MetadataWriteRequest) -> u64 {
    let receipt = accepted(actor.submit(request, soon()));
    owner
        .block_on(receipt.wait_until(soon()))
        .expect("durable")
        .get()
}

/// Retirement (`src/metadata_io/targets.rs`, invariant 4): every outcome,
/// and what a retirement changes.
#[test]
fn retirement_answers_each_outcome() {
    let (owner, broker) = owner(None);
    let fs = Arc::new(RecordingFs::default());
    let first = actor(&broker, &fs, 1);
    let path = "/tmp/rocketmq-test/retired.json";
    assert_eq!(durable(&owner, &first, at("offsets", path, 1)), 1);
    assert_eq!(
        first
            .retire_target_for_new_identity("offsets")
            .expect("outcome"),
        MetadataTargetRetirementOutcome::AdmissionOpen
    );
    // A write in flight: the coordinator still works.
    let (release, held) = hold_first_write(&owner, &fs, &first, request("topics", 1, 16));
    first.stop_admission();
    assert_eq!(
        first
            .retire_target_for_new_identity("topics")
            .expect("outcome"),
        MetadataTargetRetirementOutcome::WorkInProgress
    );
    release.send(()).expect("held write");
    owner.block_on(held.wait_until(soon())).expect("durable");
    assert_eq!(
        retire(&owner, &first, "missing"),
        MetadataTargetRetirementOutcome::NotFound
    );

    // Another actor of the owner takes the history over and writes on.
    let other = owner.root_context().component("broker-2");
    let second = actor(&other, &fs, 1);
    let (release, receipt) = hold_first_write(&owner, &fs, &second, at("offsets", path, 2));
    let old_identity = receipt.target_identity();
    assert_eq!(first.target_identity("offsets"), Some(old_identity.clone()));
    assert_eq!(
        first
            .retire_target_for_new_identity("offsets")
            .expect("outcome"),
        MetadataTargetRetirementOutcome::WorkInProgress,
        "the second actor's running write is the live writer"
    );
    release.send(()).expect("held write");
    let first_receipt_outcome = owner.block_on(receipt.observe_until(soon()));
    assert!(matches!(
        first_receipt_outcome.settled(),
        Some(MetadataIoCommitOutcome::Durable(generation)) if generation.get() == 2
    ));
    assert_eq!(
        first
            .retire_target_for_new_identity("offsets")
            .expect("outcome"),
        MetadataTargetRetirementOutcome::HistoryChanged,
        "the second actor wrote after the first"
    );
    let late = accepted(second.submit(at("offsets", path, 2), soon()));
    assert_eq!(
        retire(&owner, &second, "offsets"),
        MetadataTargetRetirementOutcome::Retired
    );
    assert_eq!(
        first
            .retire_target_for_new_identity("offsets")
            .expect("outcome"),
        MetadataTargetRetirementOutcome::HistoryChanged,
        "retired by the second actor, which wrote after the first"
    );
    assert_eq!(second.target_identity("offsets"), None);
    assert_eq!(second.confirmed_durable_generation("offsets"), None);
    // An old receipt keeps its outcome; an old handle is refused.
    let kept = owner.block_on(late.observe_until(soon()));
    assert!(matches!(
        kept.settled(),
        Some(MetadataIoCommitOutcome::Durable(generation)) if generation.get() == 2
    ));
    let refused = second
        .submit(at("offsets", path, 3), soon())
        .expect_err("stopped");
    assert_eq!(refused.kind(), RuntimeErrorKind::Closed);

    // The path's next writer starts a new identity without history.
    let next_context = owner.root_context().component("broker-3");
    let third = actor(&next_context, &fs, 1);
    assert_eq!(third.confirmed_durable_generation("offsets"), None);
    let fresh = accepted(third.submit(at("offsets", path, 1), soon()));
    assert_ne!(fresh.target_identity(), old_identity, "not revived");
    owner
        .block_on(fresh.wait_until(soon()))
        .expect("written again");
    let written: Vec<u64> = fs
        .writes()
        .into_iter()
        .filter(|(target, _)| target.ends_with("retired.json"))
        .map(|(_, generation)| generation)
        .collect();
    assert_eq!(
        written,
        [1, 2, 1],
        "generation 1 of the new history was written"
    );
}

/// A fenced target is never retired (`ReconciliationRequired`).
#[test]
fn a_fenced_target_requires_reconciliation() {
    let (owner, broker) = owner(None);
    let fs = Arc::new(RecordingFs::default());
    let actor = actor(&broker, &fs, 1);
    *fs.fail_with.lock().expect("unpoisoned") = Some(RuntimeOperation::MetadataSyncParent);
    let receipt = accepted(actor.submit(request("fenced", 1, 16), soon()));
    let outcome = owner
        .block_on(receipt.wait_until_outcome(soon()))
        .expect("settled");
    assert!(outcome.requires_reconciliation());
    assert_eq!(
        retire(&owner, &actor, "fenced"),
        MetadataTargetRetirementOutcome::ReconciliationRequired
    );
    let stats = owner.resources().metadata_target_stats();
    assert_eq!((stats.fenced_targets, stats.retained_targets), (1, 1));
}

/// A full registry refuses a new path naming its capacity; retiring
/// histories frees room, so 10,000 paths rotate through 16 slots.
#[test]
fn rotating_paths_with_retirement_never_fills_the_registry() {
    let (owner, broker) = owner_with_capacity(16);
    let fs = Arc::new(RecordingFs::default());
    for index in 0..10_000 {
        let actor = actor(&broker, &fs, 1);
        let path = format!("/tmp/rocketmq-test/rotating-{index}.json");
        assert_eq!(
            durable(&owner, &actor, at("rotating", &path, 1)),
            1,
            "path {index}"
        );
        assert_eq!(
            retire(&owner, &actor, "rotating"),
            MetadataTargetRetirementOutcome::Retired
        );
    }
    let stats = owner.resources().metadata_target_stats();
    assert_eq!((stats.retained_targets, stats.remaining_capacity), (0, 16));

    // Without retirement the 17th path is refused, naming the capacity.
    let keeper = actor(&broker, &fs, 1);
    for index in 0..16 {
        let path = format!("/tmp/rocketmq-test/kept-{index}.json");
        durable(&owner, &keeper, at(&format!("kept-{index}"), &path, 1));
    }
    let error = keeper
        .submit(
            at("one-more", "/tmp/rocketmq-test/one-more.json", 1),
            soon(),
        )
        .expect_err("full");
    assert_eq!(error.kind(), RuntimeErrorKind::CapacityExhausted);
    assert_eq!(
        error.context(),
        Some(&RuntimeErrorContext::Capacity {
            limit: "metadata target registry",
            capacity: 16
        })
    );
    let context = error.diagnostic_view().context.expect("a context");
    assert_eq!(
        context.to_string(),
        "metadata target registry full at capacity 16"
    );
    let stats = owner.resources().metadata_target_stats();
    assert_eq!(
        (
            stats.retained_targets,
            stats.live_owners,
            stats.remaining_capacity
        ),
        (16, 0, 0),
        "an idle actor holds no live writer: every history is kept for its durable generation"
    );
}

/// `submit_commit`: each admission outcome and each error channel.
#[test]
fn submit_commit_outcomes() {
    let (owner, broker) = owner(None);
    let fs = Arc::new(RecordingFs::default());
    let actor = actor(&broker, &fs, 1);
    let commit = || {
        owner
            .block_on(actor.submit_next_commit(
                "commit",
                "/tmp/rocketmq-test/commit.json",
                payload(0, 8),
                soon(),
            ))
            .expect("admitted")
    };
    let completed = commit();
    assert!(matches!(
        completed,
        MetadataIoCommitAdmissionOutcome::Completed(MetadataIoCommitOutcome::Durable(_))
    ));
    *fs.fail_with.lock().expect("unpoisoned") = Some(RuntimeOperation::MetadataWriteTemporary);
    let failed = commit();
    assert!(matches!(
        failed,
        MetadataIoCommitAdmissionOutcome::Completed(MetadataIoCommitOutcome::FailedBeforeCommit(_))
    ));
    *fs.fail_with.lock().expect("unpoisoned") = None;
    let conflict = owner
        .block_on(actor.submit_commit(at("other", "/tmp/rocketmq-test/commit.json", 9), soon()))
        .expect("answered");
    assert!(matches!(
        conflict,
        MetadataIoCommitAdmissionOutcome::TargetConflict(_)
    ));
    let expired = owner
        .block_on(actor.submit_commit(
            request("commit", 50, 8),
            MetadataDeadline::after(Duration::ZERO),
        ))
        .expect_err("not admitted");
    assert_eq!(expired.operation(), RuntimeOperation::AdmitMetadataSnapshot);
    // Admitted, then the wait expires while the write is held.
    let (release, _held) = hold_first_write(&owner, &fs, &actor, request("slow", 1, 8));
    let waited = owner
        .block_on(actor.submit_commit(
            request("slow", 1, 8),
            MetadataDeadline::after(Duration::from_millis(20)),
        ))
        .expect_err("the wait expires");
    assert_eq!(waited.operation(), RuntimeOperation::WaitForDurableMetadata);
    release.send(()).expect("held write");
}

/// `submit_observed` and `observe_until`: settled (durable, failed),
/// unobserved at the deadline or when the coordinator is aborted, target
/// conflicts, and errors only when not admitted.
#[test]
fn observations_say_what_is_known() {
    let (owner, broker) = owner(None);
    let fs = Arc::new(RecordingFs::default());
    let actor = actor(&broker, &fs, 1);
    let settled = owner
        .block_on(actor.submit_observed(request("seen", 1, 8), soon()))
        .expect("admitted");
    assert!(matches!(
        &settled,
        MetadataIoCommitObservation::Settled { generation, outcome: MetadataIoCommitOutcome::Durable(_) }
            if generation.get() == 1
    ));
    assert!(!settled.requires_reconciliation());
    // Already durable: settled without a write.
    let ready = owner
        .block_on(actor.submit_observed(request("seen", 1, 8), soon()))
        .expect("admitted");
    assert_eq!(ready.generation(), MetadataGeneration::new(1));
    assert!(ready.settled().is_some());
    *fs.fail_with.lock().expect("unpoisoned") = Some(RuntimeOperation::MetadataCreateTemporary);
    let failed = owner
        .block_on(actor.submit_observed(request("seen", 2, 8), soon()))
        .expect("admitted");
    assert!(matches!(
        failed.settled(),
        Some(MetadataIoCommitOutcome::FailedBeforeCommit(_))
    ));
    *fs.fail_with.lock().expect("unpoisoned") = None;
    let conflict = owner
        .block_on(actor.submit_observed(at("stranger", "/tmp/rocketmq-test/seen.json", 3), soon()))
        .expect("answered");
    assert!(matches!(
        conflict,
        MetadataIoCommitObservation::TargetConflict(_)
    ));
    assert!(!conflict.requires_reconciliation());
    actor.stop_admission();
    let closed = owner
        .block_on(actor.submit_observed(request("seen", 4, 8), soon()))
        .expect_err("not admitted");
    assert_eq!(closed.kind(), RuntimeErrorKind::Closed);

    // The deadline first: unobserved, and the write goes on.
    let second_context = owner.root_context().component("observed-2");
    let second = metadata::actor(&second_context, &fs, 1);
    let (release, held) = hold_first_write(&owner, &fs, &second, request("held", 1, 8));
    let unobserved =
        owner.block_on(held.observe_until(MetadataDeadline::after(Duration::from_millis(20))));
    assert_eq!(
        unobserved.unobserved_generation(),
        Some(MetadataGeneration::new(1))
    );
    assert!(unobserved.requires_reconciliation());
    // A queued generation observed while its coordinator is aborted.
    let queued = accepted(second.submit(request("held", 2, 8), soon()));
    let lost = owner
        .block_on(async {
            let observing = tokio::spawn(queued.observe_until(soon()));
            let _ = second_context.task_group().shutdown_now();
            support::guard("the observation ends", observing).await
        })
        .expect("the observing task");
    assert_eq!(
        lost.unobserved_generation(),
        Some(MetadataGeneration::new(2))
    );
    release.send(()).expect("held write");
}

/// An observation that gives up (a timed-out receipt, or an observing task
/// that panics) never cancels the write; a later generation waits behind
/// it, and a later observer sees its late result.
#[test]
fn observation_never_cancels_the_write() {
    let (owner, broker) = owner(None);
    let fs = Arc::new(RecordingFs::default());
    let actor = actor(&broker, &fs, 1);
    let (release, held) = hold_first_write(&owner, &fs, &actor, request("late", 1, 8));
    let panicking = owner.block_on(async {
        tokio::spawn(async move {
            let observation = held.observe_until(soon());
            tokio::pin!(observation);
            assert!(futures::poll!(observation.as_mut()).is_pending());
            panic!("the observer fails while the write runs");
        })
        .await
    });
    assert!(panicking.expect_err("the observer panicked").is_panic());
    let waited = owner
        .block_on(
            accepted(actor.submit(request("late", 1, 8), soon()))
                .wait_until(MetadataDeadline::after(Duration::from_millis(20))),
        )
        .expect_err("timed out");
    assert_eq!(waited.kind(), RuntimeErrorKind::TimedOut);
    let next = accepted(actor.submit(request("late", 2, 8), soon()));
    assert!(
        fs.writes().is_empty(),
        "generation 2 waits behind the held write"
    );
    let later_observer = accepted(actor.submit(request("late", 1, 8), soon()));
    release.send(()).expect("held write");
    let late = owner.block_on(later_observer.observe_until(soon()));
    assert!(matches!(
        late.settled(),
        Some(MetadataIoCommitOutcome::Durable(generation)) if generation.get() == 1
    ));
    owner
        .block_on(next.wait_until(soon()))
        .expect("then generation 2");
    let order: Vec<u64> = fs
        .writes()
        .into_iter()
        .map(|(_, generation)| generation)
        .collect();
    assert_eq!(order, [1, 2]);
}

/// `with_lane_deadline`: an expired one is refused at admission; a write
/// that cannot get a lane slot by its deadline never starts; a write that
/// started before it is not interrupted.
#[test]
fn a_lane_deadline_bounds_the_wait_for_a_slot() {
    let mut config = RuntimeConfig::for_parallelism("lane-deadline", 2);
    config.blocking_lane_policies.metadata_io.max_concurrency = 1;
    let owner = RuntimeOwner::plan(config)
        .expect("valid")
        .build()
        .expect("builds");
    let fs = Arc::new(RecordingFs::default());
    let first_context = owner.root_context().component("first");
    let first = actor(&first_context, &fs, 1);
    let expired = request("a", 1, 8).with_lane_deadline(MetadataDeadline::after(Duration::ZERO));
    let refused = first
        .submit(expired, soon())
        .expect_err("expired lane deadline");
    assert_eq!(refused.operation(), RuntimeOperation::AdmitMetadataSnapshot);
    // The running write holds the lane's only slot past its own deadline.
    let running =
        request("a", 1, 8).with_lane_deadline(MetadataDeadline::after(Duration::from_millis(10)));
    let (release, held) = hold_first_write(&owner, &fs, &first, running);
    let second_context = owner.root_context().component("second");
    let second = actor(&second_context, &fs, 1);
    let starved =
        request("b", 1, 8).with_lane_deadline(MetadataDeadline::after(Duration::from_millis(30)));
    assert_eq!(
        starved
            .lane_deadline()
            .map(|deadline| deadline > MetadataDeadline::after(Duration::ZERO)),
        Some(true)
    );
    let starved = accepted(second.submit(starved, soon()));
    let outcome = owner
        .block_on(starved.wait_until_outcome(soon()))
        .expect("settled");
    match outcome {
        MetadataIoCommitOutcome::FailedBeforeCommit(error) => {
            assert_eq!(error.kind(), RuntimeErrorKind::TimedOut, "{error}")
        }
        other => panic!("never started, so failed before commit: {other:?}"),
    }
    release.send(()).expect("held write");
    owner
        .block_on(held.wait_until(soon()))
        .expect("the running write finished");
    let written: Vec<_> = fs
        .writes()
        .into_iter()
        .map(|(path, _)| path.file_name().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(written, ["a.json"], "b was never started");
}

/// Waiting receipts are bounded per actor by
/// `max(4 · max_pending_operations, 1)`
/// (`src/metadata_io/actor/admission.rs`).
#[test]
fn waiters_are_bounded() {
    let (owner, broker) = owner(None);
    let fs = Arc::new(RecordingFs::default());
    let config = MetadataIoConfig {
        max_pending_operations: 2,
        ..MetadataIoConfig::default()
    };
    let actor = config
        .into_plan()
        .expect("valid")
        .start_with_file_system(&broker, Arc::clone(&fs) as Arc<dyn MetadataFileSystem>)
        .expect("started");
    assert_eq!(actor.effective_profile().actor_limits.max_waiters, 8);
    let (release, _first) = hold_first_write(&owner, &fs, &actor, request("a", 1, 8));
    let mut receipts = vec![accepted(actor.submit(request("b", 1, 8), soon()))];
    for resource in ["a", "b"] {
        for _ in 0..3 {
            receipts.push(accepted(actor.submit(request(resource, 1, 8), soon())));
        }
    }
    let error = actor
        .submit(request("a", 1, 8), soon())
        .expect_err("nine waiters");
    assert_eq!(error.kind(), RuntimeErrorKind::CapacityExhausted);
    assert_eq!(error.operation(), RuntimeOperation::AdmitMetadataOperation);
    release.send(()).expect("held write");
    for receipt in receipts {
        owner.block_on(receipt.wait_until(soon())).expect("durable");
    }
}

/// Coalescing charges only growth (`src/metadata_io/actor.rs`): at the
/// process budget's limit an equal-size replacement is admitted, a larger
/// one is refused and keeps the old request and its charge, and a smaller
/// one gives back the difference.
#[test]
fn coalescing_charges_only_growth() {
    const HALF: usize = 512 << 10;
    let (owner, broker) = owner(Some(1 << 20));
    let fs = Arc::new(RecordingFs::default());
    let actor = actor(&broker, &fs, 1);
    let process = owner.root_context().process_budget();
    let (release, _held) = hold_first_write(&owner, &fs, &actor, request("big", 1, HALF));
    let _queued = accepted(actor.submit(request("big", 2, HALF), soon()));
    assert_eq!(process.snapshot().current_bytes, 1 << 20, "at the limit");
    let _equal = accepted(actor.submit(request("big", 3, HALF), soon()));
    let grown = actor
        .submit(request("big", 4, HALF + 1), soon())
        .expect_err("no room to grow");
    assert_eq!(grown.operation(), RuntimeOperation::AdmitMetadataBytes);
    let queued = actor.snapshot().resources[0].queued_generation;
    assert_eq!(
        queued,
        Some(MetadataGeneration::new(3)),
        "the old request stays"
    );
    assert_eq!(process.snapshot().current_bytes, 1 << 20, "and its charge");
    let _smaller = accepted(actor.submit(request("big", 5, HALF / 2), soon()));
    assert_eq!(process.snapshot().current_bytes, HALF + HALF / 2);
    assert_eq!(actor.snapshot().pending_bytes, HALF + HALF / 2);
    release.send(()).expect("held write");
    let report = owner.block_on(actor.shutdown_until(soon()));
    assert!(!report.timed_out);
    assert_eq!(process.snapshot().current_bytes, 0);
    let written: Vec<u64> = fs
        .writes()
        .into_iter()
        .map(|(_, generation)| generation)
        .collect();
    assert_eq!(written, [1, 5]);
}

/// A shutdown that times out only ends its wait
/// (`src/metadata_io/actor.rs`). It lists every resource with a generation
/// in flight *or queued* as unfinished and counts both in its pending
/// figures; the queued generation stays charged and is written afterwards.
#[test]
fn a_timed_out_shutdown_keeps_queued_generations_charged_and_writes_them() {
    let (owner, broker) = owner(None);
    let fs = Arc::new(RecordingFs::default());
    let actor = actor(&broker, &fs, 1);
    let process = owner.root_context().process_budget();
    let (release, held) = hold_first_write(&owner, &fs, &actor, request("in-flight", 1, 8));
    let queued = accepted(actor.submit(request("queued-only", 1, 24), soon()));
    let report = owner.block_on(actor.shutdown_until(MetadataDeadline::after(Duration::ZERO)));
    assert!(report.timed_out);
    let unfinished: Vec<&str> = report
        .unfinished
        .iter()
        .map(|resource| &*resource.resource)
        .collect();
    assert_eq!(unfinished, ["in-flight", "queued-only"]);
    assert_eq!(
        (report.pending_operations, report.pending_bytes),
        (2, 32),
        "in flight plus queued"
    );
    assert_eq!(process.snapshot().current_bytes, 32, "both still charged");
    release.send(()).expect("held write");
    owner
        .block_on(held.wait_until(soon()))
        .expect("the write in flight finished");
    let written = owner
        .block_on(queued.wait_until(soon()))
        .expect("the queued generation is written after the deadline");
    assert_eq!(written.get(), 1);
    let finished = owner.block_on(actor.shutdown_until(soon()));
    assert!(!finished.timed_out && finished.unfinished.is_empty());
    assert_eq!(
        (finished.pending_operations, finished.pending_bytes),
        (0, 0)
    );
    assert_eq!(process.snapshot().current_bytes, 0);
}

/// A replacement actor reads the durable generation from the registry
/// (`src/metadata_io/targets.rs`, invariant 3) and resolves older
/// generations without a write.
#[test]
fn a_replacement_actor_confirms_what_an_earlier_one_wrote() {
    let (owner, broker) = owner(None);
    let fs = Arc::new(RecordingFs::default());
    let first = actor(&broker, &fs, 1);
    assert_eq!(durable(&owner, &first, request("offsets", 5, 8)), 5);
    let _ = owner.block_on(first.shutdown_until(soon()));
    let replacement_context = owner.root_context().component("replacement");
    let replacement = actor(&replacement_context, &fs, 1);
    assert_eq!(
        replacement.confirmed_durable_generation("offsets"),
        Some(MetadataGeneration::new(5))
    );
    let older = owner
        .block_on(replacement.submit_observed(request("offsets", 3, 8), soon()))
        .expect("admitted");
    assert!(matches!(
        older.settled(),
        Some(MetadataIoCommitOutcome::Durable(generation)) if generation.get() == 5
    ));
    assert_eq!(fs.writes().len(), 1, "resolved from the history");
    let observer = replacement.observer();
    assert_eq!(
        observer.snapshot().map(|snapshot| snapshot.resources.len()),
        Some(1)
    );
    let _ = owner.block_on(replacement.shutdown_until(soon()));
    drop(replacement);
    let _ = owner.block_on(
        replacement_context
            .task_group()
            .shutdown(Duration::from_secs(5)),
    );
    assert!(
        observer.snapshot().is_none(),
        "the observer does not keep the actor"
    );
}

/// The effective profile reports the lane, the actor's limits and the
/// retained `blocking_*` fields against the lane values that apply.
#[test]
fn the_effective_profile_names_where_each_limit_comes_from() {
    let (_owner, broker) = owner(None);
    let config = MetadataIoConfig {
        blocking_queue_timeout: Duration::from_secs(9),
        ..MetadataIoConfig::default()
    };
    let actor = config
        .into_plan()
        .expect("valid")
        .start_with_file_system(&broker, Arc::new(RecordingFs::default()))
        .expect("started");
    let profile = actor.effective_profile();
    let lane = &profile.blocking_lane;
    let fields: Vec<_> = profile
        .legacy_blocking_fields
        .iter()
        .map(|field| {
            (
                field.field,
                field.configured,
                field.effective,
                field.effective_source,
            )
        })
        .collect();
    assert_eq!(
        fields[0],
        (
            "blocking_queue_timeout",
            Duration::from_secs(9),
            lane.queue_timeout,
            MetadataLimitSource::BlockingLanePolicy
        )
    );
    assert_eq!(fields[1].0, "blocking_task_timeout");
    assert_eq!(fields[2].2, lane.warn_after);
    assert_eq!(profile.actor_limits.max_pending_operations, 1_024);
    let _ = MetadataIoAdmissionOutcome::TargetConflict(request("unused", 1, 8));
}

/// The live writer of a target is its running write, not an open actor
/// (`src/metadata_io/targets.rs`, invariant 2). Once the first actor's
/// write is durable, a second actor of the owner writes the same target
/// while the first is still open; while the second one's write runs, the
/// first is refused, and afterwards it writes on from the second one's
/// durable generation.
#[test]
fn an_idle_open_actor_leaves_its_target_to_another_actor() {
    let (owner, broker) = owner(None);
    let fs = Arc::new(RecordingFs::default());
    let path = "/tmp/rocketmq-test/shared-target.json";
    let first = actor(&broker, &fs, 1);
    assert_eq!(durable(&owner, &first, at("offsets", path, 1)), 1);
    let other = owner.root_context().component("broker-2");
    let second = actor(&other, &fs, 1);
    let (release, held) = hold_first_write(&owner, &fs, &second, at("offsets", path, 2));
    assert!(
        matches!(
            first
                .submit(at("offsets", path, 3), soon())
                .expect("answered"),
            MetadataIoAdmissionOutcome::TargetConflict(_)
        ),
        "the second actor's write is running"
    );
    release.send(()).expect("held write");
    assert_eq!(
        owner
            .block_on(held.wait_until(soon()))
            .expect("durable")
            .get(),
        2
    );
    assert_eq!(durable(&owner, &first, at("offsets", path, 3)), 3);
    assert_eq!(
        first.confirmed_durable_generation("offsets"),
        Some(MetadataGeneration::new(3))
    );
    assert_eq!(owner.resources().metadata_target_stats().live_owners, 0);
}

/// Each actor bounds its own resource cache by the registry's capacity.
/// Another actor retires one of two histories, so the registry has room,
/// but the first actor still caches both resources: its third resource is
/// refused as `CapacityExhausted`, naming the capacity.
#[test]
fn an_actor_bounds_its_resource_cache_by_the_registry_capacity() {
    let (owner, broker) = owner_with_capacity(2);
    let fs = Arc::new(RecordingFs::default());
    let first = actor(&broker, &fs, 1);
    assert_eq!(
        durable(
            &owner,
            &first,
            at("one", "/tmp/rocketmq-test/cache-one.json", 1)
        ),
        1
    );
    assert_eq!(
        durable(
            &owner,
            &first,
            at("two", "/tmp/rocketmq-test/cache-two.json", 1)
        ),
        1
    );
    let other = owner.root_context().component("broker-2");
    let second = actor(&other, &fs, 1);
    assert_eq!(
        durable(
            &owner,
            &second,
            at("one", "/tmp/rocketmq-test/cache-one.json", 2)
        ),
        2
    );
    assert_eq!(
        retire(&owner, &second, "one"),
        MetadataTargetRetirementOutcome::Retired
    );
    assert_eq!(
        owner.resources().metadata_target_stats().remaining_capacity,
        1
    );
    let error = first
        .submit(
            at("three", "/tmp/rocketmq-test/cache-three.json", 1),
            soon(),
        )
        .expect_err("the actor's cache is full");
    assert_eq!(error.kind(), RuntimeErrorKind::CapacityExhausted);
    assert_eq!(
        error.context(),
        Some(&RuntimeErrorContext::Capacity {
            limit: "metadata target registry",
            capacity: 2
        })
    );
    let third = actor(&other, &fs, 1);
    assert_eq!(
        durable(
            &owner,
            &third,
            at("three", "/tmp/rocketmq-test/cache-three.json", 1)
        ),
        1,
        "the registry itself had room"
    );
}
