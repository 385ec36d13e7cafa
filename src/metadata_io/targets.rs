//! The owner's metadata target registry: the one owner of every target's
//! state (which resource it belongs to, its live writer, its durable
//! generation and its fence), shared by all metadata actors of one owner.
//!
//! Invariants:
//!
//! 1. One entry per normalized absolute target path (`.` removed, `..`
//!    folded lexically, no filesystem access; lower-cased on Windows). An
//!    entry is a *history*: an object whose pointer is its identity
//!    ([`MetadataTargetIdentity`]).
//! 2. A history belongs to one resource and has at most one live writer: a
//!    [`TargetRegistration`], held by an actor's resource while it has work
//!    queued or in flight and by each running write closure (a clone). The
//!    writer is released when the last clone drops, so a cancelled or
//!    dropped actor keeps the target until its real closure exits, and an
//!    idle open actor holds nothing (another actor of the owner may write
//!    the target once a write is durable). A claim by another resource, or
//!    while a registration is live, is refused; a claim of a new path beyond
//!    the capacity is refused naming the capacity.
//! 3. A history's durable generation only rises, and its fence (set after
//!    an unknown commit outcome) never lifts. Both outlive the actor that
//!    wrote them: a replacement actor of the same resource resolves older
//!    generations from the history without rewriting. Actors read these
//!    values from the history; none keeps its own copy.
//! 4. Retirement ends a history: only an idle (no live writer), unfenced
//!    history whose durable generation is the one its retiring actor saw
//!    is retired. It leaves the registry (its slot is free) and is marked
//!    retired: a later claim of the path creates a new identity, and
//!    nothing is ever recorded in a retired history again. Receipts handed
//!    out before keep the outcome they were given.
//! 5. Lock order: an actor's state lock, then the registry lock, then a
//!    history's lock. The history lock is only held to read or update one
//!    history.
//! 6. `submit_next` generations come from one counter per owner, kept
//!    here with the histories: increasing, never 0, wrapping to 1, shared
//!    by every actor of the owner.

use std::collections::HashMap;
use std::fmt;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

use crate::loom::{AtomicU64, Mutex, Ordering, StaticAtomicU64};
use crate::metadata_io::types::MetadataGeneration;

/// Registration ids: one per claim, never reused.
static NEXT_REGISTRATION: StaticAtomicU64 = StaticAtomicU64::new(1);

/// Target histories one owner keeps by default
/// ([`RuntimeOwnerPlan::with_metadata_target_capacity`](crate::RuntimeOwnerPlan::with_metadata_target_capacity)).
pub(crate) const DEFAULT_CAPACITY: NonZeroUsize = match NonZeroUsize::new(4_096) {
    Some(capacity) => capacity,
    None => NonZeroUsize::MIN,
};

/// The identity of one target history: equal only to a clone of itself.
///
/// A later history of the same path (after retirement) is a different
/// identity. It grants no write access.
#[derive(Clone)]
pub struct MetadataTargetIdentity(pub(crate) Arc<TargetHistory>);

impl PartialEq for MetadataTargetIdentity {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for MetadataTargetIdentity {}

impl fmt::Debug for MetadataTargetIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MetadataTargetIdentity")
            .field("resource", &self.0.resource)
            .field("retired", &self.0.state.lock().retired)
            .finish_non_exhaustive()
    }
}

/// How full an owner's target registry is (no paths).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MetadataTargetRegistryStats {
    /// Histories the registry keeps at most.
    pub capacity: usize,
    /// Histories it keeps now.
    pub retained_targets: usize,
    /// Of those, with a live writer.
    pub live_owners: usize,
    /// Of those, without one (kept for their durable generation).
    pub idle_histories: usize,
    /// Of those, fenced after an unknown commit outcome.
    pub fenced_targets: usize,
    /// New paths the registry can still take.
    pub remaining_capacity: usize,
}

