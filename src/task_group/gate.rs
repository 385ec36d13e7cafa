//! The spawn gate: admission state, sharded task tables and child links.
//!
//! | Phase | Registration | Set by |
//! | --- | --- | --- |
//! | `OPEN` | accepted (unless poisoned) | creation |
//! | `CLOSING` | rejected with `Closed` | shutdown seal |
//! | `CLOSED` | rejected with `Closed` | shutdown, after the token is cancelled |
//! | `COMPLETED` | rejected with `Closed` | shutdown, after the local settlement is cached |
//!
//! Invariants:
//!
//! 1. Phases only move forward (`OPEN → CLOSING → CLOSED → COMPLETED`;
//!    `advance` is a `fetch_max`). Poisoning is a separate flag, set once by
//!    the settlement of a task that panicked while the phase was `OPEN`.
//! 2. The task table is split into [`SHARDS`] shards. A task lives for its
//!    whole life in the home shard of the thread that submitted it (see
//!    [`home_shard`]: threads are numbered in the order they first submit,
//!    thread `n` uses shard `n % SHARDS`). One submitting thread always uses
//!    one lock and one set of cache lines, while threads submitting into one
//!    shared group spread over the shards instead of queueing on one lock.
//!    Shards are not picked per task (round robin by sequence): that would
//!    move another lock's cache lines between the spawning and the completing
//!    core for every task. Walks (aborts, the seal, reports) visit every
//!    shard.
//! 3. Each shard has two sides on separate cache lines. The *registration
//!    side* (table lock, a `parking_lot` mutex over the slab, its counters and
//!    the shard's sequence counter; the `registered` count) is taken by
//!    submissions, aborts, walks and reports. The *settlement side* (settle
//!    lock over the pending settlements and start stamps; the `settled` count)
//!    is all a settling task touches. Child links have their own lock. Per
//!    task: one table lock to register and one to install the handle, both on
//!    the submitting thread's lines, one settle lock on the completing
//!    worker's line; no global lock and no group-wide sequence counter.
//! 4. A registration ([`Gate::register`]) takes its home shard's table lock,
//!    checks the phase (`OPEN`) and the poison flag, numbers the task from the
//!    shard's own counter (`next_local * SHARDS + shard + 1`: group-unique,
//!    never reused, increasing within the shard), inserts the record and
//!    counts it in `registered`: from then on `contains_task`, `task_count`
//!    and any shutdown that seals later see it. Every
//!    [`REGISTER_APPLY_EVERY`]th registration of a shard (and one that finds
//!    the table full) first applies the shard's pending stamps and
//!    settlements, so the submitting thread removes the records it wrote while
//!    they are in its cache. A registration also takes one retained handle of
//!    a removed record and drops it after its lock (see `registry.rs`). It
//!    never waits for a settlement: the two sides have separate locks.
//! 5. The Tokio handoff happens after the table lock is released, and
//!    [`Gate::install`] then stores the task's join handle (an abort handle
//!    when the caller keeps the join handle); an abort requested in between
//!    (by `abort_task` or a shutdown deadline) is recorded in the record and
//!    honoured there. The lock is not held across Tokio's spawn: a runtime
//!    that is shutting down drops the future inside `spawn`, and its
//!    destructor (or its settlement, or an operation observer) may spawn into
//!    the same group from the same thread, which would deadlock on the table
//!    lock. `install` does not apply pending settlements: it writes a handle
//!    into a record that is live or pending, and a pending record gives its
//!    handle up when applied.
//! 6. A settlement ([`Gate::settle`]) only appends its result to the pending
//!    list under its settle lock, poisons the group if it panicked while
//!    `OPEN` (once), and raises `settled`. The settled count is published only
//!    after the task's future is destroyed, and a pending settlement is
//!    invisible except through that count.
//! 7. Idleness: when `settled` catches up with the last `registered` count
//!    the settler read, a `SeqCst` fence, then the shard's and the other
//!    shards' counts decide whether the group is idle. Of two last
//!    settlements in different shards at least one reads the other's count
//!    after it rose, so the group's idleness is always reported, and an idle
//!    watcher registered before the last settlement is seen (loom-modelled,
//!    also for a shard that skipped its idle check below a known count).
//! 8. Live = `registered − settled`, with `settled` read first, so it never
//!    underflows. `len` (`task_count`) takes every table lock, in shard
//!    order, while the gate is open: a task on one shard may register another
//!    on a shard already read and then settle, so a lock-free sum could read
//!    zero for a group that was never empty (loom-modelled). Once sealed the
//!    counts only fall and the lock-free sum is read.
//! 9. The pending list is applied to the table (records removed, results
//!    counted, a deadline-aborted task that did not complete counted as a
//!    timeout): by every reader first (abort, walk, `contains`, report), under
//!    its table lock; by every `REGISTER_APPLY_EVERY`th registration; by a
//!    settler whose shard went idle (at once: it trims the table); and by a
//!    settler once [`SETTLER_APPLY`] settlements or stamps wait, only if the
//!    table lock is free (`try_lock`). A settler that finds the table locked
//!    leaves its batch to the holder instead of queueing behind it
//!    (loom-modelled), and so does a settler (or stamper) while an abort walk
//!    runs (`walking`): the walk applies the shard it is on at every batch,
//!    and two threads applying at once drop the last references to task
//!    cells on both, so both free into the allocator at once (glibc's arena
//!    lock then sends them through futex waits). A batch left on a shard the
//!    walk has passed waits for the walk's end, a reader, the shard going
//!    idle or a registration, bounded by the shard's live tasks. Settlers do not apply every batch
//!    themselves: a completing worker would pull the records' cache lines
//!    over and the next registration, reusing those slots first, would pull
//!    them back.
//! 10. A settlement published while a reader holds the table lock stays
//!     pending, exactly like a task that is settling but not yet counted: no
//!     reader sees a settled task as live or counts it twice (loom-modelled
//!     against a deadline walk and a report).
//! 11. A group task's start time is published like a settlement: a *stamp*
//!     appended by its first poll that returned `Pending`, applied before the
//!     settlements of the same application, so it never lands on the task
//!     that reuses the slot, and a stamp whose record is gone is dropped
//!     (loom-modelled). The submitting thread reads no clock; a task that
//!     completes in its first poll never needs a start time. The price: a
//!     remaining task's `elapsed` counts from its first `Pending`, and a task
//!     Tokio has not polled yet reports none.
//! 12. [`Gate::seal`] stores `CLOSING` while holding the child-link lock,
//!     every table lock and every settle lock, and seals every table (no more
//!     compaction or handle retention). A registration reads the phase under
//!     its table lock and a settlement deciding poisoning reads it under its
//!     settle lock, so each is wholly before or wholly after the seal: a
//!     submission racing a shutdown is registered before the seal (then waited
//!     for or aborted) or rejected with `Closed`, never lost; a panic poisons
//!     only if it settled before the seal, and never after an observer saw the
//!     group sealed and unpoisoned (loom-modelled).
//! 13. Lock order: the child-link lock, then table locks in shard order, then
//!     settle locks in shard order. A settler holds only its settle lock and
//!     releases it before applying (table lock, then settle lock for each
//!     batch copy). Freed handles and chunks are dropped after the table lock.
//! 14. Aborts are requested in place under the table lock, the handle staying
//!     in its record (aborting only schedules the task: Tokio never polls or
//!     drops a future inside `abort`, and the task's settlement takes its
//!     settle lock, and the table lock only after releasing it). A walk
//!     (`abort_matching`) locks each shard in batches of `ABORT_BATCH` (256)
//!     records per hold while the aborted tasks settle concurrently; its bound
//!     is per shard: the tasks the shard numbered before the walk first locked
//!     it, which on a sealed gate is every task.
//! 15. Memory: the pending settlements and stamps are bounded by the shard's
//!     live tasks, copied out in batches of [`APPLY_BATCH`] (so settlers wait
//!     at most for one batch's copy), and keep their capacity; a shard's table
//!     keeps one chunk once it has held a task, and at most `RETAINED_HANDLES`
//!     handles of finished tasks (see `registry.rs`).
//! 16. Under loom the models run against this very `Gate` (generic over the
//!     abort handle so a model can record aborts); registrations rotate over
//!     the shards, settlers apply at two pending entries, batches copy one
//!     entry and every registration applies, so the models reach every
//!     application path.
//! 17. Failure evidence: applying the settlement of a task that panicked or
//!     failed first copies its name and kind from its record into the
//!     shard's failure list (at most [`TaskFailure::LIMIT`] per shard, the
//!     rest counted), so the name survives the record; only a failure pays
//!     for it. The child-link lock also guards the evidence released
//!     children leave behind (`task_group.rs`, invariant 7).

