//! `ServiceLifecycle`: readiness separate from liveness, and one shutdown
//! deadline frozen by the first request.
//!
//! | State | Meaning |
//! | --- | --- |
//! | `Starting` | Not ready yet (startup probes answer "not started"). |
//! | `Ready` | Serving; readiness also needs no maintenance and ready dependencies. |
//! | `Draining` | A shutdown was requested; readiness is revoked. |
//! | `Stopped` | The service stopped. |
//! | `Failed` | The service failed; kept even when a shutdown is requested later. |
//!
//! Invariants:
//!
//! 1. Every decision is made under one lock; observer callbacks run after it
//!    is released and carry the committed transition (`from` → `to`).
//!    A request that changes nothing emits nothing.
//! 2. The first shutdown request is stored once, with its reason, its time
//!    and its deadline (`now + shutdown_timeout`), and returned to every later
//!    request.
//! 3. Only `Starting` and `Ready` move to `Draining`: `Failed` and `Stopped`
//!    never do.
//! 4. Once `start` ran, the first request's reason is recorded as the owner
//!    tree's shutdown reason (whichever of the request and `start` comes
//!    second records it), so it appears in the owner's shutdown report.
//! 5. The drain delay (`wait_drain_delay`) counts from the first request's
//!    time, stored once with it, and ends at `min(request + drain_delay,
//!    frozen deadline)`: it never extends a shutdown.
//! 6. The probe server only calls lifecycle APIs, never its state (see
//!    `probe.rs`).

use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::error::{RuntimeError, RuntimeOperation, RuntimeResult};
use crate::loom::{AtomicBool, Mutex};
use crate::shutdown_deadline::ShutdownDeadline;

mod config;
#[cfg(all(not(loom), feature = "metrics"))]
mod metrics;
mod notify;
#[cfg(not(loom))]
mod start;
mod storage;
#[cfg(not(loom))]
pub(crate) use start::LifecycleSeat;
mod types;

pub use config::{DrainRequestMethods, ServiceLifecycleConfig};
pub use storage::STORAGE_DEPENDENCY;
pub use types::{
    CriticalFailureRecovery, DependencyReadiness, ServiceLifecycleObserver, ServiceLifecycleState,
    ServiceLifecycleTransition, ShutdownReason, ShutdownRequest,
};

/// The process deadline a lifecycle's first shutdown request freezes,
/// unless configured (`ROCKETMQ_SHUTDOWN_TIMEOUT_SECONDS`): the single
/// source of the deadline for a process that runs a lifecycle, passed to
/// every component and to the owner.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(45);
/// The default age after which missing progress makes a service not live.
pub const DEFAULT_LIVENESS_STALE_AFTER: Duration = Duration::from_secs(30);

#[derive(Debug)]
struct LifecycleState {
    state: ServiceLifecycleState,
    maintenance: bool,
    dependencies: DependencyReadiness,
    /// Named dependencies (`storage.rs`), in publication order.
    named_dependencies: Vec<(Box<str>, DependencyReadiness)>,
    shutdown: Option<ShutdownRequest>,
    /// When the first shutdown request was made: the drain delay counts
    /// from here.
    shutdown_requested_at: Option<Instant>,
    /// The first request's label for the owner's report: the reason's
    /// label, or `critical_failure` when a critical failure requested it.
    shutdown_label: Option<&'static str>,
    progress: Instant,
    /// See [`ServiceLifecycle::with_drain_delay`].
    drain_delay: Duration,
}

