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
//! On a shared 2-core machine, Criterion's functions run one after another and
//! machine drift between them moves a ratio of two means by ±20 %. So after
//! Criterion, a *paired* pass runs each baseline and its runtime path back
//! to back (the order flipping every round) and takes the median of the
//! per-round ratios: drift hits both sides of a pair alike. The comparisons
//! take turns for 60 s (`ROCKETMQ_BENCH_PAIRED_SECS`), over a fresh runtime
//! every five rounds, so each sees the same mix of the machine's states
//! (see `support::interleaved_paired`); the quartiles of the per-round
//! ratios are reported beside the median. The targets are judged on the
//! paired medians; the Criterion means stay in the summary as absolute
//! figures.
//!
//! Everything is written to
//! `<target>/runtime-measurements/task_group_lifecycle.json` and printed.
//! Criterion estimates missing from this run (`--test`, a filtered run) are
//! left out; the paired pass is skipped under `--test`/`--list`.
//!
//! Run: `cargo bench --bench task_group_lifecycle_bench`
//! (quick iteration: `... -- --warm-up-time 1 --measurement-time 3`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

mod support;

use criterion::{BenchmarkId, Criterion, SamplingMode};
use rocketmq_runtime::{RuntimeContext, TaskGroup, TaskKind};
use serde_json::{json, Map};
use support::{
    interleaved_paired, mean_ns, on_worker, pair_in_order, paired_budget, publish, run_criterion,
    runtime, Comparison, PairedSummary,
};
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

/// A harness root group on `rt`.
fn root_group(rt: &Runtime) -> TaskGroup {
    rt.block_on(async {
        RuntimeContext::try_from_current("bench")
            .expect("inside the benchmark runtime")
            .root_group()
            .clone()
    })
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

/// One timed measurement of one benchmark function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    RawSpawn,
    TrackerSpawn,
    GroupSpawn,
    RawGraceful,
    GroupGraceful,
    RawAbort,
    GroupAbort,
}

impl Case {
    fn function(self) -> &'static str {
        match self {
            Case::RawSpawn => RAW_SPAWN,
            Case::TrackerSpawn => TRACKER_SPAWN,
            Case::GroupSpawn => GROUP_SPAWN,
            Case::RawGraceful => RAW_GRACEFUL,
            Case::GroupGraceful => GROUP_GRACEFUL,
            Case::RawAbort => RAW_ABORT,
            Case::GroupAbort => GROUP_ABORT,
        }
    }

    /// Runs the case once with `n` tasks; returns the timed section only.
    async fn run(self, n: usize, root: TaskGroup) -> Duration {
        match self {
            Case::RawSpawn => {
                let start = Instant::now();
                let handles: Vec<JoinHandle<()>> = (0..n).map(|_| tokio::spawn(async {})).collect();
                for handle in handles {
                    handle.await.expect("raw task");
                }
                start.elapsed()
            }
            Case::TrackerSpawn => {
                let start = Instant::now();
                let tracker = TaskTracker::new();
                for _ in 0..n {
                    drop(tracker.spawn(async {}));
                }
                tracker.close();
                tracker.wait().await;
                start.elapsed()
            }
            Case::GroupSpawn => {
                let tasks = root.try_child("spawn-completion").expect("child group");
                let start = Instant::now();
                for _ in 0..n {
                    tasks
                        .spawn("bench-task", TaskKind::Worker, async {})
                        .expect("tracked spawn");
                }
                let report = tasks.shutdown(Duration::from_secs(30)).await;
                let elapsed = start.elapsed();
                // A task still running when the shutdown cancels the group counts
                // as cancelled.
                assert_eq!(
                    report.completed + report.cancelled,
                    n,
                    "every task returned"
                );
                assert!(report.is_healthy(), "healthy report");
                elapsed
            }
            Case::RawGraceful => {
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
                start.elapsed()
            }
            Case::GroupGraceful => {
                let services = root.try_child("graceful").expect("child group");
                let token = services.cancellation_token();
                let parked = Arc::new(AtomicUsize::new(0));
                for _ in 0..n {
                    services
                        .spawn_service("idle", idle_service(token.clone(), Arc::clone(&parked)))
                        .expect("tracked spawn");
                }
                wait_parked(&parked, n).await;
                let start = Instant::now();
                let report = services.shutdown(Duration::from_secs(60)).await;
                let elapsed = start.elapsed();
                assert_eq!(
                    report.cancelled, n,
                    "every service returned at cancellation"
                );
                assert!(report.is_healthy(), "healthy report");
                elapsed
            }
            Case::RawAbort => {
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
                let elapsed = start.elapsed();
                assert_eq!(cancelled, n, "every raw task aborted");
                elapsed
            }
            Case::GroupAbort => {
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
                let elapsed = start.elapsed();
                assert_eq!(
                    report.aborted + report.leaked,
                    n,
                    "every task aborted or still being destroyed"
                );
                elapsed
            }
        }
    }
}

