//! The managed budget: configured limits, fractions, policies and their
//! resolution against the detected limit.

use super::*;
use crate::error::{RuntimeContractPolicy, RuntimeContractViolation};
use crate::resource_budget::memory::{MemoryLimitSource, ProcessMemoryLimit};

fn memory_error(policy: RuntimeContractPolicy) -> RuntimeContractViolation {
    RuntimeContractViolation::InvalidMemoryLimit { policy }
}

fn limit(bytes: u64, source: MemoryLimitSource) -> ProcessMemoryLimit {
    ProcessMemoryLimit::discovered(bytes, source)
}

#[test]
fn configured_limit_must_be_positive() {
    assert_eq!(
        ProcessMemoryLimit::configured(0),
        Err(memory_error(
            RuntimeContractPolicy::ConfiguredMemoryLimitPositive
        ))
    );
    let configured = ProcessMemoryLimit::configured(4096).expect("positive");
    assert_eq!(configured.bytes(), 4096);
    assert_eq!(configured.source(), MemoryLimitSource::Configured);
}

#[test]
fn fraction_is_floored_and_bounded() {
    let invalid = Err(memory_error(
        RuntimeContractPolicy::MemoryFractionPositiveAndBounded,
    ));
    let limit = ProcessMemoryLimit::configured(1000).expect("positive");
    assert_eq!(limit.fraction(0, 1), invalid);
    assert_eq!(limit.fraction(1, 0), invalid);
    assert_eq!(limit.fraction(0, 0), invalid);
    assert_eq!(limit.fraction(3, 2), invalid);
    assert_eq!(limit.fraction(1, 1), Ok(1000));
    assert_eq!(limit.fraction(1, 3), Ok(333));
    assert_eq!(limit.fraction(2, 3), Ok(666));
    let tiny = ProcessMemoryLimit::configured(1).expect("positive");
    assert_eq!(tiny.fraction(1, 2), Ok(0));
    let huge = ProcessMemoryLimit::configured(u64::MAX).expect("positive");
    assert_eq!(huge.fraction(u64::MAX, u64::MAX), Ok(u64::MAX));
    assert_eq!(huge.fraction(u64::MAX - 1, u64::MAX), Ok(u64::MAX - 1));
    assert_eq!(huge.fraction(1, 2), Ok(u64::MAX / 2));
}

#[test]
fn policy_constructors_validate() {
    assert_eq!(
        ManagedMemoryPolicy::default(),
        ManagedMemoryPolicy::whole_limit()
    );
    let whole = ManagedMemoryPolicy::whole_limit();
    assert_eq!(whole.request(), ManagedMemoryRequest::WholeLimit);
    assert_eq!(whole.headroom_bytes(), 0);
    assert_eq!(
        ManagedMemoryRequest::default(),
        ManagedMemoryRequest::WholeLimit
    );

    assert_eq!(
        ManagedMemoryPolicy::explicit_bytes(0),
        Err(memory_error(
            RuntimeContractPolicy::ManagedMemoryBudgetPositive
        ))
    );
    let explicit = ManagedMemoryPolicy::explicit_bytes(64).expect("positive");
    assert_eq!(explicit.request(), ManagedMemoryRequest::ExplicitBytes(64));

    let ratio = Err(memory_error(
        RuntimeContractPolicy::ManagedMemoryRatioPositiveAndBounded,
    ));
    assert_eq!(ManagedMemoryPolicy::fraction(0, 4), ratio);
    assert_eq!(ManagedMemoryPolicy::fraction(1, 0), ratio);
    assert_eq!(ManagedMemoryPolicy::fraction(5, 4), ratio);
    let fraction = ManagedMemoryPolicy::fraction(3, 4)
        .expect("bounded")
        .with_headroom(10)
        .with_headroom(20);
    assert_eq!(
        fraction.request(),
        ManagedMemoryRequest::Fraction {
            numerator: 3,
            denominator: 4
        }
    );
    assert_eq!(fraction.headroom_bytes(), 20);
}

fn resolve(
    detected: u64,
    configured: Option<u64>,
    policy: ManagedMemoryPolicy,
) -> Result<ManagedMemoryBudget, RuntimeContractViolation> {
    let detected = limit(detected, MemoryLimitSource::CgroupV2);
    let configured =
        configured.map(|bytes| ProcessMemoryLimit::configured(bytes).expect("positive"));
    ManagedMemoryBudget::resolve(detected, configured, policy)
}

