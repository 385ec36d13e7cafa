//! Blocking work: managed lanes, isolated executors, policies and snapshots.
//!
//! | State | Owner |
//! | --- | --- |
//! | global capacity, lane counts, reservations, FIFO waiters | [`admission`] (`AdmissionBudget`) |
//! | queued/running/abandoned records, rejection count | [`table`] (`BlockingTable`) |
//! | submission phases, the closure wrapper, isolated shutdown | [`executor`] (`BlockingExecutor`) |

pub(crate) mod admission;
mod diagnostics;
mod executor;
mod job;
mod managed;
mod policy;
mod scope;
pub(crate) mod table;
#[cfg(all(test, loom))]
mod tests;

pub use diagnostics::*;
pub use executor::BlockingExecutor;
pub(crate) use managed::{ManagedBlocking, ScopedLanes};
pub use policy::*;
