//! Operations and scopes against raw Tokio baselines.
//!
//! | Part | Baseline | Runtime path |
//! | --- | --- | --- |
//! | `operation_task/10000` (Criterion + paired) | `tokio::spawn` + join every handle | `spawn_operation` / `spawn_draining_operation` of one `OperationContext` + `wait` |
//! | `draining_submission/{1,4,8}` (per call) | `Handle::spawn` from each thread | `spawn_draining_operation` from each thread into one shared group, or one group per thread |
//! | `allocations` | — | heap bytes retained by an idle group, an operation, a child context |
//! | `permit_acquire_release/{1,4,8}` (per call) | `Semaphore::try_acquire` + drop from each thread | `try_acquire_data` + drop on a child budget of one shared `process` root, one child per thread |
//! | `blocking_start_order` | `spawn_blocking` of 64 jobs onto a 1-thread-bound section | 64 jobs into a storage lane of concurrency 1, submitted in order while the lane is held |
//!
//! Every Tokio runtime (multi-thread, 2 workers) is built outside the timed
//! regions. `operation_task` measures register, run, settle and wait of
//! 10,000 trivial tasks; its target (≤ 1.5× raw spawn+join) is judged on the
//! *paired* median: each round runs the baseline and the runtime path back
//! to back (the order flipping every round), the operation and draining
//! comparisons take turns for 30 s (`ROCKETMQ_BENCH_PAIRED_SECS`) over fresh
//! runtimes, and the median of per-round ratios is taken, with its
//! quartiles (see `support::interleaved_paired`: the reference machine
//! changes state every few tens of seconds).
//!
//! `draining_submission` starts N threads (N = 1, 4, 8) behind a barrier;
//! each submits 10,000 / N trivial draining-operation tasks through its own
//! operation and times every call. The three modes alternate per round. The
//! summary gives per-call percentiles and the median submission wall time of
//! a round; the target (8 threads into one shared group within 2× of one
//! group per thread) is judged on the paired median of the round wall-time
//! ratio.
//!
//! The allocation counts come from a counting global allocator (it adds a
//! thread-local check to every allocation of both sides).
//!
//! `permit_acquire_release` times every acquire-and-release pair on N
//! threads (N = 1, 4, 8) behind a barrier: under one shared root, every
//! thread's reservation crosses the root's usage word, which is the
//! contention the process budget adds (a `Semaphore` per thread is the
//! uncontended baseline; one shared `Semaphore` the contended one). The
//! summary gives per-call percentiles per mode.
//!
//! `blocking_start_order` holds a lane of concurrency 1 with a first job,
//! submits 63 more in order from one task (each waits in the lane's queue),
//! releases the first and records the order in which the closures start:
//! the lane admits its waiters in arrival order, so `out_of_order` is 0 on
//! every round; it also gives each job's queue wait. The baseline is bare
//! `spawn_blocking`, where the 64 closures take a `Mutex` in whatever order
//! the blocking pool runs them (no order is promised).
//!
//! Output: `<target>/runtime-measurements/runtime_convergence_<label>.json`
//! with `<label>` from `ROCKETMQ_BENCH_LABEL` (default `local`).
//!
//! Run: `cargo bench --bench runtime_convergence_bench`
//! (quick iteration: `... -- --warm-up-time 1 --measurement-time 3`).

mod support;

#[path = "../tests/support/counting_alloc.rs"]
mod counting_alloc;

use std::sync::{Arc, Barrier};
use std::time::Duration;

use criterion::{BenchmarkId, Criterion};
use rocketmq_runtime::{OperationContext, RuntimeContext, TaskGroup, TaskKind};
use serde_json::{json, Map, Value};
use tokio::runtime::Runtime;
use tokio::time::Instant;

use counting_alloc::{retained_by, CountingAllocator};
use support::{
    interleaved_paired, mean_ns, median, on_worker, pair_in_order, paired_budget, percentiles,
    publish, quantile, run_criterion, runtime, target, Comparison, PairedSummary,
};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

const OPERATION_TASK: &str = "operation_task";
const TASKS: usize = 10_000;
const RAW_SPAWN: &str = "raw_tokio_spawn_join";
const OPERATION_SPAWN: &str = "operation_spawn_wait";
const DRAINING_SPAWN: &str = "draining_operation_spawn_wait";
const SUBMISSION_THREADS: [usize; 3] = [1, 4, 8];
const SUBMISSION_ROUNDS: usize = 15;

