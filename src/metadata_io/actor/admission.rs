//! The actor's shared state and its admission: every decision under one
//! lock (`ActorState`), at most one generation in flight and one queued per
//! resource, coalescing with the payload charge resized, bounded waiters.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use super::lifecycle::Lifecycle;
use super::*;
use crate::error::RuntimeErrorContext;
use crate::metadata_io::targets::{
    normalize, MetadataTargetIdentity, TargetClaimRefusal, TargetHistory, TargetRegistration,
};

/// A waiting receipt.
#[derive(Debug)]
pub(super) struct Waiter {
    pub(super) generation: MetadataGeneration,
    pub(super) sender: oneshot::Sender<MetadataIoCommitOutcome>,
}

/// A queued generation with its payload charge.
#[derive(Debug)]
pub(super) struct Queued {
    pub(super) request: MetadataWriteRequest,
    pub(super) permit: ResourcePermit,
}

pub(super) struct Resource {
    /// The target as the caller spelled it (for snapshots).
    pub(super) target: Arc<Path>,
    /// The target's history in the owner's registry: its durable
    /// generation and fence are read there, never copied.
    pub(super) history: Arc<TargetHistory>,
    /// The live-writer registration, held exactly while the resource has a
    /// generation queued or in flight (each running write holds a clone):
    /// an idle resource leaves the target to other actors (invariant 8).
    pub(super) registration: Option<TargetRegistration>,
    /// The durable generation this actor last saw in `history` (at the
    /// claim, then after each of its writes): a retirement checks that the
    /// history still holds it.
    pub(super) seen_durable: Option<MetadataGeneration>,
    pub(super) in_flight: Option<(MetadataGeneration, usize)>,
    pub(super) queued: Option<Queued>,
    pub(super) waiters: Vec<Waiter>,
    pub(super) listed: bool,
    pub(super) health: ResourceHealth,
}

impl fmt::Debug for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resource")
            .field("target", &self.target)
            .field("in_flight", &self.in_flight)
            .field("waiters", &self.waiters.len())
            .finish_non_exhaustive()
    }
}

impl Resource {
    /// The identity of this resource's target history.
    pub(super) fn identity(&self) -> MetadataTargetIdentity {
        MetadataTargetIdentity(Arc::clone(&self.history))
    }
}

#[derive(Debug, Default)]
pub(crate) struct ActorState {
    /// Where the actor is in its life (`lifecycle.rs`).
    pub(crate) lifecycle: Lifecycle,
    pub(super) resources: BTreeMap<Arc<str>, Resource>,
    pub(super) ready: VecDeque<Arc<str>>,
    pub(crate) writing: usize,
    pub(crate) pending_operations: usize,
    pub(super) pending_bytes: usize,
    pub(super) waiters: usize,
}

pub(super) struct ActorShared {
    pub(super) id: u64,
    pub(super) config: MetadataIoConfig,
    pub(super) max_concurrent: usize,
    pub(super) max_waiters: usize,
    pub(super) lane: BlockingExecutor,
    pub(super) file_system: Arc<dyn MetadataFileSystem>,
    pub(super) budget: ResourceBudget,
    /// The owner's target registry (shared by its actors).
    pub(super) targets: Arc<MetadataTargetRegistry>,
    pub(super) group: TaskGroup,
    pub(super) state: Mutex<ActorState>,
    pub(super) wake: Notify,
    /// Woken when the lifecycle reaches `Finished`.
    pub(super) finished: Notify,
    /// `MetadataIoActor` handles alive: the last one dropped stops
    /// admission (queued work still drains).
    pub(super) handles: AtomicUsize,
    /// Targets whose stale temporary files were looked for: by the first
    /// write to each that the actor started.
    pub(super) swept: Mutex<std::collections::HashSet<Arc<Path>>>,
    /// Advanced by every write failure and recovery (`health.rs`).
    pub(super) health_epoch: tokio::sync::watch::Sender<u64>,
    /// Writes waiting for a lane slot, handed to the coordinator, which
    /// drives them (no task is spawned for them: a closing group still
    /// lets its coordinator finish what it accepted).
    pub(super) deferred: Mutex<Vec<DeferredWrite>>,
}

/// A write waiting for a lane slot (see `ActorShared::deferred`).
pub(super) type DeferredWrite = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

