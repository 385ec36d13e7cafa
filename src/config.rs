//! Runtime configuration: thread counts, blocking lanes and validation.
//!
//! [`RuntimeConfig`] is plain data with public fields.
//!
//! Invariants:
//!
//! 1. Profiles are derived deterministically from a CPU count
//!    ([`RuntimeConfig::for_parallelism`]), so the same input always yields
//!    the same limits.
//! 2. [`RuntimeConfig::validate`] checks a configuration without any I/O and
//!    reports the first broken rule, in the documented order, as a
//!    [`RuntimeContractViolation::InvalidConfiguration`]; lane policies are
//!    checked in lane order by `blocking/policy.rs`.
//! 3. A configuration without the time driver is refused
//!    (`TimeDriverEnabled`): shutdown deadlines are Tokio timers.

use std::time::Duration;

use crate::blocking::{default_parallelism, BlockingLanePolicies};
use crate::error::{RuntimeContractPolicy, RuntimeContractViolation};

/// How long an owner's shutdown call without a deadline may take
/// (`RuntimeConfig::shutdown_timeout`'s default), for owners that run no
/// [`ServiceLifecycle`](crate::ServiceLifecycle): a lifecycle's first
/// shutdown request freezes its own deadline
/// ([`DEFAULT_SHUTDOWN_TIMEOUT`](crate::DEFAULT_SHUTDOWN_TIMEOUT), 45 s).
pub(crate) const OWNER_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);

/// How long an idle Tokio blocking thread is kept alive by default.
const DEFAULT_THREAD_KEEP_ALIVE: Duration = Duration::from_secs(30);

/// The default runtime thread name.
const DEFAULT_THREAD_NAME: &str = "rocketmq-runtime";

/// Configuration of an owned Tokio runtime and its managed blocking lanes.
///
/// | Field | `for_parallelism(name, p)` (with `p' = max(p, 1)`) |
/// | --- | --- |
/// | `worker_threads` | `p'` |
/// | `max_blocking_threads` | `clamp(4·p', 3, 512)` (saturating) |
/// | `thread_name` | `name` |
/// | `thread_stack_size` | `None` (Tokio's default) |
/// | `thread_keep_alive` | 30 s |
/// | `shutdown_timeout` | 30 s |
/// | `blocking_lane_policies` | [`BlockingLanePolicies::for_parallelism`]`(p')`, each lane's `max_concurrency` capped at `max_blocking_threads` |
/// | `enable_io`, `enable_time` | `true` |
///
/// `max_blocking_threads` is the managed blocking capacity shared by the
/// three lanes; Tokio itself gets
/// [`tokio_blocking_threads`](Self::tokio_blocking_threads) threads, which
/// adds [`blocking_thread_headroom`](Self::blocking_thread_headroom) for
/// direct `spawn_blocking` calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeConfig {
    /// Number of Tokio worker threads; at least 1.
    pub worker_threads: usize,
    /// Managed blocking capacity shared by all lanes; within
    /// [`MIN_ENTRYPOINT_BLOCKING_THREADS`](Self::MIN_ENTRYPOINT_BLOCKING_THREADS)`..=`[`MAX_ENTRYPOINT_BLOCKING_THREADS`](Self::MAX_ENTRYPOINT_BLOCKING_THREADS).
    pub max_blocking_threads: usize,
    /// Name prefix of the runtime's threads; must not be blank.
    pub thread_name: String,
    /// Stack size of the runtime's threads; `None` keeps Tokio's default.
    pub thread_stack_size: Option<usize>,
    /// How long an idle blocking thread is kept alive.
    pub thread_keep_alive: Duration,
    /// Default graceful-shutdown budget.
    pub shutdown_timeout: Duration,
    /// Policies of the managed blocking lanes.
    pub blocking_lane_policies: BlockingLanePolicies,
    /// Whether the Tokio I/O driver is enabled.
    pub enable_io: bool,
    /// Whether the Tokio time driver is enabled. It must be `true`:
    /// every deadline, timeout and schedule of this crate is a Tokio timer,
    /// so [`validate`](Self::validate) refuses `false`
    /// (`TimeDriverEnabled`) rather than accept a setting it cannot honour.
    pub enable_time: bool,
}

