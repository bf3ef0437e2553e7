//! The span emitters recognition knows, one entry each ([`Entry`]): what makes a span the
//! emitter's tool span, and the attributes it writes the tool name, a measured size, the result
//! and the arguments to. Each attribute key is declared once, in the entry of the emitter that
//! writes it (keys every emitter may carry are in [`COMMON`]). Data only: [`super::Recognizer`]
//! compiles it once.
//!
//! Two orders matter. Matching tries the entries in [`EMITTERS`] order, most specific first, the
//! generic OTel GenAI conventions after them and the bare `gen_ai.tool.*` fallback last; the
//! first entry with a matching alternative names the emitter. Reading takes the first attribute
//! present in **reading order**: the entries by their `read` rank, each entry's keys in their
//! order (the OTel GenAI attribute first, then each instrumentation's own), whatever the
//! emitter that matched — a span may carry a generic attribute and its tracer's own.
//!
//! Adding an emitter is adding one entry to `for_each_span_emitter!`: its place in the list is
//! its matching order, its `read` rank its place in the reading order; [`EMITTERS`] and the
//! [`Emitter`] variant (its label) are generated from it, and a test fails when an entry that
//! reads keys has no rank or shares one. The coding agents, which describe a call in logs and
//! span events too, are entries of [`crate::collector::ingest::agents`] instead.

use serde::{Deserialize, Serialize};

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
    /// replaced by its `content`; a JSON string is decoded; anything else is counted as recorded.
    ToolMessage,
    /// Google ADK's `{"result": …}` around a non-dict return value.
    AdkResult,
    /// Strands' content blocks `[{"text": …}, …]`: the texts, concatenated.
    TextParts,
}

/// An attribute holding the result.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Content {
    /// The key.
    pub(crate) key: &'static str,
    /// How the emitter encodes it.
    pub(crate) encoding: Encoding,
    /// The emitter's wrapping around the result, removed before sizing.
    pub(crate) envelope: Envelope,
}

const fn content(key: &'static str, encoding: Encoding, envelope: Envelope) -> Content {
    Content {
        key,
        encoding,
        envelope,
    }
}

/// One emitter of tool spans.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Entry {
    /// The `emitter` label its records carry.
    pub(crate) emitter: Emitter,
    /// What makes a span its tool span: alternatives, each a set of conditions that must all
    /// hold.
    pub(crate) when: &'static [&'static [Cond]],
    /// Attributes naming the tool.
    pub(crate) name: &'static [&'static str],
    /// Attributes carrying a size the tool measured itself, in bytes.
    pub(crate) size: &'static [&'static str],
    /// Attributes holding the result.
    pub(crate) result: &'static [Content],
    /// Span events holding the result: (event name, attribute).
    pub(crate) events: &'static [(&'static str, &'static str)],
    /// Attributes holding the arguments (hashed when `tool.args_hash` is absent).
    pub(crate) args: &'static [&'static str],
    /// Its own wrapping on another emitter's result attribute (when it matched).
    pub(crate) wraps: &'static [(&'static str, Envelope)],
    /// Span names and tool names of its spans that summarise several calls: never a tool.
    pub(crate) summaries: (&'static [&'static str], &'static [&'static str]),
    /// Its rank in the reading order (1 first), when it reads keys of its own.
    pub(crate) read: Option<u8>,
}

/// An entry with nothing but its emitter: fields are filled in with `..NOTHING`.
const NOTHING: Entry = Entry {
    emitter: Emitter::GenAiFallback,
    when: &[],
    name: &[],
    size: &[],
    result: &[],
    events: &[],
    args: &[],
    wraps: &[],
    summaries: (&[], &[]),
    read: None,
};

const OP: &str = semconv::GEN_AI_OPERATION_NAME;
const EXEC: &str = semconv::OPERATION_EXECUTE_TOOL;
/// The OTel GenAI result attribute, which several tracers fill (some with an envelope).
const GEN_AI_RESULT: &str = "gen_ai.tool.call.result";

