//! The simulated broker: a heartbeat, an offset flush on the storage lane,
//! a request worker fed through a budgeted queue (one operation per
//! request, drained at the stop), and the drain-time diagnostics.

use super::*;

/// What the running broker exposes to `main`: its heartbeat count, its
/// maintenance schedules (for the drain-time diagnostics) and its offset
/// table (committed once more at the stop).
pub(crate) struct RunningBroker {
    pub(crate) beats: Arc<AtomicU64>,
    pub(crate) maintenance: ScheduledTaskGroup,
    pub(crate) offsets: OffsetTable,
}

pub(crate) fn start_broker(
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
    let persisting = broker.scheduled_tasks("metadata").schedule(
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
    registered(persisting, "persist-offsets");
    // Periodic maintenance is scheduled, not hand-written: a fixed-rate
    // heartbeat on an absolute 500 ms grid and a fixed-delay flush that
    // waits 1 s after each completed flush. Both stop when the broker is
    // cancelled and are reported with its group.
    let maintenance = broker.scheduled_tasks("maintenance");
    let beats = Arc::new(AtomicU64::new(0));
    let heartbeat_beats = Arc::clone(&beats);
    let heartbeat = maintenance.schedule(
        ScheduledTaskConfig::fixed_rate_no_overlap("heartbeat", Duration::from_millis(500)),
        ScheduledExecutionPolicy::default(),
        move || {
            let beats = Arc::clone(&heartbeat_beats);
            async move {
                beats.fetch_add(1, Ordering::Relaxed);
            }
        },
    )?;
    registered(heartbeat, "heartbeat");
    // The flush is storage work: it runs on the managed `StorageIo` lane,
    // which bounds blocking work per owner and keeps a slot until the
    // closure exits.
    let storage = broker.storage_io().clone();
    let flush = maintenance.schedule(
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
    registered(flush, "flush-offsets");

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

/// What the broker's sanitized diagnostics views are built from (no
/// names, paths or ids reach them) and their bounds.
pub(crate) fn view_inputs(
    maintenance: &ScheduledTaskGroup,
    metadata: &MetadataIoActor,
) -> (RuntimeDiagnosticsInputs, RuntimeDiagnosticsViewOptionsV2) {
    (
        RuntimeDiagnosticsInputs {
            schedule: maintenance.snapshot(),
            metadata: Some(metadata.snapshot()),
            shutdown: None,
        },
        RuntimeDiagnosticsViewOptionsV2 {
            max_detail_entries: 8,
            detail_scan_budget: 64,
            ..RuntimeDiagnosticsViewOptionsV2::default()
        },
    )
}

/// Logs the drain-time view: one line at INFO, the JSON view at DEBUG.
pub(crate) fn log_drain_diagnostics(
    root: &RootServiceContext,
    broker: &RunningBroker,
    metadata: &MetadataIoActor,
) {
    let (inputs, options) = view_inputs(&broker.maintenance, metadata);
    let view = root.diagnostics_view_v2_with_options(RuntimeComponent::Broker, inputs, options);
    tracing::info!("draining: {}", view.summary());
    if tracing::enabled!(tracing::Level::DEBUG) {
        match serde_json::to_string(&view) {
            Ok(json) => tracing::debug!(diagnostics = %json, "drain diagnostics"),
            Err(error) => tracing::debug!(%error, "drain diagnostics not serialized"),
        }
    }
}

/// A schedule whose name was already taken does not run a second time:
/// say so rather than drop the outcome.
fn registered(outcome: rocketmq_runtime::ScheduledTaskRegistrationOutcome, name: &str) {
    if matches!(
        outcome,
        rocketmq_runtime::ScheduledTaskRegistrationOutcome::AlreadyPresent
    ) {
        note!("schedule {name} already present: not started twice");
    }
}
