//! Crash consistency of `LocalMetadataFileSystem::persist_atomic`, called
//! directly and through a `MetadataIoActor`.
//!
//! The parent test re-runs this test binary as a child process that writes
//! snapshot generations to one target forever (even rounds call
//! `persist_atomic` directly; odd rounds build a `RuntimeOwner` and commit
//! each generation with `MetadataIoActor::submit_commit`, checking
//! `confirmed_durable_generation` after each), kills it with `SIGKILL`
//! (`Child::kill`) at a pseudo-random moment, and checks what a restarted
//! process would find: no target, or exactly one complete generation (never a
//! torn or mixed file), never an older generation than before, and at most the
//! one temporary file that was being written at the kill.
//!
//! Snapshot format: generation `g` is `size(g)` bytes (64 KiB..=1 MiB, a
//! multiple of 8, derived from `g`) filled with the 8-byte little-endian `g`,
//! so truncation (length), a mix of generations (a differing 8-byte word) and
//! a wrong generation's size are all detectable.
//!
//! Timing: the parent waits for the child's ready line, then blocks for a
//! seeded xorshift delay of 0..20 ms with `std::thread::sleep` (a plain
//! synchronous test with no runtime; the delay is the point of the test).
//! 200 rounds take a few seconds on two cores.
#![cfg(unix)]

#[path = "support/crash.rs"]
mod crash;

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crash::{
    kill_after_random_delay, parent_still_waits, spawn_ready, temporaries, XorShift, READY_LINE,
};

use rocketmq_runtime::{
    LocalMetadataFileSystem, MetadataDeadline, MetadataFileSystem, MetadataGeneration,
    MetadataIoCommitAdmissionOutcome, MetadataIoCommitOutcome, MetadataIoConfig,
    MetadataWriteRequest, RuntimeConfig, RuntimeOwner,
};

/// Set (to the working directory) only in the child process.
const CHILD_DIR_ENV: &str = "ROCKETMQ_CRASH_CHILD_DIR";
/// Set to [`ACTOR_MODE`] in the child of an odd round.
const CHILD_MODE_ENV: &str = "ROCKETMQ_CRASH_CHILD_MODE";
/// The child writes through a metadata actor instead of calling
/// `persist_atomic` itself.
const ACTOR_MODE: &str = "actor";
/// The actor's resource name for the snapshot.
const RESOURCE: &str = "snapshot";
/// The child's test name (as passed to `--exact`).
const CHILD_TEST: &str = "crash_child_writer";
const TARGET_NAME: &str = "snapshot.bin";
const ROUNDS: usize = 200;
const MAX_KILL_DELAY: Duration = Duration::from_millis(20);
const MIN_SNAPSHOT_BYTES: usize = 64 * 1024;
const MAX_SNAPSHOT_BYTES: usize = 1024 * 1024;
/// A child never writes more than this many generations (a safety stop in
/// case the parent disappears without killing it).
const CHILD_MAX_GENERATIONS: u64 = 1_000_000;