/// One timed path of the `operation_task` group.
#[derive(Debug, Clone, Copy)]
enum TaskPath {
    Raw,
    Operation,
    Draining,
}

impl TaskPath {
    fn function(self) -> &'static str {
        match self {
            Self::Raw => RAW_SPAWN,
            Self::Operation => OPERATION_SPAWN,
            Self::Draining => DRAINING_SPAWN,
        }
    }

    /// Spawns `n` trivial tasks and waits for all of them; returns the time.
    async fn run(self, n: usize, group: TaskGroup) -> Duration {
        match self {
            Self::Raw => {
                let started = Instant::now();
                let handles: Vec<_> = (0..n).map(|_| tokio::spawn(async {})).collect();
                for handle in handles {
                    handle.await.expect("raw task");
                }
                started.elapsed()
            }
            Self::Operation | Self::Draining => {
                let operation = OperationContext::new(
                    (Instant::now() + Duration::from_secs(3_600)).into_std(),
                    TaskKind::Worker,
                );
                let started = Instant::now();
                for _ in 0..n {
                    let spawned = if matches!(self, Self::Operation) {
                        group.spawn_operation(&operation, "request", async {})
                    } else {
                        group.spawn_draining_operation(&operation, "request", async {})
                    };
                    spawned.expect("open group");
                }
                let settled = operation
                    .wait(&group, Duration::from_secs(60))
                    .await
                    .expect("owner");
                let elapsed = started.elapsed();
                assert!(settled, "every operation task settles");
                elapsed
            }
        }
    }
}

fn harness_group(rt: &Runtime, name: &'static str) -> TaskGroup {
    rt.block_on(async {
        RuntimeContext::try_from_current(name)
            .expect("inside the benchmark runtime")
            .root_group()
            .clone()
    })
}

fn bench_operation_task(c: &mut Criterion) {
    let rt = runtime();
    let group = harness_group(&rt, "bench");
    let mut bench = c.benchmark_group(OPERATION_TASK);
    for path in [TaskPath::Raw, TaskPath::Operation, TaskPath::Draining] {
        bench.bench_with_input(BenchmarkId::new(path.function(), TASKS), &TASKS, |b, &n| {
            b.iter_custom(|iterations| {
                let group = group.clone();
                on_worker(&rt, async move {
                    let mut total = Duration::ZERO;
                    for _ in 0..iterations {
                        total += path.run(n, group.clone()).await;
                    }
                    total
                })
            });
        });
    }
    bench.finish();
}

/// Minimum rounds of each paired comparison.
const PAIRED_MIN_ROUNDS: usize = 41;
/// Default length of the paired pass (`ROCKETMQ_BENCH_PAIRED_SECS`).
const PAIRED_SECS: u64 = 30;

/// The paired pass of `operation_task`: operation and draining operation
/// against raw spawn+join, taking turns (see `support::interleaved_paired`).
fn paired_operation_tasks() -> Vec<PairedSummary> {
    let side = |rt: &Runtime, path: TaskPath| {
        let group = harness_group(rt, "paired");
        on_worker(rt, async move { path.run(TASKS, group).await })
    };
    let comparisons: Vec<Comparison<'_>> = [TaskPath::Operation, TaskPath::Draining]
        .into_iter()
        .map(|tracked| Comparison {
            key: format!(
                "{OPERATION_TASK}/{TASKS}: {} / {RAW_SPAWN}",
                tracked.function()
            ),
            round: Box::new(move |rt: &Runtime, raw_first: bool| {
                pair_in_order(raw_first, || side(rt, tracked), || side(rt, TaskPath::Raw))
            }),
        })
        .collect();
    interleaved_paired(&comparisons, paired_budget(PAIRED_SECS), PAIRED_MIN_ROUNDS)
}

/// The JSON of one paired comparison.
fn paired_json(summary: &PairedSummary) -> Value {
    json!({
        "key": summary.key,
        "median_ratio": summary.median,
        "p25": summary.p25,
        "p75": summary.p75,
        "rounds": summary.rounds,
        "tracked_median_ns": summary.tracked_ns,
        "raw_median_ns": summary.baseline_ns,
    })
}

/// Where the submitting threads put their tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Raw,
    SharedGroup,
    GroupPerThread,
}

impl Mode {
    const ALL: [Mode; 3] = [Mode::Raw, Mode::SharedGroup, Mode::GroupPerThread];

