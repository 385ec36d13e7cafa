//! The process's signals: termination (SIGTERM, SIGINT, SIGHUP on Unix;
//! Ctrl-C elsewhere) and the operator's requests (SIGUSR1, SIGUSR2).
//!
//! [`ServiceLifecycle::wait_for_shutdown_signal`](crate::ServiceLifecycle::wait_for_shutdown_signal)
//! turns the termination signals into a shutdown request whose reason
//! names the signal; use [`wait_for_signal`] in an entrypoint without a
//! lifecycle, and a [`ProcessSignalListener`] for the whole set:
//!
//! | Signal | Meaning | What an entrypoint does |
//! | --- | --- | --- |
//! | SIGTERM, SIGINT | stop | a graceful shutdown (reason `signal`) |
//! | SIGHUP | the terminal or the unit went away (`SendSIGHUP=`) | a graceful shutdown (reason `signal (SIGHUP)`) |
//! | SIGUSR1 | show me what you are doing | writes the diagnostics summary to stderr and keeps running |
//! | SIGUSR2 | nothing assigned | ignored, with one log line |
//!
//! Once a listener is installed, a signal never takes its default action
//! again in this process (Tokio keeps its handler), so further termination
//! signals during a drain do not cut it short.
//!
//! Before `main` runs (the dynamic loader, about a millisecond after
//! `exec`), no program can handle a signal: a SIGTERM then takes the
//! default action. A launcher that must not lose one blocks the signals
//! across `exec`; the entrypoint unblocks them once its handlers exist, and
//! the held signal is delivered then.

use crate::error::{RuntimeError, RuntimeOperation, RuntimeResult};

/// A signal a [`ProcessSignalListener`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProcessSignal {
    /// SIGTERM (Ctrl-C outside Unix is reported as [`Interrupt`](Self::Interrupt)).
    Terminate,
    /// SIGINT, or Ctrl-C.
    Interrupt,
    /// SIGHUP: the controlling terminal closed, or systemd's `SendSIGHUP=`.
    Hangup,
    /// SIGUSR1: the operator asks for the diagnostics summary.
    User1,
    /// SIGUSR2: no meaning assigned.
    User2,
}

impl ProcessSignal {
    /// The signal's name (`SIGTERM`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Terminate => "SIGTERM",
            Self::Interrupt => "SIGINT",
            Self::Hangup => "SIGHUP",
            Self::User1 => "SIGUSR1",
            Self::User2 => "SIGUSR2",
        }
    }

    /// Whether the signal asks the process to stop (SIGTERM, SIGINT,
    /// SIGHUP).
    pub const fn is_termination(self) -> bool {
        matches!(self, Self::Terminate | Self::Interrupt | Self::Hangup)
    }

    /// The reason label of a shutdown this signal requested: `signal` for
    /// SIGTERM and SIGINT, `signal (SIGHUP)` for SIGHUP.
    pub(crate) const fn shutdown_label(self) -> &'static str {
        match self {
            Self::Hangup => "signal (SIGHUP)",
            _ => "signal",
        }
    }
}

impl std::fmt::Display for ProcessSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Waits for a termination signal: SIGTERM, SIGINT or SIGHUP (Ctrl-C
/// outside Unix).
///
/// # Errors
///
/// `context_unavailable(WaitForSignal)` outside a Tokio runtime;
/// `io(RegisterSigtermHandler / RegisterSigintHandler)` when the SIGTERM or
/// SIGINT handler cannot be installed (for example on a runtime without
/// its I/O driver), `io(WaitForSignal)` for another signal's handler;
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
        Some(_) => Ok(()),
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

/// Installed listeners for every [`ProcessSignal`]: a signal that arrives
/// between two [`recv`](Self::recv) calls is kept for the next (one per
/// signal kind: Tokio coalesces repeats of one signal).
///
/// ```
/// use rocketmq_runtime::signal::{ProcessSignal, ProcessSignalListener};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async {
/// let mut signals = ProcessSignalListener::new()?;
/// # if false {
/// while let Some(signal) = signals.recv().await {
///     match signal {
///         ProcessSignal::User1 => eprintln!("diagnostics: ..."),
///         signal if signal.is_termination() => break, // shut down
///         other => tracing::info!("{other} ignored"),
///     }
/// }
/// # }
/// # Ok::<(), rocketmq_runtime::RuntimeError>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct ProcessSignalListener {
    inner: SignalListener,
}

