//! Diagnostics over stable task populations against a plain walk of the
//! same records.
//!
//! | Measure | Baseline | Runtime path |
//! | --- | --- | --- |
//! | `aggregate/<n>` (paired) | a `Vec` per group of `(kind, start, name)` records, walked into the same per-kind tally | `diagnostics_view_v2` (no detail list) over `n` tasks in 8 child groups |
//! | `v1/<n>` (paired) | the same walk | `diagnostics_view_v1` |
//! | `detail_list/<n>` (paired) | the same walk | `diagnostics_view_v2` with a detail list of 8 entries from a scan of 64 |
//! | `details/100k vs 1k` (paired) | `diagnostics_task_details(7, 3)` over 1,000 tasks | the same request over 100,000 tasks |
//! | `groups/<g>` | the walk of 1,000 records | `diagnostics_view_v2` over 1,000 tasks spread over `g` child groups |
//! | `depth/<d>` | the walk of 1,000 records | `diagnostics_view_v2` over 1,000 tasks in 32 groups nested `d` deep |
//! | `metrics/100000` (paired) | the harness root's `diagnostics_view_v2` (the same tree) | `ServiceLifecycle::metrics_text`: that view rendered as OpenMetrics text, with the lifecycle and budget families |
//!
//! Populations (`n` = 1,000, 10,000, 100,000 idle tasks of all seven kinds,
//! every one polled once so it has a start time) are built outside the
//! timed regions on the benchmark runtime; a view's time includes dropping
//! it. Targets: the aggregate and V1 views over 100,000 tasks within 3× of
//! the walk, and a (7, 3) detail request over 100,000 tasks within 2× of
//! the same request over 1,000 (bounded, not proportional); a `/metrics`
//! scrape within 2× of the V2 view it renders.
//!
//! Output: `<target>/runtime-measurements/runtime_diagnostics.json`.
//!
//! Run: `cargo bench --bench runtime_diagnostics_bench`.
//!
//! With `ROCKETMQ_MEASURE_SAMPLING=1` the bench also takes independent
//! samples and writes `<target>/runtime-measurements/sampling-costs.json`:
//!
//! 1. 101 samples of each population (1,000, 10,000, 100,000 tasks) and
//!    detail case (V2 aggregate, V2 with a detail list, V1, a (7, 3) detail
//!    request): each sample times one call and counts the allocation and
//!    reallocation requests (and bytes) the sampling thread made during it,
//!    with a counting global allocator. Allocations of other threads, live
//!    or peak process memory are not counted; setup, teardown and the
//!    returned view's destruction are outside the timer;
//! 2. three pairs of 5,000 submit/completion observations: 5,000 tasks
//!    spawned into a group of the 100,000-task population, each submission
//!    call timed, and each task's time from submission to its first poll,
//!    without a sampler and then with one taking a V2 view every 10 ms on
//!    another thread; the percentiles of both and their ratio. Submissions
//!    are paced (50 per millisecond) so a round spans many sampler periods.

mod support;

#[path = "../tests/support/counting_alloc.rs"]
mod counting_alloc;

use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use criterion::Criterion;
use rocketmq_runtime::{
    ChildServiceContext, RuntimeComponent, RuntimeContext, RuntimeDiagnosticsInputs,
    RuntimeDiagnosticsViewOptionsV2, ServiceLifecycle, ServiceLifecycleConfig, TaskGroup, TaskKind,
    TaskName,
};
use serde_json::json;
use tokio::runtime::Runtime;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use counting_alloc::CountingAllocator;
use support::{paired_median, percentiles, publish, quantile, run_criterion, runtime, target};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

const ROUNDS: usize = 15;
const SIZES: [usize; 3] = [1_000, 10_000, 100_000];
const CHILDREN: usize = 8;
const THRESHOLD: Duration = Duration::from_secs(30);

/// A stable population: `tasks` idle tasks of every kind in the child
/// groups of one component, each polled once.
struct Population {
    harness: RuntimeContext,
    context: ChildServiceContext,
    /// Held so the child groups stay registered.
    _groups: Vec<TaskGroup>,
    /// The same records as plain vectors, one per group.
    raw: Vec<Vec<RawRecord>>,
    stop: CancellationToken,
}

