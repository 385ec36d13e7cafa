//! Task groups: the task-ownership tree.
//!
//! A [`TaskGroup`] tracks the tasks it accepted until their futures are
//! destroyed, owns its child groups through weak links, and shuts its whole
//! subtree down within one absolute deadline, leaving a cached
//! [`ShutdownReport`](crate::ShutdownReport).
//!
//! State owners (one each; the numbered invariants are in each file):
//!
//! | State | File | Invariant |
//! | --- | --- | --- |
//! | admission phase, task tables, pending settlements, child links | `task_group/gate.rs` | a submission is registered before the seal or rejected; every reader applies pending settlements first |
//! | task records | `task_group/registry.rs` | O(1) slab in chunks that never move; a sequence number is never reused |
//! | spawn paths | `task_group/submission.rs` | the Tokio handoff happens after the gate; an abort requested before the handle is installed is honoured |
//! | settlement | `task_group/completion.rs` | destroy the future → publish → notify, exactly once per task |
//! | deadlines, seal, reports | `task_group/shutdown.rs` | deadlines only tighten; the first report is cached |
//! | diagnostic walks (tally, bounded details) | `task_group/diagnostics.rs` | the detail walk examines at most its scan budget of task entries and of child entries |
//! | ids, names, kinds | `task_identity.rs` (below the tree and its reports) | a `TaskId` is equal only to an id of the same group and task |
//! | tree-wide counters, Tokio handle, blocking tables, shutdown reason | `TreeShared` (this file) | see below |
//!
//! Invariants of this file:
//!
//! 1. `TreeShared` is shared by every group of one ownership tree (one owner
//!    or harness). Its event counters only grow; the first closed-component
//!    answer per tree is logged, later ones only counted.
//! 2. The shutdown reason is set once (first recorded wins: a started
//!    `ServiceLifecycle`'s first shutdown request, recorded by whichever of
//!    the request and `start` comes second) and copied only into the tree
//!    root's report, and only if that report has none.
//! 3. Blocking evidence: every managed lane's table and every isolated
//!    executor's table is registered (weakly) with the tree, as a
//!    [`BlockingEvidence`] (the tree knows no blocking type: the blocking
//!    tables implement this trait); the tree root's cached report merges
//!    every live registered table that still has closures running, so such
//!    a report is unhealthy.
//! 4. Creating a child (`try_child`) reads the parent's deadline, creates the
//!    child with a child token, registers it under the parent's child-link
//!    lock, then re-reads the parent's deadline: a `shutdown_until` that
//!    tightened the parent in between either saw the child (and tightened
//!    it) or installed its deadline before the re-read (ordered through the
//!    child-link lock).
//! 5. A group holds a strong reference to its parent and is held weakly by
//!    it. Its `Drop` unregisters the child link and releases the parent
//!    through a thread-local trampoline, so dropping a 4,096-deep chain never
//!    recurses. The trampoline uses `try_with`: during thread-local teardown
//!    (a context held in a user `thread_local!`) the parent is dropped
//!    directly instead of panicking in a TLS destructor. A cached nested
//!    report is taken apart with an explicit stack in the same `Drop`.
//! 6. A settlement that completed after the group's token was cancelled
//!    counts as `cancelled`; a poisoning is counted tree-wide and logged
//!    once per group; idle and settlement waiters are notified only while
//!    someone watches (see `crate::wait`).
//! 7. Evidence outlives its group: a child's `Drop` (its last handle gone,
//!    its tasks settled) folds its counters, events, named failures and its
//!    own released children into its parent's released groups, under the
//!    parent's child-link lock and together with removing the link (see
//!    `shutdown_report/released.rs`). A shutdown settling the parent waits
//!    for children whose `Drop` is under way (their link expired, not yet
//!    removed), so its report holds either the child's settlement or its
//!    released evidence, never neither. `shutdown_now` does not wait: the
//!    evidence of a child whose `Drop` runs on another thread at that
//!    instant reaches the parent after its report was built.

