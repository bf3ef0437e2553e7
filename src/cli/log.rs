//! The daemon's own log on standard error: plain text lines, or one JSON object per line
//! (`--log-format json`, `TOOLSIZE_LOG_FORMAT`, `log.format`) for a log pipeline.
//!
//! Which events are written is `RUST_LOG`'s choice (default `info`). A JSON line holds
//! `timestamp` (RFC 3339, UTC), `level`, `target`, `message` and every field of the event under
//! its own name; values are written as the event recorded them (numbers and booleans as JSON
//! numbers and booleans, the rest as strings). Writing is synchronous, on the thread that logs:
//! the daemon logs per start, per alert and per failure, never per span, so a slow standard error
//! slows those events only. A field that cannot be written is skipped, never a panic.

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

use crate::collector::config::LogFormat;

/// The level shown when `RUST_LOG` is unset or does not parse.
pub const DEFAULT_LEVEL: &str = "info";

/// Installs the daemon's logger on standard error in `format`, filtered by `RUST_LOG`. A logger
/// installed already (a test harness's) is kept.
pub fn init(format: LogFormat) {
    use tracing_subscriber::{fmt, prelude::*, EnvFilter};
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_LEVEL));
    let text = (format == LogFormat::Text)
        .then(|| fmt::layer().with_writer(std::io::stderr).with_ansi(false));
    let json = (format == LogFormat::Json).then(|| {
        fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .event_format(JsonLines)
    });
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(text)
        .with(json)
        .try_init();
}

/// One JSON object per event, on one line.
#[derive(Debug, Clone, Copy, Default)]
pub struct JsonLines;

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        writer.write_str(&json_line(event))?;
        writeln!(writer)
    }
}

/// The JSON object of `event`.
fn json_line(event: &Event<'_>) -> String {
    let mut timestamp = String::new();
    let _ = SystemTime.format_time(&mut Writer::new(&mut timestamp));
    let meta = event.metadata();
    let mut fields = Fields(Map::new());
    event.record(&mut fields);
    let mut object = Map::new();
    object.insert("timestamp".into(), Value::String(timestamp));
    object.insert("level".into(), Value::String(meta.level().to_string()));
    object.insert("target".into(), Value::String(meta.target().to_string()));
    // The message first among the fields; the event's own fields after, by name.
    if let Some(m) = fields.0.remove("message") {
        object.insert("message".into(), m);
    }
    for (k, v) in fields.0 {
        // A field named like one of ours keeps its value under a prefixed name.
        let k = match object.contains_key(&k) {
            true => format!("field.{k}"),
            false => k,
        };
        object.insert(k, v);
    }
    Value::Object(object).to_string()
}

/// An event's fields as JSON values.
struct Fields(Map<String, Value>);

impl Visit for Fields {
    fn record_f64(&mut self, field: &Field, value: f64) {
        let v = serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number);
        self.0.insert(field.name().into(), v);
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.0.insert(field.name().into(), value.to_string().into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(field.name().into(), format!("{value:?}").into());
    }
}

#[cfg(test)]
mod tests {
    use tracing_subscriber::prelude::*;

    use super::*;
    use crate::test_support::SharedBuffer as Buffer;

    #[test]
    fn each_event_is_one_json_object_with_its_fields() {
        let buf = Buffer::default();
        let writer = buf.clone();
        let subscriber = tracing_subscriber::registry().with(
            tracing_subscriber::fmt::layer()
                .with_writer(move || writer.clone())
                .event_format(JsonLines),
        );
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(
                series = 3u64,
                ratio = 0.5,
                ok = true,
                layer = "a\"b",
                "Two\nlines."
            );
            tracing::info!(level = "mine", "Clash.");
        });
        let text = buf.text();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2, "{text}");
        let v = &lines[0];
        assert_eq!(v["level"], "WARN");
        assert_eq!(v["message"], "Two\nlines.");
        assert_eq!(v["series"], 3);
        assert_eq!(v["ratio"], 0.5);
        assert_eq!(v["ok"], true);
        assert_eq!(v["layer"], "a\"b");
        assert!(v["timestamp"].as_str().unwrap().ends_with('Z'), "{v}");
        assert_eq!(lines[1]["level"], "INFO");
        assert_eq!(lines[1]["field.level"], "mine");
    }
}
