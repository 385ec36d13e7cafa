//! The operational error kinds and their canonical conditions.

use std::fmt;

use serde::Serialize;

/// What went wrong, in the terms a caller branches on.
///
/// The kind is the stable, matchable part of a [`RuntimeError`]; the
/// operation label only says where it happened. The kind also fixes the
/// error's [`code`](Self::code), its [`CanonicalCondition`] and its recovery
/// hint.
///
/// | Kind | Condition | Code |
/// | --- | --- | --- |
/// | `Closed`, `Poisoned`, `ContextUnavailable` | `Unavailable` | `runtime.context.unavailable` |
/// | `CapacityExhausted` | `ResourceExhausted` | `runtime.capacity.exhausted` |
/// | `TimedOut` | `DeadlineExceeded` | `runtime.deadline.exceeded` |
/// | `Unsupported` | `Unimplemented` | `runtime.operation.unsupported` |
/// | `Configuration` | `InvalidArgument` | `runtime.configuration.invalid` |
/// | `Io` | `Internal` | `runtime.io.failed` |
/// | `Internal` | `Internal` | `runtime.internal.failure` |
///
/// [`RuntimeError`]: crate::RuntimeError
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RuntimeErrorKind {
    /// The owning scope (owner, task group, lane, actor) no longer admits
    /// work because it is shutting down or has shut down.
    Closed,
    /// The owning scope was poisoned by a critical failure and refuses new
    /// work until it is shut down.
    Poisoned,
    /// A deadline or timeout expired before the operation finished.
    TimedOut,
    /// A bounded capacity (queue depth, lane concurrency, budget) is full.
    CapacityExhausted,
    /// The operation is not supported in the context it was called from,
    /// for example a blocking shutdown inside an async context.
    Unsupported,
    /// The runtime context the operation needs is not available, for example
    /// because its owner has been destroyed.
    ContextUnavailable,
    /// Configuration loaded or applied at run time could not be used.
    Configuration,
    /// An operating-system I/O call failed.
    Io,
    /// An internal failure: a panicked or aborted task, a broken invariant.
    Internal,
}

impl RuntimeErrorKind {
    /// The snake_case label of the kind, identical to its serde form.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::Poisoned => "poisoned",
            Self::TimedOut => "timed_out",
            Self::CapacityExhausted => "capacity_exhausted",
            Self::Unsupported => "unsupported",
            Self::ContextUnavailable => "context_unavailable",
            Self::Configuration => "configuration",
            Self::Io => "io",
            Self::Internal => "internal",
        }
    }

    /// The canonical condition this kind maps to (see the table above).
    pub const fn condition(self) -> CanonicalCondition {
        match self {
            Self::Closed | Self::Poisoned | Self::ContextUnavailable => {
                CanonicalCondition::Unavailable
            }
            Self::CapacityExhausted => CanonicalCondition::ResourceExhausted,
            Self::TimedOut => CanonicalCondition::DeadlineExceeded,
            Self::Unsupported => CanonicalCondition::Unimplemented,
            Self::Configuration => CanonicalCondition::InvalidArgument,
            Self::Io | Self::Internal => CanonicalCondition::Internal,
        }
    }

    /// The stable dotted catalog code of this kind (see the table above).
    pub const fn code(self) -> &'static str {
        match self {
            Self::Closed | Self::Poisoned | Self::ContextUnavailable => {
                "runtime.context.unavailable"
            }
            Self::CapacityExhausted => "runtime.capacity.exhausted",
            Self::TimedOut => "runtime.deadline.exceeded",
            Self::Unsupported => "runtime.operation.unsupported",
            Self::Configuration => "runtime.configuration.invalid",
            Self::Io => "runtime.io.failed",
            Self::Internal => "runtime.internal.failure",
        }
    }

    /// A short, fixed text telling an operator what to do about this kind.
    pub const fn recovery_hint(self) -> &'static str {
        match self {
            Self::Closed => "the owning scope is shutting down; stop submitting work to it",
            Self::Poisoned => {
                "a critical failure poisoned the owning scope; shut it down and restart it"
            }
            Self::TimedOut => "the deadline expired; retry with a later deadline or shed load",
            Self::CapacityExhausted => {
                "capacity is exhausted; retry later, shed load or raise the configured limit"
            }
            Self::Unsupported => "call this operation from the context its documentation names",
            Self::ContextUnavailable => {
                "the runtime context is gone; use a context from a live runtime owner"
            }
            Self::Configuration => "correct the configuration and restart the component",
            Self::Io => "check the path, its permissions and free space, then retry",
            Self::Internal => "report a bug and include the error's diagnostic output",
        }
    }

    /// The fixed catalog message used by [`RuntimeError`]'s `Display`.
    ///
    /// [`RuntimeError`]: crate::RuntimeError
    pub(crate) const fn message(self) -> &'static str {
        match self {
            Self::Closed => "runtime scope is closed",
            Self::Poisoned => "runtime scope is poisoned",
            Self::TimedOut => "runtime deadline exceeded",
            Self::CapacityExhausted => "runtime capacity exhausted",
            Self::Unsupported => "runtime operation unsupported in this context",
            Self::ContextUnavailable => "runtime context unavailable",
            Self::Configuration => "runtime configuration invalid",
            Self::Io => "runtime I/O failed",
            Self::Internal => "runtime internal failure",
        }
    }
}

impl fmt::Display for RuntimeErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A canonical, transport-neutral classification of a failure.
///
/// It lets an RPC layer or an alerting rule treat runtime failures like any
/// other service failure without knowing this crate's kinds. Operational
/// errors map through [`RuntimeErrorKind::condition`]; every
/// [`RuntimeContractViolation`](crate::RuntimeContractViolation) is
/// [`InvalidArgument`](Self::InvalidArgument).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CanonicalCondition {
    /// The service or scope cannot serve the request now; retrying against a
    /// live owner may succeed.
    Unavailable,
    /// A bounded resource is exhausted.
    ResourceExhausted,
    /// A deadline expired before the work finished.
    DeadlineExceeded,
    /// The operation is not implemented or not supported where it was called.
    Unimplemented,
    /// An internal failure, including operating-system I/O failures.
    Internal,
    /// The caller supplied an invalid argument or configuration.
    InvalidArgument,
}

impl CanonicalCondition {
    /// The snake_case label of the condition, identical to its serde form.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Unavailable => "unavailable",
            Self::ResourceExhausted => "resource_exhausted",
            Self::DeadlineExceeded => "deadline_exceeded",
            Self::Unimplemented => "unimplemented",
            Self::Internal => "internal",
            Self::InvalidArgument => "invalid_argument",
        }
    }
}

impl fmt::Display for CanonicalCondition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
