//! `ScheduledTaskGroup`: the one periodic scheduler, owned by the task tree.
//!
//! | State | Owner |
//! | --- | --- |
//! | registrations (name → schedule) | [`ScheduledTaskGroup`] (this file) |
//! | mode/policy agreement | [`config`] |
//! | per-schedule counters, run reservations | [`metrics`] (`Schedule`, `RunTicket`) |
//! | ticks, missed-tick policy, pending runs | [`driver`] (`Driver::drive`) |
//!
//! Registration: validate (see [`config`]); then, under the registry lock,
//! spawn the driver task (`scheduled-driver:{name}`, kind `ScheduledDriver`,
//! a plain task or an operation task) into the scheduler's group, and only
//! then record the schedule. Fixed-delay work runs on the driver; fixed-rate
//! runs are separate tasks (`scheduled-run:{name}`, kind `ScheduledRun`).
//! For an operation-bound schedule both are tasks of the operation, so its
//! cancellation or deadline stops them.
//!
//! Invariants:
//!
//! 1. One name maps to one schedule per scheduler, under one lock held across
//!    the driver spawn: a duplicate answers `AlreadyPresent` without touching
//!    the existing schedule, and a driver that cannot be spawned leaves no
//!    registration.
//! 2. `clear_completed` clears only while the group has no task, checked under
//!    the same lock.
//! 3. The registered work is type-erased once (`Box<dyn FnMut>`) and each run
//!    future once (`Box::pin`), so one non-generic driver serves every mode
//!    and every schedule.
//! 4. A panicking run is not caught by the scheduler: it is a tracked task
//!    like any other, so it poisons the group (fail-stop) and is counted
//!    `panicked` in reports, while its ticket counts it as a schedule failure.

mod config;
mod driver;
mod metrics;

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::time::Duration;

use crate::error::{RuntimeError, RuntimeOperation, RuntimeResult};
use crate::loom::{Arc, Mutex, Weak};
use crate::operation::OperationContext;
use crate::task_group::TaskGroup;
use crate::task_identity::{TaskKind, TaskName};
use crate::{shutdown_deadline::ShutdownDeadline, shutdown_report::ShutdownReport};

pub use config::{
    MissedTickPolicy, ScheduleMode, ScheduledExecutionPolicy, ScheduledTaskConcurrency,
    ScheduledTaskConfig, ScheduledTaskControl, ScheduledTaskRegistrationOutcome,
};
use driver::{Driver, RunFactory, RunFuture, RunSpawner};
use metrics::Schedule;
pub use metrics::ScheduledTaskSnapshot;

/// The registrations of one scheduler (shared by its clones).
#[derive(Debug, Default)]
struct Registry {
    schedules: Mutex<BTreeMap<Arc<str>, Arc<Schedule>>>,
}

/// Periodic work owned by a task group.
///
/// Derive one with
/// [`ChildServiceContext::scheduled_tasks`](crate::ChildServiceContext::scheduled_tasks)
/// or wrap an owned group with [`new`](Self::new). Clones share the group
/// and the registrations. The configuration decides the timing mode and
/// the policy must agree with it:
///
/// | Config | Timing | Policy |
/// | --- | --- | --- |
/// | [`ScheduledTaskConfig::fixed_delay`] | run, then wait `period` after it completes | `serial(..)` |
/// | [`ScheduledTaskConfig::fixed_rate_no_overlap`] | tick every `period`; runs never overlap | `serial(..)` |
/// | [`ScheduledTaskConfig::fixed_rate`] | tick every `period`; up to `n` runs overlap | `bounded(n, ..)` |
///
/// A zero period or a disagreeing policy is refused with kind
/// `Unsupported` (operation `RegisterScheduledTask`). A run that panics
/// counts as a failure in the snapshot and, like every tracked task,
/// poisons the scheduler's group (fail-stop): later runs of fixed-rate
/// schedules fail to start (and count as failures), and a fixed-delay
/// schedule whose inline run panicked stops.
///
/// ```
/// use std::time::Duration;
/// use rocketmq_runtime::{
///     RuntimeContext, ScheduledExecutionPolicy, ScheduledTaskConfig, ScheduledTaskGroup,
/// };
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let harness = RuntimeContext::try_from_current("test").unwrap();
/// let maintenance = harness.service_context("broker").scheduled_tasks("maintenance");
/// let config = ScheduledTaskConfig::fixed_delay("flush", Duration::from_millis(100));
/// maintenance
///     .schedule(config, ScheduledExecutionPolicy::default(), || async { /* flush */ })
///     .unwrap();
/// tokio::time::sleep(Duration::from_millis(250)).await; // runs at 0, 100 and 200 ms
/// assert_eq!(maintenance.snapshot()[0].runs, 3);
/// let report = maintenance.shutdown(Duration::from_secs(1)).await;
/// assert!(report.is_healthy());
/// # }
/// ```
#[derive(Clone)]
pub struct ScheduledTaskGroup {
    group: TaskGroup,
    registry: Arc<Registry>,
}

