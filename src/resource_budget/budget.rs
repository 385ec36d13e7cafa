//! [`ResourceBudgetTree`], [`ResourceBudget`] and [`ResourcePermit`]: a tree
//! of limits, a handle on one of its levels (where children are derived and
//! reservations are made), and one reservation held at every level of its
//! budget's chain until dropped, resized, promoted or moved.
//!
//! Invariants (the level mechanics are in `tree.rs`):
//!
//! 1. Limits are validated before a level exists (see `types.rs`): a child
//!    fits its parent in every dimension.
//! 2. An acquisition reserves one count and its bytes root → leaf, then
//!    checks the dynamic gates; a refusal leaves every level as it was.
//! 3. A permit releases every level of its chain exactly once, when dropped
//!    (or hands its reservation to a queue entry, which then owns it).
//! 4. `try_resize` growth reserves only the delta at every level (no count,
//!    no rate token) and re-checks the gates after reserving, so growth racing
//!    a close is charged before it or refused; shrinking always succeeds. A
//!    refused resize leaves the permit unchanged.
//! 5. `try_rebind` checks the whole target chain (the permit's own budget
//!    included), reserves the target-only levels first, re-checks the gates,
//!    and only then releases the source-only levels; the common ancestors'
//!    reservations stay. A rebind racing the target's close is charged before
//!    it or refused, the permit staying where it was (loom-modelled). A target
//!    in another tree is a contract violation.
//! 6. Rate tokens follow admitted work: a permit records the depth down to
//!    which its chain holds its token (all levels when acquired, only the
//!    common ancestors after a rebind, none once promoted), so
//!    `promote_to_control` returns exactly the tokens the permit still holds,
//!    together with the data-class share.

use std::fmt;
use std::time::Duration;

use crate::error::RuntimeContractViolation;
use crate::loom::{Arc, Ordering};
use crate::resource_budget::tree::{validate_name, Gate, Node};
use crate::resource_budget::types::{
    BudgetClass, BudgetLimit, BudgetRejection, BudgetRejectionReason, BudgetSnapshot,
    MonotonicClock, PermitRebindOutcome, SystemMonotonicClock,
};
use crate::resource_budget::DEFAULT_MAX_DYNAMIC_BUDGET_KEYS;

/// A tree of budgets. Create one per shared limit (the owner already has
/// the process budget: derive children from it rather than building
/// independent trees).
#[derive(Debug, Clone)]
pub struct ResourceBudgetTree {
    root: ResourceBudget,
}

impl ResourceBudgetTree {
    /// A tree whose root is named `name` with `limit`.
    ///
    /// # Errors
    ///
    /// `EmptyBudgetName`, `InvalidBudgetName` (a `/`), or the limit's
    /// validation error.
    pub fn new(
        name: impl Into<String>,
        limit: BudgetLimit,
    ) -> Result<Self, RuntimeContractViolation> {
        Self::with_clock(name, limit, Arc::new(SystemMonotonicClock::new()))
    }

    /// [`new`](Self::new) with an injected clock (rate refill, queue ages).
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new).
    pub fn with_clock(
        name: impl Into<String>,
        limit: BudgetLimit,
        clock: Arc<dyn MonotonicClock>,
    ) -> Result<Self, RuntimeContractViolation> {
        Self::with_clock_and_key_capacity(name, limit, clock, DEFAULT_MAX_DYNAMIC_BUDGET_KEYS)
    }

    /// [`with_clock`](Self::with_clock) with a bound on dynamic keys.
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new).
    pub fn with_clock_and_key_capacity(
        name: impl Into<String>,
        limit: BudgetLimit,
        clock: Arc<dyn MonotonicClock>,
        max_entries: usize,
    ) -> Result<Self, RuntimeContractViolation> {
        let node = Node::new_root(&name.into(), limit, clock, max_entries)?;
        Ok(Self {
            root: ResourceBudget { node },
        })
    }

    /// The root budget.
    pub fn root(&self) -> ResourceBudget {
        self.root.clone()
    }
}

/// One level of a budget tree; clones share it.
#[derive(Clone)]
pub struct ResourceBudget {
    pub(crate) node: Arc<Node>,
}

impl fmt::Debug for ResourceBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResourceBudget")
            .field("path", &self.node.path)
            .field("count", &self.node.current_count())
            .field("bytes", &self.node.current_bytes())
            .finish()
    }
}

impl ResourceBudget {
    /// A child level `parent/name` with `limit`, which must fit inside this
    /// level. A child of a closed dynamic budget is created but stays closed.
    ///
    /// # Errors
    ///
    /// A name or limit violation, or `ChildBudgetExceedsParent` /
    /// `ChildBudgetMaxAgeExceedsParent`.
    pub fn child(
        &self,
        name: impl Into<String>,
        limit: BudgetLimit,
    ) -> Result<ResourceBudget, RuntimeContractViolation> {
        self.make_child(name.into(), limit, None)
    }

