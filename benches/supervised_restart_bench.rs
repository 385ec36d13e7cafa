//! The cost of one restart of a supervised service, against a hand-rolled
//! restart loop in the same run.
//!
//! | Group | Raw baseline | Runtime path |
//! | --- | --- | --- |
//! | `restart/1000` | one spawned task running 1,000 runs in a loop, each through `catch_unwind`, each failing at once (what a restart without evidence costs), joined | `spawn_supervised_service` with no backoff, failing 1,000 times and giving up, its task awaited (`wait_task`) |
//!
//! Both sides fail every run at once, so the figure is the supervisor's
//! own work per restart: the run's future and its `catch_unwind`, the
//! record under its lock (runs, failure, message), the decision, a yield
//! to the worker. The paired pass alternates the two for
//! `ROCKETMQ_BENCH_PAIRED_SECS` seconds (default 20) and reports the median
//! ratio and the nanoseconds per restart of each side to
//! `<target>/runtime-measurements/supervised_restart.json`.
//!
//! Run: `cargo bench --bench supervised_restart_bench`.

use std::panic::AssertUnwindSafe;
use std::time::Duration;

mod support;

use criterion::Criterion;
use futures::FutureExt;
use rocketmq_runtime::{RuntimeContext, ServiceRestartPolicy};
use serde_json::json;
use support::{
    interleaved_paired, on_worker, pair_in_order, paired_budget, publish, run_criterion, runtime,
    Comparison,
};
use tokio::runtime::Runtime;
use tokio::time::Instant;

/// Runs per measured batch (one start and 999 restarts).
const RUNS: u32 = 1_000;

/// A run that fails at once.
async fn failing_run(attempt: u64) -> Result<(), String> {
    Err(format!("refused (attempt {attempt})"))
}

/// The hand-rolled loop: every run through `catch_unwind`, its error
/// formatted, in one spawned task; returns the timed section.
fn hand_rolled(rt: &Runtime) -> Duration {
    on_worker(rt, async {
        let started = Instant::now();
        tokio::spawn(async {
            for attempt in 0..u64::from(RUNS) {
                let outcome = AssertUnwindSafe(failing_run(attempt)).catch_unwind().await;
                let message = match outcome {
                    Ok(Err(error)) => error,
                    Ok(Ok(())) => String::new(),
                    Err(_panic) => String::from("panic"),
                };
                std::hint::black_box(message);
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the loop");
        started.elapsed()
    })
}

/// The supervised service: 1,000 runs then a give-up, awaited through the
/// group's shutdown; returns the timed section.
fn supervised(rt: &Runtime) -> Duration {
    on_worker(rt, async {
        let group = RuntimeContext::try_from_current("bench")
            .expect("inside the benchmark runtime")
            .root_group()
            .try_child("supervised")
            .expect("child group");
        let policy = ServiceRestartPolicy::new()
            .with_backoff(Duration::ZERO, Duration::ZERO)
            .with_max_restarts(RUNS - 1, Duration::from_secs(3_600));
        let started = Instant::now();
        let id = group
            .spawn_supervised_service("upstream", policy, |run| failing_run(run.attempt()))
            .expect("spawned");
        assert!(
            group.wait_task(id, Duration::from_secs(30)).await,
            "gave up"
        );
        let elapsed = started.elapsed();
        let report = group.shutdown(Duration::from_secs(30)).await;
        assert_eq!(report.services[0].runs, u64::from(RUNS));
        assert!(report.services[0].gave_up);
        elapsed
    })
}

fn bench(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("restart");
    group.sample_size(20);
    group.bench_function("hand_rolled_loop/1000", |b| {
        b.iter_custom(|iterations| (0..iterations).map(|_| hand_rolled(&rt)).sum());
    });
    group.bench_function("supervised_service/1000", |b| {
        b.iter_custom(|iterations| (0..iterations).map(|_| supervised(&rt)).sum());
    });
    group.finish();
}

fn main() {
    support::warm_heap();
    if run_criterion(bench).is_none() {
        return;
    }
    let comparisons = [Comparison {
        key: String::from("restart/1000: supervised_service / hand_rolled_loop"),
        round: Box::new(|rt: &Runtime, baseline_first: bool| {
            pair_in_order(baseline_first, || supervised(rt), || hand_rolled(rt))
        }),
    }];
    let paired = interleaved_paired(&comparisons, paired_budget(20), 41);
    let runs = f64::from(RUNS);
    let summary = json!({
        "bench": "supervised_restart",
        "paired": paired.iter().map(|summary| (summary.key.clone(), summary.to_json())).collect::<serde_json::Map<_, _>>(),
        "per_restart_ns": paired.first().map(|summary| json!({
            "supervised_service": summary.tracked_ns / runs,
            "hand_rolled_loop": summary.baseline_ns / runs,
        })),
    });
    publish("supervised_restart.json", &summary);
}
