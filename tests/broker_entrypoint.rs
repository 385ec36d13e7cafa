//! The README's main job: `cargo run --example broker_entrypoint` exits 0 with
//! a healthy JSON report, after `--run-for` and after SIGTERM.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// `cargo test` builds examples next to the test binaries' directory.
fn example_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps");
    let binary = profile_dir
        .join("examples")
        .join(format!("broker_entrypoint{}", std::env::consts::EXE_SUFFIX));
    assert!(binary.exists(), "example not built at {}", binary.display());
    binary
}

/// Waits for the child with a hang guard; returns (success, stdout).
fn finish(mut child: Child) -> (bool, String) {
    let mut stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        let status = child.wait().expect("child status");
        let _ = tx.send((status.success(), out));
    });
    rx.recv_timeout(Duration::from_secs(120))
        .expect("hang guard: the entrypoint did not exit")
}

fn assert_healthy_report(stdout: &str) {
    let report: serde_json::Value =
        serde_json::from_str(stdout).expect("stdout is the JSON report");
    assert_eq!(report["name"], "rocketmq-broker");
    assert_eq!(report["timed_out"], 0);
    assert_eq!(report["leaked"], 0);
    let broker = &report["children"][0];
    assert_eq!(broker["name"], "broker");
    assert_eq!(
        broker["cancelled"], 1,
        "the request source was dropped at cancellation"
    );
    let child = |name: &str| {
        broker["children"]
            .as_array()
            .and_then(|children| children.iter().find(|child| child["name"] == name))
            .unwrap_or_else(|| panic!("no {name} component in {broker}"))
            .clone()
    };
    let maintenance = child("maintenance");
    assert!(
        maintenance["completed"].as_u64() >= Some(2),
        "both schedule drivers ended at cancellation: {maintenance}"
    );
    assert_eq!(maintenance["aborted"], 0);
    let worker = child("request-worker");
    assert!(
        worker["completed"].as_u64() >= Some(1),
        "the request worker drained and returned: {worker}"
    );
    assert_eq!(worker["aborted"], 0);
}

#[test]
fn run_for_exits_zero_with_a_healthy_report() {
    let child = Command::new(example_binary())
        .args(["--run-for", "0.5"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn example");
    let (success, stdout) = finish(child);
    assert!(success, "{stdout}");
    assert_healthy_report(&stdout);
}

#[test]
fn invalid_arguments_exit_with_usage_error() {
    let status = Command::new(example_binary())
        .args(["--run-for", "soon"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run example");
    assert_eq!(status.code(), Some(2));
}

#[cfg(unix)]
#[test]
fn sigterm_exits_zero_with_a_healthy_report() {
    let mut child = Command::new(example_binary())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn example");
    // The example installs its handlers before it reports running.
    let stderr = child.stderr.take().expect("piped stderr");
    let (ready_tx, ready_rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("broker running") {
                let _ = ready_tx.send(());
            }
        }
    });
    ready_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("hang guard: broker never reported running");
    let sent = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill(1) available");
    assert!(sent.success());
    let (success, stdout) = finish(child);
    assert!(success, "{stdout}");
    assert_healthy_report(&stdout);
}
