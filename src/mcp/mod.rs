//! `toolsize mcp`: a stdio proxy between an MCP client and an MCP server that measures, guards
//! and traces every `tools/call` result, and checks every `tools/call`'s arguments.
//!
//! ```text
//! MCP client ──stdin──▶ toolsize mcp ──stdin──▶ server (child process)
//! MCP client ◀─stdout── toolsize mcp ◀─stdout── server        (server's stderr: inherited)
//! ```
//!
//! # A byte-faithful relay, not a typed SDK
//!
//! The proxy reads newline-delimited JSON-RPC messages (the MCP stdio transport) on two threads,
//! one per direction, and writes every message it does not act on **byte for byte** as it came.
//! Each line is only *peeked* at (its `method` and `id`, the rest skipped unparsed); a full parse
//! happens only for the messages acted on: `tools/call` requests, and the responses to
//! `initialize`, `tools/list` and `tools/call`. The official Rust SDK (`rmcp`) was considered
//! and not used: its typed model deserialises and re-serialises every message, so a proxy built on
//! it would reorder keys, reformat numbers and drop or refuse whatever its pinned protocol
//! version does not model (newer protocol revisions, vendor `_meta`, experimental methods), and
//! would have to negotiate versions itself; it would also add its dependency tree (futures,
//! tokio-util, chrono, …) to a build that needs none of it. A relay that does not understand a
//! message cannot break it. Batches (JSON arrays, protocol 2025-03-26) pass through unmeasured.
//!
//! # What it acts on
//!
//! * `tools/list` responses: every tool's `inputSchema` is kept ([`crate::guard::forms`]) to check
//!   later calls. With `--policy spill` the last page gains the `toolsize_read_spill` tool
//!   ([`spill`]); with `--annotate-tools` every tool gains `_meta["toolsize/maxOutputBytes"]` and a
//!   sentence of its description saying what happens over the limit. Otherwise the response
//!   passes unchanged.
//! * `tools/call` requests: the arguments are checked against the tool's schema (unknown keys with
//!   a "did you mean", wrong types never coerced, limits enforced); a call that fails is answered
//!   by the proxy with a tool error (`isError`) carrying a `VALIDATION_ERROR` envelope listing
//!   every violation, and the server never sees it. A call that passes is forwarded unchanged.
//!   `--no-check-args` turns this off.
//! * `tools/call` results: measured as the bytes of `result` as the server wrote them
//!   (`content` and `structuredContent` both count; a result that fits is not even parsed into a
//!   tree); over the limit, refused, cut or spilled (module `result`) so the `result` object is at
//!   most the limit. Each call is one tool-call span
//!   ([`crate::instrument`]) with the MCP attributes `mcp.method.name`, `jsonrpc.request.id`,
//!   `mcp.protocol.version` and `network.transport = pipe` (stdio has no `mcp.session.id`),
//!   exported by the standard `OTEL_*` variables; arguments and results are never recorded,
//!   only sizes and the arguments' hash.
//!
//! # Under load and failure
//!
//! Messages are relayed in order in each direction; a message's cost is one scan to peek, plus a
//! parse and one cut for the results acted on, so a client pipelining many calls waits only on
//! its own results. Memory holds one message per direction (a message is read whole; the MCP SDKs
//! bound a message at 4–10 MiB) plus the calls in flight, at most [`MAX_IN_FLIGHT`], keyed by ids
//! of at most [`MAX_ID_BYTES`]: a call past either bound is relayed unmeasured and counted in a
//! warning on standard error, never refused. A line that is not JSON is relayed as it is. When the
//! client closes standard input, the server's is closed; when the server exits, calls still in
//! flight end their spans as cancelled, spans are flushed, and the proxy exits with the server's
//! exit code. A server that cannot be started is a structured `SPAWN_FAILED` error, exit 2.

pub mod host;
pub(crate) mod result;
pub mod spill;

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Deserialize;
use serde_json::{json, Value};

use crate::guard::ceiling::{CeilingGuard, Policy};
use crate::guard::envelope::Envelope;
use crate::guard::schema::Schema;
use crate::instrument::{McpAttributes, ToolCall};
use crate::semconv::{ERROR_TYPE_TOOL_ERROR, MCP_METHOD_TOOLS_CALL};

use result::{json_len, Notice};
use spill::SPILL_TOOL;

