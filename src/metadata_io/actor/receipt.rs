//! [`MetadataIoReceipt`]: what an accepted submission hands back to wait
//! for its generation's durability.

use tokio::sync::oneshot;

use crate::error::{RuntimeError, RuntimeOperation, RuntimeResult};
use crate::metadata_io::types::{MetadataDeadline, MetadataGeneration, MetadataIoCommitOutcome};

/// A handle to wait for a submitted generation's durability.
#[derive(Debug)]
pub struct MetadataIoReceipt {
    pub(super) generation: MetadataGeneration,
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
        match self.outcome {
            ReceiptOutcome::Ready(outcome) => Ok(outcome),
            ReceiptOutcome::Pending(receiver) => {
                match tokio::time::timeout_at(deadline.instant(), receiver).await {
                    Ok(Ok(outcome)) => Ok(outcome),
                    Ok(Err(_)) => Err(RuntimeError::closed(
                        RuntimeOperation::MetadataWorkerStopped,
                    )),
                    Err(_) => Err(RuntimeError::timed_out(
                        RuntimeOperation::WaitForDurableMetadata,
                    )),
                }
            }
        }
    }
}
