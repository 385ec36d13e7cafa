//! Task-group lifecycle overhead against raw Tokio baselines.
//!
//! Every group measures the raw baseline beside the `TaskGroup` path in the
//! same run, so the overhead is a ratio:
//!
//! | Group | Raw baseline(s) | Runtime path |
//! | --- | --- | --- |
//! | `spawn_completion/{1000,10000}` | `tokio::spawn` + join every handle; `TaskTracker` spawn + close + wait | `TaskGroup::spawn` + `shutdown` (waits for idle) |
//! | `graceful_shutdown/{10000,100000}` | `CancellationToken::cancel` + `TaskTracker` close + wait | `TaskGroup::shutdown` of parked services |
//! | `shutdown_now/10000` | abort every `JoinHandle` + await them | `TaskGroup::shutdown_now` + wait until `task_count() == 0` |
//!
//! Every Tokio runtime (multi-thread, 2 workers) is built outside the timed
//! region, and both paths spawn from a task running on a runtime worker.
//! Setup (spawning and parking the idle tasks of the shutdown groups) is not
//! timed: the benches use `iter_custom` and time only the measured section.
//!
//! After the run, the Criterion estimates of this run are collected into
//! `<target>/runtime-measurements/task_group_lifecycle.json` (means in
//! nanoseconds, the tracked/raw and tracked/tracker ratios and the overhead
//! targets), and the ratios are printed. Nothing is written when an estimate
//! of this run is missing (`--test`, `--list`, a filtered run, `--no-run`).
//!
//! Run: `cargo bench --bench task_group_lifecycle_bench`
//! (quick iteration: `... -- --warm-up-time 1 --measurement-time 3`).

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use criterion::{BenchmarkId, Criterion, SamplingMode};
use rocketmq_runtime::{RuntimeContext, TaskGroup, TaskKind};
use serde_json::{json, Map, Value};
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

const SPAWN_COMPLETION: &str = "spawn_completion";
const GRACEFUL_SHUTDOWN: &str = "graceful_shutdown";
const SHUTDOWN_NOW: &str = "shutdown_now";

const SPAWN_SIZES: [usize; 2] = [1_000, 10_000];
const GRACEFUL_SIZES: [usize; 2] = [10_000, 100_000];
const SHUTDOWN_NOW_SIZES: [usize; 1] = [10_000];

const RAW_SPAWN: &str = "raw_tokio_spawn_join";
const TRACKER_SPAWN: &str = "tokio_util_task_tracker";
const GROUP_SPAWN: &str = "task_group_spawn";
const RAW_GRACEFUL: &str = "raw_token_tracker";
const GROUP_GRACEFUL: &str = "task_group_shutdown";
const RAW_ABORT: &str = "raw_abort_join";
const GROUP_ABORT: &str = "task_group_shutdown_now";

/// Sample size of the groups whose untimed setup spawns and parks many tasks.
const HEAVY_SAMPLE_SIZE: usize = 10;

/// A multi-thread runtime with 2 workers (built outside every timed region).
fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("build the benchmark runtime")
}

/// A harness root group on `rt`.
fn root_group(rt: &Runtime) -> TaskGroup {
    rt.block_on(async {
        RuntimeContext::try_from_current("bench")
            .expect("inside the benchmark runtime")
            .root_group()
            .clone()
    })
}

/// Runs `body` in a task on a runtime worker, so every path spawns from the
/// same kind of thread.
fn on_worker<F>(rt: &Runtime, body: F) -> Duration
where
    F: Future<Output = Duration> + Send + 'static,
{
    rt.block_on(async { tokio::spawn(body).await.expect("benchmark task panicked") })
}

/// Waits (untimed) until `n` tasks have registered their wakeup and parked.
async fn wait_parked(parked: &AtomicUsize, n: usize) {
    while parked.load(Ordering::Acquire) < n {
        tokio::task::yield_now().await;
    }
    // The last counters are bumped just before `Pending` is returned.
    for _ in 0..4 {
        tokio::task::yield_now().await;
    }
}

/// An idle service: registers its cancellation waiter, reports itself
/// parked, then waits for cancellation.
async fn idle_service(token: CancellationToken, parked: Arc<AtomicUsize>) {
    let cancelled = token.cancelled();
    tokio::pin!(cancelled);
    if futures::poll!(cancelled.as_mut()).is_pending() {
        parked.fetch_add(1, Ordering::Release);
        cancelled.await;
    }
}

