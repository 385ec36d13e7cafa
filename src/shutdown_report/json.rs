//! The report's wire form, defined once: the fields a node writes before
//! its children ([`Head`]) and after them ([`Tail`]).
//!
//! Two writers use them:
//!
//! 1. the [`Serialize`] impl (any `serde` format), recursive like every
//!    derived serializer, so it writes at most
//!    [`SERIALIZED_DEPTH_LIMIT`](ShutdownReport::SERIALIZED_DEPTH_LIMIT)
//!    levels of `children` (`depth.rs`);
//! 2. [`ShutdownReport::to_json`], which writes the whole tree at any depth:
//!    each node's head and tail are serialized on their own (they hold no
//!    report), the nesting is driven by an explicit stack, and the compact
//!    text is then indented by a streaming pass that keeps no stack of its
//!    own (lines deeper than 16 levels keep the 16th level's indentation,
//!    so the text stays linear in the tree's size). A 100,000-deep report
//!    is written on a 1 MiB thread stack.
//!
//! Both produce the same JSON for a tree within the depth limit (pretty
//! printed with two spaces, as `serde_json::to_string_pretty` does).

use std::time::Duration;

use serde::{Serialize, Serializer};

use super::released::events_are_zero;
use super::{
    depth, BlockingTaskSnapshot, ReleasedGroup, ShutdownAnnotation, ShutdownReport,
    SupervisedServiceReport, TaskFailure, TaskSnapshot,
};
use crate::shutdown_deadline::serialize_duration_ms;
use crate::task_identity::TaskGroupEventCounts;

/// A node's fields before `children`.
#[derive(Serialize)]
struct Head<'a> {
    name: &'a str,
    #[serde(rename = "elapsed_ms", serialize_with = "serialize_duration_ms")]
    elapsed: Duration,
    completed: usize,
    cancelled: usize,
    aborted: usize,
    failed: usize,
    panicked: usize,
    timed_out: usize,
    leaked: usize,
    blocking_still_running: usize,
}

/// A node's fields after `children`.
#[derive(Serialize)]
struct Tail<'a> {
    remaining_tasks: &'a [TaskSnapshot],
    remaining_tasks_omitted: usize,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    timed_out_tasks: &'a [TaskSnapshot],
    #[serde(skip_serializing_if = "is_zero")]
    timed_out_tasks_omitted: usize,
    blocking_tasks: &'a [BlockingTaskSnapshot],
    annotations: &'a [ShutdownAnnotation],
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
    #[serde(skip_serializing_if = "events_are_zero")]
    events: TaskGroupEventCounts,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    failures: &'a [TaskFailure],
    #[serde(skip_serializing_if = "is_zero")]
    failures_omitted: usize,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    released: &'a [ReleasedGroup],
    #[serde(skip_serializing_if = "is_zero")]
    released_omitted: usize,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    services: &'a [SupervisedServiceReport],
    #[serde(skip_serializing_if = "is_zero")]
    services_omitted: usize,
}

/// `serde` skip test for counters omitted when zero.
#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_zero(value: &usize) -> bool {
    *value == 0
}

impl ShutdownReport {
    fn head(&self) -> Head<'_> {
        Head {
            name: &self.name,
            elapsed: self.elapsed,
            completed: self.completed,
            cancelled: self.cancelled,
            aborted: self.aborted,
            failed: self.failed,
            panicked: self.panicked,
            timed_out: self.timed_out,
            leaked: self.leaked,
            blocking_still_running: self.blocking_still_running,
        }
    }

    fn tail(&self) -> Tail<'_> {
        Tail {
            remaining_tasks: &self.remaining_tasks,
            remaining_tasks_omitted: self.remaining_tasks_omitted,
            timed_out_tasks: &self.timed_out_tasks,
            timed_out_tasks_omitted: self.timed_out_tasks_omitted,
            blocking_tasks: &self.blocking_tasks,
            annotations: &self.annotations,
            reason: self.reason.as_deref(),
            events: self.events,
            failures: &self.failures,
            failures_omitted: self.failures_omitted,
            released: &self.released,
            released_omitted: self.released_omitted,
            services: &self.services,
            services_omitted: self.services_omitted,
        }
    }
}

