//! Scale evidence: 1,024 retired metadata histories through a registry of
//! capacity 1. Uses the recording (in-memory) file system: the metadata
//! actor suite and bench hold the real-persistence evidence.

mod support;

#[path = "support/metadata.rs"]
mod metadata;

use std::num::NonZeroUsize;
use std::sync::Arc;

use metadata::{accepted, actor, payload, soon, RecordingFs};
use rocketmq_runtime::{
    MetadataIoCommitOutcome, MetadataTargetIdentity, MetadataTargetRetirementOutcome,
    MetadataWriteRequest, RuntimeConfig, RuntimeOwner,
};

const ACTORS: u64 = 1_024;

/// One target path, a registry of capacity 1 and 1,024 actors in
/// sequence, each writing one generation, stopped and retiring its
/// history: every old receipt still resolves to its own durable
/// generation, no retired identity comes back, and the registry returns to
/// one retained target.
#[test]
fn a_thousand_retired_histories_through_one_slot() {
    let owner = RuntimeOwner::plan(RuntimeConfig::for_parallelism("scale", 2))
        .expect("valid")
        .with_metadata_target_capacity(NonZeroUsize::MIN)
        .build()
        .expect("builds");
    let broker = owner.root_context().component("broker");
    let fs = Arc::new(RecordingFs::default());
    let path = "/tmp/rocketmq-test/scale/offsets.json";
    let mut receipts = Vec::new();
    let mut identities: Vec<MetadataTargetIdentity> = Vec::new();
    for generation in 1..=ACTORS {
        let actor = actor(&broker, &fs, 1);
        assert_eq!(
            actor.confirmed_durable_generation("offsets"),
            None,
            "a retired history is not visible to the next actor"
        );
        let request =
            MetadataWriteRequest::new("offsets", generation, path, payload(generation, 16));
        let receipt = accepted(actor.submit(request, soon()));
        let identity = receipt.target_identity();
        assert!(
            identities.iter().all(|retired| *retired != identity),
            "generation {generation} revived a retired identity"
        );
        identities.push(identity);
        let stats = owner.resources().metadata_target_stats();
        assert_eq!((stats.retained_targets, stats.live_owners), (1, 1));
        let report = owner.block_on(actor.shutdown_until(soon()));
        assert!(!report.timed_out && report.unfinished.is_empty());
        assert_eq!(
            actor
                .retire_target_for_new_identity("offsets")
                .expect("an outcome"),
            MetadataTargetRetirementOutcome::Retired,
            "generation {generation}"
        );
        assert_eq!(
            owner.resources().metadata_target_stats().retained_targets,
            0
        );
        receipts.push((generation, receipt));
    }
    for (generation, receipt) in receipts {
        let observation = owner.block_on(receipt.observe_until(soon()));
        match observation.settled() {
            Some(MetadataIoCommitOutcome::Durable(durable)) => {
                assert_eq!(durable.get(), generation, "its own history's generation")
            }
            other => panic!("generation {generation}: {other:?}"),
        }
    }
    assert_eq!(
        fs.writes().len(),
        ACTORS as usize,
        "every generation was written once"
    );
    // The slot serves a new identity again.
    let last = actor(&broker, &fs, 1);
    let receipt = accepted(last.submit(
        MetadataWriteRequest::new("offsets", 1, path, payload(1, 16)),
        soon(),
    ));
    assert!(identities
        .iter()
        .all(|retired| *retired != receipt.target_identity()));
    owner.block_on(receipt.wait_until(soon())).expect("durable");
    let stats = owner.resources().metadata_target_stats();
    assert_eq!((stats.retained_targets, stats.remaining_capacity), (1, 0));
}
