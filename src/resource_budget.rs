//! Resource budgets: a tree of count/bytes/rate limits with atomic
//! reserve-and-rollback, RAII permits, budgeted queues and process memory
//! discovery.

mod budget;
mod dynamic;
pub(crate) mod memory;
mod queue;
mod stripes;
#[cfg(loom)]
pub(crate) mod tests;
mod tree;
mod types;
mod usage;

pub use budget::{ResourceBudget, ResourceBudgetTree, ResourcePermit};
pub use dynamic::{
    DynamicBudgetKey, DynamicKeyAdmissionRejection, DynamicKeyRegistrationFailure,
    DynamicKeyRetirement,
};
pub use memory::{
    HostMemoryFileView, ManagedMemoryBudget, ManagedMemoryPolicy, ManagedMemoryRequest,
    MemoryFileView, MemoryLimitSource, ProcessMemoryLimit,
};
pub use queue::{
    BudgetedItem, BudgetedQueue, ForeignPermit, QueuePushOutcome, QueuePushRejection, QueueSnapshot,
};
pub use tree::DEFAULT_MAX_DYNAMIC_BUDGET_KEYS;
pub use types::*;
