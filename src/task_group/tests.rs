//! Loom models of the task-group admission gate (run with `--cfg loom`).

mod loom_admission;
