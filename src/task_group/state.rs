//! The spawn gate: admission state and the task table under one lock.
//!
//! | Phase | Registration | Set by |
//! | --- | --- | --- |
//! | `OPEN` | accepted (unless poisoned) | creation |
//! | `CLOSING` | rejected with `Closed` | shutdown seal, under the gate |
//! | `CLOSED` | rejected with `Closed` | shutdown, after the token is cancelled |
//! | `COMPLETED` | rejected with `Closed` | shutdown, after the local settlement is cached |
//!
//! Poisoning is a separate flag: set once, under the gate, by the settlement
//! of a task that panicked while the phase was `OPEN`.
//!
//! Every registration (task or child group) and every phase transition takes
//! the same mutex, so a submission racing a shutdown is either registered
//! before the seal (and then aborted or waited for by that shutdown) or
//! rejected: never lost. The Tokio handoff happens after the lock is released;
//! an abort requested before the abort handle is installed is recorded in the
//! record and honoured by [`Gate::install`].

use std::collections::HashMap;

use tokio::time::Instant;

use crate::loom::{AtomicBool, AtomicU8, Mutex, Ordering, Weak};
use crate::task_group::identity::{TaskGroupId, TaskKind, TaskName, TaskResult};
use crate::task_group::registry::{AbortTarget, TaskRecord, TaskTable};

pub(crate) const OPEN: u8 = 0;
pub(crate) const CLOSING: u8 = 1;
pub(crate) const CLOSED: u8 = 2;
pub(crate) const COMPLETED: u8 = 3;

/// Records aborted per gate acquisition by [`Gate::abort_matching`].
const ABORT_BATCH: u32 = 256;

/// Why the gate refused a registration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    Closed,
    Poisoned,
    /// The table cannot index more live tasks.
    Full,
}

/// Lifetime settlement counters of one group (read under the gate).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct SettleCounters {
    pub(crate) completed: u64,
    pub(crate) cancelled: u64,
    pub(crate) aborted: u64,
    pub(crate) panicked: u64,
    /// Tasks aborted by a shutdown deadline that have since settled.
    pub(crate) deadline_aborted_settled: u64,
    /// `component(...)` answers with a closed group while shutting down.
    pub(crate) closed_component_requests: u64,
    /// Live records whose abort was requested (destruction unconfirmed).
    pub(crate) live_abort_requested: u64,
}

/// Marks `record` aborted (once) and aborts it. Returns true if this is the
/// first request for it.
fn request_abort<H: AbortTarget>(
    record: &mut TaskRecord<H>,
    counters: &mut SettleCounters,
    by_deadline: bool,
) -> bool {
    let newly = !record.abort_requested;
    if newly {
        record.abort_requested = true;
        record.deadline_aborted = by_deadline;
        counters.live_abort_requested += 1;
    }
    if let Some(handle) = &record.handle {
        handle.abort();
    }
    newly
}

/// What a settlement changed, acted on after the lock is released.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SettleEffect {
    pub(crate) found: bool,
    pub(crate) idle: bool,
    pub(crate) poisoned_now: bool,
}

#[derive(Debug)]
#[repr(C)]
pub(crate) struct GateInner<H, C> {
    pub(crate) table: TaskTable<H>,
    pub(crate) counters: SettleCounters,
    /// Weak child links keyed by group id.
    pub(crate) children: HashMap<TaskGroupId, Weak<C>>,
}

/// Admission state + task table + child links of one group (`repr(C)`: the
/// lock and the table header lead, see `GroupInner`).
#[derive(Debug)]
#[repr(C)]
pub(crate) struct Gate<H, C> {
    inner: Mutex<GateInner<H, C>>,
    phase: AtomicU8,
    poisoned: AtomicBool,
}

impl<H: AbortTarget, C> Gate<H, C> {
    pub(crate) fn new(phase: u8) -> Self {
        Self {
            inner: Mutex::new(GateInner {
                table: TaskTable::new(),
                counters: SettleCounters::default(),
                children: HashMap::new(),
            }),
            phase: AtomicU8::new(phase),
            poisoned: AtomicBool::new(false),
        }
    }

    pub(crate) fn phase(&self) -> u8 {
        self.phase.load(Ordering::Acquire)
    }

    pub(crate) fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    fn admission(&self) -> Result<(), Refusal> {
        if self.phase.load(Ordering::Acquire) != OPEN {
            Err(Refusal::Closed)
        } else if self.poisoned.load(Ordering::Acquire) {
            Err(Refusal::Poisoned)
        } else {
            Ok(())
        }
    }

    /// Registers a task record if the gate is open. Returns `(seq, slot)`.
    pub(crate) fn register(
        &self,
        name: TaskName,
        kind: TaskKind,
        started: Instant,
    ) -> Result<(u64, u32), Refusal> {
        let mut inner = self.inner.lock();
        self.admission()?;
        inner.table.insert(name, kind, started).ok_or(Refusal::Full)
    }

