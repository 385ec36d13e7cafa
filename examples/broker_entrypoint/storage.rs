//! The broker's storage: the data directory (created, checked, locked),
//! the consumer-offset table (recovered from the last durable one, written
//! through the metadata actor) and the store's checkpoint file.

use super::*;
use rocketmq_runtime::{LocalMetadataFileSystem, MetadataFileSystem};

/// The held lock of the data directory (released when the process exits).
#[cfg(unix)]
pub(crate) type DataDirLock = nix::fcntl::Flock<std::fs::File>;
/// No lock outside Unix.
#[cfg(not(unix))]
pub(crate) type DataDirLock = ();

/// Writes the last durable offset table to the store's checkpoint file
/// through the drain lease, by the crate's atomic replace (temporary file,
/// fsync, rename, directory fsync: a failed write leaves the previous
/// checkpoint whole); false when it was not flushed.
pub(crate) fn flush_checkpoint(
    owner: &RuntimeOwner,
    lease: &BlockingDrainLease,
    offsets: &OffsetTable,
    table: &str,
) -> bool {
    let path = offsets.checkpoint.clone();
    let bytes = table.as_bytes().to_vec();
    let flushed = owner.block_on(lease.spawn_io("flush-checkpoint", move || {
        LocalMetadataFileSystem.persist_atomic(&path, &bytes)
    }));
    match flushed.and_then(|written| written) {
        Ok(()) => true,
        Err(error) => {
            note!(
                "checkpoint not flushed: {}; the previous checkpoint is kept",
                explain(&error)
            );
            false
        }
    }
}

/// The metadata resource that holds the consumer offsets.
pub(crate) const OFFSETS_RESOURCE: &str = "consumer-offsets";

/// The offset table's file in `data_dir`.
pub(crate) fn offsets_path(data_dir: &Path) -> PathBuf {
    data_dir.join("consumer-offsets.json")
}

/// Consecutive failed writes of a resource after which `/readyz` answers
/// `503` (the `storage` dependency), until a write is durable again.
pub(crate) const STORAGE_FAILURES_BEFORE_UNREADY: u64 = 2;

/// The broker whose offsets this process owns: a table of another broker
/// is foreign and never resumed from.
pub(crate) const BROKER_NAME: &str = "broker-a";
/// The simulated queues and how far each advances per snapshot.
pub(crate) const QUEUES: [(&str, u64); 2] = [("TopicTest-0", 10), ("TopicTest-1", 7)];

/// A simulated consumer-offset table: each snapshot advances the offsets
/// from where the last durable table (read at start) left them. `path` is
/// its metadata file; `checkpoint` the store's own copy, written once at
/// the stop through the storage lane.
#[derive(Clone)]
pub(crate) struct OffsetTable {
    pub(crate) path: PathBuf,
    pub(crate) checkpoint: PathBuf,
    pub(crate) offsets: Arc<std::sync::Mutex<[u64; 2]>>,
}

impl OffsetTable {
    /// The table's current content as JSON; the offsets advance.
    pub(crate) fn snapshot(&self) -> String {
        let mut offsets = self
            .offsets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let table = table_json(&offsets);
        for (offset, (_, step)) in offsets.iter_mut().zip(QUEUES) {
            *offset += step;
        }
        table
    }
}

pub(crate) fn table_json(offsets: &[u64; 2]) -> String {
    let queues: serde_json::Map<String, serde_json::Value> = QUEUES
        .iter()
        .zip(offsets)
        .map(|((queue, _), offset)| ((*queue).to_owned(), (*offset).into()))
        .collect();
    serde_json::json!({ "broker": BROKER_NAME, "offsets": queues }).to_string()
}

/// Parses a table this broker wrote; `None` for anything else.
pub(crate) fn parse_table(bytes: &[u8]) -> Option<[u64; 2]> {
    let table: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    if table["broker"] != BROKER_NAME {
        return None;
    }
    let mut offsets = [0; 2];
    for (offset, (queue, _)) in offsets.iter_mut().zip(QUEUES) {
        *offset = table["offsets"][queue].as_u64()?;
    }
    Some(offsets)
}

/// What the start found in the data directory.
pub(crate) enum Recovered {
    /// No table yet: a first start.
    Fresh,
    /// The last durable table: the broker resumes from it.
    Resumed([u64; 2]),
    /// A corrupt or foreign table, moved aside to the path given.
    MovedAside(PathBuf),
}

