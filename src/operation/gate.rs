//! The admission gate of one operation: a state word and an owner binding.
//!
//! The state word packs three flags, the owner-held bit, the idle watchers and
//! the active count:
//!
//! | Bits | Meaning |
//! | --- | --- |
//! | 63 `CLOSED` | admission is closed (`close_admission`, `cancel`, `wait_with_policy`) |
//! | 62 `CANCELLED` | the operation is cancelled (implies `CLOSED`) |
//! | 61 `ABORTING` | `wait_with_policy` is aborting the tasks (implies `CLOSED`) |
//! | 60 `HELD` | the operation holds its owner group (invariant 5) |
//! | 32..60 | idle watchers (waits in progress) |
//! | 0..32 | accepted tasks whose settlement has not been published |
//!
//! Invariants:
//!
//! 1. An admission is one compare-and-swap that adds one only while `CLOSED`
//!    is clear, so once `close`/`cancel` return no submission is ever
//!    accepted again and the count only falls (loom-modelled).
//! 2. A task is admitted *before* it is registered with the owner group and
//!    released only *after* the owner has removed its record and its outcome
//!    is counted: whenever the count reads zero, the owner lists no task of
//!    the operation and every outcome is published (loom-modelled, with the
//!    task completing on another thread before its submitter returns).
//! 3. Idle notification needs no fence: watchers and the count share the
//!    word. A waiter adds itself with a read-modify-write and then reads the
//!    count; a release subtracts and sees, in the value it replaced, whether
//!    anyone watches. Both act on one location, so either the waiter's read
//!    follows the release (it sees the count drop) or the release follows the
//!    registration (it sees the watcher and notifies): a waiter is never left
//!    asleep on an idle operation. With the watchers in a second atomic and
//!    `SeqCst` loads on both sides, this handshake fails under loom (which
//!    models `SeqCst` accesses as acquire/release); with one word, the
//!    read-modify-writes are ordered by the location itself.
//! 4. The owner binding is a group id written once, under the small `bind`
//!    lock, by the first submission the owner group accepted: of two first
//!    submissions into different groups exactly one binds and the other is
//!    refused as a wrong owner, counting nothing (loom-modelled). A refused
//!    registration rolls the admission back (waking idle waiters if it was
//!    the last) and binds nothing. `close_for` checks the owner under the same
//!    lock as it closes, so no other group binds in between (loom-modelled).
//! 5. An operation holds a reference to its owner group only while it has
//!    accepted tasks: their settlements reach the owner through it. The
//!    reference lives in a slot beside the gate, and `HELD` says it is there.
//!    A submission whose admission found `HELD` clear records the owner (a
//!    weak reference, as tasks reach it) and stores the strong one, under the
//!    slot's lock and before setting `HELD`, all before its task is handed to
//!    Tokio; a submission that finds `HELD` set skips this and still finds
//!    both. The release that makes the operation idle takes the reference
//!    back, under the same lock, with a compare-and-swap that clears `HELD`
//!    only while the count is zero. So every accepted task finds its owner
//!    (its own admission keeps the count above zero until it is released),
//!    and an idle operation keeps no group alive (loom-modelled).
//! 6. A hard stop (`wait_with_policy`) stores the `ABORTING` mark (also in
//!    `aborting`, off the hot line) before it closes and walks the owner's
//!    tables; a submitter reads it after registering, under a table lock the
//!    walk also takes, so either the walk sees the task or the submitter
//!    aborts it (loom-modelled).
//! 7. Layout (`repr(C)`): the state word and the six outcome counters share
//!    the reference counts' cache line (every settlement writes them); the
//!    owner binding and the aborting mark, which submissions only read, start
//!    on the next line.

use crate::loom::{AtomicBool, AtomicU64, Mutex, Ordering};

const CLOSED: u64 = 1 << 63;
const CANCELLED: u64 = 1 << 62;
const ABORTING: u64 = 1 << 61;
const HELD: u64 = 1 << 60;
const WATCHER: u64 = 1 << 32;
const WATCHERS: u64 = (HELD - 1) & !ACTIVE;
const ACTIVE: u64 = WATCHER - 1;
/// No owner group bound yet (group ids start at 1).
const UNBOUND: u64 = 0;

/// Why a submission was refused before it reached the owner group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Admission is closed (or the operation cancelled).
    Closed,
    /// The operation is bound to another owner group.
    WrongOwner,
    /// The active count is at its maximum (2^32 - 1 tasks).
    Full,
}

