//! Commit and observation: `submit_commit` (the write's classified outcome),
//! `submit_observed` (what is known by a deadline, never an error once
//! admitted) and [`MetadataIoObserver`], a weak handle for snapshots.

use std::sync::{Arc, Weak};

use super::*;
use crate::metadata_io::types::{MetadataIoCommitAdmissionOutcome, MetadataIoCommitObservation};

impl MetadataIoActor {
    /// Submits and waits for the write's classified outcome with one
    /// deadline.
    ///
    /// # Errors
    ///
    /// As [`submit`](Self::submit) (not admitted), or
    /// `timed_out(WaitForDurableMetadata)` / `closed(MetadataWorkerStopped)`
    /// while waiting (the write is not cancelled).
    ///
    /// # Cancel safety
    ///
    /// The snapshot is admitted at the first poll; dropping the future then
    /// only stops waiting (the write still happens).
    pub async fn submit_commit(
        &self,
        request: MetadataWriteRequest,
        deadline: MetadataDeadline,
    ) -> RuntimeResult<MetadataIoCommitAdmissionOutcome> {
        match self.submit(request, deadline)? {
            MetadataIoAdmissionOutcome::Accepted(receipt) => {
                Ok(MetadataIoCommitAdmissionOutcome::Completed(
                    receipt.wait_until_outcome(deadline).await?,
                ))
            }
            MetadataIoAdmissionOutcome::TargetConflict(request) => {
                Ok(MetadataIoCommitAdmissionOutcome::TargetConflict(request))
            }
        }
    }

    /// [`submit_commit`](Self::submit_commit) with the next generation of
    /// the owner-wide counter.
    ///
    /// # Errors
    ///
    /// As [`submit_commit`](Self::submit_commit).
    ///
    /// # Cancel safety
    ///
    /// As [`submit_commit`](Self::submit_commit).
    pub async fn submit_next_commit(
        &self,
        resource: impl Into<Arc<str>>,
        target: impl Into<std::path::PathBuf>,
        bytes: impl Into<Vec<u8>>,
        deadline: MetadataDeadline,
    ) -> RuntimeResult<MetadataIoCommitAdmissionOutcome> {
        self.submit_commit(self.next_request(resource, target, bytes), deadline)
            .await
    }

    /// Submits and observes the write until `deadline`: `Settled` with its
    /// outcome, `Unobserved` if the deadline passed or the actor stopped
    /// first, or `TargetConflict`. Once admitted there is no error: the
    /// caller learns what is known, and
    /// [`requires_reconciliation`](MetadataIoCommitObservation::requires_reconciliation)
    /// says when to look at the target.
    ///
    /// # Errors
    ///
    /// Only when not admitted, as [`submit`](Self::submit).
    ///
    /// # Cancel safety
    ///
    /// As [`submit_commit`](Self::submit_commit).
    pub async fn submit_observed(
        &self,
        request: MetadataWriteRequest,
        deadline: MetadataDeadline,
    ) -> RuntimeResult<MetadataIoCommitObservation> {
        Ok(match self.submit(request, deadline)? {
            MetadataIoAdmissionOutcome::Accepted(receipt) => receipt.observe_until(deadline).await,
            MetadataIoAdmissionOutcome::TargetConflict(request) => {
                MetadataIoCommitObservation::TargetConflict(request)
            }
        })
    }

    /// [`submit_observed`](Self::submit_observed) with the next generation
    /// of the owner-wide counter.
    ///
    /// # Errors
    ///
    /// As [`submit_observed`](Self::submit_observed).
    ///
    /// # Cancel safety
    ///
    /// As [`submit_commit`](Self::submit_commit).
    pub async fn submit_next_observed(
        &self,
        resource: impl Into<Arc<str>>,
        target: impl Into<std::path::PathBuf>,
        bytes: impl Into<Vec<u8>>,
        deadline: MetadataDeadline,
    ) -> RuntimeResult<MetadataIoCommitObservation> {
        self.submit_observed(self.next_request(resource, target, bytes), deadline)
            .await
    }

    /// A weak handle for snapshots that does not keep the actor alive.
    pub fn observer(&self) -> MetadataIoObserver {
        MetadataIoObserver(Arc::downgrade(&self.shared))
    }
}

/// A weak handle to an actor: snapshots while the actor exists, without
/// keeping it (or its coordinator's state) alive.
#[derive(Clone)]
pub struct MetadataIoObserver(Weak<ActorShared>);

impl fmt::Debug for MetadataIoObserver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MetadataIoObserver")
            .field("alive", &(self.0.strong_count() > 0))
            .finish()
    }
}

impl MetadataIoObserver {
    /// The actor's snapshot, or `None` once every handle to it (and its
    /// coordinator) is gone.
    pub fn snapshot(&self) -> Option<MetadataIoSnapshot> {
        self.0.upgrade().map(|shared| shared.snapshot())
    }
}
