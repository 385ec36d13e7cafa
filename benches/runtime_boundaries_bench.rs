//! Measurements at the runtime's boundaries, with a custom `main` (it runs
//! only under `--bench`) writing `runtime_boundaries.json`:
//!
//! | Measure | What |
//! | --- | --- |
//! | `mixed_lanes` | 96 submissions of 1 ms closures, 32 per managed lane, all at once over a global capacity of 3: queue wait and completion p50/p95/p99/max per lane |
//! | `metadata_saturation` | a 1 MiB managed limit: one actor's held write and queued snapshot fill it, a second actor's snapshot is refused, an equal-size replacement at capacity is accepted, the bytes return to 0; RSS before and after |
//! | `slow_target` | an injected 20 ms target beside a fast one: the fast target's time to durability with `max_concurrent_writes` 1 and 2 |
//! | `bounded_detail` | `diagnostics_task_details(8, 8)` and `(64, 16)` against the full V2 aggregate over 10,000 tasks: time and bytes the result keeps |
//! | `isolated_shutdown` | an isolated executor with a held closure: `shutdown_until` at an expired deadline reports it pending; after the release, the next call confirms |
//!
//! Injected delays measure the runtime's isolation, not a disk: the real
//! file system's cost is `metadata_io_bench`'s.
//!
//! Run: `cargo bench --bench runtime_boundaries_bench`.

mod support;

#[path = "../tests/support/counting_alloc.rs"]
mod counting_alloc;

use std::num::NonZeroUsize;
use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rocketmq_runtime::{
    BlockingExecutor, BlockingPoolPolicy, ManagedMemoryPolicy, MetadataDeadline,
    MetadataFileSystem, MetadataIoAdmissionOutcome, MetadataIoConfig, MetadataWriteRequest,
    ProcessMemoryLimit, RuntimeComponent, RuntimeConfig, RuntimeDiagnosticsInputs, RuntimeOwner,
    RuntimeResult, ShutdownDeadline, TaskKind,
};
use serde_json::{json, Value};
use tokio::time::Instant;

use counting_alloc::{retained_by, CountingAllocator};
use support::{publish, quantile};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// The real clock (runtimes are running).
#[allow(clippy::disallowed_methods)]
fn wall_clock() -> std::time::Instant {
    std::time::Instant::now()
}

/// Simulated blocking work.
#[allow(clippy::disallowed_methods)]
fn sleep_blocking(duration: Duration) {
    std::thread::sleep(duration);
}

fn latency(mut samples: Vec<f64>) -> Value {
    Value::Object(support::percentiles(
        &mut samples,
        &[0.50, 0.95, 0.99],
        |label| format!("{label}_ms"),
    ))
}

fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1_024)
}

fn mixed_lanes() -> Value {
    let mut config = RuntimeConfig::for_parallelism("boundaries", 2);
    config.max_blocking_threads = 3;
    for policy in [
        &mut config.blocking_lane_policies.storage_io,
        &mut config.blocking_lane_policies.metadata_io,
        &mut config.blocking_lane_policies.cpu_crypto,
    ] {
        policy.max_concurrency = 3;
        policy.max_queue_depth = 64;
        policy.queue_timeout = Duration::from_secs(30);
    }
    let owner = RuntimeOwner::plan(config)
        .expect("valid")
        .build()
        .expect("runtime");
    let context = owner.root_context().component("lanes");
    let lanes = [
        ("storage_io", context.storage_io().clone()),
        ("metadata_io", context.metadata_io().clone()),
        ("cpu_crypto", context.cpu_crypto().clone()),
    ];
    let results = owner.block_on(async move {
        let submissions = lanes.iter().flat_map(|(lane, executor)| {
            (0..32).map(move |_| {
                let executor = executor.clone();
                async move {
                    let submitted = wall_clock();
                    let started = executor
                        .spawn_io("work", move || {
                            let started = wall_clock();
                            sleep_blocking(Duration::from_millis(1));
                            started
                        })
                        .await
                        .expect("ran");
                    let queue = started.duration_since(submitted).as_secs_f64() * 1e3;
                    let completion = submitted.elapsed().as_secs_f64() * 1e3;
                    (*lane, queue, completion)
                }
            })
        });
        futures::future::join_all(submissions).await
    });
    let mut summary = serde_json::Map::new();
    for lane in ["storage_io", "metadata_io", "cpu_crypto"] {
        let of_lane = results.iter().filter(|(name, _, _)| *name == lane);
        let queue: Vec<f64> = of_lane.clone().map(|(_, queue, _)| *queue).collect();
        let completion: Vec<f64> = of_lane.map(|(_, _, completion)| *completion).collect();
        summary.insert(
            lane.to_owned(),
            json!({ "queue": latency(queue), "completion": latency(completion) }),
        );
    }
    assert!(owner
        .shutdown_runtime_blocking()
        .expect("outside Tokio")
        .is_healthy());
    Value::Object(summary)
}

