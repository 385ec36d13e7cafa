//! Submissions with large state from small stacks: each probe runs in a
//! child process (this test binary re-run with the probe's name), on a
//! thread with a fixed small stack, so a stack overflow is a failed test,
//! not a crashed suite. A 100 KiB future or service state is submitted
//! from a 256 KiB thread, and a 100 KiB blocking capture and result pass a
//! 1 MiB one; only boxing at the submission boundaries keeps the copies
//! off those stacks.

use std::process::Command;
use std::time::Duration;

use rocketmq_runtime::{
    OperationContext, RuntimeConfig, RuntimeOwner, ScheduledExecutionPolicy, ScheduledTaskConfig,
    ServiceManager, ServiceTask, ServiceTaskContext, ShutdownDeadline, TaskKind,
};

const PROBE_ENV: &str = "ROCKETMQ_STACK_PROBE";
const CHILD_TEST: &str = "stack_probe_child";
const STATE: usize = 100 * 1024;
/// The submitter's stack: 256 KiB in release builds. Debug builds copy
/// every value through unoptimized frames (the test's own code included),
/// so they get four times as much; the release run is the evidence:
/// `cargo test --release --test task_submission_stack`.
/// The stack of the deep-tree probes and of the scheduled probe's
/// workers.
const DEEP_STACK: usize = 1 << 20;
const SUBMITTER_STACK: usize = if cfg!(debug_assertions) { 4 } else { 1 } * 256 * 1024;

/// A future holding `STATE` bytes across an await.
async fn large_future() -> usize {
    let state = [7u8; STATE];
    tokio::task::yield_now().await;
    state.iter().map(|byte| usize::from(*byte)).sum()
}

/// A service whose loop holds `STATE` bytes across an await.
struct LargeService;

impl ServiceTask for LargeService {
    fn get_service_name(&self) -> String {
        "large-service".to_owned()
    }

    async fn run(&self, context: &ServiceTaskContext) {
        let state = [1u8; STATE];
        // Parked until the stop request (or the group's cancellation).
        while !context.is_stopped() {
            context.wait_for_running(Duration::from_secs(3_600)).await;
        }
        std::hint::black_box(&state);
    }
}

/// Shuts `owner` down and asserts its report is healthy.
fn stop_healthy(owner: RuntimeOwner) {
    let report = owner.shutdown_runtime_blocking().expect("outside Tokio");
    assert!(report.is_healthy(), "{}", report.summary());
}

fn owner() -> RuntimeOwner {
    RuntimeOwner::plan(RuntimeConfig::for_parallelism("stack", 2))
        .expect("valid")
        .build()
        .expect("runtime")
}

/// Runs `probe` on a thread with a `SUBMITTER_STACK` stack.
fn on_small_stack(probe: impl FnOnce() + Send + 'static) {
    on_stack(SUBMITTER_STACK, probe);
}

fn on_stack(stack: usize, probe: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(stack)
        .spawn(probe)
        .expect("thread")
        .join()
        .expect("the probe finished");
}

