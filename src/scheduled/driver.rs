//! The one schedule driver. Every mode runs this code; the mode only decides
//! whether a tick runs its work inline (fixed delay) or reserves runs as
//! separate tasks (fixed rate), and how the next tick is computed.
//!
//! Fixed delay (`D` = run, `p` = period, `i` = initial delay):
//!
//! ```text
//! time  0    i        i+d      i+d+p     i+d+p+d ...
//!       |----|DDDDDDDD|---p----|DDDDDDDD|---p----
//! ```
//!
//! Fixed rate keeps the absolute grid `i + k·p`:
//!
//! ```text
//! period 10, runs take 23, serial, CoalesceLatest:
//! ticks   0    10    20    30    40    50
//! runs    [0..23)[23..46)[46..69)        (a pending run starts when a slot frees)
//! pending      1     1(+1 skip) 1   1(+1 skip) 1
//! ```
//!
//! Invariants:
//!
//! 1. A tick first reserves a run (see [`metrics`](super::metrics)), then
//!    creates its future from the factory (one boxed future per run). Fixed
//!    delay awaits it on the driver; fixed rate spawns it as a tracked task
//!    (`scheduled-run:{name}`, of the scheduler's group or of its operation).
//!    A run that cannot be spawned drops its ticket: a failure.
//! 2. Fixed delay: the next tick is `period` after the run completes (or is
//!    dropped at its `max_run_time`).
//! 3. Fixed rate: ticks stay on the grid. A tick that fires late by `overdue`
//!    stands for `missed = 1 + floor(overdue / p)` ticks; pending runs start
//!    first while run slots are free, then new runs while slots are free, and
//!    the rest go to the missed-tick policy (pending up to its limit, or
//!    skipped); the next tick is the expected one `+ missed·p` (saturating at
//!    a far-future horizon, never at a passed tick).
//! 4. Pending runs start as slots free: the driver wakes on every run
//!    settlement while it has pending runs.
//! 5. The driver stops at group cancellation only while waiting for a tick
//!    (a fixed-delay run in progress is not interrupted by it), at a
//!    controlled `Stop`, or when an operation-bound driver's task wrapper
//!    drops its future.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::RuntimeResult;
use crate::loom::Arc;
use crate::operation::OperationContext;
use crate::scheduled::config::{ScheduleMode, ScheduledTaskControl};
use crate::scheduled::metrics::{DriverRunning, Schedule};
use crate::shutdown_deadline::saturating_add;
use crate::task_group::TaskGroup;
use crate::task_identity::{TaskId, TaskKind, TaskName};

/// One run's future, type-erased at registration (one allocation per run).
pub(crate) type RunFuture = Pin<Box<dyn Future<Output = ScheduledTaskControl> + Send>>;
/// The registered work: makes one run future per call.
pub(crate) type RunFactory = Box<dyn FnMut() -> RunFuture + Send>;

/// Where a schedule's separate runs go: its group, as plain tracked tasks
/// or as tasks of its operation.
#[derive(Debug)]
pub(crate) struct RunSpawner {
    pub(crate) group: TaskGroup,
    pub(crate) operation: Option<OperationContext>,
    pub(crate) name: TaskName,
}

impl RunSpawner {
    /// Spawns a task of this schedule (a driver or a run).
    pub(crate) fn spawn<F>(
        &self,
        name: TaskName,
        kind: TaskKind,
        future: F,
    ) -> RuntimeResult<TaskId>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        match &self.operation {
            None => self.group.spawn(name, kind, future),
            Some(operation) => {
                self.group
                    .spawn_operation(&operation.with_task_kind(kind), name, future)
            }
        }
    }
}

/// The driver of one schedule.
pub(crate) struct Driver {
    schedule: Arc<Schedule>,
    runs: RunSpawner,
    make_run: RunFactory,
    /// Keeps the schedule's `running` flag set from registration until the
    /// driver's future is dropped (also when it never ran).
    _running: DriverRunning,
}