/// The benchmark groups: name, sizes, functions, paired (tracked, baseline)
/// comparisons and paired rounds.
struct Suite {
    group: &'static str,
    sizes: &'static [usize],
    cases: &'static [Case],
    heavy: bool,
}

const SUITES: [Suite; 3] = [
    Suite {
        group: SPAWN_COMPLETION,
        sizes: &SPAWN_SIZES,
        cases: &[Case::RawSpawn, Case::TrackerSpawn, Case::GroupSpawn],
        heavy: false,
    },
    Suite {
        group: GRACEFUL_SHUTDOWN,
        sizes: &GRACEFUL_SIZES,
        cases: &[Case::RawGraceful, Case::GroupGraceful],
        heavy: true,
    },
    Suite {
        group: SHUTDOWN_NOW,
        sizes: &SHUTDOWN_NOW_SIZES,
        cases: &[Case::RawAbort, Case::GroupAbort],
        heavy: true,
    },
];

fn bench_suites(c: &mut Criterion) {
    for suite in &SUITES {
        let mut group = c.benchmark_group(suite.group);
        if suite.heavy {
            group
                .sample_size(HEAVY_SAMPLE_SIZE)
                .sampling_mode(SamplingMode::Flat);
        }
        for &n in suite.sizes {
            for &case in suite.cases {
                // A fresh runtime per function, built outside the timed region.
                let rt = runtime();
                let root = root_group(&rt);
                group.bench_with_input(BenchmarkId::new(case.function(), n), &n, |b, &n| {
                    b.iter_custom(|iters| {
                        let root = root.clone();
                        on_worker(&rt, async move {
                            let mut total = Duration::ZERO;
                            for _ in 0..iters {
                                total += case.run(n, root.clone()).await;
                            }
                            total
                        })
                    });
                });
            }
        }
        group.finish();
    }
}

/// Minimum rounds of each paired comparison.
const PAIRED_MIN_ROUNDS: usize = 41;
/// Default length of the paired pass (`ROCKETMQ_BENCH_PAIRED_SECS`).
const PAIRED_SECS: u64 = 60;

/// The paired pass: every (tracked, baseline) comparison below, taking
/// turns for [`PAIRED_SECS`] (see `support::interleaved_paired`).
fn paired_pass() -> Vec<PairedSummary> {
    // `ROCKETMQ_BENCH_PAIRED=spawn_completion,shutdown_now` limits the pass.
    let only = std::env::var("ROCKETMQ_BENCH_PAIRED").ok();
    let wanted = |group: &str| {
        only.as_deref()
            .is_none_or(|only| only.split(',').any(|g| g == group))
    };
    let pairs = [
        (
            SPAWN_COMPLETION,
            &SPAWN_SIZES[..],
            Case::GroupSpawn,
            Case::RawSpawn,
        ),
        (
            SPAWN_COMPLETION,
            &SPAWN_SIZES[..],
            Case::GroupSpawn,
            Case::TrackerSpawn,
        ),
        (
            GRACEFUL_SHUTDOWN,
            &GRACEFUL_SIZES[..],
            Case::GroupGraceful,
            Case::RawGraceful,
        ),
        (
            SHUTDOWN_NOW,
            &SHUTDOWN_NOW_SIZES[..],
            Case::GroupAbort,
            Case::RawAbort,
        ),
    ];
    let mut comparisons = Vec::new();
    for (group, sizes, tracked, baseline) in pairs {
        if !wanted(group) {
            continue;
        }
        for &n in sizes {
            let side = move |rt: &Runtime, case: Case| {
                let root = root_group(rt);
                on_worker(rt, async move { case.run(n, root).await })
            };
            comparisons.push(Comparison {
                key: format!(
                    "{group}/{n}: {} / {}",
                    tracked.function(),
                    baseline.function()
                ),
                round: Box::new(move |rt: &Runtime, baseline_first: bool| {
                    pair_in_order(baseline_first, || side(rt, tracked), || side(rt, baseline))
                }),
            });
        }
    }
    if comparisons.is_empty() {
        return Vec::new();
    }
    interleaved_paired(&comparisons, paired_budget(PAIRED_SECS), PAIRED_MIN_ROUNDS)
}

