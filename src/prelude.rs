//! The recommended entry path: `use rocketmq_runtime::prelude::*;`.

pub use crate::{
    ChildServiceContext, OperationContext, OperationOutcome, OperationWaitOutcome,
    OperationWaitPolicy, RootServiceContext, RuntimeConfig, RuntimeOwner, ScheduledExecutionPolicy,
    ScheduledTaskConfig, ScheduledTaskGroup, ShutdownDeadline, ShutdownReport, TaskGroup, TaskKind,
};
