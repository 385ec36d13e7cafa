//! Scale evidence: 1,024 retired metadata histories through a registry of
//! capacity 1 (the recording, in-memory file system: the metadata actor
//! suite and bench hold the real-persistence evidence), and 5,000
//! generations of a nested scope with a dynamic budget key under churn.
//!
//! Also the ignored platform check the README names,
//! `detects_actual_cgroup_limit_and_uses_it_in_owner_planning`: run its
//! executable inside a real memory-limited cgroup with
//! `ROCKETMQ_TEST_CGROUP_BYTES` set to the limit (the command is in
//! CONTRIBUTING.md). Without that variable it fails, so a run outside a
//! limited cgroup is never mistaken for a pass.

mod support;

#[path = "support/metadata.rs"]
mod metadata;

use std::num::NonZeroUsize;
use std::sync::Arc;

use metadata::{accepted, actor, payload, soon, RecordingFs};
use rocketmq_runtime::{
    BudgetClass, BudgetLimit, DynamicKeyAdmissionRejection, FullPolicy, MetadataIoCommitOutcome,
    MetadataTargetIdentity, MetadataTargetRetirementOutcome, MetadataWriteRequest, RuntimeConfig,
    RuntimeOwner, TaskKind,
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
        assert_eq!(stats.retained_targets, 1);
        assert!(
            stats.live_owners <= 1,
            "only a running write holds the target"
        );
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

const GENERATIONS: usize = 5_000;

/// Resident set size of this process in bytes (Linux), if readable.
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4_096)
}

/// 5,000 generations of a nested scope (a component with a child
/// component running one task) holding a dynamic budget key of capacity 1:
/// each generation uses the key, is shut down, and retires the key; the
/// stale handles refuse, every admission is released, the name and the
/// child links come back, and the resident set does not grow beyond noise.
#[test]
fn nested_scopes_and_dynamic_keys_churn_without_growth() {
    let owner = RuntimeOwner::plan(RuntimeConfig::for_parallelism("churn", 2))
        .expect("valid")
        .build()
        .expect("builds");
    let tenants = owner.root_context().component("tenants");
    let process = owner.root_context().process_budget();
    let children_at_start = tenants.task_group().component_count();
    let mut stale = Vec::new();
    let mut rss_after_warmup = None;
    for generation in 0..GENERATIONS {
        if generation == 100 {
            rss_after_warmup = resident_bytes();
        }
        let scope = tenants.component("tenant");
        let inner = scope.component("inbox");
        let token = inner.task_group().cancellation_token();
        inner
            .spawn("consumer", TaskKind::Worker, async move {
                token.cancelled().await
            })
            .expect("open");
        let key = process
            .register_dynamic_child("tenant", BudgetLimit::new(1, 1_024, FullPolicy::Reject))
            .expect("the name was released by the previous generation");
        let permit = key
            .try_acquire(100, BudgetClass::Data)
            .expect("room for one");
        assert!(
            key.try_acquire(100, BudgetClass::Data).is_err(),
            "capacity 1"
        );
        drop(permit);
        let report = owner.block_on(
            scope
                .task_group()
                .shutdown(std::time::Duration::from_secs(5)),
        );
        assert!(report.is_healthy(), "{}", report.to_json());
        let retirement = owner.block_on(
            key.retire_until(tokio::time::Instant::now() + std::time::Duration::from_secs(5)),
        );
        assert!(retirement.released);
        if generation % 1_000 == 0 {
            stale.push((key, scope));
        }
    }
    let rss_at_end = resident_bytes();
    for (key, scope) in &stale {
        assert!(key.is_closed() && key.budget().is_closed());
        assert_eq!(
            key.try_acquire(1, BudgetClass::Data).expect_err("closed"),
            DynamicKeyAdmissionRejection::Closed
        );
        assert!(scope.spawn_service("late", async {}).is_err());
    }
    drop(stale);
    let snapshot = process.snapshot();
    assert_eq!(snapshot.admitted_count, snapshot.released_count);
    assert_eq!(snapshot.current_count, 0);
    // A settled task's Tokio cell lets go of its group just after the
    // settlement that ended the shutdown: the links leave within moments,
    // not necessarily before `shutdown` returned.
    support::spin_until("the scopes leave", || {
        tenants.task_group().component_count() == children_at_start
    });
    assert_eq!(
        tenants.task_group().component_count(),
        children_at_start,
        "every shut-down scope left its parent"
    );
    if let (Some(before), Some(after)) = (rss_after_warmup, rss_at_end) {
        let growth = after.saturating_sub(before);
        println!(
            "RSS after 100 generations {before} B, after {GENERATIONS}: {after} B (+{growth} B)"
        );
        assert!(growth < 8 << 20, "resident set grew by {growth} bytes");
    }
    assert!(owner
        .shutdown_runtime_blocking()
        .expect("outside Tokio")
        .is_healthy());
}

/// The README's platform check (Linux, ignored): inside a cgroup whose hard
/// memory limit is `ROCKETMQ_TEST_CGROUP_BYTES`, detection names that limit
/// and a cgroup source, and an owner built with the default plan charges
/// exactly that budget: the managed memory and the process budget's bytes.
#[cfg(target_os = "linux")]
#[test]
#[ignore = "needs a memory-limited cgroup; see CONTRIBUTING.md for the command"]
fn detects_actual_cgroup_limit_and_uses_it_in_owner_planning() {
    use rocketmq_runtime::{MemoryLimitSource, ProcessMemoryLimit};

    let expected: u64 = std::env::var("ROCKETMQ_TEST_CGROUP_BYTES")
        .expect("run inside a limited cgroup with ROCKETMQ_TEST_CGROUP_BYTES set to its limit")
        .trim()
        .parse()
        .expect("ROCKETMQ_TEST_CGROUP_BYTES is a byte count");
    assert!(
        std::env::var_os("ROCKETMQ_PROCESS_MEMORY_LIMIT_BYTES").is_none(),
        "unset ROCKETMQ_PROCESS_MEMORY_LIMIT_BYTES: it overrides cgroup discovery"
    );
    let detected = ProcessMemoryLimit::detect().expect("a cgroup limit is detected");
    assert_eq!(detected.bytes(), expected, "detected {detected:?}");
    assert!(
        matches!(
            detected.source(),
            MemoryLimitSource::CgroupV2 | MemoryLimitSource::CgroupV1
        ),
        "the limit comes from a cgroup, not {}",
        detected.source()
    );
    let owner = RuntimeOwner::plan(RuntimeConfig::for_parallelism("cgroup", 2))
        .expect("valid")
        .build()
        .expect("builds under the limit");
    let resources = owner.resources();
    assert_eq!(resources.memory_limit(), detected);
    let budget = resources.memory_budget();
    assert_eq!(budget.effective_limit_bytes(), expected);
    assert_eq!(
        budget.managed_bytes(),
        expected,
        "the whole limit by default"
    );
    assert_eq!(
        resources.process_budget().limit().capacity.bytes as u64,
        expected,
        "the process budget charges the detected limit"
    );
    println!(
        "detected {} bytes from {}",
        detected.bytes(),
        detected.source()
    );
    let _ = owner.shutdown_runtime_blocking().expect("shuts down");
}
