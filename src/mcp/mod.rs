//! `toolsize mcp`: a proxy between an MCP client and an MCP server that measures, guards and
//! traces every `tools/call` result, and checks every `tools/call`'s arguments, on either
//! transport: a server it starts on stdio ([`stdio`]), or a server at a URL it forwards
//! Streamable HTTP to ([`http`]).
//!
//! ```text
//! MCP client ──stdin/stdout──▶ toolsize mcp -- CMD ──stdin/stdout──▶ server (child process)
//! MCP client ──POST /mcp─────▶ toolsize mcp --listen A --upstream URL ──▶ server at URL
//! ```
//!
//! # A byte-faithful relay, not a typed SDK
//!
//! Every message the proxy does not act on is relayed **byte for byte** as it came. Each
//! message is only *peeked* at (its `method`, `id` and where needed a few `_meta` keys, the rest
//! skipped unparsed); a full parse happens only for the messages acted on: `tools/call`
//! requests, and the responses to `initialize`, `tools/list` and `tools/call`. The official Rust
//! SDK (`rmcp`) was considered and not used: its typed model deserialises and re-serialises
//! every message, so a proxy built on it would reorder keys, reformat numbers and drop or refuse
//! whatever its pinned protocol version does not model (newer protocol revisions, vendor
//! `_meta`, experimental methods), and would have to negotiate versions itself; it would also
//! add its dependency tree (futures, tokio-util, chrono, …) to a build that needs none of it. A
//! relay that does not understand a message cannot break it, which is also how one proxy speaks
//! 2025-06-18, 2025-11-25 and 2026-07-28 at once (module `proxy` says what differs). Batches (JSON
//! arrays, protocol 2025-03-26) pass through unmeasured.
//!
//! # What it acts on
//!
//! * `tools/list` responses: every tool's `inputSchema` is kept ([`crate::guard::forms`]) to check
//!   later calls, and its declared `_meta["anthropic/maxResultSizeChars"]` for the Claude Code
//!   preset ([`host`]). With `--policy spill` the last page gains the `toolsize_read_spill` tool
//!   ([`spill`]); with `--annotate-tools` every tool gains `_meta["toolsize/maxOutputBytes"]` and
//!   a sentence of its description saying what happens over the limit. Otherwise the response
//!   passes unchanged.
//! * `tools/call` requests: the arguments are checked against the tool's schema (unknown keys with
//!   a "did you mean", wrong types never coerced, limits enforced); a call that fails is answered
//!   by the proxy with a tool error (`isError`) carrying a `VALIDATION_ERROR` envelope listing
//!   every violation, and the server never sees it. A call that passes is forwarded unchanged.
//!   `--no-check-args` turns this off.
//! * `tools/call` results: measured as the bytes of `result` as the server wrote them
//!   (`content` and `structuredContent` both count; a result that fits is not even parsed into a
//!   tree); over the call's limit, refused, cut or spilled (module `result`) so the `result`
//!   object is at most the limit. `input_required` interim results pass untouched. Each call is
//!   one tool-call span ([`crate::instrument`]) with the MCP attributes `mcp.method.name`,
//!   `jsonrpc.request.id`, `mcp.protocol.version`, `mcp.session.id` (HTTP sessions) and
//!   `network.transport` (`pipe` or `tcp`), and the limit applied with its source, parented on
//!   the request's `_meta` trace context, exported by the standard `OTEL_*` variables; arguments
//!   and results are never recorded, only sizes and the arguments' hash.
//!
//! # Under load and failure
//!
//! A message's cost is one scan to peek, plus a parse and one cut for the results acted on, so a
//! client pipelining many calls waits only on its own results. Each transport's module says how
//! it bounds memory and what it does when a peer goes away; what both share is bounded
//! (the calls parked for an `input_required` retry, [`MAX_TOOLS`]). A message that is not JSON is relayed as it is.
//!
//! Both transports are bounded and loud the same way: no message over `--max-message-bytes`
//! ([`DEFAULT_MAX_MESSAGE_BYTES`]) is held whole, and a request the server leaves unanswered
//! (its response over that size, the server gone, `--call-timeout` passed,
//! [`DEFAULT_CALL_TIMEOUT`]) gets the client a JSON-RPC error under its id ([`codes`]) and a
//! line on standard error; the call's span ends failed with an `error.type` saying which.

