//! Value types of metadata persistence: deadlines, generations, requests,
//! configuration, outcomes and snapshots.

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::{RuntimeContractPolicy, RuntimeContractViolation, RuntimeError};

/// An absolute deadline for metadata admission and waits (Tokio's clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MetadataDeadline(Instant);

impl MetadataDeadline {
    /// `timeout` from now. A timeout the clock cannot represent (such as
    /// `Duration::MAX`) gives a deadline of *now*, as CONTRACTS specifies:
    /// metadata work is never waited for without bound.
    pub fn after(timeout: Duration) -> Self {
        let now = Instant::now();
        Self(now.checked_add(timeout).unwrap_or(now))
    }

    /// An absolute instant.
    pub const fn at(instant: Instant) -> Self {
        Self(instant)
    }

    /// The instant.
    pub const fn instant(self) -> Instant {
        self.0
    }

    /// Time left (zero once passed).
    pub fn remaining(self) -> Duration {
        self.0.saturating_duration_since(Instant::now())
    }

    /// True once passed.
    pub fn is_expired(self) -> bool {
        self.remaining().is_zero()
    }
}

/// The generation of a resource's snapshot: newer generations supersede
/// older ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct MetadataGeneration(u64);

impl MetadataGeneration {
    /// A generation.
    pub const fn new(generation: u64) -> Self {
        Self(generation)
    }

    /// Its number.
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl From<u64> for MetadataGeneration {
    fn from(generation: u64) -> Self {
        Self(generation)
    }
}

/// One immutable snapshot of a resource to persist at a target path.
#[derive(Debug, Clone)]
pub struct MetadataWriteRequest {
    pub(crate) resource: Arc<str>,
    pub(crate) generation: MetadataGeneration,
    pub(crate) target: Arc<Path>,
    pub(crate) bytes: Arc<[u8]>,
}

impl MetadataWriteRequest {
    /// A snapshot of `resource` at `generation`, written to `target`.
    pub fn new(
        resource: impl Into<Arc<str>>,
        generation: impl Into<MetadataGeneration>,
        target: impl Into<PathBuf>,
        bytes: impl Into<Vec<u8>>,
    ) -> Self {
        Self {
            resource: resource.into(),
            generation: generation.into(),
            target: Arc::from(target.into().as_path()),
            bytes: Arc::from(bytes.into()),
        }
    }

    /// The logical resource.
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// The snapshot's generation.
    pub const fn generation(&self) -> MetadataGeneration {
        self.generation
    }

    /// The target path.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Payload length in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// True for an empty payload.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// Actor admission limits.
///
/// The three `blocking_*` fields are kept for compatibility and never drive
/// execution: writes run on the context's shared `metadata_io()` lane,
/// configured through `RuntimeConfig::blocking_lane_policies.metadata_io`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataIoConfig {
    /// In-flight plus queued generations, across resources (default 1,024).
    pub max_pending_operations: usize,
    /// Payload bytes of in-flight plus queued generations (default 64 MiB).
    pub max_pending_bytes: usize,
    /// Retained; the lane's `queue_timeout` applies.
    pub blocking_queue_timeout: Duration,
    /// Retained; the lane's `task_timeout` applies.
    pub blocking_task_timeout: Duration,
    /// Retained; the lane's `warn_after` applies.
    pub blocking_warn_after: Duration,
}

impl Default for MetadataIoConfig {
    fn default() -> Self {
        Self {
            max_pending_operations: 1_024,
            max_pending_bytes: 64 << 20,
            blocking_queue_timeout: Duration::from_secs(5),
            blocking_task_timeout: Duration::from_secs(30),
            blocking_warn_after: Duration::from_secs(1),
        }
    }
}

impl MetadataIoConfig {
    /// Checks the limits.
    ///
    /// # Errors
    ///
    /// `InvalidMetadataConfiguration` naming `max-pending-operations-positive`,
    /// `max-pending-bytes-positive` or `blocking-task-timeout-positive`.
    pub fn validate(&self) -> Result<(), RuntimeContractViolation> {
        let fail = |policy| Err(RuntimeContractViolation::InvalidMetadataConfiguration { policy });
        if self.max_pending_operations == 0 {
            return fail(RuntimeContractPolicy::MetadataMaxPendingOperationsPositive);
        }
        if self.max_pending_bytes == 0 {
            return fail(RuntimeContractPolicy::MetadataMaxPendingBytesPositive);
        }
        if self.blocking_task_timeout.is_zero() {
            return fail(RuntimeContractPolicy::MetadataBlockingTaskTimeoutPositive);
        }
        Ok(())
    }