/// The answer to
/// [`MetadataIoActor::retire_target_for_new_identity`](crate::MetadataIoActor::retire_target_for_new_identity).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[must_use = "the outcome says whether the target was retired"]
pub enum MetadataTargetRetirementOutcome {
    /// The history ended: its slot is free and the path's next claim gets a
    /// new identity.
    Retired,
    /// The actor has no target for this resource.
    NotFound,
    /// The actor still admits submissions: stop admission first.
    AdmissionOpen,
    /// A write, a queued generation, a waiter or a live writer remains.
    WorkInProgress,
    /// The target is fenced after an unknown commit outcome: reconcile it
    /// out of band; it is never retired.
    ReconciliationRequired,
    /// The history is not the one the actor wrote: another actor wrote
    /// after it, or it was already retired.
    HistoryChanged,
}

/// One target's history (see the module docs).
pub(crate) struct TargetHistory {
    key: PathBuf,
    resource: Arc<str>,
    state: Mutex<HistoryState>,
}

#[derive(Debug, Default)]
struct HistoryState {
    writer: Option<u64>,
    durable: Option<MetadataGeneration>,
    fenced: bool,
    retired: bool,
}

impl TargetHistory {
    /// The normalized path.
    pub(crate) fn key(&self) -> &Path {
        &self.key
    }

    pub(crate) fn durable(&self) -> Option<MetadataGeneration> {
        self.state.lock().durable
    }

    pub(crate) fn fenced(&self) -> bool {
        self.state.lock().fenced
    }

    /// Raises the durable generation (never lowers it); nothing is recorded
    /// in a retired history.
    pub(crate) fn record_durable(&self, generation: MetadataGeneration) {
        let mut state = self.state.lock();
        if !state.retired {
            state.durable = Some(state.durable.map_or(generation, |old| old.max(generation)));
        }
    }

    pub(crate) fn fence(&self) {
        self.state.lock().fenced = true;
    }
}

/// A target's live writer (invariant 2): clones share one registration,
/// released when the last one drops.
#[derive(Clone)]
pub(crate) struct TargetRegistration(Arc<Registration>);

struct Registration {
    history: Arc<TargetHistory>,
    id: u64,
}

impl TargetRegistration {
    /// The history this registration writes.
    pub(crate) fn history(&self) -> &Arc<TargetHistory> {
        &self.0.history
    }
}

impl fmt::Debug for TargetRegistration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TargetRegistration")
            .field("id", &self.0.id)
            .finish_non_exhaustive()
    }
}

impl Drop for Registration {
    /// Ends the live ownership (the history stays).
    fn drop(&mut self) {
        let mut state = self.history.state.lock();
        if state.writer == Some(self.id) {
            state.writer = None;
        }
    }
}

/// Why [`MetadataTargetRegistry::claim`] refused a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TargetClaimRefusal {
    /// Another resource owns the target, or a registration is live.
    Conflict,
    /// The registry holds its capacity of histories.
    Full { capacity: usize },
}

/// The histories of one owner (see the module docs), and its generation
/// counter for `submit_next` (invariant 6).
pub(crate) struct MetadataTargetRegistry {
    capacity: usize,
    targets: Mutex<HashMap<PathBuf, Arc<TargetHistory>>>,
    generation: AtomicU64,
}

impl fmt::Debug for MetadataTargetRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MetadataTargetRegistry")
            .field("stats", &self.stats())
            .finish()
    }
}

impl MetadataTargetRegistry {
    pub(crate) fn new(capacity: NonZeroUsize) -> Self {
        Self {
            capacity: capacity.get(),
            targets: Mutex::new(HashMap::new()),
            generation: AtomicU64::new(0),
        }
    }

