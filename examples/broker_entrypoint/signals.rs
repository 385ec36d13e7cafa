//! Signals: SIGTERM and SIGINT are held from the first line of `main`
//! (never the default action that kills the process), then the broker
//! waits for the first shutdown request: a signal, `/drainz`, a critical
//! failure, or `--run-for`.

use super::*;

/// Installs SIGTERM/SIGINT handlers that only set `flag`, before anything
/// else runs: a signal during the start is a graceful shutdown (reason
/// `signal`) once the lifecycle listens, never the default action that
/// kills the process. A mask inherited with these signals blocked (a
/// launcher may block them across `exec` so that none is lost before this
/// point) is lifted here, or the broker would never hear them.
pub(crate) fn hold_early_signals(flag: &Arc<std::sync::atomic::AtomicBool>) -> Result<(), String> {
    #[cfg(unix)]
    {
        for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
            signal_hook::flag::register(signal, Arc::clone(flag)).map_err(|error| {
                format!("cannot install the handler of signal {signal}: {error}")
            })?;
        }
        let mut shutdown_signals = nix::sys::signal::SigSet::empty();
        shutdown_signals.add(nix::sys::signal::Signal::SIGTERM);
        shutdown_signals.add(nix::sys::signal::Signal::SIGINT);
        shutdown_signals
            .thread_unblock()
            .map_err(|error| format!("cannot unblock SIGTERM and SIGINT: {error}"))?;
    }
    #[cfg(not(unix))]
    let _ = flag;
    Ok(())
}

/// Waits for `--run-for` to elapse (an `Internal` shutdown request) or for
/// a shutdown request (SIGTERM/SIGINT, `/drainz`, a critical failure).
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
    note!("broker running (ready); SIGTERM, Ctrl-C or a POST to /drainz stops it");
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
