//! The migration fixture: code moved from the original crate's scheduler
//! onto a `RuntimeContext` harness owns a fixed-rate schedule that runs
//! once at once (zero initial delay), and the harness shuts down healthy.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use std::num::NonZeroUsize;

use rocketmq_runtime::{
    MissedTickPolicy, RuntimeContext, ScheduledExecutionPolicy, ScheduledTaskConfig,
};

#[tokio::test(start_paused = true)]
async fn a_harness_owned_fixed_rate_schedule_runs_once_and_shuts_down_healthy() {
    let harness = RuntimeContext::try_from_current("migration").expect("inside Tokio");
    let broker = harness.service_context("broker");
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&runs);
    let schedules = broker.scheduled_tasks("maintenance");
    let _ = schedules
        .schedule(
            ScheduledTaskConfig::fixed_rate("persist", Duration::from_secs(60))
                .with_initial_delay(Duration::ZERO),
            // Fixed rate allows overlapping runs: at most one here.
            ScheduledExecutionPolicy::bounded(NonZeroUsize::MIN, MissedTickPolicy::Skip),
            move || {
                let counted = Arc::clone(&counted);
                async move {
                    counted.fetch_add(1, Ordering::SeqCst);
                }
            },
        )
        .expect("scheduled");
    // The first run starts at once; the next is a minute away.
    for _ in 0..16 {
        if runs.load(Ordering::SeqCst) > 0 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(schedules.snapshot()[0].runs, 1);
    let report = harness.shutdown_tasks(Duration::from_secs(5)).await;
    assert!(report.is_healthy(), "{}", report.to_json());
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}
