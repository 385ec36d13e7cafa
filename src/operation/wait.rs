//! Waiting for an operation: settle, abort at the deadline, confirm.
//!
//! Invariants:
//!
//! 1. Every wait checks the owner first (waiting out a first submission in
//!    progress) and again before aborting: a group other than the bound owner
//!    fails with `internal_failure(OperationOwner)` and changes nothing.
//!    Waits that close or cancel (`wait_with_policy`, `cancel_and_wait*`)
//!    check the owner under the binding lock together with the close
//!    (`close_for`), so no other group binds in between.
//! 2. A wait registers as an idle watcher in the gate's state word before it
//!    reads the count, and succeeds only when the active count is zero, which
//!    (see the settlement order in [`crate::operation`]) means the owner lists
//!    no task of the operation, including tasks accepted while waiting.
//! 3. At the deadline the remaining tasks are aborted through the owner's task
//!    table by their operation tag (`abort_matching`: explicit aborts,
//!    `aborted` in reports, never `timed_out`).
//! 4. `wait_until` never waits past its deadline; `wait(timeout)` confirms the
//!    aborts for at most 1 s more (`ABORT_CONFIRMATION`), counted from the
//!    timeout, not from the abort.
//! 5. `wait*` do not close admission: a task accepted while the abort walks
//!    the table may escape it (the wait still returns `false`). Close
//!    admission first, or use `wait_with_policy`, for a hard stop: it stores
//!    the aborting mark before its walk, so a task admitted before the close
//!    but still registering aborts itself (see `gate.rs`).

use std::time::Duration;

use crate::error::{RuntimeError, RuntimeOperation, RuntimeResult};
use crate::operation::{OperationContext, OperationWaitOutcome, OperationWaitPolicy};
use crate::shutdown_deadline::saturating_add;
use crate::shutdown_deadline::ShutdownDeadline;
use crate::task_group::TaskGroup;
use crate::wait::notified_until;

/// How long `wait(timeout)` and `cancel_and_wait(timeout)` wait after
/// their timeout for aborted futures to be destroyed.
pub(crate) const ABORT_CONFIRMATION: Duration = Duration::from_secs(1);

impl OperationContext {
    /// Waits until no task of this operation is active, for up to `timeout`.
    ///
    /// Returns `Ok(true)` when every task settled in time. Otherwise the
    /// remaining tasks are aborted and the wait continues for up to one more
    /// second to confirm their futures were destroyed; the result is then
    /// `Ok(false)` whether or not they were (use
    /// [`wait_with_policy`](Self::wait_with_policy) to tell the two apart).
    /// An operation that never had a task returns `Ok(true)` at once.
    ///
    /// The wait does not close admission: a task accepted while the abort
    /// runs may escape it. Close admission first (or use
    /// [`wait_with_policy`](Self::wait_with_policy)) for a hard stop.
    ///
    /// # Errors
    ///
    /// `internal_failure(OperationOwner)` if `owner` is not the group the
    /// operation is bound to (checked again before aborting); nothing is
    /// aborted then.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the timeout starts at the first poll; dropping the
    /// future stops waiting. Aborts already requested stay requested.
    pub async fn wait(&self, owner: &TaskGroup, timeout: Duration) -> RuntimeResult<bool> {
        self.check_owner(owner)?;
        let deadline = ShutdownDeadline::after(timeout);
        if self.settle_until(owner, deadline).await == 0 {
            return Ok(true);
        }
        self.abort_tasks(owner)?;
        // Counted from the timeout, not from the abort: a late wake-up does
        // not push the return past `timeout` + 1 s.
        let confirmation = ShutdownDeadline::from_tokio(saturating_add(
            deadline.tokio_instant(),
            ABORT_CONFIRMATION,
        ));
        self.settle_until(owner, confirmation).await;
        Ok(false)
    }

    /// Waits until no task of this operation is active, until `deadline`.
    ///
    /// Returns `Ok(true)` when every task settled in time. At the deadline
    /// the remaining tasks are aborted and `Ok(false)` returns at once: no
    /// allowance beyond the deadline; the owner's shutdown report accounts
    /// for a task still being dropped.
    ///
    /// # Errors
    ///
    /// As [`wait`](Self::wait).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future stops waiting and requests nothing.
    pub async fn wait_until(
        &self,
        owner: &TaskGroup,
        deadline: ShutdownDeadline,
    ) -> RuntimeResult<bool> {
        self.check_owner(owner)?;
        if self.settle_until(owner, deadline).await == 0 {
            return Ok(true);
        }
        self.abort_tasks(owner)?;
        Ok(false)
    }

    /// [`cancel`](Self::cancel), then [`wait`](Self::wait).
    ///
    /// # Errors
    ///
    /// As [`wait`](Self::wait); with a wrong owner nothing is cancelled.
    ///
    /// # Cancel safety
    ///
    /// The cancellation is requested at the first poll and stays requested
    /// if the future is dropped; otherwise as [`wait`](Self::wait).
    pub async fn cancel_and_wait(
        &self,
        owner: &TaskGroup,
        timeout: Duration,
    ) -> RuntimeResult<bool> {
        self.close_for(owner, true)?;
        self.wait(owner, timeout).await
    }

