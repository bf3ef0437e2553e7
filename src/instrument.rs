//! One span per tool call: the result's size, truncation, args hash, latency, error.
//!
//! [`tool_call`] starts a [`ToolCallBuilder`]; there are three ways in:
//!
//! - [`ToolCallBuilder::run`] / [`ToolCallBuilder::instrument`]: a closure or future returning a
//!   `Result<T, E>` with `T: Serialize`. The result is measured by serializing it into a counting
//!   writer (the JSON a model would be handed), with no extra allocation.
//! - [`ToolCallBuilder::run_text`] / [`ToolCallBuilder::instrument_text`]: the tool already returns
//!   the serialized string or bytes; they are measured as they are.
//! - [`ToolCallBuilder::start`]: a low-level [`ToolCall`] handle whose
//!   [`finish`](ToolCall::finish)`(serialized, truncated)` or [`fail`](ToolCall::fail) ends the span.
//!
//! The span follows the contract in [`crate::semconv`]: named `execute_tool {tool}`, kind
//! INTERNAL, fields known only at the end declared empty and recorded when the call ends. It is an
//! ordinary `tracing` span (target `toolsize`, level INFO), so it reaches OpenTelemetry through
//! `tracing-opentelemetry` — set up by [`crate::export`] or by the application's own pipeline.
//!
//! Failure paths end the span too, and the caller's value is never changed:
//! - an `Err` records `tool.error` (its message, at most [`MAX_ERROR_MESSAGE_BYTES`], marked
//!   with `…` when cut), `error.type` and status ERROR, with no `tool.result.bytes` (absent, not 0);
//! - a panicking tool ends its span with `error.type = "panic"` before the panic continues;
//! - a future dropped before it completes ends its span with `tool.cancelled = true` and
//!   `error.type = "cancelled"`.
//!
//! A layer that cuts the result while the call runs (the [`crate::guard`]-style ceiling guard, or
//! any code of the caller's) calls [`record_cut`]; the span then records
//! `tool.result.truncated = true` and `tool.result.original_bytes` by itself.
//!
//! Which measures are taken ([`Settings::measures`]): by default the cheap ones only, bytes and
//! `tokens_estimate` ([`Measures::CHEAP`]), plus those the layers of the stack named in
//! `TOOLSIZE_STACK` count by ([`crate::layers::Stack::measures`]); the others (chars, UTF-16
//! units, lines, JSON depth, longest string) each cost a pass over the result and are taken when
//! asked for ([`set_defaults`], [`ToolCallBuilder::measures`]). A measure not taken is left off
//! the span, never recorded as 0.
//!
//! Nothing here blocks, allocates per byte or panics. Argument and result content are never
//! recorded: only sizes and the arguments' hash. When no subscriber wants the span, the result is
//! not measured at all.

use std::any::type_name;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::task::{Context, Poll};
use std::time::Instant;

use serde::Serialize;
use tracing::field::Empty;
use tracing::Span;

use crate::measure::{Measurement, Measurer, Measures};
use crate::origin::Origin;
use crate::semconv::*;

/// Results above this many bytes get a `tool.large_result` span event, unless configured
/// otherwise: the default layer's ceiling,
/// [`DEFAULT_CEILING_BYTES`](crate::layers::DEFAULT_CEILING_BYTES) (16 KiB).
pub const DEFAULT_LARGE_RESULT_BYTES: u64 = crate::layers::DEFAULT_CEILING_BYTES;

/// Environment variable overriding [`DEFAULT_LARGE_RESULT_BYTES`].
pub const ENV_LARGE_RESULT_BYTES: &str = "TOOLSIZE_LARGE_RESULT_BYTES";

/// Per-call settings: which measures to take, and the large-result threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// The measures taken of every result. Bytes are always taken; a measure not taken is left
    /// off the span.
    pub measures: Measures,
    /// Results above this many bytes get a `tool.large_result` event.
    pub large_result_bytes: u64,
}

impl Default for Settings {
    /// [`Measures::CHEAP`], [`DEFAULT_LARGE_RESULT_BYTES`].
    fn default() -> Self {
        Settings {
            measures: Measures::CHEAP,
            large_result_bytes: DEFAULT_LARGE_RESULT_BYTES,
        }
    }
}

static DEFAULTS: OnceLock<Settings> = OnceLock::new();

/// Sets the process-wide defaults (for example from the application's config file). They take
/// precedence over [`ENV_LARGE_RESULT_BYTES`]; a builder method still overrides them for one call.
///
/// Returns `Err` with the settings already in force if the defaults were resolved before (by an
/// earlier call, or by the first tool call).
pub fn set_defaults(settings: Settings) -> Result<(), Settings> {
    let mut fresh = false;
    let now = DEFAULTS.get_or_init(|| {
        fresh = true;
        log_effective(&settings, Origin::Config, Origin::Config);
        settings
    });
    if fresh {
        Ok(())
    } else {
        Err(*now)
    }
}

