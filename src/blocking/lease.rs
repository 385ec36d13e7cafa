//! Drain leases: a bounded allowance of finalization I/O, accepted while a
//! scope is open and usable after it closes, until a deadline.
//!
//! A service shutting down still has to flush its last state (offsets,
//! commit logs) through its blocking lane after the lane's ordinary
//! admission closed. [`BlockingExecutor::try_drain_lease`] takes, while the
//! scope is open, a lease of at most `max_operations` submissions; its
//! submissions run when ordinary work is refused, without reopening that
//! admission for anyone else.
//!
//! Invariants:
//!
//! 1. A lease is created only while its scope admits ordinary work, so it is
//!    pre-accepted finalization: the scope's later closing or cancellation
//!    (root cancellation included) does not refuse its submissions.
//! 2. At most `max_operations` submissions take a share of the allowance.
//!    The count is one atomic word decremented by compare-and-swap, so
//!    concurrent submissions through `&self` never take more than it holds
//!    (loom-modelled); a submission whose closure never runs gives its share
//!    back when it ends.
//! 3. No submission runs past `min(lease deadline, the scope's shutdown
//!    deadline)`: the lease's deadline is capped when it is taken, each
//!    submission's deadline is capped by the lease's and again by the
//!    scope's installed shutdown deadline, and a deadline passed at the
//!    start means the closure never runs. A submission's own deadline only
//!    tightens.
//! 4. Its submissions wait for room in a full lane queue (until their queue
//!    deadline) instead of being refused; see the `submit` module.

use std::fmt;
use std::future::Future;

use crate::blocking::scope::Admit;
use crate::blocking::BlockingExecutor;
use crate::error::{RuntimeError, RuntimeOperation, RuntimeResult};
use crate::loom::{Arc, AtomicUsize, Ordering};
use crate::shutdown_deadline::ShutdownDeadline;
use crate::shutdown_report::BlockingKind;

/// The number of submissions a lease still allows.
#[derive(Debug)]
pub(crate) struct LeaseAllowance {
    remaining: AtomicUsize,
}

impl LeaseAllowance {
    pub(crate) fn new(max_operations: usize) -> Self {
        Self {
            remaining: AtomicUsize::new(max_operations),
        }
    }

    /// Takes one share, if any is left.
    pub(crate) fn try_take(&self) -> Option<LeaseShare<'_>> {
        let mut current = self.remaining.load(Ordering::Acquire);
        loop {
            if current == 0 {
                return None;
            }
            match self.remaining.compare_exchange_weak(
                current,
                current - 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    return Some(LeaseShare {
                        allowance: self,
                        committed: false,
                    })
                }
                Err(actual) => current = actual,
            }
        }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.remaining.load(Ordering::Acquire)
    }
}

/// One taken share of an allowance: given back when dropped unless the
/// closure it paid for may have run.
#[derive(Debug)]
pub(crate) struct LeaseShare<'a> {
    allowance: &'a LeaseAllowance,
    committed: bool,
}

impl LeaseShare<'_> {
    /// The closure was handed to the blocking pool: the share is spent.
    pub(crate) fn commit(&mut self) {
        self.committed = true;
    }

    /// The start check refused the closure: it never ran, the share goes
    /// back.
    pub(crate) fn refund(&mut self) {
        self.committed = false;
    }
}

impl Drop for LeaseShare<'_> {
    fn drop(&mut self) {
        if !self.committed {
            self.allowance.remaining.fetch_add(1, Ordering::AcqRel);
        }
    }
}

/// A bounded allowance of finalization I/O on one blocking executor,
/// taken with [`BlockingExecutor::try_drain_lease`] while its scope was
/// open.
///
/// Its submissions ([`spawn_io`](Self::spawn_io),
/// [`spawn_io_until`](Self::spawn_io_until)) are admitted after the scope
/// closed or was cancelled, up to `max_operations` of them (shared by
/// concurrent calls; a submission whose closure never runs gives its share
/// back), and never past [`deadline`](Self::deadline) nor the scope's
/// installed shutdown deadline. They wait for room in a full queue instead
/// of being refused. Ordinary submissions stay refused. Not `Clone`: the
/// allowance belongs to the one holder; share it by reference.
///
/// ```
/// use std::num::NonZeroUsize;
/// use std::time::Duration;
/// use rocketmq_runtime::{RuntimeConfig, RuntimeOwner, ShutdownDeadline};
///
/// let owner = RuntimeOwner::plan(RuntimeConfig::for_parallelism("svc", 2))?.build()?;
/// let store = owner.root_context().component("store");
/// let deadline = ShutdownDeadline::after(Duration::from_secs(5));
/// let lease = store.storage_io().try_drain_lease(deadline, NonZeroUsize::MIN)?;
/// owner.block_on(store.task_group().shutdown_until(deadline));
/// // Ordinary admission is closed; the lease's one flush still runs.
/// assert!(owner.block_on(store.storage_io().spawn_io("late", || ())).is_err());
/// owner.block_on(lease.spawn_io("flush-offsets", || ()))?;
/// assert_eq!(lease.remaining_operations(), 0);
/// # owner.shutdown_runtime_blocking()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct BlockingDrainLease {
    executor: BlockingExecutor,
    deadline: ShutdownDeadline,
    allowance: LeaseAllowance,
}

