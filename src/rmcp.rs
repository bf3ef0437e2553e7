//! One line instruments an [rmcp](https://docs.rs/rmcp) server or client (the official Rust MCP
//! SDK, which emits no span per tool call of its own): every `tools/call` becomes toolsize's
//! tool-call span ([`crate::instrument`]), sized in process, optionally held to a ceiling guard.
//!
//! - **Server**: [`instrument`]`(handler)` wraps any rmcp server service (a `ServerHandler`,
//!   `#[tool_handler]` routers included) and is served in its place:
//!   `toolsize::rmcp::instrument(handler).serve(transport)`. Every other request passes to the
//!   handler untouched.
//! - **Client**: [`CallToolExt::call_tool_sized`] in place of rmcp's `call_tool` on a client's
//!   peer (or its running service).
//!
//! Each call's span carries the tool's name (cut to [`MAX_TOOL_NAME_CHARS`], marked), the
//! arguments' hash (`{}` when the call has none, as `toolsize mcp` hashes it), `mcp.method.name`
//! and `jsonrpc.request.id` (server side), the latency, and the size of the `result` object as it
//! goes over the wire (the bytes of its JSON: `content` and `structuredContent` both count), as
//! `toolsize mcp` measures it. A result with `isError` ends the span failed (`error.type` =
//! `tool_error`, unsized); a JSON-RPC error ends it failed with the code as `error.type`; a call
//! dropped before it ends (the client cancelled it, the connection went away) ends cancelled. An
//! interim answer (`input_required`, a task handle) is not a result: its span ends cancelled and
//! the retry is a call of its own.
//!
//! With a guard ([`Instrumented::guard`], [`CallToolExt::call_tool_guarded`]), a result over the
//! guard's limit is shaped before it leaves (the server) or before the model is handed it (the
//! client), exactly as `toolsize mcp` shapes it: refused (`RESULT_TOO_LARGE` tool error), cut in
//! place with a `RESULT_TRUNCATED` notice, or spilled whole to the guard's store with a
//! `RESULT_SPILLED` notice naming its id (the application reads it back from the store; no tool
//! is added to the server's list). The shaped result is at most the limit; the span records the
//! bytes handed over, `tool.result.truncated` and the original size. A spill that fails refuses
//! the result, loudly (logged), never hands it over whole.
//!
//! On the server the handler is polled inside the call's span (the tool's own spans nest under
//! it, and a cut it reports with `toolsize::record_cut` marks it); on the client the call is not,
//! since the tool runs in the server's process and rmcp's client future opens no span of its own.
//!
//! Under load the cost per call is one vectorized pass over the result's texts, one serialization
//! of the rest into a counting writer, and one arguments hash (`benches/frameworks.rs`); a
//! result that fits is never copied, and up to four text blocks are counted without allocating.
//! The server's span opens with two attributes more than `run_text`'s, `mcp.method.name` and
//! `jsonrpc.request.id`: the first is what readers of the OTel MCP conventions select MCP calls
//! by, the second joins the span to the request in the server's and the client's own logs.
//! Arguments and result content are never recorded or logged: sizes and the hash only. Nothing
//! here panics on any input.

use std::borrow::Cow;
use std::future::Future;
use std::task::Poll;

use ::rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientRequest, ContentBlock, NumberOrString,
    ServerResult,
};
use ::rmcp::service::{NotificationContext, Peer, RequestContext, RoleClient, RoleServer};
use ::rmcp::service::{ServiceError, ServiceRole};
use ::rmcp::{ErrorData, Service};
use serde_json::Value;

use crate::guard::ceiling::CeilingGuard;
use crate::guard::Policy;
use crate::instrument::{McpAttributes, ToolCall};
use crate::mcp_result::{self as result, Notice};
use crate::measure::{json_str_len, Measurement};
use crate::semconv::{ERROR_TYPE_TOOL_ERROR, MCP_METHOD_TOOLS_CALL};

/// Longest tool name recorded on a span; longer names are cut, marked with `…`.
pub const MAX_TOOL_NAME_CHARS: usize = 128;
/// Longest JSON-RPC request id recorded on a span.
pub const MAX_REQUEST_ID_CHARS: usize = 256;

