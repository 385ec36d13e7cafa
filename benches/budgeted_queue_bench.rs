//! Budgets and budgeted queues against raw floors and Tokio baselines.
//!
//! | Measure | Floor / baseline | Runtime path |
//! | --- | --- | --- |
//! | `permit/{1,4,16}` | count+bytes `AtomicUsize` compare-exchange chain of the same depth; `Semaphore::try_acquire` + drop (depth 1) | `try_acquire_data(64)` + drop on a chain of that depth |
//! | `queue_push_pop` | `Mutex<VecDeque>` with an atomic count budget | `try_push_data` + `try_pop` |
//! | `queue_push_pop_observed` (no target) | the same | the same on a queue whose ages were observed (a snapshot), so every push reads the clock |
//! | `wait_release` | `Semaphore(16)`-gated `Mutex<VecDeque>` + `Notify` | `push_until` (`WaitUntilDeadline`, 16 slots) + `recv`, producer spawn and join included |
//! | `streaming` | `mpsc::channel(1024)` send + recv | `try_push_data` + `recv` |
//! | `reject` | `mpsc` `try_send` fill, one refused, drain | `try_push_data` fill, one `Rejected`, drain (`Reject`, 16 slots) |
//! | `coalesce` | `mpsc`: drain the full channel, send the newest | `try_push_data` into a full `CoalesceLatest` queue |
//!
//! Queues and runtimes are built outside the timed regions (reused across
//! rounds). Every ratio is the paired median of alternating rounds. A
//! counting global allocator checks that acquire + release allocates
//! nothing.
//!
//! Output: `<target>/runtime-measurements/budgeted_queue.json`.
//!
//! Run: `cargo bench --bench budgeted_queue_bench`.

mod support;

#[path = "../tests/support/counting_alloc.rs"]
mod counting_alloc;

use std::collections::VecDeque;
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
use support::{paired_median, publish, run_criterion, target};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

const PERMIT_OPS: u32 = 100_000;
const QUEUE_OPS: u32 = 100_000;
const STREAM_ITEMS: u32 = 20_000;
const SLOTS: usize = 16;
const ROUNDS: usize = 21;
const DEPTHS: [usize; 3] = [1, 4, 16];

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
                for item in 0..STREAM_ITEMS {
                    assert!(queue.try_push_data(item, 64).is_accepted());
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
        black_box(queue.try_push_data(item, 64));
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
    let streaming = queue_over(FullPolicy::Reject, 4_096);
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
