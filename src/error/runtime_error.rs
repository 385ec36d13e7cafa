//! The operational error type.

use std::backtrace::{Backtrace, BacktraceStatus};
use std::error::Error;
use std::fmt;
use std::io;
use std::panic::Location;

use super::context::RuntimeErrorContext;
use super::kind::{CanonicalCondition, RuntimeErrorKind};
use super::operation::RuntimeOperation;
use super::view::{RuntimeErrorDescriptor, RuntimeErrorDiagnosticView, RuntimeErrorPublicView};
use crate::loom::Arc;

/// The result of a runtime operation that can fail at run time.
pub type RuntimeResult<T> = Result<T, RuntimeError>;

type SharedSource = Arc<dyn Error + Send + Sync + 'static>;

/// An operational failure: a well-formed request that could not be carried
/// out now.
///
/// Branch on [`kind`](Self::kind). The [`operation`](Self::operation) label,
/// [`code`](Self::code), [`condition`](Self::condition) and
/// [`location`](Self::location) are for logs, metrics and alerting.
///
/// * `Display` is a fixed catalog message naming the kind and the operation
///   label, followed, for a refused admission, by the scope and lane that
///   refused it (`runtime scope is closed during blocking-queue-admission
///   (Closed): scope broker/writer, lane storage-io`): names the program
///   chose. It never includes the text of the underlying cause or a value
///   a caller supplied.
/// * `Debug` shows the code, condition, kind, operation, component and
///   whether a source exists, again without the source text.
/// * [`Error::source`] returns the underlying cause, if any.
/// * [`context`](Self::context) returns the typed detail some errors carry
///   (a refused environment value, an address); the `Display` of the
///   context is the line to show an operator.
/// * [`public_view`](Self::public_view) is what may go back to a remote
///   client, [`diagnostic_view`](Self::diagnostic_view) what goes to logs.
///
/// The error is cheap to clone: the source, the context and the backtrace
/// are shared.
#[derive(Clone)]
pub struct RuntimeError {
    kind: RuntimeErrorKind,
    operation: RuntimeOperation,
    source: Option<SharedSource>,
    location: &'static Location<'static>,
    /// The rarely present parts, behind one pointer.
    extra: Option<Arc<Extra>>,
}

/// A typed context and a captured backtrace.
#[derive(Debug, Default)]
struct Extra {
    context: Option<RuntimeErrorContext>,
    backtrace: Option<Backtrace>,
}

impl RuntimeError {
    #[track_caller]
    fn new(
        kind: RuntimeErrorKind,
        operation: RuntimeOperation,
        source: Option<SharedSource>,
    ) -> Self {
        // Captured only when `RUST_LIB_BACKTRACE` / `RUST_BACKTRACE` ask for
        // it (std caches that decision; otherwise this is one atomic read).
        let backtrace = Backtrace::capture();
        let extra = (backtrace.status() == BacktraceStatus::Captured).then(|| {
            Arc::new(Extra {
                context: None,
                backtrace: Some(backtrace),
            })
        });
        Self {
            kind,
            operation,
            source,
            location: Location::caller(),
            extra,
        }
    }

    /// Attaches a typed context (crate: at the place that knows it).
    #[must_use]
    pub(crate) fn with_context(mut self, context: RuntimeErrorContext) -> Self {
        let backtrace = self
            .extra
            .take()
            .and_then(|extra| Arc::try_unwrap(extra).ok())
            .and_then(|extra| extra.backtrace);
        self.extra = Some(Arc::new(Extra {
            context: Some(context),
            backtrace,
        }));
        self
    }

    /// Configuration loaded or applied at run time could not be used.
    #[track_caller]
    pub fn configuration(operation: RuntimeOperation) -> Self {
        Self::new(RuntimeErrorKind::Configuration, operation, None)
    }

    /// Configuration could not be used because of `source` (for example a
    /// parse error).
    #[track_caller]
    pub fn configuration_failure(
        operation: RuntimeOperation,
        source: impl Error + Send + Sync + 'static,
    ) -> Self {
        Self::new(
            RuntimeErrorKind::Configuration,
            operation,
            Some(Arc::new(source)),
        )
    }

