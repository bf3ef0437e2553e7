//! What both transports of `toolsize mcp` share: reading a JSON-RPC message just far enough to
//! know whether it is acted on, checking a `tools/call`'s arguments, and measuring, guarding and
//! tracing its result.
//!
//! A transport hands each client message to [`Proxy::request`] with the [`Context`] it knows
//! (the session, the transport's name, the protocol version its headers carry) and gets back
//! [`Inbound::Forward`] (relay the bytes as they came, keeping the [`Pending`] if one is given)
//! or [`Inbound::Answer`] (the proxy answers; the server never sees the request). The response
//! to a kept request goes to [`Proxy::response`], which returns the bytes to send instead, or
//! `None` to relay it unchanged. Dropping a [`Pending`] that holds a call ends its span as
//! cancelled, so a transport that loses a request (the server exits, the client goes away) only
//! has to drop it.
//!
//! # Protocol revisions
//!
//! Everything that differs between revisions is read from the message itself:
//!
//! * the client's name (for `--host auto`): `initialize`'s `clientInfo` up to 2025-11-25 (kept
//!   in the [`Session`]), or each request's `_meta["io.modelcontextprotocol/clientInfo"]` on
//!   2026-07-28, which has no handshake (a `server/discover` request's is kept in the session
//!   too, for later requests on the same connection that leave it out);
//! * the protocol version on the span: the request's
//!   `_meta["io.modelcontextprotocol/protocolVersion"]`, else the transport's header, else the
//!   `initialize` answer;
//! * the span's parent: W3C `traceparent` / `tracestate` in the request's `_meta`;
//! * `input_required` results (2026-07-28, `resultType: "input_required"`): relayed untouched
//!   and not counted as the call's result. The call is parked, and the client's retry (a new
//!   `tools/call`, under a new id, carrying `requestState` or `inputResponses`) continues it, so
//!   the span ends once, on the final result, with the latency of the whole exchange. A retry
//!   is matched by its `requestState` when the interim result had one, else by the tool and the
//!   arguments' hash from the same client. At most [`MAX_PARKED`] calls wait; the oldest is
//!   ended as cancelled to make room.
//!
//! Methods, fields and result types the proxy does not know are relayed byte for byte.
//!
//! # Limits
//!
//! Each call's limit is resolved when the call starts ([`Applied`]): `--max-output` first; else
//! the host preset (fixed, or chosen from the client's name with `--host auto`), where a tool's
//! own declared allowance replaces the preset's limit for hosts that honour one
//! (`anthropic/maxResultSizeChars` for Claude Code); else the environment, else 16 KiB. The span
//! records the limit and its source (`tool.result.limit_bytes`, `tool.result.limit_source`),
//! and the first call of a tool whose declared allowance applies says so on standard error.
//!
//! Everything here is synchronous and bounded: a message is parsed at most once into a tree,
//! and only when acted on; the maps (schemas, parked calls, logged tools) have fixed caps.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{self, Write};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::guard::ceiling::Policy;
use crate::guard::envelope::Envelope;
use crate::guard::schema::Schema;
use crate::instrument::{McpAttributes, ToolCall};
use crate::semconv::{ERROR_TYPE_TOOL_ERROR, MCP_METHOD_TOOLS_CALL};
use crate::Origin;

use super::host::{self, HostLimits, HostPreset, META_MAX_RESULT_SIZE_CHARS};
use super::result::{self, json_len, Notice};
use super::spill::{self, SPILL_TOOL};
use super::{Options, MAX_ID_BYTES, MAX_TOOLS, MAX_TOOL_NAME_CHARS, META_MAX_OUTPUT};

/// Most calls waiting for the retry of an `input_required` result.
pub(crate) const MAX_PARKED: usize = 1024;

/// Longest client name or protocol version kept.
const MAX_LABEL_CHARS: usize = 64;