/// The process-wide defaults, resolved once: [`set_defaults`] > environment > built-in. The
/// effective settings are logged once, with their sources.
///
/// From the environment: [`ENV_LARGE_RESULT_BYTES`], and the layer stack named in
/// [`crate::layers::ENV_STACK`] (`TOOLSIZE_STACK`), whose layers' units are measured on top of
/// [`Measures::CHEAP`] ([`crate::layers::Stack::measures`]).
pub fn defaults() -> Settings {
    *DEFAULTS.get_or_init(|| {
        let (bytes, bytes_source) =
            large_result_bytes_from_env(std::env::var(ENV_LARGE_RESULT_BYTES).ok());
        let (measures, measures_source) =
            measures_from_env(std::env::var(crate::layers::ENV_STACK).ok());
        let settings = Settings {
            measures,
            large_result_bytes: bytes,
        };
        log_effective(&settings, bytes_source, measures_source);
        settings
    })
}

/// The measures the stack named in `TOOLSIZE_STACK` needs; the cheap ones when it is unset,
/// blank or names an unknown layer (logged).
fn measures_from_env(value: Option<String>) -> (Measures, Origin) {
    let Some(list) = value.filter(|v| !v.trim().is_empty()) else {
        return (Measures::CHEAP, Origin::Default);
    };
    let stack = crate::layers::StackConfig::parse_list(&list)
        .and_then(|config| crate::layers::Stack::resolve(None, Some(&config), None));
    match stack {
        Ok(stack) => (stack.measures(), Origin::Env),
        Err(error) => {
            tracing::warn!(
                target: "toolsize",
                variable = crate::layers::ENV_STACK,
                error = %error,
                "Ignoring the layer stack in the environment; taking the cheap measures only."
            );
            (Measures::CHEAP, Origin::Default)
        }
    }
}

fn large_result_bytes_from_env(value: Option<String>) -> (u64, Origin) {
    match value {
        None => (DEFAULT_LARGE_RESULT_BYTES, Origin::Default),
        Some(v) => match v.trim().parse::<u64>() {
            Ok(n) if n > 0 => (n, Origin::Env),
            _ => {
                tracing::warn!(
                    target: "toolsize",
                    variable = ENV_LARGE_RESULT_BYTES,
                    value = %v,
                    default = DEFAULT_LARGE_RESULT_BYTES,
                    "Ignoring invalid large-result threshold: expected a positive whole number of bytes; using the default."
                );
                (DEFAULT_LARGE_RESULT_BYTES, Origin::Default)
            }
        },
    }
}

fn log_effective(settings: &Settings, bytes_source: Origin, measures_source: Origin) {
    tracing::info!(
        target: "toolsize",
        large_result_bytes = settings.large_result_bytes,
        source = %bytes_source,
        measures = %settings.measures,
        measures_source = %measures_source,
        "Tool-call settings in effect."
    );
}

/// Starts describing a tool call named `name`. See the [module docs](self).
pub fn tool_call(name: &str) -> ToolCallBuilder<'_> {
    ToolCallBuilder {
        name,
        call_id: None,
        args_hash: None,
        measures: None,
        large_result_bytes: None,
        mcp: None,
    }
}

/// A tool call about to run: name, optional call id, arguments' hash, settings.
#[derive(Debug)]
#[must_use = "a ToolCallBuilder does nothing until run, instrument or start is called"]
pub struct ToolCallBuilder<'a> {
    name: &'a str,
    call_id: Option<&'a str>,
    args_hash: Option<String>,
    measures: Option<Measures>,
    large_result_bytes: Option<u64>,
    mcp: Option<McpAttributes<'a>>,
}

impl<'a> ToolCallBuilder<'a> {
    /// The caller's id for this call (`gen_ai.tool.call.id`).
    pub fn call_id(mut self, id: &'a str) -> Self {
        self.call_id = Some(id);
        self
    }

    /// The call's arguments: only their hash is recorded (`tool.args_hash`, see
    /// [`crate::args_hash()`]; keyed when the process has a key, see
    /// [`crate::args_hash::span_args_hash`]). Arguments that cannot be hashed (a map with keys
    /// JSON has no string for) leave the attribute absent and are logged once.
    pub fn args<A: Serialize + ?Sized>(self, args: &A) -> Self {
        self.args_hashed(crate::args_hash::span_args_hash(args))
    }

