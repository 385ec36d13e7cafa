//! [`RuntimeOwner`]: validated construction and the owned runtime lifecycle.
//!
//! Invariants:
//!
//! 1. `plan` only validates (no thread, runtime or file exists yet); `build`
//!    starts Tokio with `tokio_blocking_threads()` blocking threads and the
//!    time driver always enabled (shutdown deadlines are Tokio timers).
//! 2. `shutdown_tasks*` install their deadline on the task tree at the call,
//!    even if the returned future is never polled, and keep Tokio running.
//! 3. `shutdown_runtime_blocking_until` refuses to run inside a Tokio context
//!    (kind `Unsupported`). Otherwise it gives Tokio only
//!    `deadline.remaining()`, and a standard-clock backstop thread ends the
//!    wait `SHUTDOWN_BACKSTOP_SLACK` (250 ms) after the deadline even when
//!    every worker is blocked: the report is then taken immediately
//!    (`shutdown_now`) and Tokio stops in the background.
//! 4. `Drop` without a completed shutdown runs `shutdown_now` (logging its
//!    report) and `shutdown_background`; it never drains with a blocking
//!    wait.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::runtime::{Builder, Handle, Runtime};

use crate::config::RuntimeConfig;
use crate::error::{RuntimeContractViolation, RuntimeError, RuntimeOperation, RuntimeResult};
use crate::resource_budget::memory::{ManagedMemoryPolicy, ProcessMemoryLimit};
use crate::resources::RuntimeResources;
use crate::service_context::{ContextShared, RootServiceContext};
use crate::shutdown_deadline::ShutdownDeadline;
use crate::shutdown_report::ShutdownReport;
use crate::task_group::TaskGroup;
use crate::task_identity::TaskGroupLifecycleState;

/// Futures larger than this are boxed before `block_on` polls them.
const BLOCK_ON_INLINE_LIMIT: usize = 16 * 1024;

/// A timer on the standard clock, independent of the runtime's timer driver
/// (which starves when every worker is blocked). Its thread ends early when
/// the backstop is dropped.
struct Backstop {
    expired: tokio::sync::oneshot::Receiver<()>,
    _cancel: std::sync::mpsc::Sender<()>,
}

impl Backstop {
    fn start(after: Duration) -> Self {
        let (expire, expired) = tokio::sync::oneshot::channel();
        let (cancel, cancelled) = std::sync::mpsc::channel::<()>();
        let spawned = std::thread::Builder::new()
            .name("rocketmq-shutdown-backstop".into())
            .spawn(move || {
                // Times out at the backstop, or returns early once the
                // backstop is dropped (the sender disconnects).
                if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    cancelled.recv_timeout(after)
                {
                    let _ = expire.send(());
                }
            });
        if spawned.is_err() {
            tracing::warn!("could not start the shutdown backstop thread; the deadline relies on the runtime timer");
        }
        Self {
            expired,
            _cancel: cancel,
        }
    }