    /// [`cancel`](Self::cancel), then [`wait_until`](Self::wait_until).
    ///
    /// # Errors
    ///
    /// As [`wait`](Self::wait); with a wrong owner nothing is cancelled.
    ///
    /// # Cancel safety
    ///
    /// The cancellation is requested at the first poll and stays requested
    /// if the future is dropped; otherwise as [`wait_until`](Self::wait_until).
    pub async fn cancel_and_wait_until(
        &self,
        owner: &TaskGroup,
        deadline: ShutdownDeadline,
    ) -> RuntimeResult<bool> {
        self.close_for(owner, true)?;
        self.wait_until(owner, deadline).await
    }

    /// Closes admission, waits through the grace period, then aborts and
    /// confirms.
    ///
    /// * [`Completed`](OperationWaitOutcome::Completed): every task settled
    ///   before `policy.graceful()`.
    /// * [`AbortConfirmed`](OperationWaitOutcome::AbortConfirmed): the rest
    ///   were aborted and their futures destroyed before
    ///   `policy.confirmation()`.
    /// * [`Unconfirmed`](OperationWaitOutcome::Unconfirmed): that many were
    ///   still active at the confirmation deadline. With an already expired
    ///   confirmation deadline on a current-thread runtime, an aborted task
    ///   cannot be dropped before this returns.
    ///
    /// The abort misses no task: one admitted before admission closed but
    /// still registering with its owner during the abort aborts itself.
    ///
    /// Call [`cancel`](Self::cancel) first to request cooperative
    /// cancellation; this call does not cancel.
    ///
    /// # Errors
    ///
    /// `internal_failure(OperationOwner)` with a group other than the bound
    /// owner; admission then stays open.
    ///
    /// # Cancel safety
    ///
    /// Admission is closed at the first poll and stays closed if the future
    /// is dropped; aborts already requested stay requested.
    pub async fn wait_with_policy(
        &self,
        owner: &TaskGroup,
        policy: OperationWaitPolicy,
    ) -> RuntimeResult<OperationWaitOutcome> {
        self.close_for(owner, false)?;
        if self.settle_until(owner, policy.graceful()).await == 0 {
            return Ok(OperationWaitOutcome::Completed);
        }
        // Before the walk: a submission still registering aborts itself.
        self.shared().gate.start_aborting();
        self.abort_tasks(owner)?;
        // The count the wait saw once the confirmation deadline had passed:
        // a task destroyed after that is not confirmed.
        Ok(
            match self.settle_until(owner, policy.confirmation()).await {
                0 => OperationWaitOutcome::AbortConfirmed,
                remaining_tasks => OperationWaitOutcome::Unconfirmed { remaining_tasks },
            },
        )
    }

    /// Fails unless `owner` is the bound owner (or nothing is bound yet,
    /// after waiting out a first submission in progress).
    fn check_owner(&self, owner: &TaskGroup) -> RuntimeResult<()> {
        match self.shared().gate.settled_owner() {
            Some(bound) if bound != owner.id().as_u64() => Err(RuntimeError::internal_failure(
                RuntimeOperation::OperationOwner,
            )),
            _ => Ok(()),
        }
    }

    /// Closes admission (`cancel`: cancels) unless `owner` is not the bound
    /// owner, atomically with the binding: a group binding the operation
    /// concurrently either did so first (and this fails, changing nothing)
    /// or is refused afterwards.
    fn close_for(&self, owner: &TaskGroup, cancel: bool) -> RuntimeResult<()> {
        match self.shared().gate.close_for(owner.id().as_u64(), cancel) {
            Ok(cancelled_first) => {
                if cancelled_first {
                    self.announce_cancel();
                }
                Ok(())
            }
            Err(_) => Err(RuntimeError::internal_failure(
                RuntimeOperation::OperationOwner,
            )),
        }
    }

    /// Requests an abort of every task of this operation registered in
    /// `owner`. Fails if another group bound the operation while waiting.
    fn abort_tasks(&self, owner: &TaskGroup) -> RuntimeResult<usize> {
        self.check_owner(owner)?;
        Ok(owner.abort_operation_tasks(self.shared().id()))
    }

    /// Waits until the active count is zero, until `deadline`. Returns the
    /// count of its last check: zero once settled, otherwise the count it
    /// read after `deadline` had passed.
    async fn settle_until(&self, owner: &TaskGroup, deadline: ShutdownDeadline) -> usize {
        let shared = self.shared();
        let _watch = shared.gate.watch();
        let mut last = 0;
        notified_until(
            &shared.notify,
            deadline,
            Some(owner.runtime_handle()),
            || {
                last = shared.gate.active();
                last == 0
            },
        )
        .await;
        last
    }
}
