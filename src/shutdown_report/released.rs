//! Evidence that outlives its group: the tasks a group saw fail, by name,
//! and the groups that left the tree before its report was assembled.
//!
//! Invariants:
//!
//! 1. A group that unregisters (its last handle dropped and its tasks
//!    settled) folds its settled counters, its events, its named failures
//!    and its own released groups into one [`ReleasedGroup`] entry of its
//!    parent, keyed by the group's name; a later group of the same name
//!    adds to that entry. So a failure the process absorbed stays in the
//!    evidence after its component is gone.
//! 2. Every list is bounded: at most [`ReleasedGroup::LIMIT`] entries per
//!    report (the groups beyond are summed into one last entry named
//!    [`ReleasedGroup::OTHER`], counted in `released_omitted`) and at most
//!    [`TaskFailure::LIMIT`] named failures per entry or group (the rest
//!    only counted). Counters are never dropped, so health stays exact.
//! 3. A report is unhealthy when a released entry counts a failed,
//!    panicked or timed-out task (the entry's tasks all settled: nothing
//!    leaked).

use serde::Serialize;

use crate::task_identity::{TaskGroupEventCounts, TaskKind, TaskName};

/// How a named task failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskFailureKind {
    /// It panicked while polled or dropped.
    Panicked,
    /// A critical service returned before its group was cancelled.
    Failed,
}

/// A task that failed, by name: kept by its group (and, once the group
/// is released, by its parent's [`ReleasedGroup`] entry).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TaskFailure {
    /// The task's name.
    pub name: TaskName,
    /// What the task was for.
    pub kind: TaskKind,
    /// How it failed.
    pub failure: TaskFailureKind,
    /// A panic's message, bounded and escaped as a supervised service's
    /// (`shutdown_report/services.rs`). Omitted from JSON when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl TaskFailure {
    /// Named failures kept per group (and per released entry); the rest
    /// are counted in `failures_omitted`.
    pub const LIMIT: usize = 16;
}

/// The evidence of the groups of one name that left the tree (their last
/// handle dropped, their tasks settled) before this report was assembled.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ReleasedGroup {
    /// The groups' name ([`OTHER`](Self::OTHER) for the groups beyond
    /// [`LIMIT`](Self::LIMIT) names).
    pub name: String,
    /// How many groups of this name were released (their released
    /// descendants are summed into their entry, not counted here).
    pub groups: usize,
    /// Tasks that returned before their group was cancelled.
    pub completed: usize,
    /// Tasks that ended because their group was cancelled.
    pub cancelled: usize,
    /// Tasks destroyed by an abort.
    pub aborted: usize,
    /// Critical services that returned before their group was cancelled.
    pub failed: usize,
    /// Tasks that panicked.
    pub panicked: usize,
    /// Tasks a shutdown deadline aborted (counted in `aborted` too).
    pub timed_out: usize,
    /// Poisonings and closed-component answers among these groups.
    #[serde(skip_serializing_if = "events_are_zero")]
    pub events: TaskGroupEventCounts,
    /// Up to [`TaskFailure::LIMIT`] of their failed tasks, by name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<TaskFailure>,
    /// Failed tasks beyond those listed in `failures`.
    #[serde(skip_serializing_if = "is_zero")]
    pub failures_omitted: usize,
}

impl ReleasedGroup {
    /// Distinct entries a report keeps; the groups beyond are summed into
    /// one last entry named [`OTHER`](Self::OTHER).
    pub const LIMIT: usize = 64;

    /// The name of the entry that sums the groups beyond
    /// [`LIMIT`](Self::LIMIT) names.
    pub const OTHER: &'static str = "(other released groups)";

    /// Whether these groups left no failure evidence (no failed,
    /// panicked or timed-out task): an entry with any makes its report
    /// unhealthy.
    pub fn is_healthy(&self) -> bool {
        self.failed == 0 && self.panicked == 0 && self.timed_out == 0
    }

    /// Adds `other` (of the same name, or anything into [`OTHER`](Self::OTHER)).
    pub(crate) fn absorb(&mut self, other: &ReleasedGroup) {
        self.groups += other.groups;
        self.completed += other.completed;
        self.cancelled += other.cancelled;
        self.aborted += other.aborted;
        self.failed += other.failed;
        self.panicked += other.panicked;
        self.timed_out += other.timed_out;
        self.events.poisoned_groups += other.events.poisoned_groups;
        self.events.closed_component_requests += other.events.closed_component_requests;
        self.failures_omitted += other.failures_omitted;
        for failure in &other.failures {
            push_failure(
                &mut self.failures,
                &mut self.failures_omitted,
                failure.clone(),
            );
        }
    }
}

/// Keeps `failure` in `failures` while fewer than [`TaskFailure::LIMIT`]
/// are listed, else counts it in `omitted`.
pub(crate) fn push_failure(
    failures: &mut Vec<TaskFailure>,
    omitted: &mut usize,
    failure: TaskFailure,
) {
    if failures.len() < TaskFailure::LIMIT {
        failures.push(failure);
    } else {
        *omitted += 1;
    }
}

/// The released entries of one group (invariant 2).
#[derive(Debug, Clone, Default)]
pub(crate) struct ReleasedGroups {
    pub(crate) entries: Vec<ReleasedGroup>,
    /// Groups summed into the [`ReleasedGroup::OTHER`] entry.
    pub(crate) omitted: usize,
}

impl ReleasedGroups {
    /// Folds `group` into the entry of its name (or the `OTHER` entry once
    /// [`ReleasedGroup::LIMIT`] names are kept).
    pub(crate) fn fold(&mut self, group: &ReleasedGroup) {
        if let Some(entry) = self
            .entries
            .iter_mut()
            .find(|entry| entry.name == group.name)
        {
            entry.absorb(group);
            return;
        }
        if self.entries.len() + 1 < ReleasedGroup::LIMIT {
            self.entries.push(group.clone());
            return;
        }
        self.omitted += group.groups;
        match self
            .entries
            .iter_mut()
            .find(|entry| entry.name == ReleasedGroup::OTHER)
        {
            Some(other) => other.absorb(group),
            None => {
                let mut other = ReleasedGroup {
                    name: ReleasedGroup::OTHER.to_string(),
                    ..ReleasedGroup::default()
                };
                other.absorb(group);
                self.entries.push(other);
            }
        }
    }

    /// Every entry summed (`groups` left at zero): what a released group's
    /// own released groups add to its entry in its parent (invariant 1).
    pub(crate) fn total(&self) -> ReleasedGroup {
        let mut total = ReleasedGroup::default();
        for entry in &self.entries {
            total.absorb(entry);
        }
        total.groups = 0;
        total
    }
}

/// `serde` skip test for counters omitted when zero.
#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_zero(value: &usize) -> bool {
    *value == 0
}

/// `serde` skip test for event counts omitted when zero.
#[allow(clippy::trivially_copy_pass_by_ref)]
pub(crate) fn events_are_zero(events: &TaskGroupEventCounts) -> bool {
    *events == TaskGroupEventCounts::default()
}
