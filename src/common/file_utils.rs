//! Blocking helpers for configuration and small state files.
//!
//! [`file_to_string`] reads a file (a missing file reads as empty);
//! [`string_to_file`] replaces a file durably, first keeping its previous
//! content durably as `<path>.bak`. The replacement is the one the metadata
//! actor uses ([`LocalMetadataFileSystem`]): temporary file, `fsync`,
//! atomic rename, parent-directory `fsync`, so a crash leaves the previous
//! file or the complete new one, never a partial file.
//!
//! Both functions block on file-system calls. From asynchronous code, run
//! them on a blocking lane:
//!
//! ```
//! use std::time::Duration;
//! use rocketmq_runtime::common::file_utils;
//! use rocketmq_runtime::{RuntimeConfig, RuntimeOwner, ShutdownDeadline};
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("broker.properties");
//! let owner = RuntimeOwner::plan(RuntimeConfig::for_parallelism("svc", 2))?.build()?;
//! let store = owner.root_context().component("store");
//! let deadline = ShutdownDeadline::after(Duration::from_secs(5));
//! let written = path.clone();
//! owner.block_on(store.storage_io().spawn_io_until("write-config", deadline, move || {
//!     file_utils::string_to_file("brokerName=broker-a", &written)
//! }))??;
//! assert_eq!(file_utils::file_to_string(&path)?, "brokerName=broker-a");
//! # owner.shutdown_runtime_blocking()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Invariants:
//!
//! 1. Calls of [`string_to_file`] in one process are serialized (one lock),
//!    so the backup and the replacement of one call are never interleaved
//!    with another's.
//! 2. The backup is durable before the file is replaced: after a crash, the
//!    file holds the old or the new content, and when it holds the new one,
//!    `.bak` holds the old.
//! 3. Every error keeps the failing step's I/O error as its source; a read
//!    failure names the path.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use crate::durable::{LocalMetadataFileSystem, MetadataFileSystem};
use crate::error::{RuntimeError, RuntimeOperation, RuntimeResult};

/// Serializes [`string_to_file`] calls in this process.
static WRITES: Mutex<()> = Mutex::new(());

/// Reads `path` as UTF-8 text.
///
/// A missing file reads as an empty string (and a `tracing` warning names
/// the path), as the original helper did for optional configuration files.
///
/// # Errors
///
/// Any other failure (permissions, a directory, content that is not UTF-8)
/// is an I/O error with operation `ReadFile`; its source names the path
/// and keeps the operating system's error.
pub fn file_to_string(path: impl AsRef<Path>) -> RuntimeResult<String> {
    let path = path.as_ref();
    match std::fs::read_to_string(path) {
        Ok(content) => Ok(content),
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            tracing::warn!(path = %path.display(), "file not found; read as an empty string");
            Ok(String::new())
        }
        Err(error) => Err(read_error(path, error)),
    }
}

/// Replaces `path` with `content` durably, keeping the previous content.
///
/// If `path` exists, its bytes are first written durably to `<path>.bak`;
/// then `content` replaces `path` through a temporary file, `fsync`, an
/// atomic rename and a parent-directory `fsync` (missing parent
/// directories are created). Calls in one process are serialized.
///
/// # Errors
///
/// Reading the previous content: an I/O error with operation `ReadFile`
/// naming the path. Writing the backup or the file: the failing step's
/// error as [`LocalMetadataFileSystem::persist_atomic`] reports it (for
/// example `MetadataWriteTemporary`); a failure before the rename leaves
/// the file as it was.
pub fn string_to_file(content: impl AsRef<str>, path: impl AsRef<Path>) -> RuntimeResult<()> {
    let path = path.as_ref();
    let _serialized = WRITES.lock().unwrap_or_else(PoisonError::into_inner);
    match std::fs::read(path) {
        Ok(previous) => LocalMetadataFileSystem.persist_atomic(&backup_path(path), &previous)?,
        Err(error) if error.kind() == io::ErrorKind::NotFound => {}
        Err(error) => return Err(read_error(path, error)),
    }
    LocalMetadataFileSystem.persist_atomic(path, content.as_ref().as_bytes())
}

/// `<path>.bak`.
fn backup_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".bak");
    PathBuf::from(name)
}

#[track_caller]
fn read_error(path: &Path, source: io::Error) -> RuntimeError {
    let kind = source.kind();
    RuntimeError::io(
        RuntimeOperation::ReadFile,
        io::Error::new(
            kind,
            PathError {
                path: path.to_path_buf(),
                source,
            },
        ),
    )
}

/// An I/O error on a named file.
#[derive(Debug)]
struct PathError {
    path: PathBuf,
    source: io::Error,
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.source)
    }
}

impl std::error::Error for PathError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
