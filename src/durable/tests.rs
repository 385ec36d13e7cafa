use std::collections::HashSet;
use std::error::Error as _;
use std::sync::Arc;

use super::*;
use crate::error::RuntimeErrorKind;

/// Names of the entries of `dir`, sorted (shared with the file helpers'
/// tests).
pub(crate) fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("read dir")
        .map(|entry| {
            entry
                .expect("dir entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

fn temporaries(dir: &Path) -> Vec<String> {
    entries(dir)
        .into_iter()
        .filter(|name| name.contains(".tmp"))
        .collect()
}

fn io_source(error: &RuntimeError) -> &io::Error {
    error
        .source()
        .and_then(|source| source.downcast_ref::<io::Error>())
        .expect("io source")
}

/// The local steps, except that the temporary names are fixed (`name`,
/// after the `earlier` ones in order), so a test can occupy them
/// beforehand; directory syncs are recorded.
#[derive(Debug, Default)]
struct FixedTemporaryName {
    inner: LocalMetadataFileSystem,
    name: &'static str,
    earlier: std::sync::Mutex<Vec<&'static str>>,
    synced: std::sync::Mutex<Vec<PathBuf>>,
}

impl PersistSteps for FixedTemporaryName {
    fn temporary_path(&self, directory: &Path, _file_name: &OsStr) -> PathBuf {
        let mut earlier = self.earlier.lock().expect("unpoisoned");
        if earlier.is_empty() {
            directory.join(self.name)
        } else {
            directory.join(earlier.remove(0))
        }
    }
    fn create_parent(&self, directory: &Path) -> io::Result<Vec<PathBuf>> {
        self.inner.create_parent(directory)
    }
    fn create_temporary(&self, path: &Path) -> io::Result<File> {
        self.inner.create_temporary(path)
    }
    fn write_temporary(&self, file: &mut File, bytes: &[u8]) -> io::Result<()> {
        self.inner.write_temporary(file, bytes)
    }
    fn sync_temporary(&self, file: &File) -> io::Result<()> {
        self.inner.sync_temporary(file)
    }
    fn replace_target(&self, temporary: &Path, target: &Path) -> io::Result<()> {
        self.inner.replace_target(temporary, target)
    }
    fn sync_parent(&self, directory: &Path) -> io::Result<()> {
        self.synced
            .lock()
            .expect("unpoisoned")
            .push(directory.to_path_buf());
        self.inner.sync_parent(directory)
    }
    fn remove_temporary(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_temporary(path)
    }
}

/// Directories the write creates are made durable too: each new
/// directory's parent is synced (outermost first) before the data, and
/// the target's directory after the rename. Existing ones are not.
#[test]
fn created_parent_directories_are_synced_into_their_parents() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let target = root.join("new").join("store").join("topics.json");
    let steps = FixedTemporaryName {
        name: ".fixed.tmp",
        ..FixedTemporaryName::default()
    };
    persist_with(&steps, &target, b"first").expect("write");
    let synced = std::mem::take(&mut *steps.synced.lock().expect("unpoisoned"));
    assert_eq!(
        synced,
        [
            root.to_path_buf(),
            root.join("new"),
            root.join("new").join("store"),
        ]
    );
    persist_with(&steps, &target, b"second").expect("write");
    let synced = std::mem::take(&mut *steps.synced.lock().expect("unpoisoned"));
    assert_eq!(
        synced,
        [root.join("new").join("store")],
        "nothing new created"
    );
}

#[test]
fn operations_map_to_distinct_metadata_labels_and_phrases() {
    let labels: HashSet<_> = MetadataIoOperation::ALL
        .iter()
        .map(|step| step.runtime_operation())
        .collect();
    let phrases: HashSet<_> = MetadataIoOperation::ALL
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(labels.len(), 7);
    assert_eq!(phrases.len(), 7);
    for (index, step) in MetadataIoOperation::ALL.iter().enumerate() {
        assert_eq!(step.index(), index);
        assert!(step.runtime_operation().label().starts_with("metadata-"));
    }
    assert_eq!(
        MetadataIoOperation::CreateParent.to_string(),
        "create the parent directory"
    );
    assert_eq!(
        MetadataIoOperation::ReplaceTarget.runtime_operation(),
        RuntimeOperation::MetadataReplaceTarget
    );
    assert_eq!(
        MetadataIoOperation::RemoveTemporary.runtime_operation(),
        RuntimeOperation::MetadataRemoveTemporary
    );
}

#[test]
fn successful_writes_create_the_parent_replace_the_target_and_leave_only_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let parent = dir.path().join("nested").join("store");
    let target = parent.join("topics.json");

    LocalMetadataFileSystem
        .persist_atomic(&target, b"generation-1")
        .expect("first write");
    assert_eq!(fs::read(&target).expect("read"), b"generation-1");
    LocalMetadataFileSystem
        .persist_atomic(&target, b"gen-2")
        .expect("second write (shorter)");
    assert_eq!(fs::read(&target).expect("read"), b"gen-2");
    LocalMetadataFileSystem
        .persist_atomic(&target, b"")
        .expect("empty snapshot");
    assert_eq!(fs::read(&target).expect("read"), b"");
    assert_eq!(entries(&parent), vec!["topics.json".to_owned()]);
}

#[test]
fn temporary_names_are_hidden_unique_and_beside_the_target() {
    let dir = Path::new("/srv/store");
    let fs = LocalMetadataFileSystem;
    let first = fs.temporary_path(dir, OsStr::new("topics.json"));
    let second = fs.temporary_path(dir, OsStr::new("topics.json"));
    assert_ne!(first, second);
    assert_eq!(first.parent(), Some(dir));
    let name = first.file_name().expect("name").to_string_lossy();
    let prefix = format!(".topics.json.{}.", std::process::id());
    assert!(name.starts_with(&prefix), "{name}");
    assert!(name.ends_with(".tmp"), "{name}");
    let (tag, sequence) = name[prefix.len()..name.len() - ".tmp".len()]
        .split_once('.')
        .expect("start tag and sequence");
    assert_eq!(tag, format!("{:016x}", process_start_tag()));
    sequence.parse::<u64>().expect("numeric sequence");

    let long = "é".repeat(200);
    let shortened = fs.temporary_path(dir, OsStr::new(&long));
    let name = shortened.file_name().expect("name").to_string_lossy();
    assert!(name.len() < 200, "{}", name.len());
    assert!(name.ends_with(".tmp"));

    assert_eq!(parent_directory(Path::new("meta.json")), Path::new("."));
    assert_eq!(parent_directory(Path::new("a/meta.json")), Path::new("a"));
}

#[test]
fn a_fault_before_the_rename_keeps_the_previous_target_and_removes_the_temporary() {
    let cases = [
        (
            MetadataIoOperation::CreateParent,
            InjectedFault::Kind(io::ErrorKind::PermissionDenied),
        ),
        (
            MetadataIoOperation::CreateTemporary,
            InjectedFault::Os(28), // ENOSPC
        ),
        (
            MetadataIoOperation::WriteTemporary,
            InjectedFault::Kind(io::ErrorKind::StorageFull),
        ),
        (
            MetadataIoOperation::WriteTemporary,
            InjectedFault::Os(28), // ENOSPC
        ),
        (
            MetadataIoOperation::SyncTemporary,
            InjectedFault::Os(5), // EIO
        ),
        (
            MetadataIoOperation::ReplaceTarget,
            InjectedFault::Kind(io::ErrorKind::PermissionDenied),
        ),
    ];
    for (step, fault) in cases {
        let dir = tempfile::tempdir().expect("tempdir");
        let target = dir.path().join("offsets.json");
        let fs = FaultInjectingFileSystem::new();
        fs.persist_atomic(&target, b"previous").expect("seed");

        match fault {
            InjectedFault::Kind(kind) => fs.fail_at(step, kind),
            InjectedFault::Os(code) => fs.fail_at_os_error(step, code),
        }
        let error = fs
            .persist_atomic(&target, b"next generation")
            .expect_err("injected fault");
        assert_eq!(error.kind(), RuntimeErrorKind::Io, "{step}");
        assert_eq!(error.operation(), step.runtime_operation(), "{step}");
        let source = io_source(&error);
        match fault {
            InjectedFault::Kind(kind) => assert_eq!(source.kind(), kind, "{step}"),
            InjectedFault::Os(code) => {
                assert_eq!(source.raw_os_error(), Some(code), "{step}");
                #[cfg(target_os = "linux")]
                if code == 28 {
                    assert_eq!(source.kind(), io::ErrorKind::StorageFull);
                }
            }
        }
        assert_eq!(fs.injected_faults(), 1, "{step}");
        assert_eq!(fs::read(&target).expect("read"), b"previous", "{step}");
        assert_eq!(
            entries(dir.path()),
            vec!["offsets.json".to_owned()],
            "{step}: no temporary file may remain"
        );

        // A persistent fault fails the next write at the same step too.
        let again = fs.persist_atomic(&target, b"x").expect_err("still armed");
        assert_eq!(again.operation(), step.runtime_operation());

        fs.clear();
        fs.persist_atomic(&target, b"after recovery")
            .expect("write after the fault clears");
        assert_eq!(fs::read(&target).expect("read"), b"after recovery");
        assert_eq!(entries(dir.path()), vec!["offsets.json".to_owned()]);
    }
}

#[test]
fn a_fault_at_the_first_write_leaves_no_target_at_all() {
    let dir = tempfile::tempdir().expect("tempdir");
    let target = dir.path().join("absent").join("broker.json");
    let fs = FaultInjectingFileSystem::new();
    fs.fail_at(MetadataIoOperation::SyncTemporary, io::ErrorKind::Other);
    let error = fs.persist_atomic(&target, b"data").expect_err("fault");
    assert_eq!(error.operation(), RuntimeOperation::MetadataSyncTemporary);
    assert!(!target.exists());
    assert!(entries(&dir.path().join("absent")).is_empty());
}

#[test]
fn a_fault_at_sync_parent_publishes_the_new_content_and_reports_sync_parent() {
    let dir = tempfile::tempdir().expect("tempdir");
    let target = dir.path().join("subscriptions.json");
    let fs = FaultInjectingFileSystem::new();
    fs.persist_atomic(&target, b"old").expect("seed");

    fs.fail_at_os_error(MetadataIoOperation::SyncParent, 5);
    let error = fs.persist_atomic(&target, b"new").expect_err("fault");
    assert_eq!(error.kind(), RuntimeErrorKind::Io);
    assert_eq!(error.operation(), RuntimeOperation::MetadataSyncParent);
    assert_eq!(io_source(&error).raw_os_error(), Some(5));
    assert_eq!(fs::read(&target).expect("read"), b"new");
    assert_eq!(entries(dir.path()), vec!["subscriptions.json".to_owned()]);

    fs.clear_at(MetadataIoOperation::SyncParent);
    fs.persist_atomic(&target, b"newer").expect("after clear");
    assert_eq!(fs::read(&target).expect("read"), b"newer");
}

#[test]
fn a_cleanup_failure_never_replaces_the_original_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let target = dir.path().join("consumer.json");
    let fs = FaultInjectingFileSystem::new();
    fs.persist_atomic(&target, b"old").expect("seed");

    fs.fail_at(
        MetadataIoOperation::WriteTemporary,
        io::ErrorKind::StorageFull,
    );
    fs.fail_at(
        MetadataIoOperation::RemoveTemporary,
        io::ErrorKind::PermissionDenied,
    );
    let error = fs.persist_atomic(&target, b"new").expect_err("fault");
    assert_eq!(error.operation(), RuntimeOperation::MetadataWriteTemporary);
    assert_eq!(io_source(&error).kind(), io::ErrorKind::StorageFull);
    assert_eq!(fs.injected_faults(), 2);
    assert_eq!(fs::read(&target).expect("read"), b"old");
    // The injected removal failure skipped the real removal.
    let left = temporaries(dir.path());
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(left[0].starts_with(".consumer.json."), "{left:?}");

    // Removal alone armed: nothing fails, nothing to remove.
    fs.clear_at(MetadataIoOperation::WriteTemporary);
    fs.persist_atomic(&target, b"newer").expect("write");
    assert_eq!(fs::read(&target).expect("read"), b"newer");
    assert_eq!(temporaries(dir.path()).len(), 1);
}

