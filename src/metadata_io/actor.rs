//! The metadata actor: synchronous admission, per-resource generations,
//! coalescing, fair scheduling of writes on the shared `MetadataIo` lane,
//! honest commit outcomes and budget charging.
//!
//! A write, in order:
//!
//! 1. `submit` (synchronous, under the actor lock; `admission.rs`): deadline,
//!    admission and target checks; then resolve at once (the generation is
//!    already durable), attach a waiter (covered by the in-flight or queued
//!    generation), replace the queued snapshot, or queue a new one (charging
//!    the actor's child of the process budget) and list the resource as
//!    ready;
//! 2. while write slots are free, the ready resources are started (by the
//!    submitter when a slot is free, otherwise by the coordinator): the
//!    queued snapshot becomes in flight, and its closure (payload + permit)
//!    goes to the `MetadataIo` lane (`writes.rs`);
//! 3. the closure persists and reports its result as it exits (payload and
//!    permit released there). Completion, under the lock: clear in flight,
//!    advance the durable generation or fence, resolve covered waiters,
//!    re-list the resource behind newer arrivals, wake the coordinator.
//!
//! Invariants:
//!
//! 1. One lock (`ActorState`) decides admission and completion. Per resource
//!    there is at most one generation in flight and one queued.
//! 2. A newer submission replaces the queued one; its permit is resized by
//!    the delta (growth only by the delta), and a failed growth keeps the old
//!    request and its charge.
//! 3. A waiter is resolved by the first completed write with a generation at
//!    least its own, with that write's outcome.
//! 4. A resource with queued work waits in a FIFO `ready` list; after a write
//!    completes, the resource goes to the back of that list, so newly arrived
//!    resources are written before its next generation.
//! 5. A `SyncParent` failure (after the rename: the new content is visible,
//!    its durability unknown) is reported as "commit outcome unknown" and
//!    fences the target for good: every new submission to it, even of a
//!    generation already durable, is refused with `ContextUnavailable`
//!    (`MetadataResourceTarget`). A generation queued before the fence
//!    still runs, as in the original design: its write replaces the target
//!    again and its waiters get that write's outcome (a durable one records
//!    its generation; the fence stays).
//! 6. The write closure owns its payload, its permit and a clone of the
//!    target's registration, records its outcome in the target's history
//!    and reports from inside when it exits, so a caller timeout on the lane
//!    never lets the next generation of the same resource overlap it. It
//!    holds the actor only weakly: the actor and its coordinator can be
//!    destroyed while it runs ([`MetadataIoObserver::snapshot`] is then
//!    `None`), and the write still ends, releases its charge and records
//!    its outcome. A closure that never runs (refused, or discarded by
//!    Tokio) settles the write as failed from its drop guard; a claim flag
//!    makes exactly one side report.
//! 7. When the coordinator ends, also by an abort (`CoordinatorExit`),
//!    admission stops, queued generations are dropped (their permits go
//!    back) and the waiters no in-flight write covers are closed
//!    (`Closed(MetadataWorkerStopped)`).
//! 8. A resource holds its target's registration (the live writer, in the
//!    owner's registry) exactly while it has a generation queued or in
//!    flight, and each running closure holds a clone: the target is free
//!    once the last write ends and nothing is queued, before any waiter is
//!    told. So another actor of the owner never writes a target while an
//!    older generation's closure still runs, and may write it as soon as a
//!    write is durable, while this actor is still open.
//! 9. A resource moves to another target only without pending work
//!    (`targets.rs`, invariant 2): the new target is claimed, the old one released (its
//!    history stays in the owner's registry, `metadata_io/targets.rs`).
//! 10. Target state (durable generation, fence, live writer) is read from
//!     and written to the target's history in the registry; the actor keeps
//!     only the durable generation it last saw, to refuse retiring a history
//!     another actor wrote after it (`history.rs`).
//! 11. A timed-out `shutdown_until` only ends the wait: it lists every
//!     resource with a generation in flight or queued as unfinished, counts
//!     both in its pending figures, and drops nothing (the coordinator keeps
//!     writing them; invariant 7 applies when it ends).
//! 12. The last `MetadataIoActor` handle dropped stops admission; the
//!     accepted work drains and the coordinator ends.

