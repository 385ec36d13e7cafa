//! When a queue stamps its entries with the tree clock, and how stamps
//! follow queue order.
//!
//! Invariants:
//!
//! 1. Stamps are taken only once something can read them: from the queue's
//!    creation when its budget has a `max_age` (the age policies read the
//!    head's age at every push), otherwise from the queue's first age
//!    observation: a `snapshot` (`oldest_age`), a `try_pop_budgeted` or a
//!    `recv_budgeted` (`BudgetedItem::enqueued_at`). A queue whose ages
//!    nobody reads never reads the clock for its stamps. Where a clock read
//!    costs 25–35 ns (a virtual machine's `clock_gettime`), it is about a
//!    third of a push and pop.
//! 2. `QueueInner::stamping` is written only under both of the queue's
//!    locks and never goes back to false, so every queued entry is stamped exactly
//!    while it is set: the observation that sets it waits for the unstamped
//!    appends in flight (counted before they read the flag, queue
//!    invariant 8) and gives every entry then queued the reading it took
//!    just before the locks (an entry queued between that reading and the
//!    locks counts as slightly older). A push that read it as false and
//!    finds it true once counted stops counting, reads the clock and
//!    appends under the tail lock. A stamp's clock read is never taken
//!    under a lock (queue invariant 6).
//! 3. Before stamping starts, entries carry a zero stamp that nothing reads:
//!    no age check runs without a `max_age`, and every reader of a stamp
//!    starts stamping first.

use std::time::Duration;

use super::{BudgetedQueue, Entry, Tail, Whole};
use crate::loom::Ordering;
use crate::resource_budget::types::BudgetClass;

impl<T> BudgetedQueue<T> {
    /// Whether pushes stamp their entries, as read before taking the lock
    /// (confirmed under it).
    #[inline]
    pub(super) fn stamping_hint(&self) -> bool {
        self.inner.stamping.load(Ordering::Relaxed)
    }

    /// Starts stamping under both of the queue's locks (held through
    /// `whole`): the entries already queued take `now`, the reading of the
    /// observation that starts it.
    pub(super) fn start_stamping(&self, whole: &mut Whole<'_, T>, now: Duration) {
        if self.inner.stamping.load(Ordering::Relaxed) {
            return;
        }
        self.inner.stamping.store(true, Ordering::SeqCst);
        crate::loom::seq_cst_handshake();
        // Unstamped appends still in flight finish (no lock to wait for:
        // they hold none), then join the head and are stamped with the
        // rest (invariant 2).
        while self.inner.pushing.any() {
            crate::loom::yield_thread();
        }
        self.take_appended(&mut whole.head);
        for entry in &mut whole.head.items {
            entry.enqueued_at = now;
        }
        whole.tail.newest_stamp = whole.tail.newest_stamp.max(now);
    }

    /// Queues `item` with the reservation (`bytes` of `class`) its push
    /// just took, stamped `enqueued_at` (read before the lock and the
    /// reservation; zero while stamping has not started), or the newest
    /// queued stamp if that is later. The tail lock is held.
    pub(super) fn enqueue(
        &self,
        tail: &mut Tail,
        item: T,
        bytes: usize,
        class: BudgetClass,
        enqueued_at: Duration,
    ) {
        // The clock was read before the lock: a push that read it earlier
        // may get here later. Stamps stay ordered like the queue (the age
        // checks look at the head only).
        let enqueued_at = enqueued_at.max(tail.newest_stamp);
        tail.newest_stamp = enqueued_at;
        self.inner.appended.push(Entry {
            item,
            bytes,
            class,
            enqueued_at,
        });
    }
}
