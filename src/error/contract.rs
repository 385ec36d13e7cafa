//! Contract violations: invalid caller configuration, reported before any
//! runtime resource exists.

use std::fmt;

use super::kind::CanonicalCondition;

/// The rule a rejected configuration broke.
///
/// `Display` (and [`as_str`](Self::as_str)) is a stable lowercase kebab-case
/// label such as `worker-threads-positive`; [`subject`](Self::subject) names
/// the setting the rule is about and [`requirement`](Self::requirement) says
/// what it accepts, so a message built from a policy tells an operator what
/// to change. The enum is non-exhaustive: a `match` outside this crate needs
/// a wildcard arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RuntimeContractPolicy {
    /// `max_blocking_threads` must lie in
    /// `RuntimeConfig::MIN_ENTRYPOINT_BLOCKING_THREADS..=MAX_ENTRYPOINT_BLOCKING_THREADS`.
    MaxBlockingThreadsWithinSupportedRange,
    /// `worker_threads` must be at least 1.
    WorkerThreadsPositive,
    /// `max_blocking_threads` must be at least 1.
    MaxBlockingThreadsPositive,
    /// The runtime thread name must contain a non-whitespace character.
    ThreadNameNotBlank,
    /// An explicit thread stack size must be positive.
    ThreadStackSizePositive,
    /// A blocking pool's `max_concurrency` must be at least 1.
    BlockingMaxConcurrencyPositive,
    /// A blocking pool's `max_queue_depth` must be at least 1.
    BlockingMaxQueueDepthPositive,
    /// A blocking pool's queue timeout plus task timeout must be representable
    /// as a duration and as a deadline.
    BlockingTimeoutRepresentable,
    /// The global blocking capacity must cover one reserved slot per lane.
    BlockingGlobalCapacityCoversLanes,
    /// A service context scope name must not be blank.
    ServiceContextScopeNotBlank,
    /// A configured memory limit must be positive.
    ConfiguredMemoryLimitPositive,
    /// A memory fraction must be positive and at most 1.
    MemoryFractionPositiveAndBounded,
    /// The managed memory ratio must be positive and at most 1.
    ManagedMemoryRatioPositiveAndBounded,
    /// The reserved memory headroom must be below the effective limit.
    ManagedMemoryHeadroomBelowEffectiveLimit,
    /// The resolved managed memory budget must be positive.
    ManagedMemoryBudgetPositive,
    /// A critical-failure subscription needs a positive capacity.
    CriticalFailureSubscriptionCapacityPositive,
    /// The metadata actor's pending-operation limit must be positive.
    MetadataMaxPendingOperationsPositive,
    /// The metadata actor's pending-byte limit must be positive.
    MetadataMaxPendingBytesPositive,
    /// The metadata actor's blocking task timeout must be positive.
    MetadataBlockingTaskTimeoutPositive,
    /// Tokio's time driver must be enabled: every deadline, timeout and
    /// schedule of this crate is a Tokio timer.
    TimeDriverEnabled,
    /// `ROCKETMQ_SHUTDOWN_TIMEOUT_SECONDS` must be whole seconds in 1..=300.
    ShutdownTimeoutSecondsInRange,
    /// `ROCKETMQ_LIVENESS_STALE_SECONDS` must be whole seconds in 2..=300.
    LivenessStaleSecondsInRange,
    /// `ROCKETMQ_DRAIN_DELAY_SECONDS` must be whole seconds in 0..=300.
    DrainDelaySecondsInRange,
    /// The drain delay must be shorter than the shutdown timeout: it runs
    /// inside the frozen deadline and must leave time for the shutdown.
    DrainDelayBelowShutdownTimeout,
    /// `ROCKETMQ_HEALTH_BIND_ADDR` must be a socket address (or empty).
    ProbeBindAddressValid,
    /// `ROCKETMQ_HEALTH_DRAIN_METHODS` must be `POST` or `GET,POST`.
    DrainMethodsIncludePost,
    /// `ROCKETMQ_HEALTH_METRICS` must be `0` or `1`.
    HealthMetricsSwitch,
    /// A `/drainz` token (`ROCKETMQ_HEALTH_DRAIN_TOKEN`) must be 16 to 256
    /// visible ASCII characters.
    DrainTokenValid,
    /// `ROCKETMQ_PROCESS_MEMORY_LIMIT_BYTES` must be a positive whole number
    /// of bytes.
    ProcessMemoryLimitPositive,
    /// A component stops after siblings: every context passed to
    /// `component_after` must be a component of the same context.
    StopOrderAmongSiblings,
    /// A restart backoff's minimum must be at most its maximum, and above
    /// zero unless both are zero.
    RestartBackoffOrdered,
    /// A restart jitter must be a fraction in `0.0..=1.0`.
    RestartJitterFraction,
    /// A restart window must be above zero.
    RestartWindowPositive,
    /// A progress deadline must be above zero, and restarting on a stall
    /// needs one.
    ProgressDeadlinePositive,
}