    /// The arguments' hash computed by the caller with one of [`crate::args_hash`]'s span
    /// hashes, or why it could not be: as [`args`](Self::args) takes it.
    pub(crate) fn args_hashed(
        mut self,
        hash: Result<String, crate::args_hash::ArgsHashError>,
    ) -> Self {
        match hash {
            Ok(hash) => self.args_hash = Some(hash),
            Err(error) => {
                static WARNED: AtomicBool = AtomicBool::new(false);
                if !WARNED.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        target: "toolsize",
                        tool = self.name,
                        error = %error,
                        "Tool arguments could not be hashed; tool.args_hash is left out. Further failures are not logged."
                    );
                }
                self.args_hash = None;
            }
        }
        self
    }

    /// An arguments hash computed elsewhere (for example by a Python agent's own code).
    pub fn args_hash(mut self, hash: impl Into<String>) -> Self {
        self.args_hash = Some(hash.into());
        self
    }

    /// The measures taken of this call's result, in place of [`defaults`]' (for example
    /// [`Measures::ALL`], or `defaults().measures.union(…)` to add some). Each measure beyond
    /// [`Measures::CHEAP`] costs a pass over the result.
    pub fn measures(mut self, measures: Measures) -> Self {
        self.measures = Some(measures);
        self
    }

    /// The MCP attributes of a call made through an MCP transport, recorded as the span opens
    /// (one trip through the subscriber fewer than [`ToolCall::record_mcp`] after it).
    pub fn mcp(mut self, mcp: McpAttributes<'a>) -> Self {
        self.mcp = Some(mcp);
        self
    }

    /// The large-result threshold for this call (default: [`defaults`]).
    pub fn large_result_bytes(mut self, bytes: u64) -> Self {
        self.large_result_bytes = Some(bytes);
        self
    }

    /// Opens the span and returns the low-level handle.
    pub fn start(self) -> ToolCall {
        let defaults = defaults();
        let settings = Settings {
            measures: self.measures.unwrap_or(defaults.measures),
            large_result_bytes: self
                .large_result_bytes
                .unwrap_or(defaults.large_result_bytes),
        };
        let name = self.name;
        let mcp = self.mcp.unwrap_or_default();
        let span = tracing::info_span!(
            target: "toolsize",
            "execute_tool",
            // The fields recorded at the end come first: a record finds its field by name, in
            // declaration order.
            { TOOL_RESULT_BYTES } = Empty,
            { TOOL_RESULT_TRUNCATED } = Empty,
            { TOOL_RESULT_ORIGINAL_BYTES } = Empty,
            { TOOL_RESULT_CHARS } = Empty,
            { TOOL_RESULT_UTF16_UNITS } = Empty,
            { TOOL_RESULT_LINES } = Empty,
            { TOOL_RESULT_JSON_DEPTH } = Empty,
            { TOOL_RESULT_MAX_STRING_CHARS } = Empty,
            { TOOL_RESULT_TOKENS_ESTIMATE } = Empty,
            { TOOL_LATENCY_MS } = Empty,
            otel.name = %format_args!("{SPAN_NAME_PREFIX} {name}"),
            otel.kind = "internal",
            otel.status_description = Empty,
            { GEN_AI_OPERATION_NAME } = OPERATION_EXECUTE_TOOL,
            { GEN_AI_TOOL_NAME } = name,
            { TOOL_NAME } = name,
            { GEN_AI_TOOL_CALL_ID } = self.call_id,
            { TOOL_ARGS_HASH } = self.args_hash.as_deref(),
            { TOOL_ERROR } = Empty,
            { ERROR_TYPE } = Empty,
            { TOOL_CANCELLED } = Empty,
            // Empty strings: not an MCP call (or not yet known); `record_mcp` may add them.
            { MCP_METHOD_NAME } = non_empty(mcp.method),
            { MCP_SESSION_ID } = mcp.session_id,
            { MCP_PROTOCOL_VERSION } = mcp.protocol_version,
            { JSONRPC_REQUEST_ID } = non_empty(mcp.request_id),
            { RPC_RESPONSE_STATUS_CODE } = Empty,
            { NETWORK_TRANSPORT } = mcp.transport,
            { TOOL_RESULT_LIMIT_BYTES } = Empty,
            { TOOL_RESULT_LIMIT_SOURCE } = Empty,
        );
        ToolCall {
            span,
            started: Instant::now(),
            settings,
            cut: AtomicU64::new(0),
            done: false,
        }
    }

    /// Runs a synchronous tool whose result is serialized as JSON for the model.
    pub fn run<T, E, F>(self, f: F) -> Result<T, E>
    where
        F: FnOnce() -> Result<T, E>,
        T: Serialize,
        E: fmt::Display,
    {
        self.run_as::<AsJson, T, E, F>(f)
    }

    /// Runs a synchronous tool that returns the serialized result itself (a `String`,
    /// `Vec<u8>`, …): measured as it is.
    pub fn run_text<T, E, F>(self, f: F) -> Result<T, E>
    where
        F: FnOnce() -> Result<T, E>,
        T: AsRef<[u8]>,
        E: fmt::Display,
    {
        self.run_as::<AsText, T, E, F>(f)
    }

    fn run_as<K, T, E, F>(self, f: F) -> Result<T, E>
    where
        F: FnOnce() -> Result<T, E>,
        T: MeasureAs<K>,
        E: fmt::Display,
    {
        let mut call = self.start();
        let outcome = call.in_scope(|| catch_unwind(AssertUnwindSafe(f)));
        match outcome {
            Ok(Ok(value)) => {
                call.finish_with(&value);
                Ok(value)
            }
            Ok(Err(error)) => {
                call.fail(&error, type_name::<E>());
                Err(error)
            }
            Err(panic) => {
                call.record_panic(&*panic);
                resume_unwind(panic)
            }
        }
    }

    /// Wraps an async tool whose result is serialized as JSON for the model. The span is entered
    /// on every poll and never held across an `.await`.
    pub fn instrument<F, T, E>(self, future: F) -> Instrumented<F, AsJson>
    where
        F: Future<Output = Result<T, E>>,
        T: Serialize,
        E: fmt::Display,
    {
        Instrumented::new(future, self.start())
    }

    /// Wraps an async tool that returns the serialized result itself.
    pub fn instrument_text<F, T, E>(self, future: F) -> Instrumented<F, AsText>
    where
        F: Future<Output = Result<T, E>>,
        T: AsRef<[u8]>,
        E: fmt::Display,
    {
        Instrumented::new(future, self.start())
    }
}

