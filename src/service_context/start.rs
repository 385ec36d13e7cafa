//! Starting services under a context: the metadata actor and the service
//! lifecycle take what they need from a [`ChildServiceContext`] here (its
//! lane, budget, registry and group), so the services themselves know no
//! context type and sit below the wiring layer (`ARCHITECTURE.md`).

use std::sync::Arc;

use super::ChildServiceContext;
use crate::durable::{LocalMetadataFileSystem, MetadataFileSystem};
use crate::error::RuntimeResult;
use crate::metadata_io::{ActorSeat, MetadataIoActor, MetadataIoPlan};
#[cfg(not(loom))]
use crate::service_lifecycle::{LifecycleSeat, ServiceLifecycle};

impl MetadataIoPlan {
    /// Starts an actor writing to the local filesystem, in `context`: its
    /// coordinator is a task of the context's group, its writes run on the
    /// context's `metadata_io()` lane, and its snapshots are charged to the
    /// owner's process budget.
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
        let seat = ActorSeat {
            lane: context.metadata_io().clone(),
            process: context.process_budget(),
            targets: Arc::clone(context.resources().metadata_targets()),
            group: context.task_group().clone(),
        };
        self.launch(seat, file_system)
    }
}

#[cfg(not(loom))]
impl ServiceLifecycle {
    /// Starts the lifecycle's own work in a `service-lifecycle` component
    /// of `context`: a heartbeat that records progress every second, and
    /// the probe server when `probe_bind_addr` is set.
    ///
    /// # Errors
    ///
    /// `internal_failure(StartServiceLifecycle)` for a second start; the
    /// component's refusal; `io(BindServiceHealthProbe)` when the probe
    /// address cannot be bound: its source is the OS error and its
    /// [`context`](crate::RuntimeError::context) the address (the component is
    /// shut down and `start` can be retried).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropping the future mid-start may leave the
    /// component started; shut the context down to clean it up.
    pub async fn start(&self, context: &ChildServiceContext) -> RuntimeResult<()> {
        self.start_in(|| {
            let component = context.try_component("service-lifecycle")?;
            Ok(LifecycleSeat {
                group: component.task_group().clone(),
                diagnostics: component.diagnostics().clone(),
                lanes: [
                    component.storage_io().clone(),
                    component.metadata_io().clone(),
                    component.cpu_crypto().clone(),
                ],
                budget: component.process_budget(),
            })
        })
        .await
    }
}