impl RuntimeContractPolicy {
    /// The stable kebab-case label, identical to `Display`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::MaxBlockingThreadsWithinSupportedRange => {
                "max-blocking-threads-within-supported-range"
            }
            Self::WorkerThreadsPositive => "worker-threads-positive",
            Self::MaxBlockingThreadsPositive => "max-blocking-threads-positive",
            Self::ThreadNameNotBlank => "thread-name-not-blank",
            Self::ThreadStackSizePositive => "thread-stack-size-positive",
            Self::BlockingMaxConcurrencyPositive => "blocking-max-concurrency-positive",
            Self::BlockingMaxQueueDepthPositive => "blocking-max-queue-depth-positive",
            Self::BlockingTimeoutRepresentable => "blocking-timeout-representable",
            Self::BlockingGlobalCapacityCoversLanes => "blocking-global-capacity-covers-lanes",
            Self::ServiceContextScopeNotBlank => "service-context-scope-not-blank",
            Self::ConfiguredMemoryLimitPositive => "configured-limit-must-be-positive",
            Self::MemoryFractionPositiveAndBounded => "fraction-must-be-positive-and-bounded",
            Self::ManagedMemoryRatioPositiveAndBounded => {
                "managed-memory-ratio-positive-and-bounded"
            }
            Self::ManagedMemoryHeadroomBelowEffectiveLimit => {
                "managed-memory-headroom-below-effective-limit"
            }
            Self::ManagedMemoryBudgetPositive => "managed-memory-budget-positive",
            Self::CriticalFailureSubscriptionCapacityPositive => {
                "critical-failure-subscription-capacity-positive"
            }
            Self::MetadataMaxPendingOperationsPositive => "max-pending-operations-positive",
            Self::MetadataMaxPendingBytesPositive => "max-pending-bytes-positive",
            Self::MetadataBlockingTaskTimeoutPositive => "blocking-task-timeout-positive",
            Self::TimeDriverEnabled => "time-driver-enabled",
            Self::ShutdownTimeoutSecondsInRange => "shutdown-timeout-seconds-in-range",
            Self::LivenessStaleSecondsInRange => "liveness-stale-seconds-in-range",
            Self::DrainDelaySecondsInRange => "drain-delay-seconds-in-range",
            Self::DrainDelayBelowShutdownTimeout => "drain-delay-below-shutdown-timeout",
            Self::ProbeBindAddressValid => "probe-bind-address-valid",
            Self::DrainMethodsIncludePost => "drain-methods-include-post",
            Self::HealthMetricsSwitch => "health-metrics-switch",
            Self::DrainTokenValid => "drain-token-valid",
            Self::ProcessMemoryLimitPositive => "process-memory-limit-positive",
            Self::StopOrderAmongSiblings => "stop-order-among-siblings",
            Self::RestartBackoffOrdered => "restart-backoff-ordered",
            Self::RestartJitterFraction => "restart-jitter-fraction",
            Self::RestartWindowPositive => "restart-window-positive",
            Self::ProgressDeadlinePositive => "progress-deadline-positive",
        }
    }

    /// The setting the rule is about, as a user names it (a field path or
    /// a constructor).
    pub const fn subject(self) -> &'static str {
        match self {
            Self::MaxBlockingThreadsWithinSupportedRange
            | Self::MaxBlockingThreadsPositive
            | Self::BlockingGlobalCapacityCoversLanes => "RuntimeConfig::max_blocking_threads",
            Self::WorkerThreadsPositive => "RuntimeConfig::worker_threads",
            Self::ThreadNameNotBlank => "RuntimeConfig::thread_name",
            Self::ThreadStackSizePositive => "RuntimeConfig::thread_stack_size",
            Self::TimeDriverEnabled => "RuntimeConfig::enable_time",
            Self::BlockingMaxConcurrencyPositive => "BlockingPoolPolicy::max_concurrency",
            Self::BlockingMaxQueueDepthPositive => "BlockingPoolPolicy::max_queue_depth",
            Self::BlockingTimeoutRepresentable => {
                "BlockingPoolPolicy::queue_timeout + BlockingPoolPolicy::task_timeout"
            }
            Self::ServiceContextScopeNotBlank => "ScopeId",
            Self::ConfiguredMemoryLimitPositive => "ProcessMemoryLimit::configured",
            Self::MemoryFractionPositiveAndBounded => "ProcessMemoryLimit::fraction",
            Self::ManagedMemoryRatioPositiveAndBounded => "ManagedMemoryPolicy::fraction",
            Self::ManagedMemoryHeadroomBelowEffectiveLimit => "ManagedMemoryPolicy::with_headroom",
            Self::ManagedMemoryBudgetPositive => "ManagedMemoryPolicy",
            Self::CriticalFailureSubscriptionCapacityPositive => "CriticalFailureState::subscribe",
            Self::MetadataMaxPendingOperationsPositive => {
                "MetadataIoConfig::max_pending_operations"
            }
            Self::MetadataMaxPendingBytesPositive => "MetadataIoConfig::max_pending_bytes",
            Self::MetadataBlockingTaskTimeoutPositive => "MetadataIoConfig::blocking_task_timeout",
            Self::ShutdownTimeoutSecondsInRange => "ServiceLifecycleConfig::shutdown_timeout",
            Self::LivenessStaleSecondsInRange => "ServiceLifecycleConfig::liveness_stale_after",
            Self::DrainDelaySecondsInRange | Self::DrainDelayBelowShutdownTimeout => {
                "ServiceLifecycle::with_drain_delay"
            }
            Self::ProbeBindAddressValid => "ServiceLifecycleConfig::probe_bind_addr",
            Self::DrainMethodsIncludePost => "ServiceLifecycleConfig::drain_request_methods",
            Self::HealthMetricsSwitch => "ServiceLifecycle::with_metrics",
            Self::DrainTokenValid => "ServiceLifecycle::with_drain_token",
            Self::ProcessMemoryLimitPositive => "ProcessMemoryLimit::detect",
            Self::StopOrderAmongSiblings => "component_after(scope, after)",
            Self::RestartBackoffOrdered => "ServiceRestartPolicy::with_backoff",
            Self::RestartJitterFraction => "ServiceRestartPolicy::with_jitter",
            Self::RestartWindowPositive => "ServiceRestartPolicy::with_max_restarts",
            Self::ProgressDeadlinePositive => "ServiceRestartPolicy::with_progress_deadline",
        }
    }

    /// What the setting accepts, as a phrase that follows "expected".
    pub const fn requirement(self) -> &'static str {
        match self {
            Self::MaxBlockingThreadsWithinSupportedRange => "a value in 3..=512",
            Self::WorkerThreadsPositive
            | Self::MaxBlockingThreadsPositive
            | Self::BlockingMaxConcurrencyPositive
            | Self::BlockingMaxQueueDepthPositive
            | Self::CriticalFailureSubscriptionCapacityPositive
            | Self::MetadataMaxPendingOperationsPositive
            | Self::MetadataMaxPendingBytesPositive => "at least 1",
            Self::BlockingGlobalCapacityCoversLanes => "at least 3 (one reserved slot per lane)",
            Self::ThreadNameNotBlank | Self::ServiceContextScopeNotBlank => {
                "a name with a non-whitespace character"
            }
            Self::ThreadStackSizePositive => "None or a positive number of bytes",
            Self::TimeDriverEnabled => {
                "true (deadlines, timeouts and schedules are Tokio timers)"
            }
            Self::BlockingTimeoutRepresentable => {
                "a sum representable as a duration and as a deadline"
            }
            Self::ConfiguredMemoryLimitPositive => "at least 1 byte",
            Self::MemoryFractionPositiveAndBounded | Self::ManagedMemoryRatioPositiveAndBounded => {
                "0 < numerator <= denominator"
            }
            Self::ManagedMemoryHeadroomBelowEffectiveLimit => {
                "headroom below the effective memory limit"
            }
            Self::ManagedMemoryBudgetPositive => "a managed budget of at least 1 byte",
            Self::MetadataBlockingTaskTimeoutPositive => "a positive duration",
            Self::ShutdownTimeoutSecondsInRange => "whole seconds in 1..=300",
            Self::LivenessStaleSecondsInRange => "whole seconds in 2..=300",
            Self::DrainDelaySecondsInRange => "whole seconds in 0..=300",
            Self::DrainDelayBelowShutdownTimeout => {
                "fewer seconds than the shutdown timeout (ROCKETMQ_SHUTDOWN_TIMEOUT_SECONDS, default 45)"
            }
            Self::ProbeBindAddressValid if cfg!(feature = "probes") => {
                "a socket address such as 127.0.0.1:8080 or [::1]:8080 (empty: no probe server)"
            }
            Self::ProbeBindAddressValid => {
                "empty: this build has no `probes` feature, so no probe server"
            }
            Self::DrainMethodsIncludePost => "POST or GET,POST",
            Self::HealthMetricsSwitch if cfg!(feature = "metrics") => {
                "0 (no /metrics) or 1 (serve /metrics)"
            }
            Self::HealthMetricsSwitch => "0: this build has no `metrics` feature, so no /metrics",
            Self::DrainTokenValid => "16 to 256 visible ASCII characters (empty: no token)",
            Self::ProcessMemoryLimitPositive => {
                "a positive whole number of bytes"
            }
            Self::StopOrderAmongSiblings => {
                "components of the context component_after is called on"
            }
            Self::RestartBackoffOrdered => {
                "a minimum at most the maximum, above zero unless both are zero"
            }
            Self::RestartJitterFraction => "a fraction from 0.0 to 1.0",
            Self::RestartWindowPositive => "a window above zero",
            Self::ProgressDeadlinePositive => {
                "a deadline above zero (restart_on_stall needs one)"
            }
        }
    }
}

