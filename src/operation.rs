//! Operations: bounded requests and restartable work without a task group.
//!
//! An [`OperationContext`] carries its own cancellation, an optional
//! absolute deadline, an admission gate and six outcome counters. Its tasks
//! are ordinary tracked tasks of a fixed component group (the *owner*),
//! tagged with the operation's id in the owner's task table: an operation
//! adds no task group, no child link and no per-task history.
//!
//! | State | Owner |
//! | --- | --- |
//! | admission, active count, owner binding and hold | [`gate`] (`OperationGate`) |
//! | the submission path, the task wrapper that picks the outcome | [`run`] (`OperationRun`) |
//! | outcome counters, observer, lazy token, owner slot | `OperationShared` (this file) |
//! | waits and their abort phase | [`wait`] |
//!
//! Invariants:
//!
//! 1. Operations are tags, not groups: a task's record in its owner's table
//!    carries the operation id in its cold part, and waits abort through that
//!    tag. The operation itself keeps only its gate, its counters, one
//!    `Notify` and its owner slot.
//! 2. Settlement order of an operation task: the user future is destroyed,
//!    the owner publishes the task's settlement (its record is removed and
//!    counted before any reader of the owner looks), the operation counts the
//!    outcome and calls the observer, and only then the active count drops
//!    (and idle waiters are woken). So an operation whose count reads zero
//!    has no task listed by its owner and every outcome published.
//! 3. The six counters are each incremented once per accepted task, after its
//!    future is destroyed; a refused submission changes no counter.
//! 4. The observer is set before the first submission (under the binding
//!    lock, refused once a submission was accepted) and called once per task,
//!    its panics contained and logged.
//! 5. Cancellation is a flag in the gate's state word plus one `Notify`, not
//!    a `CancellationToken` (checking a token takes its mutex). The token
//!    `cancellation_token()` returns is a child of one created lazily under
//!    the binding lock, which `cancel` also takes after setting its flag, so
//!    `cancel` and the creation cannot miss each other.
//! 6. While it has accepted tasks the operation holds its owner group
//!    strongly (see [`gate`]); otherwise it keeps only a weak reference, so a
//!    bound operation never keeps an idle group alive or listed under its
//!    parent.
//! 7. Layout (`repr(C)`): what every settlement writes (the gate's state word,
//!    then the outcome counters) sits right after the reference counts; what
//!    submissions only read (owner binding, aborting mark, deadline) starts 72
//!    bytes after the state word, off those cache lines.

mod gate;
mod outcome;
mod run;
#[cfg(all(test, loom))]
mod tests;
mod wait;

use std::fmt;
use std::num::NonZeroU64;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::{RuntimeError, RuntimeOperation, RuntimeResult};
use crate::loom::{Arc, Mutex, Ordering, StaticAtomicU64, Weak};
use crate::task_group::GroupInner;
use crate::task_identity::TaskKind;

pub(crate) use gate::OperationGate;
pub use outcome::{
    OperationOutcome, OperationOutcomeObserver, OperationWaitOutcome, OperationWaitPolicy,
};

/// Process-unique operation ids (the tag of its tasks in owner tables).
static NEXT_OPERATION_ID: StaticAtomicU64 = StaticAtomicU64::new(0);

