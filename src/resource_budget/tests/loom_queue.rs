//! Loom model over the real queue: a push racing the observation that
//! starts the queue's stamping (`queue/stamps.rs`). Whatever the order of
//! the push's hint read, its lock and the observer's lock, the pushed entry
//! is stamped with a real clock reading, never the zero of an unstamped
//! entry. The model fails when a push that finds stamping started under the
//! lock does not read the clock.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --lib loom`

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use loom::thread;

use crate::resource_budget::{
    BudgetLimit, BudgetedQueue, FullPolicy, MonotonicClock, ResourceBudgetTree,
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
