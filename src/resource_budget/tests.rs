//! Loom models of the budget tree (run with `--cfg loom`): unit tests of
//! the library, and, through [`loom_models`](crate::loom_models), the
//! `resource_budget_loom` test target.

pub(crate) mod loom_budget;
pub(crate) mod loom_queue;
pub(crate) mod loom_usage;