/// The measures toolsize's span contract carries besides the size, in the field order of
/// [`Measurement`](crate::collector::ingest::record::Measurement): read only alongside a measured
/// size, as non-negative ints.
pub(crate) const MEASURE_KEYS: [&str; 6] = [
    semconv::TOOL_RESULT_CHARS,
    semconv::TOOL_RESULT_UTF16_UNITS,
    semconv::TOOL_RESULT_LINES,
    semconv::TOOL_RESULT_JSON_DEPTH,
    semconv::TOOL_RESULT_MAX_STRING_CHARS,
    semconv::TOOL_RESULT_TOKENS_ESTIMATE,
];

/// The module swiftide's agent opens its tool spans in (swiftide-agents 0.32, `agent.rs`).
const SWIFTIDE_MODULE: &str = "swiftide_agents::agent";

/// The one list of span emitters, in matching order (the most specific first, the generic OTel
/// GenAI conventions after them, the bare `gen_ai.tool.*` fallback last): each entry's doc, its
/// [`Emitter`] variant (its label, snake_case) and its [`Entry`] fields (`..NOTHING` for the
/// rest). `read: Some(n)` is its rank in the reading order, declared on the entry of every
/// emitter that reads keys of its own. Expanded here into [`EMITTERS`] and into the [`Emitter`]
/// enum (which [`crate::collector::ingest::record`] carries), so an emitter is declared in this
/// one place.
macro_rules! for_each_span_emitter {
    ($then:ident) => {
        $then! {
            /// toolsize's own span contract (`crate::instrument`): a measured size and its other
            /// measures.
            Toolsize {
                read: Some(2),
                when: &[
                    &[Cond::Present(semconv::TOOL_ARGS_HASH), Cond::Eq(OP, EXEC)],
                    &[Cond::Present(semconv::TOOL_RESULT_BYTES)],
                ],
                name: &[semconv::TOOL_NAME],
                size: &[semconv::TOOL_RESULT_BYTES],
            }
            /// Langfuse's SDK: an observation of type `tool`.
            Langfuse {
                read: Some(8),
                when: &[&[Cond::Eq("langfuse.observation.type", "tool")]],
                result: &[content(
                    "langfuse.observation.output",
                    Encoding::Auto,
                    Envelope::None,
                )],
                args: &["langfuse.observation.input"],
            }
            /// OpenInference (Arize Phoenix): span kind `TOOL`, the result in `output.value`,
            /// perhaps a serialised LangChain `ToolMessage`.
            OpenInference {
                read: Some(3),
                when: &[&[Cond::EqIgnoreCase("openinference.span.kind", "tool")]],
                result: &[content(
                    "output.value",
                    Encoding::Auto,
                    Envelope::ToolMessage,
                )],
                args: &["input.value"],
            }
            /// OpenLLMetry (traceloop-sdk): span kind `tool`, the result `json.dumps`ed.
            OpenLlmetry {
                read: Some(4),
                when: &[&[Cond::Eq("traceloop.span.kind", "tool")]],
                name: &["traceloop.entity.name"],
                result: &[content(
                    "traceloop.entity.output",
                    Encoding::Json,
                    Envelope::JsonString,
                )],
                args: &["traceloop.entity.input"],
            }
            /// MCP instrumentations (`mcp.method.name = tools/call`), reading the GenAI attributes.
            Mcp {
                when: &[&[Cond::Eq("mcp.method.name", "tools/call")]],
            }
            /// Pydantic AI (format v3 and later): the GenAI conventions under its own scope.
            PydanticAi {
                when: &[&[Cond::Eq(OP, EXEC), Cond::Scope("pydantic-ai")]],
            }
            /// Google ADK: the result in its own attribute, a non-dict wrapped in `{"result": …}`
            /// (also when it fills the GenAI attribute); one merged span per turn with several
            /// calls.
            GoogleAdk {
                read: Some(7),
                when: &[&[Cond::Eq(OP, EXEC), Cond::Scope("gcp.vertex.agent")]],
                result: &[content(
                    "gcp.vertex.agent.tool_response",
                    Encoding::JsonEmptyIsHidden,
                    Envelope::AdkResult,
                )],
                args: &["gcp.vertex.agent.tool_call_args"],
                wraps: &[(GEN_AI_RESULT, Envelope::AdkResult)],
                summaries: (&["execute_tool (merged)"], &["(merged tools)"]),
            }
            /// Strands Agents: the GenAI conventions with `gen_ai.tool.status`; its result as
            /// content blocks, in the GenAI attribute (latest conventions) or a span event.
            Strands {
                when: &[&[Cond::Eq(OP, EXEC), Cond::Present("gen_ai.tool.status")]],
                wraps: &[(GEN_AI_RESULT, Envelope::TextParts)],
            }
            /// The OTel GenAI semantic conventions: `execute_tool` spans.
            OtelGenAi {
                read: Some(1),
                when: &[&[Cond::Eq(OP, EXEC)], &[Cond::NamePrefix("execute_tool ")]],
                name: &[semconv::GEN_AI_TOOL_NAME],
                size: &[semconv::GEN_AI_TOOL_CALL_RESULT_SIZE],
                result: &[content(GEN_AI_RESULT, Encoding::Auto, Envelope::None)],
                // Strands' event, then the latest conventions' inference details (content blocks).
                events: &[
                    ("gen_ai.choice", "message"),
                    (
                        "gen_ai.client.inference.operation.details",
                        "gen_ai.output.messages",
                    ),
                ],
                args: &["gen_ai.tool.call.arguments"],
            }
            /// The Vercel AI SDK: `ai.toolCall` spans, the result `JSON.stringify`ed.
            VercelAi {
                read: Some(6),
                when: &[
                    &[Cond::NameEq("ai.toolCall")],
                    &[Cond::Prefix("ai.operationId", "ai.toolCall")],
                ],
                name: &["ai.toolCall.name"],
                result: &[content(
                    "ai.toolCall.result",
                    Encoding::Json,
                    Envelope::JsonString,
                )],
                args: &["ai.toolCall.args"],
            }
            /// Pydantic AI format v2 (1.x): `running tool` spans.
            PydanticAiV1 {
                read: Some(5),
                when: &[&[Cond::NameEq("running tool")]],
                result: &[content("tool_response", Encoding::Auto, Envelope::None)],
                args: &["tool_arguments"],
            }
            /// MLflow tracing: span type `TOOL` (JSON-quoted by some versions), JSON outputs.
            Mlflow {
                read: Some(9),
                when: &[
                    &[Cond::Eq("mlflow.spanType", "\"TOOL\"")],
                    &[Cond::Eq("mlflow.spanType", "TOOL")],
                ],
                result: &[content(
                    "mlflow.spanOutputs",
                    Encoding::Json,
                    Envelope::JsonString,
                )],
                args: &["mlflow.spanInputs"],
            }
            /// Logfire's OpenAI Agents integration: `Function: {name}` spans with the raw export.
            LogfireAgents {
                read: Some(10),
                when: &[&[Cond::NamePrefix("Function: ")]],
                name: &["name"],
                result: &[content("output", Encoding::Auto, Envelope::None)],
                args: &["input"],
            }
            /// swiftide's agent: a `tool.{name}` span per call, opened in its agent module, with
            /// no tool attribute (the result is only in a DEBUG event, a failure leaves nothing on
            /// the span): each call counted, unsized. The module is read from
            /// tracing-opentelemetry's `code.module.name` (on by default), or its `target`.
            Swiftide {
                when: &[
                    &[Cond::NamePrefix("tool."), Cond::Eq("code.module.name", SWIFTIDE_MODULE)],
                    &[Cond::NamePrefix("tool."), Cond::Eq("target", SWIFTIDE_MODULE)],
                ],
            }
            /// Any span with the bare `gen_ai.tool.*` attributes; `tool.parameters` as the last
            /// resort for the arguments.
            GenAiFallback {
                read: Some(11),
                when: &[
                    &[Cond::Present(semconv::GEN_AI_TOOL_NAME)],
                    &[Cond::Present(semconv::GEN_AI_TOOL_CALL_ID)],
                ],
                args: &["tool.parameters"],
            }
        }
    };
}