impl fmt::Debug for ActorShared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MetadataIoActor")
            .field("id", &self.id)
            .field("lifecycle", &self.state.lock().lifecycle)
            .finish_non_exhaustive()
    }
}

/// How a submission's target was claimed (phase 2 of `submit`).
enum Claim {
    /// The resource's pending work holds the target: nothing new claimed.
    Held,
    /// A fresh registration, kept only if work is queued.
    Fresh(TargetRegistration),
}

impl ActorShared {
    /// Admits a snapshot, in five phases: (1) refuse an expired deadline or
    /// a stopped actor; (2) claim the target; (3) answer at once from the
    /// target's history (fenced, or already durable); (4) queue or coalesce
    /// the generation, or find it covered; (5) attach the waiter and start
    /// what can start. Phases 2 to 5 run under the state lock, where the
    /// coordinator decides to end (`lifecycle.rs`, invariant 2).
    pub(super) fn submit(
        self: &Arc<Self>,
        request: MetadataWriteRequest,
        deadline: MetadataDeadline,
    ) -> RuntimeResult<MetadataIoAdmissionOutcome> {
        let expired = deadline.is_expired()
            || request
                .lane_deadline
                .is_some_and(MetadataDeadline::is_expired);
        if expired {
            return Err(RuntimeError::timed_out(
                RuntimeOperation::AdmitMetadataSnapshot,
            ));
        }
        let mut guard = self.state.lock();
        let state = &mut *guard;
        if !state.lifecycle.admits() || self.group.cancellation_token().is_cancelled() {
            return Err(RuntimeError::closed(RuntimeOperation::MetadataIoClosed));
        }
        let claim = match self.claim_target(state, &request)? {
            Some(claim) => claim,
            None => return Ok(MetadataIoAdmissionOutcome::TargetConflict(request)),
        };
        let name = Arc::clone(&request.resource);
        let generation = request.generation;
        let Some(resource) = state.resources.get_mut(&name) else {
            return Err(RuntimeError::internal_failure(RuntimeOperation::MetadataIo));
        };
        if let Some(receipt) = settled_by_history(resource, generation)? {
            // Nothing to write: a fresh registration is dropped here.
            return Ok(MetadataIoAdmissionOutcome::Accepted(receipt));
        }
        if state.waiters >= self.max_waiters || resource.waiters.len() >= self.max_waiters {
            return Err(capacity_error(RuntimeOperation::AdmitMetadataOperation));
        }
        self.admit_generation(state, request, claim)?;
        let Some(resource) = state.resources.get_mut(&name) else {
            return Err(RuntimeError::internal_failure(RuntimeOperation::MetadataIo));
        };
        let (sender, receiver) = oneshot::channel();
        resource.waiters.push(Waiter { generation, sender });
        let identity = resource.identity();
        state.waiters += 1;
        drop(guard);
        // Start the write from here when a slot is free (no coordinator
        // hop); the coordinator only watches for the end.
        self.start_writes();
        self.wake.notify_one();
        Ok(MetadataIoAdmissionOutcome::Accepted(MetadataIoReceipt {
            generation,
            identity,
            outcome: ReceiptOutcome::Pending(receiver),
        }))
    }

    /// Phase 2: one resource per target per owner (invariant 9). A resource
    /// with pending work keeps its registration (and may not move); any
    /// other claims the target in the owner's registry, and a new resource,
    /// one moving to another target, or one whose history was retired
    /// starts from that history. `None`: a conflict.
    fn claim_target(
        &self,
        state: &mut ActorState,
        request: &MetadataWriteRequest,
    ) -> RuntimeResult<Option<Claim>> {
        let targets = &self.targets;
        let existing = state.resources.get(&request.resource);
        if let Some(existing) = existing.filter(|existing| existing.registration.is_some()) {
            let same = existing.history.key() == normalize(&request.target);
            return Ok(same.then_some(Claim::Held));
        }
        if existing.is_none() && state.resources.len() >= targets.capacity() {
            return Err(registry_full(targets.capacity()));
        }
        let registration = match targets.claim(&request.target, &request.resource) {
            Ok(registration) => registration,
            Err(TargetClaimRefusal::Conflict) => return Ok(None),
            Err(TargetClaimRefusal::Full { capacity }) => return Err(registry_full(capacity)),
        };
        let history = registration.history();
        let known = existing.is_some_and(|existing| Arc::ptr_eq(&existing.history, history));
        if !known {
            let health = state
                .resources
                .remove(&request.resource)
                .map(|old| old.health)
                .unwrap_or_default();
            state.resources.insert(
                Arc::clone(&request.resource),
                Resource {
                    target: Arc::clone(&request.target),
                    seen_durable: history.durable(),
                    history: Arc::clone(history),
                    registration: None,
                    in_flight: None,
                    queued: None,
                    waiters: Vec::new(),
                    listed: false,
                    health,
                },
            );
        }
        Ok(Some(Claim::Fresh(registration)))
    }