#[test]
fn real_failures_are_labelled_and_cleaned_up() {
    let dir = tempfile::tempdir().expect("tempdir");

    // The target is a non-empty directory: the rename fails.
    let target = dir.path().join("occupied");
    fs::create_dir(&target).expect("dir");
    fs::write(target.join("keep"), b"x").expect("file");
    let error = LocalMetadataFileSystem
        .persist_atomic(&target, b"data")
        .expect_err("rename over a directory");
    assert_eq!(error.operation(), RuntimeOperation::MetadataReplaceTarget);
    assert!(temporaries(dir.path()).is_empty());
    assert_eq!(entries(&target), vec!["keep".to_owned()]);

    // A parent component is a regular file: creating the parent fails.
    let blocker = dir.path().join("blocker");
    fs::write(&blocker, b"file").expect("file");
    let error = LocalMetadataFileSystem
        .persist_atomic(&blocker.join("meta.json"), b"data")
        .expect_err("parent is a file");
    assert_eq!(error.operation(), RuntimeOperation::MetadataCreateParent);
    assert_eq!(error.kind(), RuntimeErrorKind::Io);

    // No file name.
    let error = LocalMetadataFileSystem
        .persist_atomic(Path::new("/"), b"data")
        .expect_err("no file name");
    assert_eq!(error.operation(), RuntimeOperation::MetadataCreateTemporary);
    assert_eq!(io_source(&error).kind(), io::ErrorKind::InvalidInput);
}

