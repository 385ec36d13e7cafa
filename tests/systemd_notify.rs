//! systemd notifications (own binary: sets `NOTIFY_SOCKET` and
//! `WATCHDOG_USEC` for the process): `READY=1` at readiness, `STATUS=`
//! lines, `STOPPING=1` at the first shutdown request, and `WATCHDOG=1` at
//! half the watchdog interval while live, on paused time.

mod support;

use std::os::unix::net::UnixDatagram;
use std::time::Duration;

use rocketmq_runtime::{ServiceLifecycle, ServiceLifecycleConfig, ShutdownReason};
use support::harness;

/// Every datagram waiting on `socket`.
fn drain(socket: &UnixDatagram) -> Vec<String> {
    let mut messages = Vec::new();
    let mut buffer = [0u8; 512];
    while let Ok(length) = socket.recv(&mut buffer) {
        messages.push(String::from_utf8_lossy(&buffer[..length]).into_owned());
    }
    messages
}

fn pings(messages: &[String]) -> usize {
    messages
        .iter()
        .filter(|message| message.as_str() == "WATCHDOG=1\n")
        .count()
}

/// Lets the lifecycle's tasks run after time moved.
async fn settle() {
    for _ in 0..8 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn the_service_manager_hears_readiness_status_stopping_and_watchdog_pings() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&path).expect("bind");
    socket.set_nonblocking(true).expect("non-blocking");
    std::env::set_var("NOTIFY_SOCKET", &path);
    std::env::set_var("WATCHDOG_USEC", "200000"); // a ping every 100 ms
    std::env::remove_var("WATCHDOG_PID");

    let harness = harness("systemd");
    let lifecycle = ServiceLifecycle::new(ServiceLifecycleConfig::new("broker"));
    lifecycle
        .start(&harness.service_context("probes"))
        .await
        .expect("started");
    lifecycle.mark_ready().expect("ready");
    settle().await;
    let messages = drain(&socket);
    assert!(
        messages.contains(&"READY=1\nSTATUS=ready\n".to_owned()),
        "{messages:?}"
    );

    tokio::time::advance(Duration::from_secs(1)).await;
    settle().await;
    let live_pings = pings(&drain(&socket));
    assert!(
        (9..=11).contains(&live_pings),
        "one ping per 100 ms while live: {live_pings}"
    );

    lifecycle.request_shutdown(ShutdownReason::Signal);
    lifecycle.request_shutdown(ShutdownReason::PreStop);
    settle().await;
    let messages = drain(&socket);
    let stopping: Vec<_> = messages
        .iter()
        .filter(|message| message.starts_with("STOPPING=1"))
        .collect();
    assert_eq!(
        stopping,
        ["STOPPING=1\nSTATUS=stopping (signal)\n"],
        "{messages:?}"
    );

    // Not live any more: the pings stop, so systemd would restart a
    // wedged process.
    lifecycle.mark_failed();
    settle().await;
    assert!(drain(&socket).contains(&"STATUS=failed\n".to_owned()));
    tokio::time::advance(Duration::from_secs(1)).await;
    settle().await;
    assert_eq!(pings(&drain(&socket)), 0);
    let _ = harness.shutdown_tasks(Duration::from_secs(1)).await;
}
