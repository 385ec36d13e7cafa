//! Blocking admission against a raw `Semaphore` + `spawn_blocking`.
//!
//! | Group | Baseline | Runtime path |
//! | --- | --- | --- |
//! | `lane_throughput/{8,32}` | `Semaphore(4)` permit moved into `spawn_blocking` | an executor with 4 slots (`max_concurrency = 4`) |
//! | `round_trip` | `spawn_blocking(empty).await` | `spawn_io(empty).await` |
//! | `timeout_evidence` | `timeout(5 ms, spawn_blocking(held))` | `spawn_io_until(now + 5 ms, held)`, then the snapshot that shows the abandoned closure as `TimedOutStillRunning` |
//!
//! `timeout_evidence`: the closure is held at a gate until after its
//! caller gave up, so the caller always times out; the timer runs from the
//! submission through the timeout (and, for the executor, the snapshot
//! with the evidence). The release, the closure's exit and the return of
//! its slot are outside the timer, before the next round.
//!
//! Each throughput job sleeps 1 ms on its blocking thread (simulated
//! work); all jobs are submitted at once from a runtime worker and
//! awaited. The physical limit, `jobs / 4 × 1 ms`, is printed beside them.
//! Every runtime (multi-thread, 2 workers) is built outside the timed
//! regions; the paired pass alternates baseline and executor.
//!
//! Output: `<target>/runtime-measurements/blocking_executor.json`.
//!
//! Run: `cargo bench --bench blocking_executor_bench`.

mod support;

use std::sync::Arc;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion};
use rocketmq_runtime::{BlockingExecutor, BlockingPoolPolicy, RuntimeContext};
use serde_json::{json, Map};
use tokio::runtime::Runtime;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use support::{
    mean_ns, mean_ns_of, on_worker, paired_median, publish, run_criterion, runtime, target,
};

const THROUGHPUT: &str = "lane_throughput";
const ROUND_TRIP: &str = "round_trip";
const JOBS: [usize; 2] = [8, 32];
const SLOTS: usize = 4;
const WORK: Duration = Duration::from_millis(1);
const RAW_THROUGHPUT: &str = "raw_semaphore_spawn_blocking";
const RAW_ROUND_TRIP: &str = "raw_spawn_blocking";
const EXECUTOR: &str = "blocking_executor";
const PAIRED_ROUNDS: usize = 31;
const ROUND_TRIP_BATCH: u32 = 200;
const TIMEOUT_EVIDENCE: &str = "timeout_evidence";
const RAW_TIMEOUT: &str = "raw_timeout_spawn_blocking";
/// How long a caller waits for a held closure.
const HELD_DEADLINE: Duration = Duration::from_millis(5);

/// Simulated blocking work (a 1 ms sleep on the blocking thread).
#[allow(clippy::disallowed_methods)]
fn simulated_work() {
    std::thread::sleep(WORK);
}

/// An isolated executor with `SLOTS` slots on `rt`.
fn executor(rt: &Runtime) -> BlockingExecutor {
    rt.block_on(async {
        let harness = RuntimeContext::try_from_current("bench").expect("inside the runtime");
        let policy = BlockingPoolPolicy {
            name: "bench".to_owned(),
            max_concurrency: SLOTS,
            max_queue_depth: 1_024,
            ..BlockingPoolPolicy::default()
        };
        BlockingExecutor::new_isolated(policy, harness.root_group().clone()).expect("valid policy")
    })
}

async fn raw_jobs(jobs: usize) -> Duration {
    let semaphore = Arc::new(Semaphore::new(SLOTS));
    let started = Instant::now();
    let calls = (0..jobs).map(|_| {
        let semaphore = Arc::clone(&semaphore);
        async move {
            let permit = semaphore.acquire_owned().await.expect("open semaphore");
            tokio::task::spawn_blocking(move || {
                simulated_work();
                drop(permit);
            })
            .await
            .expect("job");
        }
    });
    futures::future::join_all(calls).await;
    started.elapsed()
}

async fn executor_jobs(executor: BlockingExecutor, jobs: usize) -> Duration {
    let started = Instant::now();
    let calls = (0..jobs).map(|_| executor.spawn_io("job", simulated_work));
    for result in futures::future::join_all(calls).await {
        result.expect("admitted");
    }
    started.elapsed()
}

