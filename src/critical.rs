//! Critical tasks and their failure record.
//!
//! A critical task's panic (while polled or while its future is dropped) —
//! and, for a critical *service*, a return before its owner was cancelled —
//! is recorded in a [`CriticalFailureState`].
//!
//! Invariants:
//!
//! 1. The first unhandled failure stays pending until exactly one
//!    [`CriticalFailureState::handle`] takes it.
//! 2. Later failures are counted but never replace the pending one.
//! 3. Subscribers whose channel is full lose only the notification, never the
//!    record.

use std::fmt;
use std::future::Future;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::SystemTime;

use pin_project_lite::pin_project;
use tokio::sync::{mpsc, Notify};
use tokio_util::sync::CancellationToken;

use crate::error::{RuntimeContractPolicy, RuntimeContractViolation, RuntimeResult};
use crate::inline::with_inline_limit;
use crate::loom::Mutex;
use crate::task_group::{Settle, TaskGroup, TrackedFuture};
use crate::task_identity::{TaskEnd, TaskId, TaskKind, TaskName};

/// What went wrong with a critical task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CriticalFailureKind {
    /// It panicked (while polled or dropped).
    Panicked,
    /// A critical service returned before its owner was cancelled.
    ExitedUnexpectedly,
    /// Recorded by the application.
    Unrecoverable,
}

impl CriticalFailureKind {
    /// The kebab-case label.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Panicked => "panicked",
            Self::ExitedUnexpectedly => "exited-unexpectedly",
            Self::Unrecoverable => "unrecoverable",
        }
    }
}

/// One recorded failure (no names: safe to log and export).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CriticalFailure {
    kind: CriticalFailureKind,
    task_kind: TaskKind,
    sequence: u64,
    observed_at: SystemTime,
}

impl CriticalFailure {
    /// What went wrong.
    pub const fn kind(&self) -> CriticalFailureKind {
        self.kind
    }

    /// The failed task's kind.
    pub const fn task_kind(&self) -> TaskKind {
        self.task_kind
    }

    /// 1 for the first failure of this state, then 2, 3, ...
    pub const fn sequence(&self) -> u64 {
        self.sequence
    }

    /// When it was recorded.
    pub const fn observed_at(&self) -> SystemTime {
        self.observed_at
    }
}

#[derive(Debug, Default)]
struct Record {
    pending: Option<CriticalFailure>,
    occurrences: u64,
    subscribers: Vec<mpsc::Sender<CriticalFailure>>,
}

#[derive(Debug, Default)]
struct StateInner {
    record: Mutex<Record>,
    recorded: Notify,
}

/// The failure record shared by critical tasks and their monitors; clones
/// share it.
#[derive(Debug, Clone, Default)]
pub struct CriticalFailureState {
    inner: Arc<StateInner>,
}

/// Notifications of recorded failures (a full channel drops notifications,
/// never the pending record).
#[derive(Debug)]
pub struct CriticalFailureSubscription {
    receiver: mpsc::Receiver<CriticalFailure>,
}

impl CriticalFailureSubscription {
    /// The next notification; `None` once the state is gone.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn recv(&mut self) -> Option<CriticalFailure> {
        self.receiver.recv().await
    }

    /// A notification if one is waiting.
    pub fn try_recv(&mut self) -> Option<CriticalFailure> {
        self.receiver.try_recv().ok()
    }
}

impl CriticalFailureState {
    /// An empty record.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a failure; the first unhandled one stays pending.
    pub fn record(&self, kind: CriticalFailureKind, task_kind: TaskKind) -> CriticalFailure {
        let mut record = self.inner.record.lock();
        record.occurrences += 1;
        let failure = CriticalFailure {
            kind,
            task_kind,
            sequence: record.occurrences,
            observed_at: SystemTime::now(),
        };
        if record.pending.is_none() {
            record.pending = Some(failure);
        }
        record.subscribers.retain(|subscriber| {
            !matches!(
                subscriber.try_send(failure),
                Err(mpsc::error::TrySendError::Closed(_))
            )
        });
        drop(record);
        tracing::error!(
            kind = kind.as_str(),
            task_kind = task_kind.as_str(),
            sequence = failure.sequence,
            "critical task failure"
        );
        self.inner.recorded.notify_waiters();
        failure
    }

    /// The pending failure, without taking it.
    pub fn pending(&self) -> Option<CriticalFailure> {
        self.inner.record.lock().pending
    }

    /// Takes the pending failure (exactly one caller gets it).
    pub fn handle(&self) -> Option<CriticalFailure> {
        self.inner.record.lock().pending.take()
    }

    /// Failures recorded so far.
    pub fn occurrences(&self) -> u64 {
        self.inner.record.lock().occurrences
    }

    /// Waits until a failure is pending and returns it (without taking it).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: nothing is taken.
    pub async fn wait(&self) -> CriticalFailure {
        crate::wait::notified(&self.inner.recorded, || self.pending()).await
    }

