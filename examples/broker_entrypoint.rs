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
    CriticalFailureState, FullPolicy, MetadataDeadline, MetadataIoActor,
    MetadataIoAdmissionOutcome, MetadataIoCommitAdmissionOutcome, MetadataIoCommitOutcome,
    MetadataIoConfig, OperationContext, OperationWaitOutcome, OperationWaitPolicy,
    RootServiceContext, RuntimeComponent, RuntimeDiagnosticsInputs,
    RuntimeDiagnosticsViewOptionsV2, RuntimeError, RuntimeErrorKind, RuntimeOperation,
    ScheduledTaskGroup, ServiceLifecycle, ServiceLifecycleState, ShutdownAnnotation,
    ShutdownReason, ShutdownRequest, ENVIRONMENT_VARIABLES,
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

/// Command-line arguments.
struct Args {
    run_for: Option<Duration>,
    data_dir: PathBuf,
}

const USAGE: &str = "usage: broker_entrypoint [--run-for <seconds>] [--data-dir <path>]";

/// Exit code of a clean stop.
const EXIT_CLEAN: u8 = 0;
/// Exit code of an unhealthy or failed run, startup failures included.
const EXIT_FAILED: u8 = 1;
/// Exit code of a usage error: a bad flag or a refused `ROCKETMQ_*` value.
const EXIT_USAGE: u8 = 2;

/// `--help`: the flags, every environment variable the runtime reads (from
/// the crate's own catalog) and the exit codes.
fn help() -> String {
    let mut help = format!(
        "broker_entrypoint: a broker-style entrypoint of rocketmq-runtime\n\n{USAGE}\n\n\
         flags:\n  \
         --run-for <seconds>  stop after this many seconds (an internal shutdown request);\n  \
         \x20                    without it, run until SIGTERM, SIGINT or POST /drainz\n  \
         --data-dir <path>    directory of the durable offset table (default target/broker-data)\n  \
         -h, --help           print this help\n\n\
         environment:\n"
    );
    for variable in ENVIRONMENT_VARIABLES {
        help.push_str(&format!(
            "  {}\n      {}\n      default: {}; accepted: {}\n",
            variable.name, variable.purpose, variable.default, variable.accepted
        ));
    }
    help.push_str(&format!(
        "\nexit codes:\n  \
         {EXIT_CLEAN}  clean stop: healthy shutdown report, every accepted offset durable\n  \
         {EXIT_FAILED}  unhealthy or failed: startup failure, unhealthy report, failed service,\n     \
         critical failure or metadata that did not become durable\n  \
         {EXIT_USAGE}  usage: unknown flag, bad flag value or refused ROCKETMQ_* value\n"
    ));
    help
}

