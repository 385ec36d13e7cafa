//! An idle operation costs no task group and at most 256 bytes of heap
//! (`src/operation.rs`, invariant 1). Counted with this test binary's
//! global allocator.

use std::time::Duration;

use rocketmq_runtime::{OperationContext, RuntimeContext, TaskKind};

#[path = "support/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::{retained_by, start_counting, stop_counting, CountingAllocator};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

#[test]
fn an_idle_operation_costs_at_most_256_bytes_and_no_group() {
    let (plain, plain_bytes) = retained_by(|| OperationContext::without_deadline(TaskKind::Worker));
    let deadline = (tokio::time::Instant::now() + Duration::from_secs(5)).into_std();
    let (timed, timed_bytes) = retained_by(|| OperationContext::new(deadline, TaskKind::Worker));
    println!("idle operation: {plain_bytes} B (no deadline), {timed_bytes} B (deadline)");
    assert!(plain_bytes > 0, "the allocator counts");
    assert!(plain_bytes <= 256, "{plain_bytes} B");
    assert!(timed_bytes <= 256, "{timed_bytes} B");
    let (view, view_bytes) = retained_by(|| plain.with_task_kind(TaskKind::Service));
    assert_eq!(view_bytes, 0, "a view shares the state");
    drop((view, timed));
}

/// Running tasks through an operation and waiting for them leaves nothing
/// behind: what an idle operation holds does not grow with use.
#[tokio::test(flavor = "current_thread")]
async fn an_operation_used_and_idle_again_retains_nothing_more() {
    let harness = RuntimeContext::try_from_current("ops").expect("inside Tokio");
    let group = harness.root_group().clone();
    let components = group.component_count();
    let op = OperationContext::without_deadline(TaskKind::Worker);
    let round = || async {
        for _ in 0..10 {
            group
                .spawn_operation(&op, "request", async {})
                .expect("open");
            group
                .spawn_draining_operation(&op, "request", tokio::task::yield_now())
                .expect("open");
        }
        assert!(op
            .wait(&group, Duration::from_secs(5))
            .await
            .expect("owner"));
    };
    // The first round warms the group's task table and the runtime.
    round().await;
    start_counting();
    round().await;
    let retained = stop_counting();
    println!("a second round of 20 tasks retained {retained} B");
    assert_eq!(
        retained, 0,
        "tasks, records and wake-ups are all given back"
    );
    assert_eq!(
        group.component_count(),
        components,
        "no task group per operation"
    );
    assert_eq!(op.active_task_count(), 0);
}
