//! ScheduledTaskGroup (`src/scheduled.rs` and `src/scheduled/`). Every test
//! runs on paused Tokio time and draws the ticks it expects, in
//! milliseconds from the start.

mod support;

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rocketmq_runtime::{
    MissedTickPolicy, OperationContext, OperationOutcome, RuntimeErrorKind, RuntimeOperation,
    ScheduleMode, ScheduledExecutionPolicy, ScheduledTaskConfig, ScheduledTaskControl,
    ScheduledTaskGroup, ScheduledTaskRegistrationOutcome, ScheduledTaskSnapshot,
    TaskGroupLifecycleState, TaskKind,
};
use support::harness;
use tokio::time::Instant;

const fn n(value: usize) -> NonZeroUsize {
    match NonZeroUsize::new(value) {
        Some(n) => n,
        None => panic!("zero"),
    }
}

fn ms(value: u64) -> Duration {
    Duration::from_millis(value)
}

/// Records when each run starts (ms since `base`) and how many overlap.
#[derive(Clone)]
struct Recorder {
    base: Instant,
    starts: Arc<Mutex<Vec<u64>>>,
    active: Arc<AtomicUsize>,
    max_active: Arc<AtomicUsize>,
}

impl Recorder {
    fn new() -> Self {
        Self {
            base: Instant::now(),
            starts: Arc::default(),
            active: Arc::default(),
            max_active: Arc::default(),
        }
    }

    fn starts(&self) -> Vec<u64> {
        self.starts.lock().expect("unpoisoned").clone()
    }

    /// A run that records its start and then takes `run_time`.
    fn run(&self, run_time: Duration) -> impl std::future::Future<Output = ()> + Send + 'static {
        let me = self.clone();
        async move {
            let started = me.base.elapsed().as_millis() as u64;
            me.starts.lock().expect("unpoisoned").push(started);
            let now = me.active.fetch_add(1, Ordering::SeqCst) + 1;
            me.max_active.fetch_max(now, Ordering::SeqCst);
            // Leaves the count when the run returns or is dropped.
            let _active = Active(Arc::clone(&me.active));
            tokio::time::sleep(run_time).await;
        }
    }

    /// Periodic work whose runs take `run_time`.
    fn task(
        &self,
        run_time: Duration,
    ) -> impl FnMut() -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> + Send + 'static
    {
        let me = self.clone();
        move || Box::pin(me.run(run_time))
    }
}

struct Active(Arc<AtomicUsize>);

