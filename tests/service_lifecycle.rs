//! ServiceLifecycle state machine (`src/service_lifecycle.rs`) on paused
//! time.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rocketmq_runtime::{
    DependencyReadiness, RuntimeErrorKind, RuntimeOperation, ServiceLifecycle,
    ServiceLifecycleConfig, ServiceLifecycleObserver, ServiceLifecycleState as S,
    ServiceLifecycleTransition, ShutdownReason,
};
use tokio::time::Instant;

#[derive(Debug, Default)]
struct Recorder(Mutex<Vec<(Option<S>, S)>>);

impl ServiceLifecycleObserver for Recorder {
    fn on_transition(&self, transition: ServiceLifecycleTransition) {
        self.0
            .lock()
            .expect("unpoisoned")
            .push((transition.from, transition.to));
    }
}

fn lifecycle() -> (ServiceLifecycle, Arc<Recorder>) {
    let lifecycle = ServiceLifecycle::new(ServiceLifecycleConfig::new("broker"));
    let recorder = Arc::new(Recorder::default());
    lifecycle
        .set_observer(recorder.clone())
        .expect("while starting");
    (lifecycle, recorder)
}

fn seen(recorder: &Recorder) -> Vec<(Option<S>, S)> {
    recorder.0.lock().expect("unpoisoned").clone()
}

#[tokio::test(start_paused = true)]
async fn allowed_and_refused_transitions_and_the_observer_sees_exactly_the_committed_ones() {
    let (lifecycle, recorder) = lifecycle();
    assert_eq!(lifecycle.state(), S::Starting);
    lifecycle.mark_ready().expect("starting → ready");
    lifecycle.mark_ready().expect("idempotent");
    lifecycle
        .suspend_readiness_for_maintenance()
        .expect("ready");
    assert!(!lifecycle.is_ready() && lifecycle.is_live());
    lifecycle
        .restore_readiness_after_maintenance()
        .expect("ready");
    assert!(lifecycle.is_ready());
    lifecycle.set_dependency_readiness(DependencyReadiness::Degraded);
    assert!(
        !lifecycle.is_ready(),
        "a degraded dependency revokes readiness"
    );
    assert!(lifecycle.is_live(), "liveness ignores dependencies");
    lifecycle.set_dependency_readiness(DependencyReadiness::Ready);
    lifecycle.request_shutdown(ShutdownReason::Internal);
    assert_eq!(lifecycle.state(), S::Draining);
    let error = lifecycle.mark_ready().expect_err("not from draining");
    assert_eq!(error.kind(), RuntimeErrorKind::Internal);
    assert_eq!(error.operation(), RuntimeOperation::MarkServiceReady);
    assert!(
        lifecycle.suspend_readiness_for_maintenance().is_err(),
        "after a shutdown request"
    );
    lifecycle.mark_stopped();
    lifecycle.mark_stopped(); // no-op: no event
    lifecycle.mark_failed();
    lifecycle.mark_failed(); // no-op
    lifecycle.mark_stopped(); // Failed is kept
    assert_eq!(lifecycle.state(), S::Failed);
    assert!(!lifecycle.is_live());
    assert_eq!(
        seen(&recorder),
        [
            (None, S::Starting),
            (Some(S::Starting), S::Ready),
            (Some(S::Ready), S::Draining),
            (Some(S::Draining), S::Stopped),
            (Some(S::Stopped), S::Failed),
        ]
    );
    let late = Arc::new(Recorder::default());
    assert!(lifecycle.set_observer(late).is_err(), "only while starting");
}

/// Two shutdown requests 10 s apart share the first deadline and reason;
/// a failed service stays failed.
#[tokio::test(start_paused = true)]
async fn the_first_shutdown_request_freezes_the_deadline_and_the_reason() {
    let (lifecycle, _) = lifecycle();
    lifecycle.mark_ready().expect("ready");
    let requested_at = Instant::now();
    let first = lifecycle.request_shutdown(ShutdownReason::Signal);
    assert_eq!(
        first.deadline.tokio_instant(),
        requested_at + Duration::from_secs(45)
    );
    tokio::time::sleep(Duration::from_secs(10)).await;
    let second = lifecycle.request_shutdown(ShutdownReason::PreStop);
    assert_eq!(second, first);
    assert_eq!(second.reason, ShutdownReason::Signal);
    assert_eq!(lifecycle.shutdown_request(), Some(first));
    assert_eq!(lifecycle.wait_for_shutdown().await, first);

    let (failed, recorder) = lifecycle_failed();
    failed.request_shutdown(ShutdownReason::Internal);
    assert_eq!(failed.state(), S::Failed, "Failed is preserved");
    assert_eq!(
        seen(&recorder).last(),
        Some(&(Some(S::Starting), S::Failed))
    );
}