    fn label(self) -> &'static str {
        match self {
            Self::Raw => "raw_tokio_spawn",
            Self::SharedGroup => "shared_group",
            Self::GroupPerThread => "group_per_thread",
        }
    }
}

/// `call_p50_ns`, `call_p90_ns`, `call_p99_ns`, `call_max_ns` and `calls`
/// of per-call latencies.
fn call_percentiles(calls: &mut [f64]) -> Map<String, Value> {
    let mut fields = percentiles(calls, &[0.50, 0.90, 0.99], |label| {
        format!("call_{label}_ns")
    });
    fields.insert("calls".to_owned(), json!(calls.len()));
    fields
}

/// One round: `threads` threads submit `TASKS / threads` tasks each, timing
/// every call. Returns (submission wall time, per-call latencies in ns).
fn submission_round(
    rt: &Runtime,
    root: &TaskGroup,
    mode: Mode,
    threads: usize,
) -> (Duration, Vec<f64>) {
    let per_thread = TASKS / threads;
    let shared = root.try_child("shared").expect("open root");
    let groups: Vec<TaskGroup> = (0..threads)
        .map(|_| match mode {
            Mode::GroupPerThread => root.try_child("per-thread").expect("open root"),
            _ => shared.clone(),
        })
        .collect();
    let operations: Vec<OperationContext> = (0..threads)
        .map(|_| OperationContext::without_deadline(TaskKind::Worker))
        .collect();
    let start = Arc::new(Barrier::new(threads + 1));
    let workers: Vec<_> = groups
        .iter()
        .zip(&operations)
        .map(|(group, operation)| {
            let (group, operation, handle) =
                (group.clone(), operation.clone(), rt.handle().clone());
            let start = Arc::clone(&start);
            std::thread::spawn(move || {
                let mut latencies = Vec::with_capacity(per_thread);
                let mut raw_handles = Vec::new();
                start.wait();
                for _ in 0..per_thread {
                    let call = Instant::now();
                    if mode == Mode::Raw {
                        raw_handles.push(handle.spawn(async {}));
                    } else {
                        group
                            .spawn_draining_operation(&operation, "request", async {})
                            .expect("open group");
                    }
                    latencies.push(call.elapsed().as_nanos() as f64);
                }
                (Instant::now(), latencies, raw_handles)
            })
        })
        .collect();
    start.wait();
    let started = Instant::now();
    let mut finished = started;
    let mut latencies = Vec::with_capacity(TASKS);
    let mut raw_handles = Vec::new();
    for worker in workers {
        let (done, calls, handles) = worker.join().expect("submitting thread");
        finished = finished.max(done);
        latencies.extend(calls);
        raw_handles.extend(handles);
    }
    // Untimed: let every task settle before the next round (on the
    // runtime itself: a current-thread runtime runs tasks only there).
    rt.block_on(async {
        for raw in raw_handles {
            raw.await.expect("raw task");
        }
        for (operation, group) in operations.iter().zip(&groups) {
            assert!(operation
                .wait(group, Duration::from_secs(60))
                .await
                .expect("owner"));
        }
    });
    (finished - started, latencies)
}

fn submission_pass() -> Value {
    let rt = runtime();
    let root = harness_group(&rt, "submission");
    let mut results = Map::new();
    let mut shared_vs_per_thread = Map::new();
    for threads in SUBMISSION_THREADS {
        let mut walls: Vec<Vec<f64>> = vec![Vec::new(); Mode::ALL.len()];
        let mut calls: Vec<Vec<f64>> = vec![Vec::new(); Mode::ALL.len()];
        let mut round_ratios = Vec::with_capacity(SUBMISSION_ROUNDS);
        for round in 0..=SUBMISSION_ROUNDS {
            let mut order = Mode::ALL;
            order.rotate_left(round % Mode::ALL.len());
            let mut wall_of = [0.0; 3];
            for mode in order {
                let (wall, latencies) = submission_round(&rt, &root, mode, threads);
                let index = mode as usize;
                wall_of[index] = wall.as_nanos() as f64;
                if round > 0 {
                    // Round 0 warms every path.
                    walls[index].push(wall_of[index]);
                    calls[index].extend(latencies);
                }
            }
            if round > 0 {
                round_ratios.push(
                    wall_of[Mode::SharedGroup as usize]
                        / wall_of[Mode::GroupPerThread as usize].max(f64::MIN_POSITIVE),
                );
            }
        }
        let mut by_mode = Map::new();
        for mode in Mode::ALL {
            let index = mode as usize;
            let mut fields = call_percentiles(&mut calls[index]);
            fields.insert(
                "round_wall_median_ns".to_owned(),
                json!(median(&mut walls[index])),
            );
            by_mode.insert(mode.label().to_owned(), Value::Object(fields));
        }
        let ratio = median(&mut round_ratios);
        shared_vs_per_thread.insert(threads.to_string(), json!(ratio));
        results.insert(threads.to_string(), Value::Object(by_mode));
    }
    json!({
        "threads": results,
        "shared_over_per_thread_wall_ratio": shared_vs_per_thread,
        "rounds": SUBMISSION_ROUNDS,
        "tasks_per_round": TASKS,
    })
}

