//! The values a queue hands back: push outcomes and refusals, a dequeued
//! item with its permit, and the queue's snapshot.

use std::fmt;
use std::time::Duration;

use crate::loom::Arc;
use crate::resource_budget::types::BudgetRejection;
use crate::resource_budget::ResourcePermit;

/// The answer to a push.
#[derive(Debug)]
#[must_use = "a rejected push hands the item back in the outcome: dropping it drops the item"]
pub enum QueuePushOutcome<T> {
    /// The item is queued.
    Enqueued,
    /// The item is queued after `replaced` queued items were discarded
    /// (`CoalesceLatest`).
    Coalesced {
        /// Items discarded.
        replaced: usize,
    },
    /// The item is queued after `dropped` stale items were discarded
    /// (`DropStale`).
    DroppedStale {
        /// Items discarded.
        dropped: usize,
    },
    /// The item was not queued; it is returned.
    Rejected {
        /// The item, unchanged.
        item: T,
        /// Why.
        rejection: QueuePushRejection,
    },
}

impl<T> QueuePushOutcome<T> {
    /// True unless the item was rejected.
    pub fn is_accepted(&self) -> bool {
        !matches!(self, Self::Rejected { .. })
    }
}

/// Why a push was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueuePushRejection {
    /// A budget level refused the item's reservation.
    BudgetExhausted(BudgetRejection),
    /// `push_until` reached its deadline.
    DeadlineExceeded,
    /// The queue is closed.
    Closed,
    /// The queue closed itself because its consumer fell behind
    /// (`CloseSlowConsumer`).
    SlowConsumerClosed,
}

/// The refusal of [`BudgetedQueue::try_push_budgeted`](crate::BudgetedQueue::try_push_budgeted) for a permit of
/// another budget tree: the item and the permit come back together, the
/// permit's charge unchanged.
pub struct ForeignPermit<T> {
    /// The item, unchanged.
    pub item: T,
    /// The permit, still charged where it was.
    pub permit: ResourcePermit,
}

impl<T> ForeignPermit<T> {
    /// The item, unchanged.
    pub fn item(&self) -> &T {
        &self.item
    }

    /// The permit, still charged where it was.
    pub fn permit(&self) -> &ResourcePermit {
        &self.permit
    }

    /// The item and the permit.
    pub fn into_parts(self) -> (T, ResourcePermit) {
        (self.item, self.permit)
    }
}

impl<T> fmt::Debug for ForeignPermit<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ForeignPermit")
            .field("permit", &self.permit)
            .finish_non_exhaustive()
    }
}

impl<T> fmt::Display for ForeignPermit<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "permit of budget `{}` belongs to another budget tree than the queue",
            self.permit.budget().path()
        )
    }
}

impl<T> std::error::Error for ForeignPermit<T> {}

/// A dequeued item that still holds its permit.
pub struct BudgetedItem<T> {
    pub(super) item: T,
    pub(super) permit: ResourcePermit,
    pub(super) enqueued_at: Duration,
}

impl<T> fmt::Debug for BudgetedItem<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BudgetedItem")
            .field("permit", &self.permit)
            .field("enqueued_at", &self.enqueued_at)
            .finish_non_exhaustive()
    }
}

impl<T> BudgetedItem<T> {
    /// The item; its permit is released.
    pub fn into_item(self) -> T {
        self.item
    }

    /// The item, its permit (the charge moves to the caller) and when it
    /// was queued (tree clock; see [`enqueued_at`](Self::enqueued_at)).
    pub fn into_parts(self) -> (T, ResourcePermit, Duration) {
        (self.item, self.permit, self.enqueued_at)
    }

    /// When the item was queued (tree clock). On a queue without `max_age`,
    /// an item queued before the queue's ages were first observed carries
    /// the time of that observation (see
    /// [`BudgetedQueue::try_pop_budgeted`](crate::BudgetedQueue::try_pop_budgeted)).
    pub fn enqueued_at(&self) -> Duration {
        self.enqueued_at
    }

    /// The bytes the item's permit retains.
    pub fn retained_bytes(&self) -> usize {
        self.permit.bytes()
    }
}

/// Counters and contents of a queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueSnapshot {
    /// The queue's budget path.
    pub path: Arc<str>,
    /// Items queued.
    pub depth: usize,
    /// Reservations held by queued items.
    pub reserved_count: usize,
    /// Bytes held by queued items.
    pub retained_bytes: usize,
    /// Age of the oldest queued item (exact once the queue's ages are
    /// observed: see [`BudgetedQueue::snapshot`](crate::BudgetedQueue::snapshot)).
    pub oldest_age: Option<Duration>,
    /// Pushes refused for a rate.
    pub throttled_count: u64,
    /// Pushes refused.
    pub rejected_count: u64,
    /// Items dropped as stale.
    pub dropped_count: u64,
    /// Items replaced by newer ones.
    pub coalesced_count: u64,
    /// Times the queue closed a slow consumer.
    pub closed_slow_consumer_count: u64,
    /// Producers waiting for capacity now.
    pub waiters: usize,
    /// Pushes that waited.
    pub wait_count: u64,
    /// Pushes that reached their deadline.
    pub deadline_exceeded_count: u64,
    /// True once closed.
    pub closed: bool,
}
