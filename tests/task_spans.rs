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

#[test]
fn a_task_span_names_the_task_its_group_and_the_callers_line() {
    let spans = Spans::default();
    let subscriber = tracing_subscriber::registry().with(
        spans
            .clone()
            .with_filter(tracing_subscriber::filter::LevelFilter::DEBUG),
    );
    tracing::subscriber::with_default(subscriber, || {
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
                .spawn("fetch-offsets", TaskKind::Worker, async {});
            let after = line!();
            assert!(id.is_ok());
            let report = harness
                .shutdown_tasks(std::time::Duration::from_secs(5))
                .await;
            assert!(report.is_healthy());
            let spans = spans.0.lock().expect("unpoisoned");
            let task = spans
                .iter()
                .find(|fields| {
                    fields
                        .iter()
                        .any(|(k, v)| k == "task.name" && v == "fetch-offsets")
                })
                .unwrap_or_else(|| panic!("no span for the task: {spans:?}"));
            let field = |name: &str| {
                task.iter()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default()
            };
            assert_eq!(field("task.kind"), "Worker");
            assert!(field("task.group").ends_with("broker"), "{task:?}");
            let location = field("task.location");
            let spawned_at: u32 = location
                .strip_prefix(&format!("{}:", file!()))
                .and_then(|rest| rest.split(':').next())
                .and_then(|line| line.parse().ok())
                .unwrap_or_else(|| panic!("not this file: {location}"));
            assert!(
                (before..=after).contains(&spawned_at),
                "the spawn's caller, not the crate's own file: {location}"
            );
        });
    });
}

/// Tokio's own spawn span (what tokio-console reads) names the task with
/// its `TaskName` and records the caller's file and line.
#[cfg(all(tokio_unstable, feature = "tokio-console"))]
#[test]
fn tokio_names_the_task_and_records_the_callers_line() {
    let spans = Spans::default();
    let subscriber = tracing_subscriber::registry().with(
        spans
            .clone()
            .with_filter(tracing_subscriber::filter::LevelFilter::TRACE),
    );
    tracing::subscriber::with_default(subscriber, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let harness = RuntimeContext::try_from_current("console").expect("tokio");
            let broker = harness.service_context("broker");
            let before = line!();
            let id = broker
                .task_group()
                .spawn("console-task", TaskKind::Worker, async {});
            let after = line!();
            assert!(id.is_ok());
            let report = harness
                .shutdown_tasks(std::time::Duration::from_secs(5))
                .await;
            assert!(report.is_healthy());
            let spans = spans.0.lock().expect("unpoisoned");
            let spawn = spans
                .iter()
                .find(|fields| {
                    fields
                        .iter()
                        .any(|(k, v)| k == "span" && v == "runtime.spawn")
                        && fields
                            .iter()
                            .any(|(k, v)| k == "task.name" && v == "console-task")
                })
                .unwrap_or_else(|| panic!("no Tokio spawn span named console-task: {spans:?}"));
            let field = |name: &str| {
                spawn
                    .iter()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default()
            };
            assert!(field("loc.file").ends_with("task_spans.rs"), "{spawn:?}");
            let line: u32 = field("loc.line").parse().expect("a line");
            assert!((before..=after).contains(&line), "{spawn:?}");
        });
    });
}
