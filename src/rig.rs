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
//! Every tool of a rig `ToolSet` at once: [`sized_set`]`(set)` puts a rig layer (`Intercept`,
//! named [`LAYER_NAME`]) around each registration, with the same attributes on the same span as
//! [`sized`]; the arguments are hashed from the JSON rig hands the tool. A call whose dispatch is
//! dropped before its answer is held until [`MAX_OPEN_CALLS`] newer ones are open, then ended.
//!
//! With a guard ([`Sized::guard`], [`sized_set_guarded`]), a result over the guard's limit is cut, spilled or refused
//! before rig hands it to the model: cut and spilled results become text (the guard's marked
//! text; structured output is cut as its rendered JSON), a refusal becomes a `RESULT_TOO_LARGE`
//! envelope handed to the model as the result, so the model learns why. A spill that fails is
//! handed over as a refusal, never whole.
//!
//! Arguments and result content are never recorded: sizes and the hash only. The cost per call is
//! one pass to measure the result (a text result is measured in place; other outputs are
//! rendered as rig renders them for the model) and one arguments hash, canonicalized straight
//! from the model's JSON text; nothing here blocks or panics.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use rig_agent::tool::{RegisteredTool, ToolSet};
use rig_core::effect::{EffectId, EffectKind, Outcome};
use rig_core::error::ErrorReport;
use rig_core::serve::{Decision, Intercept, Verdict};
use rig_core::tool::{IntoToolOutput, Tool, ToolContext, ToolErrorKind, ToolExecutionError};
use rig_core::tool::{ToolOutput, ToolResult};
use serde_json::value::RawValue;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::guard::ceiling::{CeilingGuard, GuardError, Guarded};
use crate::guard::Envelope;
use crate::instrument::MAX_ERROR_MESSAGE_BYTES;
use crate::semconv::*;
pub use crate::wrapped::Sized;

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

impl<T: Tool> Tool for Sized<T> {
    const NAME: &'static str = T::NAME;
    // The arguments as the model's JSON text, hashed from the text, then read as the tool's own
    // (an error of the same kind rig gives when they do not fit).
    type Args = Box<RawValue>;
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
        args: Box<RawValue>,
    ) -> Result<ToolOutput, ToolExecutionError> {
        let call = Call::start(T::NAME, args.get());
        let started = Instant::now();
        let typed: T::Args = match serde_json::from_str(args.get()) {
            Ok(typed) => typed,
            Err(error) => {
                let error = ToolExecutionError::new(ToolErrorKind::InvalidArgs, error.to_string());
                call.fail(&error, started);
                return Err(error);
            }
        };
        let done = match &call.own {
            Some(own) => own.scoped(self.inner.call(context, typed)).await,
            None => self.inner.call(context, typed).await,
        };
        let output = done
            .map_err(|e| self.inner.map_error(e))
            .and_then(IntoToolOutput::into_tool_output);
        match output {
            Ok(output) => Ok(call
                .finish(T::NAME, &output, self.guard.as_ref(), started)
                .unwrap_or(output)),
            Err(error) => {
                call.fail(&error, started);
                Err(error)
            }
        }
    }
}

/// Every tool of `set` measured, as [`sized`] measures one: the set to register in place of
/// `set` (`handle.add_tools(toolsize::rig::sized_set(tools))` on the agent's
/// `ToolServerHandle`). Each registration keeps its name, description, parameters, key and
/// exposure (always exposed, or retrieval-only); a liveness probe (rig's MCP-managed tools) is
/// not carried over.
pub fn sized_set(set: ToolSet) -> ToolSet {
    wrap_set(&set, None)
}

/// [`sized_set`], with every result held to `guard`'s limit and policy before the model is
/// handed it.
pub fn sized_set_guarded(set: ToolSet, guard: CeilingGuard) -> ToolSet {
    wrap_set(&set, Some(guard))
}

/// The name of toolsize's layer in rig's handler descriptors (and so in rig's recordings).
pub const LAYER_NAME: &str = "toolsize";

/// Calls one tool of a [`sized_set`] holds open at once: a call whose answer never comes (its
/// dispatch dropped) stays open until this many newer ones are, then ends cancelled.
pub const MAX_OPEN_CALLS: usize = 1024;