/// Wraps an rmcp server service so that every `tools/call` it answers is measured; serve the
/// result in place of `service`.
pub fn instrument<S>(service: S) -> Instrumented<S> {
    Instrumented {
        inner: service,
        guard: None,
    }
}

/// An rmcp server service whose tool calls are measured (and guarded, with
/// [`guard`](Self::guard)). Built by [`instrument`].
#[derive(Debug, Clone)]
pub struct Instrumented<S> {
    inner: S,
    guard: Option<CeilingGuard>,
}

impl<S> Instrumented<S> {
    /// Holds every result to `guard`'s limit and policy before it leaves the server.
    pub fn guard(mut self, guard: CeilingGuard) -> Self {
        self.guard = Some(guard);
        self
    }

    /// The wrapped service.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

impl<S: Service<RoleServer>> Service<RoleServer> for Instrumented<S> {
    /// A `tools/call` is measured; every other request goes to the handler as it is. The span
    /// opens as the future is made (rmcp makes it in the request's task, right before polling
    /// it), and the request is moved into the handler's future at once: the future returned holds
    /// the handler's future, the call and (with a guard) the tool's name, not the request and its
    /// context a second time (an `async fn` keeps its arguments for its whole life, and rmcp's
    /// request and context are 650 bytes moved with the future).
    fn handle_request(
        &self,
        request: <RoleServer as ServiceRole>::PeerReq,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<ServerResult, ErrorData>> + Send + '_ {
        let ClientRequest::CallToolRequest(call) = &request else {
            return Handled {
                fut: self.inner.handle_request(request, context),
                call: None,
                kept: None,
            };
        };
        let name = bounded_name(&call.params.name);
        // The guard names the tool in what it hands back: the name is kept past the request
        // only then.
        let kept = self.guard.as_ref().map(|g| (g, name.clone().into_owned()));
        let mut number = [0u8; 20];
        let request_id = request_id_text(&context.id, &mut number);
        let mcp = McpAttributes {
            method: MCP_METHOD_TOOLS_CALL,
            request_id,
            session_id: None,
            protocol_version: None,
            transport: None,
        };
        let call = start(&name, &call.params, Some(mcp));
        drop(name);
        Handled {
            fut: self.inner.handle_request(request, context),
            call: Some(call),
            kept,
        }
    }

    fn handle_notification(
        &self,
        notification: <RoleServer as ServiceRole>::PeerNot,
        context: NotificationContext<RoleServer>,
    ) -> impl Future<Output = Result<(), ErrorData>> + Send + '_ {
        self.inner.handle_notification(notification, context)
    }

    fn get_info(&self) -> <RoleServer as ServiceRole>::Info {
        self.inner.get_info()
    }

    fn supported_protocol_versions(
        &self,
    ) -> std::borrow::Cow<'static, [::rmcp::model::ProtocolVersion]> {
        self.inner.supported_protocol_versions()
    }
}

pin_project_lite::pin_project! {
    /// What [`Instrumented`] answers a request with: the handler's future, polled inside the
    /// call's span and its answer measured when the request is a `tools/call` (`call` set),
    /// passed through otherwise. The handler's future (kilobytes) lies in this one, pinned where
    /// it was moved once.
    struct Handled<'g, F> {
        #[pin]
        fut: F,
        call: Option<ToolCall>,
        // The guard, and the tool's name (bounded) it names in what it hands back.
        kept: Option<(&'g CeilingGuard, String)>,
    }
}

impl<F> Future for Handled<'_, F>
where
    F: Future<Output = Result<ServerResult, ErrorData>>,
{
    type Output = F::Output;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let fut = this.fut;
        let answer = match this.call.as_ref() {
            None => return fut.poll(cx),
            Some(call) => match call.in_scope(|| fut.poll(cx)) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(answer) => answer,
            },
        };
        let Some(call) = this.call.take() else {
            return Poll::Ready(answer);
        };
        Poll::Ready(match answer {
            Ok(ServerResult::CallToolResult(r)) => {
                let guard = this.kept.as_ref().map(|(g, name)| (*g, name.as_str()));
                Ok(ServerResult::CallToolResult(settle(call, r, guard)))
            }
            Ok(interim) => {
                drop(call);
                Ok(interim)
            }
            Err(error) => {
                fail_rpc(call, &error);
                Err(error)
            }
        })
    }
}