impl Drop for Active {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn only(scheduler: &ScheduledTaskGroup) -> ScheduledTaskSnapshot {
    let mut snapshots = scheduler.snapshot();
    assert_eq!(snapshots.len(), 1);
    snapshots.remove(0)
}

/// Sleeps until `at` ms after `recorder.base`.
async fn until(recorder: &Recorder, at: u64) {
    tokio::time::sleep_until(recorder.base + ms(at)).await;
}

fn scheduler(name: &'static str) -> (rocketmq_runtime::RuntimeContext, ScheduledTaskGroup) {
    let harness = harness("sched");
    let scheduler = harness.service_context("broker").scheduled_tasks(name);
    (harness, scheduler)
}

/// A `maintenance` scheduler with `config` registered under the default
/// policy, its runs recorded and taking `run_time`.
fn recorded(
    config: ScheduledTaskConfig,
    run_time: Duration,
) -> (
    rocketmq_runtime::RuntimeContext,
    ScheduledTaskGroup,
    Recorder,
) {
    let (harness, scheduler) = scheduler("maintenance");
    let recorder = Recorder::new();
    let _ = scheduler
        .schedule(
            config,
            ScheduledExecutionPolicy::default(),
            recorder.task(run_time),
        )
        .expect("registered");
    (harness, scheduler, recorder)
}

/// A fixed-rate-without-overlap schedule with `policy`, period 10, runs of
/// 23, observed until `at` ms: the run starts and the snapshot.
async fn serial_fixed_rate(
    policy: ScheduledExecutionPolicy,
    at: u64,
) -> (Vec<u64>, ScheduledTaskSnapshot) {
    let (_harness, scheduler) = scheduler("maintenance");
    let recorder = Recorder::new();
    let config = ScheduledTaskConfig::fixed_rate_no_overlap("heartbeat", ms(10));
    let _ = scheduler
        .schedule(config, policy, recorder.task(ms(23)))
        .expect("registered");
    until(&recorder, at).await;
    assert_eq!(
        recorder.max_active.load(Ordering::SeqCst),
        1,
        "never overlaps"
    );
    (recorder.starts(), only(&scheduler))
}

/// Fixed delay, period 10, runs of 3:
///
/// ```text
/// ms    0   3        13  16       26  29       39
///       DDD|---10---|DDD|---10---|DDD|---10---|DDD
/// ```
#[tokio::test(start_paused = true)]
async fn fixed_delay_waits_the_period_after_each_completion() {
    let (_harness, scheduler) = scheduler("maintenance");
    let recorder = Recorder::new();
    let config = ScheduledTaskConfig::fixed_delay("flush", ms(10));
    let outcome = scheduler
        .schedule(
            config,
            ScheduledExecutionPolicy::default(),
            recorder.task(ms(3)),
        )
        .expect("registered");
    let ScheduledTaskRegistrationOutcome::Scheduled(driver) = outcome else {
        panic!("not scheduled: {outcome:?}");
    };
    assert!(scheduler.group().contains_task(driver));
    until(&recorder, 40).await;
    assert_eq!(recorder.starts(), [0, 13, 26, 39]);
    let snapshot = only(&scheduler);
    assert_eq!(snapshot.mode, ScheduleMode::FixedDelay);
    assert!(snapshot.running);
    assert_eq!(
        (snapshot.runs, snapshot.active_runs, snapshot.failures),
        (3, 1, 0)
    );
    assert_eq!((snapshot.last_elapsed_ms, snapshot.max_elapsed_ms), (3, 3));
}

/// With an initial delay of 5: runs at 5, 18, 31.
#[tokio::test(start_paused = true)]
async fn fixed_delay_starts_after_the_initial_delay() {
    let config = ScheduledTaskConfig::fixed_delay("flush", ms(10)).with_initial_delay(ms(5));
    let (_harness, _scheduler, recorder) = recorded(config, ms(3));
    until(&recorder, 32).await;
    assert_eq!(recorder.starts(), [5, 18, 31]);
}

/// A controlled schedule that stops on its third run: three runs, no
/// failure, the driver is gone.
#[tokio::test(start_paused = true)]
async fn controlled_stop_ends_the_schedule_as_one_completed_run() {
    let (_harness, scheduler) = scheduler("maintenance");
    let recorder = Recorder::new();
    let calls = Arc::new(AtomicUsize::new(0));
    let config = ScheduledTaskConfig::fixed_delay("compact", ms(10));
    let run = recorder.clone();
    let _ = scheduler
        .schedule_controlled(config, move || {
            let call = calls.fetch_add(1, Ordering::SeqCst) + 1;
            let work = run.run(ms(3));
            async move {
                work.await;
                if call == 3 {
                    ScheduledTaskControl::Stop
                } else {
                    ScheduledTaskControl::Continue
                }
            }
        })
        .expect("registered");
    until(&recorder, 100).await;
    assert_eq!(recorder.starts(), [0, 13, 26]);
    let snapshot = only(&scheduler);
    assert_eq!(
        (snapshot.runs, snapshot.failures, snapshot.running),
        (3, 0, false)
    );
    assert_eq!(scheduler.group().task_count(), 0, "the driver ended");
}

/// Fixed rate without overlap, serial(Skip), period 10, runs of 23:
///
/// ```text
/// ticks  0    10   20   30   40   50   60
/// runs   [0........23)  [30.......53)  [60..
/// skips       x    x         x    x
/// ```
#[tokio::test(start_paused = true)]
async fn fixed_rate_no_overlap_skips_busy_ticks() {
    let (starts, snapshot) = serial_fixed_rate(ScheduledExecutionPolicy::default(), 65).await;
    assert_eq!(starts, [0, 30, 60]);
    assert_eq!(
        (snapshot.runs, snapshot.skips, snapshot.overlaps),
        (2, 4, 0)
    );
}

/// serial(CoalesceLatest), period 10, runs of 23: one pending run; a
/// pending run starts when the slot frees.
///
/// ```text
/// ticks    0    10   20   30   40   50   60   70
/// runs     [0.......23)[23.......46)[46.......69)[69..
/// pending       1    1+s  1    1+s  1    1+s  1
/// ```
#[tokio::test(start_paused = true)]
async fn coalesce_latest_keeps_one_pending_run() {
    let policy = ScheduledExecutionPolicy::serial(MissedTickPolicy::CoalesceLatest);
    let (starts, snapshot) = serial_fixed_rate(policy, 75).await;
    assert_eq!(starts, [0, 23, 46, 69]);
    assert_eq!(
        (snapshot.runs, snapshot.skips, snapshot.overlaps),
        (3, 3, 0)
    );
}

/// serial(BoundedCatchUp(2)), period 10, runs of 23: up to two pending.
///
/// ```text
/// ticks    0    10   20   30   40   50   60   70
/// runs     [0.......23)[23.......46)[46.......69)[69..
/// pending       1    2    1→2  2+s  1→2  2+s  1→2
/// ```
#[tokio::test(start_paused = true)]
async fn bounded_catch_up_keeps_up_to_n_pending_runs() {
    let policy = ScheduledExecutionPolicy::serial(MissedTickPolicy::BoundedCatchUp(n(2)));
    let (starts, snapshot) = serial_fixed_rate(policy, 75).await;
    assert_eq!(starts, [0, 23, 46, 69]);
    assert_eq!(
        (snapshot.runs, snapshot.skips, snapshot.overlaps),
        (3, 2, 0)
    );
}

/// Fixed rate, bounded(2, Skip), period 10, runs of 25:
///
/// ```text
/// ticks  0    10   20   30   40   50   60
/// run A  [0.......25)
/// run B       [10.......35)
/// run C                 [30.......55)
/// run D                      [40.......65)
/// run E                                [60..
/// skips            x              x
/// ```
#[tokio::test(start_paused = true)]
async fn fixed_rate_overlaps_up_to_its_bound() {
    let (_harness, scheduler) = scheduler("maintenance");
    let recorder = Recorder::new();
    let config = ScheduledTaskConfig::fixed_rate("sample", ms(10));
    let policy = ScheduledExecutionPolicy::bounded(n(2), MissedTickPolicy::Skip);
    let _ = scheduler
        .schedule(config, policy, recorder.task(ms(25)))
        .expect("registered");
    until(&recorder, 62).await;
    assert_eq!(recorder.starts(), [0, 10, 30, 40, 60]);
    let snapshot = only(&scheduler);
    assert_eq!(snapshot.mode, ScheduleMode::FixedRateAllowOverlap);
    assert_eq!(
        (snapshot.runs, snapshot.skips, snapshot.overlaps),
        (3, 2, 4)
    );
    assert_eq!(
        recorder.max_active.load(Ordering::SeqCst),
        2,
        "never more than n"
    );
}

/// A late tick stands for every grid tick it missed; the next tick stays on
/// the absolute grid and the drift says how late the tick fired.
///
/// ```text
/// grid   0    10   20   30   40
/// fired  0              35   40     (the clock jumps from 0 to 35)
/// runs   R              R    R      (35 stands for 10, 20, 30: 1 run, 2 skips)
/// ```
#[tokio::test(start_paused = true)]
async fn fixed_rate_keeps_the_absolute_grid() {
    let (_harness, scheduler) = scheduler("maintenance");
    let recorder = Recorder::new();
    let config = ScheduledTaskConfig::fixed_rate("sample", ms(10));
    let policy = ScheduledExecutionPolicy::bounded(n(1), MissedTickPolicy::Skip);
    let _ = scheduler
        .schedule(config, policy, recorder.task(Duration::ZERO))
        .expect("registered");
    for _ in 0..4 {
        tokio::task::yield_now().await;
    }
    assert_eq!(recorder.starts(), [0]);
    tokio::time::advance(ms(35)).await;
    for _ in 0..4 {
        tokio::task::yield_now().await;
    }
    assert_eq!(recorder.starts(), [0, 35]);
    let snapshot = only(&scheduler);
    assert_eq!((snapshot.skips, snapshot.last_drift_ms), (2, 25));
    until(&recorder, 41).await;
    assert_eq!(recorder.starts(), [0, 35, 40]);
    assert_eq!(only(&scheduler).last_drift_ms, 0);
}

/// `max_run_time` drops an overrunning run: fixed delay, period 10, runs of
/// 50 bounded to 5 — every run fails, and runs + failures + active =
/// reserved.
///
/// ```text
/// ms   0    5         15   20        30   35
///      [R..x|---10----|R..x|---10----|R..
/// ```
#[tokio::test(start_paused = true)]
async fn max_run_time_drops_overrunning_runs_and_every_reservation_settles_once() {
    let (_harness, scheduler) = scheduler("maintenance");
    let recorder = Recorder::new();
    let config = ScheduledTaskConfig::fixed_delay("flush", ms(10)).with_max_run_time(ms(5));
    let _ = scheduler
        .schedule(
            config,
            ScheduledExecutionPolicy::default(),
            recorder.task(ms(50)),
        )
        .expect("registered");
    until(&recorder, 32).await;
    assert_eq!(recorder.starts(), [0, 15, 30]);
    let snapshot = only(&scheduler);
    assert_eq!(
        (snapshot.runs, snapshot.failures, snapshot.active_runs),
        (0, 2, 1)
    );
    assert_eq!(
        recorder.active.load(Ordering::SeqCst),
        1,
        "dropped runs are gone"
    );
    // Fixed rate: separate run tasks are bounded the same way.
    let recorder = Recorder::new();
    let config = ScheduledTaskConfig::fixed_rate("sample", ms(10)).with_max_run_time(ms(15));
    let policy = ScheduledExecutionPolicy::bounded(n(4), MissedTickPolicy::Skip);
    let _ = scheduler
        .schedule(config, policy, recorder.task(ms(50)))
        .expect("registered");
    until(&recorder, 41).await;
    assert_eq!(recorder.starts(), [0, 10, 20, 30, 40]);
    let snapshot = scheduler
        .snapshot()
        .into_iter()
        .find(|snapshot| snapshot.name == "sample")
        .expect("registered");
    // Runs started at 0, 10, 20 were dropped at 15, 25, 35.
    assert_eq!(
        (snapshot.runs, snapshot.failures, snapshot.active_runs),
        (0, 3, 2)
    );
}

#[tokio::test(start_paused = true)]
async fn an_operation_bound_schedule_stops_at_the_operation_deadline_and_cancellation() {
    let (_harness, scheduler) = scheduler("maintenance");
    let recorder = Recorder::new();
    let deadline = recorder.base + ms(35);
    let operation = OperationContext::new(deadline.into_std(), TaskKind::Worker);
    let policy = ScheduledExecutionPolicy::bounded(n(1), MissedTickPolicy::Skip);
    let _ = scheduler
        .schedule_operation(
            &operation,
            ScheduledTaskConfig::fixed_rate("sample", ms(10)),
            policy,
            recorder.task(Duration::ZERO),
        )
        .expect("registered");
    until(&recorder, 100).await;
    assert_eq!(recorder.starts(), [0, 10, 20, 30]);
    assert!(!only(&scheduler).running, "stopped at the deadline");
    assert_eq!(
        operation.outcome_count(OperationOutcome::DeadlineExceeded),
        1
    );
    assert_eq!(operation.outcome_count(OperationOutcome::Completed), 4);
    assert_eq!(operation.active_task_count(), 0);

    let recorder = Recorder::new();
    let operation = OperationContext::without_deadline(TaskKind::Worker);
    let _ = scheduler
        .schedule_operation(
            &operation,
            ScheduledTaskConfig::fixed_delay("flush", ms(10)),
            ScheduledExecutionPolicy::default(),
            recorder.task(ms(3)),
        )
        .expect("registered");
    until(&recorder, 15).await;
    operation.cancel();
    assert!(operation
        .wait(scheduler.group(), Duration::from_secs(1))
        .await
        .expect("owner"));
    assert_eq!(recorder.starts(), [0, 13]);
    assert_eq!(
        operation.outcome_count(OperationOutcome::Cancelled),
        1,
        "the driver"
    );
}

#[tokio::test(start_paused = true)]
async fn a_group_bound_schedule_stops_at_group_cancellation_and_its_tasks_are_reported() {
    let (_harness, scheduler) = scheduler("maintenance");
    let recorder = Recorder::new();
    let policy = ScheduledExecutionPolicy::bounded(n(1), MissedTickPolicy::Skip);
    let _ = scheduler
        .schedule(
            ScheduledTaskConfig::fixed_rate("sample", ms(10)),
            policy,
            recorder.task(Duration::ZERO),
        )
        .expect("registered");
    until(&recorder, 25).await;
    scheduler.group().cancel();
    until(&recorder, 100).await;
    assert_eq!(recorder.starts(), [0, 10, 20]);
    assert!(!only(&scheduler).running);
    let report = scheduler.shutdown(Duration::from_secs(1)).await;
    assert!(report.is_healthy(), "{}", report.to_json());
    assert_eq!(report.completed, 3, "three runs");
    assert_eq!(report.cancelled, 1, "the driver stopped at cancellation");
}

#[tokio::test(start_paused = true)]
async fn registration_rules() {
    let (_harness, scheduler) = scheduler("maintenance");
    let recorder = Recorder::new();
    let first = scheduler
        .schedule(
            ScheduledTaskConfig::fixed_delay("flush", ms(10)),
            ScheduledExecutionPolicy::default(),
            recorder.task(ms(1)),
        )
        .expect("registered");
    assert!(matches!(
        first,
        ScheduledTaskRegistrationOutcome::Scheduled(_)
    ));
    // A duplicate, even with another config, leaves the first untouched.
    let duplicate = scheduler
        .schedule(
            ScheduledTaskConfig::fixed_rate("flush", ms(1)),
            ScheduledExecutionPolicy::bounded(n(3), MissedTickPolicy::Skip),
            recorder.task(ms(1)),
        )
        .expect("not an error");
    assert_eq!(duplicate, ScheduledTaskRegistrationOutcome::AlreadyPresent);
    until(&recorder, 5).await;
    let snapshot = only(&scheduler);
    assert_eq!(
        (snapshot.mode, snapshot.runs),
        (ScheduleMode::FixedDelay, 1)
    );
    assert_eq!(scheduler.group().task_count(), 1, "one driver");
    // Mismatched policies and zero periods are unsupported.
    for (config, policy) in [
        (
            ScheduledTaskConfig::fixed_rate("rate", ms(10)),
            ScheduledExecutionPolicy::default(),
        ),
        (
            ScheduledTaskConfig::fixed_delay("delay", ms(10)),
            ScheduledExecutionPolicy::bounded(n(2), MissedTickPolicy::Skip),
        ),
        (
            ScheduledTaskConfig::fixed_delay("zero", Duration::ZERO),
            ScheduledExecutionPolicy::default(),
        ),
    ] {
        let error = scheduler
            .schedule(config, policy, recorder.task(ms(1)))
            .expect_err("unsupported");
        assert_eq!(error.kind(), RuntimeErrorKind::Unsupported);
        assert_eq!(error.operation(), RuntimeOperation::RegisterScheduledTask);
    }
    let error = scheduler
        .schedule_controlled(
            ScheduledTaskConfig::fixed_rate_no_overlap("ctl", ms(10)),
            || async { ScheduledTaskControl::Continue },
        )
        .expect_err("controlled is fixed delay only");
    assert_eq!(error.kind(), RuntimeErrorKind::Unsupported);
    assert_eq!(scheduler.snapshot().len(), 1, "refusals register nothing");
}

#[tokio::test(start_paused = true)]
async fn clear_completed_only_when_the_group_is_idle() {
    let (_harness, scheduler) = scheduler("maintenance");
    let recorder = Recorder::new();
    let _ = scheduler
        .schedule(
            ScheduledTaskConfig::fixed_delay("flush", ms(10)),
            ScheduledExecutionPolicy::default(),
            recorder.task(ms(1)),
        )
        .expect("registered");
    let error = scheduler.clear_completed().expect_err("driver active");
    assert_eq!(error.kind(), RuntimeErrorKind::ContextUnavailable);
    assert_eq!(error.operation(), RuntimeOperation::ClearCompletedSchedules);
    scheduler.group().cancel();
    until(&recorder, 20).await;
    assert_eq!(scheduler.group().task_count(), 0);
    scheduler.clear_completed().expect("idle");
    assert!(scheduler.snapshot().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_failed_driver_spawn_leaves_no_registration() {
    let (_harness, scheduler) = scheduler("maintenance");
    let _ = scheduler.shutdown(Duration::from_secs(1)).await;
    let error = scheduler
        .schedule(
            ScheduledTaskConfig::fixed_delay("flush", ms(10)),
            ScheduledExecutionPolicy::default(),
            || async {},
        )
        .expect_err("closed group");
    assert_eq!(error.kind(), RuntimeErrorKind::Closed);
    assert!(scheduler.snapshot().is_empty());
}

/// A panicking fixed-rate run counts as a failure and poisons the group
/// (fail-stop); later runs cannot start and count as failures too.
#[tokio::test(start_paused = true)]
async fn a_panicking_run_is_a_failure_and_poisons_the_group() {
    let (_harness, scheduler) = scheduler("maintenance");
    let recorder = Recorder::new();
    let policy = ScheduledExecutionPolicy::bounded(n(1), MissedTickPolicy::Skip);
    let _ = scheduler
        .schedule(
            ScheduledTaskConfig::fixed_rate("boom", ms(10)),
            policy,
            || async { panic!("run failed") },
        )
        .expect("registered");
    until(&recorder, 25).await;
    let snapshot = only(&scheduler);
    assert_eq!(
        (snapshot.runs, snapshot.failures),
        (0, 3),
        "runs at 0, 10, 20"
    );
    assert_eq!(
        scheduler.group().lifecycle_state(),
        TaskGroupLifecycleState::Poisoned
    );
}

#[tokio::test(start_paused = true)]
async fn observer_sees_selected_schedules_without_owning_them() {
    let (_harness, scheduler) = scheduler("maintenance");
    for name in ["a", "b", "c"] {
        let _ = scheduler
            .schedule(
                ScheduledTaskConfig::fixed_delay(name, ms(10)),
                ScheduledExecutionPolicy::default(),
                || async {},
            )
            .expect("registered");
    }
    let observer = scheduler.observer(&["c", "a", "c", "missing"]);
    let names: Vec<_> = observer.snapshot().into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["a", "c"]);
    drop(scheduler);
    assert!(
        observer.snapshot().is_empty(),
        "weak: the scheduler is gone"
    );
}

/// `Duration::MAX` as a period or an initial delay means "not again" /
/// "not yet": the driver saturates at a far-future tick instead of
/// overflowing the clock (which would panic it and poison the group).
#[tokio::test(start_paused = true)]
async fn duration_max_periods_and_delays_never_overflow_the_clock() {
    let (_harness, scheduler) = scheduler("maintenance");
    let recorder = Recorder::new();
    let once = ScheduledTaskConfig::fixed_delay("once", Duration::MAX);
    let _ = scheduler
        .schedule(
            once,
            ScheduledExecutionPolicy::default(),
            recorder.task(ms(3)),
        )
        .expect("registered");
    let never = ScheduledTaskConfig::fixed_rate_no_overlap("never", ms(10))
        .with_initial_delay(Duration::MAX);
    let _ = scheduler
        .schedule(
            never,
            ScheduledExecutionPolicy::default(),
            recorder.task(ms(3)),
        )
        .expect("registered");
    until(&recorder, 1_000).await;
    assert_eq!(recorder.starts(), [0], "one run of `once`, none of `never`");
    assert_eq!(
        scheduler.group().lifecycle_state(),
        TaskGroupLifecycleState::Open,
        "no driver panicked"
    );
    let report = scheduler.shutdown(Duration::from_secs(1)).await;
    assert!(report.is_healthy(), "{}", report.to_json());
    assert_eq!(report.panicked, 0);
}

/// A run settling exactly when the next tick comes due: the pending run
/// takes the freed slot and the new tick becomes the pending one; nothing
/// is skipped. Period 10, `CoalesceLatest`, a first run of 20 and later
/// runs of 1:
///
/// ```text
/// ms    0         10        20 21      30
///       AAAAAAAAAAAAAAAAAAAA B  C      D
///                 ^ pending  ^ B from the pending tick, the 20 tick pends
/// ```
#[tokio::test(start_paused = true)]
async fn a_tick_coming_due_as_a_run_settles_keeps_the_pending_run() {
    let (_harness, scheduler) = scheduler("maintenance");
    let recorder = Recorder::new();
    let calls = Arc::new(AtomicUsize::new(0));
    let config = ScheduledTaskConfig::fixed_rate_no_overlap("heartbeat", ms(10));
    let run = recorder.clone();
    let _ = scheduler
        .schedule(
            config,
            ScheduledExecutionPolicy::serial(MissedTickPolicy::CoalesceLatest),
            move || {
                let first = calls.fetch_add(1, Ordering::SeqCst) == 0;
                Box::pin(run.run(if first { ms(20) } else { ms(1) }))
                    as std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>
            },
        )
        .expect("registered");
    until(&recorder, 35).await;
    assert_eq!(recorder.starts(), [0, 20, 21, 30]);
    let snapshot = only(&scheduler);
    assert_eq!(snapshot.skips, 0, "no tick was lost");
    assert_eq!(recorder.max_active.load(Ordering::SeqCst), 1);
}

/// A schedule shows `running` from its registration (before its driver's
/// first poll) until its driver is gone.
#[tokio::test(start_paused = true)]
async fn running_is_set_from_registration_until_the_driver_ends() {
    let config = ScheduledTaskConfig::fixed_delay("flush", ms(10)).with_initial_delay(ms(5));
    let (_harness, scheduler, recorder) = recorded(config, ms(1));
    assert!(only(&scheduler).running, "running before the first poll");
    let report = scheduler.shutdown(Duration::from_secs(1)).await;
    assert!(report.is_healthy());
    assert!(!only(&scheduler).running, "the driver is gone");
    assert!(recorder.starts().is_empty());
}
