//! The metadata actor: synchronous admission, per-resource generations,
//! coalescing, fair scheduling of writes on the shared `MetadataIo` lane,
//! honest commit outcomes and budget charging.
//!
//! All admission and completion decisions are made under one lock
//! (`ActorState`). Per resource there is at most one generation in flight
//! and one queued; a newer submission replaces the queued one (its budget
//! permit is resized, growth only by the delta) and every waiter is
//! resolved by the first completed write with a generation at least its
//! own. A resource with queued work waits in a FIFO `ready` list; after a
//! write completes, the resource goes to the back of that list, so newly
//! arrived resources are written before its next generation.
//!
//! A write runs as a closure on the lane that owns the snapshot and its
//! budget permit; the outcome is reported from inside the closure when it
//! exits, so a lane caller timeout never lets a later generation of the
//! same resource overlap it.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::num::NonZeroUsize;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{oneshot, Notify};

use crate::blocking::BlockingExecutor;
use crate::error::{RuntimeError, RuntimeOperation, RuntimeResult};
use crate::loom::{AtomicBool, AtomicU8, Mutex, Ordering, StaticAtomicU64};
use crate::metadata_io::fs::{LocalMetadataFileSystem, MetadataFileSystem};
use crate::metadata_io::types::{
    MetadataDeadline, MetadataGeneration, MetadataIoAdmissionOutcome, MetadataIoCommitOutcome,
    MetadataIoConfig, MetadataIoDurabilityOutcome, MetadataIoEffectiveProfile,
    MetadataIoResourceSnapshot, MetadataIoShutdownReport, MetadataIoSnapshot, MetadataWriteRequest,
};
use crate::resource_budget::{BudgetLimit, FullPolicy, ResourceBudget, ResourcePermit};
use crate::resources::{RuntimeResources, TargetClaimRefusal};
use crate::service_context::ChildServiceContext;
use crate::task_group::{TaskGroup, TaskKind};
use crate::ShutdownDeadline;

