//! [`ServiceManager`] and [`ServiceTask`]: a wakeup-driven service loop run
//! as a service task of an owned group, with deadline-bounded shutdown.
//!
//! Shutdown (`shutdown_with_interrupt_until`), in order:
//!
//! 1. deadline: `earliest(requested, parent-installed)`, else now + 30 s;
//! 2. under the run lock: compare-and-swap `Starting`/`Running` → `Stopping`
//!    with the run's generation and take the run record (a concurrent second
//!    shutdown finds none and returns);
//! 3. stop request: the context's flag, then a wakeup (a parked
//!    `wait_for_running` returns);
//! 4. without interrupt: wait for the loop's task until the deadline, then
//!    shut the component down until the deadline (or at once, aborting the
//!    loop, if it is still running). With interrupt: abort the task, confirm
//!    for `max(remaining, 1 s)`, then shut the component down at once;
//! 5. keep the component's report as the last report, compare-and-swap
//!    `Stopping` → `Stopped` for this generation.
//!
//! Invariants:
//!
//! 1. The manager's [`ServiceTaskState`] and the generation of its current
//!    run live in one atomic word (`state.rs`); every transition is a
//!    compare-and-swap naming its run, so a run replaced by a newer `start`
//!    can neither overwrite the newer state nor see itself running.
//! 2. The current run (its component, task and context) sits behind one lock
//!    that only `start`, the `shutdown` family, `make_stop` and `wakeup`
//!    take, never across an `.await`.
//! 3. A shutdown waits no later than `earliest(requested, parent-installed)`
//!    (30 s only when neither exists), except an interrupting one confirming
//!    its abort for up to 1 s.
//! 4. A guard owned by the loop's future (`RunExit`) moves its own generation
//!    `Running`/`Starting` → `Stopped` when the future is dropped, however the
//!    loop ended (return, panic, abort, also before its first poll); a
//!    shutdown (`Stopping`) or a newer run keeps the word.
//! 5. A later `start` first shuts that ended run's component down (waiting at
//!    most 1 s for the ended task to settle), so its report is not a false
//!    leak; each stopped run's component report is kept as the last report.
//! 6. A shutdown future dropped after step 2 completes the stop in its
//!    guard's `Drop` (`StoppingRun`: immediate component shutdown, report,
//!    `Stopped`), so the manager never stays `Stopping`.
//! 7. A refused start (the parent refuses the component, or the component the
//!    task) restores the previous state.

mod state;
#[cfg(all(test, loom))]
mod tests;

use std::fmt;
use std::time::Duration;

use crate::error::{RuntimeError, RuntimeOperation, RuntimeResult};
use crate::loom::{Arc, Mutex};
use crate::{
    shutdown_deadline::ShutdownDeadline, shutdown_report::ShutdownReport, task_group::TaskGroup,
    task_identity::TaskId,
};

mod context;

use context::RunLink;
pub use context::{ServiceTask, ServiceTaskContext};
pub use state::ServiceTaskState;
use state::StateWord;

/// Name of the child component each run's task lives in.
const COMPONENT: &str = "rocketmq.service-manager";

/// How long a `ServiceManager` shutdown may take when neither the call nor
/// the parent group gives a deadline (otherwise the earliest of the two
/// applies).
const SERVICE_MANAGER_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);

/// How long an interrupting shutdown may wait past its deadline to confirm
/// that the aborted loop was destroyed.
const ABORT_CONFIRMATION: Duration = Duration::from_secs(1);

/// Moves a run that ended by itself (`Running`/`Starting` of its
/// generation) to `Stopped` when the loop's future is dropped, whatever
/// ended it; a shutdown (`Stopping`) or a newer run keeps the word.
struct RunExit {
    state: Arc<StateWord>,
    generation: u64,
}

impl Drop for RunExit {
    fn drop(&mut self) {
        let _ = self.state.transition(
            self.generation,
            ServiceTaskState::Running,
            ServiceTaskState::Stopped,
        ) || self.state.transition(
            self.generation,
            ServiceTaskState::Starting,
            ServiceTaskState::Stopped,
        );
    }
}

/// A run being shut down: `finish` stores its report and moves it to
/// `Stopped`; dropped unfinished (the shutdown future was dropped), it shuts
/// the component down at once instead, so the manager never stays
/// `Stopping`.
struct StoppingRun<'a> {
    run: Option<Run>,
    state: &'a StateWord,
    last_report: &'a Mutex<Option<ShutdownReport>>,
}