/// Admission, active count and owner binding of one operation (`repr(C)`:
/// the state word comes first).
#[derive(Debug, Default)]
#[repr(C)]
pub(crate) struct OperationGate {
    state: AtomicU64,
    /// The operation's six outcome counters (owned by `OperationShared`),
    /// next to the state word: every settlement writes both. What a
    /// submission only reads (the owner, the aborting mark) comes after
    /// them, at least 64 bytes past the state word, the reference counts
    /// and the `Completed` counter, so a submission's reads never wait for
    /// the line a completing worker just wrote (only the rarely written
    /// `Aborted` counter can share their line).
    pub(crate) outcomes: [AtomicU64; 6],
    owner: AtomicU64,
    /// Set (with the `ABORTING` bit) by [`start_aborting`](Self::start_aborting):
    /// the submitter's check after registering reads this, off the hot line.
    aborting: AtomicBool,
    /// Serialises the first (binding) submission with other first
    /// submissions and with the installation of an outcome observer.
    bind: Mutex<()>,
}

impl OperationGate {
    /// Admits one task unless admission is closed or the operation is bound
    /// to a group other than `group`; on success `register` runs (with the
    /// task already counted). If `register` fails the admission is rolled
    /// back (`Err(Failed)`, whose `notify` tells whether to wake idle
    /// waiters; an owner reference the rollback took from `hold` is dropped
    /// here, while the caller still holds the group). The first successful
    /// registration binds the operation to `group`.
    ///
    /// When the result's `owner_held` is false, the caller must
    /// [`hold_owner`](Self::hold_owner) before it hands the task to Tokio.
    pub(crate) fn submit<R, E, T>(
        &self,
        group: u64,
        hold: &Mutex<Option<T>>,
        register: impl FnOnce() -> Result<R, E>,
    ) -> Result<Accepted<R>, Submission<E>> {
        debug_assert_ne!(group, UNBOUND);
        let owner = self.owner.load(Ordering::Acquire);
        if owner == group {
            return self.admit_and(hold, register);
        }
        if owner != UNBOUND {
            return Err(Submission::Refused(Refused::WrongOwner));
        }
        let _binding = self.bind.lock();
        match self.owner.load(Ordering::Acquire) {
            UNBOUND => {}
            owner if owner == group => {}
            _ => return Err(Submission::Refused(Refused::WrongOwner)),
        }
        let accepted = self.admit_and(hold, register)?;
        self.owner.store(group, Ordering::Release);
        Ok(accepted)
    }

    fn admit_and<R, E, T>(
        &self,
        hold: &Mutex<Option<T>>,
        register: impl FnOnce() -> Result<R, E>,
    ) -> Result<Accepted<R>, Submission<E>> {
        let owner_held = self.admit().map_err(Submission::Refused)?;
        match register() {
            Ok(registered) => Ok(Accepted {
                registered,
                owner_held,
            }),
            Err(error) => {
                let Released { notify, owner } = self.release(hold);
                drop(owner);
                Err(Submission::Failed { error, notify })
            }
        }
    }

    /// Counts one accepted task unless admission is closed; true when the
    /// operation already held its owner (`HELD` was set).
    fn admit(&self) -> Result<bool, Refused> {
        let mut state = self.state.load(Ordering::SeqCst);
        loop {
            if state & CLOSED != 0 {
                return Err(Refused::Closed);
            }
            if state & ACTIVE == ACTIVE {
                return Err(Refused::Full);
            }
            match self.state.compare_exchange_weak(
                state,
                state + 1,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => return Ok(state & HELD != 0),
                Err(current) => state = current,
            }
        }
    }

    /// After an admission that found `HELD` clear: stores the owner
    /// reference (`owner`) unless another submission already did, and sets
    /// `HELD`. The count includes the caller's admission, so no release can
    /// take the reference back before that task is released.
    ///
    /// `owner` runs before `HELD` is set: what it records (the owner as the
    /// tasks reach it) is visible to every submission whose admission then
    /// finds `HELD` set and skips this call, and so to its task.
    pub(crate) fn hold_owner<T>(&self, hold: &Mutex<Option<T>>, owner: impl FnOnce() -> T) {
        let mut slot = hold.lock();
        if slot.is_none() {
            *slot = Some(owner());
        }
        self.state.fetch_or(HELD, Ordering::SeqCst);
    }