impl ProcessSignalListener {
    /// Installs the listeners of every [`ProcessSignal`].
    ///
    /// # Errors
    ///
    /// `context_unavailable(WaitForSignal)` outside a Tokio runtime;
    /// `io(RegisterSigtermHandler / RegisterSigintHandler)` when the
    /// SIGTERM or SIGINT handler cannot be installed, `io(WaitForSignal)`
    /// for another signal's handler.
    pub fn new() -> RuntimeResult<Self> {
        Ok(Self {
            inner: SignalListener::with_user_signals(true)?,
        })
    }

    /// The next signal; `None` once the runtime's signal driver is gone.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a signal not returned stays with the listener.
    pub async fn recv(&mut self) -> Option<ProcessSignal> {
        self.inner.recv().await
    }
}

/// Installed listeners: the termination signals, and SIGUSR1/SIGUSR2 when
/// asked for.
#[derive(Debug)]
pub(crate) struct SignalListener {
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    hangup: tokio::signal::unix::Signal,
    #[cfg(unix)]
    user: Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>,
}

impl SignalListener {
    /// Installs the termination listeners (SIGTERM, SIGINT, SIGHUP).
    ///
    /// # Errors
    ///
    /// As [`ProcessSignalListener::new`].
    pub(crate) fn new() -> RuntimeResult<Self> {
        Self::with_user_signals(false)
    }

    fn with_user_signals(user: bool) -> RuntimeResult<Self> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(RuntimeError::context_unavailable(
                RuntimeOperation::WaitForSignal,
            ));
        }
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let install = |kind: SignalKind, operation: RuntimeOperation| {
                signal(kind).map_err(|error| RuntimeError::io(operation, error))
            };
            let user = if user {
                Some((
                    install(SignalKind::user_defined1(), RuntimeOperation::WaitForSignal)?,
                    install(SignalKind::user_defined2(), RuntimeOperation::WaitForSignal)?,
                ))
            } else {
                None
            };
            Ok(Self {
                terminate: install(
                    SignalKind::terminate(),
                    RuntimeOperation::RegisterSigtermHandler,
                )?,
                interrupt: install(
                    SignalKind::interrupt(),
                    RuntimeOperation::RegisterSigintHandler,
                )?,
                hangup: install(SignalKind::hangup(), RuntimeOperation::WaitForSignal)?,
                user,
            })
        }
        #[cfg(not(unix))]
        {
            let _ = user;
            Ok(Self {})
        }
    }

    /// The next signal; `None` once the signal driver is gone (no signal
    /// can arrive any more).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a signal not returned stays with the listener.
    pub(crate) async fn recv(&mut self) -> Option<ProcessSignal> {
        #[cfg(unix)]
        {
            let user = async {
                match &mut self.user {
                    Some((first, second)) => tokio::select! {
                        Some(()) = first.recv() => Some(ProcessSignal::User1),
                        Some(()) = second.recv() => Some(ProcessSignal::User2),
                        else => None,
                    },
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                Some(()) = self.terminate.recv() => Some(ProcessSignal::Terminate),
                Some(()) = self.interrupt.recv() => Some(ProcessSignal::Interrupt),
                Some(()) = self.hangup.recv() => Some(ProcessSignal::Hangup),
                Some(signal) = user => Some(signal),
                else => None,
            }
        }
        #[cfg(not(unix))]
        {
            tokio::signal::ctrl_c()
                .await
                .ok()
                .map(|()| ProcessSignal::Interrupt)
        }
    }
}
