//! Storage health: what the actor's failed writes tell an operator.
//!
//! Every settled write updates its resource's health under the actor lock
//! (`ActorShared::complete`); the log lines are written after the lock.
//!
//! Invariants:
//!
//! 1. A failed write (`FailedBeforeCommit`, `CommitOutcomeUnknown`) counts
//!    one consecutive failure of its resource; a durable write resets the
//!    count. A refusal of the lane (closed at shutdown) is a failure too:
//!    accepted data did not become durable.
//! 2. One `tracing` error per resource and failure kind (the step, the OS
//!    error kind and code): a repeat of a kind is logged again only after
//!    [`FAILURE_LOG_INTERVAL`] since that kind's last line, with the count
//!    of the writes that failed the same way in between, however kinds
//!    alternate. A new kind is logged at once; at most
//!    [`LOGGED_KINDS`] kinds are remembered per resource.
//! 3. The first durable write after failures logs one recovery event with
//!    the number of failed writes it ends.
//! 4. Every failure and every recovery advances the health epoch
//!    (`watch` channel), so a watcher such as
//!    [`ServiceLifecycle::watch_metadata_storage`](crate::ServiceLifecycle::watch_metadata_storage)
//!    re-reads the failures without polling.

use std::error::Error as _;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::{RuntimeError, RuntimeOperation};
use crate::metadata_io::types::MetadataIoCommitOutcome;

/// Least time between two log lines of the same resource and failure kind.
pub(crate) const FAILURE_LOG_INTERVAL: Duration = Duration::from_secs(30);
/// Failure kinds whose last line a resource remembers (the oldest goes).
pub(crate) const LOGGED_KINDS: usize = 8;

/// A resource whose last write did not become durable
/// ([`MetadataIoActor::storage_failures`](crate::MetadataIoActor::storage_failures)).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MetadataStorageFailure {
    /// The resource.
    pub resource: Arc<str>,
    /// Its target file.
    pub target: Arc<Path>,
    /// Writes of the resource that failed since its last durable write.
    pub consecutive_failures: u64,
    /// The step of the last failure (`RuntimeOperation::Metadata*`, or the
    /// lane's operation when the write never ran).
    pub operation: RuntimeOperation,
    /// The last failure as an operator reads it: the OS error when there is
    /// one (`No space left on device (os error 28)`), else the error.
    pub error: String,
    /// True when the last failure came after the rename (`SyncParent`):
    /// the content is visible but its durability is unknown, and the target
    /// is fenced.
    pub outcome_unknown: bool,
}

/// What kind of failure a log line is about: lines of one kind are rate
/// limited together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FailureKind {
    operation: RuntimeOperation,
    io_kind: Option<io::ErrorKind>,
    os_code: Option<i32>,
}

/// One resource's health, kept in its actor record.
#[derive(Debug, Default)]
pub(super) struct ResourceHealth {
    consecutive: u64,
    last: Option<LastFailure>,
    /// Per failure kind: when its last line was written and how many
    /// failures of that kind were not logged since.
    logged: Vec<(FailureKind, Instant, u64)>,
}

#[derive(Debug)]
struct LastFailure {
    operation: RuntimeOperation,
    error: String,
    outcome_unknown: bool,
}

/// A line to write once the actor lock is released.
pub(super) enum HealthLine {
    Failed {
        resource: Arc<str>,
        target: Arc<Path>,
        operation: RuntimeOperation,
        error: String,
        consecutive: u64,
        suppressed: u64,
    },
    Recovered {
        resource: Arc<str>,
        target: Arc<Path>,
        failed_writes: u64,
    },
}

/// What a settled write changed.
pub(super) struct HealthChange {
    /// Something a watcher must see (a failure or a recovery).
    pub(super) changed: bool,
    pub(super) line: Option<HealthLine>,
}

fn io_source(error: &RuntimeError) -> Option<&io::Error> {
    error
        .source()
        .and_then(|source| source.downcast_ref::<io::Error>())
}

impl ResourceHealth {
    /// Records a settled write of `resource` at `target`; the clock (`now`)
    /// is read for failures only.
    pub(super) fn record(
        &mut self,
        resource: &Arc<str>,
        target: &Arc<Path>,
        outcome: &MetadataIoCommitOutcome,
        now: impl FnOnce() -> Instant,
    ) -> HealthChange {
        let (error, outcome_unknown) = match outcome {
            MetadataIoCommitOutcome::Durable(_) => {
                let failed_writes = std::mem::take(&mut self.consecutive);
                self.last = None;
                self.logged.clear();
                return HealthChange {
                    changed: failed_writes > 0,
                    line: (failed_writes > 0).then(|| HealthLine::Recovered {
                        resource: Arc::clone(resource),
                        target: Arc::clone(target),
                        failed_writes,
                    }),
                };
            }
            MetadataIoCommitOutcome::FailedBeforeCommit(error) => (error, false),
            MetadataIoCommitOutcome::CommitOutcomeUnknown(error) => (error, true),
        };
        self.consecutive += 1;
        let now = now();
        let source = io_source(error);
        let kind = FailureKind {
            operation: error.operation(),
            io_kind: source.map(io::Error::kind),
            os_code: source.and_then(io::Error::raw_os_error),
        };
        let text = source.map_or_else(|| error.to_string(), ToString::to_string);
        self.last = Some(LastFailure {
            operation: kind.operation,
            error: text.clone(),
            outcome_unknown,
        });
        let suppressed = match self.logged.iter_mut().find(|(logged, ..)| *logged == kind) {
            Some((_, at, suppressed)) => {
                if now.duration_since(*at) < FAILURE_LOG_INTERVAL {
                    *suppressed += 1;
                    None
                } else {
                    *at = now;
                    Some(std::mem::take(suppressed))
                }
            }
            None => {
                if self.logged.len() >= LOGGED_KINDS {
                    if let Some(oldest) = (0..self.logged.len()).min_by_key(|&i| self.logged[i].1) {
                        self.logged.swap_remove(oldest);
                    }
                }
                self.logged.push((kind, now, 0));
                Some(0)
            }
        };
        let line = suppressed.map(|suppressed| HealthLine::Failed {
            resource: Arc::clone(resource),
            target: Arc::clone(target),
            operation: kind.operation,
            error: text,
            consecutive: self.consecutive,
            suppressed,
        });
        HealthChange {
            changed: true,
            line,
        }
    }

