//! A broker-style entrypoint: the main job of this crate's README.
//!
//! It owns the runtime and a `ServiceLifecycle` configured from the
//! `ROCKETMQ_*` environment (probe server on `ROCKETMQ_HEALTH_BIND_ADDR`),
//! derives `lifecycle`, `metadata` and `broker` components from the sealed
//! root, runs scheduled maintenance (a fixed-rate heartbeat, a fixed-delay
//! offset flush on the managed `storage_io()` lane), durable offset
//! persistence and a critical request worker (one `OperationContext` per
//! simulated request, drained on shutdown). It runs until SIGTERM, SIGINT,
//! a `/drainz` request, a critical failure or `--run-for <seconds>`; then it
//! logs a sanitized diagnostics view of what it still owns (one `tracing`
//! event on stderr) and, after the optional drain delay, shuts the broker,
//! the metadata and
//! the runtime down in that order within the one deadline frozen by the
//! first request, prints the shutdown report (with its reason) as JSON and
//! exits non-zero if the report is unhealthy or the service failed.
//!
//! ```text
//! cargo run --example broker_entrypoint -- --run-for 2
//! ROCKETMQ_HEALTH_BIND_ADDR=127.0.0.1:8080 cargo run --example broker_entrypoint
//! cargo run --example broker_entrypoint -- --help
//! ```
//!
//! Under faults it tells the truth (README "Failure modes"): SIGTERM/SIGINT
//! handlers are the first thing `main` installs; the data directory is
//! checked (created, writable) and locked before anything starts; the offset
//! table is recovered from the last durable one on the metadata lane (a
//! foreign or corrupt file is moved aside, never overwritten); every write's
//! receipt is checked, so a failed write is counted, named in the report and
//! fails the exit; `/readyz` follows the storage; a closed or full stdout or
//! stderr never panics.
//!
//! This file is the recommended entrypoint, step by step: start (own the
//! runtime, derive components), serve until the first shutdown request,
//! stop in order within its one deadline, and report. The details live
//! beside it: `startup.rs` (the start sequence), `signals.rs` (early
//! signals, waiting for the stop), `broker.rs` (the simulated broker),
//! `storage.rs` (data directory, offset table, checkpoint), `flags.rs` (the
//! command line) and `report.rs` (the verdict and the exit code).
//!
//! Exit codes: 0 for a clean stop, 1 for an unhealthy or failed run
//! (including a startup failure and accepted offsets that did not become
//! durable), 2 for a usage error (an unknown flag, a bad flag value, an
//! empty `--data-dir`, a refused `ROCKETMQ_*` value). Errors are one line
//! on stderr naming what was wrong and what is accepted.

use std::num::{NonZeroU64, NonZeroUsize};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rocketmq_runtime::prelude::*;
use rocketmq_runtime::{
    BlockingDrainLease, BudgetClass, BudgetLimit, BudgetedQueue, CriticalFailureRecovery,
    CriticalFailureState, FullPolicy, MemoryLimitSource, MetadataDeadline, MetadataIoActor,
    MetadataIoAdmissionOutcome, MetadataIoCommitAdmissionOutcome, MetadataIoCommitOutcome,
    MetadataIoConfig, OperationContext, OperationWaitOutcome, OperationWaitPolicy,
    RootServiceContext, RuntimeComponent, RuntimeDiagnosticsInputs,
    RuntimeDiagnosticsViewOptionsV2, RuntimeError, RuntimeErrorContext, RuntimeErrorKind,
    RuntimeOperation, ScheduledTaskGroup, ServiceLifecycle, ServiceLifecycleState,
    ShutdownAnnotation, ShutdownReason, ShutdownRequest, ENVIRONMENT_VARIABLES,
};

/// One line on stderr. A closed or full stderr is ignored: the broker still
/// shuts down in order and exits with its verdict (`eprintln!` would panic).
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

/// Writes to stdout, ignoring a closed or full stdout (see [`note!`]).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut stdout = std::io::stdout().lock();
        let _ = write!(stdout, $($arg)*).and_then(|()| stdout.flush());
    }};
}