    /// Building a runtime resource (typically the Tokio runtime) failed with
    /// an I/O error. The kind is [`RuntimeErrorKind::Io`].
    #[track_caller]
    pub fn build(operation: RuntimeOperation, source: io::Error) -> Self {
        Self::io(operation, source)
    }

    /// An operating-system I/O call failed.
    #[track_caller]
    pub fn io(operation: RuntimeOperation, source: io::Error) -> Self {
        Self::new(RuntimeErrorKind::Io, operation, Some(Arc::new(source)))
    }

    /// The runtime context the operation needs is unavailable.
    #[track_caller]
    pub fn context_unavailable(operation: RuntimeOperation) -> Self {
        Self::new(RuntimeErrorKind::ContextUnavailable, operation, None)
    }

    /// The owning scope no longer admits work.
    #[track_caller]
    pub fn closed(operation: RuntimeOperation) -> Self {
        Self::new(RuntimeErrorKind::Closed, operation, None)
    }

    /// A bounded capacity is exhausted.
    #[track_caller]
    pub fn capacity(operation: RuntimeOperation) -> Self {
        Self::new(RuntimeErrorKind::CapacityExhausted, operation, None)
    }

    /// A deadline or timeout expired.
    #[track_caller]
    pub fn timed_out(operation: RuntimeOperation) -> Self {
        Self::new(RuntimeErrorKind::TimedOut, operation, None)
    }

    /// The operation is not supported in the calling context.
    #[track_caller]
    pub fn unsupported(operation: RuntimeOperation) -> Self {
        Self::new(RuntimeErrorKind::Unsupported, operation, None)
    }

    /// A task panicked or was cancelled; the kind is
    /// [`RuntimeErrorKind::Internal`] and the join error is the source.
    #[track_caller]
    pub fn join(operation: RuntimeOperation, source: tokio::task::JoinError) -> Self {
        Self::new(
            RuntimeErrorKind::Internal,
            operation,
            Some(Arc::new(source)),
        )
    }

    /// An internal failure caused by `source`.
    #[track_caller]
    pub fn internal(
        operation: RuntimeOperation,
        source: impl Error + Send + Sync + 'static,
    ) -> Self {
        Self::new(
            RuntimeErrorKind::Internal,
            operation,
            Some(Arc::new(source)),
        )
    }

    /// An internal failure without an underlying cause.
    #[track_caller]
    pub fn internal_failure(operation: RuntimeOperation) -> Self {
        Self::new(RuntimeErrorKind::Internal, operation, None)
    }

    /// The owning scope was poisoned by a critical failure.
    #[track_caller]
    pub(crate) fn poisoned(operation: RuntimeOperation) -> Self {
        Self::new(RuntimeErrorKind::Poisoned, operation, None)
    }

    /// Re-labels `cause` with the enclosing `operation`, keeping the cause's
    /// kind (so callers still branch correctly) and the cause as the source.
    #[track_caller]
    pub(crate) fn within(operation: RuntimeOperation, cause: RuntimeError) -> Self {
        Self::new(cause.kind, operation, Some(Arc::new(cause)))
    }

    /// What went wrong; branch on this.
    pub const fn kind(&self) -> RuntimeErrorKind {
        self.kind
    }

    /// What the runtime was doing.
    pub const fn operation(&self) -> RuntimeOperation {
        self.operation
    }

