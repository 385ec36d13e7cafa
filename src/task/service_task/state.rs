//! The `ServiceTaskState` word: the state in the low byte, the run
//! generation above it, in one `AtomicU64`, so that every transition names the
//! run it belongs to.
//!
//! Invariants:
//!
//! 1. `start` takes a new generation only from `NotStarted` or `Stopped`
//!    (of two racing starts exactly one wins; loom-modelled).
//! 2. Every other transition is a compare-and-swap naming its generation. A
//!    run replaced by a newer `start` carries an older generation: its
//!    compare-and-swap fails, so it can neither overwrite the newer state nor
//!    mistake itself for running (loom-modelled with a loop returning on its
//!    own while a shutdown stops it and a restart begins).

use crate::loom::{AtomicU64, Ordering};

/// The lifecycle of a [`ServiceManager`](super::ServiceManager)'s run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServiceTaskState {
    /// Never started.
    NotStarted,
    /// `start` is creating the run.
    Starting,
    /// The service loop runs (or was asked to stop with `make_stop` and has
    /// not returned yet).
    Running,
    /// A shutdown is waiting for the loop.
    Stopping,
    /// The loop returned or was shut down; `start` may run it again.
    Stopped,
}

impl ServiceTaskState {
    const fn code(self) -> u64 {
        match self {
            Self::NotStarted => 0,
            Self::Starting => 1,
            Self::Running => 2,
            Self::Stopping => 3,
            Self::Stopped => 4,
        }
    }

    const fn from_code(code: u64) -> Self {
        match code {
            1 => Self::Starting,
            2 => Self::Running,
            3 => Self::Stopping,
            4 => Self::Stopped,
            _ => Self::NotStarted,
        }
    }

    /// The lowercase label (`not_started`, `running`, ...).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::NotStarted => "not_started",
            Self::Starting => "starting",
            Self::Running => "running",
            Self::Stopping => "stopping",
            Self::Stopped => "stopped",
        }
    }
}

const STATE_BITS: u32 = 8;
const STATE_MASK: u64 = (1 << STATE_BITS) - 1;

const fn pack(state: ServiceTaskState, generation: u64) -> u64 {
    (generation << STATE_BITS) | state.code()
}

const fn unpack(word: u64) -> (ServiceTaskState, u64) {
    (
        ServiceTaskState::from_code(word & STATE_MASK),
        word >> STATE_BITS,
    )
}

/// The packed state and generation of one manager.
#[derive(Debug)]
pub(crate) struct StateWord(AtomicU64);

impl StateWord {
    pub(crate) fn new() -> Self {
        Self(AtomicU64::new(pack(ServiceTaskState::NotStarted, 0)))
    }

    /// The current state and the generation of the run it belongs to.
    pub(crate) fn load(&self) -> (ServiceTaskState, u64) {
        unpack(self.0.load(Ordering::Acquire))
    }

    /// `NotStarted`/`Stopped` → `Starting` with the next generation;
    /// returns that generation and the state it replaced, or
    /// `Err(current state)` from any other state.
    pub(crate) fn begin_start(&self) -> Result<(u64, ServiceTaskState), ServiceTaskState> {
        self.update(|state, generation| {
            matches!(
                state,
                ServiceTaskState::NotStarted | ServiceTaskState::Stopped
            )
            .then(|| {
                (
                    ServiceTaskState::Starting,
                    generation.wrapping_add(1) & (u64::MAX >> STATE_BITS),
                )
            })
        })
        .map_err(|(state, _)| state)
    }

    /// Applies `next` to the current word until its compare-and-swap
    /// succeeds: the new generation and the replaced state, or the refused
    /// (state, generation).
    fn update(
        &self,
        next: impl Fn(ServiceTaskState, u64) -> Option<(ServiceTaskState, u64)>,
    ) -> Result<(u64, ServiceTaskState), (ServiceTaskState, u64)> {
        let mut word = self.0.load(Ordering::Acquire);
        loop {
            let (state, generation) = unpack(word);
            let Some((to, to_generation)) = next(state, generation) else {
                return Err((state, generation));
            };
            match self.0.compare_exchange_weak(
                word,
                pack(to, to_generation),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok((to_generation, state)),
                Err(actual) => word = actual,
            }
        }
    }

    /// Moves the run `generation` from `from` to `to`; false when the word
    /// no longer holds exactly (`from`, `generation`): another transition
    /// or a newer run came first.
    pub(crate) fn transition(
        &self,
        generation: u64,
        from: ServiceTaskState,
        to: ServiceTaskState,
    ) -> bool {
        self.0
            .compare_exchange(
                pack(from, generation),
                pack(to, generation),
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
    }

    /// `Starting`/`Running` of the current run → `Stopping`; the run's
    /// generation, or `None` when nothing is starting or running.
    pub(crate) fn begin_stop(&self) -> Option<u64> {
        self.update(|state, generation| {
            matches!(
                state,
                ServiceTaskState::Starting | ServiceTaskState::Running
            )
            .then_some((ServiceTaskState::Stopping, generation))
        })
        .ok()
        .map(|(generation, _)| generation)
    }

    /// Whether the run `generation` is over: stopping, stopped or replaced.
    pub(crate) fn is_stopped(&self, generation: u64) -> bool {
        let (state, current) = self.load();
        current != generation
            || matches!(
                state,
                ServiceTaskState::Stopping | ServiceTaskState::Stopped
            )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_round_trips_every_state() {
        for state in [
            ServiceTaskState::NotStarted,
            ServiceTaskState::Starting,
            ServiceTaskState::Running,
            ServiceTaskState::Stopping,
            ServiceTaskState::Stopped,
        ] {
            assert_eq!(unpack(pack(state, 77)), (state, 77));
        }
    }

    #[cfg(not(loom))]
    #[test]
    fn transitions_name_their_run() {
        let word = StateWord::new();
        assert_eq!(word.begin_stop(), None, "nothing to stop");
        let (first, replaced) = word.begin_start().expect("from NotStarted");
        assert_eq!(replaced, ServiceTaskState::NotStarted);
        assert_eq!(word.begin_start(), Err(ServiceTaskState::Starting));
        assert!(word.transition(first, ServiceTaskState::Starting, ServiceTaskState::Running));
        assert_eq!(word.begin_stop(), Some(first));
        assert!(word.transition(first, ServiceTaskState::Stopping, ServiceTaskState::Stopped));
        let (second, replaced) = word.begin_start().expect("from Stopped");
        assert_eq!(replaced, ServiceTaskState::Stopped);
        assert_eq!(second, first + 1);
        assert!(word.is_stopped(first), "a replaced run is stopped");
        assert!(!word.is_stopped(second));
        assert!(
            !word.transition(first, ServiceTaskState::Running, ServiceTaskState::Stopped),
            "the old run cannot overwrite the new state"
        );
        assert_eq!(word.load(), (ServiceTaskState::Starting, second));
    }
}
