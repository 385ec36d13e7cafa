//! `ShutdownReport`: health rule, iterative clone and health walk, blocking
//! merge, JSON evidence.

use std::sync::Arc;
use std::time::Duration;

use rocketmq_runtime::{
    BlockingExecutorSnapshot, BlockingLane, ShutdownAnnotation, ShutdownReport,
};

const BLOCKING_ANNOTATION: &str =
    "spawn_blocking tasks may continue after timeout; see blocking_still_running";

fn report(name: &str) -> ShutdownReport {
    ShutdownReport::new(name, Duration::from_millis(25))
}

#[test]
fn new_report_is_empty_and_healthy() {
    let report = report("root");
    assert_eq!(report.name, "root");
    assert_eq!(report.elapsed, Duration::from_millis(25));
    assert_eq!(
        [
            report.completed,
            report.cancelled,
            report.aborted,
            report.failed,
            report.panicked,
            report.timed_out,
            report.leaked,
            report.blocking_still_running,
            report.remaining_tasks_omitted,
        ],
        [0; 9]
    );
    assert!(report.children.is_empty());
    assert!(report.remaining_tasks.is_empty());
    assert!(report.blocking_tasks.is_empty());
    assert!(report.annotations.is_empty());
    assert!(report.is_healthy());
    assert_eq!(report.assert_no_task_leak(), Ok(()));
    report.log_if_unhealthy();
}

#[test]
fn each_unhealthy_counter_makes_the_report_unhealthy() {
    type Setter = fn(&mut ShutdownReport);
    let setters: [(&str, Setter); 5] = [
        ("leaked", |r| r.leaked = 1),
        ("failed", |r| r.failed = 1),
        ("panicked", |r| r.panicked = 1),
        ("timed_out", |r| r.timed_out = 1),
        ("blocking_still_running", |r| r.blocking_still_running = 1),
    ];
    for (field, set) in setters {
        let mut report = report("root");
        set(&mut report);
        assert!(!report.is_healthy(), "{field} = 1 must be unhealthy");
        let json = report.assert_no_task_leak().expect_err(field);
        assert!(
            json.contains(&format!("\"{field}\": 1")),
            "{field} missing from {json}"
        );
        report.log_if_unhealthy();
    }
}

#[test]
fn aborted_and_cancelled_alone_stay_healthy() {
    let mut report = report("root");
    report.aborted = 7;
    report.cancelled = 3;
    report.completed = 2;
    assert!(report.is_healthy());
    assert_eq!(report.assert_no_task_leak(), Ok(()));
}

#[test]
fn an_unhealthy_grandchild_makes_the_root_unhealthy() {
    let mut grandchild = report("grandchild");
    grandchild.leaked = 1;
    let mut child = report("child");
    child.children.push(grandchild);
    let mut root = report("root");
    root.children.push(report("healthy-sibling"));
    root.children.push(child);
    assert!(!root.is_healthy());
    assert!(root.children[1].children[0].assert_no_task_leak().is_err());
    assert!(root.children[0].is_healthy());

    root.children[1].children[0].leaked = 0;
    assert!(root.is_healthy());
}

#[test]
fn json_uses_millisecond_fields_and_keeps_annotations() {
    let mut report = report("root");
    report.elapsed = Duration::from_micros(1_234_567);
    report
        .annotations
        .push(ShutdownAnnotation::new("note \"quoted\""));
    report
        .children
        .push(ShutdownReport::new("child", Duration::from_secs(2)));
    let json = report.to_json();
    let value: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
    assert_eq!(value["name"], "root");
    assert_eq!(value["elapsed_ms"], 1_234);
    assert_eq!(value["children"][0]["elapsed_ms"], 2_000);
    assert_eq!(value["annotations"][0]["message"], "note \"quoted\"");
    assert!(value.get("elapsed").is_none());
    // Pretty-printed.
    assert!(json.contains('\n'));
}

/// The reason is evidence only when recorded: absent from JSON until
/// `with_reason`, and it never affects health.
#[test]
fn the_shutdown_reason_is_serialized_only_when_recorded() {
    let plain: serde_json::Value =
        serde_json::from_str(&report("root").to_json()).expect("valid JSON");
    assert!(plain.get("reason").is_none());
    let reasoned = report("root").with_reason("pre_stop");
    assert!(reasoned.is_healthy());
    let value: serde_json::Value = serde_json::from_str(&reasoned.to_json()).expect("valid JSON");
    assert_eq!(value["reason"], "pre_stop");
    assert_eq!(reasoned.clone().reason.as_deref(), Some("pre_stop"));
}