/// The length of generation `generation`'s snapshot.
fn snapshot_size(generation: u64) -> usize {
    let words = (MAX_SNAPSHOT_BYTES - MIN_SNAPSHOT_BYTES) / 8;
    let mut random = XorShift(generation.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    MIN_SNAPSHOT_BYTES + (random.next() % (words as u64 + 1)) as usize * 8
}

fn snapshot(generation: u64) -> Vec<u8> {
    let size = snapshot_size(generation);
    let word = generation.to_le_bytes();
    let mut bytes = Vec::with_capacity(size);
    while bytes.len() < size {
        bytes.extend_from_slice(&word);
    }
    bytes
}

/// The generation of a complete snapshot, or a description of the damage.
fn decode(bytes: &[u8]) -> Result<u64, String> {
    if bytes.len() < 8 || bytes.len() % 8 != 0 {
        return Err(format!("torn length {}", bytes.len()));
    }
    let word: [u8; 8] = bytes[..8].try_into().expect("8 bytes");
    let generation = u64::from_le_bytes(word);
    if let Some(offset) = bytes
        .chunks_exact(8)
        .position(|chunk| chunk != word.as_slice())
    {
        return Err(format!(
            "generation {generation} mixed with other data at byte {}",
            offset * 8
        ));
    }
    let expected = snapshot_size(generation);
    if bytes.len() != expected {
        return Err(format!(
            "generation {generation} has {} bytes, expected {expected}",
            bytes.len()
        ));
    }
    Ok(generation)
}

/// The generation currently at `target` (`None` when absent).
fn read_generation(target: &Path) -> Option<u64> {
    match fs::read(target) {
        Ok(bytes) => Some(decode(&bytes).unwrap_or_else(|damage| {
            panic!(
                "{} is not one complete generation: {damage}",
                target.display()
            )
        })),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
        Err(error) => panic!("reading {}: {error}", target.display()),
    }
}

/// The child: writes generation after generation until killed. Without the
/// environment variable (a normal test run) it does nothing.
#[test]
fn crash_child_writer() {
    let Some(dir) = std::env::var_os(CHILD_DIR_ENV).map(PathBuf::from) else {
        return;
    };
    let target = dir.join(TARGET_NAME);
    let generation = read_generation(&target).unwrap_or(0);
    let limit = generation + CHILD_MAX_GENERATIONS;
    let parent = std::os::unix::process::parent_id();
    // Stops by itself if the parent test died without killing it (the child
    // was re-parented) or its temporary directory is gone.
    let keep_writing = |generation: u64| generation < limit && parent_still_waits(parent, &dir);
    if std::env::var(CHILD_MODE_ENV).as_deref() == Ok(ACTOR_MODE) {
        write_through_actor(&target, generation, keep_writing);
    } else {
        write_directly(&target, generation, keep_writing);
    }
}

fn write_directly(target: &Path, mut generation: u64, keep_writing: impl Fn(u64) -> bool) {
    println!("{READY_LINE}");
    while keep_writing(generation) {
        generation += 1;
        if LocalMetadataFileSystem
            .persist_atomic(target, &snapshot(generation))
            .is_err()
        {
            return;
        }
    }
}

/// Commits each generation through a metadata actor (the local file
/// system) and checks that the actor confirms it durable.
fn write_through_actor(target: &Path, mut generation: u64, keep_writing: impl Fn(u64) -> bool) {
    let owner = RuntimeOwner::plan(RuntimeConfig::for_parallelism("crash-child", 2))
        .expect("valid plan")
        .build()
        .expect("runtime");
    let actor = MetadataIoConfig::default()
        .into_plan()
        .expect("valid metadata plan")
        .start(&owner.root_context().component("metadata"))
        .expect("actor");
    println!("{READY_LINE}");
    owner.block_on(async {
        while keep_writing(generation) {
            generation += 1;
            let request =
                MetadataWriteRequest::new(RESOURCE, generation, target, snapshot(generation));
            let deadline = MetadataDeadline::after(Duration::from_secs(30));
            match actor.submit_commit(request, deadline).await {
                Ok(MetadataIoCommitAdmissionOutcome::Completed(
                    MetadataIoCommitOutcome::Durable(durable),
                )) => {
                    assert_eq!(durable, MetadataGeneration::new(generation));
                    assert_eq!(
                        actor.confirmed_durable_generation(RESOURCE),
                        Some(durable),
                        "a committed generation is the confirmed one"
                    );
                }
                _ => return,
            }
        }
    });
}

#[test]
fn killed_writers_leave_no_target_or_exactly_one_complete_generation() {
    if std::env::var_os(CHILD_DIR_ENV).is_some() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let target = dir.path().join(TARGET_NAME);
    let mut random = XorShift(0x5DEE_CE66_D1CE_F00D);

    let mut previous = None;
    let mut rounds_with_temporary = 0;
    // Rounds since an actor last wrote (its start removed every stale
    // temporary file before its first write).
    let mut unswept_rounds = 0;
    let mut rounds_with_progress = 0;
    let mut actor_rounds_with_progress = 0;
    for round in 0..ROUNDS {
        let mode = if round % 2 == 1 { ACTOR_MODE } else { "direct" };
        let child = spawn_ready(
            CHILD_TEST,
            &[
                (CHILD_DIR_ENV, dir.path().as_os_str()),
                (CHILD_MODE_ENV, OsStr::new(mode)),
            ],
        );
        kill_after_random_delay(child, &mut random, MAX_KILL_DELAY);

        let generation = read_generation(&target);
        let previous_round = previous;
        assert!(
            generation >= previous,
            "round {round}: generation went back from {previous:?} to {generation:?}"
        );
        if generation > previous {
            rounds_with_progress += 1;
            if round % 2 == 1 {
                actor_rounds_with_progress += 1;
            }
        }
        previous = generation;

        // Leftovers are never removed here: an actor round that wrote
        // removed the earlier ones at its start, so at most its own is
        // left; other rounds add at most one each.
        let temporaries = temporaries(dir.path(), &[TARGET_NAME]);
        let swept = round % 2 == 1 && generation > previous_round;
        unswept_rounds = if swept { 0 } else { unswept_rounds + 1 };
        assert!(
            temporaries.len() <= unswept_rounds + 1,
            "round {round}: {} temporary files after {unswept_rounds} rounds without a sweep: {temporaries:?}",
            temporaries.len()
        );
        if !temporaries.is_empty() {
            rounds_with_temporary += 1;
        }
    }
    println!(
        "{ROUNDS} rounds: final generation {previous:?}, {rounds_with_progress} rounds advanced the target ({actor_rounds_with_progress} through the actor), {rounds_with_temporary} killed mid-write"
    );
    assert!(
        rounds_with_progress > actor_rounds_with_progress && actor_rounds_with_progress > 0,
        "both kinds of writer must complete a write in some round; the kill window never covered a whole write"
    );
}
