//! The recognition table: what makes a span a tool span, emitter by emitter ([`RULES`]), and
//! where each emitter puts the tool name, a measured size, the result content, its envelope and
//! the arguments, in precedence order. Data only; [`super::Recognizer`] compiles it once.

use crate::collector::ingest::record::Emitter;
use crate::semconv;

/// One condition of a rule.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Cond {
    /// Attribute present (any value).
    Present(&'static str),
    /// String attribute equal to the value.
    Eq(&'static str, &'static str),
    /// String attribute equal to the value, ASCII case-insensitively.
    EqIgnoreCase(&'static str, &'static str),
    /// String attribute starting with the value.
    Prefix(&'static str, &'static str),
    /// Span name equal to the value.
    NameEq(&'static str),
    /// Span name starting with the value.
    NamePrefix(&'static str),
    /// Instrumentation scope name equal to the value.
    Scope(&'static str),
}

/// A rule: every condition must hold (AND); rules are tried in order.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rule {
    /// The emitter named when the rule matches.
    pub(crate) emitter: Emitter,
    /// Conditions, all required.
    pub(crate) all: &'static [Cond],
}

pub(crate) const OP: &str = semconv::GEN_AI_OPERATION_NAME;

pub(crate) const EXEC: &str = semconv::OPERATION_EXECUTE_TOOL;

/// What makes a span a tool span, first match wins: the most specific emitters first, the
/// generic OTel GenAI semantic conventions (`gen_ai.operation.name = execute_tool`) after them,
/// and the bare `gen_ai.tool.*` fallback last.
#[rustfmt::skip]
pub(crate) const RULES: &[Rule] = &[
    Rule { emitter: Emitter::Toolsize, all: &[Cond::Present(semconv::TOOL_ARGS_HASH), Cond::Eq(OP, EXEC)] },
    Rule { emitter: Emitter::Toolsize, all: &[Cond::Present(semconv::TOOL_RESULT_BYTES)] },
    Rule { emitter: Emitter::Langfuse, all: &[Cond::Eq("langfuse.observation.type", "tool")] },
    Rule { emitter: Emitter::OpenInference, all: &[Cond::EqIgnoreCase("openinference.span.kind", "tool")] },
    Rule { emitter: Emitter::OpenLlmetry, all: &[Cond::Eq("traceloop.span.kind", "tool")] },
    Rule { emitter: Emitter::Mcp, all: &[Cond::Eq("mcp.method.name", "tools/call")] },
    Rule { emitter: Emitter::PydanticAi, all: &[Cond::Eq(OP, EXEC), Cond::Scope("pydantic-ai")] },
    Rule { emitter: Emitter::GoogleAdk, all: &[Cond::Eq(OP, EXEC), Cond::Scope("gcp.vertex.agent")] },
    Rule { emitter: Emitter::Strands, all: &[Cond::Eq(OP, EXEC), Cond::Present("gen_ai.tool.status")] },
    Rule { emitter: Emitter::OtelGenAi, all: &[Cond::Eq(OP, EXEC)] },
    Rule { emitter: Emitter::VercelAi, all: &[Cond::NameEq("ai.toolCall")] },
    Rule { emitter: Emitter::VercelAi, all: &[Cond::Prefix("ai.operationId", "ai.toolCall")] },
    Rule { emitter: Emitter::PydanticAiV1, all: &[Cond::NameEq("running tool")] },
    Rule { emitter: Emitter::OtelGenAi, all: &[Cond::NamePrefix("execute_tool ")] },
    Rule { emitter: Emitter::Mlflow, all: &[Cond::Eq("mlflow.spanType", "\"TOOL\"")] },
    Rule { emitter: Emitter::Mlflow, all: &[Cond::Eq("mlflow.spanType", "TOOL")] },
    Rule { emitter: Emitter::LogfireAgents, all: &[Cond::NamePrefix("Function: ")] },
    Rule { emitter: Emitter::GenAiFallback, all: &[Cond::Present(semconv::GEN_AI_TOOL_NAME)] },
    Rule { emitter: Emitter::GenAiFallback, all: &[Cond::Present(semconv::GEN_AI_TOOL_CALL_ID)] },
];

/// Where the tool name lives, in precedence order; then the span name (see [`name_from_span`]).
pub(crate) const NAME_KEYS: &[&str] = &[
    semconv::GEN_AI_TOOL_NAME,
    semconv::TOOL_NAME,
    "ai.toolCall.name",
    "traceloop.entity.name",
    "name",
];

/// Attributes carrying a size measured by the tool itself, in bytes.
pub(crate) const SIZE_KEYS: &[&str] = &[
    semconv::TOOL_RESULT_BYTES,
    semconv::GEN_AI_TOOL_CALL_RESULT_SIZE,
];

/// Attributes carrying other measures taken by the tool itself (toolsize's span contract), in
/// the field order of [`Measurement`]: read only alongside a measured size, as non-negative ints.
pub(crate) const MEASURE_KEYS: [&str; 6] = [
    semconv::TOOL_RESULT_CHARS,
    semconv::TOOL_RESULT_UTF16_UNITS,
    semconv::TOOL_RESULT_LINES,
    semconv::TOOL_RESULT_JSON_DEPTH,
    semconv::TOOL_RESULT_MAX_STRING_CHARS,
    semconv::TOOL_RESULT_TOKENS_ESTIMATE,
];

/// How content at a key is encoded by its emitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    /// Raw string or JSON: checked as JSON when `output.mime_type` says JSON, or when it starts
    /// with `{` or `[` (see `json_cut` for when such text counts as a cut document).
    Auto,
    /// Always JSON (the emitter `json.dumps` it): a parse failure means it was cut.
    Json,
    /// JSON whose empty map `{}` means "capture off" (Google ADK).
    JsonEmptyIsHidden,
}

/// Where result content lives, in precedence order: the OTel GenAI attribute first, then each
/// instrumentation's own attribute.
pub(crate) const CONTENT_KEYS: &[(&str, Encoding)] = &[
    ("gen_ai.tool.call.result", Encoding::Auto),
    ("output.value", Encoding::Auto),
    ("traceloop.entity.output", Encoding::Json),
    ("tool_response", Encoding::Auto),
    ("ai.toolCall.result", Encoding::Json),
    (
        "gcp.vertex.agent.tool_response",
        Encoding::JsonEmptyIsHidden,
    ),
    ("langfuse.observation.output", Encoding::Auto),
    ("mlflow.spanOutputs", Encoding::Json),
    ("output", Encoding::Auto),
];

/// Span events carrying result content: (event name, attribute), in precedence order (Strands).
pub(crate) const EVENT_CONTENT: &[(&str, &str)] = &[
    ("gen_ai.choice", "message"),
    (
        "gen_ai.client.inference.operation.details",
        "gen_ai.output.messages",
    ),
];

/// Where the arguments live, in precedence order; hashed when `tool.args_hash` is absent.
pub(crate) const ARGS_KEYS: &[&str] = &[
    "gen_ai.tool.call.arguments",
    "input.value",
    "traceloop.entity.input",
    "tool_arguments",
    "ai.toolCall.args",
    "gcp.vertex.agent.tool_call_args",
    "langfuse.observation.input",
    "mlflow.spanInputs",
    "input",
    "tool.parameters",
];

/// Other attributes read.
pub(crate) const OTHER_KEYS: &[&str] = &[
    semconv::TOOL_ARGS_HASH,
    semconv::TOOL_RESULT_TRUNCATED,
    semconv::TOOL_LATENCY_MS,
    semconv::TOOL_ERROR,
    semconv::ERROR_TYPE,
    "error",
    "gen_ai.tool.status",
    "logfire.truncated",
    "output.mime_type",
];

/// Span names of spans that summarise several tool calls (Google ADK's merged span, one per
/// model turn with two or more tool calls): never a tool, never a series.
pub(crate) const SUMMARY_SPAN_NAMES: &[&str] = &["execute_tool (merged)"];

/// Tool names of summarising spans (Google ADK's `(merged tools)`).
pub(crate) const SUMMARY_TOOL_NAMES: &[&str] = &["(merged tools)"];

/// A tracer's own wrapping around the result it records, removed to get the result as the
/// framework handed it to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Envelope {
    /// Recorded as handed over.
    None,
    /// A JSON document of the result: a JSON string is the result's text, decoded (OpenLLMetry's
    /// `json.dumps` with `\uXXXX` escapes; the Vercel AI SDK's `JSON.stringify`). Other JSON is
    /// counted as recorded, its `\uXXXX` escapes of non-ASCII characters as their UTF-8.
    JsonString,
    /// OpenInference's `output.value`: a serialised LangChain `ToolMessage` (`{"type": "tool",
    /// "data": {…}}`, alone, under `output`, or LangChain's `{"lc": 1, "kwargs": …}` form) is
    /// replaced by its `content`; a
    /// JSON string is decoded; anything else is counted as recorded.
    ToolMessage,
    /// Google ADK's `{"result": …}` around a non-dict return value.
    AdkResult,
    /// Strands' content blocks `[{"text": …}, …]`: the texts, concatenated.
    TextParts,
}

/// Where each content attribute's tracer wraps the result ([`Envelope`]); keys not listed are
/// counted as recorded.
pub(crate) const ENVELOPES: &[(&str, Envelope)] = &[
    ("output.value", Envelope::ToolMessage),
    ("traceloop.entity.output", Envelope::JsonString),
    ("ai.toolCall.result", Envelope::JsonString),
    ("gcp.vertex.agent.tool_response", Envelope::AdkResult),
    ("mlflow.spanOutputs", Envelope::JsonString),
];

/// Envelopes of one emitter on a key whose other emitters record the result as handed over: the
/// OTel GenAI attribute holds Google ADK's `{"result": …}` (ADK 2.x with content capture on) and
/// Strands' content blocks (Strands with the latest GenAI conventions opted in).
pub(crate) const EMITTER_ENVELOPES: &[(Emitter, &str, Envelope)] = &[
    (
        Emitter::GoogleAdk,
        "gen_ai.tool.call.result",
        Envelope::AdkResult,
    ),
    (
        Emitter::Strands,
        "gen_ai.tool.call.result",
        Envelope::TextParts,
    ),
];