struct LifecycleInner {
    config: ServiceLifecycleConfig,
    state: Mutex<LifecycleState>,
    observer: OnceLock<Arc<dyn ServiceLifecycleObserver>>,
    shutdown_requested: Notify,
    /// Set by a successful `start`; a failed start resets it.
    #[cfg_attr(loom, allow(dead_code))]
    started: AtomicBool,
    probe_addr: Mutex<Option<SocketAddr>>,
    /// The task tree `start` ran under: the first request's label is
    /// recorded there, so the tree owner's shutdown report carries it.
    owner_tree: OnceLock<Arc<crate::task_group::TreeShared>>,
    /// SIGTERM/SIGINT listeners, created by the first
    /// `wait_for_shutdown_signal` and kept: a signal that arrives between
    /// two calls is held by the listener instead of being swallowed by the
    /// handler Tokio keeps installed.
    #[cfg(not(loom))]
    signals: tokio::sync::Mutex<Option<crate::signal::SignalListener>>,
    /// Service-manager notifications, when `NOTIFY_SOCKET` was set at
    /// construction.
    systemd: Option<notify::SystemdNotifier>,
    /// Set by `with_metrics`: `/metrics` is served, with these inputs.
    #[cfg(all(not(loom), feature = "metrics"))]
    metrics_inputs: Mutex<Option<metrics::MetricsInputs>>,
    /// Set by `with_metrics_collector`: the application's own metrics.
    #[cfg(all(not(loom), feature = "metrics"))]
    metrics_collector: Mutex<Option<metrics::MetricsCollector>>,
    /// What a scrape reads, captured by `start` when metrics are on.
    #[cfg(all(not(loom), feature = "metrics"))]
    metrics: OnceLock<metrics::MetricsSource>,
    /// The secret `/drainz` requires (`with_drain_token`), if any.
    drain_token: Mutex<Option<Arc<[u8]>>>,
    /// The failure states a critical-failure monitor watches: liveness
    /// reads their supervised services' stalls.
    critical_states: Mutex<Vec<crate::critical::CriticalFailureState>>,
}

/// Readiness, liveness and the shutdown request of one service.
///
/// ```
/// use std::time::Duration;
/// use rocketmq_runtime::{ServiceLifecycle, ServiceLifecycleConfig, ServiceLifecycleState, ShutdownReason};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let lifecycle = ServiceLifecycle::new(ServiceLifecycleConfig::new("broker"));
/// assert!(!lifecycle.is_ready() && lifecycle.is_live());
/// lifecycle.mark_ready().unwrap();
/// assert!(lifecycle.is_ready());
///
/// let first = lifecycle.request_shutdown(ShutdownReason::Signal);
/// tokio::time::sleep(Duration::from_secs(10)).await;
/// let second = lifecycle.request_shutdown(ShutdownReason::PreStop);
/// assert_eq!(first, second); // the first reason and deadline stay
/// assert_eq!(lifecycle.state(), ServiceLifecycleState::Draining);
/// assert!(!lifecycle.is_ready());
/// # }
/// ```
#[derive(Clone)]
pub struct ServiceLifecycle {
    inner: Arc<LifecycleInner>,
}

impl fmt::Debug for ServiceLifecycle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServiceLifecycle")
            .field("service", &self.inner.config.service_name)
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}

