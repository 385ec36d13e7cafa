//! Warnings about blocking work. `BlockingPoolPolicy::warn_after`: a
//! closure that runs longer is logged exactly once, naming its lane and
//! task, whether its caller still waits or gave up. `MetadataIoConfig`'s
//! retained `blocking_*` fields: setting them is logged once per actor
//! start, since the metadata lane applies instead. Its own test binary: it
//! installs a global subscriber.

#[path = "support/events.rs"]
mod events;
mod support;

use std::sync::mpsc;
use std::time::Duration;

use rocketmq_runtime::{BlockingKind, BlockingLane, BlockingPoolPolicy, RuntimeContext};
use support::guard;

const SLOW: &str = "blocking closure running longer than warn_after";

fn warnings_for(task: &str) -> Vec<events::Event> {
    events::recorded()
        .into_iter()
        .filter(|event| event.message == SLOW && event.field("task") == Some(task))
        .collect()
}

fn harness(name: &'static str) -> RuntimeContext {
    events::recorded(); // installs the recorder first
    let policy = BlockingPoolPolicy {
        warn_after: Duration::from_secs(1),
        ..BlockingPoolPolicy::default()
    };
    RuntimeContext::try_from_current_with_blocking_policy(name, policy).expect("valid")
}

/// A closure that says when it started, then blocks until the returned
/// sender is used or dropped.
fn gated() -> (
    tokio::sync::oneshot::Receiver<()>,
    mpsc::Sender<()>,
    impl FnOnce() + Send + 'static,
) {
    let (entered_tx, entered) = tokio::sync::oneshot::channel();
    let (release, gate) = mpsc::channel::<()>();
    (entered, release, move || {
        let _ = entered_tx.send(());
        let _ = gate.recv();
    })
}

#[tokio::test(start_paused = true)]
async fn a_slow_closure_whose_caller_waits_is_logged_once() {
    let ctx = harness("waits");
    let storage = ctx.blocking(BlockingLane::StorageIo).clone();
    let (entered, release, work) = gated();
    let caller = tokio::spawn(async move { storage.spawn_io("slow-waited", work).await });
    guard("closure started", entered).await.expect("started");
    tokio::time::advance(Duration::from_millis(1_500)).await;
    tokio::task::yield_now().await;
    let warnings = warnings_for("slow-waited");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0].field("lane"), Some("storage-io"));
    release.send(()).expect("closure waits");
    guard("caller", caller).await.expect("joins").expect("ran");
    assert_eq!(warnings_for("slow-waited").len(), 1, "not again at exit");
    let _ = ctx.shutdown_tasks(Duration::from_secs(1)).await;
}

#[tokio::test(start_paused = true)]
async fn a_slow_closure_whose_caller_left_is_logged_as_it_exits() {
    let ctx = harness("abandoned");
    let cpu = ctx.blocking(BlockingLane::CpuCrypto).clone();
    let (entered, release, work) = gated();
    let (exited_tx, exited_rx) = tokio::sync::oneshot::channel();
    let caller = tokio::spawn(async move {
        cpu.spawn("slow-abandoned", BlockingKind::CpuBound, move || {
            work();
            let _ = exited_tx.send(());
        })
        .await
    });
    guard("closure started", entered).await.expect("started");
    caller.abort(); // the caller stops waiting before warn_after
    let _ = caller.await;
    tokio::time::advance(Duration::from_secs(2)).await;
    assert!(warnings_for("slow-abandoned").is_empty(), "nobody waited");
    release.send(()).expect("closure waits");
    guard("closure exit", exited_rx).await.expect("exits");
    // The warning is logged on the blocking thread just after the record
    // leaves the table: wait for the warning itself.
    // Bounded: paused time never fires a hang guard while this task spins.
    for _ in 0..1_000_000 {
        if !warnings_for("slow-abandoned").is_empty() {
            break;
        }
        tokio::task::yield_now().await;
    }
    let warnings = warnings_for("slow-abandoned");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0].field("lane"), Some("cpu-crypto"));
    let _ = ctx.shutdown_tasks(Duration::from_secs(1)).await;
}

#[tokio::test(start_paused = true)]
async fn a_closure_within_warn_after_is_not_logged() {
    let ctx = harness("fast");
    let value = ctx
        .blocking(BlockingLane::MetadataIo)
        .spawn_io("fast", || 7)
        .await
        .expect("ran");
    assert_eq!(value, 7);
    assert!(warnings_for("fast").is_empty());
    let _ = ctx.shutdown_tasks(Duration::from_secs(1)).await;
}

const LEGACY: &str = "MetadataIoConfig blocking_* fields are retained for compatibility and have no effect: writes run on the metadata lane, configured through RuntimeConfig::blocking_lane_policies.metadata_io";

#[tokio::test]
async fn retained_metadata_blocking_fields_warn_once_per_actor_start() {
    events::recorded();
    let policy = BlockingPoolPolicy {
        name: "legacy-fields-lane".to_string(),
        ..BlockingPoolPolicy::default()
    };
    let harness =
        RuntimeContext::try_from_current_with_blocking_policy("legacy", policy).expect("valid");
    let context = harness.service_context("metadata");
    let legacy_warnings = || {
        events::recorded()
            .into_iter()
            .filter(|event| {
                event.message == LEGACY
                    && event.field("lane") == Some("legacy-fields-lane.metadata-io")
            })
            .collect::<Vec<_>>()
    };
    let defaults = rocketmq_runtime::MetadataIoConfig::default()
        .into_plan()
        .expect("valid")
        .start(&context)
        .expect("started");
    assert!(legacy_warnings().is_empty(), "defaults are not reported");
    let changed = rocketmq_runtime::MetadataIoConfig {
        blocking_task_timeout: Duration::from_secs(7),
        blocking_warn_after: Duration::from_secs(2),
        ..rocketmq_runtime::MetadataIoConfig::default()
    };
    let actor = changed
        .into_plan()
        .expect("valid")
        .start(&context)
        .expect("started");
    let warnings = legacy_warnings();
    assert_eq!(warnings.len(), 1, "once per actor start: {warnings:?}");
    assert_eq!(
        warnings[0].field("fields"),
        Some(r#"["blocking_task_timeout", "blocking_warn_after"]"#)
    );
    drop((defaults, actor));
    let _ = harness.shutdown_tasks(Duration::from_secs(5)).await;
}
