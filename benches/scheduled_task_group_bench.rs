//! Scheduler overhead and drift against a raw `tokio::time::interval` loop.
//!
//! | Part | Baseline | Runtime path |
//! | --- | --- | --- |
//! | `per_run/{mode}` (Criterion + paired) | `interval(10 ms)` loop spawning one empty task per tick (fixed-rate modes) or running the empty work inline (fixed delay: `sleep(10 ms)` after each run) | a `ScheduledTaskGroup` schedule of the same empty work at a 10 ms period |
//! | `drift` (real clock) | — | an idle fixed-rate schedule at 10 ms for 100 ticks: how late each run started against the absolute grid |
//!
//! The per-run overhead is measured on a current-thread runtime with Tokio
//! time paused: `sleep(TICKS × 10 ms)` then auto-advances through every
//! tick, so the wall time of that sleep is the machinery's cost of `TICKS`
//! runs (timer, driver, spawn, settlement, metrics) with no waiting. Both
//! sides run on the same runtime; the paired pass alternates them.
//!
//! Output: `<target>/runtime-measurements/scheduled_task_group.json`.
//!
//! Run: `cargo bench --bench scheduled_task_group_bench`.

mod support;

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use criterion::{BenchmarkId, Criterion};
use rocketmq_runtime::{
    MissedTickPolicy, RuntimeContext, ScheduledExecutionPolicy, ScheduledTaskConfig,
    ScheduledTaskGroup, TaskGroup,
};
use serde_json::{json, Map, Value};
use tokio::runtime::Runtime;
use tokio::time::Instant;

use support::{mean_ns_of, paired_median, publish, quantile, run_criterion, runtime, target};

const PER_RUN: &str = "per_run";
const PERIOD: Duration = Duration::from_millis(10);
const TICKS: u32 = 1_000;
const PAIRED_ROUNDS: usize = 31;
const DRIFT_TICKS: u32 = 100;
const ONE: NonZeroUsize = NonZeroUsize::MIN;

#[derive(Debug, Clone, Copy)]
#[allow(clippy::enum_variant_names)] // named after the three `ScheduleMode`s
enum Mode {
    FixedDelay,
    FixedRateNoOverlap,
    FixedRate,
}

impl Mode {
    const ALL: [Mode; 3] = [Mode::FixedDelay, Mode::FixedRateNoOverlap, Mode::FixedRate];

    fn label(self) -> &'static str {
        match self {
            Self::FixedDelay => "fixed_delay",
            Self::FixedRateNoOverlap => "fixed_rate_no_overlap",
            Self::FixedRate => "fixed_rate",
        }
    }

    fn config(self, name: String) -> (ScheduledTaskConfig, ScheduledExecutionPolicy) {
        match self {
            Self::FixedDelay => (
                ScheduledTaskConfig::fixed_delay(name, PERIOD),
                ScheduledExecutionPolicy::default(),
            ),
            Self::FixedRateNoOverlap => (
                ScheduledTaskConfig::fixed_rate_no_overlap(name, PERIOD),
                ScheduledExecutionPolicy::default(),
            ),
            Self::FixedRate => (
                ScheduledTaskConfig::fixed_rate(name, PERIOD),
                ScheduledExecutionPolicy::bounded(ONE, MissedTickPolicy::Skip),
            ),
        }
    }
}

/// The real clock: Tokio's clock is paused in the per-run measurements.
#[allow(clippy::disallowed_methods)]
fn wall_clock() -> std::time::Instant {
    std::time::Instant::now()
}

/// A current-thread runtime with Tokio time paused (auto-advancing).
fn paused_runtime() -> Runtime {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("benchmark runtime");
    rt.block_on(async { tokio::time::pause() });
    rt
}

fn harness_group(rt: &Runtime) -> TaskGroup {
    rt.block_on(async {
        RuntimeContext::try_from_current("bench")
            .expect("inside the runtime")
            .root_group()
            .clone()
    })
}

/// Wall time of `runs` runs, scaled to `TICKS` runs (a fixed-delay period
/// rounds up to Tokio's 1 ms timer granularity, so fewer than `TICKS` fit
/// in the simulated span, on both sides alike).
fn per_ticks(elapsed: Duration, runs: u64) -> Duration {
    assert!(runs > 0, "no run in the simulated span");
    elapsed.mul_f64(f64::from(TICKS) / runs as f64)
}

