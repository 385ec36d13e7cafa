//! [`RuntimeContext`]: a migration and test harness over a host runtime.
//!
//! Invariants:
//!
//! 1. A harness tracks and shuts down only the work registered through it; it
//!    never owns, closes or stops the host runtime.
//! 2. The host runtime must have its time driver enabled: shutdown deadlines
//!    are Tokio timers.
//! 3. Its memory budget is permissive (`u64::MAX`): a harness never runs
//!    memory discovery.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::runtime::Handle;

use crate::blocking::{BlockingLanePolicies, BlockingPoolPolicy, ScopedLanes};
use crate::config::RuntimeConfig;
use crate::error::{RuntimeError, RuntimeOperation, RuntimeResult};
use crate::resource_budget::memory::{ManagedMemoryPolicy, ProcessMemoryLimit};
use crate::resources::RuntimeResources;
use crate::service_context::{ChildServiceContext, ContextShared, ScopeId};
use crate::shutdown_deadline::ShutdownDeadline;
use crate::shutdown_report::BlockingLane;
use crate::shutdown_report::ShutdownReport;
use crate::task_group::TaskGroup;

/// Tracked task ownership on an existing Tokio runtime, for migration and
/// tests (hidden from the rendered docs, as the spec marks it: it is the
/// test harness, not an entry point; MIGRATION.md documents it).
///
/// It shuts down the work registered through it but never owns, closes or
/// shuts down the host runtime. Production entrypoints use
/// [`RuntimeOwner`](crate::RuntimeOwner). The host runtime must have its time
/// driver enabled (`enable_time`/`enable_all`): shutdown deadlines are Tokio
/// timers. Its memory budget is permissive (`u64::MAX`): it never runs
/// memory discovery.
#[doc(hidden)]
#[derive(Debug, Clone)]
pub struct RuntimeContext {
    root: TaskGroup,
    shared: Arc<ContextShared>,
    lanes: ScopedLanes,
}

/// A harness's resources: a permissive `u64::MAX` memory budget. A harness is for migration and tests: it never runs production
/// memory discovery, so a test sized for a large budget behaves the same in
/// a small container.
fn harness_resources() -> RuntimeResult<RuntimeResources> {
    let limit = ProcessMemoryLimit::configured(u64::MAX).map_err(|violation| {
        RuntimeError::configuration_failure(RuntimeOperation::DetectProcessMemoryLimit, violation)
    })?;
    RuntimeResources::new(
        limit,
        None,
        ManagedMemoryPolicy::default(),
        crate::metadata_io::targets::DEFAULT_CAPACITY,
    )
    .map_err(|violation| {
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
        Self::with_config(name, &RuntimeConfig::default())
    }

    /// Builds a harness whose three managed lanes all follow `policy`
    /// ([`BlockingLanePolicies::uniform`]: names suffixed `.storage-io`,
    /// `.metadata-io`, `.cpu-crypto`), with a global blocking capacity of
    /// the sum of the lanes' concurrencies, so every lane can run its
    /// `max_concurrency` at once.
    ///
    /// # Errors
    ///
    /// Kind `ContextUnavailable` (operation `RuntimeContext`) outside Tokio;
    /// kind `Configuration` (operation `RuntimeContext`) for a policy that
    /// does not validate, with the
    /// [`RuntimeContractViolation`](crate::RuntimeContractViolation) as
    /// its source.
    pub fn try_from_current_with_blocking_policy(
        name: impl Into<Arc<str>>,
        policy: BlockingPoolPolicy,
    ) -> RuntimeResult<Self> {
        policy.validate().map_err(|violation| {
            RuntimeError::configuration_failure(RuntimeOperation::RuntimeContext, violation)
        })?;
        let config = RuntimeConfig {
            max_blocking_threads: policy.max_concurrency.saturating_mul(3),
            blocking_lane_policies: BlockingLanePolicies::uniform(policy),
            ..RuntimeConfig::default()
        };
        Self::with_config(name, &config)
    }

    fn with_config(name: impl Into<Arc<str>>, config: &RuntimeConfig) -> RuntimeResult<Self> {
        let handle = Handle::try_current()
            .map_err(|_| RuntimeError::context_unavailable(RuntimeOperation::RuntimeContext))?;
        let root = TaskGroup::new_root(name, handle);
        let shared = ContextShared::new(&root, config, harness_resources()?);
        Ok(Self {
            root,
            shared,
            lanes: ScopedLanes::default(),
        })
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

    crate::service_context::delegate_diagnostics!(root);

    /// The harness's root group.
    pub fn root_group(&self) -> &TaskGroup {
        &self.root
    }

    /// The managed lane `lane`, scoped to the harness root (see
    /// [`ChildServiceContext::blocking`]).
    pub fn blocking(&self, lane: BlockingLane) -> &crate::blocking::BlockingExecutor {
        self.lanes.get(self.shared.blocking(), lane, &self.root)
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