    /// The next generation of the owner-wide counter (never 0; wraps to
    /// 1): unique across the owner's actors (invariant 6).
    pub(crate) fn next_generation(&self) -> MetadataGeneration {
        let next = self.generation.fetch_add(1, Ordering::Relaxed);
        MetadataGeneration::new(next.wrapping_add(1).max(1))
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Registers a writer of `target` for `resource`: on its history, new
    /// if the path has none (invariant 2).
    pub(crate) fn claim(
        &self,
        target: &Path,
        resource: &Arc<str>,
    ) -> Result<TargetRegistration, TargetClaimRefusal> {
        let key = normalize(target);
        let id = NEXT_REGISTRATION.fetch_add(1, Ordering::Relaxed);
        let registration = |history: &Arc<TargetHistory>| {
            TargetRegistration(Arc::new(Registration {
                history: Arc::clone(history),
                id,
            }))
        };
        let mut targets = self.targets.lock();
        if let Some(history) = targets.get(&key) {
            let mut state = history.state.lock();
            if history.resource != *resource || state.writer.is_some() {
                return Err(TargetClaimRefusal::Conflict);
            }
            state.writer = Some(id);
            drop(state);
            return Ok(registration(history));
        }
        if targets.len() >= self.capacity {
            return Err(TargetClaimRefusal::Full {
                capacity: self.capacity,
            });
        }
        let history = Arc::new(TargetHistory {
            key: key.clone(),
            resource: Arc::clone(resource),
            state: Mutex::new(HistoryState {
                writer: Some(id),
                ..HistoryState::default()
            }),
        });
        targets.insert(key, Arc::clone(&history));
        Ok(registration(&history))
    }

    /// Retires `history` if it is idle, unfenced and still at `seen`, the
    /// durable generation its retiring actor saw (invariant 4).
    pub(crate) fn retire(
        &self,
        history: &Arc<TargetHistory>,
        seen: Option<MetadataGeneration>,
    ) -> MetadataTargetRetirementOutcome {
        let mut targets = self.targets.lock();
        let current = targets
            .get(&history.key)
            .is_some_and(|current| Arc::ptr_eq(current, history));
        if !current {
            return MetadataTargetRetirementOutcome::HistoryChanged;
        }
        let mut state = history.state.lock();
        if state.writer.is_some() {
            return MetadataTargetRetirementOutcome::WorkInProgress;
        }
        if state.fenced {
            return MetadataTargetRetirementOutcome::ReconciliationRequired;
        }
        if state.durable != seen {
            return MetadataTargetRetirementOutcome::HistoryChanged;
        }
        state.retired = true;
        drop(state);
        targets.remove(&history.key);
        MetadataTargetRetirementOutcome::Retired
    }

    /// The newest durable generation of `resource` over the histories the
    /// registry keeps (a resource that moved targets has one per path).
    pub(crate) fn durable_of(&self, resource: &str) -> Option<MetadataGeneration> {
        self.targets
            .lock()
            .values()
            .filter(|history| &*history.resource == resource)
            .filter_map(|history| history.durable())
            .max()
    }

    pub(crate) fn stats(&self) -> MetadataTargetRegistryStats {
        let targets = self.targets.lock();
        let (mut live_owners, mut fenced_targets) = (0, 0);
        for history in targets.values() {
            let state = history.state.lock();
            live_owners += usize::from(state.writer.is_some());
            fenced_targets += usize::from(state.fenced);
        }
        MetadataTargetRegistryStats {
            capacity: self.capacity,
            retained_targets: targets.len(),
            live_owners,
            idle_histories: targets.len() - live_owners,
            fenced_targets,
            remaining_capacity: self.capacity.saturating_sub(targets.len()),
        }
    }
}

/// The identity of a metadata target path: the absolute path with `.`
/// removed and `..` folded lexically (no filesystem access, no symlink
/// resolution), lower-cased on Windows (case-insensitive file names).
/// `./x`, `x` and `d/../x` name one target.
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn registry(capacity: usize) -> MetadataTargetRegistry {
        MetadataTargetRegistry::new(NonZeroUsize::new(capacity).expect("positive"))
    }

