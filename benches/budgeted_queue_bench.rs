//! Budgets and budgeted queues against raw floors and Tokio baselines.
//!
//! | Measure | Floor / baseline | Runtime path |
//! | --- | --- | --- |
//! | `permit/{1,4,16}` | count+bytes `AtomicUsize` compare-exchange chain of the same depth; `Semaphore::try_acquire` + drop (depth 1) | `try_acquire_data(64)` + drop on a chain of that depth |
//! | `queue_push_pop` | `Mutex<VecDeque>` with an atomic count budget | `try_push_data` + `try_pop` |
//! | `queue_push_pop_observed` (no target) | the same | the same on a queue whose ages were observed (a snapshot), so every push reads the clock |
//! | `wait_release` | `Semaphore(16)`-gated `Mutex<VecDeque>` + `Notify` | `push_until` (`WaitUntilDeadline`, 16 slots) + `recv`, producer spawn and join included |
//! | `streaming` | `mpsc::channel(1024)` send + recv | `push_until` + `recv` (`WaitUntilDeadline`, 1,024 slots) |
//! | `reject` | `mpsc` `try_send` fill, one refused, drain | `try_push_data` fill, one `Rejected`, drain (`Reject`, 16 slots) |
//! | `coalesce` | `mpsc`: drain the full channel, send the newest | `try_push_data` into a full `CoalesceLatest` queue |
//! | `contended/{wait,reject}/{1,4,64}` | `mpsc::channel(1024)`: `send`, or `try_send` retried after a yield | 1, 4 or 64 producers → 1 consumer through a queue of 1,024 (its budget its tree's root) on the 2-worker runtime: `push_until` (`WaitUntilDeadline`), or `try_push_data` retried after a yield (`Reject`, overloaded); items per second, queue / mpsc |
//! | `contended_under_process/...` (no target) | the same | the same queue as a child of a `process` root bounded in bytes only, as an owner builds it |
//! | `refused_push` | an accepted `try_push_data` into a queue with room | a refused `try_push_data` into a full `Reject` queue (each timed per push, 64 at a time) |
//!
//! Queues and runtimes are built outside the timed regions (reused across
//! rounds). The `contended` measures run on the 2-worker runtime, where
//! producers and the consumer sit on different cores; the others on a
//! current-thread runtime (the instruction cost alone). Every ratio is the paired median of alternating rounds. A
//! counting global allocator checks that acquire + release allocates
//! nothing.
//!
//! Output: `<target>/runtime-measurements/budgeted_queue.json`
//! (`budgeted_queue_contended.json` with `ROCKETMQ_BENCH_QUEUE=contended`).
//!
//! Run: `cargo bench --bench budgeted_queue_bench`.

mod support;

#[path = "../tests/support/counting_alloc.rs"]
mod counting_alloc;

use std::collections::VecDeque;
use std::future::Future;
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use criterion::Criterion;
use rocketmq_runtime::{
    BudgetClass, BudgetLimit, BudgetedQueue, FullPolicy, QueuePushOutcome, ResourceBudget,
    ResourceBudgetTree,
};
use serde_json::{json, Map, Value};
use tokio::runtime::Runtime;
use tokio::sync::{mpsc, Notify, Semaphore};
use tokio::time::Instant;

use counting_alloc::{start_counting, stop_counting, CountingAllocator};
use support::{paired_median, publish, run_criterion, target, target_at_least};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

const PERMIT_OPS: u32 = 100_000;
const QUEUE_OPS: u32 = 100_000;
const STREAM_ITEMS: u32 = 20_000;
const SLOTS: usize = 16;
const ROUNDS: usize = 21;
const DEPTHS: [usize; 3] = [1, 4, 16];
/// Items one contended round moves (divisible by every producer count).
const CONTENDED_ITEMS: u32 = 102_400;
const CONTENDED_CAPACITY: usize = 1_024;
const CONTENDED_PRODUCERS: [u32; 3] = [1, 4, 64];

