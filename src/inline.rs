//! The 16 KiB rule: a future larger than [`INLINE_FUTURE_LIMIT`] is boxed
//! before any wrapper is put around it, at every submission boundary (task,
//! cancellable service, critical task, operation, scheduled factory and
//! run), so lifecycle wrappers never copy a large state machine around the
//! submitting thread's stack.

/// Futures larger than this are boxed before they are wrapped and spawned.
pub(crate) const INLINE_FUTURE_LIMIT: usize = 16 * 1024;

/// Boxes `future` when it is larger than [`INLINE_FUTURE_LIMIT`] and passes
/// the (possibly boxed) future to `then`.
macro_rules! with_inline_limit {
    ($future:expr, |$f:ident| $then:expr) => {{
        let future = $future;
        if std::mem::size_of_val(&future) > $crate::inline::INLINE_FUTURE_LIMIT {
            let $f = Box::pin(future);
            $then
        } else {
            let $f = future;
            $then
        }
    }};
}
pub(crate) use with_inline_limit;