/// Holds the first write at a gate; optionally sleeps for one target.
#[derive(Debug, Default)]
struct InjectedFs {
    gate: Mutex<Option<(mpsc::Sender<()>, mpsc::Receiver<()>)>>,
    slow_target: Option<&'static str>,
}

impl MetadataFileSystem for InjectedFs {
    fn persist_atomic(&self, target: &Path, _bytes: &[u8]) -> RuntimeResult<()> {
        let gate = self.gate.lock().expect("unpoisoned").take();
        if let Some((arrived, release)) = gate {
            let _ = arrived.send(());
            let _ = release.recv();
        }
        if self.slow_target.is_some_and(|slow| target.ends_with(slow)) {
            sleep_blocking(Duration::from_millis(20));
        }
        Ok(())
    }
}

fn deadline() -> MetadataDeadline {
    MetadataDeadline::after(Duration::from_secs(30))
}

fn metadata_saturation() -> Value {
    let rss_before = resident_bytes();
    let owner = RuntimeOwner::plan(RuntimeConfig::for_parallelism("saturation", 2))
        .expect("valid")
        .with_memory_limit(ProcessMemoryLimit::configured(1 << 20).expect("positive"))
        .with_memory_policy(ManagedMemoryPolicy::whole_limit())
        .build()
        .expect("runtime");
    let (arrived_tx, arrived) = mpsc::channel();
    let (release, release_rx) = mpsc::channel();
    let fs = Arc::new(InjectedFs {
        gate: Mutex::new(Some((arrived_tx, release_rx))),
        slow_target: None,
    });
    let context = owner.root_context().component("metadata");
    let first = MetadataIoConfig::default()
        .into_plan()
        .expect("valid")
        .start_with_file_system(&context, Arc::clone(&fs) as Arc<dyn MetadataFileSystem>)
        .expect("started");
    let second = MetadataIoConfig::default()
        .into_plan()
        .expect("valid")
        .start_with_file_system(&context, Arc::clone(&fs) as Arc<dyn MetadataFileSystem>)
        .expect("started");
    let half = (1 << 19) - 4_096;
    let submit = |actor: &rocketmq_runtime::MetadataIoActor, resource: &str, generation: u64| {
        owner.block_on(async {
            actor.submit(
                MetadataWriteRequest::new(
                    resource,
                    generation,
                    format!("/boundaries/{resource}.json"),
                    vec![0u8; half],
                ),
                deadline(),
            )
        })
    };
    let held = submit(&first, "a", 1).expect("admitted");
    arrived
        .recv_timeout(Duration::from_secs(30))
        .expect("the write reached the gate");
    let queued = submit(&first, "a", 2).expect("admitted");
    let refused = submit(&second, "b", 1);
    let second_refused = refused.is_err();
    let replacement = submit(&first, "a", 3);
    let replacement_accepted = matches!(replacement, Ok(MetadataIoAdmissionOutcome::Accepted(_)));
    let used_at_capacity = owner.resources().process_budget().snapshot().current_bytes;
    drop(release);
    for outcome in [Ok(held), Ok(queued), replacement] {
        if let Ok(MetadataIoAdmissionOutcome::Accepted(receipt)) = outcome {
            let _ = owner.block_on(receipt.wait_until(deadline()));
        }
    }
    let used_after = owner.resources().process_budget().snapshot().current_bytes;
    let _ = owner.block_on(first.shutdown_until(deadline()));
    let _ = owner.block_on(second.shutdown_until(deadline()));
    let _ = owner.shutdown_runtime_blocking();
    assert!(second_refused && replacement_accepted && used_after == 0);
    json!({
        "managed_limit_bytes": 1 << 20,
        "snapshot_bytes": half,
        "bytes_at_capacity": used_at_capacity,
        "second_actor_refused": second_refused,
        "replacement_at_capacity_accepted": replacement_accepted,
        "bytes_after_release": used_after,
        "rss_before_bytes": rss_before,
        "rss_after_bytes": resident_bytes(),
    })
}

