//! [`RuntimeContext`]: a migration and test harness over a host runtime.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::runtime::Handle;

use crate::config::RuntimeConfig;
use crate::error::{RuntimeError, RuntimeOperation, RuntimeResult};
use crate::resource_budget::memory::{ManagedMemoryPolicy, ProcessMemoryLimit};
use crate::resources::RuntimeResources;
use crate::service_context::{ChildServiceContext, ContextShared, ScopeId};
use crate::shutdown_deadline::ShutdownDeadline;
use crate::shutdown_report::ShutdownReport;
use crate::task_group::TaskGroup;

/// Tracked task ownership on an existing Tokio runtime, for migration and
/// tests.
///
/// It shuts down the work registered through it but never owns, closes or
/// shuts down the host runtime. Production entrypoints use
/// [`RuntimeOwner`](crate::RuntimeOwner). The host runtime must have its time
/// driver enabled (`enable_time`/`enable_all`): shutdown deadlines are Tokio
/// timers.
#[derive(Debug, Clone)]
pub struct RuntimeContext {
    root: TaskGroup,
    shared: Arc<ContextShared>,
}

/// A harness's resources: a permissive `u64::MAX` memory budget (CONTRACTS
/// 1.19). A harness is for migration and tests: it never runs production
/// memory discovery, so a test sized for a large budget behaves the same in
/// a small container.
fn harness_resources() -> RuntimeResult<RuntimeResources> {
    let limit = ProcessMemoryLimit::configured(u64::MAX).map_err(|violation| {
        RuntimeError::configuration_failure(RuntimeOperation::DetectProcessMemoryLimit, violation)
    })?;
    RuntimeResources::new(limit, None, ManagedMemoryPolicy::default()).map_err(|violation| {
        RuntimeError::configuration_failure(RuntimeOperation::ResolveManagedMemoryBudget, violation)
    })
}

impl RuntimeContext {
    /// Builds a harness on the current Tokio runtime.
    ///
    /// # Errors
    ///
    /// Kind `ContextUnavailable` (operation `RuntimeContext`) outside Tokio.
    pub fn try_from_current(name: impl Into<Arc<str>>) -> RuntimeResult<Self> {
        let handle = Handle::try_current()
            .map_err(|_| RuntimeError::context_unavailable(RuntimeOperation::RuntimeContext))?;
        let root = TaskGroup::new_root(name, handle);
        let shared = ContextShared::new(&root, &RuntimeConfig::default(), harness_resources()?);
        Ok(Self { root, shared })
    }

    /// Like [`try_from_current`](Self::try_from_current).
    ///
    /// # Panics
    ///
    /// Panics outside a Tokio runtime.
    pub fn from_current(name: impl Into<Arc<str>>) -> Self {
        match Self::try_from_current(name) {
            Ok(context) => context,
            Err(error) => panic!("RuntimeContext::from_current: {error}"),
        }
    }

    /// The harness's root group.
    pub fn root_group(&self) -> &TaskGroup {
        &self.root
    }

    /// A component context under the harness root.
    pub fn service_context(&self, scope: impl Into<ScopeId>) -> ChildServiceContext {
        ChildServiceContext::from_parent(&self.root, &self.shared, scope.into())
    }

    /// Shuts down the registered work within `timeout` (converted to a
    /// deadline and installed at the call).
    ///
    /// # Cancel safety
    ///
    /// As [`TaskGroup::shutdown_until`].
    pub fn shutdown_tasks(&self, timeout: Duration) -> BoxFuture<'_, ShutdownReport> {
        self.root.shutdown(timeout)
    }

    /// Shuts down the registered work within `deadline` (installed at the
    /// call, even if the future is never polled).
    ///
    /// # Cancel safety
    ///
    /// As [`TaskGroup::shutdown_until`].
    pub fn shutdown_tasks_until(
        &self,
        deadline: ShutdownDeadline,
    ) -> BoxFuture<'_, ShutdownReport> {
        self.root.shutdown_until(deadline)
    }

    /// Immediate shutdown of the registered work (see
    /// [`TaskGroup::shutdown_now`]).
    pub fn shutdown_tasks_now(&self) -> ShutdownReport {
        self.root.shutdown_now()
    }
}