/// The real clock: some measures run inside a Tokio runtime.
#[allow(clippy::disallowed_methods)]
fn wall_clock() -> std::time::Instant {
    std::time::Instant::now()
}

fn chain(depth: usize) -> ResourceBudget {
    let tree = ResourceBudgetTree::new(
        "process",
        BudgetLimit::new(1 << 20, 1 << 36, FullPolicy::Reject),
    )
    .expect("valid");
    let mut budget = tree.root();
    for level in 1..depth {
        budget = budget
            .child(
                format!("l{level}"),
                BudgetLimit::new(1 << 20, 1 << 36, FullPolicy::Reject),
            )
            .expect("fits");
    }
    budget
}

/// The raw floor of a permit: a count and a bytes counter per level.
struct FloorLevel {
    count: AtomicUsize,
    bytes: AtomicUsize,
}

fn bounded_add(counter: &AtomicUsize, amount: usize, limit: usize) -> bool {
    let mut current = counter.load(Ordering::Relaxed);
    loop {
        if current + amount > limit {
            return false;
        }
        match counter.compare_exchange_weak(
            current,
            current + amount,
            Ordering::AcqRel,
            Ordering::Relaxed,
        ) {
            Ok(_) => return true,
            Err(seen) => current = seen,
        }
    }
}

fn floor_permits(levels: &[FloorLevel]) -> Duration {
    let started = wall_clock();
    for _ in 0..PERMIT_OPS {
        for level in levels {
            assert!(bounded_add(&level.count, 1, 1 << 20));
            assert!(bounded_add(&level.bytes, 64, 1 << 36));
        }
        for level in levels.iter().rev() {
            level.count.fetch_sub(1, Ordering::AcqRel);
            level.bytes.fetch_sub(64, Ordering::AcqRel);
        }
    }
    started.elapsed()
}

fn budget_permits(leaf: &ResourceBudget) -> Duration {
    let started = wall_clock();
    for _ in 0..PERMIT_OPS {
        drop(black_box(leaf.try_acquire_data(64).expect("room")));
    }
    started.elapsed()
}

fn semaphore_permits(semaphore: &Semaphore) -> Duration {
    let started = wall_clock();
    for _ in 0..PERMIT_OPS {
        drop(black_box(semaphore.try_acquire().expect("room")));
    }
    started.elapsed()
}

/// The raw floor of a non-waiting queue.
struct FloorQueue {
    items: Mutex<VecDeque<u32>>,
    count: AtomicUsize,
}

fn floor_push_pop(queue: &FloorQueue) -> Duration {
    let started = wall_clock();
    for item in 0..QUEUE_OPS {
        assert!(bounded_add(&queue.count, 1, SLOTS));
        queue.items.lock().expect("unpoisoned").push_back(item);
        let popped = queue.items.lock().expect("unpoisoned").pop_front();
        queue.count.fetch_sub(1, Ordering::AcqRel);
        black_box(popped);
    }
    started.elapsed()
}

fn queue_push_pop(queue: &BudgetedQueue<u32>) -> Duration {
    let started = wall_clock();
    for item in 0..QUEUE_OPS {
        assert!(queue.try_push_data(item, 64).is_accepted());
        black_box(queue.try_pop());
    }
    started.elapsed()
}

fn queue_over(policy: FullPolicy, slots: usize) -> BudgetedQueue<u32> {
    let tree = ResourceBudgetTree::new(
        "process",
        BudgetLimit::new(1 << 20, 1 << 36, FullPolicy::Reject),
    )
    .expect("valid");
    BudgetedQueue::new(
        tree.root()
            .child("queue", BudgetLimit::new(slots, 1 << 30, policy))
            .expect("fits"),
    )
}