static NEXT_ACTOR_ID: StaticAtomicU64 = StaticAtomicU64::new(1);

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

    /// Starts an actor writing to the local filesystem.
    ///
    /// # Errors
    ///
    /// The context's group refuses the coordinator task (`Closed`,
    /// `Poisoned`), or the `metadata-io` budget cannot be derived.
    pub fn start(self, context: &ChildServiceContext) -> RuntimeResult<MetadataIoActor> {
        self.start_with_file_system(context, Arc::new(LocalMetadataFileSystem))
    }

    /// Starts an actor over `file_system` (fault injection, tests).
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start).
    pub fn start_with_file_system(
        self,
        context: &ChildServiceContext,
        file_system: Arc<dyn MetadataFileSystem>,
    ) -> RuntimeResult<MetadataIoActor> {
        let lane = context.metadata_io().clone();
        let lane_concurrency = lane.policy().max_concurrency;
        let process = context.process_budget();
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
            resources: context.resources().clone(),
            group: context.task_group().clone(),
            state: Mutex::new(ActorState::default()),
            wake: Notify::new(),
            finished: Notify::new(),
            accepting: AtomicBool::new(true),
            coordinator_done: AtomicBool::new(false),
            coordinator_gone: AtomicBool::new(false),
            released: AtomicBool::new(false),
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

/// A waiting receipt.
#[derive(Debug)]
struct Waiter {
    generation: MetadataGeneration,
    sender: oneshot::Sender<MetadataIoCommitOutcome>,
}

/// A queued generation with its payload charge.
#[derive(Debug)]
struct Queued {
    request: MetadataWriteRequest,
    permit: ResourcePermit,
}

#[derive(Debug)]
struct Resource {
    target: Arc<Path>,
    durable: Option<MetadataGeneration>,
    in_flight: Option<(MetadataGeneration, usize)>,
    queued: Option<Queued>,
    waiters: Vec<Waiter>,
    fenced: bool,
    listed: bool,
}

#[derive(Debug, Default)]
struct ActorState {
    resources: BTreeMap<Arc<str>, Resource>,
    ready: VecDeque<Arc<str>>,
    writing: usize,
    pending_operations: usize,
    pending_bytes: usize,
    waiters: usize,
}

struct ActorShared {
    id: u64,
    config: MetadataIoConfig,
    max_concurrent: usize,
    max_waiters: usize,
    lane: BlockingExecutor,
    file_system: Arc<dyn MetadataFileSystem>,
    budget: ResourceBudget,
    resources: RuntimeResources,
    group: TaskGroup,
    state: Mutex<ActorState>,
    wake: Notify,
    finished: Notify,
    accepting: AtomicBool,
    /// Set once the coordinator has ended and no write is in flight: the
    /// targets are released then (see [`ActorShared::finish`]).
    coordinator_done: AtomicBool,
    /// The coordinator's future is gone (ended or aborted); set under the
    /// state lock.
    coordinator_gone: AtomicBool,
    /// The targets were released (once).
    released: AtomicBool,
}

impl fmt::Debug for ActorShared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MetadataIoActor")
            .field("id", &self.id)
            .field("accepting", &self.accepting.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// A handle to wait for a submitted generation's durability.
#[derive(Debug)]
pub struct MetadataIoReceipt {
    generation: MetadataGeneration,
    outcome: ReceiptOutcome,
}

#[derive(Debug)]
enum ReceiptOutcome {
    Ready(MetadataIoCommitOutcome),
    Pending(oneshot::Receiver<MetadataIoCommitOutcome>),
}

impl MetadataIoReceipt {
    /// The submitted generation.
    pub const fn generation(&self) -> MetadataGeneration {
        self.generation
    }

    /// Waits for the write that covers this generation.
    ///
    /// Returns the durable generation (possibly newer: coalesced).
    ///
    /// # Errors
    ///
    /// The write's error (`FailedBeforeCommit` or `CommitOutcomeUnknown`
    /// source); `timed_out(WaitForDurableMetadata)` at the deadline (the
    /// write is not cancelled); `closed(MetadataWorkerStopped)` if the actor
    /// stopped without writing it.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the wait never cancels the write.
    pub async fn wait_until(self, deadline: MetadataDeadline) -> RuntimeResult<MetadataGeneration> {
        match self.wait_until_outcome(deadline).await? {
            MetadataIoCommitOutcome::Durable(generation) => Ok(generation),
            MetadataIoCommitOutcome::FailedBeforeCommit(error)
            | MetadataIoCommitOutcome::CommitOutcomeUnknown(error) => Err(error),
        }
    }

    /// Like [`wait_until`](Self::wait_until), with the commit classification.
    ///
    /// # Errors
    ///
    /// `timed_out(WaitForDurableMetadata)` or `closed(MetadataWorkerStopped)`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the wait never cancels the write.
    pub async fn wait_until_outcome(
        self,
        deadline: MetadataDeadline,
    ) -> RuntimeResult<MetadataIoCommitOutcome> {
        match self.outcome {
            ReceiptOutcome::Ready(outcome) => Ok(outcome),
            ReceiptOutcome::Pending(receiver) => {
                match tokio::time::timeout_at(deadline.instant(), receiver).await {
                    Ok(Ok(outcome)) => Ok(outcome),
                    Ok(Err(_)) => Err(RuntimeError::closed(
                        RuntimeOperation::MetadataWorkerStopped,
                    )),
                    Err(_) => Err(RuntimeError::timed_out(
                        RuntimeOperation::WaitForDurableMetadata,
                    )),
                }
            }
        }
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
#[derive(Clone)]
pub struct MetadataIoActor {
    shared: Arc<ActorShared>,
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
        let generation = self.shared.resources.next_metadata_generation();
        self.submit(
            MetadataWriteRequest::new(resource, generation, target, bytes),
            deadline,
        )
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
        let generation = self.shared.resources.next_metadata_generation();
        self.submit_durable(
            MetadataWriteRequest::new(resource, generation, target, bytes),
            deadline,
        )
        .await
    }

    /// Refuses later submissions with `Closed(MetadataIoClosed)`; accepted
    /// work is still written.
    pub fn stop_admission(&self) {
        self.shared.accepting.store(false, Ordering::SeqCst);
        self.shared.wake.notify_one();
    }

    /// Stops admission and waits until `deadline` for the accepted work.
    /// At the deadline, queued generations are dropped (their waiters get
    /// `Closed(MetadataWorkerStopped)`) and in-flight writes are listed as
    /// unfinished (their closures keep running and keep their charge).
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
            || shared.coordinator_done.load(Ordering::SeqCst),
        )
        .await;
        let mut state = shared.state.lock();
        if !finished {
            let mut dropped_waiters = 0;
            for resource in state.resources.values_mut() {
                resource.queued = None;
                let before = resource.waiters.len();
                resource.waiters.retain(|waiter| {
                    resource
                        .in_flight
                        .is_some_and(|(generation, _)| waiter.generation <= generation)
                });
                dropped_waiters += before - resource.waiters.len();
            }
            state.waiters -= dropped_waiters;
        }
        let unfinished: Vec<_> = state
            .resources
            .iter()
            .filter(|(_, resource)| resource.in_flight.is_some() || resource.queued.is_some())
            .map(|(name, resource)| resource_snapshot(name, resource))
            .collect();
        let in_flight_bytes: usize = state
            .resources
            .values()
            .filter_map(|resource| resource.in_flight.map(|(_, bytes)| bytes))
            .sum();
        if !finished {
            state.pending_operations = state.writing;
            state.pending_bytes = in_flight_bytes;
        }
        MetadataIoShutdownReport {
            timed_out: !finished,
            pending_operations: state.pending_operations,
            pending_bytes: state.pending_bytes,
            unfinished,
        }
    }

    /// The actor's admission state.
    pub fn snapshot(&self) -> MetadataIoSnapshot {
        let shared = &self.shared;
        let state = shared.state.lock();
        MetadataIoSnapshot {
            accepting: shared.accepting.load(Ordering::SeqCst),
            pending_operations: state.pending_operations,
            pending_bytes: state.pending_bytes,
            max_pending_operations: shared.config.max_pending_operations,
            max_pending_bytes: shared.config.max_pending_bytes,
            resources: state
                .resources
                .iter()
                .map(|(name, resource)| resource_snapshot(name, resource))
                .collect(),
        }
    }

    /// The limits in force.
    pub fn effective_profile(&self) -> MetadataIoEffectiveProfile {
        let shared = &self.shared;
        let lane = shared.lane.policy();
        MetadataIoEffectiveProfile {
            lane_name: lane.name.clone(),
            lane_max_concurrency: lane.max_concurrency,
            lane_max_queue_depth: lane.max_queue_depth,
            lane_queue_timeout: lane.queue_timeout,
            lane_task_timeout: lane.task_timeout,
            max_pending_operations: shared.config.max_pending_operations,
            max_pending_bytes: shared.config.max_pending_bytes,
            max_waiters: shared.max_waiters,
            max_concurrent_writes: shared.max_concurrent,
        }
    }
}

fn resource_snapshot(name: &Arc<str>, resource: &Resource) -> MetadataIoResourceSnapshot {
    MetadataIoResourceSnapshot {
        resource: Arc::clone(name),
        target: Some(Arc::clone(&resource.target)),
        durable_generation: resource.durable,
        in_flight_generation: resource.in_flight.map(|(generation, _)| generation),
        queued_generation: resource
            .queued
            .as_ref()
            .map(|queued| queued.request.generation),
        waiter_count: resource.waiters.len(),
    }
}

fn capacity(operation: RuntimeOperation) -> RuntimeError {
    RuntimeError::capacity(operation)
}

impl ActorShared {
    fn submit(
        self: &Arc<Self>,
        request: MetadataWriteRequest,
        deadline: MetadataDeadline,
    ) -> RuntimeResult<MetadataIoAdmissionOutcome> {
        if deadline.is_expired() {
            return Err(RuntimeError::timed_out(
                RuntimeOperation::AdmitMetadataSnapshot,
            ));
        }
        if !self.accepting.load(Ordering::SeqCst) || self.group.cancellation_token().is_cancelled()
        {
            return Err(RuntimeError::closed(RuntimeOperation::MetadataIoClosed));
        }
        let name = Arc::clone(&request.resource);
        let mut guard = self.state.lock();
        // Again under the lock: the coordinator decides it is finished
        // under this lock, so nothing is admitted after that decision.
        if !self.accepting.load(Ordering::SeqCst) {
            return Err(RuntimeError::closed(RuntimeOperation::MetadataIoClosed));
        }
        let state = &mut *guard;
        // Target ownership: one resource per target per owner. A resource
        // may move to another target only while it has no pending work
        // (invariant 98); its old target keeps its history.
        let moving = match state.resources.get(&request.resource) {
            Some(existing)
                if crate::resources::normalize(&existing.target)
                    != crate::resources::normalize(&request.target) =>
            {
                if existing.in_flight.is_some() || existing.queued.is_some() {
                    return Ok(MetadataIoAdmissionOutcome::TargetConflict(request));
                }
                Some(Arc::clone(&existing.target))
            }
            Some(_) => None,
            None => {
                if state.resources.len() >= self.resources.metadata_target_capacity() {
                    return Err(capacity(RuntimeOperation::AdmitMetadataOperation));
                }
                None
            }
        };
        if moving.is_some() || !state.resources.contains_key(&request.resource) {
            if state.resources.len() >= self.resources.metadata_target_capacity() {
                return Err(capacity(RuntimeOperation::AdmitMetadataOperation));
            }
            match self
                .resources
                .claim_metadata_target(&request.target, &request.resource, self.id)
            {
                Ok((durable, fenced)) => {
                    if let Some(old_target) = &moving {
                        self.resources.release_metadata_target(old_target, self.id);
                    }
                    state.resources.insert(
                        Arc::clone(&request.resource),
                        Resource {
                            target: Arc::clone(&request.target),
                            durable,
                            in_flight: None,
                            queued: None,
                            waiters: Vec::new(),
                            fenced,
                            listed: false,
                        },
                    );
                }
                Err(TargetClaimRefusal::Conflict) => {
                    return Ok(MetadataIoAdmissionOutcome::TargetConflict(request))
                }
                Err(TargetClaimRefusal::Full) => {
                    return Err(capacity(RuntimeOperation::AdmitMetadataOperation))
                }
            }
        }
        let Some(resource) = state.resources.get_mut(&request.resource) else {
            return Err(RuntimeError::internal_failure(RuntimeOperation::MetadataIo));
        };
        let generation = request.generation;
        if let Some(durable) = resource.durable.filter(|durable| generation <= *durable) {
            return Ok(MetadataIoAdmissionOutcome::Accepted(MetadataIoReceipt {
                generation,
                outcome: ReceiptOutcome::Ready(MetadataIoCommitOutcome::Durable(durable)),
            }));
        }
        if resource.fenced {
            return Err(RuntimeError::context_unavailable(
                RuntimeOperation::MetadataResourceTarget,
            ));
        }
        if state.waiters >= self.max_waiters || resource.waiters.len() >= self.max_waiters {
            return Err(capacity(RuntimeOperation::AdmitMetadataOperation));
        }
        let covered = resource
            .in_flight
            .is_some_and(|(in_flight, _)| generation <= in_flight)
            || resource
                .queued
                .as_ref()
                .is_some_and(|queued| generation <= queued.request.generation);
        if !covered {
            let len = request.len();
            match resource.queued.as_mut() {
                Some(queued) => {
                    // Coalesce: replace the queued snapshot; grow the charge
                    // by the delta only, shrink after dropping the old one.
                    let old = queued.request.len();
                    if len > old {
                        if state.pending_bytes + (len - old) > self.config.max_pending_bytes {
                            return Err(capacity(RuntimeOperation::AdmitMetadataBytes));
                        }
                        if queued.permit.try_resize(len).is_err() {
                            return Err(capacity(RuntimeOperation::AdmitMetadataBytes));
                        }
                        queued.request = request;
                        state.pending_bytes += len - old;
                    } else {
                        queued.request = request;
                        let _ = queued.permit.try_resize(len);
                        state.pending_bytes -= old - len;
                    }
                }
                None => {
                    if state.pending_operations >= self.config.max_pending_operations {
                        return Err(capacity(RuntimeOperation::AdmitMetadataOperation));
                    }
                    if state.pending_bytes + len > self.config.max_pending_bytes {
                        return Err(capacity(RuntimeOperation::AdmitMetadataBytes));
                    }
                    let Ok(permit) = self.budget.try_acquire_data(len) else {
                        return Err(capacity(RuntimeOperation::AdmitMetadataBytes));
                    };
                    resource.queued = Some(Queued { request, permit });
                    state.pending_operations += 1;
                    state.pending_bytes += len;
                    if resource.in_flight.is_none() && !resource.listed {
                        resource.listed = true;
                        let name = resource
                            .queued
                            .as_ref()
                            .map(|queued| Arc::clone(&queued.request.resource));
                        state.ready.extend(name);
                    }
                }
            }
        }
        let (sender, receiver) = oneshot::channel();
        resource.waiters.push(Waiter { generation, sender });
        state.waiters += 1;
        let _ = &name;
        drop(guard);
        // Start the write from here when a slot is free (no coordinator
        // hop); the coordinator only watches for the end.
        self.start_writes();
        self.wake.notify_one();
        Ok(MetadataIoAdmissionOutcome::Accepted(MetadataIoReceipt {
            generation,
            outcome: ReceiptOutcome::Pending(receiver),
        }))
    }
}

impl ActorShared {
    /// The coordinator: starts writes while slots are free, until
    /// admission is stopped and nothing is left.
    async fn coordinate(self: Arc<Self>) {
        let cancelled = self.group.cancellation_token();
        loop {
            let woken = self.wake.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            if cancelled.is_cancelled() {
                // Owner cancellation stops admission; accepted work drains.
                self.accepting.store(false, Ordering::SeqCst);
            }
            let done = self.start_writes();
            if done {
                break;
            }
            tokio::select! {
                () = &mut woken => {}
                () = cancelled.cancelled(), if !cancelled.is_cancelled() => {}
            }
        }
    }

    /// Starts the ready writes that fit; true when the actor is finished.
    fn start_writes(self: &Arc<Self>) -> bool {
        let mut starting = Vec::new();
        let finished = {
            let mut guard = self.state.lock();
            let state = &mut *guard;
            while state.writing < self.max_concurrent {
                let Some(name) = state.ready.pop_front() else {
                    break;
                };
                let Some(resource) = state.resources.get_mut(&name) else {
                    continue;
                };
                resource.listed = false;
                let Some(queued) = resource.queued.take() else {
                    continue;
                };
                resource.in_flight = Some((queued.request.generation, queued.request.len()));
                state.writing += 1;
                starting.push(queued);
            }
            !self.accepting.load(Ordering::SeqCst)
                && state.writing == 0
                && state
                    .resources
                    .values()
                    .all(|resource| resource.queued.is_none())
        };
        // Spawned after the lock is released: a refused spawn completes
        // the write at once, which takes the lock again.
        for Queued { request, permit } in starting {
            self.spawn_write(request, permit);
        }
        finished
    }

    /// Runs one write on the lane. The closure owns the payload and its
    /// permit, releases them when the write ends and settles the write
    /// itself (no hop back to a task). It starts directly when a lane slot
    /// is free; otherwise a writer task queues it on the lane. A closure
    /// that never runs (refused, or discarded by Tokio) settles the write
    /// as failed from its drop guard; a claim flag makes exactly one side
    /// report.
    fn spawn_write(self: &Arc<Self>, request: MetadataWriteRequest, permit: ResourcePermit) {
        let generation = request.generation;
        let claim = WriteClaim {
            state: Arc::new(AtomicU8::new(CLAIM_PENDING)),
            shared: Arc::clone(self),
            name: Arc::clone(&request.resource),
            generation,
        };
        let abandon = claim.clone_handle();
        // Settles on drop unless a writer task takes over (it then reports
        // the lane's own error).
        let deferred = Arc::new(AtomicBool::new(false));
        let guard = ClosureClaim {
            claim: Some(claim),
            deferred: Arc::clone(&deferred),
        };
        let work = move || {
            let mut guard = guard;
            let Some(claim) = guard.claim.take() else {
                return;
            };
            if !claim.try_claim() {
                return;
            }
            let file_system = Arc::clone(&claim.shared.file_system);
            let persisted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                file_system.persist_atomic(&request.target, &request.bytes)
            }));
            drop(request);
            drop(permit);
            let outcome = match persisted {
                Ok(Ok(())) => MetadataIoCommitOutcome::Durable(generation),
                Ok(Err(error)) if error.operation() == RuntimeOperation::MetadataSyncParent => {
                    MetadataIoCommitOutcome::CommitOutcomeUnknown(error)
                }
                Ok(Err(error)) => MetadataIoCommitOutcome::FailedBeforeCommit(error),
                // A panicking file system fails the write; nothing is published.
                Err(_) => MetadataIoCommitOutcome::FailedBeforeCommit(
                    RuntimeError::internal_failure(RuntimeOperation::RunBlockingTask),
                ),
            };
            claim.shared.complete(&claim.name, generation, outcome);
        };
        let work = match self
            .lane
            .try_start_detached(Arc::from("metadata-write"), work)
        {
            Ok(()) => return,
            Err(work) => work,
        };
        deferred.store(true, Ordering::SeqCst);
        let lane = self.lane.clone();
        let writer_claim = WriterClaim(abandon);
        let refused = writer_claim.0.clone_handle();
        let writer = async move {
            let writer_claim = writer_claim;
            let far = ShutdownDeadline::after(Duration::from_secs(86_400 * 365));
            if let Err(error) = lane.spawn_io_until("metadata-write", far, work).await {
                // Refused before it started (or the caller stopped waiting
                // while it runs: then the closure has claimed the write).
                writer_claim.0.abandon(error);
            }
        };
        if let Err(error) = self
            .group
            .spawn("metadata-io-write", TaskKind::Worker, writer)
        {
            tracing::warn!(%error, "metadata write not started");
            refused.abandon(error);
        }
    }

    /// Settles a finished write: resolves every waiter it covers, advances
    /// or fences, and re-lists the resource behind newer arrivals.
    fn complete(
        self: &Arc<Self>,
        name: &Arc<str>,
        generation: MetadataGeneration,
        outcome: MetadataIoCommitOutcome,
    ) {
        let mut guard = self.state.lock();
        let state = &mut *guard;
        state.writing -= 1;
        // The coordinator is gone and this was the last write: the targets
        // can be released now (after the lock).
        let last = state.writing == 0 && self.coordinator_gone.load(Ordering::SeqCst);
        let Some(resource) = state.resources.get_mut(name) else {
            drop(guard);
            if last {
                self.finish();
            }
            return;
        };
        if let Some((_, bytes)) = resource.in_flight.take() {
            state.pending_operations -= 1;
            state.pending_bytes -= bytes;
        }
        match &outcome {
            MetadataIoCommitOutcome::Durable(durable) => {
                resource.durable = Some(resource.durable.map_or(*durable, |old| old.max(*durable)));
                self.resources
                    .record_metadata_durable(&resource.target, *durable);
            }
            MetadataIoCommitOutcome::CommitOutcomeUnknown(_) => {
                resource.fenced = true;
                self.resources.fence_metadata_target(&resource.target);
            }
            MetadataIoCommitOutcome::FailedBeforeCommit(_) => {}
        }
        let (covered, waiting): (Vec<_>, Vec<_>) = resource
            .waiters
            .drain(..)
            .partition(|waiter| waiter.generation <= generation);
        resource.waiters = waiting;
        state.waiters -= covered.len();
        if resource.fenced {
            // Nothing more is written to a fenced target.
            if let Some(queued) = resource.queued.take() {
                state.pending_operations -= 1;
                state.pending_bytes -= queued.request.len();
            }
            state.waiters -= resource.waiters.len();
            for waiter in resource.waiters.drain(..) {
                let _ = waiter
                    .sender
                    .send(MetadataIoCommitOutcome::FailedBeforeCommit(
                        RuntimeError::context_unavailable(RuntimeOperation::MetadataResourceTarget),
                    ));
            }
        } else if resource.queued.is_some() && !resource.listed {
            resource.listed = true;
            state.ready.push_back(Arc::clone(name));
        }
        drop(guard);
        for waiter in covered {
            let _ = waiter.sender.send(outcome.clone());
        }
        if last {
            self.finish();
        }
        // The coordinator starts the next writes: a completion may run on
        // a blocking thread that still holds its lane slot, or inside a
        // refusal, so it never starts writes itself.
        self.wake.notify_one();
    }

    /// Releases the actor's targets and reports it finished, once: when the
    /// coordinator is gone *and* no write is in flight (a write still on a
    /// blocking thread keeps its target, so no other actor of the owner can
    /// write an older generation over a newer one).
    fn finish(&self) {
        if !self.released.swap(true, Ordering::SeqCst) {
            self.resources.release_metadata_writer(self.id);
            self.coordinator_done.store(true, Ordering::SeqCst);
            self.finished.notify_waiters();
        }
    }
}

