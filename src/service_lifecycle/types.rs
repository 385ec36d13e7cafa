//! The lifecycle's vocabulary: states, shutdown reasons and requests,
//! dependency readiness, critical-failure recovery, and the committed
//! transitions an observer receives.

use std::fmt;

use crate::shutdown_deadline::ShutdownDeadline;

/// The lifecycle state of a service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ServiceLifecycleState {
    /// Not ready yet.
    Starting,
    /// Serving.
    Ready,
    /// Shutting down.
    Draining,
    /// Stopped.
    Stopped,
    /// Failed.
    Failed,
}

impl ServiceLifecycleState {
    /// The lowercase label.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Starting => "starting",
            Self::Ready => "ready",
            Self::Draining => "draining",
            Self::Stopped => "stopped",
            Self::Failed => "failed",
        }
    }
}

impl fmt::Display for ServiceLifecycleState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a shutdown was requested.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ShutdownReason {
    /// A pre-stop hook or drain request (`/drainz`).
    PreStop,
    /// SIGTERM or SIGINT.
    Signal,
    /// The service itself (an API call, a critical failure).
    Internal,
}

impl ShutdownReason {
    /// The snake-case label (`pre_stop`, `signal`, `internal`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::PreStop => "pre_stop",
            Self::Signal => "signal",
            Self::Internal => "internal",
        }
    }
}

/// The first shutdown request: its reason and its frozen deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownRequest {
    /// Why.
    pub reason: ShutdownReason,
    /// `request time + shutdown_timeout`, frozen.
    pub deadline: ShutdownDeadline,
}

/// Readiness of the service's dependencies, published separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum DependencyReadiness {
    /// Dependencies are ready.
    #[default]
    Ready,
    /// A dependency is degraded: the service is not ready.
    Degraded,
}

/// What a critical failure does to the service (readiness is always
/// revoked first: dependencies become `Degraded`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CriticalFailureRecovery {
    /// Only revoke readiness.
    RevokeReadiness,
    /// Revoke readiness and mark the service `Failed`.
    FailService,
    /// Revoke readiness, mark it `Failed` and request an `Internal` shutdown.
    FailAndRequestShutdown,
}

/// A committed state change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceLifecycleTransition {
    /// The previous state; `None` only for the initial `Starting` event.
    pub from: Option<ServiceLifecycleState>,
    /// The new state.
    pub to: ServiceLifecycleState,
}

/// Receives committed transitions, after the lifecycle's lock is released.
/// Callbacks must be short, non-blocking and panic-free.
pub trait ServiceLifecycleObserver: fmt::Debug + Send + Sync {
    /// One committed transition.
    fn on_transition(&self, transition: ServiceLifecycleTransition);
}
