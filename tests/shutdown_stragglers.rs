//! Named stragglers and the readable report: the tasks a shutdown deadline
//! aborted are listed by name (at most 64, the rest counted), and
//! `ShutdownReport::summary` renders a tree one line per group.

use std::time::Duration;

use rocketmq_runtime::{RuntimeConfig, RuntimeOwner, ShutdownReport, TaskKind, TaskState};

fn owner() -> RuntimeOwner {
    RuntimeOwner::plan(RuntimeConfig::for_parallelism("stragglers", 2))
        .expect("valid")
        .build()
        .expect("runtime")
}

fn child<'a>(report: &'a ShutdownReport, name: &str) -> &'a ShutdownReport {
    report
        .children
        .iter()
        .find(|child| child.name == name)
        .unwrap_or_else(|| panic!("no {name} in {}", report.to_json()))
}

#[test]
fn a_task_that_ignores_cancellation_is_named_in_the_owners_report() {
    let owner = owner();
    let stubborn = owner.root_context().component("stubborn");
    stubborn
        .spawn_service("ignores-cancellation", std::future::pending())
        .expect("open");
    let polite = owner.root_context().component("polite");
    let token = polite.task_group().cancellation_token();
    polite
        .spawn("returns-at-cancellation", TaskKind::Worker, async move {
            token.cancelled().await;
        })
        .expect("open");
    let report = owner
        .shutdown_runtime_blocking_with_timeout(Duration::from_millis(100))
        .expect("outside Tokio");
    let stubborn = child(&report, "stubborn");
    assert_eq!(stubborn.timed_out, 1);
    assert_eq!(stubborn.timed_out_tasks.len(), 1);
    let straggler = &stubborn.timed_out_tasks[0];
    assert_eq!(straggler.name.as_str(), "ignores-cancellation");
    assert_eq!(straggler.kind, TaskKind::Service);
    assert_eq!(straggler.state, TaskState::Aborted);
    assert_eq!(stubborn.timed_out_tasks_omitted, 0);
    let json = report.to_json();
    assert!(json.contains("\"timed_out_tasks\""), "{json}");
    // A group whose tasks stopped in time lists none, and its JSON has no
    // such field.
    let polite = child(&report, "polite");
    assert!(polite.timed_out_tasks.is_empty());
    let polite_json = serde_json::to_value(polite).expect("JSON");
    assert!(polite_json.get("timed_out_tasks").is_none());
    assert!(polite_json.get("timed_out_tasks_omitted").is_none());
}

#[test]
fn ten_thousand_stragglers_list_64_names_and_count_the_rest() {
    let owner = owner();
    let stubborn = owner.root_context().component("stubborn");
    for _ in 0..10_000 {
        stubborn
            .spawn_service("stubborn", std::future::pending())
            .expect("open");
    }
    let report = owner
        .shutdown_runtime_blocking_with_timeout(Duration::from_millis(200))
        .expect("outside Tokio");
    let stubborn = child(&report, "stubborn");
    assert_eq!(stubborn.timed_out, 10_000);
    assert_eq!(
        stubborn.timed_out_tasks.len(),
        ShutdownReport::REMAINING_TASKS_LIMIT
    );
    assert_eq!(stubborn.timed_out_tasks_omitted, 9_936);
}
