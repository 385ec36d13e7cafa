//! `push_until`: a push that waits for capacity until its deadline under
//! `FullPolicy::WaitUntilDeadline`, woken by releases anywhere in the tree
//! (through the tree's armed release notification) or by a close.
//!
//! Invariants:
//!
//! 1. A waiting producer registers on the tree's `released` notification,
//!    then arms `release_armed`, then re-checks by *reading* the chain's use
//!    (`Node::fits_now`), and tries only when the item fits or the queue or
//!    budget is closed. Nothing is reserved while it waits.
//! 2. It must not try on a visibly full chain: a refused reservation rolls
//!    back and wakes every armed waiter (another waiter may have parked on
//!    the transient use), so a waiter that tried there would wake itself
//!    forever. A retry that loses the room to another reservation yields and
//!    checks its deadline before it looks again.
//! 3. The price of waking on rollbacks: any refused reservation in the tree
//!    (a `Reject` push, a rate refusal) wakes every armed waiter, and with N
//!    waiters one freed slot can cost O(N²) wake-ups, each a read-only look.
//!    A release, in turn, wakes only when a waiter armed since the last wake
//!    (see `tree.rs`), so a parked producer costs one wake-up per wait, not
//!    one per release.
//! 4. A closed budget ends the wait: its capacity refusal is returned instead
//!    of waiting for room it would refuse again (the gates are checked only
//!    once the chain is reserved). An item that can never fit, or a rate
//!    refusal, is refused at once.
//! 5. Only the final outcome of the whole wait counts as a refusal; one timer
//!    serves the whole wait.
//! 6. Before it parks, a refused push counts itself as waiting and yields
//!    [`YIELDS_BEFORE_PARKING`] times, checking its deadline and trying
//!    again after each: with a consumer draining on another core, room is
//!    usually back by then and the push is queued without a registration,
//!    a timer or a wake-up (a parked producer costs one per wait). A push
//!    still refused parks as in 1.
//! 7. Every `push_until` takes one unit of the task's cooperative budget
//!    first (`tokio::task::consume_budget`), as Tokio's channels do: a
//!    producer whose pushes never wait still yields once its budget is
//!    spent, so a consumer on the same worker runs and the two do not
//!    trade every item across cores.

use tokio::time::Instant;

use super::{BudgetedQueue, Charge, QueuePushOutcome, QueuePushRejection};
use crate::loom::Ordering;
use crate::resource_budget::types::{BudgetClass, BudgetDimension, BudgetRejection, FullPolicy};
use crate::wait::Watch;

/// Yields a waiting push takes, trying again after each, before it
/// registers for a wake-up and a timer (invariant 6).
const YIELDS_BEFORE_PARKING: usize = 2;

impl<T> BudgetedQueue<T> {
    /// Pushes, waiting for count or byte capacity until `deadline` under
    /// `FullPolicy::WaitUntilDeadline` (woken by any release in the tree or
    /// by close); under any other policy this is [`try_push`](Self::try_push).
    /// An item that can never fit, or a rate exhaustion, is refused at once.
    /// The item is always returned when refused.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe for the item: dropping the future drops the item
    /// it holds. Nothing is reserved while it waits.
    pub async fn push_until(
        &self,
        item: T,
        retained_bytes: usize,
        class: BudgetClass,
        deadline: Instant,
    ) -> QueuePushOutcome<T> {
        // One unit of the task's cooperative budget, as Tokio's channels
        // take: a producer whose pushes never wait yields now and then
        // instead of holding its worker (invariant 7).
        tokio::task::consume_budget().await;
        if self.policy() != FullPolicy::WaitUntilDeadline {
            return self.try_push(item, retained_bytes, class);
        }
        // Fast path: no watcher registration while capacity is free. Only
        // the final outcome of the whole wait counts as a refusal.
        let mut item = match self.push_once(item, Charge::reserve(retained_bytes, class, true)) {
            QueuePushOutcome::Rejected {
                item,
                rejection: QueuePushRejection::BudgetExhausted(rejection),
            } if self.may_wait_for(&rejection, retained_bytes, class) => item,
            outcome => return self.counted(outcome),
        };
        let inner = &*self.inner;
        let tree = &inner.budget.node.tree;
        let _waiting = Watch::new(&inner.stats.0.waiters);
        let mut waited = false;
        for _ in 0..YIELDS_BEFORE_PARKING {
            tokio::task::yield_now().await;
            if Instant::now() >= deadline {
                return self.deadline_exceeded(item);
            }
            if !waited {
                waited = true;
                inner.stats.0.waited.fetch_add(1, Ordering::Relaxed);
            }
            match self.push_once(item, Charge::reserve(retained_bytes, class, false)) {
                QueuePushOutcome::Rejected {
                    item: returned,
                    rejection: QueuePushRejection::BudgetExhausted(rejection),
                } if self.may_wait_for(&rejection, retained_bytes, class) => item = returned,
                outcome => return self.counted(outcome),
            }
        }
        // One timer for the whole wait (registered on its first poll), not
        // one per wake-up.
        let expiry = tokio::time::sleep_until(deadline);
        tokio::pin!(expiry);
        loop {
            // Register and arm before looking again: a release (or a
            // refused reservation rolling back) after this point wakes the
            // wait.
            let released = tree.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            tree.arm_release_wake();
            // Look before trying: a refused try rolls its reservation back
            // and wakes the armed waiters, this one included, so trying
            // while the chain is visibly full would spin. A closed queue or
            // budget is tried at once, to return its refusal.
            if inner.budget.node.fits_now(retained_bytes, class) || self.is_closed() {
                match self.push_once(item, Charge::reserve(retained_bytes, class, false)) {
                    QueuePushOutcome::Rejected {
                        item: returned,
                        rejection: QueuePushRejection::BudgetExhausted(rejection),
                    } if self.may_wait_for(&rejection, retained_bytes, class) => {
                        // Another reservation took the room first. Let
                        // other tasks run (room freed and taken again and
                        // again must not hold this worker), then look again
                        // under a fresh registration, unless the deadline
                        // passed meanwhile.
                        item = returned;
                        tokio::task::yield_now().await;
                        if Instant::now() >= deadline {
                            return self.deadline_exceeded(item);
                        }
                        continue;
                    }
                    outcome => return self.counted(outcome),
                }
            }
            if !waited {
                waited = true;
                inner.stats.0.waited.fetch_add(1, Ordering::Relaxed);
            }
            tokio::select! {
                biased;
                () = &mut released => {}
                () = &mut expiry => return self.deadline_exceeded(item),
            }
        }
    }

    /// A waiting push's refusal at its deadline.
    fn deadline_exceeded(&self, item: T) -> QueuePushOutcome<T> {
        self.inner
            .stats
            .0
            .deadline_exceeded
            .fetch_add(1, Ordering::Relaxed);
        self.counted(self.reject(item, QueuePushRejection::DeadlineExceeded))
    }

    /// Whether a refused push may wait: count or bytes exhausted (not a
    /// rate, not a closed budget) and the item can ever fit.
    fn may_wait_for(&self, rejection: &BudgetRejection, bytes: usize, class: BudgetClass) -> bool {
        rejection
            .dimension()
            .is_some_and(|dimension| dimension != BudgetDimension::Rate)
            && self.inner.budget.node.could_fit(bytes, class)
            // A full budget behind a closed gate refuses by capacity (the
            // gates are checked only once the chain is reserved): closing
            // wakes the waiters, and this stops them waiting for capacity
            // that could only be refused again.
            && !self.budget_closed()
    }
}
