//! Dropping an outcome a caller must look at is an error under
//! `deny(unused_must_use)`: each line below is reported.
#![deny(unused_must_use)]

use rocketmq_runtime::{
    BlockingExecutorShutdownReport, BudgetedQueue, MetadataIoAdmissionOutcome,
    MetadataIoCommitAdmissionOutcome, MetadataIoCommitOutcome, MetadataIoDurabilityOutcome,
    MetadataIoReceipt, MetadataIoShutdownReport, MetadataTargetRetirementOutcome,
    OperationOutcome, OperationWaitOutcome, PermitRebindOutcome, QueuePushOutcome,
    ScheduledTaskRegistrationOutcome, ShutdownReport,
};

fn value<T>() -> T {
    unreachable!("never called: the test only compiles")
}

fn pushes(queue: &BudgetedQueue<u32>) {
    queue.try_push_data(1, 8);
}

fn main() {
    value::<QueuePushOutcome<u32>>();
    value::<ScheduledTaskRegistrationOutcome>();
    value::<MetadataIoAdmissionOutcome>();
    value::<MetadataIoCommitAdmissionOutcome>();
    value::<MetadataIoCommitOutcome>();
    value::<MetadataIoDurabilityOutcome>();
    value::<MetadataIoReceipt>();
    value::<MetadataTargetRetirementOutcome>();
    value::<PermitRebindOutcome>();
    value::<OperationOutcome>();
    value::<OperationWaitOutcome>();
    value::<ShutdownReport>();
    value::<MetadataIoShutdownReport>();
    value::<BlockingExecutorShutdownReport>();
    let _ = pushes;
}
