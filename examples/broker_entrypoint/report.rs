//! The verdict of a stop: the runtime's last report, annotated with the
//! metadata that did not become durable, printed (a summary on stderr, the
//! JSON on stdout), and the exit code: 0 only for a healthy report, a
//! service that did not fail, no critical failure, every accepted offset
//! durable and the checkpoint flushed.

use super::*;

/// What the ordered stop found before the runtime's own shutdown.
pub(crate) struct Stopped {
    pub(crate) deadline: ShutdownDeadline,
    pub(crate) drained: rocketmq_runtime::MetadataIoShutdownReport,
    pub(crate) last_committed: bool,
    pub(crate) checkpointed: bool,
}

/// Shuts the runtime down within the deadline and decides the exit code.
pub(crate) fn finish(started: Started, stopped: Stopped) -> ExitCode {
    let Started {
        owner,
        lifecycle,
        failures,
        running,
        losses,
        ..
    } = started;
    let Stopped {
        deadline,
        drained,
        last_committed,
        checkpointed,
    } = stopped;
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
