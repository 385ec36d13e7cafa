//! Atomic, durable replacement of a file: the one write protocol of the
//! crate, in the base layer so both the metadata actor (`metadata_io`) and
//! the blocking file helpers (`common::file_utils`) use it without one
//! reaching into the other.
//!
//! [`MetadataFileSystem`] is the seam between the metadata actor and the
//! disk: one call replaces a whole target file with a snapshot, and either
//! publishes the complete snapshot or leaves the previous file in place.
//! [`LocalMetadataFileSystem`] implements it on the local filesystem with the
//! classic sequence
//!
//! ```text
//! create parent (+ fsync each new directory's parent, outermost first)
//!   ─ create temp (same dir, exclusive) ─ write ─ fsync temp
//!   ─ rename temp over target ─ fsync parent dir
//!   └─ any failure before the rename: remove temp (best effort)
//! ```
//!
//! Invariants:
//!
//! 1. Missing parent directories are created, and each new directory's
//!    parent is fsynced (outermost first): a directory created here is itself
//!    an entry of its parent, and without that sync the new path, and with it
//!    a write reported durable, may vanish in a crash.
//! 2. The temporary file is created exclusively in the target's directory,
//!    under a name unique to this process start; a failed exclusive create
//!    made nothing of ours, so whatever occupies the name is never removed
//!    (the next name is tried). Stale temporary files are removed only when
//!    their name is this crate's pattern for that target with another
//!    start tag, and only if they are regular files.
//! 3. The temporary file is removed on every failure before the rename; after
//!    the rename its name is gone (it is the target).
//! 4. Every step is named by a [`MetadataIoOperation`]; a failure is a
//!    [`RuntimeError`] of kind [`Io`](crate::RuntimeErrorKind::Io) whose
//!    [`operation`](RuntimeError::operation) is the step's
//!    [`RuntimeOperation`] and whose source is the [`io::Error`].
//! 5. A failure at [`SyncParent`](MetadataIoOperation::SyncParent) happens
//!    *after* the rename: the new content is visible but its durability is
//!    unknown, so callers classify it as "commit outcome unknown" rather than
//!    "failed before commit".
//! 6. The steps run behind the crate-private [`PersistSteps`] trait, so the
//!    crate's test-only fault injector (`durable/fault.rs`) exercises the very same
//!    protocol code ([`persist_with`]) and the very same real filesystem
//!    calls, failing only the step it was told to fail.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use crate::loom::StaticAtomicU64;
use crate::{error::RuntimeError, error::RuntimeOperation, error::RuntimeResult};

/// One step of an atomic metadata write, in execution order.
///
/// `Display` is a human phrase ("write the temporary file");
/// [`runtime_operation`](Self::runtime_operation) is the matching
/// [`RuntimeOperation`] label carried by a [`RuntimeError`].
///
/// # Examples
///
/// ```
/// use rocketmq_runtime::{MetadataIoOperation, RuntimeOperation};
///
/// let step = MetadataIoOperation::SyncParent;
/// assert_eq!(step.to_string(), "sync the parent directory");
/// assert_eq!(step.runtime_operation(), RuntimeOperation::MetadataSyncParent);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetadataIoOperation {
    /// Creating the target's parent directory (and its missing ancestors).
    CreateParent,
    /// Exclusively creating the temporary file beside the target.
    CreateTemporary,
    /// Writing the snapshot into the temporary file.
    WriteTemporary,
    /// Syncing the temporary file's data and metadata to stable storage.
    SyncTemporary,
    /// Atomically renaming the temporary file over the target.
    ReplaceTarget,
    /// Syncing the parent directory so the rename itself is durable. A
    /// failure here happens after the target was replaced.
    SyncParent,
    /// Removing the temporary file after an earlier step failed.
    RemoveTemporary,
}

impl MetadataIoOperation {
    /// Every step, in execution order (removal last).
    #[cfg(all(test, not(loom)))]
    pub(crate) const ALL: [Self; 7] = [
        Self::CreateParent,
        Self::CreateTemporary,
        Self::WriteTemporary,
        Self::SyncTemporary,
        Self::ReplaceTarget,
        Self::SyncParent,
        Self::RemoveTemporary,
    ];

    /// The [`RuntimeOperation`] label of this step
    /// (`RuntimeOperation::Metadata*`).
    pub const fn runtime_operation(self) -> RuntimeOperation {
        match self {
            Self::CreateParent => RuntimeOperation::MetadataCreateParent,
            Self::CreateTemporary => RuntimeOperation::MetadataCreateTemporary,
            Self::WriteTemporary => RuntimeOperation::MetadataWriteTemporary,
            Self::SyncTemporary => RuntimeOperation::MetadataSyncTemporary,
            Self::ReplaceTarget => RuntimeOperation::MetadataReplaceTarget,
            Self::SyncParent => RuntimeOperation::MetadataSyncParent,
            Self::RemoveTemporary => RuntimeOperation::MetadataRemoveTemporary,
        }
    }