#[cfg(unix)]
#[test]
fn a_symlink_at_the_temporary_name_is_never_followed_or_removed() {
    use std::os::unix::fs::symlink;

    let dir = tempfile::tempdir().expect("tempdir");
    let outside = tempfile::tempdir().expect("outside");
    let target = dir.path().join("topics.json");
    let victim = outside.path().join("victim");
    let dangling = outside.path().join("never-created");
    fs::write(&victim, b"victim").expect("victim");
    fs::write(&target, b"previous").expect("target");

    let steps = FixedTemporaryName {
        name: ".topics.json.fixed.tmp",
        ..FixedTemporaryName::default()
    };
    let link = dir.path().join(steps.name);

    for destination in [&victim, &dangling] {
        symlink(destination, &link).expect("symlink");
        let error = persist_with(&steps, &target, b"attacker-visible?")
            .expect_err("create_new must refuse an existing symlink");
        assert_eq!(error.operation(), RuntimeOperation::MetadataCreateTemporary);
        assert_eq!(io_source(&error).kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read(&victim).expect("victim"), b"victim");
        assert!(!dangling.exists(), "the dangling link was followed");
        assert_eq!(fs::read(&target).expect("target"), b"previous");
        // Not ours: the failed write must not remove the occupant.
        assert!(fs::symlink_metadata(&link).expect("link").is_symlink());
        fs::remove_file(&link).expect("remove link");
    }

    // With the name free, the same steps succeed.
    persist_with(&steps, &target, b"fresh").expect("write");
    assert_eq!(fs::read(&target).expect("target"), b"fresh");
    assert_eq!(entries(dir.path()), vec!["topics.json".to_owned()]);
}

