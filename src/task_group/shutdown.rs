//! Shutdown coordination: deadlines, sealing, draining and cached reports.
//!
//! `shutdown_until(deadline)` on a group:
//!
//! 1. synchronously, at the call (before the returned future is polled),
//!    installs `earliest(existing, deadline)` on the whole subtree: deadlines
//!    only tighten;
//! 2. returns the cached report if this group already has one;
//! 3. seals: iteratively moves every group of the accepted subtree
//!    `OPEN → CLOSING` under its gate, collecting strong references (the
//!    subtree is retained), except ordered children (`component_after`),
//!    which are deferred with their subtrees (see `stop_order.rs`);
//!    re-installs the parent's deadline on each sealed child (children
//!    created between steps 1 and 3); cancels the group's token (reaching
//!    every child token, not an ordered child's own); moves every sealed
//!    group to `CLOSED`;
//! 4. drives every sealed group concurrently in one flat `join_all` (no
//!    recursion): a group waits until its table is empty, its deadline
//!    changes or its deadline passes; at the deadline it aborts everything
//!    still registered (marked as deadline aborts, in place under the table
//!    lock, 256 records per lock hold, while the aborted tasks settle
//!    concurrently on their settle locks) and yields a bounded number of
//!    times (`ABORT_CONFIRMATION_YIELDS`, scheduling slack, never a timer)
//!    for the aborts to be confirmed; then it waits for each child's local
//!    settlement and settles locally into a [`LocalSettlement`] (counters, at
//!    most 64 listed leaked records, annotations; state `ShutdownCompleted`,
//!    phase `COMPLETED`). A child therefore completes independently of its
//!    parent's own tasks;
//!    concurrently, every deferred group waits for its turn (the local
//!    settlement of the siblings it stops after, or the deadline) and then
//!    shuts down its own subtree the same way, within the same deadline;
//!    its parent's step 4 waits for it like for any child;
//! 5. builds the nested report from the local settlements iteratively and
//!    caches it on the group.
//!
//! `shutdown_now` performs steps 2 and 3 without deferring ordered
//! children, aborts every record, settles bottom-up (reverse pre-order) and
//! caches, without waiting.
//!
//! Invariants:
//!
//! 1. Deadlines only tighten, and a shutdown's deadline is installed at the
//!    call, so a dropped shutdown future still bounded the subtree.
//! 2. Every step is idempotent, and the first local settlement and the first
//!    report of a group are cached (`OnceLock`): concurrent or repeated calls
//!    (including after a dropped shutdown future) converge on one identical
//!    report. A shutdown future dropped before its deferred groups' turns
//!    seals and cancels them as it drops, so the whole subtree is left
//!    sealed and cancelled either way.
//! 3. Leak and unconfirmed-abort counts come from the table length and a gate
//!    counter, so a report never scans the whole table: listing 64 remaining
//!    tasks costs 64 snapshots.
//! 4. A task aborted by the deadline counts as `timed_out` only if the abort
//!    ended it: a task that completed while the abort raced it is just
//!    completed.
//! 5. Settled evidence is taken apart without recursion: a group holds its
//!    [`LocalSettlement`] (which references its children's) and the root its
//!    cached nested report; `Drop for LocalSettlement` and the report's own
//!    `Drop` free them with an explicit stack, so a shut-down 4,096-deep
//!    chain is freed on a 1 MiB stack too.
//! 6. The tree root's cached report also carries the tree-wide blocking
//!    evidence and the recorded shutdown reason (`TreeShared` in
//!    `task_group.rs`).

use std::time::Duration;

use futures::future::BoxFuture;
use tokio::time::Instant;

use crate::loom::Arc;
use crate::shutdown_deadline::ShutdownDeadline;
use crate::shutdown_report::{ReleasedGroup, ShutdownReport, TaskSnapshot};
use crate::task_group::gate::{ListedTask, Stragglers, CLOSED, COMPLETED};
use crate::task_group::{GroupInner, TaskGroup};
use crate::task_identity::{TaskGroupEventCounts, TaskId, TaskState};
use crate::wait::{notified, wait_for, Expiry, Watch};