    /// Position in [`ALL`](Self::ALL).
    #[cfg(all(test, not(loom)))]
    pub(crate) const fn index(self) -> usize {
        self as usize
    }

    const fn phrase(self) -> &'static str {
        match self {
            Self::CreateParent => "create the parent directory",
            Self::CreateTemporary => "create the temporary file",
            Self::WriteTemporary => "write the temporary file",
            Self::SyncTemporary => "sync the temporary file",
            Self::ReplaceTarget => "replace the target with the temporary file",
            Self::SyncParent => "sync the parent directory",
            Self::RemoveTemporary => "remove the temporary file",
        }
    }
}

impl fmt::Display for MetadataIoOperation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.phrase())
    }
}

/// Durable, all-or-nothing replacement of one metadata file.
///
/// The metadata actor calls [`persist_atomic`](Self::persist_atomic) from a
/// blocking lane, one call per snapshot generation; tests and embedders can
/// supply their own implementation (for example to inject faults) through
/// `MetadataIoPlan::start_with_file_system`.
///
/// # Contract
///
/// * The target is never observed with partial content: a reader sees either
///   the previous file (or no file) or the complete new `bytes`.
/// * On `Ok(())` the new content is durable.
/// * On `Err`, [`RuntimeError::operation`] names the failed step (one of the
///   `RuntimeOperation::Metadata*` labels, see
///   [`MetadataIoOperation::runtime_operation`]) and the error's source is the
///   underlying [`io::Error`]. Only a failure labelled
///   [`MetadataSyncParent`](RuntimeOperation::MetadataSyncParent) may leave the
///   new content published (but not known to be durable); every other failure
///   leaves the previous target untouched.
pub trait MetadataFileSystem: fmt::Debug + Send + Sync + 'static {
    /// Replaces `target` with `bytes`, atomically and durably.
    ///
    /// # Errors
    ///
    /// A [`RuntimeError`] of kind [`Io`](crate::RuntimeErrorKind::Io) whose
    /// operation names the failed step; see the trait-level contract for
    /// what each step's failure leaves on disk.
    fn persist_atomic(&self, target: &Path, bytes: &[u8]) -> RuntimeResult<()>;

    /// Removes what an earlier process left of its own writes beside
    /// `target` (temporary files of a write it never finished) and
    /// returns how many entries it removed. The metadata actor calls it
    /// once per target, on the lane, before the target's first write.
    /// The default removes nothing. Only one process may write a target's
    /// directory (a broker holds a lock on its data directory): another
    /// live writer's temporary files would look stale.
    ///
    /// # Errors
    ///
    /// A [`RuntimeError`] of kind [`Io`](crate::RuntimeErrorKind::Io)
    /// (operation [`MetadataRemoveTemporary`](RuntimeOperation::MetadataRemoveTemporary))
    /// when the directory cannot be listed or a stale file cannot be
    /// removed (the others are removed all the same); the actor logs it and
    /// writes anyway.
    fn remove_stale_temporaries(&self, target: &Path) -> RuntimeResult<usize> {
        let _ = target;
        Ok(0)
    }
}

