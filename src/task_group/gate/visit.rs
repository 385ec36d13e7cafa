//! Visits of a gate's live tasks for diagnostics: every live task (the
//! aggregates), or a bounded number of live-list entries (the detail
//! walk). Each shard is read under its table lock after its pending
//! settlements and start stamps are applied, like every other reader.

use super::Gate;
use crate::task_group::registry::{AbortTarget, TaskInfo};

/// What a bounded visit of one gate did.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct BoundedVisit {
    /// Live-list entries examined (stale entries of a sealed table count).
    pub(crate) examined: usize,
    /// The budget ran out with entries left.
    pub(crate) cut: bool,
}

impl<H: AbortTarget, C> Gate<H, C> {
    /// Calls `visit` for every live task, in slot order (a sequential scan:
    /// the tables' high water, not their live lists); returns the slots the
    /// tables hold (live and vacant: what the registry keeps allocated).
    pub(crate) fn visit_live(&self, mut visit: impl FnMut(&TaskInfo)) -> usize {
        let mut slots = 0;
        for shard in &self.shards {
            self.with_applied(shard, |state| {
                slots += state.table.high_water() as usize;
                state.table.occupied().for_each(&mut visit);
            });
        }
        slots
    }

    /// Examines live-list entries, oldest first per shard, while `budget`
    /// lasts (each entry takes one), calling `visit` for the live ones.
    /// Costs the entries examined plus one lock per shard.
    pub(crate) fn visit_bounded(
        &self,
        budget: &mut usize,
        mut visit: impl FnMut(&TaskInfo),
    ) -> BoundedVisit {
        let mut outcome = BoundedVisit::default();
        for shard in &self.shards {
            self.with_applied(shard, |state| {
                let mut entries = state.table.entries();
                loop {
                    if *budget == 0 {
                        outcome.cut |= entries.next().is_some();
                        return;
                    }
                    let Some(entry) = entries.next() else {
                        return;
                    };
                    *budget -= 1;
                    outcome.examined += 1;
                    if let Some((_, _, info)) = entry {
                        visit(info);
                    }
                }
            });
        }
        outcome
    }
}
