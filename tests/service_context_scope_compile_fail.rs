//! Capability types cannot be forged, cloned into roots or promoted, and
//! outcomes a caller must look at cannot be dropped unnoticed.

#[test]
fn capability_types_have_no_public_constructors() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/root_not_constructible.rs");
    cases.compile_fail("tests/ui/root_not_clone.rs");
    cases.compile_fail("tests/ui/child_not_promotable_to_root.rs");
    cases.compile_fail("tests/ui/child_not_constructible.rs");
    cases.compile_fail("tests/ui/task_group_not_constructible.rs");
    cases.compile_fail("tests/ui/spawner_has_no_runtime_handle.rs");
}

/// Dropping an outcome a caller must look at (a rejected push's item, a
/// refused registration or submission, a receipt, a shutdown report) is
/// reported by `unused_must_use`.
#[test]
fn dropped_outcomes_are_reported() {
    trybuild::TestCases::new().compile_fail("tests/ui/dropped_outcomes.rs");
}
