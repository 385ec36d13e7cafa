//! RuntimeConfig profiles, blocking-lane policies and validation order
//! (`src/config.rs`, `src/blocking/policy.rs`).

use std::time::Duration;

use rocketmq_runtime::{
    BlockingLane, BlockingLanePolicies, BlockingPoolPolicy, RuntimeConfig, RuntimeContractPolicy,
    RuntimeContractViolation,
};

fn invalid(policy: RuntimeContractPolicy) -> Result<(), RuntimeContractViolation> {
    Err(RuntimeContractViolation::InvalidConfiguration { policy })
}

fn assert_lanes_capped(config: &RuntimeConfig) {
    for (lane, policy) in config.blocking_lane_policies.iter() {
        assert!(
            policy.max_concurrency <= config.max_blocking_threads,
            "{lane} concurrency {} exceeds {}",
            policy.max_concurrency,
            config.max_blocking_threads
        );
        assert!(policy.max_concurrency >= 1);
    }
}

#[test]
fn for_parallelism_derives_workers_and_blocking_capacity() {
    let cases = [
        (0, 1, 4),
        (1, 1, 4),
        (2, 2, 8),
        (32, 32, 128),
        (128, 128, 512),
        (200, 200, 512),
        (usize::MAX, usize::MAX, 512),
    ];
    for (p, workers, blocking) in cases {
        let config = RuntimeConfig::for_parallelism("svc", p);
        assert_eq!(config.worker_threads, workers, "workers for p={p}");
        assert_eq!(config.max_blocking_threads, blocking, "blocking for p={p}");
        assert_eq!(config.thread_name, "svc");
        assert_lanes_capped(&config);
        assert_eq!(config.validate(), Ok(()), "p={p}");
    }
}

#[test]
fn for_parallelism_fills_the_documented_defaults() {
    let config = RuntimeConfig::for_parallelism("svc", 2);
    assert_eq!(config.thread_stack_size, None);
    assert_eq!(config.thread_keep_alive, Duration::from_secs(30));
    assert_eq!(config.shutdown_timeout, Duration::from_secs(30));
    assert!(config.enable_io);
    assert!(config.enable_time);
    assert_eq!(
        config.blocking_lane_policies,
        BlockingLanePolicies::for_parallelism(2)
    );
}

#[test]
fn lane_concurrency_is_capped_at_the_global_capacity() {
    // p = 1: storage wants 4, metadata 2, cpu 2; global capacity 4.
    let config = RuntimeConfig::for_parallelism("svc", 1);
    let lanes = &config.blocking_lane_policies;
    assert_eq!(lanes.storage_io.max_concurrency, 4);
    assert_eq!(lanes.metadata_io.max_concurrency, 2);
    assert_eq!(lanes.cpu_crypto.max_concurrency, 2);

    // p = 256: storage wants 1024, metadata 512, cpu 256; global capacity 512.
    let config = RuntimeConfig::for_parallelism("svc", 256);
    let lanes = &config.blocking_lane_policies;
    assert_eq!(config.max_blocking_threads, 512);
    assert_eq!(lanes.storage_io.max_concurrency, 512);
    assert_eq!(lanes.metadata_io.max_concurrency, 512);
    assert_eq!(lanes.cpu_crypto.max_concurrency, 256);
    assert_eq!(lanes.storage_io.max_queue_depth, 4096);
}

#[test]
fn tokio_blocking_threads_adds_headroom() {
    let mut config = RuntimeConfig::for_parallelism("svc", 1);
    for (capacity, headroom, total) in [
        (32, 4, 36),
        (6, 2, 8),
        (3, 2, 5),
        (16, 2, 18),
        (512, 64, 576),
    ] {
        config.max_blocking_threads = capacity;
        assert_eq!(
            config.blocking_thread_headroom(),
            headroom,
            "capacity {capacity}"
        );
        assert_eq!(
            config.tokio_blocking_threads(),
            total,
            "capacity {capacity}"
        );
    }
    config.max_blocking_threads = 128;
    assert_eq!(config.tokio_blocking_threads(), 144);
    config.max_blocking_threads = usize::MAX;
    assert_eq!(config.tokio_blocking_threads(), usize::MAX);
}