/// Marker: the result is measured as the JSON `serde_json` makes of it.
#[derive(Debug)]
pub enum AsJson {}

/// Marker: the result is already the serialized text or bytes.
#[derive(Debug)]
pub enum AsText {}

/// How a result of some kind is measured. Implemented for `Serialize` types ([`AsJson`]) and
/// `AsRef<[u8]>` types ([`AsText`]).
pub trait MeasureAs<K> {
    /// Measures `self`, or `None` if it cannot be serialized.
    fn measure_as(&self, measures: Measures) -> Option<Measurement>;
}

impl<T: Serialize + ?Sized> MeasureAs<AsJson> for T {
    fn measure_as(&self, measures: Measures) -> Option<Measurement> {
        let mut m = Measurer::new(measures);
        match serde_json::to_writer(&mut m, self) {
            Ok(()) => Some(m.finish()),
            Err(error) => {
                static WARNED: AtomicBool = AtomicBool::new(false);
                if !WARNED.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        target: "toolsize",
                        error = %error,
                        "Tool result could not be serialized as JSON; its size is unknown and left out. Further failures are not logged."
                    );
                }
                None
            }
        }
    }
}

impl<T: AsRef<[u8]> + ?Sized> MeasureAs<AsText> for T {
    fn measure_as(&self, measures: Measures) -> Option<Measurement> {
        Some(crate::measure::measure(self.as_ref(), measures))
    }
}

/// An open tool-call span. End it with [`finish`](Self::finish),
/// [`finish_truncated`](Self::finish_truncated), [`finish_value`](Self::finish_value) or
/// [`fail`](Self::fail); dropped without either, it ends as cancelled (or as panicked, while a
/// panic unwinds).
#[derive(Debug)]
#[must_use = "a ToolCall should be ended with finish or fail; dropping it records a cancellation"]
pub struct ToolCall {
    span: Span,
    started: Instant,
    settings: Settings,
    /// 0: nothing cut; otherwise `original_bytes + 1`, from [`record_cut`] (merged in when
    /// [`ToolCall::in_scope`] returns).
    cut: AtomicU64,
    done: bool,
}

impl ToolCall {
    /// The call's span, for adding the caller's own fields or children.
    pub fn span(&self) -> &Span {
        &self.span
    }

    /// The settings in force for this call.
    pub fn settings(&self) -> Settings {
        self.settings
    }

    /// Records the MCP attributes of a call made through an MCP transport (OTel MCP semantic
    /// conventions): `mcp.method.name`, `jsonrpc.request.id`, and those of `mcp` that are known.
    pub fn record_mcp(&self, mcp: &McpAttributes<'_>) {
        let span = &self.span;
        let Some(meta) = span.metadata() else {
            return;
        };
        let fields = meta.fields();
        // The fields looked up by name once per process, not at each call (a name is found by
        // comparing it with each of the span's thirty names in turn).
        static MCP_FIELDS: OnceLock<Option<McpFields>> = OnceLock::new();
        let found = MCP_FIELDS.get_or_init(|| McpFields::of(fields));
        let Some(f) = found
            .as_ref()
            .filter(|f| f.method.callsite() == meta.callsite())
        else {
            // One trip through the subscriber for all of them; `None` fields are left off.
            tracing::record_all!(
                span,
                { MCP_METHOD_NAME } = mcp.method,
                { MCP_SESSION_ID } = mcp.session_id,
                { MCP_PROTOCOL_VERSION } = mcp.protocol_version,
                { JSONRPC_REQUEST_ID } = mcp.request_id,
                { NETWORK_TRANSPORT } = mcp.transport,
            );
            return;
        };
        use tracing::field::Value;
        span.record_all(&fields.value_set(&[
            (&f.method, Some(&mcp.method as &dyn Value)),
            (&f.session_id, Some(&mcp.session_id as &dyn Value)),
            (
                &f.protocol_version,
                Some(&mcp.protocol_version as &dyn Value),
            ),
            (&f.request_id, Some(&mcp.request_id as &dyn Value)),
            (&f.transport, Some(&mcp.transport as &dyn Value)),
        ]));
    }