fn wrap_set(set: &ToolSet, guard: Option<CeilingGuard>) -> ToolSet {
    let exposed: HashSet<&str> = set.always_exposed_names().collect();
    let mut always = ToolSet::default();
    let mut retrieved = ToolSet::default();
    for (name, tool) in set.iter() {
        let layer = Sizing {
            tool: name.to_owned(),
            guard: guard.clone(),
            open: Mutex::default(),
        };
        // A registration's handler always serves the tool family: the fallback keeps the tool
        // as it was rather than lose it.
        let sized = RegisteredTool::from_handler(tool.handler().clone().layered(layer))
            .map_or_else(|_| tool.clone(), |r| r.with_key(tool.key().clone()));
        if exposed.contains(name) {
            always.add_registered_tool(sized);
        } else {
            retrieved.add_registered_tool(sized);
        }
    }
    always.add_retrievable_tools(retrieved);
    always
}

/// rig's layer around one tool of a [`sized_set`]: the call starts before the handler and is
/// measured (and guarded) on its answer.
struct Sizing {
    tool: String,
    guard: Option<CeilingGuard>,
    /// Calls started and not yet answered, by rig's effect id (ids only grow: the first is the
    /// oldest).
    open: Mutex<BTreeMap<EffectId, (Call, Instant)>>,
}

impl Sizing {
    fn open(&self) -> std::sync::MutexGuard<'_, BTreeMap<EffectId, (Call, Instant)>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Intercept for Sizing {
    fn name(&self) -> String {
        LAYER_NAME.to_owned()
    }

    async fn before(&self, id: EffectId, kind: &EffectKind) -> Decision {
        if let EffectKind::ToolCall { args, .. } = kind {
            let call = Call::start(&self.tool, args);
            let mut open = self.open();
            if open.len() >= MAX_OPEN_CALLS {
                open.pop_first();
            }
            open.insert(id, (call, Instant::now()));
        }
        Decision::Proceed
    }

    async fn after(
        &self,
        id: EffectId,
        _: &EffectKind,
        outcome: &Result<Outcome, ErrorReport>,
    ) -> Verdict {
        let Some((call, started)) = self.open().remove(&id) else {
            return Verdict::Keep;
        };
        let result = match outcome {
            Ok(Outcome::ToolResult { result }) => result,
            Ok(_) => return Verdict::Keep,
            Err(report) => {
                call.fail(&ToolExecutionError::from(report.clone()), started);
                return Verdict::Keep;
            }
        };
        if let Some(error) = result.error() {
            call.fail(error, started);
            return Verdict::Keep;
        }
        // Denied and skipped calls are neither sized nor successes: rig's span carries its
        // outcome; toolsize's own span ends cancelled as the call is dropped.
        if !result.is_success() {
            return Verdict::Keep;
        }
        match call.finish(&self.tool, result.output(), self.guard.as_ref(), started) {
            Some(handed) => Verdict::Replace(Ok(Outcome::ToolResult {
                result: ToolResult::success(handed),
            })),
            None => Verdict::Keep,
        }
    }
}

/// Where a call's attributes go: rig's own span, or toolsize's.
struct Call {
    /// rig's span, when the call runs inside one.
    rig: Option<tracing::Span>,
    /// toolsize's span, otherwise.
    own: Option<crate::ToolCall>,
}

impl Call {
    /// `args`: the call's arguments as the model sent them (JSON text; not JSON: the hash is left
    /// out).
    fn start(tool: &str, args: &str) -> Self {
        let hash = crate::args_hash::span_args_hash_json(args).ok();
        let current = tracing::Span::current();
        if !current.metadata().is_some_and(is_rig_tool_span) {
            let builder = crate::tool_call(tool);
            let builder = match hash {
                Some(hash) => builder.args_hash(hash),
                None => builder,
            };
            return Call {
                rig: None,
                own: Some(builder.start()),
            };
        }
        current.set_attribute(TOOL_NAME, tool.to_owned());
        if let Some(hash) = hash {
            current.set_attribute(TOOL_ARGS_HASH, hash);
        }
        Call {
            rig: Some(current),
            own: None,
        }
    }