fn slow_target(writers: usize) -> f64 {
    let owner = RuntimeOwner::plan(RuntimeConfig::for_parallelism("slow", 2))
        .expect("valid")
        .build()
        .expect("runtime");
    let fs = Arc::new(InjectedFs {
        gate: Mutex::new(None),
        slow_target: Some("slow.json"),
    });
    let actor = MetadataIoConfig::default()
        .into_plan()
        .expect("valid")
        .with_max_concurrent_writes(NonZeroUsize::new(writers).expect("positive"))
        .start_with_file_system(
            &owner.root_context().component("metadata"),
            fs as Arc<dyn MetadataFileSystem>,
        )
        .expect("started");
    let mut fast_ms = Vec::new();
    for generation in 1..=20u64 {
        let (slow, fast) = owner.block_on(async {
            let slow = actor
                .submit(
                    MetadataWriteRequest::new(
                        "slow",
                        generation,
                        "/boundaries/slow.json",
                        vec![1; 64],
                    ),
                    deadline(),
                )
                .expect("admitted");
            let started = wall_clock();
            let fast = actor
                .submit_next_durable("fast", "/boundaries/fast.json", vec![2; 64], deadline())
                .await
                .expect("durable");
            (slow, (fast, started.elapsed()))
        });
        assert!(matches!(
            fast.0,
            rocketmq_runtime::MetadataIoDurabilityOutcome::Durable(_)
        ));
        fast_ms.push(fast.1.as_secs_f64() * 1e3);
        if let MetadataIoAdmissionOutcome::Accepted(receipt) = slow {
            let _ = owner.block_on(receipt.wait_until(deadline()));
        }
    }
    let _ = owner.block_on(actor.shutdown_until(deadline()));
    let _ = owner.shutdown_runtime_blocking();
    fast_ms.sort_by(f64::total_cmp);
    quantile(&fast_ms, 0.5)
}