/// `call_tool` measured on the client side: on a client's [`Peer`] (and so on its running
/// service, which dereferences to it).
pub trait CallToolExt {
    /// rmcp's `call_tool`, with the call measured as toolsize's span.
    fn call_tool_sized(
        &self,
        params: CallToolRequestParams,
    ) -> impl Future<Output = Result<CallToolResult, ServiceError>> + Send;

    /// [`call_tool_sized`](Self::call_tool_sized), with the result held to `guard` before it is
    /// returned (to be handed to the model).
    fn call_tool_guarded(
        &self,
        params: CallToolRequestParams,
        guard: &CeilingGuard,
    ) -> impl Future<Output = Result<CallToolResult, ServiceError>> + Send;
}

impl CallToolExt for Peer<RoleClient> {
    fn call_tool_sized(
        &self,
        params: CallToolRequestParams,
    ) -> impl Future<Output = Result<CallToolResult, ServiceError>> + Send {
        client_call(self, params, None)
    }

    fn call_tool_guarded(
        &self,
        params: CallToolRequestParams,
        guard: &CeilingGuard,
    ) -> impl Future<Output = Result<CallToolResult, ServiceError>> + Send {
        client_call(self, params, Some(guard))
    }
}

async fn client_call(
    peer: &Peer<RoleClient>,
    params: CallToolRequestParams,
    guard: Option<&CeilingGuard>,
) -> Result<CallToolResult, ServiceError> {
    let name = bounded_name(&params.name);
    // The guard names the tool in what it hands back: the name is kept past the request only
    // then.
    let kept = guard.map(|g| (g, name.clone().into_owned()));
    let call = start(&name, &params, None);
    // Not polled inside the span: the tool runs in the server's process, and what this future
    // does (hand the request to rmcp's service task, wait for its answer) opens no span and, at
    // INFO, logs nothing; entering and leaving the span at each poll is two subscriber passes
    // each, for nothing.
    let answer = peer.call_tool(params).await;
    match answer {
        Ok(r) => Ok(settle(
            call,
            r,
            kept.as_ref().map(|(g, name)| (*g, name.as_str())),
        )),
        Err(ServiceError::McpError(error)) => {
            fail_rpc(call, &error);
            Err(ServiceError::McpError(error))
        }
        Err(error) => {
            call.fail(&error, service_error_type(&error));
            Err(error)
        }
    }
}

/// `error.type` of a client call that got no JSON-RPC answer.
fn service_error_type(error: &ServiceError) -> &'static str {
    match error {
        ServiceError::TransportClosed => "server_gone",
        ServiceError::Timeout { .. } => "timeout",
        ServiceError::Cancelled { .. } => "cancelled",
        ServiceError::UnexpectedResponse => "unexpected_response",
        _ => "transport",
    }
}

/// Opens the call's span: name, arguments' hash, and the MCP attributes (server side).
fn start(tool: &str, params: &CallToolRequestParams, mcp: Option<McpAttributes<'_>>) -> ToolCall {
    let empty = serde_json::Map::new();
    let args = params.arguments.as_ref().unwrap_or(&empty);
    let builder = crate::tool_call(tool).args(args);
    match mcp {
        Some(mcp) => builder.mcp(mcp),
        None => builder,
    }
    .start()
}

/// Ends a call answered with a JSON-RPC error: the code, not the message (it may quote the
/// arguments).
fn fail_rpc(call: ToolCall, error: &ErrorData) {
    let code = i64::from(error.code.0);
    call.fail_rpc(&format!("JSON-RPC error {code}"), code);
}

