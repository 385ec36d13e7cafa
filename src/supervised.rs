//! Supervised services: a service that is restarted after a failure, with
//! backoff and within bounds, and whose every failure and restart stays in
//! the evidence ([`TaskGroup::spawn_supervised_service`]).
//!
//! Why a policy given to a spawn, and not a new manager type: a supervised
//! service is a service task of its group like any other (one task,
//! aborted by the group's deadline, counted in its report); only what
//! happens between its runs is new. [`ServiceManager`](crate::ServiceManager)
//! runs a wakeup loop of one long-lived value and has no run to restart.
//!
//! Invariants:
//!
//! 1. A run starts only while the service is open. The group's
//!    cancellation, shutdown or `shutdown_now` closes it (under the
//!    service's lock, so a run either started before the close or never
//!    starts); a backoff wait ends at the group's cancellation.
//! 2. A run's future is dropped (its permits, leases and budget
//!    reservations released) before the failure is decided and before any
//!    backoff: the next run starts with what the failed one held given
//!    back.
//! 3. The `k`-th restart within the window waits a delay in
//!    `[base·(1 − jitter), base]`, `base = min(max_backoff,
//!    min_backoff·2^(k−1))` ([`ServiceRestartPolicy::backoff_bounds`]); the
//!    jitter is drawn per restart.
//! 4. A failure the policy does not restart gives up, and so does the
//!    failure that would make more than `max_restarts` restarts within the
//!    window. A service that gave up runs no more; when it is critical,
//!    its failure is recorded in its [`CriticalFailureState`] (kind
//!    `panicked` for a panic, `unrecoverable` otherwise, with the message),
//!    so today's critical-failure rules apply (readiness revoked, reason
//!    recorded).
//! 5. Every run's end is recorded (runs, restarts, failures, the last
//!    failure's kind and bounded message, gave up) before anything is
//!    decided on it, in a record the ownership tree keeps to its end
//!    (`shutdown_report/services.rs`): reports, the diagnostics V2 view,
//!    `/metrics` and `summary()` read it, also after the group was dropped.
//! 6. Progress: a policy with a progress deadline lets a run call
//!    [`ServiceRun::record_progress`] (one clock read and one relaxed
//!    store). A run that records nothing for longer than the deadline is
//!    stalled (named in the evidence) until it records progress again; with
//!    `restart_on_stall` it is dropped and restarted as a failure of kind
//!    `stall`. A critical service's stall makes
//!    [`ServiceLifecycle::is_live`](crate::ServiceLifecycle::is_live) answer
//!    false: a service that stopped progressing does not recover by being
//!    sent less traffic (readiness), it needs its process restarted, which
//!    is what a failed liveness probe does. Services without a progress
//!    deadline pay nothing for it.
//! 7. A run that returns `Ok(())` ends the service (not restarted); for a
//!    critical service a return before the group's cancellation is a
//!    critical failure (`exited-unexpectedly`), as for
//!    `spawn_critical_service`.
//! 8. Known limit: every spawn adds one record that the tree keeps to its
//!    end (the evidence must outlive the group), so supervise long-lived
//!    services, a bounded set; per-request work belongs in operations.

use std::collections::hash_map::RandomState;
use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::critical::{CriticalFailureKind, CriticalFailureState, StallWatch};
use crate::error::{
    RuntimeContractPolicy, RuntimeContractViolation, RuntimeError, RuntimeErrorContext,
    RuntimeOperation, RuntimeResult,
};
use crate::loom::Mutex;
use crate::shutdown_report::{
    bounded_message, panic_message, ServiceFailureKind, SupervisedServiceReport,
};
use crate::task_group::{ServiceEvidence, TaskGroup};
use crate::task_identity::{TaskGroupId, TaskId, TaskKind, TaskName};

/// When and how a supervised service is restarted
/// ([`TaskGroup::spawn_supervised_service`]).
///
/// The default restarts after a panic or an error, waits 100 ms before the
/// first restart and doubles up to 30 s, with half of each delay jittered
/// away at random, and gives up on the failure that would make a sixth
/// restart within a minute. It has no progress deadline and is not
/// critical.
#[derive(Debug, Clone)]
pub struct ServiceRestartPolicy {
    on_panic: bool,
    on_error: bool,
    min_backoff: Duration,
    max_backoff: Duration,
    jitter: f64,
    max_restarts: u32,
    window: Duration,
    progress_deadline: Option<Duration>,
    restart_on_stall: bool,
    critical: Option<CriticalFailureState>,
}