#[test]
fn with_max_blocking_threads_accepts_exactly_the_supported_range() {
    let out_of_range = RuntimeContractViolation::InvalidConfiguration {
        policy: RuntimeContractPolicy::MaxBlockingThreadsWithinSupportedRange,
    };
    for limit in [0, 1, 2, 513, 1024, usize::MAX] {
        let result = RuntimeConfig::for_parallelism("svc", 4).with_max_blocking_threads(limit);
        assert_eq!(result, Err(out_of_range.clone()), "limit {limit}");
    }
    for limit in [
        RuntimeConfig::MIN_ENTRYPOINT_BLOCKING_THREADS,
        4,
        64,
        RuntimeConfig::MAX_ENTRYPOINT_BLOCKING_THREADS,
    ] {
        let config = RuntimeConfig::for_parallelism("svc", 4)
            .with_max_blocking_threads(limit)
            .expect("limit within range");
        assert_eq!(config.max_blocking_threads, limit);
        assert_lanes_capped(&config);
    }
    assert_eq!(RuntimeConfig::MIN_ENTRYPOINT_BLOCKING_THREADS, 3);
    assert_eq!(RuntimeConfig::MAX_ENTRYPOINT_BLOCKING_THREADS, 512);
}

#[test]
fn with_max_blocking_threads_caps_lane_concurrency() {
    // p = 8: storage 32, metadata 16, cpu 8.
    let config = RuntimeConfig::for_parallelism("svc", 8)
        .with_max_blocking_threads(10)
        .expect("valid limit");
    let lanes = &config.blocking_lane_policies;
    assert_eq!(lanes.storage_io.max_concurrency, 10);
    assert_eq!(lanes.metadata_io.max_concurrency, 10);
    assert_eq!(lanes.cpu_crypto.max_concurrency, 8);

    // Raising the limit never raises a lane above its own policy.
    let config = RuntimeConfig::for_parallelism("svc", 1)
        .with_max_blocking_threads(512)
        .expect("valid limit");
    assert_eq!(config.blocking_lane_policies.storage_io.max_concurrency, 4);
}

#[test]
fn with_max_blocking_threads_revalidates_the_whole_config() {
    let mut config = RuntimeConfig::for_parallelism("svc", 4);
    config.thread_name = "   ".into();
    assert_eq!(
        config.with_max_blocking_threads(16).map(|_| ()),
        invalid(RuntimeContractPolicy::ThreadNameNotBlank)
    );
}

#[test]
fn validate_reports_the_first_failing_rule_in_order() {
    // Start with every rule broken and repair them one at a time.
    let mut config = RuntimeConfig::for_parallelism("svc", 4);
    config.worker_threads = 0;
    config.max_blocking_threads = 0;
    config.thread_name = " \t".into();
    config.thread_stack_size = Some(0);
    config.blocking_lane_policies.metadata_io.max_concurrency = 0;

    assert_eq!(
        config.validate(),
        invalid(RuntimeContractPolicy::WorkerThreadsPositive)
    );
    config.worker_threads = 1;
    assert_eq!(
        config.validate(),
        invalid(RuntimeContractPolicy::MaxBlockingThreadsPositive)
    );
    config.max_blocking_threads = 513;
    assert_eq!(
        config.validate(),
        invalid(RuntimeContractPolicy::MaxBlockingThreadsWithinSupportedRange)
    );
    config.max_blocking_threads = 2;
    assert_eq!(
        config.validate(),
        invalid(RuntimeContractPolicy::ThreadNameNotBlank)
    );
    config.thread_name = "svc".into();
    assert_eq!(
        config.validate(),
        invalid(RuntimeContractPolicy::ThreadStackSizePositive)
    );
    config.thread_stack_size = Some(2 * 1024 * 1024);
    assert_eq!(
        config.validate(),
        invalid(RuntimeContractPolicy::BlockingMaxConcurrencyPositive)
    );
    config.blocking_lane_policies.metadata_io.max_concurrency = 1;
    assert_eq!(
        config.validate(),
        invalid(RuntimeContractPolicy::BlockingGlobalCapacityCoversLanes)
    );
    config.max_blocking_threads = 3;
    assert_eq!(config.validate(), Ok(()));
}

/// The crate's deadlines are Tokio timers: a configuration without the
/// time driver is refused with a rule that says so, not accepted and
/// ignored; `plan()` refuses it before anything starts.
#[test]
fn a_disabled_time_driver_is_refused() {
    let config = RuntimeConfig {
        enable_time: false,
        ..RuntimeConfig::for_parallelism("svc", 2)
    };
    assert_eq!(
        config.validate(),
        invalid(RuntimeContractPolicy::TimeDriverEnabled)
    );
    let violation = rocketmq_runtime::RuntimeOwner::plan(config).expect_err("refused");
    let message = violation.to_string();
    assert!(message.contains("RuntimeConfig::enable_time"), "{message}");
    assert!(message.contains("Tokio timers"), "{message}");
}