mod completion;
mod diagnostics;
mod gate;
mod registry;
mod shutdown;
mod stop_order;
mod submission;

#[cfg(loom)]
pub(crate) mod tests;

use std::cell::{Cell, RefCell};
use std::fmt;
use std::sync::OnceLock;

use tokio::runtime::Handle;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

// The narrow interface other subsystems build tracked tasks on
// (operations, critical tasks): a future polled with its settlement ticket.
pub(crate) use completion::{Ending, Settle, Ticket, TrackedFuture};
// The diagnostics module builds its views on these walks.
pub(crate) use diagnostics::{DetailWalk, ExaminedTask, TaskTally};
// The operation gate's loom model drives the real task gate.
#[cfg(loom)]
pub(crate) use registry::AbortTarget;

use crate::error::{RuntimeError, RuntimeErrorContext, RuntimeOperation, RuntimeResult};
use crate::loom::{Arc, AtomicBool, AtomicU64, AtomicUsize, Mutex, Ordering, Weak};
use crate::shutdown_report::{BlockingExecutorSnapshot, ShutdownReport};
use crate::task_identity::{
    TaskEnd, TaskGroupEventCounts, TaskGroupId, TaskGroupLifecycleState, TaskId,
};
pub(crate) use gate::{Gate, OPEN};
use gate::{Refusal, COMPLETED};
use shutdown::LocalSettlement;

/// What the task tree needs of a blocking table to put its work in the
/// tree owner's report (invariant 3): the blocking lanes implement it, so
/// the tree needs nothing from them.
pub(crate) trait BlockingEvidence: fmt::Debug + Send + Sync {
    /// Closures running, including abandoned ones still running.
    fn blocking_still_running(&self) -> usize;
    /// Notified when the last running closure exits.
    fn emptied(&self) -> &Notify;
    /// The evidence to merge into a report.
    fn snapshot(&self) -> BlockingExecutorSnapshot;
}

/// What the task tree needs of a supervised service to keep its evidence
/// (`shutdown_report/services.rs`, invariant 1) and to stop its restarts:
/// the supervisor implements it, so the tree needs nothing from it.
pub(crate) trait ServiceEvidence: fmt::Debug + Send + Sync {
    /// The service's evidence now.
    fn evidence(&self) -> crate::shutdown_report::SupervisedServiceReport;
    /// Whether the service runs in `group` or below it.
    fn runs_within(&self, group: TaskGroupId) -> bool;
    /// No run starts after this returns (the group is shutting down).
    fn close(&self);
}

/// State shared by every group of one ownership tree (one owner or harness).
#[derive(Debug)]
pub(crate) struct TreeShared {
    handle: Handle,
    poisoned_groups: AtomicU64,
    closed_component_requests: AtomicU64,
    closed_component_logged: AtomicBool,
    /// Blocking tables whose running closures count in the tree owner's
    /// shutdown report (the managed lanes and every isolated executor).
    blocking: Mutex<Vec<Weak<dyn BlockingEvidence>>>,
    /// Why the service owning this tree stopped (first recorded wins);
    /// copied into the tree owner's shutdown report.
    shutdown_reason: OnceLock<&'static str>,
    /// The supervised services spawned in this tree, kept to the tree's
    /// end (their evidence outlives their groups).
    services: Mutex<Vec<Arc<dyn ServiceEvidence>>>,
    /// Set once the first service registers: a tree without supervised
    /// services never takes the registry's lock (every shutdown and report
    /// looks).
    has_services: AtomicBool,
}

impl TreeShared {
    pub(crate) fn new(handle: Handle) -> Arc<Self> {
        Arc::new(Self {
            handle,
            poisoned_groups: AtomicU64::new(0),
            closed_component_requests: AtomicU64::new(0),
            closed_component_logged: AtomicBool::new(false),
            blocking: Mutex::new(Vec::new()),
            shutdown_reason: OnceLock::new(),
            services: Mutex::new(Vec::new()),
            has_services: AtomicBool::new(false),
        })
    }

