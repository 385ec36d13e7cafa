//! Task groups (in progress).
mod identity;
pub use identity::*;
