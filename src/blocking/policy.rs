//! Per-lane blocking policies (the lane identity and kinds are the
//! reports' vocabulary: `shutdown_report/blocking.rs`).
//!
//! Invariant: a policy is validated without side effects, reporting its first
//! broken rule in the documented order; the lane policies are validated in
//! `BlockingLane::ALL` order, the first violation winning.

use std::time::Duration;

use crate::error::{RuntimeContractPolicy, RuntimeContractViolation};
use crate::shutdown_report::BlockingLane;

/// Limits of one blocking pool (a managed lane or an isolated executor).
///
/// | Field | Meaning | Default |
/// | --- | --- | --- |
/// | `name` | diagnostics name | `"rocketmq-blocking"` |
/// | `max_concurrency` | closures running at once | 64 |
/// | `max_queue_depth` | submissions waiting for a slot | 256 |
/// | `queue_timeout` | longest wait for a slot | 5 s |
/// | `task_timeout` | longest wait for a running closure's result | 30 s |
/// | `warn_after` | running time after which a closure is logged as slow | 1 s |
///
/// A closure running longer than `warn_after` gets exactly one `tracing`
/// warning naming its lane, pool and task: while its caller still waits,
/// or as it exits when the caller stopped waiting earlier.
///
/// Call [`validate`](Self::validate) (the runtime does so when it builds the
/// lanes) before relying on a hand-built policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockingPoolPolicy {
    /// Name used in snapshots, reports and logs.
    pub name: String,
    /// Maximum number of closures running at once; at least 1.
    pub max_concurrency: usize,
    /// Maximum number of submissions waiting for a slot; at least 1.
    pub max_queue_depth: usize,
    /// Longest time a submission waits in the queue for a slot.
    pub queue_timeout: Duration,
    /// Longest time a caller waits for a running closure's result. A closure
    /// cannot be interrupted: past this timeout it is reported as timed out
    /// but still running.
    pub task_timeout: Duration,
    /// Running time after which a closure is reported as slow.
    pub warn_after: Duration,
}

impl BlockingPoolPolicy {
    /// Checks the policy without side effects.
    ///
    /// In order: `max_concurrency == 0` →
    /// [`BlockingMaxConcurrencyPositive`](RuntimeContractPolicy::BlockingMaxConcurrencyPositive);
    /// `max_queue_depth == 0` →
    /// [`BlockingMaxQueueDepthPositive`](RuntimeContractPolicy::BlockingMaxQueueDepthPositive);
    /// `queue_timeout + task_timeout` not representable as a `Duration`, or
    /// not as a deadline from now →
    /// [`BlockingTimeoutRepresentable`](RuntimeContractPolicy::BlockingTimeoutRepresentable).
    /// Each failure is a [`RuntimeContractViolation::InvalidConfiguration`].
    pub fn validate(&self) -> Result<(), RuntimeContractViolation> {
        if self.max_concurrency == 0 {
            return Err(RuntimeContractViolation::configuration(
                RuntimeContractPolicy::BlockingMaxConcurrencyPositive,
            ));
        }
        if self.max_queue_depth == 0 {
            return Err(RuntimeContractViolation::configuration(
                RuntimeContractPolicy::BlockingMaxQueueDepthPositive,
            ));
        }
        let representable = self
            .queue_timeout
            .checked_add(self.task_timeout)
            .and_then(|total| tokio::time::Instant::now().checked_add(total))
            .is_some();
        if !representable {
            return Err(RuntimeContractViolation::configuration(
                RuntimeContractPolicy::BlockingTimeoutRepresentable,
            ));
        }
        Ok(())
    }

    fn named(&self, name: String, max_concurrency: usize, max_queue_depth: usize) -> Self {
        Self {
            name,
            max_concurrency,
            max_queue_depth,
            ..self.clone()
        }
    }
}

impl Default for BlockingPoolPolicy {
    fn default() -> Self {
        Self {
            name: String::from("rocketmq-blocking"),
            max_concurrency: 64,
            max_queue_depth: 256,
            queue_timeout: Duration::from_secs(5),
            task_timeout: Duration::from_secs(30),
            warn_after: Duration::from_secs(1),
        }
    }
}

/// The policies of the three managed blocking lanes.
///
/// `Default` is [`for_parallelism`](Self::for_parallelism) with
/// `std::thread::available_parallelism()` (4 when unknown).
/// `RuntimeConfig` additionally caps each lane's `max_concurrency` at its
/// `max_blocking_threads`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockingLanePolicies {
    /// Policy of [`BlockingLane::StorageIo`].
    pub storage_io: BlockingPoolPolicy,
    /// Policy of [`BlockingLane::MetadataIo`].
    pub metadata_io: BlockingPoolPolicy,
    /// Policy of [`BlockingLane::CpuCrypto`].
    pub cpu_crypto: BlockingPoolPolicy,
}