impl fmt::Display for RuntimeContractPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The caller asked for something the runtime does not accept.
///
/// Returned by validation (`RuntimeConfig::validate`, `plan()`, policy and
/// budget constructors) before any thread, runtime or file is created. A
/// violation never carries the rejected values or a source error, so its
/// message is safe to log as is. Its
/// [`condition`](Self::condition) is always
/// [`CanonicalCondition::InvalidArgument`].
///
/// There is no conversion into [`RuntimeError`](crate::RuntimeError): the two
/// channels stay distinct. The enum is exhaustive, as the specification
/// gives it: a `match` can name every violation without a wildcard arm, and
/// a new violation is a breaking change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuntimeContractViolation {
    /// A runtime, blocking-lane or context configuration broke `policy`.
    #[error(
        "invalid runtime configuration ({policy}): {}, expected {}",
        .policy.subject(),
        .policy.requirement()
    )]
    InvalidConfiguration {
        /// The rule that failed.
        policy: RuntimeContractPolicy,
    },
    /// A memory limit configuration broke `policy`.
    #[error(
        "invalid memory limit ({policy}): {}, expected {}",
        .policy.subject(),
        .policy.requirement()
    )]
    InvalidMemoryLimit {
        /// The rule that failed.
        policy: RuntimeContractPolicy,
    },
    /// A schedule configuration broke `policy`.
    #[error(
        "invalid schedule ({policy}): {}, expected {}",
        .policy.subject(),
        .policy.requirement()
    )]
    InvalidSchedule {
        /// The rule that failed.
        policy: RuntimeContractPolicy,
    },
    /// A metadata persistence configuration broke `policy`.
    #[error(
        "invalid metadata configuration ({policy}): {}, expected {}",
        .policy.subject(),
        .policy.requirement()
    )]
    InvalidMetadataConfiguration {
        /// The rule that failed.
        policy: RuntimeContractPolicy,
    },
    /// A resource budget was given an empty name.
    #[error("resource budget name must not be empty")]
    EmptyBudgetName,
    /// A resource budget name contains characters outside its allowed set.
    #[error("resource budget name is invalid")]
    InvalidBudgetName,
    /// A resource budget was given a zero capacity in `dimension`.
    #[error("resource budget {dimension} capacity must be positive")]
    ZeroBudgetCapacity {
        /// The dimension with a zero capacity.
        dimension: BudgetDimension,
    },
    /// A rate-limited resource budget was given a zero rate.
    #[error("resource budget rate must be positive")]
    ZeroBudgetRate,
    /// A control reserve exceeds the budget's capacity in `dimension`.
    #[error("resource budget {dimension} control reserve exceeds its capacity")]
    ReserveExceedsBudgetCapacity {
        /// The dimension whose reserve is too large.
        dimension: BudgetDimension,
    },
    /// A control reserve names a dimension the budget has no capacity in
    /// (a rate reserve without a rate limit).
    #[error("resource budget {dimension} control reserve has no capacity to reserve from")]
    ReserveWithoutBudgetCapacity {
        /// The dimension without capacity.
        dimension: BudgetDimension,
    },
    /// A child budget exceeds its parent in `dimension` (or has no rate
    /// under a rate-limited parent).
    #[error("child resource budget exceeds its parent's {dimension} capacity")]
    ChildBudgetExceedsParent {
        /// The dimension that does not fit.
        dimension: BudgetDimension,
    },
    /// A resource budget was given a zero maximum permit age.
    #[error("resource budget max age must be positive")]
    ZeroBudgetMaxAge,
    /// A child budget's maximum permit age exceeds its parent's.
    #[error("child resource budget max age exceeds its parent's")]
    ChildBudgetMaxAgeExceedsParent,
    /// A permit was moved to a budget of a different budget tree.
    #[error("permit target belongs to a different resource budget tree")]
    PermitTargetInDifferentTree,
}

