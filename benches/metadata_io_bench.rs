//! Durable metadata writes through the actor against a bare replacement.
//!
//! | Measure | Baseline | Runtime path |
//! | --- | --- | --- |
//! | `durable_write` (paired) | `spawn_blocking(persist_atomic)` (write + fsync + rename + dir fsync, one blocking round trip) | `submit_durable` through the actor |
//! | `burst` | — | 1,000 submissions to one resource while writes run: physical writes counted |
//! | `concurrency` (paired) | 8 resources, `with_max_concurrent_writes(1)` | the same with `with_max_concurrent_writes(4)` |
//! | `gated_release` (paired) | the three writes the actor makes (hot, cold, hot), each a `spawn_blocking(persist_atomic)` | a hot resource's first write held at a gate; 64 more hot submissions and one cold submission queued; the timer runs from the first queued submission through the release to the last settled receipt |
//!
//! `gated_release` asserts what the actor did in every round: the 64 hot
//! submissions coalesced into one write, and the cold resource, queued
//! while the hot one was writing, was written before the hot resource's
//! next generation (three physical writes: hot, cold, hot). The gate
//! arrival of the first write and the setup are outside the timer. Its
//! target (1.25) bounds what the 65 queued submissions, their receipts and
//! the hand-offs between writes add to three durable writes.
//!
//! Everything writes 4 KiB snapshots to a temporary directory on the real
//! filesystem (the 8 independent resources each in their own directory); the owner (2 workers, metadata lane concurrency 4) is built
//! outside the timed regions.
//!
//! Output: `<target>/runtime-measurements/metadata_io.json`.
//!
//! Run: `cargo bench --bench metadata_io_bench`.

mod support;

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use criterion::Criterion;
use rocketmq_runtime::{
    ChildServiceContext, LocalMetadataFileSystem, MetadataDeadline, MetadataFileSystem,
    MetadataIoActor, MetadataIoAdmissionOutcome, MetadataIoConfig, MetadataIoDurabilityOutcome,
    MetadataIoReceipt, MetadataWriteRequest, RuntimeConfig, RuntimeOwner, RuntimeResult,
};
use serde_json::json;

use support::{paired_median, publish, run_criterion, target};

const SNAPSHOT: usize = 4 * 1024;
const WRITES: usize = 20;
const ROUNDS: usize = 9;
const BURST: u64 = 1_000;
const RESOURCES: usize = 8;
const PER_RESOURCE: u64 = 4;
/// Hot submissions queued behind the held write.
const QUEUED: usize = 64;

/// The real clock (runtimes are running).
#[allow(clippy::disallowed_methods)]
fn wall_clock() -> std::time::Instant {
    std::time::Instant::now()
}

/// Counts the physical writes of the local file system.
#[derive(Debug, Default)]
struct Counting {
    writes: AtomicUsize,
}

impl MetadataFileSystem for Counting {
    fn persist_atomic(&self, target: &Path, bytes: &[u8]) -> RuntimeResult<()> {
        self.writes.fetch_add(1, Ordering::SeqCst);
        LocalMetadataFileSystem.persist_atomic(target, bytes)
    }
}

/// The local file system behind a gate: an armed gate holds the next
/// write until released; the order of physical writes is recorded by
/// target file name.
#[derive(Debug, Default)]
struct Gated {
    gate: Mutex<Option<(mpsc::Sender<()>, mpsc::Receiver<()>)>>,
    order: Mutex<Vec<String>>,
}

impl Gated {
    /// Arms the gate and forgets the recorded order; returns the arrival
    /// signal and the release.
    fn arm(&self) -> (mpsc::Receiver<()>, mpsc::Sender<()>) {
        let (arrived_tx, arrived) = mpsc::channel();
        let (release, release_rx) = mpsc::channel();
        *self.gate.lock().expect("unpoisoned") = Some((arrived_tx, release_rx));
        self.order.lock().expect("unpoisoned").clear();
        (arrived, release)
    }

    fn order(&self) -> Vec<String> {
        self.order.lock().expect("unpoisoned").clone()
    }
}