    /// Keeps a supervised service's evidence to the tree's end.
    pub(crate) fn register_service(&self, service: Arc<dyn ServiceEvidence>) {
        self.services.lock().push(service);
        self.has_services.store(true, Ordering::Release);
    }

    /// The supervised services running in `group` or below it.
    fn services_within(&self, group: TaskGroupId) -> Vec<Arc<dyn ServiceEvidence>> {
        if !self.has_services.load(Ordering::Acquire) {
            return Vec::new();
        }
        self.services
            .lock()
            .iter()
            .filter(|service| service.runs_within(group))
            .cloned()
            .collect()
    }

    /// Stops the restarts of the services in `group` or below it.
    pub(crate) fn close_services_within(&self, group: TaskGroupId) {
        for service in self.services_within(group) {
            service.close();
        }
    }

    /// The evidence of the services in `group`'s subtree (at most
    /// `SupervisedServiceReport::LIMIT`) and how many more there are.
    pub(crate) fn services_evidence(
        &self,
        group: TaskGroupId,
    ) -> (Vec<crate::shutdown_report::SupervisedServiceReport>, usize) {
        let services = self.services_within(group);
        let limit = crate::shutdown_report::SupervisedServiceReport::LIMIT;
        let omitted = services.len().saturating_sub(limit);
        let listed = services
            .iter()
            .take(limit)
            .map(|service| service.evidence())
            .collect();
        (listed, omitted)
    }

    /// Puts the evidence of the services in `group`'s subtree on `report`.
    pub(crate) fn merge_services(&self, group: TaskGroupId, report: &mut ShutdownReport) {
        (report.services, report.services_omitted) = self.services_evidence(group);
    }

    /// Records why the service stopped; the first reason stays.
    pub(crate) fn record_shutdown_reason(&self, reason: &'static str) {
        let _ = self.shutdown_reason.set(reason);
    }

    /// Sets the recorded reason on the tree owner's `report` unless the
    /// report already has one.
    pub(crate) fn merge_shutdown_reason(&self, report: &mut ShutdownReport) {
        if report.reason.is_none() {
            report.reason = self
                .shutdown_reason
                .get()
                .map(|reason| (*reason).to_owned());
        }
    }

    pub(crate) fn handle(&self) -> &Handle {
        &self.handle
    }

    /// Registers a blocking table (dropped tables are pruned here).
    fn register_blocking(&self, table: Weak<dyn BlockingEvidence>) {
        let mut tables = self.blocking.lock();
        tables.retain(|table| table.strong_count() > 0);
        tables.push(table);
    }

    /// The live registered tables.
    fn blocking_tables(&self) -> Vec<Arc<dyn BlockingEvidence>> {
        self.blocking
            .lock()
            .iter()
            .filter_map(Weak::upgrade)
            .collect()
    }

    /// Waits until `deadline` for every registered table to empty: once the
    /// tree is closed no new closure starts, so a closure still running is
    /// one that is about to exit or one that outlives the deadline; only
    /// the latter is evidence for the report.
    pub(crate) async fn await_blocking_exits(
        &self,
        deadline: crate::shutdown_deadline::ShutdownDeadline,
    ) {
        for table in self.blocking_tables() {
            crate::wait::notified_until(table.emptied(), deadline, Some(&self.handle), || {
                table.blocking_still_running() == 0
            })
            .await;
        }
    }

    /// Merges the blocking evidence of every live table into `report`.
    pub(crate) fn merge_blocking(&self, report: &mut ShutdownReport) {
        for table in self.blocking_tables() {
            let snapshot = table.snapshot();
            if snapshot.blocking_still_running > 0 {
                report.merge_blocking(snapshot);
            }
        }
    }
}

