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
    /// `Duration::MAX`) gives a deadline of *now*: metadata work is never
    /// waited for without bound.
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

/// The same instant: both deadlines run on Tokio's clock, so a metadata
/// wait can share the shutdown's deadline and back.
impl From<crate::shutdown_deadline::ShutdownDeadline> for MetadataDeadline {
    fn from(deadline: crate::shutdown_deadline::ShutdownDeadline) -> Self {
        Self(deadline.tokio_instant())
    }
}

impl From<MetadataDeadline> for crate::shutdown_deadline::ShutdownDeadline {
    fn from(deadline: MetadataDeadline) -> Self {
        Self::from_tokio(deadline.0)
    }
}

impl From<Instant> for MetadataDeadline {
    fn from(instant: Instant) -> Self {
        Self(instant)
    }
}

impl From<std::time::Instant> for MetadataDeadline {
    fn from(instant: std::time::Instant) -> Self {
        Self(Instant::from_std(instant))
    }
}

impl From<MetadataDeadline> for Instant {
    fn from(deadline: MetadataDeadline) -> Self {
        deadline.0
    }
}

impl From<MetadataDeadline> for std::time::Instant {
    fn from(deadline: MetadataDeadline) -> Self {
        deadline.0.into_std()
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
    pub(crate) lane_deadline: Option<MetadataDeadline>,
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
            lane_deadline: None,
        }
    }

    /// Bounds the blocking phase of this snapshot's write: a write that has
    /// not started on the metadata lane by `deadline` is never started and
    /// fails before commit (`TimedOut`); one already running is not
    /// interrupted (a blocking write cannot be), its result still arrives
    /// and the next generation waits for it. Only tightens: the earlier of
    /// two deadlines stays. An already expired deadline is refused at
    /// admission.
    #[must_use]
    pub fn with_lane_deadline(mut self, deadline: MetadataDeadline) -> Self {
        self.lane_deadline = Some(
            self.lane_deadline
                .map_or(deadline, |current| current.min(deadline)),
        );
        self
    }

    /// The lane deadline, if any.
    pub const fn lane_deadline(&self) -> Option<MetadataDeadline> {
        self.lane_deadline
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
    pub fn into_plan(self) -> Result<crate::metadata_io::MetadataIoPlan, RuntimeContractViolation> {
        self.validate()?;
        Ok(crate::metadata_io::MetadataIoPlan {
            config: self,
            max_concurrent_writes: NonZeroUsize::MIN,
        })
    }
}

/// How a write ended.
#[derive(Debug, Clone)]
#[must_use = "the outcome says whether the commit became durable"]
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
#[must_use = "a refused submission is not written: check the outcome"]
pub enum MetadataIoAdmissionOutcome {
    /// Accepted: wait for durability through the receipt.
    Accepted(crate::metadata_io::MetadataIoReceipt),
    /// The resource has pending work for another target, or the target
    /// belongs to another resource: the request comes back.
    TargetConflict(MetadataWriteRequest),
}

impl MetadataIoCommitOutcome {
    /// Nothing can be said about the target without looking at it: the
    /// outcome is unknown.
    pub const fn requires_reconciliation(&self) -> bool {
        matches!(self, Self::CommitOutcomeUnknown(_))
    }
}

/// The answer to [`MetadataIoActor::submit_commit`](crate::MetadataIoActor::submit_commit).
#[derive(Debug)]
#[must_use = "a refused commit is not written: check the outcome"]
pub enum MetadataIoCommitAdmissionOutcome {
    /// Admitted and settled.
    Completed(MetadataIoCommitOutcome),
    /// See [`MetadataIoAdmissionOutcome::TargetConflict`].
    TargetConflict(MetadataWriteRequest),
}

