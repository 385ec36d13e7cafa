//! The bounded, name-free task detail list: [`TaskGroup::diagnostics_task_details`]
//! and the detail list of a V2 view.

use serde::Serialize;

use super::labels::{RuntimeDiagnosticsScope, RuntimeTaskKindV1};
use super::millis;
use crate::task_group::{DetailWalk, ExaminedTask, TaskGroup};

/// One task of a detail list: its kind, where it lives and its age. No
/// name, id or payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuntimeTaskDetailV2 {
    /// The task's kind.
    pub kind: RuntimeTaskKindV1,
    /// `local`: a task of the group asked; `subtree`: of a descendant.
    pub scope: RuntimeDiagnosticsScope,
    /// Since the task started (0 if it has not started yet).
    pub elapsed_millis: u64,
}

/// A bounded detail list and how much of the tree it examined.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuntimeTaskDetails {
    /// At most the output budget of details, depth first, oldest first.
    pub details: Vec<RuntimeTaskDetailV2>,
    /// Tasks examined (at most the scan budget).
    pub tasks_scanned: usize,
    /// Descendant group entries examined, expired ones included (at most
    /// the scan budget).
    pub group_entries_scanned: usize,
    /// A budget stopped the walk before it saw everything.
    pub truncated: bool,
}

/// Examines up to `scan` tasks and group entries of `group`'s subtree and
/// keeps up to `output` details.
pub(super) fn collect(group: &TaskGroup, scan: usize, output: usize) -> RuntimeTaskDetails {
    let mut details = Vec::with_capacity(output.min(scan));
    let DetailWalk {
        tasks_scanned,
        group_entries_scanned,
        truncated,
    } = group.walk_details(scan, |task| {
        let room = details.len() < output;
        if room {
            details.push(detail(task));
        }
        room
    });
    RuntimeTaskDetails {
        details,
        tasks_scanned,
        group_entries_scanned,
        truncated,
    }
}

fn detail(task: ExaminedTask) -> RuntimeTaskDetailV2 {
    RuntimeTaskDetailV2 {
        kind: task.kind.into(),
        scope: if task.local {
            RuntimeDiagnosticsScope::Local
        } else {
            RuntimeDiagnosticsScope::Subtree
        },
        elapsed_millis: millis(task.elapsed),
    }
}

impl TaskGroup {
    /// A bounded, name-free sample of this subtree's tasks: examines at
    /// most `scan_budget` tasks and at most `scan_budget` descendant group
    /// entries (expired entries count), and keeps at most `output_budget`
    /// details.
    ///
    /// Unlike the V1/V2 aggregates it does not visit the whole tree: its
    /// cost follows the budgets, not the number of tasks, the vacant slots
    /// a burst left in the task tables, or the number of (empty) children.
    /// The walk is iterative, so a deep chain of groups is fine on a small
    /// thread stack. `truncated` is set when a budget stopped it; `(0, 0)`
    /// on a non-empty tree is truncated.
    ///
    /// ```
    /// # rocketmq_runtime::RuntimeOwner::new().unwrap().block_on(async {
    /// # let context = rocketmq_runtime::RuntimeContext::try_from_current("doc").unwrap();
    /// let group = context.root_group();
    /// let token = group.cancellation_token();
    /// for _ in 0..10 {
    ///     let token = token.clone();
    ///     group.spawn_service("idle", async move { token.cancelled().await })?;
    /// }
    /// let sample = group.diagnostics_task_details(4, 2);
    /// assert_eq!(sample.tasks_scanned, 4);
    /// assert_eq!(sample.details.len(), 2);
    /// assert!(sample.truncated);
    /// # context.shutdown_tasks(std::time::Duration::from_secs(5)).await;
    /// # Ok::<(), rocketmq_runtime::RuntimeError>(())
    /// # }).unwrap();
    /// ```
    pub fn diagnostics_task_details(
        &self,
        scan_budget: usize,
        output_budget: usize,
    ) -> RuntimeTaskDetails {
        collect(self, scan_budget, output_budget)
    }
}