mod broker;
mod flags;
mod report;
mod signals;
mod startup;
mod storage;

use broker::*;
use flags::*;
use report::*;
use signals::*;
use startup::*;
use storage::*;

/// Exit code of a clean stop.
const EXIT_CLEAN: u8 = 0;
/// Exit code of an unhealthy or failed run, startup failures included.
const EXIT_FAILED: u8 = 1;
/// Exit code of a usage error: a bad flag or a refused `ROCKETMQ_*` value.
const EXIT_USAGE: u8 = 2;

/// One line for an operator: the error, its typed detail and its causes.
fn explain(error: &RuntimeError) -> String {
    let mut line = error.to_string();
    match error.context() {
        // `Display` already names the scope that refused.
        Some(RuntimeErrorContext::Scope { .. } | RuntimeErrorContext::LaneFull { .. }) | None => {}
        Some(context) => line.push_str(&format!(": {context}")),
    }
    for source in error.diagnostic_view().sources {
        line.push_str(&format!(": {source}"));
    }
    line
}

/// A commit's outcome other than durable, in words.
fn describe_commit(outcome: &Result<MetadataIoCommitAdmissionOutcome, RuntimeError>) -> String {
    match outcome {
        Ok(MetadataIoCommitAdmissionOutcome::Completed(MetadataIoCommitOutcome::Durable(
            generation,
        ))) => format!("durable as generation {}", generation.get()),
        Ok(MetadataIoCommitAdmissionOutcome::Completed(
            MetadataIoCommitOutcome::FailedBeforeCommit(error),
        )) => format!("failed before the commit: {}", explain(error)),
        Ok(MetadataIoCommitAdmissionOutcome::Completed(
            MetadataIoCommitOutcome::CommitOutcomeUnknown(error),
        )) => format!("commit outcome unknown: {}", explain(error)),
        Ok(MetadataIoCommitAdmissionOutcome::TargetConflict(request)) => {
            format!("another writer owns {}", request.target().display())
        }
        Err(error) => format!("refused: {}", explain(error)),
    }
}

/// A startup step failed once the runtime was built: stops what had
/// started (within 5 s) so that the failure is the one thing reported,
/// then exits with `exit`.
fn abandon(owner: RuntimeOwner, exit: ExitCode) -> ExitCode {
    let _partial_start = owner.shutdown_runtime_blocking_with_timeout(Duration::from_secs(5));
    exit
}

/// Reports a failed step and picks the exit code: a refused `ROCKETMQ_*`
/// value is a usage error (its line names the variable, the value and what
/// is accepted), anything else a failure.
fn fail(step: &str, error: &RuntimeError) -> ExitCode {
    match error.context() {
        Some(context) if error.kind() == RuntimeErrorKind::Configuration => {
            note!("broker_entrypoint: invalid environment: {context}");
            ExitCode::from(EXIT_USAGE)
        }
        _ => {
            note!("broker_entrypoint: {step}: {}", explain(error));
            ExitCode::from(EXIT_FAILED)
        }
    }
}