/// A violation's message names the field and what it accepts.
#[test]
fn violation_messages_name_the_field_and_the_limit() {
    let config = RuntimeConfig {
        max_blocking_threads: 600,
        ..RuntimeConfig::for_parallelism("svc", 2)
    };
    let message = config.validate().expect_err("above 512").to_string();
    assert_eq!(
        message,
        "invalid runtime configuration (max-blocking-threads-within-supported-range): \
         RuntimeConfig::max_blocking_threads, expected a value in 3..=512"
    );
}

#[test]
fn global_capacity_below_one_slot_per_lane_is_a_violation() {
    for capacity in [1, 2] {
        let mut config = RuntimeConfig::for_parallelism("svc", 1);
        config.max_blocking_threads = capacity;
        assert_eq!(
            config.validate(),
            invalid(RuntimeContractPolicy::BlockingGlobalCapacityCoversLanes),
            "capacity {capacity}"
        );
    }
}

#[test]
fn named_profiles_use_their_thread_names() {
    assert_eq!(RuntimeConfig::default().thread_name, "rocketmq-runtime");
    assert_eq!(
        RuntimeConfig::broker_default().thread_name,
        "rocketmq-broker"
    );
    assert_eq!(
        RuntimeConfig::namesrv_default().thread_name,
        "rocketmq-namesrv"
    );
    assert_eq!(RuntimeConfig::proxy_default().thread_name, "rocketmq-proxy");
    assert_eq!(
        RuntimeConfig::controller_default().thread_name,
        "rocketmq-controller"
    );
    let server = RuntimeConfig::server_default("custom");
    assert_eq!(server.thread_name, "custom");
    let default = RuntimeConfig::default();
    assert_eq!(server.worker_threads, default.worker_threads);
    assert_eq!(
        server.blocking_lane_policies,
        default.blocking_lane_policies
    );
    assert_eq!(default.validate(), Ok(()));
}

#[test]
fn pool_policy_defaults_and_validation() {
    let policy = BlockingPoolPolicy::default();
    assert_eq!(policy.name, "rocketmq-blocking");
    assert_eq!(policy.max_concurrency, 64);
    assert_eq!(policy.max_queue_depth, 256);
    assert_eq!(policy.queue_timeout, Duration::from_secs(5));
    assert_eq!(policy.task_timeout, Duration::from_secs(30));
    assert_eq!(policy.warn_after, Duration::from_secs(1));
    assert_eq!(policy.validate(), Ok(()));

    let broken = |edit: fn(&mut BlockingPoolPolicy)| {
        let mut policy = BlockingPoolPolicy::default();
        edit(&mut policy);
        policy.validate()
    };
    assert_eq!(
        broken(|p| {
            p.max_concurrency = 0;
            p.max_queue_depth = 0;
        }),
        invalid(RuntimeContractPolicy::BlockingMaxConcurrencyPositive)
    );
    assert_eq!(
        broken(|p| p.max_queue_depth = 0),
        invalid(RuntimeContractPolicy::BlockingMaxQueueDepthPositive)
    );
    assert_eq!(
        broken(|p| {
            p.queue_timeout = Duration::MAX;
            p.task_timeout = Duration::from_secs(1);
        }),
        invalid(RuntimeContractPolicy::BlockingTimeoutRepresentable)
    );
    assert_eq!(
        broken(|p| p.task_timeout = Duration::from_secs(u64::MAX / 2)),
        invalid(RuntimeContractPolicy::BlockingTimeoutRepresentable)
    );
}

#[test]
fn lane_policies_for_parallelism_follow_the_formulas() {
    // (p, storage conc/depth, metadata conc/depth, cpu conc/depth)
    let cases = [
        (0, (4, 16), (2, 8), (2, 8)),
        (1, (4, 16), (2, 8), (2, 8)),
        (2, (8, 32), (4, 16), (2, 8)),
        (3, (12, 48), (6, 24), (3, 12)),
        (16, (64, 256), (32, 128), (16, 64)),
    ];
    for (p, storage, metadata, cpu) in cases {
        let lanes = BlockingLanePolicies::for_parallelism(p);
        let limits = |lane| {
            let policy: &BlockingPoolPolicy = lanes.get(lane);
            (policy.max_concurrency, policy.max_queue_depth)
        };
        assert_eq!(limits(BlockingLane::StorageIo), storage, "storage p={p}");
        assert_eq!(limits(BlockingLane::MetadataIo), metadata, "metadata p={p}");
        assert_eq!(limits(BlockingLane::CpuCrypto), cpu, "cpu p={p}");
        assert_eq!(lanes.validate(), Ok(()));
    }
    let huge = BlockingLanePolicies::for_parallelism(usize::MAX);
    assert_eq!(huge.storage_io.max_concurrency, usize::MAX);
    assert_eq!(huge.cpu_crypto.max_queue_depth, usize::MAX);

    let lanes = BlockingLanePolicies::for_parallelism(2);
    let names: Vec<_> = lanes
        .iter()
        .map(|(lane, policy)| (lane, policy.name.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            (BlockingLane::StorageIo, "rocketmq-blocking.storage-io"),
            (BlockingLane::MetadataIo, "rocketmq-blocking.metadata-io"),
            (BlockingLane::CpuCrypto, "rocketmq-blocking.cpu-crypto"),
        ]
    );
    assert_eq!(lanes.storage_io.queue_timeout, Duration::from_secs(5));
    assert_eq!(lanes.storage_io.task_timeout, Duration::from_secs(30));
}

