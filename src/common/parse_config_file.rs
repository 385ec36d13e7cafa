//! Configuration files into `serde` types.
//!
//! [`parse_config_file`] reads a TOML (`.toml`) or JSON (`.json`) file,
//! chosen by its extension, and deserializes it into any
//! `DeserializeOwned` type with the `toml` and `serde_json` crates. Errors
//! are `Configuration` errors whose source chain names the file and, where
//! the format gives them, the line, the column and the field.
//!
//! ```
//! use rocketmq_runtime::common::parse_config_file::parse_config_file;
//!
//! #[derive(serde::Deserialize)]
//! struct BrokerConfig {
//!     broker_name: String,
//!     listen_port: u16,
//! }
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("broker.toml");
//! std::fs::write(&path, "broker_name = \"broker-a\"\nlisten_port = 10911\n")?;
//! let config: BrokerConfig = parse_config_file(path)?;
//! assert_eq!((config.broker_name.as_str(), config.listen_port), ("broker-a", 10911));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::path::PathBuf;

use serde::de::DeserializeOwned;

use crate::error::{RuntimeError, RuntimeOperation, RuntimeResult};

/// Reads `path` and deserializes it by its extension: `toml` or `json`
/// (any case).
///
/// Blocks on the read; from asynchronous code, run it on a blocking lane.
///
/// # Errors
///
/// Kind `Configuration`:
/// * operation `LoadConfigFile` when the file cannot be read, or its
///   extension is neither `toml` nor `json` (the source names the file and
///   the accepted extensions);
/// * operation `DeserializeConfigFile` when the content does not parse or
///   does not fit `C`; the source names the file, the line and column, and
///   the format's own message (which names the field).
pub fn parse_config_file<C: DeserializeOwned>(path: PathBuf) -> RuntimeResult<C> {
    let format = match path
        .extension()
        .and_then(|extension| extension.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("toml") => Format::Toml,
        Some("json") => Format::Json,
        _ => {
            return Err(RuntimeError::configuration_failure(
                RuntimeOperation::LoadConfigFile,
                ConfigFileError {
                    path,
                    position: None,
                    message: "unsupported extension: expected .toml or .json".to_owned(),
                },
            ))
        }
    };
    let content = std::fs::read_to_string(&path).map_err(|error| {
        RuntimeError::configuration_failure(
            RuntimeOperation::LoadConfigFile,
            ConfigFileError {
                path: path.clone(),
                position: None,
                message: error.to_string(),
            },
        )
    })?;
    let parsed = match format {
        Format::Toml => toml::from_str(&content).map_err(|error| {
            let position = error
                .span()
                .map(|span| line_and_column(&content, span.start));
            (position, error.message().to_owned())
        }),
        Format::Json => serde_json::from_str(&content).map_err(|error| {
            let position = (error.line() > 0).then(|| (error.line(), error.column()));
            (position, json_message(&error))
        }),
    };
    parsed.map_err(|(position, message)| {
        // The formats' type errors do not name the field: the key on the
        // error's line does (with its TOML table).
        let message = match position.and_then(|(line, _)| field_on_line(&content, line, format)) {
            Some(field) => format!("field `{field}`: {message}"),
            None => message,
        };
        RuntimeError::configuration_failure(
            RuntimeOperation::DeserializeConfigFile,
            ConfigFileError {
                path,
                position,
                message,
            },
        )
    })
}

/// The key assigned on 1-based `line` (`key = …` in TOML, `"key": …` in
/// JSON), prefixed with its TOML table; `None` when the line has none.
fn field_on_line(content: &str, line: usize, format: Format) -> Option<String> {
    let lines: Vec<&str> = content.lines().collect();
    let text = lines.get(line.checked_sub(1)?)?;
    let separator = match format {
        Format::Toml => '=',
        Format::Json => ':',
    };
    let (key, _) = text.split_once(separator)?;
    let key = key
        .trim()
        .trim_matches(|c| c == '"' || c == '\'')
        .trim_start_matches(['{', ',']);
    let key = key.trim().trim_matches('"');
    if key.is_empty() {
        return None;
    }
    let table = match format {
        Format::Toml => lines[..line - 1]
            .iter()
            .rev()
            .map(|line| line.trim())
            .find(|line| line.starts_with('['))
            .map(|header| header.trim_matches(|c| c == '[' || c == ']').trim()),
        Format::Json => None,
    };
    Some(match table {
        Some(table) if !table.is_empty() => format!("{table}.{key}"),
        _ => key.to_owned(),
    })
}

#[derive(Debug, Clone, Copy)]
enum Format {
    Toml,
    Json,
}

/// `serde_json`'s message without its own " at line L column C" suffix
/// (the position is reported once, by [`ConfigFileError`]).
fn json_message(error: &serde_json::Error) -> String {
    let message = error.to_string();
    let suffix = format!(" at line {} column {}", error.line(), error.column());
    message
        .strip_suffix(&suffix)
        .map_or(message.clone(), str::to_owned)
}

