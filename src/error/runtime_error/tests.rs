use std::collections::HashSet;
use std::error::Error as _;

use super::*;
use crate::error::ExternalOperation;

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
    assert_eq!(
        seen.len(),
        54,
        "every named operation in the contract sheet"
    );
}