impl StoppingRun<'_> {
    fn finish(&mut self, report: ShutdownReport) {
        if let Some(run) = self.run.take() {
            *self.last_report.lock() = Some(report);
            self.state.transition(
                run.generation,
                ServiceTaskState::Stopping,
                ServiceTaskState::Stopped,
            );
        }
    }
}

impl Drop for StoppingRun<'_> {
    fn drop(&mut self) {
        if let Some(run) = self.run.as_ref() {
            let report = run.group.shutdown_now();
            self.finish(report);
        }
    }
}

/// The current run: its component, task and context.
struct Run {
    generation: u64,
    group: TaskGroup,
    task: TaskId,
    context: ServiceTaskContext,
}

/// Runs a [`ServiceTask`] as a service task of a child component
/// (`rocketmq.service-manager`) of the group it was given.
///
/// `start` runs the loop (again after a stop), `make_stop` / `wakeup` steer
/// it, and the `shutdown` family stops it within a deadline: the earliest
/// of the requested one and the deadline installed on the parent group,
/// 30 s only when neither exists. Dropping the manager leaves a running
/// loop to its group: the group's cancellation stops it.
///
/// ```
/// use std::time::Duration;
/// use rocketmq_runtime::prelude::*;
/// use rocketmq_runtime::task::{ServiceManager, ServiceTask, ServiceTaskContext, ServiceTaskState};
///
/// struct Ticker;
///
/// impl ServiceTask for Ticker {
///     fn get_service_name(&self) -> String {
///         "ticker".to_owned()
///     }
///
///     async fn run(&self, context: &ServiceTaskContext) {
///         while !context.is_stopped() {
///             context.wait_for_running(Duration::from_secs(1)).await;
///         }
///     }
/// }
///
/// let owner = RuntimeOwner::new().unwrap();
/// let broker = owner.root_context().component("broker");
/// let manager = ServiceManager::new_with_task_group(Ticker, broker.task_group().clone());
/// owner.block_on(async {
///     manager.start().await.unwrap();
///     assert_eq!(manager.get_lifecycle_state(), ServiceTaskState::Running);
///     manager.shutdown().await.unwrap();
/// });
/// assert_eq!(manager.get_lifecycle_state(), ServiceTaskState::Stopped);
/// assert!(manager.last_task_group_shutdown_report().unwrap().is_healthy());
/// # owner.shutdown_runtime_blocking().unwrap();
/// ```
pub struct ServiceManager<T: ServiceTask + 'static> {
    task: Arc<T>,
    parent: TaskGroup,
    state: Arc<StateWord>,
    run: Mutex<Option<Run>>,
    last_report: Mutex<Option<ShutdownReport>>,
}

impl<T: ServiceTask + 'static> fmt::Debug for ServiceManager<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServiceManager")
            .field("service", &self.task.get_service_name())
            .field("state", &self.get_lifecycle_state())
            .field("parent", &self.parent.name())
            .finish_non_exhaustive()
    }
}

impl<T: ServiceTask + 'static> AsRef<T> for ServiceManager<T> {
    fn as_ref(&self) -> &T {
        &self.task
    }
}