    pub(crate) fn make_child(
        &self,
        name: String,
        limit: BudgetLimit,
        gate: Option<Gate>,
    ) -> Result<ResourceBudget, RuntimeContractViolation> {
        let name = validate_name(&name)?;
        limit.validate_within(&self.node.limit)?;
        let path: Arc<str> = Arc::from(format!("{}/{}", self.node.path, name));
        let node = Node::new(
            name,
            path,
            limit,
            Some(Arc::clone(&self.node)),
            Arc::clone(&self.node.tree),
            gate,
        );
        Ok(ResourceBudget {
            node: Arc::new(node),
        })
    }

    /// True when this level or an ancestor is a closed dynamic key.
    pub fn is_closed(&self) -> bool {
        self.node.closed_level().is_some()
    }

    /// Reserves one count and `bytes` (and a rate token where configured)
    /// at every level from the root to this one.
    ///
    /// # Errors
    ///
    /// A [`BudgetRejection`] naming the level that refused; nothing stays
    /// reserved.
    #[inline]
    pub fn try_acquire(
        &self,
        bytes: usize,
        class: BudgetClass,
    ) -> Result<ResourcePermit, BudgetRejection> {
        self.node
            .reserve(bytes, class, true)
            .map(|()| ResourcePermit::from_reserved(Arc::clone(&self.node), bytes, class))
    }

    /// [`try_acquire`](Self::try_acquire) as data work.
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Self::try_acquire).
    #[inline]
    pub fn try_acquire_data(&self, bytes: usize) -> Result<ResourcePermit, BudgetRejection> {
        self.try_acquire(bytes, BudgetClass::Data)
    }

    /// [`try_acquire`](Self::try_acquire) as control work (may use the
    /// control reserve).
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Self::try_acquire).
    pub fn try_acquire_control(&self, bytes: usize) -> Result<ResourcePermit, BudgetRejection> {
        self.try_acquire(bytes, BudgetClass::Control)
    }

    /// This level's counters.
    pub fn snapshot(&self) -> BudgetSnapshot {
        self.node.snapshot()
    }

    /// `root/child/...`.
    pub fn path(&self) -> &str {
        &self.node.path
    }

    /// This level's limit.
    pub fn limit(&self) -> BudgetLimit {
        self.node.limit
    }

    /// The tree clock's current reading.
    pub fn monotonic_now(&self) -> Duration {
        self.node.tree.clock.now()
    }

    /// Counts `n` items a custom retention dropped.
    pub fn record_dropped(&self, n: u64) {
        self.node.stats.dropped.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts `n` items a custom retention replaced.
    pub fn record_coalesced(&self, n: u64) {
        self.node.stats.coalesced.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts a slow consumer a custom retention closed.
    pub fn record_slow_consumer_closed(&self) {
        self.node
            .stats
            .closed_slow_consumer
            .fetch_add(1, Ordering::Relaxed);
    }
}

/// A held reservation: one count and its bytes at every level of its
/// budget's chain, released when dropped.
#[must_use = "dropping a permit releases its reservation at once"]
pub struct ResourcePermit {
    node: Arc<Node>,
    bytes: usize,
    class: BudgetClass,
    /// The chain levels above this depth (root = 0) hold one rate token
    /// for this permit (where they are rated): all of them after an
    /// acquisition, only the common ancestors after a rebind (target-only
    /// levels are reserved without a token), none once promoted.
    token_levels: usize,
    /// False once [`into_reserved`](Self::into_reserved) handed the
    /// reservation to its caller: dropping then releases nothing.
    held: bool,
}

impl fmt::Debug for ResourcePermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResourcePermit")
            .field("path", &self.node.path)
            .field("bytes", &self.bytes)
            .field("class", &self.class)
            .finish()
    }
}

impl ResourcePermit {
    /// Gives up the permit without releasing: the caller now owns its
    /// reservation (one count and the returned bytes of the returned class
    /// on this permit's chain) and must give it back with
    /// [`Node::release`] on that chain.
    pub(crate) fn into_reserved(mut self) -> (usize, BudgetClass) {
        self.held = false;
        (self.bytes, self.class)
    }

    /// Whether this permit belongs to `node`'s tree.
    pub(crate) fn is_in_tree_of(&self, node: &Node) -> bool {
        self.node.tree.id == node.tree.id
    }

    /// Takes ownership of one reservation made with [`Node::reserve`].
    #[inline]
    pub(crate) fn from_reserved(node: Arc<Node>, bytes: usize, class: BudgetClass) -> Self {
        let token_levels = node.depth + 1;
        Self {
            node,
            bytes,
            class,
            token_levels,
            held: true,
        }
    }

    /// The bytes this permit holds.
    pub const fn bytes(&self) -> usize {
        self.bytes
    }

    /// The permit's class.
    pub const fn class(&self) -> BudgetClass {
        self.class
    }

    /// The budget the permit is charged to.
    pub fn budget(&self) -> ResourceBudget {
        ResourceBudget {
            node: Arc::clone(&self.node),
        }
    }