impl MetadataFileSystem for Gated {
    fn persist_atomic(&self, target: &Path, bytes: &[u8]) -> RuntimeResult<()> {
        let gate = self.gate.lock().expect("unpoisoned").take();
        if let Some((arrived, release)) = gate {
            let _ = arrived.send(());
            let _ = release.recv();
        }
        let written = LocalMetadataFileSystem.persist_atomic(target, bytes);
        let name = target
            .file_stem()
            .map_or_else(String::new, |stem| stem.to_string_lossy().into_owned());
        self.order.lock().expect("unpoisoned").push(name);
        written
    }
}

fn accepted(outcome: RuntimeResult<MetadataIoAdmissionOutcome>) -> MetadataIoReceipt {
    match outcome.expect("admitted") {
        MetadataIoAdmissionOutcome::Accepted(receipt) => receipt,
        MetadataIoAdmissionOutcome::TargetConflict(_) => panic!("conflict"),
    }
}

fn deadline() -> MetadataDeadline {
    MetadataDeadline::after(Duration::from_secs(60))
}

fn actor(
    context: &ChildServiceContext,
    writers: usize,
    fs: Arc<dyn MetadataFileSystem>,
) -> MetadataIoActor {
    MetadataIoConfig::default()
        .into_plan()
        .expect("valid")
        .with_max_concurrent_writes(NonZeroUsize::new(writers).expect("positive"))
        .start_with_file_system(context, fs)
        .expect("started")
}

fn bare_writes(owner: &RuntimeOwner, dir: &Path) -> Duration {
    bare_writes_to(owner, vec![dir.join("bare.json"); WRITES])
}

/// One `spawn_blocking(persist_atomic)` round trip per target, in order.
fn bare_writes_to(owner: &RuntimeOwner, targets: Vec<PathBuf>) -> Duration {
    owner.block_on(async move {
        let started = wall_clock();
        for target in targets {
            tokio::task::spawn_blocking(move || {
                LocalMetadataFileSystem
                    .persist_atomic(&target, &[7u8; SNAPSHOT])
                    .expect("written")
            })
            .await
            .expect("joined");
        }
        started.elapsed()
    })
}

fn actor_writes(owner: &RuntimeOwner, actor: &MetadataIoActor, dir: &Path) -> Duration {
    let target = dir.join("actor.json");
    let actor = actor.clone();
    owner.block_on(async move {
        let started = wall_clock();
        for _ in 0..WRITES {
            let outcome = actor
                .submit_next_durable("actor", target.clone(), vec![7u8; SNAPSHOT], deadline())
                .await
                .expect("admitted");
            assert!(matches!(outcome, MetadataIoDurabilityOutcome::Durable(_)));
        }
        started.elapsed()
    })
}

/// One `gated_release` round through `actor` (one writer over `fs`):
/// the hot resource's first write is held at the gate; the timer covers
/// `QUEUED` hot submissions, one cold submission, the release and every
/// receipt settling. Asserts coalescing and the hot/cold order.
fn gated_release(
    owner: &RuntimeOwner,
    actor: &MetadataIoActor,
    fs: &Gated,
    dir: &Path,
) -> Duration {
    let hot = dir.join("hot.json");
    let cold = dir.join("cold.json");
    let (arrived, release) = fs.arm();
    let first = owner.block_on(async {
        accepted(actor.submit_next("hot", hot.clone(), vec![7u8; SNAPSHOT], deadline()))
    });
    arrived
        .recv_timeout(Duration::from_secs(60))
        .expect("the first write reached the gate");
    let elapsed = owner.block_on(async move {
        let started = wall_clock();
        let queued: Vec<MetadataIoReceipt> = (0..QUEUED)
            .map(|_| {
                accepted(actor.submit_next("hot", hot.clone(), vec![7u8; SNAPSHOT], deadline()))
            })
            .collect();
        let cold = accepted(actor.submit_next("cold", cold, vec![7u8; SNAPSHOT], deadline()));
        release.send(()).expect("the held write waits");
        first.wait_until(deadline()).await.expect("durable");
        let cold_generation = cold.generation();
        let cold_durable = cold
            .wait_until(deadline())
            .await
            .expect("the cold resource is durable");
        assert_eq!(cold_durable, cold_generation);
        for receipt in queued {
            receipt.wait_until(deadline()).await.expect("durable");
        }
        started.elapsed()
    });
    assert_eq!(
        fs.order(),
        ["hot", "cold", "hot"],
        "the queued hot submissions coalesce into one write after the cold resource's"
    );
    elapsed
}