    /// Records the output limit a proxy holds this call's result to, and where it came from
    /// (`tool.result.limit_bytes`, `tool.result.limit_source`).
    pub fn record_limit(&self, bytes: u64, source: &str) {
        self.span.record(TOOL_RESULT_LIMIT_BYTES, int(bytes));
        self.span.record(TOOL_RESULT_LIMIT_SOURCE, source);
    }

    /// Ends the call as failed with a JSON-RPC error `code` (`rpc.response.status_code` and
    /// `error.type` are both the code, as text).
    pub fn fail_rpc(self, error: &dyn fmt::Display, code: i64) {
        let code = code.to_string();
        self.span.record(RPC_RESPONSE_STATUS_CODE, code.as_str());
        self.fail(error, &code);
    }

    /// Runs `f` inside the span, with this call as the one [`record_cut`] reports to.
    pub fn in_scope<R>(&self, f: impl FnOnce() -> R) -> R {
        let _enter = self.span.enter();
        let _active = Active::push(&self.cut);
        f()
    }

    /// `fut` polled inside the span, each poll as [`in_scope`](Self::in_scope) runs code (a cut
    /// the tool reports with [`record_cut`] goes to this call): the call is borrowed, so the span
    /// is neither cloned nor entered again when the future is dropped. The future is borrowed,
    /// pinned where the caller made it (`std::pin::pin!`), rather than moved into the wrapper: a
    /// framework's future can be kilobytes (rmcp's request handler: about 4 KiB).
    #[cfg(any(feature = "rig", feature = "swiftide"))]
    pub(crate) fn scoped<'a, F: Future>(&'a self, fut: Pin<&'a mut F>) -> InScope<'a, F> {
        InScope { call: self, fut }
    }

    /// Ends the call with its serialized result as handed to the model, and whether something cut
    /// it. Returns the measurement.
    pub fn finish(mut self, serialized: impl AsRef<[u8]>, truncated: bool) -> Measurement {
        let m = crate::measure::measure(serialized.as_ref(), self.settings.measures);
        self.record_success(m, truncated, None);
        m
    }

    /// Ends the call with a result that was cut from `original_bytes`.
    pub fn finish_truncated(
        mut self,
        serialized: impl AsRef<[u8]>,
        original_bytes: u64,
    ) -> Measurement {
        let m = crate::measure::measure(serialized.as_ref(), self.settings.measures);
        self.record_success(m, true, Some(original_bytes));
        m
    }

    /// Ends the call with a result that will be serialized as JSON for the model. Returns `None`
    /// (and leaves the size out) when the value cannot be serialized.
    pub fn finish_value<T: Serialize + ?Sized>(mut self, value: &T) -> Option<Measurement> {
        let m = MeasureAs::<AsJson>::measure_as(value, self.settings.measures);
        match m {
            Some(m) => self.record_success(m, false, None),
            None => self.record_latency(),
        }
        self.done = true;
        m
    }

    /// Ends the call with a measurement made by the caller (for example
    /// [`Measurement::of_byte_count`] of a size counted without serializing).
    pub fn finish_measured(mut self, m: Measurement) {
        self.record_success(m, false, None);
    }

    /// Ends the call as failed: `tool.error` = the error's message, `error.type` = `error_type`,
    /// status ERROR, no result size.
    pub fn fail(mut self, error: &dyn fmt::Display, error_type: &str) {
        self.record_error(error, error_type);
    }

    fn finish_with<K, T: MeasureAs<K> + ?Sized>(&mut self, value: &T) {
        if self.span.is_disabled() {
            self.done = true;
            return;
        }
        match value.measure_as(self.settings.measures) {
            Some(m) => self.record_success(m, false, None),
            None => {
                self.record_latency();
                self.done = true;
            }
        }
    }

    fn latency_ms(&self) -> f64 {
        self.started.elapsed().as_secs_f64() * 1e3
    }

    fn record_latency(&self) {
        self.span.record(TOOL_LATENCY_MS, self.latency_ms());
    }

    fn record_success(&mut self, m: Measurement, truncated: bool, original: Option<u64>) {
        let (truncated, original) = self.settle_cut(truncated, original);
        let span = &self.span;
        // One record for all of them: one trip through the subscriber (tracing-opentelemetry
        // takes its span's lock and allocates once per record). `None` fields are left off.
        tracing::record_all!(
            span,
            { TOOL_RESULT_BYTES } = int(m.bytes),
            { TOOL_RESULT_TRUNCATED } = truncated,
            { TOOL_RESULT_ORIGINAL_BYTES } = original.map(int),
            { TOOL_RESULT_CHARS } = m.chars.map(int),
            { TOOL_RESULT_UTF16_UNITS } = m.utf16_units.map(int),
            { TOOL_RESULT_LINES } = m.lines.map(int),
            { TOOL_RESULT_JSON_DEPTH } = m.json_depth.map(int),
            { TOOL_RESULT_MAX_STRING_CHARS } = m.max_string_chars.map(int),
            { TOOL_RESULT_TOKENS_ESTIMATE } = m.tokens_estimate.map(int),
            { TOOL_LATENCY_MS } = self.latency_ms(),
        );
        self.large_result_event(m);
    }

