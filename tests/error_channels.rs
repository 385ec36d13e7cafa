//! The two error channels: operational `RuntimeError`s and caller
//! `RuntimeContractViolation`s.

use std::error::Error as _;
use std::io;
use std::panic;

use rocketmq_runtime::{
    CanonicalCondition, ExternalOperation, RuntimeContractPolicy, RuntimeContractViolation,
    RuntimeError, RuntimeErrorKind, RuntimeOperation,
};

const SECRET: &str = "secret-path-/etc/shadow";

fn secret_io() -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, SECRET)
}

#[test]
fn kinds_map_to_conditions_and_codes() {
    let op = RuntimeOperation::BlockingQueueAdmission;
    let cases = [
        (
            RuntimeError::closed(op),
            RuntimeErrorKind::Closed,
            CanonicalCondition::Unavailable,
            "runtime.context.unavailable",
        ),
        (
            RuntimeError::context_unavailable(op),
            RuntimeErrorKind::ContextUnavailable,
            CanonicalCondition::Unavailable,
            "runtime.context.unavailable",
        ),
        (
            RuntimeError::capacity(op),
            RuntimeErrorKind::CapacityExhausted,
            CanonicalCondition::ResourceExhausted,
            "runtime.capacity.exhausted",
        ),
        (
            RuntimeError::timed_out(op),
            RuntimeErrorKind::TimedOut,
            CanonicalCondition::DeadlineExceeded,
            "runtime.deadline.exceeded",
        ),
        (
            RuntimeError::unsupported(op),
            RuntimeErrorKind::Unsupported,
            CanonicalCondition::Unimplemented,
            "runtime.operation.unsupported",
        ),
        (
            RuntimeError::configuration(op),
            RuntimeErrorKind::Configuration,
            CanonicalCondition::InvalidArgument,
            "runtime.configuration.invalid",
        ),
        (
            RuntimeError::configuration_failure(op, secret_io()),
            RuntimeErrorKind::Configuration,
            CanonicalCondition::InvalidArgument,
            "runtime.configuration.invalid",
        ),
        (
            RuntimeError::io(op, secret_io()),
            RuntimeErrorKind::Io,
            CanonicalCondition::Internal,
            "runtime.io.failed",
        ),
        (
            RuntimeError::build(RuntimeOperation::BuildTokioRuntime, secret_io()),
            RuntimeErrorKind::Io,
            CanonicalCondition::Internal,
            "runtime.io.failed",
        ),
        (
            RuntimeError::internal(op, secret_io()),
            RuntimeErrorKind::Internal,
            CanonicalCondition::Internal,
            "runtime.internal.failure",
        ),
        (
            RuntimeError::internal_failure(op),
            RuntimeErrorKind::Internal,
            CanonicalCondition::Internal,
            "runtime.internal.failure",
        ),
    ];
    for (error, kind, condition, code) in cases {
        assert_eq!(error.kind(), kind, "{error:?}");
        assert_eq!(error.condition(), condition, "{error:?}");
        assert_eq!(error.code(), code, "{error:?}");
        assert_eq!(kind.condition(), condition);
        assert_eq!(kind.code(), code);
        assert!(!error.recovery_hint().is_empty());
        assert_eq!(error.location().file(), file!());
    }
    for kind in [
        RuntimeErrorKind::Closed,
        RuntimeErrorKind::Poisoned,
        RuntimeErrorKind::ContextUnavailable,
    ] {
        assert_eq!(kind.code(), "runtime.context.unavailable");
        assert_eq!(kind.condition(), CanonicalCondition::Unavailable);
    }
    assert_eq!(
        RuntimeErrorKind::Io.condition(),
        CanonicalCondition::Internal
    );
}