/// A contended queue with a budget of its own: the root of its tree
/// bounds it at `CONTENDED_CAPACITY` items, as a channel's capacity does.
fn own_budget_queue(policy: FullPolicy) -> BudgetedQueue<u32> {
    BudgetedQueue::new(
        ResourceBudgetTree::new(
            "queue",
            BudgetLimit::new(CONTENDED_CAPACITY, 1 << 30, policy),
        )
        .expect("valid")
        .root(),
    )
}

/// A contended queue as an owner builds one: a child of a `process` root
/// bounded in bytes only (`count = usize::MAX`, as `RuntimeResources`
/// builds it), so every item also reserves and releases at the root.
fn process_child_queue(policy: FullPolicy) -> BudgetedQueue<u32> {
    BudgetedQueue::new(
        ResourceBudgetTree::new(
            "process",
            BudgetLimit::new(usize::MAX, 1 << 34, FullPolicy::Reject),
        )
        .expect("valid")
        .root()
        .child(
            "queue",
            BudgetLimit::new(CONTENDED_CAPACITY, 1 << 30, policy),
        )
        .expect("fits"),
    )
}

fn budgeted_wait_release(rt: &Runtime, queue: &BudgetedQueue<u32>) -> Duration {
    let queue = queue.clone();
    rt.block_on(async move {
        let started = wall_clock();
        let producer = tokio::spawn({
            let queue = queue.clone();
            async move {
                // One deadline for the whole stream (deadlines are
                // absolute): the producer gives up after a minute in all.
                let deadline = Instant::now() + Duration::from_secs(60);
                for item in 0..STREAM_ITEMS {
                    let outcome = queue
                        .push_until(item, 64, BudgetClass::Data, deadline)
                        .await;
                    assert!(outcome.is_accepted());
                }
            }
        });
        for _ in 0..STREAM_ITEMS {
            black_box(queue.recv().await);
        }
        producer.await.expect("producer");
        started.elapsed()
    })
}

/// The semaphore-gated raw queue.
struct GatedQueue {
    slots: Arc<Semaphore>,
    items: Mutex<VecDeque<(u32, tokio::sync::OwnedSemaphorePermit)>>,
    readable: Notify,
}

fn raw_wait_release(rt: &Runtime, queue: &Arc<GatedQueue>) -> Duration {
    let queue = Arc::clone(queue);
    rt.block_on(async move {
        let started = wall_clock();
        let producer = tokio::spawn({
            let queue = Arc::clone(&queue);
            async move {
                for item in 0..STREAM_ITEMS {
                    let permit = Arc::clone(&queue.slots)
                        .acquire_owned()
                        .await
                        .expect("open");
                    queue
                        .items
                        .lock()
                        .expect("unpoisoned")
                        .push_back((item, permit));
                    queue.readable.notify_one();
                }
            }
        });
        for _ in 0..STREAM_ITEMS {
            loop {
                let popped = queue.items.lock().expect("unpoisoned").pop_front();
                if let Some((item, permit)) = popped {
                    drop(permit);
                    black_box(item);
                    break;
                }
                queue.readable.notified().await;
            }
        }
        producer.await.expect("producer");
        started.elapsed()
    })
}

fn budgeted_streaming(rt: &Runtime, queue: &BudgetedQueue<u32>) -> Duration {
    let queue = queue.clone();
    rt.block_on(async move {
        let started = wall_clock();
        let producer = tokio::spawn({
            let queue = queue.clone();
            async move {
                let deadline = Instant::now() + Duration::from_secs(60);
                for item in 0..STREAM_ITEMS {
                    let pushed = queue
                        .push_until(item, 64, BudgetClass::Data, deadline)
                        .await;
                    assert!(pushed.is_accepted());
                    if item % 256 == 255 {
                        tokio::task::yield_now().await;
                    }
                }
            }
        });
        for _ in 0..STREAM_ITEMS {
            black_box(queue.recv().await);
        }
        producer.await.expect("producer");
        started.elapsed()
    })
}

