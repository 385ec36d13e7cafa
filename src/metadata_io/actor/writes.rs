//! The coordinator and the writes it starts: fair scheduling on the
//! metadata lane, completion (generations, waiters, fencing, budget), and
//! the claims that keep a target registered until the real write exits.
//!
//! A write's closure holds no strong reference to the actor: it owns its
//! payload, its permit, the file system and a clone of the target's
//! registration, records the outcome in the target's history itself, and
//! reports to the actor through a weak reference, so the actor and its
//! coordinator can be destroyed while it runs (invariant 6).

use std::sync::{Arc, Weak};

use super::lifecycle::Lifecycle;
use crate::metadata_io::targets::TargetRegistration;

use super::*;

impl ActorShared {
    /// The coordinator: starts writes while slots are free and drives the
    /// ones waiting for a lane slot, until admission is stopped and nothing
    /// is left.
    pub(super) async fn coordinate(self: Arc<Self>) {
        use futures::stream::{FuturesUnordered, StreamExt};

        let cancelled = self.group.cancellation_token();
        let mut waiting = FuturesUnordered::new();
        // Whether this loop has applied the owner's cancellation. The wait
        // below listens for cancellation until it has: a cancellation that
        // lands after the check at the top (while writes start) still ends
        // the wait, which then applies it. Keying the wait on the token's
        // own state instead would drop that branch and sleep on `wake`,
        // which nothing rings once the actor is idle.
        let mut stopped = false;
        loop {
            let woken = self.wake.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            if !stopped && cancelled.is_cancelled() {
                // Owner cancellation stops admission; accepted work drains.
                self.state.lock().lifecycle.stop();
                stopped = true;
            }
            let done = self.start_writes();
            waiting.extend(std::mem::take(&mut *self.deferred.lock()));
            if done {
                break;
            }
            tokio::select! {
                () = &mut woken => {}
                () = cancelled.cancelled(), if !stopped => {}
                Some(()) = waiting.next(), if !waiting.is_empty() => {}
            }
        }
    }