/// The shared state behind every clone of one [`TaskGroup`].
///
/// `repr(C)` with the gate first: every task clones this `Arc` and touches
/// the gate on the spawning and on the completing core, so the reference
/// counts sit next to the gate's hot fields rather than behind the
/// rarely-used ones.
#[repr(C)]
pub(crate) struct GroupInner {
    gate: Gate<registry::TaskHandle, GroupInner>,
    idle_watchers: AtomicUsize,
    settle_watchers: AtomicUsize,
    id: TaskGroupId,
    name: Arc<str>,
    parent: Option<Arc<GroupInner>>,
    tree: Arc<TreeShared>,
    token: CancellationToken,
    deadline: Mutex<Option<Instant>>,
    deadline_changed: Notify,
    idle: Notify,
    settled: Notify,
    local: OnceLock<Arc<LocalSettlement>>,
    local_settled: Notify,
    /// Notified when a child group unregistered (its evidence folded in):
    /// a settling shutdown waits for children being dropped.
    child_released: Notify,
    report: OnceLock<ShutdownReport>,
    /// The tree owner's root group (not a detached closed component, which
    /// has no parent either): its report carries the tree-wide evidence.
    tree_root: bool,
    /// The siblings this group stops after (see `stop_order.rs`); empty for
    /// a plain group.
    stop_after: Box<[Weak<GroupInner>]>,
    /// In an ordered group's subtree: its blocking lanes serve its running
    /// tasks from its seal until its local settlement (see `stop_order.rs`).
    finishes: bool,
}

impl fmt::Debug for GroupInner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GroupInner")
            .field("id", &self.id)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl GroupInner {
    /// The group's cancellation token (read by task wrappers in place).
    pub(crate) fn token(&self) -> &CancellationToken {
        &self.token
    }

    fn new(
        name: Arc<str>,
        parent: Option<Arc<GroupInner>>,
        tree: Arc<TreeShared>,
        token: CancellationToken,
        phase: u8,
        deadline: Option<Instant>,
    ) -> Self {
        Self {
            id: TaskGroupId::next(),
            name,
            parent,
            tree,
            token,
            gate: Gate::new(phase),
            deadline: Mutex::new(deadline),
            deadline_changed: Notify::new(),
            idle: Notify::new(),
            idle_watchers: AtomicUsize::new(0),
            settled: Notify::new(),
            settle_watchers: AtomicUsize::new(0),
            local: OnceLock::new(),
            local_settled: Notify::new(),
            child_released: Notify::new(),
            report: OnceLock::new(),
            tree_root: false,
            stop_after: Box::default(),
            finishes: false,
        }
    }

    /// Settlement steps 2 and 3: publish the result on the gate, then
    /// notify. A task that returned after the group's token was cancelled
    /// is counted `Cancelled`: it ended because it was asked to.
    pub(crate) fn settle(&self, slot: u32, check: registry::SeqCheck, result: TaskEnd) {
        let result = match result {
            TaskEnd::Completed if self.token.is_cancelled() => TaskEnd::Cancelled,
            result => result,
        };
        let effect = self.gate.settle(slot, check, result);
        if effect.poisoned_now {
            self.tree.poisoned_groups.fetch_add(1, Ordering::Relaxed);
            tracing::error!(
                group = %self.path(),
                group_id = self.id.as_u64(),
                "task group poisoned: a tracked task panicked while the group was open; new registrations are rejected"
            );
        }
        if effect.idle && self.idle_watchers.load(Ordering::SeqCst) > 0 {
            self.idle.notify_waiters();
        }
        if self.settle_watchers.load(Ordering::SeqCst) > 0 {
            self.settled.notify_waiters();
        }
    }

    /// Records that a task of this group started now (its first poll
    /// returned `Pending`).
    pub(crate) fn stamp(&self, slot: u32, check: registry::SeqCheck) {
        self.gate.stamp(slot, check, Instant::now());
    }

    /// Root-to-leaf path of group names, built without recursion.
    fn path(&self) -> String {
        let mut names = vec![&*self.name];
        let mut next = self.parent.as_deref();
        while let Some(group) = next {
            names.push(&group.name);
            next = group.parent.as_deref();
        }
        names.reverse();
        names.join("/")
    }

    fn deadline(&self) -> Option<Instant> {
        *self.deadline.lock()
    }
}