/// Declares [`Emitter`]: the span emitters of `for_each_span_emitter!`, in matching order,
/// then the coding agents' (whose entries are in [`crate::collector::ingest::agents`]).
macro_rules! emitter_enum {
    ($($(#[doc = $doc:literal])+ $name:ident { $($entry:tt)* })+) => {
        /// Who emitted a tool span: for a span emitter, the first matching entry of
        /// [`EMITTERS`]. Its label is the variant's name in snake_case.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub(crate) enum Emitter {
            $($(#[doc = $doc])+ $name,)+
            /// Claude Code's own telemetry (`claude_code.tool_result` logs, `claude_code.tool`
            /// spans).
            ClaudeCode,
            /// Codex CLI's own telemetry (`codex.tool_result` span events and logs).
            Codex,
            /// Gemini CLI's own telemetry (`gemini_cli.tool_call` logs, `tool_call` spans).
            GeminiCli,
            /// Qwen Code's own telemetry (Gemini CLI's, prefixed `qwen-code.`).
            QwenCode,
            /// opencode's spans (its `ai.toolCall` and `Tool.execute` spans).
            Opencode,
            /// GitHub Copilot CLI's `execute_tool` spans.
            Copilot,
            /// A `tool_result` log record of another emitter (opencode's OpenTelemetry plugin and
            /// others that mirror Claude Code's events).
            ToolResultLog,
        }
    };
}

for_each_span_emitter!(emitter_enum);

/// Declares [`EMITTERS`] from the one list.
macro_rules! entries {
    ($($(#[doc = $doc:literal])+ $name:ident { $($field:ident: $value:expr,)* })+) => {
        /// Every span emitter, in matching order (the order of `for_each_span_emitter!`).
        pub(crate) const EMITTERS: &[Entry] = &[
            $(Entry {
                emitter: Emitter::$name,
                $($field: $value,)*
                ..NOTHING
            },)+
        ];
    };
}

for_each_span_emitter!(entries);

/// Attributes read on every tool span whatever its emitter.
pub(crate) struct Common {
    /// toolsize's arguments hash (12+ hex digits), used instead of hashing the arguments.
    pub(crate) args_hash: &'static str,
    /// The tool said it truncated its result.
    pub(crate) truncated: &'static str,
    /// The call's latency in milliseconds, instead of the span's duration.
    pub(crate) latency_ms: &'static str,
    /// Attributes whose truthy value marks the call failed.
    pub(crate) errors: [&'static str; 4],
    /// `error` here marks the call failed (Strands and the latest GenAI conventions).
    pub(crate) tool_status: &'static str,
    /// The call's outcome (rig): `error` marks it failed; [`NOT_RUN`] outcomes are no result.
    pub(crate) outcome: &'static str,
    /// Logfire's ingest cut the span's largest values.
    pub(crate) logfire_truncated: &'static str,
    /// The result's MIME type (OpenInference): JSON is checked as JSON.
    pub(crate) mime: &'static str,
}

/// The attributes every emitter may carry.
pub(crate) const COMMON: Common = Common {
    args_hash: semconv::TOOL_ARGS_HASH,
    truncated: semconv::TOOL_RESULT_TRUNCATED,
    latency_ms: semconv::TOOL_LATENCY_MS,
    // rig writes its error kind to `gen_ai.tool.error.type`, with span status UNSET.
    errors: [
        semconv::TOOL_ERROR,
        semconv::ERROR_TYPE,
        "error",
        "gen_ai.tool.error.type",
    ],
    tool_status: "gen_ai.tool.status",
    outcome: "gen_ai.tool.call.outcome",
    logfire_truncated: "logfire.truncated",
    mime: "output.mime_type",
};

impl Common {
    /// Every key.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &'static str> {
        [
            self.args_hash,
            self.truncated,
            self.latency_ms,
            self.tool_status,
            self.outcome,
            self.logfire_truncated,
            self.mime,
        ]
        .into_iter()
        .chain(self.errors)
    }
}

/// Outcomes (`gen_ai.tool.call.outcome`, rig) of a call that did not run: the tool was refused
/// by a hook or policy, or skipped. Neither a result nor a failure of the tool.
pub(crate) const NOT_RUN: [&str; 2] = ["denied", "skipped"];

/// The entries in reading order: those with a rank, by rank, then the entries that read no key
/// of their own, in matching order.
pub(crate) fn reading_order() -> Vec<&'static Entry> {
    let mut ranked: Vec<&Entry> = EMITTERS.iter().filter(|e| e.read.is_some()).collect();
    ranked.sort_by_key(|e| e.read);
    ranked
        .into_iter()
        .chain(EMITTERS.iter().filter(|e| e.read.is_none()))
        .collect()
}

/// One list of every entry's `field`, in reading order, each key once.
pub(crate) fn read_list<T: Copy + 'static>(
    field: impl Fn(&'static Entry) -> &'static [T],
    key: impl Fn(&T) -> &'static str,
) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for e in reading_order() {
        for item in field(e) {
            if !out.iter().any(|o| key(o) == key(item)) {
                out.push(*item);
            }
        }
    }
    out
}

/// Every key a condition reads.
pub(crate) fn cond_keys() -> impl Iterator<Item = &'static str> {
    EMITTERS
        .iter()
        .flat_map(|e| e.when.iter().copied().flatten())
        .filter_map(|c| match *c {
            Cond::Present(k) | Cond::Eq(k, _) | Cond::EqIgnoreCase(k, _) | Cond::Prefix(k, _) => {
                Some(k)
            }
            Cond::NameEq(_) | Cond::NamePrefix(_) | Cond::Scope(_) => None,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each entry that reads keys of its own has a rank of its own in the reading order, the
    /// ranks running from 1 without a gap; an entry that reads none has no rank to give.
    #[test]
    fn every_entry_that_reads_keys_has_one_reading_rank() {
        let mut ranks = Vec::new();
        for e in EMITTERS {
            let label = format!("{:?}", e.emitter);
            let reads_keys = !(e.name.is_empty()
                && e.size.is_empty()
                && e.result.is_empty()
                && e.events.is_empty()
                && e.args.is_empty());
            assert_eq!(e.read.is_some(), reads_keys, "{label}: read rank");
            ranks.extend(e.read);
        }
        ranks.sort_unstable();
        let expected: Vec<u8> = (1..=ranks.len() as u8).collect();
        assert_eq!(ranks, expected, "the read ranks are 1..=n, each once");
        assert_eq!(reading_order().len(), EMITTERS.len());
    }

    /// Each key is declared in one entry only (or in [`COMMON`]).
    #[test]
    fn each_key_is_declared_once() {
        let mut seen: Vec<(&str, String)> = Vec::new();
        let mut declare = |key: &'static str, owner: String| {
            if let Some((_, other)) = seen.iter().find(|(k, _)| *k == key) {
                panic!("{key} is declared by {other} and {owner}");
            }
            seen.push((key, owner));
        };
        for e in EMITTERS {
            let owner = format!("{:?}", e.emitter);
            let keys = e
                .name
                .iter()
                .chain(e.size)
                .copied()
                .chain(e.result.iter().map(|c| c.key))
                .chain(e.args.iter().copied());
            for k in keys {
                declare(k, owner.clone());
            }
        }
        for k in COMMON.keys().chain(MEASURE_KEYS) {
            declare(k, "common".to_string());
        }
    }

    /// The documented result precedence (`docs/collector.md`): the OTel GenAI attribute first,
    /// then each instrumentation's own.
    #[test]
    fn the_reading_order_is_the_documented_precedence() {
        let results: Vec<&str> = read_list(|e| e.result, |c| c.key)
            .iter()
            .map(|c| c.key)
            .collect();
        assert_eq!(
            results,
            [
                "gen_ai.tool.call.result",
                "output.value",
                "traceloop.entity.output",
                "tool_response",
                "ai.toolCall.result",
                "gcp.vertex.agent.tool_response",
                "langfuse.observation.output",
                "mlflow.spanOutputs",
                "output",
            ]
        );
        let args = read_list(|e| e.args, |k| k);
        assert_eq!(args.first(), Some(&"gen_ai.tool.call.arguments"));
        assert_eq!(args.last(), Some(&"tool.parameters"));
        let names = read_list(|e| e.name, |k| k);
        assert_eq!(names[..2], [semconv::GEN_AI_TOOL_NAME, semconv::TOOL_NAME]);
    }
}
