//! What every clone of one executor shares: its policy, its task table,
//! the runtime its closures run on, and the scope that admits its work (the
//! owning group, and for an isolated executor its own stop switch).
//!
//! Ordinary work is admitted while the scope is open and not cancelled, or,
//! in an ordered component's subtree, from its seal until its tasks have
//! settled (they finish what the components it stops after handed it; see
//! `task_group/stop_order.rs`, invariant 5); a drain lease's work
//! (pre-accepted finalization) only needs an isolated executor not to be
//! stopped, since its deadline bounds it instead. Every wait is bounded by
//! the scope's installed shutdown deadline.

use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;

use crate::blocking::table::BlockingTable;
use crate::blocking::BlockingPoolPolicy;
use crate::error::{RuntimeError, RuntimeErrorContext, RuntimeOperation};
use crate::loom::Arc;
use crate::shutdown_report::BlockingLane;
use crate::task_group::TaskGroup;
use crate::task_identity::TaskGroupLifecycleState;

/// Which admission rule a submission follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Admit {
    /// Ordinary work: refused once the scope closes or is cancelled.
    Ordinary,
    /// Work of a drain lease, accepted while the scope was open: bounded by
    /// the lease's deadline instead of the scope's admission.
    Finalization,
}

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
    /// Whether new work is admitted: the scope is open and not cancelled
    /// (or an ordered scope is finishing), and an isolated executor was not
    /// stopped.
    pub(super) fn admits(&self) -> bool {
        let open = self.scope.lifecycle_state() == TaskGroupLifecycleState::Open
            && !self.scope.cancellation_token().is_cancelled();
        (open || self.scope.finishing()) && self.admits_finalization()
    }

    /// Whether work of a drain lease (accepted while the scope was open) is
    /// still admitted: only an isolated executor's stop refuses it; the
    /// scope's closing and cancellation do not.
    pub(super) fn admits_finalization(&self) -> bool {
        !self
            .isolated
            .as_ref()
            .is_some_and(|isolated| isolated.stopped.is_cancelled())
    }

    /// The refusal of a submission that found every slot busy and the
    /// waiting queue full: names the scope, the lane, its limits and the
    /// setting to raise.
    pub(super) fn lane_full(&self) -> RuntimeError {
        let (lane, setting) = match (&self.isolated, self.table.lane()) {
            (Some(_), _) => (
                "isolated",
                "BlockingPoolPolicy::max_queue_depth of the executor",
            ),
            (None, BlockingLane::StorageIo) => (
                "storage-io",
                "RuntimeConfig::blocking_lane_policies.storage_io.max_queue_depth",
            ),
            (None, BlockingLane::MetadataIo) => (
                "metadata-io",
                "RuntimeConfig::blocking_lane_policies.metadata_io.max_queue_depth",
            ),
            (None, BlockingLane::CpuCrypto) => (
                "cpu-crypto",
                "RuntimeConfig::blocking_lane_policies.cpu_crypto.max_queue_depth",
            ),
        };
        RuntimeError::capacity(RuntimeOperation::BlockingQueueAdmission).with_context(
            RuntimeErrorContext::LaneFull {
                path: self.scope.scope_path(),
                lane,
                max_concurrency: self.table.max_concurrency(),
                max_queue_depth: self.table.max_queue_depth(),
                setting,
            },
        )
    }

    /// `error` naming the scope and lane that refused a submission.
    pub(super) fn refusal(&self, error: RuntimeError) -> RuntimeError {
        error.with_context(self.scope.scope_context(Some(self.table.lane().as_str())))
    }

    /// Whether `mode`'s work is admitted now.
    pub(super) fn admits_mode(&self, mode: Admit) -> bool {
        match mode {
            Admit::Ordinary => self.admits(),
            Admit::Finalization => self.admits_finalization(),
        }
    }

    /// Resolves when `mode`'s work is no longer admitted.
    pub(super) async fn closed_for(&self, mode: Admit) {
        match (mode, &self.isolated) {
            (Admit::Ordinary, _) => self.closed().await,
            (Admit::Finalization, Some(isolated)) => isolated.stopped.cancelled().await,
            (Admit::Finalization, None) => std::future::pending().await,
        }
    }

    /// Resolves when new work is no longer admitted.
    pub(super) async fn closed(&self) {
        let token = self.scope.cancellation_token();
        // A finishing scope is sealed before its token is cancelled, so a
        // waiter woken by the cancellation sees it finishing.
        let scope = async {
            token.cancelled().await;
            if self.scope.finishing() {
                self.scope.settled_locally().await;
            }
        };
        match &self.isolated {
            Some(isolated) => {
                tokio::select! {
                    () = scope => {}
                    () = isolated.stopped.cancelled() => {}
                }
            }
            None => scope.await,
        }
    }
}