/// About `TICKS` runs of an empty schedule (the simulated span of `TICKS`
/// periods); returns the wall time scaled to `TICKS` runs.
fn scheduled(rt: &Runtime, root: &TaskGroup, mode: Mode) -> Duration {
    let group = root.try_child("schedules").expect("open root");
    let scheduler = ScheduledTaskGroup::new(group.clone());
    let (config, policy) = mode.config("empty".to_owned());
    let elapsed = rt.block_on(async {
        let started = wall_clock();
        let _ = scheduler
            .schedule(config, policy, || async {})
            .expect("registered");
        // Auto-advance: every tick is processed without waiting.
        tokio::time::sleep(PERIOD * TICKS - PERIOD / 2).await;
        started.elapsed()
    });
    let runs = scheduler.snapshot()[0].runs;
    group.cancel();
    let _ = rt.block_on(group.shutdown(Duration::from_secs(5)));
    per_ticks(elapsed, runs)
}

/// The raw loop doing the same runs over the same simulated span.
fn raw(rt: &Runtime, mode: Mode) -> Duration {
    rt.block_on(async {
        let runs = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&runs);
        let started = wall_clock();
        let driver = tokio::spawn(async move {
            match mode {
                Mode::FixedDelay => loop {
                    std::future::ready(()).await;
                    counted.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(PERIOD).await;
                },
                Mode::FixedRateNoOverlap | Mode::FixedRate => {
                    let mut interval = tokio::time::interval(PERIOD);
                    loop {
                        interval.tick().await;
                        let counted = Arc::clone(&counted);
                        drop(tokio::spawn(async move {
                            counted.fetch_add(1, Ordering::Relaxed);
                        }));
                    }
                }
            }
        });
        tokio::time::sleep(PERIOD * TICKS - PERIOD / 2).await;
        let elapsed = started.elapsed();
        driver.abort();
        let _ = driver.await;
        per_ticks(elapsed, runs.load(Ordering::Relaxed))
    })
}

fn bench_per_run(c: &mut Criterion) {
    let rt = paused_runtime();
    let root = harness_group(&rt);
    let mut bench = c.benchmark_group(PER_RUN);
    bench.sample_size(20);
    for mode in Mode::ALL {
        bench.bench_with_input(
            BenchmarkId::new("raw_interval_loop", mode.label()),
            &mode,
            |b, &mode| {
                b.iter_custom(|iterations| (0..iterations).map(|_| raw(&rt, mode)).sum());
            },
        );
        bench.bench_with_input(
            BenchmarkId::new("scheduled_task_group", mode.label()),
            &mode,
            |b, &mode| {
                b.iter_custom(|iterations| {
                    (0..iterations).map(|_| scheduled(&rt, &root, mode)).sum()
                });
            },
        );
    }
    bench.finish();
}

/// Run-start lateness against the absolute grid at 10 ms, on the real clock
/// (multi-thread runtime): an idle fixed-rate schedule beside a raw
/// `interval` loop spawning the same recording task.
fn drift() -> Value {
    let rt = runtime();
    let root = harness_group(&rt);
    let group = root.try_child("drift").expect("open root");
    let scheduler = ScheduledTaskGroup::new(group.clone());
    let span = PERIOD * DRIFT_TICKS - PERIOD / 2;
    let scheduled = Arc::new(Mutex::new(Vec::with_capacity(DRIFT_TICKS as usize)));
    let scheduled_origin = rt.block_on(async {
        let recorded = Arc::clone(&scheduled);
        let origin = Instant::now();
        let (config, policy) = Mode::FixedRate.config("drift".to_owned());
        let _ = scheduler
            .schedule(config, policy, move || {
                let recorded = Arc::clone(&recorded);
                async move {
                    recorded.lock().expect("unpoisoned").push(Instant::now());
                }
            })
            .expect("registered");
        tokio::time::sleep(span).await;
        origin
    });
    group.cancel();
    let _ = rt.block_on(group.shutdown(Duration::from_secs(5)));
    let raw = Arc::new(Mutex::new(Vec::with_capacity(DRIFT_TICKS as usize)));
    let raw_origin = rt.block_on(async {
        let recorded = Arc::clone(&raw);
        let origin = Instant::now();
        let driver = tokio::spawn(async move {
            let mut interval = tokio::time::interval(PERIOD);
            loop {
                interval.tick().await;
                let recorded = Arc::clone(&recorded);
                drop(tokio::spawn(async move {
                    recorded.lock().expect("unpoisoned").push(Instant::now());
                }));
            }
        });
        tokio::time::sleep(span).await;
        driver.abort();
        origin
    });
    let scheduled = scheduled.lock().expect("unpoisoned").clone();
    let raw = raw.lock().expect("unpoisoned").clone();
    json!({
        "ticks": DRIFT_TICKS,
        "scheduled": lateness(&scheduled, scheduled_origin),
        "raw_interval": lateness(&raw, raw_origin),
        "scheduled_skips": scheduler.snapshot()[0].skips,
    })
}