#[test]
fn display_and_debug_never_leak_the_source_text() {
    let errors = [
        RuntimeError::io(RuntimeOperation::PersistMetadata, secret_io()),
        RuntimeError::configuration_failure(RuntimeOperation::LoadConfigFile, secret_io()),
        RuntimeError::internal(RuntimeOperation::RunBlockingTask, secret_io()),
        RuntimeError::from(secret_io()),
    ];
    for error in errors {
        let display = error.to_string();
        let debug = format!("{error:?}");
        assert!(!display.contains(SECRET), "display leaks: {display}");
        assert!(!debug.contains(SECRET), "debug leaks: {debug}");
        assert!(display.contains(error.operation().label()), "{display}");
        assert!(debug.contains(error.code()), "{debug}");
        assert!(debug.contains("has_source: true"), "{debug}");
        let source = error.source().expect("the cause stays reachable");
        assert_eq!(source.to_string(), SECRET);
        // The alternate form, for a person at a terminal, shows the chain.
        let pretty = format!("{error:#?}");
        assert!(pretty.contains("sources"), "{pretty}");
        assert!(pretty.contains(SECRET), "{pretty}");
    }
    let plain = RuntimeError::closed(RuntimeOperation::SpawnTaskGroupTask);
    assert!(plain.source().is_none());
    assert!(format!("{plain:?}").contains("has_source: false"));
    assert!(plain.to_string().contains("spawn-task-group-task"));
    assert!(plain.to_string().contains("closed"));
}

#[test]
fn from_io_error_is_a_read_file_failure() {
    let error: RuntimeError = secret_io().into();
    assert_eq!(error.kind(), RuntimeErrorKind::Io);
    assert_eq!(error.operation(), RuntimeOperation::ReadFile);
    let io = error
        .source()
        .and_then(|s| s.downcast_ref::<io::Error>())
        .expect("io source");
    assert_eq!(io.kind(), io::ErrorKind::PermissionDenied);
}

#[tokio::test]
async fn join_errors_are_internal_failures() {
    let join_error = tokio::spawn(async { panic!("task boom") })
        .await
        .expect_err("panicked");
    let error = RuntimeError::join(RuntimeOperation::SpawnTaskGroupTask, join_error);
    assert_eq!(error.kind(), RuntimeErrorKind::Internal);
    assert_eq!(error.component(), "task");
    assert!(!error.to_string().contains("task boom"));
    assert!(error.source().is_some());
}

#[test]
fn errors_clone_with_their_source() {
    let error = RuntimeError::io(RuntimeOperation::MetadataWriteTemporary, secret_io());
    let clone = error.clone();
    assert_eq!(clone.kind(), error.kind());
    assert_eq!(clone.operation(), error.operation());
    assert_eq!(clone.location(), error.location());
    assert_eq!(
        clone.source().map(ToString::to_string).as_deref(),
        Some(SECRET)
    );
}

#[test]
fn components_split_task_and_runtime_operations() {
    for op in [
        RuntimeOperation::SpawnTaskGroupTask,
        RuntimeOperation::CreateTaskGroupChild,
        RuntimeOperation::SpawnServiceTask,
        RuntimeOperation::SpawnSchedulerTask,
        RuntimeOperation::SpawnOperation,
    ] {
        assert_eq!(RuntimeError::closed(op).component(), "task", "{op}");
    }
    for op in [
        RuntimeOperation::BuildTokioRuntime,
        RuntimeOperation::PersistMetadata,
        RuntimeOperation::external("initialize-broker"),
    ] {
        assert_eq!(RuntimeError::closed(op).component(), "runtime", "{op}");
    }
}

#[test]
fn operation_labels_are_kebab_case() {
    assert_eq!(
        RuntimeOperation::SpawnTaskGroupTask.to_string(),
        "spawn-task-group-task"
    );
    assert_eq!(
        RuntimeOperation::PersistMetadata.to_string(),
        "metadata-persistence"
    );
    assert_eq!(
        RuntimeOperation::BuildTokioRuntime.label(),
        "build-tokio-runtime"
    );
    assert_eq!(
        RuntimeOperation::MetadataIoClosed.label(),
        "metadata-io-closed"
    );
    assert_eq!(
        RuntimeOperation::RegisterSigtermHandler.label(),
        "register-sigterm-handler"
    );
    assert_eq!(
        serde_json::to_string(&RuntimeOperation::ShutdownRuntimeBlocking).expect("serializable"),
        "\"shutdown-runtime-blocking\""
    );
}

