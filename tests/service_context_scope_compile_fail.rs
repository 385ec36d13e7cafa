//! Capability types cannot be forged, cloned into roots or promoted.

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
