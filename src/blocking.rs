//! Blocking work: managed lanes, isolated executors, policies and snapshots.
//!
//! | State | Owner |
//! | --- | --- |
//! | global capacity, lane counts, reservations, FIFO waiters | [`admission`] (`AdmissionBudget`) |
//! | queued/running/abandoned records, rejection count | [`table`] (`BlockingTable`) |
//! | submission phases, isolated shutdown | [`executor`] (`BlockingExecutor`) |
//! | the closure wrapper and its start check | [`job`] (`BlockingJob`) |
//! | one owner's managed lanes | [`managed`] (`ManagedBlocking`) |
//! | what every clone of one executor shares | [`scope`] (`ExecutorInner`) |

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