    /// Completes when the backstop fired; never if it could not start.
    async fn expired(self) {
        let Self { expired, _cancel } = self;
        if expired.await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// A validated configuration, ready to [`build`](Self::build).
///
/// Planning performs only deterministic validation: no resource discovery,
/// no threads, no Tokio runtime.
#[derive(Debug, Clone)]
pub struct RuntimeOwnerPlan {
    config: RuntimeConfig,
    memory_limit: Option<ProcessMemoryLimit>,
    memory_policy: ManagedMemoryPolicy,
    metadata_target_capacity: std::num::NonZeroUsize,
}

impl RuntimeOwnerPlan {
    /// The validated configuration.
    pub fn config(&self) -> &RuntimeConfig {
        &self.config
    }

    /// Uses `limit` as the process memory limit: `build` then skips memory
    /// discovery (environment, cgroups, host memory) entirely.
    #[must_use]
    pub fn with_memory_limit(mut self, limit: ProcessMemoryLimit) -> Self {
        self.memory_limit = Some(limit);
        self
    }

    /// How the managed (chargeable) budget derives from the effective limit:
    /// the whole limit (default), explicit bytes, or a bounded fraction,
    /// minus headroom.
    #[must_use]
    pub fn with_memory_policy(mut self, policy: ManagedMemoryPolicy) -> Self {
        self.memory_policy = policy;
        self
    }

    /// Keeps at most `capacity` metadata target histories for this owner
    /// (default 4,096). A history stays after its actor stops (a
    /// replacement actor resolves older generations from it) until it is
    /// retired with
    /// [`MetadataIoActor::retire_target_for_new_identity`](crate::MetadataIoActor::retire_target_for_new_identity);
    /// a new target path beyond the capacity is refused as
    /// `CapacityExhausted`, naming the capacity.
    #[must_use]
    pub fn with_metadata_target_capacity(mut self, capacity: std::num::NonZeroUsize) -> Self {
        self.metadata_target_capacity = capacity;
        self
    }

    /// Builds the Tokio multi-thread runtime and the root context.
    ///
    /// The runtime uses `worker_threads` workers and
    /// [`tokio_blocking_threads`](RuntimeConfig::tokio_blocking_threads)
    /// blocking threads and the time driver (a configuration without it
    /// does not pass [`RuntimeConfig::validate`]); `enable_io` is honoured.
    ///
    /// # Errors
    ///
    /// Kind `Io` (operation `BuildTokioRuntime`) when Tokio cannot start.
    pub fn build(self) -> RuntimeResult<RuntimeOwner> {
        // A supplied limit replaces discovery. Outside Linux, where only the variable
        // is consulted, an unset variable means an unknown limit (with a
        // warning) rather than an owner that cannot be built.
        let detected = match self.memory_limit {
            Some(limit) => limit,
            #[cfg(target_os = "linux")]
            None => ProcessMemoryLimit::detect()?,
            #[cfg(not(target_os = "linux"))]
            None => ProcessMemoryLimit::or_unknown(ProcessMemoryLimit::detect())?,
        };
        let resources = RuntimeResources::new(
            detected,
            self.memory_limit,
            self.memory_policy,
            self.metadata_target_capacity,
        )
        .map_err(|violation| {
            RuntimeError::configuration_failure(
                RuntimeOperation::ResolveManagedMemoryBudget,
                violation,
            )
        })?;
        let config = self.config;
        let mut builder = Builder::new_multi_thread();
        builder
            .worker_threads(config.worker_threads)
            .max_blocking_threads(config.tokio_blocking_threads())
            .thread_name(config.thread_name.clone())
            .thread_keep_alive(config.thread_keep_alive)
            .enable_time();
        if let Some(stack) = config.thread_stack_size {
            builder.thread_stack_size(stack);
        }
        if config.enable_io {
            builder.enable_io();
        }
        // A process that cannot have its workers and one blocking thread at
        // once (a pids cgroup, RLIMIT_NPROC, an address-space limit) is
        // refused here, before Tokio starts any: a worker Tokio fails to
        // start halfway leaves a runtime whose drop waits for it forever.
        probe_threads(
            config.worker_threads.saturating_add(1),
            config.thread_stack_size,
        )
        .map_err(|error| RuntimeError::build(RuntimeOperation::BuildTokioRuntime, error))?;
        // Tokio panics (rather than failing) when the OS refuses a worker
        // thread: too many workers, a stack the OS cannot give, a name with
        // an interior NUL. A configuration `plan()` accepted must still end
        // in an error here, never a panic.
        let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| builder.build()))
            .unwrap_or_else(|payload| {
                let message = payload
                    .downcast_ref::<&str>()
                    .map(|message| (*message).to_owned())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "the Tokio runtime builder panicked".to_owned());
                Err(std::io::Error::other(message))
            });
        let runtime = built
            .map_err(|error| RuntimeError::build(RuntimeOperation::BuildTokioRuntime, error))?;
        let group = TaskGroup::new_root(config.thread_name.as_str(), runtime.handle().clone());
        let shared = ContextShared::new(&group, &config, resources);
        let root = RootServiceContext::new(group, shared);
        Ok(RuntimeOwner {
            runtime: Some(runtime),
            root,
            config,
        })
    }
}

