//! The levels of the budget tree: `Node` (one level with atomic bounded
//! counters, an optional rate and an optional dynamic-key gate), `TreeState`
//! (what every level of one tree shares: the clock, the release wake-up and
//! the dynamic-key registry), and reserve-and-rollback along the ancestor
//! chain. The public handles are in `budget.rs`.
//!
//! Invariants:
//!
//! 1. Each level's count and bytes (and, where a control reserve exists, the
//!    data-class counters, bounded by `capacity − reserve`) only move through
//!    bounded compare-and-swap (see `usage.rs`): a counter is never raised
//!    past its limit, so no level ever exceeds it (loom-modelled with two
//!    acquirers and a release, in both usage representations).
//! 2. A reservation walks the chain root → leaf. At each level it raises
//!    count and bytes, then the data-class share for data work, then, only at
//!    a level with a rate, takes a token under that level's lock: only a
//!    rated level locks.
//! 3. A failure at level k undoes exactly what this request reserved at the
//!    levels above k (and at k); an undone reservation counts as neither
//!    admitted nor released, and gives back the rate tokens its ancestors
//!    gave, so a refused request consumes no rate. The refusal wakes capacity
//!    waiters (one may have seen the transient use and parked) and names
//!    level k as `exhausted_path`.
//! 4. Reserve-then-check: dynamic gates are checked after the whole chain is
//!    reserved, by acquisitions, growth by `try_resize` and rebinds alike; a
//!    closed gate rolls everything back (tokens included). So each either
//!    completed before the close (and stays charged, seen by a closer that
//!    reads the key's use right after closing) or is refused (loom-modelled
//!    for acquisitions, resize and rebind racing a key close; the models fail
//!    without the re-check).
//! 5. The reservation and the gate check are a store-then-load handshake
//!    across two atomics against a close and the closer's read of the use;
//!    the real build's single `SeqCst` order makes it correct, but loom
//!    treats `SeqCst` loads and stores as acquire/release, so both sides call
//!    `crate::loom::seq_cst_handshake()` (nothing in the normal build, a
//!    `SeqCst` fence under loom).
//! 6. Release wake-up: a waiting producer registers on `released`, then arms
//!    `release_armed`, then re-checks the use; a release lowers the use, then
//!    clears the flag if set and only then calls `notify_waiters`. Every
//!    access is `SeqCst`: a re-check that missed a release is followed, in
//!    the single total order, by that release finding the flag set, or by an
//!    earlier release that cleared it and woke every registered waiter. A
//!    parked producer thus costs one wake-up per wait, not one per release.
//! 7. `fits_now` judges from a read of every level's use without reserving,
//!    so it leaves no transient use for another waiter to see and wakes
//!    nobody; rates are not read.
//! 8. Statistics that no decision reads (`rejected`, `throttled`, `dropped`,
//!    `coalesced`, slow-consumer closes) are plain atomics even under loom
//!    (`StatCounter`, or per-thread stripes for `rejected`, which every
//!    refusal writes: `stripes.rs`), so the models explore only the bounded
//!    counters.
//! 9. Dynamic key names are validated (`validate_name`) before the held-name
//!    lookup.

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use tokio::sync::Notify;

use crate::error::RuntimeContractViolation;
use crate::loom::{Arc, AtomicBool, AtomicU64, Mutex, Ordering, StatCounter, StaticAtomicU64};
use crate::resource_budget::stripes::{StripedCounter, StripedPath};
use crate::resource_budget::types::{
    BudgetClass, BudgetDimension, BudgetLimit, BudgetRejection, BudgetRejectionReason,
    BudgetSnapshot, MonotonicClock,
};
use crate::resource_budget::usage::Usage;

static NEXT_TREE_ID: StaticAtomicU64 = StaticAtomicU64::new(1);

/// Default bound of a tree's dynamic key registry.
pub const DEFAULT_MAX_DYNAMIC_BUDGET_KEYS: usize = 4_096;

