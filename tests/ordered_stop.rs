//! Ordered stop (`src/task_group/stop_order.rs`): a component created with
//! `component_after` stays open while the components it stops after drain,
//! then shuts down within the same frozen deadline.

mod support;

use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rocketmq_runtime::{
    BudgetClass, BudgetLimit, BudgetedQueue, ChildServiceContext, FullPolicy, RuntimeConfig,
    RuntimeContext, RuntimeContractPolicy, RuntimeContractViolation, RuntimeErrorKind,
    RuntimeOwner, ShutdownDeadline, TaskGroupLifecycleState,
};
use support::{guard, harness};
use tokio::time::Instant;

const LINES: usize = 10_000;

/// What the writer saw: lines written, and the first error that stopped it.
#[derive(Default)]
struct Written {
    lines: usize,
    error: Option<String>,
}

/// 10,000 accepted requests are pushed through a budgeted queue to a
/// writer that appends each line to a file through its component's
/// default `storage_io()` lane. A SIGTERM-style shutdown (one frozen
/// deadline, requested while the queue is full and most lines are still
/// with the request component) loses none of them: the writer, ordered
/// after the requests, keeps its lane until it has written the last line.
#[test]
fn an_ordered_writer_writes_every_queued_line_during_shutdown() {
    let owner = RuntimeOwner::plan(RuntimeConfig::for_parallelism("drain", 2))
        .expect("valid")
        .build()
        .expect("owner");
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("lines.log");
    let file = Arc::new(Mutex::new(std::fs::File::create(&path).expect("file")));

    let broker = owner.root_context().component("broker");
    let requests = broker.component("requests");
    let writer = broker
        .component_after("writer", &[&requests])
        .expect("a sibling");
    let budget = owner
        .root_context()
        .process_budget()
        .child(
            "lines",
            BudgetLimit::new(256, 1 << 20, FullPolicy::WaitUntilDeadline),
        )
        .expect("fits");
    let queue = Arc::new(BudgetedQueue::new(budget));

    // The request component: its accepted requests are queued in order,
    // then the queue is closed (the writer drains what is left).
    let (pushed_some, sigterm) = tokio::sync::oneshot::channel();
    let producer = Arc::clone(&queue);
    requests
        .spawn_service("accept", async move {
            let mut pushed_some = Some(pushed_some);
            for index in 0..LINES {
                let line = format!("line {index}");
                let until = Instant::now() + Duration::from_secs(60);
                let outcome = producer
                    .push_until(line, 16, BudgetClass::Data, until)
                    .await;
                assert!(
                    outcome.is_accepted(),
                    "line {index} was refused: {outcome:?}"
                );
                if index == 1_000 {
                    if let Some(sender) = pushed_some.take() {
                        let _ = sender.send(());
                    }
                }
            }
            producer.close();
        })
        .expect("open");

    // The writer: every line through the storage lane, in order.
    let written = Arc::new(Mutex::new(Written::default()));
    let storage = writer.storage_io().clone();
    let consumer = Arc::clone(&queue);
    let progress = Arc::clone(&written);
    writer
        .spawn_service("write", async move {
            while let Some(line) = consumer.recv().await {
                let file = Arc::clone(&file);
                let result = storage
                    .spawn_io("append", move || {
                        writeln!(file.lock().expect("file lock"), "{line}")
                    })
                    .await;
                let mut progress = progress.lock().expect("progress");
                match result {
                    Ok(Ok(())) => progress.lines += 1,
                    Ok(Err(error)) => progress.error = Some(error.to_string()),
                    Err(error) => progress.error = Some(error.to_string()),
                }
                if progress.error.is_some() {
                    return;
                }
            }
        })
        .expect("open");

    // SIGTERM while lines are in flight: one frozen deadline.
    owner.block_on(async { guard("first lines", sigterm).await.expect("sent") });
    let report = owner
        .block_on(owner.shutdown_tasks_until(ShutdownDeadline::after(Duration::from_secs(60))));
    let written = written.lock().expect("progress");
    assert_eq!(written.error, None, "the writer was refused");
    assert_eq!(written.lines, LINES, "{}", report.to_json());
    assert!(report.is_healthy(), "{}", report.to_json());
    let lines: Vec<String> = std::io::BufReader::new(std::fs::File::open(&path).expect("file"))
        .lines()
        .map(|line| line.expect("utf-8"))
        .collect();
    assert_eq!(lines.len(), LINES);
    assert!(
        lines
            .iter()
            .enumerate()
            .all(|(index, line)| *line == format!("line {index}")),
        "the lines are in order"
    );
}

