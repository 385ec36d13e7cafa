//! Absolute shutdown deadlines.
//!
//! Invariants:
//!
//! 1. A [`ShutdownDeadline`] is a point in time on one clock
//!    (`tokio::time::Instant`, so paused test time applies), never a
//!    duration: once frozen it is passed unchanged through every shutdown
//!    step.
//! 2. The only way two deadlines combine is [`ShutdownDeadline::earliest`].
//!    Nothing in the crate extends a deadline; construction saturates instead
//!    of overflowing.

use std::time::Duration;

use serde::Serializer;
use tokio::time::Instant;

/// How far in the future a deadline lands when `now + timeout` is not
/// representable: about 30 years, the same horizon Tokio uses for "never".
const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

/// An absolute point in time by which a shutdown (or a bounded wait) must end.
///
/// The deadline is measured on Tokio's clock ([`tokio::time::Instant`]), the
/// single clock of this crate, so tests that pause or advance Tokio time see
/// deadlines expire accordingly.
///
/// # Deadlines only tighten
///
/// A deadline is frozen when it is created. Later steps may only pick the
/// [`earliest`](Self::earliest) of two deadlines (for example a per-component
/// budget and the process deadline); no operation of this crate ever moves a
/// deadline later, so repeated shutdown requests cannot extend the time a
/// process has left.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use rocketmq_runtime::ShutdownDeadline;
///
/// let process = ShutdownDeadline::after(Duration::from_secs(45));
/// let component = ShutdownDeadline::after(Duration::from_secs(10));
/// assert_eq!(process.earliest(component), component);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ShutdownDeadline(Instant);

impl ShutdownDeadline {
    /// The deadline `timeout` from now (on Tokio's clock).
    ///
    /// Saturating: when `now + timeout` is not representable (for example
    /// `Duration::MAX`), the deadline is placed about 30 years in the future
    /// instead of panicking.
    pub fn after(timeout: Duration) -> Self {
        Self(saturating_add(Instant::now(), timeout))
    }

    /// The deadline at the given standard-library instant.
    ///
    /// The instant is converted to Tokio's clock with
    /// [`tokio::time::Instant::from_std`]. While Tokio time is paused, Tokio's
    /// clock no longer follows the wall clock, so prefer
    /// [`after`](Self::after) or [`from_tokio`](Self::from_tokio) there.
    pub fn at(instant: std::time::Instant) -> Self {
        Self(Instant::from_std(instant))
    }

    /// The deadline at the given Tokio instant.
    pub const fn from_tokio(instant: Instant) -> Self {
        Self(instant)
    }

    /// The deadline as a Tokio instant (for `tokio::time::sleep_until` and
    /// `tokio::time::timeout_at`).
    pub const fn tokio_instant(self) -> Instant {
        self.0
    }

    /// The deadline as a standard-library instant.
    pub fn instant(self) -> std::time::Instant {
        self.0.into_std()
    }

    /// The time left until the deadline on Tokio's clock; zero once it has
    /// passed (never negative, never panics).
    pub fn remaining(self) -> Duration {
        self.0.saturating_duration_since(Instant::now())
    }

    /// Whether the deadline has passed, i.e. [`remaining`](Self::remaining)
    /// is zero.
    pub fn is_expired(self) -> bool {
        self.remaining().is_zero()
    }

    /// The earlier of two deadlines.
    ///
    /// This is the only way deadlines combine: a caller's deadline and an
    /// installed one are merged with `earliest`, so a later request can never
    /// extend an earlier deadline.
    #[must_use]
    pub fn earliest(self, other: Self) -> Self {
        std::cmp::min(self, other)
    }
}

/// The same instant as a deadline: a standard-library instant through
/// [`at`](ShutdownDeadline::at), a Tokio one as [`from_tokio`](ShutdownDeadline::from_tokio).
impl From<std::time::Instant> for ShutdownDeadline {
    fn from(instant: std::time::Instant) -> Self {
        Self::at(instant)
    }
}

impl From<Instant> for ShutdownDeadline {
    fn from(instant: Instant) -> Self {
        Self::from_tokio(instant)
    }
}

/// A shutdown deadline as the Tokio instant every `*_until` on Tokio's
/// clock takes (`BudgetedQueue::push_until`, `tokio::time::timeout_at`).
impl From<ShutdownDeadline> for Instant {
    fn from(deadline: ShutdownDeadline) -> Self {
        deadline.tokio_instant()
    }
}

/// A shutdown deadline as a standard-library instant
/// (`OperationContext::new`).
impl From<ShutdownDeadline> for std::time::Instant {
    fn from(deadline: ShutdownDeadline) -> Self {
        deadline.instant()
    }
}

/// `base + offset`, or the latest representable horizon when that overflows.
pub(crate) fn saturating_add(base: Instant, offset: Duration) -> Instant {
    if let Some(deadline) = base.checked_add(offset) {
        return deadline;
    }
    // Step down from the far-future horizon until the platform can represent
    // it; in practice the first attempt succeeds.
    let mut horizon = FAR_FUTURE;
    while !horizon.is_zero() {
        if let Some(deadline) = base.checked_add(horizon) {
            return deadline;
        }
        horizon /= 2;
    }
    base
}

/// Serializes a duration as whole milliseconds (saturating at `u64::MAX`).
///
/// Used with `#[serde(rename = "..._ms", serialize_with = ...)]` by the
/// reports and snapshots of this crate.
pub(crate) fn serialize_duration_ms<S: Serializer>(
    duration: &Duration,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let millis = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
    serializer.serialize_u64(millis)
}
