//! Named dependencies and the storage dependency: readiness that follows
//! the metadata actor's writes.
//!
//! Invariants:
//!
//! 1. The service is ready only while the unnamed dependency readiness
//!    ([`ServiceLifecycle::set_dependency_readiness`], which a critical
//!    failure degrades) *and* every named one are `Ready`; liveness never
//!    looks at either.
//! 2. [`ServiceLifecycle::watch_metadata_storage`] re-reads the actor's
//!    failures on every failure and recovery (the actor's health epoch, no
//!    polling): the `storage` dependency is `Degraded` while a resource has
//!    failed at least the given number of consecutive writes, or its last
//!    write's outcome is unknown (the target is fenced and takes no more
//!    writes), and `Ready` again from the resource's next durable write.
//! 3. A fenced target never takes another write in this process, so it is
//!    escalated once, at once: one `ERROR` line names the resource, the
//!    target, the unknown outcome and the remedy, the service is marked
//!    `Failed` (`/livez` answers `503`) and an `Internal` shutdown is
//!    requested, recorded in the report's reason as `metadata_fenced`. The
//!    ordered stop drains what it can within its deadline and the process
//!    exits unhealthy, so its supervisor restarts it and recovery
//!    reconciles from the files on disk.

use std::num::NonZeroU64;

use super::{DependencyReadiness, LifecycleState, ServiceLifecycle};
use crate::error::RuntimeResult;
use crate::{metadata_io::MetadataIoActor, task_identity::TaskId, task_spawner::TaskSpawner};

/// The name of the dependency [`ServiceLifecycle::watch_metadata_storage`]
/// publishes.
pub const STORAGE_DEPENDENCY: &str = "storage";

impl LifecycleState {
    /// The unnamed and every named dependency are ready.
    pub(super) fn dependencies_ready(&self) -> bool {
        self.dependencies == DependencyReadiness::Ready
            && self
                .named_dependencies
                .iter()
                .all(|(_, readiness)| *readiness == DependencyReadiness::Ready)
    }
}

impl ServiceLifecycle {
    /// Publishes the dependencies' readiness (independent of the state).
    pub fn set_dependency_readiness(&self, readiness: DependencyReadiness) {
        self.inner.state.lock().dependencies = readiness;
    }

    /// The dependencies' readiness.
    pub fn dependency_readiness(&self) -> DependencyReadiness {
        self.inner.state.lock().dependencies
    }

    /// Publishes the readiness of the dependency called `name` (for
    /// example `"storage"`). The service is ready only while every named
    /// dependency is `Ready`, besides the unnamed one of
    /// [`set_dependency_readiness`](Self::set_dependency_readiness).
    pub fn set_named_dependency_readiness(&self, name: &str, readiness: DependencyReadiness) {
        let mut state = self.inner.state.lock();
        match state
            .named_dependencies
            .iter_mut()
            .find(|(existing, _)| &**existing == name)
        {
            Some((_, current)) => *current = readiness,
            None => state.named_dependencies.push((name.into(), readiness)),
        }
    }

    /// The readiness last published for the dependency called `name`, or
    /// `None` if none was.
    pub fn named_dependency_readiness(&self, name: &str) -> Option<DependencyReadiness> {
        self.inner
            .state
            .lock()
            .named_dependencies
            .iter()
            .find(|(existing, _)| &**existing == name)
            .map(|(_, readiness)| *readiness)
    }

    /// Spawns `service-lifecycle.storage` on `spawner`: it keeps the
    /// [`STORAGE_DEPENDENCY`] dependency `Degraded` (so `/readyz` answers
    /// `503`) while any resource of `actor` has failed
    /// `failures_before_unready` consecutive writes, and `Ready` again once
    /// that resource's next write is durable; liveness is unaffected by
    /// failed writes. A fenced target (an unknown commit outcome: no more
    /// writes reach it in this process) is escalated instead: one `ERROR`
    /// line naming the target and the remedy, the service `Failed` and an
    /// `Internal` shutdown requested (reason `metadata_fenced`), so the
    /// process stops and a restart reconciles from disk. The
    /// task ends when `spawner`'s group is cancelled. One actor per
    /// lifecycle: a second watcher would publish the same dependency (give
    /// another actor's health its own name with
    /// [`set_named_dependency_readiness`](Self::set_named_dependency_readiness)).
    ///
    /// # Errors
    ///
    /// The spawner's refusal.
    pub fn watch_metadata_storage(
        &self,
        spawner: &TaskSpawner,
        actor: &MetadataIoActor,
        failures_before_unready: NonZeroU64,
    ) -> RuntimeResult<TaskId> {
        let lifecycle = self.clone();
        let actor = actor.clone();
        let mut epoch = actor.storage_epoch();
        let cancelled = spawner.cancellation_token();
        lifecycle.set_named_dependency_readiness(STORAGE_DEPENDENCY, DependencyReadiness::Ready);
        spawner.spawn_service("service-lifecycle.storage", async move {
            let mut escalated = false;
            loop {
                epoch.borrow_and_update();
                let failures = actor.storage_failures();
                // A fenced target (outcome unknown) takes no more writes:
                // unready at once, and escalated (invariant 3).
                let fenced = failures.iter().find(|failure| failure.outcome_unknown);
                if let (Some(fenced), false) = (fenced, escalated) {
                    escalated = true;
                    tracing::error!(
                        resource = %fenced.resource,
                        path = %fenced.target.display(),
                        step = fenced.operation.label(),
                        error = %fenced.error,
                        "metadata target fenced: the outcome of a commit to it is unknown, so no more writes reach it in this process; stopping (reason metadata_fenced) so that a restart reconciles it from disk"
                    );
                    lifecycle.mark_failed();
                    lifecycle.request_shutdown_labelled(
                        super::ShutdownReason::Internal,
                        "metadata_fenced",
                    );
                }
                let failing = fenced.is_some()
                    || failures
                        .iter()
                        .any(|failure| failure.consecutive_failures >= failures_before_unready.get());
                lifecycle.set_named_dependency_readiness(
                    STORAGE_DEPENDENCY,
                    if failing {
                        DependencyReadiness::Degraded
                    } else {
                        DependencyReadiness::Ready
                    },
                );
                tokio::select! {
                    biased;
                    () = cancelled.cancelled() => return,
                    changed = epoch.changed() => if changed.is_err() { return },
                }
            }
        })
    }
}