use std::collections::BTreeMap;

use tokio::time::Instant;

use crate::loom::{fence, AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Mutex, Ordering, Weak};
use crate::shutdown_report::{push_failure, ReleasedGroup, ReleasedGroups, TaskFailure};
#[cfg(all(test, not(loom)))]
use crate::task_group::registry::seq_check;
use crate::task_group::registry::{AbortTarget, OperationTag, SeqCheck, TaskTable, MAX_SLOTS};
use crate::task_identity::{TaskEnd, TaskGroupId, TaskKind, TaskName};

pub(crate) const OPEN: u8 = 0;
pub(crate) const CLOSING: u8 = 1;
pub(crate) const CLOSED: u8 = 2;
pub(crate) const COMPLETED: u8 = 3;

/// Shards of a group's task table.
///
/// Shards are picked per submitting thread ([`home_shard`]), not per task:
/// sharding by sequence number (one shard per task, round robin) would
/// move a different lock's cache lines between the spawning and the
/// completing core for every task. With per-thread shards a single
/// submitter costs what one shard costs, and eight threads submitting into
/// one group contend on four locks instead of one.
pub(crate) const SHARDS: usize = 4;

mod abort;
pub(crate) use abort::Stragglers;
mod shard;
mod visit;

use shard::*;
pub(crate) use shard::{SettleCounters, SettleEffect, SETTLER_APPLY};