    /// Changes the bytes this permit holds. Growth reserves only the delta
    /// at every level (no count, no rate token) and is refused by a closed
    /// budget; shrinking always succeeds.
    ///
    /// # Errors
    ///
    /// A [`BudgetRejection`]; the permit is unchanged.
    pub fn try_resize(&mut self, bytes: usize) -> Result<(), BudgetRejection> {
        let node = &*self.node;
        if bytes <= self.bytes {
            let shrink = self.bytes - bytes;
            node.release_chain(0, shrink, self.class, None);
            self.bytes = bytes;
            node.tree.notify_released();
            return Ok(());
        }
        if let Some(closed) = node.closed_level() {
            return Err(node.rejection(closed, BudgetRejectionReason::Closed));
        }
        let delta = bytes - self.bytes;
        if let Err((at, dimension)) = node.reserve_chain(0, delta, self.class, false, None) {
            node.tree.notify_released();
            return Err(node.refused(at, dimension));
        }
        // Again after reserving, as an acquisition does: growth racing a
        // close is either before it (and charged) or refused.
        crate::loom::seq_cst_handshake();
        if let Some(closed) = node.closed_level() {
            let rejection = node.rejection(closed, BudgetRejectionReason::Closed);
            node.roll_back_chain(0, delta, self.class, false, None);
            node.tree.notify_released();
            return Err(rejection);
        }
        self.bytes = bytes;
        Ok(())
    }

    /// Turns a data permit into a control permit without changing its
    /// totals; the data-class share it held is freed and the rate token it
    /// took is given back at every rated level.
    pub fn promote_to_control(&mut self) {
        if self.class == BudgetClass::Control {
            return;
        }
        for node in self.node.ancestors() {
            if let Some(data) = &node.data_usage {
                data.sub(1, self.bytes);
            }
            if node.depth < self.token_levels {
                node.restore_token();
            }
        }
        self.token_levels = 0;
        self.class = BudgetClass::Control;
        self.node.tree.notify_released();
    }

    /// Moves the charge to `target` in the same tree: reservations of the
    /// common ancestors stay, target-only levels are reserved first, then
    /// source-only levels are released.
    ///
    /// The whole target chain is checked, the permit's own budget
    /// included: a closed target (or a target under a closed dynamic key)
    /// answers `Rejected` with a closed rejection, even when it is the
    /// budget the permit is already charged to. An open same-budget target
    /// answers `Unchanged`.
    ///
    /// # Errors
    ///
    /// `PermitTargetInDifferentTree` for a budget of another tree (the
    /// permit is unchanged).
    pub fn try_rebind(
        &mut self,
        target: &ResourceBudget,
    ) -> Result<PermitRebindOutcome, RuntimeContractViolation> {
        if !self.is_in_tree_of(&target.node) {
            return Err(RuntimeContractViolation::PermitTargetInDifferentTree);
        }
        Ok(self.rebind_in_tree(&target.node))
    }

    /// [`try_rebind`](Self::try_rebind) to a level of this permit's own
    /// tree (the caller checked the tree).
    pub(crate) fn rebind_in_tree(&mut self, target_node: &Arc<Node>) -> PermitRebindOutcome {
        let source = &self.node;
        if let Some(closed) = target_node.closed_level() {
            return PermitRebindOutcome::Rejected(
                target_node.rejection(closed, BudgetRejectionReason::Closed),
            );
        }
        if Arc::ptr_eq(source, target_node) {
            return PermitRebindOutcome::Unchanged;
        }
        let common = common_ancestor(source, target_node);
        // Nothing to reserve when the target is an ancestor of the source.
        let target_is_common = common.is_some_and(|common| std::ptr::eq(common, &**target_node));
        if !target_is_common {
            if let Err((at, dimension)) =
                target_node.reserve_chain(1, self.bytes, self.class, false, common)
            {
                target_node.tree.notify_released();
                return PermitRebindOutcome::Rejected(target_node.refused(at, dimension));
            }
            // Again after reserving, as an acquisition does: a rebind racing
            // the target's close is either before it or refused.
            crate::loom::seq_cst_handshake();
            if let Some(closed) = target_node.closed_level() {
                let rejection = target_node.rejection(closed, BudgetRejectionReason::Closed);
                target_node.roll_back_chain(1, self.bytes, self.class, false, common);
                target_node.tree.notify_released();
                return PermitRebindOutcome::Rejected(rejection);
            }
        }
        source.release_chain(1, self.bytes, self.class, common);
        source.tree.notify_released();
        // Only the common ancestors keep a token for this permit.
        let common_levels = common.map_or(0, |common| common.depth + 1);
        self.token_levels = self.token_levels.min(common_levels);
        self.node = Arc::clone(target_node);
        PermitRebindOutcome::Rebound
    }
}

/// The deepest level both chains share (same tree).
fn common_ancestor<'a>(a: &'a Node, b: &'a Node) -> Option<&'a Node> {
    let (mut a, mut b) = (Some(a), Some(b));
    while let (Some(x), Some(y)) = (a, b) {
        if std::ptr::eq(x, y) {
            return Some(x);
        }
        if x.depth >= y.depth {
            a = x.parent.as_deref();
        } else {
            b = y.parent.as_deref();
        }
    }
    None
}

impl Drop for ResourcePermit {
    #[inline]
    fn drop(&mut self) {
        if self.held {
            self.node.release(1, self.bytes, self.class);
        }
    }
}
