//! Metadata persistence: a coalescing actor that writes resource snapshots
//! durably through the context's shared `MetadataIo` lane.
//!
//! | State | Owner |
//! | --- | --- |
//! | per-resource generations, waiters, pending counts, ready order | [`actor`] (`ActorState`, one lock) |
//! | target ownership, durable history, fences, retirement (per owner) | [`targets`] (`MetadataTargetRegistry`, owned by `RuntimeResources`) |
//! | the durable replacement steps | [`fs`] (`LocalMetadataFileSystem`) |

pub(crate) mod actor;
pub(crate) mod targets;
pub(crate) mod types;

pub(crate) use actor::ActorSeat;
pub use actor::{
    MetadataIoActor, MetadataIoObserver, MetadataIoPlan, MetadataIoReceipt, MetadataStorageFailure,
};
pub use targets::{
    MetadataTargetIdentity, MetadataTargetRegistryStats, MetadataTargetRetirementOutcome,
};
pub use types::*;
