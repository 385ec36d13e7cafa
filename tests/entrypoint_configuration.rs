//! The entrypoint's answers to bad configuration: every refused
//! `ROCKETMQ_*` value exits 2 with one line naming the variable and what is
//! accepted (no panic, no backtrace), `--help` lists every variable the
//! crate reads, and a probe address in use exits 1 naming the address and
//! the OS error.
#![cfg(all(feature = "probes", feature = "metrics"))]

mod support;

use std::ffi::OsString;
use std::path::Path;
use std::process::{Output, Stdio};

use support::example_command;

/// Runs the example (stopping at once if it starts) with only `vars` of the
/// `ROCKETMQ_*` environment set; `RUST_BACKTRACE=1`, so a panic would show.
fn run_with(vars: &[(&str, OsString)]) -> Output {
    let mut command = example_command();
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("ROCKETMQ_") {
            command.env_remove(name);
        }
    }
    for (name, value) in vars {
        command.env(name, value);
    }
    command
        .env("RUST_BACKTRACE", "1")
        .args(["--run-for", "0"])
        .stdin(Stdio::null())
        .output()
        .expect("run the example")
}

#[test]
fn every_refused_environment_value_exits_2_naming_the_variable_and_the_accepted_form() {
    let cases: Vec<(&str, OsString, &str)> = vec![
        (
            "ROCKETMQ_SHUTDOWN_TIMEOUT_SECONDS",
            "abc".into(),
            "whole seconds in 1..=300",
        ),
        (
            "ROCKETMQ_SHUTDOWN_TIMEOUT_SECONDS",
            "0".into(),
            "whole seconds in 1..=300",
        ),
        (
            "ROCKETMQ_SHUTDOWN_TIMEOUT_SECONDS",
            "301".into(),
            "whole seconds in 1..=300",
        ),
        (
            "ROCKETMQ_SHUTDOWN_TIMEOUT_SECONDS",
            "-1".into(),
            "whole seconds in 1..=300",
        ),
        (
            "ROCKETMQ_LIVENESS_STALE_SECONDS",
            "1".into(),
            "whole seconds in 2..=300",
        ),
        (
            "ROCKETMQ_DRAIN_DELAY_SECONDS",
            "-1".into(),
            "whole seconds in 0..=300",
        ),
        (
            "ROCKETMQ_DRAIN_DELAY_SECONDS",
            "45".into(),
            "fewer seconds than the shutdown timeout",
        ),
        (
            "ROCKETMQ_HEALTH_BIND_ADDR",
            "garbage".into(),
            "a socket address",
        ),
        (
            "ROCKETMQ_HEALTH_DRAIN_METHODS",
            "DELETE".into(),
            "POST or GET,POST",
        ),
        (
            "ROCKETMQ_PROCESS_MEMORY_LIMIT_BYTES",
            "0".into(),
            "a positive whole number of bytes",
        ),
        (
            "ROCKETMQ_PROCESS_MEMORY_LIMIT_BYTES",
            "lots".into(),
            "a positive whole number of bytes",
        ),
        // Accepted by the crate, below what the broker runs in.
        (
            "ROCKETMQ_PROCESS_MEMORY_LIMIT_BYTES",
            "1".into(),
            "minimum of 1048576 bytes",
        ),
        (
            "ROCKETMQ_PROCESS_MEMORY_LIMIT_BYTES",
            "1048575".into(),
            "minimum of 1048576 bytes",
        ),
        (
            "ROCKETMQ_HEALTH_DRAIN_TOKEN",
            "too-short".into(),
            "16 to 256 visible ASCII characters",
        ),
        // A well-formed address this host does not have.
        (
            "ROCKETMQ_HEALTH_BIND_ADDR",
            "192.0.2.1:8080".into(),
            "a local socket address",
        ),
    ];
    #[cfg(unix)]
    let cases = {
        use std::os::unix::ffi::OsStringExt;
        let mut cases = cases;
        cases.push((
            "ROCKETMQ_SHUTDOWN_TIMEOUT_SECONDS",
            OsString::from_vec(vec![b'3', 0xff]),
            "whole seconds in 1..=300",
        ));
        cases.push((
            "ROCKETMQ_HEALTH_BIND_ADDR",
            OsString::from_vec(vec![0xff]),
            "a socket address",
        ));
        cases
    };
    for (variable, value, accepted) in cases {
        let output = run_with(&[(variable, value.clone())]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let case = format!("{variable}={value:?}: {stderr}");
        assert_eq!(output.status.code(), Some(2), "{case}");
        assert_eq!(stderr.lines().count(), 1, "one line: {case}");
        assert!(stderr.contains(variable), "names the variable: {case}");
        assert!(stderr.contains(accepted), "says what is accepted: {case}");
        assert!(!stderr.contains("panicked"), "{case}");
        assert!(!stderr.contains("backtrace"), "{case}");
        assert!(output.stdout.is_empty(), "no report: {case}");
    }
}

/// A probe server bound beyond loopback without a drain token warns at
/// start that anyone who can reach it can drain the process; with a token
/// (or on loopback) it does not.
#[test]
fn a_probe_beyond_loopback_without_a_drain_token_warns_at_start() {
    let warning = "beyond loopback without a drain token";
    let any = ("ROCKETMQ_HEALTH_BIND_ADDR", OsString::from("0.0.0.0:0"));
    let output = run_with(std::slice::from_ref(&any));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains(warning), "{stderr}");
    assert!(
        stderr.contains("ROCKETMQ_HEALTH_DRAIN_TOKEN"),
        "names the remedy: {stderr}"
    );
    for vars in [
        vec![
            any,
            (
                "ROCKETMQ_HEALTH_DRAIN_TOKEN",
                OsString::from("a-long-enough-drain-token"),
            ),
        ],
        vec![("ROCKETMQ_HEALTH_BIND_ADDR", OsString::from("127.0.0.1:0"))],
    ] {
        let output = run_with(&vars);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{stderr}");
        assert!(!stderr.contains(warning), "{vars:?}: {stderr}");
    }
}

