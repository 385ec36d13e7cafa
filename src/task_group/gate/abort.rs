//! Aborting registered tasks: one task by slot, or every task (of an
//! operation) in batches per shard lock. See the gate's module docs
//! (`task_group/gate.rs`) for why aborts are requested under the table
//! lock.

use super::{pack, unpack, Gate, ListedTask, SettleCounters, SHARDS};
use crate::loom::{AtomicUsize, Ordering};
use crate::task_group::registry::{AbortTarget, OperationTag, TaskRecord};

/// Ends an abort walk's count, also when the walk unwinds.
struct WalkGuard<'a>(&'a AtomicUsize);

impl Drop for WalkGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The tasks a deadline abort walk newly aborted: the first `limit` listed
/// (named), and how many in all.
#[derive(Debug, Default)]
pub(crate) struct Stragglers {
    pub(crate) listed: Vec<ListedTask>,
    pub(crate) total: usize,
}

/// Records aborted per shard-lock acquisition by [`Gate::abort_matching`].
const ABORT_BATCH: u32 = 256;

/// Marks `record` aborted (once) and aborts its task if the handle is
/// installed (else [`Gate::install`] will). Returns whether this is the
/// first request.
///
/// Called under the table lock: aborting only schedules the task (Tokio
/// never polls or drops a future inside `abort`), and the task's
/// settlement takes its settle lock, not this one. The handle stays in the
/// record until the settlement is applied.
fn request_abort<H: AbortTarget>(
    record: &mut TaskRecord<H>,
    counters: &mut SettleCounters,
    by_deadline: bool,
) -> bool {
    let newly = record.mark_abort(by_deadline);
    if newly {
        counters.live_abort_requested += 1;
    }
    if let Some(handle) = &record.handle {
        handle.abort();
    }
    newly
}

impl<H: AbortTarget, C> Gate<H, C> {
    /// Requests an abort; true iff the task is still registered.
    pub(crate) fn abort(&self, slot: u32, seq: u64) -> bool {
        let (local, shard) = unpack(slot);
        self.with_applied(&self.shards[shard], |state| {
            match state.table.get_mut(local, seq) {
                Some(record) => {
                    request_abort(record, &mut state.counters, false);
                    true
                }
                None => false,
            }
        })
    }

    /// Aborts every registered task (of `operation`, if given); with `by_deadline`
    /// the tasks not already aborted are marked as deadline aborts. Returns
    /// how many tasks were newly aborted.
    ///
    /// Each shard is walked in batches of [`ABORT_BATCH`] records per lock
    /// hold; aborted tasks settle concurrently (a settlement takes the
    /// table lock only to apply a full batch or an idle shard). Every task
    /// registered when the call starts and not settled when its batch is
    /// walked is aborted; on a sealed gate (the shutdown paths) that is
    /// every task.
    pub(crate) fn abort_matching(
        &self,
        by_deadline: bool,
        operation: Option<OperationTag>,
    ) -> usize {
        self.abort_walk(by_deadline, operation, None)
    }

    /// [`abort_matching`](Self::abort_matching) for the shutdown deadline:
    /// every task, marked as a deadline abort, with the first `limit` newly
    /// aborted tasks listed by name (the report's named stragglers).
    pub(crate) fn abort_at_deadline(&self, limit: usize) -> Stragglers {
        let mut stragglers = Stragglers::default();
        stragglers.total = self.abort_walk(true, None, Some((limit, &mut stragglers.listed)));
        stragglers
    }

    fn abort_walk(
        &self,
        by_deadline: bool,
        operation: Option<OperationTag>,
        mut listing: Option<(usize, &mut Vec<ListedTask>)>,
    ) -> usize {
        let mut newly = 0;
        self.walking.fetch_add(1, Ordering::Relaxed);
        let _walk = WalkGuard(&self.walking);
        for (index, shard) in self.shards.iter().enumerate() {
            let mut next: u32 = 0;
            // Sequences grow within a shard: the tasks this shard numbered
            // before the walk first locked it are the ones to abort.
            let mut last_seq = None;
            loop {
                let done = self.with_applied(shard, |state| {
                    let last_seq = *last_seq.get_or_insert(state.next_local * SHARDS as u64 + 1);
                    let end = state
                        .table
                        .high_water()
                        .min(next.saturating_add(ABORT_BATCH));
                    for (local, record, info) in state.table.records_mut(next..end) {
                        let matches = operation.is_none()
                            || info
                                .as_ref()
                                .is_some_and(|info| info.operation == operation);
                        if record.seq() < last_seq
                            && matches
                            && request_abort(record, &mut state.counters, by_deadline)
                        {
                            newly += 1;
                            if let (Some((limit, listed)), Some(info)) = (&mut listing, info) {
                                if listed.len() < *limit {
                                    listed.push(ListedTask {
                                        seq: record.seq(),
                                        slot: pack(local, index),
                                        name: info.name.clone(),
                                        kind: info.kind,
                                        started: info.started,
                                    });
                                }
                            }
                        }
                    }
                    next = end;
                    end >= state.table.high_water()
                });
                if done {
                    break;
                }
            }
        }
        newly
    }
}