/// Which host preset applies.
#[derive(Debug, Clone, Copy)]
pub enum HostChoice {
    /// None: `--max-output`, the environment or the default.
    None,
    /// `--host NAME`.
    Preset(&'static HostPreset),
    /// `--host auto`: chosen per call from the client's name.
    Auto,
}

/// What the proxy knows of one client across its messages: one per stdio connection, one per
/// HTTP session (2025-03-26 to 2025-11-25), or one per request on stateless HTTP.
#[derive(Debug, Default)]
pub(crate) struct Session {
    /// `Mcp-Session-Id`, when the transport has sessions.
    pub(crate) id: Option<String>,
    protocol_version: Mutex<Option<String>>,
    client_name: Mutex<Option<String>>,
    /// Requests whose response stream broke before their response came (HTTP sessions): the
    /// server may replay it on a resumed stream.
    orphans: Mutex<VecDeque<Pending>>,
}

/// Most requests a session keeps waiting for a replayed response; the oldest then ends.
pub(crate) const MAX_ORPHANS: usize = 64;

impl Session {
    /// A session with the id the server gave it.
    pub(crate) fn with_id(id: Option<String>) -> Session {
        Session {
            id,
            ..Session::default()
        }
    }

    /// The protocol version the server answered `initialize` with.
    pub(crate) fn protocol_version(&self) -> Option<String> {
        lock(&self.protocol_version).clone()
    }

    /// The client's name from its `initialize` request.
    pub(crate) fn client_name(&self) -> Option<String> {
        lock(&self.client_name).clone()
    }

    /// Keeps requests whose response may be replayed on a resumed stream.
    pub(crate) fn keep_orphans(&self, pending: Vec<Pending>) {
        let mut orphans = lock(&self.orphans);
        for p in pending {
            if orphans.len() >= MAX_ORPHANS {
                // Ends as cancelled: its response never came back.
                orphans.pop_front();
            }
            orphans.push_back(p);
        }
    }

    /// The requests kept for a resumed stream.
    pub(crate) fn take_orphans(&self) -> Vec<Pending> {
        lock(&self.orphans).drain(..).collect()
    }

    /// Takes over what another session learnt (the `initialize` exchange made before the
    /// server named the session).
    pub(crate) fn adopt(&self, other: &Session) {
        if let Some(v) = other.protocol_version() {
            *lock(&self.protocol_version) = Some(v);
        }
        if let Some(v) = other.client_name() {
            *lock(&self.client_name) = Some(v);
        }
    }
}

/// What the transport knows of one message.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Context<'a> {
    /// The client's session.
    pub(crate) session: &'a Session,
    /// `network.transport`: `pipe` (stdio) or `tcp` (HTTP).
    pub(crate) transport: &'static str,
    /// The protocol version the transport carries (`MCP-Protocol-Version`).
    pub(crate) protocol_version: Option<&'a str>,
}

/// What to do with a client's message.
pub(crate) enum Inbound {
    /// Relay it as it came; keep the pending request, if any, for its response.
    Forward(Option<Pending>),
    /// Answer the client with these bytes (a JSON-RPC response); the server never sees it.
    Answer(Vec<u8>),
}

/// A request whose response the proxy acts on.
pub(crate) struct Pending {
    /// The request's id as JSON text: the key its response is found by.
    pub(crate) key: String,
    kind: PendingKind,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending").field("key", &self.key).finish()
    }
}

enum PendingKind {
    Initialize,
    ToolsList(Option<&'static HostPreset>),
    Call(Box<InFlight>),
}

/// The limit a call's result is held to, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Applied {
    /// The limit in bytes.
    pub(crate) bytes: u64,
    /// The host's warning threshold, if any.
    pub(crate) warn: Option<u64>,
    /// Where it came from (the span's `tool.result.limit_source`).
    pub(crate) source: String,
    /// Whether a tool's declared allowance set it.
    pub(crate) declared: bool,
}

struct InFlight {
    tool: String,
    call: ToolCall,
    limit: Applied,
    /// Whether the request is on a revision whose results carry `resultType` (2026-07-28 on).
    modern: bool,
    /// The key a retry finds it by when the tool answers `input_required` without a
    /// `requestState`.
    retry_key: String,
}

/// What is kept of a listed tool.
#[derive(Default)]
struct ToolInfo {
    schema: Option<Arc<Schema>>,
    declared_chars: Option<u64>,
}

/// The head of a message: its method, id and params, the rest skipped.
#[derive(Deserialize)]
pub(crate) struct Peek<'a> {
    #[serde(default)]
    pub(crate) method: Option<String>,
    #[serde(default)]
    pub(crate) id: Option<Value>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
}