/// What the baseline walks: a task's kind (as its index in
/// `TaskKind::ALL`), start and name.
struct RawRecord {
    kind: usize,
    started: Option<Instant>,
    _name: TaskName,
}

/// `tasks` tasks spread round robin over `shape` (the groups, created by
/// the caller in the component).
fn populate(
    rt: &Runtime,
    tasks: usize,
    shape: impl FnOnce(&ChildServiceContext) -> Vec<TaskGroup>,
) -> Population {
    rt.block_on(async move {
        let harness = RuntimeContext::try_from_current("diagnostics-bench").expect("runtime");
        let context = harness.service_context("population");
        let groups = shape(&context);
        let stop = CancellationToken::new();
        let polled = Arc::new(AtomicUsize::new(0));
        let mut raw: Vec<Vec<RawRecord>> = groups.iter().map(|_| Vec::new()).collect();
        for index in 0..tasks {
            let group = index % groups.len();
            let kind = TaskKind::ALL[index % TaskKind::ALL.len()];
            let (stop, polled) = (stop.clone(), Arc::clone(&polled));
            groups[group]
                .spawn("idle", kind, async move {
                    polled.fetch_add(1, Ordering::Relaxed);
                    stop.cancelled().await;
                })
                .expect("spawned");
            raw[group].push(RawRecord {
                kind: index % TaskKind::ALL.len(),
                started: Some(Instant::now()),
                _name: TaskName::from("idle"),
            });
        }
        while polled.load(Ordering::Relaxed) < tasks {
            tokio::task::yield_now().await;
        }
        Population {
            harness,
            context,
            _groups: groups,
            raw,
            stop,
        }
    })
}

/// `count` child groups of the component.
fn flat(count: usize) -> impl FnOnce(&ChildServiceContext) -> Vec<TaskGroup> {
    move |context| {
        (0..count)
            .map(|index| {
                context
                    .task_group()
                    .try_child(format!("child-{index}"))
                    .expect("child")
            })
            .collect()
    }
}

/// 32 groups in chains `depth` deep.
fn nested(depth: usize) -> impl FnOnce(&ChildServiceContext) -> Vec<TaskGroup> {
    move |context| {
        let mut groups = Vec::new();
        for chain in 0..32 / depth {
            let mut parent = context.task_group().clone();
            for level in 0..depth {
                let child = parent
                    .try_child(format!("chain-{chain}-{level}"))
                    .expect("child");
                groups.push(child.clone());
                parent = child;
            }
        }
        groups
    }
}

impl Population {
    fn shutdown(self, rt: &Runtime) {
        self.stop.cancel();
        let _ = rt.block_on(self.harness.shutdown_tasks(Duration::from_secs(30)));
    }
}

/// The baseline: the per-kind tally (active, long running, oldest) of
/// every record, read off plain vectors with one clock read.
fn raw_walk(raw: &[Vec<RawRecord>]) -> [(usize, usize, Duration); 7] {
    let now = Instant::now();
    let mut tally = [(0, 0, Duration::ZERO); 7];
    for group in raw {
        for record in group {
            let elapsed = record.started.map_or(Duration::ZERO, |started| {
                now.saturating_duration_since(started)
            });
            let entry = &mut tally[record.kind];
            entry.0 += 1;
            if record.started.is_some() && elapsed >= THRESHOLD {
                entry.1 += 1;
            }
            entry.2 = entry.2.max(elapsed);
        }
    }
    tally
}

/// Times `reps` calls of `body`.
fn timed<T>(reps: usize, mut body: impl FnMut() -> T) -> Duration {
    let started = Instant::now();
    for _ in 0..reps {
        black_box(body());
    }
    started.elapsed()
}

fn aggregate(
    population: &Population,
) -> impl FnMut() -> rocketmq_runtime::RuntimeDiagnosticsViewV2 + '_ {
    || {
        population.context.diagnostics_view_v2(
            RuntimeComponent::Broker,
            RuntimeDiagnosticsInputs::default(),
        )
    }
}

