//! Attribute, event and span names of the toolsize span contract, in one place.
//!
//! Every name the library writes and the collector reads is a constant here, so the two cannot
//! drift apart. The OpenTelemetry GenAI names are used where they exist; `tool.*` names are
//! toolsize's own. The README's "The span" section says when each is present.

/// Span name prefix: a tool-call span is named `execute_tool {tool}`.
pub const SPAN_NAME_PREFIX: &str = "execute_tool";

/// `gen_ai.operation.name`, always [`OPERATION_EXECUTE_TOOL`] on a tool-call span.
pub const GEN_AI_OPERATION_NAME: &str = "gen_ai.operation.name";
/// The value of [`GEN_AI_OPERATION_NAME`] on a tool-call span.
pub const OPERATION_EXECUTE_TOOL: &str = "execute_tool";
/// `gen_ai.tool.name`: the tool's name (OTel GenAI readers).
pub const GEN_AI_TOOL_NAME: &str = "gen_ai.tool.name";
/// `tool.name`: the tool's name again (OpenInference readers).
pub const TOOL_NAME: &str = "tool.name";
/// `gen_ai.tool.call.id`: the caller's id for this call, when it has one.
pub const GEN_AI_TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
/// `tool.args_hash`: first 12 hex digits of the SHA-1 of the arguments' canonical JSON.
pub const TOOL_ARGS_HASH: &str = "tool.args_hash";
/// `tool.result.bytes`: UTF-8 bytes of the serialized result as handed to the model.
/// Absent (not 0) when the tool failed.
pub const TOOL_RESULT_BYTES: &str = "tool.result.bytes";
/// `tool.result.truncated`: whether something cut the result before it reached the model.
pub const TOOL_RESULT_TRUNCATED: &str = "tool.result.truncated";
/// `tool.result.original_bytes`: the full size, when something cut the result and it is known.
pub const TOOL_RESULT_ORIGINAL_BYTES: &str = "tool.result.original_bytes";
/// `tool.result.chars`: Unicode code points of the serialized result.
pub const TOOL_RESULT_CHARS: &str = "tool.result.chars";
/// `tool.result.utf16_units`: UTF-16 code units of the serialized result (JavaScript `length`).
pub const TOOL_RESULT_UTF16_UNITS: &str = "tool.result.utf16_units";
/// `tool.result.lines`: lines of the serialized result.
pub const TOOL_RESULT_LINES: &str = "tool.result.lines";
/// `tool.result.json_depth`: maximum nesting depth, when the result is JSON.
pub const TOOL_RESULT_JSON_DEPTH: &str = "tool.result.json_depth";
/// `tool.result.max_string_chars`: the longest string in the result, in code points.
pub const TOOL_RESULT_MAX_STRING_CHARS: &str = "tool.result.max_string_chars";
/// `tool.result.tokens_estimate`: an estimate of tokens, `ceil(bytes / 4)`; not a tokenizer count.
pub const TOOL_RESULT_TOKENS_ESTIMATE: &str = "tool.result.tokens_estimate";
/// `tool.latency_ms`: wall-clock duration of the call in milliseconds.
pub const TOOL_LATENCY_MS: &str = "tool.latency_ms";
/// `tool.error`: the error's message, on failure.
pub const TOOL_ERROR: &str = "tool.error";
/// `error.type`: the error's type or class, on failure (OTel general convention).
pub const ERROR_TYPE: &str = "error.type";
/// `tool.cancelled`: true when the call was dropped before it finished.
pub const TOOL_CANCELLED: &str = "tool.cancelled";

/// Span event added when a result passes the large-result threshold.
pub const EVENT_LARGE_RESULT: &str = "tool.large_result";
/// Attribute of [`EVENT_LARGE_RESULT`]: the threshold that was passed, in bytes.
pub const LARGE_RESULT_THRESHOLD_BYTES: &str = "tool.large_result.threshold_bytes";

/// `error.type` of a call whose tool panicked.
pub const ERROR_TYPE_PANIC: &str = "panic";
/// `error.type` of a call that was dropped (cancelled) before it finished.
pub const ERROR_TYPE_CANCELLED: &str = "cancelled";

/// `gen_ai.tool.call.result.size`: UTF-8 bytes of the serialized result, measured before
/// truncation (Sentry conventions). The collector reads it as a measured size.
pub const GEN_AI_TOOL_CALL_RESULT_SIZE: &str = "gen_ai.tool.call.result.size";

/// `mcp.method.name`: the MCP method of a call made through `toolsize mcp`, `tools/call`
/// (OTel MCP semantic conventions).
pub const MCP_METHOD_NAME: &str = "mcp.method.name";
/// `mcp.session.id`: the MCP session, when the transport has one (streamable HTTP; never stdio).
pub const MCP_SESSION_ID: &str = "mcp.session.id";
/// `mcp.protocol.version`: the protocol version the server answered `initialize` with.
pub const MCP_PROTOCOL_VERSION: &str = "mcp.protocol.version";
/// `jsonrpc.request.id`: the JSON-RPC id of the `tools/call` request, as text.
pub const JSONRPC_REQUEST_ID: &str = "jsonrpc.request.id";
/// `rpc.response.status_code`: the JSON-RPC error code, as text, when the server answered with an
/// error.
pub const RPC_RESPONSE_STATUS_CODE: &str = "rpc.response.status_code";
/// `tool.result.limit_bytes`: the output limit a proxy held this call's result to, in bytes
/// (`toolsize mcp`).
pub const TOOL_RESULT_LIMIT_BYTES: &str = "tool.result.limit_bytes";
/// `tool.result.limit_source`: where that limit came from: `--max-output`, a host preset's
/// layer, a tool's declared allowance (`anthropic/maxResultSizeChars`), the environment or the
/// default (`toolsize mcp`).
pub const TOOL_RESULT_LIMIT_SOURCE: &str = "tool.result.limit_source";
/// `network.transport`: `pipe` for an MCP server on standard input and output.
pub const NETWORK_TRANSPORT: &str = "network.transport";
/// `error.type` of an MCP tool result with `isError: true` (OTel MCP semantic conventions).
pub const ERROR_TYPE_TOOL_ERROR: &str = "tool_error";
/// The value of [`MCP_METHOD_NAME`] on a tool-call span made by `toolsize mcp`.
pub const MCP_METHOD_TOOLS_CALL: &str = "tools/call";