fn mpsc_streaming(rt: &Runtime) -> Duration {
    rt.block_on(async move {
        let (sender, mut receiver) = mpsc::channel::<u32>(1024);
        let started = wall_clock();
        let producer = tokio::spawn(async move {
            for item in 0..STREAM_ITEMS {
                sender.send(item).await.expect("open");
                if item % 256 == 255 {
                    tokio::task::yield_now().await;
                }
            }
        });
        for _ in 0..STREAM_ITEMS {
            black_box(receiver.recv().await);
        }
        producer.await.expect("producer");
        started.elapsed()
    })
}

/// Fill 16, one refused, drain; repeated.
fn budgeted_reject(queue: &BudgetedQueue<u32>) -> Duration {
    let started = wall_clock();
    for _ in 0..1_000 {
        for item in 0..SLOTS as u32 {
            assert!(queue.try_push_data(item, 64).is_accepted());
        }
        assert!(matches!(
            queue.try_push_data(99, 64),
            QueuePushOutcome::Rejected { .. }
        ));
        while queue.try_pop().is_some() {}
    }
    started.elapsed()
}

fn mpsc_reject() -> Duration {
    let (sender, mut receiver) = mpsc::channel::<u32>(SLOTS);
    let started = wall_clock();
    for _ in 0..1_000 {
        for item in 0..SLOTS as u32 {
            sender.try_send(item).expect("room");
        }
        assert!(sender.try_send(99).is_err());
        while receiver.try_recv().is_ok() {}
    }
    started.elapsed()
}

/// Replacement at capacity: each push into a full queue replaces it.
fn budgeted_coalesce(queue: &BudgetedQueue<u32>) -> Duration {
    while queue.try_push_data(0, 64).is_accepted() && queue.len() < SLOTS {}
    let started = wall_clock();
    for item in 0..10_000 {
        let _ = black_box(queue.try_push_data(item, 64));
        while queue.len() < SLOTS {
            assert!(queue.try_push_data(item, 64).is_accepted());
        }
    }
    started.elapsed()
}

fn mpsc_coalesce() -> Duration {
    let (sender, mut receiver) = mpsc::channel::<u32>(SLOTS);
    for item in 0..SLOTS as u32 {
        sender.try_send(item).expect("room");
    }
    let started = wall_clock();
    for item in 0..10_000 {
        if sender.try_send(item).is_err() {
            while receiver.try_recv().is_ok() {}
            sender.try_send(item).expect("room");
        }
        while sender.capacity() > 0 {
            sender.try_send(item).expect("room");
        }
    }
    started.elapsed()
}

/// How contended producers push.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pushing {
    /// `push_until` / `send`: wait for room.
    Wait,
    /// `try_push_data` / `try_send`, retried after a yield while full.
    Reject,
}

/// `producers` tasks push `CONTENDED_ITEMS` in all into a queue `make`
/// builds for `policy` while one
/// consumer task receives them all. Every task is spawned from outside
/// the workers (the runtime's injection queue), so whichever worker is
/// free takes it: no task starts in another's worker-local slot, where the
/// scheduler would keep a producer on its consumer's core.
fn queue_contended(
    rt: &Runtime,
    make: fn(FullPolicy) -> BudgetedQueue<u32>,
    policy: FullPolicy,
    producers: u32,
    pushing: Pushing,
) -> Duration {
    // A queue of its own each round, as the channel is: a round measures
    // a fresh allocation of both, never one placement of the queue's
    // lines for every round.
    let queue = &make(policy);
    let consume = {
        let queue = queue.clone();
        async move {
            for _ in 0..CONTENDED_ITEMS {
                black_box(queue.recv().await);
            }
        }
    };
    let produce = |_| {
        let queue = queue.clone();
        async move {
            let deadline = Instant::now() + Duration::from_secs(60);
            for item in 0..CONTENDED_ITEMS / producers {
                match pushing {
                    Pushing::Wait => {
                        let outcome = queue
                            .push_until(item, 64, BudgetClass::Data, deadline)
                            .await;
                        assert!(outcome.is_accepted());
                    }
                    Pushing::Reject => {
                        let mut item = item;
                        while let QueuePushOutcome::Rejected { item: back, .. } =
                            queue.try_push_data(item, 64)
                        {
                            item = back;
                            tokio::task::yield_now().await;
                        }
                    }
                }
            }
        }
    };
    spread(rt, consume, (0..producers).map(produce).collect())
}