/// [`MetadataFileSystem`] on the local filesystem: temporary file, `fsync`,
/// atomic rename, parent-directory `fsync`.
///
/// [`persist_atomic`](MetadataFileSystem::persist_atomic) runs these steps,
/// each labelled by a [`MetadataIoOperation`]:
///
/// 1. [`CreateParent`](MetadataIoOperation::CreateParent): create the
///    target's parent directory and missing ancestors.
/// 2. [`CreateTemporary`](MetadataIoOperation::CreateTemporary): create
///    `.{file name}.{pid}.{start tag}.{sequence}.tmp` in that directory with
///    `create_new`, so an existing file or symlink at that name (even a
///    dangling one) is never opened or followed. `sequence` comes from a
///    process-wide counter, so concurrent writers never share a temporary
///    file; the start tag is random per process start, so a restarted
///    process that has the same pid (PID 1 in a container) never meets the
///    names a killed run left. A name that exists anyway is skipped for
///    the next sequence number (up to 16 attempts).
/// 3. [`WriteTemporary`](MetadataIoOperation::WriteTemporary): write all
///    bytes.
/// 4. [`SyncTemporary`](MetadataIoOperation::SyncTemporary): `sync_all` the
///    temporary file.
/// 5. [`ReplaceTarget`](MetadataIoOperation::ReplaceTarget): rename the
///    temporary file over the target (atomic on POSIX filesystems).
/// 6. [`SyncParent`](MetadataIoOperation::SyncParent): open the parent
///    directory and `sync_all` it, making the rename durable. Unix only;
///    elsewhere the step succeeds without a call.
///
/// [`remove_stale_temporaries`](MetadataFileSystem::remove_stale_temporaries)
/// removes the temporary files an earlier process (killed between its
/// create and its rename) left beside a target: regular files whose names
/// follow this pattern for that target with another start tag, or the
/// older `.{file name}.{pid}.{sequence}.tmp` form. Nothing else in the
/// directory is touched.
///
/// If any step before the rename fails (or panics), the temporary file is
/// removed ([`RemoveTemporary`](MetadataIoOperation::RemoveTemporary)) before
/// the error is returned. Removal is best effort: a removal failure is logged
/// and never replaces the original error. A failure at `SyncParent` is
/// reported as [`RuntimeOperation::MetadataSyncParent`]; the new content is
/// already visible at that point.
///
/// The implementation blocks the calling thread; call it from a blocking
/// lane, never from an async task.
///
/// # Examples
///
/// ```
/// use rocketmq_runtime::{LocalMetadataFileSystem, MetadataFileSystem};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = std::env::temp_dir().join(format!("fs-doc-{}", std::process::id()));
/// let target = dir.join("topics.json");
/// LocalMetadataFileSystem.persist_atomic(&target, b"{\"topics\":[]}")?;
/// assert_eq!(std::fs::read(&target)?, b"{\"topics\":[]}");
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct LocalMetadataFileSystem;

impl LocalMetadataFileSystem {
    /// The local filesystem implementation (same as `Default`).
    pub const fn new() -> Self {
        Self
    }
}

impl MetadataFileSystem for LocalMetadataFileSystem {
    fn persist_atomic(&self, target: &Path, bytes: &[u8]) -> RuntimeResult<()> {
        persist_with(self, target, bytes)
    }

    fn remove_stale_temporaries(&self, target: &Path) -> RuntimeResult<usize> {
        let Some(file_name) = target.file_name() else {
            return Ok(0);
        };
        let directory = parent_directory(target);
        let entries = match fs::read_dir(directory) {
            Ok(entries) => entries,
            // No directory yet: nothing was left in it.
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(0),
            Err(error) => return Err(step_error(MetadataIoOperation::RemoveTemporary, error)),
        };
        let stem = temporary_stem(file_name);
        let own = format!("{:016x}", process_start_tag());
        let mut removed = 0;
        // A file that cannot be removed does not stop the others.
        let mut first_error = None;
        for entry in entries.flatten() {
            let name = entry.file_name();
            if !is_stale_temporary(&name, &stem, &own) {
                continue;
            }
            // Regular files only: a symlink or directory of that name is
            // not something this crate made.
            if !entry.file_type().is_ok_and(|kind| kind.is_file()) {
                continue;
            }
            match fs::remove_file(entry.path()) {
                Ok(()) => removed += 1,
                Err(error) if error.kind() == io::ErrorKind::NotFound => {}
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
        }
        match first_error {
            Some(error) => Err(step_error(MetadataIoOperation::RemoveTemporary, error)),
            None => Ok(removed),
        }
    }
}

/// A random tag fixed for this process start: it makes temporary names
/// unique across restarts that reuse a pid.
fn process_start_tag() -> u64 {
    static TAG: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TAG.get_or_init(|| {
        use std::hash::BuildHasher;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos());
        // `RandomState` is seeded from the OS's randomness once per process.
        std::collections::hash_map::RandomState::new().hash_one((now, std::process::id()))
    })
}

/// The part of a temporary name before its suffix: `.` and the target's
/// file name, cut to [`MAX_TEMPORARY_STEM_BYTES`] on a character boundary.
fn temporary_stem(file_name: &OsStr) -> OsString {
    let mut name = OsString::from(".");
    if file_name.len() <= MAX_TEMPORARY_STEM_BYTES {
        name.push(file_name);
    } else {
        let lossy = file_name.to_string_lossy();
        let mut end = MAX_TEMPORARY_STEM_BYTES;
        while !lossy.is_char_boundary(end) {
            end -= 1;
        }
        name.push(&lossy[..end]);
    }
    name
}

