//! A human view of a shutdown report: one line per group, indented by
//! depth, with only its non-zero counters; groups with unhealthy evidence
//! of their own are marked, and the tasks their deadline aborted are named
//! below them.
//!
//! The tree is walked with an explicit stack, so a deep report renders on a
//! small thread stack.

use std::fmt;

use super::{ReleasedGroup, ShutdownReport, SupervisedServiceReport, TaskFailure, TaskFailureKind};

/// The [`Display`](fmt::Display) wrapper of
/// [`ShutdownReport::display`]: renders the report as
/// [`ShutdownReport::summary`] describes.
#[derive(Debug, Clone, Copy)]
pub struct ShutdownReportDisplay<'a> {
    report: &'a ShutdownReport,
}

impl ShutdownReport {
    /// A compact, human-readable rendering of the report tree, for a
    /// terminal or a log line:
    ///
    /// ```text
    /// rocketmq-broker 1203 ms, reason signal: cancelled=2 [unhealthy]
    ///   broker: cancelled=3 timed_out=1 [unhealthy]
    ///     timed out: request-loop (service, 1201 ms)
    ///   metadata: completed=1
    /// ```
    ///
    /// One line per group (two spaces per level, up to 16 levels; deeper lines
    /// start with `(depth N)`), with the counters that
    /// are not zero (`completed`, `cancelled`, `aborted`, `failed`,
    /// `panicked`, `timed_out`, `leaked`, `blocking_still_running`); a group
    /// whose own `leaked`, `failed`, `panicked`, `timed_out` or
    /// `blocking_still_running` is not zero is marked `[unhealthy]`, and the
    /// tasks its deadline aborted follow it by name (at most the listed
    /// ones, then how many more), and then its annotations (`note: ...`).
    /// The root line also shows the elapsed time and the reason, when set. The JSON form is [`to_json`](Self::to_json).
    pub fn summary(&self) -> String {
        self.display().to_string()
    }

    /// [`summary`](Self::summary) as a [`Display`](fmt::Display) value, for
    /// `format!` and loggers without an intermediate string.
    pub fn display(&self) -> ShutdownReportDisplay<'_> {
        ShutdownReportDisplay { report: self }
    }

    /// Whether this node's own evidence (not its children's) is unhealthy.
    fn locally_unhealthy(&self) -> bool {
        self.leaked > 0
            || self.failed > 0
            || self.panicked > 0
            || self.timed_out > 0
            || self.blocking_still_running > 0
    }
}

impl fmt::Display for ShutdownReportDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut stack = vec![(self.report, 0usize)];
        let mut first = true;
        while let Some((node, depth)) = stack.pop() {
            if !first {
                writeln!(f)?;
            }
            first = false;
            write_node(f, node, depth, depth == 0)?;
            // Children in order: pushed last first.
            stack.extend(node.children.iter().rev().map(|child| (child, depth + 1)));
        }
        Ok(())
    }
}

/// Levels indented by two spaces each; deeper groups keep that indent and
/// name their depth, so a deep chain renders in linear size.
const MAX_INDENT_LEVELS: usize = 16;