async fn raw_round_trips() -> Duration {
    let started = Instant::now();
    for _ in 0..ROUND_TRIP_BATCH {
        tokio::task::spawn_blocking(|| ())
            .await
            .expect("round trip");
    }
    started.elapsed() / ROUND_TRIP_BATCH
}

async fn executor_round_trips(executor: BlockingExecutor) -> Duration {
    let started = Instant::now();
    for _ in 0..ROUND_TRIP_BATCH {
        executor.spawn_io("empty", || ()).await.expect("round trip");
    }
    started.elapsed() / ROUND_TRIP_BATCH
}

/// A closure held until `release` is dropped; it signals its exit.
fn held_closure() -> (
    std::sync::mpsc::Sender<()>,
    tokio::sync::oneshot::Receiver<()>,
    impl FnOnce() + Send + 'static,
) {
    let (release, gate) = std::sync::mpsc::channel::<()>();
    let (exited_tx, exited) = tokio::sync::oneshot::channel();
    let work = move || {
        let _ = gate.recv();
        let _ = exited_tx.send(());
    };
    (release, exited, work)
}

async fn raw_timeout() -> Duration {
    let (release, exited, work) = held_closure();
    let started = Instant::now();
    let waited = tokio::time::timeout(HELD_DEADLINE, tokio::task::spawn_blocking(work)).await;
    let elapsed = started.elapsed();
    assert!(waited.is_err(), "the held closure cannot finish in time");
    drop(release);
    exited.await.expect("the closure ran and exited");
    elapsed
}

async fn executor_timeout(executor: BlockingExecutor) -> Duration {
    let (release, exited, work) = held_closure();
    let started = Instant::now();
    let deadline = rocketmq_runtime::ShutdownDeadline::after(HELD_DEADLINE);
    let waited = executor.spawn_io_until("held", deadline, work).await;
    let evidence = executor.snapshot();
    let elapsed = started.elapsed();
    assert!(waited.is_err(), "the held closure cannot finish in time");
    assert_eq!(
        evidence.timed_out_still_running, 1,
        "the abandoned closure is reported"
    );
    drop(release);
    exited.await.expect("the closure ran and exited");
    // Its slot and record go back just after the closure returns.
    while executor.blocking_still_running() > 0 {
        tokio::task::yield_now().await;
    }
    elapsed
}

fn bench(c: &mut Criterion) {
    let rt = runtime();
    let executor = executor(&rt);
    let mut group = c.benchmark_group(THROUGHPUT);
    group.sample_size(30);
    for jobs in JOBS {
        group.bench_with_input(BenchmarkId::new(RAW_THROUGHPUT, jobs), &jobs, |b, &jobs| {
            b.iter_custom(|iterations| {
                (0..iterations)
                    .map(|_| on_worker(&rt, raw_jobs(jobs)))
                    .sum()
            });
        });
        group.bench_with_input(BenchmarkId::new(EXECUTOR, jobs), &jobs, |b, &jobs| {
            b.iter_custom(|iterations| {
                (0..iterations)
                    .map(|_| on_worker(&rt, executor_jobs(executor.clone(), jobs)))
                    .sum()
            });
        });
    }
    group.finish();
    let mut group = c.benchmark_group(ROUND_TRIP);
    group.bench_function(RAW_ROUND_TRIP, |b| {
        b.iter_custom(|iterations| {
            (0..iterations)
                .map(|_| on_worker(&rt, raw_round_trips()))
                .sum()
        });
    });
    group.bench_function(EXECUTOR, |b| {
        b.iter_custom(|iterations| {
            (0..iterations)
                .map(|_| on_worker(&rt, executor_round_trips(executor.clone())))
                .sum()
        });
    });
    group.finish();
    let mut group = c.benchmark_group(TIMEOUT_EVIDENCE);
    group.sample_size(30);
    group.bench_function(RAW_TIMEOUT, |b| {
        b.iter_custom(|iterations| (0..iterations).map(|_| on_worker(&rt, raw_timeout())).sum());
    });
    group.bench_function(EXECUTOR, |b| {
        b.iter_custom(|iterations| {
            (0..iterations)
                .map(|_| on_worker(&rt, executor_timeout(executor.clone())))
                .sum()
        });
    });
    group.finish();
}