#[test]
fn uniform_lane_policies_suffix_the_name() {
    let policy = BlockingPoolPolicy {
        name: "io".into(),
        max_concurrency: 5,
        ..BlockingPoolPolicy::default()
    };
    let lanes = BlockingLanePolicies::uniform(policy);
    assert_eq!(lanes.storage_io.name, "io.storage-io");
    assert_eq!(lanes.metadata_io.name, "io.metadata-io");
    assert_eq!(lanes.cpu_crypto.name, "io.cpu-crypto");
    for (_, lane) in lanes.iter() {
        assert_eq!(lane.max_concurrency, 5);
        assert_eq!(lane.max_queue_depth, 256);
    }
}

#[test]
fn lane_policy_validation_reports_the_first_lane_in_order() {
    let mut lanes = BlockingLanePolicies::for_parallelism(2);
    lanes.cpu_crypto.max_concurrency = 0;
    lanes.metadata_io.max_queue_depth = 0;
    assert_eq!(
        lanes.validate(),
        invalid(RuntimeContractPolicy::BlockingMaxQueueDepthPositive)
    );
}

#[test]
fn lanes_have_stable_labels() {
    assert_eq!(
        BlockingLane::ALL,
        [
            BlockingLane::StorageIo,
            BlockingLane::MetadataIo,
            BlockingLane::CpuCrypto
        ]
    );
    for lane in BlockingLane::ALL {
        let json = serde_json::to_string(&lane).expect("serializable");
        assert_eq!(json, format!("\"{}\"", lane.as_str()));
        assert_eq!(lane.to_string(), lane.as_str());
    }
}

/// A configuration `plan()` accepts but the OS cannot run (here a thread
/// name with an interior NUL, which std refuses when Tokio starts its
/// workers) ends in a `BuildTokioRuntime` error from `build()`, never a
/// panic.
#[test]
fn a_runtime_the_os_cannot_start_is_a_build_error_not_a_panic() {
    let mut config = RuntimeConfig::for_parallelism("broker", 2);
    config.thread_name = "broker\0worker".to_owned();
    let plan = rocketmq_runtime::RuntimeOwner::plan(config).expect("plan only validates");
    let error = plan.build().expect_err("the OS refuses the thread name");
    assert_eq!(
        error.operation(),
        rocketmq_runtime::RuntimeOperation::BuildTokioRuntime
    );
}

/// Set in the child process of
/// `plan_starts_no_threads_and_detects_no_memory`.
#[cfg(target_os = "linux")]
const PLAN_CHILD: &str = "ROCKETMQ_TEST_PLAN_CHILD";

/// Threads of this process, from `/proc/self/task`.
#[cfg(target_os = "linux")]
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .count()
}

/// `src/owner.rs`, invariant 1: `RuntimeOwner::plan` only validates. In a
/// fresh process whose memory variable is unusable, planning succeeds and
/// starts no thread; only `build` detects the memory limit (and refuses the
/// variable, naming it).
#[cfg(target_os = "linux")]
#[test]
fn plan_starts_no_threads_and_detects_no_memory() {
    use rocketmq_runtime::{RuntimeErrorKind, RuntimeOperation, RuntimeOwner};

    if std::env::var_os(PLAN_CHILD).is_some() {
        let before = threads();
        let plan = RuntimeOwner::plan(RuntimeConfig::for_parallelism("plan-only", 4))
            .expect("planning reads no environment");
        assert_eq!(threads(), before, "planning started a thread");
        let error = plan.build().expect_err("build detects the memory limit");
        assert_eq!(error.kind(), RuntimeErrorKind::Configuration);
        assert_eq!(
            error.operation(),
            RuntimeOperation::DetectProcessMemoryLimit
        );
        println!("plan-child-checked");
        return;
    }
    let output = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "plan_starts_no_threads_and_detects_no_memory",
            "--test-threads",
            "1",
            "--nocapture",
        ])
        .env(PLAN_CHILD, "1")
        .env("ROCKETMQ_PROCESS_MEMORY_LIMIT_BYTES", "not-a-number")
        .output()
        .expect("child process");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("plan-child-checked"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
