//! Loom models over the real queue (`queue.rs`, `queue/stamps.rs`):
//!
//! - a push racing the observation that starts the queue's stamping:
//!   whatever the order of the push's hint read, its lock and the
//!   observer's lock, the pushed entry is stamped with a real clock
//!   reading, never the zero of an unstamped entry (fails when the
//!   observation does not wait for the unstamped appends in flight);
//! - a push that reserved and appends without a lock racing a close, while
//!   a consumer drains with `recv`: every accepted item is received before
//!   the stream ends, nothing stays reserved, and the parked consumer is
//!   woken (queue invariants 4, 8 and 9: fails when a consumer decides
//!   "closed and drained" without waiting for pushes in flight, and
//!   deadlocks when a push reads the waiting readers before its last
//!   in-flight count is ordered);
//! - a pop that releases after its lock racing a push at capacity: the
//!   queue never holds more entries than its budget admits, and the budget
//!   ends equal to what is queued (invariant 1: fails when the reservation
//!   goes back before the entry leaves the queue).
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --lib loom`

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use loom::thread;

use crate::resource_budget::{
    BudgetLimit, BudgetedQueue, FullPolicy, MonotonicClock, QueuePushOutcome, QueuePushRejection,
    ResourceBudgetTree,
};

/// Every read returns a later time than the one before, never zero.
#[derive(Default)]
struct CountingClock(AtomicU64);

impl MonotonicClock for CountingClock {
    fn now(&self) -> Duration {
        Duration::from_nanos(self.0.fetch_add(1, Ordering::Relaxed) + 1)
    }
}

#[cfg_attr(test, test)]
pub fn loom_a_push_racing_the_first_observation_is_stamped() {
    loom::model(|| {
        let tree = ResourceBudgetTree::with_clock(
            "process",
            BudgetLimit::new(4, 100, FullPolicy::Reject),
            Arc::new(CountingClock::default()),
        )
        .expect("valid");
        let queue = BudgetedQueue::new(
            tree.root()
                .child("queue", BudgetLimit::new(4, 100, FullPolicy::Reject))
                .expect("fits"),
        );
        let producer = thread::spawn({
            let queue = queue.clone();
            move || assert!(queue.try_push_data(1_u32, 10).is_accepted())
        });
        let _ = queue.snapshot();
        producer.join().expect("producer");
        let item = queue.try_pop_budgeted().expect("pushed");
        assert!(!item.enqueued_at().is_zero(), "unstamped entry");
    });
}

/// A queue of `slots` items under a `process` root.
fn queue(slots: usize) -> (ResourceBudgetTree, BudgetedQueue<u32>) {
    let tree = ResourceBudgetTree::new("process", BudgetLimit::new(8, 1_000, FullPolicy::Reject))
        .expect("valid");
    let queue = BudgetedQueue::new(
        tree.root()
            .child("queue", BudgetLimit::new(slots, 100, FullPolicy::Reject))
            .expect("fits"),
    );
    (tree, queue)
}

#[cfg_attr(test, test)]
pub fn loom_an_accepted_push_racing_a_close_reaches_the_consumer() {
    loom::model(|| {
        let (tree, queue) = queue(2);
        assert!(queue.try_push_data(1, 10).is_accepted());
        let producer = thread::spawn({
            let queue = queue.clone();
            move || match queue.try_push_data(2, 10) {
                QueuePushOutcome::Enqueued => true,
                QueuePushOutcome::Rejected {
                    rejection: QueuePushRejection::Closed,
                    ..
                } => false,
                outcome => panic!("neither queued nor refused as closed: {outcome:?}"),
            }
        });
        let closer = thread::spawn({
            let queue = queue.clone();
            move || queue.close()
        });
        let received = loom::future::block_on(async {
            let mut received = Vec::new();
            while let Some(item) = queue.recv().await {
                received.push(item);
            }
            received
        });
        let accepted = producer.join().expect("producer");
        closer.join().expect("closer");
        let expected: Vec<u32> = if accepted { vec![1, 2] } else { vec![1] };
        assert_eq!(received, expected, "an accepted item was left behind");
        assert!(queue.is_empty());
        assert_eq!(
            tree.root().snapshot().current_count,
            0,
            "a reservation stayed"
        );
    });
}

#[cfg_attr(test, test)]
pub fn loom_a_pop_releasing_after_its_lock_never_lets_a_push_past_capacity() {
    loom::model(|| {
        let (tree, queue) = queue(1);
        assert!(queue.try_push_data(1, 10).is_accepted());
        let consumer = thread::spawn({
            let queue = queue.clone();
            move || queue.try_pop()
        });
        let pushed = queue.try_push_data(2, 10).is_accepted();
        assert!(
            queue.len() <= 1,
            "the queue holds more than its budget admits"
        );
        assert_eq!(consumer.join().expect("consumer"), Some(1));
        assert_eq!(queue.len(), usize::from(pushed));
        assert_eq!(tree.root().snapshot().current_count, queue.len());
    });
}
