//! Environment parsing of the lifecycle configuration (an injected lookup:
//! the process environment is never touched).

use std::collections::HashMap;
use std::ffi::OsString;
use std::time::Duration;

use super::*;
use crate::error::RuntimeError;

/// A variable lookup over `vars` (the process environment is not read).
fn lookup(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
    let vars: HashMap<String, OsString> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), OsString::from(v)))
        .collect();
    move |name| vars.get(name).cloned()
}

fn parse(vars: &[(&str, &str)]) -> RuntimeResult<ServiceLifecycleConfig> {
    ServiceLifecycleConfig::from_lookup("broker", &lookup(vars))
}

fn drain_delay(vars: &[(&str, &str)]) -> RuntimeResult<Duration> {
    ServiceLifecycle::from_lookup("broker", &lookup(vars)).map(|lifecycle| lifecycle.drain_delay())
}

/// The environment detail of a refused value.
fn violation(error: &RuntimeError) -> &crate::error::EnvironmentViolation {
    match error.context() {
        Some(crate::error::RuntimeErrorContext::Environment(violation)) => violation,
        other => panic!("no environment context: {other:?}"),
    }
}

#[test]
fn defaults_without_variables() {
    let config = parse(&[]).expect("defaults");
    assert_eq!(config.probe_bind_addr, None);
    assert_eq!(config.shutdown_timeout, Duration::from_secs(45));
    assert_eq!(config.liveness_stale_after, Duration::from_secs(30));
    assert_eq!(config.drain_request_methods, DrainRequestMethods::PostOnly);
    assert_eq!(drain_delay(&[]).expect("defaults"), Duration::ZERO);
}

#[test]
fn drain_delay_is_parsed_and_bounded() {
    assert_eq!(
        drain_delay(&[(DRAIN_DELAY_SECONDS_ENV, "3")]).expect("valid"),
        Duration::from_secs(3)
    );
    assert_eq!(
        drain_delay(&[(DRAIN_DELAY_SECONDS_ENV, "301")])
            .expect_err("out of range")
            .operation(),
        RuntimeOperation::ServiceLifecycleDurationRange
    );
    assert_eq!(
        drain_delay(&[(DRAIN_DELAY_SECONDS_ENV, "-1")])
            .expect_err("not a number")
            .operation(),
        RuntimeOperation::ServiceLifecycleDuration
    );
    // Not shorter than the shutdown timeout: no time would be left.
    for (delay, timeout) in [("45", None), ("60", None), ("5", Some("5"))] {
        let mut vars = vec![(DRAIN_DELAY_SECONDS_ENV, delay)];
        if let Some(timeout) = timeout {
            vars.push((SHUTDOWN_TIMEOUT_SECONDS_ENV, timeout));
        }
        assert_eq!(
            drain_delay(&vars).expect_err("no time left").operation(),
            RuntimeOperation::ServiceLifecycleDurationRange,
            "delay {delay}, timeout {timeout:?}"
        );
    }
    let fits = drain_delay(&[
        (DRAIN_DELAY_SECONDS_ENV, "4"),
        (SHUTDOWN_TIMEOUT_SECONDS_ENV, "5"),
    ])
    .expect("shorter than the timeout");
    assert_eq!(fits, Duration::from_secs(4));
}

/// Built without the probe server or `/metrics`, a probe address or
/// `ROCKETMQ_HEALTH_METRICS=1` is refused, naming what this build accepts.
#[cfg(not(all(feature = "probes", feature = "metrics")))]
#[test]
fn settings_of_missing_features_are_refused() {
    #[cfg(not(feature = "probes"))]
    {
        let error = parse(&[(HEALTH_BIND_ADDR_ENV, "127.0.0.1:8080")]).expect_err("no probes");
        assert_eq!(
            error.operation(),
            RuntimeOperation::ServiceLifecycleProbeAddress
        );
        let violation = violation(&error);
        assert!(
            violation.to_string().contains("`probes` feature"),
            "{violation}"
        );
        assert_eq!(
            parse(&[(HEALTH_BIND_ADDR_ENV, "")])
                .expect("no address")
                .probe_bind_addr,
            None
        );
    }
    #[cfg(not(feature = "metrics"))]
    {
        let error = ServiceLifecycle::from_lookup("broker", &lookup(&[(HEALTH_METRICS_ENV, "1")]))
            .expect_err("no metrics feature");
        let violation = violation(&error);
        assert!(
            violation.to_string().contains("`metrics` feature"),
            "{violation}"
        );
    }
}