fn bounded_detail() -> Value {
    let owner = RuntimeOwner::plan(RuntimeConfig::for_parallelism("detail", 2))
        .expect("valid")
        .build()
        .expect("runtime");
    let tasks = owner.root_context().component("tasks");
    for _ in 0..10_000 {
        let token = tasks.task_group().cancellation_token();
        tasks
            .spawn(
                "idle",
                TaskKind::Worker,
                async move { token.cancelled().await },
            )
            .expect("open");
    }
    let time = |body: &dyn Fn() -> usize| {
        let started = wall_clock();
        let mut sink = 0;
        for _ in 0..100 {
            sink += body();
        }
        std::hint::black_box(sink);
        started.elapsed().as_secs_f64() * 1e3 / 100.0
    };
    let (_, small_bytes) = retained_by(|| tasks.task_group().diagnostics_task_details(8, 8));
    let (_, large_bytes) = retained_by(|| tasks.task_group().diagnostics_task_details(64, 16));
    let (_, full_bytes) = retained_by(|| {
        tasks.diagnostics_view_v2(RuntimeComponent::Other, RuntimeDiagnosticsInputs::default())
    });
    let summary = json!({
        "tasks": 10_000,
        "details_8_8": {
            "ms": time(&|| tasks.task_group().diagnostics_task_details(8, 8).details.len()),
            "retained_bytes": small_bytes,
        },
        "details_64_16": {
            "ms": time(&|| tasks.task_group().diagnostics_task_details(64, 16).details.len()),
            "retained_bytes": large_bytes,
        },
        "full_v2_aggregates": {
            "ms": time(&|| {
                tasks
                    .diagnostics_view_v2(RuntimeComponent::Other, RuntimeDiagnosticsInputs::default())
                    .tasks
                    .task_count
            }),
            "retained_bytes": full_bytes,
        },
    });
    let _ = owner.shutdown_runtime_blocking();
    summary
}

fn isolated_shutdown() -> Value {
    let owner = RuntimeOwner::plan(RuntimeConfig::for_parallelism("isolated", 2))
        .expect("valid")
        .build()
        .expect("runtime");
    let context = owner.root_context().component("adapter");
    let executor = BlockingExecutor::new_isolated(
        BlockingPoolPolicy {
            name: "adapter".to_owned(),
            ..BlockingPoolPolicy::default()
        },
        context.task_group().clone(),
    )
    .expect("valid");
    let (started_tx, started) = mpsc::channel();
    let (release, gate) = mpsc::channel::<()>();
    let caller = executor.clone();
    let runtime = owner.block_on(async { tokio::runtime::Handle::current() });
    let held = runtime.spawn(async move {
        caller
            .spawn_io("held", move || {
                let _ = started_tx.send(());
                let _ = gate.recv();
            })
            .await
    });
    started
        .recv_timeout(Duration::from_secs(30))
        .expect("the closure runs");
    let observed = wall_clock();
    let first = owner
        .block_on(executor.shutdown_until(ShutdownDeadline::after(Duration::ZERO)))
        .expect("isolated");
    let observation_ms = observed.elapsed().as_secs_f64() * 1e3;
    drop(release);
    let _ = owner.block_on(held);
    let confirmed = wall_clock();
    let second = owner
        .block_on(executor.shutdown_until(ShutdownDeadline::after(Duration::from_secs(30))))
        .expect("isolated");
    let confirmation_ms = confirmed.elapsed().as_secs_f64() * 1e3;
    assert!(!first.completed && first.pending_operations == 1 && second.completed);
    let _ = owner.shutdown_runtime_blocking();
    json!({
        "zero_deadline": { "completed": first.completed, "pending_operations": first.pending_operations, "ms": observation_ms },
        "after_release": { "completed": second.completed, "pending_operations": second.pending_operations, "ms": confirmation_ms },
    })
}

fn main() {
    // Runs only as a bench (`cargo bench` passes `--bench`); `cargo test`
    // builds it and exits.
    if !std::env::args().any(|arg| arg == "--bench") {
        return;
    }
    let started = Instant::now();
    let summary = json!({
        "bench": "runtime_boundaries_bench",
        "mixed_lanes": mixed_lanes(),
        "metadata_saturation": metadata_saturation(),
        "slow_target": {
            "fast_target_p50_ms_with_1_writer": slow_target(1),
            "fast_target_p50_ms_with_2_writers": slow_target(2),
        },
        "bounded_detail": bounded_detail(),
        "isolated_shutdown": isolated_shutdown(),
        "elapsed_ms": started.elapsed().as_millis() as u64,
    });
    publish("runtime_boundaries.json", &summary);
}