impl BlockingLanePolicies {
    /// The same limits on every lane; each lane's name is `policy.name`
    /// suffixed with `.storage-io`, `.metadata-io` or `.cpu-crypto`.
    pub fn uniform(policy: BlockingPoolPolicy) -> Self {
        let lane = |lane: BlockingLane| {
            let name = format!("{}.{}", policy.name, lane.as_str());
            policy.named(name, policy.max_concurrency, policy.max_queue_depth)
        };
        Self {
            storage_io: lane(BlockingLane::StorageIo),
            metadata_io: lane(BlockingLane::MetadataIo),
            cpu_crypto: lane(BlockingLane::CpuCrypto),
        }
    }

    /// Deterministic lane limits for `parallelism` CPUs (saturating):
    ///
    /// | Lane | `max_concurrency` | `max_queue_depth` |
    /// | --- | --- | --- |
    /// | storage-io | `max(4p, 4)` | `max(16p, 16)` |
    /// | metadata-io | `max(2p, 2)` | `max(8p, 8)` |
    /// | cpu-crypto | `max(p, 2)` | `max(4p, 8)` |
    ///
    /// Names are `rocketmq-blocking.<lane>`; timeouts are the
    /// [`BlockingPoolPolicy`] defaults.
    ///
    /// Sizing: a lane holds at most `max_concurrency + max_queue_depth`
    /// submissions at once (running plus waiting); the next is refused at
    /// once with [`CapacityExhausted`](crate::RuntimeErrorKind::CapacityExhausted),
    /// whose context ([`LaneFull`](crate::RuntimeErrorContext::LaneFull))
    /// names the lane, its limits and the setting to raise. For 2 CPUs the
    /// storage lane runs 8 and queues 32: of 64 submitters arriving
    /// together, 24 are refused. Give `max_queue_depth` at least
    /// `N - max_concurrency` for `N` submitters that can arrive together,
    /// or bound them upstream (a `WaitUntilDeadline` queue).
    pub fn for_parallelism(parallelism: usize) -> Self {
        let base = BlockingPoolPolicy::default();
        let lane = |lane: BlockingLane, concurrency: usize, depth: usize| {
            base.named(
                format!("{}.{}", base.name, lane.as_str()),
                concurrency,
                depth,
            )
        };
        let p = parallelism;
        Self {
            storage_io: lane(
                BlockingLane::StorageIo,
                p.saturating_mul(4).max(4),
                p.saturating_mul(16).max(16),
            ),
            metadata_io: lane(
                BlockingLane::MetadataIo,
                p.saturating_mul(2).max(2),
                p.saturating_mul(8).max(8),
            ),
            cpu_crypto: lane(
                BlockingLane::CpuCrypto,
                p.max(2),
                p.saturating_mul(4).max(8),
            ),
        }
    }

    /// Validates each lane in [`BlockingLane::ALL`] order and returns the
    /// first violation (see [`BlockingPoolPolicy::validate`]).
    pub fn validate(&self) -> Result<(), RuntimeContractViolation> {
        self.iter().try_for_each(|(_, policy)| policy.validate())
    }

    /// The policy of `lane`.
    pub fn get(&self, lane: BlockingLane) -> &BlockingPoolPolicy {
        match lane {
            BlockingLane::StorageIo => &self.storage_io,
            BlockingLane::MetadataIo => &self.metadata_io,
            BlockingLane::CpuCrypto => &self.cpu_crypto,
        }
    }

    /// The policy of `lane`, mutably.
    pub fn get_mut(&mut self, lane: BlockingLane) -> &mut BlockingPoolPolicy {
        match lane {
            BlockingLane::StorageIo => &mut self.storage_io,
            BlockingLane::MetadataIo => &mut self.metadata_io,
            BlockingLane::CpuCrypto => &mut self.cpu_crypto,
        }
    }

    /// Every lane with its policy, in [`BlockingLane::ALL`] order.
    pub fn iter(&self) -> impl Iterator<Item = (BlockingLane, &BlockingPoolPolicy)> + '_ {
        BlockingLane::ALL
            .into_iter()
            .map(move |lane| (lane, self.get(lane)))
    }

    /// Caps every lane's `max_concurrency` at `limit`.
    pub(crate) fn cap_concurrency(&mut self, limit: usize) {
        for lane in BlockingLane::ALL {
            let policy = self.get_mut(lane);
            policy.max_concurrency = policy.max_concurrency.min(limit);
        }
    }
}

impl Default for BlockingLanePolicies {
    fn default() -> Self {
        Self::for_parallelism(default_parallelism())
    }
}

/// `std::thread::available_parallelism()`, or 4 when it is unknown: the
/// parallelism every default profile (lanes and `RuntimeConfig`) derives
/// from.
pub(crate) fn default_parallelism() -> usize {
    std::thread::available_parallelism().map_or(4, |p| p.get())
}