/// State shared by every level of one tree.
pub(crate) struct TreeState {
    pub(super) id: u64,
    pub(crate) clock: Arc<dyn MonotonicClock>,
    /// Set by a waiter after it registers for `released` and before it
    /// re-checks capacity; the first release that finds it set clears it
    /// and wakes every registered waiter, later releases skip the wake-up
    /// until a waiter arms again (one notification per wait, not one per
    /// release). Every release reads it: on a line of its own, away from
    /// the `released` notification that waiters write.
    release_armed: ReleaseArmed,
    /// Woken when capacity returns anywhere in the tree (while armed).
    pub(crate) released: Notify,
    /// Woken (every waiter) when a dynamic key of the tree closes, so
    /// consumers parked on queues built under it see the close at once.
    pub(crate) closed: Notify,
    pub(crate) dynamic: DynamicRegistry,
    #[cfg(all(not(loom), feature = "metrics"))]
    /// Queues of this tree exported to `/metrics` under a label the
    /// application chose (`BudgetedQueue::export_metrics`); dropped
    /// queues are pruned when read.
    pub(crate) exported_queues: Mutex<Vec<ExportedQueue>>,
}

/// What `/metrics` reads of a queue, without observing its ages.
#[cfg(all(not(loom), feature = "metrics"))]
pub(crate) trait QueueCounts: Send + Sync {
    /// Items queued, refused pushes, items the queue discarded.
    fn counts(&self) -> (usize, u64, u64);
}

/// A queue exported under `label`.
#[cfg(all(not(loom), feature = "metrics"))]
pub(crate) struct ExportedQueue {
    pub(crate) label: &'static str,
    pub(crate) queue: std::sync::Weak<dyn QueueCounts>,
}

impl fmt::Debug for TreeState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TreeState")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// [`TreeState::release_armed`], on its own cache lines.
#[derive(Debug)]
#[repr(align(128))]
struct ReleaseArmed(AtomicBool);

/// The registry of one tree's dynamic keys.
#[derive(Debug)]
pub(crate) struct DynamicRegistry {
    pub(super) max_entries: usize,
    pub(super) next_generation: AtomicU64,
    /// Full path → the generation holding it.
    pub(super) held: Mutex<HashMap<Arc<str>, u64>>,
}

impl DynamicRegistry {
    pub(crate) fn new(max_entries: usize) -> Self {
        Self {
            max_entries,
            next_generation: AtomicU64::new(1),
            held: Mutex::new(HashMap::new()),
        }
    }
}

/// A token bucket (only at levels with a rate).
#[derive(Debug)]
struct TokenBucket {
    tokens: f64,
    refilled_at: Duration,
}

/// A dynamic key's admission gate.
#[derive(Debug)]
pub(crate) struct Gate {
    pub(crate) closed: AtomicBool,
}

/// One level of the tree.
pub(crate) struct Node {
    pub(crate) path: Arc<str>,
    pub(crate) name: Arc<str>,
    pub(crate) limit: BudgetLimit,
    pub(crate) parent: Option<Arc<Node>>,
    pub(crate) tree: Arc<TreeState>,
    pub(super) depth: usize,
    /// Count and bytes held at this level.
    usage: Usage,
    /// The data-class share, only where a control reserve exists.
    pub(super) data_usage: Option<Usage>,
    rate: Option<Mutex<TokenBucket>>,
    pub(crate) gate: Option<Gate>,
    /// On lines of their own: refusals write them, while every
    /// reservation reads the level's limit, parent and gate.
    pub(crate) stats: NodeStats,
}