/// A `broker` component with a `stubborn` child (one task that ignores
/// cancellation) and a `writer` child ordered after it; returns the writer
/// (which keeps `broker` alive).
fn stubborn_then_writer(ctx: &RuntimeContext) -> ChildServiceContext {
    let broker = ctx.service_context("broker");
    let stubborn = broker.component("stubborn");
    stubborn
        .spawn_service("ignores-cancel", std::future::pending::<()>())
        .expect("open");
    broker
        .component_after("writer", &[&stubborn])
        .expect("a sibling")
}

/// A component ordered after a stubborn one (it ignores cancellation
/// until it is aborted) gets its turn at the deadline: the whole shutdown
/// ends within the frozen deadline, the stubborn task is reported as
/// timed out, and until then the ordered component stayed open.
#[tokio::test(start_paused = true)]
async fn an_ordered_component_after_a_stubborn_one_ends_within_the_deadline() {
    let ctx = harness("stubborn");
    let writer = stubborn_then_writer(&ctx);
    let token = writer.task_group().cancellation_token();
    let (turn, turn_seen) = tokio::sync::oneshot::channel();
    writer
        .spawn_service("flush", async move {
            token.cancelled().await;
            let _ = turn.send(Instant::now());
        })
        .expect("open");

    let started = Instant::now();
    let deadline = ShutdownDeadline::after(Duration::from_secs(5));
    let shutdown = ctx.shutdown_tasks_until(deadline);
    tokio::pin!(shutdown);
    // Before the deadline the writer is still open and admits work.
    tokio::select! {
        biased;
        _ = &mut shutdown => panic!("the stubborn task holds the shutdown"),
        () = tokio::time::sleep(Duration::from_secs(4)) => {}
    }
    assert_eq!(
        writer.task_group().lifecycle_state(),
        TaskGroupLifecycleState::Open
    );
    assert!(writer.spawn_service("late-work", async {}).is_ok());
    let report = shutdown.await;
    assert!(
        Instant::now() - started <= Duration::from_secs(5),
        "ended within the frozen deadline"
    );
    let broker_report = &report.children[0];
    let stubborn_report = &broker_report.children[0];
    assert_eq!(stubborn_report.timed_out, 1, "{}", report.to_json());
    let writer_report = &broker_report.children[1];
    assert_eq!(writer_report.name, "writer");
    assert_eq!(
        writer.task_group().lifecycle_state(),
        TaskGroupLifecycleState::ShutdownCompleted
    );
    // Its turn came at the deadline: its flush was aborted then, never
    // cancelled earlier (the stop-order task ended when the shutdown
    // began).
    assert!(
        turn_seen.await.is_err(),
        "the flush never saw a cancellation"
    );
    assert_eq!(
        (writer_report.timed_out, writer_report.completed),
        (1, 2),
        "the flush timed out; stop-order and late-work completed: {}",
        report.to_json()
    );
}

/// When the stubborn component gives in early, the ordered one takes its
/// turn at once, not at the deadline.
#[tokio::test(start_paused = true)]
async fn an_ordered_component_takes_its_turn_when_its_predecessors_settle() {
    let ctx = harness("turn");
    let broker = ctx.service_context("broker");
    let slow = broker.component("slow");
    let slow_token = slow.task_group().cancellation_token();
    slow.spawn_service("finishes-later", async move {
        slow_token.cancelled().await;
        tokio::time::sleep(Duration::from_secs(2)).await;
    })
    .expect("open");
    let writer = broker
        .component_after("writer", &[&slow])
        .expect("a sibling");
    let token = writer.task_group().cancellation_token();
    let (turn, turn_seen) = tokio::sync::oneshot::channel();
    writer
        .spawn_service("flush", async move {
            token.cancelled().await;
            tokio::time::sleep(Duration::from_millis(100)).await;
            let _ = turn.send(Instant::now());
        })
        .expect("open");

    let started = Instant::now();
    let report = guard("shutdown", ctx.shutdown_tasks(Duration::from_secs(30))).await;
    let at = turn_seen.await.expect("the flush ran") - started;
    assert_eq!(at, Duration::from_millis(2_100), "cancelled after 2 s");
    assert!(report.is_healthy(), "{}", report.to_json());
    assert_eq!(Instant::now() - started, Duration::from_millis(2_100));
}

