//! The operation task wrapper and the submission path: picks the outcome,
//! then settles it.
//!
//! Submission (`spawn_operation`, `spawn_draining_operation`):
//!
//! 1. reject a wrong owner, then an expired deadline (one clock read serves
//!    the expiry check and the record's start time); futures over 16 KiB are
//!    boxed first (`crate::inline`);
//! 2. the gate admits (active + 1) unless closed, and the owner group
//!    registers the task tagged with the operation id (a first submission
//!    does this under the gate's binding lock and binds the owner only after
//!    the registration succeeded). A refusal by the group rolls the admission
//!    back, waking idle waiters if it was the last;
//! 3. if the admission found the owner not held (`HELD` clear: the operation
//!    was idle), the submitter records the owner (a weak reference) and holds
//!    it, before the task can run;
//! 4. only then, outside the binding lock, the task is launched (handed to
//!    Tokio): a runtime shutting down drops the future inline, and its
//!    destructor or the outcome observer may call back into the operation;
//! 5. if the gate is marked `ABORTING` (a `wait_with_policy` hard stop began),
//!    the submitter aborts its own task: the stop's walk or this check sees
//!    every task.
//!
//! Invariants:
//!
//! 1. [`OperationRun`] wraps the user future inside the owner group's
//!    tracked-task wrapper. On every poll it checks, in priority order, owner
//!    cancellation (not for draining operations), operation cancellation and
//!    the deadline, and only then polls the work. A cancellation or deadline
//!    that is already due wins without the work being polled again.
//! 2. The wake-ups (owner token, operation notification, deadline timer) are
//!    armed, boxed, only once the work returns `Pending`: a task that
//!    completes on its first poll registers nothing. A condition found due
//!    while arming wins.
//! 3. The deadline timer only wakes the task (it may fire up to a driver tick
//!    late): each poll reads the clock, so a deadline that passed before a
//!    poll outranks the work completing in it (the order on
//!    `OperationOutcome`).
//! 4. The task reads its owner group and its operation through its settlement
//!    ticket instead of holding clones; the ticket holds only the operation,
//!    and the owner is reached through the operation's weak reference, which
//!    the operation's hold keeps valid while the task is counted. The
//!    submitting thread thus makes one reference-count update per task.
//! 5. [`OperationSettlement`] runs after the future is destroyed: the owner
//!    accounts the task (`completed`; `cancelled` for the three stop
//!    conditions; `panicked`; `aborted`) and removes its record, then the
//!    operation counts the outcome, calls the observer, and releases its
//!    admission (waking idle waiters at zero, and giving the owner back when
//!    that release made it idle: dropped last, as it may be the group's last
//!    reference).
//! 6. An operation task's Tokio cell is 256 bytes even for a trivial future:
//!    the wrapper is over 24 bytes and Tokio's task stage is `repr(C)`
//!    (discriminant plus the larger of future and output), so it takes the
//!    next 128-byte size class. Packing the ticket and dropping the
//!    `draining` flag would still leave it over 24 bytes.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tokio::sync::futures::OwnedNotified;
use tokio::time::{Instant, Sleep};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use crate::error::{RuntimeError, RuntimeOperation, RuntimeResult};
use crate::inline::with_inline_limit;
use crate::loom::Arc;
use crate::operation::gate::{Refused, Submission};
use crate::operation::{OperationContext, OperationOutcome, OperationShared};
use crate::task_group::{Ending, GroupInner, Settle, TaskGroup, Ticket, TrackedFuture};
use crate::task_identity::{TaskEnd, TaskId, TaskKind, TaskName};

pin_project! {
    /// The user future of one operation task. The owner group and the
    /// operation are read through the task's [`OperationSettlement`], not
    /// cloned into the task; the wake-ups of the three stop conditions are
    /// boxed on the first `Pending`, so a task that completes on its first
    /// poll stays small and registers nothing.
    pub(crate) struct OperationRun<F> {
        draining: bool,
        wakeups: Option<Pin<Box<WakeUps>>>,
        #[pin]
        future: F,
    }
}

impl<F> OperationRun<F> {
    fn new(draining: bool, future: F) -> Self {
        Self {
            draining,
            wakeups: None,
            future,
        }
    }
}