    /// The resource's failure, if its last write failed.
    pub(super) fn failure(
        &self,
        resource: &Arc<str>,
        target: &Arc<Path>,
    ) -> Option<MetadataStorageFailure> {
        let last = self.last.as_ref()?;
        Some(MetadataStorageFailure {
            resource: Arc::clone(resource),
            target: Arc::clone(target),
            consecutive_failures: self.consecutive,
            operation: last.operation,
            error: last.error.clone(),
            outcome_unknown: last.outcome_unknown,
        })
    }
}

impl HealthLine {
    /// Writes the line.
    pub(super) fn emit(self) {
        match self {
            Self::Failed {
                resource,
                target,
                operation,
                error,
                consecutive,
                suppressed,
            } => tracing::error!(
                resource = %resource,
                path = %target.display(),
                step = %operation,
                error = %error,
                consecutive_failures = consecutive,
                suppressed_since_last_line = suppressed,
                "metadata write failed: accepted data is not durable"
            ),
            Self::Recovered {
                resource,
                target,
                failed_writes,
            } => tracing::info!(
                resource = %resource,
                path = %target.display(),
                failed_writes,
                "metadata writes are durable again"
            ),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::metadata_io::types::MetadataGeneration;

    fn enospc() -> MetadataIoCommitOutcome {
        MetadataIoCommitOutcome::FailedBeforeCommit(RuntimeError::io(
            RuntimeOperation::MetadataWriteTemporary,
            io::Error::from_raw_os_error(28),
        ))
    }

    fn durable() -> MetadataIoCommitOutcome {
        MetadataIoCommitOutcome::Durable(MetadataGeneration::new(1))
    }

    /// One line per kind, a repeat only after the interval (with the count
    /// of the silent ones), a new kind at once, and one recovery line.
    #[test]
    fn failures_are_logged_once_per_kind_and_interval_and_recovery_once() {
        let resource: Arc<str> = Arc::from("offsets");
        let target: Arc<Path> = Arc::from(Path::new("/data/offsets.json"));
        let mut health = ResourceHealth::default();
        let start = Instant::now();
        let first = health.record(&resource, &target, &enospc(), || start);
        assert!(first.changed);
        assert!(matches!(
            first.line,
            Some(HealthLine::Failed { consecutive: 1, suppressed: 0, ref error, .. })
                if error.contains("os error 28")
        ));
        for offset in 1..10 {
            let repeat = health.record(&resource, &target, &enospc(), || {
                start + Duration::from_secs(offset)
            });
            assert!(repeat.changed && repeat.line.is_none(), "rate limited");
        }
        let later = health.record(&resource, &target, &enospc(), || {
            start + FAILURE_LOG_INTERVAL
        });
        assert!(matches!(
            later.line,
            Some(HealthLine::Failed {
                consecutive: 11,
                suppressed: 9,
                ..
            })
        ));
        let other = MetadataIoCommitOutcome::FailedBeforeCommit(RuntimeError::io(
            RuntimeOperation::MetadataCreateTemporary,
            io::Error::from_raw_os_error(30),
        ));
        let new_kind = health.record(&resource, &target, &other, || start + FAILURE_LOG_INTERVAL);
        assert!(matches!(
            new_kind.line,
            Some(HealthLine::Failed {
                suppressed: 0,
                operation: RuntimeOperation::MetadataCreateTemporary,
                ..
            })
        ));
        // Alternating kinds stay limited per kind.
        let again = health.record(&resource, &target, &enospc(), || {
            start + FAILURE_LOG_INTERVAL + Duration::from_secs(1)
        });
        assert!(
            again.changed && again.line.is_none(),
            "ENOSPC was logged 1 s ago"
        );
        let failure = health.failure(&resource, &target).expect("failing");
        assert_eq!(failure.consecutive_failures, 13);
        assert!(failure.error.contains("os error 28"), "{}", failure.error);
        let recovered = health.record(&resource, &target, &durable(), || start);
        assert!(recovered.changed);
        assert!(matches!(
            recovered.line,
            Some(HealthLine::Recovered {
                failed_writes: 13,
                ..
            })
        ));
        assert!(health.failure(&resource, &target).is_none());
        let steady = health.record(&resource, &target, &durable(), || start);
        assert!(!steady.changed && steady.line.is_none());
    }
}
