//! What the task tree logs (its own binary: it installs the global
//! recording subscriber), by the invariants of `src/task_group.rs`: a
//! poisoning is logged once, as an error naming the group's root-to-leaf
//! path (invariant 6); of the closed groups handed to late `component`
//! calls, only the first per owner is logged (a warning naming the parent
//! and the component); the rest are only counted (invariant 1).

mod support;

#[path = "support/events.rs"]
mod events;

use std::time::Duration;

use rocketmq_runtime::{RuntimeConfig, RuntimeOwner, TaskGroupLifecycleState, TaskKind};

fn owner(name: &str) -> RuntimeOwner {
    RuntimeOwner::plan(RuntimeConfig::for_parallelism(name, 2))
        .expect("valid")
        .build()
        .expect("runtime")
}

#[test]
fn a_poisoning_is_logged_once_as_an_error_with_the_root_to_leaf_path() {
    let _ = events::recorded();
    let owner = owner("poison-log-root");
    let store = owner
        .root_context()
        .component("broker")
        .component("store-7d1e");
    owner.block_on(async {
        // Both are registered while the group is open; both panic.
        let release = tokio_util::sync::CancellationToken::new();
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let release = release.clone();
                let (_, handle) = store
                    .task_group()
                    .spawn_with_handle("panics", TaskKind::Worker, async move {
                        release.cancelled().await;
                        panic!("boom")
                    })
                    .expect("open");
                handle
            })
            .collect();
        release.cancel();
        for handle in handles {
            let _ = handle.await;
        }
    });
    assert_eq!(
        store.task_group().lifecycle_state(),
        TaskGroupLifecycleState::Poisoned
    );
    let logged: Vec<_> = events::recorded()
        .into_iter()
        .filter(|event| {
            event
                .field("group")
                .is_some_and(|path| path.contains("store-7d1e"))
        })
        .collect();
    assert_eq!(logged.len(), 1, "one line for one poisoning: {logged:?}");
    assert_eq!(
        logged[0].field("group"),
        Some("poison-log-root/broker/store-7d1e"),
        "root to leaf"
    );
    assert!(logged[0].message.contains("poisoned"), "{:?}", logged[0]);
    let report = owner
        .shutdown_runtime_blocking_with_timeout(Duration::from_secs(5))
        .expect("outside Tokio");
    assert_eq!(support::tree_sum(&report, |node| node.panicked), 2);
}

#[test]
fn only_the_first_closed_component_answer_per_owner_is_logged() {
    let _ = events::recorded();
    let owner = owner("closed-log-root");
    let parent = owner.root_context().component("parent-4b2a");
    let report = owner.block_on(parent.task_group().shutdown(Duration::from_secs(1)));
    assert!(report.is_healthy(), "{}", report.to_json());
    let late = ["late-a", "late-b", "late-c"].map(|name| parent.component(name));
    assert!(late
        .iter()
        .all(|closed| closed.task_group().lifecycle_state()
            == TaskGroupLifecycleState::ShutdownCompleted));
    assert_eq!(
        parent.task_group().event_counts().closed_component_requests,
        3
    );
    let logged: Vec<_> = events::recorded()
        .into_iter()
        .filter(|event| {
            event
                .field("parent")
                .is_some_and(|path| path.contains("parent-4b2a"))
        })
        .collect();
    assert_eq!(logged.len(), 1, "the first answer only: {logged:?}");
    assert_eq!(logged[0].field("component"), Some("late-a"));
    assert_eq!(
        logged[0].field("parent"),
        Some("closed-log-root/parent-4b2a")
    );
    let _ = owner.shutdown_runtime_blocking().expect("outside Tokio");
}
