//! `BlockingExecutor`: submission, the phases of a blocking call (run by
//! the `submit` module, which drain leases share), and the closure wrapper
//! that keeps capacity until the closure exits.
//!
//! A submission goes through:
//!
//! 1. refusal checks: `LongRunning` (`Unsupported`), a closed scope or a
//!    stopped isolated executor (`Closed`), each counted in `rejected`;
//! 2. the queue phase: a record is inserted (`Queued`), then admission
//!    either runs it at once, queues it (FIFO per lane, bounded by
//!    `min(submit + queue_timeout, operation deadline)`, woken early by a
//!    closing scope), or refuses it (full queue: `CapacityExhausted`). A
//!    submission that leaves the queue removes its record and withdraws its
//!    waiter (a slot granted meanwhile goes back through a release), and a
//!    slot granted after the queue deadline is handed on, not used;
//! 3. the start: after the closed-scope check, past the operation deadline
//!    the closure never runs (`TimedOut`; the permit and the record go back
//!    at once); otherwise a [`BlockingJob`] carrying the closure, the
//!    admission permit and the record guard goes to the owner runtime's
//!    blocking pool. The start is checked again when a Tokio pool thread
//!    picks the job up, since isolated executors can fill the pool: a job
//!    that fails the check drops its closure unrun, and the record turns
//!    `Running` only when the check passes;
//! 4. the caller phase, bounded by `min(start + task_timeout, operation
//!    deadline)`: on timeout, or if the caller's future is dropped, the
//!    record turns `TimedOutStillRunning`.
//!
//! Invariants:
//!
//! 1. The operation deadline is the caller's deadline (tightened by the
//!    scope's shutdown deadline), or `submit + queue_timeout + task_timeout`
//!    without one: no phase waits past it, and no closure starts past it or
//!    after its scope closed.
//! 2. The permit and the record move into the closure's job and are dropped
//!    only when the closure exits, in the order user captures → permit
//!    (a release that hands the slot over) → record, whatever ends it
//!    (return, panic, or Tokio discarding a closure that never started).
//! 3. A caller that stops waiting only marks the record; it never releases
//!    capacity the closure still occupies.
//! 4. Managed lanes: one admission budget and three tables per owner, in the
//!    context tree's shared state (`managed.rs`). Isolated executors have
//!    their own budget and table, registered with the group's tree so their
//!    running closures count in the tree root's shutdown report.

use std::fmt;
use std::future::Future;

use tokio_util::sync::CancellationToken;

use crate::blocking::admission::{Admission, AdmissionBudget, LaneLimits};
use crate::blocking::job::{spawn_on_pool, BlockingJob};
use crate::blocking::scope::{Admit, ExecutorInner, Isolated};
use crate::blocking::table::BlockingTable;
use crate::blocking::BlockingPoolPolicy;
use crate::error::{RuntimeContractViolation, RuntimeError, RuntimeOperation, RuntimeResult};
use crate::loom::Arc;
use crate::shutdown_deadline::ShutdownDeadline;
use crate::shutdown_report::{
    BlockingExecutorSnapshot, BlockingKind, BlockingLane, BlockingTaskState,
};
use crate::task_group::TaskGroup;
use crate::wait::notified_until;

/// A bounded path for blocking work that keeps its capacity until the
/// closure exits.
///
/// Managed lanes come from a context: [`storage_io`], [`metadata_io`] and
/// [`cpu_crypto`] share one global admission budget of
/// `RuntimeConfig::max_blocking_threads` per owner; each lane has its own
/// ceiling (`max_concurrency`), queue bound (`max_queue_depth`) and a
/// reservation of one slot. Clones share everything. An isolated executor
/// ([`new_isolated`](Self::new_isolated)) has its own capacity and table.
///
/// Timeouts and cancellation never stop a running closure: it keeps its
/// admission slot until it exits, and an abandoned one is reported as
/// `TimedOutStillRunning` (and counts in the owner's shutdown report as
/// `blocking_still_running`) until then. Closures always run on the owner
/// runtime's blocking pool.
///
/// [`storage_io`]: crate::ChildServiceContext::storage_io
/// [`metadata_io`]: crate::ChildServiceContext::metadata_io
/// [`cpu_crypto`]: crate::ChildServiceContext::cpu_crypto
///
/// ```
/// use rocketmq_runtime::RuntimeContext;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let harness = RuntimeContext::try_from_current("test").unwrap();
/// let store = harness.service_context("store");
/// let storage = store.storage_io();
/// let bytes = storage.spawn_io("read-index", || vec![0u8; 16].len()).await.unwrap();
/// assert_eq!(bytes, 16);
/// assert_eq!(storage.snapshot().blocking_still_running, 0);
/// # }
/// ```
#[derive(Clone)]
pub struct BlockingExecutor {
    pub(super) inner: Arc<ExecutorInner>,
}

impl BlockingExecutor {
    /// An isolated executor (see [`new_isolated`](Self::new_isolated)).
    ///
    /// # Errors
    ///
    /// As [`new_isolated`](Self::new_isolated).
    pub fn new(
        policy: BlockingPoolPolicy,
        owner_group: TaskGroup,
    ) -> Result<Self, RuntimeContractViolation> {
        Self::new_isolated(policy, owner_group)
    }