    /// Registers a child link if the gate is open.
    pub(crate) fn register_child(&self, id: TaskGroupId, child: Weak<C>) -> Result<(), Refusal> {
        let mut inner = self.inner.lock();
        self.admission()?;
        inner.children.insert(id, child);
        Ok(())
    }

    pub(crate) fn unregister_child(&self, id: TaskGroupId) {
        self.inner.lock().children.remove(&id);
    }

    /// Installs the abort handle of a registered task, honouring an abort
    /// requested in between. A task that already settled drops the handle.
    pub(crate) fn install(&self, slot: u32, seq: u64, handle: H) {
        let mut inner = self.inner.lock();
        if let Some(record) = inner.table.get_mut(slot, seq) {
            if record.abort_requested {
                handle.abort();
            }
            record.handle = Some(handle);
        }
    }

    /// Requests an abort; true iff the task is still registered.
    pub(crate) fn abort(&self, slot: u32, seq: u64) -> bool {
        let inner = &mut *self.inner.lock();
        match inner.table.get_mut(slot, seq) {
            Some(record) => {
                request_abort(record, &mut inner.counters, false);
                true
            }
            None => false,
        }
    }

    /// Aborts every registered task matching `filter`; with `by_deadline`
    /// the tasks not already aborted are marked as deadline aborts. Returns
    /// how many tasks were newly aborted.
    ///
    /// The table is walked in batches, releasing the gate in between so the
    /// aborted tasks can settle concurrently. Every task registered when the
    /// call starts is aborted; on a sealed gate (the shutdown paths) that is
    /// every task.
    pub(crate) fn abort_matching(
        &self,
        by_deadline: bool,
        mut filter: impl FnMut(&TaskRecord<H>) -> bool,
    ) -> usize {
        let mut newly = 0;
        let mut next: u32 = 0;
        let last_seq = self.inner.lock().table.last_seq();
        loop {
            let inner = &mut *self.inner.lock();
            let end = inner
                .table
                .high_water()
                .min(next.saturating_add(ABORT_BATCH));
            for record in inner.table.records_mut(next..end) {
                if record.seq <= last_seq
                    && filter(record)
                    && request_abort(record, &mut inner.counters, by_deadline)
                {
                    newly += 1;
                }
            }
            if end >= inner.table.high_water() {
                return newly;
            }
            next = end;
        }
    }

    pub(crate) fn contains(&self, slot: u32, seq: u64) -> bool {
        self.inner.lock().table.contains(slot, seq)
    }

    pub(crate) fn len(&self) -> usize {
        self.inner.lock().table.len()
    }

    /// Removes a settled task and accounts its result (the future is already
    /// destroyed). Poisons the group if it panicked while open.
    pub(crate) fn settle(&self, slot: u32, seq: u64, result: TaskResult) -> SettleEffect {
        let mut inner = self.inner.lock();
        let Some(record) = inner.table.remove(slot, seq) else {
            return SettleEffect::default();
        };
        let counters = &mut inner.counters;
        match result {
            TaskResult::Completed => counters.completed += 1,
            TaskResult::Cancelled => counters.cancelled += 1,
            TaskResult::Aborted => counters.aborted += 1,
            TaskResult::Panicked => counters.panicked += 1,
        }
        if record.abort_requested {
            counters.live_abort_requested -= 1;
        }
        if record.deadline_aborted {
            counters.deadline_aborted_settled += 1;
        }
        let poisoned_now = result == TaskResult::Panicked
            && self.phase.load(Ordering::Acquire) == OPEN
            && !self.poisoned.swap(true, Ordering::AcqRel);
        SettleEffect {
            found: true,
            idle: inner.table.len() == 0,
            poisoned_now,
        }
    }

    /// Seals admission (`OPEN -> CLOSING`) and returns the live children.
    pub(crate) fn seal(&self) -> Vec<crate::loom::Arc<C>> {
        let inner = self.inner.lock();
        if self.phase.load(Ordering::Acquire) == OPEN {
            self.phase.store(CLOSING, Ordering::Release);
        }
        inner.children.values().filter_map(Weak::upgrade).collect()
    }

    /// Moves the phase forward to `to` (never backwards).
    pub(crate) fn advance(&self, to: u8) {
        let _inner = self.inner.lock();
        if self.phase.load(Ordering::Acquire) < to {
            self.phase.store(to, Ordering::Release);
        }
    }

    pub(crate) fn live_children(&self) -> Vec<crate::loom::Arc<C>> {
        let inner = self.inner.lock();
        inner.children.values().filter_map(Weak::upgrade).collect()
    }

    pub(crate) fn count_closed_component_request(&self) {
        self.inner.lock().counters.closed_component_requests += 1;
    }

    /// Runs `f` over the counters and the live records under the gate.
    pub(crate) fn with_inner<R>(&self, f: impl FnOnce(&GateInner<H, C>) -> R) -> R {
        f(&self.inner.lock())
    }
}