/// Starts `count` threads that exist at the same time (each with the
/// runtime's stack size), then lets them all exit and joins them: `Err`
/// with the OS's answer when it refuses one. Only the answer at this
/// moment: a limit that tightens later is met by the blocking lanes'
/// refusal (`blocking/job.rs`).
fn probe_threads(count: usize, stack_size: Option<usize>) -> std::io::Result<()> {
    let gate = std::sync::Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
    let mut threads = Vec::with_capacity(count);
    let mut refused = None;
    for index in 0..count {
        let mut builder = std::thread::Builder::new().name(format!("rocketmq-probe-{index}"));
        if let Some(stack_size) = stack_size {
            builder = builder.stack_size(stack_size);
        }
        let gate = std::sync::Arc::clone(&gate);
        match builder.spawn(move || {
            let (released, wake) = &*gate;
            let mut released = released
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            while !*released {
                released = wake
                    .wait(released)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
        }) {
            Ok(thread) => threads.push(thread),
            Err(error) => {
                refused = Some(error);
                break;
            }
        }
    }
    {
        let (released, wake) = &*gate;
        *released
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = true;
        wake.notify_all();
    }
    let started = threads.len();
    for thread in threads {
        let _ = thread.join();
    }
    match refused {
        None => Ok(()),
        Some(error) => Err(std::io::Error::new(
            error.kind(),
            format!(
                "the OS refused thread {} of the {count} the runtime needs at start: {error}",
                started + 1
            ),
        )),
    }
}

/// Owns a Tokio runtime, the root context and the shutdown protocol.
///
/// | Path | Behaviour |
/// | --- | --- |
/// | [`shutdown_tasks`](Self::shutdown_tasks) / [`shutdown_tasks_until`](Self::shutdown_tasks_until) | close and wait for tracked tasks; Tokio keeps running |
/// | [`shutdown_runtime_blocking`](Self::shutdown_runtime_blocking) / [`_until`](Self::shutdown_runtime_blocking_until) | consume the owner: task shutdown, then Tokio within the remaining budget; call outside Tokio |
/// | [`shutdown_background`](Self::shutdown_background) | immediate task shutdown evidence; Tokio stops in the background |
/// | `Drop` | emergency cleanup if no explicit shutdown ran: immediate shutdown, the report logged, Tokio stopped in the background |
pub struct RuntimeOwner {
    runtime: Option<Runtime>,
    root: RootServiceContext,
    config: RuntimeConfig,
}

impl fmt::Debug for RuntimeOwner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuntimeOwner")
            .field("root", &self.root)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl RuntimeOwner {
    /// How long past its deadline
    /// [`shutdown_runtime_blocking_until`](Self::shutdown_runtime_blocking_until)
    /// waits for the graceful shutdown before a standard-clock backstop ends
    /// it.
    pub const SHUTDOWN_BACKSTOP_SLACK: Duration = Duration::from_millis(250);

    /// Validates `config` without starting anything.
    ///
    /// # Errors
    ///
    /// The first failing policy, in the order of [`RuntimeConfig::validate`].
    pub fn plan(config: RuntimeConfig) -> Result<RuntimeOwnerPlan, RuntimeContractViolation> {
        config.validate()?;
        Ok(RuntimeOwnerPlan {
            config,
            memory_limit: None,
            memory_policy: ManagedMemoryPolicy::default(),
            metadata_target_capacity: crate::metadata_io::targets::DEFAULT_CAPACITY,
        })
    }

    /// Builds an owner with the default profile.
    ///
    /// # Errors
    ///
    /// As [`RuntimeOwnerPlan::build`]; the default profile always validates.
    pub fn new() -> RuntimeResult<Self> {
        Self::plan(RuntimeConfig::default())
            .map_err(|violation| {
                RuntimeError::configuration_failure(RuntimeOperation::BuildTokioRuntime, violation)
            })?
            .build()
    }

    /// The owner's resources: memory limit, managed budget, process budget.
    pub fn resources(&self) -> &RuntimeResources {
        self.root.shared().resources()
    }

    /// The single sealed root context.
    pub fn root_context(&self) -> &RootServiceContext {
        &self.root
    }

    /// This runtime's diagnostics (the root context's; see
    /// [`RootServiceContext::diagnostics_view_v1`] for the views).
    pub fn diagnostics(&self) -> &crate::diagnostics::RuntimeDiagnostics {
        self.root_context().diagnostics()
    }

    /// The configuration in force.
    pub fn config(&self) -> &RuntimeConfig {
        &self.config
    }

    /// Tokio's metrics of the owned runtime (worker count, alive tasks,
    /// queue depths), for a metrics reader such as tokio-metrics or a
    /// Prometheus collector. Read-only: it opens no way to spawn around
    /// the task tree, as the runtime's `Handle` would.
    pub fn runtime_metrics(&self) -> tokio::runtime::RuntimeMetrics {
        self.runtime().metrics()
    }

    fn runtime(&self) -> &Runtime {
        match &self.runtime {
            Some(runtime) => runtime,
            None => unreachable!("the runtime is only taken by consuming shutdown paths"),
        }
    }

    /// Runs `future` to completion on the owned runtime.
    ///
    /// Futures larger than 16 KiB are boxed before they are polled, so a
    /// large future is not copied around the caller's stack (Tokio's own
    /// `block_on` does the same today; this keeps the contract independent
    /// of that detail).
    ///
    /// # Panics
    ///
    /// Like Tokio's `block_on`, panics when called from inside an async
    /// context.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        if std::mem::size_of::<F>() > BLOCK_ON_INLINE_LIMIT {
            self.runtime().block_on(Box::pin(future))
        } else {
            self.runtime().block_on(future)
        }
    }

    /// Shuts down tracked tasks within `RuntimeConfig::shutdown_timeout`
    /// (converted to a deadline at the call), keeping Tokio running.
    ///
    /// # Cancel safety
    ///
    /// As [`TaskGroup::shutdown_until`].
    pub fn shutdown_tasks(&self) -> BoxFuture<'_, ShutdownReport> {
        self.shutdown_tasks_until(ShutdownDeadline::after(self.config.shutdown_timeout))
    }

    /// Shuts down tracked tasks within `deadline`, keeping Tokio running.
    ///
    /// The deadline is installed on the task tree when this is called, even
    /// if the returned future is never polled. A deadline is only enforced
    /// while the runtime's workers can run timers: tasks that block every
    /// worker thread delay it (use
    /// [`shutdown_runtime_blocking_until`](Self::shutdown_runtime_blocking_until),
    /// which has a backstop on the standard clock).
    ///
    /// # Cancel safety
    ///
    /// As [`TaskGroup::shutdown_until`]: calling again after a dropped
    /// future completes the shutdown.
    pub fn shutdown_tasks_until(
        &self,
        deadline: ShutdownDeadline,
    ) -> BoxFuture<'_, ShutdownReport> {
        self.root.group().shutdown_until(deadline)
    }

    /// [`shutdown_runtime_blocking_until`](Self::shutdown_runtime_blocking_until)
    /// with `RuntimeConfig::shutdown_timeout`.
    ///
    /// # Errors
    ///
    /// As [`shutdown_runtime_blocking_until`](Self::shutdown_runtime_blocking_until).
    pub fn shutdown_runtime_blocking(self) -> RuntimeResult<ShutdownReport> {
        let timeout = self.config.shutdown_timeout;
        self.shutdown_runtime_blocking_with_timeout(timeout)
    }

    /// [`shutdown_runtime_blocking_until`](Self::shutdown_runtime_blocking_until)
    /// with a relative timeout.
    ///
    /// # Errors
    ///
    /// As [`shutdown_runtime_blocking_until`](Self::shutdown_runtime_blocking_until).
    pub fn shutdown_runtime_blocking_with_timeout(
        self,
        timeout: Duration,
    ) -> RuntimeResult<ShutdownReport> {
        self.shutdown_runtime_blocking_until(ShutdownDeadline::after(timeout))
    }

    /// Consumes the owner: shuts down tracked tasks until `deadline`, then
    /// gives Tokio only the time left to stop.
    ///
    /// An unhealthy report is logged. A separate task shutdown is not needed.
    /// If the graceful shutdown has not returned
    /// [`SHUTDOWN_BACKSTOP_SLACK`](Self::SHUTDOWN_BACKSTOP_SLACK) after the
    /// deadline (for example because tasks block every worker thread, so no
    /// timer can fire), a thread on the standard clock ends the wait: the
    /// report is then the immediate-shutdown report (unfinished tasks listed
    /// as leaked) and Tokio is stopped in the background.
    ///
    /// # Errors
    ///
    /// Kind `Unsupported` (operation `ShutdownRuntimeBlocking`) when called
    /// inside a Tokio context; the owner is then dropped, which runs the
    /// emergency path (immediate shutdown, Tokio stopped in the background).
    pub fn shutdown_runtime_blocking_until(
        mut self,
        deadline: ShutdownDeadline,
    ) -> RuntimeResult<ShutdownReport> {
        if Handle::try_current().is_ok() {
            return Err(
                RuntimeError::unsupported(RuntimeOperation::ShutdownRuntimeBlocking).with_context(
                    crate::error::RuntimeErrorContext::Remedy(
                        "called inside a Tokio runtime, where blocking on the owner's own \
                         runtime would deadlock: call it outside `block_on` (after the \
                         entrypoint's async main returns), use `shutdown_tasks` from async \
                         code, or `RuntimeContext` in tests",
                    ),
                ),
            );
        }
        let Some(runtime) = self.runtime.take() else {
            unreachable!("the runtime is only taken by consuming shutdown paths");
        };
        let graceful = self.root.group().shutdown_until(deadline);
        let backstop = Backstop::start(
            deadline
                .remaining()
                .saturating_add(Self::SHUTDOWN_BACKSTOP_SLACK),
        );
        let finished = runtime.block_on(async {
            tokio::select! {
                biased;
                report = graceful => Some(report),
                () = backstop.expired() => None,
            }
        });
        let report = match finished {
            Some(report) => {
                runtime.shutdown_timeout(deadline.remaining());
                report
            }
            None => {
                let report = self.root.group().shutdown_now();
                runtime.shutdown_background();
                report
            }
        };
        report.log_if_unhealthy();
        Ok(report)
    }

    /// Returns immediate task-shutdown evidence and stops Tokio in the
    /// background without waiting.
    pub fn shutdown_background(mut self) -> ShutdownReport {
        let report = self.root.group().shutdown_now();
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
        report
    }
}

impl Drop for RuntimeOwner {
    fn drop(&mut self) {
        let Some(runtime) = self.runtime.take() else {
            return;
        };
        let group = self.root.group();
        if group.lifecycle_state() != TaskGroupLifecycleState::ShutdownCompleted {
            let report = group.shutdown_now();
            // One line an operator reads; the JSON only at DEBUG.
            tracing::warn!(
                summary = %report.summary(),
                "RuntimeOwner dropped without an explicit shutdown; ran an immediate shutdown"
            );
            tracing::debug!(report = %report.to_json(), "the immediate shutdown's report");
        }
        runtime.shutdown_background();
    }
}