fn with_details(
    population: &Population,
) -> impl FnMut() -> rocketmq_runtime::RuntimeDiagnosticsViewV2 + '_ {
    || {
        population.context.diagnostics_view_v2_with_options(
            RuntimeComponent::Broker,
            RuntimeDiagnosticsInputs::default(),
            RuntimeDiagnosticsViewOptionsV2 {
                max_detail_entries: 8,
                detail_scan_budget: 64,
                ..Default::default()
            },
        )
    }
}

/// Views per timed section for a population of `tasks`.
fn reps_for(tasks: usize) -> usize {
    (200_000 / tasks).clamp(5, 400)
}

fn bench(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("diagnostics");
    group.sample_size(10);
    for tasks in [1_000, 100_000] {
        let population = populate(&rt, tasks, flat(CHILDREN));
        group.bench_function(format!("view_v2/{tasks}"), |b| {
            b.iter(aggregate(&population))
        });
        group.bench_function(format!("raw_walk/{tasks}"), |b| {
            b.iter(|| raw_walk(&population.raw));
        });
        group.bench_function(format!("details_7_3/{tasks}"), |b| {
            b.iter(|| {
                population
                    .context
                    .task_group()
                    .diagnostics_task_details(7, 3)
            });
        });
        population.shutdown(&rt);
    }
    group.finish();
}

const SAMPLES: usize = 101;
const OBSERVED_TASKS: usize = 5_000;
const SAMPLER_DELAY: Duration = Duration::from_millis(10);
const OBSERVATION_PAIRS: usize = 3;

/// `p50`, `p90`, `p99`, `max` and `samples` of `values`.
fn summary(mut values: Vec<f64>) -> serde_json::Value {
    let mut fields = percentiles(&mut values, &[0.50, 0.90, 0.99], str::to_owned);
    fields.insert("samples".to_owned(), json!(values.len()));
    serde_json::Value::Object(fields)
}

/// `SAMPLES` independent samples of one call: its time and the allocations
/// the calling thread made during it (the returned value is dropped after
/// the timer and the counter stop).
fn sample<T>(mut call: impl FnMut() -> T) -> serde_json::Value {
    let (mut nanos, mut allocations, mut bytes) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..SAMPLES {
        counting_alloc::start_counting();
        let started = Instant::now();
        let value = black_box(call());
        let elapsed = started.elapsed();
        let made = counting_alloc::allocations();
        let retained = counting_alloc::stop_counting();
        drop(value);
        nanos.push(elapsed.as_nanos() as f64);
        allocations.push(made as f64);
        bytes.push(retained as f64);
    }
    json!({
        "time_ns": summary(nanos),
        "allocations": summary(allocations),
        "net_bytes_retained_by_the_result": summary(bytes),
    })
}

/// One round of `OBSERVED_TASKS` submissions into `group`: each call's time
/// and each task's time from submission to its first poll, in ns.
fn observe_submissions(rt: &Runtime, group: &TaskGroup) -> (Vec<f64>, Vec<f64>) {
    rt.block_on(async {
        let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
        let mut submits = Vec::with_capacity(OBSERVED_TASKS);
        for index in 0..OBSERVED_TASKS {
            // Paced (50 submissions per millisecond) so a round spans many
            // sampler periods, with and without the sampler alike.
            if index % 50 == 49 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            let sender = sender.clone();
            let submitted = Instant::now();
            group
                .spawn("observed", TaskKind::Worker, async move {
                    let _ = sender.send(submitted.elapsed().as_nanos() as f64);
                })
                .expect("open group");
            submits.push(submitted.elapsed().as_nanos() as f64);
        }
        drop(sender);
        let mut completions = Vec::with_capacity(OBSERVED_TASKS);
        while let Some(nanos) = receiver.recv().await {
            completions.push(nanos);
        }
        (submits, completions)
    })
}

