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
//! [`MAX_ERROR_MESSAGE_BYTES`](crate::instrument::MAX_ERROR_MESSAGE_BYTES); for arguments that
//! did not parse, only the kind of parse error and where, since serde's message quotes the
//! value) and `error.type` (rig's error kind, e.g. `invalid_args`), and no size. Outside a rig tool span (the tool called
//! directly, or rig's span not exported through that layer), the call gets toolsize's own span
//! ([`crate::tool_call`]) instead.
//!
//! Every tool of a rig `ToolSet` at once: [`sized_set`]`(set)` serves each registration through
//! a handler of its own around rig's (named [`LAYER_NAME`] among the descriptor's layers, as a
//! rig layer would be), with the same attributes on the same span as [`sized`]; the arguments
//! are hashed from the JSON rig hands the tool. A unary call lives in its handler's future, so a
//! dispatch dropped before its answer ends its call with it. A streamed dispatch (rig answers a
//! tool's with an error) goes through a rig layer (`Intercept`), which holds a call whose
//! dispatch is dropped until [`MAX_OPEN_CALLS`] newer ones are open, then ends it.
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
//! from the model's JSON text while rig deserializes the arguments ([`SizedArgs`]: the text
//! borrowed, not copied); the output is handed to rig as it is ([`SizedOutput`]), not copied.
//! The tool's arguments are read as rig reads them (`null` as `{}` when the tool's type does not
//! take `null`, an error of rig's own otherwise). Nothing here blocks or panics.

use std::borrow::Cow;
use std::collections::{HashSet, VecDeque};
use std::pin::pin;
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use rig_agent::tool::{RegisteredTool, ToolSet};
use rig_core::effect::{family, EffectId, EffectKind, HandlerDescriptor, Outcome};
use rig_core::error::ErrorReport;
use rig_core::serve::{Decision, Dispatch, ErasedHandler, Intercept, Reply, Serve, Verdict};
use rig_core::tool::{IntoToolOutput, Tool, ToolContext, ToolExecutionError};
use rig_core::tool::{ToolOutput, ToolResult};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
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
    type Args = SizedArgs<T::Args>;
    type Output = SizedOutput;
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
        args: SizedArgs<T::Args>,
    ) -> Result<SizedOutput, ToolExecutionError> {
        let call = Call::start(T::NAME, args.hash);
        let typed = match args.args {
            Ok(typed) => typed,
            Err(error) => {
                call.fail(&error);
                return Err(error);
            }
        };
        let done = match &call.own {
            Some(own) => own.scoped(pin!(self.inner.call(context, typed))).await,
            None => self.inner.call(context, typed).await,
        };
        let output = done
            .map_err(|e| self.inner.map_error(e))
            .and_then(IntoToolOutput::into_tool_output);
        match output {
            Ok(output) => Ok(SizedOutput(
                call.finish(T::NAME, &output, self.guard.as_ref())
                    .unwrap_or(output),
            )),
            Err(error) => {
                call.fail(&error);
                Err(error)
            }
        }
    }
}

/// The arguments of a [`sized`] tool: the tool's own, read from the model's JSON text as rig
/// reads them, and that text's `tool.args_hash`, both taken while rig deserializes the
/// arguments (from the text it holds, which is borrowed, not copied).
///
/// Arguments that do not fit the tool's type are kept as the error rig would give (kind
/// `invalid_args`), for the call to report on its span; `null` is read as `{}` when the tool's
/// type does not take it, as rig's own dispatch does (the hash stays that of `null`, the
/// arguments the model sent). Only a JSON text can be read this way (rig's dispatch reads its
/// arguments with `serde_json::from_str`); other sources are refused.
pub struct SizedArgs<A> {
    hash: Option<String>,
    args: Result<A, ToolExecutionError>,
}

impl<A> SizedArgs<A> {
    /// The tool's arguments, or why they do not fit its type.
    pub fn into_inner(self) -> Result<A, ToolExecutionError> {
        self.args
    }
}

/// The hash, and whether the arguments fit (their kind of error if not): never their content.
impl<A> std::fmt::Debug for SizedArgs<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let args = self
            .args
            .as_ref()
            .map(|_| "…")
            .map_err(|e| e.kind().as_str());
        f.debug_struct("SizedArgs")
            .field("hash", &self.hash)
            .field("args", &args)
            .finish()
    }
}

