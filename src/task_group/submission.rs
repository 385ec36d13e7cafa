//! Spawn paths: register under the gate, hand to Tokio, install the handle.
//!
//! Invariants:
//!
//! 1. Every submission runs the same three steps: register under the gate
//!    (`register_task`: the phase and poison checks, the record, its
//!    sequence), release the gate, hand the wrapped future to Tokio through
//!    the owner's runtime handle (so spawning works from outside the runtime
//!    too), then install the task's join handle in its record (an abort
//!    handle for `spawn_with_handle`, whose caller keeps the join handle). An
//!    abort requested between registration and installation is recorded and
//!    honoured at installation. Nothing may fail between the registration and
//!    the launch.
//! 2. The launch holds no lock: on a runtime that is shutting down Tokio
//!    drops the future inside `spawn`, on the caller's thread, and its
//!    destructor, its settlement or an operation observer may take the same
//!    locks or spawn into the same group.
//! 3. The record keeps the task's own join handle rather than a per-task
//!    cancellation token, so aborting never needs the future's cooperation;
//!    keeping the join handle (instead of cloning an abort handle and dropping
//!    the join handle at spawn) saves two atomic read-modify-writes on the
//!    task's cell per spawn. Because the handle is held, Tokio keeps a
//!    panicked task's payload in its cell until the record's handle is
//!    dropped (see `registry.rs` for when).
//! 4. A plain spawn reads no clock: its start time is stamped by the task's
//!    first `Pending` (see `completion.rs`); an operation task's is its
//!    submission time, since its submission reads the clock anyway.
//! 5. Futures over the 16 KiB inline limit are boxed before they are wrapped
//!    (`crate::inline`).
//! 6. Spawn and child-creation paths are `#[track_caller]` down to Tokio's
//!    `spawn`, so a `Closed` or `Poisoned` error's `location()` is the
//!    caller's line, and so is the spawn location Tokio records for
//!    tokio-console.
//! 7. Each task gets a `tracing` span (`rocketmq_runtime::task`, `DEBUG`,
//!    named `task`) with its name, kind, group path and caller location,
//!    entered on every poll. With no subscriber enabling it, the span is
//!    disabled: its fields are never built and the task is spawned
//!    unwrapped, so the spawn path pays one interest check.

use std::future::Future;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::error::{RuntimeOperation, RuntimeResult};
use crate::inline::with_inline_limit;
use crate::loom::Arc;
use crate::shutdown_deadline::ShutdownDeadline;
use crate::task_group::completion::{
    Plain, Settle, Settlement, Ticket, Tracked, TrackedFuture, UntilCancelled,
};
use crate::task_group::registry::{seq_check, OperationTag, TaskHandle};
use crate::task_group::{GroupInner, TaskGroup};
use crate::task_identity::{TaskId, TaskKind, TaskName};
use crate::wait::{notified_until, Watch};

/// A task registered under the gate but not yet handed to Tokio (see
/// [`TaskGroup::register_task`]).
#[derive(Debug)]
#[must_use = "a registered task must be launched"]
pub(crate) struct Registration {
    seq: u64,
    slot: u32,
    /// The task's span (invariant 7): disabled, and free, unless a
    /// subscriber listens at `DEBUG` for `rocketmq_runtime::task`.
    span: tracing::Span,
    /// The name Tokio's task builder gives the task (tokio-console).
    #[cfg(all(tokio_unstable, feature = "tokio-console"))]
    name: TaskName,
}

impl TaskGroup {
    /// Registers `future` (a wrapper that ends in a `TaskEnd`) and spawns
    /// it; the group keeps the join handle.
    #[track_caller]
    pub(crate) fn spawn_tracked<F>(
        &self,
        name: TaskName,
        kind: TaskKind,
        future: F,
    ) -> RuntimeResult<TaskId>
    where
        F: TrackedFuture<Settlement> + Send + 'static,
    {
        let registration = self.register_task(name, kind, None, None)?;
        Ok(self.launch(registration, future, Settlement::new))
    }