#[test]
fn concurrent_writers_use_distinct_temporaries_and_publish_a_complete_snapshot() {
    let dir = tempfile::tempdir().expect("tempdir");
    let target: Arc<Path> = dir.path().join("shared.json").into();
    let writers: Vec<_> = (0..4u8)
        .map(|writer| {
            let target = Arc::clone(&target);
            std::thread::spawn(move || {
                let payload = vec![writer; 16 * 1024];
                for _ in 0..8 {
                    LocalMetadataFileSystem
                        .persist_atomic(&target, &payload)
                        .expect("write");
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().expect("writer");
    }
    let content = fs::read(&target).expect("read");
    assert_eq!(content.len(), 16 * 1024);
    assert!(content.iter().all(|byte| *byte == content[0]));
    assert_eq!(entries(dir.path()), vec!["shared.json".to_owned()]);
}

/// An occupied temporary name (a file left by an earlier process with the
/// same pid) is skipped, never opened or removed: the write goes through
/// under the next name.
#[test]
fn occupied_temporary_names_are_skipped() {
    let dir = tempfile::tempdir().expect("tempdir");
    for occupied in [".a.tmp", ".b.tmp"] {
        fs::write(dir.path().join(occupied), b"left").expect("occupy");
    }
    let steps = FixedTemporaryName {
        name: ".c.tmp",
        earlier: std::sync::Mutex::new(vec![".a.tmp", ".b.tmp"]),
        ..FixedTemporaryName::default()
    };
    let target = dir.path().join("offsets.json");
    persist_with(&steps, &target, b"table").expect("written under the third name");
    assert_eq!(fs::read(&target).expect("read"), b"table");
    assert_eq!(
        entries(dir.path()),
        [".a.tmp", ".b.tmp", "offsets.json"],
        "the occupied names are left alone"
    );
}

/// Only this crate's own temporary names for the target, from another
/// process start (or the older pid.sequence form), and only regular files
/// are removed; this process's own, other targets', look-alikes, a
/// directory and a symlink of a matching name stay.
#[test]
fn stale_temporaries_of_the_target_are_removed_and_nothing_else() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let own = format!("{:016x}", process_start_tag());
    let stale = [
        ".offsets.json.1.0123456789abcdef.0.tmp".to_owned(),
        ".offsets.json.1.0123456789abcdef.31.tmp".to_owned(),
        ".offsets.json.4242.7.tmp".to_owned(),
    ];
    let kept = [
        format!(".offsets.json.1.{own}.3.tmp"),
        ".topics.json.1.0123456789abcdef.0.tmp".to_owned(),
        ".offsets.json.1.xyz.0.tmp".to_owned(),
        ".offsets.json.tmp".to_owned(),
        "offsets.json.1.2.tmp".to_owned(),
        ".offsets.json.1.2.tmp.bak".to_owned(),
        "offsets.json".to_owned(),
    ];
    for name in stale.iter().chain(&kept) {
        fs::write(root.join(name), b"x").expect("create");
    }
    fs::create_dir(root.join(".offsets.json.9.0123456789abcdef.1.tmp")).expect("dir");
    #[cfg(unix)]
    std::os::unix::fs::symlink(
        root.join("offsets.json"),
        root.join(".offsets.json.9.8.tmp"),
    )
    .expect("symlink");
    let removed = LocalMetadataFileSystem
        .remove_stale_temporaries(&root.join("offsets.json"))
        .expect("listed");
    assert_eq!(removed, stale.len());
    let left = entries(root);
    for name in &stale {
        assert!(!left.contains(name), "{name} removed");
    }
    for name in &kept {
        assert!(left.contains(name), "{name} kept");
    }
    assert!(left.contains(&".offsets.json.9.0123456789abcdef.1.tmp".to_owned()));
    #[cfg(unix)]
    assert!(left.contains(&".offsets.json.9.8.tmp".to_owned()));
    assert_eq!(
        LocalMetadataFileSystem
            .remove_stale_temporaries(&root.join("missing").join("offsets.json"))
            .expect("no directory: nothing to remove"),
        0
    );
}
