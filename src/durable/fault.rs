//! A test-only [`MetadataFileSystem`] that fails chosen steps of the real
//! local protocol.

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use super::{
    persist_with, LocalMetadataFileSystem, MetadataFileSystem, MetadataIoOperation, PersistSteps,
};
use crate::error::RuntimeResult;
use crate::loom::{Mutex, StatCounter};

/// An injected failure: an error kind or a raw OS error code.
#[derive(Debug, Clone, Copy)]
pub(crate) enum InjectedFault {
    Kind(io::ErrorKind),
    Os(i32),
}

impl InjectedFault {
    pub(crate) fn to_error(self, step: MetadataIoOperation) -> io::Error {
        match self {
            Self::Kind(kind) => io::Error::new(kind, format!("injected fault: {step}")),
            Self::Os(code) => io::Error::from_raw_os_error(code),
        }
    }
}

/// A [`MetadataFileSystem`] for tests: the real [`LocalMetadataFileSystem`]
/// with injectable per-step failures.
///
/// Test-only (compiled for the crate's unit tests): it drives every failure
/// path of the real protocol.
/// Each step runs the real local filesystem call unless a fault is armed
/// for it; an armed step does **not** run and instead returns the injected
/// [`io::Error`]. Faults stay armed until cleared, so every later write
/// fails at the same step; [`clear`](Self::clear) restores normal operation.
///
/// Arming [`RemoveTemporary`](MetadataIoOperation::RemoveTemporary) together
/// with an earlier step shows that a cleanup failure never replaces the
/// original error (the temporary file is then left behind). Arming
/// [`SyncParent`](MetadataIoOperation::SyncParent) publishes the new content
/// and reports [`RuntimeOperation::MetadataSyncParent`].
///
#[derive(Debug, Default)]
pub(crate) struct FaultInjectingFileSystem {
    inner: LocalMetadataFileSystem,
    faults: Mutex<[Option<InjectedFault>; MetadataIoOperation::ALL.len()]>,
    injected: StatCounter,
}

impl FaultInjectingFileSystem {
    /// A fault injector with no fault armed.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Arms `step` to fail with an error of `kind` (for example
    /// [`io::ErrorKind::StorageFull`]) until cleared.
    pub(crate) fn fail_at(&self, step: MetadataIoOperation, kind: io::ErrorKind) {
        self.faults.lock()[step.index()] = Some(InjectedFault::Kind(kind));
    }

    /// Arms `step` to fail with the raw OS error `code` (for example `28`,
    /// `ENOSPC` on Linux) until cleared.
    pub(crate) fn fail_at_os_error(&self, step: MetadataIoOperation, code: i32) {
        self.faults.lock()[step.index()] = Some(InjectedFault::Os(code));
    }

    /// Disarms the fault of `step`, if any.
    pub(crate) fn clear_at(&self, step: MetadataIoOperation) {
        self.faults.lock()[step.index()] = None;
    }

    /// Disarms every fault.
    pub(crate) fn clear(&self) {
        *self.faults.lock() = Default::default();
    }

    /// How many injected errors were returned so far.
    pub(crate) fn injected_faults(&self) -> u64 {
        self.injected.load(Ordering::Relaxed)
    }

    /// `Err` with the injected error when `step` is armed.
    fn check(&self, step: MetadataIoOperation) -> io::Result<()> {
        let fault = self.faults.lock()[step.index()];
        match fault {
            Some(fault) => {
                self.injected.fetch_add(1, Ordering::Relaxed);
                Err(fault.to_error(step))
            }
            None => Ok(()),
        }
    }
}

impl PersistSteps for FaultInjectingFileSystem {
    fn temporary_path(&self, directory: &Path, file_name: &OsStr) -> PathBuf {
        self.inner.temporary_path(directory, file_name)
    }

    fn create_parent(&self, directory: &Path) -> io::Result<Vec<PathBuf>> {
        self.check(MetadataIoOperation::CreateParent)?;
        self.inner.create_parent(directory)
    }

    fn create_temporary(&self, path: &Path) -> io::Result<File> {
        self.check(MetadataIoOperation::CreateTemporary)?;
        self.inner.create_temporary(path)
    }

    fn write_temporary(&self, file: &mut File, bytes: &[u8]) -> io::Result<()> {
        self.check(MetadataIoOperation::WriteTemporary)?;
        self.inner.write_temporary(file, bytes)
    }

    fn sync_temporary(&self, file: &File) -> io::Result<()> {
        self.check(MetadataIoOperation::SyncTemporary)?;
        self.inner.sync_temporary(file)
    }

    fn replace_target(&self, temporary: &Path, target: &Path) -> io::Result<()> {
        self.check(MetadataIoOperation::ReplaceTarget)?;
        self.inner.replace_target(temporary, target)
    }

    fn sync_parent(&self, directory: &Path) -> io::Result<()> {
        self.check(MetadataIoOperation::SyncParent)?;
        self.inner.sync_parent(directory)
    }

    fn remove_temporary(&self, path: &Path) -> io::Result<()> {
        self.check(MetadataIoOperation::RemoveTemporary)?;
        self.inner.remove_temporary(path)
    }
}

impl MetadataFileSystem for FaultInjectingFileSystem {
    fn persist_atomic(&self, target: &Path, bytes: &[u8]) -> RuntimeResult<()> {
        persist_with(self, target, bytes)
    }
}
