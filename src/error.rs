//! Errors: two channels that are never mixed.
//!
//! # Contract violations
//!
//! [`RuntimeContractViolation`] reports that the *caller* asked for something
//! the runtime does not accept: a configuration with zero worker threads, a
//! blocking lane without capacity, a blank budget name. Violations come from
//! `plan()`/`validate()`-style entry points, before any thread, runtime or
//! file exists. Each configuration violation names the rule that failed with
//! a [`RuntimeContractPolicy`]; it never carries the rejected values or a
//! source error, so it is safe to log verbatim. Its
//! [`condition`](RuntimeContractViolation::condition) is always
//! [`CanonicalCondition::InvalidArgument`].
//!
//! # Operational failures
//!
//! [`RuntimeError`] (inside [`RuntimeResult`]) reports that a well-formed
//! request could not be carried out *now*: the owning scope is closing, a
//! capacity is exhausted, a deadline passed, a file could not be written.
//! Branch on [`RuntimeError::kind`]; the [`RuntimeOperation`] label says what
//! was being done and is meant for logs and metrics, not for control flow.
//! Each error also has a stable dotted [`code`](RuntimeError::code), a
//! [`CanonicalCondition`], a short recovery hint and the source location that
//! created it. Its `Display` text is a fixed catalog message that names the
//! kind and the operation and never includes the text of the underlying
//! cause; the cause stays reachable through [`std::error::Error::source`].
//!
//! Some errors also carry a typed [`RuntimeErrorContext`] (a refused
//! environment value, an address that could not be bound), reachable
//! through [`RuntimeError::context`] and shown by its `Display`.
//! [`RuntimeError::public_view`] is what may go back to a remote client;
//! [`RuntimeError::diagnostic_view`] is for logs.
//!
//! There is deliberately no conversion between the two channels: an
//! application that wants one error type defines it and accepts both.
//!
//! Ordinary outcomes (a budget rejection, an already-registered schedule, a
//! metadata target conflict) are not errors at all and have their own types.

mod context;
mod contract;
mod kind;
mod operation;
mod runtime_error;
mod view;

pub(crate) use context::cut;
pub use context::{EnvironmentViolation, RuntimeErrorContext};
pub use contract::{BudgetDimension, RuntimeContractPolicy, RuntimeContractViolation};
pub use kind::{CanonicalCondition, RuntimeErrorKind};
pub use operation::{ExternalOperation, RuntimeOperation};
pub use runtime_error::{RuntimeError, RuntimeResult};
pub use view::{RuntimeErrorDescriptor, RuntimeErrorDiagnosticView, RuntimeErrorPublicView};
