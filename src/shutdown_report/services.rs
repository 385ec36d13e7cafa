//! The evidence of supervised services (`TaskGroup::spawn_supervised_service`):
//! per service name, how often it ran, failed and was restarted, how its
//! last run failed, and whether it gave up or is stalled.
//!
//! Invariants:
//!
//! 1. A service's evidence is kept by its ownership tree from its spawn to
//!    the tree's end: a group that is dropped, cancelled or shut down does
//!    not take it along. A report carries the services of its subtree.
//! 2. Messages are bounded: at most [`SupervisedServiceReport::MESSAGE_LIMIT_BYTES`]
//!    bytes of the escaped text (`escape_debug`: control characters and
//!    quotes cannot forge lines or fields), cut at a character boundary
//!    and marked with `…` when cut.
//! 3. At most [`SupervisedServiceReport::LIMIT`] services are listed per
//!    report; the rest are counted in `services_omitted`.
//! 4. A service that gave up makes its report unhealthy; restarts that
//!    recovered do not (they are evidence, not a failure).

use serde::Serialize;

use crate::task_identity::TaskName;

/// How a supervised service's run failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ServiceFailureKind {
    /// The run panicked.
    Panic,
    /// The run returned an error.
    Error,
    /// The run recorded no progress within its progress deadline.
    Stall,
}

impl ServiceFailureKind {
    /// The lowercase label (`panic`, `error`, `stall`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Panic => "panic",
            Self::Error => "error",
            Self::Stall => "stall",
        }
    }
}

impl std::fmt::Display for ServiceFailureKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a supervised service did, by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct SupervisedServiceReport {
    /// The service's name.
    pub name: TaskName,
    /// The name of the group it runs in.
    pub group: String,
    /// Runs started: the first one and every restart.
    pub runs: u64,
    /// Runs started after a failure.
    pub restarts: u64,
    /// Runs that failed (panicked, returned an error or stalled).
    pub failures: u64,
    /// How the last failed run failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<ServiceFailureKind>,
    /// The last failure's panic message or error, bounded and escaped (see
    /// the module docs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_message: Option<String>,
    /// It stopped restarting: its policy does not restart that failure, or
    /// it failed more often than its policy allows within the window.
    pub gave_up: bool,
    /// A run is past its progress deadline right now.
    pub stalled: bool,
    /// A run is in progress.
    pub running: bool,
}

impl SupervisedServiceReport {
    /// Services listed per report; the rest are counted in
    /// `services_omitted`.
    pub const LIMIT: usize = 64;
    /// Bytes of a failure's message kept (escaped), before the `…` mark.
    pub const MESSAGE_LIMIT_BYTES: usize = 256;

    /// An entry for a service that has not run yet.
    pub(crate) fn new(name: TaskName, group: String) -> Self {
        Self {
            name,
            group,
            runs: 0,
            restarts: 0,
            failures: 0,
            last_failure: None,
            last_message: None,
            gave_up: false,
            stalled: false,
            running: false,
        }
    }

    /// Healthy unless it gave up (module invariant 4).
    pub fn is_healthy(&self) -> bool {
        !self.gave_up
    }
}

/// `text` escaped and cut to [`SupervisedServiceReport::MESSAGE_LIMIT_BYTES`]
/// bytes (module invariant 2).
pub(crate) fn bounded_message(text: &str) -> String {
    crate::error::cut(
        text.escape_debug(),
        usize::MAX,
        SupervisedServiceReport::MESSAGE_LIMIT_BYTES,
    )
}

/// The text of a panic's payload: `&str` or `String`, as `panic!` makes
/// them.
pub(crate) fn payload_text(payload: &(dyn std::any::Any + Send)) -> Option<&str> {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
}

/// The message of a panic's payload, bounded; a payload of another type
/// says so.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload_text(payload).map_or_else(
        || String::from("(a panic payload that is not a string)"),
        bounded_message,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_escaped_and_cut_at_a_character_boundary() {
        assert_eq!(bounded_message("a\nb\"c"), "a\\nb\\\"c");
        let long = "é".repeat(300);
        let cut = bounded_message(&long);
        assert!(cut.ends_with('…'));
        let kept = cut.trim_end_matches('…');
        assert!(kept.len() <= SupervisedServiceReport::MESSAGE_LIMIT_BYTES);
        assert!(kept.len() > SupervisedServiceReport::MESSAGE_LIMIT_BYTES - 2);
        assert!(kept.chars().all(|c| c == 'é'));
    }

    #[test]
    fn panic_payloads_of_both_string_types_and_others() {
        let static_str: Box<dyn std::any::Any + Send> = Box::new("boom");
        let owned: Box<dyn std::any::Any + Send> = Box::new(String::from("bang\r\n"));
        let other: Box<dyn std::any::Any + Send> = Box::new(7_u32);
        assert_eq!(panic_message(static_str.as_ref()), "boom");
        assert_eq!(panic_message(owned.as_ref()), "bang\\r\\n");
        assert!(panic_message(other.as_ref()).contains("not a string"));
    }
}
