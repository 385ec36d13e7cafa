//! The `RuntimeContext` harness (`src/context.rs`) and the lane accessors
//! of contexts: `blocking(lane)` is the executor the named accessors
//! return.

mod support;

use std::time::Duration;

use rocketmq_runtime::{
    BlockingLane, BlockingPoolPolicy, RuntimeContext, RuntimeErrorKind, RuntimeOperation,
};
use support::guard;

#[tokio::test]
async fn a_uniform_blocking_policy_keeps_lane_identity_and_sums_capacity() {
    let policy = BlockingPoolPolicy {
        name: "harness".to_owned(),
        max_concurrency: 5,
        max_queue_depth: 7,
        ..BlockingPoolPolicy::default()
    };
    let ctx = RuntimeContext::try_from_current_with_blocking_policy("uniform", policy)
        .expect("valid policy");
    for (lane, suffix) in [
        (BlockingLane::StorageIo, "storage-io"),
        (BlockingLane::MetadataIo, "metadata-io"),
        (BlockingLane::CpuCrypto, "cpu-crypto"),
    ] {
        let snapshot = ctx.blocking(lane).snapshot();
        assert_eq!(snapshot.lane, lane);
        assert_eq!(&*snapshot.name, format!("harness.{suffix}"));
        assert_eq!((snapshot.max_concurrency, snapshot.max_queue_depth), (5, 7));
        assert_eq!(snapshot.global_capacity, 15, "the sum of the lanes");
    }
    let _ = guard("shutdown", ctx.shutdown_tasks(Duration::from_secs(1))).await;
}

#[tokio::test]
async fn an_invalid_uniform_policy_is_a_configuration_error() {
    let policy = BlockingPoolPolicy {
        max_concurrency: 0,
        ..BlockingPoolPolicy::default()
    };
    let error = RuntimeContext::try_from_current_with_blocking_policy("bad", policy)
        .expect_err("zero concurrency");
    assert_eq!(error.kind(), RuntimeErrorKind::Configuration);
    assert_eq!(error.operation(), RuntimeOperation::RuntimeContext);
    let source = std::error::Error::source(&error).expect("the violation");
    assert!(source.to_string().contains("max_concurrency"), "{source}");
}

#[tokio::test]
async fn blocking_lane_is_the_executor_the_named_accessors_return() {
    let ctx = RuntimeContext::try_from_current("lanes").expect("inside Tokio");
    let component = ctx.service_context("store");
    let pairs = [
        (
            component.blocking(BlockingLane::StorageIo),
            component.storage_io(),
        ),
        (
            component.blocking(BlockingLane::MetadataIo),
            component.metadata_io(),
        ),
        (
            component.blocking(BlockingLane::CpuCrypto),
            component.cpu_crypto(),
        ),
    ];
    for (by_lane, named) in pairs {
        assert!(std::ptr::eq(by_lane, named), "one executor per lane");
    }
    assert_eq!(
        component.blocking(BlockingLane::MetadataIo).snapshot().lane,
        BlockingLane::MetadataIo
    );
    // The harness root's lanes share the same global capacity.
    let root = ctx.blocking(BlockingLane::StorageIo).snapshot();
    assert_eq!(
        root.global_capacity,
        component.storage_io().snapshot().global_capacity
    );
    let value = component
        .cpu_crypto()
        .spawn("hash", rocketmq_runtime::BlockingKind::CpuBound, || 6 * 7)
        .await
        .expect("runs");
    assert_eq!(value, 42);
    let _ = guard("shutdown", ctx.shutdown_tasks(Duration::from_secs(1))).await;
}