/// Most `tools/call` requests tracked at once; more are relayed unmeasured.
pub const MAX_IN_FLIGHT: usize = 4096;
/// Longest JSON-RPC id (as JSON text) tracked; longer ids are relayed unmeasured.
pub const MAX_ID_BYTES: usize = 256;
/// Longest tool name recorded on a span; longer names are cut, marked with `…`.
pub const MAX_TOOL_NAME_CHARS: usize = 128;
/// Most tools whose schemas are kept.
pub const MAX_TOOLS: usize = 10_000;

/// The `_meta` key `--annotate-tools` adds to every tool.
pub const META_MAX_OUTPUT: &str = "toolsize/maxOutputBytes";

/// How the proxy behaves.
#[derive(Debug, Clone)]
pub struct Options {
    /// The limit, the policy and the spill store.
    pub guard: CeilingGuard,
    /// The host's warning threshold in bytes (the span's `tool.large_result` event).
    pub warn_bytes: Option<u64>,
    /// Check `tools/call` arguments against the tools' schemas.
    pub check_args: bool,
    /// Add the limit to every tool in `tools/list`.
    pub annotate_tools: bool,
}

/// The peeked head of a message: its method and id, the rest skipped.
#[derive(Deserialize)]
struct Peek {
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    id: Option<Value>,
}

/// A response, its `result` kept as the bytes the server wrote.
#[derive(Deserialize)]
struct RawResponse<'a> {
    #[serde(borrow, default)]
    result: Option<&'a serde_json::value::RawValue>,
    #[serde(default)]
    error: Option<serde::de::IgnoredAny>,
}

/// The one member of a result read without building it.
#[derive(Deserialize, Default)]
struct ResultFlags {
    #[serde(rename = "isError", default)]
    is_error: Option<bool>,
}

fn peek(line: &[u8]) -> Option<Peek> {
    serde_json::from_slice(line).ok()
}

/// A request whose response the proxy acts on.
enum Pending {
    Initialize,
    ToolsList,
    Call(Box<InFlight>),
}

struct InFlight {
    tool: String,
    call: ToolCall,
}

/// What both directions share.
struct Shared {
    opts: Options,
    pending: Mutex<HashMap<String, Pending>>,
    schemas: Mutex<HashMap<String, Option<Arc<Schema>>>>,
    protocol_version: Mutex<Option<String>>,
    untracked: AtomicU64,
    warned_untracked: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Writes `line` (without its newline) and a newline, and flushes.
fn send(out: &Mutex<impl Write>, line: &[u8]) -> io::Result<()> {
    let mut w = lock(out);
    w.write_all(line)?;
    if !line.ends_with(b"\n") {
        w.write_all(b"\n")?;
    }
    w.flush()
}

fn id_text(id: &Value) -> String {
    match id {
        Value::String(s) => s.chars().take(MAX_ID_BYTES).collect(),
        other => other.to_string(),
    }
}

fn bounded_name(name: &str) -> String {
    if name.chars().count() <= MAX_TOOL_NAME_CHARS {
        return name.to_owned();
    }
    let mut s: String = name.chars().take(MAX_TOOL_NAME_CHARS - 1).collect();
    s.push('…');
    s
}

fn response(id: &Value, result: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "result": result})).unwrap_or_default()
}

/// Logs one JSON line on standard error (the MCP stdio transport's log channel).
fn log_line(level: &str, message: &str, fields: Value) {
    let mut line = json!({"level": level, "target": "toolsize::mcp"});
    if let (Some(obj), Value::Object(extra)) = (line.as_object_mut(), fields) {
        obj.extend(extra);
        obj.insert("message".into(), json!(message));
    }
    let _ = writeln!(io::stderr().lock(), "{line}");
}

impl Shared {
    fn limit(&self) -> u64 {
        self.opts.guard.limit().bytes
    }

    fn track(&self, key: String, pending: Pending) -> bool {
        let mut map = lock(&self.pending);
        if key.len() > MAX_ID_BYTES || (map.len() >= MAX_IN_FLIGHT && !map.contains_key(&key)) {
            drop(map);
            let n = self.untracked.fetch_add(1, Ordering::Relaxed) + 1;
            if !self.warned_untracked.swap(true, Ordering::Relaxed) {
                log_line(
                    "WARN",
                    "A request was relayed unmeasured: too many in flight, or its id is too long. Further ones are counted, not logged.",
                    json!({"untracked": n, "max_in_flight": MAX_IN_FLIGHT, "max_id_bytes": MAX_ID_BYTES}),
                );
            }
            return false;
        }
        map.insert(key, pending);
        true
    }