impl Default for ServiceRestartPolicy {
    fn default() -> Self {
        Self {
            on_panic: true,
            on_error: true,
            min_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(30),
            jitter: 0.5,
            max_restarts: 5,
            window: Duration::from_secs(60),
            progress_deadline: None,
            restart_on_stall: false,
            critical: None,
        }
    }
}

impl ServiceRestartPolicy {
    /// The default policy (see the type's docs).
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether a run that panicked is restarted (default: yes).
    #[must_use]
    pub fn restart_on_panic(mut self, restart: bool) -> Self {
        self.on_panic = restart;
        self
    }

    /// Whether a run that returned an error is restarted (default: yes).
    #[must_use]
    pub fn restart_on_error(mut self, restart: bool) -> Self {
        self.on_error = restart;
        self
    }

    /// The delay before the first restart of a window, doubled for each
    /// further one up to `max` (module invariant 3). `min` must be at most
    /// `max`, and above zero unless both are zero (restart at once, for a
    /// run whose failure is cheap to retry: the supervisor still yields to
    /// its worker between runs).
    #[must_use]
    pub fn with_backoff(mut self, min: Duration, max: Duration) -> Self {
        self.min_backoff = min;
        self.max_backoff = max;
        self
    }

    /// The fraction of each delay taken away at random, in `0.0..=1.0`
    /// (0: exact delays; 1: anything from zero to the delay).
    #[must_use]
    pub fn with_jitter(mut self, fraction: f64) -> Self {
        self.jitter = fraction;
        self
    }

    /// At most `restarts` restarts within any `window` (above zero): the
    /// failure that would make one more gives up. `0` gives up at the
    /// first failure.
    #[must_use]
    pub fn with_max_restarts(mut self, restarts: u32, window: Duration) -> Self {
        self.max_restarts = restarts;
        self.window = window;
        self
    }

    /// A run that records no progress ([`ServiceRun::record_progress`]) for
    /// longer than `deadline` (above zero) is stalled (module invariant 6).
    #[must_use]
    pub fn with_progress_deadline(mut self, deadline: Duration) -> Self {
        self.progress_deadline = Some(deadline);
        self
    }

    /// Whether a stalled run is dropped and restarted as a failure of kind
    /// `stall` (default: no, it is only named as stalled). Needs a progress
    /// deadline.
    #[must_use]
    pub fn restart_on_stall(mut self, restart: bool) -> Self {
        self.restart_on_stall = restart;
        self
    }

    /// Makes the service critical: giving up, an early return and a stall
    /// are reported through `state` (module invariants 4, 6 and 7).
    #[must_use]
    pub fn critical(mut self, state: CriticalFailureState) -> Self {
        self.critical = Some(state);
        self
    }

    /// The bounds of the delay before the `restart`-th restart within the
    /// window (1 for the first): `(base·(1 − jitter), base)` with `base =
    /// min(max_backoff, min_backoff·2^(restart−1))`.
    pub fn backoff_bounds(&self, restart: u32) -> (Duration, Duration) {
        let doublings = restart.saturating_sub(1).min(63);
        let base = self
            .min_backoff
            .checked_mul(1_u32.checked_shl(doublings).unwrap_or(u32::MAX))
            .unwrap_or(self.max_backoff)
            .min(self.max_backoff);
        let jitter = self.jitter.clamp(0.0, 1.0);
        (base.mul_f64(1.0 - jitter), base)
    }

    /// A delay within [`backoff_bounds`](Self::backoff_bounds), `random`
    /// choosing where.
    fn backoff(&self, restart: u32, random: u64) -> Duration {
        let (low, high) = self.backoff_bounds(restart);
        // At most u64::MAX nanoseconds (584 years), so the product fits.
        let span = (high - low).as_nanos().min(u128::from(u64::MAX));
        let offset = (span * u128::from(random)) >> 64;
        low + Duration::from_nanos(u64::try_from(offset).unwrap_or(u64::MAX))
    }

