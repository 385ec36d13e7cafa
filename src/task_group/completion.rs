//! Settlement: destroy the future, account the result, publish completion.
//!
//! Every tracked future runs inside [`Tracked`]. Whatever ends the task
//! (return, panic, abort, runtime teardown), the same order holds:
//!
//! 1. the user future is destroyed (`Pin::set(None)`, panics caught);
//! 2. the result is counted and the record removed, under the spawn gate;
//! 3. waiters (shutdown, `wait_task`) are notified.
//!
//! So a task whose destructor is still running is still registered, and a
//! counter is never published before the future it describes is gone.

use std::future::Future;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tokio_util::sync::WaitForCancellationFutureOwned;

use crate::loom::Arc;
use crate::task_group::identity::TaskResult;
use crate::task_group::GroupInner;

/// The settlement ticket of one registered task.
#[derive(Debug)]
pub(crate) struct Settlement {
    pub(crate) group: Arc<GroupInner>,
    pub(crate) slot: u32,
    pub(crate) seq: u64,
}

impl Settlement {
    fn finish(self, result: TaskResult) {
        self.group.settle(self.slot, self.seq, result);
    }
}

pin_project! {
    /// A tracked task: the user future plus its settlement ticket.
    pub(crate) struct Tracked<F> {
        #[pin]
        future: Option<F>,
        settlement: Option<Settlement>,
    }

    impl<F> PinnedDrop for Tracked<F> {
        fn drop(this: Pin<&mut Self>) {
            let mut this = this.project();
            if let Some(settlement) = this.settlement.take() {
                // Dropped before completing: aborted, or the runtime shut down.
                let destroyed = catch_unwind(AssertUnwindSafe(|| this.future.set(None)));
                settlement.finish(match destroyed {
                    Ok(()) => TaskResult::Aborted,
                    Err(_) => TaskResult::Panicked,
                });
            }
        }
    }
}

impl<F> Tracked<F> {
    pub(crate) fn new(future: F, settlement: Settlement) -> Self {
        Self {
            future: Some(future),
            settlement: Some(settlement),
        }
    }
}

impl<F> Future for Tracked<F>
where
    F: Future<Output = TaskResult>,
{
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut this = self.project();
        let Some(future) = this.future.as_mut().as_pin_mut() else {
            return Poll::Ready(());
        };
        let polled = catch_unwind(AssertUnwindSafe(|| future.poll(cx)));
        let (result, payload) = match polled {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(result)) => (result, None),
            Err(payload) => (TaskResult::Panicked, Some(payload)),
        };
        let destroyed = catch_unwind(AssertUnwindSafe(|| this.future.set(None)));
        let result = if destroyed.is_err() {
            TaskResult::Panicked
        } else {
            result
        };
        if let Some(settlement) = this.settlement.take() {
            settlement.finish(result);
        }
        if let Some(payload) = payload {
            // Settled; let Tokio record the panic for a join handle.
            resume_unwind(payload);
        }
        Poll::Ready(())
    }
}

pin_project! {
    /// A plain task: completion is `Completed`.
    pub(crate) struct Plain<F> {
        #[pin]
        future: F,
    }
}

impl<F> Plain<F> {
    pub(crate) fn new(future: F) -> Self {
        Self { future }
    }
}

impl<F: Future<Output = ()>> Future for Plain<F> {
    type Output = TaskResult;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<TaskResult> {
        self.project()
            .future
            .poll(cx)
            .map(|()| TaskResult::Completed)
    }
}

pin_project! {
    /// A service dropped when its owner is cancelled (owner branch first).
    pub(crate) struct UntilCancelled<F> {
        #[pin]
        cancelled: WaitForCancellationFutureOwned,
        #[pin]
        future: F,
    }
}

impl<F> UntilCancelled<F> {
    pub(crate) fn new(cancelled: WaitForCancellationFutureOwned, future: F) -> Self {
        Self { cancelled, future }
    }
}

impl<F: Future<Output = ()>> Future for UntilCancelled<F> {
    type Output = TaskResult;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<TaskResult> {
        let this = self.project();
        if this.cancelled.poll(cx).is_ready() {
            return Poll::Ready(TaskResult::Cancelled);
        }
        this.future.poll(cx).map(|()| TaskResult::Completed)
    }
}
