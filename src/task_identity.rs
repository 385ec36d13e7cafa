//! Task and group identity: ids, names, kinds and states, the words the
//! task tree (`task_group`), its reports (`shutdown_report`) and its
//! diagnostics share. It sits below both, so a report names tasks without
//! depending on the tree that settles them.
//!
//! Invariants:
//!
//! 1. A `TaskGroupId` comes from one process-wide counter (a `std` atomic even
//!    under loom, which cannot initialise statics), so no two groups of the
//!    process share an id.
//! 2. `TaskId` equality includes the issuing group: an id from another group
//!    is never found, aborted or waited for. Within a group the sequence is
//!    never reused; the slot is derived from it and not part of identity.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use serde::{Serialize, Serializer};

use crate::loom::{Ordering, StaticAtomicU64};

/// Process-unique identity of a [`TaskGroup`](crate::TaskGroup).
///
/// Ids come from one process-wide counter starting at 1, so two groups never
/// share an id, even across owners. Names are labels; ids are identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct TaskGroupId(u64);

static NEXT_GROUP_ID: StaticAtomicU64 = StaticAtomicU64::new(1);

impl TaskGroupId {
    pub(crate) fn next() -> Self {
        Self(NEXT_GROUP_ID.fetch_add(1, Ordering::Relaxed))
    }

    /// The numeric id.
    pub const fn as_u64(self) -> u64 {
        self.0
    }
}

impl fmt::Display for TaskGroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Identity of one tracked task, carrying the group that issued it.
///
/// Equality includes the issuing group: a `TaskId` from another group is never
/// found, aborted or waited for by this one. Serialized, a `TaskId` is the
/// per-group sequence number only.
#[derive(Debug, Clone, Copy)]
pub struct TaskId {
    group: TaskGroupId,
    seq: u64,
    /// Registry slot of the task inside its group; derived from `seq` (the
    /// group never reuses a sequence), so it is not part of identity.
    slot: u32,
}

impl TaskId {
    pub(crate) const fn new(group: TaskGroupId, seq: u64, slot: u32) -> Self {
        Self { group, seq, slot }
    }

    /// The per-group sequence number (starts at 1).
    pub const fn as_u64(self) -> u64 {
        self.seq
    }

    /// The group that issued this id.
    pub const fn group_id(self) -> TaskGroupId {
        self.group
    }

    pub(crate) const fn slot(self) -> u32 {
        self.slot
    }
}

impl PartialEq for TaskId {
    fn eq(&self, other: &Self) -> bool {
        self.group == other.group && self.seq == other.seq
    }
}

impl Eq for TaskId {}

impl std::hash::Hash for TaskId {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.group.hash(state);
        self.seq.hash(state);
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.group.0, self.seq)
    }
}

impl Serialize for TaskId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(self.seq)
    }
}

/// The label of a task.
///
/// A `&'static str` is stored without allocating; `String`, `Box<str>` and
/// `Arc<str>` names are kept as they are. A borrowed non-`'static` `&str` is
/// deliberately not accepted: convert it to an owned name explicitly.
#[derive(Clone)]
pub struct TaskName(NameRepr);

#[derive(Clone)]
enum NameRepr {
    Static(&'static str),
    Owned(String),
    Boxed(Box<str>),
    Shared(Arc<str>),
}

impl TaskName {
    /// True for a `&'static str` name (nothing to free).
    pub(crate) fn is_static(&self) -> bool {
        matches!(self.0, NameRepr::Static(_))
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            NameRepr::Static(s) => s,
            NameRepr::Owned(s) => s,
            NameRepr::Boxed(s) => s,
            NameRepr::Shared(s) => s,
        }
    }
}