    /// Phase 4: a generation the in-flight or queued one covers only gets a
    /// waiter; a newer one replaces the queued snapshot (its charge resized
    /// by the delta, invariant 2) or is queued (charged, listed as ready),
    /// taking the fresh registration with it.
    fn admit_generation(
        &self,
        state: &mut ActorState,
        request: MetadataWriteRequest,
        claim: Claim,
    ) -> RuntimeResult<()> {
        let Some(resource) = state.resources.get_mut(&request.resource) else {
            return Err(RuntimeError::internal_failure(RuntimeOperation::MetadataIo));
        };
        let generation = request.generation;
        let covered = resource
            .in_flight
            .is_some_and(|(in_flight, _)| generation <= in_flight)
            || resource
                .queued
                .as_ref()
                .is_some_and(|queued| generation <= queued.request.generation);
        if covered {
            return Ok(());
        }
        let len = request.len();
        if let Some(queued) = resource.queued.as_mut() {
            // Coalesce: replace the queued snapshot; grow the charge by the
            // delta only, shrink after dropping the old one.
            let old = queued.request.len();
            if len > old {
                if state.pending_bytes + (len - old) > self.config.max_pending_bytes
                    || queued.permit.try_resize(len).is_err()
                {
                    return Err(capacity_error(RuntimeOperation::AdmitMetadataBytes));
                }
                queued.request = request;
                state.pending_bytes += len - old;
            } else {
                queued.request = request;
                let _ = queued.permit.try_resize(len);
                state.pending_bytes -= old - len;
            }
            return Ok(());
        }
        if state.pending_operations >= self.config.max_pending_operations {
            return Err(capacity_error(RuntimeOperation::AdmitMetadataOperation));
        }
        if state.pending_bytes + len > self.config.max_pending_bytes {
            return Err(capacity_error(RuntimeOperation::AdmitMetadataBytes));
        }
        let Ok(permit) = self.budget.try_acquire_data(len) else {
            return Err(capacity_error(RuntimeOperation::AdmitMetadataBytes));
        };
        let name = Arc::clone(&request.resource);
        resource.queued = Some(Queued { request, permit });
        if let Claim::Fresh(registration) = claim {
            resource.registration = Some(registration);
        }
        state.pending_operations += 1;
        state.pending_bytes += len;
        if resource.in_flight.is_none() && !resource.listed {
            resource.listed = true;
            state.ready.push_back(name);
        }
        Ok(())
    }
}

/// Phase 3: a fenced target takes nothing new, not even a covered
/// generation (invariant 5); a generation the history already holds durable
/// is answered at once.
fn settled_by_history(
    resource: &Resource,
    generation: MetadataGeneration,
) -> RuntimeResult<Option<MetadataIoReceipt>> {
    if resource.history.fenced() {
        return Err(RuntimeError::context_unavailable(
            RuntimeOperation::MetadataResourceTarget,
        ));
    }
    let durable = resource.history.durable();
    Ok(durable
        .filter(|durable| generation <= *durable)
        .map(|durable| MetadataIoReceipt {
            generation,
            identity: resource.identity(),
            outcome: ReceiptOutcome::Ready(MetadataIoCommitOutcome::Durable(durable)),
        }))
}

/// The refusal of a new target beyond the registry's (or an actor's
/// resource cache's) capacity, naming the capacity.
fn registry_full(capacity: usize) -> RuntimeError {
    capacity_error(RuntimeOperation::AdmitMetadataOperation).with_context(
        RuntimeErrorContext::Capacity {
            limit: "metadata target registry",
            capacity,
        },
    )
}