    /// The stable dotted catalog code, e.g. `runtime.capacity.exhausted`.
    pub fn code(&self) -> &'static str {
        self.kind.code()
    }

    /// The canonical condition of the error's kind.
    pub fn condition(&self) -> CanonicalCondition {
        self.kind.condition()
    }

    /// `"task"` for task-group and spawn operations, `"runtime"` otherwise.
    pub fn component(&self) -> &'static str {
        self.operation.component()
    }

    /// Where in the source the error was created.
    pub fn location(&self) -> &'static Location<'static> {
        self.location
    }

    /// A short, fixed text telling an operator what to do.
    pub fn recovery_hint(&self) -> &'static str {
        self.kind.recovery_hint()
    }

    /// The catalog entry: code, condition, component and recovery hint.
    pub const fn descriptor(&self) -> RuntimeErrorDescriptor {
        RuntimeErrorDescriptor::new(self.kind, self.operation)
    }

    /// The typed detail, where the error carries one: for example the
    /// variable, value and rule of a refused environment value.
    pub fn context(&self) -> Option<&RuntimeErrorContext> {
        self.extra
            .as_deref()
            .and_then(|extra| extra.context.as_ref())
    }

    /// The backtrace captured where the error was created, when
    /// `RUST_LIB_BACKTRACE` (or, if it is unset, `RUST_BACKTRACE`) enables
    /// capture, as [`Backtrace::capture`] decides. Capturing costs a stack
    /// walk per error: `RUST_LIB_BACKTRACE=0` keeps panic backtraces while
    /// errors capture none.
    pub fn backtrace(&self) -> Option<&Backtrace> {
        self.extra
            .as_deref()
            .and_then(|extra| extra.backtrace.as_ref())
    }

    /// The view safe to return to a remote client: code, condition and the
    /// catalog message, nothing else.
    pub const fn public_view(&self) -> RuntimeErrorPublicView {
        RuntimeErrorPublicView {
            code: self.kind.code(),
            condition: self.kind.condition(),
            message: self.kind.message(),
        }
    }

    /// The view for logs: the public fields plus kind, operation,
    /// component, source location, context and the source chain's
    /// messages.
    pub fn diagnostic_view(&self) -> RuntimeErrorDiagnosticView {
        let mut sources = Vec::new();
        let mut next = self.source();
        while let Some(source) = next {
            sources.push(source.to_string());
            next = source.source();
        }
        RuntimeErrorDiagnosticView {
            code: self.kind.code(),
            condition: self.kind.condition(),
            message: self.kind.message(),
            kind: self.kind,
            operation: self.operation.label(),
            component: self.component(),
            location: self.location.to_string(),
            context: self.context().cloned(),
            sources,
        }
    }
}

impl fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} during {} ({})",
            self.kind.message(),
            self.operation,
            self.kind
        )?;
        match self.context() {
            Some(
                scope @ (RuntimeErrorContext::Scope { .. }
                | RuntimeErrorContext::LaneFull { .. }
                | RuntimeErrorContext::FeatureDisabled { .. }
                | RuntimeErrorContext::Setting(_)
                | RuntimeErrorContext::Remedy(_)),
            ) => write!(f, ": {scope}"),
            _ => Ok(()),
        }
    }
}

/// `{:?}` names the error without its causes' text (`has_source` only: a
/// cause may carry a path or a peer's data, and `Debug` output travels
/// into responses and panics). `{:#?}`, for a person at a terminal, adds
/// `sources`: each cause's message, outermost first.
impl fmt::Debug for RuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let alternate = f.alternate();
        let mut debug = f.debug_struct("RuntimeError");
        debug
            .field("code", &self.code())
            .field("condition", &self.condition())
            .field("kind", &self.kind)
            .field("operation", &self.operation.label())
            .field("component", &self.component())
            .field("has_source", &self.source.is_some());
        if let Some(context) = self.context() {
            debug.field("context", context);
        }
        if alternate && self.source.is_some() {
            let mut chain = Vec::new();
            let mut next = Error::source(self);
            while let Some(cause) = next {
                chain.push(cause.to_string());
                next = cause.source();
            }
            debug.field("sources", &chain);
        }
        debug.finish()
    }
}

impl Error for RuntimeError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.source
            .as_deref()
            .map(|source| source as &(dyn Error + 'static))
    }
}

impl From<io::Error> for RuntimeError {
    /// An I/O failure labelled [`RuntimeOperation::ReadFile`].
    #[track_caller]
    fn from(source: io::Error) -> Self {
        Self::io(RuntimeOperation::ReadFile, source)
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
