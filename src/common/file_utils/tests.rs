use std::error::Error as _;

use super::*;
use crate::durable::tests::entries;
use crate::error::RuntimeErrorKind;

#[test]
fn a_missing_file_reads_as_an_empty_string() {
    let dir = tempfile::tempdir().expect("tempdir");
    let content = file_to_string(dir.path().join("absent.properties")).expect("no error");
    assert_eq!(content, "");
}

#[test]
fn a_second_write_keeps_the_first_content_as_the_backup() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("config").join("broker.properties");
    string_to_file("first", &path).expect("written");
    assert_eq!(file_to_string(&path).expect("read"), "first");
    assert!(
        !backup_path(&path).exists(),
        "nothing to back up the first time"
    );
    string_to_file(String::from("second"), &path).expect("written");
    assert_eq!(file_to_string(&path).expect("read"), "second");
    assert_eq!(
        std::fs::read_to_string(backup_path(&path)).expect("backup"),
        "first"
    );
    assert_eq!(
        entries(path.parent().expect("parent")),
        ["broker.properties", "broker.properties.bak"],
        "no temporary file left"
    );
}

#[test]
fn a_relative_name_is_written_in_the_current_directory_form() {
    assert_eq!(
        backup_path(Path::new("topics.json")),
        PathBuf::from("topics.json.bak")
    );
}

#[test]
fn read_failures_are_io_errors_naming_the_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A directory cannot be read as a file.
    let error = file_to_string(dir.path()).expect_err("a directory");
    assert_eq!(error.kind(), RuntimeErrorKind::Io);
    assert_eq!(error.operation(), RuntimeOperation::ReadFile);
    let source = error.source().expect("the I/O error");
    assert!(
        source
            .to_string()
            .contains(&dir.path().display().to_string()),
        "{source}"
    );
    assert!(source.source().is_some(), "the OS error is kept");
    // Content that is not UTF-8.
    let binary = dir.path().join("binary");
    std::fs::write(&binary, [0xff, 0xfe]).expect("written");
    let error = file_to_string(&binary).expect_err("not UTF-8");
    assert_eq!(error.operation(), RuntimeOperation::ReadFile);
    // The same for the previous content of a replacement.
    let error = string_to_file("x", dir.path()).expect_err("a directory");
    assert_eq!(error.operation(), RuntimeOperation::ReadFile);
}