/// The state every view of one operation shares.
///
/// `repr(C)` keeps the fields every settlement writes (the gate's state
/// word, then the outcome counters, `Completed` first) right after the
/// reference counts; what submissions only read (the owner binding, the
/// aborting mark, the deadline) starts 72 bytes after the state word, so it
/// never shares a 64-byte cache line with the reference counts, the state
/// word or the `Completed` counter, whatever the allocation's alignment
/// (see `OperationGate`).
#[repr(C)]
pub(crate) struct OperationShared {
    pub(crate) gate: OperationGate,
    id: NonZeroU64,
    deadline: Option<Instant>,
    /// Woken on cancellation (tasks) and on becoming idle (waiters); both
    /// sides re-check the state they wait for.
    pub(crate) notify: Arc<Notify>,
    observer: OnceLock<Arc<dyn OperationOutcomeObserver>>,
    /// Created by the first `cancellation_token()` call (tasks do not need
    /// it: they watch the gate's flag and `notify`).
    token: OnceLock<CancellationToken>,
    /// The owner group, weakly, set by the first accepted submission before
    /// its task is handed to Tokio. The operation's tasks reach their owner
    /// through it (the hold keeps it valid while they are accepted), so a
    /// task holds one reference (to the operation), not two.
    owner: OnceLock<Weak<GroupInner>>,
    /// The owner group, held while the operation has accepted tasks (see
    /// `OperationGate::hold_owner`): it keeps the group alive for them, and
    /// an idle operation keeps no group alive.
    hold: Mutex<Option<Arc<GroupInner>>>,
}

impl OperationShared {
    pub(crate) fn id(&self) -> NonZeroU64 {
        self.id
    }

    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// The owner group, for an accepted task that is not yet released
    /// (the operation holds the group for it, so this never fails then).
    pub(crate) fn owner_group(&self) -> Option<Arc<GroupInner>> {
        self.owner.get().and_then(Weak::upgrade)
    }

    /// True once the owner group is cancelled (for an accepted task).
    pub(crate) fn is_owner_cancelled(&self) -> bool {
        self.owner_group()
            .is_some_and(|group| group.token().is_cancelled())
    }

    /// After an accepted submission whose admission found the owner not
    /// held: holds `group` for the operation's tasks and records it as the
    /// owner (the first time; the gate has already bound the operation to
    /// it). Call before the task is handed to Tokio.
    pub(crate) fn hold_owner(&self, group: &Arc<GroupInner>) {
        // Recorded before `HELD` is set (inside the gate's call): a later
        // submission that finds `HELD` set skips this and relies on it.
        self.gate.hold_owner(&self.hold, || {
            self.owner.get_or_init(|| Arc::downgrade(group));
            Arc::clone(group)
        });
    }

    /// True once the deadline has passed.
    pub(crate) fn is_expired(&self) -> bool {
        self.deadline
            .is_some_and(|deadline| deadline <= Instant::now())
    }

    /// Publishes the outcome of one accepted task whose owner record is
    /// already removed: count, observe, then release (waking idle waiters).
    pub(crate) fn publish(&self, kind: TaskKind, outcome: OperationOutcome) {
        self.gate.outcomes[outcome.index()].fetch_add(1, Ordering::Relaxed);
        if let Some(observer) = self.observer.get() {
            let observed = catch_unwind(AssertUnwindSafe(|| observer.on_outcome(kind, outcome)));
            if observed.is_err() {
                tracing::error!(
                    operation_id = self.id.get(),
                    outcome = outcome.as_str(),
                    "operation outcome observer panicked; the outcome stays counted"
                );
            }
        }
        self.release();
    }

    /// Releases one admission and wakes idle waiters if it was the last;
    /// an operation that became idle gives its owner group back (dropped
    /// last, after the wake-up: it may be the group's last reference).
    pub(crate) fn release(&self) {
        let released = self.gate.release(&self.hold);
        if released.notify {
            self.notify.notify_waiters();
        }
        drop(released.owner);
    }

    /// [`OperationGate::submit`] with this operation's owner slot.
    pub(crate) fn submit<R, E>(
        &self,
        group: u64,
        register: impl FnOnce() -> Result<R, E>,
    ) -> Result<gate::Accepted<R>, gate::Submission<E>> {
        self.gate.submit(group, &self.hold, register)
    }
}

impl fmt::Debug for OperationShared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OperationShared")
            .field("id", &self.id)
            .field("deadline", &self.deadline)
            .field("cancelled", &self.gate.is_cancelled())
            .field("closed", &self.gate.is_closed())
            .field("active", &self.gate.active())
            .field("owner", &self.gate.owner())
            .finish_non_exhaustive()
    }
}

