//! Storage health without a real fault: a file system that fails on demand
//! (ENOSPC at the write step) behind a metadata actor. Failed writes are
//! counted per resource and logged once per failure kind; the `storage`
//! dependency turns `/readyz` off after 2 consecutive failures, liveness
//! stays; the next durable write logs a recovery and readiness returns. Its
//! own test binary: it installs a global subscriber.

#[path = "support/events.rs"]
mod events;
mod support;

use std::num::NonZeroU64;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rocketmq_runtime::{
    DependencyReadiness, LocalMetadataFileSystem, MetadataDeadline, MetadataFileSystem,
    MetadataIoCommitAdmissionOutcome, MetadataIoCommitOutcome, MetadataIoConfig, RuntimeConfig,
    RuntimeError, RuntimeOperation, RuntimeOwner, RuntimeResult, ServiceLifecycle,
    ServiceLifecycleConfig, STORAGE_DEPENDENCY,
};

/// The local file system, or ENOSPC at the write step while `full`.
#[derive(Debug, Default)]
struct FillableDisk {
    full: AtomicBool,
}

impl MetadataFileSystem for FillableDisk {
    fn persist_atomic(&self, target: &Path, bytes: &[u8]) -> RuntimeResult<()> {
        if self.full.load(Ordering::SeqCst) {
            return Err(RuntimeError::io(
                RuntimeOperation::MetadataWriteTemporary,
                std::io::Error::from_raw_os_error(28),
            ));
        }
        LocalMetadataFileSystem.persist_atomic(target, bytes)
    }
}

