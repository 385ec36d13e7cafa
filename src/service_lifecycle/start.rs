//! Starting a lifecycle's own work: the heartbeat, the systemd watchdog
//! and the probe server, in a `service-lifecycle` component. The public
//! `start(&ChildServiceContext)` is wired in `service_context/start.rs`,
//! which hands this file the component as a [`LifecycleSeat`].

use crate::loom::Ordering;
use std::sync::Arc;
use std::time::Duration;

#[cfg(feature = "metrics")]
use super::metrics;
#[cfg(feature = "probes")]
use super::probe;
use super::{notify, ServiceLifecycle};
use crate::blocking::BlockingExecutor;
use crate::diagnostics::RuntimeDiagnostics;
use crate::error::{RuntimeError, RuntimeOperation, RuntimeResult};
use crate::resource_budget::ResourceBudget;
use crate::task_group::TaskGroup;

/// What a lifecycle takes from the component it starts in: its group, the
/// runtime's diagnostics, the three managed lanes and the process budget
/// (for `/metrics`).
#[derive(Debug)]
#[cfg_attr(
    not(feature = "metrics"),
    allow(
        dead_code,
        reason = "all but the group are read only to serve /metrics"
    )
)]
pub(crate) struct LifecycleSeat {
    pub(crate) group: TaskGroup,
    pub(crate) diagnostics: RuntimeDiagnostics,
    pub(crate) lanes: [BlockingExecutor; 3],
    pub(crate) budget: ResourceBudget,
}

impl ServiceLifecycle {
    /// `start`: refuses a second start, takes its seat (creating the
    /// component) and starts its work; a failed start can be retried.
    pub(crate) async fn start_in(
        &self,
        seat: impl FnOnce() -> RuntimeResult<LifecycleSeat>,
    ) -> RuntimeResult<()> {
        if self.inner.started.swap(true, Ordering::SeqCst) {
            return Err(RuntimeError::internal_failure(
                RuntimeOperation::StartServiceLifecycle,
            ));
        }
        let started = match seat() {
            Ok(seat) => self.start_component(seat).await,
            Err(error) => Err(error),
        };
        if started.is_err() {
            self.inner.started.store(false, Ordering::SeqCst);
        }
        started
    }

    async fn start_component(&self, seat: LifecycleSeat) -> RuntimeResult<()> {
        let group = seat.group;
        let _ = self.inner.owner_tree.set(Arc::clone(group.tree()));
        #[cfg(feature = "metrics")]
        if let Some(inputs) = self.inner.metrics_inputs.lock().clone() {
            let _ = self.inner.metrics.set(metrics::MetricsSource {
                root: group.tree_top(),
                diagnostics: seat.diagnostics,
                lanes: seat.lanes,
                budget: seat.budget,
                inputs,
                collector: self.inner.metrics_collector.lock().clone(),
            });
        }
        self.record_shutdown_label();
        #[cfg(feature = "probes")]
        let listener = match self.inner.config.probe_bind_addr {
            Some(address) => match super::probe::bind_listener(address) {
                Ok(listener) => Some(listener),
                Err(error) => {
                    let _ = group.shutdown(Duration::from_secs(1)).await;
                    return Err(
                        RuntimeError::io(RuntimeOperation::BindServiceHealthProbe, error)
                            .with_context(crate::error::RuntimeErrorContext::Address(address)),
                    );
                }
            },
            None => None,
        };
        // Built without the probe server: an address to serve probes on is
        // refused, never accepted and ignored.
        #[cfg(not(feature = "probes"))]
        if self.inner.config.probe_bind_addr.is_some() {
            let _ = group.shutdown(Duration::from_secs(1)).await;
            return Err(
                RuntimeError::unsupported(RuntimeOperation::BindServiceHealthProbe).with_context(
                    crate::error::RuntimeErrorContext::FeatureDisabled {
                        setting: "ServiceLifecycleConfig::probe_bind_addr",
                        feature: "probes",
                    },
                ),
            );
        }
        let heartbeat = self.clone();
        let cancelled = group.cancellation_token();
        let mut spawned = group
            .spawn_service("service-lifecycle.heartbeat", async move {
                let mut interval = tokio::time::interval(Duration::from_secs(1));
                loop {
                    tokio::select! {
                        () = cancelled.cancelled() => return,
                        _ = interval.tick() => heartbeat.record_progress(),
                    }
                }
            })
            .map(drop);
        if let (Ok(()), Some(period)) = (
            &spawned,
            self.inner
                .systemd
                .as_ref()
                .and_then(notify::SystemdNotifier::watchdog_interval),
        ) {
            // Pings only while live: a wedged process stops pinging and
            // the service manager restarts it.
            let lifecycle = self.clone();
            let cancelled = group.cancellation_token();
            spawned = group
                .spawn_service("service-lifecycle.watchdog", async move {
                    let mut interval = tokio::time::interval(period);
                    loop {
                        tokio::select! {
                            () = cancelled.cancelled() => return,
                            _ = interval.tick() => {
                                if let (true, Some(systemd)) =
                                    (lifecycle.is_live(), &lifecycle.inner.systemd)
                                {
                                    systemd.send("WATCHDOG=1\n");
                                }
                            }
                        }
                    }
                })
                .map(drop);
        }
        #[cfg(feature = "probes")]
        if let (Ok(()), Some(listener)) = (&spawned, listener) {
            let address = listener.local_addr().ok();
            if let Some(bound) = address.filter(|bound| !bound.ip().is_loopback()) {
                if !self.requires_drain_token() {
                    tracing::warn!(
                        address = %bound,
                        "the probe server listens beyond loopback without a drain token: anyone who can reach it can stop this process with POST /drainz; set ROCKETMQ_HEALTH_DRAIN_TOKEN (or ServiceLifecycle::with_drain_token)"
                    );
                }
            }
            let lifecycle = self.clone();
            let probes = group.clone();
            spawned = group
                .spawn_service("service-lifecycle.probe", async move {
                    probe::serve_probes(listener, lifecycle, probes).await;
                })
                .map(|_| *self.inner.probe_addr.lock() = address);
        }
        if spawned.is_err() {
            // A failed start leaves nothing running: its component is shut
            // down, and no probe address is advertised.
            *self.inner.probe_addr.lock() = None;
            let _ = group.shutdown(Duration::from_secs(1)).await;
        }
        spawned
    }
}
