//! One line instruments a [rig](https://docs.rs/rig-agent) tool: [`sized`]`(tool)` in place of
//! `tool` when it is added to an agent (`.tool(toolsize::rig::sized(MyTool))`), for any type
//! implementing rig's `Tool` (and so `PortableTool`).
//!
//! rig opens its own `execute_tool` span per call (rig-agent 0.44: `gen_ai.tool.name`,
//! `gen_ai.tool.call.id`, `gen_ai.tool.call.outcome`, `gen_ai.tool.error.type`; the result only
//! with `.record_content_telemetry(true)`). Inside that span the wrapper adds toolsize's
//! attributes to it, through the OpenTelemetry layer of `tracing-opentelemetry` (the one
//! [`crate::export`] sets up), rather than opening a second span, so the daemon counts each call
//! once: `tool.result.bytes` measured in process (the bytes of the result as rig renders it for
//! the model, the text of `gen_ai.tool.call.result`; no content recording needed),
//! `tool.result.truncated`, `tool.args_hash`, `tool.name`, and `tool.latency_ms`: the tool's own
//! work, where rig's span also holds the wait for the calls of the same turn run before it. A
//! failure records `tool.error` (its message, at most
//! [`MAX_ERROR_MESSAGE_BYTES`](crate::instrument::MAX_ERROR_MESSAGE_BYTES)) and `error.type`
//! (rig's error kind, e.g. `invalid_args`), and no size. Outside a rig tool span (the tool called
//! directly, or rig's span not exported through that layer), the call gets toolsize's own span
//! ([`crate::tool_call`]) instead.
//!
//! With a guard ([`Sized::guard`]), a result over the guard's limit is cut, spilled or refused
//! before rig hands it to the model: cut and spilled results become text (the guard's marked
//! text; structured output is cut as its rendered JSON), a refusal becomes a `RESULT_TOO_LARGE`
//! envelope handed to the model as the result, so the model learns why. A spill that fails is
//! handed over as a refusal, never whole.
//!
//! Arguments and result content are never recorded: sizes and the hash only. The cost per call is
//! the render rig makes anyway, one pass to measure it, and one arguments hash; nothing here
//! blocks or panics.

use std::time::Instant;

use rig_core::tool::ToolOutput;
use rig_core::tool::{IntoToolOutput, Tool, ToolContext, ToolErrorKind, ToolExecutionError};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::guard::ceiling::{CeilingGuard, GuardError, Guarded};
use crate::guard::Envelope;
use crate::instrument::MAX_ERROR_MESSAGE_BYTES;
use crate::semconv::*;

/// The field rig's own tool span declares, by which the wrapper knows it runs inside one.
pub const RIG_OUTCOME: &str = "gen_ai.tool.call.outcome";

/// Whether `meta` is rig's own tool span (named `execute_tool`, with rig's outcome field).
pub fn is_rig_tool_span(meta: &tracing::Metadata<'_>) -> bool {
    meta.is_span()
        && meta.name() == OPERATION_EXECUTE_TOOL
        && meta.fields().field(RIG_OUTCOME).is_some()
}

/// Wraps a rig tool so that every call of it is measured.
pub fn sized<T: Tool>(tool: T) -> Sized<T> {
    Sized {
        inner: tool,
        guard: None,
    }
}

/// A rig tool whose calls are measured (and guarded, with [`guard`](Self::guard)). Built by
/// [`sized`]; rig sees the same name, description and parameters.
#[derive(Debug, Clone)]
pub struct Sized<T> {
    inner: T,
    guard: Option<CeilingGuard>,
}

impl<T> Sized<T> {
    /// Holds every result to `guard`'s limit and policy before the model is handed it.
    pub fn guard(mut self, guard: CeilingGuard) -> Self {
        self.guard = Some(guard);
        self
    }

    /// The wrapped tool.
    pub fn inner(&self) -> &T {
        &self.inner
    }
}

impl<T: Tool> Tool for Sized<T> {
    const NAME: &'static str = T::NAME;
    // The arguments as JSON, hashed, then read as the tool's own (an error of the same kind rig
    // gives when they do not fit).
    type Args = serde_json::Value;
    type Output = ToolOutput;
    type Error = ToolExecutionError;

    fn description(&self) -> String {
        self.inner.description()
    }

    fn parameters(&self) -> serde_json::Value {
        self.inner.parameters()
    }

    fn map_error(&self, error: ToolExecutionError) -> ToolExecutionError {
        error
    }

