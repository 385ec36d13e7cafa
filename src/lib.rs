//! rocketmq-runtime: explicit ownership for Tokio services.
//!
//! A [`RuntimeOwner`] owns the Tokio runtime and a sealed
//! [`RootServiceContext`]. Components receive a [`ChildServiceContext`] (or a
//! narrower [`TaskSpawner`]) and submit work into its [`TaskGroup`]. Groups
//! form a tree: cancellation flows down, shutdown seals, cancels and drains
//! the subtree within one absolute [`ShutdownDeadline`] and leaves a cached
//! [`ShutdownReport`].
//!
//! ```text
//! RuntimeOwner ─ RootServiceContext (root TaskGroup)
//!                  ├─ ChildServiceContext "broker" (TaskGroup: tasks, children)
//!                  └─ ChildServiceContext "namesrv"
//! ```
//!
//! Three questions shape the API: who stops a task (its group, through
//! cancellation and the shutdown deadline), which capacity pays for it
//! (explicit budgets, in a separate tree), and what evidence remains (the
//! shutdown report, and while running the diagnostics views such as
//! [`RuntimeDiagnosticsViewV2`]).
//!
//! # Feature flags
//!
//! The first four are on by default; the runtime itself needs none of them.
//!
//! | Feature | Gives | Pulls in |
//! | --- | --- | --- |
//! | `probes` | the HTTP probe server (`/livez`, `/readyz`, `/startupz`, `/drainz`) | `httparse`, Tokio's `net` and `io-util` |
//! | `metrics` | `ServiceLifecycle::with_metrics`, `metrics_text`, and `/metrics` with `probes` | `prometheus-client` |
//! | `config-file` | `common::parse_config_file` | `toml` |
//! | `time-utils` | `common::time_utils` | `jiff` |
//! | `tokio-console` (off by default) | with `RUSTFLAGS="--cfg tokio_unstable"`: tasks spawned through Tokio's task builder under their `TaskName`, listed by name in tokio-console | Tokio's `tracing` |
//!
//! A setting whose feature is off is refused (`start` with a probe address
//! fails with [`RuntimeErrorKind::Unsupported`] and a
//! [`RuntimeErrorContext::FeatureDisabled`] context), never ignored.
//!
//! # Errors
//!
//! Invalid configuration is a [`RuntimeContractViolation`]; operational
//! failures are [`RuntimeError`]s, branched on with [`RuntimeError::kind`].
//! There is no conversion between the two.
//!
//! # Cancel safety
//!
//! Every async API documents its cancel safety. The shutdown futures are
//! cancel safe: the deadline is installed when the call is made, every step
//! is idempotent, and calling again after dropping a shutdown future resumes
//! and completes it. Waits (`wait_task`, `abort_task_and_wait`) have no side
//! effects beyond the abort requested synchronously.
#![forbid(unsafe_code)]

mod loom;

mod blocking;
pub mod common;
mod config;
mod context;
mod critical;
mod diagnostics;
mod durable;
mod environment;
mod error;
mod inline;
mod metadata_io;
mod operation;
mod owner;
pub mod prelude;
mod resource_budget;
mod resources;
mod scheduled;
mod service_context;
mod service_lifecycle;
mod shutdown_deadline;
mod shutdown_report;
#[cfg(not(loom))]
pub mod signal;
mod supervised;
pub mod task;
mod task_group;
mod task_identity;

/// The loom models of the task-group gate and the budget tree, run against
/// the real code: only in `--cfg loom` builds, for the
/// `task_group_shutdown_loom` and `resource_budget_loom` test targets (the
/// library's own unit tests run the same models with `--lib loom`).
#[cfg(loom)]
#[doc(hidden)]
pub mod loom_models {
    /// The spawn gate: registration, seal, settlement, aborts.
    pub mod task_group {
        pub use crate::task_group::tests::loom_admission::*;
    }
    /// Budget levels, reserve-and-rollback, queues.
    pub mod resource_budget {
        pub use crate::resource_budget::tests::loom_budget::*;
        pub use crate::resource_budget::tests::loom_queue::*;
        pub use crate::resource_budget::tests::loom_usage::*;
    }
}
mod task_spawner;
mod wait;

