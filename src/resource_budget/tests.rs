//! Loom models of the budget tree (run with `--cfg loom`).

mod loom_budget;
mod loom_queue;
mod loom_usage;