/// Polls `ready` (every millisecond, on the runtime's clock) until it
/// holds; a hang guard fails the test after 10 s. Real time on purpose:
/// what it waits for is a write on a blocking thread against a real file
/// system, which paused time cannot advance and which announces nothing to
/// wait on.
async fn until(what: &str, ready: impl Fn() -> bool) {
    support::guard(what, async {
        while !ready() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await;
}

#[test]
fn failed_writes_are_logged_and_make_storage_unready_until_a_durable_write() {
    events::recorded(); // the recorder first
    let dir = tempfile::tempdir().expect("tempdir");
    let target = dir.path().join("offsets.json");
    let owner = RuntimeOwner::plan(RuntimeConfig::for_parallelism("storage", 2))
        .expect("valid")
        .build()
        .expect("runtime");
    let disk = Arc::new(FillableDisk::default());
    let actor = MetadataIoConfig::default()
        .into_plan()
        .expect("valid")
        .start_with_file_system(
            &owner.root_context().component("metadata"),
            Arc::clone(&disk) as Arc<dyn MetadataFileSystem>,
        )
        .expect("started");
    let lifecycle = ServiceLifecycle::new(ServiceLifecycleConfig::new("broker"));
    lifecycle.mark_ready().expect("ready");
    let probes = owner.root_context().component("probes");
    lifecycle
        .watch_metadata_storage(
            &probes.task_spawner(),
            &actor,
            NonZeroU64::new(2).expect("non-zero"),
        )
        .expect("watching");
    let commit = |bytes: &'static [u8]| {
        let deadline = MetadataDeadline::after(Duration::from_secs(5));
        match owner
            .block_on(actor.submit_next_commit("offsets", &target, bytes.to_vec(), deadline))
            .expect("admitted")
        {
            MetadataIoCommitAdmissionOutcome::Completed(outcome) => outcome,
            other => panic!("not settled: {other:?}"),
        }
    };
    assert!(matches!(commit(b"1"), MetadataIoCommitOutcome::Durable(_)));
    assert!(actor.storage_failures().is_empty());

    disk.full.store(true, Ordering::SeqCst);
    for attempt in 1..=3 {
        assert!(matches!(
            commit(b"2"),
            MetadataIoCommitOutcome::FailedBeforeCommit(_)
        ));
        let failures = actor.storage_failures();
        assert_eq!(failures.len(), 1);
        assert_eq!(failures[0].consecutive_failures, attempt);
        assert_eq!(
            failures[0].operation,
            RuntimeOperation::MetadataWriteTemporary
        );
        assert!(
            failures[0].error.contains("os error 28"),
            "{}",
            failures[0].error
        );
    }
    owner.block_on(until("storage degraded", || !lifecycle.is_ready()));
    assert_eq!(
        lifecycle.named_dependency_readiness(STORAGE_DEPENDENCY),
        Some(DependencyReadiness::Degraded)
    );
    assert!(lifecycle.is_live(), "liveness is unaffected");
    // This test's events (the recorder is shared by the binary's tests).
    let path = target.display().to_string();
    let errors: Vec<_> = events::recorded()
        .into_iter()
        .filter(|event| {
            event.message.starts_with("metadata write failed")
                && event.field("path") == Some(path.as_str())
        })
        .collect();
    assert_eq!(errors.len(), 1, "one line per failure kind: {errors:?}");
    assert_eq!(errors[0].field("resource"), Some("offsets"));
    assert_eq!(errors[0].field("step"), Some("metadata-write-temporary"));

    disk.full.store(false, Ordering::SeqCst);
    assert!(matches!(commit(b"3"), MetadataIoCommitOutcome::Durable(_)));
    owner.block_on(until("storage ready again", || lifecycle.is_ready()));
    assert!(actor.storage_failures().is_empty());
    let recovered: Vec<_> = events::recorded()
        .into_iter()
        .filter(|event| {
            event.message == "metadata writes are durable again"
                && event.field("path") == Some(path.as_str())
        })
        .collect();
    assert_eq!(recovered.len(), 1);
    assert_eq!(recovered[0].field("failed_writes"), Some("3"));
    let drained =
        owner.block_on(actor.shutdown_until(MetadataDeadline::after(Duration::from_secs(5))));
    assert!(drained.not_durable.is_empty());
    assert!(owner
        .shutdown_runtime_blocking()
        .expect("outside Tokio")
        .is_healthy());
}

/// Publishes the snapshot, then fails to sync the directory: the outcome
/// is unknown and the target is fenced.
#[derive(Debug)]
struct UnsyncableDirectory;

impl MetadataFileSystem for UnsyncableDirectory {
    fn persist_atomic(&self, target: &Path, bytes: &[u8]) -> RuntimeResult<()> {
        LocalMetadataFileSystem.persist_atomic(target, bytes)?;
        Err(RuntimeError::io(
            RuntimeOperation::MetadataSyncParent,
            std::io::Error::from_raw_os_error(5),
        ))
    }
}

/// A fenced target takes no more writes, so one unknown outcome makes
/// storage unready at once, whatever the failure threshold, and is
/// escalated: one error line naming the target and the remedy, the service
/// failed (not live) and an `Internal` shutdown requested.
#[test]
fn an_unknown_commit_outcome_makes_storage_unready_at_once_and_stops_the_service() {
    events::recorded();
    let dir = tempfile::tempdir().expect("tempdir");
    let owner = RuntimeOwner::plan(RuntimeConfig::for_parallelism("fenced", 2))
        .expect("valid")
        .build()
        .expect("runtime");
    let actor = MetadataIoConfig::default()
        .into_plan()
        .expect("valid")
        .start_with_file_system(
            &owner.root_context().component("metadata"),
            Arc::new(UnsyncableDirectory),
        )
        .expect("started");
    let lifecycle = ServiceLifecycle::new(ServiceLifecycleConfig::new("broker"));
    lifecycle.mark_ready().expect("ready");
    lifecycle
        .watch_metadata_storage(
            &owner.root_context().component("probes").task_spawner(),
            &actor,
            NonZeroU64::new(3).expect("non-zero"),
        )
        .expect("watching");
    let deadline = MetadataDeadline::after(Duration::from_secs(5));
    let outcome = owner
        .block_on(actor.submit_next_commit(
            "offsets",
            dir.path().join("offsets.json"),
            b"1".to_vec(),
            deadline,
        ))
        .expect("admitted");
    assert!(matches!(
        outcome,
        MetadataIoCommitAdmissionOutcome::Completed(MetadataIoCommitOutcome::CommitOutcomeUnknown(
            _
        ))
    ));
    let failures = actor.storage_failures();
    assert_eq!(failures.len(), 1);
    assert!(failures[0].outcome_unknown);
    assert_eq!(failures[0].consecutive_failures, 1);
    owner.block_on(until("storage degraded", || !lifecycle.is_ready()));
    // The escalation's request is an event: waited for, not polled.
    let request = owner.block_on(support::guard("escalated", lifecycle.wait_for_shutdown()));
    assert_eq!(request.reason, rocketmq_runtime::ShutdownReason::Internal);
    assert_eq!(
        lifecycle.state(),
        rocketmq_runtime::ServiceLifecycleState::Failed
    );
    assert!(
        !lifecycle.is_live(),
        "a fenced process does not look healthy"
    );
    let path = dir.path().join("offsets.json").display().to_string();
    let lines: Vec<_> = events::recorded()
        .into_iter()
        .filter(|event| event.message.starts_with("metadata target fenced"))
        .collect();
    assert_eq!(lines.len(), 1, "one line per fence");
    assert_eq!(lines[0].field("path"), Some(path.as_str()));
    assert!(lines[0].message.contains("restart reconciles it from disk"));
    let drained = owner.block_on(actor.shutdown_until(deadline));
    assert_eq!(drained.not_durable.len(), 1);
    let _ = owner.shutdown_runtime_blocking().expect("outside Tokio");
}
