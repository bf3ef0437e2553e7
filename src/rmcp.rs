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
//! On the server the span opens when rmcp first polls the call's future (at once, in the
//! request's task), and the handler is polled inside it (the tool's own spans nest under it, and
//! a cut it reports with `toolsize::record_cut` marks it); on the client the call is not, since
//! the tool runs in the server's process and rmcp's client future opens no span of its own.
//!
//! Under load the cost per call is one vectorized pass over the result's texts (the rest of the
//! result's size added up from constants, any block other than plain text serialized alone into
//! a counting writer), and one arguments hash written by walking the arguments' map
//! (`benches/frameworks.rs`); a result that fits is never copied, and nothing is allocated to
//! count it. The server's span carries two attributes more than `run_text`'s, `mcp.method.name`
//! and `jsonrpc.request.id`: the first is what readers of the OTel MCP conventions select MCP
//! calls by, the second joins the span to the request in the server's and the client's own
//! logs. They are recorded as the call ends, in the one trip through the subscriber that
//! records its size and latency (on a failed or dropped call, just before it ends).
//! Arguments and result content are never recorded or logged: sizes and the hash only. Nothing
//! here panics on any input.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use ::rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientRequest, ContentBlock, NumberOrString,
    ServerResult,
};
use ::rmcp::service::{NotificationContext, Peer, RequestContext, RoleClient, RoleServer};
use ::rmcp::service::{ServiceError, ServiceRole};
use ::rmcp::{ErrorData, Service};
use serde_json::Value;

use crate::args_hash::span_args_hash_of_map;
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
    /// A `tools/call` is measured; every other request goes to the handler as it is.
    ///
    /// Nothing is done before the future returned is first polled (rmcp makes it in the
    /// request's task and polls it at once): the span opens then, and the handler's future is
    /// made inside this one. Until that poll this future holds only the request and its context,
    /// as the handler's own future does, so that moving it (rmcp moves it into two task-local
    /// scopes and an `.await` first; a runtime's `block_on` moves it too) copies as much as
    /// moving the handler's own future does. Opening the span here and holding the handler's
    /// future in a struct made each such move copy the whole of it, kilobytes.
    #[inline]
    async fn handle_request(
        &self,
        request: <RoleServer as ServiceRole>::PeerReq,
        context: RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        let ClientRequest::CallToolRequest(call) = &request else {
            return self.inner.handle_request(request, context).await;
        };
        let name = bounded_name(&call.params.name);
        // The guard names the tool in what it hands back: the name is kept past the request
        // only then.
        let kept = self.guard.as_ref().map(|g| (g, name.clone().into_owned()));
        // The MCP attributes are recorded when the call ends, in the trip through the
        // subscriber that records its size: at the span's opening each string attribute is
        // copied into a list that holds four before it grows, and a trip of their own costs
        // more than the growth.
        let call = start(&name, &call.params);
        drop(name);
        let id = context.id.clone();
        Handled {
            fut: self.inner.handle_request(request, context),
            call: Some((call, id)),
            kept,
        }
        .await
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
    /// The handler's future of a `tools/call`, polled inside the call's span, its answer
    /// measured when it is ready.
    struct Handled<'g, F> {
        #[pin]
        fut: F,
        // The call, and the request's id it records.
        call: Option<(ToolCall, NumberOrString)>,
        // The guard, and the tool's name (bounded) it names in what it hands back.
        kept: Option<(&'g CeilingGuard, String)>,
    }

    impl<'g, F> PinnedDrop for Handled<'g, F> {
        // A call dropped before its answer (the client cancelled it, the connection went
        // away) ends cancelled, with its MCP attributes.
        fn drop(this: Pin<&mut Self>) {
            if let Some((call, id)) = this.project().call.take() {
                let mut number = itoa::Buffer::new();
                call.record_mcp(&mcp_attributes(&id, &mut number));
            }
        }
    }
}

impl<F> Future for Handled<'_, F>
where
    F: Future<Output = Result<ServerResult, ErrorData>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let fut = this.fut;
        let Some((call, _)) = this.call.as_ref() else {
            return fut.poll(cx);
        };
        // The answer is measured where it lies and handed on as it is (a result the guard
        // shapes is replaced in place): the result is moved once, not through each call.
        let mut polled = call.in_scope(|| fut.poll(cx));
        let Poll::Ready(answer) = &mut polled else {
            return polled;
        };
        let Some((call, id)) = this.call.take() else {
            return polled;
        };
        let mut number = itoa::Buffer::new();
        let mcp = mcp_attributes(&id, &mut number);
        match answer {
            Ok(ServerResult::CallToolResult(r)) => {
                let guard = this.kept.as_ref().map(|(g, name)| (*g, name.as_str()));
                if let Some(shaped) = settle(call, r, guard, Some(&mcp)) {
                    *r = shaped;
                }
            }
            Ok(_interim) => {
                call.record_mcp(&mcp);
                drop(call);
            }
            Err(error) => {
                call.record_mcp(&mcp);
                fail_rpc(call, error);
            }
        }
        polled
    }
}