    /// Notifications of later failures through a channel of `capacity`.
    ///
    /// # Errors
    ///
    /// `capacity == 0`: `CriticalFailureSubscriptionCapacityPositive`.
    pub fn subscribe(
        &self,
        capacity: usize,
    ) -> Result<CriticalFailureSubscription, RuntimeContractViolation> {
        if capacity == 0 {
            return Err(RuntimeContractViolation::configuration(
                RuntimeContractPolicy::CriticalFailureSubscriptionCapacityPositive,
            ));
        }
        let (sender, receiver) = mpsc::channel(capacity);
        self.inner.record.lock().subscribers.push(sender);
        Ok(CriticalFailureSubscription { receiver })
    }
}

pin_project! {
    /// A critical task: records a panic (poll or drop) and, for a service,
    /// a return before the owner was cancelled.
    struct Critical<F> {
        #[pin]
        future: Option<F>,
        state: CriticalFailureState,
        task_kind: TaskKind,
        // Set for a critical service: its owner's token.
        owner: Option<CancellationToken>,
    }

    impl<F> PinnedDrop for Critical<F> {
        fn drop(this: Pin<&mut Self>) {
            let mut this = this.project();
            if this.future.is_some() {
                let destroyed = catch_unwind(AssertUnwindSafe(|| this.future.set(None)));
                if let Err(payload) = destroyed {
                    this.state.record(CriticalFailureKind::Panicked, *this.task_kind);
                    resume_unwind(payload);
                }
            }
        }
    }
}

/// A critical task settles as `Failed` when it is a service that returned
/// before its group was cancelled (counted in the report's `failed`), and
/// as `Completed` otherwise (a return after the cancellation then counts
/// as `Cancelled`, like any task's).
impl<F, S> TrackedFuture<S> for Critical<F>
where
    F: Future<Output = ()>,
    S: Settle<Output = TaskEnd>,
{
    fn poll_tracked(self: Pin<&mut Self>, _: &S, cx: &mut Context<'_>) -> Poll<TaskEnd> {
        let mut this = self.project();
        let Some(future) = this.future.as_mut().as_pin_mut() else {
            return Poll::Ready(TaskEnd::Completed);
        };
        match catch_unwind(AssertUnwindSafe(|| future.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(())) => {
                let destroyed = catch_unwind(AssertUnwindSafe(|| this.future.set(None)));
                if let Err(payload) = destroyed {
                    this.state
                        .record(CriticalFailureKind::Panicked, *this.task_kind);
                    resume_unwind(payload);
                }
                if this
                    .owner
                    .as_ref()
                    .is_some_and(|owner| !owner.is_cancelled())
                {
                    this.state
                        .record(CriticalFailureKind::ExitedUnexpectedly, *this.task_kind);
                    return Poll::Ready(TaskEnd::Failed);
                }
                Poll::Ready(TaskEnd::Completed)
            }
            Err(payload) => {
                let _ = catch_unwind(AssertUnwindSafe(|| this.future.set(None)));
                this.state
                    .record(CriticalFailureKind::Panicked, *this.task_kind);
                resume_unwind(payload)
            }
        }
    }
}

impl TaskGroup {
    /// Spawns a task whose panic (while polled or dropped) is recorded in
    /// `state`; a normal return is not a failure.
    ///
    /// `state` is taken by value: it is a cheap handle, so pass a clone
    /// (`failures.clone()`) to keep one for the monitor.
    ///
    /// # Errors
    ///
    /// As [`spawn`](Self::spawn).
    #[track_caller]
    pub fn spawn_critical<F>(
        &self,
        name: impl Into<TaskName>,
        kind: TaskKind,
        state: CriticalFailureState,
        future: F,
    ) -> RuntimeResult<TaskId>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        with_inline_limit!(future, |f| self.spawn_tracked(
            name.into(),
            kind,
            Critical {
                future: Some(f),
                state,
                task_kind: kind,
                owner: None,
            },
        ))
    }

    /// Spawns a service whose panic, or return before this group is
    /// cancelled, is recorded in `state`; a return after cancellation
    /// records nothing. A return before the cancellation is also counted
    /// in the group's shutdown report as `failed` (the report is then
    /// unhealthy), a panic as `panicked`. `state` is taken by value, like
    /// [`spawn_critical`](Self::spawn_critical).
    ///
    /// # Errors
    ///
    /// As [`spawn`](Self::spawn).
    #[track_caller]
    pub fn spawn_critical_service<F>(
        &self,
        name: impl Into<TaskName>,
        state: CriticalFailureState,
        future: F,
    ) -> RuntimeResult<TaskId>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let owner = Some(self.cancellation_token());
        with_inline_limit!(future, |f| self.spawn_tracked(
            name.into(),
            TaskKind::Service,
            Critical {
                future: Some(f),
                state,
                task_kind: TaskKind::Service,
                owner,
            },
        ))
    }
}

impl fmt::Display for CriticalFailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
