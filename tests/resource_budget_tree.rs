//! Resource budgets (`src/resource_budget/tree.rs`, `budget.rs`,
//! `dynamic.rs` and `queue.rs`): ancestor limits, reserve-and-rollback,
//! control reserves, resize and rebind, dynamic keys and every queue policy
//! under 2× overload.

mod support;

use std::sync::{Arc, Barrier};
use std::time::Duration;

use rocketmq_runtime::{
    BudgetCapacity, BudgetClass, BudgetDimension, BudgetLimit, BudgetedQueue,
    DynamicKeyAdmissionRejection, DynamicKeyRegistrationFailure, FullPolicy, MonotonicClock,
    PermitRebindOutcome, QueuePushOutcome, QueuePushRejection, RateLimit, ResourceBudget,
    ResourceBudgetTree, ResourcePermit, RuntimeContractViolation,
};
use support::guard;
use tokio::time::Instant;

fn limit(count: usize, bytes: usize) -> BudgetLimit {
    BudgetLimit::new(count, bytes, FullPolicy::Reject)
}

fn tree(count: usize, bytes: usize) -> ResourceBudgetTree {
    ResourceBudgetTree::new("process", limit(count, bytes)).expect("valid")
}

fn counts(budget: &ResourceBudget) -> (usize, usize) {
    let snapshot = budget.snapshot();
    (snapshot.current_count, snapshot.current_bytes)
}

