//! The `common` helpers end to end: local time follows `TZ` (checked in
//! child processes, since the zone is process-wide), and `string_to_file`
//! writers killed with `SIGKILL` at random moments never leave a partial
//! file or backup (the crash test's method, `support/crash.rs`).
#![cfg(unix)]

#[path = "support/crash.rs"]
mod crash;

use std::path::{Path, PathBuf};
#[cfg(feature = "time-utils")]
use std::process::Command;
use std::time::Duration;
#[cfg(feature = "time-utils")]
use std::time::{SystemTime, UNIX_EPOCH};

use crash::{
    kill_after_random_delay, parent_still_waits, spawn_ready, temporaries, XorShift, READY_LINE,
};
use rocketmq_runtime::common::file_utils;
#[cfg(feature = "time-utils")]
use rocketmq_runtime::common::time_utils;

#[cfg(feature = "time-utils")]
/// Set only in a local-time child: `<zone>|<string2>|<string3>` expected
/// for [`SAMPLE_MILLIS`].
const TIME_CHILD_ENV: &str = "ROCKETMQ_TIME_CHILD_EXPECT";
#[cfg(feature = "time-utils")]
const TIME_CHILD_TEST: &str = "local_time_child";
#[cfg(feature = "time-utils")]
/// 2025-12-02T08:30:05.123Z.
const SAMPLE_MILLIS: i64 = 1_764_664_205_123;

#[cfg(feature = "time-utils")]
fn millis_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after the epoch")
        .as_millis() as u64
}

#[cfg(feature = "time-utils")]
/// The child: checks the helpers against its `TZ`. Without the variable
/// (a normal test run) it does nothing.
#[test]
fn local_time_child() {
    let Ok(expect) = std::env::var(TIME_CHILD_ENV) else {
        return;
    };
    let mut fields = expect.split('|');
    let (zone, string2, string3) = (
        fields.next().expect("zone"),
        fields.next().expect("string2"),
        fields.next().expect("string3"),
    );
    assert_eq!(std::env::var("TZ").as_deref(), Ok(zone));
    assert_eq!(
        time_utils::time_millis_to_human_string2(SAMPLE_MILLIS),
        string2
    );
    assert_eq!(
        time_utils::time_millis_to_human_string3(SAMPLE_MILLIS),
        string3
    );
    assert_eq!(
        time_utils::time_millis_to_human_string(SAMPLE_MILLIS),
        format!("{string3}123")
    );

    let before = millis_now();
    let millis = time_utils::current_millis();
    let nanos = time_utils::current_nano();
    let secs = time_utils::current_secs();
    let after = millis_now();
    assert!(
        before <= millis && millis <= after,
        "{before} {millis} {after}"
    );
    assert!(before / 1_000 <= secs && secs <= after / 1_000);
    assert!(before <= nanos / 1_000_000 && nanos / 1_000_000 <= after);

    // Both zones have whole-hour or half-hour offsets and no DST.
    let now = millis_now();
    let next_minute = time_utils::compute_next_minutes_time_millis();
    assert_eq!(next_minute % 60_000, 0);
    assert!(now < next_minute && next_minute <= now + 60_000 + 1_000);
    let next_morning = time_utils::compute_next_morning_time_millis();
    assert!(now < next_morning && next_morning <= now + 86_400_000 + 1_000);
    assert!(
        time_utils::time_millis_to_human_string3(next_morning as i64).ends_with("000000"),
        "local midnight"
    );
    let hour_before = &time_utils::time_millis_to_human_string3(millis_now() as i64)[8..10];
    let listed = time_utils::is_it_time_to_do(&format!("{hour_before};"));
    let hour_after = &time_utils::time_millis_to_human_string3(millis_now() as i64)[8..10];
    assert!(
        listed || hour_before != hour_after,
        "the current hour is listed"
    );
    assert!(!time_utils::is_it_time_to_do("25;-1;x"));
}

