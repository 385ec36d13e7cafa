//! Contract violations: invalid caller configuration, reported before any
//! runtime resource exists.

use std::fmt;

use super::kind::CanonicalCondition;
use crate::resource_budget::BudgetDimension;

/// The rule a rejected configuration broke.
///
/// `Display` (and [`as_str`](Self::as_str)) is a stable lowercase kebab-case
/// label such as `worker-threads-positive`. The enum is non-exhaustive: a
/// `match` outside this crate needs a wildcard arm.
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
/// channels stay distinct. The enum is non-exhaustive.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeContractViolation {
    /// A runtime, blocking-lane or context configuration broke `policy`.
    #[error("invalid runtime configuration: {policy}")]
    InvalidConfiguration {
        /// The rule that failed.
        policy: RuntimeContractPolicy,
    },
    /// A memory limit configuration broke `policy`.
    #[error("invalid memory limit: {policy}")]
    InvalidMemoryLimit {
        /// The rule that failed.
        policy: RuntimeContractPolicy,
    },
    /// A schedule configuration broke `policy`.
    #[error("invalid schedule: {policy}")]
    InvalidSchedule {
        /// The rule that failed.
        policy: RuntimeContractPolicy,
    },
    /// A metadata persistence configuration broke `policy`.
    #[error("invalid metadata configuration: {policy}")]
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
