//! Ordered stop: a component that stops after some of its siblings.
//!
//! `component_after("writer", &[&requests])` creates a child group that a
//! shutdown of any ancestor leaves open until `requests` has settled, then
//! shuts down within the same frozen deadline. Without it every component
//! of a shutdown is sealed and cancelled at once, so a writer that drains
//! what the request component queued loses its storage lane while the
//! requests are still being drained.
//!
//! The name follows the specification's vocabulary: a scope is a
//! *component*, created by `component(...)`; `component_after` creates the
//! same thing with the one relation it declares, "stops after these".
//! There are no phase numbers and no per-phase timeouts (Akka's
//! coordinated shutdown sums those), so nothing can extend the frozen
//! deadline.
//!
//! Invariants:
//!
//! 1. An ordered group's predecessors are siblings that existed when it was
//!    created (or closed groups, which are settled already), so the order
//!    is acyclic and a turn never waits on itself.
//! 2. Its cancellation token is its own, not a child of its parent's. A
//!    shutdown of an ancestor seals and cancels the rest of its subtree as
//!    usual and *defers* the ordered group (and its subtree): it stays open
//!    and uncancelled (its tasks run, its lanes admit, spawns into it are
//!    accepted) until every predecessor has its local settlement or the
//!    group's deadline passes. Then comes its turn: its own subtree is
//!    sealed, cancelled and drained like any shutdown, within the same
//!    deadline. There is no per-phase timeout to add up: a predecessor that
//!    uses the whole budget leaves its turn at the deadline, where whatever
//!    still runs is aborted and reported as timed out. This is the one
//!    exception to the seal-first rule of `shutdown.rs` (a shutdown seals
//!    its whole subtree before cancelling it): the ordered subtree is sealed
//!    at its turn.
//! 3. The turn is taken by the shutdown that deferred the group. If that
//!    shutdown's future is dropped before every turn was taken, its drop
//!    seals and cancels the deferred groups at once (their order is lost
//!    with the future), so a dropped shutdown still leaves the whole
//!    subtree sealed and cancelled, as `shutdown.rs` promises; calling the
//!    shutdown again drains it.
//! 4. A plain cancellation of the parent (its token cancelled while it
//!    still admits) reaches the ordered group at once, through the group's
//!    own `stop-order` task ([`STOP_ORDER_TASK`], kind `Shutdown`, counted
//!    in its report like any task): every shutdown seals a group before it
//!    cancels its token, so the task tells the two apart by the parent's
//!    phase, and it ends as soon as either happened (or the group itself
//!    is cancelled), so it never outlives the start of a shutdown.
//! 5. From its seal until its local settlement, the blocking lanes of an
//!    ordered group's subtree keep admitting its running tasks' work (every
//!    wait still bounded by the installed deadline): finishing the work its
//!    predecessors handed it is what it stops after them for. A plain group
//!    refuses lane work once it is closed or cancelled.
//! 6. `shutdown_now` does not order: it seals, cancels and aborts ordered
//!    groups with the rest.

use tokio_util::sync::CancellationToken;

use crate::error::{
    RuntimeContractPolicy, RuntimeContractViolation, RuntimeError, RuntimeOperation,
};
use crate::loom::Arc;
use crate::shutdown_deadline::ShutdownDeadline;
use crate::task_group::gate::{CLOSED, CLOSING, OPEN};
use crate::task_group::{GroupInner, TaskGroup};
use crate::task_identity::TaskKind;
use crate::wait::{notified, wait_for, Expiry};

/// The name of an ordered group's own task (invariants 3 and 4).
pub(crate) const STOP_ORDER_TASK: &str = "stop-order";

/// Why an ordered child was not created.
#[derive(Debug)]
enum ChildAfterError {
    /// A predecessor is not a child of this group (nor a closed group).
    NotSibling,
    /// This group no longer admits children.
    Refused(RuntimeError),
}