/// A level's statistics (tree invariant 8), apart from its read-mostly
/// fields.
#[derive(Debug)]
#[repr(align(128))]
pub(crate) struct NodeStats {
    /// Written by every counted refusal, on the refusing thread's stripe.
    rejected: StripedCounter,
    /// The path rejections carry, one copy per stripe.
    path: StripedPath,
    throttled: StatCounter,
    pub(crate) dropped: StatCounter,
    pub(crate) coalesced: StatCounter,
    pub(crate) closed_slow_consumer: StatCounter,
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Node")
            .field("path", &self.path)
            .field("usage", &self.usage.load())
            .finish_non_exhaustive()
    }
}

impl Node {
    pub(super) fn new(
        name: Arc<str>,
        path: Arc<str>,
        limit: BudgetLimit,
        parent: Option<Arc<Node>>,
        tree: Arc<TreeState>,
        gate: Option<Gate>,
    ) -> Self {
        let depth = parent.as_ref().map_or(0, |parent| parent.depth + 1);
        let rate = limit.capacity.rate.map(|rate| {
            Mutex::new(TokenBucket {
                tokens: rate.burst as f64,
                refilled_at: tree.clock.now(),
            })
        });
        Self {
            path,
            name,
            limit,
            parent,
            tree,
            depth,
            usage: Usage::new(limit.capacity.count, limit.capacity.bytes),
            data_usage: (limit.control_reserve.count > 0 || limit.control_reserve.bytes > 0).then(
                || {
                    let (count, bytes) = data_capacity(&limit);
                    Usage::new(count, bytes)
                },
            ),
            rate,
            gate,
            stats: NodeStats {
                rejected: StripedCounter::default(),
                path: StripedPath::default(),
                throttled: StatCounter::new(0),
                dropped: StatCounter::new(0),
                coalesced: StatCounter::new(0),
                closed_slow_consumer: StatCounter::new(0),
            },
        }
    }

    /// This level and its ancestors, up to the root.
    #[inline]
    pub(super) fn ancestors(&self) -> impl Iterator<Item = &Node> {
        std::iter::successors(Some(self), |node| node.parent.as_deref())
    }

    /// The data-class share to charge for `class`, if this level keeps one.
    #[inline]
    pub(super) fn data_share(&self, class: BudgetClass) -> Option<&Usage> {
        match class {
            BudgetClass::Data => self.data_usage.as_ref(),
            BudgetClass::Control => None,
        }
    }

    /// Reserves one count and `bytes` at this level (and a rate token if
    /// `rate`); on failure nothing stays reserved here.
    #[inline]
    fn reserve_level(
        &self,
        count: usize,
        bytes: usize,
        class: BudgetClass,
        rate: bool,
    ) -> Result<(), BudgetDimension> {
        let capacity = &self.limit.capacity;
        self.usage
            .try_add(count, bytes, capacity.count, capacity.bytes)?;
        let data = self.data_share(class);
        if let Some(data) = data {
            let (count_limit, bytes_limit) = data_capacity(&self.limit);
            if let Err(dimension) = data.try_add(count, bytes, count_limit, bytes_limit) {
                self.usage.sub(count, bytes);
                return Err(dimension);
            }
        }
        if rate && self.rate.is_some() && !self.take_token(class) {
            if let Some(data) = data {
                data.sub(count, bytes);
            }
            self.usage.sub(count, bytes);
            self.stats.throttled.fetch_add(1, Ordering::Relaxed);
            return Err(BudgetDimension::Rate);
        }
        self.usage.admitted(count);
        Ok(())
    }

    /// Releases what `reserve_level` took (no rate token comes back).
    #[inline]
    fn release_level(&self, count: usize, bytes: usize, class: BudgetClass) {
        if let Some(data) = self.data_share(class) {
            data.sub(count, bytes);
        }
        self.usage.release(count, bytes);
    }

    /// Takes back what `reserve_level` took for a reservation that does
    /// not stand: it counts as neither admitted nor released.
    #[inline]
    fn undo_level(&self, count: usize, bytes: usize, class: BudgetClass) {
        if let Some(data) = self.data_share(class) {
            data.sub(count, bytes);
        }
        self.usage.undo(count, bytes);
    }

