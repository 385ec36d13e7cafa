//! `wait_for_shutdown_signal` keeps its listeners: a SIGTERM that arrives
//! while no call is waiting (after an earlier call was dropped) is observed
//! by the next call, never swallowed by the handler Tokio keeps installed.
//! Its own test binary: it sends SIGTERM and SIGINT to this process.
#![cfg(unix)]

mod support;

use std::future::Future;

use rocketmq_runtime::{ServiceLifecycle, ServiceLifecycleConfig, ShutdownReason};
use support::guard;
use tokio::signal::unix::{signal, SignalKind};

#[tokio::test]
async fn a_signal_between_two_waits_is_observed_by_the_second() {
    let lifecycle = ServiceLifecycle::new(ServiceLifecycleConfig::new("broker"));
    // A first wait installs the listeners and is dropped before any signal.
    {
        let first = lifecycle.wait_for_shutdown_signal();
        tokio::pin!(first);
        assert!(futures::poll!(first.as_mut()).is_pending());
    }
    // An independent listener tells when Tokio has delivered the signal.
    let mut delivered = signal(SignalKind::terminate()).expect("probe listener");
    let status = std::process::Command::new("kill")
        .arg("-TERM")
        .arg(std::process::id().to_string())
        .status()
        .expect("run kill");
    assert!(status.success());
    guard("the signal is delivered", delivered.recv()).await;
    // No wait was running when it arrived; the next one still sees it.
    let request = guard("the held signal", lifecycle.wait_for_shutdown_signal())
        .await
        .expect("listeners");
    assert_eq!(request.reason, ShutdownReason::Signal);
}

/// A caller that holds the listeners (a pinned, unpolled wait) does not
/// keep another caller from seeing a shutdown request.
#[tokio::test]
async fn a_request_reaches_every_waiter_while_one_holds_the_listeners() {
    let lifecycle = ServiceLifecycle::new(ServiceLifecycleConfig::new("broker"));
    let holder = lifecycle.wait_for_shutdown_signal();
    tokio::pin!(holder);
    assert!(
        futures::poll!(holder.as_mut()).is_pending(),
        "holds the listeners"
    );
    let other = tokio::spawn({
        let lifecycle = lifecycle.clone();
        async move { lifecycle.wait_for_shutdown_signal().await }
    });
    tokio::task::yield_now().await;
    lifecycle.request_shutdown(ShutdownReason::PreStop);
    let request = guard("the other waiter", other)
        .await
        .expect("joins")
        .expect("listeners");
    assert_eq!(request.reason, ShutdownReason::PreStop);
}

/// `signal::wait_for_signal_result` returns once SIGINT arrives (after its
/// first poll installed the listeners).
#[tokio::test]
async fn wait_for_signal_result_returns_on_sigint() {
    let wait = rocketmq_runtime::signal::wait_for_signal_result();
    tokio::pin!(wait);
    assert!(futures::poll!(wait.as_mut()).is_pending(), "no signal yet");
    let status = std::process::Command::new("kill")
        .arg("-INT")
        .arg(std::process::id().to_string())
        .status()
        .expect("run kill");
    assert!(status.success());
    guard("the signal", wait)
        .await
        .expect("listeners installed");
}

/// Outside a Tokio runtime no listener can be installed: an error, not a
/// panic.
#[test]
fn wait_for_signal_result_outside_tokio_is_an_error() {
    let wait = std::pin::pin!(rocketmq_runtime::signal::wait_for_signal_result());
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    let std::task::Poll::Ready(Err(error)) = wait.poll(&mut context) else {
        panic!("not refused at once");
    };
    assert_eq!(
        error.kind(),
        rocketmq_runtime::RuntimeErrorKind::ContextUnavailable
    );
    assert_eq!(
        error.operation(),
        rocketmq_runtime::RuntimeOperation::WaitForSignal
    );
}

/// Sends `signal` (a `kill` argument such as `-USR1`) to this process.
fn raise(signal: &str) {
    let status = std::process::Command::new("kill")
        .arg(signal)
        .arg(std::process::id().to_string())
        .status()
        .expect("run kill");
    assert!(status.success());
}

/// A `ProcessSignalListener` reports SIGUSR1, SIGUSR2 and SIGHUP by name,
/// and none of them takes its default action (which would end this test
/// binary).
#[tokio::test]
async fn the_process_listener_reports_the_operator_signals_and_sighup() {
    use rocketmq_runtime::signal::{ProcessSignal, ProcessSignalListener};
    let mut listener = ProcessSignalListener::new().expect("listeners");
    for (argument, expected) in [
        ("-USR1", ProcessSignal::User1),
        ("-USR2", ProcessSignal::User2),
        ("-HUP", ProcessSignal::Hangup),
    ] {
        raise(argument);
        // Other tests of this binary send SIGTERM and SIGINT meanwhile.
        let next = async {
            loop {
                match listener.recv().await {
                    Some(ProcessSignal::Terminate | ProcessSignal::Interrupt) => {}
                    other => break other,
                }
            }
        };
        let signal = guard(argument, next).await.expect("a signal");
        assert_eq!(signal, expected);
        assert_eq!(signal.is_termination(), expected == ProcessSignal::Hangup);
    }
    assert_eq!(ProcessSignal::Hangup.name(), "SIGHUP");
}