fn numbers(budget: ManagedMemoryBudget) -> (u64, u64, u64) {
    (
        budget.effective_limit_bytes(),
        budget.requested_managed_bytes(),
        budget.managed_bytes(),
    )
}

#[test]
fn resolve_whole_limit_uses_the_effective_limit() {
    let whole = ManagedMemoryPolicy::default();
    let budget = resolve(1000, None, whole).expect("valid");
    assert_eq!(numbers(budget), (1000, 1000, 1000));
    assert_eq!(budget.detected(), limit(1000, MemoryLimitSource::CgroupV2));

    let lower = resolve(1000, Some(600), whole).expect("valid");
    assert_eq!(numbers(lower), (600, 600, 600));
    assert_eq!(lower.detected().bytes(), 1000, "detected stays reportable");

    let higher = resolve(1000, Some(5000), whole).expect("valid");
    assert_eq!(numbers(higher), (1000, 1000, 1000));

    let headroom = resolve(1000, Some(600), whole.with_headroom(100)).expect("valid");
    assert_eq!(numbers(headroom), (600, 600, 500));
}

#[test]
fn resolve_explicit_bytes_are_clamped_below_headroom() {
    let small = ManagedMemoryPolicy::explicit_bytes(300).expect("positive");
    assert_eq!(
        numbers(resolve(1000, None, small).expect("valid")),
        (1000, 300, 300)
    );

    let large = ManagedMemoryPolicy::explicit_bytes(5000).expect("positive");
    assert_eq!(
        numbers(resolve(1000, None, large).expect("valid")),
        (1000, 5000, 1000)
    );
    let clamped = resolve(1000, None, large.with_headroom(250)).expect("valid");
    assert_eq!(numbers(clamped), (1000, 5000, 750));
    let fits = resolve(1000, None, small.with_headroom(250)).expect("valid");
    assert_eq!(numbers(fits), (1000, 300, 300));
}

#[test]
fn resolve_fraction_of_the_effective_limit() {
    let half = ManagedMemoryPolicy::fraction(1, 2).expect("bounded");
    assert_eq!(
        numbers(resolve(1001, None, half).expect("valid")),
        (1001, 500, 500)
    );
    let capped = resolve(1000, Some(800), half).expect("valid");
    assert_eq!(numbers(capped), (800, 400, 400));
    let three_quarters = ManagedMemoryPolicy::fraction(3, 4).expect("bounded");
    let headroom = resolve(1000, None, three_quarters.with_headroom(400)).expect("valid");
    assert_eq!(numbers(headroom), (1000, 750, 600));
    let huge = resolve(u64::MAX, None, three_quarters).expect("valid");
    assert_eq!(huge.managed_bytes(), u64::MAX / 4 * 3 + 2);
}

#[test]
fn resolve_rejects_headroom_above_the_effective_limit() {
    let whole = ManagedMemoryPolicy::whole_limit();
    assert_eq!(
        resolve(1000, None, whole.with_headroom(1001)),
        Err(memory_error(
            RuntimeContractPolicy::ManagedMemoryHeadroomBelowEffectiveLimit
        ))
    );
    // The configured limit lowers the effective limit below the headroom.
    assert_eq!(
        resolve(1000, Some(500), whole.with_headroom(600)),
        Err(memory_error(
            RuntimeContractPolicy::ManagedMemoryHeadroomBelowEffectiveLimit
        ))
    );
}

#[test]
fn resolve_rejects_an_empty_managed_budget() {
    let empty = Err(memory_error(
        RuntimeContractPolicy::ManagedMemoryBudgetPositive,
    ));
    let whole = ManagedMemoryPolicy::whole_limit();
    assert_eq!(resolve(1000, None, whole.with_headroom(1000)), empty);
    let tiny_fraction = ManagedMemoryPolicy::fraction(1, 2).expect("bounded");
    assert_eq!(resolve(1, None, tiny_fraction), empty);
    let explicit = ManagedMemoryPolicy::explicit_bytes(10)
        .expect("positive")
        .with_headroom(1000);
    assert_eq!(resolve(1000, None, explicit), empty);
    assert_eq!(
        numbers(resolve(1000, None, whole.with_headroom(999)).expect("valid")),
        (1000, 1000, 1)
    );
}