impl TaskGroup {
    /// Creates a child that stops after `after` (see the module docs).
    ///
    /// Each of `after` must be a child of this group or a closed group.
    #[track_caller]
    fn try_child_after(
        &self,
        name: Arc<str>,
        after: &[&TaskGroup],
    ) -> Result<TaskGroup, ChildAfterError> {
        let sibling = |group: &&TaskGroup| match &group.inner.parent {
            Some(parent) => Arc::ptr_eq(parent, &self.inner),
            None => !group.inner.tree_root,
        };
        if !after.iter().all(sibling) {
            return Err(ChildAfterError::NotSibling);
        }
        let mut child = GroupInner::new(
            name,
            Some(Arc::clone(&self.inner)),
            Arc::clone(&self.inner.tree),
            CancellationToken::new(),
            OPEN,
            self.inner.deadline(),
        );
        child.stop_after = after
            .iter()
            .map(|group| Arc::downgrade(&group.inner))
            .collect();
        child.finishes = true;
        let child = self
            .register(child, RuntimeOperation::CreateTaskGroupChild)
            .map_err(ChildAfterError::Refused)?;
        if self.inner.token.is_cancelled() {
            // Invariant 4: a cancelled parent that still admits children
            // was cancelled plainly; a child token would be born cancelled.
            child.inner.token.cancel();
        }
        let watch = stop_order(Arc::clone(&self.inner), child.inner.token.clone());
        child
            .spawn(STOP_ORDER_TASK, TaskKind::Shutdown, watch)
            .map_err(ChildAfterError::Refused)?;
        Ok(child)
    }

    /// [`try_child_after`](Self::try_child_after), or a closed group if
    /// this group no longer admits children (counted like
    /// [`component`](Self::component)'s closed answers).
    ///
    /// # Errors
    ///
    /// [`RuntimeContractPolicy::StopOrderAmongSiblings`] when a predecessor
    /// is not a child of this group.
    #[track_caller]
    pub(crate) fn component_after(
        &self,
        name: Arc<str>,
        after: &[&TaskGroup],
    ) -> Result<TaskGroup, RuntimeContractViolation> {
        match self.try_child_after(Arc::clone(&name), after) {
            Ok(child) => Ok(child),
            Err(ChildAfterError::Refused(error)) => Ok(self.closed_component(name, &error)),
            Err(ChildAfterError::NotSibling) => {
                Err(RuntimeContractViolation::InvalidConfiguration {
                    policy: RuntimeContractPolicy::StopOrderAmongSiblings,
                })
            }
        }
    }

    /// Whether this group's lanes admit its running tasks' work past its
    /// seal (invariant 5): it is in an ordered subtree, sealed, and not yet
    /// settled.
    pub(crate) fn finishing(&self) -> bool {
        self.inner.finishes && matches!(self.inner.gate.phase(), CLOSING | CLOSED)
    }

    /// Resolves once this group has its local settlement (its tasks and
    /// children settled by a shutdown).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    pub(crate) async fn settled_locally(&self) {
        let inner = &self.inner;
        notified(&inner.local_settled, || inner.local.get().map(drop)).await;
    }
}

impl GroupInner {
    /// Whether this group stops after siblings (invariant 2).
    pub(super) fn is_ordered(&self) -> bool {
        !self.stop_after.is_empty()
    }

    /// Waits until every predecessor has its local settlement, or until
    /// this group's deadline passes (re-read when it tightens).
    pub(super) async fn await_turn(&self) {
        for predecessor in self.stop_after.iter() {
            let Some(predecessor) = predecessor.upgrade() else {
                // Released: its tasks settled and its evidence went to the
                // parent.
                continue;
            };
            loop {
                let deadline = self.deadline();
                let expiry = deadline.map(|deadline| Expiry {
                    deadline: ShutdownDeadline::from_tokio(deadline),
                    runtime: Some(self.tree.handle()),
                });
                let woken = wait_for(
                    &predecessor.local_settled,
                    Some(&self.deadline_changed),
                    expiry,
                    || {
                        if predecessor.local.get().is_some() {
                            Some(true)
                        } else if self.deadline() != deadline {
                            Some(false)
                        } else {
                            None
                        }
                    },
                )
                .await;
                match woken {
                    Some(true) => break,
                    Some(false) => continue,
                    // The deadline passed: the turn comes now.
                    None => return,
                }
            }
        }
    }
}

/// The `stop-order` task of an ordered group (invariant 4): forwards a
/// plain cancellation of the parent at once; ends when the group is
/// cancelled or a shutdown sealed the parent (that shutdown takes the
/// group's turn).
async fn stop_order(parent: Arc<GroupInner>, own: CancellationToken) {
    tokio::select! {
        biased;
        () = own.cancelled() => {}
        () = parent.token.cancelled() => {
            if parent.gate.phase() == OPEN {
                own.cancel();
            }
        }
    }
}