/// How many times a drain yields to let aborted futures be destroyed after
/// the deadline: scheduling slack, never a timer.
const ABORT_CONFIRMATION_YIELDS: usize = 16;

/// One group's settled evidence, without its children's counters.
#[derive(Debug)]
pub(crate) struct LocalSettlement {
    report: ShutdownReport,
    children: Vec<Arc<LocalSettlement>>,
}

/// A settled 4,096-deep chain is freed without recursing: each settlement
/// this drop owns last hands its children to one explicit stack.
impl Drop for LocalSettlement {
    fn drop(&mut self) {
        let mut stack = std::mem::take(&mut self.children);
        while let Some(child) = stack.pop() {
            if let Ok(mut owned) = Arc::try_unwrap(child) {
                stack.append(&mut owned.children);
            }
        }
    }
}

impl LocalSettlement {
    pub(crate) fn empty(report: ShutdownReport) -> Self {
        Self {
            report,
            children: Vec::new(),
        }
    }
}

impl GroupInner {
    /// Installs `earliest(existing, deadline)` on this group.
    pub(super) fn tighten(&self, deadline: Instant) {
        let mut current = self.deadline.lock();
        if current.is_none_or(|existing| deadline < existing) {
            *current = Some(deadline);
            drop(current);
            self.deadline_changed.notify_waiters();
        }
    }

    /// Installs a deadline on this group and every live descendant.
    fn tighten_subtree(self: &Arc<Self>, deadline: Instant) {
        let mut stack = vec![Arc::clone(self)];
        while let Some(group) = stack.pop() {
            group.tighten(deadline);
            stack.extend(group.gate.live_children());
        }
    }

    /// Waits until this group's own tasks settled or its deadline passed;
    /// then aborts what remains and returns those tasks (the first
    /// `REMAINING_TASKS_LIMIT` by name).
    async fn drain_local(&self) -> Stragglers {
        if self.local.get().is_some() {
            return Stragglers::default();
        }
        let _watch = Watch::new(&self.idle_watchers);
        /// Why a wait for idleness ended.
        enum Woken {
            Idle,
            /// The deadline tightened: wait again with the new one.
            DeadlineChanged,
        }
        loop {
            // No deadline cannot happen through the public paths: then the
            // wait is for idleness or a deadline.
            let deadline = self.deadline();
            let expiry = deadline.map(|deadline| Expiry {
                deadline: ShutdownDeadline::from_tokio(deadline),
                // On the owner's runtime: a shutdown polled by another
                // executor (or none) still has a timer.
                runtime: Some(self.tree.handle()),
            });
            let woken = wait_for(&self.idle, Some(&self.deadline_changed), expiry, || {
                if self.gate.len() == 0 {
                    Some(Woken::Idle)
                } else if self.deadline() != deadline {
                    Some(Woken::DeadlineChanged)
                } else {
                    None
                }
            })
            .await;
            match woken {
                Some(Woken::Idle) => return Stragglers::default(),
                Some(Woken::DeadlineChanged) => continue,
                None => break,
            }
        }
        let stragglers = self
            .gate
            .abort_at_deadline(ShutdownReport::REMAINING_TASKS_LIMIT);
        for _ in 0..ABORT_CONFIRMATION_YIELDS {
            if self.gate.len() == 0 {
                break;
            }
            tokio::task::yield_now().await;
        }
        stragglers
    }

    /// Waits until every live child has its local settlement and every
    /// child being dropped has folded its evidence in (`task_group.rs`,
    /// invariant 7: a `Drop` never waits, so this wait is short).
    async fn await_children_settled(&self) {
        notified(&self.child_released, || {
            (!self.gate.has_dropping_child()).then_some(())
        })
        .await;
        for child in self.gate.live_children() {
            notified(&child.local_settled, || child.local.get().map(drop)).await;
        }
    }

