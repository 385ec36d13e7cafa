//! The `ROCKETMQ_*` environment variables this crate reads: one catalog
//! ([`ENVIRONMENT_VARIABLES`]), one reader, one error shape.
//!
//! A set variable with a value the crate refuses (not a number, out of
//! range, not valid UTF-8, ...) is a [`RuntimeError`] of kind
//! `Configuration` carrying an [`EnvironmentViolation`] as its
//! [`context`](RuntimeError::context): the variable, the value as given
//! and what is accepted. A value is never silently treated as unset.

use std::ffi::{OsStr, OsString};
use std::ops::RangeInclusive;
use std::time::Duration;

use crate::error::{
    EnvironmentViolation, RuntimeContractPolicy, RuntimeError, RuntimeErrorContext,
    RuntimeOperation, RuntimeResult,
};

/// `ROCKETMQ_HEALTH_BIND_ADDR`: the probe server's address (none: no server).
pub const HEALTH_BIND_ADDR_ENV: &str = "ROCKETMQ_HEALTH_BIND_ADDR";
/// `ROCKETMQ_SHUTDOWN_TIMEOUT_SECONDS`: 1..=300 (default 45).
pub const SHUTDOWN_TIMEOUT_SECONDS_ENV: &str = "ROCKETMQ_SHUTDOWN_TIMEOUT_SECONDS";
/// `ROCKETMQ_LIVENESS_STALE_SECONDS`: 2..=300 (default 30).
pub const LIVENESS_STALE_SECONDS_ENV: &str = "ROCKETMQ_LIVENESS_STALE_SECONDS";
/// `ROCKETMQ_HEALTH_DRAIN_METHODS`: `POST` (default) or `GET,POST`.
pub const HEALTH_DRAIN_METHODS_ENV: &str = "ROCKETMQ_HEALTH_DRAIN_METHODS";
/// Seconds an entrypoint keeps serving after a shutdown request with
/// readiness revoked (0..=300 and below the shutdown timeout, default 0),
/// read by [`ServiceLifecycle::from_env`](crate::ServiceLifecycle::from_env); see
/// [`ServiceLifecycle::with_drain_delay`](crate::ServiceLifecycle::with_drain_delay).
pub const DRAIN_DELAY_SECONDS_ENV: &str = "ROCKETMQ_DRAIN_DELAY_SECONDS";
/// `ROCKETMQ_HEALTH_METRICS`: `1` serves `/metrics` on the probe server
/// (default `0`), read by [`ServiceLifecycle::from_env`](crate::ServiceLifecycle::from_env);
/// see [`ServiceLifecycle::with_metrics`](crate::ServiceLifecycle::with_metrics).
pub const HEALTH_METRICS_ENV: &str = "ROCKETMQ_HEALTH_METRICS";
/// `ROCKETMQ_HEALTH_DRAIN_TOKEN`: the shared secret `/drainz` requires as
/// `Authorization: Bearer <token>` (16 to 256 visible ASCII characters;
/// unset or empty: no token), read by
/// [`ServiceLifecycle::from_env`](crate::ServiceLifecycle::from_env); see
/// [`ServiceLifecycle::with_drain_token`](crate::ServiceLifecycle::with_drain_token).
pub const HEALTH_DRAIN_TOKEN_ENV: &str = "ROCKETMQ_HEALTH_DRAIN_TOKEN";
/// `ROCKETMQ_PROCESS_MEMORY_LIMIT_BYTES`: overrides memory-limit discovery
/// (a positive whole number of bytes).
pub const PROCESS_MEMORY_LIMIT_ENV: &str = "ROCKETMQ_PROCESS_MEMORY_LIMIT_BYTES";

/// One environment variable the crate reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct EnvironmentVariable {
    /// The variable's name.
    pub name: &'static str,
    /// What happens when it is unset.
    pub default: &'static str,
    /// What it accepts.
    pub accepted: &'static str,
    /// What it sets, and who reads it.
    pub purpose: &'static str,
}