impl ScheduledTaskGroup {
    /// A scheduler over `group`: its drivers and runs are tasks of `group`.
    pub fn new(group: TaskGroup) -> Self {
        Self {
            group,
            registry: Arc::new(Registry::default()),
        }
    }

    /// The owning task group.
    pub fn group(&self) -> &TaskGroup {
        &self.group
    }

    /// Registers periodic work: `task` makes one run future per tick.
    ///
    /// # Errors
    ///
    /// Kind `Unsupported` (operation `RegisterScheduledTask`) for a zero
    /// period or `max_run_time`, or a policy that contradicts the mode; the
    /// group's spawn error (`Closed`, `Poisoned`) if the driver cannot be
    /// spawned, leaving no registration behind. A duplicate name is not an
    /// error: it returns [`ScheduledTaskRegistrationOutcome::AlreadyPresent`]
    /// and leaves the existing schedule untouched.
    #[track_caller]
    pub fn schedule<F, Fut>(
        &self,
        config: ScheduledTaskConfig,
        policy: ScheduledExecutionPolicy,
        task: F,
    ) -> RuntimeResult<ScheduledTaskRegistrationOutcome>
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.register(config, policy, None, false, continuing(task))
    }

    /// Registers periodic work bound to `operation`: the driver and every
    /// run are tasks of the operation in this scheduler's group, so the
    /// operation's cancellation or deadline (and this group's
    /// cancellation) stops them.
    ///
    /// # Errors
    ///
    /// As [`schedule`](Self::schedule), plus the operation's submission
    /// errors (`Closed` once it is closed, cancelled or expired;
    /// `internal_failure(OperationOwner)` if it is bound to another group).
    #[track_caller]
    pub fn schedule_operation<F, Fut>(
        &self,
        operation: &OperationContext,
        config: ScheduledTaskConfig,
        policy: ScheduledExecutionPolicy,
        task: F,
    ) -> RuntimeResult<ScheduledTaskRegistrationOutcome>
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.register(config, policy, Some(operation), false, continuing(task))
    }

    /// Registers fixed-delay work that can end itself: a run returning
    /// [`ScheduledTaskControl::Stop`] ends the schedule and counts as one
    /// completed run.
    ///
    /// # Errors
    ///
    /// As [`schedule`](Self::schedule); any mode but fixed delay is
    /// `Unsupported`.
    #[track_caller]
    pub fn schedule_controlled<F, Fut>(
        &self,
        config: ScheduledTaskConfig,
        mut task: F,
    ) -> RuntimeResult<ScheduledTaskRegistrationOutcome>
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = ScheduledTaskControl> + Send + 'static,
    {
        let make_run: RunFactory = Box::new(move || -> RunFuture { Box::pin(task()) });
        self.register(
            config,
            ScheduledExecutionPolicy::default(),
            None,
            true,
            make_run,
        )
    }

    #[track_caller]
    fn register(
        &self,
        config: ScheduledTaskConfig,
        policy: ScheduledExecutionPolicy,
        operation: Option<&OperationContext>,
        controlled: bool,
        make_run: RunFactory,
    ) -> RuntimeResult<ScheduledTaskRegistrationOutcome> {
        config.validate(&policy, controlled)?;
        let mut schedules = self.registry.schedules.lock();
        if schedules.contains_key(config.name.as_str()) {
            return Ok(ScheduledTaskRegistrationOutcome::AlreadyPresent);
        }
        let driver_name = TaskName::from(format!("scheduled-driver:{}", config.name));
        let runs = RunSpawner {
            group: self.group.clone(),
            operation: operation.cloned(),
            name: TaskName::from(Arc::<str>::from(format!("scheduled-run:{}", config.name))),
        };
        let schedule = Arc::new(Schedule::new(config, policy));
        let driver = Driver::new(Arc::clone(&schedule), runs, make_run);
        let spawner = RunSpawner {
            group: self.group.clone(),
            operation: operation.cloned(),
            name: driver_name.clone(),
        };
        let id = spawner.spawn(driver_name, TaskKind::ScheduledDriver, driver.drive())?;
        schedules.insert(Arc::clone(&schedule.name), schedule);
        Ok(ScheduledTaskRegistrationOutcome::Scheduled(id))
    }

    /// Snapshots of every registered schedule, sorted by name.
    pub fn snapshot(&self) -> Vec<ScheduledTaskSnapshot> {
        self.registry
            .schedules
            .lock()
            .values()
            .map(|schedule| schedule.snapshot())
            .collect()
    }

    /// A read-only view of the named schedules that does not keep the
    /// scheduler alive (names sorted and deduplicated).
    pub fn observer(&self, names: &[&str]) -> ScheduledTaskObserver {
        let mut names: Vec<Arc<str>> = names.iter().map(|name| Arc::from(*name)).collect();
        names.sort();
        names.dedup();
        ScheduledTaskObserver {
            registry: Arc::downgrade(&self.registry),
            names,
        }
    }

    /// Forgets every registration, only while the group has no task.
    ///
    /// # Errors
    ///
    /// `context_unavailable(ClearCompletedSchedules)` while any task of the
    /// group (a driver, a run or another task) is registered.
    pub fn clear_completed(&self) -> RuntimeResult<()> {
        let mut schedules = self.registry.schedules.lock();
        if self.group.task_count() > 0 {
            return Err(RuntimeError::context_unavailable(
                RuntimeOperation::ClearCompletedSchedules,
            ));
        }
        schedules.clear();
        Ok(())
    }

    /// Shuts the scheduler's group down within `timeout`
    /// ([`TaskGroup::shutdown`]).
    ///
    /// # Cancel safety
    ///
    /// As [`TaskGroup::shutdown`]: the deadline is installed at the call;
    /// calling again after dropping the future resumes and completes it.
    pub async fn shutdown(&self, timeout: Duration) -> ShutdownReport {
        self.group.shutdown(timeout).await
    }

    /// Shuts the scheduler's group down by `deadline`
    /// ([`TaskGroup::shutdown_until`]).
    ///
    /// # Cancel safety
    ///
    /// As [`shutdown`](Self::shutdown).
    pub async fn shutdown_until(&self, deadline: ShutdownDeadline) -> ShutdownReport {
        self.group.shutdown_until(deadline).await
    }
}

impl fmt::Debug for ScheduledTaskGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScheduledTaskGroup")
            .field("group", &self.group.name())
            .field("schedules", &self.registry.schedules.lock().len())
            .finish()
    }
}

/// Snapshots of a fixed set of schedules through a weak reference: empty
/// once the scheduler is dropped. A lookup costs one map search per
/// selected name.
#[derive(Debug, Clone)]
pub struct ScheduledTaskObserver {
    registry: Weak<Registry>,
    names: Vec<Arc<str>>,
}

impl ScheduledTaskObserver {
    /// Snapshots of the selected schedules that are registered, by name.
    pub fn snapshot(&self) -> Vec<ScheduledTaskSnapshot> {
        let Some(registry) = self.registry.upgrade() else {
            return Vec::new();
        };
        let schedules = registry.schedules.lock();
        self.names
            .iter()
            .filter_map(|name| schedules.get(name).map(|schedule| schedule.snapshot()))
            .collect()
    }
}

/// Type-erases plain periodic work: every run continues the schedule.
fn continuing<F, Fut>(mut task: F) -> RunFactory
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    Box::new(move || -> RunFuture {
        let run = task();
        Box::pin(async move {
            run.await;
            ScheduledTaskControl::Continue
        })
    })
}