const THROUGHPUT_TARGET: f64 = 1.10;
const ROUND_TRIP_TARGET: f64 = 1.3;
const TIMEOUT_EVIDENCE_TARGET: f64 = 1.1;

fn main() {
    let Some(run_started) = run_criterion(bench) else {
        return;
    };
    let rt = runtime();
    let executor = executor(&rt);
    let mut paired = Map::new();
    let mut targets = Vec::new();
    let mut criterion_means = Map::new();
    for jobs in JOBS {
        let (ratio, executor_ns, raw_ns) = paired_median(
            PAIRED_ROUNDS,
            || on_worker(&rt, executor_jobs(executor.clone(), jobs)),
            || on_worker(&rt, raw_jobs(jobs)),
        );
        let physical = WORK.as_nanos() as f64 * (jobs / SLOTS) as f64;
        paired.insert(
            format!("{THROUGHPUT}/{jobs}"),
            json!({
                "median_ratio": ratio,
                "executor_median_ns": executor_ns,
                "raw_median_ns": raw_ns,
                "physical_limit_ns": physical,
                "rounds": PAIRED_ROUNDS,
            }),
        );
        targets.push(target(
            format!("{THROUGHPUT}/{jobs}: {EXECUTOR} / {RAW_THROUGHPUT}"),
            THROUGHPUT_TARGET,
            ratio,
        ));
        for function in [RAW_THROUGHPUT, EXECUTOR] {
            if let Some(mean) = mean_ns(THROUGHPUT, function, jobs, run_started) {
                criterion_means.insert(format!("{THROUGHPUT}/{function}/{jobs}"), json!(mean));
            }
        }
    }
    let (ratio, executor_ns, raw_ns) = paired_median(
        PAIRED_ROUNDS,
        || on_worker(&rt, executor_round_trips(executor.clone())),
        || on_worker(&rt, raw_round_trips()),
    );
    paired.insert(
        ROUND_TRIP.to_owned(),
        json!({
            "median_ratio": ratio,
            "executor_median_ns": executor_ns,
            "raw_median_ns": raw_ns,
            "rounds": PAIRED_ROUNDS,
        }),
    );
    targets.push(target(
        format!("{ROUND_TRIP}: {EXECUTOR} / {RAW_ROUND_TRIP}"),
        ROUND_TRIP_TARGET,
        ratio,
    ));
    for function in [RAW_ROUND_TRIP, EXECUTOR] {
        if let Some(mean) = mean_ns_of(ROUND_TRIP, function, "", run_started) {
            criterion_means.insert(format!("{ROUND_TRIP}/{function}"), json!(mean));
        }
    }
    let (ratio, executor_ns, raw_ns) = paired_median(
        PAIRED_ROUNDS,
        || on_worker(&rt, executor_timeout(executor.clone())),
        || on_worker(&rt, raw_timeout()),
    );
    paired.insert(
        TIMEOUT_EVIDENCE.to_owned(),
        json!({
            "median_ratio": ratio,
            "executor_median_ns": executor_ns,
            "raw_median_ns": raw_ns,
            "caller_deadline_ns": HELD_DEADLINE.as_nanos() as u64,
            "rounds": PAIRED_ROUNDS,
        }),
    );
    targets.push(target(
        format!("{TIMEOUT_EVIDENCE}: {EXECUTOR} / {RAW_TIMEOUT}"),
        TIMEOUT_EVIDENCE_TARGET,
        ratio,
    ));
    for function in [RAW_TIMEOUT, EXECUTOR] {
        if let Some(mean) = mean_ns_of(TIMEOUT_EVIDENCE, function, "", run_started) {
            criterion_means.insert(format!("{TIMEOUT_EVIDENCE}/{function}"), json!(mean));
        }
    }
    let summary = json!({
        "bench": "blocking_executor_bench",
        "slots": SLOTS,
        "work_ms": WORK.as_millis() as u64,
        "criterion_mean_ns": criterion_means,
        "paired": paired,
        "targets": targets,
    });
    publish("blocking_executor.json", &summary);
}
