//! Crash tests: the test binary re-runs one of its own tests as a child
//! process that writes until the parent kills it with `SIGKILL`
//! (`Child::kill`) at a pseudo-random moment, and the parent checks what a
//! restarted process would find.
#![allow(dead_code, unreachable_pub)]

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Printed by the child once it is about to write.
pub const READY_LINE: &str = "ROCKETMQ_CRASH_CHILD_READY";

/// xorshift64: deterministic pseudo-random numbers from a non-zero seed.
#[derive(Debug)]
pub struct XorShift(pub u64);

impl XorShift {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

/// Kills and reaps the child if the parent test panics.
pub struct ChildGuard(Option<Child>);

impl ChildGuard {
    pub fn kill(&mut self) {
        if let Some(mut child) = self.0.take() {
            child.kill().expect("SIGKILL the child");
            child.wait().expect("reap the child");
        }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs test `child_test` of this binary as a child with `envs` and waits
/// for its [`READY_LINE`]; panics if it exits first.
pub fn spawn_ready(child_test: &str, envs: &[(&str, &OsStr)]) -> ChildGuard {
    let exe = std::env::current_exe().expect("test binary");
    let mut command = Command::new(exe);
    command
        .args(["--exact", child_test, "--nocapture", "--test-threads=1"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (name, value) in envs {
        command.env(name, value);
    }
    let mut guard = ChildGuard(Some(command.spawn().expect("spawn the child")));
    let stdout = guard
        .0
        .as_mut()
        .and_then(|child| child.stdout.take())
        .expect("child stdout");
    let ready = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        // The harness prints `test <name> ... ` before the test's own
        // output, on the same line.
        .any(|line| line.contains(READY_LINE));
    assert!(ready, "the child exited before writing");
    guard
}

/// Blocks for a pseudo-random delay below `max`, then kills the child.
pub fn kill_after_random_delay(mut child: ChildGuard, random: &mut XorShift, max: Duration) {
    let max_micros = u64::try_from(max.as_micros()).unwrap_or(u64::MAX).max(1);
    let delay = Duration::from_micros(random.next() % max_micros);
    #[allow(
        clippy::disallowed_methods,
        reason = "a synchronous crash test: the parent must block for a random delay before killing the child"
    )]
    std::thread::sleep(delay);
    child.kill();
}

/// The child's loop condition: the parent that started it is still its
/// parent (not re-parented after the parent died without killing it) and
/// `dir` still exists.
pub fn parent_still_waits(parent: u32, dir: &Path) -> bool {
    std::os::unix::process::parent_id() == parent && dir.is_dir()
}

/// The files of `dir` other than `kept`: each must be a temporary of one of
/// the durable replacement's targets (`.<name>.<suffix>.tmp`, `<name>` in
/// `kept`); returns them.
pub fn temporaries(dir: &Path, kept: &[&str]) -> Vec<String> {
    let mut temporaries = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let name = entry.expect("entry").file_name();
        let name = name.to_string_lossy().into_owned();
        if kept.contains(&name.as_str()) {
            continue;
        }
        assert!(
            kept.iter()
                .any(|target| name.starts_with(&format!(".{target}.")) && name.ends_with(".tmp")),
            "unexpected file {name}"
        );
        temporaries.push(name);
    }
    temporaries
}
