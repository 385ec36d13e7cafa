//! The phases of one blocking submission (see the [`executor`] module doc
//! for the phases and their invariants), shared by ordinary submissions and
//! a drain lease's.
//!
//! What a drain lease's submission does differently:
//!
//! 1. the scope's closing and cancellation neither refuse it nor wake it
//!    from the queue (an isolated executor's stop still does): its lease
//!    was accepted while the scope was open, and its deadline, already
//!    capped by the lease's, bounds it instead;
//! 2. a full lane queue does not refuse it: it waits for room (a sibling
//!    scope closing frees its waiters' places) until its queue deadline;
//! 3. its share of the lease's allowance is kept only once its closure is
//!    handed to the blocking pool and not refused by the start check: a
//!    submission whose closure never runs gives its share back.
//!
//! Every submission, ordinary or not, claims a slot granted while it waited
//! only if its queue deadline has not passed: a grant that comes after the
//! queue timeout (the waiter was not polled in between) goes back to the
//! next waiter and the closure never runs.
//!
//! [`executor`]: super::executor

use tokio::time::Instant;

use crate::blocking::admission::Admission;
use crate::blocking::job::{Abandoned, BlockingJob, NotStarted, StartCheck};
use crate::blocking::lease::LeaseShare;
use crate::blocking::scope::Admit;
use crate::blocking::BlockingExecutor;
use crate::error::{RuntimeError, RuntimeOperation, RuntimeResult};
use crate::loom::Arc;
use crate::shutdown_deadline::saturating_add;
use crate::shutdown_deadline::ShutdownDeadline;
use crate::shutdown_report::BlockingKind;

/// Results larger than this travel boxed from the blocking thread.
const INLINE_RESULT_LIMIT: usize = 16 * 1024;

