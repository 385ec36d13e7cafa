//! Queue ages on paused Tokio time (the default tree clock): the age
//! policies and the age reports are exact, and a queue reads the clock only
//! once something reads its ages (`src/resource_budget/queue/stamps.rs`; a
//! push racing the first observation is the loom model
//! `loom_a_push_racing_the_first_observation_is_stamped`).
//!
//! Time line of the tests below (paused clock, `t` = tree clock):
//!
//! ```text
//! t:        0s        1s        2s        3s        4s        5s
//! DropStale max_age 2 s:
//!   push    a         b                   c (a is 3 s old, b 2 s: both dropped)
//! CloseSlowConsumer max_age 2 s (b at 2 s - 1 ns):
//!   push    a                   b c       (c: a is 2 s old, closed, c refused)
//! Reject, observed at 0s:
//!   push    a                   b         snapshot: oldest_age 3s
//! ```

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rocketmq_runtime::{
    BudgetLimit, BudgetedQueue, FullPolicy, MonotonicClock, QueuePushOutcome, QueuePushRejection,
    ResourceBudgetTree,
};
use tokio::time::advance;

const MAX_AGE: Duration = Duration::from_secs(2);

fn secs(secs: u64) -> Duration {
    Duration::from_secs(secs)
}

/// A queue of four items under a `process` root on the default clock.
fn queue(limit: BudgetLimit) -> (ResourceBudgetTree, BudgetedQueue<&'static str>) {
    let tree =
        ResourceBudgetTree::new("process", BudgetLimit::new(100, 10_000, FullPolicy::Reject))
            .expect("valid");
    let queue = BudgetedQueue::new(tree.root().child("queue", limit).expect("fits"));
    (tree, queue)
}

fn aged(policy: FullPolicy) -> BudgetLimit {
    BudgetLimit::new(4, 400, policy).with_max_age(MAX_AGE)
}

#[tokio::test(start_paused = true)]
async fn drop_stale_drops_at_max_age_exactly_without_an_observer() {
    let (tree, queue) = queue(aged(FullPolicy::DropStale));
    let start = tree.root().monotonic_now();
    assert!(queue.try_push_data("a", 10).is_accepted());
    advance(secs(1)).await;
    assert!(queue.try_push_data("b", 10).is_accepted());
    advance(secs(2)).await;
    // a is 3 s old, b exactly 2 s: both stale (age >= max_age).
    let outcome = queue.try_push_data("c", 10);
    assert!(
        matches!(outcome, QueuePushOutcome::DroppedStale { dropped: 2 }),
        "{outcome:?}"
    );
    let item = queue.try_pop_budgeted().expect("c stays");
    assert_eq!(item.enqueued_at() - start, secs(3), "c stamped when pushed");
    drop(item);
    assert!(queue.try_push_data("d", 10).is_accepted());
    advance(MAX_AGE - Duration::from_nanos(1)).await;
    assert_eq!(queue.try_pop(), Some("d"), "one nanosecond short of stale");
}

#[tokio::test(start_paused = true)]
async fn close_slow_consumer_closes_when_the_head_reaches_max_age() {
    let (_tree, queue) = queue(aged(FullPolicy::CloseSlowConsumer));
    assert!(queue.try_push_data("a", 10).is_accepted());
    advance(MAX_AGE - Duration::from_nanos(1)).await;
    assert!(queue.try_push_data("b", 10).is_accepted(), "a not yet slow");
    advance(Duration::from_nanos(1)).await;
    let outcome = queue.try_push_data("c", 10);
    assert!(
        matches!(
            outcome,
            QueuePushOutcome::Rejected {
                rejection: QueuePushRejection::SlowConsumerClosed,
                ..
            }
        ),
        "{outcome:?}"
    );
    assert!(queue.is_closed());
    assert_eq!(queue.len(), 0, "the slow consumer's items are dropped");
}

#[tokio::test(start_paused = true)]
async fn an_aged_queue_reports_exact_ages_from_its_first_item() {
    let (tree, queue) = queue(aged(FullPolicy::DropStale).with_max_age(secs(60)));
    let start = tree.root().monotonic_now();
    assert!(queue.try_push_data("a", 10).is_accepted());
    advance(secs(3)).await;
    assert_eq!(queue.snapshot().oldest_age, Some(secs(3)));
    let item = queue.try_pop_budgeted().expect("a");
    assert_eq!(item.enqueued_at(), start);
}

#[tokio::test(start_paused = true)]
async fn an_observed_queue_reports_exact_ages_and_stamps() {
    let (tree, queue) = queue(BudgetLimit::new(4, 400, FullPolicy::Reject));
    let start = tree.root().monotonic_now();
    assert_eq!(
        queue.snapshot().oldest_age,
        None,
        "observed before any push"
    );
    assert!(queue.try_push_data("a", 10).is_accepted());
    advance(secs(2)).await;
    assert!(queue.try_push_data("b", 10).is_accepted());
    advance(secs(1)).await;
    assert_eq!(queue.snapshot().oldest_age, Some(secs(3)));
    let stamps: Vec<Duration> = std::iter::from_fn(|| queue.try_pop_budgeted())
        .map(|item| item.enqueued_at() - start)
        .collect();
    assert_eq!(stamps, [secs(0), secs(2)]);
}

