//! The actor's shared state and its admission: every decision under one
//! lock (`ActorState`), at most one generation in flight and one queued per
//! resource, coalescing with the payload charge resized, bounded waiters.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::path::Path;
use std::sync::Arc;

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
pub(super) struct ActorState {
    pub(super) resources: BTreeMap<Arc<str>, Resource>,
    pub(super) ready: VecDeque<Arc<str>>,
    pub(super) writing: usize,
    pub(super) pending_operations: usize,
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
    pub(super) finished: Notify,
    pub(super) accepting: AtomicBool,
    /// `MetadataIoActor` handles alive: the last one dropped stops
    /// admission (queued work still drains).
    pub(super) handles: AtomicUsize,
    /// Set once the coordinator has ended and no write is in flight (see
    /// [`ActorShared::finish`]).
    pub(super) coordinator_done: AtomicBool,
    /// The coordinator's future is gone (ended or aborted); set under the
    /// state lock.
    pub(super) coordinator_gone: AtomicBool,
    /// `finish` ran (once).
    pub(super) released: AtomicBool,
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
            .field("accepting", &self.accepting.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl ActorShared {
    pub(super) fn submit(
        self: &Arc<Self>,
        request: MetadataWriteRequest,
        deadline: MetadataDeadline,
    ) -> RuntimeResult<MetadataIoAdmissionOutcome> {
        if deadline.is_expired()
            || request
                .lane_deadline
                .is_some_and(MetadataDeadline::is_expired)
        {
            return Err(RuntimeError::timed_out(
                RuntimeOperation::AdmitMetadataSnapshot,
            ));
        }
        if !self.accepting.load(Ordering::SeqCst) || self.group.cancellation_token().is_cancelled()
        {
            return Err(RuntimeError::closed(RuntimeOperation::MetadataIoClosed));
        }
        let mut guard = self.state.lock();
        // Again under the lock: the coordinator decides it is finished
        // under this lock, so nothing is admitted after that decision.
        if !self.accepting.load(Ordering::SeqCst) {
            return Err(RuntimeError::closed(RuntimeOperation::MetadataIoClosed));
        }
        let state = &mut *guard;
        // Target ownership: one resource per target per owner. A resource
        // may move to another target only while it has no pending work
        // (invariant 9); its old target keeps its history.
        let targets = &self.targets;
        let claimed = match state.resources.get(&request.resource) {
            // Pending work holds the registration: the same target keeps it.
            Some(existing) if existing.registration.is_some() => {
                if existing.history.key() != normalize(&request.target) {
                    return Ok(MetadataIoAdmissionOutcome::TargetConflict(request));
                }
                None
            }
            existing => {
                if existing.is_none() && state.resources.len() >= targets.capacity() {
                    return Err(registry_full(targets.capacity()));
                }
                match targets.claim(&request.target, &request.resource) {
                    Ok(registration) => Some(registration),
                    Err(TargetClaimRefusal::Conflict) => {
                        return Ok(MetadataIoAdmissionOutcome::TargetConflict(request))
                    }
                    Err(TargetClaimRefusal::Full { capacity }) => {
                        return Err(registry_full(capacity))
                    }
                }
            }
        };
        if let Some(registration) = &claimed {
            let history = registration.history();
            let known = state
                .resources
                .get(&request.resource)
                .is_some_and(|existing| Arc::ptr_eq(&existing.history, history));
            if !known {
                // A new resource, one moving to another target, or one whose
                // history was retired since: it starts from the history.
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
        }
        let Some(resource) = state.resources.get_mut(&request.resource) else {
            return Err(RuntimeError::internal_failure(RuntimeOperation::MetadataIo));
        };
        let generation = request.generation;
        // A fenced target takes nothing new, not even a covered generation
        // (invariant 5).
        if resource.history.fenced() {
            return Err(RuntimeError::context_unavailable(
                RuntimeOperation::MetadataResourceTarget,
            ));
        }
        let durable = resource.history.durable();
        if let Some(durable) = durable.filter(|durable| generation <= *durable) {
            // Nothing to write: a fresh registration is dropped here.
            return Ok(MetadataIoAdmissionOutcome::Accepted(MetadataIoReceipt {
                generation,
                identity: resource.identity(),
                outcome: ReceiptOutcome::Ready(MetadataIoCommitOutcome::Durable(durable)),
            }));
        }
        if state.waiters >= self.max_waiters || resource.waiters.len() >= self.max_waiters {
            return Err(capacity_error(RuntimeOperation::AdmitMetadataOperation));
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
                            return Err(capacity_error(RuntimeOperation::AdmitMetadataBytes));
                        }
                        if queued.permit.try_resize(len).is_err() {
                            return Err(capacity_error(RuntimeOperation::AdmitMetadataBytes));
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
                        return Err(capacity_error(RuntimeOperation::AdmitMetadataOperation));
                    }
                    if state.pending_bytes + len > self.config.max_pending_bytes {
                        return Err(capacity_error(RuntimeOperation::AdmitMetadataBytes));
                    }
                    let Ok(permit) = self.budget.try_acquire_data(len) else {
                        return Err(capacity_error(RuntimeOperation::AdmitMetadataBytes));
                    };
                    resource.queued = Some(Queued { request, permit });
                    if let Some(registration) = claimed {
                        resource.registration = Some(registration);
                    }
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