    /// Caches this group's local settlement (children must be settled) and
    /// marks it `ShutdownCompleted`.
    fn settle_local(&self, elapsed: Duration, stragglers: Stragglers) -> Arc<LocalSettlement> {
        let settlement = self.local.get_or_init(|| {
            let children = self
                .gate
                .live_children()
                .iter()
                .filter_map(|child| child.local.get().cloned())
                .collect();
            Arc::new(LocalSettlement {
                report: self.local_report(elapsed, stragglers),
                children,
            })
        });
        self.gate.advance(COMPLETED);
        self.local_settled.notify_waiters();
        Arc::clone(settlement)
    }

    /// A listed task of this group as a report snapshot in `state`, its
    /// age taken at `now`.
    fn task_snapshot(&self, task: ListedTask, state: TaskState, now: Instant) -> TaskSnapshot {
        TaskSnapshot {
            id: TaskId::new(self.id, task.seq, task.slot),
            name: task.name,
            group_id: self.id,
            group_name: Arc::clone(&self.name),
            kind: task.kind,
            state,
            elapsed: task.started.map_or(Duration::ZERO, |started| {
                now.saturating_duration_since(started)
            }),
        }
    }

    fn local_report(&self, elapsed: Duration, stragglers: Stragglers) -> ShutdownReport {
        let mut report = ShutdownReport::new(self.name.to_string(), elapsed);
        let now = Instant::now();
        report.timed_out_tasks_omitted = stragglers.total - stragglers.listed.len();
        report.timed_out_tasks = stragglers
            .listed
            .into_iter()
            .map(|task| self.task_snapshot(task, TaskState::Aborted, now))
            .collect();
        // Only the listed records are copied: the counts come from the
        // shard counters and table lengths, so a report of 10,000 leaked
        // tasks costs 64 snapshots, not a scan.
        let snapshot = self.gate.snapshot(ShutdownReport::REMAINING_TASKS_LIMIT);
        let counters = snapshot.counters;
        for task in snapshot.listed {
            report.push_remaining(self.task_snapshot(task, TaskState::Leaked, now));
        }
        report.leaked = snapshot.live;
        report.remaining_tasks_omitted = snapshot.live - report.remaining_tasks.len();
        let unconfirmed_aborts = counters.live_abort_requested;
        report.completed = counters.completed;
        report.cancelled = counters.cancelled;
        report.aborted = counters.aborted;
        report.panicked = counters.panicked;
        report.failed = counters.failed;
        report.timed_out = counters.deadline_aborted_settled + report.leaked;
        if counters.deadline_aborted_settled > 0 {
            report.annotate(format!(
                "confirmed cancellation of {} aborted tasks",
                counters.deadline_aborted_settled
            ));
        }
        if unconfirmed_aborts > 0 {
            report.annotate(format!(
                "abort requested for {unconfirmed_aborts} tasks whose destruction is not yet confirmed"
            ));
        }
        let closed_component_requests = self.gate.closed_component_requests();
        if closed_component_requests > 0 {
            report.annotate(format!(
                "{closed_component_requests} component requests after admission closed received closed groups"
            ));
        }
        report.events = self.events();
        report.failures = snapshot.failures;
        report.failures_omitted = snapshot.failures_omitted;
        let released = self.gate.released();
        report.released = released.entries;
        report.released_omitted = released.omitted;
        report
    }

    /// This group's own events: its poisoning and the closed groups it
    /// handed to `component` requests.
    fn events(&self) -> TaskGroupEventCounts {
        TaskGroupEventCounts {
            poisoned_groups: u64::from(self.gate.is_poisoned()),
            closed_component_requests: self.gate.closed_component_requests(),
        }
    }

    /// What this group leaves in its parent when it is dropped
    /// (`task_group.rs`, invariant 7): its settled counters, events, named
    /// failures, and its own released children summed in.
    pub(super) fn released_evidence(&self) -> ReleasedGroup {
        let snapshot = self.gate.snapshot(0);
        let counters = snapshot.counters;
        let mut evidence = self.gate.released().total();
        let own = ReleasedGroup {
            name: self.name.to_string(),
            groups: 1,
            completed: counters.completed,
            cancelled: counters.cancelled,
            aborted: counters.aborted,
            failed: counters.failed,
            panicked: counters.panicked,
            timed_out: counters.deadline_aborted_settled,
            events: self.events(),
            failures: snapshot.failures,
            failures_omitted: snapshot.failures_omitted,
        };
        // Its own failures first, then its descendants'.
        let descendants = std::mem::replace(&mut evidence, own);
        evidence.absorb(&descendants);
        evidence
    }
}