impl BlockingExecutor {
    /// Boxes large results so they never travel inline.
    pub(super) async fn submit<R: Send + 'static>(
        &self,
        name: Arc<str>,
        kind: BlockingKind,
        deadline: Option<ShutdownDeadline>,
        work: Box<dyn FnOnce() -> R + Send>,
        mode: Admit,
        share: Option<&mut LeaseShare<'_>>,
    ) -> RuntimeResult<R> {
        let submitted = Instant::now();
        if std::mem::size_of::<R>() > INLINE_RESULT_LIMIT {
            let boxed: Box<dyn FnOnce() -> Box<R> + Send> = Box::new(move || Box::new(work()));
            return self
                .execute(name, kind, deadline, submitted, boxed, mode, share)
                .await
                .map(|result| *result);
        }
        self.execute(name, kind, deadline, submitted, work, mode, share)
            .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn execute<R: Send + 'static>(
        &self,
        name: Arc<str>,
        kind: BlockingKind,
        deadline: Option<ShutdownDeadline>,
        submitted: Instant,
        work: Box<dyn FnOnce() -> R + Send>,
        mode: Admit,
        share: Option<&mut LeaseShare<'_>>,
    ) -> RuntimeResult<R> {
        let inner = &*self.inner;
        let table = &inner.table;
        if kind == BlockingKind::LongRunning {
            table.reject();
            return Err(RuntimeError::unsupported(
                RuntimeOperation::BlockingExecutorKind,
            ));
        }
        if !inner.admits_mode(mode) {
            table.reject();
            return Err(RuntimeError::closed(
                RuntimeOperation::BlockingQueueAdmission,
            ));
        }
        let policy = &inner.policy;
        let operation_deadline = match deadline {
            Some(deadline) => match inner.scope.shutdown_deadline() {
                Some(scope) => deadline.earliest(scope),
                None => deadline,
            },
            None => ShutdownDeadline::from_tokio(saturating_add(
                submitted,
                policy.queue_timeout.saturating_add(policy.task_timeout),
            )),
        };
        if mode == Admit::Finalization && operation_deadline.is_expired() {
            return Err(RuntimeError::timed_out(
                RuntimeOperation::BlockingTaskDeadline,
            ));
        }
        let queue_deadline = operation_deadline.earliest(ShutdownDeadline::from_tokio(
            saturating_add(submitted, policy.queue_timeout),
        ));
        let record = table.insert(name, kind);
        let admission = match mode {
            Admit::Ordinary => table.budget().admit(table.lane_index()),
            Admit::Finalization => self.admit_waiting_for_room(queue_deadline).await?,
        };
        let permit = match admission {
            Admission::Running(permit) => permit,
            Admission::QueueFull => {
                table.reject();
                return Err(RuntimeError::capacity(
                    RuntimeOperation::BlockingQueueAdmission,
                ));
            }
            Admission::Queued(mut queued) => {
                let permit = tokio::select! {
                    biased;
                    () = inner.closed_for(mode) => {
                        table.reject();
                        return Err(RuntimeError::closed(RuntimeOperation::BlockingQueueAdmission));
                    }
                    () = tokio::time::sleep_until(queue_deadline.tokio_instant()) => {
                        return Err(RuntimeError::timed_out(RuntimeOperation::BlockingQueueAdmission));
                    }
                    permit = queued.granted() => permit,
                };
                // A grant that came after the queue deadline (this waiter
                // was not polled in between) is not used: dropping the
                // permit hands the slot to the next waiter.
                if queue_deadline.is_expired() {
                    drop(permit);
                    return Err(RuntimeError::timed_out(
                        RuntimeOperation::BlockingQueueAdmission,
                    ));
                }
                permit
            }
        };
        // A scope that closed (or an executor stopped) while this submission
        // was admitted or queued never runs it: the permit and the record go
        // back here.
        if !inner.admits_mode(mode) {
            table.reject();
            return Err(RuntimeError::closed(
                RuntimeOperation::BlockingQueueAdmission,
            ));
        }
        if operation_deadline.is_expired() {
            // Never started: the permit and the record go back now.
            return Err(RuntimeError::timed_out(
                RuntimeOperation::BlockingTaskDeadline,
            ));
        }
        let started = Instant::now();
        let abandoned = Abandoned {
            table: Arc::clone(table),
            id: record.id(),
            armed: true,
        };
        let job = BlockingJob {
            work: Some(work),
            permit: Some(permit),
            record: Some(record),
            start: Some(StartCheck {
                inner: Arc::clone(&self.inner),
                deadline: operation_deadline,
                mode,
            }),
        };
        let record_id = abandoned.id;
        // From here the closure may run: the lease share is spent unless
        // the start check refuses it below.
        let mut share = share;
        if let Some(share) = share.as_deref_mut() {
            share.commit();
        }
        let mut handle = inner.handle.spawn_blocking(move || job.run());
        let caller_deadline = operation_deadline
            .earliest(ShutdownDeadline::from_tokio(saturating_add(
                started,
                policy.task_timeout,
            )))
            .tokio_instant();
        // A closure still running after `warn_after` is reported once, here
        // while the caller waits (or as it exits, by its record).
        let warn_at = saturating_add(started, policy.warn_after);
        let early = if warn_at < caller_deadline {
            let early = tokio::time::timeout_at(warn_at, &mut handle).await.ok();
            if early.is_none() {
                table.warn_slow(record_id);
            }
            early
        } else {
            None
        };
        let result = match early {
            Some(done) => Ok(done),
            None => tokio::time::timeout_at(caller_deadline, handle).await,
        };
        let mut abandoned = abandoned;
        let never_ran = matches!(&result, Ok(Ok(Err(_))))
            || matches!(&result, Ok(Err(join)) if join.is_cancelled());
        if never_ran {
            if let Some(share) = share {
                share.refund();
            }
        }
        match result {
            Ok(Ok(Ok(value))) => {
                abandoned.armed = false;
                Ok(value)
            }
            // Tokio's blocking pool started the job only after the scope
            // closed or the operation deadline passed: the closure never
            // ran; its permit and record are already back.
            Ok(Ok(Err(NotStarted::Closed))) => {
                abandoned.armed = false;
                table.reject();
                Err(RuntimeError::closed(
                    RuntimeOperation::BlockingQueueAdmission,
                ))
            }
            Ok(Ok(Err(NotStarted::Expired))) => {
                abandoned.armed = false;
                Err(RuntimeError::timed_out(
                    RuntimeOperation::BlockingTaskDeadline,
                ))
            }
            // The owner's runtime is shut down (a retained executor used
            // after its owner was destroyed): Tokio dropped the job unrun.
            Ok(Err(join)) if join.is_cancelled() => {
                abandoned.armed = false;
                table.reject();
                Err(RuntimeError::closed(RuntimeOperation::RunBlockingTask))
            }
            Ok(Err(join)) => {
                abandoned.armed = false;
                Err(RuntimeError::join(RuntimeOperation::RunBlockingTask, join))
            }
            // `abandoned` marks the record when it drops.
            Err(_) => Err(RuntimeError::timed_out(
                RuntimeOperation::BlockingTaskDeadline,
            )),
        }
    }

    /// Admission for a drain lease's submission: like `admit`, but a full
    /// queue is waited out (woken by any release or withdrawal) until
    /// `queue_deadline`, or until an isolated executor stops.
    async fn admit_waiting_for_room(
        &self,
        queue_deadline: ShutdownDeadline,
    ) -> RuntimeResult<Admission> {
        let inner = &*self.inner;
        let table = &inner.table;
        let budget = table.budget();
        loop {
            let admission = budget.admit(table.lane_index());
            if !matches!(admission, Admission::QueueFull) {
                return Ok(admission);
            }
            // Register, enable, re-check: room made after the check above
            // wakes the enabled future.
            let watch = budget.watch_space();
            let room = watch.space().notified();
            tokio::pin!(room);
            room.as_mut().enable();
            let admission = budget.admit(table.lane_index());
            if !matches!(admission, Admission::QueueFull) {
                return Ok(admission);
            }
            tokio::select! {
                biased;
                () = inner.closed_for(Admit::Finalization) => {
                    table.reject();
                    return Err(RuntimeError::closed(RuntimeOperation::BlockingQueueAdmission));
                }
                () = tokio::time::sleep_until(queue_deadline.tokio_instant()) => {
                    return Err(RuntimeError::timed_out(RuntimeOperation::BlockingQueueAdmission));
                }
                () = room => {}
            }
        }
    }
}
