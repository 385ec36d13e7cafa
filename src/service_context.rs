//! Service contexts: the sealed root and the component capabilities.
//!
//! Invariants:
//!
//! 1. One sealed, non-`Clone` root per owner (or harness): only the crate can
//!    build it, and the owner holds the only one.
//! 2. Children have no public constructor and cannot become a root
//!    (compile-fail tested).
//! 3. All contexts of one owner share one `ContextShared`: the runtime's
//!    diagnostics (its id), the managed blocking lanes (one admission budget per owner, whose
//!    tables are registered with the root's tree for its shutdown report) and
//!    the owner's `RuntimeResources`.

use std::fmt;
use std::sync::Arc;

mod start;

use crate::blocking::{ManagedBlocking, ScopedLanes};
use crate::config::RuntimeConfig;
use crate::diagnostics::RuntimeDiagnostics;
use crate::error::{RuntimeContractPolicy, RuntimeContractViolation, RuntimeResult};
use crate::loom::{Ordering, StaticAtomicU64};
use crate::resources::RuntimeResources;
use crate::shutdown_report::BlockingExecutorSnapshot;
use crate::task_group::TaskGroup;
use crate::task_spawner::TaskSpawner;

/// A validated component name.
///
/// Dynamic names go through [`try_new`](Self::try_new); string literals
/// convert with `From<&'static str>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ScopeId(Arc<str>);

impl ScopeId {
    /// Validates a dynamic scope name.
    ///
    /// # Errors
    ///
    /// `InvalidConfiguration { ServiceContextScopeNotBlank }` for an empty
    /// or whitespace-only name.
    pub fn try_new(name: impl Into<Arc<str>>) -> Result<Self, RuntimeContractViolation> {
        let name = name.into();
        if name.trim().is_empty() {
            return Err(RuntimeContractViolation::InvalidConfiguration {
                policy: RuntimeContractPolicy::ServiceContextScopeNotBlank,
            });
        }
        Ok(Self(name))
    }

