use std::collections::HashSet;
use std::error::Error as _;

use super::*;
use crate::error::ExternalOperation;
use crate::error::RuntimeErrorDescriptor;

#[test]
fn within_keeps_the_cause_kind_and_wraps_it_as_source() {
    for cause in [
        RuntimeError::closed(RuntimeOperation::SpawnTaskGroupTask),
        RuntimeError::poisoned(RuntimeOperation::SpawnTaskGroupTask),
        RuntimeError::capacity(RuntimeOperation::BlockingQueueAdmission),
        RuntimeError::timed_out(RuntimeOperation::BlockingTaskDeadline),
    ] {
        let kind = cause.kind();
        let wrapped = RuntimeError::within(RuntimeOperation::StartServiceLifecycle, cause);
        assert_eq!(wrapped.kind(), kind);
        assert_eq!(wrapped.operation(), RuntimeOperation::StartServiceLifecycle);
        assert_eq!(wrapped.component(), "runtime");
        let source = wrapped.source().expect("the cause is the source");
        let inner = source
            .downcast_ref::<RuntimeError>()
            .expect("the source is the original runtime error");
        assert_eq!(inner.kind(), kind);
        assert_ne!(inner.operation(), RuntimeOperation::StartServiceLifecycle);
    }
}

#[test]
fn poisoned_is_unavailable_and_shares_the_context_code() {
    let error = RuntimeError::poisoned(RuntimeOperation::SpawnTaskGroupTask);
    assert_eq!(error.kind(), RuntimeErrorKind::Poisoned);
    assert_eq!(error.condition(), CanonicalCondition::Unavailable);
    assert_eq!(error.code(), "runtime.context.unavailable");
    assert_eq!(error.component(), "task");
}

#[test]
fn constructors_record_the_caller_location() {
    let line = line!() + 1;
    let error = RuntimeError::closed(RuntimeOperation::SpawnOperation);
    assert_eq!(error.location().file(), file!());
    assert_eq!(error.location().line(), line);
}

#[test]
fn named_operation_labels_are_unique_valid_external_labels() {
    let mut seen = HashSet::new();
    for operation in RuntimeOperation::NAMED {
        let label = operation.label();
        assert!(seen.insert(label), "duplicate label {label}");
        assert_eq!(ExternalOperation::new(label).label(), label);
        assert_eq!(operation.to_string(), label);
    }
    assert_eq!(seen.len(), 54, "every named operation of the specification");
}

#[test]
fn the_descriptor_is_the_catalog_entry() {
    let error = RuntimeError::capacity(RuntimeOperation::SpawnTaskGroupTask);
    let descriptor = error.descriptor();
    assert_eq!(descriptor.code(), "runtime.capacity.exhausted");
    assert_eq!(
        descriptor.condition(),
        CanonicalCondition::ResourceExhausted
    );
    assert_eq!(descriptor.component(), "task");
    assert_eq!(descriptor.recovery_hint(), error.recovery_hint());
    // `Copy` and all `'static`: it outlives the error.
    let kept: RuntimeErrorDescriptor = {
        let error = RuntimeError::closed(RuntimeOperation::PersistMetadata);
        error.descriptor()
    };
    assert_eq!(kept.component(), "runtime");
}

const SECRET: &str = "secret-path /var/lib/broker/token";

fn secret_error() -> RuntimeError {
    let io = io::Error::new(io::ErrorKind::PermissionDenied, SECRET);
    RuntimeError::within(
        RuntimeOperation::StartServiceLifecycle,
        RuntimeError::io(RuntimeOperation::BindServiceHealthProbe, io),
    )
}

#[test]
fn the_public_view_is_pinned_and_carries_no_source_text() {
    let error = secret_error();
    let json = serde_json::to_string(&error.public_view()).expect("serializes");
    assert_eq!(
        json,
        r#"{"code":"runtime.io.failed","condition":"internal","message":"runtime I/O failed"}"#
    );
    assert!(!json.contains("secret"));
    assert!(!json.contains("start-service-lifecycle"), "no operation");
}

#[test]
fn the_diagnostic_view_is_pinned_and_lists_the_source_chain() {
    let error = secret_error();
    let mut value = serde_json::to_value(error.diagnostic_view()).expect("serializes");
    let location = value["location"].take();
    assert!(
        location
            .as_str()
            .is_some_and(|location| location.starts_with(file!())),
        "{location}"
    );
    assert_eq!(
        value,
        serde_json::json!({
            "code": "runtime.io.failed",
            "condition": "internal",
            "message": "runtime I/O failed",
            "kind": "io",
            "operation": "start-service-lifecycle",
            "component": "runtime",
            "location": null,
            "sources": [
                "runtime I/O failed during bind-service-health-probe (io)",
                SECRET,
            ],
        })
    );
}

#[test]
fn an_environment_context_reaches_the_diagnostic_view_only() {
    let error = crate::environment::refused(
        RuntimeOperation::ServiceLifecycleDuration,
        "ROCKETMQ_SHUTDOWN_TIMEOUT_SECONDS",
        "abc".as_ref(),
        crate::error::RuntimeContractPolicy::ShutdownTimeoutSecondsInRange,
    );
    let context = error.context().expect("carries the detail");
    assert_eq!(
        context.to_string(),
        r#"ROCKETMQ_SHUTDOWN_TIMEOUT_SECONDS="abc": expected whole seconds in 1..=300"#
    );
    assert!(
        !error.to_string().contains("abc"),
        "Display stays the catalog"
    );
    assert!(format!("{error:?}").contains("ROCKETMQ_SHUTDOWN_TIMEOUT_SECONDS"));
    let diagnostic = serde_json::to_value(error.diagnostic_view()).expect("serializes");
    assert_eq!(
        diagnostic["context"],
        serde_json::json!({ "environment": {
            "variable": "ROCKETMQ_SHUTDOWN_TIMEOUT_SECONDS",
            "value": "abc",
            "policy": "shutdown-timeout-seconds-in-range",
        }})
    );
    let public = serde_json::to_string(&error.public_view()).expect("serializes");
    assert!(
        !public.contains("abc") && !public.contains("ROCKETMQ"),
        "{public}"
    );
}

/// Capture follows `std::backtrace`: whatever the environment of this test
/// process says, the error agrees with `Backtrace::capture`.
#[test]
fn a_backtrace_is_captured_exactly_when_std_would_capture_one() {
    let enabled =
        std::backtrace::Backtrace::capture().status() == std::backtrace::BacktraceStatus::Captured;
    let error = RuntimeError::closed(RuntimeOperation::SpawnOperation);
    assert_eq!(error.backtrace().is_some(), enabled);
    // Attaching a context keeps it.
    let error = error.with_context(RuntimeErrorContext::Address(
        "127.0.0.1:1".parse().expect("address"),
    ));
    assert_eq!(error.backtrace().is_some(), enabled);
}