#[test]
fn variables_are_parsed_and_bounded() {
    let address = if cfg!(feature = "probes") {
        "127.0.0.1:8080"
    } else {
        ""
    };
    let config = parse(&[
        (HEALTH_BIND_ADDR_ENV, address),
        (SHUTDOWN_TIMEOUT_SECONDS_ENV, "10"),
        (LIVENESS_STALE_SECONDS_ENV, " 5 "),
        (HEALTH_DRAIN_METHODS_ENV, "get, POST"),
    ])
    .expect("valid");
    assert_eq!(config.probe_bind_addr, address.parse().ok());
    assert_eq!(config.shutdown_timeout, Duration::from_secs(10));
    assert_eq!(config.liveness_stale_after, Duration::from_secs(5));
    assert_eq!(config.drain_request_methods, DrainRequestMethods::GetOrPost);
    for (variable, value, operation) in [
        (
            HEALTH_BIND_ADDR_ENV,
            "nowhere",
            RuntimeOperation::ServiceLifecycleProbeAddress,
        ),
        (
            SHUTDOWN_TIMEOUT_SECONDS_ENV,
            "soon",
            RuntimeOperation::ServiceLifecycleDuration,
        ),
        (
            SHUTDOWN_TIMEOUT_SECONDS_ENV,
            "0",
            RuntimeOperation::ServiceLifecycleDurationRange,
        ),
        (
            SHUTDOWN_TIMEOUT_SECONDS_ENV,
            "301",
            RuntimeOperation::ServiceLifecycleDurationRange,
        ),
        (
            LIVENESS_STALE_SECONDS_ENV,
            "1",
            RuntimeOperation::ServiceLifecycleDurationRange,
        ),
        (
            HEALTH_DRAIN_METHODS_ENV,
            "GET",
            RuntimeOperation::ServiceLifecycleDrainMethods,
        ),
        (
            HEALTH_DRAIN_METHODS_ENV,
            "POST,DELETE",
            RuntimeOperation::ServiceLifecycleDrainMethods,
        ),
        (
            HEALTH_DRAIN_METHODS_ENV,
            "POST,post",
            RuntimeOperation::ServiceLifecycleDrainMethods,
        ),
    ] {
        let error = parse(&[(variable, value)]).expect_err(value);
        assert_eq!(
            error.kind(),
            crate::error::RuntimeErrorKind::Configuration,
            "{variable}={value}"
        );
        assert_eq!(error.operation(), operation, "{variable}={value}");
        let violation = violation(&error);
        assert_eq!((violation.variable(), violation.value()), (variable, value));
        assert_eq!(
            violation.to_string(),
            format!("{variable}=\"{value}\": expected {}", violation.accepted())
        );
    }
    // An empty address means no probe server, as unset does.
    assert_eq!(
        parse(&[(HEALTH_BIND_ADDR_ENV, " ")])
            .expect("empty")
            .probe_bind_addr,
        None
    );
}

/// A value that is not UTF-8 is refused (with its bytes escaped), never
/// taken as unset.
#[cfg(unix)]
#[test]
fn a_non_utf8_value_is_refused_not_ignored() {
    use std::os::unix::ffi::OsStringExt;
    for variable in [
        HEALTH_BIND_ADDR_ENV,
        SHUTDOWN_TIMEOUT_SECONDS_ENV,
        LIVENESS_STALE_SECONDS_ENV,
        HEALTH_DRAIN_METHODS_ENV,
        DRAIN_DELAY_SECONDS_ENV,
    ] {
        let raw = OsString::from_vec(vec![b'1', 0xff]);
        let lookup = |name: &str| (name == variable).then(|| raw.clone());
        let error = ServiceLifecycle::from_lookup("broker", &lookup).expect_err(variable);
        assert_eq!(error.kind(), crate::error::RuntimeErrorKind::Configuration);
        let violation = violation(&error);
        assert_eq!(
            (violation.variable(), violation.value()),
            (variable, "1\\xff")
        );
    }
}

#[test]
fn drain_methods() {
    assert_eq!(
        DrainRequestMethods::parse("POST"),
        Some(DrainRequestMethods::PostOnly)
    );
    assert_eq!(
        DrainRequestMethods::parse(" post , get "),
        Some(DrainRequestMethods::GetOrPost)
    );
    assert!(DrainRequestMethods::PostOnly.allows("post"));
    assert!(!DrainRequestMethods::PostOnly.allows("GET"));
    assert!(DrainRequestMethods::GetOrPost.allows("GET"));
    assert_eq!(DrainRequestMethods::PostOnly.allow_header(), "POST");
    assert_eq!(DrainRequestMethods::GetOrPost.allow_header(), "GET, POST");
}
