//! `BudgetedQueue<T>`: a FIFO whose items each hold a permit of one budget.
//!
//! The queue's budget (its [`BudgetLimit`](crate::BudgetLimit)) decides the
//! overload behaviour through its `full_policy` and `max_age`. An item's
//! permit is taken at push and released at dequeue (`try_pop`, `recv`), or
//! kept by a [`BudgetedItem`] until it is consumed. Closing lets accepted
//! items drain and wakes producers and consumers.
//!
//! Invariants:
//!
//! 1. Every queued entry holds exactly one reservation (one count and its
//!    bytes, in its class, on the queue's budget chain), taken at push and
//!    given back by whichever path removes the entry: a pop (released at
//!    dequeue, or turned into the [`BudgetedItem`]'s [`ResourcePermit`]), a
//!    stale drop, coalescing, `retain`, a slow-consumer close, or the queue's
//!    own drop (`Drop for QueueInner`).
//! 2. Entries hold no reference count of their own (the queue already holds
//!    its budget), so a push and a pop move no `Arc` count.
//! 3. The entries live in two places: producers append to a lock-free FIFO
//!    (`appended`, crossbeam-queue's `SegQueue`: a hand-written one would
//!    repeat it), consumers take from the *head*, a deque behind the head
//!    lock, and from the FIFO's front when the head is empty. Every head
//!    entry is older than every appended one, so the queue is FIFO, and
//!    producers never take a lock the consumer takes: an append and a pop
//!    meet only on the FIFO's slots. Whatever needs the whole queue (the
//!    destructive policies, `retain`, `snapshot`, the first age observation)
//!    takes the head lock and then the tail lock (which orders the appends
//!    that stamp, and closes) and first moves the appended entries behind
//!    the head, so it sees one deque; an append that lands after that move
//!    is newer than everything it saw.
//! 4. A `Reject`, `WaitUntilDeadline` or `CoalesceLatest` push of a new
//!    reservation reserves the budget chain *before* it takes the tail lock,
//!    so the lock is held only to append: a push that cannot fit is refused
//!    outside any lock, by the reservation or, when the queue's own level is
//!    full (the common refusal), from a read of the chain's use before
//!    anything is reserved (`Node::refusal_at_own_level`: no rollback, no
//!    transient use at the shared levels). Counted in flight (invariant 8),
//!    the push then checks that neither the queue nor its budget closed
//!    meanwhile; if one did, the reservation is undone (counted as neither
//!    admitted nor released) and the push is refused with `Closed`. So a
//!    push either is queued before the close, where a consumer will see
//!    it, or is refused. A push that stamps appends under the tail lock
//!    (stamps follow queue order); one that does not appends without any
//!    lock. A refused
//!    reservation at the queue's own level sends a `CoalesceLatest` push to
//!    the locked path. A refusal writes only the refusing thread's stripes
//!    (its counts and the rejection's path, `stripes.rs`), so producers
//!    refused on several cores share no line they write. `DropStale` and
//!    `CloseSlowConsumer` pushes, and
//!    pushes of a producer's permit, look at the head first: they take both
//!    locks and reserve under them.
//! 5. Discarded items are dropped after the queue's locks are released, so
//!    an item's destructor may use the queue or close a budget. Their
//!    reservations go back after they are dropped (a `Release` guard, which
//!    also releases while unwinding), so the budget never shows as free what
//!    a discarded item still occupies. One exception: a push that discards
//!    (`CoalesceLatest`'s displaced items, `DropStale`'s stale head) gives
//!    their reservations back first, to admit the new item in their room
//!    under the same locks; the discarded items are dropped right after,
//!    once the new item is queued. A stale head never costs the fresh item
//!    its place.
//! 6. A push that stamps (invariant 11) reads the clock before it reserves
//!    and before it takes a lock (or, finding stamping started under the
//!    lock, releases it, reads, and locks again, its reservation undone if
//!    the clock panics), so a panicking user clock leaves nothing reserved
//!    and runs under no lock (a rated level's token refill reads the tree
//!    clock inside the reservation). A stamp is raised to the newest queued
//!    item's if a push that read the clock earlier queues later, so stamps
//!    follow queue order (the age checks look at the head only).
//! 7. `retain` restores the unvisited entries (with their charges) if `keep`
//!    panics, then resumes the panic. A panicking destructor or predicate
//!    never leaves the accounting wrong.
//! 8. Closing never discards accepted items (except `CloseSlowConsumer`,
//!    whose closing is the discard) and wakes readers and the tree's capacity
//!    waiters. The closed flag is set under the tail lock. A push that does
//!    not hold the head lock counts itself in flight (`pushing`, a
//!    per-thread stripe, `stripes.rs`) before it reads the flag and the
//!    budget's gates, and stops counting once it appended or gave up; a
//!    consumer holding the head lock that finds nothing queued decides
//!    "closed and drained" from the flag and the gates, then no push in
//!    flight, then nothing appended (all `SeqCst`). A push that read the
//!    flag open was counted before the close, so the consumer either sees it
//!    in flight (and waits: the push wakes readers when it stops counting,
//!    also when refused) or sees its entry. No accepted item is left behind
//!    (loom-modelled). Pushes under both locks (`DropStale`,
//!    `CloseSlowConsumer`, coalescing, a producer's permit) exclude the
//!    consumer's decision by the head lock. A queue built on a closed budget (a closed
//!    dynamic key or a descendant of one) is closed: pushes are refused with
//!    [`QueuePushRejection::Closed`], parked producers and consumers wake,
//!    and accepted items still drain.
//!    Only a budget with a dynamic key's gate at or above it can close
//!    (gates are fixed when a level is created): other queues never read
//!    the gates, and their consumers wait on the queue's notification
//!    alone.
//! 9. A parked consumer counts itself in `readers_waiting` before it enables
//!    its notification and re-checks the queue; a push notifies only when
//!    that count is non-zero, read after it stopped counting itself in
//!    flight. The re-check reads every in-flight count after a `SeqCst`
//!    fence, so either it sees a push's last count (and with it the entry)
//!    or that push reads the consumer's count: no wake-up is lost, and an
//!    unwatched push notifies nobody (loom-modelled).
//! 10. Producers waiting for capacity follow the protocol in `waiting.rs`.
//! 11. Entries are stamped only while something reads their ages, by the
//!     protocol in `stamps.rs`.
//! 12. The age policies look at the head on every push and every pop:
//!     `DropStale` drops the stale head before either, and
//!     `CloseSlowConsumer` closes the queue (dropping its items, waking
//!     everyone) when either finds the head at `max_age` or older; the pop
//!     that found it returns nothing.
//! 13. `recv` and `recv_budgeted` take one unit of the task's cooperative
//!     budget (`tokio::task::coop::consume_budget`), as Tokio's channels
//!     do: a consumer whose queue never runs dry still yields once its
//!     budget is spent, so the other tasks on its worker (producers among
//!     them) run too.