/// A task that never completes, after reporting itself parked.
async fn pending_task(parked: Arc<AtomicUsize>) {
    parked.fetch_add(1, Ordering::Release);
    std::future::pending::<()>().await;
}

fn bench_spawn_completion(c: &mut Criterion) {
    let mut group = c.benchmark_group(SPAWN_COMPLETION);
    for n in SPAWN_SIZES {
        let rt = runtime();
        group.bench_with_input(BenchmarkId::new(RAW_SPAWN, n), &n, |b, &n| {
            b.iter_custom(|iters| {
                on_worker(&rt, async move {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let start = Instant::now();
                        let handles: Vec<JoinHandle<()>> =
                            (0..n).map(|_| tokio::spawn(async {})).collect();
                        for handle in handles {
                            handle.await.expect("raw task");
                        }
                        total += start.elapsed();
                    }
                    total
                })
            });
        });
        drop(rt);

        let rt = runtime();
        group.bench_with_input(BenchmarkId::new(TRACKER_SPAWN, n), &n, |b, &n| {
            b.iter_custom(|iters| {
                on_worker(&rt, async move {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let start = Instant::now();
                        let tracker = TaskTracker::new();
                        for _ in 0..n {
                            drop(tracker.spawn(async {}));
                        }
                        tracker.close();
                        tracker.wait().await;
                        total += start.elapsed();
                    }
                    total
                })
            });
        });
        drop(rt);

        let rt = runtime();
        let root = root_group(&rt);
        group.bench_with_input(BenchmarkId::new(GROUP_SPAWN, n), &n, |b, &n| {
            b.iter_custom(|iters| {
                let root = root.clone();
                on_worker(&rt, async move {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let tasks = root.try_child("spawn-completion").expect("child group");
                        let start = Instant::now();
                        for _ in 0..n {
                            tasks
                                .spawn("bench-task", TaskKind::Worker, async {})
                                .expect("tracked spawn");
                        }
                        let report = tasks.shutdown(Duration::from_secs(30)).await;
                        total += start.elapsed();
                        assert_eq!(report.completed, n as u64, "every task completed");
                        assert!(report.is_healthy(), "healthy report");
                    }
                    total
                })
            });
        });
        drop(root);
        drop(rt);
    }
    group.finish();
}

fn bench_graceful_shutdown(c: &mut Criterion) {
    let mut group = c.benchmark_group(GRACEFUL_SHUTDOWN);
    group
        .sample_size(HEAVY_SAMPLE_SIZE)
        .sampling_mode(SamplingMode::Flat);
    for n in GRACEFUL_SIZES {
        let rt = runtime();
        group.bench_with_input(BenchmarkId::new(RAW_GRACEFUL, n), &n, |b, &n| {
            b.iter_custom(|iters| {
                on_worker(&rt, async move {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let token = CancellationToken::new();
                        let tracker = TaskTracker::new();
                        let parked = Arc::new(AtomicUsize::new(0));
                        for _ in 0..n {
                            drop(tracker.spawn(idle_service(token.clone(), Arc::clone(&parked))));
                        }
                        wait_parked(&parked, n).await;

                        let start = Instant::now();
                        token.cancel();
                        tracker.close();
                        tracker.wait().await;
                        total += start.elapsed();
                    }
                    total
                })
            });
        });
        drop(rt);

        let rt = runtime();
        let root = root_group(&rt);
        group.bench_with_input(BenchmarkId::new(GROUP_GRACEFUL, n), &n, |b, &n| {
            b.iter_custom(|iters| {
                let root = root.clone();
                on_worker(&rt, async move {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let services = root.try_child("graceful").expect("child group");
                        let token = services.cancellation_token();
                        let parked = Arc::new(AtomicUsize::new(0));
                        for _ in 0..n {
                            services
                                .spawn_service(
                                    "idle",
                                    idle_service(token.clone(), Arc::clone(&parked)),
                                )
                                .expect("tracked spawn");
                        }
                        wait_parked(&parked, n).await;

                        let start = Instant::now();
                        let report = services.shutdown(Duration::from_secs(60)).await;
                        total += start.elapsed();
                        assert_eq!(report.completed, n as u64, "every service returned");
                        assert!(report.is_healthy(), "healthy report");
                    }
                    total
                })
            });
        });
        drop(root);
        drop(rt);
    }
    group.finish();
}