/// Heap bytes retained by an idle group, an operation and a child context.
fn allocations() -> Value {
    let rt = runtime();
    rt.block_on(async {
        let harness = RuntimeContext::try_from_current("allocations").expect("inside Tokio");
        let root = harness.root_group().clone();
        let context = harness.service_context("components");
        // Warm lazily created state (child maps, thread-locals) first.
        let _warm = (root.try_child("warm"), context.component("warm"));
        let (group, group_bytes) = retained_by(|| root.try_child("idle").expect("open"));
        let (operation, operation_bytes) =
            retained_by(|| OperationContext::without_deadline(TaskKind::Worker));
        let (child, child_bytes) = retained_by(|| context.component("child"));
        drop((group, operation, child));
        json!({
            "idle_group_bytes": group_bytes,
            "operation_bytes": operation_bytes,
            "child_context_bytes": child_bytes,
        })
    })
}

const PERMIT_CALLS: usize = 100_000;
const PERMIT_THREADS: [usize; 3] = [1, 4, 8];

/// How permits are taken in `permit_acquire_release`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PermitMode {
    /// One `Semaphore` per thread (no contention).
    SemaphorePerThread,
    /// One `Semaphore` for every thread.
    SharedSemaphore,
    /// One child budget per thread under one shared `process` root.
    BudgetSharedRoot,
}

impl PermitMode {
    const ALL: [PermitMode; 3] = [
        PermitMode::SemaphorePerThread,
        PermitMode::SharedSemaphore,
        PermitMode::BudgetSharedRoot,
    ];

    fn label(self) -> &'static str {
        match self {
            Self::SemaphorePerThread => "semaphore_per_thread",
            Self::SharedSemaphore => "shared_semaphore",
            Self::BudgetSharedRoot => "budget_shared_root",
        }
    }
}

/// One round of `threads` threads, each timing `PERMIT_CALLS / threads`
/// acquire-and-release pairs; returns the per-call latencies in ns.
fn permit_round(mode: PermitMode, threads: usize) -> Vec<f64> {
    use rocketmq_runtime::{BudgetLimit, FullPolicy, ResourceBudgetTree};
    use tokio::sync::Semaphore;

    let per_thread = PERMIT_CALLS / threads;
    let tree = ResourceBudgetTree::new(
        "process",
        BudgetLimit::new(usize::MAX, 1 << 30, FullPolicy::Reject),
    )
    .expect("valid root");
    let shared = Arc::new(Semaphore::new(1 << 20));
    let start = Arc::new(Barrier::new(threads));
    let workers: Vec<_> = (0..threads)
        .map(|index| {
            let budget = tree
                .root()
                .child(
                    format!("component-{index}"),
                    BudgetLimit::new(1 << 16, 1 << 24, FullPolicy::Reject),
                )
                .expect("fits");
            let own = Semaphore::new(1 << 16);
            let shared = Arc::clone(&shared);
            let start = Arc::clone(&start);
            std::thread::spawn(move || {
                let mut latencies = Vec::with_capacity(per_thread);
                start.wait();
                for _ in 0..per_thread {
                    let call = Instant::now();
                    match mode {
                        PermitMode::SemaphorePerThread => {
                            drop(own.try_acquire().expect("room"));
                        }
                        PermitMode::SharedSemaphore => {
                            drop(shared.try_acquire().expect("room"));
                        }
                        PermitMode::BudgetSharedRoot => {
                            drop(budget.try_acquire_data(64).expect("room"));
                        }
                    }
                    latencies.push(call.elapsed().as_nanos() as f64);
                }
                latencies
            })
        })
        .collect();
    let latencies = workers
        .into_iter()
        .flat_map(|worker| worker.join().expect("permit thread"))
        .collect();
    assert_eq!(
        tree.root().snapshot().current_count,
        0,
        "every permit released"
    );
    latencies
}

