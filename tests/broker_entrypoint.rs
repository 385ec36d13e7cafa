//! The README's main job: `cargo run --example broker_entrypoint` exits 0 with
//! a healthy JSON report carrying its shutdown reason, after `--run-for`,
//! after SIGTERM and after a `/drainz` request to its probe server.
#![cfg(all(feature = "probes", feature = "metrics"))]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

mod support;

use support::example_command;

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

/// The named child of a report node.
fn child(node: &serde_json::Value, name: &str) -> serde_json::Value {
    node["children"]
        .as_array()
        .and_then(|children| children.iter().find(|child| child["name"] == name))
        .unwrap_or_else(|| panic!("no {name} component in {node}"))
        .clone()
}

fn assert_healthy_report(stdout: &str, reason: &str) {
    let report: serde_json::Value =
        serde_json::from_str(stdout).expect("stdout is the JSON report");
    assert_eq!(report["name"], "rocketmq-broker");
    assert_eq!(report["reason"], reason, "{report}");
    assert_eq!(report["timed_out"], 0);
    assert_eq!(report["leaked"], 0);
    assert_eq!(report["panicked"], 0);
    let lifecycle = child(&report, "lifecycle");
    assert_eq!(
        lifecycle["aborted"], 0,
        "probes and heartbeat stopped: {lifecycle}"
    );
    let metadata = child(&report, "metadata");
    assert_eq!(
        metadata["aborted"], 0,
        "the metadata coordinator drained: {metadata}"
    );
    let broker = child(&report, "broker");
    assert_eq!(
        broker["cancelled"], 1,
        "the request source was dropped at cancellation"
    );
    let maintenance = child(&broker, "maintenance");
    assert!(
        maintenance["cancelled"].as_u64() >= Some(2),
        "both schedule drivers ended at cancellation (counted cancelled): {maintenance}"
    );
    assert_eq!(maintenance["aborted"], 0);
    let worker = child(&broker, "request-worker");
    assert!(
        worker["cancelled"].as_u64() >= Some(1),
        "the request worker drained and returned after cancellation: {worker}"
    );
    assert_eq!(worker["aborted"], 0);
}

#[test]
fn run_for_exits_zero_with_a_healthy_report() {
    let child = example_command()
        .args(["--run-for", "0.5"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn example");
    let (success, stdout) = finish(child);
    assert!(success, "{stdout}");
    assert_healthy_report(&stdout, "internal");
}

#[test]
fn invalid_arguments_exit_with_usage_error() {
    for value in ["soon", "-1", "1e20", "NaN"] {
        let status = example_command()
            .args(["--run-for", value])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("run example");
        assert_eq!(status.code(), Some(2), "--run-for {value}");
    }
    // `--help` is not an error: usage on stdout, exit 0.
    let help = example_command()
        .arg("--help")
        .stderr(Stdio::null())
        .output()
        .expect("run example");
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).contains("usage: broker_entrypoint"));
    // A non-UTF-8 argument is a usage error, not a panic.
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let status = example_command()
            .arg(std::ffi::OsStr::from_bytes(b"--\xff"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("run example");
        assert_eq!(status.code(), Some(2));
    }
}

#[cfg(unix)]
#[test]
fn sigterm_exits_zero_with_a_healthy_report() {
    let mut child = example_command()
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn example");
    // The example installs its signal handlers before it reports running.
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
    terminate(&child);
    let (success, stdout) = finish(child);
    assert!(success, "{stdout}");
    assert_healthy_report(&stdout, "signal");
}

/// Sends SIGTERM to the example.
#[cfg(unix)]
fn terminate(child: &Child) {
    let sent = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill(1) available");
    assert!(sent.success());
}

/// Starts the example with a probe server on an ephemeral port; returns the
/// child, the address it reported once it was marked ready, and its later
/// stderr lines.
fn start_with_probes(extra_env: &[(&str, &str)]) -> (Child, SocketAddr, mpsc::Receiver<String>) {
    let mut command = example_command();
    command
        .env("ROCKETMQ_HEALTH_BIND_ADDR", "127.0.0.1:0")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (name, value) in extra_env {
        command.env(name, value);
    }
    let mut child = command.spawn().expect("spawn example");
    let stderr = child.stderr.take().expect("piped stderr");
    let (address_tx, address_rx) = mpsc::channel();
    let (lines_tx, lines_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut address = None;
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(listening) = line.strip_prefix("probes listening on http://") {
                address = listening.parse::<SocketAddr>().ok();
            }
            // The broker reports running after `mark_ready`.
            if line.contains("broker running") {
                let _ = address_tx.send(address);
            }
            let _ = lines_tx.send(line);
        }
    });
    let address = address_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("hang guard: broker never reported running")
        .expect("the probe address was reported before running");
    (child, address, lines_rx)
}

/// One HTTP/1.1 request; returns the status code and the whole response.
fn http(address: SocketAddr, method: &str, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(address).expect("connect to the probe server");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("hang guard");
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: probe\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
    )
    .expect("send request");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .expect("read the whole response");
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {response:?}"));
    (status, response)
}

