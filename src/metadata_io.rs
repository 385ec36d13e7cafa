//! Metadata persistence: a coalescing actor that writes resource snapshots
//! durably through the context's shared `MetadataIo` lane.
//!
//! | State | Owner |
//! | --- | --- |
//! | per-resource generations, waiters, pending counts, ready order, lifecycle | [`actor`] (`ActorState`, one lock; `actor/lifecycle.rs`) |
//! | target ownership, durable history, fences, retirement, generation counter (per owner) | [`targets`] (`MetadataTargetRegistry`, held for the owner by `RuntimeResources`) |
//! | the durable replacement steps | `crate::durable` (`LocalMetadataFileSystem`, shared with `common::file_utils`) |

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