    /// Ends the call with a measurement made by the caller and the MCP attributes of the call,
    /// in one trip through the subscriber: what [`record_mcp`](Self::record_mcp) and then
    /// [`finish_measured`](Self::finish_measured) record in two.
    #[cfg(feature = "rmcp")]
    pub(crate) fn finish_measured_mcp(mut self, m: Measurement, mcp: &McpAttributes<'_>) {
        let Some(meta) = self.span.metadata() else {
            self.done = true;
            return;
        };
        let fields = meta.fields();
        static FIELDS: OnceLock<Option<EndFields>> = OnceLock::new();
        let found = FIELDS.get_or_init(|| EndFields::of(fields));
        let Some(f) = found
            .as_ref()
            .filter(|f| f.mcp.method.callsite() == meta.callsite())
        else {
            self.record_mcp(mcp);
            self.record_success(m, false, None);
            return;
        };
        let (truncated, original) = self.settle_cut(false, None);
        use tracing::field::Value;
        fn v(value: &dyn Value) -> Option<&dyn Value> {
            Some(value)
        }
        let (bytes, original) = (int(m.bytes), original.map(int));
        let chars = m.chars.map(int);
        let utf16_units = m.utf16_units.map(int);
        let lines = m.lines.map(int);
        let json_depth = m.json_depth.map(int);
        let max_string_chars = m.max_string_chars.map(int);
        let tokens = m.tokens_estimate.map(int);
        let latency = self.latency_ms();
        self.span.record_all(&fields.value_set(&[
            (&f.bytes, v(&bytes)),
            (&f.truncated, v(&truncated)),
            (&f.original, v(&original)),
            (&f.chars, v(&chars)),
            (&f.utf16_units, v(&utf16_units)),
            (&f.lines, v(&lines)),
            (&f.json_depth, v(&json_depth)),
            (&f.max_string_chars, v(&max_string_chars)),
            (&f.tokens, v(&tokens)),
            (&f.latency, v(&latency)),
            (&f.mcp.method, v(&mcp.method)),
            (&f.mcp.session_id, v(&mcp.session_id)),
            (&f.mcp.protocol_version, v(&mcp.protocol_version)),
            (&f.mcp.request_id, v(&mcp.request_id)),
            (&f.mcp.transport, v(&mcp.transport)),
        ]));
        self.large_result_event(m);
    }

    /// Marks the call ended, and merges the cut [`record_cut`] reported while it ran into the
    /// caller's `truncated` and `original` bytes.
    fn settle_cut(&mut self, truncated: bool, original: Option<u64>) -> (bool, Option<u64>) {
        self.done = true;
        let cut = self.cut.load(Ordering::Relaxed);
        if cut > 0 {
            (true, Some(original.map_or(cut - 1, |o| o.max(cut - 1))))
        } else {
            (truncated, original)
        }
    }

    /// The `tool.large_result` event, for a result over the threshold.
    fn large_result_event(&self, m: Measurement) {
        let threshold = self.settings.large_result_bytes;
        if m.bytes > threshold {
            tracing::event!(
                target: "toolsize",
                parent: &self.span,
                tracing::Level::INFO,
                { TOOL_RESULT_BYTES } = int(m.bytes),
                { LARGE_RESULT_THRESHOLD_BYTES } = int(threshold),
                "{EVENT_LARGE_RESULT}"
            );
        }
    }

    fn record_error(&mut self, error: &dyn fmt::Display, error_type: &str) {
        self.done = true;
        let message = bounded_message(error);
        self.span.record(TOOL_ERROR, message.as_str());
        self.span.record(ERROR_TYPE, error_type);
        self.span
            .record("otel.status_description", message.as_str());
        self.record_latency();
    }

    fn record_panic(&mut self, payload: &(dyn std::any::Any + Send)) {
        let message = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("non-string panic payload");
        self.record_error(&format_args!("tool panicked: {message}"), ERROR_TYPE_PANIC);
    }
}

/// The MCP fields of the tool-call span, for [`ToolCall::record_mcp`].
struct McpFields {
    method: tracing::field::Field,
    session_id: tracing::field::Field,
    protocol_version: tracing::field::Field,
    request_id: tracing::field::Field,
    transport: tracing::field::Field,
}

impl McpFields {
    /// The fields of `fields` (the tool-call span's), `None` if one is missing.
    fn of(fields: &tracing::field::FieldSet) -> Option<McpFields> {
        Some(McpFields {
            method: fields.field(MCP_METHOD_NAME)?,
            session_id: fields.field(MCP_SESSION_ID)?,
            protocol_version: fields.field(MCP_PROTOCOL_VERSION)?,
            request_id: fields.field(JSONRPC_REQUEST_ID)?,
            transport: fields.field(NETWORK_TRANSPORT)?,
        })
    }
}