// The public surface: every type has one path, here at the root (the
// `prelude` repeats the common ones; `task`, `common` and `signal` are the
// public modules, and no type is both there and here). No glob: each
// subsystem's public names are listed, so nothing leaks by accident.
pub use blocking::{
    BlockingDrainLease, BlockingExecutor, BlockingExecutorShutdownReport, BlockingLanePolicies,
    BlockingPoolPolicy,
};
pub use config::{RuntimeConfig, MAX_ENTRYPOINT_BLOCKING_THREADS, MIN_ENTRYPOINT_BLOCKING_THREADS};
pub use context::RuntimeContext;
pub use critical::{
    CriticalFailure, CriticalFailureKind, CriticalFailureState, CriticalFailureSubscription,
};
pub use diagnostics::{
    RuntimeBlockingKindSummaryV1, RuntimeBlockingKindV1, RuntimeBlockingLaneSummaryV1,
    RuntimeBlockingLaneV1, RuntimeBlockingSectionV2, RuntimeComponent, RuntimeDiagnostics,
    RuntimeDiagnosticsInputs, RuntimeDiagnosticsScope, RuntimeDiagnosticsSnapshot,
    RuntimeDiagnosticsViewOptions, RuntimeDiagnosticsViewOptionsV2, RuntimeDiagnosticsViewV1,
    RuntimeDiagnosticsViewV2, RuntimeLifecycleStateV1, RuntimeMetadataSectionV2,
    RuntimeScheduleSectionV2, RuntimeShutdownSectionV2, RuntimeTaskDetailV2, RuntimeTaskDetails,
    RuntimeTaskKindSummaryV1, RuntimeTaskKindV1, RuntimeTaskSectionV2,
};
pub use durable::{LocalMetadataFileSystem, MetadataFileSystem, MetadataIoOperation};
pub use environment::{
    EnvironmentVariable, DRAIN_DELAY_SECONDS_ENV, ENVIRONMENT_VARIABLES, HEALTH_BIND_ADDR_ENV,
    HEALTH_DRAIN_METHODS_ENV, HEALTH_DRAIN_TOKEN_ENV, HEALTH_METRICS_ENV,
    LIVENESS_STALE_SECONDS_ENV, PROCESS_MEMORY_LIMIT_ENV, SHUTDOWN_TIMEOUT_SECONDS_ENV,
};
pub use error::{
    BudgetDimension, CanonicalCondition, EnvironmentViolation, ExternalOperation,
    RuntimeContractPolicy, RuntimeContractViolation, RuntimeError, RuntimeErrorContext,
    RuntimeErrorDescriptor, RuntimeErrorDiagnosticView, RuntimeErrorKind, RuntimeErrorPublicView,
    RuntimeOperation, RuntimeResult,
};
pub use metadata_io::{
    MetadataDeadline, MetadataDurability, MetadataGeneration, MetadataIoActor,
    MetadataIoActorLimitsProfile, MetadataIoAdmissionOutcome, MetadataIoBlockingLaneProfile,
    MetadataIoCommitAdmissionOutcome, MetadataIoCommitObservation, MetadataIoCommitOutcome,
    MetadataIoConfig, MetadataIoDurabilityOutcome, MetadataIoEffectiveProfile,
    MetadataIoLegacyBlockingField, MetadataIoObserver, MetadataIoPlan, MetadataIoReceipt,
    MetadataIoResourceSnapshot, MetadataIoShutdownReport, MetadataIoSnapshot, MetadataLimitSource,
    MetadataStorageFailure, MetadataTargetIdentity, MetadataTargetRegistryStats,
    MetadataTargetRetirementOutcome, MetadataWriteRequest,
};
pub use operation::{
    OperationContext, OperationOutcome, OperationOutcomeObserver, OperationWaitOutcome,
    OperationWaitPolicy,
};
pub use owner::{RuntimeOwner, RuntimeOwnerPlan};
pub use resource_budget::{
    BudgetCapacity, BudgetClass, BudgetLimit, BudgetRejection, BudgetRejectionReason,
    BudgetSnapshot, BudgetedItem, BudgetedQueue, DynamicBudgetKey, DynamicKeyAdmissionRejection,
    DynamicKeyRegistrationFailure, DynamicKeyRetirement, ForeignPermit, FullPolicy,
    HostMemoryFileView, ManagedMemoryBudget, ManagedMemoryPolicy, ManagedMemoryRequest,
    MemoryFileView, MemoryLimitSource, MonotonicClock, PermitRebindOutcome, ProcessMemoryLimit,
    QueuePushOutcome, QueuePushRejection, QueueSnapshot, RateLimit, ResourceBudget,
    ResourceBudgetTree, ResourcePermit, SystemMonotonicClock, DEFAULT_MAX_DYNAMIC_BUDGET_KEYS,
};
pub use resources::RuntimeResources;
pub use scheduled::{
    MissedTickPolicy, ScheduleMode, ScheduledExecutionPolicy, ScheduledTaskConcurrency,
    ScheduledTaskConfig, ScheduledTaskControl, ScheduledTaskGroup, ScheduledTaskObserver,
    ScheduledTaskRegistrationOutcome, ScheduledTaskSnapshot,
};
pub use service_context::{ChildServiceContext, RootServiceContext, ScopeId};
pub use service_lifecycle::{
    CriticalFailureRecovery, DependencyReadiness, DrainRequestMethods, ServiceLifecycle,
    ServiceLifecycleConfig, ServiceLifecycleObserver, ServiceLifecycleState,
    ServiceLifecycleTransition, ShutdownReason, ShutdownRequest, DEFAULT_LIVENESS_STALE_AFTER,
    DEFAULT_SHUTDOWN_TIMEOUT, STORAGE_DEPENDENCY,
};
pub use shutdown_deadline::ShutdownDeadline;
pub use shutdown_report::{
    BlockingExecutorSnapshot, BlockingKind, BlockingLane, BlockingTaskId, BlockingTaskSnapshot,
    BlockingTaskState, ReleasedGroup, ServiceFailureKind, ShutdownAnnotation, ShutdownReport,
    ShutdownReportDisplay, SupervisedServiceReport, TaskFailure, TaskFailureKind, TaskSnapshot,
};
pub use supervised::{ServiceRestartPolicy, ServiceRun};
pub use task_group::TaskGroup;
pub use task_identity::{
    TaskGroupEventCounts, TaskGroupId, TaskGroupLifecycleState, TaskId, TaskKind, TaskName,
    TaskState,
};
pub use task_spawner::TaskSpawner;

/// The `prometheus-client` this crate encodes `/metrics` with, for
/// [`ServiceLifecycle::with_metrics_collector`] (its `Registry` and metric
/// types must be this version's).
#[cfg(feature = "metrics")]
pub use prometheus_client;

/// The README's Rust examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The Chinese README's Rust examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README-zh_cn.md")]
pub struct ReadmeZhDoctests;

/// The migration guide's "after" examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../MIGRATION.md")]
pub struct MigrationDoctests;

/// The changelog's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../CHANGELOG.md")]
pub struct ChangelogDoctests;