    /// [`spawn_tracked`](Self::spawn_tracked), returning the join handle to
    /// the caller (the group keeps an abort handle).
    #[track_caller]
    pub(crate) fn spawn_tracked_with_handle<F>(
        &self,
        name: TaskName,
        kind: TaskKind,
        future: F,
    ) -> RuntimeResult<(TaskId, JoinHandle<()>)>
    where
        F: TrackedFuture<Settlement> + Send + 'static,
    {
        let registration = self.register_task(name, kind, None, None)?;
        Ok(
            self.launch_as(registration, future, Settlement::new, |join| {
                (TaskHandle::Abort(join.abort_handle()), join)
            }),
        )
    }

    /// Step 1 of a submission: registers the task (tagged with its
    /// operation, if any) under the gate. The caller must
    /// [`launch`](Self::launch) the registration at once (a registered task
    /// that is never launched stays listed until the group's shutdown
    /// deadline); nothing may fail in between.
    #[track_caller]
    pub(crate) fn register_task(
        &self,
        name: TaskName,
        kind: TaskKind,
        started: Option<Instant>,
        operation: Option<OperationTag>,
    ) -> RuntimeResult<Registration> {
        let location = std::panic::Location::caller();
        // Fields are evaluated only when a subscriber enables the span.
        let span = tracing::debug_span!(
            target: "rocketmq_runtime::task",
            "task",
            task.name = %name,
            task.kind = ?kind,
            task.group = %self.inner.path(),
            task.location = %location,
        );
        #[cfg(all(tokio_unstable, feature = "tokio-console"))]
        let console_name = name.clone();
        match self.inner.gate.register(name, kind, started, operation) {
            Ok((seq, slot)) => Ok(Registration {
                seq,
                slot,
                span,
                #[cfg(all(tokio_unstable, feature = "tokio-console"))]
                name: console_name,
            }),
            Err(refusal) => Err(self.refusal_error(refusal, RuntimeOperation::SpawnTaskGroupTask)),
        }
    }

    /// Step 2: hands a registered task to Tokio wrapped in [`Tracked`] with
    /// the settlement ticket `settle` builds (from the group and the task's
    /// [`Ticket`]), then installs its join handle in the
    /// task's record (an abort requested in between is honoured there). On
    /// a runtime that is shutting down Tokio drops the future here, in the
    /// caller's thread: call this without holding locks the future's
    /// destructor or its settlement may take.
    #[track_caller]
    pub(crate) fn launch<F, S>(
        &self,
        registration: Registration,
        future: F,
        settle: impl FnOnce(&Arc<GroupInner>, Ticket) -> S,
    ) -> TaskId
    where
        F: TrackedFuture<S> + Send + 'static,
        S: Settle + Send + 'static,
    {
        self.launch_as(registration, future, settle, |join| {
            (TaskHandle::Join(join), ())
        })
        .0
    }