/// The `ROCKETMQ_MEASURE_SAMPLING=1` pass (module docs).
fn sampling_costs(rt: &Runtime) -> serde_json::Value {
    let mut cases = serde_json::Map::new();
    let mut largest = None;
    for tasks in SIZES {
        let population = populate(rt, tasks, flat(CHILDREN));
        cases.insert(
            format!("tasks/{tasks}"),
            json!({
                "aggregate_v2": sample(aggregate(&population)),
                "v2_detail_list": sample(with_details(&population)),
                "v1": sample(|| population.context.diagnostics_view_v1(RuntimeComponent::Broker)),
                "details_7_3": sample(|| population.context.task_group().diagnostics_task_details(7, 3)),
            }),
        );
        if let Some(previous) = largest.replace(population) {
            Population::shutdown(previous, rt);
        }
    }
    let population = largest.expect("three populations");
    let group = population
        .context
        .task_group()
        .try_child("observed")
        .expect("open component");
    let mut pairs = Vec::new();
    for _ in 0..OBSERVATION_PAIRS {
        let (quiet_submits, quiet_completions) = observe_submissions(rt, &group);
        let stop = CancellationToken::new();
        let sampler = {
            let (context, stop) = (population.context.clone(), stop.clone());
            let handle = rt.handle().clone();
            std::thread::spawn(move || {
                let _entered = handle.enter();
                let mut views = 0usize;
                while !stop.is_cancelled() {
                    black_box(context.diagnostics_view_v2(
                        RuntimeComponent::Broker,
                        RuntimeDiagnosticsInputs::default(),
                    ));
                    views += 1;
                    std::thread::park_timeout(SAMPLER_DELAY);
                }
                views
            })
        };
        let (sampled_submits, sampled_completions) = observe_submissions(rt, &group);
        stop.cancel();
        let views = sampler.join().expect("sampler");
        let p50 = |values: &[f64]| {
            let mut sorted = values.to_vec();
            sorted.sort_by(f64::total_cmp);
            quantile(&sorted, 0.50)
        };
        pairs.push(json!({
            "without_sampler": {
                "submit_ns": summary(quiet_submits.clone()),
                "submit_to_first_poll_ns": summary(quiet_completions.clone()),
            },
            "with_sampler": {
                "submit_ns": summary(sampled_submits.clone()),
                "submit_to_first_poll_ns": summary(sampled_completions.clone()),
                "views_taken": views,
            },
            "submit_p50_ratio": p50(&sampled_submits) / p50(&quiet_submits).max(f64::MIN_POSITIVE),
            "completion_p50_ratio": p50(&sampled_completions) / p50(&quiet_completions).max(f64::MIN_POSITIVE),
        }));
    }
    drop(group);
    population.shutdown(rt);
    json!({
        "bench": "runtime_diagnostics_bench",
        "samples_per_case": SAMPLES,
        "allocation_counting": "allocation and reallocation requests of the sampling thread only",
        "cases": cases,
        "observations": {
            "tasks_per_round": OBSERVED_TASKS,
            "sampler_delay_ms": SAMPLER_DELAY.as_millis() as u64,
            "population_tasks": SIZES[SIZES.len() - 1],
            "pairs": pairs,
        },
    })
}