/// Measures a result, shapes it to the guard when it is over the limit, ends the span.
/// `guard`: the guard and the tool's name (bounded) it names in what it hands back.
fn settle(
    call: ToolCall,
    mut r: CallToolResult,
    guard: Option<(&CeilingGuard, &str)>,
) -> CallToolResult {
    if r.is_error == Some(true) {
        call.fail(&"the tool returned an error result", ERROR_TYPE_TOOL_ERROR);
        return r;
    }
    // What goes over the wire: the size is the bytes of this JSON, counted without building it.
    let size = wire_bytes(&mut r);
    let Some((guard, tool)) = guard else {
        match Measurement::of_byte_count(size, call.settings().measures) {
            Some(m) => call.finish_measured(m),
            None => {
                let _ = call.finish_value(&r);
            }
        }
        return r;
    };
    if size <= guard.limit().bytes {
        let _ = call.finish_value(&r);
        return r;
    }
    let mut value = match serde_json::to_value(&r) {
        Ok(value) => value,
        Err(_) => {
            let _ = call.finish_value(&r);
            return r;
        }
    };
    // `resultType` is put back after the shaping, in room kept for it.
    if let Some(members) = value.as_object_mut() {
        members.remove("resultType");
    }
    let room = if r.result_type.is_some() {
        RESULT_TYPE_ROOM
    } else {
        0
    };
    let limit = guard.limit().bytes.saturating_sub(room);
    let mut shaped: CallToolResult =
        serde_json::from_value(shape(guard, tool, &value, size, limit))
            .unwrap_or_else(|_| refused(tool, size, limit));
    shaped.result_type = r.result_type;
    let out = serde_json::to_vec(&shaped).unwrap_or_default();
    call.finish_truncated(&out, size);
    shaped
}

/// A refusal as a typed result (the fallback when a shaped value does not read back).
fn refused(tool: &str, size: u64, limit: u64) -> CallToolResult {
    let text = result::refuse(tool, size, limit);
    serde_json::from_value(text).unwrap_or_else(|_| CallToolResult::error(Vec::new()))
}

/// A result of `size` bytes, over `limit`, shaped by the guard's policy (as `toolsize mcp`
/// shapes it).
fn shape(guard: &CeilingGuard, tool: &str, result: &Value, size: u64, limit: u64) -> Value {
    let refuse = || result::refuse(tool, size, limit);
    match guard.policy() {
        Policy::Reject => refuse(),
        Policy::Truncate => {
            result::cut(result, size, limit, &Notice::Truncated).map_or_else(refuse, |(v, _)| v)
        }
        Policy::Spill => {
            let text = result::text_view(result);
            match guard.store().put(tool, text.as_bytes()) {
                Ok(id) => {
                    let notice = Notice::Spilled {
                        read_with: "the application keeps the whole result under this id."
                            .to_owned(),
                        id,
                    };
                    result::cut(result, size, limit, &notice).map_or_else(refuse, |(v, _)| v)
                }
                Err(error) => {
                    tracing::error!(
                        target: "toolsize",
                        tool,
                        result_bytes = size,
                        error = %error,
                        "Spilling a tool result failed; it is refused instead."
                    );
                    refuse()
                }
            }
        }
    }
}

/// Bytes of `,"resultType":"complete"`, kept free under the limit.
const RESULT_TYPE_ROOM: u64 = 24;

/// Text blocks whose texts [`wire_bytes`] holds aside without allocating; a result with more
/// holds the rest in a vector.
const TEXTS_HELD_INLINE: usize = 4;

/// Bytes of `r` as compact JSON, as it goes over the wire. The texts of its text blocks (most of
/// a result's bytes) are counted by one fast scan ([`json_str_len`]) and taken out of the
/// serialization, which counts the rest; they are put back untouched, nothing is copied (and,
/// up to [`TEXTS_HELD_INLINE`] text blocks, nothing is allocated).
fn wire_bytes(r: &mut CallToolResult) -> u64 {
    let mut inline: [String; TEXTS_HELD_INLINE] = Default::default();
    let mut more = Vec::new();
    let mut text_bytes = 0;
    let mut held = 0;
    for block in &mut r.content {
        if let ContentBlock::Text(t) = block {
            text_bytes += json_str_len(&t.text);
            let text = std::mem::take(&mut t.text);
            match inline.get_mut(held) {
                Some(slot) => *slot = text,
                None => more.push(text),
            }
            held += 1;
        }
    }
    let rest = json_bytes(r);
    let mut texts = inline.into_iter().take(held).chain(more);
    for block in &mut r.content {
        if let ContentBlock::Text(t) = block {
            // As many texts as were taken, in the same order.
            t.text = texts.next().unwrap_or_default();
        }
    }
    rest + text_bytes
}