/// What an observer learned about a generation by its deadline
/// ([`MetadataIoReceipt::observe_until`](crate::MetadataIoReceipt::observe_until),
/// [`MetadataIoActor::submit_observed`](crate::MetadataIoActor::submit_observed)).
#[derive(Debug)]
pub enum MetadataIoCommitObservation {
    /// The write covering `generation` settled with `outcome`.
    Settled {
        /// The observed generation.
        generation: MetadataGeneration,
        /// How the write covering it ended.
        outcome: MetadataIoCommitOutcome,
    },
    /// The deadline passed, or the actor stopped, before the write covering
    /// `generation` settled. The write itself was not cancelled: look at
    /// the target (or observe again) before assuming anything.
    Unobserved {
        /// The observed generation.
        generation: MetadataGeneration,
    },
    /// Not admitted: see [`MetadataIoAdmissionOutcome::TargetConflict`].
    /// Never the answer of a receipt.
    TargetConflict(MetadataWriteRequest),
}

impl MetadataIoCommitObservation {
    /// The target's state is unknown: unobserved, or settled with an
    /// unknown commit outcome.
    pub const fn requires_reconciliation(&self) -> bool {
        match self {
            Self::Settled { outcome, .. } => outcome.requires_reconciliation(),
            Self::Unobserved { .. } => true,
            Self::TargetConflict(_) => false,
        }
    }

    /// The settled outcome, if any (a clone: the observation stays whole).
    pub fn settled(&self) -> Option<MetadataIoCommitOutcome> {
        match self {
            Self::Settled { outcome, .. } => Some(outcome.clone()),
            Self::Unobserved { .. } | Self::TargetConflict(_) => None,
        }
    }

    /// The generation observed (a conflicting request's own).
    pub const fn generation(&self) -> MetadataGeneration {
        match self {
            Self::Settled { generation, .. } | Self::Unobserved { generation } => *generation,
            Self::TargetConflict(request) => request.generation,
        }
    }

    /// The generation left unobserved, if it was.
    pub const fn unobserved_generation(&self) -> Option<MetadataGeneration> {
        match self {
            Self::Unobserved { generation } => Some(*generation),
            Self::Settled { .. } | Self::TargetConflict(_) => None,
        }
    }
}

/// The answer to [`MetadataIoActor::submit_durable`](crate::MetadataIoActor::submit_durable).
#[derive(Debug)]
#[must_use = "the outcome says whether the data is durable"]
pub enum MetadataIoDurabilityOutcome {
    /// Durable at this generation (possibly newer than the request's).
    Durable(MetadataGeneration),
    /// See [`MetadataIoAdmissionOutcome::TargetConflict`].
    TargetConflict(MetadataWriteRequest),
}

/// What admission knew of a submitted generation
/// ([`MetadataIoReceipt::durability`](crate::MetadataIoReceipt::durability)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum MetadataDurability {
    /// Admitted: a write (in flight, queued or coalesced) will cover it;
    /// wait on the receipt for its outcome.
    Accepted,
    /// Already durable when it was submitted: the resource's durable
    /// generation (this one or newer) covered it, and nothing is written.
    Durable(MetadataGeneration),
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
#[must_use = "the report is the shutdown's evidence: log, return or inspect it"]
pub struct MetadataIoShutdownReport {
    /// True when the deadline came before the coordinator finished.
    pub timed_out: bool,
    /// In-flight plus queued generations left.
    pub pending_operations: usize,
    /// Their bytes.
    pub pending_bytes: usize,
    /// Resources with an in-flight or queued generation.
    pub unfinished: Vec<MetadataIoResourceSnapshot>,
    /// Resources whose last write failed: accepted data that did not
    /// become durable (no later write of the resource succeeded).
    pub not_durable: Vec<crate::metadata_io::MetadataStorageFailure>,
}

