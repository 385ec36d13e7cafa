//! rocketmq-runtime: explicit ownership for Tokio services.
//!
//! See the crate README for the ownership model.

mod loom;

mod blocking;
mod config;
mod error;
mod shutdown_deadline;
mod shutdown_report;
mod task_group;

pub use blocking::*;
pub use config::*;
pub use error::*;
pub use shutdown_deadline::*;
pub use shutdown_report::*;
pub use task_group::*;