#[test]
fn external_labels_are_validated() {
    const INITIALIZE_BROKER: RuntimeOperation = RuntimeOperation::external("initialize-broker");
    assert_eq!(INITIALIZE_BROKER.label(), "initialize-broker");
    assert_eq!(INITIALIZE_BROKER.to_string(), "initialize-broker");
    assert_eq!(
        INITIALIZE_BROKER,
        RuntimeOperation::External(ExternalOperation::new("initialize-broker"))
    );
    assert_ne!(
        INITIALIZE_BROKER,
        RuntimeOperation::external("initialize-proxy")
    );

    let longest: &'static str = Box::leak(
        "a".repeat(ExternalOperation::MAX_LABEL_BYTES)
            .into_boxed_str(),
    );
    for label in ["a", "9", "a-b", "v2-commit-log-0", longest] {
        assert_eq!(ExternalOperation::new(label).label(), label);
    }

    let too_long: &'static str = Box::leak(
        "a".repeat(ExternalOperation::MAX_LABEL_BYTES + 1)
            .into_boxed_str(),
    );
    let default_hook = panic::take_hook();
    panic::set_hook(Box::new(|_| {}));
    let rejected: Vec<_> = [
        "", "-a", "a-", "-", "Upper", "a_b", "a b", "a.b", "é", too_long,
    ]
    .into_iter()
    .filter(|label| panic::catch_unwind(|| RuntimeOperation::external(label)).is_err())
    .collect();
    panic::set_hook(default_hook);
    assert_eq!(
        rejected.len(),
        10,
        "accepted an invalid label; rejected only {rejected:?}"
    );
}

#[test]
fn contract_violations_are_invalid_arguments_without_contents() {
    let violations = [
        RuntimeContractViolation::InvalidConfiguration {
            policy: RuntimeContractPolicy::WorkerThreadsPositive,
        },
        RuntimeContractViolation::InvalidMemoryLimit {
            policy: RuntimeContractPolicy::ConfiguredMemoryLimitPositive,
        },
        RuntimeContractViolation::InvalidSchedule {
            policy: RuntimeContractPolicy::ServiceContextScopeNotBlank,
        },
        RuntimeContractViolation::InvalidMetadataConfiguration {
            policy: RuntimeContractPolicy::MetadataMaxPendingBytesPositive,
        },
        RuntimeContractViolation::EmptyBudgetName,
        RuntimeContractViolation::InvalidBudgetName,
        RuntimeContractViolation::ZeroBudgetRate,
        RuntimeContractViolation::ZeroBudgetMaxAge,
        RuntimeContractViolation::ChildBudgetMaxAgeExceedsParent,
        RuntimeContractViolation::PermitTargetInDifferentTree,
    ];
    for violation in violations {
        assert_eq!(violation.condition(), CanonicalCondition::InvalidArgument);
        assert!(violation.source().is_none());
        assert!(!violation.to_string().is_empty());
        if let Some(policy) = violation.policy() {
            assert!(
                violation.to_string().contains(policy.as_str()),
                "{violation}"
            );
        }
    }
}

#[test]
fn contract_policies_have_stable_labels() {
    let cases = [
        (
            RuntimeContractPolicy::ConfiguredMemoryLimitPositive,
            "configured-limit-must-be-positive",
        ),
        (
            RuntimeContractPolicy::MemoryFractionPositiveAndBounded,
            "fraction-must-be-positive-and-bounded",
        ),
        (
            RuntimeContractPolicy::MetadataMaxPendingOperationsPositive,
            "max-pending-operations-positive",
        ),
        (
            RuntimeContractPolicy::MetadataMaxPendingBytesPositive,
            "max-pending-bytes-positive",
        ),
        (
            RuntimeContractPolicy::MetadataBlockingTaskTimeoutPositive,
            "blocking-task-timeout-positive",
        ),
        (
            RuntimeContractPolicy::WorkerThreadsPositive,
            "worker-threads-positive",
        ),
        (
            RuntimeContractPolicy::BlockingGlobalCapacityCoversLanes,
            "blocking-global-capacity-covers-lanes",
        ),
    ];
    for (policy, label) in cases {
        assert_eq!(policy.as_str(), label);
        assert_eq!(policy.to_string(), label);
    }
}

#[test]
fn kinds_and_conditions_serialize_as_snake_case() {
    let json = serde_json::to_string(&RuntimeErrorKind::CapacityExhausted).expect("serializable");
    assert_eq!(json, "\"capacity_exhausted\"");
    assert_eq!(
        RuntimeErrorKind::CapacityExhausted.as_str(),
        "capacity_exhausted"
    );
    let json = serde_json::to_string(&CanonicalCondition::DeadlineExceeded).expect("serializable");
    assert_eq!(json, "\"deadline_exceeded\"");
    assert_eq!(
        CanonicalCondition::DeadlineExceeded.as_str(),
        "deadline_exceeded"
    );
}