impl ServiceLifecycle {
    /// A lifecycle in `Starting`.
    pub fn new(config: ServiceLifecycleConfig) -> Self {
        Self {
            inner: Arc::new(LifecycleInner {
                config,
                state: Mutex::new(LifecycleState {
                    state: ServiceLifecycleState::Starting,
                    maintenance: false,
                    dependencies: DependencyReadiness::Ready,
                    named_dependencies: Vec::new(),
                    shutdown: None,
                    shutdown_requested_at: None,
                    shutdown_label: None,
                    progress: Instant::now(),
                    drain_delay: Duration::ZERO,
                }),
                observer: OnceLock::new(),
                shutdown_requested: Notify::new(),
                started: AtomicBool::new(false),
                probe_addr: Mutex::new(None),
                owner_tree: OnceLock::new(),
                #[cfg(not(loom))]
                signals: tokio::sync::Mutex::new(None),
                systemd: notify::SystemdNotifier::from_env(),
                #[cfg(all(not(loom), feature = "metrics"))]
                metrics_inputs: Mutex::new(None),
                #[cfg(all(not(loom), feature = "metrics"))]
                metrics_collector: Mutex::new(None),
                #[cfg(all(not(loom), feature = "metrics"))]
                metrics: OnceLock::new(),
                drain_token: Mutex::new(None),
                critical_states: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Sets how long an entrypoint keeps serving after the first shutdown
    /// request, with readiness already revoked, before it cancels work
    /// (default zero): load balancers stop routing to the service while it
    /// still answers. [`wait_drain_delay`](Self::wait_drain_delay) waits
    /// for it, and never past the request's frozen deadline, so a delay as
    /// long as the shutdown timeout leaves the shutdown no time (`from_env`
    /// refuses one). Applies to every clone of this lifecycle.
    #[must_use]
    pub fn with_drain_delay(self, delay: Duration) -> Self {
        self.inner.state.lock().drain_delay = delay;
        self
    }

    /// Requires `token` on `/drainz` as `Authorization: Bearer <token>`
    /// (compared in constant time): a request without it, or with another,
    /// is answered `401` and drains nothing. `/readyz`, `/livez`,
    /// `/startupz` and `/metrics` stay open, as Kubernetes probes expect.
    /// An empty token removes the requirement.
    ///
    /// Browser-originated requests (an `Origin` header, or a cross-site
    /// `Sec-Fetch-Site`) are refused on `/drainz` with `403` whether or not
    /// a token is set: a web page the operator opens cannot drain the
    /// process.
    ///
    /// # Errors
    ///
    /// `Configuration` ([`DrainTokenValid`](crate::RuntimeContractPolicy::DrainTokenValid))
    /// unless the token is 16 to 256 visible ASCII characters.
    pub fn with_drain_token(self, token: impl AsRef<str>) -> RuntimeResult<Self> {
        let token = token.as_ref();
        if token.is_empty() {
            *self.inner.drain_token.lock() = None;
            return Ok(self);
        }
        if !drain_token_valid(token) {
            return Err(RuntimeError::configuration_failure(
                crate::error::RuntimeOperation::ServiceLifecycleDrainMethods,
                crate::error::RuntimeContractViolation::configuration(
                    crate::error::RuntimeContractPolicy::DrainTokenValid,
                ),
            ));
        }
        *self.inner.drain_token.lock() = Some(Arc::from(token.as_bytes()));
        Ok(self)
    }

    /// Whether `/drainz` requires a token.
    pub fn requires_drain_token(&self) -> bool {
        self.inner.drain_token.lock().is_some()
    }

    /// Whether `presented` is the drain token (true when none is set).
    #[cfg(feature = "probes")]
    pub(crate) fn drain_token_matches(&self, presented: Option<&[u8]>) -> bool {
        let Some(token) = self.inner.drain_token.lock().clone() else {
            return true;
        };
        presented.is_some_and(|presented| constant_time_eq(&token, presented))
    }

    /// The drain delay (see [`with_drain_delay`](Self::with_drain_delay)).
    pub fn drain_delay(&self) -> Duration {
        self.inner.state.lock().drain_delay
    }

    /// The configuration.
    pub fn config(&self) -> &ServiceLifecycleConfig {
        &self.inner.config
    }

    /// Attaches the observer (once, only while `Starting`); it first
    /// receives `None → Starting`.
    ///
    /// # Errors
    ///
    /// `context_unavailable(StartServiceLifecycle)` after `Starting` or for
    /// a second observer.
    pub fn set_observer(&self, observer: Arc<dyn ServiceLifecycleObserver>) -> RuntimeResult<()> {
        let state = self.inner.state.lock();
        if state.state != ServiceLifecycleState::Starting
            || self.inner.observer.set(Arc::clone(&observer)).is_err()
        {
            return Err(RuntimeError::context_unavailable(
                RuntimeOperation::StartServiceLifecycle,
            ));
        }
        drop(state);
        observer.on_transition(ServiceLifecycleTransition {
            from: None,
            to: ServiceLifecycleState::Starting,
        });
        Ok(())
    }

    /// Serves `/metrics` on the probe server (OpenMetrics text): the
    /// sanitized V2 view of the owner's whole task tree (the tree
    /// [`start`](Self::start) runs in) with the schedules and metadata
    /// snapshot `inputs` returns at each scrape, the lifecycle's state,
    /// readiness and liveness, and the process budget. Without it (the
    /// default) `/metrics` answers `404`. Call before `start`. With the
    /// `metrics` feature (on by default).
    ///
    /// ```
    /// use rocketmq_runtime::{RuntimeDiagnosticsInputs, ServiceLifecycle, ServiceLifecycleConfig};
    ///
    /// let lifecycle = ServiceLifecycle::new(ServiceLifecycleConfig::new("broker"))
    ///     .with_metrics(RuntimeDiagnosticsInputs::default);
    /// assert!(lifecycle.metrics_text().is_none()); // nothing before start
    /// ```
    #[cfg(all(not(loom), feature = "metrics"))]
    #[must_use]
    pub fn with_metrics(
        self,
        inputs: impl Fn() -> crate::diagnostics::RuntimeDiagnosticsInputs + Send + Sync + 'static,
    ) -> Self {
        *self.inner.metrics_inputs.lock() = Some(Arc::new(inputs));
        self
    }

    /// Adds the application's own metrics to every `/metrics` scrape:
    /// `register` is called with each scrape's registry (the runtime's
    /// series sit under the `rocketmq_runtime` prefix in it) and registers
    /// the application's metrics, typically clones of `prometheus-client`
    /// counters and gauges it keeps updating. Takes effect with
    /// [`with_metrics`](Self::with_metrics); call before `start`. With the
    /// `metrics` feature.
    ///
    /// ```
    /// use prometheus_client::metrics::counter::Counter;
    /// use rocketmq_runtime::{RuntimeDiagnosticsInputs, ServiceLifecycle, ServiceLifecycleConfig};
    ///
    /// let requests = Counter::<u64>::default();
    /// let served = requests.clone();
    /// let lifecycle = ServiceLifecycle::new(ServiceLifecycleConfig::new("broker"))
    ///     .with_metrics(RuntimeDiagnosticsInputs::default)
    ///     .with_metrics_collector(move |registry| {
    ///         registry.register("broker_requests", "Requests served", served.clone());
    ///     });
    /// requests.inc();
    /// # drop(lifecycle);
    /// ```
    #[cfg(all(not(loom), feature = "metrics"))]
    #[must_use]
    pub fn with_metrics_collector(
        self,
        register: impl Fn(&mut prometheus_client::registry::Registry) + Send + Sync + 'static,
    ) -> Self {
        *self.inner.metrics_collector.lock() = Some(Arc::new(register));
        self
    }

    /// One `/metrics` scrape, rendered now; `None` when metrics are off or
    /// the lifecycle has not started. With the `metrics` feature.
    #[cfg(all(not(loom), feature = "metrics"))]
    pub fn metrics_text(&self) -> Option<String> {
        let source = self.inner.metrics.get()?;
        Some(metrics::render(self, source))
    }

    /// The probe server's bound address (after `start` with an address).
    pub fn probe_local_addr(&self) -> Option<SocketAddr> {
        *self.inner.probe_addr.lock()
    }

    /// The current state.
    pub fn state(&self) -> ServiceLifecycleState {
        self.inner.state.lock().state
    }

    /// `Ready`, not in maintenance, and dependencies (named ones too) ready.
    pub fn is_ready(&self) -> bool {
        let state = self.inner.state.lock();
        state.state == ServiceLifecycleState::Ready
            && !state.maintenance
            && state.dependencies_ready()
    }

    /// Not `Stopped`/`Failed`, progress recorded within
    /// `liveness_stale_after`, and no supervised critical service of a
    /// watched failure state stalled past its progress deadline
    /// ([`spawn_critical_failure_monitor`](Self::spawn_critical_failure_monitor);
    /// readiness and dependencies do not matter).
    pub fn is_live(&self) -> bool {
        let live = {
            let state = self.inner.state.lock();
            !matches!(
                state.state,
                ServiceLifecycleState::Stopped | ServiceLifecycleState::Failed
            ) && state.progress.elapsed() <= self.inner.config.liveness_stale_after
        };
        live && self
            .inner
            .critical_states
            .lock()
            .iter()
            .all(|state| state.stalled_services().is_empty())
    }

    /// Records progress (keeps the service live).
    pub fn record_progress(&self) {
        self.inner.state.lock().progress = Instant::now();
    }

    /// `Starting → Ready`; idempotent when `Ready`.
    ///
    /// # Errors
    ///
    /// `internal_failure(MarkServiceReady)` from any other state.
    pub fn mark_ready(&self) -> RuntimeResult<()> {
        self.transition(|state| match state.state {
            ServiceLifecycleState::Starting => Ok(Some(ServiceLifecycleState::Ready)),
            ServiceLifecycleState::Ready => Ok(None),
            _ => Err(RuntimeError::internal_failure(
                RuntimeOperation::MarkServiceReady,
            )),
        })
    }

    /// Revokes readiness for maintenance (only while `Ready` and before a
    /// shutdown request).
    ///
    /// # Errors
    ///
    /// `internal_failure(SuspendServiceReadiness)` otherwise.
    pub fn suspend_readiness_for_maintenance(&self) -> RuntimeResult<()> {
        self.maintenance(true, RuntimeOperation::SuspendServiceReadiness)
    }

    /// Restores readiness after maintenance (same conditions).
    ///
    /// # Errors
    ///
    /// `internal_failure(RestoreServiceReadiness)` otherwise.
    pub fn restore_readiness_after_maintenance(&self) -> RuntimeResult<()> {
        self.maintenance(false, RuntimeOperation::RestoreServiceReadiness)
    }

    fn maintenance(&self, on: bool, operation: RuntimeOperation) -> RuntimeResult<()> {
        let mut state = self.inner.state.lock();
        if state.state != ServiceLifecycleState::Ready || state.shutdown.is_some() {
            return Err(RuntimeError::internal_failure(operation));
        }
        state.maintenance = on;
        Ok(())
    }

    /// Any state → `Failed`.
    pub fn mark_failed(&self) {
        let _ = self.transition(|state| {
            Ok((state.state != ServiceLifecycleState::Failed)
                .then_some(ServiceLifecycleState::Failed))
        });
    }

    /// Any state but `Failed` → `Stopped`.
    pub fn mark_stopped(&self) {
        let _ = self.transition(|state| {
            Ok(matches!(
                state.state,
                ServiceLifecycleState::Starting
                    | ServiceLifecycleState::Ready
                    | ServiceLifecycleState::Draining
            )
            .then_some(ServiceLifecycleState::Stopped))
        });
    }

    /// Requests a shutdown. The first request freezes
    /// `now + shutdown_timeout` and its reason; later requests return the
    /// same request. Moves to `Draining` unless `Failed` or `Stopped`.
    ///
    /// Once [`start`](Self::start) ran, the first request's reason is also
    /// recorded as the `reason` of the owner's shutdown report
    /// (`critical_failure` when a critical failure requested it).
    pub fn request_shutdown(&self, reason: ShutdownReason) -> ShutdownRequest {
        self.request_shutdown_labelled(reason, reason.as_str())
    }

    fn request_shutdown_labelled(
        &self,
        reason: ShutdownReason,
        label: &'static str,
    ) -> ShutdownRequest {
        let mut request = None;
        let mut first = false;
        let _ = self.transition(|state| {
            first = state.shutdown.is_none();
            state.shutdown_requested_at.get_or_insert_with(Instant::now);
            state.shutdown_label.get_or_insert(label);
            let frozen = *state.shutdown.get_or_insert(ShutdownRequest {
                reason,
                deadline: ShutdownDeadline::after(self.inner.config.shutdown_timeout),
            });
            request = Some(frozen);
            Ok(matches!(
                state.state,
                ServiceLifecycleState::Starting | ServiceLifecycleState::Ready
            )
            .then_some(ServiceLifecycleState::Draining))
        });
        self.record_shutdown_label();
        if let (true, Some(systemd)) = (first, &self.inner.systemd) {
            systemd.send(&format!("STOPPING=1\nSTATUS=stopping ({label})\n"));
        }
        self.inner.shutdown_requested.notify_waiters();
        request.unwrap_or(ShutdownRequest {
            reason,
            deadline: ShutdownDeadline::after(self.inner.config.shutdown_timeout),
        })
    }

    /// Copies the first request's label into the owner's tree (after a
    /// request and after `start`; whichever comes second records it).
    fn record_shutdown_label(&self) {
        let Some(tree) = self.inner.owner_tree.get() else {
            return;
        };
        if let Some(label) = self.inner.state.lock().shutdown_label {
            tree.record_shutdown_reason(label);
        }
    }

    /// The first shutdown request, if any.
    pub fn shutdown_request(&self) -> Option<ShutdownRequest> {
        self.inner.state.lock().shutdown
    }

    /// Waits for the first shutdown request.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: waiting has no side effects.
    pub async fn wait_for_shutdown(&self) -> ShutdownRequest {
        crate::wait::notified(&self.inner.shutdown_requested, || self.shutdown_request()).await
    }

    /// Waits for the first shutdown request, then for the
    /// [drain delay](Self::with_drain_delay) counted from
    /// that request: readiness already reports not ready (the state is
    /// `Draining`) while the service keeps serving, so load balancers stop
    /// routing before work is cancelled. Ends no later than the request's
    /// frozen deadline, so the delay never extends a shutdown. Returns the
    /// request.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: waiting has no side effects.
    pub async fn wait_drain_delay(&self) -> ShutdownRequest {
        let request = self.wait_for_shutdown().await;
        let (requested_at, delay) = {
            let state = self.inner.state.lock();
            (
                state.shutdown_requested_at.unwrap_or_else(Instant::now),
                state.drain_delay,
            )
        };
        let delay_end = crate::shutdown_deadline::saturating_add(requested_at, delay);
        let end = ShutdownDeadline::from_tokio(delay_end).earliest(request.deadline);
        tokio::time::sleep_until(end.tokio_instant()).await;
        request
    }

    #[cfg(not(loom))]
    /// Waits for a shutdown request or SIGTERM, SIGINT or SIGHUP (Ctrl-C
    /// elsewhere); a signal becomes `request_shutdown(Signal)`, recorded in
    /// the report's reason as `signal` (SIGTERM, SIGINT) or
    /// `signal (SIGHUP)`.
    ///
    /// # Errors
    ///
    /// `io(RegisterSigtermHandler / RegisterSigintHandler)` when the
    /// SIGTERM or SIGINT handler cannot be installed, `io(WaitForSignal)`
    /// for another signal's handler.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a signal is turned into a request only when observed.
    /// The listeners are installed by the first call and kept by the
    /// lifecycle, so a signal that arrives while no call is waiting is
    /// observed by the next call (concurrent calls take turns).
    pub async fn wait_for_shutdown_signal(&self) -> RuntimeResult<ShutdownRequest> {
        // Another caller may hold the listeners (and wait on them): a
        // request made meanwhile still returns at once.
        let mut listener = tokio::select! {
            biased;
            request = self.wait_for_shutdown() => return Ok(request),
            listener = self.inner.signals.lock() => listener,
        };
        let listener = match &mut *listener {
            Some(listener) => listener,
            empty => empty.insert(crate::signal::SignalListener::new()?),
        };
        // A listener whose signal driver is gone yields `None`: that is no
        // signal, so only `Some` turns into a request.
        tokio::select! {
            request = self.wait_for_shutdown() => Ok(request),
            Some(signal) = listener.recv() => {
                Ok(self.request_shutdown_labelled(ShutdownReason::Signal, signal.shutdown_label()))
            }
        }
    }

    /// Applies `recovery` for `failure`: dependencies become `Degraded`
    /// first (readiness revoked), then the service may fail and request an
    /// `Internal` shutdown.
    pub fn handle_critical_failure(
        &self,
        failure: &crate::critical::CriticalFailure,
        recovery: CriticalFailureRecovery,
    ) {
        self.set_dependency_readiness(DependencyReadiness::Degraded);
        tracing::error!(
            service = %self.inner.config.service_name,
            kind = failure.kind().as_str(),
            ?recovery,
            "critical failure handled"
        );
        match recovery {
            CriticalFailureRecovery::RevokeReadiness => {}
            CriticalFailureRecovery::FailService => self.mark_failed(),
            CriticalFailureRecovery::FailAndRequestShutdown => {
                self.mark_failed();
                self.request_shutdown_labelled(ShutdownReason::Internal, "critical_failure");
            }
        }
    }

    /// Spawns the monitor (`service-lifecycle.critical-failures`) that
    /// handles every failure recorded in `state` with `recovery`. From
    /// then on a supervised critical service of `state` that is stalled
    /// past its progress deadline makes [`is_live`](Self::is_live) false.
    ///
    /// # Errors
    ///
    /// The spawner's refusal.
    pub fn spawn_critical_failure_monitor(
        &self,
        spawner: &crate::task_spawner::TaskSpawner,
        state: &crate::critical::CriticalFailureState,
        recovery: CriticalFailureRecovery,
    ) -> RuntimeResult<crate::task_identity::TaskId> {
        let lifecycle = self.clone();
        self.inner.critical_states.lock().push(state.clone());
        state.spawn_monitor(
            spawner,
            "service-lifecycle.critical-failures",
            move |failure| {
                lifecycle.handle_critical_failure(&failure, recovery);
            },
        )
    }

    /// Applies `decide` under the lock; a returned state is committed and
    /// reported to the observer after the lock is released.
    fn transition(
        &self,
        decide: impl FnOnce(&mut LifecycleState) -> RuntimeResult<Option<ServiceLifecycleState>>,
    ) -> RuntimeResult<()> {
        let mut state = self.inner.state.lock();
        let from = state.state;
        let Some(to) = decide(&mut state)? else {
            return Ok(());
        };
        state.state = to;
        drop(state);
        if let Some(observer) = self.inner.observer.get() {
            observer.on_transition(ServiceLifecycleTransition {
                from: Some(from),
                to,
            });
        }
        if let Some(systemd) = &self.inner.systemd {
            systemd.on_transition(to);
        }
        Ok(())
    }
}

#[cfg(not(loom))]
#[cfg(feature = "probes")]
pub(crate) mod probe;

/// 16 to 256 visible ASCII characters.
pub(crate) fn drain_token_valid(token: &str) -> bool {
    (16..=256).contains(&token.len()) && token.bytes().all(|byte| byte.is_ascii_graphic())
}

/// Equality whose time depends on the lengths only, not on where the bytes
/// differ: a probe client cannot find the drain token byte by byte. Written
/// here (a few lines) rather than taken from a crate for one comparison.
#[cfg(feature = "probes")]
fn constant_time_eq(expected: &[u8], presented: &[u8]) -> bool {
    let mut difference = u8::from(expected.len() != presented.len());
    for (index, byte) in expected.iter().enumerate() {
        difference |= byte ^ presented.get(index).copied().unwrap_or(!byte);
    }
    difference == 0
}