    /// Client → server. Returns `None` to forward the line unchanged, or the answer to send back
    /// to the client instead.
    fn client_line(&self, line: &[u8]) -> Option<Vec<u8>> {
        let head = peek(line)?;
        let method = head.method.as_deref()?;
        match (method, head.id) {
            ("initialize", Some(id)) => {
                self.track(id.to_string(), Pending::Initialize);
                None
            }
            ("tools/list", Some(id)) => {
                self.track(id.to_string(), Pending::ToolsList);
                None
            }
            ("tools/call", Some(id)) => self.call(line, &id),
            ("notifications/cancelled", None) => {
                let msg: Value = serde_json::from_slice(line).ok()?;
                let id = msg.pointer("/params/requestId")?;
                // Dropping the call ends its span as cancelled.
                let gone = lock(&self.pending).remove(&id.to_string());
                drop(gone);
                None
            }
            _ => None,
        }
    }

    fn call(&self, line: &[u8], id: &Value) -> Option<Vec<u8>> {
        let msg: Value = serde_json::from_slice(line).ok()?;
        let name = msg.pointer("/params/name").and_then(Value::as_str)?;
        let empty = Value::Object(serde_json::Map::new());
        let args = msg.pointer("/params/arguments").unwrap_or(&empty);
        let tool = bounded_name(name);
        let mut builder = crate::tool_call(&tool).args(args);
        if let Some(bytes) = self.opts.warn_bytes {
            builder = builder.large_result_bytes(bytes);
        }
        let call = builder.start();
        let request_id = id_text(id);
        let version = lock(&self.protocol_version).clone();
        call.record_mcp(&McpAttributes {
            method: MCP_METHOD_TOOLS_CALL,
            request_id: &request_id,
            session_id: None,
            protocol_version: version.as_deref(),
            transport: Some("pipe"),
        });

        let spill_tool = name == SPILL_TOOL && self.opts.guard.policy() == Policy::Spill;
        if self.opts.check_args {
            let schema = if spill_tool {
                Some(Arc::new(spill_schema(self.limit())))
            } else {
                lock(&self.schemas).get(name).cloned().flatten()
            };
            if let Some(schema) = schema {
                if let Err(e) = schema.validate(args) {
                    let mut err = e.to_envelope_error();
                    err.tool = Some(tool.clone());
                    err.hint = Some(format!(
                        "Nothing was sent to {tool}. Fix every listed argument and call again."
                    ));
                    let answer = result::error_result(Envelope::err(err).to_json());
                    let answer = fit_answer(answer, &tool, self.limit());
                    // Codes and key paths only: a violation's message may quote a value.
                    let summary: Vec<String> = e
                        .violations
                        .iter()
                        .map(|v| format!("{} {}", v.code, v.field))
                        .collect();
                    call.fail(
                        &format!("invalid arguments: {}", summary.join(", ")),
                        "validation_error",
                    );
                    return Some(response(id, answer));
                }
            }
        }
        if spill_tool {
            let answer = spill::read(self.opts.guard.store().as_ref(), args, self.limit());
            let bytes = serde_json::to_vec(&answer).unwrap_or_default();
            if answer.get("isError") == Some(&Value::Bool(true)) {
                call.fail(&"spill read refused", ERROR_TYPE_TOOL_ERROR);
            } else {
                call.finish(&bytes, false);
            }
            return Some(response(id, answer));
        }
        self.track(
            id.to_string(),
            Pending::Call(Box::new(InFlight { tool, call })),
        );
        None
    }

    /// Server → client. Returns `None` to forward the line unchanged, or its replacement.
    fn server_line(&self, line: &[u8]) -> Option<Vec<u8>> {
        let head = peek(line)?;
        if head.method.is_some() {
            return None;
        }
        let key = head.id?.to_string();
        let pending = lock(&self.pending).remove(&key)?;
        match pending {
            Pending::Initialize => {
                let msg: Value = serde_json::from_slice(line).ok()?;
                if let Some(v) = msg
                    .pointer("/result/protocolVersion")
                    .and_then(Value::as_str)
                {
                    *lock(&self.protocol_version) = Some(v.chars().take(64).collect());
                }
                None
            }
            Pending::ToolsList => self.tools_list(line),
            Pending::Call(in_flight) => self.result(line, *in_flight),
        }
    }