use std::collections::VecDeque;
use std::fmt;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::time::Duration;

use tokio::sync::Notify;

use crate::loom::{Arc, AtomicBool, AtomicU64, AtomicUsize, Mutex, MutexGuard, Ordering, SegQueue};
use crate::resource_budget::stripes::{InFlight, StripedCounter};
use crate::resource_budget::tree::Node;
#[cfg(all(not(loom), feature = "metrics"))]
use crate::resource_budget::tree::{ExportedQueue, QueueCounts};
use crate::resource_budget::types::{BudgetClass, BudgetDimension, FullPolicy};
use crate::resource_budget::{ResourceBudget, ResourcePermit};
use crate::wait::{notified, notified_by_either, Watch};

mod charge;
mod outcome;
mod policy;
mod stamps;
mod waiting;

use charge::{Charge, Discarded, Release};
pub use outcome::{
    BudgetedItem, ForeignPermit, QueuePushOutcome, QueuePushRejection, QueueSnapshot,
};

/// A queued item and its reservation (one count and `bytes` of `class` on
/// the queue's budget chain, given back by whoever removes the entry).
struct Entry<T> {
    item: T,
    bytes: usize,
    class: BudgetClass,
    enqueued_at: Duration,
}

/// One side of the queue (invariant 3): its entries, oldest first, and the
/// bytes they retain.
struct Side<T> {
    items: VecDeque<Entry<T>>,
    bytes: usize,
}

impl<T> Side<T> {
    fn new() -> Self {
        Self {
            items: VecDeque::new(),
            bytes: 0,
        }
    }

    fn pop_front(&mut self) -> Option<Entry<T>> {
        let entry = self.items.pop_front()?;
        self.bytes -= entry.bytes;
        Some(entry)
    }
}

/// What the tail lock guards: the newest stamp ever queued (stamps follow
/// queue order, `stamps.rs`). The lock also orders the appends that stamp,
/// a close, and whatever needs the whole queue (invariant 3).
struct Tail {
    newest_stamp: Duration,
}

/// A lock on its own cache lines: the head's and the tail's locks are
/// taken on different cores.
#[repr(align(128))]
struct Padded<T>(T);

/// Both locks held (head, then tail), the appended entries moved behind
/// the head: `head` holds every entry appended so far, oldest first.
struct Whole<'a, T> {
    head: MutexGuard<'a, Side<T>>,
    tail: MutexGuard<'a, Tail>,
}

/// What a pop found.
enum Popped<T> {
    Entry(Entry<T>),
    /// Nothing queued; `closed`: and nothing will be (invariant 8).
    Empty {
        closed: bool,
    },
}