/// Recursive and depth-limited (module docs, writer 1).
impl Serialize for ShutdownReport {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Node<'a> {
            #[serde(flatten)]
            head: Head<'a>,
            #[serde(serialize_with = "children")]
            children: &'a [ShutdownReport],
            #[serde(flatten)]
            tail: Tail<'a>,
        }

        #[allow(clippy::ref_option_ref)]
        fn children<S: Serializer>(
            children: &&[ShutdownReport],
            serializer: S,
        ) -> Result<S::Ok, S::Error> {
            depth::serialize_children(children, serializer)
        }

        Node {
            head: self.head(),
            children: &self.children,
            tail: self.tail(),
        }
        .serialize(serializer)
    }
}

/// One step of the iterative writer.
enum Step<'a> {
    /// Write a node's head and open its `children`.
    Open(&'a ShutdownReport),
    /// Separate two children.
    Comma,
    /// Close a node's `children` and write its tail.
    Close(&'a ShutdownReport),
}

/// The whole tree as compact JSON, with an explicit stack (writer 2).
pub(super) fn compact(report: &ShutdownReport) -> serde_json::Result<String> {
    let mut out = String::new();
    let mut stack = vec![Step::Open(report)];
    while let Some(step) = stack.pop() {
        match step {
            Step::Open(node) => {
                out.push('{');
                push_fields(&mut out, &node.head())?;
                out.push_str(",\"children\":[");
                stack.push(Step::Close(node));
                for (index, child) in node.children.iter().enumerate().rev() {
                    stack.push(Step::Open(child));
                    if index > 0 {
                        stack.push(Step::Comma);
                    }
                }
            }
            Step::Comma => out.push(','),
            Step::Close(node) => {
                out.push_str("],");
                push_fields(&mut out, &node.tail())?;
                out.push('}');
            }
        }
    }
    Ok(out)
}

/// Appends the fields of `value` (a struct with at least one field written)
/// without its braces.
fn push_fields(out: &mut String, value: &impl Serialize) -> serde_json::Result<()> {
    let object = serde_json::to_string(value)?;
    out.push_str(&object[1..object.len() - 1]);
    Ok(())
}

/// Nesting levels that get their own indentation; deeper lines keep this
/// one, so the output of a degenerate chain stays linear in its size (full
/// indentation would be quadratic in the depth) and is still valid JSON.
const INDENTED_LEVELS: usize = 16;

/// Indents compact JSON as `serde_json::to_string_pretty` does (two spaces,
/// `": "` after a key, `[]` and `{}` when empty), up to
/// [`INDENTED_LEVELS`]; one pass, no stack.
pub(super) fn pretty(compact: &str) -> String {
    let mut out = String::with_capacity(compact.len() * 2);
    let mut level = 0usize;
    let newline = |out: &mut String, level: usize| {
        out.push('\n');
        out.extend(std::iter::repeat_n("  ", level.min(INDENTED_LEVELS)));
    };
    let (mut in_string, mut escaped) = (false, false);
    let mut chars = compact.chars().peekable();
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '{' | '[' => {
                let close = if c == '{' { '}' } else { ']' };
                out.push(c);
                if chars.peek() == Some(&close) {
                    chars.next();
                    out.push(close);
                } else {
                    level += 1;
                    newline(&mut out, level);
                }
            }
            '}' | ']' => {
                level = level.saturating_sub(1);
                newline(&mut out, level);
                out.push(c);
            }
            ',' => {
                out.push(c);
                newline(&mut out, level);
            }
            ':' => out.push_str(": "),
            _ => out.push(c),
        }
    }
    out
}