/// One line for an operator: the error, its typed detail and its causes.
fn explain(error: &RuntimeError) -> String {
    let mut line = error.to_string();
    if let Some(context) = error.context() {
        line.push_str(&format!(": {context}"));
    }
    for source in error.diagnostic_view().sources {
        line.push_str(&format!(": {source}"));
    }
    line
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

/// Why the arguments were not parsed.
enum ArgsError {
    /// `--help`: print the help to stdout and exit 0.
    Help,
    /// A usage error: print it to stderr (one line) and exit 2.
    Usage(String),
}

impl From<&str> for ArgsError {
    fn from(message: &str) -> Self {
        Self::Usage(message.to_owned())
    }
}

impl From<String> for ArgsError {
    fn from(message: String) -> Self {
        Self::Usage(message)
    }
}

fn parse_args() -> Result<Args, ArgsError> {
    // `args_os`: a path argument need not be UTF-8 (`args` would panic).
    let mut args = std::env::args_os().skip(1);
    let mut parsed = Args {
        run_for: None,
        data_dir: PathBuf::from("target/broker-data"),
    };
    while let Some(arg) = args.next() {
        let Some(flag) = arg.to_str() else {
            return Err(format!("unknown argument `{}`", arg.to_string_lossy()).into());
        };
        match flag {
            "--run-for" => {
                let value = args.next().ok_or("--run-for needs a number of seconds")?;
                let value = value.to_string_lossy();
                let seconds: f64 = value
                    .parse()
                    .map_err(|_| format!("--run-for: `{value}` is not a number of seconds"))?;
                parsed.run_for = Some(Duration::try_from_secs_f64(seconds).map_err(|_| {
                    format!("--run-for: `{value}` must be a non-negative, representable number of seconds")
                })?);
            }
            "--data-dir" => {
                let value = args.next().ok_or("--data-dir needs a path")?;
                if value.is_empty() {
                    return Err("--data-dir: the path is empty (give a directory)".into());
                }
                parsed.data_dir = PathBuf::from(value);
            }
            "--help" | "-h" => return Err(ArgsError::Help),
            other => return Err(format!("unknown argument `{other}`").into()),
        }
    }
    Ok(parsed)
}

/// Waits for `--run-for` to elapse (an `Internal` shutdown request) or for
/// a shutdown request (SIGTERM/SIGINT, `/drainz`, a critical failure).
async fn wait_for_stop(
    lifecycle: &ServiceLifecycle,
    run_for: Option<Duration>,
    early_signal: &std::sync::atomic::AtomicBool,
) -> Result<ShutdownRequest, RuntimeError> {
    let signal = lifecycle.wait_for_shutdown_signal();
    tokio::pin!(signal);
    // The first poll installs the lifecycle's SIGTERM/SIGINT handlers; a
    // signal that came earlier was held by `hold_early_signals`.
    if let std::task::Poll::Ready(request) = futures::poll!(signal.as_mut()) {
        return request;
    }
    if early_signal.load(Ordering::SeqCst) {
        return Ok(lifecycle.request_shutdown(ShutdownReason::Signal));
    }
    note!("broker running (ready); SIGTERM, Ctrl-C or a POST to /drainz stops it");
    let run_for_elapsed = async {
        match run_for {
            Some(duration) => tokio::time::sleep(duration).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        request = signal => request,
        () = run_for_elapsed => Ok(lifecycle.request_shutdown(ShutdownReason::Internal)),
    }
}

/// What the running broker exposes to `main`: its heartbeat count, its
/// maintenance schedules (for the drain-time diagnostics) and its offset
/// table (committed once more at the stop).
struct RunningBroker {
    beats: Arc<AtomicU64>,
    maintenance: ScheduledTaskGroup,
    offsets: OffsetTable,
}

/// Writes the last offset table to the store's checkpoint file (written
/// and synced) through the drain lease; false when it was not flushed.
fn flush_checkpoint(
    owner: &RuntimeOwner,
    lease: &BlockingDrainLease,
    offsets: &OffsetTable,
    table: &str,
) -> bool {
    let path = offsets.checkpoint.clone();
    let bytes = table.as_bytes().to_vec();
    let flushed = owner.block_on(lease.spawn_io("flush-checkpoint", move || {
        let mut file = std::fs::File::create(&path)?;
        std::io::Write::write_all(&mut file, &bytes)?;
        file.sync_all()
    }));
    match flushed {
        Ok(Ok(())) => true,
        Ok(Err(error)) => {
            note!("checkpoint not flushed: {error}");
            false
        }
        Err(error) => {
            note!("checkpoint not flushed: {error}");
            false
        }
    }
}

/// The metadata resource that holds the consumer offsets.
const OFFSETS_RESOURCE: &str = "consumer-offsets";

/// The offset table's file in `data_dir`.
fn offsets_path(data_dir: &Path) -> PathBuf {
    data_dir.join("consumer-offsets.json")
}

/// Consecutive failed writes of a resource after which `/readyz` answers
/// `503` (the `storage` dependency), until a write is durable again.
const STORAGE_FAILURES_BEFORE_UNREADY: u64 = 2;

/// The broker whose offsets this process owns: a table of another broker
/// is foreign and never resumed from.
const BROKER_NAME: &str = "broker-a";
/// The simulated queues and how far each advances per snapshot.
const QUEUES: [(&str, u64); 2] = [("TopicTest-0", 10), ("TopicTest-1", 7)];

/// A simulated consumer-offset table: each snapshot advances the offsets
/// from where the last durable table (read at start) left them. `path` is
/// its metadata file; `checkpoint` the store's own copy, written once at
/// the stop through the storage lane.
#[derive(Clone)]
struct OffsetTable {
    path: PathBuf,
    checkpoint: PathBuf,
    offsets: Arc<std::sync::Mutex<[u64; 2]>>,
}

impl OffsetTable {
    /// The table's current content as JSON; the offsets advance.
    fn snapshot(&self) -> String {
        let mut offsets = self
            .offsets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let table = table_json(&offsets);
        for (offset, (_, step)) in offsets.iter_mut().zip(QUEUES) {
            *offset += step;
        }
        table
    }
}

fn table_json(offsets: &[u64; 2]) -> String {
    let queues: serde_json::Map<String, serde_json::Value> = QUEUES
        .iter()
        .zip(offsets)
        .map(|((queue, _), offset)| ((*queue).to_owned(), (*offset).into()))
        .collect();
    serde_json::json!({ "broker": BROKER_NAME, "offsets": queues }).to_string()
}

/// Parses a table this broker wrote; `None` for anything else.
fn parse_table(bytes: &[u8]) -> Option<[u64; 2]> {
    let table: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    if table["broker"] != BROKER_NAME {
        return None;
    }
    let mut offsets = [0; 2];
    for (offset, (queue, _)) in offsets.iter_mut().zip(QUEUES) {
        *offset = table["offsets"][queue].as_u64()?;
    }
    Some(offsets)
}

/// What the start found in the data directory.
enum Recovered {
    /// No table yet: a first start.
    Fresh,
    /// The last durable table: the broker resumes from it.
    Resumed([u64; 2]),
    /// A corrupt or foreign table, moved aside to the path given.
    MovedAside(PathBuf),
}

/// Reads the last durable offset table, on the metadata lane (blocking file
/// I/O never runs on a worker thread). A file that is not this broker's
/// table is renamed to `<name>.unreadable-<unix seconds>` and the broker
/// starts from zero: it is kept for an operator, never overwritten.
fn recover_offsets(
    owner: &RuntimeOwner,
    metadata: &ChildServiceContext,
    path: &Path,
) -> Result<Recovered, String> {
    let path = path.to_path_buf();
    let read = owner.block_on(metadata.metadata_io().spawn_io("recover-offsets", move || {
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Recovered::Fresh)
            }
            Err(error) => return Err(format!("cannot read {}: {error}", path.display())),
        };
        if let Some(offsets) = parse_table(&bytes) {
            return Ok(Recovered::Resumed(offsets));
        }
        let seconds = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_secs());
        let mut aside = path.clone().into_os_string();
        aside.push(format!(".unreadable-{seconds}"));
        let aside = PathBuf::from(aside);
        std::fs::rename(&path, &aside).map_err(|error| {
            format!(
                "{} is not a {BROKER_NAME} offset table and cannot be moved aside: {error}",
                path.display()
            )
        })?;
        Ok(Recovered::MovedAside(aside))
    }));
    read.map_err(|error| explain(&error))?
}

