//! `ShutdownDeadline`: one Tokio clock, saturating construction, earliest-of.

use std::time::Duration;

use rocketmq_runtime::ShutdownDeadline;
use tokio::time::{advance, Instant};

#[tokio::test(start_paused = true)]
async fn remaining_counts_down_on_paused_time_and_saturates() {
    let deadline = ShutdownDeadline::after(Duration::from_secs(5));
    assert_eq!(deadline.remaining(), Duration::from_secs(5));
    assert!(!deadline.is_expired());

    advance(Duration::from_secs(2)).await;
    assert_eq!(deadline.remaining(), Duration::from_secs(3));
    assert!(!deadline.is_expired());

    advance(Duration::from_secs(3)).await;
    assert_eq!(deadline.remaining(), Duration::ZERO);
    assert!(deadline.is_expired());

    advance(Duration::from_secs(60)).await;
    assert_eq!(deadline.remaining(), Duration::ZERO);
    assert!(deadline.is_expired());
}

#[tokio::test(start_paused = true)]
async fn earliest_picks_the_earlier_deadline_either_way() {
    let early = ShutdownDeadline::after(Duration::from_secs(10));
    let late = ShutdownDeadline::after(Duration::from_secs(45));
    assert_eq!(early.earliest(late), early);
    assert_eq!(late.earliest(early), early);
    assert_eq!(late.earliest(late), late);
    assert!(early < late);

    advance(Duration::from_secs(10)).await;
    let combined = late.earliest(early);
    assert!(combined.is_expired());
    assert!(!late.is_expired());
}

#[tokio::test(start_paused = true)]
async fn a_zero_timeout_is_already_expired() {
    let deadline = ShutdownDeadline::after(Duration::ZERO);
    assert!(deadline.is_expired());
    assert_eq!(deadline.remaining(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn sleeping_until_the_deadline_expires_it() {
    let deadline = ShutdownDeadline::after(Duration::from_millis(1_500));
    tokio::time::sleep_until(deadline.tokio_instant()).await;
    assert!(deadline.is_expired());
}

#[test]
fn overflowing_timeouts_saturate_to_the_far_future() {
    let deadline = ShutdownDeadline::after(Duration::MAX);
    assert!(!deadline.is_expired());
    assert!(deadline.remaining() > Duration::from_secs(86_400 * 365 * 20));
    let soon = ShutdownDeadline::after(Duration::from_secs(1));
    assert_eq!(deadline.earliest(soon), soon);
}

#[test]
fn conversions_round_trip() {
    let tokio_now = Instant::now() + Duration::from_secs(3);
    let deadline = ShutdownDeadline::from_tokio(tokio_now);
    assert_eq!(deadline.tokio_instant(), tokio_now);
    assert_eq!(deadline.instant(), tokio_now.into_std());
    assert_eq!(ShutdownDeadline::at(deadline.instant()), deadline);

    // Outside a runtime Tokio's clock is the standard clock, so "now" has passed.
    let past = ShutdownDeadline::at(Instant::now().into_std());
    assert!(past.is_expired());
    assert_eq!(past.remaining(), Duration::ZERO);
}

/// The four deadline and instant types meet through `From`: a shutdown
/// deadline bounds a metadata wait and a queue push, and back, without
/// moving the instant (one rule: every deadline runs on Tokio's clock).
#[tokio::test(start_paused = true)]
async fn deadlines_and_instants_convert_without_moving() {
    use rocketmq_runtime::{BudgetClass, BudgetLimit, BudgetedQueue, FullPolicy, MetadataDeadline};

    let shutdown = ShutdownDeadline::after(Duration::from_secs(5));
    let metadata = MetadataDeadline::from(shutdown);
    assert_eq!(metadata.instant(), shutdown.tokio_instant());
    assert_eq!(ShutdownDeadline::from(metadata), shutdown);
    let tokio_instant: tokio::time::Instant = shutdown.into();
    assert_eq!(ShutdownDeadline::from(tokio_instant), shutdown);
    let std_instant: std::time::Instant = metadata.into();
    assert_eq!(std_instant, shutdown.instant());
    assert_eq!(MetadataDeadline::from(tokio_instant), metadata);

    // A queue push bounded by the shutdown's deadline.
    let queue = BudgetedQueue::new(
        rocketmq_runtime::ResourceBudgetTree::new(
            "queue",
            BudgetLimit::new(1, 1 << 20, FullPolicy::WaitUntilDeadline),
        )
        .expect("valid")
        .root(),
    );
    assert!(queue.try_push_data(1_u32, 8).is_accepted());
    let refused = queue
        .push_until(2, 8, BudgetClass::Data, shutdown.into())
        .await;
    assert!(!refused.is_accepted(), "full until the deadline");
    assert!(shutdown.is_expired());
}