impl<'de, A: DeserializeOwned> Deserialize<'de> for SizedArgs<A> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <&RawValue>::deserialize(deserializer)?.get();
        Ok(SizedArgs {
            hash: crate::args_hash::span_args_hash_json(text).ok(),
            args: parse_args(text),
        })
    }
}

/// rig's own reading of a tool's arguments (rig-core 0.44, `parse_tool_args`): `null` falls
/// back to `{}`, an error is `invalid_args` with rig's message.
fn parse_args<A: DeserializeOwned>(text: &str) -> Result<A, ToolExecutionError> {
    match serde_json::from_str(text) {
        Ok(args) => Ok(args),
        Err(original) if text.trim() == "null" => serde_json::from_str("{}").map_err(|_| {
            ToolExecutionError::invalid_args(format!("failed to parse tool arguments: {original}"))
                .with_source(original)
        }),
        Err(error) => Err(ToolExecutionError::invalid_args(format!(
            "failed to parse tool arguments: {error}"
        ))
        .with_source(error)),
    }
}

/// What a [`sized`] tool hands rig: the tool's output as the model is handed it (the guard's,
/// when the guard changed it). rig takes it as it is; a `ToolOutput` returned in its place would
/// be copied whole by rig's conversion.
#[derive(Debug, Clone, PartialEq)]
pub struct SizedOutput(ToolOutput);

impl SizedOutput {
    /// The output as the model is handed it.
    pub fn into_inner(self) -> ToolOutput {
        self.0
    }
}

