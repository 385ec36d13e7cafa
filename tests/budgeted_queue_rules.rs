//! `BudgetedQueue` rules (`src/resource_budget/queue.rs`, MIGRATION.md):
//! pushing under a permit the producer holds, queues closed by their
//! dynamic key, and a coalescing replacement admitted before the displaced
//! items are dropped.

mod support;

use std::sync::mpsc;
use std::time::Duration;

use rocketmq_runtime::{
    BudgetClass, BudgetLimit, BudgetedQueue, DynamicBudgetKey, FullPolicy, QueuePushOutcome,
    QueuePushRejection, ResourceBudget, ResourceBudgetTree,
};
use support::guard;
use tokio::time::Instant;

fn limit(count: usize, bytes: usize, policy: FullPolicy) -> BudgetLimit {
    BudgetLimit::new(count, bytes, policy)
}

fn tree() -> ResourceBudgetTree {
    ResourceBudgetTree::new("process", limit(100, 10_000, FullPolicy::Reject)).expect("valid")
}

fn counts(budget: &ResourceBudget) -> (usize, usize) {
    let snapshot = budget.snapshot();
    (snapshot.current_count, snapshot.current_bytes)
}

/// A producer that reserved before building its item queues it under that
/// permit: no second reservation anywhere, the permit's bytes are the
/// item's, and the charge is released at dequeue.
#[test]
fn a_budgeted_push_queues_under_the_producers_permit_without_a_second_reservation() {
    let tree = tree();
    let broker = tree
        .root()
        .child("broker", limit(10, 1_000, FullPolicy::Reject))
        .expect("fits");
    let budget = broker
        .child("queue", limit(2, 500, FullPolicy::Reject))
        .expect("fits");
    let queue = BudgetedQueue::new(budget.clone());
    // A permit of an ancestor moves down onto the queue's budget.
    let permit = broker.try_acquire_data(100).expect("fits");
    let outcome = queue.try_push_budgeted("a", permit).expect("same tree");
    assert!(matches!(outcome, QueuePushOutcome::Enqueued));
    // A permit of the queue's own budget is used as it is.
    let permit = budget.try_acquire_control(50).expect("fits");
    assert!(queue
        .try_push_budgeted("b", permit)
        .expect("same tree")
        .is_accepted());
    assert_eq!(counts(&tree.root()), (2, 150), "one reservation per item");
    assert_eq!((counts(&broker), counts(&budget)), ((2, 150), (2, 150)));
    assert_eq!(queue.snapshot().retained_bytes, 150);
    let item = queue.try_pop_budgeted().expect("queued");
    assert_eq!(item.retained_bytes(), 100);
    drop(item);
    let (item, permit, _) = queue.try_pop_budgeted().expect("queued").into_parts();
    assert_eq!((item, permit.class()), ("b", BudgetClass::Control));
    drop(permit);
    assert_eq!(counts(&tree.root()), (0, 0));
}

