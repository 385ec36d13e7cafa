//! The managed lanes of one owner: one admission budget over
//! `max_blocking_threads` slots, one task table per lane, and the executors
//! a scope gets for them.

use crate::blocking::admission::{AdmissionBudget, LaneLimits};
use crate::blocking::executor::BlockingExecutor;
use crate::blocking::scope::ExecutorInner;
use crate::blocking::table::BlockingTable;
use crate::blocking::{BlockingLanePolicies, BlockingPoolPolicy};
use crate::loom::Arc;
use crate::shutdown_report::BlockingLane;
use crate::task_group::TaskGroup;

/// The managed lanes of one owner: one admission budget, one table per lane.
#[derive(Debug)]
pub(crate) struct ManagedBlocking {
    policies: BlockingLanePolicies,
    tables: [Arc<BlockingTable>; 3],
}

impl ManagedBlocking {
    /// Lanes over `capacity` global slots; each lane reserves one slot.
    pub(crate) fn new(capacity: usize, policies: BlockingLanePolicies) -> Arc<Self> {
        let lane_policies = BlockingLane::ALL.map(|lane| lane_policy(&policies, lane).clone());
        let limits = lane_policies.clone().map(|policy| LaneLimits {
            ceiling: policy.max_concurrency,
            reservation: 1,
            max_queue_depth: policy.max_queue_depth,
        });
        let budget = AdmissionBudget::new(capacity, &limits);
        let mut index = 0;
        let tables = lane_policies.map(|policy| {
            let table = BlockingTable::new(
                &policy,
                BlockingLane::ALL[index],
                index,
                Arc::clone(&budget),
            );
            index += 1;
            table
        });
        Arc::new(Self { policies, tables })
    }

    /// The lane tables (registered with the tree for shutdown reports).
    pub(crate) fn tables(&self) -> &[Arc<BlockingTable>; 3] {
        &self.tables
    }

    /// An executor of `lane` scoped to `scope`.
    pub(crate) fn executor(&self, lane: BlockingLane, scope: &TaskGroup) -> BlockingExecutor {
        let index = lane_index(lane);
        BlockingExecutor {
            inner: Arc::new(ExecutorInner {
                policy: lane_policy(&self.policies, lane).clone(),
                table: Arc::clone(&self.tables[index]),
                scope: scope.clone(),
                handle: scope.runtime_handle().clone(),
                isolated: None,
            }),
        }
    }
}

/// The managed lane executors of one scope, created on first use and kept,
/// so a context hands out `&BlockingExecutor` (clones of the context share
/// the lanes created before the clone).
#[derive(Debug, Clone, Default)]
pub(crate) struct ScopedLanes {
    lanes: [std::sync::OnceLock<BlockingExecutor>; 3],
}

impl ScopedLanes {
    /// The executor of `lane` scoped to `scope`.
    pub(crate) fn get(
        &self,
        managed: &ManagedBlocking,
        lane: BlockingLane,
        scope: &TaskGroup,
    ) -> &BlockingExecutor {
        self.lanes[lane_index(lane)].get_or_init(|| managed.executor(lane, scope))
    }
}

fn lane_index(lane: BlockingLane) -> usize {
    match lane {
        BlockingLane::StorageIo => 0,
        BlockingLane::MetadataIo => 1,
        BlockingLane::CpuCrypto => 2,
    }
}

fn lane_policy(policies: &BlockingLanePolicies, lane: BlockingLane) -> &BlockingPoolPolicy {
    match lane {
        BlockingLane::StorageIo => &policies.storage_io,
        BlockingLane::MetadataIo => &policies.metadata_io,
        BlockingLane::CpuCrypto => &policies.cpu_crypto,
    }
}
