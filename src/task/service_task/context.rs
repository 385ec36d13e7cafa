//! [`ServiceTask`], the loop a [`ServiceManager`](crate::task::ServiceManager)(super::ServiceManager)
//! runs, and [`ServiceTaskContext`], what the loop sees of its run: its
//! stop request and its wakeups.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::state::StateWord;
use crate::loom::{Arc, AtomicBool, Ordering};

/// A service loop: `run` repeats its work until
/// [`ServiceTaskContext::is_stopped`], parking in
/// [`ServiceTaskContext::wait_for_running`] between rounds.
///
/// ```
/// use std::time::Duration;
/// use rocketmq_runtime::task::{ServiceTask, ServiceTaskContext};
///
/// struct FlushService;
///
/// impl ServiceTask for FlushService {
///     fn get_service_name(&self) -> String {
///         "flush-service".to_owned()
///     }
///
///     async fn run(&self, context: &ServiceTaskContext) {
///         while !context.is_stopped() {
///             context.wait_for_running(Duration::from_millis(500)).await;
///             // flush what was committed since the last round
///         }
///     }
/// }
/// ```
pub trait ServiceTask: Sync + Send {
    /// The service's name; its task is named after it.
    fn get_service_name(&self) -> String;

    /// The service loop; it should return soon after
    /// [`ServiceTaskContext::is_stopped`] turns true.
    fn run(&self, context: &ServiceTaskContext) -> impl Future<Output = ()> + Send;

    /// Called at the end of every
    /// [`wait_for_running`](ServiceTaskContext::wait_for_running) of a run
    /// started by a [`ServiceManager`](crate::task::ServiceManager) (default: nothing).
    fn on_wait_end(&self) -> impl Future<Output = ()> + Send {
        std::future::ready(())
    }
}

pub(super) type WaitEndHook = Arc<dyn Fn() -> BoxFuture<'static, ()> + Send + Sync>;

/// The run a context belongs to.
pub(super) struct RunLink {
    pub(super) state: Arc<StateWord>,
    pub(super) generation: u64,
    pub(super) cancelled: CancellationToken,
    pub(super) on_wait_end: WaitEndHook,
}

pub(super) struct ContextInner {
    pub(super) stopped: AtomicBool,
    pub(super) notified: AtomicBool,
    pub(super) wake: Notify,
    pub(super) run: Option<RunLink>,
}

/// What a [`ServiceTask`]'s loop sees: its stop request and its wakeups.
///
/// A context made by a [`ServiceManager`](crate::task::ServiceManager) is also stopped when its group is
/// cancelled or when a newer run replaced this one.
pub struct ServiceTaskContext {
    pub(super) inner: Arc<ContextInner>,
}

impl Default for ServiceTaskContext {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for ServiceTaskContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServiceTaskContext")
            .field("stopped", &self.is_stopped())
            .field(
                "wakeup_pending",
                &self.inner.notified.load(Ordering::Acquire),
            )
            .finish_non_exhaustive()
    }
}

impl ServiceTaskContext {
    /// A standalone context (not stopped, no pending wakeup).
    pub fn new() -> Self {
        Self::with_run(None)
    }

    pub(super) fn with_run(run: Option<RunLink>) -> Self {
        Self {
            inner: Arc::new(ContextInner {
                stopped: AtomicBool::new(false),
                notified: AtomicBool::new(false),
                wake: Notify::new(),
                run,
            }),
        }
    }

    pub(super) fn share(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }

    /// Whether the loop should return: a stop was requested, the run's
    /// group was cancelled, or a newer run replaced this one.
    pub fn is_stopped(&self) -> bool {
        self.inner.stopped.load(Ordering::Acquire)
            || self.inner.run.as_ref().is_some_and(|run| {
                run.cancelled.is_cancelled() || run.state.is_stopped(run.generation)
            })
    }

    /// Parks the loop for up to `interval`: returns at once if a wakeup is
    /// pending (consuming it), otherwise at the first of a
    /// [`wakeup`](Self::wakeup), a stop request, the group's cancellation
    /// or `interval`. Then runs the task's
    /// [`on_wait_end`](ServiceTask::on_wait_end). Always returns true.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe while parked: dropping the future consumes no wakeup.
    /// Dropped during `on_wait_end`, the wakeup it returned for is consumed
    /// and the hook is cut short.
    pub async fn wait_for_running(&self, interval: Duration) -> bool {
        let inner = &self.inner;
        let woken = inner.wake.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        if !inner.notified.swap(false, Ordering::AcqRel) && !self.is_stopped() {
            let cancelled = async {
                match &inner.run {
                    Some(run) => run.cancelled.cancelled().await,
                    None => std::future::pending().await,
                }
            };
            let by_wakeup = tokio::select! {
                biased;
                () = &mut woken => true,
                () = tokio::time::sleep(interval) => false,
                () = cancelled => false,
            };
            // Only the wake-up this wait consumed is cleared: one that
            // arrives after the interval or the stop stays pending, so the
            // next wait returns at once.
            if by_wakeup {
                inner.notified.store(false, Ordering::Release);
            }
        }
        if let Some(run) = &inner.run {
            (run.on_wait_end)().await;
        }
        true
    }

    /// Wakes a parked [`wait_for_running`](Self::wait_for_running), or makes
    /// the next one return at once.
    pub fn wakeup(&self) {
        self.inner.notified.store(true, Ordering::Release);
        self.inner.wake.notify_waiters();
    }

    /// Requests the loop to stop and wakes it.
    pub(super) fn stop(&self) {
        self.inner.stopped.store(true, Ordering::Release);
        self.wakeup();
    }
}