pin_project! {
    /// The armed wake-ups of a task whose work returned `Pending`.
    #[derive(Default)]
    struct WakeUps {
        #[pin]
        owner: Option<WaitForCancellationFutureOwned>,
        #[pin]
        cancelled: Option<OwnedNotified>,
        #[pin]
        expiry: Option<Sleep>,
    }
}

impl WakeUps {
    /// The stop condition that is due, in priority order, polling the armed
    /// wake-ups (a consumed operation notification is disarmed).
    fn due(
        mut self: Pin<&mut Self>,
        draining: bool,
        operation: &OperationShared,
        cx: &mut Context<'_>,
    ) -> Option<OperationOutcome> {
        let mut this = self.as_mut().project();
        if !draining {
            if let Some(owner) = this.owner.as_mut().as_pin_mut() {
                if owner.poll(cx).is_ready() {
                    return Some(OperationOutcome::OwnerCancelled);
                }
            }
        }
        if let Some(notified) = this.cancelled.as_mut().as_pin_mut() {
            if notified.poll(cx).is_ready() {
                this.cancelled.set(None);
            }
        }
        if operation.gate.is_cancelled() {
            return Some(OperationOutcome::Cancelled);
        }
        if let Some(expiry) = this.expiry.as_mut().as_pin_mut() {
            // The timer only wakes the task (it fires up to a driver tick
            // late); the clock decides, so a deadline that passed before
            // this poll wins over the work completing in it (invariant 3).
            if expiry.poll(cx).is_ready() || operation.is_expired() {
                return Some(OperationOutcome::DeadlineExceeded);
            }
        }
        None
    }

    /// Arms the wake-ups not armed yet, in priority order; a stop condition
    /// that became due meanwhile is returned. `owner` is the owner group if
    /// this poll already reached it.
    fn arm(
        self: Pin<&mut Self>,
        draining: bool,
        owner: Option<&GroupInner>,
        operation: &OperationShared,
        cx: &mut Context<'_>,
    ) -> Option<OperationOutcome> {
        let mut this = self.project();
        if !draining && this.owner.is_none() {
            let token = match owner {
                Some(group) => Some(group.token().clone()),
                None => operation.owner_group().map(|group| group.token().clone()),
            };
            this.owner
                .set(token.map(CancellationToken::cancelled_owned));
            if let Some(cancelled) = this.owner.as_mut().as_pin_mut() {
                if cancelled.poll(cx).is_ready() {
                    return Some(OperationOutcome::OwnerCancelled);
                }
            }
        }
        if this.cancelled.is_none() {
            this.cancelled
                .set(Some(Arc::clone(&operation.notify).notified_owned()));
            if let Some(notified) = this.cancelled.as_mut().as_pin_mut() {
                // Registers the waker; `cancel` sets the flag before it
                // notifies, so the check below cannot miss it.
                if notified.poll(cx).is_ready() {
                    this.cancelled.set(None);
                    cx.waker().wake_by_ref();
                }
            }
            if operation.gate.is_cancelled() {
                // The owner's wake-up may have been armed on an earlier
                // poll: its cancellation still outranks the operation's.
                if !draining && operation.is_owner_cancelled() {
                    return Some(OperationOutcome::OwnerCancelled);
                }
                return Some(OperationOutcome::Cancelled);
            }
        }
        if this.expiry.is_none() {
            if let Some(deadline) = operation.deadline() {
                this.expiry.set(Some(tokio::time::sleep_until(deadline)));
                if let Some(expiry) = this.expiry.as_mut().as_pin_mut() {
                    if expiry.poll(cx).is_ready() {
                        return Some(OperationOutcome::DeadlineExceeded);
                    }
                }
            }
        }
        None
    }
}

/// The stop condition due before any wake-up is armed (first poll), with
/// the owner group (`None` for a draining task, which has no owner branch).
fn due_now(owner: Option<&GroupInner>, operation: &OperationShared) -> Option<OperationOutcome> {
    if owner.is_some_and(|group| group.token().is_cancelled()) {
        Some(OperationOutcome::OwnerCancelled)
    } else if operation.gate.is_cancelled() {
        Some(OperationOutcome::Cancelled)
    } else if operation.is_expired() {
        Some(OperationOutcome::DeadlineExceeded)
    } else {
        None
    }
}