    /// Whether a failure of `kind` is restarted.
    fn restarts(&self, kind: ServiceFailureKind) -> bool {
        match kind {
            ServiceFailureKind::Panic => self.on_panic,
            ServiceFailureKind::Error => self.on_error,
            ServiceFailureKind::Stall => self.restart_on_stall,
        }
    }

    fn validate(&self) -> Result<(), RuntimeContractPolicy> {
        let rule = if self.min_backoff > self.max_backoff
            || (self.min_backoff.is_zero() && !self.max_backoff.is_zero())
        {
            Some(RuntimeContractPolicy::RestartBackoffOrdered)
        } else if !(0.0..=1.0).contains(&self.jitter) {
            Some(RuntimeContractPolicy::RestartJitterFraction)
        } else if self.window.is_zero() {
            Some(RuntimeContractPolicy::RestartWindowPositive)
        } else if self
            .progress_deadline
            .is_some_and(|deadline| deadline.is_zero())
            || (self.restart_on_stall && self.progress_deadline.is_none())
        {
            Some(RuntimeContractPolicy::ProgressDeadlinePositive)
        } else {
            None
        };
        rule.map_or(Ok(()), Err)
    }
}

/// What a run of a supervised service is given: its attempt number, the
/// group's cancellation and its progress mark.
#[derive(Debug, Clone)]
pub struct ServiceRun {
    attempt: u64,
    token: CancellationToken,
    progress: Arc<Progress>,
}

impl ServiceRun {
    /// 0 for the first run, then 1, 2, ... for each restart.
    pub fn attempt(&self) -> u64 {
        self.attempt
    }

    /// A child of the group's cancellation token: the run observes it and
    /// returns `Ok(())` (a run the group's deadline finds still running is
    /// aborted). Cancelling it ends this service, not the group.
    pub fn cancellation_token(&self) -> &CancellationToken {
        &self.token
    }

    /// Marks progress for the policy's progress deadline: one clock read and
    /// one relaxed store (module invariant 6); without a deadline, nothing.
    pub fn record_progress(&self) {
        self.progress.mark();
    }
}

/// A service's last progress, in milliseconds since its spawn. Plain
/// atomics: liveness and the evidence read it without the service's lock,
/// and no decision of the supervisor's state machine depends on it.
#[derive(Debug)]
struct Progress {
    name: TaskName,
    epoch: Instant,
    last_ms: AtomicU64,
    running: AtomicBool,
    deadline: Option<Duration>,
}

impl Progress {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Without a deadline nothing reads the mark: no clock read.
    fn mark(&self) {
        if self.deadline.is_some() {
            self.last_ms.store(self.now_ms(), Ordering::Relaxed);
        }
    }

    /// When the running run becomes stalled unless it records progress.
    fn stalls_at(&self, deadline: Duration) -> Instant {
        self.epoch
            + Duration::from_millis(self.last_ms.load(Ordering::Relaxed))
            + deadline
            + Duration::from_millis(1)
    }

    fn stalled_now(&self) -> bool {
        self.running.load(Ordering::Relaxed)
            && self.deadline.is_some_and(|deadline| {
                let silent = self
                    .now_ms()
                    .saturating_sub(self.last_ms.load(Ordering::Relaxed));
                u128::from(silent) > deadline.as_millis()
            })
    }
}

impl StallWatch for Progress {
    fn stalled(&self) -> Option<TaskName> {
        self.stalled_now().then(|| self.name.clone())
    }
}

/// What decides the next step after a failed run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Restart after the delay.
    Restart(Duration),
    /// The policy ends the service.
    GiveUp,
    /// The service was closed: no restart.
    Stop,
}

#[derive(Debug)]
struct State {
    closed: bool,
    report: SupervisedServiceReport,
    /// When each restart within the window was decided.
    restarts_in_window: VecDeque<Instant>,
}

/// One supervised service's record: the state machine of invariants 1, 4
/// and 5 (model-checked: `tests/supervised_loom.rs`) and its evidence.
#[derive(Debug)]
pub(crate) struct Supervision {
    within: Box<[TaskGroupId]>,
    state: Mutex<State>,
    progress: Arc<Progress>,
}