fn write_node(
    f: &mut fmt::Formatter<'_>,
    node: &ShutdownReport,
    depth: usize,
    root: bool,
) -> fmt::Result {
    let indent = "  ".repeat(depth.min(MAX_INDENT_LEVELS));
    write!(f, "{indent}")?;
    if depth > MAX_INDENT_LEVELS {
        write!(f, "(depth {depth}) ")?;
    }
    write!(f, "{}", node.name)?;
    if root {
        write!(f, " {} ms", node.elapsed.as_millis())?;
        if let Some(reason) = &node.reason {
            write!(f, ", reason {reason}")?;
        }
    }
    write!(f, ":")?;
    let counters = [
        ("completed", node.completed),
        ("cancelled", node.cancelled),
        ("aborted", node.aborted),
        ("failed", node.failed),
        ("panicked", node.panicked),
        ("timed_out", node.timed_out),
        ("leaked", node.leaked),
        ("blocking_still_running", node.blocking_still_running),
    ];
    write_counters(f, &counters)?;
    if node.locally_unhealthy() {
        write!(f, " [unhealthy]")?;
    }
    for task in &node.timed_out_tasks {
        write!(
            f,
            "\n{indent}    timed out: {} ({}, {} ms)",
            task.name,
            task.kind.as_str(),
            task.elapsed.as_millis()
        )?;
    }
    if node.timed_out_tasks_omitted > 0 {
        write!(
            f,
            "\n{indent}    and {} more timed out",
            node.timed_out_tasks_omitted
        )?;
    }
    write_failures(
        f,
        &format!("{indent}    "),
        &node.failures,
        node.failures_omitted,
    )?;
    if node.events.poisoned_groups > 0 {
        write!(f, "\n{indent}    poisoned by a panicking task")?;
    }
    for released in &node.released {
        write_released(f, &indent, released)?;
    }
    for service in &node.services {
        write_service(f, &indent, service)?;
    }
    if node.services_omitted > 0 {
        write!(
            f,
            "\n{indent}    and {} more supervised services",
            node.services_omitted
        )?;
    }
    for annotation in &node.annotations {
        write!(f, "\n{indent}    note: {}", annotation.message)?;
    }
    Ok(())
}

/// `service: name (group): runs N, restarts N, last failure kind ("message"),
/// gave up | stalled`.
fn write_service(
    f: &mut fmt::Formatter<'_>,
    indent: &str,
    service: &SupervisedServiceReport,
) -> fmt::Result {
    write!(
        f,
        "\n{indent}    service: {} ({}): runs {}, restarts {}",
        service.name, service.group, service.runs, service.restarts
    )?;
    if let Some(kind) = service.last_failure {
        write!(f, ", last failure {kind}")?;
        if let Some(message) = &service.last_message {
            write!(f, " (\"{message}\")")?;
        }
    }
    if service.gave_up {
        write!(f, ", gave up [unhealthy]")?;
    }
    if service.stalled {
        write!(f, ", stalled")?;
    }
    Ok(())
}

/// ` name=value` for every counter above zero, or ` nothing to report`.
fn write_counters(f: &mut fmt::Formatter<'_>, counters: &[(&str, usize)]) -> fmt::Result {
    let mut any = false;
    for (name, value) in counters.iter().filter(|(_, value)| *value > 0) {
        write!(f, " {name}={value}")?;
        any = true;
    }
    if !any {
        write!(f, " nothing to report")?;
    }
    Ok(())
}

/// One line per named failure (`panicked: name (kind)`), then the count
/// of the unnamed ones, each line starting with `indent`.
fn write_failures(
    f: &mut fmt::Formatter<'_>,
    indent: &str,
    failures: &[TaskFailure],
    omitted: usize,
) -> fmt::Result {
    for failure in failures {
        let word = match failure.failure {
            TaskFailureKind::Panicked => "panicked",
            TaskFailureKind::Failed => "failed",
        };
        write!(
            f,
            "\n{indent}{word}: {} ({})",
            failure.name,
            failure.kind.as_str()
        )?;
    }
    if omitted > 0 {
        write!(f, "\n{indent}and {omitted} more failed")?;
    }
    Ok(())
}

/// `released: name (n groups): counters [unhealthy]`, then its named
/// failures.
fn write_released(
    f: &mut fmt::Formatter<'_>,
    indent: &str,
    released: &ReleasedGroup,
) -> fmt::Result {
    write!(f, "\n{indent}    released: {}", released.name)?;
    if released.groups != 1 {
        write!(f, " ({} groups)", released.groups)?;
    }
    write!(f, ":")?;
    let counters = [
        ("completed", released.completed),
        ("cancelled", released.cancelled),
        ("aborted", released.aborted),
        ("failed", released.failed),
        ("panicked", released.panicked),
        ("timed_out", released.timed_out),
    ];
    write_counters(f, &counters)?;
    if !released.is_healthy() {
        write!(f, " [unhealthy]")?;
    }
    write_failures(
        f,
        &format!("{indent}      "),
        &released.failures,
        released.failures_omitted,
    )
}