impl<F: Future<Output = ()>> TrackedFuture<OperationSettlement> for OperationRun<F> {
    fn poll_tracked(
        self: Pin<&mut Self>,
        settlement: &OperationSettlement,
        cx: &mut Context<'_>,
    ) -> Poll<OperationOutcome> {
        let this = self.project();
        let operation = &*settlement.operation;
        let draining = *this.draining;
        // Priority: owner cancellation (not when draining), operation
        // cancellation, the deadline, then the work.
        // The first poll reaches the owner once, for its check and for
        // arming the owner's wake-up.
        let first_owner = match this.wakeups {
            None if !draining => operation.owner_group(),
            _ => None,
        };
        let due = match this.wakeups.as_mut() {
            Some(wakeups) => wakeups.as_mut().due(draining, operation, cx),
            None => due_now(first_owner.as_deref(), operation),
        };
        if let Some(outcome) = due {
            return Poll::Ready(outcome);
        }
        if this.future.poll(cx).is_ready() {
            return Poll::Ready(OperationOutcome::Completed);
        }
        let wakeups = this
            .wakeups
            .get_or_insert_with(|| Box::pin(WakeUps::default()));
        match wakeups
            .as_mut()
            .arm(draining, first_owner.as_deref(), operation, cx)
        {
            Some(outcome) => Poll::Ready(outcome),
            None => Poll::Pending,
        }
    }
}

/// Settles an operation task: the owner accounts it, then the operation
/// publishes the outcome and releases the admission. The owner is reached
/// through the operation, which holds it while the task is accepted (see
/// `OperationShared::hold`), so the ticket holds one reference.
#[derive(Debug)]
pub(crate) struct OperationSettlement {
    operation: Arc<OperationShared>,
    ticket: Ticket,
    kind: TaskKind,
}

impl Settle for OperationSettlement {
    type Output = OperationOutcome;

    fn finish(self, ending: Ending<OperationOutcome>) {
        let outcome = ending.resolve(OperationOutcome::Panicked, OperationOutcome::Aborted);
        match self.operation.owner_group() {
            Some(group) => group.settle(self.ticket.slot, self.ticket.check, task_result(outcome)),
            None => debug_assert!(false, "an accepted operation task has an owner"),
        }
        self.operation.publish(self.kind, outcome);
    }
}

/// How the owner group counts an operation outcome.
fn task_result(outcome: OperationOutcome) -> TaskEnd {
    match outcome {
        OperationOutcome::Completed => TaskEnd::Completed,
        OperationOutcome::Cancelled
        | OperationOutcome::DeadlineExceeded
        | OperationOutcome::OwnerCancelled => TaskEnd::Cancelled,
        OperationOutcome::Panicked => TaskEnd::Panicked,
        OperationOutcome::Aborted => TaskEnd::Aborted,
    }
}

impl TaskGroup {
    /// Spawns a task of `operation` into this group (its owner).
    ///
    /// The task is tagged with the operation in this group's table and
    /// observes, in priority order, this group's cancellation (outcome
    /// `OwnerCancelled`), the operation's cancellation (`Cancelled`) and its
    /// deadline (`DeadlineExceeded`): whichever comes first drops the future.
    /// The first accepted submission binds the operation to this group.
    /// See [`OperationContext`](crate::OperationContext).
    ///
    /// # Errors
    ///
    /// * kind `Closed`, operation `SpawnOperation`: the operation's
    ///   admission is closed, it is cancelled, or its deadline has passed;
    /// * `internal_failure(OperationOwner)`: the operation is bound to
    ///   another group;
    /// * kind `CapacityExhausted`, operation `SpawnOperation`: the operation
    ///   already has 2^32 - 1 active tasks;
    /// * as [`spawn`](Self::spawn) when this group refuses the task (the
    ///   operation's admission is rolled back).
    ///
    /// A refused submission changes no operation counter.
    #[track_caller]
    pub fn spawn_operation<F>(
        &self,
        operation: &OperationContext,
        name: impl Into<TaskName>,
        future: F,
    ) -> RuntimeResult<TaskId>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        spawn_in_operation(self, operation, name.into(), false, future)
    }

    /// Spawns a task of `operation` that keeps running after this group is
    /// cancelled.
    ///
    /// Like [`spawn_operation`](Self::spawn_operation) without the owner
    /// cancellation branch: the task ends when it completes, when the
    /// operation is cancelled or expires, when a wait aborts it, or when
    /// this group's shutdown deadline aborts it.
    ///
    /// # Errors
    ///
    /// As [`spawn_operation`](Self::spawn_operation).
    #[track_caller]
    pub fn spawn_draining_operation<F>(
        &self,
        operation: &OperationContext,
        name: impl Into<TaskName>,
        future: F,
    ) -> RuntimeResult<TaskId>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        spawn_in_operation(self, operation, name.into(), true, future)
    }
}

