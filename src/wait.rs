//! Waiting on a `Notify` without missing a notification, optionally until a
//! deadline: the one loop every waiter of the crate uses.
//!
//! The protocol, stated once:
//!
//! 1. create the `Notified` future(s) and **enable** them, so a
//!    `notify_waiters` from now on is kept;
//! 2. **check** the condition: done means return;
//! 3. otherwise wait for a notification (or the deadline) and go to 1.
//!
//! A notifier changes the state first and notifies second, so a change
//! either happened before the check (seen there) or after the enabling
//! (its notification is kept): never lost between the two. Waiters that
//! notifiers only notify while someone watches hold a [`Watch`] on the
//! notifier's watcher count.

use tokio::runtime::Handle;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::loom::{AtomicUsize, Ordering};
use crate::shutdown_deadline::ShutdownDeadline;

/// A wait's deadline and, when the wait may be polled outside any runtime
/// (a future driven by another executor), the runtime whose timer serves it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Expiry<'a> {
    pub(crate) deadline: ShutdownDeadline,
    pub(crate) runtime: Option<&'a Handle>,
}

/// Waits until `check` returns `Some`, re-checking after every
/// notification of `notify` (and of `also`, when given); `None` once the
/// expiry's deadline passes first. See the module docs for the protocol.
pub(crate) async fn wait_for<T>(
    notify: &Notify,
    also: Option<&Notify>,
    expiry: Option<Expiry<'_>>,
    mut check: impl FnMut() -> Option<T>,
) -> Option<T> {
    let Some(expiry) = expiry else {
        return Some(notified_by(notify, also, check).await);
    };
    if let Some(value) = check() {
        return Some(value);
    }
    if expiry.deadline.is_expired() {
        return None;
    }
    // The waiter is polled first: a notification that arrives with the
    // deadline is re-checked before the timer can end the wait.
    let timer = sleep_until_on(expiry.deadline.tokio_instant(), expiry.runtime);
    tokio::select! {
        biased;
        value = notified_by(notify, also, &mut check) => Some(value),
        () = timer => None,
    }
}

/// [`wait_for`] without a deadline: waits until `check` returns `Some`.
pub(crate) async fn notified<T>(notify: &Notify, check: impl FnMut() -> Option<T>) -> T {
    notified_by(notify, None, check).await
}

/// [`notified`], woken by either of two notifiers.
pub(crate) async fn notified_by_either<T>(
    first: &Notify,
    second: &Notify,
    check: impl FnMut() -> Option<T>,
) -> T {
    notified_by(first, Some(second), check).await
}

async fn notified_by<T>(
    notify: &Notify,
    also: Option<&Notify>,
    mut check: impl FnMut() -> Option<T>,
) -> T {
    // The same protocol as `wait_for`, without a timer in the future's
    // state: a plain wait (a parked queue consumer) stays small.
    loop {
        let first = notify.notified();
        let second = also.map(Notify::notified);
        tokio::pin!(first, second);
        first.as_mut().enable();
        if let Some(second) = second.as_mut().as_pin_mut() {
            second.enable();
        }
        if let Some(value) = check() {
            return value;
        }
        match second.as_pin_mut() {
            None => first.await,
            Some(second) => {
                tokio::select! {
                    biased;
                    () = first => {}
                    () = second => {}
                }
            }
        }
    }
}

/// [`wait_for`] with a deadline over a boolean condition: true once `done`
/// holds, false when `deadline` passes first. The timer runs on the
/// caller's runtime or, polled outside any, on `runtime`.
pub(crate) async fn notified_until(
    notify: &Notify,
    deadline: ShutdownDeadline,
    runtime: Option<&Handle>,
    mut done: impl FnMut() -> bool,
) -> bool {
    let expiry = Expiry { deadline, runtime };
    wait_for(notify, None, Some(expiry), || done().then_some(()))
        .await
        .is_some()
}

/// `tokio::time::sleep_until` on the caller's runtime, or, when the caller
/// has none (a future polled by another executor), on `runtime`.
pub(crate) fn sleep_until_on(deadline: Instant, runtime: Option<&Handle>) -> tokio::time::Sleep {
    let _entered = match Handle::try_current() {
        Ok(_) => None,
        Err(_) => runtime.map(Handle::enter),
    };
    tokio::time::sleep_until(deadline)
}

/// Registers interest in a notification for as long as it lives: a
/// notifier that only notifies while its watcher count is non-zero sees
/// this waiter.
pub(crate) struct Watch<'a>(&'a AtomicUsize);

impl<'a> Watch<'a> {
    pub(crate) fn new(counter: &'a AtomicUsize) -> Self {
        counter.fetch_add(1, Ordering::SeqCst);
        Self(counter)
    }
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}