/// Creates the data directory if it is missing; it must be a directory.
fn create_data_dir(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|error| {
        format!(
            "data directory {}: cannot create it: {error}",
            dir.display()
        )
    })
}

/// Checks that the (locked) data directory can hold the broker's files: a
/// file must be creatable, writable and syncable in it (a read-only mount,
/// a missing permission or a full disk fail here, naming the path and the
/// OS error).
fn check_data_dir(dir: &Path) -> Result<(), String> {
    let fail = |step: &str, error: std::io::Error| {
        format!("data directory {}: cannot {step}: {error}", dir.display())
    };
    let probe = dir.join(".broker_entrypoint.probe");
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&probe)
        .and_then(|mut file| {
            std::io::Write::write_all(&mut file, b"probe")?;
            file.sync_all()
        });
    let removed = match std::fs::remove_file(&probe) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    };
    written.map_err(|error| fail("write a file in it", error))?;
    removed.map_err(|error| fail("remove a file from it", error))
}

/// Takes the data directory's lock file (`.lock`, an exclusive `flock`):
/// one broker per directory, so nobody else writes its files (or its
/// temporary files, which a start removes as stale).
#[cfg(unix)]
fn lock_data_dir(dir: &Path) -> Result<nix::fcntl::Flock<std::fs::File>, String> {
    let path = dir.join(".lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|error| {
            format!(
                "data directory {}: cannot open {}: {error}",
                dir.display(),
                path.display()
            )
        })?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).map_err(
        |(_, errno)| {
            if errno == nix::errno::Errno::EWOULDBLOCK {
                format!(
                    "data directory {} is in use by another broker (lock {})",
                    dir.display(),
                    path.display()
                )
            } else {
                format!(
                    "data directory {}: cannot lock {}: {errno}",
                    dir.display(),
                    path.display()
                )
            }
        },
    )
}

