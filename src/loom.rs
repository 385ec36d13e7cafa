//! The one place synchronisation primitives come from.
//!
//! Normal builds use `std` atomics/`Arc` and `parking_lot` locks; builds with
//! `--cfg loom` swap in the `loom` model checker's versions so that the
//! concurrency-critical state machines (task admission and settlement, the
//! operation gate, blocking admission, budget reserve/rollback and usage
//! words, the service-task state word) are explored against the real code.
//!
//! Invariants:
//!
//! 1. Every `Arc`, `Mutex` and atomic in the crate is imported from here, so
//!    the loom models run the real code, not a copy.
//! 2. The `Mutex` is `parking_lot`'s (no poisoning: a panicking task never
//!    wedges a group).
//! 3. `Arc`/`Weak` stay `std` under loom: the models check the locks and
//!    atomics, and the group tree needs `Weak`, which loom's `Arc` lacks.
//! 4. Process-wide id counters are `std` atomics (`StaticAtomicU64`), because
//!    loom atomics cannot initialise statics.
//! 5. Statistics that no decision reads are plain atomics even under loom
//!    (`StatCounter`), so a model explores only the counters that decide.
//! 6. `seq_cst_handshake()` is nothing in the normal build and a `SeqCst`
//!    fence under loom: loom treats `SeqCst` loads and stores as
//!    acquire/release, so a store-then-load handshake across two atomics that
//!    the real build's single `SeqCst` order makes correct (a reservation
//!    then its gate re-check, against a key close then a read of the use)
//!    would fail in a model. Both sides of such a handshake call it.

#[cfg(not(loom))]
mod imp {
    pub(crate) use std::sync::atomic::{
        fence, AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering,
    };
    pub(crate) use std::sync::{Arc, Weak};

    /// The guard of [`Mutex`].
    pub(crate) type MutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;

    /// A mutex whose `lock` returns the guard directly (parking_lot semantics:
    /// no poisoning, so a panicking task never wedges a group).
    #[derive(Debug, Default)]
    pub(crate) struct Mutex<T>(parking_lot::Mutex<T>);

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Self {
            Self(parking_lot::Mutex::new(value))
        }

        pub(crate) fn lock(&self) -> parking_lot::MutexGuard<'_, T> {
            self.0.lock()
        }

        /// The guard if the lock is free now, without waiting.
        pub(crate) fn try_lock(&self) -> Option<parking_lot::MutexGuard<'_, T>> {
            self.0.try_lock()
        }
    }
}

#[cfg(loom)]
mod imp {
    pub(crate) use loom::sync::atomic::{
        fence, AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering,
    };
    // `Arc`/`Weak` stay std under loom: the models check the gate's locks and
    // atomics, and the group tree needs `Weak`, which loom's `Arc` lacks.
    pub(crate) use std::sync::{Arc, Weak};

    /// The guard of [`Mutex`].
    pub(crate) type MutexGuard<'a, T> = loom::sync::MutexGuard<'a, T>;

    /// Loom's mutex with the same poison-free `lock` signature as the normal build.
    #[derive(Debug, Default)]
    pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Self {
            Self(loom::sync::Mutex::new(value))
        }

        pub(crate) fn lock(&self) -> loom::sync::MutexGuard<'_, T> {
            self.0
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
        }

        /// The guard if the lock is free now, without waiting.
        pub(crate) fn try_lock(&self) -> Option<loom::sync::MutexGuard<'_, T>> {
            match self.0.try_lock() {
                Ok(guard) => Some(guard),
                Err(std::sync::TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) => None,
            }
        }
    }
}

#[allow(unused_imports)]
pub(crate) use imp::*;

/// The unbounded lock-free FIFO behind a budgeted queue's tail
/// (crossbeam's `SegQueue`). Under loom a mutex-guarded deque stands in:
/// the models check the queue's own protocol around it (who counts itself
/// in flight, who reads which flag), taking the FIFO's linearizability as
/// given.
#[cfg(not(loom))]
pub(crate) use crossbeam_queue::SegQueue;

#[cfg(loom)]
#[derive(Debug, Default)]
pub(crate) struct SegQueue<T>(loom::sync::Mutex<std::collections::VecDeque<T>>);

#[cfg(loom)]
impl<T> SegQueue<T> {
    pub(crate) fn new() -> Self {
        Self(loom::sync::Mutex::new(std::collections::VecDeque::new()))
    }

    pub(crate) fn push(&self, value: T) {
        self.0.lock().expect("unpoisoned").push_back(value);
    }

    pub(crate) fn pop(&self) -> Option<T> {
        self.0.lock().expect("unpoisoned").pop_front()
    }

    pub(crate) fn len(&self) -> usize {
        self.0.lock().expect("unpoisoned").len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Lets another thread run while this one waits for it (a short spin on
/// pushes that are mid-append; under loom, a scheduling point).
pub(crate) fn yield_thread() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::thread::yield_now();
}

/// Process-wide counters live in `static`s, which loom's atomics cannot
/// initialise; they are plain `fetch_add` id sources that no model explores.
pub(crate) use std::sync::atomic::AtomicU64 as StaticAtomicU64;

/// Statistics counters (admitted, released, rejected, ...) that no decision
/// reads: plain atomics in every build, so loom models explore only the
/// counters that bound admission.
pub(crate) use std::sync::atomic::AtomicU64 as StatCounter;

/// Marks a store-then-load handshake between two `SeqCst` accesses to
/// different atomics (a reservation then a gate check, against a gate close
/// then a usage read). `SeqCst` accesses already join one total order, so
/// the normal build needs nothing here; loom models `SeqCst` loads and
/// stores as acquire/release only, and a `SeqCst` fence gives the models
/// the order the real build has.
#[inline(always)]
pub(crate) fn seq_cst_handshake() {
    #[cfg(loom)]
    loom::sync::atomic::fence(Ordering::SeqCst);
}
