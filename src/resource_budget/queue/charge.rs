//! What pays for a queued item and how discarded items give their
//! reservations back: [`Charge`] (a new reservation or a producer's
//! permit), [`Release`] (reservations returned once, per class) and
//! [`Discarded`] (items dropped after the queue's lock, then released).

use std::collections::VecDeque;

use super::Entry;
use crate::loom::Arc;
use crate::resource_budget::tree::Node;
use crate::resource_budget::types::{BudgetClass, BudgetRejection, PermitRebindOutcome};
use crate::resource_budget::ResourcePermit;

/// Moves a producer's permit onto `node` (out of line: the plain
/// reservation is the hot path of a push).
#[cold]
#[inline(never)]
fn take_permit(permit: &mut ResourcePermit, node: &Arc<Node>) -> Result<(), BudgetRejection> {
    match permit.rebind_in_tree(node) {
        PermitRebindOutcome::Rebound | PermitRebindOutcome::Unchanged => Ok(()),
        PermitRebindOutcome::Rejected(rejection) => Err(rejection),
    }
}

/// What pays for a pushed item.
pub(super) enum Charge {
    /// A reservation to make on the queue's budget; a capacity refusal is
    /// counted in the budget's `rejected_count` while `counted` (the first
    /// attempt of a push, not its retries).
    Reserve {
        bytes: usize,
        class: BudgetClass,
        counted: bool,
    },
    /// A permit of the queue's tree the producer already holds: moved onto
    /// the queue's budget, reserving only the levels it does not hold yet.
    Permit(ResourcePermit),
}

impl Charge {
    #[inline]
    pub(super) fn reserve(bytes: usize, class: BudgetClass, counted: bool) -> Self {
        Self::Reserve {
            bytes,
            class,
            counted,
        }
    }

    #[inline]
    pub(super) fn bytes(&self) -> usize {
        match self {
            Self::Reserve { bytes, .. } => *bytes,
            Self::Permit(permit) => permit.bytes(),
        }
    }

    #[inline]
    pub(super) fn class(&self) -> BudgetClass {
        match self {
            Self::Reserve { class, .. } => *class,
            Self::Permit(permit) => permit.class(),
        }
    }

    /// Puts the charge on `node`; on a refusal nothing changed (a permit
    /// stays where it was).
    #[inline]
    pub(super) fn take(&mut self, node: &Arc<Node>) -> Result<(), BudgetRejection> {
        match self {
            Self::Reserve {
                bytes,
                class,
                counted,
            } => {
                let reserved = node.reserve(*bytes, *class, *counted);
                *counted = false;
                reserved
            }
            Self::Permit(permit) => take_permit(permit, node),
        }
    }

    /// The reservation a successful [`take`](Self::take) made, for the
    /// entry that now owns it: (bytes, class).
    #[inline]
    pub(super) fn into_reserved(self) -> (usize, BudgetClass) {
        match self {
            Self::Reserve { bytes, class, .. } => (bytes, class),
            Self::Permit(permit) => permit.into_reserved(),
        }
    }
}

/// Reservations to give back (one release per class) when this drops,
/// also while unwinding. Created before the items holding them are dropped
/// and dropped after them, so the budget never shows as free memory that
/// discarded items still occupy, and a panicking item destructor still
/// gives every reservation back.
pub(super) struct Release<'a> {
    node: &'a Node,
    /// (count, bytes) per class.
    data: (usize, usize),
    control: (usize, usize),
}

/// Items taken out of the queue under its lock: declared before the lock
/// guard, so they are dropped after the lock is released (a destructor may
/// use the queue), and their reservations go back after they are dropped
/// (also while unwinding), unless [`release_now`](Self::release_now) gave
/// them back already.
pub(super) struct Discarded<'a, T> {
    // Field order is drop order: the items, then their reservations.
    items: Vec<T>,
    node: &'a Node,
    /// Created by the first discarded item: a push or pop that discards
    /// nothing (the common case) releases nothing and runs no guard.
    release: Option<Release<'a>>,
}

impl<'a, T> Discarded<'a, T> {
    #[inline]
    pub(super) fn new(node: &'a Node) -> Self {
        Self {
            items: Vec::new(),
            node,
            release: None,
        }
    }

    pub(super) fn push(&mut self, entry: Entry<T>) {
        let node = self.node;
        self.release
            .get_or_insert_with(|| Release::new(node))
            .add(entry.bytes, entry.class);
        self.items.push(entry.item);
    }

    /// Gives the reservations back now, before the items are dropped.
    pub(super) fn release_now(&mut self) {
        if let Some(release) = &mut self.release {
            release.flush();
        }
    }
}

impl<'a> Release<'a> {
    #[inline]
    pub(super) fn new(node: &'a Node) -> Self {
        Self {
            node,
            data: (0, 0),
            control: (0, 0),
        }
    }

    #[inline]
    pub(super) fn all<T>(node: &'a Node, entries: &VecDeque<Entry<T>>) -> Self {
        let mut release = Self::new(node);
        for entry in entries {
            release.add(entry.bytes, entry.class);
        }
        release
    }

    #[inline]
    pub(super) fn add(&mut self, bytes: usize, class: BudgetClass) {
        let sum = match class {
            BudgetClass::Data => &mut self.data,
            BudgetClass::Control => &mut self.control,
        };
        sum.0 += 1;
        sum.1 += bytes;
    }
}

impl Release<'_> {
    /// Gives back what was added so far.
    #[inline]
    pub(super) fn flush(&mut self) {
        for ((count, bytes), class) in [
            (std::mem::take(&mut self.data), BudgetClass::Data),
            (std::mem::take(&mut self.control), BudgetClass::Control),
        ] {
            if count > 0 {
                self.node.release(count, bytes, class);
            }
        }
    }
}

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.flush();
    }
}