/// A seeded randomized mix over a 3-level tree from several threads: no
/// level ever exceeds its limits, a rejection leaves the levels unchanged
/// (checked through the totals), and every counter returns to zero.
#[test]
fn random_operations_never_exceed_any_level_and_return_to_zero() {
    const THREADS: usize = 4;
    const OPERATIONS: usize = 2_500; // per thread: 10,000 in all
    let tree = tree(64, 64 * 1024);
    let root = tree.root();
    let mid = root.child("broker", limit(40, 40 * 1024)).expect("fits");
    let leaves: Vec<ResourceBudget> = (0..3)
        .map(|i| {
            mid.child(format!("queue-{i}"), limit(16, 16 * 1024))
                .expect("fits")
        })
        .collect();
    let levels: Vec<ResourceBudget> = std::iter::once(root.clone())
        .chain(std::iter::once(mid.clone()))
        .chain(leaves.iter().cloned())
        .collect();
    let start = Arc::new(Barrier::new(THREADS));
    let threads: Vec<_> = (0..THREADS)
        .map(|thread| {
            let leaves = leaves.clone();
            let levels = levels.clone();
            let start = Arc::clone(&start);
            std::thread::spawn(move || {
                let mut seed = 0x2545_F491_4F6C_DD1D_u64 ^ thread as u64;
                let mut next = move || {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed
                };
                let mut held: Vec<ResourcePermit> = Vec::new();
                start.wait();
                for _ in 0..OPERATIONS {
                    match next() % 4 {
                        0 | 1 => {
                            let leaf = &leaves[(next() % 3) as usize];
                            let bytes = (next() % 3_000) as usize;
                            if let Ok(permit) = leaf.try_acquire_data(bytes) {
                                held.push(permit);
                            }
                        }
                        2 if !held.is_empty() => {
                            let index = (next() as usize) % held.len();
                            drop(held.swap_remove(index));
                        }
                        _ if !held.is_empty() => {
                            let index = (next() as usize) % held.len();
                            let _ = held[index].try_resize((next() % 4_000) as usize);
                        }
                        _ => {}
                    }
                    for level in &levels {
                        let snapshot = level.snapshot();
                        let capacity = level.limit().capacity;
                        assert!(snapshot.current_count <= capacity.count, "{}", level.path());
                        assert!(snapshot.current_bytes <= capacity.bytes, "{}", level.path());
                    }
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("no limit exceeded");
    }
    for level in &levels {
        assert_eq!(counts(level), (0, 0), "{} returns to zero", level.path());
        let snapshot = level.snapshot();
        assert_eq!(snapshot.admitted_count, snapshot.released_count);
    }
    assert!(
        root.snapshot().admitted_count > 1_000,
        "the mix admitted work"
    );
}

#[test]
fn a_rejection_names_the_exhausted_level_and_leaves_every_level_unchanged() {
    let tree = tree(10, 1_000);
    let broker = tree.root().child("broker", limit(10, 500)).expect("fits");
    let queue = broker.child("queue", limit(10, 500)).expect("fits");
    let _held = queue.try_acquire_data(400).expect("fits");
    let admissions = |budget: &ResourceBudget| {
        let snapshot = budget.snapshot();
        (snapshot.admitted_count, snapshot.released_count)
    };
    let before = [counts(&tree.root()), counts(&broker), counts(&queue)];
    let admitted_before = [admissions(&tree.root()), admissions(&broker)];
    assert_eq!(admitted_before, [(1, 0), (1, 0)]);
    let rejection = queue
        .try_acquire_data(200)
        .expect_err("broker bytes exhausted");
    assert_eq!(rejection.path(), "process/broker/queue");
    assert_eq!(rejection.exhausted_path(), "process/broker");
    assert_eq!(rejection.dimension(), Some(BudgetDimension::Bytes));
    assert!(!rejection.is_closed());
    assert_eq!(
        [counts(&tree.root()), counts(&broker), counts(&queue)],
        before,
        "rolled back everywhere"
    );
    // The root admitted the refused request before the broker refused it;
    // the rollback counts as neither an admission nor a release.
    assert_eq!(
        [admissions(&tree.root()), admissions(&broker)],
        admitted_before
    );
    assert_eq!(broker.snapshot().rejected_count, 1);
}

#[test]
fn limit_validation() {
    use RuntimeContractViolation as V;
    let root = tree(10, 100).root();
    assert_eq!(
        ResourceBudgetTree::new("  ", limit(1, 1)).expect_err("empty"),
        V::EmptyBudgetName
    );
    assert_eq!(
        ResourceBudgetTree::new("a/b", limit(1, 1)).expect_err("slash"),
        V::InvalidBudgetName
    );
    assert_eq!(
        root.child("zero", limit(0, 1)).expect_err("zero count"),
        V::ZeroBudgetCapacity {
            dimension: BudgetDimension::Count
        }
    );
    assert_eq!(
        root.child("big", limit(11, 1)).expect_err("exceeds"),
        V::ChildBudgetExceedsParent {
            dimension: BudgetDimension::Count
        }
    );
    assert_eq!(
        root.child(
            "reserve",
            limit(5, 50).with_control_reserve(BudgetCapacity::new(6, 0))
        )
        .expect_err("reserve too big"),
        V::ReserveExceedsBudgetCapacity {
            dimension: BudgetDimension::Count
        }
    );
    assert_eq!(
        root.child(
            "rate-reserve",
            limit(5, 50)
                .with_control_reserve(BudgetCapacity::new(0, 0).with_rate(RateLimit::new(1, 1)))
        )
        .expect_err("no rate to reserve from"),
        V::ReserveWithoutBudgetCapacity {
            dimension: BudgetDimension::Rate
        }
    );
    assert_eq!(
        root.child("age", limit(1, 1).with_max_age(Duration::ZERO))
            .expect_err("zero age"),
        V::ZeroBudgetMaxAge
    );
    let rated = ResourceBudgetTree::new("rated", limit(10, 100).with_rate(RateLimit::new(10, 5)))
        .expect("valid")
        .root();
    assert_eq!(
        rated
            .child("unrated", limit(1, 1))
            .expect_err("no rate under a rated parent"),
        V::ChildBudgetExceedsParent {
            dimension: BudgetDimension::Rate
        }
    );
}

#[test]
fn control_reserve_is_kept_from_data_work() {
    let root = ResourceBudgetTree::new(
        "process",
        limit(10, 1_000).with_control_reserve(BudgetCapacity::new(2, 200)),
    )
    .expect("valid")
    .root();
    let mut data: Vec<_> = (0..8)
        .map(|_| root.try_acquire_data(10).expect("data fits"))
        .collect();
    let rejection = root
        .try_acquire_data(10)
        .expect_err("capacity − reserve reached");
    assert_eq!(rejection.dimension(), Some(BudgetDimension::Count));
    let control: Vec<_> = (0..2)
        .map(|_| {
            root.try_acquire_control(10)
                .expect("control uses the reserve")
        })
        .collect();
    assert!(root.try_acquire_control(10).is_err(), "capacity reached");
    drop(control);
    // Promotion frees the data share without changing the totals.
    let mut promoted = data.pop().expect("a permit");
    promoted.promote_to_control();
    assert_eq!(promoted.class(), BudgetClass::Control);
    assert_eq!(counts(&root).0, 8);
    let _one_more = root.try_acquire_data(10).expect("a data slot was freed");
    drop((data, promoted));
}

/// A refusal is counted in `rejected_count` of the budget the request was
/// made on and of the level that ran out; the levels in between and above
/// do not count it.
#[test]
fn a_refusal_counts_on_the_requesting_budget_and_the_exhausted_level() {
    let tree = tree(10, 1_000);
    let broker = tree.root().child("broker", limit(10, 500)).expect("fits");
    let topic = broker.child("topic", limit(10, 500)).expect("fits");
    let queue = topic.child("queue", limit(1, 500)).expect("fits");
    let _held = broker.try_acquire_data(450).expect("fits");
    let rejection = queue.try_acquire_data(100).expect_err("broker bytes");
    assert_eq!(rejection.exhausted_path(), "process/broker");
    let rejected = |budget: &ResourceBudget| budget.snapshot().rejected_count;
    assert_eq!(
        [
            rejected(&tree.root()),
            rejected(&broker),
            rejected(&topic),
            rejected(&queue)
        ],
        [0, 1, 0, 1]
    );
    // Refused at the requesting level itself: counted once.
    let _more = queue.try_acquire_data(40).expect("fits");
    let rejection = queue.try_acquire_data(5).expect_err("queue count");
    assert_eq!(rejection.exhausted_path(), "process/broker/topic/queue");
    assert_eq!((rejected(&queue), rejected(&broker)), (2, 1));
}

/// Rebinding a permit onto its own budget checks that budget like any
/// target: once its dynamic key is closed the rebind is refused as closed
/// (while open it is `Unchanged`).
#[test]
fn rebinding_onto_its_own_closed_budget_is_refused_as_closed() {
    let (_tree, tenants) = tenants();
    let key = tenants
        .register_dynamic_child("t1", limit(10, 1_000))
        .expect("registered");
    let budget = key.budget();
    let mut permit = budget.try_acquire_data(10).expect("fits");
    assert_eq!(
        permit.try_rebind(&budget).expect("same tree"),
        PermitRebindOutcome::Unchanged
    );
    key.close();
    match permit.try_rebind(&budget).expect("same tree") {
        PermitRebindOutcome::Rejected(rejection) => assert!(rejection.is_closed()),
        other => panic!("a closed budget took the permit: {other:?}"),
    }
    assert_eq!(counts(&budget), (1, 10), "the permit is unchanged");
}

#[test]
fn resize_and_rebind() {
    let tree = tree(10, 1_000);
    let broker = tree.root().child("broker", limit(10, 600)).expect("fits");
    let a = broker.child("a", limit(5, 500)).expect("fits");
    let b = broker.child("b", limit(5, 100)).expect("fits");
    let mut permit = a.try_acquire_data(100).expect("fits");
    // Growth beyond a limit is rejected and leaves the permit unchanged.
    let rejection = permit.try_resize(600).expect_err("a's bytes");
    assert_eq!(rejection.exhausted_path(), "process/broker/a");
    assert_eq!((permit.bytes(), counts(&a)), (100, (1, 100)));
    permit.try_resize(300).expect("grows");
    assert_eq!((counts(&a), counts(&broker)), ((1, 300), (1, 300)));
    // Rebind to b: b cannot take 300 bytes; the permit stays on a.
    match permit.try_rebind(&b).expect("same tree") {
        PermitRebindOutcome::Rejected(rejection) => {
            assert_eq!(rejection.exhausted_path(), "process/broker/b");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(counts(&a), (1, 300));
    permit.try_resize(50).expect("shrinks");
    assert_eq!(
        permit.try_rebind(&b).expect("same tree"),
        PermitRebindOutcome::Rebound
    );
    assert_eq!(
        (counts(&a), counts(&b), counts(&broker)),
        ((0, 0), (1, 50), (1, 50))
    );
    assert_eq!(
        permit.try_rebind(&b).expect("same tree"),
        PermitRebindOutcome::Unchanged
    );
    // Up to an ancestor: only source-only levels are released.
    assert_eq!(
        permit.try_rebind(&broker).expect("same tree"),
        PermitRebindOutcome::Rebound
    );
    assert_eq!((counts(&b), counts(&broker)), ((0, 0), (1, 50)));
    let other = tree_other();
    assert_eq!(
        permit.try_rebind(&other).expect_err("other tree"),
        RuntimeContractViolation::PermitTargetInDifferentTree
    );
    drop(permit);
    assert_eq!(counts(&tree.root()), (0, 0));
}

fn tree_other() -> ResourceBudget {
    tree(1, 1).root()
}

/// A tree with a `tenants` level for dynamic keys.
fn tenants() -> (ResourceBudgetTree, ResourceBudget) {
    let tree = tree(100, 10_000);
    let tenants = tree
        .root()
        .child("tenants", limit(100, 10_000))
        .expect("fits");
    (tree, tenants)
}

#[tokio::test(start_paused = true)]
async fn dynamic_keys_close_escaped_handles_and_hold_their_name_until_retired() {
    let (_tree, tenants) = tenants();
    let key = tenants
        .register_dynamic_child("t1", limit(10, 1_000))
        .expect("registered");
    let escaped = key.budget();
    let nested = escaped.child("inbox", limit(5, 500)).expect("fits");
    let admitted = key.try_acquire(100, BudgetClass::Data).expect("open");
    let mut movable = tenants.try_acquire_data(10).expect("fits");
    key.close();
    assert!(escaped.is_closed() && nested.is_closed() && key.is_closed());
    assert_eq!(
        key.try_acquire(1, BudgetClass::Data).expect_err("closed"),
        DynamicKeyAdmissionRejection::Closed
    );
    let rejection = nested.try_acquire_data(1).expect_err("descendant closed");
    assert!(rejection.is_closed() && rejection.dimension().is_none());
    assert!(matches!(
        movable.try_rebind(&escaped).expect("same tree"),
        PermitRebindOutcome::Rejected(_)
    ));
    let late_child = escaped.child("late", limit(1, 1)).expect("created");
    assert!(late_child.is_closed(), "permanently closed");
    assert!(matches!(
        tenants.register_dynamic_child("t1", limit(1, 1)),
        Err(DynamicKeyRegistrationFailure::NameInUse { generation }) if generation == key.generation()
    ));
    // A name with `/` is invalid: it can neither look up one path and take
    // another nor shadow the live `t1`.
    for bad in ["x/t1", "/t1", "t1/"] {
        assert!(
            matches!(
                tenants.register_dynamic_child(bad, limit(1, 1)),
                Err(DynamicKeyRegistrationFailure::Invalid(
                    RuntimeContractViolation::InvalidBudgetName
                ))
            ),
            "{bad}"
        );
    }
    // Retiring waits for outstanding reservations; the name is held until then.
    let retirement = key
        .retire_until(Instant::now() + Duration::from_secs(1))
        .await;
    assert!(!retirement.released);
    assert_eq!(retirement.outstanding_reservations, 1);
    let retiring = tokio::spawn({
        let key = key.clone();
        async move {
            key.retire_until(Instant::now() + Duration::from_secs(60))
                .await
        }
    });
    tokio::task::yield_now().await;
    drop(admitted);
    let retirement = guard("retire", retiring).await.expect("joins");
    assert!(retirement.released);
    let next = tenants
        .register_dynamic_child("t1", limit(1, 1))
        .expect("name free again");
    assert!(next.generation() > key.generation());
    // A stale handle cannot release the newer generation's name.
    assert!(key.retire_until(Instant::now()).await.released);
    assert!(matches!(
        tenants.register_dynamic_child("t1", limit(1, 1)),
        Err(DynamicKeyRegistrationFailure::NameInUse { .. })
    ));
    drop(movable);
}

#[test]
fn dynamic_registry_is_bounded() {
    let tree = ResourceBudgetTree::with_clock_and_key_capacity(
        "process",
        limit(10, 100),
        Arc::new(rocketmq_runtime::SystemMonotonicClock::new()),
        2,
    )
    .expect("valid");
    let root = tree.root();
    let _a = root.register_dynamic_child("a", limit(1, 1)).expect("room");
    let _b = root.register_dynamic_child("b", limit(1, 1)).expect("room");
    assert!(matches!(
        root.register_dynamic_child("c", limit(1, 1)),
        Err(DynamicKeyRegistrationFailure::CapacityExhausted { max_entries: 2 })
    ));
}

fn new_queue(
    count: usize,
    bytes: usize,
    policy: FullPolicy,
) -> (ResourceBudget, BudgetedQueue<u32>) {
    let tree = tree(1_000, 1_000_000);
    let budget = tree
        .root()
        .child("queue", BudgetLimit::new(count, bytes, policy))
        .expect("fits");
    (budget.clone(), BudgetedQueue::new(budget))
}

#[test]
fn reject_returns_the_item_and_never_exceeds_limits_under_2x_overload() {
    let (budget, queue) = new_queue(4, 400, FullPolicy::Reject);
    let mut rejected = Vec::new();
    for item in 0..8 {
        match queue.try_push_data(item, 100) {
            QueuePushOutcome::Enqueued => {}
            QueuePushOutcome::Rejected { item, rejection } => {
                assert!(matches!(rejection, QueuePushRejection::BudgetExhausted(_)));
                rejected.push(item);
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(counts(&budget).0 <= 4 && counts(&budget).1 <= 400);
    }
    assert_eq!(rejected, [4, 5, 6, 7], "the overload comes back intact");
    assert_eq!(queue.len(), 4);
    assert_eq!(queue.snapshot().rejected_count, 4);
}

#[tokio::test(start_paused = true)]
async fn wait_until_deadline_admits_when_capacity_frees_and_returns_the_item_at_the_deadline() {
    let (budget, queue) = new_queue(1, 100, FullPolicy::WaitUntilDeadline);
    assert!(queue.try_push_data(1, 10).is_accepted());
    let started = Instant::now();
    let deadline = started + Duration::from_secs(2);
    match queue.push_until(2, 10, BudgetClass::Data, deadline).await {
        QueuePushOutcome::Rejected { item, rejection } => {
            assert_eq!((item, rejection), (2, QueuePushRejection::DeadlineExceeded));
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(Instant::now(), deadline, "returned at the deadline");
    // Capacity frees while waiting: the push is admitted.
    let producer = tokio::spawn({
        let queue = queue.clone();
        async move {
            queue
                .push_until(
                    3,
                    10,
                    BudgetClass::Data,
                    Instant::now() + Duration::from_secs(60),
                )
                .await
        }
    });
    tokio::task::yield_now().await;
    assert_eq!(queue.snapshot().waiters, 1);
    assert_eq!(queue.try_pop(), Some(1));
    let outcome = guard("producer", producer).await.expect("joins");
    assert!(matches!(outcome, QueuePushOutcome::Enqueued));
    assert_eq!(queue.try_pop(), Some(3));
    // Each waiting push counts once, by its final outcome: the one that
    // reached its deadline is refused, the admitted one is not.
    let snapshot = queue.snapshot();
    assert_eq!(
        (
            snapshot.rejected_count,
            snapshot.wait_count,
            snapshot.deadline_exceeded_count
        ),
        (1, 2, 1)
    );
    // The budget counts each waiting push's first refused attempt once,
    // not the retries it made while waiting.
    assert_eq!(budget.snapshot().rejected_count, 2);
    // An item that can never fit is refused at once.
    match queue
        .push_until(
            4,
            1_000,
            BudgetClass::Data,
            Instant::now() + Duration::from_secs(60),
        )
        .await
    {
        QueuePushOutcome::Rejected {
            item: 4,
            rejection: QueuePushRejection::BudgetExhausted(_),
        } => {}
        other => panic!("unexpected {other:?}"),
    }
}

/// One release wakes every parked producer; the one that loses the slot
/// waits again and is admitted by a later release (the wake-up is re-armed
/// per wait, not consumed for good by the first release).
#[tokio::test(start_paused = true)]
async fn every_waiting_producer_is_admitted_as_slots_free_one_at_a_time() {
    let (_budget, queue) = new_queue(1, 100, FullPolicy::WaitUntilDeadline);
    assert!(queue.try_push_data(0, 10).is_accepted());
    let deadline = Instant::now() + Duration::from_secs(60);
    let producers: Vec<_> = (1..=3)
        .map(|item| {
            let queue = queue.clone();
            tokio::spawn(async move {
                queue
                    .push_until(item, 10, BudgetClass::Data, deadline)
                    .await
            })
        })
        .collect();
    tokio::task::yield_now().await;
    assert_eq!(queue.snapshot().waiters, 3);
    let mut popped = vec![queue.try_pop().expect("the first item")];
    for remaining in (0..3).rev() {
        // Free the slot, let the woken producers race for it.
        let mut polls = 0;
        while queue.snapshot().waiters != remaining {
            polls += 1;
            assert!(polls < 1_000, "a producer stays parked after a release");
            tokio::task::yield_now().await;
        }
        popped.push(queue.try_pop().expect("an admitted producer's item"));
    }
    for producer in producers {
        let outcome = guard("producer", producer).await.expect("joins");
        assert!(matches!(outcome, QueuePushOutcome::Enqueued));
    }
    popped.sort_unstable();
    assert_eq!(popped, [0, 1, 2, 3]);
    assert_eq!(queue.snapshot().deadline_exceeded_count, 0);
    assert_eq!(
        Instant::now(),
        deadline - Duration::from_secs(60),
        "no timer fired"
    );
}

#[test]
fn coalesce_latest_replaces_the_queued_state() {
    let (budget, queue) = new_queue(3, 300, FullPolicy::CoalesceLatest);
    let mut replaced = 0;
    for item in 0..6 {
        match queue.try_push_data(item, 100) {
            QueuePushOutcome::Enqueued => {}
            QueuePushOutcome::Coalesced { replaced: n } => replaced += n,
            other => panic!("unexpected {other:?}"),
        }
        assert!(counts(&budget).0 <= 3);
    }
    assert_eq!(replaced, 3, "the full state was replaced once");
    assert_eq!(queue.try_pop(), Some(3));
    assert_eq!(budget.snapshot().coalesced_count, 3);
}

#[derive(Debug)]
struct ManualClock(std::sync::Mutex<Duration>);

impl MonotonicClock for ManualClock {
    fn now(&self) -> Duration {
        *self.0.lock().expect("unpoisoned")
    }
}

/// Promotion gives the data permit's rate token back: with a stopped
/// clock and a burst of one, a second acquisition fits only after it.
#[test]
fn promote_to_control_restores_a_data_rate_token() {
    let clock = Arc::new(ManualClock(std::sync::Mutex::new(Duration::ZERO)));
    let tree = ResourceBudgetTree::with_clock(
        "process",
        limit(10, 1_000).with_rate(RateLimit::new(1, 1)),
        clock,
    )
    .expect("valid");
    let root = tree.root();
    let mut permit = root.try_acquire_data(10).expect("the one token");
    let throttled = root.try_acquire_data(10).expect_err("no token left");
    assert_eq!(throttled.dimension(), Some(BudgetDimension::Rate));
    permit.promote_to_control();
    assert_eq!(permit.class(), BudgetClass::Control);
    assert_eq!(root.snapshot().current_count, 1, "totals unchanged");
    let second = root.try_acquire_data(10).expect("the token came back");
    drop((permit, second));
    assert_eq!(root.snapshot().current_count, 0);
}

/// A `process` tree on a manual clock, with one `DropStale` queue budget
/// (4 items, 400 bytes, max age 5 s) shaped by `shape`.
fn stale_budget(
    shape: impl FnOnce(BudgetLimit) -> BudgetLimit,
) -> (Arc<ManualClock>, ResourceBudgetTree, ResourceBudget) {
    let clock = Arc::new(ManualClock(std::sync::Mutex::new(Duration::ZERO)));
    let tree = ResourceBudgetTree::with_clock("process", limit(100, 10_000), clock.clone())
        .expect("valid");
    let budget = tree
        .root()
        .child(
            "queue",
            shape(
                BudgetLimit::new(4, 400, FullPolicy::DropStale)
                    .with_max_age(Duration::from_secs(5)),
            ),
        )
        .expect("fits");
    (clock, tree, budget)
}

#[test]
fn drop_stale_drops_only_items_older_than_max_age() {
    let (clock, _tree, budget) = stale_budget(|limit| limit);
    let queue = BudgetedQueue::new(budget.clone());
    assert!(queue.try_push_data(1, 10).is_accepted());
    *clock.0.lock().expect("unpoisoned") = Duration::from_secs(3);
    assert!(queue.try_push_data(2, 10).is_accepted());
    *clock.0.lock().expect("unpoisoned") = Duration::from_secs(6);
    match queue.try_push_data(3, 10) {
        QueuePushOutcome::DroppedStale { dropped: 1 } => {}
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(queue.try_pop(), Some(2), "the younger item stays");
    assert_eq!(budget.snapshot().dropped_count, 1);
    // A Reject queue never drops aged work silently.
    let tree = ResourceBudgetTree::with_clock("process", limit(100, 10_000), clock.clone())
        .expect("valid");
    let rejecting = BudgetedQueue::new(
        tree.root()
            .child(
                "r",
                BudgetLimit::new(4, 400, FullPolicy::Reject).with_max_age(Duration::from_secs(1)),
            )
            .expect("fits"),
    );
    assert!(rejecting.try_push_data(1, 10).is_accepted());
    *clock.0.lock().expect("unpoisoned") = Duration::from_secs(60);
    assert!(rejecting.try_push_data(2, 10).is_accepted());
    assert_eq!(rejecting.len(), 2);
}

/// Stamps follow queue order even when the clock reading behind a push is
/// older than the newest queued item's (a push that read the clock before
/// another but queued after it; here a user clock stepping back).
#[test]
fn enqueue_stamps_never_go_back_in_queue_order() {
    let (clock, _tree, budget) = stale_budget(|limit| limit);
    let queue = BudgetedQueue::new(budget);
    *clock.0.lock().expect("unpoisoned") = Duration::from_secs(10);
    assert!(queue.try_push_data(1, 10).is_accepted());
    *clock.0.lock().expect("unpoisoned") = Duration::from_secs(4);
    assert!(queue.try_push_data(2, 10).is_accepted());
    *clock.0.lock().expect("unpoisoned") = Duration::from_secs(12);
    assert!(queue.try_push_data(3, 10).is_accepted());
    let stamps: Vec<_> = std::iter::from_fn(|| queue.try_pop_budgeted())
        .map(|item| item.enqueued_at())
        .collect();
    assert_eq!(
        stamps,
        [10, 10, 12].map(Duration::from_secs),
        "the second push is stamped no earlier than the first"
    );
}

/// A producer waiting on a full queue under a dynamic key stops waiting
/// when the key closes, refused as closed, well before its deadline.
#[tokio::test(start_paused = true)]
async fn closing_a_dynamic_key_ends_a_waiting_push() {
    let (_tree, tenants) = tenants();
    let key = tenants
        .register_dynamic_child(
            "t1",
            BudgetLimit::new(1, 100, FullPolicy::WaitUntilDeadline),
        )
        .expect("registered");
    let queue = BudgetedQueue::new(key.budget());
    assert!(queue.try_push_data(1, 10).is_accepted());
    let started = Instant::now();
    let producer = tokio::spawn({
        let queue = queue.clone();
        async move {
            queue
                .push_until(2, 10, BudgetClass::Data, started + Duration::from_secs(60))
                .await
        }
    });
    tokio::task::yield_now().await;
    assert_eq!(queue.snapshot().waiters, 1);
    key.close();
    match guard("producer", producer).await.expect("joins") {
        QueuePushOutcome::Rejected {
            item: 2,
            rejection: QueuePushRejection::Closed,
        } => {}
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(Instant::now(), started, "no wait to the deadline");
    // Queued work still drains.
    assert_eq!(queue.try_pop(), Some(1));
}

/// Data work under a level whose control reserve is its whole count can
/// never fit: a waiting data push is refused at once, not at its deadline.
#[tokio::test(start_paused = true)]
async fn a_data_push_that_can_never_fit_the_count_is_refused_at_once() {
    let tree = ResourceBudgetTree::new(
        "process",
        BudgetLimit::new(2, 1_000, FullPolicy::WaitUntilDeadline)
            .with_control_reserve(BudgetCapacity::new(2, 0)),
    )
    .expect("valid");
    let queue = BudgetedQueue::new(tree.root());
    let started = Instant::now();
    match queue
        .push_until(1, 10, BudgetClass::Data, started + Duration::from_secs(60))
        .await
    {
        QueuePushOutcome::Rejected {
            item: 1,
            rejection: QueuePushRejection::BudgetExhausted(_),
        } => {}
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(Instant::now(), started, "no wait to the deadline");
    assert!(queue
        .push_until(
            2,
            10,
            BudgetClass::Control,
            started + Duration::from_secs(60)
        )
        .await
        .is_accepted());
}

#[tokio::test(start_paused = true)]
async fn close_slow_consumer_closes_and_wakes_everyone() {
    let (budget, queue) = new_queue(2, 200, FullPolicy::CloseSlowConsumer);
    assert!(queue.try_push_data(1, 10).is_accepted());
    assert!(queue.try_push_data(2, 10).is_accepted());
    let consumer = tokio::spawn({
        let queue: BudgetedQueue<u32> = BudgetedQueue::new(budget.clone());
        async move { queue.recv().await }
    });
    match queue.try_push_data(3, 10) {
        QueuePushOutcome::Rejected {
            item: 3,
            rejection: QueuePushRejection::SlowConsumerClosed,
        } => {}
        other => panic!("unexpected {other:?}"),
    }
    assert!(queue.is_closed() && queue.is_empty());
    assert_eq!(
        counts(&budget),
        (0, 0),
        "dropped items released their permits"
    );
    assert_eq!(queue.recv().await, None, "closed and drained");
    consumer.abort();
    assert_eq!(budget.snapshot().closed_slow_consumer_count, 1);
}

#[tokio::test(start_paused = true)]
async fn budgeted_items_keep_their_charge_and_close_lets_items_drain() {
    let (budget, queue) = new_queue(4, 400, FullPolicy::Reject);
    assert!(queue.try_push_data(1, 100).is_accepted());
    assert!(queue.try_push_data(2, 50).is_accepted());
    let item = queue.recv_budgeted().await.expect("an item");
    assert_eq!(item.retained_bytes(), 100);
    assert_eq!(counts(&budget), (2, 150), "the charge stays with the item");
    assert_eq!(item.into_item(), 1);
    assert_eq!(counts(&budget), (1, 50));
    queue.close();
    match queue.try_push_data(3, 1) {
        QueuePushOutcome::Rejected {
            item: 3,
            rejection: QueuePushRejection::Closed,
        } => {}
        other => panic!("unexpected {other:?}"),
    }
    let (item, permit, _) = queue
        .recv_budgeted()
        .await
        .expect("accepted items drain")
        .into_parts();
    assert_eq!((item, permit.bytes()), (2, 50));
    assert_eq!(counts(&budget), (1, 50), "transferred with the permit");
    drop(permit);
    assert_eq!(queue.recv().await, None);
    assert_eq!(counts(&budget), (0, 0));
    // retain releases what it removes and keeps the order.
    let (budget, queue) = new_queue(8, 800, FullPolicy::Reject);
    for item in 0..6 {
        assert!(queue.try_push_data(item, 10).is_accepted());
    }
    assert_eq!(queue.retain(|item| item % 2 == 0), 3);
    assert_eq!(counts(&budget), (3, 30));
    assert_eq!(
        [queue.try_pop(), queue.try_pop(), queue.try_pop()],
        [Some(0), Some(2), Some(4)]
    );
}

/// Children of the owner share one `process` root: a reservation by one
/// component is visible to all; the detected limit and the managed budget
/// are reported separately.
#[test]
fn components_share_the_owner_process_budget() {
    use rocketmq_runtime::{
        ManagedMemoryPolicy, MemoryLimitSource, ProcessMemoryLimit, RuntimeConfig, RuntimeOwner,
    };
    let limit = ProcessMemoryLimit::configured(1_000_000).expect("positive");
    let policy = ManagedMemoryPolicy::fraction(1, 2)
        .expect("bounded")
        .with_headroom(100_000);
    let owner = RuntimeOwner::plan(RuntimeConfig::for_parallelism("budgets", 2))
        .expect("valid")
        .with_memory_limit(limit)
        .with_memory_policy(policy)
        .build()
        .expect("builds");
    let resources = owner.resources();
    assert_eq!(
        resources.memory_limit().source(),
        MemoryLimitSource::Configured
    );
    assert_eq!(resources.memory_budget().effective_limit_bytes(), 1_000_000);
    assert_eq!(resources.memory_budget().managed_bytes(), 500_000);
    let broker = owner.root_context().component("broker");
    let store = owner.root_context().component("store");
    // Every context reaches the owner's resources.
    assert_eq!(
        owner
            .root_context()
            .resources()
            .memory_budget()
            .managed_bytes(),
        500_000
    );
    assert_eq!(broker.resources().memory_budget().managed_bytes(), 500_000);
    let process = owner.root_context().process_budget();
    assert_eq!(process.path(), "process");
    assert_eq!(process.limit().capacity.bytes, 500_000);
    let broker_budget = broker
        .process_budget()
        .child("broker", BudgetLimit::new(100, 400_000, FullPolicy::Reject))
        .expect("fits");
    let _held = broker_budget.try_acquire_data(400_000).expect("fits");
    assert_eq!(
        store.process_budget().snapshot().current_bytes,
        400_000,
        "visible to every component"
    );
    let rejection = store
        .process_budget()
        .child("store", BudgetLimit::new(100, 200_000, FullPolicy::Reject))
        .expect("fits")
        .try_acquire_data(200_000)
        .expect_err("the shared root is exhausted");
    assert_eq!(rejection.exhausted_path(), "process");
    let too_much = RuntimeOwner::plan(RuntimeConfig::for_parallelism("budgets", 2))
        .expect("valid")
        .with_memory_limit(limit)
        .with_memory_policy(ManagedMemoryPolicy::whole_limit().with_headroom(2_000_000))
        .build()
        .expect_err("headroom above the limit");
    assert_eq!(
        too_much.operation(),
        rocketmq_runtime::RuntimeOperation::ResolveManagedMemoryBudget
    );
    // A supplied limit replaces discovery, even above this host's memory.
    let pebibyte = 1_u64 << 50;
    let supplied = RuntimeOwner::plan(RuntimeConfig::for_parallelism("budgets", 2))
        .expect("valid")
        .with_memory_limit(ProcessMemoryLimit::configured(pebibyte).expect("positive"))
        .build()
        .expect("builds");
    assert_eq!(
        supplied.resources().memory_budget().managed_bytes(),
        pebibyte
    );
}

/// Every way an entry leaves a queue gives its reservation back, in the
/// right class: pops, `retain` (also when `keep` panics midway), coalescing,
/// a slow-consumer close and dropping the queue with items still queued.
/// The queue level keeps a control reserve, so a data reservation released
/// as control (or the reverse) would leave the data share wrong.
#[test]
fn every_removal_path_releases_its_reservation_in_its_class() {
    let root = tree(1_000, 1_000_000).root();
    let queue_limit =
        |policy| BudgetLimit::new(6, 600, policy).with_control_reserve(BudgetCapacity::new(2, 200));
    let data_capacity = |budget: &ResourceBudget| {
        let permits: Vec<_> = std::iter::from_fn(|| budget.try_acquire_data(1).ok()).collect();
        permits.len()
    };
    // A queue under `root` with four data and two control items queued.
    let filled = |name: &str, policy| {
        let budget = root.child(name, queue_limit(policy)).expect("fits");
        let queue = BudgetedQueue::new(budget.clone());
        for item in 0..4 {
            assert!(queue.try_push_data(item, 10).is_accepted());
        }
        for item in 4..6 {
            assert!(queue.try_push_control(item, 10).is_accepted());
        }
        assert_eq!(counts(&root), (6, 60));
        (budget, queue)
    };

    // Pops (plain and budgeted) and retain.
    let (budget, queue) = filled("pops", FullPolicy::Reject);
    assert_eq!(queue.try_pop(), Some(0));
    let item = queue.try_pop_budgeted().expect("queued");
    assert_eq!(counts(&budget), (5, 50), "a budgeted item keeps its charge");
    assert_eq!(item.into_item(), 1);
    assert_eq!(queue.retain(|item| *item % 2 == 1), 2, "items 2 and 4 go");
    assert_eq!(counts(&budget), (2, 20));
    assert_eq!(queue.snapshot().retained_bytes, 20);
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        queue.retain(|item| {
            if *item == 5 {
                panic!("keep panicked")
            } else {
                false
            }
        })
    }));
    assert!(panicked.is_err());
    assert_eq!(queue.len(), 1, "item 3 removed, item 5 still queued");
    assert_eq!(counts(&budget), (1, 10));
    assert_eq!(queue.snapshot().retained_bytes, 10);
    assert_eq!(data_capacity(&budget), 4, "the data share is free again");
    drop(queue);
    assert_eq!(counts(&root), (0, 0), "dropping the queue released item 5");

    // Coalescing replaces (and releases) the whole queued state.
    let (budget, queue) = filled("coalesce", FullPolicy::CoalesceLatest);
    assert!(matches!(
        queue.try_push_control(9, 10),
        QueuePushOutcome::Coalesced { replaced: 6 }
    ));
    assert_eq!(counts(&budget), (1, 10));
    assert_eq!(data_capacity(&budget), 4);
    drop(queue);
    assert_eq!(counts(&root), (0, 0));

    // A slow-consumer close drops everything queued.
    let (budget, queue) = filled("slow", FullPolicy::CloseSlowConsumer);
    assert!(!queue.try_push_control(9, 10).is_accepted());
    assert!(queue.is_closed() && queue.is_empty());
    assert_eq!(counts(&root), (0, 0));
    assert_eq!(data_capacity(&budget), 4);
}

/// An item that records, when dropped, the count its budget still charges
/// (and can be told to panic in its destructor).
#[derive(Debug)]
struct Witness {
    budget: ResourceBudget,
    seen: Arc<std::sync::Mutex<Vec<usize>>>,
    panics: bool,
}

impl Drop for Witness {
    fn drop(&mut self) {
        let count = self.budget.snapshot().current_count;
        self.seen.lock().expect("unpoisoned").push(count);
        if self.panics {
            panic!("item destructor panicked");
        }
    }
}

/// A clock that can be made to panic.
#[derive(Debug, Default)]
struct FailingClock(std::sync::atomic::AtomicBool);

impl MonotonicClock for FailingClock {
    fn now(&self) -> Duration {
        assert!(
            !self.0.load(std::sync::atomic::Ordering::SeqCst),
            "clock failed"
        );
        Duration::ZERO
    }
}

/// A discarded item is dropped while its reservation is still charged (the
/// budget never shows memory a discarded item holds as free), and a
/// panicking item destructor or a panicking clock still gives every
/// reservation back.
#[test]
fn discarded_items_drop_before_their_reservation_returns_even_when_panicking() {
    let clock = Arc::new(FailingClock::default());
    let tree = ResourceBudgetTree::with_clock("process", limit(100, 10_000), clock.clone())
        .expect("valid");
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let witness = |budget: &ResourceBudget, panics: bool| Witness {
        budget: budget.clone(),
        seen: Arc::clone(&seen),
        panics,
    };
    let take_seen = || std::mem::take(&mut *seen.lock().expect("unpoisoned"));

    // Coalescing: the replacement takes the displaced items' room first;
    // they are dropped after it is queued (and the queue's lock released),
    // seeing only the replacement charged.
    let budget = tree
        .root()
        .child(
            "coalesce",
            BudgetLimit::new(2, 200, FullPolicy::CoalesceLatest),
        )
        .expect("fits");
    let queue = BudgetedQueue::new(budget.clone());
    for _ in 0..2 {
        assert!(queue
            .try_push_data(witness(&budget, false), 10)
            .is_accepted());
    }
    assert!(matches!(
        queue.try_push_data(witness(&budget, false), 10),
        QueuePushOutcome::Coalesced { replaced: 2 }
    ));
    assert_eq!(take_seen(), [1, 1]);
    // `retain` and dropping the queue: the same order.
    assert!(queue
        .try_push_data(witness(&budget, false), 10)
        .is_accepted());
    assert_eq!(queue.len(), 2);
    assert_eq!(queue.retain(|_| false), 2);
    assert_eq!(take_seen(), [2, 2]);
    assert!(queue
        .try_push_data(witness(&budget, false), 10)
        .is_accepted());
    drop(queue);
    assert_eq!(take_seen(), [1]);
    assert_eq!(counts(&budget), (0, 0));

    // A destructor panicking while the state is replaced: the replacement
    // was queued first and stays queued (its charge held); the panic
    // reaches the pushing caller once the discarded items are dropped, and
    // their reservations are back.
    let queue = BudgetedQueue::new(budget.clone());
    assert!(queue
        .try_push_data(witness(&budget, true), 10)
        .is_accepted());
    assert!(queue
        .try_push_data(witness(&budget, false), 10)
        .is_accepted());
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        queue.try_push_data(witness(&budget, false), 10)
    }));
    assert!(panicked.is_err());
    assert_eq!(take_seen(), [1, 1], "both discarded after the replacement");
    assert_eq!(queue.len(), 1, "the replacement stays queued");
    assert_eq!(counts(&budget), (1, 10));
    drop(queue.try_pop());
    assert_eq!(take_seen(), [0]);
    assert_eq!(counts(&budget), (0, 0));

    // A clock panicking at a push (an observed queue reads it at every
    // push, before it reserves).
    let _ = queue.snapshot();
    clock.0.store(true, std::sync::atomic::Ordering::SeqCst);
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        queue.try_push_data(witness(&budget, false), 10)
    }));
    assert!(panicked.is_err());
    clock.0.store(false, std::sync::atomic::Ordering::SeqCst);
    assert!(queue.is_empty());
    assert_eq!(counts(&tree.root()), (0, 0), "the reservation went back");
    assert_eq!(queue.snapshot().retained_bytes, 0);
    take_seen();
}

/// The remaining removal paths: a stale drop and `recv`/`recv_budgeted`
/// give the reservation back in its class (the queue keeps a control
/// reserve, so a class mix-up shows in the data share).
#[tokio::test(start_paused = true)]
async fn stale_drops_and_receives_release_in_their_class() {
    let (clock, tree, budget) =
        stale_budget(|limit| limit.with_control_reserve(BudgetCapacity::new(1, 100)));
    let queue = BudgetedQueue::new(budget.clone());
    assert!(queue.try_push_data(1, 10).is_accepted());
    assert!(queue.try_push_control(2, 20).is_accepted());
    *clock.0.lock().expect("unpoisoned") = Duration::from_secs(6);
    assert!(matches!(
        queue.try_push_data(3, 30),
        QueuePushOutcome::DroppedStale { dropped: 2 }
    ));
    assert_eq!(counts(&budget), (1, 30));
    let data: Vec<_> = std::iter::from_fn(|| budget.try_acquire_data(1).ok()).collect();
    assert_eq!(data.len(), 2, "3 data slots, one held by item 3");
    drop(data);
    assert!(queue.try_push_control(4, 40).is_accepted());
    assert_eq!(queue.recv().await, Some(3));
    let item = queue.recv_budgeted().await.expect("queued");
    assert_eq!(
        counts(&budget),
        (1, 40),
        "a received budgeted item keeps its charge"
    );
    assert_eq!(item.retained_bytes(), 40);
    drop(item);
    assert_eq!(counts(&tree.root()), (0, 0));
    let data: Vec<_> = std::iter::from_fn(|| budget.try_acquire_data(1).ok()).collect();
    assert_eq!(data.len(), 3, "the data share is whole again");
}

/// Rate tokens follow the work actually admitted (stopped clock, burst 2):
/// a request refused at a lower level, or by a closed key after reserving,
/// gives its ancestors' tokens back; a permit rebound from an unrated
/// budget and then promoted gives back no token it never took.
#[test]
fn rate_tokens_are_taken_only_by_admitted_work() {
    let clock = Arc::new(ManualClock(std::sync::Mutex::new(Duration::ZERO)));
    let tree = ResourceBudgetTree::with_clock("process", limit(100, 10_000), clock).expect("valid");
    let rated = tree
        .root()
        .child("rated", limit(10, 1_000).with_rate(RateLimit::new(1, 2)))
        .expect("fits");
    let full = rated
        .child("full", limit(1, 100).with_rate(RateLimit::new(1, 2)))
        .expect("fits");
    let held = full.try_acquire_data(1).expect("token 1 of 2");
    for _ in 0..5 {
        let refused = full.try_acquire_data(1).expect_err("`full` holds one");
        assert_eq!(refused.dimension(), Some(BudgetDimension::Count));
    }
    let second = rated
        .try_acquire_data(1)
        .expect("the refusals took no token from `rated`");
    assert_eq!(
        rated
            .try_acquire_data(1)
            .expect_err("both tokens used")
            .dimension(),
        Some(BudgetDimension::Rate)
    );
    drop((held, second));

    // A closed key refuses after reserving: the token goes back too.
    let clock = Arc::new(ManualClock(std::sync::Mutex::new(Duration::ZERO)));
    let tree = ResourceBudgetTree::with_clock(
        "process",
        limit(100, 10_000).with_rate(RateLimit::new(1, 1)),
        clock,
    )
    .expect("valid");
    let key = tree
        .root()
        .register_dynamic_child("tenant", limit(10, 1_000).with_rate(RateLimit::new(1, 1)))
        .expect("registered");
    key.close();
    assert!(key.try_acquire(1, BudgetClass::Data).is_err());
    let admitted = tree
        .root()
        .try_acquire_data(1)
        .expect("the token came back");
    drop(admitted);

    // Rebind from an unrated sibling, then promote: no token is created.
    let clock = Arc::new(ManualClock(std::sync::Mutex::new(Duration::ZERO)));
    let tree = ResourceBudgetTree::with_clock("process", limit(100, 10_000), clock).expect("valid");
    let a = tree
        .root()
        .child("a", limit(10, 1_000).with_rate(RateLimit::new(1, 1)))
        .expect("fits");
    let b = tree.root().child("b", limit(10, 1_000)).expect("fits");
    let first = a.try_acquire_data(1).expect("a's one token");
    let mut moved = b.try_acquire_data(1).expect("b is unrated");
    assert!(matches!(
        moved.try_rebind(&a).expect("same tree"),
        PermitRebindOutcome::Rebound
    ));
    moved.promote_to_control();
    assert_eq!(
        a.try_acquire_data(1)
            .expect_err("no token was created")
            .dimension(),
        Some(BudgetDimension::Rate)
    );
    drop((first, moved));
}

/// A `RuntimeContext` harness never runs production memory discovery: its
/// process budget is permissive (`src/context.rs`, invariant 3), so tests
/// sized for a large budget behave the same in a small container.
#[tokio::test]
async fn a_harness_process_budget_is_permissive() {
    let harness = support::harness("budget-harness");
    let budget = harness.service_context("broker").process_budget();
    assert_eq!(budget.limit().capacity.bytes, usize::MAX);
    let child = budget
        .child("large", limit(1, 1 << 50))
        .expect("fits any realistic size");
    assert_eq!(child.limit().capacity.bytes, 1 << 50);
}

/// A waiting push (`src/resource_budget/queue/waiting.rs`) is woken by a
/// release anywhere in the tree, not only in its queue: here a sibling's
/// permit holds the shared parent's only slot, and its release admits the
/// waiting push at once.
///
/// ```text
/// t=0   sibling holds the parent's slot; push_until(60 s) waits
/// t=1s  still waiting; the sibling's permit is dropped -> Enqueued at 1 s
/// ```
#[tokio::test(start_paused = true)]
async fn a_waiting_push_is_woken_by_a_release_anywhere_in_the_tree() {
    let tree = tree(10, 10_000);
    let parent = tree.root().child("parent", limit(1, 1_000)).expect("fits");
    let queue = BudgetedQueue::new(
        parent
            .child(
                "queue",
                BudgetLimit::new(1, 1_000, FullPolicy::WaitUntilDeadline),
            )
            .expect("fits"),
    );
    let sibling = parent.child("sibling", limit(1, 1_000)).expect("fits");
    let held = sibling.try_acquire_data(10).expect("the parent's slot");
    let started = Instant::now();
    let producer = tokio::spawn({
        let queue = queue.clone();
        async move {
            queue
                .push_until(7, 10, BudgetClass::Data, started + Duration::from_secs(60))
                .await
        }
    });
    tokio::task::yield_now().await;
    assert_eq!(queue.snapshot().waiters, 1);
    tokio::time::advance(Duration::from_secs(1)).await;
    assert!(!producer.is_finished(), "the parent is still full");
    drop(held);
    let outcome = guard("producer", producer).await.expect("joins");
    assert!(matches!(outcome, QueuePushOutcome::Enqueued), "{outcome:?}");
    assert_eq!(
        Instant::now(),
        started + Duration::from_secs(1),
        "woken by the release"
    );
    assert_eq!(queue.try_pop(), Some(7));
}

/// A waiting push refused by a rate limit is refused at once
/// (`src/resource_budget/queue/waiting.rs`, invariant 4): rate tokens are
/// not capacity a release gives back.
#[tokio::test(start_paused = true)]
async fn a_waiting_push_is_refused_at_once_on_rate_exhaustion() {
    let tree = tree(10, 10_000);
    let queue = BudgetedQueue::new(
        tree.root()
            .child(
                "rated",
                BudgetLimit::new(4, 1_000, FullPolicy::WaitUntilDeadline)
                    .with_rate(RateLimit::new(1, 1)),
            )
            .expect("fits"),
    );
    assert!(queue.try_push_data(1, 10).is_accepted(), "the one token");
    let started = Instant::now();
    match queue
        .push_until(2, 10, BudgetClass::Data, started + Duration::from_secs(60))
        .await
    {
        QueuePushOutcome::Rejected {
            item: 2,
            rejection: QueuePushRejection::BudgetExhausted(rejection),
        } => assert_eq!(rejection.dimension(), Some(BudgetDimension::Rate)),
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(Instant::now(), started, "no wait");
}
