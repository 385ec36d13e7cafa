//! What a schedule is: its timing mode, period, concurrency and missed-tick
//! policy, and the rule that the two must agree.
//!
//! Invariant: `FixedDelay` and `FixedRateNoOverlap` go with `Serial`, and
//! `FixedRateAllowOverlap` with `Bounded(n)`. A zero period or run limit, a
//! mismatch, or a controlled schedule whose mode is not fixed delay is
//! refused with kind `Unsupported` before anything is registered.

use std::num::NonZeroUsize;
use std::time::Duration;

use serde::Serialize;

use crate::error::{RuntimeError, RuntimeOperation, RuntimeResult};
use crate::task_identity::TaskId;

/// The timing mode of a schedule (decided by the [`ScheduledTaskConfig`]
/// constructor).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleMode {
    /// Run, then wait `period` after the run completes.
    FixedDelay,
    /// Tick every `period` on an absolute grid; runs never overlap.
    FixedRateNoOverlap,
    /// Tick every `period` on an absolute grid; up to `n` runs overlap.
    FixedRateAllowOverlap,
}

/// How many runs of one schedule may be active at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScheduledTaskConcurrency {
    /// One run at a time (fixed delay, fixed rate without overlap).
    Serial,
    /// Up to `n` overlapping runs (fixed rate).
    Bounded(NonZeroUsize),
}

impl ScheduledTaskConcurrency {
    /// The number of run slots.
    pub const fn limit(self) -> usize {
        match self {
            Self::Serial => 1,
            Self::Bounded(n) => n.get(),
        }
    }
}

/// What happens to a fixed-rate tick that finds every run slot busy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MissedTickPolicy {
    /// Discard it (counted in `skips`).
    Skip,
    /// Keep at most one pending run; further missed ticks are skipped.
    CoalesceLatest,
    /// Keep up to `n` pending runs; further missed ticks are skipped.
    BoundedCatchUp(NonZeroUsize),
}

impl MissedTickPolicy {
    /// Pending runs this policy keeps.
    pub(crate) const fn pending_limit(self) -> usize {
        match self {
            Self::Skip => 0,
            Self::CoalesceLatest => 1,
            Self::BoundedCatchUp(n) => n.get(),
        }
    }
}

/// Concurrency and missed-tick policy of a schedule.
///
/// The default is `serial(MissedTickPolicy::Skip)`: one run at a time, and a
/// tick that arrives while it runs is skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ScheduledExecutionPolicy {
    /// Run slots.
    pub concurrency: ScheduledTaskConcurrency,
    /// What a tick that finds no free slot does.
    pub missed_ticks: MissedTickPolicy,
}

impl ScheduledExecutionPolicy {
    /// One run at a time (for fixed delay and fixed rate without overlap).
    pub const fn serial(missed_ticks: MissedTickPolicy) -> Self {
        Self {
            concurrency: ScheduledTaskConcurrency::Serial,
            missed_ticks,
        }
    }

    /// Up to `n` overlapping runs (for fixed rate).
    pub const fn bounded(n: NonZeroUsize, missed_ticks: MissedTickPolicy) -> Self {
        Self {
            concurrency: ScheduledTaskConcurrency::Bounded(n),
            missed_ticks,
        }
    }
}

impl Default for ScheduledExecutionPolicy {
    fn default() -> Self {
        Self::serial(MissedTickPolicy::Skip)
    }
}

/// What a controlled run tells its schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScheduledTaskControl {
    /// Keep the schedule going.
    Continue,
    /// End the schedule; this run counts as one completed run.
    Stop,
}

/// The answer to a registration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a refused registration never runs: check the outcome"]
pub enum ScheduledTaskRegistrationOutcome {
    /// The schedule runs; its driver task has this id.
    Scheduled(TaskId),
    /// A schedule with this name exists; it was left untouched.
    AlreadyPresent,
}

/// A schedule's name and timing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduledTaskConfig {
    /// Unique within one [`ScheduledTaskGroup`](crate::ScheduledTaskGroup).
    pub name: String,
    /// Delay before the first run (default zero: the first run is immediate).
    pub initial_delay: Duration,
    /// The period; must not be zero.
    pub period: Duration,
    /// The timing mode.
    pub mode: ScheduleMode,
    /// A run still going after this long is dropped and counted as a failure.
    pub max_run_time: Option<Duration>,
}

