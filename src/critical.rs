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
//! 4. A panic's message (bounded and escaped, as in the shutdown report's
//!    supervised services) is kept with its failure for the last
//!    [`CriticalFailureState::MESSAGES_KEPT`] failures that had one
//!    ([`CriticalFailureState::message`]) and is in the failure's log line.
//! 5. Liveness reads the supervised critical services' progress through
//!    the state ([`CriticalFailureState::stalled_services`]): a service past
//!    its progress deadline is stalled until it records progress again.

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
    /// The messages of the last failures that had one, by sequence.
    messages: std::collections::VecDeque<(u64, String)>,
}

/// A supervised critical service's progress, as liveness reads it.
pub(crate) trait StallWatch: fmt::Debug + Send + Sync {
    /// The service's name when a run is past its progress deadline.
    fn stalled(&self) -> Option<TaskName>;
}

#[derive(Debug, Default)]
struct StateInner {
    record: Mutex<Record>,
    recorded: Notify,
    /// Supervised critical services with a progress deadline.
    stall_watches: Mutex<Vec<std::sync::Weak<dyn StallWatch>>>,
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

    /// Failures whose messages are kept (module invariant 4).
    pub const MESSAGES_KEPT: usize = 16;

    /// Records a failure; the first unhandled one stays pending.
    pub fn record(&self, kind: CriticalFailureKind, task_kind: TaskKind) -> CriticalFailure {
        self.record_with_message(kind, task_kind, None)
    }

    /// Records a failure with its (bounded, escaped) message.
    pub(crate) fn record_with_message(
        &self,
        kind: CriticalFailureKind,
        task_kind: TaskKind,
        message: Option<String>,
    ) -> CriticalFailure {
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
        if let Some(message) = &message {
            if record.messages.len() == Self::MESSAGES_KEPT {
                record.messages.pop_front();
            }
            record
                .messages
                .push_back((failure.sequence, message.clone()));
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
            message = message.as_deref().unwrap_or(""),
            "critical task failure"
        );
        self.inner.recorded.notify_waiters();
        failure
    }

    /// The message recorded with `failure` (a panic's message, bounded and
    /// escaped), while it is among the last [`MESSAGES_KEPT`](Self::MESSAGES_KEPT)
    /// failures that had one.
    pub fn message(&self, failure: &CriticalFailure) -> Option<String> {
        self.inner
            .record
            .lock()
            .messages
            .iter()
            .find(|(sequence, _)| *sequence == failure.sequence)
            .map(|(_, message)| message.clone())
    }

    /// Lets liveness read a supervised critical service's progress.
    pub(crate) fn watch_stalls(&self, watch: std::sync::Weak<dyn StallWatch>) {
        let mut watches = self.inner.stall_watches.lock();
        watches.retain(|watch| watch.strong_count() > 0);
        watches.push(watch);
    }

    /// The supervised critical services of this state whose run is past its
    /// progress deadline right now (module invariant 5).
    pub fn stalled_services(&self) -> Vec<TaskName> {
        self.inner
            .stall_watches
            .lock()
            .iter()
            .filter_map(std::sync::Weak::upgrade)
            .filter_map(|watch| watch.stalled())
            .collect()
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
                    record_panic(this.state, *this.task_kind, payload.as_ref());
                    resume_unwind(payload);
                }
            }
        }
    }
}

/// Records a critical task's panic with its message (cold: a panic).
#[cold]
fn record_panic(
    state: &CriticalFailureState,
    task_kind: TaskKind,
    payload: &(dyn std::any::Any + Send),
) {
    state.record_with_message(
        CriticalFailureKind::Panicked,
        task_kind,
        Some(crate::shutdown_report::panic_message(payload)),
    );
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
                    record_panic(this.state, *this.task_kind, payload.as_ref());
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
                record_panic(this.state, *this.task_kind, payload.as_ref());
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
