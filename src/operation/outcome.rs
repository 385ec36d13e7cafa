//! Outcomes of operation tasks and of operation waits.

use std::fmt;

use crate::shutdown_deadline::ShutdownDeadline;
use crate::task_identity::TaskKind;

/// How one accepted operation task ended.
///
/// Exactly one outcome is recorded per accepted task, after its future is
/// destroyed. When several apply at once the first in this order wins:
/// owner cancelled, cancelled, deadline exceeded, completed; a panic (while
/// polled or dropped) is `Panicked`; a future destroyed before any of these
/// (an abort, or the runtime shutting down) is `Aborted`.
///
/// A destructor that panics overrides the earlier decision: a future that
/// returned (or was dropped for a cancellation) and then panicked while
/// being destroyed is `Panicked`, so a failed cleanup is never counted as
/// a success.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
#[must_use = "the outcome says how the operation ended"]
pub enum OperationOutcome {
    /// The future returned.
    Completed = 1,
    /// The operation was cancelled; the future was dropped.
    Cancelled = 2,
    /// The operation's deadline passed; the future was dropped.
    DeadlineExceeded = 3,
    /// The owner group was cancelled (never for a draining operation).
    OwnerCancelled = 4,
    /// The future panicked while polled or while dropped.
    Panicked = 5,
    /// The future was destroyed before it ended (abort or runtime teardown).
    Aborted = 6,
}

impl OperationOutcome {
    /// Every outcome, in discriminant order.
    pub const ALL: [OperationOutcome; 6] = [
        Self::Completed,
        Self::Cancelled,
        Self::DeadlineExceeded,
        Self::OwnerCancelled,
        Self::Panicked,
        Self::Aborted,
    ];

    /// The stable snake-case label (`completed`, `cancelled`,
    /// `deadline_exceeded`, `owner_cancelled`, `panicked`, `aborted`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Cancelled => "cancelled",
            Self::DeadlineExceeded => "deadline_exceeded",
            Self::OwnerCancelled => "owner_cancelled",
            Self::Panicked => "panicked",
            Self::Aborted => "aborted",
        }
    }

    /// Index into [`ALL`](Self::ALL).
    pub(crate) const fn index(self) -> usize {
        self as usize - 1
    }
}

impl fmt::Display for OperationOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Receives one callback per accepted operation task, after its future is
/// destroyed and its outcome counted.
///
/// Callbacks run on the thread that settles the task: keep them short,
/// non-blocking and panic-free (no I/O, no exporter flush). A panicking
/// observer is contained and logged; it does not change the outcome.
pub trait OperationOutcomeObserver: fmt::Debug + Send + Sync {
    /// Called once per accepted task with the operation view's task kind.
    fn on_outcome(&self, kind: TaskKind, outcome: OperationOutcome);
}

/// The two absolute deadlines of
/// [`OperationContext::wait_with_policy`](crate::OperationContext::wait_with_policy).
///
/// The grace period ends at the earlier of the two deadlines; aborts are
/// confirmed until `confirmation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OperationWaitPolicy {
    graceful: ShutdownDeadline,
    confirmation: ShutdownDeadline,
}

impl OperationWaitPolicy {
    /// A policy with grace until `min(graceful, confirmation)` and abort
    /// confirmation until `confirmation`.
    pub fn new(graceful: ShutdownDeadline, confirmation: ShutdownDeadline) -> Self {
        Self {
            graceful: graceful.earliest(confirmation),
            confirmation,
        }
    }

    /// The end of the grace period (never after `confirmation`).
    pub fn graceful(&self) -> ShutdownDeadline {
        self.graceful
    }

    /// The end of abort confirmation.
    pub fn confirmation(&self) -> ShutdownDeadline {
        self.confirmation
    }
}

/// The result of [`OperationContext::wait_with_policy`](crate::OperationContext::wait_with_policy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "the outcome says whether the operation ended before the deadline"]
pub enum OperationWaitOutcome {
    /// Every task settled within the grace period.
    Completed,
    /// The grace period ran out; every remaining task was aborted and its
    /// destruction confirmed before the confirmation deadline.
    AbortConfirmed,
    /// Aborts were requested but `remaining_tasks` futures were not yet
    /// destroyed at the confirmation deadline; the owner's shutdown report
    /// accounts for them.
    Unconfirmed {
        /// Tasks of the operation still active at the confirmation deadline.
        remaining_tasks: usize,
    },
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn outcomes_have_stable_discriminants_and_labels() {
        let labels: Vec<_> = OperationOutcome::ALL
            .iter()
            .map(|outcome| (*outcome as u8, outcome.as_str()))
            .collect();
        assert_eq!(
            labels,
            [
                (1, "completed"),
                (2, "cancelled"),
                (3, "deadline_exceeded"),
                (4, "owner_cancelled"),
                (5, "panicked"),
                (6, "aborted"),
            ]
        );
        for (index, outcome) in OperationOutcome::ALL.iter().enumerate() {
            assert_eq!(outcome.index(), index);
        }
    }
}