use std::fmt;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{oneshot, Notify};

use crate::blocking::BlockingExecutor;
use crate::durable::MetadataFileSystem;
use crate::error::{RuntimeError, RuntimeOperation, RuntimeResult};
use crate::loom::{AtomicBool, AtomicU8, AtomicUsize, Mutex, Ordering, StaticAtomicU64};
use crate::metadata_io::targets::MetadataTargetRegistry;
use crate::metadata_io::types::{
    MetadataDeadline, MetadataGeneration, MetadataIoActorLimitsProfile, MetadataIoAdmissionOutcome,
    MetadataIoBlockingLaneProfile, MetadataIoCommitOutcome, MetadataIoConfig,
    MetadataIoDurabilityOutcome, MetadataIoEffectiveProfile, MetadataIoResourceSnapshot,
    MetadataIoShutdownReport, MetadataIoSnapshot, MetadataWriteRequest,
};
use crate::resource_budget::{BudgetLimit, FullPolicy, ResourceBudget, ResourcePermit};
use crate::shutdown_deadline::ShutdownDeadline;
use crate::task_group::TaskGroup;
use crate::task_identity::TaskKind;

mod admission;
mod commit;
mod health;
mod history;
mod lifecycle;
mod receipt;
mod writes;

use admission::{ActorShared, ActorState, Queued, Resource};
pub use commit::MetadataIoObserver;
pub use health::MetadataStorageFailure;
use health::ResourceHealth;
use lifecycle::Lifecycle;
pub use receipt::MetadataIoReceipt;
use receipt::ReceiptOutcome;
use writes::CoordinatorExit;

static NEXT_ACTOR_ID: StaticAtomicU64 = StaticAtomicU64::new(1);

/// What an actor takes from the context it starts in: the context's
/// metadata lane, the owner's process budget and target registry, and the
/// group its coordinator runs in.
#[derive(Debug)]
pub(crate) struct ActorSeat {
    pub(crate) lane: BlockingExecutor,
    pub(crate) process: ResourceBudget,
    pub(crate) targets: Arc<MetadataTargetRegistry>,
    pub(crate) group: TaskGroup,
}

/// A validated actor configuration, ready to start.
#[derive(Debug, Clone)]
pub struct MetadataIoPlan {
    pub(crate) config: MetadataIoConfig,
    pub(crate) max_concurrent_writes: NonZeroUsize,
}

impl MetadataIoPlan {
    /// Lets up to `n` independent resources be written at once (capped by
    /// the metadata lane's concurrency); one resource is still written one
    /// generation at a time, in order. Default 1.
    #[must_use]
    pub fn with_max_concurrent_writes(mut self, n: NonZeroUsize) -> Self {
        self.max_concurrent_writes = n;
        self
    }

