//! Starting the broker, in the order the README recommends: the lifecycle
//! from the environment, the owner, the data directory (checked and
//! locked), the probes and the critical-failure monitor, the metadata actor
//! with storage readiness, the recovered offsets, then the broker. A step
//! that fails stops what had started and says why, once.

use super::*;

/// What `main` runs and stops.
pub(crate) struct Started {
    pub(crate) owner: RuntimeOwner,
    pub(crate) lifecycle: ServiceLifecycle,
    pub(crate) failures: CriticalFailureState,
    pub(crate) metadata: MetadataIoActor,
    pub(crate) broker: ChildServiceContext,
    pub(crate) running: RunningBroker,
    pub(crate) losses: Arc<StorageLosses>,
    /// Held until the process exits: one broker per data directory.
    pub(crate) _data_dir_lock: DataDirLock,
}

/// Starts everything, or returns the exit code of the step that failed.
pub(crate) fn start(args: &Args) -> Result<Started, ExitCode> {
    // Probe address, shutdown timeout, liveness staleness, drain methods
    // and drain delay come from the `ROCKETMQ_*` environment.
    let lifecycle = match ServiceLifecycle::from_env("broker") {
        Ok(lifecycle) => lifecycle,
        Err(error) => return Err(fail("lifecycle configuration", &error)),
    };
    let owner = match RuntimeOwner::plan(RuntimeConfig::broker_default()) {
        // The memory limit (`ROCKETMQ_PROCESS_MEMORY_LIMIT_BYTES`) is read here.
        Ok(plan) => match plan.build() {
            Ok(owner) => owner,
            Err(error) => return Err(fail("runtime build", &error)),
        },
        Err(violation) => {
            note!("broker_entrypoint: invalid runtime configuration: {violation}");
            return Err(ExitCode::from(EXIT_USAGE));
        }
    };
    // A memory limit the broker cannot run in is refused before anything
    // starts: exit 2 naming the variable, the value and the minimum when
    // the operator set it, exit 1 when the machine imposes it.
    let limit = owner.resources().memory_limit();
    if limit.bytes() < MIN_MEMORY_LIMIT_BYTES {
        let exit = if limit.source() == MemoryLimitSource::Environment {
            note!(
                "broker_entrypoint: invalid environment: ROCKETMQ_PROCESS_MEMORY_LIMIT_BYTES={}: below the broker's minimum of {MIN_MEMORY_LIMIT_BYTES} bytes (1 MiB)",
                limit.bytes()
            );
            EXIT_USAGE
        } else {
            note!(
                "broker_entrypoint: the process memory limit ({} bytes, {}) is below the broker's minimum of {MIN_MEMORY_LIMIT_BYTES} bytes (1 MiB)",
                limit.bytes(),
                limit.source().as_str()
            );
            EXIT_FAILED
        };
        return Err(abandon(owner, ExitCode::from(exit)));
    }
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
            return Err(abandon(owner, ExitCode::from(EXIT_FAILED)));
        }
    };
    let root = owner.root_context();
    // Probes and the heartbeat run in their own component, shut down last
    // with the runtime: `/livez` and `/readyz` answer until the very end.
    let probes = root.component("lifecycle");
    if let Err(error) = owner.block_on(lifecycle.start(&probes)) {
        // An address this host does not have is a bad value (exit 2); one
        // in use names the address and the OS error (exit 1).
        let foreign = error.operation() == RuntimeOperation::BindServiceHealthProbe
            && io_error_kind(&error) == Some(std::io::ErrorKind::AddrNotAvailable);
        if let (true, Some(RuntimeErrorContext::Address(address))) = (foreign, error.context()) {
            note!(
                "broker_entrypoint: invalid environment: ROCKETMQ_HEALTH_BIND_ADDR={address}: not an address of this host; expected a local socket address such as 127.0.0.1:8080 or [::1]:8080"
            );
            return Err(abandon(owner, ExitCode::from(EXIT_USAGE)));
        }
        return Err(abandon(owner, fail("lifecycle start", &error)));
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
        return Err(abandon(
            owner,
            fail("critical failure monitor not started", &error),
        ));
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
            return Err(abandon(owner, ExitCode::from(EXIT_FAILED)));
        }
    };
    // Readiness follows the storage: `/readyz` answers 503 while the offset
    // table keeps failing to become durable, 200 again after a durable write.
    if let Err(error) = lifecycle.watch_metadata_storage(
        &probes.task_spawner(),
        &metadata,
        NonZeroU64::new(STORAGE_FAILURES_BEFORE_UNREADY).unwrap_or(NonZeroU64::MIN),
    ) {
        return Err(abandon(
            owner,
            fail("storage readiness not watched", &error),
        ));
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
            return Err(abandon(owner, ExitCode::from(EXIT_FAILED)));
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
            return Err(abandon(owner, ExitCode::from(EXIT_FAILED)));
        }
    };
    Ok(Started {
        owner,
        lifecycle,
        failures,
        metadata,
        broker,
        running,
        losses,
        _data_dir_lock,
    })
}

/// The kind of the first I/O error in `error`'s source chain.
fn io_error_kind(error: &RuntimeError) -> Option<std::io::ErrorKind> {
    let mut source = std::error::Error::source(error);
    while let Some(current) = source {
        if let Some(io) = current.downcast_ref::<std::io::Error>() {
            return Some(io.kind());
        }
        source = current.source();
    }
    None
}
