//! Helpers shared by the benchmark binaries: the runtime they measure on,
//! Criterion's output, and the JSON summaries under
//! `<target>/runtime-measurements/`.
#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::Value;
use tokio::runtime::Runtime;

/// The benchmark runtime (built outside every timed region): multi-thread
/// with 2 workers, or current-thread with
/// `ROCKETMQ_BENCH_FLAVOR=current_thread` (no cross-core traffic: the
/// instruction overhead alone).
pub fn runtime() -> Runtime {
    let mut builder = if std::env::var("ROCKETMQ_BENCH_FLAVOR").as_deref() == Ok("current_thread") {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder.worker_threads(2);
        builder
    };
    builder
        .enable_all()
        .build()
        .expect("build the benchmark runtime")
}

/// Runs `body` in a task on a runtime worker, so every path spawns from the
/// same kind of thread.
pub fn on_worker<F, T>(rt: &Runtime, body: F) -> T
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    rt.block_on(async { tokio::spawn(body).await.expect("benchmark task panicked") })
}

/// `CARGO_TARGET_DIR` or `target`.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| PathBuf::from("target"), PathBuf::from)
}

/// Criterion's output directory (`CRITERION_HOME` or `<target>/criterion`).
pub fn criterion_dir() -> PathBuf {
    std::env::var_os("CRITERION_HOME").map_or_else(|| target_dir().join("criterion"), PathBuf::from)
}

/// The mean (ns) Criterion estimated for one benchmark during this run, if
/// its `new/estimates.json` was written after `run_started`.
pub fn mean_ns(group: &str, function: &str, size: usize, run_started: SystemTime) -> Option<f64> {
    mean_ns_of(group, function, &size.to_string(), run_started)
}

/// [`mean_ns`] for a benchmark whose parameter is any label.
pub fn mean_ns_of(
    group: &str,
    function: &str,
    parameter: &str,
    run_started: SystemTime,
) -> Option<f64> {
    let path = criterion_dir()
        .join(group)
        .join(function)
        .join(parameter)
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

pub fn write_json(dir: &Path, path: &Path, summary: &Value) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let text = serde_json::to_string_pretty(summary).map_err(std::io::Error::other)?;
    std::fs::write(path, text + "\n")
}

/// True when Criterion only lists, smoke-tests or profiles the benches
/// (`--test`, `--list`, `--profile-time`): the summary passes are skipped.
pub fn quick_mode() -> bool {
    std::env::args().any(|arg| arg == "--test" || arg == "--list" || arg == "--profile-time")
}

/// Prints `summary` and writes it to `<target>/runtime-measurements/<file>`.
pub fn publish(file: &str, summary: &Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(summary).unwrap_or_default()
    );
    write_measurements(file, summary);
}

/// Writes `summary` to `<target>/runtime-measurements/<file>` and says where.
pub fn write_measurements(file: &str, summary: &Value) {
    let dir = target_dir().join("runtime-measurements");
    let path = dir.join(file);
    match write_json(&dir, &path, summary) {
        Ok(()) => println!("wrote {}", path.display()),
        Err(error) => eprintln!("could not write {}: {error}", path.display()),
    }
}

/// The median of `values` (sorted in place); `NaN` when empty.
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The `q` quantile (0..=1, nearest rank) of sorted `values`.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// Runtimes a [`paired_median_on_runtimes`] pass spreads its rounds over.
pub const PAIRED_RUNTIMES: usize = 4;

/// Untimed pairs each runtime of [`paired_median_on_runtimes`] runs first
/// (a fresh process heap and a fresh group table settle in them).
pub const PAIRED_WARM_UPS: usize = 3;

/// [`paired_median`] with the rounds spread over [`PAIRED_RUNTIMES`] fresh
/// benchmark runtimes (each built outside the timed region, with its own
/// warm-up pairs and its own `setup`), so one runtime's thread placement on
/// the 2-vCPU machine does not decide the whole pass. `tracked` and
/// `baseline` each time one run on the runtime they are given.
pub fn paired_median_on_runtimes<S>(
    rounds: usize,
    setup: impl Fn(&Runtime) -> S,
    tracked: impl Fn(&Runtime, &S) -> Duration,
    baseline: impl Fn(&Runtime, &S) -> Duration,
) -> (f64, f64, f64) {
    let mut ratios = Vec::with_capacity(rounds);
    let mut tracked_ns = Vec::with_capacity(rounds);
    let mut baseline_ns = Vec::with_capacity(rounds);
    let per_runtime = rounds.div_ceil(PAIRED_RUNTIMES);
    let mut round = 0;
    while round < rounds {
        let rt = runtime();
        let state = setup(&rt);
        for _ in 0..PAIRED_WARM_UPS {
            tracked(&rt, &state);
            baseline(&rt, &state);
        }
        for _ in 0..per_runtime.min(rounds - round) {
            let (t, b) = if round % 2 == 0 {
                let b = baseline(&rt, &state);
                (tracked(&rt, &state), b)
            } else {
                let t = tracked(&rt, &state);
                (t, baseline(&rt, &state))
            };
            ratios.push(t.as_secs_f64() / b.as_secs_f64().max(f64::MIN_POSITIVE));
            tracked_ns.push(t.as_nanos() as f64);
            baseline_ns.push(b.as_nanos() as f64);
            round += 1;
        }
    }
    (
        median(&mut ratios),
        median(&mut tracked_ns),
        median(&mut baseline_ns),
    )
}

/// Paired comparison: runs `tracked` and `baseline` alternately for
/// `rounds` rounds (the order flips every round, after one warm-up of each)
/// and returns the median per-round `tracked / baseline` ratio with the
/// median time of each side (ns). Machine drift hits both sides of a pair
/// alike.
pub fn paired_median(
    rounds: usize,
    mut tracked: impl FnMut() -> Duration,
    mut baseline: impl FnMut() -> Duration,
) -> (f64, f64, f64) {
    tracked();
    baseline();
    let mut ratios = Vec::with_capacity(rounds);
    let mut tracked_ns = Vec::with_capacity(rounds);
    let mut baseline_ns = Vec::with_capacity(rounds);
    for round in 0..rounds {
        let (t, b) = if round % 2 == 0 {
            let b = baseline();
            (tracked(), b)
        } else {
            let t = tracked();
            (t, baseline())
        };
        ratios.push(t.as_secs_f64() / b.as_secs_f64().max(f64::MIN_POSITIVE));
        tracked_ns.push(t.as_nanos() as f64);
        baseline_ns.push(b.as_nanos() as f64);
    }
    (
        median(&mut ratios),
        median(&mut tracked_ns),
        median(&mut baseline_ns),
    )
}

/// Runs the Criterion benches `benches` registers, then returns when the
/// run started, or `None` when the summary passes should be skipped
/// (`--test`, `--list`, `--profile-time`, or `ROCKETMQ_BENCH_SKIP_PAIRED`).
pub fn run_criterion(benches: impl FnOnce(&mut criterion::Criterion)) -> Option<SystemTime> {
    let run_started = SystemTime::now();
    let mut criterion = criterion::Criterion::default().configure_from_args();
    benches(&mut criterion);
    criterion.final_summary();
    let skip = quick_mode() || std::env::var_os("ROCKETMQ_BENCH_SKIP_PAIRED").is_some();
    (!skip).then_some(run_started)
}

/// One entry of a summary's `targets`: `measured ≤ target` is met.
pub fn target(key: impl Into<String>, target: f64, measured: f64) -> Value {
    serde_json::json!({
        "key": key.into(),
        "target": target,
        "measured": measured,
        "met": measured <= target,
    })
}