/// Per-call percentiles of `permit_acquire_release`, the modes taking
/// turns over `SUBMISSION_ROUNDS` rounds (round 0 warms).
fn permit_pass() -> Value {
    let mut results = Map::new();
    for threads in PERMIT_THREADS {
        let mut calls: Vec<Vec<f64>> = vec![Vec::new(); PermitMode::ALL.len()];
        for round in 0..=SUBMISSION_ROUNDS {
            let mut order = PermitMode::ALL;
            order.rotate_left(round % PermitMode::ALL.len());
            for mode in order {
                let latencies = permit_round(mode, threads);
                if round > 0 {
                    calls[mode as usize].extend(latencies);
                }
            }
        }
        let mut by_mode = Map::new();
        for mode in PermitMode::ALL {
            by_mode.insert(
                mode.label().to_owned(),
                Value::Object(call_percentiles(&mut calls[mode as usize])),
            );
        }
        results.insert(threads.to_string(), Value::Object(by_mode));
    }
    json!({ "threads": results, "rounds": SUBMISSION_ROUNDS, "calls_per_round": PERMIT_CALLS })
}

const ORDER_JOBS: usize = 64;
const ORDER_ROUNDS: usize = 20;

type StartLog = Arc<std::sync::Mutex<Vec<usize>>>;

/// Closures that started after one submitted later than them.
fn out_of_order(log: &StartLog) -> usize {
    let order = log.lock().expect("order").clone();
    order
        .iter()
        .enumerate()
        .filter(|(position, index)| order[..*position].iter().any(|earlier| earlier > index))
        .count()
}

/// One lane round: the first job holds the lane (concurrency 1), the other
/// 63 are submitted in order (each in the lane's queue before the next),
/// then the first is released. Returns the out-of-order starts and the
/// queued jobs' waits in ns.
fn lane_round(
    owner: &rocketmq_runtime::RuntimeOwner,
    lane: &rocketmq_runtime::BlockingExecutor,
) -> (usize, Vec<f64>) {
    let log: StartLog = Arc::new(std::sync::Mutex::new(Vec::with_capacity(ORDER_JOBS)));
    let waits = owner.block_on(async {
        let (release, hold) = std::sync::mpsc::channel::<()>();
        let (running, first_runs) = tokio::sync::oneshot::channel::<()>();
        let first = {
            let (lane, log) = (lane.clone(), Arc::clone(&log));
            tokio::spawn(async move {
                lane.spawn_io("first", move || {
                    log.lock().expect("order").push(0);
                    let _ = running.send(());
                    hold.recv().expect("released");
                })
                .await
            })
        };
        first_runs.await.expect("the first job runs");
        let mut jobs = Vec::with_capacity(ORDER_JOBS);
        for index in 1..ORDER_JOBS {
            let (queue, log) = (lane.clone(), Arc::clone(&log));
            let submitted = Instant::now();
            jobs.push(tokio::spawn(async move {
                queue
                    .spawn_io("ordered", move || {
                        log.lock().expect("order").push(index);
                        submitted.elapsed().as_nanos() as f64
                    })
                    .await
            }));
            // The submission is in the lane's queue before the next one.
            while lane.snapshot().queued < index {
                tokio::task::yield_now().await;
            }
        }
        release.send(()).expect("the first job waits");
        first.await.expect("joined").expect("ran");
        let mut waits = Vec::with_capacity(ORDER_JOBS);
        for job in jobs {
            waits.push(job.await.expect("joined").expect("ran"));
        }
        waits
    });
    (out_of_order(&log), waits)
}

/// One baseline round: the same jobs through bare `spawn_blocking`.
fn raw_round(rt: &Runtime) -> usize {
    let log: StartLog = Arc::new(std::sync::Mutex::new(Vec::with_capacity(ORDER_JOBS)));
    rt.block_on(async {
        let (release, hold) = std::sync::mpsc::channel::<()>();
        let (running, first_runs) = tokio::sync::oneshot::channel::<()>();
        let first = {
            let log = Arc::clone(&log);
            tokio::task::spawn_blocking(move || {
                log.lock().expect("order").push(0);
                let _ = running.send(());
                hold.recv().expect("released");
            })
        };
        first_runs.await.expect("the first job runs");
        let jobs: Vec<_> = (1..ORDER_JOBS)
            .map(|index| {
                let log = Arc::clone(&log);
                tokio::task::spawn_blocking(move || log.lock().expect("order").push(index))
            })
            .collect();
        release.send(()).expect("the first job waits");
        first.await.expect("joined");
        for job in jobs {
            job.await.expect("joined");
        }
    });
    out_of_order(&log)
}

