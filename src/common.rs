//! Helpers for configuration and small state files, and wall-clock time,
//! for broker and name-server code ported from the original crate.
//!
//! * [`file_utils`]: read a file as a string, replace a file durably
//!   keeping a `.bak` copy. Both **block** the calling thread: from
//!   asynchronous code run them on a blocking lane
//!   ([`storage_io`](crate::ChildServiceContext::storage_io)), or persist
//!   state through a [`MetadataIoActor`](crate::MetadataIoActor).
//! * `time_utils` (feature `time-utils`): Unix-epoch clocks and local-time formatting, parsing
//!   and scheduling helpers (local time through `jiff`, which follows the
//!   system time zone and `TZ`).
//! * `parse_config_file` (feature `config-file`): a TOML or JSON configuration file into any
//!   `serde` type, with errors that name the file, the line and the field.
//!
//! These are conveniences at the edge of a service, not part of the
//! runtime's ownership model: nothing here spawns, owns or waits for tasks.

pub mod file_utils;
#[cfg(feature = "config-file")]
pub mod parse_config_file;
#[cfg(feature = "time-utils")]
pub mod time_utils;