/// The queue's shared state, grouped by who writes it so that no push or
/// pop misses on a line another core wrote for an unrelated reason: the
/// read-mostly part (read by every push and pop), each side's lock, the
/// consumers' wake-up, and statistics.
struct QueueInner<T> {
    budget: ResourceBudget,
    /// Set under the tail lock (invariant 8); read without it as a hint.
    closed: AtomicBool,
    /// Whether pushes stamp their entries (`stamps.rs`): set under both
    /// locks only, read before them as a hint.
    stamping: AtomicBool,
    /// Whether the budget can close: a dynamic key's gate at or above it
    /// (fixed when the level is created). A queue without one never listens
    /// for a key's close.
    closable: bool,
    head: Padded<Mutex<Side<T>>>,
    tail: Padded<Mutex<Tail>>,
    /// The appended entries, newer than every head entry (invariant 3).
    appended: SegQueue<Entry<T>>,
    /// Pushes deciding to append or appending (invariant 8).
    pushing: InFlight,
    wake: Padded<ReaderWake>,
    stats: Padded<QueueStats>,
}

/// How pushes wake parked consumers (invariant 9).
struct ReaderWake {
    readers: Notify,
    /// Consumers parked (or about to park) in `recv`: a push notifies only
    /// when one watches.
    readers_waiting: AtomicUsize,
}

/// Counters no decision reads, written by refusals and waits.
struct QueueStats {
    waiters: AtomicUsize,
    throttled: AtomicU64,
    /// Written by every refused push, on the refusing thread's stripe.
    rejected: StripedCounter,
    waited: AtomicU64,
    deadline_exceeded: AtomicU64,
}

/// A reservation a push made before taking the tail lock: undone (counted
/// as neither admitted nor released) unless it reaches its entry, also
/// while unwinding (invariant 4).
struct Reserved<'a> {
    node: &'a Node,
    bytes: usize,
    class: BudgetClass,
    armed: bool,
}

impl Drop for Reserved<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.node.undo_reservation(self.bytes, self.class);
        }
    }
}

/// A FIFO of items that each hold a permit of the queue's budget.
///
/// ```
/// use rocketmq_runtime::{BudgetLimit, BudgetedQueue, FullPolicy, QueuePushOutcome, ResourceBudgetTree};
///
/// let tree = ResourceBudgetTree::new("process", BudgetLimit::new(100, 1 << 20, FullPolicy::Reject))?;
/// let queue = BudgetedQueue::new(tree.root().child("requests", BudgetLimit::new(2, 1024, FullPolicy::Reject))?);
/// assert!(queue.try_push_data("a", 10).is_accepted());
/// assert!(queue.try_push_data("b", 10).is_accepted());
/// let QueuePushOutcome::Rejected { item, .. } = queue.try_push_data("c", 10) else { panic!() };
/// assert_eq!(item, "c"); // returned, never lost
/// assert_eq!(queue.try_pop(), Some("a")); // its permit is released here
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct BudgetedQueue<T> {
    inner: Arc<QueueInner<T>>,
}

