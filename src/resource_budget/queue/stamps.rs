//! When a queue stamps its entries with the tree clock.
//!
//! Invariants:
//!
//! 1. Stamps are taken only once something can read them: from the queue's
//!    creation when its budget has a `max_age` (the age policies read the
//!    head's age at every push), otherwise from the queue's first age
//!    observation: a `snapshot` (`oldest_age`), a `try_pop_budgeted` or a
//!    `recv_budgeted` (`BudgetedItem::enqueued_at`). A queue whose ages
//!    nobody reads never reads the clock. Where one clock read costs about
//!    as much as the rest of a push and a pop together (a virtual machine's
//!    `clock_gettime`), that read was the largest part of both.
//! 2. `QueueInner::stamping` is written only under the queue's lock and
//!    never goes back to false, so every queued entry is stamped exactly
//!    while it is set: the observation that sets it gives the entries
//!    already queued its own reading (they were queued no later), and a
//!    push that read it as false before the lock and finds it true under
//!    the lock releases the lock, reads the clock and takes the lock again.
//!    The clock is never read under the lock (queue invariant 5).
//! 3. Before stamping starts, entries carry a zero stamp that nothing reads:
//!    no age check runs without a `max_age`, and every reader of a stamp
//!    starts stamping first.

use std::time::Duration;

use super::{BudgetedQueue, QueueState};
use crate::loom::Ordering;

impl<T> BudgetedQueue<T> {
    /// Whether pushes stamp their entries, as read before taking the lock
    /// (confirmed under it).
    #[inline]
    pub(super) fn stamping_hint(&self) -> bool {
        self.inner.stamping.load(Ordering::Relaxed)
    }

    /// Starts stamping under the queue's lock (held through `state`): the
    /// entries already queued take `now`, the reading of the observation
    /// that starts it.
    pub(super) fn start_stamping(&self, state: &mut QueueState<T>, now: Duration) {
        if self.inner.stamping.load(Ordering::Relaxed) {
            return;
        }
        for entry in &mut state.items {
            entry.enqueued_at = now;
        }
        self.inner.stamping.store(true, Ordering::Relaxed);
    }

    /// Starts stamping if it has not started (the clock is read before the
    /// lock is taken).
    pub(super) fn observe_stamps(&self) {
        if !self.stamping_hint() {
            let now = self.now();
            self.start_stamping(&mut self.inner.state.lock(), now);
        }
    }
}
