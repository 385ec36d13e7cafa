//! Blocking work: managed lanes, isolated executors, policies and snapshots.
//!
//! | State | Owner |
//! | --- | --- |
//! | global capacity, lane counts, reservations, FIFO waiters | [`admission`] (`AdmissionBudget`) |
//! | queued/running/abandoned records, rejection count | [`table`] (`BlockingTable`) |
//! | isolated shutdown | [`executor`] (`BlockingExecutor`) |
//! | submission phases (ordinary and drain-lease) | [`submit`] |
//! | the closure wrapper and its start check | [`job`] (`BlockingJob`) |
//! | one owner's managed lanes | [`managed`] (`ManagedBlocking`) |
//! | a drain lease's allowance and deadline | [`lease`] (`BlockingDrainLease`) |
//! | what every clone of one executor shares | [`scope`] (`ExecutorInner`) |

pub(crate) mod admission;
mod diagnostics;
mod executor;
mod job;
mod lease;
mod managed;
mod policy;
mod scope;
mod submit;
pub(crate) mod table;
#[cfg(all(test, loom))]
mod tests;

pub use diagnostics::BlockingExecutorShutdownReport;
pub use executor::BlockingExecutor;
pub use lease::BlockingDrainLease;
pub(crate) use managed::{ManagedBlocking, ScopedLanes};
pub(crate) use policy::default_parallelism;
pub use policy::*;
