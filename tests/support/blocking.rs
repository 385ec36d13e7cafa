//! Blocking-lane test helpers: an owner with chosen lane limits, closures
//! held at a gate, a polled wait for a state, submissions spawned as tasks.
#![allow(dead_code, unreachable_pub)]

use std::sync::mpsc;
use std::time::Duration;

use rocketmq_runtime::{BlockingExecutor, ChildServiceContext, RuntimeConfig, RuntimeOwner};

use super::support::guard;

/// Lane limits for one test: (max_concurrency, max_queue_depth).
pub struct Lanes {
    pub capacity: usize,
    pub storage: (usize, usize),
    pub metadata: (usize, usize),
    pub cpu: (usize, usize),
    pub queue_timeout: Duration,
    pub task_timeout: Duration,
}

impl Default for Lanes {
    fn default() -> Self {
        Self {
            capacity: 3,
            storage: (1, 8),
            metadata: (1, 8),
            cpu: (1, 8),
            queue_timeout: Duration::from_secs(30),
            task_timeout: Duration::from_secs(30),
        }
    }
}

pub fn owner(lanes: &Lanes) -> (RuntimeOwner, ChildServiceContext) {
    let mut config = RuntimeConfig::for_parallelism("blocking", 2);
    config.max_blocking_threads = lanes.capacity;
    let policies = &mut config.blocking_lane_policies;
    for (policy, (concurrency, depth)) in [
        (&mut policies.storage_io, lanes.storage),
        (&mut policies.metadata_io, lanes.metadata),
        (&mut policies.cpu_crypto, lanes.cpu),
    ] {
        policy.max_concurrency = concurrency;
        policy.max_queue_depth = depth;
        policy.queue_timeout = lanes.queue_timeout;
        policy.task_timeout = lanes.task_timeout;
    }
    let owner = RuntimeOwner::plan(config)
        .expect("valid configuration")
        .build()
        .expect("runtime builds");
    let store = owner.root_context().component("store");
    (owner, store)
}

/// A closure gate: the closure signals that it started, then blocks until
/// released.
pub struct Gate {
    pub started: mpsc::Receiver<()>,
    pub release: mpsc::Sender<()>,
}

pub fn gate() -> (Gate, impl FnOnce() + Send + 'static) {
    let (started_tx, started) = mpsc::channel();
    let (release, release_rx) = mpsc::channel::<()>();
    let work = move || {
        let _ = started_tx.send(());
        let _ = release_rx.recv();
    };
    (Gate { started, release }, work)
}

impl Gate {
    pub fn wait_started(&self) {
        self.started
            .recv_timeout(Duration::from_secs(30))
            .expect("hang guard: the closure did not start");
    }

    pub fn open(self) {
        let _ = self.release.send(());
    }
}

/// Polls `condition` (yielding) under a hang guard.
pub async fn until(what: &str, mut condition: impl FnMut() -> bool) {
    guard(what, async {
        while !condition() {
            tokio::task::yield_now().await;
        }
    })
    .await;
}

/// Spawns a submission as a task so the test can queue several.
pub fn submit_task(
    owner: &RuntimeOwner,
    executor: &BlockingExecutor,
    name: &'static str,
    work: impl FnOnce() + Send + 'static,
) -> tokio::task::JoinHandle<Result<(), rocketmq_runtime::RuntimeError>> {
    let executor = executor.clone();
    spawn_on(owner, async move { executor.spawn_io(name, work).await })
}

/// Spawns `future` as a task of the owner's runtime.
pub fn spawn_on<F>(owner: &RuntimeOwner, future: F) -> tokio::task::JoinHandle<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let runtime = owner.block_on(async { tokio::runtime::Handle::current() });
    runtime.spawn(future)
}

/// Holds one slot of `executor` with a gated closure named `held`; returns
/// once the closure runs.
pub fn hold(
    owner: &RuntimeOwner,
    executor: &BlockingExecutor,
) -> (
    Gate,
    tokio::task::JoinHandle<Result<(), rocketmq_runtime::RuntimeError>>,
) {
    let (held, work) = gate();
    let task = submit_task(owner, executor, "held", work);
    held.wait_started();
    (held, task)
}