    /// A validated plan.
    ///
    /// # Errors
    ///
    /// As [`validate`](Self::validate).
    pub fn into_plan(self) -> Result<crate::MetadataIoPlan, RuntimeContractViolation> {
        self.validate()?;
        Ok(crate::MetadataIoPlan {
            config: self,
            max_concurrent_writes: NonZeroUsize::MIN,
        })
    }
}

/// How a write ended.
#[derive(Debug, Clone)]
pub enum MetadataIoCommitOutcome {
    /// Every step succeeded: this generation is durable.
    Durable(MetadataGeneration),
    /// A step before the atomic replacement failed: the target is unchanged.
    FailedBeforeCommit(RuntimeError),
    /// The replacement happened but the parent directory sync failed: the
    /// new content may or may not survive a crash. The target is fenced.
    CommitOutcomeUnknown(RuntimeError),
}

/// The answer to [`MetadataIoActor::submit`](crate::MetadataIoActor::submit).
#[derive(Debug)]
pub enum MetadataIoAdmissionOutcome {
    /// Accepted: wait for durability through the receipt.
    Accepted(crate::MetadataIoReceipt),
    /// The resource has pending work for another target, or the target
    /// belongs to another resource: the request comes back.
    TargetConflict(MetadataWriteRequest),
}

/// The answer to [`MetadataIoActor::submit_durable`](crate::MetadataIoActor::submit_durable).
#[derive(Debug)]
pub enum MetadataIoDurabilityOutcome {
    /// Durable at this generation (possibly newer than the request's).
    Durable(MetadataGeneration),
    /// See [`MetadataIoAdmissionOutcome::TargetConflict`].
    TargetConflict(MetadataWriteRequest),
}

/// One resource as the actor sees it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MetadataIoResourceSnapshot {
    /// The resource.
    pub resource: Arc<str>,
    /// Its target.
    pub target: Option<Arc<Path>>,
    /// The last durable generation.
    pub durable_generation: Option<MetadataGeneration>,
    /// The generation being written.
    pub in_flight_generation: Option<MetadataGeneration>,
    /// The generation waiting to be written.
    pub queued_generation: Option<MetadataGeneration>,
    /// Receipts waiting.
    pub waiter_count: usize,
}

/// The actor's admission state.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MetadataIoSnapshot {
    /// False after `stop_admission`.
    pub accepting: bool,
    /// In-flight plus queued generations.
    pub pending_operations: usize,
    /// Their payload bytes.
    pub pending_bytes: usize,
    /// The configured bound.
    pub max_pending_operations: usize,
    /// The configured bound.
    pub max_pending_bytes: usize,
    /// Every resource, sorted by name.
    pub resources: Vec<MetadataIoResourceSnapshot>,
}

/// What [`MetadataIoActor::shutdown_until`](crate::MetadataIoActor::shutdown_until) left.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MetadataIoShutdownReport {
    /// True when the deadline came before the coordinator finished.
    pub timed_out: bool,
    /// In-flight plus queued generations left.
    pub pending_operations: usize,
    /// Their bytes.
    pub pending_bytes: usize,
    /// Resources with an in-flight or queued generation.
    pub unfinished: Vec<MetadataIoResourceSnapshot>,
}

/// The limits in force for an actor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataIoEffectiveProfile {
    /// The shared lane's name.
    pub lane_name: String,
    /// The lane's concurrency.
    pub lane_max_concurrency: usize,
    /// The lane's queue depth.
    pub lane_max_queue_depth: usize,
    /// The lane's queue timeout (the actor's `blocking_queue_timeout` is not used).
    pub lane_queue_timeout: Duration,
    /// The lane's task timeout (the actor's `blocking_task_timeout` is not used).
    pub lane_task_timeout: Duration,
    /// Pending operations bound.
    pub max_pending_operations: usize,
    /// Pending bytes bound.
    pub max_pending_bytes: usize,
    /// Waiters bound per actor: `max(4·max_pending_operations, 1)`.
    pub max_waiters: usize,
    /// `min(planned, lane concurrency).max(1)`.
    pub max_concurrent_writes: usize,
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_unrepresentable_timeout_is_a_deadline_of_now() {
        let deadline = MetadataDeadline::after(Duration::MAX);
        assert!(deadline.is_expired(), "overflow → now (CONTRACTS)");
        assert_eq!(deadline.remaining(), Duration::ZERO);
        let later = MetadataDeadline::after(Duration::from_secs(5));
        assert_eq!(later.remaining(), Duration::from_secs(5));
    }
}