fn probe(name: &str) {
    match name {
        "task" => on_small_stack(|| {
            let owner = owner();
            let broker = owner.root_context().component("broker");
            broker
                .spawn("large", TaskKind::Worker, async {
                    std::hint::black_box(large_future().await);
                })
                .expect("spawned");
            stop_healthy(owner);
        }),
        "operation" => on_small_stack(|| {
            let owner = owner();
            let broker = owner.root_context().component("broker");
            let operation = OperationContext::new(
                ShutdownDeadline::after(Duration::from_secs(30)).instant(),
                TaskKind::Worker,
            );
            broker
                .task_group()
                .spawn_operation(&operation, "large", async {
                    std::hint::black_box(large_future().await);
                })
                .expect("spawned");
            stop_healthy(owner);
        }),
        "service" => on_small_stack(|| {
            let owner = owner();
            let broker = owner.root_context().component("broker");
            let manager =
                ServiceManager::new_with_task_group(LargeService, broker.task_group().clone());
            owner.block_on(manager.start()).expect("started");
            stop_healthy(owner);
        }),
        "blocking" => on_stack(4 * SUBMITTER_STACK, || {
            let owner = owner();
            let store = owner.root_context().component("store");
            let capture = [3u8; STATE];
            let result = owner
                .block_on(store.storage_io().spawn_io("large", move || {
                    let mut result = [0u8; STATE];
                    result.copy_from_slice(&capture);
                    result
                }))
                .expect("ran");
            assert!(result.iter().all(|byte| *byte == 3));
            stop_healthy(owner);
        }),
        "scheduled" => {
            // Workers with 1 MiB stacks run a schedule whose factory builds
            // a 100 KiB future for every run.
            let mut config = RuntimeConfig::for_parallelism("stack", 2);
            config.thread_stack_size = Some(DEEP_STACK);
            let owner = RuntimeOwner::plan(config)
                .expect("valid")
                .build()
                .expect("runtime");
            let schedules = owner
                .root_context()
                .component("broker")
                .scheduled_tasks("maintenance");
            schedules
                .schedule(
                    ScheduledTaskConfig::fixed_delay("large", Duration::from_millis(1)),
                    ScheduledExecutionPolicy::default(),
                    || async {
                        std::hint::black_box(large_future().await);
                    },
                )
                .expect("scheduled");
            owner.block_on(async {
                while schedules.snapshot()[0].runs < 3 {
                    tokio::task::yield_now().await;
                }
            });
            stop_healthy(owner);
        }
        "deep-shutdown" => on_stack(DEEP_STACK, || {
            // A 512-deep chain of components, a task in each, shut down
            // gracefully from a 1 MiB thread.
            let owner = owner();
            let mut scope = owner.root_context().component("level");
            for _ in 1..512 {
                let token = scope.task_group().cancellation_token();
                scope
                    .spawn(
                        "idle",
                        TaskKind::Worker,
                        async move { token.cancelled().await },
                    )
                    .expect("open");
                scope = scope.component("level");
            }
            drop(scope);
            stop_healthy(owner);
        }),
        "deep-now" => on_stack(DEEP_STACK, || {
            // A 1,024-deep chain shut down immediately.
            let owner = owner();
            let top = owner.root_context().component("level");
            let mut scope = top.clone();
            for _ in 1..1_024 {
                scope
                    .spawn_service("pending", std::future::pending())
                    .expect("open");
                scope = scope.component("level");
            }
            let report = top.task_group().shutdown_now();
            assert_eq!(report.children.len(), 1);
            drop(report);
            let _ = owner.shutdown_runtime_blocking().expect("outside Tokio");
        }),
        "deep-drop" => on_stack(DEEP_STACK, || {
            // 4,096 idle ancestors dropped one after another.
            let owner = owner();
            let mut scope = owner.root_context().component("level");
            for _ in 1..4_096 {
                scope = scope.component("level");
            }
            drop(scope);
            stop_healthy(owner);
        }),
        "empty" => on_small_stack(|| {
            let owner = owner();
            stop_healthy(owner);
        }),
        other => panic!("unknown probe {other}"),
    }
}

/// The child: runs one probe. Without the variable it does nothing.
#[test]
fn stack_probe_child() {
    if let Ok(name) = std::env::var(PROBE_ENV) {
        probe(&name);
    }
}

fn run_probe(name: &str) {
    let exe = std::env::current_exe().expect("test binary");
    let output = Command::new(exe)
        .args(["--exact", CHILD_TEST, "--test-threads=1"])
        .env(PROBE_ENV, name)
        .output()
        .expect("child");
    assert!(
        output.status.success(),
        "probe {name} failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
            .lines()
            .filter(|line| line.contains("overflow") || line.contains("panicked"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn a_large_task_is_submitted_from_a_256_kib_stack() {
    run_probe("task");
}

#[test]
fn a_large_operation_task_is_submitted_from_a_256_kib_stack() {
    run_probe("operation");
}

#[test]
fn a_service_with_large_state_starts_from_a_256_kib_stack() {
    run_probe("service");
}

#[test]
fn large_blocking_captures_and_results_pass_a_1_mib_stack() {
    run_probe("blocking");
}

#[test]
fn an_owner_is_built_and_shut_down_on_a_256_kib_stack() {
    run_probe("empty");
}

#[test]
fn scheduled_runs_of_large_futures_on_1_mib_workers() {
    run_probe("scheduled");
}

#[test]
fn a_512_deep_tree_shuts_down_on_a_1_mib_stack() {
    run_probe("deep-shutdown");
}

#[test]
fn a_1024_deep_tree_shuts_down_at_once_on_a_1_mib_stack() {
    run_probe("deep-now");
}

#[test]
fn four_thousand_deep_idle_ancestors_drop_on_a_1_mib_stack() {
    run_probe("deep-drop");
}