/// Submits one operation task into `group` (the body of
/// [`TaskGroup::spawn_operation`] and [`TaskGroup::spawn_draining_operation`]);
/// futures over 16 KiB are boxed first.
#[track_caller]
pub(crate) fn spawn_in_operation<F>(
    group: &TaskGroup,
    operation: &OperationContext,
    name: TaskName,
    draining: bool,
    future: F,
) -> RuntimeResult<TaskId>
where
    F: Future<Output = ()> + Send + 'static,
{
    with_inline_limit!(future, |f| submit(group, operation, name, draining, f))
}

#[track_caller]
fn submit<F>(
    group: &TaskGroup,
    operation: &OperationContext,
    name: TaskName,
    draining: bool,
    future: F,
) -> RuntimeResult<TaskId>
where
    F: Future<Output = ()> + Send + 'static,
{
    let shared = operation.shared();
    // The owner check comes first (a wrong owner is reported as such even
    // for an expired operation); `submit` repeats it atomically.
    if shared
        .gate
        .owner()
        .is_some_and(|bound| bound != group.id().as_u64())
    {
        return Err(RuntimeError::internal_failure(
            RuntimeOperation::OperationOwner,
        ));
    }
    // One clock read serves the expiry check and the record's start time.
    let now = Instant::now();
    if shared.deadline().is_some_and(|deadline| deadline <= now) {
        return Err(RuntimeError::closed(RuntimeOperation::SpawnOperation));
    }
    let kind = operation.task_kind();
    // Admission and registration only: the first submission holds the
    // gate's binding lock through them, and Tokio may drop the future
    // inline (a runtime shutting down), running user destructors and
    // observers that may call back into this operation. The task is
    // launched after the lock is released.
    //
    // The task's reference to the operation is taken right before the
    // admission: both write the operation's first cache line, which the
    // settlements of earlier tasks keep taking to their workers, so the
    // submitting thread fetches it once (a refused submission drops it).
    let reference = Arc::clone(shared);
    let submitted = shared.submit(group.id().as_u64(), || {
        group.register_task(name, kind, Some(now), Some(shared.id()))
    });
    match submitted {
        Ok(accepted) => {
            let registration = accepted.registered;
            // Before the task can run: its settlement reaches the owner
            // through the operation, which holds the owner while it has
            // accepted tasks.
            if !accepted.owner_held {
                shared.hold_owner(group.inner());
            }
            let run = OperationRun::new(draining, future);
            let id = group.launch(registration, run, |_, ticket| OperationSettlement {
                operation: reference,
                ticket,
                kind,
            });
            // Admitted before `wait_with_policy` closed admission, but
            // registered after its abort walk may have passed: abort it
            // here (the walk or this check sees the task, never neither).
            if shared.gate.is_aborting() {
                group.abort_task(id);
            }
            Ok(id)
        }
        Err(Submission::Refused(Refused::Closed)) => {
            Err(RuntimeError::closed(RuntimeOperation::SpawnOperation))
        }
        Err(Submission::Refused(Refused::Full)) => {
            Err(RuntimeError::capacity(RuntimeOperation::SpawnOperation))
        }
        Err(Submission::Refused(Refused::WrongOwner)) => Err(RuntimeError::internal_failure(
            RuntimeOperation::OperationOwner,
        )),
        Err(Submission::Failed { error, notify }) => {
            if notify {
                shared.notify.notify_waiters();
            }
            Err(error)
        }
    }
}
