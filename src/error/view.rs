//! What an error says about itself: its catalog entry and two serializable
//! views, one safe for a remote client and one for operators' logs.

use serde::Serialize;

use super::context::RuntimeErrorContext;
use super::kind::{CanonicalCondition, RuntimeErrorKind};
use super::operation::RuntimeOperation;

/// The catalog entry of an error: everything fixed by its kind and
/// operation, all `'static` (from [`RuntimeError::descriptor`](crate::RuntimeError::descriptor)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct RuntimeErrorDescriptor {
    code: &'static str,
    condition: CanonicalCondition,
    component: &'static str,
    recovery_hint: &'static str,
}

impl RuntimeErrorDescriptor {
    pub(crate) const fn new(kind: RuntimeErrorKind, operation: RuntimeOperation) -> Self {
        Self {
            code: kind.code(),
            condition: kind.condition(),
            component: operation.component(),
            recovery_hint: kind.recovery_hint(),
        }
    }

    /// The stable dotted code, e.g. `runtime.capacity.exhausted`.
    pub const fn code(&self) -> &'static str {
        self.code
    }

    /// The canonical condition.
    pub const fn condition(&self) -> CanonicalCondition {
        self.condition
    }

    /// `"task"` or `"runtime"`.
    pub const fn component(&self) -> &'static str {
        self.component
    }

    /// A short, fixed text telling an operator what to do.
    pub const fn recovery_hint(&self) -> &'static str {
        self.recovery_hint
    }
}

/// What may be returned to a remote client
/// ([`RuntimeError::public_view`](crate::RuntimeError::public_view)): the
/// code, the condition and the catalog message. It names no operation, no
/// source location, no cause and no configuration.
///
/// ```text
/// {"code":"runtime.capacity.exhausted","condition":"resource_exhausted","message":"runtime capacity exhausted"}
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct RuntimeErrorPublicView {
    /// The stable dotted code.
    pub code: &'static str,
    /// The canonical condition.
    pub condition: CanonicalCondition,
    /// The fixed catalog message of the error's kind.
    pub message: &'static str,
}

/// Everything an operator needs in a log line
/// ([`RuntimeError::diagnostic_view`](crate::RuntimeError::diagnostic_view)):
/// the public fields, the kind, the operation, the component, the source
/// location, the typed context when there is one, and the messages of the
/// source chain (outermost first). Keep it out of responses to remote
/// clients: the sources and the context may name paths, addresses and
/// configuration values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuntimeErrorDiagnosticView {
    /// The stable dotted code.
    pub code: &'static str,
    /// The canonical condition.
    pub condition: CanonicalCondition,
    /// The fixed catalog message of the error's kind.
    pub message: &'static str,
    /// The kind to branch on.
    pub kind: RuntimeErrorKind,
    /// What the runtime was doing (its label).
    pub operation: &'static str,
    /// `"task"` or `"runtime"`.
    pub component: &'static str,
    /// Where the error was created, as `file:line:column`.
    pub location: String,
    /// The typed detail, when the error carries one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<RuntimeErrorContext>,
    /// The `Display` text of each error in the source chain.
    pub sources: Vec<String>,
}
