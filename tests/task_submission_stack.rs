//! Submissions with large state from small stacks: each probe runs in a
//! child process (this test binary re-run with the probe's name), on a
//! thread with a fixed small stack, so a stack overflow is a failed test,
//! not a crashed suite.
//!
//! Where a protection can be switched off, the stack is smaller than the
//! spec's (1 MiB, 256 KiB) and sits between what the protected path needs
//! and what it needs without the protection, so each such probe fails when
//! its protection is removed:
//!
//! | probe | stack | protection |
//! |---|---|---|
//! | task, operation | 160 KiB submitter | the 16 KiB boxing rule (`src/inline.rs`) |
//! | service | 160 KiB submitter | `ServiceManager` boxes the loop where it builds it |
//! | blocking capture and result | 1 MiB caller | results over 16 KiB travel boxed |
//! | deep trees (512 graceful, 1,024 immediate, 4,096 dropped) | 48 KiB | the ancestor-release trampoline (`src/task_group.rs`) |
//! | `block_on` | 160 KiB caller | boxing over 16 KiB (Tokio's `block_on` boxes too, so removing ours alone does not fail) |
//! | large factory | 256 KiB submitter | the factory is boxed by type at registration |
//! | scheduled runs | 128 KiB workers | each run is boxed by type by the factory wrapper |
//!
//! Debug builds get eight times each stack, because the unoptimized frames
//! (the test's own included) copy every value; the release run is the
//! evidence: `cargo test --release --test task_submission_stack`.

use std::process::Command;
use std::time::Duration;

use rocketmq_runtime::task::{ServiceManager, ServiceTask, ServiceTaskContext};
use rocketmq_runtime::{
    OperationContext, RuntimeConfig, RuntimeOwner, ScheduledExecutionPolicy, ScheduledTaskConfig,
    ShutdownDeadline, TaskKind,
};

const PROBE_ENV: &str = "ROCKETMQ_STACK_PROBE";
const CHILD_TEST: &str = "stack_probe_child";
/// The bytes of state each large future, capture, result and factory holds.
const STATE: usize = 100 * 1024;
const SCALE: usize = if cfg!(debug_assertions) { 8 } else { 1 };
/// The stack of the threads that submit large tasks, services and factories.
const SUBMITTER_STACK: usize = SCALE * 160 * 1024;
/// The stack of the thread that passes a large blocking capture and result.
const BLOCKING_STACK: usize = SCALE * 1024 * 1024;
/// The stack of the deep-tree probes.
const DEEP_STACK: usize = SCALE * 48 * 1024;
/// The stack of the thread that registers a large factory.
const FACTORY_STACK: usize = SCALE * 256 * 1024;
/// The worker stacks of the scheduled probe.
const WORKER_STACK: usize = SCALE * 128 * 1024;

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
        "block-on" => on_small_stack(|| {
            let owner = owner();
            let state = [7u8; STATE];
            let sum = owner.block_on(async move {
                tokio::task::yield_now().await;
                state.iter().map(|byte| usize::from(*byte)).sum::<usize>()
            });
            assert_eq!(sum, 7 * STATE);
            stop_healthy(owner);
        }),
        "factory" => on_stack(FACTORY_STACK, || {
            // A schedule whose factory itself holds `STATE` bytes.
            let owner = owner();
            let schedules = owner
                .root_context()
                .component("broker")
                .scheduled_tasks("maintenance");
            let table = [5u8; STATE];
            let (ran, seen) = std::sync::mpsc::channel();
            let _ = schedules
                .schedule(
                    ScheduledTaskConfig::fixed_delay("large-factory", Duration::from_millis(1)),
                    ScheduledExecutionPolicy::default(),
                    move || {
                        let _ =
                            ran.send(table.iter().map(|byte| usize::from(*byte)).sum::<usize>());
                        async {}
                    },
                )
                .expect("scheduled");
            assert_eq!(seen.recv().expect("a run"), 5 * STATE);
            stop_healthy(owner);
        }),
        "blocking" => on_stack(BLOCKING_STACK, || {
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
            // Workers with small stacks run a schedule whose factory builds
            // a 100 KiB future for every run.
            let mut config = RuntimeConfig::for_parallelism("stack", 2);
            config.thread_stack_size = Some(WORKER_STACK);
            let owner = RuntimeOwner::plan(config)
                .expect("valid")
                .build()
                .expect("runtime");
            let schedules = owner
                .root_context()
                .component("broker")
                .scheduled_tasks("maintenance");
            let _ = schedules
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
            // gracefully from a small stack.
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
fn a_large_task_is_submitted_from_a_160_kib_stack() {
    run_probe("task");
}

#[test]
fn a_large_operation_task_is_submitted_from_a_160_kib_stack() {
    run_probe("operation");
}

#[test]
fn a_service_with_large_state_starts_from_a_160_kib_stack() {
    run_probe("service");
}

#[test]
fn a_large_scheduler_factory_is_registered_from_a_256_kib_stack() {
    run_probe("factory");
}

#[test]
fn block_on_runs_a_large_future_from_a_160_kib_stack() {
    run_probe("block-on");
}

#[test]
fn large_blocking_captures_and_results_pass_a_1_mib_stack() {
    run_probe("blocking");
}

#[test]
fn an_owner_is_built_and_shut_down_on_a_160_kib_stack() {
    run_probe("empty");
}

#[test]
fn scheduled_runs_of_large_futures_on_128_kib_workers() {
    run_probe("scheduled");
}

#[test]
fn a_512_deep_tree_shuts_down_on_a_48_kib_stack() {
    run_probe("deep-shutdown");
}

#[test]
fn a_1024_deep_tree_shuts_down_at_once_on_a_48_kib_stack() {
    run_probe("deep-now");
}

#[test]
fn four_thousand_deep_idle_ancestors_drop_on_a_48_kib_stack() {
    run_probe("deep-drop");
}