/// The 1-based line and column of byte `offset` in `content`.
fn line_and_column(content: &str, offset: usize) -> (usize, usize) {
    let before = &content[..offset.min(content.len())];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rfind('\n')
        .map_or(before.chars().count(), |newline| {
            before[newline + 1..].chars().count()
        })
        + 1;
    (line, column)
}

/// Why a configuration file was refused: the file, the position when the
/// format gives one, and what was wrong.
#[derive(Debug)]
struct ConfigFileError {
    path: PathBuf,
    position: Option<(usize, usize)>,
    message: String,
}

impl fmt::Display for ConfigFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some((line, column)) = self.position {
            write!(f, " line {line} column {column}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigFileError {}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;
    use crate::error::RuntimeErrorKind;

    #[derive(Debug, serde::Deserialize, PartialEq)]
    struct Config {
        name: String,
        port: u16,
        #[serde(default)]
        tags: Vec<String>,
    }

    fn write(dir: &tempfile::TempDir, name: &str, content: &str) -> PathBuf {
        let path = dir.path().join(name);
        std::fs::write(&path, content).expect("written");
        path
    }

    #[test]
    fn toml_and_json_files_deserialize() {
        let dir = tempfile::tempdir().expect("tempdir");
        let expected = Config {
            name: "broker-a".to_owned(),
            port: 10911,
            tags: vec!["hot".to_owned()],
        };
        let toml = write(
            &dir,
            "broker.toml",
            "name = \"broker-a\"\nport = 10911\ntags = [\"hot\"]\n",
        );
        assert_eq!(parse_config_file::<Config>(toml).expect("TOML"), expected);
        let json = write(
            &dir,
            "broker.JSON",
            r#"{"name": "broker-a", "port": 10911, "tags": ["hot"]}"#,
        );
        assert_eq!(parse_config_file::<Config>(json).expect("JSON"), expected);
    }

    #[test]
    fn a_malformed_file_names_the_file_the_line_and_the_field() {
        let dir = tempfile::tempdir().expect("tempdir");
        let toml = write(
            &dir,
            "bad.toml",
            "name = \"broker-a\"\nport = \"high\"\n[limits]\nmax = -1\n",
        );
        let error = parse_config_file::<Config>(toml).expect_err("a string port");
        assert_eq!(error.kind(), RuntimeErrorKind::Configuration);
        assert_eq!(error.operation(), RuntimeOperation::DeserializeConfigFile);
        let source = error.source().expect("the cause").to_string();
        assert!(source.contains("bad.toml line 2 column"), "{source}");
        assert!(source.contains("field `port`"), "{source}");

        let json = write(
            &dir,
            "bad.json",
            "{\n  \"name\": \"broker-a\",\n  \"port\": -1\n}",
        );
        let error = parse_config_file::<Config>(json).expect_err("a negative port");
        let source = error.source().expect("the cause").to_string();
        assert!(source.contains("bad.json line 3 column"), "{source}");
        assert!(source.contains("field `port`"), "{source}");

        let missing = write(&dir, "missing.json", r#"{"port": 1}"#);
        let source = parse_config_file::<Config>(missing)
            .expect_err("no name")
            .source()
            .expect("the cause")
            .to_string();
        assert!(source.contains("`name`"), "{source}");
    }

    #[test]
    fn unreadable_and_unknown_files_are_load_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        let error =
            parse_config_file::<Config>(dir.path().join("absent.toml")).expect_err("missing");
        assert_eq!(error.kind(), RuntimeErrorKind::Configuration);
        assert_eq!(error.operation(), RuntimeOperation::LoadConfigFile);
        assert!(error
            .source()
            .expect("the cause")
            .to_string()
            .contains("absent.toml"));
        let yaml = write(&dir, "broker.yaml", "name: broker-a\n");
        let error = parse_config_file::<Config>(yaml).expect_err("not supported");
        assert_eq!(error.operation(), RuntimeOperation::LoadConfigFile);
        assert!(error
            .source()
            .expect("the cause")
            .to_string()
            .contains("expected .toml or .json"));
    }

    #[test]
    fn a_toml_field_is_named_with_its_table() {
        let content = "name = 1\n[limits]\nmax = -1\n";
        assert_eq!(
            field_on_line(content, 3, Format::Toml).as_deref(),
            Some("limits.max")
        );
        assert_eq!(
            field_on_line("{\n  \"port\": -1\n}", 2, Format::Json).as_deref(),
            Some("port")
        );
        assert_eq!(field_on_line("[limits]", 1, Format::Toml), None);
    }

    #[test]
    fn positions_count_lines_and_characters_from_one() {
        assert_eq!(line_and_column("ab\ncd", 0), (1, 1));
        assert_eq!(line_and_column("ab\ncd", 4), (2, 2));
        assert_eq!(line_and_column("é\nx", 3), (2, 1));
    }
}