impl Peek<'_> {
    /// `params.name` (or `params.uri`), the value `Mcp-Name` mirrors, when params is an object
    /// holding it.
    pub(crate) fn name(&self) -> Option<String> {
        #[derive(Deserialize)]
        struct Named {
            #[serde(default)]
            name: Option<Value>,
            #[serde(default)]
            uri: Option<Value>,
        }
        let p: Named = serde_json::from_str(self.params?.get()).ok()?;
        match p.name.or(p.uri)? {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// `params._meta`'s protocol version and client name, when present.
    pub(crate) fn meta(&self) -> MetaHead {
        #[derive(Deserialize, Default)]
        struct Params {
            #[serde(rename = "_meta", default)]
            meta: Option<MetaHead>,
        }
        self.params
            .and_then(|p| serde_json::from_str::<Params>(p.get()).ok())
            .and_then(|p| p.meta)
            .unwrap_or_default()
    }
}

/// What `_meta` says of the request's revision and client (2026-07-28).
#[derive(Deserialize, Default, Debug)]
pub(crate) struct MetaHead {
    #[serde(rename = "io.modelcontextprotocol/protocolVersion", default)]
    pub(crate) protocol_version: Option<Value>,
    #[serde(rename = "io.modelcontextprotocol/clientInfo", default)]
    client_info: Option<Value>,
}

impl MetaHead {
    fn client_name(&self) -> Option<String> {
        label(self.client_info.as_ref()?.get("name")?)
    }
    fn version(&self) -> Option<String> {
        label(self.protocol_version.as_ref()?)
    }
}

fn label(v: &Value) -> Option<String> {
    v.as_str()
        .map(|s| s.chars().take(MAX_LABEL_CHARS).collect())
}

/// Parses the head of a message; `None` for anything but a JSON object.
pub(crate) fn peek(msg: &[u8]) -> Option<Peek<'_>> {
    serde_json::from_slice(msg).ok()
}

/// A response, its `result` kept as the bytes the server wrote.
#[derive(Deserialize)]
struct RawResponse<'a> {
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(default)]
    error: Option<serde::de::IgnoredAny>,
}

/// The members of a result read without building it.
#[derive(Deserialize, Default)]
struct ResultFlags {
    #[serde(rename = "isError", default)]
    is_error: Option<bool>,
    #[serde(rename = "resultType", default)]
    result_type: Option<String>,
}

const INPUT_REQUIRED: &str = "input_required";

/// Bytes `,"resultType":"complete"` adds to a result.
const RESULT_TYPE_BYTES: u64 = 24;

/// Whether `version` is a revision whose results carry `resultType` and whose HTTP requests
/// mirror their body in headers (2026-07-28 and later: the dates sort as text).
pub(crate) fn is_modern(version: &str) -> bool {
    version.len() == 10 && version >= "2026-07-28"
}

/// A result the proxy makes itself, with `resultType: "complete"` on revisions that require it.
fn stamped(mut result: Value, modern: bool) -> Value {
    if modern {
        if let Some(obj) = result.as_object_mut() {
            obj.insert("resultType".into(), json!("complete"));
        }
    }
    result
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The key a request is kept by: its id as JSON text (`1` and `"1"` differ).
pub(crate) fn key_of(id: &Value) -> String {
    id.to_string()
}

fn id_text(id: &Value) -> String {
    match id {
        Value::String(s) => s.chars().take(MAX_ID_BYTES).collect(),
        other => other.to_string(),
    }
}

pub(crate) fn bounded_name(name: &str) -> String {
    if name.chars().count() <= MAX_TOOL_NAME_CHARS {
        return name.to_owned();
    }
    let mut s: String = name.chars().take(MAX_TOOL_NAME_CHARS - 1).collect();
    s.push('…');
    s
}

/// A JSON-RPC success response.
pub(crate) fn response(id: &Value, result: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "result": result})).unwrap_or_default()
}

/// A JSON-RPC error response.
pub(crate) fn error_response(id: Option<&Value>, code: i64, message: &str) -> Vec<u8> {
    serde_json::to_vec(
        &json!({"jsonrpc": "2.0", "id": id.cloned().unwrap_or(Value::Null),
                               "error": {"code": code, "message": message}}),
    )
    .unwrap_or_default()
}

