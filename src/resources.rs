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
//! 3. The metadata target registry (one per owner, shared by its actors)
//!    lives in `crate::metadata_io::targets`, which holds its invariants;
//!    this file only owns it and the owner-scoped generation counter of
//!    `submit_next` (unique across actors, wraps to 1).

use std::fmt;
use std::num::NonZeroUsize;

use crate::error::RuntimeContractViolation;
use crate::loom::{Arc, AtomicU64, Ordering};
use crate::metadata_io::targets::{MetadataTargetRegistry, MetadataTargetRegistryStats};
use crate::metadata_io::types::MetadataGeneration;
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
    metadata_targets: MetadataTargetRegistry,
    /// Owner-scoped generation counter for `submit_next`.
    metadata_generation: AtomicU64,
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
                metadata_targets: MetadataTargetRegistry::new(metadata_target_capacity),
                metadata_generation: AtomicU64::new(0),
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

    /// The next generation of the owner-wide counter (never 0; wraps to 1).
    pub(crate) fn next_metadata_generation(&self) -> MetadataGeneration {
        let next = self
            .inner
            .metadata_generation
            .fetch_add(1, Ordering::Relaxed);
        MetadataGeneration::new(next.wrapping_add(1).max(1))
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
    pub(crate) fn metadata_targets(&self) -> &MetadataTargetRegistry {
        &self.inner.metadata_targets
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::metadata_io::targets::DEFAULT_CAPACITY;

    /// Invariant 99: `submit_next` generations come from one owner-scoped
    /// counter: increasing, never 0, wrapping to 1.
    #[test]
    fn generations_are_owner_scoped_increasing_and_wrap_to_one() {
        let limit = ProcessMemoryLimit::configured(1 << 30).expect("positive");
        let resources = RuntimeResources::new(
            limit,
            None,
            ManagedMemoryPolicy::default(),
            DEFAULT_CAPACITY,
        )
        .expect("resolves");
        let shared = resources.clone();
        let first = resources.next_metadata_generation();
        let second = shared.next_metadata_generation();
        assert_eq!(
            (first.get(), second.get()),
            (1, 2),
            "one counter for clones"
        );
        resources
            .inner
            .metadata_generation
            .store(u64::MAX - 1, Ordering::Relaxed);
        assert_eq!(resources.next_metadata_generation().get(), u64::MAX);
        assert_eq!(resources.next_metadata_generation().get(), 1, "wraps to 1");
        assert_eq!(
            resources.next_metadata_generation().get(),
            1,
            "0 is skipped"
        );
    }
}
