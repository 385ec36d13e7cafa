//! Blocking lane identity, kinds and per-lane policies.

use serde::Serialize;

/// A managed blocking lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BlockingLane {
    /// Short storage and filesystem operations.
    StorageIo,
    /// Metadata persistence.
    MetadataIo,
    /// Bounded CPU or cryptographic work.
    CpuCrypto,
}

/// What kind of blocking work a submission is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockingKind {
    /// Short blocking I/O.
    ShortIo,
    /// Bounded CPU-bound work.
    CpuBound,
    /// A long-running blocking loop: always rejected by the lanes; such work
    /// needs a dedicated thread owner with a stop and join protocol.
    LongRunning,
}
