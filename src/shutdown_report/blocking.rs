//! The blocking work a report carries: the lanes, the kinds of work, and
//! point-in-time snapshots of tasks and executors.
//!
//! These are plain values defined with the reports (the layer below the
//! blocking lanes), so a report and the task tree need nothing from the
//! lanes; the blocking module fills them in. A snapshot is evidence of what
//! was running when it was taken; it does not stop, wait for or otherwise
//! affect the closures it describes.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::shutdown_deadline::serialize_duration_ms;

/// A managed blocking lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BlockingLane {
    /// Short storage and filesystem operations.
    StorageIo,
    /// Metadata persistence.
    MetadataIo,
    /// Bounded CPU or cryptographic work.
    CpuCrypto,
}

impl BlockingLane {
    /// Every lane, in the order lanes are validated, reported and iterated.
    pub const ALL: [BlockingLane; 3] = [Self::StorageIo, Self::MetadataIo, Self::CpuCrypto];

    /// The kebab-case label, identical to the serde form and `Display`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::StorageIo => "storage-io",
            Self::MetadataIo => "metadata-io",
            Self::CpuCrypto => "cpu-crypto",
        }
    }
}

impl fmt::Display for BlockingLane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What kind of blocking work a submission is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockingKind {
    /// Short blocking I/O.
    ShortIo,
    /// Bounded CPU-bound work.
    CpuBound,
    /// A long-running blocking loop: always rejected by the lanes; such work
    /// needs a dedicated thread owner with a stop and join protocol.
    LongRunning,
}

/// Identity of one blocking submission within its executor's task table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct BlockingTaskId(u64);

impl BlockingTaskId {
    /// Issued by the blocking task tables.
    pub(crate) const fn new(id: u64) -> Self {
        Self(id)
    }

    /// The numeric id.
    pub const fn as_u64(self) -> u64 {
        self.0
    }
}

impl fmt::Display for BlockingTaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The state of a blocking submission as seen in a snapshot.
///
/// | State | Meaning |
/// | --- | --- |
/// | `Queued` | Admitted to the lane queue, waiting for a capacity slot; the closure has not started. |
/// | `Running` | The closure is executing and its caller is still waiting for it. |
/// | `Completed` | The closure returned and its result was delivered. |
/// | `JoinFailed` | The closure panicked or Tokio could not run it. |
/// | `TimedOutStillRunning` | The caller stopped waiting (timeout or dropped future) but the closure has not exited; it still holds its capacity slot. |
///
/// `Running` and `TimedOutStillRunning` together are the
/// `blocking_still_running` count of a snapshot.
///
/// This crate's snapshots never contain `Completed` or `JoinFailed`: a
/// record is removed the moment its closure exits (returned or panicked),
/// so a snapshot lists only what is still owned. The two states complete
/// the spec's vocabulary for tools that keep finished submissions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockingTaskState {
    /// Waiting in the lane queue; the closure has not started.
    Queued,
    /// The closure is executing and its caller is waiting.
    Running,
    /// The closure returned (never in this crate's snapshots).
    Completed,
    /// The closure panicked or could not be run (never in this crate's
    /// snapshots).
    JoinFailed,
    /// The caller gave up waiting, but the closure is still executing.
    TimedOutStillRunning,
}

impl BlockingTaskState {
    // Whether a closure in this state may still be executing on a blocking
    // thread (`Running` or `TimedOutStillRunning`).
    pub(crate) const fn is_still_running(self) -> bool {
        matches!(self, Self::Running | Self::TimedOutStillRunning)
    }
}

/// One blocking submission as seen in a snapshot.
///
/// Serialized with `elapsed` as the integer field `elapsed_ms`.
#[derive(Debug, Clone, Serialize)]
pub struct BlockingTaskSnapshot {
    /// Identity within the executor's task table.
    pub id: BlockingTaskId,
    /// The name given at submission.
    pub name: String,
    /// The kind given at submission.
    pub kind: BlockingKind,
    /// The state when the snapshot was taken.
    pub state: BlockingTaskState,
    /// Time since submission when the snapshot was taken.
    #[serde(rename = "elapsed_ms", serialize_with = "serialize_duration_ms")]
    pub elapsed: Duration,
}

/// A point-in-time view of one blocking executor (a managed lane or an
/// isolated executor).
///
/// The `global_*` fields describe the capacity shared by all managed lanes of
/// one owner (for an isolated executor, its own capacity); the `lane_*` fields
/// describe this lane's share of it. Serialized with `oldest_queue_wait` as the
/// integer field `oldest_queue_wait_ms`.
#[derive(Debug, Clone, Serialize)]
pub struct BlockingExecutorSnapshot {
    /// The executor's policy name.
    pub name: Arc<str>,
    /// The lane this executor admits to.
    pub lane: BlockingLane,
    /// Most closures of this lane that may run at once.
    pub max_concurrency: usize,
    /// Most submissions that may wait in this lane's queue.
    pub max_queue_depth: usize,
    /// Total capacity shared by the lanes of the owner.
    pub global_capacity: usize,
    /// Closures running across all lanes sharing the capacity.
    pub global_running: usize,
    /// Free slots of the shared capacity.
    pub global_available: usize,
    /// Slots reserved for this lane.
    pub lane_reserved: usize,
    /// Closures of this lane holding a slot.
    pub lane_running: usize,
    /// Slots this lane holds beyond its reservation.
    pub lane_borrowed: usize,
    /// Submissions waiting in the queue.
    pub queued: usize,
    /// Closures executing whose caller still waits.
    pub running: usize,
    /// Closures executing whose caller stopped waiting.
    pub timed_out_still_running: usize,
    /// `running + timed_out_still_running`: closures that may still execute.
    pub blocking_still_running: usize,
    /// Submissions rejected since the executor was created.
    pub rejected: u64,
    /// How long the oldest queued submission has waited.
    #[serde(
        rename = "oldest_queue_wait_ms",
        serialize_with = "serialize_duration_ms"
    )]
    pub oldest_queue_wait: Duration,
    /// Per-submission details, including task names.
    pub tasks: Vec<BlockingTaskSnapshot>,
}