    /// Starts an actor in `seat` (what `start` takes from a context: see
    /// `service_context/start.rs`, which wires services to contexts).
    pub(crate) fn launch(
        self,
        seat: ActorSeat,
        file_system: Arc<dyn MetadataFileSystem>,
    ) -> RuntimeResult<MetadataIoActor> {
        let ActorSeat {
            lane,
            process,
            targets,
            group,
        } = seat;
        let lane_concurrency = lane.policy().max_concurrency;
        let parent = process.limit().capacity;
        let budget = process
            .child(
                "metadata-io",
                BudgetLimit::new(parent.count, parent.bytes, FullPolicy::Reject),
            )
            .map_err(|violation| {
                RuntimeError::configuration_failure(RuntimeOperation::MetadataIo, violation)
            })?;
        let config = self.config;
        let legacy = config.changed_legacy_fields();
        if !legacy.is_empty() {
            tracing::warn!(
                fields = ?legacy,
                lane = %lane.policy().name,
                "MetadataIoConfig blocking_* fields are retained for compatibility and have no \
                 effect: writes run on the metadata lane, configured through \
                 RuntimeConfig::blocking_lane_policies.metadata_io"
            );
        }
        let shared = Arc::new(ActorShared {
            id: NEXT_ACTOR_ID.fetch_add(1, Ordering::Relaxed),
            max_concurrent: self
                .max_concurrent_writes
                .get()
                .min(lane_concurrency)
                .max(1),
            max_waiters: config.max_pending_operations.saturating_mul(4).max(1),
            config,
            lane,
            file_system,
            budget,
            targets,
            group,
            state: Mutex::new(ActorState::default()),
            wake: Notify::new(),
            finished: Notify::new(),
            handles: AtomicUsize::new(1),
            swept: Mutex::new(std::collections::HashSet::new()),
            health_epoch: tokio::sync::watch::Sender::new(0),
            deferred: Mutex::new(Vec::new()),
        });
        let coordinator = Arc::clone(&shared);
        // Built before the future: it runs however the coordinator ends,
        // also when its task is aborted (or dropped by a stopping runtime)
        // before its first poll.
        let exit = CoordinatorExit(Arc::clone(&shared));
        shared
            .group
            .spawn("metadata-io-coordinator", TaskKind::Service, async move {
                let _exit = exit;
                coordinator.coordinate().await;
            })?;
        Ok(MetadataIoActor { shared })
    }
}

/// Persists resource snapshots durably, coalescing generations.
///
/// ```no_run
/// # async fn run(context: rocketmq_runtime::ChildServiceContext) -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use rocketmq_runtime::{MetadataDeadline, MetadataIoConfig, MetadataIoDurabilityOutcome};
///
/// let actor = MetadataIoConfig::default().into_plan()?.start(&context)?;
/// let deadline = MetadataDeadline::after(Duration::from_secs(5));
/// let outcome = actor
///     .submit_next_durable("offsets", "/var/lib/broker/offsets.json", b"{}".to_vec(), deadline)
///     .await?;
/// assert!(matches!(outcome, MetadataIoDurabilityOutcome::Durable(_)));
/// # Ok(()) }
/// ```
pub struct MetadataIoActor {
    shared: Arc<ActorShared>,
}

impl Clone for MetadataIoActor {
    fn clone(&self) -> Self {
        self.shared.handles.fetch_add(1, Ordering::Relaxed);
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl Drop for MetadataIoActor {
    /// The last handle stops admission (nobody can submit any more); the
    /// accepted work still drains and the coordinator then ends, so an
    /// abandoned actor does not live until its group is cancelled.
    fn drop(&mut self) {
        if self.shared.handles.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.stop_admission();
        }
    }
}

impl fmt::Debug for MetadataIoActor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.shared.fmt(f)
    }
}

impl MetadataIoActor {
    /// Admits a snapshot without waiting (synchronous).
    ///
    /// # Errors
    ///
    /// * `TimedOut` (`AdmitMetadataSnapshot`): `deadline` already passed;
    /// * `Closed` (`MetadataIoClosed`): admission stopped;
    /// * `CapacityExhausted` (`AdmitMetadataOperation` / `AdmitMetadataBytes`):
    ///   over `max_pending_operations`, `max_pending_bytes`, the process
    ///   budget, or the waiter bound;
    /// * `ContextUnavailable` (`MetadataResourceTarget`): the target is fenced
    ///   after an unknown commit outcome.
    pub fn submit(
        &self,
        request: MetadataWriteRequest,
        deadline: MetadataDeadline,
    ) -> RuntimeResult<MetadataIoAdmissionOutcome> {
        self.shared.submit(request, deadline)
    }

