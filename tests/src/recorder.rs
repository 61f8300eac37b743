//! A `tracing` subscriber of the tests' own: records every event and span, with its level,
//! name and fields (a span's later fields too), so a test can check what the crate logs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// One event or span: its level, name (a span's) and every field, written out.
#[derive(Debug, Clone)]
pub struct Logged {
    /// Its level.
    pub level: Level,
    /// A span's name; `None` for an event.
    pub span: Option<String>,
    /// Every field, written with `Debug`.
    pub fields: Vec<(String, String)>,
}

impl Logged {
    /// The fields, as `name=value` pairs.
    pub fn text(&self) -> String {
        self.fields
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Records everything, spans' later fields included.
#[derive(Clone, Default)]
pub struct Recorder {
    logged: Arc<Mutex<Vec<Logged>>>,
    next: Arc<AtomicU64>,
}

struct Fields<'a>(&'a mut Vec<(String, String)>);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push((field.name().to_owned(), format!("{value:?}")));
    }
}

impl Subscriber for Recorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut fields = Vec::new();
        span.record(&mut Fields(&mut fields));
        let mut logged = self.logged.lock().unwrap();
        logged.push(Logged {
            level: *span.metadata().level(),
            span: Some(span.metadata().name().to_owned()),
            fields,
        });
        // The span's id is its place in the record, so later fields join it.
        Id::from_u64(logged.len() as u64)
    }
    fn record(&self, id: &Id, values: &Record<'_>) {
        let mut logged = self.logged.lock().unwrap();
        if let Some(span) = logged.get_mut(id.into_u64() as usize - 1) {
            values.record(&mut Fields(&mut span.fields));
        }
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = Vec::new();
        event.record(&mut Fields(&mut fields));
        self.logged.lock().unwrap().push(Logged {
            level: *event.metadata().level(),
            span: None,
            fields,
        });
        self.next.fetch_add(1, Ordering::Relaxed);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

impl Recorder {
    /// What was recorded since the last call.
    pub fn take(&self) -> Vec<Logged> {
        std::mem::take(&mut *self.logged.lock().unwrap())
    }
}

/// Makes `subscriber` the current thread's until the guard drops — without the race of
/// `tracing::subscriber::set_default` alone.
///
/// `tracing` caches, per call site, whether any subscriber wants it. A test on another
/// thread (without a subscriber) that reaches a call site first can cache "nobody" while
/// this thread installs its own, and this thread's recorder then misses that call site
/// (seen once in CI: a commit's `datastore` span not recorded). A process-wide subscriber
/// that wants every call site and records nothing closes that window: every call site is
/// cached "ask each time", and each thread's own subscriber is asked.
pub fn scoped(
    subscriber: impl Subscriber + Send + Sync + 'static,
) -> tracing::subscriber::DefaultGuard {
    static INTERESTED: std::sync::Once = std::sync::Once::new();
    INTERESTED.call_once(|| {
        // Another global subscriber already set (by the test binary) serves as well.
        let _ = tracing::subscriber::set_global_default(WantsEverything);
    });
    let guard = tracing::subscriber::set_default(subscriber);
    tracing::callsite::rebuild_interest_cache();
    guard
}

/// Wants every call site, enables nothing: the process-wide subscriber of [`scoped`].
struct WantsEverything;

impl Subscriber for WantsEverything {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> tracing::subscriber::Interest {
        tracing::subscriber::Interest::sometimes()
    }
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        false
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}