/// The same through `mpsc::channel(1024)`.
fn mpsc_contended(rt: &Runtime, producers: u32, pushing: Pushing) -> Duration {
    let (sender, mut receiver) = mpsc::channel::<u32>(CONTENDED_CAPACITY);
    let consume = async move {
        for _ in 0..CONTENDED_ITEMS {
            black_box(receiver.recv().await);
        }
    };
    let produce = |_| {
        let sender = sender.clone();
        async move {
            for item in 0..CONTENDED_ITEMS / producers {
                match pushing {
                    Pushing::Wait => sender.send(item).await.expect("open"),
                    Pushing::Reject => {
                        let mut item = item;
                        while let Err(mpsc::error::TrySendError::Full(back)) = sender.try_send(item)
                        {
                            item = back;
                            tokio::task::yield_now().await;
                        }
                    }
                }
            }
        }
    };
    let producers = (0..producers).map(produce).collect();
    drop(sender);
    spread(rt, consume, producers)
}

/// Spawns `consumer`, then every producer, from the `block_on` thread,
/// and times until all have finished.
fn spread<C, P>(rt: &Runtime, consumer: C, producers: Vec<P>) -> Duration
where
    C: Future<Output = ()> + Send + 'static,
    P: Future<Output = ()> + Send + 'static,
{
    rt.block_on(async move {
        let started = wall_clock();
        let consumer = tokio::spawn(consumer);
        let producers: Vec<_> = producers.into_iter().map(tokio::spawn).collect();
        consumer.await.expect("consumer");
        for producer in producers {
            producer.await.expect("producer");
        }
        started.elapsed()
    })
}

/// 64 accepted pushes into a queue with room (then drained, untimed).
fn accepted_pushes(queue: &BudgetedQueue<u32>) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..1_000 {
        let started = wall_clock();
        for item in 0..64 {
            let _ = black_box(queue.try_push_data(item, 64));
        }
        total += started.elapsed();
        while queue.try_pop().is_some() {}
    }
    total
}

/// 64 refused pushes into a full queue.
fn refused_pushes(full: &BudgetedQueue<u32>) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..1_000 {
        let started = wall_clock();
        for item in 0..64 {
            let _ = black_box(full.try_push_data(item, 64));
        }
        total += started.elapsed();
    }
    total
}

/// Whether `ROCKETMQ_BENCH_CONTENDED` (a comma-separated list such as
/// `wait/1,reject/64`) selects the contended case `case` (all when unset).
fn contended_selected(case: &str) -> bool {
    std::env::var("ROCKETMQ_BENCH_CONTENDED").map_or(true, |cases| {
        cases.split(',').any(|selected| selected == case)
    })
}