/// Every environment variable the crate reads, for an entrypoint's
/// `--help` and for documentation.
pub const ENVIRONMENT_VARIABLES: &[EnvironmentVariable] = &[
    EnvironmentVariable {
        name: HEALTH_BIND_ADDR_ENV,
        default: "unset: no probe server",
        accepted: RuntimeContractPolicy::ProbeBindAddressValid.requirement(),
        purpose: "address of the /readyz, /livez, /startupz and /drainz probe server (ServiceLifecycle::from_env)",
    },
    EnvironmentVariable {
        name: SHUTDOWN_TIMEOUT_SECONDS_ENV,
        default: "45",
        accepted: RuntimeContractPolicy::ShutdownTimeoutSecondsInRange.requirement(),
        purpose: "time from the first shutdown request to the frozen shutdown deadline (ServiceLifecycle::from_env)",
    },
    EnvironmentVariable {
        name: LIVENESS_STALE_SECONDS_ENV,
        default: "30",
        accepted: RuntimeContractPolicy::LivenessStaleSecondsInRange.requirement(),
        purpose: "age of the last recorded progress after which /livez fails (ServiceLifecycle::from_env)",
    },
    EnvironmentVariable {
        name: HEALTH_DRAIN_METHODS_ENV,
        default: "POST",
        accepted: RuntimeContractPolicy::DrainMethodsIncludePost.requirement(),
        purpose: "HTTP methods /drainz accepts; GET,POST for a Kubernetes preStop httpGet hook (ServiceLifecycle::from_env)",
    },
    EnvironmentVariable {
        name: DRAIN_DELAY_SECONDS_ENV,
        default: "0",
        accepted: "whole seconds in 0..=300, fewer than the shutdown timeout",
        purpose: "how long the service keeps serving with readiness revoked after a shutdown request (ServiceLifecycle::from_env)",
    },
    EnvironmentVariable {
        name: HEALTH_METRICS_ENV,
        default: "0",
        accepted: RuntimeContractPolicy::HealthMetricsSwitch.requirement(),
        purpose: "whether the probe server also serves /metrics in the OpenMetrics format (ServiceLifecycle::from_env)",
    },
    EnvironmentVariable {
        name: HEALTH_DRAIN_TOKEN_ENV,
        default: "unset: /drainz needs no token",
        accepted: RuntimeContractPolicy::DrainTokenValid.requirement(),
        purpose: "the secret /drainz requires as Authorization: Bearer <token> (ServiceLifecycle::from_env)",
    },
    EnvironmentVariable {
        name: PROCESS_MEMORY_LIMIT_ENV,
        default: "unset: the cgroup limit, else the host's memory",
        accepted: RuntimeContractPolicy::ProcessMemoryLimitPositive.requirement(),
        purpose: "the process memory limit the owner's process budget is derived from (RuntimeOwnerPlan::build)",
    },
];

/// A variable lookup: the process environment, or a test's map.
pub(crate) trait Lookup: Fn(&str) -> Option<OsString> {}
impl<F: Fn(&str) -> Option<OsString>> Lookup for F {}

/// The process environment.
pub(crate) fn process_environment(name: &str) -> Option<OsString> {
    std::env::var_os(name)
}

/// The refusal of `value` for `variable` under `policy`, labelled
/// `operation`.
#[track_caller]
pub(crate) fn refused(
    operation: RuntimeOperation,
    variable: &'static str,
    value: &OsStr,
    policy: RuntimeContractPolicy,
) -> RuntimeError {
    RuntimeError::configuration(operation).with_context(RuntimeErrorContext::Environment(
        EnvironmentViolation::new(variable, value, policy),
    ))
}

/// A set variable's value read with `parse` (see [`parse_value`]).
#[track_caller]
pub(crate) fn parsed<T>(
    lookup: &impl Lookup,
    variable: &'static str,
    policy: RuntimeContractPolicy,
    operation: RuntimeOperation,
    parse: impl FnOnce(&str) -> Option<T>,
) -> RuntimeResult<Option<T>> {
    lookup(variable)
        .map(|raw| parse_value(variable, &raw, policy, operation, parse))
        .transpose()
}

/// `raw`, the value of `variable`, read with `parse` (given the trimmed
/// text): a value `parse` refuses, or one that is not UTF-8, is refused
/// under `policy` (labelled `operation`).
#[track_caller]
pub(crate) fn parse_value<T>(
    variable: &'static str,
    raw: &OsStr,
    policy: RuntimeContractPolicy,
    operation: RuntimeOperation,
    parse: impl FnOnce(&str) -> Option<T>,
) -> RuntimeResult<T> {
    raw.to_str()
        .and_then(|text| parse(text.trim()))
        .ok_or_else(|| refused(operation, variable, raw, policy))
}

/// A set variable as whole seconds in `range` (not a number: operation
/// `ServiceLifecycleDuration`; out of range: `ServiceLifecycleDurationRange`;
/// both under `policy`).
#[track_caller]
pub(crate) fn seconds(
    lookup: &impl Lookup,
    variable: &'static str,
    range: RangeInclusive<u64>,
    policy: RuntimeContractPolicy,
) -> RuntimeResult<Option<Duration>> {
    let Some(raw) = lookup(variable) else {
        return Ok(None);
    };
    let seconds = parse_value(
        variable,
        &raw,
        policy,
        RuntimeOperation::ServiceLifecycleDuration,
        |text| text.parse::<u64>().ok(),
    )?;
    if !range.contains(&seconds) {
        return Err(refused(
            RuntimeOperation::ServiceLifecycleDurationRange,
            variable,
            &raw,
            policy,
        ));
    }
    Ok(Some(Duration::from_secs(seconds)))
}