/// The baseline of [`gated_release`]: its three physical writes, each
/// through `spawn_blocking`.
fn three_bare_writes(owner: &RuntimeOwner, dir: &Path) -> Duration {
    let (hot, cold) = (dir.join("bare-hot.json"), dir.join("bare-cold.json"));
    bare_writes_to(owner, vec![hot.clone(), cold, hot])
}

/// 8 resources × `PER_RESOURCE` durable writes each: one pipeline per
/// resource (each waits for its own write before submitting the next),
/// all resources at once.
fn spread_writes(
    owner: &RuntimeOwner,
    actor: &MetadataIoActor,
    dir: &Path,
    label: &'static str,
) -> Duration {
    // Independent resources: each in its own directory, so their directory
    // syncs do not queue on one directory inode.
    let targets: Vec<PathBuf> = (0..RESOURCES)
        .map(|resource| dir.join(format!("{label}-{resource}")).join("state.json"))
        .collect();
    let actor = actor.clone();
    owner.block_on(async move {
        let started = wall_clock();
        let pipelines = targets.into_iter().enumerate().map(|(resource, target)| {
            let actor = actor.clone();
            async move {
                for _ in 0..PER_RESOURCE {
                    let outcome = actor
                        .submit_next_durable(
                            format!("{label}-{resource}"),
                            target.clone(),
                            vec![7u8; SNAPSHOT],
                            deadline(),
                        )
                        .await
                        .expect("admitted");
                    assert!(matches!(outcome, MetadataIoDurabilityOutcome::Durable(_)));
                }
            }
        });
        futures::future::join_all(pipelines).await;
        started.elapsed()
    })
}

fn bench(c: &mut Criterion) {
    let owner = RuntimeOwner::plan(RuntimeConfig::for_parallelism("metadata-bench", 2))
        .expect("valid")
        .build()
        .expect("builds");
    let dir = tempfile::tempdir().expect("temp dir");
    let context = owner.root_context().component("criterion");
    let durable = actor(&context, 1, Arc::new(LocalMetadataFileSystem));
    let mut group = c.benchmark_group("durable_write");
    group.sample_size(10);
    group.bench_function("bare_spawn_blocking_replacement", |b| {
        b.iter_custom(|iterations| {
            (0..iterations)
                .map(|_| bare_writes(&owner, dir.path()) / WRITES as u32)
                .sum()
        });
    });
    group.bench_function("metadata_io_actor", |b| {
        b.iter_custom(|iterations| {
            (0..iterations)
                .map(|_| actor_writes(&owner, &durable, dir.path()) / WRITES as u32)
                .sum()
        });
    });
    group.finish();
    let gated = Arc::new(Gated::default());
    let gated_actor = actor(
        &context,
        1,
        Arc::clone(&gated) as Arc<dyn MetadataFileSystem>,
    );
    let mut group = c.benchmark_group("gated_release");
    group.sample_size(10);
    group.bench_function("three_bare_writes", |b| {
        b.iter_custom(|iterations| {
            (0..iterations)
                .map(|_| three_bare_writes(&owner, dir.path()))
                .sum()
        });
    });
    group.bench_function("held_hot_write_64_queued_and_one_cold", |b| {
        b.iter_custom(|iterations| {
            (0..iterations)
                .map(|_| gated_release(&owner, &gated_actor, &gated, dir.path()))
                .sum()
        });
    });
    group.finish();
}