#[cfg(feature = "time-utils")]
#[test]
fn local_time_follows_the_tz_variable() {
    if std::env::var_os(TIME_CHILD_ENV).is_some() {
        return;
    }
    let exe = std::env::current_exe().expect("test binary");
    for expect in [
        "UTC|2025-12-02 08:30:05,123|20251202083005",
        "Asia/Kolkata|2025-12-02 14:00:05,123|20251202140005",
        "America/New_York|2025-12-02 03:30:05,123|20251202033005",
    ] {
        let zone = expect.split('|').next().expect("zone");
        let output = Command::new(&exe)
            .args(["--exact", TIME_CHILD_TEST, "--test-threads=1"])
            .env("TZ", zone)
            .env(TIME_CHILD_ENV, expect)
            .output()
            .expect("run the child");
        assert!(
            output.status.success(),
            "{zone}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// Set only in a writer child: its working directory.
const WRITER_DIR_ENV: &str = "ROCKETMQ_FILE_WRITER_DIR";
const WRITER_TEST: &str = "file_writer_child";
const TARGET: &str = "state.properties";
const BACKUP: &str = "state.properties.bak";
const ROUNDS: usize = 100;

/// Generation `generation`'s content: its number on each of a number of
/// lines that depends on it, so a torn or mixed file is detectable.
fn content(generation: u64) -> String {
    let lines = 1_000 + (generation.wrapping_mul(7_919) % 9_000) as usize;
    format!("{generation}\n").repeat(lines)
}

/// The generation of a complete file, or what is wrong with it.
fn decode(text: &str) -> Result<u64, String> {
    let generation: u64 = text
        .lines()
        .next()
        .and_then(|line| line.parse().ok())
        .ok_or_else(|| format!("no generation in {:?}", &text[..text.len().min(32)]))?;
    if text != content(generation) {
        return Err(format!("generation {generation} is torn or mixed"));
    }
    Ok(generation)
}

fn generation_at(path: &Path) -> Option<u64> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            Some(decode(&text).unwrap_or_else(|damage| panic!("{}: {damage}", path.display())))
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
        Err(error) => panic!("{}: {error}", path.display()),
    }
}

/// The child: replaces the file generation after generation until killed.
#[test]
fn file_writer_child() {
    let Some(dir) = std::env::var_os(WRITER_DIR_ENV).map(PathBuf::from) else {
        return;
    };
    let target = dir.join(TARGET);
    let mut generation = generation_at(&target).unwrap_or(0);
    let parent = std::os::unix::process::parent_id();
    println!("{READY_LINE}");
    while generation < 1_000_000 && parent_still_waits(parent, &dir) {
        generation += 1;
        if file_utils::string_to_file(content(generation), &target).is_err() {
            return;
        }
    }
}

#[test]
fn killed_string_to_file_writers_leave_complete_files() {
    if std::env::var_os(WRITER_DIR_ENV).is_some() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let target = dir.path().join(TARGET);
    let backup = dir.path().join(BACKUP);
    let mut random = XorShift(0x0123_4567_89AB_CDEF);
    let mut previous = None;
    let mut rounds_with_progress = 0;
    for round in 0..ROUNDS {
        let child = spawn_ready(WRITER_TEST, &[(WRITER_DIR_ENV, dir.path().as_os_str())]);
        kill_after_random_delay(child, &mut random, Duration::from_millis(20));
        let current = generation_at(&target);
        let kept = generation_at(&backup);
        assert!(current >= previous, "round {round}: went back");
        if current > previous {
            rounds_with_progress += 1;
        }
        previous = current;
        // The backup holds the previous generation, or (killed between the
        // backup and the replacement) the current one.
        if let (Some(current), Some(kept)) = (current, kept) {
            assert!(
                kept == current || kept + 1 == current,
                "round {round}: backup {kept}, file {current}"
            );
        }
        let mut leftovers = temporaries(dir.path(), &[TARGET, BACKUP]);
        assert!(leftovers.len() <= 1, "round {round}: {leftovers:?}");
        if let Some(name) = leftovers.pop() {
            std::fs::remove_file(dir.path().join(name)).expect("remove the leftover temporary");
        }
    }
    println!(
        "{ROUNDS} rounds: final generation {previous:?}, {rounds_with_progress} advanced the file"
    );
    assert!(rounds_with_progress > 0, "no round completed a write");
}