    /// A scope from a string literal.
    ///
    /// # Panics
    ///
    /// Panics if the literal is blank: a programming error, not input.
    pub fn from_static(name: &'static str) -> Self {
        match Self::try_new(name) {
            Ok(scope) => scope,
            Err(_) => panic!("a static scope name must not be blank"),
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ScopeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&'static str> for ScopeId {
    fn from(name: &'static str) -> Self {
        Self::from_static(name)
    }
}

impl TryFrom<String> for ScopeId {
    type Error = RuntimeContractViolation;

    fn try_from(name: String) -> Result<Self, Self::Error> {
        Self::try_new(name)
    }
}

impl TryFrom<Arc<str>> for ScopeId {
    type Error = RuntimeContractViolation;

    fn try_from(name: Arc<str>) -> Result<Self, Self::Error> {
        Self::try_new(name)
    }
}

static NEXT_RUNTIME_ID: StaticAtomicU64 = StaticAtomicU64::new(1);

/// What every context of one owner (or harness) shares.
#[derive(Debug)]
pub(crate) struct ContextShared {
    diagnostics: RuntimeDiagnostics,
    /// The managed blocking lanes (one admission budget per owner).
    blocking: Arc<ManagedBlocking>,
    /// The owner's memory limit and process budget.
    resources: RuntimeResources,
}

impl ContextShared {
    /// The shared state of the context tree rooted at `root`, with managed
    /// lanes over `max_blocking_threads` slots. The lanes' tables are
    /// registered with the root's tree for its shutdown report.
    pub(crate) fn new(
        root: &TaskGroup,
        config: &RuntimeConfig,
        resources: RuntimeResources,
    ) -> Arc<Self> {
        let n = NEXT_RUNTIME_ID.fetch_add(1, Ordering::Relaxed);
        let blocking = ManagedBlocking::new(
            config.max_blocking_threads,
            config.blocking_lane_policies.clone(),
        );
        for table in blocking.tables() {
            root.register_blocking(table.evidence());
        }
        Arc::new(Self {
            diagnostics: RuntimeDiagnostics::new(n),
            blocking,
            resources,
        })
    }

    pub(crate) fn runtime_id(&self) -> &str {
        self.diagnostics.runtime_id()
    }

    pub(crate) fn diagnostics(&self) -> &RuntimeDiagnostics {
        &self.diagnostics
    }

    /// Snapshots of the owner's managed lanes, in lane order.
    pub(crate) fn lane_snapshots(&self) -> Vec<BlockingExecutorSnapshot> {
        self.blocking
            .tables()
            .iter()
            .map(|table| table.snapshot())
            .collect()
    }

    pub(crate) fn resources(&self) -> &RuntimeResources {
        &self.resources
    }

    pub(crate) fn blocking(&self) -> &ManagedBlocking {
        &self.blocking
    }
}

/// The diagnostics methods of a context (root, component or harness) over
/// its own group (`$group`) and the owner's managed lanes; expects a
/// `shared: Arc<ContextShared>` field.
macro_rules! delegate_diagnostics {
    ($group:ident) => {
        /// This runtime's diagnostics, shared by every context of the owner.
        pub fn diagnostics(&self) -> &crate::diagnostics::RuntimeDiagnostics {
            self.shared.diagnostics()
        }

        /// Raw figures of this context's group and subtree with the owner's
        /// blocking lanes: ids and names included, for the process's own
        /// logs (see [`RuntimeDiagnosticsSnapshot`](crate::RuntimeDiagnosticsSnapshot)).
        pub fn diagnostics_snapshot(&self) -> crate::diagnostics::RuntimeDiagnosticsSnapshot {
            self.shared
                .diagnostics()
                .snapshot(&self.$group, self.shared.lane_snapshots())
        }

        /// The sanitized V1 view of this context's subtree and the owner's
        /// blocking lanes (see [`RuntimeDiagnosticsViewV1`](crate::RuntimeDiagnosticsViewV1)).
        pub fn diagnostics_view_v1(
            &self,
            component: crate::diagnostics::RuntimeComponent,
        ) -> crate::diagnostics::RuntimeDiagnosticsViewV1 {
            self.diagnostics_view_v1_with_options(component, Default::default())
        }

        /// [`diagnostics_view_v1`](Self::diagnostics_view_v1) with explicit
        /// bounds and long-running threshold.
        pub fn diagnostics_view_v1_with_options(
            &self,
            component: crate::diagnostics::RuntimeComponent,
            options: crate::diagnostics::RuntimeDiagnosticsViewOptions,
        ) -> crate::diagnostics::RuntimeDiagnosticsViewV1 {
            self.shared.diagnostics().view_v1_with_options(
                component,
                &self.$group,
                self.shared.lane_snapshots(),
                options,
            )
        }

        /// The sanitized V2 view of this context's subtree, the owner's
        /// blocking lanes and `inputs` (see
        /// [`RuntimeDiagnosticsViewV2`](crate::RuntimeDiagnosticsViewV2)).
        pub fn diagnostics_view_v2(
            &self,
            component: crate::diagnostics::RuntimeComponent,
            inputs: crate::diagnostics::RuntimeDiagnosticsInputs,
        ) -> crate::diagnostics::RuntimeDiagnosticsViewV2 {
            self.diagnostics_view_v2_with_options(component, inputs, Default::default())
        }

        /// [`diagnostics_view_v2`](Self::diagnostics_view_v2) with explicit
        /// bounds and the detail list's budgets.
        pub fn diagnostics_view_v2_with_options(
            &self,
            component: crate::diagnostics::RuntimeComponent,
            inputs: crate::diagnostics::RuntimeDiagnosticsInputs,
            options: crate::diagnostics::RuntimeDiagnosticsViewOptionsV2,
        ) -> crate::diagnostics::RuntimeDiagnosticsViewV2 {
            self.shared.diagnostics().view_v2_with_options(
                component,
                &self.$group,
                self.shared.lane_snapshots(),
                inputs,
                options,
            )
        }
    };
}
pub(crate) use delegate_diagnostics;

/// Private seal: only this crate can build a root.
#[derive(Debug)]
struct Seal;

/// The single root of an owner's context tree.
///
/// Not `Clone` and without a public constructor: a
/// [`RuntimeOwner`](crate::RuntimeOwner) holds the only one. Derive component
/// capabilities with [`component`](Self::component).
#[derive(Debug)]
pub struct RootServiceContext {
    group: TaskGroup,
    shared: Arc<ContextShared>,
    _seal: Seal,
}

impl RootServiceContext {
    pub(crate) fn shared(&self) -> &Arc<ContextShared> {
        &self.shared
    }

    pub(crate) fn new(group: TaskGroup, shared: Arc<ContextShared>) -> Self {
        Self {
            group,
            shared,
            _seal: Seal,
        }
    }

    pub(crate) fn group(&self) -> &TaskGroup {
        &self.group
    }

    /// The root's name (the owner's thread name).
    pub fn name(&self) -> &str {
        self.group.name()
    }

    /// The owner's `process` budget, shared by every context: derive
    /// narrower limits with [`ResourceBudget::child`](crate::ResourceBudget::child).
    pub fn process_budget(&self) -> crate::resource_budget::ResourceBudget {
        self.shared.resources().process_budget()
    }

    /// The owner's resources: the process budget, the memory limit and
    /// the managed budget derived from it.
    pub fn resources(&self) -> &RuntimeResources {
        self.shared.resources()
    }

    /// The id shared by every context of this owner.
    pub fn runtime_id(&self) -> &str {
        self.shared.runtime_id()
    }

    delegate_diagnostics!(group);

    /// Creates a component context with its own child task group.
    ///
    /// If the root no longer admits children (shutdown began), this returns a
    /// closed context whose spawns fail with kind `Closed`; the answer is
    /// counted in [`TaskGroup::event_counts`] and the first one is logged.
    pub fn component(&self, scope: impl Into<ScopeId>) -> ChildServiceContext {
        ChildServiceContext::from_parent(&self.group, &self.shared, scope.into())
    }

    /// Like [`component`](Self::component), but returns an error instead of
    /// a closed context.
    ///
    /// # Errors
    ///
    /// Kind `Closed` or `Poisoned` (operation `CreateTaskGroupChild`).
    #[track_caller]
    pub fn try_component(&self, scope: impl Into<ScopeId>) -> RuntimeResult<ChildServiceContext> {
        ChildServiceContext::try_from_parent(&self.group, &self.shared, scope.into())
    }

    /// Creates a component that stops after `after` (components of this
    /// root); see [`ChildServiceContext::component_after`].
    ///
    /// # Errors
    ///
    /// [`RuntimeContractPolicy::StopOrderAmongSiblings`] when a context in
    /// `after` is not a component of this root.
    #[track_caller]
    pub fn component_after(
        &self,
        scope: impl Into<ScopeId>,
        after: &[&ChildServiceContext],
    ) -> Result<ChildServiceContext, RuntimeContractViolation> {
        ChildServiceContext::after_siblings(&self.group, &self.shared, scope.into(), after)
    }
}

/// A component's capabilities: its task group and what the owner shares.
///
/// Clones share the same group. There is no public constructor and no way
/// to turn a child into a root.
#[derive(Clone)]
pub struct ChildServiceContext {
    group: TaskGroup,
    shared: Arc<ContextShared>,
    lanes: ScopedLanes,
}

impl fmt::Debug for ChildServiceContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChildServiceContext")
            .field("group", &self.group)
            .field("runtime_id", &self.shared.runtime_id())
            .finish_non_exhaustive()
    }
}