/// A request's id as a log field: itself when its JSON text is at most [`MAX_ID_BYTES`], else
/// a note saying it was left out (a client's id is unbounded).
pub(crate) fn log_id(id: Option<&Value>) -> Value {
    match id {
        Some(v) if v.to_string().len() <= MAX_ID_BYTES => v.clone(),
        Some(_) => json!(format!("(an id over {MAX_ID_BYTES} bytes)")),
        None => Value::Null,
    }
}

/// Logs one JSON line on standard error (the MCP stdio transport's log channel).
pub(crate) fn log_line(level: &str, message: &str, fields: Value) {
    let mut line = json!({"level": level, "target": "toolsize::mcp"});
    if let (Some(obj), Value::Object(extra)) = (line.as_object_mut(), fields) {
        obj.extend(extra);
        obj.insert("message".into(), json!(message));
    }
    let _ = writeln!(io::stderr().lock(), "{line}");
}

/// The state both directions of every client share.
pub(crate) struct Proxy {
    opts: Options,
    host: HostChoice,
    /// Each preset resolved once, knobs read at start.
    presets: Vec<(&'static str, HostLimits)>,
    tools: Mutex<HashMap<String, ToolInfo>>,
    parked: Mutex<VecDeque<(String, InFlight)>>,
    logged_tools: Mutex<HashSet<String>>,
    logged_clients: Mutex<HashSet<String>>,
}

impl Proxy {
    /// A proxy with `opts`.
    pub(crate) fn new(opts: Options) -> Proxy {
        let env = |k: &str| std::env::var(k).ok();
        let presets = host::HOSTS
            .iter()
            .map(|h| (h.name, h.limits(&env)))
            .collect();
        Proxy {
            host: opts.host,
            opts,
            presets,
            tools: Mutex::new(HashMap::new()),
            parked: Mutex::new(VecDeque::new()),
            logged_tools: Mutex::new(HashSet::new()),
            logged_clients: Mutex::new(HashSet::new()),
        }
    }

    /// Largest message read whole.
    pub(crate) fn max_message_bytes(&self) -> usize {
        self.opts.max_message_bytes
    }

    /// Time a request waits for its response.
    pub(crate) fn call_timeout(&self) -> Option<std::time::Duration> {
        self.opts.call_timeout
    }

    fn preset_limits(&self, preset: &HostPreset) -> Option<&HostLimits> {
        self.presets
            .iter()
            .find(|(n, _)| *n == preset.name)
            .map(|(_, l)| l)
    }