/// Runs however the coordinator ends (also when its task is aborted):
/// nothing more is admitted or started; queued generations are dropped
/// (their permits go back) and the waiters no in-flight write covers are
/// closed (`Closed(MetadataWorkerStopped)`), instead of waiting for their
/// own deadlines. The targets are released once the in-flight writes end.
struct CoordinatorExit(Arc<ActorShared>);

impl Drop for CoordinatorExit {
    fn drop(&mut self) {
        let shared = &self.0;
        shared.accepting.store(false, Ordering::SeqCst);
        let mut dropped = Vec::new();
        let mut closed = Vec::new();
        let idle = {
            let mut guard = shared.state.lock();
            let state = &mut *guard;
            for resource in state.resources.values_mut() {
                resource.listed = false;
                if let Some(queued) = resource.queued.take() {
                    state.pending_operations -= 1;
                    state.pending_bytes -= queued.request.len();
                    dropped.push(queued);
                }
                let in_flight = resource.in_flight.map(|(generation, _)| generation);
                let (covered, uncovered): (Vec<_>, Vec<_>) =
                    resource.waiters.drain(..).partition(|waiter| {
                        in_flight.is_some_and(|generation| waiter.generation <= generation)
                    });
                resource.waiters = covered;
                state.waiters -= uncovered.len();
                closed.extend(uncovered);
            }
            state.ready.clear();
            shared.coordinator_gone.store(true, Ordering::SeqCst);
            state.writing == 0
        };
        // Permits and waiter senders go after the lock (a dropped sender
        // tells its receipt the worker stopped).
        drop(dropped);
        drop(closed);
        if idle {
            shared.finish();
        }
    }
}