/// A bounded request or restartable unit of work inside a component group.
///
/// Clones (and [`with_task_kind`](Self::with_task_kind) views) share the
/// cancellation, deadline, admission, owner binding and counters. An
/// operation never creates a task group: its tasks are submitted with
/// [`TaskGroup::spawn_operation`](crate::TaskGroup::spawn_operation) or
/// [`TaskGroup::spawn_draining_operation`](crate::TaskGroup::spawn_draining_operation)
/// and live in that group, tagged with the operation. The first accepted
/// submission binds the operation to its group (the *owner*); a submission
/// or wait with another group fails with [`RuntimeOperation::OperationOwner`].
/// While it has accepted tasks that are not settled, an operation holds a
/// reference to its owner group (its tasks reach the owner through it); an
/// idle operation holds none, so a bound operation never keeps an idle
/// group alive or listed under its parent. It keeps only a weak reference:
/// when the group goes first, the group's allocation (not its state) stays
/// until the operation's last clone is dropped.
///
/// Admission is refused with kind `Closed` (operation
/// [`RuntimeOperation::SpawnOperation`]) after
/// [`close_admission`](Self::close_admission), [`cancel`](Self::cancel) or
/// once the deadline has passed; a refused submission changes no counter.
///
/// ```
/// use std::time::Duration;
/// use rocketmq_runtime::{OperationContext, OperationOutcome, RuntimeConfig, RuntimeOwner, TaskKind};
///
/// let owner = RuntimeOwner::plan(RuntimeConfig::for_parallelism("ops", 2))?.build()?;
/// let broker = owner.root_context().component("broker");
/// let group = broker.task_group().clone();
/// let completed = owner.block_on(async move {
///     let request = OperationContext::without_deadline(TaskKind::Worker);
///     group.spawn_operation(&request, "handle-request", async {})?;
///     assert!(request.wait(&group, Duration::from_secs(1)).await?);
///     Ok::<_, rocketmq_runtime::RuntimeError>(request.outcomes()[0])
/// })?;
/// assert_eq!(completed, (OperationOutcome::Completed, 1));
/// assert!(owner.shutdown_runtime_blocking()?.is_healthy());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct OperationContext {
    shared: Arc<OperationShared>,
    kind: TaskKind,
}

impl OperationContext {
    /// An operation whose tasks are dropped once `deadline` passes.
    ///
    /// The deadline is absolute; it is converted to Tokio's clock with
    /// [`tokio::time::Instant::from_std`].
    pub fn new(deadline: std::time::Instant, kind: TaskKind) -> Self {
        Self::with_deadline(Some(Instant::from_std(deadline)), kind)
    }

    /// An operation without a deadline.
    pub fn without_deadline(kind: TaskKind) -> Self {
        Self::with_deadline(None, kind)
    }

    fn with_deadline(deadline: Option<Instant>, kind: TaskKind) -> Self {
        let id = NonZeroU64::MIN.saturating_add(NEXT_OPERATION_ID.fetch_add(1, Ordering::Relaxed));
        Self {
            shared: Arc::new(OperationShared {
                id,
                gate: OperationGate::default(),
                deadline,
                notify: Arc::new(Notify::new()),
                observer: OnceLock::new(),
                token: OnceLock::new(),
                owner: OnceLock::new(),
                hold: Mutex::new(None),
            }),
            kind,
        }
    }