    async fn call(
        &self,
        context: &mut ToolContext,
        args: serde_json::Value,
    ) -> Result<ToolOutput, ToolExecutionError> {
        let call = Call::start(T::NAME, &args);
        let started = Instant::now();
        let typed: T::Args = match serde_json::from_value(args) {
            Ok(typed) => typed,
            Err(error) => {
                let error = ToolExecutionError::new(ToolErrorKind::InvalidArgs, error.to_string());
                call.fail(&error, started);
                return Err(error);
            }
        };
        let done = match &call.own {
            Some(own) => {
                use tracing::Instrument as _;
                let span = own.span().clone();
                self.inner.call(context, typed).instrument(span).await
            }
            None => self.inner.call(context, typed).await,
        };
        let output = done
            .map_err(|e| self.inner.map_error(e))
            .and_then(IntoToolOutput::into_tool_output);
        match output {
            Ok(output) => Ok(call.finish(output, self.guard.as_ref(), started)),
            Err(error) => {
                call.fail(&error, started);
                Err(error)
            }
        }
    }
}

/// Where a call's attributes go: rig's own span, or toolsize's.
struct Call {
    /// rig's span, when the call runs inside one.
    rig: Option<tracing::Span>,
    /// toolsize's span, otherwise.
    own: Option<crate::ToolCall>,
    tool: &'static str,
}

impl Call {
    fn start(tool: &'static str, args: &serde_json::Value) -> Self {
        let current = tracing::Span::current();
        if !current.metadata().is_some_and(is_rig_tool_span) {
            return Call {
                rig: None,
                own: Some(crate::tool_call(tool).args(args).start()),
                tool,
            };
        }
        current.set_attribute(TOOL_NAME, tool);
        if let Ok(hash) = crate::args_hash::span_args_hash(args) {
            current.set_attribute(TOOL_ARGS_HASH, hash);
        }
        Call {
            rig: Some(current),
            own: None,
            tool,
        }
    }

    /// Measures the output, guards it, records the size and latency; returns what the model is
    /// handed.
    fn finish(
        mut self,
        output: ToolOutput,
        guard: Option<&CeilingGuard>,
        started: Instant,
    ) -> ToolOutput {
        let text = output.render();
        let original = text.len() as u64;
        let guarded = guard
            .filter(|g| original > g.limit().bytes)
            .map(|g| g.text(self.tool, "result", &text));
        let (output, handed) = match guarded {
            None => (output, text),
            Some(Ok(Guarded { output: cut, .. })) => (ToolOutput::text(cut.clone()), cut),
            Some(Err(error)) => {
                let refusal = refusal(&error);
                (ToolOutput::text(refusal.clone()), refusal)
            }
        };
        let truncated = guarded_cut(original, handed.len() as u64, guard);
        if let Some(own) = self.own.take() {
            if truncated {
                own.finish_truncated(&handed, original);
            } else {
                own.finish(&handed, false);
            }
            return output;
        }
        if let Some(span) = &self.rig {
            span.set_attribute(TOOL_LATENCY_MS, latency_ms(started));
            span.set_attribute(TOOL_RESULT_BYTES, int(handed.len() as u64));
            span.set_attribute(TOOL_RESULT_TRUNCATED, truncated);
            if truncated {
                span.set_attribute(TOOL_RESULT_ORIGINAL_BYTES, int(original));
            }
        }
        output
    }

    fn fail(mut self, error: &ToolExecutionError, started: Instant) {
        let kind = error.kind().as_str();
        if let Some(own) = self.own.take() {
            own.fail(error, kind);
            return;
        }
        if let Some(span) = &self.rig {
            span.set_attribute(TOOL_LATENCY_MS, latency_ms(started));
            span.set_attribute(TOOL_ERROR, bounded(&error.to_string()));
            span.set_attribute(ERROR_TYPE, kind);
        }
    }
}

/// Whether the guard changed what is handed over.
fn guarded_cut(original: u64, handed: u64, guard: Option<&CeilingGuard>) -> bool {
    guard.is_some_and(|g| original > g.limit().bytes) && handed != original
}

/// The envelope a refused result is replaced by.
fn refusal(error: &GuardError) -> String {
    Envelope::err(error.to_envelope_error()).to_json()
}

fn latency_ms(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1000.0
}

fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// `message` cut to [`MAX_ERROR_MESSAGE_BYTES`] on a character boundary, marked with `…`.
fn bounded(message: &str) -> String {
    if message.len() <= MAX_ERROR_MESSAGE_BYTES {
        return message.to_owned();
    }
    let mut end = MAX_ERROR_MESSAGE_BYTES - '…'.len_utf8();
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &message[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
    use rig_core::tool::PortableTool;
    use tracing_subscriber::layer::SubscriberExt;

    struct Echo;
    impl PortableTool for Echo {
        const NAME: &'static str = "echo";
        type Args = serde_json::Value;
        type Output = String;
        type Error = std::io::Error;
        fn description(&self) -> String {
            "Echoes.".into()
        }
        fn parameters(&self) -> serde_json::Value {
            serde_json::json!({"type": "object"})
        }
        async fn call(&self, args: serde_json::Value) -> Result<String, std::io::Error> {
            match args["fail"].as_bool() {
                Some(true) => Err(std::io::Error::other("no")),
                _ => Ok("x".repeat(1000)),
            }
        }
    }

    fn rig_span() -> tracing::Span {
        tracing::info_span!(
            "execute_tool",
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = "echo",
            gen_ai.tool.call.outcome = tracing::field::Empty
        )
    }

    /// Runs `f` with spans going to memory; returns the finished spans.
    fn captured(f: impl FnOnce()) -> Vec<SpanData> {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("t")));
        tracing::subscriber::with_default(subscriber, f);
        provider.force_flush().unwrap();
        exporter.get_finished_spans().unwrap()
    }

    fn attr(span: &SpanData, key: &str) -> Option<opentelemetry::Value> {
        span.attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| kv.value.clone())
    }

    fn call(args: serde_json::Value) -> Result<ToolOutput, ToolExecutionError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(sized(Echo).call(&mut ToolContext::default(), args))
    }

    #[test]
    fn rig_spans_are_told_from_toolsize_spans() {
        let _ = captured(|| {
            assert!(rig_span().metadata().is_some_and(is_rig_tool_span));
            let own = crate::tool_call("echo").start();
            assert!(!own.span().metadata().is_some_and(is_rig_tool_span));
            own.finish("", false);
        });
    }

    /// Inside rig's span the wrapper writes to it (one span per call), with the tool's own
    /// latency: rig's span also holds the wait before the tool ran.
    #[test]
    fn inside_rig_span_one_span_carries_the_size_and_the_tool_latency() {
        let spans = captured(|| {
            let span = rig_span();
            let _in = span.enter();
            std::thread::sleep(std::time::Duration::from_millis(30));
            call(serde_json::json!({"q": 1})).unwrap();
        });
        assert_eq!(spans.len(), 1, "one span per call");
        let s = &spans[0];
        assert_eq!(attr(s, TOOL_RESULT_BYTES), Some(1000i64.into()));
        assert_eq!(attr(s, TOOL_RESULT_TRUNCATED), Some(false.into()));
        assert_eq!(attr(s, TOOL_NAME), Some("echo".into()));
        let hash = attr(s, TOOL_ARGS_HASH).unwrap().to_string();
        assert_eq!(
            hash,
            crate::args_hash(&serde_json::json!({"q": 1})).unwrap()
        );
        let Some(opentelemetry::Value::F64(latency)) = attr(s, TOOL_LATENCY_MS) else {
            panic!("no latency")
        };
        let span_ms = s
            .end_time
            .duration_since(s.start_time)
            .unwrap()
            .as_secs_f64()
            * 1000.0;
        assert!(
            span_ms >= 30.0 && latency < 30.0,
            "{latency} ms of {span_ms} ms"
        );
    }

    #[test]
    fn a_failure_is_unsized_and_typed() {
        let spans = captured(|| {
            let span = rig_span();
            let _in = span.enter();
            call(serde_json::json!({"fail": true})).unwrap_err();
        });
        let s = &spans[0];
        assert_eq!(attr(s, TOOL_RESULT_BYTES), None);
        assert_eq!(attr(s, ERROR_TYPE), Some("other".into()));
        assert!(attr(s, TOOL_ERROR).is_some());
    }

    /// Outside rig's span the call gets toolsize's own span.
    #[test]
    fn outside_rig_span_toolsize_opens_its_own() {
        let spans = captured(|| {
            call(serde_json::json!({})).unwrap();
        });
        assert_eq!(spans.len(), 1);
        assert_eq!(spans[0].name, "execute_tool echo");
        assert_eq!(attr(&spans[0], TOOL_RESULT_BYTES), Some(1000i64.into()));
    }
}