impl Driver {
    pub(crate) fn new(schedule: Arc<Schedule>, runs: RunSpawner, make_run: RunFactory) -> Self {
        Self {
            _running: schedule.driver_running(),
            schedule,
            runs,
            make_run,
        }
    }

    /// Runs the schedule until it stops: group cancellation (while waiting
    /// for a tick), a controlled `Stop`, or, for an operation-bound
    /// schedule, the operation's task wrapper dropping this future.
    pub(crate) async fn drive(mut self) {
        let schedule = Arc::clone(&self.schedule);
        let config = &schedule.config;
        let period = config.period;
        let pending_limit = schedule.policy.missed_ticks.pending_limit();
        let cancelled = self.runs.group.cancellation_token();
        // Saturating: `Duration::MAX` ("never") must not overflow the clock.
        let mut expected = saturating_add(Instant::now(), config.initial_delay);
        let mut pending = 0usize;
        loop {
            // Wait for the tick; start pending runs as slots free.
            loop {
                while pending > 0 && schedule.has_free_slot() {
                    pending -= 1;
                    self.start_run();
                }
                let settled = schedule.run_settled.notified();
                tokio::select! {
                    biased;
                    () = cancelled.cancelled() => return,
                    () = tokio::time::sleep_until(expected) => break,
                    () = settled, if pending > 0 => {}
                }
            }
            let fired = Instant::now();
            let overdue = fired.saturating_duration_since(expected);
            schedule.record_drift(overdue);
            if config.mode == ScheduleMode::FixedDelay {
                let mut ticket = schedule.reserve();
                ticket.start();
                let run = (self.make_run)();
                match bounded(run, config.max_run_time).await {
                    Some(control) => {
                        ticket.complete();
                        if control == ScheduledTaskControl::Stop {
                            return;
                        }
                    }
                    // Timed out: the run's future is dropped, a failure.
                    None => drop(ticket),
                }
                expected = saturating_add(Instant::now(), period);
                continue;
            }
            // Pending runs are older than this tick: a run that settled
            // while the tick came due frees its slot for them first (the
            // biased wait saw the tick before the settlement).
            while pending > 0 && schedule.has_free_slot() {
                pending -= 1;
                self.start_run();
            }
            let missed = 1 + overdue.as_nanos() / period.as_nanos();
            let mut remaining = missed;
            while remaining > 0 && pending == 0 && schedule.has_free_slot() {
                remaining -= 1;
                self.start_run();
            }
            let queued = remaining.min(pending_limit.saturating_sub(pending) as u128);
            pending += queued as usize;
            schedule.record_skips(u64::try_from(remaining - queued).unwrap_or(u64::MAX));
            expected = advance(expected, period, missed);
        }
    }

    /// Reserves and spawns one separate run; a run that cannot be spawned
    /// settles as a failure (its ticket is dropped with it).
    fn start_run(&mut self) {
        let mut ticket = self.schedule.reserve();
        let run = (self.make_run)();
        let limit = self.schedule.config.max_run_time;
        let future = async move {
            ticket.start();
            if bounded(run, limit).await.is_some() {
                ticket.complete();
            }
        };
        let _ = self
            .runs
            .spawn(self.runs.name.clone(), TaskKind::ScheduledRun, future);
    }
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("schedule", &self.schedule.name)
            .finish_non_exhaustive()
    }
}

/// Runs `run`, dropping it after `limit`; `None` on timeout.
async fn bounded(run: RunFuture, limit: Option<Duration>) -> Option<ScheduledTaskControl> {
    match limit {
        Some(limit) => tokio::time::timeout(limit, run).await.ok(),
        None => Some(run.await),
    }
}

/// `expected + missed·period`. The step is at most `overdue + period`, so
/// it stays close to the current time; a sum the clock cannot represent
/// saturates at a far-future horizon (never at `expected`, which has
/// passed: that would fire again at once).
fn advance(expected: Instant, period: Duration, missed: u128) -> Instant {
    let step = period
        .as_nanos()
        .saturating_mul(missed)
        .min(u128::from(u64::MAX));
    saturating_add(expected, Duration::from_nanos(step as u64))
}