/// Why the gate refused a registration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    Closed,
    Poisoned,
    /// The table cannot index more live tasks.
    Full,
}

/// A listed live task, copied out of a shard for a report.
#[derive(Debug)]
pub(crate) struct ListedTask {
    pub(crate) seq: u64,
    pub(crate) slot: u32,
    pub(crate) name: TaskName,
    pub(crate) kind: TaskKind,
    pub(crate) started: Option<Instant>,
}

/// Counters, live count and the first listed tasks of a whole gate.
#[derive(Debug, Default)]
pub(crate) struct GateSnapshot {
    pub(crate) counters: SettleCounters,
    pub(crate) live: usize,
    pub(crate) listed: Vec<ListedTask>,
    /// The first [`TaskFailure::LIMIT`] failed tasks by name, shard by
    /// shard.
    pub(crate) failures: Vec<TaskFailure>,
    /// Failed tasks beyond `failures`.
    pub(crate) failures_omitted: usize,
}

/// Admission state + sharded task tables + child links of one group.
#[derive(Debug)]
pub(crate) struct Gate<H, C> {
    shards: [Shard<H>; SHARDS],
    /// Under loom registrations rotate over the shards (a model-visible
    /// counter), so the models explore different shards racing the seal.
    #[cfg(loom)]
    next_home: AtomicUsize,
    phase: AtomicU8,
    poisoned: AtomicBool,
    /// Abort walks in progress: while one runs, settlers and stampers leave
    /// full batches pending (invariant 9).
    walking: AtomicUsize,
    children: Mutex<Children<C>>,
}

#[derive(Debug)]
struct Children<C> {
    /// Ordered by id (creation order): a bounded visit takes the first
    /// entries at the cost of the entries it takes, however many children
    /// came and went (see [`Gate::child_entries`]).
    links: BTreeMap<TaskGroupId, Weak<C>>,
    /// `component(...)` requests this group answered with a closed group.
    closed_requests: u64,
    /// The evidence of children that left (see
    /// `shutdown_report/released.rs`): folded in under this lock by the
    /// unregistration itself, so a reader that sees a link gone sees its
    /// evidence.
    released: ReleasedGroups,
}

/// Packs a shard-local slot and the shard index into a task's `slot`.
fn pack(local: u32, shard: usize) -> u32 {
    local * SHARDS as u32 + shard as u32
}

fn unpack(slot: u32) -> (u32, usize) {
    (slot / SHARDS as u32, (slot % SHARDS as u32) as usize)
}

impl<H: AbortTarget, C> Gate<H, C> {
    pub(crate) fn new(phase: u8) -> Self {
        Self {
            phase: AtomicU8::new(phase),
            walking: AtomicUsize::new(0),
            poisoned: AtomicBool::new(false),
            shards: std::array::from_fn(|_| Shard {
                reg: RegSide {
                    registered: AtomicU64::new(0),
                    state: Mutex::new(ShardState {
                        next_local: 0,
                        table: TaskTable::new(),
                        counters: SettleCounters::default(),
                        failures: Vec::new(),
                        failures_omitted: 0,
                        panic_messages: Vec::new(),
                    }),
                },
                settle: SettleSide {
                    settled: AtomicU64::new(0),
                    pending: Mutex::new(Pending::default()),
                },
            }),
            #[cfg(loom)]
            next_home: AtomicUsize::new(0),
            children: Mutex::new(Children {
                links: BTreeMap::new(),
                closed_requests: 0,
                released: ReleasedGroups::default(),
            }),
        }
    }

