//! Signals: SIGTERM, SIGINT and SIGHUP are held from the first line of
//! `main` (never the default action that kills the process), SIGUSR1 and
//! SIGUSR2 too; then the broker waits for the first shutdown request: a
//! termination signal, `/drainz`, a critical failure, or `--run-for`.
//! While it runs, SIGUSR1 prints the diagnostics summary and SIGUSR2 is
//! ignored (`operator_signals`).

use super::*;
use rocketmq_runtime::signal::{ProcessSignal, ProcessSignalListener};

/// Installs handlers before anything else runs: SIGTERM, SIGINT and SIGHUP
/// only set `flag` (a signal during the start is a graceful shutdown,
/// reason `signal`, once the lifecycle listens), SIGUSR1 and SIGUSR2 are
/// ignored until the broker runs. None of them takes its default action
/// that kills the process. A mask inherited with these signals blocked (a
/// launcher may block them across `exec` so that none is lost before this
/// point) is lifted here, or the broker would never hear them.
pub(crate) fn hold_early_signals(flag: &Arc<std::sync::atomic::AtomicBool>) -> Result<(), String> {
    #[cfg(unix)]
    {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1, SIGUSR2};
        let ignored = Arc::new(std::sync::atomic::AtomicBool::new(false));
        for (signal, target) in [
            (SIGTERM, flag),
            (SIGINT, flag),
            (SIGHUP, flag),
            (SIGUSR1, &ignored),
            (SIGUSR2, &ignored),
        ] {
            signal_hook::flag::register(signal, Arc::clone(target)).map_err(|error| {
                format!("cannot install the handler of signal {signal}: {error}")
            })?;
        }
        let mut held = nix::sys::signal::SigSet::empty();
        for signal in [
            nix::sys::signal::Signal::SIGTERM,
            nix::sys::signal::Signal::SIGINT,
            nix::sys::signal::Signal::SIGHUP,
            nix::sys::signal::Signal::SIGUSR1,
            nix::sys::signal::Signal::SIGUSR2,
        ] {
            held.add(signal);
        }
        held.thread_unblock()
            .map_err(|error| format!("cannot unblock the held signals: {error}"))?;
    }
    #[cfg(not(unix))]
    let _ = flag;
    Ok(())
}

/// Answers the operator's signals while the broker runs: SIGUSR1 writes the
/// diagnostics summary (who owns what, the oldest tasks) to stderr, SIGUSR2
/// is ignored with one line. Termination signals are the lifecycle's.
/// The summary covers the broker component's subtree.
/// The listener is installed before this returns, so a signal sent once
/// the broker says it runs is never left to the early handlers.
pub(crate) fn spawn_operator_signals(
    owner: &RuntimeOwner,
    broker: &ChildServiceContext,
    maintenance: &ScheduledTaskGroup,
    metadata: &MetadataIoActor,
) -> Result<(), RuntimeError> {
    let mut listener = owner.block_on(async { ProcessSignalListener::new() })?;
    let (broker, maintenance, metadata) = (broker.clone(), maintenance.clone(), metadata.clone());
    let signals = owner.root_context().component("operator-signals");
    signals.spawn_cancellable_service("operator-signals", async move {
        while let Some(signal) = listener.recv().await {
            match signal {
                ProcessSignal::User1 => {
                    let (inputs, options) = view_inputs(&maintenance, &metadata);
                    let view = broker.diagnostics_view_v2_with_options(
                        RuntimeComponent::Broker,
                        inputs,
                        options,
                    );
                    note!("diagnostics: {}", view.summary());
                }
                ProcessSignal::User2 => note!("SIGUSR2 ignored: no action is assigned to it"),
                _ => {}
            }
        }
    })?;
    Ok(())
}

/// Waits for `--run-for` to elapse (an `Internal` shutdown request) or for
/// a shutdown request (SIGTERM/SIGINT/SIGHUP, `/drainz`, a critical
/// failure).
pub(crate) async fn wait_for_stop(
    lifecycle: &ServiceLifecycle,
    run_for: Option<Duration>,
    early_signal: &std::sync::atomic::AtomicBool,
) -> Result<ShutdownRequest, RuntimeError> {
    let signal = lifecycle.wait_for_shutdown_signal();
    tokio::pin!(signal);
    // The first poll installs the lifecycle's SIGTERM/SIGINT handlers; a
    // signal that came earlier was held by `hold_early_signals`.
    if let std::task::Poll::Ready(request) = futures::poll!(signal.as_mut()) {
        return request;
    }
    if early_signal.load(Ordering::SeqCst) {
        return Ok(lifecycle.request_shutdown(ShutdownReason::Signal));
    }
    note!("broker running (ready); SIGTERM, SIGHUP, Ctrl-C or a POST to /drainz stops it; SIGUSR1 prints diagnostics");
    let run_for_elapsed = async {
        match run_for {
            Some(duration) => tokio::time::sleep(duration).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        request = signal => request,
        () = run_for_elapsed => Ok(lifecycle.request_shutdown(ShutdownReason::Internal)),
    }
}
