//! Dynamic budget keys: children with a closable admission gate and a
//! generation, registered by name in a bounded per-tree registry.
//!
//! Invariants:
//!
//! 1. One registry per tree, bounded (`DEFAULT_MAX_DYNAMIC_BUDGET_KEYS`
//!    unless the tree sets its own bound). A name is validated before the
//!    held-name lookup.
//! 2. A name maps to the generation holding it until `retire_until` observes
//!    zero reservations; only the holder of that generation can release it.
//! 3. Closing a key (or retiring it) closes every handle to it and to its
//!    descendants: their acquisitions, growth and incoming rebinds are
//!    refused (the gate is checked after reserving, see `tree.rs`), while
//!    permits admitted before the close stay charged until dropped. Consumers
//!    parked on queues built under the key are woken at once.

use std::fmt;

use tokio::time::Instant;

use crate::error::RuntimeContractViolation;
use crate::loom::{Arc, Ordering};
use crate::resource_budget::tree::{validate_name, Gate};
use crate::resource_budget::types::{BudgetClass, BudgetLimit, BudgetRejection};
use crate::resource_budget::{ResourceBudget, ResourcePermit};
use crate::shutdown_deadline::ShutdownDeadline;
use crate::wait::notified_until;

/// Why a dynamic key could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DynamicKeyRegistrationFailure {
    /// The name or limit is invalid.
    #[error(transparent)]
    Invalid(RuntimeContractViolation),
    /// The name is held by a key that has not been retired.
    #[error("dynamic budget name in use by generation {generation}")]
    NameInUse {
        /// The generation holding the name.
        generation: u64,
    },
    /// The tree's registry holds `max_entries` keys.
    #[error("dynamic budget registry full ({max_entries} keys)")]
    CapacityExhausted {
        /// The registry bound.
        max_entries: usize,
    },
    /// The parent budget is closed.
    #[error("dynamic budget parent is closed")]
    Closed,
}

/// Why a dynamic key refused a reservation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DynamicKeyAdmissionRejection {
    /// The key (or an ancestor) is closed.
    Closed,
    /// A level ran out of capacity.
    Budget(BudgetRejection),
}

/// What [`DynamicBudgetKey::retire_until`] observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DynamicKeyRetirement {
    /// True when the name was released (no reservation was left).
    pub released: bool,
    /// Reservations still outstanding at the deadline.
    pub outstanding_reservations: usize,
    /// Bytes still outstanding at the deadline.
    pub outstanding_bytes: usize,
}

/// A closable child budget registered by name (one generation of it).
#[derive(Clone)]
pub struct DynamicBudgetKey {
    budget: ResourceBudget,
    generation: u64,
}

impl fmt::Debug for DynamicBudgetKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DynamicBudgetKey")
            .field("path", &self.budget.path())
            .field("generation", &self.generation)
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl ResourceBudget {
    /// Registers a closable child `name` (see [`DynamicBudgetKey`]).
    ///
    /// # Errors
    ///
    /// `Invalid` for a bad name or limit, `NameInUse` while the name is
    /// held, `CapacityExhausted` when the tree's registry is full, `Closed`
    /// when this budget is closed.
    pub fn register_dynamic_child(
        &self,
        name: impl Into<String>,
        limit: BudgetLimit,
    ) -> Result<DynamicBudgetKey, DynamicKeyRegistrationFailure> {
        if self.is_closed() {
            return Err(DynamicKeyRegistrationFailure::Closed);
        }
        // Validated first: the held-name lookup must use the very path the
        // key will have (a name with `/` would otherwise look up one path
        // and register another, shadowing a live key).
        let name = validate_name(&name.into()).map_err(DynamicKeyRegistrationFailure::Invalid)?;
        let registry = &self.node.tree.dynamic;
        let mut held = registry.held.lock();
        // Again under the registry lock: a key never registers under a
        // parent that closed meanwhile.
        if self.is_closed() {
            return Err(DynamicKeyRegistrationFailure::Closed);
        }
        let path: Arc<str> = Arc::from(format!("{}/{}", self.path(), name));
        if let Some(generation) = held.get(&path) {
            return Err(DynamicKeyRegistrationFailure::NameInUse {
                generation: *generation,
            });
        }
        if held.len() >= registry.max_entries {
            return Err(DynamicKeyRegistrationFailure::CapacityExhausted {
                max_entries: registry.max_entries,
            });
        }
        let generation = registry.next_generation.fetch_add(1, Ordering::Relaxed);
        let budget = self
            .make_child(
                name.to_string(),
                limit,
                Some(Gate {
                    closed: crate::loom::AtomicBool::new(false),
                }),
            )
            .map_err(DynamicKeyRegistrationFailure::Invalid)?;
        held.insert(Arc::clone(&budget.node.path), generation);
        Ok(DynamicBudgetKey { budget, generation })
    }
}