    /// [`launch`](Self::launch), with `handoff` choosing what the record
    /// keeps of the join handle and what the caller gets.
    #[track_caller]
    fn launch_as<F, S, R>(
        &self,
        registration: Registration,
        future: F,
        settle: impl FnOnce(&Arc<GroupInner>, Ticket) -> S,
        handoff: impl FnOnce(JoinHandle<()>) -> (TaskHandle, R),
    ) -> (TaskId, R)
    where
        F: TrackedFuture<S> + Send + 'static,
        S: Settle + Send + 'static,
    {
        let inner = &self.inner;
        #[cfg(all(tokio_unstable, feature = "tokio-console"))]
        let Registration {
            seq,
            slot,
            span,
            name,
        } = registration;
        #[cfg(not(all(tokio_unstable, feature = "tokio-console")))]
        let Registration { seq, slot, span } = registration;
        let settlement = settle(
            inner,
            Ticket {
                slot,
                check: seq_check(seq),
            },
        );
        let tracked = Tracked::new(future, settlement);
        // Tokio records this caller's location (the chain up to the public
        // spawn is `#[track_caller]`); the span, when enabled, wraps every
        // poll.
        #[cfg(all(tokio_unstable, feature = "tokio-console"))]
        let join = if span.is_disabled() {
            spawn_named(inner.tree.handle(), &name, tracked)
        } else {
            spawn_named(
                inner.tree.handle(),
                &name,
                tracing::Instrument::instrument(tracked, span),
            )
        };
        #[cfg(not(all(tokio_unstable, feature = "tokio-console")))]
        let join = if span.is_disabled() {
            inner.tree.handle().spawn(tracked)
        } else {
            spawn_in_span(inner.tree.handle(), tracked, span)
        };
        let (kept, given) = handoff(join);
        inner.gate.install(slot, seq, kept);
        (TaskId::new(inner.id, seq, slot), given)
    }

    /// Spawns a tracked task.
    ///
    /// The task is registered before this returns (`contains_task` is true
    /// even before it first runs) and stays registered until its future is
    /// destroyed. A `&'static str` name is stored without allocating.
    ///
    /// # Errors
    ///
    /// Kind `Closed` once shutdown has begun; kind `Poisoned` after a task of
    /// this group panicked while it was open (operation `SpawnTaskGroupTask`).
    #[track_caller]
    pub fn spawn<F>(
        &self,
        name: impl Into<TaskName>,
        kind: TaskKind,
        future: F,
    ) -> RuntimeResult<TaskId>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        with_inline_limit!(future, |f| self.spawn_tracked(
            name.into(),
            kind,
            Plain::new(f)
        ))
    }

    /// Spawns a [`TaskKind::Service`] task.
    ///
    /// The service must observe [`cancellation_token`](Self::cancellation_token)
    /// itself and perform its ordered cleanup before returning.
    ///
    /// # Errors
    ///
    /// As [`spawn`](Self::spawn).
    #[track_caller]
    pub fn spawn_service<F>(&self, name: impl Into<TaskName>, future: F) -> RuntimeResult<TaskId>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.spawn(name, TaskKind::Service, future)
    }

    /// Spawns a service whose future is dropped when the group is cancelled.
    ///
    /// The cancellation branch is polled first, so a service whose group is
    /// already cancelled is dropped without being polled. Such an exit counts
    /// as `cancelled`, not `aborted`. Use only when dropping the future at
    /// any await point is safe.
    ///
    /// # Errors
    ///
    /// As [`spawn`](Self::spawn).
    #[track_caller]
    pub fn spawn_cancellable_service<F>(
        &self,
        name: impl Into<TaskName>,
        future: F,
    ) -> RuntimeResult<TaskId>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let cancelled = self.inner.token.clone().cancelled_owned();
        with_inline_limit!(future, |f| self.spawn_tracked(
            name.into(),
            TaskKind::Service,
            UntilCancelled::new(cancelled, f)
        ))
    }

    /// Spawns a tracked task and returns its Tokio join handle as well.
    ///
    /// The group still tracks, aborts and reports the task; the handle
    /// resolves after settlement. A panic is reported through the handle
    /// (`JoinError::is_panic`), whether it happened in `poll` or in the
    /// future's destructor (after it returned or while an abort dropped
    /// it).
    ///
    /// # Errors
    ///
    /// As [`spawn`](Self::spawn).
    #[track_caller]
    pub fn spawn_with_handle<F>(
        &self,
        name: impl Into<TaskName>,
        kind: TaskKind,
        future: F,
    ) -> RuntimeResult<(TaskId, JoinHandle<()>)>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        with_inline_limit!(future, |f| self.spawn_tracked_with_handle(
            name.into(),
            kind,
            Plain::new(f)
        ))
    }

    /// [`spawn_with_handle`](Self::spawn_with_handle) for a service.
    ///
    /// # Errors
    ///
    /// As [`spawn`](Self::spawn).
    #[track_caller]
    pub fn spawn_service_with_handle<F>(
        &self,
        name: impl Into<TaskName>,
        future: F,
    ) -> RuntimeResult<(TaskId, JoinHandle<()>)>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.spawn_with_handle(name, TaskKind::Service, future)
    }

    /// Requests an abort of every task of an operation (crate: waits).
    pub(crate) fn abort_operation_tasks(&self, operation: OperationTag) -> usize {
        self.inner.gate.abort_matching(false, Some(operation))
    }

    /// Requests an abort of one task of this group.
    ///
    /// Returns true iff the task is still registered here (a foreign or
    /// finished id returns false). An abort requested before the task's
    /// handle is installed is honoured. An explicit abort is counted in
    /// `aborted`, never in a report's `timed_out`.
    pub fn abort_task(&self, id: TaskId) -> bool {
        self.owns_task(id) && self.inner.gate.abort(id.slot(), id.as_u64())
    }

    /// Aborts a task and waits up to `timeout` for its future to be destroyed.
    ///
    /// Returns true once the future is destroyed; false for a foreign or
    /// absent id, or when `timeout` passes first.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the abort is requested synchronously on the first poll;
    /// dropping the future only stops waiting for its confirmation.
    pub async fn abort_task_and_wait(&self, id: TaskId, timeout: Duration) -> bool {
        if !self.abort_task(id) {
            return false;
        }
        self.wait_task_until(id, ShutdownDeadline::after(timeout))
            .await
    }

    /// Waits up to `timeout` for a task of this group to settle.
    ///
    /// Returns true if the task is absent (already settled) or settles in
    /// time; false at once for a foreign id, false when `timeout` passes.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: waiting has no side effects.
    pub async fn wait_task(&self, id: TaskId, timeout: Duration) -> bool {
        self.wait_task_until(id, ShutdownDeadline::after(timeout))
            .await
    }

    pub(crate) async fn wait_task_until(&self, id: TaskId, deadline: ShutdownDeadline) -> bool {
        if !self.owns_task(id) {
            return false;
        }
        let inner = &self.inner;
        let _watch = Watch::new(&inner.settle_watchers);
        notified_until(&inner.settled, deadline, Some(inner.tree.handle()), || {
            !inner.gate.contains(id.slot(), id.as_u64())
        })
        .await
    }
}