/// A plain cancellation of the parent reaches an ordered component (its
/// token is its own; its `stop-order` task carries the cancellation over).
#[tokio::test]
async fn a_plain_cancel_of_the_parent_reaches_an_ordered_component() {
    let ctx = harness("plain");
    let broker = ctx.service_context("broker");
    let requests = broker.component("requests");
    let writer = broker
        .component_after("writer", &[&requests])
        .expect("a sibling");
    assert_eq!(writer.task_group().task_count(), 1, "its stop-order task");
    broker.task_group().cancel();
    guard(
        "the writer is cancelled",
        writer.task_group().cancellation_token().cancelled(),
    )
    .await;
    assert!(requests.task_group().cancellation_token().is_cancelled());
    // A child created under a cancelled parent is born cancelled.
    let late = broker
        .component_after("late", &[&requests])
        .expect("a sibling");
    assert!(late.task_group().cancellation_token().is_cancelled());
    let report = guard("shutdown", ctx.shutdown_tasks(Duration::from_secs(5))).await;
    assert!(report.is_healthy(), "{}", report.to_json());
}

/// `shutdown_now` does not order: the ordered component is aborted with
/// the rest, at once.
#[tokio::test]
async fn shutdown_now_does_not_wait_for_an_ordered_turn() {
    let ctx = harness("now");
    let writer = stubborn_then_writer(&ctx);
    writer
        .spawn_service("also-stubborn", std::future::pending::<()>())
        .expect("open");
    let report = ctx.shutdown_tasks_now();
    assert_eq!(
        writer.task_group().lifecycle_state(),
        TaskGroupLifecycleState::ShutdownCompleted
    );
    assert!(writer.task_group().cancellation_token().is_cancelled());
    assert!(!report.is_healthy());
}

/// A dropped shutdown future leaves the whole subtree sealed and
/// cancelled, the ordered component included (its order is lost with the
/// future); calling the shutdown again completes it.
#[tokio::test(start_paused = true)]
async fn a_dropped_shutdown_still_closes_the_ordered_component() {
    let ctx = harness("dropped");
    let writer = stubborn_then_writer(&ctx);
    let deadline = ShutdownDeadline::after(Duration::from_secs(3));
    {
        let shutdown = ctx.shutdown_tasks_until(deadline);
        tokio::pin!(shutdown);
        tokio::select! {
            biased;
            _ = &mut shutdown => panic!("the stubborn task holds the shutdown"),
            () = tokio::task::yield_now() => {}
        }
        assert_eq!(
            writer.task_group().lifecycle_state(),
            TaskGroupLifecycleState::Open,
            "waiting for its turn"
        );
    }
    assert_eq!(
        writer.task_group().lifecycle_state(),
        TaskGroupLifecycleState::Closed,
        "closed by the dropped shutdown"
    );
    let report = guard("again", ctx.shutdown_tasks_until(deadline)).await;
    assert_eq!(report.children[0].children.len(), 2);
    assert_eq!(report.children[0].children[0].timed_out, 1);
}

/// A context that is not a component of the same parent is refused with a
/// contract violation naming the rule; a closed context is accepted.
#[tokio::test]
async fn component_after_only_orders_siblings() {
    let ctx = harness("siblings");
    let broker = ctx.service_context("broker");
    let other = ctx.service_context("other");
    let nested = broker.component("requests").component("inner");
    for stranger in [&other, &nested] {
        let error = broker
            .component_after("writer", &[stranger])
            .expect_err("not a sibling");
        assert_eq!(
            error,
            RuntimeContractViolation::InvalidConfiguration {
                policy: RuntimeContractPolicy::StopOrderAmongSiblings
            }
        );
        assert!(
            error.to_string().contains("stop-order-among-siblings"),
            "{error}"
        );
    }
    let report = guard(
        "shutdown",
        broker.task_group().shutdown(Duration::from_secs(5)),
    )
    .await;
    assert!(report.is_healthy());
    let closed = broker.component("late");
    let after_closed = broker
        .component_after("writer", &[&closed])
        .expect("a closed context has settled");
    assert_eq!(
        after_closed.task_group().lifecycle_state(),
        TaskGroupLifecycleState::ShutdownCompleted
    );
}

/// A refused admission names the scope path and, for blocking work, the
/// lane.
#[tokio::test]
async fn refused_admissions_name_the_scope_and_the_lane() {
    let ctx = harness("errors");
    let broker = ctx.service_context("broker");
    let writer = broker.component("writer");
    let _ = guard(
        "shutdown",
        broker.task_group().shutdown(Duration::from_secs(5)),
    )
    .await;
    let refused = writer
        .storage_io()
        .spawn_io("append", || {})
        .await
        .expect_err("closed");
    assert_eq!(refused.kind(), RuntimeErrorKind::Closed);
    assert_eq!(
        refused.to_string(),
        "runtime scope is closed during blocking-queue-admission (closed): \
         scope errors/broker/writer, lane storage-io"
    );
    let spawn = writer.spawn_service("late", async {}).expect_err("closed");
    assert_eq!(
        spawn.to_string(),
        "runtime scope is closed during spawn-task-group-task (closed): scope errors/broker/writer"
    );
}
