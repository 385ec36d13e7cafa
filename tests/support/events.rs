//! A `tracing` layer that records events, for tests that check what the
//! runtime logs. Installed once per test binary as the global subscriber.
#![allow(dead_code, unreachable_pub)]

use std::fmt::Debug;
use std::sync::{Arc, Mutex, OnceLock};

use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

/// One recorded event: its message and its other fields, as text.
#[derive(Debug, Clone, Default)]
pub struct Event {
    pub message: String,
    pub fields: Vec<(String, String)>,
}

impl Event {
    /// The text of field `name`, if the event has it.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(field, _)| field == name)
            .map(|(_, value)| value.as_str())
    }
}

impl Visit for Event {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.record_text(field, format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.record_text(field, value.to_owned());
    }
}

impl Event {
    fn record_text(&mut self, field: &Field, value: String) {
        if field.name() == "message" {
            self.message = value;
        } else {
            self.fields.push((field.name().to_owned(), value));
        }
    }
}

#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Event>>>);

impl<S: tracing::Subscriber> Layer<S> for Recorder {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut recorded = Event::default();
        event.record(&mut recorded);
        self.0.lock().expect("unpoisoned").push(recorded);
    }
}

/// The events recorded in this process so far (the recorder is installed
/// as the global subscriber by the first call).
pub fn recorded() -> Vec<Event> {
    static RECORDER: OnceLock<Recorder> = OnceLock::new();
    let recorder = RECORDER.get_or_init(|| {
        let recorder = Recorder::default();
        let subscriber = tracing_subscriber::registry().with(recorder.clone());
        tracing::subscriber::set_global_default(subscriber).expect("first global subscriber");
        recorder
    });
    recorder.0.lock().expect("unpoisoned").clone()
}