/// The drain delay counts from the first request, keeps readiness revoked
/// while it runs, and ends at the frozen deadline when it is longer.
#[tokio::test(start_paused = true)]
async fn the_drain_delay_counts_from_the_first_request_inside_the_deadline() {
    let mut config = ServiceLifecycleConfig::new("broker");
    config.shutdown_timeout = Duration::from_secs(10);
    let lifecycle = ServiceLifecycle::new(config.clone()).with_drain_delay(Duration::from_secs(3));
    assert_eq!(lifecycle.drain_delay(), Duration::from_secs(3));
    lifecycle.mark_ready().expect("ready");
    let requested_at = Instant::now();
    let request = lifecycle.request_shutdown(ShutdownReason::PreStop);
    assert!(
        !lifecycle.is_ready(),
        "readiness is revoked during the delay"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    // A later request does not restart the delay.
    lifecycle.request_shutdown(ShutdownReason::Signal);
    assert_eq!(lifecycle.wait_drain_delay().await, request);
    assert_eq!(Instant::now(), requested_at + Duration::from_secs(3));

    // A delay longer than the shutdown timeout ends at the deadline.
    let capped = ServiceLifecycle::new(config).with_drain_delay(Duration::from_secs(60));
    let request = capped.request_shutdown(ShutdownReason::Internal);
    assert_eq!(capped.wait_drain_delay().await, request);
    assert_eq!(Instant::now(), request.deadline.tokio_instant());
}

fn lifecycle_failed() -> (ServiceLifecycle, Arc<Recorder>) {
    let (lifecycle, recorder) = lifecycle();
    lifecycle.mark_failed();
    (lifecycle, recorder)
}

#[tokio::test(start_paused = true)]
async fn liveness_needs_fresh_progress() {
    let mut config = ServiceLifecycleConfig::new("broker");
    config.liveness_stale_after = Duration::from_secs(5);
    let lifecycle = ServiceLifecycle::new(config);
    assert!(lifecycle.is_live());
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(!lifecycle.is_live(), "stale");
    lifecycle.record_progress();
    assert!(lifecycle.is_live());
}

#[tokio::test(start_paused = true)]
async fn waiters_wake_on_the_first_request() {
    let (lifecycle, _) = lifecycle();
    let waiter = tokio::spawn({
        let lifecycle = lifecycle.clone();
        async move { lifecycle.wait_for_shutdown().await }
    });
    tokio::task::yield_now().await;
    let request = lifecycle.request_shutdown(ShutdownReason::PreStop);
    assert_eq!(waiter.await.expect("joins"), request);
}

/// `start` runs the heartbeat and, with an address, the probe server; a
/// second start is refused.
#[cfg(feature = "probes")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_serves_probes_and_refuses_a_second_start() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let harness = rocketmq_runtime::RuntimeContext::try_from_current("lifecycle").expect("tokio");
    let context = harness.service_context("broker");
    let mut config = ServiceLifecycleConfig::new("broker");
    config.probe_bind_addr = Some("127.0.0.1:0".parse().expect("address"));
    let lifecycle = ServiceLifecycle::new(config);
    lifecycle.start(&context).await.expect("started");
    let error = lifecycle.start(&context).await.expect_err("second start");
    assert_eq!(error.operation(), RuntimeOperation::StartServiceLifecycle);
    let address = lifecycle.probe_local_addr().expect("bound");
    let get = |path: &'static str| async move {
        let mut stream = tokio::net::TcpStream::connect(address)
            .await
            .expect("connect");
        stream
            .write_all(format!("GET {path} HTTP/1.1\r\nHost: probe\r\n\r\n").as_bytes())
            .await
            .expect("write");
        let mut response = String::new();
        stream.read_to_string(&mut response).await.expect("read");
        response
    };
    assert!(get("/readyz").await.starts_with("HTTP/1.1 503"));
    lifecycle.mark_ready().expect("ready");
    assert!(get("/readyz").await.starts_with("HTTP/1.1 200"));
    assert!(get("/livez").await.starts_with("HTTP/1.1 200"));
    let report = harness.shutdown_tasks(Duration::from_secs(5)).await;
    assert!(report.is_healthy(), "{}", report.to_json());
}

/// Built without the probe server, an address to serve probes on is
/// refused (`Unsupported`, naming the setting and the feature), never accepted and
/// ignored; so is `ROCKETMQ_HEALTH_BIND_ADDR` or `ROCKETMQ_HEALTH_METRICS=1`
/// without the features that serve them.
#[cfg(not(feature = "probes"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_address_without_the_probes_feature_is_refused() {
    let harness = rocketmq_runtime::RuntimeContext::try_from_current("lifecycle").expect("tokio");
    let context = harness.service_context("broker");
    let mut config = ServiceLifecycleConfig::new("broker");
    let address: std::net::SocketAddr = "127.0.0.1:0".parse().expect("address");
    config.probe_bind_addr = Some(address);
    let lifecycle = ServiceLifecycle::new(config);
    let error = lifecycle
        .start(&context)
        .await
        .expect_err("no probe server");
    assert_eq!(
        error.kind(),
        rocketmq_runtime::RuntimeErrorKind::Unsupported
    );
    assert_eq!(error.operation(), RuntimeOperation::BindServiceHealthProbe);
    assert!(
        error
            .to_string()
            .contains("ServiceLifecycleConfig::probe_bind_addr needs the `probes` feature"),
        "{error}"
    );
    assert_eq!(lifecycle.probe_local_addr(), None);
    let report = harness.shutdown_tasks(Duration::from_secs(5)).await;
    assert!(report.is_healthy(), "{}", report.to_json());
}
