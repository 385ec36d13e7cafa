//! A recording metadata file system and the helpers the metadata tests
//! share: an owner with a `broker` component, actors over the recording
//! file system, requests whose payload starts with their generation.
#![allow(dead_code, unreachable_pub)]

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rocketmq_runtime::{
    ChildServiceContext, ManagedMemoryPolicy, MetadataDeadline, MetadataFileSystem,
    MetadataIoActor, MetadataIoAdmissionOutcome, MetadataIoConfig, MetadataIoReceipt,
    MetadataWriteRequest, ProcessMemoryLimit, RuntimeConfig, RuntimeError, RuntimeOperation,
    RuntimeOwner, RuntimeResult,
};

/// Records every write (target and generation) and can hold writes at a
/// gate or fail them with a chosen operation.
#[derive(Debug, Default)]
pub struct RecordingFs {
    writes: Mutex<Vec<(PathBuf, u64)>>,
    gate: Mutex<Option<mpsc::Receiver<()>>>,
    started: Mutex<Option<mpsc::Sender<()>>>,
    pub fail_with: Mutex<Option<RuntimeOperation>>,
    /// Fails only the write of this generation, at this step.
    pub fail_generation: Mutex<Option<(u64, RuntimeOperation)>>,
}

impl RecordingFs {
    /// Holds the next write until the returned sender sends (or drops);
    /// the receiver reports when the held write started.
    pub fn hold_next(&self) -> (mpsc::Sender<()>, mpsc::Receiver<()>) {
        let (release, gate) = mpsc::channel();
        let (started_tx, started) = mpsc::channel();
        *self.gate.lock().expect("unpoisoned") = Some(gate);
        *self.started.lock().expect("unpoisoned") = Some(started_tx);
        (release, started)
    }

    pub fn writes(&self) -> Vec<(PathBuf, u64)> {
        self.writes.lock().expect("unpoisoned").clone()
    }
}

impl MetadataFileSystem for RecordingFs {
    fn persist_atomic(&self, target: &Path, bytes: &[u8]) -> RuntimeResult<()> {
        let generation = u64::from_le_bytes(bytes[..8].try_into().expect("8-byte header"));
        let gate = self.gate.lock().expect("unpoisoned").take();
        if let Some(started) = self.started.lock().expect("unpoisoned").take() {
            let _ = started.send(());
        }
        if let Some(gate) = gate {
            let _ = gate.recv();
        }
        let only_this = self
            .fail_generation
            .lock()
            .expect("unpoisoned")
            .filter(|(failing, _)| *failing == generation)
            .map(|(_, operation)| operation);
        if let Some(operation) = only_this.or(*self.fail_with.lock().expect("unpoisoned")) {
            return Err(RuntimeError::io(
                operation,
                std::io::Error::from_raw_os_error(28),
            ));
        }
        self.writes
            .lock()
            .expect("unpoisoned")
            .push((target.to_path_buf(), generation));
        Ok(())
    }
}

pub fn payload(generation: u64, len: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; len.max(8)];
    bytes[..8].copy_from_slice(&generation.to_le_bytes());
    bytes
}

pub fn request(resource: &str, generation: u64, len: usize) -> MetadataWriteRequest {
    MetadataWriteRequest::new(
        resource,
        generation,
        format!("/tmp/rocketmq-test/{resource}.json"),
        payload(generation, len),
    )
}

pub fn owner(managed_bytes: Option<u64>) -> (RuntimeOwner, ChildServiceContext) {
    let mut plan =
        RuntimeOwner::plan(RuntimeConfig::for_parallelism("metadata", 2)).expect("valid");
    if let Some(bytes) = managed_bytes {
        plan = plan
            .with_memory_limit(ProcessMemoryLimit::configured(bytes).expect("positive"))
            .with_memory_policy(ManagedMemoryPolicy::whole_limit());
    }
    let owner = plan.build().expect("builds");
    let broker = owner.root_context().component("broker");
    (owner, broker)
}

pub fn actor(
    context: &ChildServiceContext,
    fs: &Arc<RecordingFs>,
    writers: usize,
) -> MetadataIoActor {
    MetadataIoConfig::default()
        .into_plan()
        .expect("valid")
        .with_max_concurrent_writes(NonZeroUsize::new(writers).expect("positive"))
        .start_with_file_system(context, Arc::clone(fs) as Arc<dyn MetadataFileSystem>)
        .expect("started")
}

pub fn accepted(outcome: RuntimeResult<MetadataIoAdmissionOutcome>) -> MetadataIoReceipt {
    match outcome.expect("admitted") {
        MetadataIoAdmissionOutcome::Accepted(receipt) => receipt,
        MetadataIoAdmissionOutcome::TargetConflict(request) => panic!("conflict: {request:?}"),
    }
}

pub fn soon() -> MetadataDeadline {
    MetadataDeadline::after(Duration::from_secs(30))
}

/// Submits `first` through `actor` with its write held at a gate; returns
/// the gate's release and the first receipt once the write has started.
pub fn hold_first_write(
    owner: &RuntimeOwner,
    fs: &RecordingFs,
    actor: &MetadataIoActor,
    first: MetadataWriteRequest,
) -> (mpsc::Sender<()>, MetadataIoReceipt) {
    let (release, started) = fs.hold_next();
    let receipt = owner.block_on(async { accepted(actor.submit(first, soon())) });
    started
        .recv_timeout(Duration::from_secs(30))
        .expect("the held write started");
    (release, receipt)
}
