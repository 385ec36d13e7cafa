//! A tracked task runs inside a `tracing` span naming it, its kind, its
//! group path and the line that spawned it (`task_group/submission.rs`,
//! invariant 7), read here by a subscriber as tokio-console or a log
//! pipeline would. Under `--cfg tokio_unstable` with the `tokio-console`
//! feature, Tokio's own spawn span carries the task's name and the caller's
//! line too:
//!
//! ```text
//! RUSTFLAGS="--cfg tokio_unstable" CARGO_TARGET_DIR=target/unstable \
//!     cargo test --features tokio-console --test task_spans
//! ```

use std::sync::{Arc, Mutex};

use rocketmq_runtime::{RuntimeContext, TaskKind};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::Subscriber;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

/// One span's fields: (name, value as `Debug`).
type SpanFields = Vec<(String, String)>;

/// Every `task` span's fields.
#[derive(Clone, Default)]
struct Spans(Arc<Mutex<Vec<SpanFields>>>);

struct Fields(SpanFields);

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push((field.name().to_owned(), value.to_owned()));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push((field.name().to_owned(), format!("{value:?}")));
    }
}

impl<S: Subscriber> Layer<S> for Spans {
    fn on_new_span(&self, attrs: &Attributes<'_>, _id: &Id, _ctx: Context<'_, S>) {
        if matches!(attrs.metadata().name(), "task" | "runtime.spawn") {
            let mut fields = Fields(vec![(
                "span".to_owned(),
                attrs.metadata().name().to_owned(),
            )]);
            attrs.record(&mut fields);
            self.0.lock().expect("unpoisoned").push(fields.0);
        }
    }
}

/// Spawns an empty `task_name` into a `broker` group under a subscriber
/// listening at `TRACE`; returns every `task` and `runtime.spawn` span
/// and the lines between which the spawn call stands.
fn spans_of_a_spawn(task_name: &'static str) -> (Vec<SpanFields>, std::ops::RangeInclusive<u32>) {
    let spans = Spans::default();
    let subscriber = tracing_subscriber::registry().with(
        spans
            .clone()
            .with_filter(tracing_subscriber::filter::LevelFilter::TRACE),
    );
    let lines = tracing::subscriber::with_default(subscriber, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let harness = RuntimeContext::try_from_current("spans").expect("tokio");
            let broker = harness.service_context("broker");
            let before = line!();
            let id = broker
                .task_group()
                .spawn(task_name, TaskKind::Worker, async {});
            let after = line!();
            assert!(id.is_ok());
            let report = harness
                .shutdown_tasks(std::time::Duration::from_secs(5))
                .await;
            assert!(report.is_healthy());
            before..=after
        })
    });
    let spans = spans.0.lock().expect("unpoisoned").clone();
    (spans, lines)
}

/// The span named `span` of the task `task_name`, as (field, value) pairs.
fn span_of<'a>(spans: &'a [SpanFields], span: &str, task_name: &str) -> &'a SpanFields {
    spans
        .iter()
        .find(|fields| {
            fields.iter().any(|(k, v)| k == "span" && v == span)
                && fields
                    .iter()
                    .any(|(k, v)| k == "task.name" && v == task_name)
        })
        .unwrap_or_else(|| panic!("no {span} span for {task_name}: {spans:?}"))
}

fn field(fields: &SpanFields, name: &str) -> String {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
        .unwrap_or_default()
}

#[test]
fn a_task_span_names_the_task_its_group_and_the_callers_line() {
    let (spans, lines) = spans_of_a_spawn("fetch-offsets");
    let task = span_of(&spans, "task", "fetch-offsets");
    assert_eq!(field(task, "task.kind"), "Worker");
    assert!(field(task, "task.group").ends_with("broker"), "{task:?}");
    let location = field(task, "task.location");
    let spawned_at: u32 = location
        .strip_prefix(&format!("{}:", file!()))
        .and_then(|rest| rest.split(':').next())
        .and_then(|line| line.parse().ok())
        .unwrap_or_else(|| panic!("not this file: {location}"));
    assert!(
        lines.contains(&spawned_at),
        "the spawn's caller, not the crate's own file: {location}"
    );
}

/// Tokio's own spawn span (what tokio-console reads) names the task with
/// its `TaskName` and records the caller's file and line.
#[cfg(all(tokio_unstable, feature = "tokio-console"))]
#[test]
fn tokio_names_the_task_and_records_the_callers_line() {
    let (spans, lines) = spans_of_a_spawn("console-task");
    let spawn = span_of(&spans, "runtime.spawn", "console-task");
    assert!(
        field(spawn, "loc.file").ends_with("task_spans.rs"),
        "{spawn:?}"
    );
    let line: u32 = field(spawn, "loc.line").parse().expect("a line");
    assert!(lines.contains(&line), "{spawn:?}");
}