fn main() {
    if run_criterion(bench).is_none() {
        return;
    }
    let owner = RuntimeOwner::plan(RuntimeConfig::for_parallelism("metadata-bench", 2))
        .expect("valid")
        .build()
        .expect("builds");
    let dir = tempfile::tempdir().expect("temp dir");
    let context = owner.root_context().component("paired");
    let single = actor(&context, 1, Arc::new(LocalMetadataFileSystem));
    let (ratio, actor_ns, bare_ns) = paired_median(
        ROUNDS,
        || actor_writes(&owner, &single, dir.path()),
        || bare_writes(&owner, dir.path()),
    );
    let per_write = |ns: f64| ns / WRITES as f64;
    let mut targets = vec![target(
        "durable_write: actor / bare replacement + spawn_blocking round trip",
        1.1,
        ratio,
    )];
    // Burst: 1,000 submissions to one resource.
    let counting = Arc::new(Counting::default());
    let burst_actor = actor(
        &context,
        1,
        Arc::clone(&counting) as Arc<dyn MetadataFileSystem>,
    );
    let burst_target = dir.path().join("burst.json");
    let burst_elapsed = owner.block_on({
        let actor = burst_actor.clone();
        async move {
            let started = wall_clock();
            let receipts: Vec<_> = (1..=BURST)
                .map(|generation| {
                    let request = MetadataWriteRequest::new(
                        "burst",
                        generation,
                        burst_target.clone(),
                        vec![7u8; SNAPSHOT],
                    );
                    match actor.submit(request, deadline()).expect("admitted") {
                        MetadataIoAdmissionOutcome::Accepted(receipt) => receipt,
                        MetadataIoAdmissionOutcome::TargetConflict(_) => panic!("conflict"),
                    }
                })
                .collect();
            for receipt in receipts {
                receipt.wait_until(deadline()).await.expect("durable");
            }
            started.elapsed()
        }
    });
    let physical = counting.writes.load(Ordering::SeqCst);
    targets.push(target(
        "burst: physical writes for 1,000 submissions to one resource",
        3.0,
        physical as f64,
    ));
    // Concurrency: 8 resources with 1 writer vs 4 writers.
    let four = actor(&context, 4, Arc::new(LocalMetadataFileSystem));
    let (speedup, serial_ns, parallel_ns) = paired_median(
        ROUNDS,
        || spread_writes(&owner, &single, dir.path(), "serial"),
        || spread_writes(&owner, &four, dir.path(), "parallel"),
    );
    // Gated release: a held hot write, 64 hot and one cold submission
    // queued behind it.
    let gated = Arc::new(Gated::default());
    let gated_actor = actor(
        &context,
        1,
        Arc::clone(&gated) as Arc<dyn MetadataFileSystem>,
    );
    let (gated_ratio, gated_ns, three_bare_ns) = paired_median(
        ROUNDS,
        || gated_release(&owner, &gated_actor, &gated, dir.path()),
        || three_bare_writes(&owner, dir.path()),
    );
    targets.push(target(
        "gated_release: held write + 64 hot + 1 cold queued, through release / its 3 writes bare",
        1.25,
        gated_ratio,
    ));
    targets.push(json!({
        "key": "concurrency: 8 resources, throughput with 4 writers / with 1 writer",
        "target": 2.0,
        "measured": speedup,
        "met": speedup >= 2.0,
    }));
    let summary = json!({
        "bench": "metadata_io_bench",
        "snapshot_bytes": SNAPSHOT,
        "durable_write": {
            "median_ratio": ratio,
            "actor_ns_per_write": per_write(actor_ns),
            "bare_ns_per_write": per_write(bare_ns),
        },
        "burst": {
            "submissions": BURST,
            "physical_writes": physical,
            "elapsed_ns": burst_elapsed.as_nanos() as u64,
        },
        "concurrency": {
            "single_writer_median_ns": serial_ns,
            "four_writers_median_ns": parallel_ns,
            "throughput_ratio": speedup,
        },
        "gated_release": {
            "queued_hot_submissions": QUEUED,
            "physical_writes": 3,
            "median_ns": gated_ns,
            "three_bare_writes_median_ns": three_bare_ns,
            "ratio": gated_ratio,
        },
        "targets": targets,
    });
    publish("metadata_io.json", &summary);
}