const CLAIM_PENDING: u8 = 0;
const CLAIM_TAKEN: u8 = 1;
const CLAIM_ABANDONED: u8 = 2;

/// Decides, exactly once, who settles a write: its closure when it runs,
/// otherwise whoever sees it refused or dropped.
struct WriteClaim {
    state: Arc<AtomicU8>,
    shared: Arc<ActorShared>,
    name: Arc<str>,
    generation: MetadataGeneration,
}

impl WriteClaim {
    fn clone_handle(&self) -> Self {
        Self {
            state: Arc::clone(&self.state),
            shared: Arc::clone(&self.shared),
            name: Arc::clone(&self.name),
            generation: self.generation,
        }
    }

    /// Claims the write for the running closure (false: already settled).
    fn try_claim(&self) -> bool {
        self.state
            .compare_exchange(
                CLAIM_PENDING,
                CLAIM_TAKEN,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
    }

    /// Settles the write as failed if nobody claimed it yet.
    fn abandon(&self, error: RuntimeError) {
        if self
            .state
            .compare_exchange(
                CLAIM_PENDING,
                CLAIM_ABANDONED,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
        {
            self.shared.complete(
                &self.name,
                self.generation,
                MetadataIoCommitOutcome::FailedBeforeCommit(error),
            );
        }
    }
}

/// The closure's claim: a closure dropped without running (Tokio
/// discarding it) still settles its write, unless a writer task took over
/// (`deferred`), which reports the lane's error instead.
struct ClosureClaim {
    claim: Option<WriteClaim>,
    deferred: Arc<AtomicBool>,
}

impl Drop for ClosureClaim {
    fn drop(&mut self) {
        if let Some(claim) = self.claim.take() {
            if !self.deferred.load(Ordering::SeqCst) {
                claim.abandon(RuntimeError::closed(
                    RuntimeOperation::MetadataWorkerStopped,
                ));
            }
        }
    }
}

/// The writer task's claim: settles the write if the task ends (or is
/// aborted) without the closure having claimed it.
struct WriterClaim(WriteClaim);

impl Drop for WriterClaim {
    fn drop(&mut self) {
        self.0.abandon(RuntimeError::closed(
            RuntimeOperation::MetadataWorkerStopped,
        ));
    }
}