impl DynamicBudgetKey {
    /// The key's name (last path segment).
    pub fn name(&self) -> &str {
        &self.budget.node.name
    }

    /// This registration's generation (unique within the tree).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// A handle to the key's budget (closed with the key).
    pub fn budget(&self) -> ResourceBudget {
        self.budget.clone()
    }

    /// True once the key or an ancestor is closed.
    pub fn is_closed(&self) -> bool {
        self.budget.is_closed()
    }

    /// Closes the key: every handle to it and its descendants refuses new
    /// reservations and incoming rebinds; outstanding permits still release.
    /// Every [`BudgetedQueue`](crate::BudgetedQueue) built on the key's
    /// budget or a descendant closes too: waiting producers get
    /// `QueuePushRejection::Closed`, waiting consumers drain what was
    /// accepted and then see the end of the stream.
    /// The name stays held until [`retire_until`](Self::retire_until).
    pub fn close(&self) {
        if let Some(gate) = &self.budget.node.gate {
            gate.closed.store(true, Ordering::SeqCst);
        }
        // Whatever reads the use after this (a retirement's drain check)
        // sees every reservation that passed the gate.
        crate::loom::seq_cst_handshake();
        let tree = &self.budget.node.tree;
        tree.notify_released();
        // Consumers parked on queues under this key see it closed.
        tree.closed.notify_waiters();
    }

    /// Reserves through the key.
    ///
    /// # Errors
    ///
    /// `Closed` once closed; `Budget` when a level is exhausted.
    pub fn try_acquire(
        &self,
        bytes: usize,
        class: BudgetClass,
    ) -> Result<ResourcePermit, DynamicKeyAdmissionRejection> {
        self.budget.try_acquire(bytes, class).map_err(|rejection| {
            if rejection.is_closed() {
                DynamicKeyAdmissionRejection::Closed
            } else {
                DynamicKeyAdmissionRejection::Budget(rejection)
            }
        })
    }

    /// Closes the key, waits until `deadline` for its reservations to drain,
    /// and releases the name once none is left.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the key is closed at the first poll; dropping the
    /// future leaves the name held (retire again later).
    pub async fn retire_until(&self, deadline: Instant) -> DynamicKeyRetirement {
        self.close();
        let node = &self.budget.node;
        let tree = &node.tree;
        let drained = notified_until(
            &tree.released,
            ShutdownDeadline::from_tokio(deadline),
            // A budget belongs to no runtime: the caller's times the wait.
            None,
            // Called after the notification is enabled: arm, then check.
            || {
                tree.arm_release_wake();
                node.current_count() == 0
            },
        )
        .await;
        // Drained: this generation's name is released. A newer generation
        // holding the same name is never touched by a stale handle.
        if drained {
            let mut held = tree.dynamic.held.lock();
            if held.get(&node.path) == Some(&self.generation) {
                held.remove(&node.path);
            }
        }
        let released = drained;
        DynamicKeyRetirement {
            released,
            outstanding_reservations: node.current_count(),
            outstanding_bytes: node.current_bytes(),
        }
    }
}