#[test]
fn clone_copies_the_whole_tree() {
    let mut child = report("child");
    child.timed_out = 2;
    child
        .annotations
        .push(ShutdownAnnotation::new("child note"));
    let mut root = report("root");
    root.aborted = 5;
    root.children.push(child);
    root.children.push(report("second"));
    let copy = root.clone();
    assert_eq!(copy.to_json(), root.to_json());
    assert_eq!(copy.children.len(), 2);
    assert_eq!(copy.children[0].annotations, root.children[0].annotations);
}

fn executor_snapshot(still_running: usize) -> BlockingExecutorSnapshot {
    BlockingExecutorSnapshot {
        name: Arc::from("rocketmq-blocking.storage-io"),
        lane: BlockingLane::StorageIo,
        max_concurrency: 4,
        max_queue_depth: 16,
        global_capacity: 8,
        global_running: still_running,
        global_available: 8 - still_running,
        lane_reserved: 1,
        lane_running: still_running,
        lane_borrowed: still_running.saturating_sub(1),
        queued: 0,
        running: still_running,
        timed_out_still_running: 0,
        blocking_still_running: still_running,
        rejected: 3,
        oldest_queue_wait: Duration::from_millis(40),
        tasks: Vec::new(),
    }
}

#[test]
fn merge_blocking_counts_annotates_once_and_makes_unhealthy() {
    let mut report = report("owner");
    report.merge_blocking(executor_snapshot(2));
    report.merge_blocking(executor_snapshot(1));
    assert_eq!(report.blocking_still_running, 3);
    assert_eq!(
        report.annotations,
        vec![ShutdownAnnotation::new(BLOCKING_ANNOTATION)]
    );
    assert!(!report.is_healthy());
    let json = report
        .assert_no_task_leak()
        .expect_err("blocking work still running");
    assert!(json.contains(BLOCKING_ANNOTATION));
}

#[test]
fn merging_idle_blocking_work_changes_nothing() {
    let mut report = report("owner");
    report.merge_blocking(executor_snapshot(0));
    assert_eq!(report.blocking_still_running, 0);
    assert!(report.annotations.is_empty());
    assert!(report.is_healthy());
}

#[test]
fn executor_snapshot_serializes_queue_wait_in_ms() {
    let value = serde_json::to_value(executor_snapshot(1)).expect("serializable");
    assert_eq!(value["lane"], "storage-io");
    assert_eq!(value["oldest_queue_wait_ms"], 40);
    assert_eq!(value["blocking_still_running"], 1);
}

const DEPTH: usize = 4_096;

/// Builds a chain `DEPTH` reports deep without recursion; the deepest one is
/// unhealthy when `leaf_leaked` is set.
fn deep_chain(leaf_leaked: bool) -> ShutdownReport {
    let mut node = report("leaf");
    node.leaked = usize::from(leaf_leaked);
    for level in (0..DEPTH - 1).rev() {
        let mut parent = report(&format!("level-{level}"));
        parent.children.push(node);
        node = parent;
    }
    node
}

/// Drops a chain without recursive drop glue by detaching children first.
fn dismantle(root: ShutdownReport) {
    let mut pending = vec![root];
    while let Some(mut node) = pending.pop() {
        pending.append(&mut node.children);
    }
}

fn depth_of(root: &ShutdownReport) -> usize {
    let mut depth = 1;
    let mut node = root;
    while let Some(child) = node.children.first() {
        depth += 1;
        node = child;
    }
    depth
}

