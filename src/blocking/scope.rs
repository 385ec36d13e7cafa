//! What every clone of one executor shares: its policy, its task table,
//! the runtime its closures run on, and the scope that admits its work (the
//! owning group, and for an isolated executor its own stop switch).

use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;

use crate::blocking::table::BlockingTable;
use crate::blocking::BlockingPoolPolicy;
use crate::loom::Arc;
use crate::task_group::{TaskGroup, TaskGroupLifecycleState};

/// What an isolated executor has that a managed lane does not.
#[derive(Debug)]
pub(super) struct Isolated {
    /// Cancelled by `stop_admission` (shared by the executor's clones).
    pub(super) stopped: CancellationToken,
}

#[derive(Debug)]
pub(super) struct ExecutorInner {
    pub(super) policy: BlockingPoolPolicy,
    pub(super) table: Arc<BlockingTable>,
    pub(super) scope: TaskGroup,
    pub(super) handle: Handle,
    pub(super) isolated: Option<Isolated>,
}

impl ExecutorInner {
    /// Whether new work is admitted: the scope is open and not cancelled,
    /// and an isolated executor was not stopped.
    pub(super) fn admits(&self) -> bool {
        self.scope.lifecycle_state() == TaskGroupLifecycleState::Open
            && !self.scope.cancellation_token().is_cancelled()
            && !self
                .isolated
                .as_ref()
                .is_some_and(|isolated| isolated.stopped.is_cancelled())
    }

    /// Resolves when new work is no longer admitted.
    pub(super) async fn closed(&self) {
        let scope = self.scope.cancellation_token();
        match &self.isolated {
            Some(isolated) => {
                tokio::select! {
                    () = scope.cancelled() => {}
                    () = isolated.stopped.cancelled() => {}
                }
            }
            None => scope.cancelled().await,
        }
    }
}