/// The multi-core measures: records each ratio and its target.
fn contended(
    record: &mut impl FnMut(&str, Duration, Duration, f64) -> Value,
    targets: &mut Vec<Value>,
) {
    let ns = |value: f64| Duration::from_nanos(value as u64);
    let rt = support::runtime();
    for (pushing, policy, label) in [
        (Pushing::Wait, FullPolicy::WaitUntilDeadline, "wait"),
        (Pushing::Reject, FullPolicy::Reject, "reject"),
    ] {
        for (shape, make) in [
            (
                "contended",
                own_budget_queue as fn(FullPolicy) -> BudgetedQueue<u32>,
            ),
            ("contended_under_process", process_child_queue),
        ] {
            for producers in CONTENDED_PRODUCERS {
                let case = format!("{label}/{producers}");
                if !contended_selected(&case) {
                    continue;
                }
                let (ratio, tracked, base) = paired_median(
                    ROUNDS,
                    || queue_contended(&rt, make, policy, producers, pushing),
                    || mpsc_contended(&rt, producers, pushing),
                );
                record(
                    &format!("{shape}/{case} / mpsc"),
                    ns(tracked),
                    ns(base),
                    ratio,
                );
                // Items per second, queue / mpsc: the inverse of the time
                // ratio. The target is for the like-for-like shape (one
                // bounded level, as a channel is); the shape under a
                // process root is recorded beside it.
                if shape == "contended" {
                    targets.push(target_at_least(
                        format!(
                            "contended {label}, {producers} producers -> 1 consumer, \
                             2 workers: items/s queue / mpsc"
                        ),
                        0.9,
                        1.0 / ratio,
                    ));
                }
            }
        }
    }
    let room = queue_over(FullPolicy::Reject, 1 << 16);
    let full = queue_over(FullPolicy::Reject, SLOTS);
    while full.try_push_data(0, 64).is_accepted() {}
    let (ratio, tracked, base) =
        paired_median(ROUNDS, || refused_pushes(&full), || accepted_pushes(&room));
    record("refused_push / accepted_push", ns(tracked), ns(base), ratio);
    targets.push(target("refused push / accepted push (Reject)", 1.0, ratio));
}

fn bench(c: &mut Criterion) {
    for depth in [1, 4] {
        let leaf = chain(depth);
        c.bench_function(&format!("permit/{depth}/acquire_release"), |b| {
            b.iter(|| drop(black_box(leaf.try_acquire_data(64).expect("room"))));
        });
    }
    let waiting = queue_over(FullPolicy::WaitUntilDeadline, SLOTS);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    c.bench_function("wait_release", |b| {
        b.iter(|| budgeted_wait_release(&rt, &waiting));
    });
    let queue = queue_over(FullPolicy::Reject, SLOTS);
    c.bench_function("queue_push_pop", |b| {
        b.iter(|| {
            assert!(queue.try_push_data(1, 64).is_accepted());
            black_box(queue.try_pop())
        });
    });
}

