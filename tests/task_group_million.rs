//! One million tasks: a graceful shutdown and a `shutdown_now` of
//! 1,000,000 idle tracked tasks, beside `TaskTracker` + `CancellationToken`
//! doing the same work, each measured in its own child process (wall time
//! of the shutdown and peak RSS, `VmHWM`). Ignored by default; run in
//! release:
//!
//! ```text
//! cargo test --release --test task_group_million -- --ignored --nocapture
//! ```
//!
//! The parent prints the four measurements and asserts both ratios
//! (tracked / raw, time and peak RSS) within 1.5. Linux only.

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rocketmq_runtime::{RuntimeContext, TaskKind};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

const MODE_ENV: &str = "ROCKETMQ_MILLION_CHILD_MODE";
const CHILD_TEST: &str = "million_child";
const TASKS: usize = 1_000_000;
const MAX_RATIO: f64 = 1.5;
const PREFIX: &str = "MILLION ";

/// A kilobyte figure of `/proc/self/status`.
fn status_bytes(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("status");
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("a kB field");
    kib * 1_024
}

async fn parked(counter: &AtomicUsize) {
    while counter.load(Ordering::Acquire) < TASKS {
        tokio::task::yield_now().await;
    }
}

/// The child: one mode, one measurement line.
#[test]
fn million_child() {
    let Ok(mode) = std::env::var(MODE_ENV) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let elapsed = runtime.block_on(async move {
        let started_tasks = Arc::new(AtomicUsize::new(0));
        match mode.as_str() {
            "tracked-graceful" | "tracked-now" => {
                let harness = RuntimeContext::try_from_current("million").expect("runtime");
                let group = harness.service_context("tasks").task_group().clone();
                for _ in 0..TASKS {
                    let (token, started) = (group.cancellation_token(), Arc::clone(&started_tasks));
                    group
                        .spawn("idle", TaskKind::Worker, async move {
                            started.fetch_add(1, Ordering::Release);
                            token.cancelled().await;
                        })
                        .expect("open");
                }
                parked(&started_tasks).await;
                let began = tokio::time::Instant::now();
                let report = if mode == "tracked-graceful" {
                    group.shutdown(Duration::from_secs(120)).await
                } else {
                    group.shutdown_now()
                };
                let elapsed = began.elapsed();
                assert_eq!(
                    report.completed + report.cancelled + report.aborted + report.leaked,
                    TASKS
                );
                elapsed
            }
            _ => {
                let tracker = TaskTracker::new();
                let token = CancellationToken::new();
                let mut handles = Vec::with_capacity(if mode == "raw-now" { TASKS } else { 0 });
                for _ in 0..TASKS {
                    let (token, started) = (token.clone(), Arc::clone(&started_tasks));
                    let handle = tracker.spawn(async move {
                        started.fetch_add(1, Ordering::Release);
                        token.cancelled().await;
                    });
                    if mode == "raw-now" {
                        handles.push(handle.abort_handle());
                    }
                }
                parked(&started_tasks).await;
                let began = tokio::time::Instant::now();
                tracker.close();
                if mode == "raw-graceful" {
                    token.cancel();
                } else {
                    for handle in &handles {
                        handle.abort();
                    }
                }
                tracker.wait().await;
                began.elapsed()
            }
        }
    });
    println!(
        "{PREFIX}time_ns={} peak_bytes={}",
        elapsed.as_nanos(),
        status_bytes("VmHWM:")
    );
}

fn measure(mode: &str) -> (f64, f64) {
    let exe = std::env::current_exe().expect("test binary");
    let output = Command::new(exe)
        .args(["--exact", CHILD_TEST, "--nocapture", "--test-threads=1"])
        .env(MODE_ENV, mode)
        .output()
        .expect("child");
    assert!(
        output.status.success(),
        "{mode}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .find_map(|line| line.split_once(PREFIX).map(|(_, rest)| rest))
        .unwrap_or_else(|| panic!("{mode}: no measurement in {stdout}"));
    let field = |name: &str| -> f64 {
        line.split_whitespace()
            .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
            .and_then(|value| value.parse().ok())
            .expect("a number")
    };
    (field("time_ns"), field("peak_bytes"))
}

#[test]
#[ignore = "a million tasks per child process: run in release with --ignored"]
fn a_million_tasks_shut_down_within_1_5x_of_task_tracker() {
    if !cfg!(target_os = "linux") {
        println!("skipped: needs /proc/self/status");
        return;
    }
    for (tracked, raw) in [
        ("tracked-graceful", "raw-graceful"),
        ("tracked-now", "raw-now"),
    ] {
        let (tracked_ns, tracked_peak) = measure(tracked);
        let (raw_ns, raw_peak) = measure(raw);
        let (time_ratio, peak_ratio) = (tracked_ns / raw_ns, tracked_peak / raw_peak);
        println!(
            "{tracked}: {:.0} ms, peak {:.0} MiB; {raw}: {:.0} ms, peak {:.0} MiB; time ratio {time_ratio:.2}, peak ratio {peak_ratio:.2}",
            tracked_ns / 1e6,
            tracked_peak / 1_048_576.0,
            raw_ns / 1e6,
            raw_peak / 1_048_576.0,
        );
        assert!(
            time_ratio <= MAX_RATIO,
            "{tracked} time ratio {time_ratio:.2}"
        );
        assert!(
            peak_ratio <= MAX_RATIO,
            "{tracked} peak ratio {peak_ratio:.2}"
        );
    }
}