mod frame;
pub mod host;
pub mod http;
pub(crate) mod proxy;
pub(crate) use crate::mcp_result as result;
pub mod spill;
mod sse;
pub mod stdio;

use std::io;

use crate::guard::ceiling::CeilingGuard;

pub use proxy::HostChoice;
pub use stdio::run;

/// Most `tools/call` requests tracked at once on stdio; more are relayed unmeasured.
pub const MAX_IN_FLIGHT: usize = 4096;
/// Longest JSON-RPC id (as JSON text) tracked; longer ids are relayed unmeasured.
pub const MAX_ID_BYTES: usize = 256;
/// Longest tool name recorded on a span; longer names are cut, marked with `…`.
pub const MAX_TOOL_NAME_CHARS: usize = 128;
/// Most tools whose schemas are kept.
pub const MAX_TOOLS: usize = 10_000;

/// Default largest message the proxy reads whole, either way, on either transport
/// (`--max-message-bytes`): a stdio line, an HTTP request body, a JSON response or SSE event it
/// acts on.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;
/// Smallest `--max-message-bytes` accepted.
pub const MIN_MAX_MESSAGE_BYTES: usize = 64 * 1024;
/// Default time a request waits for its response before the proxy answers it with an error
/// (`--call-timeout`).
pub const DEFAULT_CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// JSON-RPC error codes of the proxy's own answers, as the MCP SDKs number them.
pub mod codes {
    /// The server went away before answering (`ConnectionClosed` in the SDKs).
    pub const CONNECTION_CLOSED: i64 = -32000;
    /// The request passed its time (`RequestTimeout` in the SDKs).
    pub const REQUEST_TIMEOUT: i64 = -32001;
    /// A message over the proxy's maximum message size (JSON-RPC's internal error).
    pub const MESSAGE_TOO_LARGE: i64 = -32603;
    /// A request over the proxy's maximum message size (JSON-RPC's invalid request).
    pub const REQUEST_TOO_LARGE: i64 = -32600;
}

/// `error.type` of a call's span when the proxy answered it with an error.
pub(crate) mod error_types {
    /// The server's response was over the maximum message size.
    pub(crate) const TOO_LARGE: &str = "message_too_large";
    /// The call passed `--call-timeout`.
    pub(crate) const TIMEOUT: &str = "timeout";
    /// The server went away (exited, closed its output, broke its response) before answering.
    pub(crate) const SERVER_GONE: &str = "server_gone";
}

/// The `_meta` key `--annotate-tools` adds to every tool.
pub const META_MAX_OUTPUT: &str = "toolsize/maxOutputBytes";

/// How the proxy behaves.
#[derive(Debug, Clone)]
pub struct Options {
    /// The policy, the spill store, and the limit when no host preset sets one.
    pub guard: CeilingGuard,
    /// The warning threshold in bytes (the span's `tool.large_result` event) when no host
    /// preset sets one.
    pub warn_bytes: Option<u64>,
    /// The host preset.
    pub host: HostChoice,
    /// Check `tools/call` arguments against the tools' schemas.
    pub check_args: bool,
    /// Add the limit to every tool in `tools/list`.
    pub annotate_tools: bool,
    /// Largest message read whole ([`DEFAULT_MAX_MESSAGE_BYTES`]).
    pub max_message_bytes: usize,
    /// Time a request waits for its response; `None`: no limit ([`DEFAULT_CALL_TIMEOUT`]).
    pub call_timeout: Option<std::time::Duration>,
}

/// Why [`run`] failed.
#[derive(Debug)]
pub enum RunError {
    /// The server could not be started.
    Spawn(io::Error),
    /// Relaying failed after the server started (the client went away, a pipe broke).
    Relay(io::Error),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Spawn(e) => write!(f, "cannot start the server: {e}"),
            RunError::Relay(e) => write!(f, "relaying failed: {e}"),
        }
    }
}

impl std::error::Error for RunError {}
