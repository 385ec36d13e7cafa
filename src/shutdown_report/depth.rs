//! Deep report trees on small stacks: dropping walks the tree with an
//! explicit stack, and serialization writes at most
//! [`SERIALIZED_DEPTH_LIMIT`](ShutdownReport::SERIALIZED_DEPTH_LIMIT)
//! levels of `children` (a derived serializer recurses once per level),
//! replacing a deeper subtree with a marker that counts its groups.
//!
//! The depth of the serialization in progress is a thread-local counter:
//! a `Serialize` implementation receives no context from its caller, and
//! the counter is restored when each level ends (also on an error or a
//! panic), so one serialization never affects another.

use std::cell::Cell;

use serde::ser::{SerializeSeq, Serializer};
use serde::Serialize;

use super::ShutdownReport;

thread_local! {
    /// Levels of `children` the serialization on this thread is inside.
    static DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// Restores the depth counter when a level ends.
struct Level(usize);

impl Drop for Level {
    fn drop(&mut self) {
        DEPTH.with(|depth| depth.set(self.0));
    }
}

/// The marker written in place of a subtree below the depth limit.
#[derive(Serialize)]
struct Truncated {
    /// Always true: this element is a marker, not a group.
    truncated: bool,
    /// Groups in the omitted subtrees.
    omitted_groups: usize,
}

/// Groups in `children` and all their descendants.
fn count_groups(children: &[ShutdownReport]) -> usize {
    let mut stack: Vec<&ShutdownReport> = children.iter().collect();
    let mut count = 0;
    while let Some(node) = stack.pop() {
        count += 1;
        stack.extend(&node.children);
    }
    count
}

/// `serialize_with` of `children`: the children, or below the depth limit
/// one [`Truncated`] marker.
pub(super) fn serialize_children<S: Serializer>(
    children: &[ShutdownReport],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let depth = DEPTH.with(Cell::get);
    if depth >= ShutdownReport::SERIALIZED_DEPTH_LIMIT && !children.is_empty() {
        let mut seq = serializer.serialize_seq(Some(1))?;
        seq.serialize_element(&Truncated {
            truncated: true,
            omitted_groups: count_groups(children),
        })?;
        return seq.end();
    }
    DEPTH.with(|current| current.set(depth + 1));
    let _level = Level(depth);
    serializer.collect_seq(children)
}

/// A deep tree is freed without recursing: each node's children move to
/// one explicit stack before the node is dropped.
impl Drop for ShutdownReport {
    fn drop(&mut self) {
        let mut stack = std::mem::take(&mut self.children);
        while let Some(mut child) = stack.pop() {
            stack.append(&mut child.children);
        }
    }
}