/// A subtree closed by [`close_subtree`].
struct Closed {
    /// Sealed, cancelled and closed, in pre-order (every parent before its
    /// children); retained until the report is built.
    sealed: Vec<Arc<GroupInner>>,
    /// Ordered children left open for their turn (`stop_order.rs`).
    deferred: Vec<Arc<GroupInner>>,
}

/// Seals the accepted subtree of `root`, leaving ordered children (and
/// their subtrees) open when `defer_ordered` (see `stop_order.rs`).
fn seal_subtree(root: &Arc<GroupInner>, defer_ordered: bool) -> Closed {
    let mut closed = Closed {
        sealed: Vec::new(),
        deferred: Vec::new(),
    };
    let mut stack = vec![Arc::clone(root)];
    while let Some(group) = stack.pop() {
        for child in group.gate.seal() {
            if defer_ordered && child.is_ordered() {
                closed.deferred.push(child);
            } else {
                stack.push(child);
            }
        }
        closed.sealed.push(group);
    }
    closed
}

/// Builds the nested report from cached settlements without recursion.
fn build_report(root: &Arc<LocalSettlement>) -> ShutdownReport {
    let mut stack: Vec<(&LocalSettlement, usize, ShutdownReport)> =
        vec![(root, 0, root.report.clone())];
    loop {
        let Some(top) = stack.last_mut() else {
            unreachable!("the root frame is popped last");
        };
        if let Some(child) = top.0.children.get(top.1) {
            top.1 += 1;
            stack.push((child, 0, child.report.clone()));
            continue;
        }
        let Some((_, _, report)) = stack.pop() else {
            unreachable!("a frame was just inspected");
        };
        match stack.last_mut() {
            Some(parent) => parent.2.children.push(report),
            None => return report,
        }
    }
}

/// Closes the deferred groups of a shutdown whose future is dropped before
/// their turns were taken (`stop_order.rs`, invariant 3): the dropped
/// shutdown leaves its whole subtree sealed and cancelled.
struct DeferredGuard<'a> {
    groups: &'a [Arc<GroupInner>],
    /// False once every turn was taken.
    armed: bool,
}

impl Drop for DeferredGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            for group in self.groups {
                close_subtree(group, false);
            }
        }
    }
}

/// Seals, cancels and closes the subtree of `root` (step 3 of the module
/// docs), deferring ordered children when `defer_ordered`.
fn close_subtree(root: &Arc<GroupInner>, defer_ordered: bool) -> Closed {
    let closed = seal_subtree(root, defer_ordered);
    for group in &closed.sealed {
        if let Some(parent) = &group.parent {
            if let Some(deadline) = parent.deadline() {
                group.tighten(deadline);
            }
        }
    }
    // No supervised service of the subtree restarts from here on.
    root.tree.close_services_within(root.id);
    root.token.cancel();
    // An ordered group's token is its own: cancelled with its subtree
    // (only when not deferred).
    for group in closed.sealed.iter().filter(|group| group.is_ordered()) {
        group.token.cancel();
    }
    for group in &closed.sealed {
        group.gate.advance(CLOSED);
    }
    closed
}

/// Caches (or returns) the report of `root`, whose subtree is settled.
fn cache_report(root: &Arc<GroupInner>, started: Instant) -> ShutdownReport {
    let settlement = root.settle_local(started.elapsed(), Stragglers::default());
    root.report
        .get_or_init(|| {
            let mut report = build_report(&settlement);
            // The report's top node carries the evidence of the supervised
            // services of its subtree, dropped groups' included.
            root.tree.merge_services(root.id, &mut report);
            // The tree owner's report carries the blocking evidence of the
            // managed lanes and every isolated executor of the tree.
            if root.tree_root {
                root.tree.merge_blocking(&mut report);
                root.tree.merge_shutdown_reason(&mut report);
            }
            report
        })
        .clone()
}