/// The fields [`ToolCall::finish_measured_mcp`] records: the result's, the latency, the MCP
/// attributes.
#[cfg(feature = "rmcp")]
struct EndFields {
    bytes: tracing::field::Field,
    truncated: tracing::field::Field,
    original: tracing::field::Field,
    chars: tracing::field::Field,
    utf16_units: tracing::field::Field,
    lines: tracing::field::Field,
    json_depth: tracing::field::Field,
    max_string_chars: tracing::field::Field,
    tokens: tracing::field::Field,
    latency: tracing::field::Field,
    mcp: McpFields,
}

#[cfg(feature = "rmcp")]
impl EndFields {
    /// The fields of `fields` (the tool-call span's), `None` if one is missing.
    fn of(fields: &tracing::field::FieldSet) -> Option<EndFields> {
        Some(EndFields {
            bytes: fields.field(TOOL_RESULT_BYTES)?,
            truncated: fields.field(TOOL_RESULT_TRUNCATED)?,
            original: fields.field(TOOL_RESULT_ORIGINAL_BYTES)?,
            chars: fields.field(TOOL_RESULT_CHARS)?,
            utf16_units: fields.field(TOOL_RESULT_UTF16_UNITS)?,
            lines: fields.field(TOOL_RESULT_LINES)?,
            json_depth: fields.field(TOOL_RESULT_JSON_DEPTH)?,
            max_string_chars: fields.field(TOOL_RESULT_MAX_STRING_CHARS)?,
            tokens: fields.field(TOOL_RESULT_TOKENS_ESTIMATE)?,
            latency: fields.field(TOOL_LATENCY_MS)?,
            mcp: McpFields::of(fields)?,
        })
    }
}

/// The MCP attributes of one call ([`ToolCall::record_mcp`]). Strings are recorded as given;
/// callers bound what a client sent.
#[derive(Debug, Clone, Copy, Default)]
pub struct McpAttributes<'a> {
    /// `mcp.method.name`, e.g. `tools/call`.
    pub method: &'a str,
    /// `jsonrpc.request.id`, as text.
    pub request_id: &'a str,
    /// `mcp.session.id`, when the transport has sessions.
    pub session_id: Option<&'a str>,
    /// `mcp.protocol.version`, when known.
    pub protocol_version: Option<&'a str>,
    /// `network.transport`, e.g. `pipe` for stdio.
    pub transport: Option<&'a str>,
}

/// `tool.error` keeps at most this many bytes of the error's message: enough to tell errors apart,
/// too little to carry a response body or an argument list that an error happened to include.
pub const MAX_ERROR_MESSAGE_BYTES: usize = 256;

pub(crate) fn bounded_message(error: &dyn fmt::Display) -> String {
    let mut message = error.to_string();
    if message.len() > MAX_ERROR_MESSAGE_BYTES {
        let mut cut = MAX_ERROR_MESSAGE_BYTES - '…'.len_utf8();
        while !message.is_char_boundary(cut) {
            cut -= 1;
        }
        message.truncate(cut);
        message.push('…');
    }
    message
}

/// `s`, or nothing when it is empty.
fn non_empty(s: &str) -> Option<&str> {
    (!s.is_empty()).then_some(s)
}

/// OTLP integers are signed 64-bit; tracing-opentelemetry would turn a `u64` into a string.
fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl Drop for ToolCall {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if std::thread::panicking() {
            self.record_error(&"tool panicked", ERROR_TYPE_PANIC);
        } else {
            self.span.record(TOOL_CANCELLED, true);
            self.record_error(
                &"tool call cancelled before it completed",
                ERROR_TYPE_CANCELLED,
            );
        }
    }
}

#[cfg(any(feature = "rig", feature = "swiftide"))]
/// A pinned future polled inside a call's span: [`ToolCall::scoped`].
pub(crate) struct InScope<'a, F> {
    call: &'a ToolCall,
    fut: Pin<&'a mut F>,
}

#[cfg(any(feature = "rig", feature = "swiftide"))]
impl<F: Future> Future for InScope<'_, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // Both fields are pointers: `InScope` is `Unpin`.
        let this = self.get_mut();
        let fut = this.fut.as_mut();
        this.call.in_scope(|| fut.poll(cx))
    }
}

pin_project_lite::pin_project! {
    /// A tool's future wrapped in its tool-call span; see [`ToolCallBuilder::instrument`].
    #[derive(Debug)]
    #[must_use = "futures do nothing unless polled"]
    pub struct Instrumented<F, K> {
        #[pin]
        inner: F,
        call: Option<ToolCall>,
        kind: PhantomData<fn() -> K>,
    }
}

impl<F, K> Instrumented<F, K> {
    fn new(inner: F, call: ToolCall) -> Self {
        Instrumented {
            inner,
            call: Some(call),
            kind: PhantomData,
        }
    }

