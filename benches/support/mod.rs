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

/// Puts the process heap in the state a long-running service's heap is in
/// before anything is measured: frees a 16 MiB block, which glibc's
/// allocator serves with `mmap` and which raises its dynamic mmap and trim
/// thresholds (to 16 and 32 MiB). Without this, a fresh process gives the
/// top of its heap back to the kernel after every batch that freed more
/// than 128 KiB and faults it in again on the next one: a raw
/// `tokio::spawn` + join batch of 10,000 tasks then measured 360-370 ns per
/// task instead of 220-240 on the reference machine, while the task-group
/// paths (which free finished tasks as they go) measured the same in both
/// states. Every spawn baseline is therefore measured at its best.
pub fn warm_heap() {
    let block = vec![1u8; 16 << 20];
    std::hint::black_box(&block);
    drop(block);
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

/// Prints `summary`, with the [`machine`] it ran on under `"machine"`, and
/// writes it to `<target>/runtime-measurements/<file>`.
pub fn publish(file: &str, summary: &Value) {
    let mut summary = summary.clone();
    if let Value::Object(fields) = &mut summary {
        fields.insert("machine".to_owned(), machine());
    }
    println!(
        "{}",
        serde_json::to_string_pretty(&summary).unwrap_or_default()
    );
    write_measurements(file, &summary);
}

/// What makes ratios from two machines comparable: the CPU model, the
/// kernel's clock source, the cores, and what one clock read costs (the
/// median over 21 batches of 100,000 `Instant::now()` calls). The queue
/// paths read the clock where their floors do not, so their ratios move
/// with it.
pub fn machine() -> Value {
    const BATCH: u32 = 100_000;
    let mut batches: Vec<f64> = (0..21)
        .map(|_| {
            let started = clock_now();
            for _ in 0..BATCH {
                std::hint::black_box(clock_now());
            }
            started.elapsed().as_nanos() as f64 / f64::from(BATCH)
        })
        .collect();
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split_once(':'))
                .map(|(_, model)| model.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned());
    let clocksource =
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .map(|source| source.trim().to_owned())
            .unwrap_or_else(|_| "unknown".to_owned());
    serde_json::json!({
        "cpu_model": cpu_model,
        "clocksource": clocksource,
        "available_parallelism": std::thread::available_parallelism().map_or(0, usize::from),
        "clock_read_ns": median(&mut batches),
    })
}

/// The tree's default clock read (`tokio::time::Instant::now`).
fn clock_now() -> tokio::time::Instant {
    tokio::time::Instant::now()
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

/// The `quantiles` (0..=1) of `values` (sorted here) and their maximum, as
/// JSON fields named by `key` (given `p50`, `p99`, `max`, ...): one
/// percentile summary for every bench that times single calls.
pub fn percentiles(
    values: &mut [f64],
    quantiles: &[f64],
    key: impl Fn(&str) -> String,
) -> serde_json::Map<String, Value> {
    values.sort_by(f64::total_cmp);
    let mut fields = serde_json::Map::new();
    for q in quantiles {
        let label = format!("p{}", (q * 100.0).round() as u32);
        fields.insert(key(&label), Value::from(quantile(values, *q)));
    }
    fields.insert(
        key("max"),
        Value::from(values.last().copied().unwrap_or(f64::NAN)),
    );
    fields
}

/// Runs both sides of a comparison once on the runtime it is given (the
/// baseline first when the flag is set) and returns the timed sections
/// `(tracked, baseline)`.
pub type Round<'a> = Box<dyn Fn(&Runtime, bool) -> (Duration, Duration) + 'a>;

/// One comparison of an [`interleaved_paired`] pass.
pub struct Comparison<'a> {
    /// `"<group>/<size>: <tracked> / <baseline>"`.
    pub key: String,
    pub round: Round<'a>,
}

/// What an [`interleaved_paired`] pass measured for one comparison.
#[derive(Debug, Clone)]
pub struct PairedSummary {
    pub key: String,
    pub rounds: usize,
    /// Median of the per-round `tracked / baseline` ratios (the figure the
    /// targets are judged on), with the quartiles of those ratios.
    pub median: f64,
    pub p25: f64,
    pub p75: f64,
    /// Median timed section of each side, in ns.
    pub tracked_ns: f64,
    pub baseline_ns: f64,
}