/// The MCP attributes of a `tools/call` with request id `id` (written into `number` when it is
/// a number).
fn mcp_attributes<'a>(id: &'a NumberOrString, number: &'a mut itoa::Buffer) -> McpAttributes<'a> {
    McpAttributes {
        method: MCP_METHOD_TOOLS_CALL,
        request_id: request_id_text(id, number),
        session_id: None,
        protocol_version: None,
        transport: None,
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
    let call = start(&name, &params);
    // Not polled inside the span: the tool runs in the server's process, and what this future
    // does (hand the request to rmcp's service task, wait for its answer) opens no span and, at
    // INFO, logs nothing; entering and leaving the span at each poll is two subscriber passes
    // each, for nothing.
    let answer = peer.call_tool(params).await;
    match answer {
        Ok(r) => {
            let guard = kept.as_ref().map(|(g, name)| (*g, name.as_str()));
            Ok(settle(call, &r, guard, None).unwrap_or(r))
        }
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

/// Opens the call's span: name and arguments' hash. The arguments are a `serde_json` map: their
/// canonical JSON is written by walking it ([`span_args_hash_of_map`]), the same bytes as
/// through `Serialize` for less work.
fn start(tool: &str, params: &CallToolRequestParams) -> ToolCall {
    let empty = serde_json::Map::new();
    let args = params.arguments.as_ref().unwrap_or(&empty);
    crate::tool_call(tool)
        .args_hashed(span_args_hash_of_map(args))
        .start()
}

/// Ends a call answered with a JSON-RPC error: the code, not the message (it may quote the
/// arguments).
fn fail_rpc(call: ToolCall, error: &ErrorData) {
    let code = i64::from(error.code.0);
    call.fail_rpc(&format!("JSON-RPC error {code}"), code);
}

/// Measures a result, shapes it to the guard when it is over the limit, ends the span; returns
/// the shaped result when the guard changed it (`None`: `r` is handed over as it is).
/// `guard`: the guard and the tool's name (bounded) it names in what it hands back; `mcp`: the
/// MCP attributes the span records as it ends (server side).
fn settle(
    call: ToolCall,
    r: &CallToolResult,
    guard: Option<(&CeilingGuard, &str)>,
    mcp: Option<&McpAttributes<'_>>,
) -> Option<CallToolResult> {
    if r.is_error == Some(true) {
        if let Some(mcp) = mcp {
            call.record_mcp(mcp);
        }
        call.fail(&"the tool returned an error result", ERROR_TYPE_TOOL_ERROR);
        return None;
    }
    // What goes over the wire: the size is the bytes of this JSON, counted without building it.
    let size = wire_bytes(r);
    let measured = Measurement::of_byte_count(size, call.settings().measures);
    if let (None, Some(m), Some(mcp)) = (guard, measured, mcp) {
        // The size, the latency and the MCP attributes in one trip through the subscriber.
        call.finish_measured_mcp(m, mcp);
        return None;
    }
    if let Some(mcp) = mcp {
        call.record_mcp(mcp);
    }
    let Some((guard, tool)) = guard else {
        match measured {
            Some(m) => call.finish_measured(m),
            None => {
                let _ = call.finish_value(r);
            }
        }
        return None;
    };
    if size <= guard.limit().bytes {
        let _ = call.finish_value(r);
        return None;
    }
    let mut value = match serde_json::to_value(r) {
        Ok(value) => value,
        Err(_) => {
            let _ = call.finish_value(r);
            return None;
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
    shaped.result_type = r.result_type.clone();
    let out = serde_json::to_vec(&shaped).unwrap_or_default();
    call.finish_truncated(&out, size);
    Some(shaped)
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

/// Bytes of `r` as compact JSON, as it goes over the wire, added up from its parts: the
/// members' names and punctuation are constants, a text block without `_meta` or annotations is
/// `{"type":"text","text":…}` around its text's escaped length ([`json_str_len`], one fast
/// scan: most of a result's bytes), and every other part (any other block, the structured
/// content, `_meta`) is counted by serializing it alone into a counting writer. Nothing is
/// copied or allocated. The tests hold this equal to `serde_json::to_vec(r).len()` for every
/// kind of content and member.
fn wire_bytes(r: &CallToolResult) -> u64 {
    // `{"content":[` … `]}`
    let mut n = EMPTY_RESULT_BYTES;
    if let Some(t) = &r.result_type {
        // `"resultType":"…",`
        n += RESULT_TYPE_MEMBER_BYTES + json_str_len(t.as_str());
    }
    for (i, block) in r.content.iter().enumerate() {
        n += u64::from(i > 0);
        n += match block {
            ContentBlock::Text(t) if t.meta.is_none() && t.annotations.is_none() => {
                EMPTY_TEXT_BLOCK_BYTES + json_str_len(&t.text)
            }
            other => json_bytes(other),
        };
    }
    if let Some(v) = &r.structured_content {
        // `,"structuredContent":…`
        n += STRUCTURED_CONTENT_MEMBER_BYTES + crate::measure::json_len(v);
    }
    if let Some(e) = r.is_error {
        // `,"isError":true` / `false`
        n += IS_ERROR_MEMBER_BYTES + if e { 4 } else { 5 };
    }
    if let Some(m) = &r.meta {
        // `,"_meta":…`
        n += META_MEMBER_BYTES + json_bytes(m);
    }
    n
}

/// `{"content":[]}`.
const EMPTY_RESULT_BYTES: u64 = 14;
/// `"resultType":"",` around the result type's text.
const RESULT_TYPE_MEMBER_BYTES: u64 = 16;
/// `{"type":"text","text":""}` around the text.
const EMPTY_TEXT_BLOCK_BYTES: u64 = 25;
/// `,"structuredContent":` before the value.
const STRUCTURED_CONTENT_MEMBER_BYTES: u64 = 21;
/// `,"isError":` before `true` or `false`.
const IS_ERROR_MEMBER_BYTES: u64 = 11;
/// `,"_meta":` before the object.
const META_MEMBER_BYTES: u64 = 9;

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
/// number written into `buf` (by `itoa`, without the formatting machinery).
fn request_id_text<'a>(id: &'a NumberOrString, buf: &'a mut itoa::Buffer) -> &'a str {
    match id {
        NumberOrString::String(s) => match s.char_indices().nth(MAX_REQUEST_ID_CHARS) {
            Some((end, _)) => &s[..end],
            None => s,
        },
        NumberOrString::Number(n) => buf.format(*n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ::rmcp::model::ContentBlock;

    /// Request ids are recorded as rmcp prints them, cut to the limit on a character boundary.
    #[test]
    fn request_ids_are_bounded_text() {
        let mut buf = itoa::Buffer::new();
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

    /// The bytes counted from the parts are the bytes serde_json writes, for every kind of
    /// content rmcp has (text plain, escaped, empty, with `_meta`, with annotations; image,
    /// audio, embedded resource as text and as blob, resource link), structured content (an
    /// object, `null`), `isError` either way or absent, `_meta`, and each result type or none.
    #[test]
    fn wire_bytes_are_the_serialized_bytes() {
        use ::rmcp::model::{Annotations, MetaObject, Resource, ResourceContents, ResultType};
        let meta = || {
            let Value::Object(m) = serde_json::json!({"trace": "a\"b", "n": [1, 2.5, null]}) else {
                unreachable!()
            };
            MetaObject(m)
        };
        let mut with_meta = ::rmcp::model::TextContent::new("with _meta");
        with_meta.meta = Some(meta());
        let mut annotated = ::rmcp::model::TextContent::new("annotated é");
        annotated.annotations = Some(Annotations::default().with_priority(0.5));
        let blocks = vec![
            ContentBlock::text("plain"),
            ContentBlock::text("\"quoted\"\n\t\u{1}\u{1f}\\ é漢🦀\u{7f}"),
            ContentBlock::text(""),
            ContentBlock::Text(with_meta),
            ContentBlock::Text(annotated),
            ContentBlock::image("aGVsbG8=", "image/png"),
            ContentBlock::audio("UklGRg==", "audio/wav"),
            ContentBlock::embedded_text("file:///a.txt", "line\nnext \"q\""),
            ContentBlock::resource(ResourceContents::BlobResourceContents {
                uri: "file:///b.bin".into(),
                mime_type: None,
                blob: "AAEC".into(),
                meta: None,
            }),
            ContentBlock::resource_link(Resource::new("file:///c.md", "c")),
        ];
        let mut results = Vec::new();
        for n in [0, 1, 2, blocks.len()] {
            results.push(CallToolResult::success(blocks[..n].to_vec()));
            results.push(CallToolResult::error(blocks[..n].to_vec()));
        }
        let mut structured =
            CallToolResult::structured(serde_json::json!({"rows": [1, 2], "s": "a\tb"}));
        structured.content = blocks.clone();
        results.push(structured);
        results.push(CallToolResult::structured(Value::Null));
        let mut bare = CallToolResult::success(blocks.clone());
        bare.result_type = None;
        bare.is_error = None;
        results.push(bare.clone());
        bare.meta = Some(meta());
        results.push(bare.clone());
        for t in [
            ResultType::COMPLETE,
            ResultType::INPUT_REQUIRED,
            ResultType::TASK,
        ] {
            bare.result_type = Some(t);
            results.push(bare.clone());
        }
        for r in &results {
            let expected = serde_json::to_vec(r).unwrap().len() as u64;
            assert_eq!(
                wire_bytes(r),
                expected,
                "{}",
                serde_json::to_string(r).unwrap()
            );
        }
    }
}