#[test]
fn deep_chain_clones_and_checks_health_on_a_small_stack() {
    let worker = std::thread::Builder::new()
        .name("deep-report".into())
        .stack_size(1 << 20)
        .spawn(|| {
            let healthy = deep_chain(false);
            assert!(healthy.is_healthy());
            let copy = healthy.clone();
            assert_eq!(depth_of(&copy), DEPTH);
            assert!(copy.is_healthy());
            dismantle(copy);
            dismantle(healthy);

            let unhealthy = deep_chain(true);
            assert!(!unhealthy.is_healthy());
            let copy = unhealthy.clone();
            assert_eq!(depth_of(&copy), DEPTH);
            assert!(!copy.is_healthy());
            let mut leaf = &copy;
            while let Some(child) = leaf.children.first() {
                leaf = child;
            }
            assert_eq!((leaf.name.as_str(), leaf.leaked), ("leaf", 1));
            dismantle(copy);
            dismantle(unhealthy);
        })
        .expect("spawn the small-stack thread");
    worker
        .join()
        .expect("deep report work fits in 1 MiB of stack");
}

/// A 100,000-deep report a user holds: cloned, checked, serialized and
/// dropped on a 1 MiB thread stack. `to_json` writes the whole tree (the
/// rule of `src/shutdown_report.rs`, invariant 2: every level, no marker);
/// the `Serialize` impl writes the first `SERIALIZED_DEPTH_LIMIT` levels
/// and one marker counting the rest.
#[test]
fn a_100000_deep_report_is_safe_on_a_1_mib_stack() {
    const DEPTH: usize = 100_000;
    std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(|| {
            let mut report = ShutdownReport::new("leaf", Duration::ZERO);
            report.leaked = 1;
            for level in 0..DEPTH {
                let mut parent = ShutdownReport::new(format!("level-{level}"), Duration::ZERO);
                parent.children.push(report);
                report = parent;
            }
            let copy = report.clone();
            assert!(!copy.is_healthy(), "the leaf's leak is seen");
            let json = report.to_json();
            assert!(!json.contains("truncated"), "the full tree");
            assert_eq!(
                json.matches("\"children\": [").count(),
                DEPTH + 1,
                "every node, the leaf too"
            );
            assert_eq!(json.matches("\"name\": \"level-").count(), DEPTH);
            assert!(json.contains("\"name\": \"leaf\""));
            assert!(json.contains("\"leaked\": 1"));
            let serialized: serde_json::Value =
                serde_json::to_value(&report).expect("depth-limited");
            let mut node = &serialized;
            for _ in 0..ShutdownReport::SERIALIZED_DEPTH_LIMIT {
                node = &node["children"][0];
            }
            assert_eq!(node["children"][0]["truncated"], true);
            assert_eq!(
                node["children"][0]["omitted_groups"],
                DEPTH - ShutdownReport::SERIALIZED_DEPTH_LIMIT
            );
            drop(copy);
            drop(report);
        })
        .expect("thread")
        .join()
        .expect("no stack overflow");
}

/// Within the depth limit, `to_json` and the `Serialize` impl give the
/// same JSON (one definition of the fields, two writers), and `to_json`
/// of a tree deeper than the limit parses back to every level.
#[test]
fn to_json_matches_the_serialize_impl_and_writes_every_level() {
    let mut leaf = ShutdownReport::new("leaf \"quoted\" \\ [x]", Duration::from_millis(7));
    leaf.timed_out = 2;
    leaf.annotations
        .push(ShutdownAnnotation::new("note: {braces} and , commas"));
    let mut middle = ShutdownReport::new("middle", Duration::ZERO).with_reason("signal");
    middle.children.push(leaf.clone());
    middle
        .children
        .push(ShutdownReport::new("empty", Duration::ZERO));
    let mut root = ShutdownReport::new("root", Duration::from_millis(1_203));
    root.children.push(middle);
    assert_eq!(
        root.to_json(),
        serde_json::to_string_pretty(&root).expect("serializes")
    );
    let mut deep = leaf;
    for level in 0..ShutdownReport::SERIALIZED_DEPTH_LIMIT + 8 {
        let mut parent = ShutdownReport::new(format!("level-{level}"), Duration::ZERO);
        parent.children.push(deep);
        deep = parent;
    }
    let parsed: serde_json::Value = serde_json::from_str(&deep.to_json()).expect("valid JSON");
    let mut node = &parsed;
    for _ in 0..ShutdownReport::SERIALIZED_DEPTH_LIMIT + 8 {
        node = &node["children"][0];
    }
    assert_eq!(node["name"], "leaf \"quoted\" \\ [x]");
    assert_eq!(node["timed_out"], 2);
}