/// Smallest accepted [`RuntimeConfig::max_blocking_threads`]: one reserved
/// slot per lane.
pub const MIN_ENTRYPOINT_BLOCKING_THREADS: usize = 3;
/// Largest accepted [`RuntimeConfig::max_blocking_threads`].
pub const MAX_ENTRYPOINT_BLOCKING_THREADS: usize = 512;

impl RuntimeConfig {
    /// Smallest accepted `max_blocking_threads`
    /// ([`MIN_ENTRYPOINT_BLOCKING_THREADS`](crate::MIN_ENTRYPOINT_BLOCKING_THREADS)).
    pub const MIN_ENTRYPOINT_BLOCKING_THREADS: usize = MIN_ENTRYPOINT_BLOCKING_THREADS;
    /// Largest accepted `max_blocking_threads`
    /// ([`MAX_ENTRYPOINT_BLOCKING_THREADS`](crate::MAX_ENTRYPOINT_BLOCKING_THREADS)).
    pub const MAX_ENTRYPOINT_BLOCKING_THREADS: usize = MAX_ENTRYPOINT_BLOCKING_THREADS;

    /// A deterministic profile for `available_parallelism` CPUs (0 is treated
    /// as 1); see the table on [`RuntimeConfig`]. Never panics, even for
    /// `usize::MAX`.
    pub fn for_parallelism(thread_name: impl Into<String>, available_parallelism: usize) -> Self {
        let parallelism = available_parallelism.max(1);
        let max_blocking_threads = parallelism.saturating_mul(4).clamp(
            Self::MIN_ENTRYPOINT_BLOCKING_THREADS,
            Self::MAX_ENTRYPOINT_BLOCKING_THREADS,
        );
        let mut blocking_lane_policies = BlockingLanePolicies::for_parallelism(parallelism);
        blocking_lane_policies.cap_concurrency(max_blocking_threads);
        Self {
            worker_threads: parallelism,
            max_blocking_threads,
            thread_name: thread_name.into(),
            thread_stack_size: None,
            thread_keep_alive: DEFAULT_THREAD_KEEP_ALIVE,
            shutdown_timeout: OWNER_SHUTDOWN_TIMEOUT,
            blocking_lane_policies,
            enable_io: true,
            enable_time: true,
        }
    }

    /// Overrides the managed blocking capacity.
    ///
    /// Accepts exactly
    /// [`MIN_ENTRYPOINT_BLOCKING_THREADS`](Self::MIN_ENTRYPOINT_BLOCKING_THREADS)`..=`[`MAX_ENTRYPOINT_BLOCKING_THREADS`](Self::MAX_ENTRYPOINT_BLOCKING_THREADS);
    /// anything else is
    /// [`MaxBlockingThreadsWithinSupportedRange`](RuntimeContractPolicy::MaxBlockingThreadsWithinSupportedRange).
    /// Caps every lane's `max_concurrency` at `limit`, then re-validates the
    /// whole configuration and returns its first violation, if any.
    pub fn with_max_blocking_threads(
        mut self,
        limit: usize,
    ) -> Result<Self, RuntimeContractViolation> {
        let range = Self::MIN_ENTRYPOINT_BLOCKING_THREADS..=Self::MAX_ENTRYPOINT_BLOCKING_THREADS;
        if !range.contains(&limit) {
            return Err(RuntimeContractViolation::configuration(
                RuntimeContractPolicy::MaxBlockingThreadsWithinSupportedRange,
            ));
        }
        self.max_blocking_threads = limit;
        self.blocking_lane_policies.cap_concurrency(limit);
        self.validate()?;
        Ok(self)
    }

    /// Extra Tokio blocking threads beyond the managed capacity, for direct
    /// `spawn_blocking` calls: `max(2, max_blocking_threads / 8)`.
    pub fn blocking_thread_headroom(&self) -> usize {
        (self.max_blocking_threads / 8).max(2)
    }

