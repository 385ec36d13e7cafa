//! The actor's view of its targets' histories: identities, the confirmed
//! durable generation, and retirement (see `metadata_io/targets.rs` for
//! the registry's side).

use super::*;
use crate::metadata_io::targets::{MetadataTargetIdentity, MetadataTargetRetirementOutcome};

impl MetadataIoActor {
    /// The identity of `resource`'s target history, if this actor has
    /// written or claimed one.
    pub fn target_identity(&self, resource: &str) -> Option<MetadataTargetIdentity> {
        let state = self.shared.state.lock();
        state.resources.get(resource).map(Resource::identity)
    }

    /// The newest generation of `resource` known durable: from its target's
    /// history when this actor holds it, otherwise from the owner's
    /// registry (a replacement actor sees what an earlier one wrote).
    pub fn confirmed_durable_generation(&self, resource: &str) -> Option<MetadataGeneration> {
        let held = {
            let state = self.shared.state.lock();
            state
                .resources
                .get(resource)
                .map(|entry| entry.history.durable())
        };
        held.unwrap_or_else(|| self.shared.targets.durable_of(resource))
    }

    /// Ends the history of `resource`'s target so the path can serve a new
    /// identity, and frees its slot in the owner's registry.
    ///
    /// Only an actor whose admission is stopped and whose work is done can
    /// retire, and only an idle, unfenced history that holds the durable
    /// generation this actor last saw:
    ///
    /// * `AdmissionOpen`: call [`stop_admission`](Self::stop_admission)
    ///   (and let [`shutdown_until`](Self::shutdown_until) finish) first;
    /// * `NotFound`: this actor has no target for `resource`;
    /// * `WorkInProgress`: the coordinator still runs, the resource has a
    ///   generation in flight or queued or a waiter, or a writer (another
    ///   actor) holds the target;
    /// * `ReconciliationRequired`: the target is fenced after an unknown
    ///   commit outcome;
    /// * `HistoryChanged`: another actor wrote the history after this one,
    ///   or it was already retired;
    /// * `Retired`: done. Receipts already handed out keep their outcome; a
    ///   later actor writing the path gets a new identity and a history
    ///   without durable generations.
    ///
    /// # Errors
    ///
    /// None: every answer is an outcome. The `Result` matches the other
    /// actor operations.
    pub fn retire_target_for_new_identity(
        &self,
        resource: &str,
    ) -> RuntimeResult<MetadataTargetRetirementOutcome> {
        let shared = &self.shared;
        let mut state = shared.state.lock();
        if state.lifecycle.admits() {
            return Ok(MetadataTargetRetirementOutcome::AdmissionOpen);
        }
        let Some(entry) = state.resources.get(resource) else {
            return Ok(MetadataTargetRetirementOutcome::NotFound);
        };
        let busy = state.lifecycle != Lifecycle::Finished
            || entry.in_flight.is_some()
            || entry.queued.is_some()
            || !entry.waiters.is_empty();
        if busy {
            return Ok(MetadataTargetRetirementOutcome::WorkInProgress);
        }
        let outcome = shared.targets.retire(&entry.history, entry.seen_durable);
        if outcome == MetadataTargetRetirementOutcome::Retired {
            state.resources.remove(resource);
        }
        Ok(outcome)
    }
}