thread_local! {
    static DROPPING_GROUPS: Cell<bool> = const { Cell::new(false) };
    static PENDING_PARENTS: RefCell<Vec<Arc<GroupInner>>> = const { RefCell::new(Vec::new()) };
}

impl Drop for GroupInner {
    fn drop(&mut self) {
        let Some(parent) = self.parent.take() else {
            return;
        };
        // Its tasks have settled (each holds the group): the evidence
        // outlives the group in its parent (invariant 7).
        parent
            .gate
            .unregister_child(self.id, &self.released_evidence());
        parent.child_released.notify_waiters();
        release_ancestor(parent);
    }
}

/// Releases a parent reference without recursing: a 4,096-deep idle chain
/// must not recurse through `Drop`. The outermost drop on a thread drains a
/// thread-local queue that nested drops push to. During thread-local
/// teardown the queue may be gone; the parent is then dropped directly
/// (recursion bounded by the chain, never a panic in a TLS destructor).
fn release_ancestor(parent: Arc<GroupInner>) {
    let mut parent = Some(parent);
    match DROPPING_GROUPS.try_with(|flag| flag.replace(true)) {
        Ok(true) => {
            let _ = PENDING_PARENTS.try_with(|pending| {
                if let Some(parent) = parent.take() {
                    pending.borrow_mut().push(parent);
                }
            });
        }
        Ok(false) => {
            drop(parent.take());
            while let Ok(Some(next)) =
                PENDING_PARENTS.try_with(|pending| pending.borrow_mut().pop())
            {
                drop(next);
            }
            let _ = DROPPING_GROUPS.try_with(|flag| flag.set(false));
        }
        Err(_) => {}
    }
    drop(parent);
}

/// A tracked set of tasks and child groups with one cancellation token.
///
/// Cloning shares the same group (same tasks, same token). Child groups
/// created with [`try_child`](Self::try_child) get a child token: cancelling a
/// parent reaches its children, cancelling a child never reaches its parent
/// or siblings. A group has no public constructor: roots come from a
/// [`RuntimeOwner`](crate::RuntimeOwner) or a
/// [`RuntimeContext`](crate::RuntimeContext).
///
/// Dropping handles is not a shutdown: active tasks keep their group alive.
/// Use [`shutdown`](Self::shutdown) / [`shutdown_until`](Self::shutdown_until)
/// for completion evidence.
#[derive(Clone)]
pub struct TaskGroup {
    inner: Arc<GroupInner>,
}

impl fmt::Debug for TaskGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskGroup")
            .field("id", &self.inner.id)
            .field("name", &self.inner.name)
            .field("state", &self.lifecycle_state())
            .field("tasks", &self.task_count())
            .finish()
    }
}

impl TaskGroup {
    /// Creates the root group of a new ownership tree on `handle`.
    pub(crate) fn new_root(name: impl Into<Arc<str>>, handle: Handle) -> Self {
        let tree = TreeShared::new(handle);
        let mut root = GroupInner::new(
            name.into(),
            None,
            tree,
            CancellationToken::new(),
            OPEN,
            None,
        );
        root.tree_root = true;
        Self {
            inner: Arc::new(root),
        }
    }

    /// This group's process-unique id.
    pub fn id(&self) -> TaskGroupId {
        self.inner.id
    }

    /// The owner runtime's handle (where this tree's tasks and blocking
    /// closures run).
    pub(crate) fn runtime_handle(&self) -> &Handle {
        self.inner.tree.handle()
    }

    /// Registers a blocking table with this group's tree, so its running
    /// closures count in the tree owner's shutdown report.
    pub(crate) fn register_blocking(&self, table: Weak<dyn BlockingEvidence>) {
        self.inner.tree.register_blocking(table);
    }

    /// The parent group's id, if this is not a root.
    pub fn parent_id(&self) -> Option<TaskGroupId> {
        self.inner.parent.as_ref().map(|parent| parent.id)
    }

