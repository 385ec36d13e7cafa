//! `RuntimeResources`: the owner's memory limit, managed budget, the process
//! budget tree every context shares, and the metadata target registry.
//!
//! Invariants:
//!
//! 1. One `process` root per owner (`count = usize::MAX`, `bytes = managed
//!    bytes`, `Reject`), shared by every context of the owner.
//! 2. The detected (or configured) memory limit and the managed budget are
//!    kept apart: the limit is for reporting, the managed bytes are what the
//!    budget charges.
//! 3. The metadata target registry (one per owner, shared by its actors,
//!    with the owner-scoped generation counter of `submit_next`) is
//!    defined and argued in `crate::metadata_io::targets`; the owner's
//!    resources hold it so every context hands the same one to its actors.

use std::fmt;
use std::num::NonZeroUsize;

use crate::error::RuntimeContractViolation;
use crate::loom::Arc;
use crate::metadata_io::targets::{MetadataTargetRegistry, MetadataTargetRegistryStats};
use crate::resource_budget::memory::{
    ManagedMemoryBudget, ManagedMemoryPolicy, ProcessMemoryLimit,
};
use crate::resource_budget::{BudgetLimit, FullPolicy, ResourceBudget, ResourceBudgetTree};

/// The resources of one owner: the detected (or configured) memory limit,
/// the managed budget derived from it, and the `process` budget root that
/// every context's [`process_budget`](crate::ChildServiceContext::process_budget)
/// returns. Clones share everything.
///
/// The budget accounts for what is admitted through the budget APIs; it
/// does not limit every allocation of the process.
#[derive(Clone)]
pub struct RuntimeResources {
    inner: Arc<ResourcesInner>,
}

struct ResourcesInner {
    memory_limit: ProcessMemoryLimit,
    memory_budget: ManagedMemoryBudget,
    process: ResourceBudgetTree,
    /// Owner-scoped metadata target registry: one writer per target path.
    metadata_targets: Arc<MetadataTargetRegistry>,
}

impl fmt::Debug for RuntimeResources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuntimeResources")
            .field("memory_limit", &self.inner.memory_limit)
            .field("managed_bytes", &self.inner.memory_budget.managed_bytes())
            .finish_non_exhaustive()
    }
}

impl RuntimeResources {
    /// Resolves the managed budget and builds the `process` root with
    /// `(count = usize::MAX, bytes = managed bytes, Reject)`.
    pub(crate) fn new(
        detected: ProcessMemoryLimit,
        configured: Option<ProcessMemoryLimit>,
        policy: ManagedMemoryPolicy,
        metadata_target_capacity: NonZeroUsize,
    ) -> Result<Self, RuntimeContractViolation> {
        let memory_budget = ManagedMemoryBudget::resolve(detected, configured, policy)?;
        let bytes = usize::try_from(memory_budget.managed_bytes()).unwrap_or(usize::MAX);
        let process = ResourceBudgetTree::new(
            "process",
            BudgetLimit::new(usize::MAX, bytes, FullPolicy::Reject),
        )?;
        Ok(Self {
            inner: Arc::new(ResourcesInner {
                memory_limit: configured.unwrap_or(detected),
                memory_budget,
                process,
                metadata_targets: Arc::new(MetadataTargetRegistry::new(metadata_target_capacity)),
            }),
        })
    }

    /// The memory limit used for reporting: the configured one if any,
    /// otherwise the detected one (with its source).
    pub fn memory_limit(&self) -> ProcessMemoryLimit {
        self.inner.memory_limit
    }

    /// The resolved numbers: detected limit, effective limit, managed bytes.
    pub fn memory_budget(&self) -> ManagedMemoryBudget {
        self.inner.memory_budget
    }

    /// The root `process` budget shared by every context of the owner.
    pub fn process_budget(&self) -> ResourceBudget {
        self.inner.process.root()
    }

    /// How full the owner's metadata target registry is (no paths): its
    /// capacity, the histories it keeps (with a live writer or idle),
    /// fenced targets and the room left. Retiring idle histories
    /// ([`MetadataIoActor::retire_target_for_new_identity`](crate::MetadataIoActor::retire_target_for_new_identity))
    /// frees room.
    pub fn metadata_target_stats(&self) -> MetadataTargetRegistryStats {
        self.inner.metadata_targets.stats()
    }

    /// The owner's metadata target registry.
    pub(crate) fn metadata_targets(&self) -> &Arc<MetadataTargetRegistry> {
        &self.inner.metadata_targets
    }
}
