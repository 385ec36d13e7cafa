//! Resource budgets: a tree of count/bytes/rate limits with atomic
//! reserve-and-rollback, RAII permits, budgeted queues and process memory
//! discovery.

mod dynamic;
pub mod memory;
mod queue;
#[cfg(all(test, loom))]
mod tests;
mod tree;
mod types;
mod usage;

pub use dynamic::{
    DynamicBudgetKey, DynamicKeyAdmissionRejection, DynamicKeyRegistrationFailure,
    DynamicKeyRetirement,
};
pub use queue::{
    BudgetedItem, BudgetedQueue, ForeignPermit, QueuePushOutcome, QueuePushRejection, QueueSnapshot,
};
pub use tree::{
    ResourceBudget, ResourceBudgetTree, ResourcePermit, DEFAULT_MAX_DYNAMIC_BUDGET_KEYS,
};
pub use types::*;
