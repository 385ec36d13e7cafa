//! Loom models of the task-group admission gate (run with `--cfg loom`):
//! unit tests of the library, and, through
//! [`loom_models`](crate::loom_models), the `task_group_shutdown_loom`
//! test target.

pub(crate) mod loom_admission;