impl ScheduledTaskConfig {
    fn new(name: impl Into<String>, period: Duration, mode: ScheduleMode) -> Self {
        Self {
            name: name.into(),
            initial_delay: Duration::ZERO,
            period,
            mode,
            max_run_time: None,
        }
    }

    /// Run, then wait `period` after each run completes.
    pub fn fixed_delay(name: impl Into<String>, period: Duration) -> Self {
        Self::new(name, period, ScheduleMode::FixedDelay)
    }

    /// Tick every `period` on an absolute grid; runs never overlap.
    pub fn fixed_rate_no_overlap(name: impl Into<String>, period: Duration) -> Self {
        Self::new(name, period, ScheduleMode::FixedRateNoOverlap)
    }

    /// Tick every `period` on an absolute grid; runs may overlap up to the
    /// policy's bound.
    pub fn fixed_rate(name: impl Into<String>, period: Duration) -> Self {
        Self::new(name, period, ScheduleMode::FixedRateAllowOverlap)
    }

    /// Sets the delay before the first run.
    #[must_use]
    pub fn with_initial_delay(mut self, delay: Duration) -> Self {
        self.initial_delay = delay;
        self
    }

    /// Bounds each run: a run still going after `limit` is dropped and
    /// counted as a failure. External side effects of a dropped run need
    /// their own cancellation contract.
    #[must_use]
    pub fn with_max_run_time(mut self, limit: Duration) -> Self {
        self.max_run_time = Some(limit);
        self
    }

    /// Checks the configuration against `policy` (and, for a controlled
    /// schedule, that the mode is fixed delay).
    pub(crate) fn validate(
        &self,
        policy: &ScheduledExecutionPolicy,
        controlled: bool,
    ) -> RuntimeResult<()> {
        let agrees = matches!(
            (self.mode, policy.concurrency),
            (
                ScheduleMode::FixedDelay | ScheduleMode::FixedRateNoOverlap,
                ScheduledTaskConcurrency::Serial
            ) | (
                ScheduleMode::FixedRateAllowOverlap,
                ScheduledTaskConcurrency::Bounded(_)
            )
        );
        let zero = self.period.is_zero() || self.max_run_time.is_some_and(|limit| limit.is_zero());
        if zero || !agrees || (controlled && self.mode != ScheduleMode::FixedDelay) {
            return Err(RuntimeError::unsupported(
                RuntimeOperation::RegisterScheduledTask,
            ));
        }
        Ok(())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    const TWO: NonZeroUsize = match NonZeroUsize::new(2) {
        Some(n) => n,
        None => unreachable!(),
    };

    #[test]
    fn modes_and_policies_must_agree() {
        let serial = ScheduledExecutionPolicy::default();
        let bounded = ScheduledExecutionPolicy::bounded(TWO, MissedTickPolicy::Skip);
        let period = Duration::from_millis(10);
        let delay = ScheduledTaskConfig::fixed_delay("d", period);
        let no_overlap = ScheduledTaskConfig::fixed_rate_no_overlap("n", period);
        let rate = ScheduledTaskConfig::fixed_rate("r", period);
        assert!(delay.validate(&serial, true).is_ok());
        assert!(no_overlap.validate(&serial, false).is_ok());
        assert!(rate.validate(&bounded, false).is_ok());
        for (config, policy, controlled) in [
            (&delay, &bounded, false),
            (&no_overlap, &bounded, false),
            (&rate, &serial, false),
            (&no_overlap, &serial, true),
        ] {
            let error = config.validate(policy, controlled).expect_err("mismatch");
            assert_eq!(error.kind(), crate::error::RuntimeErrorKind::Unsupported);
            assert_eq!(error.operation(), RuntimeOperation::RegisterScheduledTask);
        }
        let zero = ScheduledTaskConfig::fixed_delay("z", Duration::ZERO);
        assert!(zero.validate(&serial, false).is_err());
        let zero_limit = delay.clone().with_max_run_time(Duration::ZERO);
        assert!(zero_limit.validate(&serial, false).is_err());
    }

    #[test]
    fn limits() {
        assert_eq!(ScheduledTaskConcurrency::Serial.limit(), 1);
        assert_eq!(ScheduledTaskConcurrency::Bounded(TWO).limit(), 2);
        assert_eq!(MissedTickPolicy::Skip.pending_limit(), 0);
        assert_eq!(MissedTickPolicy::CoalesceLatest.pending_limit(), 1);
        assert_eq!(MissedTickPolicy::BoundedCatchUp(TWO).pending_limit(), 2);
    }
}