fn bench_shutdown_now(c: &mut Criterion) {
    let mut group = c.benchmark_group(SHUTDOWN_NOW);
    group
        .sample_size(HEAVY_SAMPLE_SIZE)
        .sampling_mode(SamplingMode::Flat);
    for n in SHUTDOWN_NOW_SIZES {
        let rt = runtime();
        group.bench_with_input(BenchmarkId::new(RAW_ABORT, n), &n, |b, &n| {
            b.iter_custom(|iters| {
                on_worker(&rt, async move {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let parked = Arc::new(AtomicUsize::new(0));
                        let handles: Vec<JoinHandle<()>> = (0..n)
                            .map(|_| tokio::spawn(pending_task(Arc::clone(&parked))))
                            .collect();
                        wait_parked(&parked, n).await;

                        let start = Instant::now();
                        for handle in &handles {
                            handle.abort();
                        }
                        let mut cancelled = 0usize;
                        for handle in handles {
                            cancelled += usize::from(handle.await.is_err());
                        }
                        total += start.elapsed();
                        assert_eq!(cancelled, n, "every raw task aborted");
                    }
                    total
                })
            });
        });
        drop(rt);

        let rt = runtime();
        let root = root_group(&rt);
        group.bench_with_input(BenchmarkId::new(GROUP_ABORT, n), &n, |b, &n| {
            b.iter_custom(|iters| {
                let root = root.clone();
                on_worker(&rt, async move {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let tasks = root.try_child("shutdown-now").expect("child group");
                        let parked = Arc::new(AtomicUsize::new(0));
                        for _ in 0..n {
                            tasks
                                .spawn(
                                    "pending",
                                    TaskKind::Worker,
                                    pending_task(Arc::clone(&parked)),
                                )
                                .expect("tracked spawn");
                        }
                        wait_parked(&parked, n).await;

                        let start = Instant::now();
                        let report = tasks.shutdown_now();
                        while tasks.task_count() != 0 {
                            tokio::task::yield_now().await;
                        }
                        total += start.elapsed();
                        assert_eq!(
                            report.aborted + report.leaked,
                            n as u64,
                            "every task aborted or still being destroyed"
                        );
                    }
                    total
                })
            });
        });
        drop(root);
        drop(rt);
    }
    group.finish();
}

/// `CARGO_TARGET_DIR` or `target`.
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| PathBuf::from("target"), PathBuf::from)
}

/// Criterion's output directory (`CRITERION_HOME` or `<target>/criterion`).
fn criterion_dir() -> PathBuf {
    std::env::var_os("CRITERION_HOME").map_or_else(|| target_dir().join("criterion"), PathBuf::from)
}

/// The mean (ns) Criterion estimated for one benchmark during this run, if
/// its `new/estimates.json` was written after `run_started`.
fn mean_ns(group: &str, function: &str, size: usize, run_started: SystemTime) -> Option<f64> {
    let path = criterion_dir()
        .join(group)
        .join(function)
        .join(size.to_string())
        .join("new")
        .join("estimates.json");
    let written = std::fs::metadata(&path).ok()?.modified().ok()?;
    // A stale file from an earlier run is not evidence of this one (1 s slack
    // for coarse file-system timestamps).
    if written + Duration::from_secs(1) < run_started {
        return None;
    }
    let estimates: Value = serde_json::from_slice(&std::fs::read(&path).ok()?).ok()?;
    estimates["mean"]["point_estimate"].as_f64()
}

/// `numerator / denominator` of two benchmark means.
struct Ratio {
    key: String,
    numerator: String,
    denominator: String,
}

fn ratio(group: &str, size: usize, tracked: &str, baseline: &str) -> Ratio {
    Ratio {
        key: format!("{group}/{size}: {tracked} / {baseline}"),
        numerator: format!("{group}/{tracked}/{size}"),
        denominator: format!("{group}/{baseline}/{size}"),
    }
}