/// A permit of another tree comes back with its item, its charge
/// unchanged; a normal refusal returns the item and releases the permit.
#[test]
fn a_foreign_permit_is_handed_back_and_a_refused_permit_is_released() {
    let tree = tree();
    let budget = tree
        .root()
        .child("queue", limit(1, 100, FullPolicy::Reject))
        .expect("fits");
    let queue = BudgetedQueue::new(budget.clone());
    let other = ResourceBudgetTree::new("other", limit(10, 1_000, FullPolicy::Reject))
        .expect("valid")
        .root();
    let foreign = other.try_acquire_data(10).expect("fits");
    let refused = queue
        .try_push_budgeted(7_u32, foreign)
        .expect_err("another tree");
    let (item, permit) = refused.into_parts();
    assert_eq!((item, permit.bytes()), (7, 10));
    assert_eq!(counts(&other), (1, 10), "the charge is unchanged");
    assert!(queue.is_empty());
    drop(permit);

    assert!(queue.try_push_data(1, 10).is_accepted());
    let permit = tree.root().try_acquire_data(10).expect("the root has room");
    match queue.try_push_budgeted(2, permit).expect("same tree") {
        QueuePushOutcome::Rejected {
            item: 2,
            rejection: QueuePushRejection::BudgetExhausted(rejection),
        } => assert_eq!(rejection.exhausted_path(), "process/queue"),
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(
        counts(&tree.root()),
        (1, 10),
        "the refused permit is released"
    );
    assert_eq!(queue.snapshot().rejected_count, 1);
}

fn key_queue(policy: FullPolicy) -> (ResourceBudgetTree, DynamicBudgetKey, BudgetedQueue<u32>) {
    let tree = tree();
    let key = tree
        .root()
        .register_dynamic_child("tenant", limit(1, 100, policy))
        .expect("registered");
    // Built on a descendant of the key: closed with it.
    let queue = BudgetedQueue::new(
        key.budget()
            .child("requests", limit(1, 100, policy))
            .expect("fits"),
    );
    (tree, key, queue)
}

/// Closing a dynamic key closes the queues built under it: a waiting
/// producer and a waiting consumer wake at once (`Closed`, end of
/// stream), later pushes are refused as closed, and `is_closed` says so.
#[tokio::test(start_paused = true)]
async fn closing_a_dynamic_key_closes_its_queues_and_wakes_everyone() {
    let (_tree, key, queue) = key_queue(FullPolicy::WaitUntilDeadline);
    let consumer = tokio::spawn({
        let queue = queue.clone();
        async move { queue.recv().await }
    });
    tokio::task::yield_now().await;
    let (full_tree, full_key, full) = key_queue(FullPolicy::WaitUntilDeadline);
    assert!(full.try_push_data(1, 10).is_accepted());
    let started = Instant::now();
    let producer = tokio::spawn({
        let full = full.clone();
        async move {
            full.push_until(2, 10, BudgetClass::Data, started + Duration::from_secs(60))
                .await
        }
    });
    tokio::task::yield_now().await;
    assert_eq!(full.snapshot().waiters, 1);
    assert!(!queue.is_closed() && !full.is_closed());

    key.close();
    full_key.close();
    assert_eq!(guard("consumer", consumer).await.expect("joins"), None);
    assert!(matches!(
        guard("producer", producer).await.expect("joins"),
        QueuePushOutcome::Rejected {
            item: 2,
            rejection: QueuePushRejection::Closed
        }
    ));
    assert_eq!(Instant::now(), started, "nobody waited for a deadline");
    assert!(queue.is_closed() && full.is_closed());
    assert!(queue.snapshot().closed);
    assert!(matches!(
        queue.try_push_data(3, 10),
        QueuePushOutcome::Rejected {
            rejection: QueuePushRejection::Closed,
            ..
        }
    ));
    // Accepted work still drains, then the stream ends.
    assert_eq!(full.recv().await, Some(1));
    assert_eq!(full.recv().await, None);
    drop(full_tree);
}

/// An item whose destructor closes the queue's key.
#[derive(Debug)]
struct ClosesKeyOnDrop(DynamicBudgetKey);

impl Drop for ClosesKeyOnDrop {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// `CoalesceLatest` admits the replacement first and drops the displaced
/// items after the queue's lock is released: a destructor that closes the
/// key cannot turn the admitted replacement into a refusal.
#[test]
fn coalescing_admits_the_replacement_before_a_displaced_destructor_closes_the_key() {
    let tree = tree();
    let key = tree
        .root()
        .register_dynamic_child("tenant", limit(1, 100, FullPolicy::CoalesceLatest))
        .expect("registered");
    let queue = BudgetedQueue::new(key.budget());
    assert!(queue
        .try_push_data(ClosesKeyOnDrop(key.clone()), 10)
        .is_accepted());
    let outcome = queue.try_push_data(ClosesKeyOnDrop(key.clone()), 10);
    assert!(
        matches!(outcome, QueuePushOutcome::Coalesced { replaced: 1 }),
        "the replacement was refused: {outcome:?}"
    );
    assert!(key.is_closed(), "the displaced item's destructor ran");
    assert_eq!(queue.len(), 1, "the replacement is queued and drains");
    assert!(queue.try_pop().is_some());
    assert_eq!(counts(&tree.root()), (0, 0));
}

/// An item whose destructor reads its queue.
struct ReadsQueueOnDrop(Option<BudgetedQueue<ReadsQueueOnDrop>>, mpsc::Sender<usize>);

impl Drop for ReadsQueueOnDrop {
    fn drop(&mut self) {
        if let Some(queue) = self.0.take() {
            let _ = self.1.send(queue.len());
        }
    }
}

/// A displaced item's destructor may use the queue: it runs after the
/// queue's lock is released (it would deadlock under it) and sees the
/// replacement queued.
#[test]
fn a_displaced_destructor_may_use_the_queue() {
    let (seen_tx, seen_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel();
    // On its own thread: a deadlock fails the test instead of hanging it.
    std::thread::spawn(move || {
        let tree = tree();
        let queue = BudgetedQueue::new(
            tree.root()
                .child("queue", limit(1, 100, FullPolicy::CoalesceLatest))
                .expect("fits"),
        );
        let first = ReadsQueueOnDrop(Some(queue.clone()), seen_tx.clone());
        assert!(queue.try_push_data(first, 10).is_accepted());
        let outcome = queue.try_push_data(ReadsQueueOnDrop(None, seen_tx), 10);
        let _ = done_tx.send(matches!(
            outcome,
            QueuePushOutcome::Coalesced { replaced: 1 }
        ));
        drop(queue);
    });
    let coalesced = done_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the push returned (no deadlock)");
    assert!(coalesced);
    assert_eq!(seen_rx.recv().expect("destructor ran"), 1);
}

/// How many of `rounds` calls of `step` ran before a task spawned first
/// got its turn on the current-thread runtime (`rounds` if it never did).
async fn steps_before_a_neighbour_runs<F: std::future::Future<Output = ()>>(
    rounds: usize,
    mut step: impl FnMut() -> F,
) -> usize {
    let ran = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let neighbour = tokio::spawn({
        let ran = std::sync::Arc::clone(&ran);
        async move { ran.store(true, std::sync::atomic::Ordering::SeqCst) }
    });
    let mut steps = 0;
    while steps < rounds && !ran.load(std::sync::atomic::Ordering::SeqCst) {
        step().await;
        steps += 1;
    }
    neighbour.await.expect("neighbour");
    steps
}

/// `recv` takes a unit of Tokio's cooperative budget, as a channel's
/// `recv` does (`queue.rs`, invariant 13): a consumer whose queue never
/// runs dry still yields to the other tasks on its worker.
#[tokio::test(flavor = "current_thread")]
async fn recv_yields_to_its_worker() {
    let queue = BudgetedQueue::new(
        ResourceBudgetTree::new("queue", limit(10_000, 1 << 30, FullPolicy::Reject))
            .expect("valid")
            .root(),
    );
    for item in 0..1_000_u32 {
        assert!(queue.try_push_data(item, 1).is_accepted());
    }
    let steps = steps_before_a_neighbour_runs(1_000, || async {
        assert!(queue.recv().await.is_some());
    })
    .await;
    assert!(steps < 1_000, "recv never yielded in {steps} calls");
}

/// `push_until` takes a unit of Tokio's cooperative budget, as a channel's
/// `send` does (`waiting.rs`, invariant 7): a producer whose pushes never
/// wait still yields to the other tasks on its worker.
#[tokio::test(flavor = "current_thread")]
async fn push_until_yields_to_its_worker() {
    let queue = BudgetedQueue::new(
        ResourceBudgetTree::new(
            "queue",
            limit(10_000, 1 << 30, FullPolicy::WaitUntilDeadline),
        )
        .expect("valid")
        .root(),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let steps = steps_before_a_neighbour_runs(1_000, || async {
        let pushed = queue.push_until(0, 1, BudgetClass::Data, deadline).await;
        assert!(pushed.is_accepted());
    })
    .await;
    assert!(steps < 1_000, "push_until never yielded in {steps} calls");
}