    /// Starts the ready writes that fit; true when the actor is finished.
    pub(super) fn start_writes(self: &Arc<Self>) -> bool {
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
                let Some(registration) = resource.registration.clone() else {
                    // Unreachable: queued work holds the registration.
                    resource.queued = Some(queued);
                    continue;
                };
                resource.in_flight = Some((queued.request.generation, queued.request.len()));
                state.writing += 1;
                starting.push((queued, registration));
            }
            state.drained()
        };
        // Spawned after the lock is released: a refused spawn completes
        // the write at once, which takes the lock again.
        for (Queued { request, permit }, registration) in starting {
            self.spawn_write(request, permit, registration);
        }
        finished
    }

    /// Runs one write on the lane. The closure owns the payload, its
    /// permit and a registration clone (module docs), releases them when
    /// the write ends and settles the write itself (no hop back to a task).
    /// It starts directly when a lane slot is free; otherwise it is handed
    /// to the coordinator, which queues it on the lane. A closure that never runs (refused, or
    /// discarded by Tokio) settles the write as failed from its drop guard;
    /// a claim flag makes exactly one side report. The first write the
    /// actor starts on a target removes the temporary files an earlier
    /// process left beside it.
    pub(super) fn spawn_write(
        self: &Arc<Self>,
        request: MetadataWriteRequest,
        permit: ResourcePermit,
        registration: TargetRegistration,
    ) {
        let generation = request.generation;
        let lane_deadline = request.lane_deadline;
        if lane_deadline.is_some_and(MetadataDeadline::is_expired) {
            // Never started: the lane deadline passed while it was queued.
            let name = Arc::clone(&request.resource);
            drop((request, permit));
            self.complete(
                &name,
                generation,
                MetadataIoCommitOutcome::FailedBeforeCommit(RuntimeError::timed_out(
                    RuntimeOperation::RunBlockingTask,
                )),
            );
            return;
        }
        let claim = WriteClaim {
            state: Arc::new(AtomicU8::new(CLAIM_PENDING)),
            shared: Arc::downgrade(self),
            name: Arc::clone(&request.resource),
            generation,
        };
        let abandon = claim.clone_handle();
        let sweep = {
            let mut swept = self.swept.lock();
            !swept.contains(&request.target) && swept.insert(Arc::clone(&request.target))
        };
        let file_system = Arc::clone(&self.file_system);
        // Settles on drop unless it is handed to the coordinator (the lane
        // then reports its own error).
        let handed_over = Arc::new(AtomicBool::new(false));
        let guard = ClosureClaim {
            claim: Some(claim),
            registration: Some(registration),
            handed_over: Arc::clone(&handed_over),
        };
        let work = move || {
            let mut guard = guard;
            let (Some(claim), Some(registration)) = (guard.claim.take(), guard.registration.take())
            else {
                return;
            };
            if !claim.try_claim() {
                return;
            }
            if sweep {
                sweep_stale(&*file_system, &request.target);
            }
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
            // The history learns the outcome whether or not the actor is
            // still there; the target is released before anyone is told.
            match &outcome {
                MetadataIoCommitOutcome::Durable(durable) => {
                    registration.history().record_durable(*durable);
                }
                MetadataIoCommitOutcome::CommitOutcomeUnknown(_) => registration.history().fence(),
                MetadataIoCommitOutcome::FailedBeforeCommit(_) => {}
            }
            drop(registration);
            claim.report(outcome);
        };
        let work = match self
            .lane
            .try_start_detached(Arc::from("metadata-write"), work)
        {
            Ok(()) => return,
            Err(work) => work,
        };
        handed_over.store(true, Ordering::SeqCst);
        let lane = self.lane.clone();
        let writer_claim = WriterClaim(abandon);
        let writer = async move {
            let writer_claim = writer_claim;
            // Without a lane deadline the write waits for a slot for as
            // long as the lane's own queue timeout allows, and never past
            // its scope's shutdown deadline.
            let until = lane_deadline.map_or_else(
                || ShutdownDeadline::after(Duration::from_secs(86_400 * 365)),
                |deadline| ShutdownDeadline::from_tokio(deadline.instant()),
            );
            // Accepted while the actor admitted it: a cancelled or closing
            // scope still lets it through (the lane's `Finalization` rule).
            if let Err(error) = lane
                .spawn_accepted_until(Arc::from("metadata-write"), until, work)
                .await
            {
                // Refused before it started (or the caller stopped waiting
                // while it runs: then the closure has claimed the write).
                writer_claim.0.abandon(error);
            }
        };
        self.deferred.lock().push(Box::pin(writer));
        if self.state.lock().lifecycle >= Lifecycle::Orphaned {
            // Nobody will drive it: settle it now (its claim abandons).
            drop(std::mem::take(&mut *self.deferred.lock()));
        }
        self.wake.notify_one();
    }

    /// Settles a finished write: resolves every waiter it covers, advances
    /// or fences, and re-lists the resource behind newer arrivals.
    pub(super) fn complete(
        self: &Arc<Self>,
        name: &Arc<str>,
        generation: MetadataGeneration,
        outcome: MetadataIoCommitOutcome,
    ) {
        let mut guard = self.state.lock();
        let state = &mut *guard;
        state.writing -= 1;
        // The coordinator is gone and this was the last write: the actor
        // is finished (its waiters are woken after the lock).
        let last = state.write_ended();
        let Some(resource) = state.resources.get_mut(name) else {
            drop(guard);
            if last {
                self.finished.notify_waiters();
            }
            return;
        };
        if let Some((_, bytes)) = resource.in_flight.take() {
            state.pending_operations -= 1;
            state.pending_bytes -= bytes;
        }
        let health =
            resource
                .health
                .record(name, &resource.target, &outcome, tokio::time::Instant::now);
        // The closure recorded the outcome in the history (writes.rs docs).
        if let MetadataIoCommitOutcome::Durable(_) = &outcome {
            resource.seen_durable = resource.history.durable();
        }
        let (covered, waiting): (Vec<_>, Vec<_>) = resource
            .waiters
            .drain(..)
            .partition(|waiter| waiter.generation <= generation);
        resource.waiters = waiting;
        state.waiters -= covered.len();
        // A generation queued before a fence still runs (invariant 5).
        if resource.queued.is_some() {
            if !resource.listed {
                resource.listed = true;
                state.ready.push_back(Arc::clone(name));
            }
        } else {
            // Idle: the target is free for the owner's other actors before
            // any waiter hears of this write, and before the coordinator
            // can see the actor finished (released under the state lock;
            // the registry's locks come after it).
            drop(resource.registration.take());
        }
        drop(guard);
        if let Some(line) = health.line {
            line.emit();
        }
        if health.changed {
            self.health_epoch.send_modify(|epoch| *epoch += 1);
        }
        for waiter in covered {
            let _ = waiter.sender.send(outcome.clone());
        }
        if last {
            self.finished.notify_waiters();
        }
        // The coordinator starts the next writes: a completion may run on
        // a blocking thread that still holds its lane slot, or inside a
        // refusal, so it never starts writes itself.
        self.wake.notify_one();
    }
}