/// The limits in force for an actor
/// ([`MetadataIoActor::effective_profile`](crate::MetadataIoActor::effective_profile)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataIoEffectiveProfile {
    /// The shared `MetadataIo` lane the writes run on.
    pub blocking_lane: MetadataIoBlockingLaneProfile,
    /// The actor's own admission limits.
    pub actor_limits: MetadataIoActorLimitsProfile,
    /// The three retained `blocking_*` fields of [`MetadataIoConfig`]: what
    /// was configured and what applies instead.
    pub legacy_blocking_fields: [MetadataIoLegacyBlockingField; 3],
}

/// The metadata lane's policy, which bounds every write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataIoBlockingLaneProfile {
    /// The lane's name.
    pub name: String,
    /// Writes running at once on the lane (all actors of the owner).
    pub max_concurrency: usize,
    /// Writes waiting for a lane slot.
    pub max_queue_depth: usize,
    /// How long a write may wait for a slot.
    pub queue_timeout: Duration,
    /// How long a caller waits for a running write.
    pub task_timeout: Duration,
    /// When a slow write is logged.
    pub warn_after: Duration,
}

/// The actor's admission limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataIoActorLimitsProfile {
    /// In-flight plus queued generations.
    pub max_pending_operations: usize,
    /// Their payload bytes.
    pub max_pending_bytes: usize,
    /// Waiting receipts, per resource and per actor:
    /// `max(4 · max_pending_operations, 1)`.
    pub max_waiters: usize,
    /// Resources written at once: `min(planned, lane concurrency).max(1)`.
    pub max_concurrent_writes: usize,
}

/// One retained `blocking_*` field of [`MetadataIoConfig`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataIoLegacyBlockingField {
    /// The field's name (`blocking_queue_timeout`, ...).
    pub field: &'static str,
    /// The value the configuration holds.
    pub configured: Duration,
    /// The value that applies.
    pub effective: Duration,
    /// Where the applied value comes from.
    pub effective_source: MetadataLimitSource,
}

/// Where a limit in force comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetadataLimitSource {
    /// `RuntimeConfig::blocking_lane_policies.metadata_io`.
    BlockingLanePolicy,
    /// The actor's [`MetadataIoConfig`].
    ActorConfiguration,
}

impl MetadataIoConfig {
    /// The retained `blocking_*` fields against the lane policy that applies.
    pub(crate) fn legacy_fields(
        &self,
        lane: &MetadataIoBlockingLaneProfile,
    ) -> [MetadataIoLegacyBlockingField; 3] {
        let field = |field, configured, effective| MetadataIoLegacyBlockingField {
            field,
            configured,
            effective,
            effective_source: MetadataLimitSource::BlockingLanePolicy,
        };
        [
            field(
                "blocking_queue_timeout",
                self.blocking_queue_timeout,
                lane.queue_timeout,
            ),
            field(
                "blocking_task_timeout",
                self.blocking_task_timeout,
                lane.task_timeout,
            ),
            field(
                "blocking_warn_after",
                self.blocking_warn_after,
                lane.warn_after,
            ),
        ]
    }

    /// The names of the retained `blocking_*` fields set to something else
    /// than their defaults (they have no effect).
    pub(crate) fn changed_legacy_fields(&self) -> Vec<&'static str> {
        let default = Self::default();
        [
            (
                "blocking_queue_timeout",
                self.blocking_queue_timeout != default.blocking_queue_timeout,
            ),
            (
                "blocking_task_timeout",
                self.blocking_task_timeout != default.blocking_task_timeout,
            ),
            (
                "blocking_warn_after",
                self.blocking_warn_after != default.blocking_warn_after,
            ),
        ]
        .into_iter()
        .filter_map(|(name, changed)| changed.then_some(name))
        .collect()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_unrepresentable_timeout_is_a_deadline_of_now() {
        let deadline = MetadataDeadline::after(Duration::MAX);
        assert!(deadline.is_expired(), "overflow → now");
        assert_eq!(deadline.remaining(), Duration::ZERO);
        let later = MetadataDeadline::after(Duration::from_secs(5));
        assert_eq!(later.remaining(), Duration::from_secs(5));
    }
}
