//! The result of an isolated executor's shutdown. The snapshots it carries
//! are the reports' vocabulary (`shutdown_report/blocking.rs`).

use serde::Serialize;

use crate::shutdown_report::BlockingExecutorSnapshot;

/// The result of [`BlockingExecutor::shutdown_until`](crate::BlockingExecutor::shutdown_until).
#[derive(Debug, Clone, Serialize)]
#[must_use = "the report is the shutdown's evidence: log, return or inspect it"]
pub struct BlockingExecutorShutdownReport {
    /// True when nothing was owned any more at the end of the wait.
    pub completed: bool,
    /// Submissions and closures still owned (queued, running, or abandoned
    /// but still running); the shutdown can be retried.
    pub pending_operations: usize,
    /// The executor's snapshot when the wait ended.
    pub snapshot: BlockingExecutorSnapshot,
}
