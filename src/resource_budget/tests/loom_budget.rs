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
#[test]
fn loom_competing_acquirers_and_a_release_never_exceed_a_level() {
    competing_acquirers(3);
}

#[test]
fn loom_competing_acquirers_with_an_unpacked_root() {
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