    /// An executor with its own capacity (`max_concurrency`, all of it
    /// reserved) and task table, outside the managed lanes. Its scope is
    /// `owner_group` (it refuses work once the group closes or is
    /// cancelled) and its table is registered with the group's tree, so a
    /// closure it still runs counts in the tree owner's shutdown report.
    /// Its snapshots carry the lane tag `StorageIo`.
    ///
    /// # Errors
    ///
    /// The policy's validation error.
    pub fn new_isolated(
        policy: BlockingPoolPolicy,
        owner_group: TaskGroup,
    ) -> Result<Self, RuntimeContractViolation> {
        policy.validate()?;
        let limits = LaneLimits {
            ceiling: policy.max_concurrency,
            reservation: policy.max_concurrency,
            max_queue_depth: policy.max_queue_depth,
        };
        let budget = AdmissionBudget::new(policy.max_concurrency, &[limits]);
        let table = BlockingTable::new(&policy, BlockingLane::StorageIo, 0, budget);
        owner_group.register_blocking(table.evidence());
        Ok(Self {
            inner: Arc::new(ExecutorInner {
                policy,
                table,
                handle: owner_group.runtime_handle().clone(),
                scope: owner_group,
                isolated: Some(Isolated {
                    stopped: CancellationToken::new(),
                }),
            }),
        })
    }

    /// The pool's policy.
    pub fn policy(&self) -> &BlockingPoolPolicy {
        &self.inner.policy
    }

