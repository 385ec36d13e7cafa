//! Settlement: destroy the future, account the result, publish completion.
//!
//! Every tracked future runs inside [`Tracked`], one wrapper for every task
//! kind: the inner future is polled with a reference to its settlement ticket
//! ([`TrackedFuture`]), and the ticket ([`Settle`]) decides what "account,
//! then publish" means (a plain task: its group; an operation task: the
//! group, then the operation).
//!
//! Invariants:
//!
//! 1. Whatever ends the task (return, panic, abort, runtime teardown), the
//!    same order holds, exactly once per task:
//!    1. the user future is destroyed in place (`Pin::set(None)`, inside
//!       `catch_unwind`);
//!    2. the result is published on the spawn gate's settlement side (a
//!       panic while the group is open poisons it once; the record is removed
//!       and counted when the pending list is applied, which every reader
//!       does first);
//!    3. idle and per-task waiters (shutdown, `wait_task`) are notified, only
//!       when someone watches; a poisoning is logged and counted tree-wide;
//!       a poll panic is then resumed, so Tokio reports it through the
//!       task's join handle.
//! 2. So a task whose destructor is still running is still registered, and a
//!    counter is never published before the future it describes is gone.
//! 3. A panic in the destructor (after the future returned, or while an abort
//!    drops it) is counted `Panicked` like a panic in `poll`, and is resumed
//!    after the settlement, so the task's `JoinHandle` reports it
//!    (`JoinError::is_panic`) in both cases: Tokio catches a panic of an
//!    aborted task's drop as it catches one of its poll. A destructor panic
//!    while the thread is already unwinding is not resumed (that would abort
//!    the process); it is still counted.
//! 4. A wrapper reads what its ticket already holds (the owner group, an
//!    operation) instead of cloning it into the task, so a task holds one
//!    reference, not one per layer.
//! 5. The ticket's slot word keeps the slot in its low 28 bits and its own
//!    flags above them: `STAMPED` records that a group task's start time was
//!    published at its first `Pending` (see the gate's stamps). A flag in the
//!    wrapper instead would grow the task's Tokio cell; with the slot and the
//!    sequence's low 32 bits, a plain task's ticket is 16 bytes, which keeps a
//!    trivial task's cell in the 128-byte size class.
//! 6. The wrappers are projected with `pin-project-lite` (already in
//!    Tokio's dependency tree), so the crate keeps `unsafe_code = "deny"`.

use std::future::Future;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tokio_util::sync::WaitForCancellationFutureOwned;

use crate::loom::Arc;
use crate::shutdown_report::panic_message;
use crate::task_group::gate::SHARDS;
use crate::task_group::registry::{SeqCheck, MAX_SLOTS};
use crate::task_group::GroupInner;
use crate::task_identity::TaskEnd;

/// How a tracked future ended, decided by [`Tracked`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending<T> {
    /// The future returned this value and was destroyed cleanly.
    Returned(T),
    /// The future panicked while polled or while destroyed.
    Panicked,
    /// The future was destroyed before it returned (abort, runtime teardown).
    Aborted,
}

impl<T> Ending<T> {
    /// The returned value, or the value standing for a panic or an abort.
    pub(crate) fn resolve(self, panicked: T, aborted: T) -> T {
        match self {
            Self::Returned(value) => value,
            Self::Panicked => panicked,
            Self::Aborted => aborted,
        }
    }
}

/// What runs once a tracked future is destroyed: account, then publish.
pub(crate) trait Settle {
    /// The value the wrapped future returns.
    type Output;

    fn finish(self, ending: Ending<Self::Output>);

    /// Called after every poll that returned `Pending` (a task that
    /// completes in its first poll never calls it).
    fn on_pending(&mut self) {}

    /// Called with a panic's message (bounded, escaped) right before
    /// `finish(Ending::Panicked)`.
    fn on_panic(&self, _message: String) {}
}

/// A future run inside [`Tracked`]: polled with a reference to its own
/// settlement ticket, so a wrapper reads what the ticket already holds (the
/// owner group, an operation) without cloning it into the task.
pub(crate) trait TrackedFuture<S: Settle> {
    fn poll_tracked(self: Pin<&mut Self>, settlement: &S, cx: &mut Context<'_>) -> Poll<S::Output>;
}

/// Where a registered task's record is: its slot and the low bits of its
/// sequence (see [`SeqCheck`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ticket {
    pub(crate) slot: u32,
    pub(crate) check: SeqCheck,
}

/// A gate slot (shard-local slot and shard index) fits in the low
/// `SLOT_BITS` bits of a `u32`; a ticket keeps its own flags above them, so
/// that it stays 16 bytes and adds nothing to the task's Tokio cell.
const SLOT_BITS: u32 = 28;
/// The slot bits of a ticket's slot word.
const SLOT_MASK: u32 = (1 << SLOT_BITS) - 1;
const _: () = assert!((MAX_SLOTS as u64) * (SHARDS as u64) <= 1 << SLOT_BITS);
/// Set in a group task's slot word once its start time was published.
const STAMPED: u32 = 1 << 31;

/// The settlement ticket of one registered task: its group and where its
/// record is (the ticket's `slot` also carries the `STAMPED` flag).
#[derive(Debug)]
pub(crate) struct Settlement {
    pub(crate) group: Arc<GroupInner>,
    ticket: Ticket,
}