/// A task spawned inside its span (invariant 7), out of the common path:
/// only while a subscriber listens.
#[cfg(not(all(tokio_unstable, feature = "tokio-console")))]
#[cold]
#[inline(never)]
#[track_caller]
fn spawn_in_span<F>(handle: &tokio::runtime::Handle, task: F, span: tracing::Span) -> JoinHandle<()>
where
    F: Future<Output = ()> + Send + 'static,
{
    handle.spawn(tracing::Instrument::instrument(task, span))
}

/// A task spawned through Tokio's task builder under its name, so
/// tokio-console lists it by name (the `tokio-console` feature under
/// `--cfg tokio_unstable`). Tokio's builder reports spawn failures as an
/// error; the future it was given is then dropped, and its tracked wrapper
/// settles the task as aborted, so the evidence stays: the stand-in handle
/// only lets the launch finish.
#[cfg(all(tokio_unstable, feature = "tokio-console"))]
#[track_caller]
fn spawn_named<F>(handle: &tokio::runtime::Handle, name: &TaskName, task: F) -> JoinHandle<()>
where
    F: Future<Output = ()> + Send + 'static,
{
    match tokio::task::Builder::new()
        .name(name.as_str())
        .spawn_on(task, handle)
    {
        Ok(join) => join,
        Err(error) => {
            tracing::error!(task = %name, %error, "Tokio refused to spawn a task; it is reported as aborted");
            handle.spawn(async {})
        }
    }
}
