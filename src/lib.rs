//! rocketmq-runtime: explicit ownership for Tokio services.
//!
//! See the crate README for the ownership model.

mod loom;

mod blocking;
mod config;
mod context;
mod error;
mod owner;
pub mod prelude;
mod service_context;
mod shutdown_deadline;
mod shutdown_report;
mod task_group;
mod task_spawner;

pub use blocking::*;
pub use config::*;
pub use context::RuntimeContext;
pub use error::*;
pub use owner::{RuntimeOwner, RuntimeOwnerPlan};
pub use service_context::{ChildServiceContext, RootServiceContext, ScopeId};
pub use shutdown_deadline::*;
pub use shutdown_report::*;
pub use task_group::*;
pub use task_spawner::TaskSpawner;
