//! Blocking work: lane identity, policies and snapshots.
//!
//! The managed lanes themselves (admission, execution) arrive with the
//! blocking-lanes issue; this module already carries the value types that the
//! configuration and the shutdown report need.

pub(crate) mod admission;
#[cfg(all(test, loom))]
mod tests;
mod diagnostics;
mod policy;

pub use diagnostics::*;
pub use policy::*;