impl TaskGroup {
    /// Shuts the group down within `timeout`, converted once to an absolute
    /// deadline; see [`shutdown_until`](Self::shutdown_until).
    ///
    /// # Cancel safety
    ///
    /// As [`shutdown_until`](Self::shutdown_until).
    pub fn shutdown(&self, timeout: Duration) -> BoxFuture<'_, ShutdownReport> {
        self.shutdown_until(ShutdownDeadline::after(timeout))
    }

    /// Closes admission, cancels, and waits for the subtree until `deadline`.
    ///
    /// The deadline is installed on the whole subtree when this is called,
    /// even if the returned future is never polled; it only ever tightens an
    /// existing deadline. Child groups shut down concurrently with each other
    /// and with this group's own tasks, except a component created with
    /// [`component_after`](crate::ChildServiceContext::component_after):
    /// it stays open until the components it stops after have settled, then
    /// shuts down within the same deadline. At the deadline the remaining tasks
    /// are aborted and counted in `timed_out`; the future never waits past
    /// the deadline beyond scheduling slack. The first report is cached:
    /// every later call returns the same report.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: every step is idempotent. Dropping the future leaves the
    /// group and its subtree sealed and cancelled (ordered components still
    /// waiting for their turn included); calling again resumes and
    /// completes.
    pub fn shutdown_until(&self, deadline: ShutdownDeadline) -> BoxFuture<'_, ShutdownReport> {
        self.inner.tighten_subtree(deadline.tokio_instant());
        Box::pin(async move {
            let root = &self.inner;
            if let Some(report) = root.report.get() {
                return report.clone();
            }
            let started = Instant::now();
            let closed = close_subtree(root, true);
            let drains = futures::future::join_all(closed.sealed.iter().map(|group| async move {
                let stragglers = group.drain_local().await;
                group.await_children_settled().await;
                group.settle_local(started.elapsed(), stragglers);
            }));
            // Ordered groups shut down at their turn, within the same
            // deadline; their parents' drains wait for them. Dropped before
            // every turn was taken, the guard closes them at once.
            let mut deferred = DeferredGuard {
                groups: &closed.deferred,
                armed: true,
            };
            let turns = futures::future::join_all(closed.deferred.iter().map(|group| async move {
                group.await_turn().await;
                let group = TaskGroup {
                    inner: Arc::clone(group),
                };
                // Its report is cached in the group and read by the
                // parent's, which this shutdown returns.
                let _cached = group.shutdown_until(deadline).await;
            }));
            futures::future::join(drains, turns).await;
            deferred.armed = false;
            if root.tree_root && root.report.get().is_none() {
                // The tree's blocking closures are evidence only if they
                // outlive the deadline, not if they were exiting.
                let deadline = root
                    .deadline()
                    .map_or(deadline, ShutdownDeadline::from_tokio);
                root.tree.await_blocking_exits(deadline).await;
            }
            cache_report(root, started)
        })
    }

    /// Closes, cancels and aborts the whole subtree without waiting.
    ///
    /// Tasks whose futures are not yet destroyed appear as `leaked` (and so
    /// `timed_out`); this report is not proof that cleanup ran, and a child
    /// group being dropped on another thread at this instant may leave its
    /// `released` evidence after the report. It is cached like a graceful
    /// report.
    pub fn shutdown_now(&self) -> ShutdownReport {
        let root = &self.inner;
        if let Some(report) = root.report.get() {
            return report.clone();
        }
        let started = Instant::now();
        let sealed = close_subtree(root, false).sealed;
        for group in &sealed {
            if group.local.get().is_none() {
                group.gate.abort_matching(false, None);
            }
        }
        // Reverse pre-order: every child settles before its parent.
        for group in sealed.iter().rev() {
            group.settle_local(started.elapsed(), Stragglers::default());
        }
        cache_report(root, started)
    }
}