/// A consumer waiting in `recv_budgeted` observes the queue: the items
/// pushed while it waits carry their exact push times.
#[tokio::test(start_paused = true)]
async fn a_waiting_budgeted_consumer_gets_exact_push_times() {
    let (tree, queue) = queue(BudgetLimit::new(4, 400, FullPolicy::Reject));
    let start = tree.root().monotonic_now();
    let consumer = tokio::spawn({
        let queue = queue.clone();
        async move {
            let mut stamps = Vec::new();
            while let Some(item) = queue.recv_budgeted().await {
                stamps.push(item.enqueued_at());
            }
            stamps
        }
    });
    tokio::task::yield_now().await; // the consumer parks
    advance(secs(1)).await;
    assert!(queue.try_push_data("a", 10).is_accepted());
    advance(secs(4)).await;
    assert!(queue.try_push_data("b", 10).is_accepted());
    queue.close();
    let stamps = support::guard("the budgeted consumer", consumer)
        .await
        .expect("consumer");
    assert_eq!(stamps, [start + secs(1), start + secs(5)]);
}

/// The documented edge: items queued before a queue without `max_age` is
/// first observed carry the time of that observation; later items their
/// own push time.
#[tokio::test(start_paused = true)]
async fn items_queued_before_the_first_observation_carry_its_time() {
    let (tree, queue) = queue(BudgetLimit::new(4, 400, FullPolicy::Reject));
    let start = tree.root().monotonic_now();
    assert!(queue.try_push_data("early", 10).is_accepted());
    advance(secs(2)).await;
    let early = queue.try_pop_budgeted().expect("early");
    assert_eq!(
        early.enqueued_at(),
        start + secs(2),
        "the observation's time"
    );
    advance(secs(1)).await;
    assert!(queue.try_push_data("late", 10).is_accepted());
    advance(secs(1)).await;
    assert_eq!(queue.snapshot().oldest_age, Some(secs(1)));
    let late = queue.try_pop_budgeted().expect("late");
    assert_eq!(late.enqueued_at(), start + secs(3), "its own push time");
}

/// A clock that counts its reads (each read returns the count).
#[derive(Default)]
struct CountingClock(AtomicU64);

impl MonotonicClock for CountingClock {
    fn now(&self) -> Duration {
        Duration::from_nanos(self.0.fetch_add(1, Ordering::SeqCst) + 1)
    }
}

/// A queue nobody observes reads the clock for no push and no pop; once
/// observed, every push reads it once.
#[test]
fn an_unobserved_queue_never_reads_the_clock() {
    let clock = Arc::new(CountingClock::default());
    let tree = ResourceBudgetTree::with_clock(
        "process",
        BudgetLimit::new(100, 10_000, FullPolicy::Reject),
        clock.clone(),
    )
    .expect("valid");
    let queue = BudgetedQueue::new(
        tree.root()
            .child("queue", BudgetLimit::new(4, 400, FullPolicy::Reject))
            .expect("fits"),
    );
    let reads = || clock.0.load(Ordering::SeqCst);
    for item in 0..100 {
        assert!(queue.try_push_data(item, 10).is_accepted());
        assert_eq!(queue.try_pop(), Some(item));
    }
    assert_eq!(reads(), 0, "no age reader, no clock read");
    let _ = queue.snapshot();
    assert_eq!(reads(), 1);
    for item in 0..10 {
        assert!(queue.try_push_data(item, 10).is_accepted());
        assert_eq!(queue.try_pop(), Some(item));
    }
    assert_eq!(reads(), 11, "one read per push once observed");
}

/// `DropStale` at capacity (`src/resource_budget/queue.rs`, invariant 4): a
/// push that drops the stale head is admitted in its room (the stale items'
/// reservations go back before the push reserves), so the fresh item is
/// never refused for the room the stale ones held.
#[tokio::test(start_paused = true)]
async fn drop_stale_at_capacity_admits_the_fresh_item() {
    let (tree, queue) =
        queue(BudgetLimit::new(2, 400, FullPolicy::DropStale).with_max_age(MAX_AGE));
    assert!(queue.try_push_data("a", 10).is_accepted());
    assert!(queue.try_push_data("b", 10).is_accepted());
    advance(MAX_AGE).await;
    let outcome = queue.try_push_data("c", 10);
    assert!(
        matches!(outcome, QueuePushOutcome::DroppedStale { dropped: 2 }),
        "{outcome:?}"
    );
    assert_eq!(queue.try_pop(), Some("c"));
    assert_eq!(
        tree.root().snapshot().current_count,
        0,
        "every reservation back"
    );
}

/// `CloseSlowConsumer` on a pop (`src/resource_budget/queue.rs`,
/// invariant 11): a consumer that finds the head at `max_age` closes the
/// queue (its items dropped, waiters woken) and gets nothing.
#[tokio::test(start_paused = true)]
async fn close_slow_consumer_closes_when_a_pop_finds_a_stale_head() {
    let (tree, queue) = queue(aged(FullPolicy::CloseSlowConsumer));
    assert!(queue.try_push_data("a", 10).is_accepted());
    assert!(queue.try_push_data("b", 10).is_accepted());
    advance(MAX_AGE).await;
    assert_eq!(queue.try_pop(), None, "the stale head is not handed out");
    assert!(queue.is_closed());
    assert_eq!(queue.len(), 0, "the slow consumer's items are dropped");
    let snapshot = queue.snapshot();
    assert_eq!(snapshot.closed_slow_consumer_count, 1);
    assert_eq!(snapshot.dropped_count, 2);
    assert_eq!(tree.root().snapshot().current_count, 0);
    assert_eq!(
        queue.recv().await,
        None,
        "a closed, drained queue ends recv"
    );
}