impl ChildServiceContext {
    pub(crate) fn from_parent(
        parent: &TaskGroup,
        shared: &Arc<ContextShared>,
        scope: ScopeId,
    ) -> Self {
        Self {
            group: parent.component(scope.0),
            shared: Arc::clone(shared),
            lanes: ScopedLanes::default(),
        }
    }

    #[track_caller]
    pub(crate) fn try_from_parent(
        parent: &TaskGroup,
        shared: &Arc<ContextShared>,
        scope: ScopeId,
    ) -> RuntimeResult<Self> {
        Ok(Self {
            group: parent.try_child(scope.0)?,
            shared: Arc::clone(shared),
            lanes: ScopedLanes::default(),
        })
    }

    #[track_caller]
    fn after_siblings(
        parent: &TaskGroup,
        shared: &Arc<ContextShared>,
        scope: ScopeId,
        after: &[&ChildServiceContext],
    ) -> Result<Self, RuntimeContractViolation> {
        let after: Vec<&TaskGroup> = after.iter().map(|context| &context.group).collect();
        Ok(Self {
            group: parent.component_after(scope.0, &after)?,
            shared: Arc::clone(shared),
            lanes: ScopedLanes::default(),
        })
    }

    /// The component's name.
    pub fn name(&self) -> &str {
        self.group.name()
    }

    /// The owner's `process` budget, shared by every context: derive
    /// narrower limits with [`ResourceBudget::child`](crate::ResourceBudget::child).
    pub fn process_budget(&self) -> crate::resource_budget::ResourceBudget {
        self.shared.resources().process_budget()
    }

    /// The id shared by every context of this owner.
    pub fn runtime_id(&self) -> &str {
        self.shared.runtime_id()
    }

    /// The component's task group.
    pub fn task_group(&self) -> &TaskGroup {
        &self.group
    }

    /// A narrow spawner on this component's group.
    pub fn task_spawner(&self) -> TaskSpawner {
        TaskSpawner::new(self.group.clone())
    }

    /// Creates a child component (closed if this one no longer admits
    /// children; see [`RootServiceContext::component`]).
    pub fn component(&self, scope: impl Into<ScopeId>) -> Self {
        Self::from_parent(&self.group, &self.shared, scope.into())
    }