impl Supervision {
    pub(crate) fn new(
        name: TaskName,
        group: String,
        within: Box<[TaskGroupId]>,
        deadline: Option<Duration>,
    ) -> Self {
        Self {
            within,
            state: Mutex::new(State {
                closed: false,
                report: SupervisedServiceReport::new(name.clone(), group),
                restarts_in_window: VecDeque::new(),
            }),
            progress: Arc::new(Progress {
                name,
                epoch: Instant::now(),
                last_ms: AtomicU64::new(0),
                running: AtomicBool::new(false),
                deadline,
            }),
        }
    }

    /// Starts a run unless the service is closed: its attempt number.
    pub(crate) fn begin_run(&self) -> Option<u64> {
        let mut state = self.state.lock();
        if state.closed || state.report.gave_up {
            return None;
        }
        let attempt = state.report.runs;
        state.report.runs += 1;
        if attempt > 0 {
            state.report.restarts += 1;
        }
        self.progress.mark();
        self.progress.running.store(true, Ordering::Relaxed);
        Some(attempt)
    }

    /// A run returned `Ok(())`: the service ended.
    pub(crate) fn run_ended(&self) {
        self.progress.running.store(false, Ordering::Relaxed);
    }

    /// A run failed: records it, then decides (module invariants 4, 5).
    pub(crate) fn run_failed(
        &self,
        kind: ServiceFailureKind,
        message: String,
        policy: &ServiceRestartPolicy,
        random: u64,
    ) -> Next {
        let now = Instant::now();
        let mut state = self.state.lock();
        self.progress.running.store(false, Ordering::Relaxed);
        state.report.failures += 1;
        state.report.last_failure = Some(kind);
        state.report.last_message = Some(message);
        if state.closed {
            return Next::Stop;
        }
        let window = policy.window;
        while state
            .restarts_in_window
            .front()
            .is_some_and(|decided| now.saturating_duration_since(*decided) >= window)
        {
            state.restarts_in_window.pop_front();
        }
        let restarts = u32::try_from(state.restarts_in_window.len()).unwrap_or(u32::MAX);
        if !policy.restarts(kind) || restarts >= policy.max_restarts {
            state.report.gave_up = true;
            return Next::GiveUp;
        }
        state.restarts_in_window.push_back(now);
        Next::Restart(policy.backoff(restarts + 1, random))
    }

    /// The last failure's message.
    fn last_message(&self) -> String {
        self.state
            .lock()
            .report
            .last_message
            .clone()
            .unwrap_or_default()
    }

    /// No run starts after this (module invariant 1).
    pub(crate) fn close_runs(&self) {
        self.state.lock().closed = true;
    }

    pub(crate) fn report(&self) -> SupervisedServiceReport {
        let mut report = self.state.lock().report.clone();
        report.running = self.progress.running.load(Ordering::Relaxed);
        report.stalled = self.progress.stalled_now();
        report
    }
}

impl ServiceEvidence for Supervision {
    fn evidence(&self) -> SupervisedServiceReport {
        self.report()
    }

    fn runs_within(&self, group: TaskGroupId) -> bool {
        self.within.contains(&group)
    }

    fn close(&self) {
        self.close_runs();
    }
}

/// How a run ended.
enum Ended {
    Returned,
    Failed(ServiceFailureKind, String),
}

/// Runs one run to its end: its future is dropped before this returns
/// (module invariant 2).
async fn run_once<Fut, E>(future: Fut, progress: &Progress, stall: Option<Duration>) -> Ended
where
    Fut: Future<Output = Result<(), E>>,
    E: fmt::Display,
{
    let future = AssertUnwindSafe(future).catch_unwind();
    tokio::pin!(future);
    let outcome = match stall {
        None => future.await,
        Some(deadline) => loop {
            tokio::select! {
                biased;
                outcome = &mut future => break outcome,
                () = tokio::time::sleep_until(progress.stalls_at(deadline)) => {
                    if progress.stalled_now() {
                        return Ended::Failed(
                            ServiceFailureKind::Stall,
                            format!("no progress recorded for {} ms", deadline.as_millis()),
                        );
                    }
                }
            }
        },
    };
    match outcome {
        Ok(Ok(())) => Ended::Returned,
        Ok(Err(error)) => Ended::Failed(
            ServiceFailureKind::Error,
            bounded_message(&error.to_string()),
        ),
        Err(payload) => Ended::Failed(ServiceFailureKind::Panic, panic_message(payload.as_ref())),
    }
}