/// Runs however the coordinator ends (also when its task is aborted):
/// nothing more is admitted or started; queued generations are dropped
/// (their permits go back) and the waiters no in-flight write covers are
/// closed (`Closed(MetadataWorkerStopped)`), instead of waiting for their
/// own deadlines. An idle resource releases its target now; one with a
/// write in flight when that write ends.
pub(super) struct CoordinatorExit(pub(super) Arc<ActorShared>);

impl Drop for CoordinatorExit {
    fn drop(&mut self) {
        let shared = &self.0;
        let mut dropped = Vec::new();
        let mut closed = Vec::new();
        let mut released = Vec::new();
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
                if resource.in_flight.is_none() {
                    released.extend(resource.registration.take());
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
            state.coordinator_gone()
        };
        // Permits and waiter senders go after the lock (a dropped sender
        // tells its receipt the worker stopped). Writes still waiting for a
        // lane slot will not be driven any more: dropping them settles them
        // as failed (their claims abandon).
        drop(dropped);
        drop(released);
        drop(closed);
        drop(std::mem::take(&mut *shared.deferred.lock()));
        if idle {
            shared.finished.notify_waiters();
        }
    }
}

pub(super) const CLAIM_PENDING: u8 = 0;
pub(super) const CLAIM_TAKEN: u8 = 1;
pub(super) const CLAIM_ABANDONED: u8 = 2;

/// Decides, exactly once, who settles a write: its closure when it runs,
/// otherwise whoever sees it refused or dropped.
pub(super) struct WriteClaim {
    pub(super) state: Arc<AtomicU8>,
    /// Weak: a running write never keeps the actor alive.
    pub(super) shared: Weak<ActorShared>,
    pub(super) name: Arc<str>,
    pub(super) generation: MetadataGeneration,
}

impl WriteClaim {
    pub(super) fn clone_handle(&self) -> Self {
        Self {
            state: Arc::clone(&self.state),
            shared: Weak::clone(&self.shared),
            name: Arc::clone(&self.name),
            generation: self.generation,
        }
    }

    /// Claims the write for the running closure (false: already settled).
    pub(super) fn try_claim(&self) -> bool {
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
    pub(super) fn abandon(&self, error: RuntimeError) {
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
            self.report(MetadataIoCommitOutcome::FailedBeforeCommit(error));
        }
    }

    /// Tells the actor, if it is still there, how the write ended.
    pub(super) fn report(&self, outcome: MetadataIoCommitOutcome) {
        if let Some(shared) = self.shared.upgrade() {
            shared.complete(&self.name, self.generation, outcome);
        }
    }
}

/// The closure's claim: a closure dropped without running (Tokio
/// discarding it) still settles its write, unless it was handed to the
/// coordinator (`handed_over`), whose lane submission reports the lane's
/// error instead.
pub(super) struct ClosureClaim {
    pub(super) claim: Option<WriteClaim>,
    /// The target stays registered while the closure exists.
    pub(super) registration: Option<TargetRegistration>,
    pub(super) handed_over: Arc<AtomicBool>,
}

impl Drop for ClosureClaim {
    fn drop(&mut self) {
        // The target is released before the write is settled.
        drop(self.registration.take());
        if let Some(claim) = self.claim.take() {
            if !self.handed_over.load(Ordering::SeqCst) {
                claim.abandon(RuntimeError::closed(
                    RuntimeOperation::MetadataWorkerStopped,
                ));
            }
        }
    }
}

/// The deferred write's claim: settles the write if its future ends (or is
/// dropped with the coordinator) without the closure having claimed it.
pub(super) struct WriterClaim(WriteClaim);

impl Drop for WriterClaim {
    fn drop(&mut self) {
        self.0.abandon(RuntimeError::closed(
            RuntimeOperation::MetadataWorkerStopped,
        ));
    }
}

/// Removes what an earlier process left beside `target`; a failure to look
/// is logged and the write goes on.
fn sweep_stale(file_system: &dyn MetadataFileSystem, target: &std::path::Path) {
    match file_system.remove_stale_temporaries(target) {
        Ok(0) => {}
        Ok(removed) => tracing::info!(
            path = %target.display(),
            removed,
            "removed temporary metadata files an earlier process left"
        ),
        Err(error) => tracing::warn!(
            path = %target.display(),
            %error,
            "could not look for stale temporary metadata files"
        ),
    }
}
