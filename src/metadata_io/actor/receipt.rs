//! [`MetadataIoReceipt`]: what an accepted submission hands back to wait
//! for its generation's durability.

use tokio::sync::oneshot;

use crate::error::{RuntimeError, RuntimeOperation, RuntimeResult};
use crate::metadata_io::targets::MetadataTargetIdentity;
use crate::metadata_io::types::{
    MetadataDeadline, MetadataDurability, MetadataGeneration, MetadataIoCommitObservation,
    MetadataIoCommitOutcome,
};

/// A handle to wait for a submitted generation's durability.
///
/// It keeps the outcome it is given even if its target's history is later
/// retired: a retired history is never written again.
#[derive(Debug)]
#[must_use = "await the receipt to learn whether the write became durable"]
pub struct MetadataIoReceipt {
    pub(super) generation: MetadataGeneration,
    pub(super) identity: MetadataTargetIdentity,
    pub(super) outcome: ReceiptOutcome,
}

#[derive(Debug)]
pub(super) enum ReceiptOutcome {
    Ready(MetadataIoCommitOutcome),
    Pending(oneshot::Receiver<MetadataIoCommitOutcome>),
}

impl MetadataIoReceipt {
    /// The submitted generation.
    pub const fn generation(&self) -> MetadataGeneration {
        self.generation
    }

    /// What admission knew, without waiting: `Durable` when the generation
    /// was already durable at submission (the receipt is resolved),
    /// otherwise `Accepted` (a write will settle it; see
    /// [`wait_until`](Self::wait_until)).
    pub fn durability(&self) -> MetadataDurability {
        match &self.outcome {
            ReceiptOutcome::Ready(MetadataIoCommitOutcome::Durable(generation)) => {
                MetadataDurability::Durable(*generation)
            }
            ReceiptOutcome::Ready(_) | ReceiptOutcome::Pending(_) => MetadataDurability::Accepted,
        }
    }

    /// The target history this generation belongs to: pair it with the
    /// generation when recording what became durable (a retired path's next
    /// history is a different identity).
    pub fn target_identity(&self) -> MetadataTargetIdentity {
        self.identity.clone()
    }

    /// Waits until `deadline` for the write covering this generation, and
    /// says what is known then: `Settled` with the write's outcome (errors
    /// included, as `FailedBeforeCommit` or `CommitOutcomeUnknown`), or
    /// `Unobserved` when the deadline passed or the actor stopped first.
    /// Never `TargetConflict`, never an error.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: observing never cancels the write; a later submission
    /// of the same generation observes its result.
    pub async fn observe_until(self, deadline: MetadataDeadline) -> MetadataIoCommitObservation {
        let generation = self.generation;
        match self.settled_by(deadline).await {
            Some(outcome) => MetadataIoCommitObservation::Settled {
                generation,
                outcome,
            },
            None => MetadataIoCommitObservation::Unobserved { generation },
        }
    }

    /// The write's outcome by `deadline`; `Err(true)` when the deadline
    /// passed, `Err(false)` when the actor stopped without settling it.
    async fn settled_or(self, deadline: MetadataDeadline) -> Result<MetadataIoCommitOutcome, bool> {
        match self.outcome {
            ReceiptOutcome::Ready(outcome) => Ok(outcome),
            ReceiptOutcome::Pending(receiver) => {
                match tokio::time::timeout_at(deadline.instant(), receiver).await {
                    Ok(Ok(outcome)) => Ok(outcome),
                    Ok(Err(_)) => Err(false),
                    Err(_) => Err(true),
                }
            }
        }
    }

    async fn settled_by(self, deadline: MetadataDeadline) -> Option<MetadataIoCommitOutcome> {
        self.settled_or(deadline).await.ok()
    }

    /// Waits for the write that covers this generation.
    ///
    /// Returns the durable generation (possibly newer: coalesced).
    ///
    /// # Errors
    ///
    /// The write's error (`FailedBeforeCommit` or `CommitOutcomeUnknown`
    /// source); `timed_out(WaitForDurableMetadata)` at the deadline (the
    /// write is not cancelled); `closed(MetadataWorkerStopped)` if the actor
    /// stopped without writing it.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the wait never cancels the write.
    pub async fn wait_until(self, deadline: MetadataDeadline) -> RuntimeResult<MetadataGeneration> {
        match self.wait_until_outcome(deadline).await? {
            MetadataIoCommitOutcome::Durable(generation) => Ok(generation),
            MetadataIoCommitOutcome::FailedBeforeCommit(error)
            | MetadataIoCommitOutcome::CommitOutcomeUnknown(error) => Err(error),
        }
    }

    /// Like [`wait_until`](Self::wait_until), with the commit classification.
    ///
    /// # Errors
    ///
    /// `timed_out(WaitForDurableMetadata)` or `closed(MetadataWorkerStopped)`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the wait never cancels the write.
    pub async fn wait_until_outcome(
        self,
        deadline: MetadataDeadline,
    ) -> RuntimeResult<MetadataIoCommitOutcome> {
        self.settled_or(deadline).await.map_err(|expired| {
            if expired {
                RuntimeError::timed_out(RuntimeOperation::WaitForDurableMetadata)
            } else {
                RuntimeError::closed(RuntimeOperation::MetadataWorkerStopped)
            }
        })
    }
}
