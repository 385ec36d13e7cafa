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

/// A report tree built by hand: a root with a reason, a healthy child and
/// an unhealthy one holding `stragglers` (their ages fixed).
fn tree(stragglers: Vec<rocketmq_runtime::TaskSnapshot>, omitted: usize) -> ShutdownReport {
    let mut root =
        ShutdownReport::new("rocketmq-broker", Duration::from_millis(1_203)).with_reason("signal");
    root.cancelled = 2;
    let mut metadata = ShutdownReport::new("metadata", Duration::ZERO);
    metadata.completed = 1;
    let mut broker = ShutdownReport::new("broker", Duration::ZERO);
    broker.cancelled = 3;
    let mut idle = ShutdownReport::new("idle", Duration::ZERO);
    if !stragglers.is_empty() {
        broker.timed_out = stragglers.len() + omitted;
        broker.aborted = stragglers.len() + omitted;
        broker.timed_out_tasks = stragglers
            .into_iter()
            .map(|mut task| {
                task.elapsed = Duration::from_millis(1_201);
                task
            })
            .collect();
        broker.timed_out_tasks_omitted = omitted;
        idle.leaked = 1;
        idle.timed_out = 1;
    }
    broker.children.push(idle);
    root.children.push(broker);
    root.children.push(metadata);
    root
}

#[test]
fn the_summary_renders_one_line_per_group_with_its_stragglers() {
    let healthy = tree(Vec::new(), 0);
    assert!(healthy.is_healthy());
    assert_eq!(
        healthy.summary(),
        "rocketmq-broker 1203 ms, reason signal: cancelled=2\n  \
         broker: cancelled=3\n    \
         idle: nothing to report\n  \
         metadata: completed=1"
    );

    // Real stragglers from a shutdown, their ages pinned.
    let owner = owner();
    let stubborn = owner.root_context().component("stubborn");
    for name in ["request-loop", "flush-loop"] {
        stubborn
            .spawn_service(name, std::future::pending())
            .expect("open");
    }
    let report = owner
        .shutdown_runtime_blocking_with_timeout(Duration::from_millis(50))
        .expect("outside Tokio");
    let mut stragglers = child(&report, "stubborn").timed_out_tasks.clone();
    stragglers.sort_by(|a, b| b.name.as_str().cmp(a.name.as_str()));
    let unhealthy = tree(stragglers, 7);
    assert!(!unhealthy.is_healthy());
    assert_eq!(
        unhealthy.summary(),
        "rocketmq-broker 1203 ms, reason signal: cancelled=2\n  \
         broker: cancelled=3 aborted=9 timed_out=9 [unhealthy]\n      \
         timed out: request-loop (service, 1201 ms)\n      \
         timed out: flush-loop (service, 1201 ms)\n      \
         and 7 more timed out\n    \
         idle: timed_out=1 leaked=1 [unhealthy]\n  \
         metadata: completed=1"
    );
    assert_eq!(format!("{}", unhealthy.display()), unhealthy.summary());

    // Annotations follow their group, as notes.
    let mut annotated = tree(Vec::new(), 0);
    annotated
        .annotations
        .push(rocketmq_runtime::ShutdownAnnotation::new(
            "metadata not durable: resource consumer-offsets",
        ));
    assert_eq!(
        annotated.summary(),
        "rocketmq-broker 1203 ms, reason signal: cancelled=2\n    \
         note: metadata not durable: resource consumer-offsets\n  \
         broker: cancelled=3\n    \
         idle: nothing to report\n  \
         metadata: completed=1"
    );
}

/// A 100,000-deep chain renders on a 1 MiB thread stack (the walk is
/// iterative).
#[test]
fn a_deep_report_renders_on_a_small_stack() {
    let summary = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(|| {
            let mut report = ShutdownReport::new("leaf", Duration::ZERO);
            for depth in 0..100_000 {
                let mut parent = ShutdownReport::new(format!("level-{depth}"), Duration::ZERO);
                parent.children.push(report);
                report = parent;
            }
            let summary = report.summary();
            drop(report); // iterative too
            assert!(summary.ends_with("(depth 100000) leaf: nothing to report"));
            summary.lines().count()
        })
        .expect("thread")
        .join()
        .expect("no stack overflow");
    assert_eq!(summary, 100_001);
}