    fn tools_list(&self, line: &[u8]) -> Option<Vec<u8>> {
        let mut msg: Value = serde_json::from_slice(line).ok()?;
        let tools = msg.pointer_mut("/result/tools")?.as_array_mut()?;
        {
            let mut schemas = lock(&self.schemas);
            for tool in tools.iter() {
                let Some(name) = tool.get("name").and_then(Value::as_str) else {
                    continue;
                };
                if schemas.len() >= MAX_TOOLS && !schemas.contains_key(name) {
                    break;
                }
                let schema = match tool.get("inputSchema") {
                    Some(s) => match crate::guard::forms::json_schema(Some(name), s) {
                        Ok(schema) => Some(Arc::new(schema)),
                        Err(e) => {
                            log_line(
                                "WARN",
                                "A tool's inputSchema cannot be read; its arguments are not checked.",
                                json!({"tool": bounded_name(name), "error": e.to_string()}),
                            );
                            None
                        }
                    },
                    None => None,
                };
                schemas.insert(name.to_owned(), schema);
            }
        }
        let spill = self.opts.guard.policy() == Policy::Spill;
        if !spill && !self.opts.annotate_tools {
            return None;
        }
        let limit = self.limit();
        if self.opts.annotate_tools {
            let sentence = match self.opts.guard.policy() {
                Policy::Reject => format!(" Results over {limit} bytes are refused by toolsize; ask for less (a page, a narrower filter)."),
                Policy::Truncate => format!(" Results over {limit} bytes are cut by toolsize, marked and described."),
                Policy::Spill => format!(" Results over {limit} bytes are previewed by toolsize; read the rest with {SPILL_TOOL}."),
            };
            for tool in tools.iter_mut() {
                let Some(obj) = tool.as_object_mut() else {
                    continue;
                };
                let description = obj
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                obj.insert(
                    "description".into(),
                    json!(format!("{description}{sentence}").trim_start()),
                );
                let meta = obj.entry("_meta").or_insert_with(|| json!({}));
                if let Some(m) = meta.as_object_mut() {
                    m.insert(META_MAX_OUTPUT.into(), json!(limit));
                }
            }
        }
        let last_page = msg.pointer("/result/nextCursor").is_none_or(Value::is_null);
        if spill && last_page {
            if let Some(tools) = msg
                .pointer_mut("/result/tools")
                .and_then(Value::as_array_mut)
            {
                tools.push(spill::definition(limit));
            }
        }
        serde_json::to_vec(&msg).ok()
    }

    fn result(&self, line: &[u8], in_flight: InFlight) -> Option<Vec<u8>> {
        let InFlight { tool, call } = in_flight;
        let limit = self.limit();
        // Fast path: a result that fits as the server wrote it is never parsed into a tree.
        let Ok(raw) = serde_json::from_slice::<RawResponse<'_>>(line) else {
            call.fail(&"the server's response is not JSON", "invalid_response");
            return None;
        };
        let raw_len = raw.result.map(|r| r.get().len() as u64);
        if let (None, Some(r), Some(len)) = (&raw.error, raw.result, raw_len) {
            if len <= limit {
                let flags = serde_json::from_str::<ResultFlags>(r.get()).unwrap_or_default();
                if flags.is_error == Some(true) {
                    call.fail(&"the tool returned an error result", ERROR_TYPE_TOOL_ERROR);
                } else if call.span().is_disabled() {
                    // Nobody records the span: nothing to measure.
                    call.finish(b"", false);
                } else {
                    call.finish(r.get().as_bytes(), false);
                }
                return None;
            }
        }
        let Ok(mut msg) = serde_json::from_slice::<Value>(line) else {
            call.fail(&"the server's response is not JSON", "invalid_response");
            return None;
        };
        if let Some(err) = msg.get("error") {
            let code = err.get("code").and_then(Value::as_i64).unwrap_or(0);
            // Not the server's message: it may quote the arguments.
            call.fail_rpc(&format!("JSON-RPC error {code}"), code);
            return None;
        }
        let result = msg.get("result")?;
        // The size as the server wrote it: what the client would have handed on.
        let size = raw_len.unwrap_or_else(|| json_len(result));
        let is_error = result.get("isError") == Some(&Value::Bool(true));
        let shaped = match self.opts.guard.policy() {
            Policy::Reject => result::refuse(&tool, size, limit),
            Policy::Truncate => result::cut(result, size, limit, &Notice::Truncated)
                .map_or_else(|| result::refuse(&tool, size, limit), |(v, _)| v),
            Policy::Spill => {
                let text = result::text_view(result);
                match self.opts.guard.store().put(&tool, text.as_bytes()) {
                    Ok(id) => {
                        let notice = Notice::Spilled {
                            read_with: format!(
                                "read it in slices with the {SPILL_TOOL} tool: {{\"id\": \"{id}\", \"offset\": 0}}, then each next_offset."
                            ),
                            id,
                        };
                        result::cut(result, size, limit, &notice)
                            .map_or_else(|| result::refuse(&tool, size, limit), |(v, _)| v)
                    }
                    Err(e) => {
                        log_line(
                            "ERROR",
                            "Spilling a tool result failed; it is refused instead.",
                            json!({"tool": tool, "result_bytes": size, "error": e.to_string()}),
                        );
                        result::refuse(&tool, size, limit)
                    }
                }
            }
        };
        let out = serde_json::to_vec(&shaped).unwrap_or_default();
        if is_error {
            call.fail(&"the tool returned an error result", ERROR_TYPE_TOOL_ERROR);
        } else {
            call.finish_truncated(&out, size);
        }
        msg["result"] = shaped;
        serde_json::to_vec(&msg).ok()
    }
}