    /// A view with another task kind for its submissions and observer
    /// callbacks, sharing everything else with `self`.
    pub fn with_task_kind(&self, kind: TaskKind) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
            kind,
        }
    }

    /// The task kind of this view's submissions.
    pub fn task_kind(&self) -> TaskKind {
        self.kind
    }

    /// The absolute deadline, if any.
    pub fn deadline(&self) -> Option<std::time::Instant> {
        self.shared.deadline.map(Instant::into_std)
    }

    /// True once [`cancel`](Self::cancel) was called on any view.
    pub fn is_cancelled(&self) -> bool {
        self.shared.gate.is_cancelled()
    }

    /// True once admission is closed (by `close_admission`, `cancel` or
    /// `wait_with_policy`). An expired deadline refuses submissions without
    /// closing admission.
    pub fn is_admission_closed(&self) -> bool {
        self.shared.gate.is_closed()
    }

    /// Closes admission and cancels the operation: every task of it drops
    /// its future at its next poll (outcome `Cancelled`, or `OwnerCancelled`
    /// if the owner was cancelled too). Does not wait.
    pub fn cancel(&self) {
        if self.shared.gate.cancel() {
            self.announce_cancel();
        }
    }

    /// Wakes the tasks of an operation just cancelled and cancels its
    /// token (the first cancellation only).
    pub(crate) fn announce_cancel(&self) {
        let shared = &*self.shared;
        shared.notify.notify_waiters();
        shared.gate.locked(|| {
            if let Some(token) = shared.token.get() {
                token.cancel();
            }
        });
    }

    /// A token cancelled when this operation is cancelled, for code that
    /// runs outside the operation's task wrapper (blocking work, a
    /// `select!` on shutdown).
    ///
    /// It is a *child* token: cancelling it does not cancel the operation
    /// (call [`cancel`](Self::cancel)). The first call allocates the
    /// operation's token; later calls return children of the same one.
    pub fn cancellation_token(&self) -> CancellationToken {
        let shared = &*self.shared;
        let token = shared.token.get().unwrap_or_else(|| {
            // Created under the gate's lock, which `cancel` takes after
            // setting its flag: either `cancel` sees the token or the
            // creation sees the flag.
            shared.gate.locked(|| {
                shared.token.get_or_init(|| {
                    let token = CancellationToken::new();
                    if shared.gate.is_cancelled() {
                        token.cancel();
                    }
                    token
                })
            })
        });
        token.child_token()
    }

    /// Stops new submissions; running tasks continue.
    pub fn close_admission(&self) {
        self.shared.gate.close();
    }

    /// Accepted tasks whose futures are not yet destroyed (or whose outcome
    /// is not yet published).
    pub fn active_task_count(&self) -> usize {
        self.shared.gate.active()
    }

    /// The lifetime outcome counters, in [`OperationOutcome::ALL`] order.
    /// There is no per-task history.
    pub fn outcomes(&self) -> [(OperationOutcome, u64); 6] {
        OperationOutcome::ALL.map(|outcome| {
            (
                outcome,
                self.shared.gate.outcomes[outcome.index()].load(Ordering::Relaxed),
            )
        })
    }

    /// The counter of one outcome.
    pub fn outcome_count(&self, outcome: OperationOutcome) -> u64 {
        self.shared.gate.outcomes[outcome.index()].load(Ordering::Relaxed)
    }

    /// Installs the outcome observer.
    ///
    /// # Errors
    ///
    /// `context_unavailable(SpawnOperation)` once a submission was accepted
    /// or an observer is already installed.
    pub fn set_outcome_observer(
        &self,
        observer: Arc<dyn OperationOutcomeObserver>,
    ) -> RuntimeResult<()> {
        let installed = self
            .shared
            .gate
            .before_first_submission(|| self.shared.observer.set(observer).is_ok());
        if installed == Some(true) {
            Ok(())
        } else {
            Err(RuntimeError::context_unavailable(
                RuntimeOperation::SpawnOperation,
            ))
        }
    }

    pub(crate) fn shared(&self) -> &Arc<OperationShared> {
        &self.shared
    }
}

impl fmt::Debug for OperationContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OperationContext")
            .field("id", &self.shared.id)
            .field("kind", &self.kind)
            .field("deadline", &self.shared.deadline)
            .field("cancelled", &self.shared.gate.is_cancelled())
            .field("admission_closed", &self.shared.gate.is_closed())
            .field("active_tasks", &self.shared.gate.active())
            .finish()
    }
}