impl BlockingExecutor {
    /// Takes a drain lease of at most `max_operations` submissions, usable
    /// until `deadline` (capped by the scope's installed shutdown deadline)
    /// even after the scope closes. See [`BlockingDrainLease`].
    ///
    /// # Errors
    ///
    /// * `Closed` (`BlockingQueueAdmission`) when the scope is already
    ///   closed or cancelled, or an isolated executor was stopped: a lease
    ///   is accepted only while ordinary work still is;
    /// * `TimedOut` (`BlockingTaskDeadline`) when the capped deadline has
    ///   already passed.
    pub fn try_drain_lease(
        &self,
        deadline: ShutdownDeadline,
        max_operations: std::num::NonZeroUsize,
    ) -> RuntimeResult<BlockingDrainLease> {
        let inner = &*self.inner;
        if !inner.admits() {
            return Err(inner.refusal(RuntimeError::closed(
                RuntimeOperation::BlockingQueueAdmission,
            )));
        }
        let deadline = match inner.scope.shutdown_deadline() {
            Some(scope) => deadline.earliest(scope),
            None => deadline,
        };
        if deadline.is_expired() {
            return Err(RuntimeError::timed_out(
                RuntimeOperation::BlockingTaskDeadline,
            ));
        }
        Ok(BlockingDrainLease {
            executor: self.clone(),
            deadline,
            allowance: LeaseAllowance::new(max_operations.get()),
        })
    }
}

impl BlockingDrainLease {
    /// Runs `work` (`BlockingKind::ShortIo`) under the lease: as
    /// [`BlockingExecutor::spawn_io_until`] with the lease's deadline, but
    /// admitted after the scope closed, and waiting for room in a full
    /// queue.
    ///
    /// # Errors
    ///
    /// * `CapacityExhausted` (`BlockingQueueAdmission`) when the allowance
    ///   is spent (counted in the lane's `rejected`);
    /// * `TimedOut` (`BlockingTaskDeadline`) when the lease's deadline has
    ///   passed (the closure never runs), (`BlockingQueueAdmission`) when no
    ///   room or slot came in time;
    /// * `Closed` when an isolated executor was stopped, or
    ///   (`RunBlockingTask`) when the owner's runtime is shut down;
    /// * otherwise as [`BlockingExecutor::spawn`].
    ///
    /// A submission whose closure never ran gives its share back.
    ///
    /// # Cancel safety
    ///
    /// As [`BlockingExecutor::spawn`]. Dropping the future before the
    /// closure was handed to the blocking pool gives the share back; after
    /// that the share is spent (the closure may run).
    pub fn spawn_io<F, R>(
        &self,
        name: impl Into<Arc<str>>,
        work: F,
    ) -> impl Future<Output = RuntimeResult<R>> + Send + '_
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.spawn_io_until(name, self.deadline, work)
    }

    /// [`spawn_io`](Self::spawn_io) with its own deadline, which only
    /// tightens the lease's.
    ///
    /// # Errors
    ///
    /// As [`spawn_io`](Self::spawn_io).
    ///
    /// # Cancel safety
    ///
    /// As [`spawn_io`](Self::spawn_io).
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
        let name = name.into();
        let deadline = deadline.earliest(self.deadline);
        let work: Box<dyn FnOnce() -> R + Send> = Box::new(work);
        async move {
            let Some(mut share) = self.allowance.try_take() else {
                self.executor.inner.table.reject();
                return Err(RuntimeError::capacity(
                    RuntimeOperation::BlockingQueueAdmission,
                ));
            };
            self.executor
                .submit(
                    name,
                    BlockingKind::ShortIo,
                    Some(deadline),
                    work,
                    Admit::Finalization,
                    Some(&mut share),
                )
                .await
        }
    }

    /// Submissions the lease still allows (shares held by submissions in
    /// progress are not counted).
    pub fn remaining_operations(&self) -> usize {
        self.allowance.remaining()
    }

    /// The latest instant any of the lease's closures may start: the
    /// deadline given, capped by the scope's shutdown deadline installed
    /// when the lease was taken (a later installed one caps each
    /// submission too).
    pub fn deadline(&self) -> ShutdownDeadline {
        self.deadline
    }
}

impl fmt::Debug for BlockingDrainLease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockingDrainLease")
            .field("executor", &self.executor)
            .field("deadline", &self.deadline)
            .field("remaining_operations", &self.remaining_operations())
            .finish()
    }
}