/// Random draws for the jitter: a process-random seed (the standard
/// library's hash keys) stepped by xorshift; no dependency for it.
struct Jitter(u64);

impl Jitter {
    fn new() -> Self {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u64(0x5EED);
        Self(hasher.finish() | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// The supervisor: runs, records, decides, waits, restarts.
async fn supervise<F, Fut, E>(
    supervision: Arc<Supervision>,
    policy: ServiceRestartPolicy,
    token: CancellationToken,
    mut factory: F,
) where
    F: FnMut(ServiceRun) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: fmt::Display,
{
    let mut jitter = Jitter::new();
    let stall = policy.progress_deadline.filter(|_| policy.restart_on_stall);
    loop {
        if token.is_cancelled() {
            supervision.close_runs();
            return;
        }
        let Some(attempt) = supervision.begin_run() else {
            return;
        };
        let run = ServiceRun {
            attempt,
            token: token.clone(),
            progress: Arc::clone(&supervision.progress),
        };
        let (kind, message) = match run_once(factory(run), &supervision.progress, stall).await {
            Ended::Returned => {
                supervision.run_ended();
                if let Some(state) = &policy.critical {
                    if !token.is_cancelled() {
                        state.record_with_message(
                            CriticalFailureKind::ExitedUnexpectedly,
                            TaskKind::Service,
                            Some(String::from("returned before its group was cancelled")),
                        );
                    }
                }
                return;
            }
            Ended::Failed(kind, message) => (kind, message),
        };
        // Logs read the name and the message back only when enabled: a
        // restart with logging off copies neither.
        let next = supervision.run_failed(kind, message, &policy, jitter.next());
        let name = &supervision.progress.name;
        match next {
            Next::Stop => return,
            Next::GiveUp => {
                let message = supervision.last_message();
                tracing::error!(
                    service = %name,
                    failure = kind.as_str(),
                    message = %message,
                    "supervised service gave up"
                );
                if let Some(state) = &policy.critical {
                    let critical = match kind {
                        ServiceFailureKind::Panic => CriticalFailureKind::Panicked,
                        ServiceFailureKind::Error | ServiceFailureKind::Stall => {
                            CriticalFailureKind::Unrecoverable
                        }
                    };
                    state.record_with_message(critical, TaskKind::Service, Some(message));
                }
                return;
            }
            Next::Restart(delay) => {
                tracing::warn!(
                    service = %name,
                    failure = kind.as_str(),
                    message = %supervision.last_message(),
                    delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                    "supervised service failed; restarting"
                );
                if delay.is_zero() {
                    // No timer for no delay; the cancellation is checked
                    // before the next run begins.
                    tokio::task::yield_now().await;
                    continue;
                }
                tokio::select! {
                    biased;
                    () = token.cancelled() => {
                        supervision.close_runs();
                        return;
                    }
                    () = tokio::time::sleep(delay) => {}
                }
            }
        }
    }
}

impl TaskGroup {
    /// Spawns a supervised [`TaskKind::Service`]: `factory` makes each run,
    /// and a run that fails (panics, returns an error, or stalls, as
    /// `policy` says) is restarted with backoff until the policy gives up
    /// (module docs, invariants 1-7). Its evidence (runs, restarts, the
    /// last failure and its message, whether it gave up or is stalled) is
    /// in the shutdown report's `services`, the diagnostics V2 view,
    /// `/metrics` and `summary()`, also after the group is dropped.
    ///
    /// Each run observes [`ServiceRun::cancellation_token`] and returns
    /// `Ok(())` when it is cancelled; no run starts after the group's
    /// cancellation or shutdown.
    ///
    /// # Errors
    ///
    /// `Configuration` naming the rule for an invalid policy
    /// ([`RestartBackoffOrdered`](RuntimeContractPolicy::RestartBackoffOrdered),
    /// [`RestartJitterFraction`](RuntimeContractPolicy::RestartJitterFraction),
    /// [`RestartWindowPositive`](RuntimeContractPolicy::RestartWindowPositive),
    /// [`ProgressDeadlinePositive`](RuntimeContractPolicy::ProgressDeadlinePositive));
    /// otherwise as [`spawn`](Self::spawn).
    #[track_caller]
    pub fn spawn_supervised_service<F, Fut, E>(
        &self,
        name: impl Into<TaskName>,
        policy: ServiceRestartPolicy,
        factory: F,
    ) -> RuntimeResult<TaskId>
    where
        F: FnMut(ServiceRun) -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: fmt::Display + Send + 'static,
    {
        policy.validate().map_err(|rule| {
            RuntimeError::configuration_failure(
                RuntimeOperation::SpawnTaskGroupTask,
                RuntimeContractViolation::configuration(rule),
            )
            .with_context(RuntimeErrorContext::Setting(rule))
        })?;
        let name = name.into();
        let supervision = Arc::new(Supervision::new(
            name.clone(),
            self.name().to_owned(),
            self.ancestry().into_boxed_slice(),
            policy.progress_deadline,
        ));
        if let Some(state) = &policy.critical {
            if policy.progress_deadline.is_some() {
                let watch: Arc<dyn StallWatch> = supervision.progress.clone();
                state.watch_stalls(Arc::downgrade(&watch));
            }
        }
        let id = self.spawn_service(
            name,
            supervise(
                Arc::clone(&supervision),
                policy,
                self.cancellation_token().child_token(),
                factory,
            ),
        )?;
        self.tree().register_service(supervision);
        Ok(id)
    }
}

/// The loom model of a restart racing the group's shutdown, on the real
/// state machine ([`Supervision`]): `RUSTFLAGS="--cfg loom"
/// LOOM_MAX_PREEMPTIONS=2 cargo test --release --lib loom_a_restart`.
#[cfg(all(test, loom))]
mod loom_restart {
    use super::*;

    fn supervision() -> Arc<Supervision> {
        Arc::new(Supervision::new(
            TaskName::from("service"),
            String::from("group"),
            Box::new([]),
            None,
        ))
    }

    /// A run fails and its supervisor decides and begins a restart while
    /// the group's shutdown closes the service: a restart either began
    /// before the close (and the evidence read after the close shows it)
    /// or never begins; the failure is in the evidence whatever the order.
    #[test]
    fn loom_a_restart_racing_shutdown_never_runs_after_the_close_nor_loses_the_failure() {
        loom::model(|| {
            let service = supervision();
            assert_eq!(service.begin_run(), Some(0));
            let supervisor = {
                let service = Arc::clone(&service);
                loom::thread::spawn(move || {
                    let policy = ServiceRestartPolicy::new().with_jitter(0.0);
                    match service.run_failed(
                        ServiceFailureKind::Panic,
                        String::from("boom"),
                        &policy,
                        0,
                    ) {
                        Next::Restart(_) => service.begin_run().is_some(),
                        Next::GiveUp | Next::Stop => false,
                    }
                })
            };
            service.close_runs();
            let at_close = service.report();
            let restarted = supervisor.join().expect("supervisor");
            let end = service.report();
            assert_eq!(end.runs, at_close.runs, "a run began after the close");
            assert_eq!(end.runs, if restarted { 2 } else { 1 });
            assert_eq!(end.restarts, u64::from(restarted));
            assert_eq!(end.failures, 1, "the failure is kept");
            assert_eq!(end.last_failure, Some(ServiceFailureKind::Panic));
            assert_eq!(end.last_message.as_deref(), Some("boom"));
            assert_eq!(service.begin_run(), None, "closed for good");
        });
    }

    /// Two failures decided concurrently with the close never count more
    /// restarts than runs began, and a give-up stays given up.
    #[test]
    fn loom_a_give_up_racing_shutdown_keeps_its_evidence() {
        loom::model(|| {
            let service = supervision();
            assert_eq!(service.begin_run(), Some(0));
            let supervisor = {
                let service = Arc::clone(&service);
                loom::thread::spawn(move || {
                    let policy =
                        ServiceRestartPolicy::new().with_max_restarts(0, Duration::from_secs(60));
                    service.run_failed(
                        ServiceFailureKind::Error,
                        String::from("refused"),
                        &policy,
                        0,
                    )
                })
            };
            service.close_runs();
            let next = supervisor.join().expect("supervisor");
            let end = service.report();
            assert!(matches!(next, Next::GiveUp | Next::Stop));
            assert_eq!(end.gave_up, next == Next::GiveUp);
            assert_eq!((end.runs, end.restarts, end.failures), (1, 0, 1));
        });
    }
}