/// Whether `name` is a temporary file of this crate for the target whose
/// stem is `stem`, made by another process start than the one tagged
/// `own`: `{stem}.{pid}.{tag}.{sequence}.tmp`, or the older
/// `{stem}.{pid}.{sequence}.tmp`.
fn is_stale_temporary(name: &OsStr, stem: &OsStr, own: &str) -> bool {
    let (Some(name), Some(stem)) = (name.to_str(), stem.to_str()) else {
        return false;
    };
    let Some(suffix) = name
        .strip_prefix(stem)
        .and_then(|rest| rest.strip_prefix('.'))
        .and_then(|rest| rest.strip_suffix(".tmp"))
    else {
        return false;
    };
    let digits = |part: &str| !part.is_empty() && part.bytes().all(|byte| byte.is_ascii_digit());
    let parts: Vec<&str> = suffix.split('.').collect();
    match parts.as_slice() {
        [pid, sequence] => digits(pid) && digits(sequence),
        [pid, tag, sequence] => {
            digits(pid)
                && digits(sequence)
                && tag.len() == 16
                && tag.bytes().all(|byte| byte.is_ascii_hexdigit())
                && *tag != own
        }
        _ => false,
    }
}

/// Source of the `{sequence}` part of temporary file names. A plain id
/// source that no loom model explores (see [`StaticAtomicU64`]).
static TEMPORARY_SEQUENCE: StaticAtomicU64 = StaticAtomicU64::new(0);

/// Names tried for a temporary file before an occupied name is an error.
const TEMPORARY_ATTEMPTS: usize = 16;

/// The longest part of the target's file name copied into a temporary file
/// name, in bytes, so that the decorated name stays below `NAME_MAX` (255).
const MAX_TEMPORARY_STEM_BYTES: usize = 128;

/// The individual filesystem calls of an atomic write.
///
/// [`persist_with`] owns the protocol (order, error labels, cleanup); an
/// implementation only performs single steps. [`LocalMetadataFileSystem`]
/// performs the real calls; the test-only fault injector and unit-test
/// wrappers delegate to it and replace selected steps.
pub(crate) trait PersistSteps {
    /// The temporary file name to use for a target named `file_name` in
    /// `directory`; must be in `directory` and unique per call.
    fn temporary_path(&self, directory: &Path, file_name: &OsStr) -> PathBuf;
    /// [`MetadataIoOperation::CreateParent`]: creates `directory` and its
    /// missing ancestors; returns the directories it created, outermost
    /// first (their own entries still need their parents synced).
    fn create_parent(&self, directory: &Path) -> io::Result<Vec<PathBuf>>;
    /// [`MetadataIoOperation::CreateTemporary`]; must fail if `path` exists.
    fn create_temporary(&self, path: &Path) -> io::Result<File>;
    /// [`MetadataIoOperation::WriteTemporary`].
    fn write_temporary(&self, file: &mut File, bytes: &[u8]) -> io::Result<()>;
    /// [`MetadataIoOperation::SyncTemporary`].
    fn sync_temporary(&self, file: &File) -> io::Result<()>;
    /// [`MetadataIoOperation::ReplaceTarget`].
    fn replace_target(&self, temporary: &Path, target: &Path) -> io::Result<()>;
    /// [`MetadataIoOperation::SyncParent`].
    fn sync_parent(&self, directory: &Path) -> io::Result<()>;
    /// [`MetadataIoOperation::RemoveTemporary`].
    fn remove_temporary(&self, path: &Path) -> io::Result<()>;
}

impl PersistSteps for LocalMetadataFileSystem {
    fn temporary_path(&self, directory: &Path, file_name: &OsStr) -> PathBuf {
        let sequence = TEMPORARY_SEQUENCE.fetch_add(1, Ordering::Relaxed);
        let mut name = temporary_stem(file_name);
        name.push(format!(
            ".{}.{:016x}.{sequence}.tmp",
            std::process::id(),
            process_start_tag()
        ));
        directory.join(name)
    }

    fn create_parent(&self, directory: &Path) -> io::Result<Vec<PathBuf>> {
        let mut missing = Vec::new();
        let mut current = directory;
        while !current.as_os_str().is_empty() && fs::symlink_metadata(current).is_err() {
            missing.push(current.to_path_buf());
            match current.parent() {
                Some(parent) => current = parent,
                None => break,
            }
        }
        fs::create_dir_all(directory)?;
        missing.reverse();
        Ok(missing)
    }

    fn create_temporary(&self, path: &Path) -> io::Result<File> {
        // `create_new` is O_CREAT | O_EXCL: it fails on any existing entry,
        // including a symlink (dangling or not), which is never followed.
        OpenOptions::new().write(true).create_new(true).open(path)
    }

