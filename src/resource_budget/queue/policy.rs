//! What the full policies do to the queued items under both of the queue's
//! locks (the tail moved behind the head, so `head` holds every entry):
//! drop the stale head (`DropStale`), replace the queued state
//! (`CoalesceLatest`), close a slow consumer (`CloseSlowConsumer`). The
//! discarded items go to a [`Discarded`] list, dropped after the locks.

use std::time::Duration;

use super::charge::Discarded;
use super::{BudgetedQueue, Side};
use crate::loom::Ordering;
use crate::resource_budget::types::{BudgetClass, BudgetDimension, BudgetRejection};

impl<T> BudgetedQueue<T> {
    /// Whether the oldest item is at least `max_age` old at `now`.
    pub(super) fn head_is_stale(&self, state: &Side<T>, now: Duration) -> bool {
        let Some(max_age) = self.inner.budget.limit().max_age else {
            return false;
        };
        state
            .items
            .front()
            .is_some_and(|entry| now.saturating_sub(entry.enqueued_at) >= max_age)
    }

    /// Moves the items stale at `now` from the head to `discarded`;
    /// returns how many.
    pub(super) fn drop_stale(
        &self,
        state: &mut Side<T>,
        now: Duration,
        discarded: &mut Discarded<'_, T>,
    ) -> usize {
        let mut dropped = 0;
        while self.head_is_stale(state, now) {
            if let Some(entry) = state.pop_front() {
                discarded.push(entry);
                dropped += 1;
            }
        }
        if dropped > 0 {
            self.inner.budget.record_dropped(dropped as u64);
        }
        dropped
    }

    /// Whether `CoalesceLatest` may replace the queued state: the queue's
    /// own level is exhausted in count or bytes and the item fits its class.
    pub(super) fn coalescible(
        &self,
        rejection: &BudgetRejection,
        bytes: usize,
        class: BudgetClass,
    ) -> bool {
        rejection.exhausted_path() == self.inner.budget.path()
            && matches!(
                rejection.dimension(),
                Some(BudgetDimension::Count | BudgetDimension::Bytes)
            )
            && self.inner.budget.node.could_fit(bytes, class)
    }

    /// Moves every queued item to `discarded`; returns how many.
    pub(super) fn discard_all(
        &self,
        state: &mut Side<T>,
        discarded: &mut Discarded<'_, T>,
    ) -> usize {
        let replaced = state.items.len();
        state.bytes = 0;
        for entry in state.items.drain(..) {
            discarded.push(entry);
        }
        replaced
    }

    pub(super) fn close_slow_consumer(
        &self,
        state: &mut Side<T>,
        discarded: &mut Discarded<'_, T>,
    ) {
        // Both locks are held (the closed flag is set under the tail's).
        // Only pushes under these locks reach a `CloseSlowConsumer` queue,
        // so none is appending meanwhile.
        self.inner.closed.store(true, Ordering::SeqCst);
        crate::loom::seq_cst_handshake();
        let dropped = self.discard_all(state, discarded);
        self.inner.budget.record_dropped(dropped as u64);
        self.inner.budget.record_slow_consumer_closed();
        self.wake_all();
    }
}