fn main() {
    if run_criterion(bench).is_none() {
        return;
    }
    let only_contended = std::env::var("ROCKETMQ_BENCH_QUEUE").as_deref() == Ok("contended");
    let mut results = Map::new();
    let mut targets = Vec::new();
    let mut record = |key: &str, tracked: Duration, base: Duration, ratio: f64| -> Value {
        let entry = json!({
            "median_ratio": ratio,
            "runtime_median_ns": tracked.as_nanos() as u64,
            "baseline_median_ns": base.as_nanos() as u64,
        });
        results.insert(key.to_owned(), entry.clone());
        entry
    };
    let ns = |value: f64| Duration::from_nanos(value as u64);
    contended(&mut record, &mut targets);
    if only_contended {
        let summary = json!({
            "bench": "budgeted_queue_bench",
            "rounds": ROUNDS,
            "paired": results,
            "targets": targets,
        });
        publish("budgeted_queue_contended.json", &summary);
        return;
    }
    for depth in DEPTHS {
        let leaf = chain(depth);
        let floor: Vec<FloorLevel> = (0..depth)
            .map(|_| FloorLevel {
                count: AtomicUsize::new(0),
                bytes: AtomicUsize::new(0),
            })
            .collect();
        let (ratio, tracked, base) =
            paired_median(ROUNDS, || budget_permits(&leaf), || floor_permits(&floor));
        record(
            &format!("permit/{depth} / cas_floor"),
            ns(tracked),
            ns(base),
            ratio,
        );
        targets.push(target(
            format!("permit/{depth}: acquire+release / count+bytes CAS floor"),
            1.5,
            ratio,
        ));
        if depth == 1 {
            let semaphore = Semaphore::new(1 << 20);
            let (ratio, tracked, base) = paired_median(
                ROUNDS,
                || budget_permits(&leaf),
                || semaphore_permits(&semaphore),
            );
            record(
                "permit/1 / semaphore_try_acquire",
                ns(tracked),
                ns(base),
                ratio,
            );
            targets.push(target(
                "permit/1: acquire+release / Semaphore::try_acquire+drop",
                2.0,
                ratio,
            ));
        }
    }
    let leaf = chain(16);
    // Allocations on this thread during 10,000 acquire+release pairs.
    start_counting();
    for _ in 0..10_000 {
        drop(leaf.try_acquire_data(64).expect("room"));
    }
    let _net = stop_counting();
    targets.push(target(
        "permit/16: heap allocations over 10,000 acquire+release",
        0.0,
        counting_alloc::allocations() as f64,
    ));
    let queue = queue_over(FullPolicy::Reject, SLOTS);
    let floor = FloorQueue {
        items: Mutex::new(VecDeque::with_capacity(SLOTS)),
        count: AtomicUsize::new(0),
    };
    let (ratio, tracked, base) =
        paired_median(ROUNDS, || queue_push_pop(&queue), || floor_push_pop(&floor));
    record(
        "queue_push_pop / mutex_vecdeque_floor",
        ns(tracked),
        ns(base),
        ratio,
    );
    targets.push(target(
        "queue push+pop (non-waiting) / Mutex<VecDeque> + atomic budget floor",
        3.0,
        ratio,
    ));
    // No target: the same queue once its ages are observed, so every push
    // reads the clock (the price of exact ages, with the machine's
    // `clock_read_ns`).
    let observed = queue_over(FullPolicy::Reject, SLOTS);
    let _ = observed.snapshot();
    let (ratio, tracked, base) = paired_median(
        ROUNDS,
        || queue_push_pop(&observed),
        || floor_push_pop(&floor),
    );
    record(
        "queue_push_pop_observed / mutex_vecdeque_floor",
        ns(tracked),
        ns(base),
        ratio,
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let waiting = queue_over(FullPolicy::WaitUntilDeadline, SLOTS);
    let gated = Arc::new(GatedQueue {
        slots: Arc::new(Semaphore::new(SLOTS)),
        items: Mutex::new(VecDeque::with_capacity(SLOTS)),
        readable: Notify::new(),
    });
    let (ratio, tracked, base) = paired_median(
        ROUNDS,
        || budgeted_wait_release(&rt, &waiting),
        || raw_wait_release(&rt, &gated),
    );
    record(
        "wait_release / semaphore_gated_queue",
        ns(tracked),
        ns(base),
        ratio,
    );
    targets.push(target(
        "wait/release / Semaphore-gated raw queue",
        1.5,
        ratio,
    ));
    let streaming = queue_over(FullPolicy::WaitUntilDeadline, 1_024);
    let (ratio, tracked, base) = paired_median(
        ROUNDS,
        || budgeted_streaming(&rt, &streaming),
        || mpsc_streaming(&rt),
    );
    record("streaming / mpsc", ns(tracked), ns(base), ratio);
    targets.push(target("streaming push+recv / mpsc send+recv", 2.0, ratio));
    let rejecting = queue_over(FullPolicy::Reject, SLOTS);
    let (ratio, tracked, base) = paired_median(ROUNDS, || budgeted_reject(&rejecting), mpsc_reject);
    record("reject / mpsc_try_send", ns(tracked), ns(base), ratio);
    let coalescing = queue_over(FullPolicy::CoalesceLatest, SLOTS);
    let (ratio, tracked, base) =
        paired_median(ROUNDS, || budgeted_coalesce(&coalescing), mpsc_coalesce);
    record("coalesce / mpsc_drain_send", ns(tracked), ns(base), ratio);
    let summary = json!({
        "bench": "budgeted_queue_bench",
        "rounds": ROUNDS,
        "paired": results,
        "targets": targets,
    });
    publish("budgeted_queue.json", &summary);
}
