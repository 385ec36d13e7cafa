//! Typed detail an operational error may carry: what exactly was refused.

use std::fmt;
use std::net::SocketAddr;

use serde::Serialize;

use super::contract::RuntimeContractPolicy;

/// Longest rejected value an [`EnvironmentViolation`] keeps, in characters
/// of its escaped form; a longer value is cut and ends with `…`.
const MAX_VALUE_CHARS: usize = 64;

/// The typed detail of a [`RuntimeError`](crate::RuntimeError), from
/// [`RuntimeError::context`](crate::RuntimeError::context).
///
/// It is operator-facing: it names configuration a caller supplied (a
/// variable and its value, an address), so it appears in
/// [`diagnostic_view`](crate::RuntimeError::diagnostic_view) and never in
/// [`public_view`](crate::RuntimeError::public_view). The enum is
/// non-exhaustive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RuntimeErrorContext {
    /// An environment variable the runtime reads had a value it refuses.
    Environment(EnvironmentViolation),
    /// The socket address an operation tried to bind.
    Address(SocketAddr),
    /// A bounded store was full: what it is and its capacity.
    Capacity {
        /// What is full (`metadata target registry`, ...).
        limit: &'static str,
        /// How many entries it holds at most.
        capacity: usize,
    },
    /// The scope that refused an admission (a task, a child, blocking
    /// work): its path of group names from the owner's root, and the
    /// blocking lane when the refusal was a lane's. Names the program
    /// chose, so the error's `Display` names them too.
    Scope {
        /// Group names from the owner's root, joined by `/`
        /// (`broker/writer`).
        path: String,
        /// The blocking lane's label (`storage-io`, ...), or `isolated`
        /// for an isolated executor; `None` for a task or child admission.
        lane: Option<&'static str>,
    },
    /// A blocking lane refused a submission because every slot was busy
    /// and its waiting queue was full: the scope and lane (as in
    /// [`Scope`](Self::Scope)), the lane's limits, and the setting that
    /// admits more concurrent submitters. A lane holds at most
    /// `max_concurrency + max_queue_depth` submissions at once; size the
    /// queue for the submitters that can arrive together.
    LaneFull {
        /// Group names from the owner's root, joined by `/`.
        path: String,
        /// The lane's label (`storage-io`, ...), or `isolated`.
        lane: &'static str,
        /// Closures the lane runs at once (`max_concurrency`).
        max_concurrency: usize,
        /// Submissions that may wait for a slot (`max_queue_depth`).
        max_queue_depth: usize,
        /// The setting to raise (`RuntimeConfig::blocking_lane_policies.storage_io.max_queue_depth`, ...).
        setting: &'static str,
    },
    /// What went wrong and what to do instead, for a call made where it
    /// cannot work (`shutdown_runtime_blocking` inside a Tokio runtime).
    Remedy(&'static str),
    /// A setting asks for what this build left out: the Cargo feature that
    /// provides it is off (the probe server without `probes`).
    FeatureDisabled {
        /// The setting (`ServiceLifecycleConfig::probe_bind_addr`, ...).
        setting: &'static str,
        /// The Cargo feature to enable (`probes`, ...).
        feature: &'static str,
    },
    /// A value given in code broke a rule: the setting, what it accepts and
    /// the rule's label (a `ServiceRestartPolicy` with its backoff out of
    /// order, ...).
    Setting(RuntimeContractPolicy),
}

impl fmt::Display for RuntimeErrorContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Environment(violation) => violation.fmt(f),
            Self::Address(address) => write!(f, "address {address}"),
            Self::Capacity { limit, capacity } => write!(f, "{limit} full at capacity {capacity}"),
            Self::Scope { path, lane } => {
                write!(f, "scope {path}")?;
                match lane {
                    Some(lane) => write!(f, ", lane {lane}"),
                    None => Ok(()),
                }
            }
            Self::LaneFull {
                path,
                lane,
                max_concurrency,
                max_queue_depth,
                setting,
            } => write!(
                f,
                "scope {path}, lane {lane} full ({max_concurrency} running, \
                 {max_queue_depth} waiting): raise {setting}"
            ),
            Self::Remedy(remedy) => f.write_str(remedy),
            Self::Setting(policy) => write!(
                f,
                "{}: expected {} ({policy})",
                policy.subject(),
                policy.requirement()
            ),
            Self::FeatureDisabled { setting, feature } => write!(
                f,
                "{setting} needs the `{feature}` feature of rocketmq-runtime, \
                 which this build leaves out: enable it or unset the setting"
            ),
        }
    }
}