impl fmt::Debug for TaskName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for TaskName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq for TaskName {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for TaskName {}

impl std::hash::Hash for TaskName {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl Serialize for TaskName {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl From<&'static str> for TaskName {
    fn from(name: &'static str) -> Self {
        Self(NameRepr::Static(name))
    }
}

impl From<String> for TaskName {
    fn from(name: String) -> Self {
        Self(NameRepr::Owned(name))
    }
}

impl From<&String> for TaskName {
    fn from(name: &String) -> Self {
        Self(NameRepr::Owned(name.clone()))
    }
}

impl From<Box<str>> for TaskName {
    fn from(name: Box<str>) -> Self {
        Self(NameRepr::Boxed(name))
    }
}

impl From<Arc<str>> for TaskName {
    fn from(name: Arc<str>) -> Self {
        Self(NameRepr::Shared(name))
    }
}

impl From<&Arc<str>> for TaskName {
    fn from(name: &Arc<str>) -> Self {
        Self(NameRepr::Shared(Arc::clone(name)))
    }
}

impl From<Cow<'static, str>> for TaskName {
    fn from(name: Cow<'static, str>) -> Self {
        match name {
            Cow::Borrowed(s) => Self(NameRepr::Static(s)),
            Cow::Owned(s) => Self(NameRepr::Owned(s)),
        }
    }
}

/// What a task is for. A label, not a tree level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskKind {
    /// A long-lived service loop.
    Service,
    /// Bounded worker or request work.
    Worker,
    /// The driver task of a scheduled job.
    ScheduledDriver,
    /// One run of a scheduled job.
    ScheduledRun,
    /// A task that reaps blocking work.
    BlockingReaper,
    /// Work that runs as part of shutdown.
    Shutdown,
    /// Anything else.
    Other,
}

impl TaskKind {
    /// Every kind, in declaration order.
    pub const ALL: [TaskKind; 7] = [
        TaskKind::Service,
        TaskKind::Worker,
        TaskKind::ScheduledDriver,
        TaskKind::ScheduledRun,
        TaskKind::BlockingReaper,
        TaskKind::Shutdown,
        TaskKind::Other,
    ];

    /// The position of this kind in [`ALL`](Self::ALL).
    pub(crate) const fn index(self) -> usize {
        match self {
            TaskKind::Service => 0,
            TaskKind::Worker => 1,
            TaskKind::ScheduledDriver => 2,
            TaskKind::ScheduledRun => 3,
            TaskKind::BlockingReaper => 4,
            TaskKind::Shutdown => 5,
            TaskKind::Other => 6,
        }
    }

    /// The stable wire label (`service`, `worker`, `scheduled_driver`, ...).
    pub const fn as_str(self) -> &'static str {
        match self {
            TaskKind::Service => "service",
            TaskKind::Worker => "worker",
            TaskKind::ScheduledDriver => "scheduled_driver",
            TaskKind::ScheduledRun => "scheduled_run",
            TaskKind::BlockingReaper => "blocking_reaper",
            TaskKind::Shutdown => "shutdown",
            TaskKind::Other => "other",
        }
    }
}

/// The state of a task as seen in a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// Registered, not yet handed to Tokio.
    Queued,
    /// Handed to Tokio and not settled.
    Running,
    /// Returned normally.
    Completed,
    /// Dropped because its owner was cancelled.
    Cancelled,
    /// Destroyed by an abort.
    Aborted,
    /// Panicked while polled or dropped.
    Panicked,
    /// Still registered when a shutdown report was assembled.
    Leaked,
}

/// How a group counts a settled task: completed, cancelled, aborted or
/// panicked, plus a failure a task reported without panicking (a critical service that
/// returned before its group was cancelled), counted in the report's
/// `failed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum TaskEnd {
    /// The future returned (before the group was cancelled).
    Completed,
    /// The future was dropped at, or returned after, the group's
    /// cancellation.
    Cancelled,
    /// The future was destroyed by an abort.
    Aborted,
    /// The future panicked while polled or dropped.
    Panicked,
    /// The task reported a failure without panicking.
    Failed,
}

/// Lifecycle of a [`TaskGroup`](crate::TaskGroup).
///
/// | State | Meaning |
/// | --- | --- |
/// | `Open` | New tasks and child groups can be registered. |
/// | `Closing` | Shutdown sealed admission; cancellation has not yet reached every task. |
/// | `Closed` | Admission is closed and cancellation has been broadcast; owned work is draining. |
/// | `ShutdownCompleted` | The shutdown report is cached for repeated calls; it need not be healthy. |
/// | `Poisoned` | A tracked task panicked while the group was open; new registration is rejected. |
///
/// A shutdown moves a group through `Closing`, `Closed` and `ShutdownCompleted`
/// in that order. `Closing` is reported as `Closed` as soon as the group's
/// cancellation token is cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskGroupLifecycleState {
    /// Accepting tasks and children.
    Open,
    /// Admission sealed, cancellation not yet broadcast.
    Closing,
    /// Admission closed and cancellation broadcast.
    Closed,
    /// Report cached.
    ShutdownCompleted,
    /// A task panicked while the group was open.
    Poisoned,
}

/// Failures a task tree absorbed without returning an error.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TaskGroupEventCounts {
    /// Groups poisoned by a panicking task.
    pub poisoned_groups: u64,
    /// `component(...)` requests answered with a closed group.
    pub closed_component_requests: u64,
}