    /// [`submit`](Self::submit) with the next generation of the owner-wide
    /// counter.
    ///
    /// # Errors
    ///
    /// As [`submit`](Self::submit).
    pub fn submit_next(
        &self,
        resource: impl Into<Arc<str>>,
        target: impl Into<std::path::PathBuf>,
        bytes: impl Into<Vec<u8>>,
        deadline: MetadataDeadline,
    ) -> RuntimeResult<MetadataIoAdmissionOutcome> {
        self.submit(self.next_request(resource, target, bytes), deadline)
    }

    /// A request for the next generation of the owner-wide counter
    /// (`targets.rs`, invariant 6: unique across the owner's actors, wraps
    /// to 1).
    fn next_request(
        &self,
        resource: impl Into<Arc<str>>,
        target: impl Into<std::path::PathBuf>,
        bytes: impl Into<Vec<u8>>,
    ) -> MetadataWriteRequest {
        let generation = self.shared.targets.next_generation();
        MetadataWriteRequest::new(resource, generation, target, bytes)
    }

    /// Submits and waits for durability with one deadline.
    ///
    /// # Errors
    ///
    /// As [`submit`](Self::submit) and [`MetadataIoReceipt::wait_until`].
    ///
    /// # Cancel safety
    ///
    /// The snapshot is admitted at the first poll; dropping the future then
    /// only stops waiting (the write still happens).
    pub async fn submit_durable(
        &self,
        request: MetadataWriteRequest,
        deadline: MetadataDeadline,
    ) -> RuntimeResult<MetadataIoDurabilityOutcome> {
        match self.submit(request, deadline)? {
            MetadataIoAdmissionOutcome::Accepted(receipt) => Ok(
                MetadataIoDurabilityOutcome::Durable(receipt.wait_until(deadline).await?),
            ),
            MetadataIoAdmissionOutcome::TargetConflict(request) => {
                Ok(MetadataIoDurabilityOutcome::TargetConflict(request))
            }
        }
    }

    /// [`submit_next`](Self::submit_next), then wait for durability.
    ///
    /// # Errors
    ///
    /// As [`submit_durable`](Self::submit_durable).
    ///
    /// # Cancel safety
    ///
    /// As [`submit_durable`](Self::submit_durable).
    pub async fn submit_next_durable(
        &self,
        resource: impl Into<Arc<str>>,
        target: impl Into<std::path::PathBuf>,
        bytes: impl Into<Vec<u8>>,
        deadline: MetadataDeadline,
    ) -> RuntimeResult<MetadataIoDurabilityOutcome> {
        self.submit_durable(self.next_request(resource, target, bytes), deadline)
            .await
    }

    /// Refuses later submissions with `Closed(MetadataIoClosed)`; accepted
    /// work is still written.
    pub fn stop_admission(&self) {
        self.shared.state.lock().lifecycle.stop();
        self.shared.wake.notify_one();
    }

    /// Stops admission and waits until `deadline` for the accepted work.
    ///
    /// A deadline that passes first only ends the wait (invariant 11): the
    /// report lists every resource with a generation in flight or queued
    /// as unfinished and counts both in `pending_operations` and
    /// `pending_bytes`; the queued generations stay charged and are still
    /// written, and their waiters still get the outcome. They are given up
    /// only when the coordinator ends (its group shut down or aborted):
    /// then the waiters no in-flight write covers get
    /// `Closed(MetadataWorkerStopped)`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: admission is stopped at the first poll; dropping the
    /// future only stops waiting.
    pub async fn shutdown_until(&self, deadline: MetadataDeadline) -> MetadataIoShutdownReport {
        self.stop_admission();
        let shared = &self.shared;
        let finished = crate::wait::notified_until(
            &shared.finished,
            ShutdownDeadline::from_tokio(deadline.instant()),
            Some(shared.group.runtime_handle()),
            || shared.state.lock().lifecycle == Lifecycle::Finished,
        )
        .await;
        let state = shared.state.lock();
        MetadataIoShutdownReport {
            timed_out: !finished,
            pending_operations: state.pending_operations,
            pending_bytes: state.pending_bytes,
            unfinished: state
                .resources
                .iter()
                .filter(|(_, resource)| resource.in_flight.is_some() || resource.queued.is_some())
                .map(|(name, resource)| resource_snapshot(name, resource))
                .collect(),
            not_durable: storage_failures(&state),
        }
    }
    /// The actor's admission state.
    pub fn snapshot(&self) -> MetadataIoSnapshot {
        self.shared.snapshot()
    }

