//! Real cgroup memory-limit discovery, end to end (ignored by default).
//!
//! The parsers are covered by fixture-file unit tests in
//! `src/resource_budget/memory.rs`; this test checks
//! `ProcessMemoryLimit::detect` against a real hard limit. Run it inside a
//! scope with a memory limit and tell it the limit in bytes:
//!
//! ```text
//! systemd-run --user --scope -p MemoryMax=512M env ROCKETMQ_TEST_CGROUP_BYTES=536870912 cargo test --test memory_limit_cgroup -- --ignored
//! ```
//!
//! Build first (`cargo test --test memory_limit_cgroup --no-run`) so the
//! compiler does not run under the 512 MiB limit. The user manager must have
//! the memory controller delegated (cgroup v2), and
//! `ROCKETMQ_PROCESS_MEMORY_LIMIT_BYTES` must be unset, since it overrides
//! discovery. Without `ROCKETMQ_TEST_CGROUP_BYTES` the test prints a note and
//! returns; an ignored or skipped run is not evidence of a pass.

#![cfg(target_os = "linux")]

use rocketmq_runtime::{MemoryLimitSource, ProcessMemoryLimit};

const EXPECTED_BYTES_ENV: &str = "ROCKETMQ_TEST_CGROUP_BYTES";
const OVERRIDE_ENV: &str = "ROCKETMQ_PROCESS_MEMORY_LIMIT_BYTES";

#[test]
#[ignore = "needs a memory-limited cgroup; see the file docs for the command"]
fn detects_the_enclosing_cgroup_limit() {
    let Some(expected) = std::env::var_os(EXPECTED_BYTES_ENV) else {
        println!("{EXPECTED_BYTES_ENV} is unset; skipping the real cgroup check");
        return;
    };
    let expected: u64 = expected
        .to_str()
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("{EXPECTED_BYTES_ENV} must be a byte count"));
    assert!(
        std::env::var_os(OVERRIDE_ENV).is_none(),
        "unset {OVERRIDE_ENV}: it overrides cgroup discovery"
    );

    let limit = ProcessMemoryLimit::detect().expect("a cgroup limit is detected");

    assert_eq!(limit.bytes(), expected, "detected {limit:?}");
    assert!(
        matches!(
            limit.source(),
            MemoryLimitSource::CgroupV2 | MemoryLimitSource::CgroupV1
        ),
        "the limit must come from a cgroup, got {}",
        limit.source()
    );
}
