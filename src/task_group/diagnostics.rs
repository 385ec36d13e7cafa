//! Walks of a group's subtree for diagnostics: the full tally behind the
//! aggregate views and the bounded detail walk.
//!
//! Invariants:
//!
//! 1. Both walks are iterative (an explicit stack of groups), so a deep
//!    chain of groups costs heap, never thread stack.
//! 2. The tally visits every live task and every live group of the subtree:
//!    each shard under its table lock (registration on that shard waits for
//!    the shard's visit), each group's child links under its child lock. It
//!    reads the clock once, before the walk.
//! 3. The detail walk examines at most `scan` task entries and at most
//!    `scan` child entries. Task entries come from the tables' live lists
//!    (a stale entry of a sealed table counts as examined) and child entries
//!    from the ordered child links (an expired weak entry counts as
//!    examined), so its cost is the entries it examines plus a fixed number
//!    of locks per visited group, however many tasks, vacant slots or
//!    children the tree holds. At most `scan + 1` groups are visited.
//! 4. The detail walk reports `truncated` when a budget stopped it: task
//!    entries left when the scan budget ran out, child entries left when
//!    the entry budget ran out, or an examined task the output budget could
//!    not take. A walk that ends with nothing left is not truncated.

use std::time::Duration;

use tokio::time::Instant;

use crate::loom::Arc;
use crate::task_group::{GroupInner, TaskGroup};
use crate::task_identity::TaskKind;

/// One task kind's figures in a tally.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KindTally {
    pub(crate) active: usize,
    /// Tasks started at least the threshold ago.
    pub(crate) long_running: usize,
    pub(crate) max_elapsed: Duration,
}

/// The whole-subtree figures behind the aggregate views.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct TaskTally {
    /// Groups visited, the starting group included.
    pub(crate) groups: usize,
    /// Live tasks of the subtree.
    pub(crate) tasks: usize,
    /// Live tasks of the starting group.
    pub(crate) local_tasks: usize,
    /// Task-table slots the subtree keeps allocated.
    pub(crate) registry_slots: usize,
    /// Per kind, in [`TaskKind::ALL`] order.
    pub(crate) kinds: [KindTally; 7],
}

/// One task the detail walk examined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ExaminedTask {
    pub(crate) kind: TaskKind,
    /// A task of the starting group (else of a descendant).
    pub(crate) local: bool,
    /// Since its start; zero if it has not started.
    pub(crate) elapsed: Duration,
}

/// What a detail walk examined.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DetailWalk {
    pub(crate) tasks_scanned: usize,
    pub(crate) group_entries_scanned: usize,
    pub(crate) truncated: bool,
}

fn elapsed(now: Instant, started: Option<Instant>) -> Duration {
    started.map_or(Duration::ZERO, |started| {
        now.saturating_duration_since(started)
    })
}

impl TaskGroup {
    /// Tallies every live task and group of this subtree (invariant 2).
    pub(crate) fn tally(&self, long_running_threshold: Duration) -> TaskTally {
        let now = Instant::now();
        let mut tally = TaskTally::default();
        let mut stack: Vec<Arc<GroupInner>> = vec![Arc::clone(self.inner())];
        let mut first = true;
        while let Some(group) = stack.pop() {
            tally.groups += 1;
            let mut tasks = 0;
            tally.registry_slots += group.gate.visit_live(|info| {
                tasks += 1;
                let kind = &mut tally.kinds[info.kind.index()];
                let elapsed = elapsed(now, info.started);
                kind.active += 1;
                if info.started.is_some() && elapsed >= long_running_threshold {
                    kind.long_running += 1;
                }
                kind.max_elapsed = kind.max_elapsed.max(elapsed);
            });
            tally.tasks += tasks;
            if std::mem::take(&mut first) {
                tally.local_tasks = tasks;
            }
            stack.extend(group.gate.live_children());
        }
        tally
    }

    /// Examines at most `scan` task entries and `scan` child entries of
    /// this subtree, depth first, oldest first, handing each examined live
    /// task to `emit`; `emit` returns false when it could not take the task
    /// (its output is full). See invariants 3 and 4.
    pub(crate) fn walk_details(
        &self,
        scan: usize,
        mut emit: impl FnMut(ExaminedTask) -> bool,
    ) -> DetailWalk {
        let now = Instant::now();
        let mut walk = DetailWalk::default();
        let mut task_budget = scan;
        let mut entry_budget = scan;
        let mut stack: Vec<(Arc<GroupInner>, bool)> = vec![(Arc::clone(self.inner()), true)];
        while let Some((group, local)) = stack.pop() {
            let visit = group.gate.visit_bounded(&mut task_budget, |info| {
                let task = ExaminedTask {
                    kind: info.kind,
                    local,
                    elapsed: elapsed(now, info.started),
                };
                walk.truncated |= !emit(task);
            });
            walk.tasks_scanned += visit.examined;
            walk.truncated |= visit.cut;
            let (entries, more) = group.gate.child_entries(entry_budget);
            entry_budget -= entries.len();
            walk.group_entries_scanned += entries.len();
            walk.truncated |= more;
            // Oldest child on top: visited first.
            stack.extend(
                entries
                    .into_iter()
                    .rev()
                    .flatten()
                    .map(|child| (child, false)),
            );
        }
        walk
    }
}