fn main() -> ExitCode {
    // First: a SIGTERM from here on is a graceful shutdown.
    let early_signal = Arc::new(std::sync::atomic::AtomicBool::new(false));
    if let Err(message) = hold_early_signals(&early_signal) {
        note!("broker_entrypoint: {message}");
        return ExitCode::from(EXIT_FAILED);
    }
    // The runtime's events (storage failures with their path and OS error,
    // warnings, the drain-time diagnostics) go to stderr, filtered by
    // `RUST_LOG` (default `info`); stdout carries the shutdown report. A
    // closed stderr is ignored, not a panic.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .log_internal_errors(false)
        .init();
    let args = match parse_args() {
        Ok(args) => args,
        Err(ArgsError::Help) => {
            out!("{}", help());
            return ExitCode::from(EXIT_CLEAN);
        }
        Err(ArgsError::Usage(message)) => {
            note!("broker_entrypoint: {message} (see --help)");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    // 1. Own the runtime and start the components (`startup.rs`).
    let started = match start(&args) {
        Ok(started) => started,
        Err(exit) => return exit,
    };
    let Started {
        owner,
        lifecycle,
        metadata,
        broker,
        running,
        ..
    } = &started;
    if let Err(error) = spawn_operator_signals(owner, broker, &running.maintenance, metadata) {
        note!("SIGUSR1 and SIGUSR2 not handled: {}", explain(&error));
    }
    // 2. Serve until the first shutdown request freezes the deadline.
    if let Err(error) = lifecycle.mark_ready() {
        note!("cannot mark the broker ready: {error}");
    }
    let request = match owner.block_on(wait_for_stop(lifecycle, args.run_for, &early_signal)) {
        Ok(request) => request,
        Err(error) => {
            // A broker that cannot hear SIGTERM must not look like a clean
            // stop to its supervisor: it fails (exit 1) after shutting down.
            note!(
                "cannot install signal handlers: {}; shutting down",
                explain(&error)
            );
            lifecycle.mark_failed();
            lifecycle.request_shutdown(ShutdownReason::Internal)
        }
    };
    note!(
        "stopping ({}) after {} heartbeats; readiness revoked",
        request.reason.as_str(),
        running.beats.load(Ordering::Relaxed)
    );
    log_drain_diagnostics(owner.root_context(), running, metadata);
    // Keep serving while load balancers see `/readyz` fail; the delay ends
    // inside the frozen deadline.
    owner.block_on(lifecycle.wait_drain_delay());

    // One deadline, frozen by the first request, for every step: traffic
    // first (the request worker drains), then the last checkpoint and the
    // metadata (the last offset table is committed, and accepted snapshots
    // become durable), then the runtime with the probes.
    let deadline = request.deadline;
    // The checkpoint is flushed after the broker's tasks stop, when its
    // storage lane no longer admits ordinary work: a drain lease taken
    // now, while the broker is open, allows that one flush until the
    // deadline without reopening the lane.
    let checkpoint_lease = broker
        .storage_io()
        .try_drain_lease(deadline, NonZeroUsize::MIN);
    let broker_report = owner.block_on(broker.task_group().shutdown_until(deadline));
    let last_table = running.offsets.snapshot();
    let metadata_deadline = MetadataDeadline::at(deadline.tokio_instant());
    let last_commit = owner.block_on(metadata.submit_next_commit(
        OFFSETS_RESOURCE,
        running.offsets.path.clone(),
        last_table.clone(),
        metadata_deadline,
    ));
    let last_committed = match last_commit {
        Ok(MetadataIoCommitAdmissionOutcome::Completed(MetadataIoCommitOutcome::Durable(_))) => {
            true
        }
        other => {
            note!(
                "last offset table not committed: {}",
                describe_commit(&other)
            );
            false
        }
    };
    // The checkpoint claims only a durable table: written (atomically: the
    // previous checkpoint stays whole if the write fails) after the last
    // commit became durable, and left as it was otherwise.
    let checkpointed = match checkpoint_lease {
        Ok(lease) if last_committed => {
            flush_checkpoint(owner, &lease, &running.offsets, &last_table)
        }
        Ok(_) => {
            note!("checkpoint not flushed: the last offset table is not durable; the previous checkpoint is kept");
            false
        }
        Err(error) => {
            note!("no drain lease for the last checkpoint: {error}");
            false
        }
    };
    let drained = owner.block_on(metadata.shutdown_until(metadata_deadline));
    note!(
        "broker stopped (healthy: {}); metadata: {} unfinished, durable offsets generation {}",
        broker_report.is_healthy(),
        drained.unfinished.len(),
        metadata
            .confirmed_durable_generation(OFFSETS_RESOURCE)
            .map_or_else(
                || String::from("none"),
                |generation| generation.get().to_string()
            )
    );
    // 3. The runtime's own shutdown and the verdict (`report.rs`).
    finish(
        started,
        Stopped {
            deadline,
            drained,
            last_committed,
            checkpointed,
        },
    )
}