/// Every memory limit from 1 MiB up starts (and stops cleanly).
#[test]
fn every_memory_limit_from_one_mib_up_starts() {
    for bytes in [1_u64 << 20, (1 << 20) + 1, 64 << 20, u64::MAX] {
        let output = run_with(&[(
            "ROCKETMQ_PROCESS_MEMORY_LIMIT_BYTES",
            bytes.to_string().into(),
        )]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{bytes} bytes: {stderr}");
    }
}

/// Every `"ROCKETMQ_..."` string constant in the crate's source.
fn variables_in_source(dir: &Path, found: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).expect("readable source dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            variables_in_source(&path, found);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            let text = std::fs::read_to_string(&path).expect("readable source");
            for (start, _) in text.match_indices("\"ROCKETMQ_") {
                let name: String = text[start + 1..]
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                if !found.contains(&name) {
                    found.push(name);
                }
            }
        }
    }
}

#[test]
fn help_lists_every_variable_the_crate_reads_and_the_exit_codes() {
    let output = example_command()
        .arg("--help")
        .output()
        .expect("run the example");
    assert_eq!(output.status.code(), Some(0));
    let help = String::from_utf8_lossy(&output.stdout);
    let mut in_source = Vec::new();
    variables_in_source(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut in_source,
    );
    assert!(in_source.len() >= 6, "found {in_source:?}");
    let catalog: Vec<&str> = rocketmq_runtime::ENVIRONMENT_VARIABLES
        .iter()
        .map(|variable| variable.name)
        .collect();
    for name in &in_source {
        assert!(
            catalog.contains(&name.as_str()),
            "{name} is not in ENVIRONMENT_VARIABLES"
        );
    }
    for variable in rocketmq_runtime::ENVIRONMENT_VARIABLES {
        assert!(
            help.contains(variable.name),
            "--help omits {}",
            variable.name
        );
        assert!(
            help.contains(variable.default),
            "--help omits {}'s default",
            variable.name
        );
        assert!(
            help.contains(variable.accepted),
            "--help omits {}'s range",
            variable.name
        );
    }
    for flag in ["--run-for", "--data-dir", "--help"] {
        assert!(help.contains(flag), "--help omits {flag}");
    }
    for code in ["0  ", "1  ", "2  "] {
        assert!(help.contains(code), "--help omits exit code {code:?}");
    }
}

#[test]
fn unknown_flags_and_bad_flag_values_exit_2_with_one_line() {
    for args in [&["--bogus"][..], &["--run-for", "soon"], &["--run-for"]] {
        let output = example_command()
            .args(args)
            .output()
            .expect("run the example");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    }
}

#[test]
fn a_probe_address_in_use_exits_1_naming_the_address_and_the_os_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a port");
    let address = taken.local_addr().expect("bound address").to_string();
    let output = run_with(&[("ROCKETMQ_HEALTH_BIND_ADDR", address.clone().into())]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&address), "names the address: {stderr}");
    let os_error = std::io::Error::from(std::io::ErrorKind::AddrInUse).to_string();
    assert!(
        stderr.contains("os error") || stderr.contains(&os_error),
        "names the OS error: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    drop(taken);
}
