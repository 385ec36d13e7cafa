//! Starting a lifecycle's own work: the heartbeat, the systemd watchdog
//! and the probe server, in a `service-lifecycle` component.

use std::sync::Arc;
use std::time::Duration;

use super::{metrics, notify, probe, ServiceLifecycle};
use crate::error::{RuntimeError, RuntimeOperation, RuntimeResult};

impl ServiceLifecycle {
    pub(super) async fn start_component(
        &self,
        context: &crate::service_context::ChildServiceContext,
    ) -> RuntimeResult<()> {
        let component = context.try_component("service-lifecycle")?;
        let group = component.task_group().clone();
        let _ = self.inner.owner_tree.set(Arc::clone(group.tree()));
        let inputs = self.inner.metrics_inputs.lock().clone();
        if let Some(inputs) = inputs {
            let _ = self.inner.metrics.set(metrics::MetricsSource {
                root: group.tree_top(),
                diagnostics: component.diagnostics().clone(),
                lanes: [
                    component.storage_io().clone(),
                    component.metadata_io().clone(),
                    component.cpu_crypto().clone(),
                ],
                budget: component.process_budget(),
                inputs,
            });
        }
        self.record_shutdown_label();
        let listener = match self.inner.config.probe_bind_addr {
            Some(address) => match tokio::net::TcpListener::bind(address).await {
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
        if let (Ok(()), Some(listener)) = (&spawned, listener) {
            let address = listener.local_addr().ok();
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
