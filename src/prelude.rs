//! The recommended entry path: `use rocketmq_runtime::prelude::*;`.

pub use crate::{
    ChildServiceContext, RootServiceContext, RuntimeConfig, RuntimeOwner, ShutdownDeadline,
    ShutdownReport, TaskGroup, TaskKind,
};