/// How late each start was against `origin + k·PERIOD`, and how much that
/// lateness grew per tick (least-squares slope: drift that accumulates).
fn lateness(starts: &[Instant], origin: Instant) -> Value {
    let late_ms: Vec<f64> = starts
        .iter()
        .enumerate()
        .map(|(k, start)| {
            let on_grid = origin + PERIOD * k as u32;
            start.saturating_duration_since(on_grid).as_secs_f64() * 1e3
        })
        .collect();
    let count = late_ms.len().max(1) as f64;
    let mean = late_ms.iter().sum::<f64>() / count;
    let mean_k = (late_ms.len().saturating_sub(1)) as f64 / 2.0;
    let (mut covariance, mut variance) = (0.0, 0.0);
    for (k, late) in late_ms.iter().enumerate() {
        covariance += (k as f64 - mean_k) * (late - mean);
        variance += (k as f64 - mean_k).powi(2);
    }
    let mut sorted = late_ms.clone();
    sorted.sort_by(f64::total_cmp);
    json!({
        "runs": late_ms.len(),
        "mean_late_ms": mean,
        "p50_late_ms": quantile(&sorted, 0.5),
        "p99_late_ms": quantile(&sorted, 0.99),
        "max_late_ms": sorted.last().copied().unwrap_or(f64::NAN),
        "accumulated_drift_ms_per_tick": covariance / variance.max(f64::MIN_POSITIVE),
    })
}

const OVERHEAD_TARGET: f64 = 2.0;
const DRIFT_TARGET_MS: f64 = 1.0;

fn main() {
    let Some(run_started) = run_criterion(bench_per_run) else {
        return;
    };
    let rt = paused_runtime();
    let root = harness_group(&rt);
    let mut paired = Map::new();
    let mut criterion_means = Map::new();
    let mut targets = Vec::new();
    for mode in Mode::ALL {
        let (ratio, scheduled_ns, raw_ns) = paired_median(
            PAIRED_ROUNDS,
            || scheduled(&rt, &root, mode),
            || raw(&rt, mode),
        );
        let per_run = |ns: f64| ns / f64::from(TICKS);
        paired.insert(
            mode.label().to_owned(),
            json!({
                "median_ratio": ratio,
                "scheduled_ns_per_run": per_run(scheduled_ns),
                "raw_ns_per_run": per_run(raw_ns),
                "rounds": PAIRED_ROUNDS,
            }),
        );
        targets.push(target(
            format!("{PER_RUN}/{}: scheduled / raw interval loop", mode.label()),
            OVERHEAD_TARGET,
            ratio,
        ));
        for function in ["raw_interval_loop", "scheduled_task_group"] {
            if let Some(mean) = mean_ns_of(PER_RUN, function, mode.label(), run_started) {
                criterion_means.insert(
                    format!("{function}/{}", mode.label()),
                    json!(mean / f64::from(TICKS)),
                );
            }
        }
    }
    let drift = drift();
    for (measure, key) in [
        (
            "accumulated_drift_ms_per_tick",
            "drift: idle fixed-rate schedule at 10 ms, accumulated drift per tick (ms)",
        ),
        (
            "mean_late_ms",
            "drift: idle fixed-rate schedule at 10 ms, mean lateness of a tick (ms)",
        ),
    ] {
        let measured = drift["scheduled"][measure].as_f64().unwrap_or(f64::NAN);
        targets.push(json!({
            "key": key,
            "target": DRIFT_TARGET_MS,
            "measured": measured,
            "met": measured.abs() <= DRIFT_TARGET_MS,
            "raw_interval": drift["raw_interval"][measure],
        }));
    }
    let summary = json!({
        "bench": "scheduled_task_group_bench",
        "ticks_per_measurement": TICKS,
        "period_ms": PERIOD.as_millis() as u64,
        "criterion_mean_ns_per_run": criterion_means,
        "paired": paired,
        "drift": drift,
        "targets": targets,
    });
    publish("scheduled_task_group.json", &summary);
}