    /// Runs `work` on the blocking pool once admitted.
    ///
    /// The closure is boxed when this is called; admission starts when the
    /// returned future is first polled (call it from the owning runtime's
    /// work). The queue wait is bounded by `queue_timeout`, the caller's
    /// wait for the result by `task_timeout`.
    ///
    /// # Errors
    ///
    /// * `Unsupported` (`BlockingExecutorKind`) for `BlockingKind::LongRunning`;
    /// * `Closed` (`BlockingQueueAdmission`) once the scope is closed or
    ///   cancelled or an isolated executor is stopped, also while queued;
    /// * `CapacityExhausted` (`BlockingQueueAdmission`) when the lane's
    ///   queue is full, at once;
    /// * `TimedOut` (`BlockingQueueAdmission`) when no slot came in time,
    ///   (`BlockingTaskDeadline`) when the operation deadline passed before
    ///   the start (the closure never runs) or the caller's wait ran out
    ///   (the closure keeps running and keeps its slot);
    /// * a join error (`RunBlockingTask`) when the closure panicked.
    ///
    /// `rejected` in the snapshot counts the refusals (`LongRunning`, a
    /// closed scope, a full queue); timeouts are not refusals. A scope
    /// poisoned while a submission waits refuses it once a slot is granted
    /// (or its queue wait ends); cancellation and closing wake it at once.
    ///
    /// # Panics
    ///
    /// Outside a Tokio runtime with the time driver enabled (the queue and
    /// caller deadlines are Tokio timers); the owner's runtime always has it.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future while queued removes the submission (it never
    /// runs); dropping it while the closure runs abandons the result: the
    /// closure keeps running and its slot, and is reported as
    /// `TimedOutStillRunning` until it exits.
    pub fn spawn<F, R>(
        &self,
        name: impl Into<Arc<str>>,
        kind: BlockingKind,
        work: F,
    ) -> impl Future<Output = RuntimeResult<R>> + Send + '_
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.submit(
            name.into(),
            kind,
            None,
            Box::new(work),
            Admit::Ordinary,
            None,
        )
    }

    /// [`spawn`](Self::spawn) with one absolute deadline capping both the
    /// queue wait and the caller's wait (itself capped by the scope's
    /// installed shutdown deadline).
    ///
    /// # Errors
    ///
    /// As [`spawn`](Self::spawn).
    ///
    /// # Cancel safety
    ///
    /// As [`spawn`](Self::spawn).
    pub fn spawn_until<F, R>(
        &self,
        name: impl Into<Arc<str>>,
        kind: BlockingKind,
        deadline: ShutdownDeadline,
        work: F,
    ) -> impl Future<Output = RuntimeResult<R>> + Send + '_
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.submit(
            name.into(),
            kind,
            Some(deadline),
            Box::new(work),
            Admit::Ordinary,
            None,
        )
    }

    /// [`spawn`](Self::spawn) with `BlockingKind::ShortIo`.
    ///
    /// # Errors
    ///
    /// As [`spawn`](Self::spawn).
    ///
    /// # Cancel safety
    ///
    /// As [`spawn`](Self::spawn).
    pub fn spawn_io<F, R>(
        &self,
        name: impl Into<Arc<str>>,
        work: F,
    ) -> impl Future<Output = RuntimeResult<R>> + Send + '_
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.spawn(name, BlockingKind::ShortIo, work)
    }

    /// [`spawn_until`](Self::spawn_until) with `BlockingKind::ShortIo`.
    ///
    /// # Errors
    ///
    /// As [`spawn`](Self::spawn).
    ///
    /// # Cancel safety
    ///
    /// As [`spawn`](Self::spawn).
    pub fn spawn_io_until<F, R>(
        &self,
        name: impl Into<Arc<str>>,
        deadline: ShutdownDeadline,
        work: F,
    ) -> impl Future<Output = RuntimeResult<R>> + Send + '_
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.spawn_until(name, BlockingKind::ShortIo, deadline, work)
    }

    /// Starts `work` at once if a slot is free right now (crate: callers
    /// that settle their work from inside the closure and need no result).
    /// The closure keeps its slot and record until it exits, as with
    /// [`spawn`](Self::spawn). Returns `work` when it would have to queue
    /// or the scope is closed; nothing is recorded then.
    pub(crate) fn try_start_detached<F>(&self, name: Arc<str>, work: F) -> Result<(), F>
    where
        F: FnOnce() + Send + 'static,
    {
        let inner = &*self.inner;
        if !inner.admits() {
            return Err(work);
        }
        let table = &inner.table;
        let Admission::Running(permit) = table.budget().admit_if_free(table.lane_index()) else {
            return Err(work);
        };
        let record = table.insert(name, BlockingKind::ShortIo);
        table.mark(record.id(), BlockingTaskState::Running);
        let job = BlockingJob {
            work: Some(Box::new(work) as Box<dyn FnOnce() + Send>),
            permit: Some(permit),
            record: Some(record),
            // A detached closure settles its own work: it always runs.
            start: None,
        };
        match spawn_on_pool(&inner.handle, job) {
            Ok(handle) => drop(handle),
            // The job is dropped unrun (its permit and record go back);
            // its work cannot be handed back, so the loss is logged.
            Err(refused) => {
                table.reject();
                tracing::error!(
                    lane = table.lane().as_str(),
                    error = %refused,
                    "blocking work not run: the OS refused the blocking pool a thread"
                );
            }
        }
        Ok(())
    }

    /// Submits work accepted earlier, while its owner still admitted it
    /// (crate: the metadata actor's queued writes): like a drain lease's
    /// submission, it is bounded by `deadline` capped by the scope's
    /// installed shutdown deadline, and the scope's closing or cancellation
    /// does not refuse it (an isolated executor's stop does).
    pub(crate) fn spawn_accepted_until<F>(
        &self,
        name: Arc<str>,
        deadline: ShutdownDeadline,
        work: F,
    ) -> impl Future<Output = RuntimeResult<()>> + Send + '_
    where
        F: FnOnce() + Send + 'static,
    {
        self.submit(
            name,
            BlockingKind::ShortIo,
            Some(deadline),
            Box::new(work),
            Admit::Finalization,
            None,
        )
    }

    /// Closes an isolated executor (and its clones) to new work; queued
    /// submissions wake with `Closed` and never run. Running closures are
    /// not affected.
    ///
    /// # Errors
    ///
    /// `unsupported(ShutdownBlockingExecutor)` for a managed lane: its
    /// service context owns shutdown.
    pub fn stop_admission(&self) -> RuntimeResult<()> {
        match &self.inner.isolated {
            Some(isolated) => {
                isolated.stopped.cancel();
                Ok(())
            }
            None => Err(RuntimeError::unsupported(
                RuntimeOperation::ShutdownBlockingExecutor,
            )),
        }
    }

    /// Stops admission and waits until `deadline` for every owned
    /// submission and closure of this isolated executor to finish.
    ///
    /// `completed` is false (and `pending_operations` counts what is still
    /// owned) when closures still run at the deadline; call again later to
    /// retry. The scope group and sibling executors are not affected.
    ///
    /// # Errors
    ///
    /// `unsupported(ShutdownBlockingExecutor)` for a managed lane.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: admission is stopped at the first poll; dropping the
    /// future only stops waiting.
    pub async fn shutdown_until(
        &self,
        deadline: ShutdownDeadline,
    ) -> RuntimeResult<crate::blocking::BlockingExecutorShutdownReport> {
        self.stop_admission()?;
        let table = &self.inner.table;
        let _ = notified_until(table.emptied(), deadline, Some(&self.inner.handle), || {
            table.len() == 0
        })
        .await;
        // One snapshot decides all three fields, so they never disagree.
        let snapshot = table.snapshot();
        let pending_operations = snapshot.tasks.len();
        Ok(crate::blocking::BlockingExecutorShutdownReport {
            completed: pending_operations == 0,
            pending_operations,
            snapshot,
        })
    }

    /// Counts and records of this executor's pool (task names included).
    pub fn snapshot(&self) -> BlockingExecutorSnapshot {
        self.inner.table.snapshot()
    }

    /// Running closures plus abandoned ones still running.
    pub fn blocking_still_running(&self) -> usize {
        self.inner.table.blocking_still_running()
    }
}

impl fmt::Debug for BlockingExecutor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockingExecutor")
            .field("name", &self.inner.policy.name)
            .field("isolated", &self.inner.isolated.is_some())
            .field("scope", &self.inner.scope.name())
            .finish_non_exhaustive()
    }
}