    /// The call's span (`None` once the call has ended).
    pub fn span(&self) -> Option<&Span> {
        self.call.as_ref().map(ToolCall::span)
    }
}

impl<F, K, T, E> Future for Instrumented<F, K>
where
    F: Future<Output = Result<T, E>>,
    T: MeasureAs<K>,
    E: fmt::Display,
{
    type Output = Result<T, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let Some(call) = this.call.as_mut() else {
            // Polled after completion: the inner future decides what that means.
            return this.inner.poll(cx);
        };
        let inner = this.inner;
        let polled = call.in_scope(|| catch_unwind(AssertUnwindSafe(|| inner.poll(cx))));
        match polled {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(Ok(value))) => {
                call.finish_with(&value);
                *this.call = None;
                Poll::Ready(Ok(value))
            }
            Ok(Poll::Ready(Err(error))) => {
                call.record_error(&error, type_name::<E>());
                *this.call = None;
                Poll::Ready(Err(error))
            }
            Err(panic) => {
                call.record_panic(&*panic);
                *this.call = None;
                resume_unwind(panic)
            }
        }
    }
}

thread_local! {
    /// The cuts reported to the tool calls running on this thread (`original_bytes + 1`, 0 for
    /// none), innermost last. A plain number per call: entering a call allocates nothing.
    static ACTIVE: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// One call's place on [`ACTIVE`] while it runs; on leaving, the cut reported in the meantime is
/// merged into the call's own cell (so a future polled on several threads keeps every cut).
struct Active<'a> {
    cut: &'a AtomicU64,
}

impl<'a> Active<'a> {
    fn push(cut: &'a AtomicU64) -> Active<'a> {
        ACTIVE.with(|a| a.borrow_mut().push(0));
        Active { cut }
    }
}

impl Drop for Active<'_> {
    fn drop(&mut self) {
        let reported = ACTIVE.with(|a| a.borrow_mut().pop()).unwrap_or(0);
        if reported > 0 {
            self.cut.fetch_max(reported, Ordering::Relaxed);
        }
    }
}

/// Tells the tool call running on this thread (inside [`ToolCallBuilder::run`],
/// [`ToolCallBuilder::instrument`] or [`ToolCall::in_scope`]) that its result was cut from
/// `original_bytes`. Its span then records `tool.result.truncated = true` and
/// `tool.result.original_bytes` (the largest original reported) when it ends.
///
/// Returns whether a tool call was running; outside one this does nothing.
pub fn record_cut(original_bytes: u64) -> bool {
    ACTIVE.with(|a| match a.borrow_mut().last_mut() {
        Some(cut) => {
            *cut = (*cut).max(original_bytes.saturating_add(1));
            true
        }
        None => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_threshold_parsing() {
        assert_eq!(
            large_result_bytes_from_env(None),
            (DEFAULT_LARGE_RESULT_BYTES, Origin::Default)
        );
        assert_eq!(
            large_result_bytes_from_env(Some(" 4096 ".into())),
            (4096, Origin::Env)
        );
        for bad in ["", "abc", "-1", "0", "1.5"] {
            assert_eq!(
                large_result_bytes_from_env(Some(bad.into())),
                (DEFAULT_LARGE_RESULT_BYTES, Origin::Default),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn env_stack_adds_the_measures_of_its_layers() {
        assert_eq!(measures_from_env(None), (Measures::CHEAP, Origin::Default));
        assert_eq!(
            measures_from_env(Some("  ".into())),
            (Measures::CHEAP, Origin::Default)
        );
        assert_eq!(
            measures_from_env(Some("no-such-layer".into())),
            (Measures::CHEAP, Origin::Default),
            "an unknown layer is ignored, not fatal"
        );
        // A catalog layer counting by something other than bytes adds that measure.
        let layer = crate::layers::catalog()
            .iter()
            .find(|l| l.unit == crate::layers::Unit::Lines)
            .expect("the catalog has a layer counting lines");
        let (m, source) = measures_from_env(Some(layer.id.clone()));
        assert_eq!(source, Origin::Env);
        assert!(m.lines, "{m}");
        assert!(m.tokens_estimate, "the cheap measures stay: {m}");
        assert_eq!(Settings::default().measures, Measures::CHEAP);
    }

    #[test]
    fn error_messages_are_bounded_at_a_char_boundary() {
        assert_eq!(bounded_message(&"short"), "short");
        let long = "é".repeat(1000);
        let m = bounded_message(&long);
        assert!(m.len() <= MAX_ERROR_MESSAGE_BYTES, "{}", m.len());
        assert!(m.ends_with('…'));
        assert!(m.starts_with("éé"));
        let exact = "x".repeat(MAX_ERROR_MESSAGE_BYTES);
        assert_eq!(bounded_message(&exact), exact);
    }

    #[test]
    fn record_cut_outside_a_call_does_nothing() {
        assert!(!record_cut(10));
    }
}