    /// Releases one accepted task (after its outcome is counted). `notify`
    /// is true when this made the operation idle while someone watches;
    /// `owner` is the owner reference when this made it idle and no
    /// admission came in between (drop it once nothing else is locked: it
    /// may be the group's last reference).
    pub(crate) fn release<T>(&self, hold: &Mutex<Option<T>>) -> Released<T> {
        let previous = self.state.fetch_sub(1, Ordering::SeqCst);
        debug_assert!(previous & ACTIVE != 0, "release without admission");
        let idle = previous & ACTIVE == 1;
        let mut released = Released {
            notify: idle && previous & WATCHERS != 0,
            owner: None,
        };
        if idle && previous & HELD != 0 {
            let mut slot = hold.lock();
            let mut state = self.state.load(Ordering::SeqCst);
            // An admission that found `HELD` set counts on the reference:
            // clear it only while nothing is admitted.
            while state & ACTIVE == 0 && state & HELD != 0 {
                match self.state.compare_exchange_weak(
                    state,
                    state & !HELD,
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                ) {
                    Ok(_) => {
                        released.owner = slot.take();
                        break;
                    }
                    Err(current) => state = current,
                }
            }
        }
        released
    }

    /// Closes admission (with `cancel`, also marks the operation cancelled)
    /// unless it is bound to a group other than `group`, which changes
    /// nothing. Serialised with the first submission, which binds under
    /// the same lock: no other group can bind between the check and the
    /// close. `Ok(true)` when this call cancelled the operation first.
    pub(crate) fn close_for(&self, group: u64, cancel: bool) -> Result<bool, Refused> {
        let _binding = self.bind.lock();
        match self.owner.load(Ordering::Acquire) {
            UNBOUND => {}
            owner if owner == group => {}
            _ => return Err(Refused::WrongOwner),
        }
        if cancel {
            Ok(self.cancel())
        } else {
            self.close();
            Ok(false)
        }
    }

    /// Closes admission and marks the tasks as being aborted: a submission
    /// admitted before the close but registered with its owner only after
    /// the abort walk passed sees the mark (SeqCst, after registering) and
    /// aborts its own task, so a hard stop misses no task.
    pub(crate) fn start_aborting(&self) {
        self.aborting.store(true, Ordering::SeqCst);
        self.state.fetch_or(CLOSED | ABORTING, Ordering::SeqCst);
    }

    /// True once [`start_aborting`](Self::start_aborting) ran. The mark is
    /// stored before the stop walks the owner's tables, and a submitter
    /// reads it after registering under a table lock the walk also takes:
    /// either the walk sees the task or the submitter sees the mark.
    pub(crate) fn is_aborting(&self) -> bool {
        self.aborting.load(Ordering::SeqCst)
    }

    /// Closes admission. Running tasks are unaffected.
    pub(crate) fn close(&self) {
        self.state.fetch_or(CLOSED, Ordering::SeqCst);
    }

    /// Closes admission and marks the operation cancelled; true the first time.
    pub(crate) fn cancel(&self) -> bool {
        self.state.fetch_or(CLOSED | CANCELLED, Ordering::SeqCst) & CANCELLED == 0
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.state.load(Ordering::SeqCst) & CANCELLED != 0
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.state.load(Ordering::SeqCst) & CLOSED != 0
    }

    /// Accepted tasks whose settlement is not yet published.
    pub(crate) fn active(&self) -> usize {
        (self.state.load(Ordering::SeqCst) & ACTIVE) as usize
    }

    /// The bound owner group's id, if any submission was accepted.
    pub(crate) fn owner(&self) -> Option<u64> {
        match self.owner.load(Ordering::Acquire) {
            UNBOUND => None,
            owner => Some(owner),
        }
    }

    /// Runs `install` if no submission has been accepted yet, serialised
    /// with the first submission; `None` once the operation is bound.
    pub(crate) fn before_first_submission<R>(&self, install: impl FnOnce() -> R) -> Option<R> {
        let _binding = self.bind.lock();
        (self.owner.load(Ordering::Acquire) == UNBOUND).then(install)
    }

    /// The bound owner, waiting out a first submission in progress (so a
    /// wait never passes its owner check just before another group binds).
    pub(crate) fn settled_owner(&self) -> Option<u64> {
        self.owner().or_else(|| {
            let _binding = self.bind.lock();
            self.owner()
        })
    }

    /// Runs `f` serialised with the first submission and with other calls
    /// of `locked` (the lazily created cancellation token uses it).
    pub(crate) fn locked<R>(&self, f: impl FnOnce() -> R) -> R {
        let _binding = self.bind.lock();
        f()
    }

    /// Registers interest in the idle notification for as long as it lives;
    /// read [`active`](Self::active) after creating it.
    pub(crate) fn watch(&self) -> IdleWatch<'_> {
        let previous = self.state.fetch_add(WATCHER, Ordering::SeqCst);
        debug_assert!(previous & WATCHERS != WATCHERS, "watcher count overflow");
        IdleWatch(&self.state)
    }
}

/// A submission [`OperationGate::submit`] accepted.
#[derive(Debug)]
pub(crate) struct Accepted<R> {
    /// What the registration returned.
    pub(crate) registered: R,
    /// False when the caller must [`OperationGate::hold_owner`] before the
    /// task can run.
    pub(crate) owner_held: bool,
}

