//! [`ServiceLifecycleConfig`] and where it comes from: defaults, the
//! `ROCKETMQ_*` environment, and the methods `/drainz` accepts.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::{ServiceLifecycle, DEFAULT_LIVENESS_STALE_AFTER, DEFAULT_SHUTDOWN_TIMEOUT};
use crate::environment::{
    self, DRAIN_DELAY_SECONDS_ENV, HEALTH_BIND_ADDR_ENV, HEALTH_DRAIN_METHODS_ENV,
    HEALTH_DRAIN_TOKEN_ENV, HEALTH_METRICS_ENV, LIVENESS_STALE_SECONDS_ENV,
    SHUTDOWN_TIMEOUT_SECONDS_ENV,
};
use crate::error::{RuntimeContractPolicy, RuntimeOperation, RuntimeResult};

/// Which HTTP methods `/drainz` accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum DrainRequestMethods {
    /// `POST` only (default): a `GET` is answered `405` with `Allow: POST`.
    #[default]
    PostOnly,
    /// `GET` or `POST`.
    GetOrPost,
}

impl DrainRequestMethods {
    /// Parses a comma list (case-insensitive, trimmed, no duplicates) that
    /// must contain `POST`: `POST` or `GET,POST`.
    pub fn parse(value: &str) -> Option<Self> {
        let mut get = false;
        let mut post = false;
        for method in value.split(',').map(str::trim) {
            let seen = match method.to_ascii_uppercase().as_str() {
                "GET" => &mut get,
                "POST" => &mut post,
                _ => return None,
            };
            if std::mem::replace(seen, true) {
                return None;
            }
        }
        match (get, post) {
            (false, true) => Some(Self::PostOnly),
            (true, true) => Some(Self::GetOrPost),
            _ => None,
        }
    }

    /// Whether `method` may start a drain.
    pub fn allows(self, method: &str) -> bool {
        match self {
            Self::PostOnly => method.eq_ignore_ascii_case("POST"),
            Self::GetOrPost => {
                method.eq_ignore_ascii_case("POST") || method.eq_ignore_ascii_case("GET")
            }
        }
    }

    /// The `Allow` header of a refused drain request.
    pub const fn allow_header(self) -> &'static str {
        match self {
            Self::PostOnly => "POST",
            Self::GetOrPost => "GET, POST",
        }
    }
}

/// Configuration of a service lifecycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceLifecycleConfig {
    /// The service's name.
    pub service_name: Arc<str>,
    /// Where the probe server listens (none: no server).
    pub probe_bind_addr: Option<SocketAddr>,
    /// Time from the first shutdown request to the frozen deadline.
    pub shutdown_timeout: Duration,
    /// Age of the last progress after which the service is not live.
    pub liveness_stale_after: Duration,
    /// Methods `/drainz` accepts.
    pub drain_request_methods: DrainRequestMethods,
}

impl ServiceLifecycleConfig {
    /// Defaults: no probe server, 45 s shutdown timeout, 30 s liveness.
    pub fn new(service_name: impl Into<Arc<str>>) -> Self {
        Self {
            service_name: service_name.into(),
            probe_bind_addr: None,
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
            liveness_stale_after: DEFAULT_LIVENESS_STALE_AFTER,
            drain_request_methods: DrainRequestMethods::PostOnly,
        }
    }

    /// Reads the `ROCKETMQ_*` variables (see the constants) except
    /// [`DRAIN_DELAY_SECONDS_ENV`], which [`ServiceLifecycle::from_env`]
    /// reads. Unset variables keep their defaults; an empty
    /// `ROCKETMQ_HEALTH_BIND_ADDR` means no probe server.
    ///
    /// # Errors
    ///
    /// Kind `Configuration` for a set variable whose value is refused (not
    /// a number, out of range, not an address, not valid UTF-8, ...),
    /// labelled with the variable's operation (`ServiceLifecycleDuration`,
    /// `ServiceLifecycleDurationRange`, `ServiceLifecycleProbeAddress`,
    /// `ServiceLifecycleDrainMethods`). Its
    /// [`context`](crate::RuntimeError::context) is an
    /// [`EnvironmentViolation`](crate::EnvironmentViolation) naming the
    /// variable, the value and what is accepted.
    pub fn from_env(service_name: impl Into<Arc<str>>) -> RuntimeResult<Self> {
        Self::from_lookup(service_name, &environment::process_environment)
    }