/// The overhead targets, judged on the paired medians.
const TARGETS: [(&str, f64); 4] = [
    (
        "spawn_completion/10000: task_group_spawn / raw_tokio_spawn_join",
        1.3,
    ),
    (
        "spawn_completion/10000: task_group_spawn / tokio_util_task_tracker",
        1.0,
    ),
    (
        "graceful_shutdown/100000: task_group_shutdown / raw_token_tracker",
        1.5,
    ),
    (
        "shutdown_now/10000: task_group_shutdown_now / raw_abort_join",
        1.5,
    ),
];

/// Prints the ratios and writes the JSON summary.
fn write_summary(run_started: SystemTime, paired: &[PairedSummary]) {
    let mut estimates = Map::new();
    for suite in &SUITES {
        for &n in suite.sizes {
            for &case in suite.cases {
                if let Some(mean) = mean_ns(suite.group, case.function(), n, run_started) {
                    estimates.insert(
                        format!("{}/{}/{n}", suite.group, case.function()),
                        json!(mean),
                    );
                }
            }
        }
    }
    let mut criterion_ratios = Map::new();
    let mut paired_ratios = Map::new();
    println!("\ntask_group_lifecycle ratios (paired median; Criterion mean/mean):");
    for result in paired {
        let (group, rest) = result.key.split_once(": ").unwrap_or((&result.key, ""));
        let (tracked, baseline) = rest.split_once(" / ").unwrap_or((rest, ""));
        let (group, size) = group.split_once('/').unwrap_or((group, ""));
        let mean = |function: &str| {
            estimates
                .get(&format!("{group}/{function}/{size}"))?
                .as_f64()
        };
        let criterion = mean(tracked).zip(mean(baseline)).map(|(t, b)| t / b);
        match criterion {
            Some(value) => {
                println!(
                    "  {:<70} {:.3} ({} rounds); {value:.3}",
                    result.key, result.median, result.rounds
                );
                criterion_ratios.insert(result.key.clone(), json!(value));
            }
            None => println!(
                "  {:<70} {:.3} ({} rounds)",
                result.key, result.median, result.rounds
            ),
        }
        println!(
            "      median timed section: tracked {:.0} ns, baseline {:.0} ns",
            result.tracked_ns, result.baseline_ns
        );
        println!(
            "      per-round ratio quartiles: {:.3} .. {:.3}",
            result.p25, result.p75
        );
        paired_ratios.insert(result.key.clone(), result.to_json());
    }
    let mut targets = Vec::new();
    println!("targets (paired median):");
    for (key, limit) in TARGETS {
        if let Some(result) = paired.iter().find(|result| result.key == key) {
            let met = result.median <= limit;
            println!(
                "  {key:<70} {:.3} <= {limit:.2}: {}",
                result.median,
                if met { "met" } else { "MISSED" }
            );
            targets.push(json!({"ratio": key, "value": result.median, "limit": limit, "met": met}));
        }
    }
    if paired.is_empty() && estimates.is_empty() {
        println!("nothing measured in this run: task_group_lifecycle.json not written");
        return;
    }
    let summary = json!({
        "bench": "task_group_lifecycle_bench",
        "unit": "ns",
        "runtime": if std::env::var("ROCKETMQ_BENCH_FLAVOR").as_deref() == Ok("current_thread") {
            "tokio current-thread"
        } else {
            "tokio multi-thread, 2 workers; spawning from a worker task"
        },
        "available_parallelism": std::thread::available_parallelism().map(|n| n.get()).ok(),
        "criterion_means": estimates,
        "criterion_ratios": criterion_ratios,
        "paired_median_ratios": paired_ratios,
        "targets": targets,
    });
    publish("task_group_lifecycle.json", &summary);
}

fn main() {
    support::warm_heap();
    let Some(run_started) = run_criterion(bench_suites) else {
        return;
    };
    let paired = paired_pass();
    write_summary(run_started, &paired);
}
