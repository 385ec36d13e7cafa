//! Waiting for the process's termination signals: SIGTERM or SIGINT on
//! Unix, Ctrl-C elsewhere.
//!
//! [`ServiceLifecycle::wait_for_shutdown_signal`](crate::ServiceLifecycle::wait_for_shutdown_signal)
//! turns the same signals into a shutdown request; use these functions in
//! an entrypoint without a lifecycle.

use crate::error::{RuntimeError, RuntimeOperation, RuntimeResult};

/// Waits for SIGTERM or SIGINT (Ctrl-C outside Unix).
///
/// # Errors
///
/// `context_unavailable(WaitForSignal)` outside a Tokio runtime;
/// `io(RegisterSigtermHandler / RegisterSigintHandler)` when a handler
/// cannot be installed (for example on a runtime without its I/O driver);
/// `closed(WaitForSignal)` when the runtime's signal driver shut down, so
/// no signal can arrive any more.
///
/// # Cancel safety
///
/// Cancel safe: nothing is consumed before a signal is returned. Tokio
/// keeps its process-wide handler once installed, so after the first poll
/// a signal no longer terminates the process by default, and one that
/// arrives while no future waits is lost: keep one future alive for the
/// whole run (a [`ServiceLifecycle`](crate::ServiceLifecycle) keeps its
/// listeners between calls).
pub async fn wait_for_signal_result() -> RuntimeResult<()> {
    let mut listener = SignalListener::new()?;
    match listener.recv().await {
        Some(()) => Ok(()),
        None => Err(RuntimeError::closed(RuntimeOperation::WaitForSignal)),
    }
}

/// [`wait_for_signal_result`] for entrypoints that cannot do anything
/// about a failure: the error is logged and the future never completes
/// (a signal whose handler could not be installed keeps its default
/// action, which terminates the process).
///
/// # Cancel safety
///
/// As [`wait_for_signal_result`].
pub async fn wait_for_signal() {
    if let Err(error) = wait_for_signal_result().await {
        tracing::error!(
            error = %error,
            operation = error.operation().label(),
            "cannot wait for termination signals; they keep their default action"
        );
        std::future::pending::<()>().await;
    }
}

/// Installed SIGTERM and SIGINT listeners (Ctrl-C outside Unix); a signal
/// that arrives between two [`recv`](Self::recv) calls is kept for the next.
#[derive(Debug)]
pub(crate) struct SignalListener {
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
}

impl SignalListener {
    /// Installs the listeners.
    ///
    /// # Errors
    ///
    /// `context_unavailable(WaitForSignal)` outside a Tokio runtime (Tokio
    /// would panic); `io(RegisterSigtermHandler / RegisterSigintHandler)`.
    pub(crate) fn new() -> RuntimeResult<Self> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(RuntimeError::context_unavailable(
                RuntimeOperation::WaitForSignal,
            ));
        }
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Ok(Self {
                terminate: signal(SignalKind::terminate()).map_err(|error| {
                    RuntimeError::io(RuntimeOperation::RegisterSigtermHandler, error)
                })?,
                interrupt: signal(SignalKind::interrupt()).map_err(|error| {
                    RuntimeError::io(RuntimeOperation::RegisterSigintHandler, error)
                })?,
            })
        }
        #[cfg(not(unix))]
        {
            Ok(Self {})
        }
    }

    /// The next signal; `None` once the signal driver is gone (no signal
    /// can arrive any more).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a signal not returned stays with the listener.
    pub(crate) async fn recv(&mut self) -> Option<()> {
        #[cfg(unix)]
        {
            tokio::select! {
                Some(()) = self.terminate.recv() => Some(()),
                Some(()) = self.interrupt.recv() => Some(()),
                else => None,
            }
        }
        #[cfg(not(unix))]
        {
            tokio::signal::ctrl_c().await.ok()
        }
    }
}