impl PairedSummary {
    /// The summary as JSON (ratios and medians).
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "median": self.median,
            "p25": self.p25,
            "p75": self.p75,
            "rounds": self.rounds,
            "tracked_median_ns": self.tracked_ns,
            "baseline_median_ns": self.baseline_ns,
        })
    }
}

/// Rounds of every comparison an [`interleaved_paired`] runtime runs before
/// the next fresh runtime is built.
pub const CYCLES_PER_RUNTIME: usize = 5;

/// How long an [`interleaved_paired`] pass runs at least:
/// `ROCKETMQ_BENCH_PAIRED_SECS` seconds, or `default_secs`.
pub fn paired_budget(default_secs: u64) -> Duration {
    let secs = std::env::var("ROCKETMQ_BENCH_PAIRED_SECS")
        .ok()
        .and_then(|secs| secs.parse().ok())
        .unwrap_or(default_secs);
    Duration::from_secs(secs)
}

/// The paired pass of a bench: every comparison runs one round per cycle
/// (tracked and baseline back to back, the order flipping every cycle), the
/// comparisons taking turns, for at least `budget` and `min_rounds` cycles.
/// Every [`CYCLES_PER_RUNTIME`] cycles a fresh benchmark runtime is built
/// (outside every timed region) and each comparison runs one untimed
/// warm-up round on it first.
///
/// On the 2-vCPU reference machine the host moves the VM between states
/// that last tens of seconds and change both sides of a pair, but not by
/// the same factor. A pass of one comparison after another puts each
/// comparison in whatever state its second happened to fall in; taking
/// turns over the whole budget gives every comparison the same mix of
/// states, and the median ratio is that of the prevailing one. The
/// quartiles show the spread.
pub fn interleaved_paired(
    comparisons: &[Comparison<'_>],
    budget: Duration,
    min_rounds: usize,
) -> Vec<PairedSummary> {
    let started = tokio::time::Instant::now();
    let mut samples: Vec<Vec<(f64, f64, f64)>> = vec![Vec::new(); comparisons.len()];
    let mut cycle = 0usize;
    while cycle < min_rounds || started.elapsed() < budget {
        let rt = runtime();
        for comparison in comparisons {
            (comparison.round)(&rt, false);
        }
        for _ in 0..CYCLES_PER_RUNTIME {
            for (comparison, samples) in comparisons.iter().zip(&mut samples) {
                let (tracked, baseline) = (comparison.round)(&rt, cycle % 2 == 0);
                samples.push((
                    tracked.as_secs_f64() / baseline.as_secs_f64().max(f64::MIN_POSITIVE),
                    tracked.as_nanos() as f64,
                    baseline.as_nanos() as f64,
                ));
            }
            cycle += 1;
        }
    }
    comparisons
        .iter()
        .zip(samples)
        .map(|(comparison, samples)| {
            let mut ratios: Vec<f64> = samples.iter().map(|sample| sample.0).collect();
            let mut tracked: Vec<f64> = samples.iter().map(|sample| sample.1).collect();
            let mut baseline: Vec<f64> = samples.iter().map(|sample| sample.2).collect();
            let median_ratio = median(&mut ratios);
            PairedSummary {
                key: comparison.key.clone(),
                rounds: ratios.len(),
                median: median_ratio,
                p25: quantile(&ratios, 0.25),
                p75: quantile(&ratios, 0.75),
                tracked_ns: median(&mut tracked),
                baseline_ns: median(&mut baseline),
            }
        })
        .collect()
}

/// Times `tracked` and `baseline` once each, in the order `baseline_first`
/// asks for; returns `(tracked, baseline)`.
pub fn pair_in_order(
    baseline_first: bool,
    tracked: impl FnOnce() -> Duration,
    baseline: impl FnOnce() -> Duration,
) -> (Duration, Duration) {
    if baseline_first {
        let b = baseline();
        (tracked(), b)
    } else {
        let t = tracked();
        (t, baseline())
    }
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

/// One entry of a summary's `targets` for a higher-is-better measure:
/// `measured ≥ target` is met.
pub fn target_at_least(key: impl Into<String>, target: f64, measured: f64) -> Value {
    serde_json::json!({
        "key": key.into(),
        "target_at_least": target,
        "measured": measured,
        "met": measured >= target,
    })
}
