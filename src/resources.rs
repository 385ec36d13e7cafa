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
//! 3. Metadata targets, per owner: one resource and at most one live actor
//!    per normalized absolute target path (`.` removed and `..` folded
//!    lexically, no filesystem access; lower-cased on Windows). A claim by
//!    another resource or another live actor is refused, as is a new target
//!    once the registry holds `METADATA_TARGET_CAPACITY` targets.
//! 4. A target's durable generation (only ever raised) and its fence outlive
//!    the actor that wrote it, so a replacement actor resolves older
//!    generations without rewriting. Releasing a target ends only the live
//!    ownership; the history stays for the owner's life.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::RuntimeContractViolation;
use crate::loom::{Arc, AtomicU64, Mutex, Ordering};
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
    metadata_targets: Mutex<HashMap<PathBuf, MetadataTarget>>,
    /// Owner-scoped generation counter for `submit_next`.
    metadata_generation: AtomicU64,
}

/// The owner-scoped history of one metadata target path.
#[derive(Debug)]
struct MetadataTarget {
    resource: Arc<str>,
    writer: Option<u64>,
    durable: Option<MetadataGeneration>,
    fenced: bool,
}

/// Targets one owner's registry keeps.
const METADATA_TARGET_CAPACITY: usize = 4_096;

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
                metadata_targets: Mutex::new(HashMap::new()),
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

    /// How many targets the owner's registry keeps.
    pub(crate) fn metadata_target_capacity(&self) -> usize {
        METADATA_TARGET_CAPACITY
    }

    /// Claims `target` for `resource` written by `actor`. Returns the
    /// target's durable history and whether it is fenced; refused when
    /// another resource or another live actor owns it, or when the registry
    /// holds [`METADATA_TARGET_CAPACITY`] targets (their histories are
    /// kept for the owner's life).
    pub(crate) fn claim_metadata_target(
        &self,
        target: &Path,
        resource: &Arc<str>,
        actor: u64,
    ) -> Result<(Option<MetadataGeneration>, bool), TargetClaimRefusal> {
        let key = normalize(target);
        let mut targets = self.inner.metadata_targets.lock();
        if let Some(entry) = targets.get_mut(&key) {
            if entry.resource != *resource || entry.writer.is_some_and(|writer| writer != actor) {
                return Err(TargetClaimRefusal::Conflict);
            }
            entry.writer = Some(actor);
            return Ok((entry.durable, entry.fenced));
        }
        if targets.len() >= METADATA_TARGET_CAPACITY {
            return Err(TargetClaimRefusal::Full);
        }
        targets.insert(
            key,
            MetadataTarget {
                resource: Arc::clone(resource),
                writer: Some(actor),
                durable: None,
                fenced: false,
            },
        );
        Ok((None, false))
    }

    /// Runs `update` on `target`'s registry entry, if it has one.
    fn update_target(&self, target: &Path, update: impl FnOnce(&mut MetadataTarget)) {
        if let Some(entry) = self
            .inner
            .metadata_targets
            .lock()
            .get_mut(&normalize(target))
        {
            update(entry);
        }
    }

    pub(crate) fn record_metadata_durable(&self, target: &Path, generation: MetadataGeneration) {
        self.update_target(target, |entry| {
            entry.durable = Some(entry.durable.map_or(generation, |old| old.max(generation)));
        });
    }

    pub(crate) fn fence_metadata_target(&self, target: &Path) {
        self.update_target(target, |entry| entry.fenced = true);
    }

    /// Ends `actor`'s live ownership of one target (history is kept): its
    /// resource moved to another target.
    pub(crate) fn release_metadata_target(&self, target: &Path, actor: u64) {
        self.update_target(target, |entry| {
            if entry.writer == Some(actor) {
                entry.writer = None;
            }
        });
    }

    /// Ends `actor`'s live ownership of its targets (history is kept).
    pub(crate) fn release_metadata_writer(&self, actor: u64) {
        for entry in self.inner.metadata_targets.lock().values_mut() {
            if entry.writer == Some(actor) {
                entry.writer = None;
            }
        }
    }
}

/// The identity of a metadata target: the absolute path with `.` removed
/// and `..` folded lexically (no filesystem access, no symlink resolution),
/// lower-cased on Windows (case-insensitive file names). `./x`, `x` and
/// `d/../x` name one target.
pub(crate) fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut normalized = PathBuf::new();
    for component in absolute.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                // `..` at the root stays at the root.
                normalized.pop();
            }
            other => normalized.push(other),
        }
    }
    #[cfg(windows)]
    {
        normalized = PathBuf::from(normalized.to_string_lossy().to_lowercase());
    }
    normalized
}

/// Why [`RuntimeResources::claim_metadata_target`] refused a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TargetClaimRefusal {
    /// Another resource, or another live actor, owns the target.
    Conflict,
    /// The owner's target registry is full.
    Full,
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn target_identities_fold_dots_lexically() {
        let cwd = std::env::current_dir().expect("cwd");
        assert_eq!(normalize(Path::new("x.json")), cwd.join("x.json"));
        assert_eq!(normalize(Path::new("./x.json")), cwd.join("x.json"));
        assert_eq!(normalize(Path::new("d/../x.json")), cwd.join("x.json"));
        assert_eq!(
            normalize(Path::new("/a/./b/../c.json")),
            Path::new("/a/c.json")
        );
        assert_eq!(normalize(Path::new("/../../c.json")), Path::new("/c.json"));
        assert_ne!(
            normalize(Path::new("/a/c.json")),
            normalize(Path::new("/b/c.json"))
        );
    }
}
