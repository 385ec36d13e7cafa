//! Shared helpers for the integration tests.
#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use rocketmq_runtime::{RuntimeContext, ShutdownReport};

/// A harness on the current (test) runtime.
pub fn harness(name: &'static str) -> RuntimeContext {
    RuntimeContext::try_from_current(name).expect("inside a Tokio runtime")
}

/// Hang guard for awaits that must complete: fails the test instead of hanging.
pub async fn guard<F: std::future::Future>(what: &str, future: F) -> F::Output {
    match tokio::time::timeout(Duration::from_secs(30), future).await {
        Ok(output) => output,
        Err(_) => panic!("hang guard expired: {what}"),
    }
}

/// Re-checks `done` (yielding the thread in between) until it holds;
/// panics after 30 s (a hang guard). For state another thread changes just
/// after an event the test observed (a settled task's Tokio cell lets go
/// of its group on its worker), never to let time pass.
pub fn spin_until(what: &str, mut done: impl FnMut() -> bool) {
    let guard = tokio::time::Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(
            tokio::time::Instant::now() < guard,
            "hang guard expired: {what}"
        );
        std::thread::yield_now();
    }
}

/// Sum of a counter over the whole report tree.
pub fn tree_sum(report: &ShutdownReport, field: fn(&ShutdownReport) -> usize) -> usize {
    let mut total = 0;
    let mut stack = vec![report];
    while let Some(node) = stack.pop() {
        total += field(node);
        stack.extend(node.children.iter());
    }
    total
}

/// Number of report nodes in the tree.
pub fn tree_nodes(report: &ShutdownReport) -> usize {
    let mut total = 0;
    let mut stack = vec![report];
    while let Some(node) = stack.pop() {
        total += 1;
        stack.extend(node.children.iter());
    }
    total
}

/// A 2-worker owner (named `name`) and the task group of its `name`
/// component.
pub fn owner_with_group(
    name: &'static str,
) -> (rocketmq_runtime::RuntimeOwner, rocketmq_runtime::TaskGroup) {
    let owner = rocketmq_runtime::RuntimeOwner::plan(
        rocketmq_runtime::RuntimeConfig::for_parallelism(name, 2),
    )
    .expect("valid configuration")
    .build()
    .expect("runtime builds");
    let group = owner.root_context().component(name).task_group().clone();
    (owner, group)
}

/// The `broker_entrypoint` example binary (`cargo test` builds examples
/// next to the test binaries' directory).
pub fn example_binary() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps");
    let binary = profile_dir
        .join("examples")
        .join(format!("broker_entrypoint{}", std::env::consts::EXE_SUFFIX));
    assert!(binary.exists(), "example not built at {}", binary.display());
    binary
}

/// The example with a data directory of its own under
/// `CARGO_TARGET_TMPDIR` (a broker locks its directory, so parallel tests
/// never share one).
pub fn example_command() -> std::process::Command {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "broker-data-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let mut command = std::process::Command::new(example_binary());
    command.arg("--data-dir").arg(dir);
    command
}

/// Panics when dropped: held by a future, it makes the future's
/// destruction panic.
#[derive(Debug)]
pub struct PanicsOnDrop;

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        panic!("deliberate destructor panic");
    }
}
