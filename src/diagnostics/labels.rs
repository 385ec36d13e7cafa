//! The fixed wire labels of the sanitized views: components, scopes,
//! lifecycle states, task kinds, blocking lanes and blocking kinds. Each
//! runtime type maps onto its label exhaustively (a new variant fails to
//! compile here until it has a label).

use serde::Serialize;

use crate::shutdown_report::{BlockingKind, BlockingLane};
use crate::task_identity::{TaskGroupLifecycleState, TaskKind};

/// Which kind of process a view describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RuntimeComponent {
    /// A broker.
    Broker,
    /// A name server.
    NameServer,
    /// A controller.
    Controller,
    /// A proxy.
    Proxy,
    /// An MCP server.
    Mcp,
    /// An SRE control plane.
    SreControlPlane,
    /// An SRE connector.
    SreConnector,
    /// Anything else.
    Other,
}

/// What state a V2 section covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RuntimeDiagnosticsScope {
    /// The viewed group alone, or state the caller owns and supplied.
    Local,
    /// The viewed group and all its descendants.
    Subtree,
    /// State shared by the whole owner (the managed blocking lanes).
    ProcessShared,
}

/// A group's lifecycle state on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RuntimeLifecycleStateV1 {
    /// Accepting tasks and children.
    Open,
    /// Admission sealed, cancellation not yet broadcast.
    Closing,
    /// Admission closed and cancellation broadcast.
    Closed,
    /// Shutdown finished; its report is cached.
    ShutdownCompleted,
    /// A task panicked while the group was open.
    Poisoned,
}

impl From<TaskGroupLifecycleState> for RuntimeLifecycleStateV1 {
    fn from(state: TaskGroupLifecycleState) -> Self {
        match state {
            TaskGroupLifecycleState::Open => Self::Open,
            TaskGroupLifecycleState::Closing => Self::Closing,
            TaskGroupLifecycleState::Closed => Self::Closed,
            TaskGroupLifecycleState::ShutdownCompleted => Self::ShutdownCompleted,
            TaskGroupLifecycleState::Poisoned => Self::Poisoned,
        }
    }
}

/// A task kind on the wire (`service`, `worker`, `scheduled_driver`,
/// `scheduled_run`, `blocking_reaper`, `shutdown`, `other`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RuntimeTaskKindV1 {
    /// [`TaskKind::Service`].
    Service,
    /// [`TaskKind::Worker`].
    Worker,
    /// [`TaskKind::ScheduledDriver`].
    ScheduledDriver,
    /// [`TaskKind::ScheduledRun`].
    ScheduledRun,
    /// [`TaskKind::BlockingReaper`].
    BlockingReaper,
    /// [`TaskKind::Shutdown`].
    Shutdown,
    /// [`TaskKind::Other`].
    Other,
}

impl From<TaskKind> for RuntimeTaskKindV1 {
    fn from(kind: TaskKind) -> Self {
        match kind {
            TaskKind::Service => Self::Service,
            TaskKind::Worker => Self::Worker,
            TaskKind::ScheduledDriver => Self::ScheduledDriver,
            TaskKind::ScheduledRun => Self::ScheduledRun,
            TaskKind::BlockingReaper => Self::BlockingReaper,
            TaskKind::Shutdown => Self::Shutdown,
            TaskKind::Other => Self::Other,
        }
    }
}

/// A managed blocking lane on the wire (`storage_io`, `metadata_io`,
/// `cpu_crypto`), taken from the snapshot's typed lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RuntimeBlockingLaneV1 {
    /// [`BlockingLane::StorageIo`].
    StorageIo,
    /// [`BlockingLane::MetadataIo`].
    MetadataIo,
    /// [`BlockingLane::CpuCrypto`].
    CpuCrypto,
}

impl From<BlockingLane> for RuntimeBlockingLaneV1 {
    fn from(lane: BlockingLane) -> Self {
        match lane {
            BlockingLane::StorageIo => Self::StorageIo,
            BlockingLane::MetadataIo => Self::MetadataIo,
            BlockingLane::CpuCrypto => Self::CpuCrypto,
        }
    }
}

/// A blocking job's kind on the wire (`short_io`, `cpu_bound`,
/// `long_running`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RuntimeBlockingKindV1 {
    /// [`BlockingKind::ShortIo`].
    ShortIo,
    /// [`BlockingKind::CpuBound`].
    CpuBound,
    /// [`BlockingKind::LongRunning`].
    LongRunning,
}

impl RuntimeBlockingKindV1 {
    /// Every kind, in wire order.
    pub(crate) const ALL: [Self; 3] = [Self::ShortIo, Self::CpuBound, Self::LongRunning];
}

impl From<BlockingKind> for RuntimeBlockingKindV1 {
    fn from(kind: BlockingKind) -> Self {
        match kind {
            BlockingKind::ShortIo => Self::ShortIo,
            BlockingKind::CpuBound => Self::CpuBound,
            BlockingKind::LongRunning => Self::LongRunning,
        }
    }
}