#[test]
fn drain_request_revokes_readiness_and_exits_zero_with_reason_pre_stop() {
    // A 2 s drain delay keeps the probes serving after the drain request,
    // so the revoked readiness is observable before the process exits.
    let (child, address, _lines) = start_with_probes(&[("ROCKETMQ_DRAIN_DELAY_SECONDS", "2")]);
    assert_eq!(http(address, "GET", "/readyz").0, 200);
    assert_eq!(http(address, "GET", "/livez").0, 200);
    assert_eq!(http(address, "GET", "/startupz").0, 200);
    let (refused, response) = http(address, "GET", "/drainz");
    assert_eq!(refused, 405, "GET /drainz is refused by default");
    assert!(response.contains("Allow: POST"), "{response}");
    assert_eq!(http(address, "POST", "/drainz").0, 200);
    assert_eq!(
        http(address, "GET", "/readyz").0,
        503,
        "readiness is revoked as soon as the drain is requested"
    );
    assert_eq!(
        http(address, "GET", "/livez").0,
        200,
        "still live while draining"
    );
    let (success, stdout) = finish(child);
    assert!(success, "{stdout}");
    assert_healthy_report(&stdout, "pre_stop");
}

#[cfg(unix)]
#[test]
fn sigterm_with_probes_revokes_readiness_and_exits_zero_with_reason_signal() {
    let (child, address, lines) = start_with_probes(&[("ROCKETMQ_DRAIN_DELAY_SECONDS", "2")]);
    assert_eq!(http(address, "GET", "/readyz").0, 200);
    terminate(&child);
    // The broker reports `stopping (signal)` after the request is made and
    // before its 2 s drain delay: the probes still answer, not ready.
    let stopping = lines
        .iter()
        .find(|line| line.starts_with("stopping"))
        .expect("the broker reports stopping");
    assert!(stopping.starts_with("stopping (signal)"), "{stopping}");
    assert_eq!(
        http(address, "GET", "/readyz").0,
        503,
        "SIGTERM revokes readiness before the process exits"
    );
    let (success, stdout) = finish(child);
    assert!(success, "{stdout}");
    assert_healthy_report(&stdout, "signal");
}

/// The drain logs a one-line summary at INFO and, at DEBUG, the sanitized
/// V2 view as JSON.
#[test]
fn draining_logs_a_sanitized_diagnostics_view() {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let output = example_command()
            .args(["--run-for", "0.5"])
            .env("RUST_LOG", "debug")
            .output()
            .expect("the entrypoint runs");
        let _ = tx.send(output);
    });
    let output = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("hang guard: the entrypoint did not exit");
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|line| line.contains("diagnostics="))
        .collect();
    assert_eq!(lines.len(), 1, "one drain-time view: {stderr}");
    // At the default level, one line of words says the same.
    assert!(
        stderr
            .lines()
            .any(|line| line.contains("INFO") && line.contains("draining: broker ")),
        "{stderr}"
    );
    let json = lines[0]
        .split_once("diagnostics=")
        .map(|(_, json)| json)
        .expect("the view");
    let view: serde_json::Value = serde_json::from_str(json).expect("the view is JSON");
    assert_eq!(view["schema_version"], "rocketmq.runtime-diagnostics.v2");
    assert_eq!(view["component"], "broker");
    assert!(view["tasks"]["task_count"].as_u64() > Some(0), "{view}");
    assert_eq!(view["schedule"]["tasks_scanned"], 2, "{view}");
    assert_eq!(view["metadata"]["scope"], "local");
    assert!(!view["details"].as_array().expect("details").is_empty());
    for planted in [
        "broker-a",
        "consumer-offsets",
        "heartbeat",
        "request-worker",
    ] {
        assert!(!json.contains(planted), "{planted} in the sanitized view");
    }
}

/// The stop commits the last offset table before the metadata actor stops
/// (`submit_next_commit`) and reports the confirmed durable generation: the
/// table on disk is the one that generation committed. The same table is
/// flushed to the checkpoint through a drain lease.
#[test]
fn the_stop_commits_the_last_offset_table() {
    let data = tempfile::tempdir().expect("tempdir");
    let output = example_command()
        .args(["--run-for", "0.5", "--data-dir"])
        .arg(data.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("run example");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let generation: u64 = stderr
        .split_once("durable offsets generation ")
        .and_then(|(_, rest)| rest.split_once(|c: char| !c.is_ascii_digit()))
        .and_then(|(number, _)| number.parse().ok())
        .unwrap_or_else(|| panic!("no confirmed generation: {stderr}"));
    let table: serde_json::Value = serde_json::from_slice(
        &std::fs::read(data.path().join("consumer-offsets.json")).expect("the offset table"),
    )
    .expect("JSON");
    // Generation g carries the table of tick g - 1 (offset 10 per tick).
    assert_eq!(
        table["offsets"]["TopicTest-0"],
        (generation - 1) * 10,
        "{table}"
    );
    // The checkpoint, flushed through a drain lease after the broker's lane
    // closed, holds the same last table.
    let checkpoint: serde_json::Value = serde_json::from_slice(
        &std::fs::read(data.path().join("checkpoint.json")).expect("the checkpoint"),
    )
    .expect("JSON");
    assert_eq!(checkpoint, table);
}