    /// Creates a child component or reports why it cannot.
    ///
    /// # Errors
    ///
    /// Kind `Closed` or `Poisoned` (operation `CreateTaskGroupChild`).
    #[track_caller]
    pub fn try_component(&self, scope: impl Into<ScopeId>) -> RuntimeResult<Self> {
        Self::try_from_parent(&self.group, &self.shared, scope.into())
    }

    /// Creates a child component that stops after `after`, other
    /// components of this context: the drain order of a shutdown.
    ///
    /// A shutdown of this context or of any ancestor first seals, cancels
    /// and drains `after` (and the rest of the tree) while the new
    /// component stays open: its tasks keep running, its blocking lanes
    /// keep admitting work and spawns into it are accepted, so it can take
    /// and finish what `after` hands it while draining. Once every
    /// component of `after` has settled, or the shutdown's deadline has
    /// passed, the new component is shut down like any other, within the
    /// same deadline (there is no per-phase timeout). From then until its
    /// tasks have settled its lanes still admit their work, bounded by the
    /// deadline. At the deadline whatever still runs is aborted and
    /// reported as timed out.
    ///
    /// The component runs one task of its own, `stop-order` (kind
    /// [`TaskKind::Shutdown`](crate::TaskKind::Shutdown)), which carries a
    /// plain [`cancel`](TaskGroup::cancel) of this context over at once
    /// (its token is not a child of this context's) and takes its turn
    /// even if the shutdown future is dropped; it is counted in the
    /// component's report. `shutdown_now` does not order.
    ///
    /// If this context no longer admits children, this returns a closed
    /// context, as [`component`](Self::component) does.
    ///
    /// ```
    /// # use rocketmq_runtime::{RuntimeConfig, RuntimeOwner};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let owner = RuntimeOwner::plan(RuntimeConfig::for_parallelism("doc", 2))?.build()?;
    /// let broker = owner.root_context().component("broker");
    /// let requests = broker.component("requests");
    /// let writer = broker.component_after("writer", &[&requests])?;
    /// assert_eq!(writer.task_group().parent_id(), Some(broker.task_group().id()));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`RuntimeContractPolicy::StopOrderAmongSiblings`] when a context in
    /// `after` is not a component of this context (a closed context is
    /// accepted: it has settled).
    #[track_caller]
    pub fn component_after(
        &self,
        scope: impl Into<ScopeId>,
        after: &[&ChildServiceContext],
    ) -> Result<Self, RuntimeContractViolation> {
        Self::after_siblings(&self.group, &self.shared, scope.into(), after)
    }

    /// The owner's resources: the process budget, the memory limit and
    /// the managed budget derived from it.
    pub fn resources(&self) -> &RuntimeResources {
        self.shared.resources()
    }

    /// The managed lane `lane`, scoped to this context: all lanes of an
    /// owner share one global admission budget
    /// (`RuntimeConfig::max_blocking_threads`); work is refused once this
    /// context's group closes or is cancelled. The executor is created on
    /// first use and kept by this context.
    pub fn blocking(
        &self,
        lane: crate::shutdown_report::BlockingLane,
    ) -> &crate::blocking::BlockingExecutor {
        self.lanes.get(self.shared.blocking(), lane, &self.group)
    }

    /// The managed `StorageIo` lane: short storage and filesystem
    /// operations (see [`blocking`](Self::blocking)).
    pub fn storage_io(&self) -> &crate::blocking::BlockingExecutor {
        self.blocking(crate::shutdown_report::BlockingLane::StorageIo)
    }

    /// The managed `MetadataIo` lane: metadata persistence (see
    /// [`blocking`](Self::blocking)).
    pub fn metadata_io(&self) -> &crate::blocking::BlockingExecutor {
        self.blocking(crate::shutdown_report::BlockingLane::MetadataIo)
    }

    /// The managed `CpuCrypto` lane: bounded CPU or cryptographic work (see
    /// [`blocking`](Self::blocking)).
    pub fn cpu_crypto(&self) -> &crate::blocking::BlockingExecutor {
        self.blocking(crate::shutdown_report::BlockingLane::CpuCrypto)
    }

    /// A scheduler over a new child component named `scope`: its drivers
    /// and runs are tasks of that child (see [`ScheduledTaskGroup`](crate::ScheduledTaskGroup)). Like
    /// [`component`](Self::component), a scope that no longer admits
    /// children yields a closed scheduler whose registrations fail.
    #[track_caller]
    pub fn scheduled_tasks(
        &self,
        scope: impl Into<ScopeId>,
    ) -> crate::scheduled::ScheduledTaskGroup {
        crate::scheduled::ScheduledTaskGroup::new(self.component(scope).task_group().clone())
    }

    delegate_diagnostics!(group);

    crate::task_spawner::delegate_spawns!(group);
}