    /// Measures the output, guards it, records the size and latency; returns what the model is
    /// handed in its place when the guard changed it.
    fn finish(
        mut self,
        tool: &str,
        output: &ToolOutput,
        guard: Option<&CeilingGuard>,
        started: Instant,
    ) -> Option<ToolOutput> {
        // A text output is its own rendering: borrowed, not copied.
        let text = output
            .as_text()
            .map_or_else(|| Cow::Owned(output.render()), Cow::Borrowed);
        let original = text.len() as u64;
        let guarded = guard
            .filter(|g| original > g.limit().bytes)
            .map(|g| g.text(tool, "result", &text));
        let (replaced, handed) = match guarded {
            None => (None, text),
            Some(Ok(Guarded { output: cut, .. })) => {
                (Some(ToolOutput::text(cut.clone())), Cow::Owned(cut))
            }
            Some(Err(error)) => {
                let refusal = refusal(&error);
                (Some(ToolOutput::text(refusal.clone())), Cow::Owned(refusal))
            }
        };
        let truncated = guarded_cut(original, handed.len() as u64, guard);
        if let Some(own) = self.own.take() {
            if truncated {
                own.finish_truncated(handed.as_bytes(), original);
            } else {
                own.finish(handed.as_bytes(), false);
            }
            return replaced;
        }
        if let Some(span) = &self.rig {
            span.set_attribute(TOOL_LATENCY_MS, latency_ms(started));
            span.set_attribute(TOOL_RESULT_BYTES, int(handed.len() as u64));
            span.set_attribute(TOOL_RESULT_TRUNCATED, truncated);
            if truncated {
                span.set_attribute(TOOL_RESULT_ORIGINAL_BYTES, int(original));
            }
        }
        replaced
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
    use crate::export::testing::{attr, captured};
    use rig_core::tool::PortableTool;

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

    fn call(args: serde_json::Value) -> Result<ToolOutput, ToolExecutionError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let args = serde_json::value::to_raw_value(&args).unwrap();
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

    /// A set sized in one line: every tool of it writes to rig's span, failures typed, the
    /// exposure of each registration kept.
    #[test]
    fn a_sized_set_sizes_every_tool_inside_rig_span() {
        let mut set = ToolSet::default();
        set.add_tool(Echo);
        let mut retrievable = ToolSet::default();
        retrievable.add_tool(Other);
        set.add_retrievable_tools(retrievable);
        let set = sized_set(set);
        assert_eq!(set.always_exposed_names().collect::<Vec<_>>(), ["echo"]);
        assert_eq!(set.names().collect::<Vec<_>>(), ["echo", "other"]);
        let run = |args: &str| {
            let tool = set.get("echo").unwrap().clone();
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            let args = args.to_owned();
            captured(|| {
                let span = rig_span();
                let _in = span.enter();
                let result = rt.block_on(tool.execute(args, &mut ToolContext::default()));
                assert_eq!(result.is_success(), !result.is_error());
            })
        };
        let ok = run(r#"{"q":2}"#);
        assert_eq!(ok.len(), 1, "one span per call");
        assert_eq!(attr(&ok[0], TOOL_RESULT_BYTES), Some(1000i64.into()));
        assert_eq!(
            attr(&ok[0], TOOL_ARGS_HASH).unwrap().to_string(),
            crate::args_hash(&serde_json::json!({"q": 2})).unwrap()
        );
        let failed = run(r#"{"fail":true}"#);
        assert_eq!(attr(&failed[0], TOOL_RESULT_BYTES), None);
        assert_eq!(attr(&failed[0], ERROR_TYPE), Some("other".into()));
    }

    /// A guarded set cuts what the model is handed, and says so on the span.
    #[test]
    fn a_guarded_set_hands_over_the_cut_result() {
        let mut set = ToolSet::default();
        set.add_tool(Echo);
        let guard = CeilingGuard::builder()
            .max_output(500)
            .policy(crate::guard::Policy::Truncate)
            .build()
            .unwrap();
        let tool = sized_set_guarded(set, guard).get("echo").unwrap().clone();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let mut handed = String::new();
        let spans = captured(|| {
            let result = rt.block_on(tool.execute("{}".into(), &mut ToolContext::default()));
            handed = result.output().render();
        });
        assert!(handed.len() <= 500, "{} bytes handed", handed.len());
        assert_eq!(
            attr(&spans[0], TOOL_RESULT_BYTES),
            Some((handed.len() as i64).into())
        );
        assert_eq!(attr(&spans[0], TOOL_RESULT_TRUNCATED), Some(true.into()));
        assert_eq!(
            attr(&spans[0], TOOL_RESULT_ORIGINAL_BYTES),
            Some(1000i64.into())
        );
    }

    struct Other;
    impl PortableTool for Other {
        const NAME: &'static str = "other";
        type Args = serde_json::Value;
        type Output = String;
        type Error = std::io::Error;
        fn description(&self) -> String {
            "Other.".into()
        }
        fn parameters(&self) -> serde_json::Value {
            serde_json::json!({"type": "object"})
        }
        async fn call(&self, _: serde_json::Value) -> Result<String, std::io::Error> {
            Ok(String::new())
        }
    }
}