    /// The resources whose last write failed (sorted by name): accepted
    /// data that is not durable until a later write of the resource
    /// succeeds. Empty while every resource's last write was durable.
    ///
    /// Each failure is also logged: one `tracing` error per resource and
    /// failure kind (step, OS error), repeated at most every 30 s, and one
    /// info event when the resource's writes are durable again.
    pub fn storage_failures(&self) -> Vec<MetadataStorageFailure> {
        storage_failures(&self.shared.state.lock())
    }

    /// A receiver whose value advances on every write failure and every
    /// recovery (see [`storage_failures`](Self::storage_failures)).
    pub(crate) fn storage_epoch(&self) -> tokio::sync::watch::Receiver<u64> {
        self.shared.health_epoch.subscribe()
    }

    /// The limits in force: the metadata lane's policy, the actor's
    /// admission limits, and the retained `blocking_*` fields of its
    /// configuration with the lane values that apply instead.
    pub fn effective_profile(&self) -> MetadataIoEffectiveProfile {
        let shared = &self.shared;
        let lane = shared.lane.policy();
        let blocking_lane = MetadataIoBlockingLaneProfile {
            name: lane.name.clone(),
            max_concurrency: lane.max_concurrency,
            max_queue_depth: lane.max_queue_depth,
            queue_timeout: lane.queue_timeout,
            task_timeout: lane.task_timeout,
            warn_after: lane.warn_after,
        };
        MetadataIoEffectiveProfile {
            legacy_blocking_fields: shared.config.legacy_fields(&blocking_lane),
            blocking_lane,
            actor_limits: MetadataIoActorLimitsProfile {
                max_pending_operations: shared.config.max_pending_operations,
                max_pending_bytes: shared.config.max_pending_bytes,
                max_waiters: shared.max_waiters,
                max_concurrent_writes: shared.max_concurrent,
            },
        }
    }
}

impl ActorShared {
    pub(super) fn snapshot(&self) -> MetadataIoSnapshot {
        let state = self.state.lock();
        MetadataIoSnapshot {
            // A cancelled group refuses submissions at once (`submit`),
            // before the coordinator records it.
            accepting: state.lifecycle.admits() && !self.group.cancellation_token().is_cancelled(),
            pending_operations: state.pending_operations,
            pending_bytes: state.pending_bytes,
            max_pending_operations: self.config.max_pending_operations,
            max_pending_bytes: self.config.max_pending_bytes,
            resources: state
                .resources
                .iter()
                .map(|(name, resource)| resource_snapshot(name, resource))
                .collect(),
        }
    }
}

fn resource_snapshot(name: &Arc<str>, resource: &Resource) -> MetadataIoResourceSnapshot {
    MetadataIoResourceSnapshot {
        resource: Arc::clone(name),
        target: Some(Arc::clone(&resource.target)),
        durable_generation: resource.history.durable(),
        in_flight_generation: resource.in_flight.map(|(generation, _)| generation),
        queued_generation: resource
            .queued
            .as_ref()
            .map(|queued| queued.request.generation),
        waiter_count: resource.waiters.len(),
    }
}

fn storage_failures(state: &ActorState) -> Vec<MetadataStorageFailure> {
    state
        .resources
        .iter()
        .filter_map(|(name, resource)| resource.health.failure(name, &resource.target))
        .collect()
}

fn capacity_error(operation: RuntimeOperation) -> RuntimeError {
    RuntimeError::capacity(operation)
}

#[cfg(all(test, loom))]
mod loom_lifecycle;
#[cfg(all(test, not(loom)))]
mod tests;