/// A validation answer cut to the limit (a huge list of violations loses its tail, marked).
fn fit_answer(answer: Value, tool: &str, limit: u64) -> Value {
    let size = json_len(&answer);
    if size <= limit {
        return answer;
    }
    result::cut(&answer, size, limit, &Notice::Truncated)
        .map_or_else(|| result::refuse(tool, size, limit), |(v, _)| v)
}

fn spill_schema(limit: u64) -> Schema {
    let def = spill::definition(limit);
    crate::guard::forms::json_schema(Some(SPILL_TOOL), &def["inputSchema"]).unwrap_or_default()
}

/// Copies lines from `input` to `output`, each through `act` (`None`: unchanged).
fn pump(
    input: impl Read,
    mut act: impl FnMut(&[u8]) -> Option<Vec<u8>>,
    mut forward: impl FnMut(&[u8]) -> io::Result<()>,
) -> io::Result<()> {
    let mut reader = BufReader::with_capacity(64 * 1024, input);
    let mut line = Vec::new();
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            return Ok(());
        }
        match act(&line) {
            None => forward(&line)?,
            Some(replacement) => forward(&replacement)?,
        }
    }
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

/// Starts the server, relays until it exits, and returns its exit code (128 + signal when it was
/// killed). When the client goes away first, the server is killed.
pub fn run(opts: Options, program: &OsString, args: &[OsString]) -> Result<u8, RunError> {
    let mut child: Child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(RunError::Spawn)?;
    let shared = Arc::new(Shared {
        opts,
        pending: Mutex::new(HashMap::new()),
        schemas: Mutex::new(HashMap::new()),
        protocol_version: Mutex::new(None),
        untracked: AtomicU64::new(0),
        warned_untracked: AtomicBool::new(false),
    });
    let out = Arc::new(Mutex::new(io::stdout()));
    let pipes = child.stdin.take().zip(child.stdout.take());
    let Some((server_in, server_out)) = pipes else {
        let _ = child.kill();
        return Err(RunError::Spawn(io::Error::other("no pipes to the server")));
    };
    let server_in: ChildStdin = server_in;

    // Client → server. Not joined: it may sit in a read of our stdin after the server is gone.
    {
        let shared = Arc::clone(&shared);
        let out = Arc::clone(&out);
        std::thread::Builder::new()
            .name("mcp-client-in".into())
            .spawn(move || {
                let server_in = Mutex::new(server_in);
                let _ = pump(
                    io::stdin().lock(),
                    |line| {
                        let answer = shared.client_line(line)?;
                        // Answered here: goes back to the client, not on to the server.
                        let _ = send(&out, &answer);
                        Some(Vec::new())
                    },
                    |line| {
                        if line.is_empty() {
                            return Ok(());
                        }
                        let mut w = lock(&server_in);
                        w.write_all(line)?;
                        w.flush()
                    },
                );
                // Closing the server's stdin tells it to exit.
            })
            .map_err(RunError::Relay)?;
    }

    // Server → client, on this thread.
    let relay = pump(
        server_out,
        |line| shared.server_line(line),
        |line| send(&out, line),
    );
    // Calls still in flight end as cancelled.
    let left: Vec<Pending> = lock(&shared.pending).drain().map(|(_, p)| p).collect();
    drop(left);
    if relay.is_err() {
        // The client is gone: nobody will read the server's answers.
        let _ = child.kill();
    }
    let status = child.wait().map_err(RunError::Relay)?;
    relay.map_err(RunError::Relay)?;
    Ok(crate::cli::wrap::exit_code(status))
}