impl RuntimeContractViolation {
    /// The canonical condition of every contract violation:
    /// [`CanonicalCondition::InvalidArgument`].
    pub const fn condition(&self) -> CanonicalCondition {
        CanonicalCondition::InvalidArgument
    }

    /// The rule that failed, for the variants that carry one.
    pub const fn policy(&self) -> Option<RuntimeContractPolicy> {
        match self {
            Self::InvalidConfiguration { policy }
            | Self::InvalidMemoryLimit { policy }
            | Self::InvalidSchedule { policy }
            | Self::InvalidMetadataConfiguration { policy } => Some(*policy),
            _ => None,
        }
    }

    /// Shorthand for [`InvalidConfiguration`](Self::InvalidConfiguration).
    pub(crate) const fn configuration(policy: RuntimeContractPolicy) -> Self {
        Self::InvalidConfiguration { policy }
    }
}

/// A dimension of a budget: what a budget limit or a contract violation
/// is about (defined with the errors, which name it, so the error
/// vocabulary needs nothing from the budget tree).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BudgetDimension {
    /// Number of reservations.
    Count,
    /// Retained bytes.
    Bytes,
    /// Reservations per second.
    Rate,
}

impl BudgetDimension {
    /// The lowercase label (`count`, `bytes`, `rate`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Count => "count",
            Self::Bytes => "bytes",
            Self::Rate => "rate",
        }
    }
}

impl fmt::Display for BudgetDimension {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
