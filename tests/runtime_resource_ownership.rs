//! Shared process-budget ownership (`src/resources.rs`, invariant 1): every
//! child context of one owner draws on the same `process` root, so a
//! reservation by one component is visible to all and refuses the next at
//! `process`.

use rocketmq_runtime::{ManagedMemoryPolicy, ProcessMemoryLimit, RuntimeConfig, RuntimeOwner};

#[test]
fn child_contexts_share_one_process_budget() {
    // A process budget of 1,024 bytes: the whole limit minus its headroom.
    let owner = RuntimeOwner::plan(RuntimeConfig::for_parallelism("ownership", 2))
        .expect("valid")
        .with_memory_limit(ProcessMemoryLimit::configured(1 << 20).expect("positive"))
        .with_memory_policy(ManagedMemoryPolicy::whole_limit().with_headroom((1 << 20) - 1_024))
        .build()
        .expect("runtime");
    assert_eq!(
        owner.resources().process_budget().limit().capacity.bytes,
        1_024
    );
    let first = owner.root_context().component("first");
    let second = owner.root_context().component("second");
    let held = first.process_budget().try_acquire_data(768).expect("fits");
    assert_eq!(
        second.process_budget().snapshot().current_bytes,
        768,
        "one component's reservation is visible to the other"
    );
    let rejection = second
        .process_budget()
        .try_acquire_data(300)
        .expect_err("768 + 300 exceed the shared 1,024");
    assert_eq!(rejection.exhausted_path(), "process");
    drop(held);
    let _again = second
        .process_budget()
        .try_acquire_data(300)
        .expect("room again after the release");
    assert!(owner
        .shutdown_runtime_blocking()
        .expect("outside Tokio")
        .is_healthy());
}