    fn write_temporary(&self, file: &mut File, bytes: &[u8]) -> io::Result<()> {
        file.write_all(bytes)
    }

    fn sync_temporary(&self, file: &File) -> io::Result<()> {
        file.sync_all()
    }

    fn replace_target(&self, temporary: &Path, target: &Path) -> io::Result<()> {
        fs::rename(temporary, target)
    }

    fn sync_parent(&self, directory: &Path) -> io::Result<()> {
        #[cfg(unix)]
        {
            File::open(directory)?.sync_all()
        }
        #[cfg(not(unix))]
        {
            // Directories cannot be opened for syncing portably; the rename
            // is as durable as the platform makes it.
            let _ = directory;
            Ok(())
        }
    }

    fn remove_temporary(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }
}

/// The directory a target lives in; `.` for a bare relative file name.
pub(crate) fn parent_directory(target: &Path) -> &Path {
    match target.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

/// Labels an `io::Error` with the step that produced it.
#[track_caller]
fn step_error(step: MetadataIoOperation, source: io::Error) -> RuntimeError {
    RuntimeError::io(step.runtime_operation(), source)
}

/// Removes the temporary file on drop unless the rename consumed it, so every
/// exit before the rename (error or panic) cleans up.
struct TemporaryGuard<'a, S: PersistSteps + ?Sized> {
    steps: &'a S,
    path: &'a Path,
    armed: bool,
}

impl<S: PersistSteps + ?Sized> Drop for TemporaryGuard<'_, S> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if let Err(error) = self.steps.remove_temporary(self.path) {
            // Best effort: the caller gets the step that actually failed.
            tracing::warn!(
                operation = %RuntimeOperation::MetadataRemoveTemporary,
                path = %self.path.display(),
                error = %error,
                "could not remove a temporary metadata file after a failed write"
            );
        }
    }
}

/// The atomic-replacement protocol over `steps`; see
/// [`LocalMetadataFileSystem`] for the sequence and failure semantics.
pub(crate) fn persist_with<S: PersistSteps + ?Sized>(
    steps: &S,
    target: &Path,
    bytes: &[u8],
) -> RuntimeResult<()> {
    let Some(file_name) = target.file_name() else {
        return Err(step_error(
            MetadataIoOperation::CreateTemporary,
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "metadata target path has no file name",
            ),
        ));
    };
    let directory = parent_directory(target);
    let created = steps
        .create_parent(directory)
        .map_err(|error| step_error(MetadataIoOperation::CreateParent, error))?;
    // A directory created here is itself an entry of its parent: sync each
    // parent (outermost first), or the new path, and with it a write
    // reported durable, may vanish in a crash.
    for created in &created {
        steps
            .sync_parent(parent_directory(created))
            .map_err(|error| step_error(MetadataIoOperation::CreateParent, error))?;
    }

    // A failed exclusive create made nothing of ours: never remove whatever
    // occupies the name; an occupied name is skipped for the next one.
    let mut attempts = 0;
    let (temporary, mut file) = loop {
        let temporary = steps.temporary_path(directory, file_name);
        match steps.create_temporary(&temporary) {
            Ok(file) => break (temporary, file),
            Err(error)
                if error.kind() == io::ErrorKind::AlreadyExists
                    && attempts + 1 < TEMPORARY_ATTEMPTS =>
            {
                attempts += 1;
            }
            Err(error) => return Err(step_error(MetadataIoOperation::CreateTemporary, error)),
        }
    };
    let mut guard = TemporaryGuard {
        steps,
        path: &temporary,
        armed: true,
    };

    steps
        .write_temporary(&mut file, bytes)
        .map_err(|error| step_error(MetadataIoOperation::WriteTemporary, error))?;
    steps
        .sync_temporary(&file)
        .map_err(|error| step_error(MetadataIoOperation::SyncTemporary, error))?;
    // Close before the rename (required on some platforms, harmless on Unix).
    drop(file);
    steps
        .replace_target(&temporary, target)
        .map_err(|error| step_error(MetadataIoOperation::ReplaceTarget, error))?;
    // The temporary name is gone: it now is the target.
    guard.armed = false;
    drop(guard);

    steps
        .sync_parent(directory)
        .map_err(|error| step_error(MetadataIoOperation::SyncParent, error))
}

#[cfg(all(test, not(loom)))]
mod fault;
#[cfg(all(test, not(loom)))]
pub(crate) use fault::{FaultInjectingFileSystem, InjectedFault};

#[cfg(all(test, not(loom)))]
pub(crate) mod tests;