impl<T> Clone for BudgetedQueue<T> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<T> fmt::Debug for BudgetedQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BudgetedQueue")
            .field("path", &self.inner.budget.path())
            .field("depth", &self.len())
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl<T> BudgetedQueue<T> {
    /// A queue over `budget`; its limit's `full_policy` and `max_age`
    /// decide the overload behaviour. Clones share the queue.
    pub fn new(budget: ResourceBudget) -> Self {
        // The age policies read stamps from the first push.
        let stamping = budget.limit().max_age.is_some();
        let closable = budget.node.ancestors().any(|node| node.gate.is_some());
        Self {
            inner: Arc::new(QueueInner {
                stamping: AtomicBool::new(stamping),
                closable,
                budget,
                head: Padded(Mutex::new(Side::new())),
                tail: Padded(Mutex::new(Tail {
                    newest_stamp: Duration::ZERO,
                })),
                appended: SegQueue::new(),
                pushing: InFlight::new(),
                closed: AtomicBool::new(false),
                wake: Padded(ReaderWake {
                    readers: Notify::new(),
                    readers_waiting: AtomicUsize::new(0),
                }),
                stats: Padded(QueueStats {
                    waiters: AtomicUsize::new(0),
                    throttled: AtomicU64::new(0),
                    rejected: StripedCounter::default(),
                    waited: AtomicU64::new(0),
                    deadline_exceeded: AtomicU64::new(0),
                }),
            }),
        }
    }

    /// True when both handles share one queue.
    pub fn is_same_queue(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    fn policy(&self) -> FullPolicy {
        self.inner.budget.limit().full_policy
    }

    fn now(&self) -> Duration {
        self.inner.budget.monotonic_now()
    }

    /// Both locks held, the appended entries moved behind the head
    /// (invariant 3).
    fn whole(&self) -> Whole<'_, T> {
        let mut head = self.inner.head.0.lock();
        let tail = self.inner.tail.0.lock();
        self.take_appended(&mut head);
        Whole { head, tail }
    }

    /// Moves every appended entry behind the head (the head lock held).
    fn take_appended(&self, head: &mut Side<T>) {
        while let Some(entry) = self.inner.appended.pop() {
            head.bytes += entry.bytes;
            head.items.push_back(entry);
        }
    }

    /// Whether a push must be refused as `Closed`: the queue or its budget
    /// closed (invariant 8).
    fn refuses_under_tail(&self) -> bool {
        self.inner.closed.load(Ordering::SeqCst) || self.budget_closed()
    }

    /// Called by a consumer holding the head lock that found nothing
    /// queued: whether nothing ever will be (invariant 8). The queue or its
    /// budget closed, no push is still between its check and its append,
    /// and nothing was appended meanwhile.
    fn closed_and_drained(&self) -> bool {
        if !self.refuses_under_tail() {
            return false;
        }
        crate::loom::seq_cst_handshake();
        !self.inner.pushing.any() && self.inner.appended.is_empty()
    }

    /// Whether the queue's budget is closed (never, without a dynamic key
    /// at or above it).
    pub(super) fn budget_closed(&self) -> bool {
        self.inner.closable && self.inner.budget.is_closed()
    }

    /// Pushes without waiting (any policy).
    pub fn try_push(
        &self,
        item: T,
        retained_bytes: usize,
        class: BudgetClass,
    ) -> QueuePushOutcome<T> {
        self.counted(self.push_once(item, Charge::reserve(retained_bytes, class, true)))
    }

    /// Queues `item` under a permit the producer already holds, without
    /// a second reservation: the permit moves onto the queue's budget
    /// (reserving only the levels it does not hold yet, as
    /// [`ResourcePermit::try_rebind`] does) and its bytes become the
    /// item's retained bytes. The queue's policy applies as for
    /// [`try_push`](Self::try_push).
    ///
    /// A refused push returns the item in `Rejected` and releases the
    /// permit. Only a permit of another budget tree is handed back, with
    /// the item and its charge unchanged, in `Err(ForeignPermit)`.
    ///
    /// ```
    /// use rocketmq_runtime::{BudgetLimit, BudgetedQueue, FullPolicy, ResourceBudgetTree};
    ///
    /// let tree = ResourceBudgetTree::new("process", BudgetLimit::new(8, 1024, FullPolicy::Reject))?;
    /// let queue = BudgetedQueue::new(tree.root().child("queue", BudgetLimit::new(4, 512, FullPolicy::Reject))?);
    /// let permit = tree.root().try_acquire_data(100)?; // reserved before the item existed
    /// assert!(queue.try_push_budgeted("request", permit).expect("same tree").is_accepted());
    /// assert_eq!(queue.snapshot().retained_bytes, 100);
    /// assert_eq!(tree.root().snapshot().current_count, 1); // one reservation, not two
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`ForeignPermit`] when the permit belongs to another budget tree.
    pub fn try_push_budgeted(
        &self,
        item: T,
        permit: ResourcePermit,
    ) -> Result<QueuePushOutcome<T>, ForeignPermit<T>> {
        if !permit.is_in_tree_of(&self.inner.budget.node) {
            return Err(ForeignPermit { item, permit });
        }
        Ok(self.counted(self.push_once(item, Charge::Permit(permit))))
    }

    /// Counts a refused push once (in `rejected_count`).
    fn counted(&self, outcome: QueuePushOutcome<T>) -> QueuePushOutcome<T> {
        if !outcome.is_accepted() {
            self.inner.stats.0.rejected.add(1);
        }
        outcome
    }

    /// One push attempt paid by `charge`; a refusal is not counted in the
    /// queue's `rejected_count` here (see [`Charge::Reserve`] for the
    /// budget's). A refused charge is dropped (a permit is released).
    fn push_once(&self, item: T, charge: Charge) -> QueuePushOutcome<T> {
        match (&charge, self.policy()) {
            (
                Charge::Reserve {
                    bytes,
                    class,
                    counted,
                },
                FullPolicy::Reject | FullPolicy::WaitUntilDeadline | FullPolicy::CoalesceLatest,
            ) => {
                let (bytes, class, counted) = (*bytes, *class, *counted);
                self.push_reserved_first(item, bytes, class, counted)
            }
            _ => self.push_whole(item, charge),
        }
    }

    /// Invariant 4: reserve (or refuse) outside any lock, then append under
    /// the tail lock.
    fn push_reserved_first(
        &self,
        item: T,
        bytes: usize,
        class: BudgetClass,
        counted: bool,
    ) -> QueuePushOutcome<T> {
        let inner = &*self.inner;
        let node = &*inner.budget.node;
        // The clock before any reservation (invariant 6).
        let now = self.stamping_hint().then(|| self.now());
        if inner.closed.load(Ordering::Acquire) {
            return self.reject(item, QueuePushRejection::Closed);
        }
        let refused = node.refusal_at_own_level(bytes, class, counted);
        let mut reserved = match refused.map_or_else(|| node.reserve(bytes, class, counted), Err) {
            Ok(()) => Reserved {
                node,
                bytes,
                class,
                armed: true,
            },
            Err(rejection) => {
                if rejection.dimension() == Some(BudgetDimension::Rate) {
                    inner.stats.0.throttled.fetch_add(1, Ordering::Relaxed);
                }
                return match self.policy() {
                    _ if rejection.is_closed() || self.budget_closed() => {
                        self.reject(item, QueuePushRejection::Closed)
                    }
                    FullPolicy::CoalesceLatest if self.coalescible(&rejection, bytes, class) => {
                        // Coalescing replaces the queued items: under both
                        // locks (the refusal is already counted).
                        self.push_whole(item, Charge::reserve(bytes, class, false))
                    }
                    _ => self.reject(item, QueuePushRejection::BudgetExhausted(rejection)),
                };
            }
        };
        let now = match now {
            Some(now) => now,
            None => {
                // Unstamped: appended without a lock (invariants 3 and 8).
                let stripe = inner.pushing.enter();
                crate::loom::seq_cst_handshake();
                if !inner.stamping.load(Ordering::SeqCst) && !self.refuses_under_tail() {
                    reserved.armed = false;
                    inner.appended.push(Entry {
                        item,
                        bytes,
                        class,
                        enqueued_at: Duration::ZERO,
                    });
                    inner.pushing.leave(stripe);
                    self.wake_reader();
                    return QueuePushOutcome::Enqueued;
                }
                inner.pushing.leave(stripe);
                // A consumer may wait for this push to settle before it
                // decides the queue drained.
                self.wake_reader();
                if self.refuses_under_tail() {
                    drop(reserved);
                    return self.reject(item, QueuePushRejection::Closed);
                }
                // Observed since the hint was read: stamp this entry too,
                // reading the clock outside the lock (`reserved` is undone
                // if the clock panics). Stamping never stops.
                self.now()
            }
        };
        let mut tail = inner.tail.0.lock();
        let stripe = inner.pushing.enter();
        crate::loom::seq_cst_handshake();
        if self.refuses_under_tail() {
            inner.pushing.leave(stripe);
            drop(tail);
            self.wake_reader();
            drop(reserved);
            return self.reject(item, QueuePushRejection::Closed);
        }
        reserved.armed = false;
        self.enqueue(&mut tail, item, bytes, class, now);
        inner.pushing.leave(stripe);
        drop(tail);
        self.wake_reader();
        QueuePushOutcome::Enqueued
    }

    /// A push under both locks: the policies that look at the head first
    /// (`DropStale`, `CloseSlowConsumer`), coalescing, and pushes of a
    /// producer's permit (invariant 4).
    fn push_whole(&self, item: T, mut charge: Charge) -> QueuePushOutcome<T> {
        let inner = &*self.inner;
        // One clock read serves the age checks and the new entry's stamp,
        // taken only while something reads stamps (invariant 11). It comes
        // before the locks (not held across a user clock) and before the
        // reservation: a panicking user clock leaves nothing reserved.
        let mut now = self.stamping_hint().then(|| self.now());
        // Declared before the guards: dropped after the locks are released.
        let mut discarded = Discarded::new(&inner.budget.node);
        let policy = self.policy();
        let mut whole = self.whole();
        if now.is_none() && inner.stamping.load(Ordering::Relaxed) {
            // Observed since the hint was read: stamp this entry too,
            // reading the clock outside the locks (stamping stays on).
            drop(whole);
            now = Some(self.now());
            whole = self.whole();
        }
        // Unread only while no entry is stamped (invariant 11).
        let now = now.unwrap_or_default();
        // A closed budget refuses the reservation below (as `Closed`); the
        // policies that discard before reserving must not run on it.
        if inner.closed.load(Ordering::Acquire)
            || (matches!(
                policy,
                FullPolicy::DropStale | FullPolicy::CloseSlowConsumer
            ) && self.budget_closed())
        {
            return self.reject(item, QueuePushRejection::Closed);
        }
        let dropped = match policy {
            FullPolicy::DropStale => {
                let dropped = self.drop_stale(&mut whole.head, now, &mut discarded);
                // The fresh item may need the stale items' room: give it
                // back before reserving (invariant 5's exception).
                discarded.release_now();
                dropped
            }
            FullPolicy::CloseSlowConsumer if self.head_is_stale(&whole.head, now) => {
                self.close_slow_consumer(&mut whole.head, &mut discarded);
                return self.reject(item, QueuePushRejection::SlowConsumerClosed);
            }
            _ => 0,
        };
        let outcome = match charge.take(&inner.budget.node) {
            Ok(()) => {
                let (bytes, class) = charge.into_reserved();
                self.enqueue(&mut whole.tail, item, bytes, class, now);
                if dropped > 0 {
                    QueuePushOutcome::DroppedStale { dropped }
                } else {
                    QueuePushOutcome::Enqueued
                }
            }
            Err(rejection) => {
                if rejection.dimension() == Some(BudgetDimension::Rate) {
                    inner.stats.0.throttled.fetch_add(1, Ordering::Relaxed);
                }
                match policy {
                    // A full budget behind a closed gate refuses by
                    // capacity (gates are checked once the chain is
                    // reserved): closed is closed, whatever the policy.
                    _ if rejection.is_closed() || self.budget_closed() => {
                        self.reject(item, QueuePushRejection::Closed)
                    }
                    FullPolicy::CoalesceLatest
                        if self.coalescible(&rejection, charge.bytes(), charge.class()) =>
                    {
                        let replaced = self.discard_all(&mut whole.head, &mut discarded);
                        // The replacement takes the displaced items' room
                        // under these locks; they are dropped once it is
                        // queued and the locks released.
                        discarded.release_now();
                        inner.budget.record_coalesced(replaced as u64);
                        match charge.take(&inner.budget.node) {
                            Ok(()) => {
                                let (bytes, class) = charge.into_reserved();
                                self.enqueue(&mut whole.tail, item, bytes, class, now);
                                QueuePushOutcome::Coalesced { replaced }
                            }
                            Err(rejection) if rejection.is_closed() => {
                                self.reject(item, QueuePushRejection::Closed)
                            }
                            Err(rejection) => {
                                self.reject(item, QueuePushRejection::BudgetExhausted(rejection))
                            }
                        }
                    }
                    FullPolicy::CloseSlowConsumer => {
                        self.close_slow_consumer(&mut whole.head, &mut discarded);
                        self.reject(item, QueuePushRejection::SlowConsumerClosed)
                    }
                    _ => self.reject(item, QueuePushRejection::BudgetExhausted(rejection)),
                }
            }
        };
        drop(whole);
        if outcome.is_accepted() {
            self.wake_reader();
        }
        outcome
    }

    /// [`try_push`](Self::try_push) as data work.
    pub fn try_push_data(&self, item: T, retained_bytes: usize) -> QueuePushOutcome<T> {
        self.try_push(item, retained_bytes, BudgetClass::Data)
    }

    /// [`try_push`](Self::try_push) as control work.
    pub fn try_push_control(&self, item: T, retained_bytes: usize) -> QueuePushOutcome<T> {
        self.try_push(item, retained_bytes, BudgetClass::Control)
    }

    /// Pops the oldest item; its permit is released here.
    pub fn try_pop(&self) -> Option<T> {
        match self.pop_entry(false) {
            Popped::Entry(entry) => Some(self.released(entry)),
            Popped::Empty { .. } => None,
        }
    }

    /// Pops the oldest item with its permit still held.
    ///
    /// Its [`enqueued_at`](BudgetedItem::enqueued_at) is exact for items
    /// queued after the queue's ages were first observed: from its creation
    /// when the budget has a `max_age`, otherwise from its first
    /// `snapshot`, `try_pop_budgeted` or `recv_budgeted`. An item queued
    /// before that carries the time of that first observation.
    pub fn try_pop_budgeted(&self) -> Option<BudgetedItem<T>> {
        match self.pop_entry(true) {
            Popped::Entry(entry) => Some(self.budgeted(entry)),
            Popped::Empty { .. } => None,
        }
    }

    /// Removes the oldest entry (after dropping stale ones under
    /// `DropStale`); its reservation moves to the caller. `observe`: the
    /// caller reads the entry's stamp (stamping starts).
    fn pop_entry(&self, observe: bool) -> Popped<T> {
        let policy = self.policy();
        let aged = matches!(
            policy,
            FullPolicy::DropStale | FullPolicy::CloseSlowConsumer
        );
        if aged || (observe && !self.stamping_hint()) {
            return self.pop_whole(policy, observe);
        }
        let head = self.inner.head.0.lock();
        self.pop_locked(head)
    }

    /// The oldest entry, the head lock held (and released before the
    /// caller gives the entry's reservation back): the head's, else the
    /// oldest appended one (invariant 3); with none, whether the queue is
    /// closed and drained (invariant 8).
    fn pop_locked(&self, mut head: MutexGuard<'_, Side<T>>) -> Popped<T> {
        if let Some(entry) = head.pop_front() {
            return Popped::Entry(entry);
        }
        if let Some(entry) = self.inner.appended.pop() {
            return Popped::Entry(entry);
        }
        let closed = self.closed_and_drained();
        drop(head);
        Popped::Empty { closed }
    }

    /// A parked consumer's re-check (invariant 9): after counting itself
    /// in `readers_waiting`, it reads every push's in-flight count, so
    /// either a push that appended sees its count, or it sees the entry.
    fn pop_rechecked(&self, observe: bool) -> Popped<T> {
        crate::loom::fence(Ordering::SeqCst);
        let _ = self.inner.pushing.any();
        self.pop_entry(observe)
    }

    /// A pop under both locks: the age policies look at the head, and the
    /// first observation stamps every entry.
    fn pop_whole(&self, policy: FullPolicy, observe: bool) -> Popped<T> {
        // The user clock is read before the locks, as a push reads it.
        let now = self.now();
        // Declared before the guards: dropped after the locks are released.
        let mut discarded = Discarded::new(&self.inner.budget.node);
        let mut whole = self.whole();
        if observe {
            // A no-op when stamping had started (the hint was stale).
            self.start_stamping(&mut whole, now);
        }
        match policy {
            FullPolicy::DropStale => {
                self.drop_stale(&mut whole.head, now, &mut discarded);
            }
            // A stale head found by a pop closes the queue as one found by
            // a push does (invariant 12).
            FullPolicy::CloseSlowConsumer if self.head_is_stale(&whole.head, now) => {
                self.close_slow_consumer(&mut whole.head, &mut discarded);
                return Popped::Empty { closed: true };
            }
            _ => {}
        }
        match whole.head.pop_front() {
            Some(entry) => Popped::Entry(entry),
            None => Popped::Empty {
                closed: self.closed_and_drained(),
            },
        }
    }

    /// Gives a removed entry's reservation back and returns its item.
    fn released(&self, entry: Entry<T>) -> T {
        self.inner.budget.node.release(1, entry.bytes, entry.class);
        entry.item
    }

    /// Turns a removed entry's reservation into the item's permit.
    fn budgeted(&self, entry: Entry<T>) -> BudgetedItem<T> {
        BudgetedItem {
            item: entry.item,
            permit: ResourcePermit::from_reserved(
                Arc::clone(&self.inner.budget.node),
                entry.bytes,
                entry.class,
            ),
            enqueued_at: entry.enqueued_at,
        }
    }

    /// Waits for the oldest item (its permit released here); `None` once
    /// the queue is closed and drained. Takes a unit of Tokio's cooperative
    /// budget, as a channel's `recv` does (invariant 13).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: an item is removed only when it is returned.
    pub async fn recv(&self) -> Option<T> {
        self.recv_entry(false)
            .await
            .map(|entry| self.released(entry))
    }

    /// [`recv`](Self::recv) keeping the item's permit. Its first poll starts
    /// the queue's stamping, so items queued while it waits carry exact
    /// [`enqueued_at`](BudgetedItem::enqueued_at) times (see
    /// [`try_pop_budgeted`](Self::try_pop_budgeted)).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: an item is removed only when it is returned.
    pub async fn recv_budgeted(&self) -> Option<BudgetedItem<T>> {
        // Its first poll starts stamping (`pop_entry` observes even an empty
        // queue), so items pushed while it waits are stamped.
        self.recv_entry(true)
            .await
            .map(|entry| self.budgeted(entry))
    }

    /// Waits for the oldest entry; `None` once closed and drained. An entry
    /// is removed only in the poll that returns it. `observe`: as for
    /// [`pop_entry`](Self::pop_entry).
    async fn recv_entry(&self, observe: bool) -> Option<Entry<T>> {
        if observe && !self.stamping_hint() {
            // The first poll starts stamping, also when the task's budget
            // is spent: this one observing pop takes no budget.
            match self.pop_entry(true) {
                Popped::Entry(entry) => return Some(entry),
                Popped::Empty { closed: true } => return None,
                Popped::Empty { closed: false } => {}
            }
        }
        // Invariant 13.
        tokio::task::coop::consume_budget().await;
        // Fast path: no notification registration while items are queued.
        match self.pop_entry(observe) {
            Popped::Entry(entry) => return Some(entry),
            Popped::Empty { closed: true } => return None,
            Popped::Empty { closed: false } => {}
        }
        let _watch = Watch::new(&self.inner.wake.0.readers_waiting);
        let check = || match self.pop_rechecked(observe) {
            Popped::Entry(entry) => Some(Some(entry)),
            Popped::Empty { closed } => closed.then_some(None),
        };
        let readers = &self.inner.wake.0.readers;
        if self.inner.closable {
            // A dynamic key closing above the queue's budget closes the
            // queue without touching it: listen for that too.
            notified_by_either(readers, &self.inner.budget.node.tree.closed, check).await
        } else {
            notified(readers, check).await
        }
    }

    /// Removes (and releases) the items `keep` rejects, preserving order;
    /// returns how many. A panic in `keep` leaves every item not yet
    /// removed queued (with its charge) and is then resumed; removed items
    /// are dropped after the queue's locks are released.
    pub fn retain(&self, mut keep: impl FnMut(&T) -> bool) -> usize {
        // Declared before `removed`: while unwinding it is dropped after the
        // removed items, so their reservations still go back.
        let mut release = Release::new(&self.inner.budget.node);
        let mut whole = self.whole();
        let head = &mut *whole.head;
        let mut remaining = std::mem::take(&mut head.items);
        let mut kept = VecDeque::with_capacity(remaining.len());
        let mut removed = Vec::new();
        let mut panicked = None;
        while let Some(entry) = remaining.pop_front() {
            match catch_unwind(AssertUnwindSafe(|| keep(&entry.item))) {
                Ok(true) => kept.push_back(entry),
                Ok(false) => {
                    head.bytes -= entry.bytes;
                    release.add(entry.bytes, entry.class);
                    removed.push(entry.item);
                }
                Err(payload) => {
                    kept.push_back(entry);
                    kept.append(&mut remaining);
                    panicked = Some(payload);
                }
            }
        }
        head.items = kept;
        drop(whole);
        let count = removed.len();
        drop(removed);
        drop(release);
        if let Some(payload) = panicked {
            resume_unwind(payload);
        }
        count
    }

    /// Closes the queue: pushes are refused, accepted items still drain,
    /// producers and consumers are woken.
    pub fn close(&self) {
        let tail = self.inner.tail.0.lock();
        self.inner.closed.store(true, Ordering::SeqCst);
        crate::loom::seq_cst_handshake();
        drop(tail);
        self.wake_all();
    }

    /// Wakes one parked consumer, if any watches.
    fn wake_reader(&self) {
        // After the push's last in-flight count (invariant 9).
        crate::loom::seq_cst_handshake();
        if self.inner.wake.0.readers_waiting.load(Ordering::SeqCst) > 0 {
            self.inner.wake.0.readers.notify_one();
        }
    }

    fn wake_all(&self) {
        self.inner.wake.0.readers.notify_waiters();
        self.inner.budget.node.tree.released.notify_waiters();
    }

    /// True once closed: by [`close`](Self::close), by `CloseSlowConsumer`,
    /// or because the queue's budget is closed (a closed dynamic key at or
    /// above it).
    pub fn is_closed(&self) -> bool {
        self.refuses_under_tail()
    }

    /// Items queued.
    pub fn len(&self) -> usize {
        let head = self.inner.head.0.lock();
        head.items.len() + self.inner.appended.len()
    }

    /// Exports this queue's depth, refused pushes and discarded items to
    /// the owner's `/metrics` (`rocketmq_runtime_queue_depth`,
    /// `..._queue_refused_total`, `..._queue_dropped_total`) under the label
    /// `queue="<label>"`. Queues are not exported unless asked, and a label
    /// is a `&'static str` the application chose, so the series stay
    /// bounded and carry no name from data; queues sharing a label are
    /// summed. Reading the counts never starts the queue's age stamping.
    /// A queue leaves the export when its last handle is dropped. With the
    /// `metrics` feature.
    #[cfg(all(not(loom), feature = "metrics"))]
    pub fn export_metrics(&self, label: &'static str)
    where
        T: Send + 'static,
    {
        let queue: Arc<dyn QueueCounts> = self.inner.clone();
        self.inner
            .budget
            .node
            .tree
            .exported_queues
            .lock()
            .push(ExportedQueue {
                label,
                queue: Arc::downgrade(&queue),
            });
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Counters and contents.
    ///
    /// `oldest_age` is exact once the queue's ages are observed (see
    /// [`try_pop_budgeted`](Self::try_pop_budgeted)); the first observation
    /// counts the items already queued as queued at its own reading. Take a
    /// snapshot when the queue is created for exact ages from its first item.
    pub fn snapshot(&self) -> QueueSnapshot {
        let now = self.now();
        let inner = &*self.inner;
        let mut whole = self.whole();
        self.start_stamping(&mut whole, now);
        let budget = inner.budget.snapshot();
        let head = &whole.head;
        QueueSnapshot {
            path: Arc::clone(&budget.path),
            depth: head.items.len(),
            reserved_count: head.items.len(),
            retained_bytes: head.bytes,
            oldest_age: head
                .items
                .front()
                .map(|entry| now.saturating_sub(entry.enqueued_at)),
            throttled_count: inner.stats.0.throttled.load(Ordering::Relaxed),
            rejected_count: inner.stats.0.rejected.load(),
            dropped_count: budget.dropped_count,
            coalesced_count: budget.coalesced_count,
            closed_slow_consumer_count: budget.closed_slow_consumer_count,
            waiters: inner.stats.0.waiters.load(Ordering::SeqCst),
            wait_count: inner.stats.0.waited.load(Ordering::Relaxed),
            deadline_exceeded_count: inner.stats.0.deadline_exceeded.load(Ordering::Relaxed),
            closed: self.is_closed(),
        }
    }

    fn reject(&self, item: T, rejection: QueuePushRejection) -> QueuePushOutcome<T> {
        QueuePushOutcome::Rejected { item, rejection }
    }
}

#[cfg(all(not(loom), feature = "metrics"))]
impl<T: Send> QueueCounts for QueueInner<T> {
    fn counts(&self) -> (usize, u64, u64) {
        let depth = self.head.0.lock().items.len() + self.appended.len();
        let budget = self.budget.snapshot();
        (
            depth,
            self.stats.0.rejected.load(),
            budget.dropped_count + budget.coalesced_count,
        )
    }
}

impl<T> Drop for QueueInner<T> {
    /// The last handle is gone: the entries still queued give their
    /// reservations back once their items are dropped.
    fn drop(&mut self) {
        let mut items = {
            let mut head = self.head.0.lock();
            head.bytes = 0;
            std::mem::take(&mut head.items)
        };
        while let Some(entry) = self.appended.pop() {
            items.push_back(entry);
        }
        let release = Release::all(&self.budget.node, &items);
        drop(items);
        drop(release);
    }
}