/// What [`OperationGate::release`] tells its caller.
#[derive(Debug)]
#[must_use = "notify idle waiters and drop the owner reference"]
pub(crate) struct Released<T> {
    /// The operation became idle while someone watches.
    pub(crate) notify: bool,
    /// The owner reference, taken back because the operation became idle.
    pub(crate) owner: Option<T>,
}

/// The failure of [`OperationGate::submit`].
#[derive(Debug)]
pub(crate) enum Submission<E> {
    /// Refused by the operation; nothing was counted.
    Refused(Refused),
    /// The owner refused the registration; the admission was rolled back.
    /// `notify` is the rollback's [`OperationGate::release`] answer.
    Failed { error: E, notify: bool },
}

/// A registered idle watcher (see [`OperationGate::watch`]).
#[derive(Debug)]
pub(crate) struct IdleWatch<'a>(&'a AtomicU64);

impl Drop for IdleWatch<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(WATCHER, Ordering::SeqCst);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn submit<E>(
        gate: &OperationGate,
        group: u64,
        register: impl FnOnce() -> Result<(), E>,
    ) -> Result<Accepted<()>, Submission<E>> {
        gate.submit(group, &Mutex::new(None::<u8>), register)
    }

    #[test]
    fn admission_counts_until_closed_and_rolls_back_refusals() {
        let gate = OperationGate::default();
        let none = Mutex::new(None::<u8>);
        assert!(submit(&gate, 7, || Ok::<_, ()>(())).is_ok());
        assert_eq!(gate.active(), 1);
        assert_eq!(gate.owner(), Some(7));
        match submit(&gate, 7, || Err("group closed")) {
            Err(Submission::Failed { error, notify }) => {
                assert_eq!(error, "group closed");
                assert!(!notify, "nobody watches");
            }
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(gate.active(), 1, "a refused registration counts nothing");
        assert!(matches!(
            submit(&gate, 8, || Ok::<_, ()>(())),
            Err(Submission::Refused(Refused::WrongOwner))
        ));
        gate.close();
        assert!(matches!(
            submit(&gate, 7, || Ok::<_, ()>(())),
            Err(Submission::Refused(Refused::Closed))
        ));
        assert_eq!(gate.active(), 1);
        let watch = gate.watch();
        assert_eq!(gate.active(), 1, "watchers are not tasks");
        assert!(
            gate.release(&none).notify,
            "the last release notifies a watcher"
        );
        drop(watch);
        assert!(submit(&gate, 7, || Ok::<_, ()>(())).is_err());
        assert_eq!(gate.active(), 0);
        assert!(gate.cancel());
        assert!(!gate.cancel(), "only the first cancel reports");
        assert!(gate.is_cancelled() && gate.is_closed());
    }

    #[test]
    fn a_failed_first_submission_does_not_bind() {
        let gate = OperationGate::default();
        assert!(submit(&gate, 3, || Err(())).is_err());
        assert_eq!(gate.owner(), None);
        assert_eq!(gate.before_first_submission(|| 1), Some(1));
        assert!(submit(&gate, 4, || Ok::<_, ()>(())).is_ok());
        assert_eq!(gate.owner(), Some(4));
        assert_eq!(gate.before_first_submission(|| 1), None);
    }

    #[test]
    fn the_owner_is_held_exactly_while_tasks_are_accepted() {
        let gate = OperationGate::default();
        let hold = Mutex::new(None::<&str>);
        let first = gate.submit(1, &hold, || Ok::<_, ()>(())).expect("open");
        assert!(!first.owner_held, "nothing holds the owner yet");
        gate.hold_owner(&hold, || "group");
        let second = gate.submit(1, &hold, || Ok::<_, ()>(())).expect("open");
        assert!(second.owner_held);
        assert_eq!(gate.release(&hold).owner, None, "one task still runs");
        assert_eq!(*hold.lock(), Some("group"));
        // A failed registration rolls back without touching the reference.
        assert!(gate.submit(1, &hold, || Err::<(), _>(())).is_err());
        assert_eq!(*hold.lock(), Some("group"));
        assert_eq!(gate.release(&hold).owner, Some("group"), "idle: given back");
        assert_eq!(*hold.lock(), None);
        let again = gate.submit(1, &hold, || Ok::<_, ()>(())).expect("open");
        assert!(!again.owner_held, "an idle operation held nothing");
        gate.hold_owner(&hold, || "group");
        assert_eq!(gate.release(&hold).owner, Some("group"));
        assert_eq!(gate.active(), 0);
    }
}
