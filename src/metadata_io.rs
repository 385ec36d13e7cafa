//! Metadata persistence: a coalescing actor that writes resource snapshots
//! durably through the context's shared `MetadataIo` lane.
//!
//! | State | Owner |
//! | --- | --- |
//! | per-resource generations, waiters, pending counts, ready order | [`actor`] (`ActorState`, one lock) |
//! | target ownership and durable history (per owner) | `crate::resources::RuntimeResources` |
//! | the durable replacement steps | [`fs`] (`LocalMetadataFileSystem`) |

pub(crate) mod actor;
pub(crate) mod fs;
pub(crate) mod types;

pub use actor::{MetadataIoActor, MetadataIoPlan, MetadataIoReceipt};
pub use types::*;