    /// The evidence of the supervised services in this group's subtree (at
    /// most `SupervisedServiceReport::LIMIT`) and how many more there are.
    pub(crate) fn supervised_services(
        &self,
    ) -> (Vec<crate::shutdown_report::SupervisedServiceReport>, usize) {
        self.inner.tree.services_evidence(self.inner.id)
    }

    /// This group's id and its ancestors' ids, nearest first.
    pub(crate) fn ancestry(&self) -> Vec<TaskGroupId> {
        let mut ids = vec![self.inner.id];
        let mut group = self.inner.parent.clone();
        while let Some(parent) = group {
            ids.push(parent.id);
            group = parent.parent.clone();
        }
        ids
    }

    /// The top of this group's tree (the owner's root for a component).
    #[cfg_attr(
        not(feature = "metrics"),
        allow(dead_code, reason = "the tree `/metrics` renders")
    )]
    pub(crate) fn tree_top(&self) -> TaskGroup {
        let mut top = Arc::clone(&self.inner);
        while let Some(parent) = top.parent.clone() {
            top = parent;
        }
        TaskGroup { inner: top }
    }

    /// The group's name (a label; names need not be unique).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The group's shared state.
    pub(crate) fn inner(&self) -> &Arc<GroupInner> {
        &self.inner
    }

    /// The group's cancellation token, shared by every clone.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.inner.token.clone()
    }

    /// Broadcasts cancellation to this group and its descendants.
    ///
    /// This neither closes admission nor waits; use
    /// [`shutdown`](Self::shutdown) for that.
    pub fn cancel(&self) {
        self.inner.token.cancel();
    }

    /// The state shared by the whole tree of this group.
    pub(crate) fn tree(&self) -> &Arc<TreeShared> {
        &self.inner.tree
    }

    /// The earliest shutdown deadline installed on this group or an ancestor.
    pub fn shutdown_deadline(&self) -> Option<crate::shutdown_deadline::ShutdownDeadline> {
        self.inner
            .deadline()
            .map(crate::shutdown_deadline::ShutdownDeadline::from_tokio)
    }

    /// The current lifecycle state (see [`TaskGroupLifecycleState`]).
    pub fn lifecycle_state(&self) -> TaskGroupLifecycleState {
        let gate = &self.inner.gate;
        match gate.phase() {
            COMPLETED => TaskGroupLifecycleState::ShutdownCompleted,
            _ if gate.is_poisoned() => TaskGroupLifecycleState::Poisoned,
            OPEN => TaskGroupLifecycleState::Open,
            gate::CLOSING if !self.inner.token.is_cancelled() => TaskGroupLifecycleState::Closing,
            _ => TaskGroupLifecycleState::Closed,
        }
    }

    /// Active tasks of this group (children not included).
    pub fn task_count(&self) -> usize {
        self.inner.gate.len()
    }

    /// Live direct child groups.
    pub fn component_count(&self) -> usize {
        self.inner.gate.component_count()
    }

    /// True iff `id` was issued by this group (even if the task finished).
    pub fn owns_task(&self, id: TaskId) -> bool {
        id.group_id() == self.inner.id
    }

    /// True iff `id` is still registered in this group. Foreign ids: false.
    pub fn contains_task(&self, id: TaskId) -> bool {
        self.owns_task(id) && self.inner.gate.contains(id.slot(), id.as_u64())
    }

    /// Failures the whole tree absorbed without an error: poisoned groups and
    /// component requests answered with a closed group.
    pub fn event_counts(&self) -> TaskGroupEventCounts {
        let tree = &self.inner.tree;
        TaskGroupEventCounts {
            poisoned_groups: tree.poisoned_groups.load(Ordering::Relaxed),
            closed_component_requests: tree.closed_component_requests.load(Ordering::Relaxed),
        }
    }

    /// Creates an independent child group.
    ///
    /// The child gets a child cancellation token and inherits this group's
    /// shutdown deadline.
    ///
    /// # Errors
    ///
    /// Kind `Closed` once this group's shutdown has begun, kind `Poisoned`
    /// after a task panicked while it was open (operation
    /// `CreateTaskGroupChild`).
    #[track_caller]
    pub fn try_child(&self, name: impl Into<Arc<str>>) -> RuntimeResult<TaskGroup> {
        let mut child = GroupInner::new(
            name.into(),
            Some(Arc::clone(&self.inner)),
            Arc::clone(&self.inner.tree),
            self.inner.token.child_token(),
            OPEN,
            self.inner.deadline(),
        );
        child.finishes = self.inner.finishes;
        self.register(child, RuntimeOperation::CreateTaskGroupChild)
    }

    /// Registers `child` (created with this group as its parent) under this
    /// group's child-link lock (invariant 4).
    #[track_caller]
    fn register(&self, child: GroupInner, operation: RuntimeOperation) -> RuntimeResult<TaskGroup> {
        let child = Arc::new(child);
        let registered = self
            .inner
            .gate
            .register_child(child.id, Arc::downgrade(&child));
        match registered {
            Ok(()) => {
                // A shutdown that installed a deadline between the read above
                // and the registration did not see this child: re-read it
                // (ordered after that installation through the child lock).
                if let Some(deadline) = self.inner.deadline() {
                    child.tighten(deadline);
                }
                Ok(TaskGroup { inner: child })
            }
            Err(refusal) => {
                // Dropped after the gate is released; its unregister is a no-op.
                drop(child);
                Err(self.refusal_error(refusal, operation))
            }
        }
    }

    /// A child group, or a closed group if this one no longer admits
    /// children. Every closed answer is counted in
    /// [`event_counts`](Self::event_counts); the first per tree is logged.
    #[track_caller]
    pub(crate) fn component(&self, name: impl Into<Arc<str>>) -> TaskGroup {
        let name = name.into();
        match self.try_child(Arc::clone(&name)) {
            Ok(child) => child,
            Err(error) => self.closed_component(name, &error),
        }
    }

    fn closed_component(&self, name: Arc<str>, error: &RuntimeError) -> TaskGroup {
        let tree = &self.inner.tree;
        tree.closed_component_requests
            .fetch_add(1, Ordering::Relaxed);
        self.inner.gate.count_closed_component_request();
        if !tree.closed_component_logged.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                parent = %self.inner.path(),
                component = %name,
                kind = ?error.kind(),
                "component requested after its parent stopped admitting children; returning a closed group (further answers are only counted)"
            );
        }
        let token = self.inner.token.child_token();
        token.cancel();
        let closed = Arc::new(GroupInner::new(
            name,
            None,
            Arc::clone(tree),
            token,
            COMPLETED,
            self.inner.deadline(),
        ));
        let group = TaskGroup { inner: closed };
        group.inner.local.get_or_init(|| {
            Arc::new(LocalSettlement::empty(ShutdownReport::new(
                group.name().to_owned(),
                std::time::Duration::ZERO,
            )))
        });
        group
    }
}

impl TaskGroup {
    /// This group's path of names from the tree's root (`broker/writer`).
    pub(crate) fn scope_path(&self) -> String {
        self.inner.path()
    }

    /// The context naming this group in an error: its path from the
    /// tree's root, and `lane` when a blocking lane refused.
    pub(crate) fn scope_context(&self, lane: Option<&'static str>) -> RuntimeErrorContext {
        RuntimeErrorContext::Scope {
            path: self.inner.path(),
            lane,
        }
    }

    /// Maps a gate refusal to the operational error of `operation`, naming
    /// this group.
    #[track_caller]
    pub(crate) fn refusal_error(
        &self,
        refusal: Refusal,
        operation: RuntimeOperation,
    ) -> RuntimeError {
        let error = match refusal {
            Refusal::Closed => RuntimeError::closed(operation),
            Refusal::Poisoned => RuntimeError::poisoned(operation),
            Refusal::Full => RuntimeError::capacity(operation),
        };
        error.with_context(self.scope_context(None))
    }
}