/// A refused value of a `ROCKETMQ_*` environment variable: the variable,
/// the value as given and the rule it broke.
///
/// `Display` is one line an operator can act on:
///
/// ```text
/// ROCKETMQ_SHUTDOWN_TIMEOUT_SECONDS="abc": expected whole seconds in 1..=300
/// ```
///
/// The value is kept escaped (a value that is not valid UTF-8 shows its
/// bytes as `\xNN`) and cut to 64 characters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EnvironmentViolation {
    variable: &'static str,
    value: String,
    policy: RuntimeContractPolicy,
}

impl EnvironmentViolation {
    /// A refusal of `value` (raw bytes as the environment holds them) for
    /// `variable` under `policy`.
    pub(crate) fn new(
        variable: &'static str,
        value: &std::ffi::OsStr,
        policy: RuntimeContractPolicy,
    ) -> Self {
        Self {
            variable,
            value: escaped(value),
            policy,
        }
    }

    /// The variable's name.
    pub fn variable(&self) -> &'static str {
        self.variable
    }

    /// The rejected value as given: escaped, at most 64 characters.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// The rule the value broke.
    pub fn policy(&self) -> RuntimeContractPolicy {
        self.policy
    }

    /// What the variable accepts.
    pub fn accepted(&self) -> &'static str {
        self.policy.requirement()
    }
}

impl fmt::Display for EnvironmentViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}=\"{}\": expected {}",
            self.variable,
            self.value,
            self.accepted()
        )
    }
}

impl Serialize for RuntimeContractPolicy {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// `value` escaped for one line of text (control characters, quotes and
/// invalid UTF-8 bytes escaped), cut to [`MAX_VALUE_CHARS`].
fn escaped(value: &std::ffi::OsStr) -> String {
    match value.to_str() {
        Some(text) => cut(text.escape_debug(), MAX_VALUE_CHARS, usize::MAX),
        None => cut(
            value.as_encoded_bytes().escape_ascii().map(char::from),
            MAX_VALUE_CHARS,
            usize::MAX,
        ),
    }
}

/// Collects already escaped text, cut at a character boundary to at most
/// `max_chars` characters and `max_bytes` bytes, `…` marking a cut: the one
/// bound for every text the crate passes on from outside (a refused
/// environment value, a panic's message, a failed run's error).
pub(crate) fn cut(
    escaped: impl Iterator<Item = char>,
    max_chars: usize,
    max_bytes: usize,
) -> String {
    let mut kept = String::new();
    for (count, character) in escaped.enumerate() {
        if count == max_chars || kept.len() + character.len_utf8() > max_bytes {
            kept.push('…');
            break;
        }
        kept.push(character);
    }
    kept
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn values_are_escaped_and_cut() {
        let policy = RuntimeContractPolicy::ShutdownTimeoutSecondsInRange;
        let quoted = EnvironmentViolation::new("V", "a\"b\n".as_ref(), policy);
        assert_eq!(quoted.value(), "a\\\"b\\n");
        let long = "9".repeat(100);
        let cut = EnvironmentViolation::new("V", long.as_ref(), policy);
        assert_eq!(cut.value(), format!("{}…", "9".repeat(64)));
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            let raw = EnvironmentViolation::new("V", std::ffi::OsStr::from_bytes(b"1\xff"), policy);
            assert_eq!(raw.value(), "1\\xff");
        }
        assert_eq!(
            quoted.to_string(),
            "V=\"a\\\"b\\n\": expected whole seconds in 1..=300"
        );
    }
}