    /// The Tokio runtime's `max_blocking_threads`: the managed capacity plus
    /// [`blocking_thread_headroom`](Self::blocking_thread_headroom)
    /// (saturating).
    pub fn tokio_blocking_threads(&self) -> usize {
        self.max_blocking_threads
            .saturating_add(self.blocking_thread_headroom())
    }

    /// [`Default`] with the given thread name.
    pub fn server_default(thread_name: impl Into<String>) -> Self {
        Self::for_parallelism(thread_name, default_parallelism())
    }

    /// The broker profile: [`Default`] named `rocketmq-broker`.
    pub fn broker_default() -> Self {
        Self::server_default("rocketmq-broker")
    }

    /// The name server profile: [`Default`] named `rocketmq-namesrv`.
    pub fn namesrv_default() -> Self {
        Self::server_default("rocketmq-namesrv")
    }

    /// The proxy profile: [`Default`] named `rocketmq-proxy`.
    pub fn proxy_default() -> Self {
        Self::server_default("rocketmq-proxy")
    }

    /// The controller profile: [`Default`] named `rocketmq-controller`.
    pub fn controller_default() -> Self {
        Self::server_default("rocketmq-controller")
    }

    /// Checks the configuration without I/O and returns the first broken
    /// rule, as [`RuntimeContractViolation::InvalidConfiguration`], in this
    /// order:
    ///
    /// 1. `worker_threads == 0` → `WorkerThreadsPositive`
    /// 2. `max_blocking_threads == 0` → `MaxBlockingThreadsPositive`
    /// 3. `max_blocking_threads > 512` → `MaxBlockingThreadsWithinSupportedRange`
    /// 4. blank `thread_name` → `ThreadNameNotBlank`
    /// 5. `thread_stack_size == Some(0)` → `ThreadStackSizePositive`
    /// 6. an invalid lane policy → that lane's policy rule
    ///    (see [`BlockingLanePolicies::validate`])
    /// 7. `max_blocking_threads < 3` (less than one reserved slot per lane)
    ///    → `BlockingGlobalCapacityCoversLanes`
    /// 8. `enable_time == false` → `TimeDriverEnabled`
    ///
    /// The violation's message names the field and what it accepts (see
    /// [`RuntimeContractPolicy::subject`] and
    /// [`RuntimeContractPolicy::requirement`]).
    pub fn validate(&self) -> Result<(), RuntimeContractViolation> {
        let fail = |policy| Err(RuntimeContractViolation::configuration(policy));
        if self.worker_threads == 0 {
            return fail(RuntimeContractPolicy::WorkerThreadsPositive);
        }
        if self.max_blocking_threads == 0 {
            return fail(RuntimeContractPolicy::MaxBlockingThreadsPositive);
        }
        if self.max_blocking_threads > Self::MAX_ENTRYPOINT_BLOCKING_THREADS {
            return fail(RuntimeContractPolicy::MaxBlockingThreadsWithinSupportedRange);
        }
        if self.thread_name.trim().is_empty() {
            return fail(RuntimeContractPolicy::ThreadNameNotBlank);
        }
        if self.thread_stack_size == Some(0) {
            return fail(RuntimeContractPolicy::ThreadStackSizePositive);
        }
        self.blocking_lane_policies.validate()?;
        if self.max_blocking_threads < Self::MIN_ENTRYPOINT_BLOCKING_THREADS {
            return fail(RuntimeContractPolicy::BlockingGlobalCapacityCoversLanes);
        }
        if !self.enable_time {
            return fail(RuntimeContractPolicy::TimeDriverEnabled);
        }
        Ok(())
    }
}

impl Default for RuntimeConfig {
    /// [`for_parallelism`](Self::for_parallelism)`("rocketmq-runtime", p)`
    /// with `p = std::thread::available_parallelism()`, or 4 when unknown.
    fn default() -> Self {
        Self::for_parallelism(DEFAULT_THREAD_NAME, default_parallelism())
    }
}