#[cfg(not(unix))]
fn lock_data_dir(_dir: &Path) -> Result<(), String> {
    Ok(())
}

/// Accepted offset tables whose write failed (a failed or unknown commit):
/// accepted data that did not become durable, counted for the exit code and
/// named in the report.
#[derive(Default)]
struct StorageLosses {
    failed_writes: AtomicU64,
    last: std::sync::Mutex<Option<String>>,
}

impl StorageLosses {
    fn record(&self, outcome: &MetadataIoCommitOutcome) {
        let (MetadataIoCommitOutcome::FailedBeforeCommit(error)
        | MetadataIoCommitOutcome::CommitOutcomeUnknown(error)) = outcome
        else {
            return;
        };
        let _ = self.refused(error);
    }

    /// A table that was not persisted (a failed write, or a submission the
    /// actor refused, as for a fenced target); true when its error differs
    /// from the last one (the library logs failed writes; the caller prints
    /// a refusal only then).
    fn refused(&self, error: &RuntimeError) -> bool {
        self.failed_writes.fetch_add(1, Ordering::Relaxed);
        let text = explain(error);
        let mut last = self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let new = last.as_deref() != Some(text.as_str());
        *last = Some(text);
        new
    }
}

fn start_broker(
    broker: &ChildServiceContext,
    metadata: &MetadataIoActor,
    failures: &CriticalFailureState,
    data_dir: &Path,
    resume_from: [u64; 2],
    losses: &Arc<StorageLosses>,
) -> Result<RunningBroker, Box<dyn std::error::Error>> {
    // Consumer offsets are metadata: a JSON table persisted durably (temp
    // file, fsync, atomic rename, directory fsync) several times a second
    // through the metadata actor; snapshots queued while a write runs
    // coalesce, so only the newest is written.
    let offsets = OffsetTable {
        path: offsets_path(data_dir),
        checkpoint: data_dir.join("checkpoint.json"),
        offsets: Arc::new(std::sync::Mutex::new(resume_from)),
    };
    let persisted = metadata.clone();
    let table = offsets.clone();
    let losses = Arc::clone(losses);
    broker.scheduled_tasks("metadata").schedule(
        ScheduledTaskConfig::fixed_rate_no_overlap("persist-offsets", Duration::from_millis(200)),
        ScheduledExecutionPolicy::default(),
        move || {
            let actor = persisted.clone();
            let path = table.path.clone();
            let snapshot = table.snapshot();
            let losses = Arc::clone(&losses);
            async move {
                // The receipt tells whether the table became durable: a
                // failed write is lost data (the library logs its path, step
                // and OS error; readiness follows the storage).
                let deadline = MetadataDeadline::after(Duration::from_secs(1));
                match actor.submit_next(OFFSETS_RESOURCE, path, snapshot, deadline) {
                    Ok(MetadataIoAdmissionOutcome::Accepted(receipt)) => {
                        if let Ok(outcome) = receipt.wait_until_outcome(deadline).await {
                            losses.record(&outcome);
                        }
                    }
                    Ok(MetadataIoAdmissionOutcome::TargetConflict(_)) => {
                        note!("offset table not persisted: its target is another resource's");
                    }
                    // Admission closes when the shutdown begins: expected.
                    Err(error) if error.kind() == RuntimeErrorKind::Closed => {}
                    Err(error) => {
                        if losses.refused(&error) {
                            note!("offset table not persisted: {}", explain(&error));
                        }
                    }
                }
            }
        },
    )?;
    // Periodic maintenance is scheduled, not hand-written: a fixed-rate
    // heartbeat on an absolute 500 ms grid and a fixed-delay flush that
    // waits 1 s after each completed flush. Both stop when the broker is
    // cancelled and are reported with its group.
    let maintenance = broker.scheduled_tasks("maintenance");
    let beats = Arc::new(AtomicU64::new(0));
    let heartbeat_beats = Arc::clone(&beats);
    maintenance.schedule(
        ScheduledTaskConfig::fixed_rate_no_overlap("heartbeat", Duration::from_millis(500)),
        ScheduledExecutionPolicy::default(),
        move || {
            let beats = Arc::clone(&heartbeat_beats);
            async move {
                beats.fetch_add(1, Ordering::Relaxed);
            }
        },
    )?;
    // The flush is storage work: it runs on the managed `StorageIo` lane,
    // which bounds blocking work per owner and keeps a slot until the
    // closure exits.
    let storage = broker.storage_io().clone();
    maintenance.schedule(
        ScheduledTaskConfig::fixed_delay("flush-offsets", Duration::from_secs(1))
            .with_max_run_time(Duration::from_millis(500)),
        ScheduledExecutionPolicy::default(),
        move || {
            let storage = storage.clone();
            async move {
                // A simulated flush of consumer offsets to disk.
                let flushed = storage
                    .spawn_io("flush-offsets", || {
                        let offsets = vec![0u64; 1024];
                        offsets.len()
                    })
                    .await;
                match flushed {
                    // The lane closes when the shutdown begins: a flush
                    // refused then is expected, not a failure.
                    Err(error) if error.kind() == RuntimeErrorKind::Closed => {
                        tracing::debug!(%error, "offset flush refused: shutting down");
                    }
                    Err(error) => note!("offset flush failed: {}", explain(&error)),
                    Ok(_) => {}
                }
            }
        },
    )?;

    // A worker component fed through a channel. Each request runs as a
    // draining task of its own `OperationContext` (no task group per
    // request): it survives the worker's cancellation and is bounded by its
    // own 2 s deadline. On shutdown the worker stops taking requests and
    // drains the ones in flight.
    // Requests travel through a budgeted queue: the broker's budget is a
    // child of the owner's process budget, and every queued request holds
    // a permit (one count and its bytes) until the worker takes it.
    // Both are sized within the process budget (64 MiB and 1 MiB at most),
    // so every accepted memory limit starts.
    let process_bytes = broker.process_budget().limit().capacity.bytes;
    let broker_bytes = process_bytes.min(64 << 20);
    let broker_budget = broker.process_budget().child(
        "broker",
        BudgetLimit::new(4_096, broker_bytes, FullPolicy::Reject),
    )?;
    let requests = BudgetedQueue::new(broker_budget.child(
        "requests",
        BudgetLimit::new(64, broker_bytes.min(1 << 20), FullPolicy::WaitUntilDeadline),
    )?);
    let inbox = requests.clone();
    let worker = broker.component("request-worker");
    let group = worker.task_group().clone();
    let worker_token = group.cancellation_token();
    let handled = Arc::new(AtomicU64::new(0));
    // A critical service: a panic, or a return before cancellation, is
    // recorded and fails the broker (see `main`).
    worker.task_group().spawn_critical_service("request-worker", failures.clone(), async move {
        let mut in_flight: Vec<OperationContext> = Vec::new();
        loop {
            tokio::select! {
                () = worker_token.cancelled() => break,
                request = inbox.recv() => match request {
                    Some(request) => {
                        let deadline = ShutdownDeadline::after(Duration::from_secs(2)).instant();
                        let operation = OperationContext::new(deadline, TaskKind::Worker);
                        let handled = Arc::clone(&handled);
                        let accepted = group.spawn_draining_operation(&operation, "request", async move {
                            // Simulated request handling.
                            tokio::time::sleep(Duration::from_millis(20 + (request % 5) * 30)).await;
                            handled.fetch_add(1, Ordering::Relaxed);
                        });
                        if accepted.is_ok() {
                            in_flight.retain(|operation| operation.active_task_count() > 0);
                            in_flight.push(operation);
                        }
                    }
                    None => break,
                },
            }
        }
        // Drain: finish what was accepted within a grace period, abort the
        // rest; both bounds stay inside the broker's frozen deadline.
        let frozen = group
            .shutdown_deadline()
            .unwrap_or_else(|| ShutdownDeadline::after(Duration::from_secs(2)));
        let policy = OperationWaitPolicy::new(
            ShutdownDeadline::after(Duration::from_secs(1)).earliest(frozen),
            ShutdownDeadline::after(Duration::from_secs(2)).earliest(frozen),
        );
        let mut drained = 0;
        for operation in &in_flight {
            if let Ok(OperationWaitOutcome::Completed) = operation.wait_with_policy(&group, policy).await {
                drained += 1;
            }
        }
        note!(
            "request-worker: {} requests handled, {drained} of {} in flight drained",
            handled.load(Ordering::Relaxed),
            in_flight.len()
        );
    })?;
    // Dropped at cancellation: sending has no cleanup to do. A full queue
    // makes the source wait (up to 1 s) instead of growing without bound.
    broker.spawn_cancellable_service("request-source", async move {
        let mut next = 0u64;
        loop {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
            let request_bytes = 512;
            if !requests
                .push_until(next, request_bytes, BudgetClass::Data, deadline)
                .await
                .is_accepted()
            {
                note!("request-source: request {next} refused by the broker budget");
            }
            next += 1;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })?;
    Ok(RunningBroker {
        beats,
        maintenance,
        offsets,
    })
}

/// Logs what the process still owns as it starts draining: a sanitized V2
/// view (counts, kinds and ages; no names, ids or paths) of the whole tree,
/// with the maintenance schedules, the metadata actor and a small detail
/// list, as one JSON field of one `tracing` event.
fn log_drain_diagnostics(
    root: &RootServiceContext,
    broker: &RunningBroker,
    metadata: &MetadataIoActor,
) {
    let view = root.diagnostics_view_v2_with_options(
        RuntimeComponent::Broker,
        RuntimeDiagnosticsInputs {
            schedule: broker.maintenance.snapshot(),
            metadata: Some(metadata.snapshot()),
            shutdown: None,
        },
        RuntimeDiagnosticsViewOptionsV2 {
            max_detail_entries: 8,
            detail_scan_budget: 64,
            ..RuntimeDiagnosticsViewOptionsV2::default()
        },
    );
    match serde_json::to_string(&view) {
        Ok(json) => tracing::info!(diagnostics = %json, "draining"),
        Err(error) => tracing::warn!(%error, "drain diagnostics not serialized"),
    }
}

/// Installs SIGTERM/SIGINT handlers that only set `flag`, before anything
/// else runs: a signal during the start is a graceful shutdown (reason
/// `signal`) once the lifecycle listens, never the default action that
/// kills the process. A mask inherited with these signals blocked (a
/// launcher may block them across `exec` so that none is lost before this
/// point) is lifted here, or the broker would never hear them.
fn hold_early_signals(flag: &Arc<std::sync::atomic::AtomicBool>) -> Result<(), String> {
    #[cfg(unix)]
    {
        for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
            signal_hook::flag::register(signal, Arc::clone(flag)).map_err(|error| {
                format!("cannot install the handler of signal {signal}: {error}")
            })?;
        }
        let mut shutdown_signals = nix::sys::signal::SigSet::empty();
        shutdown_signals.add(nix::sys::signal::Signal::SIGTERM);
        shutdown_signals.add(nix::sys::signal::Signal::SIGINT);
        shutdown_signals
            .thread_unblock()
            .map_err(|error| format!("cannot unblock SIGTERM and SIGINT: {error}"))?;
    }
    #[cfg(not(unix))]
    let _ = flag;
    Ok(())
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
    // Probe address, shutdown timeout, liveness staleness, drain methods
    // and drain delay come from the `ROCKETMQ_*` environment.
    let lifecycle = match ServiceLifecycle::from_env("broker") {
        Ok(lifecycle) => lifecycle,
        Err(error) => return fail("lifecycle configuration", &error),
    };
    let owner = match RuntimeOwner::plan(RuntimeConfig::broker_default()) {
        // The memory limit (`ROCKETMQ_PROCESS_MEMORY_LIMIT_BYTES`) is read here.
        Ok(plan) => match plan.build() {
            Ok(owner) => owner,
            Err(error) => return fail("runtime build", &error),
        },
        Err(violation) => {
            note!("broker_entrypoint: invalid runtime configuration: {violation}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    // A data directory that cannot hold the offsets, or that another broker
    // holds, is refused before anything starts: the path and the OS error,
    // exit 1. The lock is held until the process exits.
    let data_dir_lock = create_data_dir(&args.data_dir)
        .and_then(|()| lock_data_dir(&args.data_dir))
        .and_then(|lock| check_data_dir(&args.data_dir).map(|()| lock));
    let _data_dir_lock = match data_dir_lock {
        Ok(lock) => lock,
        Err(message) => {
            note!("broker_entrypoint: {message}");
            return abandon(owner, ExitCode::from(EXIT_FAILED));
        }
    };
    let root = owner.root_context();
    // Probes and the heartbeat run in their own component, shut down last
    // with the runtime: `/livez` and `/readyz` answer until the very end.
    let probes = root.component("lifecycle");
    if let Err(error) = owner.block_on(lifecycle.start(&probes)) {
        // A probe address in use names the address and the OS error.
        return abandon(owner, fail("lifecycle start", &error));
    }
    if let Some(address) = lifecycle.probe_local_addr() {
        note!("probes listening on http://{address}");
    }
    // A panicking critical service, or one that returns before it is
    // cancelled, fails the service and requests an ordered shutdown.
    let failures = CriticalFailureState::new();
    if let Err(error) = lifecycle.spawn_critical_failure_monitor(
        &probes.task_spawner(),
        &failures,
        CriticalFailureRecovery::FailAndRequestShutdown,
    ) {
        return abandon(owner, fail("critical failure monitor not started", &error));
    }
    let metadata_context = root.component("metadata");
    let metadata = match MetadataIoConfig::default()
        .into_plan()
        .map_err(Box::<dyn std::error::Error>::from)
        .and_then(|plan| Ok(plan.start(&metadata_context)?))
    {
        Ok(metadata) => metadata,
        Err(error) => {
            note!("broker_entrypoint: metadata actor not started: {error}");
            return abandon(owner, ExitCode::from(EXIT_FAILED));
        }
    };
    // Readiness follows the storage: `/readyz` answers 503 while the offset
    // table keeps failing to become durable, 200 again after a durable write.
    if let Err(error) = lifecycle.watch_metadata_storage(
        &probes.task_spawner(),
        &metadata,
        NonZeroU64::new(STORAGE_FAILURES_BEFORE_UNREADY).unwrap_or(NonZeroU64::MIN),
    ) {
        return abandon(owner, fail("storage readiness not watched", &error));
    }
    // Resume from the last durable offsets: a restart never moves them
    // backwards (which would redeliver consumed messages).
    let resume_from = match recover_offsets(
        &owner,
        &metadata_context,
        &offsets_path(&args.data_dir),
    ) {
        Ok(Recovered::Fresh) => [0; 2],
        Ok(Recovered::Resumed(offsets)) => {
            note!("resuming from the durable offsets {offsets:?}");
            offsets
        }
        Ok(Recovered::MovedAside(aside)) => {
            note!(
                "broker_entrypoint: the offset table was not a {BROKER_NAME} table; moved aside to {} (starting from zero)",
                aside.display()
            );
            [0; 2]
        }
        Err(message) => {
            note!("broker_entrypoint: offsets not recovered: {message}");
            return abandon(owner, ExitCode::from(EXIT_FAILED));
        }
    };
    let losses = Arc::new(StorageLosses::default());
    let broker = root.component("broker");
    let running = match start_broker(
        &broker,
        &metadata,
        &failures,
        &args.data_dir,
        resume_from,
        &losses,
    ) {
        Ok(running) => running,
        Err(error) => {
            note!(
                "broker_entrypoint: broker startup failed ({}): {error}",
                RuntimeOperation::external("start-broker")
            );
            return abandon(owner, ExitCode::from(EXIT_FAILED));
        }
    };
    if let Err(error) = lifecycle.mark_ready() {
        note!("cannot mark the broker ready: {error}");
    }
    let request = match owner.block_on(wait_for_stop(&lifecycle, args.run_for, &early_signal)) {
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
    log_drain_diagnostics(root, &running, &metadata);
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
    let checkpointed = match checkpoint_lease {
        Ok(lease) => flush_checkpoint(&owner, &lease, &running.offsets, &last_table),
        Err(error) => {
            note!("no drain lease for the last checkpoint: {error}");
            false
        }
    };
    let metadata_deadline = MetadataDeadline::at(deadline.tokio_instant());
    let last_commit = owner.block_on(metadata.submit_next_commit(
        OFFSETS_RESOURCE,
        running.offsets.path.clone(),
        last_table,
        metadata_deadline,
    ));
    let last_committed = match last_commit {
        Ok(MetadataIoCommitAdmissionOutcome::Completed(MetadataIoCommitOutcome::Durable(_))) => {
            true
        }
        other => {
            note!("last offset table not committed: {other:?}");
            false
        }
    };
    let drained = owner.block_on(metadata.shutdown_until(metadata_deadline));
    note!(
        "broker stopped (healthy: {}); metadata: {} unfinished, durable offsets generation {:?}",
        broker_report.is_healthy(),
        drained.unfinished.len(),
        metadata
            .confirmed_durable_generation(OFFSETS_RESOURCE)
            .map(|generation| generation.get())
    );
    let mut report = match owner.shutdown_runtime_blocking_until(deadline) {
        // The lifecycle recorded the first request's reason in the tree:
        // the report carries it as `reason`.
        Ok(report) => report,
        Err(error) => {
            lifecycle.mark_failed();
            return fail("shutdown failed", &error);
        }
    };
    let failed = lifecycle.state() == ServiceLifecycleState::Failed;
    lifecycle.mark_stopped();
    // Accepted offsets that did not become durable are named in the report
    // (an annotation, in the JSON and the summary): the resource, its file,
    // how many writes failed and the last error.
    let failed_writes = losses.failed_writes.load(Ordering::Relaxed);
    if failed_writes > 0 {
        let last = losses
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
            .unwrap_or_default();
        report.annotations.push(ShutdownAnnotation::new(format!(
            "metadata not durable: resource {OFFSETS_RESOURCE} ({}): {failed_writes} accepted tables not persisted; last: {last}",
            running.offsets.path.display()
        )));
    }
    for failure in &drained.not_durable {
        report.annotations.push(ShutdownAnnotation::new(format!(
            "metadata not durable at the stop: resource {} ({}): {} consecutive failed writes; last: {} failed: {}",
            failure.resource,
            failure.target.display(),
            failure.consecutive_failures,
            failure.operation,
            failure.error
        )));
    }
    // The readable summary (with any task the deadline had to abort, by
    // name) for the terminal, then the JSON evidence on stdout.
    note!("{}", report.summary());
    out!("{}\n", report.to_json());
    let critical = failures.pending();
    if let Some(failure) = &critical {
        note!("critical failure: {failure:?}");
    }
    // Metadata that did not become durable, or a checkpoint not flushed, is
    // lost work: the exit says so.
    let metadata_lost = !last_committed
        || drained.timed_out
        || !drained.unfinished.is_empty()
        || !drained.not_durable.is_empty()
        || failed_writes > 0;
    if report.is_healthy() && !failed && critical.is_none() && !metadata_lost && checkpointed {
        ExitCode::from(EXIT_CLEAN)
    } else {
        note!(
            "unclean stop: report healthy {}, service failed {failed}, critical failure {}, metadata not durable {metadata_lost} ({failed_writes} tables of {OFFSETS_RESOURCE} not persisted), checkpoint flushed {checkpointed}",
            report.is_healthy(),
            critical.is_some()
        );
        ExitCode::from(EXIT_FAILED)
    }
}