impl IntoToolOutput for SizedOutput {
    fn into_tool_output(self) -> Result<ToolOutput, ToolExecutionError> {
        Ok(self.0)
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

/// Streamed calls one tool of a [`sized_set`] holds open at once: a call whose answer never
/// comes (its dispatch dropped) stays open until this many newer ones are, then ends cancelled.
pub const MAX_OPEN_CALLS: usize = 1024;

/// Room for open calls made once per tool of a set, so that a call opened and answered
/// allocates nothing (a tree map allocated a node for each).
const OPEN_CALLS_ROOM: usize = 8;

fn wrap_set(set: &ToolSet, guard: Option<CeilingGuard>) -> ToolSet {
    let exposed: HashSet<&str> = set.always_exposed_names().collect();
    let mut always = ToolSet::default();
    let mut retrieved = ToolSet::default();
    for (name, tool) in set.iter() {
        let inner = tool.handler().clone();
        let streamed = inner.clone().layered(Sizing {
            tool: name.to_owned(),
            guard: guard.clone(),
            open: Mutex::new(VecDeque::with_capacity(OPEN_CALLS_ROOM)),
        });
        let handler = SizedHandler {
            inner,
            streamed,
            tool: name.to_owned(),
            guard: guard.clone(),
        };
        // A registration's handler always serves the tool family: the fallback keeps the tool
        // as it was rather than lose it.
        let sized = RegisteredTool::from_handler(handler)
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

/// One tool of a [`sized_set`]: rig's handler, measured around each unary call by the handler's
/// own future (the call lives in it, so a dropped dispatch ends the call with it). A streamed
/// dispatch goes through rig's layer machinery instead ([`Sizing`]), which folds the stream to
/// its answer. Its descriptor names [`LAYER_NAME`] as a layer, as rig's layer would.
struct SizedHandler {
    inner: ErasedHandler,
    /// `inner` behind [`Sizing`], for streamed dispatches.
    streamed: ErasedHandler,
    tool: String,
    guard: Option<CeilingGuard>,
}

impl Serve for SizedHandler {
    type Family = family::Dynamic;

    fn descriptor(&self) -> HandlerDescriptor {
        let mut descriptor = self.inner.descriptor();
        descriptor.layers.insert(0, LAYER_NAME.to_owned());
        descriptor
    }

    async fn serve(&self, kind: EffectKind, dispatch: Dispatch) -> Reply {
        if dispatch.is_stream() {
            return self.streamed.handle(kind, dispatch).await;
        }
        let Some(call) = start(&self.tool, &kind) else {
            return self.inner.handle(kind, dispatch).await;
        };
        let replaced_by = dispatch.replaced_by();
        // What is held across the awaits is kept small (the future is boxed by rig and its
        // state moved): the answer is matched in place, a stream (never a tool's unary answer)
        // folded in a future of its own.
        let outcome = match self.inner.handle(kind, dispatch).await {
            Reply::Outcome(outcome) => outcome,
            stream => Box::pin(stream.into_outcome()).await,
        };
        match answer(call, &self.tool, &outcome, self.guard.as_ref()) {
            Verdict::Keep => Reply::Outcome(outcome),
            Verdict::Replace(replacement) => {
                // Who the consumer's answer is from, as rig's layer says it.
                *replaced_by.lock().unwrap_or_else(PoisonError::into_inner) =
                    Some(LAYER_NAME.to_owned());
                Reply::Outcome(replacement)
            }
        }
    }
}

/// The call a tool-call effect starts (`None` for any other effect): its arguments hashed from
/// the JSON text rig dispatches.
fn start(tool: &str, kind: &EffectKind) -> Option<Call> {
    let EffectKind::ToolCall { args, .. } = kind else {
        return None;
    };
    let hash = crate::args_hash::span_args_hash_json(args).ok();
    Some(Call::start(tool, hash))
}

/// What the consumer receives of `outcome`, with `call` measured (and guarded) on it.
fn answer(
    call: Call,
    tool: &str,
    outcome: &Result<Outcome, ErrorReport>,
    guard: Option<&CeilingGuard>,
) -> Verdict {
    let result = match outcome {
        Ok(Outcome::ToolResult { result }) => result,
        Ok(_) => return Verdict::Keep,
        Err(report) => {
            call.fail(&ToolExecutionError::from(report.clone()));
            return Verdict::Keep;
        }
    };
    if let Some(error) = result.error() {
        call.fail(error);
        return Verdict::Keep;
    }
    // Denied and skipped calls are neither sized nor successes: rig's span carries its
    // outcome; toolsize's own span ends cancelled as the call is dropped.
    if !result.is_success() {
        return Verdict::Keep;
    }
    match call.finish(tool, result.output(), guard) {
        Some(handed) => Verdict::Replace(Ok(Outcome::ToolResult {
            result: ToolResult::success(handed),
        })),
        None => Verdict::Keep,
    }
}

/// rig's layer around one tool of a [`sized_set`], for a streamed dispatch: the call starts
/// before the handler and is measured (and guarded) on its answer.
struct Sizing {
    tool: String,
    guard: Option<CeilingGuard>,
    /// Calls started and not yet answered, by rig's effect id (ids only grow: the first is the
    /// oldest).
    open: Mutex<VecDeque<(EffectId, Call)>>,
}

impl Sizing {
    fn open(&self) -> std::sync::MutexGuard<'_, VecDeque<(EffectId, Call)>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Intercept for Sizing {
    fn name(&self) -> String {
        LAYER_NAME.to_owned()
    }

    async fn before(&self, id: EffectId, kind: &EffectKind) -> Decision {
        if let Some(call) = start(&self.tool, kind) {
            let mut open = self.open();
            if open.len() >= MAX_OPEN_CALLS {
                open.pop_front();
            }
            open.push_back((id, call));
        }
        Decision::Proceed
    }

    async fn after(
        &self,
        id: EffectId,
        _: &EffectKind,
        outcome: &Result<Outcome, ErrorReport>,
    ) -> Verdict {
        let call = {
            let mut open = self.open();
            // The call answered is most often the newest.
            let at = open.iter().rposition(|(open_id, _)| *open_id == id);
            at.and_then(|at| open.remove(at)).map(|(_, call)| call)
        };
        match call {
            Some(call) => answer(call, &self.tool, outcome, self.guard.as_ref()),
            None => Verdict::Keep,
        }
    }
}

/// Where a call's attributes go: rig's own span, or toolsize's.
struct Call {
    /// rig's span, when the call runs inside one, and when the tool's own work started
    /// (toolsize's span keeps its own).
    rig: Option<(tracing::Span, Instant)>,
    /// toolsize's span, otherwise.
    own: Option<crate::ToolCall>,
}

impl Call {
    /// `hash`: the arguments' hash (`None` when they are not JSON: the hash is left out).
    fn start(tool: &str, hash: Option<String>) -> Self {
        if !crate::wrapped::in_span(is_rig_tool_span) {
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
        let current = tracing::Span::current();
        current.set_attribute(TOOL_NAME, tool.to_owned());
        if let Some(hash) = hash {
            current.set_attribute(TOOL_ARGS_HASH, hash);
        }
        Call {
            rig: Some((current, Instant::now())),
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
        if let Some((span, started)) = &self.rig {
            span.set_attribute(TOOL_LATENCY_MS, latency_ms(*started));
            span.set_attribute(TOOL_RESULT_BYTES, int(handed.len() as u64));
            span.set_attribute(TOOL_RESULT_TRUNCATED, truncated);
            if truncated {
                span.set_attribute(TOOL_RESULT_ORIGINAL_BYTES, int(original));
            }
        }
        replaced
    }

    fn fail(mut self, error: &ToolExecutionError) {
        let kind = error.kind().as_str();
        let text = span_error(error);
        if let Some(own) = self.own.take() {
            own.fail(&text, kind);
            return;
        }
        if let Some((span, started)) = &self.rig {
            span.set_attribute(TOOL_LATENCY_MS, latency_ms(*started));
            span.set_attribute(TOOL_ERROR, bounded(&text));
            span.set_attribute(ERROR_TYPE, kind);
        }
    }
}

/// What a failed call's span says of its error: rig's message, except for arguments that did not
/// parse. serde's message for those quotes the value that did not fit (`invalid type: string
/// "…"`), so the span says only what kind of error stopped the parse and where.
fn span_error(error: &ToolExecutionError) -> String {
    let Some(parse) = error.downcast_ref::<serde_json::Error>() else {
        return error.to_string();
    };
    let category = match parse.classify() {
        serde_json::error::Category::Io => "io",
        serde_json::error::Category::Syntax => "syntax",
        serde_json::error::Category::Data => "data",
        serde_json::error::Category::Eof => "end of input",
    };
    format!(
        "failed to parse tool arguments: {category} error at line {} column {}",
        parse.line(),
        parse.column()
    )
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

    fn call(args: serde_json::Value) -> Result<SizedOutput, ToolExecutionError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let args = serde_json::from_str(&args.to_string()).unwrap();
        rt.block_on(sized(Echo).call(&mut ToolContext::default(), args))
    }

    /// A tool whose arguments are a struct, as most are.
    struct Strict;
    #[derive(serde::Deserialize)]
    struct Query {
        #[serde(default)]
        #[allow(dead_code)]
        q: u32,
    }
    impl PortableTool for Strict {
        const NAME: &'static str = "strict";
        type Args = Query;
        type Output = String;
        type Error = std::io::Error;
        fn description(&self) -> String {
            "Strict.".into()
        }
        fn parameters(&self) -> serde_json::Value {
            serde_json::json!({"type": "object"})
        }
        async fn call(&self, _: Query) -> Result<String, std::io::Error> {
            Ok("ok".into())
        }
    }

    /// The same arguments through rig's own dispatch, bare and sized: (bare's, sized's) results.
    fn both(
        args: &str,
    ) -> (
        ToolResult,
        ToolResult,
        Vec<opentelemetry_sdk::trace::SpanData>,
    ) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let bare = ToolSet::from_tools(vec![Strict]);
        let wrapped = ToolSet::from_tools(vec![sized(Strict)]);
        let run = |set: &ToolSet| {
            rt.block_on(set.execute("strict", args.to_owned(), &mut ToolContext::default()))
        };
        let bare = run(&bare);
        let mut sized = None;
        let spans = captured(|| sized = Some(run(&wrapped)));
        (bare, sized.unwrap(), spans)
    }

    /// `null` arguments: rig reads them as `{}`, and so does the wrapper; the hash is that of
    /// what the model sent.
    #[test]
    fn null_arguments_fall_back_to_an_empty_object_as_rig_does() {
        let (bare, sized, spans) = both("null");
        assert!(bare.is_success(), "rig's own dispatch: {:?}", bare.error());
        assert!(sized.is_success(), "sized: {:?}", sized.error());
        assert_eq!(sized.output().render(), bare.output().render());
        assert_eq!(attr(&spans[0], TOOL_RESULT_BYTES), Some(2i64.into()));
        assert_eq!(
            attr(&spans[0], TOOL_ARGS_HASH).unwrap().to_string(),
            crate::args_hash(&serde_json::Value::Null).unwrap()
        );
    }

    /// Arguments that do not fit the tool's type fail as rig fails them (same kind, same
    /// message), and the failure is on the span, hashed.
    #[test]
    fn arguments_that_do_not_fit_fail_as_rig_fails_them() {
        let (bare, sized, spans) = both(r#"{"q": "not a number"}"#);
        let (bare, sized) = (bare.error().unwrap(), sized.error().unwrap());
        assert_eq!(sized.kind(), bare.kind());
        assert_eq!(sized.to_string(), bare.to_string());
        assert_eq!(attr(&spans[0], ERROR_TYPE), Some("invalid_args".into()));
        // rig's message quotes the value; the span says only where the parse stopped.
        assert!(bare.to_string().contains("not a number"));
        assert_eq!(
            attr(&spans[0], TOOL_ERROR).unwrap().to_string(),
            "failed to parse tool arguments: data error at line 1 column 20"
        );
        assert_eq!(attr(&spans[0], TOOL_RESULT_BYTES), None);
        assert_eq!(
            attr(&spans[0], TOOL_ARGS_HASH).unwrap().to_string(),
            crate::args_hash(&serde_json::json!({"q": "not a number"})).unwrap()
        );
    }

    /// The hash taken while rig reads the arguments is the span contract's, for texts of every
    /// shape (the same as `span_args_hash_json` of the text, and `args_hash` of its value).
    #[test]
    fn the_hash_taken_while_reading_is_the_contracts() {
        for text in [
            r#"{"b": [1, 2.5, {"z": null, "a": "é\u00e9"}], "a": true}"#,
            "{}",
            "[]",
            r#""text""#,
            "12345678901234567890123",
            r#"{"a": 1, "a": 2}"#,
        ] {
            let args: SizedArgs<serde_json::Value> = serde_json::from_str(text).unwrap();
            assert_eq!(
                args.hash,
                Some(crate::args_hash::span_args_hash_json(text).unwrap()),
                "{text}"
            );
        }
        let value = serde_json::json!({"query": "q", "n": [1, 2]});
        let args: SizedArgs<serde_json::Value> = serde_json::from_str(&value.to_string()).unwrap();
        assert_eq!(args.hash, Some(crate::args_hash(&value).unwrap()));
        assert!(serde_json::from_str::<SizedArgs<serde_json::Value>>("{not json").is_err());
        // Only a text can be borrowed: a value is refused, not read unhashed.
        assert!(serde_json::from_value::<SizedArgs<serde_json::Value>>(value).is_err());
        let shown = format!(
            "{:?}",
            serde_json::from_str::<SizedArgs<Query>>(r#"{"q": "secret"}"#).unwrap()
        );
        assert!(
            shown.contains("invalid_args") && !shown.contains("secret"),
            "{shown}"
        );
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

    /// A set holding `Echo` (1,000 bytes) behind a guard truncating at 500.
    fn guarded_echo_set() -> ToolSet {
        let mut set = ToolSet::default();
        set.add_tool(Echo);
        let guard = CeilingGuard::builder()
            .max_output(500)
            .policy(crate::guard::Policy::Truncate)
            .build()
            .unwrap();
        sized_set_guarded(set, guard)
    }

    /// A guarded set cuts what the model is handed, and says so on the span.
    #[test]
    fn a_guarded_set_hands_over_the_cut_result() {
        let tool = guarded_echo_set().get("echo").unwrap().clone();
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

    /// A set's tool dispatched as rig's driver does: the descriptor names toolsize's layer, a
    /// unary call's replacement by the guard is attributed to it, and a streamed dispatch (which
    /// rig answers for a tool with an error) is one failed call.
    #[test]
    fn a_sized_set_serves_rig_dispatches() {
        let handler = guarded_echo_set().get("echo").unwrap().handler().clone();
        assert_eq!(handler.descriptor().layers, [LAYER_NAME]);
        let kind = || EffectKind::ToolCall {
            name: "echo".into(),
            args: "{}".into(),
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let mut replaced_by = None;
        let unary = captured(|| {
            let dispatch = Dispatch::new(EffectId::from_raw(1), false);
            let slot = dispatch.replaced_by();
            rt.block_on(handler.handle(kind(), dispatch));
            replaced_by = slot.lock().unwrap().clone();
        });
        assert_eq!(replaced_by.as_deref(), Some(LAYER_NAME));
        assert_eq!(attr(&unary[0], TOOL_RESULT_TRUNCATED), Some(true.into()));
        let streamed = captured(|| {
            let dispatch = Dispatch::new(EffectId::from_raw(2), true);
            let reply = rt.block_on(handler.handle(kind(), dispatch));
            assert!(rt.block_on(reply.into_outcome()).is_err());
        });
        assert_eq!(streamed.len(), 1, "one span per streamed call");
        assert_eq!(attr(&streamed[0], TOOL_RESULT_BYTES), None);
        assert!(attr(&streamed[0], ERROR_TYPE).is_some());
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
