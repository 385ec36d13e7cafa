//! `/metrics` over real TCP: the OpenMetrics families a running service
//! exposes (tasks of several kinds, a busy blocking lane, a schedule, the
//! lifecycle, the process budget), strict line syntax, no task or group
//! names; `404` when metrics are off.
#![cfg(all(feature = "probes", feature = "metrics"))]

mod support;

#[path = "support/blocking.rs"]
mod blocking;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use rocketmq_runtime::{
    RuntimeDiagnosticsInputs, RuntimeOwner, ScheduledExecutionPolicy, ScheduledTaskConfig,
    ServiceLifecycle, ServiceLifecycleConfig, TaskKind,
};

/// `GET path` over a fresh connection; returns (status line, headers, body).
fn get(address: SocketAddr, path: &str) -> (String, String, String) {
    let mut stream = TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    write!(stream, "GET {path} HTTP/1.1\r\nHost: probe\r\n\r\n").expect("request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("response");
    let (head, body) = response.split_once("\r\n\r\n").expect("a head");
    let (status, headers) = head.split_once("\r\n").unwrap_or((head, ""));
    (status.to_owned(), headers.to_owned(), body.to_owned())
}

fn lifecycle(
    owner: &RuntimeOwner,
    metrics: Option<RuntimeDiagnosticsInputsFn>,
) -> ServiceLifecycle {
    let mut config = ServiceLifecycleConfig::new("broker");
    config.probe_bind_addr = Some("127.0.0.1:0".parse().expect("address"));
    let lifecycle = ServiceLifecycle::new(config);
    let lifecycle = match metrics {
        Some(inputs) => lifecycle.with_metrics(inputs),
        None => lifecycle,
    };
    owner
        .block_on(lifecycle.start(&owner.root_context().component("lifecycle")))
        .expect("started");
    lifecycle
}

type RuntimeDiagnosticsInputsFn = Box<dyn Fn() -> RuntimeDiagnosticsInputs + Send + Sync>;

/// The value of the one sample named `sample` (`name{labels}` as written).
fn value(body: &str, sample: &str) -> f64 {
    body.lines()
        .find_map(|line| line.strip_prefix(sample)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no sample {sample} in\n{body}"))
        .parse()
        .expect("a number")
}

#[test]
fn a_scrape_shows_the_runtimes_accounting_without_names() {
    let (owner, store) = blocking::owner(&blocking::Lanes::default());
    let broker = owner.root_context().component("broker-component-name");
    let token = broker.task_group().cancellation_token();
    broker
        .spawn_service(
            "accept-loop-task-name",
            async move { token.cancelled().await },
        )
        .expect("open");
    let token = broker.task_group().cancellation_token();
    broker
        .spawn("request-worker-task-name", TaskKind::Worker, async move {
            token.cancelled().await;
        })
        .expect("open");
    let maintenance = broker.scheduled_tasks("maintenance-group-name");
    let _ = maintenance
        .schedule(
            ScheduledTaskConfig::fixed_rate_no_overlap(
                "compact-task-name",
                Duration::from_millis(5),
            ),
            ScheduledExecutionPolicy::default(),
            || async {},
        )
        .expect("scheduled");
    let (held, running) = blocking::hold(&owner, store.storage_io());
    let schedules = maintenance.clone();
    let lifecycle = lifecycle(
        &owner,
        Some(Box::new(move || RuntimeDiagnosticsInputs {
            schedule: schedules.snapshot(),
            ..RuntimeDiagnosticsInputs::default()
        })),
    );
    lifecycle.mark_ready().expect("ready");
    owner.block_on(blocking::until("a scheduled run", || {
        maintenance
            .snapshot()
            .first()
            .is_some_and(|schedule| schedule.runs > 0)
    }));
    let address = lifecycle.probe_local_addr().expect("bound");

    let (status, headers, body) = get(address, "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        headers.contains("Content-Type: application/openmetrics-text; version=1.0.0"),
        "{headers}"
    );
    // Strict line syntax: comments, `name{labels} value` samples, `# EOF`.
    assert!(body.ends_with("# EOF\n"), "{body}");
    for line in body.lines().filter(|line| !line.starts_with('#')) {
        let (name, number) = line.rsplit_once(' ').expect("name and value");
        assert!(name.starts_with("rocketmq_runtime_"), "{line}");
        assert!(number.parse::<f64>().is_ok(), "{line}");
        let bare = name.split('{').next().expect("a name");
        assert!(
            bare.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
            "{line}"
        );
    }
    assert!(
        value(
            &body,
            r#"rocketmq_runtime_tasks{kind="service",scope="subtree"}"#
        ) >= 1.0
    );
    assert!(
        value(
            &body,
            r#"rocketmq_runtime_tasks{kind="worker",scope="subtree"}"#
        ) >= 1.0
    );
    assert!(
        value(
            &body,
            r#"rocketmq_runtime_tasks{kind="scheduled_driver",scope="subtree"}"#
        ) >= 1.0
    );
    assert_eq!(
        value(
            &body,
            r#"rocketmq_runtime_blocking_running{lane="storage_io"}"#
        ),
        1.0
    );
    assert!(value(&body, "rocketmq_runtime_schedule_runs_total") >= 1.0);
    assert!(body.contains("# TYPE rocketmq_runtime_schedule_runs counter"));
    assert_eq!(
        value(&body, r#"rocketmq_runtime_lifecycle_state{state="ready"}"#),
        1.0
    );
    assert_eq!(
        value(
            &body,
            r#"rocketmq_runtime_lifecycle_state{state="starting"}"#
        ),
        0.0
    );
    assert_eq!(value(&body, "rocketmq_runtime_ready"), 1.0);
    assert_eq!(value(&body, "rocketmq_runtime_live"), 1.0);
    assert!(value(&body, "rocketmq_runtime_process_budget_limit_bytes") > 0.0);
    assert_eq!(value(&body, "rocketmq_runtime_poisoned_groups_total"), 0.0);
    for name in [
        "broker-component-name",
        "accept-loop-task-name",
        "request-worker-task-name",
        "maintenance-group-name",
        "compact-task-name",
        "store",
        // Configuration values: the probe's bind address.
        "127.0.0.1",
    ] {
        assert!(!body.contains(name), "{name} in\n{body}");
    }
    let (status, headers, _) = {
        let mut stream = TcpStream::connect(address).expect("connect");
        write!(
            stream,
            "POST /metrics HTTP/1.1\r\nHost: probe\r\nContent-Length: 0\r\n\r\n"
        )
        .expect("request");
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("response");
        let (head, _) = response.split_once("\r\n\r\n").expect("a head");
        let (status, headers) = head.split_once("\r\n").unwrap_or((head, ""));
        (status.to_owned(), headers.to_owned(), ())
    };
    assert_eq!(status, "HTTP/1.1 405 Method Not Allowed");
    assert!(headers.contains("Allow: GET"));
    held.open();
    owner.block_on(running).expect("joins").expect("ran");
    drop(owner);
}

#[test]
fn metrics_are_not_served_unless_enabled() {
    let (owner, _store) = blocking::owner(&blocking::Lanes::default());
    let lifecycle = lifecycle(&owner, None);
    assert!(lifecycle.metrics_text().is_none());
    let address = lifecycle.probe_local_addr().expect("bound");
    let (status, _, _) = get(address, "/metrics");
    assert_eq!(status, "HTTP/1.1 404 Not Found");
}

/// Queues the application exports under a label it chose appear with
/// their depth, refusals and discards (summed per label); other queues do
/// not, and a dropped queue leaves the export. The application's own
/// metrics join the scrape under their own names.
#[test]
fn exported_queues_and_the_applications_metrics_join_the_scrape() {
    use prometheus_client::metrics::counter::Counter;
    use rocketmq_runtime::{BudgetLimit, BudgetedQueue, FullPolicy};

    let owner = RuntimeOwner::new().expect("runtime");
    let process = owner.resources().process_budget();
    let queue = |name: &str| {
        BudgetedQueue::<u32>::new(
            process
                .child(name, BudgetLimit::new(2, 1 << 20, FullPolicy::Reject))
                .expect("fits"),
        )
    };
    let requests = queue("requests-a");
    requests.export_metrics("requests");
    let more = queue("requests-b");
    more.export_metrics("requests");
    let hidden = queue("private-queue-name");
    let gone = queue("gone");
    gone.export_metrics("gone");
    drop(gone);
    for item in 0..3 {
        let _ = requests.try_push_data(item, 8);
    }
    let _ = more.try_push_data(9, 8);
    let _ = hidden.try_push_data(1, 8);

    let served = Counter::<u64>::default();
    served.inc_by(7);
    let registered = served.clone();
    let lifecycle = ServiceLifecycle::new(ServiceLifecycleConfig::new("broker"))
        .with_metrics(RuntimeDiagnosticsInputs::default)
        .with_metrics_collector(move |registry| {
            registry.register("broker_requests", "Requests served", registered.clone());
        });
    owner
        .block_on(lifecycle.start(&owner.root_context().component("lifecycle")))
        .expect("started");
    let body = lifecycle.metrics_text().expect("metrics on");
    assert_eq!(
        value(&body, "rocketmq_runtime_queue_depth{queue=\"requests\"}"),
        3.0
    );
    assert_eq!(
        value(
            &body,
            "rocketmq_runtime_queue_refused_total{queue=\"requests\"}"
        ),
        1.0
    );
    assert_eq!(
        value(
            &body,
            "rocketmq_runtime_queue_dropped_total{queue=\"requests\"}"
        ),
        0.0
    );
    assert_eq!(value(&body, "broker_requests_total"), 7.0);
    assert!(!body.contains("private-queue-name"), "{body}");
    assert!(!body.contains("queue=\"gone\""), "{body}");
    assert!(body.ends_with("# EOF\n"), "{body}");
    drop((requests, more, hidden));
    let _ = owner.shutdown_runtime_blocking().expect("outside Tokio");
}

/// A supervised service's restarts, failures, give-up and stall are
/// exported by its name (one series each, bounded by the service list);
/// nothing of its messages.
#[test]
fn supervised_services_export_restarts_and_give_ups_by_name() {
    use rocketmq_runtime::ServiceRestartPolicy;

    let owner = RuntimeOwner::new().expect("runtime");
    let broker = owner.root_context().component("broker");
    let failures = rocketmq_runtime::CriticalFailureState::new();
    let policy = ServiceRestartPolicy::new()
        .with_backoff(Duration::ZERO, Duration::ZERO)
        .with_max_restarts(2, Duration::from_secs(60))
        .critical(failures.clone());
    broker
        .spawn_supervised_service("upstream", policy, |_run| async {
            Err::<(), _>("secret-error-text")
        })
        .expect("spawned");
    owner.block_on(failures.wait());
    let lifecycle = ServiceLifecycle::new(ServiceLifecycleConfig::new("broker"))
        .with_metrics(RuntimeDiagnosticsInputs::default);
    owner
        .block_on(lifecycle.start(&owner.root_context().component("lifecycle")))
        .expect("started");
    let body = lifecycle.metrics_text().expect("metrics on");
    assert_eq!(
        value(
            &body,
            "rocketmq_runtime_service_restarts_total{service=\"upstream\"}"
        ),
        2.0
    );
    assert_eq!(
        value(
            &body,
            "rocketmq_runtime_service_failures_total{service=\"upstream\"}"
        ),
        3.0
    );
    assert_eq!(
        value(
            &body,
            "rocketmq_runtime_service_gave_up{service=\"upstream\"}"
        ),
        1.0
    );
    assert_eq!(
        value(
            &body,
            "rocketmq_runtime_service_stalled{service=\"upstream\"}"
        ),
        0.0
    );
    assert!(!body.contains("secret-error-text"), "{body}");
}