impl<T: ServiceTask + 'static> ServiceManager<T> {
    /// A manager of `task` whose runs live under `group`.
    pub fn new_with_task_group(task: T, group: TaskGroup) -> Self {
        Self::new_arc_with_task_group(Arc::new(task), group)
    }

    /// As [`new_with_task_group`](Self::new_with_task_group), sharing `task`.
    pub fn new_arc_with_task_group(task: Arc<T>, group: TaskGroup) -> Self {
        Self {
            task,
            parent: group,
            state: Arc::new(StateWord::new()),
            run: Mutex::new(None),
            last_report: Mutex::new(None),
        }
    }

    /// The current state.
    pub fn get_lifecycle_state(&self) -> ServiceTaskState {
        self.state.load().0
    }

    /// The report of the `rocketmq.service-manager` group of the last
    /// stopped run.
    pub fn last_task_group_shutdown_report(&self) -> Option<ShutdownReport> {
        self.last_report.lock().clone()
    }

    /// Starts a run: from `NotStarted` or `Stopped` only (any other state
    /// logs a warning and returns `Ok`). The loop runs as a service task
    /// named after the service, inside a new child component
    /// `rocketmq.service-manager` of the parent group. When the loop
    /// returns on its own the state becomes `Stopped`.
    ///
    /// # Errors
    ///
    /// `RuntimeError::within(SpawnServiceTask, cause)`, keeping the cause's
    /// kind (`Closed`, `Poisoned`), when the parent refuses the component or
    /// the component refuses the task; the state is restored.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe. A run whose loop returned on its own is first closed
    /// (its component shut down, waiting at most 1 s for the ended task
    /// to settle); dropping the future there leaves that component to its
    /// parent. The start itself happens synchronously after that.
    pub async fn start(&self) -> RuntimeResult<()> {
        let ended = {
            let mut current = self.run.lock();
            let ended = current.as_ref().is_some_and(|run| {
                self.state.load() == (ServiceTaskState::Stopped, run.generation)
            });
            if ended {
                current.take()
            } else {
                None
            }
        };
        if let Some(ended) = ended {
            let report = ended.group.shutdown(ABORT_CONFIRMATION).await;
            *self.last_report.lock() = Some(report);
        }
        self.start_now()
    }

    fn start_now(&self) -> RuntimeResult<()> {
        let mut current = self.run.lock();
        let (generation, previous) = match self.state.begin_start() {
            Ok(started) => started,
            Err(state) => {
                tracing::warn!(
                    service = %self.task.get_service_name(),
                    state = state.as_str(),
                    "service start ignored: the service is not stopped"
                );
                return Ok(());
            }
        };
        // A loop that returned on its own after `start` checked: close its
        // component at once and keep its report as the last one.
        if let Some(ended) = current.take() {
            *self.last_report.lock() = Some(ended.group.shutdown_now());
        }
        let restore = |cause: RuntimeError| {
            // A refused spawn dropped the loop's `RunExit`, which may have
            // moved the run to `Stopped` already.
            let _ = self
                .state
                .transition(generation, ServiceTaskState::Starting, previous)
                || self
                    .state
                    .transition(generation, ServiceTaskState::Stopped, previous);
            Err(RuntimeError::within(
                RuntimeOperation::SpawnServiceTask,
                cause,
            ))
        };
        let group = match self.parent.try_child(COMPONENT) {
            Ok(group) => group,
            Err(cause) => return restore(cause),
        };
        let hook_task = Arc::clone(&self.task);
        let context = ServiceTaskContext::with_run(Some(RunLink {
            state: Arc::clone(&self.state),
            generation,
            cancelled: group.cancellation_token(),
            on_wait_end: Arc::new(move || {
                let task = Arc::clone(&hook_task);
                Box::pin(async move { task.on_wait_end().await })
            }),
        }));
        let task = Arc::clone(&self.task);
        let loop_context = context.share();
        // Built before the future: dropped however the loop ends (return,
        // panic, abort), also when the task is aborted before its first poll.
        let exit = RunExit {
            state: Arc::clone(&self.state),
            generation,
        };
        // Boxed where it is built: the loop holds the service's state, which
        // may be large, and must not be copied around the caller's stack.
        let spawned = group.spawn_service(
            self.task.get_service_name(),
            Box::pin(async move {
                let _exit = exit;
                task.run(&loop_context).await;
            }),
        );
        let task = match spawned {
            Ok(task) => task,
            Err(cause) => {
                let _ = group.shutdown_now();
                return restore(cause);
            }
        };
        *current = Some(Run {
            generation,
            group,
            task,
            context,
        });
        // Fails only if the loop already returned (the state is `Stopped`).
        let _ = self.state.transition(
            generation,
            ServiceTaskState::Starting,
            ServiceTaskState::Running,
        );
        Ok(())
    }

    /// Asks the loop to stop without waiting: its context reports stopped
    /// and a parked wait returns.
    pub fn make_stop(&self) {
        if let Some(run) = self.run.lock().as_ref() {
            run.context.stop();
        }
    }

    /// Wakes the loop's [`wait_for_running`](ServiceTaskContext::wait_for_running).
    pub fn wakeup(&self) {
        if let Some(run) = self.run.lock().as_ref() {
            run.context.wakeup();
        }
    }

    /// [`shutdown_with_interrupt`](Self::shutdown_with_interrupt)`(false)`.
    ///
    /// # Errors
    ///
    /// None today; the `Result` is kept for compatibility.
    ///
    /// # Cancel safety
    ///
    /// As [`shutdown_with_interrupt_until`](Self::shutdown_with_interrupt_until).
    pub async fn shutdown(&self) -> RuntimeResult<()> {
        self.shutdown_inner(false, None).await
    }

    /// Stops the loop within the parent group's installed deadline, or
    /// 30 s when there is none.
    ///
    /// # Errors
    ///
    /// None today; the `Result` is kept for compatibility.
    ///
    /// # Cancel safety
    ///
    /// As [`shutdown_with_interrupt_until`](Self::shutdown_with_interrupt_until).
    pub async fn shutdown_with_interrupt(&self, interrupt: bool) -> RuntimeResult<()> {
        self.shutdown_inner(interrupt, None).await
    }

    /// [`shutdown_with_interrupt_until`](Self::shutdown_with_interrupt_until)`(false, deadline)`.
    ///
    /// # Errors
    ///
    /// None today; the `Result` is kept for compatibility.
    ///
    /// # Cancel safety
    ///
    /// As [`shutdown_with_interrupt_until`](Self::shutdown_with_interrupt_until).
    pub async fn shutdown_until(&self, deadline: ShutdownDeadline) -> RuntimeResult<()> {
        self.shutdown_inner(false, Some(deadline)).await
    }

    /// Stops the current run by the earliest of `deadline` and the parent
    /// group's installed deadline.
    ///
    /// Without `interrupt`, the loop is asked to stop and awaited until the
    /// deadline, then its component shuts down within what is left (an
    /// unfinished loop is aborted at the deadline). With `interrupt`, the
    /// loop is aborted at once and its destruction awaited for the time
    /// left, or up to 1 s when less than a second is left: the only wait
    /// past the deadline. The component's report becomes
    /// [`last_task_group_shutdown_report`](Self::last_task_group_shutdown_report)
    /// and the state `Stopped`. Nothing running: returns at once; a
    /// shutdown already in progress elsewhere is not awaited.
    ///
    /// # Errors
    ///
    /// None today; the `Result` is kept for compatibility.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe in effect: dropping the future after its first poll
    /// completes the stop at once (the component is shut down immediately,
    /// aborting a loop still running, and the state becomes `Stopped`); the
    /// report then records what had not finished.
    pub async fn shutdown_with_interrupt_until(
        &self,
        interrupt: bool,
        deadline: ShutdownDeadline,
    ) -> RuntimeResult<()> {
        self.shutdown_inner(interrupt, Some(deadline)).await
    }

    async fn shutdown_inner(
        &self,
        interrupt: bool,
        requested: Option<ShutdownDeadline>,
    ) -> RuntimeResult<()> {
        let installed = self.parent.shutdown_deadline();
        let deadline = match (requested, installed) {
            (Some(requested), Some(installed)) => requested.earliest(installed),
            (Some(deadline), None) | (None, Some(deadline)) => deadline,
            (None, None) => ShutdownDeadline::after(SERVICE_MANAGER_SHUTDOWN_TIMEOUT),
        };
        let (stopping, run) = {
            let mut current = self.run.lock();
            (self.state.begin_stop(), current.take())
        };
        let Some(run) = run else {
            return Ok(());
        };
        if stopping != Some(run.generation) {
            // The loop returned on its own: only its empty component is left.
            let report = run.group.shutdown_until(deadline).await;
            *self.last_report.lock() = Some(report);
            return Ok(());
        }
        run.context.stop();
        let (group, task) = (run.group.clone(), run.task);
        // Finishes the stop even if this future is dropped midway.
        let mut stopping = StoppingRun {
            run: Some(run),
            state: &self.state,
            last_report: &self.last_report,
        };
        let report = if interrupt {
            group.abort_task(task);
            let confirm = deadline.remaining().max(ABORT_CONFIRMATION);
            group
                .wait_task_until(task, ShutdownDeadline::after(confirm))
                .await;
            group.shutdown(Duration::ZERO).await
        } else if group.wait_task_until(task, deadline).await {
            group.shutdown_until(deadline).await
        } else {
            group.shutdown(Duration::ZERO).await
        };
        stopping.finish(report);
        Ok(())
    }
}