/// Reads this run's estimates, prints the ratios and writes the JSON summary.
fn write_summary(run_started: SystemTime) {
    let benches: Vec<(&str, &str, usize)> = SPAWN_SIZES
        .iter()
        .flat_map(|&n| [RAW_SPAWN, TRACKER_SPAWN, GROUP_SPAWN].map(|f| (SPAWN_COMPLETION, f, n)))
        .chain(
            GRACEFUL_SIZES
                .iter()
                .flat_map(|&n| [RAW_GRACEFUL, GROUP_GRACEFUL].map(|f| (GRACEFUL_SHUTDOWN, f, n))),
        )
        .chain(
            SHUTDOWN_NOW_SIZES
                .iter()
                .flat_map(|&n| [RAW_ABORT, GROUP_ABORT].map(|f| (SHUTDOWN_NOW, f, n))),
        )
        .collect();

    let mut estimates = Map::new();
    let mut missing = Vec::new();
    for &(group, function, size) in &benches {
        let key = format!("{group}/{function}/{size}");
        match mean_ns(group, function, size, run_started) {
            Some(mean) => {
                estimates.insert(key, json!(mean));
            }
            None => missing.push(key),
        }
    }
    if estimates.is_empty() {
        println!("no Criterion estimates from this run: task_group_lifecycle.json not written");
        return;
    }

    let mut ratios_wanted = Vec::new();
    for n in SPAWN_SIZES {
        ratios_wanted.push(ratio(SPAWN_COMPLETION, n, GROUP_SPAWN, RAW_SPAWN));
        ratios_wanted.push(ratio(SPAWN_COMPLETION, n, GROUP_SPAWN, TRACKER_SPAWN));
    }
    for n in GRACEFUL_SIZES {
        ratios_wanted.push(ratio(GRACEFUL_SHUTDOWN, n, GROUP_GRACEFUL, RAW_GRACEFUL));
    }
    for n in SHUTDOWN_NOW_SIZES {
        ratios_wanted.push(ratio(SHUTDOWN_NOW, n, GROUP_ABORT, RAW_ABORT));
    }
    // The overhead targets the runtime path must meet.
    let targets = [
        (ratio(SPAWN_COMPLETION, 10_000, GROUP_SPAWN, RAW_SPAWN), 1.3),
        (
            ratio(SPAWN_COMPLETION, 10_000, GROUP_SPAWN, TRACKER_SPAWN),
            1.0,
        ),
        (
            ratio(GRACEFUL_SHUTDOWN, 100_000, GROUP_GRACEFUL, RAW_GRACEFUL),
            1.5,
        ),
        (ratio(SHUTDOWN_NOW, 10_000, GROUP_ABORT, RAW_ABORT), 1.5),
    ];

    let value_of = |spec: &Ratio| -> Option<f64> {
        let numerator = estimates.get(&spec.numerator)?.as_f64()?;
        let denominator = estimates.get(&spec.denominator)?.as_f64()?;
        (denominator > 0.0).then(|| numerator / denominator)
    };

    let mut ratios = Map::new();
    println!("\ntask_group_lifecycle ratios (mean / mean):");
    for spec in &ratios_wanted {
        if let Some(value) = value_of(spec) {
            println!("  {:<66} {value:.3}", spec.key);
            ratios.insert(spec.key.clone(), json!(value));
        }
    }
    let mut target_results = Vec::new();
    println!("targets:");
    for (spec, limit) in &targets {
        if let Some(value) = value_of(spec) {
            let met = value <= *limit;
            let verdict = if met { "met" } else { "MISSED" };
            println!("  {:<66} {value:.3} <= {limit:.2}: {verdict}", spec.key);
            target_results.push(json!({
                "ratio": spec.key,
                "value": value,
                "limit": limit,
                "met": met,
            }));
        }
    }

    if !missing.is_empty() {
        println!(
            "not writing task_group_lifecycle.json: no estimate from this run for {} benchmark(s) ({})",
            missing.len(),
            missing.join(", ")
        );
        return;
    }

    let summary = json!({
        "bench": "task_group_lifecycle_bench",
        "unit": "ns",
        "statistic": "mean.point_estimate",
        "runtime": "tokio multi-thread, 2 workers; spawning from a worker task",
        "available_parallelism": std::thread::available_parallelism().map(|n| n.get()).ok(),
        "estimates": estimates,
        "ratios": ratios,
        "targets": target_results,
    });
    let dir = target_dir().join("runtime-measurements");
    let path = dir.join("task_group_lifecycle.json");
    match write_json(&dir, &path, &summary) {
        Ok(()) => println!("wrote {}", path.display()),
        Err(error) => eprintln!("could not write {}: {error}", path.display()),
    }
}

fn write_json(dir: &Path, path: &Path, summary: &Value) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let text = serde_json::to_string_pretty(summary).map_err(std::io::Error::other)?;
    std::fs::write(path, text + "\n")
}

fn main() {
    let run_started = SystemTime::now();
    let mut criterion = Criterion::default().configure_from_args();
    bench_spawn_completion(&mut criterion);
    bench_graceful_shutdown(&mut criterion);
    bench_shutdown_now(&mut criterion);
    criterion.final_summary();
    write_summary(run_started);
}
