//! The actor's lifecycle: one word, kept in the actor's state under its
//! lock.
//!
//! | State | Admits | Coordinator | Writes |
//! | --- | --- | --- | --- |
//! | `Accepting` | yes | runs | start and end |
//! | `Draining` | no: `stop_admission`, the group cancelled, or the last handle dropped | runs until nothing is queued or in flight | accepted work is still written |
//! | `Orphaned` | no | gone (ended, or aborted with its group) | those in flight end; nothing new starts |
//! | `Finished` | no | gone | none: `shutdown_until` returns, targets can be retired |
//!
//! Invariants:
//!
//! 1. Every transition is made under the actor's state lock and only moves
//!    forward (`Accepting → Draining → Orphaned → Finished`; stages can be
//!    skipped, never revisited).
//! 2. Admission reads the state under the lock that queues its work, and
//!    the coordinator decides to end under that same lock from the state
//!    and the pending count: nothing is admitted after that decision, and
//!    nothing admitted before it is left unwritten (loom-modelled,
//!    `actor/loom_lifecycle.rs`).
//! 3. `Finished` is entered exactly once, by whichever of the coordinator's
//!    end and the last in-flight write comes second; the caller wakes the
//!    `shutdown_until` waiters after releasing the lock.

use super::admission::ActorState;

/// Where an actor is in its life (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Lifecycle {
    /// Admits submissions.
    #[default]
    Accepting,
    /// Admission stopped; accepted work drains.
    Draining,
    /// The coordinator is gone; writes in flight may still end.
    Orphaned,
    /// The coordinator is gone and nothing is in flight.
    Finished,
}

impl Lifecycle {
    /// Whether a submission may be admitted.
    pub(crate) fn admits(self) -> bool {
        self == Self::Accepting
    }

    /// Stops admission (no change once stopped).
    pub(crate) fn stop(&mut self) {
        if *self == Self::Accepting {
            *self = Self::Draining;
        }
    }
}

impl ActorState {
    /// Whether the coordinator may end: admission stopped and nothing
    /// queued or in flight (invariant 2).
    pub(crate) fn drained(&self) -> bool {
        !self.lifecycle.admits() && self.pending_operations == 0
    }

    /// The coordinator is gone (ended or aborted). True when this finishes
    /// the actor (no write in flight): the caller wakes the waiters.
    pub(crate) fn coordinator_gone(&mut self) -> bool {
        self.lifecycle.stop();
        if self.lifecycle >= Lifecycle::Orphaned {
            return false;
        }
        self.lifecycle = Lifecycle::Orphaned;
        self.finish_if_idle()
    }

    /// A write ended (`writing` already counted down). True when this
    /// finishes the actor.
    pub(crate) fn write_ended(&mut self) -> bool {
        self.finish_if_idle()
    }

    fn finish_if_idle(&mut self) -> bool {
        if self.lifecycle == Lifecycle::Orphaned && self.writing == 0 {
            self.lifecycle = Lifecycle::Finished;
            true
        } else {
            false
        }
    }
}