    fn take_token(&self, class: BudgetClass) -> bool {
        let (Some(bucket), Some(rate)) = (&self.rate, self.limit.capacity.rate) else {
            return true;
        };
        let floor = match (class, self.limit.control_reserve.rate) {
            (BudgetClass::Data, Some(reserve)) => reserve.burst as f64,
            _ => 0.0,
        };
        let now = self.tree.clock.now();
        let mut bucket = bucket.lock();
        let elapsed = now.saturating_sub(bucket.refilled_at).as_secs_f64();
        bucket.tokens =
            (bucket.tokens + elapsed * rate.permits_per_second as f64).min(rate.burst as f64);
        bucket.refilled_at = now;
        if bucket.tokens - 1.0 >= floor {
            bucket.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Gives one rate token back (capped at the burst), at rated levels.
    pub(super) fn restore_token(&self) {
        let (Some(bucket), Some(rate)) = (&self.rate, self.limit.capacity.rate) else {
            return;
        };
        let mut bucket = bucket.lock();
        bucket.tokens = (bucket.tokens + 1.0).min(rate.burst as f64);
    }

    /// The first closed gate on the chain (this level and its ancestors).
    #[inline]
    pub(super) fn closed_level(&self) -> Option<&Node> {
        self.ancestors().find(|node| {
            node.gate
                .as_ref()
                .is_some_and(|gate| gate.closed.load(Ordering::SeqCst))
        })
    }

    /// Reserves along the chain root → `self`; on failure everything this
    /// call reserved is undone and the failing level is returned (the
    /// caller counts the rejection there, see [`refused`](Self::refused),
    /// and wakes capacity waiters: the undone use may have made one park).
    #[inline]
    pub(super) fn reserve_chain(
        &self,
        count: usize,
        bytes: usize,
        class: BudgetClass,
        rate: bool,
        stop_before: Option<&Node>,
    ) -> Result<(), (&Node, BudgetDimension)> {
        if let Some(parent) = self.parent.as_deref() {
            if !stop_before.is_some_and(|stop| std::ptr::eq(stop, parent)) {
                parent.reserve_chain(count, bytes, class, rate, stop_before)?;
            }
        }
        if let Err(dimension) = self.reserve_level(count, bytes, class, rate) {
            if let Some(parent) = self.parent.as_deref() {
                parent.roll_back_chain(count, bytes, class, rate, stop_before);
            }
            return Err((self, dimension));
        }
        Ok(())
    }

    /// Undoes a reservation this call made along the chain `self` → root
    /// (or up to `stop_before`): the usage goes back without counting a
    /// release (nor the admission) and, when it took rate tokens, one
    /// token goes back at every rated level (a refused request consumes no
    /// rate).
    pub(super) fn roll_back_chain(
        &self,
        count: usize,
        bytes: usize,
        class: BudgetClass,
        rate: bool,
        stop_before: Option<&Node>,
    ) {
        self.walk_chain(stop_before, |node| {
            node.undo_level(count, bytes, class);
            if rate && count > 0 {
                node.restore_token();
            }
        });
    }

    /// Visits this level and its ancestors, stopping before `stop_before`.
    #[inline]
    fn walk_chain(&self, stop_before: Option<&Node>, visit: impl FnMut(&Node)) {
        self.ancestors()
            .take_while(|node| !stop_before.is_some_and(|stop| std::ptr::eq(stop, *node)))
            .for_each(visit);
    }

    /// Releases along the chain `self` → root (or up to `stop_before`).
    #[inline]
    pub(super) fn release_chain(
        &self,
        count: usize,
        bytes: usize,
        class: BudgetClass,
        stop_before: Option<&Node>,
    ) {
        self.walk_chain(stop_before, |node| node.release_level(count, bytes, class));
    }

    pub(super) fn rejection(&self, at: &Node, reason: BudgetRejectionReason) -> BudgetRejection {
        BudgetRejection {
            path: self.stats.path.get(&self.path),
            exhausted_path: (!std::ptr::eq(self, at)).then(|| at.stats.path.get(&at.path)),
            reason,
            policy: self.limit.full_policy,
        }
    }

    /// The rejection for a capacity refusal at `at`, counted in
    /// `rejected_count` at `at` and, when the request came through a
    /// deeper level, at this level (the one the caller asked) as well.
    pub(super) fn refused(&self, at: &Node, dimension: BudgetDimension) -> BudgetRejection {
        at.stats.rejected.add(1);
        if !std::ptr::eq(self, at) {
            self.stats.rejected.add(1);
        }
        self.rejection(at, BudgetRejectionReason::Capacity(dimension))
    }

    /// Reserves one count and `bytes` root → leaf, then checks the gates.
    /// The caller owns the reservation and must give it back with
    /// [`release`](Self::release), or hand it to a permit
    /// ([`ResourcePermit::from_reserved`](crate::ResourcePermit)) that
    /// does (a queue entry keeps it without a permit, so queued items hold
    /// no reference count of their own). A capacity refusal is counted in
    /// the refusing level's `rejected_count` only when `counted` (a waiting
    /// push counts its first attempt, not its retries).
    #[inline]
    pub(crate) fn reserve(
        &self,
        bytes: usize,
        class: BudgetClass,
        counted: bool,
    ) -> Result<(), BudgetRejection> {
        self.try_reserve(bytes, class)
            .map_err(|(at, dimension)| self.refusal(at, dimension, counted))
    }

    /// The reservation behind [`reserve`](Self::reserve); a refusal names
    /// the level and the exhausted dimension (`None`: a closed gate). Small
    /// enough to come back in registers: the rejection itself is built
    /// out of line, only when refused.
    #[inline]
    fn try_reserve(
        &self,
        bytes: usize,
        class: BudgetClass,
    ) -> Result<(), (&Node, Option<BudgetDimension>)> {
        if let Err((at, dimension)) = self.reserve_chain(1, bytes, class, true, None) {
            // `refusal` wakes the capacity waiters (out of line).
            return Err((at, Some(dimension)));
        }
        crate::loom::seq_cst_handshake();
        if let Some(closed) = self.closed_level() {
            self.roll_back_chain(1, bytes, class, true, None);
            self.tree.notify_released();
            return Err((closed, None));
        }
        Ok(())
    }

    /// The rejection for a refusal of [`try_reserve`](Self::try_reserve);
    /// a capacity refusal also wakes the capacity waiters (its undone
    /// reservation may have made one park; a closed-gate refusal woke
    /// them already).
    #[cold]
    #[inline(never)]
    fn refusal(
        &self,
        at: &Node,
        dimension: Option<BudgetDimension>,
        counted: bool,
    ) -> BudgetRejection {
        if dimension.is_some() {
            self.tree.notify_released();
        }
        match dimension {
            Some(dimension) if counted => self.refused(at, dimension),
            Some(dimension) => self.rejection(at, BudgetRejectionReason::Capacity(dimension)),
            None => self.rejection(at, BudgetRejectionReason::Closed),
        }
    }

    /// The refusal a reservation of `bytes` of `class` meets at this very
    /// level, judged from a read of its use without reserving, or `None`
    /// when this level has room. A full level (the common refusal of a
    /// full queue) then names the root-most level without room, as
    /// [`reserve`](Self::reserve) would (invariant 2: ancestors are
    /// reserved first), having written nothing: no rollback, no transient
    /// use at the shared levels, nobody woken. Counted like a
    /// reservation's refusal when `counted`.
    pub(crate) fn refusal_at_own_level(
        &self,
        bytes: usize,
        class: BudgetClass,
        counted: bool,
    ) -> Option<BudgetRejection> {
        let lacks = |node: &Node| {
            let lacks_in = |usage: &Usage, (count_limit, bytes_limit): (usize, usize)| {
                let (count, used) = usage.load();
                if count >= count_limit {
                    Some(BudgetDimension::Count)
                } else if bytes > bytes_limit.saturating_sub(used) {
                    Some(BudgetDimension::Bytes)
                } else {
                    None
                }
            };
            let capacity = &node.limit.capacity;
            lacks_in(&node.usage, (capacity.count, capacity.bytes)).or_else(|| {
                node.data_share(class)
                    .and_then(|data| lacks_in(data, data_capacity(&node.limit)))
            })
        };
        let mut refused = (self, lacks(self)?);
        // Leaf to root: the last level found without room is the root-most.
        for node in self.ancestors().skip(1) {
            if let Some(dimension) = lacks(node) {
                refused = (node, dimension);
            }
        }
        let (at, dimension) = refused;
        Some(if counted {
            self.refused(at, dimension)
        } else {
            self.rejection(at, BudgetRejectionReason::Capacity(dimension))
        })
    }

    /// Takes back a reservation [`reserve`](Self::reserve) made that will
    /// not stand (its queue turned out closed): counted as neither
    /// admitted nor released, its rate tokens given back, capacity waiters
    /// woken (the transient use may have made one park).
    pub(crate) fn undo_reservation(&self, bytes: usize, class: BudgetClass) {
        self.roll_back_chain(1, bytes, class, true, None);
        self.tree.notify_released();
    }

    /// Gives back `count` reservations of `bytes` in total (of one class)
    /// along the whole chain and wakes waiting producers.
    #[inline]
    pub(crate) fn release(&self, count: usize, bytes: usize, class: BudgetClass) {
        self.release_chain(count, bytes, class, None);
        self.tree.notify_released();
    }

    pub(crate) fn current_count(&self) -> usize {
        self.usage.load().0
    }

    pub(crate) fn current_bytes(&self) -> usize {
        self.usage.load().1
    }

    pub(crate) fn snapshot(&self) -> BudgetSnapshot {
        let counts = self.usage.counts();
        BudgetSnapshot {
            path: Arc::clone(&self.path),
            current_count: counts.count,
            current_bytes: counts.bytes,
            admitted_count: counts.admitted,
            released_count: counts.released,
            rejected_count: self.stats.rejected.load(),
            throttled_count: self.stats.throttled.load(Ordering::Relaxed),
            dropped_count: self.stats.dropped.load(Ordering::Relaxed),
            coalesced_count: self.stats.coalesced.load(Ordering::Relaxed),
            closed_slow_consumer_count: self.stats.closed_slow_consumer.load(Ordering::Relaxed),
        }
    }

    /// Whether one more reservation of `bytes` of `class` fits every level
    /// of the chain now, judged from a read of each level's use: nothing is
    /// reserved, so (unlike a refused try) it leaves no transient use for
    /// a concurrent waiter to see and wakes nobody. Rates are not read.
    pub(crate) fn fits_now(&self, bytes: usize, class: BudgetClass) -> bool {
        let fits = |usage: &Usage, (count_limit, bytes_limit): (usize, usize)| {
            let (count, used) = usage.load();
            count < count_limit && bytes <= bytes_limit.saturating_sub(used)
        };
        self.ancestors().all(|node| {
            let capacity = &node.limit.capacity;
            fits(&node.usage, (capacity.count, capacity.bytes))
                && node
                    .data_share(class)
                    .is_none_or(|data| fits(data, data_capacity(&node.limit)))
        })
    }

    /// Whether `bytes` of `class` could ever fit the chain (ignoring use).
    pub(crate) fn could_fit(&self, bytes: usize, class: BudgetClass) -> bool {
        self.ancestors().all(|node| {
            // Data work may use neither the reserved bytes nor the reserved
            // count (a reserve of the whole count leaves data no room).
            let (count, limit) = match class {
                BudgetClass::Data => data_capacity(&node.limit),
                BudgetClass::Control => (node.limit.capacity.count, node.limit.capacity.bytes),
            };
            count > 0 && bytes <= limit
        })
    }
}

/// The (count, bytes) data work may use at a level: its capacity less the
/// control reserve.
#[inline]
fn data_capacity(limit: &BudgetLimit) -> (usize, usize) {
    (
        limit.capacity.count - limit.control_reserve.count,
        limit.capacity.bytes - limit.control_reserve.bytes,
    )
}

impl TreeState {
    /// The exported queues' counts summed per label, label order; dropped
    /// queues leave the list.
    #[cfg(all(not(loom), feature = "metrics"))]
    pub(crate) fn exported_queue_counts(&self) -> Vec<(&'static str, usize, u64, u64)> {
        let mut queues = self.exported_queues.lock();
        queues.retain(|exported| exported.queue.strong_count() > 0);
        let mut sums: Vec<(&'static str, usize, u64, u64)> = Vec::new();
        for exported in queues.iter() {
            let Some(queue) = exported.queue.upgrade() else {
                continue;
            };
            let (depth, refused, dropped) = queue.counts();
            match sums.iter_mut().find(|sum| sum.0 == exported.label) {
                Some(sum) => {
                    sum.1 += depth;
                    sum.2 += refused;
                    sum.3 += dropped;
                }
                None => sums.push((exported.label, depth, refused, dropped)),
            }
        }
        sums.sort_by_key(|sum| sum.0);
        sums
    }

    /// Wakes capacity waiters (only when one armed since the last wake).
    ///
    /// Every access is `SeqCst`: a waiter registers, arms, then reads the
    /// usage; a releaser lowers the usage, then reads the flag. When the
    /// waiter's read missed the release, the releaser's read comes later
    /// in the single total order and finds the flag set, or a releaser in
    /// between cleared it and woke every registered waiter.
    #[inline]
    pub(crate) fn notify_released(&self) {
        crate::loom::seq_cst_handshake();
        if self.release_armed.0.load(Ordering::SeqCst)
            && self.release_armed.0.swap(false, Ordering::SeqCst)
        {
            self.released.notify_waiters();
        }
    }

    /// Asks the next release to wake `released` waiters. Call after
    /// enabling a `released.notified()` and before re-checking capacity.
    #[inline]
    pub(crate) fn arm_release_wake(&self) {
        self.release_armed.0.store(true, Ordering::SeqCst);
        crate::loom::seq_cst_handshake();
    }
}

pub(crate) fn validate_name(name: &str) -> Result<Arc<str>, RuntimeContractViolation> {
    let name = name.trim();
    if name.is_empty() {
        return Err(RuntimeContractViolation::EmptyBudgetName);
    }
    if name.contains('/') {
        return Err(RuntimeContractViolation::InvalidBudgetName);
    }
    Ok(Arc::from(name))
}

impl Node {
    /// The root level of a new tree named `name` (validated) with `limit`
    /// (validated), its clock and its dynamic key bound.
    pub(crate) fn new_root(
        name: &str,
        limit: BudgetLimit,
        clock: Arc<dyn MonotonicClock>,
        max_entries: usize,
    ) -> Result<Arc<Self>, RuntimeContractViolation> {
        let name = validate_name(name)?;
        limit.validate()?;
        let tree = Arc::new(TreeState {
            id: NEXT_TREE_ID.fetch_add(1, Ordering::Relaxed),
            clock,
            released: Notify::new(),
            release_armed: ReleaseArmed(AtomicBool::new(false)),
            closed: Notify::new(),
            dynamic: DynamicRegistry::new(max_entries),
            #[cfg(all(not(loom), feature = "metrics"))]
            exported_queues: Mutex::new(Vec::new()),
        });
        Ok(Arc::new(Node::new(
            Arc::clone(&name),
            name,
            limit,
            None,
            tree,
            None,
        )))
    }
}
