//! The actor over the real protocol with injected filesystem faults (the
//! fault injector is test-only, so this runs as a unit test).

use std::sync::Arc;
use std::time::Duration;

use crate::durable::FaultInjectingFileSystem;
use crate::{
    config::RuntimeConfig, durable::MetadataFileSystem, durable::MetadataIoOperation,
    error::RuntimeOperation, error::RuntimeResult, metadata_io::MetadataDeadline,
    metadata_io::MetadataIoAdmissionOutcome, metadata_io::MetadataIoCommitOutcome,
    metadata_io::MetadataIoConfig, metadata_io::MetadataIoReceipt, owner::RuntimeOwner,
    service_context::ChildServiceContext,
};

fn owner() -> (RuntimeOwner, ChildServiceContext) {
    let owner = RuntimeOwner::plan(RuntimeConfig::for_parallelism("metadata", 2))
        .expect("valid")
        .build()
        .expect("builds");
    let broker = owner.root_context().component("broker");
    (owner, broker)
}

fn accepted(outcome: RuntimeResult<MetadataIoAdmissionOutcome>) -> MetadataIoReceipt {
    match outcome.expect("admitted") {
        MetadataIoAdmissionOutcome::Accepted(receipt) => receipt,
        MetadataIoAdmissionOutcome::TargetConflict(request) => panic!("conflict: {request:?}"),
    }
}

fn soon() -> MetadataDeadline {
    MetadataDeadline::after(Duration::from_secs(30))
}

/// Real files with a fault injected at each step (ENOSPC at the write): the
/// outcome names the step, nothing is published, no temporary file stays,
/// and the next submission succeeds once the fault clears; a fault after
/// the rename is an unknown commit that fences the target.
#[test]
fn injected_filesystem_faults_through_the_actor() {
    let (owner, broker) = owner();
    let dir = tempfile::tempdir().expect("temp dir");
    let fs = Arc::new(FaultInjectingFileSystem::new());
    let actor = MetadataIoConfig::default()
        .into_plan()
        .expect("valid")
        .start_with_file_system(&broker, Arc::clone(&fs) as Arc<dyn MetadataFileSystem>)
        .expect("started");
    let target = dir.path().join("topics.json");
    let write = |body: &'static str| {
        let receipt =
            accepted(actor.submit_next("topics", &target, body.as_bytes().to_vec(), soon()));
        owner.block_on(async { receipt.wait_until_outcome(soon()).await.expect("settled") })
    };
    assert!(matches!(write("v1"), MetadataIoCommitOutcome::Durable(_)));
    for step in [
        MetadataIoOperation::CreateParent,
        MetadataIoOperation::CreateTemporary,
        MetadataIoOperation::WriteTemporary,
        MetadataIoOperation::SyncTemporary,
        MetadataIoOperation::ReplaceTarget,
    ] {
        fs.fail_at_os_error(step, 28);
        match write("broken") {
            MetadataIoCommitOutcome::FailedBeforeCommit(error) => {
                assert_eq!(error.operation(), step.runtime_operation());
            }
            other => panic!("{step}: unexpected {other:?}"),
        }
        fs.clear();
        assert_eq!(
            std::fs::read_to_string(&target).expect("target"),
            "v1",
            "{step}"
        );
        let leftovers = std::fs::read_dir(dir.path())
            .expect("dir")
            .filter(|entry| {
                entry
                    .as_ref()
                    .is_ok_and(|entry| entry.file_name().to_string_lossy().contains(".tmp"))
            })
            .count();
        assert_eq!(leftovers, 0, "{step}: temporary file removed");
    }
    assert!(matches!(write("v2"), MetadataIoCommitOutcome::Durable(_)));
    assert_eq!(std::fs::read_to_string(&target).expect("target"), "v2");
    fs.fail_at_os_error(MetadataIoOperation::SyncParent, 5);
    assert!(matches!(
        write("v3"),
        MetadataIoCommitOutcome::CommitOutcomeUnknown(_)
    ));
    fs.clear();
    let error = actor
        .submit_next("topics", &target, b"v4".to_vec(), soon())
        .expect_err("fenced until reconciled");
    assert_eq!(error.operation(), RuntimeOperation::MetadataResourceTarget);
}
