//! Loom models of the operation admission gate (run with `--cfg loom`).

mod loom_operation;