/// Bytes of `value` as compact JSON, counted without writing them anywhere.
fn json_bytes<T: serde::Serialize>(value: &T) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len() as u64;
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => 0,
    }
}

/// `name`, cut to [`MAX_TOOL_NAME_CHARS`] characters and marked with `…` when it was longer
/// (borrowed when it fits).
fn bounded_name(name: &str) -> Cow<'_, str> {
    if name.len() <= MAX_TOOL_NAME_CHARS || name.chars().count() <= MAX_TOOL_NAME_CHARS {
        return Cow::Borrowed(name);
    }
    let mut s: String = name.chars().take(MAX_TOOL_NAME_CHARS - 1).collect();
    s.push('…');
    Cow::Owned(s)
}

/// The request id as text, cut to [`MAX_REQUEST_ID_CHARS`] characters: a string id borrowed, a
/// number written into `buf` (an `i64` takes at most 20 bytes).
fn request_id_text<'a>(id: &'a NumberOrString, buf: &'a mut [u8; 20]) -> &'a str {
    match id {
        NumberOrString::String(s) => match s.char_indices().nth(MAX_REQUEST_ID_CHARS) {
            Some((end, _)) => &s[..end],
            None => s,
        },
        NumberOrString::Number(n) => {
            use std::io::Write as _;
            let mut out = &mut buf[..];
            let room = out.len();
            // 20 bytes hold every i64 ("-9223372036854775808").
            let _ = write!(out, "{n}");
            let written = room - out.len();
            std::str::from_utf8(&buf[..written]).unwrap_or_default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ::rmcp::model::ContentBlock;

    /// Request ids are recorded as rmcp prints them, cut to the limit on a character boundary.
    #[test]
    fn request_ids_are_bounded_text() {
        let mut buf = [0u8; 20];
        for n in [0, 7, -1, i64::MIN, i64::MAX] {
            let id = NumberOrString::Number(n);
            assert_eq!(request_id_text(&id, &mut buf), id.to_string());
        }
        let long = NumberOrString::String("é".repeat(MAX_REQUEST_ID_CHARS + 5).into());
        let text = request_id_text(&long, &mut buf).to_owned();
        assert_eq!(text.chars().count(), MAX_REQUEST_ID_CHARS);
        let short = NumberOrString::String("req-1".into());
        assert_eq!(request_id_text(&short, &mut buf), "req-1");
    }

    /// The bytes counted are the bytes serde_json writes, and the result is left as it was.
    #[test]
    fn wire_bytes_are_the_serialized_bytes() {
        let mut r = CallToolResult::success(vec![
            ContentBlock::text("plain"),
            ContentBlock::image("aGVsbG8=", "image/png"),
            ContentBlock::text("\"quoted\"\n\u{1}é🦀"),
            ContentBlock::text(""),
        ]);
        r.structured_content = Some(serde_json::json!({"rows": [1, 2], "s": "a\tb"}));
        let before = r.clone();
        let expected = serde_json::to_vec(&r).unwrap().len() as u64;
        assert_eq!(wire_bytes(&mut r), expected);
        assert_eq!(r, before, "the texts are put back");
        let mut many = CallToolResult::success(
            (0..TEXTS_HELD_INLINE * 2 + 1)
                .map(|i| ContentBlock::text(format!("block {i} \"é\"")))
                .collect(),
        );
        let before = many.clone();
        let expected = serde_json::to_vec(&many).unwrap().len() as u64;
        assert_eq!(wire_bytes(&mut many), expected);
        assert_eq!(
            many, before,
            "more texts than held inline are put back in order"
        );
        let mut empty = CallToolResult::success(Vec::new());
        assert_eq!(
            wire_bytes(&mut empty),
            serde_json::to_vec(&empty).unwrap().len() as u64
        );
    }
}