impl Settlement {
    /// The ticket of a task of `group` (holds a reference to the group).
    pub(crate) fn new(group: &Arc<GroupInner>, ticket: Ticket) -> Self {
        Self {
            group: Arc::clone(group),
            ticket,
        }
    }
}

impl Settle for Settlement {
    type Output = TaskEnd;

    fn on_panic(&self, message: String) {
        let Ticket { slot, check } = self.ticket;
        self.group.gate.note_panic(slot & SLOT_MASK, check, message);
    }

    fn finish(self, ending: Ending<TaskEnd>) {
        let result = ending.resolve(TaskEnd::Panicked, TaskEnd::Aborted);
        let Ticket { slot, check } = self.ticket;
        self.group.settle(slot & SLOT_MASK, check, result);
    }

    /// A group task's start time is read at its first `Pending`, on the
    /// worker that polls it, not by the submitting thread: a task that
    /// completes in its first poll never needs one (see
    /// `TaskInfo::started`). The ticket remembers that it published it.
    fn on_pending(&mut self) {
        let ticket = &mut self.ticket;
        if ticket.slot & STAMPED == 0 {
            ticket.slot |= STAMPED;
            self.group.stamp(ticket.slot & SLOT_MASK, ticket.check);
        }
    }
}

pin_project! {
    /// A tracked task: the user future plus its settlement ticket.
    pub(crate) struct Tracked<F, S: Settle> {
        #[pin]
        future: Option<F>,
        settlement: Option<S>,
    }

    impl<F, S: Settle> PinnedDrop for Tracked<F, S> {
        fn drop(this: Pin<&mut Self>) {
            let mut this = this.project();
            if let Some(settlement) = this.settlement.take() {
                // Dropped before completing: aborted, or the runtime shut down.
                match catch_unwind(AssertUnwindSafe(|| this.future.set(None))) {
                    Ok(()) => settlement.finish(Ending::Aborted),
                    Err(payload) => {
                        settlement.on_panic(panic_message(payload.as_ref()));
                        settlement.finish(Ending::Panicked);
                        if !std::thread::panicking() {
                            resume_unwind(payload);
                        }
                    }
                }
            }
        }
    }
}

impl<F, S: Settle> Tracked<F, S> {
    pub(crate) fn new(future: F, settlement: S) -> Self {
        Self {
            future: Some(future),
            settlement: Some(settlement),
        }
    }
}

impl<F, S> Future for Tracked<F, S>
where
    F: TrackedFuture<S>,
    S: Settle,
{
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut this = self.project();
        let (Some(future), Some(settlement)) =
            (this.future.as_mut().as_pin_mut(), this.settlement.as_ref())
        else {
            return Poll::Ready(());
        };
        let polled = catch_unwind(AssertUnwindSafe(|| future.poll_tracked(settlement, cx)));
        let (returned, payload) = match polled {
            Ok(Poll::Pending) => {
                if let Some(settlement) = this.settlement.as_mut() {
                    settlement.on_pending();
                }
                return Poll::Pending;
            }
            Ok(Poll::Ready(value)) => (Some(value), None),
            Err(payload) => (None, Some(payload)),
        };
        let destroyed = catch_unwind(AssertUnwindSafe(|| this.future.set(None)));
        let (ending, payload) = match (returned, destroyed) {
            (Some(value), Ok(())) => (Ending::Returned(value), None),
            // A poll panic is the one reported; a destructor panic after
            // it is dropped.
            (_, destroyed) => (Ending::Panicked, payload.or(destroyed.err())),
        };
        if let Some(settlement) = this.settlement.take() {
            if let Some(payload) = &payload {
                settlement.on_panic(panic_message(payload.as_ref()));
            }
            settlement.finish(ending);
        }
        if let Some(payload) = payload {
            // Settled; let Tokio record the panic for a join handle.
            resume_unwind(payload);
        }
        Poll::Ready(())
    }
}

pin_project! {
    /// A plain task: completion is `Completed`.
    pub(crate) struct Plain<F> {
        #[pin]
        future: F,
    }
}

impl<F> Plain<F> {
    pub(crate) fn new(future: F) -> Self {
        Self { future }
    }
}

impl<F, S> TrackedFuture<S> for Plain<F>
where
    F: Future<Output = ()>,
    S: Settle<Output = TaskEnd>,
{
    fn poll_tracked(self: Pin<&mut Self>, _: &S, cx: &mut Context<'_>) -> Poll<TaskEnd> {
        self.project().future.poll(cx).map(|()| TaskEnd::Completed)
    }
}

pin_project! {
    /// A service dropped when its owner is cancelled (owner branch first).
    pub(crate) struct UntilCancelled<F> {
        #[pin]
        cancelled: WaitForCancellationFutureOwned,
        #[pin]
        future: F,
    }
}

impl<F> UntilCancelled<F> {
    pub(crate) fn new(cancelled: WaitForCancellationFutureOwned, future: F) -> Self {
        Self { cancelled, future }
    }
}

impl<F, S> TrackedFuture<S> for UntilCancelled<F>
where
    F: Future<Output = ()>,
    S: Settle<Output = TaskEnd>,
{
    fn poll_tracked(self: Pin<&mut Self>, _: &S, cx: &mut Context<'_>) -> Poll<TaskEnd> {
        let this = self.project();
        if this.cancelled.poll(cx).is_ready() {
            return Poll::Ready(TaskEnd::Cancelled);
        }
        this.future.poll(cx).map(|()| TaskEnd::Completed)
    }
}