/// `blocking_start_order`: a lane of concurrency 1 against bare
/// `spawn_blocking`, `ORDER_ROUNDS` rounds each.
fn start_order_pass() -> Value {
    use rocketmq_runtime::{RuntimeConfig, RuntimeOwner};

    let mut config = RuntimeConfig::for_parallelism("start-order", 2);
    config.blocking_lane_policies.storage_io.max_concurrency = 1;
    config.blocking_lane_policies.storage_io.max_queue_depth = ORDER_JOBS * 2;
    let owner = RuntimeOwner::plan(config)
        .expect("valid")
        .build()
        .expect("runtime");
    let lane = owner
        .root_context()
        .component("ordered")
        .storage_io()
        .clone();
    let rt = runtime();
    let (mut lane_out_of_order, mut raw_out_of_order) = (0, 0);
    let mut waits = Vec::new();
    for _ in 0..ORDER_ROUNDS {
        let (out_of_order, round_waits) = lane_round(&owner, &lane);
        lane_out_of_order += out_of_order;
        waits.extend(round_waits);
        raw_out_of_order += raw_round(&rt);
    }
    waits.sort_by(f64::total_cmp);
    drop(lane);
    let report = owner.shutdown_runtime_blocking().expect("outside Tokio");
    assert!(report.is_healthy(), "{}", report.to_json());
    assert_eq!(
        lane_out_of_order, 0,
        "a lane starts its waiters in arrival order"
    );
    json!({
        "rounds": ORDER_ROUNDS,
        "jobs_per_round": ORDER_JOBS,
        "lane_out_of_order": lane_out_of_order,
        "raw_spawn_blocking_out_of_order": raw_out_of_order,
        "lane_queue_wait_p50_ns": quantile(&waits, 0.50),
        "lane_queue_wait_p99_ns": quantile(&waits, 0.99),
    })
}

/// Targets, judged on paired medians.
const OPERATION_TARGET: f64 = 1.5;
const SHARED_GROUP_TARGET: f64 = 2.0;

fn main() {
    support::warm_heap();
    let Some(run_started) = run_criterion(bench_operation_task) else {
        return;
    };
    let mut criterion_means = Map::new();
    for path in [TaskPath::Raw, TaskPath::Operation, TaskPath::Draining] {
        if let Some(mean) = mean_ns(OPERATION_TASK, path.function(), TASKS, run_started) {
            criterion_means.insert(
                format!("{OPERATION_TASK}/{}/{TASKS}", path.function()),
                json!(mean),
            );
        }
    }
    let paired: Vec<Value> = paired_operation_tasks().iter().map(paired_json).collect();
    let submission = submission_pass();
    let allocations = allocations();
    let permits = permit_pass();
    let start_order = start_order_pass();
    let shared_8 = submission["shared_over_per_thread_wall_ratio"]["8"]
        .as_f64()
        .unwrap_or(f64::NAN);
    let ratio_of = |index: usize| paired[index]["median_ratio"].as_f64().unwrap_or(f64::NAN);
    let targets = json!([
        target(
            paired[0]["key"].as_str().unwrap_or_default(),
            OPERATION_TARGET,
            ratio_of(0)
        ),
        target(
            paired[1]["key"].as_str().unwrap_or_default(),
            OPERATION_TARGET,
            ratio_of(1)
        ),
        target(
            "draining_submission/8 threads: shared_group / group_per_thread (round wall time)",
            SHARED_GROUP_TARGET,
            shared_8,
        ),
        target(
            "allocations: idle operation bytes",
            256.0,
            allocations["operation_bytes"].as_f64().unwrap_or(f64::NAN),
        ),
    ]);
    let summary = json!({
        "bench": "runtime_convergence_bench",
        "label": std::env::var("ROCKETMQ_BENCH_LABEL").unwrap_or_else(|_| "local".to_owned()),
        "criterion_mean_ns": criterion_means,
        "paired_median_ratios": paired,
        "draining_submission": submission,
        "allocations": allocations,
        "permit_acquire_release": permits,
        "blocking_start_order": start_order,
        "targets": targets,
    });
    let label = std::env::var("ROCKETMQ_BENCH_LABEL").unwrap_or_else(|_| "local".to_owned());
    publish(&format!("runtime_convergence_{label}.json"), &summary);
}