/// Reads the last durable offset table, on the metadata lane (blocking file
/// I/O never runs on a worker thread). A file that is not this broker's
/// table is renamed to `<name>.unreadable-<unix seconds>` and the broker
/// starts from zero: it is kept for an operator, never overwritten.
pub(crate) fn recover_offsets(
    owner: &RuntimeOwner,
    metadata: &ChildServiceContext,
    path: &Path,
) -> Result<Recovered, String> {
    let path = path.to_path_buf();
    let read = owner.block_on(metadata.metadata_io().spawn_io("recover-offsets", move || {
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Recovered::Fresh)
            }
            Err(error) => return Err(format!("cannot read {}: {error}", path.display())),
        };
        if let Some(offsets) = parse_table(&bytes) {
            return Ok(Recovered::Resumed(offsets));
        }
        let seconds = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_secs());
        let mut aside = path.clone().into_os_string();
        aside.push(format!(".unreadable-{seconds}"));
        let aside = PathBuf::from(aside);
        std::fs::rename(&path, &aside).map_err(|error| {
            format!(
                "{} is not a {BROKER_NAME} offset table and cannot be moved aside: {error}",
                path.display()
            )
        })?;
        Ok(Recovered::MovedAside(aside))
    }));
    read.map_err(|error| explain(&error))?
}

/// Creates the data directory if it is missing; it must be a directory.
pub(crate) fn create_data_dir(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|error| {
        format!(
            "data directory {}: cannot create it: {error}",
            dir.display()
        )
    })
}

/// Checks that the (locked) data directory can hold the broker's files: a
/// file must be creatable, writable and syncable in it (a read-only mount,
/// a missing permission or a full disk fail here, naming the path and the
/// OS error).
pub(crate) fn check_data_dir(dir: &Path) -> Result<(), String> {
    let fail = |step: &str, error: std::io::Error| {
        format!("data directory {}: cannot {step}: {error}", dir.display())
    };
    let probe = dir.join(".broker_entrypoint.probe");
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&probe)
        .and_then(|mut file| {
            std::io::Write::write_all(&mut file, b"probe")?;
            file.sync_all()
        });
    let removed = match std::fs::remove_file(&probe) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    };
    written.map_err(|error| fail("write a file in it", error))?;
    removed.map_err(|error| fail("remove a file from it", error))
}

/// Takes the data directory's lock file (`.lock`, an exclusive `flock`):
/// one broker per directory, so nobody else writes its files (or its
/// temporary files, which a start removes as stale).
#[cfg(unix)]
pub(crate) fn lock_data_dir(dir: &Path) -> Result<DataDirLock, String> {
    let path = dir.join(".lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|error| {
            format!(
                "data directory {}: cannot open {}: {error}",
                dir.display(),
                path.display()
            )
        })?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).map_err(
        |(_, errno)| {
            if errno == nix::errno::Errno::EWOULDBLOCK {
                format!(
                    "data directory {} is in use by another broker (lock {})",
                    dir.display(),
                    path.display()
                )
            } else {
                format!(
                    "data directory {}: cannot lock {}: {errno}",
                    dir.display(),
                    path.display()
                )
            }
        },
    )
}

#[cfg(not(unix))]
pub(crate) fn lock_data_dir(_dir: &Path) -> Result<DataDirLock, String> {
    Ok(())
}

/// Accepted offset tables whose write failed (a failed or unknown commit):
/// accepted data that did not become durable, counted for the exit code and
/// named in the report.
#[derive(Default)]
pub(crate) struct StorageLosses {
    pub(crate) failed_writes: AtomicU64,
    pub(crate) last: std::sync::Mutex<Option<String>>,
}

impl StorageLosses {
    pub(crate) fn record(&self, outcome: &MetadataIoCommitOutcome) {
        let (MetadataIoCommitOutcome::FailedBeforeCommit(error)
        | MetadataIoCommitOutcome::CommitOutcomeUnknown(error)) = outcome
        else {
            return;
        };
        let _ = self.refused(error);
    }

    /// A table that was not persisted (a failed write, or a submission the
    /// actor refused, as for a fenced target); true when its error differs
    /// from the last one (the library logs failed writes; the caller prints
    /// a refusal only then).
    pub(crate) fn refused(&self, error: &RuntimeError) -> bool {
        self.failed_writes.fetch_add(1, Ordering::Relaxed);
        let text = explain(error);
        let mut last = self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let new = last.as_deref() != Some(text.as_str());
        *last = Some(text);
        new
    }
}