    pub(crate) fn phase(&self) -> u8 {
        self.phase.load(Ordering::Acquire)
    }

    pub(crate) fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    /// Read while holding a shard or the child lock (see module docs).
    fn admission(&self) -> Result<(), Refusal> {
        if self.phase.load(Ordering::SeqCst) != OPEN {
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
        started: Option<Instant>,
        operation: Option<OperationTag>,
    ) -> Result<(u64, u32), Refusal> {
        #[cfg(not(loom))]
        let shard = home_shard();
        #[cfg(loom)]
        let shard = self.next_home.fetch_add(1, Ordering::Relaxed) % SHARDS;
        let home = &self.shards[shard];
        // Declared before the guard: dropped after it on every return.
        let mut graveyard = Graveyard::new();
        let mut state = home.reg.state.lock();
        self.admission()?;
        let seq = state.next_local * SHARDS as u64 + shard as u64 + 1;
        if state.next_local % REGISTER_APPLY_EVERY == 0 || state.table.is_full() {
            // Pending settlements may free room.
            state.apply_pending(&home.settle, &mut graveyard);
        }
        let (local, retained) = state
            .table
            .insert(seq, name, kind, started, operation)
            .ok_or(Refusal::Full)?;
        state.next_local += 1;
        // Only holders of this table lock change the count: a plain store
        // suffices (no read-modify-write).
        home.reg.registered.store(
            home.reg.registered.load(Ordering::Relaxed) + 1,
            Ordering::Release,
        );
        drop(state);
        drop(retained);
        drop(graveyard);
        Ok((seq, pack(local, shard)))
    }

    /// Registers a child link if the gate is open.
    pub(crate) fn register_child(&self, id: TaskGroupId, child: Weak<C>) -> Result<(), Refusal> {
        let mut children = self.children.lock();
        self.admission()?;
        children.links.insert(id, child);
        Ok(())
    }

    /// Removes a child link and folds the child's evidence into this
    /// gate's released groups under the same lock (a child that was never
    /// registered, refused at creation, folds nothing).
    pub(crate) fn unregister_child(&self, id: TaskGroupId, evidence: &ReleasedGroup) {
        let mut children = self.children.lock();
        if children.links.remove(&id).is_some() {
            children.released.fold(evidence);
        }
    }

    /// The released children's evidence so far.
    pub(crate) fn released(&self) -> ReleasedGroups {
        self.children.lock().released.clone()
    }

    /// Whether a child link is expired: its group is being dropped and
    /// has not yet folded its evidence in.
    pub(crate) fn has_dropping_child(&self) -> bool {
        let children = self.children.lock();
        children
            .links
            .values()
            .any(|child| child.strong_count() == 0)
    }

    /// The first `limit` child entries, oldest first, each with its group
    /// when it is still alive (`None`: an expired entry whose group is
    /// being dropped), and whether more entries follow. Costs the entries
    /// taken.
    pub(crate) fn child_entries(&self, limit: usize) -> (Vec<Option<crate::loom::Arc<C>>>, bool) {
        let children = self.children.lock();
        let taken = children
            .links
            .values()
            .take(limit)
            .map(Weak::upgrade)
            .collect();
        (taken, children.links.len() > limit)
    }

    /// Installs the handle (join or abort) of a registered task, honouring an abort
    /// requested in between. A task whose settlement was already applied
    /// drops the handle; one whose settlement is pending keeps it in its
    /// record until the settlement is applied.
    pub(crate) fn install(&self, slot: u32, seq: u64, handle: H) {
        let (local, shard) = unpack(slot);
        let mut state = self.shards[shard].reg.state.lock();
        match state.table.get_mut(local, seq) {
            Some(record) if !record.abort_requested() => record.handle = Some(handle),
            Some(_) => {
                drop(state);
                handle.abort();
            }
            None => {}
        }
    }

    /// Runs `f` on `shard`'s table under its table lock, after applying the
    /// settlements published before the call. A settlement published while
    /// `f` runs stays pending: like a task that is settling (its future
    /// destroyed) but not yet counted, `f` still sees its record. Freed
    /// handles and chunks are dropped after the lock is released.
    fn with_applied<R>(&self, shard: &Shard<H>, f: impl FnOnce(&mut ShardState<H>) -> R) -> R {
        let mut graveyard = Graveyard::new();
        let mut state = shard.reg.state.lock();
        state.apply_pending(&shard.settle, &mut graveyard);
        let result = f(&mut state);
        drop(state);
        drop(graveyard);
        result
    }

    /// Applies `shard`'s pending settlements (a full batch, or a shard that
    /// went idle and may trim its table).
    fn apply_pending(&self, shard: &Shard<H>) {
        self.with_applied(shard, |_| ());
    }

    /// [`apply_pending`](Self::apply_pending) if `shard`'s table lock is
    /// free now.
    fn try_apply_pending(&self, shard: &Shard<H>) {
        let mut graveyard = Graveyard::new();
        if let Some(mut state) = shard.reg.state.try_lock() {
            state.apply_pending(&shard.settle, &mut graveyard);
        }
        drop(graveyard);
    }

    pub(crate) fn contains(&self, slot: u32, seq: u64) -> bool {
        let (local, shard) = unpack(slot);
        self.with_applied(&self.shards[shard], |state| {
            state.table.contains(local, seq)
        })
    }

    /// Registered tasks at one moment.
    ///
    /// While the gate is open, a task on one shard may register another on
    /// a shard already read and then settle, so a lock-free sum could read
    /// zero for a group that was never empty: the count is then taken under
    /// every table lock (in index order, as the seal takes them), which
    /// stops registrations while settlements only lower the counts. Once
    /// sealed the counts only fall, and the lock-free sum is zero exactly
    /// when the group is empty (the shutdown waits poll it without locks).
    pub(crate) fn len(&self) -> usize {
        // The load side of the idle-watcher handshake (a watcher registers
        // with a SeqCst read-modify-write, then counts).
        crate::loom::seq_cst_handshake();
        if self.phase() == OPEN {
            let _held = self.shards.each_ref().map(|shard| shard.reg.state.lock());
            return self.live_sum();
        }
        self.live_sum()
    }

    fn live_sum(&self) -> usize {
        self.shards.iter().map(|shard| shard.live() as usize).sum()
    }

    /// Publishes a settled task (the future is already destroyed): appends
    /// its result to the shard's pending settlements and raises the settled
    /// count. Poisons the group if it panicked while open. Applies the
    /// pending settlements when a batch filled or the shard went idle.
    /// Keeps a panicked task's message until its settlement is applied
    /// (then it joins the task's named failure). Cold: a panic.
    #[cold]
    pub(crate) fn note_panic(&self, slot: u32, check: SeqCheck, message: String) {
        let (local, shard) = unpack(slot);
        self.shards[shard]
            .reg
            .state
            .lock()
            .panic_messages
            .push((local, check, message));
    }

    pub(crate) fn settle(&self, slot: u32, check: SeqCheck, result: TaskEnd) -> SettleEffect {
        let (local, shard) = unpack(slot);
        let home = &self.shards[shard];
        let mut pending = home.settle.pending.lock();
        pending.entries.push(PendingSettle {
            local,
            check,
            result,
        });
        let poisoned_now = result == TaskEnd::Panicked
            && self.phase.load(Ordering::Acquire) == OPEN
            && !self.poisoned.swap(true, Ordering::AcqRel);
        // Only holders of this settle lock change the count.
        let settled = home.settle.settled.load(Ordering::Relaxed) + 1;
        home.settle.settled.store(settled, Ordering::Release);
        let mut shard_idle = false;
        if settled >= pending.known_registered {
            // The shard may be idle. The fence orders the count above before
            // the reads below: of two last settlements in different shards,
            // at least one reads the other's count after it rose, so the
            // group's idleness is always reported (and an idle watcher
            // registered before the last settlement is seen). A shard still
            // below its known registrations is busy and needs neither.
            fence(Ordering::SeqCst);
            let registered = home.reg.registered.load(Ordering::SeqCst);
            pending.known_registered = registered;
            shard_idle = registered == settled;
        }
        let batch_full = pending.entries.len() >= SETTLER_APPLY;
        drop(pending);
        let idle = shard_idle
            && self
                .shards
                .iter()
                .enumerate()
                .all(|(index, other)| index == shard || other.live() == 0);
        if shard_idle {
            self.apply_pending(home);
        } else if batch_full && self.walking.load(Ordering::Relaxed) == 0 {
            // A full batch does not wait for a busy table (or one an abort
            // walk is applying batch by batch, invariant 9): it stays
            // pending until a reader or walk applies it (they apply
            // first), the next 32nd registration, or the next settlement
            // that finds the lock free (bounded by the shard's live tasks).
            // An idle shard is applied at once (it trims).
            self.try_apply_pending(home);
        }
        SettleEffect { idle, poisoned_now }
    }

    /// Publishes when a registered task started (its first poll returned
    /// `Pending`): written to its record when the shard's pending
    /// settlements are next applied, which every reader does first. A
    /// settler applies them itself once [`SETTLER_APPLY`] stamps wait and
    /// the table lock is free.
    pub(crate) fn stamp(&self, slot: u32, check: SeqCheck, at: Instant) {
        let (local, shard) = unpack(slot);
        let home = &self.shards[shard];
        let mut pending = home.settle.pending.lock();
        pending.stamps.push(PendingStamp { local, check, at });
        let full = pending.stamps.len() >= SETTLER_APPLY;
        drop(pending);
        if full && self.walking.load(Ordering::Relaxed) == 0 {
            self.try_apply_pending(home);
        }
    }

    /// Seals admission (`OPEN -> CLOSING`), waits out registrations that saw
    /// `OPEN`, and returns the live children.
    pub(crate) fn seal(&self) -> Vec<crate::loom::Arc<C>> {
        let children = self.children.lock();
        // Every table and settle lock is held while the phase changes: a
        // registration reads the phase under its table lock and a
        // settlement (which decides poisoning) under its settle lock, so
        // each is wholly before or wholly after the seal.
        let mut tables: Vec<_> = self
            .shards
            .iter()
            .map(|shard| shard.reg.state.lock())
            .collect();
        let settles: Vec<_> = self
            .shards
            .iter()
            .map(|shard| shard.settle.pending.lock())
            .collect();
        let _ = self
            .phase
            .compare_exchange(OPEN, CLOSING, Ordering::SeqCst, Ordering::SeqCst);
        for table in &mut tables {
            table.table.seal();
        }
        drop(settles);
        drop(tables);
        children.links.values().filter_map(Weak::upgrade).collect()
    }

    /// Moves the phase forward to `to` (never backwards).
    pub(crate) fn advance(&self, to: u8) {
        self.phase.fetch_max(to, Ordering::SeqCst);
    }

    pub(crate) fn live_children(&self) -> Vec<crate::loom::Arc<C>> {
        let children = self.children.lock();
        children.links.values().filter_map(Weak::upgrade).collect()
    }

    pub(crate) fn component_count(&self) -> usize {
        let children = self.children.lock();
        children
            .links
            .values()
            .filter(|child| child.strong_count() > 0)
            .count()
    }

    pub(crate) fn count_closed_component_request(&self) {
        self.children.lock().closed_requests += 1;
    }

    pub(crate) fn closed_component_requests(&self) -> u64 {
        self.children.lock().closed_requests
    }

    /// Sums the counters and lists up to `limit` live tasks, each shard read
    /// under its locks with its pending settlements applied (counters and
    /// records of one shard are consistent).
    pub(crate) fn snapshot(&self, limit: usize) -> GateSnapshot {
        let mut snapshot = GateSnapshot::default();
        for (index, shard) in self.shards.iter().enumerate() {
            self.with_applied(shard, |state| {
                snapshot.counters.add(&state.counters);
                snapshot.live += state.table.len();
                snapshot.failures_omitted += state.failures_omitted;
                for failure in &state.failures {
                    push_failure(
                        &mut snapshot.failures,
                        &mut snapshot.failures_omitted,
                        failure.clone(),
                    );
                }
                let room = limit.saturating_sub(snapshot.listed.len());
                let listed = state.table.live().take(room);
                snapshot
                    .listed
                    .extend(listed.map(|(local, record, info)| ListedTask {
                        seq: record.seq(),
                        slot: pack(local, index),
                        name: info.name.clone(),
                        kind: info.kind,
                        started: info.started,
                    }));
            });
        }
        snapshot
    }
}

// `MAX_SLOTS * SHARDS` must fit the packed `u32` slot.
const _: () = assert!((MAX_SLOTS as u64) * (SHARDS as u64) <= u32::MAX as u64);

#[cfg(all(test, not(loom)))]
mod tests;