    /// Invariant 6: `submit_next` generations come
    /// from one owner-scoped counter: increasing, never 0, wrapping to 1.
    #[test]
    fn generations_are_owner_scoped_increasing_and_wrap_to_one() {
        let registry = registry(4);
        let (first, second) = (registry.next_generation(), registry.next_generation());
        assert_eq!((first.get(), second.get()), (1, 2));
        registry.generation.store(u64::MAX - 1, Ordering::Relaxed);
        assert_eq!(registry.next_generation().get(), u64::MAX);
        assert_eq!(registry.next_generation().get(), 1, "wraps to 1");
        assert_eq!(registry.next_generation().get(), 1, "0 is skipped");
    }

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

    #[test]
    fn one_resource_and_one_live_writer_per_target() {
        let registry = registry(4);
        let offsets: Arc<str> = Arc::from("offsets");
        let registration = registry
            .claim(Path::new("/t/a.json"), &offsets)
            .expect("claimed");
        let history = Arc::clone(registration.history());
        assert_eq!(
            registry
                .claim(Path::new("/t/a.json"), &Arc::from("other"))
                .err()
                .map(|_| "refused"),
            Some("refused")
        );
        let writing = registration.clone();
        drop(registration);
        assert!(
            registry.claim(Path::new("/t/a.json"), &offsets).is_err(),
            "a clone (a running write) keeps the target"
        );
        drop(writing);
        let again = registry
            .claim(Path::new("/t/./a.json"), &offsets)
            .expect("released with the last clone");
        assert!(Arc::ptr_eq(&history, again.history()), "the same history");
    }

    #[test]
    fn a_full_registry_names_its_capacity_and_retirement_frees_a_slot() {
        let registry = registry(1);
        let offsets: Arc<str> = Arc::from("offsets");
        let registration = registry
            .claim(Path::new("/t/a.json"), &offsets)
            .expect("claimed");
        let history = Arc::clone(registration.history());
        assert!(matches!(
            registry.claim(Path::new("/t/b.json"), &offsets).err(),
            Some(TargetClaimRefusal::Full { capacity: 1 })
        ));
        history.record_durable(MetadataGeneration::new(3));
        assert_eq!(
            registry.retire(&history, Some(MetadataGeneration::new(3))),
            MetadataTargetRetirementOutcome::WorkInProgress,
            "a live writer"
        );
        drop(registration);
        assert_eq!(
            registry.retire(&history, Some(MetadataGeneration::new(2))),
            MetadataTargetRetirementOutcome::HistoryChanged,
            "not the durable generation the actor saw"
        );
        assert_eq!(
            registry.retire(&history, Some(MetadataGeneration::new(3))),
            MetadataTargetRetirementOutcome::Retired
        );
        assert_eq!(registry.stats().retained_targets, 0);
        assert_eq!(
            registry.retire(&history, Some(MetadataGeneration::new(3))),
            MetadataTargetRetirementOutcome::HistoryChanged,
            "retired once"
        );
        history.record_durable(MetadataGeneration::new(9));
        assert_eq!(
            history.durable(),
            Some(MetadataGeneration::new(3)),
            "never revived"
        );
        let next = registry
            .claim(Path::new("/t/a.json"), &offsets)
            .expect("a new identity");
        assert!(!Arc::ptr_eq(&history, next.history()));
        assert_eq!(next.history().durable(), None);
    }

    #[test]
    fn a_fenced_history_is_never_retired() {
        let registry = registry(2);
        let registration = registry
            .claim(Path::new("/t/a.json"), &Arc::from("offsets"))
            .expect("claimed");
        let history = Arc::clone(registration.history());
        history.fence();
        drop(registration);
        assert_eq!(
            registry.retire(&history, None),
            MetadataTargetRetirementOutcome::ReconciliationRequired
        );
        let stats = registry.stats();
        assert_eq!((stats.fenced_targets, stats.idle_histories), (1, 1));
        assert_eq!(stats.remaining_capacity, 1);
    }
}
