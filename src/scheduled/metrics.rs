//! Per-schedule counters and the run reservation that settles them.
//!
//! Invariants:
//!
//! 1. Every run is reserved before it exists ([`RunTicket`]): the reservation
//!    counts it active (and an overlap if another run is active).
//! 2. The ticket settles exactly once, when it is dropped: `runs` only after
//!    a normal return, `failures` for everything else (timeout, panic,
//!    cancellation, abort, or a run that never started).
//! 3. Every settlement wakes the driver (a stored permit), which then starts
//!    pending runs.

use std::time::Duration;

use serde::Serialize;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::loom::{Arc, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use crate::scheduled::config::{ScheduleMode, ScheduledExecutionPolicy, ScheduledTaskConfig};

/// A point-in-time view of one schedule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScheduledTaskSnapshot {
    /// The schedule's name.
    pub name: String,
    /// Its timing mode.
    pub mode: ScheduleMode,
    /// True while its driver runs.
    pub running: bool,
    /// Runs reserved and not yet settled.
    pub active_runs: u64,
    /// Runs that returned normally (a controlled `Stop` included).
    pub runs: u64,
    /// Fixed-rate ticks discarded because no run slot was free (or, with a
    /// catch-up policy, the pending queue was full).
    pub skips: u64,
    /// Runs reserved while another run of the schedule was active.
    pub overlaps: u64,
    /// Runs that timed out, panicked, were cancelled or aborted, or never
    /// started.
    pub failures: u64,
    /// How late the last tick fired, in milliseconds.
    pub last_drift_ms: u64,
    /// Duration of the last settled run, in milliseconds.
    pub last_elapsed_ms: u64,
    /// Longest settled run, in milliseconds.
    pub max_elapsed_ms: u64,
}

/// The shared state of one registered schedule.
#[derive(Debug)]
pub(crate) struct Schedule {
    pub(crate) name: Arc<str>,
    pub(crate) config: ScheduledTaskConfig,
    pub(crate) policy: ScheduledExecutionPolicy,
    running: AtomicBool,
    active_runs: AtomicUsize,
    runs: AtomicU64,
    skips: AtomicU64,
    overlaps: AtomicU64,
    failures: AtomicU64,
    last_drift_ms: AtomicU64,
    last_elapsed_ms: AtomicU64,
    max_elapsed_ms: AtomicU64,
    /// Woken (with a stored permit) after every run settles.
    pub(crate) run_settled: Notify,
}

impl Schedule {
    pub(crate) fn new(config: ScheduledTaskConfig, policy: ScheduledExecutionPolicy) -> Self {
        Self {
            name: Arc::from(config.name.as_str()),
            config,
            policy,
            running: AtomicBool::new(false),
            active_runs: AtomicUsize::new(0),
            runs: AtomicU64::new(0),
            skips: AtomicU64::new(0),
            overlaps: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            last_drift_ms: AtomicU64::new(0),
            last_elapsed_ms: AtomicU64::new(0),
            max_elapsed_ms: AtomicU64::new(0),
            run_settled: Notify::new(),
        }
    }

    pub(crate) fn snapshot(&self) -> ScheduledTaskSnapshot {
        ScheduledTaskSnapshot {
            name: self.config.name.clone(),
            mode: self.config.mode,
            running: self.running.load(Ordering::Acquire),
            active_runs: self.active_runs.load(Ordering::Acquire) as u64,
            runs: self.runs.load(Ordering::Acquire),
            skips: self.skips.load(Ordering::Acquire),
            overlaps: self.overlaps.load(Ordering::Acquire),
            failures: self.failures.load(Ordering::Acquire),
            last_drift_ms: self.last_drift_ms.load(Ordering::Acquire),
            last_elapsed_ms: self.last_elapsed_ms.load(Ordering::Acquire),
            max_elapsed_ms: self.max_elapsed_ms.load(Ordering::Acquire),
        }
    }

    /// True while a run slot is free.
    pub(crate) fn has_free_slot(&self) -> bool {
        self.active_runs.load(Ordering::Acquire) < self.policy.concurrency.limit()
    }

    pub(crate) fn record_drift(&self, late: Duration) {
        self.last_drift_ms.store(millis(late), Ordering::Release);
    }

    pub(crate) fn record_skips(&self, skipped: u64) {
        if skipped > 0 {
            self.skips.fetch_add(skipped, Ordering::AcqRel);
        }
    }

    /// Marks the driver running until the returned guard drops.
    pub(crate) fn driver_running(self: &Arc<Self>) -> DriverRunning {
        self.running.store(true, Ordering::Release);
        DriverRunning(Arc::clone(self))
    }

    /// Reserves a run (it is active from now on; an overlap if another run
    /// is active). The ticket settles it exactly once.
    pub(crate) fn reserve(self: &Arc<Self>) -> RunTicket {
        if self.active_runs.fetch_add(1, Ordering::AcqRel) > 0 {
            self.overlaps.fetch_add(1, Ordering::AcqRel);
        }
        RunTicket {
            schedule: Arc::clone(self),
            started: None,
            completed: false,
        }
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Keeps a schedule's `running` flag set while its driver lives.
#[derive(Debug)]
pub(crate) struct DriverRunning(Arc<Schedule>);

impl Drop for DriverRunning {
    fn drop(&mut self) {
        self.0.running.store(false, Ordering::Release);
    }
}

/// One reserved run; settles its schedule's counters when dropped.
#[derive(Debug)]
pub(crate) struct RunTicket {
    schedule: Arc<Schedule>,
    started: Option<Instant>,
    completed: bool,
}

impl RunTicket {
    /// Marks the run started (its elapsed time counts from here).
    pub(crate) fn start(&mut self) {
        self.started = Some(Instant::now());
    }

    /// Marks the run returned normally; settled as a run when dropped.
    pub(crate) fn complete(mut self) {
        self.completed = true;
    }
}

impl Drop for RunTicket {
    fn drop(&mut self) {
        let schedule = &*self.schedule;
        if let Some(started) = self.started {
            let elapsed = millis(started.elapsed());
            schedule.last_elapsed_ms.store(elapsed, Ordering::Release);
            schedule.max_elapsed_ms.fetch_max(elapsed, Ordering::AcqRel);
        }
        let counter = if self.completed {
            &schedule.runs
        } else {
            &schedule.failures
        };
        counter.fetch_add(1, Ordering::AcqRel);
        schedule.active_runs.fetch_sub(1, Ordering::AcqRel);
        schedule.run_settled.notify_one();
    }
}