    /// [`from_env`](Self::from_env) over any variable lookup (tests).
    pub(crate) fn from_lookup(
        service_name: impl Into<Arc<str>>,
        lookup: &impl environment::Lookup,
    ) -> RuntimeResult<Self> {
        let mut config = Self::new(service_name);
        // Empty: no probe server, as unset.
        if let Some(address) = environment::parsed(
            lookup,
            HEALTH_BIND_ADDR_ENV,
            RuntimeContractPolicy::ProbeBindAddressValid,
            RuntimeOperation::ServiceLifecycleProbeAddress,
            |text| match text {
                "" => Some(None),
                // Built without the probe server: only "no address".
                _ if !cfg!(feature = "probes") => None,
                address => address.parse().ok().map(Some),
            },
        )? {
            config.probe_bind_addr = address;
        }
        if let Some(timeout) = environment::seconds(
            lookup,
            SHUTDOWN_TIMEOUT_SECONDS_ENV,
            1..=300,
            RuntimeContractPolicy::ShutdownTimeoutSecondsInRange,
        )? {
            config.shutdown_timeout = timeout;
        }
        if let Some(stale) = environment::seconds(
            lookup,
            LIVENESS_STALE_SECONDS_ENV,
            2..=300,
            RuntimeContractPolicy::LivenessStaleSecondsInRange,
        )? {
            config.liveness_stale_after = stale;
        }
        if let Some(methods) = environment::parsed(
            lookup,
            HEALTH_DRAIN_METHODS_ENV,
            RuntimeContractPolicy::DrainMethodsIncludePost,
            RuntimeOperation::ServiceLifecycleDrainMethods,
            DrainRequestMethods::parse,
        )? {
            config.drain_request_methods = methods;
        }
        Ok(config)
    }
}

/// Reads [`DRAIN_DELAY_SECONDS_ENV`] through `lookup` (0 when unset): at
/// most 300 s and shorter than `shutdown_timeout`, since the delay runs
/// inside the frozen deadline and must leave time for the shutdown itself.
pub(crate) fn drain_delay_from_lookup(
    lookup: &impl environment::Lookup,
    shutdown_timeout: Duration,
) -> RuntimeResult<Duration> {
    let Some(delay) = environment::seconds(
        lookup,
        DRAIN_DELAY_SECONDS_ENV,
        0..=300,
        RuntimeContractPolicy::DrainDelaySecondsInRange,
    )?
    else {
        return Ok(Duration::ZERO);
    };
    if delay >= shutdown_timeout {
        let raw = lookup(DRAIN_DELAY_SECONDS_ENV).unwrap_or_default();
        return Err(environment::refused(
            RuntimeOperation::ServiceLifecycleDurationRange,
            DRAIN_DELAY_SECONDS_ENV,
            &raw,
            RuntimeContractPolicy::DrainDelayBelowShutdownTimeout,
        ));
    }
    Ok(delay)
}

impl ServiceLifecycle {
    /// [`new`](Self::new) with [`ServiceLifecycleConfig::from_env`], and
    /// the drain delay of [`DRAIN_DELAY_SECONDS_ENV`](crate::DRAIN_DELAY_SECONDS_ENV) (see
    /// [`with_drain_delay`](Self::with_drain_delay)).
    ///
    /// # Errors
    ///
    /// As [`ServiceLifecycleConfig::from_env`]; a drain delay above 300 s
    /// or not shorter than the shutdown timeout is refused too.
    pub fn from_env(service_name: impl Into<Arc<str>>) -> RuntimeResult<Self> {
        Self::from_lookup(service_name, &environment::process_environment)
    }

    /// [`from_env`](Self::from_env) over any variable lookup (tests).
    pub(crate) fn from_lookup(
        service_name: impl Into<Arc<str>>,
        lookup: &impl environment::Lookup,
    ) -> RuntimeResult<Self> {
        let config = ServiceLifecycleConfig::from_lookup(service_name, lookup)?;
        let delay = drain_delay_from_lookup(lookup, config.shutdown_timeout)?;
        let metrics = environment::parsed(
            lookup,
            HEALTH_METRICS_ENV,
            RuntimeContractPolicy::HealthMetricsSwitch,
            RuntimeOperation::ServiceLifecycleProbeAddress,
            |value| match value {
                "0" => Some(false),
                "1" if cfg!(feature = "metrics") => Some(true),
                _ => None,
            },
        )?
        .unwrap_or(false);
        let token = environment::parsed(
            lookup,
            HEALTH_DRAIN_TOKEN_ENV,
            RuntimeContractPolicy::DrainTokenValid,
            RuntimeOperation::ServiceLifecycleDrainMethods,
            |text| (text.is_empty() || super::drain_token_valid(text)).then(|| text.to_owned()),
        )?
        .unwrap_or_default();
        let lifecycle = Self::new(config)
            .with_drain_delay(delay)
            .with_drain_token(token)?;
        #[cfg(all(not(loom), feature = "metrics"))]
        let lifecycle = if metrics {
            lifecycle.with_metrics(crate::diagnostics::RuntimeDiagnosticsInputs::default)
        } else {
            lifecycle
        };
        #[cfg(any(loom, not(feature = "metrics")))]
        let _ = metrics;
        Ok(lifecycle)
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
