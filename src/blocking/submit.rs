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

use crate::blocking::admission::{Admission, AdmissionPermit};
use crate::blocking::job::{spawn_on_pool, Abandoned, BlockingJob, NotStarted, StartCheck};
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

/// One submission's request (what `execute` is asked to do).
struct Submission<R> {
    name: Arc<str>,
    kind: BlockingKind,
    deadline: Option<ShutdownDeadline>,
    submitted: Instant,
    work: Box<dyn FnOnce() -> R + Send>,
    mode: Admit,
}

/// What waiting for a job found: the caller's wait ended (`Err`), Tokio's
/// join failed, the start check refused the job, or the value.
type Waited<R> =
    Result<Result<Result<R, NotStarted>, tokio::task::JoinError>, tokio::time::error::Elapsed>;

/// The two deadlines of a submission (phase 2): the operation's (no
/// closure starts after it) and the queue's (no slot is waited for, or
/// claimed, after it).
#[derive(Clone, Copy)]
struct Deadlines {
    operation: ShutdownDeadline,
    queue: ShutdownDeadline,
}

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
            let submission = Submission {
                name,
                kind,
                deadline,
                submitted,
                work: boxed,
                mode,
            };
            return self.execute(submission, share).await.map(|result| *result);
        }
        let submission = Submission {
            name,
            kind,
            deadline,
            submitted,
            work,
            mode,
        };
        self.execute(submission, share).await
    }

    /// The phases of the executor's module docs: (1) refuse what can never
    /// run; (2) fix the deadlines; (3) take a slot, queueing for one; (4)
    /// re-check the scope and the deadline; (5) hand the closure to the
    /// blocking pool and wait for it; (6) settle what the wait found.
    async fn execute<R: Send + 'static>(
        &self,
        submission: Submission<R>,
        share: Option<&mut LeaseShare<'_>>,
    ) -> RuntimeResult<R> {
        let Submission {
            name,
            kind,
            deadline,
            submitted,
            work,
            mode,
        } = submission;
        self.refuse_unrunnable(kind, mode)?;
        let deadlines = self.deadlines(deadline, submitted, mode)?;
        let record = self.inner.table.insert(name, kind);
        let permit = self.take_slot(mode, deadlines.queue).await?;
        // A scope that closed (or an executor stopped) while this submission
        // was admitted or queued never runs it: the permit and the record go
        // back here.
        self.refuse_unrunnable(kind, mode)?;
        if deadlines.operation.is_expired() {
            // Never started: the permit and the record go back now.
            return Err(RuntimeError::timed_out(
                RuntimeOperation::BlockingTaskDeadline,
            ));
        }
        let started = Instant::now();
        let abandoned = Abandoned {
            table: Arc::clone(&self.inner.table),
            id: record.id(),
            armed: true,
        };
        let job = BlockingJob {
            work: Some(work),
            permit: Some(permit),
            record: Some(record),
            start: Some(StartCheck {
                inner: Arc::clone(&self.inner),
                deadline: deadlines.operation,
                mode,
            }),
        };
        // From here the closure may run: the lease share is spent unless
        // the start check refuses it.
        let mut share = share;
        if let Some(share) = share.as_deref_mut() {
            share.commit();
        }
        let result = self
            .run_and_wait(job, abandoned.id, started, deadlines.operation)
            .await;
        self.settle(result, abandoned, share)
    }

    /// Phase 1 (and 4): long-running work is never admitted, and nothing is
    /// once the scope (or the isolated executor) refuses its mode.
    fn refuse_unrunnable(&self, kind: BlockingKind, mode: Admit) -> RuntimeResult<()> {
        let table = &self.inner.table;
        if kind == BlockingKind::LongRunning {
            table.reject();
            return Err(RuntimeError::unsupported(
                RuntimeOperation::BlockingExecutorKind,
            ));
        }
        if !self.inner.admits_mode(mode) {
            table.reject();
            return Err(self.inner.refusal(RuntimeError::closed(
                RuntimeOperation::BlockingQueueAdmission,
            )));
        }
        Ok(())
    }

    /// Phase 2: the operation deadline is the caller's, capped by the
    /// scope's installed shutdown deadline (or the lane's queue and task
    /// timeouts when the caller gave none); the queue deadline caps it by
    /// the queue timeout. Pre-accepted work whose deadline passed is
    /// refused at once.
    fn deadlines(
        &self,
        deadline: Option<ShutdownDeadline>,
        submitted: Instant,
        mode: Admit,
    ) -> RuntimeResult<Deadlines> {
        let policy = &self.inner.policy;
        let operation = match deadline {
            Some(deadline) => match self.inner.scope.shutdown_deadline() {
                Some(scope) => deadline.earliest(scope),
                None => deadline,
            },
            None => ShutdownDeadline::from_tokio(saturating_add(
                submitted,
                policy.queue_timeout.saturating_add(policy.task_timeout),
            )),
        };
        if mode == Admit::Finalization && operation.is_expired() {
            return Err(RuntimeError::timed_out(
                RuntimeOperation::BlockingTaskDeadline,
            ));
        }
        let queue = operation.earliest(ShutdownDeadline::from_tokio(saturating_add(
            submitted,
            policy.queue_timeout,
        )));
        Ok(Deadlines { operation, queue })
    }

    /// Phase 3: a slot now, or a place in the lane's queue until a slot is
    /// granted, the scope refuses the mode, or the queue deadline passes. A
    /// grant that came after the queue deadline (this waiter was not polled
    /// in between) is not used: dropping the permit hands the slot on.
    async fn take_slot(
        &self,
        mode: Admit,
        queue_deadline: ShutdownDeadline,
    ) -> RuntimeResult<AdmissionPermit> {
        let inner = &*self.inner;
        let table = &inner.table;
        let admission = match mode {
            Admit::Ordinary => table.budget().admit(table.lane_index()),
            Admit::Finalization => self.admit_waiting_for_room(queue_deadline).await?,
        };
        match admission {
            Admission::Running(permit) => Ok(permit),
            Admission::QueueFull => {
                table.reject();
                Err(inner.lane_full())
            }
            Admission::Queued(mut queued) => {
                let permit = tokio::select! {
                    biased;
                    () = inner.closed_for(mode) => {
                        table.reject();
                        return Err(inner.refusal(RuntimeError::closed(RuntimeOperation::BlockingQueueAdmission)));
                    }
                    () = tokio::time::sleep_until(queue_deadline.tokio_instant()) => {
                        return Err(RuntimeError::timed_out(RuntimeOperation::BlockingQueueAdmission));
                    }
                    permit = queued.granted() => permit,
                };
                if queue_deadline.is_expired() {
                    drop(permit);
                    return Err(RuntimeError::timed_out(
                        RuntimeOperation::BlockingQueueAdmission,
                    ));
                }
                Ok(permit)
            }
        }
    }

    /// Phase 5: hands the job to the owner's blocking pool and waits until
    /// the caller's deadline (the task timeout from the start, capped by
    /// the operation deadline). A closure still running after `warn_after`
    /// is reported once, here while the caller waits (or as it exits, by
    /// its record). `Err` when the caller stopped waiting.
    async fn run_and_wait<R: Send + 'static>(
        &self,
        job: BlockingJob<R>,
        record_id: u64,
        started: Instant,
        operation_deadline: ShutdownDeadline,
    ) -> Waited<R> {
        let inner = &*self.inner;
        let policy = &inner.policy;
        let mut handle = match spawn_on_pool(&inner.handle, job) {
            Ok(handle) => handle,
            Err(refused) => return Ok(Ok(Err(NotStarted::NoThread(refused.to_string())))),
        };
        let caller_deadline = operation_deadline
            .earliest(ShutdownDeadline::from_tokio(saturating_add(
                started,
                policy.task_timeout,
            )))
            .tokio_instant();
        let warn_at = saturating_add(started, policy.warn_after);
        let early = if warn_at < caller_deadline {
            let early = tokio::time::timeout_at(warn_at, &mut handle).await.ok();
            if early.is_none() {
                inner.table.warn_slow(record_id);
            }
            early
        } else {
            None
        };
        match early {
            Some(done) => Ok(done),
            None => tokio::time::timeout_at(caller_deadline, handle).await,
        }
    }

    /// Phase 6: the value, or why there is none. A closure that never ran
    /// gives a drain lease's share back; one the caller stopped waiting for
    /// is marked `TimedOutStillRunning` by `abandoned` as it drops.
    fn settle<R>(
        &self,
        result: Waited<R>,
        mut abandoned: Abandoned,
        share: Option<&mut LeaseShare<'_>>,
    ) -> RuntimeResult<R> {
        let table = &self.inner.table;
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
                Err(self.inner.refusal(RuntimeError::closed(
                    RuntimeOperation::BlockingQueueAdmission,
                )))
            }
            // The OS refused the pool a thread: the closure never runs.
            Ok(Ok(Err(NotStarted::NoThread(message)))) => {
                abandoned.armed = false;
                table.reject();
                Err(self.inner.refusal(RuntimeError::io(
                    RuntimeOperation::RunBlockingTask,
                    std::io::Error::other(message),
                )))
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
                    return Err(inner.refusal(RuntimeError::closed(RuntimeOperation::BlockingQueueAdmission)));
                }
                () = tokio::time::sleep_until(queue_deadline.tokio_instant()) => {
                    return Err(RuntimeError::timed_out(RuntimeOperation::BlockingQueueAdmission));
                }
                () = room => {}
            }
        }
    }
}