    /// The preset for a message from `cx`, with `meta` its `_meta` head.
    fn host_for(&self, cx: &Context<'_>, meta: &MetaHead) -> Option<&'static HostPreset> {
        match self.host {
            HostChoice::None => None,
            HostChoice::Preset(p) => Some(p),
            HostChoice::Auto => {
                let name = meta.client_name().or_else(|| cx.session.client_name())?;
                let preset = host::from_client_name(&name);
                let mut logged = lock(&self.logged_clients);
                if logged.len() < MAX_TOOLS && logged.insert(name.clone()) {
                    drop(logged);
                    log_line(
                        "INFO",
                        "Host preset chosen from the client's name.",
                        json!({"client_name": name, "host": preset.map(|p| p.name)}),
                    );
                }
                preset
            }
        }
    }

    /// The limit for a call of `tool` from a client of `host`.
    pub(crate) fn applied(&self, host: Option<&'static HostPreset>, tool: &str) -> Applied {
        let guard = self.opts.guard.limit();
        let limits = host.and_then(|p| self.preset_limits(p));
        let warn = limits.and_then(|l| l.warn_bytes).or(self.opts.warn_bytes);
        if guard.source == Origin::Explicit {
            return Applied {
                bytes: guard.bytes,
                warn,
                source: "--max-output".to_owned(),
                declared: false,
            };
        }
        if let (Some(preset), Some(limits)) = (host, limits) {
            let declared = lock(&self.tools).get(tool).and_then(|t| t.declared_chars);
            if let Some(chars) = host::declared_limit(preset, declared) {
                return Applied {
                    bytes: chars.max(crate::guard::ceiling::MIN_PROXY_LIMIT),
                    warn,
                    source: format!(
                        "{META_MAX_RESULT_SIZE_CHARS} of the tool ({chars} chars, --host {})",
                        preset.name
                    ),
                    declared: true,
                };
            }
            return Applied {
                bytes: limits.limit_bytes,
                warn,
                source: format!("--host {}: {}", preset.name, limits.limit_layer),
                declared: false,
            };
        }
        Applied {
            bytes: guard.bytes,
            warn,
            source: guard.source.to_string(),
            declared: false,
        }
    }

    /// A client's message.
    pub(crate) fn request(&self, msg: &[u8], cx: &Context<'_>) -> Inbound {
        let Some(head) = peek(msg) else {
            return Inbound::Forward(None);
        };
        let (Some(method), Some(id)) = (head.method.as_deref(), head.id.as_ref()) else {
            return Inbound::Forward(None);
        };
        let key = key_of(id);
        let kind = match method {
            "initialize" => {
                if let Ok(v) = serde_json::from_slice::<Value>(msg) {
                    if let Some(name) = v.pointer("/params/clientInfo/name").and_then(label) {
                        *lock(&cx.session.client_name) = Some(name);
                    }
                }
                PendingKind::Initialize
            }
            "server/discover" => {
                // 2026-07-28's handshake: the client's name, kept for the requests on this
                // connection that leave it out of their `_meta` (it is a SHOULD).
                if let Some(name) = head.meta().client_name() {
                    *lock(&cx.session.client_name) = Some(name);
                }
                return Inbound::Forward(None);
            }
            "tools/list" => PendingKind::ToolsList(self.host_for(cx, &head.meta())),
            MCP_METHOD_TOOLS_CALL => match self.call(msg, id, cx) {
                Ok(Some(in_flight)) => PendingKind::Call(Box::new(in_flight)),
                Ok(None) => return Inbound::Forward(None),
                Err(answer) => return Inbound::Answer(answer),
            },
            _ => return Inbound::Forward(None),
        };
        Inbound::Forward(Some(Pending { key, kind }))
    }

    /// A `tools/call` request: `Ok(Some)` to forward and measure, `Ok(None)` to forward
    /// unmeasured, `Err` to answer it here.
    fn call(&self, msg: &[u8], id: &Value, cx: &Context<'_>) -> Result<Option<InFlight>, Vec<u8>> {
        let Ok(msg) = serde_json::from_slice::<Value>(msg) else {
            return Ok(None);
        };
        let Some(name) = msg.pointer("/params/name").and_then(Value::as_str) else {
            return Ok(None);
        };
        let empty = Value::Object(serde_json::Map::new());
        let args = msg.pointer("/params/arguments").unwrap_or(&empty);
        let meta = msg.pointer("/params/_meta");
        let meta_head: MetaHead = meta
            .and_then(|m| serde_json::from_value(m.clone()).ok())
            .unwrap_or_default();
        let tool = bounded_name(name);
        let args_hash = crate::args_hash::span_args_hash(args).ok();
        let client = meta_head
            .client_name()
            .or_else(|| cx.session.client_name())
            .or_else(|| cx.session.id.clone())
            .unwrap_or_default();
        let retry_key = format!(
            "{client}\u{0}{tool}\u{0}{}",
            args_hash.as_deref().unwrap_or("")
        );

        let retried = msg.pointer("/params/requestState").is_some()
            || msg.pointer("/params/inputResponses").is_some();
        let parked = if retried {
            let state = msg.pointer("/params/requestState").and_then(Value::as_str);
            self.unpark(state, &retry_key)
        } else {
            None
        };

        let version = meta_head
            .version()
            .or_else(|| {
                cx.protocol_version
                    .map(|v| v.chars().take(MAX_LABEL_CHARS).collect())
            })
            .or_else(|| cx.session.protocol_version());
        let modern = version.as_deref().is_some_and(is_modern);
        let in_flight = match parked {
            Some(p) => p,
            None => {
                let host = self.host_for(cx, &meta_head);
                let limit = self.applied(host, name);
                let mut builder = crate::tool_call(&tool);
                if let Some(preset) = host {
                    let defaults = crate::instrument::defaults().measures;
                    builder = builder.measures(defaults.union(preset.measures()));
                }
                if let Some(h) = &args_hash {
                    builder = builder.args_hash(h.clone());
                }
                if let Some(bytes) = limit.warn {
                    builder = builder.large_result_bytes(bytes);
                }
                let call = builder.start();
                if let Some(m) = meta {
                    parent_on(&call, m);
                }
                let request_id = id_text(id);
                call.record_mcp(&McpAttributes {
                    method: MCP_METHOD_TOOLS_CALL,
                    request_id: &request_id,
                    session_id: cx.session.id.as_deref(),
                    protocol_version: version.as_deref(),
                    transport: Some(cx.transport),
                });
                call.record_limit(limit.bytes, &limit.source);
                if limit.declared {
                    self.log_declared(&tool, &limit);
                }
                InFlight {
                    tool,
                    call,
                    limit,
                    modern,
                    retry_key,
                }
            }
        };
        let spill_tool = name == SPILL_TOOL && self.opts.guard.policy() == Policy::Spill;
        let in_flight = if self.opts.check_args {
            self.check_args(name, args, in_flight, spill_tool, modern)
                .map_err(|answer| response(id, answer))?
        } else {
            in_flight
        };
        if spill_tool {
            return Err(response(id, self.read_spill(args, in_flight, modern)));
        }
        Ok(Some(in_flight))
    }

    /// The answer to a call whose arguments break the tool's input schema (the spill tool's
    /// own, or the one `tools/list` declared): nothing is sent to the tool, the call's span
    /// fails with the violations' codes and paths, and the answer (`Err`) lists every
    /// violation. The call back when the arguments pass or the tool declared no schema.
    fn check_args(
        &self,
        name: &str,
        args: &Value,
        in_flight: InFlight,
        spill_tool: bool,
        modern: bool,
    ) -> Result<InFlight, Value> {
        let (tool, limit) = (&in_flight.tool, in_flight.limit.bytes);
        let schema = if spill_tool {
            Some(Arc::new(spill_schema(limit)))
        } else {
            lock(&self.tools).get(name).and_then(|t| t.schema.clone())
        };
        let Some(Err(e)) = schema.map(|s| s.validate(args)) else {
            return Ok(in_flight);
        };
        let mut err = e.to_envelope_error();
        err.tool = Some(tool.clone());
        err.hint = Some(format!(
            "Nothing was sent to {tool}. Fix every listed argument and call again."
        ));
        let answer = result::error_result(Envelope::err(err).to_json());
        let answer = stamped(fit_answer(answer, tool, limit, modern), modern);
        // Codes and key paths only: a violation's message may quote a value.
        let summary: Vec<String> = e
            .violations
            .iter()
            .map(|v| format!("{} {}", v.code, v.field))
            .collect();
        in_flight.call.fail(
            &format!("invalid arguments: {}", summary.join(", ")),
            "validation_error",
        );
        Err(answer)
    }

    /// The answer to a call of the spill tool, read here from the spill store within the
    /// call's limit; the call's span ends with it.
    fn read_spill(&self, args: &Value, in_flight: InFlight, modern: bool) -> Value {
        let room = if modern { RESULT_TYPE_BYTES } else { 0 };
        let answer = stamped(
            spill::read(
                self.opts.guard.store().as_ref(),
                args,
                in_flight.limit.bytes - room,
            ),
            modern,
        );
        let bytes = serde_json::to_vec(&answer).unwrap_or_default();
        if answer.get("isError") == Some(&Value::Bool(true)) {
            in_flight
                .call
                .fail(&"spill read refused", ERROR_TYPE_TOOL_ERROR);
        } else {
            in_flight.call.finish(&bytes, false);
        }
        answer
    }

    fn log_declared(&self, tool: &str, limit: &Applied) {
        let mut logged = lock(&self.logged_tools);
        if logged.len() >= MAX_TOOLS || !logged.insert(tool.to_owned()) {
            return;
        }
        drop(logged);
        log_line(
            "INFO",
            "A tool's declared allowance sets its limit.",
            json!({"tool": tool, "limit_bytes": limit.bytes, "limit_source": limit.source}),
        );
    }

    fn park(&self, key: String, in_flight: InFlight) {
        let mut parked = lock(&self.parked);
        if parked.len() >= MAX_PARKED {
            // The oldest ends as cancelled: its client never retried.
            parked.pop_front();
        }
        parked.push_back((key, in_flight));
    }

    fn unpark(&self, state: Option<&str>, retry_key: &str) -> Option<InFlight> {
        let mut parked = lock(&self.parked);
        let at = state
            .and_then(|s| parked.iter().position(|(k, _)| k == s))
            .or_else(|| parked.iter().position(|(k, _)| k == retry_key))?;
        parked.remove(at).map(|(_, p)| p)
    }

    /// The server's response to a kept request: `None` to relay it unchanged, or its
    /// replacement.
    pub(crate) fn response(
        &self,
        msg: &[u8],
        pending: Pending,
        cx: &Context<'_>,
    ) -> Option<Vec<u8>> {
        match pending.kind {
            PendingKind::Initialize => {
                let msg: Value = serde_json::from_slice(msg).ok()?;
                if let Some(v) = msg.pointer("/result/protocolVersion").and_then(label) {
                    *lock(&cx.session.protocol_version) = Some(v);
                }
                None
            }
            PendingKind::ToolsList(host) => self.tools_list(msg, host),
            PendingKind::Call(in_flight) => self.result(msg, *in_flight),
        }
    }

    fn tools_list(&self, line: &[u8], host: Option<&'static HostPreset>) -> Option<Vec<u8>> {
        let mut msg: Value = serde_json::from_slice(line).ok()?;
        let tools = msg.pointer_mut("/result/tools")?.as_array_mut()?;
        {
            let mut known = lock(&self.tools);
            for tool in tools.iter() {
                let Some(name) = tool.get("name").and_then(Value::as_str) else {
                    continue;
                };
                if known.len() >= MAX_TOOLS && !known.contains_key(name) {
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
                known.insert(
                    name.to_owned(),
                    ToolInfo {
                        schema,
                        declared_chars: host::declared_chars(tool),
                    },
                );
            }
        }
        let spill = self.opts.guard.policy() == Policy::Spill;
        if !spill && !self.opts.annotate_tools {
            return None;
        }
        let default_limit = self.applied(host, "").bytes;
        if self.opts.annotate_tools {
            for tool in tools.iter_mut() {
                let name = tool.get("name").and_then(Value::as_str).unwrap_or("");
                let limit = self.applied(host, name).bytes;
                let sentence = match self.opts.guard.policy() {
                    Policy::Reject => format!(" Results over {limit} bytes are refused by toolsize; ask for less (a page, a narrower filter)."),
                    Policy::Truncate => format!(" Results over {limit} bytes are cut by toolsize, marked and described."),
                    Policy::Spill => format!(" Results over {limit} bytes are previewed by toolsize; read the rest with {SPILL_TOOL}."),
                };
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
                tools.push(spill::definition(default_limit));
            }
        }
        serde_json::to_vec(&msg).ok()
    }

    fn result(&self, line: &[u8], in_flight: InFlight) -> Option<Vec<u8>> {
        let limit = in_flight.limit.bytes;
        let Ok(raw) = serde_json::from_slice::<RawResponse<'_>>(line) else {
            in_flight
                .call
                .fail(&"the server's response is not JSON", "invalid_response");
            return None;
        };
        let raw_len = raw.result.map(|r| r.get().len() as u64);
        if let (None, Some(r), Some(len)) = (&raw.error, raw.result, raw_len) {
            let flags = serde_json::from_str::<ResultFlags>(r.get()).unwrap_or_default();
            if flags.result_type.as_deref() == Some(INPUT_REQUIRED) {
                // An interim answer: relayed untouched; the retry continues the call.
                let state = serde_json::from_str::<Value>(r.get()).ok().and_then(|v| {
                    v.get("requestState")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                });
                let key = state.unwrap_or_else(|| in_flight.retry_key.clone());
                self.park(key, in_flight);
                return None;
            }
            // Fast path: a result that fits as the server wrote it is never parsed into a tree.
            if len <= limit {
                let InFlight { call, .. } = in_flight;
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
        let InFlight {
            tool, call, modern, ..
        } = in_flight;
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
        let shaped = self.shape(&tool, result, size, limit, modern);
        let out = serde_json::to_vec(&shaped).unwrap_or_default();
        if is_error {
            call.fail(&"the tool returned an error result", ERROR_TYPE_TOOL_ERROR);
        } else {
            call.finish_truncated(&out, size);
        }
        msg["result"] = shaped;
        serde_json::to_vec(&msg).ok()
    }

    /// A result of `size` bytes, over `limit`, shaped by the policy. A cut keeps the result's
    /// own members (`resultType` among them); a refusal made here is stamped when `modern`.
    fn shape(&self, tool: &str, result: &Value, size: u64, limit: u64, modern: bool) -> Value {
        let refuse = |tool: &str, size: u64, limit: u64| refusal(tool, size, limit, modern);
        match self.opts.guard.policy() {
            Policy::Reject => refuse(tool, size, limit),
            Policy::Truncate => result::cut(result, size, limit, &Notice::Truncated)
                .map_or_else(|| refuse(tool, size, limit), |(v, _)| v),
            Policy::Spill => {
                let text = result::text_view(result);
                match self.opts.guard.store().put(tool, text.as_bytes()) {
                    Ok(id) => {
                        let notice = Notice::Spilled {
                            read_with: format!(
                                "read it in slices with the {SPILL_TOOL} tool: {{\"id\": \"{id}\", \"offset\": 0}}, then each next_offset."
                            ),
                            id,
                        };
                        result::cut(result, size, limit, &notice)
                            .map_or_else(|| refuse(tool, size, limit), |(v, _)| v)
                    }
                    Err(e) => {
                        log_line(
                            "ERROR",
                            "Spilling a tool result failed; it is refused instead.",
                            json!({"tool": tool, "result_bytes": size, "error": e.to_string()}),
                        );
                        refuse(tool, size, limit)
                    }
                }
            }
        }
    }

    /// A kept request answered with no JSON-RPC message (an HTTP error page, a `202`): a call
    /// ends failed with the HTTP status as its `error.type`.
    pub(crate) fn http_failure(&self, pending: Pending, status: u16) {
        if let PendingKind::Call(in_flight) = pending.kind {
            in_flight.call.fail(
                &format!("HTTP status {status} without a JSON-RPC answer"),
                &status.to_string(),
            );
        }
    }

    /// Ends every parked call as cancelled (the proxy is stopping).
    pub(crate) fn end_all(&self) {
        let parked: Vec<_> = lock(&self.parked).drain(..).collect();
        drop(parked);
    }

    /// A kept request that gets no answer from the server (it was too large, the server went
    /// away, the call passed its time): a call's span ends failed with `why` and `error_type`;
    /// anything else is forgotten.
    pub(crate) fn abandon(&self, pending: Pending, why: &str, error_type: &str) {
        if let PendingKind::Call(in_flight) = pending.kind {
            in_flight.call.fail(&why, error_type);
        }
    }
}

/// Parents the call's span on the W3C trace context in a request's `_meta` (`traceparent`,
/// `tracestate`), when it holds a valid one.
fn parent_on(call: &ToolCall, meta: &Value) {
    use opentelemetry::propagation::TextMapPropagator;
    use opentelemetry::trace::TraceContextExt;
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    let Some(traceparent) = meta.get("traceparent").and_then(Value::as_str) else {
        return;
    };
    let mut carrier = HashMap::new();
    carrier.insert("traceparent".to_owned(), traceparent.to_owned());
    if let Some(state) = meta.get("tracestate").and_then(Value::as_str) {
        carrier.insert("tracestate".to_owned(), state.to_owned());
    }
    let cx = opentelemetry_sdk::propagation::TraceContextPropagator::new().extract(&carrier);
    if cx.span().span_context().is_valid() {
        let _ = call.span().set_parent(cx);
    }
}

/// The refusal of a result of `size` bytes, with room for `resultType` when `modern`.
fn refusal(tool: &str, size: u64, limit: u64, modern: bool) -> Value {
    let room = if modern { RESULT_TYPE_BYTES } else { 0 };
    stamped(result::refuse(tool, size, limit - room), modern)
}

/// A validation answer cut to the limit (a huge list of violations loses its tail, marked),
/// with room for `resultType` when `modern`.
fn fit_answer(answer: Value, tool: &str, limit: u64, modern: bool) -> Value {
    let limit = limit - if modern { RESULT_TYPE_BYTES } else { 0 };
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
