//! Loom model over the real reserve-and-rollback code: a two-level tree,
//! two acquirers competing for the child's bytes (one of them rolls back
//! the root after failing at the child) and a concurrent release.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --lib loom`

use loom::thread;

use crate::resource_budget::{BudgetLimit, FullPolicy, ResourceBudget, ResourceBudgetTree};

fn assert_within(budget: &ResourceBudget) {
    let capacity = budget.limit().capacity;
    assert!(
        budget.node.current_bytes() <= capacity.bytes,
        "{}",
        budget.path()
    );
}

/// Both level representations: small limits pack count and bytes into one
/// word; an unbounded root count (like the process budget) keeps them in
/// two atomics, reserved count first with a rollback.
#[cfg_attr(test, test)]
pub fn loom_competing_acquirers_and_a_release_never_exceed_a_level() {
    competing_acquirers(3);
}

#[cfg_attr(test, test)]
pub fn loom_competing_acquirers_with_an_unpacked_root() {
    competing_acquirers(usize::MAX);
}

fn competing_acquirers(root_count: usize) {
    loom::model(move || {
        let tree = ResourceBudgetTree::new(
            "process",
            BudgetLimit::new(root_count, 100, FullPolicy::Reject),
        )
        .expect("valid");
        let root = tree.root();
        let child = root
            .child("queue", BudgetLimit::new(3, 50, FullPolicy::Reject))
            .expect("fits");
        let held = child.try_acquire_data(10).expect("room");
        let acquirers: Vec<_> = (0..2)
            .map(|_| {
                let child = child.clone();
                thread::spawn(move || {
                    let permit = child.try_acquire_data(30);
                    assert_within(&child);
                    permit.is_ok()
                })
            })
            .collect();
        drop(held);
        assert_within(&root);
        let admitted: usize = acquirers
            .into_iter()
            .map(|acquirer| usize::from(acquirer.join().expect("acquirer")))
            .sum();
        // 30 + 30 > 50: at most one fits the child at any time; a permit
        // dropped at the end of its thread returns everything.
        assert!(admitted >= 1, "the first acquirer always fits");
        for level in [&root, &child] {
            let snapshot = level.snapshot();
            assert_eq!((snapshot.current_count, snapshot.current_bytes), (0, 0));
        }
    });
}

/// Growth by `try_resize` racing the close of its dynamic key: growth that
/// succeeds was charged before the close finished (the closer's read of
/// the key's bytes right after closing sees it), or it is refused. Without
/// the gate re-check after reserving, growth that passed the gate before
/// the close could be charged after it.
#[cfg_attr(test, test)]
pub fn loom_resize_racing_a_key_close_is_charged_before_it_or_refused() {
    loom::model(|| {
        let tree = ResourceBudgetTree::new("process", BudgetLimit::new(4, 100, FullPolicy::Reject))
            .expect("valid");
        let key = tree
            .root()
            .register_dynamic_child("tenant", BudgetLimit::new(4, 100, FullPolicy::Reject))
            .expect("registered");
        let mut permit = key.budget().try_acquire_data(10).expect("room");
        let grower = thread::spawn(move || {
            let grown = permit.try_resize(40).is_ok();
            (grown, permit)
        });
        key.close();
        let bytes_after_close = key.budget().snapshot().current_bytes;
        let (grown, permit) = grower.join().expect("grower");
        if grown {
            assert_eq!(bytes_after_close, 40, "growth charged after the close");
        }
        assert_eq!(permit.bytes(), if grown { 40 } else { 10 });
        drop(permit);
        assert_eq!(key.budget().snapshot().current_bytes, 0);
    });
}

/// A rebind into a dynamic key racing the key's close: a permit that
/// moves in was charged before the close finished, or the rebind is
/// refused and the permit stays where it was.
#[cfg_attr(test, test)]
pub fn loom_rebind_racing_a_key_close_is_charged_before_it_or_refused() {
    use crate::resource_budget::PermitRebindOutcome;

    loom::model(|| {
        let tree = ResourceBudgetTree::new("process", BudgetLimit::new(4, 100, FullPolicy::Reject))
            .expect("valid");
        let root = tree.root();
        let key = root
            .register_dynamic_child("tenant", BudgetLimit::new(4, 100, FullPolicy::Reject))
            .expect("registered");
        let mut permit = root.try_acquire_data(10).expect("room");
        let target = key.budget();
        let mover = thread::spawn(move || {
            let moved = matches!(
                permit.try_rebind(&target).expect("same tree"),
                PermitRebindOutcome::Rebound
            );
            (moved, permit)
        });
        key.close();
        let count_after_close = key.budget().snapshot().current_count;
        let (moved, permit) = mover.join().expect("mover");
        if moved {
            assert_eq!(count_after_close, 1, "rebind charged after the close");
        }
        assert_eq!(
            permit.budget().path(),
            if moved { "process/tenant" } else { "process" }
        );
        drop(permit);
        assert_eq!(key.budget().snapshot().current_count, 0);
        assert_eq!(root.snapshot().current_count, 0);
    });
}