fn main() {
    if run_criterion(bench).is_none() {
        return;
    }
    if std::env::var("ROCKETMQ_MEASURE_SAMPLING").is_ok_and(|value| value == "1") {
        let rt = runtime();
        publish("sampling-costs.json", &sampling_costs(&rt));
    }
    let rt = runtime();
    let mut cases = serde_json::Map::new();
    let mut targets = Vec::new();
    let mut populations = Vec::new();
    for tasks in SIZES {
        let population = populate(&rt, tasks, flat(CHILDREN));
        let reps = reps_for(tasks);
        let baseline = || timed(reps, || raw_walk(&population.raw));
        let (v2_ratio, v2_ns, raw_ns) =
            paired_median(ROUNDS, || timed(reps, aggregate(&population)), baseline);
        let (v1_ratio, v1_ns, _) = paired_median(
            ROUNDS,
            || {
                timed(reps, || {
                    population
                        .context
                        .diagnostics_view_v1(RuntimeComponent::Broker)
                })
            },
            baseline,
        );
        let (detail_ratio, detail_ns, _) =
            paired_median(ROUNDS, || timed(reps, with_details(&population)), baseline);
        let per_view = |ns: f64| ns / reps as f64;
        cases.insert(
            format!("tasks/{tasks}"),
            json!({
                "raw_walk_ns": per_view(raw_ns),
                "aggregate_v2_ns": per_view(v2_ns),
                "aggregate_v2_ratio": v2_ratio,
                "v1_ns": per_view(v1_ns),
                "v1_ratio": v1_ratio,
                "v2_detail_list_ns": per_view(detail_ns),
                "v2_detail_list_ratio": detail_ratio,
            }),
        );
        if tasks == 100_000 {
            targets.push(target(
                "aggregate/100000: diagnostics_view_v2 / raw Vec walk",
                3.0,
                v2_ratio,
            ));
            targets.push(target(
                "v1/100000: diagnostics_view_v1 / raw Vec walk",
                3.0,
                v1_ratio,
            ));
        }
        populations.push(population);
    }
    // A bounded detail request costs the same over 100x the tasks.
    const DETAIL_REPS: usize = 20_000;
    let (small, large) = (&populations[0], &populations[2]);
    let (detail_ratio, large_ns, small_ns) = paired_median(
        ROUNDS,
        || {
            timed(DETAIL_REPS, || {
                large.context.task_group().diagnostics_task_details(7, 3)
            })
        },
        || {
            timed(DETAIL_REPS, || {
                small.context.task_group().diagnostics_task_details(7, 3)
            })
        },
    );
    cases.insert(
        "details_7_3".to_string(),
        json!({
            "over_1000_ns": small_ns / DETAIL_REPS as f64,
            "over_100000_ns": large_ns / DETAIL_REPS as f64,
            "ratio": detail_ratio,
        }),
    );
    targets.push(target(
        "details (7, 3): over 100,000 tasks / over 1,000 tasks",
        2.0,
        detail_ratio,
    ));
    // A `/metrics` scrape over the 100,000-task tree against the V2 view
    // of the same tree.
    const SCRAPE_REPS: usize = 20;
    let lifecycle = rt.block_on(async {
        let lifecycle = ServiceLifecycle::new(ServiceLifecycleConfig::new("bench"))
            .with_metrics(RuntimeDiagnosticsInputs::default);
        lifecycle
            .start(&large.harness.service_context("lifecycle"))
            .await
            .expect("started");
        lifecycle
    });
    let (scrape_ratio, scrape_ns, view_ns) = paired_median(
        ROUNDS,
        || {
            timed(SCRAPE_REPS, || {
                lifecycle.metrics_text().expect("metrics on")
            })
        },
        || {
            timed(SCRAPE_REPS, || {
                large.harness.diagnostics_view_v2(
                    RuntimeComponent::Other,
                    RuntimeDiagnosticsInputs::default(),
                )
            })
        },
    );
    cases.insert(
        "metrics/100000".to_string(),
        json!({
            "scrape_ns": scrape_ns / SCRAPE_REPS as f64,
            "view_v2_ns": view_ns / SCRAPE_REPS as f64,
            "ratio": scrape_ratio,
        }),
    );
    targets.push(target(
        "metrics/100000: /metrics scrape / V2 view of the same tree",
        2.0,
        scrape_ratio,
    ));
    for population in populations {
        population.shutdown(&rt);
    }
    // Group count and depth at 1,000 tasks.
    type Shape = Box<dyn FnOnce(&ChildServiceContext) -> Vec<TaskGroup>>;
    let shapes: [(&str, Shape); 6] = [
        ("groups/8", Box::new(flat(8))),
        ("groups/64", Box::new(flat(64))),
        ("groups/512", Box::new(flat(512))),
        ("depth/1", Box::new(nested(1))),
        ("depth/4", Box::new(nested(4))),
        ("depth/16", Box::new(nested(16))),
    ];
    for (label, shape) in shapes {
        let population = populate(&rt, 1_000, shape);
        let reps = reps_for(1_000);
        let (ratio, view_ns, raw_ns) = paired_median(
            ROUNDS,
            || timed(reps, aggregate(&population)),
            || timed(reps, || raw_walk(&population.raw)),
        );
        cases.insert(
            label.to_string(),
            json!({
                "aggregate_v2_ns": view_ns / reps as f64,
                "raw_walk_ns": raw_ns / reps as f64,
                "ratio": ratio,
            }),
        );
        population.shutdown(&rt);
    }
    let summary = json!({
        "bench": "runtime_diagnostics_bench",
        "child_groups": CHILDREN,
        "rounds": ROUNDS,
        "cases": cases,
        "targets": targets,
    });
    publish("runtime_diagnostics.json", &summary);
}
